import fs from 'node:fs'

/**
 * The store's three files (database, WAL, shared memory) as this process opened them. SQLite keeps
 * its descriptors: a file deleted or renamed over while the service runs is still written, and
 * commits to it were acknowledged although nothing at PLANT_STORE_DB held them (a probe deleted
 * all three and got 300 of 300 creates answered 200, none there after a restart). The writer checks
 * before it answers that each path still names the file this process opened: a link count of 0
 * (deleted) was not enough, since a file renamed away keeps its link and took 200s (another probe).
 */
/** A store file as this process opened it: its path and the inode it named then. */
export interface FileIdentity {
  name: string
  dev: number
  ino: number
}

/** The first file no longer at its path, if any: what is committed from now on is lost. */
export function firstMissing(files: readonly FileIdentity[]): string | undefined {
  return files.find(({ name, dev, ino }) => {
    const now = fs.statSync(name, { throwIfNoEntry: false })
    return now === undefined || now.ino !== ino || now.dev !== dev
  })?.name
}

export class StoreFiles {
  private readonly files: (FileIdentity & { fd: number })[]

  /** Opens them read-only, after refusing a store this process may read but not write. */
  constructor(databasePath: string) {
    this.files = []
    try {
      for (const name of [databasePath, `${databasePath}-wal`, `${databasePath}-shm`]) {
        assertWritable(name)
        // Held open so that the inode cannot be freed and handed to a new file at the same path.
        const fd = fs.openSync(name, 'r')
        const { dev, ino } = fs.fstatSync(fd)
        this.files.push({ name, fd, dev, ino })
      }
    } catch (error) {
      this.close()
      throw error
    }
  }

  /** The first file no longer at its path, if any: what is committed from now on is lost. */
  missing(): string | undefined {
    return firstMissing(this.files)
  }

  get identities(): FileIdentity[] {
    return this.files.map(({ name, dev, ino }) => ({ name, dev, ino }))
  }

  close(): void {
    for (const { fd } of this.files.splice(0)) fs.closeSync(fd)
  }
}

/**
 * SQLite opens a file it may not write read-only without a word, and every write then failed
 * with a 500 while /readyz said ready.
 */
function assertWritable(name: string): void {
  try {
    fs.accessSync(name, fs.constants.W_OK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new Error(`${name} is not writable by this process (${code}): the service must write its store`)
  }
}

import fs from 'node:fs'

/**
 * The store's three files (database, WAL, shared memory) as this process opened them. SQLite keeps
 * its descriptors: a file deleted or renamed over while the service runs is still written, and
 * commits to it were acknowledged although nothing at PLANT_STORE_DB held them (a probe deleted
 * all three and got 300 of 300 creates answered 200, none there after a restart). A file of ours
 * whose link count drops to 0 has left the path; the writer checks that before it answers.
 */
export class StoreFiles {
  private readonly files: { name: string; fd: number }[]

  /** Opens them read-only, after refusing a store this process may read but not write. */
  constructor(databasePath: string) {
    this.files = []
    try {
      for (const name of [databasePath, `${databasePath}-wal`, `${databasePath}-shm`]) {
        assertWritable(name)
        this.files.push({ name, fd: fs.openSync(name, 'r') })
      }
    } catch (error) {
      this.close()
      throw error
    }
  }

  /** The first file no longer at its path, if any: what is committed from now on is lost. */
  missing(): string | undefined {
    return this.files.find(({ fd }) => fs.fstatSync(fd).nlink === 0)?.name
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

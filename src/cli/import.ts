import fs from 'node:fs'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { loadConfig } from '../config.js'
import { ApiError } from '../errors.js'
import { newPlantChecker, plantConflict } from '../routes/new-plant.js'
import type { Plant } from '../storage/storage.js'
import { readLines } from './ndjson-lines.js'
import type { OpenStore } from './open-store.js'
import { CommandError, printError } from './output.js'
import { Progress, count, counted, notice, percent } from './progress.js'

/**
 * Creates in flight at once. The store batches what arrives together (a SQLite group commit, a
 * PostgreSQL multi-row statement), so a wide window is what makes the import fast.
 */
const WINDOW = 8192
/** SQLite creates per group commit for the import's own connection: one fsync per 4096 plants. */
const SQLITE_IMPORT_BATCH = 4096

/** The summary `import` ends with. */
export interface ImportCounts {
  created: number
  present: number
  conflicts: number
  bad: number
}

/**
 * `plant-store import FILE|-`: each line is a POST /plants body, checked by the same parser and
 * schema, and stored by the same createPlant (with its webhook events), so a line is created,
 * already present (the same plant), a conflict (another plant at its id) or bad, and never half
 * stored. Exits 1 when a line was bad or conflicting; running it again is harmless.
 */
export async function importCommand(open: OpenStore, source: string): Promise<void> {
  const config = loadConfig()
  // Before the store is opened (and maybe created): a mistyped FILE must not leave a new store behind.
  const { input, size } = source === '-' ? { input: process.stdin, size: 0 } : openInput(path.resolve(source))
  const storage = await open({
    create: true,
    tune: { sqliteMaxBatch: Math.max(config.sqliteMaxBatch, SQLITE_IMPORT_BATCH) },
  })
  const check = newPlantChecker()
  const counts: ImportCounts = { created: 0, present: 0, conflicts: 0, bad: 0 }
  const reports = new LineReports()
  const progress = new Progress('importing')
  const inFlight = new Set<Promise<void>>()
  // The store failing (a full disk, a lost database) stops the import; the lines stored so far
  // stay, and running it again counts them as already present.
  let failure: unknown
  const store = (plant: Plant, line: number) => {
    const report = reports.expect(line)
    const tracked: Promise<void> = storage
      .createPlant(plant)
      .then(
        (outcome) => {
          if (outcome.kind === 'created') counts.created++
          else if (outcome.kind === 'replayed') counts.present++
          else {
            counts.conflicts++
            return report(plantConflict(plant, outcome.existing).message)
          }
          report()
        },
        (error: unknown) => {
          failure ??= error
          report()
        },
      )
      .finally(() => inFlight.delete(tracked))
    inFlight.add(tracked)
  }
  let lastLine = 0
  for await (const line of readLines(input, config.bodyLimit)) {
    lastLine = line.number
    if (line.tooLong) {
      counts.bad++
      reports.expect(line.number)(`body must not be larger than ${config.bodyLimit} bytes (BODY_LIMIT)`)
      continue
    }
    // A blank line (a trailing one, say) is no plant, and no mistake either.
    if (line.bytes.toString('latin1').trim() === '') continue
    let plant: Plant
    try {
      plant = check(line.bytes)
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      counts.bad++
      reports.expect(line.number)(error.message)
      continue
    }
    store(plant, line.number)
    if (inFlight.size >= WINDOW) await Promise.race(inFlight)
    if (failure !== undefined) break
    const done = counts.created + counts.present + counts.conflicts + counts.bad
    const read = 'bytesRead' in input ? (input.bytesRead as number) : 0
    progress.update(`${counted(done, 'line')}${size > 0 ? `, ${percent(read, size)}` : ''}`)
  }
  await Promise.all(inFlight)
  if (failure !== undefined) {
    progress.done()
    throw new CommandError(
      `the store failed after line ${lastLine}, so the import stopped: ${(failure as Error).message ?? String(failure)}; ` +
        `${counted(counts.created, 'plant')} ${counts.created === 1 ? 'was' : 'were'} created; run it again to finish (what is stored counts as already present)`,
    )
  }
  progress.done('done')
  printError(
    `imported: ${count(counts.created)} created, ${count(counts.present)} already present, ` +
      `${counted(counts.conflicts, 'conflict')}, ${counted(counts.bad, 'bad line')}`,
  )
  if (counts.conflicts + counts.bad > 0) {
    const skipped = counts.conflicts + counts.bad
    throw new CommandError(
      `${counted(skipped, 'line')} ${skipped === 1 ? 'was' : 'were'} not imported (see above)`,
    )
  }
}

/**
 * Opens FILE, a regular file or a pipe (`import <(zcat plants.ndjson.gz)`); a directory opens
 * without error on Linux and would fail only once read, after the store was created.
 */
function openInput(file: string): { input: Readable; size: number } {
  let fd: number
  let stat: fs.Stats
  try {
    fd = fs.openSync(file, 'r')
    stat = fs.fstatSync(fd)
  } catch (error) {
    throw new CommandError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
  }
  if (!stat.isFile() && !stat.isFIFO()) {
    fs.closeSync(fd)
    const what = stat.isDirectory() ? 'a directory' : 'not a regular file'
    throw new CommandError(
      `cannot read ${file}: it is ${what}; import reads an NDJSON file, or - for standard input`,
    )
  }
  return { input: fs.createReadStream('', { fd }), size: stat.size }
}

/**
 * The problems reported in line order. A bad line is known at once, a conflict only when its
 * create comes back from the store, after later lines were read: each line awaited is queued, and
 * a report waits for the lines before it.
 */
class LineReports {
  private queue: { line: number; done: boolean; message: string | undefined }[] = []
  private head = 0

  /** Queues `line`; the function returned settles it, with its problem if it had one. */
  expect(line: number): (message?: string) => void {
    const entry = { line, done: false, message: undefined as string | undefined }
    this.queue.push(entry)
    return (message) => {
      entry.done = true
      entry.message = message
      this.flush()
    }
  }

  private flush(): void {
    while (this.head < this.queue.length && this.queue[this.head]?.done) {
      const entry = this.queue[this.head++] as { line: number; message: string | undefined }
      if (entry.message !== undefined) notice(`line ${entry.line}: ${entry.message}`)
    }
    if (this.head > 4096) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
  }
}

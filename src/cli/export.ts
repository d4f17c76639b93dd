import fs from 'node:fs'
import path from 'node:path'
import type { Writable } from 'node:stream'
import type { OpenStore } from './open-store.js'
import { CommandError, escapeControls, printError } from './output.js'
import { Progress, counted } from './progress.js'

/** Plants read per page: large enough to amortise the query, small enough for constant memory. */
const PAGE = 10_000

/**
 * `plant-store export [FILE|-]`: every plant as one line of NDJSON, in id order, ids exact. Pages
 * are read by keyset, so memory stays constant and the store serves meanwhile; a plant created or
 * deleted during the export may or may not be in it (`backup` gives a point-in-time copy).
 */
export async function exportCommand(
  open: OpenStore,
  target = '-',
  values: { force?: boolean } = {},
): Promise<void> {
  const storage = await open()
  const file = target === '-' ? undefined : path.resolve(target)
  const out: Writable = file ? openOutput(file, values.force === true) : process.stdout
  const progress = new Progress('exporting')
  let exported = 0
  let after: bigint | undefined
  for (;;) {
    const page = await storage.exportPlants(after, PAGE)
    if (page.lines.length === 0) break
    // The reader of standard output going away (`| head`) ends the export quietly, as it ends a listing.
    // On standard output (a terminal, maybe) DEL and C1 in a name are \u escapes: the same JSON value.
    const text = `${page.lines.join('\n')}\n`
    if ((await write(out, file ? text : escapeControls(text))) === 'closed') return
    exported += page.lines.length
    after = page.lastId
    progress.update(counted(exported, 'plant'))
  }
  if (file) await close(out)
  progress.done(counted(exported, 'plant'))
  printError(`exported ${counted(exported, 'plant')}${file ? ` to ${file}` : ''}`)
}

const { O_WRONLY, O_CREAT, O_EXCL, O_TRUNC, O_NOFOLLOW } = fs.constants

/**
 * A new file private to its owner, as a backup is; with `--force` an existing one is truncated,
 * but never through a symbolic link (O_NOFOLLOW), which could point at any file this user may write.
 */
function openOutput(file: string, force: boolean): Writable {
  const flags = O_WRONLY | O_CREAT | (force ? O_TRUNC | O_NOFOLLOW : O_EXCL)
  try {
    return fs.createWriteStream(file, { fd: fs.openSync(file, flags, 0o600) })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new CommandError(`${file} already exists; choose a new file or pass --force`)
    if (code === 'ELOOP')
      throw new CommandError(
        `${file} is a symbolic link; export --force does not follow one, name the file itself`,
      )
    throw new CommandError(`cannot write ${file}: ${code ?? (error as Error).message}`)
  }
}

/**
 * Writes, waiting while the reader is behind. A failed stream (a full disk) rejects; a pipe whose
 * reader has gone (EPIPE) resolves `closed`.
 */
function write(out: Writable, text: string): Promise<'written' | 'closed'> {
  return new Promise((resolve, reject) => {
    const fail = (error: NodeJS.ErrnoException) =>
      error.code === 'EPIPE'
        ? resolve('closed')
        : reject(new CommandError(`could not write the export: ${error.code ?? error.message}`))
    out.once('error', fail)
    const settle = () => {
      out.off('error', fail)
      resolve('written')
    }
    if (out.write(text)) settle()
    else out.once('drain', settle)
  })
}

function close(out: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    out.once('error', (error) => reject(new CommandError(`could not write the export: ${error.message}`)))
    out.end(() => resolve())
  })
}

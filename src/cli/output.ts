/** Thrown for a wrong command line; main.ts prints it with the usage and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** C0 controls but \n and \t, DEL, and the C1 controls (CSI U+009B and OSC U+009D among them). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

/**
 * Text for a terminal that may hold what came from outside (a receiver's answer, a plant or token
 * name, a URL, a delivery error): each control character but \n and \t is written `\u00XX`, as
 * JSON writes it, so no escape sequence reaches the terminal (a new title, a cleared screen, OSC 52
 * writing the clipboard) and JSON text keeps its value. Every line the CLI prints goes through it.
 */
export const escapeControls = (text: string): string =>
  text.replace(CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

/** A line on standard output. */
export const print = (line: string): void => {
  process.stdout.write(`${escapeControls(line)}\n`)
}

/** A line on standard output whose outside text is escaped already, and may hold colour. */
export const printEscaped = (line: string): void => {
  process.stdout.write(`${line}\n`)
}

/** A line on standard error (a message, a summary, an error). */
export const printError = (line: string): void => {
  process.stderr.write(`${escapeControls(line)}\n`)
}

/**
 * Prints a secret shown only once, and returns only once it is written. When it could not be (a
 * full disk, a closed pipe), `undo` revokes what the secret was for, rather than leave a token or
 * subscription whose secret nobody has, and says what it did; the command then fails with that.
 */
export async function printSecret(secret: string, what: string, undo: () => Promise<string>): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      process.stdout.write(`${secret}\n`, (error) => (error ? reject(error) : resolve()))
    })
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error)
    throw new CommandError(`could not write ${what} to standard output (${reason}); ${await undo()}`)
  }
}

/** Why standard output could not be written: `EPIPE` when the reader left (`| head`), say. */
let stdoutFailure: NodeJS.ErrnoException | undefined

/**
 * Keeps a failed write to standard output from crashing the CLI with a stack trace (an 'error'
 * event nobody listened to); `stdoutFailed` says afterwards what became of the output.
 */
export function watchStdout(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    stdoutFailure ??= error
  })
}

/**
 * Waits for what was written to standard output, then gives the error that stopped it, unless
 * the reader merely closed its end early (EPIPE: `| head` took what it wanted).
 */
export async function stdoutFailed(): Promise<NodeJS.ErrnoException | undefined> {
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()))
  return stdoutFailure?.code === 'EPIPE' ? undefined : stdoutFailure
}

/** Fixed-width columns for humans; scripts use --json. */
export function table(raw: Record<string, string>[], columns: string[]): string {
  // Escaped before measuring, so the columns line up as printed.
  const rows = raw.map((row) =>
    Object.fromEntries(Object.entries(row).map(([k, v]) => [k, escapeControls(v)])),
  )
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => (row[column] ?? '').length)),
  )
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [
    line(columns.map((c) => c.toUpperCase())),
    ...rows.map((row) => line(columns.map((c) => row[c] ?? ''))),
  ].join('\n')
}

/** A command that understood its arguments but could not do what was asked; exits 1. */
export class CommandError extends Error {
  override name = 'CommandError'
}

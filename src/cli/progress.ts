import { escapeControls } from './output.js'

/**
 * A progress line on stderr for commands that take long, redrawn in place at most ten times a
 * second. Only when stderr is a terminal: a log file or a pipe gets nothing extra.
 */
export class Progress {
  private readonly enabled = process.stderr.isTTY === true
  private readonly started = Date.now()
  private lastDrawn = 0
  private drawn = false
  private line = ''
  /** The progress line on the terminal now, if any. */
  static drawing: Progress | undefined

  constructor(private readonly label: string) {}

  /** `text` follows the label: `1,200,000 plants, 45%`. */
  update(text: string, force = false): void {
    if (!this.enabled) return
    const now = Date.now()
    if (!force && now - this.lastDrawn < 100) return
    this.lastDrawn = now
    this.drawn = true
    this.line = escapeControls(`${this.label}: ${text}`)
    Progress.drawing = this
    process.stderr.write(`\r\x1b[2K${this.line}`)
  }

  /** Writes `text` as a line of its own above the progress line, which is drawn again below it. */
  interrupt(text: string): void {
    process.stderr.write(`\r\x1b[2K${escapeControls(text)}\n${this.line}`)
  }

  /** Ends the line (with `text`, when given) so what follows starts on a fresh one. */
  done(text?: string): void {
    if (!this.enabled) return
    if (text !== undefined) this.update(`${text} in ${seconds(Date.now() - this.started)}`, true)
    if (this.drawn) process.stderr.write('\n')
    if (Progress.drawing === this) Progress.drawing = undefined
  }
}

/** A line for the operator on stderr, kept clear of a progress line being drawn. */
export function notice(text: string): void {
  if (Progress.drawing) Progress.drawing.interrupt(text)
  else process.stderr.write(`${escapeControls(text)}\n`)
}

/** `12.3 s`. */
export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`

/** `1,234,567`. */
export const count = (n: number): string => n.toLocaleString('en-US')

/** `1 delivery`, `2 deliveries`, `1,000 plants`: a count with its noun agreeing. */
export const counted = (n: number, singular: string, plural = `${singular}s`): string =>
  `${count(n)} ${n === 1 ? singular : plural}`

/** `45%` of `done` out of `total`; empty when the total is unknown. */
export const percent = (done: number, total: number): string =>
  total > 0 ? `${Math.min(100, Math.floor((done / total) * 100))}%` : ''

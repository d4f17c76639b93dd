import type { Readable } from 'node:stream'

/** One line of input, without its line break; `tooLong` when it was cut at the limit. */
export interface Line {
  number: number
  bytes: Buffer
  tooLong: boolean
}

/**
 * The lines of `input` as raw bytes (so the importer, like the API, can refuse invalid UTF-8
 * rather than read it as U+FFFD), numbered from 1. A line longer than `maxBytes` is not kept
 * whole: its first bytes come with `tooLong`, so one endless line cannot fill memory.
 */
export async function* readLines(input: Readable, maxBytes: number): AsyncGenerator<Line> {
  let number = 0
  let pending: Buffer[] = []
  let pendingBytes = 0
  let tooLong = false
  const take = (part: Buffer) => {
    if (tooLong) return
    if (pendingBytes + part.length > maxBytes) {
      tooLong = true
      return
    }
    pending.push(part)
    pendingBytes += part.length
  }
  const finish = (): Line => {
    let bytes = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending)
    if (bytes.at(-1) === 0x0d) bytes = bytes.subarray(0, -1)
    const line = { number: ++number, bytes, tooLong }
    pending = []
    pendingBytes = 0
    tooLong = false
    return line
  }
  for await (const chunk of input as AsyncIterable<Buffer>) {
    let start = 0
    for (let end = chunk.indexOf(0x0a); end !== -1; end = chunk.indexOf(0x0a, start)) {
      take(chunk.subarray(start, end))
      yield finish()
      start = end + 1
    }
    if (start < chunk.length) take(chunk.subarray(start))
  }
  if (pendingBytes > 0 || tooLong) yield finish()
}

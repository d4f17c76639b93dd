/**
 * Reads the log of test/power-loss/io-recorder.c and rebuilds the files as a power cut could leave
 * them. The model: a sync that returned makes every write to its file recorded before the sync
 * began durable; any other write may or may not be on disk, page by page (the kernel writes dirty
 * 4 KiB pages back in any order), so a crash state is the durable writes plus any subset of the
 * pages written since.
 */
import fs from 'node:fs'
import path from 'node:path'

export type IoEvent =
  | { type: 'open'; ns: bigint; file: number; path: string }
  | { type: 'write'; ns: bigint; file: number; offset: number; data: Buffer }
  | { type: 'sync-start'; ns: bigint; file: number }
  | { type: 'sync-end'; ns: bigint; file: number; ok: boolean }
  | { type: 'truncate'; ns: bigint; file: number; size: number }
  | { type: 'unlink' | 'rename'; ns: bigint; path: string }

const HEADER = 1 + 4 + 8 + 8 + 8
const PAGE = 4096

export function readIoLog(logPath: string): IoEvent[] {
  const log = fs.readFileSync(logPath)
  const events: IoEvent[] = []
  for (let at = 0; at + HEADER <= log.length;) {
    const type = log.readUInt8(at)
    const file = log.readInt32LE(at + 1)
    const ns = log.readBigUInt64LE(at + 5)
    const offset = Number(log.readBigInt64LE(at + 13))
    const length = Number(log.readBigUInt64LE(at + 21))
    const data = log.subarray(at + HEADER, at + HEADER + length)
    at += HEADER + length
    if (type === 1) events.push({ type: 'open', ns, file, path: data.toString() })
    else if (type === 2) events.push({ type: 'write', ns, file, offset, data })
    else if (type === 3) events.push({ type: 'sync-start', ns, file })
    else if (type === 4) events.push({ type: 'sync-end', ns, file, ok: offset === 0 })
    else if (type === 5) events.push({ type: 'truncate', ns, file, size: offset })
    else if (type === 6 || type === 7)
      events.push({ type: type === 6 ? 'unlink' : 'rename', ns, path: data.toString() })
    else throw new Error(`unknown record type ${type} in ${logPath}`)
  }
  return events
}

/** One page (or less) of one write, or a truncate: the unit a power cut keeps or loses. */
export interface Unit {
  file: number
  event: number
  offset: number
  data?: Buffer
  size?: number
}

function apply(image: Buffer, unit: Unit): Buffer {
  if (unit.size !== undefined) {
    return unit.size <= image.length ? image.subarray(0, unit.size) : grow(image, unit.size)
  }
  const data = unit.data as Buffer
  const out = unit.offset + data.length > image.length ? grow(image, unit.offset + data.length) : image
  data.copy(out, unit.offset)
  return out
}

/** Backing stores that grow() made with room to spare, and so may extend in place. */
const roomy = new WeakSet<ArrayBufferLike>()

/** The image extended with zeros to `size`; a WAL grows a frame at a time, so the room doubles. */
function grow(image: Buffer, size: number): Buffer {
  if (roomy.has(image.buffer) && image.byteOffset === 0 && image.buffer.byteLength >= size) {
    // A truncate before may have left old bytes in the room: a file extends with zeros.
    return Buffer.from(image.buffer, 0, size).fill(0, image.length)
  }
  const backing = new ArrayBuffer(Math.max(size, 2 * image.length))
  roomy.add(backing)
  const out = Buffer.from(backing, 0, size)
  image.copy(out)
  return out
}

function unitsOf(event: IoEvent, index: number): Unit[] {
  if (event.type === 'truncate') return [{ file: event.file, event: index, offset: 0, size: event.size }]
  if (event.type !== 'write') return []
  const units: Unit[] = []
  let offset = event.offset
  while (offset < event.offset + event.data.length) {
    const end = Math.min(event.offset + event.data.length, (Math.floor(offset / PAGE) + 1) * PAGE)
    const data = event.data.subarray(offset - event.offset, end - event.offset)
    units.push({ file: event.file, event: index, offset, data })
    offset = end
  }
  return units
}

/**
 * Crash states in the order of their crash points: call `at(k)` with k not decreasing, k being
 * how many events happened before the power went (0 to events.length).
 */
/** The first index in the sorted `list` that is not below `value`. */
function lowerBound(list: number[], value: number): number {
  let [low, high] = [0, list.length]
  while (low < high) {
    const middle = (low + high) >> 1
    if ((list[middle] as number) < value) low = middle + 1
    else high = middle
  }
  return low
}

/**
 * Crash states in the order of their crash points: call `at(k)` with k not decreasing, k being
 * how many events happened before the power went (0 to events.length).
 */
export class CrashStates {
  /** Per file with data: its path, the indices of its writes and truncates, its durable image. */
  private readonly files = new Map<
    number,
    { path: string; changes: number[]; durable: Buffer; applied: number }
  >()
  /** Per file: events before this index are durable, as of the last crash point asked for. */
  private readonly durableBefore = new Map<number, number>()
  private readonly syncStarts = new Map<number, number>()
  private scanned = 0

  constructor(
    private readonly events: IoEvent[],
    /** The files' content when recording began, by path. */
    initial: Map<string, Buffer>,
  ) {
    const paths = new Map<number, string>()
    for (const [i, event] of events.entries()) {
      if (event.type === 'open') paths.set(event.file, event.path)
      if (event.type !== 'write' && event.type !== 'truncate') continue
      const known = this.files.get(event.file)
      if (known) known.changes.push(i)
      else {
        const start = initial.get(paths.get(event.file) as string) ?? Buffer.alloc(0)
        const file = {
          path: paths.get(event.file) as string,
          changes: [i],
          durable: Buffer.from(start),
          applied: 0,
        }
        this.files.set(event.file, file)
      }
    }
    for (const [name, content] of initial) {
      const file = [...paths].find(([, known]) => known === name)?.[0]
      if (file === undefined || this.files.has(file)) continue
      this.files.set(file, { path: name, changes: [], durable: Buffer.from(content), applied: 0 })
    }
  }

  /** The durable images at crash point k, and the units that may or may not have reached the disk. */
  at(k: number): { durable: Map<number, Buffer>; pending: Unit[] } {
    for (; this.scanned < k; this.scanned++) {
      const event = this.events[this.scanned] as IoEvent
      if (event.type === 'sync-start') this.syncStarts.set(event.file, this.scanned)
      if (event.type === 'sync-end' && event.ok) {
        this.durableBefore.set(event.file, this.syncStarts.get(event.file) ?? 0)
      }
    }
    const durable = new Map<number, Buffer>()
    const pending: Unit[] = []
    for (const [id, file] of this.files) {
      const before = this.durableBefore.get(id) ?? 0
      const from = lowerBound(file.changes, file.applied)
      const upTo = lowerBound(file.changes, before)
      for (const i of file.changes.slice(from, upTo)) {
        for (const unit of unitsOf(this.events[i] as IoEvent, i)) file.durable = apply(file.durable, unit)
      }
      file.applied = Math.max(file.applied, before)
      durable.set(id, file.durable)
      for (const i of file.changes.slice(upTo, lowerBound(file.changes, k))) {
        pending.push(...unitsOf(this.events[i] as IoEvent, i))
      }
    }
    pending.sort((a, b) => a.event - b.event)
    return { durable, pending }
  }

  /** Writes the durable images plus `kept` into `dir`, under the files' own names. */
  write(dir: string, durable: Map<number, Buffer>, kept: Unit[]): void {
    const images = new Map(durable)
    const copied = new Set<number>()
    for (const unit of kept) {
      // Copied before the first change: the durable image is where the next crash point starts.
      if (!copied.has(unit.file)) {
        copied.add(unit.file)
        images.set(unit.file, Buffer.from(images.get(unit.file) as Buffer))
      }
      images.set(unit.file, apply(images.get(unit.file) as Buffer, unit))
    }
    fs.rmSync(dir, { recursive: true, force: true })
    fs.mkdirSync(dir, { recursive: true })
    for (const [file, image] of images) {
      fs.writeFileSync(path.join(dir, path.basename(this.files.get(file)?.path as string)), image)
    }
  }
}

import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type LogIo, LogDestination } from '../../src/observability/log-destination.js'

/** Waits until `done()` holds; the writes it waits for are asynchronous. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await sleep(5)
  assert.ok(done(), 'the destination never got there')
}

const line = (n: number) => `${JSON.stringify({ level: 30, msg: `line ${n}` })}\n`

/** fs, except that the first `failures` asynchronous writes fail with `code`; counts every call. */
function failingFirst(
  failures: number,
  code: string,
): LogIo & { calls: number; completed: number; syncCalls: number } {
  const io = {
    calls: 0,
    completed: 0,
    syncCalls: 0,
    write(
      fd: number,
      data: Buffer,
      callback: (error: NodeJS.ErrnoException | null, written: number) => void,
    ) {
      io.calls++
      if (io.calls <= failures) {
        setImmediate(() => callback(Object.assign(new Error(code), { code }), 0))
      } else
        fs.write(fd, data, (error, written) => {
          io.completed++
          callback(error, written)
        })
    },
    writeSync(fd: number, data: Buffer) {
      io.syncCalls++
      return fs.writeSync(fd, data)
    },
  }
  return io
}

describe('the log destination', () => {
  it('counts the lines a full disk loses and says so on stderr when writing works again', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-log-')), 'out.log')
    const fd = fs.openSync(file, 'w')
    const reports: string[] = []
    const io = failingFirst(1, 'ENOSPC')
    const destination = new LogDestination(fd, io, (report) => reports.push(report))
    try {
      destination.write(line(1))
      await until(() => destination.dropped === 1)
      assert.deepEqual(reports, [], 'nothing to report while writes still fail')
      destination.write(line(2))
      destination.write(line(3))
      // The report follows the write's completion, which follows the file's new text.
      await until(() => reports.length === 1)
      assert.equal(fs.readFileSync(file, 'utf8'), line(2) + line(3))
      const report = JSON.parse(reports[0] ?? '')
      assert.equal(report.level, 'warn', 'the level by name, as every other log line')
      assert.equal(new Date(report.time).toISOString(), report.time, 'an ISO time, as every other log line')
      assert.equal(report.pid, process.pid)
      assert.equal(report.dropped, 1)
      assert.match(report.msg, /^1 log lines could not be written to stdout \(ENOSPC\)$/)
      destination.write(line(4))
      await until(() => fs.readFileSync(file, 'utf8').endsWith(line(4)))
      assert.equal(reports.length, 1, 'reported once')
    } finally {
      fs.closeSync(fd)
    }
  })

  it('counts every line written to /dev/full, and reports them at exit', async (t) => {
    if (!fs.existsSync('/dev/full')) return t.skip('no /dev/full on this system')
    const fd = fs.openSync('/dev/full', 'w')
    const reports: string[] = []
    const destination = new LogDestination(fd, fs, (report) => reports.push(report))
    try {
      for (let n = 1; n <= 5; n++) destination.write(line(n))
      await until(() => destination.dropped === 5)
      // Lines 6 and 7 wait for the flush delay; the flush at exit writes (and loses) both.
      destination.write(line(6))
      destination.write(line(7))
      destination.flushSync()
      assert.equal(destination.dropped, 7, 'the five, and lines 6 and 7 from the flush')
      assert.equal(reports.length, 1)
      assert.equal(JSON.parse(reports[0] ?? '').dropped, 7)
    } finally {
      fs.closeSync(fd)
    }
  })

  it('gathers the lines of its flush delay into one write, and writes 64 KiB at once', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-log-')), 'out.log')
    const fd = fs.openSync(file, 'w')
    const io = failingFirst(0, 'unused')
    const destination = new LogDestination(fd, io, () => {}, 500)
    try {
      for (let n = 1; n <= 20; n++) {
        destination.write(line(n))
        await new Promise((resolve) => setImmediate(resolve))
      }
      assert.equal(io.calls, 0, 'twenty turns later, still within the delay')
      await until(() => io.calls === 1)
      const twenty = Array.from({ length: 20 }, (_, i) => line(i + 1)).join('')
      await until(() => io.completed === 1)
      assert.equal(fs.readFileSync(file, 'utf8'), twenty)
      const big = `${JSON.stringify({ msg: 'x'.repeat(64 * 1024) })}\n`
      destination.write(big)
      assert.equal(io.calls, 2, 'a full batch goes out in the same turn')
      await until(() => io.completed === 2)
      assert.equal(fs.readFileSync(file, 'utf8'), twenty + big)
      destination.write(line(21))
      await until(() => fs.readFileSync(file, 'utf8').endsWith(line(21)))
      assert.equal(io.calls, 3)
    } finally {
      fs.closeSync(fd)
    }
  })

  it('stops writing once the reader is gone (EPIPE), and its flush at exit returns at once', async () => {
    const reports: string[] = []
    const io = failingFirst(Number.POSITIVE_INFINITY, 'EPIPE')
    const destination = new LogDestination(1, io, (report) => reports.push(report))
    destination.write(line(1))
    await until(() => destination.dropped === 1)
    for (let n = 2; n <= 100; n++) destination.write(line(n))
    destination.flushSync()
    assert.equal(io.calls, 1, 'one failed write, no retries')
    assert.equal(io.syncCalls, 0, 'nothing written at exit')
    assert.equal(destination.dropped, 100)
    assert.equal(reports.length, 1)
  })
})

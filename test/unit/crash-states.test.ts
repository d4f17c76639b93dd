import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { CrashStates, type IoEvent } from '../power-loss/io-log.js'

const page = (char: string, length = 4096) => Buffer.alloc(length, char)

/** Writes a state into a fresh folder and reads the one file back. */
function written(states: CrashStates, k: number, keepAll: boolean): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-crash-states-'))
  try {
    const { durable, pending } = states.at(k)
    states.write(dir, durable, keepAll ? pending : [])
    return fs.readFileSync(path.join(dir, 'plants.db-wal'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("the power-loss test's crash states (test/power-loss/io-log.ts)", () => {
  const file = 1
  const events: IoEvent[] = [
    { type: 'open', ns: 0n, file, path: '/store/plants.db-wal' },
    { type: 'write', ns: 1n, file, offset: 0, data: page('A') },
    { type: 'sync-start', ns: 2n, file },
    { type: 'sync-end', ns: 3n, file, ok: true },
    { type: 'write', ns: 4n, file, offset: 4096, data: page('B') },
    { type: 'truncate', ns: 5n, file, size: 2048 },
    { type: 'write', ns: 6n, file, offset: 6000, data: page('C', 10) },
    { type: 'sync-start', ns: 7n, file },
    { type: 'sync-end', ns: 8n, file, ok: true },
  ]
  // After the truncate, the file extends with zeros: none of the B page's old bytes come back.
  const afterAll = Buffer.concat([page('A', 2048), Buffer.alloc(6000 - 2048), page('C', 10)])

  it('keeps only what a sync made durable, or any of the pages written since', () => {
    const states = new CrashStates(events, new Map())
    assert.deepEqual(written(states, 7, false), page('A'))
    assert.deepEqual(written(states, 7, true), afterAll)
  })

  it('extends a file with zeros after a truncate, also when the synced image grows in place', () => {
    const states = new CrashStates(events, new Map())
    assert.deepEqual(written(states, 4, false), page('A'))
    assert.deepEqual(written(states, 9, false), afterAll)
  })
})

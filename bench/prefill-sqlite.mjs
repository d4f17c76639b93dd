#!/usr/bin/env node
// Bulk pre-fill of a migrated (and not yet served) SQLite store:
//   node bench/prefill-sqlite.mjs FILE COUNT
// inserts COUNT plants in one statement (a recursive CTE), their ids spread over the int64 range
// (lib/stored-ids.mjs), with the journal off and no
// fsync while it runs, then returns the file to WAL mode and fsyncs it, so that the writeback of
// the bulk load does not land in the middle of a measurement. Prints the elapsed milliseconds.
import fs from 'node:fs'
import Database from 'better-sqlite3'
import { idStep } from './lib/stored-ids.mjs'

const [file, countText] = process.argv.slice(2)
const count = Number(countText)
if (!file || !Number.isInteger(count) || count < 1) {
  process.stderr.write('usage: node bench/prefill-sqlite.mjs FILE COUNT\n')
  process.exit(2)
}

const started = Date.now()
const db = new Database(file)
db.pragma('journal_mode = DELETE')
db.pragma('journal_mode = OFF')
db.pragma('synchronous = OFF')
db.pragma('cache_size = -262144')
const existing = db.prepare('SELECT count(*) AS n FROM plants').get().n
if (existing !== 0) {
  process.stderr.write(`prefill-sqlite: ${file} already holds ${existing} plants\n`)
  process.exit(1)
}
// Names and tags look like real ones; 100 distinct tags so the (tag, id) index is not degenerate.
db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${count})
  INSERT INTO plants (id, name, tag, created_at)
  SELECT i * ${idStep(count)}, 'plant ' || i, 'tag' || (i % 100), 1700000000000 + i FROM s`)
db.pragma('journal_mode = WAL')
db.close()
const fd = fs.openSync(file, 'r+')
fs.fsyncSync(fd)
fs.closeSync(fd)
process.stdout.write(`${Date.now() - started}\n`)

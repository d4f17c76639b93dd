/**
 * The process that `sqlite-wal-coalescing.test.ts` kills: through the coalescing VFS it commits
 * 40 transactions of 50 random ids, printing each transaction's ids once COMMIT returned (a write
 * to a pipe is synchronous), then SIGKILLs itself: at once (`after-commit`), or in the middle of
 * a 3,000-row transaction on a 10-page cache, part of which is already in the WAL with no commit
 * frame (`mid-transaction`). With `file-size-limit` it runs under a shell's `ulimit -f` and
 * commits until a WAL write fails, prints that error's code and exits normally. Without arguments
 * it does nothing, since the test runner may load every file under test/.
 */
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import Database from 'better-sqlite3'
import { loadWalCoalescing } from '../../src/storage/sqlite/wal-coalescing.js'

const [file, when] = process.argv.slice(2)
if (file && when) {
  if (loadWalCoalescing(true).state !== 'on') throw new Error('the WAL coalescing VFS did not load')
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = OFF')
  db.pragma('wal_autocheckpoint = 0')
  db.pragma('cache_size = 10')
  db.exec('CREATE TABLE plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT)')
  db.exec('CREATE INDEX plants_tag_id ON plants (tag, id)')
  const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
  const randomId = () => randomBytes(8).readBigInt64BE() & 0x7fff_ffff_ffff_ffffn
  const commit = (rows = 50) => {
    const ids = Array.from({ length: rows }, randomId)
    db.transaction(() => {
      for (const id of ids) insert.run(id, 'acked', 'green')
    })()
    fs.writeSync(1, `${ids.join(' ')}\n`)
  }
  if (when === 'file-size-limit') {
    // A write past the limit then fails with EFBIG instead of the signal killing the process.
    // Transactions of 5 rows (about 50 KiB of frames) fit the shim's buffer, so the failing write
    // is the one that ends a transaction.
    process.on('SIGXFSZ', () => {})
    try {
      for (;;) commit(5)
    } catch (error) {
      fs.writeSync(1, `error ${(error as { code?: string }).code}\n`)
      db.close()
      process.exit(0)
    }
  }
  for (let t = 0; t < 40; t++) commit()
  if (when === 'mid-transaction') {
    db.exec('BEGIN')
    for (let i = 0; i < 3000; i++) insert.run(randomId(), 'unacked', 'green')
  }
  process.kill(process.pid, 'SIGKILL')
}

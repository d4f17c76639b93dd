#!/usr/bin/env node
// Compiles native/*.c, the SQLite VFS that writes a commit's WAL frames in one call
// (src/storage/sqlite/wal-coalescing.ts), into build/wal-coalesce.so. Run by `npm install`
// (postinstall) and `npm run build`; skipped when the library is newer than its sources. It uses
// the C compiler better-sqlite3's own build needed and the sqlite3ext.h that better-sqlite3 ships,
// so it downloads nothing. It never fails the install: without the library the service runs the
// same, with more system calls per commit, and says so in a warning at start.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const native = path.join(root, 'native')
const sourceFiles = fs.readdirSync(native).map((name) => path.join(native, name))
const sources = sourceFiles.filter((file) => file.endsWith('.c'))
const output = path.join(root, 'build', 'wal-coalesce.so')
const headers = path.join(root, 'node_modules', 'better-sqlite3', 'deps', 'sqlite3')

const mtime = (file) => (fs.existsSync(file) ? fs.statSync(file).mtimeMs : 0)

function warn(message) {
  process.stderr.write(`build-native: ${message}; the SQLite store will write its WAL without coalescing\n`)
}

if (!fs.existsSync(path.join(headers, 'sqlite3ext.h'))) {
  warn(`${path.relative(root, headers)}/sqlite3ext.h not found`)
} else if (mtime(output) > Math.max(...sourceFiles.map(mtime))) {
  // Up to date.
} else {
  fs.mkdirSync(path.dirname(output), { recursive: true })
  // Written beside the target and renamed, so a running service never maps a half-written file.
  const partial = `${output}.${process.pid}.tmp`
  const compiler = process.env.CC || 'cc'
  // Hidden symbols: the library shares the process with SQLite and other libraries; only the
  // extension's entry point is exported (native/wal-coalesce.c).
  const flags = ['-O2', '-Wall', '-Wextra', '-fPIC', '-fvisibility=hidden', '-shared']
  const args = [...flags, '-I', headers, ...sources, '-o', partial]
  const run = spawnSync(compiler, args, { stdio: ['ignore', 'inherit', 'inherit'] })
  if (run.status === 0) fs.renameSync(partial, output)
  else {
    // A library built from an older source must not outlive a failed build of the new one.
    fs.rmSync(output, { force: true })
    warn(run.error ? `${compiler} could not run (${run.error.message})` : `${compiler} exited with ${run.status}`)
  }
  fs.rmSync(partial, { force: true })
}

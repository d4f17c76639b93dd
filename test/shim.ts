/**
 * Compiles an LD_PRELOAD shim of the test suite (C, in test/) with the system's C compiler, once per
 * test process: a test tool that intercepts a service's system calls, never shipped code.
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { projectRoot } from './helpers.js'

const built = new Map<string, string>()

/** The path of the shared library built from `source` (relative to the project root). */
export function compileShim(source: string): string {
  const known = built.get(source)
  if (known) return known
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-shim-'))
  const library = path.join(dir, `${path.basename(source, '.c')}.so`)
  const compiler = process.env.CC ?? 'gcc'
  execFileSync(compiler, [
    '-O2',
    '-shared',
    '-fPIC',
    '-o',
    library,
    path.join(projectRoot, source),
    '-ldl',
    '-lpthread',
  ])
  built.set(source, library)
  return library
}

/**
 * A service's environment with test/fixtures/disk-fault.c loaded: while `marker` exists, its
 * store's syncs fail with EIO (the marker empty) or its writes with ENOSPC (`enospc`).
 */
export function diskFaultEnv(env: Record<string, string>, marker: string): Record<string, string> {
  return {
    ...env,
    LD_PRELOAD: compileShim('test/fixtures/disk-fault.c'),
    DISK_FAULT_FILE: marker,
    DISK_FAULT_PREFIX: env.PLANT_STORE_DB as string,
  }
}

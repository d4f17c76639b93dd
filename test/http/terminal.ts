import { execFile } from 'node:child_process'
import { cliPath } from '../helpers.js'

/**
 * Runs the CLI under script(1), whose pseudo-terminal makes stdout and stderr a terminal (of no
 * size: the CLI takes 80 columns), and gives what it wrote, whatever its exit code. NO_COLOR from
 * the test's own environment is left out; `env` may set it.
 */
export function onTerminal(args: string[], env: Record<string, string>): Promise<string> {
  const command = [
    'env',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath,
    cliPath,
    ...args,
  ]
  const quoted = command.map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(' ')
  return new Promise((resolve, reject) =>
    execFile(
      'script',
      ['-qec', quoted, '/dev/null'],
      { env: { ...process.env, NO_COLOR: '' } },
      (error, stdout) => (error && typeof error.code !== 'number' ? reject(error) : resolve(stdout)),
    ),
  )
}

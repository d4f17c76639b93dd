/** Thrown for a wrong command line; main.ts prints it with the usage and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

export const print = (line: string): void => {
  process.stdout.write(`${line}\n`)
}

/** Fixed-width columns for humans; scripts use --json. */
export function table(rows: Record<string, string>[], columns: string[]): string {
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => (row[column] ?? '').length)),
  )
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [
    line(columns.map((c) => c.toUpperCase())),
    ...rows.map((row) => line(columns.map((c) => row[c] ?? ''))),
  ].join('\n')
}

/** A command that understood its arguments but could not do what was asked; exits 1. */
export class CommandError extends Error {
  override name = 'CommandError'
}

/**
 * Colour only for a person at a terminal: `stream` is a TTY and NO_COLOR is unset or empty
 * (https://no-color.org: any non-empty value turns colour off). Never into a pipe or a file.
 */
export const useColour = (stream: { isTTY?: boolean }): boolean =>
  stream.isTTY === true && !process.env.NO_COLOR

const SGR = { red: 31, green: 32, yellow: 33, dim: 2, bold: 1 } as const

/** `text` in `style` when `on`; the text unchanged otherwise. Applied after escapeControls. */
export const paint = (on: boolean, style: keyof typeof SGR, text: string): string =>
  on ? `\u001b[${SGR[style]}m${text}\u001b[0m` : text

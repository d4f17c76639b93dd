const UNITS: [string, number][] = [
  ['y', 365 * 86_400],
  ['d', 86_400],
  ['h', 3_600],
  ['min', 60],
]

/** `3 min ago`, `in 29 d`, `now`: a time for a person at a terminal; scripts get ISO. */
export function relativeTime(at: Date, now: Date): string {
  const seconds = (at.getTime() - now.getTime()) / 1000
  const size = Math.abs(seconds)
  if (size < 60) return 'now'
  // The largest unit that fits at least once, rounded down: `59 min`, then `1 h`.
  const [unit, length] = UNITS.find(([, length]) => size >= length) ?? ['min', 60]
  const amount = `${Math.floor(size / length)} ${unit}`
  return seconds < 0 ? `${amount} ago` : `in ${amount}`
}

// What the two yardstick servers (baseline.mjs, fastify-reference.mjs) share: their settings from
// the environment, and the fixed plants their list route answers with.

/** PORT, HOST (default 127.0.0.1) and the `Authorization` value BENCH_TOKEN (required) makes. */
export function yardstickSettings(name) {
  const token = process.env.BENCH_TOKEN
  if (!token) {
    process.stderr.write(`${name}: BENCH_TOKEN is required\n`)
    process.exit(2)
  }
  return {
    port: Number(process.env.PORT ?? 0),
    host: process.env.HOST ?? '127.0.0.1',
    expected: `Bearer ${token}`,
  }
}

export const PLANTS = Array.from({ length: 1000 }, (_, i) => ({
  id: i + 1,
  name: `plant ${i + 1}`,
  tag: 'bench',
}))

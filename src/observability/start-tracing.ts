import type { Config } from '../config.js'
import type { Tracing } from './tracing.js'

/**
 * Loads and starts the SDK when the configuration asks for tracing; otherwise imports nothing, so
 * that a service without OTEL_EXPORTER_OTLP_ENDPOINT never loads it.
 */
export async function startTracing(
  config: Pick<Config, 'tracing' | 'trustProxy'>,
  believed: (peer: string) => boolean,
): Promise<Tracing | undefined> {
  if (!config.tracing) return undefined
  const { createTracing } = await import('./otel.js')
  return createTracing(believed)
}

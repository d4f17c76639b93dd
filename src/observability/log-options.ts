import type pino from 'pino'
import type { LoggerOptions } from 'pino'
import type { Config } from '../config.js'
import { useColour } from '../colour.js'
import { stdoutLog } from './log-destination.js'
import { isoTime } from './iso-time.js'
import { PRETTY_IGNORE, prettyMessage } from './pretty-line.js'

/** Never logged: a token in an Authorization header that a line might carry. */
const redact = { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' }

/**
 * The service's pino options (Fastify's `logger`). JSON lines carry an ISO time and the level's
 * name, and go to stdout through log-destination.ts, gathered into few writes. `pretty` is
 * pino-pretty's text, for a terminal, loaded only then: one line per entry as JSON has, coloured
 * only on a terminal without NO_COLOR (pino-pretty's own guess colours a pipe when CI is set).
 */
export async function loggerOptions(
  config: Pick<Config, 'logLevel' | 'logFormat'>,
): Promise<LoggerOptions & { stream: pino.DestinationStream }> {
  if (config.logFormat === 'pretty') {
    const { default: pretty } = await import('pino-pretty')
    const stream = pretty({
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      singleLine: true,
      ignore: PRETTY_IGNORE,
      messageFormat: prettyMessage,
      colorize: useColour(process.stdout),
    })
    return { level: config.logLevel, redact, stream }
  }
  return {
    level: config.logLevel,
    redact,
    timestamp: isoTime,
    formatters: { level: (label) => ({ level: label }) },
    stream: stdoutLog(),
  }
}

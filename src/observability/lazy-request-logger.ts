import type { FastifyBaseLogger } from 'fastify'

type Bindings = Parameters<FastifyBaseLogger['child']>[0]
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'
type LogArgs = Parameters<FastifyBaseLogger['info']>

/** pino's isLevelEnabled, which Fastify's logger type does not declare. */
export const isLevelEnabled = (logger: FastifyBaseLogger, level: string): boolean =>
  (logger as FastifyBaseLogger & { isLevelEnabled(level: string): boolean }).isLevelEnabled(level)

/**
 * Fastify gives every request a child logger bound to its id. Making one costs a pino child and a
 * JSON.stringify of its bindings on every request, although at the usual levels almost no request
 * logs anything but its access line (which observability.ts writes through the root logger).
 * This stands in for that child and makes the real one on first use, with the same bindings, so
 * whatever a request does log reads exactly as before.
 */
class LazyRequestLogger {
  private real: FastifyBaseLogger | undefined

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get logger(): FastifyBaseLogger {
    this.real ??= this.parent.child(this.bindings, this.options)
    return this.real
  }

  get level(): string {
    return this.real?.level ?? this.options.level ?? this.parent.level
  }

  set level(level: string) {
    this.logger.level = level
  }

  isLevelEnabled(level: string): boolean {
    return isLevelEnabled(this.options.level === undefined ? (this.real ?? this.parent) : this.logger, level)
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options)
  }

  fatal(...args: LogArgs): void {
    this.log('fatal', args)
  }
  error(...args: LogArgs): void {
    this.log('error', args)
  }
  warn(...args: LogArgs): void {
    this.log('warn', args)
  }
  info(...args: LogArgs): void {
    this.log('info', args)
  }
  debug(...args: LogArgs): void {
    this.log('debug', args)
  }
  trace(...args: LogArgs): void {
    this.log('trace', args)
  }
  silent(): void {}

  private log(level: Level, args: LogArgs): void {
    // A line below the level would be dropped by the child too; no need to make one for it.
    if (!this.real && this.options.level === undefined && !isLevelEnabled(this.parent, level)) return
    ;(this.logger[level] as (...args: LogArgs) => void)(...args)
  }
}

/** Fastify's `childLoggerFactory`: see LazyRequestLogger. */
export function lazyRequestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options) as unknown as FastifyBaseLogger
}

import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { it } from 'node:test'
import Fastify from 'fastify'
import { lazyRequestLogger } from '../../src/observability/lazy-request-logger.js'

/** A real pino root logger (Fastify's) writing into an array of parsed lines. */
function rootLogger() {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(JSON.parse(String(chunk)))
      callback()
    },
  })
  const app = Fastify({ logger: { level: 'info', stream } })
  return { log: app.log, lines }
}

it('makes the request child only when something is logged, with the same bindings', () => {
  const { log, lines } = rootLogger()
  let children = 0
  const child = log.child.bind(log)
  log.child = (...args: Parameters<typeof log.child>) => {
    children++
    return child(...args)
  }
  const quiet = lazyRequestLogger(log, { reqId: 'r-1' }, {})
  quiet.debug('below the level')
  assert.equal(quiet.level, 'info')
  assert.equal(children, 0, 'no child for a request that logs nothing at its level')

  const loud = lazyRequestLogger(log, { reqId: 'r-2' }, {})
  loud.warn({ err: new Error('boom') }, 'store unavailable')
  loud.error('twice')
  assert.equal(children, 1, 'one child, made on first use')
  assert.deepEqual(
    lines.map((line) => [line.reqId, line.msg, line.level]),
    [
      ['r-2', 'store unavailable', 40],
      ['r-2', 'twice', 50],
    ],
  )
  assert.equal((lines[0]?.err as { message: string }).message, 'boom')
})

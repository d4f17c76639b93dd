import { readFileSync } from 'node:fs'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import proxyAddr from '@fastify/proxy-addr'
import { noteRefusal } from './refusals.js'

/** The open-file limit assumed where /proc/self/limits cannot be read (not Linux): a common default. */
const FALLBACK_FILE_LIMIT = 1024

/** The soft limit on open files of this process, from Linux's /proc/self/limits. */
export function openFileLimit(limits?: string): number {
  let text = limits
  try {
    text ??= readFileSync('/proc/self/limits', 'utf8')
  } catch {
    return FALLBACK_FILE_LIMIT
  }
  const line = text.split('\n').find((row) => row.startsWith('Max open files'))
  const soft = line?.slice('Max open files'.length).trim().split(' ')[0]
  if (soft === 'unlimited') return 1_048_576
  return soft && /^\d+$/.test(soft) ? Number(soft) : FALLBACK_FILE_LIMIT
}

/**
 * Connections past which new ones are closed at once, so that the process keeps descriptors for
 * its store, its pool, webhook sends and logs: the file limit less a tenth, at least 64 less.
 */
export function defaultMaxConnections(limits?: string): number {
  const files = openFileLimit(limits)
  return Math.max(1, files - Math.max(64, Math.floor(files / 10)))
}

export interface ConnectionLimits {
  max: number
  /** 0 for no cap per address. */
  perAddress: number
  /** TRUST_PROXY: a trusted proxy's connections carry many clients and are not capped per address. */
  trustProxy: boolean | string[]
}

/**
 * Caps open connections in all (Node's `maxConnections`, which closes the extra ones before any
 * byte is read) and per client address: a connection over its address's cap is closed before Node
 * reads from it, so idle sockets from one address cannot take every descriptor.
 */
export function limitConnections(app: FastifyInstance, limits: ConnectionLimits): void {
  const server = app.server
  server.maxConnections = limits.max
  server.on('drop', () => noteRefusal('connections'))
  if (limits.perAddress === 0 || limits.trustProxy === true) return
  const trusted = proxyAddr.compile(limits.trustProxy || [])
  const open = new Map<string, number>()
  // Before Node's own listener, so that a refused socket is closed before its parser reads.
  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress
    if (address === undefined || trusted(address, 0)) return
    const count = open.get(address) ?? 0
    if (count >= limits.perAddress) {
      noteRefusal('connections-per-address')
      socket.destroy()
      return
    }
    open.set(address, count + 1)
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1
      if (left === 0) open.delete(address)
      else open.set(address, left)
    })
  })
}

/** Why a client was refused for load, not for what it asked: the kinds a metrics module counts. */
export type RefusalKind =
  'connections' | 'connections-per-address' | 'auth-failures' | 'token-rate' | 'scrapes' | 'load-shed'

import { countLoadShed, countRateLimited } from '../observability/metrics.js'

type Listener = (kind: RefusalKind) => void
const listeners = new Set<Listener>()

/**
 * Calls `listener` on every refusal for load in this process (a closed connection, a 429, a 503
 * from load shedding); returns what unsubscribes it. A metrics module counts refusals here.
 */
export function onRefusal(listener: Listener): () => void {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

export function noteRefusal(kind: RefusalKind): void {
  if (kind === 'load-shed') countLoadShed()
  else countRateLimited(kind)
  for (const listener of listeners) listener(kind)
}

import type { FastifyInstance, FastifyRequest } from 'fastify'

declare module 'fastify' {
  interface FastifyInstance {
    /** Set only when buildApp's `recordHookOrder` asks for it (the hook-order test). */
    hookOrder: HookOrder | undefined
  }
}

/** How many requests' hook lists are kept; the oldest goes first. */
const KEPT = 200

/**
 * Records, per request id, the labels of the app's hooks in the order they ran. The app decorates
 * itself with one only when asked: otherwise `named` hands back the hook itself, at no cost.
 */
export class HookOrder {
  private readonly ran = new Map<string, string[]>()

  record(request: FastifyRequest, label: string): void {
    let labels = this.ran.get(request.id)
    if (!labels) {
      labels = []
      this.ran.set(request.id, labels)
      if (this.ran.size > KEPT) this.ran.delete(this.ran.keys().next().value as string)
    }
    labels.push(label)
  }

  /** The labels of the hooks that ran for the request with this id, in order. */
  of(requestId: string): readonly string[] {
    return this.ran.get(requestId) ?? []
  }
}

/**
 * The hook itself, or when the app records its hook order, the hook after a record of `label`.
 * Every hook of the request path goes through this (docs/development.md lists their labels).
 */
export function named<F extends (request: FastifyRequest, ...rest: never[]) => unknown>(
  app: FastifyInstance,
  label: string,
  hook: F,
): F {
  const order = app.hookOrder
  if (!order) return hook
  return function (this: unknown, request: FastifyRequest, ...rest: never[]) {
    order.record(request, label)
    return hook.call(this, request, ...rest)
  } as F
}

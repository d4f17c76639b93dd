import { PlantStoreError } from './errors.js'
import { send, nextLink, type Transport } from './http.js'
import { checkId, newPlantJson, parseLossless, toPlant, toStoredPlant } from './json.js'
import type { CallOptions, ListOptions, NewPlant, Plant, PlantPage, StoredPlant } from './types.js'

export interface ClientOptions {
  /** Where the service is, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string
  /** A bearer token (`pst_...`) with the scopes the calls need. */
  token: string
  /** Per call, retries and waits included; default 10 000 ms. */
  timeoutMs?: number
  /** Attempts in all for a call answered 503 or 429; default 3. */
  maxAttempts?: number
  /** Longest wait between attempts, whatever Retry-After says; default 10 000 ms. */
  maxRetryDelayMs?: number
  /** First wait when an answer has no Retry-After, doubled per attempt; default 500 ms. */
  retryDelayMs?: number
  /** A fetch implementation; default the global one (Node 20+, browsers). */
  fetch?: typeof fetch
}

/**
 * A client for the Plant Store API. Ids are bigint both ways and never pass through a double;
 * every failure is a PlantStoreError.
 */
export class PlantStoreClient {
  readonly #transport: Transport

  constructor(options: ClientOptions) {
    this.#transport = {
      baseUrl: options.baseUrl,
      token: options.token,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      timeoutMs: options.timeoutMs ?? 10_000,
      maxAttempts: Math.max(1, options.maxAttempts ?? 3),
      maxRetryDelayMs: options.maxRetryDelayMs ?? 10_000,
      retryDelayMs: options.retryDelayMs ?? 500,
    }
  }

  /**
   * Creates a plant. Sending the same id, name and tag again answers the same and stores nothing
   * new, so a create is retried like a read.
   */
  async createPlant(plant: NewPlant, options?: CallOptions): Promise<Plant> {
    const body = newPlantJson(plant)
    const response = await send(
      this.#transport,
      { method: 'POST', url: '/plants', body, idempotent: true },
      options,
    )
    const answer = await readJson(response)
    if (typeof answer !== 'object' || answer === null || typeof (answer as Plant).name !== 'string')
      throw unexpected(response, 'a create answer without a name')
    return toPlant(answer)
  }

  /** Reads one plant; a missing one throws a PlantStoreError with status 404. */
  async getPlant(id: bigint, options?: CallOptions): Promise<StoredPlant> {
    const url = `/plants/${checkId(id).toString()}`
    const response = await send(this.#transport, { method: 'GET', url, idempotent: true }, options)
    return toStoredPlant(await readJson(response))
  }

  /** One page of plants in ascending id order, and the next page's URL when there is one. */
  async listPlants(list: ListOptions = {}, options?: CallOptions): Promise<PlantPage> {
    const query = new URLSearchParams()
    if (list.limit !== undefined) query.set('limit', String(list.limit))
    if (list.after !== undefined) query.set('after', checkId(list.after, 'after').toString())
    if (list.tag !== undefined) query.set('tag', list.tag)
    const url = query.size > 0 ? `/plants?${query}` : '/plants'
    return this.#page(url, options)
  }

  /** Every plant, page after page, following `Link: rel="next"` until the last page. */
  async *allPlants(
    list: ListOptions = {},
    options?: CallOptions,
  ): AsyncGenerator<StoredPlant, void, undefined> {
    let page = await this.listPlants(list, options)
    for (;;) {
      yield* page.plants
      if (page.next === undefined) return
      page = await this.#page(page.next, options)
    }
  }

  /** Deletes one plant; a missing one throws a PlantStoreError with status 404. */
  async deletePlant(id: bigint, options?: CallOptions): Promise<void> {
    const url = `/plants/${checkId(id).toString()}`
    const response = await send(this.#transport, { method: 'DELETE', url, idempotent: true }, options)
    await response.body?.cancel()
  }

  async #page(url: string, options?: CallOptions): Promise<PlantPage> {
    const response = await send(this.#transport, { method: 'GET', url, idempotent: true }, options)
    const answer = await readJson(response)
    if (!Array.isArray(answer)) throw unexpected(response, 'a list answer that is not an array')
    return {
      plants: answer.map((plant, i) => toStoredPlant(plant, `plants[${i}]`)),
      next: nextLink(response),
    }
  }
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text()
  try {
    return parseLossless(text)
  } catch (error) {
    throw unexpected(response, `a body that is not JSON (${(error as Error).message})`, error)
  }
}

const unexpected = (response: Response, what: string, cause?: unknown) =>
  new PlantStoreError(response.status, 'UNEXPECTED_RESPONSE', `the service answered ${what}`, {
    requestId: response.headers.get('x-request-id') ?? undefined,
    cause,
  })

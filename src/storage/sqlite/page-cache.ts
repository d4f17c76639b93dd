import type { PlantPage } from '../storage.js'

/** Pages kept at most (first pages of distinct limits and tags); past that it starts over. */
const MAX_PAGES = 64
/** And at most this many characters of JSON in all (a page of 1000 long names is ~300k). */
const MAX_CHARS = 4_000_000

/**
 * First pages of listings as the store last built them, valid while the database file is unchanged. The
 * caller passes SQLite's `PRAGMA data_version` of its read connection, which changes whenever any
 * other connection (the writer, another process) commits: a cached page is therefore
 * never older than the last commit, and a client that got a 200 for a create sees it in the next
 * list. Building a page of 100 in SQLite costs 35-90 µs; a hit costs one pragma.
 */
export class PageCache {
  private readonly pages = new Map<string, PlantPage>()
  private version: number | undefined
  private chars = 0

  /** The cached page for `key`, if the file has not changed since it was stored. */
  get(key: string, dataVersion: number): PlantPage | undefined {
    if (dataVersion !== this.version) {
      this.clear()
      this.version = dataVersion
      return undefined
    }
    return this.pages.get(key)
  }

  set(key: string, page: PlantPage): void {
    if (this.pages.size >= MAX_PAGES || this.chars + page.json.length > MAX_CHARS) this.clear()
    this.pages.set(key, page)
    this.chars += page.json.length
  }

  private clear(): void {
    this.pages.clear()
    this.chars = 0
  }
}

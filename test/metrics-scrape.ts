import assert from 'node:assert/strict'
import parsePrometheusTextFormat, { type Family, type Sample } from 'parse-prometheus-text-format'
import { request } from './http-client.js'

/** One scrape, parsed by a Prometheus text-format parser (not by us). */
export class Scrape {
  private constructor(readonly families: Map<string, Family>) {}

  /** GET `url`, with `token` (one with the metrics:read scope) unless the listener needs none. */
  static async of(url: string, token?: string): Promise<Scrape> {
    const response = await request('GET', url, { token })
    assert.equal(response.status, 200, response.text)
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
    const families = parsePrometheusTextFormat(response.text)
    return new Scrape(new Map(families.map((family) => [family.name, family])))
  }

  has(name: string): boolean {
    return this.families.has(name)
  }

  private sample(name: string, labels: Record<string, string>): Sample | undefined {
    return this.families
      .get(name)
      ?.metrics.find((sample) =>
        Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value),
      )
  }

  /** A counter's or gauge's value; 0 when that label set has not appeared yet. */
  value(name: string, labels: Record<string, string> = {}): number {
    return Number(this.sample(name, labels)?.value ?? 0)
  }

  /**
   * An unlabelled histogram's number of observations. (The parser merges the samples of a
   * labelled histogram into one, so a labelled one is checked through a counter instead.)
   */
  count(name: string): number {
    const family = this.families.get(name)
    assert.equal(family?.type, 'HISTOGRAM', name)
    return Number(family.metrics[0]?.count ?? 0)
  }

  type(name: string): string | undefined {
    return this.families.get(name)?.type
  }
}

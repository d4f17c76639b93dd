/**
 * @plant-store/client in Chromium, loaded from two page origins: one that CORS_ORIGINS lists, and
 * one it does not, whose call the browser refuses with a bare `TypeError: Failed to fetch`.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { build } from 'esbuild'
import { type Browser, chromium } from 'playwright-core'
import { freePort, projectRoot, startService, type TestService } from '../helpers.js'

/** Debian's chromium package (CI installs it); never a browser downloaded by Playwright. */
const CHROMIUM = '/usr/bin/chromium'

interface Outcome {
  id?: string
  error?: { name: string; status: number; code: string; message: string }
}

/** Runs in the page: imports the bundled client, creates and reads one plant, or reports the error. */
async function createAndRead({
  baseUrl,
  token,
  id,
}: {
  baseUrl: string
  token: string
  id: string
}): Promise<Outcome> {
  const { PlantStoreClient } = (await import('/client.js' as string)) as typeof import('@plant-store/client')
  const client = new PlantStoreClient({ baseUrl, token, maxAttempts: 1 })
  try {
    await client.createPlant({ id: BigInt(id), name: 'From a page' })
    return { id: String((await client.getPlant(BigInt(id))).id) }
  } catch (error) {
    const { name, status, code, message } = error as Error & { status: number; code: string }
    return { error: { name, status, code, message } }
  }
}

describe('@plant-store/client in a real browser', () => {
  let service: TestService
  let browser: Browser
  const pages: http.Server[] = []
  let allowed: string
  let refused: string

  before(async () => {
    allowed = `http://127.0.0.1:${await freePort()}`
    refused = `http://127.0.0.1:${await freePort()}`
    service = await startService('sqlite', { CORS_ORIGINS: allowed })
    const bundled = await build({
      entryPoints: [path.join(projectRoot, 'clients/typescript/dist/index.js')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    })
    const script = bundled.outputFiles[0]!.contents
    for (const origin of [allowed, refused]) {
      const server = http.createServer((request, response) => {
        if (request.url === '/client.js')
          response.writeHead(200, { 'content-type': 'text/javascript' }).end(script)
        else response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>')
      })
      await new Promise<void>((resolve) => server.listen(Number(new URL(origin).port), '127.0.0.1', resolve))
      pages.push(server)
    }
    // Running as root (CI containers), Chromium refuses to start with its sandbox.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
  })
  after(async () => {
    await browser?.close()
    for (const server of pages) {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
    await service?.close()
  })

  const open = async (origin: string) => {
    const page = await browser.newPage()
    await page.goto(`${origin}/`)
    return page
  }

  it('creates and reads an exact id from a page whose origin CORS_ORIGINS lists', async () => {
    const page = await open(allowed)
    const outcome = await page.evaluate(createAndRead, {
      baseUrl: service.url,
      token: await service.token(),
      id: '9007199254740993',
    })
    assert.deepEqual(outcome, { id: '9007199254740993' })
  })

  it('names CORS_ORIGINS when the browser refuses a call from another origin', async () => {
    const page = await open(refused)
    const outcome = await page.evaluate(createAndRead, {
      baseUrl: service.url,
      token: await service.token(),
      id: '9007199254740995',
    })
    assert.equal(outcome.error?.name, 'PlantStoreError')
    assert.equal(outcome.error?.status, 0)
    assert.equal(outcome.error?.code, 'NETWORK_ERROR')
    assert.match(outcome.error?.message ?? '', /^the request failed: Failed to fetch \(/)
    assert.match(outcome.error?.message ?? '', /CORS_ORIGINS/)
    assert.ok(outcome.error?.message.includes(refused), outcome.error?.message)
    // The refusal is the browser's: the preflight was answered, without this origin.
    const preflight = await fetch(`${service.url}/plants`, {
      method: 'OPTIONS',
      headers: { origin: refused, 'access-control-request-method': 'POST' },
    })
    assert.equal(preflight.headers.get('access-control-allow-origin'), null)
  })
})

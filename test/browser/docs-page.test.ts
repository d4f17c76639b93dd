import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Browser, chromium, type Page } from 'playwright-core'
import { startService, type TestService } from '../helpers.js'
import { request } from '../http-client.js'

/** Debian's chromium package (CI installs it); never a browser downloaded by Playwright. */
const CHROMIUM = '/usr/bin/chromium'

describe('GET /docs in a real browser', () => {
  let service: TestService
  let browser: Browser
  let page: Page
  const consoleErrors: string[] = []
  const requested: string[] = []

  before(async () => {
    service = await startService('sqlite')
    // Running as root (CI containers), Chromium refuses to start with its sandbox.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    page = await browser.newPage()
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text())
    })
    page.on('pageerror', (error) => consoleErrors.push(error.message))
    page.on('request', (sent) => requested.push(sent.url()))
    const landed = await page.goto(`${service.url}/`)
    assert.equal(landed?.status(), 200)
    await page.locator('.opblock').first().waitFor()
  })
  after(async () => {
    await browser?.close()
    await service?.close()
  })

  it('is reached from GET /, renders with no console error and loads nothing from elsewhere', () => {
    assert.equal(new URL(page.url()).pathname, '/docs')
    assert.equal(page.url().startsWith(service.url), true)
    assert.deepEqual(consoleErrors, [])
    assert.ok(requested.length >= 5, `expected the page and its assets, saw ${requested.length}`)
    const elsewhere = requested.filter(
      (url) => !url.startsWith(`${service.url}/`) && !url.startsWith('data:'),
    )
    assert.deepEqual(elsewhere, [])
  })

  it('shows the four plant operations and the newPlant webhook', async () => {
    const operations = await page.locator('.opblock').evaluateAll((blocks) => blocks.map((block) => block.id))
    for (const id of [
      'operations-plants-addPlant',
      'operations-plants-listPlants',
      'operations-plants-getPlant',
      'operations-plants-deletePlant',
    ])
      assert.ok(operations.includes(id), `${id} in ${operations.join(', ')}`)
    assert.ok(
      operations.some((id) => /newPlant/.test(id)),
      `a newPlant webhook in ${operations.join(', ')}`,
    )
  })

  it('creates a plant with its own "Try it out" and the token pasted under Authorize', async () => {
    const token = await service.token()
    await page.locator('button.authorize').first().click()
    const bearer = page.locator('.auth-container').filter({ hasText: 'bearerAuth' })
    await bearer.locator('input').fill(token)
    await bearer.locator('button.authorize').click()
    await page.locator('.dialog-ux button.close-modal').click()

    const create = page.locator('#operations-plants-addPlant')
    await create.locator('.opblock-summary').click()
    await create.locator('button.try-out__btn').click()
    await create
      .locator('textarea.body-param__text')
      .fill('{"id": 4242, "name": "Sown in the browser", "tag": "docs"}')
    const [answer] = await Promise.all([
      page.waitForResponse((response) => response.url() === `${service.url}/plants`),
      create.locator('button.execute').click(),
    ])
    assert.equal(answer.status(), 200)
    assert.equal(answer.request().headers().authorization, `Bearer ${token}`)
    await create.locator('.live-responses-table .response .response-col_status').first().waitFor()
    assert.match(
      await create.locator('.live-responses-table .response .response-col_status').first().innerText(),
      /200/,
    )

    const stored = await request('GET', `${service.url}/plants/4242`, { token })
    assert.equal(stored.status, 200)
    assert.deepEqual(stored.json, { id: 4242, name: 'Sown in the browser', tag: 'docs' })
  })

  it('opens no CORS and leaves the API answering as before', async () => {
    const docs = await fetch(`${service.url}/docs`, { headers: { origin: 'https://elsewhere.example' } })
    assert.equal(docs.headers.get('access-control-allow-origin'), null)
    assert.match(docs.headers.get('content-security-policy') ?? '', /default-src 'none'/)
    const preflight = await request('OPTIONS', `${service.url}/plants`, {
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'POST' },
    })
    assert.equal(preflight.status, 405)
    assert.equal(preflight.headers.get('access-control-allow-origin'), null)
    const unauthenticated = await request('GET', `${service.url}/plants`)
    assert.equal(unauthenticated.status, 401)
  })
})

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type Browser, chromium, type Locator, type Page } from 'playwright-core'
import { startService, type TestService, waitFor } from '../helpers.js'
import { request } from '../http-client.js'

/** Debian's chromium package (CI installs it); never a browser downloaded by Playwright. */
const CHROMIUM = '/usr/bin/chromium'
/** One above 2^53: JSON.parse reads it as 9007199254740992. */
const EXACT_ID = '9007199254740993'

/** Opens an operation, presses "Try it out" and returns the operation's block. */
async function tryItOut(page: Page, operationId: string): Promise<Locator> {
  const block = page.locator(`#operations-plants-${operationId}`)
  await block.locator('.opblock-summary').click()
  await block.locator('button.try-out__btn').click()
  return block
}

/** Presses Execute and returns the live answer's body as the page shows it. */
async function execute(page: Page, block: Locator, path: string): Promise<string> {
  const [answer] = await Promise.all([
    page.waitForResponse((response) => new URL(response.url()).pathname === path),
    block.locator('button.execute').click(),
  ])
  assert.equal(answer.status(), 200, await answer.text())
  const body = block.locator('.live-responses-table .response-col_description .highlight-code').first()
  await body.waitFor()
  return body.innerText()
}

describe('GET /docs in a real browser', () => {
  let service: TestService
  let browser: Browser
  let page: Page
  let token: string
  const consoleErrors: string[] = []
  const requested: string[] = []

  before(async () => {
    service = await startService('sqlite')
    token = await service.token()
    // Running as root (CI containers), Chromium refuses to start with its sandbox.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
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

  it("reads as Plant Store's reference: its introduction, its icon, no other product's bar", async () => {
    const introduction = await page.locator('.information-container .description').innerText()
    assert.match(introduction, /Plant Store keeps plants/)
    assert.match(introduction, /docs\/api\.md/)
    assert.doesNotMatch(introduction, /sample API|Decisions where/)
    assert.ok(introduction.length < 1000, `a short introduction, not ${introduction.length} characters`)
    // Swagger UI's top bar carried Fastify's logo and an "Explore" box for loading other documents.
    assert.equal(await page.locator('.topbar').count(), 0)
    assert.equal(await page.getByText('Explore', { exact: true }).count(), 0)
    assert.deepEqual(
      await page.locator('link[rel="icon"]').evaluateAll((links) => links.map((l) => l.getAttribute('type'))),
      ['image/svg+xml'],
    )
    assert.ok(requested.some((url) => url.endsWith('/docs/static/theme/favicon.svg')))
  })

  it('has no empty tag above the Webhooks section', async () => {
    const tags = await page
      .locator('.opblock-tag-section h3')
      .evaluateAll((headings) => headings.map((heading) => heading.getAttribute('data-tag')))
    assert.deepEqual(tags, ['plants', 'service'])
    await page.locator('.webhooks').getByText('newPlant', { exact: true }).waitFor()
  })

  it('names every schema with a real type, never "any"', async () => {
    const schemas = page.locator('section.models')
    // Swagger UI resolves the $refs once the section renders; until then NewPlant reads (any & object).
    const labels = await waitFor('the schemas resolved', async () => {
      const found = await schemas
        .locator('.json-schema-2020-12-head')
        .evaluateAll((heads) =>
          heads.map((head) =>
            ['title', 'attribute--primary']
              .map((part) => head.querySelector(`.json-schema-2020-12__${part}`)?.textContent ?? '')
              .join(' '),
          ),
        )
      return found.some((label) => /\bany\b/.test(label)) ? undefined : found
    })
    for (const [name, type] of [
      ['Plant', 'object'],
      ['NewPlant', 'object'],
      ['StoredPlant', 'object'],
      ['PlantList', 'array<object>'],
      ['Error', 'object'],
    ])
      assert.ok(labels.includes(`${name} ${type}`), `${name} ${type} in ${labels.join(' | ')}`)
  })

  it('asks Authorize only for the bearer token', async () => {
    await page.locator('button.authorize').first().click()
    const dialog = page.locator('.dialog-ux')
    // The token is entered before the checks, so the tests after this one run authorized either way.
    try {
      const schemes = dialog.locator('.auth-container')
      const bearer = schemes.filter({ hasText: 'bearerAuth' })
      await bearer.locator('input').fill(token)
      await bearer.locator('button.authorize').click()
      assert.equal(await schemes.count(), 1, await dialog.innerText())
      assert.doesNotMatch(await dialog.innerText(), /webhook/i)
    } finally {
      await dialog.locator('button.close-modal').click()
    }
  })

  it('creates a plant with its own "Try it out", sent with the pasted token', async () => {
    const create = await tryItOut(page, 'addPlant')
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

  it('creates 9007199254740993 from the page and shows it back with every digit', async () => {
    const create = page.locator('#operations-plants-addPlant')
    await create
      .locator('textarea.body-param__text')
      .fill(`{"id": ${EXACT_ID}, "name": "Exact to the last digit"}`)
    await execute(page, create, '/plants')
    const stored = await request('GET', `${service.url}/plants/${EXACT_ID}`, { token })
    assert.equal(stored.status, 200)
    assert.match(stored.text, new RegExp(`"id":${EXACT_ID}\\b`))

    const read = await tryItOut(page, 'getPlant')
    await read.locator('tr[data-param-name="id"] input').fill(EXACT_ID)
    const shown = await execute(page, read, `/plants/${EXACT_ID}`)
    assert.match(shown, new RegExp(`"id": ${EXACT_ID}\\b`), shown)
    assert.doesNotMatch(shown, /9007199254740992/)
    // Every digit is on screen: the text is rendered, not only present in the DOM.
    await read.getByText(EXACT_ID, { exact: true }).first().waitFor({ state: 'visible' })
    const screenshot = process.env.DOCS_SCREENSHOT
    if (screenshot) {
      // From the id typed in, through the request URL, to the answer's body and headers.
      const top = await read.locator('tr[data-param-name="id"]').boundingBox()
      const bottom = await read.locator('.live-responses-table').boundingBox()
      const scrolled = Number(await page.evaluate('window.scrollY'))
      assert.ok(top && bottom)
      await page.screenshot({
        path: screenshot,
        fullPage: true,
        clip: { x: 0, y: scrolled + top.y - 10, width: 1280, height: bottom.y + bottom.height - top.y + 20 },
      })
    }
  })

  it('lists with nothing pre-filled that filters: plants -3 and 5 are on the page', async () => {
    for (const [id, name] of [
      ['-3', 'Below zero'],
      ['5', 'Five'],
    ]) {
      const created = await request('POST', `${service.url}/plants`, {
        token,
        body: `{"id":${id},"name":"${name}"}`,
      })
      assert.equal(created.status, 200)
    }
    const list = await tryItOut(page, 'listPlants')
    for (const parameter of ['after', 'tag'])
      assert.equal(await list.locator(`tr[data-param-name="${parameter}"] input`).inputValue(), '', parameter)
    const shown = await execute(page, list, '/plants')
    const url = await list.locator('.request-url pre').innerText()
    assert.equal(new URL(url).searchParams.has('after'), false, url)
    const ids = [...shown.matchAll(/"id": (-?\d+)/g)].map((match) => match[1])
    assert.deepEqual(ids, ['-3', '5', '4242', EXACT_ID])
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

  it('logged no console error while the tests used it', () => {
    assert.deepEqual(consoleErrors, [])
  })
})

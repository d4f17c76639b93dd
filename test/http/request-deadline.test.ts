import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { suiteRunsHere, postgresHint, startService, type TestService } from '../helpers.js'
import { request } from '../http-client.js'
import { type Admin, pgAdmin } from '../pg-admin.js'

if (
  suiteRunsHere(
    'one store deadline per request',
    !!process.env.TEST_DATABASE_URL,
    'TEST_DATABASE_URL',
    postgresHint,
  )
) {
  describe('one store deadline per request', () => {
    // The request's deadline: DB_STATEMENT_TIMEOUT_MS + 1 s.
    const statementTimeoutMs = 3000
    const deadlineMs = statementTimeoutMs + 1000
    let service: TestService
    let admin: Admin

    before(async () => {
      service = await startService('postgres', { DB_STATEMENT_TIMEOUT_MS: String(statementTimeoutMs) })
      admin = pgAdmin(service.env.DATABASE_URL as string, 2)
    })

    after(async () => {
      await admin?.end()
      await service?.close()
    })

    it('a slow token lookup and then a slow create share one deadline: the 503 comes by it', async (t) => {
      // A token the service has not cached, so the request looks it up first.
      const token = await service.token()
      const tokens = await admin.reserve()
      const plants = await admin.reserve()
      try {
        // The lookup waits on a lock of the tokens table; the create then on a row lock of its id.
        await tokens`BEGIN`
        await tokens`LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE`
        await plants`BEGIN`
        await plants`INSERT INTO plants (id, name, created_at) VALUES (77, 'held', now())`
        const started = performance.now()
        const pending = request('POST', `${service.url}/plants`, {
          token,
          body: '{"id":77,"name":"held"}',
          timeoutMs: 15_000,
        })
        await sleep(statementTimeoutMs - 500)
        await tokens`ROLLBACK`
        const response = await pending
        const ms = performance.now() - started
        t.diagnostic(`503 after ${Math.round(ms)} ms (deadline ${deadlineMs} ms)`)
        assert.equal(response.status, 503, response.text)
        assert.match(response.headers.get('retry-after') ?? '', /^\d+$/)
        // Per call, the create would have had its own statement timeout after the lookup: 5.5 s.
        assert.ok(ms < deadlineMs + 800, `the 503 took ${Math.round(ms)} ms, past the request's deadline`)
      } finally {
        await tokens`ROLLBACK`.catch(() => {})
        await plants`ROLLBACK`.catch(() => {})
        tokens.release()
        plants.release()
      }
    })
  })
}

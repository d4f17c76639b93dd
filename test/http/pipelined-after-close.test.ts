/** A request pipelined behind an answer that closed the connection is never handled. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService, testStores } from '../helpers.js'
import { exchange, parseAnswers, requestBytes } from '../raw-http.js'

for (const store of testStores()) {
  describe(`pipelining behind a closing answer (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    const create = (id: number, version = 'HTTP/1.1', extra: [string, string][] = []) => {
      const body = `{"id":${id},"name":"behind"}`
      const headers: [string, string][] = [
        ['Authorization', `Bearer ${token}`],
        ['Content-Type', 'application/json'],
        ['Content-Length', String(body.length)],
        ...extra,
      ]
      return requestBytes('POST', '/plants', headers, body, version)
    }

    const chunkedCreate = (id: number) => {
      const body = `{"id":${id},"name":"behind"}`
      const headers: [string, string][] = [
        ['Authorization', `Bearer ${token}`],
        ['Content-Type', 'application/json'],
        ['Transfer-Encoding', 'chunked'],
      ]
      return requestBytes('POST', '/plants', headers, `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`)
    }

    // Found by the fuzz suite: the create behind was stored, and its answer never sent.
    for (const [what, first, status] of [
      ['a 505 for HTTP/2.0', () => create(1, 'HTTP/2.0', [['Connection', 'keep-alive']]), 505],
      [
        'an answer to an Upgrade request',
        () =>
          create(2, 'HTTP/1.1', [
            ['Connection', 'upgrade'],
            ['Upgrade', 'x'],
          ]),
        200,
      ],
    ] as const) {
      it(`stores nothing sent behind ${what}, and answers only the first`, async () => {
        const answers = parseAnswers(await exchange(service.url, first() + chunkedCreate(77)))
        assert.deepEqual(
          answers.map((answer) => [answer.status, answer.headers.connection?.[0]]),
          [[status, 'close']],
        )
        const behind = parseAnswers(
          await exchange(
            service.url,
            requestBytes('GET', '/plants/77', [['Authorization', `Bearer ${token}`]]),
          ),
        )
        assert.equal(behind[0]?.status, 404, 'the create behind the closing answer was stored')
      })
    }
  })
}

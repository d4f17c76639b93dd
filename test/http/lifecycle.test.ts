import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { closeSync, existsSync, openSync } from 'node:fs'
import net from 'node:net'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type SpawnedService,
  waitFor,
  cliPath,
  freePort,
  serviceEnv,
  spawnService,
  testStores,
  startServiceProcess,
} from '../helpers.js'
import { request } from '../http-client.js'
import { Scrape } from '../metrics-scrape.js'

/** Waits (up to 60 s, as spawnService) for a service started outside spawnService to answer /healthz. */
async function untilHealthy(port: number): Promise<void> {
  await waitFor(
    'the service to answer /healthz',
    () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok),
    60_000,
  )
}

/** After a SIGTERM: the service says it is shutting down, and a new connection is refused. */
async function untilRefusing(service: SpawnedService): Promise<void> {
  await waitFor('the shutdown to begin', () => /shutting down/.test(service.output()))
  await waitFor('new connections to be refused', () =>
    fetch(`${service.url}/healthz`).then(
      () => false,
      () => true,
    ),
  )
}

/**
 * Waits until the service counts the POST as in flight besides the scrape itself (its metrics'
 * in-flight gauge), that is, until it has read the request's head: no client sees that otherwise.
 */
async function untilInFlight(url: string, token: string): Promise<void> {
  await waitFor(
    'the request in flight',
    async () => (await Scrape.of(`${url}/metrics`, token)).value('plant_store_http_requests_in_flight') >= 2,
  )
}

/**
 * A POST /plants whose body is only partly sent, so it is in flight when a signal lands; `rest` is
 * what completes it, and `reply` collects what the server sends back on the connection.
 */
async function postInFlight(url: string, token: string, body: string) {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  let received = ''
  socket.on('data', (chunk) => {
    received += chunk.toString()
  })
  socket.write(
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
  )
  return { socket, rest: body.slice(10), reply: () => received }
}

for (const store of testStores()) {
  describe(`the service as a process (${store})`, () => {
    // The in-flight tests read the metrics to see their request taken.
    const scopes = 'plants:read,plants:write,metrics:read'
    // SQLite at either sync level keeps what it acknowledged when only the process dies.
    const variants: Record<string, string>[] = store === 'sqlite' ? [{}, { SQLITE_SYNC: 'normal' }] : [{}]
    for (const extra of variants) {
      it(`keeps every acknowledged plant across kill -9 ${JSON.stringify(extra)}`, async () => {
        const {
          env,
          token,
          service: first,
        } = await startServiceProcess(store, { env: extra, name: 'lifecycle' })
        // Ids far apart land on different pages of the table and of the tag index.
        const ids = Array.from(
          { length: 200 },
          (_, i) => 9007199254740993n + BigInt(i) * 45_035_996_273_704_963n,
        )
        const acknowledged: bigint[] = []
        await Promise.all(
          ids.map(async (id) => {
            const response = await request('POST', `${first.url}/plants`, {
              token,
              body: `{"id":${id},"name":"durable ${id}"}`,
            })
            if (response.status === 200) acknowledged.push(id)
          }),
        )
        first.child.kill('SIGKILL')
        await first.exited
        assert.equal(acknowledged.length, ids.length)

        const second = await spawnService({ ...env, KEEP_DATABASE: '1' })
        try {
          for (const id of acknowledged) {
            const response = await request('GET', `${second.url}/plants/${id}`, { token })
            assert.equal(response.status, 200, `plant ${id} was acknowledged but lost`)
            assert.equal(response.text, `{"id":${id},"name":"durable ${id}"}`)
          }
        } finally {
          second.child.kill('SIGKILL')
          await second.exited
        }
      })
    }

    it('on SIGTERM finishes the request in flight, serves one pipelined behind it, refuses new connections, exits 0', async () => {
      const { env, token, service } = await startServiceProcess(store, { name: 'lifecycle', scopes })
      await request('POST', `${service.url}/plants`, { token, body: { id: 76, name: 'before' } })
      // A request whose body is still arriving when the signal lands.
      const { socket, rest, reply } = await postInFlight(service.url, token, '{"id":77,"name":"in flight"}')
      await untilInFlight(service.url, token)
      service.child.kill('SIGTERM')
      await untilRefusing(service)
      await assert.rejects(fetch(`${service.url}/healthz`), 'a new connection was accepted while draining')
      // A request that arrives on an open connection during the drain is served, and told to close.
      socket.write(`${rest}GET /plants/76 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`)
      const code = await service.exited
      await new Promise((resolve) => setTimeout(resolve, 50))
      const [first, second] = reply().split(/(?=HTTP\/1\.1 )/)
      assert.match(first ?? '', /^HTTP\/1\.1 200/)
      // Keep-alive still: a request is pipelined behind it, and it is answered.
      assert.doesNotMatch(first ?? '', /\r\nconnection: close\r\n/i)
      assert.match(second ?? '', /^HTTP\/1\.1 200 OK\r\n/, reply())
      assert.match(second ?? '', /\r\nconnection: close\r\n/i)
      assert.match(second ?? '', /\{"id":76,"name":"before"\}$/)
      assert.equal(code, 0)
      socket.destroy()
      const restarted = await spawnService({ ...env, KEEP_DATABASE: '1' })
      try {
        assert.equal((await request('GET', `${restarted.url}/plants/77`, { token })).status, 200)
      } finally {
        restarted.child.kill('SIGTERM')
        assert.equal(await restarted.exited, 0)
      }
    })

    it('on SIGTERM tells a request in flight to close its connection, so the client does not reuse it', async () => {
      const { token, service } = await startServiceProcess(store, { name: 'lifecycle', scopes })
      const { socket, rest, reply } = await postInFlight(service.url, token, '{"id":78,"name":"last one"}')
      await untilInFlight(service.url, token)
      service.child.kill('SIGTERM')
      await waitFor('the shutdown to begin', () => /shutting down/.test(service.output()))
      socket.write(rest)
      const code = await service.exited
      assert.match(reply(), /^HTTP\/1\.1 200 OK\r\n/, reply())
      assert.match(reply(), /\r\nconnection: close\r\n/i, reply())
      assert.doesNotMatch(reply(), /keep-alive/i, reply())
      assert.equal(code, 0)
      socket.destroy()
    })

    it('exits 0 on SIGTERM when whoever read its log output has gone away', async () => {
      // As `serve 2>&1 | head -c 300` leaves it: the reader goes after the first lines, and every
      // later log write fails with EPIPE. pino's own stream (sonic-boom) retried those at exit for
      // ever; the service's log destination (src/observability/log-destination.ts) gives up on them.
      const port = await freePort()
      const env = { ...process.env, ...(await serviceEnv(store)), PORT: String(port), LOG_LEVEL: 'info' }
      const shell = spawn(
        'bash',
        ['-c', `"${process.execPath}" "${cliPath}" serve 2>&1 | head -c 300 >/dev/null`],
        {
          env,
          stdio: 'ignore',
        },
      )
      const exited = new Promise<number | null>((resolve) => shell.on('exit', (code) => resolve(code)))
      await untilHealthy(port)
      const servicePid = Number(
        execFileSync('pgrep', ['-P', String(shell.pid), '-f', cliPath], { encoding: 'utf8' }),
      )
      process.kill(servicePid, 'SIGTERM')
      // The pipeline's status is head's; the shell exits only once the service has.
      const code = await Promise.race([exited, sleep(10_000).then(() => 'still running')])
      if (code === 'still running') process.kill(servicePid, 'SIGKILL')
      assert.notEqual(code, 'still running', 'the service did not exit on SIGTERM')
    })

    it('serves and exits 0 on SIGTERM with its log output on a full disk, and counts the lost lines on stderr', async (t) => {
      if (!existsSync('/dev/full')) return t.skip('no /dev/full on this system')
      const port = await freePort()
      const env = { ...process.env, ...(await serviceEnv(store)), PORT: String(port), LOG_LEVEL: 'info' }
      const full = openSync('/dev/full', 'w')
      const child = spawn(process.execPath, [cliPath, 'serve'], { env, stdio: ['ignore', full, 'pipe'] })
      closeSync(full)
      let stderr = ''
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      await untilHealthy(port)
      assert.equal((await fetch(`http://127.0.0.1:${port}/plants/1`)).status, 401)
      child.kill('SIGTERM')
      const code = await Promise.race([exited, sleep(10_000).then(() => 'still running')])
      if (code === 'still running') child.kill('SIGKILL')
      assert.equal(code, 0, stderr)
      assert.match(stderr, /"dropped":\d+/, stderr)
      assert.match(stderr, /log lines could not be written to stdout \(ENOSPC\)/, stderr)
    })

    it('on SIGTERM closes a connection that has sent nothing, and exits without waiting for it', async () => {
      const service = await spawnService(await serviceEnv(store, { SHUTDOWN_TIMEOUT_MS: '20000' }))
      const silent = net.connect(Number(new URL(service.url).port), '127.0.0.1')
      silent.on('data', () => {})
      await new Promise((resolve) => silent.once('connect', resolve))
      const closed = new Promise<number>((resolve) => silent.once('close', () => resolve(Date.now())))
      // A connection that has been silent for a while, not one the server has only just accepted.
      await sleep(200)
      const signalled = Date.now()
      service.child.kill('SIGTERM')
      const code = await Promise.race([service.exited, sleep(5_000).then(() => 'still running')])
      if (code === 'still running') service.child.kill('SIGKILL')
      assert.equal(code, 0, 'the service waited for a connection that had sent nothing')
      assert.ok((await closed) - signalled < 5_000)
    })

    it('on SIGTERM answers a request that arrives on a connection accepted just before, with Connection: close', async () => {
      const service = await spawnService(await serviceEnv(store, { SHUTDOWN_TIMEOUT_MS: '20000' }))
      const late = net.connect(Number(new URL(service.url).port), '127.0.0.1')
      let received = ''
      late.on('data', (chunk) => (received += chunk))
      await new Promise((resolve) => late.once('connect', resolve))
      const closed = new Promise<void>((resolve) => late.once('close', () => resolve()))
      late.on('error', () => {})
      service.child.kill('SIGTERM')
      await waitFor('the shutdown to begin', () => /shutting down/.test(service.output()))
      // Past the drain's first sweeps (every 100 ms): a connection silent until now is still young.
      await sleep(300)
      late.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
      await closed
      assert.match(received, /^HTTP\/1\.1 200 /, `answered: ${JSON.stringify(received)}`)
      assert.match(received, /\r\nconnection: close\r\n/i, received)
      assert.equal(await service.exited, 0)
    })

    it('exits 0 on SIGINT', async () => {
      const service = await spawnService(await serviceEnv(store))
      service.child.kill('SIGINT')
      assert.equal(await service.exited, 0)
      assert.match(service.output(), /stopped/)
    })

    /** Sends a request line, then a header every 200 ms; resolves when the server hangs up. */
    async function trickleHeaders(url: string, patienceMs: number) {
      const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
      socket.on('error', () => {}) // a write after the server hung up is expected here
      let received = ''
      socket.on('data', (chunk) => (received += chunk))
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())))
      const started = Date.now()
      socket.write('GET /healthz HTTP/1.1\r\n')
      const trickle = setInterval(() => socket.writable && socket.write('X-Slow: a\r\n'), 200)
      const end = await Promise.race([closed, sleep(patienceMs).then(() => 0)])
      clearInterval(trickle)
      socket.destroy()
      assert.ok(end > 0, 'the slow client was never cut off')
      return { afterMs: end - started, received }
    }

    it('cuts off a client that trickles its headers within HEADERS_TIMEOUT_MS, with a 408 Error', async () => {
      const service = await spawnService(await serviceEnv(store, { HEADERS_TIMEOUT_MS: '1500' }))
      try {
        const { afterMs, received } = await trickleHeaders(service.url, 8000)
        assert.ok(afterMs >= 1500, `cut off after ${afterMs} ms`)
        assert.match(received, /^HTTP\/1\.1 408 Request Timeout\r\n/)
        assert.match(received, /content-type: application\/json/i)
        const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))
        assert.equal(body.error, 408)
        assert.equal(body.code, 'REQUEST_TIMEOUT')
        // The log line travels through a pipe.
        await waitFor('the 408 log line', () => /"status":408.*"client error"/.test(service.output()), 2_000)
      } finally {
        service.child.kill('SIGKILL')
        await service.exited
      }
    })

    it('closes a connection that sends nothing within HEADERS_TIMEOUT_MS, with a 408 Error', async () => {
      const service = await spawnService(await serviceEnv(store, { HEADERS_TIMEOUT_MS: '1000' }))
      try {
        const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1')
        let received = ''
        socket.on('data', (chunk) => (received += chunk))
        const started = Date.now()
        const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())))
        const end = await Promise.race([closed, sleep(8000).then(() => 0)])
        socket.destroy()
        assert.ok(end > 0, 'a connection that sent nothing was never closed')
        assert.ok(end - started >= 1000, `closed after ${end - started} ms`)
        assert.match(received, /^HTTP\/1\.1 408 Request Timeout\r\n/)
      } finally {
        service.child.kill('SIGKILL')
        await service.exited
      }
    })

    /**
     * Sends `bytes` (then a FIN with `finish`) and waits up to `patienceMs` for the server to hang
     * up. A body that stopped arriving was never answered and its socket held for good, CLOSE-WAIT
     * after the client left: the parser's error waited for the answer to that very request.
     */
    async function sendAndWaitForClose(url: string, bytes: string, finish: boolean, patienceMs: number) {
      const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
      socket.on('error', () => {})
      let received = ''
      socket.on('data', (chunk) => (received += chunk))
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())))
      const started = Date.now()
      socket.write(bytes)
      if (finish) socket.end()
      const end = await Promise.race([closed, sleep(patienceMs).then(() => 0)])
      socket.destroy()
      assert.ok(end > 0, `never answered and closed: ${JSON.stringify(received)}`)
      return { afterMs: end - started, received }
    }

    it('answers a body that stops arriving, with or without a FIN or bad chunking, and closes', async () => {
      const { token, service } = await startServiceProcess(store, {
        env: { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000' },
        name: 'lifecycle',
      })
      try {
        const head = (framing: string) =>
          `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          `Content-Type: application/json\r\n${framing}\r\n`
        const stalled = await sendAndWaitForClose(
          service.url,
          `${head('Content-Length: 30\r\n')}{"id":5`,
          false,
          8000,
        )
        assert.match(stalled.received, /^HTTP\/1\.1 408 /)
        assert.ok(stalled.afterMs >= 2000, `cut off after ${stalled.afterMs} ms`)
        const halfSent = await sendAndWaitForClose(
          service.url,
          `${head('Content-Length: 30\r\n')}{"id":6`,
          true,
          1500,
        )
        assert.match(halfSent.received, /^HTTP\/1\.1 400 /)
        const badChunk = await sendAndWaitForClose(
          service.url,
          `${head('Transfer-Encoding: chunked\r\n')}zz\r\n{"id":7,"name":"x"}\r\n0\r\n\r\n`,
          false,
          1500,
        )
        assert.match(badChunk.received, /^HTTP\/1\.1 400 /)
        const body = JSON.parse(badChunk.received.slice(badChunk.received.indexOf('\r\n\r\n') + 4))
        assert.equal(body.code, 'BAD_HTTP_REQUEST')
        for (const id of [5, 6, 7]) {
          assert.equal((await request('GET', `${service.url}/plants/${id}`, { token })).status, 404)
        }
      } finally {
        service.child.kill('SIGKILL')
        await service.exited
      }
    })

    if (store === 'sqlite') {
      for (const [viaNpm, command] of [
        ['start', 'npm start'],
        ['cli', 'npm run cli -- serve'],
      ] as const)
        it(`stops gracefully, exit 0, when \`${command}\` itself gets SIGTERM`, async () => {
          const service = await spawnService(await serviceEnv(store), [], { viaNpm })
          const nodePid = Number(/"pid":(\d+)/.exec(service.output())?.[1])
          assert.ok(nodePid > 0 && nodePid !== service.child.pid, service.output())
          service.child.kill('SIGTERM')
          const code = await Promise.race([service.exited, sleep(10_000).then(() => 'still running')])
          const alive = () => {
            try {
              process.kill(nodePid, 0)
              return true
            } catch {
              return false
            }
          }
          for (let i = 0; i < 50 && alive(); i++) await sleep(100)
          if (alive()) process.kill(nodePid, 'SIGKILL')
          if (code === 'still running') service.child.kill('SIGKILL')
          assert.equal(code, 0, `${command} exits 0`)
          assert.equal(alive(), false, 'the server outlived npm')
          assert.match(service.output(), /"reason":"SIGTERM".*\n(.*\n)*.*"msg":"stopped"/)
        })

      it('cuts off a trickling client within 10 s with the default settings', async () => {
        const service = await spawnService(await serviceEnv(store))
        try {
          const { afterMs, received } = await trickleHeaders(service.url, 15_000)
          assert.ok(afterMs < 10_000, `cut off only after ${afterMs} ms`)
          assert.match(received, /^HTTP\/1\.1 408 /)
        } finally {
          service.child.kill('SIGKILL')
          await service.exited
        }
      })
    }

    it('closes idle keep-alive connections after KEEP_ALIVE_TIMEOUT_MS', async () => {
      const service = await spawnService(await serviceEnv(store, { KEEP_ALIVE_TIMEOUT_MS: '300' }))
      try {
        const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1')
        socket.resume()
        const closed = new Promise<boolean>((resolve) => socket.once('close', () => resolve(true)))
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        assert.equal(await Promise.race([closed, sleep(5000).then(() => false)]), true)
      } finally {
        service.child.kill('SIGKILL')
        await service.exited
      }
    })

    it('says how to create the first token when the token store is empty', async () => {
      const service = await spawnService(await serviceEnv(store))
      service.child.kill('SIGTERM')
      await service.exited
      const hints = service
        .output()
        .split('\n')
        .filter((line) => line.includes('tokens create'))
      assert.equal(hints.length, 1)
    })

    it('logs one JSON line per request with id, method, route, status and duration, never the token', async () => {
      const { token, service } = await startServiceProcess(store, { name: 'lifecycle' })
      await request('GET', `${service.url}/plants/123`, { token, headers: { 'x-request-id': 'log-check-1' } })
      // RFC 6750's query form is refused, and its token kept out of the log line all the same.
      const inQuery = await request('GET', `${service.url}/plants?limit=1&access_token=${token}`, {
        headers: { 'x-request-id': 'log-check-2' },
      })
      assert.equal(inQuery.status, 400)
      // Spelt with percent-encoding, or sent as a request id, it stays out of the log too.
      const encoded = `/plants?access%5Ftoken=%70st_${token.slice(4)}`
      assert.equal((await request('GET', `${service.url}${encoded}`, { token })).status, 400)
      const asId = await request('GET', `${service.url}/plants/1`, {
        token,
        headers: { 'x-request-id': token },
      })
      assert.notEqual(asId.headers.get('x-request-id'), token)
      // A path the router cannot decode runs no hook: its answer still carries the id, and is logged.
      const undecodable = await request('GET', `${service.url}/plants/%ff`, {
        token,
        headers: { 'x-request-id': 'log-check-3' },
      })
      assert.equal(undecodable.status, 400)
      assert.equal(undecodable.headers.get('x-request-id'), 'log-check-3')
      service.child.kill('SIGTERM')
      await service.exited
      const lines = service
        .output()
        .split('\n')
        .filter((line) => line.includes('log-check-1'))
      assert.equal(lines.length, 1)
      const entry = JSON.parse(lines[0] as string)
      assert.equal(entry.reqId, 'log-check-1')
      assert.equal(entry.method, 'GET')
      assert.equal(entry.route, '/plants/:id')
      assert.equal(entry.status, 404)
      assert.equal(typeof entry.durationMs, 'number')
      assert.ok(!service.output().includes(token), 'the token appeared in the logs')
      const refused = service
        .output()
        .split('\n')
        .find((line) => line.includes('log-check-2'))
      assert.equal(JSON.parse(refused as string).url, '/plants?limit=1&access_token=[redacted]')
      const badPath = service
        .output()
        .split('\n')
        .find((line) => line.includes('log-check-3'))
      assert.deepEqual(
        [JSON.parse(badPath as string).status, JSON.parse(badPath as string).url],
        [400, '/plants/%ff'],
      )
    })
  })
}

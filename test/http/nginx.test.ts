import assert from 'node:assert/strict'
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  skipUnless,
  createToken,
  freePort,
  projectRoot,
  serviceEnv,
  tempDir,
  testStores,
} from '../helpers.js'
import { request } from '../http-client.js'

const demoScript = path.join(projectRoot, 'scripts/nginx-demo.sh')

function nginxInstalled(): boolean {
  if (existsSync('/usr/sbin/nginx')) return true
  try {
    execFileSync('sh', ['-c', 'command -v nginx'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

interface Demo {
  url: string
  dir: string
  child: ChildProcess
  exited: Promise<number | null>
  output: () => string
}

/** Runs scripts/nginx-demo.sh as an operator would and waits for its "ready" line. */
async function startDemo(env: Record<string, string>): Promise<Demo> {
  const dir = tempDir('plant-store-nginx-')
  const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()])
  const child = spawn('bash', [demoScript], {
    env: {
      ...process.env,
      ...env,
      LOG_LEVEL: 'info',
      DEMO_DIR: dir,
      NGINX_PORT: String(ports[0]),
      INSTANCE_PORTS: ports.slice(1).join(' '),
      // The test never installs packages; CI installs nginx beforehand.
      NGINX_DEMO_NO_INSTALL: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGTERM')
      reject(new Error(`the nginx demo did not get ready:\n${output}`))
    }, 60_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /^ready (http:\/\/127\.0\.0\.1:\d+)$/m.exec(output)
      if (match?.[1]) {
        clearTimeout(timer)
        resolve(match[1])
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    exited.then(() => {
      clearTimeout(timer)
      reject(new Error(`the nginx demo exited early:\n${output}`))
    })
  })
  return { url, dir, child, exited, output: () => output }
}

/** Which instance (1-3) logged each request id, from the per-instance logs the demo writes. */
function servedBy(dir: string, requestIds: string[]): Map<string, number> {
  const found = new Map<string, number>()
  for (const n of [1, 2, 3]) {
    const file = path.join(dir, `instance-${n}.log`)
    if (!existsSync(file)) continue
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"msg":"request"')) continue
      const reqId = (JSON.parse(line) as { reqId?: string }).reqId
      if (reqId && requestIds.includes(reqId)) found.set(reqId, n)
    }
  }
  return found
}

/**
 * Writes raw bytes on a fresh connection to `url` and parses what comes back before the server
 * closes it: for requests fetch would never send (a bad request line, an HTTP version it refuses).
 */
function rawExchange(
  url: string,
  bytes: string,
): Promise<{ status: number; headers: Map<string, string>; text: string; raw: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1', () => socket.write(bytes))
    let raw = ''
    socket.setEncoding('utf8')
    // Every exchange here ends with nginx closing; one that does not must not hang the test.
    socket.setTimeout(10_000, () => socket.destroy())
    socket.on('data', (chunk: string) => (raw += chunk))
    socket.on('error', reject)
    socket.on('close', () => {
      const [head = '', text = ''] = raw.split('\r\n\r\n', 2)
      const [statusLine = '', ...lines] = head.split('\r\n')
      const headers = new Map<string, string>()
      for (const line of lines) {
        const colon = line.indexOf(':')
        if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, text, raw })
    })
  })
}

/** True while `pid` runs (a zombie, dead but not yet reaped by its parent, counts as gone). */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return true
  }
}

describe(
  'three instances behind nginx',
  {
    skip: skipUnless(
      nginxInstalled(),
      'nginx',
      'apt-get install -y nginx, or run scripts/nginx-demo.sh once',
    ),
  },
  () => {
    for (const store of testStores()) {
      describe(`three instances behind nginx (${store}, scripts/nginx-demo.sh with deploy/nginx.conf)`, () => {
        it('spreads requests over the instances, passes X-Request-Id and errors through, and fails over', async () => {
          const env = await serviceEnv(store)
          const token = await createToken(env, 'nginx')
          const demo = await startDemo(env)
          try {
            const { url, dir } = demo

            const post = await request('POST', `${url}/plants`, {
              token,
              body: '{"id":9223372036854775807,"name":"Behind nginx","tag":"lb"}',
              headers: { 'x-request-id': 'nginx-create-1' },
            })
            assert.equal(post.status, 200, post.text)
            assert.equal(post.text, '{"name":"Behind nginx","tag":"lb"}')
            assert.equal(post.headers.get('x-request-id'), 'nginx-create-1')

            const read = await request('GET', `${url}/plants/9223372036854775807`, { token })
            assert.equal(read.status, 200)

            // The next-page link points back through nginx, with its port, and works.
            await request('POST', `${url}/plants`, { token, body: { id: 1, name: 'first' } })
            const page = await request('GET', `${url}/plants?limit=1`, { token })
            const next = /^<([^>]+)>; rel="next"$/.exec(page.headers.get('link') ?? '')?.[1]
            assert.equal(next, `${url}/plants?limit=1&after=1`)
            assert.equal((await request('GET', next, { token })).status, 200)
            assert.equal(read.text, '{"id":9223372036854775807,"name":"Behind nginx","tag":"lb"}')

            // The service's 401 comes through untouched: status, Error body and challenge.
            const unauthenticated = await request('GET', `${url}/plants`, {
              headers: { 'x-request-id': 'nginx-401' },
            })
            assert.equal(unauthenticated.status, 401)
            assert.equal(unauthenticated.json.error, 401)
            assert.match(unauthenticated.headers.get('www-authenticate') ?? '', /^Bearer realm="plant-store"/)
            assert.equal(unauthenticated.headers.get('x-request-id'), 'nginx-401')

            // Without an X-Request-Id, nginx makes one ($request_id) and the instance logs that one.
            const anonymous = await request('GET', `${url}/healthz`)
            const generated = anonymous.headers.get('x-request-id') ?? ''
            assert.match(generated, /^[0-9a-f]{32}$/)

            const ids = Array.from({ length: 12 }, (_, i) => `nginx-rr-${i}`)
            for (const id of ids) {
              const response = await request('GET', `${url}/plants/9223372036854775807`, {
                token,
                headers: { 'x-request-id': id },
              })
              assert.equal(response.status, 200)
              assert.equal(response.headers.get('x-request-id'), id)
            }
            const wanted = [...ids, 'nginx-create-1', 'nginx-401', generated]
            let served = new Map<string, number>()
            for (let i = 0; i < 50 && served.size < wanted.length; i++) {
              served = servedBy(dir, wanted)
              await sleep(50)
            }
            assert.equal(served.size, wanted.length, 'every request id reached an instance log unchanged')
            const instances = new Set(ids.map((id) => served.get(id)))
            assert.ok(instances.size > 1, `all requests went to instance ${[...instances].join(', ')}`)
            assert.match(
              readFileSync(path.join(dir, 'access.log'), 'utf8'),
              /rid=nginx-rr-0 upstream=127\.0\.0\.1:\d+/,
            )

            // An instance dies: connections to it are refused, and nginx moves the request on, even
            // a POST (nothing was sent to the dead one). Nothing reaches the client but 200s.
            const victim = Number(readFileSync(path.join(dir, 'instance-1.pid'), 'utf8'))
            process.kill(victim, 'SIGKILL')
            for (let i = 0; i < 250 && alive(victim); i++) await sleep(20)
            assert.ok(!alive(victim))
            for (let i = 0; i < 9; i++) {
              const write = await request('POST', `${url}/plants`, {
                token,
                body: `{"id":${100 + i},"name":"failover"}`,
              })
              assert.equal(write.status, 200, write.text)
              const again = await request('GET', `${url}/plants/${100 + i}`, { token })
              assert.equal(again.status, 200)
            }

            // nginx's own errors come in the Error shape too, not as its HTML pages.
            const tooBig = await request('POST', `${url}/plants`, {
              token,
              body: `"${'x'.repeat(2 * 1024 * 1024)}"`,
            })
            assert.equal(tooBig.status, 413)
            assert.match(tooBig.headers.get('content-type') ?? '', /^application\/json/)
            assert.equal(tooBig.json.error, 413)
            assert.match(tooBig.json.message, /client_max_body_size/)

            // Requests nginx refuses itself, before any instance sees them. Those refused while
            // reading the request line (400, 414, 505) have no URI yet: nginx must still answer in
            // the Error shape, not with an HTML 500 ("empty URI in redirect to named location").
            const longQuery = 'a'.repeat(9000)
            for (const [label, bytes, status] of [
              ['a bad request line', 'HELLO\r\n\r\n', 400],
              [
                'a URL over large_client_header_buffers',
                `GET /plants?x=${longQuery} HTTP/1.1\r\nHost: x\r\n\r\n`,
                414,
              ],
              ['HTTP/9.9', 'GET /plants HTTP/9.9\r\nHost: x\r\n\r\n', 505],
              ['a space in a header name', 'GET /plants HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n', 400],
              ['an HTTP/1.1 request without Host', 'GET /plants HTTP/1.1\r\n\r\n', 400],
              [
                'headers over large_client_header_buffers',
                `GET /plants HTTP/1.1\r\nHost: x\r\nX-Big: ${longQuery}\r\n\r\n`,
                431,
              ],
            ] as const) {
              const refused = await rawExchange(url, bytes)
              assert.equal(refused.status, status, `${label}:\n${refused.raw}`)
              assert.match(refused.headers.get('content-type') ?? '', /^application\/json/, label)
              const body = JSON.parse(refused.text) as { error: unknown; message: unknown }
              assert.equal(body.error, status, label)
              assert.equal(typeof body.message, 'string', label)
            }
            assert.doesNotMatch(
              readFileSync(path.join(dir, 'nginx/logs/error.log'), 'utf8'),
              /empty URI in redirect/,
            )

            // The access log has the path, never the query string (which could carry a secret).
            const accessLog = readFileSync(path.join(dir, 'access.log'), 'utf8')
            assert.match(accessLog, /"GET \/plants HTTP\/1\.1" 200 /)
            assert.doesNotMatch(accessLog, /limit=1/)
            // limit_req and limit_conn: a burst from one address past them is refused 429, in the
            // Error shape (global fetch: these are nginx's answers, not the API's).
            const burst = await Promise.all(Array.from({ length: 300 }, () => fetch(`${url}/healthz`)))
            const refusedBurst = burst.filter((answer) => answer.status === 429)
            const [firstRefused] = refusedBurst
            assert.ok(firstRefused, 'some of a 300-request burst are refused')
            assert.equal(((await firstRefused.json()) as { error: number }).error, 429)
            assert.equal(firstRefused.headers.get('retry-after'), '1')

            const pids = [2, 3].map((n) => Number(readFileSync(path.join(dir, `instance-${n}.pid`), 'utf8')))
            const nginxPid = Number(readFileSync(path.join(dir, 'nginx/nginx.pid'), 'utf8'))
            demo.child.kill('SIGTERM')
            const code = await Promise.race([
              demo.exited,
              sleep(30_000, undefined, { ref: false }).then(() => 'timeout' as const),
            ])
            assert.equal(code, 0, demo.output())
            for (const pid of [...pids, nginxPid]) assert.ok(!alive(pid), `process ${pid} outlived the demo`)
          } finally {
            if (demo.child.exitCode === null && demo.child.signalCode === null) {
              demo.child.kill('SIGTERM')
              await Promise.race([demo.exited, sleep(30_000, undefined, { ref: false })])
            }
            rmSync(demo.dir, { recursive: true, force: true })
          }
        })
      })
    }
  },
)

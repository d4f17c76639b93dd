/**
 * Raw HTTP/1.x over a socket, for what no client library sends: the bytes go out as written, the
 * sending side is shut, and everything the server writes until it closes is parsed into answers.
 */
import assert from 'node:assert/strict'
import net from 'node:net'

export interface RawAnswer {
  version: string
  status: number
  /** Lower-case names; a repeated header keeps every value, in order. */
  headers: Record<string, string[]>
  body: string
}

/** Writes `bytes`, half-closes, and resolves with everything received once the server closes. */
export function exchange(url: string, bytes: string | Buffer | (string | Buffer)[]): Promise<Buffer> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname)
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset after the answers arrived still leaves them to check.
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') resolve(Buffer.concat(chunks))
      else reject(error)
    })
    socket.on('close', () => resolve(Buffer.concat(chunks)))
    socket.on('connect', () => {
      for (const part of Array.isArray(bytes) ? bytes : [bytes]) socket.write(part)
      socket.end()
    })
  })
}

/** Splits a stream of answers (Content-Length or chunked framed, or none for 1xx/204/304). */
export function parseAnswers(received: Buffer, headRequests = 0): RawAnswer[] {
  const answers: RawAnswer[] = []
  let rest: Buffer = received
  let heads = headRequests
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) throw new Error(`an incomplete answer head: ${JSON.stringify(rest.toString('latin1'))}`)
    const [statusLine = '', ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n')
    const match = /^(HTTP\/1\.[01]) (\d{3})/.exec(statusLine)
    if (!match) throw new Error(`not an HTTP answer: ${JSON.stringify(statusLine)}`)
    const headers: Record<string, string[]> = {}
    for (const line of lines) {
      const colon = line.indexOf(':')
      const name = line.slice(0, colon).trim().toLowerCase()
      ;(headers[name] ??= []).push(line.slice(colon + 1).trim())
    }
    const status = Number(match[2])
    rest = rest.subarray(end + 4)
    if (status < 200) continue
    let body: Buffer = Buffer.alloc(0)
    const length = headers['content-length']?.[0]
    // A HEAD's answer has no body, unless the parser refused the request (and its method with it).
    const headAnswered = heads > 0 && (rest.length === 0 || rest.subarray(0, 7).toString() === 'HTTP/1.')
    const bodiless = status === 204 || status === 304 || headAnswered
    if (heads > 0) heads--
    if (!bodiless && headers['transfer-encoding']?.some((v) => /chunked/i.test(v))) {
      const parts: Buffer[] = []
      for (;;) {
        const lineEnd = rest.indexOf('\r\n')
        const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16)
        rest = rest.subarray(lineEnd + 2)
        if (size === 0) {
          rest = rest.subarray(rest.indexOf('\r\n') + 2)
          break
        }
        parts.push(rest.subarray(0, size))
        rest = rest.subarray(size + 2)
      }
      body = Buffer.concat(parts)
    } else if (!bodiless && length !== undefined) {
      body = rest.subarray(0, Number(length))
      rest = rest.subarray(Number(length))
    } else if (!bodiless) {
      body = rest
      rest = Buffer.alloc(0)
    }
    answers.push({ version: match[1] as string, status, headers, body: body.toString('utf8') })
  }
  return answers
}

/** One request's bytes: a request line, `Host: x` unless `headers` sets one, and the body as given. */
export function requestBytes(
  method: string,
  target: string,
  headers: [string, string][] = [],
  body = '',
  version = 'HTTP/1.1',
): string {
  const all = headers.some(([name]) => name.toLowerCase() === 'host') ? headers : [['Host', 'x'], ...headers]
  return `${method} ${target} ${version}\r\n${all.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n${body}`
}

/** One request over a connection of its own, and the one answer it gets. */
export async function answerTo(url: string, bytes: string): Promise<RawAnswer> {
  const [answer] = parseAnswers(await exchange(url, bytes), bytes.startsWith('HEAD ') ? 1 : 0)
  assert.ok(answer, `no answer to ${JSON.stringify(bytes.slice(0, 60))}`)
  return answer
}

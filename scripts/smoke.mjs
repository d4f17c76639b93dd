#!/usr/bin/env node
// The README's first steps, on whatever Node.js runs this: `npm start` on a fresh SQLite file, a
// token from the CLI, a create and a read of an id beyond 2^53, then a clean stop. Exits non-zero
// with the step that failed. Used by .ci/run on each Node.js line.
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-smoke-'))
const port = 20000 + Math.floor(Math.random() * 20000)
const env = { ...process.env, PORT: String(port), PLANT_STORE_DB: path.join(dir, 'plant-store.db') }
const base = `http://127.0.0.1:${port}`
const id = '9007199254740993'

const server = spawn('npm', ['start'], { env, stdio: ['ignore', 'ignore', 'inherit'] })
const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve(code ?? signal)))

async function step(name, run) {
  try {
    await run()
    console.log(`smoke: ${name}: ok`)
  } catch (error) {
    console.error(`smoke: ${name}: ${error.message}`)
    server.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(1)
  }
}

await step(`npm start answers /readyz on ${process.version}`, async () => {
  const deadline = Date.now() + 30_000
  for (;;) {
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.status,
      () => 0,
    )
    if (ready === 200) return
    if (Date.now() > deadline) throw new Error(`no 200 from /readyz within 30 s (last: ${ready})`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
})
let token = ''
await step('the CLI makes a token', () => {
  token = execFileSync('npm', ['run', '--silent', 'cli', '--', 'tokens', 'create', '--name', 'smoke'], {
    env,
  })
    .toString()
    .trim()
  if (!/^pst_[A-Za-z0-9]{43}$/.test(token)) throw new Error(`unexpected token output: ${token}`)
})
const auth = () => ({ authorization: `Bearer ${token}` })
await step('POST /plants stores a plant', async () => {
  const response = await fetch(`${base}/plants`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: `{"id":${id},"name":"Maidenhair fern","tag":"shade"}`,
  })
  const text = await response.text()
  if (response.status !== 200 || text !== '{"name":"Maidenhair fern","tag":"shade"}')
    throw new Error(`${response.status} ${text}`)
})
await step('GET /plants/{id} reads it back with every digit', async () => {
  const response = await fetch(`${base}/plants/${id}`, { headers: auth() })
  const text = await response.text()
  if (response.status !== 200 || text !== `{"id":${id},"name":"Maidenhair fern","tag":"shade"}`)
    throw new Error(`${response.status} ${text}`)
})
await step('SIGTERM stops it cleanly', async () => {
  server.kill('SIGTERM')
  const code = await exited
  if (code !== 0) throw new Error(`exit ${code}`)
})
fs.rmSync(dir, { recursive: true, force: true })

/**
 * `npm pack` of the client workspace makes a tarball with its README and LICENSE, which installs
 * into an empty folder on its own (no server dependency comes with it) and runs a create-and-read
 * script there against a running service.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { it } from 'node:test'
import { promisify } from 'node:util'
import { projectRoot, startService, tempDir } from '../helpers.js'

const run = promisify(execFile)

/** The test runs under `npm test`; its npm_* settings (workspace, prefix) must not reach these commands. */
const cleanEnv = (extra: Record<string, string> = {}) => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name))),
  ...extra,
})

const SCRIPT = `import { PlantStoreClient } from '@plant-store/client'
const client = new PlantStoreClient({ baseUrl: process.env.PLANT_STORE_URL, token: process.env.PLANT_STORE_TOKEN })
const id = BigInt(process.argv[2])
await client.createPlant({ id, name: 'Packed', tag: 'tarball' })
const plant = await client.getPlant(id)
console.log(\`\${plant.id} \${plant.name} \${plant.tag} \${typeof plant.id}\`)
`

it('packs into a tarball that installs into an empty folder and creates and reads a plant', async () => {
  const packDir = tempDir('plant-store-pack-')
  // Built by the root build already; --ignore-scripts keeps pack from building again.
  await run(
    'npm',
    ['pack', '--workspace', '@plant-store/client', '--pack-destination', packDir, '--ignore-scripts'],
    {
      cwd: projectRoot,
      env: cleanEnv(),
    },
  )
  const [tarball] = readdirSync(packDir).filter((name) => name.endsWith('.tgz'))
  assert.match(tarball ?? '', /^plant-store-client-\d+\.\d+\.\d+\.tgz$/)
  const { stdout: listing } = await run('tar', ['-tzf', path.join(packDir, tarball!)])
  const files = listing.split('\n').filter(Boolean)
  for (const file of [
    'package/README.md',
    'package/LICENSE',
    'package/dist/index.js',
    'package/dist/index.d.ts',
  ])
    assert.ok(files.includes(file), `${file} in the tarball: ${files.join(' ')}`)
  const readme = await run('tar', ['-xzOf', path.join(packDir, tarball!), 'package/README.md'])
  assert.match(readme.stdout, /^# @plant-store\/client\n/)
  const license = await run('tar', ['-xzOf', path.join(packDir, tarball!), 'package/LICENSE'])
  assert.match(license.stdout, /^MIT License\n/)

  const appDir = tempDir('plant-store-client-app-')
  writeFileSync(
    path.join(appDir, 'package.json'),
    '{ "name": "try-the-client", "private": true, "type": "module" }\n',
  )
  writeFileSync(path.join(appDir, 'try.mjs'), SCRIPT)
  await run(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--ignore-scripts',
      path.join(packDir, tarball!),
    ],
    { cwd: appDir, env: cleanEnv(), timeout: 120_000 },
  )
  const installed = readdirSync(path.join(appDir, 'node_modules')).sort()
  assert.ok(installed.includes('@plant-store'), installed.join(' '))
  for (const serverOnly of ['fastify', 'better-sqlite3', 'postgres'])
    assert.equal(existsSync(path.join(appDir, 'node_modules', serverOnly)), false, serverOnly)

  const service = await startService('sqlite')
  try {
    const env = cleanEnv({ PLANT_STORE_URL: service.url, PLANT_STORE_TOKEN: await service.token() })
    const { stdout } = await run(process.execPath, ['try.mjs', '9223372036854775807'], { cwd: appDir, env })
    assert.equal(stdout.trim(), '9223372036854775807 Packed tarball bigint')
  } finally {
    await service.close()
  }
})

/** deploy/plant-store.service: what the operations docs promise of it, and that systemd parses it. */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { skipUnless, projectRoot, tempDir } from '../helpers.js'

const unitPath = path.join(projectRoot, 'deploy', 'plant-store.service')
const unit = fs.readFileSync(unitPath, 'utf8')
const settings = (name: string) =>
  [...unit.matchAll(new RegExp(`^${name}=(.*)$`, 'gm'))].map((match) => match[1] as string)

describe('systemd unit', () => {
  it('restarts on failure, raises the file limit, reads the environment file, runs unprivileged and hardened', () => {
    assert.deepEqual(settings('Restart'), ['on-failure'])
    assert.deepEqual(settings('LimitNOFILE'), ['65536'])
    assert.deepEqual(settings('EnvironmentFile'), ['-/etc/plant-store/env'])
    assert.deepEqual(settings('User'), ['plant-store'])
    assert.deepEqual(settings('StateDirectory'), ['plant-store'])
    assert.deepEqual(
      settings('Environment').filter((e) => e.startsWith('PLANT_STORE_DB=')),
      ['PLANT_STORE_DB=/var/lib/plant-store/plant-store.db'],
    )
    for (const [name, value] of [
      ['NoNewPrivileges', 'yes'],
      ['ProtectSystem', 'strict'],
      ['PrivateTmp', 'yes'],
      ['CapabilityBoundingSet', ''],
    ])
      assert.deepEqual(settings(name as string), [value], name)
  })

  it('starts the bundle with the Node flags npm start uses', () => {
    const start = (
      JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as {
        scripts: { start: string }
      }
    ).scripts.start
    const flags = start.split(/\s+/).filter((word) => word.startsWith('--'))
    const [exec] = settings('ExecStart')
    assert.equal(exec, `/usr/bin/node ${flags.join(' ')} /opt/plant-store/dist/bundle/main.js serve`)
  })
})

const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0
describe(
  'systemd-analyze verify',
  { skip: skipUnless(hasAnalyze, 'systemd-analyze', 'apt-get install systemd') },
  () => {
    it('parses every setting of the unit', () => {
      // This machine's node stands in for /usr/bin/node, which verify checks is executable.
      const copy = path.join(tempDir(), 'plant-store.service')
      fs.writeFileSync(copy, unit.replace('/usr/bin/node ', `${process.execPath} `))
      const result = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8' })
      assert.equal(result.status, 0, result.stderr)
      assert.equal(result.stderr, '', 'no setting ignored as unparsable')
    })
  },
)

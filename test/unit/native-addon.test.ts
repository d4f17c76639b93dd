/** What the CLI says when better-sqlite3 was built for another Node.js line. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { nativeAddonMismatch } from '../../src/storage/sqlite/native-addon.js'

// Node's own text, from a store opened by Node 24 with the addon built by Node 20.
const dlopenMessage = `The module '/srv/plant-store/node_modules/better-sqlite3/build/Release/better_sqlite3.node'
was compiled against a different Node.js version using
NODE_MODULE_VERSION 115. This version of Node.js requires
NODE_MODULE_VERSION 137. Please try re-compiling or re-installing
the module (for instance, using \`npm rebuild\` or \`npm install\`).`

describe('nativeAddonMismatch', () => {
  it('names both ABI versions and the command that fixes it, not the store', () => {
    const error = Object.assign(new Error(dlopenMessage), { code: 'ERR_DLOPEN_FAILED' })
    const said = nativeAddonMismatch(error)
    assert.ok(said)
    assert.match(said, /NODE_MODULE_VERSION 115/)
    assert.match(said, new RegExp(`Node\\.js ${process.version.replaceAll('.', '\\.')} needs 137`))
    assert.match(said, /npm rebuild better-sqlite3/)
    assert.doesNotMatch(said, /store/)
  })

  it('leaves every other error alone', () => {
    assert.equal(nativeAddonMismatch(new Error('SQLITE_CANTOPEN: unable to open database file')), undefined)
    assert.equal(nativeAddonMismatch(new Error(dlopenMessage.replace('better_sqlite3', 'other'))), undefined)
    assert.equal(nativeAddonMismatch('NODE_MODULE_VERSION 1. NODE_MODULE_VERSION 2'), undefined)
  })
})

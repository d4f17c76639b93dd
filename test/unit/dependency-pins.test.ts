import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

// dist/test/unit -> the repository.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
const MANIFESTS = ['package.json', 'clients/typescript/package.json']
const SECTIONS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies']

interface Manifest {
  '//'?: Record<string, string>
  overrides?: Record<string, unknown>
  [section: string]: unknown
}

const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), 'utf8')) as Manifest

/** A range tighter than a caret: an exact version, `~x.y.z`, `x.y`, or anything but `^...`. */
function tighterThanCaret(range: string): boolean {
  return !/^\^\d/.test(range) && !range.startsWith('workspace:') && !range.startsWith('file:')
}

/** The packages a manifest pins tighter than a caret, and every override. */
function pins(manifest: Manifest): string[] {
  const pinned = SECTIONS.flatMap((section) =>
    Object.entries((manifest[section] ?? {}) as Record<string, string>)
      .filter(([, range]) => tighterThanCaret(range))
      .map(([name]) => name),
  )
  return [...pinned, ...Object.keys(manifest.overrides ?? {})]
}

/** Every package a manifest names, in any section or override. */
function declared(manifest: Manifest): Set<string> {
  const names = SECTIONS.flatMap((section) => Object.keys((manifest[section] ?? {}) as object))
  return new Set([...names, ...Object.keys(manifest.overrides ?? {})])
}

describe('a reason beside every pin (the "//" object of each package.json)', () => {
  for (const file of MANIFESTS) {
    const manifest = read(file)
    const reasons = manifest['//'] ?? {}

    it(`${file}: each range tighter than a caret, and each override, has its reason`, () => {
      const missing = pins(manifest).filter((name) => !(reasons[name]?.trim().length ?? 0))
      assert.deepEqual(missing, [], `add "${missing[0]}": "why" to the "//" object of ${file}`)
    })

    it(`${file}: each reason is for a package it declares`, () => {
      const names = declared(manifest)
      assert.deepEqual(
        Object.keys(reasons).filter((name) => !names.has(name)),
        [],
      )
    })
  }

  it('sees a pin: ~, an exact version and major.minor are tighter than a caret; ^ is not', () => {
    assert.deepEqual(['~5.2.6', '5.9', '1.2.3', '^1.2.3', '^0.223.1', 'workspace:*'].map(tighterThanCaret), [
      true,
      true,
      true,
      false,
      false,
      false,
    ])
  })

  it('docs/development.md "Node.js lines" names each package held back for Node.js 20', () => {
    const page = readFileSync(path.join(root, 'docs/development.md'), 'utf8')
    const start = page.indexOf('## Node.js lines')
    const section = page.slice(start, page.indexOf('\n## ', start + 1))
    assert.ok(start >= 0, 'the section exists')
    const heldBack = MANIFESTS.flatMap((file) =>
      Object.entries(read(file)['//'] ?? {})
        .filter(([, reason]) => reason.startsWith('Node.js 20'))
        .map(([name]) => name),
    )
    assert.ok(heldBack.length >= 4, `held back: ${heldBack.join(', ')}`)
    for (const name of heldBack) assert.ok(section.includes(`\`${name}\``), `${name} in "Node.js lines"`)
  })
})

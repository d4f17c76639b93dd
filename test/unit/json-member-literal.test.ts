import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { topLevelMemberLiteral } from '../../src/http/json-member-literal.js'

describe('topLevelMemberLiteral', () => {
  const cases: [string, string, string | undefined][] = [
    ['a plain member', '{"id":9007199254740993,"name":"x"}', '9007199254740993'],
    ['the last of duplicates, as JSON.parse', '{"id":1,"id":-2.5e3}', '-2.5e3'],
    ['skipping a byte-order mark', '\uFEFF {"id":7}', '7'],
    ['an escaped key', '{"\\u0069d":8}', '8'],
    ['whitespace everywhere', ' {\n\t"name" : "a" ,\r\n "id"  :  12e0 \n}', '12e0'],
    ['not a nested id', '{"a":{"id":1},"b":[{"id":2}],"c":"\\"id\\":3"}', undefined],
    ['after strings holding brackets and escapes', '{"s":"} ] \\\\","t":["{"],"id":true}', 'true'],
    ['a string value, as written', '{"id":"12"}', '"12"'],
    ['nothing in an empty object', '{}', undefined],
    ['nothing in an array', '[{"id":1}]', undefined],
  ]
  for (const [label, json, expected] of cases) {
    it(`reads ${label}`, () => {
      JSON.parse(json.replace(/^\uFEFF/, '')) // every case is JSON that JSON.parse accepts
      assert.equal(topLevelMemberLiteral(json, 'id'), expected)
    })
  }
})

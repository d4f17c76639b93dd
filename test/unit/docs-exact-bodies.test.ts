import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  exactJsonBodies,
  type ResponseBodyProps,
  type SwaggerUiSystem,
} from '../../src/routes/docs-exact-bodies.js'

interface Element {
  type: unknown
  props: object | null
  children: unknown[]
}

const HighlightCode = Symbol('HighlightCode')
const Original = Symbol('ResponseBody')

/** The plugin as the browser gets it: rebuilt from its source text, so it may use nothing outside it. */
const plugin = new Function(`return ${exactJsonBodies.toString()}`)() as typeof exactJsonBodies

const system: SwaggerUiSystem = {
  React: { createElement: (type, props, ...children): Element => ({ type, props: props ?? null, children }) },
  getComponent: (name) => (name === 'HighlightCode' ? HighlightCode : undefined),
}

const responseBody = (
  plugin(system) as { wrapComponents: { responseBody: (o: unknown) => (p: ResponseBodyProps) => Element } }
).wrapComponents.responseBody(Original)

/** The text the highlighter is given for a JSON answer. */
function shown(content: string): string {
  const [heading, code] = responseBody({ content, contentType: 'application/json; charset=utf-8' })
    .children as Element[]
  assert.deepEqual(heading?.children, ['Response body'])
  assert.equal(code?.type, HighlightCode)
  assert.deepEqual(code?.props, {
    language: 'json',
    downloadable: true,
    canCopy: true,
    fileName: 'response.json',
  })
  return code?.children[0] as string
}

const outsideStrings = (json: string) =>
  json.replace(/"(?:[^"\\]|\\.)*"|\s+/g, (token) => (token.trim() ? token : ''))

describe('the /docs plugin that shows JSON answers exactly', () => {
  it('keeps every digit of an id that JSON.parse would round', () => {
    assert.equal(
      shown('{"id":9007199254740993,"name":"Exact"}'),
      '{\n  "id": 9007199254740993,\n  "name": "Exact"\n}',
    )
    assert.equal(
      shown('[{"id":-9223372036854775808},{"id":9223372036854775807}]'),
      [
        '[',
        '  {',
        '    "id": -9223372036854775808',
        '  },',
        '  {',
        '    "id": 9223372036854775807',
        '  }',
        ']',
      ].join('\n'),
    )
  })

  it('only moves whitespace between tokens: strings, escapes and numbers stay as sent', () => {
    const sent =
      ' {"name":"a \\"quoted\\" {brace}, [bracket]: colon\\\\","tag" : "\\u00e9", "n":[1.50,-0,2e3,{},[ ]],' +
      '"nested":{"deeper":{"x":null,"y":true}}}\n'
    const text = shown(sent)
    assert.equal(outsideStrings(text), outsideStrings(sent))
    assert.deepEqual(JSON.parse(text), JSON.parse(sent))
    assert.match(text, /"name": "a \\"quoted\\" \{brace\}, \[bracket\]: colon\\\\"/)
    assert.match(text, /"n": \[\n {4}1\.50,\n {4}-0,\n {4}2e3,\n {4}\{\},\n {4}\[\]\n {2}\]/)
    assert.match(text, /\n {6}"x": null,\n {6}"y": true\n {4}\}\n {2}\}\n\}$/)
  })

  it("leaves other answers to Swagger UI's own ResponseBody", () => {
    for (const props of [
      { content: 'plain text', contentType: 'text/plain' },
      { content: '{"id": 1,', contentType: 'application/json' },
      { content: '', contentType: 'application/json' },
      { content: undefined, contentType: 'application/json' },
    ]) {
      const element = responseBody(props)
      assert.equal(element.type, Original, JSON.stringify(props))
      assert.equal(element.props, props)
    }
  })
})

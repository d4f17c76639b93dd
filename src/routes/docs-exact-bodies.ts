/** What the plugin below uses of React and of the `system` Swagger UI hands its plugins. */
interface ReactLike {
  createElement(type: unknown, props?: object | null, ...children: unknown[]): unknown
}

export interface SwaggerUiSystem {
  React: ReactLike
  getComponent(name: string, container?: boolean): unknown
}

/** The props of Swagger UI's ResponseBody: the answer's text as received, and its Content-Type. */
export interface ResponseBodyProps {
  content?: unknown
  contentType?: string
  [other: string]: unknown
}

/**
 * A Swagger UI plugin for /docs: "Try it out" shows a JSON answer with every token as the service
 * sent it, only indented. Swagger UI's own ResponseBody pretty-prints through JSON.parse, which
 * rounds ids beyond 2^53 (https://github.com/swagger-api/swagger-ui/issues/2030).
 *
 * It runs in the browser: docs.ts passes it in `uiConfig.plugins`, which @fastify/swagger-ui writes
 * into the page with toString(), so it uses nothing from outside its own body.
 */
export function exactJsonBodies(system: SwaggerUiSystem): object {
  const isJson = (text: string): boolean => {
    try {
      JSON.parse(text)
      return true
    } catch {
      return false
    }
  }

  /** Valid JSON text with whitespace only added between tokens; strings and numbers stay as they are. */
  const indent = (text: string): string => {
    let out = ''
    let depth = 0
    let inString = false
    let escaped = false
    const newline = (): string => `\n${'  '.repeat(depth)}`
    for (let i = 0; i < text.length; i++) {
      const c = text.charAt(i)
      if (inString) {
        out += c
        if (escaped) escaped = false
        else if (c === '\\') escaped = true
        else if (c === '"') inString = false
      } else if (c === ' ' || c === '\n' || c === '\r' || c === '\t') {
        // Whitespace between tokens carries nothing in valid JSON; the indentation replaces it.
      } else if (c === '{' || c === '[') {
        const close = c === '{' ? '}' : ']'
        const next = text.slice(i + 1).search(/\S/)
        if (next >= 0 && text.charAt(i + 1 + next) === close) {
          out += c + close
          i += 1 + next
        } else {
          depth++
          out += c + newline()
        }
      } else if (c === '}' || c === ']') {
        depth--
        out += newline() + c
      } else if (c === ',') {
        out += c + newline()
      } else if (c === ':') {
        out += ': '
      } else {
        if (c === '"') inString = true
        out += c
      }
    }
    return out
  }

  const { React } = system
  return {
    wrapComponents: {
      responseBody: (Original: unknown) => (props: ResponseBodyProps) => {
        const { content, contentType } = props
        if (typeof content !== 'string' || !/json/i.test(contentType ?? '') || !isJson(content))
          return React.createElement(Original, props)
        const HighlightCode = system.getComponent('HighlightCode', true)
        return React.createElement(
          'div',
          null,
          React.createElement('h5', null, 'Response body'),
          React.createElement(
            HighlightCode,
            { language: 'json', downloadable: true, canCopy: true, fileName: 'response.json' },
            indent(content),
          ),
        )
      },
    },
  }
}

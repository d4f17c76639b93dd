/**
 * The npm package a file path or URL lies in, scope included (`@fastify/static`): the innermost
 * `node_modules` folder's, so a nested copy counts as itself. Undefined outside any package.
 */
export function packageOf(path) {
  const at = path.lastIndexOf('node_modules/')
  if (at === -1 || (at > 0 && path[at - 1] !== '/')) return undefined
  const [first, second] = path.slice(at + 'node_modules/'.length).split('/')
  return first?.startsWith('@') ? `${first}/${second}` : first
}

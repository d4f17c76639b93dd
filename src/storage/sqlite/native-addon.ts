/**
 * better-sqlite3 is a native addon, compiled for one Node.js ABI at install. Run under another
 * Node.js line, loading it fails with a message that names neither the fix nor the package.
 * Returns what to tell the user instead, or undefined for any other error.
 */
export function nativeAddonMismatch(error: unknown): string | undefined {
  const message = error instanceof Error ? error.message : ''
  const versions = /NODE_MODULE_VERSION (\d+)\.[\s\S]*NODE_MODULE_VERSION (\d+)/.exec(message)
  if (!versions || !/better_sqlite3\.node/.test(message)) return undefined
  return (
    `better-sqlite3's native addon was built for another Node.js line (NODE_MODULE_VERSION ` +
    `${versions[1]}; Node.js ${process.version} needs ${versions[2]}): run \`npm rebuild better-sqlite3\` ` +
    `in the project folder with this Node.js, or switch back to the Node.js it was installed with`
  )
}

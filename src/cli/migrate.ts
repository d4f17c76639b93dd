import type { OpenStore } from './open-store.js'
import { print } from './output.js'
import { Progress } from './progress.js'

/** Runs a command that may open the store, and closes the store after it (main.ts). */
export type Run = (body: (open: OpenStore) => Promise<void>) => Promise<void>

/** Opening the store applies any pending migration; on a big store that takes a while, so say so. */
export async function migrateCommand(open: OpenStore): Promise<void> {
  const progress = new Progress('migrate')
  progress.update('opening the store and applying pending migrations...', true)
  const storage = await open({
    create: true,
    onMigration: (version, name) => progress.update(`applying migration ${version} (${name})...`, true),
  })
  progress.done('done')
  print(`migrations applied: ${storage.kind} store is up to date`)
}

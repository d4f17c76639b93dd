/**
 * Refuses a database whose schema a newer build has migrated past what this build knows: after a
 * rollback of a deploy, an older build would otherwise serve on tables it does not understand and
 * report "up to date".
 */
export function checkSchemaNotNewer(found: number | null | undefined, known: number): void {
  if (found === null || found === undefined || found <= known) return
  throw new Error(
    `the database schema is at version ${found}, newer than this build knows (${known}): run a build at least as new as the one that migrated it`,
  )
}

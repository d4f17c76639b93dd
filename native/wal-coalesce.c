/*
** wal-coalesce: a SQLite VFS shim, loaded as an extension, that writes a transaction's WAL frames
** with one pwrite instead of two per frame.
**
** Why: SQLite writes every WAL frame as two calls (its 24-byte header, then the page). A create
** with a random id dirties two pages (a table leaf and an index leaf), so each one cost four
** pwrite64 calls, and on a VM a call costs more than copying its 4 KiB (docs/performance-history.md,
** seventh and tenth rounds). This shim gathers contiguous writes to a WAL file in a buffer and
** hands them to the real VFS in one call.
**
** Why this is safe: a transaction's frames become visible to readers (and to recovery) only
** through its commit frame, whose header holds the database size in pages (non-zero; zero in
** every other frame: sqlite.org/fileformat2.html#walformat), and only once SQLite has published
** the new end of the WAL in the wal-index. So the buffer is written out:
**   - inside the xWrite that put a commit frame's header or its last byte in the buffer, so that
**     a failure is that write's error and the transaction fails as it would have (SQLite rewrites
**     the header of a transaction's frames in place when it recomputes their checksums, the commit
**     frame's last, which is why a header alone counts);
**   - before any other use of the file (read, sync, truncate, size, file control, close) and
**     before a write that does not continue the buffer, so nothing observes the file without it;
**   - and, as a last guard, at the shared-memory barrier SQLite raises on the database file just
**     before it publishes a commit in the wal-index. There nothing is left to write unless SQLite
**     wrote its WAL in a way this file does not know; if that write then failed, the process
**     aborts rather than publish frames that are not in the file.
** Files other than databases and WALs are not wrapped at all.
**
** Files: this one is the VFS and the extension's entry point; wal-file.c the buffered WAL;
** db-file.c the database file and its barrier; discard-commit.c discard_last_commit(), which
** takes back a commit whose WAL sync failed; wal-coalesce.h what they share.
** scripts/build-native.mjs compiles them into one library. Loading it once registers the shim as
** the default VFS of the process, wrapping the one that was the default; loading it on a
** connection also gives that connection sync_database_file() (below), which the checkpointer uses,
** and discard_last_commit(), which the writer uses.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include "wal-coalesce.h"

sqlite3_vfs *walcoalesce_real_vfs;

static int shimOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  (void)vfs;
  if (flags & SQLITE_OPEN_MAIN_DB) return walcoalesce_open_db(name, file, flags, outFlags);
  if (flags & SQLITE_OPEN_WAL) return walcoalesce_open_wal(name, file, flags, outFlags);
  /* Journals and temporary files are the real VFS's files themselves, at the slot's start. */
  return walcoalesce_real_vfs->xOpen(walcoalesce_real_vfs, name, file, flags, outFlags);
}

static sqlite3_vfs shim;

#define PASS(method, ...) walcoalesce_real_vfs->method(walcoalesce_real_vfs, __VA_ARGS__)
static int shimDelete(sqlite3_vfs *v, const char *n, int s) { (void)v; return PASS(xDelete, n, s); }
static int shimAccess(sqlite3_vfs *v, const char *n, int f, int *o) { (void)v; return PASS(xAccess, n, f, o); }
static int shimFullPathname(sqlite3_vfs *v, const char *n, int c, char *o) {
  (void)v;
  return PASS(xFullPathname, n, c, o);
}
static void *shimDlOpen(sqlite3_vfs *v, const char *n) { (void)v; return PASS(xDlOpen, n); }
static void shimDlError(sqlite3_vfs *v, int c, char *o) { (void)v; PASS(xDlError, c, o); }
static void (*shimDlSym(sqlite3_vfs *v, void *h, const char *s))(void) { (void)v; return PASS(xDlSym, h, s); }
static void shimDlClose(sqlite3_vfs *v, void *h) { (void)v; PASS(xDlClose, h); }
static int shimRandomness(sqlite3_vfs *v, int c, char *o) { (void)v; return PASS(xRandomness, c, o); }
static int shimSleep(sqlite3_vfs *v, int us) { (void)v; return PASS(xSleep, us); }
static int shimCurrentTime(sqlite3_vfs *v, double *o) { (void)v; return PASS(xCurrentTime, o); }
static int shimGetLastError(sqlite3_vfs *v, int c, char *o) { (void)v; return PASS(xGetLastError, c, o); }
static int shimCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *o) { (void)v; return PASS(xCurrentTimeInt64, o); }
static int shimSetSystemCall(sqlite3_vfs *v, const char *n, sqlite3_syscall_ptr f) {
  (void)v;
  return PASS(xSetSystemCall, n, f);
}
static sqlite3_syscall_ptr shimGetSystemCall(sqlite3_vfs *v, const char *n) { (void)v; return PASS(xGetSystemCall, n); }
static const char *shimNextSystemCall(sqlite3_vfs *v, const char *n) { (void)v; return PASS(xNextSystemCall, n); }

/*
** sync_database_file(): syncs the connection's database file through SQLite's own handle on it.
** The checkpointer calls it after a PASSIVE checkpoint. SQLite syncs the database file at the end
** of a checkpoint only when no commit landed while it copied, which under steady writes is rare;
** the pages it copied then wait, unsynced, for the next checkpoint that catches up, the RESTART
** that writes are held for. Syncing them here takes that wait out of the hold. A sync at any time
** is harmless to SQLite; it goes through SQLite's file (not a descriptor of our own) because
** closing any other descriptor of the file would drop this process's POSIX locks on it.
*/
static void syncDatabaseFile(sqlite3_context *context, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_file *file = 0;
  int rc = sqlite3_file_control(sqlite3_context_db_handle(context), "main", SQLITE_FCNTL_FILE_POINTER, &file);
  if (rc == SQLITE_OK && (file == 0 || file->pMethods == 0)) rc = SQLITE_MISUSE;
  if (rc == SQLITE_OK) rc = file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
  if (rc == SQLITE_OK) sqlite3_result_null(context);
  else sqlite3_result_error_code(context, rc);
}

/* The one symbol the library exports (the build hides the rest). */
#ifdef _WIN32
__declspec(dllexport)
#else
__attribute__((visibility("default")))
#endif
int sqlite3_walcoalesce_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  SQLITE_EXTENSION_INIT2(api);
  if (sqlite3_vfs_find("wal-coalesce") == 0) {
    walcoalesce_real_vfs = sqlite3_vfs_find(0);
    if (walcoalesce_real_vfs == 0 || walcoalesce_real_vfs->iVersion < 3) {
      *error = sqlite3_mprintf("wal-coalesce: the default VFS is missing or older than version 3");
      return SQLITE_ERROR;
    }
    shim.iVersion = 3;
    shim.szOsFile = (int)(sizeof(WalFile) > sizeof(DbFile) ? sizeof(WalFile) : sizeof(DbFile)) + walcoalesce_real_vfs->szOsFile;
    shim.mxPathname = walcoalesce_real_vfs->mxPathname;
    shim.zName = "wal-coalesce";
    shim.xOpen = shimOpen;
    shim.xDelete = shimDelete;
    shim.xAccess = shimAccess;
    shim.xFullPathname = shimFullPathname;
    shim.xDlOpen = shimDlOpen;
    shim.xDlError = shimDlError;
    shim.xDlSym = shimDlSym;
    shim.xDlClose = shimDlClose;
    shim.xRandomness = shimRandomness;
    shim.xSleep = shimSleep;
    shim.xCurrentTime = shimCurrentTime;
    shim.xGetLastError = shimGetLastError;
    shim.xCurrentTimeInt64 = shimCurrentTimeInt64;
    shim.xSetSystemCall = shimSetSystemCall;
    shim.xGetSystemCall = shimGetSystemCall;
    shim.xNextSystemCall = shimNextSystemCall;
    int rc = sqlite3_vfs_register(&shim, 1);
    if (rc != SQLITE_OK) return rc;
  }
  /* Loading the library again on a connection gives that connection the function. */
  int rc = sqlite3_create_function(db, "sync_database_file", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, 0,
                                   syncDatabaseFile, 0, 0);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_create_function(db, "discard_last_commit", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, 0,
                               walcoalesce_discard_last_commit, 0, 0);
  if (rc != SQLITE_OK) return rc;
  /* The VFS outlives the connection that loaded it. */
  return SQLITE_OK_LOAD_PERMANENTLY;
}

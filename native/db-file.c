/*
** The database side of wal-coalesce: the real database file, wrapped only for its shared-memory
** barrier, where the WAL's buffer is written out as the last guard before SQLite publishes a commit
** (see wal-coalesce.c), and for the link between the two files.
*/
#include <stdlib.h>
#include <string.h>
#include "wal-coalesce.h"

/* The database file's methods are the real file's, but for the barrier and the closing link. */
#define DB_REAL(file) REAL_DB_FILE(file)
static int dbClose(sqlite3_file *file) {
  DbFile *p = (DbFile *)file;
  if (p->wal) p->wal->db = 0;
  return DB_REAL(file)->pMethods->xClose(DB_REAL(file));
}
static int dbRead(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset) {
  return DB_REAL(file)->pMethods->xRead(DB_REAL(file), data, amount, offset);
}
static int dbWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
  return DB_REAL(file)->pMethods->xWrite(DB_REAL(file), data, amount, offset);
}
static int dbTruncate(sqlite3_file *file, sqlite3_int64 size) {
  return DB_REAL(file)->pMethods->xTruncate(DB_REAL(file), size);
}
static int dbSync(sqlite3_file *file, int flags) { return DB_REAL(file)->pMethods->xSync(DB_REAL(file), flags); }
static int dbFileSize(sqlite3_file *file, sqlite3_int64 *size) {
  return DB_REAL(file)->pMethods->xFileSize(DB_REAL(file), size);
}
static int dbLock(sqlite3_file *file, int level) { return DB_REAL(file)->pMethods->xLock(DB_REAL(file), level); }
static int dbUnlock(sqlite3_file *file, int level) { return DB_REAL(file)->pMethods->xUnlock(DB_REAL(file), level); }
static int dbCheckReservedLock(sqlite3_file *file, int *out) {
  return DB_REAL(file)->pMethods->xCheckReservedLock(DB_REAL(file), out);
}
static int dbFileControl(sqlite3_file *file, int op, void *arg) {
  return DB_REAL(file)->pMethods->xFileControl(DB_REAL(file), op, arg);
}
static int dbSectorSize(sqlite3_file *file) { return DB_REAL(file)->pMethods->xSectorSize(DB_REAL(file)); }
static int dbDeviceCharacteristics(sqlite3_file *file) {
  return DB_REAL(file)->pMethods->xDeviceCharacteristics(DB_REAL(file));
}
static int dbShmMap(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
  return DB_REAL(file)->pMethods->xShmMap(DB_REAL(file), region, size, extend, out);
}
static int dbShmLock(sqlite3_file *file, int offset, int n, int flags) {
  return DB_REAL(file)->pMethods->xShmLock(DB_REAL(file), offset, n, flags);
}
static void dbShmBarrier(sqlite3_file *file) {
  DbFile *p = (DbFile *)file;
  if (p->wal && p->wal->used > 0 && walcoalesce_flush(p->wal) != SQLITE_OK) {
    /* The wal-index is about to point at frames that are not in the file (see the top). */
    sqlite3_log(SQLITE_IOERR_WRITE, "wal-coalesce: WAL frames could not be written before a commit was published");
    abort();
  }
  DB_REAL(file)->pMethods->xShmBarrier(DB_REAL(file));
}
static int dbShmUnmap(sqlite3_file *file, int deleteFlag) {
  return DB_REAL(file)->pMethods->xShmUnmap(DB_REAL(file), deleteFlag);
}
static int dbFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
  return DB_REAL(file)->pMethods->xFetch(DB_REAL(file), offset, amount, out);
}
static int dbUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
  return DB_REAL(file)->pMethods->xUnfetch(DB_REAL(file), offset, page);
}

/* One table per method version, so the wrapper offers SQLite exactly what the real file does. */
#define DB_METHODS(version)                                                                        \
  {                                                                                                \
    version, dbClose, dbRead, dbWrite, dbTruncate, dbSync, dbFileSize, dbLock, dbUnlock,            \
        dbCheckReservedLock, dbFileControl, dbSectorSize, dbDeviceCharacteristics, dbShmMap,        \
        dbShmLock, dbShmBarrier, dbShmUnmap, dbFetch, dbUnfetch                                    \
  }
static const sqlite3_io_methods dbMethods[3] = {DB_METHODS(1), DB_METHODS(2), DB_METHODS(3)};

int walcoalesce_is_db_file(const sqlite3_file *file) {
  return file->pMethods >= &dbMethods[0] && file->pMethods <= &dbMethods[2];
}

int walcoalesce_open_db(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  DbFile *p = (DbFile *)file;
  sqlite3_file *real = REAL_DB_FILE(p);
  int rc, version;
  memset(p, 0, sizeof(*p));
  rc = walcoalesce_real_vfs->xOpen(walcoalesce_real_vfs, name, real, flags, outFlags);
  if (rc != SQLITE_OK || real->pMethods == 0) {
    file->pMethods = 0;
    return rc;
  }
  version = real->pMethods->iVersion < 1 ? 1 : real->pMethods->iVersion > 3 ? 3 : real->pMethods->iVersion;
  file->pMethods = &dbMethods[version - 1];
  return SQLITE_OK;
}

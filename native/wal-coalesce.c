/*
** wal-coalesce: a SQLite VFS shim, loaded as an extension, that writes a transaction's WAL frames
** with one pwrite instead of two per frame.
**
** Why: SQLite writes every WAL frame as two calls (its 24-byte header, then the page). A create
** with a random id dirties two pages (a table leaf and an index leaf), so each one cost four
** pwrite64 calls, and on a VM a call costs more than copying its 4 KiB (docs/performance.md,
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
** Build: cc -O2 -fPIC -shared -I <better-sqlite3>/deps/sqlite3 wal-coalesce.c -o wal-coalesce.so
** (scripts/build-native.mjs). Loading it once registers the shim as the default VFS of the
** process, wrapping the one that was the default.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <stdlib.h>
#include <string.h>

typedef struct DbFile DbFile;

#define WAL_HEADER_BYTES 32
#define FRAME_HEADER_BYTES 24
/* The unix VFS passes at most 0x1ffff bytes to one pwrite (it masks the count: a write of
** exactly 128 KiB would write nothing and fail as SQLITE_FULL), so the buffer stays below that. */
#define BUFFER_BYTES (124 * 1024)

typedef struct WalFile WalFile;
struct WalFile {
  sqlite3_file base;        /* pMethods: the shim's */
  DbFile *db;               /* the database this WAL belongs to, while both are open */
  unsigned char *buffer;    /* BUFFER_BYTES, allocated at the first write */
  int used;                 /* bytes in buffer */
  sqlite3_int64 start;      /* file offset of buffer[0] */
  int pageSize;             /* from the WAL header; 0 while unknown */
  sqlite3_int64 headerEnd;  /* where the last 24-byte write (a frame header) ended; -1 if none */
  /* the real VFS's file follows */
};

/* A database file: the real one, plus the link its shared-memory barrier needs. */
struct DbFile {
  sqlite3_file base;
  WalFile *wal;
  /* the real VFS's file follows */
};

#define REAL_FILE(p) ((sqlite3_file *)(((WalFile *)(p)) + 1))
#define REAL_DB_FILE(p) ((sqlite3_file *)(((DbFile *)(p)) + 1))

static sqlite3_vfs *realVfs;

static unsigned int bigEndian32(const unsigned char *p) {
  return ((unsigned int)p[0] << 24) | ((unsigned int)p[1] << 16) | ((unsigned int)p[2] << 8) | p[3];
}

/* size if it is a page size SQLite can have, else 0. */
static int validPageSize(unsigned int size) {
  if (size < 512 || size > 65536 || (size & (size - 1)) != 0) return 0;
  return (int)size;
}

/* The page size a WAL header states (64 KiB is written as 1), or 0 if it is not a valid one. */
static int headerPageSize(const unsigned char *header) {
  unsigned int size = bigEndian32(header + 8);
  return validPageSize(size == 1 ? 65536 : size);
}

/* Writes the buffer out; it is empty afterwards whatever the outcome. */
static int flush(WalFile *p) {
  int rc = SQLITE_OK;
  if (p->used > 0) {
    sqlite3_file *real = REAL_FILE(p);
    rc = real->pMethods->xWrite(real, p->buffer, p->used, p->start);
    p->used = 0;
  }
  return rc;
}

/*
** Whether the buffer ends with a commit frame's header or with the last byte of a commit frame.
** When the page size is not known, or a frame ends the buffer whose header is no longer in it, it
** answers yes: writing out early is always safe, keeping bytes back is what needs proof.
*/
static int endsWithCommit(const WalFile *p) {
  sqlite3_int64 end = p->start + p->used;
  sqlite3_int64 frameBytes, intoFrame, header;
  if (p->pageSize == 0) return 1;
  if (end <= WAL_HEADER_BYTES) return 0;
  frameBytes = FRAME_HEADER_BYTES + (sqlite3_int64)p->pageSize;
  intoFrame = (end - WAL_HEADER_BYTES) % frameBytes;
  if (intoFrame == FRAME_HEADER_BYTES) header = end - FRAME_HEADER_BYTES;
  else if (intoFrame == 0) header = end - frameBytes;
  else return 0; /* mid-page */
  if (header < p->start) return 1;
  return bigEndian32(p->buffer + (header - p->start) + 4) != 0;
}

static int walWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  int rc;
  if (offset == 0 && amount >= WAL_HEADER_BYTES) p->pageSize = headerPageSize(data);
  /* SQLite writes a frame as its header, then its page: a page of another size means the size
  ** read from the file was stale, and the frame boundaries would be wrong. */
  if (offset == p->headerEnd && amount != p->pageSize) p->pageSize = validPageSize((unsigned int)amount);
  p->headerEnd = amount == FRAME_HEADER_BYTES ? offset + amount : -1;
  if (p->used > 0 && (offset != p->start + p->used || p->used + amount > BUFFER_BYTES)) {
    rc = flush(p);
    if (rc != SQLITE_OK) return rc;
  }
  if (amount > BUFFER_BYTES) return real->pMethods->xWrite(real, data, amount, offset);
  if (p->buffer == 0) {
    p->buffer = sqlite3_malloc(BUFFER_BYTES);
    if (p->buffer == 0) return real->pMethods->xWrite(real, data, amount, offset);
  }
  if (p->used == 0) p->start = offset;
  memcpy(p->buffer + p->used, data, amount);
  p->used += amount;
  return endsWithCommit(p) ? flush(p) : SQLITE_OK;
}

static int walClose(sqlite3_file *file) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  int rc = flush(p);
  int closed;
  if (p->db) p->db->wal = 0;
  closed = real->pMethods->xClose(real);
  sqlite3_free(p->buffer);
  p->buffer = 0;
  return rc != SQLITE_OK ? rc : closed;
}

/* Every other method writes the buffer out first, then is the real file's. */
#define FLUSH_OR_RETURN(p)          \
  do {                              \
    int flushed = flush(p);         \
    if (flushed != SQLITE_OK) return flushed; \
  } while (0)

static int walRead(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset) {
  sqlite3_file *real = REAL_FILE(file);
  FLUSH_OR_RETURN((WalFile *)file);
  return real->pMethods->xRead(real, data, amount, offset);
}
static int walTruncate(sqlite3_file *file, sqlite3_int64 size) {
  sqlite3_file *real = REAL_FILE(file);
  FLUSH_OR_RETURN((WalFile *)file);
  return real->pMethods->xTruncate(real, size);
}
static int walSync(sqlite3_file *file, int flags) {
  sqlite3_file *real = REAL_FILE(file);
  FLUSH_OR_RETURN((WalFile *)file);
  return real->pMethods->xSync(real, flags);
}
static int walFileSize(sqlite3_file *file, sqlite3_int64 *size) {
  sqlite3_file *real = REAL_FILE(file);
  FLUSH_OR_RETURN((WalFile *)file);
  return real->pMethods->xFileSize(real, size);
}
static int walFileControl(sqlite3_file *file, int op, void *arg) {
  sqlite3_file *real = REAL_FILE(file);
  FLUSH_OR_RETURN((WalFile *)file);
  return real->pMethods->xFileControl(real, op, arg);
}
static int walLock(sqlite3_file *file, int level) {
  sqlite3_file *real = REAL_FILE(file);
  return real->pMethods->xLock(real, level);
}
static int walUnlock(sqlite3_file *file, int level) {
  sqlite3_file *real = REAL_FILE(file);
  return real->pMethods->xUnlock(real, level);
}
static int walCheckReservedLock(sqlite3_file *file, int *out) {
  sqlite3_file *real = REAL_FILE(file);
  return real->pMethods->xCheckReservedLock(real, out);
}
static int walSectorSize(sqlite3_file *file) {
  sqlite3_file *real = REAL_FILE(file);
  return real->pMethods->xSectorSize(real);
}
static int walDeviceCharacteristics(sqlite3_file *file) {
  sqlite3_file *real = REAL_FILE(file);
  return real->pMethods->xDeviceCharacteristics(real);
}

/* A WAL has no shared memory and is never memory-mapped by SQLite; version 1 says so. */
static const sqlite3_io_methods walMethods = {
  1,
  walClose,
  walRead,
  walWrite,
  walTruncate,
  walSync,
  walFileSize,
  walLock,
  walUnlock,
  walCheckReservedLock,
  walFileControl,
  walSectorSize,
  walDeviceCharacteristics,
  0, /* xShmMap */
  0, /* xShmLock */
  0, /* xShmBarrier */
  0, /* xShmUnmap */
  0, /* xFetch */
  0, /* xUnfetch */
};

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
  if (p->wal && p->wal->used > 0 && flush(p->wal) != SQLITE_OK) {
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

static int openDb(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  DbFile *p = (DbFile *)file;
  sqlite3_file *real = REAL_DB_FILE(p);
  int rc, version;
  memset(p, 0, sizeof(*p));
  rc = realVfs->xOpen(realVfs, name, real, flags, outFlags);
  if (rc != SQLITE_OK || real->pMethods == 0) {
    file->pMethods = 0;
    return rc;
  }
  version = real->pMethods->iVersion < 1 ? 1 : real->pMethods->iVersion > 3 ? 3 : real->pMethods->iVersion;
  file->pMethods = &dbMethods[version - 1];
  return SQLITE_OK;
}

static int openWal(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  sqlite3_file *db;
  unsigned char header[WAL_HEADER_BYTES];
  sqlite3_int64 size = 0;
  int rc;
  memset(p, 0, sizeof(*p));
  p->headerEnd = -1;
  rc = realVfs->xOpen(realVfs, name, real, flags, outFlags);
  if (rc != SQLITE_OK || real->pMethods == 0) {
    file->pMethods = 0;
    return rc;
  }
  /* A WAL with frames already in it is appended to without its header being written again. */
  if (real->pMethods->xFileSize(real, &size) == SQLITE_OK && size >= WAL_HEADER_BYTES &&
      real->pMethods->xRead(real, header, WAL_HEADER_BYTES, 0) == SQLITE_OK) {
    p->pageSize = headerPageSize(header);
  }
  /* The barrier guard needs the database file; one this shim did not open has no such hook. */
  db = sqlite3_database_file_object(name);
  if (db && db->pMethods >= &dbMethods[0] && db->pMethods <= &dbMethods[2]) {
    p->db = (DbFile *)db;
    p->db->wal = p;
  }
  file->pMethods = &walMethods;
  return SQLITE_OK;
}

static int shimOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  (void)vfs;
  if (flags & SQLITE_OPEN_MAIN_DB) return openDb(name, file, flags, outFlags);
  if (flags & SQLITE_OPEN_WAL) return openWal(name, file, flags, outFlags);
  /* Journals and temporary files are the real VFS's files themselves, at the slot's start. */
  return realVfs->xOpen(realVfs, name, file, flags, outFlags);
}

static sqlite3_vfs shim;

#define PASS(method, ...) realVfs->method(realVfs, __VA_ARGS__)
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

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_walcoalesce_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  (void)db;
  SQLITE_EXTENSION_INIT2(api);
  if (sqlite3_vfs_find("wal-coalesce") == 0) {
    realVfs = sqlite3_vfs_find(0);
    if (realVfs == 0 || realVfs->iVersion < 3) {
      *error = sqlite3_mprintf("wal-coalesce: the default VFS is missing or older than version 3");
      return SQLITE_ERROR;
    }
    shim.iVersion = 3;
    shim.szOsFile = (int)(sizeof(WalFile) > sizeof(DbFile) ? sizeof(WalFile) : sizeof(DbFile)) + realVfs->szOsFile;
    shim.mxPathname = realVfs->mxPathname;
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
  /* The VFS outlives the connection that loaded it. */
  return SQLITE_OK_LOAD_PERMANENTLY;
}

/*
** The WAL side of wal-coalesce (see wal-coalesce.c for why and when): a WAL's contiguous writes
** gathered in a buffer and handed to the real file in one call, written out inside the write that
** completes a commit frame (or puts a commit frame's header), and before any other use of the file.
*/
#include <string.h>
#include "wal-coalesce.h"

/* size if it is a page size SQLite can have, else 0. */
static int validPageSize(unsigned int size) {
  if (size < 512 || size > 65536 || (size & (size - 1)) != 0) return 0;
  return (int)size;
}

int walcoalesce_header_page_size(const unsigned char *header) {
  unsigned int size = walcoalesce_big_endian32(header + 8);
  return validPageSize(size == 1 ? 65536 : size);
}

/* Writes the buffer out; it is empty afterwards whatever the outcome. */
int walcoalesce_flush(WalFile *p) {
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
  return walcoalesce_big_endian32(p->buffer + (header - p->start) + 4) != 0;
}

/* Whether a 24-byte write at `offset` is a commit frame's header: a frame's place, a database size. */
static int isCommitHeader(const WalFile *p, const void *data, sqlite3_int64 offset) {
  if (p->pageSize == 0 || offset < WAL_HEADER_BYTES) return 0;
  if ((offset - WAL_HEADER_BYTES) % (FRAME_HEADER_BYTES + (sqlite3_int64)p->pageSize) != 0) return 0;
  return walcoalesce_big_endian32((const unsigned char *)data + 4) != 0;
}

static int walWrite(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  int rc;
  if (offset == 0 && amount >= WAL_HEADER_BYTES) p->pageSize = walcoalesce_header_page_size(data);
  /* SQLite writes a frame as its header, then its page: a page of another size means the size
  ** read from the file was stale, and the frame boundaries would be wrong. */
  if (offset == p->headerEnd && amount != p->pageSize) p->pageSize = validPageSize((unsigned int)amount);
  p->headerEnd = amount == FRAME_HEADER_BYTES ? offset + amount : -1;
  if (offset == p->commitPageAt) p->commitEnd = offset + amount;
  p->commitPageAt = -1;
  if (amount == FRAME_HEADER_BYTES && isCommitHeader(p, data, offset)) {
    p->commitEnd = offset + FRAME_HEADER_BYTES + p->pageSize;
    memcpy(p->commitHeader, data, FRAME_HEADER_BYTES);
  } else if (amount == FRAME_HEADER_BYTES && p->pageSize == 0 && offset >= WAL_HEADER_BYTES &&
             walcoalesce_big_endian32((const unsigned char *)data + 4) != 0) {
    /* A commit frame's header in a WAL whose header another connection wrote: its end is known
    ** once its page follows, which also tells the page size. */
    p->commitEnd = 0;
    p->commitPageAt = offset + FRAME_HEADER_BYTES;
    memcpy(p->commitHeader, data, FRAME_HEADER_BYTES);
  }
  if (p->used > 0 && (offset != p->start + p->used || p->used + amount > BUFFER_BYTES)) {
    rc = walcoalesce_flush(p);
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
  return endsWithCommit(p) ? walcoalesce_flush(p) : SQLITE_OK;
}

static int walClose(sqlite3_file *file) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  int rc = walcoalesce_flush(p);
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
    int flushed = walcoalesce_flush(p);         \
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

int walcoalesce_is_wal_file(const sqlite3_file *file) { return file->pMethods == &walMethods; }

int walcoalesce_open_wal(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags) {
  WalFile *p = (WalFile *)file;
  sqlite3_file *real = REAL_FILE(p);
  sqlite3_file *db;
  unsigned char header[WAL_HEADER_BYTES];
  sqlite3_int64 size = 0;
  int rc;
  memset(p, 0, sizeof(*p));
  p->headerEnd = -1;
  p->commitPageAt = -1;
  rc = walcoalesce_real_vfs->xOpen(walcoalesce_real_vfs, name, real, flags, outFlags);
  if (rc != SQLITE_OK || real->pMethods == 0) {
    file->pMethods = 0;
    return rc;
  }
  /* A WAL with frames already in it is appended to without its header being written again. */
  if (real->pMethods->xFileSize(real, &size) == SQLITE_OK && size >= WAL_HEADER_BYTES &&
      real->pMethods->xRead(real, header, WAL_HEADER_BYTES, 0) == SQLITE_OK) {
    p->pageSize = walcoalesce_header_page_size(header);
  }
  /* The barrier guard needs the database file; one this shim did not open has no such hook. */
  db = sqlite3_database_file_object(name);
  if (db && walcoalesce_is_db_file(db)) {
    p->db = (DbFile *)db;
    p->db->wal = p;
  }
  file->pMethods = &walMethods;
  return SQLITE_OK;
}

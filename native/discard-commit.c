/*
** discard_last_commit(): takes back the last transaction this connection committed, when the
** fsync of its WAL frames failed. The group-committing writer (src/storage/sqlite/group-commit.ts)
** commits with SQLite's syncs off and syncs the WAL itself; when that sync fails, the commit is
** already in the WAL as SQLite and every reader see it, and in the kernel's page cache. Its
** requests are answered with an error, so it must not be there after a restart, nor be copied
** into the database file by any checkpoint, here or in another process on the same file.
**
** How: recovery replays a WAL's frames only while each frame carries the header's salts and
** continues the checksum chain (sqlite.org/fileformat2.html#walformat). Changing the salt of the
** transaction's first frame ends the valid log just before it, for every later recovery. The
** wal-index (the -shm file) still counts the transaction, so it is marked uninitialised
** (sqlite.org/walformat.html, isInit): the next connection that reads it, in any process, rebuilds
** it from the WAL on disk first, and any checkpoint reads it first. Frames after the transaction
** would chain through it and be lost with it, so it must be the last in the WAL.
**
** It runs with no transaction open on its connection (a SELECT of no table opens none) and takes,
** all at once and without waiting, the write lock (nobody appends), the checkpoint lock (no
** checkpoint copies) and every reader's lock but the one for readers of the database file alone:
** a reader on a snapshot that holds the transaction would otherwise read frames that the next
** writer, appending after the shortened log, overwrites. A reader's lock does not tell its snapshot
** (SQLite lets a reader share an older mark when all are taken), so every one must be free. It
** gives them all back on return. Because SQLite commits a transaction of its own only through its
** own locks, nothing can be written on this connection while it runs. It answers:
**    1  discarded: the page cache, which every process reads, holds the cut; the caller syncs the
**       WAL (on a descriptor opened after the failed sync, which would report that error again),
**       after the locks are given back, so that neither this process nor any other waits on a
**       failing disk while every lock of the WAL is held;
**    0  nothing to discard: the last commit in the WAL is not one this connection wrote (another
**       connection committed after it), or it was discarded already;
**   -1  too late: a checkpoint has copied, or begun to copy, some of it into the database file
**       (a checkpoint records how far it means to copy before it writes a page: nBackfillAttempted).
** SQLITE_BUSY while a lock is held elsewhere (try again); an I/O error if the WAL could not be
** read or written (the wal-index is rebuilt from the WAL as it is then, the transaction whole).
*/
#include <string.h>
#include "wal-coalesce.h"

/* Lock slots of the wal-index: write, checkpoint, recover, then readers 0 to 4. Reader 0 reads
** the database file alone; readers 1 to 4 read the WAL. */
#define WAL_WRITE_LOCK 0
#define WAL_READ_LOCK_1 4
#define WAL_WAL_READERS 4
#define INDEX_HEADER_BYTES 48     /* one copy of the wal-index header; two are kept */
#define INDEX_IS_INIT 12          /* offset of isInit in a copy */
#define INDEX_BACKFILL 96         /* nBackfill, the first field after the two copies */
#define INDEX_BACKFILL_ATTEMPTED 128 /* nBackfillAttempted, after the read marks and lock bytes */

/* A checksum word: big-endian, or little-endian when the WAL's magic number says so. */
static unsigned int get32(const unsigned char *p, int bigEndian) {
  if (bigEndian) return walcoalesce_big_endian32(p);
  return ((unsigned int)p[3] << 24) | ((unsigned int)p[2] << 16) | ((unsigned int)p[1] << 8) | p[0];
}

/* SQLite's WAL checksum, continued from sum[], over n bytes (a multiple of 8). */
static void checksum(const unsigned char *data, int n, int bigEndian, unsigned int sum[2]) {
  unsigned int s1 = sum[0], s2 = sum[1];
  for (int i = 0; i < n; i += 8) {
    s1 += get32(data + i, bigEndian) + s2;
    s2 += get32(data + i + 4, bigEndian) + s1;
  }
  sum[0] = s1;
  sum[1] = s2;
}

/* Where recovery's log ends, as recovery finds it: the last commit frame and the one before. */
typedef struct {
  sqlite3_int64 previousEnd; /* end of the commit frame before the last (or of the header) */
  sqlite3_int64 lastEnd;     /* end of the last commit frame; 0 if the WAL holds none */
  unsigned char lastHeader[FRAME_HEADER_BYTES];
  int pageSize;
} ValidLog;

/* Reads the WAL as recovery would (SQLite's walIndexRecover): frames that continue the chain. */
static int readValidLog(sqlite3_file *wal, ValidLog *log) {
  unsigned char header[WAL_HEADER_BYTES];
  sqlite3_int64 size = 0, offset;
  unsigned int sum[2] = {0, 0};
  unsigned char *frame;
  int rc, bigEndian, frameBytes;
  memset(log, 0, sizeof(*log));
  rc = wal->pMethods->xFileSize(wal, &size);
  if (rc != SQLITE_OK || size < WAL_HEADER_BYTES) return rc;
  rc = wal->pMethods->xRead(wal, header, WAL_HEADER_BYTES, 0);
  if (rc != SQLITE_OK) return rc;
  unsigned int magic = walcoalesce_big_endian32(header);
  int pageSize = walcoalesce_header_page_size(header);
  if ((magic & 0xfffffffe) != 0x377f0682 || walcoalesce_big_endian32(header + 4) != 3007000 || pageSize == 0) {
    return SQLITE_OK; /* not a valid WAL: recovery replays nothing */
  }
  bigEndian = (int)(magic & 1);
  checksum(header, 24, bigEndian, sum);
  if (sum[0] != walcoalesce_big_endian32(header + 24) || sum[1] != walcoalesce_big_endian32(header + 28)) {
    return SQLITE_OK;
  }
  log->pageSize = pageSize;
  log->previousEnd = log->lastEnd = WAL_HEADER_BYTES;
  frameBytes = FRAME_HEADER_BYTES + pageSize;
  frame = sqlite3_malloc(frameBytes);
  if (frame == 0) return SQLITE_NOMEM;
  for (offset = WAL_HEADER_BYTES; offset + frameBytes <= size; offset += frameBytes) {
    rc = wal->pMethods->xRead(wal, frame, frameBytes, offset);
    if (rc != SQLITE_OK) break;
    if (walcoalesce_big_endian32(frame) == 0 || memcmp(frame + 8, header + 16, 8) != 0) break;
    checksum(frame, 8, bigEndian, sum);
    checksum(frame + FRAME_HEADER_BYTES, pageSize, bigEndian, sum);
    if (sum[0] != walcoalesce_big_endian32(frame + 16) || sum[1] != walcoalesce_big_endian32(frame + 20)) break;
    if (walcoalesce_big_endian32(frame + 4) != 0) {
      log->previousEnd = log->lastEnd;
      log->lastEnd = offset + frameBytes;
      memcpy(log->lastHeader, frame, FRAME_HEADER_BYTES);
    }
  }
  sqlite3_free(frame);
  if (log->lastEnd == WAL_HEADER_BYTES) log->lastEnd = 0;
  return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_OK : rc;
}

/* With the checkpoint lock held: does as the top says. */
static int discard(WalFile *wal, sqlite3_file *db, int *outcome) {
  sqlite3_file *file = REAL_FILE(wal);
  volatile unsigned char *index = 0;
  unsigned char salt[4];
  ValidLog log;
  unsigned int backfilled, attempted;
  int rc;
  *outcome = 0;
  rc = readValidLog(file, &log);
  if (rc != SQLITE_OK) return rc;
  if (log.lastEnd == 0 || wal->commitEnd != log.lastEnd ||
      memcmp(wal->commitHeader, log.lastHeader, FRAME_HEADER_BYTES) != 0) {
    return SQLITE_OK;
  }
  rc = db->pMethods->xShmMap(db, 0, 32768, 0, (void volatile **)&index);
  if (rc != SQLITE_OK) return rc;
  if (index == 0) return SQLITE_IOERR_SHMMAP;
  /* Frames [1, nBackfill] are in the database file, and a checkpoint that failed or died may
  ** have written any of [1, nBackfillAttempted]; the transaction starts at previousEnd. */
  memcpy(&backfilled, (const void *)(index + INDEX_BACKFILL), sizeof(backfilled));
  memcpy(&attempted, (const void *)(index + INDEX_BACKFILL_ATTEMPTED), sizeof(attempted));
  if (attempted > backfilled) backfilled = attempted;
  if ((sqlite3_int64)backfilled * (FRAME_HEADER_BYTES + log.pageSize) + WAL_HEADER_BYTES > log.previousEnd) {
    *outcome = -1;
    return SQLITE_OK;
  }
  /* The wal-index first: should this process die before the salt is written, every connection
  ** rebuilds the index from a WAL that still holds the transaction whole, and nothing is lost; the
  ** other way round, another process would go on appending after a transaction recovery drops,
  ** and its acknowledged commits would go with it. Writers change the second copy first and
  ** readers read the first first, so a reader never takes half a change for valid. */
  index[INDEX_HEADER_BYTES + INDEX_IS_INIT] = 0;
  db->pMethods->xShmBarrier(db);
  index[INDEX_IS_INIT] = 0;
  db->pMethods->xShmBarrier(db);
  wal->commitEnd = 0;
  rc = file->pMethods->xRead(file, salt, 4, log.previousEnd + 8);
  if (rc != SQLITE_OK) return rc;
  salt[0] ^= 0xff;
  rc = file->pMethods->xWrite(file, salt, 4, log.previousEnd + 8);
  if (rc == SQLITE_OK) *outcome = 1;
  return rc;
}

void walcoalesce_discard_last_commit(sqlite3_context *context, int argc, sqlite3_value **argv) {
  sqlite3 *connection = sqlite3_context_db_handle(context);
  sqlite3_file *walFile = 0, *dbFile = 0, *realDb;
  int rc, outcome = 0;
  (void)argc;
  (void)argv;
  if (sqlite3_txn_state(connection, "main") != SQLITE_TXN_NONE) {
    sqlite3_result_error(context, "discard_last_commit() must run with no transaction open", -1);
    sqlite3_result_error_code(context, SQLITE_MISUSE);
    return;
  }
  sqlite3_file_control(connection, "main", SQLITE_FCNTL_FILE_POINTER, &dbFile);
  sqlite3_file_control(connection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &walFile);
  if (dbFile == 0 || walFile == 0 || !walcoalesce_is_db_file(dbFile) || !walcoalesce_is_wal_file(walFile)) {
    sqlite3_result_error(context, "discard_last_commit() needs a WAL database opened through wal-coalesce", -1);
    sqlite3_result_error_code(context, SQLITE_MISUSE);
    return;
  }
  rc = walcoalesce_flush((WalFile *)walFile);
  realDb = REAL_DB_FILE(dbFile);
  if (rc == SQLITE_OK) {
    const int exclusive = SQLITE_SHM_EXCLUSIVE;
    /* The write and checkpoint locks (slots 0 and 1), then the WAL's readers (4 to 7). */
    rc = realDb->pMethods->xShmLock(realDb, WAL_WRITE_LOCK, 2, SQLITE_SHM_LOCK | exclusive);
    if (rc == SQLITE_OK) {
      rc = realDb->pMethods->xShmLock(realDb, WAL_READ_LOCK_1, WAL_WAL_READERS, SQLITE_SHM_LOCK | exclusive);
      if (rc == SQLITE_OK) {
        rc = discard((WalFile *)walFile, realDb, &outcome);
        realDb->pMethods->xShmLock(realDb, WAL_READ_LOCK_1, WAL_WAL_READERS, SQLITE_SHM_UNLOCK | exclusive);
      }
      realDb->pMethods->xShmLock(realDb, WAL_WRITE_LOCK, 2, SQLITE_SHM_UNLOCK | exclusive);
    }
  }
  if (rc == SQLITE_OK) sqlite3_result_int(context, outcome);
  else sqlite3_result_error_code(context, rc);
}

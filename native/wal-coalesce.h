/*
** What the files of the wal-coalesce VFS share (wal-coalesce.c has the why). Every name here is
** prefixed: the library is loaded into a process that has SQLite and other libraries in it, and
** the build hides every symbol but the extension's entry point.
*/
#ifndef WAL_COALESCE_H
#define WAL_COALESCE_H

#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define WAL_HEADER_BYTES 32
#define FRAME_HEADER_BYTES 24
/* The unix VFS passes at most 0x1ffff bytes to one pwrite (it masks the count: a write of
** exactly 128 KiB would write nothing and fail as SQLITE_FULL), so the buffer stays below that. */
#define BUFFER_BYTES (124 * 1024)

typedef struct DbFile DbFile;
typedef struct WalFile WalFile;

/* A WAL file: the real one, plus the buffer of its writes not yet handed to it. */
struct WalFile {
  sqlite3_file base;        /* pMethods: the shim's */
  DbFile *db;               /* the database this WAL belongs to, while both are open */
  unsigned char *buffer;    /* BUFFER_BYTES, allocated at the first write */
  int used;                 /* bytes in buffer */
  sqlite3_int64 start;      /* file offset of buffer[0] */
  int pageSize;             /* from the WAL header; 0 while unknown */
  sqlite3_int64 headerEnd;  /* where the last 24-byte write (a frame header) ended; -1 if none */
  /* The commit frame this handle wrote last, for discard_last_commit(): where it ends (0 if none)
  ** and its header as written, which names it (salts and checksums) among all others. */
  sqlite3_int64 commitEnd;
  unsigned char commitHeader[FRAME_HEADER_BYTES];
  sqlite3_int64 commitPageAt; /* where that frame's page goes, while the page size is unknown; else -1 */
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

/* The VFS the shim wraps: the process's default when the extension was loaded. */
extern sqlite3_vfs *walcoalesce_real_vfs;

/* wal-file.c: opens a WAL through the real VFS and wraps it (xOpen's contract). */
int walcoalesce_open_wal(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags);
/* wal-file.c: writes a WAL's buffer out; it is empty afterwards whatever the outcome. */
int walcoalesce_flush(WalFile *p);

/* A 32-bit big-endian number, as the WAL's headers store them. */
static inline unsigned int walcoalesce_big_endian32(const unsigned char *p) {
  return ((unsigned int)p[0] << 24) | ((unsigned int)p[1] << 16) | ((unsigned int)p[2] << 8) | p[3];
}

/* wal-file.c: the page size a WAL header states (64 KiB is written as 1), or 0 if it is not a
** valid one. */
int walcoalesce_header_page_size(const unsigned char *header);

/* wal-file.c: whether `file` is a WAL this shim opened. */
int walcoalesce_is_wal_file(const sqlite3_file *file);

/* discard-commit.c: the SQL function discard_last_commit(). */
void walcoalesce_discard_last_commit(sqlite3_context *context, int argc, sqlite3_value **argv);

/* db-file.c: opens a main database through the real VFS and wraps it (xOpen's contract). */
int walcoalesce_open_db(sqlite3_filename name, sqlite3_file *file, int flags, int *outFlags);
/* db-file.c: whether `file` is a database this shim opened (so it has the barrier guard). */
int walcoalesce_is_db_file(const sqlite3_file *file);

#endif

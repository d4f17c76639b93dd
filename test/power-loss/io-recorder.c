/*
 * LD_PRELOAD shim for the power-loss test: logs every write, truncate, sync, unlink and rename the
 * process makes on files under IO_RECORDER_DIR (shared memory excepted: SQLite rebuilds it), with
 * the bytes written, to the file IO_RECORDER_LOG. Compiled by the test (test/shim.ts); never shipped.
 *
 * A record is a packed header (type, file, monotonic ns, offset, length) followed by `length`
 * bytes of data for writes and of path for opens. A write and its record are made under one
 * lock, and a sync logs its start under the same lock: a write recorded before a sync's start
 * had returned before the sync began, so that sync covers it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { OPEN = 1, WRITE = 2, SYNC_START = 3, SYNC_END = 4, TRUNCATE = 5, UNLINK = 6, RENAME = 7 };

struct __attribute__((packed)) record {
  uint8_t type;
  int32_t file;
  uint64_t ns;
  int64_t offset;
  uint64_t length;
};

#define MAX_FDS 65536
static int files[MAX_FDS]; /* fd -> file number + 1; 0 when not recorded */
static char *names[256];
static int named;
static int logFd = -1;
static const char *dir;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_unlink)(const char *);
static int (*real_rename)(const char *, const char *);

__attribute__((constructor)) static void init(void) {
  real_write = dlsym(RTLD_NEXT, "write");
  real_pwrite = dlsym(RTLD_NEXT, "pwrite");
  real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
  real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
  real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
  real_fsync = dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
  real_close = dlsym(RTLD_NEXT, "close");
  real_open = dlsym(RTLD_NEXT, "open");
  real_open64 = dlsym(RTLD_NEXT, "open64");
  real_openat = dlsym(RTLD_NEXT, "openat");
  real_openat64 = dlsym(RTLD_NEXT, "openat64");
  real_unlink = dlsym(RTLD_NEXT, "unlink");
  real_rename = dlsym(RTLD_NEXT, "rename");
  dir = getenv("IO_RECORDER_DIR");
  const char *path = getenv("IO_RECORDER_LOG");
  if (dir && path) logFd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

static uint64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void put(const void *data, size_t length) {
  const char *p = data;
  while (length > 0) {
    ssize_t n = syscall(SYS_write, logFd, p, length);
    if (n <= 0) abort();
    p += n;
    length -= (size_t)n;
  }
}

/* Called with the lock held. */
static void emit(uint8_t type, int file, int64_t offset, const void *data, uint64_t length) {
  struct record r = {type, file, now(), offset, length};
  put(&r, sizeof r);
  if (data && length) put(data, length);
}

static int recorded(int fd) { return fd >= 0 && fd < MAX_FDS ? files[fd] - 1 : -1; }

static int underDir(const char *path) {
  size_t n = strlen(path);
  return logFd >= 0 && path[0] == '/' && strncmp(path, dir, strlen(dir)) == 0 &&
         !(n > 4 && strcmp(path + n - 4, "-shm") == 0);
}

static void opened(int fd, const char *path) {
  if (fd < 0 || fd >= MAX_FDS || !underDir(path)) return;
  pthread_mutex_lock(&lock);
  int file = -1;
  for (int i = 0; i < named; i++)
    if (strcmp(names[i], path) == 0) file = i;
  if (file < 0 && named < 256) {
    file = named++;
    names[file] = strdup(path);
    emit(OPEN, file, 0, path, strlen(path));
  }
  files[fd] = file + 1;
  pthread_mutex_unlock(&lock);
}

#define OPEN_WRAPPER(name, real, ...)                                   \
  {                                                                     \
    mode_t mode = 0;                                                    \
    if (flags & (O_CREAT | O_TMPFILE)) {                                \
      va_list args;                                                     \
      va_start(args, flags);                                            \
      mode = va_arg(args, mode_t);                                      \
      va_end(args);                                                     \
    }                                                                   \
    int fd = real(__VA_ARGS__, flags, mode);                            \
    opened(fd, path);                                                   \
    return fd;                                                          \
  }

int open(const char *path, int flags, ...) OPEN_WRAPPER(open, real_open, path)
int open64(const char *path, int flags, ...) OPEN_WRAPPER(open64, real_open64, path)
int openat(int at, const char *path, int flags, ...) OPEN_WRAPPER(openat, real_openat, at, path)
int openat64(int at, const char *path, int flags, ...) OPEN_WRAPPER(openat64, real_openat64, at, path)

int close(int fd) {
  if (recorded(fd) >= 0) files[fd] = 0;
  return real_close(fd);
}

static ssize_t writeAt(ssize_t (*real)(int, const void *, size_t, off_t), int fd, const void *buf, size_t n, off_t at) {
  if (recorded(fd) < 0) return real(fd, buf, n, at);
  pthread_mutex_lock(&lock);
  ssize_t done = real(fd, buf, n, at);
  if (done > 0) emit(WRITE, recorded(fd), at, buf, (uint64_t)done);
  pthread_mutex_unlock(&lock);
  return done;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t at) { return writeAt(real_pwrite, fd, buf, n, at); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t at) { return writeAt(real_pwrite64, fd, buf, n, at); }

ssize_t write(int fd, const void *buf, size_t n) {
  if (recorded(fd) < 0) return real_write(fd, buf, n);
  pthread_mutex_lock(&lock);
  off_t at = lseek(fd, 0, SEEK_CUR);
  ssize_t done = real_write(fd, buf, n);
  if (done > 0) emit(WRITE, recorded(fd), at, buf, (uint64_t)done);
  pthread_mutex_unlock(&lock);
  return done;
}

static int truncateTo(int (*real)(int, off_t), int fd, off_t size) {
  if (recorded(fd) < 0) return real(fd, size);
  pthread_mutex_lock(&lock);
  int result = real(fd, size);
  if (result == 0) emit(TRUNCATE, recorded(fd), size, 0, 0);
  pthread_mutex_unlock(&lock);
  return result;
}

int ftruncate(int fd, off_t size) { return truncateTo(real_ftruncate, fd, size); }
int ftruncate64(int fd, off_t size) { return truncateTo(real_ftruncate64, fd, size); }

/* The end record's offset is the sync's result: 0, or the errno it failed with. */
static int syncWith(int (*real)(int), int fd) {
  int file = recorded(fd);
  if (file < 0) return real(fd);
  pthread_mutex_lock(&lock);
  emit(SYNC_START, file, 0, 0, 0);
  pthread_mutex_unlock(&lock);
  int result = real(fd);
  int error = result == 0 ? 0 : errno;
  pthread_mutex_lock(&lock);
  emit(SYNC_END, file, error, 0, 0);
  pthread_mutex_unlock(&lock);
  errno = error;
  return result;
}

int fsync(int fd) { return syncWith(real_fsync, fd); }
int fdatasync(int fd) { return syncWith(real_fdatasync, fd); }

int unlink(const char *path) {
  int result = real_unlink(path);
  if (result == 0 && underDir(path)) {
    pthread_mutex_lock(&lock);
    emit(UNLINK, -1, 0, path, strlen(path));
    pthread_mutex_unlock(&lock);
  }
  return result;
}

int rename(const char *from, const char *to) {
  int result = real_rename(from, to);
  if (result == 0 && (underDir(from) || underDir(to))) {
    pthread_mutex_lock(&lock);
    emit(RENAME, -1, 0, to, strlen(to));
    pthread_mutex_unlock(&lock);
  }
  return result;
}

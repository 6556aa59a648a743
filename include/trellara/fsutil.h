/*
 * fsutil.h - small file-system helpers with PostgreSQL's durability rules.
 *
 * Every function logs its own failure once (with the path and %m) and
 * returns -1; callers pass the failure up.  An fsync failure is never
 * retried: the caller must treat it as fatal for the file.
 */
#ifndef TRELLARA_FSUTIL_H
#define TRELLARA_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdir -p with mode 0700 for every directory it creates; each one it
 * creates is made durable (its parent directory fsynced). */
int fs_mkdir_p(const char *path);
/* fsync a directory (after creating, renaming or removing entries). */
int fs_fsync_dir(const char *path);
/* Create a temporary file next to path, ".<name>.<16 random hex>.tmp"
 * (0600, O_EXCL|O_NOFOLLOW: a planted file or link is never opened, and
 * the name cannot be guessed).  Returns the descriptor and the name
 * (newly allocated), or -1 (logged). */
int fs_open_temp(const char *path, char **tmp_path);
/* Write path atomically and durably: a temporary file (fs_open_temp),
 * write, fsync, rename over path, fsync the parent directory.  A crash
 * can leave the temporary file behind; it is never read. */
int fs_write_durable(const char *path, const void *data, size_t len);
/* The same, atomic always, durable only when asked (no fsyncs otherwise:
 * for files rewritten often whose loss in a crash costs nothing). */
int fs_write_atomic(const char *path, const void *data, size_t len, bool durable);
/* Read a whole (small) file into a new NUL-terminated buffer. */
int fs_read_file(const char *path, char **data, size_t *len);
/* Write all bytes at pos (retries short writes and EINTR). */
int fs_pwrite_all(int fd, const void *buf, size_t len, off_t pos, const char *path);
/* Free bytes available to us on the file system holding path. */
int fs_free_bytes(const char *path, uint64_t *free_bytes);
/* fdatasync, with the TRELLARA_TEST_FSYNC_FAIL test hook honoured. */
int fs_fdatasync(int fd, const char *path);
/* The same without the log line (errno set): stream_fs_posix uses it. */
int fs_fdatasync_nolog(int fd);
/* How many fs_fdatasync calls this process made (for the test hook). */
unsigned long fs_fdatasync_calls(void);

#endif

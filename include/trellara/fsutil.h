/*
 * fsutil.h - small file-system helpers with PostgreSQL's durability rules.
 *
 * Every function logs its own failure once (with the path and %m) and
 * returns -1; callers pass the failure up.  An fsync failure is never
 * retried: the caller must treat it as fatal for the file.
 *
 * The helpers are written once, over struct fs_ops (the calls they make);
 * the fs_* functions run them on the process's file system, and the
 * stream library runs the same code on its own file systems (stream_fs.h:
 * the simulated one included) through fs_ops_*.
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
/* Whether process pid is alive and its command line (/proc/PID/cmdline)
 * names program; alive with an unreadable command line counts as yes. */
bool fs_process_runs(long pid, const char *program);
/* fdatasync, with the TRELLARA_TEST_FSYNC_FAIL test hook honoured. */
int fs_fdatasync(int fd, const char *path);
/* The same without the log line (errno set): stream_fs_posix uses it. */
int fs_fdatasync_nolog(int fd);
/* How many fs_fdatasync calls this process made (for the test hook). */
unsigned long fs_fdatasync_calls(void);

/* ---- the same helpers over any file system ----
 *
 * The calls, with POSIX meaning: -1 (or a negative ssize_t) with errno
 * set, nothing logged; ctx is handed to every call.  read(fd, buf, len,
 * pos) is only ever called in order from byte 0 of a descriptor open()
 * just returned, pos saying where (so either read or pread serves).
 * is_dir(path, &is_dir) fails as stat(2) does.  fs_posix_ops is the real
 * system calls (ctx unused; fdatasync honours TRELLARA_TEST_FSYNC_FAIL). */
struct fs_ops {
	int (*open)(void *ctx, const char *path, int flags, int mode);
	int (*close)(void *ctx, int fd);
	ssize_t (*read)(void *ctx, int fd, void *buf, size_t len, off_t pos);
	ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t len, off_t pos);
	int (*fdatasync)(void *ctx, int fd);
	int (*fsync)(void *ctx, int fd);
	int (*mkdir)(void *ctx, const char *path, int mode);
	int (*is_dir)(void *ctx, const char *path, bool *is_dir);
	int (*rename)(void *ctx, const char *from, const char *to);
	int (*unlink)(void *ctx, const char *path);
	int (*random)(void *ctx, void *buf, size_t len);
};
extern const struct fs_ops fs_posix_ops;

/* What the fs_* functions of the same names do, on ops. */
int fs_ops_mkdir_p(const struct fs_ops *ops, void *ctx, const char *path);
int fs_ops_fsync_dir(const struct fs_ops *ops, void *ctx, const char *path);
int fs_ops_open_temp(const struct fs_ops *ops, void *ctx, const char *path, char **tmp_path);
int fs_ops_write_atomic(const struct fs_ops *ops, void *ctx, const char *path, const void *data, size_t len,
			bool durable);
/* Returns -1 with errno set when the file cannot be opened (logged only
 * when it cannot be read). */
int fs_ops_read_file(const struct fs_ops *ops, void *ctx, const char *path, char **data, size_t *len);
int fs_ops_pwrite_all(const struct fs_ops *ops, void *ctx, int fd, const void *buf, size_t len, off_t pos,
		      const char *path);
int fs_ops_fdatasync(const struct fs_ops *ops, void *ctx, int fd, const char *path);

#endif

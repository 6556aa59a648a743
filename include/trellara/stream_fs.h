/*
 * stream_fs.h - the file system under the stream library.
 *
 * Contract.  The stream library (common/stream_*.c) touches storage only
 * through a struct stream_fs: exactly the calls listed below, with POSIX
 * meaning.  Every call that can fail returns -1 (or a negative ssize_t)
 * and sets errno, as POSIX does, so the library's messages ("%m") are the
 * same whichever implementation runs; the calls log nothing themselves.
 * Descriptors are small non-negative ints private to one stream_fs.
 *
 *   open(path, flags, mode)  O_RDONLY/O_WRONLY/O_RDWR, O_CREAT, O_EXCL,
 *                            O_DIRECTORY (a directory, for fsync only),
 *                            O_NOFOLLOW, O_CLOEXEC
 *   close, pread, pwrite     a pwrite may be short (callers loop)
 *   fdatasync(fd)            the file's bytes and size durable
 *   fsync(fd)                the same; on a directory descriptor: the
 *                            directory's entries (creates, renames,
 *                            unlinks inside it) durable
 *   ftruncate, fallocate     fallocate(fd, off, len) extends with zeros
 *                            like posix_fallocate (errno on failure)
 *   fsize(fd)                the file's current size (fstat)
 *   flock(fd, op)            LOCK_EX/LOCK_SH/LOCK_UN, | LOCK_NB
 *   stat(path)               exists, is a directory, size
 *   mkdir, rename, unlink    the entry changes at once, durable only after
 *                            an fsync of its directory
 *   list_dir(path)           the names in a directory (no "." or "..")
 *   free_bytes(path)         space available (statvfs)
 *   random(buf, len)         random bytes (stream ids, temporary names)
 *   now_us()                 the clock frames are stamped with
 *
 * A file's durable state is what the last fdatasync/fsync of it saw; a
 * directory entry is durable once its directory was fsynced after the
 * change.  Nothing else is promised across a crash: an implementation may
 * keep, drop or tear anything written since (stream_fs_sim does).
 *
 * Two implementations: stream_fs_posix() (the real system calls; the
 * TRELLARA_TEST_FSYNC_FAIL hook of fsutil.h applies to its fdatasync) and
 * the simulated one below.  Tailing readers wait with inotify only on the
 * POSIX file system; on another one stream_reader_wait returns at once.
 */
#ifndef TRELLARA_STREAM_FS_H
#define TRELLARA_STREAM_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stream_fs_stat {
	bool is_dir;
	uint64_t size;
};

struct stream_fs {
	int (*open)(struct stream_fs *fs, const char *path, int flags, int mode);
	int (*close)(struct stream_fs *fs, int fd);
	ssize_t (*pread)(struct stream_fs *fs, int fd, void *buf, size_t len, off_t pos);
	ssize_t (*pwrite)(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos);
	int (*fdatasync)(struct stream_fs *fs, int fd);
	int (*fsync)(struct stream_fs *fs, int fd);
	int (*ftruncate)(struct stream_fs *fs, int fd, off_t len);
	int (*fallocate)(struct stream_fs *fs, int fd, off_t pos, off_t len);
	int (*fsize)(struct stream_fs *fs, int fd, uint64_t *size);
	int (*flock)(struct stream_fs *fs, int fd, int op);
	int (*stat)(struct stream_fs *fs, const char *path, struct stream_fs_stat *st);
	int (*mkdir)(struct stream_fs *fs, const char *path, int mode);
	int (*rename)(struct stream_fs *fs, const char *from, const char *to);
	int (*unlink)(struct stream_fs *fs, const char *path);
	/* *names: newly allocated array of newly allocated strings */
	int (*list_dir)(struct stream_fs *fs, const char *path, char ***names, size_t *n);
	int (*free_bytes)(struct stream_fs *fs, const char *path, uint64_t *bytes);
	int (*random)(struct stream_fs *fs, void *buf, size_t len);
	int64_t (*now_us)(struct stream_fs *fs);
	bool is_posix;
};

/* The process's POSIX file system (a static object). */
struct stream_fs *stream_fs_posix(void);

/* ---- helpers over any stream_fs (log their failure once, with the
 * path and %m, and return -1): fsutil.h's fs_ops_* run on fs, the same
 * code and messages as the fs_* functions ---- */

int sfs_pwrite_all(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos, const char *path);
int sfs_fdatasync(struct stream_fs *fs, int fd, const char *path);
int sfs_fsync_dir(struct stream_fs *fs, const char *path);
int sfs_mkdir_p(struct stream_fs *fs, const char *path);
int sfs_write_durable(struct stream_fs *fs, const char *path, const void *data, size_t len);
/* Returns -1 with errno set and logs nothing: the caller decides whether
 * absence is an error. */
int sfs_read_file(struct stream_fs *fs, const char *path, char **data, size_t *len);
void sfs_free_names(char **names, size_t n);

/* ---- the simulated file system (tests and the simulator) ----
 *
 * In memory.  Each file has a volatile image (what reads see) and a
 * durable image (what its last fdatasync/fsync saw); each directory entry
 * has a volatile and a durable binding (the durable one follows the
 * volatile one when the directory is fsynced).  Deterministic: the clock
 * and the random bytes come from a seeded generator, nothing from the
 * host. */
struct stream_fs *stream_fs_sim_new(uint64_t seed, uint64_t capacity_bytes);
void stream_fs_sim_free(struct stream_fs *fs);

enum sim_crash_mode {
	SIM_CRASH_KILL = 0, /* process death: the kernel keeps every write and entry,
			     * still volatile (a later power loss may drop it) */
	SIM_CRASH_POWER     /* power loss: per file, the unsynced part is dropped whole,
			     * kept whole, torn at a prefix, or kept sector by sector
			     * in any order; unsynced directory entries are lost */
};
/* Another process on the same disk: a new handle on the same files,
 * entries and images, with a descriptor table, locks, death and injected
 * failures of its own (flock between views excludes as between
 * processes).  Freed with stream_fs_sim_free (the view alone); freeing
 * the handle stream_fs_sim_new returned frees the disk and every view.
 * The functions below act on the handle given: stream_fs_sim_kill,
 * _kill_after, _dead, _inject and _calls on that process only;
 * stream_fs_sim_crash(SIM_CRASH_KILL) restarts that process only;
 * SIM_CRASH_POWER is the whole machine: it applies to the disk, restarts
 * the handle given and kills every other view (restart each with
 * stream_fs_sim_view_restart). */
struct stream_fs *stream_fs_sim_view(struct stream_fs *disk);
/* kill -9 of that process: its later calls fail with EIO (close
 * succeeds), its descriptors close and its locks are released at once;
 * what it wrote stays on the disk, volatile as it was. */
void stream_fs_sim_view_kill(struct stream_fs *view);
/* The process starts again (after a kill, or now): alive, no
 * descriptor, no lock, no injected failure; the disk unchanged. */
void stream_fs_sim_view_restart(struct stream_fs *view);

/* The process dies now: every later call fails with EIO (close
 * succeeds), nothing more reaches the images. */
void stream_fs_sim_kill(struct stream_fs *fs);
/* Die after `ops` more calls (the call that reaches 0 fails; a pwrite
 * that reaches 0 first writes a seeded prefix of its bytes).  0: never. */
void stream_fs_sim_kill_after(struct stream_fs *fs, uint64_t ops);
bool stream_fs_sim_dead(const struct stream_fs *fs);
/* Restart after a death (or now): apply the crash to the images, drop
 * the handle's descriptors and locks, and come back alive.  A power loss
 * also kills every other view (stream_fs_sim_view).  Every choice comes
 * from seed. */
void stream_fs_sim_crash(struct stream_fs *fs, enum sim_crash_mode mode, uint64_t seed);

enum sim_op { SIM_OP_PWRITE, SIM_OP_FDATASYNC, SIM_OP_FSYNC, SIM_OP_FALLOCATE, SIM_OP_OPEN, SIM_OP_COUNT };
/* The nth (1-based) next call of op fails with err (EIO, ENOSPC, ...). */
void stream_fs_sim_inject(struct stream_fs *fs, enum sim_op op, uint64_t nth, int err);
/* Calls made so far (every op). */
uint64_t stream_fs_sim_calls(const struct stream_fs *fs);

/* Direct access for tests: the volatile bytes of a file (NULL if none),
 * and a write that bypasses the simulation (volatile and durable both:
 * "the disk now holds this", for injecting damage). */
const uint8_t *stream_fs_sim_peek(struct stream_fs *fs, const char *path, uint64_t *size);
int stream_fs_sim_poke(struct stream_fs *fs, const char *path, uint64_t pos, const void *buf, size_t len);

#endif

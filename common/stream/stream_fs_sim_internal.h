/*
 * stream_fs_sim_internal.h - what the simulated file system's two halves
 * share and nobody else uses (the contract is trellara/stream_fs.h):
 *
 *   stream_fs_sim.c      the disk model: inodes with their volatile and
 *                        durable images, directory entries, views
 *                        (processes), crashes, injected failures
 *   stream_fs_sim_ops.c  the operations table (open, pwrite, fsync,
 *                        rename, ...) on that model
 *
 * Nothing here fails except as the operations say (-1 and errno).
 */
#ifndef TRELLARA_STREAM_FS_SIM_INTERNAL_H
#define TRELLARA_STREAM_FS_SIM_INTERNAL_H

#include "trellara/stream_fs.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_SECTOR 512

struct sim_inode {
	bool is_dir;
	uint8_t *vol;
	uint64_t vol_size, vol_cap;
	uint8_t *dur;
	uint64_t dur_size;
	uint64_t dirty_lo, dirty_hi; /* dirty_lo >= dirty_hi: clean */
	bool size_dirty;
};

struct sim_entry {
	char *path;
	int vol_ino; /* -1: absent */
	int dur_ino;
};

/* A directory change not yet made durable: entry `entry` now binds
 * `ino`.  Changes of one call (a rename's two entries) share a seq. */
struct sim_pending {
	size_t entry;
	int ino;
	uint64_t seq;
};

struct sim_fd {
	bool open;
	int ino;
	bool is_dir;
	bool writable;
	int lock; /* 0, LOCK_SH or LOCK_EX */
};

/* The disk: files, directory entries, the clock and the generator,
 * shared by every view (process) on it. */
struct sim_disk {
	uint64_t rng;
	uint64_t capacity;
	struct sim_inode *inodes;
	size_t n_inodes;
	struct sim_entry *entries;
	size_t n_entries;
	struct sim_pending *pending;
	size_t n_pending;
	uint64_t seq;
	int64_t clock_us;
	struct sim_fs **views; /* owned: views[0] is the handle stream_fs_sim_new made */
	size_t n_views;
};

/* One process's handle on the disk: its descriptors (and their locks),
 * whether it is dead, the failures injected into its calls. */
struct sim_fs {
	struct stream_fs ops; /* first: a struct stream_fs * is a struct sim_fs * */
	struct sim_disk *disk;
	struct sim_fd *fds;
	size_t n_fds;
	bool dead;
	uint64_t kill_after;
	uint64_t inject_nth[SIM_OP_COUNT];
	int inject_err[SIM_OP_COUNT];
	uint64_t calls;
};
static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? splitmix(s) % n : 0;
}

static inline struct sim_fs *S(struct stream_fs *fs)
{
	return (struct sim_fs *)fs;
}

/* Count a call; false (errno EIO) when the process is or now becomes dead. */
static inline bool alive(struct sim_fs *s)
{
	s->calls++;
	if (s->dead) {
		errno = EIO;
		return false;
	}
	if (s->kill_after && --s->kill_after == 0) {
		s->dead = true;
		errno = EIO;
		return false;
	}
	return true;
}

static inline bool injected(struct sim_fs *s, enum sim_op op)
{
	if (s->inject_nth[op] && --s->inject_nth[op] == 0) {
		errno = s->inject_err[op];
		return true;
	}
	return false;
}

/* The operations table every view starts from (stream_fs_sim_ops.c). */
extern const struct stream_fs stream_fs_sim_ops;

/* ---- the model (stream_fs_sim.c) ---- */

/* The entry of path, or NULL. */
struct sim_entry *stream_fs_sim_entry_find(struct sim_fs *s, const char *path);
/* Bind path to ino now (volatile); durable after its directory's fsync. */
void stream_fs_sim_entry_set(struct sim_fs *s, const char *path, int ino, uint64_t seq);
/* The inode path binds now, or -1. */
int stream_fs_sim_lookup(struct sim_fs *s, const char *path);
/* Length of the parent part of path ("/a/b" -> 2, "/a" -> 1 for "/"). */
size_t stream_fs_sim_parent_len(const char *path);
bool stream_fs_sim_is_child(const char *path, const char *dir);
/* The inode of path's parent directory, or -1. */
int stream_fs_sim_parent_ino(struct sim_fs *s, const char *path);
/* A new empty inode; returns its number. */
int stream_fs_sim_inode_new(struct sim_fs *s, bool is_dir);
void stream_fs_sim_vol_resize(struct sim_inode *n, uint64_t size);
/* The durable image becomes the volatile one. */
void stream_fs_sim_inode_sync(struct sim_inode *n);
/* The bytes of every file's volatile image. */
uint64_t stream_fs_sim_used_bytes(struct sim_fs *s);
void stream_fs_sim_write_bytes(struct sim_inode *n, const void *buf, size_t len, uint64_t pos);

#endif

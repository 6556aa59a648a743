/*
 * stream_fs_sim.c - the simulated file system of stream_fs.h.
 *
 * Every file (inode) holds a volatile image, what reads see, and a
 * durable image, what its last fdatasync/fsync made durable, plus the
 * byte range [dirty_lo, dirty_hi) written since then.  Every directory
 * entry binds a path to an inode twice: the volatile binding changes at
 * once (create, rename, unlink, mkdir), the durable one follows it when
 * the directory is fsynced.  A crash (stream_fs_sim_crash) turns the
 * simulation's state into the disk's: on a power loss a seeded prefix of
 * the unsynced directory changes survives (they reach the disk in order,
 * as a journal writes them; a rename is one change), and each file
 * keeps its durable image with none, all, a torn prefix, or a random set
 * of 512-byte sectors of what was written since its last sync (SQLite's
 * test VFS does the same).  Everything is driven by a splitmix64
 * generator: no clock, no host randomness.
 *
 * Views.  The files, entries, clock and generator are the disk's
 * (struct sim_disk); a handle (struct sim_fs) is one process on it, with
 * its own descriptors, locks, death and injected failures.  Locks of
 * all views on one file exclude each other, as flock does between
 * processes.
 */
#include "trellara/stream_fs.h"

#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

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

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? splitmix(s) % n : 0;
}

static struct sim_fs *S(struct stream_fs *fs)
{
	return (struct sim_fs *)fs;
}

/* Count a call; false (errno EIO) when the process is or now becomes dead. */
static bool alive(struct sim_fs *s)
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

static bool injected(struct sim_fs *s, enum sim_op op)
{
	if (s->inject_nth[op] && --s->inject_nth[op] == 0) {
		errno = s->inject_err[op];
		return true;
	}
	return false;
}

static struct sim_entry *entry_find(struct sim_fs *s, const char *path)
{
	for (size_t i = 0; i < s->disk->n_entries; i++)
		if (strcmp(s->disk->entries[i].path, path) == 0)
			return &s->disk->entries[i];
	return NULL;
}

static struct sim_entry *entry_get(struct sim_fs *s, const char *path)
{
	struct sim_entry *e = entry_find(s, path);
	if (e)
		return e;
	s->disk->entries = xrealloc(s->disk->entries, (s->disk->n_entries + 1) * sizeof *s->disk->entries);
	e = &s->disk->entries[s->disk->n_entries++];
	e->path = xstrdup(path);
	e->vol_ino = e->dur_ino = -1;
	return e;
}

/* Bind path to ino now (volatile); durable after its directory's fsync. */
static void entry_set(struct sim_fs *s, const char *path, int ino, uint64_t seq)
{
	struct sim_entry *e = entry_get(s, path);
	e->vol_ino = ino;
	s->disk->pending = xrealloc(s->disk->pending, (s->disk->n_pending + 1) * sizeof *s->disk->pending);
	s->disk->pending[s->disk->n_pending++] = (struct sim_pending){ (size_t)(e - s->disk->entries), ino, seq };
}

static int lookup(struct sim_fs *s, const char *path)
{
	struct sim_entry *e = entry_find(s, path);
	return e ? e->vol_ino : -1;
}

/* Length of the parent part of path ("/a/b" -> 2, "/a" -> 1 for "/"). */
static size_t parent_len(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	return slash == path ? 1 : (size_t)(slash - path);
}

static bool is_child(const char *path, const char *dir)
{
	size_t dl = strlen(dir);
	size_t pl = parent_len(path);
	return strcmp(path, dir) != 0 && pl == dl && strncmp(path, dir, dl) == 0;
}

static int parent_ino(struct sim_fs *s, const char *path)
{
	size_t pl = parent_len(path);
	if (pl == 0)
		return -1;
	char *parent = xmalloc(pl + 1);
	memcpy(parent, path, pl);
	parent[pl] = '\0';
	int ino = lookup(s, parent);
	free(parent);
	return ino;
}

static int inode_new(struct sim_fs *s, bool is_dir)
{
	s->disk->inodes = xrealloc(s->disk->inodes, (s->disk->n_inodes + 1) * sizeof *s->disk->inodes);
	struct sim_inode *n = &s->disk->inodes[s->disk->n_inodes];
	memset(n, 0, sizeof *n);
	n->is_dir = is_dir;
	return (int)s->disk->n_inodes++;
}

static void mark_dirty(struct sim_inode *n, uint64_t lo, uint64_t hi)
{
	if (n->dirty_lo >= n->dirty_hi) {
		n->dirty_lo = lo;
		n->dirty_hi = hi;
	} else {
		if (lo < n->dirty_lo)
			n->dirty_lo = lo;
		if (hi > n->dirty_hi)
			n->dirty_hi = hi;
	}
}

static void vol_resize(struct sim_inode *n, uint64_t size)
{
	if (size > n->vol_cap) {
		uint64_t cap = n->vol_cap ? n->vol_cap : 4096;
		while (cap < size)
			cap *= 2;
		n->vol = xrealloc(n->vol, (size_t)cap);
		n->vol_cap = cap;
	}
	if (size > n->vol_size)
		memset(n->vol + n->vol_size, 0, (size_t)(size - n->vol_size));
	if (size != n->vol_size) {
		uint64_t lo = size < n->vol_size ? size : n->vol_size;
		uint64_t hi = size < n->vol_size ? n->vol_size : size;
		mark_dirty(n, lo, hi);
		n->size_dirty = true;
	}
	n->vol_size = size;
}

/* The durable image becomes the volatile one. */
static void inode_sync(struct sim_inode *n)
{
	if (n->dirty_lo >= n->dirty_hi && !n->size_dirty && n->dur_size == n->vol_size)
		return;
	n->dur = xrealloc(n->dur, (size_t)(n->vol_size ? n->vol_size : 1));
	if (n->dur_size < n->vol_size)
		memset(n->dur + n->dur_size, 0, (size_t)(n->vol_size - n->dur_size));
	uint64_t lo = n->dirty_lo < n->dirty_hi ? n->dirty_lo : 0;
	uint64_t hi = n->dirty_lo < n->dirty_hi ? n->dirty_hi : 0;
	if (hi > n->vol_size)
		hi = n->vol_size;
	if (lo < hi)
		memcpy(n->dur + lo, n->vol + lo, (size_t)(hi - lo));
	n->dur_size = n->vol_size;
	n->dirty_lo = n->dirty_hi = 0;
	n->size_dirty = false;
}

static struct sim_fd *fd_get(struct sim_fs *s, int fd)
{
	if (fd < 0 || (size_t)fd >= s->n_fds || !s->fds[fd].open) {
		errno = EBADF;
		return NULL;
	}
	return &s->fds[fd];
}

static int sim_open(struct stream_fs *fs, const char *path, int flags, int mode)
{
	(void)mode;
	struct sim_fs *s = S(fs);
	if (!alive(s) || injected(s, SIM_OP_OPEN))
		return -1;
	int ino = lookup(s, path);
	if (ino >= 0 && (flags & O_CREAT) && (flags & O_EXCL)) {
		errno = EEXIST;
		return -1;
	}
	if (ino < 0) {
		if (!(flags & O_CREAT) || (flags & O_DIRECTORY)) {
			errno = ENOENT;
			return -1;
		}
		int pino = parent_ino(s, path);
		if (pino < 0 || !s->disk->inodes[pino].is_dir) {
			errno = ENOENT;
			return -1;
		}
		ino = inode_new(s, false);
		entry_set(s, path, ino, ++s->disk->seq);
	}
	bool is_dir = s->disk->inodes[ino].is_dir;
	if ((flags & O_DIRECTORY) && !is_dir) {
		errno = ENOTDIR;
		return -1;
	}
	if (is_dir && (flags & O_ACCMODE) != O_RDONLY) {
		errno = EISDIR;
		return -1;
	}
	s->fds = xrealloc(s->fds, (s->n_fds + 1) * sizeof *s->fds);
	struct sim_fd *f = &s->fds[s->n_fds];
	memset(f, 0, sizeof *f);
	f->open = true;
	f->ino = ino;
	f->is_dir = is_dir;
	f->writable = (flags & O_ACCMODE) != O_RDONLY;
	return (int)s->n_fds++; /* never reused: a stale descriptor stays bad */
}

static int sim_close(struct stream_fs *fs, int fd)
{
	struct sim_fs *s = S(fs);
	s->calls++;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	f->open = false;
	f->lock = 0;
	return 0;
}

static ssize_t sim_pread(struct stream_fs *fs, int fd, void *buf, size_t len, off_t pos)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	if (f->is_dir) {
		errno = EISDIR;
		return -1;
	}
	struct sim_inode *n = &s->disk->inodes[f->ino];
	if (pos < 0 || (uint64_t)pos >= n->vol_size)
		return 0;
	uint64_t avail = n->vol_size - (uint64_t)pos;
	size_t got = len < avail ? len : (size_t)avail;
	memcpy(buf, n->vol + pos, got);
	return (ssize_t)got;
}

static uint64_t used_bytes(struct sim_fs *s)
{
	uint64_t used = 0;
	for (size_t i = 0; i < s->disk->n_inodes; i++)
		used += s->disk->inodes[i].vol_size;
	return used;
}

static void write_bytes(struct sim_inode *n, const void *buf, size_t len, uint64_t pos)
{
	if (len == 0)
		return;
	if (pos + len > n->vol_size)
		vol_resize(n, pos + len);
	memcpy(n->vol + pos, buf, len);
	mark_dirty(n, pos, pos + len);
}

static ssize_t sim_pwrite(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos)
{
	struct sim_fs *s = S(fs);
	s->calls++;
	if (s->dead) {
		errno = EIO;
		return -1;
	}
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	if (!f->writable || f->is_dir) {
		errno = EBADF;
		return -1;
	}
	struct sim_inode *n = &s->disk->inodes[f->ino];
	if (s->kill_after && --s->kill_after == 0) {
		/* dies in the middle of the write: a seeded prefix got there */
		size_t part = (size_t)below(&s->disk->rng, len + 1);
		write_bytes(n, buf, part, (uint64_t)pos);
		s->dead = true;
		errno = EIO;
		return -1;
	}
	if (injected(s, SIM_OP_PWRITE))
		return -1;
	uint64_t grow = (uint64_t)pos + len > n->vol_size ? (uint64_t)pos + len - n->vol_size : 0;
	if (grow && used_bytes(s) + grow > s->disk->capacity) {
		errno = ENOSPC;
		return -1;
	}
	write_bytes(n, buf, len, (uint64_t)pos);
	return (ssize_t)len;
}

static int sim_sync(struct stream_fs *fs, int fd, enum sim_op op)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	if (injected(s, op))
		return -1; /* the dirty data stays volatile */
	if (!f->is_dir) {
		inode_sync(&s->disk->inodes[f->ino]);
		return 0;
	}
	/* a directory: the entries inside it become durable */
	const char *dir = NULL;
	for (size_t i = 0; i < s->disk->n_entries && !dir; i++)
		if (s->disk->entries[i].vol_ino == f->ino)
			dir = s->disk->entries[i].path;
	if (!dir)
		return 0;
	size_t kept = 0;
	for (size_t i = 0; i < s->disk->n_pending; i++) {
		struct sim_pending *p = &s->disk->pending[i];
		if (is_child(s->disk->entries[p->entry].path, dir))
			s->disk->entries[p->entry].dur_ino = p->ino;
		else
			s->disk->pending[kept++] = *p;
	}
	s->disk->n_pending = kept;
	return 0;
}

static int sim_fdatasync(struct stream_fs *fs, int fd)
{
	return sim_sync(fs, fd, SIM_OP_FDATASYNC);
}

static int sim_fsync(struct stream_fs *fs, int fd)
{
	return sim_sync(fs, fd, SIM_OP_FSYNC);
}

static int sim_ftruncate(struct stream_fs *fs, int fd, off_t len)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	if (!f->writable || f->is_dir || len < 0) {
		errno = EINVAL;
		return -1;
	}
	vol_resize(&s->disk->inodes[f->ino], (uint64_t)len);
	return 0;
}

static int sim_fallocate(struct stream_fs *fs, int fd, off_t pos, off_t len)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	if (injected(s, SIM_OP_FALLOCATE))
		return -1;
	if (!f->writable || f->is_dir || pos < 0 || len <= 0) {
		errno = f->is_dir ? ENODEV : EINVAL;
		return -1;
	}
	struct sim_inode *n = &s->disk->inodes[f->ino];
	uint64_t end = (uint64_t)pos + (uint64_t)len;
	if (end > n->vol_size) {
		if (used_bytes(s) + (end - n->vol_size) > s->disk->capacity) {
			errno = ENOSPC;
			return -1;
		}
		vol_resize(n, end);
	}
	return 0;
}

static int sim_fsize(struct stream_fs *fs, int fd, uint64_t *size)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	*size = s->disk->inodes[f->ino].vol_size;
	return 0;
}

static int sim_flock(struct stream_fs *fs, int fd, int op)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_fd *f = fd_get(s, fd);
	if (!f)
		return -1;
	int want = op & ~LOCK_NB;
	if (want == LOCK_UN) {
		f->lock = 0;
		return 0;
	}
	/* locks of every process on the disk exclude each other */
	for (size_t v = 0; v < s->disk->n_views; v++) {
		struct sim_fs *view = s->disk->views[v];
		for (size_t i = 0; i < view->n_fds; i++) {
			struct sim_fd *o = &view->fds[i];
			if (o == f || !o->open || o->ino != f->ino || !o->lock)
				continue;
			if (o->lock == LOCK_EX || want == LOCK_EX) {
				errno = EWOULDBLOCK; /* nothing in a simulation may block */
				return -1;
			}
		}
	}
	f->lock = want;
	return 0;
}

static int sim_stat(struct stream_fs *fs, const char *path, struct stream_fs_stat *st)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	int ino = lookup(s, path);
	if (ino < 0) {
		errno = ENOENT;
		return -1;
	}
	st->is_dir = s->disk->inodes[ino].is_dir;
	st->size = s->disk->inodes[ino].vol_size;
	return 0;
}

static int sim_mkdir(struct stream_fs *fs, const char *path, int mode)
{
	(void)mode;
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	if (lookup(s, path) >= 0) {
		errno = EEXIST;
		return -1;
	}
	int pino = parent_ino(s, path);
	if (pino < 0 || !s->disk->inodes[pino].is_dir) {
		errno = ENOENT;
		return -1;
	}
	int ino = inode_new(s, true);
	entry_set(s, path, ino, ++s->disk->seq);
	return 0;
}

static int sim_rename(struct stream_fs *fs, const char *from, const char *to)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	int ino = lookup(s, from);
	if (ino < 0) {
		errno = ENOENT;
		return -1;
	}
	int pino = parent_ino(s, to);
	if (pino < 0 || !s->disk->inodes[pino].is_dir) {
		errno = ENOENT;
		return -1;
	}
	uint64_t seq = ++s->disk->seq; /* one change: a crash keeps both halves or neither */
	entry_set(s, to, ino, seq);
	entry_set(s, from, -1, seq);
	return 0;
}

static int sim_unlink(struct stream_fs *fs, const char *path)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_entry *e = entry_find(s, path);
	if (!e || e->vol_ino < 0) {
		errno = ENOENT;
		return -1;
	}
	if (s->disk->inodes[e->vol_ino].is_dir) {
		errno = EISDIR;
		return -1;
	}
	entry_set(s, path, -1, ++s->disk->seq);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int sim_list_dir(struct stream_fs *fs, const char *path, char ***names, size_t *n)
{
	struct sim_fs *s = S(fs);
	*names = NULL;
	*n = 0;
	if (!alive(s))
		return -1;
	int ino = lookup(s, path);
	if (ino < 0 || !s->disk->inodes[ino].is_dir) {
		errno = ino < 0 ? ENOENT : ENOTDIR;
		return -1;
	}
	for (size_t i = 0; i < s->disk->n_entries; i++) {
		if (s->disk->entries[i].vol_ino < 0 || !is_child(s->disk->entries[i].path, path))
			continue;
		const char *name = s->disk->entries[i].path + parent_len(s->disk->entries[i].path);
		if (*name == '/')
			name++;
		*names = xrealloc(*names, (*n + 1) * sizeof **names);
		(*names)[(*n)++] = xstrdup(name);
	}
	/* readdir promises no order: give a seeded one */
	if (*n)
		qsort(*names, *n, sizeof **names, cmp_str);
	for (size_t i = *n; i > 1; i--) {
		size_t j = (size_t)below(&s->disk->rng, i);
		char *t = (*names)[i - 1];
		(*names)[i - 1] = (*names)[j];
		(*names)[j] = t;
	}
	return 0;
}

static int sim_free_bytes(struct stream_fs *fs, const char *path, uint64_t *bytes)
{
	(void)path;
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	uint64_t used = used_bytes(s);
	*bytes = used < s->disk->capacity ? s->disk->capacity - used : 0;
	return 0;
}

static int sim_random(struct stream_fs *fs, void *buf, size_t len)
{
	struct sim_fs *s = S(fs);
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)splitmix(&s->disk->rng);
	return 0;
}

static int64_t sim_now_us(struct stream_fs *fs)
{
	return S(fs)->disk->clock_us++;
}

static const struct stream_fs sim_ops = {
	.open = sim_open,
	.close = sim_close,
	.pread = sim_pread,
	.pwrite = sim_pwrite,
	.fdatasync = sim_fdatasync,
	.fsync = sim_fsync,
	.ftruncate = sim_ftruncate,
	.fallocate = sim_fallocate,
	.fsize = sim_fsize,
	.flock = sim_flock,
	.stat = sim_stat,
	.mkdir = sim_mkdir,
	.rename = sim_rename,
	.unlink = sim_unlink,
	.list_dir = sim_list_dir,
	.free_bytes = sim_free_bytes,
	.random = sim_random,
	.now_us = sim_now_us,
	.is_posix = false,
};

static struct sim_fs *view_new(struct sim_disk *d)
{
	struct sim_fs *s = xcalloc(1, sizeof *s);
	s->ops = sim_ops;
	s->disk = d;
	d->views = xrealloc(d->views, (d->n_views + 1) * sizeof *d->views);
	d->views[d->n_views++] = s;
	return s;
}

static void view_free(struct sim_fs *s)
{
	free(s->fds);
	free(s);
}

struct stream_fs *stream_fs_sim_new(uint64_t seed, uint64_t capacity_bytes)
{
	struct sim_disk *d = xcalloc(1, sizeof *d);
	d->rng = seed;
	d->capacity = capacity_bytes;
	d->clock_us = 1700000000000000LL;
	struct sim_fs *s = view_new(d);
	/* the root directory, durable from the start */
	struct sim_entry *root = entry_get(s, "/");
	root->vol_ino = root->dur_ino = inode_new(s, true);
	return &s->ops;
}

struct stream_fs *stream_fs_sim_view(struct stream_fs *disk)
{
	return &view_new(S(disk)->disk)->ops;
}

void stream_fs_sim_free(struct stream_fs *fs)
{
	struct sim_fs *s = S(fs);
	if (!s)
		return;
	struct sim_disk *d = s->disk;
	if (s != d->views[0]) {
		/* one view: the disk and the other views stay */
		size_t kept = 0;
		for (size_t i = 0; i < d->n_views; i++)
			if (d->views[i] != s)
				d->views[kept++] = d->views[i];
		d->n_views = kept;
		view_free(s);
		return;
	}
	for (size_t i = 0; i < d->n_views; i++)
		view_free(d->views[i]);
	free(d->views);
	for (size_t i = 0; i < d->n_inodes; i++) {
		free(d->inodes[i].vol);
		free(d->inodes[i].dur);
	}
	free(d->inodes);
	for (size_t i = 0; i < d->n_entries; i++)
		free(d->entries[i].path);
	free(d->entries);
	free(d->pending);
	free(d);
}

void stream_fs_sim_kill(struct stream_fs *fs)
{
	S(fs)->dead = true;
}

void stream_fs_sim_kill_after(struct stream_fs *fs, uint64_t ops)
{
	S(fs)->kill_after = ops;
}

bool stream_fs_sim_dead(const struct stream_fs *fs)
{
	return ((const struct sim_fs *)fs)->dead;
}

/* The process's descriptors close and its locks go (the kernel does
 * this when a process exits).  Descriptor numbers are never reused. */
static void view_release(struct sim_fs *s)
{
	for (size_t i = 0; i < s->n_fds; i++) {
		s->fds[i].open = false;
		s->fds[i].lock = 0;
	}
}

static void view_revive(struct sim_fs *s)
{
	view_release(s);
	s->dead = false;
	s->kill_after = 0;
	memset(s->inject_nth, 0, sizeof s->inject_nth);
}

void stream_fs_sim_view_kill(struct stream_fs *view)
{
	struct sim_fs *s = S(view);
	s->dead = true;
	s->kill_after = 0;
	view_release(s);
}

void stream_fs_sim_view_restart(struct stream_fs *view)
{
	view_revive(S(view));
}

/* What a power loss leaves of a file: its durable image, and of the
 * bytes written since, none, all, a prefix, or any set of sectors. */
static void inode_power_loss(struct sim_inode *n, uint64_t *rng)
{
	if (n->is_dir)
		return;
	bool clean = n->dirty_lo >= n->dirty_hi && !n->size_dirty && n->dur_size == n->vol_size;
	if (!clean) {
		uint64_t size = below(rng, 2) ? n->vol_size : n->dur_size;
		uint8_t *img = xcalloc(1, (size_t)(size ? size : 1));
		if (n->dur_size && size)
			memcpy(img, n->dur, (size_t)(n->dur_size < size ? n->dur_size : size));
		uint64_t lo = n->dirty_lo < n->dirty_hi ? n->dirty_lo : 0;
		uint64_t hi = n->dirty_lo < n->dirty_hi ? n->dirty_hi : 0;
		if (hi > size)
			hi = size;
		if (hi > n->vol_size)
			hi = n->vol_size;
		switch (below(rng, 4)) {
		case 0: /* none of it */
			break;
		case 1: /* all of it */
			if (lo < hi)
				memcpy(img + lo, n->vol + lo, (size_t)(hi - lo));
			break;
		case 2: { /* a torn prefix */
			uint64_t cut = lo < hi ? lo + below(rng, hi - lo + 1) : lo;
			if (lo < cut)
				memcpy(img + lo, n->vol + lo, (size_t)(cut - lo));
			break;
		}
		default: /* sectors in any order */
			for (uint64_t p = lo - lo % SIM_SECTOR; p < hi; p += SIM_SECTOR) {
				uint64_t a = p < lo ? lo : p, b = p + SIM_SECTOR < hi ? p + SIM_SECTOR : hi;
				if (below(rng, 2))
					memcpy(img + a, n->vol + a, (size_t)(b - a));
			}
			break;
		}
		free(n->vol);
		n->vol = img;
		n->vol_size = n->vol_cap = size;
	}
	/* what survived is now the disk */
	n->dur = xrealloc(n->dur, (size_t)(n->vol_size ? n->vol_size : 1));
	if (n->vol_size)
		memcpy(n->dur, n->vol, (size_t)n->vol_size);
	n->dur_size = n->vol_size;
	n->dirty_lo = n->dirty_hi = 0;
	n->size_dirty = false;
}

void stream_fs_sim_crash(struct stream_fs *fs, enum sim_crash_mode mode, uint64_t seed)
{
	struct sim_fs *s = S(fs);
	uint64_t rng = seed;
	if (mode == SIM_CRASH_POWER) {
		/* directory changes reach the disk in order (a journal): a
		 * seeded prefix of the unsynced ones survives */
		uint64_t lo = s->disk->n_pending ? s->disk->pending[0].seq : 0, hi = lo;
		for (size_t i = 0; i < s->disk->n_pending; i++) {
			lo = s->disk->pending[i].seq < lo ? s->disk->pending[i].seq : lo;
			hi = s->disk->pending[i].seq > hi ? s->disk->pending[i].seq : hi;
		}
		uint64_t cut = s->disk->n_pending ? lo + below(&rng, hi - lo + 2) : 0;
		for (size_t i = 0; i < s->disk->n_pending; i++)
			if (s->disk->pending[i].seq < cut)
				s->disk->entries[s->disk->pending[i].entry].dur_ino = s->disk->pending[i].ino;
		for (size_t i = 0; i < s->disk->n_entries; i++)
			s->disk->entries[i].vol_ino = s->disk->entries[i].dur_ino;
		for (size_t i = 0; i < s->disk->n_inodes; i++)
			inode_power_loss(&s->disk->inodes[i], &rng);
		for (size_t i = 0; i < s->disk->n_entries; i++)
			s->disk->entries[i].dur_ino = s->disk->entries[i].vol_ino;
		s->disk->n_pending = 0;
	}
	/* a kill: the kernel keeps every write and every entry, still
	 * volatile (a later power loss can take what nobody synced) */
	/* no descriptor, no lock survives the process; a power loss takes
	 * every other process on the machine with it */
	if (mode == SIM_CRASH_POWER)
		for (size_t i = 0; i < s->disk->n_views; i++)
			if (s->disk->views[i] != s)
				stream_fs_sim_view_kill(&s->disk->views[i]->ops);
	view_revive(s);
	s->disk->rng ^= splitmix(&rng);
}

void stream_fs_sim_inject(struct stream_fs *fs, enum sim_op op, uint64_t nth, int err)
{
	S(fs)->inject_nth[op] = nth;
	S(fs)->inject_err[op] = err;
}

uint64_t stream_fs_sim_calls(const struct stream_fs *fs)
{
	return ((const struct sim_fs *)fs)->calls;
}

const uint8_t *stream_fs_sim_peek(struct stream_fs *fs, const char *path, uint64_t *size)
{
	struct sim_fs *s = S(fs);
	int ino = lookup(s, path);
	if (ino < 0 || s->disk->inodes[ino].is_dir)
		return NULL;
	*size = s->disk->inodes[ino].vol_size;
	return s->disk->inodes[ino].vol;
}

int stream_fs_sim_poke(struct stream_fs *fs, const char *path, uint64_t pos, const void *buf, size_t len)
{
	struct sim_fs *s = S(fs);
	int ino = lookup(s, path);
	if (ino < 0 || s->disk->inodes[ino].is_dir)
		return -1;
	struct sim_inode *n = &s->disk->inodes[ino];
	bool was_clean = n->dirty_lo >= n->dirty_hi && !n->size_dirty;
	write_bytes(n, buf, len, pos);
	if (was_clean)
		inode_sync(n);
	else if (pos + len <= n->dur_size)
		memcpy(n->dur + pos, buf, len);
	return 0;
}

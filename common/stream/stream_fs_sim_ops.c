/*
 * stream_fs_sim_ops.c - the operations of the simulated file system
 * (stream_fs.h) on its disk model (stream_fs_sim.c): each call counts,
 * fails when its process is dead or a failure is injected, and changes
 * only the volatile state; fdatasync/fsync make it durable.
 */
#include "stream_fs_sim_internal.h"

#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

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
	int ino = stream_fs_sim_lookup(s, path);
	if (ino >= 0 && (flags & O_CREAT) && (flags & O_EXCL)) {
		errno = EEXIST;
		return -1;
	}
	if (ino < 0) {
		if (!(flags & O_CREAT) || (flags & O_DIRECTORY)) {
			errno = ENOENT;
			return -1;
		}
		int pino = stream_fs_sim_parent_ino(s, path);
		if (pino < 0 || !s->disk->inodes[pino].is_dir) {
			errno = ENOENT;
			return -1;
		}
		ino = stream_fs_sim_inode_new(s, false);
		stream_fs_sim_entry_set(s, path, ino, ++s->disk->seq);
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
		stream_fs_sim_write_bytes(n, buf, part, (uint64_t)pos);
		s->dead = true;
		errno = EIO;
		return -1;
	}
	if (injected(s, SIM_OP_PWRITE))
		return -1;
	uint64_t grow = (uint64_t)pos + len > n->vol_size ? (uint64_t)pos + len - n->vol_size : 0;
	if (grow && stream_fs_sim_used_bytes(s) + grow > s->disk->capacity) {
		errno = ENOSPC;
		return -1;
	}
	stream_fs_sim_write_bytes(n, buf, len, (uint64_t)pos);
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
		stream_fs_sim_inode_sync(&s->disk->inodes[f->ino]);
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
		if (stream_fs_sim_is_child(s->disk->entries[p->entry].path, dir))
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
	stream_fs_sim_vol_resize(&s->disk->inodes[f->ino], (uint64_t)len);
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
		if (stream_fs_sim_used_bytes(s) + (end - n->vol_size) > s->disk->capacity) {
			errno = ENOSPC;
			return -1;
		}
		stream_fs_sim_vol_resize(n, end);
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
	int ino = stream_fs_sim_lookup(s, path);
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
	if (stream_fs_sim_lookup(s, path) >= 0) {
		errno = EEXIST;
		return -1;
	}
	int pino = stream_fs_sim_parent_ino(s, path);
	if (pino < 0 || !s->disk->inodes[pino].is_dir) {
		errno = ENOENT;
		return -1;
	}
	int ino = stream_fs_sim_inode_new(s, true);
	stream_fs_sim_entry_set(s, path, ino, ++s->disk->seq);
	return 0;
}

static int sim_rename(struct stream_fs *fs, const char *from, const char *to)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	int ino = stream_fs_sim_lookup(s, from);
	if (ino < 0) {
		errno = ENOENT;
		return -1;
	}
	int pino = stream_fs_sim_parent_ino(s, to);
	if (pino < 0 || !s->disk->inodes[pino].is_dir) {
		errno = ENOENT;
		return -1;
	}
	uint64_t seq = ++s->disk->seq; /* one change: a crash keeps both halves or neither */
	stream_fs_sim_entry_set(s, to, ino, seq);
	stream_fs_sim_entry_set(s, from, -1, seq);
	return 0;
}

static int sim_unlink(struct stream_fs *fs, const char *path)
{
	struct sim_fs *s = S(fs);
	if (!alive(s))
		return -1;
	struct sim_entry *e = stream_fs_sim_entry_find(s, path);
	if (!e || e->vol_ino < 0) {
		errno = ENOENT;
		return -1;
	}
	if (s->disk->inodes[e->vol_ino].is_dir) {
		errno = EISDIR;
		return -1;
	}
	stream_fs_sim_entry_set(s, path, -1, ++s->disk->seq);
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
	int ino = stream_fs_sim_lookup(s, path);
	if (ino < 0 || !s->disk->inodes[ino].is_dir) {
		errno = ino < 0 ? ENOENT : ENOTDIR;
		return -1;
	}
	for (size_t i = 0; i < s->disk->n_entries; i++) {
		if (s->disk->entries[i].vol_ino < 0 || !stream_fs_sim_is_child(s->disk->entries[i].path, path))
			continue;
		const char *name = s->disk->entries[i].path + stream_fs_sim_parent_len(s->disk->entries[i].path);
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
	uint64_t used = stream_fs_sim_used_bytes(s);
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

const struct stream_fs stream_fs_sim_ops = {
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

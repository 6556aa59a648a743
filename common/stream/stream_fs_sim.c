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
 *
 * This file is the model; stream_fs_sim_ops.c is the operations table
 * on it.
 */
#include "trellara/stream_fs.h"

#include "stream_fs_sim_internal.h"

#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

/* ---- files and directory entries ---- */

struct sim_entry *stream_fs_sim_entry_find(struct sim_fs *s, const char *path)
{
	for (size_t i = 0; i < s->disk->n_entries; i++)
		if (strcmp(s->disk->entries[i].path, path) == 0)
			return &s->disk->entries[i];
	return NULL;
}

static struct sim_entry *entry_get(struct sim_fs *s, const char *path)
{
	struct sim_entry *e = stream_fs_sim_entry_find(s, path);
	if (e)
		return e;
	s->disk->entries = xrealloc(s->disk->entries, (s->disk->n_entries + 1) * sizeof *s->disk->entries);
	e = &s->disk->entries[s->disk->n_entries++];
	e->path = xstrdup(path);
	e->vol_ino = e->dur_ino = -1;
	return e;
}

/* Bind path to ino now (volatile); durable after its directory's fsync. */
void stream_fs_sim_entry_set(struct sim_fs *s, const char *path, int ino, uint64_t seq)
{
	struct sim_entry *e = entry_get(s, path);
	e->vol_ino = ino;
	s->disk->pending = xrealloc(s->disk->pending, (s->disk->n_pending + 1) * sizeof *s->disk->pending);
	s->disk->pending[s->disk->n_pending++] = (struct sim_pending){ (size_t)(e - s->disk->entries), ino, seq };
}

int stream_fs_sim_lookup(struct sim_fs *s, const char *path)
{
	struct sim_entry *e = stream_fs_sim_entry_find(s, path);
	return e ? e->vol_ino : -1;
}

/* Length of the parent part of path ("/a/b" -> 2, "/a" -> 1 for "/"). */
size_t stream_fs_sim_parent_len(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	return slash == path ? 1 : (size_t)(slash - path);
}

bool stream_fs_sim_is_child(const char *path, const char *dir)
{
	size_t dl = strlen(dir);
	size_t pl = stream_fs_sim_parent_len(path);
	return strcmp(path, dir) != 0 && pl == dl && strncmp(path, dir, dl) == 0;
}

int stream_fs_sim_parent_ino(struct sim_fs *s, const char *path)
{
	size_t pl = stream_fs_sim_parent_len(path);
	if (pl == 0)
		return -1;
	char *parent = xmalloc(pl + 1);
	memcpy(parent, path, pl);
	parent[pl] = '\0';
	int ino = stream_fs_sim_lookup(s, parent);
	free(parent);
	return ino;
}

int stream_fs_sim_inode_new(struct sim_fs *s, bool is_dir)
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

void stream_fs_sim_vol_resize(struct sim_inode *n, uint64_t size)
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
void stream_fs_sim_inode_sync(struct sim_inode *n)
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

uint64_t stream_fs_sim_used_bytes(struct sim_fs *s)
{
	uint64_t used = 0;
	for (size_t i = 0; i < s->disk->n_inodes; i++)
		used += s->disk->inodes[i].vol_size;
	return used;
}

void stream_fs_sim_write_bytes(struct sim_inode *n, const void *buf, size_t len, uint64_t pos)
{
	if (len == 0)
		return;
	if (pos + len > n->vol_size)
		stream_fs_sim_vol_resize(n, pos + len);
	memcpy(n->vol + pos, buf, len);
	mark_dirty(n, pos, pos + len);
}

static struct sim_fs *view_new(struct sim_disk *d)
{
	struct sim_fs *s = xcalloc(1, sizeof *s);
	s->ops = stream_fs_sim_ops;
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
	root->vol_ino = root->dur_ino = stream_fs_sim_inode_new(s, true);
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
	int ino = stream_fs_sim_lookup(s, path);
	if (ino < 0 || s->disk->inodes[ino].is_dir)
		return NULL;
	*size = s->disk->inodes[ino].vol_size;
	return s->disk->inodes[ino].vol;
}

int stream_fs_sim_poke(struct stream_fs *fs, const char *path, uint64_t pos, const void *buf, size_t len)
{
	struct sim_fs *s = S(fs);
	int ino = stream_fs_sim_lookup(s, path);
	if (ino < 0 || s->disk->inodes[ino].is_dir)
		return -1;
	struct sim_inode *n = &s->disk->inodes[ino];
	bool was_clean = n->dirty_lo >= n->dirty_hi && !n->size_dirty;
	stream_fs_sim_write_bytes(n, buf, len, pos);
	if (was_clean)
		stream_fs_sim_inode_sync(n);
	else if (pos + len <= n->dur_size)
		memcpy(n->dur + pos, buf, len);
	return 0;
}

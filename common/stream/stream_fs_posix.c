/*
 * stream_fs_posix.c - the stream's file system as the real system calls
 * (stream_fs.h), and the helpers every stream_fs shares: fsutil.c's own
 * (fs_ops_*), run through the stream_fs given, so they log exactly what
 * fsutil.c logs for the same failure.
 */
#include "trellara/stream_fs.h"

#include "trellara/clock.h"
#include "trellara/fsutil.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int px_open(struct stream_fs *fs, const char *path, int flags, int mode)
{
	(void)fs;
	return open(path, flags, (mode_t)mode);
}

static int px_close(struct stream_fs *fs, int fd)
{
	(void)fs;
	return close(fd);
}

static ssize_t px_pread(struct stream_fs *fs, int fd, void *buf, size_t len, off_t pos)
{
	(void)fs;
	return pread(fd, buf, len, pos);
}

static ssize_t px_pwrite(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos)
{
	(void)fs;
	return pwrite(fd, buf, len, pos);
}

static int px_fdatasync(struct stream_fs *fs, int fd)
{
	(void)fs;
	return fs_fdatasync_nolog(fd); /* honours TRELLARA_TEST_FSYNC_FAIL */
}

static int px_fsync(struct stream_fs *fs, int fd)
{
	(void)fs;
	return fsync(fd);
}

static int px_ftruncate(struct stream_fs *fs, int fd, off_t len)
{
	(void)fs;
	return ftruncate(fd, len);
}

static int px_fallocate(struct stream_fs *fs, int fd, off_t pos, off_t len)
{
	(void)fs;
	/* posix_fallocate returns its error; it does not set errno */
	int err = posix_fallocate(fd, pos, len);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

static int px_fsize(struct stream_fs *fs, int fd, uint64_t *size)
{
	(void)fs;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -1;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int px_flock(struct stream_fs *fs, int fd, int op)
{
	(void)fs;
	return flock(fd, op);
}

static int px_stat(struct stream_fs *fs, const char *path, struct stream_fs_stat *out)
{
	(void)fs;
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	out->is_dir = S_ISDIR(st.st_mode);
	out->size = (uint64_t)st.st_size;
	return 0;
}

static int px_mkdir(struct stream_fs *fs, const char *path, int mode)
{
	(void)fs;
	return mkdir(path, (mode_t)mode);
}

static int px_rename(struct stream_fs *fs, const char *from, const char *to)
{
	(void)fs;
	return rename(from, to);
}

static int px_unlink(struct stream_fs *fs, const char *path)
{
	(void)fs;
	return unlink(path);
}

static int px_list_dir(struct stream_fs *fs, const char *path, char ***names, size_t *n)
{
	(void)fs;
	*names = NULL;
	*n = 0;
	DIR *d = opendir(path);
	if (!d)
		return -1;
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (*n == cap)
			*names = xrealloc(*names, (cap = cap ? cap * 2 : 16) * sizeof **names);
		(*names)[(*n)++] = xstrdup(e->d_name);
	}
	closedir(d);
	return 0;
}

static int px_free_bytes(struct stream_fs *fs, const char *path, uint64_t *bytes)
{
	(void)fs;
	struct statvfs st;
	if (statvfs(path, &st) < 0)
		return -1;
	*bytes = (uint64_t)st.f_bavail * st.f_frsize;
	return 0;
}

static int px_random(struct stream_fs *fs, void *buf, size_t len)
{
	(void)fs;
	return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static int64_t px_now_us(struct stream_fs *fs)
{
	(void)fs;
	return clock_wall_us(); /* frames carry wall-clock append times */
}

static struct stream_fs posix_fs = {
	.open = px_open,
	.close = px_close,
	.pread = px_pread,
	.pwrite = px_pwrite,
	.fdatasync = px_fdatasync,
	.fsync = px_fsync,
	.ftruncate = px_ftruncate,
	.fallocate = px_fallocate,
	.fsize = px_fsize,
	.flock = px_flock,
	.stat = px_stat,
	.mkdir = px_mkdir,
	.rename = px_rename,
	.unlink = px_unlink,
	.list_dir = px_list_dir,
	.free_bytes = px_free_bytes,
	.random = px_random,
	.now_us = px_now_us,
	.is_posix = true,
};

struct stream_fs *stream_fs_posix(void)
{
	return &posix_fs;
}

/* ---- helpers: fsutil.c's, run on any stream_fs ---- */

static int on_open(void *ctx, const char *path, int flags, int mode)
{
	struct stream_fs *fs = ctx;
	return fs->open(fs, path, flags, mode);
}

static int on_close(void *ctx, int fd)
{
	struct stream_fs *fs = ctx;
	return fs->close(fs, fd);
}

static ssize_t on_read(void *ctx, int fd, void *buf, size_t len, off_t pos)
{
	struct stream_fs *fs = ctx;
	return fs->pread(fs, fd, buf, len, pos);
}

static ssize_t on_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t pos)
{
	struct stream_fs *fs = ctx;
	return fs->pwrite(fs, fd, buf, len, pos);
}

static int on_fdatasync(void *ctx, int fd)
{
	struct stream_fs *fs = ctx;
	return fs->fdatasync(fs, fd);
}

static int on_fsync(void *ctx, int fd)
{
	struct stream_fs *fs = ctx;
	return fs->fsync(fs, fd);
}

static int on_mkdir(void *ctx, const char *path, int mode)
{
	struct stream_fs *fs = ctx;
	return fs->mkdir(fs, path, mode);
}

static int on_is_dir(void *ctx, const char *path, bool *is_dir)
{
	struct stream_fs *fs = ctx;
	struct stream_fs_stat st;
	if (fs->stat(fs, path, &st) < 0)
		return -1;
	*is_dir = st.is_dir;
	return 0;
}

static int on_rename(void *ctx, const char *from, const char *to)
{
	struct stream_fs *fs = ctx;
	return fs->rename(fs, from, to);
}

static int on_unlink(void *ctx, const char *path)
{
	struct stream_fs *fs = ctx;
	return fs->unlink(fs, path);
}

static int on_random(void *ctx, void *buf, size_t len)
{
	struct stream_fs *fs = ctx;
	return fs->random(fs, buf, len);
}

static const struct fs_ops stream_fs_ops = {
	.open = on_open,
	.close = on_close,
	.read = on_read,
	.pwrite = on_pwrite,
	.fdatasync = on_fdatasync,
	.fsync = on_fsync,
	.mkdir = on_mkdir,
	.is_dir = on_is_dir,
	.rename = on_rename,
	.unlink = on_unlink,
	.random = on_random,
};

int sfs_pwrite_all(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos, const char *path)
{
	return fs_ops_pwrite_all(&stream_fs_ops, fs, fd, buf, len, pos, path);
}

int sfs_fdatasync(struct stream_fs *fs, int fd, const char *path)
{
	return fs_ops_fdatasync(&stream_fs_ops, fs, fd, path);
}

int sfs_fsync_dir(struct stream_fs *fs, const char *path)
{
	return fs_ops_fsync_dir(&stream_fs_ops, fs, path);
}

int sfs_mkdir_p(struct stream_fs *fs, const char *path)
{
	return fs_ops_mkdir_p(&stream_fs_ops, fs, path);
}

int sfs_write_durable(struct stream_fs *fs, const char *path, const void *data, size_t len)
{
	return fs_ops_write_atomic(&stream_fs_ops, fs, path, data, len, true);
}

int sfs_read_file(struct stream_fs *fs, const char *path, char **data, size_t *len)
{
	return fs_ops_read_file(&stream_fs_ops, fs, path, data, len);
}

void sfs_free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

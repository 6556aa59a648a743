/*
 * stream_fs_posix.c - the stream's file system as the real system calls
 * (stream_fs.h), and the helpers every stream_fs shares.  The helpers
 * log exactly what fsutil.c logs for the same failure.
 */
#include "trellara/stream_fs.h"

#include "trellara/clock.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
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

/* ---- helpers ---- */

static char *parent_of(const char *path)
{
	char *copy = xstrdup(path);
	char *parent = xstrdup(dirname(copy));
	free(copy);
	return parent;
}

int sfs_pwrite_all(struct stream_fs *fs, int fd, const void *buf, size_t len, off_t pos, const char *path)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = fs->pwrite(fs, fd, p, len, pos);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("cannot write %zu bytes at byte %lld of \"%s\": %m", len, (long long)pos, path);
			return -1;
		}
		p += n;
		len -= (size_t)n;
		pos += n;
	}
	return 0;
}

int sfs_fdatasync(struct stream_fs *fs, int fd, const char *path)
{
	if (fs->fdatasync(fs, fd) < 0) {
		log_error("cannot fdatasync \"%s\": %m", path);
		return -1;
	}
	return 0;
}

int sfs_fsync_dir(struct stream_fs *fs, const char *path)
{
	int fd = fs->open(fs, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		log_error("cannot open directory \"%s\": %m", path);
		return -1;
	}
	int rc = 0;
	if (fs->fsync(fs, fd) < 0) {
		log_error("cannot fsync directory \"%s\": %m", path);
		rc = -1;
	}
	fs->close(fs, fd);
	return rc;
}

int sfs_mkdir_p(struct stream_fs *fs, const char *path)
{
	char *copy = xstrdup(path);
	int rc = -1;
	for (char *p = copy + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			if (fs->mkdir(fs, copy, 0700) == 0) {
				/* the new entry is durable only once its parent is fsynced */
				char *parent = parent_of(copy);
				int frc = sfs_fsync_dir(fs, parent);
				free(parent);
				if (frc < 0)
					goto out;
			} else if (errno != EEXIST) {
				log_error("cannot create directory \"%s\": %m", copy);
				goto out;
			}
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
	struct stream_fs_stat st;
	if (fs->stat(fs, path, &st) < 0 || !st.is_dir) {
		log_error("\"%s\" is not a directory", path);
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

static int sfs_open_temp(struct stream_fs *fs, const char *path, char **tmp_path)
{
	char *parent = parent_of(path);
	char *copy = xstrdup(path);
	const char *base = basename(copy);
	int fd = -1;
	*tmp_path = NULL;
	for (int attempt = 0; attempt < 100; attempt++) {
		uint64_t r;
		if (fs->random(fs, &r, sizeof r) < 0) {
			log_error("cannot get random bytes for a temporary file name next to \"%s\": %m", path);
			break;
		}
		char *tmp = xasprintf("%s/.%s.%016llx.tmp", parent, base, (unsigned long long)r);
		fd = fs->open(fs, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*tmp_path = tmp;
			break;
		}
		if (errno != EEXIST) {
			log_error("cannot create \"%s\": %m", tmp);
			free(tmp);
			break;
		}
		free(tmp);
	}
	if (fd < 0 && !*tmp_path && errno == EEXIST)
		log_error("cannot create a temporary file next to \"%s\": every name tried exists", path);
	free(copy);
	free(parent);
	return fd;
}

int sfs_write_durable(struct stream_fs *fs, const char *path, const void *data, size_t len)
{
	char *tmp = NULL;
	char *parent = parent_of(path);
	int rc = -1;
	int fd = sfs_open_temp(fs, path, &tmp);
	if (fd < 0)
		goto out;
	if (sfs_pwrite_all(fs, fd, data, len, 0, tmp) < 0)
		goto out;
	if (fs->fsync(fs, fd) < 0) {
		log_error("cannot fsync \"%s\": %m", tmp);
		goto out;
	}
	if (fs->close(fs, fd) < 0) {
		fd = -1;
		log_error("cannot close \"%s\": %m", tmp);
		goto out;
	}
	fd = -1;
	if (fs->rename(fs, tmp, path) < 0) {
		log_error("cannot rename \"%s\" to \"%s\": %m", tmp, path);
		goto out;
	}
	if (sfs_fsync_dir(fs, parent) < 0)
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		fs->close(fs, fd);
	if (rc < 0 && tmp)
		fs->unlink(fs, tmp);
	free(tmp);
	free(parent);
	return rc;
}

int sfs_read_file(struct stream_fs *fs, const char *path, char **data, size_t *len)
{
	int fd = fs->open(fs, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	size_t cap = 4096, used = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap)
			buf = xrealloc(buf, cap *= 2);
		ssize_t n = fs->pread(fs, fd, buf + used, cap - used - 1, (off_t)used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			log_error("cannot read \"%s\": %m", path);
			free(buf);
			fs->close(fs, fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	fs->close(fs, fd);
	buf[used] = '\0';
	*data = buf;
	if (len)
		*len = used;
	return 0;
}

void sfs_free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

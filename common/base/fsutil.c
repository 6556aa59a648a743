#include "trellara/fsutil.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- the process's file system ---- */

static int posix_open(void *ctx, const char *path, int flags, int mode)
{
	(void)ctx;
	return open(path, flags, (mode_t)mode);
}

static int posix_close(void *ctx, int fd)
{
	(void)ctx;
	return close(fd);
}

/* in order from byte 0 (fsutil.h): read(2) serves, and works on files
 * that cannot seek */
static ssize_t posix_read(void *ctx, int fd, void *buf, size_t len, off_t pos)
{
	(void)ctx;
	(void)pos;
	return read(fd, buf, len);
}

static ssize_t posix_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t pos)
{
	(void)ctx;
	return pwrite(fd, buf, len, pos);
}

static int posix_fdatasync(void *ctx, int fd)
{
	(void)ctx;
	return fs_fdatasync_nolog(fd);
}

static int posix_fsync(void *ctx, int fd)
{
	(void)ctx;
	return fsync(fd);
}

static int posix_mkdir(void *ctx, const char *path, int mode)
{
	(void)ctx;
	return mkdir(path, (mode_t)mode);
}

static int posix_is_dir(void *ctx, const char *path, bool *is_dir)
{
	(void)ctx;
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	*is_dir = S_ISDIR(st.st_mode);
	return 0;
}

static int posix_rename(void *ctx, const char *from, const char *to)
{
	(void)ctx;
	return rename(from, to);
}

static int posix_unlink(void *ctx, const char *path)
{
	(void)ctx;
	return unlink(path);
}

static int posix_random(void *ctx, void *buf, size_t len)
{
	(void)ctx;
	return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

const struct fs_ops fs_posix_ops = {
	.open = posix_open,
	.close = posix_close,
	.read = posix_read,
	.pwrite = posix_pwrite,
	.fdatasync = posix_fdatasync,
	.fsync = posix_fsync,
	.mkdir = posix_mkdir,
	.is_dir = posix_is_dir,
	.rename = posix_rename,
	.unlink = posix_unlink,
	.random = posix_random,
};

/* ---- the helpers, over any file system ---- */

/* The directory holding path's last component ("." or "/" at the top);
 * newly allocated. */
static char *parent_of(const char *path)
{
	char *copy = xstrdup(path);
	char *parent = xstrdup(dirname(copy));
	free(copy);
	return parent;
}

int fs_ops_mkdir_p(const struct fs_ops *ops, void *ctx, const char *path)
{
	char *copy = xstrdup(path);
	int rc = -1;
	for (char *p = copy + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			if (ops->mkdir(ctx, copy, 0700) == 0) {
				/* the new entry is durable only once its parent is fsynced */
				char *parent = parent_of(copy);
				int frc = fs_ops_fsync_dir(ops, ctx, parent);
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
	bool is_dir = false;
	if (ops->is_dir(ctx, path, &is_dir) < 0 || !is_dir) {
		log_error("\"%s\" is not a directory", path);
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

int fs_ops_fsync_dir(const struct fs_ops *ops, void *ctx, const char *path)
{
	int fd = ops->open(ctx, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		log_error("cannot open directory \"%s\": %m", path);
		return -1;
	}
	int rc = 0;
	if (ops->fsync(ctx, fd) < 0) {
		log_error("cannot fsync directory \"%s\": %m", path);
		rc = -1;
	}
	ops->close(ctx, fd);
	return rc;
}

int fs_ops_pwrite_all(const struct fs_ops *ops, void *ctx, int fd, const void *buf, size_t len, off_t pos,
		      const char *path)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = ops->pwrite(ctx, fd, p, len, pos);
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

int fs_ops_fdatasync(const struct fs_ops *ops, void *ctx, int fd, const char *path)
{
	if (ops->fdatasync(ctx, fd) < 0) {
		log_error("cannot fdatasync \"%s\": %m", path);
		return -1;
	}
	return 0;
}

int fs_ops_open_temp(const struct fs_ops *ops, void *ctx, const char *path, char **tmp_path)
{
	char *parent = parent_of(path);
	char *copy = xstrdup(path);
	const char *base = basename(copy);
	int fd = -1;
	*tmp_path = NULL;
	for (int attempt = 0; attempt < 100; attempt++) {
		uint64_t r;
		if (ops->random(ctx, &r, sizeof r) < 0) {
			log_error("cannot get random bytes for a temporary file name next to \"%s\": %m", path);
			break;
		}
		char *tmp = xasprintf("%s/.%s.%016llx.tmp", parent, base, (unsigned long long)r);
		/* O_EXCL|O_NOFOLLOW: never through a planted link, never an
		 * existing file */
		fd = ops->open(ctx, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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

int fs_ops_write_atomic(const struct fs_ops *ops, void *ctx, const char *path, const void *data, size_t len,
			bool durable)
{
	char *tmp = NULL;
	char *parent = parent_of(path);
	int rc = -1;
	int fd = fs_ops_open_temp(ops, ctx, path, &tmp);
	if (fd < 0)
		goto out;
	if (fs_ops_pwrite_all(ops, ctx, fd, data, len, 0, tmp) < 0)
		goto out;
	if (durable && ops->fsync(ctx, fd) < 0) {
		log_error("cannot fsync \"%s\": %m", tmp);
		goto out;
	}
	if (ops->close(ctx, fd) < 0) {
		fd = -1;
		log_error("cannot close \"%s\": %m", tmp);
		goto out;
	}
	fd = -1;
	if (ops->rename(ctx, tmp, path) < 0) {
		log_error("cannot rename \"%s\" to \"%s\": %m", tmp, path);
		goto out;
	}
	if (durable && fs_ops_fsync_dir(ops, ctx, parent) < 0)
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		ops->close(ctx, fd);
	if (rc < 0 && tmp)
		ops->unlink(ctx, tmp);
	free(tmp);
	free(parent);
	return rc;
}

int fs_ops_read_file(const struct fs_ops *ops, void *ctx, const char *path, char **data, size_t *len)
{
	int fd = ops->open(ctx, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1; /* caller decides whether absence is an error */
	size_t cap = 4096, used = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap)
			buf = xrealloc(buf, cap *= 2);
		ssize_t n = ops->read(ctx, fd, buf + used, cap - used - 1, (off_t)used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			log_error("cannot read \"%s\": %m", path);
			free(buf);
			ops->close(ctx, fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	ops->close(ctx, fd);
	buf[used] = '\0';
	*data = buf;
	if (len)
		*len = used;
	return 0;
}

/* ---- on the process's file system ---- */

int fs_mkdir_p(const char *path)
{
	return fs_ops_mkdir_p(&fs_posix_ops, NULL, path);
}

int fs_fsync_dir(const char *path)
{
	return fs_ops_fsync_dir(&fs_posix_ops, NULL, path);
}

int fs_pwrite_all(int fd, const void *buf, size_t len, off_t pos, const char *path)
{
	return fs_ops_pwrite_all(&fs_posix_ops, NULL, fd, buf, len, pos, path);
}

int fs_fdatasync(int fd, const char *path)
{
	return fs_ops_fdatasync(&fs_posix_ops, NULL, fd, path);
}

int fs_open_temp(const char *path, char **tmp_path)
{
	return fs_ops_open_temp(&fs_posix_ops, NULL, path, tmp_path);
}

int fs_write_durable(const char *path, const void *data, size_t len)
{
	return fs_ops_write_atomic(&fs_posix_ops, NULL, path, data, len, true);
}

int fs_write_atomic(const char *path, const void *data, size_t len, bool durable)
{
	return fs_ops_write_atomic(&fs_posix_ops, NULL, path, data, len, durable);
}

int fs_read_file(const char *path, char **data, size_t *len)
{
	return fs_ops_read_file(&fs_posix_ops, NULL, path, data, len);
}

/* TRELLARA_TEST_FSYNC_FAIL=n: the nth fdatasync of this process fails
 * with EIO (a test hook; the counter is its only state). */
static unsigned long fsync_calls;

int fs_fdatasync_nolog(int fd)
{
	const char *fail = getenv(ENV_TEST_FSYNC_FAIL);
	fsync_calls++;
	if (fail && strtoul(fail, NULL, 10) == fsync_calls) {
		errno = EIO;
		return -1;
	}
	return fdatasync(fd);
}

unsigned long fs_fdatasync_calls(void)
{
	return fsync_calls;
}

int fs_free_bytes(const char *path, uint64_t *free_bytes)
{
	struct statvfs st;
	if (statvfs(path, &st) < 0) {
		log_error("cannot stat file system of \"%s\": %m", path);
		return -1;
	}
	*free_bytes = (uint64_t)st.f_bavail * st.f_frsize;
	return 0;
}

bool fs_process_runs(long pid, const char *program)
{
	if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno != EPERM))
		return false;
	char path[64], cmdline[4096];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true; /* alive; cannot tell more */
	size_t n = fread(cmdline, 1, sizeof cmdline - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (cmdline[i] == '\0')
			cmdline[i] = ' ';
	cmdline[n] = '\0';
	return strstr(cmdline, program) != NULL;
}

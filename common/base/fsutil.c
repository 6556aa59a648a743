#include "trellara/fsutil.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The directory holding path's last component ("." or "/" at the top);
 * newly allocated. */
static char *parent_of(const char *path)
{
	char *copy = xstrdup(path);
	char *parent = xstrdup(dirname(copy));
	free(copy);
	return parent;
}

int fs_mkdir_p(const char *path)
{
	char *copy = xstrdup(path);
	int rc = -1;
	for (char *p = copy + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char saved = *p;
			*p = '\0';
			if (mkdir(copy, 0700) == 0) {
				/* the new entry is durable only once its parent is fsynced */
				char *parent = parent_of(copy);
				int frc = fs_fsync_dir(parent);
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
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("\"%s\" is not a directory", path);
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

int fs_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		log_error("cannot open directory \"%s\": %m", path);
		return -1;
	}
	int rc = 0;
	if (fsync(fd) < 0) {
		log_error("cannot fsync directory \"%s\": %m", path);
		rc = -1;
	}
	close(fd);
	return rc;
}

int fs_pwrite_all(int fd, const void *buf, size_t len, off_t pos, const char *path)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, pos);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("cannot write %zu bytes at byte %lld of \"%s\": %m", len, (long long)pos,
				  path);
			return -1;
		}
		p += n;
		len -= (size_t)n;
		pos += n;
	}
	return 0;
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

int fs_fdatasync(int fd, const char *path)
{
	if (fs_fdatasync_nolog(fd) < 0) {
		log_error("cannot fdatasync \"%s\": %m", path);
		return -1;
	}
	return 0;
}

unsigned long fs_fdatasync_calls(void)
{
	return fsync_calls;
}

int fs_write_durable(const char *path, const void *data, size_t len)
{
	return fs_write_atomic(path, data, len, true);
}

int fs_open_temp(const char *path, char **tmp_path)
{
	char *parent = parent_of(path);
	char *copy = xstrdup(path);
	const char *base = basename(copy);
	int fd = -1;
	*tmp_path = NULL;
	for (int attempt = 0; attempt < 100; attempt++) {
		uint64_t r;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
			log_error("cannot get random bytes for a temporary file name next to \"%s\": %m", path);
			break;
		}
		char *tmp = xasprintf("%s/.%s.%016llx.tmp", parent, base, (unsigned long long)r);
		/* O_EXCL|O_NOFOLLOW: never through a planted link, never an
		 * existing file */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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

int fs_write_atomic(const char *path, const void *data, size_t len, bool durable)
{
	char *tmp = NULL;
	char *parent = parent_of(path);
	int rc = -1;
	int fd = fs_open_temp(path, &tmp);
	if (fd < 0)
		goto out;
	if (fs_pwrite_all(fd, data, len, 0, tmp) < 0)
		goto out;
	if (durable && fsync(fd) < 0) {
		log_error("cannot fsync \"%s\": %m", tmp);
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		log_error("cannot close \"%s\": %m", tmp);
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		log_error("cannot rename \"%s\" to \"%s\": %m", tmp, path);
		goto out;
	}
	if (durable && fs_fsync_dir(parent) < 0)
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && tmp)
		unlink(tmp);
	free(tmp);
	free(parent);
	return rc;
}

int fs_read_file(const char *path, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1; /* caller decides whether absence is an error */
	size_t cap = 4096, used = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap)
			buf = xrealloc(buf, cap *= 2);
		ssize_t n = read(fd, buf + used, cap - used - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("cannot read \"%s\": %m", path);
			free(buf);
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	buf[used] = '\0';
	*data = buf;
	if (len)
		*len = used;
	return 0;
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

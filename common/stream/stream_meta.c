/*
 * stream_meta.c - the stream's identity file, "key=value" lines.
 */
#include "trellara/stream.h"

#include "trellara/fsutil.h"
#include "trellara/stream_fs.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int stream_meta_read(const char *dir, struct stream_meta *meta)
{
	return stream_meta_read_fs(stream_fs_posix(), dir, meta);
}

int stream_meta_read_fs(struct stream_fs *fs, const char *dir, struct stream_meta *meta)
{
	memset(meta, 0, sizeof *meta);
	char *path = xasprintf("%s/meta", dir);
	char *data = NULL;
	int rc = -1;
	if (sfs_read_file(fs, path, &data, NULL) < 0) {
		log_error("cannot read stream identity \"%s\": %m", path);
		goto out;
	}
	char *save = NULL;
	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *value = eq + 1;
		if (strcmp(line, "format_version") == 0)
			meta->format_version = atoi(value);
		else if (strcmp(line, "source_id") == 0 && *value)
			meta->source_id = xstrdup(value);
		else if (strcmp(line, "flow") == 0 && *value)
			meta->flow = xstrdup(value);
		else if (strcmp(line, "system_identifier") == 0 && *value)
			meta->system_identifier = xstrdup(value);
		else if (strcmp(line, "database") == 0 && *value)
			meta->database = xstrdup(value);
		else if (strcmp(line, "stream_id") == 0 && *value)
			meta->stream_id = xstrdup(value);
		else if (strcmp(line, "slot") == 0 && *value)
			meta->slot = xstrdup(value);
		else if (strcmp(line, "timeline") == 0 && *value)
			meta->timeline = xstrdup(value);
		else if (strcmp(line, "start_lsn") == 0 && *value)
			meta->start_lsn = xstrdup(value);
	}
	if (meta->format_version != STREAM_FORMAT_VERSION) {
		log_error("stream identity \"%s\": unsupported format_version %d (this Trellara reads %d)",
			  path, meta->format_version, STREAM_FORMAT_VERSION);
		stream_meta_free(meta);
		goto out;
	}
	rc = 0;
out:
	free(data);
	free(path);
	return rc;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

int stream_meta_write(const char *dir, const struct stream_meta *meta)
{
	return stream_meta_write_fs(stream_fs_posix(), dir, meta);
}

int stream_meta_write_fs(struct stream_fs *fs, const char *dir, const struct stream_meta *meta)
{
	char *path = xasprintf("%s/meta", dir);
	char *text = xasprintf("format_version=%d\nsource_id=%s\nflow=%s\nsystem_identifier=%s\ndatabase=%s\n"
			       "stream_id=%s\nslot=%s\ntimeline=%s\nstart_lsn=%s\n",
			       STREAM_FORMAT_VERSION, or_empty(meta->source_id), or_empty(meta->flow),
			       or_empty(meta->system_identifier), or_empty(meta->database), or_empty(meta->stream_id),
			       or_empty(meta->slot), or_empty(meta->timeline), or_empty(meta->start_lsn));
	int rc = sfs_write_durable(fs, path, text, strlen(text));
	free(text);
	free(path);
	return rc;
}

void stream_meta_free(struct stream_meta *meta)
{
	free(meta->source_id);
	free(meta->flow);
	free(meta->system_identifier);
	free(meta->database);
	free(meta->stream_id);
	free(meta->slot);
	free(meta->timeline);
	free(meta->start_lsn);
	memset(meta, 0, sizeof *meta);
}

char *stream_id_generate(void)
{
	return stream_id_generate_fs(stream_fs_posix());
}

char *stream_id_generate_fs(struct stream_fs *fs)
{
	uint8_t r[16];
	if (fs->random(fs, r, sizeof r) < 0) {
		log_error("cannot get random bytes for a stream id: %m");
		return NULL;
	}
	char hex[33];
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	return xstrdup(hex);
}

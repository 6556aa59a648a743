/*
 * stream_admin.c - consumer groups, inspection and retention.
 * Inspection and retention planning never modify the stream.
 */
#include "stream_internal.h"

#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool stream_group_name_valid(const char *name)
{
	if (!name || !*name || strlen(name) > 128 || name[0] == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

int stream_group_get(const char *dir, const char *group, uint64_t *position, bool *exists)
{
	return stream_group_get_fs(stream_fs_posix(), dir, group, position, exists);
}

int stream_group_get_fs(struct stream_fs *fs, const char *dir, const char *group, uint64_t *position,
			bool *exists)
{
	*position = 0;
	*exists = false;
	if (!stream_group_name_valid(group)) {
		log_error("invalid consumer group name \"%s\" (letters, digits, '_', '-', '.')", group);
		return STREAM_EINVAL;
	}
	char *path = xasprintf("%s/groups/%s", dir, group);
	char *data = NULL;
	int rc = STREAM_OK;
	if (sfs_read_file(fs, path, &data, NULL) < 0) {
		if (errno != ENOENT) {
			log_error("cannot read consumer group \"%s\": %m", path);
			rc = STREAM_EIO;
		}
		goto out;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(data, &end, 10);
	if (errno || end == data || (*end != '\n' && *end != '\0')) {
		log_error("consumer group file \"%s\" is malformed: expected a decimal offset", path);
		rc = STREAM_ECORRUPT;
		goto out;
	}
	*position = v;
	*exists = true;
out:
	free(data);
	free(path);
	return rc;
}

int stream_group_set(const char *dir, const char *group, uint64_t position)
{
	return stream_group_set_fs(stream_fs_posix(), dir, group, position);
}

int stream_group_set_fs(struct stream_fs *fs, const char *dir, const char *group, uint64_t position)
{
	if (!stream_group_name_valid(group)) {
		log_error("invalid consumer group name \"%s\" (letters, digits, '_', '-', '.')", group);
		return STREAM_EINVAL;
	}
	char *groups = xasprintf("%s/groups", dir);
	char *path = xasprintf("%s/%s", groups, group);
	char text[32];
	int len = snprintf(text, sizeof text, "%llu\n", (unsigned long long)position);
	int rc = sfs_mkdir_p(fs, groups) < 0 || sfs_write_durable(fs, path, text, (size_t)len) < 0 ? STREAM_EIO : STREAM_OK;
	free(groups);
	free(path);
	return rc;
}

const char *stream_index_state_name(enum index_state state)
{
	static const char *names[] = { "ok", "missing", "stale", "corrupt" };
	return names[state];
}

static bool is_protected(const char *name, const char *const *protected_groups, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, protected_groups[i]) == 0)
			return true;
	return false;
}

static int inspect_segment(struct stream_fs *fs, const char *dir, uint64_t base, uint64_t expected,
			   struct segment_report *s)
{
	struct segment_file sf = { .fd = -1 };
	struct segment_scan scan = { 0 };
	struct index_view view = { 0 };
	int rc = -1;
	s->name = xasprintf("%020llu.log", (unsigned long long)base);
	s->base_offset = base;
	if (segment_file_open(&sf, fs, dir, base) < 0)
		goto out;
	if (index_view_load(fs, dir, base, &view) < 0 ||
	    segment_scan_all(&sf, expected, index_view_acked_end(&view), &scan) < 0)
		goto out;
	s->frames = scan.frames;
	s->bytes = scan.end_position;
	s->file_bytes = sf.size;
	s->torn_bytes = scan.torn_bytes;
	s->corrupt = scan.corrupt;
	s->corrupt_position = scan.corrupt_position;
	s->corrupt_reason = scan.corrupt ? xstrdup(scan.corrupt_reason) : NULL;
	uint64_t agree = 0;
	while (agree < view.n && agree < scan.frames && view.positions[agree] == scan.positions[agree] &&
	       view.sizes[agree] == scan.sizes[agree])
		agree++;
	s->index_entries = agree;
	if (scan.corrupt && view.present && view.header_ok) {
		s->index_state = agree < view.n ? INDEX_CORRUPT : INDEX_STALE;
		s->index_detail = xasprintf("%llu entries agree with frames before the corruption; the rest cannot be judged",
					    (unsigned long long)agree);
	} else if (!view.present) {
		s->index_state = INDEX_MISSING;
		s->index_detail = xasprintf("index file missing: a writer would rebuild %llu entries from frames",
					    (unsigned long long)scan.frames);
	} else if (!view.header_ok) {
		s->index_state = INDEX_CORRUPT;
		s->index_detail = xasprintf("index header invalid: a writer would rebuild all %llu entries",
					    (unsigned long long)scan.frames);
	} else if (view.bad_entry || agree < view.n) {
		s->index_state = INDEX_CORRUPT;
		s->index_detail = xasprintf("index entry %llu invalid: a writer would keep %llu entries and rebuild %llu",
					    (unsigned long long)agree, (unsigned long long)agree,
					    (unsigned long long)(scan.frames - agree));
	} else if (view.n < scan.frames) {
		s->index_state = INDEX_STALE;
		s->index_detail = xasprintf("index covers %llu of %llu frames: a writer would append %llu entries",
					    (unsigned long long)view.n, (unsigned long long)scan.frames,
					    (unsigned long long)(scan.frames - view.n));
	} else {
		s->index_state = INDEX_OK;
		s->index_detail = xstrdup("index matches frames");
	}
	rc = 0;
out:
	segment_scan_free(&scan);
	index_view_free(&view);
	segment_file_close(&sf);
	return rc;
}

static int list_groups(struct stream_fs *fs, const char *dir, char ***names, size_t *n)
{
	char *path = xasprintf("%s/groups", dir);
	*names = NULL;
	*n = 0;
	char **all = NULL;
	size_t n_all = 0;
	int listed = fs->list_dir(fs, path, &all, &n_all);
	free(path);
	if (listed < 0)
		return 0;
	for (size_t i = 0; i < n_all; i++) {
		if (!stream_group_name_valid(all[i]) || strstr(all[i], ".tmp"))
			continue;
		*names = xrealloc(*names, (*n + 1) * sizeof **names);
		(*names)[(*n)++] = xstrdup(all[i]);
	}
	sfs_free_names(all, n_all);
	return 0;
}

int stream_inspect(const char *dir, const char *const *protected_groups, size_t n_protected,
		   struct stream_report *report)
{
	return stream_inspect_fs(stream_fs_posix(), dir, protected_groups, n_protected, report);
}

int stream_inspect_fs(struct stream_fs *fs, const char *dir, const char *const *protected_groups,
		      size_t n_protected, struct stream_report *report)
{
	memset(report, 0, sizeof *report);
	uint64_t *bases = NULL;
	size_t n = 0;
	char **names = NULL;
	size_t n_names = 0;
	int rc = -1;
	char *segments_dir = xasprintf("%s/segments", dir);
	struct stream_fs_stat st;
	if (fs->stat(fs, segments_dir, &st) < 0) {
		log_error("no stream at \"%s\": cannot open \"%s\": %m", dir, segments_dir);
		goto out;
	}
	if (stream_meta_read_fs(fs, dir, &report->meta) < 0)
		goto out;
	if (segment_list_fs(fs, dir, &bases, &n) < 0)
		goto out;
	report->writer_active = stream_writer_active_fs(fs, dir);
	report->segments = xcalloc(n ? n : 1, sizeof *report->segments);
	report->n_segments = n;
	report->empty = true;
	report->first_offset = n ? bases[0] : 0;
	report->next_offset = report->first_offset;
	for (size_t i = 0; i < n; i++) {
		struct segment_report *s = &report->segments[i];
		uint64_t expected = i + 1 < n ? bases[i + 1] - bases[i] : UINT64_MAX;
		if (inspect_segment(fs, dir, bases[i], expected, s) < 0)
			goto out;
		if (s->frames)
			report->empty = false;
		report->next_offset = bases[i] + s->frames;
		report->total_bytes += s->bytes;
		report->torn_bytes += s->torn_bytes;
		report->corrupt = report->corrupt || s->corrupt;
	}
	list_groups(fs, dir, &names, &n_names);
	for (size_t i = 0; i < n_protected; i++)
		if (!is_protected(protected_groups[i], (const char *const *)names, n_names)) {
			names = xrealloc(names, (n_names + 1) * sizeof *names);
			names[n_names++] = xstrdup(protected_groups[i]);
		}
	report->groups = xcalloc(n_names ? n_names : 1, sizeof *report->groups);
	report->n_groups = n_names;
	for (size_t i = 0; i < n_names; i++) {
		struct group_report *g = &report->groups[i];
		g->name = names[i];
		names[i] = NULL;
		if (stream_group_get_fs(fs, dir, g->name, &g->position, &g->exists) != STREAM_OK)
			goto out;
		g->is_protected = is_protected(g->name, protected_groups, n_protected);
		g->pending = g->position < report->next_offset ? report->next_offset - g->position : 0;
	}
	rc = 0;
out:
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	free(bases);
	free(segments_dir);
	if (rc < 0)
		stream_report_free(report);
	return rc;
}

void stream_report_free(struct stream_report *report)
{
	stream_meta_free(&report->meta);
	for (size_t i = 0; i < report->n_segments; i++) {
		free(report->segments[i].name);
		free(report->segments[i].corrupt_reason);
		free(report->segments[i].index_detail);
	}
	free(report->segments);
	for (size_t i = 0; i < report->n_groups; i++)
		free(report->groups[i].name);
	free(report->groups);
	memset(report, 0, sizeof *report);
}

int stream_retention_plan(const char *dir, const char *const *protected_groups, size_t n_protected,
			  bool allow_unprotected, struct retention_plan *plan)
{
	return stream_retention_plan_fs(stream_fs_posix(), dir, protected_groups, n_protected, allow_unprotected,
					plan);
}

/* Does the segment at base hold a frame that records a source position
 * (txn, commit_marker, watermark)?  Reads its frames up to the first
 * that does, or to its end. */
static int segment_records_position(struct stream_fs *fs, const char *dir, uint64_t base, bool *positioned)
{
	struct segment_file sf;
	*positioned = false;
	if (segment_file_open(&sf, fs, dir, base) < 0)
		return -1;
	uint64_t pos = 0, offset = base;
	struct frame_header h;
	const uint8_t *payload;
	const char *reason;
	while (!*positioned && segment_file_frame(&sf, pos, offset, &h, &payload, &reason) == FRAME_VALID) {
		*positioned = h.type == FRAME_TXN || h.type == FRAME_COMMIT_MARKER || h.type == FRAME_WATERMARK;
		pos += FRAME_HEADER_SIZE + h.payload_length;
		offset++;
	}
	segment_file_close(&sf);
	return 0;
}

int stream_retention_plan_fs(struct stream_fs *fs, const char *dir, const char *const *protected_groups,
			     size_t n_protected, bool allow_unprotected, struct retention_plan *plan)
{
	memset(plan, 0, sizeof *plan);
	uint64_t *bases = NULL;
	size_t n = 0;
	int rc = -1;
	if (segment_list_fs(fs, dir, &bases, &n) < 0)
		goto out;
	plan->keep_from = UINT64_MAX;
	plan->limited_by = xstrdup("active segment");
	if (n_protected == 0 && !allow_unprotected) {
		/* nobody said what consumers need: keep everything */
		plan->keep_from = n ? bases[0] : 0;
		free(plan->limited_by);
		plan->limited_by = xstrdup("no consumer group registered or protected (nothing deleted; "
					   "--protect GROUP, or --no-groups-ok when no consumer needs the data)");
	}
	for (size_t i = 0; i < n_protected; i++) {
		uint64_t pos;
		bool exists;
		if (stream_group_get_fs(fs, dir, protected_groups[i], &pos, &exists) != STREAM_OK)
			goto out;
		/* A protected group with no position yet needs everything. */
		if (pos < plan->keep_from) {
			plan->keep_from = pos;
			free(plan->limited_by);
			plan->limited_by = xasprintf("group \"%s\"%s", protected_groups[i],
						     exists ? "" : " (no position yet)");
		}
	}
	/* Never the active (last) segment; only whole segments wholly below
	 * keep_from.  Nor the newest segment that records a source position
	 * (a txn, commit_marker or watermark frame), nor any after it:
	 * capture's restart finds the stream's last commit and acknowledged
	 * position in the newest such frames, and with none left it would
	 * start from nothing.  (Found by the simulator twice: an active
	 * segment that recovery cut back to nothing, and newest segments
	 * that hold only pending chunks of a transaction still open.) */
	size_t deletable = n ? n - 1 : 0;
	for (size_t k = n; k-- > 0 && deletable > 0;) {
		bool positioned = false;
		if (segment_records_position(fs, dir, bases[k], &positioned) < 0)
			goto out;
		if (positioned)
			break;
		if (k < deletable + 1)
			deletable = k ? k - 1 : 0;
	}
	for (size_t i = 0; i < deletable; i++) {
		if (bases[i + 1] > plan->keep_from)
			break;
		char *path = segment_path(dir, bases[i], ".log");
		struct stream_fs_stat st;
		if (fs->stat(fs, path, &st) == 0)
			plan->bytes += st.size;
		free(path);
		plan->segments = xrealloc(plan->segments, (plan->n_segments + 1) * sizeof *plan->segments);
		plan->segments[plan->n_segments++] = xasprintf("%020llu", (unsigned long long)bases[i]);
	}
	rc = 0;
out:
	free(bases);
	return rc;
}

int stream_retention_apply(const char *dir, const struct retention_plan *plan)
{
	return stream_retention_apply_fs(stream_fs_posix(), dir, plan);
}

int stream_retention_apply_fs(struct stream_fs *fs, const char *dir, const struct retention_plan *plan)
{
	char *segments_dir = xasprintf("%s/segments", dir);
	int rc = 0;
	for (size_t i = 0; i < plan->n_segments && rc == 0; i++) {
		/* index first: a .log without .idx is still a valid segment */
		char *idx = xasprintf("%s/%s.idx", segments_dir, plan->segments[i]);
		char *log = xasprintf("%s/%s.log", segments_dir, plan->segments[i]);
		if ((fs->unlink(fs, idx) < 0 && errno != ENOENT) || (fs->unlink(fs, log) < 0 && errno != ENOENT)) {
			log_error("cannot remove stream segment \"%s\": %m", log);
			rc = -1;
		} else {
			log_info("removed stream segment \"%s\"", log);
		}
		free(idx);
		free(log);
	}
	if (sfs_fsync_dir(fs, segments_dir) < 0)
		rc = -1;
	free(segments_dir);
	return rc;
}

void stream_retention_plan_free(struct retention_plan *plan)
{
	for (size_t i = 0; i < plan->n_segments; i++)
		free(plan->segments[i]);
	free(plan->segments);
	free(plan->limited_by);
	memset(plan, 0, sizeof *plan);
}

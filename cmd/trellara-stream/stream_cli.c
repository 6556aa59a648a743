/*
 * stream_cli.c - trellara-stream subcommands over the stream library.
 * Output formats are documented in trellara-stream(1); JSON output is
 * one object per line and stable.
 */
#include "stream_cli.h"

#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/jsonw.h"
#include "trellara/lsn.h"
#include "trellara/log.h"
#include "trellara/stream.h"
#include "trellara/stream_exit.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void format_time_us(int64_t us, char *buf, size_t len)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%06dZ", (int)(us % 1000000));
}

/* Which groups count as protected for this invocation.  With --dir and
 * no --protect, every existing group is; if they cannot be listed,
 * nothing may be deleted (returns -1). */
static int protected_list(const struct stream_cli_options *o, char ***owned, const char *const **list, size_t *n)
{
	*owned = NULL;
	*list = o->protected_groups;
	*n = o->n_protected;
	if (!o->protect_all_groups)
		return 0;
	struct stream_report report;
	if (stream_inspect(o->dir, NULL, 0, &report) < 0) {
		log_error("cannot list the consumer groups of stream \"%s\": refusing to judge what they need", o->dir);
		return -1;
	}
	*owned = xcalloc(report.n_groups + 1, sizeof **owned);
	for (size_t i = 0; i < report.n_groups; i++)
		(*owned)[i] = xstrdup(report.groups[i].name);
	*list = (const char *const *)*owned;
	*n = report.n_groups;
	stream_report_free(&report);
	return 0;
}

static void free_list(char **owned)
{
	for (size_t i = 0; owned && owned[i]; i++)
		free(owned[i]);
	free(owned);
}

int stream_cli_inspect(const struct stream_cli_options *o)
{
	char **owned;
	const char *const *prot;
	size_t n_prot;
	if (protected_list(o, &owned, &prot, &n_prot) < 0)
		return EXIT_DATAERR;
	struct stream_report r;
	if (stream_inspect(o->dir, prot, n_prot, &r) < 0) {
		free_list(owned);
		return EXIT_DATAERR;
	}
	free_list(owned);
	uint64_t last_valid = r.next_offset;
	if (o->json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "dir", o->dir);
		jsonw_i64(&w, "format_version", true, r.meta.format_version);
		jsonw_str(&w, "source_id", r.meta.source_id);
		jsonw_str(&w, "flow", r.meta.flow);
		jsonw_bool(&w, "writer_active", r.writer_active);
		jsonw_bool(&w, "empty", r.empty);
		jsonw_u64(&w, "first_offset", true, r.first_offset);
		jsonw_u64(&w, "next_offset", true, r.next_offset);
		jsonw_u64(&w, "last_valid_offset", !r.empty, last_valid - 1);
		jsonw_u64(&w, "bytes", true, r.total_bytes);
		jsonw_u64(&w, "torn_bytes", true, r.torn_bytes);
		jsonw_bool(&w, "corrupt", r.corrupt);
		jsonw_open(&w, "segments", '[');
		for (size_t i = 0; i < r.n_segments; i++) {
			struct segment_report *s = &r.segments[i];
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "name", s->name);
			jsonw_u64(&w, "base_offset", true, s->base_offset);
			jsonw_u64(&w, "frames", true, s->frames);
			jsonw_u64(&w, "bytes", true, s->bytes);
			jsonw_u64(&w, "file_bytes", true, s->file_bytes);
			jsonw_u64(&w, "torn_bytes", true, s->torn_bytes);
			jsonw_bool(&w, "corrupt", s->corrupt);
			if (s->corrupt) {
				jsonw_u64(&w, "corrupt_position", true, s->corrupt_position);
				jsonw_str(&w, "corrupt_reason", s->corrupt_reason);
			}
			jsonw_open(&w, "index", '{');
			jsonw_str(&w, "state", stream_index_state_name(s->index_state));
			jsonw_u64(&w, "valid_entries", true, s->index_entries);
			jsonw_str(&w, "detail", s->index_detail);
			jsonw_close(&w, '}');
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_open(&w, "groups", '[');
		for (size_t i = 0; i < r.n_groups; i++) {
			struct group_report *g = &r.groups[i];
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "name", g->name);
			jsonw_u64(&w, "position", true, g->position);
			jsonw_bool(&w, "exists", g->exists);
			jsonw_bool(&w, "protected", g->is_protected);
			jsonw_u64(&w, "pending", true, g->pending);
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		printf("stream:            %s\n", o->dir);
		printf("flow:              %s (source %s)\n", r.meta.flow ? r.meta.flow : "-",
		       r.meta.source_id ? r.meta.source_id : "-");
		printf("writer:            %s\n", r.writer_active ? "active" : "none");
		printf("segments:          %zu\n", r.n_segments);
		printf("first offset:      %" PRIu64 "\n", r.first_offset);
		if (r.empty)
			printf("last valid offset: none (empty)\n");
		else
			printf("last valid offset: %" PRIu64 "\n", last_valid - 1);
		printf("next offset:       %" PRIu64 "\n", r.next_offset);
		printf("bytes:             %" PRIu64 "\n", r.total_bytes);
		printf("torn tail bytes:   %" PRIu64 "%s\n", r.torn_bytes,
		       r.torn_bytes ? " (the next writer truncates them)" : "");
		for (size_t i = 0; i < r.n_segments; i++) {
			struct segment_report *s = &r.segments[i];
			printf("segment %s: frames %" PRIu64 ", bytes %" PRIu64 " (file %" PRIu64 "), torn %" PRIu64
			       ", index %s: %s\n",
			       s->name, s->frames, s->bytes, s->file_bytes, s->torn_bytes,
			       stream_index_state_name(s->index_state), s->index_detail);
			if (s->corrupt)
				printf("segment %s: CORRUPT at byte %" PRIu64 ": %s, and valid frames follow\n", s->name,
				       s->corrupt_position, s->corrupt_reason);
		}
		for (size_t i = 0; i < r.n_groups; i++) {
			struct group_report *g = &r.groups[i];
			printf("group %s: position %" PRIu64 "%s, pending %" PRIu64 "%s\n", g->name, g->position,
			       g->exists ? "" : " (no position yet)", g->pending, g->is_protected ? ", protected" : "");
		}
	}
	int code = EXIT_OK;
	if (r.corrupt) {
		for (size_t i = 0; i < r.n_segments; i++)
			if (r.segments[i].corrupt)
				log_error("stream segment \"%s/segments/%s\": corrupt at byte %" PRIu64 ": %s", o->dir,
					  r.segments[i].name, r.segments[i].corrupt_position, r.segments[i].corrupt_reason);
		code = EXIT_DATAERR;
	}
	stream_report_free(&r);
	return code;
}

/* Prints one frame; returns -1 (logged) when its payload does not decode. */
static int print_frame(const struct stream_cli_options *o, const struct stream_frame *f)
{
	const struct frame_header *h = &f->header;
	char when[48];
	format_time_us(h->append_time_us, when, sizeof when);
	const char *type = frame_type_name(h->type);
	char err[256];
	if (o->json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '{');
		jsonw_u64(&w, "offset", true, h->offset);
		jsonw_str(&w, "type", type);
		jsonw_u64(&w, "flags", true, h->flags);
		jsonw_str(&w, "append_time", when);
		jsonw_u64(&w, "payload_length", true, h->payload_length);
		jsonw_str(&w, "compression", f->compressed ? "zlib" : "none");
		jsonw_u64(&w, "stored_length", true, f->stored_length);
		if (o->raw) {
			char crc[16];
			snprintf(crc, sizeof crc, "0x%08x", h->crc);
			jsonw_u64(&w, "version", true, h->version);
			jsonw_str(&w, "crc", crc);
			jsonw_str(&w, "segment", f->segment);
			jsonw_u64(&w, "position", true, f->position);
			char *b = base64_encode(f->payload, h->payload_length);
			jsonw_str(&w, "payload_base64", b);
			free(b);
			jsonw_close(&w, '}');
			putchar('\n');
			return 0;
		}
		/* Decode into memory first: a bad payload prints nothing half-way. */
		char *text = NULL;
		size_t text_len = 0;
		FILE *mem = open_memstream(&text, &text_len);
		int rc = env_frame_write_json(mem, h->type, f->payload, h->payload_length, err, sizeof err);
		fclose(mem);
		if (rc == 0)
			printf(",%s", text); /* the payload's members, written by the envelope codec */
		free(text);
		jsonw_close(&w, '}');
		putchar('\n');
		if (rc < 0) {
			log_error("stream frame at offset %" PRIu64 " (%s byte %" PRIu64 "): %s payload does not decode: %s",
				  h->offset, f->segment, f->position, type, err);
			log_hint("\"trellara-stream read --raw\" prints any frame undecoded");
			return -1;
		}
		return 0;
	}
	printf("offset=%" PRIu64 " type=%s flags=%u time=%s length=%u", h->offset, type, h->flags, when,
	       h->payload_length);
	if (f->compressed)
		printf(" compression=zlib stored_length=%u", f->stored_length);
	if (o->raw) {
		char *b = base64_encode(f->payload, h->payload_length);
		printf(" version=%u crc=0x%08x segment=%s position=%" PRIu64 " payload_base64=%s\n", h->version, h->crc,
		       f->segment, f->position, b);
		free(b);
		return 0;
	}
	struct env_frame_summary s;
	char a[LSN_FORMAT_LEN], b2[LSN_FORMAT_LEN];
	if (env_frame_summary(h->type, f->payload, h->payload_length, &s, err, sizeof err) < 0) {
		putchar('\n');
		log_error("stream frame at offset %" PRIu64 " (%s byte %" PRIu64 "): %s payload does not decode: %s",
			  h->offset, f->segment, f->position, type, err);
		log_hint("\"trellara-stream read --raw\" prints any frame undecoded");
		return -1;
	}
	if (h->type == FRAME_WATERMARK)
		printf(" lsn=%s\n", lsn_format(s.lsn, a));
	else
		printf(" xid=%u commit_lsn=%s end_lsn=%s%s\n", s.xid, lsn_format(s.commit_lsn, a), lsn_format(s.end_lsn, b2),
		       h->type == FRAME_CHUNK ? " (chunk)" : "");
	return 0;
}

int stream_cli_read(const struct stream_cli_options *o)
{
	struct stream_reader *r;
	int rc = stream_reader_open(o->dir, &r);
	if (rc != STREAM_OK)
		return stream_exit_code(rc, STREAM_FROM_ARGUMENT);
	if (o->have_from && (rc = stream_reader_seek(r, o->from)) != STREAM_OK)
		goto out;
	uint64_t printed = 0;
	while (!*o->stop && (!o->have_count || printed < o->count)) {
		struct stream_frame f;
		rc = stream_reader_next(r, &f);
		if (rc == STREAM_OK) {
			if (print_frame(o, &f) < 0) {
				rc = STREAM_ECORRUPT;
				break;
			}
			printed++;
			continue;
		}
		if (rc != STREAM_END)
			break;
		if (!o->follow)
			break;
		fflush(stdout);
		stream_reader_wait(r, 1000);
	}
	if (rc == STREAM_END)
		rc = STREAM_OK;
out:
	fflush(stdout);
	stream_reader_close(r);
	return stream_exit_code(rc, STREAM_FROM_ARGUMENT);
}

int stream_cli_locate(const struct stream_cli_options *o)
{
	if (!o->have_offset) {
		log_error("locate --lsn needs transaction envelopes, which this stream tool does not decode yet");
		log_hint("use \"trellara-stream locate --offset N\"");
		return EXIT_USAGE;
	}
	struct stream_reader *r;
	int rc = stream_reader_open(o->dir, &r);
	if (rc != STREAM_OK)
		return stream_exit_code(rc, STREAM_FROM_ARGUMENT);
	struct stream_frame f;
	if ((rc = stream_reader_seek(r, o->offset)) == STREAM_OK) {
		rc = stream_reader_next(r, &f);
		if (rc == STREAM_END) {
			log_error("offset %" PRIu64 " is not in stream \"%s\" yet", o->offset, o->dir);
			rc = STREAM_ERANGE;
		}
	}
	if (rc == STREAM_OK) {
		char when[48];
		format_time_us(f.header.append_time_us, when, sizeof when);
		if (o->json) {
			struct jsonw w;
			jsonw_init(&w, stdout, false);
			jsonw_open(&w, NULL, '{');
			jsonw_u64(&w, "offset", true, f.header.offset);
			jsonw_str(&w, "segment", f.segment);
			jsonw_u64(&w, "position", true, f.position);
			jsonw_str(&w, "type", frame_type_name(f.header.type));
			jsonw_u64(&w, "payload_length", true, f.header.payload_length);
			jsonw_str(&w, "compression", f.compressed ? "zlib" : "none");
			jsonw_u64(&w, "stored_length", true, f.stored_length);
			jsonw_str(&w, "append_time", when);
			jsonw_close(&w, '}');
			putchar('\n');
		} else {
			printf("offset %" PRIu64 ": %s byte %" PRIu64 ", %s frame, %u payload bytes%s, appended %s\n",
			       f.header.offset, f.segment, f.position, frame_type_name(f.header.type),
			       f.header.payload_length, f.compressed ? " (zlib-compressed)" : "", when);
		}
	}
	stream_reader_close(r);
	return stream_exit_code(rc, STREAM_FROM_ARGUMENT);
}

int stream_cli_retention(const struct stream_cli_options *o)
{
	char **owned;
	const char *const *prot;
	size_t n_prot;
	if (protected_list(o, &owned, &prot, &n_prot) < 0)
		return EXIT_DATAERR;
	struct retention_plan plan;
	int code = EXIT_OK;
	if (stream_retention_plan(o->dir, prot, n_prot, o->no_groups_ok, &plan) < 0) {
		free_list(owned);
		return EXIT_CANTCREAT;
	}
	if (o->apply && stream_retention_apply(o->dir, &plan) < 0) {
		code = EXIT_CANTCREAT;
		stream_retention_plan_free(&plan);
		free_list(owned);
		return code;
	}
	if (o->json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '{');
		jsonw_bool(&w, "apply", o->apply);
		jsonw_u64(&w, "keep_from", plan.keep_from != UINT64_MAX, plan.keep_from);
		jsonw_str(&w, "limited_by", plan.limited_by);
		jsonw_u64(&w, "bytes", true, plan.bytes);
		jsonw_open(&w, "segments", '[');
		for (size_t i = 0; i < plan.n_segments; i++) {
			char *name = xasprintf("%s.log", plan.segments[i]);
			jsonw_str(&w, NULL, name);
			free(name);
		}
		jsonw_close(&w, ']');
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		for (size_t i = 0; i < plan.n_segments; i++)
			printf("%s %s.log\n", o->apply ? "deleted" : "would delete", plan.segments[i]);
		printf("%zu segments, %" PRIu64 " bytes %s; oldest kept position limited by %s\n", plan.n_segments,
		       plan.bytes, o->apply ? "deleted" : "deletable", plan.limited_by);
	}
	fflush(stdout);
	stream_retention_plan_free(&plan);
	free_list(owned);
	return code;
}

/* Group commit for append: sync when the batch is full or when no more
 * input is waiting right now, then print the acknowledged offsets. */
static int append_flush(struct stream_writer *w, uint64_t *pending, size_t *n_pending)
{
	if (*n_pending == 0)
		return STREAM_OK;
	int rc = stream_writer_sync(w);
	if (rc != STREAM_OK) {
		log_error("%zu frames were not acknowledged", *n_pending);
		return rc;
	}
	for (size_t i = 0; i < *n_pending; i++)
		printf("%" PRIu64 "\n", pending[i]);
	fflush(stdout);
	*n_pending = 0;
	return STREAM_OK;
}

/* Lines from a file descriptor, with a way to ask whether another line
 * can be had without waiting (stdio hides its buffer). */
struct line_input {
	int fd;
	char *buf; /* owned */
	size_t start, len, cap;
	bool eof;
};

/* Returns a NUL-terminated line (borrowed until the next call) or NULL
 * at end of input or on a read error (logged, *failed set). */
static char *line_input_next(struct line_input *in, bool *failed)
{
	*failed = false;
	for (;;) {
		char *nl = in->len > in->start ? memchr(in->buf + in->start, '\n', in->len - in->start) : NULL;
		if (nl) {
			*nl = '\0';
			char *line = in->buf + in->start;
			in->start = (size_t)(nl - in->buf) + 1;
			return line;
		}
		if (in->eof) {
			if (in->start == in->len)
				return NULL;
			if (in->len == in->cap)
				in->buf = xrealloc(in->buf, in->cap += 1);
			in->buf[in->len] = '\0';
			char *line = in->buf + in->start;
			in->start = in->len;
			return line;
		}
		if (in->start > 0) {
			memmove(in->buf, in->buf + in->start, in->len - in->start);
			in->len -= in->start;
			in->start = 0;
		}
		if (in->len == in->cap)
			in->buf = xrealloc(in->buf, in->cap = in->cap ? in->cap * 2 : 65536);
		ssize_t n = read(in->fd, in->buf + in->len, in->cap - in->len);
		if (n < 0 && errno == EINTR)
			return NULL; /* a signal: the caller checks its stop flag */
		if (n < 0) {
			log_error("cannot read standard input: %m");
			*failed = true;
			return NULL;
		}
		if (n == 0)
			in->eof = true;
		in->len += (size_t)n;
	}
}

static bool line_input_waiting(const struct line_input *in)
{
	if (in->eof || (in->len > in->start && memchr(in->buf + in->start, '\n', in->len - in->start)))
		return true;
	struct pollfd pfd = { .fd = in->fd, .events = POLLIN };
	return poll(&pfd, 1, 0) > 0;
}

int stream_cli_append(const struct stream_cli_options *o)
{
	struct stream_writer_options wo = {
		.segment_bytes = o->segment_bytes,
		.min_free_bytes = o->min_free_bytes,
		.source_id = o->source_id,
		.flow = o->flow,
		.compression = o->compression_zlib ? STREAM_COMPRESSION_ZLIB : STREAM_COMPRESSION_NONE,
	};
	struct stream_writer *w;
	struct stream_recovery rec;
	int rc = stream_writer_open(o->dir, &wo, &w, &rec);
	if (rc != STREAM_OK)
		return stream_exit_code(rc, STREAM_FROM_CONFIG);
	if (rec.truncated_bytes || rec.index_rebuilt_entries)
		log_info("recovered stream \"%s\": next offset %" PRIu64 ", %" PRIu64 " torn bytes truncated, %" PRIu64
			 " index entries rebuilt",
			 o->dir, rec.next_offset, rec.truncated_bytes, rec.index_rebuilt_entries);
	size_t batch = o->max_batch_messages ? (size_t)o->max_batch_messages : 1;
	uint64_t *pending = xmalloc(batch * sizeof *pending);
	size_t n_pending = 0;
	struct line_input in = { .fd = STDIN_FILENO };
	uint64_t lineno = 0;
	int code = EXIT_OK;
	char *line;
	bool failed = false;
	while (!*o->stop && (line = line_input_next(&in, &failed)) != NULL) {
		lineno++;
		size_t len = strlen(line);
		while (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if (len == 0)
			continue;
		struct json_object obj;
		const char *err;
		size_t at;
		if (!json_parse_flat_object(line, &obj, &err, &at)) {
			log_error("stdin line %" PRIu64 ": %s at character %zu", lineno, err, at + 1);
			code = EXIT_DATAERR;
			break;
		}
		const struct json_member *type = json_flat_get(&obj, "type");
		const struct json_member *text = json_flat_get(&obj, "payload");
		const struct json_member *b64 = json_flat_get(&obj, "payload_base64");
		const struct json_member *flags = json_flat_get(&obj, "flags");
		int t = type && type->is_string ? frame_type_from_name(type->value) : 0;
		uint8_t *bytes = NULL;
		size_t nbytes = 0;
		const char *problem = NULL;
		if (!t)
			problem = "\"type\" must be one of txn, chunk, manifest, commit_marker, watermark, ddl";
		else if ((text != NULL) == (b64 != NULL))
			problem = "exactly one of \"payload\" and \"payload_base64\" is required";
		else if (text && !text->is_string)
			problem = "\"payload\" must be a string";
		else if (b64 && (!b64->is_string || !base64_decode(b64->value, &bytes, &nbytes)))
			problem = "\"payload_base64\" is not valid base64";
		char *flags_end = NULL;
		long flag_value = flags ? strtol(flags->value, &flags_end, 10) : 0;
		if (!problem && flags &&
		    (flags->is_string || *flags_end || flag_value < 0 || flag_value > (long)FRAME_PRODUCER_FLAGS))
			problem = "\"flags\" must be a number 0..32767 (bit 15 is the stream's compression flag)";
		for (size_t i = 0; !problem && i < obj.n; i++)
			if (strcmp(obj.members[i].key, "type") && strcmp(obj.members[i].key, "payload") &&
			    strcmp(obj.members[i].key, "payload_base64") && strcmp(obj.members[i].key, "flags"))
				problem = "unknown member (allowed: type, payload, payload_base64, flags)";
		if (problem) {
			log_error("stdin line %" PRIu64 ": %s", lineno, problem);
			free(bytes);
			json_object_free(&obj);
			code = EXIT_DATAERR;
			break;
		}
		rc = text ? stream_writer_append(w, t, (uint16_t)flag_value, text->value, text->value_len,
						 &pending[n_pending])
			  : stream_writer_append(w, t, (uint16_t)flag_value, bytes, nbytes, &pending[n_pending]);
		free(bytes);
		json_object_free(&obj);
		if (rc != STREAM_OK) {
			code = stream_exit_code(rc, STREAM_FROM_DATA);
			break;
		}
		n_pending++;
		if (n_pending == batch || !line_input_waiting(&in)) {
			rc = append_flush(w, pending, &n_pending);
			if (rc != STREAM_OK) {
				code = stream_exit_code(rc, STREAM_FROM_DATA);
				break;
			}
		}
	}
	if (failed)
		code = EXIT_DATAERR;
	/* Lines before a bad one are still acknowledged. */
	if (code == EXIT_OK || code == EXIT_DATAERR) {
		rc = append_flush(w, pending, &n_pending);
		if (rc != STREAM_OK)
			code = stream_exit_code(rc, STREAM_FROM_DATA);
	}
	free(in.buf);
	free(pending);
	stream_writer_close(w);
	return code;
}

/*
 * inspect-transaction's core (cmd/trellara-inspect-transaction/inspect.c)
 * on a stream written here, no server: a txn frame's tables and counts, a
 * chunk set bound by its manifest and commit marker, a marker that does
 * not bind (exit 65), frames of no transaction and LSNs of none (exit 1).
 */
#include "../../cmd/trellara-inspect-transaction/inspect.h"
#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/frame_walk.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* An envelope of xid at lsn: ids inserted into s.a, then deletes of the
 * first n_delete of them. */
static void envelope(struct buf *b, uint32_t xid, uint64_t lsn, int first_id, int n_insert, int n_delete)
{
	struct env_header_fields h = { .source_id = "src", .xid = xid, .commit_lsn = lsn, .end_lsn = lsn + 8 };
	struct env_column col = { .name = "id", .name_len = 2, .type_oid = 23, .typmod = -1, .key = true };
	env_encode_header(b, &h);
	buf_put_u32(b, 1);
	env_encode_relation(b, 1, "s", "a", 'd', 1, &col);
	buf_put_u32(b, (uint32_t)(n_insert + n_delete));
	for (int i = 0; i < n_insert + n_delete; i++) {
		char v[16];
		int len = snprintf(v, sizeof v, "%d", first_id + (i < n_insert ? i : i - n_insert));
		buf_put_u8(b, i < n_insert ? ENV_INSERT : ENV_DELETE);
		buf_put_u32(b, 0);
		if (i >= n_insert)
			buf_put_u8(b, 'K');
		env_encode_tuple_begin(b, 1);
		env_encode_value(b, ENV_TEXT, v, (uint32_t)len);
	}
}

static void append(struct stream_writer *w, int type, const struct buf *b)
{
	uint64_t off;
	CHECK(stream_writer_append(w, type, 0, b->data, b->len, &off) == STREAM_OK);
}

/* offset 0: txn (xid 10 at 0x100: 2 inserts, 1 delete); 1: watermark;
 * 2, 3: chunks 0 and 1 of xid 11 at 0x200 (3 and 2 inserts); 4: their
 * manifest; 5: the commit marker (its manifest CRC off by one with
 * MARKER_BAD, none with MARKER_NONE). */
enum marker_kind { MARKER_OK, MARKER_BAD, MARKER_NONE };

static char *make_stream(char *root, enum marker_kind marker)
{
	char tmpl[] = "/tmp/trellara-unit-XXXXXX";
	char *d = mkdtemp(tmpl);
	if (!d)
		return NULL;
	snprintf(root, 64, "%s", d);
	char *dir = xasprintf("%s/stream", d);
	struct stream_writer_options o = { .segment_bytes = 1 << 20, .min_free_bytes = 0 };
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	CHECK(stream_writer_open(dir, &o, &w, &rec) == STREAM_OK);
	struct buf b = { 0 };
	envelope(&b, 10, 0x100, 1, 2, 1);
	append(w, FRAME_TXN, &b);
	b.len = 0;
	env_encode_watermark(&b, "src", 0x180, 0);
	append(w, FRAME_WATERMARK, &b);
	struct env_manifest_chunk chunks[2];
	for (uint32_t k = 0; k < 2; k++) {
		b.len = 0;
		buf_put_u32(&b, k);
		envelope(&b, 11, 0x200, k == 0 ? 100 : 200, k == 0 ? 3 : 2, 0);
		chunks[k].crc = crc32c(0, b.data, b.len);
		chunks[k].changes = k == 0 ? 3 : 2;
		chunks[k].offset = 0;
		append(w, FRAME_CHUNK, &b);
	}
	struct env_header_fields h = { .source_id = "src", .xid = 11, .commit_lsn = 0x200, .end_lsn = 0x208 };
	const char *tables[] = { "s.a" };
	b.len = 0;
	env_encode_manifest(&b, &h, 2, 5, chunks, 1, tables);
	uint32_t manifest_crc = crc32c(0, b.data, b.len);
	append(w, FRAME_MANIFEST, &b);
	b.len = 0;
	env_encode_commit_marker(&b, "src", 11, 0x200, 0x208, 2, manifest_crc + (marker == MARKER_BAD ? 1 : 0));
	if (marker != MARKER_NONE)
		append(w, FRAME_COMMIT_MARKER, &b);
	CHECK(stream_writer_sync(w) == STREAM_OK);
	stream_writer_close(w);
	buf_free(&b);
	return dir;
}

/* inspect_run with stdout in a file; *out its text (newly allocated). */
static int run(const struct inspect_options *o, const char *root, char **out)
{
	char *path = xasprintf("%s/out.json", root);
	fflush(stdout);
	int saved = dup(1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 1);
	close(fd);
	int code = inspect_run(o);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	FILE *f = fopen(path, "r");
	char *text = xcalloc(1, 65536);
	size_t n = f ? fread(text, 1, 65535, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	free(path);
	*out = text;
	return code;
}

static void test_inspect(void)
{
	char root[64];
	char *dir = make_stream(root, MARKER_OK);
	char *out;
	struct inspect_options o = { .stream_dir = dir, .json = true, .have_commit_lsn = true, .commit_lsn = 0x100 };
	CHECK(run(&o, root, &out) == EXIT_OK);
	CHECK(strstr(out, "\"xid\":10,") != NULL);
	CHECK(strstr(out, "\"form\":\"txn\"") != NULL);
	CHECK(strstr(out, "\"frames\":[{\"offset\":0,\"type\":\"txn\",") != NULL);
	CHECK(strstr(out, "\"checksums\":\"match\"") != NULL);
	CHECK(strstr(out, "\"tables\":[{\"table\":\"s.a\",\"inserts\":2,\"updates\":0,\"deletes\":1,") != NULL);
	CHECK(strstr(out, "\"manifest\":null") != NULL);
	CHECK(strstr(out, "\"binding\":\"n/a\"") != NULL);
	CHECK(strstr(out, "\"applied\":\"unknown\"") != NULL);
	free(out);

	/* by the offset of its second chunk */
	o = (struct inspect_options){ .stream_dir = dir, .json = true, .have_offset = true, .offset = 3 };
	CHECK(run(&o, root, &out) == EXIT_OK);
	CHECK(strstr(out, "\"commit_lsn\":\"0/200\"") != NULL);
	CHECK(strstr(out, "\"form\":\"chunks\"") != NULL);
	CHECK(strstr(out, "\"tables\":[{\"table\":\"s.a\",\"inserts\":5,") != NULL);
	CHECK(strstr(out, "\"chunk_count\":2,\"total_changes\":5") != NULL);
	CHECK(strstr(out, "{\"index\":1,\"offset\":3,") != NULL);
	CHECK(strstr(out, "\"commit_marker\":{\"offset\":5,") != NULL);
	CHECK(strstr(out, "\"binding\":\"ok\"") != NULL);
	free(out);

	/* a watermark is no transaction's; nothing commits at 0/999 */
	o = (struct inspect_options){ .stream_dir = dir, .json = true, .have_offset = true, .offset = 1 };
	CHECK(run(&o, root, &out) == EXIT_NEGATIVE);
	CHECK(out[0] == '\0');
	free(out);
	o = (struct inspect_options){ .stream_dir = dir, .json = true, .have_commit_lsn = true, .commit_lsn = 0x999 };
	CHECK(run(&o, root, &out) == EXIT_NEGATIVE);
	free(out);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);

	/* a commit marker that names another manifest: broken, 65 */
	dir = make_stream(root, MARKER_BAD);
	o = (struct inspect_options){ .stream_dir = dir, .json = true, .have_commit_lsn = true, .commit_lsn = 0x200 };
	CHECK(run(&o, root, &out) == EXIT_DATAERR);
	CHECK(strstr(out, "\"binding\":\"broken\"") != NULL);
	CHECK(strstr(out, "the marker: 2 chunks, manifest CRC 0x") != NULL);
	CHECK(strstr(out, "\"checksums\":\"match\"") != NULL);
	free(out);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);

	/* chunks and a manifest, no marker yet: incomplete, 1 */
	dir = make_stream(root, MARKER_NONE);
	o = (struct inspect_options){ .stream_dir = dir, .json = true, .have_commit_lsn = true, .commit_lsn = 0x200 };
	CHECK(run(&o, root, &out) == EXIT_NEGATIVE);
	CHECK(strstr(out, "\"binding\":\"incomplete\"") != NULL);
	CHECK(strstr(out, "\"form\":null") != NULL);
	free(out);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* XORs the byte at payload byte at of frame 0 with x. */
static void damage_frame0(const char *dir, size_t at, uint8_t x)
{
	struct frame_walk *w;
	struct walked_frame f;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK);
	char *path = xstrdup(f.file);
	off_t pos = (off_t)(f.position + FRAME_HEADER_SIZE + at);
	frame_walk_close(w);
	int fd = open(path, O_RDWR);
	uint8_t b = 0;
	CHECK(pread(fd, &b, 1, pos) == 1);
	b ^= x;
	CHECK(pwrite(fd, &b, 1, pos) == 1);
	close(fd);
	free(path);
}

static void test_damaged(void)
{
	char root[64], *out;
	/* a value byte of the txn frame (its last byte): the frame still
	 * decodes, and is named as a mismatch */
	char *dir = make_stream(root, MARKER_OK);
	struct walked_frame f;
	struct frame_walk *w;
	CHECK(frame_walk_open_stream(dir, &w) == STREAM_OK);
	CHECK(frame_walk_next(w, &f) == STREAM_OK);
	size_t len = f.payload_length;
	frame_walk_close(w);
	damage_frame0(dir, len - 1, 0x04);
	struct inspect_options o = { .stream_dir = dir, .json = true, .have_commit_lsn = true, .commit_lsn = 0x100 };
	CHECK(run(&o, root, &out) == EXIT_DATAERR);
	CHECK(strstr(out, "\"checksum\":\"mismatch\"") != NULL);
	CHECK(strstr(out, "\"checksums\":\"mismatch\"") != NULL);
	free(out);
	/* the chunked transaction after it still checks */
	o.commit_lsn = 0x200;
	CHECK(run(&o, root, &out) == EXIT_OK);
	CHECK(strstr(out, "\"checksums\":\"match\"") != NULL);
	free(out);
	/* its version byte: it no longer decodes, so nothing says whose it
	 * is; the LSN it held is not called absent (1) but unreadable (65) */
	damage_frame0(dir, 0, 0x80);
	o.commit_lsn = 0x100;
	CHECK(run(&o, root, &out) == EXIT_DATAERR);
	free(out);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

int main(void)
{
	test_inspect();
	test_damaged();
	return unit_done("inspect");
}

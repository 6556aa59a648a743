/*
 * tamper.c - the chunk-set barrier against a damaged or misordered relay:
 * a real capture core writes a stream of chunked transactions (stream A);
 * the relay copies it frame by frame into stream B with one chunk set
 * damaged (a chunk missing, the manifest first, chunks out of order, a
 * chunk's bytes changed, a conflicting second manifest, or the manifest
 * and marker never published); the real apply engine then applies B to
 * the model target.  It must fail closed: stop before the damaged set
 * with exit 65 (a quarantine entry naming chunk_integrity where the
 * frames decode), every transaction before it applied, nothing of it.
 */
#include "tamper.h"

#include "model_source.h"
#include "model_target.h"
#include "sim_db.h"
#include "world.h"

#include "trellara/apply_engine.h"
#include "trellara/capture_core.h"
#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/frame_source.h"
#include "trellara/log.h"
#include "trellara/relbind.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct frame_copy {
	int type;
	uint8_t *payload;
	size_t len;
	struct env_frame_summary s;
};

static int write_stream(struct stream_fs *fs, const char *dir, const struct frame_copy *f, size_t n)
{
	struct stream_writer_options wo = { .segment_bytes = MIN_SEGMENT_BYTES, .source_id = "sim", .flow = "sim" };
	struct stream_writer *w;
	struct stream_recovery rec;
	if (stream_writer_open_fs(fs, dir, &wo, &w, &rec) != STREAM_OK)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if (stream_writer_append(w, f[i].type, 0, f[i].payload, f[i].len, NULL) != STREAM_OK ||
		    stream_writer_sync(w) != STREAM_OK)
			rc = -1;
	stream_writer_close(w);
	return rc;
}

/* The real apply engine over the stream at dir, from its start, against a
 * new model target holding the source's tables (empty), until apply stops
 * or idles; the caller frees target and defs (model_target_free,
 * apply_tables_free).  False when the stream cannot be read. */
static bool apply_stream(struct model_source *src, struct stream_fs *disk, char *dir, struct model_target *target,
			 struct apply_tables *defs, struct apply_outcome *rc)
{
	struct sim_db *tdb = sim_db_new();
	model_source_create_tables(src, tdb);
	sim_flow_tables(src, defs);
	model_target_init(target, tdb, defs);
	model_target_connect(target);
	struct flow_config cfg = { .path = "sim.yml", .source_id = "sim", .publication = "sim_pub", .slot = "sim_slot",
				   .dataset_id = "sim", .stream_path = dir, .checkpoint_schema = "trellara",
				   .consumer_group = "applyd", .apply_batch_transactions = 4,
				   .apply_compaction = true };
	struct frame_source rd;
	if (frame_source_local_open(disk, dir, cfg.consumer_group, &rd) != STREAM_OK)
		return false;
	if (frame_source_seek(&rd, 0) != STREAM_OK) {
		frame_source_close(&rd);
		return false;
	}
	struct apply_engine *e = apply_engine_new(&cfg, &model_target_ops, model_target_session(target, 0), &rd);
	struct apply_tables tables = { 0 };
	model_target_ops.reload_tables(model_target_session(target, 0), &tables);
	apply_engine_connected(e, &target->cp, NULL, 0, &tables);
	apply_engine_start(e, 0);
	*rc = apply_ok();
	int idle = 0;
	for (int step = 0; step < 100000 && apply_is_ok(*rc) && idle < 50; step++) {
		enum apply_step what;
		*rc = apply_engine_step(e, (int64_t)step * 1000, &what);
		idle = what == APPLY_STEP_IDLE ? idle + 1 : 0;
	}
	apply_engine_free(e);
	frame_source_close(&rd);
	return true;
}

bool sim_tamper_run(enum sim_tamper kind, uint64_t seed, struct sim_tamper_result *r)
{
	memset(r, 0, sizeof *r);
	log_set_quiet(true);
	struct model_source_options so;
	model_source_options_default(&so);
	so.n_tables = 2;
	so.stream_pct = 60;
	so.stream_min_changes = 8;
	struct model_source *src = model_source_new(&so, seed);
	struct stream_fs *disk = stream_fs_sim_new(seed, 1ULL << 30);
	bool ok = false;
	struct frame_copy *frames = NULL;
	size_t n = 0;
	/* 1. capture writes stream A */
	struct capture_core *cc = NULL;
	struct capture_core_options co;
	sim_capture_options(&co, disk, "/a", model_source_proto_version(src), 2, 4, 64);
	if (model_source_produce(src, 12) < 0 || capture_core_open(&cc, &co) != EXIT_OK)
		goto out;
	model_source_connect(src);
	const uint8_t *buf;
	size_t len;
	int64_t now = 1000;
	while (model_source_next(src, &buf, &len) == 1) {
		bool reply;
		if (capture_core_on_message(cc, buf, len, now, now, &reply) != EXIT_OK)
			goto out;
		now += 100;
	}
	if (capture_core_flush(cc, now, now) != EXIT_OK)
		goto out;
	capture_core_close(cc);
	cc = NULL;
	/* 2. read A; find a chunk set of at least three chunks */
	struct stream_reader *rd;
	if (stream_reader_open_fs(disk, "/a", &rd) != STREAM_OK || stream_reader_seek(rd, 0) != STREAM_OK)
		goto out;
	struct stream_frame f;
	while (stream_reader_next(rd, &f) == STREAM_OK) {
		frames = xrealloc(frames, (n + 1) * sizeof *frames);
		struct frame_copy *c = &frames[n++];
		c->type = f.header.type;
		c->len = f.header.payload_length;
		c->payload = xmalloc(c->len ? c->len : 1);
		memcpy(c->payload, f.payload, c->len);
		char err[256];
		memset(&c->s, 0, sizeof c->s);
		env_frame_summary(c->type, c->payload, c->len, &c->s, err, sizeof err);
	}
	stream_reader_close(rd);
	size_t first = n, manifest = n;
	for (size_t i = 0; i < n && manifest == n; i++) {
		if (frames[i].type != FRAME_CHUNK || frames[i].s.chunk_index != 0)
			continue;
		size_t k = i;
		while (k < n && frames[k].type == FRAME_CHUNK && frames[k].s.xid == frames[i].s.xid)
			k++;
		if (k - i >= 3 && k + 1 < n && frames[k].type == FRAME_MANIFEST && frames[k + 1].type == FRAME_COMMIT_MARKER) {
			first = i;
			manifest = k;
		}
	}
	if (manifest == n) {
		snprintf(r->detail, sizeof r->detail, "the workload wrote no chunk set of three chunks");
		goto out;
	}
	r->chunks = manifest - first;
	uint64_t set_commit = frames[first].s.commit_lsn;
	/* 3. the relay: stream B, the set damaged */
	struct frame_copy *b = xcalloc(n + 2, sizeof *b);
	size_t nb = 0;
	for (size_t i = 0; i < first; i++)
		b[nb++] = frames[i];
	switch (kind) {
	case SIM_TAMPER_MISSING_CHUNK:
		for (size_t i = first; i <= manifest + 1; i++)
			if (i != first + 1)
				b[nb++] = frames[i];
		break;
	case SIM_TAMPER_MANIFEST_FIRST:
		b[nb++] = frames[manifest];
		for (size_t i = first; i < manifest; i++)
			b[nb++] = frames[i];
		b[nb++] = frames[manifest + 1];
		break;
	case SIM_TAMPER_OUT_OF_ORDER:
		b[nb++] = frames[first];
		b[nb++] = frames[first + 2];
		b[nb++] = frames[first + 1];
		for (size_t i = first + 3; i <= manifest + 1; i++)
			b[nb++] = frames[i];
		break;
	case SIM_TAMPER_CHANGED_BYTES: {
		for (size_t i = first; i <= manifest + 1; i++)
			b[nb++] = frames[i];
		/* one byte of the second chunk, the frame itself still well
		 * formed (its frame checksum is the writer's) */
		struct frame_copy *c = &b[nb - (manifest + 1 - first)];
		c->payload = xmalloc(c->len);
		memcpy(c->payload, frames[first + 1].payload, c->len);
		/* a character of a text value outside the key: the chunk
		 * still decodes and applies, only its checksum tells (the chunk payload is a 4-byte prefix,
		 * then an envelope) */
		struct env_decoder d;
		const struct env_change *ch;
		bool changed = false;
		if (env_decode_begin(&d, c->payload + 4, c->len - 4) == 0)
			while (!changed && env_decode_next(&d, &ch) == 1)
				for (uint16_t v = 0; !changed && v < ch->new_tuple.n; v++)
					if (ch->new_tuple.values[v].kind == ENV_TEXT && ch->new_tuple.values[v].len > 0 &&
					    (ch->op == ENV_INSERT || ch->op == ENV_UPDATE) &&
					    !d.header.relations[ch->relation].columns[v].key) {
						size_t at = (size_t)(ch->new_tuple.values[v].data - c->payload);
						c->payload[at] = (uint8_t)(c->payload[at] == 'z' ? 'y' : 'z');
						changed = true;
					}
		env_decoder_free(&d);
		if (!changed) {
			snprintf(r->detail, sizeof r->detail, "the chunk to change holds no text value");
			goto out_b;
		}
		break;
	}
	case SIM_TAMPER_CONFLICTING_MANIFEST: {
		for (size_t i = first; i <= manifest; i++)
			b[nb++] = frames[i];
		/* the manifest again, claiming one chunk fewer */
		struct env_manifest m;
		char err[256];
		if (env_decode_manifest(frames[manifest].payload, frames[manifest].len, &m, err, sizeof err) < 0)
			goto out_b;
		struct buf mb = { 0 };
		struct env_header_fields hf = { .source_id = "sim", .xid = m.xid, .commit_lsn = m.commit_lsn,
						.end_lsn = m.end_lsn, .commit_time_us = m.commit_time_us };
		env_encode_manifest(&mb, &hf, m.chunk_count - 1, 0, m.chunks, 0, NULL);
		env_manifest_free(&m);
		b[nb].type = FRAME_MANIFEST;
		b[nb].payload = mb.data;
		b[nb].len = mb.len;
		nb++;
		b[nb++] = frames[manifest + 1];
		break;
	}
	case SIM_TAMPER_NO_BARRIER:
		for (size_t i = first; i < manifest; i++)
			b[nb++] = frames[i];
		break;
	}
	for (size_t i = manifest + 2; i < n; i++)
		b[nb++] = frames[i];
	if (write_stream(disk, "/b", b, nb) < 0) {
		snprintf(r->detail, sizeof r->detail, "the relay could not write its stream");
		goto out_b;
	}
	/* 4. apply B */
	struct apply_tables defs;
	struct model_target target;
	struct apply_outcome rc;
	if (apply_stream(src, disk, "/b", &target, &defs, &rc)) {
		r->exit_code = rc.status == APPLY_EXIT ? rc.exit_code : -1;
		r->quarantined = target.n_quarantine > 0 && strcmp(target.quarantine[0].reason, "chunk_integrity") == 0;
		/* what must hold: everything before the set, nothing of it */
		const struct sim_db *want = model_source_state_at(src, set_commit - 1);
		char diff[300] = "";
		bool same = !sim_db_diff(want, target.db, diff, sizeof diff);
		if (r->exit_code != EXIT_DATAERR)
			snprintf(r->detail, sizeof r->detail, "apply did not stop with exit 65 at the damaged chunk set (outcome %d)",
				 r->exit_code);
		else if (!same)
			snprintf(r->detail, sizeof r->detail, "the target is not the source's state before the damaged set: %s", diff);
		else if (target.cp.last_commit_lsn >= set_commit)
			snprintf(r->detail, sizeof r->detail, "the checkpoint passed the damaged set");
		else
			ok = true;
	}
	model_target_free(&target);
	apply_tables_free(&defs);
out_b:
	for (size_t i = 0; i < nb; i++)
		if (b[i].payload && (kind == SIM_TAMPER_CHANGED_BYTES || kind == SIM_TAMPER_CONFLICTING_MANIFEST)) {
			bool shared = false;
			for (size_t k = 0; k < n; k++)
				shared |= b[i].payload == frames[k].payload;
			if (!shared)
				free(b[i].payload);
		}
	free(b);
out:
	if (cc)
		capture_core_close(cc);
	for (size_t i = 0; i < n; i++)
		free(frames[i].payload);
	free(frames);
	model_source_free(src);
	stream_fs_sim_free(disk);
	log_set_quiet(false);
	return ok;
}

/* The first commit at or after from that the stream at dir holds (a
 * transaction or a commit marker): 0 when none; UINT64_MAX when the
 * stream cannot be read. */
static uint64_t stream_commit_from(struct stream_fs *fs, const char *dir, uint64_t from)
{
	struct stream_reader *rd;
	if (stream_reader_open_fs(fs, dir, &rd) != STREAM_OK)
		return UINT64_MAX;
	uint64_t found = 0;
	struct stream_frame f;
	if (stream_reader_seek(rd, 0) != STREAM_OK)
		found = UINT64_MAX;
	while (!found && stream_reader_next(rd, &f) == STREAM_OK) {
		struct env_frame_summary sm;
		char err[256];
		if ((f.header.type == FRAME_TXN || f.header.type == FRAME_COMMIT_MARKER) &&
		    env_frame_summary(f.header.type, f.payload, f.header.payload_length, &sm, err, sizeof err) == 0 &&
		    sm.commit_lsn >= from)
			found = sm.commit_lsn;
	}
	stream_reader_close(rd);
	return found;
}

bool sim_missing_relation_run(uint64_t seed, char *detail, size_t detail_len)
{
	log_set_quiet(true);
	struct model_source_options so;
	model_source_options_default(&so);
	so.n_tables = 2;
	so.stream_pct = 0; /* plain transactions: the Relation sits between Begin and its rows */
	struct model_source *src = model_source_new(&so, seed);
	struct stream_fs *disk = stream_fs_sim_new(seed, 1ULL << 30);
	struct capture_core *cc = NULL;
	bool ok = false;
	snprintf(detail, detail_len, "the source sent no Relation message");
	struct capture_core_options co;
	sim_capture_options(&co, disk, "/a", model_source_proto_version(src), 0, 1, 64);
	if (model_source_produce(src, 10) < 0 || capture_core_open(&cc, &co) != EXIT_OK)
		goto out;
	model_source_connect(src);
	const uint8_t *buf;
	size_t len;
	int64_t now = 1000;
	uint64_t begin_commit = 0, victim_commit = 0;
	int rc = EXIT_OK;
	/* the second Relation message the source sends is lost on the way */
	int relations = 0;
	while (rc == EXIT_OK && model_source_next(src, &buf, &len) == 1) {
		if (len > 25 && buf[0] == 'w' && buf[25] == 'B' && len >= 34) {
			begin_commit = 0;
			for (int i = 0; i < 8; i++)
				begin_commit = begin_commit << 8 | buf[26 + i];
		}
		if (len > 25 && buf[0] == 'w' && buf[25] == 'R' && ++relations == 2) {
			victim_commit = begin_commit;
			continue;
		}
		bool reply;
		rc = capture_core_on_message(cc, buf, len, now, now, &reply);
		now += 100;
	}
	if (!victim_commit)
		goto out;
	if (rc != EXIT_DATAERR) {
		snprintf(detail, detail_len, "rows of a relation never described were accepted (exit %d)", rc);
		goto out;
	}
	/* whatever capture made durable holds nothing of that transaction */
	capture_core_close(cc);
	cc = NULL;
	uint64_t held = stream_commit_from(disk, "/a", victim_commit);
	ok = held == 0;
	if (!ok)
		snprintf(detail, detail_len, "the stream holds commit %" PRIX64 ", at or after the transaction without its relation",
			 held);
out:
	if (cc)
		capture_core_close(cc);
	model_source_free(src);
	stream_fs_sim_free(disk);
	log_set_quiet(false);
	return ok;
}

static uint64_t be64_at(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static bool relation_ddl_run(uint64_t seed, bool recreate, char *detail, size_t detail_len)
{
	log_set_quiet(true);
	struct model_source_options so;
	model_source_options_default(&so);
	so.n_tables = 2;
	so.stream_pct = 0; /* plain transactions: Begin, the Relation, its rows */
	struct model_source *src = model_source_new(&so, seed);
	struct stream_fs *disk = stream_fs_sim_new(seed, 1ULL << 30);
	struct capture_core *cc = NULL;
	bool ok = false;
	snprintf(detail, detail_len, "no transaction changed the table after the DDL");
	const char *schemas[2], *names[2];
	for (size_t i = 0; i < 2; i++) {
		schemas[i] = model_source_table(src, i)->nspname;
		names[i] = model_source_table(src, i)->relname;
	}
	struct capture_core_options co;
	sim_capture_options(&co, disk, "/a", model_source_proto_version(src), 0, 1, 64);
	co.table_schemas = schemas;
	co.table_names = names;
	co.n_tables = 2;
	if (model_source_produce(src, 30) < 0 || capture_core_open(&cc, &co) != EXIT_OK)
		goto out;
	/* capture's connect: each flow table's OID from the catalog */
	for (size_t i = 0; i < 2; i++)
		relbind_set(capture_core_relations(cc), i, model_source_relid(src, i));
	model_source_connect(src);
	const uint8_t *buf;
	size_t len;
	int64_t now = 1000;
	uint64_t begin_commit = 0, victim_commit = 0, last_commit_before = 0;
	int rc = EXIT_OK, commits = 0;
	bool reply = false, done_ddl = false;
	char old_name[80];
	snprintf(old_name, sizeof old_name, "%s_old", names[0]);
	while (rc == EXIT_OK && model_source_next(src, &buf, &len) == 1) {
		bool x = len > 25 && buf[0] == 'w';
		if (x && buf[25] == 'B' && len >= 34)
			begin_commit = be64_at(buf + 26);
		if (x && buf[25] == 'R' && len >= 30 && done_ddl && !victim_commit) {
			uint32_t relid = (uint32_t)buf[26] << 24 | (uint32_t)buf[27] << 16 | (uint32_t)buf[28] << 8 | buf[29];
			if (relid == model_source_relid(src, 0))
				victim_commit = begin_commit;
		}
		rc = capture_core_on_message(cc, buf, len, now, now, &reply);
		now += 100;
		if (x && buf[25] == 'C' && ++commits == 4 && !done_ddl) {
			/* between the fourth transaction and the next */
			last_commit_before = begin_commit;
			if (recreate)
				model_source_recreate_table(src, 0);
			else
				model_source_rename_table(src, 0, schemas[0], old_name);
			done_ddl = true;
		}
	}
	if (!victim_commit)
		goto out;
	if (rc != EXIT_CONFIG) {
		snprintf(detail, detail_len, "the changes of a flow table %s were taken (exit %d)",
			 recreate ? "dropped and created again" : "renamed", rc);
		goto out;
	}
	if (!reply) {
		snprintf(detail, detail_len, "capture stopped without a status update for what it made durable");
		goto out;
	}
	uint64_t durable = capture_core_stats(cc).durable_lsn;
	if (durable >= victim_commit) {
		snprintf(detail, detail_len, "acknowledged through %" PRIX64 ", past the transaction at %" PRIX64, durable,
			 victim_commit);
		goto out;
	}
	/* what came before the DDL is durable and may be acknowledged */
	if (durable < last_commit_before) {
		snprintf(detail, detail_len, "acknowledged through %" PRIX64 " only: the transaction before the DDL (commit %" PRIX64 ") is not durable",
			 durable, last_commit_before);
		goto out;
	}
	capture_core_close(cc);
	cc = NULL;
	uint64_t held = stream_commit_from(disk, "/a", victim_commit);
	ok = held == 0;
	if (!ok)
		snprintf(detail, detail_len, "the stream holds commit %" PRIX64 ", at or after the transaction of the %s table",
			 held, recreate ? "recreated" : "renamed");
out:
	if (cc)
		capture_core_close(cc);
	model_source_free(src);
	stream_fs_sim_free(disk);
	log_set_quiet(false);
	return ok;
}

bool sim_renamed_relation_run(uint64_t seed, char *detail, size_t detail_len)
{
	return relation_ddl_run(seed, false, detail, detail_len);
}

bool sim_recreated_relation_run(uint64_t seed, char *detail, size_t detail_len)
{
	return relation_ddl_run(seed, true, detail, detail_len);
}

/* The first transaction in the stream at dir that updates or deletes a
 * row of table; 0 when none does. */
static uint64_t first_change_of(struct stream_fs *fs, const char *dir, const char *table)
{
	struct stream_reader *rd;
	uint64_t found = 0;
	if (stream_reader_open_fs(fs, dir, &rd) != STREAM_OK)
		return 0;
	struct stream_frame f;
	if (stream_reader_seek(rd, 0) == STREAM_OK)
		while (!found && stream_reader_next(rd, &f) == STREAM_OK) {
			if (f.header.type != FRAME_TXN)
				continue;
			struct env_decoder d;
			if (env_decode_begin(&d, f.payload, f.header.payload_length) == 0) {
				const struct env_change *c;
				while (!found && env_decode_next(&d, &c) == 1) {
					const struct env_relation *r = &d.header.relations[c->relation];
					char name[256];
					snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len,
						 r->name);
					if ((c->op == ENV_UPDATE || c->op == ENV_DELETE) && strcmp(name, table) == 0)
						found = d.header.commit_lsn;
				}
			}
			env_decoder_free(&d);
		}
	stream_reader_close(rd);
	return found;
}

bool sim_no_identity_run(uint64_t seed, char *detail, size_t detail_len)
{
	log_set_quiet(true);
	struct model_source_options so;
	model_source_options_default(&so);
	so.n_tables = 2;
	so.stream_pct = 0;
	so.no_identity_table = 1;
	/* the source itself refuses a DELETE there (pgoutput has no way to
	 * send one without an old key): updates only */
	so.delete_weight = 0;
	so.truncate_pct = 0;
	struct model_source *src = model_source_new(&so, seed);
	struct stream_fs *disk = stream_fs_sim_new(seed, 1ULL << 30);
	struct capture_core *cc = NULL;
	bool ok = false;
	const char *table = model_source_table(src, 0)->name;
	snprintf(detail, detail_len, "capture could not write the stream");
	/* 1. capture writes every transaction */
	struct capture_core_options co;
	sim_capture_options(&co, disk, "/a", model_source_proto_version(src), 0, 4, 64);
	if (model_source_produce(src, 20) < 0) {
		snprintf(detail, detail_len, "the model source: %s", model_source_error(src));
		goto out;
	}
	if (capture_core_open(&cc, &co) != EXIT_OK)
		goto out;
	model_source_connect(src);
	const uint8_t *buf;
	size_t len;
	int64_t now = 1000;
	while (model_source_next(src, &buf, &len) == 1) {
		bool reply;
		int crc = capture_core_on_message(cc, buf, len, now, now, &reply);
		if (crc != EXIT_OK) {
			snprintf(detail, detail_len, "capture refused the source's messages (exit %d)", crc);
			goto out;
		}
		now += 100;
	}
	if (capture_core_flush(cc, now, now) != EXIT_OK)
		goto out;
	capture_core_close(cc);
	cc = NULL;
	uint64_t victim = first_change_of(disk, "/a", table);
	if (!victim) {
		snprintf(detail, detail_len, "the workload updated or deleted no row of %s", table);
		goto out;
	}
	/* 2. the real apply engine against the model target */
	struct apply_tables defs;
	struct model_target target;
	struct apply_outcome rc;
	if (apply_stream(src, disk, "/a", &target, &defs, &rc)) {
		/* it stops at that transaction, quarantined, having changed
		 * nothing of it: no row was guessed */
		const struct sim_db *want = model_source_state_at(src, victim - 1);
		char diff[300] = "";
		bool same = !sim_db_diff(want, target.db, diff, sizeof diff);
		if (rc.status != APPLY_EXIT || rc.exit_code != EXIT_NEGATIVE)
			snprintf(detail, detail_len, "apply did not stop with a quarantine (exit 1) at commit %" PRIX64, victim);
		else if (target.n_quarantine != 1 || target.quarantine[0].commit_lsn != victim)
			snprintf(detail, detail_len, "%d quarantine entries, the first at commit %" PRIX64 " (%s: %s), not commit %" PRIX64 " alone",
				 target.n_quarantine, target.n_quarantine ? target.quarantine[0].commit_lsn : 0,
				 target.n_quarantine ? target.quarantine[0].reason : "-",
				 target.n_quarantine ? target.quarantine[0].detail : "-", victim);
		else if (!strstr(target.quarantine[0].detail, "has no key"))
			snprintf(detail, detail_len, "the quarantine does not say the table has no key: %s: %s",
				 target.quarantine[0].reason, target.quarantine[0].detail);
		else if (!same)
			snprintf(detail, detail_len, "the target is not the source's state before commit %" PRIX64 ": %s", victim,
				 diff);
		else if (target.cp.last_commit_lsn >= victim)
			snprintf(detail, detail_len, "the checkpoint passed commit %" PRIX64, victim);
		else
			ok = true;
	}
	model_target_free(&target);
	apply_tables_free(&defs);
out:
	if (cc)
		capture_core_close(cc);
	model_source_free(src);
	stream_fs_sim_free(disk);
	log_set_quiet(false);
	return ok;
}

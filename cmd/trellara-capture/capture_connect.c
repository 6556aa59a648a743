/*
 * capture_connect.c - what capture checks each time it connects to the
 * source, before it streams (capture_internal.h): the source's identity
 * against the stream's binding, the flow tables' relations (relbind.h),
 * the slot (slot_policy.h decides), and the stream's binding to the slot
 * and timeline.  The loop itself is capture.c.
 */
#include "capture_internal.h"
#include "capture_jetstream.h"

#include "trellara/capture_core.h"
#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/relbind_pg.h"
#include "trellara/runs.h"
#include "trellara/sqlstate.h"
#include "trellara/strbuf.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stream's binding (stream meta): the local stream's meta file, or
 * what a JetStream stream's last message carries (capture_jetstream.h). */
static int read_binding(struct capture *c, struct stream_meta *meta)
{
	if (c->js) {
		capture_jetstream_binding(c->js, meta);
		return 0;
	}
	return stream_meta_read(c->cfg->stream_path, meta);
}

/* Durable at once in the local stream; on JetStream with the next
 * message, which capture publishes before it acknowledges anything. */
static int write_binding(struct capture *c, const struct stream_meta *meta)
{
	if (c->js) {
		capture_jetstream_bind(c->js, meta);
		return 0;
	}
	return stream_meta_write(c->cfg->stream_path, meta);
}

/* ---- the source side ---- */

int capture_check_identity(struct capture *c, const struct pg_identity *id)
{
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0)
		return EXIT_DATAERR;
	int code = EXIT_OK;
	if (!meta.system_identifier) {
		meta.system_identifier = xstrdup(id->systemid);
		free(meta.database);
		meta.database = xstrdup(id->dbname);
		if (!meta.source_id)
			meta.source_id = xstrdup(c->cfg->source_id);
		if (!meta.flow)
			meta.flow = xstrdup(c->flow);
		if (write_binding(c, &meta) < 0)
			code = EXIT_CANTCREAT;
		else
			log_info("stream \"%s\" bound to source system %s, database \"%s\"", c->stream_name,
				 id->systemid, id->dbname);
	} else if (strcmp(meta.system_identifier, id->systemid) != 0 ||
		   (meta.database && strcmp(meta.database, id->dbname) != 0)) {
		log_error("source identity mismatch: stream \"%s\" holds system %s database \"%s\", but the source is system %s database \"%s\"",
			  c->stream_name, meta.system_identifier, meta.database ? meta.database : "",
			  id->systemid, id->dbname);
		log_hint("a stream belongs to one source database; point source.database_url at it, or use a new stream.path");
		code = EXIT_CONFIG;
	}
	stream_meta_free(&meta);
	return code;
}

/* Why capture stops on the slot it found (slot_policy.h), said once with
 * the safe action. */
static void explain_slot_verdict(struct capture *c, enum slot_verdict v, const struct slot_facts *f,
				 const char *type, const char *plugin, uint64_t durable_lsn)
{
	char l1[LSN_FORMAT_LEN];
	char *config = strbuf_shell_quote(c->cfg->path);
	const char *slot = c->cfg->slot, *path = c->stream_name;
	switch (v) {
	case SLOT_WRONG_KIND:
		log_error("replication slot \"%s\" is a %s slot with plugin \"%s\"; trellara needs a logical pgoutput slot", slot,
			  type, plugin);
		break;
	case SLOT_NOT_CREATED:
		log_error("replication slot \"%s\" does not exist", slot);
		log_hint("run \"trellara snapshot --config %s\", or \"trellara capture --start-now\"", config);
		break;
	case SLOT_LOST_AT_PROMOTION:
		log_error("replication slot \"%s\" does not exist on the source, which was promoted (timeline %u, the stream followed timeline %u): "
			  "stream \"%s\" holds its changes through %s, and the changes committed after that on the old primary cannot be decoded again; a new slot would skip them",
			  slot, f->source_timeline, f->stream_timeline, path, lsn_format(durable_lsn, l1));
		log_hint("copy the flow again from the promoted source: stop capture and applyd, then \"trellara snapshot --config %s --force\" "
			 "(with PostgreSQL 17 or later, a failover slot synchronized to the standby avoids this: trellara check names its posture)",
			 config);
		break;
	case SLOT_GONE:
		log_error("replication slot \"%s\" does not exist, but stream \"%s\" holds its changes through %s: the slot was dropped "
			  "(or the source is another server without it), and a new slot would skip every change since",
			  slot, path, lsn_format(durable_lsn, l1));
		log_hint("if the source is the wrong server, point source.database_url back; otherwise copy the flow again: \"trellara snapshot --config %s --force\"",
			 config);
		break;
	case SLOT_INVALIDATED:
		log_error("replication slot \"%s\" was invalidated by the source (wal_status \"%s\"%s%s%s): the WAL it needed is gone and it can no longer stream",
			  slot, f->wal_status, f->invalidation_reason[0] ? ", invalidation_reason \"" : "",
			  f->invalidation_reason, f->invalidation_reason[0] ? "\"" : "");
		log_hint("copy the flow again: stop capture and applyd, then \"trellara snapshot --config %s --force\"; "
			 "raise max_slot_wal_keep_size (and idle_replication_slot_timeout on PostgreSQL 18) above the flow's longest expected downtime",
			 config);
		break;
	case SLOT_USE:
	case SLOT_CREATE:
		break;
	}
	free(config);
}

/* Returns EXIT_OK, or an exit code for a failure that retrying cannot fix;
 * -1 for a failure worth a reconnect. */
int capture_ensure_slot(struct capture *c, const struct pg_identity *id)
{
	const char *params[1] = { c->cfg->slot };
	char *url = config_database_url(c->cfg, true);
	PGconn *plain = pgconn_connect(url, PGCONN_NORMAL, "trellara-capture", "source");
	config_free_secret(url);
	if (!plain)
		capture_count_connect_failure(c);
	if (!plain)
		return -1;
	int code = -1, version = PQserverVersion(plain);
	/* each flow table's relation now (relbind.h): one missing was dropped,
	 * or renamed or moved while capture was stopped */
	size_t missing;
	struct relbind *bind = capture_core_relations(c->core);
	if (relbind_load(plain, bind, &missing) < 0) {
		PQfinish(plain);
		return -1;
	}
	if (missing < bind->n) {
		const struct relbind_table *t = &bind->tables[missing];
		log_error("flow table %s.%s does not exist on the source: it was dropped, or renamed or moved to another schema; capture does not stream a flow whose table it cannot follow",
			  t->schema, t->name);
		log_hint("renamed or moved: do the same on the target and write its new name in dataset.tables of %s; dropped: remove it from dataset.tables (the target keeps its rows)",
			 c->cfg->path);
		PQfinish(plain);
		return EXIT_CONFIG;
	}
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0) {
		PQfinish(plain);
		return EXIT_DATAERR;
	}
	if (meta.slot && strcmp(meta.slot, c->cfg->slot) != 0) {
		/* the stream follows another slot: check_stream_binding refuses
		 * it (78) before anything is created */
		stream_meta_free(&meta);
		PQfinish(plain);
		c->slot_existed = false;
		return EXIT_OK;
	}
	/* wal_status from 13, conflicting from 16, invalidation_reason from 17 */
	char *sql = xasprintf("SELECT plugin, slot_type, database, active, coalesce(confirmed_flush_lsn, '0/0'), %s, %s, %s"
			      " FROM pg_replication_slots WHERE slot_name = $1",
			      version >= 130000 ? "coalesce(wal_status, '')" : "''",
			      version >= 170000 ? "coalesce(invalidation_reason, '')" : "''",
			      version >= 160000 ? "coalesce(conflicting, false)" : "false");
	PGresult *res = pgconn_query(plain, sql, 1, params);
	free(sql);
	if (!res)
		goto out;
	uint64_t durable_lsn = capture_core_stats(c->core).durable_lsn;
	bool found = PQntuples(res) == 1;
	const char *type = found ? PQgetvalue(res, 0, 1) : "", *plugin = found ? PQgetvalue(res, 0, 0) : "";
	struct slot_facts f = {
		.exists = found,
		.logical_pgoutput = found && strcmp(type, "logical") == 0 && strcmp(plugin, "pgoutput") == 0,
		.wal_status = found ? PQgetvalue(res, 0, 5) : "",
		.invalidation_reason = found ? PQgetvalue(res, 0, 6) : "",
		.conflicting = found && strcmp(PQgetvalue(res, 0, 7), "t") == 0,
		.stream_holds_changes = durable_lsn > 0 || meta.slot != NULL,
		.stream_timeline = meta.timeline ? (uint32_t)strtoul(meta.timeline, NULL, 10) : 0,
		.source_timeline = id->timeline,
		.start_now = c->o->start_now,
	};
	enum slot_verdict v = slot_policy_decide(&f);
	c->slot_verdict = v;
	c->slot_existed = false;
	if (found)
		c->slot_existed = lsn_parse(PQgetvalue(res, 0, 4), &c->slot_confirmed_lsn);
	if (v != SLOT_USE && v != SLOT_CREATE) {
		explain_slot_verdict(c, v, &f, type, plugin, durable_lsn);
		code = slot_policy_exit_code(v);
		goto out;
	}
	if (v == SLOT_USE) {
		code = EXIT_OK;
		goto out;
	}
	char *slot = pgconn_quote_ident(c->conn, c->cfg->slot);
	sql = xasprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'nothing'%s)", slot,
			PQserverVersion(c->conn) >= 170000 ? ", FAILOVER true" : "");
	code = pgconn_command(c->conn, sql) == 0 ? EXIT_OK : EXIT_CONFIG;
	if (code == EXIT_OK)
		log_info("created replication slot \"%s\" (--start-now: streaming starts at its consistent point)",
			 c->cfg->slot);
	free(sql);
	free(slot);
out:
	stream_meta_free(&meta);
	PQclear(res);
	PQfinish(plain);
	return code;
}

/* The lowest watermark of the flow's latest table copies: changes at or
 * below it are in the target's copies, whatever the stream holds.
 * 0 when there are none (or no target connection: --start-now). */
static int copies_cover_through(struct capture *c, uint64_t *covered)
{
	*covered = 0;
	if (!c->target)
		return 0;
	struct flow_ids ids = { c->cfg->source_id, c->cfg->dataset_id, c->cfg->consumer_group };
	char **rels;
	uint64_t *lsns;
	int n;
	if (checkpoint_table_watermarks(c->target, c->cfg->checkpoint_schema, &ids, &rels, &lsns, &n) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (i == 0 || lsns[i] < *covered)
			*covered = lsns[i];
		free(rels[i]);
	}
	free(rels);
	free(lsns);
	return 0;
}

/* Slot, stream and copies must tell one story (stream meta binding):
 * the stream follows this slot, and holds every change the slot has
 * confirmed that the target's copies do not already contain.  Binds a
 * new stream on first use.  Returns EXIT_OK, an exit code, or -1 (retry). */
int capture_check_stream_binding(struct capture *c, const struct pg_identity *id)
{
	const char *path = c->stream_name;
	struct stream_meta meta;
	if (read_binding(c, &meta) < 0)
		return EXIT_DATAERR;
	int code = EXIT_OK;
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN], l3[LSN_FORMAT_LEN];
	uint64_t durable_lsn = capture_core_stats(c->core).durable_lsn;
	bool empty = durable_lsn == 0;
	if (meta.slot && strcmp(meta.slot, c->cfg->slot) != 0) {
		log_error("stream \"%s\" follows replication slot \"%s\", but the flow names slot \"%s\"", path, meta.slot,
			  c->cfg->slot);
		log_hint("point source.slot back at \"%s\", or give slot \"%s\" a stream.path of its own", meta.slot,
			 c->cfg->slot);
		code = EXIT_CONFIG;
		goto out;
	}
	unsigned long old_tli = meta.timeline ? strtoul(meta.timeline, NULL, 10) : 0;
	if (old_tli && id->timeline < old_tli) {
		log_error("source timeline went back from %lu to %u for stream \"%s\": the source was restored to an older history",
			  old_tli, id->timeline, path);
		char *config = strbuf_shell_quote(c->cfg->path);
		log_hint("a stream follows one history; copy again into a new stream.path (\"trellara snapshot --config %s --force\")",
			 config);
		free(config);
		code = EXIT_CONFIG;
		goto out;
	}
	if (c->slot_existed && c->slot_confirmed_lsn > durable_lsn) {
		uint64_t covered;
		if (copies_cover_through(c, &covered) < 0) {
			code = -1;
			goto out;
		}
		if (empty && c->o->start_now) {
			log_warn("stream \"%s\" is empty and slot \"%s\" has confirmed changes through %s: --start-now streams from there; earlier changes are not in this stream",
				 path, c->cfg->slot, lsn_format(c->slot_confirmed_lsn, l1));
		} else if (c->slot_confirmed_lsn > covered) {
			log_error("replication slot \"%s\" has confirmed changes through %s, but stream \"%s\" (id %s) holds only through %s and the target's copies only through %s: the stream that received those changes is gone (deleted, replaced or restored from an older copy)",
				  c->cfg->slot, lsn_format(c->slot_confirmed_lsn, l1), path, meta.stream_id ? meta.stream_id : "-",
				  lsn_format(durable_lsn, l2), lsn_format(covered, l3));
			char *config = strbuf_shell_quote(c->cfg->path);
			log_hint("restore the stream directory capture wrote, or copy every table again so that the copies cover what the slot skipped: \"trellara snapshot --config %s --force\"",
				 config);
			free(config);
			code = EXIT_DATAERR;
			goto out;
		}
	}
	char tli[16];
	snprintf(tli, sizeof tli, "%u", id->timeline);
	bool bind = !meta.slot, moved = old_tli && id->timeline != old_tli;
	if (bind || moved || !meta.timeline) {
		if (bind) {
			meta.slot = xstrdup(c->cfg->slot);
			free(meta.start_lsn);
			/* where this stream's data begins: the slot's confirmed
			 * position; unknown for a slot created just now or a
			 * stream that already held frames */
			meta.start_lsn = c->slot_existed && empty ? xstrdup(lsn_format(c->slot_confirmed_lsn, l1)) : NULL;
		}
		if (moved)
			c->promotions++;
		if (moved)
			log_warn("source timeline moved from %lu to %u (a promotion): stream \"%s\" follows it", old_tli,
				 id->timeline, path);
		free(meta.timeline);
		meta.timeline = xstrdup(tli);
		if (write_binding(c, &meta) < 0) {
			code = EXIT_CANTCREAT;
			goto out;
		}
		if (bind)
			log_info("stream \"%s\" (id %s) bound to slot \"%s\" from %s, timeline %u", path,
				 meta.stream_id ? meta.stream_id : "-", c->cfg->slot,
				 meta.start_lsn ? meta.start_lsn : "an unknown position", id->timeline);
	}
out:
	stream_meta_free(&meta);
	return code;
}


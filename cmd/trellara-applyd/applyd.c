/*
 * applyd.c - the apply loop (applyd.h).
 *
 * Reading: the consumer group's position (or the checkpoint's stream
 * offset, whichever is lower: after a crash between target commit and
 * group ack the group is behind, and the transactions it re-reads are
 * skipped as duplicates by commit LSN).
 *
 * Batching: up to apply.batch_transactions whole source transactions in
 * one target transaction, statements pipelined.  A batch that fails is
 * rolled back and replayed one transaction per target transaction; the
 * one that fails alone is quarantined and apply stops (exit 1).
 *
 * Chunked transactions (chunk..., manifest, commit_marker) are applied
 * inside their own target transaction as their chunks arrive and
 * committed only after the manifest and marker check out; anything else
 * rolls them back.  An incomplete chunk set followed by a replay of the
 * same transaction is discarded and the replay applied; one followed by
 * anything later fails closed.
 *
 * The decisions (dedup, per-relation verdicts, key and identity
 * columns, TRUNCATE filtering, what a failed statement leads to) are
 * apply_core's, which knows nothing of libpq; this file gathers the
 * facts they need from the target and carries out their answers.
 */
#include "applyd.h"
#include "executor.h"

#include "trellara/apply_chunks.h"
#include "trellara/apply_core.h"
#include "trellara/checkpoint.h"
#include "trellara/checksum.h"
#include "trellara/defaults.h"
#include "trellara/envelope.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/metrics.h"
#include "trellara/notify.h"
#include "trellara/pgconn.h"
#include "trellara/planner.h"
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


struct applyd {
	const struct applyd_options *o;
	const struct flow_config *cfg;
	struct applyd_stats *stats;
	char *flow; /* owned */
	struct flow_ids ids;
	PGconn *conn;
	struct executor ex;
	bool ex_ready;
	struct stream_reader *reader;
	struct apply_checkpoint cp;
	/* the flow's tables and the target's partitions of its partitioned
	 * ones, as the target's catalogs and the checkpoint say (apply_core) */
	struct apply_tables tables;
	char **unconfigured;       /* owned: tables already warned about */
	size_t n_unconfigured;
	struct quarantine_entry *replay; /* owned: replay_ready entries */
	int n_replay;
	struct plan_stmt stmt;
	/* the open batch */
	bool in_txn;
	uint64_t batch_first_offset;
	uint64_t batch_txns, batch_changes, batch_skipped, batch_filtered;
	uint64_t last_commit_lsn;  /* highest applied or skipped in this batch or before */
	uint32_t last_xid;
	uint64_t seen_lsn;         /* highest commit end or watermark passed */
	uint64_t next_offset;      /* after the last frame handled */
	/* one transaction per target transaction until this offset */
	uint64_t single_until;
	bool single_mode;
	struct chunk_set chunk;
	struct notify_watchdog watchdog;
	int64_t last_metrics_us;
	bool ready_sent;
	bool group_pending;        /* the group file lags the checkpoint */
	int64_t last_group_write_us;
	bool fence_present;        /* as read at the start of the current batch */
	uint64_t fence_lsn;
	int64_t last_idle_checkpoint_us, last_progress_us;
	uint64_t progress_txns;
	unsigned int rng;
	int transient_retries;     /* in a row, since the last commit */
	char last_transient_sqlstate[6];
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* observability.metrics_dir/applyd.prom, at most once a second. */
static void write_metrics(struct applyd *a, bool force)
{
	if (!a->cfg->metrics_dir)
		return;
	int64_t now = mono_us();
	if (!force && now - a->last_metrics_us < 1000000)
		return;
	a->last_metrics_us = now;
	struct metrics m;
	metrics_init(&m, a->flow, a->cfg->source_id);
	metrics_add_u64(&m, "trellara_applyd_transactions_total", "source transactions applied (checkpoint)", METRIC_COUNTER, NULL, NULL, a->cp.applied_transactions);
	metrics_add_u64(&m, "trellara_applyd_changes_total", "row changes applied (checkpoint)", METRIC_COUNTER, NULL, NULL, a->cp.applied_changes);
	metrics_add_u64(&m, "trellara_applyd_skipped_duplicates_total", "transactions skipped by dedup (checkpoint)", METRIC_COUNTER, NULL, NULL, a->cp.skipped_duplicates);
	metrics_add_u64(&m, "trellara_applyd_quarantined_total", "transactions quarantined by this process", METRIC_COUNTER, NULL, NULL, a->stats->quarantined);
	metrics_add_u64(&m, "trellara_applyd_batches_total", "target transactions committed by this process", METRIC_COUNTER, NULL, NULL, a->stats->batches);
	metrics_add_u64(&m, "trellara_applyd_applied_through_lsn_bytes", "source position applied through, as a byte position", METRIC_GAUGE, NULL, NULL, a->cp.applied_through_lsn);
	metrics_add_u64(&m, "trellara_applyd_stream_offset", "next stream offset to apply (checkpoint)", METRIC_GAUGE, NULL, NULL, a->cp.stream_offset);
	metrics_write_file(a->cfg->metrics_dir, "applyd", &m, false);
	metrics_free(&m);
}

/* ---- tables: keys and watermarks ---- */

/* The partitions, at every level, of the partitioned flow table t. */
static int table_partitions_load(struct applyd *a, const struct apply_table *t, const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = executor_query(&a->ex,
				       "SELECT n.nspname || '.' || c.relname FROM pg_partition_tree(to_regclass($1)) pt"
				       " JOIN pg_class c ON c.oid = pt.relid JOIN pg_namespace n ON n.oid = c.relnamespace"
				       " WHERE pt.relid <> to_regclass($1)",
				       1, p);
	if (!res)
		return -1;
	struct apply_tables *ts = &a->tables;
	for (int r = 0; r < PQntuples(res); r++) {
		ts->partitions = xrealloc(ts->partitions, (ts->n_partitions + 1) * sizeof *ts->partitions);
		ts->partition_roots = xrealloc(ts->partition_roots, (ts->n_partitions + 1) * sizeof *ts->partition_roots);
		ts->partitions[ts->n_partitions] = xstrdup(PQgetvalue(res, r, 0));
		ts->partition_roots[ts->n_partitions++] = xstrdup(t->name);
	}
	PQclear(res);
	return 0;
}

/* What the planner needs to know of the target table: whether it is
 * partitioned, and its GENERATED ALWAYS identity columns.  A table that
 * does not exist yet is neither (its changes fail as missing_table). */
static int table_target_facts(struct applyd *a, struct apply_table *t, const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = executor_query(&a->ex,
				       "SELECT c.relkind = 'p', a.attname FROM pg_class c LEFT JOIN pg_attribute a"
				       " ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attidentity = 'a'"
				       " WHERE c.oid = to_regclass($1) ORDER BY a.attnum",
				       1, p);
	if (!res)
		return -1;
	for (int r = 0; r < PQntuples(res); r++) {
		t->partitioned = strcmp(PQgetvalue(res, r, 0), "t") == 0;
		if (PQgetisnull(res, r, 1))
			continue;
		t->identity_always = xrealloc(t->identity_always, (size_t)(t->n_identity_always + 1) * sizeof *t->identity_always);
		t->identity_always[t->n_identity_always++] = xstrdup(PQgetvalue(res, r, 1));
	}
	PQclear(res);
	return 0;
}

/* The configured tables, each with the key used to match rows under
 * replica identity full (flow file verify.primary_key, else the target's
 * primary key), what the target's catalogs say of it (table_target_facts)
 * and its snapshot watermark. */
static int tables_load(struct applyd *a)
{
	struct apply_tables *ts = &a->tables;
	apply_tables_free(ts);
	ts->tables = xcalloc(a->cfg->n_tables ? a->cfg->n_tables : 1, sizeof *ts->tables);
	for (size_t i = 0; i < a->cfg->n_tables; i++) {
		const struct table_config *tc = &a->cfg->tables[i];
		struct apply_table *t = &ts->tables[ts->n_tables++];
		t->name = xasprintf("%s.%s", tc->schema, tc->name);
		char *qs = pgconn_quote_ident(a->conn, tc->schema), *qn = pgconn_quote_ident(a->conn, tc->name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		free(qs);
		free(qn);
		if (table_target_facts(a, t, qualified) < 0 ||
		    (t->partitioned && table_partitions_load(a, t, qualified) < 0)) {
			free(qualified);
			return -1;
		}
		if (tc->verify_primary_key) {
			free(qualified);
			char *copy = xstrdup(tc->verify_primary_key), *save = NULL;
			for (char *col = strtok_r(copy, ",", &save); col; col = strtok_r(NULL, ",", &save)) {
				while (*col == ' ')
					col++;
				t->pk = xrealloc(t->pk, (size_t)(t->n_pk + 1) * sizeof *t->pk);
				t->pk[t->n_pk++] = xstrdup(col);
			}
			free(copy);
			continue;
		}
		const char *p[1] = { qualified };
		PGresult *res = executor_query(&a->ex,
					       "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
					       " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = to_regclass($1) AND i.indisprimary"
					       " ORDER BY array_position(i.indkey, a.attnum)",
					       1, p);
		free(qualified);
		if (!res)
			return -1;
		for (int r = 0; r < PQntuples(res); r++) {
			t->pk = xrealloc(t->pk, (size_t)(t->n_pk + 1) * sizeof *t->pk);
			t->pk[t->n_pk++] = xstrdup(PQgetvalue(res, r, 0));
		}
		PQclear(res);
	}
	char **rels;
	uint64_t *lsns;
	int n;
	if (a->ex_ready) {
		/* the watermark query runs outside the pipeline */
		if (PQexitPipelineMode(a->conn) != 1)
			return -1;
	}
	int rc = checkpoint_table_watermarks(a->conn, a->cfg->checkpoint_schema, &a->ids, &rels, &lsns, &n);
	if (a->ex_ready && PQenterPipelineMode(a->conn) != 1)
		return -1;
	if (rc < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < ts->n_tables; k++)
			if (strcmp(ts->tables[k].name, rels[i]) == 0)
				ts->tables[k].watermark_lsn = lsns[i];
		free(rels[i]);
	}
	free(rels);
	free(lsns);
	return 0;
}

/* ---- quarantine ---- */

static struct apply_outcome quarantine(struct applyd *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset,
				       const char *reason, const char *detail, int exit_code)
{
	char lsn[LSN_FORMAT_LEN];
	lsn_format(commit_lsn, lsn);
	if (a->ex_ready && PQpipelineStatus(a->conn) != PQ_PIPELINE_OFF)
		PQexitPipelineMode(a->conn);
	if (checkpoint_quarantine_add(a->conn, a->cfg->checkpoint_schema, &a->ids, xid, commit_lsn, offset, reason,
				      detail) < 0)
		return apply_reconnect();
	a->stats->quarantined++;
	log_error("transaction %u (commit %s, stream offset %" PRIu64 ") quarantined: %s: %s", xid, lsn, offset, reason,
		  detail);
	log_hint("\"trellara quarantine list --config %s\" shows it; repair the target, then \"trellara quarantine replay-ready --config %s --transaction-id %u --commit-lsn %s\"",
		 a->cfg->path, a->cfg->path, xid, lsn);
	return apply_exit(exit_code);
}

static const struct quarantine_entry *replay_entry(struct applyd *a, uint32_t xid, uint64_t commit_lsn)
{
	for (int i = 0; i < a->n_replay; i++)
		if (a->replay[i].xid == xid && a->replay[i].commit_lsn == commit_lsn)
			return &a->replay[i];
	return NULL;
}

/* Marks a replayed quarantined transaction resolved, in the target
 * transaction that applies it. */
static int resolve_quarantine(struct applyd *a, const struct quarantine_entry *q, uint64_t tag)
{
	char id[24];
	snprintf(id, sizeof id, "%" PRId64, q->id);
	char *sql = pgconn_schema_sql(a->conn,
				      "UPDATE @.quarantine SET state = 'resolved', updated_at = now() WHERE id = $1",
				      a->cfg->checkpoint_schema);
	const char *p[1] = { id };
	int rc = executor_exec(&a->ex, sql, 1, p, tag, true, NULL);
	free(sql);
	return rc;
}

/* ---- batches ---- */

static int begin_txn(struct applyd *a, uint64_t offset)
{
	if (a->in_txn)
		return 0;
	a->in_txn = true;
	a->batch_first_offset = offset;
	return executor_control(&a->ex, "BEGIN", offset);
}

/* Writes the checkpoint, commits, then moves the group. */
static int group_flush(struct applyd *a);

/* APPLY_FAILED: the statement error is in a->ex.error. */
static struct apply_outcome commit_batch(struct applyd *a)
{
	bool work = a->in_txn || a->batch_skipped || a->seen_lsn > a->cp.applied_through_lsn ||
		    a->next_offset > a->cp.stream_offset;
	if (!work)
		return apply_ok();
	if (!a->in_txn && begin_txn(a, a->next_offset) < 0)
		goto failed;
	uint64_t applied_through = a->seen_lsn > a->cp.applied_through_lsn ? a->seen_lsn : a->cp.applied_through_lsn;
	char commit_lsn[LSN_FORMAT_LEN], through[LSN_FORMAT_LEN], xid[16], off[24], txns[24], changes[24], dups[24];
	uint64_t last_commit = a->last_commit_lsn > a->cp.last_commit_lsn ? a->last_commit_lsn : a->cp.last_commit_lsn;
	lsn_format(last_commit, commit_lsn);
	lsn_format(applied_through, through);
	snprintf(xid, sizeof xid, "%u", a->last_commit_lsn > a->cp.last_commit_lsn ? a->last_xid : a->cp.last_xid);
	snprintf(off, sizeof off, "%" PRIu64, a->next_offset);
	snprintf(txns, sizeof txns, "%" PRIu64, a->cp.applied_transactions + a->batch_txns);
	snprintf(changes, sizeof changes, "%" PRIu64, a->cp.applied_changes + a->batch_changes);
	snprintf(dups, sizeof dups, "%" PRIu64, a->cp.skipped_duplicates + a->batch_skipped);
	char *qs = pgconn_quote_ident(a->conn, a->cfg->checkpoint_schema);
	char *sql = xasprintf("UPDATE %s.apply_checkpoint SET last_commit_lsn = $1, last_xid = $2, stream_offset = $3,"
			      " applied_through_lsn = $4, applied_transactions = $5, applied_changes = $6,"
			      " skipped_duplicates = $7, updated_at = now()"
			      " WHERE source_id = $8 AND dataset_id = $9 AND consumer_group = $10",
			      qs);
	const char *p[10] = { commit_lsn, xid, off, through, txns, changes, dups, a->ids.source_id, a->ids.dataset_id,
			      a->ids.group };
	int rc = executor_exec(&a->ex, sql, 10, p, a->next_offset, true, NULL);
	free(sql);
	free(qs);
	/* every row change checked (expect_one) before anything commits */
	if (rc < 0 || executor_sync(&a->ex) < 0)
		goto failed;
	fault_point("applyd.before_target_commit");
	if (executor_control(&a->ex, "COMMIT", a->next_offset) < 0 || executor_sync(&a->ex) < 0)
		goto failed;
	fault_point("applyd.after_target_commit_before_group_ack");
	a->in_txn = false;
	a->cp.last_commit_lsn = last_commit;
	a->cp.last_xid = (uint32_t)strtoul(xid, NULL, 10);
	a->cp.stream_offset = a->next_offset;
	a->cp.applied_through_lsn = applied_through;
	a->cp.applied_transactions += a->batch_txns;
	a->cp.applied_changes += a->batch_changes;
	a->cp.skipped_duplicates += a->batch_skipped;
	a->stats->transactions += a->batch_txns;
	a->stats->changes += a->batch_changes;
	a->stats->skipped_duplicates += a->batch_skipped;
	a->stats->skipped_by_watermark += a->batch_filtered;
	a->stats->batches++;
	a->progress_txns += a->batch_txns;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->transient_retries = 0;
	/* The group only lags the target's checkpoint (the truth for dedup):
	 * written at most every 200 ms under load, and when idle or stopping. */
	a->group_pending = true;
	if (mono_us() - a->last_group_write_us >= 200000 && group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	return apply_ok();
failed:
	a->in_txn = false;
	return apply_failed(); /* the caller looks at a->ex.error */
}

static int group_flush(struct applyd *a)
{
	if (!a->group_pending)
		return 0;
	if (stream_group_set(a->cfg->stream_path, a->cfg->consumer_group, a->cp.stream_offset) != STREAM_OK)
		return -1;
	a->group_pending = false;
	a->last_group_write_us = mono_us();
	return 0;
}

static struct apply_outcome handle_failure(struct applyd *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset);

/* Commit what is open; a failure goes to handle_failure (culprit hunt,
 * quarantine or reconnect). */
static struct apply_outcome commit_open_batch(struct applyd *a)
{
	uint64_t keep = a->next_offset;
	struct apply_outcome rc = commit_batch(a);
	if (rc.status == APPLY_FAILED)
		return handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
	return rc;
}

/* Drop the open batch and rewind the reader to where it started. */
static struct apply_outcome rewind_batch(struct applyd *a, uint64_t to)
{
	a->in_txn = false;
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	a->last_commit_lsn = a->cp.last_commit_lsn;
	a->seen_lsn = a->cp.applied_through_lsn;
	a->next_offset = to;
	memset(&a->ex.error, 0, sizeof a->ex.error);
	return stream_reader_seek(a->reader, to) == STREAM_OK ? apply_ok() : apply_exit(EXIT_DATAERR);
}

/* Changes to a table outside dataset.tables are not applied; say so
 * once per table and process. */
static void warn_unconfigured(struct applyd *a, const struct env_relation *r)
{
	char *name = xasprintf("%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	for (size_t i = 0; i < a->n_unconfigured; i++)
		if (strcmp(a->unconfigured[i], name) == 0) {
			free(name);
			return;
		}
	log_warn("changes to %s are not applied: the table is not in dataset.tables of %s", name, a->cfg->path);
	a->unconfigured = xrealloc(a->unconfigured, (a->n_unconfigured + 1) * sizeof *a->unconfigured);
	a->unconfigured[a->n_unconfigured++] = name;
}

/* Apply the changes of one envelope inside the open target transaction.
 * APPLY_FAILED: the statement error is in a->ex.error. */
static struct apply_outcome send_changes(struct applyd *a, const uint8_t *payload, size_t len, uint64_t offset,
					 uint64_t commit_lsn, uint64_t *changes, uint64_t *decoded)
{
	struct env_decoder d;
	struct apply_outcome rc = apply_ok();
	if (env_decode_begin(&d, payload, len) < 0) {
		log_error("stream offset %" PRIu64 ": %s", offset, d.error);
		env_decoder_free(&d);
		return apply_exit(EXIT_DATAERR);
	}
	uint32_t nrel = d.header.n_relations;
	struct plan_relation *prel = xcalloc(nrel ? nrel : 1, sizeof *prel);
	bool **keys = xcalloc(nrel ? nrel : 1, sizeof *keys);
	bool **identity = xcalloc(nrel ? nrel : 1, sizeof *identity);
	enum apply_relation_verdict *verdict = xcalloc(nrel ? nrel : 1, sizeof *verdict);
	for (uint32_t i = 0; i < nrel; i++) {
		const struct env_relation *r = &d.header.relations[i];
		prel[i].rel = r;
		struct apply_table *t;
		const char *root;
		verdict[i] = apply_core_relation(&a->tables, r, commit_lsn, &t, &root);
		if (verdict[i] == APPLY_RELATION_UNPUBLISHED_PARTITION) {
			log_error("stream offset %" PRIu64 ": changes to %.*s.%.*s, a partition of %s, arrive under the partition's own name: the publication does not publish via the partition root",
				  offset, (int)r->schema_len, r->schema, (int)r->name_len, r->name, root);
			log_hint("ALTER PUBLICATION %s SET (publish_via_partition_root = true) on the source (\"trellara check --config %s\" checks it), then \"trellara reseed --config %s --table %s\": the changes sent so far under the partition's name are not applied",
				 a->cfg->publication, a->cfg->path, a->cfg->path, root);
			rc = apply_exit(EXIT_CONFIG);
			break;
		}
		if (verdict[i] == APPLY_RELATION_UNCONFIGURED)
			continue;
		keys[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **keys);
		prel[i].key = apply_core_key_columns(t, r, keys[i]) ? keys[i] : NULL;
		prel[i].partitioned = t->partitioned;
		if (t->n_identity_always) {
			identity[i] = xcalloc(r->n_columns ? r->n_columns : 1, sizeof **identity);
			apply_core_identity_always(t, r, identity[i]);
			prel[i].identity_always = identity[i];
		}
	}
	const struct env_change *c;
	int step = 0;
	char err[512];
	uint32_t *kept = NULL;
	while (apply_is_ok(rc) && (step = env_decode_next(&d, &c)) == 1) {
		if (decoded)
			(*decoded)++;
		struct env_change filtered;
		if (c->op == ENV_INSERT || c->op == ENV_UPDATE || c->op == ENV_DELETE) {
			if (verdict[c->relation] == APPLY_RELATION_UNCONFIGURED) {
				warn_unconfigured(a, &d.header.relations[c->relation]);
				a->stats->skipped_unconfigured++;
				continue;
			}
			if (verdict[c->relation] == APPLY_RELATION_BELOW_WATERMARK) {
				a->batch_filtered++;
				continue;
			}
		} else if (c->op == ENV_TRUNCATE) {
			/* only the tables of this flow, and only above their watermarks */
			kept = xrealloc(kept, (c->n_truncate ? c->n_truncate : 1) * sizeof *kept);
			uint32_t n_kept = apply_core_truncate_filter(verdict, c->truncate_relations, c->n_truncate, kept);
			if (n_kept == 0) {
				a->batch_filtered++;
				continue;
			}
			filtered = *c;
			filtered.n_truncate = n_kept;
			filtered.truncate_relations = kept;
			c = &filtered;
		}
		int planned = plan_change(a->cfg->checkpoint_schema, prel, nrel, c, a->single_mode, &a->stmt, err, sizeof err);
		if (planned < 0) {
			/* a change we cannot express: the transaction cannot apply.
			 * Roll back what was sent of it, so that no result is left
			 * pending in the pipeline (an earlier statement's own error
			 * comes first). */
			executor_control(&a->ex, "ROLLBACK", offset);
			executor_sync(&a->ex);
			if (!a->ex.error.failed) {
				snprintf(a->ex.error.message, sizeof a->ex.error.message, "%s", err);
				snprintf(a->ex.error.sqlstate, sizeof a->ex.error.sqlstate, "%s", SQLSTATE_UNPLANNABLE);
				a->ex.error.failed = true;
				a->ex.error.tag = offset;
			}
			rc = apply_failed();
			break;
		}
		if (planned == 1)
			continue;
		if (executor_exec(&a->ex, (const char *)a->stmt.sql.data, (int)a->stmt.n_params, a->stmt.values, offset,
				  a->stmt.expect_one, a->stmt.what.len ? (const char *)a->stmt.what.data : NULL) < 0) {
			rc = apply_failed();
			break;
		}
		(*changes)++;
	}
	if (step < 0 && apply_is_ok(rc)) {
		log_error("stream offset %" PRIu64 ": %s", offset, d.error);
		rc = apply_exit(EXIT_DATAERR);
	}
	for (uint32_t i = 0; i < nrel; i++) {
		free(keys[i]);
		free(identity[i]);
	}
	free(kept);
	free(keys);
	free(identity);
	free(verdict);
	free(prel);
	env_decoder_free(&d);
	return rc;
}

/* A batch or a single transaction failed: decide what to do. */
static struct apply_outcome handle_failure(struct applyd *a, uint32_t xid, uint64_t commit_lsn, uint64_t offset)
{
	struct executor_error err = a->ex.error;
	switch (apply_core_on_failure(err.connection_lost, err.sqlstate, a->single_mode)) {
	case APPLY_FAILURE_RECONNECT:
		log_warn("target connection lost: %s", err.message);
		return apply_reconnect();
	case APPLY_FAILURE_RETRY:
		snprintf(a->last_transient_sqlstate, sizeof a->last_transient_sqlstate, "%s", err.sqlstate);
		log_warn("transient target error (SQLSTATE %s: %s): transaction %u rolled back, to be applied again", err.sqlstate,
			 err.message, xid);
		return apply_retry();
	case APPLY_FAILURE_ONE_AT_A_TIME:
		/* find the culprit: one source transaction per target transaction */
		log_warn("a batch of %" PRIu64 " transactions failed (%s: %s); retrying them one at a time", a->batch_txns,
			 err.sqlstate, err.message);
		a->single_mode = true;
		a->single_until = a->next_offset;
		return rewind_batch(a, a->batch_first_offset);
	case APPLY_FAILURE_QUARANTINE:
		break;
	}
	char detail[1200];
	snprintf(detail, sizeof detail, "SQLSTATE %s: %s", err.sqlstate, err.message);
	return quarantine(a, xid, commit_lsn, offset, apply_core_quarantine_reason(err.sqlstate), detail, EXIT_NEGATIVE);
}

static struct apply_outcome fence_check(struct applyd *a, uint64_t commit_lsn, uint64_t frame_offset, bool *hold);
static int tables_load(struct applyd *a);

static struct apply_outcome apply_txn_frame(struct applyd *a, const struct stream_frame *f)
{
	struct env_frame_summary s;
	char err[256];
	if (env_frame_summary(FRAME_TXN, f->payload, f->header.payload_length, &s, err, sizeof err) < 0) {
		log_error("stream offset %" PRIu64 " (%s byte %" PRIu64 "): %s", f->header.offset, f->segment, f->position, err);
		return apply_exit(EXIT_DATAERR);
	}
	if (s.source_id_len != strlen(a->cfg->source_id) || memcmp(s.source_id, a->cfg->source_id, s.source_id_len) != 0) {
		log_error("stream offset %" PRIu64 ": transaction of source \"%.*s\" in the stream of source \"%s\"",
			  f->header.offset, (int)s.source_id_len, s.source_id, a->cfg->source_id);
		return apply_exit(EXIT_DATAERR);
	}
	if (apply_core_is_duplicate(s.commit_lsn, a->last_commit_lsn)) {
		a->batch_skipped++;
		a->next_offset = f->header.offset + 1;
		return apply_ok();
	}
	bool hold = false;
	struct apply_outcome rc = fence_check(a, s.commit_lsn, f->header.offset, &hold);
	if (!apply_is_ok(rc) || hold)
		return rc;
	const struct quarantine_entry *replay = replay_entry(a, s.xid, s.commit_lsn);
	bool alone = replay != NULL || a->single_mode;
	if (alone && a->in_txn) {
		/* what came before goes in its own target transaction */
		uint64_t keep = a->next_offset;
		rc = commit_batch(a);
		if (rc.status == APPLY_FAILED)
			return handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (begin_txn(a, f->header.offset) < 0)
		return handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
	uint64_t changes = 0;
	rc = send_changes(a, f->payload, f->header.payload_length, f->header.offset, s.commit_lsn, &changes, NULL);
	if (rc.status == APPLY_EXIT)
		return rc;
	a->batch_txns++;
	a->batch_changes += changes;
	a->last_commit_lsn = s.commit_lsn;
	a->last_xid = s.xid;
	if (s.end_lsn > a->seen_lsn)
		a->seen_lsn = s.end_lsn;
	a->next_offset = f->header.offset + 1;
	if (replay && apply_is_ok(rc))
		rc = resolve_quarantine(a, replay, f->header.offset) < 0 ? apply_failed() : apply_ok();
	if (apply_is_ok(rc) && (alone || a->batch_txns >= a->cfg->apply_batch_transactions))
		rc = commit_batch(a);
	if (rc.status == APPLY_FAILED)
		return handle_failure(a, s.xid, s.commit_lsn, f->header.offset);
	if (apply_is_ok(rc) && replay) {
		log_info("quarantined transaction %u replayed and resolved", s.xid);
		replay = NULL;
	}
	if (a->single_mode && a->next_offset >= a->single_until && !a->in_txn) {
		a->single_mode = false;
		log_info("the failed batch applied one transaction at a time without a culprit; back to batches");
	}
	return rc;
}

/* ---- chunked transactions ---- */

static struct apply_outcome chunk_fail(struct applyd *a, const char *detail)
{
	uint32_t xid = a->chunk.xid;
	uint64_t lsn = a->chunk.commit_lsn, first = a->chunk.first_offset;
	if (a->in_txn) {
		executor_control(&a->ex, "ROLLBACK", 0);
		executor_sync(&a->ex);
		a->in_txn = false;
	}
	chunk_set_reset(&a->chunk);
	return quarantine(a, xid, lsn, first, "chunk_integrity", detail, EXIT_DATAERR);
}

/* The set in progress will not complete here: roll it back.  What
 * follows decides whether that is a replay (fine) or a gap (not). */
static struct apply_outcome chunk_abandon(struct applyd *a, uint64_t next_lsn, const char *what)
{
	if (!a->chunk.active)
		return apply_ok();
	if (chunk_set_abandon_is_gap(&a->chunk, next_lsn)) {
		char detail[256];
		snprintf(detail, sizeof detail, "incomplete chunk set (%u chunks, no commit marker) followed by %s", a->chunk.next_index,
			 what);
		return chunk_fail(a, detail);
	}
	log_warn("transaction %u: incomplete chunk set (%u chunks) discarded: %s", a->chunk.xid, a->chunk.next_index, what);
	if (a->in_txn) {
		executor_control(&a->ex, "ROLLBACK", 0);
		executor_sync(&a->ex);
		memset(&a->ex.error, 0, sizeof a->ex.error);
		a->in_txn = false;
		a->batch_txns = a->batch_changes = 0;
	}
	chunk_set_reset(&a->chunk);
	return apply_ok();
}

static struct apply_outcome apply_chunk_frame(struct applyd *a, const struct stream_frame *f)
{
	struct env_frame_summary s;
	char err[256];
	uint64_t offset = f->header.offset;
	if (env_frame_summary(f->header.type, f->payload, f->header.payload_length, &s, err, sizeof err) < 0) {
		log_error("stream offset %" PRIu64 " (%s byte %" PRIu64 "): %s", offset, f->segment, f->position, err);
		return apply_exit(EXIT_DATAERR);
	}
	if (s.source_id_len != strlen(a->cfg->source_id) || memcmp(s.source_id, a->cfg->source_id, s.source_id_len) != 0) {
		log_error("stream offset %" PRIu64 ": frame of source \"%.*s\" in the stream of source \"%s\"", offset,
			  (int)s.source_id_len, s.source_id, a->cfg->source_id);
		return apply_exit(EXIT_DATAERR);
	}
	struct chunk_set *ch = &a->chunk;
	int type = f->header.type;
	char detail[256];
	if (type == FRAME_CHUNK) {
		bool replay;
		if (chunk_set_interrupted(ch, s.xid, s.commit_lsn, s.chunk_index, &replay)) {
			if (replay) {
				log_warn("transaction %u: chunk set starts again at offset %" PRIu64 " (a replay): the incomplete one is discarded",
					 s.xid, offset);
				struct apply_outcome rc = chunk_abandon(a, 0, "its replay");
				if (!apply_is_ok(rc))
					return rc;
			} else {
				struct apply_outcome rc = chunk_abandon(a, s.commit_lsn, "another transaction's chunks");
				if (!apply_is_ok(rc))
					return rc;
			}
		}
		if (!ch->active) {
			if (!chunk_set_check_start(ch, s.xid, s.commit_lsn, offset, s.chunk_index, detail, sizeof detail))
				return chunk_fail(a, detail);
			/* what came before commits on its own */
			if (a->in_txn) {
				struct apply_outcome rc = commit_open_batch(a);
				if (!apply_is_ok(rc))
					return rc;
			}
			chunk_set_begin(ch, s.xid, s.commit_lsn, s.end_lsn, offset, a->last_commit_lsn);
			if (!ch->duplicate) {
				bool hold = false;
				struct apply_outcome rc = fence_check(a, s.commit_lsn, offset, &hold);
				if (!apply_is_ok(rc) || hold) {
					chunk_set_reset(&a->chunk);
					return rc;
				}
				if (begin_txn(a, offset) < 0)
					return handle_failure(a, s.xid, s.commit_lsn, offset);
			}
		}
		if (!chunk_set_check_index(ch, s.chunk_index, detail, sizeof detail))
			return chunk_fail(a, detail);
		uint32_t crc = crc32c(0, f->payload, f->header.payload_length);
		uint64_t changes = 0, decoded = 0;
		if (!ch->duplicate) {
			struct apply_outcome rc = send_changes(a, f->payload + 4, f->header.payload_length - 4, offset,
							       s.commit_lsn, &changes, &decoded);
			if (rc.status == APPLY_EXIT)
				return rc;
			if (rc.status == APPLY_FAILED) {
				a->single_mode = true; /* a chunked transaction is always alone */
				return handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
			}
			/* keep memory bounded: results are read as chunks go */
			if (executor_sync(&a->ex) < 0) {
				a->single_mode = true;
				return handle_failure(a, s.xid, s.commit_lsn, ch->first_offset);
			}
		} else {
			/* count them anyway: the manifest check applies to duplicates too */
			struct env_decoder d;
			const struct env_change *c;
			if (env_decode_begin(&d, f->payload + 4, f->header.payload_length - 4) == 0)
				while (env_decode_next(&d, &c) == 1)
					decoded++;
			env_decoder_free(&d);
		}
		chunk_set_add(ch, crc, (uint32_t)decoded, changes);
		a->next_offset = offset + 1;
		return apply_ok();
	}
	if (!chunk_set_owns(ch, s.xid, s.commit_lsn, offset))
		return chunk_fail(a, type == FRAME_MANIFEST ? "manifest without its chunks" : "commit marker without its chunks");
	if (type == FRAME_MANIFEST) {
		struct env_manifest m;
		if (env_decode_manifest(f->payload, f->header.payload_length, &m, err, sizeof err) < 0)
			return chunk_fail(a, err);
		bool ok = chunk_set_check_manifest(ch, &m, crc32c(0, f->payload, f->header.payload_length), detail,
						   sizeof detail);
		env_manifest_free(&m);
		if (!ok)
			return chunk_fail(a, detail);
		a->next_offset = offset + 1;
		return apply_ok();
	}
	/* commit marker */
	if (!chunk_set_check_marker(ch, s.manifest_crc, s.chunk_count, detail, sizeof detail))
		return chunk_fail(a, detail);
	a->next_offset = offset + 1;
	if (ch->duplicate) {
		a->batch_skipped++;
		chunk_set_reset(&a->chunk);
		return apply_ok();
	}
	a->batch_txns++;
	a->batch_changes += ch->changes;
	a->last_commit_lsn = ch->commit_lsn;
	a->last_xid = ch->xid;
	if (ch->end_lsn > a->seen_lsn)
		a->seen_lsn = ch->end_lsn;
	uint32_t xid = ch->xid;
	uint64_t lsn = ch->commit_lsn, first = ch->first_offset;
	chunk_set_reset(&a->chunk);
	const struct quarantine_entry *replay = replay_entry(a, xid, lsn);
	if (replay && resolve_quarantine(a, replay, offset) < 0)
		return handle_failure(a, xid, lsn, first);
	struct apply_outcome rc = commit_batch(a);
	if (rc.status == APPLY_FAILED) {
		a->single_mode = true;
		return handle_failure(a, xid, lsn, first);
	}
	return rc;
}

/* ---- fences (DESIGN §9) ---- */

static struct apply_outcome fence_refresh(struct applyd *a)
{
	char state[16];
	if (PQexitPipelineMode(a->conn) != 1)
		return apply_reconnect();
	int rc = checkpoint_fence_get(a->conn, a->cfg->checkpoint_schema, &a->ids, &a->fence_present, &a->fence_lsn, state,
				      sizeof state);
	if (PQenterPipelineMode(a->conn) != 1)
		return apply_reconnect();
	return rc < 0 ? apply_reconnect() : apply_ok();
}

/* Hold: everything before commit_lsn is committed; report "held" and
 * wait until the fence is released.  The caller re-reads its frame. */
static struct apply_outcome fence_hold(struct applyd *a)
{
	if (PQexitPipelineMode(a->conn) != 1)
		return apply_reconnect();
	char l[LSN_FORMAT_LEN];
	log_info("held at fence %s (applied through %s)", lsn_format(a->fence_lsn, l),
		 lsn_format(a->cp.applied_through_lsn, (char[LSN_FORMAT_LEN]){ 0 }));
	uint64_t held_lsn = a->fence_lsn;
	int rc = checkpoint_fence_mark_held(a->conn, a->cfg->checkpoint_schema, &a->ids, a->cp.applied_through_lsn);
	while (rc == 0 && !*a->o->stop) {
		char state[16];
		rc = checkpoint_fence_get(a->conn, a->cfg->checkpoint_schema, &a->ids, &a->fence_present, &a->fence_lsn, state,
					  sizeof state);
		if (rc < 0 || !a->fence_present)
			break;
		if (strcmp(state, "requested") == 0) {
			/* a new fence replaced ours: hold for it here, or apply up to it */
			if (a->fence_lsn > held_lsn)
				break;
			log_info("held at fence %s", lsn_format(a->fence_lsn, l));
			rc = checkpoint_fence_mark_held(a->conn, a->cfg->checkpoint_schema, &a->ids, a->cp.applied_through_lsn);
			held_lsn = a->fence_lsn;
		}
		notify_watchdog_tick(&a->watchdog);
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (PQenterPipelineMode(a->conn) != 1 || rc < 0)
		return apply_reconnect();
	if (!a->fence_present || a->fence_lsn > held_lsn) {
		log_info("fence released: applying again");
		/* a reseed may have moved table watermarks while we held */
		if (tables_load(a) < 0)
			return apply_reconnect();
	}
	return apply_ok();
}

/* Before applying a transaction that commits at or after the fence:
 * commit what is open, hold, and have the caller read the frame again. */
static struct apply_outcome fence_check(struct applyd *a, uint64_t commit_lsn, uint64_t frame_offset, bool *hold)
{
	*hold = false;
	if (!a->in_txn) {
		struct apply_outcome rc = fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (!a->fence_present || commit_lsn < a->fence_lsn)
		return apply_ok();
	*hold = true;
	if (a->in_txn || a->batch_skipped) {
		struct apply_outcome rc = commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	struct apply_outcome rc = fence_hold(a);
	if (!apply_is_ok(rc))
		return rc;
	if (stream_reader_seek(a->reader, frame_offset) != STREAM_OK)
		return apply_exit(EXIT_DATAERR);
	a->next_offset = frame_offset;
	return apply_ok();
}

/* ---- the loop ---- */

static struct apply_outcome idle_duties(struct applyd *a)
{
	int64_t now = mono_us();
	if (a->last_progress_us == 0)
		a->last_progress_us = now;
	if (group_flush(a) < 0)
		return apply_exit(EXIT_CANTCREAT);
	/* An open chunk set is one target transaction that commits only
	 * after its commit marker: at the end of the stream between two of
	 * its chunks nothing commits (DESIGN: never half a transaction). */
	if (a->chunk.active) {
		/* wait for the rest of the set */
	} else if (a->in_txn || a->batch_skipped) {
		struct apply_outcome rc = commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	} else if (a->seen_lsn > a->cp.applied_through_lsn &&
		   now - a->last_idle_checkpoint_us >= 1000000) {
		a->last_idle_checkpoint_us = now;
		struct apply_outcome rc = commit_open_batch(a);
		if (!apply_is_ok(rc))
			return rc;
	}
	if (now - a->last_progress_us >= 10000000) {
		if (a->progress_txns)
			log_info("applied %" PRIu64 " transactions in the last %.0f s (%" PRIu64 " in all, %" PRIu64
				 " duplicates skipped)",
				 a->progress_txns, (now - a->last_progress_us) / 1e6, a->cp.applied_transactions,
				 a->cp.skipped_duplicates);
		a->progress_txns = 0;
		a->last_progress_us = now;
	}
	/* a fence the applier already stands at: hold there */
	if (!a->chunk.active && !a->in_txn) {
		struct apply_outcome rc = fence_refresh(a);
		if (!apply_is_ok(rc))
			return rc;
		if (a->fence_present && a->cp.applied_through_lsn >= a->fence_lsn) {
			rc = fence_hold(a);
			if (!apply_is_ok(rc))
				return rc;
		}
	}
	return apply_ok();
}

/* Until stopped (APPLY_OK) or anything else than a frame applied. */
static struct apply_outcome apply_loop(struct applyd *a)
{
	for (;;) {
		notify_watchdog_tick(&a->watchdog);
		write_metrics(a, false);
		if (*a->o->stop) {
			notify_send("STOPPING=1");
			if (a->chunk.active)
				return apply_is_ok(chunk_abandon(a, 0, "shutdown")) ? apply_ok() : apply_exit(EXIT_DATAERR);
			uint64_t keep = a->next_offset;
			struct apply_outcome rc = commit_batch(a);
			if (rc.status == APPLY_FAILED) {
				struct apply_outcome failed = handle_failure(a, a->last_xid, a->last_commit_lsn, keep);
				if (failed.status == APPLY_RECONNECT || failed.status == APPLY_RETRY) {
					/* rolled back: the next start applies it again */
					log_error("the last batch could not commit while stopping (target unavailable): it was rolled back and is applied again at the next start");
					return apply_exit(EXIT_UNAVAILABLE);
				}
				return apply_exit(EXIT_NEGATIVE);
			}
			if (apply_is_ok(rc) && group_flush(a) < 0)
				rc = apply_exit(EXIT_CANTCREAT);
			return rc;
		}
		struct stream_frame f;
		int st = stream_reader_next(a->reader, &f);
		if (st == STREAM_END) {
			struct apply_outcome rc = idle_duties(a);
			if (!apply_is_ok(rc))
				return rc;
			stream_reader_wait(a->reader, 200);
			continue;
		}
		if (st != STREAM_OK)
			return apply_exit(st == STREAM_ECORRUPT ? EXIT_DATAERR : EXIT_CANTCREAT);
		struct apply_outcome rc = apply_ok();
		switch (f.header.type) {
		case FRAME_TXN:
			if (a->chunk.active) {
				struct env_frame_summary s;
				char err[256];
				if (env_frame_summary(FRAME_TXN, f.payload, f.header.payload_length, &s, err, sizeof err) == 0 &&
				    !apply_is_ok(rc = chunk_abandon(a, s.commit_lsn, "a later transaction")))
					return rc;
			}
			rc = apply_txn_frame(a, &f);
			break;
		case FRAME_CHUNK:
		case FRAME_MANIFEST:
		case FRAME_COMMIT_MARKER:
			rc = apply_chunk_frame(a, &f);
			break;
		case FRAME_WATERMARK: {
			struct env_frame_summary s;
			char err[256];
			if (env_frame_summary(FRAME_WATERMARK, f.payload, f.header.payload_length, &s, err, sizeof err) < 0) {
				log_error("stream offset %" PRIu64 ": %s", f.header.offset, err);
				return apply_exit(EXIT_DATAERR);
			}
			if (a->chunk.active && !apply_is_ok(rc = chunk_abandon(a, s.lsn, "a watermark past its commit")))
				return rc;
			if (s.lsn > a->seen_lsn)
				a->seen_lsn = s.lsn;
			a->next_offset = f.header.offset + 1;
			break;
		}
		case FRAME_DDL:
			log_info("stream offset %" PRIu64 ": schema change on the source (ddl frame); applyd applies row changes only",
				 f.header.offset);
			if (!a->chunk.active)
				a->next_offset = f.header.offset + 1;
			break;
		default:
			log_error("stream offset %" PRIu64 ": unknown frame type %u", f.header.offset, f.header.type);
			return apply_exit(EXIT_DATAERR);
		}
		if (!apply_is_ok(rc))
			return rc;
	}
}

/* Apply as PostgreSQL's own apply worker does: with the replica role the
 * target's ordinary triggers and its foreign-key checks and actions do
 * not fire (the source already ran them, and the stream carries what
 * they did); ENABLE REPLICA and ENABLE ALWAYS triggers do.  A role that
 * may not set it fails closed. */
static struct apply_outcome set_replica_role(struct applyd *a)
{
	PGresult *res = PQexec(a->conn, "SET session_replication_role = replica");
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		return apply_ok();
	}
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	struct apply_outcome rc = apply_reconnect();
	if (state && strcmp(state, "42501") == 0) {
		char *role = pgconn_quote_ident(a->conn, PQuser(a->conn));
		log_error("target: role %s may not set session_replication_role, which applyd needs so that target triggers and foreign-key actions do not fire: %s",
			  role, msg ? msg : "permission denied");
		log_hint("as a superuser on the target: GRANT SET ON PARAMETER session_replication_role TO %s (PostgreSQL 15 and later; before 15 the role must be a superuser); \"trellara check --config %s\" checks it",
			 role, a->cfg->path);
		free(role);
		rc = apply_exit(EXIT_CONFIG);
	} else {
		log_error("target: cannot set session_replication_role: %s", msg ? msg : PQerrorMessage(a->conn));
	}
	PQclear(res);
	return rc;
}

/* The checkpoint's offsets belong to one stream instance (its id in the
 * stream's meta).  Binds an unbound checkpoint; refuses another instance
 * unless nothing can be missing between the two (the target applied past
 * where the new stream begins, or the target's copies cover it), and then
 * reads the new stream from its start (dedup by commit LSN).  Returns
 * APPLY_OK, APPLY_EXIT or APPLY_RECONNECT. */
static struct apply_outcome bind_stream(struct applyd *a, const struct stream_meta *meta)
{
	struct apply_checkpoint *cp = &a->cp;
	const char *path = a->cfg->stream_path;
	if (!meta->stream_id)
		return apply_ok(); /* no writer opened it since streams had ids */
	if (cp->stream_id[0] && strcmp(cp->stream_id, meta->stream_id) == 0)
		return apply_ok();
	if (cp->slot_name[0] && meta->slot && strcmp(cp->slot_name, meta->slot) != 0) {
		log_error("the target's checkpoint of group \"%s\" was applied from replication slot \"%s\", but stream \"%s\" follows slot \"%s\"",
			  a->cfg->consumer_group, cp->slot_name, path, meta->slot);
		log_hint("point source.slot and stream.path back at the slot and stream this target was applied from");
		return apply_exit(EXIT_CONFIG);
	}
	uint32_t timeline = meta->timeline ? (uint32_t)strtoul(meta->timeline, NULL, 10) : 0;
	bool progress = cp->stream_offset || cp->applied_through_lsn || cp->last_commit_lsn;
	if (!cp->stream_id[0] || !progress) {
		/* first binding: a new checkpoint, or one written before
		 * checkpoints named their stream (its offsets are taken to be
		 * this stream's) */
		if (checkpoint_bind_stream(a->conn, a->cfg->checkpoint_schema, &a->ids, meta->stream_id, meta->slot,
					   meta->system_identifier, timeline, false) < 0)
			return apply_reconnect();
		snprintf(cp->stream_id, sizeof cp->stream_id, "%s", meta->stream_id);
		log_info("checkpoint of group \"%s\" bound to stream \"%s\" (id %s)", a->cfg->consumer_group, path,
			 meta->stream_id);
		return apply_ok();
	}
	if (!meta->slot) {
		log_info("stream \"%s\" (id %s) is not bound to a slot yet: waiting for capture", path, meta->stream_id);
		return apply_reconnect();
	}
	uint64_t start = 0, covered = 0;
	bool known = meta->start_lsn && lsn_parse(meta->start_lsn, &start);
	char **rels;
	uint64_t *lsns;
	int n;
	if (checkpoint_table_watermarks(a->conn, a->cfg->checkpoint_schema, &a->ids, &rels, &lsns, &n) < 0)
		return apply_reconnect();
	for (int i = 0; i < n; i++) {
		if (i == 0 || lsns[i] < covered)
			covered = lsns[i];
		free(rels[i]);
	}
	free(rels);
	free(lsns);
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN], l3[LSN_FORMAT_LEN];
	if (!known || (cp->applied_through_lsn < start && covered < start)) {
		log_error("the target's checkpoint of group \"%s\" (offset %" PRIu64 ", applied through %s) belongs to stream instance %s, but stream \"%s\" is instance %s, starting at %s: its offsets are not the checkpoint's, and the changes in between would be skipped",
			  a->cfg->consumer_group, cp->stream_offset, lsn_format(cp->applied_through_lsn, l1), cp->stream_id,
			  path, meta->stream_id, known ? lsn_format(start, l2) : "an unknown position");
		log_hint("restore the stream directory the target was applied from, or copy every table again (\"trellara snapshot --config %s --force\"); applyd then reads the new stream from its start",
			 a->cfg->path);
		return apply_exit(EXIT_DATAERR);
	}
	if (checkpoint_bind_stream(a->conn, a->cfg->checkpoint_schema, &a->ids, meta->stream_id, meta->slot,
				   meta->system_identifier, timeline, true) < 0)
		return apply_reconnect();
	log_warn("stream \"%s\" was replaced (instance %s, was %s); it starts at %s, and the target is applied through %s with copies through %s: reading it from its start, skipping what is applied by commit LSN",
		 path, meta->stream_id, cp->stream_id, lsn_format(start, l1), lsn_format(cp->applied_through_lsn, l2),
		 lsn_format(covered, l3));
	snprintf(cp->stream_id, sizeof cp->stream_id, "%s", meta->stream_id);
	cp->stream_offset = 0;
	return apply_ok();
}

static struct apply_outcome connect_target(struct applyd *a)
{
	a->conn = pgconn_connect(a->cfg->target_database_url, PGCONN_NORMAL, "trellara-applyd", "target");
	if (!a->conn)
		return apply_reconnect();
	struct apply_outcome role_rc = set_replica_role(a);
	if (!apply_is_ok(role_rc))
		return role_rc;
	/* idle_in_transaction_session_timeout off: a chunk set holds its
	 * target transaction open while capture is still writing it */
	if (pgconn_command(a->conn, "SET synchronous_commit = on") < 0 ||
	    pgconn_command(a->conn, "SET idle_in_transaction_session_timeout = 0") < 0 ||
	    checkpoint_migrate(a->conn, a->cfg->checkpoint_schema) < 0)
		return apply_reconnect();
	/* one applier per flow and group */
	char *key = xasprintf("trellara.applyd.%s.%s", a->flow, a->cfg->consumer_group);
	const char *p[1] = { key };
	PGresult *res = pgconn_query(a->conn, "SELECT pg_try_advisory_lock(hashtext($1))", 1, p);
	free(key);
	if (!res)
		return apply_reconnect();
	bool locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!locked) {
		log_error("flow \"%s\" group \"%s\" is held on this target by another trellara-applyd, or by a trellara-snapshot run copying its tables",
			  a->flow, a->cfg->consumer_group);
		log_hint("one applier per flow and group; a snapshot holds the flow until its copy ends: start applyd afterwards");
		return apply_exit(EXIT_TEMPFAIL);
	}
	struct stream_meta meta;
	if (stream_meta_read(a->cfg->stream_path, &meta) < 0)
		return apply_exit(EXIT_DATAERR);
	struct apply_outcome rc = apply_ok();
	if (meta.system_identifier) {
		int identity = checkpoint_check_source_identity(a->conn, a->cfg->checkpoint_schema, a->cfg->source_id,
								meta.system_identifier, meta.database ? meta.database : "");
		if (identity == 1)
			rc = apply_exit(EXIT_CONFIG);
		else if (identity < 0)
			rc = apply_reconnect();
	}
	if (apply_is_ok(rc) && checkpoint_load(a->conn, a->cfg->checkpoint_schema, &a->ids, &a->cp) < 0)
		rc = apply_reconnect();
	if (apply_is_ok(rc))
		rc = bind_stream(a, &meta);
	stream_meta_free(&meta);
	if (!apply_is_ok(rc))
		return rc;
	/* a quarantined transaction stops the flow until an operator acts */
	struct quarantine_entry *q;
	int nq;
	if (checkpoint_quarantine_list(a->conn, a->cfg->checkpoint_schema, &a->ids, true, &q, &nq) < 0)
		return apply_reconnect();
	free(a->replay);
	a->replay = NULL;
	a->n_replay = 0;
	for (int i = 0; i < nq; i++) {
		if (strcmp(q[i].state, "quarantined") == 0) {
			char l[LSN_FORMAT_LEN];
			log_error("transaction %u (commit %s) is quarantined (%s): refusing to apply past it", q[i].xid,
				  lsn_format(q[i].commit_lsn, l), q[i].reason);
			log_hint("see \"trellara quarantine list --config %s\"", a->cfg->path);
			free(q);
			return apply_exit(EXIT_NEGATIVE);
		}
	}
	a->replay = q;
	a->n_replay = nq;
	if (executor_init(&a->ex, a->conn) < 0)
		return apply_reconnect();
	a->ex_ready = true;
	if (tables_load(a) < 0)
		return apply_reconnect();
	return apply_ok();
}

static void disconnect_target(struct applyd *a)
{
	if (a->ex_ready)
		executor_free(&a->ex);
	a->ex_ready = false;
	PQfinish(a->conn);
	a->conn = NULL;
	a->in_txn = false;
}

static struct apply_outcome position_reader(struct applyd *a)
{
	uint64_t group_pos;
	bool exists;
	if (stream_group_get(a->cfg->stream_path, a->cfg->consumer_group, &group_pos, &exists) != STREAM_OK)
		return apply_exit(EXIT_DATAERR);
	/* no group file yet: the group is at the beginning */
	uint64_t start = group_pos < a->cp.stream_offset ? group_pos : a->cp.stream_offset;
	if (exists && group_pos > a->cp.stream_offset)
		log_warn("consumer group \"%s\" is at %" PRIu64 ", ahead of the target's checkpoint (%" PRIu64 "): reading from the checkpoint",
			 a->cfg->consumer_group, group_pos, a->cp.stream_offset);
	int st = stream_reader_seek(a->reader, start);
	/* Past the published end: frames a killed capture made durable but
	 * did not index yet are published again once its successor has
	 * recovered the stream; wait for that (bounded) before failing. */
	for (int waited = 0; st == STREAM_ERANGE && waited < 300 && !*a->o->stop; waited++) {
		notify_watchdog_tick(&a->watchdog);
		stream_reader_wait(a->reader, 200);
		st = stream_reader_seek(a->reader, start);
	}
	if (st != STREAM_OK) {
		log_hint("the stream does not hold offset %" PRIu64 " that the target needs next (removed by retention, or not published)",
			 start);
		return apply_exit(EXIT_DATAERR);
	}
	a->next_offset = start;
	a->last_commit_lsn = a->cp.last_commit_lsn;
	a->seen_lsn = a->cp.applied_through_lsn;
	/* whatever an interrupted batch counted was rolled back with it */
	a->batch_txns = a->batch_changes = a->batch_skipped = a->batch_filtered = 0;
	chunk_set_reset(&a->chunk);
	char l[LSN_FORMAT_LEN];
	log_info("applying from stream offset %" PRIu64 " (checkpoint: commit %s, %" PRIu64 " transactions applied)", start,
		 lsn_format(a->cp.last_commit_lsn, l), a->cp.applied_transactions);
	return apply_ok();
}

static void backoff(struct applyd *a, int attempt, const char *what)
{
	double base = a->o->reconnect_base_ms / 1000.0, delay = base;
	for (int i = 1; i < attempt && delay < 60 * base; i++)
		delay *= 2;
	if (delay > 60 * base)
		delay = 60 * base;
	delay *= 0.75 + 0.5 * ((double)rand_r(&a->rng) / RAND_MAX);
	log_info("%s in %.1f s (attempt %d of %d)", what, delay, attempt, a->o->max_reconnect_attempts);
	int64_t until = mono_us() + (int64_t)(delay * 1e6);
	while (!*a->o->stop && mono_us() < until) {
		notify_watchdog_tick(&a->watchdog);
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

struct apply_outcome applyd_run(const struct applyd_options *o, struct applyd_stats *stats)
{
	struct applyd a = { .o = o, .cfg = o->config, .stats = stats };
	memset(stats, 0, sizeof *stats);
	a.flow = config_flow_id(a.cfg);
	a.ids = (struct flow_ids){ a.cfg->source_id, a.cfg->dataset_id, a.cfg->consumer_group };
	a.rng = (unsigned)(mono_us() ^ getpid());
	notify_watchdog_init(&a.watchdog);
	plan_stmt_init(&a.stmt);
	struct apply_outcome code = apply_ok();
	/* the stream may not exist before capture first ran: wait for it */
	bool said = false;
	char *segments = xasprintf("%s/segments", a.cfg->stream_path);
	char *meta = xasprintf("%s/meta", a.cfg->stream_path);
	while (!*o->stop) {
		if (access(meta, F_OK) == 0 && access(segments, F_OK) == 0 &&
		    stream_reader_open(a.cfg->stream_path, &a.reader) == STREAM_OK)
			break;
		if (!said)
			log_info("waiting for the stream \"%s\" to appear", a.cfg->stream_path);
		said = true;
		notify_watchdog_tick(&a.watchdog);
		sleep(1);
	}
	free(segments);
	free(meta);
	if (!a.reader)
		goto out;
	int attempt = 0;
	while (!*o->stop) {
		if (attempt > 0) {
			if (attempt > o->max_reconnect_attempts) {
				log_error("target unavailable after %d reconnect attempts", o->max_reconnect_attempts);
				code = apply_exit(EXIT_UNAVAILABLE);
				goto out;
			}
			backoff(&a, attempt, "reconnecting to the target");
			if (*o->stop)
				break;
		}
		attempt++;
		struct apply_outcome rc = connect_target(&a);
		if (apply_is_ok(rc))
			rc = position_reader(&a);
		if (apply_is_ok(rc)) {
			attempt = 1;
			/* ready: connected, checkpoint read, stream positioned */
			if (!a.ready_sent) {
				notify_send("READY=1");
				a.ready_sent = true;
			}
			notify_status("applying to the target");
			rc = apply_loop(&a);
		}
		disconnect_target(&a);
		if (rc.status == APPLY_RETRY) {
			/* the same bounded backoff as reconnecting, counted apart:
			 * connecting works, the target keeps refusing the work */
			if (++a.transient_retries > o->max_reconnect_attempts) {
				log_error("the target kept failing with transient errors through %d attempts (last: SQLSTATE %s)",
					  o->max_reconnect_attempts, a.last_transient_sqlstate);
				code = apply_exit(EXIT_UNAVAILABLE);
				goto out;
			}
			backoff(&a, a.transient_retries, "applying again");
			attempt = 0;
			continue;
		}
		if (rc.status != APPLY_RECONNECT) {
			code = rc;
			goto out;
		}
	}
out:
	write_metrics(&a, true);
	log_info("applyd stopped: %" PRIu64 " transactions (%" PRIu64 " changes) applied, %" PRIu64
		 " duplicates skipped, %" PRIu64 " changes skipped below snapshot watermarks, %" PRIu64
		 " changes to tables outside the dataset, %" PRIu64 " quarantined",
		 stats->transactions, stats->changes, stats->skipped_duplicates, stats->skipped_by_watermark,
		 stats->skipped_unconfigured, stats->quarantined);
	if (a.conn)
		disconnect_target(&a);
	stream_reader_close(a.reader);
	apply_tables_free(&a.tables);
	for (size_t i = 0; i < a.n_unconfigured; i++)
		free(a.unconfigured[i]);
	free(a.unconfigured);
	free(a.replay);
	chunk_set_free(&a.chunk);
	plan_stmt_free(&a.stmt);
	free(a.flow);
	return code;
}

/*
 * target_pg.c - the apply engine's target over libpq (target_pg.h).
 */
#include "target_pg.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables: keys and watermarks ---- */

/* The partitions, at every level, of the partitioned flow table t. */
static int table_partitions_load(struct target_pg *a, struct apply_tables *tables, const struct apply_table *t,
				 const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = executor_query(&a->ex,
				       "SELECT n.nspname || '.' || c.relname FROM pg_partition_tree(to_regclass($1)) pt"
				       " JOIN pg_class c ON c.oid = pt.relid JOIN pg_namespace n ON n.oid = c.relnamespace"
				       " WHERE pt.relid <> to_regclass($1)",
				       1, p);
	if (!res)
		return -1;
	struct apply_tables *ts = tables;
	for (int r = 0; r < PQntuples(res); r++) {
		ts->partitions = xrealloc(ts->partitions, (ts->n_partitions + 1) * sizeof *ts->partitions);
		ts->partition_roots = xrealloc(ts->partition_roots, (ts->n_partitions + 1) * sizeof *ts->partition_roots);
		ts->partitions[ts->n_partitions] = xstrdup(PQgetvalue(res, r, 0));
		ts->partition_roots[ts->n_partitions++] = xstrdup(t->name);
	}
	PQclear(res);
	return 0;
}

/* What the planner and compaction need to know of the target table:
 * whether it is partitioned, its columns with their types, its
 * GENERATED ALWAYS identity columns, and whether a trigger or rule of it
 * (or of one of its partitions) fires for a replica.  A table that does
 * not exist yet has none of these (its changes fail as missing_table). */
static int table_target_facts(struct target_pg *a, struct apply_table *t, const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = executor_query(&a->ex,
				       "SELECT c.relkind = 'p', a.attname, a.attidentity = 'a', format_type(a.atttypid, -1),"
				       " EXISTS (SELECT 1 FROM pg_trigger tg WHERE (tg.tgrelid = c.oid OR tg.tgrelid IN"
				       " (SELECT relid FROM pg_partition_tree(c.oid))) AND NOT tg.tgisinternal AND tg.tgenabled IN ('A', 'R'))"
				       " OR EXISTS (SELECT 1 FROM pg_rewrite rw WHERE (rw.ev_class = c.oid OR rw.ev_class IN"
				       " (SELECT relid FROM pg_partition_tree(c.oid))) AND rw.rulename <> '_RETURN' AND rw.ev_enabled IN ('A', 'R')),"
				       /* the equality of the key's operator class, with its schema
					* when that is not pg_catalog (pgconn.h) */
				       " " PGCONN_KEY_EQUALITY_SQL("a.atttypid")
				       " FROM pg_class c LEFT JOIN pg_attribute a"
				       " ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
				       " WHERE c.oid = to_regclass($1) ORDER BY a.attnum",
				       1, p);
	if (!res)
		return -1;
	for (int r = 0; r < PQntuples(res); r++) {
		t->partitioned = strcmp(PQgetvalue(res, r, 0), "t") == 0;
		t->replica_triggers = strcmp(PQgetvalue(res, r, 4), "t") == 0;
		if (PQgetisnull(res, r, 1))
			continue;
		t->columns = xrealloc(t->columns, (size_t)(t->n_columns + 1) * sizeof *t->columns);
		t->column_types = xrealloc(t->column_types, (size_t)(t->n_columns + 1) * sizeof *t->column_types);
		t->column_eq = xrealloc(t->column_eq, (size_t)(t->n_columns + 1) * sizeof *t->column_eq);
		t->columns[t->n_columns] = xstrdup(PQgetvalue(res, r, 1));
		t->column_eq[t->n_columns] = PQgetisnull(res, r, 5) ? NULL : xstrdup(PQgetvalue(res, r, 5));
		t->column_types[t->n_columns++] = xstrdup(PQgetvalue(res, r, 3));
		if (strcmp(PQgetvalue(res, r, 2), "t") != 0)
			continue;
		t->identity_always = xrealloc(t->identity_always, (size_t)(t->n_identity_always + 1) * sizeof *t->identity_always);
		t->identity_always[t->n_identity_always++] = xstrdup(PQgetvalue(res, r, 1));
	}
	PQclear(res);
	return 0;
}

/* The target table's unique indexes on plain columns, the primary key
 * and partial or expression indexes aside (what the parallel dependency
 * tracker can see in a change; the others are its safety net's). */
static int table_unique_load(struct target_pg *a, struct apply_table *t, const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = executor_query(&a->ex,
				       "SELECT i.indexrelid, a.attname FROM pg_index i JOIN pg_attribute a"
				       " ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
				       " WHERE i.indrelid = to_regclass($1) AND i.indisunique AND NOT i.indisprimary"
				       " AND i.indexprs IS NULL AND i.indpred IS NULL"
				       " ORDER BY i.indexrelid, array_position(i.indkey, a.attnum)",
				       1, p);
	if (!res)
		return -1;
	const char *last = NULL;
	for (int r = 0; r < PQntuples(res); r++) {
		if (!last || strcmp(last, PQgetvalue(res, r, 0)) != 0) {
			t->unique = xrealloc(t->unique, (size_t)(t->n_unique + 1) * sizeof *t->unique);
			t->unique[t->n_unique++] = (struct apply_unique){ 0 };
		}
		last = PQgetvalue(res, r, 0);
		struct apply_unique *u = &t->unique[t->n_unique - 1];
		u->cols = xrealloc(u->cols, (size_t)(u->n_cols + 1) * sizeof *u->cols);
		u->cols[u->n_cols++] = xstrdup(PQgetvalue(res, r, 1));
	}
	PQclear(res);
	return 0;
}

/* The configured tables, each with the key used to match rows under
 * replica identity full (flow file verify.primary_key, else the target's
 * primary key), what the target's catalogs say of it (table_target_facts)
 * and its snapshot watermark. */
int target_pg_tables_load(struct target_pg *a, struct apply_tables *ts)
{
	apply_tables_free(ts);
	ts->tables = xcalloc(a->cfg->n_tables ? a->cfg->n_tables : 1, sizeof *ts->tables);
	for (size_t i = 0; i < a->cfg->n_tables; i++) {
		const struct table_config *tc = &a->cfg->tables[i];
		struct apply_table *t = &ts->tables[ts->n_tables++];
		t->name = xasprintf("%s.%s", tc->schema, tc->name);
		t->compaction = a->cfg->apply_compaction && tc->apply_compaction;
		char *qs = pgconn_quote_ident(a->conn, tc->schema), *qn = pgconn_quote_ident(a->conn, tc->name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		free(qs);
		free(qn);
		if (table_target_facts(a, t, qualified) < 0 || table_unique_load(a, t, qualified) < 0 ||
		    (t->partitioned && table_partitions_load(a, ts, t, qualified) < 0)) {
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

/* ---- the engine's operations ---- */

static int pg_begin(void *t, uint64_t tag, bool bounded_waits)
{
	struct target_pg *p = t;
	if (executor_control(&p->ex, "BEGIN", tag) < 0)
		return -1;
	/* the session's lock_timeout is the parallel bound (target_pg_open) */
	return bounded_waits || !p->parallel ? 0 : executor_control(&p->ex, p->own_lock_timeout_sql, tag);
}

static int pg_change(void *t, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *c,
		     const struct plan_stmt *stmt, uint64_t tag)
{
	(void)rels;
	(void)n_rels;
	(void)c;
	struct target_pg *p = t;
	return executor_exec(&p->ex, stmt->sql.buf, (int)stmt->n_params, stmt->values, tag,
			     stmt->expect_one, stmt->expect_rows, stmt->what.len ? stmt->what.buf : NULL);
}

/* A set statement is one statement to the target: its row count is
 * checked like one row's (expect_rows); a COPY leaves the pipeline for
 * its run. */
static int pg_change_set(void *t, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *const *cs,
			 size_t n, const struct plan_stmt *stmt, uint64_t tag)
{
	(void)cs;
	(void)n;
	if (stmt->copy) {
		struct target_pg *p = t;
		return executor_copy(&p->ex, stmt->sql.buf, stmt->copy_data.buf, stmt->copy_data.len, tag,
				     stmt->expect_rows, stmt->what.len ? stmt->what.buf : NULL);
	}
	return pg_change(t, rels, n_rels, NULL, stmt, tag);
}

/* The row lock first (it waits for the batch before, which may still be
 * committing on another connection, whatever lock_timeout says), then the
 * update, which matches no row unless that batch committed. */
static int pg_write_checkpoint(void *t, const struct apply_checkpoint *prev, const struct apply_checkpoint *cp,
			       uint64_t tag)
{
	struct target_pg *p = t;
	struct checkpoint_apply_params v;
	checkpoint_apply_update_params(&p->ids, prev, cp, &v);
	if (!p->lock_sql)
		p->lock_sql = checkpoint_apply_lock_sql(p->conn, p->cfg->checkpoint_schema);
	if (!p->update_sql)
		p->update_sql = checkpoint_apply_update_sql(p->conn, p->cfg->checkpoint_schema);
	if (p->parallel && executor_control(&p->ex, "SET LOCAL lock_timeout = 0", tag) < 0)
		return -1;
	if (executor_exec(&p->ex, p->lock_sql, 3, v.values + 7, tag, false, 0, NULL) < 0)
		return -1;
	return executor_exec(&p->ex, p->update_sql, CHECKPOINT_APPLY_UPDATE_NPARAMS, v.values, tag, true, 1,
			     "the checkpoint row at the previous batch's position (the batch before did not commit)");
}

/* Marks a replayed quarantined transaction resolved, in the target
 * transaction that applies it. */
static int pg_resolve_quarantine(void *t, int64_t qid, uint64_t tag)
{
	struct target_pg *p = t;
	char id[24];
	snprintf(id, sizeof id, "%" PRId64, qid);
	char *sql = checkpoint_quarantine_resolve_sql(p->conn, p->cfg->checkpoint_schema);
	const char *v[1] = { id };
	int rc = executor_exec(&p->ex, sql, 1, v, tag, true, 1, NULL);
	free(sql);
	return rc;
}

static int pg_sync(void *t)
{
	struct target_pg *p = t;
	return executor_sync(&p->ex);
}

static int pg_commit(void *t, uint64_t tag)
{
	struct target_pg *p = t;
	if (executor_control(&p->ex, "COMMIT", tag) < 0)
		return -1;
	return executor_sync(&p->ex);
}

static int pg_commit_submit(void *t, uint64_t tag)
{
	struct target_pg *p = t;
	if (executor_control(&p->ex, "COMMIT", tag) < 0)
		return -1;
	return executor_submit(&p->ex);
}

static int pg_submit(void *t)
{
	struct target_pg *p = t;
	return executor_submit(&p->ex);
}

static int pg_collect(void *t)
{
	struct target_pg *p = t;
	return executor_collect(&p->ex);
}

static void pg_rollback(void *t)
{
	struct target_pg *p = t;
	executor_collect(&p->ex); /* a submitted COMMIT's result first */
	executor_control(&p->ex, "ROLLBACK", 0);
	executor_sync(&p->ex);
}

static const struct apply_target_error *pg_error(void *t)
{
	struct target_pg *p = t;
	return &p->ex.error;
}

static void pg_clear_error(void *t)
{
	struct target_pg *p = t;
	memset(&p->ex.error, 0, sizeof p->ex.error);
}

/* Outside the pipeline: the checkpoint module's synchronous queries. */
static int leave_pipeline(struct target_pg *p)
{
	if (PQpipelineStatus(p->conn) == PQ_PIPELINE_OFF)
		return 0;
	return PQexitPipelineMode(p->conn) == 1 ? 0 : -1;
}

static int enter_pipeline(struct target_pg *p)
{
	return PQenterPipelineMode(p->conn) == 1 ? 0 : -1;
}

static int pg_quarantine_add(void *t, uint32_t xid, uint64_t commit_lsn, uint64_t offset, const char *reason,
			     const char *detail)
{
	struct target_pg *p = t;
	if (p->ex_ready && leave_pipeline(p) < 0) /* stays out: apply stops */
		return -1;
	return checkpoint_quarantine_add(p->conn, p->cfg->checkpoint_schema, &p->ids, xid, commit_lsn, offset, reason,
					 detail);
}

static int pg_fence_get(void *t, bool *present, uint64_t *lsn, char *state, size_t state_len)
{
	struct target_pg *p = t;
	if (leave_pipeline(p) < 0)
		return -1;
	int rc = checkpoint_fence_get(p->conn, p->cfg->checkpoint_schema, &p->ids, present, lsn, state, state_len);
	if (enter_pipeline(p) < 0)
		return -1;
	return rc;
}

static int pg_fence_mark_held(void *t, uint64_t fence_lsn, uint64_t applied_through_lsn, bool *marked)
{
	struct target_pg *p = t;
	if (leave_pipeline(p) < 0)
		return -1;
	/* a test holds applyd between reading the fence and marking it */
	fault_pause("applyd.fence_mark");
	int rc = checkpoint_fence_mark_held(p->conn, p->cfg->checkpoint_schema, &p->ids, fence_lsn, applied_through_lsn,
					    marked);
	if (enter_pipeline(p) < 0)
		return -1;
	return rc;
}

static int pg_reload_tables(void *t, struct apply_tables *tables)
{
	return target_pg_tables_load(t, tables);
}

const struct apply_target_ops target_pg_ops = {
	.begin = pg_begin,
	.change = pg_change,
	.change_set = pg_change_set,
	.write_checkpoint = pg_write_checkpoint,
	.resolve_quarantine = pg_resolve_quarantine,
	.sync = pg_sync,
	.commit = pg_commit,
	.submit = pg_submit,
	.commit_submit = pg_commit_submit,
	.collect = pg_collect,
	.rollback = pg_rollback,
	.error = pg_error,
	.clear_error = pg_clear_error,
	.quarantine_add = pg_quarantine_add,
	.fence_get = pg_fence_get,
	.fence_mark_held = pg_fence_mark_held,
	.reload_tables = pg_reload_tables,
};

int target_pg_open(struct target_pg *t)
{
	t->parallel = t->cfg->apply_workers > 1;
	if (t->parallel) {
		/* the session's own lock_timeout (the URL's options, the role's
		 * settings) stays what a batch on one connection waits; beside
		 * others a batch waits at most the bound, or less if that is less */
		PGresult *res = pgconn_query(t->conn, "SELECT setting::bigint FROM pg_settings WHERE name = 'lock_timeout'", 0, NULL);
		if (!res)
			return -1;
		t->own_lock_timeout_ms = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		long long bound = t->own_lock_timeout_ms > 0 && t->own_lock_timeout_ms < APPLY_PARALLEL_LOCK_TIMEOUT_MS
					  ? t->own_lock_timeout_ms
					  : APPLY_PARALLEL_LOCK_TIMEOUT_MS;
		char sql[64];
		snprintf(sql, sizeof sql, "SET lock_timeout = %lld", bound);
		if (pgconn_command(t->conn, sql) < 0)
			return -1;
		snprintf(t->own_lock_timeout_sql, sizeof t->own_lock_timeout_sql, "SET LOCAL lock_timeout = %lld",
			 t->own_lock_timeout_ms);
	}
	if (executor_init(&t->ex, t->conn) < 0)
		return -1;
	t->ex_ready = true;
	return 0;
}

void target_pg_close(struct target_pg *t)
{
	if (t->ex_ready)
		executor_free(&t->ex);
	t->ex_ready = false;
	free(t->lock_sql);
	free(t->update_sql);
	t->lock_sql = t->update_sql = NULL;
}

/*
 * repair_apply.c - repair-plan --apply (repair.h): behind a fence, each
 * divergent key's target row made the source's at a snapshot, recorded as
 * evidence; the plan is read and printed by repair.c.
 */
#include "repair.h"
#include "repair_internal.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/snapfence.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- applying ---- */

struct apply_ctx {
	const struct repair_options *o;
	PGconn *src, *dst;
};

static PGconn *connect_repl(void *arg)
{
	struct apply_ctx *a = arg;
	return pgconn_connect(a->o->cfg->source_database_url, PGCONN_REPLICATION, "trellara-repair-plan", "source");
}

/* 'p' partitioned, other kinds, '\0' none; -1 on a failed query (logged). */
static int relkind(PGconn *c, const char *qualified, char *kind)
{
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(c, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", 1, p);
	if (!res)
		return -1;
	*kind = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0)[0] : '\0';
	PQclear(res);
	return 0;
}

/* Makes every divergent key of one table on the target what the source
 * holds at the snapshot; the evidence row in the same transaction.
 * 0, or an exit code (logged). */
/* Each key column's type on one side, as its catalog names it
 * (format_type without a typmod, schema-qualified under the sessions'
 * empty search_path): a key value is compared as that type, never as an
 * untyped parameter (a composite key's would be "record": 0A000), and
 * with its equality operator ("=", or "OPERATOR(schema.=)" for citext's
 * or hstore's: PGCONN_KEY_EQUALITY_SQL).  *types and *ops get
 * n_key_columns owned strings each. */
static int key_types(PGconn *conn, const char *qualified, const struct repair_table *r, char ***types, char ***ops)
{
	*types = xcalloc((size_t)r->n_key_columns + 1, sizeof **types);
	*ops = xcalloc((size_t)r->n_key_columns + 1, sizeof **ops);
	for (int c = 0; c < r->n_key_columns; c++) {
		const char *p[2] = { qualified, r->key_columns[c] };
		PGresult *res = pgconn_query(conn,
					     "SELECT pg_catalog.format_type(a.atttypid, -1), "
					     PGCONN_KEY_EQUALITY_SQL("a.atttypid")
					     " FROM pg_catalog.pg_attribute a"
					     " WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attname = $2 AND a.attnum > 0"
					     " AND NOT a.attisdropped",
					     2, p);
		if (!res)
			return -1;
		if (PQntuples(res) != 1) {
			log_error("table %s: the key column \"%s\" of the verify result is not a column of %s's table", r->name,
				  r->key_columns[c], pgconn_role(conn));
			PQclear(res);
			return -1;
		}
		(*types)[c] = xstrdup(PQgetvalue(res, 0, 0));
		(*ops)[c] = xstrdup(PQgetisnull(res, 0, 1) ? "=" : PQgetvalue(res, 0, 1));
		PQclear(res);
	}
	return 0;
}

static void free_types(char **types, int n)
{
	for (int i = 0; types && i < n; i++)
		free(types[i]);
	free(types);
}

static int apply_table(struct apply_ctx *a, struct repair_table *r, const char *run_id, uint64_t source_lsn,
		       uint64_t compared_at)
{
	const struct flow_config *cfg = a->o->cfg;
	int code = EXIT_UNAVAILABLE;
	char *qs = pgconn_quote_ident(a->src, r->t->schema), *qn = pgconn_quote_ident(a->src, r->t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	char **cols = NULL, **where_vals = NULL, **src_types = NULL, **dst_types = NULL, **src_ops = NULL, **dst_ops = NULL;
	int n_cols = 0;
	struct strbuf list = STRBUF_INIT, where = STRBUF_INIT, where_dst = STRBUF_INIT, sql = STRBUF_INIT;
	PGresult *res = NULL;
	/* the evidence's two JSON documents, written as the keys are repaired */
	char *keys_text = NULL, *cols_text = NULL;
	size_t keys_len = 0, cols_len = 0;
	FILE *keys_out = open_memstream(&keys_text, &keys_len), *cols_out = open_memstream(&cols_text, &cols_len);
	if (!keys_out || !cols_out) {
		log_error("table %s: cannot hold the repair's evidence in memory: %s", r->name, strerror(errno));
		goto out;
	}
	struct jsonw keys_w, cols_w;
	jsonw_init(&keys_w, keys_out, false);
	jsonw_init(&cols_w, cols_out, false);
	jsonw_open(&keys_w, NULL, '[');
	jsonw_open(&cols_w, NULL, '[');
	char src_kind, dst_kind;
	if (relkind(a->src, qualified, &src_kind) < 0 || relkind(a->dst, qualified, &dst_kind) < 0)
		goto out;
	if (!src_kind || !dst_kind) {
		log_error("table %s does not exist on the %s", r->name, src_kind ? "target" : "source");
		code = EXIT_NEGATIVE;
		goto out;
	}
	const char *p1[1] = { qualified };
	res = pgconn_query(a->src,
			   "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0"
			   " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
			   1, p1);
	if (!res)
		goto out;
	n_cols = PQntuples(res);
	cols = xcalloc((size_t)n_cols + 1, sizeof *cols);
	for (int i = 0; i < n_cols; i++) {
		cols[i] = pgconn_quote_ident(a->src, PQgetvalue(res, i, 0));
		strbuf_addf(&list, "%s%s", i ? ", " : "", cols[i]);
	}
	PQclear(res);
	res = NULL;
	for (int c = 0; c < r->n_key_columns; c++) {
		jsonw_text(&cols_w, NULL, r->key_columns[c]);
		bool found = false;
		char *q = pgconn_quote_ident(a->src, r->key_columns[c]);
		for (int i = 0; i < n_cols; i++)
			found = found || strcmp(cols[i], q) == 0;
		free(q);
		if (!found) {
			log_error("table %s: the key column \"%s\" of the verify result is not a column of the source table",
				  r->name, r->key_columns[c]);
			code = EXIT_DATAERR;
			goto out;
		}
	}
	if (key_types(a->src, qualified, r, &src_types, &src_ops) < 0 ||
	    key_types(a->dst, qualified, r, &dst_types, &dst_ops) < 0) {
		code = EXIT_DATAERR;
		goto out;
	}
	where_vals = xcalloc((size_t)r->n_key_columns + 1, sizeof *where_vals);
	const char *only_src = src_kind == 'p' ? "" : "ONLY ", *only_dst = dst_kind == 'p' ? "" : "ONLY ";
	for (size_t k = 0; k < r->n_keys; k++) {
		const struct repair_key *key = &r->keys[k];
		/* the key: each value a parameter of its column's type on
		 * that side, NULL as IS NULL */
		strbuf_reset(&where);
		strbuf_reset(&where_dst);
		int n_params = 0;
		for (int c = 0; c < r->n_key_columns; c++) {
			char *q = pgconn_quote_ident(a->src, r->key_columns[c]);
			if (key->values[c]) {
				where_vals[n_params++] = key->values[c];
				strbuf_addf(&where, "%s%s %s $%d::%s", c ? " AND " : "", q, src_ops[c], n_params, src_types[c]);
				strbuf_addf(&where_dst, "%s%s %s $%d::%s", c ? " AND " : "", q, dst_ops[c], n_params,
					    dst_types[c]);
			} else {
				strbuf_addf(&where, "%s%s IS NULL", c ? " AND " : "", q);
				strbuf_addf(&where_dst, "%s%s IS NULL", c ? " AND " : "", q);
			}
			free(q);
		}
		strbuf_reset(&sql);
		strbuf_addf(&sql, "SELECT %s FROM %s%s WHERE %s", list.buf, only_src, qualified, where.buf);
		res = pgconn_query(a->src, sql.buf, n_params, (const char *const *)where_vals);
		if (!res)
			goto out;
		int source_rows = PQntuples(res);
		if (source_rows > 1) {
			char *text = repair_key_text(r, key);
			log_error("table %s: the key %s names %d source rows: it is not a key", r->name, text, source_rows);
			free(text);
			code = EXIT_DATAERR;
			goto out;
		}
		strbuf_reset(&sql);
		strbuf_addf(&sql, "DELETE FROM %s%s WHERE %s", only_dst, qualified, where_dst.buf);
		PGresult *del = pgconn_query(a->dst, sql.buf, n_params, (const char *const *)where_vals);
		if (!del)
			goto out;
		long deleted = strtol(PQcmdTuples(del), NULL, 10);
		PQclear(del);
		if (deleted > 1) {
			char *text = repair_key_text(r, key);
			log_error("table %s: the key %s names %ld target rows: it is not a key there", r->name, text, deleted);
			free(text);
			code = EXIT_DATAERR;
			goto out;
		}
		if (source_rows == 1) {
			const char **values = xcalloc((size_t)n_cols + 1, sizeof *values);
			strbuf_reset(&sql);
			strbuf_addf(&sql, "INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE VALUES (", qualified, list.buf);
			for (int i = 0; i < n_cols; i++) {
				values[i] = PQgetisnull(res, 0, i) ? NULL : PQgetvalue(res, 0, i);
				strbuf_addf(&sql, "%s$%d", i ? ", " : "", i + 1);
			}
			strbuf_adds(&sql, ")");
			PGresult *ins = pgconn_query(a->dst, sql.buf, n_cols, values);
			free(values);
			if (!ins)
				goto out;
			PQclear(ins);
		}
		PQclear(res);
		res = NULL;
		/* the target is now what the source holds at the snapshot; a key
		 * that changed since verify is said, not guessed about */
		bool expected_del = key->kind != KIND_MISSING, expected_src = key->kind != KIND_EXTRA;
		if ((deleted == 1) != expected_del || (source_rows == 1) != expected_src) {
			char *text = repair_key_text(r, key);
			log_warn("table %s: key %s: verify found %s; at the fence the target had %ld and the source %d such rows:"
				 " made the target's like the source's",
				 r->name, text, repair_kind_name(key->kind), deleted, source_rows);
			free(text);
		}
		r->rows_deleted += (uint64_t)deleted;
		r->rows_inserted += (uint64_t)source_rows;
		jsonw_open(&keys_w, NULL, '{');
		jsonw_str(&keys_w, "kind", repair_kind_name(key->kind));
		jsonw_open(&keys_w, "key", '[');
		for (int c = 0; c < r->n_key_columns; c++) {
			if (key->values[c])
				jsonw_text(&keys_w, NULL, key->values[c]);
			else
				jsonw_null(&keys_w, NULL);
		}
		jsonw_close(&keys_w, ']');
		jsonw_i64(&keys_w, "target_rows_deleted", true, deleted);
		jsonw_bool(&keys_w, "source_row_copied", source_rows == 1);
		jsonw_close(&keys_w, '}');
	}
	jsonw_close(&keys_w, ']');
	jsonw_close(&cols_w, ']');
	bool keys_ok = jsonw_finish(&keys_w) == 0 && fclose(keys_out) == 0;
	bool cols_ok = jsonw_finish(&cols_w) == 0 && fclose(cols_out) == 0;
	keys_out = cols_out = NULL;
	if (!keys_ok || !cols_ok) {
		log_error("table %s: cannot write the repair's evidence", r->name);
		goto out;
	}
	struct flow_ids ids = { cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	struct repair_evidence ev = { .run_id = run_id, .relation = r->name, .key_columns_json = cols_text,
				      .keys_json = keys_text, .rows_deleted = r->rows_deleted, .rows_inserted = r->rows_inserted,
				      .source_lsn = source_lsn, .verify_compared_at = compared_at };
	if (checkpoint_repair_record(a->dst, cfg->checkpoint_schema, &ids, &ev) < 0)
		goto out;
	code = 0;
out:
	PQclear(res);
	for (int i = 0; cols && i < n_cols; i++)
		free(cols[i]);
	free(cols);
	free(where_vals);
	free_types(src_types, r->n_key_columns);
	free_types(dst_types, r->n_key_columns);
	free_types(src_ops, r->n_key_columns);
	free_types(dst_ops, r->n_key_columns);
	strbuf_release(&list);
	strbuf_release(&where);
	strbuf_release(&where_dst);
	strbuf_release(&sql);
	if (keys_out)
		fclose(keys_out);
	if (cols_out)
		fclose(cols_out);
	free(keys_text);
	free(cols_text);
	free(qualified);
	free(qs);
	free(qn);
	return code;
}

/* The row repairs of the plan in one target transaction behind the fence.
 * 0, or an exit code. */
int repair_apply_plan(const struct repair_options *o, struct plan *p, uint64_t *source_lsn)
{
	const struct flow_config *cfg = o->cfg;
	struct apply_ctx a = { .o = o };
	struct snapfence fence = { 0 };
	struct flow_ids ids = { cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	struct run_row run = { 0 };
	int code = EXIT_UNAVAILABLE, rc;
	a.src = pgconn_connect(cfg->source_database_url, PGCONN_NORMAL, "trellara-repair-plan", "source");
	a.dst = a.src ? pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-repair-plan", "target") : NULL;
	if (!a.src || !a.dst || snapfence_session_settings(a.src) < 0 || snapfence_session_settings(a.dst) < 0 ||
	    checkpoint_migrate(a.dst, cfg->checkpoint_schema) < 0 ||
	    runs_load(a.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, NULL, &run) < 0)
		goto out;
	struct snapfence_options fo = { .cfg = cfg, .ids = &ids, .name = "repair", .timeout_s = o->fence_timeout_s,
					.stop = o->stop, .connect_repl = connect_repl, .arg = &a };
	if ((rc = snapfence_set(&fence, a.src, a.dst, &fo)) != 0) {
		code = rc;
		goto out;
	}
	/* the source as of the snapshot; the target, held at the fence, in
	 * one transaction, applied as a replica like applyd (no triggers) */
	if (snapfence_source_begin(a.src, &fence) < 0 || pgconn_command(a.dst, "BEGIN") < 0 ||
	    pgconn_command(a.dst, "SET LOCAL session_replication_role = replica") < 0)
		goto out;
	for (size_t i = 0; i < p->n_tables; i++) {
		if (p->tables[i].reseed_reason)
			continue;
		if (*o->stop) {
			code = EXIT_TEMPFAIL;
			goto out;
		}
		if ((rc = apply_table(&a, &p->tables[i], run.exists ? run.run_id : NULL, fence.lsn, p->compared_at)) != 0) {
			code = rc;
			goto out;
		}
	}
	if (pgconn_command(a.dst, "COMMIT") < 0)
		goto out;
	*source_lsn = fence.lsn;
	code = EXIT_OK;
out:
	if (code != EXIT_OK && a.dst && PQtransactionStatus(a.dst) != PQTRANS_IDLE && PQtransactionStatus(a.dst) != PQTRANS_UNKNOWN)
		pgconn_command(a.dst, "ROLLBACK");
	if (a.src && PQtransactionStatus(a.src) != PQTRANS_IDLE && PQtransactionStatus(a.src) != PQTRANS_UNKNOWN)
		pgconn_command(a.src, "ROLLBACK");
	snapfence_release(&fence, a.dst, cfg, &ids);
	PQfinish(a.src);
	PQfinish(a.dst);
	return code;
}

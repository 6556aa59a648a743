/*
 * copy.c - parallel table copy at an exported snapshot (copy.h).
 */
#include "copy.h"
#include "copy_target.h"

#include "trellara/checkpoint.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runstate.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece of work: a whole table, one range of a split table, or the
 * progress row of a split table whose ranges are all in already. */
struct copy_item {
	size_t table;
	int range; /* index into the table's ranges; ITEM_WHOLE, ITEM_FINISH */
};
enum { ITEM_WHOLE = -1, ITEM_FINISH = -2 };

struct copy_shared {
	struct copy_job *job;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a table copied, or a worker free */
	struct copy_item *items; /* owned */
	size_t n_items;
	size_t next; /* next item to take */
	/* tables whose data is in, for job->after_table: taken before items */
	size_t *done; /* owned: n_tables */
	size_t n_done, next_done;
	unsigned busy; /* workers on an item or a table's after_table */
};

char *copy_table_fingerprint(void *pgconn, const char *schema, const char *name)
{
	PGconn *conn = pgconn;
	char *qs = pgconn_quote_ident(conn, schema), *qn = pgconn_quote_ident(conn, name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	const char *p[1] = { qualified };
	/* the columns, and a partitioned table's partitions (every level):
	 * one attached or detached during the copy changes what the parent
	 * holds (a plain table's is its columns' alone, as it always was) */
	PGresult *res = pgconn_query(conn,
				     "SELECT CASE WHEN to_regclass($1) IS NOT NULL THEN"
				     " md5(coalesce((SELECT string_agg(attname || ':' || format_type(atttypid, atttypmod) || ':'"
				     " || attnotnull, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = to_regclass($1)"
				     " AND attnum > 0 AND NOT attisdropped), '')" /* a table may have no columns */
				     " || coalesce('|' || (SELECT string_agg(relid::oid::text, ',' ORDER BY relid::oid)"
				     " FROM pg_partition_tree(to_regclass($1)) WHERE relid <> to_regclass($1)), '')) END",
				     1, p);
	char *fp = NULL;
	if (res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		fp = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	free(qualified);
	free(qs);
	free(qn);
	return fp;
}

/* The column list and whether binary COPY is safe, as the snapshot sees
 * the table. */
enum copy_at_snapshot copy_begin_at_snapshot(void *src_pgconn, const char *snapshot_name, bool ordered)
{
	PGconn *src = src_pgconn;
	if (pgconn_command(src, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		return COPY_AT_SNAPSHOT_NO_BEGIN;
	/* the snapshot name comes from the server; quoted as a literal all the same */
	char *lit = pgconn_quote_literal(src, snapshot_name);
	char *set = xasprintf("SET TRANSACTION SNAPSHOT %s", lit);
	free(lit);
	int rc = pgconn_command(src, set);
	free(set);
	if (rc < 0)
		return COPY_AT_SNAPSHOT_NO_IMPORT;
	if (ordered && pgconn_command(src, "SET LOCAL max_parallel_workers_per_gather = 0") < 0)
		return COPY_AT_SNAPSHOT_NO_SETTING;
	return COPY_AT_SNAPSHOT_OK;
}

int copy_columns_at_snapshot(void *src_pgconn, const char *qualified, char **cols, bool *binary)
{
	PGconn *src = src_pgconn;
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(src,
				     "SELECT quote_ident(attname), t.oid < 16384 AND t.typtype IN ('b', 'r', 'm') AND"
				     " (t.typelem = 0 OR (SELECT e.oid < 16384 AND e.typtype = 'b' FROM pg_type e WHERE e.oid = t.typelem))"
				     " FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
				     " WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
				     " ORDER BY attnum",
				     1, p);
	if (!res)
		return -1;
	if (PQntuples(res) == 0 && !copy_relkind(src, qualified)) {
		PQclear(res);
		log_error("source table %s does not exist", qualified);
		return -1;
	}
	/* a table without columns (PostgreSQL allows one, and publishes its
	 * rows): an empty list, each row an empty line */
	size_t len = 0;
	*binary = true;
	for (int i = 0; i < PQntuples(res); i++) {
		len += strlen(PQgetvalue(res, i, 0)) + 2;
		*binary = *binary && strcmp(PQgetvalue(res, i, 1), "t") == 0;
	}
	char *list = xmalloc(len + 1), *o = list;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *c = PQgetvalue(res, i, 0);
		if (i) {
			*o++ = ',';
			*o++ = ' ';
		}
		memcpy(o, c, strlen(c));
		o += strlen(c);
	}
	*o = '\0';
	PQclear(res);
	*cols = list;
	return 0;
}

/* pg_class.relkind of a relation ('\0' when it does not exist). */
char copy_relkind(void *pgconn, const char *qualified)
{
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(pgconn, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", 1, p);
	char kind = res && PQntuples(res) == 1 ? PQgetvalue(res, 0, 0)[0] : '\0';
	PQclear(res);
	return kind;
}

static void fail_table(struct copy_table *t, const char *what, const char *detail)
{
	snprintf(t->error, sizeof t->error, "%s%s%s", what, detail && *detail ? ": " : "", detail ? detail : "");
	size_t n = strlen(t->error);
	while (n && (t->error[n - 1] == '\n' || t->error[n - 1] == ' '))
		t->error[--n] = '\0';
	t->outcome = COPY_FAILED;
	log_error("table %s.%s: %s", t->schema, t->name, t->error);
}

/* pg_relation_filenode of the table now is the one its split was planned
 * at: no rewrite (VACUUM FULL, CLUSTER, TRUNCATE, a type change) moved
 * its rows to other ctids between its ranges.  Called after a range's
 * read, while its lock still keeps rewrites out.  1 same, 0 not, -1. */
static int same_filenode(PGconn *src, const char *qualified, const char *filenode)
{
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(src, "SELECT pg_relation_filenode(to_regclass($1))::text", 1, p);
	if (!res)
		return -1;
	int rc = !PQgetisnull(res, 0, 0) && strcmp(PQgetvalue(res, 0, 0), filenode) == 0;
	PQclear(res);
	return rc;
}

/* Copies table t whole (r NULL), or its range r (t is then the range's
 * own record; r carries the filenode its relation was planned at). */
static void copy_one(struct copy_job *job, struct copy_table *t, const struct snapshot_range *r, PGconn *src,
		     PGconn *dst, PGconn *meta, bool replica)
{
	const struct flow_config *cfg = job->cfg;
	char *qs = pgconn_quote_ident(src, t->schema), *qn = pgconn_quote_ident(src, t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	char *cols = NULL, *fp_before = NULL, *fp_snap = NULL, *fp_after = NULL, *sql = NULL;
	int64_t t0_us = clock_mono_us();
	bool src_open = false, dst_open = false;

	fp_before = copy_table_fingerprint(meta, t->schema, t->name);
	fault_pause("snapshot.before_table_copy");
	/* a range is read ordered: its hash must be the same when it is read
	 * again (copy_range.c) */
	enum copy_at_snapshot at = copy_begin_at_snapshot(src, job->snapshot_name, r != NULL);
	src_open = at != COPY_AT_SNAPSHOT_NO_BEGIN;
	if (at == COPY_AT_SNAPSHOT_NO_IMPORT) {
		fail_table(t, "cannot import the exported snapshot", NULL);
		goto out;
	}
	if (at != COPY_AT_SNAPSHOT_OK)
		goto failed;
	fp_snap = copy_table_fingerprint(src, t->schema, t->name);
	if (copy_columns_at_snapshot(src, qualified, &cols, &t->binary) < 0) {
		fail_table(t, "cannot read the table's columns at the snapshot", NULL);
		goto out;
	}
	/* a partitioned table is read through its parent: every partition's
	 * rows (attached later or not); any other table on its own, as
	 * PostgreSQL's publication publishes it (inheritance children are
	 * tables of their own) */
	char src_kind = copy_relkind(src, qualified);
	char dst_kind = copy_relkind(dst, qualified);
	if (!dst_kind) {
		fail_table(t, "the target table does not exist", NULL);
		log_hint("create it (pg_dump --schema-only of the source), or run the snapshot with --create-tables");
		goto out;
	}
	if (!replica) {
		char *trig;
		if (copy_insert_triggers(dst, qualified, dst_kind, &trig) < 0) {
			fail_table(t, "cannot read the triggers of the target table", PQerrorMessage(dst));
			log_hint("the target role may not set session_replication_role = replica, so a copy must know which"
				 " triggers it would fire: let it read pg_catalog.pg_trigger, or grant it that parameter");
			goto out;
		}
		if (trig) {
			char detail[300];
			snprintf(detail, sizeof detail, "%s", trig);
			free(trig);
			fail_table(t, "the target table has triggers or foreign keys that COPY would fire, and the target role"
				      " may not set session_replication_role = replica", detail);
			log_hint("GRANT SET ON PARAMETER session_replication_role TO the target role (PostgreSQL 15 and later),"
				 " or connect as a superuser");
			goto out;
		}
	}
	if (pgconn_command(dst, "BEGIN") < 0)
		goto failed;
	dst_open = true;
	/* a run has emptied its tables together already (copy_empty_targets);
	 * a reseed empties its table here, in the copy's transaction; a range
	 * goes into its table as it is (emptied before, or holding the ranges
	 * kept from an earlier invocation) */
	int full = r ? 0 : copy_has_rows(dst, qualified, dst_kind);
	if (full < 0)
		goto failed;
	if (full) {
		/* TRUNCATE refuses a table that another target table references
		 * (the other tables of the flow are not copied again), so such a
		 * table is emptied with DELETE instead, in this transaction, with
		 * the replica role: the referential-action triggers do not fire,
		 * the referencing rows stay, and the rows copied next satisfy
		 * them as the source's rows do */
		char *list = NULL;
		copy_regclass_array_add(&list, qualified);
		char *arr = xasprintf("{%s}", list);
		free(list);
		char con[300], from[300], to[300];
		int fk = copy_referencing_key(dst, arr, con, from, to, sizeof con);
		free(arr);
		if (fk < 0)
			goto failed;
		if (fk && !replica) {
			char detail[700];
			snprintf(detail, sizeof detail, "foreign key \"%s\" of %s", con, from);
			fail_table(t, "another target table references it, and emptying it without firing the foreign key's"
				      " actions needs session_replication_role = replica, which the target role may not set",
				   detail);
			log_hint("GRANT SET ON PARAMETER session_replication_role TO the target role (PostgreSQL 15 and later),"
				 " or connect as a superuser");
			goto out;
		}
		if (fk) {
			log_info("table %s.%s: referenced by foreign key \"%s\" of %s: emptied with DELETE (replica role)"
				 " instead of TRUNCATE",
				 t->schema, t->name, con, from);
			sql = xasprintf("DELETE FROM %s%s", copy_only_for(dst_kind), qualified);
		} else {
			sql = xasprintf("TRUNCATE %s%s", copy_only_for(dst_kind), qualified);
		}
		if (pgconn_command(dst, sql) < 0)
			goto failed;
		free(sql);
		sql = NULL;
	}
	const char *fmt = t->binary ? " (FORMAT binary)" : "";
	/* no column list for a table without columns: "()" is no syntax */
	sql = *cols ? xasprintf("COPY %s (%s) FROM STDIN%s", qualified, cols, fmt)
		    : xasprintf("COPY %s FROM STDIN%s", qualified, fmt);
	PGresult *res = PQexec(dst, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN) {
		fail_table(t, "target COPY failed", PQerrorMessage(dst));
		PQclear(res);
		goto out;
	}
	PQclear(res);
	free(sql);
	if (r)
		sql = copy_range_sql(cols, qualified, r, fmt);
	else
		sql = xasprintf("COPY (SELECT %s FROM %s%s) TO STDOUT%s", cols, copy_only_for(src_kind), qualified, fmt);
	res = PQexec(src, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		fail_table(t, "source COPY failed", PQerrorMessage(src));
		PQclear(res);
		PQputCopyEnd(dst, "source failed");
		goto out;
	}
	PQclear(res);
	char *buf;
	int n;
	bool faulted = false;
	struct copy_hash hash = { 0 };
	while ((n = PQgetCopyData(src, &buf, 0)) > 0) {
		if (r)
			copy_hash_add(&hash, buf, (size_t)n);
		if (PQputCopyData(dst, buf, n) != 1) {
			PQfreemem(buf);
			fail_table(t, "sending to the target failed", PQerrorMessage(dst));
			goto out;
		}
		t->bytes += (uint64_t)n;
		PQfreemem(buf);
		if (!faulted && t->bytes > 65536) {
			faulted = true;
			fault_point("snapshot.mid_table_copy");
			fault_pause("snapshot.mid_table_copy");
		}
	}
	if (n == -2) {
		fail_table(t, "reading from the source failed", PQerrorMessage(src));
		PQputCopyEnd(dst, "source failed");
		goto out;
	}
	res = PQgetResult(src);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fail_table(t, "source COPY failed", PQerrorMessage(src));
		PQclear(res);
		PQputCopyEnd(dst, "source failed");
		goto out;
	}
	PQclear(res);
	while ((res = PQgetResult(src)) != NULL)
		PQclear(res);
	if (PQputCopyEnd(dst, NULL) != 1) {
		fail_table(t, "ending the target COPY failed", PQerrorMessage(dst));
		goto out;
	}
	res = PQgetResult(dst);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fail_table(t, "target COPY failed", PQerrorMessage(dst));
		PQclear(res);
		goto out;
	}
	t->rows = strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	while ((res = PQgetResult(dst)) != NULL)
		PQclear(res);
	if (r) {
		int same = same_filenode(src, copy_range_relation(r, qualified), r->filenode);
		if (same < 0)
			goto failed;
		if (!same) {
			fail_table(t, "the source table was rewritten (VACUUM FULL, CLUSTER, TRUNCATE or a column type change)"
				      " during its split copy",
				   NULL);
			goto out;
		}
	}
	pgconn_command(src, "COMMIT");
	src_open = false;
	fp_after = copy_table_fingerprint(meta, t->schema, t->name);
	if (!run_snapshot_schema_stable(fp_before, fp_snap, fp_after)) {
		t->outcome = COPY_SCHEMA_CHANGED;
		snprintf(t->error, sizeof t->error, "its schema changed while it was copied");
		char *config = strbuf_shell_quote(cfg->path);
		log_warn("table %s.%s: schema changed during its copy: not handed off; run \"trellara snapshot --config %s\" again to copy it again",
			 t->schema, t->name, config);
		free(config);
		goto out; /* the target transaction rolls back below */
	}
	/* the progress row (the table's or the range's) commits with the data */
	char *relation = xasprintf("%s.%s", t->schema, t->name);
	struct flow_ids ids = { cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	char hash_text[40];
	copy_hash_format(&hash, hash_text, sizeof hash_text);
	int recorded = r ? checkpoint_range_copied(dst, cfg->checkpoint_schema, &ids, job->run_id, relation, r->range_no,
						   t->rows, hash_text, job->watermark_lsn)
			 : checkpoint_progress_copied(dst, cfg->checkpoint_schema, &ids, job->run_id, relation, t->rows,
						      job->watermark_lsn, fp_after);
	free(relation);
	if (recorded < 0)
		goto failed;
	if (pgconn_command(dst, "COMMIT") < 0)
		goto failed;
	dst_open = false;
	t->outcome = COPY_DONE;
	t->seconds = (double)(clock_mono_us() - t0_us) / 1e6;
	if (r) {
		log_info("table %s.%s: range %d/%d: %" PRIu64 " rows copied (%s COPY, %.1f MB, %.2f s)", t->schema, t->name,
			 r->range_no, r->n_ranges, t->rows, t->binary ? "binary" : "text", (double)t->bytes / 1e6, t->seconds);
		fault_point("snapshot.after_range_commit");
		fault_pause("snapshot.after_range_commit");
	} else {
		log_info("table %s.%s: %" PRIu64 " rows copied (%s COPY, %.1f MB, %.2f s)", t->schema, t->name, t->rows,
			 t->binary ? "binary" : "text", (double)t->bytes / 1e6, t->seconds);
	}
	goto out;
failed:
	if (t->outcome == COPY_PENDING)
		fail_table(t, "copy failed", PQerrorMessage(dst_open ? dst : src));
out:
	if (src_open)
		pgconn_command(src, "ROLLBACK");
	if (dst_open)
		pgconn_command(dst, "ROLLBACK");
	free(qualified);
	free(qs);
	free(qn);
	free(cols);
	free(fp_before);
	free(fp_snap);
	free(fp_after);
	free(sql);
}

/* Counts a range's outcome in its table; true when it was the last range
 * and every range is in (the caller writes the table's progress row). */
static bool range_done(struct copy_shared *sh, struct copy_table *t, const struct copy_table *part, bool finish_only)
{
	pthread_mutex_lock(&sh->lock);
	if (!finish_only) {
		t->ranges_left--;
		t->binary = part->binary;
		t->bytes += part->bytes;
		if (part->outcome == COPY_DONE) {
			t->rows += part->rows;
			t->ranges_copied++;
		} else if (t->outcome == COPY_PENDING) {
			t->outcome = part->outcome;
			memcpy(t->error, part->error, sizeof t->error);
		}
	}
	bool last = t->ranges_left == 0 && t->outcome == COPY_PENDING;
	pthread_mutex_unlock(&sh->lock);
	return last;
}

/* Every range of split table t is in: its progress row, with the
 * watermark of this invocation's snapshot, at which every range reads as
 * it is in the target (copy_range.c). */
static void finish_split_table(struct copy_job *job, struct copy_table *t, PGconn *dst, PGconn *meta)
{
	const struct flow_config *cfg = job->cfg;
	char *relation = xasprintf("%s.%s", t->schema, t->name);
	char *fp = meta ? copy_table_fingerprint(meta, t->schema, t->name) : NULL;
	struct flow_ids ids = { cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	/* a partitioned table's ranges cover the leaves of its plan: a
	 * partition attached or detached since, and they are not the table */
	int leaves = meta && t->ranges[0].partition[0] ? copy_partitions_unchanged(meta, t) : 1;
	if (leaves == 0) {
		t->outcome = COPY_SCHEMA_CHANGED;
		snprintf(t->error, sizeof t->error, "its partitions changed while it was copied");
		char *config = strbuf_shell_quote(cfg->path);
		log_warn("table %s.%s: a partition was attached or detached during its copy: not handed off; run"
			 " \"trellara snapshot --config %s\" again to copy it again",
			 t->schema, t->name, config);
		free(config);
		goto out;
	}
	if (!dst || !fp || leaves < 0 || pgconn_command(dst, "BEGIN") < 0 ||
	    checkpoint_progress_copied(dst, cfg->checkpoint_schema, &ids, job->run_id, relation, t->rows, job->watermark_lsn,
				       fp) < 0 ||
	    pgconn_command(dst, "COMMIT") < 0) {
		if (dst)
			pgconn_command(dst, "ROLLBACK");
		fail_table(t, "its ranges are copied, but its progress row could not be written", NULL);
		goto out;
	}
	t->outcome = COPY_DONE;
	t->seconds = (double)(clock_mono_us() - t->t0_us) / 1e6;
	log_info("table %s.%s: %" PRIu64 " rows copied in %d ranges (%d copied now, %d kept from an earlier invocation,"
		 " %.1f MB, %.2f s)",
		 t->schema, t->name, t->rows, t->n_ranges, t->ranges_copied, t->ranges_kept, (double)t->bytes / 1e6, t->seconds);
out:
	free(fp);
	free(relation);
}

/* The next piece of work, under the lock: a table copied, waiting for
 * its after_table (*item NULL, *table_done its index), first; else the
 * next item.  With neither but a worker still busy, waits: that worker
 * may finish a table.  false: nothing is left. */
static bool take(struct copy_shared *sh, struct copy_item **item, size_t *table_done)
{
	bool got = true;
	pthread_mutex_lock(&sh->lock);
	for (;;) {
		if (sh->next_done < sh->n_done) {
			*item = NULL;
			*table_done = sh->done[sh->next_done++];
			break;
		}
		if (sh->next < sh->n_items) {
			*item = &sh->items[sh->next++];
			break;
		}
		if (sh->busy == 0) {
			got = false;
			break;
		}
		pthread_cond_wait(&sh->changed, &sh->lock);
	}
	if (got)
		sh->busy++;
	pthread_mutex_unlock(&sh->lock);
	return got;
}

/* A piece of work ended; table_done: a table whose data is now in, for
 * job->after_table (SIZE_MAX: none). */
static void put_back(struct copy_shared *sh, size_t table_done)
{
	pthread_mutex_lock(&sh->lock);
	if (table_done != SIZE_MAX && sh->job->after_table)
		sh->done[sh->n_done++] = table_done;
	sh->busy--;
	pthread_cond_broadcast(&sh->changed);
	pthread_mutex_unlock(&sh->lock);
}

static void *worker(void *arg)
{
	struct copy_shared *sh = arg;
	struct copy_job *job = sh->job;
	PGconn *src = pgconn_connect(job->cfg->source_database_url, PGCONN_NORMAL, "trellara-snapshot", "source");
	PGconn *meta = pgconn_connect(job->cfg->source_database_url, PGCONN_NORMAL, "trellara-snapshot", "source");
	PGconn *dst = pgconn_connect(job->cfg->target_database_url, PGCONN_NORMAL, "trellara-snapshot", "target");
	/* COPY FROM fires the target's INSERT triggers and foreign-key checks
	 * unless the session is a replica's, as PostgreSQL's apply worker is
	 * (ENABLE ALWAYS triggers fire all the same); a role that may not set
	 * it can still copy the tables that have none */
	bool replica = false;
	if (dst) {
		PGresult *res = PQexec(dst, "SET session_replication_role = replica");
		replica = PQresultStatus(res) == PGRES_COMMAND_OK;
		if (!replica)
			log_debug("target: cannot set session_replication_role = replica: %s", PQresultErrorMessage(res));
		PQclear(res);
	}
	for (;;) {
		struct copy_item *item;
		size_t finished = SIZE_MAX;
		if (!take(sh, &item, &finished))
			break;
		if (!item) {
			/* a table's data is in: its keys and indexes before more copying */
			if (job->after_table(job->after_ctx, finished, dst) < 0)
				log_debug("table %s.%s: its keys and indexes were not built", job->tables[finished].schema,
					  job->tables[finished].name);
			put_back(sh, SIZE_MAX);
			continue;
		}
		struct copy_table *t = &job->tables[item->table];
		if (item->range == ITEM_WHOLE) {
			if (!src || !dst || !meta) {
				snprintf(t->error, sizeof t->error, "no connection");
				t->outcome = COPY_FAILED;
			} else if (pgconn_command(dst, "SET synchronous_commit = on") < 0) {
				t->outcome = COPY_FAILED;
			} else {
				copy_one(job, t, NULL, src, dst, meta, replica);
			}
			put_back(sh, t->outcome == COPY_DONE ? item->table : SIZE_MAX);
			continue;
		}
		/* a range: copied as a table of its own, then counted in its table */
		struct copy_table part = { .schema = t->schema, .name = t->name };
		if (item->range == ITEM_FINISH) {
			part.outcome = COPY_DONE;
		} else if (!src || !dst || !meta) {
			snprintf(part.error, sizeof part.error, "no connection");
			part.outcome = COPY_FAILED;
		} else if (pgconn_command(dst, "SET synchronous_commit = on") < 0) {
			snprintf(part.error, sizeof part.error, "target: cannot set synchronous_commit");
			part.outcome = COPY_FAILED;
		} else {
			copy_one(job, &part, &t->ranges[item->range], src, dst, meta, replica);
		}
		/* the worker that counts the last range is the one left on t */
		bool last = range_done(sh, t, &part, item->range == ITEM_FINISH);
		if (last)
			finish_split_table(job, t, dst, meta);
		put_back(sh, last && t->outcome == COPY_DONE ? item->table : SIZE_MAX);
	}
	PQfinish(src);
	PQfinish(meta);
	PQfinish(dst);
	return NULL;
}

int copy_tables(struct copy_job *job)
{
	struct copy_shared sh = { .job = job, .next = 0 };
	pthread_mutex_init(&sh.lock, NULL);
	pthread_cond_init(&sh.changed, NULL);
	sh.done = xcalloc(job->n_tables ? job->n_tables : 1, sizeof *sh.done);
	/* the ranges of split tables first (the biggest work), then the
	 * tables copied whole */
	size_t cap = job->n_tables;
	for (size_t i = 0; i < job->n_tables; i++)
		cap += (size_t)job->tables[i].n_ranges;
	sh.items = xcalloc(cap ? cap : 1, sizeof *sh.items);
	int64_t now_us = clock_mono_us();
	for (size_t i = 0; i < job->n_tables; i++) {
		struct copy_table *t = &job->tables[i];
		if (!t->ranges)
			continue;
		t->t0_us = now_us;
		t->ranges_left = 0;
		for (int k = 0; k < t->n_ranges; k++)
			if (!t->ranges[k].copied) {
				sh.items[sh.n_items++] = (struct copy_item){ i, k };
				t->ranges_left++;
			}
		if (t->ranges_left == 0)
			sh.items[sh.n_items++] = (struct copy_item){ i, ITEM_FINISH };
	}
	for (size_t i = 0; i < job->n_tables; i++)
		if (!job->tables[i].ranges)
			sh.items[sh.n_items++] = (struct copy_item){ i, ITEM_WHOLE };
	unsigned n = job->workers ? job->workers : 1;
	if (n > sh.n_items)
		n = (unsigned)sh.n_items;
	pthread_t *threads = xcalloc(n ? n : 1, sizeof *threads);
	unsigned started = 0;
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&threads[i], NULL, worker, &sh) != 0) {
			log_error("cannot start copy worker %u", i + 1);
			break;
		}
		started++;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	free(sh.items);
	free(sh.done);
	pthread_cond_destroy(&sh.changed);
	pthread_mutex_destroy(&sh.lock);
	if (started == 0 && job->n_tables > 0)
		return -1;
	return 0;
}

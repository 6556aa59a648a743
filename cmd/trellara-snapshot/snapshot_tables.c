/*
 * snapshot_tables.c - trellara-snapshot --create-tables: the missing
 * target tables from the source's catalogs (snapshot_int.h).  This file
 * reads the catalogs into a tabledef_set and runs the statements
 * tabledef.c makes of it; no pg_dump, so any source version works.
 *
 * Why the SQL built here is safe: every identifier the statements hold
 * is quoted by the source server (quote_ident), every type, expression
 * and definition is the server's own deparsed SQL (format_type,
 * pg_get_expr, pg_get_constraintdef, pg_get_indexdef,
 * pg_get_partkeydef) - text PostgreSQL generates from its catalogs to be
 * run again, as pg_dump does, not row data.  The catalogs are read with
 * search_path empty, so every name outside pg_catalog comes
 * schema-qualified, and the statements run on the target with
 * search_path empty too: a name means the same object on both sides.
 * Flow table names from the flow file reach the source only as
 * parameters (to_regclass($1) of a name quoted with PQescapeIdentifier).
 */
#include "snapshot_int.h"
#include "tabledef.h"

#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The flow table i and every partition below it, parents first;
 * oids[] gets each one's oid (owned, like the set's tables). */
static const char tree_sql[] =
	"WITH root AS (SELECT to_regclass($1)::oid AS oid),"
	" tree AS (SELECT r.oid AS relid, 0::oid AS parentrelid, 0 AS level FROM root r"
	"  UNION ALL SELECT pt.relid::oid, pt.parentrelid::oid, pt.level FROM root r, pg_partition_tree(r.oid) pt"
	"  WHERE pt.level > 0)"
	" SELECT c.oid, t.parentrelid, quote_ident(n.nspname), quote_ident(c.relname), n.nspname || '.' || c.relname,"
	"  c.relpersistence = 'u', CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,"
	"  CASE WHEN t.level > 0 THEN pg_get_expr(c.relpartbound, c.oid) END, c.relreplident,"
	"  (SELECT quote_ident(ic.relname) FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
	"   WHERE i.indrelid = c.oid AND i.indisreplident)"
	" FROM tree t JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace"
	" ORDER BY t.level, n.nspname, c.relname";

/* A relation's columns in attnum order, with the sequence an identity
 * column uses or the column owns (serial), else the one its default calls
 * (DEFAULT nextval('...') without OWNED BY: the pg_attrdef row's
 * dependency; the last column says which). */
static const char columns_sql[] =
	"SELECT quote_ident(a.attname), a.attname, format_type(a.atttypid, a.atttypmod),"
	"  CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation"
	"   THEN quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END,"
	"  pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity, a.attnotnull,"
	"  quote_ident(sn.nspname), quote_ident(sc.relname), format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement,"
	"  s.seqmin, s.seqmax, s.seqcache, s.seqcycle, dq.owned"
	" FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
	" LEFT JOIN pg_collation co ON co.oid = a.attcollation LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace"
	" LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
	" LEFT JOIN LATERAL (SELECT q.seq AS objid, q.owned FROM ("
	"  SELECT dep.objid AS seq, true AS owned FROM pg_depend dep"
	"   WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass"
	"   AND dep.refobjid = a.attrelid AND dep.refobjsubid = a.attnum AND dep.deptype IN ('a', 'i')"
	"  UNION ALL SELECT dep.refobjid, false FROM pg_depend dep"
	"   WHERE dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid"
	"   AND dep.refclassid = 'pg_class'::regclass AND dep.refobjsubid = 0) q"
	"  JOIN pg_class x ON x.oid = q.seq AND x.relkind = 'S'"
	"  ORDER BY q.owned DESC, q.seq LIMIT 1) dq ON true"
	" LEFT JOIN pg_class sc ON sc.oid = dq.objid LEFT JOIN pg_namespace sn ON sn.oid = sc.relnamespace"
	" LEFT JOIN pg_sequence s ON s.seqrelid = sc.oid"
	" WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

/* Its constraints but NOT NULL ones, without the copies PostgreSQL makes
 * of a foreign key for each partition of the table it references (their
 * parent constraint is on the same table). */
static const char constraints_sql[] =
	"SELECT quote_ident(k.conname), pg_get_constraintdef(k.oid), k.coninhcount > 0 OR k.conparentid <> 0, k.contype,"
	"  rn.nspname || '.' || rc.relname, pn.nspname || '.' || pc.relname"
	" FROM pg_constraint k"
	" LEFT JOIN pg_class rc ON rc.oid = k.confrelid LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace"
	" LEFT JOIN pg_class pc ON pc.oid = pg_partition_root(NULLIF(k.confrelid, 0))"
	" LEFT JOIN pg_namespace pn ON pn.oid = pc.relnamespace"
	" WHERE k.conrelid = $1::oid AND k.contype IN ('c', 'p', 'u', 'x', 'f')"
	" AND NOT EXISTS (SELECT 1 FROM pg_constraint p WHERE p.oid = k.conparentid AND p.conrelid = k.conrelid)"
	" ORDER BY k.contype, k.conname";

/* Its indexes that back no key constraint. */
static const char indexes_sql[] =
	"SELECT pg_get_indexdef(i.indexrelid), EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)"
	" FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
	" WHERE i.indrelid = $1::oid AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid"
	"  AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u', 'x'))"
	" ORDER BY ic.relname";

static char *value(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : xstrdup(PQgetvalue(res, row, col));
}

static bool is_true(const PGresult *res, int row, int col)
{
	return !PQgetisnull(res, row, col) && strcmp(PQgetvalue(res, row, col), "t") == 0;
}

static int read_columns(PGconn *src, const char *oid, struct tabledef_table *t)
{
	const char *p[1] = { oid };
	PGresult *res = pgconn_query(src, columns_sql, 1, p);
	if (!res)
		return -1;
	t->n_columns = (size_t)PQntuples(res);
	t->columns = xcalloc(t->n_columns ? t->n_columns : 1, sizeof *t->columns);
	for (int r = 0; r < PQntuples(res); r++) {
		struct tabledef_column *c = &t->columns[r];
		c->name = value(res, r, 0);
		c->name_display = value(res, r, 1);
		c->type = value(res, r, 2);
		c->collation = value(res, r, 3);
		c->default_expr = value(res, r, 4);
		c->generated = PQgetvalue(res, r, 5)[0];
		c->identity = PQgetvalue(res, r, 6)[0];
		c->not_null = is_true(res, r, 7);
		if (!PQgetisnull(res, r, 8) && !PQgetisnull(res, r, 11)) {
			struct tabledef_seq *s = xcalloc(1, sizeof *s);
			s->schema = value(res, r, 8);
			s->name = value(res, r, 9);
			s->type = value(res, r, 10);
			s->start = value(res, r, 11);
			s->increment = value(res, r, 12);
			s->min = value(res, r, 13);
			s->max = value(res, r, 14);
			s->cache = value(res, r, 15);
			s->cycle = is_true(res, r, 16);
			s->by_default = !is_true(res, r, 17);
			c->seq = s;
		}
	}
	PQclear(res);
	return 0;
}

static void add_constraint(struct tabledef_constraint **list, size_t *n, const PGresult *res, int r)
{
	*list = xrealloc(*list, (*n + 1) * sizeof **list);
	(*list)[(*n)++] = (struct tabledef_constraint){
		.name = value(res, r, 0), .def = value(res, r, 1), .inherited = is_true(res, r, 2),
		.referenced_display = value(res, r, 4), .referenced_root_display = value(res, r, 5),
	};
}

static int read_constraints(PGconn *src, const char *oid, struct tabledef_table *t)
{
	const char *p[1] = { oid };
	PGresult *res = pgconn_query(src, constraints_sql, 1, p);
	if (!res)
		return -1;
	for (int r = 0; r < PQntuples(res); r++) {
		char type = PQgetvalue(res, r, 3)[0];
		if (type == 'c')
			add_constraint(&t->checks, &t->n_checks, res, r);
		else if (type == 'f')
			add_constraint(&t->fkeys, &t->n_fkeys, res, r);
		else
			add_constraint(&t->keys, &t->n_keys, res, r);
	}
	PQclear(res);
	res = pgconn_query(src, indexes_sql, 1, p);
	if (!res)
		return -1;
	t->n_indexes = (size_t)PQntuples(res);
	t->indexes = xcalloc(t->n_indexes ? t->n_indexes : 1, sizeof *t->indexes);
	for (int r = 0; r < PQntuples(res); r++)
		t->indexes[r] = (struct tabledef_index){ .def = value(res, r, 0), .inherited = is_true(res, r, 1) };
	PQclear(res);
	return 0;
}

/* The tree of flow table "qualified" (quoted schema.name) into set. */
static int read_tree(PGconn *src, const char *qualified, const char *display, struct tabledef_set *set)
{
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(src, tree_sql, 1, p);
	if (!res)
		return -1;
	int rc = -1;
	if (PQntuples(res) == 0 || PQgetisnull(res, 0, 0)) {
		log_error("cannot create target table %s: the source has no such table", display);
		goto out;
	}
	size_t first = set->n_tables;
	char **oids = xcalloc((size_t)PQntuples(res), sizeof *oids);
	for (int r = 0; r < PQntuples(res); r++) {
		struct tabledef_table *t = tabledef_set_add(set);
		oids[r] = PQgetvalue(res, r, 0);
		t->parent = -1;
		for (int k = 0; k < r; k++)
			if (strcmp(oids[k], PQgetvalue(res, r, 1)) == 0)
				t->parent = (int)(first + (size_t)k);
		t->schema = value(res, r, 2);
		t->name = value(res, r, 3);
		t->display = value(res, r, 4);
		t->unlogged = is_true(res, r, 5);
		t->partkey = value(res, r, 6);
		t->bound = value(res, r, 7);
		t->replident = PQgetvalue(res, r, 8)[0];
		t->replident_index = value(res, r, 9);
		if (r > 0 && (t->parent < 0 || !t->bound)) {
			log_error("cannot create target table %s: partition %s has no parent or bound in its tree", display,
				  t->display);
			free(oids);
			goto out;
		}
		if (read_columns(src, oids[r], t) < 0 || read_constraints(src, oids[r], t) < 0) {
			free(oids);
			goto out;
		}
	}
	free(oids);
	rc = 0;
out:
	PQclear(res);
	return rc;
}

static int schema_exists(PGconn *dst, const char *schema, bool *exists)
{
	const char *p[1] = { schema };
	PGresult *res = pgconn_query(dst, "SELECT to_regnamespace($1) IS NOT NULL", 1, p);
	if (!res)
		return -1;
	*exists = is_true(res, 0, 0);
	PQclear(res);
	return 0;
}

/* The schemas the target has, the types and collations of the set's
 * columns it lacks. */
static int mark_missing_types(PGconn *dst, struct tabledef_set *set)
{
	for (size_t i = 0; i < set->n_tables; i++) {
		struct tabledef_table *t = &set->tables[i];
		if (schema_exists(dst, t->schema, &t->schema_exists) < 0)
			return -1;
		for (size_t k = 0; k < t->n_columns; k++) {
			if (t->columns[k].seq && schema_exists(dst, t->columns[k].seq->schema, &t->columns[k].seq->schema_exists) < 0)
				return -1;
			struct tabledef_column *c = &t->columns[k];
			const char *p[2] = { c->type, c->collation };
			PGresult *res = pgconn_query(dst,
						     "SELECT to_regtype($1) IS NULL, $2::text IS NOT NULL AND to_regcollation($2) IS NULL",
						     2, p);
			if (!res) {
				log_error("cannot create target table %s: the target cannot look up type %s of column \"%s\"",
					  t->display, c->type, c->name_display);
				return -1;
			}
			c->type_missing = is_true(res, 0, 0);
			c->collation_missing = is_true(res, 0, 1);
			PQclear(res);
		}
	}
	return 0;
}

/* BEGIN with search_path empty (see the top of this file). */
static int begin(PGconn *conn, const char *mode)
{
	char *sql = xasprintf("BEGIN%s", mode);
	int rc = pgconn_command(conn, sql);
	free(sql);
	if (rc < 0)
		return -1;
	PGresult *res = pgconn_query(conn, "SELECT pg_catalog.set_config('search_path', '', true)", 0, NULL);
	if (!res) {
		pgconn_command(conn, "ROLLBACK");
		return -1;
	}
	PQclear(res);
	return 0;
}

/* The pre-data statements of the set, made and run in one target
 * transaction: all or none.  Before the tables, the types and collations their columns
 * need are looked up on the target, in that transaction. */
static int create_on_target(PGconn *dst, struct tabledef_set *set, const char *section)
{
	struct tabledef_stmts s = { 0 };
	if (begin(dst, "") < 0)
		return -1;
	int rc = -1;
	char err[1024];
	if (mark_missing_types(dst, set) < 0)
		goto out;
	if (tabledef_pre_data(set, &s, err, sizeof err) < 0) {
		log_error("%s", err);
		log_hint("create it on the target first (CREATE TYPE, CREATE DOMAIN, CREATE EXTENSION, CREATE COLLATION),"
			 " or the table");
		goto out;
	}
	for (size_t i = 0; i < s.n; i++) {
		if (!s.items[i].sql) {
			log_warn("%s", s.items[i].note);
			continue;
		}
		log_debug("--create-tables %s: %s", section, s.items[i].sql);
		if (pgconn_command(dst, s.items[i].sql) < 0) {
			log_error("cannot create target table %s (%s): %s failed", s.items[i].table_display, section,
				  s.items[i].sql);
			goto out;
		}
	}
	rc = pgconn_command(dst, "COMMIT");
out:
	if (rc < 0)
		pgconn_command(dst, "ROLLBACK");
	tabledef_stmts_free(&s);
	return rc;
}

int snapshot_create_missing_tables(PGconn *src, PGconn *dst, const struct flow_config *cfg, const char *section,
				   bool only_missing, bool *created)
{
	int rc = -1;
	struct tabledef_set set = { 0 };
	char **flow = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *flow);
	bool src_open = false;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		flow[i] = xstrdup(name);
		if (!only_missing)
			continue;
		char *qs = pgconn_quote_ident(dst, cfg->tables[i].schema), *qn = pgconn_quote_ident(dst, cfg->tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		const char *p[1] = { qualified };
		PGresult *res = pgconn_query(dst, "SELECT to_regclass($1) IS NULL", 1, p);
		free(qualified);
		free(qs);
		free(qn);
		if (!res)
			goto out;
		created[i] = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
	}
	/* the source's catalogs at one point in time */
	if (begin(src, " ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		goto out;
	src_open = true;
	for (size_t i = 0; i < cfg->n_tables; i++) {
		if (!created[i])
			continue;
		char *qs = pgconn_quote_ident(src, cfg->tables[i].schema), *qn = pgconn_quote_ident(src, cfg->tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		int r = read_tree(src, qualified, flow[i], &set);
		free(qualified);
		free(qs);
		free(qn);
		if (r < 0)
			goto out;
	}
	src_open = false;
	if (pgconn_command(src, "COMMIT") < 0)
		goto out;
	if (set.n_tables == 0) {
		rc = 0;
		goto out;
	}
	if (create_on_target(dst, &set, section) < 0)
		goto out;
	for (size_t i = 0; i < cfg->n_tables; i++)
		if (created[i])
			log_info("target table %s: %s created from the source's catalogs", flow[i], section);
	rc = 0;
out:
	if (src_open)
		pgconn_command(src, "ROLLBACK");
	tabledef_set_free(&set);
	for (size_t i = 0; i < cfg->n_tables; i++)
		free(flow[i]);
	free(flow);
	return rc;
}

/* ---- post-data: each table's keys and indexes in parallel ---- */

/* One flow table's keys, indexes and replica identity (its tree's). */
enum build_state { BUILD_NONE = 0, BUILD_PENDING, BUILD_DONE, BUILD_FAILED };
struct build_group {
	const char *display;       /* the flow table, "schema.name" */
	struct tabledef_stmts stmts; /* owned */
	enum build_state state;    /* written by the one worker that builds it */
};

struct snapshot_post_data {
	const struct flow_config *cfg;
	size_t n;                   /* cfg->n_tables */
	char **flow;                /* owned: each flow table's "schema.name" */
	bool *keys, *fkeys;         /* owned copies */
	struct tabledef_set set;    /* owned: the source's catalogs at one point */
	size_t *from, *to;          /* owned: each flow table's part of set */
	struct build_group *groups; /* owned: by flow table */
};

/* A target session about to build indexes: an index build sorts its
 * table's keys, in memory rather than in runs on disk when the server's
 * setting is small (never lowered). */
static void build_session(PGconn *conn)
{
	PGresult *res = PQexec(conn, "SELECT set_config('maintenance_work_mem', '" SNAPSHOT_BUILD_MAINTENANCE_WORK_MEM "', false)"
				     " WHERE pg_size_bytes(current_setting('maintenance_work_mem'))"
				     " < pg_size_bytes('" SNAPSHOT_BUILD_MAINTENANCE_WORK_MEM "')");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		log_debug("target: maintenance_work_mem left as it is: %s", PQresultErrorMessage(res));
	PQclear(res);
}

/* The statements of group g in one transaction of conn: all or none. */
static void build_one(PGconn *conn, struct build_group *g)
{
	int64_t t0_us = clock_mono_us();
	g->state = BUILD_FAILED;
	if (!conn) {
		log_error("cannot create target table %s (post-data): no connection to the target", g->display);
		return;
	}
	if (begin(conn, "") < 0)
		return;
	for (size_t i = 0; i < g->stmts.n; i++) {
		log_debug("--create-tables post-data: %s", g->stmts.items[i].sql);
		if (pgconn_command(conn, g->stmts.items[i].sql) < 0) {
			log_error("cannot create target table %s (post-data): %s failed", g->stmts.items[i].table_display,
				  g->stmts.items[i].sql);
			pgconn_command(conn, "ROLLBACK");
			return;
		}
	}
	if (pgconn_command(conn, "COMMIT") < 0)
		return;
	g->state = BUILD_DONE;
	log_info("target table %s: keys and indexes built (%zu statements, %.2f s)", g->display, g->stmts.n,
		 (double)(clock_mono_us() - t0_us) / 1e6);
}

int snapshot_post_data_build(struct snapshot_post_data *pd, size_t table, PGconn *dst)
{
	if (table >= pd->n || pd->groups[table].state != BUILD_PENDING)
		return 0;
	if (dst)
		build_session(dst);
	build_one(dst, &pd->groups[table]);
	return pd->groups[table].state == BUILD_DONE ? 0 : -1;
}

struct build_shared {
	struct snapshot_post_data *pd;
	size_t *pending; /* the flow tables still to build */
	size_t n_pending;
	size_t next;
	pthread_mutex_t lock;
};

static void *build_worker(void *arg)
{
	struct build_shared *sh = arg;
	PGconn *conn = pgconn_connect(sh->pd->cfg->target_database_url, PGCONN_NORMAL, "trellara-snapshot", "target");
	for (;;) {
		pthread_mutex_lock(&sh->lock);
		size_t i = sh->next++;
		pthread_mutex_unlock(&sh->lock);
		if (i >= sh->n_pending)
			break;
		snapshot_post_data_build(sh->pd, sh->pending[i], conn);
	}
	PQfinish(conn);
	return NULL;
}

/* The groups still pending, snapshot.workers at a time, each worker on a
 * target connection of its own.  0 when every one is built, -1 (logged)
 * otherwise. */
static int build_pending(struct snapshot_post_data *pd)
{
	struct build_shared sh = { .pd = pd };
	sh.pending = xcalloc(pd->n ? pd->n : 1, sizeof *sh.pending);
	for (size_t i = 0; i < pd->n; i++)
		if (pd->groups[i].state == BUILD_PENDING)
			sh.pending[sh.n_pending++] = i;
	pthread_mutex_init(&sh.lock, NULL);
	size_t workers = pd->cfg->snapshot_workers ? (size_t)pd->cfg->snapshot_workers : 1;
	if (workers > sh.n_pending)
		workers = sh.n_pending;
	pthread_t *threads = xcalloc(workers ? workers : 1, sizeof *threads);
	size_t started = 0;
	for (size_t i = 0; i < workers; i++) {
		if (pthread_create(&threads[i], NULL, build_worker, &sh) != 0) {
			log_error("cannot start index build worker %zu", i + 1);
			break;
		}
		started++;
	}
	for (size_t i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	free(sh.pending);
	pthread_mutex_destroy(&sh.lock);
	int rc = 0;
	for (size_t i = 0; i < pd->n; i++)
		if (pd->groups[i].state == BUILD_PENDING || pd->groups[i].state == BUILD_FAILED)
			rc = -1;
	return rc;
}

struct snapshot_post_data *snapshot_post_data_plan(PGconn *src, const struct flow_config *cfg, const bool *keys,
						   const bool *fkeys)
{
	size_t n = cfg->n_tables;
	struct snapshot_post_data *pd = xcalloc(1, sizeof *pd);
	pd->cfg = cfg;
	pd->n = n;
	pd->flow = xcalloc(n ? n : 1, sizeof *pd->flow);
	pd->keys = xcalloc(n ? n : 1, sizeof *pd->keys);
	pd->fkeys = xcalloc(n ? n : 1, sizeof *pd->fkeys);
	pd->from = xcalloc(n ? n : 1, sizeof *pd->from);
	pd->to = xcalloc(n ? n : 1, sizeof *pd->to);
	pd->groups = xcalloc(n ? n : 1, sizeof *pd->groups);
	for (size_t i = 0; i < n; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		pd->flow[i] = xstrdup(name);
		pd->keys[i] = keys[i];
		pd->fkeys[i] = fkeys[i];
	}
	/* the source's catalogs at one point in time */
	if (begin(src, " ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		goto failed;
	for (size_t i = 0; i < n; i++) {
		pd->from[i] = pd->to[i] = pd->set.n_tables;
		if (!keys[i] && !fkeys[i])
			continue;
		char *qs = pgconn_quote_ident(src, cfg->tables[i].schema), *qn = pgconn_quote_ident(src, cfg->tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		int r = read_tree(src, qualified, pd->flow[i], &pd->set);
		free(qualified);
		free(qs);
		free(qn);
		if (r < 0) {
			pgconn_command(src, "ROLLBACK");
			goto failed;
		}
		pd->to[i] = pd->set.n_tables;
	}
	if (pgconn_command(src, "COMMIT") < 0)
		goto failed;
	/* keys and indexes: one transaction per flow table */
	for (size_t i = 0; i < n; i++) {
		struct build_group *g = &pd->groups[i];
		g->display = pd->flow[i];
		if (!keys[i])
			continue;
		tabledef_post_data_keys(&pd->set, pd->from[i], pd->to[i], &g->stmts);
		if (g->stmts.n)
			g->state = BUILD_PENDING;
	}
	return pd;
failed:
	snapshot_post_data_free(pd);
	return NULL;
}

int snapshot_post_data_finish(struct snapshot_post_data *pd, PGconn *dst)
{
	size_t n = pd->n;
	if (build_pending(pd) < 0)
		return -1;
	fault_point("snapshot.after_keys_before_foreign_keys");
	/* then the foreign keys into flow tables, together: each needs the
	 * key it references */
	struct tabledef_stmts fk = { 0 };
	int rc = -1;
	bool dst_open = false;
	for (size_t i = 0; i < n; i++)
		if (pd->fkeys[i])
			tabledef_post_data_fkeys(&pd->set, pd->from[i], pd->to[i], (const char *const *)pd->flow, n, &fk);
	if (fk.n) {
		if (begin(dst, "") < 0)
			goto out;
		dst_open = true;
		for (size_t i = 0; i < fk.n; i++) {
			if (!fk.items[i].sql) {
				log_warn("%s", fk.items[i].note);
				continue;
			}
			log_debug("--create-tables post-data: %s", fk.items[i].sql);
			if (pgconn_command(dst, fk.items[i].sql) < 0) {
				log_error("cannot create target table %s (post-data): %s failed", fk.items[i].table_display,
					  fk.items[i].sql);
				goto out;
			}
		}
		dst_open = false;
		if (pgconn_command(dst, "COMMIT") < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (pd->keys[i])
			log_info("target table %s: post-data created from the source's catalogs", pd->flow[i]);
	rc = 0;
out:
	if (dst_open)
		pgconn_command(dst, "ROLLBACK");
	tabledef_stmts_free(&fk);
	return rc;
}

void snapshot_post_data_free(struct snapshot_post_data *pd)
{
	if (!pd)
		return;
	for (size_t i = 0; i < pd->n; i++) {
		tabledef_stmts_free(&pd->groups[i].stmts);
		free(pd->flow[i]);
	}
	free(pd->groups);
	tabledef_set_free(&pd->set);
	free(pd->flow);
	free(pd->keys);
	free(pd->fkeys);
	free(pd->from);
	free(pd->to);
	free(pd);
}

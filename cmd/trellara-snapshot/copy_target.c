/*
 * copy_target.c - the target side of a table copy (copy_target.h): rows
 * present, foreign keys from outside the copied tables, emptying the
 * run's tables together (copy_empty_targets, copy.h), the triggers a COPY
 * would fire.  Every name is quoted; values are parameters.
 */
#include "copy.h"
#include "copy_target.h"

#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "ONLY " for a relation read or emptied on its own; nothing for a
 * partitioned table, whose rows are those of its partitions. */
const char *copy_only_for(char relkind)
{
	return relkind == 'p' ? "" : "ONLY ";
}

/* 1 when the target relation holds a row, 0 when it is empty, -1 on error. */
int copy_has_rows(PGconn *dst, const char *qualified, char relkind)
{
	char *sql = xasprintf("SELECT EXISTS (SELECT 1 FROM %s%s)", copy_only_for(relkind), qualified);
	PGresult *res = pgconn_query(dst, sql, 0, NULL);
	free(sql);
	int rc = res ? strcmp(PQgetvalue(res, 0, 0), "t") == 0 : -1;
	PQclear(res);
	return rc;
}

/* A foreign key from a relation outside the set (a partitioned table's
 * partitions belong to it) into one inside it: the constraint, the
 * referencing and the referenced table into the buffers.  0 none, 1
 * found, -1 on error (logged). */
int copy_referencing_key(PGconn *dst, const char *regclass_array, char *con, char *from, char *to, size_t len)
{
	const char *p[1] = { regclass_array };
	PGresult *res = pgconn_query(
		dst,
		"WITH listed AS (SELECT unnest($1::regclass[])::oid AS rel),"
		" covered AS (SELECT rel AS oid FROM listed UNION"
		"  SELECT t.relid FROM listed l, pg_partition_tree(l.rel) t"
		"  WHERE (SELECT relkind FROM pg_class WHERE oid = l.rel) = 'p')"
		" SELECT con.conname, rn.nspname || '.' || r.relname, fn.nspname || '.' || f.relname"
		" FROM pg_constraint con JOIN pg_class r ON r.oid = con.conrelid JOIN pg_namespace rn ON rn.oid = r.relnamespace"
		" JOIN pg_class f ON f.oid = con.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace"
		" WHERE con.contype = 'f' AND con.confrelid IN (SELECT oid FROM covered)"
		" AND con.conrelid NOT IN (SELECT oid FROM covered)"
		" ORDER BY con.conparentid <> 0, r.relname, con.conname LIMIT 1",
		1, p);
	if (!res)
		return -1;
	int rc = PQntuples(res) == 1;
	if (rc) {
		snprintf(con, len, "%s", PQgetvalue(res, 0, 0));
		snprintf(from, len, "%s", PQgetvalue(res, 0, 1));
		snprintf(to, len, "%s", PQgetvalue(res, 0, 2));
	}
	PQclear(res);
	return rc;
}

/* A foreign key from a relation outside the truncated set into one
 * inside it: TRUNCATE refuses it.  0 none, 1 found (logged with the
 * action), -1 on error. */
static int outside_foreign_key(PGconn *dst, const char *regclass_array, const char *cfg_path)
{
	char con[300], from[300], to[300];
	int rc = copy_referencing_key(dst, regclass_array, con, from, to, sizeof con);
	if (rc == 1) {
		log_error("target table %s has foreign key \"%s\" into %s, which the snapshot must empty: TRUNCATE refuses it,"
			  " and emptying only %s would leave the reference dangling",
			  from, con, to, to);
		log_hint("add %s to dataset.tables of %s (if it is there and copied already, copy every table with --force),"
			 " or drop the constraint on the target for the copy and add it again afterwards:"
			 " ALTER TABLE %s DROP CONSTRAINT \"%s\"",
			 from, cfg_path, from, con);
	}
	return rc;
}

/* {"a"."b","c"."d"} for $1::regclass[]. */
void copy_regclass_array_add(char **arr, const char *qualified)
{
	size_t len = strlen(qualified) * 2 + 4;
	char *item = xmalloc(len), *o = item;
	*o++ = '"';
	for (const char *c = qualified; *c; c++) {
		if (*c == '"' || *c == '\\')
			*o++ = '\\';
		*o++ = *c;
	}
	*o++ = '"';
	*o = '\0';
	char *next = *arr ? xasprintf("%s,%s", *arr, item) : xstrdup(item);
	free(*arr);
	free(item);
	*arr = next;
}

int copy_empty_targets(const struct flow_config *cfg, void *pgconn, struct copy_table *tables, size_t n)
{
	PGconn *dst = pgconn;
	char *list = NULL, *names = NULL, *sql = NULL;
	int rc = -1;
	bool open = false;
	/* no TRUNCATE trigger of the target fires (as in PostgreSQL's apply); a
	 * role that may not say so gets them */
	PGresult *res = PQexec(dst, "SET session_replication_role = replica");
	PQclear(res);
	if (pgconn_command(dst, "BEGIN") < 0)
		goto out;
	open = true;
	/* Every table of the run that exists on the target is in the one
	 * TRUNCATE, the empty ones too: PostgreSQL refuses to truncate a
	 * referenced table unless the referencing table is truncated with it,
	 * rows or not.  Nothing is truncated when all of them are empty. */
	size_t n_listed = 0, n_full = 0;
	for (size_t i = 0; i < n; i++) {
		char *qs = pgconn_quote_ident(dst, tables[i].schema), *qn = pgconn_quote_ident(dst, tables[i].name);
		char *qualified = xasprintf("%s.%s", qs, qn);
		free(qs);
		free(qn);
		char kind = tables[i].keep_rows ? '\0' : copy_relkind(dst, qualified);
		if (!kind) { /* a missing table fails its own copy; a kept split table stays */
			free(qualified);
			continue;
		}
		int full = copy_has_rows(dst, qualified, kind);
		if (full < 0) {
			free(qualified);
			goto out;
		}
		char *item = xasprintf("%s%s", copy_only_for(kind), qualified);
		char *next = names ? xasprintf("%s, %s", names, item) : xstrdup(item);
		free(item);
		free(names);
		names = next;
		copy_regclass_array_add(&list, qualified);
		n_listed++;
		n_full += full > 0;
		free(qualified);
	}
	if (n_full == 0) {
		rc = 0;
		goto out;
	}
	char *arr = xasprintf("{%s}", list);
	int fk = outside_foreign_key(dst, arr, cfg->path);
	free(arr);
	if (fk) {
		rc = fk;
		goto out;
	}
	/* one statement: tables that reference each other are emptied together */
	sql = xasprintf("TRUNCATE %s", names);
	if (pgconn_command(dst, sql) < 0 || pgconn_command(dst, "COMMIT") < 0)
		goto out;
	open = false;
	log_info("emptied %zu target tables before their copy (%zu held rows): %s", n_listed, n_full, names);
	rc = 0;
out:
	if (open)
		pgconn_command(dst, "ROLLBACK");
	res = PQexec(dst, "RESET session_replication_role");
	PQclear(res);
	free(list);
	free(names);
	free(sql);
	return rc;
}

/* Triggers (foreign-key checks included) that a COPY into the target
 * relation fires when session_replication_role is not replica: those
 * for INSERT, enabled.  0 with *names their names, NULL when there are
 * none; -1 when they cannot be read (logged): the copy must not run
 * then, as it would fire whatever is there. */
int copy_insert_triggers(PGconn *dst, const char *qualified, char relkind, char **names)
{
	const char *p[1] = { qualified };
	char *sql = xasprintf("WITH rels AS (SELECT to_regclass($1)::oid AS oid%s)"
			      " SELECT string_agg(DISTINCT coalesce(con.conname, t.tgname), ', ')"
			      " FROM pg_trigger t LEFT JOIN pg_constraint con ON con.oid = t.tgconstraint"
			      " WHERE t.tgrelid IN (SELECT oid FROM rels) AND t.tgenabled <> 'D' AND (t.tgtype & 4) <> 0",
			      relkind == 'p' ? " UNION SELECT relid FROM pg_partition_tree(to_regclass($1))" : "");
	PGresult *res = pgconn_query(dst, sql, 1, p);
	free(sql);
	*names = NULL;
	if (!res || PQntuples(res) != 1) {
		PQclear(res);
		return -1;
	}
	if (!PQgetisnull(res, 0, 0))
		*names = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}


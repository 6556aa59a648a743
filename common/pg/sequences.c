/*
 * sequences.c - the flow's sequences: found, read and set on the source
 * and the target (sequences.h).
 */
#include "trellara/sequences.h"

#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "schema"."name" quoted for SQL; newly allocated. */
static char *quoted_name(PGconn *conn, const char *schema, const char *name)
{
	char *qs = pgconn_quote_ident(conn, schema), *qn = pgconn_quote_ident(conn, name);
	char *q = xasprintf("%s.%s", qs, qn);
	free(qs);
	free(qn);
	return q;
}

static struct flow_sequence *add(struct flow_sequences *seqs)
{
	seqs->items = xrealloc(seqs->items, (seqs->n + 1) * sizeof *seqs->items);
	struct flow_sequence *s = &seqs->items[seqs->n++];
	memset(s, 0, sizeof *s);
	return s;
}

static struct flow_sequence *find(struct flow_sequences *seqs, const char *source_name)
{
	for (size_t i = 0; i < seqs->n; i++)
		if (strcmp(seqs->items[i].source_name, source_name) == 0)
			return &seqs->items[i];
	return NULL;
}

static void set_target(PGconn *dst, struct flow_sequence *s, const char *schema, const char *name)
{
	s->target_name = xasprintf("%s.%s", schema, name);
	s->target_quoted = quoted_name(dst, schema, name);
}

/* The sequences of the columns of one flow table on the source: the ones
 * a column owns (serial, OWNED BY, identity) and the ones a column's
 * default calls (DEFAULT nextval('...') without OWNED BY: the form of
 * older dumps and hand-written schemas; pg_depend records the default's
 * dependency on the sequence), each mapped to the target's sequence of
 * the same table column: the one that column owns, else the one its
 * default calls there, else one of the same name. */
static int resolve_columns(PGconn *src, PGconn *dst, const struct table_config *t, struct flow_sequences *out)
{
	char *table = quoted_name(src, t->schema, t->name);
	const char *p[1] = { table };
	PGresult *res = NULL;
	int rc = -1;
	res = pgconn_query(src,
			   "SELECT sn.nspname, s.relname, a.attname, q.owned FROM ("
			   " SELECT d.objid AS seq, d.refobjsubid AS attnum, true AS owned FROM pg_catalog.pg_depend d"
			   "  WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass"
			   "  AND d.refobjid = pg_catalog.to_regclass($1) AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')"
			   " UNION ALL"
			   " SELECT d.refobjid, ad.adnum, false FROM pg_catalog.pg_attrdef ad JOIN pg_catalog.pg_depend d"
			   "  ON d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid = ad.oid"
			   "  AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjsubid = 0"
			   "  WHERE ad.adrelid = pg_catalog.to_regclass($1)) q"
			   " JOIN pg_catalog.pg_class s ON s.oid = q.seq AND s.relkind = 'S'"
			   " JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace"
			   " JOIN pg_catalog.pg_attribute a ON a.attrelid = pg_catalog.to_regclass($1) AND a.attnum = q.attnum"
			   "  AND NOT a.attisdropped"
			   " ORDER BY a.attnum, q.owned DESC, 1, 2",
			   1, p);
	if (!res)
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		char *name = xasprintf("%s.%s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
		if (find(out, name)) { /* owned and called by the default, or shared by columns: listed once */
			free(name);
			continue;
		}
		struct flow_sequence *s = add(out);
		s->source_name = name;
		s->source_quoted = quoted_name(src, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
		s->owned_by = xasprintf("%s.%s.%s", t->schema, t->name, PQgetvalue(res, i, 2));
		s->by_default = strcmp(PQgetvalue(res, i, 3), "f") == 0;
		/* the target's sequence of the same column; the guards keep
		 * pg_get_serial_sequence from failing on a missing table or column */
		const char *q[4] = { table, PQgetvalue(res, i, 2), PQgetvalue(res, i, 0), PQgetvalue(res, i, 1) };
		PGresult *tr = pgconn_query(
			dst,
			"WITH col AS (SELECT a.attrelid, a.attnum FROM pg_catalog.pg_attribute a"
			"  WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped)"
			" SELECT n.nspname, c.relname FROM pg_catalog.pg_class c"
			" JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
			" WHERE c.relkind = 'S' AND c.oid = COALESCE("
			"  (CASE WHEN EXISTS (SELECT 1 FROM col) THEN pg_catalog.pg_get_serial_sequence($1, $2) END)::regclass,"
			"  (SELECT d.refobjid FROM col JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = col.attrelid AND ad.adnum = col.attnum"
			"   JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid = ad.oid"
			"   AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjsubid = 0"
			"   JOIN pg_catalog.pg_class x ON x.oid = d.refobjid AND x.relkind = 'S' ORDER BY d.refobjid LIMIT 1),"
			"  (SELECT x.oid FROM pg_catalog.pg_class x JOIN pg_catalog.pg_namespace xn ON xn.oid = x.relnamespace"
			"   WHERE xn.nspname = $3 AND x.relname = $4 AND x.relkind = 'S'))",
			4, q);
		if (!tr)
			goto out;
		if (PQntuples(tr) == 1)
			set_target(dst, s, PQgetvalue(tr, 0, 0), PQgetvalue(tr, 0, 1));
		else
			log_warn("sequence \"%s\" of column \"%s\": the target's column has no sequence; it is left alone",
				 s->source_name, s->owned_by);
		PQclear(tr);
	}
	rc = 0;
out:
	PQclear(res);
	free(table);
	return rc;
}

/* The sequence schema.name on conn: 1 when it exists, 0 when not, -1. */
static int sequence_exists(PGconn *conn, const char *schema, const char *name)
{
	const char *p[2] = { schema, name };
	PGresult *res = pgconn_query(conn,
				     "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
				     " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'S'",
				     2, p);
	if (!res)
		return -1;
	int found = PQntuples(res) == 1;
	PQclear(res);
	return found;
}

int sequences_resolve(PGconn *src, PGconn *dst, const struct flow_config *cfg, struct flow_sequences *out)
{
	memset(out, 0, sizeof *out);
	int rc = -1, missing = 0;
	for (size_t i = 0; i < cfg->n_tables; i++)
		if (resolve_columns(src, dst, &cfg->tables[i], out) < 0)
			goto out;
	for (size_t i = 0; i < cfg->n_sequences; i++) {
		const char *listed = cfg->sequences[i];
		const char *dot = strchr(listed, '.'); /* the loader checked "schema.name" */
		char *schema = xstrndup(listed, (size_t)(dot - listed));
		const char *name = dot + 1;
		int on_source = sequence_exists(src, schema, name);
		int on_target = on_source < 0 ? -1 : sequence_exists(dst, schema, name);
		if (on_source < 0 || on_target < 0) {
			free(schema);
			goto out;
		}
		if (!on_source || !on_target) {
			log_error("sequence \"%s\" of dataset.sequences in \"%s\" does not exist on the %s%s", listed, cfg->path,
				  on_source ? "target" : "source", on_source || on_target ? "" : " nor on the target");
			missing++;
		} else {
			struct flow_sequence *s = find(out, listed);
			if (!s) {
				s = add(out);
				s->source_name = xstrdup(listed);
				s->source_quoted = quoted_name(src, schema, name);
				set_target(dst, s, schema, name);
			}
			s->listed = true;
		}
		free(schema);
	}
	if (missing) {
		log_hint("create the sequence%s, or remove %s from dataset.sequences (names are schema.name, exactly as in the catalog)",
			 missing > 1 ? "s" : "", missing > 1 ? "them" : "it");
		rc = SEQUENCES_CONFIG;
		goto out;
	}
	rc = 0;
out:
	return rc;
}

/* Does pg_catalog have pg_get_sequence_data(regclass) (PostgreSQL 19)?
 * 1, 0, or -1. */
static int has_get_sequence_data(PGconn *conn)
{
	PGresult *res = pgconn_query(conn,
				     "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc WHERE proname = 'pg_get_sequence_data'"
				     " AND pronamespace = 'pg_catalog'::regnamespace"
				     " AND proargtypes = '2205'::oidvector)", /* regclass */
				     0, NULL);
	if (!res)
		return -1;
	int has = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return has;
}

static bool parse_i64(const char *text, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end)
		return false;
	*out = v;
	return true;
}

static int read_state(PGconn *conn, const char *role, const char *display, const char *quoted, bool use_function,
		      struct seq_state *st)
{
	const char *p[1] = { quoted };
	char *sql = use_function ? NULL : xasprintf("SELECT last_value, is_called FROM %s", quoted);
	PGresult *res = use_function ? pgconn_query(conn,
						    "SELECT last_value, is_called FROM pg_catalog.pg_get_sequence_data($1::regclass)",
						    1, p)
				     : pgconn_query(conn, sql, 0, NULL);
	int rc = -1;
	if (!res)
		goto out;
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0) || PQgetisnull(res, 0, 1) ||
	    !parse_i64(PQgetvalue(res, 0, 0), &st->last_value)) {
		/* pg_get_sequence_data gives NULLs for what it may not read */
		log_error("cannot read the state of sequence \"%s\" on the %s", display, role);
		log_hint("the %s role needs SELECT or USAGE on the sequence", role);
		goto out;
	}
	st->is_called = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	rc = 0;
out:
	PQclear(res);
	free(sql);
	return rc;
}

static int read_params(PGconn *conn, const char *display, const char *quoted, struct seq_params *params)
{
	const char *p[1] = { quoted };
	PGresult *res = pgconn_query(conn,
				     "SELECT seqincrement, seqmin, seqmax FROM pg_catalog.pg_sequence WHERE seqrelid = $1::regclass",
				     1, p);
	int rc = -1;
	if (!res)
		goto out;
	if (PQntuples(res) != 1 || !parse_i64(PQgetvalue(res, 0, 0), &params->increment) || params->increment == 0 ||
	    !parse_i64(PQgetvalue(res, 0, 1), &params->min_value) || !parse_i64(PQgetvalue(res, 0, 2), &params->max_value)) {
		log_error("cannot read the definition of sequence \"%s\" on the target", display);
		goto out;
	}
	rc = 0;
out:
	PQclear(res);
	return rc;
}

int sequences_read(PGconn *src, PGconn *dst, struct flow_sequences *seqs)
{
	int src_fn = has_get_sequence_data(src), dst_fn = src_fn < 0 ? -1 : has_get_sequence_data(dst);
	if (src_fn < 0 || dst_fn < 0)
		return -1;
	for (size_t i = 0; i < seqs->n; i++) {
		struct flow_sequence *s = &seqs->items[i];
		s->read = false;
		if (!s->target_name)
			continue;
		if (read_state(src, "source", s->source_name, s->source_quoted, src_fn, &s->source) < 0 ||
		    read_state(dst, "target", s->target_name, s->target_quoted, dst_fn, &s->target) < 0 ||
		    read_params(dst, s->target_name, s->target_quoted, &s->target_params) < 0)
			return -1;
		s->target_after = s->target;
		s->read = true;
	}
	return 0;
}

int sequences_sync(PGconn *dst, struct flow_sequences *seqs, uint64_t margin)
{
	int rc = 0;
	for (size_t i = 0; i < seqs->n; i++) {
		struct flow_sequence *s = &seqs->items[i];
		if (!s->read)
			continue;
		s->decision = seq_decide(&s->source, &s->target, &s->target_params, margin);
		s->target_after = s->target;
		switch (s->decision.action) {
		case SEQ_SET: {
			char value[32];
			snprintf(value, sizeof value, "%" PRId64, s->decision.want.last_value);
			const char *p[3] = { s->target_quoted, value, s->decision.want.is_called ? "true" : "false" };
			PGresult *res = pgconn_query(dst, "SELECT pg_catalog.setval($1::regclass, $2::bigint, $3::boolean)", 3, p);
			if (!res)
				return -1;
			PQclear(res);
			s->target_after = s->decision.want;
			break;
		}
		case SEQ_KEEP_AHEAD:
			log_info("sequence \"%s\" on the target is ahead of the source's \"%s\": left as it is (never moved backwards)",
				 s->target_name, s->source_name);
			break;
		case SEQ_KEEP_SAME:
			break;
		case SEQ_OUT_OF_RANGE:
			log_error("sequence \"%s\": the source's value %" PRId64 " with a margin of %" PRIu64
				  " does not fit the target sequence \"%s\" (%" PRId64 "..%" PRId64 ", increment %" PRId64 ")",
				  s->source_name, s->source.last_value, margin, s->target_name, s->target_params.min_value,
				  s->target_params.max_value, s->target_params.increment);
			log_hint("ALTER SEQUENCE %s on the target to fit the source's, or use a smaller --margin", s->target_quoted);
			rc = SEQUENCES_CONFIG;
			break;
		}
	}
	return rc;
}

void sequences_free(struct flow_sequences *seqs)
{
	for (size_t i = 0; i < seqs->n; i++) {
		struct flow_sequence *s = &seqs->items[i];
		free(s->source_name);
		free(s->target_name);
		free(s->source_quoted);
		free(s->target_quoted);
		free(s->owned_by);
	}
	free(seqs->items);
	memset(seqs, 0, sizeof *seqs);
}

const char *sequences_state_name(const struct flow_sequence *s)
{
	if (!s->target_name || !s->read)
		return "no_target";
	switch (seq_compare(&s->target, &s->source, s->target_params.increment)) {
	case SEQ_BEHIND: return "behind";
	case SEQ_SAME: return "same";
	case SEQ_AHEAD: return "ahead";
	}
	return "?";
}

void sequences_format_state(const struct seq_state *st, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRId64 "%s", st->last_value, st->is_called ? "" : " (not called yet)");
}

void sequences_json_state(struct jsonw *w, const char *key, const struct seq_state *st)
{
	jsonw_open(w, key, '{');
	jsonw_i64(w, "last_value", true, st->last_value);
	jsonw_bool(w, "is_called", st->is_called);
	jsonw_close(w, '}');
}

void sequences_json_fields(struct jsonw *w, const struct flow_sequence *s)
{
	jsonw_str(w, "sequence", s->source_name);
	jsonw_str(w, "target_sequence", s->target_name);
	jsonw_str(w, "owned_by", s->by_default ? NULL : s->owned_by);
	jsonw_str(w, "default_of", s->by_default ? s->owned_by : NULL);
	jsonw_bool(w, "listed", s->listed);
	if (s->read) {
		sequences_json_state(w, "source", &s->source);
		sequences_json_state(w, "target", &s->target);
	} else {
		jsonw_null(w, "source");
		jsonw_null(w, "target");
	}
}

void sequences_print_synced(FILE *out, const struct flow_sequence *s)
{
	fprintf(out, "sequence %s", s->source_name);
	if (s->target_name && strcmp(s->target_name, s->source_name) != 0)
		fprintf(out, " (target %s)", s->target_name);
	if (!s->read) {
		fprintf(out, ": no target sequence (the target's column %s has none): left alone\n",
			s->owned_by ? s->owned_by : "?");
		return;
	}
	char source[48], before[48], after[48];
	sequences_format_state(&s->source, source, sizeof source);
	sequences_format_state(&s->target, before, sizeof before);
	sequences_format_state(&s->target_after, after, sizeof after);
	fprintf(out, ": source %s, target %s -> %s (%s)\n", source, before, after,
		s->decision.action == SEQ_KEEP_AHEAD ? "ahead: never moved backwards" : seq_action_name(s->decision.action));
}

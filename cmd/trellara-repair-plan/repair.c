/*
 * repair.c - the plan and its application (repair.h).
 */
#include "repair.h"
#include "repair_internal.h"

#include "../trellara-verify/verify.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/fsutil.h"
#include "trellara/jsonread.h"
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


/* ---- reading the verify result (jsonread.h): NULL-safe accessors ---- */

typedef const struct json_value jv;

static bool jv_is(jv *v, enum json_type t)
{
	return v && v->type == t;
}

static bool jv_is_boolean(jv *v)
{
	return jv_is(v, JSON_TRUE) || jv_is(v, JSON_FALSE);
}

static bool jv_is_integer(jv *v)
{
	return jv_is(v, JSON_NUMBER) && v->is_int;
}

static size_t jv_array_size(jv *v)
{
	return jv_is(v, JSON_ARRAY) ? v->n : 0;
}

static jv *jv_array_get(jv *v, size_t i)
{
	return i < jv_array_size(v) ? v->items[i] : NULL;
}

static const char *const kind_names[] = { "missing_in_target", "extra_in_target", "content_differs", NULL };
const char *repair_kind_name(enum repair_kind kind)
{
	return kind_names[kind];
}

static const char *const kind_action[] = { "copy the source row", "delete the target row",
					   "replace the target row with the source row" };

static void plan_free(struct plan *p)
{
	for (size_t i = 0; i < p->n_tables; i++) {
		struct repair_table *r = &p->tables[i];
		for (size_t k = 0; k < r->n_keys; k++) {
			for (int c = 0; c < r->n_key_columns; c++)
				free(r->keys[k].values[c]);
			free(r->keys[k].values);
		}
		free(r->keys);
		for (int c = 0; c < r->n_key_columns; c++)
			free(r->key_columns[c]);
		free(r->key_columns);
		free(r->reseed_reason);
		free(r->name);
	}
	free(p->tables);
	free(p->flow);
}

/* ---- reading the verify result ---- */

/* A field that is not what a verify result holds: exit 65, named. */
static int bad_field(const char *path, const char *field, const char *what)
{
	log_error("verify result \"%s\": field %s: %s", path, field, what);
	log_hint("give the output of \"trellara verify --config FILE --format json\" (trellara-verify(1), JSON)");
	return EXIT_DATAERR;
}

static void reseed(struct repair_table *r, char *reason)
{
	if (!r->reseed_reason)
		r->reseed_reason = reason;
	else
		free(reason);
}

/* One table of the result's "tables" that diverged. */
static int load_table(const struct repair_options *o, jv *jt, size_t ti, struct repair_table *r)
{
	const char *path = o->from;
	char field[96];
	jv *name = jsonread_get(jt, "table"), *keyless = jsonread_get(jt, "keyless");
	snprintf(field, sizeof field, "tables[%zu].table", ti);
	if (!jv_is(name, JSON_STRING))
		return bad_field(path, field, "missing or not a string");
	r->name = xstrdup((name)->text);
	for (size_t i = 0; i < o->cfg->n_tables; i++) {
		char n[300];
		snprintf(n, sizeof n, "%s.%s", o->cfg->tables[i].schema, o->cfg->tables[i].name);
		if (strcmp(n, r->name) == 0)
			r->t = &o->cfg->tables[i];
	}
	if (!r->t) {
		char *what = xasprintf("\"%s\" is not in dataset.tables of %s", r->name, o->cfg->path);
		int rc = bad_field(path, field, what);
		free(what);
		return rc;
	}
	snprintf(field, sizeof field, "tables[%zu].keyless", ti);
	if (!jv_is_boolean(keyless))
		return bad_field(path, field, "missing or not true/false");
	jv *error = jsonread_get(jt, "error");
	if (error)
		reseed(r, xasprintf("verify could not compare it: %s", jv_is(error, JSON_STRING) ? (error)->text : "?"));
	if (jv_is(keyless, JSON_TRUE))
		reseed(r, xstrdup("it has no key (keyless): a row cannot be named exactly"));
	jv *cols = jsonread_get(jt, "key_columns");
	snprintf(field, sizeof field, "tables[%zu].key_columns", ti);
	if (!cols || jv_is(cols, JSON_NULL)) {
		reseed(r, xstrdup(jv_is(keyless, JSON_TRUE) ? "it has no key (keyless): a row cannot be named exactly"
						     : "the verify result lists no key_columns (an older trellara-verify)"));
	} else if (!jv_is(cols, JSON_ARRAY) || jv_array_size(cols) == 0 || jv_array_size(cols) > 1600) {
		return bad_field(path, field, "not an array of column names");
	} else {
		r->n_key_columns = (int)jv_array_size(cols);
		r->key_columns = xcalloc((size_t)r->n_key_columns, sizeof *r->key_columns);
		for (int c = 0; c < r->n_key_columns; c++) {
			jv *col = jv_array_get(cols, (size_t)c);
			if (!jv_is(col, JSON_STRING))
				return bad_field(path, field, "not an array of column names");
			r->key_columns[c] = xstrdup((col)->text);
		}
	}
	jv *divs = jsonread_get(jt, "divergences");
	snprintf(field, sizeof field, "tables[%zu].divergences", ti);
	if (!jv_is(divs, JSON_ARRAY))
		return bad_field(path, field, "missing or not an array");
	uint64_t total = 0;
	for (size_t d = 0; d < jv_array_size(divs); d++) {
		jv *jd = jv_array_get(divs, d), *kind = jsonread_get(jd, "kind"), *count = jsonread_get(jd, "count");
		snprintf(field, sizeof field, "tables[%zu].divergences[%zu].kind", ti, d);
		int k = -1;
		for (int i = 0; jv_is(kind, JSON_STRING) && kind_names[i]; i++)
			if (strcmp(kind_names[i], (kind)->text) == 0)
				k = i;
		if (k < 0)
			return bad_field(path, field, "missing or not missing_in_target, extra_in_target or content_differs");
		snprintf(field, sizeof field, "tables[%zu].divergences[%zu].count", ti, d);
		if (!jv_is_integer(count) || (count)->i < 0)
			return bad_field(path, field, "missing or not a whole number");
		uint64_t n = (uint64_t)(count)->i;
		total += n;
		jv *values = jsonread_get(jd, "key_values");
		snprintf(field, sizeof field, "tables[%zu].divergences[%zu].key_values", ti, d);
		if (!values) {
			reseed(r, xasprintf("%s: %" PRIu64 " keys counted, none listed exactly (no key_values)", kind_names[k], n));
			continue;
		}
		if (!jv_is(values, JSON_ARRAY))
			return bad_field(path, field, "not an array");
		if (jv_array_size(values) > n)
			return bad_field(path, field, "more keys than the divergence's count");
		if (jv_array_size(values) < n)
			reseed(r, xasprintf("%s: %" PRIu64 " keys counted, %zu listed", kind_names[k], n, jv_array_size(values)));
		for (size_t e = 0; e < jv_array_size(values); e++) {
			jv *key = jv_array_get(values, e);
			if (jv_is(key, JSON_NULL) || (jv_is(key, JSON_ARRAY) && jv_array_size(key) != (size_t)r->n_key_columns)) {
				reseed(r, xasprintf("%s: a key that verify could not list exactly", kind_names[k]));
				continue;
			}
			if (!jv_is(key, JSON_ARRAY))
				return bad_field(path, field, "a key is not an array of column values");
			for (size_t c = 0; c < jv_array_size(key); c++)
				if (!jv_is(jv_array_get(key, c), JSON_STRING) && !jv_is(jv_array_get(key, c), JSON_NULL))
					return bad_field(path, field, "a key's value is not text or null");
			if (r->reseed_reason)
				continue;
			r->keys = xrealloc(r->keys, (r->n_keys + 1) * sizeof *r->keys);
			struct repair_key *rk = &r->keys[r->n_keys++];
			rk->kind = (enum repair_kind)k;
			rk->values = xcalloc((size_t)r->n_key_columns, sizeof *rk->values);
			for (int c = 0; c < r->n_key_columns; c++) {
				jv *v = jv_array_get(key, (size_t)c);
				rk->values[c] = jv_is(v, JSON_STRING) ? xstrdup((v)->text) : NULL;
			}
		}
	}
	if (total > o->max_keys)
		reseed(r, xasprintf("%" PRIu64 " divergent keys, more than --max-keys %" PRIu64, total, o->max_keys));
	if (total == 0)
		reseed(r, xstrdup("verify named no divergent key"));
	return 0;
}

static int plan_load(const struct repair_options *o, struct plan *p)
{
	const char *path = o->from;
	if (access(path, R_OK) != 0) {
		log_error("verify result \"%s\": cannot read it: %s", path, strerror(errno));
		return EXIT_NOINPUT;
	}
	char *text = NULL;
	size_t len = 0;
	if (fs_read_file(path, &text, &len) < 0) {
		log_error("verify result \"%s\": cannot read it: %s", path, strerror(errno));
		return EXIT_NOINPUT;
	}
	struct json_error jerr;
	struct json_value *root = jsonread_parse(text, len, &jerr);
	free(text);
	int code = EXIT_DATAERR;
	if (!root) {
		log_error("verify result \"%s\": not JSON: %s at byte %zu", path, jerr.message, jerr.offset);
		return EXIT_DATAERR;
	}
	jv *result = jsonread_get(root, "result"), *flow = jsonread_get(root, "flow");
	jv *at = jsonread_get(root, "compared_at"), *tables = jsonread_get(root, "tables");
	if (!jv_is(root, JSON_OBJECT)) {
		code = bad_field(path, "(the document)", "not an object");
		goto out;
	}
	if (!jv_is(result, JSON_STRING) ||
	    (strcmp((result)->text, "CONVERGED") && strcmp((result)->text, "DIVERGED"))) {
		code = bad_field(path, "result", "missing or not CONVERGED or DIVERGED");
		goto out;
	}
	char *mine = config_flow_id(o->cfg);
	if (!jv_is(flow, JSON_STRING) || strcmp((flow)->text, mine) != 0) {
		char *what = xasprintf("%s%s%s is not this flow (%s)", jv_is(flow, JSON_STRING) ? "\"" : "",
				       jv_is(flow, JSON_STRING) ? (flow)->text : "missing or not a string",
				       jv_is(flow, JSON_STRING) ? "\"" : "", mine);
		free(mine);
		code = bad_field(path, "flow", what);
		free(what);
		goto out;
	}
	p->flow = mine;
	if (!jv_is(at, JSON_STRING) || !lsn_parse((at)->text, &p->compared_at)) {
		code = bad_field(path, "compared_at", "missing or not an LSN");
		goto out;
	}
	if (!jv_is(tables, JSON_ARRAY)) {
		code = bad_field(path, "tables", "missing or not an array");
		goto out;
	}
	p->converged = strcmp((result)->text, "CONVERGED") == 0;
	p->tables = xcalloc(jv_array_size(tables) + 1, sizeof *p->tables);
	for (size_t i = 0; i < jv_array_size(tables); i++) {
		jv *jt = jv_array_get(tables, i), *tr = jsonread_get(jt, "result");
		char field[64];
		snprintf(field, sizeof field, "tables[%zu].result", i);
		if (!jv_is(tr, JSON_STRING) || (strcmp((tr)->text, "converged") && strcmp((tr)->text, "diverged"))) {
			code = bad_field(path, field, "missing or not converged or diverged");
			goto out;
		}
		if (strcmp((tr)->text, "diverged") != 0)
			continue;
		if (p->converged) {
			code = bad_field(path, field, "a diverged table in a CONVERGED result");
			goto out;
		}
		int rc = load_table(o, jt, i, &p->tables[p->n_tables++]);
		if (rc) {
			code = rc;
			goto out;
		}
	}
	code = EXIT_OK;
out:
	jsonread_free(root);
	return code;
}

/* ---- the plan, for review ---- */

/* "quoted" identifier for reading (no connection to quote with). */
static void add_ident(struct strbuf *sb, const char *ident)
{
	strbuf_addch(sb, '"');
	for (const char *c = ident; *c; c++) {
		if (*c == '"')
			strbuf_addch(sb, '"');
		strbuf_addch(sb, *c);
	}
	strbuf_addch(sb, '"');
}

static void add_literal(struct strbuf *sb, const char *value)
{
	strbuf_addch(sb, '\'');
	for (const char *c = value; *c; c++) {
		if (*c == '\'')
			strbuf_addch(sb, '\'');
		strbuf_addch(sb, *c);
	}
	strbuf_addch(sb, '\'');
}

static void add_table_ident(struct strbuf *sb, const struct repair_table *r)
{
	add_ident(sb, r->t->schema);
	strbuf_addch(sb, '.');
	add_ident(sb, r->t->name);
}

/* "k1" = 'v1' AND "k2" IS NULL: the key's values as literals, for reading. */
static void add_where(struct strbuf *sb, const struct repair_table *r, const struct repair_key *k)
{
	for (int c = 0; c < r->n_key_columns; c++) {
		if (c)
			strbuf_adds(sb, " AND ");
		add_ident(sb, r->key_columns[c]);
		if (k->values[c]) {
			strbuf_adds(sb, " = ");
			add_literal(sb, k->values[c]);
		} else {
			strbuf_adds(sb, " IS NULL");
		}
	}
}

/* Statement which (0 the DELETE, 1 the INSERT) of one key's repair, for
 * review: newly allocated, or NULL when the repair has none. */
static char *key_statements(const struct repair_table *r, const struct repair_key *k, int which)
{
	struct strbuf sb = STRBUF_INIT;
	bool del = k->kind != KIND_MISSING, ins = k->kind != KIND_EXTRA;
	if (which == 0 && del) {
		strbuf_adds(&sb, "DELETE FROM ");
		add_table_ident(&sb, r);
		strbuf_adds(&sb, " WHERE ");
		add_where(&sb, r, k);
		strbuf_adds(&sb, ";");
	} else if (which == 1 && ins) {
		strbuf_adds(&sb, "INSERT INTO ");
		add_table_ident(&sb, r);
		strbuf_adds(&sb, " OVERRIDING SYSTEM VALUE VALUES (...); -- every column of the source row where ");
		add_where(&sb, r, k);
		strbuf_adds(&sb, ", read at the fence");
	}
	if (!sb.len) {
		strbuf_release(&sb);
		return NULL;
	}
	return strbuf_detach(&sb, NULL);
}

char *repair_key_text(const struct repair_table *r, const struct repair_key *k)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "(");
	for (int c = 0; c < r->n_key_columns; c++) {
		if (c)
			strbuf_adds(&sb, ", ");
		add_ident(&sb, r->key_columns[c]);
	}
	strbuf_adds(&sb, ") = (");
	for (int c = 0; c < r->n_key_columns; c++) {
		if (c)
			strbuf_adds(&sb, ", ");
		if (k->values[c])
			add_literal(&sb, k->values[c]);
		else
			strbuf_adds(&sb, "NULL");
	}
	strbuf_adds(&sb, ")");
	return strbuf_detach(&sb, NULL);
}

static char *reseed_command(const struct repair_options *o, const char *table)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "trellara reseed --config ");
	strbuf_add_shell_quoted(&sb, o->cfg->path);
	strbuf_adds(&sb, " --table ");
	strbuf_add_shell_quoted(&sb, table);
	return strbuf_detach(&sb, NULL);
}

static void print_text(const struct repair_options *o, const struct plan *p)
{
	char at[LSN_FORMAT_LEN];
	printf("repair plan for flow %s from %s (verify compared at %s)\n", p->flow, o->from, lsn_format(p->compared_at, at));
	for (size_t i = 0; i < p->n_tables; i++) {
		const struct repair_table *r = &p->tables[i];
		if (r->reseed_reason) {
			char *command = reseed_command(o, r->name);
			printf("table %s: reseed: %s\n  %s\n", r->name, r->reseed_reason, command);
			free(command);
			continue;
		}
		printf("table %s: %zu divergent key%s, repaired row by row\n", r->name, r->n_keys, r->n_keys == 1 ? "" : "s");
		for (size_t k = 0; k < r->n_keys; k++) {
			char *key = repair_key_text(r, &r->keys[k]);
			printf("  -- %s %s: %s\n", kind_names[r->keys[k].kind], key, kind_action[r->keys[k].kind]);
			free(key);
			for (int s = 0; s < 2; s++) {
				char *sql = key_statements(r, &r->keys[k], s);
				if (sql)
					printf("  %s\n", sql);
				free(sql);
			}
		}
	}
}

static void print_json(const struct repair_options *o, const struct plan *p, bool applied, uint64_t source_lsn)
{
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "flow", p->flow);
	jsonw_str(&w, "from", o->from);
	jsonw_lsn(&w, "compared_at", true, p->compared_at);
	jsonw_str(&w, "verify_result", p->converged ? "CONVERGED" : "DIVERGED");
	jsonw_open(&w, "tables", '[');
	for (size_t i = 0; i < p->n_tables; i++) {
		const struct repair_table *r = &p->tables[i];
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "table", r->name);
		jsonw_str(&w, "action", r->reseed_reason ? "reseed" : "repair_rows");
		if (r->reseed_reason) {
			char *command = reseed_command(o, r->name);
			jsonw_str(&w, "reason", r->reseed_reason);
			jsonw_str(&w, "recovery", command);
			free(command);
		} else {
			jsonw_open(&w, "key_columns", '[');
			for (int c = 0; c < r->n_key_columns; c++)
				jsonw_text(&w, NULL, r->key_columns[c]);
			jsonw_close(&w, ']');
			jsonw_open(&w, "repairs", '[');
			for (size_t k = 0; k < r->n_keys; k++) {
				jsonw_open(&w, NULL, '{');
				jsonw_str(&w, "kind", kind_names[r->keys[k].kind]);
				jsonw_open(&w, "key", '[');
				for (int c = 0; c < r->n_key_columns; c++)
					if (r->keys[k].values[c])
						jsonw_text(&w, NULL, r->keys[k].values[c]);
					else
						jsonw_null(&w, NULL);
				jsonw_close(&w, ']');
				jsonw_str(&w, "action", kind_action[r->keys[k].kind]);
				jsonw_open(&w, "sql", '[');
				for (int s = 0; s < 2; s++) {
					char *sql = key_statements(r, &r->keys[k], s);
					if (sql)
						jsonw_text(&w, NULL, sql);
					free(sql);
				}
				jsonw_close(&w, ']');
				jsonw_close(&w, '}');
			}
			jsonw_close(&w, ']');
			if (applied) {
				jsonw_u64(&w, "rows_deleted", true, r->rows_deleted);
				jsonw_u64(&w, "rows_inserted", true, r->rows_inserted);
			}
		}
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_bool(&w, "applied", applied);
	if (applied)
		jsonw_lsn(&w, "source_lsn", true, source_lsn);
	else
		jsonw_null(&w, "source_lsn");
	jsonw_close(&w, '}');
	putchar('\n');
	fflush(stdout);
}

int repair_plan_run(const struct repair_options *o)
{
	struct plan p = { 0 };
	int code = plan_load(o, &p);
	if (code != EXIT_OK)
		goto out;
	if (p.converged) {
		if (o->json)
			print_json(o, &p, false, 0);
		else
			printf("verify result %s: CONVERGED: nothing to repair\n", o->from);
		goto out;
	}
	size_t row_tables = 0, reseeds = 0, keys = 0;
	for (size_t i = 0; i < p.n_tables; i++) {
		if (p.tables[i].reseed_reason) {
			reseeds++;
		} else {
			row_tables++;
			keys += p.tables[i].n_keys;
		}
	}
	if (!o->json) {
		print_text(o, &p);
		if (p.n_tables == 0)
			printf("no table diverged: nothing for repair-plan (see the verify result for its other findings)\n");
		else
			printf("plan: %zu key%s repaired row by row in %zu table%s, %zu table%s to reseed\n", keys, keys == 1 ? "" : "s",
			       row_tables, row_tables == 1 ? "" : "s", reseeds, reseeds == 1 ? "" : "s");
	}
	if (!o->apply) {
		if (o->json)
			print_json(o, &p, false, 0);
		else if (row_tables) {
			struct strbuf sb = STRBUF_INIT;
			strbuf_adds(&sb, "trellara repair-plan --config ");
			strbuf_add_shell_quoted(&sb, o->cfg->path);
			strbuf_adds(&sb, " --from ");
			strbuf_add_shell_quoted(&sb, o->from);
			printf("review it, then apply it: %s --apply\n", sb.buf);
			strbuf_release(&sb);
		}
		goto out;
	}
	if (!row_tables) {
		if (o->json)
			print_json(o, &p, false, 0);
		else
			printf("nothing applied: no table can be repaired row by row%s\n", reseeds ? "; reseed the tables above" : "");
		code = p.n_tables ? EXIT_NEGATIVE : EXIT_OK;
		goto out;
	}
	fflush(stdout);
	uint64_t source_lsn = 0;
	code = repair_apply_plan(o, &p, &source_lsn);
	if (code != EXIT_OK)
		goto out;
	char l[LSN_FORMAT_LEN];
	lsn_format(source_lsn, l);
	if (o->json) {
		print_json(o, &p, true, source_lsn);
	} else {
		for (size_t i = 0; i < p.n_tables; i++)
			if (!p.tables[i].reseed_reason)
				printf("applied: table %s: %" PRIu64 " rows deleted, %" PRIu64
				       " rows copied from the source at %s; recorded in %s.repairs\n",
				       p.tables[i].name, p.tables[i].rows_deleted, p.tables[i].rows_inserted, l,
				       o->cfg->checkpoint_schema);
		printf("verifying every table of the flow again:\n");
	}
	fflush(stdout);
	/* a fresh verify of the whole flow: its verdict is the answer, and
	 * it alone may promote a failed run again */
	uint64_t retry_base_ms = DEFAULT_RECONNECT_BASE_MS;
	struct verify_options vo = { .cfg = o->cfg, .json = o->json, .fence_timeout_s = o->fence_timeout_s,
				     .max_attempts = DEFAULT_VERIFY_MAX_ATTEMPTS, .retry_base_ms = (int)retry_base_ms,
				     .stop = o->stop };
	code = verify_run(&vo);
	if (code == EXIT_OK && reseeds)
		code = EXIT_NEGATIVE;
out:
	plan_free(&p);
	return code;
}

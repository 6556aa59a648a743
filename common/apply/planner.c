/*
 * planner.c - envelope change to SQL (planner.h).
 */
#include "trellara/planner.h"
#include "planner_internal.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void plan_stmt_init(struct plan_stmt *s)
{
	memset(s, 0, sizeof *s);
	strbuf_init(&s->sql);
	strbuf_init(&s->what);
	strbuf_init(&s->copy_data);
}

void plan_stmt_free(struct plan_stmt *s)
{
	strbuf_release(&s->sql);
	buf_free(&s->arena);
	strbuf_release(&s->what);
	strbuf_release(&s->copy_data);
	free(s->offsets);
	free(s->values);
	plan_stmt_init(s);
}

void plan_quote_ident(struct strbuf *b, const char *name, size_t len)
{
	strbuf_addch(b, '"');
	for (size_t i = 0; i < len; i++) {
		if (name[i] == '"')
			strbuf_addch(b, '"');
		strbuf_addch(b, name[i]);
	}
	strbuf_addch(b, '"');
}

static size_t add_value(struct plan_stmt *s, bool null, const void *data, size_t len)
{
	if (s->n_params == s->cap_params) {
		s->cap_params = s->cap_params ? s->cap_params * 2 : 16;
		s->offsets = xrealloc(s->offsets, s->cap_params * sizeof *s->offsets);
	}
	if (null) {
		s->offsets[s->n_params] = SIZE_MAX;
	} else {
		s->offsets[s->n_params] = s->arena.len;
		buf_put(&s->arena, data, len);
		buf_put_u8(&s->arena, 0);
	}
	return ++s->n_params;
}

size_t plan_add_param(struct plan_stmt *s, const void *data, size_t len)
{
	return add_value(s, false, data, len);
}

size_t plan_add_null(struct plan_stmt *s)
{
	return add_value(s, true, NULL, 0);
}

void plan_put_eq(struct strbuf *b, const struct plan_relation *pr, uint16_t i)
{
	const char *op = pr->col_eq ? pr->col_eq[i] : NULL;
	if (op)
		strbuf_addf(b, " %s ", op);
	else
		strbuf_adds(b, " = ");
}

void plan_put_relation(struct strbuf *b, const struct env_relation *r)
{
	plan_quote_ident(b, r->schema, r->schema_len);
	strbuf_addch(b, '.');
	plan_quote_ident(b, r->name, r->name_len);
}

bool plan_no_equality(uint32_t type_oid)
{
	static const uint32_t oids[] = { 114, 142, 199, 143, 600, 601, 602, 603, 604, 628, 718, 1017 };
	for (size_t i = 0; i < sizeof oids / sizeof *oids; i++)
		if (oids[i] == type_oid)
			return true;
	return false;
}

/* "schema.table (key=value, ...)", values cut short, into d (replacing
 * what it held). */
static void describe_into(struct strbuf *d, const struct env_relation *r, const bool *key, const struct env_tuple *t)
{
	strbuf_reset(d);
	strbuf_add(d, r->schema, r->schema_len);
	strbuf_addch(d, '.');
	strbuf_add(d, r->name, r->name_len);
	strbuf_adds(d, " (");
	bool first = true;
	for (uint16_t i = 0; i < t->n; i++) {
		if (key && !key[i])
			continue;
		if (!first)
			strbuf_adds(d, ", ");
		first = false;
		strbuf_add(d, r->columns[i].name, r->columns[i].name_len);
		strbuf_addch(d, '=');
		const struct env_value *v = &t->values[i];
		if (v->kind == ENV_NULL)
			strbuf_adds(d, "NULL");
		else if (v->kind == ENV_UNCHANGED_TOAST)
			strbuf_adds(d, "(unchanged toast)");
		else
			strbuf_add(d, v->data, v->len > 64 ? 64 : v->len);
		if (d->len > 400)
			break;
	}
	strbuf_addch(d, ')');
}

/* Whether b[0..len) is a typmod: "(digits[, digits])". */
static bool is_typmod(const char *b, size_t len)
{
	if (len < 3 || b[0] != '(' || b[len - 1] != ')')
		return false;
	bool digit = false;
	for (size_t i = 1; i + 1 < len; i++) {
		if (b[i] >= '0' && b[i] <= '9')
			digit = true;
		else if (b[i] != ',' && b[i] != ' ')
			return false;
	}
	return digit;
}

/* "::type" with the typmod left out (format_type writes it as "(n)"
 * or "(p,s)" after the name or after its first word), so that the
 * assignment, not an explicit cast, applies it.  Without its typmod
 * "character" means character(1) and "bit" bit(1): those become bpchar
 * and "bit", as format_type(oid, -1) writes them. */
void plan_put_cast(struct strbuf *b, const char *type)
{
	strbuf_adds(b, "::");
	size_t start = b->len;
	bool quoted = false;
	for (const char *p = type; *p;) {
		if (*p == '"')
			quoted = !quoted;
		if (!quoted && *p == '(') {
			const char *close = strchr(p, ')');
			if (close && is_typmod(p, (size_t)(close - p + 1))) {
				p = close + 1;
				continue;
			}
		}
		strbuf_addch(b, *p++);
	}
	/* the name before any array brackets */
	size_t name_len = b->len - start;
	const char *bracket = memchr(b->buf + start, '[', name_len);
	if (bracket)
		name_len = (size_t)(bracket - (b->buf + start));
	const char *with = NULL;
	if (name_len == 9 && memcmp(b->buf + start, "character", 9) == 0)
		with = "bpchar";
	else if (name_len == 3 && memcmp(b->buf + start, "bit", 3) == 0)
		with = "\"bit\"";
	if (with) {
		char *suffix = xstrdup(b->buf + start + name_len);
		b->len = start;
		b->buf[b->len] = '\0';
		strbuf_adds(b, with);
		strbuf_adds(b, suffix);
		free(suffix);
	}
}


/* "$n" for a new parameter of column i of pr, cast to the target column's
 * type when it is known (plan_put_cast): a parameter sent without a type
 * is typed by the server from its context, and a composite column's (or
 * a domain over one, compared in a WHERE) comes out as "record", which
 * cannot be read from text (0A000, "input of anonymous composite
 * types").  Returns the parameter's number. */
static size_t put_param(struct plan_stmt *s, const struct plan_relation *pr, uint16_t i, const void *data, size_t len)
{
	size_t n = plan_add_param(s, data, len);
	strbuf_addf(&s->sql, "$%zu", n);
	if (pr->col_types && pr->col_types[i] && *pr->col_types[i])
		plan_put_cast(&s->sql, pr->col_types[i]);
	return n;
}

/* "what" for the server-side expect_one() message, as a parameter. */
static void describe(struct plan_stmt *s, const struct env_relation *r, const bool *key, const struct env_tuple *t)
{
	struct strbuf d = STRBUF_INIT;
	describe_into(&d, r, key, t);
	plan_add_param(s, d.buf, d.len);
	strbuf_release(&d);
}

/* WHERE clause over the key (or, keyless, every column) of tuple t. */
static int put_predicate(struct plan_stmt *s, const struct plan_relation *pr, const bool *key,
			 const struct env_tuple *t, char *err, size_t errlen)
{
	const struct env_relation *r = pr->rel;
	bool first = true;
	for (uint16_t i = 0; i < t->n; i++) {
		if (key && !key[i])
			continue;
		const struct env_value *v = &t->values[i];
		strbuf_adds(&s->sql, first ? " WHERE " : " AND ");
		first = false;
		if (v->kind == ENV_UNCHANGED_TOAST) {
			snprintf(err, errlen, "%.*s.%.*s: the value of match column \"%.*s\" was not sent (unchanged TOAST)",
				 (int)r->schema_len, r->schema, (int)r->name_len, r->name, (int)r->columns[i].name_len,
				 r->columns[i].name);
			return -1;
		}
		if (v->kind == ENV_NULL) {
			plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
			strbuf_adds(&s->sql, " IS NULL");
			continue;
		}
		plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
		if (plan_no_equality(r->columns[i].type_oid)) {
			strbuf_addf(&s->sql, "::text = $%zu::text", plan_add_param(s, v->data, v->len));
		} else {
			plan_put_eq(&s->sql, pr, i);
			put_param(s, pr, i, v->data, v->len);
		}
	}
	if (first) {
		snprintf(err, errlen, "%.*s.%.*s has no column to match rows on", (int)r->schema_len, r->schema,
			 (int)r->name_len, r->name);
		return -1;
	}
	return 0;
}

/* SET over the new tuple's sent columns, except those in omit (may be NULL). */
static int put_set(struct plan_stmt *s, const struct plan_relation *pr, const struct env_tuple *t, const bool *omit,
		   char *err, size_t errlen)
{
	const struct env_relation *r = pr->rel;
	strbuf_adds(&s->sql, " SET ");
	bool first = true;
	for (uint16_t i = 0; i < t->n; i++) {
		const struct env_value *v = &t->values[i];
		if (v->kind == ENV_UNCHANGED_TOAST || (omit && omit[i]))
			continue;
		if (!first)
			strbuf_adds(&s->sql, ", ");
		first = false;
		plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
		if (v->kind == ENV_NULL) {
			strbuf_adds(&s->sql, " = NULL");
		} else {
			strbuf_adds(&s->sql, " = ");
			put_param(s, pr, i, v->data, v->len);
		}
	}
	if (first) {
		/* nothing to change: still find the row, with a column that
		 * may be assigned (not a GENERATED ALWAYS identity one) */
		uint16_t i = 0;
		while (i < r->n_columns && omit && i < t->n && omit[i])
			i++;
		if (i == r->n_columns) {
			snprintf(err, errlen, "%.*s.%.*s: an update that changes no column the target lets be assigned",
				 (int)r->schema_len, r->schema, (int)r->name_len, r->name);
			return -1;
		}
		plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
		strbuf_adds(&s->sql, " = ");
		plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
	}
	return 0;
}

static bool same_value(const struct env_value *a, const struct env_value *b)
{
	if (a->kind != b->kind)
		return false;
	return a->kind != ENV_TEXT || (a->len == b->len && memcmp(a->data, b->data, a->len) == 0);
}

static void put_value_text(char *out, size_t outlen, const struct env_value *v)
{
	if (v->kind == ENV_NULL)
		snprintf(out, outlen, "NULL");
	else
		snprintf(out, outlen, "%.*s", v->len > 64 ? 64 : (int)v->len, v->data);
}

/* The target's GENERATED ALWAYS identity columns in an update:
 * PostgreSQL refuses to assign them.  omit: left out of SET (the value
 * does not change); guard: its old value is not in the change, so the
 * WHERE clause checks that the row holds the new one.  A change of the
 * value fails planning. */
static int identity_update(const struct plan_relation *pr, const struct env_change *c, bool *omit, bool *guard,
			   char *err, size_t errlen)
{
	const struct env_relation *r = pr->rel;
	for (uint16_t i = 0; i < c->new_tuple.n; i++) {
		omit[i] = guard[i] = false;
		if (!pr->identity_always || !pr->identity_always[i])
			continue;
		const struct env_value *nv = &c->new_tuple.values[i];
		if (nv->kind == ENV_UNCHANGED_TOAST)
			continue;
		omit[i] = true;
		const struct env_value *ov = NULL;
		if (c->old_kind == 'O' || (c->old_kind == 'K' && r->columns[i].key))
			ov = &c->old_tuple.values[i];
		else if (!c->old_kind && r->columns[i].key)
			continue; /* a key column, and the key did not change */
		if (!ov || ov->kind == ENV_UNCHANGED_TOAST) {
			guard[i] = true;
			continue;
		}
		if (!same_value(ov, nv)) {
			char from[80], to[80];
			put_value_text(from, sizeof from, ov);
			put_value_text(to, sizeof to, nv);
			snprintf(err, errlen,
				 "update of GENERATED ALWAYS identity column \"%.*s\" of %.*s.%.*s from %s to %s: the target refuses"
				 " to change such a column (make it GENERATED BY DEFAULT on the target, or change the row there by hand)",
				 (int)r->columns[i].name_len, r->columns[i].name, (int)r->schema_len, r->schema,
				 (int)r->name_len, r->name, from, to);
			return -1;
		}
	}
	return 0;
}

/* " AND col = $n" for each guarded column, from the new tuple. */
static void put_guards(struct plan_stmt *s, const struct plan_relation *pr, const struct env_tuple *t,
		       const bool *guard)
{
	const struct env_relation *r = pr->rel;
	for (uint16_t i = 0; i < t->n; i++) {
		if (!guard[i])
			continue;
		strbuf_adds(&s->sql, " AND ");
		plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
		if (t->values[i].kind == ENV_NULL)
			strbuf_adds(&s->sql, " IS NULL");
		else {
			plan_put_eq(&s->sql, pr, i);
			put_param(s, pr, i, t->values[i].data, t->values[i].len);
		}
	}
}

/* "ONLY " unless the target table is partitioned: a change to an
 * inheritance parent is the parent's alone; a partitioned table's rows
 * live in its partitions. */
void plan_put_only(struct strbuf *b, const struct plan_relation *pr)
{
	if (!pr->partitioned)
		strbuf_adds(b, "ONLY ");
}

void plan_finish(struct plan_stmt *s)
{
	s->values = xrealloc(s->values, (s->n_params ? s->n_params : 1) * sizeof *s->values);
	for (size_t i = 0; i < s->n_params; i++)
		s->values[i] = s->offsets[i] == SIZE_MAX ? NULL : (const char *)s->arena.data + s->offsets[i];
}

void plan_reset(struct plan_stmt *s)
{
	strbuf_reset(&s->sql);
	s->arena.len = 0;
	s->n_params = 0;
	s->is_row_change = false;
	s->expect_one = false;
	s->expect_rows = 0;
	strbuf_reset(&s->what);
	s->copy = false;
	strbuf_reset(&s->copy_data);
}

int plan_change(const char *checkpoint_schema, const struct plan_relation *relations, uint32_t n_relations,
		const struct env_change *c, bool describe_row, struct plan_stmt *s, char *err, size_t errlen)
{
	plan_reset(s);
	if (c->op == ENV_MESSAGE) {
		plan_finish(s);
		return 1;
	}
	if (c->op == ENV_TRUNCATE) {
		/* as the source ran it, on the relations of the message only:
		 * never CASCADE (the message already names every published
		 * table the source's cascade reached; a target table outside
		 * them that references one makes the TRUNCATE fail) */
		strbuf_adds(&s->sql, "TRUNCATE ");
		for (uint32_t i = 0; i < c->n_truncate; i++) {
			if (c->truncate_relations[i] >= n_relations) {
				snprintf(err, errlen, "truncate refers to relation %u of %u", c->truncate_relations[i], n_relations);
				return -1;
			}
			if (i)
				strbuf_adds(&s->sql, ", ");
			plan_put_only(&s->sql, &relations[c->truncate_relations[i]]);
			plan_put_relation(&s->sql, relations[c->truncate_relations[i]].rel);
		}
		if (c->truncate_flags & 2)
			strbuf_adds(&s->sql, " RESTART IDENTITY");
		plan_finish(s);
		return 0;
	}
	if (c->relation >= n_relations) {
		snprintf(err, errlen, "change refers to relation %u of %u", c->relation, n_relations);
		return -1;
	}
	const struct plan_relation *pr = &relations[c->relation];
	const struct env_relation *r = pr->rel;
	s->is_row_change = true;
	if (c->op == ENV_INSERT && !r->n_columns) { /* a table without columns: "()" is no syntax */
		strbuf_adds(&s->sql, "INSERT INTO ");
		plan_put_relation(&s->sql, r);
		strbuf_adds(&s->sql, " DEFAULT VALUES");
		plan_finish(s);
		return 0;
	}
	if (c->op == ENV_INSERT) {
		strbuf_adds(&s->sql, "INSERT INTO ");
		plan_put_relation(&s->sql, r);
		strbuf_adds(&s->sql, " (");
		for (uint16_t i = 0; i < r->n_columns; i++) {
			if (i)
				strbuf_adds(&s->sql, ", ");
			plan_quote_ident(&s->sql, r->columns[i].name, r->columns[i].name_len);
		}
		strbuf_adds(&s->sql, ")");
		for (uint16_t i = 0; pr->identity_always && i < r->n_columns; i++)
			if (pr->identity_always[i]) {
				/* keep the source's value */
				strbuf_adds(&s->sql, " OVERRIDING SYSTEM VALUE");
				break;
			}
		strbuf_adds(&s->sql, " VALUES (");
		for (uint16_t i = 0; i < c->new_tuple.n; i++) {
			const struct env_value *v = &c->new_tuple.values[i];
			if (i)
				strbuf_adds(&s->sql, ", ");
			if (v->kind == ENV_NULL) {
				strbuf_adds(&s->sql, "NULL");
			} else if (v->kind == ENV_TEXT) {
				put_param(s, pr, i, v->data, v->len);
			} else {
				snprintf(err, errlen, "%.*s.%.*s: insert with an unchanged-TOAST value", (int)r->schema_len,
					 r->schema, (int)r->name_len, r->name);
				return -1;
			}
		}
		strbuf_adds(&s->sql, ")");
		plan_finish(s);
		return 0;
	}
	/* update / delete: which tuple identifies the row */
	const struct env_tuple *match = c->old_kind ? &c->old_tuple : &c->new_tuple;
	if (!pr->key && c->old_kind != 'O') {
		snprintf(err, errlen, "%.*s.%.*s has no key and the change carries no old row", (int)r->schema_len,
			 r->schema, (int)r->name_len, r->name);
		return -1;
	}
	bool *omit = NULL, *guard = NULL;
	int rc = -1;
	if (c->op == ENV_UPDATE) {
		omit = xcalloc(c->new_tuple.n ? c->new_tuple.n : 1, sizeof *omit);
		guard = xcalloc(c->new_tuple.n ? c->new_tuple.n : 1, sizeof *guard);
		if (identity_update(pr, c, omit, guard, err, errlen) < 0)
			goto out;
	}
	if (pr->key) {
		/* UPDATE ONLY t SET ... WHERE key / DELETE FROM ONLY t WHERE
		 * key: the executor checks the row count (expect_one) */
		if (c->op == ENV_UPDATE) {
			strbuf_adds(&s->sql, "UPDATE ");
			plan_put_only(&s->sql, pr);
			plan_put_relation(&s->sql, r);
			if (put_set(s, pr, &c->new_tuple, omit, err, errlen) < 0)
				goto out;
		} else {
			strbuf_adds(&s->sql, "DELETE FROM ");
			plan_put_only(&s->sql, pr);
			plan_put_relation(&s->sql, r);
		}
		if (put_predicate(s, pr, pr->key, match, err, errlen) < 0)
			goto out;
		if (guard)
			put_guards(s, pr, &c->new_tuple, guard);
		s->expect_one = true;
		s->expect_rows = 1;
		if (describe_row)
			describe_into(&s->what, r, pr->key, match);
		plan_finish(s);
		rc = 0;
		goto out;
	}
	/* keyless: one row that matches every old column (of identical
	 * rows, any one), by its (tableoid, ctid): ctid alone names a row
	 * only within one partition.
	 * WITH c AS (SELECT tableoid, ctid FROM ONLY t WHERE all-old LIMIT 1),
	 * m AS (UPDATE ONLY t SET ... WHERE tableoid = (SELECT tableoid FROM c)
	 *       AND ctid = (SELECT ctid FROM c) RETURNING 1)
	 * SELECT schema.expect_one((SELECT count(*) FROM c), what) */
	strbuf_adds(&s->sql, "WITH c AS (SELECT tableoid, ctid FROM ");
	plan_put_only(&s->sql, pr);
	plan_put_relation(&s->sql, r);
	if (put_predicate(s, pr, NULL, match, err, errlen) < 0)
		goto out;
	strbuf_adds(&s->sql, " LIMIT 1), m AS (");
	if (c->op == ENV_UPDATE) {
		strbuf_adds(&s->sql, "UPDATE ");
		plan_put_only(&s->sql, pr);
		plan_put_relation(&s->sql, r);
		if (put_set(s, pr, &c->new_tuple, omit, err, errlen) < 0)
			goto out;
	} else {
		strbuf_adds(&s->sql, "DELETE FROM ");
		plan_put_only(&s->sql, pr);
		plan_put_relation(&s->sql, r);
	}
	strbuf_adds(&s->sql, " WHERE tableoid = (SELECT tableoid FROM c) AND ctid = (SELECT ctid FROM c) RETURNING 1) SELECT ");
	plan_quote_ident(&s->sql, checkpoint_schema, strlen(checkpoint_schema));
	describe(s, r, NULL, match);
	strbuf_addf(&s->sql, ".expect_one((SELECT count(*) FROM c), $%zu) FROM (SELECT count(*) FROM m) done", s->n_params);
	plan_finish(s);
	rc = 0;
out:
	free(omit);
	free(guard);
	return rc;
}

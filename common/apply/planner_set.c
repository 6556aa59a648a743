/*
 * planner_set.c - runs of compatible changes as multi-row statements
 * (planner.h, "set-based statements").
 *
 * The statement text depends only on the relation, the operation, the
 * columns sent and the row count, never on the values: NULLs are NULL
 * parameters.  plan_set_piece cuts runs into powers of two, so a relation
 * has few statement shapes and the executor prepares each once.
 */
#include "trellara/planner.h"
#include "planner_internal.h"

#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_SET_MAX_PARAMS 65535

/* A value as a parameter: a NULL one for NULL. */
static size_t add_param(struct plan_stmt *s, const struct env_value *v)
{
	return v->kind == ENV_NULL ? plan_add_null(s) : plan_add_param(s, v->data, v->len);
}

static void put_column(struct strbuf *b, const struct env_relation *r, uint16_t i)
{
	plan_quote_ident(b, r->columns[i].name, r->columns[i].name_len);
}

/* "schema"."table" ("c1", "c2", ...): every column, as inserts and COPY
 * name them; no list for a table without columns ("()" is no syntax) */
static void put_relation_columns(struct strbuf *b, const struct env_relation *r)
{
	plan_put_relation(b, r);
	if (!r->n_columns)
		return;
	strbuf_adds(b, " (");
	for (uint16_t i = 0; i < r->n_columns; i++) {
		if (i)
			strbuf_adds(b, ", ");
		put_column(b, r, i);
	}
	strbuf_addch(b, ')');
}


static const struct env_tuple *row_of(const struct env_change *c)
{
	return c->op == ENV_DELETE ? &c->old_tuple : &c->new_tuple;
}

bool plan_set_compatible(const struct plan_relation *relations, uint32_t n_relations, const struct env_change *a,
			 const struct env_change *b)
{
	/* inserts need no key: a keyless table's runs of inserts join too */
	if (a->op != b->op || a->relation != b->relation || a->relation >= n_relations ||
	    (a->op != ENV_INSERT && !relations[a->relation].key))
		return false;
	switch (a->op) {
	case ENV_INSERT:
		return a->new_tuple.n == b->new_tuple.n;
	case ENV_UPDATE:
		if (a->old_kind || b->old_kind || a->new_tuple.n != b->new_tuple.n)
			return false;
		for (uint16_t i = 0; i < a->new_tuple.n; i++)
			if ((a->new_tuple.values[i].kind == ENV_UNCHANGED_TOAST) !=
			    (b->new_tuple.values[i].kind == ENV_UNCHANGED_TOAST))
				return false;
		return true;
	case ENV_DELETE:
		return (a->old_kind == 'K' || a->old_kind == 'O') && (b->old_kind == 'K' || b->old_kind == 'O') &&
		       a->old_tuple.n == b->old_tuple.n;
	default:
		return false;
	}
}

/* The parameters one row of first's statement takes. */
static size_t params_per_row(const struct plan_relation *pr, const struct env_change *c)
{
	const struct env_tuple *t = row_of(c);
	size_t n = 0;
	for (uint16_t i = 0; i < t->n; i++) {
		if (c->op == ENV_INSERT || pr->key[i])
			n++;
		else if (c->op == ENV_UPDATE && t->values[i].kind != ENV_UNCHANGED_TOAST)
			n++;
	}
	return n;
}

size_t plan_set_piece(const struct plan_relation *relations, const struct env_change *first, size_t n)
{
	if (n == 0)
		return 0;
	const struct plan_relation *pr = &relations[first->relation];
	size_t per_row = pr->key || first->op == ENV_INSERT ? params_per_row(pr, first) : 1;
	size_t limit = n < PLAN_SET_MAX_ROWS ? n : PLAN_SET_MAX_ROWS;
	if (per_row && PLAN_SET_MAX_PARAMS / per_row < limit)
		limit = PLAN_SET_MAX_PARAMS / per_row;
	size_t piece = 1;
	while (piece * 2 <= limit)
		piece *= 2;
	return piece;
}

/* Whether two of the updates cs[0..n) carry the same key value (an
 * UPDATE ... FROM changes a row once, whichever VALUES row it takes):
 * a hash of each key into an open-addressed table. */
static bool repeated_key(const bool *key, const struct env_change *const *cs, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	size_t *slots = xcalloc(cap, sizeof *slots); /* index + 1; 0 = empty */
	bool repeated = false;
	for (size_t k = 0; k < n && !repeated; k++) {
		const struct env_tuple *t = row_of(cs[k]);
		uint64_t h = 1469598103934665603ULL;
		for (uint16_t i = 0; i < t->n; i++) {
			if (!key[i])
				continue;
			for (uint32_t j = 0; j < t->values[i].len; j++)
				h = (h ^ t->values[i].data[j]) * 1099511628211ULL;
			h = (h ^ 0x100) * 1099511628211ULL; /* column separator */
		}
		size_t j = h & (cap - 1);
		for (; slots[j]; j = (j + 1) & (cap - 1)) {
			const struct env_tuple *o = row_of(cs[slots[j] - 1]);
			bool same = true;
			for (uint16_t i = 0; i < t->n && same; i++)
				same = !key[i] || (t->values[i].len == o->values[i].len &&
						   memcmp(t->values[i].data, o->values[i].data, t->values[i].len) == 0);
			if (same) {
				repeated = true;
				break;
			}
		}
		slots[j] = k + 1;
	}
	free(slots);
	return repeated;
}

/* s->what: "schema.table (N rows: k=v, ...)", cut short. */
static void describe_set(struct plan_stmt *s, const struct plan_relation *pr, const struct env_change *const *cs,
			 size_t n)
{
	const struct env_relation *r = pr->rel;
	struct strbuf *d = &s->what;
	strbuf_add(d, r->schema, r->schema_len);
	strbuf_addch(d, '.');
	strbuf_add(d, r->name, r->name_len);
	strbuf_addf(d, " (%zu row%s: ", n, n == 1 ? "" : "s");
	for (size_t k = 0; k < n; k++) {
		if (d->len > 200) {
			strbuf_adds(d, ", ...");
			break;
		}
		if (k)
			strbuf_adds(d, ", ");
		const struct env_tuple *t = row_of(cs[k]);
		bool first = true;
		for (uint16_t i = 0; i < t->n; i++) {
			if (pr->key ? !pr->key[i] : i > 0) /* keyless: the first column */
				continue;
			if (!first)
				strbuf_addch(d, ' ');
			first = false;
			strbuf_add(d, r->columns[i].name, r->columns[i].name_len);
			strbuf_addch(d, '=');
			const struct env_value *v = &t->values[i];
			strbuf_add(d, v->data, v->len > 64 ? 64 : v->len);
		}
	}
	strbuf_addch(d, ')');
}

/* Checks the run; 0, 1 (plan one by one) or -1. */
static int check_set(const struct plan_relation *relations, uint32_t n_relations, const struct env_change *const *cs,
		     size_t n, char *err, size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "a set statement of no change");
		return -1;
	}
	for (size_t k = 0; k < n; k++) {
		if (cs[k]->op != ENV_INSERT && cs[k]->op != ENV_UPDATE && cs[k]->op != ENV_DELETE) {
			snprintf(err, errlen, "change %zu of a set is not an insert, update or delete", k);
			return -1;
		}
		if (cs[k]->relation >= n_relations) {
			snprintf(err, errlen, "change %zu of a set refers to relation %u of %u", k, cs[k]->relation,
				 n_relations);
			return -1;
		}
	}
	const struct plan_relation *pr = &relations[cs[0]->relation];
	const struct env_relation *r = pr->rel;
	if (!pr->key && cs[0]->op != ENV_INSERT)
		return 1;
	for (size_t k = 0; k < n; k++)
		if (!plan_set_compatible(relations, n_relations, cs[0], cs[k]) || row_of(cs[k])->n != r->n_columns) {
			snprintf(err, errlen, "%.*s.%.*s: change %zu cannot join a set statement with change 0",
				 (int)r->schema_len, r->schema, (int)r->name_len, r->name, k);
			return -1;
		}
	size_t per_row = params_per_row(pr, cs[0]);
	if (n > PLAN_SET_MAX_ROWS || (per_row && n > PLAN_SET_MAX_PARAMS / per_row)) {
		snprintf(err, errlen, "%.*s.%.*s: a set statement of %zu rows of %zu parameters (at most %d rows, %d parameters)",
			 (int)r->schema_len, r->schema, (int)r->name_len, r->name, n, per_row, PLAN_SET_MAX_ROWS,
			 PLAN_SET_MAX_PARAMS);
		return -1;
	}
	const struct env_change *c0 = cs[0];
	bool set_any = false, assignable = false;
	for (uint16_t i = 0; i < r->n_columns; i++) {
		bool is_key = pr->key && pr->key[i];
		bool sent = row_of(c0)->values[i].kind != ENV_UNCHANGED_TOAST;
		bool always = pr->identity_always && pr->identity_always[i];
		if (c0->op == ENV_UPDATE && !is_key && sent && always)
			return 1; /* plan_change guards or refuses it */
		set_any |= !is_key && sent;
		assignable |= !always;
		/* the VALUES list's casts: key columns (by text when they
		 * have no equality) and an update's SET columns */
		bool cast = c0->op != ENV_INSERT && ((is_key && !plan_no_equality(r->columns[i].type_oid)) ||
						      (c0->op == ENV_UPDATE && !is_key && sent));
		if (cast && (!pr->col_types || !pr->col_types[i] || !*pr->col_types[i]))
			return 1;
	}
	if (c0->op == ENV_UPDATE && !set_any && !assignable)
		return 1; /* nothing to SET: plan_change says why */
	for (size_t k = 0; k < n; k++) {
		const struct env_tuple *t = row_of(cs[k]);
		for (uint16_t i = 0; i < t->n; i++) {
			uint8_t kind = t->values[i].kind;
			if (pr->key && pr->key[i] && kind != ENV_TEXT)
				return 1; /* NULL or unchanged-TOAST key */
			if (c0->op == ENV_INSERT && kind == ENV_UNCHANGED_TOAST)
				return 1;
		}
	}
	if (c0->op == ENV_UPDATE && n > 1 && repeated_key(pr->key, cs, n))
		return 1;
	return 0;
}

/* " WHERE t.k = v.k AND ..." (an equality operator outside pg_catalog
 * named with its schema: plan_put_eq) */
static void put_match(struct strbuf *b, const struct plan_relation *pr, const bool *key)
{
	const struct env_relation *r = pr->rel;
	bool first = true;
	for (uint16_t i = 0; i < r->n_columns; i++) {
		if (!key[i])
			continue;
		strbuf_adds(b, first ? " WHERE t." : " AND t.");
		first = false;
		put_column(b, r, i);
		if (plan_no_equality(r->columns[i].type_oid))
			strbuf_adds(b, "::text = ");
		else
			plan_put_eq(b, pr, i);
		strbuf_adds(b, "v.");
		put_column(b, r, i);
	}
}

/* "(VALUES ($1::type, ...), ...) AS v (cols...)" over the columns in use. */
static void put_values(struct plan_stmt *s, const struct plan_relation *pr, const bool *use,
		       const struct env_change *const *cs, size_t n)
{
	const struct env_relation *r = pr->rel;
	strbuf_adds(&s->sql, "(VALUES ");
	for (size_t k = 0; k < n; k++) {
		const struct env_tuple *t = row_of(cs[k]);
		strbuf_adds(&s->sql, k ? ", (" : "(");
		bool first = true;
		for (int pass = 0; pass < 2; pass++) /* key columns first */
			for (uint16_t i = 0; i < r->n_columns; i++) {
				if (!use[i] || pr->key[i] != (pass == 0))
					continue;
				if (!first)
					strbuf_adds(&s->sql, ", ");
				first = false;
				strbuf_addf(&s->sql, "$%zu", add_param(s, &t->values[i]));
				if (pr->key[i] && plan_no_equality(r->columns[i].type_oid))
					strbuf_adds(&s->sql, "::text");
				else
					plan_put_cast(&s->sql, pr->col_types[i]);
			}
		strbuf_addch(&s->sql, ')');
	}
	strbuf_adds(&s->sql, ") AS v (");
	bool first = true;
	for (int pass = 0; pass < 2; pass++)
		for (uint16_t i = 0; i < r->n_columns; i++) {
			if (!use[i] || pr->key[i] != (pass == 0))
				continue;
			if (!first)
				strbuf_adds(&s->sql, ", ");
			first = false;
			put_column(&s->sql, r, i);
		}
	strbuf_addch(&s->sql, ')');
}

static void put_insert(struct plan_stmt *s, const struct plan_relation *pr, const struct env_change *const *cs,
		       size_t n)
{
	const struct env_relation *r = pr->rel;
	strbuf_adds(&s->sql, "INSERT INTO ");
	put_relation_columns(&s->sql, r);
	for (uint16_t i = 0; pr->identity_always && i < r->n_columns; i++)
		if (pr->identity_always[i]) {
			strbuf_adds(&s->sql, " OVERRIDING SYSTEM VALUE"); /* keep the source's value */
			break;
		}
	if (!r->n_columns) { /* n empty rows */
		strbuf_addf(&s->sql, " SELECT FROM generate_series(1, %zu)", n);
		return;
	}
	strbuf_adds(&s->sql, " VALUES ");
	for (size_t k = 0; k < n; k++) {
		strbuf_adds(&s->sql, k ? ", (" : "(");
		for (uint16_t i = 0; i < r->n_columns; i++)
			strbuf_addf(&s->sql, i ? ", $%zu" : "$%zu", add_param(s, &cs[k]->new_tuple.values[i]));
		strbuf_addch(&s->sql, ')');
	}
}

static void put_update(struct plan_stmt *s, const struct plan_relation *pr, const struct env_change *const *cs,
		       size_t n, bool *use)
{
	const struct env_relation *r = pr->rel;
	const struct env_tuple *t0 = &cs[0]->new_tuple;
	strbuf_adds(&s->sql, "UPDATE ");
	if (!pr->partitioned)
		strbuf_adds(&s->sql, "ONLY ");
	plan_put_relation(&s->sql, r);
	strbuf_adds(&s->sql, " AS t SET ");
	bool any = false;
	for (uint16_t i = 0; i < r->n_columns; i++) {
		use[i] = pr->key[i] || t0->values[i].kind != ENV_UNCHANGED_TOAST;
		if (!use[i] || pr->key[i])
			continue;
		if (any)
			strbuf_adds(&s->sql, ", ");
		any = true;
		put_column(&s->sql, r, i);
		strbuf_adds(&s->sql, " = v.");
		put_column(&s->sql, r, i);
	}
	if (!any) {
		/* only the (unchanged) key sent: still find each row, with a
		 * column the target lets be assigned */
		uint16_t i = 0;
		while (pr->identity_always && pr->identity_always[i])
			i++; /* check_set made sure there is one */
		put_column(&s->sql, r, i);
		strbuf_adds(&s->sql, " = t.");
		put_column(&s->sql, r, i);
	}
	strbuf_adds(&s->sql, " FROM ");
	put_values(s, pr, use, cs, n);
	put_match(&s->sql, pr, pr->key);
}

static void put_delete(struct plan_stmt *s, const struct plan_relation *pr, const struct env_change *const *cs,
		       size_t n)
{
	const struct env_relation *r = pr->rel;
	strbuf_adds(&s->sql, "DELETE FROM ");
	if (!pr->partitioned)
		strbuf_adds(&s->sql, "ONLY ");
	plan_put_relation(&s->sql, r);
	strbuf_adds(&s->sql, " AS t USING ");
	put_values(s, pr, pr->key, cs, n);
	put_match(&s->sql, pr, pr->key);
}

int plan_change_set(const char *checkpoint_schema, const struct plan_relation *relations, uint32_t n_relations,
		    const struct env_change *const *cs, size_t n, struct plan_stmt *s, char *err, size_t errlen)
{
	(void)checkpoint_schema; /* the executor checks the row count: no expect_one() */
	plan_reset(s);
	int rc = check_set(relations, n_relations, cs, n, err, errlen);
	if (rc != 0) {
		plan_finish(s);
		return rc;
	}
	const struct plan_relation *pr = &relations[cs[0]->relation];
	bool *use = NULL;
	switch (cs[0]->op) {
	case ENV_INSERT:
		put_insert(s, pr, cs, n);
		break;
	case ENV_UPDATE:
		use = xcalloc(pr->rel->n_columns ? pr->rel->n_columns : 1, sizeof *use);
		put_update(s, pr, cs, n, use);
		break;
	default:
		put_delete(s, pr, cs, n);
		break;
	}
	free(use);
	s->is_row_change = true;
	s->expect_one = true;
	s->expect_rows = n;
	describe_set(s, pr, cs, n);
	plan_finish(s);
	return 0;
}

size_t plan_copy_piece(size_t n)
{
	return n < PLAN_COPY_MAX_ROWS ? n : PLAN_COPY_MAX_ROWS;
}

/* One value in COPY's text format: the escapes COPY FROM reads back. */
static void put_copy_value(struct strbuf *b, const struct env_value *v)
{
	if (v->kind == ENV_NULL) {
		strbuf_adds(b, "\\N");
		return;
	}
	size_t start = 0;
	for (size_t i = 0; i < v->len; i++) {
		char esc;
		switch (v->data[i]) {
		case '\\': esc = '\\'; break;
		case '\t': esc = 't'; break;
		case '\n': esc = 'n'; break;
		case '\r': esc = 'r'; break;
		default: continue;
		}
		strbuf_add(b, v->data + start, i - start);
		strbuf_addch(b, '\\');
		strbuf_addch(b, esc);
		start = i + 1;
	}
	strbuf_add(b, v->data + start, v->len - start);
}

int plan_copy_set(const struct plan_relation *relations, uint32_t n_relations, const struct env_change *const *cs,
		  size_t n, struct plan_stmt *s, char *err, size_t errlen)
{
	plan_reset(s);
	int rc = -1;
	if (n == 0 || n > PLAN_COPY_MAX_ROWS) {
		snprintf(err, errlen, "a COPY of %zu rows (1 to %d)", n, PLAN_COPY_MAX_ROWS);
		goto out;
	}
	for (size_t k = 0; k < n; k++)
		if (cs[k]->relation >= n_relations) {
			snprintf(err, errlen, "change %zu of a COPY refers to relation %u of %u", k, cs[k]->relation,
				 n_relations);
			goto out;
		}
	const struct plan_relation *pr = &relations[cs[0]->relation];
	const struct env_relation *r = pr->rel;
	if (cs[0]->op != ENV_INSERT) {
		rc = 1;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		if (!plan_set_compatible(relations, n_relations, cs[0], cs[k]) || cs[k]->new_tuple.n != r->n_columns) {
			snprintf(err, errlen, "%.*s.%.*s: change %zu cannot join a COPY with change 0", (int)r->schema_len,
				 r->schema, (int)r->name_len, r->name, k);
			goto out;
		}
		for (uint16_t i = 0; i < r->n_columns; i++)
			if (cs[k]->new_tuple.values[i].kind == ENV_UNCHANGED_TOAST) {
				rc = 1; /* plan_change refuses it with its reason */
				goto out;
			}
	}
	strbuf_adds(&s->sql, "COPY ");
	put_relation_columns(&s->sql, r);
	strbuf_adds(&s->sql, " FROM STDIN");
	for (size_t k = 0; k < n; k++) {
		for (uint16_t i = 0; i < r->n_columns; i++) {
			if (i)
				strbuf_addch(&s->copy_data, '\t');
			put_copy_value(&s->copy_data, &cs[k]->new_tuple.values[i]);
		}
		strbuf_addch(&s->copy_data, '\n');
	}
	s->copy = true;
	s->is_row_change = true;
	s->expect_one = true;
	s->expect_rows = n;
	describe_set(s, pr, cs, n);
	rc = 0;
out:
	if (rc != 0)
		plan_reset(s);
	plan_finish(s);
	return rc;
}

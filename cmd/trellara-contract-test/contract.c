/*
 * contract.c - fingerprints compared, stream descriptors checked, the pin
 * file encoded and decoded (contract.h).  Pure: no libpq, no logging.
 */
#include "contract.h"

#include "trellara/jsonread.h"

#include "trellara/jsonw.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void contract_fingerprint_free(struct contract_fingerprint *fp)
{
	if (!fp)
		return;
	for (size_t i = 0; i < fp->n_tables; i++) {
		struct contract_table *t = &fp->tables[i];
		free(t->schema);
		free(t->name);
		free(t->partition_key);
		free_names(t->primary_key, t->n_primary_key);
		free_names(t->replica_identity_columns, t->n_replica_identity_columns);
		for (size_t c = 0; c < t->n_columns; c++) {
			free(t->columns[c].name);
			free(t->columns[c].type);
		}
		free(t->columns);
	}
	free(fp->tables);
	free(fp->flow);
	free(fp->pinned_at);
	memset(fp, 0, sizeof *fp);
}

const struct contract_table *contract_find_table(const struct contract_fingerprint *fp, const char *schema,
						 const char *name)
{
	for (size_t i = 0; i < fp->n_tables; i++)
		if (strcmp(fp->tables[i].schema, schema) == 0 && strcmp(fp->tables[i].name, name) == 0)
			return &fp->tables[i];
	return NULL;
}

/* ---- names of values ---- */

const char *contract_where_name(enum contract_where where)
{
	switch (where) {
	case CONTRACT_SOURCE_TARGET: return "source-target";
	case CONTRACT_SOURCE_PIN: return "source-pin";
	case CONTRACT_TARGET_PIN: return "target-pin";
	}
	return "?";
}

const char *contract_left_name(enum contract_where where)
{
	return where == CONTRACT_TARGET_PIN ? "target" : "source";
}

const char *contract_right_name(enum contract_where where)
{
	return where == CONTRACT_SOURCE_TARGET ? "target" : "pin";
}

const char *contract_action_name(enum contract_action action)
{
	return action == CONTRACT_RESEED ? "reseed the table" : "refresh the contract";
}

static const char *identity_name(char c)
{
	return c == 'a' ? "always" : c == 'd' ? "by default" : "none";
}

static const char *generated_name(char c)
{
	return c == 's' ? "stored" : c == 'v' ? "virtual" : "none";
}

static const char *replident_name(char c)
{
	switch (c) {
	case 'd': return "default";
	case 'f': return "full";
	case 'i': return "index";
	case 'n': return "nothing";
	}
	return "unknown";
}

static char *relkind_text(char c)
{
	if (c == 'r')
		return xstrdup("table");
	if (c == 'p')
		return xstrdup("partitioned table");
	return xasprintf("relkind %c", c ? c : '?');
}

/* "a, b" (none: "none") */
static char *names_text(char *const *names, size_t n)
{
	if (n == 0)
		return xstrdup("none");
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_adds(&sb, ", ");
		strbuf_adds(&sb, names[i]);
	}
	return strbuf_detach(&sb, NULL);
}

static bool names_equal(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

static char *columns_text(const struct contract_table *t)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t i = 0; i < t->n_columns; i++) {
		if (i)
			strbuf_adds(&sb, ", ");
		strbuf_adds(&sb, t->columns[i].name);
	}
	return strbuf_detach(&sb, NULL);
}

/* ---- differences ---- */

void contract_diff_release(struct contract_diff *d)
{
	free(d->table);
	free(d->column);
	free(d->left);
	free(d->right);
	memset(d, 0, sizeof *d);
}

void contract_diffs_free(struct contract_diffs *d)
{
	for (size_t i = 0; i < d->n; i++)
		contract_diff_release(&d->items[i]);
	free(d->items);
	memset(d, 0, sizeof *d);
}

/* Which action a property calls for: what changes how values are stored
 * or where they go is a reseed; the rest a refresh, once the other side
 * has the same change. */
static enum contract_action action_of(const char *property)
{
	static const char *const reseed[] = { "table", "type", "type_oid", "typmod", "column_order",
					      "relkind", "is_partition", "partition_key", NULL };
	for (size_t i = 0; reseed[i]; i++)
		if (strcmp(reseed[i], property) == 0)
			return CONTRACT_RESEED;
	return CONTRACT_REFRESH;
}

/* Fills d (left and right are taken over). */
static void diff_fill(struct contract_diff *d, enum contract_where where, const char *schema, const char *name,
		      const char *property, const char *column, char *left, char *right)
{
	d->where = where;
	d->table = xasprintf("%s.%s", schema, name);
	d->property = property;
	d->column = column ? xstrdup(column) : NULL;
	d->left = left;
	d->right = right;
	d->action = action_of(property);
}

static void diff_add(struct contract_diffs *out, enum contract_where where, const struct contract_table *t,
		     const char *property, const char *column, char *left, char *right)
{
	out->items = xrealloc(out->items, (out->n + 1) * sizeof *out->items);
	diff_fill(&out->items[out->n++], where, t->schema, t->name, property, column, left, right);
}

static void diff_add_str(struct contract_diffs *out, enum contract_where where, const struct contract_table *t,
			 const char *property, const char *column, const char *left, const char *right)
{
	diff_add(out, where, t, property, column, xstrdup(left), xstrdup(right));
}

static const struct contract_column *find_column(const struct contract_table *t, const char *name)
{
	for (size_t i = 0; i < t->n_columns; i++)
		if (strcmp(t->columns[i].name, name) == 0)
			return &t->columns[i];
	return NULL;
}

static void compare_columns(const struct contract_table *l, const struct contract_table *r,
			    enum contract_where where, struct contract_diffs *out)
{
	bool oids = where == CONTRACT_SOURCE_PIN;
	for (size_t i = 0; i < l->n_columns; i++)
		if (!find_column(r, l->columns[i].name))
			diff_add_str(out, where, l, "column", l->columns[i].name, "present", "absent");
	for (size_t i = 0; i < r->n_columns; i++)
		if (!find_column(l, r->columns[i].name))
			diff_add_str(out, where, l, "column", r->columns[i].name, "absent", "present");
	/* the columns both have, in each side's order */
	bool same_order = true;
	size_t j = 0;
	for (size_t i = 0; i < l->n_columns && same_order; i++) {
		if (!find_column(r, l->columns[i].name))
			continue;
		while (j < r->n_columns && !find_column(l, r->columns[j].name))
			j++;
		same_order = j < r->n_columns && strcmp(r->columns[j].name, l->columns[i].name) == 0;
		j++;
	}
	if (!same_order)
		diff_add(out, where, l, "column_order", NULL, columns_text(l), columns_text(r));
	for (size_t i = 0; i < l->n_columns; i++) {
		const struct contract_column *a = &l->columns[i], *b = find_column(r, a->name);
		if (!b)
			continue;
		if (strcmp(a->type, b->type) != 0)
			diff_add_str(out, where, l, "type", a->name, a->type, b->type);
		if (a->not_null != b->not_null)
			diff_add_str(out, where, l, "not_null", a->name, a->not_null ? "true" : "false",
				     b->not_null ? "true" : "false");
		if (a->identity != b->identity)
			diff_add_str(out, where, l, "identity", a->name, identity_name(a->identity), identity_name(b->identity));
		if (a->generated != b->generated)
			diff_add_str(out, where, l, "generated", a->name, generated_name(a->generated),
				     generated_name(b->generated));
		if (oids && strcmp(a->type, b->type) == 0 && a->type_oid != b->type_oid)
			diff_add(out, where, l, "type_oid", a->name, xasprintf("%" PRIu32, a->type_oid),
				 xasprintf("%" PRIu32, b->type_oid));
		if (oids && strcmp(a->type, b->type) == 0 && a->typmod != b->typmod)
			diff_add(out, where, l, "typmod", a->name, xasprintf("%" PRId32, a->typmod), xasprintf("%" PRId32, b->typmod));
	}
}

static void compare_table(const struct contract_table *l, const struct contract_table *r, enum contract_where where,
			  struct contract_diffs *out)
{
	if (l->exists != r->exists) {
		diff_add_str(out, where, l, "table", NULL, l->exists ? "present" : "absent", r->exists ? "present" : "absent");
		return;
	}
	if (!l->exists)
		return;
	if (l->relkind != r->relkind)
		diff_add(out, where, l, "relkind", NULL, relkind_text(l->relkind), relkind_text(r->relkind));
	if (l->is_partition != r->is_partition)
		diff_add_str(out, where, l, "is_partition", NULL, l->is_partition ? "true" : "false",
			     r->is_partition ? "true" : "false");
	const char *lk = l->partition_key ? l->partition_key : "none", *rk = r->partition_key ? r->partition_key : "none";
	if (strcmp(lk, rk) != 0)
		diff_add_str(out, where, l, "partition_key", NULL, lk, rk);
	compare_columns(l, r, where, out);
	if (!names_equal(l->primary_key, l->n_primary_key, r->primary_key, r->n_primary_key))
		diff_add(out, where, l, "primary_key", NULL, names_text(l->primary_key, l->n_primary_key),
			 names_text(r->primary_key, r->n_primary_key));
	if (l->replica_identity != r->replica_identity)
		diff_add_str(out, where, l, "replica_identity", NULL, replident_name(l->replica_identity),
			     replident_name(r->replica_identity));
	else if (!names_equal(l->replica_identity_columns, l->n_replica_identity_columns, r->replica_identity_columns,
			      r->n_replica_identity_columns))
		diff_add(out, where, l, "replica_identity_columns", NULL,
			 names_text(l->replica_identity_columns, l->n_replica_identity_columns),
			 names_text(r->replica_identity_columns, r->n_replica_identity_columns));
}

void contract_compare(const struct contract_fingerprint *left, const struct contract_fingerprint *right,
		      enum contract_where where, struct contract_diffs *out)
{
	for (size_t i = 0; i < left->n_tables; i++) {
		const struct contract_table *l = &left->tables[i];
		const struct contract_table *r = contract_find_table(right, l->schema, l->name);
		if (!r) {
			/* a flow table the pin does not hold: pin it */
			diff_add_str(out, where, l, "table", NULL, l->exists ? "present" : "absent", "not pinned");
			out->items[out->n - 1].action = CONTRACT_REFRESH;
			continue;
		}
		compare_table(l, r, where, out);
	}
	if (where != CONTRACT_SOURCE_TARGET)
		return;
	for (size_t i = 0; i < right->n_tables; i++) {
		const struct contract_table *r = &right->tables[i];
		if (!contract_find_table(left, r->schema, r->name))
			diff_add_str(out, where, r, "table", NULL, "not listed", r->exists ? "present" : "absent");
	}
}

/* ---- a relation descriptor of the stream ---- */

static bool name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && memcmp(name, want, len) == 0;
}

/* Whether column name is part of the replica identity the pin expects
 * (pgoutput's key flag): every column with FULL, the primary key's with
 * DEFAULT, the index's with INDEX, none with NOTHING. */
static bool expected_key(const struct contract_table *t, const char *name)
{
	char *const *names = NULL;
	size_t n = 0;
	switch (t->replica_identity) {
	case 'f': return true;
	case 'd': names = t->primary_key, n = t->n_primary_key; break;
	case 'i': names = t->replica_identity_columns, n = t->n_replica_identity_columns; break;
	default: return false;
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

int contract_check_relation(const struct contract_fingerprint *pin, const char *schema, size_t schema_len,
			    const char *name, size_t name_len, char replident, const struct contract_rel_column *cols,
			    size_t n_cols, struct contract_diff *diff)
{
	const struct contract_table *t = NULL;
	for (size_t i = 0; i < pin->n_tables && !t; i++)
		if (name_is(schema, schema_len, pin->tables[i].schema) && name_is(name, name_len, pin->tables[i].name))
			t = &pin->tables[i];
	memset(diff, 0, sizeof *diff);
	if (!t)
		return 0;
	const enum contract_where w = CONTRACT_SOURCE_PIN;
	if (!t->exists) {
		diff_fill(diff, w, t->schema, t->name, "table", NULL, xstrdup("present"), xstrdup("absent"));
		return 1;
	}
	size_t j = 0;
	for (size_t i = 0; i < n_cols; i++) {
		const struct contract_rel_column *c = &cols[i];
		char *cname = xstrndup(c->name, c->name_len);
		/* generated columns are published only when the publication
		 * asks for them (PostgreSQL 18): skip the pinned ones not sent */
		while (j < t->n_columns && t->columns[j].generated && strcmp(t->columns[j].name, cname) != 0)
			j++;
		const struct contract_column *p = j < t->n_columns ? &t->columns[j] : NULL;
		if (!p || strcmp(p->name, cname) != 0) {
			if (find_column(t, cname)) {
				struct strbuf sb;
				strbuf_init(&sb);
				for (size_t k = 0; k < n_cols; k++) {
					if (k)
						strbuf_adds(&sb, ", ");
					strbuf_add(&sb, cols[k].name, cols[k].name_len);
				}
				diff_fill(diff, w, t->schema, t->name, "column_order", NULL, strbuf_detach(&sb, NULL),
					  columns_text(t));
			} else {
				diff_fill(diff, w, t->schema, t->name, "column", cname, xstrdup("present"), xstrdup("absent"));
			}
			free(cname);
			return 1;
		}
		if (p->type_oid != c->type_oid || p->typmod != c->typmod) {
			diff_fill(diff, w, t->schema, t->name, "type", cname,
				  xasprintf("type oid %" PRIu32 " typmod %" PRId32, c->type_oid, c->typmod),
				  xasprintf("%s (type oid %" PRIu32 " typmod %" PRId32 ")", p->type, p->type_oid, p->typmod));
			free(cname);
			return 1;
		}
		if (replident == t->replica_identity && c->key != expected_key(t, cname)) {
			const char *property = replident == 'd' ? "primary_key" : "replica_identity_columns";
			diff_fill(diff, w, t->schema, t->name, property, cname, xstrdup(c->key ? "key" : "not key"),
				  xstrdup(c->key ? "not key" : "key"));
			free(cname);
			return 1;
		}
		free(cname);
		j++;
	}
	for (; j < t->n_columns; j++) {
		if (!t->columns[j].generated) {
			diff_fill(diff, w, t->schema, t->name, "column", t->columns[j].name, xstrdup("absent"), xstrdup("present"));
			return 1;
		}
	}
	if (replident != t->replica_identity) {
		diff_fill(diff, w, t->schema, t->name, "replica_identity", NULL, xstrdup(replident_name(replident)),
			  xstrdup(replident_name(t->replica_identity)));
		return 1;
	}
	return 0;
}

char *contract_diff_line(const struct contract_diff *d, const char *action_text)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%s: ", d->table);
	if (strcmp(d->property, "column") == 0)
		strbuf_addf(&sb, "column \"%s\"", d->column);
	else if (d->column)
		strbuf_addf(&sb, "column \"%s\" %s", d->column, d->property);
	else
		strbuf_adds(&sb, d->property);
	strbuf_addf(&sb, " (%s): %s \"%s\", %s \"%s\"; action: %s", contract_where_name(d->where),
		    contract_left_name(d->where), d->left, contract_right_name(d->where), d->right,
		    action_text ? action_text : contract_action_name(d->action));
	return strbuf_detach(&sb, NULL);
}

/* ---- the pin file ---- */

static void char_member(struct jsonw *w, const char *key, char c)
{
	char text[2] = { c, '\0' };
	jsonw_str(w, key, text);
}

static void names_member(struct jsonw *w, const char *key, char *const *names, size_t n)
{
	jsonw_open(w, key, '[');
	for (size_t i = 0; i < n; i++)
		jsonw_text(w, NULL, names[i]);
	jsonw_close(w, ']');
}

int contract_pin_write(FILE *out, const struct contract_fingerprint *fp, const char *flow, const char *pinned_at)
{
	struct jsonw w;
	jsonw_init(&w, out, false);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "format", CONTRACT_PIN_FORMAT);
	jsonw_u64(&w, "version", true, CONTRACT_PIN_VERSION);
	jsonw_text(&w, "flow", flow);
	jsonw_str(&w, "pinned_at", pinned_at);
	jsonw_open(&w, "tables", '[');
	for (size_t i = 0; i < fp->n_tables; i++) {
		const struct contract_table *t = &fp->tables[i];
		fputc('\n', out); /* one table a line: a reviewer's diff stays readable */
		jsonw_open(&w, NULL, '{');
		jsonw_text(&w, "schema", t->schema);
		jsonw_text(&w, "name", t->name);
		jsonw_bool(&w, "exists", t->exists);
		if (t->exists) {
			char_member(&w, "relkind", t->relkind);
			jsonw_bool(&w, "is_partition", t->is_partition);
			jsonw_text(&w, "partition_key", t->partition_key);
			names_member(&w, "primary_key", t->primary_key, t->n_primary_key);
			char_member(&w, "replica_identity", t->replica_identity);
			names_member(&w, "replica_identity_columns", t->replica_identity_columns,
				     t->n_replica_identity_columns);
			jsonw_open(&w, "columns", '[');
			for (size_t c = 0; c < t->n_columns; c++) {
				const struct contract_column *col = &t->columns[c];
				jsonw_open(&w, NULL, '{');
				jsonw_text(&w, "name", col->name);
				jsonw_text(&w, "type", col->type);
				jsonw_u64(&w, "type_oid", true, col->type_oid);
				jsonw_i64(&w, "typmod", true, col->typmod);
				jsonw_bool(&w, "not_null", col->not_null);
				jsonw_str(&w, "identity", col->identity ? (char[2]){ col->identity, 0 } : "");
				jsonw_str(&w, "generated", col->generated ? (char[2]){ col->generated, 0 } : "");
				jsonw_close(&w, '}');
			}
			jsonw_close(&w, ']');
		}
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	fputc('\n', out);
	return jsonw_finish(&w);
}

/* ---- decoding ---- */

struct pin_reader {
	char *err;
	size_t errlen;
};

static int bad(struct pin_reader *r, const char *where, const char *what)
{
	errbuf_setf(r->err, r->errlen, "%s: %s", where, what);
	return -1;
}

static int get_str(struct pin_reader *r, const struct json_value *obj, const char *where, const char *key,
		   bool nullable, char **out)
{
	const struct json_value *v = jsonread_get(obj, key);
	*out = NULL;
	if (v && v->type == JSON_NULL && nullable)
		return 0;
	if (!v || v->type != JSON_STRING) {
		errbuf_setf(r->err, r->errlen, "%s: \"%s\" must be a string%s", where, key, nullable ? " or null" : "");
		return -1;
	}
	*out = xstrdup(v->text);
	return 0;
}

static int get_bool(struct pin_reader *r, const struct json_value *obj, const char *where, const char *key, bool *out)
{
	const struct json_value *v = jsonread_get(obj, key);
	if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE)) {
		errbuf_setf(r->err, r->errlen, "%s: \"%s\" must be true or false", where, key);
		return -1;
	}
	*out = v->type == JSON_TRUE;
	return 0;
}

/* one character of allowed, or (empty_ok) "" as 0 */
static int get_char(struct pin_reader *r, const struct json_value *obj, const char *where, const char *key,
		    const char *allowed, bool empty_ok, char *out)
{
	const struct json_value *v = jsonread_get(obj, key);
	bool ok = v && v->type == JSON_STRING &&
		  ((v->len == 1 && strchr(allowed, v->text[0])) || (empty_ok && v->len == 0));
	if (!ok) {
		errbuf_setf(r->err, r->errlen, "%s: \"%s\" must be one of \"%s\"%s", where, key, allowed,
			    empty_ok ? " or \"\"" : "");
		return -1;
	}
	*out = v->text[0];
	return 0;
}

static int get_names(struct pin_reader *r, const struct json_value *obj, const char *where, const char *key,
		     char ***names, size_t *n)
{
	const struct json_value *v = jsonread_get_type(obj, key, JSON_ARRAY);
	*names = NULL;
	*n = 0;
	if (!v)
		return bad(r, where, "a list of names is missing");
	*names = xcalloc(v->n ? v->n : 1, sizeof **names);
	for (size_t i = 0; i < v->n; i++) {
		if (v->items[i]->type != JSON_STRING) {
			errbuf_setf(r->err, r->errlen, "%s: \"%s\" item %zu must be a string", where, key, i + 1);
			return -1;
		}
		(*names)[(*n)++] = xstrdup(v->items[i]->text);
	}
	return 0;
}

static int decode_column(struct pin_reader *r, const struct json_value *v, const char *where, struct contract_column *c)
{
	if (v->type != JSON_OBJECT)
		return bad(r, where, "must be an object");
	uint64_t oid;
	const struct json_value *typmod = jsonread_get(v, "typmod");
	if (get_str(r, v, where, "name", false, &c->name) < 0 || get_str(r, v, where, "type", false, &c->type) < 0 ||
	    get_bool(r, v, where, "not_null", &c->not_null) < 0 ||
	    get_char(r, v, where, "identity", "ad", true, &c->identity) < 0 ||
	    get_char(r, v, where, "generated", "sv", true, &c->generated) < 0)
		return -1;
	if (!jsonread_get_uint(v, "type_oid", &oid) || oid > UINT32_MAX)
		return bad(r, where, "\"type_oid\" must be an OID");
	if (!typmod || typmod->type != JSON_NUMBER || !typmod->is_int || typmod->i < INT32_MIN || typmod->i > INT32_MAX)
		return bad(r, where, "\"typmod\" must be a 32-bit integer");
	c->type_oid = (uint32_t)oid;
	c->typmod = (int32_t)typmod->i;
	return 0;
}

static int decode_table(struct pin_reader *r, const struct json_value *v, size_t index, struct contract_table *t)
{
	char where[64];
	snprintf(where, sizeof where, "tables[%zu]", index);
	if (v->type != JSON_OBJECT)
		return bad(r, where, "must be an object");
	if (get_str(r, v, where, "schema", false, &t->schema) < 0 || get_str(r, v, where, "name", false, &t->name) < 0 ||
	    get_bool(r, v, where, "exists", &t->exists) < 0)
		return -1;
	if (!t->exists)
		return 0;
	if (get_char(r, v, where, "relkind", "rpvmf", false, &t->relkind) < 0 ||
	    get_bool(r, v, where, "is_partition", &t->is_partition) < 0 ||
	    get_str(r, v, where, "partition_key", true, &t->partition_key) < 0 ||
	    get_names(r, v, where, "primary_key", &t->primary_key, &t->n_primary_key) < 0 ||
	    get_char(r, v, where, "replica_identity", "dfin", false, &t->replica_identity) < 0 ||
	    get_names(r, v, where, "replica_identity_columns", &t->replica_identity_columns,
		      &t->n_replica_identity_columns) < 0)
		return -1;
	const struct json_value *cols = jsonread_get_type(v, "columns", JSON_ARRAY);
	if (!cols)
		return bad(r, where, "\"columns\" must be a list");
	t->columns = xcalloc(cols->n ? cols->n : 1, sizeof *t->columns);
	for (size_t i = 0; i < cols->n; i++) {
		char cwhere[96];
		snprintf(cwhere, sizeof cwhere, "%s.columns[%zu]", where, i);
		t->n_columns = i + 1;
		if (decode_column(r, cols->items[i], cwhere, &t->columns[i]) < 0)
			return -1;
	}
	return 0;
}

int contract_pin_decode(const char *text, size_t len, struct contract_fingerprint *fp, char *err, size_t errlen)
{
	struct pin_reader r = { err, errlen };
	struct json_error jerr;
	int rc = -1;
	memset(fp, 0, sizeof *fp);
	struct json_value *doc = jsonread_parse(text, len, &jerr);
	if (!doc) {
		errbuf_setf(err, errlen, "not valid JSON: %s at byte %zu", jerr.message, jerr.offset);
		goto out;
	}
	const char *format = doc->type == JSON_OBJECT ? jsonread_get_string(doc, "format") : NULL;
	uint64_t version = 0;
	if (!format || strcmp(format, CONTRACT_PIN_FORMAT) != 0) {
		errbuf_setf(err, errlen, "\"format\" is not \"%s\"", CONTRACT_PIN_FORMAT);
		goto out;
	}
	if (!jsonread_get_uint(doc, "version", &version) || version != CONTRACT_PIN_VERSION) {
		errbuf_setf(err, errlen, "\"version\" is not %d", CONTRACT_PIN_VERSION);
		goto out;
	}
	if (get_str(&r, doc, "pin", "flow", false, &fp->flow) < 0 ||
	    get_str(&r, doc, "pin", "pinned_at", true, &fp->pinned_at) < 0)
		goto out;
	const struct json_value *tables = jsonread_get_type(doc, "tables", JSON_ARRAY);
	if (!tables) {
		errbuf_setf(err, errlen, "\"tables\" must be a list");
		goto out;
	}
	fp->tables = xcalloc(tables->n ? tables->n : 1, sizeof *fp->tables);
	for (size_t i = 0; i < tables->n; i++) {
		fp->n_tables = i + 1;
		if (decode_table(&r, tables->items[i], i, &fp->tables[i]) < 0)
			goto out;
	}
	rc = 0;
out:
	jsonread_free(doc);
	if (rc < 0)
		contract_fingerprint_free(fp);
	return rc;
}

/*
 * test_contract - the schema contract's decisions (contract.h): which
 * differences two fingerprints have and what each calls for, the pin
 * file's round trip and its refusals, and the check of a stream's
 * relation descriptor against the pin.
 */
#include "../../cmd/trellara-contract-test/contract.h"
#include "unit.h"

#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* public.items (id integer NOT NULL identity, note text, qty integer),
 * primary key (id), replica identity default, a plain table */
static void items_table(struct contract_table *t)
{
	memset(t, 0, sizeof *t);
	t->schema = xstrdup("public");
	t->name = xstrdup("items");
	t->exists = true;
	t->relkind = 'r';
	t->replica_identity = 'd';
	t->primary_key = xcalloc(1, sizeof *t->primary_key);
	t->primary_key[0] = xstrdup("id");
	t->n_primary_key = 1;
	t->columns = xcalloc(4, sizeof *t->columns);
	static const struct {
		const char *name, *type;
		uint32_t oid;
		bool not_null;
		char identity;
	} cols[] = { { "id", "integer", 23, true, 'a' }, { "note", "text", 25, false, 0 }, { "qty", "integer", 23, false, 0 } };
	for (size_t i = 0; i < 3; i++) {
		struct contract_column *c = &t->columns[t->n_columns++];
		c->name = xstrdup(cols[i].name);
		c->type = xstrdup(cols[i].type);
		c->type_oid = cols[i].oid;
		c->typmod = -1;
		c->not_null = cols[i].not_null;
		c->identity = cols[i].identity;
	}
}

static void one_table(struct contract_fingerprint *fp)
{
	memset(fp, 0, sizeof *fp);
	fp->tables = xcalloc(1, sizeof *fp->tables);
	fp->n_tables = 1;
	items_table(&fp->tables[0]);
}

static void add_column(struct contract_table *t, const char *name, const char *type, uint32_t oid)
{
	struct contract_column *c = &t->columns[t->n_columns++];
	memset(c, 0, sizeof *c);
	c->name = xstrdup(name);
	c->type = xstrdup(type);
	c->type_oid = oid;
	c->typmod = -1;
}

static void set_type(struct contract_column *c, const char *type, uint32_t oid)
{
	free(c->type);
	c->type = xstrdup(type);
	c->type_oid = oid;
}

/* the only difference of a and b */
static struct contract_diff *only(struct contract_diffs *d)
{
	CHECK(d->n == 1);
	if (d->n != 1) {
		for (size_t i = 0; i < d->n; i++)
			fprintf(stderr, "  difference: %s\n", contract_diff_line(&d->items[i], NULL));
		return NULL;
	}
	return &d->items[0];
}

static void compare_fingerprints(void)
{
	struct contract_fingerprint a, b;
	struct contract_diffs d = { 0 };
	one_table(&a);
	one_table(&b);
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	CHECK(d.n == 0);

	/* a column added on the source: named, present / absent, a refresh */
	add_column(&a.tables[0], "added", "text", 25);
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	struct contract_diff *x = only(&d);
	if (x) {
		CHECK_STR(x->table, "public.items");
		CHECK_STR(x->property, "column");
		CHECK_STR(x->column, "added");
		CHECK_STR(x->left, "present");
		CHECK_STR(x->right, "absent");
		CHECK(x->action == CONTRACT_REFRESH);
		char *line = contract_diff_line(x, NULL);
		CHECK_STR(line, "public.items: column \"added\" (source-target): source \"present\", target \"absent\"; action: refresh the contract");
		free(line);
	}
	contract_diffs_free(&d);
	/* the same column the other way round (the pin has it, the target not) */
	contract_compare(&b, &a, CONTRACT_TARGET_PIN, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->left, "absent");
		CHECK_STR(x->right, "present");
		CHECK_STR(contract_left_name(x->where), "target");
		CHECK_STR(contract_right_name(x->where), "pin");
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);

	/* a type change: both types named, a reseed */
	one_table(&a);
	set_type(&a.tables[0].columns[2], "bigint", 20);
	contract_compare(&a, &b, CONTRACT_SOURCE_PIN, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->property, "type");
		CHECK_STR(x->column, "qty");
		CHECK_STR(x->left, "bigint");
		CHECK_STR(x->right, "integer");
		CHECK(x->action == CONTRACT_RESEED);
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);

	/* the same type name under another OID: only source with pin compares OIDs */
	one_table(&a);
	a.tables[0].columns[1].type_oid = 99999;
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	CHECK(d.n == 0);
	contract_compare(&a, &b, CONTRACT_SOURCE_PIN, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->property, "type_oid");
		CHECK_STR(x->left, "99999");
		CHECK_STR(x->right, "25");
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);

	/* NOT NULL, identity, generated: one difference each */
	one_table(&a);
	a.tables[0].columns[1].not_null = true;
	a.tables[0].columns[0].identity = 'd';
	a.tables[0].columns[2].generated = 's';
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	CHECK(d.n == 3);
	if (d.n == 3) {
		/* in the columns' order */
		CHECK_STR(d.items[0].property, "identity");
		CHECK_STR(d.items[0].column, "id");
		CHECK_STR(d.items[0].left, "by default");
		CHECK_STR(d.items[0].right, "always");
		CHECK_STR(d.items[1].property, "not_null");
		CHECK_STR(d.items[1].column, "note");
		CHECK_STR(d.items[2].property, "generated");
		CHECK_STR(d.items[2].left, "stored");
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);

	/* the columns' order */
	one_table(&a);
	struct contract_column swap = a.tables[0].columns[1];
	a.tables[0].columns[1] = a.tables[0].columns[2];
	a.tables[0].columns[2] = swap;
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->property, "column_order");
		CHECK_STR(x->left, "id, qty, note");
		CHECK_STR(x->right, "id, note, qty");
		CHECK(x->action == CONTRACT_RESEED);
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);

	/* primary key, replica identity, partitioning, a missing table */
	one_table(&a);
	free(a.tables[0].primary_key[0]);
	a.tables[0].n_primary_key = 0;
	a.tables[0].replica_identity = 'f';
	a.tables[0].relkind = 'p';
	a.tables[0].partition_key = xstrdup("RANGE (id)");
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	CHECK(d.n == 4);
	if (d.n == 4) {
		CHECK_STR(d.items[0].property, "relkind");
		CHECK_STR(d.items[0].left, "partitioned table");
		CHECK_STR(d.items[1].property, "partition_key");
		CHECK_STR(d.items[1].left, "RANGE (id)");
		CHECK_STR(d.items[1].right, "none");
		CHECK_STR(d.items[2].property, "primary_key");
		CHECK_STR(d.items[2].left, "none");
		CHECK_STR(d.items[2].right, "id");
		CHECK_STR(d.items[3].property, "replica_identity");
		CHECK_STR(d.items[3].left, "full");
		CHECK_STR(d.items[3].right, "default");
	}
	contract_diffs_free(&d);
	contract_fingerprint_free(&a);
	one_table(&a);
	a.tables[0].exists = false;
	contract_compare(&a, &b, CONTRACT_SOURCE_TARGET, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->property, "table");
		CHECK(x->column == NULL);
		CHECK(x->action == CONTRACT_RESEED);
	}
	contract_diffs_free(&d);
	/* a flow table the pin lacks is pinned by a refresh; a pinned table
	 * the flow no longer lists is no difference */
	struct contract_fingerprint empty = { 0 };
	contract_compare(&b, &empty, CONTRACT_SOURCE_PIN, &d);
	x = only(&d);
	if (x) {
		CHECK_STR(x->property, "table");
		CHECK_STR(x->right, "not pinned");
		CHECK(x->action == CONTRACT_REFRESH);
	}
	contract_diffs_free(&d);
	contract_compare(&empty, &b, CONTRACT_TARGET_PIN, &d);
	CHECK(d.n == 0);
	contract_fingerprint_free(&a);
	contract_fingerprint_free(&b);
}

static char *pin_text(const struct contract_fingerprint *fp, size_t *len)
{
	char *text = NULL;
	FILE *mem = open_memstream(&text, len);
	CHECK(contract_pin_write(mem, fp, "main-db:orders", "2026-12-05T03:00:00Z") == 0);
	fclose(mem);
	return text;
}

static void pin_file(void)
{
	struct contract_fingerprint a, back;
	struct contract_diffs d = { 0 };
	char err[CONTRACT_ERR_LEN];
	one_table(&a);
	a.tables[0].replica_identity = 'i';
	a.tables[0].replica_identity_columns = xcalloc(2, sizeof(char *));
	a.tables[0].replica_identity_columns[0] = xstrdup("id");
	a.tables[0].replica_identity_columns[1] = xstrdup("odd \"name\"");
	a.tables[0].n_replica_identity_columns = 2;
	a.tables[0].columns[2].typmod = 5;
	size_t len;
	char *text = pin_text(&a, &len);
	CHECK(contract_pin_decode(text, len, &back, err, sizeof err) == 0);
	CHECK_STR(back.flow, "main-db:orders");
	CHECK_STR(back.pinned_at, "2026-12-05T03:00:00Z");
	/* what was written reads back the same, OIDs and typmods too */
	contract_compare(&a, &back, CONTRACT_SOURCE_PIN, &d);
	CHECK(d.n == 0);
	CHECK(back.n_tables == 1 && back.tables[0].n_replica_identity_columns == 2);
	if (back.n_tables == 1 && back.tables[0].n_replica_identity_columns == 2)
		CHECK_STR(back.tables[0].replica_identity_columns[1], "odd \"name\"");
	contract_diffs_free(&d);
	contract_fingerprint_free(&back);
	/* the encoding is stable: the same fingerprint, the same bytes */
	size_t len2;
	char *again = pin_text(&a, &len2);
	CHECK(len == len2 && memcmp(text, again, len) == 0);
	free(again);

	/* refusals name the field */
	static const struct {
		const char *from, *to, *message;
	} damage[] = {
		{ "\"format\":\"trellara-contract\"", "\"format\":\"other\"", "\"format\" is not \"trellara-contract\"" },
		{ "\"version\":1", "\"version\":2", "\"version\" is not 1" },
		{ "\"not_null\":true", "\"not_null\":1", "tables[0].columns[0]: \"not_null\" must be true or false" },
		{ "\"replica_identity\":\"i\"", "\"replica_identity\":\"x\"", "tables[0]: \"replica_identity\" must be one of \"dfin\"" },
		{ "\"typmod\":5", "\"typmod\":5.5", "tables[0].columns[2]: \"typmod\" must be a 32-bit integer" },
		{ "\"type_oid\":23", "\"type_oid\":-23", "tables[0].columns[0]: \"type_oid\" must be an OID" },
	};
	for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
		char *at = strstr(text, damage[i].from);
		CHECK(at != NULL);
		if (!at)
			continue;
		char *bad = xasprintf("%.*s%s%s", (int)(at - text), text, damage[i].to, at + strlen(damage[i].from));
		err[0] = '\0';
		CHECK(contract_pin_decode(bad, strlen(bad), &back, err, sizeof err) < 0);
		CHECK_STR(err, damage[i].message);
		CHECK(back.tables == NULL && back.n_tables == 0);
		free(bad);
	}
	CHECK(contract_pin_decode(text, len - 3, &back, err, sizeof err) < 0);
	CHECK(strncmp(err, "not valid JSON", 14) == 0);
	free(text);
	contract_fingerprint_free(&a);
}

#define COL(n, oid, key) { n, sizeof n - 1, oid, -1, key }

static void stream_relation(void)
{
	struct contract_fingerprint pin;
	struct contract_diff d;
	one_table(&pin);
	const struct contract_rel_column same[] = { COL("id", 23, true), COL("note", 25, false), COL("qty", 23, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', same, 3, &d) == 0);
	/* a table the pin does not hold passes */
	const struct contract_rel_column other[] = { COL("x", 25, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "other", 5, 'd', other, 1, &d) == 0);

	/* ADD COLUMN on the source */
	const struct contract_rel_column added[] = { COL("id", 23, true), COL("note", 25, false), COL("qty", 23, false),
						     COL("added", 25, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', added, 4, &d) == 1);
	CHECK_STR(d.property, "column");
	CHECK_STR(d.column, "added");
	CHECK_STR(d.left, "present");
	CHECK_STR(d.right, "absent");
	CHECK(d.where == CONTRACT_SOURCE_PIN && d.action == CONTRACT_REFRESH);
	contract_diff_release(&d);
	/* DROP COLUMN */
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', same, 2, &d) == 1);
	CHECK_STR(d.column, "qty");
	CHECK_STR(d.left, "absent");
	contract_diff_release(&d);
	/* ALTER TYPE: the new type's OID against the pinned type */
	const struct contract_rel_column retyped[] = { COL("id", 23, true), COL("note", 25, false), COL("qty", 20, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', retyped, 3, &d) == 1);
	CHECK_STR(d.property, "type");
	CHECK_STR(d.column, "qty");
	CHECK_STR(d.left, "type oid 20 typmod -1");
	CHECK_STR(d.right, "integer (type oid 23 typmod -1)");
	CHECK(d.action == CONTRACT_RESEED);
	contract_diff_release(&d);
	/* a new primary key column (the key flags) and another replica identity */
	const struct contract_rel_column rekeyed[] = { COL("id", 23, true), COL("note", 25, true), COL("qty", 23, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', rekeyed, 3, &d) == 1);
	CHECK_STR(d.property, "primary_key");
	CHECK_STR(d.column, "note");
	contract_diff_release(&d);
	const struct contract_rel_column full[] = { COL("id", 23, true), COL("note", 25, true), COL("qty", 23, true) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'f', full, 3, &d) == 1);
	CHECK_STR(d.property, "replica_identity");
	CHECK_STR(d.left, "full");
	CHECK_STR(d.right, "default");
	contract_diff_release(&d);
	/* reordered */
	const struct contract_rel_column reordered[] = { COL("id", 23, true), COL("qty", 23, false), COL("note", 25, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', reordered, 3, &d) == 1);
	CHECK_STR(d.property, "column_order");
	contract_diff_release(&d);
	/* a pinned generated column pgoutput did not send is not a drift */
	add_column(&pin.tables[0], "total", "integer", 23);
	pin.tables[0].columns[3].generated = 's';
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', same, 3, &d) == 0);
	const struct contract_rel_column with_generated[] = { COL("id", 23, true), COL("note", 25, false),
							      COL("qty", 23, false), COL("total", 23, false) };
	CHECK(contract_check_relation(&pin, "public", 6, "items", 5, 'd', with_generated, 4, &d) == 0);
	contract_fingerprint_free(&pin);
}

int main(void)
{
	compare_fingerprints();
	pin_file();
	stream_relation();
	return unit_done("test_contract");
}

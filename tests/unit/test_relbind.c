/* relbind: which source relation each flow table is (relbind.h). */
#include "trellara/relbind.h"

#include "unit.h"

#include <string.h>

static enum relbind_verdict see(struct relbind *b, uint32_t oid, const char *schema, const char *name, size_t *t)
{
	return relbind_observe(b, oid, schema, strlen(schema), name, strlen(name), t);
}

int main(void)
{
	const char *schemas[] = { "public", "public", "app" };
	const char *names[] = { "orders", "customers", "orders" };
	struct relbind b;
	relbind_init(&b, schemas, names, 3);
	size_t t = 99;

	/* the catalog's binding at connect, then the messages */
	relbind_set(&b, 0, 100);
	CHECK(see(&b, 100, "public", "orders", &t) == RELBIND_OK);
	CHECK(t == 99);
	/* an unbound flow table is bound by its first message */
	CHECK(b.tables[1].oid == 0);
	CHECK(see(&b, 200, "public", "customers", &t) == RELBIND_OK);
	CHECK(b.tables[1].oid == 200);
	/* a relation outside the flow: nothing to say, nothing bound */
	CHECK(see(&b, 300, "public", "audit", &t) == RELBIND_OK);
	CHECK(b.tables[0].oid == 100 && b.tables[1].oid == 200 && b.tables[2].oid == 0);
	/* renamed: the OID under another name (its new name is outside the flow) */
	CHECK(see(&b, 100, "public", "orders_old", &t) == RELBIND_RENAMED);
	CHECK(t == 0);
	/* moved to another schema; a prefix of the name is another name */
	CHECK(see(&b, 200, "archive", "customers", &t) == RELBIND_RENAMED && t == 1);
	CHECK(see(&b, 200, "public", "customer", &t) == RELBIND_RENAMED && t == 1);
	CHECK(see(&b, 200, "public", "customerss", &t) == RELBIND_RENAMED && t == 1);
	/* renamed to the name of another flow table: still the first's OID */
	CHECK(see(&b, 100, "app", "orders", &t) == RELBIND_RENAMED && t == 0);
	/* replaced: the flow's name with another OID */
	CHECK(see(&b, 101, "public", "orders", &t) == RELBIND_REPLACED && t == 0);
	CHECK(b.tables[0].oid == 100);
	/* a table that did not exist at connect (unbound) is bound later */
	relbind_set(&b, 1, 0);
	CHECK(see(&b, 201, "public", "customers", &t) == RELBIND_OK && b.tables[1].oid == 201);
	/* the same name in another schema is another table of the flow */
	CHECK(see(&b, 400, "app", "orders", &t) == RELBIND_OK && b.tables[2].oid == 400);
	CHECK(see(&b, 400, "app", "orders", &t) == RELBIND_OK);
	relbind_free(&b);
	CHECK(b.n == 0 && b.tables == NULL);
	return unit_done("relbind");
}

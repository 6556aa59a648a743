/*
 * relbind.c - which source relation each flow table is (relbind.h).
 */
#include "trellara/relbind.h"

#include "trellara/xalloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void relbind_init(struct relbind *b, const char *const *schemas, const char *const *names, size_t n)
{
	b->n = n;
	b->tables = xcalloc(n ? n : 1, sizeof *b->tables);
	for (size_t i = 0; i < n; i++) {
		b->tables[i].schema = xstrdup(schemas[i]);
		b->tables[i].name = xstrdup(names[i]);
	}
}

void relbind_free(struct relbind *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->tables[i].schema);
		free(b->tables[i].name);
	}
	free(b->tables);
	b->tables = NULL;
	b->n = 0;
}

void relbind_set(struct relbind *b, size_t i, uint32_t oid)
{
	if (i < b->n)
		b->tables[i].oid = oid;
}

static bool same(const char *a, const char *s, size_t len)
{
	return strlen(a) == len && memcmp(a, s, len) == 0;
}

enum relbind_verdict relbind_observe(struct relbind *b, uint32_t oid, const char *schema, size_t schema_len,
				     const char *name, size_t name_len, size_t *table)
{
	for (size_t i = 0; i < b->n; i++) {
		const struct relbind_table *t = &b->tables[i];
		bool named = same(t->schema, schema, schema_len) && same(t->name, name, name_len);
		if (t->oid == oid && oid != 0 && !named) {
			*table = i;
			return RELBIND_RENAMED;
		}
		if (named && t->oid != 0 && t->oid != oid) {
			*table = i;
			return RELBIND_REPLACED;
		}
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->tables[i].oid == 0 && same(b->tables[i].schema, schema, schema_len) &&
		    same(b->tables[i].name, name, name_len))
			b->tables[i].oid = oid;
	return RELBIND_OK;
}

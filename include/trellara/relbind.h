/*
 * relbind.h - which source relation each flow table is (DESIGN §7,
 * "Which relation a flow table is"): the flow names its tables (dataset.tables), pgoutput
 * names a relation by OID and by its name at the time of the change.  A
 * flow table renamed or moved to another schema keeps its OID and arrives
 * under its new name; a name of the flow that arrives with another OID
 * is another relation (the table dropped and created again, or another
 * table renamed to it).  Either way the changes that follow would be
 * skipped as a table outside the dataset, or applied to the wrong rows:
 * capture stops before writing them (relbind_observe's verdict).
 *
 * Pure: the bindings come from the source's catalog when capture
 * connects (relbind_set) and from each Relation message (relbind_observe);
 * no I/O here.
 */
#ifndef TRELLARA_RELBIND_H
#define TRELLARA_RELBIND_H

#include <stddef.h>
#include <stdint.h>

struct relbind_table {
	char *schema, *name; /* owned: the flow's name for it */
	uint32_t oid;        /* 0: not bound yet */
};

struct relbind {
	struct relbind_table *tables; /* owned */
	size_t n;
};

enum relbind_verdict {
	RELBIND_OK,       /* a flow table under its name and OID, or a relation outside the flow */
	RELBIND_RENAMED,  /* a flow table's OID under another name: renamed or moved */
	RELBIND_REPLACED, /* a flow table's name with another OID: dropped and created, or swapped */
};

/* The n tables (schema.name each) of the flow, none bound. */
void relbind_init(struct relbind *b, const char *const *schemas, const char *const *names, size_t n);
void relbind_free(struct relbind *b);
/* Binds table i to oid (0 unbinds: the table does not exist now). */
void relbind_set(struct relbind *b, size_t i, uint32_t oid);
/* The relation oid is named schema.name (lengths given: not
 * NUL-terminated).  An unbound flow table of that name is bound to it.
 * RENAMED and REPLACED set *table to the flow table concerned. */
enum relbind_verdict relbind_observe(struct relbind *b, uint32_t oid, const char *schema, size_t schema_len,
				     const char *name, size_t name_len, size_t *table);

#endif

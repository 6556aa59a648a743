/*
 * relbind_pg.c - the flow tables' relations on the source now
 * (relbind.h): each one's OID by its name, from pg_class.
 */
#include "trellara/relbind.h"

#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/relbind_pg.h"

#include <stdlib.h>
#include <string.h>

int relbind_load(PGconn *conn, struct relbind *b, size_t *missing)
{
	*missing = b->n;
	for (size_t i = 0; i < b->n; i++) {
		const char *p[2] = { b->tables[i].schema, b->tables[i].name };
		PGresult *res = pgconn_query(conn,
					     "SELECT c.oid FROM pg_catalog.pg_class c"
					     " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
					     " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
					     2, p);
		if (!res)
			return -1;
		uint32_t oid = PQntuples(res) == 1 ? (uint32_t)strtoul(PQgetvalue(res, 0, 0), NULL, 10) : 0;
		PQclear(res);
		relbind_set(b, i, oid);
		if (!oid && *missing == b->n)
			*missing = i;
	}
	return 0;
}

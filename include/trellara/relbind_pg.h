/*
 * relbind_pg.h - the flow tables' relations on the source now: binds each
 * flow table of b to its OID in the source's catalog (relbind.h).
 */
#ifndef TRELLARA_RELBIND_PG_H
#define TRELLARA_RELBIND_PG_H

#include "trellara/relbind.h"

#include <libpq-fe.h>
#include <stddef.h>

/* 0, with *missing the first flow table that does not exist on the
 * source (left unbound), or b->n when all do; -1 when a query failed
 * (logged). */
int relbind_load(PGconn *conn, struct relbind *b, size_t *missing);

#endif

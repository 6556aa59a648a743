/*
 * target_pg.h - the apply engine's target over libpq: the pipelined
 * executor (executor.h) for the statements of a batch, the checkpoint
 * module (checkpoint.h) for the checkpoint row, quarantine and fences,
 * and the target's catalogs for what the planner needs of each table.
 */
#ifndef TRELLARA_APPLYD_TARGET_PG_H
#define TRELLARA_APPLYD_TARGET_PG_H

#include "executor.h"

#include "trellara/apply_engine.h"
#include "trellara/config.h"

#include <libpq-fe.h>
#include <stdbool.h>

struct target_pg {
	const struct flow_config *cfg; /* borrowed */
	struct flow_ids ids;
	PGconn *conn;                  /* borrowed: applyd connects */
	struct executor ex;
	bool ex_ready;
	bool parallel;                 /* apply.workers > 1: lock waits bounded outside the checkpoint */
	long long own_lock_timeout_ms; /* the session's lock_timeout before the bound (0: none) */
	char own_lock_timeout_sql[64]; /* SET LOCAL of it: a batch on one connection */
	char *lock_sql, *update_sql;   /* owned: the checkpoint's statements */
};

extern const struct apply_target_ops target_pg_ops;

/* After connecting (conn set): the executor; 0 or -1. */
int target_pg_open(struct target_pg *t);
void target_pg_close(struct target_pg *t);
/* The flow's tables as the target says now (the ops' reload_tables). */
int target_pg_tables_load(struct target_pg *t, struct apply_tables *tables);

#endif

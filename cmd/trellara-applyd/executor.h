/*
 * executor.h - applyd's libpq side: statements sent in pipeline mode as
 * prepared statements, results read back at sync points, the first error
 * kept with its SQLSTATE and the tag of the statement that raised it.
 *
 * A sync point is inserted every EXECUTOR_SYNC_EVERY commands, so that
 * neither side's socket buffer can fill up while the other writes (the
 * pipeline deadlock); syncs inside an explicit transaction do not commit.
 */
#ifndef TRELLARA_APPLYD_EXECUTOR_H
#define TRELLARA_APPLYD_EXECUTOR_H

#include "trellara/apply_engine.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXECUTOR_SYNC_EVERY 1000


struct executor_cmd;
struct prepared_entry;

struct executor {
	PGconn *conn;                  /* borrowed */
	struct prepared_entry *cache;  /* owned: statement text -> name */
	size_t cache_cap, cache_count;
	unsigned next_id;
	struct executor_cmd *queue;    /* owned: commands awaiting results */
	size_t queue_len, queue_cap;
	struct apply_target_error error; /* the first (tag: of the failing command) */
	bool submitted;                /* a sync was sent whose results are not read yet */
};

int executor_init(struct executor *e, PGconn *conn);
void executor_free(struct executor *e);
/* Queue a statement (prepared on first use); tag identifies it in errors.
 * expect_one: it must report exactly expect_rows rows, else the sync
 * fails with SQLSTATE TR001 (fewer: "no row matched" for one row, "n of
 * m rows matched" for more) or TR002 (more: "more than one row matched",
 * "n rows matched where m were expected"), naming what (may be NULL). */
int executor_exec(struct executor *e, const char *sql, int nparams, const char *const *values, uint64_t tag,
		  bool expect_one, uint64_t expect_rows, const char *what);
/* COPY ... FROM STDIN of data[0..len) in the open transaction: every
 * queued command's results read first (libpq runs no COPY in pipeline
 * mode), pipeline mode left, the COPY run and its row count checked as
 * executor_exec's expect_rows, pipeline mode entered again.  A failure
 * leaves e->error set as executor_sync does (transaction rolled back). */
int executor_copy(struct executor *e, const char *sql, const char *data, size_t len, uint64_t tag,
		  uint64_t expect_rows, const char *what);
/* BEGIN / COMMIT / ROLLBACK and other parameterless commands. */
int executor_control(struct executor *e, const char *sql, uint64_t tag);
/* Sync and read every result queued so far.  0 when all succeeded, -1
 * with e->error set otherwise (after which the executor rolls back any
 * open transaction and forgets its prepared statements). */
int executor_sync(struct executor *e);
/* executor_sync in two halves: the sync sent (everything queued flushed
 * to the server), and later its results read.  Between the two the
 * executor takes no command (the engine collects a connection before it
 * sends on it again). */
int executor_submit(struct executor *e);
int executor_collect(struct executor *e);
/* Synchronous query outside any batch (pipeline mode left and re-entered). */
PGresult *executor_query(struct executor *e, const char *sql, int nparams, const char *const *values);

#endif

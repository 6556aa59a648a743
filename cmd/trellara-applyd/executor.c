/*
 * executor.c - pipelined, prepared statement execution (executor.h).
 */
#include "executor.h"

#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/sqlstate.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum cmd_kind { CMD_PREPARE, CMD_EXEC, CMD_CONTROL };

struct executor_cmd {
	enum cmd_kind kind;
	uint64_t tag;
	size_t cache_slot; /* CMD_PREPARE: the entry to forget if it failed */
	bool expect_one;
	uint64_t expect_rows; /* with expect_one */
	char *what;        /* owned, may be NULL */
};

struct prepared_entry {
	char *sql; /* owned; NULL = empty slot */
	uint64_t hash;
	unsigned id;
};

static uint64_t hash_text(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

int executor_init(struct executor *e, PGconn *conn)
{
	memset(e, 0, sizeof *e);
	e->conn = conn;
	e->cache_cap = 1024;
	e->cache = xcalloc(e->cache_cap, sizeof *e->cache);
	if (PQenterPipelineMode(conn) != 1) {
		log_error("cannot enter pipeline mode: %s", PQerrorMessage(conn));
		return -1;
	}
	return 0;
}

static void cache_clear(struct executor *e)
{
	for (size_t i = 0; i < e->cache_cap; i++) {
		free(e->cache[i].sql);
		e->cache[i].sql = NULL;
	}
	e->cache_count = 0;
}

void executor_free(struct executor *e)
{
	for (size_t k = 0; k < e->queue_len; k++)
		free(e->queue[k].what);
	cache_clear(e);
	free(e->cache);
	free(e->queue);
	memset(e, 0, sizeof *e);
}

static void queue_push(struct executor *e, enum cmd_kind kind, uint64_t tag, size_t slot)
{
	if (e->queue_len == e->queue_cap) {
		e->queue_cap = e->queue_cap ? e->queue_cap * 2 : 256;
		e->queue = xrealloc(e->queue, e->queue_cap * sizeof *e->queue);
	}
	e->queue[e->queue_len++] = (struct executor_cmd){ kind, tag, slot, false, 0, NULL };
}

static void cache_grow(struct executor *e)
{
	struct prepared_entry *old = e->cache;
	size_t old_cap = e->cache_cap;
	e->cache_cap *= 2;
	e->cache = xcalloc(e->cache_cap, sizeof *e->cache);
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].sql)
			continue;
		size_t j = old[i].hash & (e->cache_cap - 1);
		while (e->cache[j].sql)
			j = (j + 1) & (e->cache_cap - 1);
		e->cache[j] = old[i];
	}
	free(old);
}

static int fail_send(struct executor *e)
{
	e->error.failed = true;
	e->error.connection_lost = PQstatus(e->conn) != CONNECTION_OK;
	snprintf(e->error.message, sizeof e->error.message, "%s", PQerrorMessage(e->conn));
	return -1;
}

int executor_exec(struct executor *e, const char *sql, int nparams, const char *const *values, uint64_t tag,
		  bool expect_one, uint64_t expect_rows, const char *what)
{
	if (e->submitted && executor_collect(e) < 0)
		return -1;
	if (e->error.failed)
		return -1;
	uint64_t h = hash_text(sql);
	size_t j = h & (e->cache_cap - 1);
	while (e->cache[j].sql && (e->cache[j].hash != h || strcmp(e->cache[j].sql, sql) != 0))
		j = (j + 1) & (e->cache_cap - 1);
	char name[24];
	if (!e->cache[j].sql) {
		if ((e->cache_count + 1) * 2 > e->cache_cap) {
			cache_grow(e);
			return executor_exec(e, sql, nparams, values, tag, expect_one, expect_rows, what);
		}
		e->cache[j].sql = xstrdup(sql);
		e->cache[j].hash = h;
		e->cache[j].id = ++e->next_id;
		e->cache_count++;
		snprintf(name, sizeof name, "t%u", e->cache[j].id);
		if (!PQsendPrepare(e->conn, name, sql, nparams, NULL))
			return fail_send(e);
		queue_push(e, CMD_PREPARE, tag, j);
	}
	snprintf(name, sizeof name, "t%u", e->cache[j].id);
	if (!PQsendQueryPrepared(e->conn, name, nparams, values, NULL, NULL, 0))
		return fail_send(e);
	queue_push(e, CMD_EXEC, tag, 0);
	e->queue[e->queue_len - 1].expect_one = expect_one;
	e->queue[e->queue_len - 1].expect_rows = expect_rows;
	e->queue[e->queue_len - 1].what = what && *what ? xstrdup(what) : NULL;
	if (e->queue_len >= EXECUTOR_SYNC_EVERY)
		return executor_sync(e);
	return 0;
}

int executor_control(struct executor *e, const char *sql, uint64_t tag)
{
	if (e->submitted)
		executor_collect(e); /* a failure is the error kept; ROLLBACK goes on */
	if (e->error.failed && strcmp(sql, "ROLLBACK") != 0)
		return -1;
	if (!PQsendQueryParams(e->conn, sql, 0, NULL, NULL, NULL, NULL, 0))
		return fail_send(e);
	queue_push(e, CMD_CONTROL, tag, 0);
	return 0;
}

static void record_error(struct executor *e, PGresult *res, uint64_t tag)
{
	if (e->error.failed)
		return;
	e->error.failed = true;
	e->error.tag = tag;
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	snprintf(e->error.sqlstate, sizeof e->error.sqlstate, "%s", state ? state : "");
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	snprintf(e->error.message, sizeof e->error.message, "%s", msg ? msg : PQerrorMessage(e->conn));
	e->error.connection_lost = PQstatus(e->conn) != CONNECTION_OK || sqlstate_classify(state) == SQLSTATE_CLASS_CONNECTION;
}

/* The command's row count must be expect_rows: TR001 fewer, TR002 more. */
static void check_rows(struct executor *e, PGresult *res, uint64_t tag, uint64_t expect_rows, const char *what)
{
	if (e->error.failed)
		return;
	unsigned long long rows = strtoull(PQcmdTuples(res), NULL, 10);
	if (rows == expect_rows)
		return;
	if (!what)
		what = "(retry names the row)";
	e->error.failed = true;
	e->error.tag = tag;
	snprintf(e->error.sqlstate, sizeof e->error.sqlstate, "%s", rows < expect_rows ? "TR001" : "TR002");
	if (expect_rows == 1)
		snprintf(e->error.message, sizeof e->error.message, "%s: %s",
			 rows == 0 ? "no row matched" : "more than one row matched", what);
	else if (rows < expect_rows)
		snprintf(e->error.message, sizeof e->error.message, "%llu of %" PRIu64 " rows matched: %s", rows,
			 expect_rows, what);
	else
		snprintf(e->error.message, sizeof e->error.message, "%llu rows matched where %" PRIu64 " were expected: %s",
			 rows, expect_rows, what);
}

static void drain_to_sync(PGconn *conn)
{
	PGresult *res;
	for (;;) {
		res = PQgetResult(conn);
		if (!res) {
			if (PQstatus(conn) != CONNECTION_OK)
				return;
			continue;
		}
		bool sync = PQresultStatus(res) == PGRES_PIPELINE_SYNC;
		PQclear(res);
		if (sync)
			return;
	}
}

int executor_sync(struct executor *e)
{
	return executor_submit(e) < 0 ? -1 : executor_collect(e);
}

int executor_submit(struct executor *e)
{
	if (e->submitted)
		return 0;
	if (PQpipelineSync(e->conn) != 1) {
		for (size_t k = 0; k < e->queue_len; k++)
			free(e->queue[k].what);
		e->queue_len = 0;
		return fail_send(e);
	}
	e->submitted = true;
	return 0;
}

static int after_error(struct executor *e);

int executor_collect(struct executor *e)
{
	if (!e->submitted)
		return e->error.failed ? -1 : 0;
	e->submitted = false;
	/* Results arrive in command order, each command's ending with NULL;
	 * the sync's own result ends the lot. */
	size_t i = 0;
	for (;;) {
		PGresult *res = PQgetResult(e->conn);
		if (!res) {
			if (PQstatus(e->conn) != CONNECTION_OK) {
				record_error(e, NULL, i < e->queue_len ? e->queue[i].tag : 0);
				e->error.connection_lost = true;
				break;
			}
			i++;
			continue;
		}
		ExecStatusType st = PQresultStatus(res);
		if (st == PGRES_PIPELINE_SYNC) {
			PQclear(res);
			break;
		}
		struct executor_cmd *c = i < e->queue_len ? &e->queue[i] : NULL;
		if (st == PGRES_FATAL_ERROR)
			record_error(e, res, c ? c->tag : 0);
		if (st == PGRES_COMMAND_OK && c && c->expect_one)
			check_rows(e, res, c->tag, c->expect_rows, c->what);
		if ((st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED) && c && c->kind == CMD_PREPARE) {
			free(e->cache[c->cache_slot].sql);
			e->cache[c->cache_slot].sql = NULL;
			e->cache_count--;
		}
		PQclear(res);
	}
	for (size_t k = 0; k < e->queue_len; k++)
		free(e->queue[k].what);
	e->queue_len = 0;
	return e->error.failed ? after_error(e) : 0;
}

/* Leave no aborted transaction behind; the cache may name statements
 * whose preparation was skipped, so start it over.  -1. */
static int after_error(struct executor *e)
{
	if (PQstatus(e->conn) == CONNECTION_OK) {
		if (PQtransactionStatus(e->conn) != PQTRANS_IDLE) {
			PQsendQueryParams(e->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0);
			PQpipelineSync(e->conn);
			drain_to_sync(e->conn);
		}
		PQsendQueryParams(e->conn, "DEALLOCATE ALL", 0, NULL, NULL, NULL, NULL, 0);
		PQpipelineSync(e->conn);
		drain_to_sync(e->conn);
	}
	cache_clear(e);
	return -1;
}

PGresult *executor_query(struct executor *e, const char *sql, int nparams, const char *const *values)
{
	if (e->queue_len && executor_sync(e) < 0)
		return NULL;
	if (PQexitPipelineMode(e->conn) != 1) {
		log_error("cannot leave pipeline mode: %s", PQerrorMessage(e->conn));
		return NULL;
	}
	PGresult *res = pgconn_query(e->conn, sql, nparams, values);
	if (PQenterPipelineMode(e->conn) != 1) {
		log_error("cannot enter pipeline mode: %s", PQerrorMessage(e->conn));
		PQclear(res);
		return NULL;
	}
	return res;
}

int executor_copy(struct executor *e, const char *sql, const char *data, size_t len, uint64_t tag,
		  uint64_t expect_rows, const char *what)
{
	if (e->submitted && executor_collect(e) < 0)
		return -1;
	if (e->error.failed || (e->queue_len && executor_sync(e) < 0))
		return -1;
	if (PQexitPipelineMode(e->conn) != 1)
		return fail_send(e);
	PGresult *res = PQexec(e->conn, sql);
	if (PQresultStatus(res) == PGRES_COPY_IN) {
		PQclear(res);
		/* the connection blocks: PQputCopyData queues or sends it all */
		int sent = PQputCopyData(e->conn, data, (int)len) == 1 && PQputCopyEnd(e->conn, NULL) == 1;
		res = PQgetResult(e->conn);
		if (!sent && PQresultStatus(res) != PGRES_FATAL_ERROR) {
			PQclear(res);
			res = NULL;
		}
	}
	if (res && PQresultStatus(res) == PGRES_COMMAND_OK)
		check_rows(e, res, tag, expect_rows, what);
	else
		record_error(e, res, tag);
	PQclear(res);
	while ((res = PQgetResult(e->conn)))
		PQclear(res);
	if (PQenterPipelineMode(e->conn) != 1 && !e->error.failed)
		fail_send(e);
	return e->error.failed ? after_error(e) : 0;
}

/*
 * checkpoint_fence.c - the flow's fence in the target's checkpoint schema
 * (DESIGN §9, checkpoint.h): who sets it (verify, repair, reseed), how it
 * is moved, marked held by applyd and released, and how far the applier
 * got towards it.  The rest of the schema is checkpoint.c.
 */
#include "trellara/checkpoint.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"

#include <stdio.h>
#include <string.h>

static PGresult *query_schema(PGconn *conn, const char *schema, const char *sql, int n, const char *const *params)
{
	return pgconn_schema_query(conn, schema, sql, n, params);
}

/* A fence requested by verify is bound to verify's target session: that
 * session holds the flow's fence lock, a session-level advisory lock
 * (two int4 keys: pg_locks shows them as classid, objid, objsubid 2).
 * When the session ends (closed, killed, lost, the server restarted) the
 * lock goes with it, and the fence no longer stands: verify, the only
 * reader of what it holds the target for, is gone.  Any other fence
 * stands until it is deleted. */
#define FENCE_LOCK_KEY(source_id, dataset_id) \
	"hashtext('trellara.fence'), hashtext(" source_id " || '/' || " dataset_id ")"
/* whether the fence row f stands */
#define FENCE_STANDS                                                                                          \
	"(f.requested_by IS DISTINCT FROM '" FENCE_BY_VERIFY "' OR EXISTS (SELECT 1 FROM pg_locks l"          \
	" WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"                                      \
	" AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"                  \
	" AND l.classid = hashtext('trellara.fence')::oid"                                                     \
	" AND l.objid = hashtext(f.source_id || '/' || f.dataset_id)::oid))"

static int unlock_fence(PGconn *conn, const struct flow_ids *ids)
{
	const char *p[2] = { ids->source_id, ids->dataset_id };
	PGresult *res = pgconn_query(conn, "SELECT pg_advisory_unlock(" FENCE_LOCK_KEY("$1::text", "$2::text") ")", 2, p);
	if (!res)
		return -1;
	PQclear(res);
	return 0;
}

int checkpoint_fence_get(PGconn *conn, const char *schema, const struct flow_ids *ids, bool *present,
			 uint64_t *fence_lsn, char *state, size_t state_len)
{
	*present = false;
	const char *p[2] = { ids->source_id, ids->dataset_id };
	PGresult *res = query_schema(conn, schema,
				     "SELECT fence_lsn, state FROM @.apply_fence f WHERE source_id = $1 AND dataset_id = $2"
				     " AND state <> 'released' AND " FENCE_STANDS,
				     2, p);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		*present = true;
		lsn_parse(PQgetvalue(res, 0, 0), fence_lsn);
		snprintf(state, state_len, "%s", PQgetvalue(res, 0, 1));
	}
	PQclear(res);
	return 0;
}

/* An UPDATE ... RETURNING 1 of the fence row with four parameters: *hit
 * whether it changed the row; 0, or -1 on error (logged). */
static int update_hit(PGconn *conn, const char *schema, const char *sql, const char *const *p, bool *hit)
{
	PGresult *res = query_schema(conn, schema, sql, 4, p);
	if (!res)
		return -1;
	*hit = PQntuples(res) == 1;
	PQclear(res);
	return 0;
}

int checkpoint_fence_mark_held(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			       uint64_t applied_lsn, bool *marked)
{
	*marked = false;
	char lsn[LSN_FORMAT_LEN], fence[LSN_FORMAT_LEN];
	lsn_format(applied_lsn, lsn);
	lsn_format(fence_lsn, fence);
	const char *p[4] = { ids->source_id, ids->dataset_id, lsn, fence };
	return update_hit(conn, schema,
			  "UPDATE @.apply_fence SET state = 'held', held_at = now(), held_applied_lsn = $3"
			  " WHERE source_id = $1 AND dataset_id = $2 AND state = 'requested' AND fence_lsn = $4"
			  " RETURNING 1",
			  p, marked);
}

int checkpoint_fence_request(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			     const char *requested_by, bool *mine)
{
	*mine = false;
	char lsn[LSN_FORMAT_LEN];
	lsn_format(fence_lsn, lsn);
	const char *p[4] = { ids->source_id, ids->dataset_id, lsn, requested_by };
	bool session_bound = strcmp(requested_by, FENCE_BY_VERIFY) == 0;
	/* a verify fence whose session is gone holds nothing: make room
	 * (before taking the lock, which would make it look held) */
	PGresult *res = query_schema(conn, schema,
				     "DELETE FROM @.apply_fence f WHERE source_id = $1 AND dataset_id = $2 AND NOT " FENCE_STANDS,
				     2, p);
	if (!res)
		return -1;
	PQclear(res);
	if (session_bound) {
		/* another verify's session holds it: its fence stands */
		res = pgconn_query(conn, "SELECT pg_try_advisory_lock(" FENCE_LOCK_KEY("$1::text", "$2::text") ")", 2, p);
		if (!res)
			return -1;
		bool locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
		if (!locked)
			return 0;
	}
	res = query_schema(conn, schema,
			   "INSERT INTO @.apply_fence (source_id, dataset_id, fence_lsn, state, requested_by)"
			   " VALUES ($1, $2, $3, 'requested', $4) ON CONFLICT (source_id, dataset_id) DO NOTHING RETURNING 1",
			   4, p);
	if (!res)
		return -1;
	*mine = PQntuples(res) == 1;
	PQclear(res);
	if (session_bound && !*mine)
		return unlock_fence(conn, ids);
	return 0;
}

int checkpoint_fence_move(PGconn *conn, const char *schema, const struct flow_ids *ids, uint64_t fence_lsn,
			  const char *requested_by, bool *moved)
{
	*moved = false;
	char lsn[LSN_FORMAT_LEN];
	lsn_format(fence_lsn, lsn);
	const char *p[4] = { ids->source_id, ids->dataset_id, lsn, requested_by };
	return update_hit(conn, schema,
			  "UPDATE @.apply_fence SET fence_lsn = $3, state = 'requested', held_at = NULL,"
			  " held_applied_lsn = NULL WHERE source_id = $1 AND dataset_id = $2 AND requested_by = $4"
			  " RETURNING 1",
			  p, moved);
}

int checkpoint_fence_release(PGconn *conn, const char *schema, const struct flow_ids *ids, const char *requested_by)
{
	const char *p[3] = { ids->source_id, ids->dataset_id, requested_by };
	PGresult *res = query_schema(conn, schema,
				     "DELETE FROM @.apply_fence WHERE source_id = $1 AND dataset_id = $2"
				     " AND ($3::text IS NULL OR requested_by = $3)",
				     3, p);
	if (!res)
		return -1;
	PQclear(res);
	if (requested_by && strcmp(requested_by, FENCE_BY_VERIFY) == 0)
		return unlock_fence(conn, ids);
	return 0;
}

int checkpoint_fence_progress(PGconn *conn, const char *schema, const struct flow_ids *ids,
			      struct fence_progress *out)
{
	memset(out, 0, sizeof *out);
	const char *p[3] = { ids->source_id, ids->dataset_id, ids->group };
	PGresult *res = query_schema(conn, schema,
				     "SELECT f.state, c.last_commit_lsn < f.fence_lsn,"
				     " c.applied_through_lsn >= f.fence_lsn OR f.state = 'held'"
				     " FROM @.apply_fence f LEFT JOIN @.apply_checkpoint c ON c.source_id = f.source_id"
				     " AND c.dataset_id = f.dataset_id AND c.consumer_group = $3"
				     " WHERE f.source_id = $1 AND f.dataset_id = $2",
				     3, p);
	if (!res)
		return -1;
	if (PQntuples(res) == 1) {
		out->fence_present = true;
		out->has_checkpoint = !PQgetisnull(res, 0, 1);
		out->before = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
		out->reached = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
	}
	PQclear(res);
	return 0;
}

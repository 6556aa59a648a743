/*
 * model_target.c - the simulator's target database (model_target.h).
 */
#include "model_target.h"

#include "trellara/xalloc.h"

#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first error of the session; message: what, then the table if any. */
static void set_error(struct model_session *s, const char *sqlstate, bool lost, uint64_t tag, const char *what,
		      const char *table)
{
	if (s->error.failed)
		return; /* the first error is the one reported */
	s->error.failed = true;
	s->error.connection_lost = lost;
	s->error.tag = tag;
	snprintf(s->error.sqlstate, sizeof s->error.sqlstate, "%s", sqlstate);
	snprintf(s->error.message, sizeof s->error.message, "%s%s%s", what, table ? ": " : "", table ? table : "");
}

static void violation(struct model_target *t, const char *invariant, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void violation(struct model_target *t, const char *invariant, const char *fmt, ...)
{
	if (t->violation[0])
		return;
	snprintf(t->violation, sizeof t->violation, "%s", invariant);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->violation_detail, sizeof t->violation_detail, fmt, ap);
	va_end(ap);
}

/* The open transaction failed (the server aborted it): its state is
 * gone; the keys it wrote stay locked until it ends. */
static void drop_work(struct model_session *s)
{
	sim_db_free(s->work);
	s->work = NULL;
	s->in_txn = false;
	s->work_cp_written = false;
	s->n_work_resolved = 0;
}

static void lockq_remove(struct model_target *t, struct model_session *s)
{
	if (!s->cp_queued)
		return;
	for (int i = 0; i < t->n_lockq; i++)
		if (t->lockq[i] == s->index) {
			memmove(t->lockq + i, t->lockq + i + 1, (size_t)(t->n_lockq - i - 1) * sizeof *t->lockq);
			t->n_lockq--;
			break;
		}
	s->cp_queued = s->cp_granted = false;
}

/* The transaction ended (committed or rolled back): its locks go. */
static void end_txn(struct model_session *s)
{
	drop_work(s);
	for (size_t i = 0; i < s->n_keys; i++) {
		free(s->keys[i].table);
		for (uint16_t k = 0; k < s->keys[i].n; k++)
			free(s->keys[i].values[k]);
		free(s->keys[i].values);
	}
	s->n_keys = 0;
	for (size_t i = 0; i < s->n_whole; i++)
		free(s->whole[i]);
	s->n_whole = 0;
	lockq_remove(s->t, s);
	s->commit_submitted = false;
	s->commit_fault = MODEL_COMMIT_OK;
}

void model_target_init(struct model_target *t, struct sim_db *db, const struct apply_tables *defs)
{
	memset(t, 0, sizeof *t);
	t->db = db;
	t->next_quarantine_id = 1;
	t->n_sessions = 1;
	for (int i = 0; i < MODEL_TARGET_MAX_SESSIONS; i++) {
		t->sessions[i].t = t;
		t->sessions[i].index = i;
	}
	t->defs.tables = xcalloc(defs->n_tables ? defs->n_tables : 1, sizeof *t->defs.tables);
	for (size_t i = 0; i < defs->n_tables; i++) {
		const struct apply_table *s = &defs->tables[i];
		struct apply_table *d = &t->defs.tables[t->defs.n_tables++];
		d->name = xstrdup(s->name);
		d->n_pk = s->n_pk;
		d->pk = xcalloc((size_t)(s->n_pk ? s->n_pk : 1), sizeof *d->pk);
		for (int k = 0; k < s->n_pk; k++)
			d->pk[k] = xstrdup(s->pk[k]);
	}
}

void model_target_sessions(struct model_target *t, int n, uint64_t seed)
{
	t->n_sessions = n < 1 ? 1 : n > MODEL_TARGET_MAX_SESSIONS ? MODEL_TARGET_MAX_SESSIONS : n;
	sim_rng_seed(&t->rng, seed);
}

struct model_session *model_target_session(struct model_target *t, int i)
{
	return &t->sessions[i];
}

bool model_target_in_txn(const struct model_target *t)
{
	for (int i = 0; i < t->n_sessions; i++)
		if (t->sessions[i].in_txn)
			return true;
	return false;
}

void model_target_free(struct model_target *t)
{
	for (int i = 0; i < MODEL_TARGET_MAX_SESSIONS; i++) {
		struct model_session *s = &t->sessions[i];
		end_txn(s);
		free(s->keys);
		free(s->whole);
		free(s->work_resolved);
	}
	sim_db_free(t->db);
	free(t->quarantine);
	for (size_t i = 0; i < t->n_watermarks; i++)
		free(t->watermark_tables[i]);
	free(t->watermark_tables);
	free(t->watermark_lsns);
	apply_tables_free(&t->defs);
	memset(t, 0, sizeof *t);
}

static void resolve_commit(struct model_session *s);

/* A session's connection dies: its open transaction rolls back (a
 * submitted COMMIT is decided by the caller first). */
static void session_lost(struct model_session *s)
{
	if (s->in_txn)
		s->t->rollbacks++;
	end_txn(s);
	s->connected = false;
}

void model_target_connect(struct model_target *t)
{
	for (int i = 0; i < t->n_sessions; i++) {
		struct model_session *s = &t->sessions[i];
		end_txn(s);
		memset(&s->error, 0, sizeof s->error);
		s->connected = true;
	}
}

void model_target_disconnect(struct model_target *t)
{
	/* submitted COMMITs: each reached the server or not, in the lock
	 * queue's order (a later one's checkpoint then matches or not) */
	while (t->n_lockq) {
		struct model_session *h = &t->sessions[t->lockq[0]];
		if (h->commit_submitted && h->connected && sim_rng_chance(&t->rng, 50)) {
			t->submitted_commits_decided++;
			h->commit_fault = MODEL_COMMIT_OK;
			resolve_commit(h);
		} else {
			session_lost(h);
		}
	}
	for (int i = 0; i < t->n_sessions; i++) {
		struct model_session *s = &t->sessions[i];
		if (s->commit_submitted && s->connected && sim_rng_chance(&t->rng, 50)) {
			t->submitted_commits_decided++;
			s->commit_fault = MODEL_COMMIT_OK;
			resolve_commit(s);
		}
		session_lost(s);
	}
}

void model_target_set_watermark(struct model_target *t, const char *table, uint64_t lsn)
{
	for (size_t i = 0; i < t->n_watermarks; i++)
		if (strcmp(t->watermark_tables[i], table) == 0) {
			t->watermark_lsns[i] = lsn;
			return;
		}
	t->watermark_tables = xrealloc(t->watermark_tables, (t->n_watermarks + 1) * sizeof *t->watermark_tables);
	t->watermark_lsns = xrealloc(t->watermark_lsns, (t->n_watermarks + 1) * sizeof *t->watermark_lsns);
	t->watermark_tables[t->n_watermarks] = xstrdup(table);
	t->watermark_lsns[t->n_watermarks++] = lsn;
}

int model_target_replay_ready(struct model_target *t, uint32_t xid, uint64_t commit_lsn)
{
	for (int i = 0; i < t->n_quarantine; i++) {
		struct quarantine_entry *q = &t->quarantine[i];
		if (q->xid == xid && q->commit_lsn == commit_lsn && strcmp(q->state, "quarantined") == 0) {
			snprintf(q->state, sizeof q->state, "replay_ready");
			return 0;
		}
	}
	return 1;
}

int model_target_count_quarantine(const struct model_target *t, const char *state)
{
	int n = 0;
	for (int i = 0; i < t->n_quarantine; i++)
		if (strcmp(t->quarantine[i].state, state) == 0)
			n++;
	return n;
}

int model_target_open_entries(const struct model_target *t, struct quarantine_entry **entries, bool *any_quarantined)
{
	*entries = xcalloc((size_t)(t->n_quarantine ? t->n_quarantine : 1), sizeof **entries);
	*any_quarantined = false;
	int n = 0;
	for (int i = 0; i < t->n_quarantine; i++) {
		if (strcmp(t->quarantine[i].state, "resolved") == 0)
			continue;
		if (strcmp(t->quarantine[i].state, "quarantined") == 0)
			*any_quarantined = true;
		(*entries)[n++] = t->quarantine[i];
	}
	return n;
}

void model_target_fence_set(struct model_target *t, uint64_t lsn)
{
	t->fence_present = true;
	t->fence_lsn = lsn;
	snprintf(t->fence_state, sizeof t->fence_state, "requested");
}

void model_target_fence_release(struct model_target *t)
{
	t->fence_present = false;
	t->fence_lsn = 0;
	t->fence_state[0] = '\0';
}

/* ---- the operations ---- */

static bool alive(struct model_session *s, uint64_t tag)
{
	if (s->connected)
		return true;
	set_error(s, "08006", true, tag, "server closed the connection unexpectedly", NULL);
	return false;
}

static int m_begin(void *p, uint64_t tag, bool bounded_waits)
{
	(void)bounded_waits;
	struct model_session *s = p;
	if (!alive(s, tag))
		return -1;
	if (s->in_txn)
		return 0;
	end_txn(s); /* what a failed one still held */
	s->work = sim_db_clone(s->t->db);
	s->work_cp = s->t->cp;
	s->in_txn = true;
	return 0;
}

/* ---- keys: who holds what (sessions > 1) ---- */

static bool key_equal(const struct model_key *k, const char *table, const char *const *v, uint16_t n)
{
	if (k->n != n || strcmp(k->table, table) != 0)
		return false;
	for (uint16_t i = 0; i < n; i++) {
		if (!k->values[i] != !v[i])
			return false;
		if (v[i] && strcmp(k->values[i], v[i]) != 0)
			return false;
	}
	return true;
}

static bool holds_whole(const struct model_session *s, const char *table)
{
	for (size_t i = 0; i < s->n_whole; i++)
		if (strcmp(s->whole[i], table) == 0)
			return true;
	return false;
}

static bool holds_key(const struct model_session *s, const char *table, const char *const *v, uint16_t n)
{
	if (holds_whole(s, table))
		return true;
	for (size_t i = 0; i < s->n_keys; i++)
		if (key_equal(&s->keys[i], table, v, n))
			return true;
	return false;
}

static void describe_key(char *out, size_t len, const char *const *v, uint16_t n)
{
	size_t o = 0;
	out[0] = '\0';
	for (uint16_t i = 0; i < n && o + 1 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? "," : "", v[i] ? v[i] : "NULL");
}

/* The transaction of s writes key v (the first n_key values of a row in
 * table's column order): another open or committing transaction holding
 * it is a violation; READ COMMITTED: the key is read from the committed
 * state the first time s touches it. */
static void touch_key(struct model_session *s, const char *table, const char *const *v, uint16_t n_key)
{
	struct model_target *t = s->t;
	if (t->n_sessions < 2 || holds_key(s, table, v, n_key))
		return;
	for (int i = 0; i < t->n_sessions; i++) {
		const struct model_session *o = &t->sessions[i];
		if (o != s && holds_key(o, table, v, n_key)) {
			char k[200];
			describe_key(k, sizeof k, v, n_key);
			violation(t, "parallel_batches_write_disjoint_rows",
				  "session %d writes %s key (%s), which session %d's uncommitted transaction wrote", s->index,
				  table, k, o->index);
		}
	}
	uint16_t n_cols, nk;
	const char *const *cols;
	n_cols = sim_db_columns(t->db, table, &nk, &cols);
	struct sim_values key = { v, n_key };
	if (n_cols && sim_db_find(s->work, table, key))
		sim_db_delete(s->work, table, key);
	const char *const *row = n_cols ? sim_db_find(t->db, table, key) : NULL;
	if (row)
		sim_db_insert(s->work, table, (struct sim_values){ row, n_cols });
	s->keys = xrealloc(s->keys, (s->n_keys + 1) * sizeof *s->keys);
	struct model_key *k = &s->keys[s->n_keys++];
	k->table = xstrdup(table);
	k->n = n_key;
	k->values = xcalloc(n_key ? n_key : 1, sizeof *k->values);
	for (uint16_t i = 0; i < n_key; i++)
		k->values[i] = v[i] ? xstrdup(v[i]) : NULL;
}

static void touch_table(struct model_session *s, const char *table)
{
	struct model_target *t = s->t;
	if (t->n_sessions < 2 || holds_whole(s, table))
		return;
	for (int i = 0; i < t->n_sessions; i++) {
		const struct model_session *o = &t->sessions[i];
		if (o == s)
			continue;
		bool held = holds_whole(o, table);
		for (size_t k = 0; !held && k < o->n_keys; k++)
			held = strcmp(o->keys[k].table, table) == 0;
		if (held)
			violation(t, "parallel_batches_write_disjoint_rows",
				  "session %d truncates %s, which session %d's uncommitted transaction wrote", s->index,
				  table, o->index);
	}
	s->whole = xrealloc(s->whole, (s->n_whole + 1) * sizeof *s->whole);
	s->whole[s->n_whole++] = xstrdup(table);
}

/* One value as text (NULL: SQL NULL); *toast: unchanged TOAST. */
static char *value_text(const struct env_value *v, bool *toast)
{
	*toast = v->kind == ENV_UNCHANGED_TOAST;
	if (v->kind != ENV_TEXT)
		return NULL;
	char *s = xmalloc((size_t)v->len + 1);
	memcpy(s, v->data, v->len);
	s[v->len] = '\0';
	return s;
}

static void free_values(char **v, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The relation's column c in the model table's column order (by name), or -1. */
static int column_of(const struct env_relation *r, uint16_t c, const char *const *cols, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		if (strlen(cols[i]) == r->columns[c].name_len && memcmp(cols[i], r->columns[c].name, r->columns[c].name_len) == 0)
			return i;
	return -1;
}

/* A tuple of r in the table's column order; keep[]: unchanged TOAST. */
static char **table_row(const struct env_relation *r, const struct env_tuple *tup, const char *const *cols, uint16_t n,
			bool *keep, bool *ok)
{
	char **row = xcalloc(n ? n : 1, sizeof *row);
	*ok = tup->n == r->n_columns;
	for (uint16_t c = 0; *ok && c < r->n_columns; c++) {
		int i = column_of(r, c, cols, n);
		if (i < 0) {
			*ok = false;
			break;
		}
		bool toast;
		row[i] = value_text(&tup->values[c], &toast);
		if (keep)
			keep[i] = toast;
	}
	return row;
}

static int m_change(void *p, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *c,
		    const struct plan_stmt *stmt, uint64_t tag)
{
	(void)stmt;
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!alive(s, tag) || !s->in_txn) {
		set_error(s, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	if (t->fail_change_at && --t->fail_change_at == 0) {
		set_error(s, t->fail_change_sqlstate, t->fail_change_connection, tag, "injected failure", NULL);
		if (t->fail_change_connection)
			session_lost(s);
		else
			drop_work(s);
		return -1;
	}
	if (c->op == ENV_TRUNCATE) {
		for (uint32_t k = 0; k < c->n_truncate; k++) {
			const struct env_relation *r = rels[c->truncate_relations[k]].rel;
			char name[256];
			snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
			if (!sim_db_has_table(s->work, name)) {
				set_error(s, "42P01", false, tag, "relation does not exist", name);
				drop_work(s);
				return -1;
			}
			touch_table(s, name);
			sim_db_truncate(s->work, name);
		}
		t->changes_applied++;
		return 0;
	}
	if (c->relation >= n_rels) {
		set_error(s, "TR003", false, tag, "relation index out of range", NULL);
		return -1;
	}
	const struct plan_relation *pr = &rels[c->relation];
	const struct env_relation *r = pr->rel;
	char name[256];
	snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(s->work, name, &n_key, &cols);
	if (n == 0) {
		set_error(s, "42P01", false, tag, "relation does not exist", name);
		drop_work(s);
		return -1;
	}
	if (!pr->key && c->op != ENV_INSERT) {
		/* an insert needs no key; matching a row by every old column
		 * (REPLICA IDENTITY FULL) is outside the model */
		set_error(s, "TR003", false, tag, "keyless updates and deletes are outside the model", name);
		drop_work(s);
		return -1;
	}
	bool ok;
	int rc = 0;
	const char *what = "";
	if (c->op == ENV_INSERT) {
		char **row = table_row(r, &c->new_tuple, cols, n, NULL, &ok);
		if (ok)
			touch_key(s, name, (const char *const *)row, n_key);
		rc = ok ? sim_db_insert(s->work, name, (struct sim_values){ (const char *const *)row, n }) : -2;
		free_values(row, n);
		what = "duplicate key value violates unique constraint on";
		if (rc == -1) {
			set_error(s, "23505", false, tag, what, name);
			drop_work(s);
			return -1;
		}
	} else {
		/* the key: of the old tuple when one came, else of the new one */
		const struct env_tuple *kt = c->old_kind ? &c->old_tuple : &c->new_tuple;
		char **krow = table_row(r, kt, cols, n, NULL, &ok);
		if (ok) {
			/* the key columns the engine chose must be the table's */
			for (uint16_t col = 0; col < r->n_columns; col++) {
				int i = column_of(r, col, cols, n);
				if (pr->key[col] != (i >= 0 && i < n_key))
					ok = false;
			}
		}
		if (ok)
			touch_key(s, name, (const char *const *)krow, n_key);
		if (ok && c->op == ENV_UPDATE) {
			bool *keep = xcalloc(n ? n : 1, sizeof *keep);
			char **row = table_row(r, &c->new_tuple, cols, n, keep, &ok);
			if (ok) {
				bool toast_key = false;
				for (uint16_t k = 0; k < n_key; k++)
					toast_key = toast_key || keep[k];
				if (!toast_key)
					touch_key(s, name, (const char *const *)row, n_key);
				rc = sim_db_update(s->work, name, (struct sim_values){ (const char *const *)krow, n_key },
						   (struct sim_values){ (const char *const *)row, n }, keep);
			}
			free_values(row, n);
			free(keep);
		} else if (ok) {
			rc = sim_db_delete(s->work, name, (struct sim_values){ (const char *const *)krow, n_key });
		}
		free_values(krow, n);
		if (ok && rc == 0) {
			set_error(s, "TR001", false, tag, "no row matched", name);
			drop_work(s);
			return -1;
		}
		if (ok && rc == -1) {
			set_error(s, "23505", false, tag, "duplicate key value violates unique constraint on", name);
			drop_work(s);
			return -1;
		}
	}
	if (!ok) {
		set_error(s, "TR003", false, tag, "the change does not fit the table's columns", name);
		drop_work(s);
		return -1;
	}
	t->changes_applied++;
	return 0;
}

/* The checkpoint row's lock: queued in call order; its match is decided
 * when the lock is granted (grant). */
static int m_write_checkpoint(void *p, const struct apply_checkpoint *prev, const struct apply_checkpoint *cp,
			      uint64_t tag)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!alive(s, tag) || !s->in_txn) {
		set_error(s, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	if (!s->cp_queued) {
		s->cp_queued = true;
		s->cp_granted = false;
		t->lockq[t->n_lockq++] = s->index;
	}
	s->cp_prev_offset = prev->stream_offset;
	s->cp_next = *cp;
	s->cp_tag = tag;
	if (t->lockq[0] == s->index && t->n_sessions < 2) {
		/* one session: nothing to wait for, the update's outcome now */
		s->cp_granted = true;
		if (t->cp.stream_offset != s->cp_prev_offset) {
			set_error(s, "22P02", false, tag, "the checkpoint is not where the batch before leaves it",
				  "the checkpoint row");
			drop_work(s);
			return -1;
		}
		s->work_cp = *cp;
		s->work_cp_written = true;
	}
	return 0;
}

/* s holds the checkpoint row's lock now: the update matches, or fails
 * (the libpq target's update raises an error, SQLSTATE 22P02, when the
 * row is not where the batch before leaves it): the transaction is
 * aborted, and a COMMIT sent after it commits nothing. */
static void grant(struct model_session *s)
{
	if (!s->cp_queued || s->cp_granted)
		return;
	s->cp_granted = true;
	if (!s->in_txn)
		return; /* it failed: the statement did not run */
	if (s->t->cp.stream_offset != s->cp_prev_offset) {
		set_error(s, "22P02", false, s->cp_tag, "the checkpoint is not where the batch before leaves it",
			  "the checkpoint row");
		drop_work(s);
		lockq_remove(s->t, s);
		return;
	}
	s->work_cp = s->cp_next;
	s->work_cp_written = true;
}

/* Everything ahead of s in the lock queue ends first: each must have
 * sent its COMMIT (else s would wait on an idle transaction); then s
 * holds the lock.  -1: s waits on one that did not. */
static int wait_for_lock(struct model_session *s)
{
	struct model_target *t = s->t;
	if (!s->cp_queued)
		return 0;
	while (t->n_lockq && t->lockq[0] != s->index) {
		struct model_session *h = &t->sessions[t->lockq[0]];
		if (!h->commit_submitted) {
			violation(t, "checkpoint_lock_waits_on_idle_transaction",
				  "session %d's checkpoint update waits for the row lock of session %d, whose transaction "
				  "has not sent its COMMIT (the target would wait forever)",
				  s->index, h->index);
			set_error(s, "55P03", false, s->cp_tag, "canceling statement due to lock timeout",
				  "the checkpoint row");
			return -1;
		}
		t->lock_waits++;
		resolve_commit(h);
	}
	grant(s);
	return 0;
}

static int m_resolve_quarantine(void *p, int64_t id, uint64_t tag)
{
	struct model_session *s = p;
	if (!alive(s, tag) || !s->in_txn) {
		set_error(s, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	s->work_resolved = xrealloc(s->work_resolved, (s->n_work_resolved + 1) * sizeof *s->work_resolved);
	s->work_resolved[s->n_work_resolved++] = id;
	return 0;
}

static int m_sync(void *p)
{
	struct model_session *s = p;
	if (alive(s, 0))
		(void)wait_for_lock(s);
	if (s->error.failed)
		return -1;
	return alive(s, 0) ? 0 : -1;
}

/* dst's table becomes src's. */
static void copy_whole(struct sim_db *dst, const struct sim_db *src, const char *table)
{
	sim_db_truncate(dst, table);
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(src, table, &n_key, &cols);
	const char *const *row;
	for (size_t i = 0; (row = sim_db_row(src, table, i)) != NULL; i++)
		sim_db_insert(dst, table, (struct sim_values){ row, n });
}

static void publish(struct model_session *s)
{
	struct model_target *t = s->t;
	if (t->n_sessions < 2) {
		sim_db_free(t->db);
		t->db = s->work;
		s->work = NULL;
	} else {
		/* only what it wrote: the tables it truncated, the keys */
		for (size_t i = 0; i < s->n_whole; i++)
			copy_whole(t->db, s->work, s->whole[i]);
		for (size_t i = 0; i < s->n_keys; i++) {
			const struct model_key *k = &s->keys[i];
			if (holds_whole(s, k->table))
				continue;
			uint16_t nk;
			const char *const *cols;
			uint16_t n = sim_db_columns(s->work, k->table, &nk, &cols);
			struct sim_values key = { (const char *const *)k->values, k->n };
			const char *const *row = sim_db_find(s->work, k->table, key);
			sim_db_delete(t->db, k->table, key);
			if (row)
				sim_db_insert(t->db, k->table, (struct sim_values){ row, n });
		}
	}
	if (s->work_cp_written) {
		if (s->work_cp.stream_offset < t->cp.stream_offset && t->n_sessions > 1)
			violation(t, "checkpoint_moves_forward",
				  "session %d's commit moves the checkpoint from offset %" PRIu64 " back to %" PRIu64, s->index,
				  t->cp.stream_offset, s->work_cp.stream_offset);
		t->cp = s->work_cp;
	}
	for (size_t i = 0; i < s->n_work_resolved; i++)
		for (int k = 0; k < t->n_quarantine; k++)
			if (t->quarantine[k].id == s->work_resolved[i])
				snprintf(t->quarantine[k].state, sizeof t->quarantine[k].state, "resolved");
	end_txn(s);
	t->commits++;
	if (t->on_commit)
		t->on_commit(t->on_commit_ctx, t);
}

/* The COMMIT of s reaches the server with fault f (s holds the
 * checkpoint's lock if it wrote it): committed or rolled back. */
static int commit_now(struct model_session *s, enum model_commit_fault f, uint64_t tag)
{
	struct model_target *t = s->t;
	if (!s->in_txn) {
		/* failed: COMMIT is a ROLLBACK */
		end_txn(s);
		if (!s->error.failed)
			set_error(s, "25P02", false, tag, "current transaction is aborted", NULL);
		return -1;
	}
	switch (f) {
	case MODEL_COMMIT_OK:
		publish(s);
		return s->error.failed ? -1 : 0;
	case MODEL_COMMIT_LOST_BEFORE:
		session_lost(s);
		set_error(s, "08006", true, tag, "server closed the connection unexpectedly", NULL);
		return -1;
	case MODEL_COMMIT_LOST_AFTER:
		publish(s);
		t->ambiguous_commits++;
		session_lost(s);
		set_error(s, "08006", true, tag, "server closed the connection unexpectedly", NULL);
		return -1;
	case MODEL_COMMIT_TRANSIENT:
		end_txn(s);
		t->rollbacks++;
		set_error(s, "40001", false, tag, "could not serialize access due to concurrent update", NULL);
		return -1;
	}
	return -1;
}

/* A submitted COMMIT of s takes effect (s is at the head of the lock
 * queue, or did not write the checkpoint). */
static void resolve_commit(struct model_session *s)
{
	grant(s);
	enum model_commit_fault f = s->commit_fault;
	uint64_t tag = s->commit_tag;
	s->commit_submitted = false;
	(void)commit_now(s, f, tag);
}

static int m_commit(void *p, uint64_t tag)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!alive(s, tag))
		return -1;
	if (t->n_sessions > 1)
		(void)wait_for_lock(s);
	if (s->error.failed || !s->in_txn) {
		end_txn(s);
		return -1;
	}
	enum model_commit_fault f = t->next_commit_fault;
	t->next_commit_fault = MODEL_COMMIT_OK;
	return commit_now(s, f, tag);
}

static int m_submit(void *p)
{
	struct model_session *s = p;
	return alive(s, 0) ? 0 : -1;
}

/* COMMIT sent: its outcome is decided when it is collected (or at a
 * disconnect); the commit fault armed now is its. */
static int m_commit_submit(void *p, uint64_t tag)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!alive(s, tag))
		return -1;
	if (s->error.failed)
		return -1; /* the client knows it failed: no COMMIT */
	for (int i = 0; i < t->n_sessions; i++)
		if (t->sessions[i].commit_submitted) {
			t->commits_behind++;
			break;
		}
	s->commit_submitted = true;
	s->commit_tag = tag;
	s->commit_fault = t->next_commit_fault;
	t->next_commit_fault = MODEL_COMMIT_OK;
	return 0;
}

static int m_collect(void *p)
{
	struct model_session *s = p;
	if (!alive(s, 0))
		return -1;
	if (s->commit_submitted) {
		if (wait_for_lock(s) == 0)
			resolve_commit(s);
		else {
			s->commit_submitted = false; /* the lock wait failed: COMMIT is a ROLLBACK */
			end_txn(s);
		}
	}
	return s->error.failed ? -1 : 0;
}

static void m_rollback(void *p)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (s->commit_submitted && s->connected)
		(void)m_collect(p); /* the submitted COMMIT's result first */
	if (s->in_txn)
		t->rollbacks++;
	end_txn(s);
}

static const struct apply_target_error *m_error(void *p)
{
	struct model_session *s = p;
	return &s->error;
}

static void m_clear_error(void *p)
{
	struct model_session *s = p;
	memset(&s->error, 0, sizeof s->error);
}

static int m_quarantine_add(void *p, uint32_t xid, uint64_t commit_lsn, uint64_t offset, const char *reason,
			    const char *detail)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!s->connected)
		return -1;
	end_txn(s);
	t->quarantine = xrealloc(t->quarantine, (size_t)(t->n_quarantine + 1) * sizeof *t->quarantine);
	struct quarantine_entry *q = &t->quarantine[t->n_quarantine++];
	memset(q, 0, sizeof *q);
	q->id = t->next_quarantine_id++;
	q->xid = xid;
	q->commit_lsn = commit_lsn;
	q->stream_offset = offset;
	snprintf(q->reason, sizeof q->reason, "%s", reason);
	snprintf(q->detail, sizeof q->detail, "%s", detail);
	snprintf(q->state, sizeof q->state, "quarantined");
	return 0;
}

static int m_fence_get(void *p, bool *present, uint64_t *lsn, char *state, size_t state_len)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	if (!s->connected)
		return -1;
	*present = t->fence_present;
	*lsn = t->fence_lsn;
	snprintf(state, state_len, "%s", t->fence_present ? t->fence_state : "");
	return 0;
}

static int m_fence_mark_held(void *p, uint64_t fence_lsn, uint64_t applied_through_lsn, bool *marked)
{
	struct model_session *s = p;
	struct model_target *t = s->t;
	*marked = false;
	if (!s->connected)
		return -1;
	/* the UPDATE of checkpoint_fence_mark_held: only the fence read */
	if (t->fence_present && strcmp(t->fence_state, "requested") == 0 && t->fence_lsn == fence_lsn) {
		snprintf(t->fence_state, sizeof t->fence_state, "held");
		t->fence_held_applied_lsn = applied_through_lsn;
		*marked = true;
	}
	return 0;
}

static int m_reload_tables(void *p, struct apply_tables *tables)
{
	struct model_session *ses = p;
	struct model_target *t = ses->t;
	if (!ses->connected)
		return -1;
	apply_tables_free(tables);
	tables->tables = xcalloc(t->defs.n_tables ? t->defs.n_tables : 1, sizeof *tables->tables);
	for (size_t i = 0; i < t->defs.n_tables; i++) {
		const struct apply_table *s = &t->defs.tables[i];
		struct apply_table *d = &tables->tables[tables->n_tables++];
		d->name = xstrdup(s->name);
		d->n_pk = s->n_pk;
		d->pk = xcalloc((size_t)(s->n_pk ? s->n_pk : 1), sizeof *d->pk);
		for (int k = 0; k < s->n_pk; k++)
			d->pk[k] = xstrdup(s->pk[k]);
		for (size_t w = 0; w < t->n_watermarks; w++)
			if (strcmp(t->watermark_tables[w], s->name) == 0)
				d->watermark_lsn = t->watermark_lsns[w];
		/* the model's columns are all text; no trigger fires */
		uint16_t n_key;
		const char *const *cols;
		uint16_t n = sim_db_columns(t->db, s->name, &n_key, &cols);
		d->n_columns = n;
		d->columns = xcalloc(n ? n : 1, sizeof *d->columns);
		d->column_types = xcalloc(n ? n : 1, sizeof *d->column_types);
		for (uint16_t c = 0; c < n; c++) {
			d->columns[c] = xstrdup(cols[c]);
			d->column_types[c] = xstrdup("text");
		}
		d->compaction = true;
	}
	return 0;
}

/* A set statement: each of its changes applied in turn, the statement
 * failing whole (the target's transaction lost) with the first that
 * fails - what one multi-row statement does. */
static int m_change_set(void *p, const struct plan_relation *rels, uint32_t n_rels, const struct env_change *const *cs,
			size_t n, const struct plan_stmt *stmt, uint64_t tag)
{
	for (size_t i = 0; i < n; i++)
		if (m_change(p, rels, n_rels, cs[i], stmt, tag) < 0)
			return -1;
	return 0;
}

const struct apply_target_ops model_target_ops = {
	.begin = m_begin,
	.change = m_change,
	.change_set = m_change_set,
	.write_checkpoint = m_write_checkpoint,
	.resolve_quarantine = m_resolve_quarantine,
	.sync = m_sync,
	.commit = m_commit,
	.submit = m_submit,
	.commit_submit = m_commit_submit,
	.collect = m_collect,
	.rollback = m_rollback,
	.error = m_error,
	.clear_error = m_clear_error,
	.quarantine_add = m_quarantine_add,
	.fence_get = m_fence_get,
	.fence_mark_held = m_fence_mark_held,
	.reload_tables = m_reload_tables,
};

/*
 * model_target.c - the simulator's target database (model_target.h).
 */
#include "model_target.h"

#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first error of the session; message: what, then the table if any. */
static void set_error(struct model_target *t, const char *sqlstate, bool lost, uint64_t tag, const char *what,
		      const char *table)
{
	if (t->error.failed)
		return; /* the first error is the one reported */
	t->error.failed = true;
	t->error.connection_lost = lost;
	t->error.tag = tag;
	snprintf(t->error.sqlstate, sizeof t->error.sqlstate, "%s", sqlstate);
	snprintf(t->error.message, sizeof t->error.message, "%s%s%s", what, table ? ": " : "", table ? table : "");
}

static void drop_work(struct model_target *t)
{
	sim_db_free(t->work);
	t->work = NULL;
	t->in_txn = false;
	t->work_cp_written = false;
	t->n_work_resolved = 0;
}

void model_target_init(struct model_target *t, struct sim_db *db, const struct apply_tables *defs)
{
	memset(t, 0, sizeof *t);
	t->db = db;
	t->next_quarantine_id = 1;
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

void model_target_free(struct model_target *t)
{
	drop_work(t);
	sim_db_free(t->db);
	free(t->quarantine);
	for (size_t i = 0; i < t->n_watermarks; i++)
		free(t->watermark_tables[i]);
	free(t->watermark_tables);
	free(t->watermark_lsns);
	free(t->work_resolved);
	apply_tables_free(&t->defs);
	memset(t, 0, sizeof *t);
}

void model_target_connect(struct model_target *t)
{
	drop_work(t);
	memset(&t->error, 0, sizeof t->error);
	t->connected = true;
}

void model_target_disconnect(struct model_target *t)
{
	if (t->in_txn)
		t->rollbacks++;
	drop_work(t);
	t->connected = false;
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

static bool alive(struct model_target *t, uint64_t tag)
{
	if (t->connected)
		return true;
	set_error(t, "08006", true, tag, "server closed the connection unexpectedly", NULL);
	return false;
}

static int m_begin(void *p, uint64_t tag, bool bounded_waits)
{
	(void)bounded_waits;
	struct model_target *t = p;
	if (!alive(t, tag))
		return -1;
	if (t->in_txn)
		return 0;
	t->work = sim_db_clone(t->db);
	t->work_cp = t->cp;
	t->in_txn = true;
	return 0;
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
	struct model_target *t = p;
	if (!alive(t, tag) || !t->in_txn) {
		set_error(t, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	if (t->fail_change_at && --t->fail_change_at == 0) {
		set_error(t, t->fail_change_sqlstate, t->fail_change_connection, tag, "injected failure", NULL);
		if (t->fail_change_connection)
			model_target_disconnect(t);
		else
			drop_work(t);
		return -1;
	}
	if (c->op == ENV_TRUNCATE) {
		for (uint32_t k = 0; k < c->n_truncate; k++) {
			const struct env_relation *r = rels[c->truncate_relations[k]].rel;
			char name[256];
			snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
			if (!sim_db_has_table(t->work, name)) {
				set_error(t, "42P01", false, tag, "relation does not exist", name);
				drop_work(t);
				return -1;
			}
			sim_db_truncate(t->work, name);
		}
		t->changes_applied++;
		return 0;
	}
	if (c->relation >= n_rels) {
		set_error(t, "TR003", false, tag, "relation index out of range", NULL);
		return -1;
	}
	const struct plan_relation *pr = &rels[c->relation];
	const struct env_relation *r = pr->rel;
	char name[256];
	snprintf(name, sizeof name, "%.*s.%.*s", (int)r->schema_len, r->schema, (int)r->name_len, r->name);
	uint16_t n_key;
	const char *const *cols;
	uint16_t n = sim_db_columns(t->work, name, &n_key, &cols);
	if (n == 0) {
		set_error(t, "42P01", false, tag, "relation does not exist", name);
		drop_work(t);
		return -1;
	}
	if (!pr->key && c->op != ENV_INSERT) {
		/* an insert needs no key; matching a row by every old column
		 * (REPLICA IDENTITY FULL) is outside the model */
		set_error(t, "TR003", false, tag, "keyless updates and deletes are outside the model", name);
		drop_work(t);
		return -1;
	}
	bool ok;
	int rc = 0;
	const char *what = "";
	if (c->op == ENV_INSERT) {
		char **row = table_row(r, &c->new_tuple, cols, n, NULL, &ok);
		rc = ok ? sim_db_insert(t->work, name, (struct sim_values){ (const char *const *)row, n }) : -2;
		free_values(row, n);
		what = "duplicate key value violates unique constraint on";
		if (rc == -1) {
			set_error(t, "23505", false, tag, what, name);
			drop_work(t);
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
		if (ok && c->op == ENV_UPDATE) {
			bool *keep = xcalloc(n ? n : 1, sizeof *keep);
			char **row = table_row(r, &c->new_tuple, cols, n, keep, &ok);
			if (ok)
				rc = sim_db_update(t->work, name, (struct sim_values){ (const char *const *)krow, n_key },
						   (struct sim_values){ (const char *const *)row, n }, keep);
			free_values(row, n);
			free(keep);
		} else if (ok) {
			rc = sim_db_delete(t->work, name, (struct sim_values){ (const char *const *)krow, n_key });
		}
		free_values(krow, n);
		if (ok && rc == 0) {
			set_error(t, "TR001", false, tag, "no row matched", name);
			drop_work(t);
			return -1;
		}
		if (ok && rc == -1) {
			set_error(t, "23505", false, tag, "duplicate key value violates unique constraint on", name);
			drop_work(t);
			return -1;
		}
	}
	if (!ok) {
		set_error(t, "TR003", false, tag, "the change does not fit the table's columns", name);
		drop_work(t);
		return -1;
	}
	t->changes_applied++;
	return 0;
}

static int m_write_checkpoint(void *p, const struct apply_checkpoint *prev, const struct apply_checkpoint *cp,
			      uint64_t tag)
{
	struct model_target *t = p;
	if (alive(t, tag) && t->in_txn && t->cp.stream_offset != prev->stream_offset) {
		set_error(t, "TR001", false, tag, "no row matched", "the checkpoint row at the previous batch's position");
		drop_work(t);
		return -1;
	}
	if (!alive(t, tag) || !t->in_txn) {
		set_error(t, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	t->work_cp = *cp;
	t->work_cp_written = true;
	return 0;
}

static int m_resolve_quarantine(void *p, int64_t id, uint64_t tag)
{
	struct model_target *t = p;
	if (!alive(t, tag) || !t->in_txn) {
		set_error(t, "25P01", false, tag, "no transaction in progress", NULL);
		return -1;
	}
	t->work_resolved = xrealloc(t->work_resolved, (t->n_work_resolved + 1) * sizeof *t->work_resolved);
	t->work_resolved[t->n_work_resolved++] = id;
	return 0;
}

static int m_sync(void *p)
{
	struct model_target *t = p;
	if (t->error.failed)
		return -1;
	return alive(t, 0) ? 0 : -1;
}

static void publish(struct model_target *t)
{
	sim_db_free(t->db);
	t->db = t->work;
	t->work = NULL;
	if (t->work_cp_written)
		t->cp = t->work_cp;
	for (size_t i = 0; i < t->n_work_resolved; i++)
		for (int k = 0; k < t->n_quarantine; k++)
			if (t->quarantine[k].id == t->work_resolved[i])
				snprintf(t->quarantine[k].state, sizeof t->quarantine[k].state, "resolved");
	t->n_work_resolved = 0;
	t->work_cp_written = false;
	t->in_txn = false;
	t->commits++;
	if (t->on_commit)
		t->on_commit(t->on_commit_ctx, t);
}

static int m_commit(void *p, uint64_t tag)
{
	struct model_target *t = p;
	if (!alive(t, tag))
		return -1;
	if (t->error.failed || !t->in_txn) {
		drop_work(t);
		return -1;
	}
	enum model_commit_fault f = t->next_commit_fault;
	t->next_commit_fault = MODEL_COMMIT_OK;
	switch (f) {
	case MODEL_COMMIT_OK:
		publish(t);
		return 0;
	case MODEL_COMMIT_LOST_BEFORE:
		model_target_disconnect(t);
		set_error(t, "08006", true, tag, "server closed the connection unexpectedly", NULL);
		return -1;
	case MODEL_COMMIT_LOST_AFTER:
		publish(t);
		t->ambiguous_commits++;
		model_target_disconnect(t);
		set_error(t, "08006", true, tag, "server closed the connection unexpectedly", NULL);
		return -1;
	case MODEL_COMMIT_TRANSIENT:
		drop_work(t);
		t->rollbacks++;
		set_error(t, "40001", false, tag, "could not serialize access due to concurrent update", NULL);
		return -1;
	}
	return -1;
}

static void m_rollback(void *p)
{
	struct model_target *t = p;
	if (t->in_txn)
		t->rollbacks++;
	drop_work(t);
}

static const struct apply_target_error *m_error(void *p)
{
	struct model_target *t = p;
	return &t->error;
}

static void m_clear_error(void *p)
{
	struct model_target *t = p;
	memset(&t->error, 0, sizeof t->error);
}

static int m_quarantine_add(void *p, uint32_t xid, uint64_t commit_lsn, uint64_t offset, const char *reason,
			    const char *detail)
{
	struct model_target *t = p;
	if (!t->connected)
		return -1;
	drop_work(t);
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
	struct model_target *t = p;
	if (!t->connected)
		return -1;
	*present = t->fence_present;
	*lsn = t->fence_lsn;
	snprintf(state, state_len, "%s", t->fence_present ? t->fence_state : "");
	return 0;
}

static int m_fence_mark_held(void *p, uint64_t applied_through_lsn)
{
	struct model_target *t = p;
	if (!t->connected)
		return -1;
	if (t->fence_present) {
		snprintf(t->fence_state, sizeof t->fence_state, "held");
		t->fence_held_applied_lsn = applied_through_lsn;
	}
	return 0;
}

static int m_reload_tables(void *p, struct apply_tables *tables)
{
	struct model_target *t = p;
	if (!t->connected)
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
	.rollback = m_rollback,
	.error = m_error,
	.clear_error = m_clear_error,
	.quarantine_add = m_quarantine_add,
	.fence_get = m_fence_get,
	.fence_mark_held = m_fence_mark_held,
	.reload_tables = m_reload_tables,
};

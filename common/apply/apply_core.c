/*
 * apply_core.c - applyd's decisions (apply_core.h).
 */
#include "trellara/apply_core.h"
#include "trellara/sqlstate.h"

#include <stdlib.h>
#include <string.h>

void apply_tables_free(struct apply_tables *t)
{
	for (size_t i = 0; i < t->n_tables; i++) {
		struct apply_table *table = &t->tables[i];
		for (int k = 0; k < table->n_pk; k++)
			free(table->pk[k]);
		free(table->pk);
		for (int k = 0; k < table->n_identity_always; k++)
			free(table->identity_always[k]);
		free(table->identity_always);
		for (int k = 0; k < table->n_columns; k++) {
			free(table->columns[k]);
			free(table->column_types[k]);
			if (table->column_eq)
				free(table->column_eq[k]);
		}
		free(table->columns);
		free(table->column_types);
		free(table->column_eq);
		for (int u = 0; u < table->n_unique; u++) {
			for (int k = 0; k < table->unique[u].n_cols; k++)
				free(table->unique[u].cols[k]);
			free(table->unique[u].cols);
		}
		free(table->unique);
		free(table->name);
	}
	free(t->tables);
	for (size_t i = 0; i < t->n_partitions; i++) {
		free(t->partitions[i]);
		free(t->partition_roots[i]);
	}
	free(t->partitions);
	free(t->partition_roots);
	memset(t, 0, sizeof *t);
}

/* Whether qualified ("schema.name", NUL-terminated) names schema.name. */
static bool names(const char *qualified, const char *schema, size_t schema_len, const char *name, size_t name_len)
{
	return strncmp(qualified, schema, schema_len) == 0 && qualified[schema_len] == '.' &&
	       strncmp(qualified + schema_len + 1, name, name_len) == 0 && qualified[schema_len + 1 + name_len] == '\0';
}

uint64_t apply_tables_copied_below(const struct apply_tables *t)
{
	uint64_t low = t->n_tables ? UINT64_MAX : 0;
	for (size_t i = 0; i < t->n_tables; i++)
		if (t->tables[i].watermark_lsn < low)
			low = t->tables[i].watermark_lsn;
	return low;
}

struct apply_table *apply_tables_find(const struct apply_tables *t, const char *schema, size_t schema_len,
				      const char *name, size_t name_len)
{
	for (size_t i = 0; i < t->n_tables; i++)
		if (names(t->tables[i].name, schema, schema_len, name, name_len))
			return &t->tables[i];
	return NULL;
}

const char *apply_tables_partition_root(const struct apply_tables *t, const struct env_relation *r)
{
	for (size_t i = 0; i < t->n_partitions; i++)
		if (names(t->partitions[i], r->schema, r->schema_len, r->name, r->name_len))
			return t->partition_roots[i];
	return NULL;
}

enum apply_partition_truncate apply_core_partition_truncate(const struct apply_tables *t, const char *schema,
							     const char *table, const char *root_schema,
							     const char *root_table, uint64_t commit_lsn,
							     const char **partition)
{
	*partition = NULL;
	const struct apply_table *flow = apply_tables_find(t, root_schema, strlen(root_schema), root_table, strlen(root_table));
	if (!flow || commit_lsn < flow->watermark_lsn)
		return APPLY_PT_IGNORE;
	for (size_t i = 0; i < t->n_partitions; i++)
		if (names(t->partitions[i], schema, strlen(schema), table, strlen(table)) &&
		    strcmp(t->partition_roots[i], flow->name) == 0) {
			*partition = t->partitions[i];
			return APPLY_PT_CARRY;
		}
	return APPLY_PT_STOP;
}

bool apply_core_is_duplicate(uint64_t commit_lsn, uint64_t last_commit_lsn)
{
	return commit_lsn <= last_commit_lsn;
}

enum apply_relation_verdict apply_core_relation(const struct apply_tables *t, const struct env_relation *r,
						uint64_t commit_lsn, struct apply_table **table, const char **root)
{
	*table = apply_tables_find(t, r->schema, r->schema_len, r->name, r->name_len);
	*root = NULL;
	if (!*table) {
		*root = apply_tables_partition_root(t, r);
		return *root ? APPLY_RELATION_UNPUBLISHED_PARTITION : APPLY_RELATION_UNCONFIGURED;
	}
	if (commit_lsn < (*table)->watermark_lsn)
		return APPLY_RELATION_BELOW_WATERMARK; /* the snapshot copy already holds it */
	return APPLY_RELATION_APPLY;
}

/* Marks in mask[] r's columns named in cols[0..n); whether any. */
static bool mark_columns(char *const *cols, int n, const struct env_relation *r, bool *mask)
{
	bool any = false;
	for (int k = 0; k < n; k++)
		for (uint16_t c = 0; c < r->n_columns; c++)
			if (strlen(cols[k]) == r->columns[c].name_len &&
			    memcmp(cols[k], r->columns[c].name, r->columns[c].name_len) == 0)
				mask[c] = any = true;
	return any;
}

int apply_core_unique_columns(const struct apply_table *table, const struct env_relation *r, int u, uint16_t *cols)
{
	if (u < 0 || u >= table->n_unique)
		return -1;
	const struct apply_unique *ix = &table->unique[u];
	for (int k = 0; k < ix->n_cols; k++) {
		uint16_t c = 0;
		while (c < r->n_columns && !(strlen(ix->cols[k]) == r->columns[c].name_len &&
					     memcmp(ix->cols[k], r->columns[c].name, r->columns[c].name_len) == 0))
			c++;
		if (c == r->n_columns)
			return -1;
		cols[k] = c;
	}
	return ix->n_cols;
}

bool apply_core_key_columns(const struct apply_table *table, const struct env_relation *r, bool *key)
{
	for (uint16_t c = 0; c < r->n_columns; c++)
		key[c] = false;
	if (r->replident == 'f')
		return mark_columns(table->pk, table->n_pk, r, key);
	bool any = false;
	for (uint16_t c = 0; c < r->n_columns; c++)
		if (r->columns[c].key)
			key[c] = any = true;
	return any;
}

bool apply_core_identity_always(const struct apply_table *table, const struct env_relation *r, bool *mask)
{
	for (uint16_t c = 0; c < r->n_columns; c++)
		mask[c] = false;
	return mark_columns(table->identity_always, table->n_identity_always, r, mask);
}

bool apply_core_column_types(const struct apply_table *table, const struct env_relation *r, const char **types,
			     const char **eq)
{
	bool all = true;
	for (uint16_t c = 0; c < r->n_columns; c++) {
		types[c] = NULL;
		if (eq)
			eq[c] = NULL;
		for (int k = 0; k < table->n_columns; k++)
			if (strlen(table->columns[k]) == r->columns[c].name_len &&
			    memcmp(table->columns[k], r->columns[c].name, r->columns[c].name_len) == 0) {
				types[c] = table->column_types[k];
				if (eq && table->column_eq)
					eq[c] = table->column_eq[k];
				break;
			}
		if (!types[c])
			all = false;
	}
	return all;
}

enum apply_fold_mode apply_core_fold_mode(const struct apply_table *table, bool keyed)
{
	if (!table->compaction || table->replica_triggers)
		return APPLY_FOLD_BARRIER;
	return keyed ? APPLY_FOLD_MERGE : APPLY_FOLD_KEEP_ORDER;
}

uint32_t apply_core_truncate_filter(const enum apply_relation_verdict *verdicts, const uint32_t *relations, uint32_t n,
				    uint32_t *kept)
{
	uint32_t n_kept = 0;
	for (uint32_t k = 0; k < n; k++)
		if (verdicts[relations[k]] == APPLY_RELATION_APPLY)
			kept[n_kept++] = relations[k];
	return n_kept;
}

const char *apply_core_quarantine_reason(const char *sqlstate)
{
	if (strcmp(sqlstate, "42P01") == 0)
		return "missing_table";
	if (strcmp(sqlstate, SQLSTATE_NO_ROWS_MATCHED) == 0)
		return "no_rows_matched";
	if (strcmp(sqlstate, SQLSTATE_AMBIGUOUS_MATCH) == 0)
		return "ambiguous_match";
	if (strncmp(sqlstate, "23", 2) == 0)
		return "constraint_violation";
	if (strcmp(sqlstate, "42703") == 0)
		return "missing_column";
	return "apply_error";
}

enum apply_failure_action apply_core_on_failure(bool connection_lost, const char *sqlstate, bool single_mode)
{
	/* the one SQLSTATE list (sqlstate.h): a transient error is the
	 * target's state rather than the transaction's, so the transaction is
	 * rolled back and applied again after a backoff, never quarantined */
	enum sqlstate_class class = sqlstate_classify(sqlstate);
	if (connection_lost || class == SQLSTATE_CLASS_CONNECTION)
		return APPLY_FAILURE_RECONNECT;
	if (class == SQLSTATE_CLASS_TRANSIENT)
		return APPLY_FAILURE_RETRY;
	if (!single_mode)
		return APPLY_FAILURE_ONE_AT_A_TIME;
	return APPLY_FAILURE_QUARANTINE;
}

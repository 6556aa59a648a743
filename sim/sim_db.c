/*
 * sim_db.c - the simulator's model database (sim_db.h).
 *
 * Tables are kept sorted by name, rows sorted by key, each in a plain
 * array: binary search to find, memmove to insert or remove.  The tables
 * are small (a few thousand rows), so this is fast enough and trivially
 * deterministic.  Keys compare column by column: NULL first, then the
 * text values by bytes (strcmp).
 */
#include "sim_db.h"

#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_table {
	char *name;     /* owned */
	uint16_t n_cols, n_key;
	char **cols;    /* owned, n_cols names */
	char ***rows;   /* owned: each row n_cols owned values (NULL = SQL NULL) */
	size_t n_rows, cap;
};

struct sim_db {
	struct sim_table *tables; /* owned, sorted by name */
	size_t n_tables;
};

struct sim_db *sim_db_new(void)
{
	return xcalloc(1, sizeof(struct sim_db));
}

static void row_free(char **row, uint16_t n)
{
	if (!row)
		return;
	for (uint16_t c = 0; c < n; c++)
		free(row[c]);
	free(row);
}

static void table_clear_rows(struct sim_table *t)
{
	for (size_t r = 0; r < t->n_rows; r++)
		row_free(t->rows[r], t->n_cols);
	t->n_rows = 0;
}

void sim_db_free(struct sim_db *db)
{
	if (!db)
		return;
	for (size_t i = 0; i < db->n_tables; i++) {
		struct sim_table *t = &db->tables[i];
		table_clear_rows(t);
		free(t->rows);
		for (uint16_t c = 0; c < t->n_cols; c++)
			free(t->cols[c]);
		free(t->cols);
		free(t->name);
	}
	free(db->tables);
	free(db);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static char **row_copy(const char *const *v, uint16_t n)
{
	char **row = xcalloc(n ? n : 1, sizeof *row);
	for (uint16_t c = 0; c < n; c++)
		row[c] = dup_or_null(v[c]);
	return row;
}

struct sim_db *sim_db_clone(const struct sim_db *db)
{
	struct sim_db *copy = sim_db_new();
	copy->n_tables = db->n_tables;
	copy->tables = xcalloc(db->n_tables ? db->n_tables : 1, sizeof *copy->tables);
	for (size_t i = 0; i < db->n_tables; i++) {
		const struct sim_table *t = &db->tables[i];
		struct sim_table *u = &copy->tables[i];
		u->name = xstrdup(t->name);
		u->n_cols = t->n_cols;
		u->n_key = t->n_key;
		u->cols = (char **)row_copy((const char *const *)t->cols, t->n_cols);
		u->cap = t->n_rows;
		u->n_rows = t->n_rows;
		u->rows = xcalloc(u->cap ? u->cap : 1, sizeof *u->rows);
		for (size_t r = 0; r < t->n_rows; r++)
			u->rows[r] = row_copy((const char *const *)t->rows[r], t->n_cols);
	}
	return copy;
}

/* The index of table, or where it belongs (*found false). */
static size_t table_pos(const struct sim_db *db, const char *name, bool *found)
{
	size_t lo = 0, hi = db->n_tables;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(db->tables[mid].name, name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct sim_table *table_get(const struct sim_db *db, const char *name)
{
	bool found;
	size_t i = table_pos(db, name, &found);
	return found ? &db->tables[i] : NULL;
}

int sim_db_create_table(struct sim_db *db, const char *table, uint16_t n, const char *const *cols, uint16_t n_key)
{
	bool found;
	size_t at = table_pos(db, table, &found);
	if (found || n_key > n)
		return -1;
	db->tables = xrealloc(db->tables, (db->n_tables + 1) * sizeof *db->tables);
	memmove(&db->tables[at + 1], &db->tables[at], (db->n_tables - at) * sizeof *db->tables);
	db->n_tables++;
	struct sim_table *t = &db->tables[at];
	memset(t, 0, sizeof *t);
	t->name = xstrdup(table);
	t->n_cols = n;
	t->n_key = n_key;
	t->cols = row_copy(cols, n);
	return 0;
}

bool sim_db_has_table(const struct sim_db *db, const char *table)
{
	return table_get(db, table) != NULL;
}

uint16_t sim_db_columns(const struct sim_db *db, const char *table, uint16_t *n_key, const char *const **cols)
{
	const struct sim_table *t = table_get(db, table);
	if (n_key)
		*n_key = t ? t->n_key : 0;
	if (cols)
		*cols = t ? (const char *const *)t->cols : NULL;
	return t ? t->n_cols : 0;
}

static int value_cmp(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

/* Compares the key of row with key (n_key values). */
static int key_cmp(const struct sim_table *t, const char *const *row, const char *const *key)
{
	for (uint16_t c = 0; c < t->n_key; c++) {
		int d = value_cmp(row[c], key[c]);
		if (d)
			return d;
	}
	return 0;
}

static size_t row_pos(const struct sim_table *t, const char *const *key, bool *found)
{
	size_t lo = 0, hi = t->n_rows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(t, (const char *const *)t->rows[mid], key);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static void row_insert_at(struct sim_table *t, size_t at, char **row)
{
	if (t->n_rows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->rows = xrealloc(t->rows, t->cap * sizeof *t->rows);
	}
	memmove(&t->rows[at + 1], &t->rows[at], (t->n_rows - at) * sizeof *t->rows);
	t->rows[at] = row;
	t->n_rows++;
}

static char **row_remove_at(struct sim_table *t, size_t at)
{
	char **row = t->rows[at];
	memmove(&t->rows[at], &t->rows[at + 1], (t->n_rows - at - 1) * sizeof *t->rows);
	t->n_rows--;
	return row;
}

int sim_db_insert(struct sim_db *db, const char *table, struct sim_values row)
{
	struct sim_table *t = table_get(db, table);
	if (!t || row.n != t->n_cols)
		return -1;
	bool found;
	size_t at = row_pos(t, row.v, &found);
	if (found)
		return -1;
	row_insert_at(t, at, row_copy(row.v, t->n_cols));
	return 1;
}

int sim_db_update(struct sim_db *db, const char *table, struct sim_values key, struct sim_values row, const bool *keep)
{
	struct sim_table *t = table_get(db, table);
	if (!t || key.n != t->n_key || row.n != t->n_cols)
		return -1;
	bool found;
	size_t at = row_pos(t, key.v, &found);
	if (!found)
		return 0;
	char **old = t->rows[at];
	char **next = xcalloc(t->n_cols ? t->n_cols : 1, sizeof *next);
	for (uint16_t c = 0; c < t->n_cols; c++)
		next[c] = dup_or_null(keep && keep[c] ? old[c] : row.v[c]);
	if (key_cmp(t, (const char *const *)next, key.v) == 0) {
		t->rows[at] = next;
		row_free(old, t->n_cols);
		return 1;
	}
	/* the key changed: the row moves, unless another row holds the new key */
	bool taken;
	row_pos(t, (const char *const *)next, &taken);
	if (taken) {
		row_free(next, t->n_cols);
		return -1;
	}
	row_free(row_remove_at(t, at), t->n_cols);
	size_t to = row_pos(t, (const char *const *)next, &taken);
	row_insert_at(t, to, next);
	return 1;
}

int sim_db_delete(struct sim_db *db, const char *table, struct sim_values key)
{
	struct sim_table *t = table_get(db, table);
	if (!t || key.n != t->n_key)
		return -1;
	bool found;
	size_t at = row_pos(t, key.v, &found);
	if (!found)
		return 0;
	row_free(row_remove_at(t, at), t->n_cols);
	return 1;
}

const char *const *sim_db_find(const struct sim_db *db, const char *table, struct sim_values key)
{
	const struct sim_table *t = table_get(db, table);
	if (!t || key.n != t->n_key)
		return NULL;
	bool found;
	size_t at = row_pos(t, key.v, &found);
	return found ? (const char *const *)t->rows[at] : NULL;
}

void sim_db_truncate(struct sim_db *db, const char *table)
{
	struct sim_table *t = table_get(db, table);
	if (t)
		table_clear_rows(t);
}

size_t sim_db_rows(const struct sim_db *db, const char *table)
{
	const struct sim_table *t = table_get(db, table);
	return t ? t->n_rows : 0;
}

size_t sim_db_tables(const struct sim_db *db)
{
	return db->n_tables;
}

const char *sim_db_table_name(const struct sim_db *db, size_t i)
{
	return i < db->n_tables ? db->tables[i].name : NULL;
}

const char *const *sim_db_row(const struct sim_db *db, const char *table, size_t i)
{
	const struct sim_table *t = table_get(db, table);
	return t && i < t->n_rows ? (const char *const *)t->rows[i] : NULL;
}

/* ---- comparison ---- */

static void key_text(const struct sim_table *t, const char *const *row, char *out, size_t len)
{
	size_t used = 0;
	out[0] = '\0';
	for (uint16_t c = 0; c < t->n_key && used < len; c++) {
		int n = snprintf(out + used, len - used, "%s%s", c ? "," : "", row[c] ? row[c] : "NULL");
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* A value for a diff line: quoted and cut at 40 bytes, or NULL. */
static void value_text(const char *v, char *out, size_t len)
{
	if (!v)
		snprintf(out, len, "NULL");
	else if (strlen(v) > 40)
		snprintf(out, len, "\"%.40s...\" (%zu bytes)", v, strlen(v));
	else
		snprintf(out, len, "\"%s\"", v);
}

static bool table_schema_diff(const struct sim_table *x, const struct sim_table *y, char *out, size_t len)
{
	if (x->n_cols != y->n_cols || x->n_key != y->n_key) {
		snprintf(out, len, "table %s: %u columns (%u key) vs %u columns (%u key)", x->name, x->n_cols, x->n_key,
			 y->n_cols, y->n_key);
		return true;
	}
	for (uint16_t c = 0; c < x->n_cols; c++)
		if (strcmp(x->cols[c], y->cols[c]) != 0) {
			snprintf(out, len, "table %s: column %u is \"%s\" vs \"%s\"", x->name, c + 1, x->cols[c], y->cols[c]);
			return true;
		}
	return false;
}

static bool table_rows_diff(const struct sim_table *x, const struct sim_table *y, char *out, size_t len)
{
	char key[256], va[96], vb[96];
	size_t i = 0, j = 0;
	while (i < x->n_rows || j < y->n_rows) {
		int c = i == x->n_rows ? 1 : j == y->n_rows ? -1
				 : key_cmp(x, (const char *const *)x->rows[i], (const char *const *)y->rows[j]);
		if (c < 0) {
			key_text(x, (const char *const *)x->rows[i], key, sizeof key);
			snprintf(out, len, "table %s: key (%s): row only in the first", x->name, key);
			return true;
		}
		if (c > 0) {
			key_text(y, (const char *const *)y->rows[j], key, sizeof key);
			snprintf(out, len, "table %s: key (%s): row only in the second", x->name, key);
			return true;
		}
		for (uint16_t k = 0; k < x->n_cols; k++)
			if (value_cmp(x->rows[i][k], y->rows[j][k]) != 0) {
				key_text(x, (const char *const *)x->rows[i], key, sizeof key);
				value_text(x->rows[i][k], va, sizeof va);
				value_text(y->rows[j][k], vb, sizeof vb);
				snprintf(out, len, "table %s: key (%s): column %s: %s vs %s", x->name, key, x->cols[k], va, vb);
				return true;
			}
		i++;
		j++;
	}
	return false;
}

bool sim_db_diff(const struct sim_db *a, const struct sim_db *b, char *out, size_t len)
{
	char scratch[8];
	if (!out || len == 0) {
		out = scratch;
		len = sizeof scratch;
	}
	out[0] = '\0';
	size_t i = 0, j = 0;
	while (i < a->n_tables || j < b->n_tables) {
		int c = i == a->n_tables ? 1 : j == b->n_tables ? -1 : strcmp(a->tables[i].name, b->tables[j].name);
		if (c != 0) {
			snprintf(out, len, "table %s: only in the %s", c < 0 ? a->tables[i].name : b->tables[j].name,
				 c < 0 ? "first" : "second");
			return true;
		}
		if (table_schema_diff(&a->tables[i], &b->tables[j], out, len) ||
		    table_rows_diff(&a->tables[i], &b->tables[j], out, len))
			return true;
		i++;
		j++;
	}
	return false;
}

bool sim_db_equal(const struct sim_db *a, const struct sim_db *b)
{
	return !sim_db_diff(a, b, NULL, 0);
}

/* ---- digest ---- */

#define FNV_OFFSET 0xCBF29CE484222325ULL
#define FNV_PRIME 0x100000001B3ULL

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* A value with its length (so "ab","c" and "a","bc" differ) or a NULL mark. */
static uint64_t fnv_value(uint64_t h, const char *v)
{
	if (!v)
		return fnv_bytes(h, "\xff", 1);
	uint64_t n = strlen(v);
	unsigned char len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(n >> (56 - 8 * i));
	h = fnv_bytes(h, "\x01", 1);
	h = fnv_bytes(h, len, sizeof len);
	return fnv_bytes(h, v, (size_t)n);
}

uint64_t sim_db_digest(const struct sim_db *db)
{
	uint64_t h = FNV_OFFSET;
	for (size_t i = 0; i < db->n_tables; i++) {
		const struct sim_table *t = &db->tables[i];
		h = fnv_bytes(h, "T", 1);
		h = fnv_value(h, t->name);
		unsigned char shape[4] = { (unsigned char)(t->n_cols >> 8), (unsigned char)t->n_cols,
					   (unsigned char)(t->n_key >> 8), (unsigned char)t->n_key };
		h = fnv_bytes(h, shape, sizeof shape);
		for (uint16_t c = 0; c < t->n_cols; c++)
			h = fnv_value(h, t->cols[c]);
		for (size_t r = 0; r < t->n_rows; r++) {
			h = fnv_bytes(h, "R", 1);
			for (uint16_t c = 0; c < t->n_cols; c++)
				h = fnv_value(h, t->rows[r][c]);
		}
	}
	return h;
}

/*
 * verify_compare.c - one table compared at the fence (verify_internal.h):
 * per bucket of the row hash, the row count, the sum and the exclusive
 * or of the hashes (and of an integer key) from one pass on each side;
 * differing buckets decoded, peeled by key, or read again, and the rows
 * merged by key (missing, extra, content differs).
 */
#include "verify_internal.h"

#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct columns {
	char *key;     /* owned: "ROW(k1, k2)" or NULL (keyless) */
	char *covered; /* owned: "ROW(c1, c2, ...)" */
	char *int_key; /* owned: the key's one column (its name), when it is
			* a NOT NULL smallint, integer or bigint on the source,
			* and covered; else NULL */
};

static char *row_expr(PGconn *c, char **names, int n)
{
	size_t len = 8;
	char **q = xcalloc((size_t)n, sizeof *q);
	for (int i = 0; i < n; i++) {
		q[i] = pgconn_quote_ident(c, names[i]);
		len += strlen(q[i]) + 2;
	}
	char *out = xmalloc(len), *o = out;
	memcpy(o, "ROW(", 4);
	o += 4;
	for (int i = 0; i < n; i++) {
		if (i) {
			*o++ = ',';
			*o++ = ' ';
		}
		memcpy(o, q[i], strlen(q[i]));
		o += strlen(q[i]);
		free(q[i]);
	}
	*o++ = ')';
	*o = '\0';
	free(q);
	return out;
}

static int table_columns(struct verify *v, const struct table_config *t, const char *qualified, struct columns *cols,
			 struct table_result *r)
{
	memset(cols, 0, sizeof *cols);
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(v->src,
				     "SELECT attname, coalesce(attnum = ANY ((SELECT indkey FROM pg_index WHERE indrelid = attrelid"
				     " AND indisprimary)::int2[]), false), attnotnull AND atttypid IN (20, 21, 23)"
				     " FROM pg_attribute WHERE attrelid = to_regclass($1)"
				     " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
				     1, p);
	if (!res)
		return -1;
	int n = PQntuples(res);
	if (n == 0) {
		/* missing, or a table without columns (compared as "ROW()") */
		PQclear(res);
		res = pgconn_query(v->src, "SELECT to_regclass($1) IS NOT NULL", 1, p);
		bool exists = res && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		if (!exists) {
			PQclear(res);
			return -1;
		}
	}
	char **all = xcalloc((size_t)(n ? n : 1), sizeof *all), **key = xcalloc((size_t)(n ? n : 1), sizeof *key);
	int n_cov = 0, n_key = 0;
	bool integer = false;
	for (int i = 0; i < n; i++) {
		const char *name = PQgetvalue(res, i, 0);
		bool excluded = false;
		for (size_t k = 0; k < t->n_excluded_columns; k++)
			excluded = excluded || strcmp(t->excluded_columns[k], name) == 0;
		if (!excluded)
			all[n_cov++] = xstrdup(name);
		bool is_key = strcmp(PQgetvalue(res, i, 1), "t") == 0;
		if (t->verify_primary_key) {
			char *copy = xstrdup(t->verify_primary_key), *save = NULL;
			is_key = false;
			for (char *c = strtok_r(copy, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
				while (*c == ' ')
					c++;
				is_key = is_key || strcmp(c, name) == 0;
			}
			free(copy);
		}
		if (is_key) {
			key[n_key++] = xstrdup(name);
			/* summed, and read by, only when its row text holds it */
			integer = !excluded && strcmp(PQgetvalue(res, i, 2), "t") == 0;
		}
	}
	PQclear(res);
	cols->covered = row_expr(v->src, all, n_cov);
	cols->key = n_key ? row_expr(v->src, key, n_key) : NULL;
	cols->int_key = n_key == 1 && integer ? xstrdup(key[0]) : NULL;
	for (int i = 0; i < n_cov; i++)
		free(all[i]);
	if (n_key) {
		r->key_columns = key; /* handed over */
		r->n_key_columns = n_key;
		key = NULL;
	}
	for (int i = 0; key && i < n_key; i++)
		free(key[i]);
	free(all);
	free(key);
	return 0;
}

/* Runs sql_src on the source and sql_dst on the target at once; results
 * in *rs and *rt. */
static int both(struct verify *v, const char *sql_src, const char *sql_dst, int n, const char *const *params, PGresult **rs,
		PGresult **rt)
{
	*rs = *rt = NULL;
	if (!PQsendQueryParams(v->src, sql_src, n, NULL, params, NULL, NULL, 0) ||
	    !PQsendQueryParams(v->dst, sql_dst, n, NULL, params, NULL, NULL, 0)) {
		log_error("cannot send a comparison query: %s", PQerrorMessage(v->src));
		return -1;
	}
	PGresult *r;
	while ((r = PQgetResult(v->src)) != NULL) {
		if (*rs)
			PQclear(*rs);
		*rs = r;
	}
	while ((r = PQgetResult(v->dst)) != NULL) {
		if (*rt)
			PQclear(*rt);
		*rt = r;
	}
	if (PQresultStatus(*rs) != PGRES_TUPLES_OK || PQresultStatus(*rt) != PGRES_TUPLES_OK) {
		log_error("comparison query failed: %s", PQresultStatus(*rs) != PGRES_TUPLES_OK ? PQresultErrorMessage(*rs)
											 : PQresultErrorMessage(*rt));
		return -1;
	}
	return 0;
}

static void add_example(struct table_result *r, enum div_kind k, const char *key)
{
	r->count[k]++;
	if (r->n_examples[k] < VERIFY_MAX_RECORDED_KEYS) {
		r->examples[k] = xrealloc(r->examples[k], ((size_t)r->n_examples[k] + 1) * sizeof *r->examples[k]);
		r->examples[k][r->n_examples[k]++] = xstrdup(key);
	}
}

/* Rows of a bucket as "key<US>hash" strings: ordered by key. */
#define SEP '\x1f'

static int key_cmp(const char *a, const char *b)
{
	size_t la = strcspn(a, "\x1f"), lb = strcspn(b, "\x1f");
	int c = memcmp(a, b, la < lb ? la : lb);
	return c ? c : la < lb ? -1 : la > lb;
}

static int key_cmp_q(const void *a, const void *b)
{
	return key_cmp(*(char *const *)a, *(char *const *)b);
}

/* The rows of a narrowing query ("key<US>hash" strings) after the n
 * already in rows; *n counts them all. */
static char **rows_add(char **rows, int *n, PGresult *res)
{
	int m = res ? PQntuples(res) : 0;
	rows = xrealloc(rows, ((size_t)*n + (size_t)m + 1) * sizeof *rows);
	for (int i = 0; i < m; i++)
		rows[(*n)++] = xasprintf("%s%c%s", PQgetvalue(res, i, 0), SEP, PQgetvalue(res, i, 1));
	return rows;
}

/* Divergent keys among the rows of both sides (of the differing buckets;
 * keyless tables: the rows themselves, numbered per duplicate, so a
 * multiset difference).  Frees the rows. */
static void narrow(struct table_result *r, char **s, int ns, char **t, int nt)
{
	qsort(s, (size_t)ns, sizeof *s, key_cmp_q);
	qsort(t, (size_t)nt, sizeof *t, key_cmp_q);
	int i = 0, j = 0;
	while (i < ns || j < nt) {
		int c = i == ns ? 1 : j == nt ? -1 : key_cmp(s[i], t[j]);
		if (c == 0) {
			char *hs = strchr(s[i], SEP), *ht = strchr(t[j], SEP);
			*hs = '\0';
			if (strcmp(hs + 1, ht + 1) != 0)
				add_example(r, DIV_DIFFERS, s[i]);
			i++;
			j++;
		} else if (c < 0) {
			*strchr(s[i], SEP) = '\0';
			add_example(r, DIV_MISSING, s[i++]);
		} else {
			*strchr(t[j], SEP) = '\0';
			add_example(r, DIV_EXTRA, t[j++]);
		}
	}
	for (int k = 0; k < ns; k++)
		free(s[k]);
	for (int k = 0; k < nt; k++)
		free(t[k]);
	free(s);
	free(t);
}

/* ---- one pass: bucket sums ---- */

__extension__ typedef __int128 i128;

/* One bucket of one side (DESIGN §9): its rows, the exact sum and the
 * exclusive or of their row hashes h, and the exclusive or of their
 * integer keys. */
struct bucket_sums {
	int64_t rows;
	i128 hash_sum;
	int64_t hash_xor, key_xor;
};

/* A decimal integer (an exact numeric sum) into *out; false if it is
 * not one or does not fit. */
static bool parse_i128(const char *text, i128 *out)
{
	const char *c = text;
	bool negative = *c == '-';
	c += negative;
	if (!*c)
		return false;
	i128 value = 0;
	for (; *c; c++) {
		if (*c < '0' || *c > '9' || value > ((i128)1 << 120))
			return false;
		value = value * 10 + (*c - '0');
	}
	*out = negative ? -value : value;
	return true;
}

static bool sums_equal(const struct bucket_sums *a, const struct bucket_sums *b)
{
	return a->rows == b->rows && a->hash_sum == b->hash_sum && a->hash_xor == b->hash_xor && a->key_xor == b->key_xor;
}

/* Reads one side's buckets; false if a row is not what the query gives. */
static bool read_buckets(PGresult *res, bool int_key, struct bucket_sums *out, uint64_t *total)
{
	for (int i = 0; i < PQntuples(res); i++) {
		long b = strtol(PQgetvalue(res, i, 0), NULL, 10);
		i128 rows, hash_xor, key_xor = 0;
		if (b < 0 || b >= BUCKETS || !parse_i128(PQgetvalue(res, i, 1), &rows) ||
		    !parse_i128(PQgetvalue(res, i, 2), &out[b].hash_sum) || !parse_i128(PQgetvalue(res, i, 3), &hash_xor) ||
		    hash_xor < INT64_MIN || hash_xor > INT64_MAX ||
		    (int_key && !parse_i128(PQgetvalue(res, i, 4), &key_xor)) || key_xor < INT64_MIN || key_xor > INT64_MAX)
			return false;
		out[b].rows = (int64_t)rows;
		out[b].hash_xor = (int64_t)hash_xor;
		out[b].key_xor = (int64_t)key_xor;
		*total += (uint64_t)rows;
	}
	return true;
}

/* A bucket that differs by exactly one row of one side: that row's hash
 * and integer key, from the differences of the sums, read from nothing
 * else.  The row count differs by one, the difference of the hash sums
 * is a hash of this bucket, and the two exclusive ors differ by that same
 * hash (several rows' differences agree so with a probability of about
 * 2^-64).  *side: 1 a source row, -1 a target row. */
static bool decode_one(int b, const struct bucket_sums *s, const struct bucket_sums *t, int *side, int64_t *hash,
		       int64_t *key)
{
	int64_t dc = s->rows - t->rows;
	if (dc != 1 && dc != -1)
		return false;
	i128 dh = (s->hash_sum - t->hash_sum) * dc;
	if (dh < INT64_MIN || dh > INT64_MAX)
		return false;
	int64_t h = (int64_t)dh;
	if ((h & (BUCKETS - 1)) != b || (s->hash_xor ^ t->hash_xor) != h)
		return false;
	*side = (int)dc;
	*hash = h;
	*key = s->key_xor ^ t->key_xor;
	return true;
}

/* ---- peeling by key ---- */

#define PEEL_ROUNDS 4
#define PEEL_MAX_KEYS 10000

struct peel {
	int64_t *keys; /* owned: every key read by key so far */
	size_t n_keys;
	int64_t *fresh; /* owned: keys decoded and not read yet */
	size_t n_fresh;
};

static bool peel_known(const struct peel *p, int64_t key)
{
	for (size_t i = 0; i < p->n_keys; i++)
		if (p->keys[i] == key)
			return true;
	for (size_t i = 0; i < p->n_fresh; i++)
		if (p->fresh[i] == key)
			return true;
	return false;
}

static void peel_add(struct peel *p, int64_t key)
{
	if (peel_known(p, key))
		return;
	p->fresh = xrealloc(p->fresh, (p->n_fresh + 1) * sizeof *p->fresh);
	p->fresh[p->n_fresh++] = key;
}

/* "{k1,k2,...}" of n keys: newly allocated. */
static char *key_array(const int64_t *keys, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "{");
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&sb, "%s%" PRId64, i ? "," : "", keys[i]);
	strbuf_adds(&sb, "}");
	return strbuf_detach(&sb, NULL);
}

/* One side's rows read by key: kept for narrowing, and taken out of that
 * side's bucket sums, so the sums then cover only the other keys. */
static bool peel_take(PGresult *res, struct bucket_sums *sums, char ***rows, int *n)
{
	int m = PQntuples(res);
	*rows = xrealloc(*rows, ((size_t)*n + (size_t)m + 1) * sizeof **rows);
	for (int i = 0; i < m; i++) {
		char *end_k, *end_h;
		errno = 0;
		long long k = strtoll(PQgetvalue(res, i, 0), &end_k, 10), h = strtoll(PQgetvalue(res, i, 1), &end_h, 10);
		if (errno || *end_k || *end_h)
			return false;
		struct bucket_sums *b = &sums[(uint64_t)h & (BUCKETS - 1)];
		b->rows--;
		b->hash_sum -= h;
		b->hash_xor ^= h;
		b->key_xor ^= k;
		(*rows)[(*n)++] = xasprintf("(%lld)%c%lld", k, SEP, h);
	}
	return true;
}

/* relkind of the relation ('\0' when it does not exist) and, when
 * children is not NULL, whether it has inheritance children: 0, or -1 when the catalog cannot be read
 * (logged). */
static int relation_kind(PGconn *c, const char *qualified, char *kind, bool *children)
{
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(c,
				     "SELECT relkind::text, EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = c.oid)"
				     " FROM pg_class c WHERE oid = to_regclass($1)",
				     1, p);
	if (!res)
		return -1;
	*kind = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0)[0] : '\0';
	if (children)
		*children = *kind && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	PQclear(res);
	return 0;
}

static void free_rows(char **rows, int n)
{
	for (int k = 0; k < n; k++)
		free(rows[k]);
	free(rows);
}

/* The differing buckets, narrowed down to divergent keys (DESIGN §9):
 *  1. a bucket that differs by one row names it from the sums;
 *  2. with an integer key, while buckets remain that do not, the rows of
 *     the keys named so far are read by key on both sides (their other
 *     versions may be what those buckets hold) and taken out of the sums,
 *     which may leave buckets that now name a row; a few rounds;
 *  3. the buckets still differing are read again, those rows only (the
 *     keys read by key left out).
 * Returns 0, or -1 when a query failed (logged). */
static int narrow_buckets(struct verify *v, struct table_result *r, const struct columns *cols, bool int_key,
			  const char *only_src, const char *only_dst, const char *qualified, struct bucket_sums *sums_src,
			  struct bucket_sums *sums_dst)
{
	char **src_rows = xcalloc(1, sizeof *src_rows), **dst_rows = xcalloc(1, sizeof *dst_rows);
	char **named_src = xcalloc(1, sizeof *named_src), **named_dst = xcalloc(1, sizeof *named_dst);
	int n_src = 0, n_dst = 0, n_named_src = 0, n_named_dst = 0, differing = 0, undecoded = 0, rc = -1;
	struct peel peel = { 0 };
	struct strbuf list = STRBUF_INIT;
	PGresult *rs = NULL, *rt = NULL;
	char *sql = NULL, *sql_dst = NULL, *keys = NULL, *quoted_key = int_key ? pgconn_quote_ident(v->src, cols->int_key) : NULL;
	char *covered = xasprintf("%s::text", cols->covered), *row_h = verify_row_hash(v, covered);
	for (int b = 0; b < BUCKETS; b++) {
		if (sums_equal(&sums_src[b], &sums_dst[b]))
			continue;
		differing++;
		int side;
		int64_t hash, key;
		if (int_key && decode_one(b, &sums_src[b], &sums_dst[b], &side, &hash, &key)) {
			char ***rows = side > 0 ? &named_src : &named_dst;
			int *n = side > 0 ? &n_named_src : &n_named_dst;
			*rows = xrealloc(*rows, ((size_t)*n + 2) * sizeof **rows);
			(*rows)[(*n)++] = xasprintf("(%" PRId64 ")%c%" PRId64, key, SEP, hash);
			peel_add(&peel, key);
		} else {
			undecoded++;
		}
	}
	int named = n_named_src + n_named_dst;
	if (!undecoded) {
		/* every difference named: those rows are all there is */
		free_rows(src_rows, n_src);
		free_rows(dst_rows, n_dst);
		src_rows = named_src, n_src = n_named_src, named_src = NULL;
		dst_rows = named_dst, n_dst = n_named_dst, named_dst = NULL;
	}
	for (int round = 0; undecoded && int_key && peel.n_fresh && round < PEEL_ROUNDS &&
			    peel.n_keys + peel.n_fresh <= PEEL_MAX_KEYS;
	     round++) {
		free(sql);
		free(sql_dst);
		free(keys);
#define BY_KEY_SQL                                                                                          \
	"SELECT k, h FROM (SELECT %s::bigint AS k, %s AS h FROM %s%s WHERE %s = ANY" \
	" ($1::bigint[]) OFFSET 0) s"
		sql = xasprintf(BY_KEY_SQL, quoted_key, row_h, only_src, qualified, quoted_key);
		sql_dst = xasprintf(BY_KEY_SQL, quoted_key, row_h, only_dst, qualified, quoted_key);
#undef BY_KEY_SQL
		keys = key_array(peel.fresh, peel.n_fresh);
		const char *p[1] = { keys };
		PQclear(rs);
		PQclear(rt);
		if (both(v, sql, sql_dst, 1, p, &rs, &rt) < 0)
			goto out;
		if (!peel_take(rs, sums_src, &src_rows, &n_src) || !peel_take(rt, sums_dst, &dst_rows, &n_dst)) {
			log_error("table %s: a row read by key is not a key and a hash", r->name);
			goto out;
		}
		peel.keys = xrealloc(peel.keys, (peel.n_keys + peel.n_fresh) * sizeof *peel.keys);
		memcpy(peel.keys + peel.n_keys, peel.fresh, peel.n_fresh * sizeof *peel.fresh);
		peel.n_keys += peel.n_fresh;
		peel.n_fresh = 0;
		/* the sums now cover the other keys only */
		undecoded = 0;
		for (int b = 0; b < BUCKETS; b++) {
			if (sums_equal(&sums_src[b], &sums_dst[b]))
				continue;
			int side;
			int64_t hash, key;
			if (decode_one(b, &sums_src[b], &sums_dst[b], &side, &hash, &key) && !peel_known(&peel, key)) {
				named++;
				peel_add(&peel, key);
			}
			undecoded++;
		}
	}
	/* the buckets still differing are read again; rows named from the
	 * sums but not read by key are in them too (still counted there) */
	for (int b = 0; undecoded && b < BUCKETS; b++)
		if (!sums_equal(&sums_src[b], &sums_dst[b]))
			strbuf_addf(&list, "%s%d", list.len ? "," : "{", b);
	if (differing)
		log_info("table %s: %d buckets differ: %d rows named from their sums, %zu keys read by key, %d buckets read again",
			 r->name, differing, named, peel.n_keys, undecoded);
	if (list.len) {
		strbuf_adds(&list, "}");
		free(sql);
		free(sql_dst);
		free(keys);
		keys = key_array(peel.keys, peel.n_keys);
#define KEY_SQL                                                                                                  \
	"SELECT k::text, h FROM (SELECT %s AS k, %s AS h%s%s FROM %s%s OFFSET 0) s" \
	" WHERE h & %d = ANY ($1::bigint[])%s"
/* keyless: rows themselves; a multiset difference (equal rows share a bucket) */
#define KEYLESS_SQL                                                                                   \
	"SELECT r || ' #' || row_number() OVER (PARTITION BY r), '' FROM (SELECT %s::text AS r FROM %s%s" \
	" OFFSET 0) s WHERE %s & %d = ANY ($1::bigint[])"
		/* the keys read by key are complete already */
		const char *skip = peel.n_keys ? " AND kk <> ALL ($2::bigint[])" : "";
		const char *kk = peel.n_keys ? ", " : "", *kk_col = peel.n_keys ? quoted_key : "";
		if (cols->key && peel.n_keys) {
			char *kk_as = xasprintf("%s::bigint AS kk", kk_col);
			sql = xasprintf(KEY_SQL, cols->key, row_h, kk, kk_as, only_src, qualified, BUCKETS - 1, skip);
			sql_dst = xasprintf(KEY_SQL, cols->key, row_h, kk, kk_as, only_dst, qualified, BUCKETS - 1, skip);
			free(kk_as);
		} else if (cols->key) {
			sql = xasprintf(KEY_SQL, cols->key, row_h, "", "", only_src, qualified, BUCKETS - 1, "");
			sql_dst = xasprintf(KEY_SQL, cols->key, row_h, "", "", only_dst, qualified, BUCKETS - 1, "");
		} else {
			char *r_hash = verify_row_hash(v, "r");
			sql = xasprintf(KEYLESS_SQL, cols->covered, only_src, qualified, r_hash, BUCKETS - 1);
			sql_dst = xasprintf(KEYLESS_SQL, cols->covered, only_dst, qualified, r_hash, BUCKETS - 1);
			free(r_hash);
		}
#undef KEY_SQL
#undef KEYLESS_SQL
		const char *p[2] = { list.buf, keys };
		PQclear(rs);
		PQclear(rt);
		if (both(v, sql, sql_dst, peel.n_keys ? 2 : 1, p, &rs, &rt) < 0)
			goto out;
		src_rows = rows_add(src_rows, &n_src, rs);
		dst_rows = rows_add(dst_rows, &n_dst, rt);
	}
	narrow(r, src_rows, n_src, dst_rows, n_dst);
	src_rows = dst_rows = NULL;
	n_src = n_dst = 0;
	rc = 0;
out:
	free(covered);
	free(row_h);
	free_rows(src_rows, n_src);
	free_rows(dst_rows, n_dst);
	free_rows(named_src, named_src ? n_named_src : 0);
	free_rows(named_dst, named_dst ? n_named_dst : 0);
	strbuf_release(&list);
	PQclear(rs);
	PQclear(rt);
	free(sql);
	free(sql_dst);
	free(keys);
	free(quoted_key);
	free(peel.keys);
	free(peel.fresh);
	return rc;
}

void verify_compare_table(struct verify *v, const struct table_config *t, struct table_result *r)
{
	snprintf(r->name, sizeof r->name, "%s.%s", t->schema, t->name);
	char *qs = pgconn_quote_ident(v->src, t->schema), *qn = pgconn_quote_ident(v->src, t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	struct columns cols = { 0 };
	char *sql = NULL, *sql_dst = NULL;
	PGresult *rs = NULL, *rt = NULL;
	struct bucket_sums *sums_src = NULL, *sums_dst = NULL;
	if (table_columns(v, t, qualified, &cols, r) < 0) {
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "the source table does not exist");
		goto out;
	}
	r->keyless = cols.key == NULL;
	/* which rows are compared depends on the kinds: never guessed; the
	 * scope is the source's (the target's inheritance children do not
	 * change which rows the source has) */
	bool children = false;
	char src_kind, dst_kind;
	if (relation_kind(v->src, qualified, &src_kind, &children) < 0 ||
	    relation_kind(v->dst, qualified, &dst_kind, NULL) < 0) {
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "cannot read the table's kind from the catalog");
		goto out;
	}
	if (!dst_kind) {
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "the target table does not exist");
		goto out;
	}
	r->scope = src_kind == 'p' ? SCOPE_PARTITIONS : children ? SCOPE_ONLY : SCOPE_TABLE;
	/* each side through the parent when it is partitioned there */
	const char *only_src = src_kind == 'p' ? "" : "ONLY ", *only_dst = dst_kind == 'p' ? "" : "ONLY ";
	/* the target's key column must be a NOT NULL integer too for its sum */
	bool int_key = cols.int_key != NULL;
	if (int_key) {
		const char *p[2] = { qualified, cols.int_key };
		PGresult *res = pgconn_query(v->dst,
					     "SELECT atttypid IN (20, 21, 23) AND attnotnull FROM pg_attribute WHERE attrelid = to_regclass($1)"
					     " AND attname = $2 AND NOT attisdropped",
					     2, p);
		int_key = res && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
	}
	/* the one pass: per bucket of the row hash h (its low bits), the
	 * row count, the sum and the exclusive or of h, and the exclusive or
	 * of the integer key; h is computed once per row (OFFSET 0 keeps the
	 * planner from copying its expression into each aggregate) */
#define BUCKETS_SQL                                                                                      \
	"SELECT h & %d, count(*), sum(h), bit_xor(h)%s FROM (SELECT %s AS h%s" \
	" FROM %s%s OFFSET 0) s GROUP BY 1"
	char *quoted_key = int_key ? pgconn_quote_ident(v->src, cols.int_key) : NULL;
	char *key_as = int_key ? xasprintf(", %s::bigint AS k", quoted_key) : xstrdup("");
	free(quoted_key);
	char *covered = xasprintf("%s::text", cols.covered);
	char *hash = verify_row_hash(v, covered);
	sql = xasprintf(BUCKETS_SQL, BUCKETS - 1, int_key ? ", bit_xor(k)" : "", hash, key_as, only_src, qualified);
	sql_dst = xasprintf(BUCKETS_SQL, BUCKETS - 1, int_key ? ", bit_xor(k)" : "", hash, key_as, only_dst, qualified);
	free(key_as);
	free(hash);
	free(covered);
#undef BUCKETS_SQL
	if (both(v, sql, sql_dst, 0, NULL, &rs, &rt) < 0) {
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "%s",
			 PQresultStatus(rt) != PGRES_TUPLES_OK ? "the target table cannot be read (missing?)" : "comparison failed");
		goto out;
	}
	sums_src = xcalloc(BUCKETS, sizeof *sums_src);
	sums_dst = xcalloc(BUCKETS, sizeof *sums_dst);
	if (!read_buckets(rs, int_key, sums_src, &r->source_rows) || !read_buckets(rt, int_key, sums_dst, &r->target_rows)) {
		log_error("table %s: a bucket sum is not an integer", r->name);
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "comparison failed");
		goto out;
	}
	PQclear(rs);
	PQclear(rt);
	rs = rt = NULL;
	if (narrow_buckets(v, r, &cols, int_key, only_src, only_dst, qualified, sums_src, sums_dst) < 0) {
		r->error = true;
		snprintf(r->error_text, sizeof r->error_text, "narrowing down failed");
	}
out:
	free(sums_src);
	free(sums_dst);
	PQclear(rs);
	PQclear(rt);
	free(sql);
	free(sql_dst);
	free(cols.key);
	free(cols.covered);
	free(cols.int_key);
	free(qualified);
	free(qs);
	free(qn);
}

/* ---- report ---- */


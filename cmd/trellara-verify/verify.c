/*
 * verify.c - the comparison (verify.h).
 */
#include "verify.h"

#include "trellara/assembler.h"
#include "trellara/backoff.h"
#include "trellara/checkpoint.h"
#include "trellara/clock.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/sequences.h"
#include "trellara/snapfence.h"
#include "trellara/sqlstate.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"
#include "trellara/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS 1024 /* a power of two: the low bits of the row hash */
#define MAX_EXAMPLES 10

enum div_kind { DIV_MISSING = 0, DIV_EXTRA, DIV_DIFFERS };
static const char *const div_names[] = { "missing_in_target", "extra_in_target", "content_differs" };

/* Which rows of a table verify compares: all of a plain table's; every
 * partition's of a partitioned table, read through the parent; an
 * inheritance parent's own (ONLY), its children being tables of their
 * own, as PostgreSQL's publication and the snapshot treat them. */
enum scope { SCOPE_TABLE = 0, SCOPE_PARTITIONS, SCOPE_ONLY };
static const char *const scope_names[] = { "table", "partitions", "only" };
static const char *const scope_text[] = { "", " (all partitions)",
					   " (its own rows only: inheritance children are not compared)" };

struct table_result {
	char name[300];
	enum scope scope;
	bool keyless;
	bool error;
	char error_text[512];
	uint64_t source_rows, target_rows;
	uint64_t count[3];
	char **examples[3]; /* owned: the first VERIFY_MAX_RECORDED_KEYS keys of each kind, as ROW(key)::text */
	int n_examples[3];
	char **key_columns; /* owned: the key's columns in the order of its text; NULL when keyless */
	int n_key_columns;
};

/* Why a pass could not finish for the network's sake, not its
 * statements': another pass may. */
struct verify_loss {
	const char *side; /* "source", "target"; NULL: nothing lost */
	char why[512];
};

struct verify {
	const struct verify_options *o;
	const struct flow_config *cfg;
	struct flow_ids ids;
	struct verify_loss *loss;
	PGconn *src, *dst;
	struct snapfence fence;
	struct table_result *results;
	size_t n_results;
	/* the servers' encodings differ (a LATIN1 source, a UTF8 target):
	 * rows are hashed as their text in UTF8, the client encoding both
	 * sessions pin, so both hash what the application sees */
	bool transcode;
};

/* The row hash of a text expression: hashtextextended over the text, in
 * the server's encoding when both servers share it (their bytes are then
 * the same for the same text), else over its UTF8 bytes written as
 * ASCII (encode(..., 'escape')), which is the same text on any server
 * encoding.  Newly allocated. */
static char *row_hash(const struct verify *v, const char *text_expr)
{
	return v->transcode ? xasprintf("hashtextextended(encode(convert_to(%s, 'UTF8'), 'escape'), 0)", text_expr)
			    : xasprintf("hashtextextended(%s, 0)", text_expr);
}

/* Whether the two servers' encodings differ (v->transcode). */
static void choose_hash(struct verify *v)
{
	const char *se = PQparameterStatus(v->src, "server_encoding"), *te = PQparameterStatus(v->dst, "server_encoding");
	v->transcode = !se || !te || strcmp(se, te) != 0;
	if (v->transcode)
		log_info("the source's encoding is %s, the target's %s: rows are compared as UTF8 text", se ? se : "unknown",
			 te ? te : "unknown");
}

/* Connects to one side; a failure that another pass may not meet (the
 * server down, restarting, unreachable; not the credentials) is the
 * pass's loss. */
static PGconn *connect_side(struct verify *v, const char *url, enum pgconn_kind kind, const char *side)
{
	char error[sizeof v->loss->why];
	struct pgconn_options po = { .kind = kind, .application_name = "trellara-verify", .role = side,
				     .connect_timeout = VERIFY_CONNECT_TIMEOUT_S, .error = error, .error_len = sizeof error };
	PGconn *c = pgconn_open(url, &po);
	if (!c && pgconn_last_failure() != PGCONN_FAILURE_AUTHENTICATION && !v->loss->side) {
		v->loss->side = side;
		snprintf(v->loss->why, sizeof v->loss->why, "%s", error);
	}
	return c;
}

/* Whether a connection of the pass is lost (recorded as its loss). */
static bool lost(struct verify *v)
{
	const struct { PGconn *conn; const char *side; } conns[] = { { v->src, "source" }, { v->fence.repl, "source" },
								      { v->dst, "target" } };
	for (size_t i = 0; i < sizeof conns / sizeof conns[0] && !v->loss->side; i++)
		if (pgconn_lost(conns[i].conn, v->loss->why, sizeof v->loss->why))
			v->loss->side = conns[i].side;
	return v->loss->side != NULL;
}

static void release(struct verify *v)
{
	snapfence_release(&v->fence, v->dst, v->cfg, &v->ids);
}

static PGconn *connect_repl(void *arg)
{
	struct verify *v = arg;
	return connect_side(v, v->cfg->source_database_url, PGCONN_REPLICATION, "source");
}

/* ---- one table ---- */

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
	char *covered = xasprintf("%s::text", cols->covered), *row_h = row_hash(v, covered);
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
			char *r_hash = row_hash(v, "r");
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

static void compare_table(struct verify *v, const struct table_config *t, struct table_result *r)
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
	char *hash = row_hash(v, covered);
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

bool verify_key_fields(const char *text, int n, char **fields)
{
	const char *c = text;
	int i = 0;
	if (*c++ != '(')
		return false;
	for (;;) {
		if (i == n)
			goto fail;
		struct strbuf sb = STRBUF_INIT;
		bool null = *c == ',' || *c == ')';
		while (*c && *c != ',' && *c != ')') {
			if (*c == '"') {
				for (c++;; c++) {
					if (!*c) {
						strbuf_release(&sb);
						goto fail;
					}
					if (*c == '"' && c[1] == '"') {
						strbuf_addch(&sb, '"');
						c++;
					} else if (*c == '\\' && c[1]) {
						strbuf_addch(&sb, c[1]);
						c++;
					} else if (*c == '"') {
						break;
					} else {
						strbuf_addch(&sb, *c);
					}
				}
				c++;
			} else if (*c == '\\' && c[1]) {
				strbuf_addch(&sb, c[1]);
				c += 2;
			} else {
				strbuf_addch(&sb, *c++);
			}
		}
		fields[i++] = null ? NULL : strbuf_detach(&sb, NULL);
		if (null)
			strbuf_release(&sb);
		if (*c == ')')
			break;
		if (*c++ != ',')
			goto fail;
	}
	if (i == n && c[1] == '\0')
		return true;
fail:
	while (i > 0) {
		free(fields[--i]);
		fields[i] = NULL;
	}
	return false;
}

/* "key_values": each recorded key of kind k as an array of its columns'
 * values (text, null for NULL), in the order of key_columns; a key whose
 * text is not exactly one such record is null (repair-plan does not guess
 * it). */
static void key_values_json(struct jsonw *w, const struct table_result *r, int k)
{
	char **fields = xcalloc((size_t)r->n_key_columns, sizeof *fields);
	jsonw_open(w, "key_values", '[');
	for (int e = 0; e < r->n_examples[k]; e++) {
		if (!verify_key_fields(r->examples[k][e], r->n_key_columns, fields)) {
			jsonw_null(w, NULL);
			continue;
		}
		jsonw_open(w, NULL, '[');
		for (int c = 0; c < r->n_key_columns; c++) {
			if (fields[c])
				jsonw_text(w, NULL, fields[c]);
			else
				jsonw_null(w, NULL);
			free(fields[c]);
		}
		jsonw_close(w, ']');
	}
	jsonw_close(w, ']');
	free(fields);
}

/* "trellara SUB --config PATH [--table TABLE]" to paste into a shell:
 * the path and the table quoted for it.  Newly allocated. */
static char *recovery_command(const char *sub, const char *config_path, const char *table)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "trellara %s --config ", sub);
	strbuf_add_shell_quoted(&sb, config_path);
	if (table) {
		strbuf_adds(&sb, " --table ");
		strbuf_add_shell_quoted(&sb, table);
	}
	return strbuf_detach(&sb, NULL);
}

/* A target sequence that would hand out a value the source already has:
 * the first insert on the target could collide. */
static bool sequence_behind(const struct flow_sequence *s)
{
	return s->read && seq_compare(&s->target, &s->source, s->target_params.increment) == SEQ_BEHIND;
}

static bool table_ok(const struct table_result *r)
{
	return !r->error && r->count[0] == 0 && r->count[1] == 0 && r->count[2] == 0 && r->source_rows == r->target_rows;
}

/* One pass: connect, fence, compare, report.  A pass that fails before
 * its report records nothing (the run moves only after the report) and,
 * when a connection was lost, fills *loss. */
static int verify_pass(const struct verify_options *o, struct verify_loss *loss)
{
	struct verify v = { .o = o, .cfg = o->cfg, .loss = loss };
	const struct flow_config *cfg = o->cfg;
	v.ids = (struct flow_ids){ cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	int code = EXIT_UNAVAILABLE;
	v.results = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *v.results);
	struct quarantine_entry *q = NULL;
	int nq = 0;
	struct run_row run = { 0 };
	struct apply_checkpoint cp = { 0 };
	int64_t handoff_tables = -1;
	struct flow_sequences seqs = { 0 };
	v.src = connect_side(&v, cfg->source_database_url, PGCONN_NORMAL, "source");
	v.dst = v.src ? connect_side(&v, cfg->target_database_url, PGCONN_NORMAL, "target") : NULL;
	if (!v.src || !v.dst || snapfence_session_settings(v.src) < 0 || snapfence_session_settings(v.dst) < 0 ||
	    checkpoint_migrate(v.dst, cfg->checkpoint_schema) < 0)
		goto out;
	choose_hash(&v);
	if (o->table) {
		bool known = false;
		for (size_t i = 0; i < cfg->n_tables; i++) {
			char name[300];
			snprintf(name, sizeof name, "%s.%s", cfg->tables[i].schema, cfg->tables[i].name);
			known = known || strcmp(name, o->table) == 0;
		}
		if (!known) {
			log_error("table \"%s\" is not in dataset.tables of %s", o->table, cfg->path);
			code = EXIT_USAGE;
			goto out;
		}
	}
	/* the flow's sequences (not with --table): a listed one missing on a
	 * side is a configuration error, found before anything is fenced */
	int rc = o->table ? 0 : sequences_resolve(v.src, v.dst, cfg, &seqs);
	if (rc) {
		code = rc == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	struct snapfence_options fo = { .cfg = cfg, .ids = &v.ids, .name = "verify", .timeout_s = o->fence_timeout_s,
					.stop = o->stop, .connect_repl = connect_repl, .arg = &v };
	rc = snapfence_set(&v.fence, v.src, v.dst, &fo);
	if (rc) {
		code = rc;
		goto out;
	}
	/* the source as of the snapshot, the target held at the fence */
	rc = snapfence_source_begin(v.src, &v.fence);
	/* held at the fence, the checkpoint does not move while we compare */
	if (rc < 0 || checkpoint_load(v.dst, cfg->checkpoint_schema, &v.ids, &cp) < 0 ||
	    pgconn_command(v.dst, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") < 0)
		goto out;
	for (size_t i = 0; i < cfg->n_tables && !*o->stop && !lost(&v); i++) {
		char name[300];
		snprintf(name, sizeof name, "%s.%s", cfg->tables[i].schema, cfg->tables[i].name);
		if (o->table && strcmp(name, o->table) != 0)
			continue;
		fault_pause("verify.compare");
		compare_table(&v, &cfg->tables[i], &v.results[v.n_results++]);
	}
	if (lost(&v))
		goto out; /* a table that could not be compared for it is no divergence */
	pgconn_command(v.src, "COMMIT");
	pgconn_command(v.dst, "COMMIT");
	release(&v);
	if (*o->stop) {
		code = EXIT_TEMPFAIL;
		goto out;
	}
	/* sequences are not transactional: read as they are now, after the
	 * tables, outside the snapshot */
	if (sequences_read(v.src, v.dst, &seqs) < 0)
		goto out;
	if (checkpoint_quarantine_list(v.dst, cfg->checkpoint_schema, &v.ids, true, &q, &nq) < 0 ||
	    runs_load(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, NULL, &run) < 0)
		goto out;
	if (run.exists && checkpoint_handoff_count(v.dst, cfg->checkpoint_schema, &v.ids, run.run_id, &handoff_tables) < 0)
		goto out;

	/* verdict */
	int diverged_tables = 0;
	for (size_t i = 0; i < v.n_results; i++)
		diverged_tables += !table_ok(&v.results[i]);
	/* a run that a divergence failed after its handoff still handed off:
	 * the data decides, and the evidence since the failure the run */
	bool failed = run.exists && run.state == RUN_FAILED_RECOVERABLE;
	bool handoff_ok = !run.exists || ((run.state >= RUN_STREAM_HANDOFF_READY || failed) &&
					  handoff_tables >= (int64_t)cfg->n_tables);
	int sequences_behind = 0;
	for (size_t i = 0; i < seqs.n; i++)
		sequences_behind += sequence_behind(&seqs.items[i]);
	/* the data (tables, quarantine, handoff) decides the run's state; the
	 * verdict also needs every target sequence at or ahead of its source
	 * with --sequences strict (report: they are reported, not judged) */
	bool data_converged = diverged_tables == 0 && nq == 0 && handoff_ok;
	bool strict = o->sequences_strict;
	bool converged = data_converged && (sequences_behind == 0 || !strict);
	/* DESIGN §9: a failed run whose data converged again is verified again
	 * only with a repair recorded since it failed (a reseed walks the run
	 * forward itself); without one (a repair by hand) it stays failed */
	bool repaired = false;
	if (failed && data_converged && !o->table &&
	    runs_repaired_since_failure(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, &repaired) < 0)
		goto out;
	bool hand_repaired = failed && data_converged && !o->table && !repaired;
	char *plan_command = recovery_command("repair-plan", cfg->path, NULL);
	{
		char *full = xasprintf("%s --from VERIFY.json", plan_command);
		free(plan_command);
		plan_command = full;
	}
	char *repair_command = xasprintf("%s --apply", plan_command);
	const char *run_text = !failed ? NULL
			       : o->table ? "failed_recoverable: only a verify of every table promotes it"
			       : !data_converged ? "failed_recoverable: the data does not converge (or the snapshot is not handed off)"
			       : repaired ? "verified again: a repair was recorded since it failed"
					  : "failed_recoverable: the data converged, but no repair or reseed is recorded since it "
					    "failed (a repair by hand records none): not verified again";
	char *sync_command = recovery_command("sequences sync", cfg->path, NULL);
	char l1[LSN_FORMAT_LEN], l2[LSN_FORMAT_LEN];
	lsn_format(v.fence.lsn, l1);
	lsn_format(cp.applied_through_lsn, l2);
	const char *handoff_text = !run.exists ? "no snapshot run (the flow was started with --start-now): nothing to check"
				   : handoff_ok ? "the run reached stream_handoff_ready at one consistent LSN before streaming"
						: "the snapshot run is not handed off";
	if (o->json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		char *flow = config_flow_id(cfg);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "flow", flow);
		free(flow);
		jsonw_str(&w, "compared_at", l1);
		jsonw_open(&w, "tables", '[');
		for (size_t i = 0; i < v.n_results; i++) {
			struct table_result *r = &v.results[i];
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "table", r->name);
			jsonw_str(&w, "result", table_ok(r) ? "converged" : "diverged");
			jsonw_str(&w, "scope", scope_names[r->scope]);
			jsonw_bool(&w, "keyless", r->keyless);
			if (r->key_columns) {
				jsonw_open(&w, "key_columns", '[');
				for (int c = 0; c < r->n_key_columns; c++)
					jsonw_text(&w, NULL, r->key_columns[c]);
				jsonw_close(&w, ']');
			} else {
				jsonw_null(&w, "key_columns");
			}
			jsonw_u64(&w, "source_rows", true, r->source_rows);
			jsonw_u64(&w, "target_rows", true, r->target_rows);
			if (r->error)
				jsonw_str(&w, "error", r->error_text);
			jsonw_open(&w, "divergences", '[');
			for (int k = 0; k < 3; k++) {
				if (!r->count[k])
					continue;
				jsonw_open(&w, NULL, '{');
				jsonw_str(&w, "kind", div_names[k]);
				jsonw_u64(&w, "count", true, r->count[k]);
				jsonw_open(&w, "keys", '[');
				for (int e = 0; e < r->n_examples[k] && e < MAX_EXAMPLES; e++)
					jsonw_str(&w, NULL, r->examples[k][e]);
				jsonw_close(&w, ']');
				if (r->key_columns)
					key_values_json(&w, r, k);
				jsonw_close(&w, '}');
			}
			jsonw_close(&w, ']');
			if (!table_ok(r)) {
				char *recovery = recovery_command("reseed", cfg->path, r->name);
				jsonw_str(&w, "recovery", recovery);
				free(recovery);
				if (!r->keyless && !r->error)
					jsonw_str(&w, "repair", plan_command);
			}
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_open(&w, "watermark", '{');
		jsonw_lsn(&w, "fence_lsn", true, v.fence.lsn);
		jsonw_lsn(&w, "applied_through_lsn", true, cp.applied_through_lsn);
		jsonw_lsn(&w, "last_commit_lsn", true, cp.last_commit_lsn);
		jsonw_close(&w, '}');
		jsonw_open(&w, "handoff", '{');
		jsonw_bool(&w, "ok", handoff_ok);
		if (run.exists) {
			jsonw_open(&w, "run", '{');
			jsonw_str(&w, "run_id", run.run_id);
			jsonw_str(&w, "state", run_state_name(run.state));
			jsonw_i64(&w, "tables_handed_off", true, handoff_tables);
			jsonw_close(&w, '}');
		} else {
			jsonw_null(&w, "run");
		}
		jsonw_str(&w, "detail", handoff_text);
		jsonw_close(&w, '}');
		if (failed) {
			jsonw_open(&w, "run", '{');
			jsonw_str(&w, "run_id", run.run_id);
			jsonw_str(&w, "state", repaired ? "verified" : "failed_recoverable");
			jsonw_bool(&w, "repaired_since_failure", repaired);
			jsonw_bool(&w, "hand_repair", hand_repaired);
			jsonw_str(&w, "detail", run_text);
			if (hand_repaired)
				jsonw_str(&w, "recovery", repair_command);
			jsonw_close(&w, '}');
		}
		jsonw_open(&w, "duplicates", '{');
		jsonw_u64(&w, "skipped_by_dedup", true, cp.skipped_duplicates);
		jsonw_u64(&w, "applied_transactions", true, cp.applied_transactions);
		jsonw_close(&w, '}');
		jsonw_i64(&w, "quarantined", true, nq);
		jsonw_open(&w, "sequences", '[');
		for (size_t i = 0; i < seqs.n; i++) {
			const struct flow_sequence *s = &seqs.items[i];
			jsonw_open(&w, NULL, '{');
			sequences_json_fields(&w, s);
			jsonw_str(&w, "state", sequences_state_name(s));
			jsonw_str(&w, "result", !sequence_behind(s) ? "converged" : strict ? "diverged" : "behind");
			if (sequence_behind(s)) {
				if (strict)
					jsonw_str(&w, "divergence", "sequence_behind");
				jsonw_str(&w, "recovery", sync_command);
			}
			jsonw_close(&w, '}');
		}
		jsonw_close(&w, ']');
		jsonw_i64(&w, "sequences_behind", true, sequences_behind);
		jsonw_str(&w, "sequences_mode", strict ? "strict" : "report");
		jsonw_str(&w, "data_result", data_converged ? "CONVERGED" : "DIVERGED");
		jsonw_str(&w, "result", converged ? "CONVERGED" : "DIVERGED");
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		for (size_t i = 0; i < v.n_results; i++) {
			struct table_result *r = &v.results[i];
			if (table_ok(r)) {
				printf("table %s: %" PRIu64 " rows%s, checksums match%s\n", r->name, r->source_rows, scope_text[r->scope],
				       r->keyless ? " (no key: compared as a multiset of whole rows; a changed row shows as one missing and one extra)" : "");
				continue;
			}
			if (r->error) {
				printf("table %s: DIVERGED: %s\n", r->name, r->error_text);
			} else {
				printf("table %s: DIVERGED: source %" PRIu64 " rows, target %" PRIu64 " rows%s\n", r->name, r->source_rows,
				       r->target_rows, scope_text[r->scope]);
				for (int k = 0; k < 3; k++) {
					if (!r->count[k])
						continue;
					printf("  %s: %" PRIu64 " (keys:", div_names[k], r->count[k]);
					for (int e = 0; e < r->n_examples[k] && e < MAX_EXAMPLES; e++)
						printf(" %s", r->examples[k][e]);
					printf("%s)\n", r->count[k] > (uint64_t)r->n_examples[k] || r->n_examples[k] > MAX_EXAMPLES ? " ..." : "");
				}
			}
			char *recovery = recovery_command("reseed", cfg->path, r->name);
			printf("  recover: %s\n", recovery);
			if (!r->keyless && !r->error)
				printf("  or row by row: %s (VERIFY.json: this verify's --format json)\n", plan_command);
			free(recovery);
		}
		printf("watermark: compared at %s; the target had applied through %s\n", l1, l2);
		printf("handoff: %s%s%s\n", handoff_text, run.exists ? ", run " : "", run.exists ? run.run_id : "");
		if (!handoff_ok) {
			char *recovery = recovery_command("snapshot", cfg->path, NULL);
			printf("  recover: %s\n", recovery);
			free(recovery);
		}
		if (failed) {
			printf("run %s: %s\n", run.run_id, run_text);
			if (hand_repaired)
				printf("  recover: %s, or the reseed of each table that diverged (trellara reseed)\n",
				       repair_command);
		}
		printf("duplicates: %" PRIu64 " skipped by dedup, %" PRIu64 " transactions applied once each\n", cp.skipped_duplicates,
		       cp.applied_transactions);
		if (nq) {
			printf("quarantine: %d transactions quarantined (first: transaction %u, %s)\n", nq, q[0].xid, q[0].reason);
			char *command = recovery_command("quarantine list", cfg->path, NULL);
			printf("  recover: %s\n", command);
			free(command);
		}
		for (size_t i = 0; i < seqs.n; i++) {
			const struct flow_sequence *s = &seqs.items[i];
			if (!s->read) {
				printf("sequence %s: no target sequence (the target's column %s has none): not compared\n", s->source_name,
				       s->owned_by ? s->owned_by : "?");
				continue;
			}
			char source[48], target[48];
			sequences_format_state(&s->source, source, sizeof source);
			sequences_format_state(&s->target, target, sizeof target);
			if (sequence_behind(s) && strict)
				printf("sequence %s: DIVERGED: sequence_behind: source %s, target %s\n", s->source_name, source, target);
			else if (sequence_behind(s))
				printf("sequence %s: behind: source %s, target %s (the stream carries no sequence values)\n",
				       s->source_name, source, target);
			else
				printf("sequence %s: source %s, target %s (%s)\n", s->source_name, source, target,
				       strcmp(sequences_state_name(s), "same") == 0 ? "the same" : "ahead of the source");
		}
		if (sequences_behind)
			printf("  %s: %s\n", strict ? "recover" : "sync", sync_command);
		if (converged && sequences_behind) {
			printf("result: CONVERGED (%d sequence%s behind the source: sync %s before writes move to the target)\n",
			       sequences_behind, sequences_behind == 1 ? "" : "s", sequences_behind == 1 ? "it" : "them");
		} else if (converged) {
			printf("result: CONVERGED\n");
		} else {
			printf("result: DIVERGED (%d tables%s%s", diverged_tables, nq ? ", quarantine" : "", handoff_ok ? "" : ", handoff");
			if (sequences_behind)
				printf(", %d sequence%s behind", sequences_behind, sequences_behind == 1 ? "" : "s");
			printf(")\n");
		}
	}
	fflush(stdout);
	free(sync_command);
	free(repair_command);
	free(plan_command);
	/* DESIGN §9: only a converged verify promotes; a divergence demotes a
	 * verified run.  The run is the data's: sequences behind (repaired by
	 * a sync, not a new copy) neither promote nor demote it */
	if (run.exists && data_converged && !o->table &&
	    (run.state == RUN_STREAM_HANDOFF_READY || run.state == RUN_STREAMING || run.state == RUN_VERIFIED || repaired))
		runs_move(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, RUN_VERIFIED, NULL, 0, NULL,
			  NULL, NULL, false);
	if (run.exists && !data_converged && run.state == RUN_VERIFIED) {
		char reason[256];
		snprintf(reason, sizeof reason, "verify at %s found %d diverged tables%s", l1, diverged_tables,
			 nq ? " and quarantined transactions" : "");
		runs_move(v.dst, cfg->checkpoint_schema, cfg->source_id, cfg->dataset_id, run.run_id, RUN_FAILED_RECOVERABLE, NULL,
			  0, NULL, NULL, reason, true);
	}
	code = converged ? EXIT_OK : EXIT_NEGATIVE;
	if (o->compared_at)
		*o->compared_at = v.fence.lsn;
out:
	if (code == EXIT_UNAVAILABLE)
		lost(&v); /* before the release clears the connections' errors */
	if (v.dst && v.fence.fenced) {
		PGTransactionStatusType ts = PQtransactionStatus(v.dst);
		if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) /* not PQTRANS_UNKNOWN: the connection is lost */
			pgconn_command(v.dst, "ROLLBACK");
		release(&v);
	}
	release(&v);
	for (size_t i = 0; i < v.n_results; i++)
		for (int k = 0; k < 3; k++)
		{
			for (int e = 0; e < v.results[i].n_examples[k]; e++)
				free(v.results[i].examples[k][e]);
			free(v.results[i].examples[k]);
		}
	for (size_t i = 0; i < v.n_results; i++) {
		for (int c = 0; c < v.results[i].n_key_columns; c++)
			free(v.results[i].key_columns[c]);
		free(v.results[i].key_columns);
	}
	free(v.results);
	free(q);
	sequences_free(&seqs);
	PQfinish(v.src);
	PQfinish(v.dst);
	return code;
}

int verify_run(const struct verify_options *o)
{
	int max_attempts = o->max_attempts > 1 ? o->max_attempts : 1;
	unsigned int seed = backoff_seed();
	struct backoff_jitter jitter = backoff_jitter_rand_r(&seed);
	for (int attempt = 1;; attempt++) {
		struct verify_loss loss = { 0 };
		int code = verify_pass(o, &loss);
		if (*o->stop)
			return code == EXIT_OK || code == EXIT_NEGATIVE ? code : EXIT_TEMPFAIL;
		if (code != EXIT_UNAVAILABLE || !loss.side)
			return code;
		if (attempt >= max_attempts) {
			log_error("the %s is unavailable after %d attempt%s: %s", loss.side, attempt, attempt == 1 ? "" : "s",
				  loss.why);
			return EXIT_UNAVAILABLE;
		}
		int64_t delay = backoff_next_us((int64_t)o->retry_base_ms * 1000, attempt, &jitter);
		log_warn("lost the %s connection (%s); starting the pass again in %.1f s, attempt %d of %d", loss.side,
			 loss.why, (double)delay / 1e6, attempt + 1, max_attempts);
		backoff_wait(delay, o->stop, NULL, NULL);
		if (*o->stop)
			return EXIT_TEMPFAIL;
	}
}

/*
 * copy_range.c - splitting a big table's copy into ranges of ctid blocks
 * (copy.h, DESIGN §6): the plan, and what a resumed run may keep of an
 * earlier invocation's ranges.
 *
 * Ranges of one invocation are all read at its one exported snapshot, so
 * together they are the table at that snapshot.  An earlier invocation's
 * ranges were read at another snapshot: a row updated in between may have
 * moved into another range, or changed in place.  Such a range is kept
 * only when it reads, at this invocation's snapshot, exactly the bytes it
 * read then (the hash of its COPY output): then its target rows are the
 * range at this snapshot too, and the table, with the remaining ranges
 * copied now, is the table at this snapshot, with its watermark.  Any
 * difference, or another split_bytes, and the table is copied whole
 * again, with a new plan.
 */
#include "copy.h"

#include "trellara/checkpoint.h"
#include "trellara/checksum.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/runstate.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

void copy_hash_add(struct copy_hash *h, const void *buf, size_t len)
{
	h->crc32c = crc32c(h->crc32c, buf, len);
	/* zlib takes an unsigned int length */
	const unsigned char *p = buf;
	for (size_t left = len; left > 0;) {
		unsigned int n = left > (1u << 30) ? (1u << 30) : (unsigned int)left;
		h->crc32 = (uint32_t)crc32(h->crc32, p, n);
		p += n;
		left -= n;
	}
	h->len += len;
}

void copy_hash_format(const struct copy_hash *h, char *buf, size_t len)
{
	snprintf(buf, len, "%08" PRIx32 "-%08" PRIx32 "-%" PRIx64, h->crc32c, h->crc32, h->len);
}

const char *copy_range_relation(const struct snapshot_range *r, const char *qualified)
{
	return r->partition[0] ? r->partition : qualified;
}

char *copy_range_sql(const char *cols, const char *qualified, const struct snapshot_range *r, const char *fmt)
{
	qualified = copy_range_relation(r, qualified);
	/* the bounds are numbers of ours, not data */
	if (r->open_end)
		return xasprintf("COPY (SELECT %s FROM ONLY %s WHERE ctid >= '(%" PRIu64 ",0)'::tid) TO STDOUT%s", cols,
				 qualified, r->first_block, fmt);
	return xasprintf("COPY (SELECT %s FROM ONLY %s WHERE ctid >= '(%" PRIu64 ",0)'::tid AND ctid < '(%" PRIu64
			 ",0)'::tid) TO STDOUT%s",
			 cols, qualified, r->first_block, r->end_block, fmt);
}

/* The hash of what sql (a COPY TO STDOUT) sends.  0, or -1 (logged). */
static int read_hash(PGconn *src, const char *sql, struct copy_hash *h)
{
	memset(h, 0, sizeof *h);
	PGresult *res = PQexec(src, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		log_error("source: %s", PQerrorMessage(src));
		PQclear(res);
		return -1;
	}
	PQclear(res);
	char *buf;
	int n;
	while ((n = PQgetCopyData(src, &buf, 0)) > 0) {
		copy_hash_add(h, buf, (size_t)n);
		PQfreemem(buf);
	}
	int rc = 0;
	while ((res = PQgetResult(src)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			log_error("source: %s", PQerrorMessage(src));
			rc = -1;
		}
		PQclear(res);
	}
	return n == -2 ? -1 : rc;
}

struct snapshot_range *copy_range_plan(uint64_t size, uint64_t block_size, uint64_t split_bytes, unsigned workers,
				       int *n_out)
{
	uint64_t n_blocks = size / block_size;
	uint64_t n = (size + split_bytes - 1) / split_bytes;
	if (n < 2)
		n = 2;
	/* a multiple of the workers, so that they end together instead of one
	 * copying the last range alone */
	if (workers > 1 && n > workers && n % workers)
		n += workers - n % workers;
	if (n > n_blocks)
		n = n_blocks;
	if (n > 10000)
		n = 10000;
	uint64_t per = (n_blocks + n - 1) / n;
	struct snapshot_range *r = xcalloc(n, sizeof *r);
	int k = 0;
	for (uint64_t first = 0; first < n_blocks && (uint64_t)k < n; first += per, k++) {
		r[k].range_no = k + 1;
		r[k].first_block = first;
		r[k].end_block = first + per;
		r[k].split_bytes = split_bytes;
	}
	r[k - 1].open_end = true;
	for (int i = 0; i < k; i++)
		r[i].n_ranges = k;
	*n_out = k;
	return r;
}

/* Records t's plan (n 0: forgets an earlier one) in one target transaction. */
static int record_plan(PGconn *dst, const struct copy_job *job, const char *relation, const struct snapshot_range *r, int n)
{
	struct flow_ids ids = { job->cfg->source_id, job->cfg->dataset_id, job->cfg->consumer_group };
	if (pgconn_command(dst, "BEGIN") < 0)
		return -1;
	if (checkpoint_ranges_plan(dst, job->cfg->checkpoint_schema, &ids, job->run_id, relation, r, n) < 0 ||
	    pgconn_command(dst, "COMMIT") < 0) {
		pgconn_command(dst, "ROLLBACK");
		return -1;
	}
	return 0;
}

/* A source connection in a read-only transaction at the job's exported
 * snapshot, no parallel scans (a range's rows in block order); NULL
 * (logged) when it cannot be had. */
static PGconn *connect_at_snapshot(const struct copy_job *job)
{
	PGconn *src = pgconn_connect(job->cfg->source_database_url, PGCONN_NORMAL, "trellara-snapshot", "source");
	if (src && copy_begin_at_snapshot(src, job->snapshot_name, true) == COPY_AT_SNAPSHOT_OK)
		return src;
	PQfinish(src);
	return NULL;
}

/* The ranges copied earlier, read again by up to snapshot.workers
 * connections at once, each at the snapshot. */
struct reread {
	const struct copy_job *job;
	struct copy_table *t;
	const char *qualified, *cols, *fmt;
	pthread_mutex_t lock;
	int next;       /* the next range to look at */
	int differs;    /* a range that reads differently (range_no), 0: none yet */
	bool failed;    /* a read failed */
};

static void *reread_worker(void *arg)
{
	struct reread *rr = arg;
	PGconn *src = connect_at_snapshot(rr->job);
	for (;;) {
		pthread_mutex_lock(&rr->lock);
		if (!src)
			rr->failed = true;
		int i = rr->next;
		while (i < rr->t->n_ranges && !rr->t->ranges[i].copied)
			i++;
		rr->next = i + 1;
		bool stop = rr->failed || rr->differs || i >= rr->t->n_ranges;
		pthread_mutex_unlock(&rr->lock);
		if (stop)
			break;
		struct snapshot_range *r = &rr->t->ranges[i];
		char *sql = copy_range_sql(rr->cols, rr->qualified, r, rr->fmt);
		struct copy_hash h;
		int read = read_hash(src, sql, &h);
		free(sql);
		char now[40];
		copy_hash_format(&h, now, sizeof now);
		pthread_mutex_lock(&rr->lock);
		if (read < 0)
			rr->failed = true;
		else if (!run_range_reads_same(r->content_hash, now) && !rr->differs)
			rr->differs = r->range_no;
		pthread_mutex_unlock(&rr->lock);
	}
	PQfinish(src);
	return NULL;
}

/* Whether every range copied earlier reads now as it did then: 1 yes (the
 * kept ones counted in t), 0 no (logged), -1 on error. */
static int earlier_ranges_hold(PGconn *src, const struct copy_job *job, struct copy_table *t, const char *qualified)
{
	char *cols = NULL;
	bool binary;
	if (copy_columns_at_snapshot(src, qualified, &cols, &binary) < 0) {
		free(cols);
		return -1;
	}
	int copied = 0;
	uint64_t rows = 0;
	for (int i = 0; i < t->n_ranges; i++)
		if (t->ranges[i].copied) {
			copied++;
			rows += t->ranges[i].copied_rows;
		}
	struct reread rr = { .job = job, .t = t, .qualified = qualified, .cols = cols,
			     .fmt = binary ? " (FORMAT binary)" : "" };
	pthread_mutex_init(&rr.lock, NULL);
	int n = job->workers ? (int)job->workers : 1;
	if (n > copied)
		n = copied;
	pthread_t *threads = xcalloc(n ? (size_t)n : 1, sizeof *threads);
	int started = 0;
	for (int i = 0; i < n; i++) {
		if (pthread_create(&threads[i], NULL, reread_worker, &rr) != 0) {
			log_error("cannot start a thread to read table %s.%s's ranges again", t->schema, t->name);
			rr.failed = true;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	pthread_mutex_destroy(&rr.lock);
	free(cols);
	if (rr.failed)
		return -1;
	if (rr.differs) {
		log_warn("table %s.%s: range %d/%d, copied by an earlier invocation, reads differently at this snapshot"
			 " (rows changed or moved since): the table is copied whole again",
			 t->schema, t->name, rr.differs, t->n_ranges);
		return 0;
	}
	if (copied)
		log_info("table %s.%s: its %d ranges copied earlier read again on %d connections at this snapshot", t->schema,
			 t->name, copied, started);
	t->ranges_kept = copied;
	t->keep_rows = copied > 0;
	t->rows = rows;
	return 1;
}

/* A partitioned table's leaf partitions now: names (quoted by the
 * source), sizes and filenodes, by name.  1 listed, 0 not to be split
 * (a leaf that is no plain table: a foreign one), -1 on error (logged). */
struct leaf {
	char name[272];
	char filenode[24];
	uint64_t size;
};

static int list_leaves(PGconn *src, const char *qualified, struct leaf **leaves, int *n)
{
	*leaves = NULL;
	*n = 0;
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(src,
				     "SELECT format('%I.%I', n.nspname, c.relname), pg_relation_size(c.oid),"
				     " pg_relation_filenode(c.oid)::text, c.relkind = 'r'"
				     " FROM pg_partition_tree(to_regclass($1)) t JOIN pg_class c ON c.oid = t.relid"
				     " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE t.isleaf ORDER BY 1",
				     1, p);
	if (!res)
		return -1;
	int rows = PQntuples(res), rc = 1;
	*leaves = xcalloc(rows ? (size_t)rows : 1, sizeof **leaves);
	for (int i = 0; i < rows; i++) {
		struct leaf *l = &(*leaves)[i];
		if (strcmp(PQgetvalue(res, i, 3), "t") != 0 || PQgetisnull(res, i, 2) ||
		    strlen(PQgetvalue(res, i, 0)) >= sizeof l->name) {
			rc = 0;
			break;
		}
		snprintf(l->name, sizeof l->name, "%s", PQgetvalue(res, i, 0));
		snprintf(l->filenode, sizeof l->filenode, "%s", PQgetvalue(res, i, 2));
		l->size = strtoull(PQgetvalue(res, i, 1), NULL, 10);
	}
	PQclear(res);
	if (rc == 1)
		*n = rows;
	else {
		free(*leaves);
		*leaves = NULL;
	}
	return rc;
}

/* The ranges of a partitioned table: each leaf one range, or, larger than
 * split_bytes, its ranges of blocks (copy_range_plan); numbered across. */
static struct snapshot_range *plan_leaves(const struct leaf *leaves, int n_leaves, uint64_t block_size,
					  uint64_t split_bytes, unsigned workers, int *n_out)
{
	struct snapshot_range *all = NULL;
	int n = 0;
	for (int i = 0; i < n_leaves; i++) {
		struct snapshot_range one = { .first_block = 0, .open_end = true, .split_bytes = split_bytes }, *part = &one;
		int k = 1;
		if (leaves[i].size > split_bytes)
			part = copy_range_plan(leaves[i].size, block_size, split_bytes, workers, &k);
		all = xrealloc(all, (size_t)(n + k) * sizeof *all);
		for (int j = 0; j < k; j++) {
			struct snapshot_range *r = &all[n + j];
			*r = part[j];
			snprintf(r->partition, sizeof r->partition, "%s", leaves[i].name);
			snprintf(r->filenode, sizeof r->filenode, "%s", leaves[i].filenode);
		}
		if (part != &one)
			free(part);
		n += k;
	}
	for (int i = 0; i < n; i++) {
		all[i].range_no = i + 1;
		all[i].n_ranges = n;
	}
	*n_out = n;
	return all;
}

/* An earlier plan of a partitioned table holds only over the same leaves:
 * then each of its ranges gets its leaf's filenode now.  true when it
 * does. */
static bool same_leaves(struct snapshot_range *r, int n, const struct leaf *leaves, int n_leaves)
{
	int seen = 0;
	for (int i = 0; i < n; i++) {
		int found = -1;
		for (int j = 0; j < n_leaves && found < 0; j++)
			if (strcmp(r[i].partition, leaves[j].name) == 0)
				found = j;
		if (found < 0)
			return false;
		if (i == 0 || strcmp(r[i].partition, r[i - 1].partition) != 0)
			seen++;
		snprintf(r[i].filenode, sizeof r[i].filenode, "%s", leaves[found].filenode);
	}
	return seen == n_leaves;
}

int copy_partitions_unchanged(void *src_pgconn, const struct copy_table *t)
{
	PGconn *src = src_pgconn;
	char *qs = pgconn_quote_ident(src, t->schema), *qn = pgconn_quote_ident(src, t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	struct leaf *leaves;
	int n_leaves;
	int listed = list_leaves(src, qualified, &leaves, &n_leaves);
	free(qualified);
	free(qs);
	free(qn);
	if (listed <= 0)
		return listed;
	/* same_leaves writes each range's filenode: a copy of the plan */
	struct snapshot_range *r = xcalloc((size_t)t->n_ranges, sizeof *r);
	memcpy(r, t->ranges, (size_t)t->n_ranges * sizeof *r);
	bool same = same_leaves(r, t->n_ranges, leaves, n_leaves);
	free(r);
	free(leaves);
	return same;
}

/* Plans table t (see copy.h).  0, or -1 (logged). */
static int plan_table(PGconn *src, PGconn *dst, struct copy_job *job, struct copy_table *t, uint64_t block_size)
{
	const struct flow_config *cfg = job->cfg;
	struct flow_ids ids = { cfg->source_id, cfg->dataset_id, cfg->consumer_group };
	char *qs = pgconn_quote_ident(src, t->schema), *qn = pgconn_quote_ident(src, t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	char *relation = xasprintf("%s.%s", t->schema, t->name);
	struct snapshot_range *earlier = NULL;
	int n_earlier = 0, rc = -1;
	PGresult *res = NULL;
	struct leaf *leaves = NULL; /* a partitioned table's, when it is split */
	int n_leaves = 0;
	bool partitioned = false;
	uint64_t total = 0;
	if (checkpoint_ranges_list(dst, cfg->checkpoint_schema, &ids, job->run_id, relation, &earlier, &n_earlier) < 0)
		goto out;
	/* a plain table is split by blocks; a partitioned one by its leaf
	 * partitions, a large leaf by blocks too (read from the leaf, written
	 * through the parent); a partitioned table with a leaf that is no
	 * plain table is copied through its parent, whole */
	char kind = copy_relkind(src, qualified);
	if (kind == 'p' && job->split_bytes > 0) {
		int listed = list_leaves(src, qualified, &leaves, &n_leaves);
		if (listed < 0)
			goto out;
		partitioned = listed == 1;
		for (int i = 0; i < n_leaves; i++)
			total += leaves[i].size;
	}
	const char *p[1] = { qualified };
	res = pgconn_query(src, "SELECT pg_relation_size(to_regclass($1)), pg_relation_filenode(to_regclass($1))", 1, p);
	if (!res)
		goto out;
	if ((kind != 'r' && !partitioned) || job->split_bytes == 0 || (!partitioned && PQgetisnull(res, 0, 0))) {
		if (n_earlier > 0) {
			log_info("table %s.%s: not split now: its ranges of an earlier invocation are dropped, it is copied whole",
				 t->schema, t->name);
			rc = record_plan(dst, job, relation, NULL, 0);
		} else {
			rc = 0;
		}
		goto out;
	}
	uint64_t size = partitioned ? total : strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	t->filenode = xstrdup(partitioned ? "" : PQgetvalue(res, 0, 1));
	if (n_earlier > 0) {
		if (earlier[0].split_bytes != job->split_bytes) {
			log_warn("table %s.%s: split with snapshot.split_bytes %" PRIu64 " by an earlier invocation, %" PRIu64
				 " now: its ranges are dropped, it is copied whole again",
				 t->schema, t->name, earlier[0].split_bytes, job->split_bytes);
		} else if (partitioned != (earlier[0].partition[0] != '\0') ||
			   (partitioned && !same_leaves(earlier, n_earlier, leaves, n_leaves))) {
			log_warn("table %s.%s: its partitions are not those an earlier invocation split it by: its ranges"
				 " are dropped, it is copied whole again",
				 t->schema, t->name);
		} else {
			t->ranges = earlier;
			t->n_ranges = n_earlier;
			earlier = NULL;
			int hold = earlier_ranges_hold(src, job, t, qualified);
			if (hold < 0)
				goto out;
			if (hold) {
				if (t->ranges_kept)
					log_info("table %s.%s: %d of its %d ranges copied earlier read the same at this snapshot: kept",
						 t->schema, t->name, t->ranges_kept, t->n_ranges);
				rc = 0;
				goto out;
			}
			free(t->ranges);
			t->ranges = NULL;
			t->n_ranges = 0;
			t->ranges_kept = 0;
			t->keep_rows = false;
			t->rows = 0;
		}
	}
	if (size <= job->split_bytes) {
		rc = n_earlier > 0 ? record_plan(dst, job, relation, NULL, 0) : 0;
		goto out;
	}
	if (partitioned) {
		t->ranges = plan_leaves(leaves, n_leaves, block_size, job->split_bytes, job->workers, &t->n_ranges);
		if (t->n_ranges == 0) { /* no leaf: copied through its parent, whole */
			free(t->ranges);
			t->ranges = NULL;
			rc = n_earlier > 0 ? record_plan(dst, job, relation, NULL, 0) : 0;
			goto out;
		}
	} else {
		t->ranges = copy_range_plan(size, block_size, job->split_bytes, job->workers, &t->n_ranges);
	}
	if (record_plan(dst, job, relation, t->ranges, t->n_ranges) < 0)
		goto out;
	if (partitioned)
		log_info("table %s.%s: %.1f MB in %d partitions, split into %d ranges", t->schema, t->name,
			 (double)size / 1e6, n_leaves, t->n_ranges);
	else
		log_info("table %s.%s: %.1f MB, split into %d ranges of about %" PRIu64 " blocks", t->schema, t->name,
			 (double)size / 1e6, t->n_ranges, t->ranges[0].end_block - t->ranges[0].first_block);
	rc = 0;
out:
	PQclear(res);
	free(leaves);
	free(earlier);
	free(qualified);
	free(relation);
	free(qs);
	free(qn);
	return rc;
}

int copy_plan_splits(struct copy_job *job, void *dst_pgconn)
{
	PGconn *dst = dst_pgconn;
	PGconn *src = connect_at_snapshot(job);
	PGresult *res = NULL;
	int rc = -1;
	if (!src)
		goto out;
	res = pgconn_query(src, "SELECT current_setting('block_size')::bigint", 0, NULL);
	if (!res)
		goto out;
	uint64_t block_size = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	for (size_t i = 0; i < job->n_tables; i++) {
		struct copy_table *t = &job->tables[i];
		if (plan_table(src, dst, job, t, block_size) < 0)
			goto out;
		/* a plain table's ranges read the table: its filenode (a leaf's
		 * range has its leaf's) */
		for (int k = 0; k < t->n_ranges; k++)
			if (!t->ranges[k].partition[0])
				snprintf(t->ranges[k].filenode, sizeof t->ranges[k].filenode, "%s", t->filenode);
	}
	rc = 0;
out:
	if (rc < 0)
		log_error("the split of the tables to copy could not be planned");
	PQclear(res);
	PQfinish(src);
	return rc;
}

void copy_tables_release(struct copy_table *tables, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(tables[i].ranges);
		tables[i].ranges = NULL;
		free(tables[i].filenode);
		tables[i].filenode = NULL;
	}
}

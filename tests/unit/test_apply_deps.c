/*
 * test_apply_deps.c - the dependency tracker of parallel apply
 * (apply_deps.h): directed cases, then random operations against a
 * brute-force model (every touch and barrier ever made, with the
 * committed watermark and a per-batch abandoned flag).
 *
 * Links without libpq (build/tests/apply_deps_nolibpq).
 */
#include "trellara/apply_deps.h"
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t touch_s(struct apply_deps *d, uint64_t b, uint32_t rel, const char *key)
{
	return apply_deps_touch(d, b, rel, key, strlen(key));
}

static void test_basic(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(apply_deps_held(d) == 0);
	CHECK(touch_s(d, 1, 1, "k1") == 0);
	CHECK(touch_s(d, 1, 1, "k2") == 0);
	CHECK(touch_s(d, 2, 1, "k3") == 0);   /* no conflict */
	CHECK(touch_s(d, 2, 1, "k1") == 1);   /* conflict with batch 1 */
	CHECK(touch_s(d, 2, 1, "k1") == 1);   /* again: the same answer */
	CHECK(touch_s(d, 3, 2, "k1") == 0);   /* same bytes, other relation */
	CHECK(touch_s(d, 3, 1, "k") == 0);    /* prefix of "k1" */
	CHECK(touch_s(d, 3, 1, "k10") == 0);  /* "k1" is a prefix of it */
	CHECK(touch_s(d, 3, 1, "") == 0);     /* the empty key */
	CHECK(touch_s(d, 4, 1, "") == 3);
	CHECK(apply_deps_held(d) == 7);       /* k1 k2 k3 2/k1 k k10 "" */
	CHECK(!apply_deps_broken(d));
	apply_deps_free(d);

	/* bytes, not strings: a NUL inside the key counts */
	d = apply_deps_new();
	CHECK(apply_deps_touch(d, 1, 0, "a\0b", 3) == 0);
	CHECK(apply_deps_touch(d, 2, 0, "a\0c", 3) == 0);
	CHECK(apply_deps_touch(d, 3, 0, "a", 1) == 0);
	CHECK(apply_deps_touch(d, 4, 0, "a\0b", 3) == 1);
	CHECK(apply_deps_touch(d, 5, 0, "a\0c", 2) == 0); /* "a\0" */
	apply_deps_free(d);
}

static void test_several_holders(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(touch_s(d, 1, 7, "x") == 0);
	CHECK(touch_s(d, 2, 7, "x") == 1);
	CHECK(touch_s(d, 3, 7, "y") == 0);
	CHECK(touch_s(d, 4, 7, "x") == 2); /* the highest of 1 and 2 */
	CHECK(touch_s(d, 4, 7, "y") == 3);
	/* 1 and 2 commit: x is held by 4 only */
	apply_deps_committed(d, 2);
	CHECK(touch_s(d, 5, 7, "x") == 4);
	apply_deps_committed(d, 4);
	CHECK(touch_s(d, 6, 7, "x") == 5);
	CHECK(touch_s(d, 6, 7, "y") == 0); /* its holders 3 and 4 committed */
	apply_deps_free(d);
}

static void test_commit_releases(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(touch_s(d, 1, 1, "a") == 0);
	CHECK(touch_s(d, 2, 1, "b") == 0);
	CHECK(touch_s(d, 3, 1, "c") == 0);
	CHECK(apply_deps_held(d) == 3);
	apply_deps_committed(d, 1);
	CHECK(apply_deps_held(d) == 2);
	CHECK(touch_s(d, 4, 1, "a") == 0); /* 1 committed */
	CHECK(touch_s(d, 4, 1, "b") == 2);
	apply_deps_committed(d, 1);        /* again: no-op */
	apply_deps_committed(d, 0);        /* below: no-op */
	CHECK(touch_s(d, 4, 1, "c") == 3);
	CHECK(apply_deps_held(d) == 3);    /* a b c, all by 4 now */
	CHECK(!apply_deps_broken(d));
	apply_deps_committed(d, 3);
	CHECK(apply_deps_held(d) == 3);
	apply_deps_committed(d, 4);
	CHECK(apply_deps_held(d) == 0);
	apply_deps_free(d);
}

static void test_abandon(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(touch_s(d, 1, 1, "k") == 0);
	CHECK(touch_s(d, 2, 1, "k") == 1);
	CHECK(touch_s(d, 2, 1, "m") == 0);
	CHECK(touch_s(d, 3, 1, "k") == 2);
	CHECK(touch_s(d, 3, 1, "n") == 0);
	/* 2 and 3 roll back: k is held by 1 again, m and n are free */
	apply_deps_abandon(d, 2);
	CHECK(apply_deps_held(d) == 1);
	CHECK(touch_s(d, 4, 1, "k") == 1);
	CHECK(touch_s(d, 4, 1, "m") == 0);
	CHECK(touch_s(d, 4, 1, "n") == 0);
	/* a number at or below an abandoned one is never used again */
	CHECK(touch_s(d, 5, 1, "k") == 4);
	apply_deps_abandon(d, 5);
	CHECK(touch_s(d, 6, 1, "k") == 4);
	apply_deps_abandon(d, 4);         /* k back to 1, m n free */
	CHECK(apply_deps_held(d) == 1);
	CHECK(touch_s(d, 7, 1, "k") == 1);
	CHECK(touch_s(d, 7, 1, "m") == 0);
	apply_deps_committed(d, 7);
	CHECK(apply_deps_held(d) == 0);
	CHECK(!apply_deps_broken(d));
	apply_deps_free(d);
}

static void test_barrier(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(apply_deps_barrier(d, 1) == 0);
	CHECK(touch_s(d, 2, 1, "a") == 1);    /* nothing runs beside a barrier */
	CHECK(touch_s(d, 3, 1, "b") == 1);
	CHECK(apply_deps_barrier(d, 4) == 3); /* the highest earlier live batch */
	CHECK(touch_s(d, 4, 1, "c") == 1);    /* the barrier batch touching: the earlier barrier, 1 */
	apply_deps_committed(d, 1);
	CHECK(touch_s(d, 5, 1, "x") == 4);
	apply_deps_committed(d, 4);
	CHECK(touch_s(d, 6, 1, "y") == 0);
	CHECK(apply_deps_barrier(d, 7) == 6);
	apply_deps_abandon(d, 7);            /* the barrier rolled back */
	CHECK(touch_s(d, 8, 1, "z") == 0);
	CHECK(apply_deps_barrier(d, 9) == 8);
	CHECK(apply_deps_barrier(d, 9) == 8); /* twice in one batch */
	apply_deps_committed(d, 9);
	CHECK(apply_deps_barrier(d, 10) == 0);
	/* a batch the tracker never saw: no barrier waits for it */
	apply_deps_committed(d, 10);
	CHECK(apply_deps_barrier(d, 12) == 0);
	CHECK(!apply_deps_broken(d));
	apply_deps_free(d);
}

static void test_reclaim(void)
{
	struct apply_deps *d = apply_deps_new();
	char key[32];
	uint64_t batch = 0;
	for (int round = 0; round < 3; round++) {
		/* 2000 keys over 20 batches; the table grows */
		for (int i = 0; i < 2000; i++) {
			if (i % 100 == 0)
				batch++;
			snprintf(key, sizeof key, "key%d", i);
			CHECK(touch_s(d, batch, 3, key) == 0);
		}
		CHECK(apply_deps_held(d) == 2000);
		snprintf(key, sizeof key, "key%d", 1999);
		CHECK(touch_s(d, batch + 1, 3, key) == batch);
		batch++;
		apply_deps_committed(d, batch - 1);
		CHECK(apply_deps_held(d) == 1);
		apply_deps_committed(d, batch);
		CHECK(apply_deps_held(d) == 0);
		/* reused after the reclaim: everything free */
		CHECK(touch_s(d, batch + 1, 3, "key0") == 0);
		CHECK(apply_deps_held(d) == 1);
		batch++;
		apply_deps_abandon(d, batch);
		CHECK(apply_deps_held(d) == 0);
	}
	/* growth while most keys are free keeps only the live ones */
	for (int i = 0; i < 5000; i++) {
		batch++;
		snprintf(key, sizeof key, "g%d", i);
		CHECK(touch_s(d, batch, 1, "pin") == (i ? batch - 1 : 0));
		CHECK(touch_s(d, batch, 1, key) == 0);
		apply_deps_committed(d, batch - 1);
	}
	CHECK(apply_deps_held(d) == 2);
	CHECK(!apply_deps_broken(d));
	apply_deps_free(d);
}

static void test_misuse(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(touch_s(d, 0, 1, "a") == APPLY_DEPS_BROKEN);
	CHECK(apply_deps_broken(d));
	CHECK(touch_s(d, 1, 1, "a") == APPLY_DEPS_BROKEN); /* stays broken */
	CHECK(apply_deps_barrier(d, 2) == APPLY_DEPS_BROKEN);
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(touch_s(d, 5, 1, "a") == 0);
	CHECK(touch_s(d, 4, 1, "b") == APPLY_DEPS_BROKEN); /* lower than seen */
	CHECK(touch_s(d, 6, 1, "a") == APPLY_DEPS_BROKEN);
	CHECK(apply_deps_held(d) == 1);
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(touch_s(d, 1, 1, "a") == 0);
	apply_deps_committed(d, 1);
	CHECK(touch_s(d, 1, 1, "b") == APPLY_DEPS_BROKEN); /* after its commit */
	apply_deps_free(d);

	d = apply_deps_new();
	apply_deps_committed(d, 3); /* batches never seen */
	CHECK(apply_deps_barrier(d, 2) == APPLY_DEPS_BROKEN);
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(touch_s(d, 2, 1, "a") == 0);
	apply_deps_abandon(d, 2);
	CHECK(touch_s(d, 2, 1, "a") == APPLY_DEPS_BROKEN); /* an abandoned number */
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(touch_s(d, 2, 1, "a") == 0);
	CHECK(touch_s(d, 3, 1, "a") == 2);
	apply_deps_committed(d, 2);
	apply_deps_abandon(d, 2); /* a committed batch cannot roll back */
	CHECK(apply_deps_broken(d));
	CHECK(touch_s(d, 4, 1, "a") == APPLY_DEPS_BROKEN);
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(apply_deps_touch(d, 1, 1, NULL, 0) == 0); /* the empty key */
	CHECK(apply_deps_touch(d, 1, 1, NULL, 3) == APPLY_DEPS_BROKEN);
	apply_deps_free(d);

	d = apply_deps_new();
	CHECK(touch_s(d, UINT64_MAX, 1, "a") == APPLY_DEPS_BROKEN); /* the answer's own value */
	apply_deps_free(d);
	apply_deps_free(NULL);
}

/* ---- random operations against the model ---- */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define MAX_OPS 4000
#define MAX_BATCH (2 * MAX_OPS + 8)

struct mtouch {
	uint64_t batch;
	uint32_t rel;
	size_t len;
	unsigned char key[8];
};

struct model {
	struct mtouch *touches; /* every touch ever made */
	size_t n;
	bool begun[MAX_BATCH], barrier[MAX_BATCH], abandoned[MAX_BATCH];
	uint64_t committed, last;
	bool open;
};

static bool mlive(const struct model *m, uint64_t b)
{
	return m->begun[b] && b > m->committed && !m->abandoned[b];
}

static uint64_t model_barrier(struct model *m, uint64_t batch)
{
	uint64_t dep = 0;
	for (uint64_t b = 1; b < batch; b++)
		if (mlive(m, b))
			dep = b;
	m->begun[batch] = m->barrier[batch] = true;
	return dep;
}

static uint64_t model_touch(struct model *m, uint64_t batch, uint32_t rel, const unsigned char *key, size_t len)
{
	uint64_t dep = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct mtouch *t = &m->touches[i];
		if (t->batch < batch && mlive(m, t->batch) && t->rel == rel && t->len == len &&
		    memcmp(t->key, key, len) == 0 && t->batch > dep)
			dep = t->batch;
	}
	for (uint64_t b = 1; b < batch; b++)
		if (mlive(m, b) && m->barrier[b] && b > dep)
			dep = b;
	struct mtouch *t = &m->touches[m->n++];
	t->batch = batch;
	t->rel = rel;
	t->len = len;
	memcpy(t->key, key, len);
	m->begun[batch] = true;
	return dep;
}

static size_t model_held(const struct model *m)
{
	size_t held = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct mtouch *t = &m->touches[i];
		if (!mlive(m, t->batch))
			continue;
		bool first = true; /* the first live touch of its key counts it */
		for (size_t j = 0; j < i && first; j++) {
			const struct mtouch *u = &m->touches[j];
			if (mlive(m, u->batch) && u->rel == t->rel && u->len == t->len &&
			    memcmp(u->key, t->key, t->len) == 0)
				first = false;
		}
		if (first)
			held++;
	}
	return held;
}

static void random_key(uint64_t *rng, bool wide, unsigned char *key, size_t *len)
{
	if (wide) { /* many keys: the table grows and is rebuilt */
		uint32_t v = (uint32_t)(splitmix64(rng) % 3000);
		memcpy(key, &v, sizeof v);
		*len = sizeof v;
		return;
	}
	/* few short keys over "a", "b", NUL: prefixes of one another */
	*len = (size_t)(splitmix64(rng) % 4);
	for (size_t i = 0; i < *len; i++)
		key[i] = "ab"[splitmix64(rng) % 3];
}

static void run_random(uint64_t seed)
{
	uint64_t rng = seed;
	struct model *m = calloc(1, sizeof *m);
	m->touches = calloc(MAX_OPS, sizeof *m->touches);
	struct apply_deps *d = apply_deps_new();
	bool wide = seed % 2;
	int mismatches = 0;
	for (int op = 0; op < MAX_OPS && m->last + 2 < MAX_BATCH; op++) {
		uint64_t r = splitmix64(&rng) % 100;
		/* the batch of a touch or barrier: the open one or a new one */
		uint64_t batch = m->open && splitmix64(&rng) % 4 ? m->last : m->last + 1;
		if (r < 65) {
			unsigned char key[8];
			size_t len;
			uint32_t rel = (uint32_t)(splitmix64(&rng) % 3);
			random_key(&rng, wide, key, &len);
			uint64_t want = model_touch(m, batch, rel, key, len);
			uint64_t got = apply_deps_touch(d, batch, rel, key, len);
			if (got != want && mismatches++ < 5)
				fprintf(stderr, "seed %llu op %d: touch(%llu) = %llu, model %llu\n",
					(unsigned long long)seed, op, (unsigned long long)batch,
					(unsigned long long)got, (unsigned long long)want);
			CHECK(got == want);
			m->last = batch;
			m->open = true;
		} else if (r < 70) {
			uint64_t want = model_barrier(m, batch);
			uint64_t got = apply_deps_barrier(d, batch);
			CHECK(got == want);
			m->last = batch;
			m->open = true;
		} else if (r < 88) {
			/* commit up to a batch in (committed, last + 1] */
			uint64_t span = m->last + 1 - m->committed;
			uint64_t c = m->committed + 1 + splitmix64(&rng) % span;
			apply_deps_committed(d, c);
			m->committed = c;
			if (c >= m->last) {
				m->last = c;
				m->open = false;
			}
		} else if (r < 93) {
			/* roll back from a batch in (committed, last + 1] */
			uint64_t span = m->last + 1 - m->committed;
			uint64_t b = m->committed + 1 + splitmix64(&rng) % span;
			apply_deps_abandon(d, b);
			for (uint64_t x = b; x <= m->last; x++)
				m->abandoned[x] = true;
			if (b > m->last)
				m->last = b;
			m->open = false;
		} else {
			CHECK(apply_deps_held(d) == model_held(m));
		}
	}
	CHECK(apply_deps_held(d) == model_held(m));
	CHECK(!apply_deps_broken(d));
	apply_deps_free(d);
	free(m->touches);
	free(m);
}

/* A large batch's undo log is freed by an idle applier, and only once
 * nothing is left to undo; the tracker works on as before. */
static void test_shrink(void)
{
	struct apply_deps *d = apply_deps_new();
	CHECK(!apply_deps_shrink(d)); /* nothing grown */
	char key[16];
	bool all = true;
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		all &= touch_s(d, 1, 1, key) == 0;
	}
	CHECK(all);
	CHECK(!apply_deps_shrink(d)); /* batch 1 is open: its records may be undone */
	apply_deps_committed(d, 1);
	CHECK(apply_deps_shrink(d));
	CHECK(!apply_deps_shrink(d));
	CHECK(touch_s(d, 2, 1, "k7") == 0); /* 1 committed */
	CHECK(touch_s(d, 3, 1, "k7") == 2);
	apply_deps_abandon(d, 3);
	CHECK(touch_s(d, 4, 1, "k7") == 2);
	apply_deps_free(d);
}

int main(void)
{
	test_basic();
	test_shrink();
	test_several_holders();
	test_commit_releases();
	test_abandon();
	test_barrier();
	test_reclaim();
	test_misuse();
	for (uint64_t seed = 1; seed <= 12; seed++)
		run_random(seed);
	return unit_done("apply_deps");
}

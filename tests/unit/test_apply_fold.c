/*
 * test_apply_fold.c - batch compaction (apply_fold.h) against a model.
 *
 * The model: a tiny target table per relation, key -> row (a, b), where
 * an insert of a present key, or an update or delete of a missing row,
 * FAILS (what the target's primary key and the executor's row-count check
 * do).  A sequence of changes is applied once as given, and once through
 * the fold the way the apply engine drives it (FOLD_CONFLICT: flush the
 * emission, reset, add again; FOLD_ALONE: flush, reset, send the change by
 * itself); both must end in the same table, or both fail - except the one
 * documented loss of the insert check (apply_fold.h): an insert over a
 * present row whose row leaves its key again (deleted, or moved by a key
 * change) later in the segment.
 *
 * Links without libpq (build/tests/apply_fold_nolibpq).
 */
#include "trellara/apply_fold.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- relations: (id key, a, b), the key the first column ---- */

static struct env_column cols_t[3] = {
	{ "id", 2, 23, -1, true }, { "a", 1, 25, -1, false }, { "b", 1, 25, -1, false } };
static struct env_column cols_u[3] = {
	{ "id", 2, 23, -1, true }, { "a", 1, 25, -1, false }, { "b", 1, 25, -1, false } };
static const bool key_mask[3] = { true, false, false };

static struct env_relation rel_t = { 100, "public", "t", 6, 1, 'd', 3, cols_t };
static struct env_relation rel_u = { 101, "public", "u", 6, 1, 'd', 3, cols_u };

/* ---- the model ---- */

#define NKEYS 3
#define NRELS 2

struct mrow {
	bool present;
	char a[24], b[24];
};
struct mtable {
	struct mrow rows[NRELS][NKEYS];
};

static bool tables_equal(const struct mtable *x, const struct mtable *y)
{
	for (int r = 0; r < NRELS; r++)
		for (int k = 0; k < NKEYS; k++) {
			const struct mrow *p = &x->rows[r][k], *q = &y->rows[r][k];
			if (p->present != q->present)
				return false;
			if (p->present && (strcmp(p->a, q->a) != 0 || strcmp(p->b, q->b) != 0))
				return false;
		}
	return true;
}

/* The key index a value names ("1".."3"), or -1. */
static int key_of(const struct env_value *v)
{
	if (v->kind != ENV_TEXT || v->len != 1 || v->data[0] < '1' || v->data[0] >= '1' + NKEYS)
		return -1;
	return v->data[0] - '1';
}

static void set_col(char *dst, const struct env_value *v)
{
	if (v->kind == ENV_NULL)
		snprintf(dst, 24, "<null>");
	else
		snprintf(dst, 24, "%.*s", (int)v->len, (const char *)v->data);
}

/* Applies one change the way the target runs its statement: false when
 * it fails (duplicate key, no row). */
static bool model_apply(struct mtable *t, int rel, const struct env_change *c)
{
	struct mrow *rows = t->rows[rel];
	if (c->op == ENV_INSERT) {
		CHECK(c->new_tuple.n == 3);
		int k = key_of(&c->new_tuple.values[0]);
		CHECK(k >= 0);
		for (int i = 0; i < 3; i++)
			CHECK(c->new_tuple.values[i].kind != ENV_UNCHANGED_TOAST); /* the planner refuses those */
		if (k < 0 || rows[k].present)
			return false;
		rows[k].present = true;
		set_col(rows[k].a, &c->new_tuple.values[1]);
		set_col(rows[k].b, &c->new_tuple.values[2]);
		return true;
	}
	const struct env_tuple *match = c->old_kind ? &c->old_tuple : &c->new_tuple;
	int k = key_of(&match->values[0]);
	CHECK(k >= 0);
	if (k < 0 || !rows[k].present)
		return false;
	if (c->op == ENV_DELETE) {
		CHECK(c->old_kind != 0);
		rows[k].present = false;
		return true;
	}
	CHECK(c->op == ENV_UPDATE);
	CHECK(c->new_tuple.n == 3);
	int k2 = key_of(&c->new_tuple.values[0]);
	CHECK(k2 >= 0);
	if (k2 < 0)
		return false;
	if (k2 != k) {
		if (rows[k2].present)
			return false;
		rows[k2] = rows[k];
		rows[k].present = false;
	}
	if (c->new_tuple.values[1].kind != ENV_UNCHANGED_TOAST)
		set_col(rows[k2].a, &c->new_tuple.values[1]);
	if (c->new_tuple.values[2].kind != ENV_UNCHANGED_TOAST)
		set_col(rows[k2].b, &c->new_tuple.values[2]);
	return true;
}

/* ---- the operations and their changes ---- */

enum op_kind {
	OP_INSERT,
	OP_UPDATE,     /* every column sent, old_kind 0 */
	OP_UPDATE_T,   /* b is unchanged TOAST */
	OP_MOVE,       /* key change to key2, every column sent */
	OP_MOVE_T,     /* key change with b unchanged TOAST */
	OP_DELETE,
	OP_UPDATE_K,   /* key unchanged, but the old key sent (old_kind 'K') */
	N_OP_KINDS
};
static const char op_letter[N_OP_KINDS] = { 'I', 'U', 'T', 'M', 'N', 'D', 'K' };

struct op {
	int kind, rel, key, key2;
	int step; /* makes the values unique: a<step>, b<step> */
};

struct built {
	struct env_change c;
	struct env_value oldv[3], newv[3];
	char text[6][24];
};

static void text_value(struct built *b, struct env_value *v, int slot, const char *s)
{
	snprintf(b->text[slot], sizeof b->text[slot], "%s", s);
	*v = (struct env_value){ .kind = ENV_TEXT, .len = (uint32_t)strlen(b->text[slot]),
				 .data = (const uint8_t *)b->text[slot] };
}

static void build_change(struct built *b, const struct op *o, uint32_t fold_rel)
{
	memset(b, 0, sizeof *b);
	char keytext[2] = { (char)('1' + o->key), 0 }, key2text[2] = { (char)('1' + o->key2), 0 };
	char a[16], bb[16];
	snprintf(a, sizeof a, "a%d", o->step);
	snprintf(bb, sizeof bb, "b%d", o->step);
	struct env_change *c = &b->c;
	c->relation = fold_rel;
	c->old_tuple = (struct env_tuple){ 3, b->oldv };
	c->new_tuple = (struct env_tuple){ 3, b->newv };
	bool toast = o->kind == OP_UPDATE_T || o->kind == OP_MOVE_T;
	bool move = o->kind == OP_MOVE || o->kind == OP_MOVE_T;
	switch (o->kind) {
	case OP_INSERT:
	case OP_UPDATE:
	case OP_UPDATE_T:
	case OP_UPDATE_K:
	case OP_MOVE:
	case OP_MOVE_T:
		c->op = o->kind == OP_INSERT ? ENV_INSERT : ENV_UPDATE;
		text_value(b, &b->newv[0], 0, move ? key2text : keytext);
		text_value(b, &b->newv[1], 1, a);
		if (toast)
			b->newv[2] = (struct env_value){ .kind = ENV_UNCHANGED_TOAST };
		else
			text_value(b, &b->newv[2], 2, bb);
		if (move || o->kind == OP_UPDATE_K) {
			c->old_kind = 'K';
			text_value(b, &b->oldv[0], 3, keytext);
			b->oldv[1] = b->oldv[2] = (struct env_value){ .kind = ENV_NULL };
		} else {
			c->old_tuple.n = 0;
		}
		break;
	case OP_DELETE:
		c->op = ENV_DELETE;
		c->old_kind = 'K';
		text_value(b, &b->oldv[0], 3, keytext);
		b->oldv[1] = b->oldv[2] = (struct env_value){ .kind = ENV_NULL };
		c->new_tuple.n = 0;
		break;
	}
}

/* Overwrites what the change points to: the fold must have copied it. */
static void scribble(struct built *b)
{
	memset(b->text, 'X', sizeof b->text);
	for (int i = 0; i < 3; i++) {
		b->oldv[i].len = b->newv[i].len = 0;
		b->oldv[i].kind = b->newv[i].kind = 'x';
	}
}

/* ---- the driver: what the apply engine does ---- */

struct run {
	struct fold *f;
	bool foldable[NRELS];
	uint32_t fold_index[NRELS]; /* model relation -> fold index */
	int model_rel[NRELS];       /* fold index -> model relation */
	bool ok;                    /* the target has not failed */
	int conflicts, alones, flushes;
	size_t emitted;
};

static struct plan_relation prel_of(int rel)
{
	return (struct plan_relation){ .rel = rel ? &rel_u : &rel_t, .key = key_mask };
}

static void register_relations(struct run *r)
{
	for (int i = 0; i < NRELS; i++) {
		struct plan_relation pr = prel_of(i);
		int idx = fold_relation(r->f, &pr, r->foldable[i]);
		CHECK(idx == i);
		if (idx < 0)
			idx = 0;
		r->fold_index[i] = (uint32_t)idx;
		r->model_rel[idx] = i;
	}
}

static int op_rank(uint8_t op)
{
	return op == ENV_DELETE ? 0 : op == ENV_UPDATE ? 1 : 2;
}

/* The emission's shape (apply_fold.h): each relation's changes together;
 * a foldable one's deletes, then updates, then inserts, no key twice in
 * a group, no key both updated and deleted or inserted; deletes carry the
 * key only. */
static void check_shape(const struct run *r)
{
	size_t n = fold_count(r->f);
	bool done[NRELS] = { false };
	int cur = -1, rank = 0;
	bool seen[NRELS][3][NKEYS];
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < n; i++) {
		const struct fold_change *fc = fold_get(r->f, i);
		CHECK(fc != NULL);
		if (!fc)
			return;
		CHECK(fc->change.relation < NRELS);
		if (fc->change.relation >= NRELS)
			return;
		int rel = r->model_rel[fc->change.relation];
		if (rel != cur) {
			CHECK(!done[rel]);
			if (cur >= 0)
				done[cur] = true;
			cur = rel;
			rank = 0;
		}
		if (!r->foldable[rel])
			continue;
		int rk = op_rank(fc->change.op);
		CHECK(rk >= rank);
		rank = rk;
		const struct env_tuple *t = fc->change.op == ENV_DELETE ? &fc->change.old_tuple : &fc->change.new_tuple;
		CHECK(t->n == 3);
		int k = key_of(&t->values[0]);
		CHECK(k >= 0);
		if (k < 0)
			continue;
		CHECK(!seen[rel][rk][k]);
		seen[rel][rk][k] = true;
		if (fc->change.op == ENV_DELETE) {
			CHECK(fc->change.old_kind == 'K');
			CHECK(t->values[1].kind == ENV_NULL && t->values[2].kind == ENV_NULL);
		} else {
			CHECK(fc->change.old_kind == 0);
		}
		if (fc->change.op == ENV_UPDATE)
			CHECK(!seen[rel][0][k]);
		if (fc->change.op == ENV_INSERT)
			CHECK(!seen[rel][1][k]);
	}
	CHECK(fold_get(r->f, n) == NULL);
}

static void flush(struct run *r, struct mtable *target)
{
	r->flushes++;
	check_shape(r);
	size_t n = fold_count(r->f);
	for (size_t i = 0; i < n && r->ok; i++) {
		const struct fold_change *fc = fold_get(r->f, i);
		r->emitted++;
		if (!model_apply(target, r->model_rel[fc->change.relation], &fc->change))
			r->ok = false;
	}
	fold_reset(r->f);
	register_relations(r);
}

/* Runs ops through the fold onto target; false when the target failed. */
static bool run_folded(struct run *r, struct mtable *target, const struct op *ops, int n)
{
	r->ok = true;
	fold_reset(r->f);
	register_relations(r);
	for (int i = 0; i < n && r->ok; i++) {
		struct built b;
		build_change(&b, &ops[i], r->fold_index[ops[i].rel]);
		enum fold_result res = fold_add(r->f, r->fold_index[ops[i].rel], &b.c, (uint64_t)ops[i].step);
		scribble(&b);
		if (res == FOLD_CONFLICT) {
			r->conflicts++;
			flush(r, target);
			if (!r->ok)
				break;
			build_change(&b, &ops[i], r->fold_index[ops[i].rel]);
			res = fold_add(r->f, r->fold_index[ops[i].rel], &b.c, (uint64_t)ops[i].step);
			scribble(&b);
			CHECK(res != FOLD_CONFLICT); /* on an empty segment */
		}
		if (res == FOLD_ALONE) {
			r->alones++;
			flush(r, target);
			if (!r->ok)
				break;
			build_change(&b, &ops[i], r->fold_index[ops[i].rel]);
			r->emitted++;
			if (!model_apply(target, ops[i].rel, &b.c))
				r->ok = false;
		}
	}
	if (r->ok)
		flush(r, target);
	return r->ok;
}

/* The original sequence; *fail_at = the failing step (or n). */
static bool run_plain(struct mtable *t, const struct op *ops, int n, int *fail_at)
{
	for (int i = 0; i < n; i++) {
		struct built b;
		build_change(&b, &ops[i], 0);
		if (!model_apply(t, ops[i].rel, &b.c)) {
			*fail_at = i;
			return false;
		}
	}
	*fail_at = n;
	return true;
}

/* The documented loss (apply_fold.h): the original failed putting a row
 * onto a key the table already held - an insert of it, or a key change
 * onto it - and the row leaves that key again later in the sequence (a
 * delete of it, or a key change away from it). */
static bool insert_check_lost(const struct mtable *before_fail, const struct op *ops, int n, int fail_at)
{
	const struct op *o = &ops[fail_at];
	int onto;
	if (o->kind == OP_INSERT)
		onto = o->key;
	else if (o->kind == OP_MOVE || o->kind == OP_MOVE_T)
		onto = o->key2;
	else
		return false;
	if (!before_fail->rows[o->rel][onto].present)
		return false;
	for (int j = fail_at + 1; j < n; j++)
		if (ops[j].rel == o->rel && ops[j].key == onto &&
		    (ops[j].kind == OP_DELETE || ops[j].kind == OP_MOVE || ops[j].kind == OP_MOVE_T))
			return true;
	return false;
}

struct tally {
	int sequences, both_ok, both_failed, exceptions, conflicts, alones;
};

/* One sequence from one initial table: the property. */
static void check_sequence(struct run *r, const struct mtable *init, const struct op *ops, int n, struct tally *tl)
{
	struct mtable plain = *init, folded = *init;
	int fail_at;
	bool plain_ok = run_plain(&plain, ops, n, &fail_at);
	bool fold_ok = run_folded(r, &folded, ops, n);
	tl->sequences++;
	bool good;
	if (plain_ok) {
		good = fold_ok && tables_equal(&plain, &folded);
		tl->both_ok += good;
	} else if (!fold_ok) {
		good = true;
		tl->both_failed++;
	} else {
		/* plain holds the table just before the failing step */
		good = insert_check_lost(&plain, ops, n, fail_at);
		tl->exceptions += good;
	}
	CHECK(good);
	if (!good) {
		fprintf(stderr, "  sequence:");
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %c%s%d%s", op_letter[ops[i].kind], ops[i].rel ? "u" : "", ops[i].key + 1,
				ops[i].kind == OP_MOVE || ops[i].kind == OP_MOVE_T ? (ops[i].key2 ? ">2" : ">1") : "");
		fprintf(stderr, " (initial rows:");
		for (int rr = 0; rr < NRELS; rr++)
			for (int k = 0; k < NKEYS; k++)
				if (init->rows[rr][k].present)
					fprintf(stderr, " %s%d", rr ? "u" : "", k + 1);
		fprintf(stderr, "; plain %s, folded %s)\n", plain_ok ? "ok" : "failed", fold_ok ? "ok" : "failed");
	}
}

static void preexisting(struct mtable *t, int rel, int key)
{
	t->rows[rel][key].present = true;
	snprintf(t->rows[rel][key].a, 24, "pa%d", key + 1);
	snprintf(t->rows[rel][key].b, 24, "pb%d", key + 1);
}

/* ---- every pair and triple on one key, and key changes across two ---- */

static void test_exhaustive(void)
{
	/* the letters: each op on key 1 or key 2 (a key change goes to the
	 * other key); the insert/update/update-with-TOAST/key-change/delete
	 * set, plus the key change with TOAST */
	static const int kinds[] = { OP_INSERT, OP_UPDATE, OP_UPDATE_T, OP_MOVE, OP_MOVE_T, OP_DELETE };
	enum { NK = sizeof kinds / sizeof *kinds, NL = NK * 2 };
	struct op letters[NL];
	for (int i = 0; i < NL; i++)
		letters[i] = (struct op){ .kind = kinds[i % NK], .rel = 0, .key = i / NK, .key2 = 1 - i / NK };
	struct run r = { .f = fold_new(), .foldable = { true, true } };
	struct tally tl = { 0 };
	int one_key = 0;
	for (int len = 1; len <= 3; len++) {
		int total = 1;
		for (int i = 0; i < len; i++)
			total *= NL;
		for (int code = 0; code < total; code++) {
			struct op ops[3];
			bool single = true;
			for (int i = 0, c = code; i < len; i++, c /= NL) {
				ops[i] = letters[c % NL];
				ops[i].step = i + 1;
				if (ops[i].key != 0 || ops[i].kind == OP_MOVE || ops[i].kind == OP_MOVE_T)
					single = false;
			}
			one_key += single;
			for (int init = 0; init < 4; init++) {
				struct mtable t;
				memset(&t, 0, sizeof t);
				if (init & 1)
					preexisting(&t, 0, 0);
				if (init & 2)
					preexisting(&t, 0, 1);
				check_sequence(&r, &t, ops, len, &tl);
			}
		}
	}
	/* every one-key sequence of length 1..3 over 4 ops kinds that stay on
	 * key 1: 4 + 16 + 64 */
	CHECK(one_key == 4 + 16 + 64);
	CHECK(tl.sequences == 4 * (NL + NL * NL + NL * NL * NL));
	CHECK(tl.both_ok > 0 && tl.both_failed > 0 && tl.exceptions > 0);
	CHECK(r.conflicts > 0 && r.alones > 0);
	printf("exhaustive: %d sequences: %d equal, %d both failed, %d lost insert checks; %d conflicts, %d alone\n",
	       tl.sequences, tl.both_ok, tl.both_failed, tl.exceptions, r.conflicts, r.alones);
	fold_free(r.f);
}

/* ---- the rules, one by one: emission rendered as text ---- */

/* "I1(a2,b1) D2" ...: op, key, and for I/U the a and b values (u =
 * unchanged TOAST). */
static void render(const struct fold *f, char *out, size_t outlen)
{
	size_t len = 0;
	out[0] = '\0';
	for (size_t i = 0; i < fold_count(f); i++) {
		const struct fold_change *fc = fold_get(f, i);
		const struct env_change *c = &fc->change;
		const struct env_tuple *t = c->op == ENV_DELETE ? &c->old_tuple : &c->new_tuple;
		char vals[64] = "";
		if (c->op != ENV_DELETE) {
			char a[24], b[24];
			if (t->values[1].kind == ENV_UNCHANGED_TOAST)
				snprintf(a, sizeof a, "u");
			else
				set_col(a, &t->values[1]);
			if (t->values[2].kind == ENV_UNCHANGED_TOAST)
				snprintf(b, sizeof b, "u");
			else
				set_col(b, &t->values[2]);
			snprintf(vals, sizeof vals, "(%s,%s)", a, b);
		}
		int w = snprintf(out + len, outlen - len, "%s%s%c%d%s", len ? " " : "", c->relation ? "u" : "", c->op,
				 key_of(&t->values[0]) + 1, vals);
		if (w < 0 || (size_t)w >= outlen - len)
			return;
		len += (size_t)w;
	}
}

/* ops: "I1 U1 T1 M1>2 N1>2 D1 K1", "uI1" for relation u; results: one
 * letter per op (o ok, c conflict, a alone); then the emission. */
static void expect_fold(const char *ops, const char *results, const char *emission)
{
	struct fold *f = fold_new();
	struct plan_relation pt = prel_of(0), pu = prel_of(1);
	CHECK(fold_relation(f, &pt, true) == 0);
	CHECK(fold_relation(f, &pu, true) == 1);
	char got_results[32] = "";
	size_t nres = 0;
	int step = 0;
	for (const char *p = ops; *p;) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		struct op o = { .step = ++step };
		if (*p == 'u') {
			o.rel = 1;
			p++;
		}
		const char *l = memchr(op_letter, *p, sizeof op_letter);
		CHECK(l != NULL);
		if (!l)
			break;
		o.kind = (int)(l - op_letter);
		o.key = p[1] - '1';
		p += 2;
		if (*p == '>') {
			o.key2 = p[1] - '1';
			p += 2;
		}
		struct built b;
		build_change(&b, &o, (uint32_t)o.rel);
		enum fold_result res = fold_add(f, (uint32_t)o.rel, &b.c, (uint64_t)o.step);
		scribble(&b);
		if (nres + 1 < sizeof got_results)
			got_results[nres++] = res == FOLD_OK ? 'o' : res == FOLD_CONFLICT ? 'c' : 'a';
		got_results[nres] = '\0';
	}
	char got[256];
	render(f, got, sizeof got);
	if (strcmp(got_results, results) != 0 || strcmp(got, emission) != 0)
		fprintf(stderr, "  for \"%s\":\n", ops);
	CHECK_STR(got_results, results);
	CHECK_STR(got, emission);
	fold_free(f);
}

static void test_rules(void)
{
	/* insert */
	expect_fold("I1", "o", "I1(a1,b1)");
	expect_fold("I1 I1", "oc", "I1(a1,b1)");
	expect_fold("U1 I1", "oc", "U1(a1,b1)");
	expect_fold("D1 I1", "oo", "D1 I1(a2,b2)");
	expect_fold("D1 I1 I1", "ooc", "D1 I1(a2,b2)");
	/* update, key unchanged */
	expect_fold("U1", "o", "U1(a1,b1)");
	expect_fold("T1", "o", "U1(a1,u)");
	expect_fold("I1 U1", "oo", "I1(a2,b2)");
	expect_fold("I1 T1", "oo", "I1(a2,b1)");   /* the insert's b stays: never an insert with TOAST */
	expect_fold("U1 U1", "oo", "U1(a2,b2)");
	expect_fold("T1 T1", "oo", "U1(a2,u)");
	expect_fold("U1 T1", "oo", "U1(a2,b1)");
	expect_fold("T1 U1", "oo", "U1(a2,b2)");
	expect_fold("D1 I1 T1", "ooo", "D1 I1(a3,b2)");
	expect_fold("D1 U1", "oc", "D1");
	expect_fold("K1", "o", "U1(a1,b1)");      /* the old key sent, the same: no key change */
	expect_fold("I1 K1", "oo", "I1(a2,b2)");
	/* delete */
	expect_fold("D1", "o", "D1");
	expect_fold("I1 D1", "oo", "");
	expect_fold("I1 U1 D1", "ooo", "");
	expect_fold("U1 D1", "oo", "D1");
	expect_fold("T1 D1", "oo", "D1");
	expect_fold("D1 I1 D1", "ooo", "D1");
	expect_fold("D1 D1", "oc", "D1");
	expect_fold("I1 D1 I1", "ooo", "I1(a3,b3)");
	/* key changes: a row the segment inserted moves */
	expect_fold("M1>2", "a", "");
	expect_fold("U1 M1>2", "oa", "U1(a1,b1)");
	expect_fold("D1 M1>2", "oa", "D1");
	expect_fold("I1 M1>2", "oo", "I2(a2,b2)");
	expect_fold("I1 N1>2", "oo", "I2(a2,b1)");
	expect_fold("I1 T1 N1>2", "ooo", "I2(a3,b1)");
	expect_fold("D2 I1 M1>2", "ooo", "D2 I2(a3,b3)");
	expect_fold("D1 I1 M1>2", "ooo", "D1 I2(a3,b3)");
	expect_fold("D1 I1 M1>2 I1", "oooo", "D1 I1(a4,b4) I2(a3,b3)");
	expect_fold("I1 I2 M1>2", "ooc", "I1(a1,b1) I2(a2,b2)");
	expect_fold("I1 U2 M1>2", "ooc", "U2(a2,b2) I1(a1,b1)");
	expect_fold("I1 D2 I2 M1>2", "oooc", "D2 I1(a1,b1) I2(a3,b3)");
	expect_fold("I1 M1>2 M2>1", "ooo", "I1(a3,b3)");
	expect_fold("I1 M1>2 D2", "ooo", "");
	expect_fold("I1 M1>2 U2 I1", "oooo", "I1(a4,b4) I2(a3,b3)");
	/* relations are independent: the same key in another table */
	expect_fold("I1 uD1 uI1 D1", "oooo", "uD1 uI1(a3,b3)");
}

/* A key column that is unchanged TOAST, and malformed changes: alone. */
static void test_alone_cases(void)
{
	struct fold *f = fold_new();
	struct plan_relation pt = prel_of(0);
	CHECK(fold_relation(f, &pt, true) == 0);
	struct built b;
	struct op o = { .kind = OP_UPDATE, .key = 0, .step = 1 };
	build_change(&b, &o, 0);
	b.newv[0] = (struct env_value){ .kind = ENV_UNCHANGED_TOAST };
	CHECK(fold_add(f, 0, &b.c, 1) == FOLD_ALONE);
	/* the key change to a TOAST key of an inserted row */
	o = (struct op){ .kind = OP_INSERT, .key = 0, .step = 2 };
	build_change(&b, &o, 0);
	CHECK(fold_add(f, 0, &b.c, 2) == FOLD_OK);
	o = (struct op){ .kind = OP_MOVE, .key = 0, .key2 = 1, .step = 3 };
	build_change(&b, &o, 0);
	b.newv[0] = (struct env_value){ .kind = ENV_UNCHANGED_TOAST };
	CHECK(fold_add(f, 0, &b.c, 3) == FOLD_ALONE);
	/* an insert with TOAST */
	o = (struct op){ .kind = OP_INSERT, .key = 1, .step = 4 };
	build_change(&b, &o, 0);
	b.newv[2] = (struct env_value){ .kind = ENV_UNCHANGED_TOAST };
	CHECK(fold_add(f, 0, &b.c, 4) == FOLD_ALONE);
	/* a tuple of the wrong width, an unknown relation, a truncate */
	o = (struct op){ .kind = OP_UPDATE, .key = 1, .step = 5 };
	build_change(&b, &o, 0);
	b.c.new_tuple.n = 2;
	CHECK(fold_add(f, 0, &b.c, 5) == FOLD_ALONE);
	build_change(&b, &o, 0);
	CHECK(fold_add(f, 1, &b.c, 5) == FOLD_ALONE);
	struct env_change trunc = { .op = ENV_TRUNCATE };
	CHECK(fold_add(f, 0, &trunc, 6) == FOLD_ALONE);
	/* a delete without an old tuple */
	o = (struct op){ .kind = OP_DELETE, .key = 1, .step = 7 };
	build_change(&b, &o, 0);
	b.c.old_kind = 0;
	CHECK(fold_add(f, 0, &b.c, 7) == FOLD_ALONE);
	/* none of them changed the segment: the insert of key 1 alone */
	CHECK(fold_pending(f) == 1);
	CHECK(fold_count(f) == 1);
	const struct fold_change *fc = fold_get(f, 0);
	CHECK(fc && fc->change.op == ENV_INSERT && key_of(&fc->change.new_tuple.values[0]) == 0 && fc->tag == 2);
	/* a conflict changes nothing either */
	o = (struct op){ .kind = OP_INSERT, .key = 0, .step = 8 };
	build_change(&b, &o, 0);
	CHECK(fold_add(f, 0, &b.c, 8) == FOLD_CONFLICT);
	CHECK(fold_pending(f) == 1 && fold_count(f) == 1);
	fold_free(f);
}

/* The documented exception, shown outright: an insert over a row the
 * target holds, folded away by a later delete (or moved away), never
 * reaches the target, which keeps its row. */
static void test_insert_check_lost(void)
{
	struct run r = { .f = fold_new(), .foldable = { true, true } };
	struct mtable init;
	memset(&init, 0, sizeof init);
	preexisting(&init, 0, 0);
	struct op seq1[] = { { OP_INSERT, 0, 0, 0, 1 }, { OP_DELETE, 0, 0, 0, 2 } };
	struct mtable plain = init, folded = init;
	int fail_at;
	CHECK(!run_plain(&plain, seq1, 2, &fail_at) && fail_at == 0);
	CHECK(run_folded(&r, &folded, seq1, 2));
	CHECK(r.emitted == 0);
	CHECK(tables_equal(&folded, &init)); /* the row the target held is untouched */
	CHECK(insert_check_lost(&plain, seq1, 2, fail_at));

	struct op seq2[] = { { OP_INSERT, 0, 0, 0, 1 }, { OP_MOVE, 0, 0, 1, 2 } };
	plain = init;
	folded = init;
	r.emitted = 0;
	CHECK(!run_plain(&plain, seq2, 2, &fail_at) && fail_at == 0);
	CHECK(run_folded(&r, &folded, seq2, 2));
	CHECK(r.emitted == 1);
	CHECK(folded.rows[0][0].present && strcmp(folded.rows[0][0].a, "pa1") == 0);
	CHECK(folded.rows[0][1].present && strcmp(folded.rows[0][1].a, "a2") == 0);
	CHECK(insert_check_lost(&plain, seq2, 2, fail_at));

	/* but a later insert of the key brings the check back */
	struct op seq3[] = { { OP_INSERT, 0, 0, 0, 1 }, { OP_DELETE, 0, 0, 0, 2 }, { OP_INSERT, 0, 0, 0, 3 } };
	folded = init;
	CHECK(!run_folded(&r, &folded, seq3, 3));
	fold_free(r.f);
}

/* ---- ordering across keys and relations ---- */

static void test_order(void)
{
	/* keys in the order they first appeared, per group */
	expect_fold("U1 I2 D3 U3", "oooc", "D3 U1(a1,b1) I2(a2,b2)");
	expect_fold("I3 U2 D1 I1 U3 D2", "oooooo", "D2 D1 I3(a5,b5) I1(a4,b4)");
	/* a key keeps its first place when it goes back to absent and comes again */
	expect_fold("I1 I2 D1 I1", "oooo", "I1(a4,b4) I2(a2,b2)");
	/* relations in the order of their first change, interleaved */
	expect_fold("uI1 U1 uD2 I2 uU3 D3", "oooooo", "uD2 uU3(a5,b5) uI1(a1,b1) D3 U1(a2,b2) I2(a4,b4)");
	expect_fold("U1 uU1 U2 uU2", "oooo", "U1(a1,b1) U2(a3,b3) uU1(a2,b2) uU2(a4,b4)");
}

/* An unfoldable relation: kept verbatim, FULL old tuples too. */
static void test_unfoldable(void)
{
	struct fold *f = fold_new();
	static const struct env_column cols_k[2] = { { "x", 1, 25, -1, false }, { "y", 1, 25, -1, false } };
	struct env_relation rel_k = { 102, "public", "keyless", 6, 7, 'f', 2, (struct env_column *)cols_k };
	struct plan_relation pk = { .rel = &rel_k, .key = NULL };
	struct plan_relation pt = prel_of(0), pu = prel_of(1);
	CHECK(fold_relation(f, &pt, true) == 0);
	CHECK(fold_relation(f, &pk, true) == 1); /* no key: kept as given even when asked to fold */
	CHECK(fold_relation(f, &pu, false) == 2);
	/* keyless: I, U (old O with a TOAST value in the new tuple), U, D (old O) */
	struct env_value iv[2] = { { ENV_TEXT, 1, (const uint8_t *)"p" }, { ENV_NULL, 0, NULL } };
	struct env_value uo[2] = { { ENV_TEXT, 1, (const uint8_t *)"p" }, { ENV_NULL, 0, NULL } };
	struct env_value un[2] = { { ENV_TEXT, 2, (const uint8_t *)"pq" }, { ENV_UNCHANGED_TOAST, 0, NULL } };
	struct env_value dv[2] = { { ENV_TEXT, 2, (const uint8_t *)"pq" }, { ENV_NULL, 0, NULL } };
	struct env_change ck[4] = {
		{ .op = ENV_INSERT, .new_tuple = { 2, iv } },
		{ .op = ENV_UPDATE, .old_kind = 'O', .old_tuple = { 2, uo }, .new_tuple = { 2, un } },
		{ .op = ENV_UPDATE, .old_kind = 'O', .old_tuple = { 2, uo }, .new_tuple = { 2, un } },
		{ .op = ENV_DELETE, .old_kind = 'O', .old_tuple = { 2, dv } },
	};
	/* interleaved with t (foldable) and u (unfoldable, keyed) */
	struct op o;
	struct built b;
	CHECK(fold_add(f, 1, &ck[0], 10) == FOLD_OK);
	o = (struct op){ .kind = OP_INSERT, .key = 0, .step = 1 };
	build_change(&b, &o, 0);
	CHECK(fold_add(f, 0, &b.c, 11) == FOLD_OK);
	o = (struct op){ .kind = OP_INSERT, .key = 0, .step = 2 };
	build_change(&b, &o, 2);
	CHECK(fold_add(f, 2, &b.c, 12) == FOLD_OK);
	CHECK(fold_add(f, 1, &ck[1], 13) == FOLD_OK);
	o = (struct op){ .kind = OP_UPDATE, .key = 0, .step = 3 };
	build_change(&b, &o, 2);
	CHECK(fold_add(f, 2, &b.c, 14) == FOLD_OK);
	o = (struct op){ .kind = OP_INSERT, .key = 0, .step = 4 };
	build_change(&b, &o, 2);
	CHECK(fold_add(f, 2, &b.c, 15) == FOLD_OK); /* a duplicate: kept, the target says so */
	CHECK(fold_add(f, 1, &ck[2], 16) == FOLD_OK);
	o = (struct op){ .kind = OP_DELETE, .key = 0, .step = 5 };
	build_change(&b, &o, 2);
	CHECK(fold_add(f, 2, &b.c, 17) == FOLD_OK);
	CHECK(fold_add(f, 1, &ck[3], 18) == FOLD_OK);
	o = (struct op){ .kind = OP_DELETE, .key = 0, .step = 6 };
	build_change(&b, &o, 0);
	CHECK(fold_add(f, 0, &b.c, 19) == FOLD_OK);
	/* overwrite the originals: the fold holds copies */
	iv[0].data = (const uint8_t *)"Z";
	uo[0].kind = un[1].kind = dv[0].kind = ENV_NULL;
	ck[1].old_kind = 0;
	/* keyless first (its first change came first), then u; t folded to nothing */
	CHECK(fold_count(f) == 8);
	const struct fold_change *c[8];
	for (size_t i = 0; i < 8; i++)
		c[i] = fold_get(f, i);
	CHECK(c[0]->change.op == 'I' && c[0]->change.relation == 1 && c[0]->tag == 10);
	CHECK(c[0]->change.new_tuple.n == 2 && c[0]->change.new_tuple.values[0].kind == ENV_TEXT &&
	      c[0]->change.new_tuple.values[0].len == 1 && c[0]->change.new_tuple.values[0].data[0] == 'p' &&
	      c[0]->change.new_tuple.values[1].kind == ENV_NULL);
	for (int i = 1; i <= 2; i++) {
		CHECK(c[i]->change.op == 'U' && c[i]->change.relation == 1 && c[i]->change.old_kind == 'O');
		CHECK(c[i]->change.old_tuple.n == 2 && c[i]->change.old_tuple.values[0].kind == ENV_TEXT &&
		      c[i]->change.old_tuple.values[0].data[0] == 'p' && c[i]->change.old_tuple.values[1].kind == ENV_NULL);
		CHECK(c[i]->change.new_tuple.values[0].len == 2 && memcmp(c[i]->change.new_tuple.values[0].data, "pq", 2) == 0);
		CHECK(c[i]->change.new_tuple.values[1].kind == ENV_UNCHANGED_TOAST);
	}
	CHECK(c[1]->tag == 13 && c[2]->tag == 16);
	CHECK(c[3]->change.op == 'D' && c[3]->change.old_kind == 'O' && c[3]->change.old_tuple.values[0].kind == ENV_TEXT &&
	      c[3]->tag == 18);
	static const char u_ops[] = "IUID";
	for (int i = 0; i < 4; i++) {
		CHECK(c[4 + i]->change.op == u_ops[i] && c[4 + i]->change.relation == 2);
		CHECK(c[4 + i]->tag == (uint64_t)(12 + (i == 0 ? 0 : i == 1 ? 2 : i == 2 ? 3 : 5)));
	}
	CHECK(c[5]->change.old_kind == 0 && c[5]->change.new_tuple.values[1].len == 2 &&
	      memcmp(c[5]->change.new_tuple.values[1].data, "a3", 2) == 0);
	CHECK(c[7]->change.old_kind == 'K' && key_of(&c[7]->change.old_tuple.values[0]) == 0);
	uint32_t n;
	const struct plan_relation *rels = fold_relations(f, &n);
	CHECK(n == 3 && rels[1].key == NULL && rels[1].rel->replident == 'f' && rels[0].key && rels[0].key[0]);
	struct fold_stats st = fold_stats(f);
	CHECK(st.received == 10 && st.emitted == 8);
	fold_free(f);
}

/* ---- descriptors ---- */

static void test_relations(void)
{
	struct fold *f = fold_new();
	struct env_column cols[3] = { { "id", 2, 23, -1, true }, { "a", 1, 25, -1, false }, { "b", 1, 25, -1, false } };
	char schema[] = "public", name[] = "t";
	struct env_relation r = { 100, schema, name, 6, 1, 'd', 3, cols };
	bool key[3] = { true, false, false }, always[3] = { false, true, false };
	const char *types[3] = { "integer", "text", NULL };
	struct plan_relation pr = { .rel = &r, .key = key, .identity_always = always, .partitioned = true,
				    .col_types = types };
	CHECK(fold_relation(f, &pr, true) == 0);
	CHECK(fold_relation(f, &pr, true) == 0);
	/* an equal copy elsewhere in memory is the same relation */
	struct env_column cols2[3];
	memcpy(cols2, cols, sizeof cols);
	struct env_relation r2 = r;
	r2.columns = cols2;
	bool key2[3] = { true, false, false }, always2[3] = { false, true, false };
	char integer[] = "integer";
	const char *types2[3] = { integer, "text", NULL };
	struct plan_relation pr2 = { .rel = &r2, .key = key2, .identity_always = always2, .partitioned = true,
				     .col_types = types2 };
	CHECK(fold_relation(f, &pr2, true) == 0);
	/* another relation */
	struct plan_relation pu = prel_of(1);
	CHECK(fold_relation(f, &pu, true) == 1);
	/* each difference: -1 */
#define DIFFERS(stmt, undo)                                  \
	do {                                                 \
		stmt;                                        \
		CHECK(fold_relation(f, &pr2, true) == -1);   \
		undo;                                        \
		CHECK(fold_relation(f, &pr2, true) == 0);    \
	} while (0)
	DIFFERS(r2.oid = 999, r2.oid = 100);                     /* same name, other oid */
	DIFFERS(r2.name = "x", r2.name = name);                   /* same oid, other name */
	DIFFERS((r2.name = "tt", r2.name_len = 2), (r2.name = name, r2.name_len = 1));
	DIFFERS(r2.schema = "other", r2.schema = schema);
	DIFFERS(r2.replident = 'f', r2.replident = 'd');
	DIFFERS(cols2[1].type_oid = 1043, cols2[1].type_oid = 25);
	DIFFERS(cols2[1].typmod = 68, cols2[1].typmod = -1);
	DIFFERS(cols2[2].name = "c", cols2[2].name = "b");
	DIFFERS(cols2[2].key = true, cols2[2].key = false);
	DIFFERS(r2.n_columns = 2, r2.n_columns = 3);
	DIFFERS(key2[1] = true, key2[1] = false);
	DIFFERS(pr2.key = NULL, pr2.key = key2);
	DIFFERS(always2[0] = true, always2[0] = false);
	DIFFERS(pr2.identity_always = NULL, pr2.identity_always = always2);
	DIFFERS(pr2.partitioned = false, pr2.partitioned = true);
	DIFFERS(types2[2] = "text", types2[2] = NULL);
	DIFFERS(integer[0] = 'I', integer[0] = 'i');
	DIFFERS(pr2.col_types = NULL, pr2.col_types = types2);
	CHECK(fold_relation(f, &pr2, false) == -1); /* asked unfolded now */
	/* the copies are the fold's own */
	memset(schema, 'X', sizeof schema - 1);
	name[0] = 'X';
	cols[0].name = "zz";
	key[0] = false;
	always[1] = false;
	integer[0] = 'X';
	uint32_t n;
	const struct plan_relation *rels = fold_relations(f, &n);
	CHECK(n == 2);
	CHECK(rels[0].rel->oid == 100 && rels[0].rel->schema_len == 6 && memcmp(rels[0].rel->schema, "public", 6) == 0);
	CHECK(rels[0].rel->name_len == 1 && rels[0].rel->name[0] == 't');
	CHECK(rels[0].rel->n_columns == 3 && rels[0].rel->columns[0].name_len == 2 &&
	      memcmp(rels[0].rel->columns[0].name, "id", 2) == 0 && rels[0].rel->columns[0].key);
	CHECK(rels[0].key && rels[0].key[0] && !rels[0].key[1]);
	CHECK(rels[0].identity_always && rels[0].identity_always[1]);
	CHECK(rels[0].partitioned);
	CHECK(rels[0].col_types && strcmp(rels[0].col_types[0], "integer") == 0 && rels[0].col_types[2] == NULL);
	CHECK(rels[0].col_types[0] != types[0] && rels[0].rel->columns != cols);
	CHECK(rels[1].rel->oid == 101);
	/* after a reset the changed descriptor registers */
	fold_reset(f);
	rels = fold_relations(f, &n);
	CHECK(n == 0);
	r2.oid = 999;
	CHECK(fold_relation(f, &pr2, true) == 0);
	rels = fold_relations(f, &n);
	CHECK(n == 1 && rels[0].rel->oid == 999);
	/* the same relation registered foldable once and now asked for it
	 * unfolded (apply.compaction changed): -1, so the segment flushes */
	CHECK(fold_relation(f, &pr2, false) == -1);
	fold_free(f);
}

/* ---- a FULL table with a known key: folded on the old tuple's key ---- */

static void test_full_with_key(void)
{
	struct fold *f = fold_new();
	struct env_relation rf = rel_t;
	rf.replident = 'f';
	struct plan_relation pr = { .rel = &rf, .key = key_mask };
	CHECK(fold_relation(f, &pr, true) == 0);
	struct env_value old1[3] = { { ENV_TEXT, 1, (const uint8_t *)"1" }, { ENV_TEXT, 2, (const uint8_t *)"a0" },
				     { ENV_TEXT, 2, (const uint8_t *)"b0" } };
	struct env_value new1[3] = { { ENV_TEXT, 1, (const uint8_t *)"1" }, { ENV_TEXT, 2, (const uint8_t *)"a1" },
				     { ENV_UNCHANGED_TOAST, 0, NULL } };
	struct env_value new2[3] = { { ENV_TEXT, 1, (const uint8_t *)"1" }, { ENV_TEXT, 2, (const uint8_t *)"a2" },
				     { ENV_NULL, 0, NULL } };
	struct env_change u1 = { .op = ENV_UPDATE, .old_kind = 'O', .old_tuple = { 3, old1 }, .new_tuple = { 3, new1 } };
	struct env_change u2 = { .op = ENV_UPDATE, .old_kind = 'O', .old_tuple = { 3, new1 }, .new_tuple = { 3, new2 } };
	CHECK(fold_add(f, 0, &u1, 1) == FOLD_OK);
	CHECK(fold_add(f, 0, &u2, 2) == FOLD_OK);
	CHECK(fold_count(f) == 1);
	const struct fold_change *c = fold_get(f, 0);
	CHECK(c->change.op == 'U' && c->change.old_kind == 0 && c->tag == 2);
	CHECK(c->change.new_tuple.values[0].kind == ENV_TEXT && c->change.new_tuple.values[0].data[0] == '1');
	CHECK(c->change.new_tuple.values[1].len == 2 && memcmp(c->change.new_tuple.values[1].data, "a2", 2) == 0);
	CHECK(c->change.new_tuple.values[2].kind == ENV_NULL);
	/* the old tuple's non-key columns differ: still the same key; a
	 * key change of a row the segment did not insert: alone */
	struct env_value new3[3] = { { ENV_TEXT, 1, (const uint8_t *)"2" }, { ENV_TEXT, 2, (const uint8_t *)"a3" },
				     { ENV_NULL, 0, NULL } };
	struct env_change u3 = { .op = ENV_UPDATE, .old_kind = 'O', .old_tuple = { 3, new2 }, .new_tuple = { 3, new3 } };
	CHECK(fold_add(f, 0, &u3, 3) == FOLD_ALONE);
	struct env_change d = { .op = ENV_DELETE, .old_kind = 'O', .old_tuple = { 3, new2 } };
	CHECK(fold_add(f, 0, &d, 4) == FOLD_OK);
	CHECK(fold_count(f) == 1);
	c = fold_get(f, 0);
	CHECK(c->change.op == 'D' && c->change.old_kind == 'K' && c->tag == 4);
	CHECK(c->change.old_tuple.n == 3 && c->change.old_tuple.values[0].kind == ENV_TEXT &&
	      c->change.old_tuple.values[1].kind == ENV_NULL && c->change.old_tuple.values[2].kind == ENV_NULL);
	fold_free(f);
}

/* ---- tags and stats ---- */

static void test_tags_and_stats(void)
{
	struct fold *f = fold_new();
	struct plan_relation pt = prel_of(0);
	CHECK(fold_relation(f, &pt, true) == 0);
	struct built b;
	struct op o;
#define ADD(kind_, key_, key2_, tag_, want)                                           \
	do {                                                                          \
		o = (struct op){ .kind = kind_, .key = key_, .key2 = key2_, .step = tag_ }; \
		build_change(&b, &o, 0);                                              \
		CHECK(fold_add(f, 0, &b.c, tag_) == want);                            \
	} while (0)
	ADD(OP_INSERT, 0, 0, 10, FOLD_OK);
	ADD(OP_UPDATE, 0, 0, 11, FOLD_OK);
	ADD(OP_UPDATE_T, 0, 0, 12, FOLD_OK);
	ADD(OP_DELETE, 1, 0, 20, FOLD_OK);
	ADD(OP_INSERT, 1, 0, 21, FOLD_OK);
	ADD(OP_INSERT, 1, 0, 22, FOLD_CONFLICT);
	ADD(OP_MOVE, 2, 0, 23, FOLD_ALONE);
	CHECK(fold_pending(f) == 5);
	CHECK(fold_count(f) == 3);
	const struct fold_change *c = fold_get(f, 0);
	CHECK(c->change.op == 'D' && c->tag == 20);
	c = fold_get(f, 1);
	CHECK(c->change.op == 'I' && key_of(&c->change.new_tuple.values[0]) == 0 && c->tag == 12);
	c = fold_get(f, 2);
	CHECK(c->change.op == 'I' && key_of(&c->change.new_tuple.values[0]) == 1 && c->tag == 21);
	struct fold_stats st = fold_stats(f);
	CHECK(st.received == 5 && st.emitted == 3);
	fold_reset(f);
	CHECK(fold_pending(f) == 0 && fold_count(f) == 0);
	st = fold_stats(f);
	CHECK(st.received == 5 && st.emitted == 3);
	CHECK(fold_relation(f, &pt, true) == 0);
	ADD(OP_INSERT, 0, 0, 30, FOLD_OK);
	ADD(OP_DELETE, 0, 0, 31, FOLD_OK);
	ADD(OP_UPDATE, 2, 0, 32, FOLD_OK);
	ADD(OP_UPDATE, 2, 0, 33, FOLD_OK);
	st = fold_stats(f);
	CHECK(st.received == 9 && st.emitted == 4);
	/* a move: the row inserted at key 1 goes to key 2 */
	ADD(OP_INSERT, 0, 0, 34, FOLD_OK);
	ADD(OP_MOVE, 0, 1, 35, FOLD_OK);
	st = fold_stats(f);
	CHECK(st.received == 11 && st.emitted == 5);
	fold_reset(f);
	fold_reset(f); /* twice: nothing more counted */
	st = fold_stats(f);
	CHECK(st.received == 11 && st.emitted == 5);
	fold_free(f);
	fold_free(NULL);
#undef ADD
}

/* ---- big segments: growth of the hash tables and the arena ---- */

static void test_many_keys(void)
{
	struct fold *f = fold_new();
	struct env_column cols[2] = { { "id", 2, 23, -1, true }, { "v", 1, 25, -1, false } };
	struct env_relation r = { 200, "public", "big", 6, 3, 'd', 2, cols };
	static const bool key[2] = { true, false };
	struct plan_relation pr = { .rel = &r, .key = key };
	char big[20000];
	memset(big, 'v', sizeof big);
	for (int round = 0; round < 2; round++) {
		fold_reset(f);
		CHECK(fold_relation(f, &pr, true) == 0);
		enum { N = 5000 };
		bool all_ok = true;
		for (int i = 0; i < N; i++) {
			char id[16];
			snprintf(id, sizeof id, "%d", i);
			struct env_value v[2] = { { ENV_TEXT, (uint32_t)strlen(id), (const uint8_t *)id },
						  { ENV_TEXT, (uint32_t)(i % 7 == 0 ? sizeof big : 3), (const uint8_t *)big } };
			struct env_change c = { .op = i % 2 ? ENV_UPDATE : ENV_INSERT, .new_tuple = { 2, v } };
			all_ok &= fold_add(f, 0, &c, (uint64_t)i) == FOLD_OK;
		}
		/* every key updated again: merged, nothing new */
		for (int i = 0; i < N; i++) {
			char id[16], val[16];
			snprintf(id, sizeof id, "%d", i);
			snprintf(val, sizeof val, "x%d", i);
			struct env_value v[2] = { { ENV_TEXT, (uint32_t)strlen(id), (const uint8_t *)id },
						  { ENV_TEXT, (uint32_t)strlen(val), (const uint8_t *)val } };
			struct env_change c = { .op = ENV_UPDATE, .new_tuple = { 2, v } };
			all_ok &= fold_add(f, 0, &c, (uint64_t)(N + i)) == FOLD_OK;
		}
		CHECK(all_ok);
		CHECK(fold_count(f) == N);
		bool order_ok = true;
		for (int i = 0; i < N; i++) {
			/* updates (odd keys) first, then inserts (even keys), each ascending */
			int want = i < N / 2 ? 2 * i + 1 : 2 * (i - N / 2);
			const struct fold_change *c = fold_get(f, (size_t)i);
			char id[16], val[16];
			snprintf(id, sizeof id, "%d", want);
			snprintf(val, sizeof val, "x%d", want);
			const struct env_value *k = &c->change.new_tuple.values[0], *v = &c->change.new_tuple.values[1];
			order_ok &= c->change.op == (want % 2 ? 'U' : 'I') && k->len == strlen(id) &&
				    memcmp(k->data, id, k->len) == 0 && v->len == strlen(val) &&
				    memcmp(v->data, val, v->len) == 0 && c->tag == (uint64_t)(N + want);
		}
		CHECK(order_ok);
	}
	fold_free(f);
}

/* ---- memory: a large segment's allocations are not kept ---- */

/* n inserts of keys first..first+n-1 into relation 0 (value: vlen bytes) */
static void add_inserts(struct fold *f, const struct plan_relation *pr, int first, int n, size_t vlen)
{
	static char val[4096];
	memset(val, 'v', sizeof val);
	CHECK(fold_relation(f, pr, true) == 0);
	bool all_ok = true;
	for (int i = first; i < first + n; i++) {
		char id[16];
		snprintf(id, sizeof id, "%d", i);
		struct env_value v[2] = { { ENV_TEXT, (uint32_t)strlen(id), (const uint8_t *)id },
					  { ENV_TEXT, (uint32_t)vlen, (const uint8_t *)val } };
		struct env_change c = { .op = ENV_INSERT, .new_tuple = { 2, v } };
		all_ok &= fold_add(f, 0, &c, (uint64_t)i) == FOLD_OK;
	}
	CHECK(all_ok);
	CHECK(fold_count(f) == (size_t)n);
}

static void test_memory(void)
{
	struct fold *f = fold_new();
	struct env_column cols[2] = { { "id", 2, 23, -1, true }, { "v", 1, 25, -1, false } };
	struct env_relation r = { 300, "public", "mem", 3, 3, 'd', 2, cols };
	static const bool key[2] = { true, false };
	struct plan_relation pr = { .rel = &r, .key = key };
	/* a steady batch's segment: what it allocated is kept for the next */
	add_inserts(f, &pr, 0, 200, 100);
	size_t small = fold_held_bytes(f);
	CHECK(small > 0 && small <= FOLD_KEEP_BYTES);
	fold_reset(f);
	CHECK(fold_held_bytes(f) == small);
	add_inserts(f, &pr, 1000, 200, 100);
	CHECK(fold_held_bytes(f) == small); /* reused, nothing allocated again */
	fold_reset(f);
	CHECK(!fold_shrink(f)); /* small: kept even when idle */
	CHECK(fold_held_bytes(f) == small);
	/* a catch-up batch's segments: tens of megabytes, kept from one
	 * segment to the next, given back when the applier is idle */
	add_inserts(f, &pr, 0, 20000, 1000);
	size_t large = fold_held_bytes(f);
	CHECK(large > 20000 * 1000);
	CHECK(!fold_shrink(f)); /* never while the segment holds changes */
	CHECK(fold_held_bytes(f) == large);
	fold_reset(f);
	CHECK(fold_held_bytes(f) == large);
	add_inserts(f, &pr, 30000, 20000, 1000);
	CHECK(fold_held_bytes(f) == large); /* the next segment reuses it all */
	fold_reset(f);
	CHECK(fold_shrink(f));
	size_t after = fold_held_bytes(f);
	CHECK(after <= FOLD_KEEP_BYTES);
	CHECK(!fold_shrink(f));
	printf("memory: %zu bytes held by a steady segment, %zu by a large one, %zu after it shrank\n", small, large,
	       after);
	/* and the fold works as before */
	add_inserts(f, &pr, 5, 300, 10);
	CHECK(fold_get(f, 0)->change.op == ENV_INSERT && fold_get(f, 0)->tag == 5);
	fold_free(f);
}

/* ---- random sequences against the model ---- */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static void test_random(void)
{
	uint64_t seed = 20261202;
	struct run r = { .f = fold_new() };
	struct tally tl = { 0 };
	enum { SEQUENCES = 4000, MAXLEN = 16 };
	for (int s = 0; s < SEQUENCES; s++) {
		/* relation u unfoldable in one sequence of four */
		r.foldable[0] = true;
		r.foldable[1] = splitmix64(&seed) % 4 != 0;
		struct mtable init;
		memset(&init, 0, sizeof init);
		for (int rel = 0; rel < NRELS; rel++)
			for (int k = 0; k < NKEYS; k++)
				if (splitmix64(&seed) % 2)
					preexisting(&init, rel, k);
		int len = 1 + (int)(splitmix64(&seed) % MAXLEN);
		struct op ops[MAXLEN];
		for (int i = 0; i < len; i++) {
			ops[i].kind = (int)(splitmix64(&seed) % N_OP_KINDS);
			ops[i].rel = (int)(splitmix64(&seed) % NRELS);
			ops[i].key = (int)(splitmix64(&seed) % NKEYS);
			ops[i].key2 = (ops[i].key + 1 + (int)(splitmix64(&seed) % (NKEYS - 1))) % NKEYS;
			ops[i].step = i + 1;
		}
		check_sequence(&r, &init, ops, len, &tl);
	}
	CHECK(tl.sequences == SEQUENCES);
	CHECK(tl.both_ok > 0 && tl.both_failed > 0);
	CHECK(r.conflicts > 0 && r.alones > 0);
	printf("random: %d sequences: %d equal, %d both failed, %d lost insert checks; %d conflicts, %d alone\n",
	       tl.sequences, tl.both_ok, tl.both_failed, tl.exceptions, r.conflicts, r.alones);
	fold_free(r.f);
}

int main(void)
{
	test_rules();
	test_alone_cases();
	test_insert_check_lost();
	test_order();
	test_unfoldable();
	test_relations();
	test_full_with_key();
	test_tags_and_stats();
	test_many_keys();
	test_memory();
	test_exhaustive();
	test_random();
	return unit_done("apply_fold");
}

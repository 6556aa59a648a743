/*
 * apply_fold.c - batch compaction (apply_fold.h).
 *
 * Memory: everything the fold keeps (relation copies, keys, images) lives
 * in one arena of blocks that never move, so the views fold_get hands out
 * stay put while the segment grows; fold_reset rewinds the arena and keeps
 * its blocks, the per-relation hash tables and entry arrays for the next
 * segment (a backlog's large segments reuse them); fold_shrink, when the
 * applier is idle, frees them all if they hold more than FOLD_KEEP_BYTES
 * (keeping the largest segment ever seen for good is not wanted).  A
 * merge writes the new value into the arena and leaves the old bytes
 * behind: a segment's memory is bounded by the changes it received.
 */
#include "trellara/apply_fold.h"

#include "trellara/xalloc.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena ---- */

struct arena_block {
	struct arena_block *next;
	size_t cap, used;
	max_align_t data[]; /* cap bytes */
};

struct arena {
	struct arena_block *first, *cur; /* owned list; cur: where allocation goes on */
};

#define ARENA_BLOCK 65536

static void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
	if (n == 0)
		n = alignof(max_align_t);
	for (;;) {
		if (a->cur && a->cur->cap - a->cur->used >= n) {
			void *p = (unsigned char *)a->cur->data + a->cur->used;
			a->cur->used += n;
			return p;
		}
		if (a->cur && a->cur->next && a->cur->next->cap >= n) {
			a->cur = a->cur->next;
			a->cur->used = 0;
			continue;
		}
		size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
		struct arena_block *b = xmalloc(sizeof *b + cap);
		b->cap = cap;
		b->used = 0;
		if (a->cur) {
			b->next = a->cur->next;
			a->cur->next = b;
		} else {
			b->next = a->first;
			a->first = b;
		}
		a->cur = b;
	}
}

static void arena_rewind(struct arena *a)
{
	a->cur = a->first;
	if (a->cur)
		a->cur->used = 0;
}

static void arena_release(struct arena *a)
{
	while (a->first) {
		struct arena_block *next = a->first->next;
		free(a->first);
		a->first = next;
	}
	a->cur = NULL;
}

static void *arena_dup(struct arena *a, const void *src, size_t len)
{
	void *p = arena_alloc(a, len);
	if (len)
		memcpy(p, src, len);
	return p;
}

/* a NUL-terminated copy of len bytes */
static char *arena_strndup(struct arena *a, const char *s, size_t len)
{
	char *p = arena_alloc(a, len + 1);
	if (len)
		memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

/* ---- the segment ---- */

enum entry_state { ST_ABSENT, ST_INS, ST_UPD, ST_DEL, ST_DELINS };

/* How many statements a state emits. */
static unsigned state_weight(uint8_t s)
{
	return s == ST_ABSENT ? 0 : s == ST_DELINS ? 2 : 1;
}

struct fold_entry {
	uint8_t state;
	const uint8_t *key; /* arena: the encoded key */
	size_t key_len;
	uint64_t hash;
	struct env_value *keyvals; /* arena, n_columns: the key columns' values, NULL elsewhere (a D's old tuple) */
	struct env_value *image;   /* arena, n_columns: INS UPD DELINS; NULL otherwise */
	uint64_t tag;              /* the last change folded into the image */
	uint64_t del_tag;          /* the last delete of this key (DEL, DELINS) */
};

struct fold_rel {
	bool foldable;
	bool seen; /* has a change in this segment (is in fold.order) */
	struct fold_entry *entries; /* owned, in the order the keys first appeared */
	size_t n_entries, cap_entries;
	uint32_t *slots; /* owned hash table: entry index + 1, 0 = free */
	size_t cap_slots;
	struct fold_change *kept; /* owned: an unfoldable relation's changes, as added */
	size_t n_kept, cap_kept;
};

/* The emission, built when first asked for after a change. */
struct fold_out {
	struct fold_change *changes; /* owned */
	size_t n, cap;
	bool valid;
};

struct fold {
	struct arena arena;
	struct fold_rel *rels; /* owned; slots past n_rels keep their buffers for reuse */
	struct plan_relation *prels; /* owned array; what each points to lives in the arena */
	uint32_t n_rels;
	size_t cap_rels;
	uint32_t *order; /* owned, cap_rels: relations in the order of their first change */
	uint32_t n_order;
	struct buf scratch; /* a change's encoded key */
	size_t pending;     /* changes recorded in this segment */
	uint64_t net;       /* statements the segment emits now */
	uint64_t received_before, emitted_before; /* of the segments before this one */
	struct fold_out *out; /* owned: filled on demand through a const fold */
};

struct fold *fold_new(void)
{
	struct fold *f = xcalloc(1, sizeof *f);
	f->out = xcalloc(1, sizeof *f->out);
	return f;
}

/* Every allocation of the segment freed: the fold as fold_new left it. */
static void release(struct fold *f)
{
	for (size_t i = 0; i < f->cap_rels; i++) {
		free(f->rels[i].entries);
		free(f->rels[i].slots);
		free(f->rels[i].kept);
	}
	free(f->rels);
	free(f->prels);
	free(f->order);
	f->rels = NULL;
	f->prels = NULL;
	f->order = NULL;
	f->cap_rels = 0;
	buf_free(&f->scratch);
	arena_release(&f->arena);
	free(f->out->changes);
	f->out->changes = NULL;
	f->out->cap = 0;
}

void fold_free(struct fold *f)
{
	if (!f)
		return;
	release(f);
	free(f->out);
	free(f);
}

void fold_reset(struct fold *f)
{
	f->received_before += f->pending;
	f->emitted_before += f->net;
	f->pending = 0;
	f->net = 0;
	f->n_rels = 0;
	f->n_order = 0;
	f->out->valid = false;
	f->out->n = 0;
	arena_rewind(&f->arena);
}

bool fold_shrink(struct fold *f)
{
	if (f->pending || f->n_rels || fold_held_bytes(f) <= FOLD_KEEP_BYTES)
		return false;
	release(f);
	return true;
}

size_t fold_held_bytes(const struct fold *f)
{
	size_t n = sizeof *f + sizeof *f->out + f->out->cap * sizeof *f->out->changes + f->scratch.cap;
	for (const struct arena_block *b = f->arena.first; b; b = b->next)
		n += sizeof *b + b->cap;
	n += f->cap_rels * (sizeof *f->rels + sizeof *f->prels + sizeof *f->order);
	for (size_t i = 0; i < f->cap_rels; i++) {
		const struct fold_rel *fr = &f->rels[i];
		n += fr->cap_entries * sizeof *fr->entries + fr->cap_slots * sizeof *fr->slots +
		     fr->cap_kept * sizeof *fr->kept;
	}
	return n;
}

size_t fold_pending(const struct fold *f)
{
	return f->pending;
}

struct fold_stats fold_stats(const struct fold *f)
{
	return (struct fold_stats){ .received = f->received_before + f->pending, .emitted = f->emitted_before + f->net };
}

const struct plan_relation *fold_relations(const struct fold *f, uint32_t *n)
{
	*n = f->n_rels;
	return f->prels;
}

/* ---- relations ---- */

static bool same_mask(const bool *a, const bool *b, uint16_t n)
{
	if (!a || !b)
		return !a == !b;
	for (uint16_t i = 0; i < n; i++)
		if (!a[i] != !b[i])
			return false;
	return true;
}

static bool same_types(const char *const *a, const char *const *b, uint16_t n)
{
	if (!a || !b)
		return !a == !b;
	for (uint16_t i = 0; i < n; i++) {
		if (!a[i] || !b[i]) {
			if (!a[i] != !b[i])
				return false;
		} else if (strcmp(a[i], b[i]) != 0) {
			return false;
		}
	}
	return true;
}

static bool same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool same_descriptor(const struct plan_relation *a, const struct plan_relation *b)
{
	const struct env_relation *x = a->rel, *y = b->rel;
	if (x->oid != y->oid || x->replident != y->replident || x->n_columns != y->n_columns ||
	    !same_bytes(x->schema, x->schema_len, y->schema, y->schema_len) ||
	    !same_bytes(x->name, x->name_len, y->name, y->name_len))
		return false;
	for (uint16_t i = 0; i < x->n_columns; i++) {
		const struct env_column *p = &x->columns[i], *q = &y->columns[i];
		if (p->type_oid != q->type_oid || p->typmod != q->typmod || !p->key != !q->key ||
		    !same_bytes(p->name, p->name_len, q->name, q->name_len))
			return false;
	}
	return same_mask(a->key, b->key, x->n_columns) && same_mask(a->identity_always, b->identity_always, x->n_columns) &&
	       !a->partitioned == !b->partitioned && same_types(a->col_types, b->col_types, x->n_columns) &&
	       same_types(a->col_eq, b->col_eq, x->n_columns);
}

static const bool *copy_mask(struct arena *a, const bool *m, uint16_t n)
{
	if (!m)
		return NULL;
	bool *c = arena_alloc(a, n * sizeof *c);
	for (uint16_t i = 0; i < n; i++)
		c[i] = m[i];
	return c;
}

/* A copy of pr in the arena. */
static struct plan_relation copy_relation(struct arena *a, const struct plan_relation *pr)
{
	const struct env_relation *r = pr->rel;
	struct env_relation *d = arena_alloc(a, sizeof *d);
	*d = *r;
	d->schema = arena_strndup(a, r->schema, r->schema_len);
	d->name = arena_strndup(a, r->name, r->name_len);
	d->columns = arena_alloc(a, r->n_columns * sizeof *d->columns);
	for (uint16_t i = 0; i < r->n_columns; i++) {
		d->columns[i] = r->columns[i];
		d->columns[i].name = arena_strndup(a, r->columns[i].name, r->columns[i].name_len);
	}
	struct plan_relation c = { .rel = d, .partitioned = pr->partitioned };
	c.key = copy_mask(a, pr->key, r->n_columns);
	c.identity_always = copy_mask(a, pr->identity_always, r->n_columns);
	if (pr->col_types) {
		const char **t = arena_alloc(a, r->n_columns * sizeof *t);
		for (uint16_t i = 0; i < r->n_columns; i++)
			t[i] = pr->col_types[i] ? arena_strndup(a, pr->col_types[i], strlen(pr->col_types[i])) : NULL;
		c.col_types = t;
	}
	if (pr->col_eq) {
		const char **e = arena_alloc(a, r->n_columns * sizeof *e);
		for (uint16_t i = 0; i < r->n_columns; i++)
			e[i] = pr->col_eq[i] ? arena_strndup(a, pr->col_eq[i], strlen(pr->col_eq[i])) : NULL;
		c.col_eq = e;
	}
	return c;
}

int fold_relation(struct fold *f, const struct plan_relation *pr, bool foldable)
{
	const struct env_relation *r = pr->rel;
	bool fold_it = foldable && pr->key != NULL;
	for (uint32_t i = 0; i < f->n_rels; i++) {
		const struct env_relation *have = f->prels[i].rel;
		if (have->oid != r->oid && !(same_bytes(have->schema, have->schema_len, r->schema, r->schema_len) &&
					     same_bytes(have->name, have->name_len, r->name, r->name_len)))
			continue;
		if (f->rels[i].foldable == fold_it && same_descriptor(&f->prels[i], pr))
			return (int)i;
		return -1;
	}
	if (f->n_rels == f->cap_rels) {
		size_t cap = f->cap_rels ? f->cap_rels * 2 : 8;
		f->rels = xrealloc(f->rels, cap * sizeof *f->rels);
		memset(f->rels + f->cap_rels, 0, (cap - f->cap_rels) * sizeof *f->rels);
		f->prels = xrealloc(f->prels, cap * sizeof *f->prels);
		f->order = xrealloc(f->order, cap * sizeof *f->order);
		f->cap_rels = cap;
	}
	uint32_t idx = f->n_rels++;
	struct fold_rel *fr = &f->rels[idx];
	fr->foldable = fold_it;
	fr->seen = false;
	fr->n_entries = 0;
	fr->n_kept = 0;
	if (fr->slots)
		memset(fr->slots, 0, fr->cap_slots * sizeof *fr->slots);
	f->prels[idx] = copy_relation(&f->arena, pr);
	f->out->valid = false;
	return (int)idx;
}

/* ---- keys ---- */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h ^ (h >> 29);
}

/* The key of tuple t under mask key, into f->scratch: per key column its
 * kind, and for text its length and bytes.  false: a key column is
 * unchanged TOAST (its value is not known). */
static bool encode_key(struct fold *f, const bool *key, const struct env_tuple *t)
{
	f->scratch.len = 0;
	for (uint16_t i = 0; i < t->n; i++) {
		if (!key[i])
			continue;
		const struct env_value *v = &t->values[i];
		if (v->kind == ENV_UNCHANGED_TOAST)
			return false;
		buf_put_u8(&f->scratch, v->kind);
		if (v->kind == ENV_TEXT) {
			buf_put_u32(&f->scratch, v->len);
			buf_put(&f->scratch, v->data, v->len);
		}
	}
	return true;
}

/* The entry index of the key in f->scratch, or SIZE_MAX. */
static size_t find_entry(struct fold *f, struct fold_rel *fr, uint64_t hash)
{
	if (!fr->cap_slots)
		return SIZE_MAX;
	size_t mask = fr->cap_slots - 1;
	for (size_t s = hash & mask;; s = (s + 1) & mask) {
		uint32_t e = fr->slots[s];
		if (!e)
			return SIZE_MAX;
		const struct fold_entry *en = &fr->entries[e - 1];
		if (en->hash == hash && en->key_len == f->scratch.len &&
		    (en->key_len == 0 || memcmp(en->key, f->scratch.data, en->key_len) == 0))
			return e - 1;
	}
}

static void slot_insert(struct fold_rel *fr, size_t entry)
{
	size_t mask = fr->cap_slots - 1;
	size_t s = fr->entries[entry].hash & mask;
	while (fr->slots[s])
		s = (s + 1) & mask;
	fr->slots[s] = (uint32_t)(entry + 1);
}

static struct env_value *copy_values(struct arena *a, const struct env_tuple *t)
{
	struct env_value *v = arena_alloc(a, t->n * sizeof *v);
	for (uint16_t i = 0; i < t->n; i++) {
		v[i].kind = t->values[i].kind;
		v[i].len = 0;
		v[i].data = NULL;
		if (t->values[i].kind == ENV_TEXT) {
			v[i].len = t->values[i].len;
			v[i].data = arena_dup(a, t->values[i].data, t->values[i].len);
		}
	}
	return v;
}

/* A new (absent) entry for the key in f->scratch, taking the key
 * columns' values from t. */
static size_t new_entry(struct fold *f, struct fold_rel *fr, uint64_t hash, const bool *key, const struct env_tuple *t)
{
	if (fr->n_entries == fr->cap_entries) {
		fr->cap_entries = fr->cap_entries ? fr->cap_entries * 2 : 16;
		fr->entries = xrealloc(fr->entries, fr->cap_entries * sizeof *fr->entries);
	}
	if ((fr->n_entries + 1) * 2 > fr->cap_slots) {
		size_t cap = fr->cap_slots ? fr->cap_slots * 2 : 32;
		free(fr->slots);
		fr->slots = xcalloc(cap, sizeof *fr->slots);
		fr->cap_slots = cap;
		for (size_t i = 0; i < fr->n_entries; i++)
			slot_insert(fr, i);
	}
	size_t idx = fr->n_entries++;
	struct fold_entry *e = &fr->entries[idx];
	memset(e, 0, sizeof *e);
	e->state = ST_ABSENT;
	e->hash = hash;
	e->key_len = f->scratch.len;
	e->key = arena_dup(&f->arena, f->scratch.data, f->scratch.len);
	e->keyvals = arena_alloc(&f->arena, t->n * sizeof *e->keyvals);
	for (uint16_t i = 0; i < t->n; i++) {
		e->keyvals[i] = (struct env_value){ .kind = ENV_NULL };
		if (key[i] && t->values[i].kind == ENV_TEXT) {
			e->keyvals[i].kind = ENV_TEXT;
			e->keyvals[i].len = t->values[i].len;
			e->keyvals[i].data = arena_dup(&f->arena, t->values[i].data, t->values[i].len);
		}
	}
	slot_insert(fr, idx);
	return idx;
}

static void set_state(struct fold *f, struct fold_entry *e, uint8_t s)
{
	f->net += state_weight(s);
	f->net -= state_weight(e->state);
	e->state = s;
}

/* Every sent column of t overwrites the image's. */
static void merge_image(struct arena *a, struct env_value *image, const struct env_tuple *t)
{
	for (uint16_t i = 0; i < t->n; i++) {
		const struct env_value *v = &t->values[i];
		if (v->kind == ENV_UNCHANGED_TOAST)
			continue;
		image[i].kind = v->kind;
		image[i].len = 0;
		image[i].data = NULL;
		if (v->kind == ENV_TEXT) {
			image[i].len = v->len;
			image[i].data = arena_dup(a, v->data, v->len);
		}
	}
}

static bool same_value(const struct env_value *a, const struct env_value *b)
{
	if (a->kind != b->kind)
		return false;
	return a->kind != ENV_TEXT || (a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0));
}

static bool same_key(const bool *key, const struct env_tuple *a, const struct env_tuple *b)
{
	for (uint16_t i = 0; i < a->n; i++)
		if (key[i] && !same_value(&a->values[i], &b->values[i]))
			return false;
	return true;
}

static bool has_toast(const struct env_tuple *t)
{
	for (uint16_t i = 0; i < t->n; i++)
		if (t->values[i].kind == ENV_UNCHANGED_TOAST)
			return true;
	return false;
}

static void mark_seen(struct fold *f, uint32_t rel)
{
	if (!f->rels[rel].seen) {
		f->rels[rel].seen = true;
		f->order[f->n_order++] = rel;
	}
}

static enum fold_result recorded(struct fold *f, uint32_t rel)
{
	mark_seen(f, rel);
	f->pending++;
	f->out->valid = false;
	return FOLD_OK;
}

/* An unfoldable relation's change, copied as given. */
static enum fold_result keep(struct fold *f, uint32_t rel, const struct env_change *c, uint64_t tag)
{
	struct fold_rel *fr = &f->rels[rel];
	if (fr->n_kept == fr->cap_kept) {
		fr->cap_kept = fr->cap_kept ? fr->cap_kept * 2 : 16;
		fr->kept = xrealloc(fr->kept, fr->cap_kept * sizeof *fr->kept);
	}
	struct fold_change *k = &fr->kept[fr->n_kept++];
	memset(k, 0, sizeof *k);
	k->tag = tag;
	k->change.op = c->op;
	k->change.relation = rel;
	k->change.old_kind = c->old_kind;
	if (c->old_kind) {
		k->change.old_tuple.n = c->old_tuple.n;
		k->change.old_tuple.values = copy_values(&f->arena, &c->old_tuple);
	}
	if (c->op != ENV_DELETE) {
		k->change.new_tuple.n = c->new_tuple.n;
		k->change.new_tuple.values = copy_values(&f->arena, &c->new_tuple);
	}
	f->net++;
	return recorded(f, rel);
}

enum fold_result fold_add(struct fold *f, uint32_t rel, const struct env_change *c, uint64_t tag)
{
	if (rel >= f->n_rels || (c->op != ENV_INSERT && c->op != ENV_UPDATE && c->op != ENV_DELETE))
		return FOLD_ALONE;
	if (!f->rels[rel].foldable)
		return keep(f, rel, c, tag);
	const struct plan_relation *pr = &f->prels[rel];
	const bool *key = pr->key;
	uint16_t n = pr->rel->n_columns;
	if (c->old_kind != 0 && c->old_kind != 'K' && c->old_kind != 'O')
		return FOLD_ALONE;
	if (c->old_kind && (c->op == ENV_INSERT || c->old_tuple.n != n))
		return FOLD_ALONE;
	if (c->op != ENV_DELETE && c->new_tuple.n != n)
		return FOLD_ALONE;
	if (c->op == ENV_DELETE && !c->old_kind)
		return FOLD_ALONE;
	if (c->op == ENV_INSERT && has_toast(&c->new_tuple))
		return FOLD_ALONE;
	const struct env_tuple *match = c->old_kind ? &c->old_tuple : &c->new_tuple;
	if (!encode_key(f, key, match))
		return FOLD_ALONE;
	struct fold_rel *fr = &f->rels[rel];
	uint64_t hash = hash_bytes(f->scratch.data, f->scratch.len);
	size_t ei = find_entry(f, fr, hash);
	uint8_t state = ei == SIZE_MAX ? ST_ABSENT : fr->entries[ei].state;

	if (c->op == ENV_INSERT) {
		if (state != ST_ABSENT && state != ST_DEL)
			return FOLD_CONFLICT;
		if (ei == SIZE_MAX)
			ei = new_entry(f, fr, hash, key, match);
		struct fold_entry *e = &fr->entries[ei];
		e->image = copy_values(&f->arena, &c->new_tuple);
		e->tag = tag;
		set_state(f, e, state == ST_DEL ? ST_DELINS : ST_INS);
		return recorded(f, rel);
	}
	if (c->op == ENV_DELETE) {
		if (state == ST_DEL)
			return FOLD_CONFLICT;
		if (ei == SIZE_MAX)
			ei = new_entry(f, fr, hash, key, match);
		struct fold_entry *e = &fr->entries[ei];
		e->image = NULL;
		if (state == ST_INS) {
			set_state(f, e, ST_ABSENT);
		} else {
			e->del_tag = tag;
			set_state(f, e, ST_DEL);
		}
		return recorded(f, rel);
	}
	/* update */
	if (!c->old_kind || same_key(key, &c->old_tuple, &c->new_tuple)) {
		if (state == ST_DEL)
			return FOLD_CONFLICT;
		if (ei == SIZE_MAX)
			ei = new_entry(f, fr, hash, key, match);
		struct fold_entry *e = &fr->entries[ei];
		if (state == ST_ABSENT) {
			e->image = copy_values(&f->arena, &c->new_tuple);
			set_state(f, e, ST_UPD);
		} else {
			merge_image(&f->arena, e->image, &c->new_tuple);
		}
		e->tag = tag;
		return recorded(f, rel);
	}
	/* the key changes K -> K': only a row this segment inserted moves */
	if (state != ST_INS && state != ST_DELINS)
		return FOLD_ALONE;
	if (!encode_key(f, key, &c->new_tuple))
		return FOLD_ALONE;
	uint64_t hash2 = hash_bytes(f->scratch.data, f->scratch.len);
	size_t ei2 = find_entry(f, fr, hash2);
	uint8_t state2 = ei2 == SIZE_MAX ? ST_ABSENT : fr->entries[ei2].state;
	if (state2 != ST_ABSENT && state2 != ST_DEL)
		return FOLD_CONFLICT;
	if (ei2 == SIZE_MAX)
		ei2 = new_entry(f, fr, hash2, key, &c->new_tuple); /* may move fr->entries */
	struct fold_entry *from = &fr->entries[ei], *to = &fr->entries[ei2];
	merge_image(&f->arena, from->image, &c->new_tuple);
	to->image = from->image;
	to->tag = tag;
	set_state(f, to, state2 == ST_DEL ? ST_DELINS : ST_INS);
	from->image = NULL;
	set_state(f, from, state == ST_DELINS ? ST_DEL : ST_ABSENT);
	return recorded(f, rel);
}

/* ---- emission ---- */

static struct fold_change *out_push(struct fold_out *o)
{
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 64;
		o->changes = xrealloc(o->changes, o->cap * sizeof *o->changes);
	}
	struct fold_change *c = &o->changes[o->n++];
	memset(c, 0, sizeof *c);
	return c;
}

static void build(const struct fold *f)
{
	struct fold_out *o = f->out;
	if (o->valid)
		return;
	o->n = 0;
	for (uint32_t k = 0; k < f->n_order; k++) {
		uint32_t rel = f->order[k];
		const struct fold_rel *fr = &f->rels[rel];
		uint16_t n = f->prels[rel].rel->n_columns;
		if (!fr->foldable) {
			for (size_t i = 0; i < fr->n_kept; i++)
				*out_push(o) = fr->kept[i];
			continue;
		}
		for (size_t i = 0; i < fr->n_entries; i++) {
			const struct fold_entry *e = &fr->entries[i];
			if (e->state != ST_DEL && e->state != ST_DELINS)
				continue;
			struct fold_change *c = out_push(o);
			c->change.op = ENV_DELETE;
			c->change.relation = rel;
			c->change.old_kind = 'K';
			c->change.old_tuple = (struct env_tuple){ .n = n, .values = e->keyvals };
			c->tag = e->del_tag;
		}
		for (size_t i = 0; i < fr->n_entries; i++) {
			const struct fold_entry *e = &fr->entries[i];
			if (e->state != ST_UPD)
				continue;
			struct fold_change *c = out_push(o);
			c->change.op = ENV_UPDATE;
			c->change.relation = rel;
			c->change.new_tuple = (struct env_tuple){ .n = n, .values = e->image };
			c->tag = e->tag;
		}
		for (size_t i = 0; i < fr->n_entries; i++) {
			const struct fold_entry *e = &fr->entries[i];
			if (e->state != ST_INS && e->state != ST_DELINS)
				continue;
			struct fold_change *c = out_push(o);
			c->change.op = ENV_INSERT;
			c->change.relation = rel;
			c->change.new_tuple = (struct env_tuple){ .n = n, .values = e->image };
			c->tag = e->tag;
		}
	}
	o->valid = true;
}

size_t fold_count(const struct fold *f)
{
	build(f);
	return f->out->n;
}

const struct fold_change *fold_get(const struct fold *f, size_t i)
{
	build(f);
	return i < f->out->n ? &f->out->changes[i] : NULL;
}

/*
 * apply_deps.c - the dependency tracker of parallel apply (apply_deps.h).
 *
 * State.  An open-addressing hash table (linear probing, no deletion) of
 * (rel, key bytes) -> holder, the newest batch that touched the key, and
 * prev, the holder before it.  A holder at or below the committed
 * watermark is free.  Abandoned batches are never left as holders: every
 * touch that changes a key's holder appends an undo record (entry, batch,
 * old holder, old prev) to a log in batch order, so abandon(b) pops the
 * log's suffix of batches >= b and puts the earlier holders back; a commit
 * drops the log's prefix it covers (those are never undone).  The live
 * batches (begun, not committed, not abandoned) are an ascending list with
 * a barrier flag each: a commit takes from its front, an abandon from its
 * back, and the barrier answer is its last element below the batch.
 *
 * Memory.  Keys are copied into an arena of blocks.  When the list of live
 * batches empties, the table and the arena are released.  When the table
 * must grow it is rebuilt with the keys of live batches only, into a new
 * arena, sized for them (it may shrink); the undo log's entry numbers are
 * mapped to the new table (every entry the log names is live: its holder
 * is at or above the record's batch, which is above the watermark).  An
 * idle applier frees the undo log's array when it is empty and larger
 * than DEPS_KEEP_LOG records (apply_deps_shrink).
 */
#include "trellara/apply_deps.h"

#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* ---- the arena: bytes only, blocks that never move ---- */

struct deps_block {
	struct deps_block *next; /* owned */
	size_t cap, used;
	unsigned char data[]; /* cap bytes */
};

#define DEPS_BLOCK 65536

static const unsigned char *arena_dup(struct deps_block **head, const void *src, size_t len)
{
	static const unsigned char empty[1];
	if (len == 0)
		return empty;
	struct deps_block *b = *head;
	if (!b || b->cap - b->used < len) {
		size_t cap = len > DEPS_BLOCK ? len : DEPS_BLOCK;
		b = xmalloc(sizeof *b + cap);
		b->cap = cap;
		b->used = 0;
		b->next = *head;
		*head = b;
	}
	unsigned char *p = b->data + b->used;
	memcpy(p, src, len);
	b->used += len;
	return p;
}

static void arena_release(struct deps_block **head)
{
	while (*head) {
		struct deps_block *next = (*head)->next;
		free(*head);
		*head = next;
	}
}

/* ---- the state ---- */

struct deps_entry {
	const unsigned char *key; /* in the arena */
	size_t len;
	uint64_t hash;
	uint64_t holder; /* newest batch that touched it; free when <= committed */
	uint64_t prev;   /* the holder before holder (0: none) */
	uint32_t rel;
	bool used;
};

struct deps_undo {
	size_t entry;
	uint64_t batch;
	uint64_t old_holder, old_prev;
};

struct deps_live {
	uint64_t batch;
	bool barrier;
};

struct apply_deps {
	struct deps_entry *slots; /* owned, cap slots (cap a power of two or 0) */
	size_t cap, used;
	struct deps_block *arena; /* owned */
	struct deps_undo *log;    /* owned: records [log_head, log_n) are current */
	size_t log_head, log_n, log_cap;
	struct deps_live *live;   /* owned: [live_head, live_n) ascending */
	size_t live_head, live_n, live_cap;
	uint64_t committed; /* every batch <= committed is committed */
	uint64_t last;      /* highest batch number seen (begun, committed or abandoned) */
	bool open;          /* last is begun and still live */
	bool broken;        /* a caller bug was seen */
};

#define DEPS_MIN_CAP 16
/* undo records kept allocated when none is current (32 bytes each) */
#define DEPS_KEEP_LOG 1024

struct apply_deps *apply_deps_new(void)
{
	return xcalloc(1, sizeof(struct apply_deps));
}

void apply_deps_free(struct apply_deps *d)
{
	if (!d)
		return;
	free(d->slots);
	arena_release(&d->arena);
	free(d->log);
	free(d->live);
	free(d);
}

static uint64_t hash_key(uint32_t rel, const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (int i = 0; i < 4; i++) {
		h ^= (rel >> (8 * i)) & 0xff;
		h *= 1099511628211ULL;
	}
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h ^ (h >> 29);
}

static bool holder_live(const struct apply_deps *d, uint64_t h)
{
	return h > d->committed;
}

/* the slot of (rel, key) in a table of cap slots: its entry or the free slot where it goes */
static size_t find_slot(const struct deps_entry *slots, size_t cap, uint64_t hash, uint32_t rel,
			const unsigned char *key, size_t len)
{
	size_t mask = cap - 1;
	for (size_t s = hash & mask;; s = (s + 1) & mask) {
		const struct deps_entry *e = &slots[s];
		if (!e->used)
			return s;
		if (e->hash == hash && e->rel == rel && e->len == len && (len == 0 || memcmp(e->key, key, len) == 0))
			return s;
	}
}

/* release every key: nothing is live */
static void reclaim(struct apply_deps *d)
{
	free(d->slots);
	d->slots = NULL;
	d->cap = d->used = 0;
	arena_release(&d->arena);
	d->log_head = d->log_n = 0;
	d->live_head = d->live_n = 0;
}

/* rebuild the table with the live entries only, room for one more */
static void rebuild(struct apply_deps *d)
{
	size_t live = 0;
	for (size_t i = 0; i < d->cap; i++)
		if (d->slots[i].used && holder_live(d, d->slots[i].holder))
			live++;
	size_t cap = DEPS_MIN_CAP;
	while (cap < 4 * (live + 1))
		cap *= 2;
	struct deps_entry *slots = xcalloc(cap, sizeof *slots);
	struct deps_block *arena = NULL;
	size_t *map = d->cap ? xmalloc(d->cap * sizeof *map) : NULL;
	for (size_t i = 0; i < d->cap; i++) {
		const struct deps_entry *e = &d->slots[i];
		map[i] = SIZE_MAX;
		if (!e->used || !holder_live(d, e->holder))
			continue;
		size_t s = find_slot(slots, cap, e->hash, e->rel, e->key, e->len);
		slots[s] = *e;
		slots[s].key = arena_dup(&arena, e->key, e->len);
		map[i] = s;
	}
	/* every record names a live entry (see the top); one that did not
	 * could not be undone, so it is dropped rather than followed */
	size_t n = 0;
	for (size_t i = d->log_head; i < d->log_n; i++) {
		struct deps_undo u = d->log[i];
		if (map[u.entry] == SIZE_MAX)
			continue;
		u.entry = map[u.entry];
		d->log[n++] = u;
	}
	d->log_head = 0;
	d->log_n = n;
	free(map);
	free(d->slots);
	arena_release(&d->arena);
	d->slots = slots;
	d->cap = cap;
	d->used = live;
	d->arena = arena;
}

/* the checks every touch and barrier make; begins batch when it is new */
static bool begin(struct apply_deps *d, uint64_t batch)
{
	if (d->broken)
		return false;
	if (batch == 0 || batch == UINT64_MAX || batch < d->last || (batch == d->last && !d->open)) {
		d->broken = true;
		return false;
	}
	if (batch > d->last) {
		if (d->live_n == d->live_cap) {
			if (d->live_head > 0) {
				memmove(d->live, d->live + d->live_head, (d->live_n - d->live_head) * sizeof *d->live);
				d->live_n -= d->live_head;
				d->live_head = 0;
			}
			if (d->live_n == d->live_cap) {
				d->live_cap = d->live_cap ? 2 * d->live_cap : 16;
				d->live = xrealloc(d->live, d->live_cap * sizeof *d->live);
			}
		}
		d->live[d->live_n++] = (struct deps_live){ batch, false };
		d->last = batch;
		d->open = true;
	}
	return true;
}

/* the highest live barrier batch below batch (0: none) */
static uint64_t live_barrier_below(const struct apply_deps *d, uint64_t batch)
{
	for (size_t i = d->live_n; i > d->live_head; i--)
		if (d->live[i - 1].batch < batch && d->live[i - 1].barrier)
			return d->live[i - 1].batch;
	return 0;
}

static void log_push(struct apply_deps *d, struct deps_undo u)
{
	if (d->log_n == d->log_cap) {
		if (d->log_head > 0) {
			memmove(d->log, d->log + d->log_head, (d->log_n - d->log_head) * sizeof *d->log);
			d->log_n -= d->log_head;
			d->log_head = 0;
		}
		if (d->log_n == d->log_cap) {
			d->log_cap = d->log_cap ? 2 * d->log_cap : 64;
			d->log = xrealloc(d->log, d->log_cap * sizeof *d->log);
		}
	}
	d->log[d->log_n++] = u;
}

uint64_t apply_deps_touch(struct apply_deps *d, uint64_t batch, uint32_t rel, const void *key, size_t len)
{
	if (!d->broken && !key && len > 0)
		d->broken = true;
	if (!begin(d, batch))
		return APPLY_DEPS_BROKEN;
	const unsigned char *k = key;
	uint64_t hash = hash_key(rel, k, len);
	if ((d->used + 1) * 2 > d->cap)
		rebuild(d);
	size_t s = find_slot(d->slots, d->cap, hash, rel, k, len);
	struct deps_entry *e = &d->slots[s];
	uint64_t dep;
	if (!e->used) {
		*e = (struct deps_entry){ arena_dup(&d->arena, k, len), len, hash, 0, 0, rel, true };
		d->used++;
	}
	if (e->holder == batch) {
		dep = holder_live(d, e->prev) ? e->prev : 0;
	} else {
		/* e->holder < batch: touches come in batch order */
		dep = holder_live(d, e->holder) ? e->holder : 0;
		log_push(d, (struct deps_undo){ s, batch, e->holder, e->prev });
		e->prev = dep;
		e->holder = batch;
	}
	uint64_t barrier = live_barrier_below(d, batch);
	return barrier > dep ? barrier : dep;
}

uint64_t apply_deps_barrier(struct apply_deps *d, uint64_t batch)
{
	if (!begin(d, batch))
		return APPLY_DEPS_BROKEN;
	/* batch is the last live one (begin) */
	d->live[d->live_n - 1].barrier = true;
	return d->live_n - 1 > d->live_head ? d->live[d->live_n - 2].batch : 0;
}

void apply_deps_committed(struct apply_deps *d, uint64_t batch)
{
	if (d->broken || batch <= d->committed)
		return;
	d->committed = batch;
	if (batch >= d->last) {
		d->last = batch;
		d->open = false;
	}
	while (d->live_head < d->live_n && d->live[d->live_head].batch <= batch)
		d->live_head++;
	while (d->log_head < d->log_n && d->log[d->log_head].batch <= batch)
		d->log_head++;
	if (d->live_head == d->live_n)
		reclaim(d);
}

bool apply_deps_shrink(struct apply_deps *d)
{
	if (d->log_head != d->log_n || d->log_cap <= DEPS_KEEP_LOG)
		return false;
	/* a large batch's undo records are all dropped: not kept for good */
	free(d->log);
	d->log = NULL;
	d->log_head = d->log_n = d->log_cap = 0;
	return true;
}

void apply_deps_abandon(struct apply_deps *d, uint64_t batch)
{
	if (d->broken)
		return;
	if (batch <= d->committed) {
		d->broken = true;
		return;
	}
	while (d->log_n > d->log_head && d->log[d->log_n - 1].batch >= batch) {
		const struct deps_undo *u = &d->log[--d->log_n];
		d->slots[u->entry].holder = u->old_holder;
		d->slots[u->entry].prev = u->old_prev;
	}
	while (d->live_n > d->live_head && d->live[d->live_n - 1].batch >= batch)
		d->live_n--;
	if (batch >= d->last)
		d->last = batch;
	d->open = false;
	if (d->live_head == d->live_n)
		reclaim(d);
}

size_t apply_deps_held(const struct apply_deps *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->cap; i++)
		if (d->slots[i].used && holder_live(d, d->slots[i].holder))
			n++;
	return n;
}

bool apply_deps_broken(const struct apply_deps *d)
{
	return d->broken;
}

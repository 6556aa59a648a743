/*
 * pgoutput_relcache.c - the relation cache of a pgoutput session: the
 * Relation messages seen, and the checks of a change against its
 * relation (pgoutput.h).
 */
#include "pgoutput_internal.h"

#include "trellara/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* ---- relation cache ------------------------------------------------------ */

static size_t relid_hash(uint32_t relid)
{
	return (size_t)(relid * 2654435761u);
}

void pgoutput_relcache_init(struct pgoutput_relcache *cache)
{
	memset(cache, 0, sizeof *cache);
}

static void relation_free(struct pgoutput_relation *rel)
{
	if (!rel)
		return;
	for (int i = 0; i < rel->natts; i++)
		free(rel->columns[i].name);
	free(rel->columns);
	free(rel->nspname);
	free(rel->relname);
	free(rel);
}

void pgoutput_relcache_free(struct pgoutput_relcache *cache)
{
	for (size_t i = 0; i < cache->cap; i++)
		relation_free(cache->slots[i]);
	free(cache->slots);
	pgoutput_relcache_init(cache);
}

/* The slot holding relid, or the empty slot where it belongs. */
static struct pgoutput_relation **relcache_slot(const struct pgoutput_relcache *cache, uint32_t relid)
{
	size_t mask = cache->cap - 1;
	for (size_t i = relid_hash(relid) & mask;; i = (i + 1) & mask)
		if (!cache->slots[i] || cache->slots[i]->relid == relid)
			return &cache->slots[i];
}

static void relcache_grow(struct pgoutput_relcache *cache)
{
	struct pgoutput_relcache bigger = { NULL, cache->cap ? cache->cap * 2 : 16, 0 };
	bigger.slots = xcalloc(bigger.cap, sizeof *bigger.slots);
	for (size_t i = 0; i < cache->cap; i++)
		if (cache->slots[i]) {
			*relcache_slot(&bigger, cache->slots[i]->relid) = cache->slots[i];
			bigger.count++;
		}
	free(cache->slots);
	*cache = bigger;
}

const struct pgoutput_relation *pgoutput_relcache_lookup(const struct pgoutput_relcache *cache,
							 uint32_t relid)
{
	if (cache->cap == 0)
		return NULL;
	return *relcache_slot(cache, relid);
}

static bool relation_equal(const struct pgoutput_relation *a, const struct pgoutput_relation *b)
{
	if (strcmp(a->nspname, b->nspname) != 0 || strcmp(a->relname, b->relname) != 0 ||
	    a->replident != b->replident || a->natts != b->natts)
		return false;
	for (int i = 0; i < a->natts; i++) {
		const struct pgoutput_relation_column *x = &a->columns[i], *y = &b->columns[i];
		if (strcmp(x->name, y->name) != 0 || x->type_oid != y->type_oid ||
		    x->typmod != y->typmod || x->key != y->key)
			return false;
	}
	return true;
}

int pgoutput_relcache_apply(struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, bool *changed, char *err,
			    size_t errlen)
{
	if (msg->type != PGOUTPUT_RELATION) {
		const char *name = pgoutput_type_name((uint8_t)msg->type);
		errbuf_setf(err, errlen, "pgoutput: relation cache given a %s message, not a Relation",
			  name ? name : "unknown");
		return -1;
	}
	struct pgoutput_relation *rel = xcalloc(1, sizeof *rel);
	rel->relid = msg->relation.relid;
	rel->nspname = xstrdup(msg->relation.nspname[0] ? msg->relation.nspname : "pg_catalog");
	rel->relname = xstrdup(msg->relation.relname);
	rel->replident = msg->relation.replident;
	rel->natts = msg->relation.natts;
	rel->columns = xcalloc((size_t)rel->natts, sizeof *rel->columns);
	for (int i = 0; i < rel->natts; i++) {
		const struct pgoutput_attribute *att = &msg->relation.atts[i];
		rel->columns[i].name = xstrdup(att->name);
		rel->columns[i].type_oid = att->type_oid;
		rel->columns[i].typmod = att->typmod;
		rel->columns[i].key = att->key;
	}

	if ((cache->count + 1) * 2 > cache->cap)
		relcache_grow(cache);
	struct pgoutput_relation **slot = relcache_slot(cache, rel->relid);
	if (changed)
		*changed = *slot && !relation_equal(*slot, rel);
	if (*slot)
		relation_free(*slot);
	else
		cache->count++;
	*slot = rel;
	if (relation)
		*relation = rel;
	return 0;
}

static const char *replident_name(enum pgoutput_replident replident)
{
	switch (replident) {
	case PGOUTPUT_REPLIDENT_DEFAULT: return "default";
	case PGOUTPUT_REPLIDENT_NOTHING: return "nothing";
	case PGOUTPUT_REPLIDENT_FULL: return "full";
	default: return "index";
	}
}

static int check_tuple(const struct pgoutput_relation *rel, const struct pgoutput_tuple *tuple,
		       const char *role, const char *what, char *err, size_t errlen)
{
	if (tuple->ncols != rel->natts) {
		errbuf_setf(err, errlen, "pgoutput: relation %u \"%s.%s\" has %d columns but %s%s carries %d",
			  rel->relid, rel->nspname, rel->relname, rel->natts, role, what, tuple->ncols);
		return -1;
	}
	return 0;
}

/* K: the replica identity columns and nothing else; O: only under FULL. */
static int check_old(const struct pgoutput_relation *rel, const struct pgoutput_message *msg,
		     const char *what, char *err, size_t errlen)
{
	const struct pgoutput_tuple *old = &msg->change.old_tuple;
	if (msg->change.old_kind == PGOUTPUT_OLD_FULL) {
		if (rel->replident != PGOUTPUT_REPLIDENT_FULL) {
			errbuf_setf(err, errlen,
				  "pgoutput: %s carries an old tuple (O) but relation %u \"%s.%s\" has replica identity %s, not full",
				  what, rel->relid, rel->nspname, rel->relname, replident_name(rel->replident));
			return -1;
		}
		return check_tuple(rel, old, "the old tuple (O) of ", what, err, errlen);
	}
	if (rel->replident != PGOUTPUT_REPLIDENT_DEFAULT && rel->replident != PGOUTPUT_REPLIDENT_INDEX) {
		errbuf_setf(err, errlen,
			  "pgoutput: %s carries an old key (K) but relation %u \"%s.%s\" has replica identity %s",
			  what, rel->relid, rel->nspname, rel->relname, replident_name(rel->replident));
		return -1;
	}
	if (check_tuple(rel, old, "the old key (K) of ", what, err, errlen) < 0)
		return -1;
	for (int i = 0; i < rel->natts; i++) {
		bool has_value = old->cols[i].kind != PGOUTPUT_COLUMN_NULL;
		if (has_value != rel->columns[i].key) {
			errbuf_setf(err, errlen,
				  has_value ? "pgoutput: old key (K) of %s carries a value for column \"%s\" of relation %u \"%s.%s\", which is not a key column"
					    : "pgoutput: old key (K) of %s has no value for key column \"%s\" of relation %u \"%s.%s\"",
				  what, rel->columns[i].name, rel->relid, rel->nspname, rel->relname);
			return -1;
		}
	}
	return 0;
}

int pgoutput_relcache_check(const struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, char *err, size_t errlen)
{
	if (relation)
		*relation = NULL;
	const char *what = pgoutput_type_name((uint8_t)msg->type);
	if (msg->type == PGOUTPUT_TRUNCATE) {
		for (int i = 0; i < msg->truncate.nrelids; i++)
			if (!pgoutput_relcache_lookup(cache, msg->truncate.relids[i])) {
				errbuf_setf(err, errlen,
					  "pgoutput: Truncate of unknown relation %u: no Relation message received for it",
					  msg->truncate.relids[i]);
				return -1;
			}
		return 0;
	}
	if (msg->type != PGOUTPUT_INSERT && msg->type != PGOUTPUT_UPDATE && msg->type != PGOUTPUT_DELETE)
		return 0;
	const struct pgoutput_relation *rel = pgoutput_relcache_lookup(cache, msg->change.relid);
	if (!rel) {
		errbuf_setf(err, errlen, "pgoutput: %s for unknown relation %u: no Relation message received for it",
			  what, msg->change.relid);
		return -1;
	}
	if (msg->change.old_kind != PGOUTPUT_OLD_NONE && check_old(rel, msg, what, err, errlen) < 0)
		return -1;
	if (msg->type != PGOUTPUT_DELETE &&
	    check_tuple(rel, &msg->change.new_tuple, "", what, err, errlen) < 0)
		return -1;
	if (relation)
		*relation = rel;
	return 0;
}


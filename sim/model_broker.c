/*
 * model_broker.c - the replicated broker model (model_broker.h).
 *
 * Raft as JetStream runs it for one stream, reduced to what Trellara's
 * guarantees rest on: the vote rule (the most up-to-date log wins), log
 * matching (a replica copies the leader's log after the prefix they share
 * and drops what follows it), and the commit rule (a majority holds the
 * entry, in the leader's term).  Entries are shared between the logs
 * that hold them (reference counted), so "the same entry" is pointer
 * equality.
 */
#include "model_broker.h"

#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint64_t term;    /* the leader's term when it appended it */
	char *msg_id;     /* owned */
	uint8_t *data;    /* owned */
	size_t len;
	int64_t stored_us;
	struct model_broker_note note;
	unsigned refs;
};

struct node {
	bool up;
	struct entry **log; /* owned references */
	uint64_t len, cap;
	uint64_t synced;    /* the prefix of the log on disk (model_broker_node_crash keeps only it) */
	bool lost_tail;     /* a crash dropped entries a quorum had: until it caught up again */
	int64_t match;      /* the leader's view in this term: the log's length it shares; -1: unknown */
};

struct model_broker {
	struct model_broker_options o;
	int quorum;
	struct node nodes[MODEL_BROKER_MAX_NODES];
	int leader;          /* -1: none */
	unsigned runs;       /* capture runs that opened a sink (model_broker_next_run) */
	int ticks_without_quorum; /* the leader's, while it is up */
	uint64_t term;
	uint64_t term_start; /* the leader's log length when elected: its no-op follows it */
	struct entry **committed; /* owned references: entries 1..commit */
	uint64_t commit, cap_committed;
	enum model_broker_failure fail;
	bool group_exists;
	uint64_t group_position;
	model_broker_annotate_fn annotate;
	void *annotate_ctx;
	struct model_broker_stats stats;
	uint64_t ticks;
	bool crash_lost;     /* a host crash dropped committed entries from some node */
	char error[256];
};

void model_broker_options_default(struct model_broker_options *o)
{
	*o = (struct model_broker_options){ .nodes = 3,
					    .duplicate_window_us = MODEL_BROKER_DEFAULT_WINDOW_US,
					    .catchup_per_tick = 64,
					    .lost_quorum_ticks = 5 };
}

struct model_broker *model_broker_new(const struct model_broker_options *o)
{
	struct model_broker *b = xcalloc(1, sizeof *b);
	b->o = *o;
	if (b->o.nodes < 1)
		b->o.nodes = 1;
	if (b->o.nodes > MODEL_BROKER_MAX_NODES)
		b->o.nodes = MODEL_BROKER_MAX_NODES;
	if (b->o.duplicate_window_us <= 0)
		b->o.duplicate_window_us = MODEL_BROKER_DEFAULT_WINDOW_US;
	if (b->o.catchup_per_tick == 0)
		b->o.catchup_per_tick = 64;
	if (b->o.lost_quorum_ticks <= 0)
		b->o.lost_quorum_ticks = 5;
	b->quorum = b->o.nodes / 2 + 1;
	b->leader = -1;
	for (int i = 0; i < b->o.nodes; i++) {
		b->nodes[i].up = true;
		b->nodes[i].match = -1;
	}
	model_broker_tick(b); /* the stream exists, with a leader */
	return b;
}

static void unref(struct entry *e)
{
	if (--e->refs == 0) {
		free(e->msg_id);
		free(e->data);
		free(e);
	}
}

static void node_append(struct node *n, struct entry *e)
{
	if (n->len == n->cap) {
		n->cap = n->cap ? 2 * n->cap : 64;
		n->log = xrealloc(n->log, n->cap * sizeof *n->log);
	}
	e->refs++;
	n->log[n->len++] = e;
}

static void node_truncate(struct node *n, uint64_t len)
{
	while (n->len > len)
		unref(n->log[--n->len]);
}

void model_broker_free(struct model_broker *b)
{
	if (!b)
		return;
	for (int i = 0; i < b->o.nodes; i++) {
		node_truncate(&b->nodes[i], 0);
		free(b->nodes[i].log);
	}
	for (uint64_t i = 0; i < b->commit; i++)
		unref(b->committed[i]);
	free(b->committed);
	free(b);
}

void model_broker_set_annotator(struct model_broker *b, model_broker_annotate_fn fn, void *ctx)
{
	b->annotate = fn;
	b->annotate_ctx = ctx;
}

static void model_error(struct model_broker *b, const char *what, uint64_t seq)
{
	if (!b->error[0])
		snprintf(b->error, sizeof b->error, "broker model: %s (sequence %" PRIu64 ", term %" PRIu64 ")", what, seq,
			 b->term);
}

/* A leader that is up answers; a leader that went down is gone for the
 * clients at once, even before the next tick elects another. */
static bool answering(const struct model_broker *b)
{
	return b->leader >= 0 && b->nodes[b->leader].up;
}

/* ---- replication ---- */

static uint64_t last_term(const struct node *n)
{
	return n->len ? n->log[n->len - 1]->term : 0;
}

/* The commit point moves to what a majority holds in this term, once
 * the leader's no-op (after term_start) is on a majority. */
static void advance_commit(struct model_broker *b)
{
	if (b->leader < 0)
		return;
	int64_t m[MODEL_BROKER_MAX_NODES];
	int k = 0;
	for (int i = 0; i < b->o.nodes; i++)
		if (b->nodes[i].match >= 0)
			m[k++] = b->nodes[i].match;
	if (k < b->quorum)
		return;
	/* the quorum-th largest */
	for (int i = 0; i < k; i++)
		for (int j = i + 1; j < k; j++)
			if (m[j] > m[i]) {
				int64_t t = m[i];
				m[i] = m[j];
				m[j] = t;
			}
	uint64_t held = (uint64_t)m[b->quorum - 1];
	if (held < b->term_start || held <= b->commit)
		return;
	const struct node *l = &b->nodes[b->leader];
	if (held > b->cap_committed) {
		b->cap_committed = held > 2 * b->cap_committed ? held : 2 * b->cap_committed;
		b->committed = xrealloc(b->committed, b->cap_committed * sizeof *b->committed);
	}
	for (uint64_t i = b->commit; i < held; i++) {
		l->log[i]->refs++;
		b->committed[i] = l->log[i];
	}
	b->commit = held;
}

/* Replicas that are up and behind copy the leader's log after the
 * prefix they share with it (dropping their own tail beyond it). */
static void replicate(struct model_broker *b)
{
	struct node *l = &b->nodes[b->leader];
	for (int i = 0; i < b->o.nodes; i++) {
		struct node *n = &b->nodes[i];
		if (i == b->leader || !n->up || (n->match >= 0 && (uint64_t)n->match == l->len))
			continue;
		uint64_t p;
		if (n->match >= 0) {
			p = (uint64_t)n->match; /* in sync this term: its log is the leader's prefix */
		} else {
			p = n->len < l->len ? n->len : l->len;
			while (p > 0 && n->log[p - 1] != l->log[p - 1])
				p--;
		}
		b->stats.truncated += n->len - p;
		node_truncate(n, p);
		for (size_t k = 0; k < b->o.catchup_per_tick && n->len < l->len; k++) {
			node_append(n, l->log[n->len]);
			b->stats.caught_up++;
		}
		n->match = (int64_t)n->len;
		if (n->len == l->len)
			n->lost_tail = false;
	}
}

static void elect(struct model_broker *b)
{
	int best = -1;
	for (int i = 0; i < b->o.nodes; i++) {
		const struct node *n = &b->nodes[i];
		if (!n->up)
			continue;
		if (best < 0 || last_term(n) > last_term(&b->nodes[best]) ||
		    (last_term(n) == last_term(&b->nodes[best]) && n->len > b->nodes[best].len))
			best = i;
	}
	b->term++;
	b->leader = best;
	struct node *l = &b->nodes[best];
	b->term_start = l->len;
	for (int i = 0; i < b->o.nodes; i++)
		b->nodes[i].match = -1;
	l->match = (int64_t)l->len;
	b->stats.elections++;
	/* leader completeness: the new leader holds every committed entry,
	 * unless host crashes lost the only copies a majority had (entries
	 * not yet synced): then what it lacks is gone, for every client */
	for (uint64_t i = 0; i < b->commit; i++)
		if (i >= l->len || l->log[i] != b->committed[i]) {
			if (!b->crash_lost) {
				model_error(b, "a leader was elected without a committed entry", i + 1);
				break;
			}
			b->stats.acknowledged_lost += b->commit - i;
			while (b->commit > i)
				unref(b->committed[--b->commit]);
			break;
		}
}

void model_broker_quorumless_leader_steps_down(struct model_broker *b)
{
	if (b->leader >= 0 && model_broker_nodes_up(b) < b->quorum) {
		b->leader = -1;
		b->ticks_without_quorum = 0;
		b->stats.step_downs++;
	}
}

void model_broker_tick(struct model_broker *b)
{
	int up = model_broker_nodes_up(b);
	if (b->leader >= 0 && up < b->quorum)
		b->ticks_without_quorum++;
	else
		b->ticks_without_quorum = 0;
	if (b->leader >= 0 &&
	    (!b->nodes[b->leader].up || b->ticks_without_quorum >= b->o.lost_quorum_ticks)) {
		b->leader = -1;
		b->ticks_without_quorum = 0;
		b->stats.step_downs++;
	}
	if (b->leader < 0 && up >= b->quorum)
		elect(b);
	if (b->leader >= 0) {
		replicate(b);
		advance_commit(b);
	}
	/* the file stores sync on the servers' interval (none: not within a run) */
	b->ticks++;
	if (b->o.sync_every_ticks > 0 && b->ticks % (uint64_t)b->o.sync_every_ticks == 0)
		for (int i = 0; i < b->o.nodes; i++)
			if (b->nodes[i].up)
				b->nodes[i].synced = b->nodes[i].len;
	bool repairing = false;
	for (int i = 0; i < b->o.nodes; i++)
		repairing = repairing || b->nodes[i].lost_tail;
	int holder;
	if (!repairing && model_broker_quorum_prefix(b, &holder) < b->commit)
		model_error(b, "a committed entry is no longer held by a majority", b->commit);
}

/* ---- publishing ---- */

const char *model_broker_answer_name(enum model_broker_answer a)
{
	switch (a) {
	case MODEL_BROKER_STORED: return "stored";
	case MODEL_BROKER_DUPLICATE: return "duplicate";
	case MODEL_BROKER_WRONG_LAST: return "wrong last sequence";
	case MODEL_BROKER_REFUSED: return "refused";
	case MODEL_BROKER_NO_RESPONDERS: return "no responders";
	case MODEL_BROKER_TIMEOUT: return "no PubAck";
	}
	return "?";
}

enum model_broker_answer model_broker_publish(struct model_broker *b, const uint8_t *data, size_t len,
					      const char *msg_id, uint64_t expected_last_seq, int64_t now_us,
					      uint64_t *seq)
{
	b->stats.published++;
	*seq = 0;
	if (b->fail == MODEL_BROKER_FAIL_REFUSE) {
		b->stats.refused++;
		return MODEL_BROKER_REFUSED;
	}
	if (!answering(b)) {
		b->stats.no_responders++;
		return MODEL_BROKER_NO_RESPONDERS;
	}
	struct node *l = &b->nodes[b->leader];
	/* the duplicate window: the leader's messages stored since
	 * now - window, newest first (a log's times never go back) */
	for (uint64_t i = l->len; i > 0 && l->log[i - 1]->stored_us >= now_us - b->o.duplicate_window_us; i--) {
		if (strcmp(l->log[i - 1]->msg_id, msg_id) != 0)
			continue;
		if (i <= b->commit && b->fail != MODEL_BROKER_FAIL_LOSE_ACK) {
			b->stats.duplicates++;
			*seq = i;
			return MODEL_BROKER_DUPLICATE;
		}
		b->stats.timeouts++;
		return MODEL_BROKER_TIMEOUT; /* not committed yet (or its PubAck lost) */
	}
	uint64_t last = l->len;
	if (expected_last_seq != last) {
		b->stats.wrong_last++;
		*seq = last;
		return MODEL_BROKER_WRONG_LAST;
	}
	struct entry *e = xcalloc(1, sizeof *e);
	e->term = b->term;
	e->msg_id = xstrdup(msg_id);
	e->data = xmalloc(len ? len : 1);
	memcpy(e->data, data, len);
	e->len = len;
	e->stored_us = now_us;
	if (b->annotate)
		b->annotate(b->annotate_ctx, data, len, &e->note);
	node_append(l, e);
	l->match = (int64_t)l->len;
	/* the replicas in step with the leader store it at once */
	for (int i = 0; i < b->o.nodes; i++) {
		struct node *n = &b->nodes[i];
		if (i != b->leader && n->up && n->match >= 0 && (uint64_t)n->match == last) {
			node_append(n, e);
			n->match = (int64_t)n->len;
		}
	}
	b->stats.stored++;
	advance_commit(b);
	if (b->fail == MODEL_BROKER_FAIL_LOSE_ACK) {
		b->stats.timeouts++;
		return MODEL_BROKER_TIMEOUT;
	}
	/* the PubAck: only once a majority holds it */
	if (l->len <= b->commit) {
		*seq = l->len;
		return MODEL_BROKER_STORED;
	}
	b->stats.timeouts++;
	return MODEL_BROKER_TIMEOUT;
}

/* ---- reading ---- */

bool model_broker_available(const struct model_broker *b)
{
	return answering(b);
}

int model_broker_info(const struct model_broker *b, uint64_t *first_seq, uint64_t *last_seq)
{
	if (!answering(b))
		return -1;
	*first_seq = b->commit ? 1 : 0;
	*last_seq = b->commit;
	return 0;
}

int model_broker_get(const struct model_broker *b, uint64_t seq, const uint8_t **data, size_t *len)
{
	if (!answering(b))
		return -1;
	if (seq == 0 || seq > b->commit)
		return 0;
	*data = b->committed[seq - 1]->data;
	*len = b->committed[seq - 1]->len;
	return 1;
}

int model_broker_group_get(const struct model_broker *b, uint64_t *position, bool *exists)
{
	if (!answering(b))
		return -1;
	*position = b->group_position;
	*exists = b->group_exists;
	return 0;
}

int model_broker_group_set(struct model_broker *b, uint64_t position)
{
	if (!answering(b))
		return -1;
	b->group_position = position;
	b->group_exists = true;
	return 0;
}

/* ---- the world ---- */

void model_broker_node_down(struct model_broker *b, int node)
{
	if (node >= 0 && node < b->o.nodes)
		b->nodes[node].up = false;
}

void model_broker_node_up(struct model_broker *b, int node)
{
	if (node >= 0 && node < b->o.nodes)
		b->nodes[node].up = true;
}

void model_broker_node_crash(struct model_broker *b, int node)
{
	if (node < 0 || node >= b->o.nodes)
		return;
	struct node *n = &b->nodes[node];
	n->up = false;
	n->match = -1;
	if (n->len <= n->synced)
		return;
	/* what a quorum had and this node loses: committed entries */
	if (n->synced < b->commit) {
		n->lost_tail = true;
		b->crash_lost = true;
	}
	b->stats.crash_dropped += n->len - n->synced;
	node_truncate(n, n->synced);
}

bool model_broker_node_is_up(const struct model_broker *b, int node)
{
	return node >= 0 && node < b->o.nodes && b->nodes[node].up;
}

int model_broker_nodes(const struct model_broker *b)
{
	return b->o.nodes;
}

int model_broker_nodes_up(const struct model_broker *b)
{
	int up = 0;
	for (int i = 0; i < b->o.nodes; i++)
		up += b->nodes[i].up;
	return up;
}

int model_broker_quorum(const struct model_broker *b)
{
	return b->quorum;
}

int model_broker_leader(const struct model_broker *b)
{
	return b->leader;
}

void model_broker_fail_publishes(struct model_broker *b, enum model_broker_failure how)
{
	b->fail = how;
}

/* ---- the invariants' view ---- */

/* How many nodes hold node a's entry at seq (1-based). */
static int holders(const struct model_broker *b, int a, uint64_t seq)
{
	const struct entry *e = b->nodes[a].log[seq - 1];
	int n = 0;
	for (int i = 0; i < b->o.nodes; i++)
		n += b->nodes[i].len >= seq && b->nodes[i].log[seq - 1] == e;
	return n;
}

uint64_t model_broker_quorum_prefix(const struct model_broker *b, int *node)
{
	uint64_t best = 0;
	*node = -1;
	for (int a = 0; a < b->o.nodes; a++) {
		/* log matching: holding a's entry at seq means holding a's
		 * prefix through seq, so the count only falls as seq grows */
		uint64_t lo = 0, hi = b->nodes[a].len;
		while (lo < hi) {
			uint64_t mid = lo + (hi - lo + 1) / 2;
			if (holders(b, a, mid) >= b->quorum)
				lo = mid;
			else
				hi = mid - 1;
		}
		if (lo > best || *node < 0) {
			best = lo;
			*node = a;
		}
	}
	return best;
}

uint64_t model_broker_log_length(const struct model_broker *b, int node)
{
	return node >= 0 && node < b->o.nodes ? b->nodes[node].len : 0;
}

const uint8_t *model_broker_log_entry(const struct model_broker *b, int node, uint64_t seq, size_t *len,
				      struct model_broker_note *note)
{
	if (node < 0 || node >= b->o.nodes || seq == 0 || seq > b->nodes[node].len)
		return NULL;
	const struct entry *e = b->nodes[node].log[seq - 1];
	*len = e->len;
	if (note)
		*note = e->note;
	return e->data;
}

uint64_t model_broker_committed(const struct model_broker *b)
{
	return b->commit;
}

const uint8_t *model_broker_committed_entry(const struct model_broker *b, uint64_t seq, size_t *len)
{
	if (seq == 0 || seq > b->commit)
		return NULL;
	*len = b->committed[seq - 1]->len;
	return b->committed[seq - 1]->data;
}

const struct model_broker_stats *model_broker_stats(const struct model_broker *b)
{
	return &b->stats;
}

const char *model_broker_error(const struct model_broker *b)
{
	return b->error;
}

unsigned model_broker_next_run(struct model_broker *b)
{
	return ++b->runs;
}

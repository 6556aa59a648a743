/*
 * model_broker.h - the simulator's model of a replicated message broker:
 * one NATS JetStream stream of R replicas (3 by default), as Trellara
 * uses it (DESIGN "The stream on NATS JetStream").  Pure C, no libnats,
 * no clock (every time is an argument), no I/O, no globals.
 *
 * Replicas.  Each node keeps a log of messages (bytes, Nats-Msg-Id, the
 * leader's term when it was appended), is up or down, and keeps its log
 * while down (a process that stops and starts again, not a disk lost).
 * A leader, elected among the nodes that are up when a majority is up
 * (the quorum), serves every publish and every read.  A leader that goes
 * down is gone at the next tick; one that is up but lost its quorum
 * keeps leading for lost_quorum_ticks ticks (NATS's leader notices only
 * after a while), storing what is published on its own, without a
 * PubAck.  It is the up node
 * whose log is the most up to date (last term, then length), as Raft's
 * vote rule makes it.  A publish is appended to the leader's log and to
 * every up replica that has caught up with it; it is committed (and gets
 * its PubAck) only once a majority of the nodes hold it, in the leader's
 * term.  A new leader's earlier entries are committed once a majority
 * holds them in its term (Raft commits them with the leader's first entry
 * of its term; JetStream's leader sends one at once, modelled as a no-op
 * that follows the log it was elected with).  Replicas that are up but
 * behind (back from down, or passed over) catch up from the leader at
 * each tick, at most catchup_per_tick messages at a time, after dropping
 * any tail of theirs that the leader does not have (uncommitted entries of
 * an older term).  Committed entries are never dropped; the model checks
 * that itself (model_broker_error).
 *
 * Publishing, as the JetStream server answers a message carrying
 * Nats-Msg-Id and Nats-Expected-Last-Sequence:
 *  - no leader (quorum lost, or the leader just lost): nothing stored,
 *    MODEL_BROKER_NO_RESPONDERS;
 *  - a message id the leader's log holds, stored within the duplicate
 *    window: not stored again; MODEL_BROKER_DUPLICATE with the original
 *    sequence once that one is committed (else MODEL_BROKER_TIMEOUT);
 *  - the leader's last sequence (committed or not) is not the expected
 *    one: MODEL_BROKER_WRONG_LAST (another writer, or a stale one);
 *  - else appended: MODEL_BROKER_STORED with its sequence when a majority
 *    holds it, else MODEL_BROKER_TIMEOUT (the leader holds it without a
 *    quorum: no PubAck; it may still be committed later, or dropped when
 *    another leader is elected without it).
 * Injected publish failures (model_broker_fail_publishes): REFUSE answers
 * MODEL_BROKER_REFUSED and stores nothing (a full stream, a storage
 * error); LOSE_ACK stores and commits as usual but the PubAck is lost
 * (MODEL_BROKER_TIMEOUT): the publisher's retry is then a duplicate.
 *
 * Reading (what a client sees): the committed messages 1..last, through
 * the leader; none without one (model_broker_available false).  The
 * consumer group's position (the groups stream) is one value, read and
 * written through the leader too.
 *
 * Simplified against real JetStream: no subjects, headers other than the
 * message id, limits or retention; the duplicate window and the answers
 * are immediate (no PubAck wait, no timeouts in flight: a publish is
 * answered at once, and an in-flight proposal is never seen as one);
 * replication to a caught-up replica is immediate, catch-up is by tick;
 * a node's log survives its stop (model_broker_node_down); only
 * model_broker_node_crash loses what its file store had not synced, and
 * no network partition separates nodes that are up (a node is up or
 * down, for everyone at once).
 *
 * Memory: owns every message; pointers handed out stay valid until the
 * next call that changes the broker (publish, tick, node up/down).
 */
#ifndef TRELLARA_MODEL_BROKER_H
#define TRELLARA_MODEL_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_BROKER_MAX_NODES 5
/* JetStream's default duplicate window: two minutes */
#define MODEL_BROKER_DEFAULT_WINDOW_US (120 * INT64_C(1000000))

struct model_broker_options {
	int nodes;                   /* replicas, 1..MODEL_BROKER_MAX_NODES (3) */
	int64_t duplicate_window_us; /* Nats-Msg-Id duplicates dropped within this (0: the default) */
	size_t catchup_per_tick;     /* messages a replica behind copies per tick (0: 64) */
	int lost_quorum_ticks;       /* a leader that is up without a quorum steps down after this many ticks (0: 5) */
	int sync_every_ticks;        /* each node's file store syncs every this many ticks (0: never within a run,
				      * as nats-server 2.9.10's two-minute interval; model_broker_node_crash) */
};
void model_broker_options_default(struct model_broker_options *o);

/* The publisher's summary of a message, kept beside it for the
 * simulator's invariants (the broker never reads it): the simulator's
 * is the commit LSN of a transaction's frame (0 for others) and the
 * source position the frame records. */
struct model_broker_note {
	uint64_t commit_lsn;
	uint64_t position;
};
typedef void (*model_broker_annotate_fn)(void *ctx, const uint8_t *data, size_t len, struct model_broker_note *note);

struct model_broker;

struct model_broker *model_broker_new(const struct model_broker_options *o);
/* A new capture run's number (1, 2, ...): its Nats-Msg-Id namespace, as
 * capture_jetstream.c draws a random one at open. */
unsigned model_broker_next_run(struct model_broker *b);
void model_broker_free(struct model_broker *b);
/* Every message published from now on is annotated (NULL: none). */
void model_broker_set_annotator(struct model_broker *b, model_broker_annotate_fn fn, void *ctx);

/* ---- what the clients do ---- */

enum model_broker_answer {
	MODEL_BROKER_STORED,        /* PubAck: *seq */
	MODEL_BROKER_DUPLICATE,     /* PubAck (duplicate): the original's *seq */
	MODEL_BROKER_WRONG_LAST,    /* refused: *seq is the leader's last sequence */
	MODEL_BROKER_REFUSED,       /* refused for now: nothing stored */
	MODEL_BROKER_NO_RESPONDERS, /* no leader: nothing stored */
	MODEL_BROKER_TIMEOUT        /* no PubAck: maybe stored, maybe not */
};
const char *model_broker_answer_name(enum model_broker_answer a);

enum model_broker_answer model_broker_publish(struct model_broker *b, const uint8_t *data, size_t len,
					      const char *msg_id, uint64_t expected_last_seq, int64_t now_us,
					      uint64_t *seq);

/* A leader answers (reads, stream info, publishes). */
bool model_broker_available(const struct model_broker *b);
/* The stream's state as the leader says it: 0, or -1 without a leader. */
int model_broker_info(const struct model_broker *b, uint64_t *first_seq, uint64_t *last_seq);
/* Committed message seq (1-based) through the leader: 1 with *data,
 * *len; 0 when the stream has no such message; -1 without a leader. */
int model_broker_get(const struct model_broker *b, uint64_t seq, const uint8_t **data, size_t *len);
/* The consumer group's position: 0, or -1 without a leader. */
int model_broker_group_get(const struct model_broker *b, uint64_t *position, bool *exists);
int model_broker_group_set(struct model_broker *b, uint64_t position);

/* ---- what the world does ---- */

void model_broker_node_down(struct model_broker *b, int node);
/* The node's host crashes (an OS crash, a power loss): the node goes down
 * and keeps only the prefix of its log its file store had synced
 * (sync_every_ticks).  Committed entries it loses are still held by the
 * nodes that have them; while the node has not caught up again, the
 * majority check is off (a host crash is not a model error).  A leader
 * elected without committed entries after such a loss (the only copies
 * were lost: one replica, or crashes of a majority) loses them for every
 * client: the committed stream is cut (stats.acknowledged_lost). */
void model_broker_node_crash(struct model_broker *b, int node);
void model_broker_node_up(struct model_broker *b, int node);
bool model_broker_node_is_up(const struct model_broker *b, int node);
int model_broker_nodes(const struct model_broker *b);
int model_broker_nodes_up(const struct model_broker *b);
int model_broker_quorum(const struct model_broker *b);
/* The leader's node, or -1. */
int model_broker_leader(const struct model_broker *b);

enum model_broker_failure {
	MODEL_BROKER_FAIL_NONE,
	MODEL_BROKER_FAIL_REFUSE,  /* every publish refused, nothing stored */
	MODEL_BROKER_FAIL_LOSE_ACK /* every publish stored as usual, its PubAck lost */
};
void model_broker_fail_publishes(struct model_broker *b, enum model_broker_failure how);

/* Time passes for the servers: a leader that lost its quorum steps
 * down, a leader is elected when a quorum is up, replicas behind catch
 * up, the commit point moves. */
void model_broker_tick(struct model_broker *b);
/* A leader without a quorum steps down now (its lost-quorum timer ran
 * out early); nothing when it has one or there is none. */
void model_broker_quorumless_leader_steps_down(struct model_broker *b);

/* ---- what the invariants see (every node's log, whatever is up) ---- */

/* The length of the longest prefix of the stream a majority of the
 * nodes holds (the same entries: same sequence, same term), and a node
 * holding it (-1 when empty). */
uint64_t model_broker_quorum_prefix(const struct model_broker *b, int *node);
/* A node's entry seq (1-based, <= its log's length): its bytes and note. */
uint64_t model_broker_log_length(const struct model_broker *b, int node);
const uint8_t *model_broker_log_entry(const struct model_broker *b, int node, uint64_t seq, size_t *len,
				      struct model_broker_note *note);
/* The committed stream, whatever is up: its last sequence, and message
 * seq (NULL beyond it). */
uint64_t model_broker_committed(const struct model_broker *b);
const uint8_t *model_broker_committed_entry(const struct model_broker *b, uint64_t seq, size_t *len);

struct model_broker_stats {
	/* publishes, and their answers (duplicates: answered with the
	 * original's sequence; timeouts: no PubAck, whatever stored) */
	uint64_t published, stored, duplicates, wrong_last, refused, no_responders, timeouts;
	uint64_t elections, step_downs, truncated, caught_up;
	uint64_t crash_dropped;     /* entries host crashes dropped from nodes' logs */
	uint64_t acknowledged_lost; /* committed entries no node had any more: gone */
};
const struct model_broker_stats *model_broker_stats(const struct model_broker *b);
/* Non-empty when the model broke its own rules (a committed entry lost
 * or changed): the simulator reports it as a failure of the model. */
const char *model_broker_error(const struct model_broker *b);

#endif

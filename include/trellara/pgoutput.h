/*
 * pgoutput.h - decoder for PostgreSQL's pgoutput logical replication
 * messages, protocol versions 1 and 2.  Bytes in, structs out: no libpq, no
 * I/O, no logging.
 *
 * Three layers, each usable alone:
 *
 *  pgoutput_decode()       one message (the payload of one XLogData) into a
 *                          struct pgoutput_message.  It is told whether the
 *                          message sits inside a stream block (protocol 2,
 *                          between Stream Start and Stream Stop), where
 *                          Relation, Type, Insert, Update, Delete, Truncate
 *                          and Message carry a leading Int32 xid.
 *  struct pgoutput_relcache   owned relation descriptors keyed by relid,
 *                          fed with Relation messages; checks a row message
 *                          against the descriptor it refers to.
 *  struct pgoutput_session   both of the above plus message order: Begin /
 *                          Commit and Stream Start / Stop nesting, which
 *                          streamed transactions are open, Commit LSN equal
 *                          to the Begin's final LSN.  Capture feeds it every
 *                          message of one replication connection.
 *
 * Ownership.  Everything a decoded message points to is BORROWED: names,
 * column values and message contents point into the caller's input buffer
 * and live as long as it does; arrays (columns, attributes, relids) live in
 * scratch storage owned by the struct pgoutput_message and are overwritten
 * by the next decode into it.  Copy what you keep.  Names are NUL-terminated
 * inside the input (checked); column values and Message contents are not
 * terminated (use len).  The relcache and session own their descriptors.
 *
 * Guarantees.  The decoder never reads outside [buf, buf + len), whatever
 * the bytes; it consumes every byte (trailing bytes are an error); it checks
 * every count against the bytes that remain before allocating, so memory is
 * bounded by the input's size; it checks every flag, tag, column kind and
 * replica identity against the values PostgreSQL writes.  Only messages of
 * protocol versions 1 and 2 are accepted: two-phase (version 3) and
 * parallel-streaming (version 4) messages are refused, never guessed at.
 *
 * Failure.  Functions return 0 or -1 (fail closed).  On -1, err (errlen
 * bytes, may be NULL) holds one line naming the message, the field and the
 * byte offset within the message, e.g.
 *   pgoutput: truncated Insert message: need 4 bytes for relation id at byte 1, have 0
 * Nothing is logged here: the decoder does not know the LSN or the slot, so
 * the caller logs the text once, with that context.  After a failure, out
 * is in an unspecified (but releasable) state and a session's state is as
 * before the rejected message.
 */
#ifndef TRELLARA_PGOUTPUT_H
#define TRELLARA_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGOUTPUT_MIN_PROTO_VERSION 1
#define PGOUTPUT_MAX_PROTO_VERSION 2
/* MaxHeapAttributeNumber: no relation or row has more columns. */
#define PGOUTPUT_MAX_COLUMNS 1600
/* A useful size for the err buffers. */
#define PGOUTPUT_ERR_LEN 256

/* Message types: the first byte of a message. */
enum pgoutput_msg_type {
	PGOUTPUT_BEGIN = 'B',
	PGOUTPUT_COMMIT = 'C',
	PGOUTPUT_ORIGIN = 'O',
	PGOUTPUT_RELATION = 'R',
	PGOUTPUT_TYPE = 'Y',
	PGOUTPUT_INSERT = 'I',
	PGOUTPUT_UPDATE = 'U',
	PGOUTPUT_DELETE = 'D',
	PGOUTPUT_TRUNCATE = 'T',
	PGOUTPUT_MESSAGE = 'M',
	PGOUTPUT_STREAM_START = 'S', /* protocol 2 */
	PGOUTPUT_STREAM_STOP = 'E',
	PGOUTPUT_STREAM_COMMIT = 'c',
	PGOUTPUT_STREAM_ABORT = 'A'
};

enum pgoutput_column_kind {
	PGOUTPUT_COLUMN_NULL = 'n',
	PGOUTPUT_COLUMN_UNCHANGED_TOAST = 'u', /* only in an Update's new tuple */
	PGOUTPUT_COLUMN_TEXT = 't',
	PGOUTPUT_COLUMN_BINARY = 'b' /* binary 'true' subscriptions */
};

/* Which old tuple an Update or Delete carries. */
enum pgoutput_old_kind {
	PGOUTPUT_OLD_NONE = 0,
	PGOUTPUT_OLD_KEY = 'K',  /* replica identity columns; others null */
	PGOUTPUT_OLD_FULL = 'O'  /* REPLICA IDENTITY FULL: the whole row */
};

enum pgoutput_replident {
	PGOUTPUT_REPLIDENT_DEFAULT = 'd',
	PGOUTPUT_REPLIDENT_NOTHING = 'n',
	PGOUTPUT_REPLIDENT_FULL = 'f',
	PGOUTPUT_REPLIDENT_INDEX = 'i'
};

struct pgoutput_column {
	enum pgoutput_column_kind kind;
	uint32_t len;         /* text / binary only, else 0 */
	const uint8_t *value; /* borrowed, not NUL-terminated; NULL unless text / binary */
};

struct pgoutput_tuple {
	int ncols;
	const struct pgoutput_column *cols; /* message scratch storage */
};

/* One column of a Relation message. */
struct pgoutput_attribute {
	const char *name; /* borrowed */
	uint32_t type_oid;
	int32_t typmod;
	bool key; /* part of the replica identity (every column under FULL) */
};

struct pgoutput_message {
	enum pgoutput_msg_type type;
	/* Begin, Stream Start / Commit / Abort: the transaction.  Inside a
	 * stream block, the xid prefix of a change: the (sub)transaction that
	 * made it, which a Stream Abort with that subxid discards. */
	bool has_xid;
	uint32_t xid;
	union {
		struct {
			uint64_t final_lsn; /* the commit record's LSN */
			int64_t commit_ts;  /* microseconds since 2000-01-01 UTC */
		} begin;
		struct { /* Commit and Stream Commit */
			uint64_t commit_lsn;
			uint64_t end_lsn;
			int64_t commit_ts;
		} commit;
		struct {
			uint64_t origin_lsn; /* 0 when sent after a Stream Start */
			const char *name;
		} origin;
		struct {
			uint32_t relid;
			const char *nspname; /* "" means pg_catalog */
			const char *relname;
			enum pgoutput_replident replident;
			int natts;
			const struct pgoutput_attribute *atts;
		} relation;
		struct { /* Type */
			uint32_t type_oid;
			const char *nspname; /* of the base type for a domain; "" = pg_catalog */
			const char *typname;
		} datatype;
		struct { /* Insert, Update, Delete */
			uint32_t relid;
			enum pgoutput_old_kind old_kind; /* always NONE for Insert, never for Delete */
			struct pgoutput_tuple old_tuple; /* when old_kind != NONE */
			struct pgoutput_tuple new_tuple; /* Insert and Update */
			/* Set by pgoutput_session_decode(), NULL from pgoutput_decode():
			 * the cached descriptor, valid until the next Relation message
			 * for this relid. */
			const struct pgoutput_relation *relation;
		} change;
		struct {
			bool cascade;
			bool restart_identity;
			int nrelids;
			const uint32_t *relids; /* message scratch storage */
		} truncate;
		struct {
			bool transactional;
			uint64_t lsn;
			const char *prefix;
			uint32_t len;
			const uint8_t *content; /* borrowed, not NUL-terminated */
		} message;
		struct {
			bool first_segment;
		} stream_start;
		struct {
			uint32_t subxid; /* == xid when the whole transaction aborted */
		} stream_abort;
	};

	/* Scratch storage the views above point into (owned). */
	struct pgoutput_column *old_store, *new_store;
	size_t old_cap, new_cap;
	struct pgoutput_attribute *att_store;
	size_t att_cap;
	uint32_t *relid_store;
	size_t relid_cap;
};

void pgoutput_message_init(struct pgoutput_message *msg);
void pgoutput_message_release(struct pgoutput_message *msg);

/* "Insert", "Stream Abort", ... for any type byte pgoutput has ever
 * defined (including versions 3 and 4); NULL for anything else. */
const char *pgoutput_type_name(uint8_t type);

/* Decodes the message buf[0..len) into out (initialised with
 * pgoutput_message_init).  in_stream_block: the message comes between
 * Stream Start and Stream Stop (needs proto_version 2). */
int pgoutput_decode(const uint8_t *buf, size_t len, int proto_version, bool in_stream_block,
		    struct pgoutput_message *out, char *err, size_t errlen);

/* ---- relation cache ---------------------------------------------------- */

struct pgoutput_relation_column {
	char *name; /* owned */
	uint32_t type_oid;
	int32_t typmod;
	bool key;
};

struct pgoutput_relation {
	uint32_t relid;
	char *nspname; /* owned; "pg_catalog" when the message sent "" */
	char *relname; /* owned */
	enum pgoutput_replident replident;
	int natts;
	struct pgoutput_relation_column *columns; /* owned, natts entries */
};

struct pgoutput_relcache {
	struct pgoutput_relation **slots; /* owned; open addressing by relid */
	size_t cap;
	size_t count;
};

void pgoutput_relcache_init(struct pgoutput_relcache *cache);
void pgoutput_relcache_free(struct pgoutput_relcache *cache);
/* Adds or replaces the descriptor of a decoded Relation message.  *changed
 * (may be NULL): a descriptor was cached for that relid and differed.
 * Descriptors in stream blocks apply in arrival order like any other.
 * *relation (may be NULL) receives the cached descriptor.  Fails only when
 * msg is not a Relation message. */
int pgoutput_relcache_apply(struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, bool *changed, char *err,
			    size_t errlen);
const struct pgoutput_relation *pgoutput_relcache_lookup(const struct pgoutput_relcache *cache,
							 uint32_t relid);
/* Checks a decoded Insert / Update / Delete / Truncate against the cache:
 * every relid is known; every tuple has the relation's column count; an
 * old key (K) needs a replica identity of default or index and carries
 * values for key columns only, an old tuple (O) needs FULL.  *relation
 * (may be NULL) receives the descriptor of an Insert / Update / Delete.
 * Other message types pass. */
int pgoutput_relcache_check(const struct pgoutput_relcache *cache, const struct pgoutput_message *msg,
			    const struct pgoutput_relation **relation, char *err, size_t errlen);

/* ---- session: one replication connection's message sequence ------------ */

enum pgoutput_session_state {
	PGOUTPUT_SESSION_IDLE = 0,
	PGOUTPUT_SESSION_IN_TRANSACTION, /* after Begin, until Commit */
	PGOUTPUT_SESSION_IN_STREAM_BLOCK /* after Stream Start, until Stream Stop */
};

struct pgoutput_session {
	int proto_version;
	enum pgoutput_session_state state;
	uint32_t xid;            /* of the open transaction or stream block */
	uint64_t final_lsn;      /* the open transaction's Begin */
	unsigned long block_messages; /* since Begin / Stream Start: an Origin must come first */
	bool relation_changed;   /* the last Relation replaced a different descriptor */
	uint32_t *open_streams;  /* owned: streamed transactions neither committed nor aborted */
	size_t nopen_streams, open_streams_cap;
	struct pgoutput_relcache relcache;
};

/* proto_version 1 or 2, as sent in START_REPLICATION. */
int pgoutput_session_init(struct pgoutput_session *session, int proto_version, char *err,
			  size_t errlen);
void pgoutput_session_free(struct pgoutput_session *session);
/* A new replication connection: the server re-sends Relation messages and
 * every streamed transaction from its first segment, and sends no Stream
 * Abort for one that aborted meanwhile, so anything open (and every
 * descriptor) is forgotten; the caller drops its partial streamed
 * transactions too. */
void pgoutput_session_reset(struct pgoutput_session *session);
/* Decodes the next message of the connection: pgoutput_decode() with the
 * right stream-block flag, then the order rules above, then the relcache
 * (a Relation is applied, a row message checked and given its descriptor). */
int pgoutput_session_decode(struct pgoutput_session *session, const uint8_t *buf, size_t len,
			    struct pgoutput_message *out, char *err, size_t errlen);
/* Is xid a streamed transaction that is open (started, not yet committed
 * or aborted)? */
bool pgoutput_session_stream_open(const struct pgoutput_session *session, uint32_t xid);

#endif

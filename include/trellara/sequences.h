/*
 * sequences.h - the flow's sequences on the source and the target
 * (trellara-sequences(1)); the one module snapshot, `trellara sequences`
 * and verify use to find, read and set them.  The rule of what to set is
 * seqstate.h's (pure).
 *
 * The flow's sequences: every sequence owned by a column of a flow table
 * on the source (pg_depend deptype 'a', serial and OWNED BY, or 'i',
 * identity columns) and every sequence a flow table's column default
 * calls (DEFAULT nextval('...') without OWNED BY: pg_depend from the
 * pg_attrdef row), then each one dataset.sequences lists.  A column's
 * sequence maps to the target's sequence of the same table column (the
 * one it owns, pg_get_serial_sequence on the target, so identity
 * sequences with other generated names map right; else the one its
 * default calls; else one of the same name); a listed one to the
 * target's sequence of the same schema-qualified name.
 *
 * States are read on the source with pg_get_sequence_data(regclass) when
 * pg_catalog has that function (PostgreSQL 19), else with SELECT
 * last_value, is_called FROM the sequence (quoted); never with
 * pg_sequence_last_value(), NULL when is_called is false.  Sequences are
 * not transactional: a state is the sequence's at the moment it is read.
 *
 * Errors are logged once where they are found; functions return 0, -1
 * when a server fails, or SEQUENCES_CONFIG when the flow's sequences do
 * not fit (a listed sequence missing on a side, a value outside the
 * target sequence's range): main exits 78 on it.
 */
#ifndef TRELLARA_SEQUENCES_H
#define TRELLARA_SEQUENCES_H

#include "trellara/config.h"
#include "trellara/seqstate.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { SEQUENCES_CONFIG = 1 };

struct jsonw;

struct flow_sequence {
	char *source_name;   /* owned: "schema.name" on the source (unquoted) */
	char *target_name;   /* owned: "schema.name" on the target; NULL: the target has none for it */
	char *source_quoted; /* owned: "schema"."name", for SQL */
	char *target_quoted; /* owned; NULL with target_name */
	char *owned_by;      /* owned: "schema.table.column" it belongs to on the source (owns it, or its
			      * default calls it: by_default); NULL: listed only */
	bool by_default;     /* the column's default calls it; no column owns it */
	bool listed;         /* named in dataset.sequences */
	/* sequences_read() */
	bool read;
	struct seq_state source, target;
	struct seq_params target_params;
	/* sequences_sync() */
	struct seq_decision decision;
	struct seq_state target_after;
};

struct flow_sequences {
	struct flow_sequence *items; /* owned */
	size_t n;
};

/* Finds the flow's sequences on both sides (*out freed with
 * sequences_free, also on failure).  A listed sequence missing on the
 * source or the target is SEQUENCES_CONFIG, each one named. */
int sequences_resolve(PGconn *src, PGconn *dst, const struct flow_config *cfg, struct flow_sequences *out);
/* Reads the state of each sequence that has a target sequence, on both
 * sides, and the target's increment and range. */
int sequences_read(PGconn *src, PGconn *dst, struct flow_sequences *seqs);
/* Decides (seq_decide with margin) and sets each target sequence that is
 * behind; fills decision and target_after.  A sequence out of the
 * target's range is logged and left, and the result is SEQUENCES_CONFIG
 * after every other was done. */
int sequences_sync(PGconn *dst, struct flow_sequences *seqs, uint64_t margin);
void sequences_free(struct flow_sequences *seqs);

/* Where the target stands against the source: "behind", "same", "ahead",
 * or "no_target" (no target sequence). */
const char *sequences_state_name(const struct flow_sequence *s);
/* A state as text: "42", or "1 (not called yet)". */
void sequences_format_state(const struct seq_state *st, char *buf, size_t len);
/* The fields every JSON object of a sequence has: sequence,
 * target_sequence, owned_by, listed, source, target (the state read). */
void sequences_json_fields(struct jsonw *w, const struct flow_sequence *s);
void sequences_json_state(struct jsonw *w, const char *key, const struct seq_state *st);
/* The line sync prints for s (snapshot and `trellara sequences sync`):
 * "sequence NAME[ (target NAME)]: source V, target BEFORE -> AFTER (ACTION)". */
void sequences_print_synced(FILE *out, const struct flow_sequence *s);

#endif

/*
 * metrics.h - a tiny Prometheus text-format (exposition format 0.0.4)
 * writer for the daemons' metrics files and `trellara status --format
 * prometheus`.
 *
 * A struct metrics collects samples; every sample carries the labels
 * flow="SOURCE_ID:DATASET_ID" and source="SOURCE_ID" (set once, at
 * metrics_init) and at most one more label of its own (component="capture",
 * state="streaming", ...).  Samples that share a name form one family:
 * "# HELP" and "# TYPE" are written once, before the family's first
 * sample, and every sample of a family must have the same help and type.
 * Names are trellara_... with the unit in the name (_bytes, _seconds,
 * _total for counters); metrics_add_* refuses anything else, so a typo
 * fails in the unit tests and not in somebody's Prometheus.
 *
 * Values are doubles (NaN and +-Inf written as Prometheus spells them) or
 * exact unsigned 64-bit integers.  A value that is unknown is left out,
 * never written as 0: the reader of a metrics file cannot tell a zero
 * from "we could not find out".
 *
 * metrics_write_file() replaces DIR/PROGRAM.prom atomically: DIR is
 * created (0700) if missing, the text goes to DIR/PROGRAM.prom.tmp (0600),
 * then rename(2).  A reader (node_exporter's textfile collector, trellara
 * status) sees the old file or the new one, never a half-written one.
 * It does not fsync unless asked: metrics are derived data replaced every
 * few seconds, and an fsync per update would compete with the stream's
 * own fdatasyncs on the same disk; after a crash a stale or missing
 * metrics file is harmless and the next write replaces it.
 *
 * Failures are logged once (with the path and %m) and returned as -1.
 * Nothing here is global: the caller owns the struct.
 */
#ifndef TRELLARA_METRICS_H
#define TRELLARA_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metric_type { METRIC_GAUGE = 0, METRIC_COUNTER };

struct metric_sample {
	char *name;        /* owned */
	char *help;        /* owned */
	enum metric_type type;
	char *label_name;  /* owned; NULL: only flow and source */
	char *label_value; /* owned */
	bool is_integer;
	uint64_t u64;
	double value;
};

struct metrics {
	char *flow;   /* owned: the flow label */
	char *source; /* owned: the source label */
	struct metric_sample *samples; /* owned, in the order added */
	size_t n, cap;
};

void metrics_init(struct metrics *m, const char *flow, const char *source);
void metrics_free(struct metrics *m);
/* Forget the samples (the labels stay): for a daemon that rebuilds the
 * set before every write. */
void metrics_reset(struct metrics *m);

/* Add one sample.  label_name/label_value: one extra label, or NULL.
 * Returns -1 (logged) for a bad name, a bad label name, a counter whose
 * name does not end in _total, or a help/type that disagrees with an
 * earlier sample of the same name. */
int metrics_add_double(struct metrics *m, const char *name, const char *help, enum metric_type type,
		       const char *label_name, const char *label_value, double value);
int metrics_add_u64(struct metrics *m, const char *name, const char *help, enum metric_type type,
		    const char *label_name, const char *label_value, uint64_t value);

/* The whole exposition text, newly allocated and NUL-terminated. */
char *metrics_render(const struct metrics *m, size_t *len);

/* Atomically replace dir/program.prom with metrics_render(m); durable:
 * fsync the file before the rename and the directory after it. */
int metrics_write_file(const char *dir, const char *program, const struct metrics *m, bool durable);

/* A daemon's metrics file (capture.prom, applyd.prom), rewritten at most
 * once a second.  Every field is borrowed and set by the caller; last_us
 * starts at 0.  metrics_publish() does nothing when dir is NULL or less
 * than a second (on the caller's monotonic clock, now_us) passed since the
 * last write, unless force; otherwise it builds a struct metrics with the
 * flow and source labels, lets fill add the samples, and writes the file
 * (not durable: see above).  A failure is logged by metrics_write_file()
 * and not retried before the next second. */
struct metrics_publisher {
	const char *dir;
	const char *program;
	const char *flow, *source;
	int64_t last_us;
};
void metrics_publish(struct metrics_publisher *p, int64_t now_us, bool force,
		     void (*fill)(struct metrics *m, int64_t now_us, void *arg), void *arg);

/* True for a valid metric name (Prometheus rules) that starts with
 * "trellara_". */
bool metrics_name_valid(const char *name);

#endif

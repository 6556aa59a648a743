/*
 * stream_cli.h - the subcommands of trellara-stream.  main.c parses the
 * command line into struct stream_cli_options and calls one of these;
 * each returns the process exit code (include/trellara/defaults.h).
 */
#ifndef TRELLARA_STREAM_CLI_H
#define TRELLARA_STREAM_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stream_cli_options {
	const char *dir;               /* resolved stream directory */
	const char *source_id, *flow;  /* from the flow file, or NULL */
	const char *const *protected_groups;
	size_t n_protected;
	bool protect_all_groups;       /* --dir without --protect: every group */
	uint64_t segment_bytes;
	uint64_t min_free_bytes;
	uint64_t max_batch_messages;
	bool compression_zlib;         /* append: the flow file's stream.compression is zlib */
	bool json;
	bool raw;
	bool follow;
	bool apply;
	bool no_groups_ok;             /* retention: no consumer needs the data */
	bool have_from, have_count, have_offset;
	uint64_t from, count, offset;
	const char *lsn;
	volatile sig_atomic_t *stop;   /* set by main's signal handler */
};

int stream_cli_inspect(const struct stream_cli_options *o);
int stream_cli_read(const struct stream_cli_options *o);
int stream_cli_locate(const struct stream_cli_options *o);
int stream_cli_retention(const struct stream_cli_options *o);
int stream_cli_append(const struct stream_cli_options *o);

/* stream.kind jetstream (stream_jetstream.c, the one file on libnats):
 * init creates the flow's JetStream stream per jetstream_policy.h or
 * validates the existing one (78 when refused); inspect reports its state,
 * peers and consumers (66 when it does not exist).  Both exit 69 when the
 * servers or the stream's quorum do not answer in time. */
struct flow_config;
int stream_cli_jetstream_init(const struct flow_config *config, bool json);
int stream_cli_jetstream_inspect(const struct flow_config *config, bool json);
/* retention of a JetStream stream: removes the messages every protected
 * group (stream.protected_groups, mirrored positions) has passed, never
 * the last one; only reports unless apply. */
int stream_cli_jetstream_retention(const struct flow_config *config, bool apply, bool json);

#endif

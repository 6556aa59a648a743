/*
 * seqcmd.c - `trellara sequences sync` and `list` (seqcmd.h): the flow's
 * sequences found, read and set by sequences.h, one line (or one JSON
 * object) per sequence.
 */
#include "seqcmd.h"

#include "trellara/defaults.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/sequences.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum command { COMMAND_SYNC, COMMAND_LIST };

/* "public.t_id_seq" or "public.t_id_seq (target public.other)" */
static void print_name(const struct flow_sequence *s)
{
	printf("sequence %s", s->source_name);
	if (s->target_name && strcmp(s->target_name, s->source_name) != 0)
		printf(" (target %s)", s->target_name);
}

static const char *action_name(const struct flow_sequence *s)
{
	return s->read ? seq_action_name(s->decision.action) : "no_target";
}

static void print_text(const struct seqcmd_options *o, enum command command, const struct flow_sequences *seqs)
{
	size_t counts[5] = { 0 }; /* set, same, ahead, out of range, no target */
	for (size_t i = 0; i < seqs->n; i++) {
		const struct flow_sequence *s = &seqs->items[i];
		if (command == COMMAND_SYNC) {
			counts[s->read ? (size_t)s->decision.action : 4]++;
			sequences_print_synced(stdout, s);
			continue;
		}
		print_name(s);
		if (!s->read) {
			printf(": no target sequence (the target's column %s has none)\n", s->owned_by ? s->owned_by : "?");
			continue;
		}
		char source[48], target[48];
		sequences_format_state(&s->source, source, sizeof source);
		sequences_format_state(&s->target, target, sizeof target);
		printf(": source %s, target %s (%s)\n", source, target, sequences_state_name(s));
	}
	if (command == COMMAND_SYNC)
		printf("sequences: %zu set, %zu already there, %zu ahead (left), %zu out of range, %zu without a target sequence (margin %" PRIu64 ")\n",
		       counts[SEQ_SET], counts[SEQ_KEEP_SAME], counts[SEQ_KEEP_AHEAD], counts[SEQ_OUT_OF_RANGE], counts[4],
		       o->margin);
	else if (seqs->n == 0)
		printf("the flow has no sequences\n");
}

static void print_json(const struct seqcmd_options *o, enum command command, const struct flow_sequences *seqs,
		       bool failed)
{
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	char *flow = config_flow_id(o->cfg);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "flow", flow);
	free(flow);
	if (command == COMMAND_SYNC)
		jsonw_u64(&w, "margin", true, o->margin);
	size_t set = 0;
	jsonw_open(&w, "sequences", '[');
	for (size_t i = 0; i < seqs->n; i++) {
		const struct flow_sequence *s = &seqs->items[i];
		jsonw_open(&w, NULL, '{');
		sequences_json_fields(&w, s);
		jsonw_str(&w, "state", sequences_state_name(s));
		if (command == COMMAND_SYNC) {
			if (s->read)
				sequences_json_state(&w, "target_after", &s->target_after);
			else
				jsonw_null(&w, "target_after");
			jsonw_str(&w, "action", action_name(s));
			set += s->read && s->decision.action == SEQ_SET;
		}
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	if (command == COMMAND_SYNC) {
		jsonw_u64(&w, "set", true, set);
		jsonw_str(&w, "result", failed ? "failed" : "ok");
	}
	jsonw_close(&w, '}');
	putchar('\n');
}

static int run(const struct seqcmd_options *o, enum command command)
{
	const struct flow_config *cfg = o->cfg;
	struct flow_sequences seqs = { 0 };
	int code = EXIT_UNAVAILABLE, rc;
	PGconn *src = pgconn_connect(cfg->source_database_url, PGCONN_NORMAL, "trellara-sequences", "source");
	PGconn *dst = src ? pgconn_connect(cfg->target_database_url, PGCONN_NORMAL, "trellara-sequences", "target") : NULL;
	if (!src || !dst)
		goto out;
	if ((rc = sequences_resolve(src, dst, cfg, &seqs)) != 0) {
		code = rc == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_UNAVAILABLE;
		goto out;
	}
	if (sequences_read(src, dst, &seqs) < 0)
		goto out;
	rc = command == COMMAND_SYNC ? sequences_sync(dst, &seqs, o->margin) : 0;
	if (rc < 0)
		goto out;
	if (o->json)
		print_json(o, command, &seqs, rc != 0);
	else
		print_text(o, command, &seqs);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write the output: %m");
		code = EXIT_CANTCREAT;
		goto out;
	}
	code = rc == SEQUENCES_CONFIG ? EXIT_CONFIG : EXIT_OK;
out:
	sequences_free(&seqs);
	PQfinish(src);
	PQfinish(dst);
	return code;
}

int seqcmd_sync(const struct seqcmd_options *o)
{
	return run(o, COMMAND_SYNC);
}

int seqcmd_list(const struct seqcmd_options *o)
{
	return run(o, COMMAND_LIST);
}

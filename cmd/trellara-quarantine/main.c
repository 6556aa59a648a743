/*
 * trellara-quarantine - list quarantined transactions, and release one
 * for replay once the operator repaired the target.  See
 * trellara-quarantine(1).
 */
#include "trellara/checkpoint.h"
#include "trellara/cli.h"
#include "trellara/defaults.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/textcodec.h"
#include "trellara/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
	"usage: trellara-quarantine list --config FILE [--all] [--format text|json]\n"
	"       trellara-quarantine replay-ready --config FILE --transaction-id XID --commit-lsn LSN\n"
	"\n"
	"list shows the flow's quarantined transactions (with --all: resolved ones too);\n"
	"exit 1 when any is quarantined or waiting for replay.  replay-ready releases exactly\n"
	"the quarantined transaction (XID, LSN) for trellara-applyd to apply again.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE        flow file\n"
	"  -f, --format FORMAT      text (default) or json\n"
	"      --all                list: include resolved transactions\n"
	"      --transaction-id XID replay-ready: the source transaction id\n"
	"      --commit-lsn LSN     replay-ready: its commit LSN (X/X)\n"
	"  -v, --verbose            more logging (repeatable)\n"
	"  -h, --help               this help\n"
	"  -V, --version            print the version\n"
	"\n"
	"exit codes: 0 nothing quarantined / released, 1 quarantine present / no such\n"
	"quarantined transaction, 64 usage, 69 target unavailable, 78 configuration error\n";

enum { OPT_ALL = 1000, OPT_XID, OPT_LSN };
enum { FORMAT_TEXT, FORMAT_JSON }; /* index into formats[] */

static int list(PGconn *conn, const struct flow_config *cfg, const struct flow_ids *ids, bool all, bool json)
{
	struct quarantine_entry *q;
	int n;
	if (checkpoint_quarantine_list(conn, cfg->checkpoint_schema, ids, !all, &q, &n) < 0)
		return EXIT_UNAVAILABLE;
	int open = 0;
	char lsn[LSN_FORMAT_LEN];
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	if (json) {
		jsonw_open(&w, NULL, '{');
		jsonw_open(&w, "quarantine", '[');
	}
	for (int i = 0; i < n; i++) {
		if (strcmp(q[i].state, "resolved") != 0)
			open++;
		lsn_format(q[i].commit_lsn, lsn);
		if (json) {
			jsonw_open(&w, NULL, '{');
			jsonw_i64(&w, "id", true, q[i].id);
			jsonw_u64(&w, "transaction_id", true, q[i].xid);
			jsonw_str(&w, "commit_lsn", lsn);
			jsonw_u64(&w, "stream_offset", true, q[i].stream_offset);
			jsonw_str(&w, "reason", q[i].reason);
			jsonw_str(&w, "state", q[i].state);
			jsonw_str(&w, "created_at", q[i].created_at);
			jsonw_str(&w, "detail", q[i].detail);
			jsonw_close(&w, '}');
		} else {
			printf("%-12s transaction %u  commit %s  offset %" PRIu64 "  %s  since %s\n    %s\n", q[i].state, q[i].xid,
			       lsn, q[i].stream_offset, q[i].reason, q[i].created_at, q[i].detail);
			if (strcmp(q[i].state, "quarantined") == 0) {
				char *config = strbuf_shell_quote(cfg->path);
				printf("    release after repair: trellara quarantine replay-ready --config %s --transaction-id %u --commit-lsn %s\n",
				       config, q[i].xid, lsn);
				free(config);
			}
		}
	}
	if (json) {
		jsonw_close(&w, ']');
		jsonw_i64(&w, "open", true, open);
		jsonw_close(&w, '}');
		putchar('\n');
	} else if (n == 0)
		printf("no quarantined transactions\n");
	free(q);
	return open ? EXIT_NEGATIVE : EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },      { "all", no_argument, NULL, OPT_ALL },
		{ "transaction-id", required_argument, NULL, OPT_XID }, { "commit-lsn", required_argument, NULL, OPT_LSN },
		CLI_COMMON_LONGOPTS
	};
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	const char *lsn_text = NULL;
	bool all = false, have_xid = false;
	uint64_t xid = 0, lsn = 0;
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-quarantine", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_ALL: all = true; break;
		case OPT_XID:
			if (!cli_arg_u64(&cli, 1, UINT32_MAX, &xid))
				return EXIT_USAGE;
			have_xid = true;
			break;
		case OPT_LSN:
			if (!lsn_parse(cli.arg, &lsn))
				return cli_usage_error(&cli, "invalid value \"%s\" for option %s (an LSN: X/X)", cli.arg,
						       cli.option);
			lsn_text = cli.arg;
			break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind >= argc)
		return cli_usage_error(&cli, "a command is required: list or replay-ready");
	if (optind + 1 < argc)
		return cli_extra_operand(&cli, optind + 1);
	const char *command = argv[optind];
	bool replay = strcmp(command, "replay-ready") == 0;
	if (!replay && strcmp(command, "list") != 0)
		return cli_usage_error(&cli, "unknown command \"%s\"", command);
	if (replay && (!have_xid || !lsn_text))
		return cli_usage_error(&cli, "replay-ready needs --transaction-id XID (a positive integer) and --commit-lsn X/X");
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	struct flow_ids ids = { cfg.source_id, cfg.dataset_id, cfg.consumer_group };
	PGconn *conn = pgconn_connect(cfg.target_database_url, PGCONN_NORMAL, "trellara-quarantine", "target");
	if (!conn || checkpoint_migrate(conn, cfg.checkpoint_schema) < 0) {
		code = EXIT_UNAVAILABLE;
		goto out;
	}
	if (!replay) {
		code = list(conn, &cfg, &ids, all, format == FORMAT_JSON);
		goto out;
	}
	int rc = checkpoint_quarantine_replay_ready(conn, cfg.checkpoint_schema, &ids, (uint32_t)xid, lsn);
	if (rc < 0) {
		code = EXIT_UNAVAILABLE;
	} else if (rc == 1) {
		log_error("no quarantined transaction %" PRIu64 " with commit LSN %s in flow %s:%s (group \"%s\")", xid, lsn_text,
			  cfg.source_id, cfg.dataset_id, cfg.consumer_group);
		char *config = strbuf_shell_quote(cli.config_path);
		log_hint("\"trellara quarantine list --config %s\" shows the exact boundary", config);
		free(config);
		code = EXIT_NEGATIVE;
	} else {
		printf("transaction %" PRIu64 " (commit %s) is ready for replay: trellara-applyd applies it on its next start\n", xid,
		       lsn_text);
		code = EXIT_OK;
	}
out:
	PQfinish(conn);
	config_free(&cfg);
	return code;
}

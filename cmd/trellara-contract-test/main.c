/*
 * trellara-contract-test - the schema fingerprint of every flow table on
 * source and target, compared with each other and with the pinned file;
 * --update pins it when they agree.  See trellara-contract-test(1).
 */
#include "contract.h"

#include "trellara/cli.h"
#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: trellara-contract-test --config FILE [--pin FILE] [--update] [--format text|json]\n"
	"\n"
	"Reads the schema fingerprint of every flow table (columns, types, NOT NULL,\n"
	"identity and generated columns, primary key, replica identity, partitioning)\n"
	"on the source and on the target, and compares them with each other and with\n"
	"the pinned contract; each difference is one line naming the table, the\n"
	"column or property, both values and the safe action.\n"
	"\n"
	"options:\n"
	"  -c, --config FILE     flow file\n"
	"      --pin FILE        the pinned contract (default: dataset.contract_pin)\n"
	"      --update          pin the current fingerprint, only when source and\n"
	"                        target agree\n"
	"  -f, --format FORMAT   text (default) or json\n"
	"  -v, --verbose         more logging (repeatable)\n"
	"  -h, --help            this help\n"
	"  -V, --version         print the version\n"
	"\n"
	"exit codes: 0 source, target and pin match (--update: pinned), 1 a drift, or\n"
	"no pin yet, 64 usage, 65 the pin file is damaged, 69 a server unavailable,\n"
	"73 the pin cannot be written, 78 configuration error (a pin of another flow)\n";

enum { OPT_PIN = 1000, OPT_UPDATE };
enum { FORMAT_TEXT, FORMAT_JSON };

struct run {
	const struct flow_config *cfg;
	const char *pin_path;
	bool update, json;
	char *flow; /* owned */
	struct contract_fingerprint source, target, pin; /* owned */
	bool pin_exists;
	struct contract_diffs diffs; /* owned */
};

static const char *result_name(const struct run *r)
{
	if (r->diffs.n)
		return "drift";
	return r->pin_exists || r->update ? "match" : "unpinned";
}

static void print_json(const struct run *r)
{
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "result", result_name(r));
	jsonw_text(&w, "flow", r->flow);
	jsonw_text(&w, "pin", r->pin_exists || (r->update && !r->diffs.n) ? r->pin_path : NULL);
	jsonw_bool(&w, "updated", r->update && !r->diffs.n);
	jsonw_open(&w, "tables", '[');
	for (size_t i = 0; i < r->source.n_tables; i++) {
		const struct contract_table *t = &r->source.tables[i];
		char *name = xasprintf("%s.%s", t->schema, t->name);
		jsonw_open(&w, NULL, '{');
		jsonw_text(&w, "table", name);
		jsonw_open(&w, "differences", '[');
		for (size_t k = 0; k < r->diffs.n; k++) {
			const struct contract_diff *d = &r->diffs.items[k];
			if (strcmp(d->table, name) != 0)
				continue;
			char *hint = contract_action_hint(d, r->cfg->path);
			jsonw_open(&w, NULL, '{');
			jsonw_str(&w, "where", contract_where_name(d->where));
			jsonw_str(&w, "property", d->property);
			jsonw_text(&w, "column", d->column);
			jsonw_text(&w, contract_left_name(d->where), d->left);
			jsonw_text(&w, contract_right_name(d->where), d->right);
			jsonw_str(&w, "action", contract_action_name(d->action));
			jsonw_text(&w, "hint", hint);
			jsonw_close(&w, '}');
			free(hint);
		}
		jsonw_close(&w, ']');
		jsonw_close(&w, '}');
		free(name);
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	fputc('\n', stdout);
}

static void print_text(const struct run *r)
{
	const char *pin_state = r->update ? (r->diffs.n ? ", not written" : ", written now") : r->pin_exists ? "" : ", not there";
	printf("contract of flow \"%s\": %s (%zu tables, pin \"%s\"%s)\n", r->flow, result_name(r), r->source.n_tables,
	       r->pin_path, pin_state);
	for (size_t i = 0; i < r->diffs.n; i++) {
		char *hint = contract_action_hint(&r->diffs.items[i], r->cfg->path);
		char *line = contract_diff_line(&r->diffs.items[i], hint);
		printf("%s\n", line);
		free(line);
		free(hint);
	}
	if (r->update && r->diffs.n)
		printf("not pinned: source and target differ; make them agree, then run --update again\n");
	else if (!r->update && !r->pin_exists)
		printf("no contract is pinned yet: run \"trellara contract-test --config FILE --update\" once source and target agree\n");
}

static PGconn *connect_side(const struct flow_config *cfg, bool source)
{
	char *url = config_database_url(cfg, source);
	PGconn *conn = pgconn_connect(url, PGCONN_NORMAL, "trellara-contract-test", source ? "source" : "target");
	config_free_secret(url);
	return conn;
}

static int contract_test(struct run *r)
{
	PGconn *src = NULL, *dst = NULL;
	int code = EXIT_UNAVAILABLE;
	r->flow = config_flow_id(r->cfg);
	if (r->update) {
		/* a damaged pin is replaced, not read */
		r->pin_exists = access(r->pin_path, F_OK) == 0;
	} else {
		if (contract_pin_load(r->pin_path, &r->pin, &r->pin_exists) < 0) {
			code = EXIT_DATAERR;
			goto out;
		}
		if (r->pin_exists && strcmp(r->pin.flow, r->flow) != 0) {
			log_error("contract pin \"%s\" is the pin of flow \"%s\", not of \"%s\"", r->pin_path, r->pin.flow, r->flow);
			log_hint("name this flow's own pin with --pin or dataset.contract_pin");
			code = EXIT_CONFIG;
			goto out;
		}
	}
	if (!(src = connect_side(r->cfg, true)) || !(dst = connect_side(r->cfg, false)))
		goto out;
	if (contract_read_catalog(src, r->cfg, "source", &r->source) < 0 ||
	    contract_read_catalog(dst, r->cfg, "target", &r->target) < 0)
		goto out;
	contract_compare(&r->source, &r->target, CONTRACT_SOURCE_TARGET, &r->diffs);
	if (r->pin_exists && !r->update) {
		contract_compare(&r->source, &r->pin, CONTRACT_SOURCE_PIN, &r->diffs);
		contract_compare(&r->target, &r->pin, CONTRACT_TARGET_PIN, &r->diffs);
	}
	if (r->update && !r->diffs.n) {
		if (contract_pin_save(r->pin_path, &r->source, r->flow) < 0) {
			code = EXIT_CANTCREAT;
			goto out;
		}
		log_info("pinned the contract of %zu tables at \"%s\"", r->source.n_tables, r->pin_path);
	}
	if (r->json)
		print_json(r);
	else
		print_text(r);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write the result: %m");
		code = EXIT_CANTCREAT;
		goto out;
	}
	code = strcmp(result_name(r), "match") == 0 ? EXIT_OK : EXIT_NEGATIVE;
out:
	PQfinish(src);
	PQfinish(dst);
	return code;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = { { "pin", required_argument, NULL, OPT_PIN },
						  { "update", no_argument, NULL, OPT_UPDATE },
						  { "format", required_argument, NULL, 'f' },
						  CLI_COMMON_LONGOPTS };
	static const char *const formats[] = { "text", "json", NULL };
	struct cli cli;
	struct run r = { 0 };
	int c, code, format = FORMAT_TEXT;
	cli_init(&cli, "trellara-contract-test", usage_text, "f:", longopts, argc, argv);
	while ((c = cli_next(&cli)) != CLI_END) {
		switch (c) {
		case 'f':
			if (!cli_arg_choice(&cli, formats, &format))
				return EXIT_USAGE;
			break;
		case OPT_PIN:
			if (!*cli.arg)
				return cli_usage_error(&cli, "--pin needs a file name");
			r.pin_path = cli.arg;
			break;
		case OPT_UPDATE: r.update = true; break;
		default: return cli.exit_code;
		}
	}
	if ((code = cli_finish(&cli, true)) != EXIT_OK)
		return code;
	if (optind < argc)
		return cli_extra_operand(&cli, optind);
	struct flow_config cfg;
	if ((code = cli_load_config(&cli, &cfg)) != EXIT_OK)
		return code;
	r.cfg = &cfg;
	r.json = format == FORMAT_JSON;
	if (!r.pin_path)
		r.pin_path = cfg.contract_pin;
	code = contract_test(&r);
	contract_fingerprint_free(&r.source);
	contract_fingerprint_free(&r.target);
	contract_fingerprint_free(&r.pin);
	contract_diffs_free(&r.diffs);
	free(r.flow);
	config_free(&cfg);
	return code;
}

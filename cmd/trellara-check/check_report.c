/*
 * check_report.c - trellara-check's text and JSON report (check.h).
 */
#include "check_int.h"

#include "trellara/jsonw.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *status_word(enum check_status s, bool json)
{
	switch (s) {
	case CHECK_OK: return "ok";
	case CHECK_WARN: return "warn";
	default: return json ? "blocker" : "BLOCKER";
	}
}

/* Lines after the first indented by indent spaces. */
static void print_indented(FILE *out, const char *text, int indent)
{
	for (const char *p = text; *p; p++) {
		fputc(*p, out);
		if (*p == '\n' && p[1])
			fprintf(out, "%*s", indent, "");
	}
}

static bool fix_failed(const struct check_report *r)
{
	for (size_t i = 0; i < r->n_items; i++)
		if (strcmp(r->items[i].section, "fix") == 0)
			return true;
	return false;
}

void check_report_print_text(FILE *out, const struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	fprintf(out, "source: %s\n", r->source);
	fprintf(out, "identity: system identifier %s, database \"%s\", timeline %" PRIu32 ", PostgreSQL %s, user \"%s\"%s\n",
		id->system_identifier, id->database, id->timeline, id->server_version, id->user,
		id->in_recovery ? ", in recovery" : "");
	if (r->fix_requested) {
		for (size_t i = 0; i < r->n_fixed; i++)
			fprintf(out, "fixed: %s\n", r->fixed[i].detail);
		if (r->n_fixed == 0)
			fputs(fix_failed(r) ? "fixed: nothing (see the fix blockers below)\n"
					    : "fixed: nothing to do: what --fix manages is already in place\n",
			      out);
	}
	const char *section = NULL;
	char *fix_all = check_trellara_command(r, "check", " --fix");
	for (size_t i = 0; i < r->n_items; i++) {
		const struct check_item *c = &r->items[i];
		if (!section || strcmp(section, c->section) != 0) {
			section = c->section;
			fprintf(out, "\n%s\n", section);
		}
		fprintf(out, "%s  %s%s%s: ", status_word(c->status, false), c->name, c->object ? " " : "",
			c->object ? c->object : "");
		print_indented(out, c->detail, 4);
		fputc('\n', out);
		if (c->fix) {
			fputs("  fix: ", out);
			print_indented(out, c->fix, 7);
			fputc('\n', out);
			if (c->fixable && strcmp(c->fix, fix_all) != 0)
				fprintf(out, "  or:  %s\n", fix_all);
		}
	}
	free(fix_all);
	fprintf(out, "\nresult: %d blockers, %d warnings\n", r->blockers, r->warnings);
}

void check_report_print_json(FILE *out, const struct check_report *r)
{
	const struct check_identity *id = &r->identity;
	struct jsonw w;
	jsonw_init(&w, out, true);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "source", r->source);
	jsonw_open(&w, "identity", '{');
	jsonw_str(&w, "system_identifier", id->system_identifier);
	jsonw_str(&w, "database", id->database);
	jsonw_u64(&w, "timeline", true, id->timeline);
	jsonw_str(&w, "server_version", id->server_version);
	jsonw_i64(&w, "server_version_num", true, id->server_version_num);
	jsonw_str(&w, "user", id->user);
	jsonw_bool(&w, "in_recovery", id->in_recovery);
	jsonw_close(&w, '}');
	jsonw_open(&w, "checks", '[');
	for (size_t i = 0; i < r->n_items; i++) {
		const struct check_item *c = &r->items[i];
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "section", c->section);
		jsonw_str(&w, "name", c->name);
		jsonw_str(&w, "object", c->object);
		jsonw_str(&w, "status", status_word(c->status, true));
		jsonw_str(&w, "detail", c->detail);
		jsonw_str(&w, "fix", c->fix);
		jsonw_bool(&w, "fixable", c->fixable);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_i64(&w, "blockers", true, r->blockers);
	jsonw_i64(&w, "warnings", true, r->warnings);
	jsonw_bool(&w, "fix_requested", r->fix_requested);
	jsonw_open(&w, "fixed", '[');
	for (size_t i = 0; i < r->n_fixed; i++) {
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "action", r->fixed[i].action);
		jsonw_str(&w, "detail", r->fixed[i].detail);
		jsonw_str(&w, "sql", r->fixed[i].sql);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	fputc('\n', out);
}


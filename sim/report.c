/*
 * report.c - `trellara chaos report`: the correctness report, a static
 * HTML page written only from a run file (trellara-chaos-run/1).  The
 * file is parsed strictly and checked before anything is written: a file
 * that is not such a run file, or whose result contradicts its entries
 * (PASS with an entry failed or not run), is refused, naming the file and
 * the byte offset.  Every text from the file is HTML-escaped.
 *
 * The page starts with the comment
 *   <!-- trellara-chaos-report revision=SHA tree=TREEHASH -->
 * which `make verify-correctness-report` compares with the source.
 */
#include "trellara/jsonread.h"
#include "run.h"

#include "trellara/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_INPUT_BYTES (64U * 1024 * 1024)

struct check {
	const char *path;
	char *err;
	size_t errlen;
	bool bad;
};

static bool refuse(struct check *c, const struct json_value *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool refuse(struct check *c, const struct json_value *at, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (c->bad)
		return false;
	c->bad = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "\"%s\": byte %zu: not a %s file: %s", c->path, at ? at->offset : (size_t)0,
		 SIM_RUN_FORMAT, msg);
	return false;
}

/* The member key of obj, of type type (JSON_TRUE also accepts false);
 * nullable: null is accepted too (returns NULL without refusing). */
static const struct json_value *member(struct check *c, const struct json_value *obj, const char *key, enum json_type type,
				       bool nullable)
{
	const struct json_value *v = jsonread_get(obj, key);
	if (c->bad)
		return NULL;
	if (!v) {
		refuse(c, obj, "member \"%s\" is missing", key);
		return NULL;
	}
	if (nullable && v->type == JSON_NULL)
		return NULL;
	bool ok = v->type == type || (type == JSON_TRUE && v->type == JSON_FALSE);
	if (!ok) {
		refuse(c, v, "member \"%s\" is %s, not %s%s", key, jsonread_type_name(v->type),
		       jsonread_type_name(type), nullable ? " or null" : "");
		return NULL;
	}
	return v;
}

static const char *str(struct check *c, const struct json_value *obj, const char *key, bool nullable)
{
	const struct json_value *v = member(c, obj, key, JSON_STRING, nullable);
	return v ? v->text : NULL;
}

static bool uint_member(struct check *c, const struct json_value *obj, const char *key, uint64_t *out)
{
	const struct json_value *v = member(c, obj, key, JSON_NUMBER, false);
	if (!v)
		return false;
	if (!v->is_uint)
		return refuse(c, v, "member \"%s\" is %s, not a non-negative integer", key, v->text);
	*out = v->u;
	return true;
}

static bool hex_or_unknown(const char *s)
{
	if (strcmp(s, "unknown") == 0)
		return true;
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static bool valid_status(const char *s)
{
	return strcmp(s, "pass") == 0 || strcmp(s, "fail") == 0 || strcmp(s, "not_applicable") == 0 ||
	       strcmp(s, "not_run") == 0;
}

static const char *const counter_names[] = { "transactions", "duplicates_skipped", "chunks", "tables_copied",
					     "crashes", "power_losses", "steps" };

static void check_counters(struct check *c, const struct json_value *obj)
{
	const struct json_value *counters = member(c, obj, "counters", JSON_OBJECT, false);
	uint64_t v;
	for (size_t k = 0; counters && k < sizeof counter_names / sizeof counter_names[0]; k++)
		uint_member(c, counters, counter_names[k], &v);
}

static void check_entry(struct check *c, const struct json_value *e, bool curated, bool pass)
{
	uint64_t u;
	if (e->type != JSON_OBJECT) {
		refuse(c, e, "a %s entry is %s, not object", curated ? "scenarios" : "simulations",
		       jsonread_type_name(e->type));
		return;
	}
	if (curated) {
		uint_member(c, e, "number", &u);
		str(c, e, "boundary", false);
	} else {
		str(c, e, "family", false);
	}
	str(c, e, "name", false);
	const char *status = str(c, e, "status", false);
	if (status && !valid_status(status)) {
		refuse(c, jsonread_get(e, "status"), "status \"%.40s\" is none of pass, fail, not_applicable, not_run",
		       status);
		return;
	}
	if (status && pass && (strcmp(status, "fail") == 0 || strcmp(status, "not_run") == 0))
		refuse(c, jsonread_get(e, "status"), "result is PASS but \"%.80s\" is %s",
		       jsonread_get_string(e, "name"), status);
	str(c, e, "reason", true);
	str(c, e, "invariant", false);
	str(c, e, "check", false);
	str(c, e, "reproduce", true);
	str(c, e, "recovery", true);
	member(c, e, "seeds", JSON_ARRAY, false);
	check_counters(c, e);
	const struct json_value *live = member(c, e, "live_test", JSON_OBJECT, true);
	if (live) {
		str(c, live, "file", false);
		str(c, live, "name", false);
	}
}

static void check_run(struct check *c, const struct json_value *root)
{
	uint64_t u;
	if (root->type != JSON_OBJECT) {
		refuse(c, root, "the top level is %s, not object", jsonread_type_name(root->type));
		return;
	}
	const struct json_value *format = jsonread_get(root, "format");
	if (!format) {
		refuse(c, root, "member \"format\" is missing");
		return;
	}
	if (format->type != JSON_STRING || strcmp(format->text, SIM_RUN_FORMAT) != 0) {
		refuse(c, format, "member \"format\" is not \"%s\"", SIM_RUN_FORMAT);
		return;
	}
	const char *result = str(c, root, "result", false);
	if (result && strcmp(result, "PASS") != 0 && strcmp(result, "FAIL") != 0) {
		refuse(c, jsonread_get(root, "result"), "result \"%.40s\" is neither PASS nor FAIL", result);
		return;
	}
	bool pass = result && strcmp(result, "PASS") == 0;
	uint_member(c, root, "seed", &u);
	uint_member(c, root, "schedules", &u);
	str(c, root, "variant", false);
	const char *revision = str(c, root, "revision", false);
	if (revision && !hex_or_unknown(revision))
		refuse(c, jsonread_get(root, "revision"), "revision is not a hex object name");
	const char *tree = str(c, root, "tree", false);
	if (tree && !hex_or_unknown(tree))
		refuse(c, jsonread_get(root, "tree"), "tree is not a hex object name");
	member(c, root, "dirty", JSON_TRUE, false);
	const struct json_value *build = member(c, root, "build", JSON_OBJECT, false);
	if (build) {
		str(c, build, "cc", false);
		str(c, build, "cflags", false);
	}
	str(c, root, "started_at", false);
	uint_member(c, root, "duration_ms", &u);
	member(c, root, "schedules_per_second", JSON_NUMBER, true);
	const struct json_value *totals = member(c, root, "totals", JSON_OBJECT, false);
	(void)totals;
	const struct json_value *lists[2] = { member(c, root, "simulations", JSON_ARRAY, false),
					      member(c, root, "scenarios", JSON_ARRAY, false) };
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; lists[l] && i < lists[l]->n && !c->bad; i++)
			check_entry(c, lists[l]->items[i], l == 1, pass);
	const struct json_value *ex = member(c, root, "exploration", JSON_OBJECT, false);
	if (!ex)
		return;
	uint_member(c, ex, "schedules", &u);
	uint64_t failed = 0, not_run = 0;
	if (jsonread_get(ex, "failed"))
		uint_member(c, ex, "failed", &failed);
	if (jsonread_get(ex, "not_run"))
		uint_member(c, ex, "not_run", &not_run);
	const struct json_value *failures = member(c, ex, "failures", JSON_ARRAY, false);
	for (size_t i = 0; failures && i < failures->n && !c->bad; i++) {
		const struct json_value *f = failures->items[i];
		if (f->type != JSON_OBJECT) {
			refuse(c, f, "an exploration failure is %s, not object", jsonread_type_name(f->type));
			break;
		}
		uint_member(c, f, "seed", &u);
		str(c, f, "invariant", false);
		str(c, f, "detail", false);
		str(c, f, "replay", false);
	}
	if (!c->bad && pass && ((failures && failures->n > 0) || failed > 0))
		refuse(c, failures, "result is PASS but the exploration has failed schedules");
	if (!c->bad && pass && not_run > 0)
		refuse(c, jsonread_get(ex, "not_run"), "result is PASS but %" PRIu64 " schedules were not run",
		       not_run);
}

/* ---- HTML ---- */

static void html(FILE *out, const char *s)
{
	if (!s)
		return;
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default: fputc(*s, out);
		}
	}
}

static void cell(FILE *out, const char *s)
{
	fputs("<td>", out);
	if (s)
		html(out, s);
	else
		fputs("&mdash;", out);
	fputs("</td>", out);
}

static void code_cell(FILE *out, const char *s)
{
	fputs("<td>", out);
	if (s) {
		fputs("<code>", out);
		html(out, s);
		fputs("</code>", out);
	} else {
		fputs("&mdash;", out);
	}
	fputs("</td>", out);
}

static void number_text(const struct json_value *v, char *buf, size_t len)
{
	if (!v)
		snprintf(buf, len, "-");
	else if (v->type == JSON_NUMBER)
		snprintf(buf, len, "%s", v->text);
	else if (v->type == JSON_STRING)
		snprintf(buf, len, "%s", v->text);
	else if (v->type == JSON_TRUE || v->type == JSON_FALSE)
		snprintf(buf, len, "%s", v->type == JSON_TRUE ? "yes" : "no");
	else
		snprintf(buf, len, "-");
}

static void fact(FILE *out, const char *label, const char *value)
{
	fputs("<tr><th>", out);
	html(out, label);
	fputs("</th><td>", out);
	html(out, value);
	fputs("</td></tr>\n", out);
}

static void fact_value(FILE *out, const char *label, const struct json_value *v)
{
	char buf[128];
	number_text(v, buf, sizeof buf);
	fact(out, label, buf);
}

static void status_cell(FILE *out, const char *status)
{
	fprintf(out, "<td class=\"%s\">", status);
	html(out, status);
	fputs("</td>", out);
}

static void live_cell(FILE *out, const struct json_value *e)
{
	const struct json_value *live = jsonread_get_type(e, "live_test", JSON_OBJECT);
	if (!live) {
		cell(out, NULL);
		return;
	}
	fputs("<td><code>", out);
	html(out, jsonread_get_string(live, "file"));
	fputs("</code>: ", out);
	html(out, jsonread_get_string(live, "name"));
	fputs("</td>", out);
}

static void counters_cell(FILE *out, const struct json_value *e)
{
	const struct json_value *c = jsonread_get(e, "counters");
	uint64_t v;
	fputs("<td class=\"counters\">", out);
	for (size_t k = 0; k < sizeof counter_names / sizeof counter_names[0]; k++) {
		jsonread_get_uint(c, counter_names[k], &v);
		fprintf(out, "%s%s %" PRIu64, k ? ", " : "", counter_names[k], v);
	}
	fputs("</td>", out);
}

static void seeds_cell(FILE *out, const struct json_value *e)
{
	const struct json_value *seeds = jsonread_get_type(e, "seeds", JSON_ARRAY);
	fputs("<td>", out);
	for (size_t i = 0; seeds && i < seeds->n; i++) {
		char buf[64];
		number_text(seeds->items[i], buf, sizeof buf);
		fprintf(out, "%s", i ? ", " : "");
		html(out, buf);
	}
	if (!seeds || seeds->n == 0)
		fputs("&mdash;", out);
	fputs("</td>", out);
}

/* "reason" for entries not checked, "detail" (with the broken invariant) for failures */
static void note_cell(FILE *out, const struct json_value *e)
{
	const char *status = jsonread_get_string(e, "status");
	const char *reason = jsonread_get_string(e, "reason");
	fputs("<td>", out);
	if (status && strcmp(status, "fail") == 0) {
		fputs("broke <code>", out);
		html(out, jsonread_get_string(e, "failed_invariant") ? jsonread_get_string(e, "failed_invariant")
								  : jsonread_get_string(e, "invariant"));
		fputs("</code>: ", out);
		html(out, jsonread_get_string(e, "detail"));
	} else if (reason) {
		html(out, reason);
	} else {
		fputs("&mdash;", out);
	}
	fputs("</td>", out);
}

static void entry_row(FILE *out, const struct json_value *e, bool curated)
{
	fputs("<tr>", out);
	if (curated) {
		char buf[32];
		number_text(jsonread_get(e, "number"), buf, sizeof buf);
		cell(out, buf);
	}
	code_cell(out, jsonread_get_string(e, "name"));
	if (curated)
		code_cell(out, jsonread_get_string(e, "boundary"));
	status_cell(out, jsonread_get_string(e, "status"));
	fputs("<td><code>", out);
	html(out, jsonread_get_string(e, "invariant"));
	fputs("</code><br>", out);
	html(out, jsonread_get_string(e, "check"));
	fputs("</td>", out);
	seeds_cell(out, e);
	counters_cell(out, e);
	code_cell(out, jsonread_get_string(e, "reproduce"));
	live_cell(out, e);
	cell(out, jsonread_get_string(e, "recovery"));
	note_cell(out, e);
	fputs("</tr>\n", out);
}

static const char entry_head[] = "<th>status</th><th>invariant and what is checked</th><th>seeds</th><th>what the run did</th>"
				 "<th>reproduce</th><th>live test (real PostgreSQL)</th><th>recovery</th><th>notes</th>";

static void write_html(FILE *out, const struct json_value *root)
{
	const char *result = jsonread_get_string(root, "result");
	bool pass = strcmp(result, "PASS") == 0;
	const struct json_value *build = jsonread_get(root, "build");
	const struct json_value *totals = jsonread_get(root, "totals");
	const struct json_value *sims = jsonread_get(root, "simulations");
	const struct json_value *rows = jsonread_get(root, "scenarios");
	const struct json_value *ex = jsonread_get(root, "exploration");
	const struct json_value *failures = jsonread_get(ex, "failures");
	char buf[256];

	fputs("<!DOCTYPE html>\n", out);
	fprintf(out, "<!-- trellara-chaos-report revision=%s tree=%s -->\n", jsonread_get_string(root, "revision"),
		jsonread_get_string(root, "tree"));
	fputs("<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Trellara correctness report: ", out);
	html(out, result);
	fputs("</title>\n<style>\n"
	      "body { font-family: sans-serif; margin: 2em; color: #222; }\n"
	      "table { border-collapse: collapse; margin: 1em 0; }\n"
	      "th, td { border: 1px solid #bbb; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }\n"
	      "th { background: #eee; }\n"
	      "code { font-size: 0.9em; }\n"
	      ".banner { font-size: 2em; font-weight: bold; padding: 0.4em 0.8em; display: inline-block; }\n"
	      ".banner.PASS, td.pass { background: #cfc; }\n"
	      ".banner.FAIL, td.fail, td.not_run { background: #fcc; }\n"
	      "td.not_applicable { background: #eee; }\n"
	      "td.counters { font-size: 0.85em; }\n"
	      "</style>\n</head>\n<body>\n",
	      out);
	fputs("<h1>Trellara correctness report</h1>\n", out);
	fprintf(out, "<p class=\"banner %s\">", pass ? "PASS" : "FAIL");
	html(out, result);
	fputs("</p>\n", out);
	if (jsonread_get_string(root, "result_reason")) {
		fputs("<p>", out);
		html(out, jsonread_get_string(root, "result_reason"));
		fputs("</p>\n", out);
	}
	fputs("<p>Generated by <code>trellara chaos report</code> from the run file of one "
	      "<code>trellara chaos run</code>; nothing on this page comes from anywhere else.</p>\n",
	      out);

	fputs("<h2>The run</h2>\n<table>\n", out);
	fact_value(out, "seed", jsonread_get(root, "seed"));
	fact_value(out, "schedules", jsonread_get(root, "schedules"));
	fact_value(out, "variant", jsonread_get(root, "variant"));
	if (jsonread_get_string(root, "scenario"))
		fact_value(out, "scenario", jsonread_get(root, "scenario"));
	fact_value(out, "source revision", jsonread_get(root, "revision"));
	fact_value(out, "uncommitted changes", jsonread_get(root, "dirty"));
	fact_value(out, "source tree", jsonread_get(root, "tree"));
	fact_value(out, "compiler", jsonread_get(build, "cc"));
	fact_value(out, "build flags", jsonread_get(build, "cflags"));
	fact_value(out, "started (UTC)", jsonread_get(root, "started_at"));
	fact_value(out, "duration (ms)", jsonread_get(root, "duration_ms"));
	fact_value(out, "schedules per second", jsonread_get(root, "schedules_per_second"));
	fputs("</table>\n", out);

	fputs("<h2>Totals</h2>\n<table>\n", out);
	for (size_t i = 0; totals && i < totals->n; i++) {
		const struct json_value *v = totals->items[i];
		if (v->type == JSON_OBJECT) {
			for (size_t k = 0; k < v->n; k++) {
				snprintf(buf, sizeof buf, "%s: %s", totals->keys[i], v->keys[k]);
				fact_value(out, buf, v->items[k]);
			}
		} else {
			fact_value(out, totals->keys[i], v);
		}
	}
	fputs("</table>\n", out);

	/* a table per simulation family, in the order the families first appear */
	fputs("<h2>Simulations</h2>\n", out);
	for (size_t i = 0; sims && i < sims->n; i++) {
		const char *family = jsonread_get_string(sims->items[i], "family");
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(jsonread_get_string(sims->items[j], "family"), family) == 0;
		if (seen)
			continue;
		fputs("<h3>", out);
		html(out, family);
		fputs("</h3>\n<table>\n<tr><th>simulation</th>", out);
		fputs(entry_head, out);
		fputs("</tr>\n", out);
		for (size_t j = i; j < sims->n; j++)
			if (strcmp(jsonread_get_string(sims->items[j], "family"), family) == 0)
				entry_row(out, sims->items[j], false);
		fputs("</table>\n", out);
	}
	if (!sims || sims->n == 0)
		fputs("<p>No simulation in this run.</p>\n", out);

	fputs("<h2>The curated matrix</h2>\n", out);
	if (rows && rows->n > 0) {
		fputs("<table>\n<tr><th>#</th><th>scenario</th><th>boundary</th>", out);
		fputs(entry_head, out);
		fputs("</tr>\n", out);
		for (size_t i = 0; i < rows->n; i++)
			entry_row(out, rows->items[i], true);
		fputs("</table>\n", out);
	} else {
		fputs("<p>No curated scenario in this run.</p>\n", out);
	}

	fputs("<h2>Random exploration</h2>\n<table>\n", out);
	for (size_t i = 0; ex && i < ex->n; i++)
		if (ex->items[i]->type != JSON_ARRAY && ex->items[i]->type != JSON_OBJECT)
			fact_value(out, ex->keys[i], ex->items[i]);
	fputs("</table>\n", out);

	fputs("<h2>Failures</h2>\n", out);
	size_t n_failed = 0;
	for (int l = 0; l < 2; l++) {
		const struct json_value *list = l ? rows : sims;
		for (size_t i = 0; list && i < list->n; i++) {
			const struct json_value *e = list->items[i];
			if (strcmp(jsonread_get_string(e, "status"), "fail") != 0)
				continue;
			if (n_failed++ == 0)
				fputs("<ul>\n", out);
			fputs("<li><code>", out);
			html(out, jsonread_get_string(e, "name"));
			fputs("</code>: broke <code>", out);
			html(out, jsonread_get_string(e, "failed_invariant")
					  ? jsonread_get_string(e, "failed_invariant")
					  : jsonread_get_string(e, "invariant"));
			fputs("</code>: ", out);
			html(out, jsonread_get_string(e, "detail"));
			fputs("<br>replay: <code>", out);
			html(out, jsonread_get_string(e, "reproduce"));
			fputs("</code></li>\n", out);
		}
	}
	for (size_t i = 0; failures && i < failures->n; i++) {
		const struct json_value *f = failures->items[i];
		if (n_failed++ == 0)
			fputs("<ul>\n", out);
		number_text(jsonread_get(f, "seed"), buf, sizeof buf);
		fputs("<li>schedule seed ", out);
		html(out, buf);
		fputs(": broke <code>", out);
		html(out, jsonread_get_string(f, "invariant"));
		fputs("</code>: ", out);
		html(out, jsonread_get_string(f, "detail"));
		fputs("<br>replay: <code>", out);
		html(out, jsonread_get_string(f, "replay"));
		fputs("</code></li>\n", out);
	}
	if (n_failed)
		fputs("</ul>\n", out);
	else
		fputs("<p>None failed.</p>\n", out);
	/* what was not run fails the run as well: say so here, not only in red above */
	size_t n_not_run = 0;
	for (int l = 0; l < 2; l++) {
		const struct json_value *list = l ? rows : sims;
		for (size_t i = 0; list && i < list->n; i++)
			n_not_run += strcmp(jsonread_get_string(list->items[i], "status"), "not_run") == 0;
	}
	uint64_t schedules_not_run = 0;
	jsonread_get_uint(ex, "not_run", &schedules_not_run);
	if (n_not_run || schedules_not_run)
		fprintf(out, "<p>Not run, which fails the run too: %zu applicable entr%s (status <code>not_run</code> above) and %" PRIu64
			     " random schedule%s.</p>\n",
			n_not_run, n_not_run == 1 ? "y" : "ies", schedules_not_run, schedules_not_run == 1 ? "" : "s");
	fputs("</body>\n</html>\n", out);
}

static char *read_all(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	if (!f) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (n + 65536 > cap) {
			cap = (n + 65536) * 2;
			buf = xrealloc(buf, cap);
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n > MAX_INPUT_BYTES) {
			snprintf(err, errlen, "\"%s\": larger than %u bytes: not a run file", path, MAX_INPUT_BYTES);
			goto bad;
		}
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(errno));
		goto bad;
	}
	fclose(f);
	*len = n;
	return buf;
bad:
	fclose(f);
	free(buf);
	return NULL;
}

enum sim_report_status sim_report_write(const char *input, const char *output, char *err, size_t errlen)
{
	struct json_error jerr;
	struct check c = { .path = input, .err = err, .errlen = errlen };
	enum sim_report_status status = SIM_REPORT_BAD_INPUT;
	size_t len = 0;
	char *text = read_all(input, &len, err, errlen);
	struct json_value *root = NULL;
	char *tmp = NULL;
	FILE *out = NULL;

	if (!text)
		goto out;
	root = jsonread_parse(text, len, &jerr);
	if (!root) {
		snprintf(err, errlen, "\"%s\": byte %zu: not a %s file: bad JSON: %s", input, jerr.offset, SIM_RUN_FORMAT,
			 jerr.message);
		goto out;
	}
	check_run(&c, root);
	if (c.bad)
		goto out;

	status = SIM_REPORT_CANT_WRITE;
	tmp = xasprintf("%s.tmp.%ld", output, (long)getpid());
	out = fopen(tmp, "w");
	if (!out) {
		snprintf(err, errlen, "cannot write \"%s\": %s", tmp, strerror(errno));
		goto out;
	}
	write_html(out, root);
	bool failed = ferror(out) != 0;
	if (fclose(out) != 0)
		failed = true;
	out = NULL;
	if (failed || rename(tmp, output) != 0) {
		snprintf(err, errlen, "cannot write \"%s\": %s", output, strerror(errno));
		unlink(tmp);
		goto out;
	}
	status = SIM_REPORT_OK;
out:
	if (out) {
		fclose(out);
		unlink(tmp);
	}
	free(tmp);
	jsonread_free(root);
	free(text);
	return status;
}

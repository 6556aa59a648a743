/*
 * test_metrics.c - the Prometheus text writer: what it writes parses
 * back (by a small, strict parser of the exposition format here) into
 * exactly the samples that were added, with labels escaped and families
 * grouped; bad names are refused; the file is replaced atomically.
 */
#include "trellara/metrics.h"
#include "trellara/fsutil.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PARSED 64

struct parsed {
	char name[128];
	char labels[8][2][256]; /* name, unescaped value */
	int n_labels;
	char value[64];
};

struct parsed_file {
	struct parsed samples[MAX_PARSED];
	int n;
	char typed[MAX_PARSED][128]; /* names declared by # TYPE, in order */
	char types[MAX_PARSED][16];
	int n_typed;
	int helps;
	char error[200];
};

static bool parse_fail(struct parsed_file *pf, int line, const char *why)
{
	snprintf(pf->error, sizeof pf->error, "line %d: %s", line, why);
	return false;
}

/* A strict reader of what metrics_render may produce. */
static bool parse_exposition(const char *text, struct parsed_file *pf)
{
	memset(pf, 0, sizeof *pf);
	int line = 0;
	char current_family[128] = "";
	for (const char *p = text; *p;) {
		line++;
		const char *end = strchr(p, '\n');
		if (!end)
			return parse_fail(pf, line, "last line has no newline");
		char buf[1024];
		size_t n = (size_t)(end - p);
		if (n >= sizeof buf)
			return parse_fail(pf, line, "line too long");
		memcpy(buf, p, n);
		buf[n] = '\0';
		p = end + 1;
		char name[128], rest[900];
		if (strncmp(buf, "# HELP ", 7) == 0) {
			if (sscanf(buf + 7, "%127s %899[^\n]", name, rest) < 1)
				return parse_fail(pf, line, "bad HELP");
			pf->helps++;
			continue;
		}
		if (strncmp(buf, "# TYPE ", 7) == 0) {
			char type[16];
			if (sscanf(buf + 7, "%127s %15s", name, type) != 2 ||
			    (strcmp(type, "gauge") != 0 && strcmp(type, "counter") != 0))
				return parse_fail(pf, line, "bad TYPE");
			for (int i = 0; i < pf->n_typed; i++)
				if (strcmp(pf->typed[i], name) == 0)
					return parse_fail(pf, line, "family declared twice (not grouped)");
			snprintf(pf->typed[pf->n_typed], sizeof pf->typed[0], "%s", name);
			snprintf(pf->types[pf->n_typed++], sizeof pf->types[0], "%s", type);
			snprintf(current_family, sizeof current_family, "%s", name);
			continue;
		}
		if (buf[0] == '#')
			return parse_fail(pf, line, "unexpected comment");
		if (pf->n == MAX_PARSED)
			return parse_fail(pf, line, "too many samples");
		struct parsed *s = &pf->samples[pf->n++];
		const char *q = buf;
		size_t k = 0;
		while (*q && *q != '{' && *q != ' ' && k < sizeof s->name - 1)
			s->name[k++] = *q++;
		if (strcmp(s->name, current_family) != 0)
			return parse_fail(pf, line, "sample outside its TYPE group");
		if (*q == '{') {
			q++;
			while (*q != '}') {
				if (s->n_labels == 8)
					return parse_fail(pf, line, "too many labels");
				char *ln = s->labels[s->n_labels][0], *lv = s->labels[s->n_labels][1];
				k = 0;
				while (*q && *q != '=' && k < 255)
					ln[k++] = *q++;
				ln[k] = '\0';
				if (*q++ != '=' || *q++ != '"')
					return parse_fail(pf, line, "bad label");
				k = 0;
				while (*q && *q != '"' && k < 255) {
					if (*q == '\\') {
						q++;
						if (*q == 'n')
							lv[k++] = '\n';
						else if (*q == '\\' || *q == '"')
							lv[k++] = *q;
						else
							return parse_fail(pf, line, "bad escape in label value");
						q++;
					} else if (*q == '\n') {
						return parse_fail(pf, line, "raw newline in label value");
					} else {
						lv[k++] = *q++;
					}
				}
				lv[k] = '\0';
				if (*q++ != '"')
					return parse_fail(pf, line, "unterminated label value");
				s->n_labels++;
				if (*q == ',')
					q++;
				else if (*q != '}')
					return parse_fail(pf, line, "bad label separator");
			}
			q++;
		}
		if (*q++ != ' ')
			return parse_fail(pf, line, "no space before the value");
		snprintf(s->value, sizeof s->value, "%s", q);
		if (!*s->value || strchr(s->value, ' '))
			return parse_fail(pf, line, "bad value");
		char *vend;
		strtod(s->value, &vend);
		if (*vend)
			return parse_fail(pf, line, "value does not parse as a number");
	}
	return true;
}

static const char *label(const struct parsed *s, const char *name)
{
	for (int i = 0; i < s->n_labels; i++)
		if (strcmp(s->labels[i][0], name) == 0)
			return s->labels[i][1];
	return NULL;
}

static void test_render_and_parse(void)
{
	const char *nasty = "a\\b\"c\nd";
	struct metrics m;
	metrics_init(&m, "main-db:orders", nasty);
	CHECK(metrics_add_u64(&m, "trellara_stream_bytes", "valid bytes in the stream", METRIC_GAUGE, NULL, NULL,
			      UINT64_MAX) == 0);
	CHECK(metrics_add_double(&m, "trellara_slot_lag_seconds", "help with \\ and\nnewline", METRIC_GAUGE, NULL, NULL,
				 0.1) == 0);
	CHECK(metrics_add_u64(&m, "trellara_supervisor_restarts_total", "restarts", METRIC_COUNTER, "component",
			      "capture", 3) == 0);
	CHECK(metrics_add_double(&m, "trellara_stream_frames", "x", METRIC_GAUGE, NULL, NULL, NAN) == 0);
	/* a second sample of the first family, added after others: grouped */
	CHECK(metrics_add_u64(&m, "trellara_supervisor_restarts_total", "restarts", METRIC_COUNTER, "component",
			      "applyd", 5) == 0);
	CHECK(metrics_add_double(&m, "trellara_inf_seconds", "i", METRIC_GAUGE, "k", nasty, -INFINITY) == 0);
	size_t len;
	char *text = metrics_render(&m, &len);
	CHECK(strlen(text) == len);
	struct parsed_file pf;
	bool ok = parse_exposition(text, &pf);
	if (!ok)
		fprintf(stderr, "%s\n---\n%s---\n", pf.error, text);
	CHECK(ok);
	CHECK(pf.n == 6);
	CHECK(pf.n_typed == 5);
	CHECK(pf.helps == 5);
	CHECK_STR(pf.samples[0].name, "trellara_stream_bytes");
	CHECK_STR(pf.samples[0].value, "18446744073709551615");
	CHECK_STR(label(&pf.samples[0], "flow"), "main-db:orders");
	CHECK_STR(label(&pf.samples[0], "source"), nasty);
	CHECK_STR(pf.samples[1].value, "0.1");
	CHECK_STR(pf.samples[2].name, "trellara_supervisor_restarts_total");
	CHECK_STR(label(&pf.samples[2], "component"), "capture");
	CHECK_STR(pf.samples[3].name, "trellara_supervisor_restarts_total");
	CHECK_STR(label(&pf.samples[3], "component"), "applyd");
	CHECK_STR(pf.samples[3].value, "5");
	CHECK_STR(pf.types[2], "counter");
	CHECK_STR(pf.samples[4].value, "NaN");
	CHECK_STR(pf.samples[5].value, "-Inf");
	CHECK_STR(label(&pf.samples[5], "k"), nasty);
	/* exact text of the escapes */
	CHECK(strstr(text, "source=\"a\\\\b\\\"c\\nd\"") != NULL);
	CHECK(strstr(text, "# HELP trellara_slot_lag_seconds help with \\\\ and\\nnewline\n") != NULL);
	CHECK(strstr(text, "trellara_stream_bytes{flow=\"main-db:orders\",source=\"a\\\\b\\\"c\\nd\"} 18446744073709551615\n") !=
	      NULL);
	free(text);
	metrics_free(&m);
}

static void test_refusals(void)
{
	struct metrics m;
	metrics_init(&m, "f", "s");
	CHECK(metrics_add_u64(&m, "stream_bytes", "no prefix", METRIC_GAUGE, NULL, NULL, 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_", "empty", METRIC_GAUGE, NULL, NULL, 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_bad-name", "dash", METRIC_GAUGE, NULL, NULL, 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_restarts", "counter without _total", METRIC_COUNTER, NULL, NULL, 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_x_total", "gauge with _total", METRIC_GAUGE, NULL, NULL, 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "bad label", METRIC_GAUGE, "0abc", "v", 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "reserved label", METRIC_GAUGE, "flow", "v", 1) < 0);
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "help", METRIC_GAUGE, NULL, NULL, 1) == 0);
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "help", METRIC_GAUGE, NULL, NULL, 2) < 0); /* same series */
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "other help", METRIC_GAUGE, "a", "b", 2) < 0);
	CHECK(metrics_add_u64(&m, "trellara_x_bytes", "help", METRIC_GAUGE, "a", "b", 2) == 0);
	CHECK(m.n == 2);
	metrics_reset(&m);
	CHECK(m.n == 0);
	char *text = metrics_render(&m, NULL);
	CHECK_STR(text, "");
	free(text);
	metrics_free(&m);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_write_file(void)
{
	char base[] = "/tmp/trellara-test-metrics.XXXXXX";
	CHECK(mkdtemp(base) != NULL);
	char *dir = xasprintf("%s/deep/metrics", base);
	struct metrics m;
	metrics_init(&m, "src:ds", "src");
	CHECK(metrics_add_u64(&m, "trellara_apply_transactions_total", "applied", METRIC_COUNTER, NULL, NULL, 7) == 0);
	CHECK(metrics_write_file(dir, "trellara-applyd", &m, false) == 0);
	char *path = xasprintf("%s/trellara-applyd.prom", dir);
	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
	char *data = NULL;
	size_t len = 0;
	CHECK(fs_read_file(path, &data, &len) == 0);
	struct parsed_file pf;
	CHECK(data && parse_exposition(data, &pf) && pf.n == 1 && strcmp(pf.samples[0].value, "7") == 0);
	free(data);
	/* replaced whole, durable variant too; no temporary file left */
	metrics_reset(&m);
	CHECK(metrics_add_u64(&m, "trellara_apply_transactions_total", "applied", METRIC_COUNTER, NULL, NULL, 8) == 0);
	CHECK(metrics_write_file(dir, "trellara-applyd", &m, true) == 0);
	CHECK(fs_read_file(path, &data, &len) == 0);
	CHECK(data && parse_exposition(data, &pf) && pf.n == 1 && strcmp(pf.samples[0].value, "8") == 0);
	free(data);
	CHECK(count_entries(dir) == 1);
	/* a directory that cannot be created: -1, logged */
	char *blocked = xasprintf("%s/file", base);
	FILE *f = fopen(blocked, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	char *under_file = xasprintf("%s/sub", blocked);
	CHECK(metrics_write_file(under_file, "x", &m, false) < 0);
	unlink(path);
	rmdir(dir);
	char *deep = xasprintf("%s/deep", base);
	rmdir(deep);
	unlink(blocked);
	rmdir(base);
	free(deep);
	free(under_file);
	free(blocked);
	free(path);
	free(dir);
	metrics_free(&m);
}

struct publish_count {
	int fills;
	uint64_t value;
};

static void fill_one(struct metrics *m, int64_t now_us, void *arg)
{
	struct publish_count *c = arg;
	c->fills++;
	CHECK(metrics_add_u64(m, "trellara_test_now_seconds", "now", METRIC_GAUGE, NULL, NULL,
			      (uint64_t)(now_us / 1000000)) == 0);
	c->value = (uint64_t)(now_us / 1000000);
}

/* at most once a second unless forced; nothing without a directory */
static void test_publish(void)
{
	char base[] = "/tmp/trellara-test-publish.XXXXXX";
	CHECK(mkdtemp(base) != NULL);
	struct publish_count c = { 0 };
	struct metrics_publisher off = { .dir = NULL, .program = "daemon", .flow = "s:d", .source = "s" };
	metrics_publish(&off, 5000000, true, fill_one, &c);
	CHECK(c.fills == 0);
	struct metrics_publisher p = { .dir = base, .program = "daemon", .flow = "s:d", .source = "s" };
	metrics_publish(&p, 7000000, false, fill_one, &c); /* the first write is never throttled */
	CHECK(c.fills == 1);
	metrics_publish(&p, 7999999, false, fill_one, &c);
	CHECK(c.fills == 1);
	metrics_publish(&p, 7999999, true, fill_one, &c);
	CHECK(c.fills == 2);
	metrics_publish(&p, 9000000, false, fill_one, &c);
	CHECK(c.fills == 3);
	char *path = xasprintf("%s/daemon.prom", base);
	char *data = NULL;
	size_t len = 0;
	CHECK(fs_read_file(path, &data, &len) == 0);
	struct parsed_file pf;
	CHECK(data && parse_exposition(data, &pf) && pf.n == 1 && strcmp(pf.samples[0].value, "9") == 0);
	CHECK(data && parse_exposition(data, &pf) && strcmp(label(&pf.samples[0], "flow"), "s:d") == 0);
	free(data);
	unlink(path);
	free(path);
	rmdir(base);
}

int main(void)
{
	test_render_and_parse();
	test_refusals();
	test_write_file();
	test_publish();
	return unit_done("test_metrics");
}

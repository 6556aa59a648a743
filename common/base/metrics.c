/*
 * metrics.c - Prometheus text-format writer (see metrics.h).
 */
#include "trellara/metrics.h"

#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void metrics_init(struct metrics *m, const char *flow, const char *source)
{
	memset(m, 0, sizeof *m);
	m->flow = xstrdup(flow ? flow : "");
	m->source = xstrdup(source ? source : "");
}

void metrics_reset(struct metrics *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->samples[i].name);
		free(m->samples[i].help);
		free(m->samples[i].label_name);
		free(m->samples[i].label_value);
	}
	m->n = 0;
}

void metrics_free(struct metrics *m)
{
	metrics_reset(m);
	free(m->samples);
	free(m->flow);
	free(m->source);
	memset(m, 0, sizeof *m);
}

static bool name_char(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return true;
	return !first && c >= '0' && c <= '9';
}

/* [a-zA-Z_][a-zA-Z0-9_]* (label names; colons are for metric names of
 * recording rules, which we never write). */
static bool identifier_valid(const char *s)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++)
		if (!name_char(*p, p == s))
			return false;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool metrics_name_valid(const char *name)
{
	return identifier_valid(name) && strncmp(name, "trellara_", 9) == 0 && name[9] != '\0';
}

static bool same_series(const struct metric_sample *a, const char *name, const char *label_name,
			const char *label_value)
{
	if (strcmp(a->name, name) != 0)
		return false;
	if (!a->label_name || !label_name)
		return !a->label_name && !label_name;
	return strcmp(a->label_name, label_name) == 0 && strcmp(a->label_value, label_value) == 0;
}

static struct metric_sample *add(struct metrics *m, const char *name, const char *help, enum metric_type type,
				 const char *label_name, const char *label_value)
{
	if (!metrics_name_valid(name)) {
		log_error("metric name \"%s\" is not a valid trellara_... Prometheus name", name ? name : "(null)");
		return NULL;
	}
	if (type == METRIC_COUNTER && !ends_with(name, "_total")) {
		log_error("counter \"%s\" must end in _total", name);
		return NULL;
	}
	if (type != METRIC_COUNTER && ends_with(name, "_total")) {
		log_error("metric \"%s\" ends in _total but is not a counter", name);
		return NULL;
	}
	if (label_name && (!identifier_valid(label_name) || strncmp(label_name, "__", 2) == 0 ||
			   strcmp(label_name, "flow") == 0 || strcmp(label_name, "source") == 0 || !label_value)) {
		log_error("metric \"%s\": bad extra label \"%s\"", name, label_name);
		return NULL;
	}
	for (size_t i = 0; i < m->n; i++) {
		const struct metric_sample *s = &m->samples[i];
		if (strcmp(s->name, name) != 0)
			continue;
		if (s->type != type || strcmp(s->help, help ? help : "") != 0) {
			log_error("metric \"%s\" added twice with different help or type", name);
			return NULL;
		}
		if (same_series(s, name, label_name, label_value)) {
			log_error("metric \"%s\" added twice with the same labels", name);
			return NULL;
		}
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 32;
		m->samples = xrealloc(m->samples, m->cap * sizeof *m->samples);
	}
	struct metric_sample *s = &m->samples[m->n++];
	memset(s, 0, sizeof *s);
	s->name = xstrdup(name);
	s->help = xstrdup(help ? help : "");
	s->type = type;
	if (label_name) {
		s->label_name = xstrdup(label_name);
		s->label_value = xstrdup(label_value);
	}
	return s;
}

int metrics_add_double(struct metrics *m, const char *name, const char *help, enum metric_type type,
		       const char *label_name, const char *label_value, double value)
{
	struct metric_sample *s = add(m, name, help, type, label_name, label_value);
	if (!s)
		return -1;
	s->value = value;
	return 0;
}

int metrics_add_u64(struct metrics *m, const char *name, const char *help, enum metric_type type,
		    const char *label_name, const char *label_value, uint64_t value)
{
	struct metric_sample *s = add(m, name, help, type, label_name, label_value);
	if (!s)
		return -1;
	s->is_integer = true;
	s->u64 = value;
	return 0;
}

/* HELP text: backslash and newline escaped. */
static void write_help(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* Label values: backslash, double quote and newline escaped. */
static void write_label_value(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '"')
			fputs("\\\"", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* The shortest %g form that reads back as the same double. */
static void write_double(FILE *out, double v)
{
	if (isnan(v)) {
		fputs("NaN", out);
		return;
	}
	if (isinf(v)) {
		fputs(v > 0 ? "+Inf" : "-Inf", out);
		return;
	}
	char text[40];
	for (int precision = 15; precision <= 17; precision++) {
		snprintf(text, sizeof text, "%.*g", precision, v);
		if (strtod(text, NULL) == v)
			break;
	}
	fputs(text, out);
}

static void write_sample(FILE *out, const struct metrics *m, const struct metric_sample *s)
{
	fprintf(out, "%s{flow=\"", s->name);
	write_label_value(out, m->flow);
	fputs("\",source=\"", out);
	write_label_value(out, m->source);
	fputc('"', out);
	if (s->label_name) {
		fprintf(out, ",%s=\"", s->label_name);
		write_label_value(out, s->label_value);
		fputc('"', out);
	}
	fputs("} ", out);
	if (s->is_integer)
		fprintf(out, "%" PRIu64, s->u64);
	else
		write_double(out, s->value);
	fputc('\n', out);
}

char *metrics_render(const struct metrics *m, size_t *len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);
	if (!out) {
		fprintf(stderr, "fatal: out of memory rendering metrics\n");
		abort();
	}
	/* one group per family, in the order of each family's first sample */
	for (size_t i = 0; i < m->n; i++) {
		const struct metric_sample *s = &m->samples[i];
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(m->samples[k].name, s->name) == 0;
		if (seen)
			continue;
		fprintf(out, "# HELP %s ", s->name);
		write_help(out, s->help);
		fprintf(out, "\n# TYPE %s %s\n", s->name, s->type == METRIC_COUNTER ? "counter" : "gauge");
		for (size_t k = i; k < m->n; k++)
			if (strcmp(m->samples[k].name, s->name) == 0)
				write_sample(out, m, &m->samples[k]);
	}
	if (fclose(out) != 0) {
		fprintf(stderr, "fatal: out of memory rendering metrics\n");
		abort();
	}
	if (len)
		*len = size;
	return text;
}

int metrics_write_file(const char *dir, const char *program, const struct metrics *m, bool durable)
{
	char *path = xasprintf("%s/%s.prom", dir, program);
	size_t len;
	char *text = metrics_render(m, &len);
	int rc = fs_mkdir_p(dir) < 0 ? -1 : fs_write_atomic(path, text, len, durable);
	free(text);
	free(path);
	return rc;
}

void metrics_publish(struct metrics_publisher *p, int64_t now_us, bool force,
		     void (*fill)(struct metrics *m, int64_t now_us, void *arg), void *arg)
{
	if (!p->dir)
		return;
	if (!force && p->last_us && now_us - p->last_us < 1000000)
		return;
	p->last_us = now_us;
	struct metrics m;
	metrics_init(&m, p->flow, p->source);
	fill(&m, now_us, arg);
	metrics_write_file(p->dir, p->program, &m, false);
	metrics_free(&m);
}

/*
 * plan_set_emit - a test driver for the set-based statements
 * (tests/bats/33-apply-set-sql.bats): reads relations and changes on
 * stdin, plans them with plan_change_set (or row by row with
 * plan_change), and either prints the statements or runs them on a
 * database through applyd's executor, in one transaction, with the
 * executor's row-count check (every count checked before COMMIT).
 *
 *   plan_set_emit [--url URL] < spec
 *
 * The spec, one item a line, fields separated by tabs:
 *   rel SCHEMA TABLE PARTITIONED(0|1)          a relation (index: its order)
 *   col NAME TYPE_OID KEY(0|1) ALWAYS(0|1) [FORMAT_TYPE]   a column of the last rel
 *   I REL V...    U REL V...    D REL K|O V... a change (U: old kind 0)
 *   set           plan the changes so far as one statement, forget them
 *   row           plan each change so far on its own, forget them
 * A value is its text, \N for NULL, \U for an unchanged TOAST value.
 *
 * Prints for each statement "-- rows N" and its SQL with the parameters
 * (printing), or nothing (running).  "set" for changes plan_change_set
 * will not take prints "-- one by one" and plans them row by row.
 * Exit 0; 1 when the database reported an error (printed as
 * "error SQLSTATE: message"); 2 on a bad spec or planning error.
 */
#include "../../cmd/trellara-applyd/executor.h"

#include "trellara/envelope.h"
#include "trellara/log.h"
#include "trellara/planner.h"
#include "trellara/xalloc.h"

#include <libpq-fe.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RELS 16
#define MAX_COLS 1600
#define MAX_CHANGES 1024

struct spec_rel {
	struct env_relation rel;
	struct env_column cols[MAX_COLS];
	bool key[MAX_COLS], always[MAX_COLS];
	const char *types[MAX_COLS];
};

static struct spec_rel rels[MAX_RELS];
static struct plan_relation prels[MAX_RELS];
static uint32_t n_rels;
static struct env_change changes[MAX_CHANGES];
static size_t n_changes;
static struct executor ex;
static bool running;
static uint64_t tag;

static int fail(const char *msg, int line)
{
	fprintf(stderr, "plan_set_emit: line %d: %s\n", line, msg);
	return 2;
}

/* Splits line at tabs into at most max fields. */
static int split(char *line, char **f, int max)
{
	int n = 0;
	for (char *p = line; n < max;) {
		f[n++] = p;
		char *tab = strchr(p, '\t');
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	return n;
}

static struct env_value value_of(const char *v)
{
	if (strcmp(v, "\\N") == 0)
		return (struct env_value){ ENV_NULL, 0, NULL };
	if (strcmp(v, "\\U") == 0)
		return (struct env_value){ ENV_UNCHANGED_TOAST, 0, NULL };
	return (struct env_value){ ENV_TEXT, (uint32_t)strlen(v), (const uint8_t *)xstrdup(v) };
}

static void print_literal(const char *v)
{
	if (!v) {
		fputs("NULL", stdout);
		return;
	}
	putchar('\'');
	for (; *v; v++) {
		if (*v == '\'')
			putchar('\'');
		putchar(*v);
	}
	putchar('\'');
}

/* Prints or queues s. */
static int emit(const struct plan_stmt *s)
{
	if (!running) {
		printf("-- rows %" PRIu64 "\n%s\n-- parameters:", s->expect_one ? s->expect_rows : 0, s->sql.buf);
		for (size_t i = 0; i < s->n_params; i++) {
			putchar(' ');
			print_literal(s->values[i]);
		}
		putchar('\n');
		return 0;
	}
	executor_exec(&ex, s->sql.buf, (int)s->n_params, s->values, ++tag, s->expect_one, s->expect_rows,
		      s->what.len ? s->what.buf : NULL);
	return 0;
}

static int plan_rows(struct plan_stmt *s, int line)
{
	char err[512];
	for (size_t k = 0; k < n_changes; k++) {
		if (plan_change("trellara", prels, n_rels, &changes[k], true, s, err, sizeof err) != 0)
			return fail(err, line);
		emit(s);
	}
	return 0;
}

static void forget_changes(void)
{
	for (size_t k = 0; k < n_changes; k++) {
		struct env_tuple *t = changes[k].op == ENV_DELETE ? &changes[k].old_tuple : &changes[k].new_tuple;
		for (uint16_t i = 0; i < t->n; i++)
			free((void *)t->values[i].data);
		free(t->values);
	}
	n_changes = 0;
}

static int run(FILE *in)
{
	static char buf[65536];
	static char *f[MAX_COLS + 4];
	struct plan_stmt s;
	plan_stmt_init(&s);
	int line = 0, rc = 0;
	while (rc == 0 && fgets(buf, sizeof buf, in)) {
		line++;
		buf[strcspn(buf, "\n")] = '\0';
		if (!buf[0] || buf[0] == '#')
			continue;
		int n = split(buf, f, MAX_COLS + 4);
		if (strcmp(f[0], "rel") == 0 && n == 4 && n_rels < MAX_RELS) {
			struct spec_rel *r = &rels[n_rels];
			r->rel = (struct env_relation){ 1 + n_rels, xstrdup(f[1]), xstrdup(f[2]), strlen(f[1]), strlen(f[2]),
							'd', 0, r->cols };
			prels[n_rels] = (struct plan_relation){ &r->rel, r->key, r->always, f[3][0] == '1', r->types, NULL };
			n_rels++;
		} else if (strcmp(f[0], "col") == 0 && (n == 5 || n == 6) && n_rels && rels[n_rels - 1].rel.n_columns < MAX_COLS) {
			struct spec_rel *r = &rels[n_rels - 1];
			uint16_t i = r->rel.n_columns++;
			r->cols[i] = (struct env_column){ xstrdup(f[1]), strlen(f[1]), (uint32_t)strtoul(f[2], NULL, 10), -1,
							  f[3][0] == '1' };
			r->key[i] = f[3][0] == '1';
			r->always[i] = f[4][0] == '1';
			r->types[i] = n == 6 && f[5][0] ? xstrdup(f[5]) : NULL;
		} else if ((strcmp(f[0], "I") == 0 || strcmp(f[0], "U") == 0 || strcmp(f[0], "D") == 0) && n >= 2 &&
			   n_changes < MAX_CHANGES) {
			struct env_change *c = &changes[n_changes];
			memset(c, 0, sizeof *c);
			c->op = (uint8_t)f[0][0];
			c->relation = (uint32_t)strtoul(f[1], NULL, 10);
			int first = 2;
			if (c->op == ENV_DELETE) {
				if (n < 3)
					return fail("a delete needs K or O", line);
				c->old_kind = (uint8_t)f[2][0];
				first = 3;
			}
			struct env_tuple *t = c->op == ENV_DELETE ? &c->old_tuple : &c->new_tuple;
			t->n = (uint16_t)(n - first);
			t->values = xcalloc(t->n ? t->n : 1, sizeof *t->values);
			for (int i = first; i < n; i++)
				t->values[i - first] = value_of(f[i]);
			n_changes++;
		} else if (strcmp(f[0], "set") == 0 || strcmp(f[0], "row") == 0) {
			const struct env_change **cs = xcalloc(n_changes ? n_changes : 1, sizeof *cs);
			for (size_t k = 0; k < n_changes; k++)
				cs[k] = &changes[k];
			char err[512];
			int p = f[0][0] == 's' ? plan_change_set("trellara", prels, n_rels, cs, n_changes, &s, err, sizeof err)
					       : 1;
			free(cs);
			if (p < 0) {
				rc = fail(err, line);
			} else if (p == 1) {
				if (f[0][0] == 's' && !running)
					printf("-- one by one\n");
				rc = plan_rows(&s, line);
			} else {
				emit(&s);
			}
			forget_changes();
		} else {
			rc = fail("not understood", line);
		}
	}
	forget_changes();
	plan_stmt_free(&s);
	return rc;
}

int main(int argc, char **argv)
{
	log_setup("plan_set_emit", 0);
	PGconn *conn = NULL;
	if (argc == 3 && strcmp(argv[1], "--url") == 0) {
		conn = PQconnectdb(argv[2]);
		if (PQstatus(conn) != CONNECTION_OK) {
			fprintf(stderr, "plan_set_emit: cannot connect: %s", PQerrorMessage(conn));
			PQfinish(conn);
			return 2;
		}
		if (getenv("PLAN_SET_EMIT_TRACE"))
			PQtrace(conn, stderr); /* the protocol messages, for debugging */
		if (executor_init(&ex, conn) < 0)
			return 2;
		running = true;
		executor_control(&ex, "BEGIN", ++tag);
	} else if (argc != 1) {
		fprintf(stderr, "usage: plan_set_emit [--url URL] < spec\n");
		return 2;
	}
	int rc = run(stdin);
	if (running) {
		/* as applyd does: every row count checked before COMMIT is sent */
		if (rc == 0 && executor_sync(&ex) == 0)
			executor_control(&ex, "COMMIT", ++tag);
		if (rc == 0) {
			if (executor_sync(&ex) < 0) {
				printf("error %s: %s\n", ex.error.sqlstate, ex.error.message);
				rc = 1;
			}
		}
		executor_free(&ex);
		PQfinish(conn);
	}
	for (uint32_t r = 0; r < n_rels; r++) {
		free((void *)rels[r].rel.schema);
		free((void *)rels[r].rel.name);
		for (uint16_t i = 0; i < rels[r].rel.n_columns; i++) {
			free((void *)rels[r].cols[i].name);
			free((void *)rels[r].types[i]);
		}
	}
	return rc;
}

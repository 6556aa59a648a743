/*
 * snapshot_tables.c - trellara-snapshot --create-tables: the missing
 * target tables from the source's definitions (snapshot_int.h).
 */
#include "snapshot_int.h"

#include "trellara/checkpoint.h"
#include "trellara/defaults.h"
#include "trellara/fault.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/lsn.h"
#include "trellara/pgconn.h"
#include "trellara/runs.h"
#include "trellara/strbuf.h"
#include "trellara/textcodec.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* A connection string for a child's command line: every parameter of
 * url except the password, which goes into *password (NULL when none)
 * for the child's environment.  NULL when url cannot be parsed or
 * carries an sslpassword (logged). */
static char *conninfo_for_argv(const char *url, const char *role, char **password)
{
	char *err = NULL;
	*password = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &err);
	if (!opts) {
		log_error("cannot parse the %s connection string%s%s", role, err ? ": " : "", err ? err : "");
		PQfreemem(err);
		return NULL;
	}
	struct strbuf b = STRBUF_INIT;
	bool ok = true;
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || !*o->val)
			continue;
		if (strcmp(o->keyword, "password") == 0) {
			free(*password);
			*password = xstrdup(o->val);
			continue;
		}
		if (strcmp(o->keyword, "sslpassword") == 0) {
			log_error("the %s connection string has an sslpassword: --create-tables cannot pass it to pg_dump and psql"
				  " without a command line",
				  role);
			ok = false;
			break;
		}
		strbuf_addf(&b, "%s%s='", b.len ? " " : "", o->keyword);
		for (const char *c = o->val; *c; c++)
			strbuf_addf(&b, "%s%c", *c == '\'' || *c == '\\' ? "\\" : "", *c);
		strbuf_addch(&b, '\'');
	}
	PQconninfoFree(opts);
	if (!ok) {
		strbuf_release(&b);
		free(*password);
		*password = NULL;
		return NULL;
	}
	return strbuf_detach(&b, NULL);
}

/* Runs argv (found on PATH) with PGPASSWORD set to password in its own
 * environment only, files it creates private (umask 077), standard
 * output to /dev/null when quiet; its exit status, or -1 when it could
 * not run or died by a signal (logged). */
static int run_child(char *const *argv, const char *password, bool quiet)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		log_error("cannot start %s: fork: %m", argv[0]);
		return -1;
	}
	if (pid == 0) {
		umask(077);
		signal(SIGPIPE, SIG_DFL);
		if (password)
			setenv("PGPASSWORD", password, 1);
		if (quiet) {
			int fd = open("/dev/null", O_WRONLY);
			if (fd >= 0) {
				dup2(fd, STDOUT_FILENO);
				close(fd);
			}
		}
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			log_error("waiting for %s: %m", argv[0]);
			return -1;
		}
	}
	if (WIFSIGNALED(status)) {
		log_error("%s was killed by signal %d", argv[0], WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
}

/* pg_dump's pattern for exactly this name: each part double-quoted,
 * quotes doubled (wildcards and upper case are then literal). */
static char *dump_pattern(const char *schema, const char *name)
{
	struct strbuf b = STRBUF_INIT;
	const char *parts[2] = { schema, name };
	for (int i = 0; i < 2; i++) {
		strbuf_addf(&b, "%s\"", i ? "." : "");
		for (const char *c = parts[i]; *c; c++)
			strbuf_addf(&b, "%s%c", *c == '"' ? "\"" : "", *c);
		strbuf_addch(&b, '"');
	}
	return strbuf_detach(&b, NULL);
}

/* The -t patterns of a table: itself, and for a partitioned table every
 * partition below it (pg_dump -t does not follow them). */
static int dump_patterns(PGconn *src, const struct table_config *t, char ***patterns, size_t *n)
{
	*patterns = xcalloc(1, sizeof **patterns);
	(*patterns)[0] = dump_pattern(t->schema, t->name);
	*n = 1;
	char *qs = pgconn_quote_ident(src, t->schema), *qn = pgconn_quote_ident(src, t->name);
	char *qualified = xasprintf("%s.%s", qs, qn);
	const char *p[1] = { qualified };
	PGresult *res = pgconn_query(src,
				     "SELECT n.nspname, c.relname FROM pg_partition_tree(to_regclass($1)) pt"
				     " JOIN pg_class c ON c.oid = pt.relid JOIN pg_namespace n ON n.oid = c.relnamespace"
				     " WHERE pt.relid <> to_regclass($1) ORDER BY pt.level, c.relname",
				     1, p);
	free(qualified);
	free(qs);
	free(qn);
	if (!res)
		return -1;
	*patterns = xrealloc(*patterns, ((size_t)PQntuples(res) + 1) * sizeof **patterns);
	for (int r = 0; r < PQntuples(res); r++)
		(*patterns)[(*n)++] = dump_pattern(PQgetvalue(res, r, 0), PQgetvalue(res, r, 1));
	PQclear(res);
	return 0;
}

/* --create-tables: the missing target tables from the source's
 * definitions (pg_dump into a private file, psql -f it), indexes and
 * constraints after the data.  No password on any command line. */
int snapshot_create_missing_tables(PGconn *src, PGconn *dst, const struct flow_config *cfg, const char *section,
				 bool only_missing, bool *created)
{
	int rc = -1;
	char *src_pw = NULL, *dst_pw = NULL, *file = NULL, *dir = NULL;
	char *src_ci = conninfo_for_argv(cfg->source_database_url, "source", &src_pw);
	char *dst_ci = conninfo_for_argv(cfg->target_database_url, "target", &dst_pw);
	if (!src_ci || !dst_ci)
		goto out;
	const char *tmp = getenv("TMPDIR");
	dir = xasprintf("%s/trellara-snapshot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) { /* mode 0700 */
		log_error("cannot create a private directory \"%s\" for pg_dump's output: %m", dir);
		free(dir);
		dir = NULL;
		goto out;
	}
	file = xasprintf("%s/%s.sql", dir, section);
	for (size_t i = 0; i < cfg->n_tables; i++) {
		char name[300];
		snapshot_table_names(cfg, i, name, sizeof name);
		if (only_missing) {
			char *qs = pgconn_quote_ident(dst, cfg->tables[i].schema), *qn = pgconn_quote_ident(dst, cfg->tables[i].name);
			char *qualified = xasprintf("%s.%s", qs, qn);
			const char *p[1] = { qualified };
			PGresult *res = pgconn_query(dst, "SELECT to_regclass($1) IS NULL", 1, p);
			free(qualified);
			free(qs);
			free(qn);
			if (!res)
				goto out;
			created[i] = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
			PQclear(res);
		}
		if (!created[i])
			continue;
		char **patterns;
		size_t n_patterns;
		if (dump_patterns(src, &cfg->tables[i], &patterns, &n_patterns) < 0)
			goto out;
		char *section_opt = xasprintf("--section=%s", section);
		size_t argc = 0;
		char **argv = xcalloc(10 + 2 * n_patterns, sizeof *argv); /* 7 options, -t pairs, -d and its value, NULL */
		argv[argc++] = "pg_dump";
		argv[argc++] = "--no-owner";
		argv[argc++] = "--no-privileges";
		argv[argc++] = "--schema-only";
		argv[argc++] = section_opt;
		argv[argc++] = "-f";
		argv[argc++] = file;
		for (size_t k = 0; k < n_patterns; k++) {
			argv[argc++] = "-t";
			argv[argc++] = patterns[k];
		}
		argv[argc++] = "-d";
		argv[argc++] = src_ci;
		argv[argc] = NULL;
		unlink(file);
		int dump_status = run_child(argv, src_pw, false);
		int restore_status = -2;
		if (dump_status == 0) {
			char *psql_argv[] = { "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-f", file, "-d",
					      dst_ci, NULL };
			restore_status = run_child(psql_argv, dst_pw, true);
		}
		unlink(file);
		for (size_t k = 0; k < n_patterns; k++)
			free(patterns[k]);
		free(patterns);
		free(argv);
		free(section_opt);
		if (dump_status != 0) {
			log_error("cannot create target table %s from the source definition: pg_dump --section=%s failed (exit status %d)",
				  name, section, dump_status);
			goto out;
		}
		if (restore_status != 0) {
			log_error("cannot create target table %s from the source definition: psql of pg_dump --section=%s failed"
				  " (exit status %d)",
				  name, section, restore_status);
			goto out;
		}
		log_info("target table %s: %s created from the source definition", name, section);
	}
	rc = 0;
out:
	if (dir && rmdir(dir) < 0)
		log_warn("cannot remove directory \"%s\": %m", dir);
	free(dir);
	free(file);
	free(src_ci);
	free(dst_ci);
	if (src_pw)
		memset(src_pw, 0, strlen(src_pw));
	if (dst_pw)
		memset(dst_pw, 0, strlen(dst_pw));
	free(src_pw);
	free(dst_pw);
	return rc;
}

/*
 * contract_pg.c - a fingerprint read from the catalogs, the pin file
 * read and written, the start check of dataset.contract: pinned
 * (contract.h).  The flow's table names go as parameters (PQexecParams
 * through pgconn_query); nothing is built from them.
 */
#include "contract.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/fsutil.h"
#include "trellara/log.h"
#include "trellara/pgconn.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char table_sql[] =
	"SELECT c.oid, c.relkind, c.relispartition, c.relreplident,"
	" CASE WHEN c.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(c.oid) END"
	" FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	" WHERE n.nspname = $1 AND c.relname = $2";

static const char columns_sql[] =
	"SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid, a.atttypmod,"
	" a.attnotnull, a.attidentity, a.attgenerated"
	" FROM pg_catalog.pg_attribute a"
	" WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

/* the key columns (not INCLUDE ones) of the primary key ('p') and the
 * replica identity index ('i'), each in key order */
static const char keys_sql[] =
	"SELECT k.kind, a.attname"
	" FROM pg_catalog.pg_index i"
	" CROSS JOIN LATERAL (VALUES ('p', i.indisprimary), ('i', i.indisreplident)) AS k(kind, is_it)"
	" CROSS JOIN LATERAL unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS c(attnum, ord)"
	" JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = c.attnum"
	" WHERE i.indrelid = $1 AND k.is_it AND c.ord <= i.indnkeyatts"
	" ORDER BY k.kind, c.ord";

static char one_char(const char *s)
{
	return s[0];
}

static int read_table(PGconn *conn, const char *role, struct contract_table *t)
{
	const char *params[2] = { t->schema, t->name };
	PGresult *res = pgconn_query(conn, table_sql, 2, params), *cols = NULL, *keys = NULL;
	int rc = -1;
	if (!res)
		goto out;
	t->exists = PQntuples(res) == 1;
	if (!t->exists) {
		rc = 0;
		goto out;
	}
	const char *oid = PQgetvalue(res, 0, 0);
	t->relkind = one_char(PQgetvalue(res, 0, 1));
	t->is_partition = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
	t->replica_identity = one_char(PQgetvalue(res, 0, 3));
	if (!PQgetisnull(res, 0, 4))
		t->partition_key = xstrdup(PQgetvalue(res, 0, 4));
	const char *relid[1] = { oid };
	if (!(cols = pgconn_query(conn, columns_sql, 1, relid)) || !(keys = pgconn_query(conn, keys_sql, 1, relid)))
		goto out;
	int n = PQntuples(cols);
	t->columns = xcalloc(n ? (size_t)n : 1, sizeof *t->columns);
	for (int i = 0; i < n; i++) {
		struct contract_column *c = &t->columns[t->n_columns++];
		c->name = xstrdup(PQgetvalue(cols, i, 0));
		c->type = xstrdup(PQgetvalue(cols, i, 1));
		c->type_oid = (uint32_t)strtoul(PQgetvalue(cols, i, 2), NULL, 10);
		c->typmod = (int32_t)strtol(PQgetvalue(cols, i, 3), NULL, 10);
		c->not_null = strcmp(PQgetvalue(cols, i, 4), "t") == 0;
		c->identity = one_char(PQgetvalue(cols, i, 5));
		c->generated = one_char(PQgetvalue(cols, i, 6));
	}
	int nk = PQntuples(keys);
	t->primary_key = xcalloc(nk ? (size_t)nk : 1, sizeof *t->primary_key);
	t->replica_identity_columns = xcalloc(nk ? (size_t)nk : 1, sizeof *t->replica_identity_columns);
	for (int i = 0; i < nk; i++) {
		if (strcmp(PQgetvalue(keys, i, 0), "p") == 0)
			t->primary_key[t->n_primary_key++] = xstrdup(PQgetvalue(keys, i, 1));
		else if (t->replica_identity == 'i')
			t->replica_identity_columns[t->n_replica_identity_columns++] = xstrdup(PQgetvalue(keys, i, 1));
	}
	rc = 0;
out:
	if (rc < 0)
		log_error("cannot read the fingerprint of table \"%s.%s\" on the %s", t->schema, t->name, role);
	PQclear(res);
	PQclear(cols);
	PQclear(keys);
	return rc;
}

int contract_read_catalog(PGconn *conn, const struct flow_config *cfg, const char *role,
			  struct contract_fingerprint *fp)
{
	memset(fp, 0, sizeof *fp);
	fp->tables = xcalloc(cfg->n_tables ? cfg->n_tables : 1, sizeof *fp->tables);
	for (size_t i = 0; i < cfg->n_tables; i++) {
		struct contract_table *t = &fp->tables[fp->n_tables++];
		t->schema = xstrdup(cfg->tables[i].schema);
		t->name = xstrdup(cfg->tables[i].name);
		if (read_table(conn, role, t) < 0) {
			contract_fingerprint_free(fp);
			return -1;
		}
	}
	return 0;
}

int contract_pin_load(const char *path, struct contract_fingerprint *fp, bool *exists)
{
	char *data = NULL;
	size_t len = 0;
	char err[CONTRACT_ERR_LEN];
	int rc = -1;
	memset(fp, 0, sizeof *fp);
	*exists = false;
	FILE *f = fopen(path, "rb");
	if (!f) {
		if (errno == ENOENT) {
			rc = 0;
			goto out;
		}
		log_error("contract pin \"%s\": cannot open: %m", path);
		goto out;
	}
	*exists = true;
	fclose(f);
	if (fs_read_file(path, &data, &len) < 0)
		goto out;
	if (contract_pin_decode(data, len, fp, err, sizeof err) < 0) {
		log_error("contract pin \"%s\": %s", path, err);
		log_hint("the pin is written by \"trellara contract-test --update\"; write it again that way");
		goto out;
	}
	rc = 0;
out:
	free(data);
	return rc;
}

static char *parent_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

int contract_pin_save(const char *path, const struct contract_fingerprint *fp, const char *flow)
{
	char *text = NULL, *dir = parent_dir(path);
	size_t len = 0;
	int rc = -1;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	FILE *mem = open_memstream(&text, &len);
	if (!mem) {
		log_error("contract pin \"%s\": cannot encode: %m", path);
		goto out;
	}
	int wrc = contract_pin_write(mem, fp, flow, now);
	if (fclose(mem) != 0 || wrc < 0) {
		log_error("contract pin \"%s\": cannot encode: %m", path);
		goto out;
	}
	if (fs_mkdir_p(dir) < 0 || fs_write_durable(path, text, len) < 0)
		goto out;
	rc = 0;
out:
	free(text);
	free(dir);
	return rc;
}

char *contract_action_hint(const struct contract_diff *d, const char *config_path)
{
	char *config = strbuf_shell_quote(config_path);
	char *hint;
	if (d->action == CONTRACT_RESEED) {
		char *table = strbuf_shell_quote(d->table);
		hint = xasprintf("reseed the table: run \"trellara reseed --config %s --table %s\"", config, table);
		free(table);
	} else {
		hint = xasprintf("refresh the contract: apply the same change on the %s, then run \"trellara contract-test --config %s --update\"",
				 d->where == CONTRACT_TARGET_PIN ? "source" : "target", config);
	}
	free(config);
	return hint;
}

void contract_log_drift(const struct contract_diff *d, const struct flow_config *cfg)
{
	char *hint = contract_action_hint(d, cfg->path);
	char *line = contract_diff_line(d, hint);
	log_error("schema contract drift: %s", line);
	free(line);
	free(hint);
}

int contract_start_check(PGconn *conn, const struct flow_config *cfg, bool source, struct contract_fingerprint *pin)
{
	struct contract_fingerprint now = { 0 };
	struct contract_diffs diffs = { 0 };
	bool exists;
	int code = EXIT_DATAERR;
	memset(pin, 0, sizeof *pin);
	if (contract_pin_load(cfg->contract_pin, pin, &exists) < 0)
		goto out;
	if (!exists) {
		char *config = strbuf_shell_quote(cfg->path);
		log_error("dataset.contract is pinned, but there is no contract pin \"%s\"", cfg->contract_pin);
		log_hint("run \"trellara contract-test --config %s --update\" once source and target agree", config);
		free(config);
		code = EXIT_CONFIG;
		goto out;
	}
	char *flow = config_flow_id(cfg);
	bool other_flow = strcmp(pin->flow, flow) != 0;
	if (other_flow)
		log_error("contract pin \"%s\" is the pin of flow \"%s\", not of \"%s\"", cfg->contract_pin, pin->flow, flow);
	free(flow);
	if (other_flow) {
		log_hint("set dataset.contract_pin to this flow's own pin");
		code = EXIT_CONFIG;
		goto out;
	}
	if (contract_read_catalog(conn, cfg, source ? "source" : "target", &now) < 0) {
		code = -1;
		goto out;
	}
	contract_compare(&now, pin, source ? CONTRACT_SOURCE_PIN : CONTRACT_TARGET_PIN, &diffs);
	for (size_t i = 0; i < diffs.n; i++)
		contract_log_drift(&diffs.items[i], cfg);
	code = diffs.n ? EXIT_CONFIG : EXIT_OK;
	if (code == EXIT_OK)
		log_info("the %s matches the contract pin \"%s\" (%zu tables)", source ? "source" : "target",
			 cfg->contract_pin, pin->n_tables);
out:
	if (code != EXIT_OK)
		contract_fingerprint_free(pin);
	contract_fingerprint_free(&now);
	contract_diffs_free(&diffs);
	return code;
}

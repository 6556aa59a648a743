/*
 * config_secret.c - secret references in a flow file: a connection
 * string given as {source: environment_variable, name: VAR} or
 * {source: file, path: FILE} instead of inline (man 5 trellara.yml).
 * The secret is never shown: key names and values are masked in messages.
 */
#include "config_internal.h"

#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SECRET_FILE_MAX_BYTES (64 * 1024)

/* Read a small file whole; errno tells why on failure.  No logging. */
int config_read_small_file(const char *path, size_t limit, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t used = 0, cap = 4096;
	char *buf = xmalloc(cap);
	for (;;) {
		if (used + 1 >= cap)
			buf = xrealloc(buf, cap *= 2);
		ssize_t n = read(fd, buf + used, cap - used - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int saved = errno;
			free(buf);
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > limit) {
			free(buf);
			close(fd);
			errno = EFBIG;
			return -1;
		}
	}
	close(fd);
	buf[used] = '\0';
	*data = buf;
	*len = used;
	return 0;
}

/* A secret file's text without its trailing newlines: NULL, or why not
 * (errno set when reading failed, 0 when the content is wrong). */
static const char *read_secret_file(const char *path, char **data, size_t *len)
{
	*data = NULL;
	*len = 0;
	if (config_read_small_file(path, SECRET_FILE_MAX_BYTES, data, len) < 0)
		return "unreadable";
	errno = 0;
	while (*len > 0 && ((*data)[*len - 1] == '\n' || (*data)[*len - 1] == '\r'))
		(*data)[--*len] = '\0';
	if (*len == 0 || memchr(*data, '\0', *len)) {
		const char *why = *len ? "not text (it has a NUL byte)" : "empty";
		explicit_bzero(*data, *len);
		free(*data);
		*data = NULL;
		return why;
	}
	return NULL;
}

char *config_database_url(const struct flow_config *cfg, bool source)
{
	const char *file = source ? cfg->source_database_url_file : cfg->target_database_url_file;
	const char *loaded = source ? cfg->source_database_url : cfg->target_database_url;
	if (!file)
		return xstrdup(loaded);
	char *data;
	size_t len;
	const char *why = read_secret_file(file, &data, &len);
	if (!why)
		return data;
	if (errno)
		log_warn("cannot read secret file \"%s\" named by %s.database_url again: %m; using what it held before",
			 file, source ? "source" : "target");
	else
		log_warn("secret file \"%s\" named by %s.database_url is %s now; using what it held before", file,
			 source ? "source" : "target", why);
	return xstrdup(loaded);
}

/*
 * {source: environment_variable, name: VAR} or {source: file, path: P}.
 * Key names and values are masked when shown: a mistyped connection
 * string in flow style ({postgresql://u:pw@h}) is a mapping too.
 */
int config_resolve_secret(const struct loader *ld, const yaml_node_t *mapping, const char *keypath, char **out,
			  char **file_out)
{
	*file_out = NULL;
	static const struct field secret_fields[] = {
		{ .name = "source", .kind = K_STRING }, { .name = "name", .kind = K_STRING },
		{ .name = "path", .kind = K_STRING }, { 0 }
	};
	char *source = NULL, *name = NULL, *path = NULL, *data = NULL;
	size_t len = 0;
	int rc = -1;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *key = config_node_get(ld, pair->key);
		if (key->type != YAML_SCALAR_NODE || config_scalar_is(key, "source") ||
		    config_scalar_is(key, "name") || config_scalar_is(key, "path"))
			continue;
		char *shown = config_describe(key, true);
		report_at(ld, key, "unknown key \"%s.%s in a secret reference", keypath, shown + 1);
		free(shown);
		log_hint("write {source: environment_variable, name: VAR} or {source: file, path: FILE}");
		goto out;
	}
	if (config_check_keys(ld, mapping, keypath, secret_fields) < 0)
		goto out;

	yaml_node_t *source_node = config_mapping_value(ld, mapping, "source", NULL);
	char *source_path = config_key_path(keypath, "source");
	if (!source_node) {
		config_report(ld, &mapping->start_mark, false, "missing required key \"%s\"", source_path);
		free(source_path);
		goto out;
	}
	int got = config_scalar_text(ld, source_node, source_path, "a string", true, &source);
	bool env = source && strcmp(source, "environment_variable") == 0;
	bool file = source && strcmp(source, "file") == 0;
	if (got == 0 && !env && !file) {
		char *shown = config_describe(source_node, true);
		report_at(ld, source_node, "key \"%s\" must be \"environment_variable\" or \"file\", got %s",
			  source_path, shown);
		free(shown);
		got = -1;
	}
	free(source_path);
	if (got < 0)
		goto out;

	const char *needed = env ? "name" : "path", *unused = env ? "path" : "name";
	char *needed_path = config_key_path(keypath, needed), *unused_path = config_key_path(keypath, unused);
	yaml_node_t *unused_key = NULL, *needed_node = config_mapping_value(ld, mapping, needed, NULL);
	config_mapping_value(ld, mapping, unused, &unused_key);
	char *value = NULL;
	got = -1;
	if (unused_key)
		report_at(ld, unused_key, "key \"%s\" does not go with source \"%s\"", unused_path, source);
	else if (!needed_node || config_is_null(needed_node))
		config_report(ld, &mapping->start_mark, false, "missing required key \"%s\"", needed_path);
	else if (config_scalar_text(ld, needed_node, needed_path, "a string", false, &value) == 0)
		got = config_check_value(ld, needed_node, needed_path, V_NONE, value);
	free(needed_path);
	free(unused_path);
	if (env)
		name = value;
	else
		path = value;
	if (got < 0)
		goto out;

	if (env) {
		const char *secret = getenv(name);
		if (!secret || !*secret) {
			report_at(ld, mapping, "environment variable \"%s\" named by \"%s\" is %s", name,
				  keypath, secret ? "empty" : "not set");
			log_hint("export %s with the connection string before starting", name);
			goto out;
		}
		*out = xstrdup(secret);
		rc = 0;
		goto out;
	}
	const char *why = read_secret_file(path, &data, &len);
	if (why) {
		if (errno)
			report_at(ld, mapping, "cannot read secret file \"%s\" named by \"%s\": %m", path, keypath);
		else
			report_at(ld, mapping, "secret file \"%s\" named by \"%s\" is %s", path, keypath, why);
		goto out;
	}
	*out = data;
	data = NULL;
	*file_out = path;
	path = NULL;
	rc = 0;
out:
	if (data) {
		explicit_bzero(data, len);
		free(data);
	}
	free(source);
	free(name);
	free(path);
	return rc;
}

#include "trellara/conninfo.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>

static void check_mask(const char *input, const char *expected)
{
	char *masked = conninfo_mask(input);
	CHECK_STR(masked, expected);
	free(masked);
}

/* The masked form of input must contain none of the secret's forms. */
static void check_hidden(const char *input, const char *secret)
{
	char *masked = conninfo_mask(input);
	unit_checks++;
	if (strstr(masked, secret)) {
		unit_failures++;
		fprintf(stderr, "secret \"%s\" survives in \"%s\" (from \"%s\")\n", secret, masked,
			input);
	}
	free(masked);
}

static void percent_encode(const char *in, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (; *in && n + 4 < size; in++) {
		unsigned char c = (unsigned char)*in;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
}

static void kv_escape(const char *in, char *out, size_t size)
{
	size_t n = 0;
	for (; *in && n + 3 < size; in++) {
		if (*in == '\'' || *in == '\\' || *in == ' ')
			out[n++] = '\\';
		out[n++] = *in;
	}
	out[n] = '\0';
}

/* A deterministic generator, so a failure is reproducible. */
static uint32_t next_random(uint32_t *state)
{
	*state = *state * 1103515245U + 12345U;
	return *state >> 8;
}

static void random_secret(uint32_t *state, const char *alphabet, char *out, size_t len)
{
	size_t n = strlen(alphabet);
	/* A fixed head makes an accidental match elsewhere impossible. */
	memcpy(out, "Qz7", 3);
	for (size_t i = 3; i < len - 1; i++)
		out[i] = alphabet[next_random(state) % n];
	out[len - 1] = '\0';
}

static void check_generated(void)
{
	static const char any[] = "abcXYZ0189 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
	static const char base64[] = "ABCxyz0189+/=";
	uint32_t state = 20240607;
	char secret[24], encoded[80], escaped[60], input[256];
	for (int round = 0; round < 2000; round++) {
		random_secret(&state, any, secret, sizeof secret);
		percent_encode(secret, encoded, sizeof encoded);
		kv_escape(secret, escaped, sizeof escaped);

		snprintf(input, sizeof input, "postgresql://app:%s@db1:5432/app?sslmode=require", encoded);
		check_hidden(input, encoded);
		snprintf(input, sizeof input, "postgres://db1/app?application_name=x&password=%s", encoded);
		check_hidden(input, encoded);
		snprintf(input, sizeof input, "postgresql://db1/app?sslpassword=%s&sslmode=verify-full",
			 encoded);
		check_hidden(input, encoded);
		snprintf(input, sizeof input, "host=db1 password='%s' dbname=app", escaped);
		check_hidden(input, secret);
		check_hidden(input, escaped);
		snprintf(input, sizeof input, "host=db1 password=%s dbname=app", escaped);
		check_hidden(input, secret);
		check_hidden(input, escaped);
		snprintf(input, sizeof input, "password = '%s'", escaped);
		check_hidden(input, secret);
		check_hidden(input, escaped);

		/* Unencoded base64 passwords ("/", "+", "=") in a URI: not
		 * valid, but common enough to be masked whole. */
		random_secret(&state, base64, secret, sizeof secret);
		snprintf(input, sizeof input, "postgresql://app:%s@db1/app", secret);
		check_hidden(input, secret);
		snprintf(input, sizeof input, "postgresql://app:%s@db1", secret);
		check_hidden(input, secret);
	}
}

int main(void)
{
	/* URIs: every password replaced, the rest byte-identical. */
	check_mask("postgresql://user:secret@host:5432/db?password=x&sslmode=require",
		   "postgresql://user:***@host:5432/db?password=***&sslmode=require");
	check_mask("postgres://user:secret@host/db", "postgres://user:***@host/db");
	check_mask("POSTGRESQL://user:Secret@host/db", "POSTGRESQL://user:***@host/db");
	check_mask("  postgresql://u:sekrit@h", "  postgresql://u:***@h");
	check_mask("postgresql://user:s%40cr%2Fet@host/db", "postgresql://user:***@host/db");
	check_mask("postgresql://host/db?pass%77ord=s3cr3t", "postgresql://host/db?pass%77ord=***");
	check_mask("postgresql://host/db?%70%61%73%73%77%6F%72%64=s3cr3t",
		   "postgresql://host/db?%70%61%73%73%77%6F%72%64=***");
	check_mask("postgresql://host/db?PASSWORD=s3cr3t", "postgresql://host/db?PASSWORD=***");
	check_mask("postgresql://h/db?sslmode=require&password=", "postgresql://h/db?sslmode=require&password=***");
	check_mask("postgresql://u:p@h1:5432,h2:5433/db?target_session_attrs=any&sslpassword=keypw",
		   "postgresql://u:***@h1:5432,h2:5433/db?target_session_attrs=any&sslpassword=***");
	check_mask("postgresql://u:pw@h?password=pw2", "postgresql://u:***@h?password=***");
	/* Unencoded "@", "/" and "?" in a password: masked whole. */
	check_mask("postgresql://u:se@cret@host/db", "postgresql://u:***@host/db");
	check_mask("postgresql://u:ab/cd==@host/db", "postgresql://u:***@host/db");
	check_mask("postgresql://u:pw?x@host/db", "postgresql://u:***@host/db");
	/* Nothing secret: unchanged. */
	check_mask("postgresql://replicator@db1/app", "postgresql://replicator@db1/app");
	check_mask("postgresql:///app_copy?host=/run/postgresql", "postgresql:///app_copy?host=/run/postgresql");
	check_mask("postgresql://db1:5432/app?user=me@corp&sslmode=require",
		   "postgresql://db1:5432/app?user=me@corp&sslmode=require");
	check_mask("postgresql://", "postgresql://");

	/* key=value conninfo. */
	check_mask("host=h password=secret", "host=h password=***");
	check_mask("password = 'se cr\\'et' host=h", "password = '***' host=h");
	check_mask("host=h password='a b' user=u", "host=h password='***' user=u");
	check_mask("password=sec\\ ret host=h", "password=*** host=h");
	check_mask("host=h sslpassword=keypw sslkey=/k", "host=h sslpassword=*** sslkey=/k");
	check_mask("host=h PASSWORD=x", "host=h PASSWORD=***");
	check_mask("host=h\tpassword\t=\tx\n", "host=h\tpassword\t=\t***\n");
	check_mask("host=h password secret", "host=h password ***"); /* missing "=" */
	check_mask("password='abc def", "password='***");             /* unterminated */
	check_mask("password='' host=h", "password='***' host=h");
	check_mask("host=h password", "host=h password");
	check_mask("host=/tmp dbname=app user=me", "host=/tmp dbname=app user=me");
	check_mask("passfile=/home/me/.pgpass host=h", "passfile=/home/me/.pgpass host=h");
	/* A dbname may be a connection string itself. */
	check_mask("dbname='postgresql://u:pw@h/db' host=x", "dbname='postgresql://u:***@h/db' host=x");
	check_mask("dbname=postgresql://u:pw@h/db", "dbname=postgresql://u:***@h/db");
	check_mask("dbname='host=h password=pw'", "dbname='host=h password=***'");
	check_mask("dbname='host=h password=\\'p w\\''", "dbname='host=h password=\\'***\\''");
	check_hidden("dbname='host=h password=\\'p w\\''", "p w");
	check_mask("", "");
	check_mask(NULL, "");

	check_generated();
	return unit_done("conninfo");
}

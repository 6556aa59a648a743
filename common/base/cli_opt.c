/*
 * cli_opt.c - the parsers of option values and environment numbers (see
 * cli.h).  Apart from cli.c, so that a program that takes no flow file
 * (the simulator) links them without the configuration loader.
 */
#include "trellara/cli.h"

#include "trellara/defaults.h"
#include "trellara/log.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* kind: what name is, "option" or "environment variable" */
static bool check_u64(const char *kind, const char *name, const char *value, uint64_t min, uint64_t max,
		      uint64_t *out, char err[OPT_ERROR_LEN])
{
	bool digits = value && *value;
	for (const char *p = value; digits && *p; p++)
		digits = *p >= '0' && *p <= '9';
	if (!digits) {
		snprintf(err, OPT_ERROR_LEN, "invalid value \"%s\" for %s %s", value ? value : "", kind, name);
		return false;
	}
	errno = 0;
	char *end;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno == ERANGE || v < min || v > max) {
		snprintf(err, OPT_ERROR_LEN, "%s must be in range %" PRIu64 "..%" PRIu64, name, min, max);
		return false;
	}
	*out = v;
	return true;
}

int cli_env_u64(const char *name, uint64_t default_value, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *value = getenv(name);
	if (!value) {
		*out = default_value;
		return EXIT_OK;
	}
	char err[OPT_ERROR_LEN];
	if (check_u64("environment variable", name, value, min, max, out, err))
		return EXIT_OK;
	log_error("%s", err);
	return EXIT_CONFIG;
}

bool opt_check_u64(const char *option_name, const char *value, uint64_t min, uint64_t max, uint64_t *out,
		   char err[OPT_ERROR_LEN])
{
	return check_u64("option", option_name, value, min, max, out, err);
}

bool opt_parse_u64(const char *option_name, const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
	char err[OPT_ERROR_LEN];
	if (opt_check_u64(option_name, value, min, max, out, err))
		return true;
	log_error("%s", err);
	return false;
}

bool opt_check_duration(const char *option_name, const char *value, double min_seconds, double max_seconds,
			double *out_seconds, char err[OPT_ERROR_LEN])
{
	/* digits with at most one ".": strtod alone would take " 1", "+1",
	 * "0x10", "1e3", "inf" and "nan" */
	int digits = 0, points = 0;
	for (const char *p = value; p && *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			points++;
		else
			points = 2;
	}
	if (digits == 0 || points > 1) {
		snprintf(err, OPT_ERROR_LEN, "invalid value \"%s\" for option %s", value ? value : "", option_name);
		return false;
	}
	double v = strtod(value, NULL);
	if (!isfinite(v) || v < min_seconds || v > max_seconds) {
		snprintf(err, OPT_ERROR_LEN, "%s must be in range %g..%g", option_name, min_seconds, max_seconds);
		return false;
	}
	*out_seconds = v;
	return true;
}

bool opt_parse_duration(const char *option_name, const char *value, double min_seconds, double max_seconds,
			double *out_seconds)
{
	char err[OPT_ERROR_LEN];
	if (opt_check_duration(option_name, value, min_seconds, max_seconds, out_seconds, err))
		return true;
	log_error("%s", err);
	return false;
}

#include "trellara/log.h"

#include "trellara/defaults.h"
#include "trellara/jsonw.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

/* Set once by main() through log_setup(); modules only read it. */
static struct {
	const char *program;
	enum log_level level;
	enum log_format format;
	int color;
	bool quiet;
} log_state = { "trellara", LOG_LEVEL_INFO, LOG_FORMAT_TEXT, 0, false };

static const char *level_names[] = { "error", "warn", "info", "debug" };

void log_setup(const char *program, int verbosity)
{
	const char *slash = strrchr(program, '/');
	log_state.program = slash ? slash + 1 : program;
	const char *env = getenv(ENV_LOG_LEVEL);
	if (env) {
		for (int i = 0; i <= LOG_LEVEL_DEBUG; i++)
			if (strcmp(env, level_names[i]) == 0)
				log_state.level = (enum log_level)i;
	}
	int level = (int)log_state.level + verbosity;
	log_state.level = level > LOG_LEVEL_DEBUG ? LOG_LEVEL_DEBUG : (enum log_level)level;
	env = getenv(ENV_LOG_FORMAT);
	if (env && strcmp(env, "json") == 0)
		log_state.format = LOG_FORMAT_JSON;
	log_state.color = isatty(STDERR_FILENO) && !getenv(ENV_NO_COLOR);
}

void log_set_format(enum log_format format)
{
	log_state.format = format;
}

enum log_level log_get_level(void)
{
	return log_state.level;
}

void log_set_quiet(bool quiet)
{
	log_state.quiet = quiet;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > log_state.level || log_state.quiet)
		return;
	char message[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char stamp[40];
	size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp + n, sizeof stamp - n, ".%03ldZ", ts.tv_nsec / 1000000);

	/* One fprintf per line keeps lines whole when several processes
	 * share a terminal; a JSON line is written under the stream's lock
	 * by the one JSON writer (jsonw.h), which escapes the text. */
	if (log_state.format == LOG_FORMAT_JSON) {
		struct jsonw w;
		flockfile(stderr);
		jsonw_init(&w, stderr, false);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "ts", stamp);
		jsonw_str(&w, "level", level_names[level]);
		jsonw_str(&w, "program", log_state.program);
		jsonw_str(&w, "msg", message);
		jsonw_close(&w, '}');
		fputc('\n', stderr);
		funlockfile(stderr);
		return;
	}
	const char *color = "", *reset = "";
	if (log_state.color) {
		static const char *colors[] = { "\033[31m", "\033[33m", "", "\033[2m" };
		color = colors[level];
		reset = *color ? "\033[0m" : "";
	}
	fprintf(stderr, "%s %s%-5s%s %s: %s\n", stamp, color, level_names[level], reset,
		log_state.program, message);
}

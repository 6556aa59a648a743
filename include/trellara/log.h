/*
 * log.h - logs on stderr with a level and a UTC timestamp.
 *
 * The level and format are process-wide settings that main() sets once
 * (log_setup) before anything else runs; nothing else writes them.  That
 * one piece of state is owned by main in spirit: modules only read it.
 * Messages follow git's style: lowercase, no final period, subject quoted.
 */
#ifndef TRELLARA_LOG_H
#define TRELLARA_LOG_H

#include <stdbool.h>

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };

/* program: the name printed in every line.  Reads TRELLARA_LOG_LEVEL and
 * TRELLARA_LOG_FORMAT when set; verbosity (-v count) raises the level. */
void log_setup(const char *program, int verbosity);
void log_set_format(enum log_format format);
enum log_level log_get_level(void);
/* The simulator: print nothing (its components' messages are expected). */
void log_set_quiet(bool quiet);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)
/* A "hint: ..." line after an error, when there is an action to take. */
#define log_hint(...) log_msg(LOG_LEVEL_ERROR, "hint: " __VA_ARGS__)

#endif

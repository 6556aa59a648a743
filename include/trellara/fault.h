/*
 * fault.h - named fault points (DESIGN §11).
 *
 * TRELLARA_FAULT=point[:nth] makes the process die abruptly with SIGKILL,
 * exactly like kill -9, the nth time (default 1st) it reaches that point.
 * The environment is read once; the hit counter is the only state, kept
 * in fault.c (a test hook, not program state).
 */
#ifndef TRELLARA_FAULT_H
#define TRELLARA_FAULT_H

#include <stdbool.h>

/* Dies here if TRELLARA_FAULT names this point and its nth hit arrived. */
void fault_point(const char *name);
/* True when TRELLARA_FAULT names this point at all (for fault points
 * that need to set themselves up, like a half-written frame). */
bool fault_armed(const char *name);

/* Test hook: when TRELLARA_PAUSE names this point, create
 * $TRELLARA_PAUSE_DIR/<point>.paused and wait until <point>.resume
 * exists (a test does something in between, e.g. DDL during a copy). */
void fault_pause(const char *name);

#endif

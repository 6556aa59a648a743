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

/* ---- the simulator's hook ----
 *
 * With a hook set, fault_point and fault_armed ask it instead of the
 * environment and fault_pause does nothing: the simulator decides which
 * hit of which point "kills" the component that reaches it (its file
 * system and target connection then fail every call, so the component
 * unwinds through its ordinary error paths and the simulator discards
 * it).  point(): the point was reached (it returns; the component goes
 * on into failing I/O).  armed(): whether point may be reached in this
 * run (fault_armed's answer).  NULL removes the hook. */
struct fault_hook {
	void (*point)(void *ctx, const char *name);
	bool (*armed)(void *ctx, const char *name);
	void *ctx;
};
void fault_set_hook(const struct fault_hook *hook);

#endif

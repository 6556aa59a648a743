/*
 * model_cutover.h - trellara cutover (trellara-cutover(1)) simulated: the
 * real step machine (cutplan_next(), cutplan_wait_step(),
 * cutplan_unlock_on_failure(), cutplan_streaming(), and seq_decide() for
 * the sequences) driven against models of what it acts on:
 *
 *   the cutover row      durable: what a run wrote survives its kill,
 *                        nothing else does (each write is one commit);
 *   the source database  its read-only default (ALTER DATABASE: durable),
 *                        the sessions still defaulting to read-write until
 *                        they are ended, transactions that keep committing
 *                        (and sequences that keep moving) until the lock;
 *   applyd               the applied position, one source commit a tick
 *                        while the flow streams, then the WAL end;
 *   the target's sequences, set by the sync, never moved backwards;
 *   verify               CONVERGED only when applied through the final LSN
 *                        with the sequences synced (or a divergence drawn);
 *   the supervisor       running or stopped, its children down for a while.
 *
 * The cutover process is killed at its named fault points
 * (cutover.after_lock, cutover.wait_apply, cutover.before_stop) and after
 * every row write and every change to the source, and run again, sometimes
 * with --abort; steps fail (a session that will not end, the flow not
 * streaming, a wait that times out, DIVERGED).  Last, with the faults
 * healed, a cutover must complete.
 *
 * Invariants (checked after every run and at every recorded step):
 *   cutover_completes_after_any_kill  the healed run reaches cut_over;
 *   cutover_never_leaves_source_locked_on_abort_or_failure  a run that
 *       ends aborted or failed leaves the source writable and the row's
 *       lock released;
 *   cutover_lock_recorded_before_taken  the source is never read-only
 *       without the row saying the lock may be in place;
 *   cutover_final_lsn_covers_every_source_commit  (--lock-source) at
 *       cut_over the final LSN is at or past every source commit, and
 *       applyd applied through it;
 *   cutover_sequences_not_behind  a sync never moves a target sequence
 *       backwards, and at cut_over none is behind the source's;
 *   cutover_records_only_converged  verified, stopping and cut_over are
 *       recorded only after a CONVERGED verify that was true.
 *
 * Deterministic: one seed, no clock, no libpq.
 */
#ifndef TRELLARA_SIM_MODEL_CUTOVER_H
#define TRELLARA_SIM_MODEL_CUTOVER_H

#include <stdbool.h>
#include <stdint.h>

struct sim_cutover_options {
	uint64_t seed;
	/* a named fault point that kills the first run at its first hit
	 * (NULL: none); random kills are drawn besides it */
	const char *kill_point;
	int p_kill;        /* percent: a kill at each kill point */
	int max_kills;     /* kills in all, before the healed run */
	int p_abort;       /* percent: a run after a kill or failure is --abort */
	int p_lock_fail;   /* percent: the source's sessions do not end (the lock step fails) */
	int p_child_down;  /* percent a tick: capture or applyd restarts for a while */
	int p_diverge;     /* percent: verify answers DIVERGED */
	int lock_source_pct; /* percent of runs started with --lock-source */
};

struct sim_cutover_result {
	bool ok;
	char invariant[80];
	char detail[512];
	uint64_t runs, kills, aborts, failures, source_commits, ticks;
	bool point_hit;  /* kill_point was reached and killed */
	bool completed;  /* the last run reached cut_over */
	uint64_t trace_digest;
};

/* A run's options, drawn from seed (the faults on). */
void sim_cutover_random(struct sim_cutover_options *o, uint64_t seed);
/* The options a named scenario starts from: kill_point, fewer random faults. */
void sim_cutover_defaults(struct sim_cutover_options *o, uint64_t seed, const char *kill_point);
/* One cutover with its kills and reruns; false when an invariant failed. */
bool sim_cutover_run(const struct sim_cutover_options *o, struct sim_cutover_result *r);

#endif

/*
 * model_cutover.c - trellara cutover simulated (model_cutover.h).
 *
 * The steps below follow cmd/trellara-cutover/cutcmd.c: each row write,
 * each change to the source and each named fault point is a place the
 * process can be killed; the decisions are cutplan.c's own.  Only the
 * cutover row, the source's setting and sessions, the source and target
 * sequences, applyd's position and the supervisor outlive a kill.
 */
#include "model_cutover.h"

#include "sim_rng.h"

#include "trellara/cutplan.h"
#include "trellara/seqstate.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSEQ 2
#define WAIT_TIMEOUT_TICKS 120 /* --apply-timeout, in ticks */
#define MAX_RUNS 24            /* runs before the healed one */
#define MAX_STEPS 64           /* steps of one run: more is a loop */

/* The cutover row (common/pg/cutover.c): durable. */
struct cut_row {
	bool exists;
	enum cutplan_state state;
	enum cutplan_lock lock;
	bool lock_source;
	uint64_t margin;
	bool database_recorded;
	bool has_final;
	uint64_t final_lsn;
	bool has_verify, converged;
	bool sequences_recorded;
};

struct cut_world {
	const struct sim_cutover_options *o;
	struct sim_cutover_result *r;
	struct sim_rng rng;
	bool faults; /* off for the healed run */
	struct cut_row row;
	/* the source */
	bool read_only;           /* ALTER DATABASE ... default_transaction_read_only on */
	bool read_write_sessions; /* sessions that still default to read-write */
	uint64_t wal_lsn;
	uint64_t *commits; /* owned: every source commit's LSN, in order */
	size_t n_commits, cap_commits;
	int64_t source_seq[NSEQ], target_seq[NSEQ];
	/* applyd */
	size_t applied_commits;
	uint64_t applied_lsn; /* applied through */
	/* the supervisor */
	bool supervisor_running;
	int child_down_ticks;
	/* this run */
	bool point_done;
};

enum run_end { RUN_DONE, RUN_ABORTED, RUN_NOTHING_TO_ABORT, RUN_FAILED, RUN_KILLED };

static void digest(struct cut_world *w, uint64_t v)
{
	w->r->trace_digest = (w->r->trace_digest ^ v) * 1099511628211ULL;
}

static bool broken(struct cut_world *w, const char *invariant, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool broken(struct cut_world *w, const char *invariant, const char *fmt, ...)
{
	if (!w->r->ok)
		return false;
	w->r->ok = false;
	snprintf(w->r->invariant, sizeof w->r->invariant, "%s", invariant);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->r->detail, sizeof w->r->detail, fmt, ap);
	va_end(ap);
	return false;
}

static uint64_t last_commit_lsn(const struct cut_world *w)
{
	return w->n_commits ? w->commits[w->n_commits - 1] : 0;
}

/* One tick of the world: the source commits while a session may write,
 * applyd applies one commit while the flow streams. */
static void tick(struct cut_world *w)
{
	w->r->ticks++;
	bool writable = !w->read_only || w->read_write_sessions;
	if (writable && sim_rng_chance(&w->rng, 60)) {
		w->wal_lsn += sim_rng_between(&w->rng, 24, 400);
		if (w->n_commits == w->cap_commits) {
			w->cap_commits = w->cap_commits ? 2 * w->cap_commits : 64;
			w->commits = xrealloc(w->commits, w->cap_commits * sizeof *w->commits);
		}
		w->commits[w->n_commits++] = w->wal_lsn;
		w->r->source_commits++;
		if (sim_rng_chance(&w->rng, 50))
			w->source_seq[sim_rng_below(&w->rng, NSEQ)]++;
	} else if (sim_rng_chance(&w->rng, 10)) {
		w->wal_lsn += 24; /* WAL without a commit (a checkpoint, a vacuum) */
	}
	if (w->faults && w->o->p_child_down > 0 && w->supervisor_running && w->child_down_ticks == 0 &&
	    sim_rng_chance(&w->rng, w->o->p_child_down))
		w->child_down_ticks = (int)sim_rng_between(&w->rng, 2, 12);
	if (w->child_down_ticks > 0) {
		w->child_down_ticks--;
	} else if (w->supervisor_running) {
		if (w->applied_commits < w->n_commits)
			w->applied_lsn = w->commits[w->applied_commits++];
		else
			w->applied_lsn = w->wal_lsn; /* keepalives: applied through the WAL end */
	}
	digest(w, w->wal_lsn ^ w->applied_lsn << 1);
}

static enum cutplan_blocker blocker(const struct cut_world *w)
{
	struct cutplan_flow f = { .state_file = true,
				  .metrics_dir_set = true,
				  .supervisor_alive = w->supervisor_running,
				  .supervisor_running = w->supervisor_running,
				  .capture_alive = w->child_down_ticks == 0,
				  .applyd_alive = w->child_down_ticks == 0,
				  .slot_active = w->supervisor_running && w->child_down_ticks == 0 };
	return cutplan_streaming(&f);
}

/* The invariants that hold at every point: the source is never locked
 * without the row knowing; a recorded verdict was true. */
static bool steady(struct cut_world *w)
{
	if (w->read_only && !cutplan_lock_in_place(w->row.lock))
		return broken(w, "cutover_lock_recorded_before_taken",
			      "the source is read-only but the cutover row (state %s) says its lock is %s",
			      cutplan_state_name(w->row.state), cutplan_lock_name(w->row.lock));
	enum cutplan_state s = w->row.state;
	if ((s == CUT_VERIFIED || s == CUT_STOPPING || s == CUT_CUT_OVER) && !(w->row.has_verify && w->row.converged))
		return broken(w, "cutover_records_only_converged", "the row says %s without a CONVERGED verify",
			      cutplan_state_name(s));
	return true;
}

/* A place the process can die; true: it died there. */
static bool die(struct cut_world *w, const char *point)
{
	if (!steady(w))
		return true;
	if (w->o->kill_point && !w->point_done && strcmp(point, w->o->kill_point) == 0) {
		w->point_done = true;
		w->r->point_hit = true;
		w->r->kills++;
		digest(w, 0xdead);
		return true;
	}
	if (!w->faults || w->r->kills >= (uint64_t)w->o->max_kills || !sim_rng_chance(&w->rng, w->o->p_kill))
		return false;
	w->r->kills++;
	digest(w, 0xdead ^ w->row.state);
	return true;
}

/* A row write (one committed UPDATE), then a place to die. */
static bool wrote(struct cut_world *w)
{
	digest(w, (uint64_t)w->row.state << 8 | (uint64_t)w->row.lock);
	return die(w, "row");
}

/* unlock_source(): a held lock recorded as requested, the setting back,
 * then the row says released. */
static bool unlock(struct cut_world *w)
{
	if (w->row.lock == CUT_LOCK_HELD) {
		w->row.lock = CUT_LOCK_REQUESTED;
		if (wrote(w))
			return false;
	}
	if (w->row.database_recorded) {
		w->read_only = false;
		w->read_write_sessions = true;
		if (die(w, "unlocked"))
			return false;
	}
	w->row.lock = CUT_LOCK_RELEASED;
	return !wrote(w);
}

/* fail(): undo the lock, then the row says failed. */
static enum run_end fail(struct cut_world *w)
{
	w->r->failures++;
	enum cutplan_state s = w->row.state;
	if (!w->row.exists || s == CUT_STOPPING || s == CUT_CUT_OVER || s == CUT_ABORTED || s == CUT_FAILED)
		return RUN_FAILED;
	if (cutplan_unlock_on_failure(w->row.lock, false) && !unlock(w))
		return RUN_KILLED;
	w->row.state = CUT_FAILED;
	return wrote(w) ? RUN_KILLED : RUN_FAILED;
}

/* do_lock(): the intent (with the database) first, the ALTER, the
 * sessions ended, then locked. */
static enum run_end do_lock(struct cut_world *w)
{
	if (!cutplan_lock_in_place(w->row.lock)) {
		w->row.state = CUT_LOCKING;
		w->row.lock = CUT_LOCK_REQUESTED;
		w->row.database_recorded = true;
		if (wrote(w))
			return RUN_KILLED;
	} else if (w->row.state != CUT_LOCKING) {
		w->row.state = CUT_LOCKING;
		if (wrote(w))
			return RUN_KILLED;
	}
	w->read_only = true;
	if (die(w, "altered"))
		return RUN_KILLED;
	tick(w); /* the sessions opened before the ALTER still commit */
	if (w->faults && sim_rng_chance(&w->rng, w->o->p_lock_fail))
		return fail(w); /* sessions still there after the timeout */
	w->read_write_sessions = false;
	if (die(w, "sessions_ended"))
		return RUN_KILLED;
	w->row.state = CUT_LOCKED;
	w->row.lock = CUT_LOCK_HELD;
	if (wrote(w) || die(w, "cutover.after_lock"))
		return RUN_KILLED;
	return RUN_DONE;
}

/* do_wait_apply(): the final LSN read and recorded, then polls. */
static enum run_end do_wait_apply(struct cut_world *w)
{
	uint64_t final_lsn = w->wal_lsn;
	w->row.has_final = true;
	w->row.final_lsn = final_lsn;
	if (wrote(w))
		return RUN_KILLED;
	for (int waited = 0;; waited++) {
		if (die(w, "cutover.wait_apply"))
			return RUN_KILLED;
		tick(w);
		enum cutplan_wait ws = cutplan_wait_step(w->applied_lsn, final_lsn, waited, WAIT_TIMEOUT_TICKS, blocker(w));
		if (ws == CUT_WAIT_CAUGHT_UP)
			break;
		if (ws != CUT_WAIT_MORE)
			return fail(w);
	}
	w->row.state = CUT_CAUGHT_UP;
	return wrote(w) ? RUN_KILLED : RUN_DONE;
}

/* do_sync_sequences(): seq_decide() for each, setval (not transactional:
 * a kill between two leaves one set), then the row. */
static enum run_end do_sync_sequences(struct cut_world *w)
{
	const struct seq_params params = { .increment = 1, .min_value = 1, .max_value = INT64_MAX };
	for (int i = 0; i < NSEQ; i++) {
		struct seq_state src = { .last_value = w->source_seq[i], .is_called = true };
		struct seq_state dst = { .last_value = w->target_seq[i], .is_called = true };
		struct seq_decision d = seq_decide(&src, &dst, &params, w->row.margin);
		if (d.action == SEQ_SET) {
			if (d.want.last_value < w->target_seq[i])
				return broken(w, "cutover_sequences_not_behind",
					      "sequence %d: the sync moved the target back from %" PRId64 " to %" PRId64, i,
					      w->target_seq[i], d.want.last_value),
				       RUN_FAILED;
			w->target_seq[i] = d.want.last_value;
		}
		if (die(w, "setval"))
			return RUN_KILLED;
	}
	w->row.state = CUT_SEQUENCES_SYNCED;
	w->row.sequences_recorded = true;
	return wrote(w) ? RUN_KILLED : RUN_DONE;
}

/* do_verify(): CONVERGED only when the target has everything through the
 * final LSN and no sequence is behind. */
static enum run_end do_verify(struct cut_world *w)
{
	tick(w);
	bool converged = w->row.has_final && w->applied_lsn >= w->row.final_lsn && w->row.sequences_recorded;
	for (int i = 0; i < NSEQ; i++)
		if (w->target_seq[i] < w->source_seq[i])
			converged = false;
	if (w->faults && sim_rng_chance(&w->rng, w->o->p_diverge))
		converged = false; /* a divergence verify finds */
	w->row.has_verify = true;
	w->row.converged = converged;
	if (converged)
		w->row.state = CUT_VERIFIED;
	if (wrote(w))
		return RUN_KILLED;
	if (!converged)
		return fail(w);
	return die(w, "cutover.before_stop") ? RUN_KILLED : RUN_DONE;
}

/* What a completed cutover guarantees, checked when it is recorded. */
static bool cut_over_holds(struct cut_world *w)
{
	const struct cut_row *row = &w->row;
	if (row->lock_source) {
		if (!row->has_final || row->final_lsn < last_commit_lsn(w))
			return broken(w, "cutover_final_lsn_covers_every_source_commit",
				      "cut over with the final LSN %s%" PRIX64 " below the source's last commit at %" PRIX64,
				      row->has_final ? "" : "(none) ", row->final_lsn, last_commit_lsn(w));
		if (w->applied_commits < w->n_commits)
			return broken(w, "cutover_final_lsn_covers_every_source_commit",
				      "cut over with %zu of the source's %zu commits applied", w->applied_commits, w->n_commits);
	}
	if (!row->has_final || w->applied_lsn < row->final_lsn)
		return broken(w, "cutover_final_lsn_covers_every_source_commit",
			      "cut over with applyd at %" PRIX64 ", before the final LSN %" PRIX64, w->applied_lsn, row->final_lsn);
	for (int i = 0; i < NSEQ; i++)
		if (w->target_seq[i] < w->source_seq[i])
			return broken(w, "cutover_sequences_not_behind",
				      "cut over with target sequence %d at %" PRId64 ", behind the source's %" PRId64, i,
				      w->target_seq[i], w->source_seq[i]);
	return true;
}

/* do_stop(): stopping, SIGTERM, the processes gone, cut_over. */
static enum run_end do_stop(struct cut_world *w)
{
	if (w->row.state != CUT_STOPPING) {
		w->row.state = CUT_STOPPING;
		if (wrote(w))
			return RUN_KILLED;
	}
	w->supervisor_running = false; /* it drains capture and applyd */
	w->child_down_ticks = 0;
	if (die(w, "sigterm"))
		return RUN_KILLED;
	w->row.state = CUT_CUT_OVER;
	if (!cut_over_holds(w))
		return RUN_FAILED;
	return wrote(w) ? RUN_KILLED : RUN_DONE;
}

/* One `trellara cutover` (--abort when abort): nothing of a previous run
 * but the row and the world. */
static enum run_end run_once(struct cut_world *w, bool abort, bool lock_source)
{
	w->r->runs++;
	digest(w, 0x100 | (uint64_t)abort << 1 | lock_source);
	for (int steps = 0; steps < MAX_STEPS; steps++) {
		tick(w);
		bool ended_row = w->row.state == CUT_ABORTED || w->row.state == CUT_FAILED;
		struct cutplan_view v = { .state = w->row.exists ? w->row.state : CUT_NONE,
					  .lock = w->row.exists ? w->row.lock : CUT_LOCK_NONE,
					  .lock_source = w->row.exists && !ended_row ? w->row.lock_source : lock_source,
					  .abort = abort,
					  .quarantine_open = 0,
					  .blocker = blocker(w) };
		enum cutplan_action a = cutplan_next(&v);
		digest(w, 0x1000 | (uint64_t)a);
		enum run_end e = RUN_DONE;
		switch (a) {
		case CUT_DO_START:
			w->row = (struct cut_row){ .exists = true,
						   .state = CUT_STARTED,
						   .lock = CUT_LOCK_NONE,
						   .lock_source = lock_source,
						   .margin = cutplan_default_margin(lock_source) };
			if (wrote(w))
				return RUN_KILLED;
			break;
		case CUT_DO_LOCK: e = do_lock(w); break;
		case CUT_DO_WAIT_APPLY: e = do_wait_apply(w); break;
		case CUT_DO_SYNC_SEQUENCES: e = do_sync_sequences(w); break;
		case CUT_DO_VERIFY: e = do_verify(w); break;
		case CUT_DO_STOP: e = do_stop(w); break;
		case CUT_DO_DONE: return RUN_DONE;
		case CUT_DO_UNLOCK:
			if (!unlock(w))
				return RUN_KILLED;
			break;
		case CUT_DO_MARK_ABORTED:
			w->row.state = CUT_ABORTED;
			return wrote(w) ? RUN_KILLED : RUN_ABORTED;
		case CUT_DO_NOTHING_TO_ABORT: return RUN_NOTHING_TO_ABORT;
		case CUT_DO_REFUSE_QUARANTINE:
		case CUT_DO_REFUSE_NOT_STREAMING: return fail(w);
		}
		if (e != RUN_DONE || !w->r->ok)
			return e;
	}
	broken(w, "cutover_completes_after_any_kill", "one run took %d steps without ending (state %s)", MAX_STEPS,
	       cutplan_state_name(w->row.state));
	return RUN_FAILED;
}

static const char *const end_names[] = { "done", "aborted", "nothing_to_abort", "failed", "killed" };

/* After a run that ended without cutting over, the source is writable. */
static bool left_unlocked(struct cut_world *w, enum run_end e)
{
	if (w->read_only || cutplan_lock_in_place(w->row.lock))
		return broken(w, "cutover_never_leaves_source_locked_on_abort_or_failure",
			      "the cutover ended %s (row state %s) with the source %s and the row's lock %s", end_names[e],
			      cutplan_state_name(w->row.state), w->read_only ? "read-only" : "writable",
			      cutplan_lock_name(w->row.lock));
	return true;
}

/* The operator starts trellara run again when a cutover ended without
 * cutting over (aborted in its stop, or refused: none runs).  A cutover
 * killed while stopping is left to finish its stop. */
static void restart_flow(struct cut_world *w, enum run_end e)
{
	if (w->supervisor_running || w->row.state == CUT_CUT_OVER)
		return;
	if (e == RUN_KILLED && w->row.state == CUT_STOPPING)
		return;
	w->supervisor_running = true;
	digest(w, 0x5ca1e);
}

void sim_cutover_random(struct sim_cutover_options *o, uint64_t seed)
{
	struct sim_rng g;
	sim_rng_seed(&g, seed ^ 0x6375746f766572ULL);
	*o = (struct sim_cutover_options){ .seed = seed,
					   .p_kill = (int)sim_rng_between(&g, 3, 25),
					   .max_kills = (int)sim_rng_between(&g, 1, 8),
					   .p_abort = (int)sim_rng_between(&g, 0, 30),
					   .p_lock_fail = (int)sim_rng_between(&g, 0, 25),
					   .p_child_down = (int)sim_rng_between(&g, 0, 4),
					   .p_diverge = (int)sim_rng_between(&g, 0, 10),
					   .lock_source_pct = 85 };
}

void sim_cutover_defaults(struct sim_cutover_options *o, uint64_t seed, const char *kill_point)
{
	*o = (struct sim_cutover_options){ .seed = seed,
					   .kill_point = kill_point,
					   .p_kill = 5,
					   .max_kills = 2,
					   .p_abort = 10,
					   .p_lock_fail = 5,
					   .p_child_down = 1,
					   .p_diverge = 2,
					   .lock_source_pct = 100 };
}

bool sim_cutover_run(const struct sim_cutover_options *o, struct sim_cutover_result *r)
{
	memset(r, 0, sizeof *r);
	r->ok = true;
	struct cut_world w = { .o = o, .r = r, .faults = true, .read_write_sessions = true, .supervisor_running = true,
			       .wal_lsn = 0x1000000 };
	sim_rng_seed(&w.rng, o->seed);
	for (int i = 0; i < NSEQ; i++)
		w.target_seq[i] = w.source_seq[i] = (int64_t)sim_rng_between(&w.rng, 1, 1000);
	/* some history for applyd to catch up on */
	for (int t = (int)sim_rng_between(&w.rng, 0, 40); t > 0; t--)
		tick(&w);
	bool lock_source = sim_rng_chance(&w.rng, o->lock_source_pct);
	bool abort = false;
	for (int n = 0; n < MAX_RUNS && r->ok; n++) {
		enum run_end e = run_once(&w, abort, lock_source);
		digest(&w, 0x10000 | (uint64_t)e);
		if (!r->ok)
			break;
		if (e == RUN_DONE && !abort)
			break; /* cut over: later runs only say so */
		if (e == RUN_ABORTED || e == RUN_NOTHING_TO_ABORT || e == RUN_FAILED) {
			if (!left_unlocked(&w, e))
				break;
			r->aborts += abort;
		}
		restart_flow(&w, e);
		if (e == RUN_KILLED || e == RUN_FAILED)
			abort = sim_rng_chance(&w.rng, o->p_abort);
		else
			break; /* aborted: then the healed run */
	}
	/* healed: no kills, no failures; the cutover must cut over, the
	 * operator starting trellara run again when it says none runs */
	if (r->ok) {
		w.faults = false;
		w.child_down_ticks = 0;
		enum run_end e = RUN_KILLED;
		for (int n = 0; n < 3 && r->ok && e != RUN_DONE; n++) {
			e = run_once(&w, false, lock_source);
			restart_flow(&w, e);
		}
		r->completed = r->ok && e == RUN_DONE && w.row.state == CUT_CUT_OVER;
		if (r->ok && !r->completed)
			broken(&w, "cutover_completes_after_any_kill",
			       "after %" PRIu64 " kills, the healed run ended %s in state %s (lock %s)", r->kills, end_names[e],
			       cutplan_state_name(w.row.state), cutplan_lock_name(w.row.lock));
	}
	free(w.commits);
	return r->ok;
}

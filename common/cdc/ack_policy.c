/*
 * ack_policy.c - capture's acknowledgement policy (ack_policy.h).
 */
#include "trellara/ack_policy.h"

#include <string.h>

void ack_restart_point_add_txn(struct ack_restart_point *rp, uint64_t commit_lsn, uint64_t end_lsn)
{
	if (commit_lsn > rp->last_commit_lsn)
		rp->last_commit_lsn = commit_lsn;
	if (end_lsn > rp->durable_lsn)
		rp->durable_lsn = end_lsn;
}

void ack_restart_point_add_watermark(struct ack_restart_point *rp, uint64_t lsn)
{
	if (lsn > rp->durable_lsn)
		rp->durable_lsn = lsn;
}

bool ack_policy_is_duplicate(uint64_t stream_last_commit_lsn, uint64_t commit_lsn)
{
	return commit_lsn <= stream_last_commit_lsn;
}

void ack_policy_init(struct ack_policy *p, const struct ack_policy_options *o, const struct ack_restart_point *rp)
{
	memset(p, 0, sizeof *p);
	p->options = *o;
	p->stream_last_commit_lsn = rp->last_commit_lsn;
	p->durable_lsn = p->pending_lsn = p->recorded_lsn = rp->durable_lsn;
}

void ack_policy_on_commit_appended(struct ack_policy *p, uint64_t commit_lsn)
{
	if (commit_lsn > p->stream_last_commit_lsn)
		p->stream_last_commit_lsn = commit_lsn;
}

void ack_policy_on_connect(struct ack_policy *p)
{
	p->last_status_us = 0;
}

bool ack_policy_on_appended(struct ack_policy *p, uint64_t end_lsn, size_t writer_pending_frames, int64_t now_us)
{
	if (end_lsn > p->pending_lsn)
		p->pending_lsn = end_lsn;
	if (end_lsn > p->recorded_lsn)
		p->recorded_lsn = end_lsn;
	if (p->batch_txns++ == 0)
		p->batch_started_us = now_us;
	return p->batch_txns >= p->options.max_batch_transactions || writer_pending_frames >= p->options.max_batch_messages;
}

void ack_policy_on_passed(struct ack_policy *p, uint64_t end_lsn)
{
	if (end_lsn > p->pending_lsn)
		p->pending_lsn = end_lsn;
}

bool ack_policy_flush_needed(const struct ack_policy *p, size_t writer_pending_frames)
{
	return writer_pending_frames > 0 || p->pending_lsn > p->durable_lsn;
}

bool ack_policy_watermark_needed(const struct ack_policy *p, uint64_t *lsn)
{
	if (p->pending_lsn <= p->recorded_lsn)
		return false;
	*lsn = p->pending_lsn;
	return true;
}

void ack_policy_on_watermark_appended(struct ack_policy *p, uint64_t lsn, int64_t now_us)
{
	if (lsn > p->recorded_lsn)
		p->recorded_lsn = lsn;
	/* the batch it joins makes it durable */
	if (lsn > p->pending_lsn)
		p->pending_lsn = lsn;
	p->last_watermark_us = now_us;
}

uint64_t ack_policy_on_durable(struct ack_policy *p)
{
	if (p->pending_lsn > p->durable_lsn)
		p->durable_lsn = p->pending_lsn;
	p->batch_txns = 0;
	return p->durable_lsn;
}

bool ack_policy_batch_may_wait(const struct ack_policy *p, int64_t now_us)
{
	return p->batch_txns > 0 && p->batch_txns < p->options.max_batch_transactions &&
	       now_us - p->batch_started_us < ACK_GROUP_COMMIT_WAIT_US;
}

uint64_t ack_policy_report_lsn(const struct ack_policy *p)
{
	return p->durable_lsn;
}

void ack_policy_on_reported(struct ack_policy *p, int64_t now_us)
{
	p->reported_lsn = p->durable_lsn;
	p->last_status_us = now_us;
}

bool ack_policy_status_interval_elapsed(const struct ack_policy *p, int64_t now_us)
{
	return now_us - p->last_status_us >= p->options.status_interval_us;
}

bool ack_policy_status_due(const struct ack_policy *p, int64_t now_us)
{
	return p->durable_lsn > p->reported_lsn || ack_policy_status_interval_elapsed(p, now_us);
}

struct ack_keepalive_decision ack_policy_on_keepalive(const struct ack_policy *p, uint64_t wal_end,
						       bool reply_requested, bool in_transaction)
{
	struct ack_keepalive_decision d = {
		.record = !in_transaction && wal_end > p->durable_lsn,
		.reply = reply_requested,
	};
	return d;
}

bool ack_policy_keepalive_watermark(const struct ack_policy *p, uint64_t wal_end, bool reply_requested,
				    int64_t now_us)
{
	return wal_end > p->durable_lsn &&
	       (reply_requested || now_us - p->last_watermark_us >= p->options.watermark_interval_us);
}

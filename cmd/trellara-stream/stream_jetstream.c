/*
 * stream_jetstream.c - trellara stream init and inspect on a flow whose
 * stream is a NATS JetStream stream (stream.kind jetstream): the one file
 * of trellara-stream that speaks to the servers (libnats, through
 * ../jetstream/jetstream_session.c, shared with trellara-capture).  What the
 * stream's settings must be is jetstream_policy.c's decision; this file
 * reads them from the servers and reports.  Output formats and exit codes
 * are documented in trellara-stream(1).
 *
 * Failure contract: jetstream_session.h's, with no retry and no
 * reconnect: a server down or a quorum lost is reported (exit 69) within
 * seconds, never waited out.
 */
#include "stream_cli.h"

#include "../jetstream/jetstream_session.h"

#include "trellara/config.h"
#include "trellara/defaults.h"
#include "trellara/jetstream_policy.h"
#include "trellara/jsonw.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creates the stream per the policy: EXIT_OK, *existed set when another
 * init created it first (then *si is its info), or EXIT_UNAVAILABLE. */
static int create_stream(const struct jetstream_session *s, const struct flow_config *c, jsStreamInfo **si, bool *existed)
{
	struct jetstream_wanted want;
	struct jetstream_stream_settings set;
	jetstream_session_wanted(c, &want);
	jetstream_policy_settings(&want, &set);
	char *flow = config_flow_id(c);
	char *description = xasprintf("trellara flow %s", flow);
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = c->jetstream_stream;
	sc.Description = description;
	sc.Subjects = (const char **)set.subjects;
	sc.SubjectsLen = (int)set.n_subjects;
	sc.Storage = set.storage == JETSTREAM_STORAGE_MEMORY ? js_MemoryStorage : js_FileStorage;
	sc.Retention = js_LimitsPolicy;
	sc.Discard = set.discard == JETSTREAM_DISCARD_NEW ? js_DiscardNew : js_DiscardOld;
	sc.Replicas = (int64_t)set.replicas;
	sc.MaxMsgs = set.max_msgs;
	sc.MaxBytes = set.max_bytes;
	sc.MaxMsgsPerSubject = set.max_msgs_per_subject;
	sc.MaxAge = set.max_age_ns;
	sc.Duplicates = set.duplicate_window_ns;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	int code = EXIT_OK;
	*existed = false;
	natsStatus st = js_AddStream(si, s->js, &sc, &jo, &jerr);
	if (st != NATS_OK && jerr == JSStreamNameExistErr) {
		*existed = true;
		code = jetstream_session_stream_info(s, c->jetstream_stream, si);
		if (code == EXIT_OK && !*si)
			code = jetstream_session_request_failed(s, c->jetstream_stream, "the stream was created by another and is gone again", NATS_NOT_FOUND, jerr);
	} else if (st != NATS_OK) {
		code = jetstream_session_request_failed(s, c->jetstream_stream, "the stream cannot be created", st, jerr);
	}
	free(description);
	free(flow);
	return code;
}

static void print_settings_json(struct jsonw *w, const jsStreamConfig *cfg)
{
	jsonw_open(w, "subjects", '[');
	for (int i = 0; i < cfg->SubjectsLen; i++)
		jsonw_str(w, NULL, cfg->Subjects[i]);
	jsonw_close(w, ']');
	jsonw_u64(w, "replicas", true, cfg->Replicas > 0 ? (uint64_t)cfg->Replicas : 1);
	jsonw_str(w, "storage", jetstream_policy_storage_name(jetstream_session_storage(cfg->Storage)));
	jsonw_str(w, "retention", jetstream_policy_retention_name(jetstream_session_retention(cfg->Retention)));
	jsonw_str(w, "discard", cfg->Discard == js_DiscardNew ? "new" : "old");
	jsonw_i64(w, "max_msgs", true, cfg->MaxMsgs);
	jsonw_i64(w, "max_bytes", true, cfg->MaxBytes);
	jsonw_u64(w, "max_age_seconds", true, cfg->MaxAge > 0 ? (uint64_t)(cfg->MaxAge / 1000000000) : 0);
	jsonw_u64(w, "duplicate_window_seconds", true, cfg->Duplicates > 0 ? (uint64_t)(cfg->Duplicates / 1000000000) : 0);
}

static void print_settings_text(const jsStreamConfig *cfg)
{
	char window[64], age[64];
	jetstream_policy_format_duration(cfg->Duplicates, window, sizeof window);
	jetstream_policy_format_duration(cfg->MaxAge, age, sizeof age);
	printf("subjects:          ");
	for (int i = 0; i < cfg->SubjectsLen; i++)
		printf("%s%s", i ? ", " : "", cfg->Subjects[i]);
	printf("\n");
	printf("settings:          replicas %" PRId64 ", storage %s, retention %s, discard %s, max_age %s, "
	       "duplicate window %s\n",
	       cfg->Replicas > 0 ? cfg->Replicas : 1, jetstream_policy_storage_name(jetstream_session_storage(cfg->Storage)),
	       jetstream_policy_retention_name(jetstream_session_retention(cfg->Retention)),
	       cfg->Discard == js_DiscardNew ? "new" : "old", cfg->MaxAge > 0 ? age : "none", window);
}

int stream_cli_jetstream_init(const struct flow_config *c, bool json)
{
	struct jetstream_session s;
	jsStreamInfo *si = NULL;
	bool existed = false;
	int code = jetstream_session_open(c, "trellara-stream", false, &s);
	if (code != EXIT_OK)
		goto out;
	if ((code = jetstream_session_stream_info(&s, c->jetstream_stream, &si)) != EXIT_OK)
		goto out;
	bool created = false;
	if (!si) {
		if ((code = create_stream(&s, c, &si, &existed)) != EXIT_OK)
			goto out;
		created = !existed;
	}
	if (!created) {
		struct jetstream_wanted want;
		struct jetstream_stream_settings observed;
		struct jetstream_refusal why;
		jetstream_session_wanted(c, &want);
		jetstream_session_settings(si->Config, &observed);
		if (jetstream_policy_decide(&want, &observed, &why) != JETSTREAM_ACCEPT) {
			log_error("JetStream stream \"%s\" on %s: %s", c->jetstream_stream, s.servers, why.reason);
			log_hint("setting \"%s\" of the existing stream is refused; trellara never changes an existing "
				 "stream: fix it with the nats tools, or name another stream in stream.name",
				 why.setting);
			code = EXIT_CONFIG;
			goto out;
		}
	}
	/* the groups' positions, which retention and inspect read */
	if ((code = jetstream_session_groups_ensure(&s, c)) != EXIT_OK)
		goto out;
	const char *action = created ? "created" : "accepted";
	if (json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "stream", c->jetstream_stream);
		jsonw_str(&w, "action", action);
		print_settings_json(&w, si->Config);
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		printf("%s JetStream stream \"%s\" on %s\n", created ? "created" : "accepted existing", c->jetstream_stream,
		       s.servers);
		print_settings_text(si->Config);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output: %m");
		code = EXIT_CANTCREAT;
	}
out:
	if (si)
		jsStreamInfo_Destroy(si);
	jetstream_session_close(&s);
	return code;
}

/* ---- inspect ---- */

/* The stream's peers, the leader first: name, leader, current, offline,
 * lag, seconds since last seen (-1: unknown). */
struct peer_view {
	const char *name;
	bool leader, current, offline;
	uint64_t lag;
	double active_seconds;
};

static size_t peers_of(const jsStreamInfo *si, struct peer_view *out, size_t max)
{
	size_t n = 0;
	const jsClusterInfo *ci = si->Cluster;
	if (!ci)
		return 0;
	if (ci->Leader && n < max)
		out[n++] = (struct peer_view){ .name = ci->Leader, .leader = true, .current = true, .active_seconds = 0 };
	for (int i = 0; i < ci->ReplicasLen && n < max; i++) {
		const jsPeerInfo *p = ci->Replicas[i];
		out[n++] = (struct peer_view){ .name = p->Name,
					       .current = p->Current,
					       .offline = p->Offline,
					       .lag = p->Lag,
					       .active_seconds = (double)p->Active / 1e9 };
	}
	return n;
}

/* A consumer group's position as the groups' stream mirrors it. */
struct group_view {
	const char *name; /* borrowed from the flow config */
	bool exists;
	uint64_t position; /* the next offset it needs */
	uint64_t pending;  /* frames from there to the stream's end */
};

/* The flow's protected groups (stream.protected_groups, by default
 * apply.consumer_group).  EXIT_OK, or the failure (logged). */
static int groups_of(const struct jetstream_session *s, const struct flow_config *c, uint64_t last_seq,
		     struct group_view *out, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < c->n_protected_groups; i++) {
		struct group_view *g = &out[(*n)++];
		*g = (struct group_view){ .name = c->protected_groups[i] };
		int code = jetstream_session_group_get(s, c, g->name, &g->position, &g->exists);
		if (code != EXIT_OK)
			return code;
		g->pending = g->exists && last_seq > g->position ? last_seq - g->position : g->exists ? 0 : last_seq;
	}
	return EXIT_OK;
}

static void print_inspect_json(const struct jetstream_session *s, const jsStreamInfo *si, const struct peer_view *peers,
			       size_t n_peers, const jsConsumerInfoList *consumers, const struct group_view *groups,
			       size_t n_groups)
{
	const jsStreamState *st = &si->State;
	struct jsonw w;
	jsonw_init(&w, stdout, false);
	jsonw_open(&w, NULL, '{');
	jsonw_str(&w, "stream", si->Config->Name);
	jsonw_str(&w, "connected_server", s->connected);
	print_settings_json(&w, si->Config);
	jsonw_u64(&w, "messages", true, st->Msgs);
	jsonw_u64(&w, "bytes", true, st->Bytes);
	jsonw_u64(&w, "first_sequence", true, st->FirstSeq);
	jsonw_u64(&w, "last_sequence", true, st->LastSeq);
	jsonw_str(&w, "cluster", si->Cluster ? si->Cluster->Name : NULL);
	jsonw_str(&w, "leader", si->Cluster ? si->Cluster->Leader : NULL);
	jsonw_open(&w, "peers", '[');
	for (size_t i = 0; i < n_peers; i++) {
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "name", peers[i].name);
		jsonw_bool(&w, "leader", peers[i].leader);
		jsonw_bool(&w, "current", peers[i].current);
		jsonw_bool(&w, "offline", peers[i].offline);
		jsonw_u64(&w, "lag", true, peers[i].lag);
		jsonw_num(&w, "active_seconds", true, peers[i].active_seconds);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_open(&w, "groups", '[');
	for (size_t i = 0; i < n_groups; i++) {
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "name", groups[i].name);
		jsonw_bool(&w, "protected", true);
		jsonw_u64(&w, "position", groups[i].exists, groups[i].position);
		jsonw_u64(&w, "pending", true, groups[i].pending);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_open(&w, "consumers", '[');
	for (int i = 0; consumers && i < consumers->Count; i++) {
		const jsConsumerInfo *ci = consumers->List[i];
		jsonw_open(&w, NULL, '{');
		jsonw_str(&w, "name", ci->Name);
		jsonw_u64(&w, "pending", true, ci->NumPending);
		jsonw_i64(&w, "ack_pending", true, ci->NumAckPending);
		jsonw_u64(&w, "ack_floor_sequence", true, ci->AckFloor.Stream);
		jsonw_u64(&w, "delivered_sequence", true, ci->Delivered.Stream);
		jsonw_i64(&w, "redelivered", true, ci->NumRedelivered);
		jsonw_close(&w, '}');
	}
	jsonw_close(&w, ']');
	jsonw_close(&w, '}');
	putchar('\n');
}

static void print_inspect_text(const struct jetstream_session *s, const jsStreamInfo *si, const struct peer_view *peers,
			       size_t n_peers, const jsConsumerInfoList *consumers, const struct group_view *groups,
			       size_t n_groups)
{
	const jsStreamState *st = &si->State;
	printf("stream:            %s (JetStream, answered by %s)\n", si->Config->Name, s->connected);
	print_settings_text(si->Config);
	printf("messages:          %" PRIu64 " (%" PRIu64 " bytes)\n", st->Msgs, st->Bytes);
	printf("first sequence:    %" PRIu64 "\n", st->FirstSeq);
	printf("last sequence:     %" PRIu64 "\n", st->LastSeq);
	printf("cluster:           %s\n", si->Cluster && si->Cluster->Name ? si->Cluster->Name : "-");
	printf("leader:            %s\n", si->Cluster && si->Cluster->Leader ? si->Cluster->Leader : "none");
	for (size_t i = 0; i < n_peers; i++) {
		if (peers[i].leader)
			continue;
		printf("replica %s: %s%s, lag %" PRIu64 ", active %.3f s ago\n", peers[i].name,
		       peers[i].current ? "current" : "not current", peers[i].offline ? " (offline)" : "", peers[i].lag,
		       peers[i].active_seconds);
	}
	for (size_t i = 0; i < n_groups; i++) {
		if (groups[i].exists)
			printf("group %s (protected): at offset %" PRIu64 ", %" PRIu64 " frames pending\n", groups[i].name,
			       groups[i].position, groups[i].pending);
		else
			printf("group %s (protected): no position recorded yet, %" PRIu64 " frames pending\n",
			       groups[i].name, groups[i].pending);
	}
	for (int i = 0; consumers && i < consumers->Count; i++) {
		const jsConsumerInfo *ci = consumers->List[i];
		printf("consumer %s: pending %" PRIu64 ", ack pending %" PRId64 ", ack floor %" PRIu64
		       ", delivered %" PRIu64 "\n",
		       ci->Name, ci->NumPending, ci->NumAckPending, ci->AckFloor.Stream, ci->Delivered.Stream);
	}
}

/* Connects and looks the flow's stream up: EXIT_OK with *si, or why not
 * (logged; EXIT_NOINPUT when it does not exist).  Close s whatever the
 * result. */
static int open_existing(const struct flow_config *c, struct jetstream_session *s, jsStreamInfo **si)
{
	int code = jetstream_session_open(c, "trellara-stream", false, s);
	if (code == EXIT_OK)
		code = jetstream_session_stream_info(s, c->jetstream_stream, si);
	if (code == EXIT_OK && !*si) {
		log_error("JetStream stream \"%s\" does not exist on %s", c->jetstream_stream, s->servers);
		log_hint("create it with \"trellara stream init --config %s\"", c->path);
		code = EXIT_NOINPUT;
	}
	return code;
}

int stream_cli_jetstream_inspect(const struct flow_config *c, bool json)
{
	struct jetstream_session s;
	jsStreamInfo *si = NULL;
	jsConsumerInfoList *consumers = NULL;
	int code = open_existing(c, &s, &si);
	if (code != EXIT_OK)
		goto out;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	natsStatus st = js_Consumers(&consumers, s.js, c->jetstream_stream, &jo, &jerr);
	if (st == NATS_NOT_FOUND) {
		consumers = NULL; /* none */
	} else if (st != NATS_OK) {
		code = jetstream_session_request_failed(&s, c->jetstream_stream, "its consumers cannot be listed", st, jerr);
		goto out;
	}
	struct peer_view peers[MAX_JETSTREAM_REPLICAS + 1];
	size_t n_peers = peers_of(si, peers, sizeof peers / sizeof *peers);
	struct group_view *groups = xcalloc(c->n_protected_groups + 1, sizeof *groups);
	size_t n_groups = 0;
	if ((code = groups_of(&s, c, si->State.LastSeq, groups, &n_groups)) != EXIT_OK) {
		free(groups);
		goto out;
	}
	if (json)
		print_inspect_json(&s, si, peers, n_peers, consumers, groups, n_groups);
	else
		print_inspect_text(&s, si, peers, n_peers, consumers, groups, n_groups);
	free(groups);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output: %m");
		code = EXIT_CANTCREAT;
	}
out:
	if (consumers)
		jsConsumerInfoList_Destroy(consumers);
	if (si)
		jsStreamInfo_Destroy(si);
	jetstream_session_close(&s);
	return code;
}

/* ---- retention ---- */

int stream_cli_jetstream_retention(const struct flow_config *c, bool apply, bool json)
{
	struct jetstream_session s;
	jsStreamInfo *si = NULL;
	struct group_view *groups = xcalloc(c->n_protected_groups + 1, sizeof *groups);
	size_t n_groups = 0;
	int code = open_existing(c, &s, &si);
	if (code != EXIT_OK)
		goto out;
	uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
	if ((code = groups_of(&s, c, last, groups, &n_groups)) != EXIT_OK)
		goto out;
	/* keep from the lowest protected position; a group with none keeps
	 * everything; the last message always stays (capture's restart
	 * point is read from the stream's end) */
	uint64_t keep_from = last ? last - 1 : 0;
	char limited_by[512] = "the stream's last message (capture's restart point)";
	if (n_groups == 0) {
		keep_from = first ? first - 1 : 0;
		snprintf(limited_by, sizeof limited_by, "no consumer group to protect (stream.protected_groups is empty)");
	}
	for (size_t i = 0; i < n_groups; i++) {
		uint64_t need = groups[i].exists ? groups[i].position : 0;
		if (need < keep_from) {
			keep_from = need;
			snprintf(limited_by, sizeof limited_by, "group \"%s\" %s", groups[i].name,
				 groups[i].exists ? "at that offset" : "with no position recorded");
		}
	}
	/* nor past the stream's last message that records a source position
	 * (txn, commit_marker, watermark): capture's restart reads back to it,
	 * and the newest messages may be pending chunks of an open transaction */
	for (uint64_t seq = last; seq > keep_from + 1 && seq >= first && seq > 0; seq--) {
		jsOptions jo;
		jsOptions_Init(&jo);
		jo.Wait = JETSTREAM_API_WAIT_MS;
		natsMsg *m = NULL;
		jsErrCode jerr = 0;
		natsStatus st = js_GetMsg(&m, s.js, c->jetstream_stream, seq, &jo, &jerr);
		if (st != NATS_OK) {
			code = jetstream_session_request_failed(&s, c->jetstream_stream, "its last messages cannot be read", st,
								jerr);
			goto out;
		}
		struct frame_header h;
		struct frame_buffer fb = { 0 };
		const uint8_t *payload;
		bool compressed;
		const char *bad = jetstream_session_frame((const uint8_t *)natsMsg_GetData(m),
							  (size_t)natsMsg_GetDataLength(m), &h, &fb, &payload, &compressed);
		frame_buffer_free(&fb);
		natsMsg_Destroy(m);
		if (!bad && (h.type == FRAME_TXN || h.type == FRAME_COMMIT_MARKER || h.type == FRAME_WATERMARK)) {
			if (seq - 1 < keep_from) {
				keep_from = seq - 1;
				snprintf(limited_by, sizeof limited_by,
					 "the stream's last transaction or watermark (capture's restart point)");
			}
			break;
		}
	}
	uint64_t removable = first && keep_from + 1 > first ? keep_from + 1 - first : 0;
	if (apply && removable) {
		jsOptions jo;
		jsOptions_Init(&jo);
		jo.Wait = JETSTREAM_API_WAIT_MS;
		jo.Stream.Purge.Sequence = keep_from + 1; /* removes the messages before it */
		jsErrCode jerr = 0;
		natsStatus st = js_PurgeStream(s.js, c->jetstream_stream, &jo, &jerr);
		if (st != NATS_OK) {
			code = jetstream_session_request_failed(&s, c->jetstream_stream, "the messages cannot be removed",
								st, jerr);
			goto out;
		}
	}
	if (json) {
		struct jsonw w;
		jsonw_init(&w, stdout, false);
		jsonw_open(&w, NULL, '{');
		jsonw_bool(&w, "apply", apply);
		jsonw_u64(&w, "keep_from", true, keep_from);
		jsonw_str(&w, "limited_by", limited_by);
		jsonw_u64(&w, "messages", true, removable);
		jsonw_u64(&w, "first_sequence", true, first);
		jsonw_u64(&w, "last_sequence", true, last);
		jsonw_close(&w, '}');
		putchar('\n');
	} else {
		printf("%" PRIu64 " messages (offsets below %" PRIu64 ") %s; oldest kept offset limited by %s\n", removable,
		       keep_from, apply ? "removed" : "removable", limited_by);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output: %m");
		code = EXIT_CANTCREAT;
	}
out:
	free(groups);
	if (si)
		jsStreamInfo_Destroy(si);
	jetstream_session_close(&s);
	return code;
}

/*
 * stream_jetstream.c - trellara stream init and inspect on a flow whose
 * stream is a NATS JetStream stream (stream.kind jetstream): the one file
 * of trellara-stream that speaks to the servers (libnats).  What the
 * stream's settings must be is jetstream_policy.c's decision; this file
 * reads them from the servers and reports.  Output formats and exit codes
 * are documented in trellara-stream(1).
 *
 * Failure contract: every JetStream request waits at most
 * JETSTREAM_API_WAIT_MS, every connection attempt JETSTREAM_CONNECT_MS per
 * server, with no retry: a server down or a quorum lost is reported
 * (exit 69) within seconds, never waited out.  The credentials
 * (stream.credentials) are handed to libnats and never printed; the
 * server URLs hold none (the flow file refuses user info in them).
 */
#include "stream_cli.h"

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

#define JETSTREAM_CONNECT_MS 2000
#define JETSTREAM_API_WAIT_MS 5000

struct js_session {
	natsOptions *opts;   /* owned */
	natsConnection *nc;  /* owned */
	jsCtx *js;           /* owned */
	char *servers;       /* owned: "nats://a:1, nats://b:2", for messages */
	char connected[256]; /* the server the connection went to */
};

static char *servers_text(const struct flow_config *c)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t i = 0; i < c->n_jetstream_servers; i++)
		strbuf_addf(&sb, "%s%s", i ? ", " : "", c->jetstream_servers[i]);
	return strbuf_detach(&sb, NULL);
}

static void js_session_close(struct js_session *s)
{
	if (s->js)
		jsCtx_Destroy(s->js);
	if (s->nc)
		natsConnection_Destroy(s->nc);
	if (s->opts)
		natsOptions_Destroy(s->opts);
	free(s->servers);
	memset(s, 0, sizeof *s);
	nats_Close();
}

/* Credentials: "user:password" (split at the first ":"), else a token. */
static natsStatus set_credentials(natsOptions *opts, const char *credentials)
{
	const char *colon = strchr(credentials, ':');
	if (!colon)
		return natsOptions_SetToken(opts, credentials);
	char *user = xstrndup(credentials, (size_t)(colon - credentials));
	natsStatus st = natsOptions_SetUserInfo(opts, user, colon + 1);
	free(user);
	return st;
}

/* Connects to stream.servers: EXIT_OK, or EXIT_UNAVAILABLE (logged,
 * naming the servers and never the credentials). */
static int js_session_open(const struct flow_config *c, struct js_session *s)
{
	memset(s, 0, sizeof *s);
	s->servers = servers_text(c);
	natsStatus st = natsOptions_Create(&s->opts);
	if (st == NATS_OK)
		st = natsOptions_SetServers(s->opts, (const char **)c->jetstream_servers, (int)c->n_jetstream_servers);
	if (st == NATS_OK)
		st = natsOptions_SetTimeout(s->opts, JETSTREAM_CONNECT_MS);
	if (st == NATS_OK)
		st = natsOptions_SetAllowReconnect(s->opts, false);
	if (st == NATS_OK)
		st = natsOptions_SetName(s->opts, "trellara-stream");
	if (st == NATS_OK && c->jetstream_credentials)
		st = set_credentials(s->opts, c->jetstream_credentials);
	if (st != NATS_OK) {
		log_error("cannot set up a NATS connection to %s: %s", s->servers, natsStatus_GetText(st));
		return EXIT_UNAVAILABLE;
	}
	st = natsConnection_Connect(&s->nc, s->opts);
	if (st != NATS_OK) {
		log_error("cannot connect to the JetStream servers %s: %s", s->servers, natsStatus_GetText(st));
		if (st == NATS_NOT_PERMITTED || st == NATS_CONNECTION_AUTH_FAILED)
			log_hint("check stream.credentials (\"user:password\" or a token)");
		else
			log_hint("are the servers of stream.servers running and reachable?");
		return EXIT_UNAVAILABLE;
	}
	if (natsConnection_GetConnectedUrl(s->nc, s->connected, sizeof s->connected) != NATS_OK)
		snprintf(s->connected, sizeof s->connected, "?");
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	st = natsConnection_JetStream(&s->js, s->nc, &jo);
	if (st != NATS_OK) {
		log_error("cannot use JetStream on %s: %s", s->connected, natsStatus_GetText(st));
		return EXIT_UNAVAILABLE;
	}
	return EXIT_OK;
}

/* libnats' last error text without its "(file.c:123): " prefix. */
static const char *last_error_text(natsStatus st)
{
	const char *text = nats_GetLastError(NULL);
	if (!text || !*text)
		return natsStatus_GetText(st);
	if (text[0] == '(') {
		const char *end = strstr(text, "): ");
		if (end)
			text = end + 3;
	}
	return text;
}

/* A JetStream request that failed (not "no such stream"): logged, naming
 * the server that was asked and what may be wrong; EXIT_UNAVAILABLE.
 * what: "the stream's info cannot be had", ... */
static int js_request_failed(const struct js_session *s, const char *stream, const char *what, natsStatus st,
			     jsErrCode jerr)
{
	bool quorum = st == NATS_TIMEOUT || st == NATS_NO_RESPONDERS || jerr == JSClusterNotAvailErr ||
		      jerr == JSStreamOfflineErr || jerr == JSClusterNoPeersErr;
	if (st == NATS_TIMEOUT || st == NATS_NO_RESPONDERS)
		log_error("JetStream stream \"%s\": %s: no answer within %d s from %s (%s): quorum lost, or servers down",
			  stream, what, JETSTREAM_API_WAIT_MS / 1000, s->connected, natsStatus_GetText(st));
	else
		log_error("JetStream stream \"%s\": %s: %s (JetStream error %d) from %s%s", stream, what,
			  last_error_text(st), (int)jerr, s->connected, quorum ? ": quorum lost" : "");
	if (quorum)
		log_hint("too few of the servers %s run for the stream's quorum; it answers again once a majority "
			 "of its replicas' servers runs",
			 s->servers);
	return EXIT_UNAVAILABLE;
}

static enum jetstream_storage storage_of(jsStorageType t)
{
	return t == js_MemoryStorage ? JETSTREAM_STORAGE_MEMORY : JETSTREAM_STORAGE_FILE;
}

static enum jetstream_retention retention_of(jsRetentionPolicy p)
{
	return p == js_InterestPolicy ? JETSTREAM_RETENTION_INTEREST
	       : p == js_WorkQueuePolicy ? JETSTREAM_RETENTION_WORKQUEUE
					 : JETSTREAM_RETENTION_LIMITS;
}

/* The servers' configuration of a stream, as the policy reads it
 * (subjects borrowed from cfg). */
static void settings_of(const jsStreamConfig *cfg, struct jetstream_stream_settings *out)
{
	memset(out, 0, sizeof *out);
	out->subjects = cfg->Subjects;
	out->n_subjects = cfg->SubjectsLen > 0 ? (size_t)cfg->SubjectsLen : 0;
	out->replicas = cfg->Replicas > 0 ? (uint64_t)cfg->Replicas : 1; /* JetStream says 0 for 1 */
	out->storage = storage_of(cfg->Storage);
	out->retention = retention_of(cfg->Retention);
	out->discard = cfg->Discard == js_DiscardNew ? JETSTREAM_DISCARD_NEW : JETSTREAM_DISCARD_OLD;
	out->max_msgs = cfg->MaxMsgs;
	out->max_bytes = cfg->MaxBytes;
	out->max_msgs_per_subject = cfg->MaxMsgsPerSubject;
	out->max_age_ns = cfg->MaxAge;
	out->duplicate_window_ns = cfg->Duplicates;
	out->sealed = cfg->Sealed;
}

static void wanted_of(const struct flow_config *c, struct jetstream_wanted *want)
{
	want->subject = c->jetstream_subject;
	want->replicas = c->jetstream_replicas;
	want->duplicate_window_seconds = c->jetstream_duplicate_window_seconds;
}

/* A replica the leader has not heard from for this long is gone, for the
 * quorum count: JetStream's heartbeats come every second, and it only
 * marks a replica not current (and a leader without a quorum steps down)
 * after about ten. */
#define JETSTREAM_PEER_SILENT_NS (3 * INT64_C(1000000000))

static bool peer_reachable(const jsPeerInfo *p)
{
	return p->Current && !p->Offline && p->Active < JETSTREAM_PEER_SILENT_NS;
}

/* A replicated stream whose replicas elect no leader, or whose leader
 * hears from too few replicas for a majority: quorum lost. */
static bool quorum_lost(const jsStreamInfo *si)
{
	const jsClusterInfo *ci = si->Cluster;
	if (!ci || ci->ReplicasLen == 0)
		return false;
	if (!ci->Leader || !ci->Leader[0])
		return true;
	int reachable = 1; /* the leader */
	for (int i = 0; i < ci->ReplicasLen; i++)
		reachable += peer_reachable(ci->Replicas[i]);
	int peers = ci->ReplicasLen + 1;
	return reachable < peers / 2 + 1;
}

/* Looks the stream up: EXIT_OK with *si (NULL when there is none), or
 * EXIT_UNAVAILABLE (logged: no answer, or no leader). */
static int stream_info(const struct js_session *s, const char *stream, jsStreamInfo **si)
{
	jsErrCode jerr = 0;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	*si = NULL;
	natsStatus st = js_GetStreamInfo(si, s->js, stream, &jo, &jerr);
	if (st == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
		*si = NULL;
		return EXIT_OK;
	}
	if (st != NATS_OK)
		return js_request_failed(s, stream, "the stream's info cannot be had", st, jerr);
	if (!quorum_lost(*si))
		return EXIT_OK;
	/* a replica answers for a stream without a leader, or a leader that
	 * hears from too few replicas: what it says may be stale, and nothing
	 * can be written there */
	const jsClusterInfo *ci = (*si)->Cluster;
	struct strbuf gone;
	strbuf_init(&gone);
	for (int i = 0; i < ci->ReplicasLen; i++)
		if (!peer_reachable(ci->Replicas[i]))
			strbuf_addf(&gone, "%s%s (last heard %.1f s ago)", gone.len ? ", " : "", ci->Replicas[i]->Name,
				    (double)ci->Replicas[i]->Active / 1e9);
	log_error("JetStream stream \"%s\": the stream's info cannot be had: quorum lost (%s; replicas not "
		  "current: %s), as %s says",
		  stream, ci->Leader && ci->Leader[0] ? "too few replicas answer its leader" : "no leader",
		  gone.len ? gone.buf : "none", s->connected);
	log_hint("the stream answers again once a majority of its replicas' servers (of %s) runs", s->servers);
	strbuf_release(&gone);
	jsStreamInfo_Destroy(*si);
	*si = NULL;
	return EXIT_UNAVAILABLE;
}

/* Creates the stream per the policy: EXIT_OK, *existed set when another
 * init created it first (then *si is its info), or EXIT_UNAVAILABLE. */
static int create_stream(const struct js_session *s, const struct flow_config *c, jsStreamInfo **si, bool *existed)
{
	struct jetstream_wanted want;
	struct jetstream_stream_settings set;
	wanted_of(c, &want);
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
		code = stream_info(s, c->jetstream_stream, si);
		if (code == EXIT_OK && !*si)
			code = js_request_failed(s, c->jetstream_stream, "the stream was created by another and is gone again", NATS_NOT_FOUND, jerr);
	} else if (st != NATS_OK) {
		code = js_request_failed(s, c->jetstream_stream, "the stream cannot be created", st, jerr);
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
	jsonw_str(w, "storage", jetstream_policy_storage_name(storage_of(cfg->Storage)));
	jsonw_str(w, "retention", jetstream_policy_retention_name(retention_of(cfg->Retention)));
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
	       cfg->Replicas > 0 ? cfg->Replicas : 1, jetstream_policy_storage_name(storage_of(cfg->Storage)),
	       jetstream_policy_retention_name(retention_of(cfg->Retention)),
	       cfg->Discard == js_DiscardNew ? "new" : "old", cfg->MaxAge > 0 ? age : "none", window);
}

int stream_cli_jetstream_init(const struct flow_config *c, bool json)
{
	struct js_session s;
	jsStreamInfo *si = NULL;
	bool existed = false;
	int code = js_session_open(c, &s);
	if (code != EXIT_OK)
		goto out;
	if ((code = stream_info(&s, c->jetstream_stream, &si)) != EXIT_OK)
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
		wanted_of(c, &want);
		settings_of(si->Config, &observed);
		if (jetstream_policy_decide(&want, &observed, &why) != JETSTREAM_ACCEPT) {
			log_error("JetStream stream \"%s\" on %s: %s", c->jetstream_stream, s.servers, why.reason);
			log_hint("setting \"%s\" of the existing stream is refused; trellara never changes an existing "
				 "stream: fix it with the nats tools, or name another stream in stream.name",
				 why.setting);
			code = EXIT_CONFIG;
			goto out;
		}
	}
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
	js_session_close(&s);
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

static void print_inspect_json(const struct js_session *s, const jsStreamInfo *si, const struct peer_view *peers,
			       size_t n_peers, const jsConsumerInfoList *consumers)
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

static void print_inspect_text(const struct js_session *s, const jsStreamInfo *si, const struct peer_view *peers,
			       size_t n_peers, const jsConsumerInfoList *consumers)
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
	for (int i = 0; consumers && i < consumers->Count; i++) {
		const jsConsumerInfo *ci = consumers->List[i];
		printf("consumer %s: pending %" PRIu64 ", ack pending %" PRId64 ", ack floor %" PRIu64
		       ", delivered %" PRIu64 "\n",
		       ci->Name, ci->NumPending, ci->NumAckPending, ci->AckFloor.Stream, ci->Delivered.Stream);
	}
}

int stream_cli_jetstream_inspect(const struct flow_config *c, bool json)
{
	struct js_session s;
	jsStreamInfo *si = NULL;
	jsConsumerInfoList *consumers = NULL;
	int code = js_session_open(c, &s);
	if (code != EXIT_OK)
		goto out;
	if ((code = stream_info(&s, c->jetstream_stream, &si)) != EXIT_OK)
		goto out;
	if (!si) {
		log_error("JetStream stream \"%s\" does not exist on %s", c->jetstream_stream, s.servers);
		log_hint("create it with \"trellara stream init --config %s\"", c->path);
		code = EXIT_NOINPUT;
		goto out;
	}
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	natsStatus st = js_Consumers(&consumers, s.js, c->jetstream_stream, &jo, &jerr);
	if (st == NATS_NOT_FOUND) {
		consumers = NULL; /* none */
	} else if (st != NATS_OK) {
		code = js_request_failed(&s, c->jetstream_stream, "its consumers cannot be listed", st, jerr);
		goto out;
	}
	struct peer_view peers[MAX_JETSTREAM_REPLICAS + 1];
	size_t n_peers = peers_of(si, peers, sizeof peers / sizeof *peers);
	if (json)
		print_inspect_json(&s, si, peers, n_peers, consumers);
	else
		print_inspect_text(&s, si, peers, n_peers, consumers);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output: %m");
		code = EXIT_CANTCREAT;
	}
out:
	if (consumers)
		jsConsumerInfoList_Destroy(consumers);
	if (si)
		jsStreamInfo_Destroy(si);
	js_session_close(&s);
	return code;
}

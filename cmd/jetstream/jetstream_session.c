/*
 * jetstream_session.c - a connection to a flow's JetStream servers
 * (jetstream_session.h).
 */
#include "jetstream_session.h"

#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/strbuf.h"
#include "trellara/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *servers_text(const struct flow_config *c)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t i = 0; i < c->n_jetstream_servers; i++)
		strbuf_addf(&sb, "%s%s", i ? ", " : "", c->jetstream_servers[i]);
	return strbuf_detach(&sb, NULL);
}

void jetstream_session_close(struct jetstream_session *s)
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

int jetstream_session_open(const struct flow_config *c, const char *name, bool reconnect,
			   struct jetstream_session *s)
{
	memset(s, 0, sizeof *s);
	s->servers = servers_text(c);
	natsStatus st = natsOptions_Create(&s->opts);
	if (st == NATS_OK)
		st = natsOptions_SetServers(s->opts, (const char **)c->jetstream_servers, (int)c->n_jetstream_servers);
	if (st == NATS_OK)
		st = natsOptions_SetTimeout(s->opts, JETSTREAM_CONNECT_MS);
	if (st == NATS_OK)
		st = natsOptions_SetAllowReconnect(s->opts, reconnect);
	if (st == NATS_OK && reconnect)
		st = natsOptions_SetMaxReconnect(s->opts, -1);
	if (st == NATS_OK && reconnect)
		st = natsOptions_SetReconnectWait(s->opts, JETSTREAM_RECONNECT_WAIT_MS);
	if (st == NATS_OK)
		st = natsOptions_SetName(s->opts, name);
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

const char *jetstream_session_error_text(natsStatus st)
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

int jetstream_session_request_failed(const struct jetstream_session *s, const char *stream, const char *what, natsStatus st,
			     jsErrCode jerr)
{
	bool quorum = st == NATS_TIMEOUT || st == NATS_NO_RESPONDERS || jerr == JSClusterNotAvailErr ||
		      jerr == JSStreamOfflineErr || jerr == JSClusterNoPeersErr;
	if (st == NATS_TIMEOUT || st == NATS_NO_RESPONDERS)
		log_error("JetStream stream \"%s\": %s: no answer within %d s from %s (%s): quorum lost, or servers down",
			  stream, what, JETSTREAM_API_WAIT_MS / 1000, s->connected, natsStatus_GetText(st));
	else
		log_error("JetStream stream \"%s\": %s: %s (JetStream error %d) from %s%s", stream, what,
			  jetstream_session_error_text(st), (int)jerr, s->connected, quorum ? ": quorum lost" : "");
	if (quorum)
		log_hint("too few of the servers %s run for the stream's quorum; it answers again once a majority "
			 "of its replicas' servers runs",
			 s->servers);
	return EXIT_UNAVAILABLE;
}

enum jetstream_storage jetstream_session_storage(jsStorageType t)
{
	return t == js_MemoryStorage ? JETSTREAM_STORAGE_MEMORY : JETSTREAM_STORAGE_FILE;
}

enum jetstream_retention jetstream_session_retention(jsRetentionPolicy p)
{
	return p == js_InterestPolicy ? JETSTREAM_RETENTION_INTEREST
	       : p == js_WorkQueuePolicy ? JETSTREAM_RETENTION_WORKQUEUE
					 : JETSTREAM_RETENTION_LIMITS;
}

void jetstream_session_settings(const jsStreamConfig *cfg, struct jetstream_stream_settings *out)
{
	memset(out, 0, sizeof *out);
	out->subjects = cfg->Subjects;
	out->n_subjects = cfg->SubjectsLen > 0 ? (size_t)cfg->SubjectsLen : 0;
	out->replicas = cfg->Replicas > 0 ? (uint64_t)cfg->Replicas : 1; /* JetStream says 0 for 1 */
	out->storage = jetstream_session_storage(cfg->Storage);
	out->retention = jetstream_session_retention(cfg->Retention);
	out->discard = cfg->Discard == js_DiscardNew ? JETSTREAM_DISCARD_NEW : JETSTREAM_DISCARD_OLD;
	out->max_msgs = cfg->MaxMsgs;
	out->max_bytes = cfg->MaxBytes;
	out->max_msgs_per_subject = cfg->MaxMsgsPerSubject;
	out->max_age_ns = cfg->MaxAge;
	out->duplicate_window_ns = cfg->Duplicates;
	out->sealed = cfg->Sealed;
}

void jetstream_session_wanted(const struct flow_config *c, struct jetstream_wanted *want)
{
	want->subject = c->jetstream_subject;
	want->replicas = c->jetstream_replicas;
	want->duplicate_window_seconds = c->jetstream_duplicate_window_seconds;
	want->max_bytes = c->jetstream_max_bytes;
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

int jetstream_session_stream_info(const struct jetstream_session *s, const char *stream, jsStreamInfo **si)
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
		return jetstream_session_request_failed(s, stream, "the stream's info cannot be had", st, jerr);
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


int jetstream_session_accept(const struct flow_config *c, const jsStreamInfo *si, const char *name)
{
	struct jetstream_wanted want;
	struct jetstream_stream_settings observed;
	struct jetstream_refusal why;
	jetstream_session_wanted(c, &want);
	jetstream_session_settings(si->Config, &observed);
	if (jetstream_policy_decide(&want, &observed, &why) == JETSTREAM_ACCEPT)
		return EXIT_OK;
	log_error("%s: %s", name, why.reason);
	log_hint("\"trellara stream init --config %s\" says what the stream's settings must be (setting \"%s\")", c->path,
		 why.setting);
	return EXIT_CONFIG;
}

char *jetstream_session_stream_id(const struct flow_config *c, const jsStreamInfo *si)
{
	return xasprintf("jetstream:%s:%" PRId64, c->jetstream_stream, si->Created);
}

const char *jetstream_session_frame(const uint8_t *data, size_t len, struct frame_header *h, struct frame_buffer *buf,
				    const uint8_t **payload, bool *compressed)
{
	const char *reason = NULL;
	if (len < FRAME_HEADER_SIZE)
		return "shorter than a frame header";
	if (!frame_decode_header(data, h, &reason))
		return reason;
	if (FRAME_HEADER_SIZE + (size_t)h->payload_length != len)
		return "its length differs from its frame's";
	if (!frame_check_crc(data, data + FRAME_HEADER_SIZE, h->payload_length))
		return "bad frame checksum";
	return frame_payload_decode(h, data + FRAME_HEADER_SIZE, buf, payload, compressed);
}

char *jetstream_session_header(natsMsg *m, const char *key)
{
	const char *v = NULL;
	return m && natsMsgHeader_Get(m, key, &v) == NATS_OK && v && *v ? xstrdup(v) : NULL;
}

/* ---- the consumer groups' positions (stream "<name>-groups") ---- */

char *jetstream_session_groups_stream(const struct flow_config *c)
{
	return xasprintf("%s-groups", c->jetstream_stream);
}

char *jetstream_session_group_subject(const struct flow_config *c, const char *group)
{
	/* a group name may hold ".", a subject token may not: "." is "%"
	 * there (a group name never holds "%") */
	char *s = xasprintf("%s.groups.%s", c->jetstream_subject, group ? group : "*");
	for (char *p = s + strlen(c->jetstream_subject) + strlen(".groups."); *p; p++)
		if (*p == '.')
			*p = '%';
	return s;
}

int jetstream_session_groups_ensure(const struct jetstream_session *s, const struct flow_config *c)
{
	char *name = jetstream_session_groups_stream(c);
	char *subject = jetstream_session_group_subject(c, NULL);
	const char *subjects[1] = { subject };
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = name;
	sc.Description = "trellara: each consumer group's next offset (retention keeps every frame from there)";
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	sc.Retention = js_LimitsPolicy;
	sc.Replicas = (int64_t)c->jetstream_replicas;
	sc.MaxMsgsPerSubject = 1;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	jsStreamInfo *si = NULL;
	natsStatus st = js_AddStream(&si, s->js, &sc, &jo, &jerr);
	int code = EXIT_OK;
	if (st != NATS_OK && jerr != JSStreamNameExistErr)
		code = jetstream_session_request_failed(s, name, "the consumer groups' stream cannot be created", st,
							jerr);
	if (si)
		jsStreamInfo_Destroy(si);
	free(subject);
	free(name);
	return code;
}

int jetstream_session_group_get(const struct jetstream_session *s, const struct flow_config *c, const char *group,
			uint64_t *position, bool *exists)
{
	*position = 0;
	*exists = false;
	char *name = jetstream_session_groups_stream(c);
	char *subject = jetstream_session_group_subject(c, group);
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	natsMsg *m = NULL;
	natsStatus st = js_GetLastMsg(&m, s->js, name, subject, &jo, &jerr);
	int code = EXIT_OK;
	if (st == NATS_OK) {
		char text[32];
		int len = natsMsg_GetDataLength(m);
		char *end = NULL;
		snprintf(text, sizeof text, "%.*s", len < 31 ? len : 31, natsMsg_GetData(m));
		unsigned long long v = strtoull(text, &end, 10);
		if (!text[0] || *end) {
			log_error("JetStream stream \"%s\": the position of group \"%s\" is not a number: \"%s\"", name,
				  group, text);
			code = EXIT_DATAERR;
		} else {
			*position = v;
			*exists = true;
		}
	} else if (!(st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr || jerr == JSStreamNotFoundErr)) {
		code = jetstream_session_request_failed(s, name, "a consumer group's position cannot be read", st, jerr);
	}
	natsMsg_Destroy(m);
	free(subject);
	free(name);
	return code;
}

int jetstream_session_group_set(const struct jetstream_session *s, const struct flow_config *c, const char *group,
			uint64_t position)
{
	char *subject = jetstream_session_group_subject(c, group);
	char text[32];
	snprintf(text, sizeof text, "%" PRIu64, position);
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = JETSTREAM_API_WAIT_MS;
	jsErrCode jerr = 0;
	jsPubAck *pa = NULL;
	natsStatus st = js_Publish(&pa, s->js, subject, text, (int)strlen(text), &po, &jerr);
	jsPubAck_Destroy(pa);
	free(subject);
	return st == NATS_OK ? EXIT_OK : EXIT_UNAVAILABLE;
}

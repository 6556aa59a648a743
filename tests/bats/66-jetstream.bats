#!/usr/bin/env bats
#
# stream.kind jetstream: trellara stream init and inspect on a 3-node
# JetStream cluster (helpers/nats.bash, one per file).  No database: these
# tests write flow files with write_flow_file (helpers/common) but start
# no PostgreSQL cluster (the hooks below replace common's): nothing here
# connects to one, and a program that would refuses the flow first.
# build/tests/jetstream_publish puts messages and a consumer in a stream
# (capture's publishing is 67-jetstream-capture.bats').

bats_require_minimum_version 1.5.0

load helpers/common
load helpers/nats

setup_file() {
	trellara_nats_need_publish || return 1
	trellara_nats_cluster_start
}

teardown_file() {
	trellara_nats_cluster_stop
}

setup() {
	export TEST_N=$BATS_TEST_NUMBER
	export TEST_DIR=$BATS_TEST_TMPDIR/t
	mkdir -m 0700 "$TEST_DIR"
	export STREAM_DIR=$TEST_DIR/stream FLOW_FILE=$TEST_DIR/trellara.yml
	# write_flow_file's names; the URLs lead nowhere (nothing connects)
	export SOURCE_URL="postgresql:///none?host=$TEST_DIR/nosocket" TARGET_URL="postgresql:///none?host=$TEST_DIR/nosocket"
	export SLOT_NAME=trellara_slot PUBLICATION_NAME=trellara_pub SOURCE_ID=bats_source DATASET_ID=bats_dataset
	# one stream per test on the file's cluster
	export JS_STREAM=TRELLARA_T$BATS_TEST_NUMBER JS_SUBJECT=trellara.t$BATS_TEST_NUMBER
}

teardown() {
	local i
	# a test that stopped nodes leaves the cluster whole for the next
	for ((i = 1; i <= NATS_NODES; i++)); do
		_nats_pid "$i" >/dev/null || trellara_nats_node_start "$i"
	done
	trellara_nats_wait_ready 30
}

# jetstream_flow PATH [EXTRA_STREAM_LINE]...: a flow file on this test's stream
jetstream_flow() {
	local path=$1
	shift
	write_flow_file "$path" "$(nats_stream_yaml "$JS_STREAM" "$JS_SUBJECT" "$@")"
}

# inspect_json: trellara stream inspect --format json on $FLOW_FILE, into $output
inspect_json() {
	trellara stream inspect --config "$FLOW_FILE" --format json
}

# node_of NAME: the node number of server name nI
node_of() { echo "${1#n}"; }

@test "stream init creates the stream with 3 replicas; inspect shows the leader and 3 peers, no messages; a second init accepts it" {
	jetstream_flow "$FLOW_FILE"
	# before init: no such stream (66), with the hint
	run -66 inspect_json
	[[ $output == *"JetStream stream \"$JS_STREAM\" does not exist"* ]]
	[[ $output == *"trellara stream init --config"* ]]

	run -0 --separate-stderr trellara stream init --config "$FLOW_FILE"
	[[ $output == "created JetStream stream \"$JS_STREAM\" on nats://127.0.0.1:"* ]]
	[[ $output == *"replicas 3, storage file, retention limits, discard new, max_age none, duplicate window 2m"* ]]

	run -0 --separate-stderr inspect_json
	jq -e --arg s "$JS_STREAM" --arg subj "$JS_SUBJECT" '
		.stream == $s and .subjects == [$subj] and .replicas == 3 and .storage == "file"
		and .retention == "limits" and .discard == "new" and .max_age_seconds == 0
		and .duplicate_window_seconds == 120
		and .messages == 0 and .bytes == 0 and .last_sequence == 0
		and .cluster == "trellara-bats" and (.leader | test("^n[123]$"))
		and (.peers | length) == 3 and ([.peers[] | select(.leader)] | length) == 1
		and ([.peers[] | select(.leader)][0].name == .leader)
		and ([.peers[].name] | sort) == ["n1", "n2", "n3"]
		and .consumers == []' <<<"$output"

	# idempotent: the second init accepts what the first created
	run -0 --separate-stderr trellara stream init --config "$FLOW_FILE" --format json
	jq -e --arg s "$JS_STREAM" '.stream == $s and .action == "accepted" and .replicas == 3' <<<"$output"
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE"
	[[ $output == *"leader:            n"[123]* ]]
	[ "$(grep -c '^replica n[123]: current' <<<"$output")" -eq 2 ]
}

@test "stream init refuses an existing stream with other replicas, or one that could delete unapplied messages (78, naming the setting)" {
	# created with replicas 1 by a flow that said so (accepting the loss
	# of what one server acknowledged and had not synced) ...
	jetstream_flow "$TEST_DIR/r1.yml" "replicas: 1" "accept_loss_on_broker_crash: true"
	run -0 trellara stream init --config "$TEST_DIR/r1.yml"
	# ... is not the stream a flow with 3 replicas asks for
	jetstream_flow "$FLOW_FILE"
	run -78 trellara stream init --config "$FLOW_FILE"
	[[ $output == *"JetStream stream \"$JS_STREAM\""*"replicas 1: the flow file asks for 3 (stream.replicas)"* ]]
	[[ $output == *'setting "replicas" of the existing stream is refused'* ]]
	# the refused stream is left as it was
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	jq -e '.replicas == 1' <<<"$output"

	# discard old with an age limit: JetStream could delete what applyd has not applied
	export JS_STREAM=${JS_STREAM}_OLD JS_SUBJECT=${JS_SUBJECT}.old
	run -0 "$PUBLISH" "$NATS_URLS" create "$JS_STREAM" "$JS_SUBJECT" 3 old 86400
	jetstream_flow "$FLOW_FILE"
	run -78 trellara stream init --config "$FLOW_FILE"
	[[ $output == *"discard old with max_age 24h: JetStream could delete messages applyd has not applied"* ]]
	[[ $output == *'setting "max_age"'* ]]

	# discard old without limits: refused too (a limit set later would delete)
	export JS_STREAM=${JS_STREAM}2 JS_SUBJECT=${JS_SUBJECT}2
	run -0 "$PUBLISH" "$NATS_URLS" create "$JS_STREAM" "$JS_SUBJECT" 3 old 0
	jetstream_flow "$FLOW_FILE"
	run -78 trellara stream init --config "$FLOW_FILE"
	[[ $output == *"discard old: JetStream could delete messages applyd has not applied"* ]]
	[[ $output == *'setting "discard"'* ]]
}

@test "inspect after 10 messages and a consumer that acked 4: last sequence 10, pending 6, ack floor 4" {
	jetstream_flow "$FLOW_FILE"
	run -0 trellara stream init --config "$FLOW_FILE"
	run -0 "$PUBLISH" "$NATS_URLS" publish "$JS_SUBJECT" 10
	run -0 "$PUBLISH" "$NATS_URLS" ack "$JS_STREAM" "$JS_SUBJECT" applyd 4
	run -0 --separate-stderr inspect_json
	jq -e '.messages == 10 and .first_sequence == 1 and .last_sequence == 10 and .bytes > 0
		and (.consumers | length) == 1
		and .consumers[0].name == "applyd" and .consumers[0].pending == 6
		and .consumers[0].ack_pending == 0 and .consumers[0].ack_floor_sequence == 4
		and .consumers[0].delivered_sequence == 4' <<<"$output"
	run -0 --separate-stderr trellara stream inspect --config "$FLOW_FILE"
	[[ $output == *"last sequence:     10"* ]]
	[[ $output == *"consumer applyd: pending 6, ack pending 0, ack floor 4, delivered 4"* ]]
}

@test "one node killed: inspect answers (a replica not current); two killed: 69, quorum lost, within 10 s; restarted: it answers again" {
	local leader first second t0 elapsed
	jetstream_flow "$FLOW_FILE"
	run -0 trellara stream init --config "$FLOW_FILE"
	run -0 --separate-stderr inspect_json
	leader=$(jq -r .leader <<<"$output")

	# the stream's leader killed: another is elected, writes go on
	first=$(node_of "$leader")
	trellara_nats_node_stop "$first"
	wait_for -t 30 -m "a new leader for the stream" \
		"trellara stream inspect --config '$FLOW_FILE' --format json | jq -e '.leader != \"$leader\"'"
	run -0 "$PUBLISH" "$NATS_URLS" publish "$JS_SUBJECT" 3
	wait_for -t 30 -m "inspect to show the killed replica not current" \
		"trellara stream inspect --config '$FLOW_FILE' --format json |
			jq -e '.last_sequence == 3 and ([.peers[] | select(.name == \"$leader\" and (.current | not))] | length) == 1'"

	# a second node killed (the new leader): no quorum (the leader read
	# again until inspect answers: with one node down, a loaded machine
	# can see the meta leader's answer time out once)
	wait_for -t 30 -m "inspect to name the new leader" "inspect_json >'$TEST_DIR/inspect.json'"
	second=$(node_of "$(jq -r .leader "$TEST_DIR/inspect.json")")
	trellara_nats_node_stop "$second"
	t0=$EPOCHREALTIME
	run -69 trellara stream inspect --config "$FLOW_FILE" --format json
	elapsed=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000000))
	echo "inspect took ${elapsed}s: $output"
	((elapsed <= 10))
	[[ $output == *"JetStream stream \"$JS_STREAM\": the stream's info cannot be had"* ]]
	[[ $output == *"quorum lost"* ]]
	[[ $output != *'"stream"'* ]] # nothing on stdout
	# init says the same rather than creating anything
	run -69 trellara stream init --config "$FLOW_FILE"
	[[ $output == *"quorum lost"* ]]

	# both back (same ports, same stores): the stream answers, nothing lost
	trellara_nats_node_start "$first"
	trellara_nats_node_start "$second"
	wait_for -t 60 -m "the stream to answer again" \
		"trellara stream inspect --config '$FLOW_FILE' --format json | jq -e '.last_sequence == 3 and .leader != null'"
}

@test "the local stream's commands refuse a jetstream flow (78) naming inspect and retention; a local flow gets init's and inspect's hints (78)" {
	jetstream_flow "$FLOW_FILE"
	# capture reads a jetstream flow: a stream not created is 78, with init's hint
	run -78 trellara-capture --config "$FLOW_FILE" --start-now
	[[ $output == *"JetStream stream \"$JS_STREAM\" on nats://"*"does not exist"* ]]
	[[ $output == *"trellara stream init --config"* ]]
	run -78 trellara stream inspect-local --config "$FLOW_FILE"
	[[ $output == *"stream.kind is \"jetstream\": this trellara-stream command reads a local stream's files"* ]]
	[[ $output == *"trellara stream inspect --config $FLOW_FILE"* ]]
	run -78 trellara stream read --config "$FLOW_FILE"
	[[ $output == *"reads a local stream's files"* ]]
	# trellara config reads it
	run -0 trellara config get stream.name --config "$FLOW_FILE"
	[[ $output == *"$JS_STREAM"* ]]

	write_flow_file "$TEST_DIR/local.yml"
	run -78 trellara stream inspect --config "$TEST_DIR/local.yml"
	[[ $output == *'stream.kind is "local"'* ]]
	[[ $output == *'use "trellara stream inspect-local --config'* ]]
	run -78 trellara stream init --config "$TEST_DIR/local.yml"
	[[ $output == *"a local stream needs no init"* ]]
	# and init and inspect take a flow file only
	run -64 trellara stream inspect --dir "$STREAM_DIR"
	[[ $output == *"inspect needs --config FILE"* ]]
}

@test "servers unreachable: init and inspect exit 69 naming the servers; the credentials are never printed" {
	local dead port
	dead="nats://127.0.0.1:$(_nats_port 1 client)"
	# a port nothing listens on, next to the cluster's (checked free)
	for ((port = NATS_BASE_PORT + 9; port < NATS_BASE_PORT + 40; port++)); do
		_nats_port_free "$port" && break
	done
	export TRELLARA_TEST_NATS_SECRET="trellara:Hunter2-Secret-Pw"
	write_flow_file "$FLOW_FILE" "$(nats_stream_yaml "$JS_STREAM" "$JS_SUBJECT" |
		sed "s|servers: .*|servers: [nats://127.0.0.1:$port]|")
  credentials: {source: environment_variable, name: TRELLARA_TEST_NATS_SECRET}"
	run -69 --separate-stderr trellara stream init --config "$FLOW_FILE"
	[[ $stderr == *"cannot connect to the JetStream servers nats://127.0.0.1:$port"* ]]
	[[ "$output$stderr" != *Hunter2* ]]
	run -69 --separate-stderr trellara stream inspect --config "$FLOW_FILE" --format json
	[[ $stderr == *"nats://127.0.0.1:$port"* ]]
	[ -z "$output" ]
	[[ "$output$stderr" != *Hunter2* ]]
	# with -v too
	run -69 trellara stream inspect --config "$FLOW_FILE" -vv
	[[ $output != *Hunter2* ]]

	# the cluster requires no credentials: they are sent and ignored; a
	# token (no ":") the same, and never printed either
	export TRELLARA_TEST_NATS_SECRET="Hunter2-Token"
	write_flow_file "$FLOW_FILE" "$(nats_stream_yaml "$JS_STREAM" "$JS_SUBJECT")
  credentials: {source: environment_variable, name: TRELLARA_TEST_NATS_SECRET}"
	run -66 trellara stream inspect --config "$FLOW_FILE" -vv
	[[ $output == *"does not exist on $dead"* ]]
	[[ $output != *Hunter2* ]]
}

@test "fewer than three replicas without accepting the loss by name: every program refuses the flow (78, naming the key and the one that accepts it); nothing is created" {
	local r
	for r in 1 2; do
		jetstream_flow "$TEST_DIR/r$r.yml" "replicas: $r"
		run -78 --separate-stderr trellara stream init --config "$TEST_DIR/r$r.yml"
		[[ $stderr == *"key \"stream.replicas\" is $r: a message JetStream acknowledged is on fewer than 3 servers"* ]]
		[[ $stderr == *"stream.accept_loss_on_broker_crash: true"* ]]
		run -78 --separate-stderr trellara-capture --config "$TEST_DIR/r$r.yml"
		[[ $stderr == *"key \"stream.replicas\" is $r"* ]]
	done
	# no stream was made: the same stream with 3 replicas does not exist
	jetstream_flow "$FLOW_FILE"
	run -66 inspect_json
	# accepted by name: loaded (and a local stream takes no such key)
	jetstream_flow "$TEST_DIR/r1.yml" "replicas: 1" "accept_loss_on_broker_crash: true"
	run -0 trellara-config get stream.replicas --config "$TEST_DIR/r1.yml"
	[ "$output" = 1 ]
	write_flow_file "$TEST_DIR/local.yml" --set stream.accept_loss_on_broker_crash=true
	run -78 --separate-stderr trellara-config get stream.kind --config "$TEST_DIR/local.yml"
	[[ $stderr == *'key "stream.accept_loss_on_broker_crash" does not go with stream.kind "local"'* ]]
}

# shellcheck shell=bash
#
# nats.bash - a 3-node NATS JetStream cluster per test file, for the tests
# of stream.kind jetstream:
#
#   load helpers/nats
#   setup_file() { trellara_nats_cluster_start; }
#   teardown_file() { trellara_nats_cluster_stop; }
#
# PER TEST FILE: three nats-server processes (n1, n2, n3; cluster name
# trellara-bats) on 127.0.0.1, each with -js, its own store under
# $BATS_FILE_TMPDIR/nats/nI, and routes to the other two.  Ports: a random
# block of nine (client, cluster, monitoring for each node), checked free,
# and the whole cluster started again on another block when a node cannot
# bind (at most 5 blocks), so that two files never share a port.  The
# cluster is ready when every node's monitoring endpoint (/jsz) names a
# JetStream meta leader and a cluster of 3.  trellara_nats_cluster_stop
# SIGKILLs every node; bats runs teardown_file also when setup_file or a
# test fails, and a watchdog in its own session kills the nodes within a
# second or two if the bats process dies by SIGKILL: no nats-server
# outlives the file.
#
# Environment (exported):
#   NATS_DIR            $BATS_FILE_TMPDIR/nats: nI/{store,server.log,pid,ports}
#   NATS_URLS           "nats://127.0.0.1:P1,nats://127.0.0.1:P2,..." (for tools
#                       that take a comma-separated list)
#   NATS_SERVERS_YAML   "[nats://127.0.0.1:P1, ...]", stream.servers of a flow file
#
# Functions:
#   trellara_nats_cluster_start    trellara_nats_cluster_stop
#   trellara_nats_node_stop I      SIGKILL node I (1..3), waits until it is gone
#   trellara_nats_node_start I     node I again: same ports, same store
#   trellara_nats_wait_ready [SECONDS]   every running node sees a meta leader
#   nats_stream_yaml NAME SUBJECT [KEY: VALUE]...   a flow file's stream: section
#                       for this cluster (write_flow_file's EXTRA_YAML)
#   nats_http PORT PATH  GET from a monitoring port (bash's /dev/tcp: no curl needed)
#   trellara_nats_need_publish   setup_file: fails naming $PUBLISH when it is not built
#
# PUBLISH is build/tests/jetstream_publish, the test driver that creates
# streams, publishes, acks and dumps a stream's messages as frames.

NATS_NODES=3
PUBLISH=$REPO/build/tests/jetstream_publish

trellara_nats_need_publish() {
	[[ -x $PUBLISH ]] || {
		echo "$PUBLISH is missing: run \"make build/tests/jetstream_publish\" (make bats builds it)" >&2
		return 1
	}
}

# nats_http PORT PATH: the body of GET PATH on 127.0.0.1:PORT.
nats_http() {
	local port=$1 path=$2 fd line
	exec {fd}<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&"$fd"
	# the headers end at the first empty line
	while IFS= read -r -t 5 line <&"$fd"; do
		[[ $line == $'\r' || -z $line ]] && break
	done
	cat <&"$fd"
	exec {fd}<&-
}

_nats_port_free() {
	! (exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# _nats_port NODE KIND: the node's port of KIND (client, cluster, monitor)
_nats_port() {
	local i=$1 kind=$2 offset
	case $kind in client) offset=0 ;; cluster) offset=1 ;; monitor) offset=2 ;; esac
	echo $((NATS_BASE_PORT + (i - 1) * 3 + offset))
}

_nats_pid() {
	local pid
	read -r pid 2>/dev/null <"$NATS_DIR/n$1/pid" || return 1
	# the pid is still our node (not reused): its command line names its store
	{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$NATS_DIR/n$1/store" || return 1
	echo "$pid"
}

trellara_nats_node_start() {
	local i=${1:?trellara_nats_node_start: node number required} j routes=""
	for ((j = 1; j <= NATS_NODES; j++)); do
		((j == i)) || routes+="${routes:+,}nats://127.0.0.1:$(_nats_port "$j" cluster)"
	done
	mkdir -p "$NATS_DIR/n$i/store" || return 1
	# started from a subshell: not a job of the test's shell (no "Killed"
	# notices when a test kills it), the pid file says which process it is
	(
		nats-server -a 127.0.0.1 -p "$(_nats_port "$i" client)" -m "$(_nats_port "$i" monitor)" \
			--cluster "nats://127.0.0.1:$(_nats_port "$i" cluster)" --cluster_name trellara-bats \
			--routes "$routes" -n "n$i" -js -sd "$NATS_DIR/n$i/store" \
			</dev/null >>"$NATS_DIR/n$i/server.log" 2>&1 3>&- &
		echo $! >"$NATS_DIR/n$i/pid"
	)
}

trellara_nats_node_stop() {
	local i=${1:?trellara_nats_node_stop: node number required} pid
	pid=$(_nats_pid "$i") || return 0
	kill -KILL "$pid" 2>/dev/null
	wait_for -t 10 -m "node n$i (pid $pid) to exit" "! kill -0 $pid 2>/dev/null"
}

# trellara_nats_wait_ready [SECONDS]: every running node answers /jsz with
# a meta leader.
trellara_nats_wait_ready() {
	local timeout=${1:-30} i probe=""
	for ((i = 1; i <= NATS_NODES; i++)); do
		_nats_pid "$i" >/dev/null || continue
		probe+="nats_http $(_nats_port "$i" monitor) /jsz | jq -e '.meta_cluster.leader // empty | length > 0' >/dev/null && "
	done
	wait_for -t "$timeout" -m "a JetStream meta leader on every running node" "${probe}true"
}

_nats_watchdog() {
	local owner=$1 dir=$2 i pid
	trap '' INT TERM HUP
	while [[ -d $dir ]] && kill -0 "$owner" 2>/dev/null; do
		sleep 1
	done
	for i in "$dir"/n*/pid; do
		read -r pid 2>/dev/null <"$i" || continue
		{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "${i%/pid}/store" && kill -KILL "$pid"
	done
	exit 0
}

trellara_nats_cluster_start() {
	command -v nats-server >/dev/null || {
		echo "nats-server is not installed (hint: scripts/install-deps.sh as root)" >&2
		return 1
	}
	export NATS_DIR=$BATS_FILE_TMPDIR/nats
	mkdir -p "$NATS_DIR" || return 1
	local attempt i p ok urls="" yaml=""
	for ((attempt = 1; attempt <= 5; attempt++)); do
		export NATS_BASE_PORT=$((20000 + (RANDOM * 32768 + RANDOM + $$) % 4000 * 9))
		ok=1
		for ((p = NATS_BASE_PORT; p < NATS_BASE_PORT + NATS_NODES * 3; p++)); do
			_nats_port_free "$p" || ok=0
		done
		((ok)) || continue
		rm -rf "${NATS_DIR:?}"/n*
		for ((i = 1; i <= NATS_NODES; i++)); do
			trellara_nats_node_start "$i" || return 1
		done
		if trellara_nats_wait_ready 30 2>"$NATS_DIR/wait.err"; then
			break
		fi
		# a node that could not bind its ports: another block
		for ((i = 1; i <= NATS_NODES; i++)); do
			trellara_nats_node_stop "$i"
		done
		ok=0
	done
	if ((!ok)); then
		echo "could not start a 3-node JetStream cluster (5 port blocks tried)" >&2
		cat "$NATS_DIR/wait.err" "$NATS_DIR"/n*/server.log >&2
		trellara_nats_cluster_stop
		return 1
	fi
	# the watchdog: kills the nodes should bats die without teardown_file
	(setsid -f bash -c "$(declare -f _nats_watchdog); _nats_watchdog $$ '$NATS_DIR'" \
		</dev/null >/dev/null 2>&1 3>&- &)
	for ((i = 1; i <= NATS_NODES; i++)); do
		urls+="${urls:+,}nats://127.0.0.1:$(_nats_port "$i" client)"
		yaml+="${yaml:+, }nats://127.0.0.1:$(_nats_port "$i" client)"
	done
	export NATS_URLS=$urls NATS_SERVERS_YAML="[$yaml]"
}

trellara_nats_cluster_stop() {
	[[ -n ${NATS_DIR:-} && -d $NATS_DIR ]] || return 0
	local i
	for ((i = 1; i <= NATS_NODES; i++)); do
		trellara_nats_node_stop "$i" || true
	done
	# the watchdog sees the directory gone and exits
	rm -rf "$NATS_DIR"
	return 0
}

# nats_stream_yaml NAME SUBJECT [EXTRA_LINE]...: the stream: section of a
# flow file on this cluster; each EXTRA_LINE ("replicas: 1") is added as is.
nats_stream_yaml() {
	local name=$1 subject=$2 line
	shift 2
	printf 'stream:\n  kind: jetstream\n  servers: %s\n  name: %s\n  subject: %s\n' \
		"$NATS_SERVERS_YAML" "$name" "$subject"
	for line in "$@"; do
		printf '  %s\n' "$line"
	done
}

# shellcheck shell=bash
#
# pg.bash - throwaway PostgreSQL clusters for the bats tests.
#
# Sourced by common.bash (the bats-facing API); knows nothing of bats
# itself, so it can also be run by hand:
#
#   bash tests/bats/helpers/pg.bash reap     stop and remove clusters left by
#                                            crashed or killed test runs
#   bash tests/bats/helpers/pg.bash status   list harness directories and
#                                            whether their servers still run
#
# Layout.  Every test file gets one directory, mode 0755 (the clusters'
# OS user must traverse it):
#
#   $TRELLARA_TEST_TMPDIR/trellara-bats.XXXXXX/
#     owner          "<pid> <start time>" of the bats process that owns it
#     watchdog.pid   background watcher: stops the clusters if the owner dies
#     sock/          unix_socket_directories of both clusters (no TCP at all)
#     source/ target/  the data directories (server.log inside)
#     source.bindir target.bindir  the bin directory each cluster runs from
#     tests/<n>/     per-test TEST_DIR, mode 0700
#
# The clusters are copies (cp -a) of one pristine initdb'd template, made
# once per PostgreSQL bin directory, version and user under
# $TRELLARA_TEST_TMPDIR/trellara-pgtemplate-<major>-<hash>/ and guarded by
# flock, so parallel runs never race to create it.
#
# Server binaries: PG_SOURCE_BINDIR and PG_TARGET_BINDIR (both default to
# PG_BINDIR, default /usr/lib/postgresql/15/bin) run the source and the
# target cluster, so the two may be different major versions (make
# check-matrix: source 15, target 18).  Each cluster records its bin
# directory next to it (source.bindir, target.bindir), so stopping or
# reaping it uses its own pg_ctl.  The client tools (psql, pgbench,
# pg_dump) come from PG_BINDIR or PATH, never from the servers' bin
# directories (the embedded servers of scripts/install-deps.sh --pg-majors
# have none); those binaries find their libraries through their own
# RUNPATH ($ORIGIN/../lib), so no LD_LIBRARY_PATH is set.  A cluster is "stale"
# when the process named in its directory's owner file is gone (or is a
# different process with the same pid: the start time is compared);
# trellara_pg_reap_stale stops such clusters (pg_ctl -m immediate, then
# SIGKILL) and removes the directory.
#
# Running as root: initdb refuses root, so the clusters belong to
# $TRELLARA_PG_OS_USER (default postgres) and pg_ctl runs through runuser.
# The bootstrap superuser is named after the user running the tests
# (root, or you), so psql and the Trellara programs connect without a user
# name in their URLs.
#
# Speed over crash safety: fsync=off.  These clusters are deleted after
# each test file; fsync only matters if the operating system itself
# crashes, and a server crash or `pg_ctl -m immediate` (which tests may
# use) is still recovered correctly from the OS page cache.

: "${PG_BINDIR:=/usr/lib/postgresql/15/bin}"
: "${PG_SOURCE_BINDIR:=$PG_BINDIR}"
: "${PG_TARGET_BINDIR:=$PG_BINDIR}"
: "${TRELLARA_PG_OS_USER:=postgres}"
export PG_BINDIR PG_SOURCE_BINDIR PG_TARGET_BINDIR
TRELLARA_PG_BASH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pg.bash

# Bump when the template's settings change: the cache key includes it.
TRELLARA_PG_TEMPLATE_VERSION=4

_trellara_pg_die() {
	printf 'pg harness: %s\n' "$*" >&2
	return 1
}

# The psql to use: the one matching the servers if PG_BINDIR has it (the
# Debian /usr/bin/psql wrapper costs a Perl start per call), else PATH's.
trellara_pg_psql_bin() {
	if [[ -x "$PG_BINDIR/psql" ]]; then
		printf '%s\n' "$PG_BINDIR/psql"
	else
		command -v psql || _trellara_pg_die "psql not found in $PG_BINDIR or PATH"
	fi
}

# trellara_pg_check_bindir [BINDIR [VARIABLE]]: BINDIR (default
# PG_BINDIR) has the server programs; VARIABLE names the setting to fix.
trellara_pg_check_bindir() {
	local bindir=${1:-$PG_BINDIR} var=${2:-PG_BINDIR} tool
	for tool in initdb pg_ctl postgres; do
		[[ -x "$bindir/$tool" ]] || {
			_trellara_pg_die "$bindir/$tool not found; set $var to a PostgreSQL bin directory" \
				"(hint: run scripts/install-deps.sh as root; --pg-majors \"16 17 18\" for other majors)"
			return 1
		}
	done
}

# trellara_pg_version [BINDIR]: "15.18 (Debian 15.18-0+deb12u1)" etc.:
# what BINDIR's (default PG_BINDIR) `postgres --version` says after
# "postgres (PostgreSQL) ".
trellara_pg_version() {
	local v
	v=$("${1:-$PG_BINDIR}/postgres" --version) || return 1
	printf '%s\n' "${v#postgres (PostgreSQL) }"
}

# trellara_pg_major [BINDIR]: 15, 18, ...
trellara_pg_major() {
	local v
	v=$(trellara_pg_version "${1:-$PG_BINDIR}") || return 1
	printf '%s\n' "${v%%[!0-9]*}"
}

_trellara_pg_is_root() { [[ $(id -u) -eq 0 ]]; }

# Run a command as the clusters' OS user, from /, with every file
# descriptor above 2 closed: a postmaster that inherited bats' fd 3 (or any
# pipe) would keep bats waiting for EOF long after the test ended.
trellara_pg_as_owner() (
	_trellara_pg_detach
	cd / || exit 1
	if _trellara_pg_is_root; then
		exec runuser -u "$TRELLARA_PG_OS_USER" -- "$@"
	else
		exec "$@"
	fi
)

# In a subshell: drop bats' tracing.  bats runs a DEBUG trap before every
# command of every function (set -T); a loop of a few thousand commands
# (the CRC below) then takes seconds instead of milliseconds.
_trellara_pg_untrace() {
	trap - DEBUG ERR RETURN
	set +ETx
}

# For a subshell that outlives the caller or runs a long program: drop the
# traps and options inherited from bats (its TERM/ERR/EXIT handling must
# not run in a child), then close every descriptor above 2.
_trellara_pg_detach() {
	trap - DEBUG ERR EXIT RETURN INT TERM HUP QUIT
	set +eEuTx +o pipefail
	_trellara_pg_close_fds
}

_trellara_pg_close_fds() {
	local fd
	for fd in "/proc/$BASHPID/fd"/*; do
		fd=${fd##*/}
		[[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
	done
	return 0
}

# The directory under which the harness puts everything.  It must be
# traversable by the clusters' OS user, and short: a unix socket path
# (dir + "/trellara-bats.XXXXXX/sock/.s.PGSQL.NNNNN") must fit in 107 bytes.
trellara_pg_tmp_root() {
	local root=${TRELLARA_TEST_TMPDIR:-${TMPDIR:-/tmp}}
	root=${root%/}
	[[ -n $root ]] || root=/tmp
	if [[ $root != /* || ! -d $root || ${#root} -gt 60 ]]; then
		root=/tmp
	elif _trellara_pg_is_root && ! runuser -u "$TRELLARA_PG_OS_USER" -- test -x "$root" 2>/dev/null; then
		root=/tmp
	fi
	printf '%s\n' "$root"
}

# "<pid> <start time in clock ticks>" of a live process, or nothing.
_trellara_pg_proc_identity() {
	local pid=$1 stat
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	# Not stat=$(<file): a failed redirection there aborts a `set -e`
	# caller (bats) even behind `|| return`.
	read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
	stat=${stat##*) }
	local -a f
	read -ra f <<<"$stat"
	[[ ${f[0]} != Z ]] || return 1 # a zombie is gone
	printf '%s %s\n' "$pid" "${f[19]}"
}

# ---------------------------------------------------------------- template

# trellara_pg_template [BINDIR]: print the template data directory of
# BINDIR's (default PG_BINDIR) server, creating it first if needed.
trellara_pg_template() (
	_trellara_pg_untrace
	local bindir=${1:-$PG_BINDIR} root major version key cache lockfd superuser
	root=$(trellara_pg_tmp_root) || return 1
	version=$(trellara_pg_version "$bindir") || return 1
	major=${version%%[!0-9]*}
	superuser=$(id -un)
	key=$(printf '%s\n' "$(id -u)" "$superuser" "$TRELLARA_PG_OS_USER" "$bindir" \
		"$version" "$TRELLARA_PG_TEMPLATE_VERSION" | sha256sum)
	cache="$root/trellara-pgtemplate-$major-${key:0:12}"

	if [[ -f $cache/complete && -f $cache/data/PG_VERSION && -O $cache ]]; then
		touch "$cache" 2>/dev/null # in use: keep it from the weekly pruning
		printf '%s\n' "$cache/data"
		return 0
	fi

	exec {lockfd}>>"$cache.lock" || return 1
	if ! flock -w 300 "$lockfd"; then
		exec {lockfd}>&-
		_trellara_pg_die "timed out waiting for the template lock $cache.lock"
		return 1
	fi
	if ! [[ -f $cache/complete && -f $cache/data/PG_VERSION && -O $cache ]]; then
		_trellara_pg_make_template "$cache" "$superuser" "$bindir" >&2 || {
			exec {lockfd}>&-
			return 1
		}
	fi
	exec {lockfd}>&-
	printf '%s\n' "$cache/data"
)

_trellara_pg_make_template() {
	local cache=$1 superuser=$2 bindir=$3 data
	# Templates of older harness versions or servers, unused for a week.
	find "${cache%/*}" -maxdepth 1 -name 'trellara-pgtemplate-*' -user "$(id -u)" -mtime +7 \
		-exec rm -rf {} + 2>/dev/null
	rm -rf "$cache" || return 1
	mkdir -m 0755 "$cache" || return 1
	data="$cache/data"
	mkdir -m 0700 "$data" || return 1
	if _trellara_pg_is_root; then
		chown "$TRELLARA_PG_OS_USER:" "$data" || return 1
	fi
	if ! trellara_pg_as_owner "$bindir/initdb" -D "$data" -U "$superuser" \
		--auth=trust --encoding=UTF8 --locale=C --no-sync --no-instructions \
		>"$cache/initdb.log" 2>&1; then
		cat "$cache/initdb.log" >&2
		_trellara_pg_die "initdb failed (log: $cache/initdb.log)"
		return 1
	fi
	# Unix sockets only; trust, including replication connections.
	printf '%s\n' \
		'# trellara test harness: unix sockets only, trust' \
		'local all all trust' \
		'local replication all trust' >"$data/pg_hba.conf" || return 1
	cat >>"$data/postgresql.conf" <<'EOF' || return 1

# ---- trellara test harness (tests/bats/helpers/pg.bash) ----
listen_addresses = ''                 # unix sockets only: no TCP, no port clashes
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
logical_decoding_work_mem = '64kB'    # small: exercises streamed transactions
shared_buffers = '128MB'
max_connections = 100
fsync = off                           # throwaway clusters; see pg.bash
timezone = 'UTC'
log_timezone = 'UTC'
lc_messages = 'C'
log_line_prefix = '%m [%p] %q%a@%d '
log_checkpoints = off                 # CREATE DATABASE checkpoints would drown the logs
EOF
	touch "$cache/complete"
}

# ---------------------------------------------------------------- clusters

# trellara_pg_create DIR PORT SOCKDIR NAME [BINDIR]: copy the template of
# BINDIR's server (default PG_BINDIR) to DIR, give the copy its own system
# identifier, and configure it to listen on SOCKDIR/.s.PGSQL.PORT only.
# DIR.bindir records BINDIR for trellara_pg_start and trellara_pg_stop.
trellara_pg_create() (
	_trellara_pg_untrace
	local dir=$1 port=$2 sockdir=$3 name=$4 bindir=${5:-$PG_BINDIR} template
	template=$(trellara_pg_template "$bindir") || return 1
	printf '%s\n' "$bindir" >"$dir.bindir" || return 1
	cp -a "$template" "$dir" || return 1
	trellara_pg_set_system_identifier "$dir" "$(_trellara_pg_new_sysid)" || return 1
	cat >>"$dir/postgresql.conf" <<EOF || return 1
port = $port
unix_socket_directories = '$sockdir'
cluster_name = 'trellara-test-$name'
EOF
)

# The bin directory a cluster was created with (DIR.bindir), else PG_BINDIR.
trellara_pg_bindir_of() {
	local bindir=
	read -r bindir 2>/dev/null <"$1.bindir" || bindir=
	printf '%s\n' "${bindir:-$PG_BINDIR}"
}

trellara_pg_start() {
	local dir=$1 bindir
	bindir=$(trellara_pg_bindir_of "$dir")
	if ! trellara_pg_as_owner "$bindir/pg_ctl" -w -t 60 -D "$dir" -l "$dir/server.log" \
		start >/dev/null 2>"$dir/pg_ctl.err"; then
		cat "$dir/pg_ctl.err" >&2
		tail -n 20 "$dir/server.log" >&2 2>/dev/null
		_trellara_pg_die "could not start the cluster in $dir"
		return 1
	fi
}

# ------------------------------------------------------ system identifier
#
# Copies of one template would all share the template's system identifier,
# and Trellara checks the source's identity (IDENTIFY_SYSTEM): a test that
# points capture at the wrong cluster must see a *different* identifier.
# So every copy gets a fresh one, the way initdb makes it (seconds << 32 |
# microseconds << 12 | 12 random bits), written where PostgreSQL keeps it:
#   global/pg_control   bytes 0..7, covered by the CRC-32C stored right
#                       after the ControlFileData fields (found, not assumed:
#                       the 4-aligned offset L where crc32c(bytes[0,L)) equals
#                       the 4 bytes at L)
#   pg_wal/<segment>    xlp_sysid of the long page header at byte 24 of each
#                       segment (checked to hold the old identifier first)
# All values little-endian (x86_64, aarch64).  Only on a cleanly shut-down
# copy, before its first start.

_trellara_pg_new_sysid() {
	local now=$EPOCHREALTIME
	printf '%s\n' "$(((${now%.*} << 32) | (10#${now#*.} << 12) | ((RANDOM ^ BASHPID) & 0xFFF)))"
}

_trellara_pg_crc32c() { # CRC BYTE... -> updated (unfinalized) CRC
	local crc=$1 b
	shift
	for b; do
		((crc ^= b))
		for _ in 0 1 2 3 4 5 6 7; do
			((crc = (crc >> 1) ^ (-(crc & 1) & 0x82F63B78)))
		done
	done
	printf '%s\n' "$crc"
}

# _trellara_pg_write_le FILE OFFSET NBYTES VALUE
_trellara_pg_write_le() {
	local file=$1 offset=$2 n=$3 value=$4 i esc=""
	for ((i = 0; i < n; i++)); do
		esc+=$(printf '\\%03o' $(((value >> (8 * i)) & 255)))
	done
	# shellcheck disable=SC2059
	printf "$esc" | dd of="$file" bs=1 seek="$offset" conv=notrunc status=none
}

trellara_pg_set_system_identifier() (
	_trellara_pg_untrace
	local dir=$1 new=$2 ctl="$1/global/pg_control" seg
	local -a b
	# shellcheck disable=SC2207
	b=($(od -An -tu1 -v -N 512 "$ctl")) || return 1
	((${#b[@]} == 512)) || { _trellara_pg_die "$ctl: too short"; return 1; }
	local old=0 i crc=$((0xFFFFFFFF)) len=0
	for ((i = 7; i >= 0; i--)); do ((old = (old << 8) | b[i])); done
	for ((i = 0; i < 504; i++)); do
		((crc ^= b[i]))
		for _ in 0 1 2 3 4 5 6 7; do ((crc = (crc >> 1) ^ (-(crc & 1) & 0x82F63B78))); done
		if (((i + 1) % 4 == 0 && i >= 15)) &&
			(((crc ^ 0xFFFFFFFF) == (b[i + 1] | b[i + 2] << 8 | b[i + 3] << 16 | b[i + 4] << 24))); then
			len=$((i + 1))
			break
		fi
	done
	((len > 0)) || { _trellara_pg_die "$ctl: cannot find its CRC"; return 1; }
	for ((i = 0; i < 8; i++)); do b[i]=$(((new >> (8 * i)) & 255)); done
	crc=$(_trellara_pg_crc32c $((0xFFFFFFFF)) "${b[@]:0:len}")
	_trellara_pg_write_le "$ctl" 0 8 "$new" || return 1
	_trellara_pg_write_le "$ctl" "$len" 4 $((crc ^ 0xFFFFFFFF)) || return 1
	for seg in "$dir"/pg_wal/[0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]*; do
		[[ -f $seg ]] || continue
		[[ $(od -An -tu8 -j 24 -N 8 "$seg" | tr -d ' ') == "$old" ]] || {
			_trellara_pg_die "$seg: no system identifier $old at byte 24"
			return 1
		}
		_trellara_pg_write_le "$seg" 24 8 "$new" || return 1
	done
)

# ---------------------------------------------------------------- stop

# Stop a cluster right away (its data is disposable), then make sure its
# postmaster is really gone.  Never fails when there is nothing to stop.
trellara_pg_stop() {
	local dir=$1 pid bindir
	[[ -f $dir/postmaster.pid ]] || return 0
	pid=$(head -n 1 "$dir/postmaster.pid" 2>/dev/null)
	bindir=$(trellara_pg_bindir_of "$dir")
	trellara_pg_as_owner "$bindir/pg_ctl" -D "$dir" -m immediate -w -t 30 stop \
		>/dev/null 2>&1
	if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		[[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$(cd "$dir" && pwd -P)" ]]; then
		kill -KILL "$pid" 2>/dev/null
	fi
	return 0
}

# Stop the clusters of a harness directory (source, target, and any other
# a test made there, such as a standby: every DIR with a DIR.bindir) in
# parallel, and remove it.
trellara_pg_destroy_dir() (
	_trellara_pg_untrace
	local fdir=$1 keep=${2:-} d
	[[ -d $fdir ]] || return 0
	local -A dirs=(["$fdir/source"]=1 ["$fdir/target"]=1)
	for d in "$fdir"/*.bindir; do
		[[ -f $d ]] && dirs[${d%.bindir}]=1
	done
	for d in "${!dirs[@]}"; do
		trellara_pg_stop "$d" &
	done
	wait
	if [[ -z $keep ]]; then
		rm -rf "$fdir"
	fi
)

# Stop and remove harness directories whose owner process is gone.
trellara_pg_reap_stale() (
	_trellara_pg_untrace
	local root=${1:-$(trellara_pg_tmp_root)} fdir owner identity
	for fdir in "$root"/trellara-bats.*; do
		[[ -d $fdir && -O $fdir ]] || continue
		if [[ -f $fdir/owner ]]; then
			read -r owner 2>/dev/null <"$fdir/owner" || owner=
			identity=$(_trellara_pg_proc_identity "${owner%% *}") || identity=
			[[ $identity == "$owner" ]] && continue # still running
		else
			# Being created right now, or a crash before "owner" was
			# written: only reap it when it is old.
			[[ -n $(find "$fdir" -maxdepth 0 -mmin +10 2>/dev/null) ]] || continue
		fi
		printf 'pg harness: reaping stale test clusters in %s\n' "$fdir" >&2
		trellara_pg_destroy_dir "$fdir"
	done
)

trellara_pg_status() {
	local root=${1:-$(trellara_pg_tmp_root)} fdir d pid state
	for fdir in "$root"/trellara-bats.*; do
		[[ -d $fdir ]] || continue
		printf '%s owner=%s\n' "$fdir" "$(cat "$fdir/owner" 2>/dev/null)"
		for d in "$fdir"/source "$fdir"/target; do
			[[ -d $d ]] || continue
			state=stopped
			pid=$(head -n 1 "$d/postmaster.pid" 2>/dev/null)
			[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && state="running (pid $pid)"
			printf '  %s %s\n' "${d##*/}" "$state"
		done
	done
}

# Background watcher: once the owner process is gone (killed, even with
# SIGKILL), stop the clusters and remove the directory.  It runs in a
# session of its own (setsid), so a signal to bats' whole process group
# (Ctrl-C, a CI job being killed) does not take it down with bats; it
# ignores INT/TERM/HUP anyway, and exits by itself when the directory
# disappears (normal teardown removes it; teardown also SIGKILLs it, by
# the pid it writes to watchdog.pid).
trellara_pg_start_watchdog() {
	local fdir=$1 owner=$2 # owner: "<pid> <start time>", as in the owner file
	(
		_trellara_pg_detach
		exec setsid -f bash "$TRELLARA_PG_BASH" watch "$fdir" "$owner"
	) </dev/null >/dev/null 2>&1
}

_trellara_pg_watch() {
	local fdir=$1 owner=$2
	trap '' INT TERM HUP
	printf '%s\n' "$$" >"$fdir/watchdog.pid"
	while [[ -d $fdir && $(_trellara_pg_proc_identity "${owner%% *}") == "$owner" ]]; do
		sleep 1
	done
	[[ -d $fdir ]] && trellara_pg_destroy_dir "$fdir"
	exit 0
}

# ------------------------------------------------------------- by hand

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	case ${1:-} in
	reap) trellara_pg_reap_stale "${2:-}" ;;
	watch) _trellara_pg_watch "$2" "$3" ;;
	status) trellara_pg_status "${2:-}" ;;
	*)
		printf 'usage: bash %s reap|status [DIR]\n' "$0" >&2
		exit 64
		;;
	esac
fi

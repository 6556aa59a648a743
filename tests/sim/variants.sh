#!/usr/bin/env bash
# variants.sh SCHEDULES NAME...: each deliberately broken variant
# (build/mutants/NAME/trellara-sim, built from tests/mutants/NAME.patch)
# must make the simulator FAIL within SCHEDULES random schedules plus the
# named scenarios, with an invariant tests/mutants/NAME.expect lists
# (one per line).  A simulator that passes a broken variant proves nothing.
set -u
schedules=$1
shift
rc=0
# the runs themselves, two at a time (the machine's cores), then their checks in order
running=0
for name in "$@"; do
	status_file=build/mutants/$name/run.status
	rm -f "$status_file"
	( s=0; build/mutants/$name/trellara-sim run --variant "$name" --seed 1 --schedules "$schedules" --format json \
		--output "build/mutants/$name/run.json" 2> /dev/null || s=$?; echo "$s" > "$status_file" ) &
	running=$((running + 1))
	if [ "$running" -ge 2 ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
for name in "$@"; do
	bin=build/mutants/$name/trellara-sim
	out=build/mutants/$name/run.json
	expect=tests/mutants/$name.expect
	# the variant binary refuses to run unnamed (exit 64): its results are
	# never the real code's
	unnamed=0
	"$bin" run --seed 1 --schedules 1 > /dev/null 2>&1 || unnamed=$?
	if [ "$unnamed" -ne 64 ]; then
		echo "variant $name: without --variant $name it did not refuse to run (exit $unnamed, not 64)" >&2
		rc=1
	fi
	status=$(cat "build/mutants/$name/run.status" 2> /dev/null || echo missing)
	if [ "$status" != 1 ]; then
		echo "variant $name: the simulator did not fail it (exit $status)" >&2
		rc=1
		continue
	fi
	# every invariant the run saw broken, from the schedules and the scenarios
	seen=$(jq -r '[.exploration.failures[].invariant, (.simulations[], .scenarios[] | select(.status == "fail") | .failed_invariant)] | unique | .[]' "$out")
	first=$(jq -r '.exploration.failures[0].seed // "none"' "$out")
	failed=$(jq -r '.exploration.failed' "$out")
	caught=""
	while read -r inv; do
		[ -n "$inv" ] && grep -qxF "$inv" <<<"$seen" && caught=$inv
	done < "$expect"
	if [ -z "$caught" ]; then
		echo "variant $name: failed, but not with an expected invariant; saw: $(tr '\n' ' ' <<<"$seen")" >&2
		rc=1
		continue
	fi
	echo "variant $name: caught ($caught; $failed of $schedules schedules failed, the first at seed $first)"
done
exit $rc

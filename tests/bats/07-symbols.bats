#!/usr/bin/env bats
#
# Every global symbol our objects define (the sub-libraries, the programs'
# modules and the simulator's) begins with its module's prefix, so that
# the split modules cannot collide with each other or with a library
# (a global "report" or "lookup" would).  A function used in one file is
# static instead.  No database needed; `make` must have built the objects.

bats_require_minimum_version 1.5.0

load helpers/nodb

# The prefixes, by where they belong.  A new module adds its own here.
PREFIXES=(
	main
	# common/base
	backoff_ base64_ cli_ clock_ config_ conninfo_ crc32c errbuf_ fault_ fs_ json_ jsonread_ jsonw_ log_ lsn_
	cutplan_ metrics_ notify_ opt_ run_ seq_ sqlstate_ strbuf_ utf8_
	xasprintf xcalloc xmalloc xrealloc xstrdup xstrndup
	# common/stream: the stream, its file systems, and its on-disk pieces
	stream_ sfs_ frame_ index_ segment_ jetstream_policy_
	# cmd/jetstream: the JetStream connection the programs on libnats share
	jetstream_session_
	# common/cdc: struct buf is envelope.h's byte buffer
	ack_policy_ ack_restart_point_ assembler_ buf_ capture_core_ env_ pgoutput_ relbind_ slot_policy_
	# common/apply
	apply_ chunk_set_ fold_ plan_
	# common/pg
	checkpoint_ cutover_ pgconn_ runs_ sequences_ snapfence_
	# cmd/
	applyd_ capture_ check_ contract_ copy_ cutcmd_ executor_ inspect_ repair_ seqcmd_ snapshot_ status_ tabledef_ target_pg_ verify_
	# sim/
	sim_ model_broker_ model_source_ model_target_
)

# unprefixed OBJECT...: "object: symbol" for each global symbol defined
# outside the prefixes
unprefixed() {
	local re
	re="^($(IFS='|'; echo "${PREFIXES[*]}"))"
	# -A: "OBJECT:ADDRESS TYPE SYMBOL" on every line
	nm -A -g --defined-only "$@" | awk -v re="$re" '
		NF == 3 && $3 !~ re { obj = $1; sub(/:[^:]*$/, "", obj); print obj ": " $3 }'
}

our_objects() {
	find "$REPO/build/obj/common" "$REPO/build/obj/cmd" "$REPO/build/obj/sim" -name '*.o' | sort
}

@test "every global symbol of our objects begins with its module's prefix" {
	local objs bad
	mapfile -t objs < <(our_objects)
	# the build is there: every sub-library, program and simulator module
	[ "${#objs[@]}" -ge "$(find "$REPO/common" "$REPO/cmd" "$REPO/sim" -name '*.c' | wc -l)" ]
	bad=$(unprefixed "${objs[@]}")
	if [ -n "$bad" ]; then
		printf 'global symbols without a module prefix (rename, or make static):\n%s\n' "$bad" >&2
		false
	fi
}

@test "the symbol check notices an unprefixed global and passes a prefixed or static one" {
	cat >"$TEST_DIR/t.c" <<-'EOF_C'
	int report(void);
	int report(void) { return 1; }
	int status_report(void);
	int status_report(void) { return 2; }
	static int lookup(void) { return 3; }
	int check_lookup(void);
	int check_lookup(void) { return lookup(); }
	EOF_C
	cc -c -o "$TEST_DIR/t.o" "$TEST_DIR/t.c"
	run -0 unprefixed "$TEST_DIR/t.o"
	[ "$output" = "$TEST_DIR/t.o: report" ]
}

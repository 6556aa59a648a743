#!/usr/bin/env bats
# The set-based statements (plan_change_set) on PostgreSQL itself: a run
# of inserts, updates or deletes by key as one multi-row statement,
# prepared and executed through applyd's executor with its row-count
# check, changes exactly the rows the per-row statements change, on odd
# names, composite keys, identity columns, partitioned tables, json and
# point columns, domains and enums; a wrong row count fails the
# transaction (TR001, TR002); values keep the per-row input semantics.
# build/tests/plan_set_emit drives the planner and the executor.

load helpers/common

setup() {
	trellara_setup
	EMIT=$REPO/build/tests/plan_set_emit
	[[ -x $EMIT ]] || {
		echo "$EMIT is not built (make build/tests/plan_set_emit)" >&2
		return 1
	}
}

# q NAME: NAME as a quoted identifier
q() {
	local doubled=${1//\"/\"\"}
	printf '"%s"' "$doubled"
}

# tab-separated spec line
ch() {
	local IFS=$'\t'
	printf '%s\n' "$*"
}

# rel SCHEMA TABLE PARTITIONED KEYS: the rel line and a col line for each
# column of the target table, from the catalog (format_type with the
# typmod, as the target writes it); KEYS = key column names, comma-separated
rel() {
	ch rel "$1" "$2" "$3"
	psql_target "SELECT concat_ws(E'\t', 'col', a.attname, a.atttypid,
		(a.attname = ANY (string_to_array('$4', ',')))::int, (a.attidentity = 'a')::int,
		format_type(a.atttypid, a.atttypmod))
		FROM pg_attribute a WHERE a.attrelid = format('%I.%I', '$1', '$2')::regclass
		AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
}

make_tables() {
	local s
	s=$(q "$1")
	psql_target "CREATE SCHEMA $s" \
		"CREATE TABLE $s.$(q 't "a"') (id int PRIMARY KEY, $(q 'na"me') text, j json, p point,
			e public.mood, d public.posint, v varchar(3), c char(4))" \
		"CREATE TABLE $s.comp (a int, b text, val numeric(10,2), note text, PRIMARY KEY (a, b))" \
		"CREATE TABLE $s.ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, n text)" \
		"CREATE TABLE $s.parted (k int PRIMARY KEY, v text) PARTITION BY RANGE (k)" \
		"CREATE TABLE $s.parted_1 PARTITION OF $s.parted FOR VALUES FROM (MINVALUE) TO (100)" \
		"CREATE TABLE $s.parted_2 PARTITION OF $s.parted FOR VALUES FROM (100) TO (MAXVALUE)" \
		"CREATE TABLE $s.nokey (j json, p point, n text)"
}

# spec SCHEMA set|row: inserts, updates, deletes on every table, each
# relation's run ended by MODE
spec() {
	local s=$1 m=$2
	rel "$s" 't "a"' 0 id
	rel "$s" comp 0 a,b
	rel "$s" ident 0 id
	rel "$s" parted 1 k
	rel "$s" nokey 0 j,p # a key the flow names (verify.primary_key): json and point, compared by text
	ch I 0 1 'a"b' '{"x": 1}' '(1,2)' happy 5 abc ab
	ch I 0 2 '\N' '\N' '\N' '\N' '\N' '\N' '\N'
	ch I 0 3 "it's" '[1,  2]' '(3,4)' sad 7 '' abcd
	ch "$m"
	ch I 1 1 x 1.005 '\N'
	ch I 1 1 y 2 n
	ch I 1 2 x 3.14159 m
	ch "$m"
	ch I 2 10 a
	ch I 2 20 b
	ch "$m"
	ch I 3 1 low
	ch I 3 150 high
	ch I 3 99 edge
	ch "$m"
	ch I 4 '{"k": 1}' '(1,1)' one
	ch I 4 '{"k": 2}' '(2,2)' two
	ch "$m"
	# updates: j not sent (unchanged TOAST)
	ch U 0 1 new '\U' '(9,9)' ok 6 xy z
	ch U 0 2 two '\U' '\N' sad 1 '\N' '\N'
	ch U 0 3 '\N' '\U' '(0,0)' happy 8 q qq
	ch "$m"
	ch U 1 1 x 9.999 u1
	ch U 1 2 x 0 '\N'
	ch "$m"
	ch U 2 10 A
	ch U 2 20 B
	ch "$m"
	ch U 3 1 LOW
	ch U 3 150 HIGH
	ch "$m"
	ch U 4 '{"k": 1}' '(1,1)' 'one!'
	ch U 4 '{"k": 2}' '(2,2)' 'two!'
	ch "$m"
	ch D 0 K 2 '\N' '\N' '\N' '\N' '\N' '\N' '\N'
	ch D 0 O 3 '\N' '\U' '(0,0)' happy 8 q 'qq  '
	ch "$m"
	ch D 1 K 1 y '\N' '\N'
	ch "$m"
	ch D 2 K 20 '\N'
	ch "$m"
	ch D 3 K 99 '\N'
	ch D 3 K 150 '\N'
	ch "$m"
	ch D 4 O '{"k": 2}' '(2,2)' 'two!'
	ch "$m"
}

# every table of schema S as text, rows sorted, with the partition of each
dump() {
	local t
	for t in 't "a"' comp ident parted nokey; do
		psql_target "SELECT format('%s: %s', (SELECT relname FROM pg_class WHERE oid = r.tableoid), r::text)
			FROM $(q "$1").$(q "$t") r ORDER BY 1"
	done
}

# types shared by both schemas
make_types() {
	psql_target "CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy')" \
		"CREATE DOMAIN public.posint AS int CHECK (VALUE > 0)"
}

@test "set statements change exactly the rows per-row statements change, on odd names, keys, identity, partitions and types" {
	make_types
	make_tables 'per row'
	make_tables 'set "s"'
	spec 'set "s"' set >"$TEST_DIR/set.spec"
	spec 'per row' row >"$TEST_DIR/row.spec"
	# every run became one statement (none fell back to one by one)
	run -0 "$EMIT" <"$TEST_DIR/set.spec"
	[[ $output != *"one by one"* ]]
	[[ $(grep -c '^-- rows' <<<"$output") == 15 ]]
	[[ $output == *'INSERT INTO "set ""s"""."ident" ("id", "n") OVERRIDING SYSTEM VALUE VALUES ($1, $2), ($3, $4)'* ]]
	[[ $output == *'UPDATE "set ""s"""."parted" AS t SET "v" = v."v" FROM'* ]]
	[[ $output == *'DELETE FROM ONLY "set ""s"""."comp" AS t USING (VALUES ($1::integer, $2::text)) AS v ("a", "b")'* ]]
	[[ $output == *'WHERE t."j"::text = v."j" AND t."p"::text = v."p"'* ]]
	# run both through the executor: each statement's row count exact
	run -0 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/set.spec"
	[[ -z $output ]]
	run -0 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/row.spec"
	[[ -z $output ]]
	dump 'set "s"' >"$TEST_DIR/set.out"
	dump 'per row' >"$TEST_DIR/row.out"
	diff -u "$TEST_DIR/row.out" "$TEST_DIR/set.out"
	# and what the rows are
	local s
	s=$(q 'set "s"')
	run -0 psql_target "SELECT id, $(q 'na"me'), j, p, e, d, v, c FROM $s.$(q 't "a"') ORDER BY id"
	[[ $output == '1|new|{"x": 1}|(9,9)|ok|6|xy|z   ' ]]
	run -0 psql_target "SELECT a, b, val, note FROM $s.comp ORDER BY a, b"
	[[ $output == $'1|x|10.00|u1\n2|x|0.00|' ]]
	run -0 psql_target "SELECT id, n FROM $s.ident"
	[[ $output == '10|A' ]]
	run -0 psql_target "SELECT tableoid::regclass, k, v FROM $s.parted"
	[[ $output == '"set ""s""".parted_1|1|LOW' ]]
	run -0 psql_target "SELECT j, p, n FROM $s.nokey"
	[[ $output == '{"k": 1}|(1,1)|one!' ]]
}

@test "a set statement's row count is checked: fewer rows fail with TR001, more with TR002, nothing committed" {
	psql_target "CREATE TABLE m (id int, v text)" "INSERT INTO m VALUES (1, 'a'), (2, 'b'), (2, 'c')"
	{
		rel public m 0 id
		ch U 0 1 x
		ch U 0 3 y
		ch U 0 4 z
		ch set
	} >"$TEST_DIR/missing.spec"
	run -1 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/missing.spec"
	[[ $output == 'error TR001: 1 of 3 rows matched: public.m (3 rows: id=1, id=3, id=4)' ]]
	run -0 psql_target "SELECT id, v FROM m ORDER BY id, v"
	[[ $output == $'1|a\n2|b\n2|c' ]]
	{
		rel public m 0 id
		ch D 0 K 1 '\N'
		ch D 0 K 2 '\N'
		ch set
	} >"$TEST_DIR/more.spec"
	run -1 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/more.spec"
	[[ $output == 'error TR002: 3 rows matched where 2 were expected: public.m (2 rows: id=1, id=2)' ]]
	run -0 psql_target "SELECT id, v FROM m ORDER BY id, v"
	[[ $output == $'1|a\n2|b\n2|c' ]]
	# the same through the per-row statements: the one-row messages of today
	sed 's/^set$/row/' "$TEST_DIR/missing.spec" >"$TEST_DIR/missing-row.spec"
	run -1 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/missing-row.spec"
	[[ $output == 'error TR001: no row matched: public.m (id=3)' ]]
	sed 's/^set$/row/' "$TEST_DIR/more.spec" >"$TEST_DIR/more-row.spec"
	run -1 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/more-row.spec"
	[[ $output == 'error TR002: more than one row matched: public.m (id=2)' ]]
	run -0 psql_target "SELECT id, v FROM m ORDER BY id, v"
	[[ $output == $'1|a\n2|b\n2|c' ]]
}

@test "set statements keep the per-row input semantics: typmods, domains and enums refuse bad values as per-row statements do" {
	make_types
	make_tables s
	psql_target "INSERT INTO s.$(q 't "a"') (id, v, c) VALUES (1, 'a', 'a'), (2, 'b', 'b')"
	# each case: the failing change second of two, once as a set, once row by row
	local cases=(
		$'U\t0\t1\t\\N\t\\U\t\\N\t\\N\t\\N\tabc\t\\N\nU\t0\t2\t\\N\t\\U\t\\N\t\\N\t\\N\ttoolong\t\\N|22001: value too long for type character varying(3)'
		$'U\t0\t1\t\\N\t\\U\t\\N\t\\N\t\\N\t\\N\tabcd\nU\t0\t2\t\\N\t\\U\t\\N\t\\N\t\\N\t\\N\tabcde|22001: value too long for type character(4)'
		$'U\t0\t1\t\\N\t\\U\t\\N\t\\N\t1\t\\N\t\\N\nU\t0\t2\t\\N\t\\U\t\\N\t\\N\t-1\t\\N\t\\N|23514: value for domain posint violates check constraint "posint_check"'
		$'U\t0\t1\t\\N\t\\U\t\\N\tok\t\\N\t\\N\t\\N\nU\t0\t2\t\\N\t\\U\t\\N\tmeh\t\\N\t\\N\t\\N|22P02: invalid input value for enum mood: "meh"'
		$'I\t0\t3\t\\N\t\\N\t\\N\t\\N\t\\N\tabc\t\\N\nI\t0\t4\t\\N\t\\N\t\\N\t\\N\t\\N\ttoolong\t\\N|22001: value too long for type character varying(3)'
		$'I\t0\t3\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\nI\t0\t4\t\\N\t{bad\t\\N\t\\N\t\\N\t\\N\t\\N|22P02: invalid input syntax for type json'
	)
	local c mode
	for c in "${cases[@]}"; do
		for mode in set row; do
			{
				rel s 't "a"' 0 id
				printf '%s\n' "${c%|*}"
				ch $mode
			} >"$TEST_DIR/case.spec"
			run -1 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/case.spec"
			[[ $output == "error ${c##*|}" ]] || {
				echo "$mode: $output (expected error ${c##*|})" >&2
				return 1
			}
		done
	done
	# nothing changed
	run -0 psql_target "SELECT id, v, c FROM s.$(q 't "a"') ORDER BY id"
	[[ $output == $'1|a|a   \n2|b|b   ' ]]
	# and the values that fit are taken alike (char padded, varchar kept)
	{
		rel s 't "a"' 0 id
		ch U 0 1 '\N' '\U' '\N' '\N' 3 'a ' 'ab'
		ch U 0 2 '\N' '\U' '\N' '\N' 4 'abc' 'abcd'
		ch set
	} >"$TEST_DIR/fit.spec"
	run -0 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/fit.spec"
	run -0 psql_target "SELECT id, d, v, c FROM s.$(q 't "a"') ORDER BY id"
	[[ $output == $'1|3|a |ab  \n2|4|abc|abcd' ]]
}

@test "the largest statements: 512 rows, and a wide table's rows up to 65535 parameters" {
	local cols i k
	cols=$(for ((i = 1; i <= 299; i++)); do printf ', c%d int' "$i"; done)
	psql_target "CREATE TABLE big (id int PRIMARY KEY, v text)" "CREATE TABLE wide (id int PRIMARY KEY$cols)"
	{
		rel public big 0 id
		for ((k = 1; k <= 512; k++)); do ch I 0 "$k" "v$k"; done
		ch set
		for ((k = 1; k <= 512; k++)); do ch U 0 "$k" "w$k"; done
		ch set
		for ((k = 1; k <= 512; k += 2)); do ch D 0 K "$k" '\N'; done
		ch set
	} >"$TEST_DIR/big.spec"
	run -0 "$EMIT" <"$TEST_DIR/big.spec"
	[[ $(grep -c '^-- rows 512$' <<<"$output") == 2 ]]
	[[ $(grep -c '^-- rows 256$' <<<"$output") == 1 ]]
	run -0 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/big.spec"
	run -0 psql_target "SELECT count(*), min(id), max(id), count(*) FILTER (WHERE v = 'w' || id) FROM big"
	[[ $output == '256|2|512|256' ]]
	# 218 rows of 300 columns: 65400 parameters in one statement
	local row
	row=$(for ((i = 1; i <= 299; i++)); do printf '\t%d' "$i"; done)
	{
		rel public wide 0 id
		for ((k = 1; k <= 218; k++)); do printf 'I\t0\t%d%s\n' "$k" "$row"; done
		ch set
	} >"$TEST_DIR/wide.spec"
	run -0 "$EMIT" --url "$TARGET_URL" <"$TEST_DIR/wide.spec"
	run -0 psql_target "SELECT count(*), sum(c299), sum(c1) FROM wide"
	[[ $output == '218|65182|218' ]]
}

#!/usr/bin/env bats
# applyd's correctness on realistic target schemas: TRUNCATE replayed as
# the source ran it, target triggers and FK actions not fired (replica
# role), identity columns, transient errors retried, keyless tables with
# duplicate rows (plain and partitioned).

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	LOCKER_PID=
}

teardown() {
	stop_locker
	trellara_teardown
	if [[ -n ${APPLY_ROLE:-} ]]; then
		psql_admin target "DROP OWNED BY $APPLY_ROLE" "DROP ROLE IF EXISTS $APPLY_ROLE" || true
	fi
}

# flow TABLES [PUBLICATION OPTIONS]: the publication, the flow file
flow() {
	local tables=$1
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE ${2:-${tables//public./}}"
	write_flow_file "$FLOW_FILE" --tables "$tables" --set stream.min_free_bytes=1048576 "${@:3}"
}

start_flow() {
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

quarantined() {
	psql_target "SELECT count(*) FROM trellara.quarantine"
}

# A target session the test drives step by step (a psql reading a fifo),
# with a long deadlock_timeout so that applyd is the one that detects a
# deadlock.  Each step ends by renaming the session (locker_N), so the
# test knows when the server has run it.
start_locker() {
	mkfifo "$TEST_DIR/locker.fifo"
	"$(trellara_pg_psql_bin)" -X -qAt -d "$TARGET_URL&application_name=locker_0" -f "$TEST_DIR/locker.fifo" \
		>"$TEST_DIR/locker.log" 2>&1 3>&- &
	LOCKER_PID=$!
	exec 7>"$TEST_DIR/locker.fifo"
	LOCKER_STEP=0
	locker "SET deadlock_timeout = '60s';"
}

# locker SQL: run SQL in the locker session and wait until it has run
locker() {
	LOCKER_STEP=$((LOCKER_STEP + 1))
	printf '%s\n' "$1 SET application_name = 'locker_$LOCKER_STEP';" >&7
	wait_for -m "locker step $LOCKER_STEP: $1" "[ \"\$(psql_target \"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'locker_$LOCKER_STEP' AND state LIKE 'idle%'\")\" = 1 ]"
}

stop_locker() {
	[[ -n ${LOCKER_PID:-} ]] || return 0
	exec 7>&-
	wait "$LOCKER_PID" 2>/dev/null || true
	LOCKER_PID=
}

# applyd waits for a row the locker's transaction itself (not a
# savepoint of it) has locked
applyd_waits_for_locker() {
	wait_for -m "applyd waiting for the locker's transaction" "[ \"\$(psql_target \"SELECT count(*) FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_stat_activity k ON k.application_name LIKE 'locker%'
		WHERE a.application_name = 'trellara-applyd' AND NOT l.granted AND l.locktype = 'transactionid'
		AND l.transactionid = k.backend_xid\")\" = 1 ]"
}

@test "TRUNCATE replays as the source ran it: only the tables in the message, ONLY each, RESTART IDENTITY, no cascade" {
	for side in source target; do
		psql_$side "CREATE TABLE parent_t (id int PRIMARY KEY, v text)" \
			"CREATE TABLE child_t () INHERITS (parent_t)" \
			"CREATE TABLE seqd (id serial PRIMARY KEY, v text)" \
			"CREATE TABLE pt (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY LIST (k)" \
			"CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1)" \
			"CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2)"
	done
	# the inheritance child is not replicated; the target holds its own rows there
	flow "public.parent_t,public.seqd,public.pt" "ONLY parent_t, seqd, pt WITH (publish_via_partition_root = true)"
	psql_target "INSERT INTO child_t VALUES (100, 'the target''s own')"
	start_flow
	psql_source "INSERT INTO parent_t VALUES (1, 'a'), (2, 'b')" "INSERT INTO child_t VALUES (3, 'c')" \
		"INSERT INTO seqd (v) SELECT 'v' || g FROM generate_series(1, 5) g" \
		"INSERT INTO pt VALUES (1, 1, 'x'), (2, 2, 'y')"
	caught_up
	[ "$(psql_target "SELECT count(*) FROM ONLY parent_t")" -eq 2 ]
	[ "$(psql_target "SELECT count(*) FROM pt")" -eq 2 ]
	psql_target "SELECT setval('seqd_id_seq', 50)" >/dev/null
	psql_source "TRUNCATE parent_t" "TRUNCATE seqd RESTART IDENTITY" "TRUNCATE pt"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	[ "$(psql_target "SELECT count(*) FROM ONLY parent_t")" -eq 0 ]
	# not in the message: left alone
	[ "$(psql_target "SELECT id || ' ' || v FROM child_t")" = "100 the target's own" ]
	[ "$(psql_target "SELECT count(*) FROM seqd")" -eq 0 ]
	[ "$(psql_target "SELECT last_value || ' ' || is_called FROM seqd_id_seq")" = "1 false" ]
	# a partitioned table: its partitions are emptied, as on the source
	[ "$(psql_target "SELECT count(*) FROM pt")" -eq 0 ]

	# a target table outside the flow that references a truncated table:
	# the source's CASCADE does not reach it; the TRUNCATE fails closed
	psql_source "INSERT INTO seqd VALUES (7, 'referenced')"
	caught_up
	psql_target "CREATE TABLE keep_ref (seqd_id int REFERENCES seqd (id))" "INSERT INTO keep_ref VALUES (7)"
	psql_source "TRUNCATE seqd CASCADE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM keep_ref")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM seqd")" -eq 1 ]
	[[ "$(psql_target "SELECT detail FROM trellara.quarantine")" == *"referenced in a foreign key constraint"* ]]
	bg_stop capture TERM
}

@test "target triggers and FK actions do not fire during apply (replica role); ENABLE ALWAYS triggers do" {
	for side in source target; do
		psql_$side "CREATE TABLE customers (id int PRIMARY KEY, name text)" \
			"CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers ON DELETE CASCADE ON UPDATE CASCADE, amount int)" \
			"CREATE TABLE history (id serial PRIMARY KEY, customer_id int, what text)" \
			"CREATE FUNCTION log_customer() RETURNS trigger LANGUAGE plpgsql AS
			 \$\$ BEGIN INSERT INTO history (customer_id, what) VALUES (NEW.id, 'created'); RETURN NEW; END \$\$" \
			"CREATE TRIGGER customers_log AFTER INSERT ON customers FOR EACH ROW EXECUTE FUNCTION log_customer()"
	done
	# applyd's sessions have search_path empty (as PostgreSQL's apply
	# worker's): a trigger that fires during apply sets its own
	psql_target "CREATE TABLE always_log (customer_id int)" \
		"CREATE FUNCTION log_always() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS
		 \$\$ BEGIN INSERT INTO always_log VALUES (NEW.id); RETURN NEW; END \$\$" \
		"CREATE TRIGGER customers_always AFTER INSERT ON customers FOR EACH ROW EXECUTE FUNCTION log_always()" \
		"ALTER TABLE customers ENABLE ALWAYS TRIGGER customers_always"
	flow "public.customers,public.orders,public.history"
	start_flow
	psql_source "INSERT INTO customers VALUES (1, 'ann'), (2, 'bob')" \
		"INSERT INTO orders VALUES (10, 1, 5), (11, 1, 6), (12, 2, 7)"
	# the source cascades: the stream carries the children's deletes and updates
	psql_source "DELETE FROM customers WHERE id = 1" "UPDATE customers SET id = 3 WHERE id = 2"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal customers orders history
	[ "$(psql_target "SELECT count(*) FROM history")" -eq 2 ]
	[ "$(psql_target "SELECT string_agg(customer_id::text, ',' ORDER BY customer_id) FROM always_log")" = "1,2" ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "a target role that may not set session_replication_role: check says so, applyd refuses (78); granted, both pass" {
	[ "$TRELLARA_PG_TARGET_MAJOR" -ge 15 ] || skip "GRANT SET ON PARAMETER needs a PostgreSQL 15 target"
	export APPLY_ROLE="applier_$TEST_N"
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, v text)"
	done
	psql_admin target "CREATE ROLE $APPLY_ROLE LOGIN"
	psql_target "GRANT CREATE ON DATABASE $TARGET_DB TO $APPLY_ROLE" "GRANT ALL ON accounts TO $APPLY_ROLE"
	flow "public.accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576 \
		--set target.database_url="\"$TARGET_URL&user=$APPLY_ROLE\""
	run -1 trellara-check --config "$FLOW_FILE" --format json
	item=$(jq -c '.checks[] | select(.name == "target_replica_role")' <<<"$output")
	[ "$(jq -r .status <<<"$item")" = blocker ]
	[[ "$(jq -r .fix <<<"$item")" == *"GRANT SET ON PARAMETER session_replication_role TO"*"$APPLY_ROLE"* ]]
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	psql_source "INSERT INTO accounts VALUES (1, 'a')"
	run -78 trellara-applyd --config "$FLOW_FILE"
	[[ "$output" == *"session_replication_role"* ]]
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 0 ]
	psql_admin target "GRANT SET ON PARAMETER session_replication_role TO $APPLY_ROLE"
	run -0 trellara-check --config "$FLOW_FILE" --format json
	[ "$(jq -r '.checks[] | select(.name == "target_replica_role") | .status' <<<"$output")" = ok ]
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

# A DEFERRABLE unique constraint on the target is checked by an internal
# trigger that does not fire in the replica role applyd applies in: a
# duplicate goes in silently.  check warns, naming the constraint and the
# statement that makes its check fire; with it run, the same duplicate
# fails and is quarantined.
@test "a DEFERRABLE unique constraint on the target: check warns that it is never checked, and its fix makes apply check it" {
	# the constraint is the target's own (a divergence the source allows)
	psql_source "CREATE TABLE items (id int PRIMARY KEY, code text)"
	psql_target "CREATE TABLE items (id int PRIMARY KEY, code text CONSTRAINT items_code UNIQUE DEFERRABLE INITIALLY IMMEDIATE)" \
		"INSERT INTO items VALUES (-1, 'taken')"
	flow "public.items"
	run -0 trellara-check --config "$FLOW_FILE" --format json
	item=$(jq -c '.checks[] | select(.name == "target_deferrable_unique")' <<<"$output")
	[ "$(jq -r .status <<<"$item")" = warn ]
	[ "$(jq -r .object <<<"$item")" = public.items ]
	[[ "$(jq -r .detail <<<"$item")" == *"items_code"* ]]
	fix=$(jq -r .fix <<<"$item")
	[[ $fix == "ALTER TABLE public.items ENABLE ALWAYS TRIGGER "* ]]
	# without the fix: the duplicate is applied, nothing fails
	start_flow
	psql_source "INSERT INTO items VALUES (1, 'taken')"
	caught_up
	[ "$(psql_target "SELECT count(*) FROM items WHERE code = 'taken'")" -eq 2 ]
	bg_stop applyd TERM
	psql_target "DELETE FROM items WHERE id = 1" "${fix%%;*}"
	run -0 trellara-check --config "$FLOW_FILE" --format json
	[ -z "$(jq -c '.checks[] | select(.name == "target_deferrable_unique")' <<<"$output")" ]
	# with it: the next duplicate fails and is quarantined
	psql_source "INSERT INTO items VALUES (2, 'taken')"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd2 60
	[ "$BG_STATUS" -eq 1 ]
	[ "$(quarantined)" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM items WHERE code = 'taken'")" -eq 1 ]
	bg_stop capture TERM
}

@test "GENERATED ALWAYS AS IDENTITY target columns: inserts keep the source's values, updates leave them alone" {
	for side in source target; do
		psql_$side "CREATE TABLE tickets (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, qty int,
			  total int GENERATED ALWAYS AS (qty * 2) STORED, title text)" \
			"CREATE TABLE notes (n bigint GENERATED ALWAYS AS IDENTITY, body text)" \
			"ALTER TABLE notes REPLICA IDENTITY FULL"
	done
	# the target's identity sequences are elsewhere: a value the target made up would differ
	psql_target "ALTER TABLE tickets ALTER COLUMN id RESTART WITH 1000" "ALTER TABLE notes ALTER COLUMN n RESTART WITH 1000"
	flow "public.tickets,public.notes"
	start_flow
	psql_source "INSERT INTO tickets (qty, title) VALUES (1, 'a'), (2, 'b'), (3, 'c')" \
		"INSERT INTO notes (body) VALUES ('x'), ('y')"
	psql_source "UPDATE tickets SET title = 'changed', qty = 10 WHERE id = 1" "DELETE FROM tickets WHERE id = 2" \
		"UPDATE notes SET body = 'z' WHERE body = 'y'" "DELETE FROM notes WHERE body = 'x'"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal tickets notes
	[ "$(psql_target "SELECT total FROM tickets WHERE id = 1")" -eq 20 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "an update that changes a target GENERATED ALWAYS identity column fails closed, naming the column" {
	psql_source "CREATE TABLE moved (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v text)"
	psql_target "CREATE TABLE moved (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)"
	flow "public.moved"
	start_flow
	psql_source "INSERT INTO moved (v) VALUES ('a')"
	caught_up
	[ "$(psql_target "SELECT id || v FROM moved")" = 1a ]
	psql_source "UPDATE moved SET id = 100 WHERE id = 1"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	detail=$(jq -r '.quarantine[0].detail' <<<"$output")
	[[ "$detail" == *'GENERATED ALWAYS identity column "id"'*"public.moved"* ]]
	[ "$(psql_target "SELECT id || v FROM moved")" = 1a ]
	bg_stop capture TERM
}

@test "a lock timeout on the target is retried with backoff, not quarantined" {
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, v text)"
	done
	flow "public.accounts"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576 \
		--set target.database_url="\"$TARGET_URL&options=-c%20lock_timeout%3D200\""
	start_flow
	psql_source "INSERT INTO accounts VALUES (1, 'a'), (2, 'b')"
	caught_up
	start_locker
	locker "BEGIN; SELECT id FROM accounts WHERE id = 1 FOR UPDATE;"
	psql_source "UPDATE accounts SET v = 'changed' WHERE id = 1"
	wait_for -m "two retries after lock timeouts" '[ "$(grep -c "transient target error (SQLSTATE 55P03" "$TEST_DIR/applyd.log")" -ge 2 ]'
	locker "COMMIT;"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal accounts
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "a deadlock that recurs on the lone transaction is retried, not quarantined" {
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, v text)"
	done
	# PostgreSQL looks for a deadlock once, deadlock_timeout after a
	# session starts waiting: applyd's sessions look after 4 s (under the
	# 5 s lock_timeout of parallel apply), so that the locker's request for
	# row 3, which closes the cycle, is in by then even on a loaded machine
	# (at the default 1 s it sometimes was not, and nobody found the
	# deadlock until the locker's own timeout)
	psql_target "ALTER DATABASE $TARGET_DB SET deadlock_timeout = '4s'"
	flow "public.accounts"
	start_flow
	psql_source "INSERT INTO accounts VALUES (1, 'a'), (2, 'b'), (3, 'c')"
	caught_up
	start_locker
	locker "BEGIN; SELECT id FROM accounts WHERE id = 1 FOR UPDATE;"
	# applyd locks row 3, then waits for row 1
	psql_source "BEGIN" "UPDATE accounts SET v = 'c2' WHERE id = 3" "UPDATE accounts SET v = 'a2' WHERE id = 1" "COMMIT"
	for _ in 1 2; do
		applyd_waits_for_locker
		# the locker asks for row 3: a deadlock, which applyd detects
		# first; the locker gets row 3 once applyd has rolled back
		locker "SAVEPOINT s; SELECT id FROM accounts WHERE id = 3 FOR UPDATE;"
		# and lets row 3 go again
		locker "ROLLBACK TO SAVEPOINT s;"
	done
	locker "COMMIT;"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal accounts
	[ "$(grep -c "transient target error (SQLSTATE 40P01" "$TEST_DIR/applyd.log")" -ge 2 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "keyless tables with identical rows: one row changes, also in a partitioned table; no match still quarantines" {
	for side in source target; do
		psql_$side "CREATE TABLE bag (x int, y text)" "ALTER TABLE bag REPLICA IDENTITY FULL" \
			"CREATE TABLE pbag (k int, y text) PARTITION BY LIST (k)" \
			"CREATE TABLE pbag_1 PARTITION OF pbag FOR VALUES IN (1)" \
			"CREATE TABLE pbag_2 PARTITION OF pbag FOR VALUES IN (2)" \
			"ALTER TABLE pbag REPLICA IDENTITY FULL" "ALTER TABLE pbag_1 REPLICA IDENTITY FULL" \
			"ALTER TABLE pbag_2 REPLICA IDENTITY FULL"
	done
	flow "public.bag,public.pbag" "bag, pbag WITH (publish_via_partition_root = true)"
	start_flow
	psql_source "INSERT INTO bag VALUES (1, 'a'), (1, 'a'), (1, 'a'), (2, 'b')" \
		"INSERT INTO pbag VALUES (1, 'p'), (2, 'q'), (2, 'q')"
	caught_up
	psql_source "UPDATE bag SET y = 'c' WHERE ctid = (SELECT ctid FROM bag WHERE x = 1 LIMIT 1)" \
		"DELETE FROM bag WHERE ctid = (SELECT ctid FROM bag WHERE y = 'a' LIMIT 1)" \
		"DELETE FROM pbag WHERE k = 1" \
		"UPDATE pbag SET y = 'r' WHERE ctid = (SELECT ctid FROM pbag WHERE k = 2 LIMIT 1)"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal bag pbag
	[ "$(psql_target "SELECT string_agg(x || y, ',' ORDER BY x, y) FROM bag")" = "1a,1c,2b" ]
	[ "$(psql_target "SELECT string_agg(k || y, ',' ORDER BY k, y) FROM pbag")" = "2q,2r" ]
	# a row the target does not have
	psql_target "DELETE FROM bag WHERE x = 2"
	psql_source "UPDATE bag SET y = 'gone' WHERE x = 2"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	[ "$(psql_target "SELECT reason FROM trellara.quarantine")" = no_rows_matched ]
	bg_stop capture TERM
}

@test "changes that arrive under a partition's own name (publication not via the root) stop applyd (78), never skipped" {
	for side in source target; do
		psql_$side "CREATE TABLE meas (id int, day date, v int, PRIMARY KEY (id, day)) PARTITION BY RANGE (day)" \
			"CREATE TABLE meas_a PARTITION OF meas FOR VALUES FROM ('2026-01-01') TO ('2026-07-01')" \
			"CREATE TABLE meas_b PARTITION OF meas FOR VALUES FROM ('2026-07-01') TO ('2027-01-01')"
	done
	psql_source "INSERT INTO meas SELECT g, date '2026-01-01' + g, g FROM generate_series(1, 300) g"
	psql_target "INSERT INTO meas SELECT g, date '2026-01-01' + g, g FROM generate_series(1, 300) g"
	# without publish_via_partition_root: pgoutput names each partition
	flow public.meas meas
	start_flow
	psql_source "UPDATE meas SET v = -1 WHERE id = 5"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 78 ]
	grep -q 'changes to public.meas_a, a partition of public.meas, arrive under the partition' "$TEST_DIR/applyd.log"
	grep -q 'publish_via_partition_root' "$TEST_DIR/applyd.log"
	# nothing skipped, nothing applied: the row is as it was
	[ "$(psql_target "SELECT v FROM meas WHERE id = 5")" -eq 5 ]
	[ "$(quarantined)" -eq 0 ]
}

@test "PostgreSQL's 002_types: tables keyed by a composite, an enum, a range and a composite array, and a FULL-identity table of them: inserts, updates and deletes applied, nothing quarantined" {
	# types and tables as src/test/subscription/t/002_types.pl makes them
	# (a subset), on both sides
	local side
	for side in source target; do
		psql_$side "CREATE TYPE public.tst_comp_basic_t AS (a int, b text)" \
			"CREATE TYPE public.tst_enum_t AS ENUM ('a', 'b', 'c', 'd', 'e')" \
			"CREATE TYPE public.tst_comp_enum_t AS (a int, b public.tst_enum_t)" \
			"CREATE DOMAIN public.tst_dom_comp AS public.tst_comp_basic_t CHECK ((VALUE).a > 0)" \
			"CREATE TABLE public.tst_comps (a public.tst_comp_basic_t PRIMARY KEY, b public.tst_comp_basic_t[])" \
			"CREATE TABLE public.tst_enums (a public.tst_enum_t PRIMARY KEY, b public.tst_enum_t[])" \
			"CREATE TABLE public.tst_ranges (a int4range PRIMARY KEY, b int8range[])" \
			"CREATE TABLE public.tst_comp_arrays (a public.tst_comp_enum_t[] PRIMARY KEY, b public.tst_dom_comp)" \
			"CREATE TABLE public.tst_full (a int, b public.tst_comp_basic_t, c public.tst_dom_comp, d int4range, e point)" \
			"ALTER TABLE public.tst_full REPLICA IDENTITY FULL"
	done
	flow "public.tst_comps,public.tst_enums,public.tst_ranges,public.tst_comp_arrays,public.tst_full" \
		"tst_comps, tst_enums, tst_ranges, tst_comp_arrays, tst_full"
	start_flow
	psql_source "INSERT INTO tst_comps VALUES (ROW(1, 'a'), '{\"(1,a)\",\"(2,b)\"}'), (ROW(2, 'b'), NULL), (ROW(3, 'c'), '{}')" \
		"INSERT INTO tst_enums VALUES ('a', '{b,c}'), ('b', NULL), ('c', '{}')" \
		"INSERT INTO tst_ranges VALUES ('[1,3)', '{\"[1,5)\"}'), ('[3,7)', NULL), ('empty', '{}')" \
		"INSERT INTO tst_comp_arrays VALUES ('{\"(1,a)\"}', ROW(1, 'x')), ('{\"(2,b)\",\"(3,c)\"}', ROW(2, 'y'))" \
		"INSERT INTO tst_full VALUES (1, ROW(1, 'a'), ROW(1, 'a'), '[1,2)', '(1,2)'), (2, ROW(2, 'b'), NULL, 'empty', '(0,0)'), (3, NULL, ROW(3, 'c'), NULL, NULL)"
	# the updates and deletes of 002_types: the key is the composite (or
	# enum, range, array), so the WHERE compares it
	psql_source "UPDATE tst_comps SET b = '{\"(9,z)\"}' WHERE (a).a = 1" \
		"UPDATE tst_comps SET a = ROW(20, 'bb') WHERE (a).a = 2" \
		"DELETE FROM tst_comps WHERE (a).a = 3" \
		"UPDATE tst_enums SET b = '{e}' WHERE a = 'a'" "UPDATE tst_enums SET a = 'd' WHERE a = 'b'" \
		"DELETE FROM tst_enums WHERE a = 'c'" \
		"UPDATE tst_ranges SET b = '{\"[2,9)\"}' WHERE a = '[1,3)'" "UPDATE tst_ranges SET a = '[30,70)' WHERE a = '[3,7)'" \
		"DELETE FROM tst_ranges WHERE a = 'empty'" \
		"UPDATE tst_comp_arrays SET b = ROW(5, 'w') WHERE a = '{\"(1,a)\"}'" \
		"DELETE FROM tst_comp_arrays WHERE a = '{\"(2,b)\",\"(3,c)\"}'" \
		"UPDATE tst_full SET b = ROW(10, 'aa'), c = ROW(11, 'bb') WHERE a = 1" \
		"UPDATE tst_full SET a = 20 WHERE a = 2" "DELETE FROM tst_full WHERE a = 3"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal tst_comps tst_enums tst_ranges tst_comp_arrays tst_full
	[ "$(psql_target "SELECT count(*) FROM tst_comps")" -eq 2 ]
	[ "$(psql_target "SELECT b::text FROM tst_comps WHERE a = ROW(1, 'a')::public.tst_comp_basic_t")" = '{"(9,z)"}' ]
	[ "$(psql_target "SELECT (c).b FROM tst_full WHERE a = 1")" = bb ]
	# verify and repair-plan on these keys too: a row gone from the
	# target (a composite key), one changed (a range key)
	psql_target "DELETE FROM tst_comps WHERE (a).a = 1" "UPDATE tst_ranges SET b = NULL WHERE a = '[1,3)'"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	echo "$output" >"$TEST_DIR/verify.json"
	[ "$(jq -r '[.tables[] | .table as $t | .divergences[] | "\($t) \(.kind) \(.key_values | map(join(",")) | join(" "))"] | sort | join("; ")' "$TEST_DIR/verify.json")" = \
		'public.tst_comps missing_in_target (1,a); public.tst_ranges content_differs [1,3)' ]
	run -0 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	[[ $output == *"result: CONVERGED"* ]]
	psql_source "UPDATE tst_comps SET b = '{}' WHERE (a).a = 1"
	caught_up
	[ "$(quarantined)" -eq 0 ]
	assert_tables_equal tst_comps tst_ranges
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

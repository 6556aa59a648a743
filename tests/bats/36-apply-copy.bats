#!/usr/bin/env bats
# COPY for runs of inserts (trellara-applyd(1), COPY; apply.copy_inserts,
# off by default): runs of at least 8 net inserts of one table go to the
# target as one COPY ... FROM STDIN in text format.  Each test lets capture write the
# whole backlog first, so that applyd's batches hold many inserts.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE notes (id int PRIMARY KEY, body text, tags text[], doc jsonb, raw bytea, at timestamptz)" \
			"CREATE TABLE ids (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)" \
			"CREATE TABLE parts (k int, v text, PRIMARY KEY (k)) PARTITION BY RANGE (k)" \
			"CREATE TABLE parts_lo PARTITION OF parts FOR VALUES FROM (MINVALUE) TO (100)" \
			"CREATE TABLE parts_hi PARTITION OF parts FOR VALUES FROM (100) TO (MAXVALUE)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE notes, ids, parts WITH (publish_via_partition_root = true)"
	TABLES="public.notes,public.ids,public.parts"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	bg_start capture trellara-capture --config "$FLOW_FILE" --start-now
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
}

# until capture has made everything the source wrote durable in the stream
captured() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -m "capture confirmed $lsn" \
		"[ \"\$(psql_source \"SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'\")\" = t ]"
}

# statements and COPYs of applyd's last "applyd compaction:" line
copy_counts() {
	grep -o '[0-9]* statements executed in [0-9]* target transactions, [0-9]* of them COPY' "$TEST_DIR/applyd.log" |
		tail -1 | tr -cs '0-9' ' '
	echo
}

# Inserts whose text COPY must escape (backslashes, tabs, newlines,
# carriage returns, the two characters \N, empty strings), NULLs in every
# type, arrays, jsonb, bytea; source-generated identity values; rows of
# both partitions; some transactions also update what they inserted.
backlog() {
	psql_source "INSERT INTO notes SELECT g, CASE g % 6 WHEN 0 THEN E'back\\\\slash' WHEN 1 THEN E'tab\\there' WHEN 2 THEN E'line\\nbreak\\r' WHEN 3 THEN '\\N' WHEN 4 THEN '' END, CASE WHEN g % 5 > 0 THEN ARRAY['a b', E'q\"t', NULL, E'x\\\\y'] END, CASE WHEN g % 4 > 0 THEN jsonb_build_object('g', g, 's', E'multi\\nline\\ttab') END, CASE WHEN g % 3 > 0 THEN decode('00ff5c0a', 'hex') END, CASE WHEN g % 2 = 0 THEN '2026-01-02 03:04:05.678+00'::timestamptz + g * interval '1 minute' END FROM generate_series(1, 300) g"
	for i in $(seq 1 40); do
		printf "BEGIN; INSERT INTO ids (v) VALUES ('v%d'), (NULL); INSERT INTO parts VALUES (%d, 'lo'), (%d, E'hi\\\\t%d');" "$i" "$i" "$((i + 100))" "$i"
		printf " INSERT INTO notes VALUES (%d, E'row\\\\\\\\%d\\\\n', NULL, NULL, NULL, NULL); UPDATE notes SET body = body || 'x' WHERE id = %d; COMMIT;\n" \
			"$((1000 + i))" "$i" "$((1000 + i))"
	done >"$TEST_DIR/backlog.sql"
	psql_source <"$TEST_DIR/backlog.sql"
}

@test "apply.copy_inserts: true: runs of inserts go as COPY: escaped text, NULLs, arrays, jsonb, bytea, identity ALWAYS, partitions; identical" {
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 --set apply.copy_inserts=true
	backlog
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal notes ids parts parts_lo parts_hi
	# the identity values are the source's (COPY keeps given values)
	[ "$(psql_target "SELECT max(id) FROM ids")" -eq 80 ]
	[ "$(psql_target "SELECT count(*) FROM notes WHERE body = '\\N'")" -eq 50 ]
	[ "$(psql_target "SELECT count(*) FROM notes WHERE body IS NULL")" -eq 50 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r statements batches copies < <(copy_counts)
	[ "$copies" -ge 3 ] # notes' 300, and at least the runs of ids and parts
	[ "$statements" -ge "$copies" ]
	[ "$batches" -ge 1 ]
	bg_stop capture TERM
}

@test "apply.copy_inserts unset (false): the same backlog as multi-row INSERTs, no COPY, identical" {
	backlog
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal notes ids parts
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r statements batches copies < <(copy_counts)
	[ "$copies" -eq 0 ]
	[ "$statements" -ge 3 ]
	bg_stop capture TERM
}

@test "a COPY that meets a conflicting target row fails its batch; the culprit is quarantined, those before it applied" {
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 --set apply.copy_inserts=true
	psql_target "INSERT INTO notes (id, body) VALUES (57, 'in the way')"
	for i in $(seq 1 100); do
		printf 'INSERT INTO notes (id, body) VALUES (%d, %s);\n' "$i" "'n$i'"
	done >"$TEST_DIR/inserts.sql"
	psql_source <"$TEST_DIR/inserts.sql"
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	grep -q "a batch of 100 transactions failed (23505: .*); retrying them one at a time" "$TEST_DIR/applyd.log"
	# the batch's 100 inserts were one COPY, which the target refused at its 57th row
	grep -q 'CONTEXT:  COPY notes, line 57' "$(server_log target)"
	[ "$(psql_target "SELECT reason FROM trellara.quarantine")" = constraint_violation ]
	# the 56 transactions before the culprit (the insert of 57) committed,
	# nothing after it; the target's own row 57 stayed
	[ "$(psql_target "SELECT count(*) FROM notes WHERE body = 'n' || id")" -eq 56 ]
	[ "$(psql_target "SELECT max(id) FROM notes WHERE body = 'n' || id")" -eq 56 ]
	[ "$(psql_target "SELECT body FROM notes WHERE id = 57")" = "in the way" ]
	bg_stop capture TERM
}

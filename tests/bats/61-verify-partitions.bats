#!/usr/bin/env bats
# trellara-verify over partitioned tables (every row of every partition,
# through the parent) and inheritance parents (their own rows, and it
# says so).

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
	psql_source <<'SQL'
CREATE TABLE measurements (id int NOT NULL, region text NOT NULL, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE measurements_north PARTITION OF measurements FOR VALUES IN ('north');
CREATE TABLE measurements_south PARTITION OF measurements FOR VALUES IN ('south');
INSERT INTO measurements SELECT g, (ARRAY['north', 'south'])[1 + g % 2], g FROM generate_series(1, 400) g;
CREATE TABLE notes (id int PRIMARY KEY, body text);
CREATE TABLE notes_archive (archived_at date) INHERITS (notes);
INSERT INTO notes SELECT g, 'n' || g FROM generate_series(1, 20) g;
INSERT INTO notes_archive SELECT g, 'a' || g, '2020-01-01' FROM generate_series(100, 110) g;
SQL
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE measurements, ONLY notes WITH (publish_via_partition_root = true)"
	pg_dump --schema-only --no-publications --no-owner -h "$SOURCE_HOST" -p "$SOURCE_PORT" \
		-t 'measurements*' -t 'notes*' "$SOURCE_DB" >"$TEST_DIR/schema.sql"
	psql_target <"$TEST_DIR/schema.sql" >/dev/null
	write_flow_file "$FLOW_FILE" --tables "public.measurements,public.notes" --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

@test "a partitioned table is compared over every partition: a row deleted in one partition of the target is DIVERGED with its key" {
	psql_source "UPDATE measurements SET v = v + 1 WHERE id < 50"
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	m=$(jq -c '.tables[] | select(.table == "public.measurements")' <<<"$output")
	[ "$(jq -r .scope <<<"$m")" = partitions ]
	[ "$(jq -r .source_rows <<<"$m")" -eq "$(psql_source "SELECT count(*) FROM measurements")" ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.measurements: 400 rows (all partitions), checksums match"* ]]
	psql_target "DELETE FROM measurements_south WHERE id = 7"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = DIVERGED ]
	m=$(jq -c '.tables[] | select(.table == "public.measurements")' <<<"$output")
	[ "$(jq -r '.divergences[] | select(.kind == "missing_in_target") | .keys[0]' <<<"$m")" = "(7,south)" ]
	# a whole partition emptied on the target
	psql_target "TRUNCATE measurements_north"
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.measurements: DIVERGED: source 400 rows, target 199 rows"* ]]
}

@test "an inheritance parent is compared over its own rows, and verify says so" {
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	n=$(jq -c '.tables[] | select(.table == "public.notes")' <<<"$output")
	[ "$(jq -r .scope <<<"$n")" = only ]
	[ "$(jq -r .source_rows <<<"$n")" -eq 20 ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.notes: 20 rows (its own rows only: inheritance children are not compared), checksums match"* ]]
	# a child's rows are not the parent's: not compared, not counted
	psql_target "DELETE FROM notes_archive"
	run -0 trellara-verify --config "$FLOW_FILE"
	psql_target "DELETE FROM ONLY notes WHERE id = 3"
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.notes: DIVERGED"* ]]
}

@test "TRUNCATE of one partition and DETACH PARTITION on the source are not replicated (publish_via_partition_root): verify finds them, the operator repeats them on the target" {
	psql_source "UPDATE measurements SET v = -v WHERE id <= 10"
	north=$(psql_source "SELECT count(*) FROM measurements_north")
	[ "$north" -gt 0 ]
	# pgoutput does not send a TRUNCATE run directly on a partition of a table published through its root
	psql_source "TRUNCATE measurements_north"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = DIVERGED ]
	m=$(jq -c '.tables[] | select(.table == "public.measurements")' <<<"$output")
	[ "$(jq -r .result <<<"$m")" = diverged ]
	[ "$(jq -r .target_rows <<<"$m")" -eq 400 ]
	[ "$(jq -r .source_rows <<<"$m")" -eq $((400 - north)) ]
	[ "$(jq -r '.divergences[] | select(.kind == "extra_in_target") | .count' <<<"$m")" -eq "$north" ]
	[ "$(jq -r '.tables[] | select(.table == "public.notes") | .result' <<<"$output")" = converged ]
	# the changes before it did arrive: only the partition's rows differ
	[ "$(psql_target "SELECT count(*) FROM measurements_south WHERE v < 0")" -eq "$(psql_source "SELECT count(*) FROM measurements_south WHERE v < 0")" ]
	psql_target "TRUNCATE measurements_north"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
	# DETACH PARTITION is DDL: the target's parent still holds the partition's rows
	south=$(psql_source "SELECT count(*) FROM measurements_south")
	psql_source "ALTER TABLE measurements DETACH PARTITION measurements_south"
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.measurements: DIVERGED: source 0 rows, target $south rows (all partitions)"* ]]
	psql_target "ALTER TABLE measurements DETACH PARTITION measurements_south"
	# the divergence moved the verified run to failed_recoverable: the
	# reseed that verify names hands the table off again
	run -0 trellara-snapshot reseed --config "$FLOW_FILE" --table public.measurements
	[[ "$output" == *"reseeded public.measurements: 0 rows"* ]]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"result: CONVERGED"* ]]
}

@test "a flow table missing on the target: verify says so, and compares the other tables" {
	psql_target "DROP TABLE notes CASCADE"
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"table public.notes: DIVERGED: the target table does not exist"* ]]
	[[ "$output" == *"table public.measurements: 400 rows (all partitions), checksums match"* ]]
}

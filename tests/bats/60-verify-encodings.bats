#!/usr/bin/env bats
# trellara-verify across server encodings: a LATIN1 source into a UTF8
# target (the legacy migration people run most; PostgreSQL's own
# src/test/subscription/t/005_encoding.pl).  The rows are the same text
# as the application sees it (client encoding UTF8) though their bytes
# differ on the two servers: verify compares that text, so non-ASCII rows
# converge, and damage to them is still found, named and repaired.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 PGCLIENTENCODING=UTF8
	# this test's source database in LATIN1 (the target stays UTF8)
	psql_admin source "DROP DATABASE \"$SOURCE_DB\"" \
		"CREATE DATABASE \"$SOURCE_DB\" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
	[ "$(psql_source "SHOW server_encoding")" = LATIN1 ]
	[ "$(psql_target "SHOW server_encoding")" = UTF8 ]
	psql_source "CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL, city text)" \
		"CREATE TABLE tags (tag text PRIMARY KEY, note text)" \
		"CREATE TABLE notes (body text, n int)" "ALTER TABLE notes REPLICA IDENTITY FULL" \
		"INSERT INTO people VALUES (1, 'Zoë', 'Zürich'), (2, 'Ægir', 'Reykjavík'), (3, 'plain', 'Bern')" \
		"INSERT INTO people SELECT g, 'Señor ' || g, 'Málaga' FROM generate_series(4, 300) g" \
		"INSERT INTO tags VALUES ('Zoë', '½ £'), ('café', 'crème brûlée'), ('ascii', NULL)" \
		"INSERT INTO notes VALUES ('naïve façade', 1), ('naïve façade', 1), ('¿qué?', 2)" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE people, tags, notes"
	write_flow_file "$FLOW_FILE" --tables "public.people,public.tags,public.notes" --set stream.min_free_bytes=1048576
	trellara-snapshot --config "$FLOW_FILE" --create-tables >/dev/null
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO people VALUES (301, 'Øystein', 'Tromsø')" \
		"UPDATE tags SET note = 'déjà vu' WHERE tag = 'café'" "INSERT INTO notes VALUES ('Ångström', 3)"
	caught_up
}

teardown() {
	bg_stop applyd TERM 2>/dev/null || true
	bg_stop capture TERM 2>/dev/null || true
	trellara_teardown
}

@test "a LATIN1 source and a UTF8 target holding the same text: CONVERGED, the keys and rows with non-ASCII characters too" {
	# the same text, as the application reads it
	assert_tables_equal people tags notes
	[ "$(psql_target "SELECT city FROM people WHERE id = 1")" = Zürich ]
	[ "$(psql_source "SELECT octet_length(name) FROM people WHERE id = 1")" = 3 ]
	[ "$(psql_target "SELECT octet_length(name) FROM people WHERE id = 1")" = 4 ]
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	echo "$output"
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	[ "$(jq -r '[.tables[] | "\(.table) \(.source_rows) \(.target_rows)"] | sort | join("; ")' <<<"$output")" = \
		"public.notes 4 4; public.people 301 301; public.tags 3 3" ]
}

@test "LATIN1 into UTF8, damaged: each divergence named with its (non-ASCII) key, repair-plan repairs them, CONVERGED" {
	psql_target "UPDATE people SET city = 'Zurich' WHERE id = 1" "DELETE FROM tags WHERE tag = 'Zoë'" \
		"INSERT INTO tags VALUES ('über', 'extra')" "UPDATE notes SET body = 'naive facade' WHERE n = 1 AND ctid = (SELECT min(ctid) FROM notes WHERE n = 1)"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	echo "$output" >"$TEST_DIR/verify.json"
	echo "$output"
	[ "$(jq -r '[.tables[] | .table as $t | .divergences[] | "\($t) \(.kind) \(.count)"] | sort | join("; ")' "$TEST_DIR/verify.json")" = \
		"public.notes extra_in_target 1; public.notes missing_in_target 1; public.people content_differs 1; public.tags extra_in_target 1; public.tags missing_in_target 1" ]
	[ "$(jq -r '.tables[] | select(.table == "public.tags") | [.divergences[] | "\(.kind) \(.key_values | map(join(",")) | join(" "))"] | sort | join("; ")' "$TEST_DIR/verify.json")" = \
		"extra_in_target über; missing_in_target Zoë" ]
	[ "$(jq -r '.tables[] | select(.table == "public.people") | .divergences[0].key_values | map(join(",")) | join(" ")' "$TEST_DIR/verify.json")" = 1 ]
	# repair-plan repairs the keyed tables row by row; the keyless one it
	# leaves to a reseed (and its closing verify still says so)
	run -1 --separate-stderr trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	echo "$output"
	[[ $output == *"table public.people: 301 rows, checksums match"* ]]
	[[ $output == *"table public.tags: 3 rows, checksums match"* ]]
	[[ $output == *"table public.notes: DIVERGED"* ]]
	assert_tables_equal people tags
	[ "$(psql_target "SELECT city FROM people WHERE id = 1")" = Zürich ]
	[ "$(psql_target "SELECT count(*) FROM tags WHERE tag IN ('Zoë', 'über')")" = 1 ]
	# the keyless row put back by hand: every table converges
	psql_target "UPDATE notes SET body = 'naïve façade' WHERE body = 'naive facade'"
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
}

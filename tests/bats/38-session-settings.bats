#!/usr/bin/env bats
# Values exact whatever the servers' session defaults: the source database
# and the flow's role on it default to a European DateStyle, sql_standard
# intervals, extra_float_digits -3, a +13:45 TimeZone, escape bytea and a
# WIN1252 client encoding; the target database to the opposite (MDY,
# iso_8601, 0 digits, -03:30, LATIN1). Every session Trellara opens pins
# its own (include/trellara/pgconn.h PGCONN_PINNED_OPTIONS), so the
# snapshot's copy, the stream and the apply carry the same values: the
# target equals the source, nothing quarantined, verify CONVERGED.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	# this test's own sessions: UTF-8, whatever the databases say
	export PGCLIENTENCODING=UTF8
}

teardown() {
	trellara_teardown
}

# hostile_defaults: the settings a session inherits when it pins none
hostile_defaults() {
	psql_admin source "ALTER DATABASE $SOURCE_DB SET DateStyle = 'SQL, DMY'" \
		"ALTER DATABASE $SOURCE_DB SET extra_float_digits = -3" \
		"ALTER DATABASE $SOURCE_DB SET bytea_output = 'escape'" \
		"ALTER ROLE CURRENT_USER IN DATABASE $SOURCE_DB SET IntervalStyle = 'sql_standard'" \
		"ALTER ROLE CURRENT_USER IN DATABASE $SOURCE_DB SET TimeZone = 'Pacific/Chatham'" \
		"ALTER ROLE CURRENT_USER IN DATABASE $SOURCE_DB SET client_encoding = 'WIN1252'"
	psql_admin target "ALTER DATABASE $TARGET_DB SET DateStyle = 'SQL, MDY'" \
		"ALTER DATABASE $TARGET_DB SET IntervalStyle = 'iso_8601'" \
		"ALTER DATABASE $TARGET_DB SET extra_float_digits = 0" \
		"ALTER DATABASE $TARGET_DB SET TimeZone = 'America/St_Johns'" \
		"ALTER DATABASE $TARGET_DB SET bytea_output = 'escape'" \
		"ALTER DATABASE $TARGET_DB SET client_encoding = 'LATIN1'"
	# they took: a new session without options sees them
	[ "$(PGCLIENTENCODING='' psql_source "SHOW DateStyle" "SHOW TimeZone" "SHOW client_encoding" | tr '\n' ' ')" = \
		"SQL, DMY Pacific/Chatham WIN1252 " ]
	[ "$(PGCLIENTENCODING='' psql_target "SHOW DateStyle" "SHOW IntervalStyle" "SHOW client_encoding" | tr '\n' ' ')" = \
		"SQL, MDY iso_8601 LATIN1 " ]
}

# rows FIRST LAST: values built by functions, not parsed from text, so the
# inserting session's own (hostile) settings cannot change them; days 6
# and 13 of months 5 and 1 (an ambiguous date, and one DMY cannot swap)
rows() {
	psql_source "INSERT INTO v SELECT g,
		make_date(2024, CASE WHEN g % 2 = 0 THEN 5 ELSE 1 END, CASE WHEN g % 3 = 0 THEN 13 ELSE 6 END),
		make_timestamp(2024, 5, 6, 7, g % 60, 9.123456 + g % 50),
		make_timestamptz(2024, 5, 6, 23, 30, 1.5, 'UTC') + g * interval '1 hour',
		0.1::float8 * g + 0.2::float8, (1::float4 / 3) * g,
		make_interval(years => -1, months => 2, days => -3, hours => 4, mins => 5, secs => 6.7 + g % 50),
		(1234.56 + g)::numeric::money,
		decode('00ff5c27' || lpad(to_hex(g), 4, '0'), 'hex'),
		'Zo' || chr(235) || ' ' || chr(8364) || ' ' || g,
		1e-300::float8 / g
		FROM generate_series($1, $2) g"
	psql_source "INSERT INTO f SELECT id, d, x FROM (SELECT g AS id,
		make_date(2023, 12, 1) + g AS d, 0.1::float8 + g AS x FROM generate_series($1, $2) g) s"
}

@test "hostile session defaults on the source (database and role) and the target: dates, floats, intervals, times, money, bytea and text arrive exact" {
	psql_source "CREATE TABLE v (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, f8 float8, f4 float4,
			iv interval, m money, b bytea, t text, tiny float8)" \
		"CREATE TABLE f (id int, d date, x float8)" "ALTER TABLE f REPLICA IDENTITY FULL"
	psql_target "CREATE TABLE v (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, f8 float8, f4 float4,
			iv interval, m money, b bytea, t text, tiny float8)" \
		"CREATE TABLE f (id int, d date, x float8)"
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE v, f"
	rows 1 20 # copied by the snapshot
	hostile_defaults
	write_flow_file "$FLOW_FILE" --tables "public.v public.f" --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	rows 21 60 # streamed
	# updates and deletes: the FULL-identity table's WHERE carries every
	# old value (the date and the float) as the source formatted them
	psql_source "UPDATE v SET d = d + 1, f8 = f8 * 3, iv = iv * 2, tz = tz - interval '30 minutes' WHERE id % 4 = 0" \
		"UPDATE f SET x = x * 7 WHERE id % 3 = 0" "DELETE FROM f WHERE id % 5 = 0" \
		"DELETE FROM v WHERE id % 7 = 0"
	caught_up 60
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	# compared in pinned sessions on both sides (sorted_copy)
	assert_tables_equal v f
	# and not merely equal as text: the values themselves, on the target
	[ "$(psql_target "SELECT count(*) FROM v WHERE extract(day FROM d) IN (6, 7, 13, 14) AND extract(year FROM d) = 2024")" -eq \
		"$(psql_target "SELECT count(*) FROM v")" ]
	[ "$(psql_target "SELECT d = make_date(2024, 1, 6) AND f8 = 0.1::float8 + 0.2::float8 AND t = 'Zo' || chr(235) || ' ' || chr(8364) || ' 1'
		AND b = '\\x00ff5c270001'::bytea AND m = 1235.56::numeric::money FROM v WHERE id = 1")" = t ]
	[ "$(psql_target "SELECT f8 = 0.1::float8 * 4 + 0.2::float8 FROM v WHERE id = 4")" = f ] # updated: * 3
	[ "$(psql_target "SELECT f8 = (0.1::float8 * 4 + 0.2::float8) * 3 FROM v WHERE id = 4")" = t ]
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
	[ "$BG_STATUS" -eq 0 ]
}

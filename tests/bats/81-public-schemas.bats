#!/usr/bin/env bats
# Two public schemas with their data, written by others and used as they
# are published (tests/fixtures/public-schemas/README.md): Pagila (DVD
# rental: sequences attached by DEFAULT nextval without OWNED BY, a
# payment table partitioned by month, enums, domains, tsvector, arrays,
# BEFORE triggers) and Chinook (music store: identity keys).  Each one,
# the whole schema, goes through `trellara run` while the application
# writes its own kind of rows and capture and applyd are killed -9; then
# the target is identical and CONVERGED, `trellara cutover --lock-source`
# moves the application there, and the application's first insert into
# every table with a serial, identity or nextval default, the key left to
# that default, succeeds with a key the source never handed out.

load helpers/common

FIXTURES="$REPO/tests/fixtures/public-schemas"

setup() {
	trellara_setup
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000 TRELLARA_RUN_MAX_RESTARTS=50
	export TRELLARA_RUN_DRAIN_SECONDS=20
}

# pagila_sql FILE: a Pagila file as published, less the statements that
# give objects to a role named postgres (the test clusters' superuser is
# named after the user running the tests; the objects belong to it)
pagila_sql() {
	case $1 in
	*.gz) gunzip -c "$1" ;;
	*) cat "$1" ;;
	esac | sed '/ OWNER TO postgres;$/d'
}

# chinook_sql: Chinook's PostgreSQL script as published, less its first
# statements, which drop, create and connect to a database of its own
# (the test loads it into this test's database)
chinook_sql() {
	sed -e '/^DROP DATABASE IF EXISTS chinook_auto_increment;$/d' \
		-e '/^CREATE DATABASE chinook_auto_increment;$/d' \
		-e '/^\\c chinook_auto_increment;$/d' \
		"$FIXTURES/chinook/Chinook_PostgreSql_AutoIncrementPKs.sql"
}

# source_tables: every table of the source's schema public that is no
# partition (a partitioned table is listed once, by its root), sorted,
# one per line, as schema.name
source_tables() {
	psql_source "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1"
}

# source_partitions: the partitions of the source's schema public
source_partitions() {
	psql_source "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relispartition ORDER BY 1"
}

# default_keyed_columns: from the TARGET's catalog, each table of schema
# public (no partition) with a column an insert may leave to a sequence:
# an identity column, or a default that calls nextval (a serial's, or one
# written by hand); "table|column", one per line, sorted by table
default_keyed_columns() {
	psql_target "SELECT t || '|' || col FROM (
		SELECT DISTINCT format('%I.%I', n.nspname, c.relname) AS t, a.attname::text AS col
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) ~ '^nextval\(')) k
		ORDER BY t, col"
}

# flow_for TABLES_CSV: the flow file over those tables, and the source
# prepared for it (publication, DDL trigger)
flow_for() {
	write_flow_file "$FLOW_FILE" --tables "$1" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	run -0 trellara-check --config "$FLOW_FILE" --fix
}

kill_child() {
	local old applied
	applied=$(applied_transactions)
	old=$(state_value "$1_pid")
	kill -KILL "$old"
	wait_for -t 60 -m "trellara-$1 restarted" "[ \"\$(state_value $1_pid)\" != '$old' ] && child_alive $1"
	wait_for -t 60 -m "applyd applies again" "[ \"\$(applied_transactions)\" -gt $applied ]"
}

# run_under_load_and_kills SCRIPT: the application's load (pgbench with
# SCRIPT, 2 clients) from before the snapshot until capture and applyd
# were each killed -9 twice and restarted by `trellara run`; then the
# target caught up with nothing quarantined
run_under_load_and_kills() {
	bg_start load pgbench_until_stopped -c 2 -f "$1"
	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 180 -m "trellara run has both children running" running
	wait_for -t 60 -m "capture moved the snapshot run to streaming" \
		'[ "$(psql_target "SELECT state FROM trellara.snapshot_runs")" = streaming ]'
	wait_for -t 60 -m "applyd applies the workload" '[ "$(applied_transactions)" -gt 20 ]'
	kill_child capture
	kill_child applyd
	kill_child capture
	kill_child applyd
	load_stop
	[ "$BG_STATUS" -eq 0 ]
	grep -q "number of transactions actually processed" "$TEST_DIR/pgbench.log"
	caught_up 180
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
}

# verify_data_converged: verify (with the flow running) finds every table
# and the handoff converged: CONVERGED, exit 0; target sequences behind
# their source (the stream carries no sequences: the cutover syncs them)
# are reported, not a divergence
verify_data_converged() {
	run -0 --separate-stderr trellara verify --config "$FLOW_FILE" --format json
	echo "$output"
	echo "$stderr"
	[ "$(jq -r '[.result, .data_result] | join(" ")' <<<"$output")" = "CONVERGED CONVERGED" ]
	[ "$(jq '[.tables[] | select(.result != "converged")] | length' <<<"$output")" -eq 0 ]
	[ "$(jq '[.sequences[] | select(.result != "converged" and .result != "behind")] | length' <<<"$output")" -eq 0 ]
	# every sequence of the schema is the flow's, owned or not
	[ "$(jq '.sequences | length' <<<"$output")" -ge "$1" ]
}

# cutover_done: trellara cutover --lock-source ends the migration: verify
# CONVERGED, capture and applyd stopped, `trellara run` exited 0
cutover_done() {
	wait_for -t 60 -m "trellara run is running and trellara status reads the flow's checkpoint" flow_ready
	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	echo "$output"
	echo "$stderr"
	[[ $output == *"source database \"$SOURCE_DB\" locked"* ]]
	[[ $output == *"result: CONVERGED"* ]]
	[[ $output == *"capture and applyd stopped"* ]]
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	[ "$(psql_target "SELECT state FROM trellara.cutover")" = cut_over ]
	[ "$(psql_target "SELECT verify_result FROM trellara.cutover")" = CONVERGED ]
}

# application_inserts_succeed EXPECTED: the target's default-keyed tables
# (default_keyed_columns) are EXPECTED ("table|column" lines); for each,
# the application's insert INSERTS[table] (key column left out, RETURNING
# it) succeeds on the target, with a key past the source's largest.  Every
# table is tried; the failures are listed together.
application_inserts_succeed() {
	local expected=$1 keyed table column sql key source_max failures=""
	keyed=$(default_keyed_columns)
	echo "default-keyed tables on the target:"
	echo "$keyed"
	[ -n "$keyed" ]
	[ "$keyed" = "$expected" ]
	while IFS='|' read -r table column; do
		sql=${INSERTS[$table]:-}
		if [ -z "$sql" ]; then
			failures+="$table: no application insert written for it"$'\n'
			continue
		fi
		source_max=$(psql_source "SELECT coalesce(max(\"$column\"), 0) FROM $table")
		if ! key=$(psql_target "$sql" 2>"$TEST_DIR/insert.err"); then
			failures+="$table: the insert failed: $(tr '\n' ' ' <"$TEST_DIR/insert.err")"$'\n'
		elif ! [[ $key =~ ^[0-9]+$ ]] || ((key <= source_max)); then
			failures+="$table: the insert took $column $key, which is not past the source's largest ($source_max)"$'\n'
		else
			echo "$table: new $column $key (source's largest $source_max)"
		fi
	done <<<"$keyed"
	if [ -n "$failures" ]; then
		printf 'application inserts on the target after the cutover that failed:\n%s' "$failures"
		return 1
	fi
}

@test "Pagila (nextval defaults without OWNED BY, partitioned payments, enums, domains, triggers), the whole schema under its application's load and kill -9: identical, CONVERGED, cut over, the application inserts into every table on the target" {
	# 1. the schema and its data on the source; the schema alone on the
	# target: both from the published files
	pagila_sql "$FIXTURES/pagila/pagila-schema.sql" | psql_source >/dev/null
	pagila_sql "$FIXTURES/pagila/pagila-data.sql.gz" | psql_source >/dev/null
	pagila_sql "$FIXTURES/pagila/pagila-schema.sql" | psql_target >/dev/null
	[ "$(psql_source "SELECT count(*) FROM rental")" -gt 16000 ]
	[ "$(psql_source "SELECT count(*) FROM payment")" -gt 16000 ]
	[ "$(psql_target "SELECT count(*) FROM rental")" -eq 0 ]
	# its sequences are attached by their DEFAULT only: no column owns one
	[ "$(psql_source "SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relnamespace = 'public'::regnamespace")" -ge 13 ]
	[ "$(psql_source "SELECT count(*) FROM pg_depend WHERE classid = 'pg_class'::regclass
		AND objid IN (SELECT oid FROM pg_class WHERE relkind = 'S') AND deptype IN ('a', 'i')")" -eq 0 ]

	# 2. the flow over every table of the schema (payment by its root)
	tables=$(source_tables)
	echo "$tables"
	[ "$(wc -l <<<"$tables")" -eq 15 ]
	grep -qx public.payment <<<"$tables"
	[ "$(grep -c '^public\.payment_p' <<<"$tables")" -eq 0 ]
	flow_for "$(paste -sd, <<<"$tables")"

	# the rental desk: rentals and their payments (the keys from the
	# tables' defaults), returns, customers' details, a payment's date
	# corrected into the next month's partition, a rental with its payments
	# removed, a film's rate and cast changed
	cat >"$TEST_DIR/pagila.sql" <<-'EOF'
		\set c random(1, 599)
		\set inv random(1, 4581)
		\set st random(0, 1499)
		\set cents random(99, 1199)
		\set day random(0, 180)
		\set r random(1, 16049)
		\set old random(1, 16049)
		\set film random(1, 1000)
		\set actor random(1, 200)
		BEGIN;
		INSERT INTO rental (rental_date, inventory_id, customer_id, staff_id) VALUES (clock_timestamp(), :inv, :c, :st) RETURNING rental_id AS new_rental \gset
		INSERT INTO payment (customer_id, staff_id, rental_id, amount, payment_date) VALUES (:c, :st, :new_rental, :cents / 100.0, timestamptz '2022-01-24' + :day * interval '1 day');
		UPDATE customer SET email = lower(first_name) || '.' || :cents || '@example.org', active = 1 WHERE customer_id = :c;
		UPDATE rental SET return_date = clock_timestamp() WHERE rental_id = :r AND return_date IS NULL;
		COMMIT;
		UPDATE payment SET payment_date = payment_date + interval '30 days' WHERE payment_id = (SELECT min(payment_id) FROM payment WHERE customer_id = :c AND payment_date < '2022-06-15');
		BEGIN;
		DELETE FROM payment WHERE rental_id = :old;
		DELETE FROM rental WHERE rental_id = :old;
		COMMIT;
		BEGIN;
		UPDATE film SET rental_rate = rental_rate + 0.01 WHERE film_id = :film;
		INSERT INTO film_actor (actor_id, film_id) VALUES (:actor, :film) ON CONFLICT DO NOTHING;
		COMMIT;
	EOF
	rentals_before=$(psql_source "SELECT max(rental_id) FROM rental")
	run_under_load_and_kills "$TEST_DIR/pagila.sql"
	[ "$(psql_source "SELECT max(rental_id) FROM rental")" -gt "$rentals_before" ]

	# 3. every table the same, row for row, each partition too; verify
	# finds the data CONVERGED
	mapfile -t partitions < <(source_partitions)
	[ "${#partitions[@]}" -eq 7 ]
	mapfile -t all < <(printf '%s\n' "$tables")
	assert_tables_equal "${all[@]}" "${partitions[@]}"
	verify_data_converged 13

	# 4. the cutover
	cutover_done
	assert_tables_equal "${all[@]}" "${partitions[@]}"

	# 5. the application, now on the target, adds one row to each table
	# whose key comes from a sequence, leaving the key to the default
	declare -gA INSERTS=(
		[public.actor]="INSERT INTO actor (first_name, last_name) VALUES ('NEW', 'ACTOR') RETURNING actor_id"
		[public.address]="INSERT INTO address (address, district, city_id, phone) VALUES ('1 Cutover Lane', 'Alberta', 300, '') RETURNING address_id"
		[public.category]="INSERT INTO category (name) VALUES ('Cutover') RETURNING category_id"
		[public.city]="INSERT INTO city (city, country_id) VALUES ('Cutover City', 1) RETURNING city_id"
		[public.country]="INSERT INTO country (country) VALUES ('Cutoveria') RETURNING country_id"
		[public.customer]="INSERT INTO customer (store_id, first_name, last_name, email, address_id) VALUES (1, 'NEW', 'CUSTOMER', 'new.customer@example.org', 1) RETURNING customer_id"
		[public.film]="INSERT INTO film (title, language_id) VALUES ('CUTOVER NIGHT', 1) RETURNING film_id"
		[public.inventory]="INSERT INTO inventory (film_id, store_id) VALUES (1, 1) RETURNING inventory_id"
		[public.language]="INSERT INTO language (name) VALUES ('Esperanto') RETURNING language_id"
		[public.payment]="INSERT INTO payment (customer_id, staff_id, rental_id, amount, payment_date) VALUES (1, 1, (SELECT min(rental_id) FROM rental), 2.99, timestamptz '2022-03-15 12:00+00') RETURNING payment_id"
		[public.rental]="INSERT INTO rental (rental_date, inventory_id, customer_id, staff_id) VALUES (now(), 1, 1, 1) RETURNING rental_id"
		[public.staff]="INSERT INTO staff (first_name, last_name, address_id, store_id, username) VALUES ('New', 'Clerk', 1, 1, 'newclerk') RETURNING staff_id"
		[public.store]="INSERT INTO store (manager_staff_id, address_id) VALUES ((SELECT max(manager_staff_id) + 1 FROM store), 1) RETURNING store_id"
	)
	application_inserts_succeed "$(printf 'public.%s\n' actor\|actor_id address\|address_id category\|category_id \
		city\|city_id country\|country_id customer\|customer_id film\|film_id inventory\|inventory_id \
		language\|language_id payment\|payment_id rental\|rental_id staff\|staff_id store\|store_id)"
}

@test "Chinook (identity keys; target tables made by --create-tables), the whole schema under its application's load and kill -9: identical, CONVERGED, cut over, the application inserts into every table on the target" {
	# 1. the published script (schema and data) on the source; the target's
	# tables made by the snapshot from the source's catalogs
	export TRELLARA_RUN_SNAPSHOT_ARGS=--create-tables
	chinook_sql | psql_source >/dev/null
	[ "$(chinook_sql | grep -Ec '^(CREATE|DROP) DATABASE|^\\c')" -eq 0 ]
	[ "$(psql_source "SELECT count(*) FROM invoice_line")" -gt 2000 ]
	[ "$(psql_target "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")" -eq 0 ]

	# 2. the flow over every table of the schema
	tables=$(source_tables)
	echo "$tables"
	[ "$(wc -l <<<"$tables")" -eq 11 ]
	flow_for "$(paste -sd, <<<"$tables")"

	# the store: invoices with their lines (keys from identity), an
	# invoice and its lines removed, a new artist and album, playlists
	# edited, customers' and tracks' details changed
	cat >"$TEST_DIR/chinook.sql" <<-'EOF'
		\set c random(1, 59)
		\set t1 random(1, 3503)
		\set t2 random(1, 3503)
		\set pl random(1, 18)
		\set old random(1, 412)
		BEGIN;
		INSERT INTO invoice (customer_id, invoice_date, billing_address, billing_city, billing_country, billing_postal_code, total) SELECT customer_id, now(), address, city, country, postal_code, 0 FROM customer WHERE customer_id = :c RETURNING invoice_id AS inv \gset
		INSERT INTO invoice_line (invoice_id, track_id, unit_price, quantity) SELECT :inv, track_id, unit_price, 1 FROM track WHERE track_id IN (:t1, :t2);
		UPDATE invoice SET total = (SELECT sum(unit_price * quantity) FROM invoice_line WHERE invoice_id = :inv) WHERE invoice_id = :inv;
		COMMIT;
		BEGIN;
		DELETE FROM invoice_line WHERE invoice_id = :old;
		DELETE FROM invoice WHERE invoice_id = :old;
		COMMIT;
		BEGIN;
		INSERT INTO artist (name) VALUES ('Load Artist ' || :t1) RETURNING artist_id AS artist \gset
		INSERT INTO album (title, artist_id) VALUES ('Load Album ' || :t2, :artist);
		COMMIT;
		INSERT INTO playlist_track (playlist_id, track_id) VALUES (:pl, :t1) ON CONFLICT DO NOTHING;
		DELETE FROM playlist_track WHERE playlist_id = :pl AND track_id = :t2;
		UPDATE customer SET phone = '+1 555 ' || :t1 WHERE customer_id = :c;
		UPDATE track SET unit_price = unit_price + 0.01 WHERE track_id = :t2;
	EOF
	invoices_before=$(psql_source "SELECT max(invoice_id) FROM invoice")
	run_under_load_and_kills "$TEST_DIR/chinook.sql"
	[ "$(psql_source "SELECT max(invoice_id) FROM invoice")" -gt "$invoices_before" ]

	# 3. every table the same, row for row; verify finds the data CONVERGED
	mapfile -t all < <(printf '%s\n' "$tables")
	assert_tables_equal "${all[@]}"
	verify_data_converged 10

	# 4. the cutover
	cutover_done
	assert_tables_equal "${all[@]}"

	# 5. the application, now on the target
	declare -gA INSERTS=(
		[public.album]="INSERT INTO album (title, artist_id) VALUES ('Cut Over', 1) RETURNING album_id"
		[public.artist]="INSERT INTO artist (name) VALUES ('The Cutovers') RETURNING artist_id"
		[public.customer]="INSERT INTO customer (first_name, last_name, email) VALUES ('New', 'Customer', 'new.customer@example.org') RETURNING customer_id"
		[public.employee]="INSERT INTO employee (last_name, first_name, title) VALUES ('Clerk', 'New', 'Sales Support Agent') RETURNING employee_id"
		[public.genre]="INSERT INTO genre (name) VALUES ('Cutover') RETURNING genre_id"
		[public.invoice]="INSERT INTO invoice (customer_id, invoice_date, total) VALUES (1, now(), 0.99) RETURNING invoice_id"
		[public.invoice_line]="INSERT INTO invoice_line (invoice_id, track_id, unit_price, quantity) VALUES ((SELECT min(invoice_id) FROM invoice), 1, 0.99, 1) RETURNING invoice_line_id"
		[public.media_type]="INSERT INTO media_type (name) VALUES ('Cutover stream') RETURNING media_type_id"
		[public.playlist]="INSERT INTO playlist (name) VALUES ('Cutover hits') RETURNING playlist_id"
		[public.track]="INSERT INTO track (name, media_type_id, milliseconds, unit_price) VALUES ('Cutover', 1, 180000, 0.99) RETURNING track_id"
	)
	application_inserts_succeed "$(printf 'public.%s\n' album\|album_id artist\|artist_id customer\|customer_id \
		employee\|employee_id genre\|genre_id invoice\|invoice_id invoice_line\|invoice_line_id \
		media_type\|media_type_id playlist\|playlist_id track\|track_id)"
}

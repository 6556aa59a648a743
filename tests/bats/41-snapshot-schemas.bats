#!/usr/bin/env bats
# trellara-snapshot over the schemas of real applications: partitioned
# tables (by their parent, a leaf on its own, a partition attached
# later), inheritance, foreign keys and triggers on the target the way
# pg_dump --schema-only creates them, identity and generated columns,
# --force while applyd runs, and --create-tables with awkward names.

load helpers/common

setup() {
	trellara_setup
	export TRELLARA_STATUS_INTERVAL_MS=200
}

# the source's definitions of these tables on the target, as an operator
# makes them (pg_dump --schema-only, triggers and foreign keys included)
target_schema_from_source() {
	local -a t=()
	local name
	for name in "$@"; do t+=(-t "$name"); done
	pg_dump --schema-only --no-publications --no-owner -h "$SOURCE_HOST" -p "$SOURCE_PORT" "${t[@]}" "$SOURCE_DB" \
		>"$TEST_DIR/schema.sql"
	psql_target <"$TEST_DIR/schema.sql" >/dev/null
}

caught_up() {
	local lsn
	lsn=$(source_flushed_lsn)
	wait_for -t 120 -m "target caught up with $lsn" \
		"[ \"\$(psql_target \"SELECT coalesce((SELECT applied_through_lsn >= '$lsn' FROM trellara.apply_checkpoint), false)\")\" = t ]"
}

# customers, orders (FK to customers ON UPDATE CASCADE), payments
# partitioned by month (FK to orders ON DELETE CASCADE), last_update
# triggers; the rows carry last_update values of the past, which a
# trigger firing on the target would replace
shop_init() {
	psql_source <<'SQL'
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, last_update timestamptz NOT NULL DEFAULT now());
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers (id) ON UPDATE CASCADE,
	total numeric(10,2) NOT NULL, last_update timestamptz NOT NULL DEFAULT now());
CREATE TABLE payments (id int NOT NULL, order_id int NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
	paid_on date NOT NULL, amount numeric(10,2) NOT NULL, last_update timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (id, paid_on)) PARTITION BY RANGE (paid_on);
CREATE TABLE payments_2026_01 PARTITION OF payments FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE payments_2026_02 PARTITION OF payments FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE payments_2026_03 PARTITION OF payments FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
INSERT INTO customers SELECT g, 'c' || g || '@example.com', '2020-01-01'::timestamptz + g * interval '1 minute'
	FROM generate_series(1, 300) g;
INSERT INTO orders SELECT g, 1 + g % 300, g * 1.5, '2021-01-01'::timestamptz + g * interval '1 minute'
	FROM generate_series(1, 1500) g;
INSERT INTO payments SELECT g, 1 + g % 1500, '2026-01-01'::date + g % 90, g % 97 + 0.25,
	'2022-01-01'::timestamptz + g * interval '1 minute' FROM generate_series(1, 5000) g;
CREATE FUNCTION set_last_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.last_update := now();
	RETURN NEW;
END
$$;
CREATE TRIGGER customers_last_update BEFORE INSERT OR UPDATE ON customers FOR EACH ROW EXECUTE FUNCTION set_last_update();
CREATE TRIGGER orders_last_update BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION set_last_update();
CREATE TRIGGER payments_last_update BEFORE INSERT OR UPDATE ON payments FOR EACH ROW EXECUTE FUNCTION set_last_update();
SQL
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE customers, orders, payments WITH (publish_via_partition_root = true)"
	# pg_dump -t dumps no functions: the trigger function first, as an operator would
	psql_target "CREATE FUNCTION set_last_update() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN NEW.last_update := now(); RETURN NEW; END\$\$"
	target_schema_from_source customers orders 'payments*'
	write_flow_file "$FLOW_FILE" --tables "public.customers,public.orders,public.payments" \
		--set stream.min_free_bytes=1048576
}

shop_equal() {
	assert_tables_equal customers orders payments payments_2026_01 payments_2026_02 payments_2026_03
}

@test "a shop schema with foreign keys, a partitioned table and last_update triggers on the target: every row copied, twice" {
	shop_init
	# the target has what pg_dump gave it: the foreign keys and the triggers
	[ "$(psql_target "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid IN ('orders'::regclass, 'payments'::regclass)")" -eq 2 ]
	[ "$(psql_target "SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%last_update'")" -ge 3 ]
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.payments: $(psql_source "SELECT count(*) FROM payments") rows"* ]]
	[[ "$output" == *"copied public.orders: $(psql_source "SELECT count(*) FROM orders") rows"* ]]
	shop_equal
	# again, over the full tables: they are emptied together and copied again
	psql_source "UPDATE orders SET total = total + 1 WHERE id <= 10"
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	[[ "$output" == *"copied public.customers: 300 rows"* ]]
	shop_equal
	[ "$(psql_target "SELECT count(*) FROM orders WHERE total = id * 1.5 + 1")" -eq 10 ]
}

@test "--force with an empty flow table that references a full one (refunds into orders): emptied together, every table copied" {
	shop_init
	psql_source "CREATE TABLE refunds (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders (id), amount numeric(10,2))" \
		"ALTER PUBLICATION $PUBLICATION_NAME ADD TABLE refunds"
	target_schema_from_source refunds
	write_flow_file "$FLOW_FILE" --tables "public.customers,public.orders,public.payments,public.refunds" \
		--set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.refunds: 0 rows"* ]]
	shop_equal
	# refunds stays empty on the target, orders is full: TRUNCATE orders needs refunds with it
	psql_source "UPDATE orders SET total = total + 2 WHERE id <= 5"
	run -0 trellara-snapshot --config "$FLOW_FILE" --force
	[[ "$output" == *"copied public.orders: $(psql_source "SELECT count(*) FROM orders") rows"* ]]
	[[ "$output" == *"copied public.refunds: 0 rows"* ]]
	shop_equal
	assert_tables_equal refunds
	[ "$(psql_target "SELECT count(*) FROM orders WHERE total = id * 1.5 + 2")" -eq 5 ]
}

# a target table with rows that differ from the source's, and a foreign
# key into it from another flow table: the reseed the verify names
@test "reseed of a table that another flow table references (customers, referenced by orders): copied again, orders untouched" {
	shop_init
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "UPDATE orders SET total = total + 1 WHERE id = 1"
	caught_up
	# the target diverges: a changed row, a missing one (orders of customer 9 keep their reference)
	psql_target "UPDATE customers SET email = 'diverged' WHERE id = 5" \
		"SET session_replication_role = replica" "DELETE FROM customers WHERE id = 9"
	orders_before=$(sorted_copy target orders | md5sum)
	run -1 trellara-verify --config "$FLOW_FILE"
	[[ "$output" == *"recover: trellara reseed --config $FLOW_FILE --table public.customers"* ]]
	run -0 trellara-snapshot reseed --config "$FLOW_FILE" --table public.customers
	[[ "$output" == *"reseeded public.customers: 300 rows"* ]]
	assert_tables_equal customers orders
	[ "$(sorted_copy target orders | md5sum)" = "$orders_before" ]
	# the flow goes on from the reseed's watermark
	psql_source "UPDATE customers SET email = 'after' WHERE id = 9" "UPDATE orders SET total = 0 WHERE customer_id = 9"
	caught_up
	shop_equal
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	bg_stop applyd TERM
	bg_stop capture TERM
}

@test "a target role that may not set the replica role and cannot read the target's triggers: the table fails, its triggers never fire" {
	export COPY_ROLE="copier_$TEST_N"
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, last_update timestamptz NOT NULL)" \
		"INSERT INTO accounts SELECT g, '2020-01-01'::timestamptz + g * interval '1 minute' FROM generate_series(1, 50) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	psql_target "CREATE FUNCTION set_last_update() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN NEW.last_update := now(); RETURN NEW; END\$\$"
	target_schema_from_source accounts
	psql_target "CREATE TRIGGER accounts_last_update BEFORE INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION set_last_update()"
	psql_admin target "DROP ROLE IF EXISTS $COPY_ROLE" "CREATE ROLE $COPY_ROLE LOGIN"
	psql_target "GRANT CREATE ON DATABASE $TARGET_DB TO $COPY_ROLE" "GRANT ALL ON accounts TO $COPY_ROLE" \
		"REVOKE SELECT ON pg_catalog.pg_trigger FROM PUBLIC"
	write_flow_file "$FLOW_FILE" --tables public.accounts --set stream.min_free_bytes=1048576 \
		--set target.database_url="\"$TARGET_URL&user=$COPY_ROLE\""
	run -75 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"FAILED public.accounts: cannot read the triggers of the target table"* ]]
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 0 ]
	psql_target "GRANT SELECT ON pg_catalog.pg_trigger TO PUBLIC"
	run -75 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"FAILED public.accounts: the target table has triggers"*"accounts_last_update"* ]]
	[ "$(psql_target "SELECT count(*) FROM accounts")" -eq 0 ]
}

@test "an UPDATE of a row missing from a partitioned target table quarantines" {
	shop_init
	run -0 trellara-snapshot --config "$FLOW_FILE"
	shop_equal
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "UPDATE customers SET email = 'changed' WHERE id = 1"
	caught_up
	psql_target "DELETE FROM payments WHERE id = 40"
	psql_source "UPDATE payments SET amount = amount + 1 WHERE id = 40"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	run -1 trellara-quarantine list --config "$FLOW_FILE" --format json
	[ "$(jq -r '.quarantine[0].reason' <<<"$output")" = no_rows_matched ]
	bg_stop capture TERM
}

@test "a target table outside the flow with a foreign key into a full flow table: refused, naming both and the constraint" {
	shop_init
	psql_target "CREATE TABLE reviews (id int PRIMARY KEY, customer_id int REFERENCES customers (id), body text)"
	# an empty target needs no TRUNCATE: the first copy goes through
	run -0 trellara-snapshot --config "$FLOW_FILE"
	shop_equal
	psql_target "INSERT INTO reviews VALUES (1, 7, 'fine')"
	run -78 trellara-snapshot --config "$FLOW_FILE" --force
	[[ "$output" == *"reviews_customer_id_fkey"* ]]
	[[ "$output" == *"public.reviews"* ]]
	[[ "$output" == *"public.customers"* ]]
	[[ "$output" == *"hint:"* ]]
	# nothing was emptied
	shop_equal
	[ "$(psql_target "SELECT count(*) FROM reviews")" -eq 1 ]
}

# measurements, partitioned by region, with its key (id, region)
measurements_init() {
	psql_source <<'SQL'
CREATE TABLE measurements (id int NOT NULL, region text NOT NULL, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE measurements_north PARTITION OF measurements FOR VALUES IN ('north');
CREATE TABLE measurements_south PARTITION OF measurements FOR VALUES IN ('south');
CREATE TABLE measurements_east PARTITION OF measurements FOR VALUES IN ('east');
INSERT INTO measurements SELECT g, (ARRAY['north', 'south', 'east'])[1 + g % 3], g * 10 FROM generate_series(1, 3000) g;
SQL
	target_schema_from_source 'measurements*'
}

@test "a partitioned table listed by its parent: all partitions copied, rows moving between partitions and a partition attached later flow through the parent" {
	measurements_init
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE measurements WITH (publish_via_partition_root = true)"
	write_flow_file "$FLOW_FILE" --tables "public.measurements" --set stream.min_free_bytes=1048576
	# a stale row on the target: the copy replaces everything
	psql_target "INSERT INTO measurements VALUES (999999, 'east', 0)"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.measurements: $(psql_source "SELECT count(*) FROM measurements") rows"* ]]
	assert_tables_equal measurements measurements_north measurements_south measurements_east
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# a row moves from north to south; one is deleted; one inserted
	psql_source "UPDATE measurements SET region = 'south', v = -1 WHERE id = 3 AND region = 'north'" \
		"DELETE FROM measurements WHERE id = 4" \
		"INSERT INTO measurements VALUES (5000, 'east', 1)"
	# a partition attached later, on both sides, with rows it brings and new ones
	psql_target "CREATE TABLE measurements_west (LIKE measurements)" \
		"ALTER TABLE measurements ATTACH PARTITION measurements_west FOR VALUES IN ('west')"
	psql_source "CREATE TABLE measurements_west (LIKE measurements)" \
		"ALTER TABLE measurements ATTACH PARTITION measurements_west FOR VALUES IN ('west')" \
		"INSERT INTO measurements VALUES (6000, 'west', 6), (6001, 'west', 7)" \
		"UPDATE measurements SET region = 'west' WHERE id = 6 AND region = 'north'"
	caught_up
	assert_tables_equal measurements measurements_north measurements_south measurements_east measurements_west
	[ "$(psql_target "SELECT region FROM measurements WHERE id = 3")" = south ]
	[ "$(psql_target "SELECT count(*) FROM measurements_west")" -eq 3 ]
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	[ "$(jq -r '.tables[0].scope' <<<"$output")" = partitions ]
	[ "$(jq -r '.tables[0].source_rows' <<<"$output")" -eq "$(psql_source "SELECT count(*) FROM measurements")" ]
	bg_stop applyd TERM
	bg_stop capture TERM
}

@test "trellara check: --fix publishes a partitioned table through its root, flags a publication that does not, and a partition listed with its parent" {
	measurements_init
	write_flow_file "$FLOW_FILE" --tables "public.measurements" --set stream.min_free_bytes=1048576
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	[ "$(psql_source "SELECT pubviaroot FROM pg_publication WHERE pubname = '$PUBLICATION_NAME'")" = t ]
	[ "$(psql_source "SELECT string_agg(tablename, ',') FROM pg_publication_tables WHERE pubname = '$PUBLICATION_NAME'")" = measurements ]
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME SET (publish_via_partition_root = false)"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  publication_table public.measurements: partitioned table, but publication'*'publish_via_partition_root is off'* ]]
	psql_source "ALTER PUBLICATION $PUBLICATION_NAME SET (publish_via_partition_root = true)"
	write_flow_file "$FLOW_FILE" --tables "public.measurements,public.measurements_east" --set stream.min_free_bytes=1048576
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  partition_listed public.measurements_east: public.measurements_east is a partition of public.measurements'* ]]
}

@test "a leaf partition listed on its own is copied alone, its changes stream under its own name, and verify compares it; the other partitions on the target are left alone" {
	measurements_init
	# published directly, not through the root: pgoutput sends the leaf's
	# own changes under its name, and of a row moved out of it only the DELETE
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE measurements_south"
	write_flow_file "$FLOW_FILE" --tables "public.measurements_south" --set stream.min_free_bytes=1048576
	psql_target "INSERT INTO measurements VALUES (1, 'north', 77)"
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.measurements_south: $(psql_source "SELECT count(*) FROM measurements_south") rows"* ]]
	assert_tables_equal measurements_south
	[ "$(psql_target "SELECT v FROM measurements_north")" = 77 ]
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	# ids 4, 7 are south, 3 north: moved out of south, into south, changed in place, deleted, inserted
	psql_source "UPDATE measurements SET region = 'north' WHERE id = 4 AND region = 'south'" \
		"UPDATE measurements SET region = 'south', v = -3 WHERE id = 3 AND region = 'north'" \
		"UPDATE measurements_south SET v = v + 1000 WHERE id < 100" \
		"DELETE FROM measurements WHERE id = 7" \
		"INSERT INTO measurements VALUES (7000, 'south', 1), (7001, 'north', 1)"
	caught_up
	assert_tables_equal measurements_south
	[ "$(psql_target "SELECT v FROM measurements_south WHERE id = 3")" = 997 ]
	[ "$(psql_target "SELECT count(*) FROM measurements_south WHERE id IN (4, 7)")" -eq 0 ]
	# nothing of the other partitions reached the target
	[ "$(psql_target "SELECT string_agg(id || ':' || v, ',') FROM measurements_north")" = 1:77 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	run -0 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r .result <<<"$output")" = CONVERGED ]
	[ "$(jq -r '.tables[0].scope' <<<"$output")" = table ]
	[ "$(jq -r '.tables[0].source_rows' <<<"$output")" -eq "$(psql_source "SELECT count(*) FROM measurements_south")" ]
	# a row of the leaf changed on the target is found
	psql_target "UPDATE measurements_south SET v = 0 WHERE id = 3"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r '.tables[0].divergences[0].keys[0]' <<<"$output")" = "(3,south)" ]
	bg_stop applyd TERM
	bg_stop capture TERM
}

# events, partitioned by region; events_eu partitioned again by id
sub_partitioned_init() {
	psql_source <<'SQL'
CREATE TABLE events (id int NOT NULL, region text NOT NULL, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu') PARTITION BY RANGE (id);
CREATE TABLE events_eu_low PARTITION OF events_eu FOR VALUES FROM (0) TO (100);
CREATE TABLE events_eu_high PARTITION OF events_eu FOR VALUES FROM (100) TO (1000);
INSERT INTO events SELECT g, (ARRAY['us', 'eu'])[1 + g % 2] FROM generate_series(1, 300) g;
SQL
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE events WITH (publish_via_partition_root = true)"
	target_schema_from_source 'events*'
}

@test "a sub-partitioned middle table listed with its root: check and the snapshot both refuse it" {
	sub_partitioned_init
	write_flow_file "$FLOW_FILE" --tables "public.events,public.events_eu" --set stream.min_free_bytes=1048576
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  partition_listed public.events_eu: public.events_eu is a partition of public.events'* ]]
	run -78 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"public.events_eu is a partition of public.events"* ]]
	# a leaf below it, listed with the middle table: the same
	write_flow_file "$FLOW_FILE" --tables "public.events_eu,public.events_eu_low" --set stream.min_free_bytes=1048576
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  partition_listed public.events_eu_low: public.events_eu_low is a partition of public.events_eu'* ]]
	run -78 trellara-snapshot --config "$FLOW_FILE"
	# the root alone passes both and copies every level
	write_flow_file "$FLOW_FILE" --tables "public.events" --set stream.min_free_bytes=1048576
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output != *partition_listed* ]]
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.events: 300 rows"* ]]
	assert_tables_equal events events_us events_eu_low events_eu_high
}

@test "a flow listing a partitioned table and one of its partitions is refused" {
	measurements_init
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE measurements WITH (publish_via_partition_root = true)"
	write_flow_file "$FLOW_FILE" --tables "public.measurements,public.measurements_east" --set stream.min_free_bytes=1048576
	run -78 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"public.measurements_east is a partition of public.measurements"* ]]
	[ "$(psql_target "SELECT count(*) FROM measurements")" -eq 0 ]
}

@test "an inheritance parent is copied with its own rows only; the children on the target keep theirs" {
	psql_source "CREATE TABLE notes (id int PRIMARY KEY, body text)" \
		"CREATE TABLE notes_archive (archived_at date) INHERITS (notes)" \
		"INSERT INTO notes SELECT g, 'n' || g FROM generate_series(1, 20) g" \
		"INSERT INTO notes_archive SELECT g, 'a' || g, '2020-01-01' FROM generate_series(100, 110) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE ONLY notes"
	target_schema_from_source notes notes_archive
	psql_target "INSERT INTO notes_archive VALUES (500, 'kept', '2021-01-01')" "INSERT INTO notes VALUES (900, 'stale')"
	write_flow_file "$FLOW_FILE" --tables "public.notes" --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.notes: 20 rows"* ]]
	assert_tables_equal "ONLY notes"
	[ "$(psql_target "SELECT body FROM notes_archive")" = kept ]
}

@test "identity (GENERATED ALWAYS) and stored generated columns: copied as on the source" {
	psql_source "CREATE TABLE tickets (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title text,
			title_len int GENERATED ALWAYS AS (length(title)) STORED)" \
		"INSERT INTO tickets (title) SELECT repeat('t', g % 7) FROM generate_series(1, 200) g" \
		"DELETE FROM tickets WHERE id % 5 = 0" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE tickets"
	target_schema_from_source tickets
	write_flow_file "$FLOW_FILE" --tables "public.tickets" --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	[[ "$output" == *"copied public.tickets: 160 rows"* ]]
	assert_tables_equal tickets
}

@test "snapshot --force while applyd holds the flow is refused; applyd cannot start during a copy" {
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, v int)" \
		"INSERT INTO accounts SELECT g, g FROM generate_series(1, 1000) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts"
	target_schema_from_source accounts
	write_flow_file "$FLOW_FILE" --tables "public.accounts" --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE"
	bg_start capture trellara-capture --config "$FLOW_FILE"
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "UPDATE accounts SET v = v + 1 WHERE id < 100"
	caught_up
	bg_stop capture TERM
	state=$(psql_target "SELECT state FROM trellara.snapshot_runs")
	run -75 trellara-snapshot --config "$FLOW_FILE" --force
	[[ "$output" == *"trellara-applyd is applying flow"* ]]
	[[ "$output" == *"hint: stop trellara-applyd"* ]]
	# refused before touching anything: the run and the slot are as they were
	[ "$(psql_target "SELECT state FROM trellara.snapshot_runs")" = "$state" ]
	[ "$(psql_source "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" -eq 1 ]
	bg_stop applyd TERM
	# during a copy applyd is held off
	export TRELLARA_PAUSE=snapshot.before_table_copy TRELLARA_PAUSE_DIR="$TEST_DIR"
	bg_start snap trellara-snapshot --config "$FLOW_FILE" --force
	wait_for "[ -e '$TEST_DIR/snapshot.before_table_copy.paused' ]"
	unset TRELLARA_PAUSE TRELLARA_PAUSE_DIR
	run -75 trellara-applyd --config "$FLOW_FILE"
	touch "$TEST_DIR/snapshot.before_table_copy.resume"
	bg_wait snap 60
	[ "$BG_STATUS" -eq 0 ]
	bg_start capture2 trellara-capture --config "$FLOW_FILE"
	bg_start applyd2 trellara-applyd --config "$FLOW_FILE"
	psql_source "UPDATE accounts SET v = v + 1 WHERE id < 200"
	caught_up
	assert_tables_equal accounts
	bg_stop applyd2 TERM
	bg_stop capture2 TERM
}

@test "--create-tables: exact names (mixed case, a wildcard), partitions with their parent" {
	psql_source 'CREATE TABLE "Order Items" (id int PRIMARY KEY, "Qty" int)' \
		'INSERT INTO "Order Items" SELECT g, g FROM generate_series(1, 30) g' \
		'CREATE TABLE "t*" (id int PRIMARY KEY)' 'INSERT INTO "t*" VALUES (1), (2)' \
		'CREATE TABLE tz (id int PRIMARY KEY)' 'CREATE TABLE "order items" (x int)' \
		"CREATE TABLE m (id int, k int, PRIMARY KEY (id, k)) PARTITION BY LIST (k)" \
		"CREATE TABLE m_1 PARTITION OF m FOR VALUES IN (1)" "CREATE TABLE m_2 PARTITION OF m FOR VALUES IN (2)" \
		"INSERT INTO m SELECT g, 1 + g % 2 FROM generate_series(1, 50) g" \
		"CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE \"Order Items\", \"t*\", m WITH (publish_via_partition_root = true)"
	write_flow_file "$FLOW_FILE" --tables "- schema: public
  name: Order Items
- schema: public
  name: \"t*\"
- schema: public
  name: m" --set stream.min_free_bytes=1048576
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	[[ "$output" == *"copied public.Order Items: 30 rows"* ]]
	[[ "$output" == *"copied public.t*: 2 rows"* ]]
	[[ "$output" == *"copied public.m: 50 rows"* ]]
	assert_tables_equal '"Order Items"' '"t*"' m m_1 m_2
	# nothing but the named tables was created
	[ "$(psql_target "SELECT to_regclass('public.tz') IS NULL AND to_regclass('public.\"order items\"') IS NULL")" = t ]
	# primary keys came after the data
	[ "$(psql_target "SELECT count(*) FROM pg_index WHERE indrelid = '\"Order Items\"'::regclass AND indisprimary")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM pg_attribute WHERE attrelid = '\"Order Items\"'::regclass AND attname = 'Qty'")" -eq 1 ]
	[ "$(psql_target "SELECT count(*) FROM pg_inherits WHERE inhparent = 'm'::regclass")" -eq 2 ]
}

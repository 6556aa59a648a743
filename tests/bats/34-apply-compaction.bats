#!/usr/bin/env bats
# Batch compaction and set statements (trellara-applyd(1), COMPACTION):
# a backlog applied in batches that fold, against real PostgreSQL.  Each
# test lets capture write the whole backlog first, so that applyd's
# batches really hold many source transactions.

load helpers/common

setup() {
	trellara_setup
	for side in source target; do
		psql_$side "CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, note text)" \
			"ALTER TABLE accounts ALTER COLUMN note SET STORAGE EXTERNAL" \
			"CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))" \
			"CREATE TABLE loose (x int, y text)" \
			"CREATE TABLE uniq (id int PRIMARY KEY, code text UNIQUE)"
	done
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts, pairs, loose, uniq"
	TABLES="public.accounts,public.pairs,public.loose,public.uniq"
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	export TRELLARA_STATUS_INTERVAL_MS=200
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

# the numbers of applyd's last "applyd compaction:" line
compaction_counts() {
	grep -o 'applyd compaction: [0-9]* changes received, [0-9]* folded away, [0-9]* statements' "$TEST_DIR/applyd.log" |
		tail -1 | tr -cs '0-9' ' '
	echo
}

# A backlog with every chain compaction folds: insert+updates, updates of
# TOASTed rows that leave the big column alone, insert+delete, delete then
# insert of the same key, key changes of rows inserted in the batch and of
# rows that were there before, a keyless table, and a truncate.
backlog() {
	psql_source "INSERT INTO accounts SELECT g, 'owner ' || g, g, CASE WHEN g % 10 = 0 THEN repeat('toast ', 3000) END FROM generate_series(1, 400) g"
	psql_source "INSERT INTO pairs SELECT g, 'k' || g, g FROM generate_series(1, 50) g"
	for i in $(seq 1 40); do
		printf 'BEGIN; UPDATE accounts SET balance = balance + %d WHERE id IN (%d, %d, 10); ' "$i" "$i" "$((i + 100))"
		printf 'INSERT INTO accounts VALUES (%d, %s, 0, NULL); UPDATE accounts SET owner = %s WHERE id = %d; ' \
			"$((1000 + i))" "'new $i'" "'renamed $i'" "$((1000 + i))"
		printf 'INSERT INTO accounts VALUES (%d, %s, 0, NULL); DELETE FROM accounts WHERE id = %d; ' \
			"$((2000 + i))" "'gone'" "$((2000 + i))"
		printf 'DELETE FROM accounts WHERE id = %d; INSERT INTO accounts VALUES (%d, %s, -1, NULL); ' \
			"$((200 + i))" "$((200 + i))" "'again $i'"
		printf 'UPDATE pairs SET v = v + 1 WHERE a = %d; INSERT INTO pairs VALUES (%d, %s, 0); ' "$(((i % 5) + 1))" "$((100 + i))" "'n'"
		printf 'UPDATE pairs SET b = %s WHERE a = %d; ' "'moved'" "$((100 + i))"
		printf 'INSERT INTO loose VALUES (%d, %s), (%d, NULL); COMMIT;\n' "$i" "'l'" "$i"
	done >"$TEST_DIR/backlog.sql"
	psql_source <"$TEST_DIR/backlog.sql"
	# key changes of rows that were there before the batch, a delete of an
	# updated row, a truncate in the middle
	psql_source "UPDATE pairs SET b = 'shifted' WHERE a BETWEEN 20 AND 25" \
		"UPDATE accounts SET id = id + 5000 WHERE id BETWEEN 300 AND 310" \
		"UPDATE accounts SET balance = 7 WHERE id = 320" \
		"DELETE FROM accounts WHERE id = 320" \
		"UPDATE accounts SET note = note || 'tail' WHERE id = 30" \
		"TRUNCATE loose" \
		"INSERT INTO loose VALUES (1, 'after')"
}

@test "compaction: a backlog of every kind of chain is folded and the target ends identical" {
	backlog
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts pairs loose uniq
	# the TOASTed values survived updates that did not send them
	local toasted
	toasted=$(psql_source "SELECT count(*) FROM accounts WHERE length(note) = 18000")
	[ "$toasted" -ge 30 ]
	[ "$(psql_target "SELECT count(*) FROM accounts WHERE length(note) = 18000")" -eq "$toasted" ]
	[ "$(psql_target "SELECT length(note) FROM accounts WHERE id = 30")" -eq 18004 ]
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r received folded statements < <(compaction_counts)
	# every change of the backlog was received; chains folded; runs became
	# set statements (far fewer statements than changes)
	[ "$received" -ge 700 ]
	[ "$folded" -ge 200 ]
	[ "$statements" -lt $((received / 4)) ]
	bg_stop capture TERM
}

@test "compaction off (apply.compaction: false): the same backlog, one statement per change, identical" {
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576 --set apply.compaction=false
	backlog
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts pairs loose uniq
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r received folded statements < <(compaction_counts)
	[ "$folded" -eq 0 ]
	[ "$statements" -ge "$received" ]
	bg_stop capture TERM
}

@test "compaction: values traded on a unique column fail the folded batch, which then applies one transaction at a time" {
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO uniq VALUES (1, 'a'), (2, 'b')"
	caught_up
	bg_stop applyd TERM
	# each transaction trades the two codes through a temporary one, valid
	# on the source; five of them folded are one UPDATE statement in which
	# the two rows trade codes, which the target's unique index refuses
	for i in $(seq 1 5); do
		psql_source "BEGIN; UPDATE uniq SET code = 'tmp' WHERE id = 1; UPDATE uniq SET code = CASE code WHEN 'a' THEN 'b' ELSE 'a' END WHERE id = 2; UPDATE uniq SET code = CASE (SELECT code FROM uniq WHERE id = 2) WHEN 'a' THEN 'b' ELSE 'a' END WHERE id = 1; COMMIT"
	done
	[ "$(psql_source "SELECT string_agg(code, ',' ORDER BY id) FROM uniq")" = "b,a" ]
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal uniq
	grep -q "a batch of 5 transactions failed (23505: .*); retrying them one at a time" "$TEST_DIR/applyd.log"
	# (no culprit: nothing quarantined; whether "back to batches" is logged
	# depends on watermark frames after the batch, so it is not asserted)
	[ "$(psql_target "SELECT count(*) FROM trellara.quarantine")" -eq 0 ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

@test "compaction: a folded update of a row missing on the target still fails, and its transaction is quarantined" {
	psql_source "INSERT INTO accounts SELECT g, 'o', 0, NULL FROM generate_series(1, 20) g"
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	bg_stop applyd TERM
	psql_target "DELETE FROM accounts WHERE id = 7"
	for i in $(seq 1 10); do
		psql_source "UPDATE accounts SET balance = balance + 1 WHERE id IN ($i, $((i + 10)))"
	done
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	bg_wait applyd 60
	[ "$BG_STATUS" -eq 1 ]
	[ "$(psql_target "SELECT reason FROM trellara.quarantine")" = no_rows_matched ]
	# the transactions before the culprit are committed, the culprit is the
	# first that touches id 7
	[ "$(psql_target "SELECT balance FROM accounts WHERE id = 6")" -eq 1 ]
	[ "$(psql_target "SELECT balance FROM accounts WHERE id = 8")" -eq 0 ]
	grep -q "accounts (id=7)" "$TEST_DIR/applyd.log"
	bg_stop capture TERM
}

@test "compaction: a table whose trigger fires for a replica is not folded, and the trigger sees every change in order" {
	# (qualified: applyd's sessions have search_path empty)
	psql_target "CREATE TABLE audit (n serial, id int, balance numeric)" \
		"CREATE FUNCTION log_it() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN INSERT INTO public.audit (id, balance) VALUES (NEW.id, NEW.balance); RETURN NEW; END \$\$" \
		"CREATE TRIGGER log_it AFTER INSERT OR UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION log_it()" \
		"ALTER TABLE accounts ENABLE ALWAYS TRIGGER log_it"
	psql_source "INSERT INTO accounts VALUES (1, 'o', 0, NULL)"
	for i in $(seq 1 30); do
		psql_source "UPDATE accounts SET balance = $i WHERE id = 1" \
			"INSERT INTO pairs VALUES ($i, 'p', $i)" \
			"UPDATE pairs SET v = v + 1 WHERE a = $i"
	done
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts pairs
	# 1 insert + 30 updates, each seen by the trigger, in source order
	[ "$(psql_target "SELECT count(*) FROM audit")" -eq 31 ]
	[ "$(psql_target "SELECT string_agg(balance::text, ',' ORDER BY n) FROM audit")" = "$(seq -s, 0 30)" ]
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r received folded statements < <(compaction_counts)
	# pairs folded (insert + update), accounts not
	[ "$folded" -ge 30 ]
	bg_stop capture TERM
}

@test "compaction: dataset.tables[].apply.compaction: false keeps one table's changes as they came" {
	write_flow_file "$FLOW_FILE" --tables "$TABLES" --set stream.min_free_bytes=1048576
	# per-table key: rewrite the accounts entry with apply.compaction: false
	sed -i 's/^\( *\)name: "accounts"$/&\n\1apply:\n\1  compaction: false/' "$FLOW_FILE"
	grep -A2 'name: "accounts"' "$FLOW_FILE" | grep -q 'compaction: false'
	psql_source "INSERT INTO accounts VALUES (1, 'o', 0, NULL)"
	for i in $(seq 1 20); do
		psql_source "UPDATE accounts SET balance = $i WHERE id = 1"
	done
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	read -r received folded statements < <(compaction_counts)
	[ "$received" -eq 21 ]
	[ "$folded" -eq 0 ]
	[ "$statements" -eq 21 ]
	bg_stop capture TERM
}

# applyd's resident memory, kB
applyd_rss() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$(bg_pid applyd)/status"
}

@test "compaction: once idle, applyd gives back the memory a backlog's large segments grew" {
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	psql_source "INSERT INTO accounts VALUES (0, 'first', 0, 'x')"
	caught_up
	local fresh
	fresh=$(applyd_rss)
	bg_stop applyd TERM
	# 3000 transactions of 50 rows each: batches of 1000 of them, whose
	# segments hold megabytes
	for i in $(seq 0 2999); do
		echo "INSERT INTO accounts SELECT g, 'o' || g, g, repeat('n', 200) FROM generate_series($i * 50 + 1, $i * 50 + 50) g;"
	done >"$TEST_DIR/backlog.sql"
	psql -X -q -v ON_ERROR_STOP=1 -d "$SOURCE_URL" -f "$TEST_DIR/backlog.sql"
	captured
	bg_start applyd trellara-applyd --config "$FLOW_FILE"
	caught_up
	assert_tables_equal accounts
	# idle: what those segments grew is freed and given back (it stayed
	# about 20 MB above a fresh applyd's before)
	wait_for -t 10 -m "applyd's RSS back within 8 MB of a fresh one's ($fresh kB)" \
		"[ \"\$(applyd_rss)\" -le $((fresh + 8192)) ]"
	bg_stop applyd TERM
	[ "$BG_STATUS" -eq 0 ]
	bg_stop capture TERM
}

#!/usr/bin/env bats
# trellara-check against a real PostgreSQL: blockers with their fixes,
# --fix (publication, DDL evidence trigger, slot) and its idempotence,
# the JSON report, the DDL evidence messages, slot state, privileges,
# and no password ever printed.

load helpers/common

setup() {
	trellara_setup
	psql_source "CREATE TABLE accounts (id int PRIMARY KEY, owner text)" \
		"CREATE TABLE events (at timestamptz, what text)"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.events"
}

# the catalog rows --fix may create, with their xmin: equal before and
# after a run that changed nothing
fix_state() {
	psql_source "SELECT
		(SELECT string_agg(evtname || ':' || xmin::text, ',' ORDER BY evtname) FROM pg_event_trigger),
		(SELECT string_agg(p.oid::text || ':' || p.xmin::text, ',') FROM pg_proc p
			JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'trellara'),
		(SELECT string_agg(pubname || ':' || xmin::text, ',') FROM pg_publication),
		(SELECT string_agg(prrelid::regclass::text || ':' || xmin::text, ',' ORDER BY prrelid) FROM pg_publication_rel),
		(SELECT string_agg(slot_name, ',') FROM pg_replication_slots WHERE database = current_database())"
}

published_tables() {
	psql_source "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER BY tablename)
		FROM pg_publication_tables WHERE pubname = '$PUBLICATION_NAME'"
}

@test "a table without a primary key and with REPLICA IDENTITY DEFAULT is a blocker naming it, with its ALTER TABLE fix" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ ${lines[0]} == "source: postgresql:///$SOURCE_DB?host="* ]]
	[[ $output == *$'\nBLOCKER  replica_identity public.events: public.events has no primary key and REPLICA IDENTITY DEFAULT'* ]]
	[[ $output == *$'\n  fix: ALTER TABLE "public"."events" REPLICA IDENTITY FULL;\n'* ]]
	[[ $output == *$'\nok  replica_identity public.accounts: DEFAULT, primary key (id)\n'* ]]
	# the publication is missing too, with the statement and --fix as fixes
	[[ $output == *$'\nBLOCKER  publication: publication "trellara_pub" does not exist\n  fix: CREATE PUBLICATION "trellara_pub" FOR TABLE "public"."accounts", "public"."events";\n  or:  trellara check --config '"$FLOW_FILE"$' --fix\n'* ]]
	[[ $output == *$'\nwarn  ddl_trigger: '* ]]
	[ "${lines[-1]}" = "result: 2 blockers, 1 warnings" ]
	# a unique index on NOT NULL columns is offered instead of FULL
	psql_source "ALTER TABLE events ALTER COLUMN at SET NOT NULL" "CREATE UNIQUE INDEX events_at ON events (at)"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\n  fix: ALTER TABLE "public"."events" REPLICA IDENTITY USING INDEX "events_at";\n'* ]]
	# REPLICA IDENTITY NOTHING is a blocker even with a primary key
	psql_source "ALTER TABLE accounts REPLICA IDENTITY NOTHING"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  replica_identity public.accounts: public.accounts has REPLICA IDENTITY NOTHING'*$'\n  fix: ALTER TABLE "public"."accounts" REPLICA IDENTITY DEFAULT;\n'* ]]
}

@test "--fix creates the publication and the DDL trigger but not the replica identity; then it passes; a second --fix does nothing" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	[[ $output == *$'\nfixed: created publication "trellara_pub" for public.accounts, public.events\n'* ]]
	[[ $output == *$'\nfixed: installed the DDL evidence trigger'* ]]
	[[ $output == *$'\nok  publication: publication "trellara_pub" exists\n'* ]]
	[[ $output == *$'\nok  ddl_trigger: '* ]]
	[[ $output == *$'\nBLOCKER  replica_identity public.events: '* ]]
	[ "${lines[-1]}" = "result: 1 blockers, 0 warnings" ]
	[ "$(published_tables)" = "public.accounts,public.events" ]
	[ "$(psql_source "SELECT relreplident FROM pg_class WHERE oid = 'events'::regclass")" = d ]
	[ "$(psql_source "SELECT string_agg(evtname || ' ' || evtevent, ',' ORDER BY evtname) FROM pg_event_trigger")" = \
		"trellara_ddl ddl_command_end,trellara_ddl_drop sql_drop" ]

	psql_source "ALTER TABLE events REPLICA IDENTITY FULL"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nok  replica_identity public.events: FULL'* ]]
	[ "${lines[-1]}" = "result: 0 blockers, 0 warnings" ]

	before=$(fix_state)
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	[[ $output == *$'\nfixed: nothing to do: what --fix manages is already in place\n'* ]]
	[ "$(grep -c '^fixed: ' <<<"$output")" -eq 1 ]
	[ "$(fix_state)" = "$before" ]
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --format json
	[ "$(jq -c '.fixed' <<<"$output")" = "[]" ]
	[ "$(fix_state)" = "$before" ]
}

@test "--fix adds only the missing tables to an existing publication; a row filter is a blocker" {
	psql_source "CREATE PUBLICATION $PUBLICATION_NAME FOR TABLE accounts" "ALTER TABLE events REPLICA IDENTITY FULL"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  publication_table public.events: not in publication "trellara_pub"'*$'\n  fix: ALTER PUBLICATION "trellara_pub" ADD TABLE "public"."events";\n  or:  trellara check --config '* ]]
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --format json
	[ "$(jq -r '.fixed | map(.action) | join(",")' <<<"$output")" = "add_publication_tables,install_ddl_trigger" ]
	[ "$(jq -r '.fixed[0].sql' <<<"$output")" = 'ALTER PUBLICATION "trellara_pub" ADD TABLE "public"."events"' ]
	[ "$(published_tables)" = "public.accounts,public.events" ]
	if ((TRELLARA_PG_SERVER_MAJOR >= 15)); then
		psql_source "ALTER PUBLICATION $PUBLICATION_NAME SET TABLE accounts WHERE (id > 10), events"
		run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
		[[ $output == *$'\nBLOCKER  publication_table public.accounts: published with a row filter (WHERE (id > 10))'* ]]
	fi
}

@test "--format json parses with jq and carries the blockers, the identity and the masked source" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	jq -e . <<<"$output" >/dev/null
	[ "$(jq -r '.source' <<<"$output")" = "$SOURCE_URL" ]
	[ "$(jq -r '.identity.database' <<<"$output")" = "$SOURCE_DB" ]
	[ "$(jq -r '.identity.system_identifier' <<<"$output")" = "$(psql_source "SELECT system_identifier FROM pg_control_system()")" ]
	[ "$(jq -r '.identity.timeline' <<<"$output")" = "$(psql_source "SELECT timeline_id FROM pg_control_checkpoint()")" ]
	[ "$(jq -r '.identity.server_version_num' <<<"$output")" = "$(psql_source "SHOW server_version_num")" ]
	[ "$(jq '.blockers' <<<"$output")" -eq 2 ]
	[ "$(jq '.warnings' <<<"$output")" -eq 1 ]
	[ "$(jq '[.checks[] | select(.status == "blocker")] | length' <<<"$output")" -eq 2 ]
	blocker=$(jq -c '.checks[] | select(.name == "replica_identity" and .object == "public.events")' <<<"$output")
	[ "$(jq -r .status <<<"$blocker")" = blocker ]
	[ "$(jq -r .section <<<"$blocker")" = tables ]
	[ "$(jq -r .fix <<<"$blocker")" = 'ALTER TABLE "public"."events" REPLICA IDENTITY FULL;' ]
	[ "$(jq -r .fixable <<<"$blocker")" = false ]
	[ "$(jq -r '.checks[] | select(.name == "publication") | .fixable' <<<"$output")" = true ]
	[ "$(jq -r '.checks[] | select(.name == "wal_level") | .status + " " + .detail' <<<"$output")" = "ok logical" ]
	[ "$(jq -c '[.fix_requested, .fixed]' <<<"$output")" = '[false,[]]' ]
	# every check has the documented members and nothing else
	[ "$(jq -c '[.checks[] | keys] | unique' <<<"$output")" = '[["detail","fix","fixable","name","object","section","status"]]' ]
	[ "$(jq -c 'keys' <<<"$output")" = '["blockers","checks","fix_requested","fixed","identity","source","warnings"]' ]
}

@test "a configured table missing on the source is a blocker naming it; --fix publishes the others" {
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.ghost"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  table public.ghost: configured table public.ghost does not exist on the source\n  fix: create public.ghost on the source, or remove it from dataset.tables in '"$FLOW_FILE"$'\n'* ]]
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	[[ $output == *$'\nfixed: created publication "trellara_pub" for public.accounts\n'* ]]
	[[ $output == *$'\nBLOCKER  table public.ghost: '* ]]
	[ "${lines[-1]}" = "result: 1 blockers, 0 warnings" ]
	[ "$(published_tables)" = "public.accounts" ]
	# once it exists, --fix adds it
	psql_source "CREATE TABLE ghost (id int PRIMARY KEY)"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	[[ $output == *$'\nfixed: added public.ghost to publication "trellara_pub"\n'* ]]
	[ "$(published_tables)" = "public.accounts,public.ghost" ]
}

@test "--fix --create-slot creates a pgoutput slot, the slot checks report it, and a second run does nothing" {
	psql_source "ALTER TABLE events REPLICA IDENTITY FULL"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nok  slot: "'"$SLOT_NAME"'" does not exist yet'* ]]
	[[ $output != *"slot_active"* ]]
	run -64 --separate-stderr trellara-check --config "$FLOW_FILE" --create-slot
	[[ $stderr == *"--create-slot needs --fix"* ]]
	[ -z "$(psql_source "SELECT slot_name FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" ]

	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot
	[[ $output == *$'\nfixed: created logical replication slot "'"$SLOT_NAME"$'" (pgoutput)\n'* ]]
	[ "$(psql_source "SELECT slot_type || ' ' || plugin || ' ' || database FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")" = \
		"logical pgoutput $SOURCE_DB" ]
	[[ $output == *$'\nok  slot: "'"$SLOT_NAME"'" exists: logical, pgoutput, database "'"$SOURCE_DB"'", restart_lsn '* ]]
	[[ $output == *$'\nok  slot_active: not in use\n'* ]]
	[[ $output == *$'\nok  slot_wal_status: reserved\n'* ]]
	[[ $output == *$'\nok  slot_retained_wal: retains '* ]]

	before=$(fix_state)
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot --format json
	[ "$(jq -c .fixed <<<"$output")" = "[]" ]
	[ "$(jq -r '.checks[] | select(.name == "slot") | .status' <<<"$output")" = ok ]
	[ "$(fix_state)" = "$before" ]
}

@test "the DDL trigger emits a transactional trellara.ddl message with the statement, for DDL and drops" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	psql_source "SELECT pg_create_logical_replication_slot('ddl_probe_$TEST_N', 'test_decoding')" >/dev/null
	psql_source "ALTER TABLE events ADD COLUMN note text"
	psql_source "BEGIN" "CREATE TABLE scratch (id int)" "ROLLBACK"
	psql_source "CREATE TABLE doomed (id int)" "DROP TABLE doomed"
	run -0 psql_source "SELECT data FROM pg_logical_slot_peek_changes('ddl_probe_$TEST_N', NULL, NULL)
		WHERE data LIKE 'message: transactional: 1 prefix: trellara.ddl, %'"
	# shellcheck disable=SC2001 # a regular expression, not a fixed string
	messages=$(sed 's/^message: transactional: 1 prefix: trellara.ddl, sz: [0-9]* content://' <<<"$output")
	alter=$(jq -c 'select(.statement == "ALTER TABLE events ADD COLUMN note text")' <<<"$messages")
	[ "$(jq -r '[.event, .command_tag, .object_type, .schema_name, .object_identity] | join(" ")' <<<"$alter")" = \
		"ddl_command_end ALTER TABLE table public public.events" ]
	# the rolled-back DDL left no message
	[ -z "$(jq -c 'select(.object_identity == "public.scratch")' <<<"$messages")" ]
	[ "$(jq -r 'select(.event == "sql_drop" and .object_type == "table") | .object_identity + " " + .statement' <<<"$messages")" = \
		"public.doomed DROP TABLE doomed" ]
	# DDL by a role that is neither superuser nor REPLICATION is evidenced too, and not refused
	psql_source "CREATE ROLE ddl_user_$TEST_N LOGIN" "GRANT CREATE ON SCHEMA public TO ddl_user_$TEST_N"
	run -0 psql -X -qAt -d "postgresql://ddl_user_$TEST_N@/$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT" \
		-c "CREATE TABLE mine (id int)"
	run -0 psql_source "SELECT count(*) FROM pg_logical_slot_peek_changes('ddl_probe_$TEST_N', NULL, NULL)
		WHERE data LIKE '%\"statement\" : \"CREATE TABLE mine (id int)\"%'"
	[ "$output" -eq 1 ]
	# when the trigger itself fails, the DDL still succeeds, with a WARNING
	# (every overload: PostgreSQL 17 added a fourth argument, flush)
	psql_source "DO \$\$ DECLARE f regprocedure; BEGIN
		FOR f IN SELECT oid FROM pg_proc WHERE proname = 'pg_logical_emit_message' AND pronamespace = 'pg_catalog'::regnamespace LOOP
			EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
		END LOOP; END \$\$"
	run -0 --separate-stderr psql -X -qAt -d "postgresql://ddl_user_$TEST_N@/$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT" \
		-c "CREATE TABLE unlogged_evidence (id int)"
	[[ $stderr == *"WARNING:  trellara.emit_ddl: no DDL evidence emitted: permission denied for function pg_logical_emit_message"* ]]
	[ "$(psql_source "SELECT to_regclass('public.unlogged_evidence') IS NOT NULL")" = t ]
	psql_source "DROP TABLE mine, unlogged_evidence" "DROP OWNED BY ddl_user_$TEST_N" "DROP ROLE ddl_user_$TEST_N"
}

@test "a password in source.database_url never appears in the output, the logs or the JSON" {
	local user url
	user=$(id -un)
	url="postgresql://$user:secretpw@/$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.events" --set "source.database_url=\"$url\""
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" -v
	[[ ${lines[0]} == "source: postgresql://$user:***@/$SOURCE_DB?"* ]]
	[[ "$output$stderr" != *secretpw* ]]
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot --format json -v
	[[ $(jq -r .source <<<"$output") == "postgresql://$user:***@/"* ]]
	[[ "$output$stderr" != *secretpw* ]]
	# unreachable: the error names the masked URL only
	write_flow_file "$FLOW_FILE" --tables "public.accounts" \
		--set "source.database_url=\"postgresql://$user:secretpw@/$SOURCE_DB?host=$SOURCE_HOST&port=1\""
	run -69 --separate-stderr trellara-check --config "$FLOW_FILE"
	[ -z "$output" ]
	[[ $stderr == *"cannot connect to the source database"*"$user:***@"* ]]
	[[ "$output$stderr" != *secretpw* ]]
}

@test "a role without superuser or REPLICATION: blockers for both, and the DDL trigger SQL to run as a superuser" {
	local role=checker_$TEST_N
	psql_source "CREATE ROLE $role LOGIN" "GRANT CREATE ON DATABASE $SOURCE_DB TO $role" \
		"ALTER TABLE accounts OWNER TO $role" "ALTER TABLE events OWNER TO $role" \
		"ALTER TABLE events REPLICA IDENTITY FULL"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.events" \
		--set "source.database_url=\"postgresql://$role@/$SOURCE_DB?host=$SOURCE_HOST&port=$SOURCE_PORT\""
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --fix
	# it may create the publication (it owns the tables), not event triggers
	[[ $output == *$'\nfixed: created publication "trellara_pub" for public.accounts, public.events\n'* ]]
	[[ $output == *$'\nBLOCKER  replication_privilege: role "'"$role"'" has neither REPLICATION nor SUPERUSER'*$'\n  fix: ALTER ROLE "'"$role"$'" WITH REPLICATION;\n'* ]]
	[[ $output == *$'\nBLOCKER  replication_connection: '* ]]
	[[ $output == *$'\nwarn  ddl_trigger: function trellara.emit_ddl() is missing'* ]]
	[[ $output == *'as a superuser, run:'* ]]
	[ "$(psql_source "SELECT count(*) FROM pg_event_trigger")" -eq 0 ]
	[[ $stderr == *"event triggers need a superuser"* ]]

	# the printed SQL is what a superuser runs, and then the check passes
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	jq -r '.checks[] | select(.name == "ddl_trigger") | .fix' <<<"$output" | sed '1d' | psql_source
	psql_source "ALTER ROLE $role REPLICATION"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nok  ddl_trigger: '* ]]
	[[ $output == *$'\nok  replication_connection: IDENTIFY_SYSTEM answered'* ]]
	psql_source "REASSIGN OWNED BY $role TO CURRENT_USER" "DROP OWNED BY $role" "DROP ROLE $role"
}

@test "a slot held by another client is a warning with the pg_terminate_backend fix" {
	psql_source "ALTER TABLE events REPLICA IDENTITY FULL"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot
	bg_start recvlogical "$PG_BINDIR/pg_recvlogical" -d "$SOURCE_URL" --slot "$SLOT_NAME" --start -f /dev/null \
		-o proto_version=1 -o "publication_names=$PUBLICATION_NAME"
	wait_for "psql_source \"SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME' AND active\" | grep -q 1"
	pid=$(psql_source "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$SLOT_NAME'")
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nwarn  slot_active: active elsewhere: held by pid '"$pid"' (application_name "pg_recvlogical")'*$'\n  fix: SELECT pg_terminate_backend('"$pid"$');\n'* ]]
	bg_stop recvlogical TERM
}

@test "WAL retained beyond source.wal_retention_warn_bytes is a warning" {
	psql_source "ALTER TABLE events REPLICA IDENTITY FULL"
	write_flow_file "$FLOW_FILE" --tables "public.accounts,public.events" --set source.wal_retention_warn_bytes=4096
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE" --fix --create-slot
	psql_source "INSERT INTO accounts SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g"
	run -0 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nwarn  slot_retained_wal: retains '*$' of WAL, over source.wal_retention_warn_bytes 4096 bytes (4.0 kB)\n  fix: trellara capture --config '"$FLOW_FILE"$'\n'* ]]
	[ "${lines[-1]}" = "result: 0 blockers, 1 warnings" ]
}

@test "failover slots and idle_replication_slot_timeout: said explicitly when the server is too old for them" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE" --format json
	failover=$(jq -r '.checks[] | select(.name == "failover_slots") | .status + ": " + .detail' <<<"$output")
	idle=$(jq -r '.checks[] | select(.name == "idle_replication_slot_timeout") | .status + ": " + .detail' <<<"$output")
	keep=$(jq -r '.checks[] | select(.name == "max_slot_wal_keep_size") | .status + ": " + .detail' <<<"$output")
	if ((TRELLARA_PG_SERVER_MAJOR < 17)); then
		[[ $failover == "ok: not available on PostgreSQL $TRELLARA_PG_SERVER_MAJOR."*" (failover slots were added in 17)"* ]]
	else
		[[ $failover == ok:* || $failover == warn:* ]]
	fi
	if ((TRELLARA_PG_SERVER_MAJOR < 18)); then
		[[ $idle == "ok: not available on PostgreSQL $TRELLARA_PG_SERVER_MAJOR."*" (added in 18)"* ]]
	else
		[[ $idle == "ok: 0 (disabled)"* ]]
	fi
	[[ $keep == "ok: -1 (unlimited)"* ]]
	# a max_slot_wal_keep_size below the warning threshold would invalidate the slot first
	psql_admin source "ALTER SYSTEM SET max_slot_wal_keep_size = '64MB'" "SELECT pg_reload_conf()" >/dev/null
	wait_for "[ \"\$(psql_source 'SHOW max_slot_wal_keep_size')\" = 64MB ]"
	run --separate-stderr trellara-check --config "$FLOW_FILE"
	psql_admin source "ALTER SYSTEM RESET max_slot_wal_keep_size" "SELECT pg_reload_conf()" >/dev/null
	wait_for "[ \"\$(psql_source 'SHOW max_slot_wal_keep_size')\" = -1 ]"
	[ "$status" -eq 1 ]
	[[ $output == *$'\nwarn  max_slot_wal_keep_size: 67108864 bytes (64.0 MB): the slot is invalidated before it reaches source.wal_retention_warn_bytes'* ]]
}

@test "a stream bound to another source system is a blocker naming both" {
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nok  source_identity: system identifier '*"(no stream at \"$STREAM_DIR\" yet"* ]]
	real=$(psql_source "SELECT system_identifier FROM pg_control_system()")
	mkdir -p "$STREAM_DIR"
	printf 'format_version=1\nsource_id=%s\nflow=x\nsystem_identifier=%s\ndatabase=%s\n' "$SOURCE_ID" "$real" "$SOURCE_DB" >"$STREAM_DIR/meta"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nok  source_identity: system identifier '"$real"', database "'"$SOURCE_DB"'", timeline 1 (matches the stream at'* ]]
	sed -i 's/^system_identifier=.*/system_identifier=1234567890123456789/' "$STREAM_DIR/meta"
	run -1 --separate-stderr trellara-check --config "$FLOW_FILE"
	[[ $output == *$'\nBLOCKER  source_identity: system identifier '"$real"*'belongs to system identifier 1234567890123456789'* ]]
}

@test "usage errors are 64 and a broken flow file is 78, with nothing on stdout" {
	run -64 --separate-stderr trellara-check
	run -64 --separate-stderr trellara-check --config "$FLOW_FILE" --format yaml
	[[ $stderr == *'--format must be text or json'* ]]
	run -64 --separate-stderr trellara-check --config "$FLOW_FILE" extra
	printf 'config_version: 3\n' >"$TEST_DIR/bad.yml"
	run -78 --separate-stderr trellara-check --config "$TEST_DIR/bad.yml"
	[ -z "$output" ]
	run -0 --separate-stderr trellara-check --version
	[[ $output == "trellara-check "* ]]
}

#!/usr/bin/env bats
# No planted code runs as Trellara's role. A low-privilege role that may
# create objects in public (as in every database upgraded from PostgreSQL
# 14 or older) plants, on both servers, functions, aggregates and
# operators named after every function the programs' SQL calls (found by
# helpers/sql-function-names.sh from the C sources' string literals) with
# argument types that match better than pg_catalog's (name, oid, regclass,
# ...). Every session Trellara opens has search_path empty (pgconn.h), so
# check, the snapshot, capture, applyd, status, verify, repair-plan,
# contract-test, sequences and cutover never resolve one: the planted
# sequence each of them advances (outside any transaction) is never used.

load helpers/common

setup() {
	trellara_setup
	export METRICS_DIR="$TEST_DIR/metrics"
	export TRELLARA_STATUS_INTERVAL_MS=200 TRELLARA_RECONNECT_BASE_MS=100
	export TRELLARA_RUN_BACKOFF_BASE_MS=100 TRELLARA_RUN_BACKOFF_CAP_MS=1000 TRELLARA_RUN_DRAIN_SECONDS=20
}

teardown() {
	trellara_teardown
}

# plant SIDE: mallory's objects in SIDE's test database
plant() {
	local side=$1 url names
	case $side in source) url=$SOURCE_URL ;; target) url=$TARGET_URL ;; esac
	names=$("$BATS_TEST_DIRNAME/helpers/sql-function-names.sh" "$BATS_TEST_DIRNAME/../../cmd" "$BATS_TEST_DIRNAME/../../common")
	# the scan found the calls this test is about
	[[ " $names " == *" quote_ident "* && " $names " == *" string_agg "* && " $names " == *" format "* ]]
	psql_admin "$side" "DO \$\$ BEGIN CREATE ROLE mallory; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
	_trellara_psql "$url" -v names="$names" -f - >/dev/null <<-'SQL'
		GRANT CREATE ON SCHEMA public TO mallory;
		SET ROLE mallory;
		SELECT set_config('planted.names', :'names', false);
		CREATE SEQUENCE public.pwned;
		GRANT USAGE ON SEQUENCE public.pwned TO PUBLIC;
		-- the planting itself resolves nothing it plants
		SET search_path = pg_catalog;
		CREATE FUNCTION public.pwned_note(what text) RETURNS void LANGUAGE plpgsql AS $f$
		BEGIN
			PERFORM nextval('public.pwned');
			RAISE WARNING 'PWNED % ran as %', what, current_user;
		END $f$;
		CREATE FUNCTION public.pwned_sfunc(state text, v anyelement) RETURNS text LANGUAGE plpgsql AS $f$
		BEGIN PERFORM public.pwned_note('an aggregate'); RETURN state; END $f$;
		CREATE FUNCTION public.pwned_sfunc2(state text, v anyelement, w text) RETURNS text LANGUAGE plpgsql AS $f$
		BEGIN PERFORM public.pwned_note('an aggregate'); RETURN state; END $f$;
		DO $d$
		DECLARE
			n text; s text; o text; l text; r text;
			made int := 0;
		BEGIN
			FOREACH n IN ARRAY string_to_array(current_setting('planted.names'), ' ') LOOP
				FOREACH s IN ARRAY ARRAY['name', 'name, name', 'name, text', 'text, name', 'oid', 'regclass',
					'integer', 'bigint', 'name, integer', 'regclass, text', 'text, regclass', 'oid, oid',
					'pg_lsn', 'pg_lsn, pg_lsn', 'name, name, name', 'text, text, text, text'] LOOP
					BEGIN
						EXECUTE format('CREATE FUNCTION public.%I(%s) RETURNS text LANGUAGE plpgsql AS %L',
							n, s, format('BEGIN PERFORM public.pwned_note(%L); RETURN NULL; END', n || '(' || s || ')'));
						made := made + 1;
					EXCEPTION WHEN others THEN NULL;
					END;
				END LOOP;
				FOREACH s IN ARRAY ARRAY['name', 'oid', 'regclass', 'integer', 'bigint', 'pg_lsn', 'boolean'] LOOP
					BEGIN
						EXECUTE format('CREATE AGGREGATE public.%I(%s) (SFUNC = public.pwned_sfunc, STYPE = text)', n, s);
						made := made + 1;
					EXCEPTION WHEN others THEN NULL;
					END;
				END LOOP;
				BEGIN
					EXECUTE format('CREATE AGGREGATE public.%I(name, text) (SFUNC = public.pwned_sfunc2, STYPE = text)', n);
					made := made + 1;
				EXCEPTION WHEN others THEN NULL;
				END;
			END LOOP;
			-- operators on argument pairs pg_catalog matches only through a cast
			FOREACH o IN ARRAY ARRAY['=', '<>', '<', '>', '<=', '>=', '||', '~~', '~', '@>', '<@', '&&', '-', '+'] LOOP
				FOREACH s IN ARRAY ARRAY['name:text', 'text:name', 'name:name', 'oid:bigint', 'oid:integer',
					'regclass:text', 'text:regclass', 'regclass:regclass', 'pg_lsn:text', 'text:pg_lsn'] LOOP
					l := split_part(s, ':', 1);
					r := split_part(s, ':', 2);
					BEGIN
						EXECUTE format('CREATE FUNCTION public.pwned_op_%s_%s(%s, %s) RETURNS boolean LANGUAGE plpgsql AS %L',
							replace(l, ' ', '_'), replace(r, ' ', '_'), l, r,
							'BEGIN PERFORM public.pwned_note(''an operator''); RETURN NULL; END');
					EXCEPTION WHEN others THEN NULL;
					END;
					BEGIN
						EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.pwned_op_%s_%s)',
							o, l, r, replace(l, ' ', '_'), replace(r, ' ', '_'));
						made := made + 1;
					EXCEPTION WHEN others THEN NULL;
					END;
				END LOOP;
			END LOOP;
			RAISE NOTICE 'planted %', made;
			PERFORM set_config('planted.made', made::text, false);
		END $d$;
		SELECT current_setting('planted.made');
	SQL
}

# pwned SIDE: how many times a planted object ran there
pwned() {
	psql_"$1" "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.pwned"
}

# not_pwned STEP: none ran on either side so far; else the servers' lines
not_pwned() {
	local side n status=0
	for side in source target; do
		n=$(pwned "$side")
		if ((n != 0)); then
			printf 'after %s: planted objects ran %d times on the %s:\n' "$1" "$n" "$side" >&2
			grep -h 'PWNED' "$TRELLARA_FILE_DIR/$side/server.log" | sort | uniq -c | sort -rn | head -n 20 >&2
			status=1
		fi
	done
	return "$status"
}

@test "functions, aggregates and operators planted in public on both servers: the whole flow, status, verify, repair-plan, contract-test, sequences and cutover never run one" {
	psql_source "CREATE TABLE public.items (id int PRIMARY KEY, name text NOT NULL, qty int)" \
		"CREATE TABLE public.orders (id bigserial PRIMARY KEY, item int, note text)" \
		"INSERT INTO public.items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 200) g" \
		"INSERT INTO public.orders (item, note) SELECT g % 200 + 1, 'order ' || g FROM generate_series(1, 100) g"
	write_flow_file "$FLOW_FILE" --tables "public.items public.orders" --set stream.min_free_bytes=1048576 \
		--set observability.metrics_dir="\"$METRICS_DIR\""
	plant source
	plant target
	# from here on, this test's own sessions resolve nothing in public either
	export TRELLARA_PSQL_OPTIONS='-c search_path='
	# planted: the scan's names gave thousands of objects, and one of them
	# is the better match the snapshot's catalog query met before
	[ "$(psql_source "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace")" -gt 1000 ]
	[ "$(psql_source "SELECT count(*) FROM pg_operator WHERE oprnamespace = 'public'::regnamespace")" -gt 50 ]
	[ "$(psql_source "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname = 'quote_ident' AND proargtypes = '19'")" -eq 1 ]
	not_pwned "planting"

	run -0 trellara-check --config "$FLOW_FILE" --fix
	not_pwned "trellara-check --fix"
	run -0 trellara-snapshot --config "$FLOW_FILE" --create-tables
	not_pwned "trellara-snapshot"
	bg_start run trellara run --config "$FLOW_FILE"
	wait_for -t 120 -m "the flow is ready" flow_ready
	psql_source "INSERT INTO public.items SELECT g, 'more ' || g, g % 5 FROM generate_series(201, 300) g" \
		"UPDATE public.items SET qty = qty + 1 WHERE id % 3 = 0" "DELETE FROM public.items WHERE id % 11 = 0" \
		"INSERT INTO public.orders (item, note) SELECT g % 200 + 1, 'more ' || g FROM generate_series(1, 50) g"
	caught_up 60
	run -0 trellara status --config "$FLOW_FILE" --format json --rate-seconds 0
	not_pwned "capture, applyd and status"
	# the stream carries rows, not sequences: synced before verify
	run -0 trellara-sequences sync --config "$FLOW_FILE"
	run -0 trellara-verify --config "$FLOW_FILE"
	[[ $output == *"result: CONVERGED"* ]]
	not_pwned "trellara-sequences sync and trellara-verify"

	# a divergence to repair: a row gone from the target
	psql_target "DELETE FROM public.items WHERE id = 5"
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	echo "$output" >"$TEST_DIR/verify.json"
	run -0 trellara-repair-plan --config "$FLOW_FILE" --from "$TEST_DIR/verify.json" --apply
	[[ $output == *"result: CONVERGED"* ]]
	not_pwned "trellara-repair-plan --apply"

	run -1 trellara-contract-test --config "$FLOW_FILE" --pin "$TEST_DIR/contract.json"
	run -0 trellara-contract-test --config "$FLOW_FILE" --pin "$TEST_DIR/contract.json" --update
	run -0 trellara-contract-test --config "$FLOW_FILE" --pin "$TEST_DIR/contract.json"
	run -0 trellara-sequences list --config "$FLOW_FILE"
	not_pwned "trellara-contract-test and trellara-sequences list"

	run -0 --separate-stderr trellara cutover --config "$FLOW_FILE" --lock-source
	[[ $output == *"result: CONVERGED"* ]]
	bg_wait run 30
	[ "$BG_STATUS" -eq 0 ]
	not_pwned "trellara cutover"
	assert_tables_equal public.items public.orders
	# the target's sequence synced past the source's: the first insert fits
	psql_target "INSERT INTO public.orders (item, note) VALUES (1, 'after cutover')"
}

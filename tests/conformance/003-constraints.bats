#!/usr/bin/env bats
# PostgreSQL's src/test/subscription/t/003_constraints.pl through a flow:
# a foreign key is not enforced on the target (applyd applies in the
# replica role), a TOASTed value crosses, and a trigger the target enables
# as REPLICA fires during apply and may filter rows.

load helpers/conformance

@test "003: a foreign key the source no longer has is not enforced on the target; a TOASTed value crosses; verify CONVERGED" {
	both "CREATE TABLE tab_fk (bid int PRIMARY KEY)"
	psql_source "CREATE TABLE tab_fk_ref (id int PRIMARY KEY, junk text, bid int REFERENCES tab_fk (bid))"
	# column order intentionally different on the target
	psql_target "CREATE TABLE tab_fk_ref (id int PRIMARY KEY, bid int REFERENCES tab_fk (bid), junk text)"
	conf_flow "public.tab_fk,public.tab_fk_ref"
	conf_run
	psql_source "INSERT INTO tab_fk (bid) VALUES (1)"
	# large enough to be stored out of line
	psql_source "INSERT INTO tab_fk_ref (id, bid, junk) VALUES (1, 1, repeat(pi()::text, 20000))"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk")" = "1|1|1" ]
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk_ref")" = "1|1|1" ]
	[ "$(psql_target "SELECT md5(junk) FROM tab_fk_ref")" = "$(psql_source "SELECT md5(repeat(pi()::text, 20000))")" ]
	# the source drops its foreign key (the scenario drops the referenced
	# table with CASCADE; dropping a flow table is another matter); the
	# target keeps its own, which apply does not enforce
	psql_source "ALTER TABLE tab_fk_ref DROP CONSTRAINT tab_fk_ref_bid_fkey"
	psql_source "INSERT INTO tab_fk_ref (id, bid) VALUES (2, 2)"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk_ref")" = "2|1|2" ]
	[ "$(psql_target "SELECT count(*) FROM pg_constraint WHERE conname = 'tab_fk_ref_bid_fkey'")" -eq 1 ]
	assert_tables_equal tab_fk "(SELECT id, junk, bid FROM tab_fk_ref) t"
	assert_converged
	conf_stop
}

# The scenario's trigger also returns NULL for updates; PostgreSQL's apply
# worker then moves on.  applyd counts the rows each change touched: an
# update that touched none is "no row matched" and is quarantined (the
# flow fails closed rather than leave the target behind unnoticed).
@test "003: a target trigger enabled as REPLICA fires during apply: an insert it filters is a divergence verify names; an update it suppresses stops the flow, quarantined" {
	both "CREATE TABLE tab_fk_ref (id int PRIMARY KEY, junk text, bid int)"
	psql_target "CREATE FUNCTION filter_basic_dml_fn() RETURNS TRIGGER AS \$\$
		BEGIN
			IF (TG_OP = 'INSERT') THEN
				IF (NEW.id < 10) THEN RETURN NEW; ELSE RETURN NULL; END IF;
			ELSIF (TG_OP = 'UPDATE') THEN
				RETURN NULL;
			ELSE
				RAISE WARNING 'Unknown action';
				RETURN NULL;
			END IF;
		END;
		\$\$ LANGUAGE plpgsql" \
		"CREATE TRIGGER filter_basic_dml_trg BEFORE INSERT OR UPDATE OF bid ON tab_fk_ref
			FOR EACH ROW EXECUTE PROCEDURE filter_basic_dml_fn()" \
		"ALTER TABLE tab_fk_ref ENABLE REPLICA TRIGGER filter_basic_dml_trg"
	conf_flow public.tab_fk_ref
	conf_run
	psql_source "INSERT INTO tab_fk_ref (id, bid) VALUES (1, 1), (2, 2)"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk_ref")" = "2|1|2" ]
	# the trigger skips this insert on the target (as in the scenario)
	psql_source "INSERT INTO tab_fk_ref (id, bid) VALUES (10, 10)"
	conf_synced
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk_ref")" = "2|1|2" ]
	# the target's own trigger made it differ: verify names the row
	run -1 --separate-stderr trellara-verify --config "$FLOW_FILE" --format json
	[ "$(jq -r '[.tables[] | .table as $t | .divergences[] | "\($t) \(.kind) \(.key_values | map(join(",")) | join(" "))"] | join("; ")' <<<"$output")" = \
		"public.tab_fk_ref missing_in_target 10" ]
	# an update the trigger suppresses: quarantined, the flow stops
	psql_source "UPDATE tab_fk_ref SET bid = 2 WHERE bid = 1"
	bg_wait run 60
	[ "$BG_STATUS" -eq 1 ]
	[ "$(psql_target "SELECT reason FROM trellara.quarantine")" = no_rows_matched ]
	[[ "$(psql_target "SELECT detail FROM trellara.quarantine")" == *"public.tab_fk_ref (id=1)"* ]]
	[ "$(psql_target "SELECT count(*) || '|' || min(bid) || '|' || max(bid) FROM tab_fk_ref")" = "2|1|2" ]
}

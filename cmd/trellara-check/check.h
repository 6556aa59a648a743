/*
 * check.h - "is the source safe to capture?" (trellara-check(1)).
 *
 * check_run() connects to the flow's source, inspects it read-only
 * (server settings, privileges, publication, configured tables and their
 * replica identity, the slot, the DDL evidence trigger, the source
 * identity; and, on the target, whether its role may set
 * session_replication_role, which trellara-applyd needs) and fills a
 * struct check_report of named checks, each ok,
 * warn or blocker with the command that fixes it.  With fix set it first
 * makes the changes --fix is allowed to make (publication, DDL trigger,
 * optionally the slot), only those that are missing, records each one in
 * report->fixed, and then inspects again, so the report describes the
 * source as it is afterwards.  It never changes a replica identity.
 *
 * Errors: an unreachable source, or an inspection query that fails, is
 * logged here and returned as -1 (main exits 69).  A --fix statement that
 * fails is logged and becomes a blocker named "fix" in the report.
 */
#ifndef TRELLARA_CHECK_H
#define TRELLARA_CHECK_H

#include "trellara/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum check_status { CHECK_OK = 0, CHECK_WARN, CHECK_BLOCKER };

struct check_item {
	const char *section; /* static: server, publication, tables, slot, ddl, identity, target, fix */
	const char *name;    /* static: a stable check name (trellara-check(1)) */
	char *object;        /* owned; "schema.table", or NULL */
	enum check_status status;
	char *detail;        /* owned */
	char *fix;           /* owned; SQL or a trellara command; NULL when ok */
	bool fixable;        /* --fix would make this change */
};

/* One change --fix made. */
struct check_action {
	const char *action; /* static: create_publication, add_publication_tables, ... */
	char *detail;       /* owned */
	char *sql;          /* owned: what was run */
};

struct check_identity {
	char *system_identifier; /* owned */
	char *database;          /* owned */
	uint32_t timeline;
	char *server_version;    /* owned, "15.18" */
	int server_version_num;
	char *user;              /* owned */
	bool in_recovery;
};

struct check_report {
	char *source;     /* owned: masked source URL */
	char *config_path; /* owned */
	struct check_identity identity;
	struct check_item *items; /* owned */
	size_t n_items;
	struct check_action *fixed; /* owned */
	size_t n_fixed;
	bool fix_requested;
	int blockers, warnings;
};

struct check_options {
	const struct flow_config *config;
	bool fix;
	bool create_slot; /* with fix: create the slot when missing */
};

/* 0 with *report filled (free with check_report_free), or -1 (logged)
 * when the source cannot be reached or inspected; *report is then
 * zeroed. */
int check_run(const struct check_options *options, struct check_report *report);
void check_report_print_text(FILE *out, const struct check_report *report);
void check_report_print_json(FILE *out, const struct check_report *report);
void check_report_free(struct check_report *report);

#endif

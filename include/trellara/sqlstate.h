/*
 * sqlstate.h - what a PostgreSQL error code says about what to do next.
 * Pure and libpq-free (the apply core uses it); pgconn.h applies it to
 * a connection's last error.  The one list of transient SQLSTATEs.
 *
 *   SQLSTATE_CLASS_NONE        no SQLSTATE (NULL or ""): a client-side
 *                              failure; the caller looks at the connection
 *   SQLSTATE_CLASS_CONNECTION  the session is gone or going: class 08,
 *                              57P01..57P03 (shutdown, crash, cannot
 *                              connect now): reconnect
 *   SQLSTATE_CLASS_TRANSIENT   the server's state, not the statement's:
 *                              serialization failure, deadlock, lock or
 *                              statement timeout, read-only standby, I/O
 *                              error, disk full, too many connections:
 *                              run the same again after a backoff
 *   SQLSTATE_CLASS_PERMISSION  class 28 (authorization) and 42501
 *                              (insufficient privilege): an operator must
 *                              grant something; retrying cannot help
 *   SQLSTATE_CLASS_DATA        everything else: the statement or its data
 */
#ifndef TRELLARA_SQLSTATE_H
#define TRELLARA_SQLSTATE_H

enum sqlstate_class {
	SQLSTATE_CLASS_NONE = 0,
	SQLSTATE_CLASS_CONNECTION,
	SQLSTATE_CLASS_TRANSIENT,
	SQLSTATE_CLASS_PERMISSION,
	SQLSTATE_CLASS_DATA
};

enum sqlstate_class sqlstate_classify(const char *sqlstate);
/* "none", "connection", "transient", "permission", "data". */
const char *sqlstate_class_name(enum sqlstate_class c);

/* Why a session that worked ended, by the SQLSTATE of its last error, for
 * the *_disconnects_total{cause} metrics:
 *   SQLSTATE_END_TERMINATED   57P01: pg_terminate_backend, or the server
 *                             shutting down
 *   SQLSTATE_END_CRASHED      57P02: the server restarts after a crash
 *   SQLSTATE_END_LOST         no SQLSTATE: the connection closed or broke
 *                             (network, a killed server), or other class 08
 *   SQLSTATE_END_ERROR        any other error from the server */
enum sqlstate_end { SQLSTATE_END_TERMINATED, SQLSTATE_END_CRASHED, SQLSTATE_END_LOST, SQLSTATE_END_ERROR };
#define SQLSTATE_END_COUNT 4
enum sqlstate_end sqlstate_end_cause(const char *sqlstate);
/* "terminated", "server_crashed", "connection_lost", "error" */
const char *sqlstate_end_name(enum sqlstate_end e);

#endif

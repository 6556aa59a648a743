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

#endif

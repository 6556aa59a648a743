/*
 * conninfo.h - print connection strings without their secrets.
 *
 * Works on libpq URIs (postgresql://user:secret@host/db?password=...) and
 * key=value conninfo (password='se cret'); every password is replaced by
 * "***".  Pure string work, no libpq, so it is testable in isolation.
 */
#ifndef TRELLARA_CONNINFO_H
#define TRELLARA_CONNINFO_H

/* Returns a newly allocated masked copy (caller frees). */
char *conninfo_mask(const char *conninfo);

#endif

/*
 * lsn.h - PostgreSQL log sequence numbers: parse and format "X/X".
 */
#ifndef TRELLARA_LSN_H
#define TRELLARA_LSN_H

#include <stdbool.h>
#include <stdint.h>

#define LSN_FORMAT_LEN 18 /* "FFFFFFFF/FFFFFFFF" + NUL */

/* Parse "hi/lo" (hex, each 1-8 digits).  Returns false on anything else. */
bool lsn_parse(const char *text, uint64_t *lsn);
/* Formats into buf (at least LSN_FORMAT_LEN bytes); returns buf. */
char *lsn_format(uint64_t lsn, char *buf);

#endif

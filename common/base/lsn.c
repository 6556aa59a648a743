#include "trellara/lsn.h"

#include <stdio.h>

/* One half of "hi/lo": 1 to 8 hex digits, nothing else.  Stops at the
 * first non-hex byte and leaves *end there. */
static bool parse_half(const char *text, const char **end, uint32_t *half)
{
	uint32_t value = 0;
	int digits = 0;
	const char *p = text;
	for (;; p++) {
		unsigned digit;
		if (*p >= '0' && *p <= '9')
			digit = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			digit = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F')
			digit = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (++digits > 8)
			return false;
		value = (value << 4) | digit;
	}
	if (digits == 0)
		return false;
	*end = p;
	*half = value;
	return true;
}

bool lsn_parse(const char *text, uint64_t *lsn)
{
	uint32_t hi, lo;
	const char *p;
	if (!text || !parse_half(text, &p, &hi) || *p != '/')
		return false;
	if (!parse_half(p + 1, &p, &lo) || *p != '\0')
		return false;
	*lsn = ((uint64_t)hi << 32) | lo;
	return true;
}

char *lsn_format(uint64_t lsn, char *buf)
{
	snprintf(buf, LSN_FORMAT_LEN, "%X/%X", (unsigned)(lsn >> 32), (unsigned)(uint32_t)lsn);
	return buf;
}

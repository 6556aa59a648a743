#include "trellara/lsn.h"
#include "unit.h"

#include <stdint.h>

static void check_roundtrip(uint64_t lsn, const char *text)
{
	char buf[LSN_FORMAT_LEN];
	CHECK_STR(lsn_format(lsn, buf), text);
	uint64_t parsed = 0;
	CHECK(lsn_parse(text, &parsed));
	CHECK(parsed == lsn);
}

static void check_rejected(const char *text)
{
	uint64_t parsed = 42;
	if (lsn_parse(text, &parsed))
		fprintf(stderr, "accepted \"%s\"\n", text ? text : "(null)");
	CHECK(parsed == 42);
}

int main(void)
{
	check_roundtrip(0, "0/0");
	check_roundtrip(0x16B3748ULL, "0/16B3748");
	check_roundtrip(0x100000000ULL, "1/0");
	check_roundtrip(0xABCDEF0123456789ULL, "ABCDEF01/23456789");
	check_roundtrip(UINT64_MAX, "FFFFFFFF/FFFFFFFF");
	/* The longest form fits LSN_FORMAT_LEN exactly. */
	char buf[LSN_FORMAT_LEN];
	CHECK(strlen(lsn_format(UINT64_MAX, buf)) == LSN_FORMAT_LEN - 1);

	/* Lower case and leading zeros are read; output is canonical. */
	uint64_t lsn = 0;
	CHECK(lsn_parse("abcdef01/0000000a", &lsn));
	CHECK(lsn == 0xABCDEF010000000AULL);
	CHECK(lsn_parse("00000000/00000001", &lsn) && lsn == 1);

	check_rejected(NULL);
	check_rejected("");
	check_rejected("/");
	check_rejected("0/");
	check_rejected("/0");
	check_rejected("0");
	check_rejected("16B3748");
	check_rejected("0/0/0");
	check_rejected("0//0");
	check_rejected("123456789/0");  /* 9 digits */
	check_rejected("0/123456789");
	check_rejected("000000000/0");  /* 9 digits, even if zero */
	check_rejected("0/0 ");
	check_rejected(" 0/0");
	check_rejected("0 /0");
	check_rejected("0/ 0");
	check_rejected("0/0x");
	check_rejected("0x1/0");
	check_rejected("-1/0");
	check_rejected("+1/0");
	check_rejected("G/0");
	check_rejected("0/0\n");
	return unit_done("lsn");
}

#include "trellara/checksum.h"
#include "unit.h"

int main(void)
{
	/* Known CRC-32C check values (RFC 3720 appendix B.4 and "123456789"). */
	CHECK(crc32c(0, "123456789", 9) == 0xE3069283U);
	unsigned char zeros[32] = { 0 };
	CHECK(crc32c(0, zeros, 32) == 0x8A9136AAU);
	unsigned char ones[32];
	memset(ones, 0xff, sizeof ones);
	CHECK(crc32c(0, ones, 32) == 0x62A8AB43U);
	/* Incremental equals one-shot. */
	const char *text = "the quick brown fox jumps over the lazy dog, twice over";
	size_t len = strlen(text);
	uint32_t whole = crc32c(0, text, len);
	uint32_t part = crc32c(crc32c(0, text, 13), text + 13, len - 13);
	CHECK(whole == part);
	return unit_done("checksum");
}

/*
 * checksum.h - CRC-32C (Castagnoli), the frame and index checksum.
 * Uses the SSE4.2 instruction when the CPU has it, a table otherwise;
 * both give the same values (tests check the known vectors).
 */
#ifndef TRELLARA_CHECKSUM_H
#define TRELLARA_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (start with 0) over len bytes. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif

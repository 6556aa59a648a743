/*
 * clock.h - the two clocks Trellara reads, in microseconds.
 *
 * clock_mono_us() is CLOCK_MONOTONIC: for durations, deadlines, rates and
 * throttles (it never jumps when the wall clock is set).  clock_wall_us()
 * is CLOCK_REALTIME: only for timestamps that leave the process (frame
 * append times, standby status messages, reports).  Neither fails.
 */
#ifndef TRELLARA_CLOCK_H
#define TRELLARA_CLOCK_H

#include <stdint.h>

int64_t clock_mono_us(void);
int64_t clock_wall_us(void);

#endif

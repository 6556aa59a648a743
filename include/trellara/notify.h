/*
 * notify.h - systemd service notifications without libsystemd: the
 * documented NOTIFY_SOCKET datagram protocol (sd_notify(3)).
 *
 * notify_send("READY=1") sends one datagram with those bytes to the
 * AF_UNIX socket named by $NOTIFY_SOCKET: an absolute path, or an
 * abstract socket name written with a leading '@'.  With NOTIFY_SOCKET
 * unset or empty (not started by systemd with Type=notify) it does
 * nothing and returns 0, so daemons call it unconditionally.  Unlike
 * sd_notify(), it never unsets NOTIFY_SOCKET: the watchdog needs it for
 * the life of the process.
 *
 * The messages Trellara sends: READY=1 once the component can make safe
 * progress (capture: streaming from the slot into a recovered stream;
 * applyd: connected, checkpoint loaded, no open quarantine, reader
 * positioned), WATCHDOG=1 from the main loop, STOPPING=1 when a stop
 * was requested, STATUS=... free text for `systemctl status`.
 *
 * notify_watchdog_interval_us() is WATCHDOG_USEC when the watchdog is
 * meant for this process (WATCHDOG_PID unset or equal to getpid()), else
 * 0; systemd wants a WATCHDOG=1 at least every interval, and
 * sd_watchdog_enabled(3) advises every half interval, which
 * notify_watchdog_tick() does.
 *
 * Failures (a socket that cannot be reached, a bad address) are logged
 * once per call as warnings and returned as -1: a daemon keeps running
 * when systemd is not listening, and systemd's own timeouts decide.
 */
#ifndef TRELLARA_NOTIFY_H
#define TRELLARA_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#define ENV_NOTIFY_SOCKET "NOTIFY_SOCKET"
#define ENV_WATCHDOG_USEC "WATCHDOG_USEC"
#define ENV_WATCHDOG_PID "WATCHDOG_PID"

/* 1 sent, 0 nothing to do (NOTIFY_SOCKET unset), -1 failed (logged). */
int notify_send(const char *state);
/* notify_send of "STATUS=<text>" (printf format). */
int notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* µs, or 0 when no watchdog is configured for this process. */
uint64_t notify_watchdog_interval_us(void);

/* A watchdog the main loop ticks as often as it likes: sends WATCHDOG=1
 * when half the interval has passed since the last one. */
struct notify_watchdog {
	uint64_t interval_us; /* 0: disabled, tick does nothing */
	int64_t last_us;      /* CLOCK_MONOTONIC of the last WATCHDOG=1 */
};
void notify_watchdog_init(struct notify_watchdog *w);
/* 1 sent, 0 not due (or disabled), -1 failed (logged). */
int notify_watchdog_tick(struct notify_watchdog *w);

#endif

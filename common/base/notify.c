/*
 * notify.c - sd_notify's datagram protocol, by hand (see notify.h).
 */
#include "trellara/notify.h"

#include "trellara/clock.h"
#include "trellara/log.h"
#include "trellara/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *state)
{
	const char *where = getenv(ENV_NOTIFY_SOCKET);
	if (!where || !*where)
		return 0;
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t len = strlen(where);
	socklen_t addr_len;
	if (where[0] == '/') {
		if (len >= sizeof addr.sun_path) {
			log_warn("cannot notify systemd: NOTIFY_SOCKET \"%s\" is too long", where);
			return -1;
		}
		memcpy(addr.sun_path, where, len + 1);
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	} else if (where[0] == '@') {
		/* abstract namespace: a NUL byte, then the name (not NUL-terminated) */
		if (len > sizeof addr.sun_path) {
			log_warn("cannot notify systemd: NOTIFY_SOCKET \"%s\" is too long", where);
			return -1;
		}
		addr.sun_path[0] = '\0';
		memcpy(addr.sun_path + 1, where + 1, len - 1);
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		log_warn("cannot notify systemd: NOTIFY_SOCKET \"%s\" is neither an absolute path nor an abstract name (@...)",
			 where);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("cannot notify systemd: socket: %m");
		return -1;
	}
	int rc = 1;
	size_t n = strlen(state);
	ssize_t sent;
	do
		sent = sendto(fd, state, n, MSG_NOSIGNAL, (const struct sockaddr *)&addr, addr_len);
	while (sent < 0 && errno == EINTR);
	if (sent < 0) {
		log_warn("cannot notify systemd at \"%s\" (%.40s): %m", where, state);
		rc = -1;
	} else if ((size_t)sent != n) {
		log_warn("cannot notify systemd at \"%s\": short datagram (%zd of %zu bytes)", where, sent, n);
		rc = -1;
	}
	close(fd);
	return rc;
}

int notify_status(const char *fmt, ...)
{
	if (!getenv(ENV_NOTIFY_SOCKET))
		return 0;
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	/* one line: systemd takes the whole datagram, newlines separate assignments */
	for (char *p = text; *p; p++)
		if (*p == '\n')
			*p = ' ';
	char *message = xasprintf("STATUS=%s", text);
	int rc = notify_send(message);
	free(message);
	return rc;
}

static bool parse_positive(const char *text, unsigned long long *out)
{
	if (!text || !*text || *text == '-' || *text == '+')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || *end || v == 0)
		return false;
	*out = v;
	return true;
}

uint64_t notify_watchdog_interval_us(void)
{
	unsigned long long usec, pid;
	if (!parse_positive(getenv(ENV_WATCHDOG_USEC), &usec))
		return 0;
	const char *pid_text = getenv(ENV_WATCHDOG_PID);
	if (pid_text && *pid_text && (!parse_positive(pid_text, &pid) || pid != (unsigned long long)getpid()))
		return 0;
	return usec;
}

void notify_watchdog_init(struct notify_watchdog *w)
{
	w->interval_us = notify_watchdog_interval_us();
	w->last_us = 0;
}

int notify_watchdog_tick(struct notify_watchdog *w)
{
	if (w->interval_us == 0)
		return 0;
	int64_t now = clock_mono_us();
	if (w->last_us != 0 && now - w->last_us < (int64_t)(w->interval_us / 2))
		return 0;
	w->last_us = now;
	return notify_send("WATCHDOG=1");
}

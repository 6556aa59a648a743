/*
 * test_notify.c - notify_send against real AF_UNIX datagram sockets, as
 * systemd listens: a socket file in a temporary directory and an
 * abstract name; the exact bytes arrive, from this process (the kernel's
 * credentials, which NotifyAccess=main checks); no socket, no-op; the
 * watchdog interval and its half-interval ticks.
 */
#include "trellara/notify.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Binds a datagram socket that receives the sender's credentials. */
static int listen_at(const struct sockaddr_un *addr, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0 ||
	    bind(fd, (const struct sockaddr *)addr, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Receives one datagram (waits up to 1 s): its bytes, NUL-terminated,
 * and the sender pid; -1 when nothing arrived. */
static ssize_t receive(int fd, char *buf, size_t size, pid_t *sender)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 1000) != 1)
		return -1;
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(struct ucred))];
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = size - 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control };
	ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	*sender = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
			struct ucred cred;
			memcpy(&cred, CMSG_DATA(c), sizeof cred);
			*sender = cred.pid;
		}
	}
	return n;
}

static bool nothing_waiting(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, 50) == 0;
}

static void test_path_socket(const char *dir)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/notify", dir);
	int fd = listen_at(&addr, sizeof addr);
	CHECK(fd >= 0);
	setenv("NOTIFY_SOCKET", addr.sun_path, 1);
	char buf[600];
	pid_t sender = -1;
	const char *messages[] = { "READY=1", "WATCHDOG=1", "STOPPING=1" };
	for (size_t i = 0; i < 3; i++) {
		CHECK(notify_send(messages[i]) == 1);
		CHECK(receive(fd, buf, sizeof buf, &sender) == (ssize_t)strlen(messages[i]));
		CHECK_STR(buf, messages[i]);
		CHECK(sender == getpid());
	}
	/* STATUS= text: one datagram, newlines flattened */
	CHECK(notify_status("applied %d transactions\nsecond line", 42) == 1);
	CHECK(receive(fd, buf, sizeof buf, &sender) > 0);
	CHECK_STR(buf, "STATUS=applied 42 transactions second line");
	CHECK(nothing_waiting(fd));
	close(fd);
	/* nobody listening any more: a warning and -1, no crash, no SIGPIPE */
	unlink(addr.sun_path);
	CHECK(notify_send("READY=1") == -1);
}

static void test_abstract_socket(void)
{
	char name[80];
	snprintf(name, sizeof name, "trellara-test-notify-%ld-%ld", (long)getpid(), (long)time(NULL));
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	memcpy(addr.sun_path + 1, name, len); /* sun_path[0] = '\0': abstract */
	int fd = listen_at(&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len));
	CHECK(fd >= 0);
	char *env = xasprintf("@%s", name);
	setenv("NOTIFY_SOCKET", env, 1);
	char buf[64];
	pid_t sender = -1;
	CHECK(notify_send("READY=1") == 1);
	CHECK(receive(fd, buf, sizeof buf, &sender) == 7);
	CHECK_STR(buf, "READY=1");
	CHECK(sender == getpid());
	/* a longer name with the same prefix is another socket: nothing arrives here */
	char *other = xasprintf("@%sx", name);
	setenv("NOTIFY_SOCKET", other, 1);
	CHECK(notify_send("READY=1") == -1);
	CHECK(nothing_waiting(fd));
	close(fd);
	free(other);
	free(env);
}

static void test_unset_and_bad(void)
{
	unsetenv("NOTIFY_SOCKET");
	CHECK(notify_send("READY=1") == 0);
	CHECK(notify_status("x") == 0);
	setenv("NOTIFY_SOCKET", "", 1);
	CHECK(notify_send("READY=1") == 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	CHECK(notify_send("READY=1") == -1);
	char longpath[200];
	memset(longpath, 'a', sizeof longpath - 1);
	longpath[0] = '/';
	longpath[sizeof longpath - 1] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	CHECK(notify_send("READY=1") == -1);
	unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog_interval(void)
{
	char pid[32];
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	CHECK(notify_watchdog_interval_us() == 0);
	setenv("WATCHDOG_USEC", "30000000", 1);
	CHECK(notify_watchdog_interval_us() == 30000000);
	setenv("WATCHDOG_PID", pid, 1);
	CHECK(notify_watchdog_interval_us() == 30000000);
	setenv("WATCHDOG_PID", "1", 1); /* meant for another process */
	CHECK(getpid() == 1 || notify_watchdog_interval_us() == 0);
	setenv("WATCHDOG_PID", "12x", 1);
	CHECK(notify_watchdog_interval_us() == 0);
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "0", 1);
	CHECK(notify_watchdog_interval_us() == 0);
	setenv("WATCHDOG_USEC", "-5", 1);
	CHECK(notify_watchdog_interval_us() == 0);
	setenv("WATCHDOG_USEC", "abc", 1);
	CHECK(notify_watchdog_interval_us() == 0);
	unsetenv("WATCHDOG_USEC");
}

static void test_watchdog_ticks(const char *dir)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	snprintf(addr.sun_path, sizeof addr.sun_path, "%s/watchdog", dir);
	int fd = listen_at(&addr, sizeof addr);
	CHECK(fd >= 0);
	setenv("NOTIFY_SOCKET", addr.sun_path, 1);
	struct notify_watchdog w;
	unsetenv("WATCHDOG_USEC");
	notify_watchdog_init(&w);
	CHECK(notify_watchdog_tick(&w) == 0); /* disabled */
	CHECK(nothing_waiting(fd));
	setenv("WATCHDOG_USEC", "200000", 1); /* 0.2 s: a tick is due every 0.1 s */
	notify_watchdog_init(&w);
	CHECK(w.interval_us == 200000);
	char buf[64];
	pid_t sender;
	CHECK(notify_watchdog_tick(&w) == 1); /* the first tick always sends */
	CHECK(receive(fd, buf, sizeof buf, &sender) == 10);
	CHECK_STR(buf, "WATCHDOG=1");
	CHECK(notify_watchdog_tick(&w) == 0); /* not due yet */
	CHECK(nothing_waiting(fd));
	struct timespec ts = { 0, 120 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	CHECK(notify_watchdog_tick(&w) == 1);
	CHECK(receive(fd, buf, sizeof buf, &sender) == 10);
	CHECK_STR(buf, "WATCHDOG=1");
	close(fd);
	unlink(addr.sun_path);
	unsetenv("WATCHDOG_USEC");
	unsetenv("NOTIFY_SOCKET");
}

int main(void)
{
	char dir[] = "/tmp/trellara-test-notify.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	test_path_socket(dir);
	test_abstract_socket();
	test_unset_and_bad();
	test_watchdog_interval();
	test_watchdog_ticks(dir);
	rmdir(dir);
	return unit_done("test_notify");
}

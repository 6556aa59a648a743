#include "trellara/fault.h"

#include "trellara/defaults.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

/* Test hook state: the hit counter of the armed point.  Not program
 * state; nothing reads it but fault_point(). */
static unsigned long fault_hits;
/* The simulator's hook (fault.h), or none. */
static struct fault_hook fault_hook_current;

void fault_set_hook(const struct fault_hook *hook)
{
	if (hook)
		fault_hook_current = *hook;
	else
		fault_hook_current = (struct fault_hook){ 0 };
}

static bool fault_spec(const char *name, unsigned long *nth)
{
	const char *spec = getenv(ENV_FAULT);
	if (!spec || !*spec)
		return false;
	size_t len = strcspn(spec, ":");
	if (len != strlen(name) || strncmp(spec, name, len) != 0)
		return false;
	*nth = 1;
	if (spec[len] == ':') {
		char *end;
		unsigned long n = strtoul(spec + len + 1, &end, 10);
		if (*end == '\0' && n > 0)
			*nth = n;
	}
	return true;
}

bool fault_armed(const char *name)
{
	if (fault_hook_current.point)
		return fault_hook_current.armed && fault_hook_current.armed(fault_hook_current.ctx, name);
	unsigned long nth;
	return fault_spec(name, &nth);
}

void fault_point(const char *name)
{
	if (fault_hook_current.point) {
		fault_hook_current.point(fault_hook_current.ctx, name);
		return;
	}
	unsigned long nth;
	if (!fault_spec(name, &nth))
		return;
	if (++fault_hits < nth)
		return;
	/* Say where we died, then die the way kill -9 kills. */
	char line[256];
	int n = snprintf(line, sizeof line, "fault point \"%s\" reached (hit %lu): killing process %ld\n",
			 name, fault_hits, (long)getpid());
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nothing to do: we are about to die */
	}
	kill(getpid(), SIGKILL);
	_exit(137);
}

void fault_pause(const char *name)
{
	if (fault_hook_current.point)
		return;
	const char *point = getenv(ENV_PAUSE), *dir = getenv(ENV_PAUSE_DIR);
	if (!point || !dir || strcmp(point, name) != 0)
		return;
	char paused[4096], resume[4096];
	snprintf(paused, sizeof paused, "%s/%s.paused", dir, name);
	snprintf(resume, sizeof resume, "%s/%s.resume", dir, name);
	int fd = open(paused, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0)
		close(fd);
	while (access(resume, F_OK) != 0) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

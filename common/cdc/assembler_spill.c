/*
 * assembler_spill.c - where a transaction's changes go when memory holds
 * too many: a spill file per transaction, named by the flow, and the
 * subtransactions of a streamed transaction, so that a Stream Abort can
 * cut its changes back (assembler.h).
 */
#include "assembler_internal.h"

#include "trellara/checksum.h"
#include "trellara/fsutil.h"
#include "trellara/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- spill files ---- */

/* The flow identity as it appears in spill file names: letters, digits,
 * "_" and "-" as they are, every other byte as %XX, so the name has no
 * "." and no "/"; a long one is cut and ends in "~" and the CRC-32C of the
 * whole identity, to stay far below NAME_MAX. */
#define SPILL_PREFIX_MAX 96

char *assembler_spill_prefix_of(const char *flow)
{
	struct buf b = { 0 };
	for (const unsigned char *p = (const unsigned char *)flow; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		    *p == '-') {
			buf_put_u8(&b, *p);
		} else {
			char esc[4];
			snprintf(esc, sizeof esc, "%%%02X", *p);
			buf_put(&b, esc, 3);
		}
		if (b.len > SPILL_PREFIX_MAX) {
			char tail[16];
			int n = snprintf(tail, sizeof tail, "~%08x", crc32c(0, flow, strlen(flow)));
			b.len = SPILL_PREFIX_MAX - (size_t)n;
			while (b.len > 0 && (b.data[b.len - 1] == '%' || (b.len > 1 && b.data[b.len - 2] == '%')))
				b.len--; /* never cut an escape in half */
			buf_put(&b, tail, (size_t)n);
			break;
		}
	}
	buf_put_u8(&b, 0);
	return (char *)b.data;
}

/* Is NAME "<prefix>.<digits>.spill"? */
static bool is_flow_spill_file(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl) != 0 || name[pl] != '.')
		return false;
	const char *p = name + pl + 1;
	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return strcmp(p, ".spill") == 0;
}

/* Spill files of this flow's previous process: useless, the server sends
 * those transactions again.  Other flows' files are left alone. */
void assembler_remove_stale_spill_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (is_flow_spill_file(e->d_name, prefix)) {
			char *p = xasprintf("%s/%s", dir, e->d_name);
			unlink(p);
			free(p);
		}
	}
	closedir(d);
}

int assembler_spill(struct assembler *a, struct txn *t, char *err, size_t errlen)
{
	if (t->memory.len == 0)
		return 0;
	if (t->spill_fd < 0) {
		t->spill_path = xasprintf("%s/%s.%u.spill", a->spill_dir, a->spill_prefix, t->xid);
		t->spill_fd = open(t->spill_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (t->spill_fd < 0) {
			errbuf_setf(err, errlen, "cannot create spill file \"%s\": %s", t->spill_path, strerror(errno));
			return ASSEMBLER_STORAGE_FAILED;
		}
	}
	if (fs_pwrite_all(t->spill_fd, t->memory.data, t->memory.len, (off_t)t->spill_bytes, t->spill_path) < 0) {
		errbuf_setf(err, errlen, "cannot write spill file \"%s\"", t->spill_path);
		return ASSEMBLER_STORAGE_FAILED;
	}
	t->spill_bytes += t->memory.len;
	t->memory.len = 0;
	t->memory_changes = 0;
	/* a single huge change grew the buffer: do not keep that */
	if (t->memory.cap > 2 * ASSEMBLER_MAX_MEMORY_BYTES)
		buf_free(&t->memory);
	return 0;
}

/* ---- subtransactions of a streamed transaction ---- */

static size_t subxact_hash(uint32_t xid, size_t cap)
{
	uint32_t h = xid * 0x9E3779B1U; /* Fibonacci hashing: consecutive xids spread out */
	h ^= h >> 16;
	return (size_t)h & (cap - 1);
}

/* The slot for xid: the one holding it, or the empty one ending its probe. */
static struct subxact_slot *subxact_slot(const struct txn *t, uint32_t xid)
{
	size_t i = subxact_hash(xid, t->slots_cap);
	while (t->slots[i].index_plus1 != 0 && t->slots[i].xid != xid)
		i = (i + 1) & (t->slots_cap - 1);
	return &t->slots[i];
}

/* The subxacts index of xid, or -1. */
static long subxact_find(const struct txn *t, uint32_t xid)
{
	if (t->slots_cap == 0)
		return -1;
	const struct subxact_slot *s = subxact_slot(t, xid);
	if (s->index_plus1 == 0)
		return -1;
	size_t i = s->index_plus1 - 1;
	return i < t->n_subxacts && t->subxacts[i].xid == xid ? (long)i : -1; /* else stale */
}

static void subxact_slots_rebuild(struct txn *t)
{
	size_t cap = t->slots_cap ? t->slots_cap : 64;
	while (cap < 4 * (t->n_subxacts + 1))
		cap *= 2;
	free(t->slots);
	t->slots = xcalloc(cap, sizeof *t->slots);
	t->slots_cap = cap;
	t->slots_used = 0;
	for (size_t k = 0; k < t->n_subxacts; k++) {
		struct subxact_slot *s = subxact_slot(t, t->subxacts[k].xid);
		if (s->index_plus1 == 0)
			t->slots_used++;
		*s = (struct subxact_slot){ t->subxacts[k].xid, (uint32_t)(k + 1) };
	}
}

/* Record the change's (sub)transaction for Stream Abort: its first
 * change, in constant time. */
void assembler_note_subxact(struct txn *t, uint32_t xid)
{
	if (subxact_find(t, xid) >= 0)
		return;
	if (2 * (t->slots_used + 1) > t->slots_cap)
		subxact_slots_rebuild(t);
	if (t->n_subxacts == t->subxacts_cap) {
		t->subxacts_cap = t->subxacts_cap ? 2 * t->subxacts_cap : 16;
		t->subxacts = xrealloc(t->subxacts, t->subxacts_cap * sizeof *t->subxacts);
	}
	size_t k = t->n_subxacts++;
	t->subxacts[k] = (struct subxact){ xid, t->changes, t->spill_bytes + t->memory.len };
	struct subxact_slot *s = subxact_slot(t, xid);
	if (s->index_plus1 == 0)
		t->slots_used++;
	*s = (struct subxact_slot){ xid, (uint32_t)(k + 1) };
}

/* Cut a streamed transaction back to the first change of subxid. */
int assembler_abort_subxact(struct txn *t, uint32_t subxid, char *err, size_t errlen)
{
	long i = subxact_find(t, subxid);
	if (i < 0)
		return 0; /* it made no changes */
	uint64_t cut = t->subxacts[i].first_byte;
	t->changes = t->subxacts[i].first_change;
	if (t->direct) {
		/* written once: bytes out of memory are in pending chunks */
		if (cut >= t->spill_bytes) {
			t->memory.len = (size_t)(cut - t->spill_bytes);
		} else {
			assembler_pending_cut(t, t->changes);
			t->spill_bytes = cut;
			t->memory.len = 0;
			t->memory_first_change = t->changes;
		}
		t->memory_changes = t->changes - t->memory_first_change;
	} else if (cut >= t->spill_bytes) {
		t->memory.len = (size_t)(cut - t->spill_bytes);
	} else {
		if (ftruncate(t->spill_fd, (off_t)cut) < 0) {
			errbuf_setf(err, errlen, "cannot truncate spill file \"%s\": %s", t->spill_path, strerror(errno));
			return ASSEMBLER_STORAGE_FAILED;
		}
		t->spill_bytes = cut;
		t->memory.len = 0;
	}
	/* DDL messages of the cut changes did not happen either */
	while (t->n_ddl > 0 && t->ddl[t->n_ddl - 1].change >= t->changes)
		free(t->ddl[--t->n_ddl].content);
	/* memory_changes is a bound, not an exact count: recount lazily */
	t->memory_changes = t->memory.len ? t->memory_changes : 0;
	/* later subtransactions started after this one: cut too.  The array
	 * is in order of first change, so they are its tail (each entry is
	 * removed once: constant time per subtransaction); their slots go
	 * stale. */
	while (t->n_subxacts > 0 && t->subxacts[t->n_subxacts - 1].first_byte >= cut)
		t->n_subxacts--;
	return 0;
}

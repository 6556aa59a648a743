/*
 * test_stream_sim.c - the stream's recovery against simulated crashes
 * (stream_fs_sim: process death, and power loss that drops, tears or
 * reorders whatever was not synced).
 *
 * Each of SCHEDULES seeded schedules appends frames in group commits,
 * counts a frame acknowledged only when stream_writer_sync returned
 * STREAM_OK, and crashes the simulated file system at a seeded call -
 * inside a batch's write (a torn prefix), between its write and its
 * fdatasync, between the fdatasync and the index write, while a segment
 * rolls, while recovery itself runs - or injects EIO into an fdatasync,
 * ENOSPC into a write or into a segment's preallocation.  After every crash the writer is opened again
 * (recovery) and the test asserts:
 *   - recovery succeeds (damage past the acknowledged end is a torn tail);
 *   - every acknowledged frame is there, same bytes, offsets contiguous;
 *   - what lies past the acknowledged end is only frames this schedule
 *     appended at those offsets (unacknowledged ones that happened to
 *     survive), and after a failed fdatasync none of them (the writer cut
 *     them: an unacknowledged batch never turns up as durable);
 *   - a reader beside the live writer sees exactly the acknowledged frames.
 * What recovery kept is durable from then on (it fdatasyncs it), so it
 * joins the acknowledged set: the next crash must not take it away.
 * Finally a byte is flipped in an acknowledged frame that another frame
 * of its segment follows: the writer and a reader must refuse the stream
 * (STREAM_ECORRUPT, exit 65 in the programs).
 *
 * A failure prints the schedule's seed; every run of a seed is the same.
 */
#include "trellara/defaults.h"
#include "trellara/log.h"
#include "trellara/stream.h"
#include "trellara/stream_fs.h"
#include "trellara/xalloc.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The sanitizer build runs a quarter of them: ASan maps and poisons every
 * 1 MiB segment read buffer, which made 200 schedules take a minute there;
 * the plain build runs all of them. */
#if defined(__SANITIZE_ADDRESS__)
#define SCHEDULES 50
#else
#define SCHEDULES 200
#endif
#define DIR "/data/stream"
#define SEGMENT_BYTES MIN_SEGMENT_BYTES

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

/* One appended frame: type and payload, as the schedule made it. */
struct frame_rec {
	int type;
	uint8_t *payload;
	size_t len;
};

struct model {
	struct frame_rec *frames; /* by offset: [0, acked) acknowledged, then pending */
	size_t acked, total, cap;
	uint64_t appends;         /* unique id of each append */
};

static uint64_t current_seed;
static int schedule_failures;

#define SIM_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		unit_checks++;                                                                     \
		if (!(cond)) {                                                                     \
			unit_failures++;                                                           \
			schedule_failures++;                                                       \
			printf("seed %llu: %s:%d: check failed: %s: ", (unsigned long long)current_seed, \
			       __FILE__, __LINE__, #cond);                                          \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
	} while (0)

static void model_truncate(struct model *m, size_t n)
{
	for (size_t i = n; i < m->total; i++)
		free(m->frames[i].payload);
	m->total = n;
	if (m->acked > n)
		m->acked = n;
}

static void model_free(struct model *m)
{
	model_truncate(m, 0);
	free(m->frames);
	memset(m, 0, sizeof *m);
}

/* Queue a frame in the writer and the model (pending). */
static int append_one(struct stream_writer *w, struct model *m, uint64_t *rng)
{
	size_t len;
	uint64_t r = rng_below(rng, 100);
	if (r < 5)
		len = 0;
	else if (r < 90)
		len = 8 + (size_t)rng_below(rng, 1500);
	else
		len = 8 + (size_t)rng_below(rng, 30000); /* crosses segments */
	uint8_t *p = xmalloc(len ? len : 1);
	uint64_t id = ++m->appends, s = id * 7919 + current_seed;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next(&s);
	if (len >= 8)
		memcpy(p, &id, 8);
	int type = 1 + (int)rng_below(rng, FRAME_TYPE_MAX);
	uint64_t offset;
	int rc = stream_writer_append(w, type, 0, p, len, &offset);
	if (rc != STREAM_OK) {
		free(p);
		return rc;
	}
	SIM_CHECK(offset == m->total, "append got offset %llu, model expects %zu", (unsigned long long)offset,
		  m->total);
	if (m->total == m->cap)
		m->frames = xrealloc(m->frames, (m->cap = m->cap ? m->cap * 2 : 64) * sizeof *m->frames);
	m->frames[m->total++] = (struct frame_rec){ type, p, len };
	return STREAM_OK;
}

/* Read the whole stream; every frame below `upto` must match the model
 * (offset, type, bytes).  Returns the number of frames read (or -1 on a
 * read error, *status set). */
static long read_all(struct stream_fs *fs, const struct model *m, size_t upto, int *status)
{
	struct stream_reader *r = NULL;
	*status = stream_reader_open_fs(fs, DIR, &r);
	if (*status != STREAM_OK)
		return -1;
	long n = 0;
	for (;;) {
		struct stream_frame f;
		int rc = stream_reader_next(r, &f);
		if (rc == STREAM_END)
			break;
		if (rc != STREAM_OK) {
			*status = rc;
			n = -1;
			break;
		}
		SIM_CHECK(f.header.offset == (uint64_t)n, "frame %ld has offset %llu", n,
			  (unsigned long long)f.header.offset);
		if ((size_t)n < upto) {
			const struct frame_rec *e = &m->frames[n];
			SIM_CHECK(f.header.type == e->type && f.header.payload_length == e->len &&
					  (e->len == 0 || memcmp(f.payload, e->payload, e->len) == 0),
				  "frame at offset %ld differs from what was appended (acked %zu)", n, m->acked);
		}
		n++;
	}
	stream_reader_close(r);
	return n;
}

static struct stream_writer_options writer_options(void)
{
	return (struct stream_writer_options){ .segment_bytes = SEGMENT_BYTES, .min_free_bytes = 0,
					       .source_id = "sim", .flow = "sim" };
}

/* Open the writer after a crash, check what recovery kept, adopt it. */
/* exact: after a failed sync without a crash, the offset the writer had
 * made durable before the failure (the rest was cut and must not come
 * back); UINT64_MAX otherwise. */
static struct stream_writer *recover_and_check(struct stream_fs *fs, struct model *m, uint64_t exact)
{
	struct stream_writer_options o = writer_options();
	struct stream_writer *w = NULL;
	struct stream_recovery rec;
	int rc = stream_writer_open_fs(fs, DIR, &o, &w, &rec);
	SIM_CHECK(rc == STREAM_OK, "recovery refused the stream: status %d (acked %zu)", rc, m->acked);
	if (rc != STREAM_OK)
		return NULL;
	SIM_CHECK(rec.next_offset >= m->acked, "recovery lost acknowledged frames: next offset %llu, acked %zu",
		  (unsigned long long)rec.next_offset, m->acked);
	SIM_CHECK(rec.next_offset <= m->total, "recovery reports %llu frames, only %zu were ever appended",
		  (unsigned long long)rec.next_offset, m->total);
	if (exact != UINT64_MAX)
		SIM_CHECK(rec.next_offset == exact,
			  "frames of a batch whose write or fdatasync failed came back: next offset %llu, durable before the failure %llu",
			  (unsigned long long)rec.next_offset, (unsigned long long)exact);
	size_t kept = rec.next_offset < m->total ? (size_t)rec.next_offset : m->total;
	int status;
	long n = read_all(fs, m, kept, &status);
	SIM_CHECK(n == (long)rec.next_offset, "reader sees %ld frames, recovery reported %llu (status %d)", n,
		  (unsigned long long)rec.next_offset, status);
	/* what survived is durable now: it must survive every later crash */
	model_truncate(m, kept);
	m->acked = kept;
	return w;
}

static void crash(struct stream_fs *fs, struct stream_writer **w, uint64_t *rng)
{
	if (!stream_fs_sim_dead(fs))
		stream_fs_sim_kill(fs);
	stream_writer_close(*w); /* the dead process: nothing reaches the disk */
	*w = NULL;
	enum sim_crash_mode mode = rng_below(rng, 4) ? SIM_CRASH_POWER : SIM_CRASH_KILL;
	stream_fs_sim_crash(fs, mode, rng_next(rng));
}

static void run_schedule(uint64_t seed)
{
	current_seed = seed;
	uint64_t rng = seed;
	struct stream_fs *fs = stream_fs_sim_new(seed, 256ULL << 20);
	struct model m = { 0 };
	struct stream_writer_options o = writer_options();
	struct stream_writer *w = NULL;
	int rc = stream_writer_open_fs(fs, DIR, &o, &w, NULL);
	SIM_CHECK(rc == STREAM_OK, "cannot create the stream: %d", rc);
	if (rc != STREAM_OK)
		goto out;
	unsigned steps = 30 + (unsigned)rng_below(&rng, 40);
	for (unsigned step = 0; step < steps && schedule_failures == 0; step++) {
		size_t batch = 1 + (size_t)rng_below(&rng, 12);
		for (size_t i = 0; i < batch; i++)
			append_one(w, &m, &rng);
		uint64_t what = rng_below(&rng, 100);
		bool failed_sync_injected = false;
		if (what < 30) {
			/* die at a seeded call inside this sync */
			stream_fs_sim_kill_after(fs, 1 + rng_below(&rng, 30));
		} else if (what < 36) {
			stream_fs_sim_inject(fs, SIM_OP_FDATASYNC, 1 + rng_below(&rng, 2), EIO);
			failed_sync_injected = true;
		} else if (what < 40) {
			stream_fs_sim_inject(fs, SIM_OP_PWRITE, 1, ENOSPC);
			failed_sync_injected = true;
		} else if (what < 46) {
			/* the disk fills while a segment is created (or a cut
			 * segment preallocated again) */
			stream_fs_sim_inject(fs, SIM_OP_FALLOCATE, 1, ENOSPC);
			failed_sync_injected = true;
		}
		size_t before = m.acked;
		rc = stream_writer_sync(w);
		stream_fs_sim_kill_after(fs, 0);
		stream_fs_sim_inject(fs, SIM_OP_FDATASYNC, 0, 0);
		stream_fs_sim_inject(fs, SIM_OP_PWRITE, 0, 0);
		stream_fs_sim_inject(fs, SIM_OP_FALLOCATE, 0, 0);
		if (rc == STREAM_OK) {
			m.acked = m.total; /* acknowledged: sync returned */
			SIM_CHECK(!stream_fs_sim_dead(fs), "sync returned OK from a dead process");
			/* a reader beside the live writer: exactly the acknowledged
			 * frames (every fourth batch: readers cost) */
			if (rng_below(&rng, 4) == 0) {
				int status;
				long n = read_all(fs, &m, m.acked, &status);
				SIM_CHECK(n == (long)m.acked, "live reader sees %ld frames, %zu acknowledged (status %d)",
					  n, m.acked, status);
			}
		} else {
			SIM_CHECK(m.acked == before, "model");
		}
		bool dead = stream_fs_sim_dead(fs);
		if (rc != STREAM_OK && !dead) {
			/* a failed write or fdatasync: the writer is poisoned; close it
			 * and reopen, without a crash (the failed batch must not come
			 * back), or crash on top */
			SIM_CHECK(stream_writer_sync(w) != STREAM_OK, "a poisoned writer acknowledged");
			if (rng_below(&rng, 2)) {
				uint64_t durable = stream_writer_next_offset(w);
				stream_writer_close(w);
				w = NULL;
				w = recover_and_check(fs, &m, failed_sync_injected ? durable : UINT64_MAX);
				if (!w)
					break;
				continue;
			}
		}
		if (!dead && rc == STREAM_OK && rng_below(&rng, 8) != 0)
			continue;
		/* a crash: now (dead or not), then maybe another during recovery */
		crash(fs, &w, &rng);
		while (rng_below(&rng, 4) == 0) {
			stream_fs_sim_kill_after(fs, 1 + rng_below(&rng, 40));
			struct stream_writer *w2 = NULL;
			int orc = stream_writer_open_fs(fs, DIR, &o, &w2, NULL);
			if (!stream_fs_sim_dead(fs)) {
				stream_fs_sim_kill_after(fs, 0);
				SIM_CHECK(orc == STREAM_OK, "recovery refused the stream: status %d", orc);
			}
			crash(fs, &w2, &rng);
		}
		w = recover_and_check(fs, &m, UINT64_MAX);
		if (!w)
			break;
	}
	if (w && schedule_failures == 0) {
		/* a clean close (the index is synced), then corruption before the
		 * acknowledged end must be refused */
		model_truncate(&m, m.acked);
		stream_writer_close(w);
		w = NULL;
		uint64_t *bases = NULL;
		size_t nb = 0;
		struct stream_report rep;
		if (stream_inspect_fs(fs, DIR, NULL, 0, &rep) == 0) {
			/* pick an acknowledged frame with another after it in its segment */
			size_t cands = 0;
			uint64_t pick_seg = 0, pick_frame = 0;
			for (size_t s = 0; s < rep.n_segments; s++)
				if (rep.segments[s].frames >= 2)
					cands += (size_t)rep.segments[s].frames - 1;
			if (cands) {
				uint64_t k = rng_below(&rng, cands);
				for (size_t s = 0; s < rep.n_segments; s++) {
					uint64_t c = rep.segments[s].frames >= 2 ? rep.segments[s].frames - 1 : 0;
					if (k < c) {
						pick_seg = rep.segments[s].base_offset;
						pick_frame = pick_seg + k;
						break;
					}
					k -= c;
				}
				/* find its byte position by walking the frame sizes */
				uint64_t pos = 0;
				for (uint64_t off = pick_seg; off < pick_frame; off++)
					pos += FRAME_HEADER_SIZE + m.frames[off].len;
				size_t flen = FRAME_HEADER_SIZE + m.frames[pick_frame].len;
				uint64_t at = pos + rng_below(&rng, flen);
				char path[128];
				snprintf(path, sizeof path, DIR "/segments/%020llu.log", (unsigned long long)pick_seg);
				uint64_t size;
				const uint8_t *img = stream_fs_sim_peek(fs, path, &size);
				SIM_CHECK(img && at < size, "segment image");
				if (img && at < size) {
					uint8_t b = (uint8_t)(img[at] ^ (1u << rng_below(&rng, 8)));
					stream_fs_sim_poke(fs, path, at, &b, 1);
					/* the writer scans the last segment whole; a sealed one
					 * whose index checks out it trusts (stream_writer.c),
					 * so only readers meet corruption there */
					if (pick_seg == rep.segments[rep.n_segments - 1].base_offset) {
						struct stream_writer *w3 = NULL;
						int crc = stream_writer_open_fs(fs, DIR, &o, &w3, NULL);
						SIM_CHECK(crc == STREAM_ECORRUPT,
							  "corruption at byte %llu of frame %llu (of %zu acknowledged) not refused by the writer: %d",
							  (unsigned long long)at, (unsigned long long)pick_frame, m.acked, crc);
						stream_writer_close(w3);
					}
					int status;
					long n = read_all(fs, &m, pick_frame, &status);
					SIM_CHECK(n == -1 && status == STREAM_ECORRUPT,
						  "corruption of frame %llu not refused by a reader: %ld frames, status %d",
						  (unsigned long long)pick_frame, n, status);
				}
			}
			stream_report_free(&rep);
		} else {
			SIM_CHECK(false, "inspect failed");
		}
		free(bases);
		(void)nb;
	}
out:
	stream_writer_close(w);
	model_free(&m);
	stream_fs_sim_free(fs);
}

/* The simulated file system itself: durable vs volatile, directory
 * entries, determinism. */
static void test_sim_fs(void)
{
	struct stream_fs *fs = stream_fs_sim_new(1, 1 << 20);
	CHECK(fs->mkdir(fs, "/d", 0700) == 0);
	int fd = fs->open(fs, "/d/f", O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	CHECK(fs->pwrite(fs, fd, "abcd", 4, 0) == 4);
	/* neither the data nor the entry is durable: a power loss that drops
	 * unsynced entries always loses it, whatever the seed */
	stream_fs_sim_kill(fs);
	CHECK(fs->pwrite(fs, fd, "x", 1, 0) < 0 && errno == EIO);
	stream_fs_sim_crash(fs, SIM_CRASH_KILL, 5);
	struct stream_fs_stat st;
	CHECK(fs->stat(fs, "/d/f", &st) == 0 && st.size == 4); /* a kill keeps what the kernel had */
	fd = fs->open(fs, "/d/f", O_RDWR, 0);
	CHECK(fs->pwrite(fs, fd, "efgh", 4, 4) == 4);
	CHECK(fs->fdatasync(fs, fd) == 0);
	int dfd = fs->open(fs, "/d", O_RDONLY | O_DIRECTORY, 0);
	CHECK(dfd >= 0 && fs->fsync(fs, dfd) == 0);
	CHECK(fs->pwrite(fs, fd, "ZZZZ", 4, 8) == 4);
	/* power loss: the synced 8 bytes stay, the rest is kept, dropped or torn */
	stream_fs_sim_crash(fs, SIM_CRASH_POWER, 11);
	uint64_t size;
	const uint8_t *img = stream_fs_sim_peek(fs, "/d/f", &size);
	CHECK(img && size >= 8 && memcmp(img, "abcdefgh", 8) == 0);
	/* injected errors */
	fd = fs->open(fs, "/d/f", O_RDWR, 0);
	stream_fs_sim_inject(fs, SIM_OP_FDATASYNC, 1, EIO);
	CHECK(fs->fdatasync(fs, fd) < 0 && errno == EIO);
	CHECK(fs->fdatasync(fs, fd) == 0);
	stream_fs_sim_inject(fs, SIM_OP_PWRITE, 1, ENOSPC);
	CHECK(fs->pwrite(fs, fd, "q", 1, 0) < 0 && errno == ENOSPC);
	/* an unsynced rename is lost by some power loss */
	int lost = 0;
	for (uint64_t s = 0; s < 16; s++) {
		struct stream_fs *f2 = stream_fs_sim_new(s, 1 << 20);
		int x = f2->open(f2, "/a", O_RDWR | O_CREAT, 0600);
		CHECK(f2->fsync(f2, x) == 0);
		int root = f2->open(f2, "/", O_RDONLY | O_DIRECTORY, 0);
		CHECK(f2->fsync(f2, root) == 0);
		CHECK(f2->rename(f2, "/a", "/b") == 0);
		stream_fs_sim_crash(f2, SIM_CRASH_POWER, s);
		struct stream_fs_stat sa, sb;
		bool a = f2->stat(f2, "/a", &sa) == 0, b = f2->stat(f2, "/b", &sb) == 0;
		CHECK(a != b); /* the file is under one name, never none or both */
		lost += a;
		stream_fs_sim_free(f2);
	}
	CHECK(lost > 0 && lost < 16);
	stream_fs_sim_free(fs);
}

/* Views: two processes on one disk.  Their descriptors are their own,
 * their locks exclude each other, a kill of one releases its locks and
 * leaves the other working on the same (still volatile) bytes, and a
 * power loss is the whole machine's. */
static void test_sim_views(void)
{
	struct stream_fs *disk = stream_fs_sim_new(3, 1 << 20);
	struct stream_fs *a = stream_fs_sim_view(disk), *b = stream_fs_sim_view(disk);
	CHECK(a->mkdir(a, "/d", 0700) == 0);
	struct stream_fs_stat st;
	CHECK(b->stat(b, "/d", &st) == 0 && st.is_dir); /* one disk */
	int fa = a->open(a, "/d/lock", O_RDWR | O_CREAT, 0600);
	int fb = b->open(b, "/d/lock", O_RDWR, 0);
	CHECK(fa >= 0 && fb >= 0);
	CHECK(a->flock(a, fa, LOCK_EX | LOCK_NB) == 0);
	CHECK(b->flock(b, fb, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK);
	CHECK(b->flock(b, fb, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK);
	/* the first handle is a process too */
	int fd0 = disk->open(disk, "/d/lock", O_RDONLY, 0);
	CHECK(fd0 >= 0 && disk->flock(disk, fd0, LOCK_SH | LOCK_NB) < 0);
	/* descriptors are per process: b's number means nothing to a */
	int fb2 = b->open(b, "/d/data", O_RDWR | O_CREAT, 0600);
	CHECK(fb2 >= 0);
	CHECK(b->pwrite(b, fb2, "live", 4, 0) == 4);
	CHECK(a->close(a, fb2 + 100) < 0 && errno == EBADF);
	/* the entries durable: the power loss below is about bytes */
	int root = a->open(a, "/", O_RDONLY | O_DIRECTORY, 0), dir = a->open(a, "/d", O_RDONLY | O_DIRECTORY, 0);
	CHECK(root >= 0 && dir >= 0 && a->fsync(a, root) == 0 && a->fsync(a, dir) == 0);
	int fa2 = a->open(a, "/d/data", O_RDWR, 0);
	CHECK(a->pwrite(a, fa2, "written by a", 12, 0) == 12);
	CHECK(a->fdatasync(a, fa2) == 0);
	CHECK(a->pwrite(a, fa2, "VOLATILE", 8, 12) == 8); /* not synced */
	/* kill -9 of a: its calls fail, its lock is gone at once */
	stream_fs_sim_view_kill(a);
	CHECK(stream_fs_sim_dead(a) && !stream_fs_sim_dead(b));
	CHECK(a->pwrite(a, fa2, "x", 1, 0) < 0 && errno == EIO);
	CHECK(a->stat(a, "/d", &st) < 0 && errno == EIO);
	CHECK(b->flock(b, fb, LOCK_EX | LOCK_NB) == 0);
	/* b sees everything a wrote, synced or not (the kernel has it) */
	char buf[32] = { 0 };
	CHECK(b->pread(b, fb2, buf, sizeof buf, 0) == 20 && memcmp(buf, "written by aVOLATILE", 20) == 0);
	CHECK(b->pwrite(b, fb2, "B", 1, 20) == 1);
	/* a restarts: alive, no descriptor of before, and the lock is b's */
	stream_fs_sim_view_restart(a);
	CHECK(!stream_fs_sim_dead(a));
	CHECK(a->pwrite(a, fa2, "x", 1, 0) < 0 && errno == EBADF);
	fa = a->open(a, "/d/lock", O_RDWR, 0);
	CHECK(fa >= 0 && a->flock(a, fa, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK);
	/* an injected failure belongs to the process it was injected into */
	stream_fs_sim_inject(a, SIM_OP_FDATASYNC, 1, EIO);
	CHECK(b->fdatasync(b, fb2) == 0);
	fa2 = a->open(a, "/d/data", O_RDWR, 0);
	CHECK(a->fdatasync(a, fa2) < 0 && errno == EIO);
	CHECK(a->fdatasync(a, fa2) == 0);
	/* the volatile tail: written after the last sync of the file */
	CHECK(b->pwrite(b, fb2, "TAIL", 4, 21) == 4);
	/* a power loss, from a's handle: every process dies with the machine */
	stream_fs_sim_crash(a, SIM_CRASH_POWER, 9);
	CHECK(!stream_fs_sim_dead(a));
	CHECK(stream_fs_sim_dead(b) && stream_fs_sim_dead(disk));
	CHECK(b->pread(b, fb2, buf, 4, 0) < 0 && errno == EIO);
	stream_fs_sim_view_restart(b);
	CHECK(b->pread(b, fb2, buf, 4, 0) < 0 && errno == EBADF); /* its descriptors are gone */
	/* the synced bytes survive; the lock is free (no process holds it) */
	fb2 = b->open(b, "/d/data", O_RDONLY, 0);
	CHECK(fb2 >= 0 && b->pread(b, fb2, buf, 21, 0) >= 21 && memcmp(buf, "written by aVOLATILEB", 21) == 0);
	fb = b->open(b, "/d/lock", O_RDWR, 0);
	CHECK(fb >= 0 && b->flock(b, fb, LOCK_EX | LOCK_NB) == 0);
	/* freeing a view leaves the disk and the others */
	stream_fs_sim_free(b);
	CHECK(a->stat(a, "/d/data", &st) == 0 && st.size >= 21);
	stream_fs_sim_free(disk); /* the disk and a */
}

int main(void)
{
	log_setup("test_stream_sim", 0);
	/* TRELLARA_SIM_SEED=n replays one schedule with its log on stderr */
	const char *one = getenv("TRELLARA_SIM_SEED");
	if (one) {
		run_schedule(strtoull(one, NULL, 10));
		return unit_done("stream_sim");
	}
	test_sim_fs();
	test_sim_views();
	/* the stream's own messages (torn tails cut, injected failures) would
	 * fill the output: stderr goes to a file while the schedules run,
	 * removed when they finish (a sanitizer's report stays there) */
	fflush(stderr);
	char log_path[] = "/tmp/trellara-stream-sim-XXXXXX";
	int saved = dup(2);
	int log_fd = mkstemp(log_path);
	if (log_fd >= 0) {
		printf("stream_sim: schedule logs in %s until they finish\n", log_path);
		fflush(stdout);
		dup2(log_fd, 2);
		close(log_fd);
	}
	int failed_schedules = 0;
	for (uint64_t seed = 1; seed <= SCHEDULES; seed++) {
		schedule_failures = 0;
		run_schedule(seed);
		failed_schedules += schedule_failures > 0;
	}
	fflush(stderr);
	if (saved >= 0) {
		dup2(saved, 2);
		close(saved);
	}
	if (log_fd >= 0)
		unlink(log_path);
	printf("stream_sim: %d schedules, %d failed\n", SCHEDULES, failed_schedules);
	return unit_done("stream_sim");
}

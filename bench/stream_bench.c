/*
 * stream_bench - the stream's append rate against the raw limit of this
 * disk, measured in the same run, and sequential read throughput.
 *
 *   stream_bench DIR [SECONDS_PER_MEASUREMENT]
 *
 * Raw limit: a tiny loop that pwrite()s the same bytes a stream batch
 * writes (frames of 1 KiB payload plus headers) into a preallocated file
 * and fdatasync()s after each batch.  The stream: stream_writer_append()
 * x batch, then stream_writer_sync().  The two alternate in short rounds
 * so that a noisy neighbour hurts both alike; the medians are compared.
 */
#include "trellara/stream.h"
#include "trellara/xalloc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD 1024
#define ROUNDS 5

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* syncs per second of the raw loop */
static double raw_round(const char *path, size_t bytes_per_sync, double seconds)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || posix_fallocate(fd, 0, 256 << 20) != 0 || fsync(fd) < 0) {
		perror(path);
		exit(1);
	}
	char *buf = xcalloc(1, bytes_per_sync);
	memset(buf, 'r', bytes_per_sync);
	off_t pos = 0;
	long syncs = 0;
	double t0 = now(), t;
	do {
		if (pos + (off_t)bytes_per_sync > (256 << 20))
			pos = 0;
		if (pwrite(fd, buf, bytes_per_sync, pos) != (ssize_t)bytes_per_sync || fdatasync(fd) < 0) {
			perror("raw write");
			exit(1);
		}
		pos += (off_t)bytes_per_sync;
		syncs++;
	} while ((t = now() - t0) < seconds);
	free(buf);
	close(fd);
	unlink(path);
	return (double)syncs / t;
}

static double stream_round(const char *dir, int batch, double seconds)
{
	struct stream_writer_options o = { .segment_bytes = 64 << 20, .min_free_bytes = 0 };
	struct stream_writer *w;
	if (stream_writer_open(dir, &o, &w, NULL) != STREAM_OK)
		exit(1);
	char payload[PAYLOAD];
	memset(payload, 's', sizeof payload);
	long syncs = 0;
	double t0 = now(), t;
	do {
		for (int i = 0; i < batch; i++)
			if (stream_writer_append(w, FRAME_TXN, 0, payload, sizeof payload, NULL) != STREAM_OK)
				exit(1);
		if (stream_writer_sync(w) != STREAM_OK)
			exit(1);
		syncs++;
	} while ((t = now() - t0) < seconds);
	stream_writer_close(w);
	return (double)syncs / t;
}

static void remove_stream(const char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		exit(1);
	free(cmd);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: stream_bench DIR [SECONDS]\n");
		return 64;
	}
	const char *dir = argv[1];
	double seconds = argc > 2 ? atof(argv[2]) : 1.0;
	char *raw_path = xasprintf("%s/raw.dat", dir);
	char *stream_dir = xasprintf("%s/stream", dir);
	mkdir(dir, 0700);
	const int batches[] = { 1, 10, 100 };
	int worst_ok = 1;
	printf("stream append (1 KiB payloads, fdatasync per batch; raw = write+fdatasync of the same bytes, preallocated)\n");
	printf("%-6s %12s %10s %12s %10s %8s\n", "batch", "appends/s", "MB/s", "raw app/s", "raw MB/s", "ratio");
	for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
		int batch = batches[b];
		size_t bytes = (size_t)batch * (PAYLOAD + FRAME_HEADER_SIZE);
		double raw[ROUNDS], ours[ROUNDS];
		for (int r = 0; r < ROUNDS; r++) {
			raw[r] = raw_round(raw_path, bytes, seconds);
			remove_stream(stream_dir);
			ours[r] = stream_round(stream_dir, batch, seconds);
		}
		qsort(raw, ROUNDS, sizeof *raw, cmp_double);
		qsort(ours, ROUNDS, sizeof *ours, cmp_double);
		double raw_med = raw[ROUNDS / 2], ours_med = ours[ROUNDS / 2];
		double ratio = ours_med / raw_med;
		if (ratio < 0.8)
			worst_ok = 0;
		printf("%-6d %12.0f %10.1f %12.0f %10.1f %8.2f\n", batch, ours_med * batch,
		       ours_med * (double)bytes / 1e6, raw_med * batch, raw_med * (double)bytes / 1e6, ratio);
	}
	printf("goal: ratio >= 0.8 at every batch size: %s\n", worst_ok ? "met" : "NOT met");

	/* Sequential read from a warm page cache. */
	remove_stream(stream_dir);
	struct stream_writer_options o = { .segment_bytes = 64 << 20, .min_free_bytes = 0 };
	struct stream_writer *w;
	if (stream_writer_open(stream_dir, &o, &w, NULL) != STREAM_OK)
		return 1;
	char payload[PAYLOAD];
	memset(payload, 'p', sizeof payload);
	const long frames = 256L * 1024; /* 256 MiB of payload */
	for (long i = 0; i < frames; i++) {
		stream_writer_append(w, FRAME_TXN, 0, payload, sizeof payload, NULL);
		if (i % 4096 == 4095 && stream_writer_sync(w) != STREAM_OK)
			return 1;
	}
	if (stream_writer_sync(w) != STREAM_OK)
		return 1;
	stream_writer_close(w);
	double best = 0;
	for (int pass = 0; pass < 3; pass++) {
		struct stream_reader *r;
		if (stream_reader_open(stream_dir, &r) != STREAM_OK)
			return 1;
		struct stream_frame f;
		long n = 0;
		uint64_t bytes = 0;
		double t0 = now();
		while (stream_reader_next(r, &f) == STREAM_OK) {
			n++;
			bytes += FRAME_HEADER_SIZE + f.stored_length;
		}
		double t = now() - t0;
		stream_reader_close(r);
		if (n != frames) {
			fprintf(stderr, "read %ld frames, expected %ld\n", n, frames);
			return 1;
		}
		double gbps = (double)bytes / t / 1e9;
		if (pass > 0 && gbps > best)
			best = gbps; /* pass 0 warms the cache */
	}
	printf("sequential read (warm page cache, CRC checked): %.2f GB/s (goal >= 1 GB/s: %s)\n", best,
	       best >= 1.0 ? "met" : "NOT met");
	remove_stream(stream_dir);
	free(raw_path);
	free(stream_dir);
	return 0;
}

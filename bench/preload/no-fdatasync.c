/* no-fdatasync.c - an LD_PRELOAD library for bench/capture-bench.sh's
 * CAPTURE_BENCH_NO_FDATASYNC=1 only: fsync() and fdatasync() return at
 * once without writing anything to the disk.  It answers one question -
 * how fast would capture catch up if making its batches durable cost
 * nothing? - and must never be loaded into a flow that matters. */
int fsync(int fd);
int fdatasync(int fd);

int fsync(int fd)
{
	(void)fd;
	return 0;
}

int fdatasync(int fd)
{
	(void)fd;
	return 0;
}

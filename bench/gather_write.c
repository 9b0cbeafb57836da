/*
 * gather_write.c - does a gathered O_DIRECT write cost the device anything,
 * and what does a small write cost?  A one-off measurement kept with its
 * figures (bench/RESULTS.md, f3write); meson builds it (build/bench/
 * gather_write) so that it keeps compiling, no test runs it.
 *
 * io_uring writev, QD requests in flight, sequential blocks of one header
 * of HDR bytes and N values of VSZ bytes on a fresh fallocated file
 * (fallocate mode 0, as the SSD tier's segments and fio --fallocate=native)
 * under O_DIRECT, TOTAL_MB in all, then fdatasync:
 *   MODE 0  each block from one buffer (one iovec, as fio);
 *   MODE 1  the header's iovec, then one iovec per value, each value in a
 *           64 KiB chunk (VSZ, if larger) of a 256 MiB THP arena picked at
 *           random -- the SSD tier's batch (ssd.c wd_batch_prep: DRAM's
 *           chunks as they are);
 *   MODE 2  as 1, the values copied into one buffer first (a bounce
 *           buffer; the memcpy's time is printed).
 * PAD 1 rounds each block up to 4096 bytes (so every write is aligned to
 * the file system's block).  Prints GB/s of block bytes (the fdatasync
 * included), and the device's write requests, their mean size and merges
 * (/sys/block/DEV/stat, whole device: other processes' I/O shows too).
 *
 *   cc -O2 -Wall bench/gather_write.c -luring -o /tmp/gather_write
 *   /tmp/gather_write FILE MODE N VSZ HDR QD TOTAL_MB PAD [DEV]
 *   e.g. a format-3 batch of 32 values of 16 KiB:
 *   /tmp/gather_write /var/tmp/x/g.dat 1 32 16384 2560 8 512 0 vda
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define VMAX 64u

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Write requests, merges and sectors the device completed. */
static void dev_stat(const char *dev, unsigned long long *ios, unsigned long long *merges,
		     unsigned long long *sect)
{
	unsigned long long v[7];
	char path[256];
	FILE *f;
	snprintf(path, sizeof(path), "/sys/block/%s/stat", dev);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
			 &v[4], &v[5], &v[6]) != 7) {
		fprintf(stderr, "%s: unreadable\n", path);
		exit(1);
	}
	fclose(f);
	*ios = v[4];
	*merges = v[5];
	*sect = v[6];
}

int main(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: gather_write FILE MODE N VSZ HDR QD TOTAL_MB PAD [DEV]\n");
		return 2;
	}
	const char *path = argv[1], *dev = argc > 9 ? argv[9] : "vda";
	int mode = atoi(argv[2]), pad = atoi(argv[8]);
	unsigned n = (unsigned)atoi(argv[3]), qd = (unsigned)atoi(argv[6]);
	size_t vsz = (size_t)atol(argv[4]), hdr = (size_t)atol(argv[5]);
	size_t total = (size_t)atol(argv[7]) << 20;
	if (n < 1 || n > VMAX || qd < 1 || vsz < 512 || hdr < 512 || hdr > 4096) {
		fprintf(stderr, "gather_write: N 1..%u, QD >= 1, VSZ >= 512, HDR 512..4096\n", VMAX);
		return 2;
	}
	size_t bs = hdr + n * vsz;
	if (pad)
		bs = (bs + 4095) & ~(size_t)4095;
	size_t nblk = total / bs, chunk = vsz > 65536 ? vsz : 65536;
	size_t arena_len = (size_t)256 << 20, nchunks = arena_len / chunk;
	uint8_t *arena = mmap(NULL, arena_len + (2u << 20), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED)
		return 1;
	arena = (uint8_t *)(((uintptr_t)arena + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
	madvise(arena, arena_len, MADV_HUGEPAGE);
	memset(arena, 0x5a, arena_len);
	uint8_t **bufs = calloc(qd, sizeof(*bufs)), **hdrs = calloc(qd, sizeof(*hdrs));
	struct iovec *iovs = calloc((size_t)qd * (n + 1), sizeof(*iovs));
	if (!bufs || !hdrs || !iovs)
		return 1;
	for (unsigned i = 0; i < qd; i++) {
		if (posix_memalign((void **)&bufs[i], 4096, bs) ||
		    posix_memalign((void **)&hdrs[i], 4096, 4096))
			return 1;
		memset(bufs[i], 0x33, bs);
		memset(hdrs[i], 0x44, 4096);
	}
	unlink(path);
	int fd = open(path, O_CREAT | O_RDWR | O_DIRECT, 0644);
	if (fd < 0 || fallocate(fd, 0, 0, (off_t)(nblk * bs)) < 0) {
		perror("gather_write: open/fallocate");
		return 1;
	}
	fsync(fd);
	struct io_uring ring;
	if (io_uring_queue_init(qd * 2, &ring, 0) < 0)
		return 1;
	unsigned long long i0, m0, s0, i1, m1, s1;
	size_t ci = 7, next = 0, done = 0;
	unsigned inflight = 0;
	double cpy = 0;
	dev_stat(dev, &i0, &m0, &s0);
	double t0 = now();
	while (done < nblk) {
		while (inflight < qd && next < nblk) {
			unsigned slot = (unsigned)(next % qd), c = 1;
			struct iovec *iov = &iovs[(size_t)slot * (n + 1)];
			uint8_t *vals[VMAX];
			for (unsigned v = 0; v < n; v++) {
				ci = (ci * 2654435761u + 12345) % nchunks; /* scattered */
				vals[v] = arena + ci * chunk;
			}
			if (mode == 1) {
				iov[0] = (struct iovec){ hdrs[slot], hdr };
				for (unsigned v = 0; v < n; v++)
					iov[c++] = (struct iovec){ vals[v], vsz };
				iov[c - 1].iov_len += bs - hdr - n * vsz; /* PAD: the chunk's tail */
			} else {
				if (mode == 2) {
					double a = now();
					memcpy(bufs[slot], hdrs[slot], hdr);
					for (unsigned v = 0; v < n; v++)
						memcpy(bufs[slot] + hdr + v * vsz, vals[v], vsz);
					cpy += now() - a;
				}
				iov[0] = (struct iovec){ bufs[slot], bs };
			}
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_writev(sqe, fd, iov, c, (off_t)(next * bs));
			next++;
			inflight++;
		}
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			return 1;
		if (cqe->res != (int)bs) {
			fprintf(stderr, "gather_write: res %d, want %zu\n", cqe->res, bs);
			return 1;
		}
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		done++;
	}
	fdatasync(fd);
	double t = now() - t0;
	dev_stat(dev, &i1, &m1, &s1);
	printf("mode %d n %u vsz %zu bs %zu qd %u: %.3f GB/s, %zu blocks, dev reqs %llu "
	       "(%.2f per block), mean %.0f KiB, merges %llu, memcpy %.3f s of %.3f\n",
	       mode, n, vsz, bs, qd, (double)(nblk * bs) / t / 1e9, nblk, i1 - i0,
	       (double)(i1 - i0) / (double)nblk,
	       i1 > i0 ? (double)(s1 - s0) * 512.0 / (double)(i1 - i0) / 1024 : 0, m1 - m0, cpy, t);
	unlink(path);
	return 0;
}

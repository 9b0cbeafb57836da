/*
 * clear_sweep_cost.c - what a namespace's clear costs the gets beside it
 * (session 46, clear46): ssd_clear sweeps the whole SSD index, one shard
 * at a time under its lock (ssd_idx.c ssd_idx_sweep with every slot), to
 * drop the namespace's entries.  Not built by meson: a one-off
 * measurement kept with its figures (bench/RESULTS.md, clear46).
 *
 * One store under DIR, as bench/idx_grow_cost.c's: DRAM 256M of 4 KiB
 * chunks, an SSD sized for the blocks with room to spare (nothing
 * evicted), write-through into persistent namespaces.  Fill: N blocks of
 * VLEN bytes in namespace A, N / 100 in namespace B, flushed.  Then two
 * readers get a key every 50 us (one of A never put: a DRAM miss, then the
 * SSD index's lookup under its shard's lock; one of A put), for 1 s with
 * nothing else (idle), then while the main thread clears B CLEARS times,
 * 200 ms apart (the first drops B's entries; each walks all N + N / 100).
 * Prints each clear's time (kvt_clear: the sweep, then its tombstone
 * queued and synced) and the readers' p50/p99/p99.9/max in both phases,
 * and (since session 47, clear47: the sweep walks in chunks) the longest
 * hold of a shard's lock by a chunk, ns and chains + entries.
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/clear_sweep_cost.c -Lbuild-release \
 *      -lkvtier -Wl,-rpath,$PWD/build-release -o /tmp/clear_sweep_cost
 *   /tmp/clear_sweep_cost DIR N [VLEN [CLEARS]]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"
#include "oneoff.h"
#include "getlat.h"

/* Readers of namespace a (absent keys, put keys) until *stop. */
static void readers_run(struct reader *ra, struct reader *rp, pthread_t *ta, pthread_t *tp)
{
	ra->n = rp->n = 0;
	ra->hits = rp->hits = 0;
	pthread_create(ta, NULL, read_loop, ra);
	pthread_create(tp, NULL, read_loop, rp);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
	uint64_t vlen = argc > 3 ? strtoull(argv[3], NULL, 0) : 512;
	int clears = argc > 4 ? atoi(argv[4]) : 5;
	uint64_t seg = UINT64_C(16) << 20, nb;
	atomic_bool stop = false;
	struct reader ra, rp;
	pthread_t ta, tp;
	struct kvt_store *s;
	char cap[32];
	uint8_t *v;
	uint64_t t0, fill_ns;
	uint32_t a, b;

	if (!dir || n < 1000 || vlen < 1 || vlen > 65536 || clears < 1)
		return fprintf(stderr, "usage: clear_sweep_cost DIR N [VLEN [CLEARS]]\n"), 2;
	nb = n / 100;
	v = malloc(vlen);
	ra.lat = calloc(LAT_MAX, sizeof(uint64_t));
	rp.lat = calloc(LAT_MAX, sizeof(uint64_t));
	if (!v || !ra.lat || !rp.lat ||
	    ssd_store_open(dir, n + nb, vlen, seg, "clear-cost-a", cap, sizeof(cap), &s, &a) < 0 ||
	    ssd_ns(s, "clear-cost-b", &b) < 0)
		return fprintf(stderr, "cannot open a store in %s\n", dir), 1;
	memset(v, 0x5a, vlen);
	t0 = now_ns();
	for (uint64_t i = 0; i < n + nb; i++) {
		struct kvt_key k = key_of(i < n ? i : i - n, i < n ? 0 : 1);
		int r = put_wait(s, i < n ? a : b, &k, v, vlen);
		if (r != KVT_OK)
			return fprintf(stderr, "put %llu: %s\n", (unsigned long long)i,
				       kvt_strerror(r)),
			       1;
	}
	kvt_flush(s);
	fill_ns = now_ns() - t0;
	printf("fill: %llu + %llu blocks of %llu B in %.1f s; %llu indexed\n",
	       (unsigned long long)n, (unsigned long long)nb, (unsigned long long)vlen,
	       fill_ns / 1e9, (unsigned long long)stat_of(s, "ssd.blocks"));
	ra = (struct reader){ .s = s, .ns = a, .salt = 7, .range = n, .stop = &stop,
			      .lat = ra.lat };
	rp = (struct reader){ .s = s, .ns = a, .salt = 0, .range = n, .stop = &stop,
			      .lat = rp.lat };
	for (int phase = 0; phase < 2; phase++) {
		atomic_store(&stop, false);
		readers_run(&ra, &rp, &ta, &tp);
		if (phase == 0) {
			nanosleep(&(struct timespec){ 1, 0 }, NULL);
		} else {
			for (int c = 0; c < clears; c++) {
				int64_t got;
				nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
				t0 = now_ns();
				got = kvt_clear(s, b);
				printf("clear %d: %lld blocks, %.1f ms\n", c, (long long)got,
				       (now_ns() - t0) / 1e6);
			}
			nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
			/* session 47's chunked walk: its longest hold (absent
			 * before it: "n/a") */
			for (int i = 0; i < 4; i++) {
				static const char *const names[] = {
					"ssd.idx_sweep_max_hold_ns", "ssd.idx_sweep_max_chunk",
					"ssd.idx_sweep_chunks", "ssd.idx_sweep_hold_ns"
				};
				uint64_t x = 0;
				if (kvt_store_stat(s, names[i], &x) == 0)
					printf("%s %llu\n", names[i], (unsigned long long)x);
				else
					printf("%s n/a\n", names[i]);
			}
		}
		atomic_store(&stop, true);
		pthread_join(ta, NULL);
		pthread_join(tp, NULL);
		printf("%s:\n", phase == 0 ? "idle (1 s)" : "during the clears");
		report("absent", &ra);
		report("filled", &rp);
	}
	kvt_store_destroy(s);
	return 0;
}

/*
 * idx_grow_cost.c - what the SSD index's growth costs the gets beside it
 * (session 45, grow45: doc/ssd.md "Index growth").  Not built by meson: a
 * one-off measurement kept with its figures (bench/RESULTS.md, grow45);
 * built against each tree compared (both must have ssd.idx_grow_*).
 *
 * One store under DIR, as bench/evict_sweep_cost.c's: DRAM 256M of 4 KiB
 * chunks, an SSD sized to hold N blocks of VLEN bytes with room to spare
 * (no segment evicted), write-through (ssd.admission=always) into a
 * persistent namespace.  While one putter fills N blocks (the index
 * growing: each of its 16 shards doubles its table as it passes a power
 * of two), two readers get a key every 50 us: one of a key never put (a
 * DRAM miss, then the SSD index's lookup under its shard's lock), one of
 * a block put already.  Prints the fill, ssd.idx_grows and
 * ssd.idx_grow_max_ns (the longest time one put spent growing a table
 * under its shard's lock), and the readers' p50/p99/p99.9/max latency
 * and how many gets took over 1 and 10 ms.
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/idx_grow_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/idx_grow_cost
 *   /tmp/idx_grow_cost DIR N [VLEN [SEG_MIB]]
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

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
	uint64_t vlen = argc > 3 ? strtoull(argv[3], NULL, 0) : 512;
	uint64_t seg = argc > 4 ? strtoull(argv[4], NULL, 0) << 20 : 16u << 20;
	atomic_bool stop = false;
	_Atomic uint64_t done = 0;
	struct reader ra, rp;
	pthread_t ta, tp;
	struct kvt_store *s;
	char cap[32];
	uint8_t *v;
	uint64_t i, t0, fill_ns;
	uint32_t ns;

	if (!dir || n < 1000 || vlen < 1 || vlen > 65536 || seg < (1u << 20))
		return fprintf(stderr, "usage: idx_grow_cost DIR N [VLEN [SEG_MIB]]\n"), 2;
	v = malloc(vlen);
	ra.lat = calloc(LAT_MAX, sizeof(uint64_t));
	rp.lat = calloc(LAT_MAX, sizeof(uint64_t));
	if (!v || !ra.lat || !rp.lat ||
	    ssd_store_open(dir, n, vlen, seg, "idx-grow-cost", cap, sizeof(cap), &s, &ns) < 0)
		return fprintf(stderr, "cannot open a store in %s\n", dir), 1;
	memset(v, 0x5a, vlen);
	ra = (struct reader){ .s = s, .ns = ns, .salt = 7, .range = n, .stop = &stop,
			      .lat = ra.lat };
	rp = (struct reader){ .s = s, .ns = ns, .salt = 0, .done = &done, .stop = &stop,
			      .lat = rp.lat };
	pthread_create(&ta, NULL, read_loop, &ra);
	pthread_create(&tp, NULL, read_loop, &rp);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		struct kvt_key k = key_of(i, 0);
		int r = put_wait(s, ns, &k, v, vlen);
		if (r != KVT_OK)
			return fprintf(stderr, "put %llu: %s\n", (unsigned long long)i,
				       kvt_strerror(r)),
			       1;
		atomic_store(&done, i);
	}
	kvt_flush(s);
	fill_ns = now_ns() - t0;
	atomic_store(&stop, true);
	pthread_join(ta, NULL);
	pthread_join(tp, NULL);
	printf("fill: %llu blocks of %llu B in %.1f s; %llu indexed, %llu evicted; "
	       "%llu table doublings, longest %.3f ms\n",
	       (unsigned long long)n, (unsigned long long)vlen, fill_ns / 1e9,
	       (unsigned long long)stat_of(s, "ssd.blocks"),
	       (unsigned long long)stat_of(s, "ssd.segments_evicted"),
	       (unsigned long long)stat_of(s, "ssd.idx_grows"),
	       stat_of(s, "ssd.idx_grow_max_ns") / 1e6);
	report("absent", &ra);
	report("filled", &rp);
	kvt_store_destroy(s);
	return 0;
}

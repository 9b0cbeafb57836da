/*
 * evict_sweep_cost.c - what one SSD segment eviction costs the index, and
 * what it costs the gets beside it (session 45, sweep45: ssd_idx.c "One
 * segment's entries").  Not built by meson: a one-off measurement kept
 * with its figures (bench/RESULTS.md, sweep45); built against each tree
 * compared (both must have the ssd.slot_sweep_* stats, 28a18525 on).
 *
 * One store under DIR: DRAM 256M of 4 KiB chunks, an SSD of SEG-byte segments sized to hold
 * N blocks of VLEN bytes with room to spare, write-through
 * (ssd.admission=always) into a persistent namespace (never shed: every
 * block goes down; a put that finds DRAM all pinned by write-downs,
 * KVT_EFULL, is tried again 200 us later).  Fill: N blocks put and flushed, no segment evicted.
 * Then, while a putter adds fresh blocks until EVICT segments were evicted
 * (each one's entries dropped from the index), two readers get a key every
 * 50 us: one of a key never put (a DRAM miss, then the SSD index's lookup
 * under its shard's lock), one of a block put in the fill (mostly an SSD
 * read).  Prints the fill, ssd.slot_sweep_* per eviction (entries looked
 * at, mean and longest time), and the readers' p50/p99/p99.9/max latency
 * while evictions run, and how many gets took over 1 and 10 ms.
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/evict_sweep_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/evict_sweep_cost
 *   /tmp/evict_sweep_cost DIR N [VLEN [SEG [EVICT]]]
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
	uint64_t vlen = argc > 3 ? strtoull(argv[3], NULL, 0) : 1024;
	uint64_t seg = argc > 4 ? strtoull(argv[4], NULL, 0) << 20 : 16u << 20;
	uint64_t evict = argc > 5 ? strtoull(argv[5], NULL, 0) : 8;
	atomic_bool stop = false;
	struct reader ra, rp;
	pthread_t ta, tp;
	struct kvt_store *s;
	char cap[32];
	uint8_t *v;
	uint64_t i, t0, fill_ns, ev0, sw0, vis0, swns0, put2 = 0;
	uint32_t ns;

	if (!dir || n < 1000 || vlen < 1 || vlen > 65536 || seg < (1u << 20))
		return fprintf(stderr, "usage: evict_sweep_cost DIR N [VLEN [SEG_MIB [EVICT]]]\n"),
		       2;
	v = malloc(vlen);
	ra.lat = calloc(LAT_MAX, sizeof(uint64_t));
	rp.lat = calloc(LAT_MAX, sizeof(uint64_t));
	if (!v || !ra.lat || !rp.lat ||
	    ssd_store_open(dir, n, vlen, seg, "evict-sweep-cost", cap, sizeof(cap), &s, &ns) < 0)
		return fprintf(stderr, "cannot open a store in %s\n", dir), 1;
	memset(v, 0x5a, vlen);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		struct kvt_key k = key_of(i, 0);
		int r = put_wait(s, ns, &k, v, vlen);
		if (r != KVT_OK)
			return fprintf(stderr, "put %llu: %s\n", (unsigned long long)i,
				       kvt_strerror(r)),
			       1;
	}
	kvt_flush(s);
	fill_ns = now_ns() - t0;
	ev0 = stat_of(s, "ssd.segments_evicted");
	sw0 = stat_of(s, "ssd.slot_sweeps");
	vis0 = stat_of(s, "ssd.slot_sweep_visited");
	swns0 = stat_of(s, "ssd.slot_sweep_ns");
	printf("fill: %llu blocks of %llu B in %.1f s; ssd %s B in %llu slots of %llu MiB; "
	       "%llu indexed, %llu a segment; %llu evicted\n",
	       (unsigned long long)n, (unsigned long long)vlen, fill_ns / 1e9, cap,
	       (unsigned long long)stat_of(s, "ssd.segments"), (unsigned long long)(seg >> 20),
	       (unsigned long long)stat_of(s, "ssd.blocks"),
	       (unsigned long long)(stat_of(s, "ssd.sealed_records") /
				    (stat_of(s, "ssd.segments_sealed") + !stat_of(s, "ssd.segments_sealed"))),
	       (unsigned long long)ev0);
	ra = (struct reader){ .s = s, .ns = ns, .salt = 7, .range = n, .stop = &stop,
			      .lat = ra.lat };
	rp = (struct reader){ .s = s, .ns = ns, .salt = 0, .range = n, .stop = &stop,
			      .lat = rp.lat };
	pthread_create(&ta, NULL, read_loop, &ra);
	pthread_create(&tp, NULL, read_loop, &rp);
	t0 = now_ns();
	while (stat_of(s, "ssd.segments_evicted") < ev0 + evict) {
		for (uint64_t end = put2 + 1024; put2 < end; put2++) {
			struct kvt_key k = key_of(put2, 1ull << 40);
			if (put_wait(s, ns, &k, v, vlen) != KVT_OK)
				return fprintf(stderr, "put failed\n"), 1;
		}
	}
	atomic_store(&stop, true);
	pthread_join(ta, NULL);
	pthread_join(tp, NULL);
	{
		uint64_t sw = stat_of(s, "ssd.slot_sweeps") - sw0;
		uint64_t vis = stat_of(s, "ssd.slot_sweep_visited") - vis0;
		uint64_t swns = stat_of(s, "ssd.slot_sweep_ns") - swns0;
		printf("evict: %llu segments in %.1f s (%llu puts); %llu sweeps: %llu entries "
		       "looked at a sweep, %.3f ms a sweep, longest %.3f ms\n",
		       (unsigned long long)(stat_of(s, "ssd.segments_evicted") - ev0),
		       (now_ns() - t0) / 1e9, (unsigned long long)put2, (unsigned long long)sw,
		       (unsigned long long)(sw ? vis / sw : 0), sw ? swns / 1e6 / (double)sw : 0,
		       stat_of(s, "ssd.slot_sweep_max_ns") / 1e6);
	}
	report("absent", &ra);
	report("filled", &rp);
	kvt_store_destroy(s);
	return 0;
}

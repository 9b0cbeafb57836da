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
 *   cc -O2 -pthread -Iinclude bench/idx_grow_cost.c -Lbuild-release -lkvtier \
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

#define READ_GAP_NS 50000ull
#define LAT_MAX (1u << 22)

struct reader {
	struct kvt_store *s;
	uint32_t ns;
	uint64_t salt, range; /* keys key_of(rand % range, salt) */
	_Atomic uint64_t *done; /* NULL, or the range: the blocks put so far */
	atomic_bool *stop;
	uint64_t *lat;
	size_t n;
	uint64_t hits;
};

static void *read_loop(void *arg)
{
	struct reader *r = arg;
	static _Thread_local uint8_t buf[1u << 16];
	uint64_t x = r->salt * 2654435761u + 1;
	while (!atomic_load(r->stop) && r->n < LAT_MAX) {
		struct kvt_key k;
		uint64_t t0, vl = 0;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = key_of(x % (r->done ? atomic_load(r->done) + 1 : r->range), r->salt);
		t0 = now_ns();
		if (kvt_get(r->s, r->ns, &k, buf, sizeof(buf), &vl) == KVT_OK)
			r->hits++;
		r->lat[r->n++] = now_ns() - t0;
		nanosleep(&(struct timespec){ 0, READ_GAP_NS }, NULL);
	}
	return NULL;
}

/* A put; while DRAM is all pinned by write-downs (KVT_EFULL), again. */
static int put_wait(struct kvt_store *s, uint32_t ns, const struct kvt_key *k, uint8_t *v,
		    uint64_t vlen)
{
	int r;
	while ((r = kvt_put(s, ns, k, &(struct iovec){ v, vlen }, 1)) == KVT_EFULL)
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	return r;
}

static uint64_t stat_of(struct kvt_store *s, const char *name)
{
	uint64_t v = 0;
	if (kvt_store_stat(s, name, &v) < 0) {
		fprintf(stderr, "no stat %s\n", name);
		exit(1);
	}
	return v;
}

static void report(const char *name, struct reader *r)
{
	size_t over1 = 0, over10 = 0;
	qsort(r->lat, r->n, sizeof(*r->lat), cmp_u64);
	if (!r->n)
		return;
	for (size_t i = 0; i < r->n; i++) {
		over1 += r->lat[i] > 1000000;
		over10 += r->lat[i] > 10000000;
	}
	printf("  gets %-7s %8zu (%5.1f %% hits): p50 %6.1f us  p99 %7.1f us  p99.9 %8.1f us  "
	       "max %8.1f us; %zu over 1 ms, %zu over 10 ms\n",
	       name, r->n, 100.0 * (double)r->hits / (double)r->n, r->lat[r->n / 2] / 1e3,
	       r->lat[r->n * 99 / 100] / 1e3, r->lat[r->n * 999 / 1000] / 1e3,
	       r->lat[r->n - 1] / 1e3, over1, over10);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
	uint64_t vlen = argc > 3 ? strtoull(argv[3], NULL, 0) : 512;
	uint64_t seg = argc > 4 ? strtoull(argv[4], NULL, 0) << 20 : 16u << 20;
	struct kvt_ns_desc d = { .model = "idx-grow-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1,
				 .flags = KVT_NS_PERSISTENT };
	atomic_bool stop = false;
	_Atomic uint64_t done = 0;
	struct reader ra, rp;
	pthread_t ta, tp;
	struct kvt_store *s;
	char cap[32], segs[32];
	uint8_t *v;
	uint64_t i, t0, fill_ns;
	uint32_t ns;

	if (!dir || n < 1000 || vlen < 1 || vlen > 65536 || seg < (1u << 20))
		return fprintf(stderr, "usage: idx_grow_cost DIR N [VLEN [SEG_MIB]]\n"), 2;
	snprintf(cap, sizeof(cap), "%llu",
		 (unsigned long long)(((n * ((vlen + 511) / 512 * 512 + 160)) * 9 / 8 / seg + 2) *
				      seg));
	snprintf(segs, sizeof(segs), "%llu", (unsigned long long)seg);
	v = malloc(vlen);
	ra.lat = calloc(LAT_MAX, sizeof(uint64_t));
	rp.lat = calloc(LAT_MAX, sizeof(uint64_t));
	if (!v || !ra.lat || !rp.lat || kvt_store_create(&s) < 0 ||
	    kvt_store_set_option(s, "path", dir) < 0 ||
	    kvt_store_set_option(s, "dram.capacity", "256M") < 0 ||
	    kvt_store_set_option(s, "dram.chunk", "4K") < 0 ||
	    kvt_store_set_option(s, "ssd.capacity", cap) < 0 ||
	    kvt_store_set_option(s, "ssd.segment", segs) < 0 ||
	    kvt_store_set_option(s, "ssd.admission", "always") < 0 ||
	    kvt_store_set_option(s, "ssd.close_writedown_ms", "0") < 0 ||
	    kvt_store_set_option(s, "ssd.checkpoint_seals", "1000000") < 0 ||
	    kvt_store_open(s) < 0 || kvt_ns_register(s, &d, &ns) < 0)
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

/*
 * getlat.h - what bench/evict_sweep_cost.c and idx_grow_cost.c (one-off
 * measurements, not built by meson) share: the store they measure, reader
 * threads that time a get every READ_GAP_NS while the main thread fills or
 * evicts, a put that waits out KVT_EFULL, a statistic by name, and the
 * readers' latency report.  Header-only, static; include after oneoff.h.
 */
#ifndef KVT_BENCH_GETLAT_H
#define KVT_BENCH_GETLAT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "oneoff.h"

#define READ_GAP_NS 50000ull
#define LAT_MAX (1u << 22)

/* Register a persistent namespace of model in s (ssd_store_open's kind). */
static int ssd_ns(struct kvt_store *s, const char *model, uint32_t *ns)
{
	struct kvt_ns_desc d = { .model = model, .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1,
				 .flags = KVT_NS_PERSISTENT };
	return kvt_ns_register(s, &d, ns);
}

/*
 * The store both measure, in dir: DRAM 256M of 4 KiB chunks, an SSD of
 * seg-byte segments with room for n blocks of vlen bytes and 1/8 more (a
 * block takes its value rounded up to 512 and a share of its batch
 * header), in whole segments (its size as text into cap), write-through
 * (ssd.admission=always), nothing written down at close nor checkpointed
 * by seals; a persistent namespace of `model` registered.  0, or -1.
 */
static int ssd_store_open(const char *dir, uint64_t n, uint64_t vlen, uint64_t seg,
			  const char *model, char *cap, size_t cap_len, struct kvt_store **out,
			  uint32_t *ns)
{
	struct kvt_store *s;
	char segs[32];

	snprintf(cap, cap_len, "%llu",
		 (unsigned long long)(((n * ((vlen + 511) / 512 * 512 + 160)) * 9 / 8 / seg + 2) *
				      seg));
	snprintf(segs, sizeof(segs), "%llu", (unsigned long long)seg);
	if (kvt_store_create(&s) < 0)
		return -1;
	if (kvt_store_set_option(s, "path", dir) < 0 ||
	    kvt_store_set_option(s, "dram.capacity", "256M") < 0 ||
	    kvt_store_set_option(s, "dram.chunk", "4K") < 0 ||
	    kvt_store_set_option(s, "ssd.capacity", cap) < 0 ||
	    kvt_store_set_option(s, "ssd.segment", segs) < 0 ||
	    kvt_store_set_option(s, "ssd.admission", "always") < 0 ||
	    kvt_store_set_option(s, "ssd.close_writedown_ms", "0") < 0 ||
	    kvt_store_set_option(s, "ssd.checkpoint_seals", "1000000") < 0 ||
	    kvt_store_open(s) < 0 || ssd_ns(s, model, ns) < 0) {
		kvt_store_destroy(s);
		return -1;
	}
	*out = s;
	return 0;
}

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

#endif

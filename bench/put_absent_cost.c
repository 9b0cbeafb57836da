/*
 * put_absent_cost.c - what a put's put-if-absent across DRAM and the SSD
 * costs (store_dispatch.c store_below_absent, race44: asked by DRAM under
 * its shard lock, once; before, store_tiers_have, dram_put_exists, the
 * SSD's put_over, then DRAM's put-if-absent: two SSD index lookups and
 * two DRAM ones a new key).  Not built by meson: a one-off measurement
 * kept with its figures (bench/RESULTS.md, race44); built against each
 * tree compared.
 *
 * One store, DRAM 2 GiB in 4 KiB chunks + SSD 4 GiB (its default admission: nothing
 * written down while DRAM has room) under DIR.  THREADS threads each put
 * N fresh 4 KiB blocks ("new": the fast path), then put them all again
 * ("present": each answered KVT_EXISTS by DRAM).  Prints puts a second
 * for each phase.  Exits 1 if a put answers otherwise.
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/put_absent_cost.c -Lbuild-release \
 *      -lkvtier -Wl,-rpath,$PWD/build-release -o /tmp/put_absent_cost
 *   /tmp/put_absent_cost DIR [N [THREADS [new]]]
 * "new": the first phase only.  Instructions a put, machine load aside:
 *   DRAM=256M valgrind --tool=callgrind --toggle-collect=put_loop \
 *      /tmp/put_absent_cost DIR 20000 1 new
 * (DRAM: dram.capacity, default 2G; smaller, the prefault is quicker)
 * (and without "new": the difference is the present phase's).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"
#include "oneoff.h"

#define VLEN 4096u

struct worker {
	struct kvt_store *s;
	uint32_t ns;
	uint64_t from, n;
	int want, bad;
};

static void *put_loop(void *arg)
{
	struct worker *w = arg;
	static _Thread_local uint8_t v[VLEN];
	for (uint64_t i = w->from; i < w->from + w->n; i++) {
		struct kvt_key k = key_of(i, 7);
		memcpy(v, &i, sizeof(i));
		int r = kvt_put(w->s, w->ns, &k, &(struct iovec){ v, sizeof(v) }, 1);
		if (r != w->want && w->bad++ == 0)
			fprintf(stderr, "put %llu: %s\n", (unsigned long long)i, kvt_strerror(r));
	}
	return NULL;
}

static int phase(const char *name, struct kvt_store *s, uint32_t ns, uint64_t n,
		 unsigned threads, int want)
{
	struct worker w[64];
	pthread_t th[64];
	uint64_t t0 = now_ns();
	int bad = 0;
	for (unsigned j = 0; j < threads; j++) {
		w[j] = (struct worker){ s, ns, j * n, n, want, 0 };
		if (pthread_create(&th[j], NULL, put_loop, &w[j]) != 0)
			return -1;
	}
	for (unsigned j = 0; j < threads; j++) {
		pthread_join(th[j], NULL);
		bad += w[j].bad;
	}
	t0 = now_ns() - t0;
	printf("%s: %u threads, %.0f puts/s\n", name, threads,
	       (double)n * threads * 1e9 / (double)t0);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 100000;
	unsigned threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 1;
	struct kvt_ns_desc d = { .model = "put-absent-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	struct kvt_store *s;
	uint32_t ns;

	if (!dir || threads < 1 || threads > 64 || n * threads * VLEN > (UINT64_C(3) << 29))
		return fprintf(stderr, "usage: put_absent_cost DIR [N [THREADS [new]]]\n"), 2;
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "path", dir) < 0 ||
	    kvt_store_set_option(s, "dram.capacity", getenv("DRAM") ? getenv("DRAM") : "2G") < 0 ||
	    kvt_store_set_option(s, "dram.chunk", "4K") < 0 ||
	    kvt_store_set_option(s, "ssd.capacity", "4G") < 0 ||
	    kvt_store_set_option(s, "ssd.segment", "64M") < 0 ||
	    kvt_store_set_option(s, "ssd.close_writedown_ms", "0") < 0 || kvt_store_open(s) < 0 ||
	    kvt_ns_register(s, &d, &ns) < 0)
		return fprintf(stderr, "store did not open\n"), 1;
	if (phase("new", s, ns, n, threads, KVT_OK) < 0 ||
	    (!(argc > 4 && strcmp(argv[4], "new") == 0) &&
	     phase("present", s, ns, n, threads, KVT_EXISTS) < 0))
		return fprintf(stderr, "a put answered otherwise\n"), 1;
	kvt_store_destroy(s);
	return 0;
}

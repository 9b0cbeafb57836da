/*
 * nsrows_cost.c - a kvtierd's STATS with many namespace rows
 * (stats.namespaces=256; metrics.c finds rows in constant time since
 * session 25).  Not built by meson: a one-off measurement kept with its
 * figures (bench/RESULTS.md, perf25); /metrics is timed with curl beside it.
 *
 * "fill": a store with remote.addr=ADDR registers N namespaces (models
 * nsrows-0..N-1) and puts one 4 KiB block in each, so that each has a row.
 * "stats": ROUNDS STATS requests of the whole server (kvt_remote_stats
 * "*"), each timed; prints the median and range in ms and the figures one
 * answer carried.
 *
 *   cc -O2 -Iinclude -Ibuild-release bench/nsrows_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/nsrows_cost
 *   /tmp/nsrows_cost ADDR fill N
 *   /tmp/nsrows_cost ADDR stats ROUNDS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void count_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	(void)name, (void)v, (void)text;
	++*(uint64_t *)ctx;
}

int main(int argc, char **argv)
{
	struct kvt_store *s;
	uint64_t n;

	if (argc != 4)
		return fprintf(stderr, "usage: nsrows_cost ADDR fill N | stats ROUNDS\n"), 2;
	n = strtoull(argv[3], NULL, 0);
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "dram.capacity", "64M") < 0 ||
	    kvt_store_set_option(s, "remote.addr", argv[1]) < 0 || kvt_store_open(s) < 0)
		return fprintf(stderr, "store did not open\n"), 1;
	if (strcmp(argv[2], "fill") == 0) {
		static uint8_t v[4096];
		for (uint64_t i = 0; i < n; i++) {
			char model[32];
			struct kvt_ns_desc d = { .model = model, .dtype = "bf16", .layout = "raw",
						 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
			struct kvt_key k = { .len = 8 };
			uint32_t ns;
			snprintf(model, sizeof(model), "nsrows-%llu", (unsigned long long)i);
			memcpy(k.bytes, &i, 8);
			if (kvt_ns_register(s, &d, &ns) < 0 ||
			    kvt_put(s, ns, &k, &(struct iovec){ v, sizeof(v) }, 1) != KVT_OK)
				return fprintf(stderr, "ns %llu\n", (unsigned long long)i), 1;
		}
		if (kvt_flush(s) < 0)
			return 1;
	} else {
		uint64_t *t = calloc(n ? n : 1, sizeof(*t)), figures = 0;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t t0 = now_ns(), c = 0;
			int r = kvt_remote_stats(s, "*", count_cb, &c);
			t[i] = now_ns() - t0;
			if (r < 0)
				return fprintf(stderr, "STATS: %s\n", kvt_strerror(r)), 1;
			figures = c;
		}
		qsort(t, n, sizeof(*t), cmp_u64);
		printf("stats: %llu figures an answer; %llu requests: median %.2f ms, range "
		       "%.2f-%.2f ms\n",
		       (unsigned long long)figures, (unsigned long long)n, t[n / 2] / 1e6,
		       t[0] / 1e6, t[n - 1] / 1e6);
		free(t);
	}
	kvt_store_close(s);
	kvt_store_destroy(s);
	return 0;
}

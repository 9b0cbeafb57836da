/*
 * ghost_cost.c - what remote.put_local=auto's put ghost costs a get that
 * hits local DRAM (store_dispatch.c store_put_ghost_read: a key hash and
 * one slot of a 128 KiB table per get).  Not built by meson: a one-off
 * measurement kept with its figures (bench/RESULTS.md, hyg12).
 *
 * Two stores over one running kvtierd (ADDR), one with put_local=auto (the
 * ghost) and one with always (none); each puts N blocks of 4 KiB and reads
 * each back at once (so auto keeps its copies: every put is read), then
 * ROUNDS rounds, alternating the stores, get all N from local DRAM with
 * kvt_get (a copy into the caller's buffer).  Prints ns per get of each
 * round and store; exits 1 if a get is wrong or a timed get reached the
 * server (remote.gets grew).
 *
 *   cc -O2 -Iinclude -Ibuild-release bench/ghost_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/ghost_cost
 *   /tmp/ghost_cost 127.0.0.1:PORT [N [ROUNDS]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"

#define VLEN 4096

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct kvt_store *open_store(const char *addr, const char *put_local, uint32_t *ns)
{
	struct kvt_ns_desc d = { .model = "ghost-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	struct kvt_store *s;
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "dram.capacity", "1G") < 0 ||
	    kvt_store_set_option(s, "dram.chunk", "4K") < 0 ||
	    kvt_store_set_option(s, "remote.addr", addr) < 0 ||
	    kvt_store_set_option(s, "remote.put_local", put_local) < 0 || kvt_store_open(s) < 0 ||
	    kvt_ns_register(s, &d, ns) < 0) {
		fprintf(stderr, "store (%s) did not open\n", put_local);
		exit(1);
	}
	return s;
}

struct stat_want {
	const char *name;
	uint64_t v;
};

static void stat_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	struct stat_want *w = ctx;
	(void)text;
	if (strcmp(name, w->name) == 0)
		w->v = v;
}

static uint64_t stat_of(struct kvt_store *s, const char *name)
{
	struct stat_want w = { name, 0 };
	kvt_store_stats(s, stat_cb, &w);
	return w.v;
}

static struct kvt_key key_of(uint64_t i, uint64_t salt)
{
	struct kvt_key k = { .len = 32 };
	for (int j = 0; j < 4; j++) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (salt + (uint64_t)j) * 0xbf58476d1ce4e5b9ull;
		memcpy(k.bytes + 8 * j, &x, 8);
	}
	return k;
}

/* One timed round of store m: get all n from local DRAM.  Two functions,
 * so that valgrind --tool=callgrind counts each store's instructions
 * (callgrind_annotate --inclusive=yes: round_always, round_auto). */
static int round_of(struct kvt_store *s, uint32_t ns, int m, uint64_t n)
{
	static uint8_t out[VLEN];
	uint64_t len = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct kvt_key k = key_of(i, (uint64_t)m << 40);
		if (kvt_get(s, ns, &k, out, sizeof(out), &len) != KVT_OK ||
		    out[VLEN - 1] != (uint8_t)(i * 7 + (uint64_t)m))
			return -1;
	}
	return 0;
}

__attribute__((noinline)) static int round_always(struct kvt_store *s, uint32_t ns, uint64_t n)
{
	return round_of(s, ns, 0, n);
}

__attribute__((noinline)) static int round_auto(struct kvt_store *s, uint32_t ns, uint64_t n)
{
	return round_of(s, ns, 1, n);
}

int main(int argc, char **argv)
{
	const char *addr = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 65536;
	int rounds = argc > 3 ? atoi(argv[3]) : 7;
	static uint8_t v[VLEN], out[VLEN];
	uint64_t gets0[2];
	const char *mode[2] = { "always", "auto" };
	struct kvt_store *s[2];
	uint32_t ns[2];

	if (!addr)
		return fprintf(stderr, "usage: ghost_cost ADDR [N [ROUNDS]]\n"), 2;
	for (int m = 0; m < 2; m++) {
		s[m] = open_store(addr, mode[m], &ns[m]);
		for (uint64_t i = 0; i < n; i++) {
			struct kvt_key k = key_of(i, (uint64_t)m << 40);
			uint64_t len = 0;
			memset(v, (int)(i * 7 + (uint64_t)m), sizeof(v));
			if (kvt_put(s[m], ns[m], &k, &(struct iovec){ v, sizeof(v) }, 1) < 0 ||
			    kvt_get(s[m], ns[m], &k, out, sizeof(out), &len) != KVT_OK) {
				fprintf(stderr, "%s: put/get %llu failed\n", mode[m],
					(unsigned long long)i);
				return 1;
			}
		}
	}
	for (int m = 0; m < 2; m++)
		gets0[m] = stat_of(s[m], "remote.gets");
	for (int r = 0; r < rounds; r++)
		for (int mm = 0; mm < 2; mm++) {
			int m = r % 2 ? 1 - mm : mm; /* neither owns a place in the round */
			uint64_t t0 = now_ns();
			if ((m ? round_auto : round_always)(s[m], ns[m], n) < 0) {
				fprintf(stderr, "%s: a get missed DRAM or was wrong\n", mode[m]);
				return 1;
			}
			printf("round %d %-6s %.1f ns/get\n", r, mode[m],
			       (double)(now_ns() - t0) / (double)n);
		}
	for (int m = 0; m < 2; m++) {
		if (stat_of(s[m], "remote.gets") != gets0[m]) {
			fprintf(stderr, "%s: timed gets reached the server\n", mode[m]);
			return 1;
		}
		printf("%s: put_local_skips %llu, put_local_reads %llu\n", mode[m],
		       (unsigned long long)stat_of(s[m], "store.put_local_skips"),
		       (unsigned long long)stat_of(s[m], "store.put_local_reads"));
		kvt_store_close(s[m]);
		kvt_store_destroy(s[m]);
	}
	return 0;
}

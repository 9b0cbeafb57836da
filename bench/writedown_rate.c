/*
 * writedown_rate.c - the SSD tier's write-down throughput with a backlog:
 * one thread puts fresh 256 KiB blocks as fast as the store takes them
 * (ssd.admission=always, so each is written down; what passes
 * ssd.writedown_max is shed) for 3 s, and the bytes written down meanwhile
 * (ssd.writedown_bytes) are divided by the time.  With WINDOW, the store
 * gets ssd.writedown_window=WINDOW (since tomb26; the option did not exist
 * before).  Not built by meson: a one-off measurement kept with its
 * figures (bench/RESULTS.md 2026-12-04, tomb26); built against each tree
 * compared, as delete_cost.c is:
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/writedown_rate.c -Lbuild-release \
 *      -lkvtier -Wl,-rpath,$PWD/build-release -o /tmp/writedown_rate
 *   /tmp/writedown_rate DIR [WINDOW]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"

#define BIG (256u << 10)
#define RUN_NS 3000000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void written_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	(void)text;
	if (strcmp(name, "ssd.writedown_bytes") == 0)
		*(uint64_t *)ctx = v;
}

int main(int argc, char **argv)
{
	struct kvt_ns_desc d = { .model = "writedown-rate", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t v[BIG];
	struct kvt_store *s;
	uint64_t t0, w0 = 0, w1 = 0;
	uint32_t ns;

	if (argc < 2)
		return fprintf(stderr, "usage: writedown_rate DIR [WINDOW]\n"), 2;
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "path", argv[1]) < 0 ||
	    kvt_store_set_option(s, "dram.capacity", "1G") < 0 ||
	    kvt_store_set_option(s, "ssd.capacity", "8G") < 0 ||
	    kvt_store_set_option(s, "ssd.segment", "64M") < 0 ||
	    kvt_store_set_option(s, "ssd.admission", "always") < 0 ||
	    kvt_store_set_option(s, "ssd.close_writedown_ms", "0") < 0 ||
	    (argc > 2 && kvt_store_set_option(s, "ssd.writedown_window", argv[2]) < 0) ||
	    kvt_store_open(s) < 0 || kvt_ns_register(s, &d, &ns) < 0)
		return fprintf(stderr, "store did not open\n"), 1;
	t0 = now_ns();
	kvt_store_stats(s, written_cb, &w0);
	for (uint64_t i = 0; now_ns() - t0 < RUN_NS; i++) {
		struct kvt_key k = { .len = 16 };
		memcpy(k.bytes, &i, sizeof(i));
		memset(v, (int)i, 64);
		kvt_put(s, ns, &k, &(struct iovec){ v, sizeof(v) }, 1);
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	kvt_store_stats(s, written_cb, &w1);
	printf("written down %.0f MiB/s\n", (double)(w1 - w0) / 1048576.0 / secs);
	kvt_store_close(s);
	kvt_store_destroy(s);
	return 0;
}

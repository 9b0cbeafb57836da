/*
 * oneoff.h - what the one-off measurements of bench/ (not built by meson,
 * kept with their figures in bench/RESULTS.md: delete_cost.c,
 * open_delete_cost.c) share: a monotonic clock, distinct 32-byte keys
 * and a u64 order for qsort.  Header-only, static: each is one file
 * built against one tree's libkvtier (its own build line).
 */
#ifndef KVT_BENCH_ONEOFF_H
#define KVT_BENCH_ONEOFF_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Key i of the set salt: distinct over i and salt, spread over its bytes. */
static inline struct kvt_key key_of(uint64_t i, uint64_t salt)
{
	struct kvt_key k = { .len = 32 };
	for (int j = 0; j < 4; j++) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^
			     (salt + (uint64_t)j) * 0xbf58476d1ce4e5b9ull;
		memcpy(k.bytes + 8 * j, &x, 8);
	}
	return k;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#endif

/*
 * arena.h - one DRAM shard's chunked region (see arena.c).
 * Every field is guarded by the owning shard's lock after arena_init.
 */
#ifndef KVT_ARENA_H
#define KVT_ARENA_H

#include "dram.h"
#include "kvt_int.h"

enum { ARENA_PAGES_4K = 0, ARENA_PAGES_THP = 1, ARENA_PAGES_HUGETLB = 2 };

struct arena_run {
	uint32_t start; /* first chunk */
	uint32_t count; /* chunks */
};

struct arena {
	struct kvt_mem *mem;
	char *base;           /* region start, 2 MiB aligned */
	size_t map_len;       /* bytes mapped */
	uint64_t *bitmap;     /* 1 bit per chunk, 1 = used */
	uint32_t words;       /* bitmap length in 64-bit words */
	uint32_t chunk;       /* bytes per chunk */
	uint32_t chunk_shift; /* log2(chunk) */
	uint32_t chunk_count; /* chunks in the region */
	uint32_t free_count;  /* chunks free */
	uint32_t cursor;      /* next-fit start */
	uint64_t split_allocs; /* allocations that needed more than one run */
	int page_mode;        /* ARENA_PAGES_* */
	bool prefaulted;
};

int arena_init(struct arena *a, struct kvt_mem *mem, uint64_t bytes, uint32_t chunk,
	       int huge, bool prefault);
void arena_fini(struct arena *a);
/* n chunks as up to max_runs runs; 0 or -ENOSPC (then nothing is taken). */
int arena_alloc(struct arena *a, uint32_t n, struct arena_run *runs, uint32_t max_runs,
		uint32_t *run_count);
void arena_free(struct arena *a, uint32_t start, uint32_t count);
/* True if every chunk of the run is marked used (debug checks). */
bool arena_check(const struct arena *a, uint32_t start, uint32_t count);
const char *arena_page_mode_name(int mode);

static inline char *arena_ptr(const struct arena *a, uint32_t chunk)
{
	return a->base + ((size_t)chunk << a->chunk_shift);
}

#endif

/*
 * arena.c - one shard's slice of the DRAM arena: an mmap'd region cut into
 * fixed chunks (dram.chunk bytes, 4 KiB..2 MiB, a power of two), with a
 * bitmap of used chunks.
 *
 * Owns: the region's mapping, its bitmap, and the page mode it got.
 * Locking: none of its own; the owning dram shard's lock guards every call
 * after arena_init.
 *
 * Memory.  The region is mapped once at open and pre-faulted, because first
 * touch of fresh 4 KiB pages runs at a fifth of memcpy's speed.  In "auto"
 * mode it tries hugetlbfs 2 MiB pages (only there if an administrator
 * reserved them), then transparent huge pages (madvise(MADV_HUGEPAGE) before
 * MADV_POPULATE_WRITE, so the fault path can hand out 2 MiB pages), and
 * says which it got.  Chunks are chunk-aligned, hence at least 4 KiB
 * aligned: O_DIRECT writes and cudaHostRegister take them as they are.
 *
 * Allocation.  arena_alloc wants n chunks.  It first looks for one free
 * run of n (next fit from a rotating cursor, which in a FIFO-evicted cache
 * tends to find freshly evicted space in one piece); failing that, and only
 * if n chunks are free in total, it hands out several runs.  So external
 * fragmentation never causes an eviction: any free chunk is usable, and a
 * value costs at most one partial chunk of waste (doc/dram.md).
 *
 *   bitmap:  1 = used           cursor
 *            |1111|0000|0011|1100|0000|...
 *                                  ^ next fit starts here, wraps once
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_2M (2u << 20)

static int arena_read_int_file(const char *path, long *v)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	*v = strtol(buf, NULL, 10);
	return 0;
}

static bool arena_thp_allowed(void)
{
	char buf[128];
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return strstr(buf, "[never]") == NULL;
}

/* Touch every page so later puts never take a first-touch fault. */
static int arena_populate(void *p, size_t len)
{
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* Kernel older than 5.14: write one byte per 4 KiB page. */
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)p)[off] = 0;
	return 0;
}

int arena_init(struct arena *a, struct kvt_mem *mem, uint64_t bytes, uint32_t chunk,
	       int huge, bool prefault)
{
	size_t map_len, words;
	void *p = MAP_FAILED;
	int ret;

	memset(a, 0, sizeof(*a));
	a->mem = mem;
	a->chunk = chunk;
	a->chunk_shift = (uint32_t)__builtin_ctz(chunk);
	a->chunk_count = (uint32_t)(bytes >> a->chunk_shift);
	if (a->chunk_count == 0)
		return KVT_EOPTVAL;
	map_len = KVT_ALIGN_UP((size_t)a->chunk_count << a->chunk_shift, HUGE_2M);

	if (huge == DRAM_HUGE_AUTO) {
		long reserved = 0;
		if (arena_read_int_file("/proc/sys/vm/nr_hugepages", &reserved) == 0 &&
		    reserved > 0) {
			p = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
					 (prefault ? MAP_POPULATE : 0),
				 -1, 0);
			if (p != MAP_FAILED)
				a->page_mode = ARENA_PAGES_HUGETLB;
		}
	}
	if (p == MAP_FAILED) {
		/* Over-map by 2 MiB so the region can start on a huge page boundary. */
		size_t over = map_len + HUGE_2M;
		char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		char *start;
		if (raw == MAP_FAILED)
			return -errno;
		start = (char *)KVT_ALIGN_UP((uintptr_t)raw, HUGE_2M);
		if (start > raw)
			munmap(raw, (size_t)(start - raw));
		if (start + map_len < raw + over)
			munmap(start + map_len, (size_t)(raw + over - (start + map_len)));
		p = start;
		a->page_mode = ARENA_PAGES_4K;
		if (huge != DRAM_HUGE_OFF && arena_thp_allowed() &&
		    madvise(p, map_len, MADV_HUGEPAGE) == 0)
			a->page_mode = ARENA_PAGES_THP;
		if (prefault) {
			ret = arena_populate(p, map_len);
			if (ret < 0) {
				munmap(p, map_len);
				return ret;
			}
		}
	}
	a->base = p;
	a->map_len = map_len;
	a->prefaulted = prefault;

	words = (a->chunk_count + 63) / 64;
	a->bitmap = kvt_mem_calloc(mem, words, sizeof(uint64_t));
	if (!a->bitmap) {
		munmap(a->base, a->map_len);
		a->base = NULL;
		return -ENOMEM;
	}
	a->words = (uint32_t)words;
	/* Bits past chunk_count are permanently "used". */
	if (a->chunk_count % 64)
		a->bitmap[words - 1] = ~UINT64_C(0) << (a->chunk_count % 64);
	a->free_count = a->chunk_count;
	return 0;
}

void arena_fini(struct arena *a)
{
	if (a->base)
		munmap(a->base, a->map_len);
	kvt_mem_free(a->mem, a->bitmap, (size_t)a->words * sizeof(uint64_t));
	memset(a, 0, sizeof(*a));
}

const char *arena_page_mode_name(int mode)
{
	switch (mode) {
	case ARENA_PAGES_HUGETLB: return "hugetlb";
	case ARENA_PAGES_THP: return "thp";
	default: return "4k";
	}
}

static inline bool arena_used(const struct arena *a, uint32_t i)
{
	return (a->bitmap[i >> 6] >> (i & 63)) & 1;
}

static void arena_mark(struct arena *a, uint32_t start, uint32_t count, bool used)
{
	uint32_t i = start, end = start + count;
	while (i < end) {
		uint32_t bit = i & 63, n = 64 - bit;
		uint64_t mask;
		if (n > end - i)
			n = end - i;
		mask = (n == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << n) - 1)) << bit;
		if (used)
			a->bitmap[i >> 6] |= mask;
		else
			a->bitmap[i >> 6] &= ~mask;
		i += n;
	}
}

/* First free chunk at or after i (< limit), or limit. */
static uint32_t arena_next_free(const struct arena *a, uint32_t i, uint32_t limit)
{
	while (i < limit) {
		uint64_t w = ~a->bitmap[i >> 6] & (~UINT64_C(0) << (i & 63));
		if (w) {
			uint32_t j = (i & ~63u) + (uint32_t)__builtin_ctzll(w);
			return j < limit ? j : limit;
		}
		i = (i & ~63u) + 64;
	}
	return limit;
}

/* First used chunk at or after i (< limit), or limit. */
static uint32_t arena_next_used(const struct arena *a, uint32_t i, uint32_t limit)
{
	while (i < limit) {
		uint64_t w = a->bitmap[i >> 6] & (~UINT64_C(0) << (i & 63));
		if (w) {
			uint32_t j = (i & ~63u) + (uint32_t)__builtin_ctzll(w);
			return j < limit ? j : limit;
		}
		i = (i & ~63u) + 64;
	}
	return limit;
}

/* Look for one free run of n chunks in [from, limit). */
static bool arena_find_run(const struct arena *a, uint32_t from, uint32_t limit, uint32_t n,
			   uint32_t *start)
{
	uint32_t i = from;
	while (i < limit) {
		uint32_t s = arena_next_free(a, i, limit), e;
		if (s >= limit)
			return false;
		e = arena_next_used(a, s, s + n < limit ? s + n : limit);
		if (e - s >= n) {
			*start = s;
			return true;
		}
		i = e;
	}
	return false;
}

int arena_alloc(struct arena *a, uint32_t n, struct arena_run *runs, uint32_t max_runs,
		uint32_t *run_count)
{
	uint32_t start, got = 0, nr = 0, i, pass;

	if (n == 0 || n > a->free_count)
		return -ENOSPC;
	/* 1. One contiguous run, next fit from the cursor, wrapping once. */
	if (arena_find_run(a, a->cursor, a->chunk_count, n, &start) ||
	    arena_find_run(a, 0, a->chunk_count, n, &start)) {
		arena_mark(a, start, n, true);
		a->free_count -= n;
		a->cursor = start + n == a->chunk_count ? 0 : start + n;
		runs[0].start = start;
		runs[0].count = n;
		*run_count = 1;
		return 0;
	}
	/* 2. Several runs: gather free chunks from the cursor on. */
	for (pass = 0, i = a->cursor; got < n && pass < 2; pass++, i = 0) {
		while (got < n && i < a->chunk_count) {
			uint32_t s = arena_next_free(a, i, a->chunk_count), e, take;
			if (s >= a->chunk_count)
				break;
			e = arena_next_used(a, s, a->chunk_count);
			take = e - s < n - got ? e - s : n - got;
			if (nr == max_runs)
				goto undo;
			runs[nr].start = s;
			runs[nr].count = take;
			arena_mark(a, s, take, true);
			nr++;
			got += take;
			i = s + take;
		}
	}
	if (got < n)
		goto undo; /* cannot happen while free_count is right */
	a->free_count -= n;
	a->cursor = i >= a->chunk_count ? 0 : i;
	a->split_allocs++;
	*run_count = nr;
	return 0;
undo:
	for (uint32_t k = 0; k < nr; k++)
		arena_mark(a, runs[k].start, runs[k].count, false);
	return -ENOSPC;
}

void arena_free(struct arena *a, uint32_t start, uint32_t count)
{
	arena_mark(a, start, count, false);
	a->free_count += count;
}

bool arena_check(const struct arena *a, uint32_t start, uint32_t count)
{
	for (uint32_t i = start; i < start + count; i++)
		if (!arena_used(a, i))
			return false;
	return true;
}

/*
 * mem.c - the one allocation wrapper.  Every byte of index and metadata the
 * library allocates goes through kvt_mem_*: it is counted (stat
 * "mem.meta_bytes"), and tests can make the Nth allocation fail (SQLite's
 * fault simulation) to prove every failure path leaves the store consistent.
 *
 * Frees are sized: the caller passes the length it allocated, so no header
 * is needed and the count is exact.  The counters are atomics; the wrapper
 * has no lock.  DRAM arena regions are mmap'd by arena.c, not counted here.
 */
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"

void kvt_mem_init(struct kvt_mem *m)
{
	atomic_init(&m->bytes, 0);
	atomic_init(&m->peak_bytes, 0);
	atomic_init(&m->allocs, 0);
	atomic_init(&m->fail_at, 0);
}

void kvt_mem_fail_nth(struct kvt_mem *m, int64_t n)
{
	atomic_store(&m->fail_at, n > 0 ? n : 0);
}

/* True if this allocation must fail (fault injection). */
static bool mem_should_fail(struct kvt_mem *m)
{
	int64_t v = atomic_load_explicit(&m->fail_at, memory_order_relaxed);
	while (v > 0) {
		if (atomic_compare_exchange_weak(&m->fail_at, &v, v - 1))
			return v == 1;
	}
	return false;
}

static void mem_count(struct kvt_mem *m, int64_t delta)
{
	int64_t now = atomic_fetch_add_explicit(&m->bytes, delta, memory_order_relaxed) + delta;
	if (delta > 0) {
		int64_t peak = atomic_load_explicit(&m->peak_bytes, memory_order_relaxed);
		while (now > peak &&
		       !atomic_compare_exchange_weak_explicit(&m->peak_bytes, &peak, now,
							      memory_order_relaxed,
							      memory_order_relaxed))
			;
		atomic_fetch_add_explicit(&m->allocs, 1, memory_order_relaxed);
	}
}

void *kvt_mem_alloc(struct kvt_mem *m, size_t len)
{
	void *p;
	if (len == 0 || mem_should_fail(m))
		return NULL;
	p = malloc(len);
	if (p)
		mem_count(m, (int64_t)len);
	return p;
}

void *kvt_mem_calloc(struct kvt_mem *m, size_t count, size_t len)
{
	void *p;
	if (count == 0 || len == 0 || count > SIZE_MAX / len || mem_should_fail(m))
		return NULL;
	p = calloc(count, len);
	if (p)
		mem_count(m, (int64_t)(count * len));
	return p;
}

void *kvt_mem_alloc_aligned(struct kvt_mem *m, size_t align, size_t len)
{
	void *p;
	if (len == 0 || mem_should_fail(m) || posix_memalign(&p, align, len) != 0)
		return NULL;
	mem_count(m, (int64_t)len);
	return p;
}

void *kvt_mem_realloc(struct kvt_mem *m, void *p, size_t old_len, size_t new_len)
{
	void *q;
	if (new_len == 0 || mem_should_fail(m))
		return NULL;
	q = realloc(p, new_len);
	if (q)
		mem_count(m, (int64_t)new_len - (int64_t)old_len);
	return q;
}

void kvt_mem_free(struct kvt_mem *m, void *p, size_t len)
{
	if (!p)
		return;
	free(p);
	mem_count(m, -(int64_t)len);
}

char *kvt_mem_strdup(struct kvt_mem *m, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = kvt_mem_alloc(m, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

void kvt_mem_strfree(struct kvt_mem *m, char *s)
{
	if (s)
		kvt_mem_free(m, s, strlen(s) + 1);
}

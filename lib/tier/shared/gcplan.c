/*
 * gcplan.c - the shared tier's budget collection in bounded memory: which
 * block files go, oldest first, from a histogram of their ages over two
 * walks (gcplan.h says the walks, their cost and their precision).
 *
 * Owns: the plan's state and its histogram.  Knows nothing of files or
 * objects: the collectors (shdir.c, shs3.c) walk, ask, remove.
 */
#include "gcplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t gcplan_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint32_t gcplan_bucket(int64_t now_s, int64_t mtime_s)
{
	/* Unsigned: a hostile listing's mtimes may span all of int64. */
	uint64_t age = mtime_s >= now_s ? 0 : (uint64_t)now_s - (uint64_t)mtime_s;
	unsigned e;

	if (age < GCPLAN_SUB)
		return (uint32_t)age;
	e = 63u - (unsigned)__builtin_clzll(age); /* 6 .. 63 */
	return GCPLAN_SUB + (e - 6u) * GCPLAN_SUB +
	       (uint32_t)((age >> (e - 6u)) & (GCPLAN_SUB - 1));
}

int gcplan_init(struct gcplan *p, uint64_t budget, int64_t now_s)
{
	memset(p, 0, sizeof(*p));
	p->walk = 1;
	p->now_s = now_s;
	p->budget = budget;
	if (!budget)
		return 0;
	p->hist = calloc(GCPLAN_BUCKETS, sizeof(*p->hist));
	return p->hist ? 0 : -ENOMEM;
}

void gcplan_free(struct gcplan *p)
{
	free(p->hist);
	p->hist = NULL;
}

bool gcplan_see(struct gcplan *p, int64_t mtime_s, uint64_t bytes)
{
	uint32_t b;

	if (p->walk == 1) {
		p->total = gcplan_add(p->total, bytes);
		if (p->hist) {
			b = gcplan_bucket(p->now_s, mtime_s);
			p->hist[b] = gcplan_add(p->hist[b], bytes);
		}
		return false;
	}
	if (p->walk != 2)
		return false;
	b = gcplan_bucket(p->now_s, mtime_s);
	if (b > p->cut)
		return true;
	if (b == p->cut && p->at_cut) {
		p->at_cut -= bytes < p->at_cut ? bytes : p->at_cut;
		return true;
	}
	return false;
}

bool gcplan_next(struct gcplan *p)
{
	uint64_t need, sum = 0;
	uint32_t b;

	if (p->walk != 1 || !p->budget || p->total <= p->budget) {
		p->walk = 0;
		return false;
	}
	/* The oldest first: the bucket where the sum reaches what must go
	 * (the youngest, 0, at the latest: the buckets sum to the total). */
	need = p->total - p->budget;
	for (b = GCPLAN_BUCKETS - 1; b > 0; b--) {
		uint64_t next = gcplan_add(sum, p->hist[b]);
		if (next >= need)
			break;
		sum = next;
	}
	p->cut = b;
	p->at_cut = need - sum;
	p->walk = 2;
	return true;
}

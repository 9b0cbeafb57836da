/*
 * optimum.c - the offline optimum of a trace at a given capacity: what the
 * best possible eviction and admission would hit, for "kvtier replay".
 *
 * Owns rp_optimum (and the small heap it uses).  Pure computation over a
 * loaded trace: no store, no I/O.
 *
 * Model (the one an engine sees, and ../shared/tools/belady.py's): a cache
 * of cap blocks; for each request in order, its hits are its *leading*
 * blocks present (prefix semantics); then every block of the request is
 * inserted or refreshed, in order.  The policy is Belady's MIN with bypass:
 * when a block not present arrives and the cache is full, the cached block
 * whose next use is farthest is evicted -- unless the newcomer's own next
 * use is at least as far, in which case the newcomer is not cached.
 *
 * Two counts come out of one pass:
 *   - prefix_hits: leading hits only (what the replay measures), achieved
 *     by this offline policy, so a lower bound on the true optimum;
 *   - any_hits: every access that found its block, whatever came before;
 *     MIN maximises this count (Belady 1966; Mattson et al. 1970), and
 *     prefix hits never exceed it, so it bounds any policy from above.
 * When every hash id has one parent throughout the trace (true of prefix
 * hashes: an id names its whole prefix), a child's next use always comes
 * after its parent's, so MIN keeps the cache closed under parents, every
 * hit is a leading one, and the two counts are equal: MIN is then the
 * exact optimum (tests/unit/test_optimum.c checks this against an
 * exhaustive search, and shows a trace with inconsistent parents where
 * the counts differ).  The replay prints prefix_hits as "optimum" and
 * any_hits as its bound when they differ.
 *
 * Cost: O(B log B) time and O(B) memory for B block accesses.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define OPT_NEVER UINT64_MAX

/* Open-addressing map id -> uint64 value. */
struct opt_map {
	uint64_t *keys, *vals;
	uint8_t *used;
	size_t mask;
};

static int opt_map_init(struct opt_map *m, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 16)
		cap <<= 1;
	m->keys = malloc(cap * sizeof *m->keys);
	m->vals = malloc(cap * sizeof *m->vals);
	m->used = calloc(cap, 1);
	m->mask = cap - 1;
	if (!m->keys || !m->vals || !m->used)
		return -ENOMEM;
	return 0;
}

static void opt_map_free(struct opt_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
}

static size_t opt_map_slot(const struct opt_map *m, uint64_t k)
{
	uint64_t h = k * UINT64_C(0x9e3779b97f4a7c15);
	size_t i = (size_t)(h ^ (h >> 31)) & m->mask;
	while (m->used[i] && m->keys[i] != k)
		i = (i + 1) & m->mask;
	return i;
}

/* Max-heap of (next use, id) with lazy deletion: an entry is live if the
 * id's current next use (in `where`) still equals it. */
struct opt_heap {
	uint64_t *nu, *id;
	size_t n, cap;
};

static int opt_heap_push(struct opt_heap *h, uint64_t nu, uint64_t id)
{
	if (h->n == h->cap) {
		size_t c = h->cap ? 2 * h->cap : 1024;
		uint64_t *a = realloc(h->nu, c * sizeof *a);
		if (!a)
			return -ENOMEM;
		h->nu = a;
		uint64_t *b = realloc(h->id, c * sizeof *b);
		if (!b)
			return -ENOMEM;
		h->id = b;
		h->cap = c;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h->nu[p] >= nu)
			break;
		h->nu[i] = h->nu[p];
		h->id[i] = h->id[p];
		i = p;
	}
	h->nu[i] = nu;
	h->id[i] = id;
	return 0;
}

static void opt_heap_pop(struct opt_heap *h)
{
	uint64_t nu = h->nu[--h->n], id = h->id[h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->nu[c + 1] > h->nu[c])
			c++;
		if (h->nu[c] <= nu)
			break;
		h->nu[i] = h->nu[c];
		h->id[i] = h->id[c];
		i = c;
	}
	h->nu[i] = nu;
	h->id[i] = id;
}

int rp_optimum(const struct rp_trace *t, size_t count, uint64_t cap, struct rp_optimum *out)
{
	uint64_t total = 0;
	uint64_t *nxt = NULL;
	struct opt_map last = { 0 }, in = { 0 };
	struct opt_heap heap = { 0 };
	uint64_t cached = 0;
	int ret = -ENOMEM;

	memset(out, 0, sizeof *out);
	if (count > t->count)
		count = t->count;
	for (size_t q = 0; q < count; q++)
		total += t->reqs[q].n_ids;
	out->blocks = total;
	out->capacity = cap;
	if (total == 0)
		return 0;
	nxt = malloc(total * sizeof *nxt);
	if (!nxt || opt_map_init(&last, total) < 0 || opt_map_init(&in, total) < 0)
		goto out;
	/* Next use of each access, walking backwards. */
	uint64_t i = total;
	for (size_t q = count; q-- > 0;) {
		const struct rp_req *r = &t->reqs[q];
		for (uint32_t j = r->n_ids; j-- > 0;) {
			size_t s = opt_map_slot(&last, r->ids[j]);
			i--;
			nxt[i] = last.used[s] ? last.vals[s] : OPT_NEVER;
			last.used[s] = 1;
			last.keys[s] = r->ids[j];
			last.vals[s] = i;
		}
	}
	/* Forward: `in` maps cached ids to their next use. */
	i = 0;
	for (size_t q = 0; q < count; q++) {
		const struct rp_req *r = &t->reqs[q];
		bool lead = true;
		for (uint32_t j = 0; j < r->n_ids; j++, i++) {
			uint64_t id = r->ids[j];
			size_t s = opt_map_slot(&in, id);
			bool present = in.used[s] && in.vals[s] != OPT_NEVER - 1;
			if (present) {
				out->any_hits++;
				if (lead)
					out->prefix_hits++;
			} else {
				lead = false;
			}
			if (cap == 0)
				continue;
			if (!present && cached >= cap) {
				/* The farthest cached block (skip stale heap entries). */
				for (;;) {
					size_t v = opt_map_slot(&in, heap.id[0]);
					if (in.used[v] && in.vals[v] == heap.nu[0])
						break;
					opt_heap_pop(&heap);
				}
				if (heap.nu[0] <= nxt[i])
					continue; /* bypass: needed no sooner than anything cached */
				size_t v = opt_map_slot(&in, heap.id[0]);
				in.vals[v] = OPT_NEVER - 1; /* evicted (a tombstone) */
				opt_heap_pop(&heap);
				cached--;
				s = opt_map_slot(&in, id); /* same slot: tombstones are not reused */
			}
			if (!present)
				cached++;
			in.used[s] = 1;
			in.keys[s] = id;
			in.vals[s] = nxt[i];
			if (opt_heap_push(&heap, nxt[i], id) < 0)
				goto out;
		}
	}
	ret = 0;
out:
	free(nxt);
	free(heap.nu);
	free(heap.id);
	opt_map_free(&last);
	opt_map_free(&in);
	return ret;
}

/*
 * store_scan.c - kvt_scan: a namespace's keys, a page at a time, from the
 * local tiers' indexes (kvtier.h, "Listing a namespace's keys").
 *
 * Owns nothing past one call.  The cursor is the last key returned, and
 * keys come in increasing byte order, so a page is "the max smallest keys
 * above the cursor": each call walks the DRAM index (dram_scan) and then
 * every chain tier that has a scan hook (the SSD index), shard by shard,
 * and keeps the smallest candidates in a bounded max-heap.  The order of
 * the walk is what makes a key present throughout seen: a block leaves
 * DRAM only once it is on SSD (or gone), so one that moves down after its
 * DRAM shard was walked was seen there, and one that moved before is in
 * the SSD index when that is walked.
 *
 * A key can be in both indexes, so the heap holds 2*max candidates: the
 * max smallest distinct keys have at most 2*max entries among them, all
 * smaller than any other, so they are all kept; duplicates go after the
 * sort.  Callbacks run under the tiers' shard locks: they only compare
 * and copy.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"
#include "tier.h"

struct scan {
	const struct kvt_key *after;  /* NULL: from the first key */
	const uint8_t *prefix;
	size_t prefix_len;
	struct kvt_key *heap;         /* max-heap by key_cmp */
	size_t n, cap;
};

static int key_cmp(const struct kvt_key *a, const struct kvt_key *b)
{
	uint32_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->bytes, b->bytes, n);
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static void heap_swap(struct kvt_key *h, size_t i, size_t j)
{
	struct kvt_key t = h[i];
	h[i] = h[j];
	h[j] = t;
}

static void heap_down(struct kvt_key *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && key_cmp(&h[l], &h[m]) > 0)
			m = l;
		if (r < n && key_cmp(&h[r], &h[m]) > 0)
			m = r;
		if (m == i)
			return;
		heap_swap(h, i, m);
		i = m;
	}
}

static void scan_note(void *ctx, const struct kvt_key *k)
{
	struct scan *sc = ctx;
	if (sc->prefix_len &&
	    (k->len < sc->prefix_len || memcmp(k->bytes, sc->prefix, sc->prefix_len)))
		return;
	if (sc->after && key_cmp(k, sc->after) <= 0)
		return;
	if (sc->n < sc->cap) {
		size_t i = sc->n++;
		sc->heap[i] = *k;
		while (i && key_cmp(&sc->heap[(i - 1) / 2], &sc->heap[i]) < 0) {
			heap_swap(sc->heap, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
	} else if (key_cmp(k, &sc->heap[0]) < 0) {
		sc->heap[0] = *k;
		heap_down(sc->heap, sc->n, 0);
	}
}

int64_t kvt_scan(struct kvt_store *s, uint32_t ns, struct kvt_key *cursor, const void *prefix,
		 size_t prefix_len, struct kvt_key *keys, size_t max)
{
	struct scan sc = { .prefix = prefix, .prefix_len = prefix_len };
	size_t out = 0;
	int ret;

	if (!s || !cursor || !keys || (prefix_len && !prefix))
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (max == 0 || max > KVT_SCAN_MAX || prefix_len > KVT_KEY_MAX)
		return KVT_EBADLEN;
	if (cursor->len > KVT_KEY_MAX)
		return KVT_EKEYLEN;
	if (ns == KVT_NS_ALL || !ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	sc.after = cursor->len ? cursor : NULL;
	sc.cap = 2 * max;
	sc.heap = kvt_mem_alloc(&s->mem, sc.cap * sizeof(*sc.heap));
	if (!sc.heap)
		return -ENOMEM;

	if (s->dram)
		dram_scan(s->dram, ns, scan_note, &sc);
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->scan)
			s->tiers[i].ops->scan(s->tiers[i].t, ns, scan_note, &sc);

	/* Heap sort in place (ascending), then drop the duplicates. */
	for (size_t n = sc.n; n > 1; n--) {
		heap_swap(sc.heap, 0, n - 1);
		heap_down(sc.heap, n - 1, 0);
	}
	for (size_t i = 0; i < sc.n && out < max; i++)
		if (!out || key_cmp(&sc.heap[i], &keys[out - 1]) != 0)
			keys[out++] = sc.heap[i];
	if (out)
		*cursor = keys[out - 1];
	kvt_mem_free(&s->mem, sc.heap, sc.cap * sizeof(*sc.heap));
	return (int64_t)out;
}

/*
 * minisim.c - a miniature simulation of one eviction policy over a sample
 * of the keys, to compare policies on the live workload (Waldspurger et
 * al., "Cache Modeling and Optimization using Miniature Simulations",
 * ATC'17: a cache of C/R fed the keys whose hash falls in 1/R of the hash
 * space hits about as often as a cache of C fed all of them).
 *
 * Owns: its entries, index and ghost table; the caller (evict.c, under a
 * shard lock) samples the keys and keeps the score.  Keys are known by a
 * 32-bit fingerprint of their hash only: a collision makes one simulated
 * hit or miss wrong, nothing else.
 *
 * Two policies: LRU (one list), and segmented -- a new key starts on
 * probation (P), a key hit, or back while the ghost remembers it, goes to
 * main (M); victims come from P's tail while M holds at most main_max
 * chunks, from M's tail otherwise; every victim is remembered in the ghost
 * (ghost.c, as the real cache's), and a key back counts as reused if its
 * ghost entry is younger than the horizon (prefix-adapt simulates two).
 * The same rule as evict.c's prefix-adapt in its segmented mode.
 */
#include <errno.h>
#include <string.h>

#include "minisim.h"

struct minisim_ent {
	uint32_t fp;     /* 0: free */
	uint32_t prev, next;
	uint32_t hnext;  /* index chain */
	uint32_t chunks : 31;
	uint32_t main : 1;
};
/* 20 bytes: two simulations of 1/16 of the chunks cost 2.5 B per block
 * (doc/policies.md "Bookkeeping"). */
_Static_assert(sizeof(struct minisim_ent) == 20, "minisim_ent grew");

enum { MS_P = 0, MS_M = 1, MS_FIRST = 2 };

static inline uint32_t ms_fp(uint64_t hash)
{
	return (uint32_t)(hash >> 32) | 1u;
}

/* The ghost's key for a fingerprint (entries keep only the fingerprint):
 * mixed (splitmix64's finalizer), so that the ghost's bucket (low bits)
 * and its 12-bit fingerprint (top bits) both depend on all of fp's. */
static inline uint64_t ms_ghost_key(uint32_t fp)
{
	uint64_t z = (uint64_t)fp * UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static void ms_unlink(struct minisim *m, uint32_t i)
{
	struct minisim_ent *e = &m->ent[i];
	m->ent[e->prev].next = e->next;
	m->ent[e->next].prev = e->prev;
	if (e->main)
		m->main_chunks -= e->chunks;
}

/* At the head (newest end) of list l (MS_P or MS_M). */
static void ms_push(struct minisim *m, uint32_t l, uint32_t i)
{
	struct minisim_ent *e = &m->ent[i];
	e->prev = l;
	e->next = m->ent[l].next;
	m->ent[e->next].prev = i;
	m->ent[l].next = i;
	e->main = l == MS_M;
	if (e->main)
		m->main_chunks += e->chunks;
}

int minisim_init(struct minisim *m, struct kvt_mem *mem, uint64_t cap_chunks, uint32_t max_entries,
		 bool seg, unsigned main_pct, uint64_t ghost_keys, unsigned horizon)
{
	uint32_t nb = 16;
	memset(m, 0, sizeof(*m));
	m->mem = mem;
	if (max_entries < 4)
		max_entries = 4;
	while (nb < max_entries && nb < (UINT32_C(1) << 24))
		nb <<= 1;
	m->nent = max_entries + MS_FIRST;
	m->ent = kvt_mem_calloc(mem, m->nent, sizeof(*m->ent));
	m->bucket = kvt_mem_calloc(mem, nb, sizeof(uint32_t));
	if (!m->ent || !m->bucket)
		goto fail;
	m->bucket_mask = nb - 1;
	if (seg && ghost_init(&m->ghost, mem, ghost_keys ? ghost_keys : max_entries) < 0)
		goto fail;
	for (uint32_t l = MS_P; l <= MS_M; l++)
		m->ent[l].prev = m->ent[l].next = l;
	m->next_unused = MS_FIRST;
	m->cap_chunks = cap_chunks ? cap_chunks : 1;
	m->main_max = m->cap_chunks * main_pct / 100;
	m->seg = seg;
	m->horizon = horizon;
	return 0;
fail:
	minisim_fini(m);
	return -ENOMEM;
}

void minisim_fini(struct minisim *m)
{
	if (m->ent)
		kvt_mem_free(m->mem, m->ent, (size_t)m->nent * sizeof(*m->ent));
	if (m->bucket)
		kvt_mem_free(m->mem, m->bucket, ((size_t)m->bucket_mask + 1) * sizeof(uint32_t));
	ghost_fini(&m->ghost);
	memset(m, 0, sizeof(*m));
}

static void ms_evict(struct minisim *m, uint32_t i)
{
	struct minisim_ent *e = &m->ent[i];
	uint32_t *slot = &m->bucket[e->fp & m->bucket_mask];
	ms_unlink(m, i);
	m->used_chunks -= e->chunks;
	while (*slot != i)
		slot = &m->ent[*slot].hnext;
	*slot = e->hnext;
	if (m->seg)
		ghost_add(&m->ghost, ms_ghost_key(e->fp));
	e->fp = 0;
	e->hnext = m->free_head;
	m->free_head = i;
}

/* The next victim: P's tail unless M is over its share (or P empty). */
static uint32_t ms_victim(const struct minisim *m)
{
	uint32_t p = m->ent[MS_P].prev, q = m->ent[MS_M].prev;
	if (p == MS_P)
		return q;
	if (q == MS_M || m->main_chunks <= m->main_max)
		return p;
	return q;
}

bool minisim_access(struct minisim *m, uint64_t hash, uint32_t chunks, bool retain)
{
	uint32_t fp = ms_fp(hash);
	uint32_t b = fp & m->bucket_mask;
	uint32_t i;
	bool to_main;

	for (i = m->bucket[b]; i; i = m->ent[i].hnext) {
		if (m->ent[i].fp == fp) {
			ms_unlink(m, i);
			ms_push(m, MS_M, i);
			return true;
		}
	}
	if (chunks == 0)
		chunks = 1;
	if (chunks > INT32_MAX) /* the entry's 31-bit field (8 TiB of 4 KiB chunks) */
		chunks = INT32_MAX;
	if (!m->seg) {
		to_main = true;
	} else {
		int age = ghost_take_age(&m->ghost, ms_ghost_key(fp));
		to_main = (age >= 0 && (unsigned)age < m->horizon) || retain;
	}
	while (m->used_chunks + chunks > m->cap_chunks ||
	       (!m->free_head && m->next_unused >= m->nent)) {
		uint32_t v = ms_victim(m);
		if (v < MS_FIRST)
			break;
		ms_evict(m, v);
	}
	if (m->free_head) {
		i = m->free_head;
		m->free_head = m->ent[i].hnext;
	} else if (m->next_unused < m->nent) {
		i = m->next_unused++;
	} else {
		return false; /* cannot happen: the loop above freed one */
	}
	m->ent[i].fp = fp;
	m->ent[i].chunks = chunks;
	m->ent[i].hnext = m->bucket[b];
	m->bucket[b] = i;
	m->used_chunks += chunks;
	ms_push(m, to_main ? MS_M : MS_P, i);
	return false;
}

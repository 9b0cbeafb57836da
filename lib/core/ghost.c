/*
 * ghost.c - a set of recently evicted keys, by a 12-bit fingerprint of
 * their hash, that forgets the oldest first (nearly FIFO), and says how
 * long ago a key it still holds was added.  Owns its table.
 *
 * Why not one slot per hash, as S3-FIFO's ghost: a direct-mapped table
 * forgets a key as soon as any later key lands in its slot, at random --
 * with room for 3 capacities of keys, 37 % of keys are gone after one
 * capacity of evictions -- and a prompt one of whose blocks is forgotten
 * loses every later prefix hit at that block (doc/policies.md).  Here a
 * bucket of GHOST_WAYS slots (one 64-byte cache line) replaces its oldest
 * entry: each entry carries a 4-bit generation (the table's adds /
 * (size / GHOST_LIFE)), so keys survive about as many adds as the table
 * has slots, and none longer.
 *
 * A slot is 2 bytes: the fingerprint (never 0) in the top 12 bits, the
 * generation in the low 4; an all-zero slot is empty.  32 slots fill a
 * line, so a key costs 2 bytes (the 3-byte slots of before cost 3.05:
 * 4.5 keys per chunk now cost what 3 did, doc/policies.md "Sixth pass").
 * A take of a key never added matches a live slot by chance with
 * probability at most 32 / 4095 (0.8 %): it then counts as a reuse and
 * forgets that slot's key.  The generation wraps at 16 and entries live
 * GHOST_LIFE = 8; every add scans its whole bucket and empties the
 * expired slots it meets, and a bucket receives GHOST_WAYS / GHOST_LIFE =
 * 4 adds per generation on average, so an expired entry is gone long
 * before its generation could wrap and look young again.
 */
#include <errno.h>
#include <string.h>

#include "ghost.h"

#define GHOST_GEN_MASK 15

int ghost_init(struct ghost *g, struct kvt_mem *mem, uint64_t keys)
{
	uint64_t nb = (keys + GHOST_WAYS - 1) / GHOST_WAYS;
	memset(g, 0, sizeof(*g));
	g->mem = mem;
	if (nb == 0)
		nb = 1;
	if (nb > (UINT64_C(1) << 24))
		nb = UINT64_C(1) << 24;
	g->line = kvt_mem_calloc(mem, nb, GHOST_LINE);
	if (!g->line)
		return -ENOMEM;
	g->buckets = (uint32_t)nb;
	g->per_gen = nb * GHOST_WAYS / GHOST_LIFE ? nb * GHOST_WAYS / GHOST_LIFE : 1;
	return 0;
}

void ghost_fini(struct ghost *g)
{
	if (g->line)
		kvt_mem_free(g->mem, g->line, (size_t)g->buckets * GHOST_LINE);
	memset(g, 0, sizeof(*g));
}

static inline uint16_t ghost_fp(uint64_t hash)
{
	uint16_t fp = (uint16_t)(hash >> 52);
	return (uint16_t)((fp ? fp : 1) << 4); /* never 0, in the slot's top 12 bits */
}

static inline uint16_t *ghost_bucket(const struct ghost *g, uint64_t hash)
{
	/* Any bucket count: the low 32 bits scaled (fingerprints are the top 12). */
	return (uint16_t *)(void *)&g->line[(size_t)(((hash & UINT32_MAX) * g->buckets) >> 32) *
					     GHOST_LINE];
}

static inline unsigned ghost_gen(const struct ghost *g, uint64_t adds)
{
	return (unsigned)(adds / g->per_gen) & GHOST_GEN_MASK;
}

void ghost_add(struct ghost *g, uint64_t hash)
{
	uint16_t *b = ghost_bucket(g, hash);
	uint16_t fp = ghost_fp(hash);
	unsigned gen = ghost_gen(g, g->adds++);
	unsigned victim = GHOST_WAYS, oldest = 0, empty = GHOST_WAYS, same = GHOST_WAYS;
	/* No early exit, not even at the key itself: the scan is what
	 * empties expired slots before the generation wraps. */
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		unsigned age;
		if (b[i] == 0) {
			if (empty == GHOST_WAYS)
				empty = i;
			continue;
		}
		if ((b[i] & ~GHOST_GEN_MASK) == fp) { /* the same key (or its twin): renew */
			same = i;
			continue;
		}
		age = (gen - b[i]) & GHOST_GEN_MASK;
		if (age >= GHOST_LIFE) { /* forgotten already: empty it */
			b[i] = 0;
			if (empty == GHOST_WAYS)
				empty = i;
			continue;
		}
		if (victim == GHOST_WAYS || age >= oldest) {
			oldest = age;
			victim = i;
		}
	}
	if (same != GHOST_WAYS)
		victim = same;
	else if (empty != GHOST_WAYS)
		victim = empty;
	b[victim] = (uint16_t)(fp | gen);
}

int ghost_take_age(struct ghost *g, uint64_t hash)
{
	uint16_t *b = ghost_bucket(g, hash);
	uint16_t fp = ghost_fp(hash);
	unsigned gen = ghost_gen(g, g->adds);
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		if (b[i] != 0 && (b[i] & ~GHOST_GEN_MASK) == fp) {
			unsigned age = (gen - b[i]) & GHOST_GEN_MASK;
			b[i] = 0;
			return age < GHOST_LIFE ? (int)age : -1;
		}
	}
	return -1;
}

bool ghost_take(struct ghost *g, uint64_t hash)
{
	return ghost_take_age(g, hash) >= 0;
}

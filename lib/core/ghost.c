/*
 * ghost.c - a set of recently evicted keys, by a 24-bit fingerprint of
 * their hash, that forgets the oldest first (nearly FIFO).  Owns its table.
 *
 * Why not one slot per hash, as S3-FIFO's ghost: a direct-mapped table
 * forgets a key as soon as any later key lands in its slot, at random --
 * with room for 3 capacities of keys, 37 % of keys are gone after one
 * capacity of evictions -- and a prompt one of whose blocks is forgotten
 * loses every later prefix hit at that block (doc/policies.md).  Here a
 * bucket of GHOST_WAYS slots (one cache line) replaces its oldest entry:
 * each entry carries an 8-bit generation (the table's adds / (size / 128)),
 * so keys survive about as many adds as the table has slots, and none
 * longer.
 */
#include <errno.h>
#include <string.h>

#include "ghost.h"

#define GHOST_WAYS 16
/* Generations an entry lives: 128 = one table of adds.  An 8-bit
 * generation wraps at 256; entries are forgotten at 128, so a bucket never
 * mistakes a wrapped old entry for a young one (the next add to its bucket,
 * every 8 generations on average, reuses its slot). */
#define GHOST_LIFE 128

int ghost_init(struct ghost *g, struct kvt_mem *mem, uint64_t keys)
{
	uint64_t nb = (keys + GHOST_WAYS - 1) / GHOST_WAYS;
	memset(g, 0, sizeof(*g));
	g->mem = mem;
	if (nb == 0)
		nb = 1;
	if (nb > (UINT64_C(1) << 24))
		nb = UINT64_C(1) << 24;
	g->slot = kvt_mem_calloc(mem, nb * GHOST_WAYS, sizeof(uint32_t));
	if (!g->slot)
		return -ENOMEM;
	g->buckets = (uint32_t)nb;
	g->per_gen = nb * GHOST_WAYS / 128 ? nb * GHOST_WAYS / 128 : 1;
	return 0;
}

void ghost_fini(struct ghost *g)
{
	if (g->slot)
		kvt_mem_free(g->mem, g->slot, (size_t)g->buckets * GHOST_WAYS * sizeof(uint32_t));
	memset(g, 0, sizeof(*g));
}

static inline uint32_t ghost_fp(uint64_t hash)
{
	return ((uint32_t)(hash >> 40) | 1u) << 8; /* never 0 */
}

static inline uint32_t *ghost_bucket(const struct ghost *g, uint64_t hash)
{
	/* Any bucket count: the low 32 bits scaled (fingerprints are the top 24). */
	return &g->slot[(size_t)(((hash & UINT32_MAX) * g->buckets) >> 32) * GHOST_WAYS];
}

void ghost_add(struct ghost *g, uint64_t hash)
{
	uint32_t *b = ghost_bucket(g, hash), fp = ghost_fp(hash);
	uint32_t gen = (uint32_t)((g->adds++ / g->per_gen) & 0xff);
	unsigned victim = 0, oldest = 0;
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		unsigned age;
		if (b[i] == 0 || (b[i] & ~UINT32_C(0xff)) == fp) {
			victim = i;
			break;
		}
		age = (gen - (b[i] & 0xff)) & 0xff;
		if (age >= GHOST_LIFE) { /* forgotten already */
			victim = i;
			break;
		}
		if (age >= oldest) {
			oldest = age;
			victim = i;
		}
	}
	b[victim] = fp | gen;
}

bool ghost_take(struct ghost *g, uint64_t hash)
{
	uint32_t *b = ghost_bucket(g, hash), fp = ghost_fp(hash);
	uint32_t gen = (uint32_t)((g->adds / g->per_gen) & 0xff);
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		if (b[i] != 0 && (b[i] & ~UINT32_C(0xff)) == fp) {
			bool live = ((gen - (b[i] & 0xff)) & 0xff) < GHOST_LIFE;
			b[i] = 0;
			return live;
		}
	}
	return false;
}

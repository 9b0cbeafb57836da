/*
 * ghost.c - a set of recently evicted keys, by a 16-bit fingerprint of
 * their hash, that forgets the oldest first (nearly FIFO).  Owns its table.
 *
 * Why not one slot per hash, as S3-FIFO's ghost: a direct-mapped table
 * forgets a key as soon as any later key lands in its slot, at random --
 * with room for 3 capacities of keys, 37 % of keys are gone after one
 * capacity of evictions -- and a prompt one of whose blocks is forgotten
 * loses every later prefix hit at that block (doc/policies.md).  Here a
 * bucket of GHOST_WAYS slots (one 64-byte cache line) replaces its oldest
 * entry: each entry carries an 8-bit generation (the table's adds /
 * (size / 128)), so keys survive about as many adds as the table has
 * slots, and none longer.
 *
 * A slot is 3 bytes, little endian: generation, then the fingerprint
 * (never 0; an all-zero slot is empty).  21 slots fill 63 bytes of a
 * line:
 *
 *     byte  0   1   2   3   4   5  ...  60  61  62  63
 *          [gen fp-lo fp-hi][gen fp-lo fp-hi] ... [slot 20   ] pad
 *
 * 3 keys per chunk cost 9.1 bytes per block (4-byte slots cost 12, over
 * the DRAM tier's 128-byte budget with the rest of prefix-adapt).  A take
 * of a key never added matches a slot by chance with probability 21 /
 * 65535 (0.03 %): it then counts as a reuse and forgets that slot's key.
 */
#include <errno.h>
#include <string.h>

#include "ghost.h"

/* Generations an entry lives: 128 = one table of adds.  An 8-bit
 * generation wraps at 256; entries are forgotten at 128, so a bucket never
 * mistakes a wrapped old entry for a young one (the next add to its bucket,
 * every 6 generations on average, reuses its slot). */
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
	g->line = kvt_mem_calloc(mem, nb, GHOST_LINE);
	if (!g->line)
		return -ENOMEM;
	g->buckets = (uint32_t)nb;
	g->per_gen = nb * GHOST_WAYS / 128 ? nb * GHOST_WAYS / 128 : 1;
	return 0;
}

void ghost_fini(struct ghost *g)
{
	if (g->line)
		kvt_mem_free(g->mem, g->line, (size_t)g->buckets * GHOST_LINE);
	memset(g, 0, sizeof(*g));
}

static inline uint32_t ghost_fp(uint64_t hash)
{
	uint32_t fp = (uint32_t)(hash >> 48);
	return fp ? fp : 1; /* never 0 */
}

static inline uint8_t *ghost_bucket(const struct ghost *g, uint64_t hash)
{
	/* Any bucket count: the low 32 bits scaled (fingerprints are the top 16). */
	return &g->line[(size_t)(((hash & UINT32_MAX) * g->buckets) >> 32) * GHOST_LINE];
}

static inline uint32_t slot_fp(const uint8_t *s)
{
	return (uint32_t)s[1] | (uint32_t)s[2] << 8;
}

void ghost_add(struct ghost *g, uint64_t hash)
{
	uint8_t *b = ghost_bucket(g, hash);
	uint32_t fp = ghost_fp(hash);
	uint8_t gen = (uint8_t)(g->adds++ / g->per_gen);
	unsigned victim = 0, oldest = 0;
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		uint8_t *s = b + 3 * i;
		uint32_t sfp = slot_fp(s);
		unsigned age;
		if (sfp == 0 || sfp == fp) {
			victim = i;
			break;
		}
		age = (uint8_t)(gen - s[0]);
		if (age >= GHOST_LIFE) { /* forgotten already */
			victim = i;
			break;
		}
		if (age >= oldest) {
			oldest = age;
			victim = i;
		}
	}
	b[3 * victim] = gen;
	b[3 * victim + 1] = (uint8_t)fp;
	b[3 * victim + 2] = (uint8_t)(fp >> 8);
}

bool ghost_take(struct ghost *g, uint64_t hash)
{
	uint8_t *b = ghost_bucket(g, hash);
	uint32_t fp = ghost_fp(hash);
	uint8_t gen = (uint8_t)(g->adds / g->per_gen);
	for (unsigned i = 0; i < GHOST_WAYS; i++) {
		uint8_t *s = b + 3 * i;
		if (slot_fp(s) == fp) {
			bool live = (uint8_t)(gen - s[0]) < GHOST_LIFE;
			s[0] = s[1] = s[2] = 0;
			return live;
		}
	}
	return false;
}

/*
 * placement.c - weighted rendezvous hashing of block groups over the
 * kvtierd members of a pod (placement.h says what it promises,
 * doc/cluster.md why groups).
 *
 * Owns: the member table (a seed per member, hashed from its name, and its
 * weight).  Immutable after placement_new.
 *
 * The score.  For anchor a and member i with seed s_i:
 *
 *     h   = XXH3_64(a, seed s_i)                 uniform on [0, 2^64)
 *     u   = (h + 1) / 2^64                       uniform on (0, 1]
 *     E   = -log2(u)                             exponential, rate ln 2
 *     key = E / w_i                              lowest key wins
 *
 * The minimum of independent exponentials E_i / w_i is attained by member
 * i with probability w_i / sum(w) (the weighted form of rendezvous
 * hashing; Ceph's straw2 buckets do the same with a table of logarithms).
 * Adding a member changes no other member's key: a group moves only if the
 * new member beats its old winner, so a join moves ~w_new / sum(w) of the
 * groups, all to the new member, and a leave moves only the leaver's.
 *
 * Integers only: E is computed in 32.32 fixed point by the bit-by-bit
 * logarithm (square the mantissa; each time it passes 2, a one bit), so
 * that two processes on different machines or C libraries never disagree
 * about a near tie the way two libm log() results could.  The division by
 * the weight is done as (E << 20) / w: E < 2^39, so it fits in 64 bits.
 * Equal keys (never seen in practice) go to the lower seed, so the
 * member list's order never matters.
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "placement.h"

struct pmember {
	uint64_t seed;     /* XXH3_64 of the name */
	uint32_t weight;
};

struct placement {
	struct kvt_mem *mem;
	unsigned n;
	struct pmember m[];
};

/* -log2((h + 1) / 2^64) in 32.32 fixed point: 0 for h = 2^64 - 1, at most
 * 64 << 32 for h = 0. */
static uint64_t placement_neglog2(uint64_t h)
{
	uint64_t v = h + 1, m, frac = 0;
	int lz;

	if (v == 0)
		return 0; /* h + 1 = 2^64: u = 1 */
	lz = __builtin_clzll(v);
	/* v = 2^(63 - lz) * (m / 2^31), m in [2^31, 2^32). */
	m = (v << lz) >> 32;
	for (int i = 31; i >= 0; i--) {
		m = (m * m) >> 31; /* m < 2^32, so m * m < 2^64, and m < 2^33 now */
		/* Branch-free (the bit is a coin toss: a branch mispredicts half
		 * the time): b is 1 iff m >= 2^32. */
		uint64_t b = m >> 32;
		m >>= b;
		frac |= b << i;
	}
	/* log2(v) = 63 - lz + frac / 2^32, and -log2(v / 2^64) = 64 - log2(v). */
	return ((uint64_t)(lz + 1) << 32) - frac;
}

uint64_t placement_key_hash(const struct kvt_key *key)
{
	return XXH3_64bits(key->bytes, key->len);
}

static uint64_t pm_score(const struct pmember *pm, uint64_t anchor)
{
	uint64_t h = XXH3_64bits_withSeed(&anchor, sizeof(anchor), pm->seed);
	return (placement_neglog2(h) << 20) / pm->weight;
}

uint64_t placement_score(const struct placement *p, unsigned member, uint64_t anchor)
{
	return pm_score(&p->m[member], anchor);
}

int placement_new(struct placement **out, const struct placement_member *m, unsigned n,
		  struct kvt_mem *mem)
{
	struct placement *p;

	if (n == 0 || n > PLACEMENT_MEMBERS_MAX)
		return KVT_EOPTVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!m[i].name || !m[i].name[0] || m[i].weight == 0 ||
		    m[i].weight > PLACEMENT_WEIGHT_MAX)
			return KVT_EOPTVAL;
		for (unsigned j = 0; j < i; j++)
			if (strcmp(m[i].name, m[j].name) == 0)
				return KVT_EOPTVAL;
	}
	p = kvt_mem_calloc(mem, 1, sizeof(*p) + n * sizeof(p->m[0]));
	if (!p)
		return -ENOMEM;
	p->mem = mem;
	p->n = n;
	for (unsigned i = 0; i < n; i++) {
		p->m[i].seed = XXH3_64bits(m[i].name, strlen(m[i].name));
		p->m[i].weight = m[i].weight;
	}
	*out = p;
	return 0;
}

void placement_free(struct placement *p)
{
	if (p)
		kvt_mem_free(p->mem, p, sizeof(*p) + p->n * sizeof(p->m[0]));
}

unsigned placement_count(const struct placement *p)
{
	return p->n;
}

/* a beats b: lower key, then lower seed. */
static bool pm_better(const struct placement *p, uint64_t ka, unsigned a, uint64_t kb, unsigned b)
{
	return ka != kb ? ka < kb : p->m[a].seed < p->m[b].seed;
}

unsigned placement_rank(const struct placement *p, uint64_t anchor, const bool *skip,
			unsigned *out, unsigned r)
{
	uint64_t keys[PLACEMENT_MEMBERS_MAX];
	uint64_t okey[PLACEMENT_MEMBERS_MAX];
	unsigned got = 0;

	if (r > p->n)
		r = p->n;
	if (r == 0)
		return 0;
	for (unsigned i = 0; i < p->n; i++)
		keys[i] = pm_score(&p->m[i], anchor);
	/* Two passes of insertion into the top-r list: live members, then (if
	 * short) skipped ones.  r is small (1..a few), n at most 256. */
	for (int pass = 0; pass < 2 && got < r; pass++) {
		unsigned base = got;
		for (unsigned i = 0; i < p->n; i++) {
			bool skipped = skip && skip[i];
			unsigned pos;
			if (skipped != (pass == 1))
				continue;
			pos = got < r ? got : r;
			while (pos > base && pm_better(p, keys[i], i, okey[pos - 1], out[pos - 1]))
				pos--;
			if (pos >= r)
				continue;
			for (unsigned j = (got < r ? got : r - 1); j > pos; j--) {
				out[j] = out[j - 1];
				okey[j] = okey[j - 1];
			}
			out[pos] = i;
			okey[pos] = keys[i];
			if (got < r)
				got++;
		}
	}
	return got;
}

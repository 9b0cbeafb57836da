/*
 * placement.h - which kvtierd of a pod holds a group of blocks: weighted
 * rendezvous (highest random weight) hashing over a member list
 * (doc/cluster.md "Placement").
 *
 * A prompt's blocks are placed in groups of consecutive blocks: group g of
 * a prompt is blocks [g*G, (g+1)*G) and is named by its anchor, the
 * 64-bit hash of the key of its first block (placement_key_hash).  Every
 * block of a group lands where its anchor does, so a longest-prefix match
 * crosses a node boundary at most once per group, and a membership change
 * moves whole groups (only those whose best member changed: about
 * weight/total of them when one member joins or leaves).
 *
 * Pure and deterministic: a member's place depends only on its name (the
 * address text every engine is configured with), its weight and the
 * anchor, in integer arithmetic (no floating point), so every process on
 * every machine that lists the same members -- in any order -- places
 * every group the same way.
 *
 * Threads: a placement is immutable after placement_new; any thread may
 * call the others concurrently.
 */
#ifndef KVT_PLACEMENT_H
#define KVT_PLACEMENT_H

#include "kvt_int.h"

#define PLACEMENT_MEMBERS_MAX 256
#define PLACEMENT_WEIGHT_MAX 1000000u /* weights are relative: capacity in GiB, say */

struct placement;

struct placement_member {
	const char *name;   /* stable identity: the address text; not kept */
	uint32_t weight;    /* 1..PLACEMENT_WEIGHT_MAX */
};

/*
 * A placement over m[0..n) (1..PLACEMENT_MEMBERS_MAX members; names must
 * differ).  *out is the caller's until placement_free.  0, KVT_EOPTVAL
 * (n, a weight, a name NULL or empty, two equal names), -ENOMEM.
 */
int placement_new(struct placement **out, const struct placement_member *m, unsigned n,
		  struct kvt_mem *mem);
void placement_free(struct placement *p);

unsigned placement_count(const struct placement *p);

/* The anchor of a group: the hash of the key of the group's first block. */
uint64_t placement_key_hash(const struct kvt_key *key);

/*
 * The members that hold the group named by anchor, best first, into
 * out[0..r): the r live members with the highest weighted scores, where a
 * member i is live unless skip && skip[i].  If fewer than r members are
 * live, the best of the skipped ones fill the rest (so that every group
 * always has r places: operations on a skipped member fail fast).  r is
 * capped at the member count; returns how many were written.
 */
unsigned placement_rank(const struct placement *p, uint64_t anchor, const bool *skip,
			unsigned *out, unsigned r);

/*
 * The score behind placement_rank, for tests: lower wins.  It is
 * -log2(u) / weight in fixed point, u the member's hash of the anchor
 * mapped to (0, 1]: the minimum over members is member i with probability
 * weight_i / sum of weights.
 */
uint64_t placement_score(const struct placement *p, unsigned member, uint64_t anchor);

#endif

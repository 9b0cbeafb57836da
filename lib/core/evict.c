/*
 * evict.c - which DRAM item goes next (prefix-adapt by default, prefix,
 * prefix-learn, LRU or S3-FIFO), for one shard.  Owns the queues, the
 * ghost tables and the simulations; the items belong to dram.c.
 * Locking: the shard lock, held by every caller.
 *
 * S3-FIFO (Yang et al., SOSP'23): most blocks are read once or never, so a
 * new block waits in a small FIFO (S, ~10% of the shard); blocks hit while
 * there move to the main FIFO (M) when they reach its tail, the others are
 * evicted and remembered by fingerprint in a ghost table, and a block that
 * comes back while its ghost is remembered goes straight to M.  M is a FIFO
 * with lazy promotion: a block at the tail that was hit goes back to the
 * head with its count decremented.  Hits only bump a 2-bit counter, so a
 * get never reorders a list.
 *
 *     insert --> [ S: new .... old ] --freq>0--> [ M: new .... old ] --+
 *                                 |                   ^   freq>0: freq--|
 *                            evict + ghost            +-----------------+
 *
 * LRU: one list, hits move to the head, evict from the tail.
 *
 * Prefix (doc/policies.md): LRU that keeps chains in order.  A
 * get or put goes just behind the block its shard's previous get or put
 * placed, if nothing else happened in that shard in between (dram.c tracks
 * it; otherwise to the head): a request reads its hit prefix and writes its
 * new blocks head first, so its chain ends head newest and tail oldest,
 * tails are evicted first, and a block whose parent is gone -- which no
 * prefix lookup can hit -- does not outlive its parent.  Lookups cost what
 * they cost under LRU.  Without chains it is LRU.
 *
 * Prefix-learn (opt-in): the same in two segments, probation (P, the
 * `small` list) and main (M), with the block's predicted reuse deciding
 * where it starts.  Each block carries a reuse class (6 bits in
 * node.freq) that dram.c takes from what the last prefix lookup said about
 * it: the prompt's length (log2 blocks), whether the prompt's prefix was
 * already cached (a continuation), and the block's distance from the
 * prompt's end.  Per class the shard counts blocks inserted and blocks
 * reused (hit in DRAM, or put again while the ghost table remembers them),
 * halved every `window` inserts.  A block whose class has evidence (64
 * blocks seen) of being reused rarely -- less often than the average block
 * and than 1 in 4 -- starts in P; the others in M; a hit moves a block to
 * M; victims come from P's tail first while M holds at most 90 % of the
 * shard (so M cannot go stale), from M's tail otherwise.  Blocks evicted
 * from P unhit are the ones the SSD write-down filter skips
 * (evict_worth_keeping).  Not the default: its class statistics are per
 * shard, so one namespace's traffic could move another's blocks to P
 * (doc/policies.md).
 *
 *     put --est < avg, 1/4--> [ P: new ... old ] --evict first--> ghost (class)
 *         --otherwise-------> [ M: new ... old ] --evict when M > 90 %--> ghost
 *                               ^ hit (in P or M): to M, class credited
 * *
 * Prefix-adapt (the default): the prefix order in three modes.  LRU mode
 * is prefix; the segmented modes put a new block on probation (P) and a
 * block hit, or back while the ghost (ghost.c, near-FIFO, 4.5 keys per
 * chunk) remembers it, in main (M), victims from P while M holds at most
 * 95 %; the long one counts a block back within the ghost's whole memory,
 * the short one within its newest generation (EVICT_SHORT_HORIZON).  A
 * block behind a parent on P starts on P, back or not (prefix_insert: no
 * orphans in M).
 * Three miniature simulations (minisim.c) of the three modes, fed 1 key in
 * 16 at 1/16 of the shard, pick the mode: another mode replaces the
 * current one when its simulation hits 2 % more and the difference is
 * significant (a sign test over the sampled accesses only one of the two
 * hit; counts halved every 4 simulated capacities; see adapt_note).  Entering
 * a segmented mode from LRU moves M's never-reused blocks to P; leaving
 * them moves nothing (P's leftovers go first), nor does a change of
 * horizon.  With a shared or remote tier below DRAM it stays in LRU mode
 * (evict_pin_lru): the simulations model DRAM alone and chose badly there
 * (doc/policies.md), and so it does over the SSD unless
 * ssd.adapt_writedown is on: with the SSD alone below as DRAM's victim
 * tier and that option (evict_adapt_below) the simulations model DRAM + SSD, DRAM's order stays
 * LRU mode's whatever the mode, and the mode decides the write-down: in
 * the short-horizon mode a victim never reused is not written
 * (evict_worth_keeping), so the SSD keeps blocks that were.  The mode, ghost and
 * simulations are per quota group with a DRAM limit (struct evict_adapt,
 * adapt_of; the shard's own, ad0, for every other block), so one group's
 * traffic never changes another's order; a switch moves only its group's
 * blocks.  A put with the caller's retain hint (EVICT_RETAIN) starts in M
 * in segmented mode, and the segmented simulations take the hint too --
 * unless its group hints (nearly) every put, where the hint tells nothing
 * apart and would only cost the mode its own evidence (adapt_hint).
 *
 * Pinned items are never evicted: evict_victim rotates them to the head of
 * their queue and goes on; after a full lap with nothing evictable it
 * returns NULL (the caller reports KVT_EFULL).
 */
#include <errno.h>
#include <string.h>

#include "evict.h"

/* prefix-adapt: the simulations see keys whose hash bits
 * [EVICT_SIM_SHIFT, +4) are 0, 1 in EVICT_SIM_RATE; M's share in
 * segmented mode. */
#define EVICT_SIM_RATE 16
#define EVICT_SIM_SHIFT 16
#define EVICT_SEG_MAIN_PCT 95
/* The ghost: 4.5 keys a chunk (9 bytes a block in 2-byte slots), so the
 * long horizon (GHOST_LIFE generations) remembers about 4.5 capacities of
 * evictions; the short one counts a block back as reused only within the
 * generation it was evicted in (1 of GHOST_LIFE: at most about 0.56
 * capacities).  Tool-using agents gain 5-11 points from the short one, the
 * repository's documents want the long one (doc/policies.md "Sixth pass"). */
#define EVICT_GHOST_KEYS(chunks) ((uint64_t)(chunks) * 9 / 2)
#define EVICT_SHORT_HORIZON 1
/* Over the SSD as DRAM's victim tier (evict_adapt_below): the simulations
 * model DRAM + SSD, fed 1 key in below_rate (a power of two, at least 8 x
 * (DRAM + SSD) / DRAM: 32 at an SSD of 3 DRAMs), so they hold at most an
 * eighth of DRAM's chunks however large the SSD, and the ghost keeps 3
 * keys a DRAM chunk: the bookkeeping stays near what DRAM alone pays
 * (doc/policies.md "The segmented evidence deciding the SSD's
 * write-down"). */
#define EVICT_GHOST_KEYS_BELOW(chunks) ((uint64_t)(chunks) * 3)

static void list_init(struct evict_list *l)
{
	l->head.next = l->head.prev = &l->head;
	l->chunks = 0;
	l->count = 0;
}

static void list_push_head(struct evict_list *l, struct evict_node *n)
{
	n->next = l->head.next;
	n->prev = &l->head;
	l->head.next->prev = n;
	l->head.next = n;
	l->chunks += n->chunks;
	l->count++;
}

/* n just after pos (towards the old end). */
static void list_insert_after(struct evict_list *l, struct evict_node *pos, struct evict_node *n)
{
	n->prev = pos;
	n->next = pos->next;
	pos->next->prev = n;
	pos->next = n;
	l->chunks += n->chunks;
	l->count++;
}

static void list_unlink(struct evict_list *l, struct evict_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
	l->chunks -= n->chunks;
	l->count--;
}

static struct evict_list *evict_list_of(struct evict *e, struct evict_node *n)
{
	return n->queue == EVICT_Q_SMALL ? &e->small : &e->main;
}

/*
 * prefix-adapt's state for a capacity of cap chunks: a ghost of 3 keys a
 * chunk, and simulations of 1 key in EVICT_SIM_RATE at that fraction of
 * the chunks, whose hit counts are halved every 4 simulated capacities of
 * accesses.
 */
static void adapt_fini(struct evict_adapt *a);

static int adapt_init(const struct evict *e, struct evict_adapt *a, uint64_t capacity_chunks)
{
	uint64_t cap = capacity_chunks / EVICT_SIM_RATE;
	uint64_t keys = EVICT_GHOST_KEYS(capacity_chunks);
	struct kvt_mem *mem = e->mem;
	uint32_t ents;
	int r;
	if (e->adapt_below) {
		cap = capacity_chunks * e->below_num / e->below_den / e->below_rate;
		keys = EVICT_GHOST_KEYS_BELOW(capacity_chunks);
	}
	ents = cap > (UINT32_C(1) << 22) ? (UINT32_C(1) << 22) : (uint32_t)cap;
	memset(a, 0, sizeof(*a));
	a->cap_chunks = capacity_chunks;
	a->horizon = GHOST_LIFE;
	r = ghost_init(&a->gh, mem, keys);
	if (r == 0)
		r = minisim_init(&a->sim[EVICT_MODE_LRU], mem, cap, ents, false, 0, 0, 0);
	if (r == 0)
		r = minisim_init(&a->sim[EVICT_MODE_SEG_LONG], mem, cap, ents, true,
				 EVICT_SEG_MAIN_PCT, EVICT_GHOST_KEYS(ents), GHOST_LIFE);
	if (r == 0)
		r = minisim_init(&a->sim[EVICT_MODE_SEG_SHORT], mem, cap, ents, true,
				 EVICT_SEG_MAIN_PCT, EVICT_GHOST_KEYS(ents), EVICT_SHORT_HORIZON);
	if (r < 0) {
		adapt_fini(a);
		return r;
	}
	a->sim_window = 4 * (uint64_t)(ents > 64 ? ents : 64);
	a->ready = true;
	return 0;
}

static void adapt_fini(struct evict_adapt *a)
{
	for (unsigned i = 0; i < EVICT_MODES; i++)
		minisim_fini(&a->sim[i]);
	ghost_fini(&a->gh);
	a->ready = false;
}

static void groups_fini(struct evict *e)
{
	if (!e->grp)
		return;
	for (uint32_t g = 0; g < KVT_QUOTA_GROUPS; g++) {
		if (!e->grp[g])
			continue;
		adapt_fini(e->grp[g]);
		kvt_mem_free(e->mem, e->grp[g], sizeof(*e->grp[g]));
	}
	kvt_mem_free(e->mem, e->grp, KVT_QUOTA_GROUPS * sizeof(*e->grp));
	e->grp = NULL;
}

int evict_init(struct evict *e, struct kvt_mem *mem, int policy, uint64_t capacity_chunks)
{
	uint64_t g = 64;
	memset(e, 0, sizeof(*e));
	e->policy = policy == DRAM_POLICY_PREFIX_LEARN || policy == DRAM_POLICY_PREFIX_ADAPT
			    ? DRAM_POLICY_PREFIX
			    : policy;
	e->learn = policy == DRAM_POLICY_PREFIX_LEARN;
	e->adapt = policy == DRAM_POLICY_PREFIX_ADAPT;
	e->mem = mem;
	list_init(&e->small);
	list_init(&e->main);
	e->small_target = capacity_chunks / 10;
	e->main_max = capacity_chunks * 9 / 10;
	e->window = capacity_chunks * 4 > 4096 ? capacity_chunks * 4 : 4096;
	if (e->adapt) {
		/* Segmented mode: M at most 95 % (doc/policies.md).  The
		 * shard's own mode state is made at its first block of no
		 * group (adapt_of): a store whose every block is in a quota
		 * group with a limit (kvtierd with tenants) pays only for the
		 * groups'. */
		e->main_max = capacity_chunks * EVICT_SEG_MAIN_PCT / 100;
		e->ad0.cap_chunks = capacity_chunks;
	}
	if (policy == DRAM_POLICY_S3FIFO) {
		/* As many keys as chunks: the most items M can hold (the
		 * paper's ghost queue is as long as M).  ghost.c forgets the
		 * oldest first, as the paper's FIFO ghost does; a direct-mapped
		 * table forgot at random (doc/policies.md). */
		int r = ghost_init(&e->ad0.gh, mem, capacity_chunks);
		if (r < 0) {
			evict_fini(e);
			return r;
		}
	}
	if (e->learn) {
		/* prefix-learn: direct mapped, two slots per chunk (reuse after
		 * DRAM, from the SSD below, must be seen to be credited); each
		 * slot carries the evicted block's class.  Plain prefix needs
		 * none. */
		uint64_t want = 2 * capacity_chunks;
		while (g < want && g < (UINT64_C(1) << 24))
			g <<= 1;
		e->ghost = kvt_mem_calloc(mem, g, sizeof(uint32_t));
		if (!e->ghost) {
			evict_fini(e);
			return -ENOMEM;
		}
		e->ghost_mask = (uint32_t)(g - 1);
	}
	return 0;
}

void evict_fini(struct evict *e)
{
	if (e->ghost)
		kvt_mem_free(e->mem, e->ghost, ((size_t)e->ghost_mask + 1) * sizeof(uint32_t));
	e->ghost = NULL;
	adapt_fini(&e->ad0);
	groups_fini(e);
}

const char *evict_policy_name(int policy)
{
	return policy == DRAM_POLICY_LRU		? "lru"
	       : policy == DRAM_POLICY_PREFIX	? "prefix"
	       : policy == DRAM_POLICY_PREFIX_LEARN ? "prefix-learn"
	       : policy == DRAM_POLICY_PREFIX_ADAPT ? "prefix-adapt"
						: "s3fifo";
}

/* Fingerprint: never 0, so an empty slot never matches. */
static inline uint32_t ghost_fp(uint64_t hash)
{
	return (uint32_t)(hash >> 32) | 1u;
}

void evict_ghost_add(struct evict *e, uint64_t hash)
{
	if (e->policy == DRAM_POLICY_S3FIFO)
		ghost_add(&e->ad0.gh, hash);
	else if (e->ghost)
		e->ghost[hash & e->ghost_mask] = ghost_fp(hash);
}

/* ---- prefix policy ---- */

/*
 * prefix-adapt entering segmented mode: M's blocks never reused (not
 * credited) move to P, as if the mode had always been segmented.  O(blocks
 * in M) under the shard lock, once per switch (2-7 per trace in
 * doc/policies.md's runs).
 */
static uint32_t node_group(const struct evict *e, const struct evict_node *n, uint64_t *cap)
{
	*cap = 0;
	return e->group_of ? e->group_of(n, e->group_ctx, cap) : 0;
}

static void adapt_to_segmented(struct evict *e, uint32_t group)
{
	struct evict_node *n = e->main.head.prev, *newer;
	uint64_t cap;
	/* M from its oldest end: the group's blocks never reused (not
	 * credited) go to P's head in the order met, so P ends newest first.
	 * Other groups' blocks stay where they are. */
	for (; n != &e->main.head; n = newer) {
		newer = n->prev;
		if (n->freq & EVICT_CLS_CREDITED)
			continue;
		if (e->group_of && node_group(e, n, &cap) != group)
			continue;
		list_unlink(&e->main, n);
		n->queue = EVICT_Q_SMALL;
		list_push_head(&e->small, n);
	}
}

void evict_pin_lru(struct evict *e)
{
	if (!e->adapt)
		return;
	e->adapt_pinned = true;
	e->adapt_below = false;
	if (e->ad0.seg) {
		e->ad0.seg = false;
		e->ad0.mode = EVICT_MODE_LRU;
		e->ad0.mode_switches++;
	}
	/* Pinned for good (the tier below stays until close): the ghost and
	 * the simulations decide nothing now, so give their bytes back and
	 * run prefix's code path exactly. */
	adapt_fini(&e->ad0);
	groups_fini(e);
}

void evict_adapt_below(struct evict *e, uint64_t dram_chunks, uint64_t total_chunks)
{
	if (!e->adapt || dram_chunks == 0)
		return;
	/* Made again, in LRU mode, at the next block (adapt_of). */
	adapt_fini(&e->ad0);
	groups_fini(e);
	e->ad0.seg = false;
	e->ad0.mode = EVICT_MODE_LRU;
	e->adapt_pinned = false;
	e->adapt_below = true;
	e->below_num = total_chunks > dram_chunks ? total_chunks : dram_chunks;
	e->below_den = dram_chunks;
	e->below_rate = EVICT_SIM_RATE;
	while (e->below_rate * e->below_den < 8 * e->below_num && e->below_rate < (1u << 12))
		e->below_rate <<= 1;
}

void evict_adapt_force(struct evict *e, unsigned mode)
{
	struct evict_adapt *a = &e->ad0;
	if (!a->ready || mode >= EVICT_MODES)
		return;
	a->mode = (uint8_t)mode;
	a->seg = mode != EVICT_MODE_LRU;
	a->horizon = mode == EVICT_MODE_SEG_SHORT ? EVICT_SHORT_HORIZON : GHOST_LIFE;
	memset(a->sim_only, 0, sizeof(a->sim_only));
	memset(a->sim_hits, 0, sizeof(a->sim_hits));
	a->sim_only[EVICT_MODE_SEG_SHORT][EVICT_MODE_SEG_LONG] = 100;
	a->sim_only[EVICT_MODE_SEG_LONG][EVICT_MODE_SEG_SHORT] = 10;
	a->sim_hits[EVICT_MODE_SEG_LONG] = 200;
	a->sim_seen = 0;
}

void evict_set_group_fn(struct evict *e, evict_group_fn fn, void *ctx)
{
	e->group_of = fn;
	e->group_ctx = ctx;
}

void evict_group_stats(const struct evict *e, uint64_t *groups, uint64_t *seg, uint64_t *switches)
{
	*groups = *seg = *switches = 0;
	for (uint32_t g = 0; e->grp && g < KVT_QUOTA_GROUPS; g++) {
		if (!e->grp[g])
			continue;
		*groups += 1;
		*seg += e->grp[g]->seg;
		*switches += e->grp[g]->mode_switches;
	}
}

/*
 * The prefix-adapt state that decides for node n: the shard's own (ad0)
 * for a block of no group with a DRAM limit, else its group's, made (or
 * remade, if the group's limit changed) here.  NULL: none (pinned, or no
 * memory for it: the block is kept in LRU mode).  *group: whose.
 */
static struct evict_adapt *adapt_of(struct evict *e, const struct evict_node *n, uint32_t *group)
{
	uint64_t cap;
	struct evict_adapt *a;
	*group = 0;
	if (!e->adapt || e->adapt_pinned)
		return NULL;
	*group = node_group(e, n, &cap);
	if (*group == 0 || *group >= KVT_QUOTA_GROUPS) {
		*group = 0;
		if (!e->ad0.ready && adapt_init(e, &e->ad0, e->ad0.cap_chunks) < 0)
			return NULL; /* no memory: LRU order, tried again later */
		return &e->ad0;
	}
	if (!e->grp) {
		e->grp = kvt_mem_calloc(e->mem, KVT_QUOTA_GROUPS, sizeof(*e->grp));
		if (!e->grp)
			return NULL;
	}
	a = e->grp[*group];
	if (!a) {
		a = kvt_mem_calloc(e->mem, 1, sizeof(*a));
		if (!a)
			return NULL;
		e->grp[*group] = a;
	}
	if (a->ready && a->cap_chunks == cap)
		return a;
	/* New, or its limit changed (a reload): start again, in LRU mode
	 * (leftovers in P go first, as after any switch back). */
	adapt_fini(a);
	if (adapt_init(e, a, cap) < 0)
		return NULL;
	return a;
}

/*
 * prefix-adapt: feed a sampled access (a get that hit, or a put) to both
 * miniature simulations and pick the mode.  The two see the same keys, so
 * what tells them apart is the accesses only one of them hit: a (only the
 * segmented one), b (only LRU).  Segmented once a - b is both 2 % of LRU's
 * hits and significant -- (a - b)^2 > EVICT_SIM_Z2 (a + b), a one-sided
 * sign test (McNemar's) at z = 2 -- and after EVICT_SIM_EVIDENCE sampled
 * accesses; LRU again on the mirror condition (LRU is where it starts:
 * the fallback).  On workloads where the two are equal in expectation
 * (conversations at an eighth of their blocks) the 2 % rule alone let
 * sampling noise choose the segmented mode for a while and lose hits
 * (doc/policies.md).  Leaving segmented mode moves nothing: P's leftovers
 * are the first victims (evict_victim), as if P had been appended to M's
 * old end.
 */
#define EVICT_SIM_Z2 4
#define EVICT_SIM_EVIDENCE 256
static bool adapt_better(uint64_t only_mine, uint64_t only_other, uint64_t other_hits)
{
	uint64_t d;
	if (only_mine <= only_other)
		return false;
	d = only_mine - only_other;
	return d > other_hits / 50 + 1 && d * d > EVICT_SIM_Z2 * (only_mine + only_other);
}

/*
 * prefix-adapt: the retain hint of an engine's put into group state a, or
 * false where the group hints (nearly) everything.  A hint on every put
 * distinguishes no block from another; taken, it starts every new block
 * in main, which makes the segmented simulations LRU and costs the mode
 * its own evidence (agents at a quarter of their blocks: 12 points,
 * doc/policies.md "Hints on every put").  So a hint counts only while
 * more than 1 in EVICT_HINT_ALL_DIV of the group's recent puts came
 * without one: counts halved every EVICT_HINT_WINDOW puts (so the last
 * 512-1,024), decided after EVICT_HINT_EVIDENCE (evict.h).  An exact router's hints are far
 * from that where they inform (the repository's trace: 55 % of puts, at
 * most 72 % of any 1,024 first sightings) and past it where they cannot
 * (agents: 99.8 %).
 */
static bool adapt_hint(struct evict *e, struct evict_adapt *a, bool retain)
{
	bool all;
	if (!a)
		return retain;
	all = a->hint_puts >= EVICT_HINT_EVIDENCE &&
	      (uint64_t)(a->hint_puts - a->hint_hinted) * EVICT_HINT_ALL_DIV < a->hint_puts;
	a->hint_puts++;
	a->hint_hinted += retain;
	if (a->hint_puts >= EVICT_HINT_WINDOW) {
		a->hint_puts /= 2;
		a->hint_hinted /= 2;
	}
	if (retain && all) {
		e->retain_ignored++;
		return false;
	}
	return retain;
}

static void adapt_note(struct evict *e, struct evict_adapt *a, uint32_t group, uint64_t hash,
		       uint32_t chunks, bool retain)
{
	bool hit[EVICT_MODES];
	unsigned m, best;
	uint64_t rate = e->adapt_below ? e->below_rate : EVICT_SIM_RATE;
	if (!a || ((hash >> EVICT_SIM_SHIFT) & (rate - 1)) != 0)
		return;
	for (unsigned i = 0; i < EVICT_MODES; i++) {
		hit[i] = minisim_access(&a->sim[i], hash, chunks, retain);
		a->sim_hits[i] += hit[i];
	}
	for (unsigned i = 0; i < EVICT_MODES; i++)
		for (unsigned j = 0; j < EVICT_MODES; j++)
			a->sim_only[i][j] += hit[i] && !hit[j];
	if (a->sim_seen < EVICT_SIM_EVIDENCE)
		a->sim_seen++;
	if (++a->sim_accesses >= a->sim_window) {
		a->sim_accesses = 0;
		for (unsigned i = 0; i < EVICT_MODES; i++) {
			a->sim_hits[i] /= 2;
			for (unsigned j = 0; j < EVICT_MODES; j++)
				a->sim_only[i][j] /= 2;
		}
	}
	if (a->sim_seen < EVICT_SIM_EVIDENCE)
		return;
	/* Another mode replaces the current one only by beating it
	 * significantly (the best such, by hits) -- except LRU, which a
	 * segmented mode gives way to as soon as LRU's simulation is not
	 * worse: a segmented mode must keep earning its place, since on a
	 * small DRAM the sample's noise picks one that the real cache does
	 * not gain from (doc/policies.md "Ninth pass"). */
	m = best = a->mode;
	for (unsigned c = 0; c < EVICT_MODES; c++)
		if (c != m && adapt_better(a->sim_only[c][m], a->sim_only[m][c], a->sim_hits[m]) &&
		    (best == m || a->sim_hits[c] > a->sim_hits[best]))
			best = c;
	if (best == m && m != EVICT_MODE_LRU &&
	    a->sim_only[EVICT_MODE_LRU][m] >= a->sim_only[m][EVICT_MODE_LRU])
		best = EVICT_MODE_LRU;
	if (best != m) {
		a->mode = (uint8_t)best;
		a->horizon = best == EVICT_MODE_SEG_SHORT ? EVICT_SHORT_HORIZON : GHOST_LIFE;
		a->mode_switches++;
		if (!a->seg && !e->adapt_below) { /* below: DRAM's order stays */
			a->seg = true;
			adapt_to_segmented(e, group);
		}
		a->seg = best != EVICT_MODE_LRU;
	}
}

/* Ghost fingerprint carrying the class: the hash's top bits, a marker bit
 * (never 0), the class in the low 6. */
static inline uint32_t ghost_fp_cls(uint64_t hash, unsigned cls)
{
	return ((uint32_t)(hash >> 32) & ~UINT32_C(0x7f)) | 0x40u | (cls & EVICT_CLS_MASK);
}

static void cls_credit(struct evict *e, struct evict_node *n)
{
	if (n->freq & EVICT_CLS_CREDITED)
		return;
	n->freq |= EVICT_CLS_CREDITED;
	e->cls_reu[n->freq & EVICT_CLS_MASK]++;
	e->reu_total++;
}

/* Evidence a class is seldom reused: at least EVICT_CLS_EVIDENCE of its
 * blocks seen, and reu/ins below both the average block's reu_total/ins_total
 * and 1/EVICT_CLS_RARE_DIV (1 in 4).  The absolute bound keeps a workload where
 * every class is reused (multi-turn chat, agents) out of probation: "below
 * average" alone put a chat's newest turn there and lost hits
 * (doc/policies.md). */
#define EVICT_CLS_EVIDENCE 64
#define EVICT_CLS_RARE_DIV 4
static bool cls_rare(const struct evict *e, unsigned c)
{
	if (e->cls_ins[c] < EVICT_CLS_EVIDENCE)
		return false;
	if ((uint64_t)e->cls_reu[c] * EVICT_CLS_RARE_DIV >= e->cls_ins[c])
		return false;
	uint64_t ri = (uint64_t)e->cls_reu[c] * (e->ins_total + 2);
	uint64_t ai = (e->reu_total + 1) * (uint64_t)e->cls_ins[c];
	return ri < ai;
}

/* A new block into its queue (n->queue), just behind its parent if the
 * parent is in the same queue. */
static void prefix_link(struct evict *e, struct evict_node *n, struct evict_node *parent)
{
	if (parent && parent != n && parent->queue == n->queue)
		list_insert_after(evict_list_of(e, n), parent, n);
	else
		list_push_head(evict_list_of(e, n), n);
}

static void prefix_insert(struct evict *e, struct evict_node *n, uint64_t hash, unsigned cls,
			  struct evict_node *parent)
{
	uint32_t none = 0;
	uint32_t *slot = e->ghost ? &e->ghost[hash & e->ghost_mask] : &none;
	bool back = false;
	bool predict = e->learn;
	uint32_t group;
	struct evict_adapt *a = adapt_of(e, n, &group);
	bool retain = (cls & EVICT_RETAIN) != 0;
	bool placed = (cls & EVICT_REPAIR) != 0;

	cls &= ~(unsigned)(EVICT_RETAIN | EVICT_REPAIR);
	if (retain && e->adapt)
		e->retain_hints++;
	/* An engine's put: counted towards the group's hinted share (a
	 * promotion from below or the pod's copy is neither). */
	if (cls <= EVICT_CLS_MASK && !placed)
		retain = adapt_hint(e, a, retain);
	adapt_note(e, a, group, hash, n->chunks, retain);
	if (cls > EVICT_CLS_MASK) { /* a promotion from below: reused, class unknown */
		n->freq = EVICT_CLS_CREDITED;
		if (*slot && ((*slot ^ ghost_fp_cls(hash, 0)) & ~(uint32_t)EVICT_CLS_MASK) == 0) {
			n->freq = (uint8_t)(*slot & EVICT_CLS_MASK);
			*slot = 0;
			e->ghost_hits++;
			cls_credit(e, n);
		}
		n->queue = EVICT_Q_MAIN;
		list_push_head(&e->main, n);
		return;
	}
	n->freq = (uint8_t)cls;
	if (placed) {
		/* The pod's copy (a hand-over, warm-up or repair): reused by
		 * the pod's evidence, not this store's; no class counted. */
		n->freq |= EVICT_CLS_CREDITED;
		n->queue = EVICT_Q_MAIN;
		prefix_link(e, n, parent);
		return;
	}
	if (e->adapt) {
		int age = a ? ghost_take_age(&a->gh, hash) : -1;
		if (age >= 0 && (unsigned)age < a->horizon) {
			e->ghost_hits++;
			cls_credit(e, n);
			back = true;
		}
	} else if (*slot && ((*slot ^ ghost_fp_cls(hash, 0)) & ~(uint32_t)EVICT_CLS_MASK) == 0) {
		/* Back while remembered: credit the class it had then. */
		n->freq = (uint8_t)(*slot & EVICT_CLS_MASK);
		*slot = 0;
		e->ghost_hits++;
		cls_credit(e, n);
		back = true;
	}
	e->cls_ins[n->freq & EVICT_CLS_MASK]++;
	e->ins_total++;
	if (++e->since_halving >= e->window) {
		e->since_halving = 0;
		e->ins_total = e->reu_total = 0;
		for (unsigned i = 0; i < EVICT_CLASSES; i++) {
			e->cls_ins[i] /= 2;
			e->cls_reu[i] /= 2;
			e->ins_total += e->cls_ins[i];
			e->reu_total += e->cls_reu[i];
		}
	}
	/* Class 0 (no lookup said anything about the block) is plain LRU:
	 * without evidence no block is put on probation, and a tenant's
	 * activity cannot move another's blocks between segments. */
	if (!back && predict && (n->freq & EVICT_CLS_MASK) != 0 &&
	    cls_rare(e, n->freq & EVICT_CLS_MASK)) {
		e->probation_inserts++;
		n->queue = EVICT_Q_SMALL;
	} else if (a && !e->adapt_below &&
		   ((!back && a->seg && !retain) ||
		    (parent && parent != n && parent->queue == EVICT_Q_SMALL))) {
		/* Segmented mode: a block earns M by a reuse, or by the
		 * caller's retain hint (which the segmented simulation took
		 * too: the mode is segmented only where hints plus order beat
		 * LRU) -- unless its parent, the block before it in the
		 * prompt, is on probation: a prefix hit needs the parent, so
		 * the child is worth no more.  Back or hinted behind a parent
		 * on P, it would outlive it in M, an orphan no lookup reaches;
		 * and one such link in a chain (the ghost forgot one block, a
		 * fingerprint matched by chance: 0.8 % a take) makes all the
		 * blocks after it orphans.  Per block, so the more blocks a
		 * prompt is cut into the more chains have one: at 16-token
		 * blocks the segmented mode lost 2.5 points to LRU on the
		 * repository's trace, where at 512 it gains 2.6
		 * (doc/policies.md "Small blocks").  In LRU mode too, behind
		 * a parent left on P by a segmented spell: P goes first. */
		e->probation_inserts++;
		n->queue = EVICT_Q_SMALL;
	} else {
		n->queue = EVICT_Q_MAIN;
	}
	prefix_link(e, n, parent);
}

static void prefix_hit(struct evict *e, struct evict_node *n, struct evict_node *prev)
{
	cls_credit(e, n);
	list_unlink(evict_list_of(e, n), n);
	n->queue = EVICT_Q_MAIN;
	if (prev && prev != n && prev->queue == EVICT_Q_MAIN)
		list_insert_after(&e->main, prev, n);
	else
		list_push_head(&e->main, n);
}

void evict_hit_after(struct evict *e, struct evict_node *n, uint64_t hash, struct evict_node *prev)
{
	if (n->queue == EVICT_Q_NONE)
		return;
	if (e->policy == DRAM_POLICY_PREFIX) {
		uint32_t group;
		struct evict_adapt *a = adapt_of(e, n, &group);
		adapt_note(e, a, group, hash, n->chunks, false);
		prefix_hit(e, n, prev);
	}
	else
		evict_hit(e, n);
}

bool evict_worth_keeping(const struct evict *e, const struct evict_node *n)
{
	if (e->adapt && e->adapt_below) {
		/* Over the SSD as victim tier: in the short-horizon mode (the
		 * simulations of DRAM + SSD say blocks come back soon or never)
		 * a block never reused -- no hit, not promoted, not back while
		 * the ghost remembers it -- leaves, so the SSD's room goes to
		 * blocks that were; and only while the short horizon also beats
		 * the long one by adapt_note's rule: a mode chosen over LRU on a
		 * noisy sample of documents (which the long one keeps) lost 3
		 * points on the repository's trace (doc/policies.md). */
		const struct evict_adapt *a = &e->ad0;
		uint64_t cap;
		uint32_t g = e->group_of ? e->group_of(n, e->group_ctx, &cap) : 0;
		if (g && g < KVT_QUOTA_GROUPS)
			a = e->grp ? e->grp[g] : NULL;
		return !(a && a->ready && a->mode == EVICT_MODE_SEG_SHORT &&
			 !(n->freq & EVICT_CLS_CREDITED) &&
			 adapt_better(a->sim_only[EVICT_MODE_SEG_SHORT][EVICT_MODE_SEG_LONG],
				      a->sim_only[EVICT_MODE_SEG_LONG][EVICT_MODE_SEG_SHORT],
				      a->sim_hits[EVICT_MODE_SEG_LONG]));
	}
	/* prefix-adapt's probation (DRAM alone) is no evidence against
	 * reuse: the segmented mode keeps reused blocks longer, it predicts
	 * nothing. */
	if (e->policy != DRAM_POLICY_PREFIX || !e->learn)
		return true;
	return !(n->queue == EVICT_Q_SMALL && !(n->freq & EVICT_CLS_CREDITED));
}

unsigned evict_value(const struct evict *e, const struct evict_node *n)
{
	switch (e->policy) {
	case DRAM_POLICY_PREFIX:
		return (n->queue == EVICT_Q_MAIN ? 2u : 0u) +
		       ((n->freq & EVICT_CLS_CREDITED) ? 1u : 0u);
	case DRAM_POLICY_S3FIFO:
		return (n->queue == EVICT_Q_MAIN ? 2u : 0u) + (n->freq > 0 ? 1u : 0u);
	default:
		return 1;
	}
}

void evict_ghost_note(struct evict *e, const struct evict_node *n, uint64_t hash, bool from_small)
{
	if (e->policy == DRAM_POLICY_PREFIX) {
		uint32_t group;
		struct evict_adapt *a = adapt_of(e, n, &group);
		if (a)
			ghost_add(&a->gh, hash);
		if (e->ghost)
			e->ghost[hash & e->ghost_mask] =
				ghost_fp_cls(hash, n->freq & EVICT_CLS_MASK);
	}
	else if (from_small)
		evict_ghost_add(e, hash);
}

void evict_insert_after(struct evict *e, struct evict_node *n, uint64_t hash, unsigned cls,
			struct evict_node *parent)
{
	if (e->policy == DRAM_POLICY_PREFIX)
		prefix_insert(e, n, hash, cls, parent);
	else
		evict_insert(e, n, hash, cls);
}

void evict_insert(struct evict *e, struct evict_node *n, uint64_t hash, unsigned cls)
{
	if (e->policy == DRAM_POLICY_PREFIX) {
		prefix_insert(e, n, hash, cls, NULL);
		return;
	}
	n->freq = 0;
	if (e->policy == DRAM_POLICY_LRU) {
		n->queue = EVICT_Q_MAIN;
		list_push_head(&e->main, n);
		return;
	}
	if (ghost_take(&e->ad0.gh, hash)) {
		e->ghost_hits++;
		n->queue = EVICT_Q_MAIN;
		list_push_head(&e->main, n);
	} else {
		n->queue = EVICT_Q_SMALL;
		list_push_head(&e->small, n);
	}
}

void evict_demote(struct evict *e, struct evict_node *n)
{
	struct evict_list *l;
	if (n->queue == EVICT_Q_NONE)
		return;
	l = evict_list_of(e, n);
	list_unlink(l, n);
	list_insert_after(l, l->head.prev, n);
}

void evict_hit(struct evict *e, struct evict_node *n)
{
	if (n->queue == EVICT_Q_NONE)
		return;
	if (e->policy == DRAM_POLICY_PREFIX) {
		prefix_hit(e, n, NULL);
		return;
	}
	if (e->policy == DRAM_POLICY_LRU) {
		list_unlink(&e->main, n);
		list_push_head(&e->main, n);
	} else if (n->freq < 3) {
		n->freq++;
	}
}

void evict_remove(struct evict *e, struct evict_node *n)
{
	if (n->queue == EVICT_Q_NONE)
		return;
	list_unlink(evict_list_of(e, n), n);
	n->queue = EVICT_Q_NONE;
}

struct evict_node *evict_victim(struct evict *e, evict_busy_fn busy, void *ctx)
{
	/* A full lap of both lists with nothing evictable means give up. */
	uint64_t budget = 5 * (e->small.count + e->main.count) + 2; /* freq <= 3 */
	/* Busy items rotated in a row, per list: once a list has shown only
	 * busy items for a whole lap, take from the other one, whatever the
	 * S3-FIFO balance says (pinned or in-flight blocks must not make a
	 * put fail while the other queue has victims). */
	uint64_t busy_small = 0, busy_main = 0;

	while (budget-- > 0) {
		struct evict_list *l;
		struct evict_node *n;
		bool small_stuck = busy_small >= e->small.count;
		bool main_stuck = busy_main >= e->main.count;
		bool from_small;
		if (e->policy == DRAM_POLICY_PREFIX)
			from_small = e->small.count > 0 && !small_stuck &&
				     (e->main.chunks <= e->main_max || (e->adapt && !e->ad0.seg) ||
				      e->main.count == 0 || main_stuck);
		else
			from_small = e->policy == DRAM_POLICY_S3FIFO && e->small.count > 0 &&
				     !small_stuck &&
				     (e->small.chunks > e->small_target || e->main.count == 0 ||
				      main_stuck);

		if (small_stuck && main_stuck)
			return NULL;
		l = from_small ? &e->small : &e->main;
		if (l->count == 0)
			return NULL;
		n = l->head.prev;
		if (busy(n, ctx)) {
			list_unlink(l, n);
			list_push_head(l, n);
			if (from_small)
				busy_small++;
			else
				busy_main++;
			continue;
		}
		if (e->policy != DRAM_POLICY_S3FIFO)
			return n;
		if (from_small) {
			if (n->freq > 0) {
				list_unlink(l, n);
				n->freq = 0;
				n->queue = EVICT_Q_MAIN;
				list_push_head(&e->main, n);
				e->promotions++;
				busy_main = 0; /* main changed */
				continue;
			}
			return n;
		}
		if (n->freq > 0) {
			n->freq--;
			list_unlink(l, n);
			list_push_head(l, n);
			continue;
		}
		return n;
	}
	return NULL;
}

/*
 * Quota eviction: the oldest node that pick() accepts, walking S from its
 * tail, then M from its tail (LRU: the one list from its tail).  Nothing
 * is moved or counted: a quota only chooses among one group's blocks, in
 * the order the policy would have reached them, and leaves the queues'
 * balance to evict_victim.
 */
struct evict_node *evict_oldest_match(struct evict *e, evict_busy_fn pick, void *ctx)
{
	struct evict_list *lists[2] = { &e->small, &e->main };
	for (unsigned i = 0; i < 2; i++) {
		struct evict_list *l = lists[i];
		for (struct evict_node *n = l->head.prev; n != &l->head; n = n->prev)
			if (pick(n, ctx))
				return n;
	}
	return NULL;
}

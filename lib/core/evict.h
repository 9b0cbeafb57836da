/*
 * evict.h - eviction queues of one DRAM shard (see evict.c).
 * Every call is made under the owning shard's lock.
 */
#ifndef KVT_EVICT_H
#define KVT_EVICT_H

#include "dram.h"
#include "kvt_int.h"
#include "ghost.h"
#include "minisim.h"

enum { EVICT_Q_NONE = 0, EVICT_Q_SMALL = 1, EVICT_Q_MAIN = 2 };

/* Embedded in each item; the owner's two spare bytes ride in its padding. */
struct evict_node {
	struct evict_node *prev, *next;
	uint32_t chunks;  /* size in arena chunks, counted against the queue */
	uint8_t freq;     /* S3-FIFO: access count 0..3; prefix: EVICT_CLS_* bits */
	uint8_t queue;    /* EVICT_Q_* */
	uint8_t owner[2]; /* free for the embedding struct */
};

/* The prefix policy's use of evict_node.freq: the block's reuse class
 * (0..EVICT_CLASSES-1), whether its reuse was already credited, and
 * whether a prefix lookup touched it since its last get. */
#define EVICT_CLASSES 64
#define EVICT_CLS_MASK 0x3f
#define EVICT_CLS_CREDITED 0x80
/* Or'ed into an insert's cls: the caller's retain hint (KVT_F_RETAIN). */
#define EVICT_RETAIN 0x1000u
/* prefix-adapt ignores the retain hint in a group where fewer than 1 in
 * EVICT_HINT_ALL_DIV of its recent puts came unhinted (counts halved every
 * EVICT_HINT_WINDOW puts), once EVICT_HINT_EVIDENCE were seen (evict.c
 * adapt_hint). */
#define EVICT_HINT_WINDOW 1024
#define EVICT_HINT_EVIDENCE 256
#define EVICT_HINT_ALL_DIV 10
/* Or'ed into an insert's cls: a copy the pod placed (KVT_F_REPAIR): the
 * prefix policy credits it as reused (EVICT_CLS_CREDITED, no class
 * counted) and starts it in M, so no write-down filter drops it. */
#define EVICT_REPAIR 0x2000u

struct evict_list {
	struct evict_node head; /* sentinel: head.next is newest, head.prev oldest */
	uint64_t chunks;        /* sum of members' chunks */
	uint64_t count;
};

/*
 * prefix-adapt's decision state: three miniature simulations over sampled
 * keys, LRU ([EVICT_MODE_LRU]) and segmented with a long and a short ghost
 * horizon ([EVICT_MODE_SEG_LONG], [EVICT_MODE_SEG_SHORT]), whose decayed
 * hit counts choose the mode, and the ghost of evicted keys the segmented
 * modes read.
 */
enum { EVICT_MODE_LRU = 0, EVICT_MODE_SEG_LONG = 1, EVICT_MODE_SEG_SHORT = 2, EVICT_MODES = 3 };
struct evict_adapt {
	struct minisim sim[EVICT_MODES];
	struct ghost gh;          /* near-FIFO, ghost.c */
	uint64_t sim_hits[EVICT_MODES], sim_accesses, sim_window, mode_switches;
	/* sim_only[i][j]: sampled accesses simulation i hit and j did not,
	 * halved with sim_hits; sampled accesses seen in all (to
	 * EVICT_SIM_EVIDENCE) */
	uint64_t sim_only[EVICT_MODES][EVICT_MODES], sim_seen;
	uint64_t cap_chunks;      /* the capacity it models */
	/* the group's engine puts and those with the retain hint, halved
	 * every EVICT_HINT_WINDOW puts (evict.c adapt_hint) */
	uint32_t hint_puts, hint_hinted;
	uint8_t mode;             /* EVICT_MODE_* */
	uint8_t horizon;          /* ghost generations a block back counts as reused */
	bool seg;                 /* segmented mode (either horizon) */
	bool ready;               /* sims and ghost allocated */
};

/*
 * The quota group whose prefix-adapt state decides for node n (0: the
 * shard's own, ad0), and in *cap_chunks the chunks of this shard the group
 * may hold (its DRAM limit's share).  Set by the embedder (dram.c); none:
 * every node is group 0.
 */
typedef uint32_t (*evict_group_fn)(const struct evict_node *n, void *ctx, uint64_t *cap_chunks);

struct evict {
	int policy;               /* DRAM_POLICY_* */
	struct kvt_mem *mem;
	struct evict_list small;  /* S3-FIFO probation queue (unused by LRU) */
	struct evict_list main;   /* S3-FIFO main queue / the LRU list */
	uint64_t small_target;    /* chunks: S is drained first while above this */
	/* prefix-learn: fingerprint and class of evicted keys, direct mapped */
	uint32_t *ghost;
	uint32_t ghost_mask;
	uint64_t ghost_hits;      /* inserts that went straight to main */
	uint64_t promotions;      /* small -> main moves */
	/* prefix policy: per reuse class, blocks inserted and blocks reused
	 * (hit in DRAM, or back while their ghost was remembered), halved
	 * every `window` inserts so the estimate follows the workload */
	uint32_t cls_ins[EVICT_CLASSES], cls_reu[EVICT_CLASSES];
	uint64_t ins_total, reu_total, window, since_halving;
	uint64_t main_max;        /* chunks: above this M gives victims even if P has some */
	uint64_t probation_inserts; /* blocks predicted not to be reused */
	uint64_t retain_hints;    /* inserts with the retain hint (prefix-adapt) */
	uint64_t retain_ignored;  /* of those, taken as unhinted: their group hints
				   * (nearly) every put (adapt_hint) */
	bool learn;               /* prefix-learn: classes choose P or M */
	bool adapt;               /* prefix-adapt */
	bool adapt_pinned;        /* a tier below takes DRAM's victims: LRU mode */
	/* prefix-adapt over the SSD as DRAM's victim tier, ssd.adapt_writedown
	 * on (evict_adapt_below):
	 * the simulations model DRAM + SSD (below_num / below_den of the
	 * capacity), DRAM's order stays LRU, and in the short-horizon mode a
	 * victim never reused is not written down (evict_worth_keeping). */
	bool adapt_below;
	uint64_t below_num, below_den, below_rate;
	/* prefix-adapt's mode, ghost and simulations for blocks of no quota
	 * group with a DRAM limit (all blocks when no quota is used); also
	 * S3-FIFO's ghost (ad0.gh) */
	struct evict_adapt ad0;
	/* prefix-adapt, per quota group with a DRAM limit: its own mode,
	 * ghost and simulations, made at the group's first block in the
	 * shard (KVT_QUOTA_GROUPS pointers, or NULL before) */
	struct evict_adapt **grp;
	evict_group_fn group_of;
	void *group_ctx;
};

/* busy(node, ctx): true if the node must not be evicted now (pinned). */
typedef bool (*evict_busy_fn)(struct evict_node *n, void *ctx);

int evict_init(struct evict *e, struct kvt_mem *mem, int policy, uint64_t capacity_chunks);
void evict_fini(struct evict *e);
/* A new visible item; hash picks its ghost fingerprint; cls is its reuse
 * class for the prefix policy (ignored by the others). */
void evict_insert(struct evict *e, struct evict_node *n, uint64_t hash, unsigned cls);
/* The same, for the prefix policy just behind prev (as evict_hit_after)
 * if prev is in the queue the block goes to. */
void evict_insert_after(struct evict *e, struct evict_node *n, uint64_t hash, unsigned cls,
			struct evict_node *parent);
/* A hit, for the prefix policy just behind prev (the node the shard's
 * previous get or put placed, NULL: at the head), so that a chain read or
 * written head first ends head newest, tail oldest. */
void evict_hit_after(struct evict *e, struct evict_node *n, uint64_t hash, struct evict_node *prev);
/* Tests: the shard's own prefix-adapt state (ad0, once made) in mode
 * EVICT_MODE_*, as if its simulations had just chosen it: the short
 * horizon beat the long one by 100 to 10 sampled accesses of 200 hits
 * (evict_worth_keeping's guard holds), and no evidence yet towards
 * another switch. */
void evict_adapt_force(struct evict *e, unsigned mode);
/* Worth a write-down to the tier below when evicted?  False only with
 * evidence: the prefix policy predicted no reuse and none came. */
bool evict_worth_keeping(const struct evict *e, const struct evict_node *n);
/* How much the policy expects n to be reused, 0 (least) .. 3. */
unsigned evict_value(const struct evict *e, const struct evict_node *n);
void evict_hit(struct evict *e, struct evict_node *n);
/* Move a queued node to the old end of its queue: the next victim (a
 * block read once from the tier below, which keeps its copy). */
void evict_demote(struct evict *e, struct evict_node *n);
/* Unlink (delete, clear, or after evict_victim).  hash >= 0 records a ghost. */
void evict_remove(struct evict *e, struct evict_node *n);
/*
 * The next item to evict, still linked (the caller evicts it with
 * evict_remove after recording it in the ghost with evict_ghost_add if
 * it came from the small queue).  NULL if every item is busy.
 */
struct evict_node *evict_victim(struct evict *e, evict_busy_fn busy, void *ctx);
void evict_ghost_add(struct evict *e, uint64_t hash);
/* Remember an evicted node as its policy does (S3-FIFO: from S only;
 * prefix: always, with its class). */
void evict_ghost_note(struct evict *e, const struct evict_node *n, uint64_t hash, bool from_small);
/* The oldest node pick(node, ctx) accepts, S before M; still linked.  NULL if none. */
struct evict_node *evict_oldest_match(struct evict *e, evict_busy_fn pick, void *ctx);
const char *evict_policy_name(int policy);
/* prefix-adapt: stay in LRU mode for good (a lower tier takes the
 * victims; the simulations model DRAM alone, doc/policies.md), freeing the
 * ghost and the simulations.  Others: nothing. */
void evict_pin_lru(struct evict *e);
/* prefix-adapt over the SSD as DRAM's victim tier: the simulations model
 * total_chunks for this shard's dram_chunks (DRAM + its share of the
 * SSD), 1 key in 32 at an SSD of 3 DRAMs (sparser below a larger one:
 * at most an eighth of DRAM's chunks), with a ghost of 3 keys a DRAM
 * chunk; DRAM's order
 * stays prefix's (LRU mode); in the short-horizon segmented mode a victim
 * never reused is not worth a write-down.  Undoes evict_pin_lru.  Others:
 * nothing. */
void evict_adapt_below(struct evict *e, uint64_t dram_chunks, uint64_t total_chunks);
/* prefix-adapt: per-group modes (see evict_group_fn). */
void evict_set_group_fn(struct evict *e, evict_group_fn fn, void *ctx);
/* Stats: groups' states made, in segmented mode, their mode switches. */
void evict_group_stats(const struct evict *e, uint64_t *groups, uint64_t *seg, uint64_t *switches);

#endif

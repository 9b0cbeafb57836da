/*
 * evict.h - eviction queues of one DRAM shard (see evict.c).
 * Every call is made under the owning shard's lock.
 */
#ifndef KVT_EVICT_H
#define KVT_EVICT_H

#include "kvt_int.h"

enum { EVICT_Q_NONE = 0, EVICT_Q_SMALL = 1, EVICT_Q_MAIN = 2 };

/* Embedded in each item; the owner's two spare bytes ride in its padding. */
struct evict_node {
	struct evict_node *prev, *next;
	uint32_t chunks;  /* size in arena chunks, counted against the queue */
	uint8_t freq;     /* S3-FIFO access count, 0..3 */
	uint8_t queue;    /* EVICT_Q_* */
	uint8_t owner[2]; /* free for the embedding struct */
};

struct evict_list {
	struct evict_node head; /* sentinel: head.next is newest, head.prev oldest */
	uint64_t chunks;        /* sum of members' chunks */
	uint64_t count;
};

struct evict {
	int policy;               /* DRAM_POLICY_* */
	struct kvt_mem *mem;
	struct evict_list small;  /* S3-FIFO probation queue (unused by LRU) */
	struct evict_list main;   /* S3-FIFO main queue / the LRU list */
	uint64_t small_target;    /* chunks: S is drained first while above this */
	uint32_t *ghost;          /* fingerprints of keys evicted from S, direct mapped */
	uint32_t ghost_mask;
	uint64_t ghost_hits;      /* inserts that went straight to main */
	uint64_t promotions;      /* small -> main moves */
};

/* busy(node, ctx): true if the node must not be evicted now (pinned). */
typedef bool (*evict_busy_fn)(struct evict_node *n, void *ctx);

int evict_init(struct evict *e, struct kvt_mem *mem, int policy, uint64_t capacity_chunks);
void evict_fini(struct evict *e);
/* A new visible item; hash picks its ghost fingerprint. */
void evict_insert(struct evict *e, struct evict_node *n, uint64_t hash);
void evict_hit(struct evict *e, struct evict_node *n);
/* Unlink (delete, clear, or after evict_victim).  hash >= 0 records a ghost. */
void evict_remove(struct evict *e, struct evict_node *n);
/*
 * The next item to evict, still linked (the caller evicts it with
 * evict_remove after recording it in the ghost with evict_ghost_add if
 * it came from the small queue).  NULL if every item is busy.
 */
struct evict_node *evict_victim(struct evict *e, evict_busy_fn busy, void *ctx);
void evict_ghost_add(struct evict *e, uint64_t hash);
/* The oldest node pick(node, ctx) accepts, S before M; still linked.  NULL if none. */
struct evict_node *evict_oldest_match(struct evict *e, evict_busy_fn pick, void *ctx);
const char *evict_policy_name(int policy);

#endif

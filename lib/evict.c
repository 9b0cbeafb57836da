/*
 * evict.c - which DRAM item goes next: S3-FIFO (default) or LRU, for one
 * shard.  Owns the queues and the ghost table; the items belong to dram.c.
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
 * Pinned items are never evicted: evict_victim rotates them to the head of
 * their queue and goes on; after a full lap with nothing evictable it
 * returns NULL (the caller reports KVT_EFULL).
 */
#include <errno.h>
#include <string.h>

#include "evict.h"

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

int evict_init(struct evict *e, struct kvt_mem *mem, int policy, uint64_t capacity_chunks)
{
	uint64_t g = 64;
	memset(e, 0, sizeof(*e));
	e->policy = policy;
	e->mem = mem;
	list_init(&e->small);
	list_init(&e->main);
	e->small_target = capacity_chunks / 10;
	if (policy == DRAM_POLICY_S3FIFO) {
		/* One ghost slot per chunk bounds it by the most items M can hold. */
		while (g < capacity_chunks && g < (UINT64_C(1) << 24))
			g <<= 1;
		e->ghost = kvt_mem_calloc(mem, g, sizeof(uint32_t));
		if (!e->ghost)
			return -ENOMEM;
		e->ghost_mask = (uint32_t)(g - 1);
	}
	return 0;
}

void evict_fini(struct evict *e)
{
	if (e->ghost)
		kvt_mem_free(e->mem, e->ghost, ((size_t)e->ghost_mask + 1) * sizeof(uint32_t));
	e->ghost = NULL;
}

const char *evict_policy_name(int policy)
{
	return policy == DRAM_POLICY_LRU ? "lru" : "s3fifo";
}

/* Fingerprint: never 0, so an empty slot never matches. */
static inline uint32_t ghost_fp(uint64_t hash)
{
	return (uint32_t)(hash >> 32) | 1u;
}

void evict_ghost_add(struct evict *e, uint64_t hash)
{
	if (e->ghost)
		e->ghost[hash & e->ghost_mask] = ghost_fp(hash);
}

void evict_insert(struct evict *e, struct evict_node *n, uint64_t hash)
{
	n->freq = 0;
	if (e->policy == DRAM_POLICY_LRU) {
		n->queue = EVICT_Q_MAIN;
		list_push_head(&e->main, n);
		return;
	}
	if (e->ghost[hash & e->ghost_mask] == ghost_fp(hash)) {
		e->ghost[hash & e->ghost_mask] = 0;
		e->ghost_hits++;
		n->queue = EVICT_Q_MAIN;
		list_push_head(&e->main, n);
	} else {
		n->queue = EVICT_Q_SMALL;
		list_push_head(&e->small, n);
	}
}

void evict_hit(struct evict *e, struct evict_node *n)
{
	if (n->queue == EVICT_Q_NONE)
		return;
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
		bool from_small = e->policy == DRAM_POLICY_S3FIFO && e->small.count > 0 &&
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
		if (e->policy == DRAM_POLICY_LRU)
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

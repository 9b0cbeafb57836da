/*
 * dram.c - the DRAM tier (G2): blocks in host memory, sharded.
 *
 * Owns: the shards; in each shard a chained hash index, an item pool, an
 * arena slice (arena.c) and eviction queues (evict.c), all under one mutex
 * per shard.  A key's shard is picked by its hash, so puts and gets of
 * different keys rarely meet on a lock, and no lock is held while bytes are
 * copied (doc/threads.md has the lock order: one shard lock at a time, never
 * two; the evict hook runs under it, and a put's ask below, the absent hook).
 *
 * An item's life:
 *
 *   put:  lock, index lookup (present -> EXISTS), a client's put asks the
 *         tiers below (dram_set_absent_hook: held there -> EXISTS),
 *         allocate item and chunks
 *         (evicting as needed), insert WRITING, ref 1, unlock
 *         copy bytes in (no lock)
 *         lock, DEAD? (a delete or clear won: free it, -ECANCELED)
 *               else VISIBLE, enter the eviction queue, unref, unlock
 *   get:  lock, find VISIBLE (else MISS), ref++, note the hit, unlock
 *         copy bytes out (no lock)
 *         lock, unref (DEAD and refs 0: free), unlock
 *   pin:  like get, but the ref is kept until dram_unpin.
 *   delete/clear: unlink from index and queue; refs 0: free now, else DEAD
 *         and the last unref frees.
 *   evict: only VISIBLE items with refs 0 (evict_victim skips the rest).
 *
 * So a reader holding a ref never sees its bytes freed, a value is visible
 * only complete, a put racing a delete loses, and lookups never take refs.
 *
 * CRCs: each part's CRC32C lives with the item (inline for one part, in the
 * item's extension otherwise).  Supplied CRCs (KVT_F_CRC) are verified at
 * put; otherwise they are computed lazily by dram_item_crcs, the first time
 * a block must leave DRAM or a reader asks to verify, so that a put costs
 * one memcpy and nothing more (doc/dram.md).
 *
 * Quotas (quota.c): an item of a namespace in a quota group is charged to
 * the group when reserved and uncharged when freed (item.group says to
 * which).  A group past its DRAM limit evicts its own blocks first
 * (dram_quota_charge), shard by shard, one shard lock at a time.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <xxhash.h>

#include "arena.h"
#include "evict.h"
#include "kvt_int.h"
#include "kvt_keyhash.h"
#include "nsstat.h"

#define DRAM_KEY_INLINE 32     /* keys up to this long live in the item */
#define DRAM_POOL_SMALL 65536            /* first item pool blocks, and what a shard takes */
#define DRAM_POOL_HUGE (2u << 20)        /* later blocks: one huge page each */
#define DRAM_POOL_SMALL_MAX 16           /* small blocks before huge ones */
#define DRAM_DEFAULT_SHARD (UINT64_C(1) << 30) /* one shard per GiB by default */
/* victims in flight: at least this (a shard's share) */
#define DRAM_LEAVING_MIN (UINT64_C(1) << 20)
/* dram.prefault at open: announced from this size, progress at most this often */
#define DRAM_PREFAULT_SAY (UINT64_C(1) << 30)
#define DRAM_PREFAULT_EVERY_NS (UINT64_C(2) * 1000000000u)

enum { ITEM_WRITING = 1, ITEM_VISIBLE = 2, ITEM_DEAD = 3 };
#define ITEM_STATE_MASK 0x03
/* Bits 2-3: reads (hits) since the block entered DRAM, saturating at 3;
 * the evict hook uses it to write down blocks read at least twice. */
#define ITEM_READS_SHIFT 2
#define ITEM_READS_MASK 0x0c
#define ITEM_CRC_VALID 0x10 /* part CRCs computed */
#define ITEM_ON_LOWER 0x20  /* a lower tier holds a copy: never written down again */
#define ITEM_WD 0x40        /* write-down queued or in flight; it holds a ref */
#define ITEM_LEAVING 0x80   /* evicted, out of the queues, its write-down in flight:
			     * freed (or requeued if read meanwhile) when it ends */
/* owner[1]: the key length - 1 (6 bits) and ITEM_EXT, both fixed once
 * the item is reserved, so readers holding a ref read them unlocked. */
#define ITEM_EXT 0x80       /* runs, parts and key live in u.ext */
#define ITEM_SEALED 0x40    /* client-sealed value; set at publish, before any reader */

struct dram_part {
	uint64_t end;  /* offset one past the part's last byte */
	uint32_t crc;  /* CRC32C, valid if the item has ITEM_CRC_VALID */
	uint32_t pad;
};

/*
 * One block: 88 bytes, a key of up to 32 bytes inline.  The common block
 * (one run, one part, a 32-byte key) keeps its run and CRC inline; any
 * other (several runs, several parts, a long key) has ITEM_EXT set and
 * keeps runs, part table (with CRCs) and key in `u.ext`:
 *
 *   ext: [run_count x {start, count}][part_count x {end, crc}][long key]
 *
 * All fields are guarded by the shard lock, except the value's bytes,
 * which belong to whoever holds a ref (writer: before VISIBLE; readers:
 * after).
 */
struct dram_item {
	struct evict_node node;   /* owner[0] state|flags, owner[1] key_len - 1|ITEM_EXT */
	struct dram_item *hnext;  /* index chain */
	/* packed: the bits each needs, so that a block costs 88 bytes with its
	 * bucket, not 96 (the budget: 128 bytes a block with the policy's) */
	uint64_t value_len : 37;  /* bytes, <= KVT_VALUE_MAX */
	uint64_t part_count : 11; /* <= KVT_PARTS_MAX */
	uint64_t run_count : 7;   /* <= DRAM_MAX_RUNS */
	/* published by a lower tier's promotion (DRAM_PROMOTED), not a put:
	 * what the pass after a lower tier's delete or clear may remove
	 * (dram_delete_promoted).  Written at reserve and at publish, while
	 * the item is WRITING and its writer's alone; read under the lock. */
	uint64_t promoted : 1;
	uint64_t : 8;
	union {
		struct {
			uint32_t run0; /* first chunk of the one run */
			uint32_t crc0; /* CRC32C of the one part */
		} in;
		void *ext;         /* with ITEM_EXT */
	} u;
	uint32_t ns;
	uint32_t refs : 21;       /* writer + readers + pins, < ITEM_REFS_MAX */
	/* published cold (DRAM_COLD: a first hit below, which keeps its copy)
	 * and not read here since; only with ITEM_ON_LOWER.  In this word, not
	 * owner[] (full) or the lengths' (read unlocked under a ref): every
	 * field of it is the lock's. */
	uint32_t cold : 1;
	uint32_t group : 10;      /* quota group charged (0: none); fixed at reserve */
	uint8_t key[DRAM_KEY_INLINE];
};
_Static_assert(sizeof(struct dram_item) == 88, "dram_item grew: check the metadata budget");
_Static_assert(KVT_VALUE_MAX < (UINT64_C(1) << 37) && KVT_PARTS_MAX < (1u << 11) &&
		       DRAM_MAX_RUNS < (1u << 7) && KVT_QUOTA_GROUPS <= (1u << 10),
	       "a dram_item field is too narrow");
#define ITEM_REFS_MAX ((UINT32_C(1) << 21) - 1)

#define ITEM_STATE(it) ((it)->node.owner[0] & ITEM_STATE_MASK)
#define ITEM_KEYLEN(it) (((it)->node.owner[1] & 0x3fu) + 1u)

uint32_t dram_item_flags(struct dram_item *it)
{
	return (it->node.owner[1] & ITEM_SEALED) ? KVT_F_SEALED : 0;
}

struct pool_block {
	struct pool_block *next;
	size_t len;                   /* bytes of this block */
};

struct dram_shard {
	pthread_mutex_t lock;
	struct dram_item **buckets;   /* chained hash index */
	uint32_t bucket_mask;
	uint64_t count;               /* items in the index (WRITING or VISIBLE) */
	struct dram_item *free_items; /* item pool free list, via hnext */
	uint64_t pool_slices;         /* 64 KiB slices of items taken from the pool */
	struct arena arena;
	struct evict ev;
	struct iovec *scratch;        /* view for the evict hook */
	unsigned scratch_cap;
	/* statistics, guarded by lock */
	uint64_t puts, put_bytes, put_exists, put_canceled, full_errors;
	uint64_t hits, misses, get_bytes, evictions, evicted_bytes, deletes;
	uint64_t pinned, value_bytes, lookups, crc_errors, dead_pending;
	uint64_t promotions, promoted_bytes, admitted;
	uint64_t quota_evictions;     /* evicted to keep a quota group under its limit */
	/* gauges: visible blocks a lower tier also holds (ITEM_ON_LOWER), and
	 * of them the cold ones (item.cold); blocks and value bytes, kept by
	 * item_lower_gauge_locked at every change of either flag or state */
	uint64_t lower_blocks, lower_bytes, cold_blocks, cold_bytes;
	/* victim write-down (doc/policies.md): evicted blocks whose write-down
	 * is in flight keep their chunks; at most leaving_max bytes of them */
	pthread_cond_t room;          /* a leaving block was freed */
	uint64_t leaving_bytes, leaving_max;
	uint64_t victim_wd, victim_filtered, victim_shed, victim_waits;
	bool plugged;                 /* below_plug(true) told, this lock hold */
	/* prefix policy: the chain after a lookup (chain_prev) */
	struct evict_node *chain_last;
	uint64_t chain_left;
	uint32_t chain_ns;
} __attribute__((aligned(64)));

struct dram {
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	struct dram_shard *shards;
	uint32_t shard_count;
	uint32_t chunk;
	uint64_t capacity;        /* bytes of arena over all shards */
	uint64_t max_value;       /* largest value one shard can hold */
	/* dram.prefault at open: bytes the arenas populated and the time
	 * their setup took (with THP the kernel may compact memory for
	 * seconds); 0 and 0 when off */
	uint64_t prefault_bytes, prefault_ns;
	int policy;
	dram_evict_fn evict_fn;
	void *evict_ctx;
	dram_admit_fn admit_fn;
	void *admit_ctx;
	dram_absent_fn absent_fn; /* dram_set_absent_hook: a put's ask below */
	void *absent_ctx;
	bool victim_wd;           /* evicted blocks go down through admit_fn */
	/* dram_below_room: has the tier below no free room (the policy's
	 * write-down filter applies only then)?  NULL: always filter. */
	bool (*below_full)(void *ctx);
	void *below_ctx;
	/* dram_below_plug: the tier below takes none of the victims sent
	 * while on (a shard's burst goes down whole, in one order) */
	void (*below_plug)(void *ctx, bool on);
	void *plug_ctx;
	uint64_t victim_wait_ns;  /* a put waits this long for the disk, then sheds */
	/* Reuse classes the last prefix lookups gave to blocks they missed,
	 * for the prefix policy's insert: direct mapped, (hash & ~0xff) | class,
	 * written and read without a lock (a lost or stale hint only costs a
	 * prediction). */
	_Atomic uint64_t *hints;
	uint32_t hint_mask;
	struct quota *quota;      /* or NULL: nothing is charged */
	const struct nsstat *nsstat; /* or NULL: per-namespace counters (nsstat.h) */
	/* Item pool shared by the shards: 2 MiB blocks on huge pages (after a
	 * few 64 KiB ones), handed out in 64 KiB slices.  Shared so that the
	 * unused tail is one block's, not one per shard. */
	pthread_mutex_t pool_lock;    /* leaf; taken under a shard lock */
	struct pool_block *blocks;    /* every pool block, for close */
	uint64_t pool_blocks;
	char *pool_cur;               /* next free byte of the newest block */
	size_t pool_left;             /* bytes left there */
	/* Random per store (getrandom at open), mixed into every index hash's
	 * seed: clients choose keys, but cannot aim them at one bucket. */
	uint64_t hash_secret;
};

/* ------------------------------------------------------------------------
 * Items and their extension
 */

/* Bytes of the extension a block of this shape needs (0: none). */
static inline size_t item_ext_len(uint16_t run_count, uint16_t part_count, uint32_t key_len)
{
	if (run_count <= 1 && part_count <= 1 && key_len <= DRAM_KEY_INLINE)
		return 0;
	return (size_t)run_count * sizeof(struct arena_run) +
	       (size_t)part_count * sizeof(struct dram_part) +
	       (key_len > DRAM_KEY_INLINE ? key_len : 0);
}

static inline bool item_has_ext(const struct dram_item *it)
{
	return it->node.owner[1] & ITEM_EXT;
}

static inline struct arena_run *item_runs(struct dram_item *it)
{
	return (struct arena_run *)it->u.ext;
}

static inline struct dram_part *item_parts(struct dram_item *it)
{
	return (struct dram_part *)(void *)((char *)it->u.ext +
					    (size_t)it->run_count * sizeof(struct arena_run));
}

static inline const uint8_t *item_key(const struct dram_item *it)
{
	if (ITEM_KEYLEN(it) <= DRAM_KEY_INLINE)
		return it->key;
	return (const uint8_t *)it->u.ext + (size_t)it->run_count * sizeof(struct arena_run) +
	       (size_t)it->part_count * sizeof(struct dram_part);
}

/* Run i of the item (0 .. run_count-1). */
static inline struct arena_run item_run(struct dram_item *it, unsigned i)
{
	if (!item_has_ext(it)) {
		struct arena_run r = { it->u.in.run0, it->node.chunks };
		return r;
	}
	return item_runs(it)[i];
}

static inline uint64_t item_part_end(struct dram_item *it, unsigned p)
{
	return item_has_ext(it) ? item_parts(it)[p].end : it->value_len;
}

static inline uint64_t item_part_start(struct dram_item *it, unsigned p)
{
	return p == 0 ? 0 : item_parts(it)[p - 1].end;
}

/* Part p's CRC (valid with ITEM_CRC_VALID).  Locked, or a ref and CRCs known valid. */
static inline uint32_t item_part_crc(struct dram_item *it, unsigned p)
{
	return item_has_ext(it) ? item_parts(it)[p].crc : it->u.in.crc0;
}

static inline void item_set_part_crc(struct dram_item *it, unsigned p, uint32_t crc)
{
	if (item_has_ext(it))
		item_parts(it)[p].crc = crc;
	else
		it->u.in.crc0 = crc;
}

static inline uint64_t dram_hash(const struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	/* Keys are at most 64 bytes: a seeded XXH3 costs what seed 0 does;
	 * the seed is the namespace's, keyed (kvt_keyhash.h). */
	return kvt_key_hash(d->hash_secret, ns, key->bytes, key->len);
}

static inline struct dram_shard *dram_shard_of(struct dram *d, uint64_t h)
{
	/* High bits pick the shard, low bits the bucket. */
	return &d->shards[(uint32_t)(((h >> 32) * d->shard_count) >> 32)];
}

/* ------------------------------------------------------------------------
 * Item pool: fixed-size items carved from 64 KiB blocks, so metadata is
 * counted exactly by the allocation wrapper and malloc adds no headers.
 */

static struct dram_item *pool_get(struct dram *d, struct dram_shard *s)
{
	struct dram_item *it = s->free_items;
	if (!it) {
		size_t per = DRAM_POOL_SMALL / sizeof(struct dram_item);
		struct dram_item *items;
		pthread_mutex_lock(&d->pool_lock);
		if (d->pool_left < per * sizeof(struct dram_item)) {
			/* Small stores stay small; big indexes get 2 MiB blocks on
			 * huge pages, so a lookup's item access rarely misses the TLB. */
			size_t len = d->pool_blocks < DRAM_POOL_SMALL_MAX ? DRAM_POOL_SMALL + 64
									 : DRAM_POOL_HUGE;
			struct pool_block *b = kvt_mem_alloc_aligned(
				d->mem, len == DRAM_POOL_HUGE ? DRAM_POOL_HUGE : 64, len);
			if (!b) {
				pthread_mutex_unlock(&d->pool_lock);
				return NULL;
			}
			if (len == DRAM_POOL_HUGE)
				madvise(b, len, MADV_HUGEPAGE); /* advice: failure is harmless */
			b->len = len;
			b->next = d->blocks;
			d->blocks = b;
			d->pool_blocks++;
			d->pool_cur = (char *)b + 64;
			d->pool_left = len - 64;
		}
		items = (struct dram_item *)(void *)d->pool_cur;
		d->pool_cur += per * sizeof(struct dram_item);
		d->pool_left -= per * sizeof(struct dram_item);
		pthread_mutex_unlock(&d->pool_lock);
		s->pool_slices++;
		for (size_t i = 0; i < per; i++) {
			items[i].hnext = s->free_items;
			s->free_items = &items[i];
		}
		it = s->free_items;
	}
	s->free_items = it->hnext;
	memset(it, 0, sizeof(*it));
	return it;
}

static void pool_put(struct dram_shard *s, struct dram_item *it)
{
	it->hnext = s->free_items;
	s->free_items = it;
}

/* Uncharge bytes from quota group g (an item leaving, or a reservation
 * that failed). */
static void dram_quota_uncharge(struct dram *d, uint32_t g, uint64_t bytes)
{
	struct quota_group *qg = quota_group_at(d->quota, g);
	atomic_fetch_sub_explicit(&qg->used[QUOTA_DRAM], bytes, memory_order_relaxed);
}

/* bytes of quota group g (0: none) ended their write-down: no longer
 * leaving.  After their charge went, if it did (release: see
 * dram_writedown_done). */
static void dram_quota_left(struct dram *d, uint32_t g, uint64_t bytes)
{
	if (g)
		atomic_fetch_sub_explicit(&quota_group_at(d->quota, g)->leaving, bytes,
					  memory_order_release);
}

/* Free an item's chunks, extension and slot.  Caller holds the lock. */
static void item_free_locked(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	if (it->group)
		dram_quota_uncharge(d, it->group, (uint64_t)it->node.chunks * d->chunk);
	for (unsigned i = 0; i < it->run_count; i++) {
		struct arena_run r = item_run(it, i);
		arena_free(&s->arena, r.start, r.count);
	}
	if (item_has_ext(it))
		kvt_mem_free(d->mem, it->u.ext,
			     item_ext_len(it->run_count, it->part_count, ITEM_KEYLEN(it)));
	pool_put(s, it);
}

/* Refs: count the blocks held by anyone (stat dram.pinned_blocks).  False,
 * and no ref taken, at ITEM_REFS_MAX (2 M holders of one block): the
 * caller treats it as a miss. */
static inline bool item_ref_locked(struct dram_shard *s, struct dram_item *it)
{
	if (it->refs >= ITEM_REFS_MAX)
		return false;
	if (it->refs++ == 0)
		s->pinned++;
	return true;
}

/* Drop a ref; the last one frees a dead item.  Locked. */
static inline void item_unref_locked(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	if (--it->refs == 0) {
		s->pinned--;
		if (ITEM_STATE(it) == ITEM_DEAD) {
			s->dead_pending--;
			item_free_locked(d, s, it);
		}
	}
}

/*
 * The lower-copy gauges (dram.on_lower_*, dram.cold_*; doc/stats.md):
 * what a visible item with ITEM_ON_LOWER adds to them.  Every change of
 * an item's state, ITEM_ON_LOWER or cold is bracketed by a call with add
 * false before it and add true after, so the sums stay exact.  Locked.
 */
static void item_lower_gauge_locked(struct dram_shard *s, const struct dram_item *it, bool add)
{
	if (ITEM_STATE(it) != ITEM_VISIBLE || !(it->node.owner[0] & ITEM_ON_LOWER))
		return;
	if (add) {
		s->lower_blocks++;
		s->lower_bytes += it->value_len;
		if (it->cold) {
			s->cold_blocks++;
			s->cold_bytes += it->value_len;
		}
	} else {
		s->lower_blocks--;
		s->lower_bytes -= it->value_len;
		if (it->cold) {
			s->cold_blocks--;
			s->cold_bytes -= it->value_len;
		}
	}
}

/* ------------------------------------------------------------------------
 * Index
 */

static struct dram_item **index_slot(struct dram_shard *s, uint64_t h, uint32_t ns,
				     const struct kvt_key *key)
{
	struct dram_item **pp = &s->buckets[h & s->bucket_mask];
	for (; *pp; pp = &(*pp)->hnext) {
		struct dram_item *it = *pp;
		if (it->ns == ns && ITEM_KEYLEN(it) == key->len &&
		    memcmp(item_key(it), key->bytes, key->len) == 0)
			return pp;
	}
	return pp;
}

static inline uint64_t item_hash(const struct dram *d, const struct dram_item *it)
{
	return kvt_key_hash(d->hash_secret, it->ns, item_key(it), ITEM_KEYLEN(it));
}

uint64_t dram_key_hash(const struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	return dram_hash(d, ns, key);
}

/* Double the bucket array when the load passes 1.  Failure is harmless. */
static void index_grow_locked(struct dram *d, struct dram_shard *s)
{
	uint32_t old_n = s->bucket_mask + 1, n = old_n * 2;
	struct dram_item **nb;
	if (s->count <= old_n || n == 0)
		return;
	nb = kvt_mem_calloc(d->mem, n, sizeof(*nb));
	if (!nb)
		return;
	for (uint32_t i = 0; i < old_n; i++) {
		struct dram_item *it = s->buckets[i], *next;
		for (; it; it = next) {
			uint64_t h = item_hash(d, it);
			next = it->hnext;
			it->hnext = nb[h & (n - 1)];
			nb[h & (n - 1)] = it;
		}
	}
	kvt_mem_free(d->mem, s->buckets, (size_t)old_n * sizeof(*nb));
	/* Atomic stores: dram_lookup reads both without the lock, only to
	 * compute a prefetch address (see there). */
	__atomic_store_n(&s->buckets, nb, __ATOMIC_RELAXED);
	__atomic_store_n(&s->bucket_mask, n - 1, __ATOMIC_RELAXED);
}

static void index_unlink_locked(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	struct dram_item **pp = &s->buckets[item_hash(d, it) & s->bucket_mask];
	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == it) {
			*pp = it->hnext;
			it->hnext = NULL;
			s->count--;
			return;
		}
	}
}

/* ------------------------------------------------------------------------
 * Reuse hints (prefix policy)
 */

/* The class a prefix lookup gave this block, or 0 (none known). */
static unsigned dram_hint_class(struct dram *d, uint64_t h)
{
	uint64_t e;
	if (!d->hints)
		return 0;
	e = atomic_load_explicit(&d->hints[(h >> 8) & d->hint_mask], memory_order_relaxed);
	return e && ((e ^ h) & ~UINT64_C(0xff)) == 0 ? (unsigned)(e & 0xff) : 0;
}

/*
 * A chain is the run of gets and puts of one namespace that follows a
 * prefix lookup of it in a shard, at most as many as the lookup's keys:
 * the request reading its hit prefix and writing the rest, head first.
 * Other namespaces' operations in between do not end it (so one tenant's
 * activity never changes the order of another's blocks).  chain_prev is
 * the node the chain's previous get or put placed (the prefix policy puts
 * the next one just behind it), or NULL (the chain's first: at the head;
 * or no chain: LRU's order).  Locked.
 */
static inline struct evict_node *chain_prev(struct dram_shard *s, uint32_t ns)
{
	struct dram_item *last = (struct dram_item *)s->chain_last;
	if (s->chain_left == 0 || ns != s->chain_ns || !last)
		return NULL;
	/* Freed since (queue NONE), or its slot reused by another namespace. */
	if (last->node.queue == EVICT_Q_NONE || ITEM_STATE(last) != ITEM_VISIBLE || last->ns != ns)
		return NULL;
	return &last->node;
}

static inline void chain_note(struct dram_shard *s, uint32_t ns, struct evict_node *n)
{
	if (s->chain_left > 0 && ns == s->chain_ns) {
		s->chain_last = n;
		s->chain_left--;
	}
}

/* A prefix lookup of n keys of ns visited the shard: its gets and puts follow. */
static inline void chain_start(struct dram_shard *s, uint32_t ns, size_t n)
{
	s->chain_last = NULL;
	s->chain_ns = ns;
	s->chain_left = n;
}

/*
 * A prefix lookup over keys[0..n) found the first `hits` present.  For
 * prefix-learn: note a reuse class for each block it missed, which the put
 * that follows will read: 1 + 8 x log2(prompt blocks, at most 6) + 4 x
 * (prefix already cached) + blocks from the prompt's end (at most 3).
 * Restarts the chain of a one-shard tier (chain_start).
 */
void dram_note_prefix(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		      size_t hits)
{
	unsigned lb = 0, cls;
	/* With an SSD the store looks up one key at a time (dram_lookup with
	 * n = 1): start the chain for the whole prompt here (one shard: no
	 * hashing; with several, chains are dram_lookup's). */
	if (d->shard_count == 1 && n > 1 &&
	    (d->policy == DRAM_POLICY_PREFIX || d->policy == DRAM_POLICY_PREFIX_LEARN ||
	     d->policy == DRAM_POLICY_PREFIX_ADAPT)) {
		pthread_mutex_lock(&d->shards[0].lock);
		chain_start(&d->shards[0], ns, n);
		pthread_mutex_unlock(&d->shards[0].lock);
	}
	if (!d->hints || n == 0)
		return;
	for (size_t v = n; v > 1 && lb < 6; v >>= 1)
		lb++;
	for (size_t i = hits; i < n; i++) {
		uint64_t h = dram_hash(d, ns, &keys[i]);
		size_t from_end = n - 1 - i;
		cls = 1 + 8 * lb + (hits > 0 ? 4u : 0u) + (from_end < 3 ? (unsigned)from_end : 3u);
		atomic_store_explicit(&d->hints[(h >> 8) & d->hint_mask],
				      (h & ~UINT64_C(0xff)) | cls, memory_order_relaxed);
	}
}

/* ------------------------------------------------------------------------
 * Eviction
 */

static bool dram_busy(struct evict_node *n, void *ctx)
{
	struct dram_item *it = (struct dram_item *)n;
	KVT_UNUSED(ctx);
	return it->refs > 0 || ITEM_STATE(it) != ITEM_VISIBLE;
}

/* One more read of the item (saturating).  Locked. */
static inline void item_count_read(struct dram_item *it)
{
	if ((it->node.owner[0] & ITEM_READS_MASK) != ITEM_READS_MASK)
		it->node.owner[0] = (uint8_t)(it->node.owner[0] + (1u << ITEM_READS_SHIFT));
}

int dram_victim_parts(const struct dram_victim *v, uint64_t *lens, uint32_t *crcs,
		      unsigned max, bool *crcs_valid)
{
	struct dram_item *it = v->item;
	unsigned np = it->part_count;
	if (np > max)
		return KVT_ERANGE;
	*crcs_valid = (it->node.owner[0] & ITEM_CRC_VALID) != 0;
	for (unsigned p = 0; p < np; p++) {
		lens[p] = item_part_end(it, p) - item_part_start(it, p);
		crcs[p] = *crcs_valid ? item_part_crc(it, p) : 0;
	}
	return (int)np;
}

/* The item's bytes as an iovec array; s->scratch must hold run_count. */
static unsigned item_view(struct dram_shard *s, struct dram_item *it, struct iovec *v)
{
	uint64_t left = it->value_len;
	for (unsigned i = 0; i < it->run_count; i++) {
		struct arena_run r = item_run(it, i);
		uint64_t n = (uint64_t)r.count << s->arena.chunk_shift;
		v[i].iov_base = arena_ptr(&s->arena, r.start);
		v[i].iov_len = n < left ? n : left;
		left -= v[i].iov_len;
	}
	return it->run_count;
}

/* Per namespace (nsstat.h): a block leaves DRAM, evicted (unread: never
 * read since it entered) or deleted.  Locked. */
static void dram_nsstat_gone(struct dram *d, const struct dram_item *it)
{
	nsstat_sub(d->nsstat, it->ns, NSS_DRAM_BYTES, it->value_len);
	nsstat_sub(d->nsstat, it->ns, NSS_DRAM_BLOCKS, 1);
}

static void dram_nsstat_evicted(struct dram *d, const struct dram_item *it)
{
	struct nsstat_row *row = nsstat_row(d->nsstat, it->ns);
	if (!row)
		return;
	dram_nsstat_gone(d, it);
	atomic_fetch_add_explicit(&row->c[NSS_EVICTED], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&row->c[NSS_EVICTED_BYTES], it->value_len, memory_order_relaxed);
	if (!(it->node.owner[0] & ITEM_READS_MASK)) {
		atomic_fetch_add_explicit(&row->c[NSS_EVICTED_UNREAD], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&row->c[NSS_EVICTED_UNREAD_BYTES], it->value_len,
					  memory_order_relaxed);
	}
}

/* Unlink an unreferenced item and free it, telling the next tier.  Locked. */
static void evict_one_locked(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	bool from_small = it->node.queue == EVICT_Q_SMALL;
	uint64_t h = item_hash(d, it);
	if (it->node.queue != EVICT_Q_NONE)
		evict_ghost_note(&s->ev, &it->node, h, from_small);

	if (d->evict_fn && s->scratch) {
		struct kvt_key k;
		struct dram_victim v = {
			.ns = it->ns, .key = &k, .view = s->scratch, .len = it->value_len,
			.flags = dram_item_flags(it),
			.reads = (it->node.owner[0] & ITEM_READS_MASK) >> ITEM_READS_SHIFT,
			.item = it,
		};
		v.view_count = item_view(s, it, s->scratch);
		k.len = ITEM_KEYLEN(it);
		memcpy(k.bytes, item_key(it), k.len);
		d->evict_fn(d->evict_ctx, &v);
	}
	evict_remove(&s->ev, &it->node);
	item_lower_gauge_locked(s, it, false);
	index_unlink_locked(d, s, it);
	s->evictions++;
	s->evicted_bytes += it->value_len;
	s->value_bytes -= it->value_len;
	dram_nsstat_evicted(d, it);
	item_free_locked(d, s, it);
}

static void dram_admit_locked(struct dram *d, struct dram_shard *s, struct dram_item *it, int why);



/*
 * Victim write-down: an evicted block no lower tier holds goes down to it
 * (the SSD as DRAM's victim tier) unless the policy has evidence it will
 * not be reused.  It leaves the queues at once and keeps its chunks until
 * its write ends (dram_writedown_done frees it).  At most leaving_max bytes
 * (or one victim) leave at a time: past that the put waits for a write to end (the disk's
 * pace), up to dram.victim_wait_ms; after that, victims are shed in the
 * policy's order -- the least valuable first, not the newest -- and counted
 * (dram.victim_shed).  Returns true if the victim's
 * chunks are on their way out (or it was freed), false if the caller must
 * evict it now.  May drop and retake the lock (*waited is then set).
 */
/*
 * Is a victim worth its write-down?  The policy's verdict against it
 * (evict_worth_keeping) counts only while the tier below must drop older
 * blocks to take it (below_full, the SSD's log full): with free room there
 * every victim goes down.  A kvtierd member's handed-over, warmed-up or
 * repaired blocks are new to it and look never reused; the pod was
 * promised them (doc/policies.md, policy12).  Locked.
 */
static bool victim_worth_wd(const struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	if (evict_worth_keeping(&s->ev, &it->node))
		return true;
	return d->below_full && !d->below_full(d->below_ctx);
}

/*
 * The victims one put sends (until its room is free or the bound on bytes
 * in flight is reached) reach the tier below as one burst: plugged from the
 * first until the lock is dropped, so the SSD's writer does not take the
 * first while the rest are still coming.  Without the plug its batches
 * (format 3) and where reclamation's carries fall among the victims depended
 * on the two threads' timing: the same replay with --flush-each gave other
 * segment contents and other hits run to run (doc/policies.md "Twelfth
 * pass").  Unplugged before any wait and before the lock goes.  Locked.
 */
static void below_plug_locked(struct dram *d, struct dram_shard *s, bool on)
{
	if (!d->below_plug || s->plugged == on)
		return;
	s->plugged = on;
	d->below_plug(d->plug_ctx, on);
}

static bool victim_writedown_locked(struct dram *d, struct dram_shard *s, struct dram_item *it,
				    struct timespec *deadline, bool *waited)
{
	uint64_t bytes = (uint64_t)it->node.chunks * d->chunk;
	if (!d->victim_wd || !d->admit_fn || (it->node.owner[0] & (ITEM_ON_LOWER | ITEM_WD)))
		return false;
	if (!victim_worth_wd(d, s, it)) {
		s->victim_filtered++;
		return false;
	}
	if (s->leaving_bytes > 0 && s->leaving_bytes + bytes > s->leaving_max) {
		/* The disk is behind (one victim may always go, however
		 * large: a bound under one block would shed them all): wait for a write to end (it
		 * frees its block's chunks), up to the deadline; past it the caller sheds victims
		 * in the policy's order, least valuable first. */
		if (deadline->tv_sec == 0)
			*deadline = kvt_deadline(CLOCK_REALTIME, d->victim_wait_ns);
		s->victim_waits++;
		*waited = true;
		below_plug_locked(d, s, false);
		pthread_cond_timedwait(&s->room, &s->lock, deadline);
		return true; /* re-pick: the queues and free space may have changed */
	}
	/* The admission hook takes its ref under ITEM_WD; LEAVING says what
	 * to do when the write ends. */
	below_plug_locked(d, s, true);
	evict_ghost_note(&s->ev, &it->node, item_hash(d, it), it->node.queue == EVICT_Q_SMALL);
	evict_remove(&s->ev, &it->node);
	it->node.owner[0] |= ITEM_LEAVING;
	dram_admit_locked(d, s, it, DRAM_ADMIT_EVICT);
	if (!(it->node.owner[0] & ITEM_WD)) { /* declined (shed by the SSD, or its quota) */
		it->node.owner[0] &= (uint8_t)~ITEM_LEAVING;
		s->victim_shed++;
		return false; /* the caller evicts it now */
	}
	s->leaving_bytes += bytes;
	if (it->group && d->quota)
		atomic_fetch_add_explicit(&quota_group_at(d->quota, it->group)->leaving, bytes,
					  memory_order_relaxed);
	s->victim_wd++;
	return true;
}

static bool deadline_passed(const struct timespec *dl)
{
	struct timespec now;
	if (dl->tv_sec == 0)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > dl->tv_sec || (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec);
}

/* Evict a victim now, counted as shed if it was worth a write-down the
 * disk could not take before the deadline.  Locked. */
static void victim_evict_locked(struct dram *d, struct dram_shard *s, struct dram_item *it,
				const struct timespec *deadline)
{
	if (deadline_passed(deadline) && d->victim_wd && d->admit_fn &&
	    !(it->node.owner[0] & (ITEM_ON_LOWER | ITEM_WD)) && victim_worth_wd(d, s, it))
		s->victim_shed++;
	evict_one_locked(d, s, it);
}

/*
 * Chunks for a value of `chunks` chunks: take free space, evicting by
 * policy until there is enough in at most DRAM_MAX_RUNS runs.  *waited is
 * set if the lock was dropped meanwhile (the caller re-checks its key).
 */
static int dram_alloc_locked(struct dram *d, struct dram_shard *s, uint32_t chunks,
			     struct arena_run *runs, uint32_t *run_count, bool *waited)
{
	struct timespec deadline = { 0, 0 };
	for (;;) {
		struct evict_node *victim;
		struct dram_item *it;
		if (arena_alloc(&s->arena, chunks, runs, DRAM_MAX_RUNS, run_count) == 0) {
			below_plug_locked(d, s, false);
			return 0;
		}
		victim = evict_victim(&s->ev, dram_busy, NULL);
		if (!victim) {
			below_plug_locked(d, s, false);
			/* Blocks on their way down will free their chunks. */
			if (s->leaving_bytes > 0 && !deadline_passed(&deadline)) {
				if (deadline.tv_sec == 0)
					deadline = kvt_deadline(CLOCK_REALTIME, d->victim_wait_ns);
				*waited = true;
				pthread_cond_timedwait(&s->room, &s->lock, &deadline);
				continue;
			}
			return KVT_EFULL;
		}
		it = (struct dram_item *)victim;
		if (!deadline_passed(&deadline) &&
		    victim_writedown_locked(d, s, it, &deadline, waited))
			continue;
		victim_evict_locked(d, s, it, &deadline);
	}
}

/* ------------------------------------------------------------------------
 * Quota eviction
 */

/*
 * prefix-adapt's mode is per quota group with a DRAM limit (evict.h
 * evict_group_fn): the group the item was charged to, and its limit's
 * share of one shard in chunks (a group's blocks spread over the shards
 * by hash, and its quota evicts in the put's shard first).  A block of no
 * group, or of a group without a DRAM limit, follows the shard's mode.
 * Locked (the shard's).
 */
static uint32_t dram_mode_group(const struct evict_node *n, void *ctx, uint64_t *cap_chunks)
{
	const struct dram_item *it = (const struct dram_item *)n;
	struct dram *d = ctx;
	struct quota_group *qg;
	uint64_t limit, per, max = d->shards[0].arena.chunk_count;

	if (!it->group || !d->quota)
		return 0;
	qg = quota_group_at(d->quota, it->group);
	limit = qg ? atomic_load_explicit(&qg->limit[QUOTA_DRAM], memory_order_relaxed) : 0;
	if (limit == 0)
		return 0;
	per = (limit / d->chunk + d->shard_count - 1) / d->shard_count;
	*cap_chunks = per < max ? per : max;
	return it->group;
}

/* Evictable and charged to the group *ctx? */
static bool dram_quota_pick(struct evict_node *n, void *ctx)
{
	struct dram_item *it = (struct dram_item *)n;
	return it->group == *(const uint32_t *)ctx && !dram_busy(n, NULL);
}

/*
 * Charge `bytes` more to quota group g, evicting g's own blocks first if
 * that would pass its DRAM limit: the oldest evictable one of g in shard
 * `si` (the put's shard), then in the next shards in turn, until the
 * charge fits.  Never another group's block; one shard lock at a time,
 * taken and released here (the caller holds none).  Charging first and
 * checking after keeps racing puts of one group from both squeezing in.
 *
 * A block the quota evicts goes down to the victim tier as any victim
 * does (victim_writedown_locked: the policy's filter, the bound on bytes
 * in flight, the wait for the disk, then shedding).  Until 2026-12-05 a
 * quota eviction was a forget: with ssd.admission=victim (the default) a
 * tenant whose dram= quota partitions kvtierd's DRAM never reached the
 * SSD (16 of its blocks pushed out of its quota, 0 back; test_quota 5).
 * While its write is in flight the block stays charged (its chunks are
 * still DRAM's), but the group's limit is checked without it
 * (qg->leaving), or each put would push out every block in flight.
 *
 * Returns 0 (charged), or KVT_EFULL (nothing of g left to evict, or the
 * block alone is over the limit; nothing charged).
 */
static int dram_quota_charge(struct dram *d, uint32_t g, uint64_t bytes, uint32_t si)
{
	struct quota_group *qg = quota_group_at(d->quota, g);
	uint32_t empty = 0; /* shards in a row with nothing of g to evict */
	struct timespec deadline = { 0, 0 };

	for (;;) {
		uint64_t limit = atomic_load_explicit(&qg->limit[QUOTA_DRAM], memory_order_relaxed);
		uint64_t leaving = atomic_load_explicit(&qg->leaving, memory_order_relaxed);
		uint64_t used = atomic_fetch_add(&qg->used[QUOTA_DRAM], bytes);
		struct dram_shard *s;
		struct evict_node *victim;
		bool waited = false;

		if (limit == 0 || used + bytes <= limit + leaving)
			return 0;
		atomic_fetch_sub(&qg->used[QUOTA_DRAM], bytes);
		if (bytes > limit)
			break;
		s = &d->shards[si];
		pthread_mutex_lock(&s->lock);
		victim = evict_oldest_match(&s->ev, dram_quota_pick, &g);
		if (victim) {
			/* On its way down, or evicted now; or the disk was
			 * waited for (nothing evicted): look again. */
			struct dram_item *it = (struct dram_item *)victim;
			if (deadline_passed(&deadline) ||
			    !victim_writedown_locked(d, s, it, &deadline, &waited))
				victim_evict_locked(d, s, it, &deadline);
			if (!waited)
				s->quota_evictions++;
		}
		below_plug_locked(d, s, false);
		pthread_mutex_unlock(&s->lock);
		if (victim) {
			if (!waited)
				atomic_fetch_add_explicit(&qg->evicted[QUOTA_DRAM], 1,
							  memory_order_relaxed);
			empty = 0;
			continue;
		}
		if (++empty >= d->shard_count)
			break;
		si = (si + 1) % d->shard_count;
	}
	atomic_fetch_add_explicit(&qg->full, 1, memory_order_relaxed);
	return KVT_EFULL;
}

void dram_set_quota(struct dram *d, struct quota *q)
{
	d->quota = q;
}

/* ------------------------------------------------------------------------
 * Copies between iovec arrays and an item's runs
 */

/*
 * Copy len bytes starting at value offset `off` of the item to (dir 0) or
 * from (dir 1) the iovec array, which starts at its own offset 0.
 */
static void item_copy(struct dram_shard *s, struct dram_item *it, uint64_t off, uint64_t len,
		      const struct iovec *iov, unsigned iov_count, int dir)
{
	unsigned ri = 0, vi = 0;
	uint64_t run_off = off, vo = 0;
	uint32_t shift = s->arena.chunk_shift;

	/* Find the run holding `off`. */
	for (; ri < it->run_count; ri++) {
		uint64_t rl = (uint64_t)item_run(it, ri).count << shift;
		if (run_off < rl)
			break;
		run_off -= rl;
	}
	while (len > 0 && ri < it->run_count && vi < iov_count) {
		struct arena_run r = item_run(it, ri);
		uint64_t rl = ((uint64_t)r.count << shift) - run_off;
		uint64_t vl = iov[vi].iov_len - vo;
		uint64_t n = rl < vl ? rl : vl;
		char *mem = arena_ptr(&s->arena, r.start) + run_off;
		char *buf = (char *)iov[vi].iov_base + vo;
		if (n > len)
			n = len;
		if (dir == 0)
			memcpy(buf, mem, n);
		else
			memcpy(mem, buf, n);
		len -= n;
		run_off += n;
		vo += n;
		if (run_off == ((uint64_t)r.count << shift)) {
			ri++;
			run_off = 0;
		}
		if (vo == iov[vi].iov_len) {
			vi++;
			vo = 0;
		}
	}
}

/* CRC32C of value bytes [off, off+len) read from the item's runs. */
static uint32_t item_crc(struct dram_shard *s, struct dram_item *it, uint64_t off, uint64_t len)
{
	uint32_t crc = 0;
	uint32_t shift = s->arena.chunk_shift;
	for (unsigned ri = 0; ri < it->run_count && len > 0; ri++) {
		struct arena_run r = item_run(it, ri);
		uint64_t rl = (uint64_t)r.count << shift, n;
		if (off >= rl) {
			off -= rl;
			continue;
		}
		n = rl - off < len ? rl - off : len;
		crc = kvt_crc32c(crc, arena_ptr(&s->arena, r.start) + off, n);
		len -= n;
		off = 0;
	}
	return crc;
}

/* CRC32C of bytes [off, off+len) of an iovec array. */
static uint32_t iov_crc(const struct iovec *iov, unsigned n, uint64_t off, uint64_t len)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < n && len > 0; i++) {
		uint64_t l = iov[i].iov_len, k;
		if (off >= l) {
			off -= l;
			continue;
		}
		k = l - off < len ? l - off : len;
		crc = kvt_crc32c(crc, (const char *)iov[i].iov_base + off, k);
		len -= k;
		off = 0;
	}
	return crc;
}

/*
 * Make the item's part CRCs valid (computing them from its bytes if they
 * were deferred).  The caller holds a ref, not the lock.
 */
static void dram_item_crcs(struct dram *d, struct dram_item *it)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	uint32_t small[16], *crcs = small;
	unsigned np = it->part_count;
	bool valid;

	pthread_mutex_lock(&s->lock);
	valid = it->node.owner[0] & ITEM_CRC_VALID;
	pthread_mutex_unlock(&s->lock);
	if (valid)
		return;
	/* Bytes are immutable while we hold a ref; CRCs are computed unlocked. */
	if (np > KVT_ARRAY_LEN(small)) {
		/* Rare: many parts.  Compute and store one at a time under the lock. */
		for (unsigned p = 0; p < np; p++) {
			uint64_t a = item_part_start(it, p), b = item_part_end(it, p);
			uint32_t c = item_crc(s, it, a, b - a);
			pthread_mutex_lock(&s->lock);
			item_set_part_crc(it, p, c);
			pthread_mutex_unlock(&s->lock);
		}
	} else {
		for (unsigned p = 0; p < np; p++) {
			uint64_t a = item_part_start(it, p), b = item_part_end(it, p);
			crcs[p] = item_crc(s, it, a, b - a);
		}
	}
	pthread_mutex_lock(&s->lock);
	if (np <= KVT_ARRAY_LEN(small))
		for (unsigned p = 0; p < np; p++)
			item_set_part_crc(it, p, crcs[p]);
	it->node.owner[0] |= ITEM_CRC_VALID;
	pthread_mutex_unlock(&s->lock);
}

int dram_item_verify(struct dram *d, struct dram_item *it, const uint32_t *crcs)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	for (unsigned p = 0; p < it->part_count; p++) {
		uint64_t a = item_part_start(it, p), b = item_part_end(it, p);
		if (item_crc(s, it, a, b - a) != crcs[p])
			return KVT_ECORRUPT;
	}
	return KVT_OK;
}

/* Copy len bytes from one iovec array to another. */
static void iov_copy(const struct iovec *dst, unsigned nd, const struct iovec *src, unsigned ns,
		     uint64_t len)
{
	unsigned di = 0, si = 0;
	uint64_t doff = 0, soff = 0;
	while (len > 0 && di < nd && si < ns) {
		uint64_t n = dst[di].iov_len - doff;
		if (n > src[si].iov_len - soff)
			n = src[si].iov_len - soff;
		if (n > len)
			n = len;
		memcpy((char *)dst[di].iov_base + doff, (const char *)src[si].iov_base + soff, n);
		len -= n;
		doff += n;
		soff += n;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].iov_len) {
			si++;
			soff = 0;
		}
	}
}

/*
 * The same, and the CRC32C of each source part into crcs[]: each piece is
 * checksummed right after it was copied, while it is still in cache, so a
 * put reads its source once, not twice.  A value of DRAM_STREAM_MIN bytes
 * or more is written with streaming stores (crc_copy): a put's block is
 * read, if ever, much later, and such a copy costs less CPU per byte.
 */
#define DRAM_STREAM_MIN (256u << 10)
static void iov_copy_crc(const struct iovec *dst, unsigned nd, const struct iovec *src,
			 unsigned ns, uint64_t len, uint32_t *crcs)
{
	bool stream = len >= DRAM_STREAM_MIN;
	unsigned di = 0;
	uint64_t doff = 0;
	for (unsigned si = 0; si < ns; si++) {
		const char *sp = src[si].iov_base;
		uint64_t left = src[si].iov_len;
		uint32_t crc = 0;
		while (left > 0 && di < nd) {
			uint64_t n = dst[di].iov_len - doff;
			if (n > left)
				n = left;
			crc = crc_copy(crc, (char *)dst[di].iov_base + doff, sp, n, stream);
			sp += n;
			left -= n;
			doff += n;
			if (doff == dst[di].iov_len) {
				di++;
				doff = 0;
			}
		}
		crcs[si] = crc;
	}
}

/* ------------------------------------------------------------------------
 * Write-down admission
 *
 * When a block not yet in a lower tier is put or hit, the admission hook
 * (the SSD tier's) decides whether to write it down.  If it takes the
 * block, the block carries ITEM_WD and a ref until dram_writedown_done, so
 * it is neither evicted nor freed while its bytes are being written.
 */

static void dram_admit_locked(struct dram *d, struct dram_shard *s, struct dram_item *it, int why)
{
	if (!d->admit_fn || (it->node.owner[0] & (ITEM_ON_LOWER | ITEM_WD)) ||
	    !item_ref_locked(s, it))
		return;
	it->node.owner[0] |= ITEM_WD;
	if (d->admit_fn(d->admit_ctx, it, it->ns, why)) {
		s->admitted++;
		return;
	}
	it->node.owner[0] &= (uint8_t)~ITEM_WD;
	item_unref_locked(d, s, it);
}

/*
 * Graceful stop (warm restart): offer the blocks no lower tier holds to the
 * admission hook as DRAM_ADMIT_CLOSE, most valuable first by the policy's
 * own order (M from its head, then P/S from its head), until *budget bytes
 * were taken or the hook refuses many in a row (its queue is full: the
 * caller flushes and calls again).  Returns the bytes taken this pass.
 */
uint64_t dram_writedown_pass(struct dram *d, uint64_t *budget, uint64_t pass_max)
{
	uint64_t taken = 0;
	if (!d->admit_fn)
		return 0;
	for (uint32_t i = 0; i < d->shard_count && *budget > 0 && taken < pass_max; i++) {
		struct dram_shard *s = &d->shards[i];
		struct evict_list *lists[2] = { &s->ev.main, &s->ev.small };
		unsigned refused = 0;
		pthread_mutex_lock(&s->lock);
		for (unsigned l = 0; l < 2 && refused < 64; l++) {
			struct evict_node *head = &lists[l]->head;
			for (struct evict_node *n = head->next; n != head && refused < 64;
			     n = n->next) {
				struct dram_item *it = (struct dram_item *)n;
				if (ITEM_STATE(it) != ITEM_VISIBLE ||
				    (it->node.owner[0] & (ITEM_ON_LOWER | ITEM_WD)))
					continue;
				/* On disk: the value in 4 KiB pages and a header page. */
				uint64_t cost = ((it->value_len + 4095) & ~UINT64_C(4095)) + 4096;
				if (cost > *budget || taken >= pass_max)
					break;
				dram_admit_locked(d, s, it, DRAM_ADMIT_CLOSE);
				if (it->node.owner[0] & ITEM_WD) {
					taken += cost;
					*budget -= cost;
					refused = 0;
				} else {
					refused++;
				}
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	return taken;
}

/* A tier below keeps what DRAM evicts (the SSD's admission hook, in any
 * mode) or serves what DRAM misses (a shared or remote tier): prefix-adapt
 * stays in LRU mode -- its simulations model DRAM alone (doc/policies.md,
 * "prefix-adapt over lower tiers"). */
void dram_pin_lru(struct dram *d, bool below)
{
	for (uint32_t i = 0; below && i < d->shard_count; i++) {
		pthread_mutex_lock(&d->shards[i].lock);
		evict_pin_lru(&d->shards[i].ev);
		pthread_mutex_unlock(&d->shards[i].lock);
	}
}

/* The SSD as DRAM's victim tier, of lower_bytes: prefix-adapt simulates
 * DRAM + SSD and lets its evidence decide the write-down (evict.c
 * evict_adapt_below, doc/policies.md) while full(ctx) says the SSD has no
 * free room; after dram_set_admit_hook. */
void dram_below_room(struct dram *d, bool (*full)(void *ctx), void *ctx)
{
	d->below_full = full;
	d->below_ctx = ctx;
}

void dram_below_plug(struct dram *d, void (*plug)(void *ctx, bool on), void *ctx)
{
	d->below_plug = plug;
	d->plug_ctx = ctx;
}

void dram_adapt_below(struct dram *d, uint64_t lower_bytes)
{
	uint64_t per = lower_bytes / d->chunk / (d->shard_count ? d->shard_count : 1);
	for (uint32_t i = 0; i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		pthread_mutex_lock(&s->lock);
		evict_adapt_below(&s->ev, s->arena.chunk_count, s->arena.chunk_count + per);
		pthread_mutex_unlock(&s->lock);
	}
}

void dram_test_adapt_mode(struct dram *d, unsigned mode)
{
	for (uint32_t i = 0; i < d->shard_count; i++) {
		pthread_mutex_lock(&d->shards[i].lock);
		evict_adapt_force(&d->shards[i].ev, mode);
		pthread_mutex_unlock(&d->shards[i].lock);
	}
}

bool dram_adapts_below(struct dram *d)
{
	return d->shard_count > 0 && d->shards[0].ev.adapt_below;
}

void dram_set_admit_hook(struct dram *d, dram_admit_fn fn, void *ctx, bool victim)
{
	d->admit_fn = fn;
	d->admit_ctx = ctx;
	d->victim_wd = victim;
	dram_pin_lru(d, fn != NULL);
}

void dram_set_absent_hook(struct dram *d, dram_absent_fn fn, void *ctx)
{
	d->absent_fn = fn;
	d->absent_ctx = ctx;
}

void dram_writedown_done(struct dram *d, struct dram_item *it, bool stored)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	pthread_mutex_lock(&s->lock);
	it->node.owner[0] &= (uint8_t)~ITEM_WD;
	if (stored && !(it->node.owner[0] & ITEM_ON_LOWER)) {
		it->node.owner[0] |= ITEM_ON_LOWER;
		item_lower_gauge_locked(s, it, true);
	}
	if (it->node.owner[0] & ITEM_LEAVING) {
		/* An evicted block's write ended: its chunks go now, unless a
		 * reader holds it (then it goes back in the queue, clean).  Its
		 * group's leaving bytes go after its charge (release): a
		 * reader of both (quota_group_stats: leaving, acquire, then
		 * used) never sees it gone from leaving and still charged --
		 * a tenant's STATS past its dram= by the block (test_kvtierd
		 * quota, TSan, CI 2026-12-06). */
		uint64_t bytes = (uint64_t)it->node.chunks * d->chunk;
		uint32_t g = d->quota ? it->group : 0;
		it->node.owner[0] &= (uint8_t)~ITEM_LEAVING;
		s->leaving_bytes -= bytes;
		pthread_cond_broadcast(&s->room);
		if (ITEM_STATE(it) == ITEM_VISIBLE) {
			if (it->refs == 1) {
				it->refs = 0;
				s->pinned--;
				evict_one_locked(d, s, it);
				dram_quota_left(d, g, bytes);
				pthread_mutex_unlock(&s->lock);
				return;
			}
			evict_insert(&s->ev, &it->node, item_hash(d, it), EVICT_CLASSES);
		}
		dram_quota_left(d, g, bytes);
	}
	item_unref_locked(d, s, it);
	pthread_mutex_unlock(&s->lock);
}

void dram_item_key(struct dram_item *it, uint32_t *ns, struct kvt_key *key)
{
	*ns = it->ns;
	key->len = ITEM_KEYLEN(it);
	memset(key->bytes, 0, sizeof(key->bytes));
	memcpy(key->bytes, item_key(it), key->len);
}

int dram_item_meta(struct dram *d, struct dram_item *it, uint32_t *ns, struct kvt_key *key,
		   uint64_t *part_lens, uint32_t *crcs, unsigned max_parts)
{
	unsigned np = it->part_count;
	if (np > max_parts)
		return KVT_ERANGE;
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	dram_item_crcs(d, it);
	*ns = it->ns;
	key->len = ITEM_KEYLEN(it);
	memset(key->bytes, 0, sizeof(key->bytes));
	memcpy(key->bytes, item_key(it), key->len);
	pthread_mutex_lock(&s->lock); /* CRCs are written under the lock */
	for (unsigned p = 0; p < np; p++) {
		part_lens[p] = item_part_end(it, p) - item_part_start(it, p);
		crcs[p] = item_part_crc(it, p);
	}
	pthread_mutex_unlock(&s->lock);
	return (int)np;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

int dram_open(struct dram **out, const struct dram_config *cfg, struct kvt_mem *mem,
	      const struct kvt_logger *log)
{
	struct dram *d;
	uint32_t n = cfg->shards;
	uint64_t per, secret;
	uint64_t t0;
	char pf[64] = "";
	int ret = 0;
	uint64_t pf_said = 0; /* prefault_ns at the last progress line */

	if (cfg->chunk < 4096 || (cfg->chunk & (cfg->chunk - 1)) || cfg->capacity < cfg->chunk)
		return KVT_EOPTVAL;
	if (n == 0) {
		uint64_t want = cfg->capacity / DRAM_DEFAULT_SHARD;
		n = want < 1 ? 1 : want > 16 ? 16 : (uint32_t)want;
	}
	while (n > 1 && cfg->capacity / n < cfg->chunk)
		n--;
	per = (cfg->capacity / n) & ~((uint64_t)cfg->chunk - 1);
	if ((per >> __builtin_ctz(cfg->chunk)) > UINT32_MAX)
		return KVT_EOPTVAL;

	/* The secret also picks which keys prefix-adapt's simulations sample
	 * and where the ghosts keep them, so a replay that must give the same
	 * hit ratio every run fixes it (dram.hash_seed, doc/policies.md). */
	if (cfg->hash_seed != 0) {
		secret = cfg->hash_seed;
	} else {
		int e = kvt_secret_draw(&secret);	/* EINTR retried */

		if (e)
			return e;
	}
	d = kvt_mem_calloc(mem, 1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->mem = mem;
	d->hash_secret = secret;
	pthread_mutex_init(&d->pool_lock, NULL);
	d->log = log;
	d->chunk = cfg->chunk;
	d->policy = cfg->policy;
	d->victim_wait_ns = (uint64_t)cfg->victim_wait_ms * 1000000u;
	d->shards = kvt_mem_calloc(mem, n, sizeof(struct dram_shard));
	if (!d->shards) {
		kvt_mem_free(mem, d, sizeof(*d));
		return -ENOMEM;
	}
	if (cfg->policy == DRAM_POLICY_PREFIX_LEARN) {
		uint64_t want = cfg->capacity / cfg->chunk, hn = 4096;
		while (hn < want && hn < 65536)
			hn <<= 1;
		d->hints = kvt_mem_calloc(mem, hn, sizeof(*d->hints));
		if (!d->hints) {
			kvt_mem_free(mem, d->shards, (size_t)n * sizeof(struct dram_shard));
			kvt_mem_free(mem, d, sizeof(*d));
			return -ENOMEM;
		}
		d->hint_mask = (uint32_t)(hn - 1);
	}
	/* Pre-faulting takes about a second per 2-4 GiB, before anything else
	 * is said: a large one is announced, and its progress said every
	 * few seconds (a shard at a time), or a start looks hung. */
	if (cfg->prefault && per * n >= DRAM_PREFAULT_SAY)
		kvt_logf(log, KVT_LOG_INFO,
			 "dram: pre-faulting %llu MiB in %u shards (dram.prefault=off skips it: "
			 "the pages are then faulted in by the first puts)",
			 (unsigned long long)(per * n >> 20), n);
	for (uint32_t i = 0; i < n; i++) {
		struct dram_shard *s = &d->shards[i];
		pthread_mutex_init(&s->lock, NULL);
		pthread_cond_init(&s->room, NULL);
		/* A 32nd of the shard may be on its way down, or 1 MiB, but
		 * never more than a quarter (the SSD's write-down queue is
		 * capped at a quarter of DRAM too: store.c); and always one
		 * victim (victim_writedown_locked).  Victims in flight keep
		 * their chunks and a put sends them ahead of its need until
		 * this bound, so once their writes end DRAM holds up to this
		 * much free room: an eighth (16 MiB at least) cost 1-4 % of
		 * the DRAM + SSD hit ratio against a 32nd (doc/policies.md,
		 * "Victims in flight"). */
		s->leaving_max = per / 32 > DRAM_LEAVING_MIN ? per / 32 : DRAM_LEAVING_MIN;
		if (s->leaving_max > per / 4)
			s->leaving_max = per / 4;
		d->shard_count = i + 1;
		t0 = kvt_now_ns();
		ret = arena_init(&s->arena, mem, per, cfg->chunk, cfg->hugepages, cfg->prefault);
		if (ret < 0)
			goto fail;
		if (s->arena.prefaulted) {
			d->prefault_bytes += s->arena.map_len;
			d->prefault_ns += kvt_now_ns() - t0;
			if (i + 1 < n && d->prefault_ns - pf_said >= DRAM_PREFAULT_EVERY_NS) {
				pf_said = d->prefault_ns;
				kvt_logf(log, KVT_LOG_INFO, "dram: pre-faulted %llu of %llu MiB",
					 (unsigned long long)(d->prefault_bytes >> 20),
					 (unsigned long long)(per * n >> 20));
			}
		}
		ret = evict_init(&s->ev, mem, cfg->policy, s->arena.chunk_count);
		if (ret < 0)
			goto fail;
		evict_set_group_fn(&s->ev, dram_mode_group, d);
		s->buckets = kvt_mem_calloc(mem, 64, sizeof(*s->buckets));
		if (!s->buckets) {
			ret = -ENOMEM;
			goto fail;
		}
		s->bucket_mask = 63;
	}
	d->capacity = per * n;
	d->max_value = per;
	if (d->prefault_bytes)
		snprintf(pf, sizeof(pf), " (pre-faulted %llu MiB in %llu ms)",
			 (unsigned long long)(d->prefault_bytes >> 20),
			 (unsigned long long)(d->prefault_ns / 1000000u));
	kvt_logf(log, KVT_LOG_INFO,
		 "dram: %llu MiB in %u shards of %llu MiB, %u KiB chunks, pages %s%s, policy %s",
		 (unsigned long long)(d->capacity >> 20), n, (unsigned long long)(per >> 20),
		 cfg->chunk >> 10, arena_page_mode_name(d->shards[0].arena.page_mode), pf,
		 evict_policy_name(cfg->policy));
	*out = d;
	return 0;
fail:
	dram_close(d);
	return ret;
}

void dram_close(struct dram *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		if (s->buckets) {
			/* Free every item's extension; the pool goes block by block. */
			for (uint32_t b = 0; b <= s->bucket_mask; b++)
				for (struct dram_item *it = s->buckets[b]; it; it = it->hnext)
					if (item_has_ext(it))
						kvt_mem_free(d->mem, it->u.ext,
							     item_ext_len(it->run_count,
									  it->part_count,
									  ITEM_KEYLEN(it)));
			kvt_mem_free(d->mem, s->buckets,
				     ((size_t)s->bucket_mask + 1) * sizeof(*s->buckets));
		}
		if (s->scratch)
			kvt_mem_free(d->mem, s->scratch, s->scratch_cap * sizeof(struct iovec));
		evict_fini(&s->ev);
		arena_fini(&s->arena);
		pthread_cond_destroy(&s->room);
		pthread_mutex_destroy(&s->lock);
	}
	if (d->hints)
		kvt_mem_free(d->mem, d->hints, ((size_t)d->hint_mask + 1) * sizeof(*d->hints));
	while (d->blocks) {
		struct pool_block *b = d->blocks;
		d->blocks = b->next;
		kvt_mem_free(d->mem, b, b->len);
	}
	pthread_mutex_destroy(&d->pool_lock);
	kvt_mem_free(d->mem, d->shards, (size_t)d->shard_count * sizeof(struct dram_shard));
	kvt_mem_free(d->mem, d, sizeof(*d));
}

void dram_set_nsstat(struct dram *d, const struct nsstat *t)
{
	d->nsstat = t && t->rows ? t : NULL;
}

void dram_set_evict_hook(struct dram *d, dram_evict_fn fn, void *ctx)
{
	/* Before any put: each shard needs a view array for the hook. */
	for (uint32_t i = 0; fn && i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		if (!s->scratch) {
			s->scratch = kvt_mem_calloc(d->mem, DRAM_MAX_RUNS, sizeof(struct iovec));
			if (!s->scratch)
				return;
			s->scratch_cap = DRAM_MAX_RUNS;
		}
	}
	d->evict_fn = fn;
	d->evict_ctx = ctx;
}

/* ------------------------------------------------------------------------
 * Operations
 */

/* Turns of a put's ask below without waiting for the tier's locks before
 * it waits with DRAM's shard lock held (reserve). */
#define ABSENT_TURNS 4

/*
 * Steps 1-2 of a put: a WRITING item with chunks for the value, in the index
 * but invisible, holding the caller's ref.  part_lens gives each part's
 * length (or NULL with part_count 1).  The last chunk's bytes past the
 * value, up to the next 4 KiB boundary, are zeroed now, so a write-down with
 * O_DIRECT never carries recycled memory to disk.  put: a client's put,
 * which asks the tiers below under the lock (dram_set_absent_hook).
 */
static int reserve(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
		   const uint64_t *part_lens, unsigned part_count, bool put,
		   struct dram_item **item, struct iovec *view, unsigned *view_count)
{
	struct arena_run runs[DRAM_MAX_RUNS];
	uint32_t run_count = 0, chunks;
	uint64_t h;
	struct dram_shard *s;
	struct dram_item *it;
	size_t ext_len;
	uint32_t group;
	int ret;

	if (len > d->max_value)
		return KVT_ETOOBIG;
	chunks = (uint32_t)((len + d->chunk - 1) / d->chunk);
	h = dram_hash(d, ns, key);
	s = dram_shard_of(d, h);
	group = d->quota ? quota_group_of(d->quota, ns) : 0;

	if (KVT_UNLIKELY(group)) {
		/* Present already: no reason to evict the group's blocks. */
		pthread_mutex_lock(&s->lock);
		it = *index_slot(s, h, ns, key);
		pthread_mutex_unlock(&s->lock);
		if (!it) {
			ret = dram_quota_charge(d, group, (uint64_t)chunks * d->chunk,
						(uint32_t)(s - d->shards));
			if (ret < 0)
				return ret;
		} else {
			group = 0; /* not charged (it may vanish meanwhile: then a
				    * block escapes its quota once, never charged) */
		}
	}
	/* A put's ask below, under this lock until the item is in the index
	 * (dram_set_absent_hook): a block moving down is in one of the two.
	 * Without waiting for the tier's locks: one it cannot have at once
	 * (-EAGAIN: an index sweep walking its shard) is waited for with
	 * this lock dropped -- the shard's gets never wait behind the tier's
	 * walks (review44g) -- and the asks start over; after a few turns,
	 * with the lock held. */
	for (unsigned turn = 0;; turn++) {
		pthread_mutex_lock(&s->lock);
		if (*index_slot(s, h, ns, key)) {
			s->put_exists++;
			pthread_mutex_unlock(&s->lock);
			ret = KVT_EXISTS;
			goto fail_uncharge;
		}
		if (!put || !d->absent_fn)
			break;
		ret = d->absent_fn(d->absent_ctx, ns, key, turn + 1 > ABSENT_TURNS);
		if (ret == KVT_OK)
			break;
		if (ret != -EAGAIN)
			goto fail_unlock;
		pthread_mutex_unlock(&s->lock);
		if ((ret = d->absent_fn(d->absent_ctx, ns, key, true)) != KVT_OK)
			goto fail_uncharge;
	}
	it = pool_get(d, s);
	if (!it) {
		ret = -ENOMEM;
		goto fail_unlock;
	}
	bool waited = false;
	ret = dram_alloc_locked(d, s, chunks, runs, &run_count, &waited);
	if (ret < 0) {
		pool_put(s, it);
		if (ret == KVT_EFULL)
			s->full_errors++;
		goto fail_unlock;
	}
	/* The lock was dropped: another put may have won, in DRAM or (gone
	 * down since) below. */
	if (waited && (*index_slot(s, h, ns, key) ||
		       (put && d->absent_fn &&
			(ret = d->absent_fn(d->absent_ctx, ns, key, true)) != KVT_OK))) {
		for (uint32_t i = 0; i < run_count; i++)
			arena_free(&s->arena, runs[i].start, runs[i].count);
		pool_put(s, it);
		if (*index_slot(s, h, ns, key)) {
			s->put_exists++;
			ret = KVT_EXISTS;
		}
		goto fail_unlock;
	}
	it->run_count = (uint16_t)run_count;
	it->part_count = (uint16_t)part_count;
	ext_len = item_ext_len(it->run_count, it->part_count, key->len);
	it->node.owner[0] = ITEM_WRITING;
	it->node.owner[1] = (uint8_t)(key->len - 1);
	it->node.chunks = chunks;
	if (ext_len) {
		struct dram_part *pt;
		uint64_t end = 0;
		it->u.ext = kvt_mem_alloc(d->mem, ext_len);
		if (!it->u.ext) {
			for (uint32_t i = 0; i < run_count; i++)
				arena_free(&s->arena, runs[i].start, runs[i].count);
			pool_put(s, it);
			ret = -ENOMEM;
			goto fail_unlock;
		}
		it->node.owner[1] |= ITEM_EXT;
		memcpy(item_runs(it), runs, run_count * sizeof(runs[0]));
		pt = item_parts(it);
		for (unsigned i = 0; i < part_count; i++) {
			end += part_count > 1 ? part_lens[i] : len;
			pt[i].end = end;
			pt[i].crc = 0;
			pt[i].pad = 0;
		}
	} else {
		it->u.in.run0 = runs[0].start;
		it->u.in.crc0 = 0;
	}
	memcpy(key->len <= DRAM_KEY_INLINE ? it->key : (uint8_t *)item_key(it), key->bytes,
	       key->len);
	it->ns = ns;
	it->group = group;
	it->value_len = len;
	it->refs = 0;
	it->cold = 0;
	it->promoted = 0;
	(void)item_ref_locked(s, it); /* the writer's: the first */
	/* Re-find the slot: eviction above may have changed the chain. */
	*index_slot(s, h, ns, key) = it;
	s->count++;
	index_grow_locked(d, s);
	*view_count = item_view(s, it, view);
	pthread_mutex_unlock(&s->lock);

	/* Zero the tail of the last chunk up to a 4 KiB boundary (no lock:
	 * the writer owns the bytes until publish). */
	if (len % 4096) {
		struct iovec *last = &view[*view_count - 1];
		memset((char *)last->iov_base + last->iov_len, 0, 4096 - len % 4096);
	}
	*item = it;
	return KVT_OK;

fail_unlock:
	pthread_mutex_unlock(&s->lock);
fail_uncharge:
	if (group)
		dram_quota_uncharge(d, group, (uint64_t)chunks * d->chunk);
	return ret;
}

int dram_reserve(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
		 const uint64_t *part_lens, unsigned part_count, struct dram_item **item,
		 struct iovec *view, unsigned *view_count)
{
	return reserve(d, ns, key, len, part_lens, part_count, false, item, view, view_count);
}

int dram_reserve_put(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
		     const uint64_t *part_lens, unsigned part_count, struct dram_item **item,
		     struct iovec *view, unsigned *view_count)
{
	return reserve(d, ns, key, len, part_lens, part_count, true, item, view, view_count);
}

/*
 * Step 3 of a put: make a reserved item visible (or free it if a delete or
 * clear won meanwhile: -ECANCELED).  crcs, if not NULL, are the parts'
 * known CRCs; flags may carry DRAM_ON_LOWER (the block is already in a
 * lower tier: no write-down wanted).  With keep_ref the caller's ref stays
 * (a promotion that serves a reader); otherwise it is dropped.  Calls the
 * admission hook for a put that is not yet in a lower tier.
 */
int dram_publish(struct dram *d, struct dram_item *it, const uint32_t *crcs,
		 const uint64_t *part_lens, unsigned flags, bool keep_ref)
{
	uint64_t h = item_hash(d, it);
	struct dram_shard *s = dram_shard_of(d, h);

	pthread_mutex_lock(&s->lock);
	if (part_lens && it->part_count > 1) {
		uint64_t end = 0;
		for (unsigned i = 0; i < it->part_count; i++) {
			end += part_lens[i];
			item_parts(it)[i].end = end;
		}
	}
	if (crcs) {
		for (unsigned i = 0; i < it->part_count; i++)
			item_set_part_crc(it, i, crcs[i]);
		it->node.owner[0] |= ITEM_CRC_VALID;
	}
	if (ITEM_STATE(it) == ITEM_DEAD) {
		s->put_canceled++;
		item_unref_locked(d, s, it);
		pthread_mutex_unlock(&s->lock);
		return -ECANCELED;
	}
	it->promoted = (flags & DRAM_PROMOTED) != 0;
	it->node.owner[0] = (uint8_t)((it->node.owner[0] & ~ITEM_STATE_MASK) | ITEM_VISIBLE);
	if (flags & DRAM_ON_LOWER)
		it->node.owner[0] |= ITEM_ON_LOWER;
	it->cold = (flags & (DRAM_ON_LOWER | DRAM_COLD)) == (DRAM_ON_LOWER | DRAM_COLD);
	item_lower_gauge_locked(s, it, true);
	if (flags & DRAM_SEALED)
		it->node.owner[1] |= ITEM_SEALED; /* no reader has a ref yet */
	/* The prefix policy keeps a chain in order: just behind the block the
	 * shard's previous get or put placed (chain_prev). */
	if (flags & DRAM_COLD) {
		/* Read once from below, which keeps its copy: no DRAM space
		 * taken from what DRAM alone holds (doc/policies.md). */
		evict_insert(&s->ev, &it->node, h, EVICT_CLASSES);
		evict_demote(&s->ev, &it->node);
	} else {
		evict_insert_after(
			&s->ev, &it->node, h,
			((flags & DRAM_PROMOTED) ? EVICT_CLASSES : dram_hint_class(d, h)) |
				((flags & DRAM_RETAIN) ? EVICT_RETAIN : 0u) |
				((flags & DRAM_REPAIR) ? EVICT_REPAIR : 0u),
			chain_prev(s, it->ns));
		chain_note(s, it->ns, &it->node);
	}
	if (flags & DRAM_PROMOTED) {
		s->promotions++;
		s->promoted_bytes += it->value_len;
	} else {
		s->puts++;
		s->put_bytes += it->value_len;
		nsstat_add(d->nsstat, it->ns, NSS_PUTS, 1);
		nsstat_add(d->nsstat, it->ns, NSS_PUT_BYTES, it->value_len);
	}
	s->value_bytes += it->value_len;
	nsstat_add(d->nsstat, it->ns, NSS_DRAM_BYTES, it->value_len);
	nsstat_add(d->nsstat, it->ns, NSS_DRAM_BLOCKS, 1);
	if (!(flags & DRAM_ON_LOWER))
		dram_admit_locked(d, s, it, DRAM_ADMIT_PUT);
	if (keep_ref) {
		s->hits++;
		item_count_read(it);
	} else {
		item_unref_locked(d, s, it);
	}
	pthread_mutex_unlock(&s->lock);
	return KVT_OK;
}

bool dram_item_alive(struct dram *d, struct dram_item *it)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	bool alive;
	pthread_mutex_lock(&s->lock);
	alive = ITEM_STATE(it) != ITEM_DEAD;
	pthread_mutex_unlock(&s->lock);
	return alive;
}

/* Give up a reserved item (a failed promotion): it vanishes. */
void dram_abort(struct dram *d, struct dram_item *it)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	pthread_mutex_lock(&s->lock);
	if (ITEM_STATE(it) != ITEM_DEAD) {
		index_unlink_locked(d, s, it);
		it->node.owner[0] = (uint8_t)((it->node.owner[0] & ~ITEM_STATE_MASK) | ITEM_DEAD);
		s->dead_pending++;
	}
	item_unref_locked(d, s, it);
	pthread_mutex_unlock(&s->lock);
}

int dram_put(struct dram *d, uint32_t ns, const struct kvt_key *key,
	     const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
	     unsigned publish_flags)
{
	return dram_put_crcs(d, ns, key, parts, part_count, crcs, NULL, publish_flags);
}

int dram_put_crcs(struct dram *d, uint32_t ns, const struct kvt_key *key,
		  const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
		  uint32_t *crcs_out, unsigned publish_flags)
{
	uint64_t lens_small[16] = { 0 }, *lens = lens_small, len = 0;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned view_count = 0;
	struct dram_item *it;
	int ret;

	/* Supplied checksums are checked as the bytes are copied, before the
	 * value is published: a mismatch drops the reservation (nothing was
	 * ever visible).  Asked for (crcs_out), they are computed as the bytes
	 * are copied and kept with the item.  lens has room for the computed
	 * CRCs too. */
	if (part_count > KVT_ARRAY_LEN(lens_small) / 2) {
		lens = kvt_mem_alloc(d->mem, part_count * sizeof(*lens) * 2);
		if (!lens)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < part_count; i++) {
		lens[i] = parts[i].iov_len;
		len += parts[i].iov_len;
	}
	ret = reserve(d, ns, key, len, lens, part_count, true, &it, view, &view_count);
	if (ret == KVT_OK && crcs) {
		uint32_t *got = (uint32_t *)(lens + part_count);
		iov_copy_crc(view, view_count, parts, part_count, len, got);
		for (unsigned i = 0; i < part_count; i++)
			if (got[i] != crcs[i]) {
				dram_abort(d, it);
				ret = KVT_ECORRUPT;
				break;
			}
	} else if (ret == KVT_OK && crcs_out) {
		iov_copy_crc(view, view_count, parts, part_count, len, crcs_out);
		crcs = crcs_out;
	} else if (ret == KVT_OK) {
		iov_copy(view, view_count, parts, part_count, len);
	}
	if (lens != lens_small)
		kvt_mem_free(d->mem, lens, part_count * sizeof(*lens) * 2);
	if (ret != KVT_OK)
		return ret;
	return dram_publish(d, it, crcs, NULL,
			    publish_flags & (DRAM_SEALED | DRAM_RETAIN | DRAM_REPAIR), false);
}

/* Find a visible item and take a ref; counts the hit or miss.  Locked. */
static struct dram_item *dram_ref_locked(struct dram *d, struct dram_shard *s, uint64_t h,
					 uint32_t ns, const struct kvt_key *key)
{
	struct dram_item *it = *index_slot(s, h, ns, key);
	if (!it || ITEM_STATE(it) != ITEM_VISIBLE || !item_ref_locked(s, it)) {
		s->misses++;
		return NULL;
	}
	s->hits++;
	item_count_read(it);
	if (it->cold) { /* read again: no longer the next victim */
		item_lower_gauge_locked(s, it, false);
		it->cold = 0;
		item_lower_gauge_locked(s, it, true);
	}
	evict_hit_after(&s->ev, &it->node, h, chain_prev(s, ns));
	chain_note(s, ns, &it->node);
	dram_admit_locked(d, s, it, DRAM_ADMIT_HIT);
	return it;
}

static void dram_unref(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	pthread_mutex_lock(&s->lock);
	item_unref_locked(d, s, it);
	pthread_mutex_unlock(&s->lock);
}

/* Serve a read from an item the caller holds a ref on (the ref stays). */
int dram_read_item(struct dram *d, struct dram_item *it, struct dram_read *rd)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	uint64_t off = 0, len = 0, room = 0;
	int ret = KVT_OK;

	for (unsigned i = 0; i < rd->dst_count; i++)
		room += rd->dst[i].iov_len;
	rd->copied = 0;
	/* Lengths and part tables never change while a ref is held. */
	rd->value_len = it->value_len;
	rd->value_flags = dram_item_flags(it);
	if (rd->flags & KVT_F_PART) {
		if (rd->part >= it->part_count) {
			ret = KVT_ERANGE;
		} else {
			off = item_part_start(it, rd->part);
			len = item_part_end(it, rd->part) - off;
		}
	} else if (rd->flags & KVT_F_RANGE) {
		off = rd->off;
		len = rd->len;
		if (off > it->value_len || len > it->value_len - off)
			ret = KVT_ERANGE;
	} else {
		len = it->value_len;
	}
	if (ret == KVT_OK && len > room)
		ret = KVT_EBUFSMALL;
	if (ret != KVT_OK)
		return ret;

	item_copy(s, it, off, len, rd->dst, rd->dst_count, 0);
	rd->copied = len;
	pthread_mutex_lock(&s->lock);
	s->get_bytes += len;
	pthread_mutex_unlock(&s->lock);

	if (rd->flags & KVT_F_VERIFY) {
		/* Check the bytes the caller got against the stored part CRCs. */
		unsigned p0 = 0, p1 = it->part_count;
		dram_item_crcs(d, it);
		if (rd->flags & KVT_F_PART) {
			p0 = rd->part;
			p1 = rd->part + 1;
		}
		for (unsigned p = p0; p < p1; p++) {
			uint64_t a = item_part_start(it, p), b = item_part_end(it, p);
			uint32_t want = item_part_crc(it, p);
			if (iov_crc(rd->dst, rd->dst_count, a - off, b - a) != want) {
				pthread_mutex_lock(&s->lock);
				s->crc_errors++;
				pthread_mutex_unlock(&s->lock);
				rd->copied = 0;
				return KVT_MISS;
			}
		}
	}
	return KVT_OK;
}

int dram_get(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_read *rd)
{
	return dram_get_h(d, dram_hash(d, ns, key), ns, key, rd);
}

int dram_get_h(struct dram *d, uint64_t h, uint32_t ns, const struct kvt_key *key,
	       struct dram_read *rd)
{
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;
	int ret;

	rd->copied = 0;
	pthread_mutex_lock(&s->lock);
	it = dram_ref_locked(d, s, h, ns, key);
	pthread_mutex_unlock(&s->lock);
	if (!it)
		return KVT_MISS;
	ret = dram_read_item(d, it, rd);
	dram_unref(d, s, it);
	return ret;
}

int dram_pin(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_item **item,
	     struct iovec *view, unsigned *view_count, uint64_t *len)
{
	return dram_pin_h(d, dram_hash(d, ns, key), ns, key, item, view, view_count, len);
}

int dram_pin_h(struct dram *d, uint64_t h, uint32_t ns, const struct kvt_key *key,
	       struct dram_item **item, struct iovec *view, unsigned *view_count, uint64_t *len)
{
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;

	pthread_mutex_lock(&s->lock);
	it = dram_ref_locked(d, s, h, ns, key);
	if (it) {
		s->get_bytes += it->value_len;
		*len = it->value_len;
		*view_count = item_view(s, it, view);
	}
	pthread_mutex_unlock(&s->lock);
	*item = it;
	return it ? KVT_OK : KVT_MISS;
}

int dram_ref_quiet(struct dram *d, uint32_t ns, const struct kvt_key *key,
		   struct dram_item **item)
{
	uint64_t h = dram_hash(d, ns, key);
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;

	pthread_mutex_lock(&s->lock);
	it = *index_slot(s, h, ns, key);
	if (!it || ITEM_STATE(it) != ITEM_VISIBLE || !item_ref_locked(s, it))
		it = NULL;
	pthread_mutex_unlock(&s->lock);
	*item = it;
	return it ? KVT_OK : KVT_MISS;
}

/* The view of an item the caller holds a ref on. */
unsigned dram_item_view(struct dram *d, struct dram_item *it, struct iovec *view, uint64_t *len)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	*len = it->value_len;
	return item_view(s, it, view);
}

void dram_unpin(struct dram *d, struct dram_item *it)
{
	dram_unref(d, dram_shard_of(d, item_hash(d, it)), it);
}

/* Another ref on an item the caller already holds one on (seal.c: a sealed
 * put keeps its item for the remote write-through). */
bool dram_item_ref(struct dram *d, struct dram_item *it)
{
	struct dram_shard *s = dram_shard_of(d, item_hash(d, it));
	bool ok;
	pthread_mutex_lock(&s->lock);
	ok = item_ref_locked(s, it);
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/* Part lengths of an item the caller holds a ref on, without computing its
 * CRCs (dram_item_meta does): the part table never changes under a ref. */
int dram_item_part_lens(struct dram *d, struct dram_item *it, uint64_t *lens, unsigned max)
{
	KVT_UNUSED(d);
	if (it->part_count > max)
		return KVT_ERANGE;
	for (unsigned p = 0; p < it->part_count; p++)
		lens[p] = item_part_end(it, p) - item_part_start(it, p);
	return (int)it->part_count;
}

void dram_forget_lower(struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	uint64_t h = dram_hash(d, ns, key);
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;
	pthread_mutex_lock(&s->lock);
	it = *index_slot(s, h, ns, key);
	if (it) {
		item_lower_gauge_locked(s, it, false);
		it->node.owner[0] &= (uint8_t)~ITEM_ON_LOWER;
		it->cold = 0;
	}
	pthread_mutex_unlock(&s->lock);
}

int dram_exists(struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	uint64_t h = dram_hash(d, ns, key);
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;
	bool hit;
	pthread_mutex_lock(&s->lock);
	it = *index_slot(s, h, ns, key);
	hit = it && ITEM_STATE(it) == ITEM_VISIBLE;
	pthread_mutex_unlock(&s->lock);
	return hit ? KVT_OK : KVT_MISS;
}

/* Unlink from index and queue; free now or when the last ref goes.  Locked. */
static void dram_kill_locked(struct dram *d, struct dram_shard *s, struct dram_item *it)
{
	index_unlink_locked(d, s, it);
	if (ITEM_STATE(it) == ITEM_VISIBLE) {
		item_lower_gauge_locked(s, it, false);
		evict_remove(&s->ev, &it->node);
		s->value_bytes -= it->value_len;
		dram_nsstat_gone(d, it);
	}
	if (it->refs == 0) {
		item_free_locked(d, s, it);
	} else {
		it->node.owner[0] = (uint8_t)((it->node.owner[0] & ~ITEM_STATE_MASK) | ITEM_DEAD);
		s->dead_pending++;
	}
}

/* A delete (only_promoted: of a promotion's copy, visible, and nothing
 * else). */
static int dram_delete_if(struct dram *d, uint32_t ns, const struct kvt_key *key,
			  bool only_promoted)
{
	uint64_t h = dram_hash(d, ns, key);
	struct dram_shard *s = dram_shard_of(d, h);
	struct dram_item *it;
	int ret = KVT_MISS;

	pthread_mutex_lock(&s->lock);
	it = *index_slot(s, h, ns, key);
	if (it && only_promoted && (ITEM_STATE(it) != ITEM_VISIBLE || !it->promoted))
		it = NULL;
	if (it) {
		/* A delete wins over a put still copying: it will see DEAD. */
		ret = ITEM_STATE(it) == ITEM_VISIBLE ? KVT_OK : KVT_MISS;
		dram_kill_locked(d, s, it);
		s->deletes++;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int dram_delete(struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	return dram_delete_if(d, ns, key, false);
}

int dram_delete_promoted(struct dram *d, uint32_t ns, const struct kvt_key *key)
{
	return dram_delete_if(d, ns, key, true);
}

/*
 * Longest present prefix.  A lookup touches two cold cache lines per key
 * (bucket, item) that would cost ~200 ns back to back, so keys go in
 * windows of LOOKUP_WIN, in three passes that overlap the misses:
 *
 *   1. hash every key; prefetch its bucket (address computed from a
 *      relaxed read of the bucket array pointer: a stale one only makes a
 *      useless prefetch, never a load)
 *   2. under the shard lock, read the chain head and prefetch the item
 *   3. under the shard lock, walk the chain and compare keys
 *
 * stopping at the first miss.  Lookups never take refs or count as hits.
 * Passes 2 and 3 keep a shard's lock across consecutive keys of the same
 * shard (with one shard: one lock per pass of a window, not one per key):
 * at most LOOKUP_WIN short steps under it.
 */
#define LOOKUP_WIN 16

int64_t dram_lookup(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		    uint8_t *tiers, uint64_t *bytes)
{
	uint64_t h[LOOKUP_WIN];
	struct dram_shard *sh[LOOKUP_WIN], *held;
	size_t i = 0;
	bool miss = false;

	while (i < n && !miss) {
		size_t m = n - i < LOOKUP_WIN ? n - i : LOOKUP_WIN;
		for (size_t j = 0; j < m; j++) {
			struct dram_item **b;
			uint32_t mask;
			h[j] = dram_hash(d, ns, &keys[i + j]);
			sh[j] = dram_shard_of(d, h[j]);
			b = __atomic_load_n(&sh[j]->buckets, __ATOMIC_RELAXED);
			mask = __atomic_load_n(&sh[j]->bucket_mask, __ATOMIC_RELAXED);
			__builtin_prefetch(&b[h[j] & mask]);
		}
		held = NULL;
		for (size_t j = 0; j < m; j++) {
			struct dram_item *it;
			if (sh[j] != held) {
				if (held)
					pthread_mutex_unlock(&held->lock);
				held = sh[j];
				pthread_mutex_lock(&held->lock);
			}
			it = held->buckets[h[j] & held->bucket_mask];
			if (it) {
				/* An item spans two cache lines (104 bytes). */
				__builtin_prefetch(it);
				__builtin_prefetch((char *)it + 64);
			}
		}
		if (held)
			pthread_mutex_unlock(&held->lock);
		held = NULL;
		for (size_t j = 0; j < m; j++) {
			struct dram_shard *s = sh[j];
			struct dram_item *it;
			bool hit;
			if (s != held) {
				if (held)
					pthread_mutex_unlock(&held->lock);
				held = s;
				pthread_mutex_lock(&s->lock);
				chain_start(s, ns, n); /* a new request: its gets and puts follow */
			}
			it = *index_slot(s, h[j], ns, &keys[i]);
			hit = it && ITEM_STATE(it) == ITEM_VISIBLE;
			if (hit && bytes)
				*bytes += it->value_len;
			s->lookups++;
			if (!hit) {
				miss = true;
				break;
			}
			if (tiers)
				tiers[i] = KVT_TIER_DRAM;
			i++;
		}
		if (held)
			pthread_mutex_unlock(&held->lock);
	}
	if (tiers)
		for (size_t j = i; j < n; j++)
			tiers[j] = KVT_TIER_NONE;
	return (int64_t)i;
}

static int64_t dram_clear_if(struct dram *d, uint32_t ns, bool only_promoted)
{
	int64_t removed = 0;
	for (uint32_t i = 0; i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		pthread_mutex_lock(&s->lock);
		for (uint32_t b = 0; b <= s->bucket_mask; b++) {
			struct dram_item *it = s->buckets[b], *next;
			for (; it; it = next) {
				next = it->hnext;
				if (ns != KVT_NS_ALL && it->ns != ns)
					continue;
				if (only_promoted &&
				    (ITEM_STATE(it) != ITEM_VISIBLE || !it->promoted))
					continue;
				if (ITEM_STATE(it) == ITEM_VISIBLE)
					removed++;
				dram_kill_locked(d, s, it);
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	return removed;
}

int64_t dram_clear(struct dram *d, uint32_t ns)
{
	return dram_clear_if(d, ns, false);
}

int64_t dram_clear_promoted(struct dram *d, uint32_t ns)
{
	return dram_clear_if(d, ns, true);
}

void dram_scan(struct dram *d, uint32_t ns, dram_scan_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		pthread_mutex_lock(&s->lock);
		for (uint32_t b = 0; b <= s->bucket_mask; b++)
			for (struct dram_item *it = s->buckets[b]; it; it = it->hnext)
				if (it->ns == ns && ITEM_STATE(it) == ITEM_VISIBLE) {
					struct kvt_key k = { .len = ITEM_KEYLEN(it) };
					memcpy(k.bytes, item_key(it), k.len);
					fn(ctx, &k);
				}
		pthread_mutex_unlock(&s->lock);
	}
}

unsigned dram_regions(struct dram *d, struct iovec *out, unsigned max)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < d->shard_count && n < max; i++, n++) {
		out[n].iov_base = d->shards[i].arena.base;
		out[n].iov_len = d->shards[i].arena.map_len;
	}
	return n;
}

uint64_t dram_pinned(struct dram *d)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < d->shard_count; i++) {
		pthread_mutex_lock(&d->shards[i].lock);
		n += d->shards[i].pinned;
		pthread_mutex_unlock(&d->shards[i].lock);
	}
	return n;
}

void dram_stats(struct dram *d, kvt_stats_fn fn, void *ctx)
{
	struct {
		uint64_t puts, put_bytes, put_exists, put_canceled, full_errors, hits, misses;
		uint64_t get_bytes, evictions, evicted_bytes, deletes, pinned, value_bytes;
		uint64_t lookups, crc_errors, blocks, used, split, ghost_hits, promotions;
		uint64_t small_blocks, main_blocks, dead, promoted, promoted_bytes, admitted;
		uint64_t quota_evictions;
		uint64_t victim_wd, victim_filtered, victim_shed, victim_waits, leaving;
		uint64_t probation_inserts, adapt_switches, adapt_seg, adapt_groups, adapt_gseg;
		uint64_t retain_hints, retain_ignored;
		uint64_t lower_blocks, lower_bytes, cold_blocks, cold_bytes;
	} t;
	memset(&t, 0, sizeof(t));
	for (uint32_t i = 0; i < d->shard_count; i++) {
		struct dram_shard *s = &d->shards[i];
		pthread_mutex_lock(&s->lock);
		t.puts += s->puts;
		t.put_bytes += s->put_bytes;
		t.put_exists += s->put_exists;
		t.put_canceled += s->put_canceled;
		t.full_errors += s->full_errors;
		t.hits += s->hits;
		t.misses += s->misses;
		t.get_bytes += s->get_bytes;
		t.evictions += s->evictions;
		t.evicted_bytes += s->evicted_bytes;
		t.deletes += s->deletes;
		t.pinned += s->pinned;
		t.value_bytes += s->value_bytes;
		t.lookups += s->lookups;
		t.crc_errors += s->crc_errors;
		t.blocks += s->ev.small.count + s->ev.main.count;
		t.used += (uint64_t)(s->arena.chunk_count - s->arena.free_count) * d->chunk;
		t.split += s->arena.split_allocs;
		t.ghost_hits += s->ev.ghost_hits;
		t.promotions += s->ev.promotions;
		t.small_blocks += s->ev.small.count;
		t.main_blocks += s->ev.main.count;
		t.dead += s->dead_pending;
		t.promoted += s->promotions;
		t.promoted_bytes += s->promoted_bytes;
		t.admitted += s->admitted;
		t.quota_evictions += s->quota_evictions;
		t.victim_wd += s->victim_wd;
		t.victim_filtered += s->victim_filtered;
		t.victim_shed += s->victim_shed;
		t.victim_waits += s->victim_waits;
		t.leaving += s->leaving_bytes;
		t.probation_inserts += s->ev.probation_inserts;
		t.retain_hints += s->ev.retain_hints;
		t.retain_ignored += s->ev.retain_ignored;
		t.lower_blocks += s->lower_blocks;
		t.lower_bytes += s->lower_bytes;
		t.cold_blocks += s->cold_blocks;
		t.cold_bytes += s->cold_bytes;
		{
			uint64_t g, gs, gsw;
			evict_group_stats(&s->ev, &g, &gs, &gsw);
			t.adapt_switches += s->ev.ad0.mode_switches + gsw;
			t.adapt_seg += s->ev.ad0.seg;
			t.adapt_groups += g;
			t.adapt_gseg += gs;
		}
		pthread_mutex_unlock(&s->lock);
	}
	fn(ctx, "dram.capacity_bytes", d->capacity, NULL);
	fn(ctx, "dram.used_bytes", t.used, NULL);
	fn(ctx, "dram.value_bytes", t.value_bytes, NULL);
	/* Internal fragmentation: chunk rounding of stored values (+ in-flight puts). */
	fn(ctx, "dram.frag_bytes", t.used > t.value_bytes ? t.used - t.value_bytes : 0, NULL);
	fn(ctx, "dram.blocks", t.blocks, NULL);
	/* copies of blocks a lower tier holds too; of them, first reads'
	 * cold copies not read again (doc/policies.md) */
	fn(ctx, "dram.on_lower_blocks", t.lower_blocks, NULL);
	fn(ctx, "dram.on_lower_bytes", t.lower_bytes, NULL);
	fn(ctx, "dram.cold_blocks", t.cold_blocks, NULL);
	fn(ctx, "dram.cold_bytes", t.cold_bytes, NULL);
	fn(ctx, "dram.max_value_bytes", d->max_value, NULL);
	fn(ctx, "dram.chunk_bytes", d->chunk, NULL);
	fn(ctx, "dram.shards", d->shard_count, NULL);
	fn(ctx, "dram.hugepages", 0, arena_page_mode_name(d->shards[0].arena.page_mode));
	fn(ctx, "dram.prefaulted", d->shards[0].arena.prefaulted, NULL);
	fn(ctx, "dram.prefault_bytes", d->prefault_bytes, NULL);
	fn(ctx, "dram.prefault_ms", d->prefault_ns / 1000000u, NULL);
	fn(ctx, "dram.policy", 0, evict_policy_name(d->policy));
	fn(ctx, "dram.puts", t.puts, NULL);
	fn(ctx, "dram.put_bytes", t.put_bytes, NULL);
	fn(ctx, "dram.put_exists", t.put_exists, NULL);
	fn(ctx, "dram.put_canceled", t.put_canceled, NULL);
	fn(ctx, "dram.full_errors", t.full_errors, NULL);
	fn(ctx, "dram.hits", t.hits, NULL);
	fn(ctx, "dram.misses", t.misses, NULL);
	fn(ctx, "dram.get_bytes", t.get_bytes, NULL);
	fn(ctx, "dram.lookups", t.lookups, NULL);
	fn(ctx, "dram.evictions", t.evictions, NULL);
	fn(ctx, "dram.evicted_bytes", t.evicted_bytes, NULL);
	fn(ctx, "dram.quota_evictions", t.quota_evictions, NULL);
	fn(ctx, "dram.deletes", t.deletes, NULL);
	fn(ctx, "dram.pinned_blocks", t.pinned, NULL);
	fn(ctx, "dram.dead_pending", t.dead, NULL);
	fn(ctx, "dram.promotions", t.promoted, NULL);
	fn(ctx, "dram.promoted_bytes", t.promoted_bytes, NULL);
	fn(ctx, "dram.writedowns_admitted", t.admitted, NULL);
	fn(ctx, "dram.victim_writedowns", t.victim_wd, NULL);
	fn(ctx, "dram.victim_filtered", t.victim_filtered, NULL);
	fn(ctx, "dram.victim_shed", t.victim_shed, NULL);
	fn(ctx, "dram.victim_waits", t.victim_waits, NULL);
	fn(ctx, "dram.leaving_bytes", t.leaving, NULL);
	fn(ctx, "dram.probation_inserts", t.probation_inserts, NULL);
	/* prefix-adapt: shards now in segmented mode, mode changes so far */
	fn(ctx, "dram.adapt_segmented_shards", t.adapt_seg, NULL);
	fn(ctx, "dram.adapt_switches", t.adapt_switches, NULL);
	/* per quota group with a DRAM limit: (shard, group) modes made, and
	 * those in segmented mode */
	fn(ctx, "dram.adapt_groups", t.adapt_groups, NULL);
	fn(ctx, "dram.adapt_segmented_groups", t.adapt_gseg, NULL);
	/* puts with KVT_F_RETAIN that reached prefix-adapt's queues */
	fn(ctx, "dram.retain_hints", t.retain_hints, NULL);
	/* of those, taken as unhinted: their quota group hints (nearly) all */
	fn(ctx, "dram.retain_ignored", t.retain_ignored, NULL);
	fn(ctx, "dram.split_allocs", t.split, NULL);
	fn(ctx, "dram.crc_errors", t.crc_errors, NULL);
	fn(ctx, "dram.s3fifo_small_blocks", t.small_blocks, NULL);
	fn(ctx, "dram.s3fifo_main_blocks", t.main_blocks, NULL);
	fn(ctx, "dram.s3fifo_ghost_hits", t.ghost_hits, NULL);
	fn(ctx, "dram.s3fifo_promotions", t.promotions, NULL);
}

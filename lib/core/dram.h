/*
 * dram.h - the DRAM tier (G2: dram.c, with arena.c and evict.c under it).
 *
 * Two audiences.  The first part is what the tiers below DRAM (tier.h
 * implementations) and the seal decorator use: reserve, publish and abort
 * a block they bring in; view, ref and unpin one they hold; its metadata;
 * the write-down handshake.  A lower tier never creates, clears or looks
 * up DRAM by itself: check-layers.py fails the build's test if one of
 * them references a DRAM function outside this part.  The second part is
 * the store's: opening the tier, its hooks, and the request paths.
 *
 * Threads: every call may be made from any thread; the tier has its own
 * shard locks (doc/threads.md).
 */
#ifndef KVT_DRAM_H
#define KVT_DRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtier.h"

struct kvt_mem;
struct kvt_logger;
struct quota;
struct nsstat;
struct dram;
struct dram_item;

/* ------------------------------------------------------------------------
 * For the lower tiers: blocks in and out of DRAM.
 */

/*
 * A put in steps, for blocks promoted from lower tiers: reserve makes an
 * invisible item with room for len bytes (part_lens: each part's length,
 * NULL if part_count is 1), holding the caller's ref, and fills view
 * (room for DRAM_MAX_RUNS) with where the bytes go: 4 KiB aligned, and the
 * last span may be extended to the next 4 KiB boundary (its tail is zeroed).
 * publish makes it visible (-ECANCELED if a delete or clear won; the item is
 * then gone); abort drops it.  KVT_EXISTS if the key is present or being
 * written.
 */
#define DRAM_MAX_RUNS 64 /* most runs one value may be split into */
#define DRAM_ON_LOWER 0x1u /* publish: a lower tier already holds the block */
#define DRAM_PROMOTED 0x2u /* publish: count as a promotion, not a put */
#define DRAM_SEALED 0x4u   /* publish: the value is client-sealed (KVT_F_SEALED) */
#define DRAM_COLD 0x8u     /* publish (with DRAM_ON_LOWER): at the old end of the
			    * queue, outside any chain: served, then the next victim
			    * unless read again (a first hit in the tier below) */
#define DRAM_RETAIN 0x10u  /* publish: the caller's retain hint (KVT_F_RETAIN) */
#define DRAM_REPAIR 0x20u  /* publish: a copy the pod placed (KVT_F_REPAIR): counts
			    * as reused, never filtered from a write-down */
int dram_reserve(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
		 const uint64_t *part_lens, unsigned part_count, struct dram_item **item,
		 struct iovec *view, unsigned *view_count);
/* dram_reserve for a client's put (a reservation, a sealed put): once
 * DRAM holds no copy of the key, the absent hook (dram_set_absent_hook)
 * is asked under the key's shard lock; its refusal is the answer.
 * dram_put and dram_put_crcs ask it too; promotions (dram_reserve) never. */
int dram_reserve_put(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
		     const uint64_t *part_lens, unsigned part_count, struct dram_item **item,
		     struct iovec *view, unsigned *view_count);
int dram_publish(struct dram *d, struct dram_item *item, const uint32_t *crcs,
		 const uint64_t *part_lens, unsigned flags, bool keep_ref);
/* The namespace and key of an item the caller holds a ref on. */
void dram_item_key(struct dram_item *item, uint32_t *ns, struct kvt_key *key);
/* A reserved item's bytes against one CRC32C per part: KVT_OK or KVT_ECORRUPT. */
int dram_item_verify(struct dram *d, struct dram_item *item, const uint32_t *crcs);
/* False once a delete or clear has killed the item (the caller holds a ref). */
bool dram_item_alive(struct dram *d, struct dram_item *item);
void dram_abort(struct dram *d, struct dram_item *item);

/* KVT_F_SEALED if the block was put sealed (fixed once published; a ref suffices). */
uint32_t dram_item_flags(struct dram_item *item);

/*
 * Pin: on KVT_OK *item holds a reference, view[0..*view_count) (room for
 * DRAM_MAX_RUNS) gets the value's bytes, valid until dram_unpin, and *len
 * its length.
 */
int dram_pin(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_item **item,
	     struct iovec *view, unsigned *view_count, uint64_t *len);
/* The same with h = dram_key_hash(d, ns, key), which the caller computed
 * already (the store's put ghost): one hash a get instead of two. */
int dram_pin_h(struct dram *d, uint64_t h, uint32_t ns, const struct kvt_key *key,
	       struct dram_item **item, struct iovec *view, unsigned *view_count, uint64_t *len);
/* A ref on a visible block that is not an access: no hit, no read
 * counted, no admission (a write-down to another tier takes it).
 * KVT_OK or KVT_MISS; release with dram_unpin. */
int dram_ref_quiet(struct dram *d, uint32_t ns, const struct kvt_key *key,
		   struct dram_item **item);
/* View of an item the caller holds a ref on; returns the span count. */
unsigned dram_item_view(struct dram *d, struct dram_item *item, struct iovec *view,
			uint64_t *len);
void dram_unpin(struct dram *d, struct dram_item *item);
/* Another ref on an item the caller holds a ref on (dropped by dram_unpin). */
bool dram_item_ref(struct dram *d, struct dram_item *item);
/* Each part's length into lens (no CRCs computed); the part count, or
 * KVT_ERANGE if it exceeds max.  Caller holds a ref. */
int dram_item_part_lens(struct dram *d, struct dram_item *item, uint64_t *lens, unsigned max);

void dram_writedown_done(struct dram *d, struct dram_item *item, bool stored);
/* Graceful stop, from the tier that set the admit hook (its stop, before
 * it closes): offer DRAM's blocks to that hook (DRAM_ADMIT_CLOSE), most
 * valuable first, at most pass_max bytes and *budget (lowered); returns the
 * bytes taken.  The caller flushes between passes. */
uint64_t dram_writedown_pass(struct dram *d, uint64_t *budget, uint64_t pass_max);
/* The lower tier dropped its copy of (ns, key): a later hit may write the
 * DRAM block down again. */
void dram_forget_lower(struct dram *d, uint32_t ns, const struct kvt_key *key);
/*
 * What a write-down needs: namespace, key, each part's length and CRC
 * (computed now if they were deferred).  Returns the part count, or
 * KVT_ERANGE if it exceeds max_parts.  Caller holds a ref.
 */
int dram_item_meta(struct dram *d, struct dram_item *item, uint32_t *ns, struct kvt_key *key,
		   uint64_t *part_lens, uint32_t *crcs, unsigned max_parts);

int dram_exists(struct dram *d, uint32_t ns, const struct kvt_key *key);
/* The arena's regions (for I/O buffer registration): up to max, returns how many. */
unsigned dram_regions(struct dram *d, struct iovec *out, unsigned max);

struct dram_read {
	uint32_t flags;      /* KVT_F_PART / KVT_F_RANGE / KVT_F_VERIFY */
	uint32_t part;
	uint64_t off, len;
	const struct iovec *dst;
	unsigned dst_count;
	uint64_t copied;     /* out */
	uint64_t value_len;  /* out */
	uint32_t value_flags; /* out: KVT_F_SEALED */
};

/*
 * A block the DRAM tier is evicting, as an evict hook (dram_evict_fn,
 * below) is handed it: everything the hook may know of it, filled in by
 * the tier, so that a hook never reaches into the tier's locked state.
 * Valid only during the hook's call.
 */
struct dram_victim {
	uint32_t ns;
	const struct kvt_key *key;
	const struct iovec *view; /* its bytes, still readable */
	unsigned view_count;
	uint64_t len;             /* value bytes */
	uint32_t flags;           /* value flags (KVT_F_SEALED) */
	unsigned reads;           /* reads since it entered DRAM (0..3, saturating) */
	struct dram_item *item;   /* opaque: for dram_victim_parts only */
};

/* The victim's part table (crcs only if *crcs_valid: a put may have
 * deferred them).  Parts, or KVT_ERANGE if more than max.  From the hook
 * only. */
int dram_victim_parts(const struct dram_victim *v, uint64_t *lens, uint32_t *crcs,
		      unsigned max, bool *crcs_valid);

/* ------------------------------------------------------------------------
 * The store's: open, hooks, requests.
 */

struct dram_config {
	uint64_t capacity;   /* bytes of arena */
	uint32_t chunk;      /* bytes per chunk, power of two */
	uint32_t shards;     /* 0: choose */
	int policy;          /* DRAM_POLICY_* */
	int hugepages;       /* DRAM_HUGE_* */
	bool prefault;
	uint32_t victim_wait_ms; /* longest a put waits for the disk before victims
				  * are shed (doc/policies.md) */
	uint64_t hash_seed;  /* 0: random at open (getrandom); else the index
			      * hash's secret, so that the policies' sampling
			      * and ghosts repeat run to run (kvtier replay) */
};

enum {
	DRAM_POLICY_S3FIFO = 0,
	DRAM_POLICY_LRU = 1,
	DRAM_POLICY_PREFIX = 2,
	DRAM_POLICY_PREFIX_LEARN = 3,
	DRAM_POLICY_PREFIX_ADAPT = 4
};
enum { DRAM_HUGE_AUTO = 0, DRAM_HUGE_THP = 1, DRAM_HUGE_OFF = 2 };

/*
 * Called for every block the DRAM tier evicts, under the block's shard
 * lock, while its bytes are still readable through v->view.  It must not
 * block and must not call into the DRAM tier (dram_victim_parts aside):
 * copy or queue what it needs, or drop the block.  (The shared tier's
 * hot-eviction write-down and the store's KV events fill this in.)
 */
typedef void (*dram_evict_fn)(void *ctx, const struct dram_victim *v);

int dram_open(struct dram **out, const struct dram_config *cfg, struct kvt_mem *mem,
	      const struct kvt_logger *log);
void dram_close(struct dram *d);
/* The index hash of (ns, key): XXH3 seeded by ns and the store's random
 * secret, so another store puts the same key elsewhere (tests). */
uint64_t dram_key_hash(const struct dram *d, uint32_t ns, const struct kvt_key *key);
void dram_set_evict_hook(struct dram *d, dram_evict_fn fn, void *ctx);
/* Charge blocks to their namespaces' quota groups (before any put). */
void dram_set_quota(struct dram *d, struct quota *q);
/* Count puts, bytes held and evictions per namespace (nsstat.h; before any put). */
void dram_set_nsstat(struct dram *d, const struct nsstat *t);

/* KVT_OK, KVT_EXISTS, -ECANCELED (a delete or clear won), KVT_ETOOBIG, KVT_EFULL,
 * KVT_ECORRUPT (supplied CRCs wrong), -ENOMEM. */
int dram_put(struct dram *d, uint32_t ns, const struct kvt_key *key,
	     const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
	     unsigned publish_flags);
/* The same; without crcs, crcs_out (part_count entries, or NULL) gets each
 * part's CRC32C, computed as the bytes are copied (the source is read
 * once) and kept with the item: what a write-through sends with the
 * value.  Written only when the put returns KVT_OK. */
int dram_put_crcs(struct dram *d, uint32_t ns, const struct kvt_key *key,
		  const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
		  uint32_t *crcs_out, unsigned publish_flags);

/*
 * Write-down admission.  When a block that no lower tier holds is put
 * (why DRAM_ADMIT_PUT) or hit (DRAM_ADMIT_HIT), fn is called under its
 * shard lock with a ref already taken for the write-down.  fn must not
 * block or call into the DRAM tier: it queues the block and returns true,
 * or returns false (declined or shed; the ref is dropped).  A taken block
 * stays pinned until dram_writedown_done(stored: a lower tier now holds it).
 */
/* DRAM_ADMIT_EVICT: the block is being evicted (victim write-down); if
 * taken, DRAM frees it when dram_writedown_done says the write ended. */
enum { DRAM_ADMIT_PUT = 1, DRAM_ADMIT_HIT = 2, DRAM_ADMIT_EVICT = 3, DRAM_ADMIT_CLOSE = 4 };
typedef bool (*dram_admit_fn)(void *ctx, struct dram_item *item, uint32_t ns, int why);
/* victim: also offer evicted blocks (DRAM_ADMIT_EVICT; the SSD as DRAM's
 * victim tier, doc/policies.md). */
void dram_set_admit_hook(struct dram *d, dram_admit_fn fn, void *ctx, bool victim);
/*
 * A put's put-if-absent across the tiers below: fn(ctx, ns, key) runs
 * under the key's shard lock, after DRAM found no copy of the key and
 * before the put's item enters the index (again if the put waited for
 * room, the lock dropped): KVT_OK lets the put in, anything else is its
 * answer (KVT_EXISTS: a tier holds the block).  Under the lock, a block
 * the tier below publishes before DRAM lets it go (a write-down) is in
 * one of the two, never neither (doc/ssd.md "A put racing a
 * write-down").  fn must not call into DRAM; it may take the lower
 * tier's locks that are never held while a DRAM shard lock is taken.
 * Set before any put (NULL: none).
 */
typedef int (*dram_absent_fn)(void *ctx, uint32_t ns, const struct kvt_key *key, bool wait);
void dram_set_absent_hook(struct dram *d, dram_absent_fn fn, void *ctx);
/* The tier below takes DRAM's victims: a policy's verdict against a
 * victim (prefix-adapt's simulations, prefix-learn's classes) counts only
 * while full(ctx) says that tier must drop something to take it (called
 * under a shard lock: lock-free, must not call into DRAM).  Not set: the
 * verdict always counts. */
void dram_below_room(struct dram *d, bool (*full)(void *ctx), void *ctx);
/* The tier below takes DRAM's victims: plug(ctx, true) when a put starts
 * sending them, plug(ctx, false) before it waits or returns (under a shard
 * lock, as the admit hook is called; counted: plugs of several shards may
 * overlap).  While plugged the tier takes none of them off its queue, so
 * one put's victims go down as one burst (dram.c below_plug_locked). */
void dram_below_plug(struct dram *d, void (*plug)(void *ctx, bool on), void *ctx);
/* The SSD below, of lower_bytes, takes DRAM's victims: prefix-adapt
 * simulates both and decides the write-down (after dram_set_admit_hook,
 * which pins it; a later dram_pin_lru pins it again). */
void dram_adapt_below(struct dram *d, uint64_t lower_bytes);
/* Tests: every shard's prefix-adapt mode set as evict_adapt_force does
 * (test_policy 7j). */
void dram_test_adapt_mode(struct dram *d, unsigned mode);
/* prefix-adapt runs over the SSD (dram_adapt_below, not pinned since). */
bool dram_adapts_below(struct dram *d);
/* prefix-adapt: LRU mode for good, its simulations and ghost given back,
 * when below is true (a lower tier: the store calls it once its tiers are
 * open; the SSD's admission hook calls it too).  Other policies: nothing. */
void dram_pin_lru(struct dram *d, bool below);
/* A prefix lookup over keys[0..n) found the first `hits` present:
 * prefix-learn notes reuse classes for the others, which their puts will
 * read (doc/policies.md).  Nothing under the other policies. */
void dram_note_prefix(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		      size_t hits);

int dram_delete(struct dram *d, uint32_t ns, const struct kvt_key *key);
/* The passes over DRAM after a lower tier removed a key (namespace: the
 * clear's), which kill what a promotion from it published in between
 * (store_dispatch.c): only a visible copy published with DRAM_PROMOTED,
 * never a put's, which was made after the delete was issued (a put
 * still copying is left too).  KVT_OK if one was removed; the clear's:
 * blocks removed. */
int dram_delete_promoted(struct dram *d, uint32_t ns, const struct kvt_key *key);
/* Leading keys present; tiers[i] set to KVT_TIER_DRAM for those (may be NULL);
 * *bytes (may be NULL) grows by their value lengths. */
int64_t dram_lookup(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		    uint8_t *tiers, uint64_t *bytes);
/* Blocks removed.  ns may be KVT_NS_ALL. */
int64_t dram_clear(struct dram *d, uint32_t ns);
int64_t dram_clear_promoted(struct dram *d, uint32_t ns);
/* fn(ctx, key) for every visible block of ns, shard by shard under the
 * shard's lock: fn must not call into the DRAM tier (store_scan.c). */
typedef void (*dram_scan_fn)(void *ctx, const struct kvt_key *key);
void dram_scan(struct dram *d, uint32_t ns, dram_scan_fn fn, void *ctx);
/* Items still pinned (for close's report). */
/* KVT_OK, KVT_MISS, KVT_ERANGE, KVT_EBUFSMALL. */
int dram_get(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_read *rd);
/* The same with h = dram_key_hash(d, ns, key) (dram_pin_h). */
int dram_get_h(struct dram *d, uint64_t h, uint32_t ns, const struct kvt_key *key,
	       struct dram_read *rd);
/* The same from an item the caller holds a ref on (pin or publish keep_ref). */
int dram_read_item(struct dram *d, struct dram_item *item, struct dram_read *rd);
uint64_t dram_pinned(struct dram *d);
void dram_stats(struct dram *d, kvt_stats_fn fn, void *ctx);

#endif /* KVT_DRAM_H */

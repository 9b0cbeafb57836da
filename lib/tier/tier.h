/*
 * tier.h - the one interface every tier below DRAM implements (SSD, the
 * remote tier over one or several kvtierd, the shared tier, and any tier a
 * test plugs in), and the two completion types they share.
 *
 * The store (store_dispatch.c) holds an ordered array of tiers, the chain
 * (option store.tiers, default "ssd,remote,shared": doc/decisions.md says
 * why the pod store comes before shared storage).  A request that DRAM
 * cannot answer walks the chain: on a miss the next tier, on a hit the
 * tier's answer.  The store never names a tier; a tier never calls the
 * store or another tier (a tier's hooks into the DRAM tier, such as the
 * SSD write-down admission or the shared tier's evict hook, are set up by
 * the tier's own open).  Modelled on SQLite's sqlite3_pcache_methods2 and
 * RocksDB's SecondaryCache: the orchestrator holds the policy of the
 * walk, each implementation holds its medium.
 *
 * Return conventions of every operation that may complete later:
 *   TIER_PENDING   the callback will run, exactly once, on any thread
 *                  (possibly before the call returns); the caller does not
 *                  touch what it handed over until then
 *   KVT_OK         done now, a hit (the callback never runs)
 *   KVT_MISS       done now, not in this tier: the walk goes on
 *   < 0            done now, failed (the callback never runs); for gets
 *                  the walk stops and the request is a miss, for others
 *                  the error is the request's
 * Every member may be NULL where the tier has no such operation; the walk
 * then passes the tier by (a NULL get is a miss, a NULL put_down a no-op).
 */
#ifndef KVT_TIER_H
#define KVT_TIER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtier.h"

struct dram;
struct dram_item;
struct kvt_mem;
struct kvt_logger;
struct ns_registry;
struct quota;

#define TIER_PENDING 1000 /* the callback will run (never a KVT_* code) */

/* "A value arrived in DRAM": KVT_OK with a ref on the published item (the
 * callee must dram_unpin it), or a non-OK status and NULL (KVT_MISS:
 * absent, corrupt, I/O error, server down; KVT_EXISTS: another reader or a
 * put published it first).  Replaces ssd_promote_cb, shared_get_cb and
 * remote_get_cb, which had this signature under three names. */
typedef void (*tier_got_fn)(void *ctx, int status, struct dram_item *item);

/* "Done, with status": what an operation learned; read it inside the
 * callback only. */
struct tier_result {
	int status;                 /* KVT_OK, KVT_MISS, KVT_EXISTS, or an error */
	uint32_t tier;              /* exists: the server's tier of the block (remote) */
	uint64_t count;             /* lookup: leading hits; clear: blocks removed;
				     * get_part: bytes copied */
	uint64_t load_ns;           /* lookup: the tier's load estimate */
	uint64_t value_len;         /* get_part: the whole value's length */
	uint32_t value_flags;       /* get_part: KVT_F_SEALED if stored so */
};
typedef void (*tier_done_fn)(void *ctx, const struct tier_result *res);

/* A quiet read's private copy (KVT_F_QUIET): KVT_OK and the copy, which
 * the callee owns (ssd.h: struct ssd_copy, freed with ssd_copy_free), or
 * a non-OK status and NULL.  Only the SSD tier makes them today. */
struct ssd_copy;
typedef void (*tier_copy_fn)(void *ctx, int status, struct ssd_copy *copy);

/* One key of a request, and where it sits in its prompt when the caller
 * said (KVT_F_PROMPT, lookups and prefetches): prompt[0..pos] are the
 * prompt's keys through this one.  prompt NULL: not known.  The remote
 * tier places blocks by it (cluster.h). */
struct tier_key {
	uint32_t ns;
	const struct kvt_key *key;
	const struct kvt_key *prompt;
	uint32_t pos;
};

/* What a tier's open gets from the store; everything outlives the tier. */
struct tier_env {
	struct dram *dram;          /* the DRAM tier (dram.h: the lower tiers' part) */
	struct ns_registry *ns;
	struct quota *quota;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	int dir_fd;                 /* the store directory, -1: memory only */
	uint64_t dram_capacity;     /* bytes */
	/* Tiers opened before this one (open order: ssd, remote, shared, then
	 * registered ones), by KVT_TIER_* id; NULL if absent. */
	void *(*find)(void *store, int id);
	void *store;
};

/* Capabilities the walk and the synchronous helpers read. */
#define TIER_ASYNC_GET 0x1u /* gets complete on another thread */
#define TIER_ASYNC_ALL 0x2u /* any operation may complete on another thread */
#define TIER_KEEPS_EVICTED 0x4u /* a block DRAM evicts may live on here */

struct tier_ops {
	const char *name;           /* as in store.tiers */
	uint32_t id;                /* KVT_TIER_* its hits report */
	unsigned flags;             /* TIER_ASYNC_* */

	/* Lifecycle.  open: arg is what was registered (the built-in tiers:
	 * their config).  0 or an error (logged by the tier).  stop: drain
	 * and stop threads; callbacks still run, later calls fail or miss.
	 * free: release memory, after the DRAM tier is closed (a tier whose
	 * DRAM hooks may still run until then).  child: in a forked child,
	 * which must not join the parent's threads or touch its files. */
	int (*open)(void **t, const struct tier_env *env, void *arg);
	void (*stop)(void *t);
	void (*free)(void *t);

	/* Reads. */
	/* Synchronous index: KVT_OK (*value_len set, may be NULL) or KVT_MISS.
	 * A tier with one answers exists, lookups and put-if-absent from it. */
	int (*find)(void *t, uint32_t ns, const struct kvt_key *key, uint64_t *value_len);
	/* Estimated ns to load len bytes (lookups' load_ns), for find hits. */
	uint64_t (*load_ns)(void *t, uint64_t len);
	/* Promote into DRAM; prio IO_PRIO_DEMAND or IO_PRIO_PREFETCH.
	 * TIER_PENDING, KVT_MISS, KVT_EXISTS (in DRAM now), or < 0. */
	int (*get)(void *t, const struct tier_key *k, int prio, tier_got_fn got, void *ctx);
	/* One part straight into dst, nothing promoted (res: status, count
	 * copied, value_len, value_flags).  KVT_MISS here: use get instead. */
	int (*get_part)(void *t, const struct tier_key *k, uint32_t part, const struct iovec *dst,
			unsigned dst_count, int prio, tier_done_fn done, void *ctx);
	/* A quiet part read (KVT_F_PART | KVT_F_QUIET): one part straight
	 * into dst, nothing the tier keeps changes (nothing promoted, no read
	 * marked).  For a tier whose plain part reads must promote (the SSD:
	 * an engine loading a block layer by layer through parts, vLLM's
	 * connector, reads it once into DRAM and marks it in use), so it has
	 * this and no get_part.  Results as get_part's; KVT_ERANGE at once
	 * where the tier's index knows the value's part count (done never
	 * runs). */
	int (*get_part_quiet)(void *t, const struct tier_key *k, uint32_t part,
			      const struct iovec *dst, unsigned dst_count, int prio,
			      tier_done_fn done, void *ctx);
	/* The whole value straight into dst (a plain get with the caller's
	 * buffers; nothing promoted): res status KVT_OK (count bytes), KVT_MISS
	 * (not here, or failed on the way: the walk goes on; dst may hold
	 * anything), KVT_EBUFSMALL (value_len set).  Once done ran, the tier
	 * no longer writes to dst.  TIER_PENDING, or KVT_MISS (a miss here
	 * now, e.g. its server is down: the walk goes on; get is not asked). */
	int (*get_into)(void *t, const struct tier_key *k, const struct iovec *dst,
			unsigned dst_count, int prio, tier_done_fn done, void *ctx);
	/* Quiet read (KVT_F_QUIET): a private, verified copy; nothing the
	 * tier keeps changes.  TIER_PENDING, KVT_MISS, or < 0. */
	int (*get_copy)(void *t, const struct tier_key *k, tier_copy_fn done, void *ctx);
	/* Present?  Tiers without find: KVT_OK, KVT_MISS or TIER_PENDING. */
	int (*exists)(void *t, const struct tier_key *k, tier_done_fn done, void *ctx);
	/* Leading hits among keys[from..n) (res->count from `from`), tiers
	 * (the prompt's, may be NULL) marked for them.  Tiers with find are
	 * asked key by key instead, interleaved with DRAM. */
	int (*lookup)(void *t, uint32_t ns, const struct kvt_key *keys, uint32_t from, uint32_t n,
		      uint8_t *tiers, tier_done_fn done, void *ctx);
	/* A prompt's keys, before gets of its blocks (placement anchors). */
	void (*note_prompt)(void *t, const struct kvt_key *keys, uint32_t n);

	/* Writes. */
	/* Write-down: (ns, key) entered DRAM by a put or a commit; queue it
	 * by the tier's policy.  Never blocks, never fails the put. */
	void (*put_down)(void *t, uint32_t ns, const struct kvt_key *key);
	/* A client's put of (ns, key) is about to go past put-if-absent (a
	 * put, a sealed put, a reservation), DRAM not holding the key, before
	 * its bytes enter DRAM: KVT_EXISTS if the tier holds the block (the
	 * put is a no-op: asked after DRAM, so a block a write-down moved
	 * from DRAM to the tier meanwhile is found here), else KVT_OK -- and
	 * a tier that keeps a copy of the key it answers absent (the SSD's
	 * dead entries, and its carries in flight: unpublished) must not
	 * let that copy outlive the put.  No I/O, no waits but for its own
	 * locks -- and with wait false not for those either: -EAGAIN when one
	 * is held by another thread (an index sweep may hold one for a whole
	 * shard's walk), and DRAM, which calls it under the key's shard lock
	 * (dram_set_absent_hook), drops that lock, asks again with wait true
	 * and starts over: DRAM's gets never wait behind the tier's walks.
	 * The tier's own locks only, none it holds while it calls into DRAM. */
	int (*put_over)(void *t, uint32_t ns, const struct kvt_key *key, bool wait);
	/* Before a put of len bytes to ns lands in DRAM: a tier that must
	 * take it at once (the SSD, for a persistent namespace) waits, for at
	 * most its bound, until its write-down queue has room.  KVT_OK, or
	 * KVT_EFULL: the put fails, nothing stored (never shed silently).
	 * May block; called with no lock held.  May be NULL. */
	int (*put_room)(void *t, uint32_t ns, uint64_t len);
	/* put_room without blocking (KVT_OP_ROOM, KVT_F_NOWAIT): KVT_OK if
	 * the put would not wait; with done NULL, KVT_EWAIT if it would;
	 * else TIER_PENDING and done runs with KVT_OK once there is room or
	 * KVT_EFULL once the bound passed.  Never blocks.  May be NULL. */
	int (*room_watch)(void *t, uint32_t ns, uint64_t len, tier_done_fn done, void *ctx);
	/* Write-through from the caller's parts (valid until done): local is
	 * what DRAM said (KVT_OK, KVT_EFULL, KVT_ETOOBIG); vflags the put's
	 * KVT_F_SEALED and KVT_F_RETAIN.  crcs (one per part, or NULL: the
	 * tier computes them) are valid during the call only (the DRAM
	 * copy's, on the store's stack): a tier keeps a copy.  TIER_PENDING,
	 * KVT_MISS (not taken), or < 0 (refused at once: the tier's error,
	 * which a put DRAM did not take returns).  A tier with put_through makes the store
	 * refuse reservations (kvt_put_reserve: nothing to write from). */
	int (*put_through)(void *t, const struct tier_key *k, const struct iovec *parts,
			   unsigned part_count, const uint32_t *crcs, uint32_t vflags, int local,
			   tier_done_fn done, void *ctx);

	/* Deletes and clears.  prepare (may be NULL) runs before DRAM is
	 * touched and may fail the request (NULL: out of memory): after it
	 * the tier's del/clear consume what it returned, and DRAM is passed
	 * over again (a promotion may have raced: ssd.h).  unprepare drops
	 * what prepare returned when another tier's prepare failed. */
	void *(*prepare)(void *t, bool clear, uint32_t ns, const struct kvt_key *key);
	void (*unprepare)(void *t, void *prepared);
	/* KVT_OK, KVT_MISS, TIER_PENDING (res->status), or < 0. */
	int (*del)(void *t, void *prepared, const struct tier_key *k, tier_done_fn done,
		   void *ctx);
	/* Blocks removed (>= 0), TIER_PENDING (res->count), or < 0. */
	int64_t (*clear)(void *t, void *prepared, uint32_t ns, tier_done_fn done, void *ctx);

	/* Wait until what was queued before is stored; 0 or an error. */
	int (*flush)(void *t);
	/* May be NULL (then flush serves): wait until the tombstones of the
	 * deletes and clears done before are durable, not for write-downs
	 * (kvt_delete, kvt_clear: store_sync.c); 0 or an error. */
	int (*sync_deletes)(void *t);
	/* A batch of requests starts / ends (the remote tier corks its
	 * connections); plug returns what unplug takes. */
	void *(*plug)(void *t);
	void (*unplug)(void *t, void *plugged);
	/* Namespace ns was registered persistent (KVT_NS_PERSISTENT). */
	int (*set_persistent)(void *t, uint32_t ns);
	void (*stats)(void *t, kvt_stats_fn fn, void *ctx);
	/* kvt_scan: fn(ctx, key) for every key of ns the tier's own index
	 * holds, under its locks (fn must not call into the tier). */
	void (*scan)(void *t, uint32_t ns, void (*fn)(void *ctx, const struct kvt_key *key),
		     void *ctx);
};

/* The built-in tiers (tier_ssd.c, tier_remote.c, tier_shared.c). */
extern const struct tier_ops tier_ssd_ops;
extern const struct tier_ops tier_remote_ops;
extern const struct tier_ops tier_shared_ops;

/*
 * Add a tier to a store that is created and not yet open (tests, and any
 * tier that lives outside the library): at open, ops->open(&t, env, arg)
 * runs after the built-in tiers' opens, and the tier joins the chain where
 * store.tiers names it (ops->name), or at its head if store.tiers does not
 * name it.  ops and arg must outlive the store.  0, KVT_ENULL, KVT_ESTATE
 * (open already), KVT_EFULL (too many tiers).
 */
int store_tier_register(struct kvt_store *s, const struct tier_ops *ops, void *arg);
/* The handle of the open store's tier with this ops, or NULL. */
void *store_tier_handle(struct kvt_store *s, const struct tier_ops *ops);

#endif /* KVT_TIER_H */

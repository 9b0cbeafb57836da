/*
 * kvt_int.h - what the modules of libkvtier share and nobody else sees.
 *
 * Modules and what each owns:
 *   err.c    kvt_strerror, kvt_version, kvt_tier_name
 *   mem.c    the one allocation wrapper: counts bytes, fails the Nth call
 *   crc.c    CRC32C through ISA-L
 *   key.c    opaque and prefix-chained keys (doc/keys.md)
 *   ns.c     namespace descriptors, digests, the persisted registry
 *   dram.c   the DRAM tier: shards of index, allocator and eviction
 *   arena.c  the DRAM arena: mmap'd regions and their chunk allocator
 *   evict.c  S3-FIFO and LRU queues over DRAM items
 *   quota.c  quota groups: namespace -> group, byte limits and usage per tier
 *   store.c  handles, options, queues, workers, dispatch of requests
 *   shdir.c  the shared tier's directory backend; shared.c the tier (shared.h)
 *
 * Nothing here is global: every piece of state hangs off a struct kvt_store
 * or an object it owns.
 */
#ifndef KVT_INT_H
#define KVT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtier.h"

#define KVT_UNUSED(x) ((void)(x))
#define KVT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KVT_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((uint64_t)(a)-1))

#if defined(__GNUC__)
#define KVT_LIKELY(x) __builtin_expect(!!(x), 1)
#define KVT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KVT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KVT_LIKELY(x) (x)
#define KVT_UNLIKELY(x) (x)
#define KVT_PRINTF(a, b)
#endif

/* ------------------------------------------------------------------------
 * mem.c: every byte of index and metadata goes through here.
 */
struct kvt_mem {
	_Atomic int64_t bytes;      /* live bytes handed out (requested sizes) */
	_Atomic int64_t peak_bytes; /* high-water mark of bytes */
	_Atomic int64_t allocs;     /* successful allocations, ever */
	_Atomic int64_t fail_at;    /* >0: countdown; the call that takes it to 0 fails */
};

void kvt_mem_init(struct kvt_mem *m);
/* Fail the nth allocation from now (n >= 1); 0 disables. */
void kvt_mem_fail_nth(struct kvt_mem *m, int64_t n);
void *kvt_mem_alloc(struct kvt_mem *m, size_t len);
void *kvt_mem_calloc(struct kvt_mem *m, size_t count, size_t len);
/* align a power of two >= sizeof(void *); freed with kvt_mem_free. */
void *kvt_mem_alloc_aligned(struct kvt_mem *m, size_t align, size_t len);
/* Like realloc; old_len must be what was allocated.  On failure p is untouched. */
void *kvt_mem_realloc(struct kvt_mem *m, void *p, size_t old_len, size_t new_len);
/* Sized free: len must be the allocated length.  NULL is a no-op. */
void kvt_mem_free(struct kvt_mem *m, void *p, size_t len);
char *kvt_mem_strdup(struct kvt_mem *m, const char *s);
void kvt_mem_strfree(struct kvt_mem *m, char *s);

/* ------------------------------------------------------------------------
 * Logging: store.c routes to the callback the embedder installed.
 */
struct kvt_logger {
	kvt_log_fn fn;
	void *ctx;
	int min_level;
};
void kvt_logf(const struct kvt_logger *lg, int level, const char *fmt, ...) KVT_PRINTF(3, 4);

/* ------------------------------------------------------------------------
 * ns.c: namespace registry.  Ids start at 1 and are dense; id 0 is never
 * used.  The registry is guarded by its own mutex; ns_reg_get is lock-free
 * after the id is known to exist (entries are never removed or moved).
 */
#define NS_CANON_MAX 2048 /* longest canonical descriptor text */

struct ns_entry {
	uint32_t id;
	uint8_t digest[32];
	uint32_t canon_len;
	char *canon; /* NUL-terminated canonical text */
	/* quota.c's: the namespace's quota group (0: none), and the value
	 * bytes of its published SSD entries (guarded by quota.lock). */
	_Atomic uint32_t quota_group;
	uint64_t quota_ssd_bytes;
	/* cluster.c's: kvt_ns_desc.replicas, the largest registered (0, 1: one). */
	_Atomic uint32_t replicas;
};

#define NS_PAGE_SHIFT 10
#define NS_PAGE_LEN (1u << NS_PAGE_SHIFT) /* entries per page */
#define NS_PAGES 1024                      /* so at most 1M - 1 namespaces */

struct ns_registry {
	pthread_mutex_t lock;             /* serializes add, load, find, the file, hash */
	struct kvt_mem *mem;
	int dir_fd;                       /* -1: memory only; not owned */
	_Atomic uint32_t count;           /* ids [1, count] are published (release) */
	/* pages[id >> NS_PAGE_SHIFT][id & (NS_PAGE_LEN-1)]: written once under
	 * lock before count is raised, never moved, so readers need no lock. */
	struct ns_entry *_Atomic pages[NS_PAGES];
	uint32_t *hash;                   /* ids by digest, open addressing, 0 empty; lock */
	uint32_t hash_cap;                /* slots in hash: 0 or a power of two; lock */
};

/* 0, KVT_ENULL, -errno (mutex). */
int ns_reg_init(struct ns_registry *r, struct kvt_mem *mem);
/*
 * Load "namespaces" from dir_fd (absent file: empty) into an empty registry.
 * Keeps dir_fd (not owned; a directory opened O_RDONLY, not O_PATH: it is
 * fsync'ed) for ns_reg_add.  0, KVT_ECORRUPT, KVT_EVERSION, KVT_ESTATE
 * (already loaded or not empty), -ENOMEM, -errno; on failure the registry
 * is left empty and memory-only.
 */
int ns_reg_load(struct ns_registry *r, int dir_fd);
/*
 * Id of digest, registering it if new (canon: canon_len bytes, no NUL, and
 * digest must be its SHA-256).  A new id is persisted (whole file, temp +
 * fsync + rename + fsync dir) before it becomes visible.  0, KVT_ENULL,
 * KVT_EBADLEN, KVT_EDESC (digest/canon mismatch), KVT_EFULL (ids exhausted),
 * -ENOMEM, -errno (I/O; registry unchanged).
 */
int ns_reg_add(struct ns_registry *r, const uint8_t digest[32], const char *canon,
	       uint32_t canon_len, uint32_t *id);
/* 0 with *id, KVT_MISS, KVT_ENULL.  Takes the lock. */
int ns_reg_find(struct ns_registry *r, const uint8_t digest[32], uint32_t *id);
/* NULL if id is not registered. */
const struct ns_entry *ns_reg_get(struct ns_registry *r, uint32_t id);
/* Frees every entry; no-op on a zeroed or already freed registry. */
void ns_reg_free(struct ns_registry *r);

/*
 * Pure parser of a registry file image (doc/keys.md, "Registry file"): calls
 * fn (may be NULL) for each record in order; canon is not NUL-terminated
 * and points into buf.  Checks every length, the ids (1, 2, ...), each CRC32C
 * and that each digest is the SHA-256 of its canon.  Returns the record
 * count, KVT_ECORRUPT, KVT_EVERSION, -ENOMEM (OpenSSL's digest context, the
 * only allocation), or what fn returned if negative.  No I/O.  Fuzzed.
 */
typedef int (*ns_rec_fn)(void *ctx, uint32_t id, const uint8_t digest[32],
			 const char *canon, uint32_t canon_len);
int ns_reg_parse(const uint8_t *buf, size_t len, ns_rec_fn fn, void *ctx);

/* ------------------------------------------------------------------------
 * quota.c: quota groups (kvt_quota_set, kvt_ns_set_group).
 */
enum { QUOTA_DRAM = 0, QUOTA_SSD = 1, QUOTA_TIERS = 2 };

struct quota_group {
	_Atomic uint64_t limit[QUOTA_TIERS];   /* bytes; 0: no limit */
	_Atomic uint64_t used[QUOTA_TIERS];    /* DRAM: arena bytes of items charged here;
						* SSD: value bytes of published entries */
	_Atomic uint64_t evicted[QUOTA_TIERS]; /* DRAM: blocks evicted to stay under the
						* limit; SSD: write-downs declined */
	_Atomic uint64_t full;                 /* DRAM reservations refused: nothing of
						* the group's left to evict */
	_Atomic bool known;                    /* set or assigned once: reported in stats */
};

struct quota {
	struct kvt_mem *mem;
	struct ns_registry *reg;
	pthread_mutex_t lock;                  /* leaf: SSD counts, regrouping, the table */
	_Atomic bool active;                   /* a namespace has had a group: the hot
						* paths' one test */
	struct quota_group *_Atomic groups;    /* KVT_QUOTA_GROUPS entries, or NULL */
	bool ready;                            /* initialized (lock valid) */
};

/* 0 or -errno.  reg must outlive q. */
int quota_init(struct quota *q, struct kvt_mem *mem, struct ns_registry *reg);
void quota_fini(struct quota *q);
/* 0, KVT_EOPTVAL (group 0 or >= KVT_QUOTA_GROUPS), -ENOMEM. */
int quota_set(struct quota *q, uint32_t group, uint64_t dram_bytes, uint64_t ssd_bytes);
/* 0, KVT_ENONS, KVT_EOPTVAL, -ENOMEM. */
int quota_ns_set_group(struct quota *q, uint32_t ns, uint32_t group);
uint32_t quota_group_lookup(struct quota *q, uint32_t ns);
/* The group of ns, 0 if none: one relaxed load when no group was ever assigned. */
static inline uint32_t quota_group_of(struct quota *q, uint32_t ns)
{
	if (KVT_LIKELY(!atomic_load_explicit(&q->active, memory_order_acquire)))
		return 0;
	return quota_group_lookup(q, ns);
}
/* The group's counters (NULL for group 0 or before any group exists). */
struct quota_group *quota_group_at(struct quota *q, uint32_t group);
/* SSD: bytes of a published entry of ns added (add) or removed.  q may be NULL. */
void quota_ssd_add(struct quota *q, uint32_t ns, uint64_t bytes, bool add);
/* SSD admission: true (and counted) if writing bytes more of ns would pass
 * its group's SSD limit.  q may be NULL. */
bool quota_ssd_refuse(struct quota *q, uint32_t ns, uint64_t bytes);
void quota_stats(struct quota *q, kvt_stats_fn fn, void *ctx);

/* ------------------------------------------------------------------------
 * dram.c: the DRAM tier.
 */
struct dram;
struct dram_item;

struct dram_config {
	uint64_t capacity;   /* bytes of arena */
	uint32_t chunk;      /* bytes per chunk, power of two */
	uint32_t shards;     /* 0: choose */
	int policy;          /* DRAM_POLICY_* */
	int hugepages;       /* DRAM_HUGE_* */
	bool prefault;
	uint32_t victim_wait_ms; /* longest a put waits for the disk before victims
				  * are shed (doc/policies.md) */
};

enum { DRAM_POLICY_S3FIFO = 0, DRAM_POLICY_LRU = 1, DRAM_POLICY_PREFIX = 2, DRAM_POLICY_PREFIX_LEARN = 3 };
enum { DRAM_HUGE_AUTO = 0, DRAM_HUGE_THP = 1, DRAM_HUGE_OFF = 2 };

/*
 * Called for every block the DRAM tier evicts, under the block's shard
 * lock, while its bytes are still readable through view.  It must not
 * block and must not call into the DRAM tier: copy or queue what it needs,
 * or drop the block.  (The SSD tier's write-down fills this in.)
 */
typedef void (*dram_evict_fn)(void *ctx, struct dram_item *item, uint32_t ns,
			      const struct kvt_key *key, const struct iovec *view,
			      unsigned view_count, uint64_t len);
/* For the evict hook (under the shard lock it holds): reads of the block
 * since it entered DRAM (0..3, saturating), and its part table (crcs only
 * if *crcs_valid: a put may have deferred them).  Parts, or KVT_ERANGE. */
unsigned dram_item_reads_locked(struct dram_item *item);
int dram_item_parts_locked(struct dram_item *item, uint64_t *lens, uint32_t *crcs,
			   unsigned max, bool *crcs_valid);

int dram_open(struct dram **out, const struct dram_config *cfg, struct kvt_mem *mem,
	      const struct kvt_logger *log);
void dram_close(struct dram *d);
void dram_set_evict_hook(struct dram *d, dram_evict_fn fn, void *ctx);
/* Charge blocks to their namespaces' quota groups (before any put). */
void dram_set_quota(struct dram *d, struct quota *q);

/* KVT_OK, KVT_EXISTS, -ECANCELED (a delete or clear won), KVT_ETOOBIG, KVT_EFULL,
 * KVT_ECORRUPT (supplied CRCs wrong), -ENOMEM. */
int dram_put(struct dram *d, uint32_t ns, const struct kvt_key *key,
	     const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
	     unsigned publish_flags);
/* KVT_F_SEALED if the block was put sealed (fixed once published; a ref suffices). */
uint32_t dram_item_flags(struct dram_item *item);

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
int dram_reserve(struct dram *d, uint32_t ns, const struct kvt_key *key, uint64_t len,
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
/* KVT_OK, KVT_MISS, KVT_ERANGE, KVT_EBUFSMALL. */
int dram_get(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_read *rd);
/* The same from an item the caller holds a ref on (pin or publish keep_ref). */
int dram_read_item(struct dram *d, struct dram_item *item, struct dram_read *rd);

/*
 * Pin: on KVT_OK *item holds a reference, view[0..*view_count) (room for
 * DRAM_MAX_RUNS) gets the value's bytes, valid until dram_unpin, and *len
 * its length.
 */
int dram_pin(struct dram *d, uint32_t ns, const struct kvt_key *key, struct dram_item **item,
	     struct iovec *view, unsigned *view_count, uint64_t *len);
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
void dram_item_ref(struct dram *d, struct dram_item *item);
/* Each part's length into lens (no CRCs computed); the part count, or
 * KVT_ERANGE if it exceeds max.  Caller holds a ref. */
int dram_item_part_lens(struct dram *d, struct dram_item *item, uint64_t *lens, unsigned max);

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
void dram_writedown_done(struct dram *d, struct dram_item *item, bool stored);
/* Graceful stop: offer DRAM's blocks to the hook (DRAM_ADMIT_CLOSE), most
 * valuable first, at most pass_max bytes and *budget (lowered); returns the
 * bytes taken.  The caller flushes the lower tier between passes. */
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
/* A prefix lookup over keys[0..n) found the first `hits` present:
 * prefix-learn notes reuse classes for the others, which their puts will
 * read (doc/policies.md).  Nothing under the other policies. */
void dram_note_prefix(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		      size_t hits);
int dram_delete(struct dram *d, uint32_t ns, const struct kvt_key *key);
/* Leading keys present; tiers[i] set to KVT_TIER_DRAM for those (may be NULL);
 * *bytes (may be NULL) grows by their value lengths. */
int64_t dram_lookup(struct dram *d, uint32_t ns, const struct kvt_key *keys, size_t n,
		    uint8_t *tiers, uint64_t *bytes);
/* Blocks removed.  ns may be KVT_NS_ALL. */
int64_t dram_clear(struct dram *d, uint32_t ns);
/* The arena's regions (for I/O buffer registration): up to max, returns how many. */
unsigned dram_regions(struct dram *d, struct iovec *out, unsigned max);
/* Items still pinned (for close's report). */
uint64_t dram_pinned(struct dram *d);
void dram_stats(struct dram *d, kvt_stats_fn fn, void *ctx);

/* crc.c */
uint32_t crc_iov(const struct iovec *iov, unsigned n);


/* store.c: the SSD tier of an open store, or NULL (tests: fault injection). */
struct ssd;
struct ssd *store_ssd(struct kvt_store *s);

#endif /* KVT_INT_H */

/*
 * kvt_int.h - what the modules of libkvtier share and nobody else sees.
 *
 * Modules and what each owns:
 *   err.c    kvt_strerror, kvt_version, kvt_tier_name
 *   mem.c    the one allocation wrapper: counts bytes, fails the Nth call
 *   crc.c    CRC32C through ISA-L
 *   key.c    opaque and prefix-chained keys (doc/keys.md)
 *   ns.c     namespace descriptors, digests, the persisted registry
 *   dram.c   the DRAM tier: shards of index, allocator and eviction (dram.h)
 *   arena.c  the DRAM arena: mmap'd regions and their chunk allocator
 *   evict.c  S3-FIFO and LRU queues over DRAM items
 *   quota.c  quota groups: namespace -> group, byte limits and usage per tier
 *   log.c    kvt_logf; size.c kvt_parse_size; le.h the little-endian codec;
 *            kvt_now_ns (here) the one monotonic clock, kvt_deadline a
 *            timed wait's deadline
 *   store*.c the store (store_int.h): store.c handles, queues, workers;
 *            store_options.c the option table; store_tiers.c the chain;
 *            store_dispatch.c running requests; store_sync.c, store_stats.c,
 *            store_pins.c
 *   tier.h   the interface of the tiers below DRAM; tier_ssd.c,
 *            tier_remote.c, tier_shared.c its built-in implementations
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
#include <time.h>

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

/*
 * The library's clock for every timeout, deadline, rate window and
 * duration it measures: CLOCK_MONOTONIC in ns, which never jumps with the
 * wall clock.  What must be wall time uses CLOCK_REALTIME where it is
 * read: a time written to disk (ssdfmt.h created_ns), an event's
 * timestamp (kvevents.c), and the absolute deadlines of
 * pthread_cond_timedwait on a condition variable left on its default
 * clock (dram.c, kvzap.c, remote.c lane_flush, ssd.c's room waits).
 */
static inline uint64_t kvt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same clock in ms. */
static inline uint64_t kvt_now_ms(void)
{
	return kvt_now_ns() / 1000000u;
}

/* ns from now on clock, as the absolute deadline pthread_cond_timedwait
 * takes: CLOCK_REALTIME for a condition variable on its default clock,
 * CLOCK_MONOTONIC for one set to it (pthread_condattr_setclock). */
static inline struct timespec kvt_deadline(clockid_t clock, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec += (long)(ns % 1000000000u);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

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
 * Logging (log.c): routed to the callback the embedder installed.
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
	/* store.c's: KVT_NS_RETAIN, set once any registration asked (every put
	 * of the namespace carries the retain hint). */
	_Atomic bool retain;
	/* ns.c's: the embedder's word (ns_reg_set_word), 0 until set; stored
	 * under file_lock once durable, read without a lock. */
	_Atomic uint64_t word;
};

#define NS_PAGE_SHIFT 10
#define NS_PAGE_LEN (1u << NS_PAGE_SHIFT) /* entries per page */
#define NS_PAGES 1024                      /* so at most 1M - 1 namespaces */

struct ns_registry {
	pthread_mutex_t lock;             /* guards the hash and unpublished entries;
					   * never held across file I/O */
	pthread_mutex_t file_lock;        /* serializes add and load (the file) */
	struct kvt_mem *mem;
	int dir_fd;                       /* -1: memory only; not owned */
	_Atomic uint32_t count;           /* ids [1, count] are published (release) */
	/* pages[id >> NS_PAGE_SHIFT][id & (NS_PAGE_LEN-1)]: written once under
	 * lock before count is raised, never moved, so readers need no lock. */
	struct ns_entry *_Atomic pages[NS_PAGES];
	uint32_t *hash;                   /* ids by digest, open addressing, 0 empty; lock.
					   * Holds the published ids and the prepared ones
					   * (written, not yet durable): find skips the latter */
	uint32_t hash_cap;                /* slots in hash: 0 or a power of two; lock */
	uint64_t hash_secret;             /* the slot's hash key (ns_reg_init: getrandom) */
	uint32_t prepared;                /* ids (count, prepared] are prepared; lock */
	/* The append-only file (file_lock): */
	pthread_cond_t sync_cv;           /* a group commit ended */
	int fd;                           /* "namespaces" for appends, -1: not open; owned */
	bool rewrite;                     /* next write rewrites the whole file: none yet,
					   * the old format, or junk after the last record */
	bool syncing;                     /* a leader is in fdatasync, without file_lock */
	uint64_t file_off;                /* end of the records written */
	uint64_t synced_off;              /* end of the records known durable */
	uint32_t fail_epoch;              /* bumped when a group commit failed */
	int fail_err;                     /* its error */
	bool file_v3;                     /* the file is version 3 (word records) */
	uint32_t word_recs;               /* word records in the file */
	uint32_t words_live;              /* entries whose word is not 0 */
	uint64_t syncs;                   /* fdatasync calls (tests, figures) */
	uint64_t rewrites;                /* whole-file rewrites (tests) */
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
 * digest must be its SHA-256).  A new id is persisted before it becomes
 * visible: one record appended and fdatasync'ed (concurrent adds share one
 * fdatasync), or, the first time and after junk or the old format, the
 * whole file rewritten (temp + fsync + rename + fsync dir).  0, KVT_ENULL,
 * KVT_EBADLEN, KVT_EDESC (digest/canon mismatch), KVT_EFULL (ids exhausted),
 * -ENOMEM, -errno (I/O; registry unchanged).
 */
int ns_reg_add(struct ns_registry *r, const uint8_t digest[32], const char *canon,
	       uint32_t canon_len, uint32_t *id);
/* 0 with *id, KVT_MISS, KVT_ENULL.  Takes the lock. */
int ns_reg_find(struct ns_registry *r, const uint8_t digest[32], uint32_t *id);
/*
 * Set published id's word to `word` if it is `expect` (kvt_ns_set_word):
 * with a directory, durable before it shows -- one word record appended
 * and fdatasync'ed, or the whole file rewritten (the first word, after a
 * failure, or to drop stale word records).  0, KVT_EXISTS (the word was
 * not expect: nothing written), KVT_ENULL, KVT_ENONS, -ENOMEM, -errno
 * (I/O; the word unchanged).  Takes file_lock.
 */
int ns_reg_set_word(struct ns_registry *r, uint32_t id, uint64_t expect, uint64_t word);
/* Published id's word into *word: 0, KVT_ENULL, KVT_ENONS.  No lock. */
int ns_reg_word(struct ns_registry *r, uint32_t id, uint64_t *word);
/* NULL if id is not registered. */
const struct ns_entry *ns_reg_get(struct ns_registry *r, uint32_t id);
/* Frees every entry; no-op on a zeroed or already freed registry. */
void ns_reg_free(struct ns_registry *r);

/*
 * Pure parser of a registry file image (doc/keys.md, "Registry file"),
 * version 1 (whole file, exact), 2 (append-only) or 3 (append-only, with
 * word records): calls fn (may be NULL) for each namespace record in
 * order, and wfn (may be NULL) for each word record, in file order, with
 * the id of a namespace passed to fn before it; canon is not
 * NUL-terminated and points into buf.  Checks every length, the ids (1,
 * 2, ...), each CRC32C and that each digest is the SHA-256 of its canon.
 * In versions 2 and 3 a torn last record (one that fails a check and
 * reaches the end of the file) ends the records instead of failing.  *used
 * (may be NULL) gets the bytes of header and good records.  Returns the
 * namespace record count, KVT_ECORRUPT, KVT_EVERSION, -ENOMEM (OpenSSL's
 * digest context, the only allocation), or what fn or wfn returned if
 * negative.  No I/O.  Fuzzed.
 */
typedef int (*ns_rec_fn)(void *ctx, uint32_t id, const uint8_t digest[32],
			 const char *canon, uint32_t canon_len);
typedef int (*ns_word_fn)(void *ctx, uint32_t id, uint64_t word);
int ns_reg_parse(const uint8_t *buf, size_t len, ns_rec_fn fn, void *ctx);
int ns_reg_parse_ex(const uint8_t *buf, size_t len, ns_rec_fn fn, ns_word_fn wfn, void *ctx,
		    size_t *used, uint32_t *version);

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
	_Atomic uint64_t leaving;              /* DRAM: bytes of its evicted blocks on their
						* way down (in used until their write ends) */
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
/* One group's (1..KVT_QUOTA_GROUPS-1; nothing for an unknown one). */
void quota_group_stats(struct quota *q, uint32_t group, kvt_stats_fn fn, void *ctx);

/* crc.c */
uint32_t crc_iov(const struct iovec *iov, unsigned n);
/* Copy len bytes from src to dst and return their CRC32C chained onto crc,
 * reading src once; stream: non-temporal stores for the destination (a
 * large value not read again soon). */
uint32_t crc_copy(uint32_t crc, void *dst, const void *src, size_t len, bool stream);


/* store.c: the SSD tier of an open store, or NULL (tests: fault injection). */
struct ssd;
struct ssd *store_ssd(struct kvt_store *s);

#endif /* KVT_INT_H */

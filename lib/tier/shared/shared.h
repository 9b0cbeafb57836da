/*
 * shared.h - the shared tier (G4): blocks on a directory that many nodes
 * mount (shdir.c) or in an S3 bucket (shs3.c), below the SSD tier (or
 * below DRAM when there is no SSD).  doc/shared.md.
 *
 * The store (store.c) calls these; every call queues work for the tier's
 * own thread pool ("kvt-shared", option shared.threads) and returns at
 * once, so that no put and no caller waits for the shared file system.
 * Callbacks run on a pool thread; they must not block and must not call
 * shared_* (they may call dram_* and remote_*).
 *
 * What goes down (write-down policy):
 *   - every put of a namespace registered with KVT_NS_PERSISTENT (and with
 *     shared.admission=always, every put);
 *   - blocks evicted from DRAM that were read at least twice there (the
 *     DRAM evict hook: the bytes are copied out under the shard lock,
 *     within shared.writedown_max, else shed and counted);
 *   - blocks dropped by SSD segment eviction that were promoted from SSD
 *     at least twice (the SSD evict hook, shared_ssd_hook: the SSD tier
 *     reads the record back from the evicted segment and hands the
 *     buffer over; same budget).
 * Work is served in priority order: demand reads, then lookups and
 * prefetches, then write-downs.
 */
#ifndef KVT_SHARED_H
#define KVT_SHARED_H

#include "dram.h"
#include "kvt_int.h"
#include "tier.h"

struct shared;

enum { SHARED_ADMIT_PERSISTENT = 0, SHARED_ADMIT_ALWAYS = 1 };

struct shared_config {
	char *dir;               /* the shared directory; owned by the store */
	/* The S3 backend instead of dir (strings owned by the store): */
	char *s3_endpoint;       /* "http://host:port" */
	char *s3_bucket;
	char *s3_region;         /* NULL: the credentials', else us-east-1 */
	char *s3_credentials;    /* file; NULL: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY */
	unsigned s3_conns;       /* 0: SHARED_DEF_S3_CONNS */
	unsigned s3_timeout_ms;  /* per request; 0: SHARED_DEF_S3_TIMEOUT_MS */
	unsigned s3_attempts;    /* tries of a transient failure; 0: SHARED_DEF_S3_ATTEMPTS */
	unsigned s3_retry_base_ms; /* backoff base; 0: SHARED_DEF_S3_RETRY_BASE_MS */
	uint64_t s3_part_size;   /* multipart above; 0: SHARED_DEF_S3_PART_SIZE */
	bool s3_sign_payload;
	uint64_t budget;         /* bytes; 0: no limit (kvt_shared_gc) */
	uint64_t max_age_s;      /* seconds; 0: no limit */
	unsigned threads;        /* pool threads (parallel stats and I/O) */
	int admission;           /* SHARED_ADMIT_* */
	uint64_t wd_max_bytes;   /* write-down bytes queued before shedding */
	bool direct;             /* try O_DIRECT */
	uint64_t debug_delay_ns; /* tests: a worker waits this long before each write-down */
	uint64_t debug_read_delay_ns; /* tests: and between a promotion's header and reservation */
};

#define SHARED_DEF_THREADS 8
#define SHARED_DEF_WD_MAX (UINT64_C(256) << 20)
#define SHARED_DEF_S3_CONNS 16
#define SHARED_DEF_S3_TIMEOUT_MS 10000
#define SHARED_DEF_S3_ATTEMPTS 3        /* the AWS SDKs' standard mode */
#define SHARED_DEF_S3_RETRY_BASE_MS 100 /* the AWS SDKs' base delay */
#define SHARED_DEF_S3_PART_SIZE (UINT64_C(64) << 20)

/* 0, -ENOMEM, -errno (the directory).  reg and dram must outlive it. */
int shared_open(struct shared **out, const struct shared_config *cfg, struct dram *dram,
		struct ns_registry *reg, struct kvt_mem *mem, const struct kvt_logger *log);
/* Run what is queued, stop the threads; later calls fail or decline.
 * The struct stays (the DRAM evict hook may still call in) until
 * shared_free, after the DRAM tier is closed.  NULL is a no-op. */
void shared_stop(struct shared *sh);
void shared_free(struct shared *sh);

int shared_set_persistent(struct shared *sh, uint32_t ns);

/* A put of (ns, key) reached DRAM: write it down if the policy says so
 * (pins the DRAM block until written; sheds when over budget). */
void shared_put(struct shared *sh, uint32_t ns, const struct kvt_key *key);

/* The DRAM evict hook (dram_set_evict_hook); ctx is the struct shared. */
void shared_evicted(void *ctx, const struct dram_victim *v);

/* The SSD evict hook (ssd_set_evict_hook); ctx is the struct shared. */
struct ssd_evict_hook;
extern const struct ssd_evict_hook shared_ssd_hook;

/* Promote a block: the contract of ssd_promote (cb with KVT_OK and a ref on
 * the published item, or KVT_MISS and NULL; KVT_EXISTS if DRAM already
 * had it when the read was done).  prio: IO_PRIO_DEMAND or
 * IO_PRIO_PREFETCH.  0 if cb will run, -ENOMEM, KVT_ECLOSED. */
int shared_get(struct shared *sh, uint32_t ns, const struct kvt_key *key, int prio,
	       tier_got_fn cb, void *ctx);

/* One part of a block straight into dst[0..dst_count), nothing promoted:
 * S3 reads just the header and the part's bytes (ranged GETs).  cb(ctx,
 * res: status, count = part length copied, the value's length, its flags)
 * runs on a pool thread with KVT_OK, KVT_MISS, KVT_ERANGE or KVT_EBUFSMALL
 * (the lengths set).  0 if cb will run; -ENOTSUP if this backend reads whole
 * blocks only (the directory: promote with shared_get), -ENOMEM,
 * KVT_ECLOSED.  dst must stay valid until cb. */
int shared_get_part(struct shared *sh, uint32_t ns, const struct kvt_key *key, uint32_t part,
		    const struct iovec *dst, unsigned dst_count, int prio, tier_done_fn cb,
		    void *ctx);

/* Leading keys of keys[0..n) present (stats issued in parallel over the
 * pool), tiers[0..n) (may be NULL) set to KVT_TIER_SHARED for them;
 * cb(ctx, res: status KVT_OK, count, load_ns).  0 if cb will run,
 * -ENOMEM, KVT_ECLOSED. */
int shared_lookup(struct shared *sh, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		  uint8_t *tiers, tier_done_fn cb, void *ctx);

/* Synchronous (they touch one name or rename one directory). */
int shared_delete(struct shared *sh, uint32_t ns, const struct kvt_key *key);
int64_t shared_clear(struct shared *sh, uint32_t ns);
/* Wait until every write-down queued before the call is done. */
void shared_flush(struct shared *sh);
void shared_stats(struct shared *sh, kvt_stats_fn fn, void *ctx);
/* Tests: the backend (fault hooks); NULL when the other one is in use. */
struct shdir *shared_dir(struct shared *sh);
struct shs3 *shared_s3(struct shared *sh);

#endif

/*
 * shared.c - the shared tier (G4) of a store: policy, thread pool and
 * promotions over one of two backends: a shared directory (shdir.c) or an
 * S3 bucket (shs3.c).  shared.h says what the store calls and what goes
 * down; doc/shared.md has the design.
 *
 * Owns: the pool ("kvt-shared" threads) and its three priority lists
 * (demand gets; lookups and prefetches; write-downs and gc), the
 * persistent-namespace set, write-down accounting, the backend (opened
 * and closed here) and the tier's stats.
 *
 * Backends: struct sh_backend below is everything the tier asks of one
 * (stat, write, read into a DRAM reservation, remove, clear, gc, stats);
 * the tier itself (policy, pool, lookups, promotions) is the same for
 * both.  Both store the same block format (doc/shared.md), so a bucket
 * synced to a directory (or back) stays readable.
 *
 * Lookups: a lookup of n keys is one job that every idle pool thread joins
 * (up to n): each takes the next key index from an atomic counter and
 * stats its file, so on a network file system n stats cost about
 * n / threads round trips, not n.  A thread stops taking keys past the
 * first miss found so far.  The last thread out counts the leading hits
 * and calls back.
 *
 * Lock order: pool.lock is a leaf; callbacks run without it.  The DRAM
 * evict hook runs under a DRAM shard lock and takes only pool.lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "io.h"
#include "shared.h"
#include "shdir.h"
#include "shs3.h"
#include "ssd.h"

enum { T_GET = 1, T_GET_PART, T_LOOKUP, T_WD_REF, T_WD_BUF, T_GC };
enum { P_DEMAND = 0, P_MID = 1, P_LOW = 2, P_COUNT = 3 };

struct sh_lookup {
	struct shared *sh;
	const uint8_t *digest;
	const struct kvt_key *keys;
	uint32_t n;
	uint8_t *tiers;
	uint8_t *present;          /* n bytes: 1 hit, 0 miss (valid below `first_miss`) */
	uint64_t *lens;            /* n file lengths */
	_Atomic uint32_t next;     /* next key index to stat */
	_Atomic uint32_t first_miss; /* lowest index found missing so far */
	_Atomic uint32_t workers;  /* tasks of this job not yet finished */
	tier_done_fn cb;
	void *ctx;
};

struct sh_task {
	struct sh_task *next;
	int type;
	uint32_t ns;
	struct kvt_key key;
	/* T_GET */
	int prio;
	tier_got_fn gcb;
	void *ctx;
	/* T_WD_REF: a DRAM ref; T_WD_BUF: a private copy */
	struct dram_item *item;
	uint8_t *buf;              /* T_WD_BUF: the value is buf[buf_off, buf_off + len) */
	uint64_t buf_cap, buf_off, len;
	uint32_t part_count, flags;
	uint64_t *part_lens;       /* T_WD_BUF: part_count entries (kvt_mem) */
	uint32_t *crcs;            /* T_WD_BUF: valid if crcs_valid */
	bool crcs_valid;
	/* T_LOOKUP */
	struct sh_lookup *lk;
	/* T_GET_PART: part number `part` into dst */
	uint32_t part;
	const struct iovec *dst;
	unsigned dst_count;
	tier_done_fn pcb;
	/* Write-downs: sh->gen when the bytes were taken (a delete or clear
	 * of a higher generation wins: wd_dropped_locked).  Every task: on
	 * sh->running while a worker runs it. */
	uint64_t gen;
	struct sh_task *r_prev, *r_next;
};

/*
 * A delete or clear, remembered for the write-downs queued before it
 * (design.md "Semantics": delete and clear win over a racing put).  A
 * ring of SH_TOMBS, exact; one it overwrites is folded into old_gen[], the
 * latest generation of the deletes and clears forgotten, by a hash of
 * their key (clear: of their namespace), so a write-down is never written
 * after a delete it could not check -- at worst one whose key shares a
 * slot with a forgotten delete is not written down.  (Until 2026-12-04 an
 * overwrite dropped every write-down as old as it: 256 deletes of other
 * blocks, a tenant's DELs of missing keys, cancelled every tenant's
 * queued write-downs; test_shared writedown_vs_other_deletes.)
 */
#define SH_TOMBS 256
#define SH_OLD_GENS 4096
struct sh_tomb {
	uint64_t gen;
	uint32_t ns;
	bool clear;                /* the namespace's blocks, not only key */
	struct kvt_key key;
};

struct shared {
	struct shared_config cfg;
	struct dram *dram;
	struct ns_registry *reg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	const struct sh_backend *be; /* dir_backend or s3_backend */
	struct shdir *sd;            /* the directory backend, or NULL */
	struct shs3 *s3;             /* the S3 backend, or NULL */
	_Atomic uint8_t *persistent; /* bitmap over namespace ids */
	size_t persistent_len;

	pthread_mutex_t lock;        /* the lists, wd_bytes, inflight counts, stop */
	pthread_cond_t cond;         /* work arrived or stop */
	pthread_cond_t idle;         /* a write-down finished (flush) */
	struct sh_task *head[P_COUNT], *tail[P_COUNT];
	uint64_t wd_bytes;           /* queued or in flight; lock */
	uint64_t wd_inflight;        /* write-down tasks queued or running; lock */
	uint64_t since_gc_bytes;     /* written since the last gc; lock */
	bool gc_queued;              /* lock */
	bool stop;                   /* lock */
	pthread_t threads[64];
	unsigned nthreads;
	/* Deletes and clears against the pool (lock; gen read without it). */
	_Atomic uint64_t gen;        /* bumped by each delete and clear */
	uint64_t drop_below;         /* write-downs of a lower gen are dropped (clear all) */
	uint64_t old_gen[SH_OLD_GENS]; /* forgotten tombs' latest gen, by sh_old_slot */
	uint64_t tomb_count;         /* tombs[tomb_count % SH_TOMBS] is the next */
	struct sh_tomb tombs[SH_TOMBS];
	struct sh_task *running;     /* tasks a worker runs now */
	uint64_t wd_running;         /* of them, write-downs not dropped: shared.wd_running; lock */
	pthread_cond_t ran;          /* a task left running */
	_Atomic uint64_t bps;        /* last measured read throughput, bytes/s (0: none yet) */

	_Atomic uint64_t part_hits, hits, misses, promote_full, wd_queued, wd_shed, wd_done,
		wd_failed, wd_evicted, wd_ssd_evicted, lookups, lookup_keys, gc_runs, gc_removed,
		wd_cancelled;
	/* A write-down failed since the last that succeeded: said once in the
	 * log (wd_finished), said again after one succeeds. */
	_Atomic bool wd_failing;
};

#define A(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)
#define AL(x) atomic_load_explicit(&(x), memory_order_relaxed)

static const uint8_t *ns_digest_of(struct shared *sh, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(sh->reg, ns);
	return e ? e->digest : NULL;
}

static bool ns_persistent(struct shared *sh, uint32_t ns)
{
	if (sh->cfg.admission == SHARED_ADMIT_ALWAYS)
		return true;
	if ((size_t)(ns >> 3) >= sh->persistent_len)
		return false;
	return (atomic_load_explicit(&sh->persistent[ns >> 3], memory_order_relaxed) >> (ns & 7)) &
	       1;
}

int shared_set_persistent(struct shared *sh, uint32_t ns)
{
	if ((size_t)(ns >> 3) >= sh->persistent_len)
		return KVT_ENONS;
	atomic_fetch_or(&sh->persistent[ns >> 3], (uint8_t)(1u << (ns & 7)));
	return 0;
}

/* ------------------------------------------------------------------------
 * Backends
 */

/* One promotion's state: what the backend read, and the DRAM reservation
 * the value went into (not yet published). */
struct sh_read {
	struct shared *sh;
	uint32_t ns;
	const struct kvt_key *key;
	struct dram_item *item;    /* reserved by read_reserve, or NULL */
	bool full;                 /* DRAM had no room */
	struct shdir_hdr h;        /* part_lens/crcs point at the arrays below or rd's */
	uint64_t part_lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct shdir_rd rd;        /* the directory backend's open file */
};

struct sh_backend {
	int (*stat)(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		    uint64_t *len);
	/* KVT_OK, KVT_EXISTS (there already), -errno. */
	int (*write)(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		     const struct iovec *view, unsigned vc, uint64_t len, unsigned np,
		     const uint64_t *lens, const uint32_t *crcs, uint32_t flags);
	/* Read rb->key into a reservation made through read_reserve; KVT_OK
	 * leaves rb->item reserved and rb->h filled; anything else is a miss
	 * (the caller aborts rb->item if set). */
	int (*read)(struct shared *sh, const uint8_t *dg, struct sh_read *rb);
	/* One part into dst (shared_get_part): its length, or a status;
	 * NULL: whole blocks only. */
	int64_t (*read_part)(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
			     uint32_t part, const struct iovec *dst, unsigned dst_count,
			     struct shdir_hdr *h);
	int (*remove)(struct shared *sh, const uint8_t *dg, const struct kvt_key *key);
	int64_t (*clear)(struct shared *sh, const uint8_t *dg);
	int (*gc)(struct shared *sh, struct kvt_shared_gc_result *res);
	void (*stats)(struct shared *sh, kvt_stats_fn fn, void *ctx);
};

static void debug_delay(uint64_t ns);

/* Where a block's value goes: a DRAM reservation for rb's key.  (The
 * block's file is open, or its GET under way, since before this: a delete
 * may unlink it and pass over DRAM meanwhile -- against_pool_end.) */
static int read_reserve(struct sh_read *rb, const struct shdir_hdr *h, struct iovec *view,
			unsigned *vc)
{
	struct shared *sh = rb->sh;
	int ret;
	debug_delay(sh->cfg.debug_read_delay_ns); /* tests: the delete's moment */
	ret = dram_reserve(sh->dram, rb->ns, rb->key, h->value_len,
			       h->part_count > 1 ? h->part_lens : NULL, h->part_count, &rb->item,
			       view, vc);
	if (ret != KVT_OK) {
		rb->item = NULL;
		rb->full = ret != KVT_EXISTS;
	}
	return ret;
}

static void stats_common(kvt_stats_fn fn, void *ctx, uint64_t stats_issued, uint64_t writes,
			 uint64_t write_bytes, uint64_t write_exists, uint64_t write_errors,
			 uint64_t reads, uint64_t read_bytes, uint64_t read_errors,
			 uint64_t corrupt, uint64_t bad_removed, uint64_t bad_kept)
{
	fn(ctx, "shared.stats_issued", stats_issued, NULL);
	fn(ctx, "shared.writes", writes, NULL);
	fn(ctx, "shared.write_bytes", write_bytes, NULL);
	fn(ctx, "shared.write_exists", write_exists, NULL);
	fn(ctx, "shared.write_errors", write_errors, NULL);
	fn(ctx, "shared.reads", reads, NULL);
	fn(ctx, "shared.read_bytes", read_bytes, NULL);
	fn(ctx, "shared.read_errors", read_errors, NULL);
	fn(ctx, "shared.corrupt", corrupt, NULL);
	fn(ctx, "shared.bad_removed", bad_removed, NULL);
	fn(ctx, "shared.bad_kept", bad_kept, NULL);
}

/* The directory backend (shdir.c). */

static int dir_stat(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		    uint64_t *len)
{
	return shdir_stat(sh->sd, dg, key, len);
}

static int dir_write(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		     const struct iovec *view, unsigned vc, uint64_t len, unsigned np,
		     const uint64_t *lens, const uint32_t *crcs, uint32_t flags)
{
	return shdir_write(sh->sd, dg, key, view, vc, len, np, lens, crcs, flags);
}

static int dir_read(struct shared *sh, const uint8_t *dg, struct sh_read *rb)
{
	struct shdir_rd *rd = &rb->rd;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned vc = 0;
	int ret = shdir_rd_open(sh->sd, dg, rb->key, rd);
	if (ret == KVT_ECORRUPT) {
		shdir_rd_bad(sh->sd, rd);
		shdir_rd_close(rd);
	}
	if (ret != KVT_OK)
		return ret;
	rb->h = rd->h;
	ret = read_reserve(rb, &rd->h, view, &vc);
	if (ret == KVT_OK) {
		ret = shdir_rd_value(sh->sd, rd, view, vc);
		if (ret == KVT_ECORRUPT)
			shdir_rd_bad(sh->sd, rd);
	}
	/* A block in use is young: refresh its age for the collector, at most
	 * about once per half max_age (a write on the shared file system). */
	if (ret == KVT_OK && sh->cfg.max_age_s) {
		struct stat st;
		if (fstat(rd->fd, &st) == 0 &&
		    time(NULL) - st.st_mtime > (time_t)(sh->cfg.max_age_s / 2))
			futimens(rd->fd, NULL);
	}
	shdir_rd_close(rd);
	return ret;
}

static int dir_remove(struct shared *sh, const uint8_t *dg, const struct kvt_key *key)
{
	return shdir_remove(sh->sd, dg, key);
}

static int64_t dir_clear(struct shared *sh, const uint8_t *dg)
{
	return shdir_clear(sh->sd, dg);
}

static int dir_gc(struct shared *sh, struct kvt_shared_gc_result *res)
{
	return kvt_shared_gc(sh->cfg.dir, sh->cfg.budget, sh->cfg.max_age_s, res);
}

static void dir_stats(struct shared *sh, kvt_stats_fn fn, void *ctx)
{
	struct shdir_stats *st = shdir_stats(sh->sd);
	fn(ctx, "shared.o_direct", shdir_o_direct(sh->sd), NULL);
	stats_common(fn, ctx, AL(st->stats_issued), AL(st->writes), AL(st->write_bytes),
		     AL(st->write_exists), AL(st->write_errors), AL(st->reads), AL(st->read_bytes),
		     AL(st->read_errors), AL(st->corrupt), AL(st->bad_removed), AL(st->bad_kept));
}

static const struct sh_backend dir_backend = {
	dir_stat, dir_write, dir_read, NULL, dir_remove, dir_clear, dir_gc, dir_stats,
};

/* The S3 backend (shs3.c). */

static int s3_stat(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		   uint64_t *len)
{
	return shs3_blk_stat(sh->s3, dg, key, len);
}

static int s3_write(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
		    const struct iovec *view, unsigned vc, uint64_t len, unsigned np,
		    const uint64_t *lens, const uint32_t *crcs, uint32_t flags)
{
	return shs3_blk_write(sh->s3, dg, key, view, vc, len, np, lens, crcs, flags);
}

static int s3_reserve(void *ctx, const struct shdir_hdr *h, struct iovec *view, unsigned *vc)
{
	return read_reserve(ctx, h, view, vc);
}

static int s3_read(struct shared *sh, const uint8_t *dg, struct sh_read *rb)
{
	int ret;
	rb->h.part_lens = rb->part_lens;
	rb->h.crcs = rb->crcs;
	ret = shs3_blk_read(sh->s3, dg, rb->key, &rb->h, s3_reserve, rb);
	/* A bad object goes (S3 has no delete-if-unchanged: a good copy put
	 * in between is lost too, and written down again later). */
	if (ret == KVT_ECORRUPT && shs3_blk_remove(sh->s3, dg, rb->key) == KVT_OK)
		A(shs3_blk_stats(sh->s3)->bad_removed);
	return ret;
}

static int s3_remove(struct shared *sh, const uint8_t *dg, const struct kvt_key *key)
{
	uint64_t len;
	int ret = shs3_blk_stat(sh->s3, dg, key, &len); /* DELETE says 204 either way */
	if (ret != KVT_OK)
		return ret;
	return shs3_blk_remove(sh->s3, dg, key);
}

static int64_t s3_clear(struct shared *sh, const uint8_t *dg)
{
	return shs3_blk_clear(sh->s3, dg);
}

static int s3_gc(struct shared *sh, struct kvt_shared_gc_result *res)
{
	return shs3_gc(sh->s3, sh->cfg.budget, sh->cfg.max_age_s, res);
}

static void s3_stats(struct shared *sh, kvt_stats_fn fn, void *ctx)
{
	struct shs3_blk_stats *b = shs3_blk_stats(sh->s3);
	struct shs3_stats *st = shs3_stats(sh->s3);
	fn(ctx, "shared.o_direct", 0, NULL);
	stats_common(fn, ctx, AL(b->stats_issued), AL(b->writes), AL(b->write_bytes),
		     AL(b->write_exists), AL(b->write_errors), AL(b->reads), AL(b->read_bytes),
		     AL(b->read_errors), AL(b->corrupt), AL(b->bad_removed), 0);
	fn(ctx, "shared.s3_requests", AL(st->requests), NULL);
	fn(ctx, "shared.s3_errors", AL(st->errors), NULL);
	fn(ctx, "shared.s3_timeouts", AL(st->timeouts), NULL);
	fn(ctx, "shared.s3_denied", AL(st->denied), NULL);
	fn(ctx, "shared.s3_conns_opened", AL(st->conns_opened), NULL);
	fn(ctx, "shared.s3_multipart_parts", AL(st->multipart_parts), NULL);
	fn(ctx, "shared.s3_retries", AL(st->retries), NULL);
	fn(ctx, "shared.s3_retry_giveups", AL(st->retry_giveups), NULL);
}

static int64_t s3_read_part(struct shared *sh, const uint8_t *dg, const struct kvt_key *key,
			    uint32_t part, const struct iovec *dst, unsigned dst_count,
			    struct shdir_hdr *h)
{
	int64_t ret = shs3_blk_read_part(sh->s3, dg, key, part, dst, dst_count, h);
	if (ret == KVT_ECORRUPT && shs3_blk_remove(sh->s3, dg, key) == KVT_OK)
		A(shs3_blk_stats(sh->s3)->bad_removed); /* as s3_read */
	return ret;
}

static const struct sh_backend s3_backend = {
	s3_stat, s3_write, s3_read, s3_read_part, s3_remove, s3_clear, s3_gc, s3_stats,
};

/* ------------------------------------------------------------------------
 * The pool
 */

/* Queue t.  Returns false (t not queued) once stopping.  Locked. */
static bool enqueue_locked(struct shared *sh, struct sh_task *t, int p)
{
	if (sh->stop)
		return false;
	t->next = NULL;
	if (sh->tail[p])
		sh->tail[p]->next = t;
	else
		sh->head[p] = t;
	sh->tail[p] = t;
	pthread_cond_signal(&sh->cond);
	return true;
}

static bool enqueue(struct shared *sh, struct sh_task *t, int p)
{
	pthread_mutex_lock(&sh->lock);
	bool ok = enqueue_locked(sh, t, p);
	pthread_mutex_unlock(&sh->lock);
	return ok;
}

static void task_free(struct shared *sh, struct sh_task *t)
{
	if (t->buf)
		kvt_mem_free(sh->mem, t->buf, t->buf_cap);
	if (t->part_lens)
		kvt_mem_free(sh->mem, t->part_lens, t->part_count * sizeof(uint64_t));
	if (t->crcs)
		kvt_mem_free(sh->mem, t->crcs, t->part_count * sizeof(uint32_t));
	kvt_mem_free(sh->mem, t, sizeof(*t));
}

/* A promotion: read the block into a DRAM reservation, check, publish. */
static void run_get(struct shared *sh, struct sh_task *t)
{
	struct sh_read *rb = kvt_mem_calloc(sh->mem, 1, sizeof(*rb));
	const uint8_t *dg = ns_digest_of(sh, t->ns);
	struct dram_item *item = NULL;
	int ret = KVT_MISS;
	uint64_t t0 = kvt_now_ns();

	if (!rb || !dg)
		goto out;
	rb->sh = sh;
	rb->ns = t->ns;
	rb->key = &t->key;
	ret = sh->be->read(sh, dg, rb);
	if (ret != KVT_OK) {
		if (rb->item)
			dram_abort(sh->dram, rb->item);
		if (rb->full)
			A(sh->promote_full);
		ret = KVT_MISS; /* a block that reached DRAM meanwhile is served from there */
		goto out;
	}
	item = rb->item;
	{
		uint64_t dt = kvt_now_ns() - t0, len = rb->h.value_len;
		if (dt > 0 && len >= (1u << 16))
			atomic_store_explicit(&sh->bps, (uint64_t)((double)len * 1e9 / (double)dt),
					      memory_order_relaxed);
	}
	ret = dram_publish(sh->dram, item, rb->h.crcs, rb->h.part_lens,
			   DRAM_ON_LOWER | DRAM_PROMOTED |
				   ((rb->h.flags & KVT_F_SEALED) ? DRAM_SEALED : 0),
			   true);
	if (ret != KVT_OK) {
		item = NULL; /* a delete or clear won: the item is gone */
		ret = KVT_MISS;
	}
out:
	if (rb)
		kvt_mem_free(sh->mem, rb, sizeof(*rb));
	if (ret == KVT_OK)
		A(sh->hits);
	else
		A(sh->misses);
	t->gcb(t->ctx, ret, ret == KVT_OK ? item : NULL);
}

static void shared_part_done(struct sh_task *t, int status, uint64_t len, uint64_t value_len,
			     uint32_t flags)
{
	struct tier_result res = { .status = status, .count = len, .value_len = value_len,
				   .value_flags = flags };
	t->pcb(t->ctx, &res);
}

/* A part read: header and part only, into the caller's buffers. */
static void run_get_part(struct shared *sh, struct sh_task *t)
{
	uint64_t lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct shdir_hdr h = { .part_lens = lens, .crcs = crcs };
	const uint8_t *dg = ns_digest_of(sh, t->ns);
	int64_t ret = KVT_MISS;

	if (dg)
		ret = sh->be->read_part(sh, dg, &t->key, t->part, t->dst, t->dst_count, &h);
	if (ret >= 0) {
		A(sh->part_hits);
		shared_part_done(t, KVT_OK, (uint64_t)ret, h.value_len, h.flags & KVT_F_SEALED);
	} else if (ret == KVT_ERANGE || ret == KVT_EBUFSMALL) {
		shared_part_done(t, (int)ret, 0, h.value_len, h.flags & KVT_F_SEALED);
	} else {
		A(sh->misses); /* corrupt, gone, failed: a miss, counted by shs3 */
		shared_part_done(t, KVT_MISS, 0, 0, 0);
	}
}

/* One worker's share of a lookup job. */
static void run_lookup(struct shared *sh, struct sh_lookup *lk)
{
	for (;;) {
		uint32_t i = atomic_fetch_add(&lk->next, 1);
		if (i >= lk->n || i > atomic_load(&lk->first_miss))
			break;
		uint64_t len = 0;
		int ret = sh->be->stat(sh, lk->digest, &lk->keys[i], &len);
		lk->present[i] = ret == KVT_OK;
		lk->lens[i] = len;
		if (ret != KVT_OK) {
			uint32_t fm = atomic_load(&lk->first_miss);
			while (i < fm && !atomic_compare_exchange_weak(&lk->first_miss, &fm, i))
				;
		}
	}
	if (atomic_fetch_sub(&lk->workers, 1) != 1)
		return;
	/* Last one out: every index below first_miss was statted and hit. */
	uint32_t count = atomic_load(&lk->first_miss);
	uint64_t bytes = 0;
	if (count > lk->n)
		count = lk->n;
	for (uint32_t i = 0; i < count; i++) {
		bytes += lk->lens[i];
		if (lk->tiers)
			lk->tiers[i] = KVT_TIER_SHARED;
	}
	if (lk->tiers)
		memset(lk->tiers + count, KVT_TIER_NONE, lk->n - count);
	uint64_t m = AL(sh->bps);
	double bps = m > 0 ? (double)m : 500e6; /* before any read: a guess */
	tier_done_fn cb = lk->cb;
	void *ctx = lk->ctx;
	struct tier_result res = { .status = KVT_OK, .count = count,
				   .load_ns = (uint64_t)((double)bytes * 1e9 / bps) };
	kvt_mem_free(sh->mem, lk->present, lk->n);
	kvt_mem_free(sh->mem, lk->lens, lk->n * sizeof(uint64_t));
	kvt_mem_free(sh->mem, lk, sizeof(*lk));
	cb(ctx, &res);
}

static void wd_finished(struct shared *sh, uint64_t len, int ret)
{
	bool gc = false;
	if (ret == KVT_OK || ret == KVT_EXISTS) {
		A(sh->wd_done);
		if (atomic_load_explicit(&sh->wd_failing, memory_order_relaxed) &&
		    atomic_exchange(&sh->wd_failing, false))
			kvt_logf(sh->log, KVT_LOG_INFO, "shared tier: write-downs succeed again");
	} else if (ret == -ECANCELED) {
		A(sh->wd_cancelled);
	} else {
		A(sh->wd_failed);
		/* A full shared file system (ENOSPC, EDQUOT) or a failing one:
		 * the block stays where it was, the write-down is lost.  Said
		 * once, not per block (until session 45 never: only
		 * shared.wd_failed and shared.write_errors told). */
		if (ret != -ENOENT /* the block went meanwhile */ &&
		    !atomic_exchange(&sh->wd_failing, true))
			kvt_logf(sh->log, KVT_LOG_WARN,
				 "shared tier: a write-down failed (%s); the blocks are not "
				 "shared (stat shared.wd_failed), said again once writes "
				 "succeed and fail anew", kvt_strerror(ret));
	}
	pthread_mutex_lock(&sh->lock);
	sh->wd_bytes -= len;
	sh->wd_inflight--;
	if (ret == KVT_OK)
		sh->since_gc_bytes += len;
	/* Over budget by an eighth since the last pass: collect. */
	if (sh->cfg.budget && !sh->gc_queued && sh->since_gc_bytes > sh->cfg.budget / 8)
		gc = true, sh->gc_queued = true, sh->since_gc_bytes = 0;
	pthread_cond_broadcast(&sh->idle);
	pthread_mutex_unlock(&sh->lock);
	if (gc) {
		struct sh_task *t = kvt_mem_calloc(sh->mem, 1, sizeof(*t));
		if (t) {
			t->type = T_GC;
			if (!enqueue(sh, t, P_LOW))
				task_free(sh, t);
		}
	}
}

/* Tests (shared.debug_write_delay_ms, shared.debug_read_delay_ms): a slow
 * shared file system, the task taken by its worker. */
static void debug_delay(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
	while (ns && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void wd_debug_delay(struct shared *sh)
{
	debug_delay(sh->cfg.debug_delay_ns);
}

static void run_wd_ref(struct shared *sh, struct sh_task *t)
{
	uint64_t lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct iovec view[DRAM_MAX_RUNS];
	struct kvt_key key;
	uint32_t ns;
	uint64_t len;
	const uint8_t *dg;
	int np, ret = -ENOENT;

	wd_debug_delay(sh);
	np = dram_item_meta(sh->dram, t->item, &ns, &key, lens, crcs, KVT_PARTS_MAX);
	dg = ns_digest_of(sh, ns);
	if (np > 0 && dg && dram_item_alive(sh->dram, t->item)) {
		unsigned vc = dram_item_view(sh->dram, t->item, view, &len);
		ret = sh->be->write(sh, dg, &key, view, vc, len, (unsigned)np, lens, crcs,
				    dram_item_flags(t->item));
	}
	dram_unpin(sh->dram, t->item);
	wd_finished(sh, t->len, ret);
}

static void run_wd_buf(struct shared *sh, struct sh_task *t)
{
	const uint8_t *dg = ns_digest_of(sh, t->ns);
	struct iovec v = { t->buf + t->buf_off, t->len };
	int ret = -ENOENT;
	wd_debug_delay(sh);
	if (!t->crcs_valid) {
		uint64_t off = t->buf_off;
		for (uint32_t p = 0; p < t->part_count; p++) {
			t->crcs[p] = kvt_crc32c(0, t->buf + off, t->part_lens[p]);
			off += t->part_lens[p];
		}
	}
	if (dg)
		ret = sh->be->write(sh, dg, &t->key, &v, 1, t->len, t->part_count, t->part_lens,
				    t->crcs, t->flags);
	wd_finished(sh, t->len, ret);
}

static void run_gc(struct shared *sh)
{
	struct kvt_shared_gc_result res;
	if (sh->be->gc(sh, &res) == 0) {
		A(sh->gc_runs);
		atomic_fetch_add(&sh->gc_removed, res.removed_files);
	}
	pthread_mutex_lock(&sh->lock);
	sh->gc_queued = false;
	pthread_mutex_unlock(&sh->lock);
}

/* old_gen[]'s slot of a forgotten delete of (ns, key), or of a clear of
 * ns (key NULL). */
static unsigned sh_old_slot(uint32_t ns, const struct kvt_key *key)
{
	uint32_t h = kvt_crc32c(0, &ns, sizeof(ns));
	if (key)
		h = kvt_crc32c(h, key->bytes, key->len);
	else
		h = kvt_crc32c(h, "\0clear", 6);
	return h % SH_OLD_GENS;
}

/* Whether a write-down of (ns, key) whose bytes were taken at generation
 * gen lost to a delete or clear since.  Locked. */
static bool wd_dropped_locked(const struct shared *sh, uint32_t ns, const struct kvt_key *key,
			      uint64_t gen)
{
	if (gen < sh->drop_below || gen < sh->old_gen[sh_old_slot(ns, key)] ||
	    gen < sh->old_gen[sh_old_slot(ns, NULL)])
		return true;
	for (uint64_t i = sh->tomb_count; i-- > 0 && sh->tomb_count - i <= SH_TOMBS;) {
		const struct sh_tomb *tb = &sh->tombs[i % SH_TOMBS];
		if (tb->gen <= gen)
			break; /* the ring is in generation order */
		if (tb->ns != ns)
			continue;
		if (tb->clear ||
		    (tb->key.len == key->len && memcmp(tb->key.bytes, key->bytes, key->len) == 0))
			return true;
	}
	return false;
}

/* A delete (key) or clear (key NULL; ns KVT_NS_ALL: everything) begins:
 * the write-downs taken before it are dropped.  Locked. */
static void tomb_add_locked(struct shared *sh, uint32_t ns, const struct kvt_key *key)
{
	uint64_t gen = atomic_fetch_add(&sh->gen, 1) + 1;
	struct sh_tomb *tb;
	if (ns == KVT_NS_ALL) {
		sh->drop_below = gen;
		return;
	}
	tb = &sh->tombs[sh->tomb_count % SH_TOMBS];
	if (sh->tomb_count >= SH_TOMBS) { /* forgotten: into its slot (gens only rise) */
		unsigned o = sh_old_slot(tb->ns, tb->clear ? NULL : &tb->key);
		if (tb->gen > sh->old_gen[o])
			sh->old_gen[o] = tb->gen;
	}
	tb->gen = gen;
	tb->ns = ns;
	tb->clear = key == NULL;
	if (key)
		tb->key = *key;
	sh->tomb_count++;
}

/* Whether a task a worker runs now touches (ns, key) (key NULL: any of ns;
 * ns KVT_NS_ALL: any) and is a write-down (wd) or a promotion (!wd). */
static bool running_match_locked(const struct shared *sh, uint32_t ns, const struct kvt_key *key,
				 bool wd)
{
	for (const struct sh_task *t = sh->running; t; t = t->r_next) {
		bool is_wd = t->type == T_WD_REF || t->type == T_WD_BUF;
		if (is_wd != wd || (!wd && t->type != T_GET))
			continue;
		if (ns != KVT_NS_ALL && t->ns != ns)
			continue;
		if (key && (t->key.len != key->len || memcmp(t->key.bytes, key->bytes, key->len)))
			continue;
		return true;
	}
	return false;
}

/*
 * A delete or clear against the pool, around the backend's removal
 * (remove): the write-downs taken before it are dropped and those being
 * written are waited for, so that none lands after the removal; then the
 * promotions that may have read the block before the removal are waited
 * for, so that the store's pass over DRAM after this tier deletes what
 * they published -- else a deleted block came back from a write-down
 * queued before the delete, or from a promotion published after the
 * store's passes over DRAM.
 */
static void against_pool_begin(struct shared *sh, uint32_t ns, const struct kvt_key *key)
{
	pthread_mutex_lock(&sh->lock);
	tomb_add_locked(sh, ns, key);
	while (running_match_locked(sh, ns, key, true))
		pthread_cond_wait(&sh->ran, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
}

static void against_pool_end(struct shared *sh, uint32_t ns, const struct kvt_key *key)
{
	pthread_mutex_lock(&sh->lock);
	while (running_match_locked(sh, ns, key, false))
		pthread_cond_wait(&sh->ran, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
	/* What they published, the store's last pass over DRAM deletes
	 * (store_del_walk, store_clear_walk). */
}

static void *pool_main(void *arg)
{
	struct shared *sh = arg;
	pthread_mutex_lock(&sh->lock);
	for (;;) {
		struct sh_task *t = NULL;
		bool dropped;
		for (int p = 0; p < P_COUNT && !t; p++) {
			if ((t = sh->head[p])) {
				sh->head[p] = t->next;
				if (!sh->head[p])
					sh->tail[p] = NULL;
			}
		}
		if (!t) {
			if (sh->stop)
				break;
			pthread_cond_wait(&sh->cond, &sh->lock);
			continue;
		}
		dropped = (t->type == T_WD_REF || t->type == T_WD_BUF) &&
			  wd_dropped_locked(sh, t->ns, &t->key, t->gen);
		t->r_prev = NULL;
		t->r_next = sh->running;
		if (sh->running)
			sh->running->r_prev = t;
		sh->running = t;
		if ((t->type == T_WD_REF || t->type == T_WD_BUF) && !dropped)
			sh->wd_running++;
		pthread_mutex_unlock(&sh->lock);
		if (dropped) {
			if (t->type == T_WD_REF)
				dram_unpin(sh->dram, t->item);
			wd_finished(sh, t->len, -ECANCELED);
			goto ran;
		}
		switch (t->type) {
		case T_GET:
			run_get(sh, t);
			break;
		case T_GET_PART:
			run_get_part(sh, t);
			break;
		case T_LOOKUP:
			run_lookup(sh, t->lk);
			break;
		case T_WD_REF:
			run_wd_ref(sh, t);
			break;
		case T_WD_BUF:
			run_wd_buf(sh, t);
			break;
		case T_GC:
			run_gc(sh);
			break;
		}
ran:
		pthread_mutex_lock(&sh->lock);
		if ((t->type == T_WD_REF || t->type == T_WD_BUF) && !dropped)
			sh->wd_running--;
		if (t->r_prev)
			t->r_prev->r_next = t->r_next;
		else
			sh->running = t->r_next;
		if (t->r_next)
			t->r_next->r_prev = t->r_prev;
		pthread_cond_broadcast(&sh->ran);
		pthread_mutex_unlock(&sh->lock);
		task_free(sh, t);
		pthread_mutex_lock(&sh->lock);
	}
	pthread_mutex_unlock(&sh->lock);
	return NULL;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

/* The S3 backend: credentials (file, else environment), the client, and
 * one HEAD of the bucket so that bad credentials or a missing bucket fail
 * the open with a clear error rather than turning every call into a miss.
 * An endpoint that does not answer is only logged: it may come up later. */
static int shared_open_s3(struct shared *sh)
{
	const struct shared_config *c = &sh->cfg;
	struct shs3_creds creds;
	struct shs3_config sc = {
		.endpoint = c->s3_endpoint,
		.bucket = c->s3_bucket,
		.conns = c->s3_conns ? c->s3_conns : SHARED_DEF_S3_CONNS,
		.timeout_ms = c->s3_timeout_ms ? c->s3_timeout_ms : SHARED_DEF_S3_TIMEOUT_MS,
		.attempts = c->s3_attempts ? c->s3_attempts : SHARED_DEF_S3_ATTEMPTS,
		.retry_base_ms = c->s3_retry_base_ms ? c->s3_retry_base_ms
						     : SHARED_DEF_S3_RETRY_BASE_MS,
		.part_size = c->s3_part_size ? c->s3_part_size : SHARED_DEF_S3_PART_SIZE,
		.sign_payload = c->s3_sign_payload,
	};
	uint64_t len;
	int ret;

	if (!c->s3_bucket) {
		kvt_logf(sh->log, KVT_LOG_ERROR, "shared tier: shared.s3_endpoint needs shared.s3_bucket");
		return KVT_EOPTVAL;
	}
	ret = shs3_creds_load(&creds, c->s3_credentials);
	if (ret < 0) {
		kvt_logf(sh->log, KVT_LOG_ERROR,
			 "shared tier s3 %s: no usable credentials (%s: %s)", c->s3_endpoint,
			 c->s3_credentials ? c->s3_credentials
					   : "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
			 ret == KVT_EOPTVAL ? "missing fields, or readable by others"
					    : kvt_strerror(ret));
		return ret;
	}
	if (c->s3_region)
		snprintf(creds.region, sizeof(creds.region), "%s", c->s3_region);
	ret = shs3_open(&sh->s3, &sc, &creds, sh->mem, sh->log);
	OPENSSL_cleanse(&creds, sizeof(creds));
	if (ret < 0) {
		kvt_logf(sh->log, KVT_LOG_ERROR, "shared tier s3 %s: %s", c->s3_endpoint,
			 kvt_strerror(ret));
		return ret;
	}
	ret = shs3_head(sh->s3, "", &len);
	if (ret == KVT_MISS) {
		kvt_logf(sh->log, KVT_LOG_ERROR, "shared tier s3 %s: no bucket '%s'", c->s3_endpoint,
			 c->s3_bucket);
		return -ENOENT;
	}
	if (ret == -EACCES)
		return ret; /* shs3 logged it, naming the key id's first characters */
	if (ret < 0)
		kvt_logf(sh->log, KVT_LOG_WARN,
			 "shared tier s3 %s: %s at open; its calls are misses until it answers",
			 c->s3_endpoint, kvt_strerror(ret));
	else
		kvt_logf(sh->log, KVT_LOG_INFO, "shared tier: s3 %s bucket %s, %u connections",
			 c->s3_endpoint, c->s3_bucket, sc.conns);
	return 0;
}

int shared_open(struct shared **out, const struct shared_config *cfg, struct dram *dram,
		struct ns_registry *reg, struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct shared *sh = kvt_mem_calloc(mem, 1, sizeof(*sh));
	int ret;
	if (!sh)
		return -ENOMEM;
	sh->cfg = *cfg;
	if (sh->cfg.threads == 0)
		sh->cfg.threads = SHARED_DEF_THREADS;
	if (sh->cfg.threads > KVT_ARRAY_LEN(sh->threads))
		sh->cfg.threads = KVT_ARRAY_LEN(sh->threads);
	sh->dram = dram;
	sh->reg = reg;
	sh->mem = mem;
	sh->log = log;
	sh->persistent_len = (size_t)NS_PAGES * NS_PAGE_LEN / 8;
	sh->persistent = kvt_mem_calloc(mem, sh->persistent_len, 1);
	if (!sh->persistent) {
		kvt_mem_free(mem, sh, sizeof(*sh));
		return -ENOMEM;
	}
	pthread_mutex_init(&sh->lock, NULL);
	pthread_cond_init(&sh->cond, NULL);
	pthread_cond_init(&sh->idle, NULL);
	pthread_cond_init(&sh->ran, NULL);
	if (cfg->s3_endpoint) {
		ret = shared_open_s3(sh);
		if (ret < 0)
			goto fail;
		sh->be = &s3_backend;
	} else {
		ret = shdir_open(&sh->sd, cfg->dir, cfg->direct, mem, log);
		if (ret < 0) {
			kvt_logf(log, KVT_LOG_ERROR, "shared tier %s: %s", cfg->dir,
				 kvt_strerror(ret));
			goto fail;
		}
		sh->be = &dir_backend;
	}
	for (unsigned i = 0; i < sh->cfg.threads; i++) {
		ret = -pthread_create(&sh->threads[i], NULL, pool_main, sh);
		if (ret < 0)
			goto fail;
		pthread_setname_np(sh->threads[i], "kvt-shared");
		sh->nthreads++;
	}
	/* One collection at open when a budget or age limit is set. */
	if (sh->cfg.budget || sh->cfg.max_age_s) {
		struct sh_task *t = kvt_mem_calloc(mem, 1, sizeof(*t));
		if (t) {
			t->type = T_GC;
			sh->gc_queued = true;
			enqueue(sh, t, P_LOW);
		}
	}
	*out = sh;
	return 0;
fail:
	shared_stop(sh);
	shared_free(sh);
	return ret;
}

void shared_stop(struct shared *sh)
{
	if (!sh)
		return;
	pthread_mutex_lock(&sh->lock);
	sh->stop = true;
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
	for (unsigned i = 0; i < sh->nthreads; i++)
		pthread_join(sh->threads[i], NULL);
	sh->nthreads = 0;
}

void shared_free(struct shared *sh)
{
	if (!sh)
		return;
	shdir_close(sh->sd);
	shs3_close(sh->s3);
	pthread_mutex_destroy(&sh->lock);
	pthread_cond_destroy(&sh->cond);
	pthread_cond_destroy(&sh->idle);
	pthread_cond_destroy(&sh->ran);
	kvt_mem_free(sh->mem, (void *)sh->persistent, sh->persistent_len);
	kvt_mem_free(sh->mem, sh, sizeof(*sh));
}

/* ------------------------------------------------------------------------
 * Write-down
 */

/* Reserve len bytes of write-down budget.  Locked. */
static bool wd_reserve_locked(struct shared *sh, uint64_t len)
{
	if (sh->stop || sh->wd_bytes + len > sh->cfg.wd_max_bytes)
		return false;
	sh->wd_bytes += len;
	sh->wd_inflight++;
	return true;
}

/* Give back a reservation whose write-down will not happen. */
static void wd_unreserve(struct shared *sh, uint64_t len)
{
	pthread_mutex_lock(&sh->lock);
	sh->wd_bytes -= len;
	sh->wd_inflight--;
	pthread_cond_broadcast(&sh->idle);
	pthread_mutex_unlock(&sh->lock);
}

void shared_put(struct shared *sh, uint32_t ns, const struct kvt_key *key)
{
	struct dram_item *item;
	struct sh_task *t;
	struct iovec view[DRAM_MAX_RUNS];
	uint64_t len;
	bool ok;

	uint64_t gen = atomic_load(&sh->gen);

	if (!ns_persistent(sh, ns))
		return;
	if (dram_ref_quiet(sh->dram, ns, key, &item) != KVT_OK)
		return;
	dram_item_view(sh->dram, item, view, &len);
	t = kvt_mem_calloc(sh->mem, 1, sizeof(*t));
	pthread_mutex_lock(&sh->lock);
	ok = t && wd_reserve_locked(sh, len);
	if (ok) {
		t->type = T_WD_REF;
		t->item = item;
		t->len = len;
		t->ns = ns;
		t->key = *key;
		t->gen = gen;
		ok = enqueue_locked(sh, t, P_LOW);
	}
	pthread_mutex_unlock(&sh->lock);
	if (!ok) {
		A(sh->wd_shed);
		dram_unpin(sh->dram, item);
		if (t)
			kvt_mem_free(sh->mem, t, sizeof(*t));
		return;
	}
	A(sh->wd_queued);
}

/* The SSD evict hook (ssd.h), first half, and the DRAM one's check:
 * take len bytes of ns?  A refusal for want of budget counts as shed. */
static bool shared_ssd_reserve(void *ctx, uint32_t ns, uint64_t len)
{
	struct shared *sh = ctx;
	bool ok;
	if (ns_persistent(sh, ns))
		return false; /* went down at put */
	pthread_mutex_lock(&sh->lock);
	ok = wd_reserve_locked(sh, len);
	pthread_mutex_unlock(&sh->lock);
	if (!ok)
		A(sh->wd_shed);
	return ok;
}

/* A write-down of a private copy (T_WD_BUF) of len bytes of key, taken at
 * gen, with np parts of lens and crcs (copied); buf is the caller's to set.
 * NULL without memory. */
static struct sh_task *wd_buf_task(struct shared *sh, uint32_t ns, const struct kvt_key *key,
				   uint64_t gen, uint64_t len, uint32_t flags, unsigned np,
				   const uint64_t *lens, const uint32_t *crcs)
{
	struct sh_task *t = kvt_mem_calloc(sh->mem, 1, sizeof(*t));
	if (!t)
		return NULL;
	t->type = T_WD_BUF;
	t->ns = ns;
	t->key = *key;
	t->gen = gen;
	t->len = len;
	t->flags = flags;
	t->part_lens = kvt_mem_alloc(sh->mem, (size_t)np * sizeof(uint64_t));
	t->crcs = kvt_mem_alloc(sh->mem, (size_t)np * sizeof(uint32_t));
	t->part_count = np; /* task_free's sizes, also on failure */
	if (!t->part_lens || !t->crcs) {
		task_free(sh, t);
		return NULL;
	}
	memcpy(t->part_lens, lens, (size_t)np * sizeof(uint64_t));
	memcpy(t->crcs, crcs, (size_t)np * sizeof(uint32_t));
	return t;
}

/* A write-down of len reserved bytes that will not happen: t (NULL: none
 * was made) freed, the reservation given back, counted as shed. */
static void wd_shed(struct shared *sh, struct sh_task *t, uint64_t len)
{
	if (t)
		task_free(sh, t);
	A(sh->wd_shed);
	wd_unreserve(sh, len);
}

/* Queue t, a write-down of len reserved bytes, counted in *evicted; or shed. */
static void wd_buf_queue(struct shared *sh, struct sh_task *t, uint64_t len,
			 _Atomic uint64_t *evicted)
{
	if (!enqueue(sh, t, P_LOW)) {
		wd_shed(sh, t, len);
		return;
	}
	A(*evicted);
	A(sh->wd_queued);
}

void shared_evicted(void *ctx, const struct dram_victim *v)
{
	struct shared *sh = ctx;
	struct sh_task *t = NULL;
	const struct iovec *view = v->view;
	uint64_t len = v->len;
	uint64_t off = 0, lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	uint64_t gen = atomic_load(&sh->gen); /* the item is still indexed: a delete waits */
	bool crcs_valid;
	int np;

	/* Only blocks read at least twice in DRAM are worth the shared file
	 * system; a persistent namespace's blocks went down at put. */
	if (v->reads < 2 || !shared_ssd_reserve(sh, v->ns, len))
		return;
	np = dram_victim_parts(v, lens, crcs, KVT_PARTS_MAX, &crcs_valid);
	if (np > 0)
		t = wd_buf_task(sh, v->ns, v->key, gen, len, v->flags, (unsigned)np, lens, crcs);
	if (t) {
		t->crcs_valid = crcs_valid;
		t->buf_cap = KVT_ALIGN_UP(len, 4096);
		t->buf = kvt_mem_alloc_aligned(sh->mem, 4096, t->buf_cap);
	}
	if (!t || !t->buf) {
		wd_shed(sh, t, len);
		return;
	}
	for (unsigned i = 0; i < v->view_count && off < len; i++) {
		uint64_t n = view[i].iov_len < len - off ? view[i].iov_len : len - off;
		memcpy(t->buf + off, view[i].iov_base, n);
		off += n;
	}
	memset(t->buf + len, 0, t->buf_cap - len);
	wd_buf_queue(sh, t, len, &sh->wd_evicted);
}

/* Second half: the record read back from SSD (buf owned from here on), or
 * NULL (it could not be read: drop the reservation). */
static void shared_ssd_take(void *ctx, uint32_t ns, const struct kvt_key *key, uint8_t *buf,
			    uint64_t buf_cap, uint64_t value_off, uint64_t len, unsigned np,
			    const uint64_t *lens, const uint32_t *crcs, uint32_t flags,
			    uint64_t gen)
{
	struct shared *sh = ctx;
	struct sh_task *t = buf ? wd_buf_task(sh, ns, key, gen, len, flags, np, lens, crcs) : NULL;
	if (!t) {
		if (buf)
			kvt_mem_free(sh->mem, buf, buf_cap);
		wd_shed(sh, NULL, len);
		return;
	}
	t->buf = buf;
	t->buf_cap = buf_cap;
	t->buf_off = value_off;
	t->crcs_valid = true;
	wd_buf_queue(sh, t, len, &sh->wd_ssd_evicted);
}

static uint64_t shared_ssd_gen(void *ctx)
{
	struct shared *sh = ctx;
	return atomic_load(&sh->gen);
}

const struct ssd_evict_hook shared_ssd_hook = { shared_ssd_reserve, shared_ssd_take,
						shared_ssd_gen };

void shared_flush(struct shared *sh)
{
	pthread_mutex_lock(&sh->lock);
	while (sh->wd_inflight > 0 && !sh->stop)
		pthread_cond_wait(&sh->idle, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
}

/* ------------------------------------------------------------------------
 * Reads and look-ups
 */

/* A read task of type for key, at prio; NULL without memory. */
static struct sh_task *read_task(struct shared *sh, int type, uint32_t ns,
				 const struct kvt_key *key, int prio, void *ctx)
{
	struct sh_task *t = kvt_mem_calloc(sh->mem, 1, sizeof(*t));
	if (!t)
		return NULL;
	t->type = type;
	t->ns = ns;
	t->key = *key;
	t->prio = prio;
	t->ctx = ctx;
	return t;
}

/* Queue a read task: 0, or KVT_ECLOSED (t freed) once stopping. */
static int read_enqueue(struct shared *sh, struct sh_task *t)
{
	if (!enqueue(sh, t, t->prio == IO_PRIO_DEMAND ? P_DEMAND : P_MID)) {
		kvt_mem_free(sh->mem, t, sizeof(*t));
		return KVT_ECLOSED;
	}
	return 0;
}

int shared_get(struct shared *sh, uint32_t ns, const struct kvt_key *key, int prio,
	       tier_got_fn cb, void *ctx)
{
	struct sh_task *t = read_task(sh, T_GET, ns, key, prio, ctx);
	if (!t)
		return -ENOMEM;
	t->gcb = cb;
	return read_enqueue(sh, t);
}

int shared_get_part(struct shared *sh, uint32_t ns, const struct kvt_key *key, uint32_t part,
		    const struct iovec *dst, unsigned dst_count, int prio, tier_done_fn cb,
		    void *ctx)
{
	struct sh_task *t;
	if (!sh->be->read_part)
		return -ENOTSUP;
	if (!(t = read_task(sh, T_GET_PART, ns, key, prio, ctx)))
		return -ENOMEM;
	t->part = part;
	t->dst = dst;
	t->dst_count = dst_count;
	t->pcb = cb;
	return read_enqueue(sh, t);
}

int shared_lookup(struct shared *sh, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		  uint8_t *tiers, tier_done_fn cb, void *ctx)
{
	const uint8_t *dg = ns_digest_of(sh, ns);
	struct sh_lookup *lk;
	struct sh_task *ts[64];
	unsigned w = sh->nthreads < n ? sh->nthreads : n, made = 0;

	if (!dg || n == 0)
		return KVT_ENONS;
	lk = kvt_mem_calloc(sh->mem, 1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->present = kvt_mem_calloc(sh->mem, n, 1);
	lk->lens = kvt_mem_calloc(sh->mem, n, sizeof(uint64_t));
	if (!lk->present || !lk->lens)
		goto nomem;
	for (; made < w; made++)
		if (!(ts[made] = kvt_mem_calloc(sh->mem, 1, sizeof(*ts[made]))))
			goto nomem;
	lk->sh = sh;
	lk->digest = dg;
	lk->keys = keys;
	lk->n = n;
	lk->tiers = tiers;
	lk->first_miss = n;
	lk->workers = w;
	lk->cb = cb;
	lk->ctx = ctx;
	A(sh->lookups);
	atomic_fetch_add(&sh->lookup_keys, n);
	pthread_mutex_lock(&sh->lock);
	if (sh->stop) {
		pthread_mutex_unlock(&sh->lock);
		for (unsigned i = 0; i < made; i++)
			kvt_mem_free(sh->mem, ts[i], sizeof(*ts[i]));
		made = 0;
		goto closed;
	}
	for (unsigned i = 0; i < w; i++) {
		ts[i]->type = T_LOOKUP;
		ts[i]->lk = lk;
		enqueue_locked(sh, ts[i], P_MID);
	}
	pthread_cond_broadcast(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
	return 0;
nomem:
	for (unsigned i = 0; i < made; i++)
		kvt_mem_free(sh->mem, ts[i], sizeof(*ts[i]));
closed:
	if (lk->present)
		kvt_mem_free(sh->mem, lk->present, n);
	if (lk->lens)
		kvt_mem_free(sh->mem, lk->lens, n * sizeof(uint64_t));
	kvt_mem_free(sh->mem, lk, sizeof(*lk));
	return made == 0 && sh->stop ? KVT_ECLOSED : -ENOMEM;
}

int shared_delete(struct shared *sh, uint32_t ns, const struct kvt_key *key)
{
	const uint8_t *dg = ns_digest_of(sh, ns);
	int ret;
	if (!dg)
		return KVT_MISS;
	against_pool_begin(sh, ns, key);
	ret = sh->be->remove(sh, dg, key);
	against_pool_end(sh, ns, key);
	return ret;
}

int64_t shared_clear(struct shared *sh, uint32_t ns)
{
	const uint8_t *dg = NULL;
	int64_t ret;
	if (ns != KVT_NS_ALL && !(dg = ns_digest_of(sh, ns)))
		return 0;
	against_pool_begin(sh, ns, NULL);
	ret = sh->be->clear(sh, dg);
	against_pool_end(sh, ns, NULL);
	return ret;
}

struct shdir *shared_dir(struct shared *sh)
{
	return sh->sd;
}

struct shs3 *shared_s3(struct shared *sh)
{
	return sh->s3;
}

void shared_stats(struct shared *sh, kvt_stats_fn fn, void *ctx)
{
	uint64_t wd_bytes, wd_running;
	pthread_mutex_lock(&sh->lock);
	wd_bytes = sh->wd_bytes;
	wd_running = sh->wd_running;
	pthread_mutex_unlock(&sh->lock);
	sh->be->stats(sh, fn, ctx);
	fn(ctx, "shared.threads", sh->nthreads, NULL);
	fn(ctx, "shared.hits", AL(sh->hits), NULL);
	fn(ctx, "shared.part_hits", AL(sh->part_hits), NULL);
	fn(ctx, "shared.misses", AL(sh->misses), NULL);
	fn(ctx, "shared.promote_full", AL(sh->promote_full), NULL);
	fn(ctx, "shared.lookups", AL(sh->lookups), NULL);
	fn(ctx, "shared.lookup_keys", AL(sh->lookup_keys), NULL);
	fn(ctx, "shared.wd_queued", AL(sh->wd_queued), NULL);
	fn(ctx, "shared.wd_evicted", AL(sh->wd_evicted), NULL);
	fn(ctx, "shared.wd_ssd_evicted", AL(sh->wd_ssd_evicted), NULL);
	fn(ctx, "shared.wd_done", AL(sh->wd_done), NULL);
	fn(ctx, "shared.wd_failed", AL(sh->wd_failed), NULL);
	fn(ctx, "shared.wd_cancelled", AL(sh->wd_cancelled), NULL);
	fn(ctx, "shared.wd_shed", AL(sh->wd_shed), NULL);
	fn(ctx, "shared.wd_bytes", wd_bytes, NULL);
	fn(ctx, "shared.wd_running", wd_running, NULL);
	fn(ctx, "shared.gc_runs", AL(sh->gc_runs), NULL);
	fn(ctx, "shared.gc_removed", AL(sh->gc_removed), NULL);
}

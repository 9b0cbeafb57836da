/*
 * ssd.c - the SSD tier (G3): a log-structured store of blocks on local
 * flash, under the DRAM tier, that survives restarts and faults.
 *
 * Owns: the segment files (ssd/seg-NNNNNN), the checkpoint, the in-memory
 * index of what is on SSD, the write-down thread, and an I/O engine (io.c).
 * Formats: ssdfmt.c and doc/ssd-format.md.  Design notes: doc/ssd.md.
 *
 * Writes.  Blocks reach SSD only by write-down from DRAM: the DRAM tier's
 * admission hook (ssd_admit) queues a pinned block; one writer thread
 * assigns it a sequence number and space at the end of the open segment,
 * enters it in the index as PENDING, and submits one O_DIRECT write of
 * [record header][the DRAM chunks themselves] -- no copy.  Its completion
 * publishes the index entry and unpins the DRAM block.  A write-down queue
 * holding more than wd_max_bytes sheds new blocks (counted) instead of
 * stalling puts.  Deletes and clears update the index at once and log a
 * tombstone record through the same writer, so recovery never brings back
 * what was deleted.
 *
 *   segment: [hdr 4K][rec][rec]...[rec][summary]   <- sealed when full
 *            summary: every record's (key, seq, offset), for recovery and
 *            eviction
 *
 * Reads.  A DRAM miss that the index knows is promoted: DRAM space is
 * reserved, the record is read into it with one O_DIRECT read (header into
 * a small buffer, value straight into the DRAM chunks), the header is
 * checked against the index (key, namespace digest, sequence, generation)
 * and every part's CRC32C against the bytes, and only then is the block
 * published in DRAM.  Anything that fails is a miss, counted, never bytes.
 *
 * Eviction: FIFO by whole segment (oldest generation first) when more than
 * high_pct of the slots are used, down to low_pct; no garbage-collection
 * copying.  Blocks read while in the dropped segment and still in DRAM are
 * written down again (at most reinsert_pct of a segment).
 *
 * Recovery: the newest checkpoint, then only records newer than it (see
 * doc/ssd-format.md "Recovery").  A segment left open by a crash is walked
 * record by record and sealed.
 *
 * Locks: index shard locks (leaf); seg_lock guards the slot table, the
 * sequence and generation counters and the open segment's summary; wd_lock
 * guards the write-down queue and in-flight counters.  Order: seg_lock ->
 * shard lock; wd_lock is a leaf.  The writer thread is the only one that
 * allocates space, seals, evicts or checkpoints.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ssd.h"
#include "ssdfmt.h"

#define SSD_SHARDS 16
#define SSD_DIR "ssd"
#define SSD_CKPT "checkpoint"
#define SSD_ID "id"

enum { SEG_FREE = 0, SEG_OPEN, SEG_SEALED, SEG_BAD };
enum { E_PENDING = 0x1, E_READ = 0x2 };
enum { T_PUT = 1, T_DELETE, T_CLEAR, T_FLUSH, T_CKPT };

struct ssd_entry {
	struct ssd_entry *hnext;
	uint64_t seq;
	uint64_t value_len;
	uint64_t generation;  /* of the segment holding the record */
	uint32_t ns;
	uint32_t slot;
	uint32_t off_4k, len_4k;
	uint16_t part_count;
	uint8_t flags;        /* E_* */
	uint8_t key_len;
	uint8_t key[KVT_KEY_MAX];
};

struct ssd_shard {
	pthread_mutex_t lock;
	struct ssd_entry **buckets;
	uint32_t mask;
	uint64_t count;
	uint64_t bytes;       /* value bytes of published entries */
} __attribute__((aligned(64)));

struct ssd_seg {
	int fd;               /* -1 until the slot's file is opened */
	int state;            /* SEG_* */
	bool direct;          /* O_DIRECT in effect */
	bool dirty;           /* written since the last fdatasync */
	uint64_t generation;  /* 0: never written */
	uint64_t write_off;   /* bytes allocated so far */
	uint64_t sum_bytes;   /* summary bytes the entries so far need */
	struct ssd_sum_entry *sum; /* open segment: one entry per record */
	size_t sum_count, sum_cap;
};

/*
 * One record's I/O as single-buffer requests -- the header, then each DRAM
 * run -- so the engine can issue the runs as READ_FIXED/WRITE_FIXED from
 * the registered DRAM arena (vectored fixed I/O does not exist in the
 * io_uring of liburing 2.3).  done runs once, when the last part lands,
 * with res = total bytes or the first error.
 */
struct multi_io {
	struct io_req req[1 + DRAM_MAX_RUNS];
	unsigned n;
	_Atomic unsigned left;
	_Atomic int64_t total;
	_Atomic int64_t err;
	void (*done)(struct multi_io *m, int64_t res);
	void *ctx;
};

struct wd_task {
	struct wd_task *next;
	int type;             /* T_* */
	struct ssd *s;
	struct dram_item *item; /* T_PUT: pinned by admission */
	uint32_t ns;
	struct kvt_key key;
	uint64_t value_len;
	uint64_t seq, generation, rec_len;
	uint32_t slot, off_4k, part_count;
	uint8_t *hdr;         /* aligned record header */
	uint32_t hdr_len;
	struct iovec iov[1 + DRAM_MAX_RUNS];
	struct multi_io io;
	/* T_FLUSH / T_CKPT: a waiter */
	pthread_mutex_t *wait_lock;
	pthread_cond_t *wait_cond;
	int *wait_done;
	int wait_status;
};

struct promote_task {
	struct ssd *s;
	struct multi_io io;
	struct iovec iov[1 + DRAM_MAX_RUNS];
	uint8_t *hdr;
	uint32_t hdr_len;
	struct dram_item *item;
	uint32_t ns;
	struct kvt_key key;
	uint64_t seq, generation, value_len, rec_len;
	uint32_t slot;
	uint16_t part_count;
	ssd_promote_cb cb;
	void *ctx;
	uint64_t start_ns;
};

struct ssd {
	struct ssd_config cfg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	struct ns_registry *reg;
	struct dram *dram;
	struct kvt_io *io;
	int dir_fd;                 /* <store>/ssd */
	uint8_t store_id[16];
	struct ssd_shard shards[SSD_SHARDS];

	pthread_mutex_t seg_lock;
	struct ssd_seg *segs;
	uint32_t slot_count;
	int32_t open_slot;          /* -1: none */
	uint64_t next_seq, next_gen;
	uint64_t *clear_seq;        /* per namespace id; [0] is "all" */
	uint32_t clear_cap;
	uint32_t seals_since_ckpt;
	bool degraded;              /* ENOSPC: write-downs shed until retry */
	uint64_t degraded_at_ns;
	pthread_mutex_t ns_lock;    /* leaf: guards persistent[] (taken under DRAM locks) */
	uint8_t *persistent;        /* per namespace id: write down at put */
	uint32_t persistent_cap;

	pthread_mutex_t wd_lock;
	pthread_cond_t wd_cond;     /* work queued, stop, or an in-flight write finished */
	struct wd_task *wd_head, *wd_tail;
	uint64_t wd_bytes;          /* queued + in flight */
	uint64_t wd_inflight;       /* writes submitted, not completed */
	bool wd_stop;
	pthread_t wd_thread;
	bool wd_started;

	/* measured read throughput (EWMA), bytes per second; guarded by wd_lock */
	double read_bps;
	bool read_measured;

	/* statistics (relaxed atomics) */
	_Atomic uint64_t wd_queued, wd_written, wd_written_bytes, wd_shed, wd_skipped,
		wd_errors, tombstones, reads, read_bytes, read_misses, crc_errors, hdr_errors,
		io_errors, seg_sealed, seg_evicted, evicted_blocks, reinserted, quarantined,
		ckpts, enospc, promote_full;
	uint64_t rec_ckpt_entries, rec_records, rec_segments, rec_ns, rec_dropped;
};

static void clear_raise(struct ssd *s, uint32_t ns, uint64_t seq);

/* ------------------------------------------------------------------------
 * Small helpers
 */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ssd_hash(uint32_t ns, const struct kvt_key *k)
{
	return XXH3_64bits_withSeed(k->bytes, k->len, ns);
}

static inline struct ssd_shard *shard_of(struct ssd *s, uint64_t h)
{
	return &s->shards[(h >> 40) % SSD_SHARDS];
}

static inline uint64_t align4k(uint64_t v)
{
	return (v + SSD_ALIGN - 1) & ~(uint64_t)(SSD_ALIGN - 1);
}

#define A(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)
#define AN(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)
#define AL(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Index
 */

static struct ssd_entry **idx_slot(struct ssd_shard *sh, uint64_t h, uint32_t ns,
				   const struct kvt_key *k)
{
	struct ssd_entry **pp = &sh->buckets[h & sh->mask];
	for (; *pp; pp = &(*pp)->hnext) {
		struct ssd_entry *e = *pp;
		if (e->ns == ns && e->key_len == k->len && memcmp(e->key, k->bytes, k->len) == 0)
			return pp;
	}
	return pp;
}

static void idx_grow_locked(struct ssd *s, struct ssd_shard *sh)
{
	uint32_t old = sh->mask + 1, n = old * 2;
	struct ssd_entry **nb;
	if (sh->count <= old || n == 0)
		return;
	nb = kvt_mem_calloc(s->mem, n, sizeof(*nb));
	if (!nb)
		return;
	for (uint32_t i = 0; i < old; i++) {
		struct ssd_entry *e = sh->buckets[i], *next;
		for (; e; e = next) {
			struct kvt_key k;
			uint64_t h;
			next = e->hnext;
			k.len = e->key_len;
			memcpy(k.bytes, e->key, e->key_len);
			h = ssd_hash(e->ns, &k);
			e->hnext = nb[h & (n - 1)];
			nb[h & (n - 1)] = e;
		}
	}
	kvt_mem_free(s->mem, sh->buckets, (size_t)old * sizeof(*nb));
	sh->buckets = nb;
	sh->mask = n - 1;
}

/* Unlink *pp (an entry of sh) and free it.  Locked. */
static void idx_remove_locked(struct ssd *s, struct ssd_shard *sh, struct ssd_entry **pp)
{
	struct ssd_entry *e = *pp;
	*pp = e->hnext;
	sh->count--;
	if (!(e->flags & E_PENDING))
		sh->bytes -= e->value_len;
	kvt_mem_free(s->mem, e, sizeof(*e));
}

/* Insert or replace (if seq is newer) an entry.  Locked.  0, KVT_EXISTS, -ENOMEM. */
static int idx_put_locked(struct ssd *s, struct ssd_shard *sh, uint64_t h,
			  const struct ssd_entry *src)
{
	struct kvt_key k;
	struct ssd_entry **pp, *e;
	k.len = src->key_len;
	memcpy(k.bytes, src->key, src->key_len);
	pp = idx_slot(sh, h, src->ns, &k);
	if (*pp) {
		if ((*pp)->seq >= src->seq)
			return KVT_EXISTS;
		idx_remove_locked(s, sh, pp);
		pp = idx_slot(sh, h, src->ns, &k);
	}
	e = kvt_mem_alloc(s->mem, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = *src;
	e->hnext = NULL;
	*pp = e;
	sh->count++;
	if (!(e->flags & E_PENDING))
		sh->bytes += e->value_len;
	idx_grow_locked(s, sh);
	return 0;
}

/* Remove the entry for (ns, key) if its seq is below `below` (UINT64_MAX: any). */
static bool idx_remove_key(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t below)
{
	uint64_t h = ssd_hash(ns, k);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry **pp;
	bool found = false;
	pthread_mutex_lock(&sh->lock);
	pp = idx_slot(sh, h, ns, k);
	if (*pp && (*pp)->seq < below) {
		idx_remove_locked(s, sh, pp);
		found = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return found;
}

/* Remove every entry matching: ns (KVT_NS_ALL: any), slot (UINT32_MAX: any)
 * and generation (0: any), with seq < below.  Returns how many. */
static uint64_t idx_sweep(struct ssd *s, uint32_t ns, uint32_t slot, uint64_t gen, uint64_t below)
{
	uint64_t n = 0;
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		for (uint32_t b = 0; b <= sh->mask; b++) {
			struct ssd_entry **pp = &sh->buckets[b];
			while (*pp) {
				struct ssd_entry *e = *pp;
				if ((ns == KVT_NS_ALL || e->ns == ns) &&
				    (slot == UINT32_MAX || e->slot == slot) &&
				    (gen == 0 || e->generation == gen) && e->seq < below) {
					if (!(e->flags & E_PENDING))
						n++;
					idx_remove_locked(s, sh, pp);
				} else {
					pp = &e->hnext;
				}
			}
		}
		pthread_mutex_unlock(&sh->lock);
	}
	return n;
}

/* ------------------------------------------------------------------------
 * Record I/O in single-buffer parts
 */

static void multi_part_done(struct io_req *r)
{
	struct multi_io *m = r->ctx;
	if (r->res < 0) {
		int64_t zero = 0;
		atomic_compare_exchange_strong(&m->err, &zero, r->res);
	} else if ((uint64_t)r->res != r->iov[0].iov_len) {
		int64_t zero = 0;
		/* Short: not a device error (no quarantine), just not the record. */
		atomic_compare_exchange_strong(&m->err, &zero, -ENODATA);
	} else {
		atomic_fetch_add(&m->total, r->res);
	}
	if (atomic_fetch_sub(&m->left, 1) == 1) {
		int64_t err = atomic_load(&m->err);
		m->done(m, err ? err : atomic_load(&m->total));
	}
}

/* Submit iov[0..n) as consecutive single-buffer requests from byte off. */
static void multi_submit(struct ssd *s, struct multi_io *m, int op, int prio, int fd,
			 uint64_t off, const struct iovec *iov, unsigned n,
			 void (*done)(struct multi_io *, int64_t), void *ctx)
{
	m->n = n;
	atomic_init(&m->left, n);
	atomic_init(&m->total, 0);
	atomic_init(&m->err, 0);
	m->done = done;
	m->ctx = ctx;
	for (unsigned i = 0; i < n; i++) {
		struct io_req *r = &m->req[i];
		memset(r, 0, sizeof(*r));
		r->opcode = (uint8_t)op;
		r->prio = (uint8_t)prio;
		r->fd = fd;
		r->off = off;
		r->iov = &iov[i];
		r->iov_count = 1;
		r->done = multi_part_done;
		r->ctx = m;
		off += iov[i].iov_len;
	}
	/* After this loop the first completion may free m's owner: submit
	 * from a copy of the count. */
	for (unsigned i = 0; i < n; i++)
		io_submit(s->io, &m->req[i]);
}

/* ------------------------------------------------------------------------
 * Synchronous I/O through the engine (metadata writes, so that fault
 * injection and power-loss simulation see them too).
 */

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void sync_done(struct io_req *r)
{
	struct sync_wait *w = r->ctx;
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int64_t io_sync(struct ssd *s, int op, int fd, uint64_t off, void *buf, size_t len)
{
	struct sync_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
	struct iovec v = { buf, len };
	struct io_req r;
	memset(&r, 0, sizeof(r));
	r.opcode = (uint8_t)op;
	r.prio = IO_PRIO_WRITE;
	r.fd = fd;
	r.off = off;
	r.iov = &v;
	r.iov_count = op == IO_FSYNC ? 0 : 1;
	r.done = sync_done;
	r.ctx = &w;
	io_submit(s->io, &r);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	if (op != IO_FSYNC && r.res >= 0 && (uint64_t)r.res != len)
		return -EIO;
	return r.res;
}

/* Plain aligned pread (recovery): exactly len bytes or an error. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		done += (size_t)n;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Segments
 */

static int seg_open_file(struct ssd *s, uint32_t slot, bool create)
{
	struct ssd_seg *g = &s->segs[slot];
	char name[32];
	int fd;
	if (g->fd >= 0)
		return 0;
	snprintf(name, sizeof(name), "seg-%06u", slot);
	fd = io_open_file(s->io, s->dir_fd, name, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0),
			  0600, &g->direct);
	if (fd < 0)
		return fd;
	g->fd = fd;
	return 0;
}

/* Write the slot's segment header.  Called by the writer thread. */
static int seg_write_hdr(struct ssd *s, uint32_t slot, uint64_t sum_off, uint64_t sum_len)
{
	struct ssd_seg *g = &s->segs[slot];
	struct ssd_seg_hdr h;
	uint8_t *buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	int64_t r;
	if (!buf)
		return -ENOMEM;
	memset(&h, 0, sizeof(h));
	h.version = SSD_FMT_VERSION;
	h.slot = slot;
	h.generation = g->generation;
	h.seg_size = s->cfg.seg_size;
	h.created_ns = wall_ns();
	h.summary_off = sum_off;
	h.summary_len = sum_len;
	memcpy(h.store_id, s->store_id, 16);
	ssd_seg_hdr_encode(&h, buf);
	r = io_sync(s, IO_WRITE, g->fd, 0, buf, SSD_ALIGN);
	kvt_mem_free(s->mem, buf, SSD_ALIGN);
	g->dirty = true;
	return r < 0 ? (int)r : 0;
}

/* Mark a slot unusable after an I/O error; its blocks become misses. */
static void seg_quarantine(struct ssd *s, uint32_t slot, int err)
{
	uint64_t gen, n;
	pthread_mutex_lock(&s->seg_lock);
	if (s->segs[slot].state == SEG_BAD) {
		pthread_mutex_unlock(&s->seg_lock);
		return;
	}
	s->segs[slot].state = SEG_BAD;
	gen = s->segs[slot].generation;
	if (s->open_slot == (int32_t)slot)
		s->open_slot = -1;
	pthread_mutex_unlock(&s->seg_lock);
	n = idx_sweep(s, KVT_NS_ALL, slot, gen, UINT64_MAX);
	A(s->quarantined);
	kvt_logf(s->log, KVT_LOG_ERROR,
		 "ssd: segment %u quarantined after %s; %llu blocks dropped", slot,
		 kvt_strerror(err), (unsigned long long)n);
}

static void seg_sum_free(struct ssd *s, struct ssd_seg *g)
{
	kvt_mem_free(s->mem, g->sum, g->sum_cap * sizeof(*g->sum));
	g->sum = NULL;
	g->sum_count = g->sum_cap = 0;
	g->sum_bytes = 0;
}

/* Seal the open segment: write its summary, then its header.  seg_lock held. */
static void seg_seal_locked(struct ssd *s)
{
	int32_t slot = s->open_slot;
	struct ssd_seg *g;
	uint64_t len;
	uint8_t *buf;
	int64_t n;
	int r = 0;

	if (slot < 0)
		return;
	g = &s->segs[slot];
	s->open_slot = -1;
	len = align4k(g->sum_bytes);
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, len);
	if (!buf) {
		r = -ENOMEM;
	} else {
		n = ssd_sum_encode(g->generation, g->sum, g->sum_count, buf, len);
		if (n < 0)
			r = (int)n;
		else if ((r = (int)io_sync(s, IO_WRITE, g->fd, g->write_off, buf, (size_t)n)) >= 0)
			r = seg_write_hdr(s, (uint32_t)slot, g->write_off, (uint64_t)n);
		kvt_mem_free(s->mem, buf, len);
	}
	seg_sum_free(s, g);
	if (r < 0) {
		/* Without a summary recovery walks the records: still correct. */
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: sealing segment %d: %s", slot,
			 kvt_strerror(r));
		if (r == -EIO) {
			pthread_mutex_unlock(&s->seg_lock);
			seg_quarantine(s, (uint32_t)slot, r);
			pthread_mutex_lock(&s->seg_lock);
		}
	}
	if (g->state == SEG_OPEN)
		g->state = SEG_SEALED;
	A(s->seg_sealed);
	s->seals_since_ckpt++;
}

static bool reinsert_cb_budget(struct ssd *s, uint64_t *budget, uint64_t len)
{
	(void)s;
	if (*budget < len)
		return false;
	*budget -= len;
	return true;
}

static void wd_enqueue(struct ssd *s, struct wd_task *t, bool front);

struct evict_ctx {
	struct ssd *s;
	uint32_t slot;
	uint64_t gen;
	uint64_t dropped;
	uint64_t budget;
};

/* For each summary entry of the evicted segment: drop it, maybe reinsert. */
static int evict_entry_cb(void *ctx, const struct ssd_sum_entry *se)
{
	struct evict_ctx *ec = ctx;
	struct ssd *s = ec->s;
	uint64_t h;
	struct ssd_shard *sh;
	struct ssd_entry **pp;
	bool reinsert = false;

	if (se->type != SSD_REC_PUT)
		return 0;
	h = ssd_hash(se->ns_id, &se->key);
	sh = shard_of(s, h);
	pthread_mutex_lock(&sh->lock);
	pp = idx_slot(sh, h, se->ns_id, &se->key);
	if (*pp && (*pp)->slot == ec->slot && (*pp)->generation == ec->gen &&
	    !((*pp)->flags & E_PENDING)) {
		reinsert = ((*pp)->flags & E_READ) &&
			   reinsert_cb_budget(s, &ec->budget, (*pp)->value_len);
		idx_remove_locked(s, sh, pp);
		ec->dropped++;
	}
	pthread_mutex_unlock(&sh->lock);
	if (reinsert) {
		/* Read while here and still in DRAM: write it down again. */
		struct iovec view[DRAM_MAX_RUNS];
		struct dram_item *it;
		unsigned vc;
		uint64_t len;
		if (dram_pin(s->dram, se->ns_id, &se->key, &it, view, &vc, &len) == KVT_OK) {
			struct wd_task *t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
			if (t) {
				t->type = T_PUT;
				t->s = s;
				t->item = it;
				t->value_len = len;
				pthread_mutex_lock(&s->wd_lock);
				s->wd_bytes += len;
				pthread_mutex_unlock(&s->wd_lock);
				wd_enqueue(s, t, false);
				A(s->reinserted);
			} else {
				dram_unpin(s->dram, it);
			}
		}
	}
	return 0;
}

/* Evict the oldest sealed segment.  seg_lock held.  Returns false if none. */
static bool seg_evict_oldest_locked(struct ssd *s)
{
	int64_t victim = -1;
	struct ssd_seg *g;
	struct evict_ctx ec;
	uint8_t *buf = NULL;
	struct ssd_seg_hdr hdr;

	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state != SEG_SEALED)
			continue;
		if (victim < 0 || s->segs[i].generation < s->segs[victim].generation)
			victim = i;
	}
	if (victim < 0)
		return false;
	g = &s->segs[victim];
	memset(&ec, 0, sizeof(ec));
	ec.s = s;
	ec.slot = (uint32_t)victim;
	ec.gen = g->generation;
	ec.budget = s->cfg.seg_size / 100 * s->cfg.reinsert_pct;

	/* The summary names every record; without one (sealing failed) sweep. */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (buf && pread_full(g->fd, buf, SSD_ALIGN, 0) == 0 &&
	    ssd_seg_hdr_decode(buf, &hdr) == 0 && hdr.generation == g->generation &&
	    hdr.summary_len > 0 && hdr.summary_len <= s->cfg.seg_size) {
		uint8_t *sum = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, hdr.summary_len);
		if (sum && pread_full(g->fd, sum, hdr.summary_len, hdr.summary_off) == 0)
			ssd_sum_decode(sum, hdr.summary_len, g->generation, evict_entry_cb, &ec);
		if (sum)
			kvt_mem_free(s->mem, sum, hdr.summary_len);
	}
	if (buf)
		kvt_mem_free(s->mem, buf, SSD_ALIGN);
	/* Whatever the summary missed. */
	ec.dropped += idx_sweep(s, KVT_NS_ALL, (uint32_t)victim, g->generation, UINT64_MAX);
	g->state = SEG_FREE;
	A(s->seg_evicted);
	AN(s->evicted_blocks, ec.dropped);
	kvt_logf(s->log, KVT_LOG_DEBUG, "ssd: evicted segment %lld (generation %llu): %llu blocks",
		 (long long)victim, (unsigned long long)ec.gen, (unsigned long long)ec.dropped);
	return true;
}

/* Start a new segment in a free slot, evicting by watermarks.  seg_lock held. */
static int seg_open_next_locked(struct ssd *s)
{
	uint32_t used = 0, slot = UINT32_MAX;
	uint64_t high, low;
	int r;

	for (uint32_t i = 0; i < s->slot_count; i++)
		if (s->segs[i].state == SEG_OPEN || s->segs[i].state == SEG_SEALED)
			used++;
	high = (uint64_t)s->slot_count * s->cfg.high_pct / 100;
	low = (uint64_t)s->slot_count * s->cfg.low_pct / 100;
	if (high >= s->slot_count)
		high = s->slot_count - 1;
	if (low > high)
		low = high;
	if (used >= high) {
		while (used > low && seg_evict_oldest_locked(s))
			used--;
	}
	/* Lowest-numbered free slot: files are reused in place. */
	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state == SEG_FREE) {
			slot = i;
			break;
		}
	}
	if (slot == UINT32_MAX && seg_evict_oldest_locked(s)) {
		for (uint32_t i = 0; i < s->slot_count; i++)
			if (s->segs[i].state == SEG_FREE) {
				slot = i;
				break;
			}
	}
	if (slot == UINT32_MAX)
		return KVT_EFULL;
	r = seg_open_file(s, slot, true);
	if (r < 0)
		return r;
	if (fallocate(s->segs[slot].fd, 0, 0, (off_t)s->cfg.seg_size) < 0 && errno != EOPNOTSUPP)
		return -errno;
	s->segs[slot].generation = s->next_gen++;
	s->segs[slot].write_off = SSD_ALIGN;
	s->segs[slot].sum_bytes = 64; /* the summary header */
	r = seg_write_hdr(s, slot, 0, 0);
	if (r < 0) {
		s->segs[slot].generation = 0;
		return r;
	}
	s->segs[slot].state = SEG_OPEN;
	s->open_slot = (int32_t)slot;
	return 0;
}

/*
 * Space for a record of rec_len bytes whose summary entry is se.  Sets
 * *slot, *off and se's offsets, records se in the summary, assigns the
 * sequence number.  seg_lock held.
 */
static int seg_reserve_locked(struct ssd *s, uint64_t rec_len, struct ssd_sum_entry *se,
			      uint32_t *slot, uint64_t *off, uint64_t *gen)
{
	size_t elen = ssd_sum_entry_len(se);
	struct ssd_seg *g;
	int r;

	if (SSD_ALIGN + rec_len + align4k(64 + elen) > s->cfg.seg_size)
		return KVT_ETOOBIG;
	for (int tries = 0; tries < 3; tries++) {
		if (s->open_slot < 0) {
			r = seg_open_next_locked(s);
			if (r < 0)
				return r;
		}
		g = &s->segs[s->open_slot];
		if (g->write_off + rec_len + align4k(g->sum_bytes + elen) <= s->cfg.seg_size)
			break;
		seg_seal_locked(s);
	}
	if (s->open_slot < 0)
		return KVT_EFULL;
	g = &s->segs[s->open_slot];
	if (g->sum_count == g->sum_cap) {
		size_t ncap = g->sum_cap ? g->sum_cap * 2 : 256;
		struct ssd_sum_entry *n = kvt_mem_realloc(s->mem, g->sum, g->sum_cap * sizeof(*n),
							  ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		g->sum = n;
		g->sum_cap = ncap;
	}
	se->seq = s->next_seq++;
	se->off_4k = (uint32_t)(g->write_off / SSD_ALIGN);
	se->len_4k = (uint32_t)(rec_len / SSD_ALIGN);
	g->sum[g->sum_count++] = *se;
	g->sum_bytes += elen;
	*slot = (uint32_t)s->open_slot;
	*off = g->write_off;
	*gen = g->generation;
	g->write_off += rec_len;
	g->dirty = true;
	return 0;
}

/* ------------------------------------------------------------------------
 * Write-down
 */

static void wd_enqueue(struct ssd *s, struct wd_task *t, bool front)
{
	pthread_mutex_lock(&s->wd_lock);
	if (front) {
		t->next = s->wd_head;
		s->wd_head = t;
		if (!s->wd_tail)
			s->wd_tail = t;
	} else {
		t->next = NULL;
		if (s->wd_tail)
			s->wd_tail->next = t;
		else
			s->wd_head = t;
		s->wd_tail = t;
	}
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
}

static bool ns_persistent(struct ssd *s, uint32_t ns)
{
	bool p;
	pthread_mutex_lock(&s->ns_lock);
	p = ns < s->persistent_cap && s->persistent[ns];
	pthread_mutex_unlock(&s->ns_lock);
	return p;
}

int ssd_set_persistent(struct ssd *s, uint32_t ns)
{
	int ret = 0;
	pthread_mutex_lock(&s->ns_lock);
	if (ns >= s->persistent_cap) {
		uint32_t ncap = ns + 64;
		uint8_t *n = kvt_mem_realloc(s->mem, s->persistent, s->persistent_cap, ncap);
		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		memset(n + s->persistent_cap, 0, ncap - s->persistent_cap);
		s->persistent = n;
		s->persistent_cap = ncap;
	}
	s->persistent[ns] = 1;
out:
	pthread_mutex_unlock(&s->ns_lock);
	return ret;
}

bool ssd_admit(void *ctx, struct dram_item *item, uint32_t ns, int why)
{
	struct ssd *s = ctx;
	struct wd_task *t;
	struct iovec view[DRAM_MAX_RUNS];
	uint64_t len;

	/* Puts go down at once only in write-through mode or for persistent
	 * namespaces; otherwise a block goes down on its second access. */
	if (why == DRAM_ADMIT_PUT && s->cfg.admission != SSD_ADMIT_ALWAYS && !ns_persistent(s, ns))
		return false;
	dram_item_view(s->dram, item, view, &len);
	pthread_mutex_lock(&s->wd_lock);
	if (s->wd_stop || s->wd_bytes + len > s->cfg.wd_max_bytes ||
	    (s->degraded && now_ns() - s->degraded_at_ns < s->cfg.retry_ns)) {
		pthread_mutex_unlock(&s->wd_lock);
		A(s->wd_shed);
		return false;
	}
	s->wd_bytes += len;
	pthread_mutex_unlock(&s->wd_lock);
	t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	if (!t) {
		pthread_mutex_lock(&s->wd_lock);
		s->wd_bytes -= len;
		pthread_mutex_unlock(&s->wd_lock);
		A(s->wd_shed);
		return false;
	}
	t->type = T_PUT;
	t->s = s;
	t->item = item;
	t->ns = ns;
	t->value_len = len;
	A(s->wd_queued);
	wd_enqueue(s, t, false);
	return true;
}

static void wd_task_free(struct ssd *s, struct wd_task *t)
{
	if (t->hdr)
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
	kvt_mem_free(s->mem, t, sizeof(*t));
}

/* A write finished (or was never submitted: res < 0).  Any thread. */
static void wd_finish(struct ssd *s, struct wd_task *t, int64_t res)
{
	bool ok = res >= 0 && (uint64_t)res == t->rec_len;

	if (t->type == T_PUT) {
		uint64_t h = ssd_hash(t->ns, &t->key);
		struct ssd_shard *sh = shard_of(s, h);
		struct ssd_entry **pp;
		pthread_mutex_lock(&sh->lock);
		pp = idx_slot(sh, h, t->ns, &t->key);
		if (*pp && (*pp)->seq == t->seq) {
			if (ok) {
				(*pp)->flags &= (uint8_t)~E_PENDING;
				sh->bytes += (*pp)->value_len;
			} else {
				idx_remove_locked(s, sh, pp);
			}
		}
		pthread_mutex_unlock(&sh->lock);
		dram_writedown_done(s->dram, t->item, ok);
		if (ok) {
			A(s->wd_written);
			AN(s->wd_written_bytes, t->value_len);
		}
	} else if (ok) {
		A(s->tombstones);
	}
	if (!ok && res != -ECANCELED) {
		A(s->wd_errors);
		if (res == -ENOSPC) {
			A(s->enospc);
			pthread_mutex_lock(&s->wd_lock);
			if (!s->degraded)
				kvt_logf(s->log, KVT_LOG_ERROR,
					 "ssd: device full (ENOSPC): serving from DRAM only, "
					 "write-downs shed; retrying every %llu ms",
					 (unsigned long long)(s->cfg.retry_ns / 1000000));
			s->degraded = true;
			s->degraded_at_ns = now_ns();
			pthread_mutex_unlock(&s->wd_lock);
		} else if (res == -EIO && t->hdr) {
			seg_quarantine(s, t->slot, (int)res);
		}
	} else if (ok) {
		pthread_mutex_lock(&s->wd_lock);
		if (s->degraded) {
			s->degraded = false;
			kvt_logf(s->log, KVT_LOG_INFO, "ssd: writes succeed again: tier re-enabled");
		}
		pthread_mutex_unlock(&s->wd_lock);
	}
	pthread_mutex_lock(&s->wd_lock);
	if (t->type == T_PUT)
		s->wd_bytes -= t->value_len;
	if (t->hdr)
		s->wd_inflight--;
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
	wd_task_free(s, t);
}

static void wd_io_done(struct multi_io *m, int64_t res)
{
	struct wd_task *t = m->ctx;
	wd_finish(t->s, t, res);
}

/* Build, place and submit one record.  Writer thread. */
static void wd_write(struct ssd *s, struct wd_task *t)
{
	struct ssd_part parts_small[16], *parts = parts_small;
	uint64_t lens_small[16], *lens = lens_small;
	uint32_t crcs_small[16], *crcs = crcs_small;
	const struct ns_entry *nse;
	struct ssd_rec_hdr rh;
	struct ssd_sum_entry se;
	struct ssd_entry e;
	uint64_t off = 0, rec_len, h;
	unsigned np = 1, vc = 0;
	int r;

	memset(&rh, 0, sizeof(rh));
	memset(&se, 0, sizeof(se));
	if (t->type == T_PUT) {
		if (!dram_item_alive(s->dram, t->item)) {
			A(s->wd_skipped);
			wd_finish(s, t, -ECANCELED);
			return;
		}
		lens = kvt_mem_alloc(s->mem, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							      sizeof(*parts)));
		if (!lens) {
			wd_finish(s, t, -ENOMEM);
			return;
		}
		crcs = (uint32_t *)(lens + KVT_PARTS_MAX);
		parts = (struct ssd_part *)(void *)(crcs + KVT_PARTS_MAX);
		r = dram_item_meta(s->dram, t->item, &t->ns, &t->key, lens, crcs, KVT_PARTS_MAX);
		if (r < 0)
			goto fail;
		np = (unsigned)r;
		for (unsigned i = 0; i < np; i++) {
			parts[i].len = lens[i];
			parts[i].crc = crcs[i];
		}
		/* Already on SSD (e.g. reinsertion raced a promotion): nothing to do. */
		if (ssd_find(s, t->ns, &t->key, NULL) == KVT_OK) {
			kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
								   sizeof(*parts)));
			dram_writedown_done(s->dram, t->item, true);
			t->item = NULL;
			pthread_mutex_lock(&s->wd_lock);
			s->wd_bytes -= t->value_len;
			pthread_mutex_unlock(&s->wd_lock);
			wd_task_free(s, t);
			return;
		}
		rh.type = SSD_REC_PUT;
		rh.part_count = np;
		rh.value_len = t->value_len;
	} else {
		rh.type = t->type == T_DELETE ? SSD_REC_DELETE
			  : t->ns == KVT_NS_ALL ? SSD_REC_CLEAR_ALL : SSD_REC_CLEAR_NS;
		np = 0;
	}
	nse = t->ns != KVT_NS_ALL ? ns_reg_get(s->reg, t->ns) : NULL;
	rh.ns_id = t->ns == KVT_NS_ALL ? 0 : t->ns;
	if (nse)
		memcpy(rh.ns_digest, nse->digest, 32);
	if (t->type != T_CLEAR)
		rh.key = t->key;
	t->hdr_len = ssd_rec_hdr_len(np);
	rec_len = ssd_rec_len(np, rh.value_len);
	t->rec_len = rec_len;
	t->hdr = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, t->hdr_len);
	if (!t->hdr) {
		r = -ENOMEM;
		goto fail;
	}

	se.type = rh.type;
	se.ns_id = rh.ns_id;
	se.value_len = rh.value_len;
	se.part_count = (uint16_t)np;
	se.key = rh.key;
	pthread_mutex_lock(&s->seg_lock);
	r = seg_reserve_locked(s, rec_len, &se, &t->slot, &off, &t->generation);
	pthread_mutex_unlock(&s->seg_lock);
	if (r < 0) {
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
		t->hdr = NULL;
		goto fail;
	}
	t->seq = se.seq;
	t->off_4k = se.off_4k;
	if (t->type == T_CLEAR) {
		pthread_mutex_lock(&s->seg_lock);
		clear_raise(s, rh.ns_id, se.seq);
		pthread_mutex_unlock(&s->seg_lock);
	}
	rh.seq = se.seq;
	rh.generation = t->generation;
	r = ssd_rec_hdr_encode(&rh, np ? parts : NULL, t->hdr, t->hdr_len);
	if (r < 0) {
		/* Cannot happen: lengths were checked.  The reserved space stays
		 * unwritten; recovery reads this segment's summary once sealed. */
		kvt_logf(s->log, KVT_LOG_ERROR, "ssd: encoding a record: %s", kvt_strerror(r));
		goto fail;
	}

	if (t->type == T_PUT) {
		/* Enter it as PENDING, then look again: a delete that killed the
		 * DRAM block before this point finds no entry and logs no
		 * tombstone, so the record must not be published. */
		memset(&e, 0, sizeof(e));
		e.seq = t->seq;
		e.value_len = t->value_len;
		e.generation = t->generation;
		e.ns = t->ns;
		e.slot = t->slot;
		e.off_4k = se.off_4k;
		e.len_4k = se.len_4k;
		e.part_count = (uint16_t)np;
		e.flags = E_PENDING;
		e.key_len = (uint8_t)t->key.len;
		memcpy(e.key, t->key.bytes, t->key.len);
		h = ssd_hash(t->ns, &t->key);
		pthread_mutex_lock(&shard_of(s, h)->lock);
		r = idx_put_locked(s, shard_of(s, h), h, &e);
		pthread_mutex_unlock(&shard_of(s, h)->lock);
		/* On failure the record is still written (the space is taken and
		 * the segment must stay walkable); it is found after a restart. */
		if (!dram_item_alive(s->dram, t->item) &&
		    idx_remove_key(s, t->ns, &t->key, t->seq + 1)) {
			/* Lost to a delete after all: log a tombstone after it. */
			struct wd_task *d = kvt_mem_calloc(s->mem, 1, sizeof(*d));
			if (d) {
				d->type = T_DELETE;
				d->s = s;
				d->ns = t->ns;
				d->key = t->key;
				wd_enqueue(s, d, true);
			}
		}
		t->iov[0].iov_base = t->hdr;
		t->iov[0].iov_len = t->hdr_len;
		vc = dram_item_view(s->dram, t->item, t->iov + 1, &h);
		t->iov[vc].iov_len = align4k(t->iov[vc].iov_len);
		vc++;
		kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							   sizeof(*parts)));
		lens = lens_small;
	} else {
		t->iov[0].iov_base = t->hdr;
		t->iov[0].iov_len = t->hdr_len;
		vc = 1;
	}
	pthread_mutex_lock(&s->wd_lock);
	s->wd_inflight++;
	pthread_mutex_unlock(&s->wd_lock);
	multi_submit(s, &t->io, IO_WRITE, IO_PRIO_WRITE, s->segs[t->slot].fd, off, t->iov, vc,
		     wd_io_done, t);
	return;

fail:
	if (lens != lens_small)
		kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							   sizeof(*parts)));
	if (t->hdr) {
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
		t->hdr = NULL;
	}
	if (r == KVT_ETOOBIG)
		A(s->wd_skipped);
	wd_finish(s, t, r == -ENOSPC || r == KVT_EFULL ? -ENOSPC : r);
}

/* fdatasync every segment written since the last sync.  Writer thread. */
static int wd_sync_all(struct ssd *s)
{
	int ret = 0;
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		bool dirty;
		pthread_mutex_lock(&s->seg_lock);
		dirty = g->dirty && g->fd >= 0 && g->state != SEG_BAD;
		g->dirty = false;
		pthread_mutex_unlock(&s->seg_lock);
		if (dirty) {
			int64_t r = io_sync(s, IO_FSYNC, g->fd, 0, NULL, 0);
			if (r < 0 && ret == 0)
				ret = (int)r;
		}
	}
	return ret;
}

static void wd_wait_inflight(struct ssd *s)
{
	pthread_mutex_lock(&s->wd_lock);
	while (s->wd_inflight > 0)
		pthread_cond_wait(&s->wd_cond, &s->wd_lock);
	pthread_mutex_unlock(&s->wd_lock);
}

static int ckpt_write(struct ssd *s);

static void wd_wake_waiter(struct wd_task *t, int status)
{
	pthread_mutex_lock(t->wait_lock);
	t->wait_status = status;
	*t->wait_done = 1;
	pthread_cond_broadcast(t->wait_cond);
	pthread_mutex_unlock(t->wait_lock);
}

static void *wd_main(void *arg)
{
	struct ssd *s = arg;
	for (;;) {
		struct wd_task *t;
		pthread_mutex_lock(&s->wd_lock);
		while (!s->wd_head && !s->wd_stop)
			pthread_cond_wait(&s->wd_cond, &s->wd_lock);
		t = s->wd_head;
		if (!t) {
			pthread_mutex_unlock(&s->wd_lock);
			break;
		}
		s->wd_head = t->next;
		if (!s->wd_head)
			s->wd_tail = NULL;
		pthread_mutex_unlock(&s->wd_lock);

		switch (t->type) {
		case T_PUT:
		case T_DELETE:
		case T_CLEAR:
			wd_write(s, t);
			break;
		case T_FLUSH:
		case T_CKPT: {
			int r;
			wd_wait_inflight(s);
			r = t->type == T_FLUSH ? wd_sync_all(s) : ckpt_write(s);
			wd_wake_waiter(t, r); /* the waiter owns t */
			break;
		}
		}
		if (s->cfg.ckpt_seals && s->seals_since_ckpt >= s->cfg.ckpt_seals) {
			wd_wait_inflight(s);
			ckpt_write(s);
		}
	}
	return NULL;
}

/* Queue a flush or checkpoint marker and wait for the writer to reach it. */
static int wd_barrier(struct ssd *s, int type)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int done = 0, status;
	struct wd_task t;

	memset(&t, 0, sizeof(t));
	t.type = type;
	t.s = s;
	t.wait_lock = &lock;
	t.wait_cond = &cond;
	t.wait_done = &done;
	wd_enqueue(s, &t, false);
	pthread_mutex_lock(&lock);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	status = t.wait_status;
	pthread_mutex_unlock(&lock);
	pthread_mutex_destroy(&lock);
	pthread_cond_destroy(&cond);
	return status;
}

int ssd_flush(struct ssd *s)
{
	return wd_barrier(s, T_FLUSH);
}

int ssd_checkpoint(struct ssd *s)
{
	return wd_barrier(s, T_CKPT);
}

/* ------------------------------------------------------------------------
 * Lookups, deletes, clears
 */

int ssd_find(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t *value_len)
{
	uint64_t h = ssd_hash(ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	int ret = KVT_MISS;
	pthread_mutex_lock(&sh->lock);
	e = *idx_slot(sh, h, ns, key);
	if (e && !(e->flags & E_PENDING)) {
		if (value_len)
			*value_len = e->value_len;
		ret = KVT_OK;
	}
	pthread_mutex_unlock(&sh->lock);
	return ret;
}

/*
 * Deletes and clears log a record, allocated first by ssd_log_prepare so
 * that the caller can fail whole (-ENOMEM) before changing any tier; the
 * DRAM tier must be changed before the SSD index (see wd_write), so the
 * caller prepares, deletes in DRAM, then calls ssd_delete / ssd_clear,
 * which consume the prepared record.
 */
void *ssd_log_prepare(struct ssd *s, bool clear, uint32_t ns, const struct kvt_key *key)
{
	struct wd_task *t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	if (!t)
		return NULL;
	t->type = clear ? T_CLEAR : T_DELETE;
	t->s = s;
	t->ns = ns;
	if (key)
		t->key = *key;
	return t;
}

int ssd_delete(struct ssd *s, void *prepared, uint32_t ns, const struct kvt_key *key)
{
	struct wd_task *t = prepared;
	if (!idx_remove_key(s, ns, key, UINT64_MAX)) {
		kvt_mem_free(s->mem, t, sizeof(*t));
		return KVT_MISS;
	}
	wd_enqueue(s, t, false);
	return KVT_OK;
}

int64_t ssd_clear(struct ssd *s, void *prepared, uint32_t ns)
{
	uint64_t n = idx_sweep(s, ns, UINT32_MAX, 0, UINT64_MAX);
	wd_enqueue(s, prepared, false);
	return (int64_t)n;
}

/* ------------------------------------------------------------------------
 * Promotion
 */

static void promote_free(struct ssd *s, struct promote_task *p)
{
	if (p->hdr)
		kvt_mem_free(s->mem, p->hdr, p->hdr_len);
	kvt_mem_free(s->mem, p, sizeof(*p));
}

static void promote_done(struct multi_io *m, int64_t res)
{
	struct promote_task *p = m->ctx;
	struct ssd *s = p->s;
	struct ssd_rec_hdr rh;
	struct ssd_part parts_small[16], *parts = parts_small;
	uint64_t lens_small[16], *lens = lens_small;
	uint32_t crcs_small[16], *crcs = crcs_small;
	const struct ns_entry *nse = ns_reg_get(s->reg, p->ns);
	struct iovec view[DRAM_MAX_RUNS];
	uint64_t len, off = 0;
	unsigned vc;
	int status = KVT_MISS, rc;

	if (res < 0 || (uint64_t)res != p->rec_len) {
		A(s->io_errors);
		if (res == -EIO)
			seg_quarantine(s, p->slot, -EIO);
		goto fail;
	}
	if (p->part_count > KVT_ARRAY_LEN(parts_small)) {
		parts = kvt_mem_alloc(s->mem, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							      sizeof(*crcs)));
		if (!parts)
			goto fail;
		lens = (uint64_t *)(parts + p->part_count);
		crcs = (uint32_t *)(lens + p->part_count);
	}
	rc = ssd_rec_hdr_decode(p->hdr, p->hdr_len, &rh, parts, p->part_count);
	if (rc < 0 || rh.type != SSD_REC_PUT || rh.seq != p->seq ||
	    rh.generation != p->generation || rh.value_len != p->value_len ||
	    rh.part_count != p->part_count || rh.key.len != p->key.len ||
	    memcmp(rh.key.bytes, p->key.bytes, p->key.len) != 0 || !nse ||
	    memcmp(rh.ns_digest, nse->digest, 32) != 0) {
		/* Not the record the index promised (torn, overwritten, foreign). */
		A(s->hdr_errors);
		idx_remove_key(s, p->ns, &p->key, p->seq + 1);
		goto fail_parts;
	}
	vc = dram_item_view(s->dram, p->item, view, &len);
	for (uint32_t i = 0; i < rh.part_count; i++) {
		uint32_t crc = 0;
		uint64_t want = parts[i].len, o = off;
		for (unsigned v = 0; v < vc && want > 0; v++) {
			uint64_t n;
			if (o >= view[v].iov_len) {
				o -= view[v].iov_len;
				continue;
			}
			n = view[v].iov_len - o < want ? view[v].iov_len - o : want;
			crc = kvt_crc32c(crc, (char *)view[v].iov_base + o, n);
			want -= n;
			o = 0;
		}
		if (crc != parts[i].crc) {
			A(s->crc_errors);
			idx_remove_key(s, p->ns, &p->key, p->seq + 1);
			kvt_logf(s->log, KVT_LOG_WARN,
				 "ssd: CRC mismatch in segment %u part %u: block dropped (a miss)",
				 p->slot, i);
			goto fail_parts;
		}
		lens[i] = parts[i].len;
		crcs[i] = crc;
		off += parts[i].len;
	}
	if (dram_publish(s->dram, p->item, crcs, lens, DRAM_ON_LOWER | DRAM_PROMOTED, true) ==
	    KVT_OK) {
		uint64_t dt = now_ns() - p->start_ns;
		status = KVT_OK;
		A(s->reads);
		AN(s->read_bytes, p->value_len);
		if (dt > 0) {
			double bps = (double)p->rec_len * 1e9 / (double)dt;
			pthread_mutex_lock(&s->wd_lock);
			s->read_bps = s->read_measured ? 0.9 * s->read_bps + 0.1 * bps : bps;
			s->read_measured = true;
			pthread_mutex_unlock(&s->wd_lock);
		}
	}
	p->item = status == KVT_OK ? p->item : NULL;
	if (parts != parts_small)
		kvt_mem_free(s->mem, parts, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							    sizeof(*crcs)));
	p->cb(p->ctx, status, p->item);
	promote_free(s, p);
	return;

fail_parts:
	if (parts != parts_small)
		kvt_mem_free(s->mem, parts, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							    sizeof(*crcs)));
fail:
	A(s->read_misses);
	dram_abort(s->dram, p->item);
	p->cb(p->ctx, KVT_MISS, NULL);
	promote_free(s, p);
}

int ssd_promote(struct ssd *s, uint32_t ns, const struct kvt_key *key, int prio,
		ssd_promote_cb cb, void *ctx)
{
	uint64_t h = ssd_hash(ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	struct promote_task *p;
	uint64_t off;
	unsigned vc = 0;
	int ret;

	p = kvt_mem_calloc(s->mem, 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&sh->lock);
	e = *idx_slot(sh, h, ns, key);
	if (!e || (e->flags & E_PENDING)) {
		pthread_mutex_unlock(&sh->lock);
		kvt_mem_free(s->mem, p, sizeof(*p));
		return KVT_MISS;
	}
	e->flags |= E_READ;
	p->s = s;
	p->ns = ns;
	p->key = *key;
	p->seq = e->seq;
	p->generation = e->generation;
	p->value_len = e->value_len;
	p->slot = e->slot;
	p->part_count = e->part_count;
	p->rec_len = (uint64_t)e->len_4k * SSD_ALIGN;
	off = (uint64_t)e->off_4k * SSD_ALIGN;
	pthread_mutex_unlock(&sh->lock);

	p->hdr_len = ssd_rec_hdr_len(p->part_count);
	if (p->rec_len != ssd_rec_len(p->part_count, p->value_len)) {
		promote_free(s, p);
		return KVT_MISS;
	}
	p->hdr = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, p->hdr_len);
	if (!p->hdr) {
		promote_free(s, p);
		return -ENOMEM;
	}
	/* Part lengths are known only once the header is read: reserve with the
	 * right part count; publish sets the real lengths. */
	{
		uint64_t *lens = NULL;
		if (p->part_count > 1) {
			lens = kvt_mem_calloc(s->mem, p->part_count, sizeof(*lens));
			if (!lens) {
				promote_free(s, p);
				return -ENOMEM;
			}
			lens[p->part_count - 1] = p->value_len;
		}
		ret = dram_reserve(s->dram, ns, key, p->value_len, lens, p->part_count, &p->item,
				   p->iov + 1, &vc);
		if (lens)
			kvt_mem_free(s->mem, lens, p->part_count * sizeof(*lens));
	}
	if (ret == KVT_EFULL)
		A(s->promote_full);
	if (ret != KVT_OK) {
		promote_free(s, p);
		return ret;
	}
	p->iov[0].iov_base = p->hdr;
	p->iov[0].iov_len = p->hdr_len;
	p->iov[vc].iov_len = align4k(p->iov[vc].iov_len);
	p->cb = cb;
	p->ctx = ctx;
	p->start_ns = now_ns();
	{
		int fd;
		pthread_mutex_lock(&s->seg_lock);
		fd = s->segs[p->slot].fd;
		pthread_mutex_unlock(&s->seg_lock);
		multi_submit(s, &p->io, IO_READ, prio, fd, off, p->iov, vc + 1, promote_done, p);
	}
	return 0;
}

uint64_t ssd_load_ns(struct ssd *s, uint64_t len)
{
	double bps;
	pthread_mutex_lock(&s->wd_lock);
	bps = s->read_measured ? s->read_bps : 1e9; /* unmeasured: assume 1 GB/s */
	pthread_mutex_unlock(&s->wd_lock);
	return (uint64_t)((double)len * 1e9 / bps);
}

/* ------------------------------------------------------------------------
 * Checkpoints
 */

struct ckpt_fill {
	struct ssd_ckpt_writer w;
	int err;
};

static int ckpt_write(struct ssd *s)
{
	uint64_t entries = 0, key_bytes = 0, seq;
	uint32_t clears = 0;
	size_t cap;
	uint8_t *buf;
	struct ssd_ckpt_writer w;
	struct ssd_ckpt_hdr h;
	int64_t len;
	int fd, r;

	r = wd_sync_all(s); /* what the checkpoint names must be durable first */
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->seg_lock);
	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		entries += s->shards[i].count;
		pthread_mutex_unlock(&s->shards[i].lock);
	}
	key_bytes = entries * KVT_KEY_MAX;
	for (uint32_t i = 0; i < s->clear_cap; i++)
		clears += s->clear_seq[i] != 0;
	cap = ssd_ckpt_size(s->slot_count, clears, entries, key_bytes);
	buf = kvt_mem_alloc(s->mem, cap);
	if (!buf) {
		pthread_mutex_unlock(&s->seg_lock);
		return -ENOMEM;
	}
	ssd_ckpt_begin(&w, buf, cap);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_ckpt_slot sl = { s->segs[i].generation, s->segs[i].write_off };
		if (s->segs[i].state == SEG_FREE || s->segs[i].state == SEG_BAD)
			sl.generation = 0;
		ssd_ckpt_put_slot(&w, &sl);
	}
	for (uint32_t i = 0; i < s->clear_cap; i++) {
		if (s->clear_seq[i]) {
			struct ssd_ckpt_clear c = { i, s->clear_seq[i] };
			ssd_ckpt_put_clear(&w, &c);
		}
	}
	seq = s->next_seq - 1;
	/* The writer thread is the only one that adds entries, and it is here:
	 * the index holds no PENDING entry and cannot grow meanwhile. */
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		for (uint32_t b = 0; b <= sh->mask; b++) {
			for (struct ssd_entry *e = sh->buckets[b]; e; e = e->hnext) {
				struct ssd_ckpt_entry ce;
				if (e->flags & E_PENDING)
					continue;
				memset(&ce, 0, sizeof(ce));
				ce.e.type = SSD_REC_PUT;
				ce.e.ns_id = e->ns;
				ce.e.off_4k = e->off_4k;
				ce.e.len_4k = e->len_4k;
				ce.e.seq = e->seq;
				ce.e.value_len = e->value_len;
				ce.e.part_count = e->part_count;
				ce.e.key.len = e->key_len;
				memcpy(ce.e.key.bytes, e->key, e->key_len);
				ce.slot = e->slot;
				ce.generation = e->generation;
				if (ssd_ckpt_put_entry(&w, &ce) < 0)
					break;
			}
		}
		pthread_mutex_unlock(&sh->lock);
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.store_id, s->store_id, 16);
	h.seq = seq;
	h.slot_count = s->slot_count;
	h.clear_count = clears;
	h.entry_count = w.entries;
	len = ssd_ckpt_finish(&w, &h);
	s->seals_since_ckpt = 0;
	pthread_mutex_unlock(&s->seg_lock);
	if (len < 0) {
		kvt_mem_free(s->mem, buf, cap);
		return (int)len;
	}
	fd = openat(s->dir_fd, SSD_CKPT ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
	} else {
		size_t done = 0;
		r = 0;
		while (done < (size_t)len) {
			ssize_t n = write(fd, buf + done, (size_t)len - done);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				break;
			}
			done += (size_t)n;
		}
		if (r == 0 && fsync(fd) < 0)
			r = -errno;
		close(fd);
		if (r == 0 && renameat(s->dir_fd, SSD_CKPT ".tmp", s->dir_fd, SSD_CKPT) < 0)
			r = -errno;
		if (r == 0 && fsync(s->dir_fd) < 0)
			r = -errno;
	}
	kvt_mem_free(s->mem, buf, cap);
	if (r < 0)
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint: %s", kvt_strerror(r));
	else
		A(s->ckpts);
	return r;
}

/* ------------------------------------------------------------------------
 * Recovery
 */

struct rec_item {
	uint32_t type, slot, ns;
	uint32_t off_4k, len_4k;
	uint16_t part_count;
	uint64_t seq, value_len, generation;
	struct kvt_key key;
};

struct recovery {
	struct ssd *s;
	struct ssd_ckpt_hdr ck;
	bool have_ckpt;
	uint64_t *ck_gen, *ck_off;  /* per slot, from the checkpoint */
	struct rec_item *items;
	size_t count, cap;
	uint32_t cur_slot;
	uint64_t cur_gen;
	uint64_t max_seq;
	int err;
};

static int rec_push(struct recovery *rc, const struct rec_item *it)
{
	if (rc->count == rc->cap) {
		size_t ncap = rc->cap ? rc->cap * 2 : 1024;
		struct rec_item *n = kvt_mem_realloc(rc->s->mem, rc->items, rc->cap * sizeof(*n),
						     ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rc->items = n;
		rc->cap = ncap;
	}
	rc->items[rc->count++] = *it;
	if (it->seq > rc->max_seq)
		rc->max_seq = it->seq;
	return 0;
}

static int rec_sum_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct recovery *rc = ctx;
	struct rec_item it;
	if (rc->have_ckpt && e->seq <= rc->ck.seq)
		return 0; /* reflected in the checkpoint */
	memset(&it, 0, sizeof(it));
	it.type = e->type;
	it.slot = rc->cur_slot;
	it.ns = e->ns_id;
	it.off_4k = e->off_4k;
	it.len_4k = e->len_4k;
	it.part_count = e->part_count;
	it.seq = e->seq;
	it.value_len = e->value_len;
	it.generation = rc->cur_gen;
	it.key = e->key;
	return rec_push(rc, &it);
}

static int ck_slot_cb(void *ctx, uint32_t idx, const struct ssd_ckpt_slot *sl)
{
	struct recovery *rc = ctx;
	if (idx < rc->s->slot_count) {
		rc->ck_gen[idx] = sl->generation;
		rc->ck_off[idx] = sl->write_off;
	}
	return 0;
}

static int ck_clear_cb(void *ctx, const struct ssd_ckpt_clear *c)
{
	struct recovery *rc = ctx;
	clear_raise(rc->s, c->ns_id, c->seq);
	return 0;
}

static int ck_entry_cb(void *ctx, const struct ssd_ckpt_entry *ce)
{
	struct recovery *rc = ctx;
	struct ssd *s = rc->s;
	struct ssd_entry e;
	uint64_t h;
	struct ssd_shard *sh;
	int r;

	if (ce->slot >= s->slot_count || s->segs[ce->slot].generation != ce->generation ||
	    s->segs[ce->slot].state == SEG_FREE || !ns_reg_get(s->reg, ce->e.ns_id)) {
		s->rec_dropped++;
		return 0;
	}
	memset(&e, 0, sizeof(e));
	e.seq = ce->e.seq;
	e.value_len = ce->e.value_len;
	e.generation = ce->generation;
	e.ns = ce->e.ns_id;
	e.slot = ce->slot;
	e.off_4k = ce->e.off_4k;
	e.len_4k = ce->e.len_4k;
	e.part_count = ce->e.part_count;
	e.key_len = (uint8_t)ce->e.key.len;
	memcpy(e.key, ce->e.key.bytes, ce->e.key.len);
	h = ssd_hash(e.ns, &ce->e.key);
	sh = shard_of(s, h);
	pthread_mutex_lock(&sh->lock);
	r = idx_put_locked(s, sh, h, &e);
	pthread_mutex_unlock(&sh->lock);
	if (r == 0)
		s->rec_ckpt_entries++;
	return r == -ENOMEM ? r : 0;
}

static void rec_load_ckpt(struct recovery *rc)
{
	struct ssd *s = rc->s;
	struct ssd_ckpt_cbs cbs = { ck_slot_cb, ck_clear_cb, ck_entry_cb };
	struct stat st;
	uint8_t *buf = NULL;
	int fd, r;

	fd = openat(s->dir_fd, SSD_CKPT, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (INT64_C(1) << 36))
		goto out;
	buf = kvt_mem_alloc(s->mem, (size_t)st.st_size);
	if (!buf || pread_full(fd, buf, (size_t)st.st_size, 0) < 0)
		goto out;
	/* Two passes: the header first, to check it is ours and sized right. */
	r = ssd_ckpt_decode(buf, (size_t)st.st_size, &rc->ck, NULL, NULL);
	if (r < 0 || memcmp(rc->ck.store_id, s->store_id, 16) != 0 ||
	    rc->ck.slot_count != s->slot_count) {
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint ignored (%s): scanning every segment",
			 r < 0 ? kvt_strerror(r) : "from another store or size");
		goto out;
	}
	r = ssd_ckpt_decode(buf, (size_t)st.st_size, &rc->ck, &cbs, rc);
	if (r < 0) {
		/* Entries already loaded are each checked on read; keep them,
		 * but scan everything as if there were no checkpoint. */
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint: %s", kvt_strerror(r));
		goto out;
	}
	rc->have_ckpt = true;
	rc->max_seq = rc->ck.seq;
out:
	if (buf)
		kvt_mem_free(s->mem, buf, (size_t)st.st_size);
	close(fd);
}

/* Walk the records of a segment without a summary, from byte `from`. */
static int rec_walk(struct recovery *rc, uint32_t slot, uint64_t from, uint64_t *end)
{
	struct ssd *s = rc->s;
	struct ssd_seg *g = &s->segs[slot];
	size_t cap = SSD_ALIGN * 4;
	uint8_t *buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, cap);
	uint64_t off = from;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	while (off + SSD_ALIGN <= s->cfg.seg_size) {
		struct ssd_rec_hdr h;
		struct rec_item it;
		int d;
		if (pread_full(g->fd, buf, SSD_ALIGN, off) < 0)
			break;
		d = ssd_rec_hdr_decode(buf, SSD_ALIGN, &h, NULL, 0);
		if (d == KVT_EBUFSMALL && h.hdr_len <= s->cfg.seg_size - off) {
			if (h.hdr_len > cap) {
				kvt_mem_free(s->mem, buf, cap);
				cap = h.hdr_len;
				buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, cap);
				if (!buf)
					return -ENOMEM;
			}
			if (pread_full(g->fd, buf, h.hdr_len, off) < 0)
				break;
			d = ssd_rec_hdr_decode(buf, h.hdr_len, &h, NULL, 0);
		}
		if (d < 0 || h.generation != g->generation)
			break; /* the end of what this generation wrote */
		memset(&it, 0, sizeof(it));
		it.type = h.type;
		it.slot = slot;
		it.ns = h.ns_id;
		it.off_4k = (uint32_t)(off / SSD_ALIGN);
		it.len_4k = (uint32_t)(ssd_rec_len(h.part_count, h.value_len) / SSD_ALIGN);
		it.part_count = (uint16_t)h.part_count;
		it.seq = h.seq;
		it.value_len = h.value_len;
		it.generation = g->generation;
		it.key = h.key;
		off += (uint64_t)it.len_4k * SSD_ALIGN;
		/* The summary the crash prevented: rebuilt for sealing. */
		if (g->sum_count == g->sum_cap) {
			size_t ncap = g->sum_cap ? g->sum_cap * 2 : 256;
			struct ssd_sum_entry *n = kvt_mem_realloc(s->mem, g->sum,
								  g->sum_cap * sizeof(*n),
								  ncap * sizeof(*n));
			if (!n) {
				r = -ENOMEM;
				break;
			}
			g->sum = n;
			g->sum_cap = ncap;
		}
		{
			struct ssd_sum_entry se;
			memset(&se, 0, sizeof(se));
			se.type = it.type;
			se.ns_id = it.ns;
			se.off_4k = it.off_4k;
			se.len_4k = it.len_4k;
			se.seq = it.seq;
			se.value_len = it.value_len;
			se.part_count = it.part_count;
			se.key = it.key;
			g->sum[g->sum_count++] = se;
			g->sum_bytes += ssd_sum_entry_len(&se);
		}
		if (rc->have_ckpt && it.seq <= rc->ck.seq) {
			if (it.seq > rc->max_seq)
				rc->max_seq = it.seq;
			continue;
		}
		r = rec_push(rc, &it);
		if (r < 0)
			break;
	}
	*end = off;
	kvt_mem_free(s->mem, buf, cap);
	return r;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct rec_item *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Raise a namespace's clear sequence (0: every namespace).  seg_lock held
 * (or recovery, single-threaded).  A failed growth loses nothing at run
 * time: the index was swept already; only a later recovery would replay
 * older records of the namespace, which their own CLEAR record kills. */
static void clear_raise(struct ssd *s, uint32_t ns, uint64_t seq)
{
	if (ns >= s->clear_cap) {
		uint32_t ncap = ns + 64;
		uint64_t *n = kvt_mem_realloc(s->mem, s->clear_seq, s->clear_cap * sizeof(*n),
					      ncap * sizeof(*n));
		if (!n)
			return;
		memset(n + s->clear_cap, 0, (ncap - s->clear_cap) * sizeof(*n));
		s->clear_seq = n;
		s->clear_cap = ncap;
	}
	if (seq > s->clear_seq[ns])
		s->clear_seq[ns] = seq;
}

static uint64_t clear_of(struct ssd *s, uint32_t ns)
{
	uint64_t a = s->clear_seq[0], b = ns < s->clear_cap ? s->clear_seq[ns] : 0;
	return a > b ? a : b;
}

/* Apply scanned records in sequence order. */
static int rec_apply(struct recovery *rc)
{
	struct ssd *s = rc->s;
	if (rc->count)
		qsort(rc->items, rc->count, sizeof(*rc->items), rec_cmp);
	for (size_t i = 0; i < rc->count; i++) {
		struct rec_item *it = &rc->items[i];
		switch (it->type) {
		case SSD_REC_PUT: {
			struct ssd_entry e;
			uint64_t h;
			int r;
			if (!ns_reg_get(s->reg, it->ns) || it->seq <= clear_of(s, it->ns)) {
				s->rec_dropped++;
				break;
			}
			memset(&e, 0, sizeof(e));
			e.seq = it->seq;
			e.value_len = it->value_len;
			e.generation = it->generation;
			e.ns = it->ns;
			e.slot = it->slot;
			e.off_4k = it->off_4k;
			e.len_4k = it->len_4k;
			e.part_count = it->part_count;
			e.key_len = (uint8_t)it->key.len;
			memcpy(e.key, it->key.bytes, it->key.len);
			h = ssd_hash(e.ns, &it->key);
			pthread_mutex_lock(&shard_of(s, h)->lock);
			r = idx_put_locked(s, shard_of(s, h), h, &e);
			pthread_mutex_unlock(&shard_of(s, h)->lock);
			if (r == -ENOMEM)
				return r;
			break;
		}
		case SSD_REC_DELETE:
			idx_remove_key(s, it->ns, &it->key, it->seq);
			break;
		case SSD_REC_CLEAR_NS:
			clear_raise(s, it->ns, it->seq);
			idx_sweep(s, it->ns, UINT32_MAX, 0, it->seq);
			break;
		case SSD_REC_CLEAR_ALL:
			clear_raise(s, 0, it->seq);
			idx_sweep(s, KVT_NS_ALL, UINT32_MAX, 0, it->seq);
			break;
		}
	}
	s->rec_records = rc->count;
	return 0;
}

static int ssd_store_id(struct ssd *s)
{
	int fd = openat(s->dir_fd, SSD_ID, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, s->store_id, 16);
		close(fd);
		if (n == 16)
			return 0;
	}
	if (getrandom(s->store_id, 16, 0) != 16)
		return -EIO;
	fd = openat(s->dir_fd, SSD_ID ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, s->store_id, 16) != 16 || fsync(fd) < 0) {
		int e = -errno;
		close(fd);
		return e ? e : -EIO;
	}
	close(fd);
	if (renameat(s->dir_fd, SSD_ID ".tmp", s->dir_fd, SSD_ID) < 0)
		return -errno;
	return fsync(s->dir_fd) < 0 ? -errno : 0;
}

static int ssd_recover(struct ssd *s)
{
	struct recovery rc;
	uint8_t *buf;
	uint64_t t0 = now_ns(), max_gen = 0;
	int r = 0;

	memset(&rc, 0, sizeof(rc));
	rc.s = s;
	rc.ck_gen = kvt_mem_calloc(s->mem, s->slot_count, sizeof(uint64_t));
	rc.ck_off = kvt_mem_calloc(s->mem, s->slot_count, sizeof(uint64_t));
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (!rc.ck_gen || !rc.ck_off || !buf) {
		r = -ENOMEM;
		goto out;
	}
	/* 1. Segment headers: which generation each slot holds. */
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		struct ssd_seg_hdr h;
		char name[32];
		snprintf(name, sizeof(name), "seg-%06u", i);
		if (faccessat(s->dir_fd, name, F_OK, 0) < 0)
			continue;
		r = seg_open_file(s, i, false);
		if (r < 0)
			goto out;
		if (pread_full(g->fd, buf, SSD_ALIGN, 0) == 0 &&
		    ssd_seg_hdr_decode(buf, &h) == KVT_EVERSION) {
			/* A newer kvtier wrote this: never overwrite what we cannot read. */
			kvt_logf(s->log, KVT_LOG_ERROR,
				 "ssd: segment %u has an unsupported format version", i);
			r = KVT_EVERSION;
			goto out;
		}
		if (pread_full(g->fd, buf, SSD_ALIGN, 0) < 0 || ssd_seg_hdr_decode(buf, &h) < 0 ||
		    h.slot != i || h.seg_size != s->cfg.seg_size ||
		    memcmp(h.store_id, s->store_id, 16) != 0 || h.generation == 0)
			continue; /* free (or foreign): reused as such */
		g->generation = h.generation;
		g->state = h.summary_len ? SEG_SEALED : SEG_OPEN;
		g->write_off = h.summary_len ? h.summary_off + h.summary_len : s->cfg.seg_size;
		if (h.generation > max_gen)
			max_gen = h.generation;
		/* stash the summary location for step 3 */
		g->sum_bytes = h.summary_len;
		g->write_off = h.summary_off;
	}
	/* 2. The checkpoint. */
	rec_load_ckpt(&rc);
	/* 3. Segments with records newer than the checkpoint. */
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		uint64_t sum_off = g->write_off, sum_len = g->sum_bytes;
		bool same = rc.have_ckpt && rc.ck_gen[i] == g->generation;
		if (g->state == SEG_FREE)
			continue;
		g->sum_bytes = 0;
		rc.cur_slot = i;
		rc.cur_gen = g->generation;
		if (g->state == SEG_SEALED) {
			g->write_off = sum_off + sum_len;
			/* Sealed before the checkpoint and unchanged: nothing newer. */
			if (same && rc.ck_off[i] >= sum_off)
				continue;
			s->rec_segments++;
			{
				uint8_t *sum = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, sum_len);
				int64_t n = -ENOMEM;
				if (sum && pread_full(g->fd, sum, sum_len, sum_off) == 0)
					n = ssd_sum_decode(sum, sum_len, g->generation, rec_sum_cb, &rc);
				if (sum)
					kvt_mem_free(s->mem, sum, sum_len);
				if (n == -ENOMEM) {
					r = -ENOMEM;
					goto out;
				}
				if (n < 0) {
					/* Bad summary: walk the records instead. */
					uint64_t end;
					r = rec_walk(&rc, i, SSD_ALIGN, &end);
					seg_sum_free(s, g);
					if (r < 0)
						goto out;
				}
			}
		} else {
			/* Open when the process stopped: walk it, then seal it. */
			uint64_t end = SSD_ALIGN;
			s->rec_segments++;
			r = rec_walk(&rc, i, SSD_ALIGN, &end);
			if (r < 0)
				goto out;
			g->write_off = end;
			g->sum_bytes += 64;
		}
	}
	s->next_gen = max_gen + 1;
	r = rec_apply(&rc);
	if (r < 0)
		goto out;
	s->next_seq = rc.max_seq + 1;
	for (uint32_t i = 0; i < s->slot_count; i++)
		if (s->segs[i].generation >= s->next_gen)
			s->next_gen = s->segs[i].generation + 1;
out:
	s->rec_ns = now_ns() - t0;
	kvt_mem_free(s->mem, rc.items, rc.cap * sizeof(*rc.items));
	kvt_mem_free(s->mem, rc.ck_gen, s->slot_count * sizeof(uint64_t));
	kvt_mem_free(s->mem, rc.ck_off, s->slot_count * sizeof(uint64_t));
	if (buf)
		kvt_mem_free(s->mem, buf, SSD_ALIGN);
	return r;
}

/* Seal the segments a crash left open (their summaries were rebuilt by the
 * walk).  Runs on the writer's behalf before it starts. */
static void ssd_seal_leftovers(struct ssd *s)
{
	pthread_mutex_lock(&s->seg_lock);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state == SEG_OPEN) {
			s->open_slot = (int32_t)i;
			seg_seal_locked(s);
		}
	}
	s->seals_since_ckpt = 0;
	pthread_mutex_unlock(&s->seg_lock);
}

/* ------------------------------------------------------------------------
 * Open and close
 */

int ssd_open(struct ssd **out, const struct ssd_config *cfg, int dir_fd, struct kvt_mem *mem,
	     const struct kvt_logger *log, struct ns_registry *reg, struct dram *dram)
{
	struct io_config ioc = { .backend = cfg->backend, .depth = cfg->io_depth };
	struct ssd *s;
	uint64_t used = 0, blocks = 0;
	int r;

	if (cfg->seg_size < (1u << 20) || cfg->seg_size % (1u << 20) ||
	    cfg->capacity / cfg->seg_size < 2)
		return KVT_EOPTVAL;
	s = kvt_mem_calloc(mem, 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->mem = mem;
	s->log = log;
	s->reg = reg;
	s->dram = dram;
	s->dir_fd = -1;
	s->open_slot = -1;
	s->next_seq = 1;
	s->next_gen = 1;
	pthread_mutex_init(&s->seg_lock, NULL);
	pthread_mutex_init(&s->ns_lock, NULL);
	pthread_mutex_init(&s->wd_lock, NULL);
	pthread_cond_init(&s->wd_cond, NULL);
	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_init(&s->shards[i].lock, NULL);
		s->shards[i].buckets = kvt_mem_calloc(mem, 64, sizeof(struct ssd_entry *));
		s->shards[i].mask = 63;
		if (!s->shards[i].buckets) {
			r = -ENOMEM;
			goto fail;
		}
	}
	s->slot_count = (uint32_t)(cfg->capacity / cfg->seg_size);
	s->segs = kvt_mem_calloc(mem, s->slot_count, sizeof(*s->segs));
	s->clear_cap = 64;
	s->clear_seq = kvt_mem_calloc(mem, s->clear_cap, sizeof(uint64_t));
	if (!s->segs || !s->clear_seq) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < s->slot_count; i++)
		s->segs[i].fd = -1;
	if (mkdirat(dir_fd, SSD_DIR, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		goto fail;
	}
	s->dir_fd = openat(dir_fd, SSD_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = ssd_store_id(s);
	if (r < 0)
		goto fail;
	r = io_open(&s->io, &ioc, mem, log);
	if (r < 0)
		goto fail;
	{
		/* The DRAM arena: value bytes move between it and the device as
		 * fixed-buffer I/O.  Failure only costs the fixed-buffer path. */
		struct iovec regions[256];
		unsigned n = dram_regions(dram, regions, 256);
		int rr = io_register_buffers(s->io, regions, n);
		if (rr < 0 && rr != -EOPNOTSUPP)
			kvt_logf(log, KVT_LOG_INFO, "ssd: DRAM arena not registered for fixed I/O: %s",
				 kvt_strerror(rr));
	}
	r = ssd_recover(s);
	if (r < 0)
		goto fail;
	ssd_seal_leftovers(s);
	for (int i = 0; i < SSD_SHARDS; i++) {
		used += s->shards[i].bytes;
		blocks += s->shards[i].count;
	}
	kvt_logf(log, KVT_LOG_INFO,
		 "ssd: %u segments of %llu MiB, io %s; recovered %llu blocks (%llu MiB) in %.3f s: "
		 "%llu from the checkpoint, %llu records scanned in %llu segments",
		 s->slot_count, (unsigned long long)(cfg->seg_size >> 20), io_backend_name(s->io),
		 (unsigned long long)blocks, (unsigned long long)(used >> 20),
		 (double)s->rec_ns / 1e9, (unsigned long long)s->rec_ckpt_entries,
		 (unsigned long long)s->rec_records, (unsigned long long)s->rec_segments);
	r = -pthread_create(&s->wd_thread, NULL, wd_main, s);
	if (r < 0)
		goto fail;
	pthread_setname_np(s->wd_thread, "kvt-ssd-wd");
	s->wd_started = true;
	*out = s;
	return 0;
fail:
	ssd_close(s);
	return r;
}

void ssd_close(struct ssd *s)
{
	if (!s)
		return;
	if (s->wd_started) {
		/* Everything queued is written, then a checkpoint is taken. */
		ssd_checkpoint(s);
		pthread_mutex_lock(&s->wd_lock);
		s->wd_stop = true;
		pthread_cond_broadcast(&s->wd_cond);
		pthread_mutex_unlock(&s->wd_lock);
		pthread_join(s->wd_thread, NULL);
	}
	if (s->io)
		io_close(s->io);
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		if (sh->buckets) {
			for (uint32_t b = 0; b <= sh->mask; b++) {
				struct ssd_entry *e = sh->buckets[b], *n;
				for (; e; e = n) {
					n = e->hnext;
					kvt_mem_free(s->mem, e, sizeof(*e));
				}
			}
			kvt_mem_free(s->mem, sh->buckets, ((size_t)sh->mask + 1) * sizeof(*sh->buckets));
		}
		pthread_mutex_destroy(&sh->lock);
	}
	if (s->segs) {
		for (uint32_t i = 0; i < s->slot_count; i++) {
			if (s->segs[i].fd >= 0)
				close(s->segs[i].fd);
			seg_sum_free(s, &s->segs[i]);
		}
		kvt_mem_free(s->mem, s->segs, s->slot_count * sizeof(*s->segs));
	}
	kvt_mem_free(s->mem, s->clear_seq, s->clear_cap * sizeof(uint64_t));
	kvt_mem_free(s->mem, s->persistent, s->persistent_cap);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	pthread_mutex_destroy(&s->seg_lock);
	pthread_mutex_destroy(&s->ns_lock);
	pthread_mutex_destroy(&s->wd_lock);
	pthread_cond_destroy(&s->wd_cond);
	kvt_mem_free(s->mem, s, sizeof(*s));
}

struct kvt_io *ssd_io(struct ssd *s)
{
	return s->io;
}

/* ------------------------------------------------------------------------
 * Statistics
 */

void ssd_stats(struct ssd *s, kvt_stats_fn fn, void *ctx)
{
	uint64_t blocks = 0, bytes = 0, used_slots = 0, bad = 0, wd_bytes, inflight;
	double bps;
	bool measured, degraded;

	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		blocks += s->shards[i].count;
		bytes += s->shards[i].bytes;
		pthread_mutex_unlock(&s->shards[i].lock);
	}
	pthread_mutex_lock(&s->seg_lock);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		used_slots += s->segs[i].state == SEG_OPEN || s->segs[i].state == SEG_SEALED;
		bad += s->segs[i].state == SEG_BAD;
	}
	pthread_mutex_unlock(&s->seg_lock);
	pthread_mutex_lock(&s->wd_lock);
	wd_bytes = s->wd_bytes;
	inflight = s->wd_inflight;
	bps = s->read_bps;
	measured = s->read_measured;
	degraded = s->degraded;
	pthread_mutex_unlock(&s->wd_lock);

	fn(ctx, "ssd.capacity_bytes", (uint64_t)s->slot_count * s->cfg.seg_size, NULL);
	fn(ctx, "ssd.segment_bytes", s->cfg.seg_size, NULL);
	fn(ctx, "ssd.segments", s->slot_count, NULL);
	fn(ctx, "ssd.segments_used", used_slots, NULL);
	fn(ctx, "ssd.segments_quarantined", bad, NULL);
	fn(ctx, "ssd.blocks", blocks, NULL);
	fn(ctx, "ssd.value_bytes", bytes, NULL);
	fn(ctx, "ssd.degraded", degraded, NULL);
	fn(ctx, "ssd.admission", 0, s->cfg.admission == SSD_ADMIT_ALWAYS ? "write-through"
										: "second-access");
	fn(ctx, "ssd.writedown_queued", AL(s->wd_queued), NULL);
	fn(ctx, "ssd.writedown_blocks", AL(s->wd_written), NULL);
	fn(ctx, "ssd.writedown_bytes", AL(s->wd_written_bytes), NULL);
	fn(ctx, "ssd.writedown_shed", AL(s->wd_shed), NULL);
	fn(ctx, "ssd.writedown_skipped", AL(s->wd_skipped), NULL);
	fn(ctx, "ssd.writedown_errors", AL(s->wd_errors), NULL);
	fn(ctx, "ssd.writedown_pending_bytes", wd_bytes, NULL);
	fn(ctx, "ssd.writes_inflight", inflight, NULL);
	fn(ctx, "ssd.tombstones", AL(s->tombstones), NULL);
	fn(ctx, "ssd.reads", AL(s->reads), NULL);
	fn(ctx, "ssd.read_bytes", AL(s->read_bytes), NULL);
	fn(ctx, "ssd.read_misses", AL(s->read_misses), NULL);
	fn(ctx, "ssd.promote_full", AL(s->promote_full), NULL);
	fn(ctx, "ssd.read_bps", (uint64_t)bps, NULL);
	fn(ctx, "ssd.read_bps_measured", measured, NULL);
	fn(ctx, "ssd.crc_errors", AL(s->crc_errors), NULL);
	fn(ctx, "ssd.header_errors", AL(s->hdr_errors), NULL);
	fn(ctx, "ssd.io_errors", AL(s->io_errors), NULL);
	fn(ctx, "ssd.enospc", AL(s->enospc), NULL);
	fn(ctx, "ssd.segments_sealed", AL(s->seg_sealed), NULL);
	fn(ctx, "ssd.segments_evicted", AL(s->seg_evicted), NULL);
	fn(ctx, "ssd.evicted_blocks", AL(s->evicted_blocks), NULL);
	fn(ctx, "ssd.reinserted_blocks", AL(s->reinserted), NULL);
	fn(ctx, "ssd.checkpoints", AL(s->ckpts), NULL);
	fn(ctx, "ssd.recovery_ns", s->rec_ns, NULL);
	fn(ctx, "ssd.recovery_checkpoint_blocks", s->rec_ckpt_entries, NULL);
	fn(ctx, "ssd.recovery_records_scanned", s->rec_records, NULL);
	fn(ctx, "ssd.recovery_segments_scanned", s->rec_segments, NULL);
	fn(ctx, "ssd.recovery_dropped", s->rec_dropped, NULL);
	io_stats(s->io, fn, ctx);
}

/*
 * store_int.h - what the store's files share (store.c: handles, options
 * storage, lifecycle, queues, workers, pins; store_options.c: options;
 * store_tiers.c: the chain of tiers below DRAM; store_dispatch.c: running
 * one request; store_sync.c: the synchronous calls; store_stats.c).  No
 * other module includes it.
 *
 * A request's life (priv_ fields of struct kvt_req, all written only by the
 * library while the request is submitted):
 *
 *   priv_[0]  the queue it was submitted through
 *   priv_[1]  next in the work list, or in the queue's done list; while it
 *             runs, where it is in the chain (store_dispatch.c)
 *   priv_[2]  prev in the work list; while it runs, what the tiers so far
 *             answered (store_dispatch.c)
 *   priv_[3]  state: REQ_IDLE -> REQ_QUEUED (deferred) -> REQ_RUNNING ->
 *             REQ_DONE (on the done list) -> REQ_IDLE (handed back by poll);
 *             inline requests go REQ_IDLE -> REQ_RUNNING -> REQ_DONE
 *   priv_seq_ submission sequence number (flush barrier)
 *
 * Locks (doc/threads.md): store->work_lock guards the work list, the running
 * list, the pause flag and the stop flag; each queue's lock guards its done
 * list; each pin shard's lock guards its slots; the dram tier has its own
 * shard locks.  Order: work_lock -> queue lock (completing a canceled request
 * under work_lock); no other lock is held while taking another.
 */
#ifndef KVT_STORE_INT_H
#define KVT_STORE_INT_H

#include <pthread.h>
#include <unistd.h>

#include "dram.h"
#include "kvt_int.h"
#include "kvevents.h"
#include "nsstat.h"
#include "remote.h"
#include "seal.h"
#include "shared.h"
#include "ssd.h"
#include "tier.h"

#define STORE_TIERS_MAX 8
#define STORE_TIERS_DEFAULT "ssd,remote,shared" /* doc/decisions.md: why this order */

enum { ST_CREATED = 0, ST_OPEN = 1, ST_CLOSED = 2 };
enum { REQ_IDLE = 0, REQ_QUEUED, REQ_RUNNING, REQ_DONE, REQ_CHECKING };

#define STORE_PENDING TIER_PENDING /* store_exec: the request completes later */
#define PIN_SHARDS 16
#define PIN_IDX_BITS 24
#define MAX_WORKERS 64

struct pin_slot {
	struct dram_item *item; /* NULL (and copy NULL): free */
	struct ssd_copy *copy;  /* SLOT_COPY: a quiet get's private copy (item NULL) */
	struct iovec *view;     /* view_count elements, from kvt_mem */
	uint32_t view_count;
	uint32_t gen;           /* bumped on every release */
	uint32_t next_free;     /* free list link, index + 1 (0: end) */
	uint8_t kind;           /* SLOT_PIN, or SLOT_RESV: a kvt_put_reserve not yet committed */
	uint8_t pflags;         /* SLOT_RESV: dram_publish flags (SEALED, RETAIN, REPAIR) */
};

enum { SLOT_PIN = 0, SLOT_RESV = 1, SLOT_COPY = 2 };

static inline bool slot_used(const struct pin_slot *sl)
{
	return sl->item || sl->copy;
}

struct pin_shard {
	pthread_mutex_t lock;
	struct pin_slot *slots; /* guarded by lock; may move on growth */
	uint32_t cap, used;
	uint32_t free_head;     /* index + 1 of the first free slot, 0: none */
	uint64_t active;
	uint64_t peak;          /* the most active at once since open */
} __attribute__((aligned(64)));

/* One tier below DRAM: its table, what its open got, its handle. */
struct store_tier {
	const struct tier_ops *ops;
	void *arg;
	void *t;                    /* NULL until open */
};

struct kvt_queue {
	struct kvt_store *store;
	pthread_mutex_t lock;       /* guards done_head/done_tail */
	struct kvt_req *done_head, *done_tail;
	_Atomic int inflight;       /* submitted, not yet handed back by poll */
	bool signaled;              /* efd was written since poll last read it; lock */
	int efd;                    /* eventfd, readable when done may be non-empty;
				     * -1 for a synchronous helper's private queue,
				     * which signals `cond` instead */
	pthread_cond_t cond;
	struct kvt_queue *next, *prev; /* store's queue list, under store->queues_lock */
	bool quiet_inline;          /* KVT_QUEUE_POLL_AFTER_SUBMIT: owner's only */
};

struct kvt_store {
	int state;                  /* ST_*, changed only by open/close */
	pid_t pid;                  /* opener */
	/* One page mapped MADV_WIPEONFORK holding 1: it reads 0 in a child
	 * after fork, so every call detects fork with a load, not a getpid()
	 * system call (160+ ns here).  NULL where the kernel lacks it (then
	 * getpid() it is). */
	volatile uint64_t *fork_page;
	struct kvt_mem mem;
	struct kvt_logger log;

	/* options */
	char *path;
	struct dram_config dram_cfg;
	struct ssd_config ssd_cfg;
	struct remote_config remote_cfg;
	struct shared_config shared_cfg;
	struct kvevents_config events_cfg;
	unsigned worker_count;

	/* directory */
	int dir_fd, lock_fd;
	struct ns_registry ns;
	bool ns_ready;
	struct quota quota;         /* quota groups (quota.c); initialized at open */
	struct seal *seal;          /* sealed namespaces' keys (seal.c); from open */
	struct nsstat nsstat;       /* per-namespace counters (nsstat.c); from open */
	unsigned nsstat_rows;       /* option stats.namespaces */

	/* tiers */
	struct dram *dram;
	/* Below DRAM: the chain (tier.h), in walk order once open; during
	 * open, in open order.  Set by open and close only. */
	struct store_tier tiers[STORE_TIERS_MAX];
	unsigned tier_count;
	unsigned tier_flags;        /* OR of the chain's ops->flags */
	bool tier_find;             /* a tier has a synchronous index (find) */
	bool tier_through;          /* a tier writes puts through (put_through) */
	bool tier_down;             /* a tier takes write-downs (put_down) */
	bool tier_over;             /* a tier drops what a put replaces (put_over) */
	bool tier_prepare;          /* a tier prepares deletes and clears */
	/* Tests: called by store_put_absent, just before DRAM's put-if-absent
	 * (NULL: none; set before the puts it should see).  test_ssd_fsck
	 * wd_reput_race finishes a write-down of the key there, and
	 * put_reput_race puts the key with other bytes and pushes it down:
	 * both between the put's earlier asks and DRAM's put-if-absent until
	 * 2026-12-07, when these became one step under DRAM's lock. */
	void (*debug_put_hook)(struct kvt_store *s, void *ctx);
	void *debug_put_ctx;
	/* Tiers added by store_tier_register, opened after the built-in ones. */
	struct store_tier extra[STORE_TIERS_MAX];
	unsigned extra_count;
	char *tiers_opt;            /* option store.tiers; NULL: STORE_TIERS_DEFAULT */
	struct kvevents *events;    /* kvevents.c; NULL without option events.endpoint */
	double dram_bps;            /* memcpy rate measured at open, for load estimates */
	/* remote.put_local=auto (store_dispatch.c store_put_admit): the put
	 * ghost (one entry per slot: a fingerprint of the key and the put
	 * clock when it was put, NULL unless auto), the put clock (bytes
	 * put), puts seen and reads of recent puts (both decayed), whether
	 * puts skip DRAM now, how many did, and the reads counted. */
	struct {
		_Atomic uint64_t *ghost;
		_Atomic uint64_t clock, puts, window, reused, prev_puts, prev_reads, skips,
			reuse_total;
		_Atomic bool skip;
	} put_auto;
	_Atomic uint64_t lookup_rounds; /* lookups' walks back to the local tiers */

	/* deferred work */
	pthread_mutex_t work_lock;
	pthread_cond_t work_cond;   /* work arrived, unpaused, stop, or a request finished */
	struct kvt_req *work_head, *work_tail;
	uint64_t running_seq[MAX_WORKERS]; /* seq of what each worker runs, 0: idle */
	bool paused, stop;
	pthread_t workers[MAX_WORKERS];
	unsigned workers_started;
	_Atomic uint64_t seq;

	pthread_mutex_t queues_lock;
	struct kvt_queue *queues;

	struct pin_shard pins[PIN_SHARDS];

	/* DRAM regions registered with a device (kvt_store_register_regions):
	 * set by one thread while open, cleared at close; the stats read
	 * region_bytes atomically and region_hook.name only when it is set. */
	struct kvt_region_hook region_hook;
	unsigned region_count;             /* regions attached */
	_Atomic uint64_t region_bytes;     /* bytes attached; 0: not registered */

	/* counters */
	_Atomic uint64_t submitted, completed, canceled, deferred;
};

/* True in a child process of the one that opened the store. */
static inline bool store_forked(const struct kvt_store *s)
{
	if (s->fork_page)
		return *s->fork_page != 1;
	return getpid() != s->pid;
}

/* Common entry check for calls on an open store. */
static inline int store_check(struct kvt_store *s)
{
	if (KVT_UNLIKELY(s->state != ST_OPEN))
		return KVT_ECLOSED;
	if (KVT_UNLIKELY(store_forked(s)))
		return KVT_EFORK;
	return 0;
}

/* KVT_F_RETAIN if namespace ns was registered KVT_NS_RETAIN (its puts
 * carry the hint), else 0. */
static inline uint32_t store_ns_retain(struct kvt_store *s, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(&s->ns, ns);
	return e && atomic_load_explicit(&e->retain, memory_order_relaxed) ? KVT_F_RETAIN : 0;
}

/* A put's retain hint: its own flag or its namespace's default.  The
 * request is the caller's, so the default is never written into it. */
static inline uint32_t store_req_retain(struct kvt_store *s, const struct kvt_req *r)
{
	return (r->flags & KVT_F_RETAIN) | store_ns_retain(s, r->ns);
}

static inline struct kvt_queue *req_queue(struct kvt_req *r)
{
	return r->priv_[0];
}

static inline uintptr_t req_state(const struct kvt_req *r)
{
	return (uintptr_t)r->priv_[3];
}

static inline void req_set_state(struct kvt_req *r, uintptr_t st)
{
	r->priv_[3] = (void *)st;
}

/* store_pins.c */
/* Hand a finished request to its queue.  Any thread.  bell false: no
 * eventfd write for it (KVT_QUEUE_POLL_AFTER_SUBMIT's inline completions). */
void req_complete_bell(struct kvt_store *s, struct kvt_req *r, int status, bool bell);
static inline void req_complete(struct kvt_store *s, struct kvt_req *r, int status)
{
	req_complete_bell(s, r, status, true);
}
int slot_add(struct kvt_store *s, uintptr_t hint, struct dram_item *item, struct ssd_copy *copy,
	     const struct iovec *view, unsigned view_count, int kind, unsigned pflags,
	     uint64_t *handle, struct iovec **vcopy);
int pin_add(struct kvt_store *s, struct kvt_req *r, struct dram_item *item,
	    const struct iovec *view, unsigned view_count);
/* Take a slot out of the table (store_pins.c says how); drop one. */
int slot_take(struct kvt_store *s, uint64_t handle, int kind, struct dram_item **item,
		     struct ssd_copy **copy, unsigned *pflags);
int slot_drop(struct kvt_store *s, uint64_t handle, int kind);
/* Release every pin and reservation (close). */
void pins_drop_all(struct kvt_store *s);

/* store.c */
int key_check(const struct kvt_key *k);
int req_check(struct kvt_store *s, const struct kvt_req *r);

/* store_options.c: defaults (create) and the option setter's storage. */
void store_options_init(struct kvt_store *s);
void store_options_free(struct kvt_store *s);

/* store_tiers.c: open the configured tiers and order the chain; stop them
 * (before DRAM closes) and free them (after).  child: a forked child,
 * which only forgets them. */
int store_tiers_open(struct kvt_store *s);
void store_tiers_stop(struct kvt_store *s, bool child);
void store_tiers_free(struct kvt_store *s, bool child);

/* store_dispatch.c */
/* Run r: a status, or STORE_PENDING (it completes through req_complete). */
int store_exec(struct kvt_store *s, struct kvt_req *r);
/* The deletes and clears already run are durable (their tombstones
 * synced): 0 or an error.  kvt_delete, kvt_clear, KVT_F_DELETES. */
int store_deletes_durable(struct kvt_store *s);
/* remote.put_local=auto's put ghost (store_dispatch.c): after the tiers
 * opened; freed at close. */
int store_put_ghost_open(struct kvt_store *s);
void store_put_ghost_close(struct kvt_store *s);
/* A block entered the store (a put or a committed reservation): KV events. */
void store_event_stored(struct kvt_store *s, const struct kvt_req *r, uint32_t ns,
			const struct kvt_key *key);
/* A client's put (a put, a sealed put, a reservation), just before its
 * bytes go to DRAM's put-if-absent: KVT_EXISTS if a tier with find and
 * no put_over holds the key, else KVT_OK.  DRAM's put-if-absent asks the
 * tiers' put_over under its lock (store_put_absent_hook, set by
 * store_tiers_open; store_dispatch.c). */
int store_put_absent(struct kvt_store *s, uint32_t ns, const struct kvt_key *key);
void store_put_absent_hook(struct kvt_store *s);
/* The DRAM evict hook when no tier keeps evicted blocks (KV events). */
void store_evicted_event(void *ctx, const struct dram_victim *v);

#endif /* KVT_STORE_INT_H */

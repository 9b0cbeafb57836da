/*
 * store.c - the store handle: options, lifecycle, the store directory and
 * its lock, queues, workers, pins, and the dispatch of requests to tiers.
 *
 * Owns everything hanging off struct kvt_store.  No global state: two
 * stores in one process share nothing.
 *
 * A request's life (priv_ fields of struct kvt_req, all written only by the
 * library while the request is submitted):
 *
 *   priv_[0]  the queue it was submitted through
 *   priv_[1]  next in the work list, or in the queue's done list
 *   priv_[2]  prev in the work list
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
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kvt_int.h"
#include "cluster.h"
#include "kvevents.h"
#include "seal.h"
#include "shared.h"
#include "ssd.h"

enum { ST_CREATED = 0, ST_OPEN = 1, ST_CLOSED = 2 };
enum { REQ_IDLE = 0, REQ_QUEUED, REQ_RUNNING, REQ_DONE, REQ_CHECKING };

#define STORE_PENDING 1000 /* store_exec: the request completes later */
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
	uint8_t sealed;         /* SLOT_RESV: publish as KVT_F_SEALED */
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
} __attribute__((aligned(64)));

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

	/* tiers */
	struct dram *dram;
	struct ssd *ssd;
	struct cluster *remote;       /* the remote tier: one kvtierd or several */
	struct shared *shared;      /* G4: shared.c; NULL without option shared.dir */
	struct kvevents *events;    /* kvevents.c; NULL without option events.endpoint */
	double dram_bps;            /* memcpy rate measured at open, for load estimates */

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

/* ------------------------------------------------------------------------
 * Logging
 */

void kvt_logf(const struct kvt_logger *lg, int level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	if (!lg || !lg->fn || level > lg->min_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lg->fn(lg->ctx, level, buf);
}

/* True in a child process of the one that opened the store. */
static inline bool store_forked(const struct kvt_store *s)
{
	if (s->fork_page)
		return *s->fork_page != 1;
	return getpid() != s->pid;
}

/* ------------------------------------------------------------------------
 * Options
 */

static int parse_size(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;
	int shift = 0;
	int saved_errno = errno, overflow;
	if (!*v || *v == '-')
		return KVT_EOPTVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	overflow = errno;
	errno = saved_errno; /* the caller's errno is never changed */
	if (overflow || end == v)
		return KVT_EOPTVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
	if (*end || (shift && n > (UINT64_MAX >> shift)))
		return KVT_EOPTVAL;
	*out = (uint64_t)n << shift;
	return 0;
}

int kvt_store_create(struct kvt_store **out)
{
	struct kvt_store *s;
	if (!out)
		return KVT_ENULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	kvt_mem_init(&s->mem);
	s->dir_fd = s->lock_fd = -1;
	s->dram_cfg.capacity = UINT64_C(256) << 20;
	s->dram_cfg.chunk = 64 << 10;
	s->dram_cfg.policy = DRAM_POLICY_PREFIX; /* doc/policies.md */
	s->dram_cfg.victim_wait_ms = 20;
	s->dram_cfg.hugepages = DRAM_HUGE_AUTO;
	s->dram_cfg.prefault = true;
	s->ssd_cfg.capacity = 0;
	s->ssd_cfg.seg_size = UINT64_C(256) << 20;
	s->ssd_cfg.backend = IO_BACKEND_AUTO;
	s->ssd_cfg.admission = SSD_ADMIT_VICTIM; /* doc/policies.md */
	s->ssd_cfg.wd_max_bytes = UINT64_C(256) << 20;
	s->ssd_cfg.ckpt_seals = 8;
	s->ssd_cfg.high_pct = 95;
	s->ssd_cfg.low_pct = 90;
	s->ssd_cfg.reinsert_pct = 10;
	s->ssd_cfg.close_wd_ms = 10000; /* warm restarts (doc/policies.md) */
	s->ssd_cfg.io_depth = 64;
	s->ssd_cfg.retry_ns = UINT64_C(5000) * 1000000;
	s->remote_cfg.conns = REMOTE_DEF_CONNS;
	s->remote_cfg.timeout_ms = REMOTE_DEF_TIMEOUT_MS;
	s->remote_cfg.connect_timeout_ms = REMOTE_DEF_CONNECT_TIMEOUT_MS;
	s->remote_cfg.backoff_ms = REMOTE_DEF_BACKOFF_MS;
	s->remote_cfg.backoff_max_ms = REMOTE_DEF_BACKOFF_MAX_MS;
	s->remote_cfg.batch = REMOTE_DEF_BATCH;
	s->remote_cfg.group_blocks = REMOTE_DEF_GROUP_BLOCKS;
	s->remote_cfg.hot_replicas = REMOTE_DEF_HOT_REPLICAS;
	s->remote_cfg.anchor_slots = REMOTE_DEF_ANCHOR_SLOTS;
	s->remote_cfg.refresh_ms = REMOTE_DEF_REFRESH_MS;
	s->shared_cfg.threads = SHARED_DEF_THREADS;
	s->shared_cfg.wd_max_bytes = SHARED_DEF_WD_MAX;
	s->shared_cfg.direct = true;
	s->events_cfg.batch_ms = KVEVENTS_DEF_BATCH_MS;
	s->events_cfg.queue_max = KVEVENTS_DEF_QUEUE_MAX;
	s->worker_count = 1;
	s->log.min_level = KVT_LOG_INFO;
	pthread_mutex_init(&s->work_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_mutex_init(&s->queues_lock, NULL);
	for (int i = 0; i < PIN_SHARDS; i++)
		pthread_mutex_init(&s->pins[i].lock, NULL);
	*out = s;
	return 0;
}

/* A size (K/M/G/T suffixes) within [min, max]. */
static int opt_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t n;
	int ret = parse_size(v, &n);
	if (ret < 0)
		return ret;
	if (n < min || n > max)
		return KVT_EOPTVAL;
	*out = n;
	return 0;
}

static int opt_u32(const char *v, uint32_t min, uint32_t max, unsigned *out)
{
	uint64_t n;
	int ret = opt_u64(v, min, max, &n);
	if (ret == 0)
		*out = (unsigned)n;
	return ret;
}

/* One of names[] (NULL-terminated): *out gets the matching vals[]. */
static int opt_choice(const char *v, const char *const *names, const int *vals, int *out)
{
	for (unsigned i = 0; names[i]; i++) {
		if (strcmp(v, names[i]) == 0) {
			*out = vals[i];
			return 0;
		}
	}
	return KVT_EOPTVAL;
}

/* A string option: non-empty, under 4096 bytes; replaces *out. */
static int opt_str(const char *v, char **out)
{
	char *p;
	if (!*v || strlen(v) >= 4096)
		return KVT_EOPTVAL;
	p = strdup(v);
	if (!p)
		return -ENOMEM;
	free(*out);
	*out = p;
	return 0;
}

/* remote.* options (doc/remote.md). */
static int opt_remote(struct remote_config *rc, const char *name, const char *v)
{
	if (strcmp(name, "addr") == 0)
		return opt_str(v, &rc->addr);
	if (strcmp(name, "addrs") == 0)
		return opt_str(v, &rc->addrs);
	if (strcmp(name, "discover") == 0)
		return opt_str(v, &rc->discover);
	if (strcmp(name, "group") == 0)
		return opt_u32(v, 1, KVT_BATCH_MAX, &rc->group_blocks);
	if (strcmp(name, "hot_replicas") == 0)
		return opt_u32(v, 1, REMOTE_HOT_REPLICAS_MAX, &rc->hot_replicas);
	if (strcmp(name, "anchor_slots") == 0)
		return opt_u32(v, 0, 1u << 26, &rc->anchor_slots);
	if (strcmp(name, "refresh_ms") == 0)
		return opt_u32(v, 0, 3600000, &rc->refresh_ms);
	if (strcmp(name, "tenant") == 0)
		return strlen(v) > 64 ? KVT_EOPTVAL : opt_str(v, &rc->tenant);
	if (strcmp(name, "secret_file") == 0)
		return opt_str(v, &rc->secret_file);
	if (strcmp(name, "conns") == 0)
		return opt_u32(v, 1, 64, &rc->conns);
	if (strcmp(name, "timeout_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->timeout_ms);
	if (strcmp(name, "connect_timeout_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->connect_timeout_ms);
	if (strcmp(name, "backoff_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->backoff_ms);
	if (strcmp(name, "backoff_max_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->backoff_max_ms);
	if (strcmp(name, "batch") == 0)
		return opt_u32(v, 1, KVT_BATCH_MAX, &rc->batch);
	if (strcmp(name, "tls") == 0) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return KVT_EOPTVAL;
		rc->tls = v[1] == 'n';
		return 0;
	}
	if (strcmp(name, "tls_ca") == 0)
		return opt_str(v, &rc->tls_ca);
	if (strcmp(name, "tls_cert") == 0)
		return opt_str(v, &rc->tls_cert);
	if (strcmp(name, "tls_key") == 0)
		return opt_str(v, &rc->tls_key);
	if (strcmp(name, "tls_server_name") == 0)
		return opt_str(v, &rc->tls_server_name);
	return KVT_EOPTION;
}

/* events.* options (doc/kvevents.md). */
static int opt_events(struct kvevents_config *ec, const char *name, const char *v)
{
	if (strcmp(name, "endpoint") == 0)
		return opt_str(v, &ec->endpoint);
	if (strcmp(name, "topic") == 0)
		return strlen(v) > 255 ? KVT_EOPTVAL : opt_str(v, &ec->topic);
	if (strcmp(name, "medium") == 0)
		return strlen(v) > 64 ? KVT_EOPTVAL : opt_str(v, &ec->medium);
	if (strcmp(name, "format") == 0) {
		static const char *const formats[] = { "map", "array", NULL };
		static const int format_vals[] = { KVEVENTS_MAP, KVEVENTS_ARRAY };
		return opt_choice(v, formats, format_vals, &ec->format);
	}
	if (strcmp(name, "batch_ms") == 0)
		return opt_u32(v, 0, 10000, &ec->batch_ms);
	if (strcmp(name, "queue_max") == 0)
		return opt_u32(v, 1, 1u << 24, &ec->queue_max);
	return KVT_EOPTION;
}

/* shared.* options (doc/shared.md). */
static int opt_shared(struct shared_config *sc, const char *name, const char *v)
{
	static const char *const admits[] = { "persistent", "always", NULL };
	static const int admit_vals[] = { SHARED_ADMIT_PERSISTENT, SHARED_ADMIT_ALWAYS };
	static const char *const onoff[] = { "off", "auto", NULL };
	static const int onoff_vals[] = { 0, 1 };
	int ret, b;

	if (strcmp(name, "dir") == 0)
		return opt_str(v, &sc->dir);
	if (strcmp(name, "s3_endpoint") == 0) {
		if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
			return KVT_EOPTVAL;
		return opt_str(v, &sc->s3_endpoint);
	}
	if (strcmp(name, "s3_bucket") == 0)
		return opt_str(v, &sc->s3_bucket);
	if (strcmp(name, "s3_region") == 0)
		return opt_str(v, &sc->s3_region);
	if (strcmp(name, "s3_credentials") == 0)
		return opt_str(v, &sc->s3_credentials);
	if (strcmp(name, "s3_conns") == 0)
		return opt_u32(v, 1, 64, &sc->s3_conns);
	if (strcmp(name, "s3_timeout_ms") == 0)
		return opt_u32(v, 1, 3600 * 1000, &sc->s3_timeout_ms);
	if (strcmp(name, "s3_part_size") == 0) {
		uint64_t n;
		if (parse_size(v, &n) < 0 || n < (UINT64_C(5) << 20) || n > (UINT64_C(5) << 30))
			return KVT_EOPTVAL;
		sc->s3_part_size = n;
		return 0;
	}
	if (strcmp(name, "s3_sign_payload") == 0) {
		static const char *const offon[] = { "off", "on", NULL };
		if ((ret = opt_choice(v, offon, onoff_vals, &b)) == 0)
			sc->s3_sign_payload = b != 0;
		return ret;
	}
	if (strcmp(name, "budget") == 0)
		return parse_size(v, &sc->budget) < 0 ? KVT_EOPTVAL : 0;
	if (strcmp(name, "max_age") == 0)
		return opt_u64(v, 0, UINT64_C(1) << 40, &sc->max_age_s);
	if (strcmp(name, "threads") == 0)
		return opt_u32(v, 1, 64, &sc->threads);
	if (strcmp(name, "writedown_max") == 0)
		return parse_size(v, &sc->wd_max_bytes) < 0 ? KVT_EOPTVAL : 0;
	if (strcmp(name, "admission") == 0)
		return opt_choice(v, admits, admit_vals, &sc->admission);
	if (strcmp(name, "o_direct") == 0) {
		if ((ret = opt_choice(v, onoff, onoff_vals, &b)) == 0)
			sc->direct = b != 0;
		return ret;
	}
	return KVT_EOPTION;
}

int kvt_store_set_option(struct kvt_store *s, const char *name, const char *value)
{
	uint64_t n;
	int ret;

	if (!s || !name || !value)
		return KVT_ENULL;
	if (strcmp(name, "debug.pause_workers") == 0) {
		if (strcmp(value, "0") && strcmp(value, "1"))
			return KVT_EOPTVAL;
		pthread_mutex_lock(&s->work_lock);
		s->paused = value[0] == '1';
		pthread_cond_broadcast(&s->work_cond);
		pthread_mutex_unlock(&s->work_lock);
		return 0;
	}
	if (strcmp(name, "debug.fail_alloc") == 0) {
		if ((ret = parse_size(value, &n)) < 0)
			return ret;
		kvt_mem_fail_nth(&s->mem, (int64_t)n);
		return 0;
	}
	if (s->state != ST_CREATED)
		return KVT_ESTATE;

	if (strcmp(name, "path") == 0)
		return opt_str(value, &s->path);
	if (strncmp(name, "remote.", 7) == 0)
		return opt_remote(&s->remote_cfg, name + 7, value);
	if (strncmp(name, "shared.", 7) == 0)
		return opt_shared(&s->shared_cfg, name + 7, value);
	if (strncmp(name, "events.", 7) == 0)
		return opt_events(&s->events_cfg, name + 7, value);
	{
		static const char *const policies[] = { "s3fifo", "lru", "prefix", "prefix-learn", NULL };
		static const int policy_vals[] = { DRAM_POLICY_S3FIFO, DRAM_POLICY_LRU,
						   DRAM_POLICY_PREFIX, DRAM_POLICY_PREFIX_LEARN };
		static const char *const huges[] = { "auto", "thp", "off", NULL };
		static const int huge_vals[] = { DRAM_HUGE_AUTO, DRAM_HUGE_THP, DRAM_HUGE_OFF };
		static const char *const onoff[] = { "off", "on", NULL };
		static const int onoff_vals[] = { 0, 1 };
		static const char *const ios[] = { "auto", "uring", "psync", "pread", NULL };
		static const int io_vals[] = { IO_BACKEND_AUTO, IO_BACKEND_URING, IO_BACKEND_PSYNC,
					       IO_BACKEND_PSYNC };
		static const char *const admits[] = { "second", "always", "victim", NULL };
		static const int admit_vals[] = { SSD_ADMIT_SECOND, SSD_ADMIT_ALWAYS,
						  SSD_ADMIT_VICTIM };
		struct dram_config *dc = &s->dram_cfg;
		struct ssd_config *sc = &s->ssd_cfg;
		int c;

		if (strcmp(name, "dram.capacity") == 0)
			return opt_u64(value, 0, UINT64_MAX, &dc->capacity);
		if (strcmp(name, "dram.chunk") == 0) {
			if ((ret = opt_u64(value, 4096, 2u << 20, &n)) < 0)
				return ret;
			if (n & (n - 1))
				return KVT_EOPTVAL;
			dc->chunk = (uint32_t)n;
			return 0;
		}
		if (strcmp(name, "dram.shards") == 0)
			return opt_u32(value, 1, 256, &dc->shards);
		if (strcmp(name, "dram.policy") == 0)
			return opt_choice(value, policies, policy_vals, &dc->policy);
		if (strcmp(name, "dram.victim_wait_ms") == 0)
			return opt_u32(value, 0, 60000, &dc->victim_wait_ms);
		if (strcmp(name, "dram.hugepages") == 0)
			return opt_choice(value, huges, huge_vals, &dc->hugepages);
		if (strcmp(name, "dram.prefault") == 0) {
			if ((ret = opt_choice(value, onoff, onoff_vals, &c)) < 0)
				return ret;
			dc->prefault = c;
			return 0;
		}
		if (strcmp(name, "ssd.capacity") == 0)
			return opt_u64(value, 0, UINT64_MAX, &sc->capacity);
		if (strcmp(name, "ssd.segment") == 0) {
			if ((ret = opt_u64(value, 1u << 20, UINT64_C(16) << 30, &n)) < 0)
				return ret;
			if (n % (1u << 20))
				return KVT_EOPTVAL;
			sc->seg_size = n;
			return 0;
		}
		if (strcmp(name, "ssd.io") == 0)
			return opt_choice(value, ios, io_vals, &sc->backend);
		if (strcmp(name, "ssd.admission") == 0)
			return opt_choice(value, admits, admit_vals, &sc->admission);
		if (strcmp(name, "ssd.writedown_max") == 0)
			return opt_u64(value, 1u << 20, UINT64_MAX, &sc->wd_max_bytes);
		if (strcmp(name, "ssd.checkpoint_seals") == 0)
			return opt_u32(value, 0, 1000000, &sc->ckpt_seals);
		if (strcmp(name, "ssd.high_watermark") == 0)
			return opt_u32(value, 0, 100, &sc->high_pct);
		if (strcmp(name, "ssd.low_watermark") == 0)
			return opt_u32(value, 0, 100, &sc->low_pct);
		if (strcmp(name, "ssd.reinsert_pct") == 0)
			return opt_u32(value, 0, 100, &sc->reinsert_pct);
		if (strcmp(name, "ssd.close_writedown_ms") == 0)
			return opt_u64(value, 0, 3600000, &sc->close_wd_ms);
		if (strcmp(name, "ssd.enospc_retry_ms") == 0) {
			if ((ret = opt_u64(value, 0, 3600000, &n)) < 0)
				return ret;
			sc->retry_ns = n * 1000000;
			return 0;
		}
		if (strcmp(name, "ssd.io_depth") == 0)
			return opt_u32(value, 1, 4096, &sc->io_depth);
		if (strcmp(name, "workers") == 0)
			return opt_u32(value, 1, MAX_WORKERS, &s->worker_count);
	}
	return KVT_EOPTION;
}

int kvt_store_set_log(struct kvt_store *s, kvt_log_fn fn, void *ctx, int min_level)
{
	if (!s)
		return KVT_ENULL;
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	s->log.fn = fn;
	s->log.ctx = ctx;
	s->log.min_level = min_level;
	return 0;
}

/* ------------------------------------------------------------------------
 * Completion
 */

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

/* Hand a finished request to its queue.  Any thread.  bell false: no
 * eventfd write for it (kvt_submit's inline completions on a queue whose
 * owner polls after every submit, KVT_QUEUE_POLL_AFTER_SUBMIT). */
static void req_complete_bell(struct kvt_store *s, struct kvt_req *r, int status, bool bell)
{
	struct kvt_queue *q = req_queue(r);
	bool was_empty;

	r->status = status;
	atomic_fetch_add_explicit(&s->completed, 1, memory_order_relaxed);
	pthread_mutex_lock(&q->lock);
	req_set_state(r, REQ_DONE);
	r->priv_[1] = NULL;
	was_empty = q->done_head == NULL;
	if (q->done_tail)
		q->done_tail->priv_[1] = r;
	else
		q->done_head = r;
	q->done_tail = r;
	if (q->efd < 0) {
		pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	/* One write until poll reads it: the eventfd is a doorbell, not a
	 * count.  Under the lock: once poll can take this request the owner
	 * may destroy the queue and close the eventfd, so nothing here may
	 * touch q after the unlock (a write after it could land in a reused
	 * fd: TSan saw it). */
	if (!bell) {
		/* The owner polls when kvt_submit returns: it takes this one
		 * then (and whatever completes meanwhile, which finds the list
		 * not empty and writes nothing either). */
		pthread_mutex_unlock(&q->lock);
		return;
	}
	if (was_empty && !q->signaled) {
		uint64_t one = 1;
		/* Cannot fail short of a counter overflow, which poll resets. */
		ssize_t w = write(q->efd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
	q->signaled = true;
	pthread_mutex_unlock(&q->lock);
}

static void req_complete(struct kvt_store *s, struct kvt_req *r, int status)
{
	req_complete_bell(s, r, status, true);
}

/* ------------------------------------------------------------------------
 * Pins
 */

/*
 * A slot in the pin table for item (a ref the slot now owns), or for copy
 * (SLOT_COPY: the slot owns it), and a copy of its view; hint picks the
 * shard.  *handle and *vcopy on success.
 */
static int slot_add(struct kvt_store *s, uintptr_t hint, struct dram_item *item,
		    struct ssd_copy *copy, const struct iovec *view, unsigned view_count, int kind,
		    bool sealed, uint64_t *handle, struct iovec **vcopy)
{
	struct pin_shard *ps = &s->pins[(hint >> 6) % PIN_SHARDS];
	unsigned shard = (unsigned)(ps - s->pins);
	struct iovec *v;
	struct pin_slot *slot;
	uint32_t idx;

	v = kvt_mem_alloc(&s->mem, view_count * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, view, view_count * sizeof(*v));
	pthread_mutex_lock(&ps->lock);
	if (!ps->free_head) {
		uint32_t ncap = ps->cap ? ps->cap * 2 : 64;
		struct pin_slot *ns;
		if (ncap > (1u << PIN_IDX_BITS)) {
			pthread_mutex_unlock(&ps->lock);
			kvt_mem_free(&s->mem, v, view_count * sizeof(*v));
			return KVT_EFULL;
		}
		ns = kvt_mem_realloc(&s->mem, ps->slots, ps->cap * sizeof(*ns), ncap * sizeof(*ns));
		if (!ns) {
			pthread_mutex_unlock(&ps->lock);
			kvt_mem_free(&s->mem, v, view_count * sizeof(*v));
			return -ENOMEM;
		}
		memset(ns + ps->cap, 0, (ncap - ps->cap) * sizeof(*ns));
		for (uint32_t i = ncap; i > ps->cap; i--) {
			ns[i - 1].next_free = ps->free_head;
			ns[i - 1].gen = 1;
			ps->free_head = i;
		}
		ps->slots = ns;
		ps->cap = ncap;
	}
	idx = ps->free_head - 1;
	slot = &ps->slots[idx];
	ps->free_head = slot->next_free;
	slot->item = item;
	slot->copy = copy;
	slot->view = v;
	slot->view_count = view_count;
	slot->kind = (uint8_t)kind;
	slot->sealed = sealed;
	ps->active++;
	*handle = ((uint64_t)slot->gen << 32) | ((uint64_t)shard << PIN_IDX_BITS) | idx;
	pthread_mutex_unlock(&ps->lock);
	*vcopy = v;
	return 0;
}

static int pin_add(struct kvt_store *s, struct kvt_req *r, struct dram_item *item,
		   const struct iovec *view, unsigned view_count)
{
	struct iovec *v;
	int ret = slot_add(s, (uintptr_t)r, item, NULL, view, view_count, SLOT_PIN, false, &r->pin,
			   &v);
	if (ret < 0)
		return ret;
	r->view = v;
	r->view_count = view_count;
	return 0;
}

/* Take the slot of handle out of the table (it must be of kind; SLOT_PIN
 * takes SLOT_COPY too): its item (the ref passes to the caller) or copy
 * (*copy, may be NULL: then a SLOT_COPY is not taken) and sealed flag; its
 * view is freed.  0, KVT_EPIN. */
static int slot_take(struct kvt_store *s, uint64_t handle, int kind, struct dram_item **item,
		     struct ssd_copy **copy, bool *sealed)
{
	unsigned shard = (unsigned)((handle >> PIN_IDX_BITS) & 0xff);
	uint32_t idx = (uint32_t)(handle & ((1u << PIN_IDX_BITS) - 1)), gen = (uint32_t)(handle >> 32);
	struct pin_shard *ps;
	struct iovec *v;
	uint32_t vc;

	if (shard >= PIN_SHARDS || gen == 0)
		return KVT_EPIN;
	ps = &s->pins[shard];
	pthread_mutex_lock(&ps->lock);
	if (idx >= ps->cap || ps->slots[idx].gen != gen || !slot_used(&ps->slots[idx]) ||
	    !(ps->slots[idx].kind == kind ||
	      (copy && kind == SLOT_PIN && ps->slots[idx].kind == SLOT_COPY))) {
		pthread_mutex_unlock(&ps->lock);
		return KVT_EPIN;
	}
	*item = ps->slots[idx].item;
	if (copy)
		*copy = ps->slots[idx].copy;
	ps->slots[idx].copy = NULL;
	if (sealed)
		*sealed = ps->slots[idx].sealed;
	v = ps->slots[idx].view;
	vc = ps->slots[idx].view_count;
	ps->slots[idx].item = NULL;
	ps->slots[idx].view = NULL;
	ps->slots[idx].gen = gen + 1 ? gen + 1 : 1;
	ps->slots[idx].next_free = ps->free_head;
	ps->free_head = idx + 1;
	ps->active--;
	pthread_mutex_unlock(&ps->lock);
	kvt_mem_free(&s->mem, v, vc * sizeof(*v));
	return 0;
}

/* Release a pin, or abort a reservation. */
static int slot_drop(struct kvt_store *s, uint64_t handle, int kind)
{
	struct dram_item *item;
	struct ssd_copy *copy = NULL;
	int ret;

	if (!s)
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	ret = slot_take(s, handle, kind, &item, &copy, NULL);
	if (ret < 0)
		return ret;
	if (copy)
		ssd_copy_free(&s->mem, copy);
	else if (kind == SLOT_PIN)
		dram_unpin(s->dram, item);
	else
		dram_abort(s->dram, item);
	return 0;
}

int kvt_pin_release(struct kvt_store *s, uint64_t pin)
{
	return slot_drop(s, pin, SLOT_PIN);
}

int kvt_pin_parts(struct kvt_store *s, uint64_t pin, uint64_t *lens, uint32_t *crcs,
		  unsigned max)
{
	unsigned shard = (unsigned)((pin >> PIN_IDX_BITS) & 0xff);
	uint32_t idx = (uint32_t)(pin & ((1u << PIN_IDX_BITS) - 1)), gen = (uint32_t)(pin >> 32);
	struct pin_shard *ps;
	uint64_t *l = NULL;
	uint32_t *c = NULL;
	struct kvt_key key;
	uint32_t ns;
	int n;

	if (!s)
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	if (shard >= PIN_SHARDS || gen == 0)
		return KVT_EPIN;
	l = kvt_mem_alloc(&s->mem, KVT_PARTS_MAX * (sizeof(*l) + sizeof(*c)));
	if (!l)
		return -ENOMEM;
	c = (uint32_t *)(l + KVT_PARTS_MAX);
	ps = &s->pins[shard];
	/* Under the pin lock, so a racing release cannot free the item (the
	 * pin lock is taken before DRAM locks elsewhere too: pins_drop_all). */
	pthread_mutex_lock(&ps->lock);
	if (idx >= ps->cap || ps->slots[idx].gen != gen || !slot_used(&ps->slots[idx]) ||
	    (ps->slots[idx].kind != SLOT_PIN && ps->slots[idx].kind != SLOT_COPY)) {
		n = KVT_EPIN;
	} else if (ps->slots[idx].copy) {
		const struct ssd_copy *cp = ps->slots[idx].copy;
		n = (int)cp->part_count;
		memcpy(l, cp->lens, cp->part_count * sizeof(*l));
		memcpy(c, cp->crcs, cp->part_count * sizeof(*c));
	} else {
		n = dram_item_meta(s->dram, ps->slots[idx].item, &ns, &key, l, c, KVT_PARTS_MAX);
	}
	pthread_mutex_unlock(&ps->lock);
	for (int i = 0; i < n && (unsigned)i < max; i++) {
		if (lens)
			lens[i] = l[i];
		if (crcs)
			crcs[i] = c[i];
	}
	kvt_mem_free(&s->mem, l, KVT_PARTS_MAX * (sizeof(*l) + sizeof(*c)));
	return n;
}

/* Close: drop every pin still held, saying so. */
/* ------------------------------------------------------------------------
 * Zero-copy puts: reserve, fill, commit
 */

static inline int store_check(struct kvt_store *s);
static void store_event_stored(struct kvt_store *s, const struct kvt_req *r, uint32_t ns,
			       const struct kvt_key *key);
static int key_check(const struct kvt_key *k);

int kvt_put_reserve(struct kvt_store *s, uint32_t ns, const struct kvt_key *key,
		    const uint64_t *part_lens, unsigned part_count, uint32_t flags,
		    struct kvt_reservation *res)
{
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *item;
	struct iovec *v;
	unsigned vc = 0;
	uint64_t len = 0, left;
	int ret;

	if (!s || !key || !part_lens || !res)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (flags & ~(uint32_t)KVT_F_SEALED)
		return KVT_EBADOP;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	if ((ret = key_check(key)) < 0)
		return ret;
	if (part_count == 0 || part_count > KVT_PARTS_MAX)
		return KVT_EBADLEN;
	for (unsigned i = 0; i < part_count; i++) {
		if (part_lens[i] == 0 || part_lens[i] > KVT_VALUE_MAX - len)
			return KVT_EBADLEN;
		len += part_lens[i];
	}
	if (!s->dram)
		return KVT_ETOOBIG;
	/* Nothing to write through from: see kvtier.h. */
	if (s->remote)
		return KVT_ESTATE;
	/* The bytes would go into DRAM unsealed. */
	if (seal_key_of(s->seal, ns))
		return KVT_EBADOP;
	if (s->ssd && ssd_find(s->ssd, ns, key, NULL) == KVT_OK)
		return KVT_EXISTS;
	ret = dram_reserve(s->dram, ns, key, len, part_count > 1 ? part_lens : NULL, part_count,
			   &item, view, &vc);
	if (ret != KVT_OK)
		return ret;
	/* The last run may reach past the value to a 4 KiB boundary: the
	 * caller gets exactly len bytes of room. */
	left = len;
	for (unsigned i = 0; i < vc; i++) {
		if (view[i].iov_len >= left) {
			view[i].iov_len = (size_t)left;
			vc = i + 1;
			break;
		}
		left -= view[i].iov_len;
	}
	ret = slot_add(s, (uintptr_t)res, item, NULL, view, vc, SLOT_RESV,
		       (flags & KVT_F_SEALED) != 0, &res->handle, &v);
	if (ret < 0) {
		dram_abort(s->dram, item);
		return ret;
	}
	res->len = len;
	res->view = v;
	res->view_count = vc;
	return KVT_OK;
}

static int put_commit(struct kvt_store *s, uint64_t handle, const uint32_t *crcs, bool checked)
{
	struct dram_item *item;
	bool sealed;
	int ret;

	if (!s || (checked && !crcs))
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	ret = slot_take(s, handle, SLOT_RESV, &item, NULL, &sealed);
	if (ret < 0)
		return ret;
	if (crcs && !checked && dram_item_verify(s->dram, item, crcs) != KVT_OK) {
		dram_abort(s->dram, item);
		return KVT_ECORRUPT;
	}
	if (s->shared || s->events) {
		/* Written down by policy, as a put is; reported as a put is. */
		uint32_t ns;
		struct kvt_key key;
		dram_item_key(item, &ns, &key);
		ret = dram_publish(s->dram, item, crcs, NULL, sealed ? DRAM_SEALED : 0, false);
		if (ret == KVT_OK && s->shared)
			shared_put(s->shared, ns, &key);
		if (ret == KVT_OK)
			store_event_stored(s, NULL, ns, &key);
		return ret;
	}
	return dram_publish(s->dram, item, crcs, NULL, sealed ? DRAM_SEALED : 0, false);
}

int kvt_put_commit(struct kvt_store *s, uint64_t handle, const uint32_t *crcs)
{
	return put_commit(s, handle, crcs, false);
}

int kvt_put_commit_checked(struct kvt_store *s, uint64_t handle, const uint32_t *crcs)
{
	return put_commit(s, handle, crcs, true);
}

int kvt_put_abort(struct kvt_store *s, uint64_t handle)
{
	return slot_drop(s, handle, SLOT_RESV);
}

static void pins_drop_all(struct kvt_store *s)
{
	uint64_t dropped = 0;
	for (int i = 0; i < PIN_SHARDS; i++) {
		struct pin_shard *ps = &s->pins[i];
		pthread_mutex_lock(&ps->lock);
		for (uint32_t j = 0; j < ps->cap; j++) {
			struct pin_slot *sl = &ps->slots[j];
			if (!slot_used(sl))
				continue;
			if (sl->copy)
				ssd_copy_free(&s->mem, sl->copy);
			else if (sl->kind == SLOT_RESV)
				dram_abort(s->dram, sl->item);
			else
				dram_unpin(s->dram, sl->item);
			kvt_mem_free(&s->mem, sl->view, sl->view_count * sizeof(struct iovec));
			sl->item = NULL;
			sl->copy = NULL;
			dropped++;
		}
		kvt_mem_free(&s->mem, ps->slots, ps->cap * sizeof(struct pin_slot));
		ps->slots = NULL;
		ps->cap = 0;
		ps->free_head = 0;
		ps->active = 0;
		pthread_mutex_unlock(&ps->lock);
	}
	if (dropped)
		kvt_logf(&s->log, KVT_LOG_WARN,
			 "close: %llu pins were still held; their views are now invalid",
			 (unsigned long long)dropped);
}

/* ------------------------------------------------------------------------
 * Running one request
 */

static bool store_flush_ready(struct kvt_store *s, uint64_t seq)
{
	/* Work list is FIFO: everything before `seq` has been taken; wait for
	 * the ones still running. */
	/* Sequence numbers, not request pointers: a finished request belongs
	 * to its owner again and may already be gone. */
	for (unsigned i = 0; i < s->workers_started; i++)
		if (s->running_seq[i] && s->running_seq[i] < seq)
			return false;
	return true;
}

/* Serve a GET or GET_PINNED from DRAM; tier: what to report for a hit. */
static int store_serve_dram(struct kvt_store *s, struct kvt_req *r, int tier)
{
	int ret;
	if (r->op == KVT_OP_GET_PINNED) {
		struct iovec view[DRAM_MAX_RUNS];
		struct dram_item *item;
		unsigned vc = 0;
		uint64_t len = 0;
		ret = dram_pin(s->dram, r->ns, &r->key, &item, view, &vc, &len);
		if (ret != KVT_OK)
			return ret;
		ret = pin_add(s, r, item, view, vc);
		if (ret < 0) {
			dram_unpin(s->dram, item);
			return ret;
		}
		r->length = len;
		r->value_len = len;
		r->value_flags = dram_item_flags(item);
	} else {
		struct dram_read rd = { .flags = r->flags, .part = r->part, .off = r->off,
					.len = r->len, .dst = r->iov, .dst_count = r->iov_count };
		const struct seal_key *sk = seal_key_of(s->seal, r->ns);
		ret = sk ? seal_get(s->seal, sk, s->dram, r->ns, &r->key, &rd)
			 : dram_get(s->dram, r->ns, &r->key, &rd);
		r->length = rd.copied;
		r->value_len = rd.value_len;
		r->value_flags = rd.value_flags;
		if (ret != KVT_OK)
			return ret;
	}
	r->tier = (uint32_t)tier;
	return KVT_OK;
}

/* KV events (events.endpoint): tokens per block of namespace ns, from its
 * canonical text. */
static uint32_t ns_block_tokens(struct kvt_store *s, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(&s->ns, ns);
	const char *p = e ? strstr(e->canon, "block_tokens=") : NULL;
	return p ? (uint32_t)strtoul(p + 13, NULL, 10) : 0;
}

/* A block entered the store (a put or a committed reservation). */
static void store_event_stored(struct kvt_store *s, const struct kvt_req *r, uint32_t ns,
			       const struct kvt_key *key)
{
	const struct kvt_key *parent = NULL;
	if (!s->events)
		return;
	if (r && (r->flags & KVT_F_PROMPT) && r->key_count > 1)
		parent = &r->keys[r->key_count - 2];
	kvevents_stored(s->events, key, parent, ns_block_tokens(s, ns));
}

static void store_evicted_event(void *ctx, struct dram_item *item, uint32_t ns,
				const struct kvt_key *key, const struct iovec *view,
				unsigned view_count, uint64_t len)
{
	struct kvt_store *s = ctx;
	KVT_UNUSED(item);
	KVT_UNUSED(ns);
	KVT_UNUSED(view);
	KVT_UNUSED(view_count);
	KVT_UNUSED(len);
	kvevents_removed(s->events, key);
}

/* Where a single-key request's block sits in its prompt (KVT_F_PROMPT),
 * for the remote tier's placement over several kvtierd; h is the
 * caller's storage. */
static const struct cluster_hint *req_hint(const struct kvt_req *r, struct cluster_hint *h)
{
	if (!(r->flags & KVT_F_PROMPT))
		return NULL;
	h->keys = r->keys;
	h->pos = r->key_count - 1;
	return h;
}

/*
 * A promotion into DRAM finished (I/O or remote thread): serve the waiting
 * get from the item it published (KVT_OK: we hold a ref), or, if it did
 * not publish (another reader or a put got there first), from DRAM.
 */
static void store_promoted_tier(struct kvt_req *r, int status, struct dram_item *item, int tier)
{
	struct kvt_queue *q = req_queue(r);
	struct kvt_store *s = q->store;

	if (status != KVT_OK) {
		status = store_serve_dram(s, r, KVT_TIER_DRAM);
		req_complete(s, r, status == KVT_OK ? KVT_OK : KVT_MISS);
		return;
	}
	r->value_flags = dram_item_flags(item);
	if (r->op == KVT_OP_GET_PINNED) {
		struct iovec view[DRAM_MAX_RUNS];
		uint64_t len;
		unsigned vc = dram_item_view(s->dram, item, view, &len);
		status = pin_add(s, r, item, view, vc);
		if (status == 0) {
			r->length = len;
			r->value_len = len;
			r->tier = (uint32_t)tier;
			item = NULL; /* the pin owns the ref now */
		}
	} else {
		struct dram_read rd = { .flags = r->flags, .part = r->part, .off = r->off,
					.len = r->len, .dst = r->iov, .dst_count = r->iov_count };
		const struct seal_key *sk = seal_key_of(s->seal, r->ns);
		status = sk ? seal_read(s->seal, sk, s->dram, item, &r->key, &rd)
			    : dram_read_item(s->dram, item, &rd);
		if (status == SEAL_FAILED)
			status = KVT_MISS;
		r->length = rd.copied;
		r->value_len = rd.value_len;
		r->value_flags = rd.value_flags;
		if (status == KVT_OK)
			r->tier = (uint32_t)tier;
	}
	if (item)
		dram_unpin(s->dram, item);
	req_complete(s, r, status);
}

static void store_promoted(void *ctx, int status, struct dram_item *item)
{
	store_promoted_tier(ctx, status, item, KVT_TIER_SSD);
}

static void store_remote_got(void *ctx, int status, struct dram_item *item)
{
	store_promoted_tier(ctx, status, item, KVT_TIER_REMOTE);
}

/* The shared tier answered a get (pool thread): a miss there goes on to
 * the remote tier, if any. */
static void store_shared_got(void *ctx, int status, struct dram_item *item)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	struct cluster_hint h;
	if (status != KVT_OK && s->remote &&
	    cluster_get(s->remote, r->ns, &r->key, req_hint(r, &h), store_remote_got, r) == 0)
		return;
	store_promoted_tier(r, status, item, KVT_TIER_SHARED);
}

/* The shared tier answered a part read (pool thread): the part is in the
 * caller's buffers; a miss goes on to the remote tier, as a get does. */
static void store_shared_part_got(void *ctx, int status, uint64_t len, uint64_t value_len,
				  uint32_t flags)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	struct cluster_hint h;
	if (status == KVT_MISS && s->remote &&
	    cluster_get(s->remote, r->ns, &r->key, req_hint(r, &h), store_remote_got, r) == 0)
		return;
	r->length = status == KVT_OK ? len : 0;
	r->value_len = value_len;
	r->value_flags = flags;
	if (status == KVT_OK)
		r->tier = KVT_TIER_SHARED;
	req_complete(s, r, status);
}

/* A get missed DRAM: try the lower tiers.  Returns STORE_PENDING or a status. */
static int store_get_lower(struct kvt_store *s, struct kvt_req *r, int prio)
{
	struct cluster_hint h;
	int ret = KVT_MISS;
	if (s->ssd) {
		ret = ssd_promote(s->ssd, r->ns, &r->key, prio, store_promoted, r);
		if (ret == 0)
			return STORE_PENDING;
		/* It reached DRAM meanwhile (a put, or another reader's promotion
		 * that has finished): serve it from there. */
		if (ret == KVT_EXISTS)
			return store_serve_dram(s, r, KVT_TIER_DRAM) == KVT_OK ? KVT_OK : KVT_MISS;
		/* Still being promoted by another reader, no DRAM room to promote
		 * into (counted as ssd.promote_full), too big for DRAM, out of
		 * memory: the model sees a miss, never an error, for a block it
		 * cannot have now. */
		if (ret != KVT_MISS)
			return KVT_MISS;
	}
	/* One part of a block that is not sealed: only that part's bytes
	 * (S3: ranged GETs), nothing promoted; else the whole block. */
	if (s->shared && r->op == KVT_OP_GET && (r->flags & KVT_F_PART) &&
	    !seal_key_of(s->seal, r->ns) &&
	    shared_get_part(s->shared, r->ns, &r->key, r->part, r->iov, r->iov_count, prio,
			    store_shared_part_got, r) == 0)
		return STORE_PENDING;
	if (s->shared && shared_get(s->shared, r->ns, &r->key, prio, store_shared_got, r) == 0)
		return STORE_PENDING;
	if (s->remote &&
	    cluster_get(s->remote, r->ns, &r->key, req_hint(r, &h), store_remote_got, r) == 0)
		return STORE_PENDING;
	return KVT_MISS; /* a server that is down is a miss (remote.fast_fails) */
}

/*
 * Quiet gets (kvtier.h, KVT_F_QUIET): nothing the store keeps changes.
 * From DRAM: a quiet ref (no hit, read count, recency or admission), pinned
 * as usual.  From SSD: a private, verified copy (ssd_read_copy) held by a
 * SLOT_COPY pin until kvt_pin_release; nothing is promoted.
 */
static void store_copied(void *ctx, int status, struct ssd_copy *copy)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	struct iovec view = { 0 };
	struct iovec *v;

	if (status == KVT_OK) {
		view.iov_base = (void *)copy->value;
		view.iov_len = copy->value_len;
		status = slot_add(s, (uintptr_t)r, NULL, copy, &view, 1, SLOT_COPY, false, &r->pin,
				  &v);
		if (status == 0) {
			r->view = v;
			r->view_count = 1;
			r->length = copy->value_len;
			r->value_len = copy->value_len;
			r->value_flags = copy->value_flags;
			r->tier = KVT_TIER_SSD;
			copy = NULL; /* the pin owns it */
		}
	}
	ssd_copy_free(&s->mem, copy);
	req_complete(s, r, status);
}

static int store_get_quiet(struct kvt_store *s, struct kvt_req *r)
{
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *item;
	uint64_t len = 0;
	unsigned vc;
	int ret;

	if (dram_ref_quiet(s->dram, r->ns, &r->key, &item) == KVT_OK) {
		vc = dram_item_view(s->dram, item, view, &len);
		ret = pin_add(s, r, item, view, vc);
		if (ret < 0) {
			dram_unpin(s->dram, item);
			return ret;
		}
		r->length = len;
		r->value_len = len;
		r->value_flags = dram_item_flags(item);
		r->tier = KVT_TIER_DRAM;
		return KVT_OK;
	}
	if (!s->ssd)
		return KVT_MISS;
	ret = ssd_read_copy(s->ssd, r->ns, &r->key, IO_PRIO_DEMAND, store_copied, r);
	if (ret == 0)
		return STORE_PENDING;
	/* Not on SSD (or out of memory): a miss, as for any get that cannot
	 * be served now. */
	return KVT_MISS;
}

/* What the local tiers did, kept in the request while the remote tier
 * works (priv_[2] is free while a request runs). */
static inline void req_stash(struct kvt_req *r, int64_t v)
{
	r->priv_[2] = (void *)(intptr_t)v;
}

static inline int64_t req_stashed(const struct kvt_req *r)
{
	return (int64_t)(intptr_t)r->priv_[2];
}

/* Remote callbacks (remote thread): merge with what the local tiers did. */
static void store_remote_put_done(void *ctx, const struct remote_result *res)
{
	struct kvt_req *r = ctx;
	int local = (int)req_stashed(r), status = local;
	/* Written through: the local put's result stands; a block that only
	 * the server could take (no DRAM room) is a success too. */
	if (local != KVT_OK && (res->status == KVT_OK || res->status == KVT_EXISTS)) {
		status = res->status;
		if (status == KVT_OK)
			r->tier = KVT_TIER_REMOTE;
	}
	req_complete(req_queue(r)->store, r, status);
}

static void store_remote_exists_done(void *ctx, const struct remote_result *res)
{
	struct kvt_req *r = ctx;
	if (res->status == KVT_OK)
		r->tier = KVT_TIER_REMOTE;
	req_complete(req_queue(r)->store, r, res->status == KVT_OK ? KVT_OK : KVT_MISS);
}

/* Delete and clear: an error of the server is the request's (the block may
 * still be there); otherwise a hit anywhere is a hit. */
static void store_remote_delete_done(void *ctx, const struct remote_result *res)
{
	struct kvt_req *r = ctx;
	int status = req_stashed(r) == KVT_OK || res->status == KVT_OK ? KVT_OK : KVT_MISS;
	if (res->status < 0)
		status = res->status;
	req_complete(req_queue(r)->store, r, status);
}

static void store_remote_clear_done(void *ctx, const struct remote_result *res)
{
	struct kvt_req *r = ctx;
	uint64_t local = (uint64_t)req_stashed(r);
	r->length = res->status == KVT_OK && res->count > local ? res->count : local;
	req_complete(req_queue(r)->store, r, res->status < 0 ? res->status : KVT_OK);
}

static void store_remote_lookup_done(void *ctx, const struct remote_result *res)
{
	struct kvt_req *r = ctx;
	r->length = (uint64_t)req_stashed(r);
	if (res->status == KVT_OK) {
		r->length += res->count;
		r->load_ns += res->load_ns;
	}
	req_complete(req_queue(r)->store, r, KVT_OK);
}

/* Shared-tier callbacks (pool thread); the remote tier, if any, comes next. */
static void store_shared_exists_done(void *ctx, uint64_t count, uint64_t load_ns)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	struct cluster_hint h;
	KVT_UNUSED(load_ns);
	if (count == 1) {
		r->tier = KVT_TIER_SHARED;
		req_complete(s, r, KVT_OK);
		return;
	}
	if (s->remote && cluster_exists(s->remote, r->ns, &r->key, req_hint(r, &h),
					store_remote_exists_done, r) == 0)
		return;
	req_complete(s, r, KVT_MISS);
}

static void store_shared_lookup_done(void *ctx, uint64_t count, uint64_t load_ns)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	uint64_t n = (uint64_t)req_stashed(r) + count;
	r->length = n;
	r->load_ns += load_ns;
	if (s->remote && n < r->key_count) {
		req_stash(r, (int64_t)n);
		if (cluster_lookup(s->remote, r->ns, r->keys, (uint32_t)n, r->key_count, r->tiers,
				   store_remote_lookup_done, r) == 0)
			return;
	}
	req_complete(s, r, KVT_OK);
}

struct prefetch_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t outstanding;
	uint64_t promoted;
};

static void store_prefetched(void *ctx, int status, struct dram_item *item)
{
	struct kvt_store *s = ((void **)ctx)[0];
	struct prefetch_wait *w = ((void **)ctx)[1];
	if (status == KVT_OK)
		dram_unpin(s->dram, item);
	pthread_mutex_lock(&w->lock);
	w->outstanding--;
	w->promoted += status == KVT_OK;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Prefetch on a worker: promote what only lower tiers hold, wait for it. */
static int store_prefetch(struct kvt_store *s, struct kvt_req *r)
{
	struct prefetch_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	void *ctx[2] = { s, &w };
	uint64_t in_dram = 0;
	int status = KVT_OK, ret;

	if (s->remote)
		cluster_note_prompt(s->remote, r->keys, r->key_count);
	for (uint32_t i = 0; i < r->key_count; i++) {
		if (__atomic_load_n(&r->priv_flags_, __ATOMIC_RELAXED)) {
			status = -ECANCELED; /* kvt_cancel while running: stop issuing */
			break;
		}
		if (s->dram && dram_exists(s->dram, r->ns, &r->keys[i]) == KVT_OK) {
			in_dram++;
			continue;
		}
		if (!s->ssd && !s->remote && !s->shared)
			continue;
		pthread_mutex_lock(&w.lock);
		w.outstanding++;
		pthread_mutex_unlock(&w.lock);
		ret = s->ssd ? ssd_promote(s->ssd, r->ns, &r->keys[i], IO_PRIO_PREFETCH,
					  store_prefetched, ctx)
			     : KVT_MISS;
		if (ret == KVT_MISS && s->shared)
			ret = shared_get(s->shared, r->ns, &r->keys[i], IO_PRIO_PREFETCH,
					 store_prefetched, ctx);
		if (ret == KVT_MISS && s->remote) {
			struct cluster_hint h = { .keys = r->keys, .pos = i };
			ret = cluster_get(s->remote, r->ns, &r->keys[i], &h, store_prefetched, ctx);
		}
		if (ret != 0) {
			pthread_mutex_lock(&w.lock);
			w.outstanding--;
			pthread_mutex_unlock(&w.lock);
		}
	}
	pthread_mutex_lock(&w.lock);
	while (w.outstanding > 0)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	r->length = in_dram + w.promoted;
	/* Canceled while the last reads were in flight: still canceled. */
	if (__atomic_load_n(&r->priv_flags_, __ATOMIC_RELAXED))
		status = -ECANCELED;
	return status;
}

/*
 * Sealed puts (seal.c does the crypto).  The write-through sends the
 * ciphertext: straight from the DRAM block when each sealed part lies in
 * one run (the block is held by a ref until the server answered), else
 * sealed again into a buffer (DRAM had no room, or a part straddles runs).
 */
struct store_sealed_wt {
	struct kvt_req *r;
	int local;               /* the local put's status */
	struct dram_item *item;  /* ref held, or NULL */
	uint8_t *buf;            /* kvt_mem, buf_len bytes, or NULL */
	size_t buf_len;
	unsigned part_count;
	struct iovec parts[];    /* the sealed parts sent */
};

static void store_sealed_wt_free(struct kvt_store *s, struct store_sealed_wt *w)
{
	if (w->item)
		dram_unpin(s->dram, w->item);
	kvt_mem_free(&s->mem, w->buf, w->buf_len);
	kvt_mem_free(&s->mem, w, sizeof(*w) + w->part_count * sizeof(struct iovec));
}

static void store_remote_sealed_done(void *ctx, const struct remote_result *res)
{
	struct store_sealed_wt *w = ctx;
	struct kvt_req *r = w->r;
	req_stash(r, w->local);
	store_sealed_wt_free(req_queue(r)->store, w);
	store_remote_put_done(r, res);
}

static int store_put_sealed(struct kvt_store *s, struct kvt_req *r, const struct seal_key *sk)
{
	struct dram_item *item = NULL;
	struct store_sealed_wt *w;
	struct cluster_hint h;
	int ret;

	if (s->ssd && ssd_find(s->ssd, r->ns, &r->key, NULL) == KVT_OK)
		return KVT_EXISTS;
	ret = seal_put(s->seal, sk, s->dram, r->ns, &r->key, r->iov, r->iov_count,
		       (r->flags & KVT_F_CRC) ? r->crcs : NULL, s->remote ? &item : NULL);
	if (ret == KVT_OK) {
		r->tier = KVT_TIER_DRAM;
		store_event_stored(s, r, r->ns, &r->key);
	}
	if (!s->remote || !(ret == KVT_OK || ret == KVT_EFULL || ret == KVT_ETOOBIG))
		return ret;
	w = kvt_mem_calloc(&s->mem, 1, sizeof(*w) + r->iov_count * sizeof(struct iovec));
	if (!w) {
		if (item)
			dram_unpin(s->dram, item);
		return ret;
	}
	w->r = r;
	w->local = ret;
	w->part_count = r->iov_count;
	w->item = item;
	if (!item || seal_item_parts(s->dram, item, w->parts, r->iov_count) < 0) {
		if (item)
			dram_unpin(s->dram, item);
		w->item = NULL;
		if (seal_to_buf(s->seal, sk, &r->key, r->iov, r->iov_count, &w->buf, &w->buf_len,
				w->parts) < 0) {
			store_sealed_wt_free(s, w);
			return ret;
		}
	}
	if (cluster_put(s->remote, r->ns, &r->key, req_hint(r, &h), w->parts, r->iov_count, NULL,
			true, store_remote_sealed_done, w) == 0)
		return STORE_PENDING;
	store_sealed_wt_free(s, w);
	return ret;
}

static int store_exec(struct kvt_store *s, struct kvt_req *r)
{
	struct dram *d = s->dram;
	int ret;

	r->tier = KVT_TIER_NONE;
	r->length = 0;
	switch (r->op) {
	case KVT_OP_PUT:
		if (!d)
			return KVT_ETOOBIG;
		if (KVT_UNLIKELY(seal_key_of(s->seal, r->ns)))
			return store_put_sealed(s, r, seal_key_of(s->seal, r->ns));
		/* Put-if-absent across tiers: a block on SSD is present. */
		if (s->ssd && ssd_find(s->ssd, r->ns, &r->key, NULL) == KVT_OK)
			return KVT_EXISTS;
		ret = dram_put(d, r->ns, &r->key, r->iov, r->iov_count,
			       (r->flags & KVT_F_CRC) ? r->crcs : NULL,
			       (r->flags & KVT_F_SEALED) ? DRAM_SEALED : 0);
		if (ret == KVT_OK)
			r->tier = KVT_TIER_DRAM;
		if (ret == KVT_OK)
			store_event_stored(s, r, r->ns, &r->key);
		if (ret == KVT_OK && s->shared)
			shared_put(s->shared, r->ns, &r->key); /* queued, by policy */
		/* Write-through: other engines must see first-time blocks.  The
		 * value goes from the caller's parts, which stay valid until the
		 * request completes; a present key (EXISTS) was written before. */
		if (s->remote && (ret == KVT_OK || ret == KVT_EFULL || ret == KVT_ETOOBIG)) {
			struct cluster_hint h;
			req_stash(r, ret);
			if (cluster_put(s->remote, r->ns, &r->key, req_hint(r, &h), r->iov,
					r->iov_count, (r->flags & KVT_F_CRC) ? r->crcs : NULL,
					(r->flags & KVT_F_SEALED) != 0, store_remote_put_done, r) == 0)
				return STORE_PENDING;
		}
		return ret;
	case KVT_OP_GET: {
		struct dram_read rd = { .flags = r->flags, .part = r->part, .off = r->off,
					.len = r->len, .dst = r->iov, .dst_count = r->iov_count };
		const struct seal_key *sk = seal_key_of(s->seal, r->ns);
		if (!d)
			return KVT_MISS;
		ret = sk ? seal_get(s->seal, sk, d, r->ns, &r->key, &rd)
			 : dram_get(d, r->ns, &r->key, &rd);
		r->length = rd.copied;
		r->value_len = rd.value_len;
		r->value_flags = rd.value_flags;
		if (ret == SEAL_FAILED)
			ret = KVT_MISS; /* present but did not open */
		else if (ret == KVT_OK)
			r->tier = KVT_TIER_DRAM;
		else if (ret == KVT_MISS)
			ret = store_get_lower(s, r, IO_PRIO_DEMAND);
		return ret;
	}
	case KVT_OP_GET_PINNED: {
		struct iovec view[DRAM_MAX_RUNS];
		struct dram_item *item;
		unsigned vc = 0;
		uint64_t len = 0;
		if (!d)
			return KVT_MISS;
		if (r->flags & KVT_F_QUIET)
			return store_get_quiet(s, r);
		ret = dram_pin(d, r->ns, &r->key, &item, view, &vc, &len);
		if (ret == KVT_MISS)
			return store_get_lower(s, r, IO_PRIO_DEMAND);
		if (ret != KVT_OK)
			return ret;
		ret = pin_add(s, r, item, view, vc);
		if (ret < 0) {
			dram_unpin(d, item);
			return ret;
		}
		r->length = len;
		r->value_len = len;
		r->value_flags = dram_item_flags(item);
		r->tier = KVT_TIER_DRAM;
		return KVT_OK;
	}
	case KVT_OP_EXISTS:
		ret = d ? dram_exists(d, r->ns, &r->key) : KVT_MISS;
		if (ret == KVT_OK)
			r->tier = KVT_TIER_DRAM;
		else if (s->ssd && ssd_find(s->ssd, r->ns, &r->key, NULL) == KVT_OK)
			ret = KVT_OK, r->tier = KVT_TIER_SSD;
		else if (s->shared && shared_lookup(s->shared, r->ns, &r->key, 1, NULL,
						    store_shared_exists_done, r) == 0)
			return STORE_PENDING;
		else if (s->remote) {
			struct cluster_hint h;
			if (cluster_exists(s->remote, r->ns, &r->key, req_hint(r, &h),
					   store_remote_exists_done, r) == 0)
				return STORE_PENDING;
		}
		return ret;
	case KVT_OP_DELETE: {
		/* The tombstone first (if it cannot be had, nothing changes),
		 * then DRAM, then the SSD index: ssd.h says why. */
		void *tomb = s->ssd ? ssd_log_prepare(s->ssd, false, r->ns, &r->key) : NULL;
		int a, b = KVT_MISS;
		if (s->ssd && !tomb)
			return -ENOMEM;
		a = d ? dram_delete(d, r->ns, &r->key) : KVT_MISS;
		if (tomb) {
			b = ssd_delete(s->ssd, tomb, r->ns, &r->key);
			/* Again: a promotion from SSD may have reserved the block in
			 * DRAM after the first pass; this kills it (ssd_promote). */
			if (d && dram_delete(d, r->ns, &r->key) == KVT_OK)
				a = KVT_OK;
		}
		if (s->shared && shared_delete(s->shared, r->ns, &r->key) == KVT_OK)
			b = KVT_OK; /* one unlink: no round trip worth a thread */
		ret = a == KVT_OK || b == KVT_OK ? KVT_OK : KVT_MISS;
		if (ret == KVT_OK && s->events)
			kvevents_removed(s->events, &r->key);
		if (s->remote) {
			req_stash(r, ret);
			ret = cluster_delete(s->remote, r->ns, &r->key, store_remote_delete_done, r);
			return ret == 0 ? STORE_PENDING : ret;
		}
		return ret;
	}
	case KVT_OP_LOOKUP: {
		uint64_t n = 0, dram_bytes = 0, ssd_bytes = 0;
		if (s->remote)
			cluster_note_prompt(s->remote, r->keys, r->key_count);
		if (!s->ssd) {
			if (d)
				n = (uint64_t)dram_lookup(d, r->ns, r->keys, r->key_count, r->tiers,
							  &dram_bytes);
			else if (r->tiers)
				memset(r->tiers, KVT_TIER_NONE, r->key_count);
		} else {
			for (; n < r->key_count; n++) {
				uint64_t len = 0;
				uint8_t t = KVT_TIER_NONE;
				if (d && dram_lookup(d, r->ns, &r->keys[n], 1, NULL, &dram_bytes) == 1)
					t = KVT_TIER_DRAM;
				else if (ssd_find(s->ssd, r->ns, &r->keys[n], &len) == KVT_OK)
					t = KVT_TIER_SSD, ssd_bytes += len;
				if (t == KVT_TIER_NONE)
					break;
				if (r->tiers)
					r->tiers[n] = t;
			}
			if (r->tiers)
				memset(r->tiers + n, KVT_TIER_NONE, r->key_count - n);
			r->load_ns = ssd_load_ns(s->ssd, ssd_bytes);
		}
		r->load_ns += (uint64_t)((double)dram_bytes * 1e9 / s->dram_bps);
		r->length = n;
		if (d) /* the eviction policy learns the chain (doc/policies.md) */
			dram_note_prefix(d, r->ns, r->keys, r->key_count, n);
		if (s->shared && n < r->key_count) {
			req_stash(r, (int64_t)n);
			if (shared_lookup(s->shared, r->ns, r->keys + n, (uint32_t)(r->key_count - n),
					  r->tiers ? r->tiers + n : NULL, store_shared_lookup_done,
					  r) == 0)
				return STORE_PENDING;
		}
		if (s->remote && n < r->key_count) {
			req_stash(r, (int64_t)n);
			if (cluster_lookup(s->remote, r->ns, r->keys, (uint32_t)n, r->key_count,
					   r->tiers, store_remote_lookup_done, r) == 0)
				return STORE_PENDING;
		}
		return KVT_OK;
	}
	case KVT_OP_PREFETCH:
		return store_prefetch(s, r);
	case KVT_OP_CLEAR: {
		void *rec = s->ssd ? ssd_log_prepare(s->ssd, true, r->ns, NULL) : NULL;
		int64_t a, b = 0;
		if (s->ssd && !rec)
			return -ENOMEM;
		a = d ? dram_clear(d, r->ns) : 0;
		if (rec) {
			b = ssd_clear(s->ssd, rec, r->ns);
			if (d)
				a += dram_clear(d, r->ns); /* promotions that raced (see delete) */
		}
		if (s->shared) {
			int64_t c = shared_clear(s->shared, r->ns);
			if (c > a && c > b)
				a = c;
		}
		r->length = (uint64_t)(a > b ? a : b);
		if (s->events)
			kvevents_cleared(s->events); /* the format has no per-namespace clear */
		if (s->remote) {
			req_stash(r, (int64_t)r->length);
			ret = cluster_clear(s->remote, r->ns, store_remote_clear_done, r);
			return ret == 0 ? STORE_PENDING : ret;
		}
		return KVT_OK;
	}
	case KVT_OP_FLUSH:
		pthread_mutex_lock(&s->work_lock);
		while (!store_flush_ready(s, r->priv_seq_))
			pthread_cond_wait(&s->work_cond, &s->work_lock);
		pthread_mutex_unlock(&s->work_lock);
		if (s->remote)
			cluster_flush(s->remote); /* puts written through are answered */
		if (s->shared)
			shared_flush(s->shared); /* write-downs queued so far are on it */
		return s->ssd ? ssd_flush(s->ssd) : KVT_OK;
	}
	return KVT_EBADOP;
}

static bool req_deferred(const struct kvt_req *r)
{
	return (r->flags & KVT_F_DEFER) || r->op == KVT_OP_PREFETCH || r->op == KVT_OP_FLUSH;
}

/* ------------------------------------------------------------------------
 * Workers
 */

struct worker_arg {
	struct kvt_store *s;
	unsigned idx;
};

static void *worker_main(void *arg)
{
	struct kvt_store *s = ((struct worker_arg *)arg)->s;
	unsigned idx = ((struct worker_arg *)arg)->idx;

	free(arg);
	pthread_mutex_lock(&s->work_lock);
	for (;;) {
		struct kvt_req *r;
		int status;
		while (!s->stop && (s->paused || !s->work_head))
			pthread_cond_wait(&s->work_cond, &s->work_lock);
		if (s->stop)
			break;
		r = s->work_head;
		s->work_head = r->priv_[1];
		if (s->work_head)
			s->work_head->priv_[2] = NULL;
		else
			s->work_tail = NULL;
		req_set_state(r, REQ_RUNNING);
		s->running_seq[idx] = r->priv_seq_;
		pthread_mutex_unlock(&s->work_lock);

		status = store_exec(s, r);
		/* Deliver before leaving running[]: a flush barrier waiting on
		 * this request must complete after it, not before. */
		if (status != STORE_PENDING)
			req_complete(s, r, status);

		pthread_mutex_lock(&s->work_lock);
		s->running_seq[idx] = 0;
		pthread_cond_broadcast(&s->work_cond); /* flush barriers re-check */
	}
	pthread_mutex_unlock(&s->work_lock);
	return NULL;
}

static int workers_start(struct kvt_store *s)
{
	int ret = 0;

	/* Signals are blocked by kvt_store_open, and the mask is inherited. */
	for (unsigned i = 0; i < s->worker_count; i++) {
		struct worker_arg *a = malloc(sizeof(*a));
		if (!a) {
			ret = -ENOMEM;
			break;
		}
		a->s = s;
		a->idx = i;
		ret = -pthread_create(&s->workers[i], NULL, worker_main, a);
		if (ret) {
			free(a);
			break;
		}
		pthread_setname_np(s->workers[i], "kvt-worker");
		s->workers_started++;
	}
	return ret;
}

/* Stop workers: cancel queued work, let running work finish, join. */
static void workers_stop(struct kvt_store *s)
{
	struct kvt_req *r;

	pthread_mutex_lock(&s->work_lock);
	s->stop = true;
	r = s->work_head;
	s->work_head = s->work_tail = NULL;
	pthread_cond_broadcast(&s->work_cond);
	pthread_mutex_unlock(&s->work_lock);
	for (unsigned i = 0; i < s->workers_started; i++)
		pthread_join(s->workers[i], NULL);
	s->workers_started = 0;
	while (r) {
		struct kvt_req *next = r->priv_[1];
		atomic_fetch_add(&s->canceled, 1);
		req_complete(s, r, -ECANCELED);
		r = next;
	}
}

/* ------------------------------------------------------------------------
 * Open and close
 */

/* memcpy rate of this machine (bytes/s), for lookup load estimates. */
static double store_measure_memcpy(void)
{
	size_t len = 8u << 20;
	char *a = malloc(len), *b = malloc(len);
	double best = 0;
	if (!a || !b) {
		free(a);
		free(b);
		return 10e9;
	}
	memset(a, 1, len);
	memset(b, 2, len);
	for (int i = 0; i < 3; i++) {
		struct timespec t0, t1;
		double dt;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		memcpy(b, a, len);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (dt > 0 && (double)len / dt > best)
			best = (double)len / dt;
	}
	free(a);
	free(b);
	return best > 0 ? best : 10e9;
}

static int store_open_dir(struct kvt_store *s)
{
	int ret;

	if (mkdir(s->path, 0700) < 0 && errno != EEXIST)
		return -errno;
	s->dir_fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0)
		return -errno;
	s->lock_fd = openat(s->dir_fd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return -errno;
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? KVT_ELOCKED : -errno;
		if (ret == KVT_ELOCKED)
			kvt_logf(&s->log, KVT_LOG_ERROR,
				 "store %s is locked by another process", s->path);
		return ret;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Device registration of the DRAM regions (kvtier.h)
 */

/* One region per DRAM shard: 256 GiB at the default shard size. */
#define STORE_REGIONS_MAX 256

static void store_regions_detach_n(struct kvt_store *s, const struct iovec *r, unsigned n)
{
	while (n-- > 0)
		s->region_hook.detach(s->region_hook.ctx, r[n].iov_base, r[n].iov_len);
}

static void store_regions_detach(struct kvt_store *s)
{
	struct iovec r[STORE_REGIONS_MAX];
	unsigned n;
	if (s->region_count == 0)
		return;
	n = dram_regions(s->dram, r, STORE_REGIONS_MAX);
	store_regions_detach_n(s, r, n < s->region_count ? n : s->region_count);
	atomic_store(&s->region_bytes, 0);
	s->region_count = 0;
	memset(&s->region_hook, 0, sizeof(s->region_hook));
}

int kvt_store_register_regions(struct kvt_store *s, const struct kvt_region_hook *hook)
{
	struct iovec r[STORE_REGIONS_MAX + 1];
	uint64_t bytes = 0;
	unsigned n, i;
	int ret;
	if (!s || !hook || !hook->name || !hook->attach || !hook->detach)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (s->region_count > 0)
		return KVT_EBUSY;
	n = s->dram ? dram_regions(s->dram, r, STORE_REGIONS_MAX + 1) : 0;
	if (n > STORE_REGIONS_MAX)
		return KVT_ETOOBIG;
	s->region_hook = *hook;
	for (i = 0; i < n; i++) {
		ret = hook->attach(hook->ctx, r[i].iov_base, r[i].iov_len);
		if (ret < 0)
			goto fail;
		bytes += r[i].iov_len;
	}
	s->region_count = n;
	atomic_store(&s->region_bytes, bytes);
	return 0;
fail:
	store_regions_detach_n(s, r, i);
	memset(&s->region_hook, 0, sizeof(s->region_hook));
	return ret;
}

/*
 * Graceful stop: write down what only DRAM holds, most valuable first,
 * within ssd.close_writedown_ms and the SSD's free room (whole free
 * segments under its low watermark: what it holds is not pushed out for
 * DRAM's older blocks), a pass of at most 64 MiB at a time, flushing
 * between passes.
 * Policy in doc/policies.md ("Warm restarts").
 */
static void store_close_writedown(struct kvt_store *s)
{
	uint64_t budget, total = 0, got;
	struct timespec t0, t;
	if (s->ssd_cfg.close_wd_ms == 0)
		return;
	ssd_flush(s->ssd);
	budget = ssd_room_bytes(s->ssd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		got = dram_writedown_pass(s->dram, &budget, UINT64_C(64) << 20);
		ssd_flush(s->ssd);
		total += got;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (got == 0 || budget == 0 ||
		    (uint64_t)(t.tv_sec - t0.tv_sec) * 1000 +
				    (uint64_t)((t.tv_nsec - t0.tv_nsec) / 1000000) >=
			    s->ssd_cfg.close_wd_ms)
			break;
	}
	if (total)
		kvt_logf(&s->log, KVT_LOG_INFO, "close: wrote %llu MiB of DRAM blocks down to SSD",
			 (unsigned long long)(total >> 20));
}

static void store_release(struct kvt_store *s, bool child)
{
	if (!child)
		workers_stop(s);
	/* The shared tier's pool first: its callbacks may call the remote
	 * tier.  Its struct stays until DRAM is gone (the evict hook). */
	if (!child)
		shared_stop(s->shared);
	/* First: its thread completes gets into DRAM and reads the callers' parts. */
	if (!child)
		cluster_close(s->remote);
	s->remote = NULL; /* a child has no remote thread: its memory is left */
	if (s->ssd) {
		/* A warm restart: DRAM's blocks worth keeping go down first. */
		if (!child && s->dram)
			store_close_writedown(s);
		/* Before DRAM: queued write-downs pin DRAM blocks, and reads in
		 * flight complete (and may pin) while it drains. */
		if (!child)
			ssd_close(s->ssd);
		s->ssd = NULL;
	}
	if (s->dram && !child)
		pins_drop_all(s);
	if (s->dram && !child)
		store_regions_detach(s); /* before the arena is unmapped */
	if (s->dram) {
		dram_close(s->dram);
		s->dram = NULL;
	}
	if (!child)
		kvevents_close(s->events); /* after every thread that reports events */
	s->events = NULL;
	seal_close(s->seal);
	s->seal = NULL;
	if (!child)
		shared_free(s->shared);
	s->shared = NULL;
	quota_fini(&s->quota);
	if (s->ns_ready) {
		ns_reg_free(&s->ns);
		s->ns_ready = false;
	}
	if (s->lock_fd >= 0) {
		/* In a child the lock belongs to the parent: close, never unlock. */
		if (!child)
			flock(s->lock_fd, LOCK_UN);
		close(s->lock_fd);
		s->lock_fd = -1;
	}
	if (s->dir_fd >= 0) {
		close(s->dir_fd);
		s->dir_fd = -1;
	}
	s->stop = false;
}

static int store_open_locked(struct kvt_store *s);

int kvt_store_open(struct kvt_store *s)
{
	sigset_t all, old;
	int ret;

	if (!s)
		return KVT_ENULL;
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	/* Every thread started below inherits this mask: the library's
	 * threads never take the embedding program's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = store_open_locked(s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

static int store_open_locked(struct kvt_store *s)
{
	int ret;

	s->pid = getpid();
	if (s->fork_page)
		munmap((void *)s->fork_page, 4096); /* a retried open */
	s->fork_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->fork_page == MAP_FAILED) {
		s->fork_page = NULL;
	} else if (madvise((void *)s->fork_page, 4096, MADV_WIPEONFORK) < 0) {
		munmap((void *)s->fork_page, 4096);
		s->fork_page = NULL;
	} else {
		*s->fork_page = 1;
	}
	if (s->path) {
		ret = store_open_dir(s);
		if (ret < 0)
			goto fail;
	}
	ret = ns_reg_init(&s->ns, &s->mem);
	if (ret < 0)
		goto fail;
	s->ns_ready = true;
	ret = quota_init(&s->quota, &s->mem, &s->ns);
	if (ret < 0)
		goto fail;
	s->ssd_cfg.quota = &s->quota;
	ret = seal_open(&s->seal, &s->mem);
	if (ret < 0)
		goto fail;
	if (s->dir_fd >= 0) {
		ret = ns_reg_load(&s->ns, s->dir_fd);
		if (ret < 0) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "store %s: namespace registry: %s",
				 s->path, kvt_strerror(ret));
			goto fail;
		}
	}
	if (s->dram_cfg.capacity > 0) {
		ret = dram_open(&s->dram, &s->dram_cfg, &s->mem, &s->log);
		if (ret < 0) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "dram tier: %s", kvt_strerror(ret));
			goto fail;
		}
		dram_set_quota(s->dram, &s->quota);
	} else {
		kvt_logf(&s->log, KVT_LOG_WARN, "no DRAM tier configured: every get is a miss");
	}
	if (s->ssd_cfg.capacity > 0) {
		if (s->dir_fd < 0 || !s->dram) {
			kvt_logf(&s->log, KVT_LOG_ERROR,
				 "the ssd tier needs a store directory (option path) and a DRAM tier");
			ret = KVT_EOPTVAL;
			goto fail;
		}
		/* Write-downs pin DRAM blocks: never let them pin more than a
		 * quarter of it, or puts would find nothing to evict. */
		if (s->ssd_cfg.wd_max_bytes > s->dram_cfg.capacity / 4)
			s->ssd_cfg.wd_max_bytes = s->dram_cfg.capacity / 4;
		ret = ssd_open(&s->ssd, &s->ssd_cfg, s->dir_fd, &s->mem, &s->log, &s->ns, s->dram);
		if (ret < 0) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "ssd tier: %s", kvt_strerror(ret));
			goto fail;
		}
		dram_set_admit_hook(s->dram, ssd_admit, s->ssd,
				    s->ssd_cfg.admission == SSD_ADMIT_VICTIM);
	}
	if (s->remote_cfg.addr || s->remote_cfg.addrs || s->remote_cfg.discover) {
		if (!s->dram) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "the remote tier needs a DRAM tier");
			ret = KVT_EOPTVAL;
			goto fail;
		}
		if (s->remote_cfg.backoff_max_ms < s->remote_cfg.backoff_ms)
			s->remote_cfg.backoff_max_ms = s->remote_cfg.backoff_ms;
		ret = cluster_open(&s->remote, &s->remote_cfg, s->dram, &s->ns, &s->mem, &s->log);
		if (ret < 0) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "remote tier: %s", kvt_strerror(ret));
			goto fail;
		}
	}
	if (s->shared_cfg.dir && s->shared_cfg.s3_endpoint) {
		kvt_logf(&s->log, KVT_LOG_ERROR, "shared.dir and shared.s3_endpoint: one or the other");
		ret = KVT_EOPTVAL;
		goto fail;
	}
	if (s->shared_cfg.dir || s->shared_cfg.s3_endpoint) {
		if (!s->dram) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "the shared tier needs a DRAM tier");
			ret = KVT_EOPTVAL;
			goto fail;
		}
		if (s->shared_cfg.wd_max_bytes > s->dram_cfg.capacity / 4)
			s->shared_cfg.wd_max_bytes = s->dram_cfg.capacity / 4;
		ret = shared_open(&s->shared, &s->shared_cfg, s->dram, &s->ns, &s->mem, &s->log);
		if (ret < 0)
			goto fail;
		dram_set_evict_hook(s->dram, shared_evicted, s->shared);
		if (s->ssd)
			ssd_set_evict_hook(s->ssd, &shared_ssd_hook, s->shared);
	}
	if (s->events_cfg.endpoint) {
		ret = kvevents_open(&s->events, &s->events_cfg, &s->mem, &s->log);
		if (ret < 0)
			goto fail;
		/* With no lower tier, a block DRAM evicts leaves the store. */
		if (s->dram && !s->ssd && !s->shared)
			dram_set_evict_hook(s->dram, store_evicted_event, s);
	}
	s->dram_bps = store_measure_memcpy();
	ret = workers_start(s);
	if (ret < 0)
		goto fail;
	s->state = ST_OPEN;
	return 0;
fail:
	store_release(s, false);
	return ret;
}

int kvt_store_close(struct kvt_store *s)
{
	if (!s)
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	if (store_forked(s))
		return KVT_EFORK;
	store_release(s, false);
	s->state = ST_CLOSED;
	return 0;
}

static void queue_free(struct kvt_queue *q)
{
	if (q->efd >= 0)
		close(q->efd);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void kvt_store_destroy(struct kvt_store *s)
{
	bool child;
	if (!s)
		return;
	child = s->state == ST_OPEN && store_forked(s);
	if (s->state == ST_OPEN)
		store_release(s, child);
	while (s->queues) {
		struct kvt_queue *q = s->queues;
		s->queues = q->next;
		queue_free(q);
	}
	free(s->path);
	free(s->remote_cfg.addr);
	free(s->remote_cfg.addrs);
	free(s->remote_cfg.discover);
	free(s->remote_cfg.tenant);
	free(s->remote_cfg.secret_file);
	free(s->remote_cfg.tls_ca);
	free(s->remote_cfg.tls_cert);
	free(s->remote_cfg.tls_key);
	free(s->remote_cfg.tls_server_name);
	free(s->shared_cfg.dir);
	free(s->shared_cfg.s3_endpoint);
	free(s->shared_cfg.s3_bucket);
	free(s->shared_cfg.s3_region);
	free(s->shared_cfg.s3_credentials);
	free(s->events_cfg.endpoint);
	free(s->events_cfg.topic);
	free(s->events_cfg.medium);
	if (s->fork_page)
		munmap((void *)s->fork_page, 4096);
	if (!child) {
		pthread_mutex_destroy(&s->work_lock);
		pthread_cond_destroy(&s->work_cond);
		pthread_mutex_destroy(&s->queues_lock);
		for (int i = 0; i < PIN_SHARDS; i++)
			pthread_mutex_destroy(&s->pins[i].lock);
	}
	free(s);
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

/* ------------------------------------------------------------------------
 * Namespaces
 */

int kvt_ns_register(struct kvt_store *s, const struct kvt_ns_desc *desc, uint32_t *id)
{
	char canon[NS_CANON_MAX];
	uint8_t digest[32];
	int ret, len;

	if (!s || !desc || !id)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	len = kvt_ns_digest(desc, digest, canon, sizeof(canon));
	if (len < 0)
		return len;
	if ((size_t)len >= sizeof(canon))
		return KVT_EDESC;
	ret = ns_reg_add(&s->ns, digest, canon, (uint32_t)len, id);
	if (ret == 0 && (desc->flags & KVT_NS_PERSISTENT) && s->ssd)
		ret = ssd_set_persistent(s->ssd, *id);
	if (ret == 0 && (desc->flags & KVT_NS_PERSISTENT) && s->shared)
		ret = shared_set_persistent(s->shared, *id);
	if (ret == 0 && desc->replicas > 1) {
		/* Policy, kept in the entry (never moved or freed): the largest asked. */
		struct ns_entry *e = (struct ns_entry *)ns_reg_get(&s->ns, *id);
		uint32_t old = atomic_load(&e->replicas);
		while (old < desc->replicas &&
		       !atomic_compare_exchange_weak(&e->replicas, &old, desc->replicas))
			;
	}
	return ret;
}

int kvt_ns_find(struct kvt_store *s, const uint8_t digest[32], uint32_t *id)
{
	int ret;
	if (!s || !digest || !id)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	return ns_reg_find(&s->ns, digest, id);
}

int kvt_ns_info(struct kvt_store *s, uint32_t id, uint8_t digest[32], char *buf, size_t buf_len)
{
	const struct ns_entry *e;
	int ret;
	if (!s || !digest)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	e = ns_reg_get(&s->ns, id);
	if (!e)
		return KVT_ENONS;
	memcpy(digest, e->digest, 32);
	if (buf && buf_len) {
		size_t n = e->canon_len < buf_len - 1 ? e->canon_len : buf_len - 1;
		memcpy(buf, e->canon, n);
		buf[n] = 0;
	}
	return (int)e->canon_len;
}

/* ------------------------------------------------------------------------
 * Sealed namespaces (seal.c does the work)
 */

int kvt_ns_set_seal_key(struct kvt_store *s, uint32_t ns, const uint8_t *master_key, size_t len)
{
	const struct ns_entry *e;
	uint8_t key[SEAL_KEY_LEN];
	int ret;
	if (!s || !master_key)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!(e = ns_reg_get(&s->ns, ns)))
		return KVT_ENONS;
	ret = seal_derive_ns_key(s->seal, master_key, len, e->digest, key);
	if (ret == 0)
		ret = seal_set_key(s->seal, ns, e->digest, key);
	OPENSSL_cleanse(key, sizeof(key));
	return ret;
}

int kvt_ns_set_seal_ns_key(struct kvt_store *s, uint32_t ns, const uint8_t ns_key[32])
{
	const struct ns_entry *e;
	int ret;
	if (!s || !ns_key)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!(e = ns_reg_get(&s->ns, ns)))
		return KVT_ENONS;
	return seal_set_key(s->seal, ns, e->digest, ns_key);
}

int kvt_ns_seal_key_export(struct kvt_store *s, uint32_t ns, uint8_t ns_key[32])
{
	const struct seal_key *k;
	int ret;
	if (!s || !ns_key)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	if (!(k = seal_key_of(s->seal, ns)))
		return KVT_MISS;
	memcpy(ns_key, k->key, SEAL_KEY_LEN);
	return 0;
}

/* ------------------------------------------------------------------------
 * Quota groups (quota.c does the work)
 */

int kvt_quota_set(struct kvt_store *s, uint32_t group, uint64_t dram_bytes, uint64_t ssd_bytes)
{
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	return quota_set(&s->quota, group, dram_bytes, ssd_bytes);
}

int kvt_ns_set_group(struct kvt_store *s, uint32_t ns, uint32_t group)
{
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	return quota_ns_set_group(&s->quota, ns, group);
}

/* ------------------------------------------------------------------------
 * Validation
 */

static int key_check(const struct kvt_key *k)
{
	return k->len >= 1 && k->len <= KVT_KEY_MAX ? 0 : KVT_EKEYLEN;
}

#define KVT_F_ALL (KVT_F_PART | KVT_F_RANGE | KVT_F_CRC | KVT_F_VERIFY | KVT_F_DEFER | \
		   KVT_F_SEALED | KVT_F_QUIET | KVT_F_PROMPT)

static int req_check(struct kvt_store *s, const struct kvt_req *r)
{
	uint64_t total = 0;
	int ret;

	if (r->op < KVT_OP_PUT || r->op >= KVT_OP__COUNT || (r->flags & ~KVT_F_ALL))
		return KVT_EBADOP;
	if ((r->flags & (KVT_F_PART | KVT_F_RANGE | KVT_F_VERIFY)) && r->op != KVT_OP_GET)
		return KVT_EBADOP;
	if ((r->flags & (KVT_F_CRC | KVT_F_SEALED)) && r->op != KVT_OP_PUT)
		return KVT_EBADOP;
	if ((r->flags & KVT_F_QUIET) && r->op != KVT_OP_GET_PINNED)
		return KVT_EBADOP;
	if ((r->flags & KVT_F_PART) && (r->flags & KVT_F_RANGE))
		return KVT_EBADOP;
	if ((r->flags & KVT_F_VERIFY) && (r->flags & KVT_F_RANGE))
		return KVT_EBADOP; /* CRCs cover whole parts */
	if (r->flags & KVT_F_PROMPT) {
		if (r->op != KVT_OP_PUT && r->op != KVT_OP_GET && r->op != KVT_OP_GET_PINNED &&
		    r->op != KVT_OP_EXISTS && r->op != KVT_OP_DELETE)
			return KVT_EBADOP;
		if (!r->keys)
			return KVT_ENULL;
		if (r->key_count == 0 || r->key_count > KVT_BATCH_MAX)
			return KVT_EBADLEN;
	}
	if (r->op == KVT_OP_FLUSH)
		return 0;
	if (!(r->op == KVT_OP_CLEAR && r->ns == KVT_NS_ALL) && !ns_reg_get(&s->ns, r->ns))
		return KVT_ENONS;
	/* Sealed namespaces: the library seals and opens; nothing hands out or
	 * takes ciphertext, and a byte range cannot be checked against a tag. */
	if (KVT_UNLIKELY(seal_key_of(s->seal, r->ns)) &&
	    (r->op == KVT_OP_GET_PINNED || (r->flags & (KVT_F_RANGE | KVT_F_SEALED))))
		return KVT_EBADOP;
	switch (r->op) {
	case KVT_OP_PUT:
		if ((ret = key_check(&r->key)) < 0)
			return ret;
		if (!r->iov)
			return KVT_ENULL;
		if (r->iov_count == 0 || r->iov_count > KVT_PARTS_MAX)
			return KVT_EBADLEN;
		for (uint32_t i = 0; i < r->iov_count; i++) {
			if (r->iov[i].iov_len == 0)
				return KVT_EBADLEN;
			if (!r->iov[i].iov_base)
				return KVT_ENULL;
			total += r->iov[i].iov_len;
			if (total > KVT_VALUE_MAX)
				return KVT_EBADLEN;
		}
		if ((r->flags & KVT_F_CRC) && !r->crcs)
			return KVT_ENULL;
		return 0;
	case KVT_OP_GET:
		if ((ret = key_check(&r->key)) < 0)
			return ret;
		if (!r->iov)
			return KVT_ENULL;
		if (r->iov_count == 0 || r->iov_count > KVT_BATCH_MAX)
			return KVT_EBADLEN;
		for (uint32_t i = 0; i < r->iov_count; i++)
			if (!r->iov[i].iov_base && r->iov[i].iov_len)
				return KVT_ENULL;
		if ((r->flags & KVT_F_RANGE) && r->len == 0)
			return KVT_EBADLEN;
		return 0;
	case KVT_OP_GET_PINNED:
	case KVT_OP_EXISTS:
	case KVT_OP_DELETE:
		return key_check(&r->key);
	case KVT_OP_LOOKUP:
	case KVT_OP_PREFETCH:
		if (!r->keys)
			return KVT_ENULL;
		if (r->key_count == 0 || r->key_count > KVT_BATCH_MAX)
			return KVT_EBADLEN;
		for (uint32_t i = 0; i < r->key_count; i++)
			if ((ret = key_check(&r->keys[i])) < 0)
				return ret;
		return 0;
	case KVT_OP_CLEAR:
		return 0;
	}
	return KVT_EBADOP;
}

/* ------------------------------------------------------------------------
 * Queues and submission
 */

int kvt_queue_create(struct kvt_store *s, struct kvt_queue **out)
{
	struct kvt_queue *q;
	int ret;

	if (!s || !out)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->store = s;
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0) {
		ret = -errno;
		free(q);
		return ret;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_lock(&s->queues_lock);
	q->next = s->queues;
	if (s->queues)
		s->queues->prev = q;
	s->queues = q;
	pthread_mutex_unlock(&s->queues_lock);
	*out = q;
	return 0;
}

int kvt_queue_destroy(struct kvt_queue *q)
{
	struct kvt_store *s;
	if (!q)
		return KVT_ENULL;
	if (atomic_load(&q->inflight) > 0)
		return KVT_EBUSY;
	s = q->store;
	pthread_mutex_lock(&s->queues_lock);
	if (q->prev)
		q->prev->next = q->next;
	else
		s->queues = q->next;
	if (q->next)
		q->next->prev = q->prev;
	pthread_mutex_unlock(&s->queues_lock);
	queue_free(q);
	return 0;
}

int kvt_queue_fd(struct kvt_queue *q)
{
	return q ? q->efd : KVT_ENULL;
}

int kvt_queue_set_flags(struct kvt_queue *q, uint32_t flags)
{
	if (!q)
		return KVT_ENULL;
	if (flags & ~(uint32_t)KVT_QUEUE_POLL_AFTER_SUBMIT)
		return KVT_EBADOP;
	q->quiet_inline = (flags & KVT_QUEUE_POLL_AFTER_SUBMIT) != 0;
	return 0;
}

int kvt_queue_inflight(struct kvt_queue *q)
{
	return q ? atomic_load(&q->inflight) : KVT_ENULL;
}

int kvt_submit(struct kvt_queue *q, struct kvt_req *const reqs[], unsigned n)
{
	struct kvt_store *s;
	struct cview *plugged = NULL; /* the remote tier's members plugged, if any */
	unsigned i;
	int ret = 0;

	if (!q || !reqs)
		return KVT_ENULL;
	s = q->store;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (n == 0 || n > KVT_BATCH_MAX)
		return KVT_EBADLEN;
	/* 1. Check every request; mark each so a duplicate in the batch shows. */
	for (i = 0; i < n; i++) {
		struct kvt_req *r = reqs[i];
		if (!r) {
			ret = KVT_ENULL;
			break;
		}
		if (req_state(r) != REQ_IDLE) {
			ret = KVT_EBUSY;
			break;
		}
		ret = req_check(s, r);
		if (ret < 0)
			break;
		req_set_state(r, REQ_CHECKING);
	}
	if (ret < 0) {
		for (unsigned j = 0; j < i; j++)
			req_set_state(reqs[j], REQ_IDLE);
		return ret;
	}
	/* 2. Run or queue them; every one now completes exactly once. */
	if (s->remote && n > 1)
		plugged = cluster_plug(s->remote);
	atomic_fetch_add(&q->inflight, (int)n);
	atomic_fetch_add_explicit(&s->submitted, n, memory_order_relaxed);
	for (i = 0; i < n; i++) {
		struct kvt_req *r = reqs[i];
		r->priv_[0] = q;
		r->priv_[1] = r->priv_[2] = NULL;
		r->priv_seq_ = atomic_fetch_add_explicit(&s->seq, 1, memory_order_relaxed) + 1;
		r->status = 0;
		r->priv_flags_ = 0;
		r->value_flags = 0;
		r->load_ns = 0;
		r->pin = 0;
		r->view = NULL;
		r->view_count = 0;
		if (req_deferred(r)) {
			atomic_fetch_add_explicit(&s->deferred, 1, memory_order_relaxed);
			pthread_mutex_lock(&s->work_lock);
			req_set_state(r, REQ_QUEUED);
			r->priv_[2] = s->work_tail;
			if (s->work_tail)
				s->work_tail->priv_[1] = r;
			else
				s->work_head = r;
			s->work_tail = r;
			/* Broadcast: flush barriers wait on the same condition, and
			 * a signal could wake one of them instead of a worker. */
			pthread_cond_broadcast(&s->work_cond);
			pthread_mutex_unlock(&s->work_lock);
		} else {
			int st;
			req_set_state(r, REQ_RUNNING);
			st = store_exec(s, r);
			if (st != STORE_PENDING)
				req_complete_bell(s, r, st, !q->quiet_inline);
		}
	}
	if (plugged)
		cluster_unplug(s->remote, plugged);
	return (int)n;
}

int kvt_queue_poll(struct kvt_queue *q, struct kvt_req **out, unsigned max)
{
	uint64_t v;
	unsigned n = 0;
	ssize_t rd;
	int saved_errno;

	if (!q || (!out && max))
		return KVT_ENULL;
	/* Reset the eventfd first, if it was written: a completion after this
	 * writes it again.  Under the lock, so that no completion's write
	 * falls between the read and clearing the flag. */
	pthread_mutex_lock(&q->lock);
	if (q->signaled && q->efd >= 0) {
		saved_errno = errno;
		rd = read(q->efd, &v, sizeof(v));
		KVT_UNUSED(rd);
		errno = saved_errno;
		q->signaled = false;
	}
	while (n < max && q->done_head) {
		struct kvt_req *r = q->done_head;
		q->done_head = r->priv_[1];
		if (!q->done_head)
			q->done_tail = NULL;
		r->priv_[0] = r->priv_[1] = r->priv_[2] = NULL;
		req_set_state(r, REQ_IDLE);
		out[n++] = r;
	}
	if (q->done_head && !q->signaled && q->efd >= 0) {
		/* Left some behind: keep the fd readable. */
		uint64_t one = 1;
		ssize_t w = write(q->efd, &one, sizeof(one));
		KVT_UNUSED(w);
		q->signaled = true;
	}
	pthread_mutex_unlock(&q->lock);
	atomic_fetch_sub(&q->inflight, (int)n);
	return (int)n;
}

int kvt_queue_wait(struct kvt_queue *q, struct kvt_req **out, unsigned max, int timeout_ms)
{
	int n;
	struct pollfd p;

	if (!q || !out)
		return KVT_ENULL;
	n = kvt_queue_poll(q, out, max);
	if (n != 0 || max == 0)
		return n;
	/* The eventfd may be readable with nothing to take (a completion
	 * written it after a poll had already taken the request): wait again
	 * for what is left of the timeout rather than return 0 early. */
	for (;;) {
		struct timespec t0, t1;
		int waited;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		p.fd = q->efd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, timeout_ms) < 0)
			return -errno;
		n = kvt_queue_poll(q, out, max);
		if (n != 0 || timeout_ms == 0)
			return n;
		if (timeout_ms < 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		waited = (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (waited >= timeout_ms)
			return 0;
		timeout_ms -= waited;
	}
}

int kvt_cancel(struct kvt_queue *q, struct kvt_req *r)
{
	struct kvt_store *s;
	uintptr_t st;
	int ret;

	if (!q || !r)
		return KVT_ENULL;
	s = q->store;
	/* priv_[0] is written only by this queue's owner (submit, poll): us. */
	if (req_queue(r) != q)
		return -ENOENT;
	/* QUEUED -> RUNNING happens under work_lock, RUNNING -> DONE under the
	 * queue's lock: holding both, the state cannot move under us. */
	pthread_mutex_lock(&s->work_lock);
	pthread_mutex_lock(&q->lock);
	st = req_state(r);
	pthread_mutex_unlock(&q->lock);
	if (st == REQ_QUEUED) {
		struct kvt_req *prev = r->priv_[2], *next = r->priv_[1];
		if (prev)
			prev->priv_[1] = next;
		else
			s->work_head = next;
		if (next)
			next->priv_[2] = prev;
		else
			s->work_tail = prev;
		atomic_fetch_add(&s->canceled, 1);
		req_complete(s, r, -ECANCELED);
		ret = 0;
	} else if (st == REQ_RUNNING && r->op == KVT_OP_PREFETCH) {
		/* A running prefetch stops issuing reads and completes -ECANCELED
		 * once those in flight land; what it promoted stays. */
		__atomic_store_n(&r->priv_flags_, 1, __ATOMIC_RELAXED);
		ret = 0;
	} else if (st == REQ_RUNNING) {
		ret = -EALREADY;
	} else {
		ret = -ENOENT;
	}
	pthread_mutex_unlock(&s->work_lock);
	return ret;
}

/* ------------------------------------------------------------------------
 * Synchronous helpers: run one request on the calling thread.
 */

static int store_sync(struct kvt_store *s, struct kvt_req *r)
{
	struct kvt_queue q;
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if ((ret = req_check(s, r)) < 0)
		return ret;
	/* Only a get that goes to the SSD tier, or any request that goes to
	 * the remote tier, completes on another thread; it needs a private
	 * queue on the stack to wait on.  Everything else runs here and now,
	 * without one (lookups are hot). */
	if (!s->remote && !s->shared &&
	    (!s->ssd || (r->op != KVT_OP_GET && r->op != KVT_OP_GET_PINNED)))
		return store_exec(s, r);
	memset(&q, 0, sizeof(q));
	q.store = s;
	q.efd = -1;
	pthread_mutex_init(&q.lock, NULL);
	pthread_cond_init(&q.cond, NULL);
	r->priv_[0] = &q;
	req_set_state(r, REQ_RUNNING);
	ret = store_exec(s, r);
	if (ret == STORE_PENDING) {
		pthread_mutex_lock(&q.lock);
		while (!q.done_head)
			pthread_cond_wait(&q.cond, &q.lock);
		pthread_mutex_unlock(&q.lock);
		ret = r->status;
	}
	pthread_mutex_destroy(&q.lock);
	pthread_cond_destroy(&q.cond);
	return ret;
}

int kvt_put(struct kvt_store *s, uint32_t ns, const struct kvt_key *key,
	    const struct iovec *parts, unsigned part_count)
{
	struct kvt_req r = { .op = KVT_OP_PUT, .ns = ns, .iov = parts, .iov_count = part_count };
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	return store_sync(s, &r);
}

int kvt_get(struct kvt_store *s, uint32_t ns, const struct kvt_key *key, void *buf,
	    size_t buf_len, uint64_t *value_len)
{
	struct iovec v = { buf, buf_len };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .iov = &v, .iov_count = 1 };
	int ret;
	if (!key || !buf)
		return KVT_ENULL;
	r.key = *key;
	ret = store_sync(s, &r);
	if (value_len)
		*value_len = r.value_len;
	return ret;
}

int kvt_exists(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	struct kvt_req r = { .op = KVT_OP_EXISTS, .ns = ns };
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	return store_sync(s, &r);
}

int kvt_delete(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	struct kvt_req r = { .op = KVT_OP_DELETE, .ns = ns };
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	return store_sync(s, &r);
}

int64_t kvt_lookup_prefix(struct kvt_store *s, uint32_t ns, const struct kvt_key *keys,
			  size_t key_count, uint8_t *tiers)
{
	struct kvt_req r = { .op = KVT_OP_LOOKUP, .ns = ns, .keys = keys, .tiers = tiers };
	int ret;
	if (key_count > KVT_BATCH_MAX)
		return KVT_EBADLEN;
	r.key_count = (uint32_t)key_count;
	ret = store_sync(s, &r);
	return ret < 0 ? ret : (int64_t)r.length;
}

int64_t kvt_clear(struct kvt_store *s, uint32_t ns)
{
	struct kvt_req r = { .op = KVT_OP_CLEAR, .ns = ns };
	int ret = store_sync(s, &r);
	return ret < 0 ? ret : (int64_t)r.length;
}

int kvt_flush(struct kvt_store *s)
{
	struct kvt_req r = { .op = KVT_OP_FLUSH }, *rp = &r, *got;
	struct kvt_queue *q;
	int ret;

	if (!s)
		return KVT_ENULL;
	ret = kvt_queue_create(s, &q);
	if (ret < 0)
		return ret;
	ret = kvt_submit(q, &rp, 1);
	/* Wait through signals: r lives on this stack until it completes. */
	while (ret >= 0 && ((ret = kvt_queue_wait(q, &got, 1, -1)) == 0 || ret == -EINTR))
		ret = 0;
	if (ret > 0)
		ret = r.status;
	kvt_queue_destroy(q);
	return ret;
}

/* ------------------------------------------------------------------------
 * Statistics
 */

int kvt_remote_stats(struct kvt_store *s, const char *tenant, kvt_stats_fn fn, void *ctx)
{
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!s->remote)
		return KVT_ESTATE;
	return cluster_stats_query(s->remote, tenant, fn, ctx);
}

int64_t kvt_remote_who(struct kvt_store *s, uint32_t ns, const struct kvt_key *keys,
		       size_t key_count, struct kvt_remote_node *nodes, size_t max,
		       uint64_t *leading)
{
	int ret;
	if (!s || !keys || (!nodes && max))
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!s->remote)
		return KVT_ESTATE;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	if (key_count == 0 || key_count > KVT_BATCH_MAX)
		return KVT_EBADLEN;
	for (size_t i = 0; i < key_count; i++)
		if ((ret = key_check(&keys[i])) < 0)
			return ret;
	return cluster_who(s->remote, ns, keys, (uint32_t)key_count, nodes, max, leading);
}

int kvt_store_stats(struct kvt_store *s, kvt_stats_fn fn, void *ctx)
{
	uint64_t pins = 0;
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	for (int i = 0; i < PIN_SHARDS; i++) {
		pthread_mutex_lock(&s->pins[i].lock);
		pins += s->pins[i].active;
		pthread_mutex_unlock(&s->pins[i].lock);
	}
	fn(ctx, "store.workers", s->workers_started, NULL);
	fn(ctx, "store.namespaces", atomic_load(&s->ns.count), NULL);
	fn(ctx, "store.submitted", atomic_load(&s->submitted), NULL);
	fn(ctx, "store.completed", atomic_load(&s->completed), NULL);
	fn(ctx, "store.deferred", atomic_load(&s->deferred), NULL);
	fn(ctx, "store.canceled", atomic_load(&s->canceled), NULL);
	fn(ctx, "store.pins_active", pins, NULL);
	fn(ctx, "mem.meta_bytes", (uint64_t)atomic_load(&s->mem.bytes), NULL);
	fn(ctx, "mem.meta_peak_bytes", (uint64_t)atomic_load(&s->mem.peak_bytes), NULL);
	fn(ctx, "mem.allocs", (uint64_t)atomic_load(&s->mem.allocs), NULL);
	fn(ctx, "store.dram_copy_bps", (uint64_t)s->dram_bps, NULL);
	if (s->dram) {
		uint64_t reg = atomic_load(&s->region_bytes);
		dram_stats(s->dram, fn, ctx);
		fn(ctx, "dram.registered", 0, reg ? s->region_hook.name : "not registered");
		fn(ctx, "dram.registered_bytes", reg, NULL);
	}
	if (s->ssd)
		ssd_stats(s->ssd, fn, ctx);
	if (s->remote)
		cluster_stats(s->remote, fn, ctx);
	if (s->events)
		kvevents_stats(s->events, fn, ctx);
	if (s->shared)
		shared_stats(s->shared, fn, ctx);
	quota_stats(&s->quota, fn, ctx);
	seal_stats(s->seal, fn, ctx);
	return 0;
}

struct stat_find {
	const char *name;
	uint64_t value;
	bool found;
};

static void stat_find_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct stat_find *f = ctx;
	if (!str && strcmp(name, f->name) == 0) {
		f->value = value;
		f->found = true;
	}
}

int kvt_store_stat(struct kvt_store *s, const char *name, uint64_t *value)
{
	struct stat_find f = { .name = name };
	int ret;
	if (!s || !name || !value)
		return KVT_ENULL;
	ret = kvt_store_stats(s, stat_find_cb, &f);
	if (ret < 0)
		return ret;
	if (!f.found)
		return KVT_MISS;
	*value = f.value;
	return 0;
}

struct ssd *store_ssd(struct kvt_store *s)
{
	return s->state == ST_OPEN ? s->ssd : NULL;
}

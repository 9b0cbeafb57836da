/*
 * store.c - the store handle: its lifecycle (create, open, close, destroy,
 * the store directory and its lock), queues and submission, workers, pins,
 * namespaces, and request validation.  Running a request is
 * store_dispatch.c's, the tiers below DRAM store_tiers.c's (tier.h), the
 * options store_options.c's; store_int.h has the struct and the request
 * life cycle.
 *
 * Owns everything hanging off struct kvt_store.  No global state: two
 * stores in one process share nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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

#include "store_int.h"

/* ------------------------------------------------------------------------
 * Create
 */

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
	store_options_init(s);
	pthread_mutex_init(&s->work_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_mutex_init(&s->queues_lock, NULL);
	for (int i = 0; i < PIN_SHARDS; i++)
		pthread_mutex_init(&s->pins[i].lock, NULL);
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------------
 * Zero-copy puts: reserve, fill, commit
 */


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
	if (flags & ~(uint32_t)(KVT_F_SEALED | KVT_F_NOWAIT | KVT_F_RETAIN | KVT_F_REPAIR))
		return KVT_EBADOP;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	flags |= store_ns_retain(s, ns);
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
	if (s->tier_through)
		return KVT_ESTATE;
	/* The bytes would go into DRAM unsealed. */
	if (seal_key_of(s->seal, ns))
		return KVT_EBADOP;
	/* A persistent namespace's write-down waits for room (ssd.h), or
	 * with KVT_F_NOWAIT says it would (KVT_EWAIT). */
	for (unsigned i = 0; i < s->tier_count; i++) {
		const struct tier_ops *o = s->tiers[i].ops;
		if (flags & KVT_F_NOWAIT)
			ret = o->room_watch ? o->room_watch(s->tiers[i].t, ns, len, NULL, NULL) : 0;
		else
			ret = o->put_room ? o->put_room(s->tiers[i].t, ns, len) : 0;
		if (ret < 0)
			return ret;
	}
	/* DRAM, then the tiers under its lock, as a put (store_put_absent,
	 * dram_reserve_put): a key DRAM holds is refused and replaces nothing
	 * (the SSD logged a tombstone for its dead entry until 2026-12-07),
	 * and a block a write-down moved from DRAM to the SSD meanwhile is
	 * found there (until 2026-12-07 the reservation went in over it:
	 * test_ssd_fsck wd_reput_race, put_reput_race). */
	if ((ret = store_put_absent(s, ns, key)) != KVT_OK)
		return ret;
	ret = dram_reserve_put(s->dram, ns, key, len, part_count > 1 ? part_lens : NULL,
			       part_count, &item, view, &vc);
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
		       ((flags & KVT_F_SEALED) ? DRAM_SEALED : 0) |
			       ((flags & KVT_F_RETAIN) ? DRAM_RETAIN : 0) |
			       ((flags & KVT_F_REPAIR) ? DRAM_REPAIR : 0),
		       &res->handle, &v);
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
	unsigned pflags;
	int ret;

	if (!s || (checked && !crcs))
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	ret = slot_take(s, handle, SLOT_RESV, &item, NULL, &pflags);
	if (ret < 0)
		return ret;
	if (crcs && !checked && dram_item_verify(s->dram, item, crcs) != KVT_OK) {
		dram_abort(s->dram, item);
		return KVT_ECORRUPT;
	}
	if (s->tier_down || s->events) {
		/* Written down by policy, as a put is; reported as a put is. */
		uint32_t ns;
		struct kvt_key key;
		dram_item_key(item, &ns, &key);
		ret = dram_publish(s->dram, item, crcs, NULL, pflags, false);
		for (unsigned i = 0; ret == KVT_OK && i < s->tier_count; i++)
			if (s->tiers[i].ops->put_down)
				s->tiers[i].ops->put_down(s->tiers[i].t, ns, &key);
		if (ret == KVT_OK)
			store_event_stored(s, NULL, ns, &key);
		return ret;
	}
	return dram_publish(s->dram, item, crcs, NULL, pflags, false);
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
		uint64_t t0 = kvt_now_ns();
		double dt;
		memcpy(b, a, len);
		dt = (double)(kvt_now_ns() - t0) / 1e9;
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

static void store_release(struct kvt_store *s, bool child)
{
	if (!child)
		workers_stop(s);
	/* The tiers below DRAM stop first, in chain order (store_tiers.c):
	 * their threads complete gets into DRAM, read the callers' parts and
	 * pin DRAM blocks for write-downs.  A child leaves them alone. */
	store_tiers_stop(s, child);
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
	/* After DRAM: a tier's DRAM hooks (the shared tier's evict hook) may
	 * run until DRAM is gone. */
	store_tiers_free(s, child);
	quota_fini(&s->quota);
	store_put_ghost_close(s);
	nsstat_fini(&s->nsstat); /* after DRAM, which counts into it */
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
	ret = seal_open(&s->seal, &s->mem);
	if (ret < 0)
		goto fail;
	ret = nsstat_init(&s->nsstat, &s->mem, s->nsstat_rows);
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
		dram_set_nsstat(s->dram, &s->nsstat);
	} else {
		kvt_logf(&s->log, KVT_LOG_WARN, "no DRAM tier configured: every get is a miss");
	}
	ret = store_tiers_open(s);
	if (ret < 0)
		goto fail;
	ret = store_put_ghost_open(s);
	if (ret < 0)
		goto fail;
	/* Any tier below DRAM: prefix-adapt runs prefix's order (doc/policies.md,
	 * "prefix-adapt over lower tiers"); the SSD alone as its victim tier
	 * with ssd.adapt_writedown on: the order too, its simulations of both
	 * deciding the write-down. */
	if (s->dram)
		dram_pin_lru(s->dram, s->tier_count > 1 ||
					      (s->tier_count == 1 && !dram_adapts_below(s->dram)));
	if (s->events_cfg.endpoint || s->events_cfg.groups || s->events_cfg.replay_endpoint) {
		ret = kvevents_open(&s->events, &s->events_cfg, &s->mem, &s->log);
		if (ret < 0)
			goto fail;
		/* With no lower tier, a block DRAM evicts leaves the store. */
		if (s->dram && !(s->tier_flags & TIER_KEEPS_EVICTED))
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
	store_options_free(s);
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
	for (unsigned i = 0; ret == 0 && (desc->flags & KVT_NS_PERSISTENT) && i < s->tier_count;
	     i++)
		if (s->tiers[i].ops->set_persistent)
			ret = s->tiers[i].ops->set_persistent(s->tiers[i].t, *id);
	if (ret == 0 && desc->replicas > 1) {
		/* Policy, kept in the entry (never moved or freed): the largest asked. */
		struct ns_entry *e = (struct ns_entry *)ns_reg_get(&s->ns, *id);
		uint32_t old = atomic_load(&e->replicas);
		while (old < desc->replicas &&
		       !atomic_compare_exchange_weak(&e->replicas, &old, desc->replicas))
			;
	}
	if (ret == 0 && (desc->flags & KVT_NS_RETAIN)) /* policy, as replicas */
		atomic_store(&((struct ns_entry *)ns_reg_get(&s->ns, *id))->retain, true);
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

int kvt_ns_set_word(struct kvt_store *s, uint32_t id, uint64_t expect, uint64_t word)
{
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	return ns_reg_set_word(&s->ns, id, expect, word);
}

int kvt_ns_word(struct kvt_store *s, uint32_t id, uint64_t *word)
{
	int ret;
	if (!s || !word)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	return ns_reg_word(&s->ns, id, word);
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

/* The checks of kvt_events_group_*: 0 with the store's publisher in *ev;
 * KVT_ENULL, store_check's errors, KVT_ESTATE (opened without events). */
static int store_events(struct kvt_store *s, struct kvevents **ev)
{
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!s->events)
		return KVT_ESTATE;
	*ev = s->events;
	return 0;
}

int kvt_events_group_endpoint(struct kvt_store *s, uint32_t group, const char *endpoint)
{
	struct kvevents *ev;
	int ret = store_events(s, &ev);
	return ret < 0 ? ret : kvevents_group_endpoint(ev, group, endpoint);
}

int kvt_events_group_replay_endpoint(struct kvt_store *s, uint32_t group, const char *endpoint)
{
	struct kvevents *ev;
	int ret = store_events(s, &ev);
	return ret < 0 ? ret : kvevents_group_replay(ev, group, endpoint);
}

int kvt_quota_stats(struct kvt_store *s, uint32_t group, kvt_stats_fn fn, void *ctx)
{
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (group == 0 || group >= KVT_QUOTA_GROUPS)
		return KVT_EOPTVAL;
	quota_group_stats(&s->quota, group, fn, ctx);
	if (s->events)
		kvevents_group_stats(s->events, group, fn, ctx);
	return 0;
}

/* ------------------------------------------------------------------------
 * Validation
 */

int key_check(const struct kvt_key *k)
{
	return k->len >= 1 && k->len <= KVT_KEY_MAX ? 0 : KVT_EKEYLEN;
}

#define KVT_F_ALL (KVT_F_PART | KVT_F_RANGE | KVT_F_CRC | KVT_F_VERIFY | KVT_F_DEFER | \
		   KVT_F_SEALED | KVT_F_QUIET | KVT_F_PROMPT | KVT_F_NOWAIT | KVT_F_RETAIN | \
		   KVT_F_REPAIR | KVT_F_DELETES | KVT_F_ERRORS)

int req_check(struct kvt_store *s, const struct kvt_req *r)
{
	uint64_t total = 0;
	int ret;

	if (r->op < KVT_OP_PUT || r->op >= KVT_OP__COUNT || (r->flags & ~KVT_F_ALL))
		return KVT_EBADOP;
	if ((r->flags & (KVT_F_PART | KVT_F_RANGE | KVT_F_VERIFY)) && r->op != KVT_OP_GET)
		return KVT_EBADOP;
	if ((r->flags & (KVT_F_CRC | KVT_F_SEALED)) && r->op != KVT_OP_PUT)
		return KVT_EBADOP;
	if ((r->flags & KVT_F_QUIET) && r->op != KVT_OP_GET_PINNED &&
	    !(r->op == KVT_OP_GET && (r->flags & KVT_F_PART)))
		return KVT_EBADOP; /* quiet: pinned gets, and part gets */
	if ((r->flags & (KVT_F_NOWAIT | KVT_F_RETAIN | KVT_F_REPAIR)) && r->op != KVT_OP_PUT)
		return KVT_EBADOP;
	if ((r->flags & KVT_F_DELETES) && r->op != KVT_OP_FLUSH)
		return KVT_EBADOP;
	if ((r->flags & KVT_F_ERRORS) && r->op != KVT_OP_EXISTS)
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
	case KVT_OP_ROOM:
		return 0;
	}
	return KVT_EBADOP;
}

/* ------------------------------------------------------------------------
 * Queues and submission
 */

static bool req_deferred(const struct kvt_req *r)
{
	return (r->flags & KVT_F_DEFER) || r->op == KVT_OP_PREFETCH || r->op == KVT_OP_FLUSH;
}

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
	void *plugged[STORE_TIERS_MAX]; /* what each tier's plug returned (n > 1) */
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
	for (unsigned t = 0; n > 1 && t < s->tier_count; t++)
		plugged[t] = s->tiers[t].ops->plug ? s->tiers[t].ops->plug(s->tiers[t].t) : NULL;
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
	for (unsigned t = 0; n > 1 && t < s->tier_count; t++)
		if (s->tiers[t].ops->unplug)
			s->tiers[t].ops->unplug(s->tiers[t].t, plugged[t]);
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
		uint64_t t0 = kvt_now_ns();
		int waited;
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
		waited = (int)((kvt_now_ns() - t0) / 1000000u);
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

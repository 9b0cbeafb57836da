/*
 * ttier.c - the test-only tier (ttier.h): a tier.h implementation that
 * lives outside lib/ and reaches the store only through
 * store_tier_register, and DRAM only through dram.h's lower-tier calls.
 *
 * Blocks live in a list under one mutex (tests hold a few).  With
 * latency_us > 0 every answer is queued to the tier's one thread, which
 * sleeps until each is due; stop answers what is still queued and joins.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dram.h"
#include "kvt_int.h"
#include "tier.h"
#include "ttier.h"

struct tblock {
	struct tblock *next;
	uint32_t ns;
	struct kvt_key key;
	uint64_t len;
	uint8_t *bytes;
};

enum { TASK_GET, TASK_EXISTS, TASK_LOOKUP, TASK_DONE };

struct ttask {
	struct ttask *next;
	int kind;
	uint64_t due_ns;
	uint32_t ns;
	struct kvt_key key;
	const struct kvt_key *keys; /* lookup: the caller's, valid until done */
	uint32_t from, n;
	uint8_t *tiers;
	tier_got_fn got;
	tier_done_fn done;
	void *ctx;
	struct tier_result res;     /* TASK_DONE: what to answer */
};

struct ttier {
	struct ttier_conf *conf;
	struct dram *dram;
	pthread_mutex_t lock;        /* blocks, tasks, stop */
	pthread_cond_t cond;
	struct tblock *blocks;
	struct ttask *head, *tail;
	bool stop;
	pthread_t thread;
};

/* conf -> its open tier, for ttier_hold (tests open one store at a time
 * per conf). */
struct ttier_link {
	struct ttier_conf *conf;
	struct ttier *t;
};
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ttier_link links[16];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct tblock *tfind(struct ttier *t, uint32_t ns, const struct kvt_key *key)
{
	for (struct tblock *b = t->blocks; b; b = b->next)
		if (b->ns == ns && b->key.len == key->len &&
		    memcmp(b->key.bytes, key->bytes, key->len) == 0)
			return b;
	return NULL;
}

static bool tholds(struct ttier *t, uint32_t ns, const struct kvt_key *key)
{
	bool held;
	if (atomic_load(&t->conf->miss))
		return false;
	pthread_mutex_lock(&t->lock);
	held = tfind(t, ns, key) != NULL;
	pthread_mutex_unlock(&t->lock);
	return held;
}

static int tadd(struct ttier *t, uint32_t ns, const struct kvt_key *key, const struct iovec *v,
		unsigned vc, uint64_t len)
{
	struct tblock *b = calloc(1, sizeof(*b));
	uint64_t off = 0;
	if (!b || !(b->bytes = malloc(len ? len : 1))) {
		free(b);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < vc && off < len; i++) {
		uint64_t n = v[i].iov_len < len - off ? v[i].iov_len : len - off;
		memcpy(b->bytes + off, v[i].iov_base, n);
		off += n;
	}
	b->ns = ns;
	b->key = *key;
	b->len = len;
	pthread_mutex_lock(&t->lock);
	if (tfind(t, ns, key)) {
		pthread_mutex_unlock(&t->lock);
		free(b->bytes);
		free(b);
		return KVT_EXISTS;
	}
	b->next = t->blocks;
	t->blocks = b;
	pthread_mutex_unlock(&t->lock);
	return KVT_OK;
}

/* Promote a held block into DRAM; calls got exactly once. */
static void tpromote(struct ttier *t, uint32_t ns, const struct kvt_key *key, tier_got_fn got,
		     void *ctx)
{
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *item;
	struct tblock *b;
	unsigned vc = 0;
	uint64_t off = 0;
	int ret;

	pthread_mutex_lock(&t->lock);
	b = atomic_load(&t->conf->miss) ? NULL : tfind(t, ns, key);
	if (!b) {
		pthread_mutex_unlock(&t->lock);
		got(ctx, KVT_MISS, NULL);
		return;
	}
	ret = dram_reserve(t->dram, ns, key, b->len, NULL, 1, &item, view, &vc);
	if (ret != KVT_OK) {
		pthread_mutex_unlock(&t->lock);
		got(ctx, ret == KVT_EXISTS ? KVT_EXISTS : KVT_MISS, NULL);
		return;
	}
	for (unsigned i = 0; i < vc && off < b->len; i++) {
		uint64_t n = view[i].iov_len < b->len - off ? view[i].iov_len : b->len - off;
		memcpy(view[i].iov_base, b->bytes + off, n);
		off += n;
	}
	pthread_mutex_unlock(&t->lock);
	ret = dram_publish(t->dram, item, NULL, NULL, DRAM_ON_LOWER | DRAM_PROMOTED, true);
	if (ret != KVT_OK) {
		got(ctx, KVT_MISS, NULL);
		return;
	}
	atomic_fetch_add(&t->conf->hits, 1);
	got(ctx, KVT_OK, item);
}

static uint64_t tlookup(struct ttier *t, uint32_t ns, const struct kvt_key *keys, uint32_t from,
			uint32_t n, uint8_t *tiers)
{
	uint64_t count = 0;
	for (uint32_t i = from; i < n && tholds(t, ns, &keys[i]); i++) {
		if (tiers)
			tiers[i] = (uint8_t)(t->conf->id ? t->conf->id : 5);
		count++;
	}
	return count;
}

static void trun(struct ttier *t, struct ttask *k)
{
	int fail = atomic_load(&t->conf->fail);
	struct tier_result res = k->res;
	switch (k->kind) {
	case TASK_GET:
		if (fail < 0)
			k->got(k->ctx, fail, NULL);
		else
			tpromote(t, k->ns, &k->key, k->got, k->ctx);
		break;
	case TASK_EXISTS:
		res.status = fail < 0 ? fail : tholds(t, k->ns, &k->key) ? KVT_OK : KVT_MISS;
		k->done(k->ctx, &res);
		break;
	case TASK_LOOKUP:
		res.status = fail < 0 ? fail : KVT_OK;
		res.count = fail < 0 ? 0 : tlookup(t, k->ns, k->keys, k->from, k->n, k->tiers);
		k->done(k->ctx, &res);
		break;
	default:
		k->done(k->ctx, &res);
		break;
	}
	free(k);
}

static void *tthread(void *arg)
{
	struct ttier *t = arg;
	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct ttask *k = t->head;
		uint64_t now;
		if (!k) {
			if (t->stop)
				break;
			pthread_cond_wait(&t->cond, &t->lock);
			continue;
		}
		now = now_ns();
		if (k->due_ns > now && !t->stop) {
			struct timespec ts;
			uint64_t wait = k->due_ns - now;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait / 1000000000u);
			ts.tv_nsec += (long)(wait % 1000000000u);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&t->cond, &t->lock, &ts);
			continue;
		}
		t->head = k->next;
		if (!t->head)
			t->tail = NULL;
		pthread_mutex_unlock(&t->lock);
		trun(t, k);
		atomic_fetch_sub(&t->conf->pending, 1);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* Queue k to answer after latency_us: TIER_PENDING, or -ENOMEM / -ESHUTDOWN. */
static int tqueue(struct ttier *t, struct ttask *k)
{
	if (!k)
		return -ENOMEM;
	k->due_ns = now_ns() + (uint64_t)atomic_load(&t->conf->latency_us) * 1000u;
	pthread_mutex_lock(&t->lock);
	if (t->stop) {
		pthread_mutex_unlock(&t->lock);
		free(k);
		return -ESHUTDOWN;
	}
	atomic_fetch_add(&t->conf->pending, 1);
	if (t->tail)
		t->tail->next = k;
	else
		t->head = k;
	t->tail = k;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	return TIER_PENDING;
}

static bool tasync(struct ttier *t)
{
	return atomic_load(&t->conf->latency_us) > 0;
}

static int topen(void **out, const struct tier_env *env, void *arg)
{
	struct ttier *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->conf = arg;
	t->dram = env->dram;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	if (pthread_create(&t->thread, NULL, tthread, t) != 0) {
		free(t);
		return -EAGAIN;
	}
	pthread_mutex_lock(&links_lock);
	for (unsigned i = 0; i < 16; i++) {
		if (!links[i].conf || links[i].conf == t->conf) {
			links[i].conf = t->conf;
			links[i].t = t;
			break;
		}
	}
	pthread_mutex_unlock(&links_lock);
	*out = t;
	return 0;
}

static void tstop(void *p)
{
	struct ttier *t = p;
	pthread_mutex_lock(&t->lock);
	t->stop = true; /* queued answers run now, not when due */
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
}

static void tfree(void *p)
{
	struct ttier *t = p;
	pthread_mutex_lock(&links_lock);
	for (unsigned i = 0; i < 16; i++)
		if (links[i].t == t)
			links[i].conf = NULL, links[i].t = NULL;
	pthread_mutex_unlock(&links_lock);
	while (t->blocks) {
		struct tblock *b = t->blocks;
		t->blocks = b->next;
		free(b->bytes);
		free(b);
	}
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t);
}

static int tget(void *p, const struct tier_key *k, int prio, tier_got_fn got, void *ctx)
{
	struct ttier *t = p;
	int fail = atomic_load(&t->conf->fail);
	KVT_UNUSED(prio);
	atomic_fetch_add(&t->conf->gets, 1);
	if (tasync(t)) {
		struct ttask *tk = calloc(1, sizeof(*tk));
		if (tk) {
			tk->kind = TASK_GET;
			tk->ns = k->ns;
			tk->key = *k->key;
			tk->got = got;
			tk->ctx = ctx;
		}
		return tqueue(t, tk);
	}
	if (fail < 0)
		return fail;
	if (!tholds(t, k->ns, k->key))
		return KVT_MISS;
	tpromote(t, k->ns, k->key, got, ctx); /* got runs before we return */
	return TIER_PENDING;
}

static int texists(void *p, const struct tier_key *k, tier_done_fn done, void *ctx)
{
	struct ttier *t = p;
	int fail = atomic_load(&t->conf->fail);
	atomic_fetch_add(&t->conf->exists, 1);
	if (tasync(t)) {
		struct ttask *tk = calloc(1, sizeof(*tk));
		if (tk) {
			tk->kind = TASK_EXISTS;
			tk->ns = k->ns;
			tk->key = *k->key;
			tk->done = done;
			tk->ctx = ctx;
		}
		return tqueue(t, tk);
	}
	if (fail < 0)
		return fail;
	return tholds(t, k->ns, k->key) ? KVT_OK : KVT_MISS;
}

static int tlookup_op(void *p, uint32_t ns, const struct kvt_key *keys, uint32_t from, uint32_t n,
		      uint8_t *tiers, tier_done_fn done, void *ctx)
{
	struct ttier *t = p;
	int fail = atomic_load(&t->conf->fail);
	struct tier_result res = { .status = KVT_OK };
	atomic_fetch_add(&t->conf->lookups, 1);
	if (tasync(t)) {
		struct ttask *tk = calloc(1, sizeof(*tk));
		if (tk) {
			tk->kind = TASK_LOOKUP;
			tk->ns = ns;
			tk->keys = keys;
			tk->from = from;
			tk->n = n;
			tk->tiers = tiers;
			tk->done = done;
			tk->ctx = ctx;
		}
		return tqueue(t, tk);
	}
	if (fail < 0)
		return fail;
	res.count = tlookup(t, ns, keys, from, n, tiers);
	done(ctx, &res);
	return TIER_PENDING;
}

/* A put reached DRAM: copy it, through a quiet ref on the DRAM block. */
static void tput_down(void *p, uint32_t ns, const struct kvt_key *key)
{
	struct ttier *t = p;
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *item;
	uint64_t len;
	unsigned vc;
	if (!t->conf->hold_puts || dram_ref_quiet(t->dram, ns, key, &item) != KVT_OK)
		return;
	vc = dram_item_view(t->dram, item, view, &len);
	if (tadd(t, ns, key, view, vc, len) == KVT_OK)
		atomic_fetch_add(&t->conf->puts, 1);
	dram_unpin(t->dram, item);
}

static int tdel(void *p, void *prepared, const struct tier_key *k, tier_done_fn done, void *ctx)
{
	struct ttier *t = p;
	int fail = atomic_load(&t->conf->fail), ret = KVT_MISS;
	KVT_UNUSED(prepared);
	atomic_fetch_add(&t->conf->dels, 1);
	if (fail >= 0) {
		pthread_mutex_lock(&t->lock);
		for (struct tblock **pp = &t->blocks; *pp; pp = &(*pp)->next) {
			struct tblock *b = *pp;
			if (b->ns == k->ns && b->key.len == k->key->len &&
			    memcmp(b->key.bytes, k->key->bytes, b->key.len) == 0) {
				*pp = b->next;
				free(b->bytes);
				free(b);
				ret = KVT_OK;
				break;
			}
		}
		pthread_mutex_unlock(&t->lock);
	} else {
		ret = fail;
	}
	if (tasync(t)) {
		struct ttask *tk = calloc(1, sizeof(*tk));
		if (tk) {
			tk->kind = TASK_DONE;
			tk->res.status = ret;
			tk->done = done;
			tk->ctx = ctx;
		}
		return tqueue(t, tk);
	}
	return ret;
}

static int64_t tclear(void *p, void *prepared, uint32_t ns, tier_done_fn done, void *ctx)
{
	struct ttier *t = p;
	int fail = atomic_load(&t->conf->fail);
	int64_t n = 0;
	KVT_UNUSED(prepared);
	atomic_fetch_add(&t->conf->clears, 1);
	if (fail >= 0) {
		pthread_mutex_lock(&t->lock);
		for (struct tblock **pp = &t->blocks; *pp;) {
			struct tblock *b = *pp;
			if (ns == KVT_NS_ALL || b->ns == ns) {
				*pp = b->next;
				free(b->bytes);
				free(b);
				n++;
			} else {
				pp = &b->next;
			}
		}
		pthread_mutex_unlock(&t->lock);
	}
	if (tasync(t)) {
		struct ttask *tk = calloc(1, sizeof(*tk));
		if (tk) {
			tk->kind = TASK_DONE;
			tk->res.status = fail < 0 ? fail : KVT_OK;
			tk->res.count = (uint64_t)n;
			tk->done = done;
			tk->ctx = ctx;
		}
		return tqueue(t, tk);
	}
	return fail < 0 ? fail : n;
}

static void tstats(void *p, kvt_stats_fn fn, void *ctx)
{
	struct ttier *t = p;
	fn(ctx, "ttier.gets", atomic_load(&t->conf->gets), NULL);
	fn(ctx, "ttier.hits", atomic_load(&t->conf->hits), NULL);
	fn(ctx, "ttier.blocks", ttier_count(t->conf), NULL);
}

#define TTIER_OPS(nm)                                                                     \
	{                                                                                 \
		.name = nm, .id = 5, .flags = TIER_ASYNC_GET | TIER_ASYNC_ALL,            \
		.open = topen, .stop = tstop, .free = tfree, .get = tget,                 \
		.exists = texists, .lookup = tlookup_op, .put_down = tput_down,           \
		.del = tdel, .clear = tclear, .stats = tstats,                            \
	}

const struct tier_ops ttier_ops = TTIER_OPS("ttier");

static struct tier_ops named_ops[4];
static char names[4][32];

const struct tier_ops *ttier_ops_named(const char *name)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct tier_ops *o = NULL;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < 4; i++) {
		if (names[i][0] && strcmp(names[i], name) == 0) {
			o = &named_ops[i];
			break;
		}
		if (!names[i][0]) {
			snprintf(names[i], sizeof(names[i]), "%s", name);
			named_ops[i] = ttier_ops;
			named_ops[i].name = names[i];
			o = &named_ops[i];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return o;
}

int ttier_add_ops(struct kvt_store *s, const struct tier_ops *ops, struct ttier_conf *conf)
{
	return store_tier_register(s, ops, conf);
}

int ttier_add(struct kvt_store *s, struct ttier_conf *conf)
{
	return ttier_add_ops(s, &ttier_ops, conf);
}

static struct ttier *tof(struct ttier_conf *conf)
{
	struct ttier *t = NULL;
	pthread_mutex_lock(&links_lock);
	for (unsigned i = 0; i < 16; i++)
		if (links[i].conf == conf)
			t = links[i].t;
	pthread_mutex_unlock(&links_lock);
	return t;
}

int ttier_hold(struct ttier_conf *conf, uint32_t ns, const struct kvt_key *key, const void *buf,
	       uint64_t len)
{
	struct ttier *t = tof(conf);
	struct iovec v = { (void *)buf, len };
	return t ? tadd(t, ns, key, &v, 1, len) : KVT_ESTATE;
}

uint64_t ttier_count(struct ttier_conf *conf)
{
	struct ttier *t = tof(conf);
	uint64_t n = 0;
	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	for (struct tblock *b = t->blocks; b; b = b->next)
		n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

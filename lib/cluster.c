/*
 * cluster.c - the remote tier over several kvtierd: routes each operation
 * to the members that place its block's group, fans multi-member
 * operations out in parallel and merges their answers (cluster.h says
 * what each promises, doc/cluster.md how to run a pod).
 *
 * Owns: the members (a remote.c tier each: its own thread, connections,
 * namespace registrations, deadlines and backoff), the placement over
 * them (placement.c), the anchor memory (key -> its group's anchor,
 * learned from lookups and prefetches), and the fan-out records of
 * operations that span members.
 *
 * Fan-out.  An operation that goes to several members (a put of a hot
 * block, a lookup whose groups live on several nodes, delete, clear) gets
 * a record with a count of answers outstanding, plus one held by the
 * submitter while it submits:
 *
 *     submitter: left = k + 1 --- submit 1..k ---+--- drop its own --> last?
 *     member threads:           answer 1..k  ----+--> each drops one --> last?
 *
 * Whoever drops the last completes the caller's callback, so it runs
 * exactly once, after every member answered or failed at the call.  If
 * every member failed at the call the record is freed and the call
 * returns the error (the callback never runs), as remote_* do.
 *
 * Anchor memory: a table of (key fingerprint, anchor, hot bit) in buckets
 * of four slots, a full bucket overwriting one of them, under one mutex.  A stale or colliding
 * entry places a key on the wrong member: a miss, never wrong bytes (the
 * server checks the whole key).
 *
 * Threads and locks: members' states (remote_is_down) are read with
 * atomics; alock guards the anchor table; everything else is immutable
 * after cluster_open, or owned by one fan-out record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cluster.h"
#include "placement.h"

struct cmember {
	char *addr;                  /* kvt_mem_strdup: the entry's address text */
	uint32_t weight;
	struct remote *rm;
};

struct anchor_slot {
	uint64_t fp;                 /* key fingerprint | ANCHOR_USED | hot bit; 0: empty */
	uint64_t anchor;
};
#define ANCHOR_HOT 1u
#define ANCHOR_USED 2u
#define ANCHOR_WAYS 4u                /* slots per bucket */

struct cluster {
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	struct cmember *m;
	unsigned n;
	struct placement *pl;        /* n > 1 only */
	unsigned group;              /* blocks per group */
	unsigned hot;                /* replicas of a prompt's first group, <= n */

	pthread_mutex_t alock;
	struct anchor_slot *slots;   /* alock; anchor_slots entries, or NULL */
	uint32_t slot_count;

	_Atomic uint64_t rr;         /* rotation over hot replicas */
	_Atomic uint64_t c_known, c_unknown, c_hinted, c_replica_retries, c_fanouts, c_skipped;
};

#define A(c) atomic_fetch_add_explicit(&(c), 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Placement of keys
 */

static uint64_t anchor_fp(const struct kvt_key *key)
{
	return XXH3_64bits_withSeed(key->bytes, key->len, 0x6b767469657221ull);
}

/* The key's bucket: ANCHOR_WAYS slots. */
static struct anchor_slot *anchor_bucket(struct cluster *cl, uint64_t fp)
{
	return &cl->slots[(fp % (cl->slot_count / ANCHOR_WAYS)) * ANCHOR_WAYS];
}

static void anchor_note_locked(struct cluster *cl, const struct kvt_key *key, uint64_t anchor,
			       bool hot)
{
	uint64_t fp = anchor_fp(key), tag = (fp & ~(uint64_t)3) | ANCHOR_USED;
	struct anchor_slot *b = anchor_bucket(cl, fp), *sl = NULL;
	/* The key's own slot, else a free one, else one chosen by the hash
	 * (a cache: the entry it replaces is forgotten). */
	for (unsigned i = 0; i < ANCHOR_WAYS && !sl; i++)
		if ((b[i].fp & ~(uint64_t)ANCHOR_HOT) == tag)
			sl = &b[i];
	for (unsigned i = 0; i < ANCHOR_WAYS && !sl; i++)
		if (!b[i].fp)
			sl = &b[i];
	if (!sl)
		sl = &b[(fp >> 40) % ANCHOR_WAYS];
	sl->fp = tag | (hot ? ANCHOR_HOT : 0);
	sl->anchor = anchor;
}

static bool anchor_find(struct cluster *cl, const struct kvt_key *key, uint64_t *anchor,
			bool *hot)
{
	uint64_t fp, tag;
	struct anchor_slot *b;
	bool found = false;
	if (!cl->slots)
		return false;
	fp = anchor_fp(key);
	tag = (fp & ~(uint64_t)3) | ANCHOR_USED;
	b = anchor_bucket(cl, fp);
	pthread_mutex_lock(&cl->alock);
	for (unsigned i = 0; i < ANCHOR_WAYS && !found; i++)
		if ((b[i].fp & ~(uint64_t)ANCHOR_HOT) == tag) {
			*anchor = b[i].anchor;
			*hot = (b[i].fp & ANCHOR_HOT) != 0;
			found = true;
		}
	pthread_mutex_unlock(&cl->alock);
	return found;
}

/* Group g's anchor in the prompt keys[]. */
static uint64_t group_anchor(const struct cluster *cl, const struct kvt_key *keys, uint32_t g)
{
	return placement_key_hash(&keys[(size_t)g * cl->group]);
}

/* The members holding the group named by anchor, best first, live ones
 * before those that are down.  Returns how many (1..hot). */
static unsigned cluster_rank(struct cluster *cl, uint64_t anchor, bool hot, unsigned *out)
{
	bool skip[PLACEMENT_MEMBERS_MAX];
	bool any = false;
	for (unsigned i = 0; i < cl->n; i++)
		any |= skip[i] = remote_is_down(cl->m[i].rm);
	if (any)
		A(cl->c_skipped);
	return placement_rank(cl->pl, anchor, any ? skip : NULL, out, hot ? cl->hot : 1);
}

/* Where a single key goes: the hint, else the anchor memory, else itself. */
static unsigned cluster_place(struct cluster *cl, const struct kvt_key *key,
			      const struct cluster_hint *hint, unsigned *out)
{
	uint64_t anchor;
	bool hot = false;
	if (hint && hint->keys) {
		uint32_t g = hint->pos / cl->group;
		anchor = group_anchor(cl, hint->keys, g);
		hot = g == 0;
		A(cl->c_hinted);
	} else if (anchor_find(cl, key, &anchor, &hot)) {
		A(cl->c_known);
	} else {
		anchor = placement_key_hash(key);
		A(cl->c_unknown);
	}
	return cluster_rank(cl, anchor, hot, out);
}

void cluster_note_prompt(struct cluster *cl, const struct kvt_key *keys, uint32_t n)
{
	if (cl->n == 1 || !cl->slots)
		return;
	/* One lock for the prompt: a lookup of 65536 keys takes it once. */
	pthread_mutex_lock(&cl->alock);
	for (uint32_t g = 0; (uint64_t)g * cl->group < n; g++) {
		uint64_t anchor = group_anchor(cl, keys, g);
		uint32_t end = (g + 1) * cl->group < n ? (g + 1) * cl->group : n;
		for (uint32_t i = g * cl->group; i < end; i++)
			anchor_note_locked(cl, &keys[i], anchor, g == 0);
	}
	pthread_mutex_unlock(&cl->alock);
}

/* ------------------------------------------------------------------------
 * Fan-out records
 */

struct fan {
	struct cluster *cl;
	_Atomic unsigned left;       /* answers outstanding, + 1 while submitting */
	_Atomic unsigned flags;      /* FAN_*: what the answers were */
	_Atomic int err;             /* the first error, or 0 */
	_Atomic uint64_t count;      /* CLEAR: sum of removed */
	remote_cb cb;
	void *ctx;
	size_t size;                 /* of this allocation */
};
#define FAN_OK 1u
#define FAN_EXISTS 2u
#define FAN_MISS 4u
#define FAN_SUBMITTED 8u

static struct fan *fan_new(struct cluster *cl, size_t size, remote_cb cb, void *ctx)
{
	struct fan *f = kvt_mem_calloc(cl->mem, 1, size);
	if (!f)
		return NULL;
	f->cl = cl;
	f->size = size;
	f->cb = cb;
	f->ctx = ctx;
	atomic_init(&f->left, 1);
	A(cl->c_fanouts);
	return f;
}

static void fan_note(struct fan *f, int status, uint64_t count)
{
	unsigned fl = status == KVT_OK ? FAN_OK : status == KVT_EXISTS ? FAN_EXISTS
			      : status == KVT_MISS ? FAN_MISS : 0;
	int zero = 0;
	if (fl)
		atomic_fetch_or(&f->flags, fl);
	else
		atomic_compare_exchange_strong(&f->err, &zero, status);
	atomic_fetch_add(&f->count, count);
}

/* Put, delete, clear: OK if any member did it, then EXISTS (put), then an
 * error (delete, clear: any error wins: the block may still be there),
 * then MISS. */
static void fan_finish(struct fan *f, bool error_wins)
{
	struct remote_result res = { 0 };
	unsigned fl = atomic_load(&f->flags);
	int err = atomic_load(&f->err);
	res.count = atomic_load(&f->count);
	if (error_wins && err)
		res.status = err;
	else if (fl & FAN_OK)
		res.status = KVT_OK;
	else if (fl & FAN_EXISTS)
		res.status = KVT_EXISTS;
	else if (err)
		res.status = err;
	else
		res.status = KVT_MISS;
	f->cb(f->ctx, &res);
}

/* Drop one reference; the last completes.  Returns true if it did. */
static bool fan_drop(struct fan *f, bool error_wins)
{
	if (atomic_fetch_sub(&f->left, 1) != 1)
		return false;
	fan_finish(f, error_wins);
	kvt_mem_free(f->cl->mem, f, f->size);
	return true;
}

/* The submitter is done: 0 if the callback ran or will run, else the
 * error every member failed with (nothing runs; the record is freed). */
static int fan_submitted(struct fan *f, bool error_wins, int first_err)
{
	if (!(atomic_load(&f->flags) & FAN_SUBMITTED)) {
		/* No member took it: nobody else holds a reference. */
		kvt_mem_free(f->cl->mem, f, f->size);
		return first_err ? first_err : -ENOTCONN;
	}
	fan_drop(f, error_wins);
	return 0;
}

static void fan_put_done(void *ctx, const struct remote_result *res)
{
	struct fan *f = ctx;
	fan_note(f, res->status, 0);
	fan_drop(f, false);
}

static void fan_del_done(void *ctx, const struct remote_result *res)
{
	struct fan *f = ctx;
	fan_note(f, res->status, res->count);
	fan_drop(f, true);
}

/* ------------------------------------------------------------------------
 * Single-key operations
 */

/* A get or exists over replicas: try each in turn until one hits. */
struct ctry {
	struct cluster *cl;
	bool exists;
	uint32_t ns;
	const struct kvt_key *key;   /* the caller's, valid until the callback */
	unsigned owners[REMOTE_HOT_REPLICAS_MAX];
	unsigned count, start, tried;
	remote_get_cb gcb;
	remote_cb cb;
	void *ctx;
};

static void ctry_get_done(void *ctx, int status, struct dram_item *item);
static void ctry_exists_done(void *ctx, const struct remote_result *res);

/* Submit to the next replica.  0: submitted; else the last error. */
static int ctry_next(struct ctry *t)
{
	int ret = -ENOTCONN;
	while (t->tried < t->count) {
		struct remote *rm = t->cl->m[t->owners[(t->start + t->tried) % t->count]].rm;
		t->tried++;
		ret = t->exists ? remote_exists(rm, t->ns, t->key, ctry_exists_done, t)
				: remote_get(rm, t->ns, t->key, ctry_get_done, t);
		if (ret == 0)
			return 0;
	}
	return ret;
}

static void ctry_get_done(void *ctx, int status, struct dram_item *item)
{
	struct ctry *t = ctx;
	struct cluster *cl = t->cl;
	if (status != KVT_OK && t->tried < t->count) {
		A(cl->c_replica_retries);
		if (ctry_next(t) == 0)
			return;
	}
	t->gcb(t->ctx, status, item);
	kvt_mem_free(cl->mem, t, sizeof(*t));
}

static void ctry_exists_done(void *ctx, const struct remote_result *res)
{
	struct ctry *t = ctx;
	struct cluster *cl = t->cl;
	if (res->status != KVT_OK && t->tried < t->count) {
		A(cl->c_replica_retries);
		if (ctry_next(t) == 0)
			return;
	}
	t->cb(t->ctx, res);
	kvt_mem_free(cl->mem, t, sizeof(*t));
}

static int ctry_start(struct cluster *cl, bool exists, uint32_t ns, const struct kvt_key *key,
		      const unsigned *owners, unsigned count, remote_get_cb gcb, remote_cb cb,
		      void *ctx)
{
	struct ctry *t = kvt_mem_calloc(cl->mem, 1, sizeof(*t));
	int ret;
	if (!t)
		return -ENOMEM;
	t->cl = cl;
	t->exists = exists;
	t->ns = ns;
	t->key = key;
	memcpy(t->owners, owners, count * sizeof(*owners));
	t->count = count;
	t->start = (unsigned)(atomic_fetch_add_explicit(&cl->rr, 1, memory_order_relaxed) % count);
	t->gcb = gcb;
	t->cb = cb;
	t->ctx = ctx;
	ret = ctry_next(t);
	if (ret != 0)
		kvt_mem_free(cl->mem, t, sizeof(*t));
	return ret;
}

int cluster_get(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, remote_get_cb cb, void *ctx)
{
	unsigned owners[REMOTE_HOT_REPLICAS_MAX], k;
	if (cl->n == 1)
		return remote_get(cl->m[0].rm, ns, key, cb, ctx);
	k = cluster_place(cl, key, hint, owners);
	if (k == 1)
		return remote_get(cl->m[owners[0]].rm, ns, key, cb, ctx);
	return ctry_start(cl, false, ns, key, owners, k, cb, NULL, ctx);
}

int cluster_exists(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		   const struct cluster_hint *hint, remote_cb cb, void *ctx)
{
	unsigned owners[REMOTE_HOT_REPLICAS_MAX], k;
	if (cl->n == 1)
		return remote_exists(cl->m[0].rm, ns, key, cb, ctx);
	k = cluster_place(cl, key, hint, owners);
	if (k == 1)
		return remote_exists(cl->m[owners[0]].rm, ns, key, cb, ctx);
	return ctry_start(cl, true, ns, key, owners, k, NULL, cb, ctx);
}

int cluster_put(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, const struct iovec *parts, unsigned part_count,
		const uint32_t *crcs, bool sealed, remote_cb cb, void *ctx)
{
	unsigned owners[REMOTE_HOT_REPLICAS_MAX], k;
	struct fan *f;
	int first_err = 0;

	if (cl->n == 1)
		return remote_put(cl->m[0].rm, ns, key, parts, part_count, crcs, sealed, cb, ctx);
	k = cluster_place(cl, key, hint, owners);
	if (k == 1)
		return remote_put(cl->m[owners[0]].rm, ns, key, parts, part_count, crcs, sealed,
				  cb, ctx);
	/* A hot block: written through to each replica. */
	f = fan_new(cl, sizeof(*f), cb, ctx);
	if (!f)
		return -ENOMEM;
	for (unsigned i = 0; i < k; i++) {
		int ret;
		atomic_fetch_add(&f->left, 1);
		ret = remote_put(cl->m[owners[i]].rm, ns, key, parts, part_count, crcs, sealed,
				 fan_put_done, f);
		if (ret == 0) {
			atomic_fetch_or(&f->flags, FAN_SUBMITTED);
		} else {
			atomic_fetch_sub(&f->left, 1);
			if (!first_err)
				first_err = ret;
		}
	}
	return fan_submitted(f, false, first_err);
}

/* delete and clear reach every member: a block may sit off its placement
 * (placed while its anchor was unknown, or while a member was down), and
 * a delete must win wherever it is. */
int cluster_delete(struct cluster *cl, uint32_t ns, const struct kvt_key *key, remote_cb cb,
		   void *ctx)
{
	struct fan *f;
	int first_err = 0;
	if (cl->n == 1)
		return remote_delete(cl->m[0].rm, ns, key, cb, ctx);
	f = fan_new(cl, sizeof(*f), cb, ctx);
	if (!f)
		return -ENOMEM;
	for (unsigned i = 0; i < cl->n; i++) {
		int ret;
		atomic_fetch_add(&f->left, 1);
		ret = remote_delete(cl->m[i].rm, ns, key, fan_del_done, f);
		if (ret == 0) {
			atomic_fetch_or(&f->flags, FAN_SUBMITTED);
		} else {
			atomic_fetch_sub(&f->left, 1);
			fan_note(f, ret, 0); /* a member that is down did not delete */
			if (!first_err)
				first_err = ret;
		}
	}
	return fan_submitted(f, true, first_err);
}

int cluster_clear(struct cluster *cl, uint32_t ns, remote_cb cb, void *ctx)
{
	struct fan *f;
	int first_err = 0;
	if (cl->n == 1)
		return remote_clear(cl->m[0].rm, ns, cb, ctx);
	f = fan_new(cl, sizeof(*f), cb, ctx);
	if (!f)
		return -ENOMEM;
	for (unsigned i = 0; i < cl->n; i++) {
		int ret;
		atomic_fetch_add(&f->left, 1);
		ret = remote_clear(cl->m[i].rm, ns, fan_del_done, f);
		if (ret == 0) {
			atomic_fetch_or(&f->flags, FAN_SUBMITTED);
		} else {
			atomic_fetch_sub(&f->left, 1);
			fan_note(f, ret, 0);
			if (!first_err)
				first_err = ret;
		}
	}
	return fan_submitted(f, true, first_err);
}

/* ------------------------------------------------------------------------
 * Lookups over members
 *
 * keys[from..n) are cut into runs: a run is consecutive groups with the
 * same (single) owner, or the first group on one of its replicas (one run
 * per replica, same range).  Each run is one LOOKUP to its member, all in
 * parallel; when the last answers, the ranges are walked in order: a full
 * range adds its length and goes on, a partial one adds its hits and
 * stops (for replicas of one range, the best answer counts).
 *
 *   prompt  | g0 (hot) | g1 | g2 | g3 | g4 |
 *   runs    | A  /  C  | B       | A  | B  |      (g1, g2 both on B)
 *   hits    | 16 / 16  | 32      | 7  | 16 |  ->  16 + 32 + 7 = 55
 */

struct crun {
	struct clook *lk;
	uint32_t from, count;        /* keys[from .. from + count) */
	unsigned member;
	bool alt;                    /* another replica of the previous run's range */
	bool replicated;             /* one of a hot group's replicas: never extended */
	_Atomic uint64_t hits;       /* written by the member's thread */
	_Atomic uint64_t load_ns;
};

struct clook {
	struct fan f;                /* counts answers; cb, ctx */
	uint8_t *tiers;
	uint32_t from, n;
	unsigned run_count;
	struct crun runs[];
};

static void clook_finish(struct clook *lk)
{
	struct remote_result res = { .status = KVT_OK };
	uint64_t total = 0, load = 0;
	for (unsigned i = 0; i < lk->run_count;) {
		uint64_t best = 0, best_load = 0;
		unsigned j = i;
		do {
			uint64_t h = atomic_load(&lk->runs[j].hits);
			if (h > best || j == i) {
				best = h;
				best_load = atomic_load(&lk->runs[j].load_ns);
			}
			j++;
		} while (j < lk->run_count && lk->runs[j].alt);
		total += best;
		load += best_load;
		if (best < lk->runs[i].count)
			break;
		i = j;
	}
	if (lk->tiers) {
		memset(lk->tiers + lk->from, KVT_TIER_REMOTE, total);
		memset(lk->tiers + lk->from + total, KVT_TIER_NONE, lk->n - lk->from - total);
	}
	res.count = total;
	res.load_ns = load;
	lk->f.cb(lk->f.ctx, &res);
}

static void clook_drop(struct clook *lk)
{
	if (atomic_fetch_sub(&lk->f.left, 1) != 1)
		return;
	clook_finish(lk);
	kvt_mem_free(lk->f.cl->mem, lk, lk->f.size);
}

static void crun_done(void *ctx, const struct remote_result *res)
{
	struct crun *r = ctx;
	if (res->status == KVT_OK) {
		atomic_store(&r->hits, res->count < r->count ? res->count : r->count);
		atomic_store(&r->load_ns, res->load_ns);
	}
	clook_drop(r->lk);
}

int cluster_lookup(struct cluster *cl, uint32_t ns, const struct kvt_key *keys, uint32_t from,
		   uint32_t n, uint8_t *tiers, remote_cb cb, void *ctx)
{
	struct clook *lk;
	uint32_t groups, first_g, max_runs;
	unsigned nr = 0;
	size_t size;
	bool any = false;

	if (from >= n)
		return KVT_EBADLEN;
	if (cl->n == 1)
		return remote_lookup(cl->m[0].rm, ns, keys + from, n - from,
				     tiers ? tiers + from : NULL, cb, ctx);
	first_g = from / cl->group;
	groups = (n - 1) / cl->group - first_g + 1;
	max_runs = groups + cl->hot;
	size = sizeof(*lk) + (size_t)max_runs * sizeof(lk->runs[0]);
	lk = kvt_mem_calloc(cl->mem, 1, size);
	if (!lk)
		return -ENOMEM;
	lk->f.cl = cl;
	lk->f.size = size;
	lk->f.cb = cb;
	lk->f.ctx = ctx;
	atomic_init(&lk->f.left, 1);
	lk->tiers = tiers;
	lk->from = from;
	lk->n = n;
	A(cl->c_fanouts);
	/* Cut the runs. */
	for (uint32_t g = first_g; (uint64_t)g * cl->group < n; g++) {
		unsigned owners[REMOTE_HOT_REPLICAS_MAX];
		uint32_t start = g * cl->group > from ? g * cl->group : from;
		uint32_t end = (g + 1) * cl->group < n ? (g + 1) * cl->group : n;
		unsigned k = cluster_rank(cl, group_anchor(cl, keys, g), g == 0, owners);
		if (k == 1 && nr > 0 && !lk->runs[nr - 1].replicated &&
		    lk->runs[nr - 1].member == owners[0]) {
			lk->runs[nr - 1].count += end - start; /* same member: one LOOKUP */
			continue;
		}
		for (unsigned i = 0; i < k; i++) {
			struct crun *r = &lk->runs[nr++];
			r->lk = lk;
			r->from = start;
			r->count = end - start;
			r->member = owners[i];
			r->alt = i > 0;
			r->replicated = k > 1;
		}
	}
	lk->run_count = nr;
	/* Every run goes out before any answer is merged (the submitter's
	 * reference), so a run that answers at once cannot finish the lookup
	 * before the later runs exist. */
	for (unsigned i = 0; i < nr; i++) {
		struct crun *r = &lk->runs[i];
		int ret;
		atomic_fetch_add(&lk->f.left, 1);
		ret = remote_lookup(cl->m[r->member].rm, ns, keys + r->from, r->count, NULL,
				    crun_done, r);
		if (ret == 0)
			any = true;
		else
			atomic_fetch_sub(&lk->f.left, 1); /* a member down: no hits there */
	}
	if (!any) {
		kvt_mem_free(cl->mem, lk, size);
		return -ENOTCONN;
	}
	clook_drop(lk);
	return 0;
}

/* ------------------------------------------------------------------------
 * Everything else: every member
 */

void cluster_plug(struct cluster *cl)
{
	for (unsigned i = 0; i < cl->n; i++)
		remote_plug(cl->m[i].rm);
}

void cluster_unplug(struct cluster *cl)
{
	for (unsigned i = 0; i < cl->n; i++)
		remote_unplug(cl->m[i].rm);
}

void cluster_flush(struct cluster *cl)
{
	for (unsigned i = 0; i < cl->n; i++)
		remote_flush(cl->m[i].rm);
}

/* Statistics: one member's pass through; several are summed name by name
 * (every member reports the same names in the same order), with the
 * members' own states under remote.node.<i>. */
#define CSTAT_MAX 64
struct cstat_sum {
	unsigned count;
	char names[CSTAT_MAX][48];
	uint64_t values[CSTAT_MAX];
	bool text[CSTAT_MAX];
	unsigned idx;                /* the member's next statistic */
	uint64_t down, conns_up, gets, hits, puts;
};

static void cstat_collect(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct cstat_sum *s = ctx;
	unsigned i = s->idx++;
	if (strcmp(name, "remote.down") == 0)
		s->down = value;
	else if (strcmp(name, "remote.conns_up") == 0)
		s->conns_up = value;
	else if (strcmp(name, "remote.gets") == 0)
		s->gets = value;
	else if (strcmp(name, "remote.hits") == 0)
		s->hits = value;
	else if (strcmp(name, "remote.puts") == 0)
		s->puts = value;
	if (i >= CSTAT_MAX)
		return;
	if (i >= s->count) {
		snprintf(s->names[i], sizeof(s->names[i]), "%s", name);
		s->text[i] = str != NULL;
		s->count = i + 1;
	}
	if (!str && strcmp(s->names[i], name) == 0)
		s->values[i] += value;
}

void cluster_stats(struct cluster *cl, kvt_stats_fn fn, void *ctx)
{
	struct cstat_sum *s;
	unsigned down = 0;
	char name[64];

	if (cl->n == 1) {
		remote_stats(cl->m[0].rm, fn, ctx);
		return;
	}
	s = kvt_mem_calloc(cl->mem, 1, sizeof(*s));
	if (!s)
		return;
	for (unsigned i = 0; i < cl->n; i++) {
		s->idx = 0;
		s->down = 0;
		remote_stats(cl->m[i].rm, cstat_collect, s);
		down += s->down != 0;
	}
	fn(ctx, "remote.members", cl->n, NULL);
	fn(ctx, "remote.members_down", down, NULL);
	for (unsigned i = 0; i < s->count; i++) {
		if (s->text[i])
			continue; /* remote.addr: per member below */
		if (strcmp(s->names[i], "remote.down") == 0)
			fn(ctx, "remote.down", down == cl->n, NULL);
		else
			fn(ctx, s->names[i], s->values[i], NULL);
	}
	fn(ctx, "remote.group_blocks", cl->group, NULL);
	fn(ctx, "remote.hot_replicas", cl->hot, NULL);
	fn(ctx, "remote.anchor_hinted", atomic_load(&cl->c_hinted), NULL);
	fn(ctx, "remote.anchor_known", atomic_load(&cl->c_known), NULL);
	fn(ctx, "remote.anchor_unknown", atomic_load(&cl->c_unknown), NULL);
	fn(ctx, "remote.replica_retries", atomic_load(&cl->c_replica_retries), NULL);
	fn(ctx, "remote.fanouts", atomic_load(&cl->c_fanouts), NULL);
	fn(ctx, "remote.placed_around_down", atomic_load(&cl->c_skipped), NULL);
	for (unsigned i = 0; i < cl->n; i++) {
		s->idx = 0;
		remote_stats(cl->m[i].rm, cstat_collect, s);
		snprintf(name, sizeof(name), "remote.node.%u.addr", i);
		fn(ctx, name, 0, cl->m[i].addr);
#define N(field, v)                                                              \
	do {                                                                     \
		snprintf(name, sizeof(name), "remote.node.%u." field, i);        \
		fn(ctx, name, (v), NULL);                                        \
	} while (0)
		N("weight", cl->m[i].weight);
		N("down", s->down);
		N("conns_up", s->conns_up);
		N("gets", s->gets);
		N("hits", s->hits);
		N("puts", s->puts);
#undef N
	}
	kvt_mem_free(cl->mem, s, sizeof(*s));
}

struct cstat_prefix {
	kvt_stats_fn fn;
	void *ctx;
	unsigned member;
};

static void cstat_prefixed(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct cstat_prefix *p = ctx;
	char full[256];
	snprintf(full, sizeof(full), "node.%u.%s", p->member, name);
	p->fn(p->ctx, full, value, str);
}

int cluster_stats_query(struct cluster *cl, const char *tenant, kvt_stats_fn fn, void *ctx)
{
	int first = 0, ok = 0;
	if (cl->n == 1)
		return remote_stats_query(cl->m[0].rm, tenant, fn, ctx);
	for (unsigned i = 0; i < cl->n; i++) {
		struct cstat_prefix p = { fn, ctx, i };
		int ret = remote_stats_query(cl->m[i].rm, tenant, cstat_prefixed, &p);
		if (ret == KVT_OK)
			ok++;
		else if (!first)
			first = ret;
	}
	return ok ? KVT_OK : first;
}

/* ------------------------------------------------------------------------
 * who: which member holds which of a prompt's blocks
 */

struct cwho {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t left;               /* lock */
	uint8_t *held;               /* n: this member holds key i; written under lock */
};

struct cwho_item {
	struct cwho *w;
	uint32_t idx;
};

static void cwho_done(void *ctx, const struct remote_result *res)
{
	struct cwho_item *it = ctx;
	struct cwho *w = it->w;
	pthread_mutex_lock(&w->lock);
	w->held[it->idx] = res->status == KVT_OK;
	if (--w->left == 0)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int64_t cluster_who(struct cluster *cl, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		    struct kvt_remote_node *nodes, size_t max, uint64_t *leading)
{
	size_t held_len = (size_t)n * cl->n;
	uint8_t *held = kvt_mem_calloc(cl->mem, held_len ? held_len : 1, 1);
	struct cwho_item *items = kvt_mem_calloc(cl->mem, n, sizeof(*items));
	struct cwho w;
	uint64_t lead = 0;
	bool stopped = false;

	if (!held || !items) {
		kvt_mem_free(cl->mem, held, held_len ? held_len : 1);
		kvt_mem_free(cl->mem, items, (size_t)n * sizeof(*items));
		return -ENOMEM;
	}
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	for (size_t i = 0; i < max && i < cl->n; i++) {
		memset(&nodes[i], 0, sizeof(nodes[i]));
		nodes[i].addr = cl->m[i].addr;
		nodes[i].weight = cl->m[i].weight;
		nodes[i].up = !remote_is_down(cl->m[i].rm);
	}
	/* 1. Ask each member about every key (one member at a time: n
	 *    contexts, batched into frames by the member's thread). */
	for (unsigned m = 0; m < cl->n; m++) {
		w.held = held + (size_t)m * n;
		w.left = n;
		remote_plug(cl->m[m].rm);
		for (uint32_t i = 0; i < n; i++) {
			items[i].w = &w;
			items[i].idx = i;
			if (remote_exists(cl->m[m].rm, ns, &keys[i], cwho_done, &items[i]) != 0) {
				pthread_mutex_lock(&w.lock);
				w.left--;
				pthread_mutex_unlock(&w.lock);
			}
		}
		remote_unplug(cl->m[m].rm);
		pthread_mutex_lock(&w.lock);
		while (w.left > 0)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		for (uint32_t i = 0; m < max && i < n; i++)
			nodes[m].held += held[(size_t)m * n + i];
	}
	/* 2. Walk the prompt the way a lookup does: block i is there if one
	 *    of its group's members holds it; the first that does serves it. */
	for (uint32_t g = 0; (uint64_t)g * cl->group < n; g++) {
		unsigned owners[REMOTE_HOT_REPLICAS_MAX], k;
		uint32_t end = (g + 1) * cl->group < n ? (g + 1) * cl->group : n;
		if (cl->n == 1) {
			owners[0] = 0;
			k = 1;
		} else {
			k = cluster_rank(cl, group_anchor(cl, keys, g), g == 0, owners);
		}
		for (uint32_t i = g * cl->group; i < end; i++) {
			bool hit = false;
			for (unsigned j = 0; j < k; j++) {
				if (owners[j] < max)
					nodes[owners[j]].placed++;
				if (!hit && !stopped && held[(size_t)owners[j] * n + i]) {
					hit = true;
					if (owners[j] < max)
						nodes[owners[j]].leading++;
				}
			}
			if (!stopped && hit)
				lead++;
			else
				stopped = true;
		}
	}
	if (leading)
		*leading = lead;
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	kvt_mem_free(cl->mem, held, held_len ? held_len : 1);
	kvt_mem_free(cl->mem, items, (size_t)n * sizeof(*items));
	return cl->n;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

/* One entry "ADDR[=WEIGHT]" of list[0..len), trimmed of blanks. */
static int cluster_parse_entry(const char *s, size_t len, struct cluster_entry *e)
{
	size_t alen;
	uint64_t w = 1;

	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	alen = len;
	for (size_t i = len; i > 0; i--)
		if (s[i - 1] == '=') {
			size_t nl = len - i;
			if (nl == 0 || nl > 7)
				return KVT_EOPTVAL;
			w = 0;
			for (size_t j = i; j < len; j++) {
				if (s[j] < '0' || s[j] > '9')
					return KVT_EOPTVAL;
				w = w * 10 + (uint64_t)(s[j] - '0');
			}
			alen = i - 1;
			break;
		}
	while (alen && (s[alen - 1] == ' ' || s[alen - 1] == '\t'))
		alen--; /* "ADDR =2" */
	if (w == 0 || w > PLACEMENT_WEIGHT_MAX || alen == 0 || alen > CLUSTER_ADDR_MAX)
		return KVT_EOPTVAL;
	e->addr = s;
	e->addr_len = alen;
	e->weight = (uint32_t)w;
	return 0;
}

int cluster_parse_addrs(const char *list, size_t len, struct cluster_entry *out, unsigned max)
{
	unsigned n = 0;
	size_t p = 0;

	for (;;) {
		size_t e = p;
		int ret;
		while (e < len && list[e] != ',')
			e++;
		if (n == max)
			return KVT_EOPTVAL;
		ret = cluster_parse_entry(list + p, e - p, &out[n]);
		if (ret < 0)
			return ret;
		n++;
		if (e == len)
			return (int)n;
		p = e + 1;
	}
}

/* ------------------------------------------------------------------------
 * Discovery: the member list from a seed's STATS
 */

#define DISCOVER_TEXT_MAX 65536

struct cdisc {
	uint64_t w[PLACEMENT_MEMBERS_MAX];
	char addr[PLACEMENT_MEMBERS_MAX][CLUSTER_ADDR_MAX + 1];
	unsigned count;
	bool bad;
};

static void cdisc_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct cdisc *d = ctx;
	const char *sp;
	char *end;
	unsigned long long w;
	size_t al;

	KVT_UNUSED(value);
	if (strncmp(name, "cluster.member.", 15) != 0 || !str)
		return;
	sp = strrchr(str, ' ');
	if (!sp || d->count == PLACEMENT_MEMBERS_MAX) {
		d->bad = true;
		return;
	}
	al = (size_t)(sp - str);
	w = strtoull(sp + 1, &end, 10);
	if (al == 0 || al > CLUSTER_ADDR_MAX || *end || w == 0) {
		d->bad = true;
		return;
	}
	memcpy(d->addr[d->count], str, al);
	d->addr[d->count][al] = 0;
	d->w[d->count++] = w;
}

/*
 * Ask the seeds in turn for the member list; into *out (kvt_mem_strdup'd,
 * "HOST:PORT=W,...") the first non-empty one, the answering seed alone if
 * it lists none, or the seeds (weight 1) if none answered.  0 or -ENOMEM.
 */
static int cluster_discover(const struct remote_config *cfg, struct dram *dram,
			    struct ns_registry *ns, struct kvt_mem *mem,
			    const struct kvt_logger *log, char **out)
{
	struct cluster_entry seeds[16];
	struct cdisc *d = kvt_mem_calloc(mem, 1, sizeof(*d)); /* 256 KiB, at open only */
	int nseeds = cluster_parse_addrs(cfg->discover, strlen(cfg->discover), seeds, 16);
	int ret = 0;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	for (int i = 0; nseeds > 0 && i < nseeds && !*out; i++) {
		struct remote_config sc = *cfg;
		struct remote *rm = NULL;
		char seed[CLUSTER_ADDR_MAX + 1];
		int rc;

		memcpy(seed, seeds[i].addr, seeds[i].addr_len);
		seed[seeds[i].addr_len] = 0;
		sc.addr = seed;
		sc.addrs = sc.discover = NULL;
		sc.conns = 1;
		d->count = 0;
		d->bad = false;
		rc = remote_open(&rm, &sc, dram, ns, mem, log);
		if (rc == 0)
			rc = remote_stats_query(rm, NULL, cdisc_stat, d);
		remote_close(rm);
		if (rc < 0 || d->bad) {
			kvt_logf(log, KVT_LOG_WARN, "remote: seed %s gave no member list: %s", seed,
				 rc < 0 ? kvt_strerror(rc) : "malformed cluster.member");
			continue;
		}
		{
			/* Weights are bytes of capacity: scale them so that the
			 * largest is at most 1,000,000, in integers, so that every
			 * engine that reads this list places alike. */
			uint64_t max = 1, div;
			size_t cap = DISCOVER_TEXT_MAX, len = 0;
			char *t = kvt_mem_alloc(mem, cap);
			if (!t) {
				ret = -ENOMEM;
				break;
			}
			if (d->count == 0) {
				snprintf(d->addr[0], sizeof(d->addr[0]), "%s", seed);
				d->w[0] = 1;
				d->count = 1;
			}
			for (unsigned k = 0; k < d->count; k++)
				if (d->w[k] > max)
					max = d->w[k];
			div = (max + PLACEMENT_WEIGHT_MAX - 1) / PLACEMENT_WEIGHT_MAX;
			for (unsigned k = 0; k < d->count && len < cap; k++) {
				uint64_t w = d->w[k] / div;
				len += (size_t)snprintf(t + len, cap - len, "%s%s=%llu", k ? "," : "",
							d->addr[k],
							(unsigned long long)(w ? w : 1));
			}
			if (len >= cap) {
				kvt_mem_free(mem, t, cap);
				continue;
			}
			*out = kvt_mem_strdup(mem, t);
			kvt_mem_free(mem, t, cap);
			if (!*out) {
				ret = -ENOMEM;
				break;
			}
			kvt_logf(log, KVT_LOG_INFO, "remote: %u members from seed %s: %s", d->count,
				 seed, *out);
		}
	}
	if (ret == 0 && !*out) {
		kvt_logf(log, KVT_LOG_WARN,
			 "remote: no seed of remote.discover answered; using the seeds as the members");
		*out = kvt_mem_strdup(mem, cfg->discover);
		if (!*out)
			ret = -ENOMEM;
	}
	kvt_mem_free(mem, d, sizeof(*d));
	return ret;
}

static void cluster_free(struct cluster *cl)
{
	for (unsigned i = 0; i < cl->n; i++)
		remote_stop(cl->m[i].rm);
	for (unsigned i = 0; i < cl->n; i++) {
		remote_close(cl->m[i].rm);
		kvt_mem_strfree(cl->mem, cl->m[i].addr);
	}
	kvt_mem_free(cl->mem, cl->m, PLACEMENT_MEMBERS_MAX * sizeof(*cl->m));
	kvt_mem_free(cl->mem, cl->slots, (size_t)cl->slot_count * sizeof(*cl->slots));
	placement_free(cl->pl);
	pthread_mutex_destroy(&cl->alock);
	kvt_mem_free(cl->mem, cl, sizeof(*cl));
}

int cluster_open(struct cluster **out, const struct remote_config *cfg, struct dram *dram,
		 struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct cluster *cl;
	struct remote_config dc;
	char *found = NULL;
	const char *list = cfg->addrs ? cfg->addrs : cfg->addr;
	int ret = 0;

	if ((cfg->addr != NULL) + (cfg->addrs != NULL) + (cfg->discover != NULL) != 1) {
		kvt_logf(log, KVT_LOG_ERROR,
			 "remote: set one of remote.addr, remote.addrs, remote.discover");
		return KVT_EOPTVAL;
	}
	if (cfg->discover) {
		struct cluster_entry probe[16];
		if (cluster_parse_addrs(cfg->discover, strlen(cfg->discover), probe, 16) < 0) {
			kvt_logf(log, KVT_LOG_ERROR,
				 "remote: remote.discover '%s' is not ADDR,... (at most 16)",
				 cfg->discover);
			return KVT_EOPTVAL;
		}
		ret = cluster_discover(cfg, dram, ns, mem, log, &found);
		if (ret < 0)
			return ret;
		dc = *cfg;
		dc.addrs = found;
		dc.discover = NULL;
		cfg = &dc;
		list = found;
	}
	cl = kvt_mem_calloc(mem, 1, sizeof(*cl));
	if (!cl) {
		kvt_mem_strfree(mem, found);
		return -ENOMEM;
	}
	cl->mem = mem;
	cl->log = log;
	pthread_mutex_init(&cl->alock, NULL);
	cl->group = cfg->group_blocks ? cfg->group_blocks : REMOTE_DEF_GROUP_BLOCKS;
	cl->m = kvt_mem_calloc(mem, PLACEMENT_MEMBERS_MAX, sizeof(*cl->m));
	if (!cl->m) {
		ret = -ENOMEM;
		goto fail;
	}
	/* 1. The member list: remote.addr is one member, taken whole (a Unix
	 *    path may hold '=' or ','); remote.addrs is split. */
	if (!cfg->addrs) {
		cl->m[0].addr = kvt_mem_strdup(mem, cfg->addr);
		cl->m[0].weight = 1;
		if (!cl->m[0].addr) {
			ret = -ENOMEM;
			goto fail;
		}
		cl->n = 1;
	} else {
		struct cluster_entry *ent = kvt_mem_calloc(mem, PLACEMENT_MEMBERS_MAX, sizeof(*ent));
		int count = ent ? cluster_parse_addrs(list, strlen(list), ent, PLACEMENT_MEMBERS_MAX)
				: -ENOMEM;
		if (count == KVT_EOPTVAL)
			kvt_logf(log, KVT_LOG_ERROR,
				 "remote: remote.addrs '%s' is not ADDR[=WEIGHT],... (at most %u, weights 1..%u)",
				 list, PLACEMENT_MEMBERS_MAX, PLACEMENT_WEIGHT_MAX);
		for (int i = 0; i < count; i++) {
			cl->m[i].addr = kvt_mem_alloc(mem, ent[i].addr_len + 1);
			if (!cl->m[i].addr) {
				count = -ENOMEM;
				break;
			}
			memcpy(cl->m[i].addr, ent[i].addr, ent[i].addr_len);
			cl->m[i].addr[ent[i].addr_len] = 0;
			cl->m[i].weight = ent[i].weight;
			cl->n++;
		}
		kvt_mem_free(mem, ent, ent ? PLACEMENT_MEMBERS_MAX * sizeof(*ent) : 0);
		if (count < 0) {
			ret = count;
			goto fail;
		}
	}
	cl->hot = cfg->hot_replicas ? cfg->hot_replicas : 1;
	if (cl->hot > cl->n)
		cl->hot = cl->n;
	if (cl->hot > REMOTE_HOT_REPLICAS_MAX)
		cl->hot = REMOTE_HOT_REPLICAS_MAX;
	/* 2. Placement and anchor memory (several members only). */
	if (cl->n > 1) {
		struct placement_member pm[PLACEMENT_MEMBERS_MAX];
		for (unsigned i = 0; i < cl->n; i++) {
			pm[i].name = cl->m[i].addr;
			pm[i].weight = cl->m[i].weight;
		}
		ret = placement_new(&cl->pl, pm, cl->n, mem);
		if (ret == KVT_EOPTVAL)
			kvt_logf(log, KVT_LOG_ERROR, "remote: remote.addrs '%s' names a member twice",
				 list);
		if (ret < 0)
			goto fail;
		if (cfg->anchor_slots) {
			uint32_t count = (cfg->anchor_slots + ANCHOR_WAYS - 1) / ANCHOR_WAYS *
					 ANCHOR_WAYS;
			cl->slots = kvt_mem_calloc(mem, count, sizeof(*cl->slots));
			if (!cl->slots) {
				ret = -ENOMEM;
				goto fail;
			}
			cl->slot_count = count;
		}
	}
	/* 3. A remote tier per member, each with the shared settings. */
	for (unsigned i = 0; i < cl->n; i++) {
		struct remote_config mc = *cfg;
		mc.addr = cl->m[i].addr;
		mc.addrs = NULL;
		ret = remote_open(&cl->m[i].rm, &mc, dram, ns, mem, log);
		if (ret < 0)
			goto fail;
	}
	if (cl->n > 1)
		kvt_logf(log, KVT_LOG_INFO,
			 "remote: %u kvtierd members, groups of %u blocks, first group on %u",
			 cl->n, cl->group, cl->hot);
	*out = cl;
	kvt_mem_strfree(mem, found);
	return 0;
fail:
	cluster_free(cl);
	kvt_mem_strfree(mem, found);
	return ret;
}

void cluster_close(struct cluster *cl)
{
	if (cl)
		cluster_free(cl);
}

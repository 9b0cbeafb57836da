/*
 * cluster.c - the remote tier over several kvtierd: routes each operation
 * to the members that place its block's group, fans multi-member
 * operations out in parallel and merges their answers (cluster.h says
 * what each promises, doc/cluster.md how to run a pod).
 *
 * Owns: the members (a remote.c tier each: its own thread, connections,
 * namespace registrations, deadlines and backoff), the views (a member
 * table and the placement over it, placement.c: the current one and
 * those still held by operations), the refresh thread (remote.discover),
 * the anchor memory (key -> its group's anchor, learned from lookups and
 * prefetches), and the fan-out records of operations that span members.
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
 * Views.  The members and the placement over them form a view (struct
 * cview), immutable once published.  With remote.discover the refresh
 * thread ("kvt-cluster") re-reads the member list from a live member every
 * remote.refresh_ms and, when it changed, builds a new view: members that
 * stay keep their remote.c tier (their connections, registrations and
 * counters), new ones get one, and the new view replaces the old by
 * pointer.  An operation takes the view once, at its start, and keeps it
 * until it completes, so it never sees two member tables:
 *
 *   operation:  enter[gen&1]++ ; v = view ; v->refs++ ; enter[gen&1]--
 *                 ... submit to v's members, answers ... ; v->refs--
 *   refresh:    view = new ; gen++ ; wait enter[old parity] == 0 ;
 *                 old->refs-- (the view's own) ; retire old
 *   reap:       a retired view at refs 0 is freed; a member no view lists
 *               any more is flushed, stopped and freed (refresh thread)
 *
 * The enter counters close the window between loading the pointer and
 * counting the reference: once the refresh thread saw the old parity at
 * zero, every operation that might still load the old pointer has counted
 * its reference, and later ones load the new one.  The hot path costs
 * four atomic operations and no lock; a store opened without discovery
 * (a fixed member list) skips them (cl->dynamic false).  An operation that
 * goes straight to one member (remote_* with the caller's callback) holds
 * the view only while it submits: freeing a departed member fails what it
 * still had queued through the callbacks (remote_stop), a miss.
 *
 * Threads and locks: members' states (remote_is_down) are read with
 * atomics; alock guards the anchor table; a view is immutable; the member
 * list and the retired views belong to the refresh thread (to open and
 * close while it is not running); rlock guards only its stop flag.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "cluster.h"
#include "placement.h"
#include "proto.h"

/* An address ever listed: kept until close, because kvt_remote_who hands
 * out member addresses valid until the store closes. */
struct caddr {
	struct caddr *next;
	size_t size;                 /* of this allocation */
	char addr[];
};

/* One kvtierd, shared by every view that lists it. */
struct cmember {
	const char *addr;            /* interned (cl->addrs): the entry's address text */
	struct remote *rm;
	unsigned views;              /* views listing it: the refresh thread's */
	struct cmember *next;        /* cl->members: the refresh thread's */
};

struct cslot {
	struct cmember *mb;
	uint32_t weight;             /* this view's, 1..PLACEMENT_WEIGHT_MAX */
};

/* The member table and the placement over it.  Immutable once published. */
struct cview {
	_Atomic uint64_t refs;       /* operations holding it, + 1 while it is cl->view */
	unsigned n;                  /* members, 1..PLACEMENT_MEMBERS_MAX */
	unsigned hot;                /* replicas of a prompt's first group, <= n */
	struct placement *pl;        /* n > 1 only */
	uint64_t warm_until_ns;      /* a member joined: reads fall back until then */
	struct cview *next;          /* cl->retired: the refresh thread's */
	struct cslot m[];            /* n, in the list's order */
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
	struct remote_config cfg;    /* the store's; its strings outlive the cluster */
	struct dram *dram;
	struct ns_registry *ns;
	unsigned group;              /* blocks per group */
	bool dynamic;                /* views may change: refresh thread running */

	struct cview *_Atomic view;  /* the current one */
	_Atomic unsigned gen;        /* +1 at each swap; its parity picks enter[] */
	_Atomic unsigned enter[2];   /* operations between loading view and counting it */
	struct cmember *members;     /* every member of every live view */
	struct caddr *addrs;         /* every address ever a member's, until close */
	struct cview *retired;       /* swapped out, not yet freed */
	char *list;                  /* kvt_mem_strdup: the list the view follows ("A=W,...") */

	pthread_t thread;            /* kvt-cluster, if dynamic */
	pthread_mutex_t rlock;
	pthread_cond_t rcond;
	bool stop;                   /* rlock */
	unsigned refresh_ms;
	const struct cmember *seed;  /* the member that answered last: asked first next time */
	bool refresh_failing;        /* logged once per streak */

	pthread_mutex_t alock;
	struct anchor_slot *slots;   /* alock; anchor_slots entries, or NULL */
	uint32_t slot_count;

	_Atomic uint64_t rr;         /* rotation over hot replicas */
	_Atomic uint64_t c_known, c_unknown, c_hinted, c_replica_retries, c_fanouts, c_skipped;
	_Atomic uint64_t c_forwarded;   /* replicated puts sent once, PROTO_IF_FORWARD */
	_Atomic uint64_t c_fwd_retries; /* ... sent to the next replica after a failure */
	_Atomic uint64_t c_warm_reads; /* reads given the previous owner too (join warm-up) */
	_Atomic uint64_t c_lookup_retries; /* lookup runs asked again around a failed member */
	_Atomic uint64_t c_get_retries; /* single-key reads asked again around a failed member */
	_Atomic uint64_t c_read_errors; /* ... failed at submission, not for a member down */
	_Atomic uint64_t c_puts_only;   /* puts local DRAM did not take, sent here alone */
	_Atomic uint64_t c_epoch, c_refreshes, c_view_changes, c_refresh_errors;
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

/* ------------------------------------------------------------------------
 * Views (the essay at the top)
 */

/* The current view, held until cview_put.  Any thread. */
static struct cview *cview_get(struct cluster *cl)
{
	struct cview *v;
	unsigned g;
	if (!cl->dynamic)
		return atomic_load_explicit(&cl->view, memory_order_relaxed);
	g = atomic_load(&cl->gen) & 1;
	atomic_fetch_add(&cl->enter[g], 1);
	v = atomic_load(&cl->view);
	atomic_fetch_add(&v->refs, 1);
	atomic_fetch_sub(&cl->enter[g], 1);
	return v;
}

static void cview_put(struct cluster *cl, struct cview *v)
{
	if (cl->dynamic)
		atomic_fetch_sub(&v->refs, 1);
}

static size_t cview_size(unsigned n)
{
	return sizeof(struct cview) + (size_t)n * sizeof(struct cslot);
}

/* Free a view no operation holds; a member it was the last to list is
 * flushed (its written-through puts answered), stopped and freed.  The
 * refresh thread, or open and close. */
static void cview_free(struct cluster *cl, struct cview *v)
{
	for (unsigned i = 0; i < v->n; i++) {
		struct cmember *mb = v->m[i].mb, **pp;
		if (!mb || --mb->views > 0)
			continue;
		for (pp = &cl->members; *pp != mb; pp = &(*pp)->next)
			;
		*pp = mb->next;
		if (cl->seed == mb)
			cl->seed = NULL;
		if (mb->rm) {
			remote_flush(mb->rm);
			remote_close(mb->rm);
		}
		kvt_logf(cl->log, KVT_LOG_DEBUG, "remote: member %s closed", mb->addr);
		kvt_mem_free(cl->mem, mb, sizeof(*mb));
	}
	placement_free(v->pl);
	kvt_mem_free(cl->mem, v, cview_size(v->n));
}

/* Free the retired views that no operation holds any more. */
static void cview_reap(struct cluster *cl)
{
	struct cview **pp = &cl->retired;
	while (*pp) {
		struct cview *v = *pp;
		if (atomic_load(&v->refs) != 0) {
			pp = &v->next;
			continue;
		}
		*pp = v->next;
		cview_free(cl, v);
	}
}

/* Publish nv; the old view is retired once every operation that might
 * still load its pointer has counted its reference. */
static void cview_swap(struct cluster *cl, struct cview *nv)
{
	struct cview *old = atomic_load(&cl->view);
	unsigned g;
	atomic_store(&nv->refs, 1);
	atomic_store(&cl->view, nv);
	g = atomic_fetch_add(&cl->gen, 1) & 1;
	while (atomic_load(&cl->enter[g]) != 0)
		sched_yield(); /* a few instructions of some operation's entry */
	atomic_fetch_sub(&old->refs, 1);
	old->next = cl->retired;
	cl->retired = old;
}

_Static_assert(KVT_NS_REPLICAS_MAX == REMOTE_HOT_REPLICAS_MAX,
	       "a group's replicas fit the owners[] arrays");

/* Namespace ns's replication factor (kvt_ns_desc.replicas), >= 1. */
static unsigned cluster_replicas(struct cluster *cl, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(cl->ns, ns);
	unsigned r = e ? atomic_load_explicit(&e->replicas, memory_order_relaxed) : 0;
	return r > 1 ? r : 1;
}

/* The members holding the group named by anchor, best first, live ones
 * before those that are down: the namespace's replicas (reps), or for a
 * prompt's first group at least the view's hot replicas.  Returns how
 * many (1..max(reps, hot), at most the members). */
static unsigned cluster_rank_skip(struct cluster *cl, const struct cview *v, uint64_t anchor,
				  unsigned r, unsigned *out, const bool *avoid)
{
	bool skip[PLACEMENT_MEMBERS_MAX];
	bool any = false;
	for (unsigned i = 0; i < v->n; i++)
		any |= skip[i] = (avoid && avoid[i]) || remote_is_down(v->m[i].mb->rm);
	if (any)
		A(cl->c_skipped);
	return placement_rank(v->pl, anchor, any ? skip : NULL, out, r);
}

/* The same ranked with member avoid (or -1) as if it were down. */
static unsigned cluster_rank_avoid(struct cluster *cl, const struct cview *v, uint64_t anchor,
				   bool hot, unsigned reps, unsigned *out, int avoid)
{
	bool skip[PLACEMENT_MEMBERS_MAX] = { false };
	if (avoid >= 0)
		skip[avoid] = true;
	return cluster_rank_skip(cl, v, anchor, hot && v->hot > reps ? v->hot : reps, out,
				 avoid >= 0 ? skip : NULL);
}

static unsigned cluster_rank(struct cluster *cl, const struct cview *v, uint64_t anchor,
			     bool hot, unsigned reps, unsigned *out)
{
	return cluster_rank_avoid(cl, v, anchor, hot, reps, out, -1);
}

/* Where a single key goes: the hint, else the anchor memory, else itself. */
static unsigned cluster_place_ex(struct cluster *cl, const struct cview *v, uint32_t ns,
				 const struct kvt_key *key, const struct cluster_hint *hint,
				 unsigned *out, uint64_t *anchor_out, unsigned *want)
{
	uint64_t anchor;
	unsigned reps = cluster_replicas(cl, ns);
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
	if (anchor_out)
		*anchor_out = anchor;
	if (want)
		*want = hot && v->hot > reps ? v->hot : reps;
	return cluster_rank(cl, v, anchor, hot, reps, out);
}

/* Join warm-up (doc/cluster.md "Healing"): for remote.warm_ms after a
 * view gained a member, a read of a group with one owner may also try
 * the next member of its ranking, the group's owner before the join,
 * until the members' repair has moved the group over. */

/* Where a single-key read goes: as cluster_place, and during a join's
 * warm-up the previous owner after the new one. */
static unsigned cluster_place_read(struct cluster *cl, const struct cview *v, uint32_t ns,
				   const struct kvt_key *key, const struct cluster_hint *hint,
				   unsigned *out, uint64_t *anchor_out, unsigned *want)
{
	uint64_t anchor;
	unsigned k = cluster_place_ex(cl, v, ns, key, hint, out, &anchor, want);
	*anchor_out = anchor;
	if (k == 1 && v->warm_until_ns && kvt_now_ns() < v->warm_until_ns) {
		k = cluster_rank(cl, v, anchor, false, 2, out);
		A(cl->c_warm_reads);
	}
	return k;
}

void cluster_note_prompt(struct cluster *cl, const struct kvt_key *keys, uint32_t n)
{
	if (!cl->slots)
		return; /* one member, for good */
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
	struct cview *v;             /* held until the record is freed */
	_Atomic unsigned left;       /* answers outstanding, + 1 while submitting */
	_Atomic unsigned flags;      /* FAN_*: what the answers were */
	_Atomic int err;             /* the first error, or 0 */
	_Atomic uint64_t count;      /* CLEAR: sum of removed */
	tier_done_fn cb;
	void *ctx;
	size_t size;                 /* of this allocation */
};
#define FAN_OK 1u
#define FAN_EXISTS 2u
#define FAN_MISS 4u
#define FAN_SUBMITTED 8u

/* A record holding the view v (the caller's reference passes to it). */
static struct fan *fan_new(struct cluster *cl, struct cview *v, size_t size, tier_done_fn cb,
			   void *ctx)
{
	struct fan *f = kvt_mem_calloc(cl->mem, 1, size);
	if (!f)
		return NULL;
	f->cl = cl;
	f->v = v;
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
	struct tier_result res = { 0 };
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
static void fan_free(struct fan *f)
{
	struct cluster *cl = f->cl;
	struct cview *v = f->v;
	kvt_mem_free(cl->mem, f, f->size);
	cview_put(cl, v);
}

static bool fan_drop(struct fan *f, bool error_wins)
{
	if (atomic_fetch_sub(&f->left, 1) != 1)
		return false;
	fan_finish(f, error_wins);
	fan_free(f);
	return true;
}

/* The submitter is done: 0 if the callback ran or will run, else the
 * error every member failed with (nothing runs; the record is freed). */
static int fan_submitted(struct fan *f, bool error_wins, int first_err)
{
	if (!(atomic_load(&f->flags) & FAN_SUBMITTED)) {
		/* No member took it: nobody else holds a reference. */
		fan_free(f);
		return first_err ? first_err : -ENOTCONN;
	}
	fan_drop(f, error_wins);
	return 0;
}

static void fan_put_done(void *ctx, const struct tier_result *res)
{
	struct fan *f = ctx;
	fan_note(f, res->status, 0);
	fan_drop(f, false);
}

static void fan_del_done(void *ctx, const struct tier_result *res)
{
	struct fan *f = ctx;
	fan_note(f, res->status, res->count);
	fan_drop(f, true);
}

/* ------------------------------------------------------------------------
 * Single-key operations
 */

/* A single-key read: which remote_* call, and the caller's callback. */
enum { CREAD_GET, CREAD_GET_INTO, CREAD_EXISTS };
struct cread {
	int kind;                    /* CREAD_* */
	tier_got_fn gcb;             /* CREAD_GET */
	tier_done_fn cb;             /* CREAD_GET_INTO, CREAD_EXISTS */
	void *ctx;
	const struct iovec *dst;     /* CREAD_GET_INTO: the caller's buffers */
	unsigned dst_count;
};

/* A member that failed this way did not look: its connections are gone
 * (a timeout is not retried: the call has spent its deadline). */
static bool member_failed(int status)
{
	switch (-status) {
	case ENOTCONN: case ECONNREFUSED: case ECONNRESET: case ECONNABORTED: case EPIPE:
	case EHOSTUNREACH: case ENETUNREACH: case EIO:
		return true;
	default:
		return false;
	}
}

/* Submit rd to one member.  0: submitted (its callback will run).  flags:
 * REMOTE_GET_FAILURES or 0. */
static int cread_submit(struct remote *rm, uint32_t ns, const struct kvt_key *key,
			const struct cread *rd, unsigned flags)
{
	switch (rd->kind) {
	case CREAD_EXISTS:
		return remote_exists(rm, ns, key, rd->cb, rd->ctx);
	case CREAD_GET_INTO:
		return remote_get_into(rm, ns, key, rd->dst, rd->dst_count, flags, rd->cb, rd->ctx);
	default:
		return remote_get(rm, ns, key, flags, rd->gcb, rd->ctx);
	}
}

/*
 * A read of a pod's member: the group's owners (several for a hot group,
 * a replicated namespace, a join's warm-up) each in turn until one hits.
 * A member that failed (member_failed: refused, reset, down: it did not
 * look) is not a miss: once per read, the group is ranked again without
 * the members that failed, and the first member of that ranking not asked
 * yet is asked too (remote.get_retries).  That is where the group went
 * while they were down: an engine that knew placed its puts there, and a
 * new engine that does not know yet would miss them (lookups do the same,
 * remote.lookup_retries).  A timeout is not retried: it spent the call's
 * deadline.
 *
 *   owners   [X, Y]  ->  X refused, Y miss  ->  ranked without X: [Y, Z]  ->  Z
 */
struct ctry {
	struct cluster *cl;
	struct cview *v;             /* held until the last answer */
	uint32_t ns;
	const struct kvt_key *key;   /* the caller's, valid until the callback */
	uint64_t anchor;             /* the group's, to rank it again */
	unsigned owners[REMOTE_HOT_REPLICAS_MAX + 1]; /* in the order asked */
	unsigned count, tried;       /* owners[0..count), of which the first tried asked */
	unsigned ranked;             /* how many the group's ranking gave (count at first) */
	uint32_t failed;             /* bit i: owners[i] failed (member_failed) */
	bool around;                 /* ranked again already */
	int status;                  /* the last answer (CREAD_EXISTS: passed on) */
	int error;                   /* the first owner's failure (CREAD_EXISTS: passed
				      * on over a later owner's miss) */
	struct cread rd;             /* the caller's */
};
_Static_assert(REMOTE_HOT_REPLICAS_MAX + 1 <= 32, "ctry.failed has a bit per owner");

static void ctry_get_done(void *ctx, int status, struct dram_item *item);
static void ctry_done(void *ctx, const struct tier_result *res);

/* Submit to the next owner.  0: submitted; else the last error. */
static int ctry_next(struct ctry *t)
{
	struct cread mine = t->rd;
	int ret = -ENOTCONN;
	mine.gcb = ctry_get_done;
	mine.cb = ctry_done;
	mine.ctx = t;
	while (t->tried < t->count) {
		unsigned i = t->tried++;
		ret = cread_submit(t->v->m[t->owners[i]].mb->rm, t->ns, t->key, &mine,
				   REMOTE_GET_FAILURES);
		if (ret == 0)
			return 0;
		t->status = ret;
		if (ret < 0 && !t->error)
			t->error = ret;
		if (member_failed(ret))
			t->failed |= 1u << i;
	}
	return ret;
}

/* Every owner was asked and one failed: the first member not asked yet of
 * the group's ranking without those that failed, once.  0: submitted. */
static int ctry_around(struct ctry *t)
{
	bool avoid[PLACEMENT_MEMBERS_MAX] = { false };
	unsigned out[REMOTE_HOT_REPLICAS_MAX], k;
	if (t->around || !t->failed)
		return -ENOTCONN;
	t->around = true;
	for (unsigned i = 0; i < t->count; i++)
		if (t->failed & (1u << i))
			avoid[t->owners[i]] = true;
	k = cluster_rank_skip(t->cl, t->v, t->anchor, t->ranked, out, avoid);
	for (unsigned j = 0; j < k; j++) {
		unsigned i;
		for (i = 0; i < t->count && t->owners[i] != out[j]; i++)
			;
		if (i < t->count)
			continue; /* asked already */
		t->owners[t->count++] = out[j];
		A(t->cl->c_get_retries); /* before: once submitted, t may be freed */
		return ctry_next(t);
	}
	return -ENOTCONN;
}

/* An owner answered status: true if another one was asked (its answer
 * comes later), false if status is the read's. */
static bool ctry_again(struct ctry *t, int status)
{
	t->status = status;
	if (status == KVT_OK || status == KVT_EBUFSMALL)
		return false; /* a buffer too small is the answer too */
	if (status < 0 && !t->error)
		t->error = status;
	if (member_failed(status))
		t->failed |= 1u << (t->tried - 1);
	if (t->tried < t->count) {
		A(t->cl->c_replica_retries);
		if (ctry_next(t) == 0)
			return true;
	}
	return ctry_around(t) == 0;
}

static void ctry_free(struct ctry *t)
{
	struct cluster *cl = t->cl;
	cview_put(cl, t->v);
	kvt_mem_free(cl->mem, t, sizeof(*t));
}

static void ctry_get_done(void *ctx, int status, struct dram_item *item)
{
	struct ctry *t = ctx;
	if (status != KVT_OK && ctry_again(t, status))
		return;
	t->rd.gcb(t->rd.ctx, status == KVT_OK ? KVT_OK : KVT_MISS, item);
	ctry_free(t);
}

/* Whether one of the want owners of the group named by anchor, ranked
 * with every member up, is down: a read ranks around it (cluster_rank_skip)
 * and does not ask it, so the others' misses do not say the block is
 * absent -- it may be on the one down.  An exists passes that on
 * (-ENOTCONN, the store's KVT_F_ERRORS) as it does an owner's failure.
 * Until review47e (2026-12-07) a member known down was a miss there: an
 * S3 Abort's sweep over a pod with a member down skipped the parts it
 * held and deleted the marker (test_cluster test_replicas_check). */
static bool cluster_owner_down(const struct cview *v, uint64_t anchor, unsigned want)
{
	unsigned out[REMOTE_HOT_REPLICAS_MAX], k;
	k = placement_rank(v->pl, anchor, NULL, out,
			   want < REMOTE_HOT_REPLICAS_MAX ? want : REMOTE_HOT_REPLICAS_MAX);
	for (unsigned i = 0; i < k; i++)
		if (remote_is_down(v->m[out[i]].mb->rm))
			return true;
	return false;
}

/* Exists, and gets into the caller's buffers: a failure is a miss to the
 * get (the bytes in dst are then not the value); exists passes it on. */
static void ctry_done(void *ctx, const struct tier_result *res)
{
	struct ctry *t = ctx;
	struct tier_result mine;
	if (res->status != KVT_OK && ctry_again(t, res->status))
		return;
	mine = *res;
	if (t->rd.kind == CREAD_GET_INTO && mine.status != KVT_OK && mine.status != KVT_EBUFSMALL)
		mine.status = KVT_MISS;
	/* An owner that failed may hold the block another owner missed: an
	 * exists is not a miss then (the store's KVT_F_ERRORS tells). */
	if (t->rd.kind == CREAD_EXISTS && mine.status != KVT_OK && t->error < 0)
		mine.status = t->error;
	t->rd.cb(t->rd.ctx, &mine);
	ctry_free(t);
}

/*
 * Every single-key read (get, get into the caller's buffers, exists): one
 * member: there; else the group's owners in turn (the essay above), a
 * group with several starting at a rotating one so that reads of a hot
 * group spread over its replicas.
 */
static int cluster_read(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
			const struct cluster_hint *hint, const struct cread *rd)
{
	unsigned owners[REMOTE_HOT_REPLICAS_MAX], k, start, want = 1;
	struct cview *v = cview_get(cl);
	struct ctry *t;
	uint64_t anchor;
	int ret;

	if (v->n == 1) {
		ret = cread_submit(v->m[0].mb->rm, ns, key, rd, 0);
	} else if (!(t = kvt_mem_calloc(cl->mem, 1, sizeof(*t)))) {
		ret = -ENOMEM;
	} else {
		k = cluster_place_read(cl, v, ns, key, hint, owners, &anchor, &want);
		*t = (struct ctry){ .cl = cl, .v = v, .ns = ns, .key = key, .anchor = anchor,
				    .count = k, .ranked = k, .rd = *rd };
		if (rd->kind == CREAD_EXISTS && cluster_owner_down(v, anchor, want))
			t->error = -ENOTCONN;
		start = k == 1 ? 0
			       : (unsigned)(atomic_fetch_add_explicit(&cl->rr, 1,
								     memory_order_relaxed) %
					    k);
		for (unsigned i = 0; i < k; i++)
			t->owners[i] = owners[(start + i) % k];
		if ((ret = ctry_next(t)) == 0 || ctry_around(t) == 0)
			return 0; /* the record holds v */
		/* What the last submission said (out of memory, closing, a
		 * member down), not a blanket -ENOTCONN: a miss either way, but
		 * counted for what it was. */
		ret = t->status < 0 ? t->status : ret;
		kvt_mem_free(cl->mem, t, sizeof(*t));
	}
	cview_put(cl, v);
	if (ret < 0 && ret != -ECANCELED && !member_failed(ret))
		A(cl->c_read_errors);
	return ret;
}

int cluster_get(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, tier_got_fn cb, void *ctx)
{
	struct cread rd = { .kind = CREAD_GET, .gcb = cb, .ctx = ctx };
	return cluster_read(cl, ns, key, hint, &rd);
}

int cluster_get_into(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		     const struct cluster_hint *hint, const struct iovec *dst, unsigned dst_count,
		     tier_done_fn cb, void *ctx)
{
	struct cread rd = { .kind = CREAD_GET_INTO, .cb = cb, .ctx = ctx, .dst = dst,
			    .dst_count = dst_count };
	return cluster_read(cl, ns, key, hint, &rd);
}

int cluster_exists(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		   const struct cluster_hint *hint, tier_done_fn cb, void *ctx)
{
	struct cread rd = { .kind = CREAD_EXISTS, .cb = cb, .ctx = ctx };
	return cluster_read(cl, ns, key, hint, &rd);
}

/* A put sent once with FORWARD (remote.hot_forward): a replica that fails
 * it, at the submission or after, passes it on to the next one (FORWARD
 * too where that member announced forwarding, or with the option on; a
 * plain copy of one otherwise), so that the put succeeds if any replica
 * stored it, as it does when the engine writes every replica itself.  parts stay the caller's
 * until cb, as for any put; crcs, if given, are copied behind the record
 * (the store's, computed by its DRAM copy, live only during the call). */
struct cfwd {
	struct cluster *cl;
	struct cview *v;             /* held until the record is freed */
	uint32_t ns;
	struct kvt_key key;
	const struct iovec *parts;
	const uint32_t *crcs;
	unsigned part_count, want, k, next;
	unsigned owners[REMOTE_HOT_REPLICAS_MAX]; /* those that forward first */
	unsigned fwd_mask;           /* bit i: owners[i] is sent FORWARD */
	bool sealed;
	uint64_t anchor;
	unsigned hint_bit;           /* REMOTE_PUT_RETAIN or 0 */
	tier_done_fn cb;
	void *ctx;
};

static void cfwd_done(void *ctx, const struct tier_result *res);

static size_t cfwd_size(const struct cfwd *f)
{
	return sizeof(*f) + (f->crcs ? f->part_count * sizeof(uint32_t) : 0);
}

/* Submit to the next replica.  0: submitted; else the last error. */
static int cfwd_next(struct cfwd *f)
{
	int ret = -ENOTCONN;
	/* ret first: once a submission took, f may be freed by its answer */
	while (ret != 0 && f->next < f->k) {
		unsigned i = f->next++;
		ret = remote_put_placed(f->v->m[f->owners[i]].mb->rm, f->ns, &f->key, f->parts,
					f->part_count, f->crcs, f->sealed, f->anchor,
					f->want | f->hint_bit |
						(f->fwd_mask >> i & 1 ? REMOTE_PUT_FORWARD : 0),
					cfwd_done, f);
	}
	return ret;
}

static void cfwd_done(void *ctx, const struct tier_result *res)
{
	struct cfwd *f = ctx;
	struct cluster *cl = f->cl;
	if (res->status != KVT_OK && res->status != KVT_EXISTS && f->next < f->k) {
		A(cl->c_fwd_retries);
		if (cfwd_next(f) == 0)
			return;
	}
	f->cb(f->ctx, res);
	cview_put(cl, f->v);
	kvt_mem_free(cl->mem, f, cfwd_size(f));
}

int cluster_put(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, const struct iovec *parts, unsigned part_count,
		const uint32_t *crcs, uint32_t vflags, bool only, tier_done_fn cb, void *ctx)
{
	unsigned owners[REMOTE_HOT_REPLICAS_MAX], k = 1, want = 0, fwd_mask = 0;
	bool sealed = (vflags & KVT_F_SEALED) != 0;
	/* The retain hint travels in the copies word (remote.h); with auto
	 * each connection drops it where its server did not announce it. */
	unsigned hint_bit = ((vflags & KVT_F_RETAIN) && cl->cfg.retain_hint != REMOTE_FLAG_OFF) ?
				    REMOTE_PUT_RETAIN : 0;
	uint64_t anchor = 0;
	struct cview *v = cview_get(cl);
	struct fan *f;
	int first_err = 0, ret;

	if (only)
		A(cl->c_puts_only);

	/* Every put in a pod tells the member the block's anchor and how
	 * many members it is placed on: what the members need to heal. */
	if (v->n == 1 ||
	    (k = cluster_place_ex(cl, v, ns, key, hint, owners, &anchor, &want)) == 1) {
		ret = remote_put_placed(v->m[v->n == 1 ? 0 : owners[0]].mb->rm, ns, key, parts,
					part_count, crcs, sealed, anchor, want | hint_bit, cb, ctx);
		cview_put(cl, v);
		return ret;
	}
	/* remote.hot_forward: sent once, to the first live replica, which
	 * forwards it to the others (doc/cluster.md "Forwarded replicas");
	 * a replica that refuses the submission (down) passes it on to the
	 * next.  auto: to the first of those whose HELLO announced forwarding
	 * (a member of a pod, of protocol version 2 or later), the others
	 * after them in case those fail; none announced it: written through
	 * to each replica, below. */
	if (cl->cfg.hot_forward == REMOTE_FLAG_ON) {
		fwd_mask = (1u << k) - 1;
	} else if (cl->cfg.hot_forward == REMOTE_FLAG_AUTO) {
		unsigned order[REMOTE_HOT_REPLICAS_MAX], n = 0;
		for (unsigned pass = 0; pass < 2; pass++)
			for (unsigned i = 0; i < k; i++) {
				bool fwd = remote_caps(v->m[owners[i]].mb->rm, NULL) &
					   PROTO_CAP_FORWARD;
				if (fwd != (pass == 0))
					continue;
				fwd_mask |= (unsigned)fwd << n;
				order[n++] = owners[i];
			}
		memcpy(owners, order, k * sizeof(*owners));
	}
	if (fwd_mask) {
		struct cfwd *fw = kvt_mem_calloc(
			cl->mem, 1, sizeof(*fw) + (crcs ? part_count * sizeof(uint32_t) : 0));
		if (!fw) {
			cview_put(cl, v);
			return -ENOMEM;
		}
		*fw = (struct cfwd){ .cl = cl, .v = v, .ns = ns, .key = *key, .parts = parts,
				     .crcs = crcs ? (uint32_t *)(fw + 1) : NULL,
				     .part_count = part_count, .want = want, .k = k,
				     .fwd_mask = fwd_mask, .sealed = sealed, .anchor = anchor,
				     .hint_bit = hint_bit, .cb = cb, .ctx = ctx };
		if (crcs)
			memcpy(fw + 1, crcs, part_count * sizeof(uint32_t));
		memcpy(fw->owners, owners, k * sizeof(*owners));
		if ((ret = cfwd_next(fw)) == 0) {
			A(cl->c_forwarded);
			return 0; /* the record holds v */
		}
		kvt_mem_free(cl->mem, fw, cfwd_size(fw));
		cview_put(cl, v);
		return ret;
	}
	/* A hot block, or one of a replicated namespace: written through to
	 * each replica, with the CRC32Cs computed once for all of them (each
	 * replica's remote_put would compute its own). */
	f = fan_new(cl, v, sizeof(*f) + (crcs ? 0 : part_count * sizeof(uint32_t)), cb, ctx);
	if (!f) {
		cview_put(cl, v);
		return -ENOMEM;
	}
	if (!crcs) {
		uint32_t *mine = (uint32_t *)(f + 1);
		for (unsigned i = 0; i < part_count; i++)
			mine[i] = kvt_crc32c(0, parts[i].iov_base, parts[i].iov_len);
		remote_note_crc(v->m[owners[0]].mb->rm, parts, part_count);
		crcs = mine;
	}
	for (unsigned i = 0; i < k; i++) {
		atomic_fetch_add(&f->left, 1);
		ret = remote_put_placed(v->m[owners[i]].mb->rm, ns, key, parts, part_count, crcs,
					sealed, anchor, want | hint_bit, fan_put_done, f);
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
 * a delete must win wherever it is.  key NULL: clear the namespace. */
static int fan_remove(struct remote *rm, uint32_t ns, const struct kvt_key *key, tier_done_fn cb,
		      void *ctx)
{
	return key ? remote_delete(rm, ns, key, cb, ctx) : remote_clear(rm, ns, cb, ctx);
}

static int cluster_remove(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
			  tier_done_fn cb, void *ctx)
{
	struct cview *v = cview_get(cl);
	struct fan *f;
	int first_err = 0, ret;
	if (v->n == 1) {
		ret = fan_remove(v->m[0].mb->rm, ns, key, cb, ctx);
		cview_put(cl, v);
		return ret;
	}
	f = fan_new(cl, v, sizeof(*f), cb, ctx);
	if (!f) {
		cview_put(cl, v);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < v->n; i++) {
		atomic_fetch_add(&f->left, 1);
		ret = fan_remove(v->m[i].mb->rm, ns, key, fan_del_done, f);
		if (ret == 0) {
			atomic_fetch_or(&f->flags, FAN_SUBMITTED);
		} else {
			atomic_fetch_sub(&f->left, 1);
			fan_note(f, ret, 0); /* a member that is down did not remove */
			if (!first_err)
				first_err = ret;
		}
	}
	return fan_submitted(f, true, first_err);
}

int cluster_delete(struct cluster *cl, uint32_t ns, const struct kvt_key *key, tier_done_fn cb,
		   void *ctx)
{
	return cluster_remove(cl, ns, key, cb, ctx);
}

int cluster_clear(struct cluster *cl, uint32_t ns, tier_done_fn cb, void *ctx)
{
	return cluster_remove(cl, ns, NULL, cb, ctx);
}

/* ------------------------------------------------------------------------
 * Lookups over members
 *
 * keys[from..n) are cut into runs: a run is consecutive groups with the
 * same (single) owner, or a group with replicas (the first group, or any
 * group of a replicated namespace) on one of them (one run per replica,
 * same range).  Each run is one LOOKUP to its member, all in
 * parallel; when the last answers, the ranges are walked in order: a full
 * range adds its length and goes on, a partial one adds its hits and
 * stops (for replicas of one range, the best answer counts).
 *
 *   prompt  | g0 (hot) | g1 | g2 | g3 | g4 |
 *   runs    | A  /  C  | B       | A  | B  |      (g1, g2 both on B)
 *   hits    | 16 / 16  | 32      | 7  | 16 |  ->  16 + 32 + 7 = 55
 *
 * A run whose member fails (its connections refused or reset, not a
 * timeout) is asked again, once, as a lookup of its own range ranked
 * without that member: where its groups went while the member was down.
 * A new engine's first lookups can reach a dead member before its
 * connections have failed: without the retry, every group of that member
 * was a miss although the other engines had put it on the next member
 * (test_cluster: 8 of 64 blocks found, CI, 2026-12).
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
	const struct kvt_key *keys;  /* the caller's, valid until cb */
	uint32_t ns, from, n;
	bool retry;                  /* a failed run is asked again (not in a retry) */
	unsigned run_count;
	struct crun runs[];
};

static void clook_finish(struct clook *lk)
{
	struct tier_result res = { .status = KVT_OK };
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
	fan_free(&lk->f);
}

static void crun_done(void *ctx, const struct tier_result *res)
{
	struct crun *r = ctx;
	if (res->status == KVT_OK) {
		atomic_store(&r->hits, res->count < r->count ? res->count : r->count);
		atomic_store(&r->load_ns, res->load_ns);
	}
	clook_drop(r->lk);
}

static int clook_start(struct cluster *cl, struct cview *v, uint32_t ns,
		       const struct kvt_key *keys, uint32_t from, uint32_t n, uint8_t *tiers,
		       tier_done_fn cb, void *ctx, int avoid);

/* Run r's member failed with status: ask again for its range, ranked
 * without that member.  Returns true if the retry holds r's reference
 * (crun_done then runs from its answer). */
static bool crun_retry(struct crun *r, int status)
{
	struct clook *lk = r->lk;
	struct cluster *cl = lk->f.cl;
	struct cview *v = lk->f.v;
	if (!lk->retry || r->replicated || !member_failed(status))
		return false;
	if (cl->dynamic)
		atomic_fetch_add(&v->refs, 1); /* the retry's own; lk holds one */
	if (clook_start(cl, v, lk->ns, lk->keys, r->from, r->from + r->count, NULL, crun_done, r,
			(int)r->member) != 0)
		return false; /* it released the view */
	A(cl->c_lookup_retries);
	return true;
}

static void crun_first_done(void *ctx, const struct tier_result *res)
{
	struct crun *r = ctx;
	if (res->status != KVT_OK && crun_retry(r, res->status))
		return;
	crun_done(ctx, res);
}

int cluster_lookup(struct cluster *cl, uint32_t ns, const struct kvt_key *keys, uint32_t from,
		   uint32_t n, uint8_t *tiers, tier_done_fn cb, void *ctx)
{
	struct cview *v;
	int ret;

	if (from >= n)
		return KVT_EBADLEN;
	v = cview_get(cl);
	if (v->n == 1) {
		ret = remote_lookup(v->m[0].mb->rm, ns, keys + from, n - from,
				    tiers ? tiers + from : NULL, cb, ctx);
		cview_put(cl, v);
		return ret;
	}
	return clook_start(cl, v, ns, keys, from, n, tiers, cb, ctx, -1);
}

/* A lookup over v's members (the caller's view reference passes to it; it
 * is released on failure), member avoid (or -1) ranked with those down:
 * avoid >= 0 is a failed run's retry, which is not retried again. */
static int clook_start(struct cluster *cl, struct cview *v, uint32_t ns,
		       const struct kvt_key *keys, uint32_t from, uint32_t n, uint8_t *tiers,
		       tier_done_fn cb, void *ctx, int avoid)
{
	struct clook *lk;
	uint32_t groups, first_g, max_runs;
	unsigned nr = 0, reps;
	size_t size;
	bool any = false;
	int ret;

	reps = cluster_replicas(cl, ns);
	first_g = from / cl->group;
	groups = (n - 1) / cl->group - first_g + 1;
	max_runs = groups * reps + v->hot;
	size = sizeof(*lk) + (size_t)max_runs * sizeof(lk->runs[0]);
	lk = kvt_mem_calloc(cl->mem, 1, size);
	if (!lk) {
		cview_put(cl, v);
		return -ENOMEM;
	}
	lk->f.cl = cl;
	lk->f.v = v;
	lk->f.size = size;
	lk->f.cb = cb;
	lk->f.ctx = ctx;
	atomic_init(&lk->f.left, 1);
	lk->tiers = tiers;
	lk->keys = keys;
	lk->ns = ns;
	lk->from = from;
	lk->n = n;
	lk->retry = avoid < 0;
	A(cl->c_fanouts);
	/* Cut the runs. */
	for (uint32_t g = first_g; (uint64_t)g * cl->group < n; g++) {
		unsigned owners[REMOTE_HOT_REPLICAS_MAX];
		uint32_t start = g * cl->group > from ? g * cl->group : from;
		uint32_t end = (g + 1) * cl->group < n ? (g + 1) * cl->group : n;
		unsigned k = cluster_rank_avoid(cl, v, group_anchor(cl, keys, g), g == 0, reps,
						owners, avoid);
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
		atomic_fetch_add(&lk->f.left, 1);
		ret = remote_lookup(v->m[r->member].mb->rm, ns, keys + r->from, r->count, NULL,
				    crun_first_done, r);
		if (ret == 0 || crun_retry(r, ret))
			any = true;
		else
			atomic_fetch_sub(&lk->f.left, 1); /* a member down: no hits there */
	}
	if (!any) {
		fan_free(&lk->f);
		return -ENOTCONN;
	}
	clook_drop(lk);
	return 0;
}

/* ------------------------------------------------------------------------
 * Everything else: every member
 */

struct cview *cluster_plug(struct cluster *cl)
{
	struct cview *v = cview_get(cl);
	for (unsigned i = 0; i < v->n; i++)
		remote_plug(v->m[i].mb->rm);
	return v;
}

void cluster_unplug(struct cluster *cl, struct cview *v)
{
	for (unsigned i = 0; i < v->n; i++)
		remote_unplug(v->m[i].mb->rm);
	cview_put(cl, v);
}

void cluster_flush(struct cluster *cl)
{
	struct cview *v = cview_get(cl);
	for (unsigned i = 0; i < v->n; i++)
		remote_flush(v->m[i].mb->rm);
	cview_put(cl, v);
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

/* The refresh counters (remote.discover only). */
static void cluster_stats_refresh(struct cluster *cl, kvt_stats_fn fn, void *ctx)
{
	if (!cl->dynamic)
		return;
	fn(ctx, "remote.cluster.epoch", atomic_load(&cl->c_epoch), NULL);
	fn(ctx, "remote.cluster.refreshes", atomic_load(&cl->c_refreshes), NULL);
	fn(ctx, "remote.cluster.view_changes", atomic_load(&cl->c_view_changes), NULL);
	fn(ctx, "remote.cluster.refresh_errors", atomic_load(&cl->c_refresh_errors), NULL);
}

void cluster_stats(struct cluster *cl, kvt_stats_fn fn, void *ctx)
{
	struct cview *v = cview_get(cl);
	struct cstat_sum *s;
	unsigned down = 0;
	char name[64];

	fn(ctx, "remote.puts_only", atomic_load(&cl->c_puts_only), NULL);
	if (v->n == 1) {
		remote_stats(v->m[0].mb->rm, fn, ctx);
		cluster_stats_refresh(cl, fn, ctx);
		cview_put(cl, v);
		return;
	}
	s = kvt_mem_calloc(cl->mem, 1, sizeof(*s));
	if (!s) {
		cview_put(cl, v);
		return;
	}
	for (unsigned i = 0; i < v->n; i++) {
		s->idx = 0;
		s->down = 0;
		remote_stats(v->m[i].mb->rm, cstat_collect, s);
		down += s->down != 0;
	}
	fn(ctx, "remote.members", v->n, NULL);
	fn(ctx, "remote.members_down", down, NULL);
	for (unsigned i = 0; i < s->count; i++) {
		if (s->text[i])
			continue; /* remote.addr: per member below */
		if (strcmp(s->names[i], "remote.down") == 0)
			fn(ctx, "remote.down", down == v->n, NULL);
		else if (strcmp(s->names[i], "remote.version") != 0 &&
			 strcmp(s->names[i], "remote.caps") != 0) /* not sums: below */
			fn(ctx, s->names[i], s->values[i], NULL);
	}
	{
		/* What every member announced: the lowest version, the caps all share. */
		unsigned version = PROTO_VERSION_MAX, caps = PROTO_CAPS_KNOWN;
		for (unsigned i = 0; i < v->n; i++) {
			unsigned ver;
			caps &= remote_caps(v->m[i].mb->rm, &ver);
			version = ver < version ? ver : version;
		}
		fn(ctx, "remote.version", version, NULL);
		fn(ctx, "remote.caps", caps, NULL);
	}
	fn(ctx, "remote.group_blocks", cl->group, NULL);
	fn(ctx, "remote.hot_replicas", v->hot, NULL);
	fn(ctx, "remote.anchor_hinted", atomic_load(&cl->c_hinted), NULL);
	fn(ctx, "remote.warm_reads", atomic_load(&cl->c_warm_reads), NULL);
	fn(ctx, "remote.lookup_retries", atomic_load(&cl->c_lookup_retries), NULL);
	fn(ctx, "remote.get_retries", atomic_load(&cl->c_get_retries), NULL);
	fn(ctx, "remote.read_errors", atomic_load(&cl->c_read_errors), NULL);
	fn(ctx, "remote.anchor_known", atomic_load(&cl->c_known), NULL);
	fn(ctx, "remote.anchor_unknown", atomic_load(&cl->c_unknown), NULL);
	fn(ctx, "remote.replica_retries", atomic_load(&cl->c_replica_retries), NULL);
	fn(ctx, "remote.fanouts", atomic_load(&cl->c_fanouts), NULL);
	fn(ctx, "remote.forwarded_puts", atomic_load(&cl->c_forwarded), NULL);
	fn(ctx, "remote.forward_retries", atomic_load(&cl->c_fwd_retries), NULL);
	fn(ctx, "remote.placed_around_down", atomic_load(&cl->c_skipped), NULL);
	cluster_stats_refresh(cl, fn, ctx);
	for (unsigned i = 0; i < v->n; i++) {
		s->idx = 0;
		remote_stats(v->m[i].mb->rm, cstat_collect, s);
		snprintf(name, sizeof(name), "remote.node.%u.addr", i);
		fn(ctx, name, 0, v->m[i].mb->addr);
#define N(field, val)                                                            \
	do {                                                                     \
		snprintf(name, sizeof(name), "remote.node.%u." field, i);        \
		fn(ctx, name, (val), NULL);                                      \
	} while (0)
		N("weight", v->m[i].weight);
		N("down", s->down);
		N("conns_up", s->conns_up);
		N("gets", s->gets);
		N("hits", s->hits);
		N("puts", s->puts);
		{
			unsigned version, caps = remote_caps(v->m[i].mb->rm, &version);
			N("version", version);
			N("caps", caps);
		}
#undef N
	}
	kvt_mem_free(cl->mem, s, sizeof(*s));
	cview_put(cl, v);
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
	struct cview *v = cview_get(cl);
	int first = 0, ok = 0, ret;
	if (v->n == 1) {
		ret = remote_stats_query(v->m[0].mb->rm, tenant, fn, ctx);
		cview_put(cl, v);
		return ret;
	}
	for (unsigned i = 0; i < v->n; i++) {
		struct cstat_prefix p = { fn, ctx, i };
		ret = remote_stats_query(v->m[i].mb->rm, tenant, cstat_prefixed, &p);
		if (ret == KVT_OK)
			ok++;
		else if (!first)
			first = ret;
	}
	cview_put(cl, v);
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

static void cwho_done(void *ctx, const struct tier_result *res)
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
	struct cview *v = cview_get(cl);
	size_t held_len = (size_t)n * v->n;
	uint8_t *held = kvt_mem_calloc(cl->mem, held_len ? held_len : 1, 1);
	struct cwho_item *items = kvt_mem_calloc(cl->mem, n, sizeof(*items));
	struct cwho w;
	uint64_t lead = 0;
	unsigned members = v->n;
	bool stopped = false;

	if (!held || !items) {
		kvt_mem_free(cl->mem, held, held_len ? held_len : 1);
		kvt_mem_free(cl->mem, items, (size_t)n * sizeof(*items));
		cview_put(cl, v);
		return -ENOMEM;
	}
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	for (size_t i = 0; i < max && i < v->n; i++) {
		memset(&nodes[i], 0, sizeof(nodes[i]));
		nodes[i].addr = v->m[i].mb->addr;
		nodes[i].weight = v->m[i].weight;
		nodes[i].up = !remote_is_down(v->m[i].mb->rm);
	}
	/* 1. Ask each member about every key (one member at a time: n
	 *    contexts, batched into frames by the member's thread). */
	for (unsigned m = 0; m < v->n; m++) {
		w.held = held + (size_t)m * n;
		w.left = n;
		remote_plug(v->m[m].mb->rm);
		for (uint32_t i = 0; i < n; i++) {
			items[i].w = &w;
			items[i].idx = i;
			if (remote_exists(v->m[m].mb->rm, ns, &keys[i], cwho_done, &items[i]) !=
			    0) {
				pthread_mutex_lock(&w.lock);
				w.left--;
				pthread_mutex_unlock(&w.lock);
			}
		}
		remote_unplug(v->m[m].mb->rm);
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
		if (v->n == 1) {
			owners[0] = 0;
			k = 1;
		} else {
			k = cluster_rank(cl, v, group_anchor(cl, keys, g), g == 0,
					 cluster_replicas(cl, ns), owners);
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
	cview_put(cl, v);
	return members;
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
 * Discovery: the member list from a member's STATS
 */

#define DISCOVER_TEXT_MAX 65536

struct cdisc {
	uint64_t w[PLACEMENT_MEMBERS_MAX];
	char addr[PLACEMENT_MEMBERS_MAX][CLUSTER_ADDR_MAX + 1];
	unsigned count;
	unsigned max;                /* remote.members_max: more is refused */
	unsigned kinds;              /* REMOTE_KIND_*: what the seeds are (cluster_kinds) */
	bool bad;
	const char *why;             /* bad: why, for the log */
	uint64_t epoch;              /* cluster.epoch, 0 if not served */
};

static void cdisc_reset(struct cdisc *d, const struct remote_config *cfg, unsigned kinds)
{
	d->count = 0;
	d->max = cfg->members_max ? cfg->members_max : REMOTE_DEF_MEMBERS_MAX;
	if (d->max > PLACEMENT_MEMBERS_MAX)
		d->max = PLACEMENT_MEMBERS_MAX;
	d->kinds = kinds;
	d->bad = false;
	d->why = NULL;
	d->epoch = 0;
}

/* The kinds of address a server's member list may name: NET, and what
 * the seeds of remote.discover are (resolved: a name for this host is
 * LOCAL).  A server does not get to send this engine to a Unix socket or
 * a port of its own host that its operator never named (doc/remote.md). */
static unsigned cluster_kinds(const struct remote_config *cfg)
{
	struct cluster_entry seeds[16];
	int n = cluster_parse_addrs(cfg->discover, strlen(cfg->discover), seeds, 16);
	unsigned kinds = REMOTE_KIND_NET;
	for (int i = 0; i < n; i++) {
		char a[CLUSTER_ADDR_MAX + 1];
		memcpy(a, seeds[i].addr, seeds[i].addr_len);
		a[seeds[i].addr_len] = 0;
		kinds |= remote_addr_kind(a, seeds[i].addr_len) | remote_addr_kind_resolved(a);
	}
	return kinds;
}

int cluster_member_line(const char *str, size_t len, size_t *addr_len, uint64_t *weight)
{
	const char *sp = NULL;
	uint64_t w = 0;
	size_t al;

	for (size_t i = len; i > 0 && !sp; i--)
		if (str[i - 1] == ' ')
			sp = str + i - 1;
	if (!sp)
		return KVT_EOPTVAL;
	al = (size_t)(sp - str);
	if (al == 0 || al > CLUSTER_ADDR_MAX || sp + 1 == str + len)
		return KVT_EOPTVAL;
	/* Digits only (strtoull took "-1" as 2^64 - 1, whose scaling in
	 * cdisc_text divided by zero), and bounded, so that the scaling's
	 * max + PLACEMENT_WEIGHT_MAX cannot wrap. */
	for (const char *p = sp + 1; p < str + len; p++) {
		if (*p < '0' || *p > '9')
			return KVT_EOPTVAL;
		w = w * 10 + (uint64_t)(*p - '0');
		if (w > CLUSTER_MEMBER_WEIGHT_MAX)
			return KVT_EOPTVAL;
	}
	if (w == 0)
		return KVT_EOPTVAL;
	/* The list becomes remote.addrs text (cdisc_text): an address with
	 * ',', '=' or a blank in it would read back as other members. */
	for (size_t i = 0; i < al; i++)
		if (str[i] == ',' || str[i] == '=' || str[i] <= ' ' || str[i] > '~')
			return KVT_EOPTVAL;
	*addr_len = al;
	*weight = w;
	return 0;
}

static void cdisc_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct cdisc *d = ctx;
	uint64_t w;
	size_t al;

	if (strcmp(name, "cluster.epoch") == 0 && !str) {
		d->epoch = value;
		return;
	}
	if (strncmp(name, "cluster.member.", 15) != 0 || !str)
		return;
	if (d->bad)
		return;
	if (d->count == d->max) {
		d->bad = true;
		d->why = "more members than remote.members_max";
		return;
	}
	if (cluster_member_line(str, strlen(str), &al, &w) < 0) {
		d->bad = true;
		d->why = "a malformed cluster.member";
		return;
	}
	/* A member named twice would fail the whole view (placement_new). */
	for (unsigned k = 0; k < d->count; k++)
		if (strlen(d->addr[k]) == al && memcmp(d->addr[k], str, al) == 0) {
			d->bad = true;
			d->why = "a member named twice";
			return;
		}
	/* Names are checked again once resolved (remote_open, cfg.kinds). */
	if (d->kinds && !(remote_addr_kind(str, al) & d->kinds)) {
		d->bad = true;
		d->why = "a unix: member or one on this host, which no seed is";
		return;
	}
	memcpy(d->addr[d->count], str, al);
	d->addr[d->count][al] = 0;
	d->w[d->count++] = w;
}

/*
 * The list d read (d->count > 0) as remote.addrs text into *out
 * (kvt_mem_strdup'd).  Weights are bytes of capacity: they are scaled so
 * that the largest is at most 1,000,000, in integers, so that every
 * engine that reads this list places alike.  0, -ENOMEM, KVT_EOPTVAL
 * (longer than DISCOVER_TEXT_MAX).
 */
static int cdisc_text(struct kvt_mem *mem, const struct cdisc *d, char **out)
{
	uint64_t max = 1, div;
	size_t cap = DISCOVER_TEXT_MAX, len = 0;
	char *t = kvt_mem_alloc(mem, cap);
	int ret = 0;

	if (!t)
		return -ENOMEM;
	for (unsigned k = 0; k < d->count; k++)
		if (d->w[k] > max)
			max = d->w[k];
	div = (max + PLACEMENT_WEIGHT_MAX - 1) / PLACEMENT_WEIGHT_MAX;
	for (unsigned k = 0; k < d->count && len < cap; k++) {
		uint64_t w = d->w[k] / div;
		len += (size_t)snprintf(t + len, cap - len, "%s%s=%llu", k ? "," : "", d->addr[k],
					(unsigned long long)(w ? w : 1));
	}
	if (len >= cap) {
		ret = KVT_EOPTVAL;
	} else {
		*out = kvt_mem_strdup(mem, t);
		if (!*out)
			ret = -ENOMEM;
	}
	kvt_mem_free(mem, t, cap);
	return ret;
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
		cdisc_reset(d, cfg, cfg->kinds);
		sc.kinds = 0; /* the operator named it */
		rc = remote_open(&rm, &sc, dram, ns, mem, log);
		if (rc == 0)
			rc = remote_stats_query(rm, NULL, cdisc_stat, d);
		remote_close(rm);
		if (rc < 0 || d->bad) {
			kvt_logf(log, KVT_LOG_WARN, "remote: seed %s gave no member list: %s", seed,
				 rc < 0 ? kvt_strerror(rc) : d->why);
			continue;
		}
		if (d->count == 0) {
			snprintf(d->addr[0], sizeof(d->addr[0]), "%s", seed);
			d->w[0] = 1;
			d->count = 1;
		}
		rc = cdisc_text(mem, d, out);
		if (rc == -ENOMEM) {
			ret = rc;
			break;
		}
		if (rc == 0)
			kvt_logf(log, KVT_LOG_INFO, "remote: %u members from seed %s: %s", d->count,
				 seed, *out);
	}
	if (ret == 0 && !*out) {
		kvt_logf(log, KVT_LOG_WARN,
			 "remote: no seed of remote.discover gave a usable member list; using the seeds as the members");
		*out = kvt_mem_strdup(mem, cfg->discover);
		if (!*out)
			ret = -ENOMEM;
	}
	kvt_mem_free(mem, d, sizeof(*d));
	return ret;
}

/* ------------------------------------------------------------------------
 * Building views
 */

/* addr[0..len) as a string that lives until close; NULL: no memory. */
static const char *cluster_intern(struct cluster *cl, const char *addr, size_t len)
{
	struct caddr *a;
	for (a = cl->addrs; a; a = a->next)
		if (strlen(a->addr) == len && memcmp(a->addr, addr, len) == 0)
			return a->addr;
	a = kvt_mem_alloc(cl->mem, sizeof(*a) + len + 1);
	if (!a)
		return NULL;
	a->size = sizeof(*a) + len + 1;
	memcpy(a->addr, addr, len);
	a->addr[len] = 0;
	a->next = cl->addrs;
	cl->addrs = a;
	return a->addr;
}

static struct cmember *cluster_member_find(struct cluster *cl, const char *addr, size_t len)
{
	for (struct cmember *mb = cl->members; mb; mb = mb->next)
		if (strlen(mb->addr) == len && memcmp(mb->addr, addr, len) == 0)
			return mb;
	return NULL;
}

/*
 * A view over ent[0..count): members already in some view are shared
 * (their remote.c tier kept), the others opened.  *out has no reference
 * yet (cview_swap or open gives it the current view's).  The refresh
 * thread, or open.  0, KVT_EOPTVAL (a member twice: logged), -ENOMEM,
 * remote_open's errors; on error every member it opened is closed again.
 */
static int cluster_view_build(struct cluster *cl, const struct cluster_entry *ent,
			      unsigned count, struct cview **out)
{
	struct cview *v = kvt_mem_calloc(cl->mem, 1, cview_size(count));
	int ret = 0;

	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < count; i++) {
		struct cmember *mb = cluster_member_find(cl, ent[i].addr, ent[i].addr_len);
		if (!mb) {
			struct remote_config mc = cl->cfg;
			mb = kvt_mem_calloc(cl->mem, 1, sizeof(*mb));
			if (!mb) {
				ret = -ENOMEM;
				break;
			}
			mb->addr = cluster_intern(cl, ent[i].addr, ent[i].addr_len);
			if (!mb->addr) {
				kvt_mem_free(cl->mem, mb, sizeof(*mb));
				ret = -ENOMEM;
				break;
			}
			mb->next = cl->members;
			cl->members = mb;
			mc.addr = (char *)mb->addr; /* remote.c reads it only */
			mc.addrs = mc.discover = NULL;
			ret = remote_open(&mb->rm, &mc, cl->dram, cl->ns, cl->mem, cl->log);
		}
		/* Listed (even half open): cview_free undoes it. */
		mb->views++;
		v->m[i].mb = mb;
		v->m[i].weight = ent[i].weight;
		v->n = i + 1;
		if (ret < 0)
			break;
	}
	if (ret == 0) {
		v->hot = cl->cfg.hot_replicas ? cl->cfg.hot_replicas : 1;
		if (v->hot > v->n)
			v->hot = v->n;
		if (v->hot > REMOTE_HOT_REPLICAS_MAX)
			v->hot = REMOTE_HOT_REPLICAS_MAX;
	}
	if (ret == 0 && v->n > 1) {
		struct placement_member pm[PLACEMENT_MEMBERS_MAX];
		for (unsigned i = 0; i < v->n; i++) {
			pm[i].name = v->m[i].mb->addr;
			pm[i].weight = v->m[i].weight;
		}
		ret = placement_new(&v->pl, pm, v->n, cl->mem);
		if (ret == KVT_EOPTVAL)
			kvt_logf(cl->log, KVT_LOG_ERROR, "remote: the member list names a member twice");
	}
	if (ret < 0) {
		cview_free(cl, v);
		return ret;
	}
	*out = v;
	return 0;
}

/* Log who joined and who left between views a and b. */
static void cluster_log_change(struct cluster *cl, const struct cview *a, const struct cview *b,
			       uint64_t epoch)
{
	kvt_logf(cl->log, KVT_LOG_INFO, "remote: membership changed (epoch %llu): %u members, was %u",
		 (unsigned long long)epoch, b->n, a->n);
	for (unsigned i = 0; i < b->n; i++) {
		bool was = false;
		for (unsigned j = 0; j < a->n && !was; j++)
			was = a->m[j].mb == b->m[i].mb;
		if (!was)
			kvt_logf(cl->log, KVT_LOG_INFO, "remote: member %s joined (weight %u)",
				 b->m[i].mb->addr, b->m[i].weight);
	}
	for (unsigned j = 0; j < a->n; j++) {
		bool stays = false;
		for (unsigned i = 0; i < b->n && !stays; i++)
			stays = a->m[j].mb == b->m[i].mb;
		if (!stays)
			kvt_logf(cl->log, KVT_LOG_INFO, "remote: member %s left", a->m[j].mb->addr);
	}
}

/* ------------------------------------------------------------------------
 * The refresh thread (remote.discover, remote.refresh_ms)
 */

/* Install the list text if it differs from the one in force.  The
 * refresh thread. */
static int cluster_apply(struct cluster *cl, char *text, uint64_t epoch)
{
	struct cluster_entry *ent;
	struct cview *nv = NULL, *old;
	int count;

	if (cl->list && strcmp(cl->list, text) == 0) {
		kvt_mem_strfree(cl->mem, text);
		return 0;
	}
	ent = kvt_mem_calloc(cl->mem, PLACEMENT_MEMBERS_MAX, sizeof(*ent));
	count = ent ? cluster_parse_addrs(text, strlen(text), ent, PLACEMENT_MEMBERS_MAX)
		    : -ENOMEM;
	if (count > 0)
		count = cluster_view_build(cl, ent, (unsigned)count, &nv);
	kvt_mem_free(cl->mem, ent, ent ? PLACEMENT_MEMBERS_MAX * sizeof(*ent) : 0);
	if (count < 0) {
		kvt_mem_strfree(cl->mem, text);
		return count;
	}
	old = atomic_load(&cl->view);
	cluster_log_change(cl, old, nv, epoch);
	for (unsigned i = 0; i < nv->n && !nv->warm_until_ns; i++) {
		bool was = false;
		for (unsigned j = 0; j < old->n && !was; j++)
			was = old->m[j].mb == nv->m[i].mb;
		if (!was && cl->cfg.warm_ms)
			nv->warm_until_ns = kvt_now_ns() + cl->cfg.warm_ms * 1000000ull;
	}
	cview_swap(cl, nv);
	kvt_mem_strfree(cl->mem, cl->list);
	cl->list = text;
	A(cl->c_view_changes);
	return 0;
}

/* One refresh: ask the members in turn (the one that answered last time
 * first) for their list. */
static void cluster_refresh(struct cluster *cl, struct cdisc *d)
{
	struct cview *v = atomic_load(&cl->view); /* only this thread swaps it */
	unsigned first = 0;
	int rc = -ENOTCONN;

	/* The same member while it answers: servers count their epochs apart,
	 * and two may briefly disagree about the list. */
	for (unsigned i = 0; i < v->n; i++)
		if (v->m[i].mb == cl->seed)
			first = i;
	for (unsigned t = 0; t < v->n; t++) {
		unsigned i = (first + t) % v->n;
		cdisc_reset(d, &cl->cfg, cl->cfg.kinds);
		rc = remote_stats_query(v->m[i].mb->rm, NULL, cdisc_stat, d);
		if (rc == 0 && d->bad)
			rc = -EBADMSG; /* d->why */
		if (rc == 0) {
			cl->seed = v->m[i].mb;
			break;
		}
	}
	if (rc == 0 && d->count > 0) {
		char *text = NULL;
		/* Before the swap: whoever sees the new view sees its epoch. */
		atomic_store(&cl->c_epoch, d->epoch);
		rc = cdisc_text(cl->mem, d, &text);
		if (rc == 0)
			rc = cluster_apply(cl, text, d->epoch);
	}
	if (rc < 0) {
		A(cl->c_refresh_errors);
		if (!cl->refresh_failing)
			kvt_logf(cl->log, KVT_LOG_WARN,
				 "remote: membership refresh failed (%s); keeping the last view of %u members",
				 rc == -EBADMSG && d->why ? d->why : kvt_strerror(rc), v->n);
		cl->refresh_failing = true;
		return;
	}
	if (cl->refresh_failing)
		kvt_logf(cl->log, KVT_LOG_INFO, "remote: membership refresh works again");
	cl->refresh_failing = false;
	A(cl->c_refreshes); /* a member with no list (cluster.source none) keeps the view */
}

static void *cluster_refresh_main(void *arg)
{
	struct cluster *cl = arg;
	struct cdisc *d = kvt_mem_calloc(cl->mem, 1, sizeof(*d));

	pthread_mutex_lock(&cl->rlock);
	while (!cl->stop) {
		struct timespec ts =
			kvt_deadline(CLOCK_MONOTONIC, (uint64_t)cl->refresh_ms * 1000000u);
		while (!cl->stop && pthread_cond_timedwait(&cl->rcond, &cl->rlock, &ts) == 0)
			;
		if (cl->stop)
			break;
		pthread_mutex_unlock(&cl->rlock);
		if (d)
			cluster_refresh(cl, d);
		else
			A(cl->c_refresh_errors); /* no memory for the answer */
		cview_reap(cl);
		pthread_mutex_lock(&cl->rlock);
	}
	pthread_mutex_unlock(&cl->rlock);
	kvt_mem_free(cl->mem, d, sizeof(*d));
	return NULL;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

static void cluster_free(struct cluster *cl)
{
	struct cview *v;
	if (cl->dynamic) {
		pthread_mutex_lock(&cl->rlock);
		cl->stop = true;
		pthread_cond_signal(&cl->rcond);
		pthread_mutex_unlock(&cl->rlock);
		pthread_join(cl->thread, NULL);
	}
	/* Every member stops before any is freed (remote_stop says why);
	 * what was in flight completes, dropping its views. */
	for (struct cmember *mb = cl->members; mb; mb = mb->next)
		if (mb->rm)
			remote_stop(mb->rm);
	v = atomic_load(&cl->view);
	if (v)
		cview_free(cl, v);
	while ((v = cl->retired)) {
		cl->retired = v->next;
		cview_free(cl, v);
	}
	kvt_mem_strfree(cl->mem, cl->list);
	while (cl->addrs) {
		struct caddr *a = cl->addrs;
		cl->addrs = a->next;
		kvt_mem_free(cl->mem, a, a->size);
	}
	kvt_mem_free(cl->mem, cl->slots, (size_t)cl->slot_count * sizeof(*cl->slots));
	pthread_cond_destroy(&cl->rcond);
	pthread_mutex_destroy(&cl->rlock);
	pthread_mutex_destroy(&cl->alock);
	kvt_mem_free(cl->mem, cl, sizeof(*cl));
}

int cluster_open(struct cluster **out, const struct remote_config *cfg, struct dram *dram,
		 struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct cluster *cl;
	struct cluster_entry *ent = NULL;
	struct cview *v = NULL;
	struct remote_config kcfg;
	pthread_condattr_t ca;
	char *found = NULL;
	const char *list;
	int ret = 0, count;

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
		/* Every member (a server named it) may resolve to these only. */
		kcfg = *cfg;
		kcfg.kinds = cluster_kinds(cfg);
		cfg = &kcfg;
		ret = cluster_discover(cfg, dram, ns, mem, log, &found);
		if (ret < 0)
			return ret;
	}
	list = found ? found : cfg->addrs;
	cl = kvt_mem_calloc(mem, 1, sizeof(*cl));
	if (!cl) {
		kvt_mem_strfree(mem, found);
		return -ENOMEM;
	}
	cl->mem = mem;
	cl->log = log;
	cl->cfg = *cfg;
	cl->dram = dram;
	cl->ns = ns;
	cl->list = found;
	cl->refresh_ms = cfg->refresh_ms;
	pthread_mutex_init(&cl->alock, NULL);
	pthread_mutex_init(&cl->rlock, NULL);
	pthread_condattr_init(&ca);
	ret = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl->rcond, &ca); /* made all the same: cluster_free destroys it */
	pthread_condattr_destroy(&ca);
	if (ret < 0)
		goto fail;
	cl->group = cfg->group_blocks ? cfg->group_blocks : REMOTE_DEF_GROUP_BLOCKS;
	ent = kvt_mem_calloc(mem, PLACEMENT_MEMBERS_MAX, sizeof(*ent));
	if (!ent) {
		ret = -ENOMEM;
		goto fail;
	}
	/* 1. The member list: remote.addr is one member, taken whole (a Unix
	 *    path may hold '=' or ','); remote.addrs and what discovery found
	 *    are split. */
	if (!list) {
		ent[0].addr = cfg->addr;
		ent[0].addr_len = strlen(cfg->addr);
		ent[0].weight = 1;
		count = 1;
	} else {
		count = cluster_parse_addrs(list, strlen(list), ent, PLACEMENT_MEMBERS_MAX);
		if (count == KVT_EOPTVAL)
			kvt_logf(log, KVT_LOG_ERROR,
				 "remote: remote.addrs '%s' is not ADDR[=WEIGHT],... (at most %u, weights 1..%u)",
				 list, PLACEMENT_MEMBERS_MAX, PLACEMENT_WEIGHT_MAX);
		if (count < 0 && !found) {
			ret = count;
			goto fail;
		}
	}
	/* 2. The first view: a remote tier per member, each with the shared
	 *    settings, and the placement over them. */
	ret = count < 0 ? count : cluster_view_build(cl, ent, (unsigned)count, &v);
	if (ret < 0 && ret != -ENOMEM && found) {
		/* A list from a seed that this engine cannot use (an address it
		 * cannot parse or resolve): the seeds, as when none answered,
		 * rather than a store that does not open because of what a
		 * server said.  A refresh may bring a usable list later. */
		kvt_logf(log, KVT_LOG_WARN,
			 "remote: the member list from remote.discover is unusable (%s); using the seeds as the members",
			 kvt_strerror(ret));
		count = cluster_parse_addrs(cfg->discover, strlen(cfg->discover), ent,
					    PLACEMENT_MEMBERS_MAX);
		ret = count < 0 ? count : cluster_view_build(cl, ent, (unsigned)count, &v);
		/* Not the list in force: a refresh bringing the same text (an
		 * address that resolves by then) is applied, not taken for
		 * the one already installed (cluster_apply). */
		kvt_mem_strfree(mem, cl->list);
		cl->list = NULL;
	}
	if (ret < 0)
		goto fail;
	atomic_init(&v->refs, 1);
	atomic_init(&cl->view, v);
	/* 3. Anchor memory: for several members, now or after a refresh. */
	cl->dynamic = cfg->discover && cfg->refresh_ms > 0;
	if ((v->n > 1 || cl->dynamic) && cfg->anchor_slots) {
		uint32_t slots = (cfg->anchor_slots + ANCHOR_WAYS - 1) / ANCHOR_WAYS * ANCHOR_WAYS;
		cl->slots = kvt_mem_calloc(mem, slots, sizeof(*cl->slots));
		if (!cl->slots) {
			ret = -ENOMEM;
			goto fail;
		}
		cl->slot_count = slots;
	}
	if (v->n > 1)
		kvt_logf(log, KVT_LOG_INFO,
			 "remote: %u kvtierd members, groups of %u blocks, first group on %u", v->n,
			 cl->group, v->hot);
	/* 4. The refresh thread: from here on v may be swapped and freed. */
	if (cl->dynamic) {
		ret = -pthread_create(&cl->thread, NULL, cluster_refresh_main, cl);
		if (ret < 0) {
			cl->dynamic = false;
			goto fail;
		}
		pthread_setname_np(cl->thread, "kvt-cluster");
	}
	kvt_mem_free(mem, ent, PLACEMENT_MEMBERS_MAX * sizeof(*ent));
	*out = cl;
	return 0;
fail:
	kvt_mem_free(mem, ent, ent ? PLACEMENT_MEMBERS_MAX * sizeof(*ent) : 0);
	cluster_free(cl);
	return ret;
}

void cluster_close(struct cluster *cl)
{
	if (cl)
		cluster_free(cl);
}

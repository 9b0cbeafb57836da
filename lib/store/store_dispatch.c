/*
 * store_dispatch.c - running one request: DRAM first, then the chain of
 * tiers below it (tier.h), in the order store_tiers.c set.
 *
 * Every operation is one walk over s->tiers[]: a tier that misses passes
 * the request on to the next, a hit ends the walk (gets: the tier
 * published the block in DRAM and the request is served from it).  A tier
 * may answer later (TIER_PENDING): its callback resumes the walk at the
 * next tier, on whatever thread it runs.  While a request walks, priv_[1]
 * holds its place in the chain (the index, and CUR_LOCAL_HIT) and
 * priv_[2] what the tiers so far answered (req_stash): both are free
 * while a request runs (store_int.h).
 *
 * The walks, per operation:
 *   get      DRAM; then each tier's get (promote into DRAM) until one has
 *            it; a part read (KVT_F_PART) asks a tier's get_part first, a
 *            whole-value read into the caller's buffers its get_into; a
 *            quiet one (KVT_F_QUIET): DRAM's quiet ref, then the tiers'
 *            get_part_quiet only
 *   exists   DRAM; each tier's find, exists, or a one-key lookup
 *   lookup   key by key over DRAM and the tiers with a find (an index in
 *            memory), then each other tier's lookup from the first key
 *            that had none, then the local ones again where that run
 *            ended (up to STORE_LOOKUP_ROUNDS times)
 *   prefetch per key: down the chain until a tier has it
 *   put      put-if-absent over the tiers with a find; DRAM (unless its
 *            admission says no: store_put_admit); each tier's put_down
 *            (write-down by policy), then each put_through (write-through
 *            from the caller's parts), merged
 *   delete,  the tiers' prepare (tombstones), DRAM, the prepared tiers,
 *   clear    DRAM again (a promotion may have raced), then the rest
 *   flush    each tier's flush, in order
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* priv_[1] while a request walks: the tier index, and a flag. */
#define CUR_INDEX 0xffu
#define CUR_LOCAL_HIT 0x100u /* delete: something answered a hit without waiting */

static inline unsigned req_cursor(const struct kvt_req *r)
{
	return (unsigned)(uintptr_t)r->priv_[1];
}

static inline void req_set_cursor(struct kvt_req *r, unsigned c)
{
	r->priv_[1] = (void *)(uintptr_t)c;
}

static inline void req_stash(struct kvt_req *r, int64_t v)
{
	r->priv_[2] = (void *)(intptr_t)v;
}

static inline int64_t req_stashed(const struct kvt_req *r)
{
	return (int64_t)(intptr_t)r->priv_[2];
}

/* The request's key, and where it sits in its prompt (KVT_F_PROMPT). */
static inline struct tier_key req_tkey(const struct kvt_req *r)
{
	struct tier_key k = { .ns = r->ns, .key = &r->key };
	if (r->flags & KVT_F_PROMPT) {
		k.prompt = r->keys;
		k.pos = r->key_count - 1;
	}
	return k;
}

/* A walk ended in a callback: complete unless it went on pending. */
static inline void req_finish(struct kvt_store *s, struct kvt_req *r, int status)
{
	if (status != STORE_PENDING)
		req_complete(s, r, status);
}

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

/* ------------------------------------------------------------------------
 * KV events
 */

/* Tokens per block of namespace ns, from its canonical text. */
static uint32_t ns_block_tokens(struct kvt_store *s, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(&s->ns, ns);
	const char *p = e ? strstr(e->canon, "block_tokens=") : NULL;
	return p ? (uint32_t)strtoul(p + 13, NULL, 10) : 0;
}

void store_event_stored(struct kvt_store *s, const struct kvt_req *r, uint32_t ns,
			const struct kvt_key *key)
{
	const struct kvt_key *parent = NULL;
	if (!s->events)
		return;
	if (r && (r->flags & KVT_F_PROMPT) && r->key_count > 1)
		parent = &r->keys[r->key_count - 2];
	kvevents_stored(s->events, quota_group_lookup(&s->quota, ns), key, parent,
			ns_block_tokens(s, ns));
}

void store_evicted_event(void *ctx, const struct dram_victim *v)
{
	struct kvt_store *s = ctx;
	kvevents_removed(s->events, quota_group_lookup(&s->quota, v->ns), v->key);
}

/* ------------------------------------------------------------------------
 * Gets
 */

/* r pins item (a ref of the caller's, given to the pin), whose view is
 * view[0..vc) and length len: KVT_OK, r's fields set, tier its tier; or an
 * error, the ref dropped. */
static int store_pin_item(struct kvt_store *s, struct kvt_req *r, struct dram_item *item,
			  const struct iovec *view, unsigned vc, uint64_t len, uint32_t tier)
{
	int ret = pin_add(s, r, item, view, vc);
	if (ret < 0) {
		dram_unpin(s->dram, item);
		return ret;
	}
	r->length = len;
	r->value_len = len;
	r->value_flags = dram_item_flags(item);
	r->tier = tier;
	return KVT_OK;
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
		return store_pin_item(s, r, item, view, vc, len, (uint32_t)tier);
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

/* Serve a get from the item a tier published (we hold a ref: it is
 * dropped here, or owned by the pin). */
static int store_serve_item(struct kvt_store *s, struct kvt_req *r, struct dram_item *item,
			    uint32_t tier)
{
	int status;
	r->value_flags = dram_item_flags(item);
	if (r->op == KVT_OP_GET_PINNED) {
		struct iovec view[DRAM_MAX_RUNS];
		uint64_t len;
		unsigned vc = dram_item_view(s->dram, item, view, &len);
		status = pin_add(s, r, item, view, vc);
		if (status == 0) {
			r->length = len;
			r->value_len = len;
			r->tier = tier;
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
			r->tier = tier;
	}
	if (item)
		dram_unpin(s->dram, item);
	return status;
}

static void store_tier_got(void *ctx, int status, struct dram_item *item);
static void store_part_got(void *ctx, const struct tier_result *res);

/* A get missed DRAM and the tiers before `from`: ask the rest.
 * STORE_PENDING or a status. */
static int store_get_walk(struct kvt_store *s, struct kvt_req *r, unsigned from)
{
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int ret;
		/* One part of a block that is not sealed: only that part's
		 * bytes (S3: ranged GETs), nothing promoted; else the block. */
		if (t->ops->get_part && r->op == KVT_OP_GET && (r->flags & KVT_F_PART) &&
		    !seal_key_of(s->seal, r->ns)) {
			req_set_cursor(r, i);
			if (t->ops->get_part(t->t, &k, r->part, r->iov, r->iov_count,
					     IO_PRIO_DEMAND, store_part_got, r) == TIER_PENDING)
				return STORE_PENDING;
		}
		/* A whole value into the caller's buffers: straight there from
		 * a tier that can (the remote tier: off the wire). */
		if (t->ops->get_into && r->op == KVT_OP_GET && r->iov_count &&
		    !(r->flags & (KVT_F_PART | KVT_F_RANGE)) && !seal_key_of(s->seal, r->ns)) {
			req_set_cursor(r, i);
			if (t->ops->get_into(t->t, &k, r->iov, r->iov_count, IO_PRIO_DEMAND,
					     store_part_got, r) == TIER_PENDING)
				return STORE_PENDING;
			continue; /* a miss here, now (server down): the next tier */
		}
		if (!t->ops->get)
			continue;
		req_set_cursor(r, i);
		ret = t->ops->get(t->t, &k, IO_PRIO_DEMAND, store_tier_got, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		/* It reached DRAM meanwhile (a put, or another reader's promotion
		 * that has finished): serve it from there. */
		if (ret == KVT_EXISTS)
			return store_serve_dram(s, r, KVT_TIER_DRAM) == KVT_OK ? KVT_OK : KVT_MISS;
		/* Still being promoted by another reader, no DRAM room to promote
		 * into, too big for DRAM, out of memory: the model sees a miss,
		 * never an error, for a block it cannot have now. */
		if (ret != KVT_MISS)
			return KVT_MISS;
	}
	return KVT_MISS; /* a server that is down is a miss (remote.fast_fails) */
}

/*
 * A tier finished a promotion (its thread): serve the waiting get from the
 * item it published, or, if it did not (another reader or a put got there
 * first, or the tier did not have it after all), from DRAM, else from the
 * tiers after it.
 */
static void store_tier_got(void *ctx, int status, struct dram_item *item)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;

	if (status == KVT_OK) {
		req_complete(s, r, store_serve_item(s, r, item, s->tiers[i].ops->id));
		return;
	}
	if (store_serve_dram(s, r, KVT_TIER_DRAM) == KVT_OK) {
		req_complete(s, r, KVT_OK);
		return;
	}
	req_finish(s, r, store_get_walk(s, r, i + 1));
}

static int store_quiet_part_walk(struct kvt_store *s, struct kvt_req *r, unsigned from);

/* A tier answered a part read, a quiet part read or a get_into: the bytes
 * are in the caller's buffers; a miss goes on to the next tier, as the
 * walk it came from does. */
static void store_part_got(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;

	if (res->status == KVT_MISS) {
		req_finish(s, r, r->flags & KVT_F_QUIET ? store_quiet_part_walk(s, r, i + 1) :
							    store_get_walk(s, r, i + 1));
		return;
	}
	r->length = res->status == KVT_OK ? res->count : 0;
	r->value_len = res->value_len;
	r->value_flags = res->value_flags;
	if (res->status == KVT_OK)
		r->tier = s->tiers[i].ops->id;
	req_complete(s, r, res->status);
}

/*
 * Quiet gets (kvtier.h, KVT_F_QUIET): nothing the store keeps changes.
 * From DRAM: a quiet ref (no hit, read count, recency or admission), pinned
 * as usual.  From a tier with get_copy (SSD): a private, verified copy held
 * by a SLOT_COPY pin until kvt_pin_release; nothing is promoted.  When
 * every tier missed, DRAM is asked once more (store_quiet_part_walk says
 * why: a promotion may have moved the block up meanwhile).
 */
static int store_quiet_walk(struct kvt_store *s, struct kvt_req *r, unsigned from);

static void store_copied(void *ctx, int status, struct ssd_copy *copy)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;
	struct iovec view = { 0 };
	struct iovec *v;

	if (status == KVT_MISS) {
		req_finish(s, r, store_quiet_walk(s, r, i + 1));
		return;
	}
	if (status == KVT_OK) {
		view.iov_base = (void *)copy->value;
		view.iov_len = copy->value_len;
		status = slot_add(s, (uintptr_t)r, NULL, copy, &view, 1, SLOT_COPY, 0, &r->pin,
				  &v);
		if (status == 0) {
			r->view = v;
			r->view_count = 1;
			r->length = copy->value_len;
			r->value_len = copy->value_len;
			r->value_flags = copy->value_flags;
			r->tier = s->tiers[i].ops->id;
			copy = NULL; /* the pin owns it */
		}
	}
	ssd_copy_free(&s->mem, copy);
	req_complete(s, r, status);
}

/* DRAM's block, through a quiet ref, pinned: KVT_OK, KVT_MISS or an error. */
static int store_quiet_dram(struct kvt_store *s, struct kvt_req *r)
{
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *item;
	uint64_t len = 0;
	unsigned vc;

	if (dram_ref_quiet(s->dram, r->ns, &r->key, &item) != KVT_OK)
		return KVT_MISS;
	vc = dram_item_view(s->dram, item, view, &len);
	return store_pin_item(s, r, item, view, vc, len, KVT_TIER_DRAM);
}

static int store_quiet_walk(struct kvt_store *s, struct kvt_req *r, unsigned from)
{
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int ret;
		if (!t->ops->get_copy)
			continue;
		req_set_cursor(r, i);
		ret = t->ops->get_copy(t->t, &k, store_copied, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		/* Out of memory: a miss, as for any get that cannot be
		 * served now. */
		if (ret != KVT_MISS)
			return KVT_MISS;
	}
	return store_quiet_dram(s, r);
}

static int store_get_quiet(struct kvt_store *s, struct kvt_req *r)
{
	int ret = store_quiet_dram(s, r);
	return ret == KVT_MISS ? store_quiet_walk(s, r, 0) : ret;
}

/*
 * Quiet part reads (KVT_OP_GET with KVT_F_PART | KVT_F_QUIET): one part
 * into the caller's buffers, as quietly as a quiet pinned get.  From DRAM
 * through a quiet ref; else from the tiers with a quiet part read
 * (get_part_quiet; the SSD: header and part only, nothing promoted, the
 * entry not marked read).  The shared and remote tiers are not asked.
 * When every tier missed, DRAM is asked once more, as store_tier_got
 * does: a promotion (another get's) publishes the block in DRAM and then,
 * as the victim tier, drops the SSD's entry, so a read that asked DRAM
 * before the publish and the SSD after the drop (or whose SSD read the
 * drop voided: ssd_read_part) would miss a block the store held all along
 * -- an S3 HEAD's 404 for an object that exists.
 */
static int store_part_quiet_dram(struct kvt_store *s, struct kvt_req *r)
{
	struct dram_read rd = { .flags = r->flags, .part = r->part, .dst = r->iov,
				.dst_count = r->iov_count };
	struct dram_item *item;
	int ret;

	if (dram_ref_quiet(s->dram, r->ns, &r->key, &item) != KVT_OK)
		return KVT_MISS;
	ret = dram_read_item(s->dram, item, &rd);
	dram_unpin(s->dram, item);
	r->length = rd.copied;
	r->value_len = rd.value_len;
	r->value_flags = rd.value_flags;
	if (ret == KVT_OK)
		r->tier = KVT_TIER_DRAM;
	return ret;
}

static int store_quiet_part_walk(struct kvt_store *s, struct kvt_req *r, unsigned from)
{
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		if (!t->ops->get_part_quiet)
			continue;
		req_set_cursor(r, i);
		int ret = t->ops->get_part_quiet(t->t, &k, r->part, r->iov, r->iov_count,
						 IO_PRIO_DEMAND, store_part_got, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		/* A part past the value's, known from the index (the SSD's):
		 * no read; value_len as DRAM's KVT_ERANGE says it. */
		if (ret == KVT_ERANGE) {
			r->length = 0;
			if (!t->ops->find || t->ops->find(t->t, r->ns, &r->key, &r->value_len) < 0)
				r->value_len = 0;
			return KVT_ERANGE;
		}
	}
	/* Absent, or out of memory: a miss, unless a promotion moved the
	 * block up meanwhile (above). */
	return store_part_quiet_dram(s, r);
}

static int store_get_part_quiet(struct kvt_store *s, struct kvt_req *r)
{
	int ret;

	if (seal_key_of(s->seal, r->ns))
		return KVT_EBADOP; /* as quiet pinned gets: not with a seal key */
	ret = store_part_quiet_dram(s, r);
	return ret == KVT_MISS ? store_quiet_part_walk(s, r, 0) : ret;
}

/* ------------------------------------------------------------------------
 * Exists and lookups
 */

static void store_exists_done(void *ctx, const struct tier_result *res);

/*
 * An exists walks the tiers until one has the block.  A tier that fails
 * (a pod that timed out or refused, out of memory: not a miss) is a miss
 * there, the next may have it; with KVT_F_ERRORS the first such error,
 * kept in the stash, is the answer where no tier had the block, so that
 * a caller that acts on a miss (kvtierd's S3 Abort and UploadPart: a part
 * deleted, an upload taken for gone) can tell "not there" from "not
 * known" (until s3e47, 2026-12-07, it was a miss whatever the caller).
 */
static int store_exists_walk(struct kvt_store *s, struct kvt_req *r, unsigned from)
{
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int ret;
		if (t->ops->find) {
			ret = t->ops->find(t->t, r->ns, &r->key, NULL);
		} else {
			req_set_cursor(r, i);
			if (t->ops->exists)
				ret = t->ops->exists(t->t, &k, store_exists_done, r);
			else if (t->ops->lookup)
				ret = t->ops->lookup(t->t, r->ns, &r->key, 0, 1, NULL,
						     store_exists_done, r);
			else
				continue;
		}
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		if (ret == KVT_OK) {
			r->tier = t->ops->id;
			return KVT_OK;
		}
		if (ret < 0 && ret != KVT_MISS && !req_stashed(r))
			req_stash(r, ret);
	}
	if ((r->flags & KVT_F_ERRORS) && req_stashed(r) < 0)
		return (int)req_stashed(r);
	return KVT_MISS;
}

static void store_exists_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;
	const struct store_tier *t = &s->tiers[i];
	/* An error of one tier is a miss there: the next may have it (and
	 * the answer, with KVT_F_ERRORS, if none has). */
	bool hit = res->status == KVT_OK && (t->ops->exists || res->count == 1);

	if (hit) {
		r->tier = t->ops->id;
		req_complete(s, r, KVT_OK);
		return;
	}
	if (res->status < 0 && res->status != KVT_MISS && !req_stashed(r))
		req_stash(r, res->status);
	req_finish(s, r, store_exists_walk(s, r, i + 1));
}

static void store_lookup_done(void *ctx, const struct tier_result *res);

/*
 * DRAM and the tiers with a find, key by key from key n: the keys found
 * there in a row, their tiers in r->tiers (KVT_TIER_NONE after them), their
 * load estimate added to r->load_ns.  Returns the first key none had.
 */
static uint64_t store_lookup_local(struct kvt_store *s, struct kvt_req *r, uint64_t n)
{
	struct dram *d = s->dram;
	uint64_t dram_bytes = 0;

	if (!s->tier_find) {
		if (d)
			n += (uint64_t)dram_lookup(d, r->ns, r->keys + n, r->key_count - n,
						   r->tiers ? r->tiers + n : NULL, &dram_bytes);
		else if (r->tiers)
			memset(r->tiers + n, KVT_TIER_NONE, r->key_count - n);
	} else {
		/* Key by key: a block may be in DRAM or in any indexed tier. */
		uint64_t bytes[STORE_TIERS_MAX] = { 0 };
		for (; n < r->key_count; n++) {
			uint8_t tier = KVT_TIER_NONE;
			if (d && dram_lookup(d, r->ns, &r->keys[n], 1, NULL, &dram_bytes) == 1)
				tier = KVT_TIER_DRAM;
			for (unsigned i = 0; tier == KVT_TIER_NONE && i < s->tier_count; i++) {
				const struct store_tier *t = &s->tiers[i];
				uint64_t len = 0;
				if (t->ops->find &&
				    t->ops->find(t->t, r->ns, &r->keys[n], &len) == KVT_OK) {
					tier = (uint8_t)t->ops->id;
					bytes[i] += len;
				}
			}
			if (tier == KVT_TIER_NONE)
				break;
			if (r->tiers)
				r->tiers[n] = tier;
		}
		if (r->tiers)
			memset(r->tiers + n, KVT_TIER_NONE, r->key_count - n);
		for (unsigned i = 0; i < s->tier_count; i++)
			if (s->tiers[i].ops->find && s->tiers[i].ops->load_ns)
				r->load_ns += s->tiers[i].ops->load_ns(s->tiers[i].t, bytes[i]);
	}
	r->load_ns += (uint64_t)((double)dram_bytes * 1e9 / s->dram_bps);
	return n;
}

/*
 * A lookup's rounds: the local tiers' run, then the tiers without a find
 * (the pod store) from where it ended; where the pod's run ends, the local
 * tiers may hold the next block (a put the pod evicted, or that local DRAM
 * kept while the pod did not take it again: KVT_EXISTS), so the walk goes
 * back to them and, if they had it, to the pod again.  Without that the
 * prefix ended at a hole in the pod's copy of a chain whose next blocks
 * were here, and the engine recomputed (and re-put) them: with
 * remote.put_local=auto, whose local copies leave holes, 16,322 puts of the
 * repository's trace found their block present.  At most
 * STORE_LOOKUP_ROUNDS round trips more per lookup.
 */
#define STORE_LOOKUP_ROUNDS 4
#define CUR_ROUND_SHIFT 12

/* Tiers without a find, from `from`, each asked for the keys after the n
 * leading ones found so far.  r->length: n. */
static int store_lookup_walk(struct kvt_store *s, struct kvt_req *r, unsigned from, uint64_t n)
{
	unsigned round = req_cursor(r) >> CUR_ROUND_SHIFT;
	r->length = n;
	for (unsigned i = from; i < s->tier_count && n < r->key_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		if (t->ops->find || !t->ops->lookup)
			continue;
		req_stash(r, (int64_t)n);
		req_set_cursor(r, i | round << CUR_ROUND_SHIFT);
		if (t->ops->lookup(t->t, r->ns, r->keys, (uint32_t)n, r->key_count, r->tiers,
				   store_lookup_done, r) == TIER_PENDING)
			return STORE_PENDING;
	}
	return KVT_OK;
}

static void store_lookup_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX, round = req_cursor(r) >> CUR_ROUND_SHIFT;
	uint64_t n = (uint64_t)req_stashed(r);
	if (res->status == KVT_OK && res->count > 0) {
		n += res->count;
		r->load_ns += res->load_ns;
		/* The pod's run ended: the local tiers may go on (above). */
		if (n < r->key_count && round < STORE_LOOKUP_ROUNDS) {
			uint64_t m = store_lookup_local(s, r, n);
			if (m > n) {
				atomic_fetch_add_explicit(&s->lookup_rounds, 1,
							  memory_order_relaxed);
				req_set_cursor(r, (round + 1) << CUR_ROUND_SHIFT);
				req_finish(s, r, store_lookup_walk(s, r, 0, m));
				return;
			}
		}
	} else if (res->status == KVT_OK) {
		r->load_ns += res->load_ns;
	}
	req_finish(s, r, store_lookup_walk(s, r, i + 1, n));
}

static int store_lookup(struct kvt_store *s, struct kvt_req *r)
{
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->note_prompt)
			s->tiers[i].ops->note_prompt(s->tiers[i].t, r->keys, r->key_count);
	uint64_t n = store_lookup_local(s, r, 0);
	if (s->dram) /* the eviction policy learns the chain (doc/policies.md) */
		dram_note_prefix(s->dram, r->ns, r->keys, r->key_count, n);
	req_set_cursor(r, 0);
	return store_lookup_walk(s, r, 0, n);
}

/* ------------------------------------------------------------------------
 * Prefetch
 */

struct prefetch_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t outstanding;
	uint64_t promoted;
};

/* One key of a prefetch in flight: where it is in the chain. */
struct prefetch_key {
	struct kvt_store *s;
	struct prefetch_wait *w;
	struct tier_key k;
	unsigned tier;
};

static void store_prefetched(void *ctx, int status, struct dram_item *item);

/* Ask the tiers from pk->tier on: true if one took it (its callback runs). */
static bool store_prefetch_walk(struct prefetch_key *pk)
{
	struct kvt_store *s = pk->s;
	for (; pk->tier < s->tier_count; pk->tier++) {
		const struct store_tier *t = &s->tiers[pk->tier];
		int ret;
		if (!t->ops->get)
			continue;
		ret = t->ops->get(t->t, &pk->k, IO_PRIO_PREFETCH, store_prefetched, pk);
		if (ret == TIER_PENDING)
			return true;
		if (ret != KVT_MISS)
			return false; /* in DRAM already, or cannot now */
	}
	return false;
}

static void store_prefetch_end(struct prefetch_wait *w, bool promoted)
{
	pthread_mutex_lock(&w->lock);
	w->outstanding--;
	w->promoted += promoted;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* A tier answered one key (its thread): done, or a miss there goes on. */
static void store_prefetched(void *ctx, int status, struct dram_item *item)
{
	struct prefetch_key *pk = ctx;
	if (status == KVT_OK)
		dram_unpin(pk->s->dram, item);
	if (status != KVT_OK && status != KVT_EXISTS) {
		pk->tier++;
		if (store_prefetch_walk(pk))
			return;
	}
	store_prefetch_end(pk->w, status == KVT_OK);
}

/* Prefetch on a worker: promote what only lower tiers hold, wait for it.
 * Each key goes down the chain until a tier has it. */
static int store_prefetch(struct kvt_store *s, struct kvt_req *r)
{
	struct prefetch_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct prefetch_key *pks = NULL;
	size_t pks_len = (size_t)r->key_count * sizeof(*pks);
	uint64_t in_dram = 0;
	int status = KVT_OK;

	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->note_prompt)
			s->tiers[i].ops->note_prompt(s->tiers[i].t, r->keys, r->key_count);
	if (s->tier_count > 0 && !(pks = kvt_mem_alloc(&s->mem, pks_len)))
		return -ENOMEM;
	for (uint32_t i = 0; i < r->key_count; i++) {
		if (__atomic_load_n(&r->priv_flags_, __ATOMIC_RELAXED)) {
			status = -ECANCELED; /* kvt_cancel while running: stop issuing */
			break;
		}
		if (s->dram && dram_exists(s->dram, r->ns, &r->keys[i]) == KVT_OK) {
			in_dram++;
			continue;
		}
		if (s->tier_count == 0)
			continue;
		pks[i] = (struct prefetch_key){ .s = s, .w = &w, .tier = 0,
			.k = { .ns = r->ns, .key = &r->keys[i], .prompt = r->keys, .pos = i } };
		pthread_mutex_lock(&w.lock);
		w.outstanding++;
		pthread_mutex_unlock(&w.lock);
		if (!store_prefetch_walk(&pks[i]))
			store_prefetch_end(&w, false);
	}
	pthread_mutex_lock(&w.lock);
	while (w.outstanding > 0)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	kvt_mem_free(&s->mem, pks, pks_len);
	r->length = in_dram + w.promoted;
	/* Canceled while the last reads were in flight: still canceled. */
	if (__atomic_load_n(&r->priv_flags_, __ATOMIC_RELAXED))
		status = -ECANCELED;
	return status;
}

/* ------------------------------------------------------------------------
 * Puts
 */

/* A put of a present key is a no-op across tiers: a block a tier with an
 * index (SSD) holds is present.  For a put DRAM does not take
 * (store_put_admit), which has no put-if-absent of DRAM's to ask them. */
static bool store_tiers_have(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	for (unsigned i = 0; s->tier_find && i < s->tier_count; i++)
		if (s->tiers[i].ops->find &&
		    s->tiers[i].ops->find(s->tiers[i].t, ns, key, NULL) == KVT_OK)
			return true;
	return false;
}

/*
 * The put-if-absent of a put whose bytes go in through DRAM (dram_put_crcs,
 * seal_put, a reservation's dram_reserve_put), asked by DRAM under the
 * key's shard lock once DRAM holds no copy of the key (dram_set_absent_hook,
 * set when a tier has put_over): KVT_EXISTS if a tier holds the block (its
 * put_over: the SSD's published entry), else KVT_OK, each tier having
 * dropped what the put replaces (the SSD's unpublished entry, dead or a
 * carry in flight: its tombstone then comes before the new bytes'
 * write-down).  A key DRAM holds is refused before this is asked: until
 * 2026-12-06 the SSD logged a tombstone for its dead entry all the same --
 * a block promoted into DRAM (ssd.first_hit=cold) put again while there
 * (test_ssd_fsck dead_held); the reservation, until 2026-12-07.
 *
 * Under DRAM's lock, DRAM's ask and the tiers' are one step with the
 * put's entry into DRAM: a write-down publishes the block's SSD entry
 * before DRAM lets its copy go (wd_finish), and a promotion holds its
 * DRAM reservation before it kills the SSD entry, so a block moving
 * either way is in one of the two.  Until 2026-12-07 the store asked in
 * steps, no lock held between them: first the tiers' find
 * (store_tiers_have, a pending entry a miss) then DRAM; from 2026-12-07
 * DRAM (dram_put_exists), the tiers' put_over, then DRAM's put-if-absent.
 * A victim's write-down finishing between the first two let the put in
 * over the SSD's live copy of the key's old bytes (test_ssd_fsck
 * wd_reput_race); a second put of the key entering DRAM after the DRAM
 * ask and leaving it, written down, before the put-if-absent did the same
 * with its bytes (test_ssd_fsck put_reput_race).  The put's own
 * write-down was then skipped as already down (wd_already_down), and once
 * DRAM evicted it the other bytes were served: a read going backwards
 * (doc/ssd.md "A put racing a write-down").  Called from the store only.
 */
static int store_below_absent(void *ctx, uint32_t ns, const struct kvt_key *key, bool wait)
{
	struct kvt_store *s = ctx;
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->put_over) {
			int ret = s->tiers[i].ops->put_over(s->tiers[i].t, ns, key, wait);
			if (ret == KVT_EXISTS || ret == -EAGAIN)
				return ret;
		}
	return KVT_OK;
}

void store_put_absent_hook(struct kvt_store *s)
{
	if (s->dram)
		dram_set_absent_hook(s->dram, s->tier_over ? store_below_absent : NULL, s);
}

/*
 * Before a put's bytes go in through DRAM's put-if-absent: KVT_EXISTS if
 * a tier with an index but no put_over (none built in) holds the key,
 * else KVT_OK.  The tiers with put_over (the SSD) are asked by DRAM,
 * under its lock (store_below_absent): no lookup of theirs here, where
 * until 2026-12-07 the SSD was asked twice for a new key
 * (store_tiers_have, then put_over).
 */
int store_put_absent(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	if (KVT_UNLIKELY(s->debug_put_hook != NULL))
		s->debug_put_hook(s, s->debug_put_ctx);
	for (unsigned i = 0; s->tier_find && i < s->tier_count; i++)
		if (s->tiers[i].ops->find && !s->tiers[i].ops->put_over &&
		    s->tiers[i].ops->find(s->tiers[i].t, ns, key, NULL) == KVT_OK)
			return KVT_EXISTS;
	return KVT_OK;
}

/* A block entered DRAM: each tier writes it down by its policy. */
static void store_put_down(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	for (unsigned i = 0; s->tier_down && i < s->tier_count; i++)
		if (s->tiers[i].ops->put_down)
			s->tiers[i].ops->put_down(s->tiers[i].t, ns, key);
}

/* A put's value length: its parts' bytes. */
static uint64_t req_value_len(const struct kvt_req *r)
{
	uint64_t len = 0;
	for (unsigned i = 0; i < r->iov_count; i++)
		len += r->iov[i].iov_len;
	return len;
}

/* Room for a put in the tiers that must take it at once (a persistent
 * namespace's write-down): they may wait, bounded; KVT_OK or an error the
 * put returns (nothing stored). */
static int store_put_room(struct kvt_store *s, const struct kvt_req *r)
{
	uint64_t len = 0;
	for (unsigned i = 0; i < s->tier_count; i++) {
		int ret;
		if (!s->tiers[i].ops->put_room)
			continue;
		if (len == 0)
			len = req_value_len(r);
		if (r->flags & KVT_F_NOWAIT)
			ret = s->tiers[i].ops->room_watch
				      ? s->tiers[i].ops->room_watch(s->tiers[i].t, r->ns, len, NULL,
								    NULL)
				      : KVT_OK;
		else
			ret = s->tiers[i].ops->put_room(s->tiers[i].t, r->ns, len);
		if (ret < 0)
			return ret;
	}
	return KVT_OK;
}

/* KVT_OP_ROOM: each tier that may make a put wait, in chain order; none
 * blocks (TIER_PENDING: store_room_done goes on). */
static void store_room_done(void *ctx, const struct tier_result *res);

static int store_room_walk(struct kvt_store *s, struct kvt_req *r, unsigned from)
{
	for (unsigned i = from; i < s->tier_count; i++) {
		int ret;
		if (!s->tiers[i].ops->room_watch)
			continue;
		req_set_cursor(r, i);
		ret = s->tiers[i].ops->room_watch(s->tiers[i].t, r->ns, r->len, store_room_done, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		if (ret < 0)
			return ret;
	}
	return KVT_OK;
}

static void store_room_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;

	if (res->status < 0) {
		req_complete(s, r, res->status);
		return;
	}
	req_finish(s, r, store_room_walk(s, r, (req_cursor(r) & CUR_INDEX) + 1));
}

/* What a write-through merges: the status so far, and a tier's answer.
 * A block that only a lower tier could take (DRAM had no room, was too
 * small, or was not asked: remote.put_local) is that tier's: a success,
 * or its error (server down, deadline: not a full store).  A block DRAM
 * took stays a success whatever the tier says. */
static int store_put_merge(struct kvt_req *r, int status, const struct tier_result *res,
			   uint32_t tier)
{
	if (status != KVT_OK && (res->status == KVT_OK || res->status == KVT_EXISTS)) {
		status = res->status;
		if (status == KVT_OK)
			r->tier = tier;
	} else if ((status == KVT_EFULL || status == KVT_ETOOBIG) && res->status < 0) {
		status = res->status;
	}
	return status;
}

/*
 * Sealed puts (seal.c does the crypto).  The write-through sends the
 * ciphertext: straight from the DRAM block when each sealed part lies in
 * one run (the block is held by a ref until the tiers answered), else
 * sealed again into a buffer (DRAM had no room, or a part straddles runs).
 */
struct store_sealed_wt {
	struct kvt_req *r;
	int status;              /* the put's status so far */
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

static void store_put_done(void *ctx, const struct tier_result *res);
static void store_sealed_done(void *ctx, const struct tier_result *res);

/* Write-through to the tiers from `from` on: the caller's parts, or w's
 * sealed ones.  crcs: the parts' CRC32Cs computed by the DRAM copy, valid
 * during this call only (each tier copies them), or NULL: the caller's
 * (KVT_F_CRC), else each tier computes them.  Returns STORE_PENDING or
 * the put's status (w freed). */
static int store_through_walk(struct kvt_store *s, struct kvt_req *r, unsigned from, int status,
			      struct store_sealed_wt *w, const uint32_t *crcs)
{
	if (!crcs && (r->flags & KVT_F_CRC))
		crcs = r->crcs;
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; s->tier_through && i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int ret;
		if (!t->ops->put_through)
			continue;
		req_set_cursor(r, i);
		if (w) {
			w->status = status;
			ret = t->ops->put_through(t->t, &k, w->parts, w->part_count, NULL,
						  KVT_F_SEALED | store_req_retain(s, r), status,
						  store_sealed_done, w);
		} else {
			req_stash(r, status);
			uint32_t vflags = (r->flags & KVT_F_SEALED) | store_req_retain(s, r);
			ret = t->ops->put_through(t->t, &k, r->iov, r->iov_count, crcs, vflags,
						  status, store_put_done, r);
		}
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		if (ret < 0) /* refused at once (server down): its error */
			status = store_put_merge(r, status, &(struct tier_result){ .status = ret },
						 t->ops->id);
	}
	if (w)
		store_sealed_wt_free(s, w);
	return status;
}

/* A write-through answered (its tier's thread): merge, go on. */
static void store_put_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;
	int status = store_put_merge(r, (int)req_stashed(r), res, s->tiers[i].ops->id);
	req_finish(s, r, store_through_walk(s, r, i + 1, status, NULL, NULL));
}

static void store_sealed_done(void *ctx, const struct tier_result *res)
{
	struct store_sealed_wt *w = ctx;
	struct kvt_req *r = w->r;
	struct kvt_store *s = req_queue(r)->store;
	unsigned i = req_cursor(r) & CUR_INDEX;
	int status = store_put_merge(r, w->status, res, s->tiers[i].ops->id);
	req_finish(s, r, store_through_walk(s, r, i + 1, status, w, NULL));
}

/*
 * remote.put_local=auto: a put skips local DRAM while what was put lately
 * is not read back soon enough for a local copy to serve it.  The store
 * keeps a ghost of its recent puts, copied or not: per slot, a
 * fingerprint of the key and the put clock (bytes put so far, in KiB)
 * when it was put.  A get of a key whose entry is there and younger than
 * DRAM's capacity in bytes put since (a copy made then would most likely
 * still be in DRAM) counts one read of a recent put, once (the entry is
 * cleared); it does not matter whether the put was copied (a local hit)
 * or skipped (a remote one).  Every PUT_AUTO_EVERY puts the store decides
 * from the puts and reads of this epoch and the last (PUT_AUTO_EPOCH puts
 * each): once PUT_AUTO_MIN puts were seen, puts skip while there were
 * fewer reads than one in PUT_AUTO_SHARE of those puts.  A put-only stream (an
 * engine that loads its own blocks from its GPU memory, or the bench's
 * put phase) skips after its first PUT_AUTO_MIN puts; an engine that
 * reads back what it put keeps its copies, and one that stops doing so
 * skips within two epochs; one that starts reading back while skipping
 * copies again as soon as the reads show, since skipped
 * puts feed the ghost as copied ones do (no probe copies, which left
 * holes in local chains: wire10).  This replaced a rule on DRAM's unread
 * evictions (wire7), which waited for DRAM to fill and then for
 * evidence (22-42 % of the bench's puts skipped).  doc/remote.md.
 */
#define PUT_GHOST_SLOTS 16384u  /* entries of the put ghost: 128 KiB */
#define PUT_GHOST_SHIFT 10      /* the clock's unit in an entry: KiB */
#define PUT_AUTO_EVERY 8
#define PUT_AUTO_MIN 16
#define PUT_AUTO_EPOCH 64
#define PUT_AUTO_SHARE 16

int store_put_ghost_open(struct kvt_store *s)
{
	if (!s->dram || !s->tier_through || s->remote_cfg.put_local != REMOTE_PUT_LOCAL_AUTO)
		return 0;
	s->put_auto.ghost = kvt_mem_calloc(&s->mem, PUT_GHOST_SLOTS, sizeof(*s->put_auto.ghost));
	return s->put_auto.ghost ? 0 : -ENOMEM;
}

void store_put_ghost_close(struct kvt_store *s)
{
	if (s->put_auto.ghost)
		kvt_mem_free(&s->mem, (void *)s->put_auto.ghost,
			     PUT_GHOST_SLOTS * sizeof(*s->put_auto.ghost));
	s->put_auto.ghost = NULL;
}

static inline uint32_t put_ghost_fp(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1; /* never 0: 0 is an empty slot */
}

/* A get of the key whose DRAM index hash is h: one read of a recent put if
 * the ghost has it.  The get passes h on to DRAM (dram_get_h), so the
 * ghost costs it a load and a compare, not a second hash of the key
 * (bench/RESULTS.md, hyg12: 65 instructions a 4 KiB get with two). */
static void store_put_ghost_read(struct kvt_store *s, uint64_t h)
{
	_Atomic uint64_t *g = s->put_auto.ghost;
	if (!g)
		return;
	_Atomic uint64_t *e = &g[h & (PUT_GHOST_SLOTS - 1)];
	uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
	if ((uint32_t)(v >> 32) != put_ghost_fp(h))
		return;
	uint64_t horizon = s->dram_cfg.capacity >> PUT_GHOST_SHIFT;
	uint32_t now = (uint32_t)(atomic_load_explicit(&s->put_auto.clock, memory_order_relaxed) >>
				  PUT_GHOST_SHIFT);
	if ((uint32_t)(now - (uint32_t)v) > (horizon < UINT32_MAX / 2 ? horizon : UINT32_MAX / 2))
		return;
	if (!atomic_compare_exchange_strong_explicit(e, &v, 0, memory_order_relaxed,
						     memory_order_relaxed))
		return; /* another get counted it, or a put replaced it */
	atomic_fetch_add_explicit(&s->put_auto.reused, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->put_auto.reuse_total, 1, memory_order_relaxed);
}

static void store_put_auto_decide(struct kvt_store *s)
{
	uint64_t w = atomic_fetch_add_explicit(&s->put_auto.window, PUT_AUTO_EVERY,
					       memory_order_relaxed) + PUT_AUTO_EVERY;
	uint64_t r = atomic_load_explicit(&s->put_auto.reused, memory_order_relaxed);
	uint64_t pw = atomic_load_explicit(&s->put_auto.prev_puts, memory_order_relaxed);
	uint64_t pr = atomic_load_explicit(&s->put_auto.prev_reads, memory_order_relaxed);
	/* This epoch becomes the last: only the decider whose puts brought
	 * the window to a multiple of the epoch turns it, by one epoch.
	 * Deciders racing past it (threads putting at once) each took w >=
	 * the epoch and each subtracted its own w: the window wrapped below
	 * zero, and the next epoch decided on 2^64 puts (skipping). */
	if (w % PUT_AUTO_EPOCH == 0) {
		r = atomic_exchange_explicit(&s->put_auto.reused, 0, memory_order_relaxed);
		atomic_fetch_sub_explicit(&s->put_auto.window, PUT_AUTO_EPOCH,
					  memory_order_relaxed);
		atomic_store_explicit(&s->put_auto.prev_puts, PUT_AUTO_EPOCH,
				      memory_order_relaxed);
		atomic_store_explicit(&s->put_auto.prev_reads, r, memory_order_relaxed);
		pw = pr = 0;
		w = PUT_AUTO_EPOCH;
	}
	_Static_assert(PUT_AUTO_EPOCH % PUT_AUTO_EVERY == 0, "the window meets each epoch");
	if (pw + w >= PUT_AUTO_MIN)
		atomic_store_explicit(&s->put_auto.skip, (pr + r) * PUT_AUTO_SHARE < pw + w,
				      memory_order_relaxed);
}

/*
 * Local admission of a put: whether DRAM takes a copy.  With a tier that
 * writes puts through and remote.put_local=never (or auto, deciding so:
 * above), the pod store is where the block goes and DRAM is not asked
 * (no reservation, no copy, no eviction): the write-through sends from
 * the caller's parts and the put's local status is KVT_EFULL, which the
 * tier turns into KVT_OK (tier remote) once the server took it.  A block
 * DRAM already holds was put or fetched before: KVT_EXISTS, nothing sent.
 */
static bool store_put_admit(struct kvt_store *s, const struct kvt_req *r)
{
	if (!s->tier_through)
		return true;
	switch (s->remote_cfg.put_local) {
	case REMOTE_PUT_LOCAL_NEVER:
		return false;
	case REMOTE_PUT_LOCAL_AUTO:
		break;
	default:
		return true;
	}
	_Atomic uint64_t *g = s->put_auto.ghost;
	if (!g)
		return true;
	uint64_t clock = atomic_fetch_add_explicit(&s->put_auto.clock, req_value_len(r),
						    memory_order_relaxed);
	uint64_t h = dram_key_hash(s->dram, r->ns, &r->key);
	atomic_store_explicit(&g[h & (PUT_GHOST_SLOTS - 1)],
			      (uint64_t)put_ghost_fp(h) << 32 |
				      (uint32_t)(clock >> PUT_GHOST_SHIFT),
			      memory_order_relaxed);
	uint64_t n = atomic_fetch_add_explicit(&s->put_auto.puts, 1, memory_order_relaxed) + 1;
	if (n % PUT_AUTO_EVERY == 0)
		store_put_auto_decide(s);
	if (!atomic_load_explicit(&s->put_auto.skip, memory_order_relaxed))
		return true;
	atomic_fetch_add_explicit(&s->put_auto.skips, 1, memory_order_relaxed);
	return false;
}

static int store_put_sealed(struct kvt_store *s, struct kvt_req *r, const struct seal_key *sk)
{
	struct dram_item *item = NULL;
	struct store_sealed_wt *w;
	int ret;

	if ((ret = store_put_room(s, r)) < 0)
		return ret;
	if (!store_put_admit(s, r)) { /* sealed into a buffer below, DRAM untouched */
		ret = store_tiers_have(s, r->ns, &r->key) ||
				      dram_exists(s->dram, r->ns, &r->key) == KVT_OK
			      ? KVT_EXISTS
			      : KVT_EFULL;
	} else if ((ret = store_put_absent(s, r->ns, &r->key)) == KVT_OK) {
		ret = seal_put(s->seal, sk, s->dram, r->ns, &r->key, r->iov, r->iov_count,
			       (r->flags & KVT_F_CRC) ? r->crcs : NULL,
			       s->tier_through ? &item : NULL);
	}
	if (ret == KVT_OK) {
		r->tier = KVT_TIER_DRAM;
		store_event_stored(s, r, r->ns, &r->key);
	}
	if (!s->tier_through || !(ret == KVT_OK || ret == KVT_EFULL || ret == KVT_ETOOBIG))
		return ret;
	w = kvt_mem_calloc(&s->mem, 1, sizeof(*w) + r->iov_count * sizeof(struct iovec));
	if (!w) {
		if (item)
			dram_unpin(s->dram, item);
		return ret;
	}
	w->r = r;
	w->status = ret;
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
	return store_through_walk(s, r, 0, ret, w, NULL);
}

static int store_put(struct kvt_store *s, struct kvt_req *r)
{
	int ret;
	if (!s->dram)
		return KVT_ETOOBIG;
	if (KVT_UNLIKELY(seal_key_of(s->seal, r->ns)))
		return store_put_sealed(s, r, seal_key_of(s->seal, r->ns));
	if (!store_put_admit(s, r)) {
		if (store_tiers_have(s, r->ns, &r->key) ||
		    dram_exists(s->dram, r->ns, &r->key) == KVT_OK)
			return KVT_EXISTS;
		return store_through_walk(s, r, 0, KVT_EFULL, NULL, NULL);
	}
	if ((ret = store_put_room(s, r)) < 0)
		return ret;
	/* A put written through needs its parts' CRC32Cs for the wire: the
	 * DRAM copy computes them as it copies (the caller's bytes are read
	 * once for both), rather than the tier in a pass of its own. */
	uint32_t crcs[KVT_PARTS_MAX];
	bool want_crcs = s->tier_through && !(r->flags & KVT_F_CRC);
	unsigned dflags = ((r->flags & KVT_F_SEALED) ? DRAM_SEALED : 0) |
			  (store_req_retain(s, r) ? DRAM_RETAIN : 0) |
			  ((r->flags & KVT_F_REPAIR) ? DRAM_REPAIR : 0);
	const uint32_t *in = (r->flags & KVT_F_CRC) ? r->crcs : NULL;
	ret = store_put_absent(s, r->ns, &r->key);
	if (ret == KVT_OK)
		ret = dram_put_crcs(s->dram, r->ns, &r->key, r->iov, r->iov_count, in,
				    want_crcs ? crcs : NULL, dflags);
	if (ret == KVT_OK) {
		r->tier = KVT_TIER_DRAM;
		store_event_stored(s, r, r->ns, &r->key);
		store_put_down(s, r->ns, &r->key); /* queued, by policy */
	}
	/* Write-through: other engines must see first-time blocks.  The
	 * value goes from the caller's parts, which stay valid until the
	 * request completes; a present key (EXISTS) was written before. */
	return store_through_walk(s, r, 0, ret, NULL, want_crcs && ret == KVT_OK ? crcs : NULL);
}

/* ------------------------------------------------------------------------
 * Deletes and clears
 */

/*
 * Step 1 of both: what the tiers need before anything changes (the SSD
 * tier's tombstone: if it cannot be had, nothing changes).  prep[i] for
 * tier i; false if one failed (the others dropped).
 */
static bool store_prepare(struct kvt_store *s, bool clear, uint32_t ns, const struct kvt_key *key,
			  void **prep)
{
	for (unsigned i = 0; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		prep[i] = NULL;
		if (!t->ops->prepare)
			continue;
		prep[i] = t->ops->prepare(t->t, clear, ns, key);
		if (!prep[i]) {
			while (i-- > 0)
				if (prep[i] && s->tiers[i].ops->unprepare)
					s->tiers[i].ops->unprepare(s->tiers[i].t, prep[i]);
			return false;
		}
	}
	return true;
}

static void store_del_done(void *ctx, const struct tier_result *res);

/* The tiers without prepare, from `from` on: a hit anywhere is a hit; an
 * error of a tier is the request's (the block may still be there).
 * status: the answer so far. */
static int store_del_walk(struct kvt_store *s, struct kvt_req *r, unsigned from, int status,
			  bool local_hit)
{
	struct tier_key k = req_tkey(r);
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int ret;
		if (t->ops->prepare || !t->ops->del)
			continue;
		req_stash(r, status);
		req_set_cursor(r, i | (local_hit ? CUR_LOCAL_HIT : 0));
		ret = t->ops->del(t->t, NULL, &k, store_del_done, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		if (ret == KVT_OK)
			local_hit = true;
		if (status >= 0)
			status = ret < 0 ? ret
					 : (status == KVT_OK || ret == KVT_OK ? KVT_OK : KVT_MISS);
		/* DRAM again: a promotion from this tier that read the block
		 * before the tier removed it (the shared tier waits for those)
		 * published after the passes above -- that only, not a put
		 * made since (store_del_done). */
		if (s->dram)
			dram_delete_promoted(s->dram, r->ns, &r->key);
	}
	if (local_hit && s->events)
		kvevents_removed(s->events, quota_group_lookup(&s->quota, r->ns), &r->key);
	return status;
}

static void store_del_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	unsigned c = req_cursor(r);
	int status = (int)req_stashed(r);
	/* DRAM again: a promotion from this tier answered before the delete
	 * reached it (the remote tier sends the DELETE after it) was
	 * published after the passes above (test_remote_put).  Only such a
	 * copy (DRAM_PROMOTED, visible: the tier completes the delete once
	 * those were published, remote.c remove_hold): a put of the key made
	 * after the delete was issued is the engine's newer value, and it
	 * lost its DRAM copy here, or failed (-ECANCELED) while still
	 * copying (test_remote_put delete_then_put). */
	if (s->dram)
		dram_delete_promoted(s->dram, r->ns, &r->key);
	if (status >= 0)
		status = status == KVT_OK || res->status == KVT_OK ? KVT_OK : KVT_MISS;
	if (res->status < 0)
		status = res->status;
	req_finish(s, r, store_del_walk(s, r, (c & CUR_INDEX) + 1, status,
					(c & CUR_LOCAL_HIT) != 0));
}

static int store_delete(struct kvt_store *s, struct kvt_req *r)
{
	struct dram *d = s->dram;
	void *prep[STORE_TIERS_MAX];
	struct tier_key k = req_tkey(r);
	int a, b = KVT_MISS;

	/* The tombstone first, then DRAM, then the SSD index: ssd.h says why. */
	if (s->tier_prepare && !store_prepare(s, false, r->ns, &r->key, prep))
		return -ENOMEM;
	a = d ? dram_delete(d, r->ns, &r->key) : KVT_MISS;
	if (s->tier_prepare) {
		for (unsigned i = 0; i < s->tier_count; i++)
			if (prep[i] && s->tiers[i].ops->del(s->tiers[i].t, prep[i], &k, NULL,
							    NULL) == KVT_OK)
				b = KVT_OK;
		/* Again: a promotion may have reserved the block in DRAM after
		 * the first pass; this kills it (ssd_promote). */
		if (d && dram_delete(d, r->ns, &r->key) == KVT_OK)
			a = KVT_OK;
	}
	a = a == KVT_OK || b == KVT_OK ? KVT_OK : KVT_MISS;
	return store_del_walk(s, r, 0, a, a == KVT_OK);
}

static void store_clear_done(void *ctx, const struct tier_result *res);

/* The tiers without prepare: r->length is the most blocks any tier
 * removed; an error of a tier is the request's. */
static int store_clear_walk(struct kvt_store *s, struct kvt_req *r, unsigned from, int status)
{
	for (unsigned i = from; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int64_t ret;
		if (t->ops->prepare || !t->ops->clear)
			continue;
		req_stash(r, status);
		req_set_cursor(r, i);
		ret = t->ops->clear(t->t, NULL, r->ns, store_clear_done, r);
		if (ret == TIER_PENDING)
			return STORE_PENDING;
		if (s->dram) /* what a promotion published meanwhile (delete) */
			dram_clear_promoted(s->dram, r->ns);
		if (ret < 0 && status >= 0)
			status = (int)ret;
		else if (ret > 0 && (uint64_t)ret > r->length)
			r->length = (uint64_t)ret;
	}
	return status;
}

static void store_clear_done(void *ctx, const struct tier_result *res)
{
	struct kvt_req *r = ctx;
	struct kvt_store *s = req_queue(r)->store;
	int status = (int)req_stashed(r);
	if (s->dram) /* what a promotion published meanwhile, not a later put (delete) */
		dram_clear_promoted(s->dram, r->ns);
	if (res->status == KVT_OK && res->count > r->length)
		r->length = res->count;
	if (res->status < 0)
		status = res->status;
	req_finish(s, r, store_clear_walk(s, r, (req_cursor(r) & CUR_INDEX) + 1, status));
}

static int store_clear(struct kvt_store *s, struct kvt_req *r)
{
	struct dram *d = s->dram;
	void *prep[STORE_TIERS_MAX];
	int64_t a, b = 0;

	if (s->tier_prepare && !store_prepare(s, true, r->ns, NULL, prep))
		return -ENOMEM;
	a = d ? dram_clear(d, r->ns) : 0;
	if (s->tier_prepare) {
		for (unsigned i = 0; i < s->tier_count; i++) {
			int64_t c;
			if (!prep[i])
				continue;
			c = s->tiers[i].ops->clear(s->tiers[i].t, prep[i], r->ns, NULL, NULL);
			if (c > b)
				b = c;
		}
		if (d)
			a += dram_clear(d, r->ns); /* promotions that raced (see delete) */
	}
	r->length = (uint64_t)(a > b ? a : b);
	if (s->events)
		/* The format has no per-namespace clear: a router drops
		 * everything the main feed (or the group's) told it. */
		kvevents_cleared(s->events, r->ns == KVT_NS_ALL
						    ? KVEV_GROUP_ALL
						    : quota_group_lookup(&s->quota, r->ns));
	return store_clear_walk(s, r, 0, KVT_OK);
}

/* ------------------------------------------------------------------------
 * One request
 */

/*
 * A delete or clear that removed something returns once its tombstone is
 * durable (design: acknowledged only once durable): the tiers that log
 * tombstones (those with prepare: the SSD) sync them -- the SSD's
 * sync_deletes: the writer takes tombstones ahead of its write-down
 * backlog, then waits for at most a window of write-downs in flight and
 * fdatasyncs (ssd.c "Deletes jump the queue"); concurrent deletes share
 * the syncs.  A tier without sync_deletes is flushed.  Without it the
 * tombstone waited in the writer's queue, and a kill -9 right after
 * kvt_delete returned brought the block back at the next open (test_ssd
 * delete_kill9); until 2026-12-04 the SSD was flushed, which waited for
 * the whole backlog (0.26 s behind 256 MiB: test_ssd delete_backlog).
 * The queued KVT_OP_DELETE completes before: its caller submits a
 * KVT_OP_FLUSH with KVT_F_DELETES behind it, which ends here (kvtierd
 * does).
 */
int store_deletes_durable(struct kvt_store *s)
{
	int ret = 0;
	for (unsigned i = 0; i < s->tier_count; i++) {
		const struct store_tier *t = &s->tiers[i];
		int st;
		if (!t->ops->prepare || !t->ops->flush)
			continue;
		st = t->ops->sync_deletes ? t->ops->sync_deletes(t->t) : t->ops->flush(t->t);
		if (st < 0 && ret == 0)
			ret = st;
	}
	return ret;
}

int store_exec(struct kvt_store *s, struct kvt_req *r)
{
	struct dram *d = s->dram;
	int ret;

	r->tier = KVT_TIER_NONE;
	r->length = 0;
	switch (r->op) {
	case KVT_OP_PUT:
		return store_put(s, r);
	case KVT_OP_GET: {
		struct dram_read rd = { .flags = r->flags, .part = r->part, .off = r->off,
					.len = r->len, .dst = r->iov, .dst_count = r->iov_count };
		const struct seal_key *sk = seal_key_of(s->seal, r->ns);
		if (!d)
			return KVT_MISS;
		if (r->flags & KVT_F_QUIET)
			return store_get_part_quiet(s, r);
		if (sk) {
			if (s->put_auto.ghost)
				store_put_ghost_read(s, dram_key_hash(d, r->ns, &r->key));
			ret = seal_get(s->seal, sk, d, r->ns, &r->key, &rd);
		} else {
			uint64_t h = dram_key_hash(d, r->ns, &r->key);
			store_put_ghost_read(s, h);
			ret = dram_get_h(d, h, r->ns, &r->key, &rd);
		}
		r->length = rd.copied;
		r->value_len = rd.value_len;
		r->value_flags = rd.value_flags;
		if (ret == SEAL_FAILED)
			ret = KVT_MISS; /* present but did not open */
		else if (ret == KVT_OK)
			r->tier = KVT_TIER_DRAM;
		else if (ret == KVT_MISS)
			ret = store_get_walk(s, r, 0);
		return ret;
	}
	case KVT_OP_GET_PINNED: {
		struct iovec view[DRAM_MAX_RUNS];
		struct dram_item *item;
		unsigned vc = 0;
		uint64_t len = 0, h;
		if (!d)
			return KVT_MISS;
		if (r->flags & KVT_F_QUIET)
			return store_get_quiet(s, r);
		h = dram_key_hash(d, r->ns, &r->key);
		store_put_ghost_read(s, h);
		ret = dram_pin_h(d, h, r->ns, &r->key, &item, view, &vc, &len);
		if (ret == KVT_MISS)
			return store_get_walk(s, r, 0);
		if (ret != KVT_OK)
			return ret;
		return store_pin_item(s, r, item, view, vc, len, KVT_TIER_DRAM);
	}
	case KVT_OP_EXISTS:
		if (d && dram_exists(d, r->ns, &r->key) == KVT_OK) {
			r->tier = KVT_TIER_DRAM;
			return KVT_OK;
		}
		req_stash(r, 0); /* no tier's error yet */
		return store_exists_walk(s, r, 0);
	case KVT_OP_DELETE:
		return store_delete(s, r);
	case KVT_OP_LOOKUP:
		return store_lookup(s, r);
	case KVT_OP_PREFETCH:
		return store_prefetch(s, r);
	case KVT_OP_CLEAR:
		return store_clear(s, r);
	case KVT_OP_ROOM:
		return store_room_walk(s, r, 0);
	case KVT_OP_FLUSH:
		pthread_mutex_lock(&s->work_lock);
		while (!store_flush_ready(s, r->priv_seq_))
			pthread_cond_wait(&s->work_cond, &s->work_lock);
		pthread_mutex_unlock(&s->work_lock);
		if (r->flags & KVT_F_DELETES)
			return store_deletes_durable(s);
		ret = KVT_OK;
		/* In chain order: what a tier hands down while flushing (SSD
		 * evictions to the shared tier) is flushed after it. */
		for (unsigned i = 0; i < s->tier_count; i++) {
			int st = s->tiers[i].ops->flush ? s->tiers[i].ops->flush(s->tiers[i].t) : 0;
			if (st < 0 && ret == KVT_OK)
				ret = st;
		}
		return ret;
	}
	return KVT_EBADOP;
}

/*
 * tier_remote.c - the remote tier (G3.5: one kvtierd, or a pod of them
 * through cluster.c) as a tier.h implementation.
 *
 * Every operation is a round trip on the remote thread, so every one may
 * complete later (TIER_ASYNC_ALL).  Puts are written through from the
 * caller's parts (other engines must see first-time blocks), which is why
 * a store with this tier refuses kvt_put_reserve; with remote.put_local
 * never, DRAM is not asked at all (store_put_admit) and this is the only
 * copy made, by the kernel.  A server that is down
 * is a miss (remote.fast_fails), never an error to the model.
 */
#include "cluster.h"
#include "tier.h"

static int trem_open(void **t, const struct tier_env *env, void *arg)
{
	struct remote_config *cfg = arg;
	struct cluster *cl;
	int ret;

	if (!env->dram) {
		kvt_logf(env->log, KVT_LOG_ERROR, "the remote tier needs a DRAM tier");
		return KVT_EOPTVAL;
	}
	if (cfg->backoff_max_ms < cfg->backoff_ms)
		cfg->backoff_max_ms = cfg->backoff_ms;
	ret = cluster_open(&cl, cfg, env->dram, env->ns, env->mem, env->log);
	if (ret < 0) {
		kvt_logf(env->log, KVT_LOG_ERROR, "remote tier: %s", kvt_strerror(ret));
		return ret;
	}
	*t = cl;
	return 0;
}

/* Its thread completes gets into DRAM and reads the callers' parts: it
 * stops (and frees) before DRAM closes. */
static void trem_stop(void *t)
{
	cluster_close(t);
}

static const struct cluster_hint *trem_hint(const struct tier_key *k, struct cluster_hint *h)
{
	if (!k->prompt)
		return NULL;
	h->keys = k->prompt;
	h->pos = k->pos;
	return h;
}

static int trem_get(void *t, const struct tier_key *k, int prio, tier_got_fn got, void *ctx)
{
	struct cluster_hint h;
	KVT_UNUSED(prio);
	return cluster_get(t, k->ns, k->key, trem_hint(k, &h), got, ctx) == 0 ? TIER_PENDING
									    : KVT_MISS;
}

/* A plain get with the caller's buffers: received straight into them
 * (remote_get_into), one copy less than through DRAM.  Not admitted into
 * local DRAM (the next get of it asks the server again). */
static int trem_get_into(void *t, const struct tier_key *k, const struct iovec *dst,
			 unsigned dst_count, int prio, tier_done_fn done, void *ctx)
{
	struct cluster_hint h;
	KVT_UNUSED(prio);
	return cluster_get_into(t, k->ns, k->key, trem_hint(k, &h), dst, dst_count, done, ctx) == 0
		       ? TIER_PENDING
		       : KVT_MISS;
}

static int trem_exists(void *t, const struct tier_key *k, tier_done_fn done, void *ctx)
{
	struct cluster_hint h;
	int ret = cluster_exists(t, k->ns, k->key, trem_hint(k, &h), done, ctx);
	/* Refused at once (the pod down: -ENOTCONN; no memory): the error,
	 * which the store takes for a miss unless asked (KVT_F_ERRORS). */
	return ret == 0 ? TIER_PENDING : ret < 0 ? ret : KVT_MISS;
}

static int trem_lookup(void *t, uint32_t ns, const struct kvt_key *keys, uint32_t from,
		       uint32_t n, uint8_t *tiers, tier_done_fn done, void *ctx)
{
	return cluster_lookup(t, ns, keys, from, n, tiers, done, ctx) == 0 ? TIER_PENDING
									   : KVT_MISS;
}

static void trem_note_prompt(void *t, const struct kvt_key *keys, uint32_t n)
{
	cluster_note_prompt(t, keys, n);
}

static int trem_put_through(void *t, const struct tier_key *k, const struct iovec *parts,
			    unsigned part_count, const uint32_t *crcs, uint32_t vflags, int local,
			    tier_done_fn done, void *ctx)
{
	struct cluster_hint h;
	int ret;
	/* A present key (EXISTS) was written before; a block only the
	 * server could take (no DRAM room, too big for DRAM) goes there. */
	if (local != KVT_OK && local != KVT_EFULL && local != KVT_ETOOBIG)
		return KVT_MISS;
	/* Refused at once (server down: -ENOTCONN): the put's error. */
	ret = cluster_put(t, k->ns, k->key, trem_hint(k, &h), parts, part_count, crcs, vflags,
			  local != KVT_OK, done, ctx);
	return ret == 0 ? TIER_PENDING : ret < 0 ? ret : KVT_MISS;
}

static int trem_del(void *t, void *prepared, const struct tier_key *k, tier_done_fn done,
		    void *ctx)
{
	int ret;
	KVT_UNUSED(prepared);
	ret = cluster_delete(t, k->ns, k->key, done, ctx);
	return ret == 0 ? TIER_PENDING : ret;
}

static int64_t trem_clear(void *t, void *prepared, uint32_t ns, tier_done_fn done, void *ctx)
{
	int ret;
	KVT_UNUSED(prepared);
	ret = cluster_clear(t, ns, done, ctx);
	return ret == 0 ? TIER_PENDING : ret;
}

/* Puts written through so far are answered. */
static int trem_flush(void *t)
{
	cluster_flush(t);
	return 0;
}

static void *trem_plug(void *t)
{
	return cluster_plug(t);
}

static void trem_unplug(void *t, void *plugged)
{
	cluster_unplug(t, plugged);
}

static void trem_stats(void *t, kvt_stats_fn fn, void *ctx)
{
	cluster_stats(t, fn, ctx);
}

const struct tier_ops tier_remote_ops = {
	.name = "remote",
	.id = KVT_TIER_REMOTE,
	.flags = TIER_ASYNC_GET | TIER_ASYNC_ALL,
	.open = trem_open,
	.stop = trem_stop,
	.get = trem_get,
	.get_into = trem_get_into,
	.exists = trem_exists,
	.lookup = trem_lookup,
	.note_prompt = trem_note_prompt,
	.put_through = trem_put_through,
	.del = trem_del,
	.clear = trem_clear,
	.flush = trem_flush,
	.plug = trem_plug,
	.unplug = trem_unplug,
	.stats = trem_stats,
};

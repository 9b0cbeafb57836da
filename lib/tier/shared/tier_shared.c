/*
 * tier_shared.c - the shared tier (G4: a directory on a shared file
 * system, or an S3 bucket; shared.c and its backends) as a tier.h
 * implementation.
 *
 * Reads run on the shared tier's pool; deletes and clears are synchronous
 * (one unlink, one rename).  Writes go down by policy (shared_put: the
 * persistent namespaces' puts, or all with shared.admission=always), and
 * from DRAM's and the SSD tier's evictions through the hooks its open
 * installs.  Its struct outlives DRAM (the evict hook may still run), so
 * stop and free are apart.
 */
#include "shared.h"
#include "ssd.h"
#include "tier.h"

static int tsh_open(void **t, const struct tier_env *env, void *arg)
{
	struct shared_config *cfg = arg;
	struct shared *sh;
	struct ssd *ssd;
	int ret;

	if (cfg->dir && cfg->s3_endpoint) {
		kvt_logf(env->log, KVT_LOG_ERROR, "shared.dir and shared.s3_endpoint: one or the other");
		return KVT_EOPTVAL;
	}
	if (!env->dram) {
		kvt_logf(env->log, KVT_LOG_ERROR, "the shared tier needs a DRAM tier");
		return KVT_EOPTVAL;
	}
	if (cfg->wd_max_bytes > env->dram_capacity / 4)
		cfg->wd_max_bytes = env->dram_capacity / 4;
	ret = shared_open(&sh, cfg, env->dram, env->ns, env->mem, env->log);
	if (ret < 0)
		return ret;
	dram_set_evict_hook(env->dram, shared_evicted, sh);
	ssd = env->find(env->store, KVT_TIER_SSD);
	if (ssd)
		ssd_set_evict_hook(ssd, &shared_ssd_hook, sh);
	*t = sh;
	return 0;
}

static void tsh_stop(void *t)
{
	shared_stop(t);
}

static void tsh_free(void *t)
{
	shared_free(t);
}

static int tsh_get(void *t, const struct tier_key *k, int prio, tier_got_fn got, void *ctx)
{
	return shared_get(t, k->ns, k->key, prio, got, ctx) == 0 ? TIER_PENDING : KVT_MISS;
}

static int tsh_get_part(void *t, const struct tier_key *k, uint32_t part, const struct iovec *dst,
			unsigned dst_count, int prio, tier_done_fn done, void *ctx)
{
	return shared_get_part(t, k->ns, k->key, part, dst, dst_count, prio, done, ctx) == 0
		       ? TIER_PENDING
		       : KVT_MISS;
}

static int tsh_lookup(void *t, uint32_t ns, const struct kvt_key *keys, uint32_t from, uint32_t n,
		      uint8_t *tiers, tier_done_fn done, void *ctx)
{
	int ret = shared_lookup(t, ns, keys + from, n - from, tiers ? tiers + from : NULL, done,
				ctx);
	/* Refused for want of memory: the error, which the store takes for a
	 * miss unless an exists asks (KVT_F_ERRORS; a lookup's walk stops at
	 * it either way); a namespace the directory does not know is a miss
	 * (review47e, 2026-12-07: both were a miss) */
	return ret == 0 ? TIER_PENDING : ret < 0 && ret != KVT_ENONS ? ret : KVT_MISS;
}

static void tsh_put_down(void *t, uint32_t ns, const struct kvt_key *key)
{
	shared_put(t, ns, key);
}

/* One unlink: no round trip worth a thread.  A removal that failed (an
 * unlink refused, an S3 DELETE that got no answer) is the delete's error,
 * never a miss: the block is still there for the next promotion, and a
 * delete reported done would have it come back. */
static int tsh_del(void *t, void *prepared, const struct tier_key *k, tier_done_fn done, void *ctx)
{
	int ret = shared_delete(t, k->ns, k->key);

	KVT_UNUSED(prepared);
	KVT_UNUSED(done);
	KVT_UNUSED(ctx);
	return ret == KVT_OK || ret < 0 ? ret : KVT_MISS;
}

static int64_t tsh_clear(void *t, void *prepared, uint32_t ns, tier_done_fn done, void *ctx)
{
	KVT_UNUSED(prepared);
	KVT_UNUSED(done);
	KVT_UNUSED(ctx);
	return shared_clear(t, ns);
}

/* Write-downs queued so far are on it. */
static int tsh_flush(void *t)
{
	shared_flush(t);
	return 0;
}

static int tsh_set_persistent(void *t, uint32_t ns)
{
	return shared_set_persistent(t, ns);
}

static void tsh_stats(void *t, kvt_stats_fn fn, void *ctx)
{
	shared_stats(t, fn, ctx);
}

const struct tier_ops tier_shared_ops = {
	.name = "shared",
	.id = KVT_TIER_SHARED,
	.flags = TIER_ASYNC_GET | TIER_ASYNC_ALL | TIER_KEEPS_EVICTED,
	.open = tsh_open,
	.stop = tsh_stop,
	.free = tsh_free,
	.get = tsh_get,
	.get_part = tsh_get_part,
	.lookup = tsh_lookup,
	.put_down = tsh_put_down,
	.del = tsh_del,
	.clear = tsh_clear,
	.flush = tsh_flush,
	.set_persistent = tsh_set_persistent,
	.stats = tsh_stats,
};

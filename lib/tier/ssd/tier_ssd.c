/*
 * tier_ssd.c - the SSD tier (ssd.c) as a tier.h implementation: the
 * table the store's chain holds, and the few lines that adapt each call.
 *
 * The SSD tier has a synchronous index (find), so exists, lookups and
 * put-if-absent never wait for it; gets, part gets included, promote
 * through the I/O thread; quiet reads (a copy, or one part) read around
 * DRAM instead.
 * Its open wires the DRAM write-down admission hook (ssd_admit); deletes
 * and clears log a tombstone, prepared before DRAM is touched (ssd.h).
 */
#include "ssd.h"
#include "tier.h"

static int tssd_open(void **t, const struct tier_env *env, void *arg)
{
	struct ssd_config *cfg = arg;
	struct ssd *ssd;
	int ret;

	if (env->dir_fd < 0 || !env->dram) {
		kvt_logf(env->log, KVT_LOG_ERROR,
			 "the ssd tier needs a store directory (option path) and a DRAM tier");
		return KVT_EOPTVAL;
	}
	/* Write-downs pin DRAM blocks: never let them pin more than a
	 * quarter of it, or puts would find nothing to evict. */
	if (cfg->wd_max_bytes > env->dram_capacity / 4)
		cfg->wd_max_bytes = env->dram_capacity / 4;
	cfg->quota = env->quota;
	ret = ssd_open(&ssd, cfg, env->dir_fd, env->mem, env->log, env->ns, env->dram);
	if (ret < 0) {
		kvt_logf(env->log, KVT_LOG_ERROR, "ssd tier: %s", kvt_strerror(ret));
		return ret;
	}
	dram_set_admit_hook(env->dram, ssd_admit, ssd, cfg->admission == SSD_ADMIT_VICTIM);
	if (cfg->admission == SSD_ADMIT_VICTIM) {
		dram_below_room(env->dram, ssd_log_full, ssd);
		dram_below_plug(env->dram, ssd_plug, ssd);
		if (cfg->adapt_wd)
			dram_adapt_below(env->dram, cfg->capacity);
	}
	*t = ssd;
	return 0;
}

static void tssd_stop(void *t)
{
	/* Before DRAM: queued write-downs pin DRAM blocks, and reads in
	 * flight complete (and may pin) while it drains.  A warm restart:
	 * DRAM's blocks worth keeping go down first (doc/policies.md). */
	ssd_close_writedown(t);
	ssd_close(t);
}

static int tssd_find(void *t, uint32_t ns, const struct kvt_key *key, uint64_t *value_len)
{
	return ssd_find(t, ns, key, value_len);
}

static uint64_t tssd_load_ns(void *t, uint64_t len)
{
	return ssd_load_ns(t, len);
}

static int tssd_put_room(void *t, uint32_t ns, uint64_t len)
{
	return ssd_put_room(t, ns, len);
}

static int tssd_room_watch(void *t, uint32_t ns, uint64_t len, tier_done_fn done, void *ctx)
{
	return ssd_room_watch(t, ns, len, done, ctx);
}

static int tssd_get(void *t, const struct tier_key *k, int prio, tier_got_fn got, void *ctx)
{
	int ret = ssd_promote(t, k->ns, k->key, prio, got, ctx);
	return ret == 0 ? TIER_PENDING : ret;
}

static int tssd_get_copy(void *t, const struct tier_key *k, tier_copy_fn done, void *ctx)
{
	int ret = ssd_read_copy(t, k->ns, k->key, IO_PRIO_DEMAND, done, ctx);
	return ret == 0 ? TIER_PENDING : ret;
}

static int tssd_get_part_quiet(void *t, const struct tier_key *k, uint32_t part,
			       const struct iovec *dst, unsigned dst_count, int prio,
			       tier_done_fn done, void *ctx)
{
	int ret = ssd_read_part(t, k->ns, k->key, part, dst, dst_count, prio, done, ctx);
	return ret == 0 ? TIER_PENDING : ret;
}

static int tssd_put_over(void *t, uint32_t ns, const struct kvt_key *key, bool wait)
{
	return ssd_put_over(t, ns, key, wait);
}

static void *tssd_prepare(void *t, bool clear, uint32_t ns, const struct kvt_key *key)
{
	return ssd_log_prepare(t, clear, ns, key);
}

static int tssd_del(void *t, void *prepared, const struct tier_key *k, tier_done_fn done,
		    void *ctx)
{
	KVT_UNUSED(done);
	KVT_UNUSED(ctx);
	return ssd_delete(t, prepared, k->ns, k->key);
}

static int64_t tssd_clear(void *t, void *prepared, uint32_t ns, tier_done_fn done, void *ctx)
{
	KVT_UNUSED(done);
	KVT_UNUSED(ctx);
	return ssd_clear(t, prepared, ns);
}

static int tssd_flush(void *t)
{
	return ssd_flush(t);
}

static int tssd_sync_deletes(void *t)
{
	return ssd_sync_deletes(t);
}

static int tssd_set_persistent(void *t, uint32_t ns)
{
	return ssd_set_persistent(t, ns);
}

static void tssd_stats(void *t, kvt_stats_fn fn, void *ctx)
{
	ssd_stats(t, fn, ctx);
}

static void tssd_scan(void *t, uint32_t ns, void (*fn)(void *ctx, const struct kvt_key *key),
		      void *ctx)
{
	ssd_scan(t, ns, fn, ctx);
}

const struct tier_ops tier_ssd_ops = {
	.name = "ssd",
	.id = KVT_TIER_SSD,
	.flags = TIER_ASYNC_GET | TIER_KEEPS_EVICTED,
	.open = tssd_open,
	.stop = tssd_stop,
	.find = tssd_find,
	.load_ns = tssd_load_ns,
	.get = tssd_get,
	.get_part_quiet = tssd_get_part_quiet,
	.get_copy = tssd_get_copy,
	.put_room = tssd_put_room,
	.room_watch = tssd_room_watch,
	.put_over = tssd_put_over,
	.prepare = tssd_prepare,
	.del = tssd_del,
	.clear = tssd_clear,
	.flush = tssd_flush,
	.sync_deletes = tssd_sync_deletes,
	.set_persistent = tssd_set_persistent,
	.stats = tssd_stats,
	.scan = tssd_scan,
};

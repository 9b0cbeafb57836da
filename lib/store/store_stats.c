/*
 * store_stats.c - statistics: the store's own counters, then each tier's
 * (DRAM, the chain in order, KV events, quotas, seals), and the remote
 * tier's queries (kvt_remote_stats, kvt_remote_who).
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

#include "cluster.h"
#include "store_int.h"

int kvt_remote_stats(struct kvt_store *s, const char *tenant, kvt_stats_fn fn, void *ctx)
{
	struct cluster *cl;
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!(cl = store_tier_handle(s, &tier_remote_ops)))
		return KVT_ESTATE;
	return cluster_stats_query(cl, tenant, fn, ctx);
}

int64_t kvt_remote_who(struct kvt_store *s, uint32_t ns, const struct kvt_key *keys,
		       size_t key_count, struct kvt_remote_node *nodes, size_t max,
		       uint64_t *leading)
{
	struct cluster *cl;
	int ret;
	if (!s || !keys || (!nodes && max))
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!(cl = store_tier_handle(s, &tier_remote_ops)))
		return KVT_ESTATE;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	if (key_count == 0 || key_count > KVT_BATCH_MAX)
		return KVT_EBADLEN;
	for (size_t i = 0; i < key_count; i++)
		if ((ret = key_check(&keys[i])) < 0)
			return ret;
	return cluster_who(cl, ns, keys, (uint32_t)key_count, nodes, max, leading);
}

int kvt_store_stats(struct kvt_store *s, kvt_stats_fn fn, void *ctx)
{
	uint64_t pins = 0, peak = 0;
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	for (int i = 0; i < PIN_SHARDS; i++) {
		pthread_mutex_lock(&s->pins[i].lock);
		pins += s->pins[i].active;
		peak += s->pins[i].peak;
		pthread_mutex_unlock(&s->pins[i].lock);
	}
	fn(ctx, "store.workers", s->workers_started, NULL);
	fn(ctx, "store.namespaces", atomic_load(&s->ns.count), NULL);
	fn(ctx, "store.submitted", atomic_load(&s->submitted), NULL);
	fn(ctx, "store.completed", atomic_load(&s->completed), NULL);
	fn(ctx, "store.deferred", atomic_load(&s->deferred), NULL);
	fn(ctx, "store.canceled", atomic_load(&s->canceled), NULL);
	fn(ctx, "store.pins_active", pins, NULL);
	fn(ctx, "store.pins_peak", peak, NULL);
	fn(ctx, "mem.meta_bytes", (uint64_t)atomic_load(&s->mem.bytes), NULL);
	fn(ctx, "mem.meta_peak_bytes", (uint64_t)atomic_load(&s->mem.peak_bytes), NULL);
	fn(ctx, "mem.allocs", (uint64_t)atomic_load(&s->mem.allocs), NULL);
	fn(ctx, "store.dram_copy_bps", (uint64_t)s->dram_bps, NULL);
	fn(ctx, "store.put_local_skips", atomic_load(&s->put_auto.skips), NULL);
	fn(ctx, "store.put_local_skipping", atomic_load(&s->put_auto.skip), NULL);
	fn(ctx, "store.put_local_reads", atomic_load(&s->put_auto.reuse_total), NULL);
	fn(ctx, "store.lookup_rounds", atomic_load(&s->lookup_rounds), NULL);
	if (s->dram) {
		uint64_t reg = atomic_load(&s->region_bytes);
		dram_stats(s->dram, fn, ctx);
		fn(ctx, "dram.registered", 0, reg ? s->region_hook.name : "not registered");
		fn(ctx, "dram.registered_bytes", reg, NULL);
	}
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->stats)
			s->tiers[i].ops->stats(s->tiers[i].t, fn, ctx);
	if (s->events)
		kvevents_stats(s->events, fn, ctx);
	quota_stats(&s->quota, fn, ctx);
	seal_stats(s->seal, fn, ctx);
	nsstat_stats(&s->nsstat, &s->ns, fn, ctx);
	return 0;
}

int kvt_ns_stats(struct kvt_store *s, uint32_t ns, kvt_stats_fn fn, void *ctx)
{
	int ret;
	if (!s || !fn)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if (!ns_reg_get(&s->ns, ns))
		return KVT_ENONS;
	nsstat_ns_stats(&s->nsstat, &s->ns, ns, fn, ctx);
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
	return store_tier_handle(s, &tier_ssd_ops);
}


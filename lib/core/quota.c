/*
 * quota.c - quota groups: which group each namespace belongs to, each
 * group's byte limit per tier, and the bytes it holds there.
 *
 * Owns: the group table (KVT_QUOTA_GROUPS entries, allocated at first
 * use) and the namespace -> group map, which lives in the namespace
 * registry's entries (ns_entry.quota_group, .quota_ssd_bytes: entries
 * never move, so a lookup by id needs no lock).  Group 0 is "no group":
 * nothing is charged to it and nothing limits it.
 *
 * Who charges what:
 *   DRAM (dram.c)  an item is charged to its namespace's group when it is
 *                  reserved (its arena bytes: chunks x chunk size) and
 *                  uncharged when it is freed.  The item remembers the group
 *                  it was charged to (dram_item.group), so moving a
 *                  namespace to another group moves new blocks only; the
 *                  old ones stay charged to the old group until they go.
 *                  A charge that would pass the limit first evicts the
 *                  group's own blocks (dram_quota_charge), never another's.
 *   SSD (ssd.c)    every published index entry's value bytes are counted
 *                  per namespace, always (also before any group exists: a
 *                  restart recovers the index before the embedder assigns
 *                  groups), and per group for namespaces that have one.
 *                  Moving a namespace moves its bytes with it.  A group at
 *                  its limit has its write-downs declined (ssd_admit).
 *
 * Cost when no quota is used: DRAM tests one relaxed atomic (`active`);
 * SSD takes the leaf mutex once per index insert or removal (those happen
 * at write-down and eviction rate, not at get rate).
 *
 * Locks: quota.lock is a leaf, taken under SSD index shard locks; it
 * guards the SSD byte counts and regrouping.  DRAM counters are atomics.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvt_int.h"

int quota_init(struct quota *q, struct kvt_mem *mem, struct ns_registry *reg)
{
	int ret;
	memset(q, 0, sizeof(*q));
	q->mem = mem;
	q->reg = reg;
	ret = pthread_mutex_init(&q->lock, NULL);
	if (ret)
		return -ret;
	atomic_init(&q->active, false);
	atomic_init(&q->groups, NULL);
	q->ready = true;
	return 0;
}

void quota_fini(struct quota *q)
{
	struct quota_group *g;
	if (!q->ready)
		return;
	g = atomic_load(&q->groups);
	if (g)
		kvt_mem_free(q->mem, g, KVT_QUOTA_GROUPS * sizeof(*g));
	pthread_mutex_destroy(&q->lock);
	q->ready = false;
}

/* The group table, allocated at first use.  Locked. */
static struct quota_group *quota_groups_locked(struct quota *q)
{
	struct quota_group *g = atomic_load_explicit(&q->groups, memory_order_relaxed);
	if (g)
		return g;
	g = kvt_mem_calloc(q->mem, KVT_QUOTA_GROUPS, sizeof(*g));
	if (!g)
		return NULL;
	atomic_store_explicit(&q->groups, g, memory_order_release);
	return g;
}

int quota_set(struct quota *q, uint32_t group, uint64_t dram_bytes, uint64_t ssd_bytes)
{
	struct quota_group *g;
	if (group == 0 || group >= KVT_QUOTA_GROUPS)
		return KVT_EOPTVAL;
	pthread_mutex_lock(&q->lock);
	g = quota_groups_locked(q);
	if (!g) {
		pthread_mutex_unlock(&q->lock);
		return -ENOMEM;
	}
	atomic_store(&g[group].limit[QUOTA_DRAM], dram_bytes);
	atomic_store(&g[group].limit[QUOTA_SSD], ssd_bytes);
	atomic_store(&g[group].known, true);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int quota_ns_set_group(struct quota *q, uint32_t ns, uint32_t group)
{
	struct ns_entry *e = (struct ns_entry *)ns_reg_get(q->reg, ns);
	struct quota_group *g;
	uint32_t old;

	if (!e)
		return KVT_ENONS;
	if (group >= KVT_QUOTA_GROUPS)
		return KVT_EOPTVAL;
	pthread_mutex_lock(&q->lock);
	g = quota_groups_locked(q);
	if (!g) {
		pthread_mutex_unlock(&q->lock);
		return -ENOMEM;
	}
	old = atomic_load_explicit(&e->quota_group, memory_order_relaxed);
	if (old != group) {
		/* The namespace's SSD bytes move with it (both under the lock). */
		if (old)
			atomic_fetch_sub(&g[old].used[QUOTA_SSD], e->quota_ssd_bytes);
		if (group)
			atomic_fetch_add(&g[group].used[QUOTA_SSD], e->quota_ssd_bytes);
		atomic_store(&e->quota_group, group);
	}
	if (group) {
		atomic_store(&g[group].known, true);
		/* Release: a reader that sees active sees the table too. */
		atomic_store_explicit(&q->active, true, memory_order_release);
	}
	pthread_mutex_unlock(&q->lock);
	return 0;
}

uint32_t quota_group_lookup(struct quota *q, uint32_t ns)
{
	const struct ns_entry *e = ns_reg_get(q->reg, ns);
	return e ? atomic_load_explicit(&e->quota_group, memory_order_relaxed) : 0;
}

struct quota_group *quota_group_at(struct quota *q, uint32_t group)
{
	struct quota_group *g = atomic_load_explicit(&q->groups, memory_order_acquire);
	return g && group && group < KVT_QUOTA_GROUPS ? &g[group] : NULL;
}

void quota_ssd_add(struct quota *q, uint32_t ns, uint64_t bytes, bool add)
{
	struct ns_entry *e;
	uint32_t group;

	if (!q)
		return;
	e = (struct ns_entry *)ns_reg_get(q->reg, ns);
	if (!e)
		return; /* not registered: neither charged nor uncharged */
	pthread_mutex_lock(&q->lock);
	if (add)
		e->quota_ssd_bytes += bytes;
	else
		e->quota_ssd_bytes -= bytes;
	group = atomic_load_explicit(&e->quota_group, memory_order_relaxed);
	if (group) {
		struct quota_group *g = quota_group_at(q, group);
		if (add)
			atomic_fetch_add(&g->used[QUOTA_SSD], bytes);
		else
			atomic_fetch_sub(&g->used[QUOTA_SSD], bytes);
	}
	pthread_mutex_unlock(&q->lock);
}

bool quota_ssd_refuse(struct quota *q, uint32_t ns, uint64_t bytes)
{
	uint32_t group = q ? quota_group_of(q, ns) : 0;
	struct quota_group *g;
	uint64_t limit;

	if (!group)
		return false;
	g = quota_group_at(q, group);
	limit = atomic_load_explicit(&g->limit[QUOTA_SSD], memory_order_relaxed);
	if (limit == 0 || atomic_load(&g->used[QUOTA_SSD]) + bytes <= limit)
		return false;
	atomic_fetch_add_explicit(&g->evicted[QUOTA_SSD], 1, memory_order_relaxed);
	return true;
}

void quota_stats(struct quota *q, kvt_stats_fn fn, void *ctx)
{
	struct quota_group *g = atomic_load_explicit(&q->groups, memory_order_acquire);
	if (!g)
		return;
	for (uint32_t i = 1; i < KVT_QUOTA_GROUPS; i++)
		quota_group_stats(q, i, fn, ctx);
}

void quota_group_stats(struct quota *q, uint32_t i, kvt_stats_fn fn, void *ctx)
{
	struct quota_group *g = atomic_load_explicit(&q->groups, memory_order_acquire);
	char name[64];
	uint64_t used, leaving;

	if (!g || i == 0 || i >= KVT_QUOTA_GROUPS || !atomic_load(&g[i].known))
		return;
#define QSTAT(field, v) \
	do { \
		snprintf(name, sizeof(name), "quota.%u." field, i); \
		fn(ctx, name, (v), NULL); \
	} while (0)
	/* The group's blocks in DRAM's cache, within its limit; those on
	 * their way down to the SSD (quota_group.leaving) are still charged
	 * until their write ends, and shown apart. */
	/* leaving first (acquire): a write-down that ended uncharged its
	 * block before it left leaving (dram.c dram_writedown_done), so a
	 * block gone from leaving is gone from used too */
	leaving = atomic_load_explicit(&g[i].leaving, memory_order_acquire);
	used = atomic_load(&g[i].used[QUOTA_DRAM]);
	QSTAT("dram_bytes", used > leaving ? used - leaving : 0);
	QSTAT("dram_leaving_bytes", leaving < used ? leaving : used);
	QSTAT("dram_limit", atomic_load(&g[i].limit[QUOTA_DRAM]));
	QSTAT("dram_evictions", atomic_load(&g[i].evicted[QUOTA_DRAM]));
	QSTAT("dram_full", atomic_load(&g[i].full));
	QSTAT("ssd_bytes", atomic_load(&g[i].used[QUOTA_SSD]));
	QSTAT("ssd_limit", atomic_load(&g[i].limit[QUOTA_SSD]));
	QSTAT("ssd_declined", atomic_load(&g[i].evicted[QUOTA_SSD]));
#undef QSTAT
}

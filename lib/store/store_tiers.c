/*
 * store_tiers.c - the chain of tiers below DRAM (tier.h): which tiers a
 * store opens, in which order requests walk them, and their stop and free.
 *
 * Open order is fixed: the built-in tiers (ssd, remote, shared) that the
 * options configure, then the tiers added by store_tier_register, so that
 * a tier's open may find the ones before it (the shared tier hooks the SSD
 * tier's evictions).  Walk order is option store.tiers, a comma-separated
 * list of tier names (default STORE_TIERS_DEFAULT; doc/decisions.md says
 * why the pod store comes before shared storage).  Names of tiers that
 * are not configured are passed over; a configured built-in tier missing
 * from the list is an error (KVT_EOPTVAL, logged); a registered tier the
 * list does not name goes first.
 *
 * Stop order is walk order: a tier's callbacks only go on to the tiers
 * after it, so a tier draining its requests may still use them.
 */
#include <string.h>

#include "store_int.h"

/* The built-in tiers, in open order, and whether the options ask for each. */
static bool store_wants_ssd(const struct kvt_store *s)
{
	return s->ssd_cfg.capacity > 0;
}

static bool store_wants_remote(const struct kvt_store *s)
{
	return s->remote_cfg.addr || s->remote_cfg.addrs || s->remote_cfg.discover;
}

static bool store_wants_shared(const struct kvt_store *s)
{
	return s->shared_cfg.dir || s->shared_cfg.s3_endpoint;
}

int store_tier_register(struct kvt_store *s, const struct tier_ops *ops, void *arg)
{
	if (!s || !ops || !ops->name || !ops->open)
		return KVT_ENULL;
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	if (s->extra_count >= STORE_TIERS_MAX - 3)
		return KVT_EFULL;
	s->extra[s->extra_count].ops = ops;
	s->extra[s->extra_count].arg = arg;
	s->extra[s->extra_count].t = NULL;
	s->extra_count++;
	return 0;
}

void *store_tier_handle(struct kvt_store *s, const struct tier_ops *ops)
{
	if (!s || s->state != ST_OPEN)
		return NULL;
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops == ops)
			return s->tiers[i].t;
	return NULL;
}

/* tier_env.find: an open tier by KVT_TIER_* id. */
static void *store_env_find(void *store, int id)
{
	struct kvt_store *s = store;
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops->id == (uint32_t)id)
			return s->tiers[i].t;
	return NULL;
}

static int store_tier_open1(struct kvt_store *s, const struct tier_ops *ops, void *arg,
			    const struct tier_env *env)
{
	struct store_tier *st = &s->tiers[s->tier_count];
	int ret;
	st->ops = ops;
	st->arg = arg;
	st->t = NULL;
	ret = ops->open(&st->t, env, arg);
	if (ret < 0)
		return ret;
	s->tier_count++;
	return 0;
}

/* Position of name (len bytes) in the open tiers, or -1. */
static int store_tier_named(const struct kvt_store *s, const char *name, size_t len)
{
	for (unsigned i = 0; i < s->tier_count; i++)
		if (strlen(s->tiers[i].ops->name) == len &&
		    memcmp(s->tiers[i].ops->name, name, len) == 0)
			return (int)i;
	return -1;
}

static bool store_tier_known(const struct kvt_store *s, const char *name, size_t len)
{
	static const char *const builtin[] = { "ssd", "remote", "shared" };
	for (unsigned i = 0; i < KVT_ARRAY_LEN(builtin); i++)
		if (strlen(builtin[i]) == len && memcmp(builtin[i], name, len) == 0)
			return true;
	for (unsigned i = 0; i < s->extra_count; i++)
		if (strlen(s->extra[i].ops->name) == len &&
		    memcmp(s->extra[i].ops->name, name, len) == 0)
			return true;
	return false;
}

/* Reorder s->tiers (open order) into walk order. */
static int store_tiers_order(struct kvt_store *s)
{
	const char *list = s->tiers_opt ? s->tiers_opt : STORE_TIERS_DEFAULT;
	struct store_tier chain[STORE_TIERS_MAX];
	bool placed[STORE_TIERS_MAX] = { false };
	unsigned n = 0;

	/* Registered tiers the list does not name go first. */
	for (unsigned i = 0; i < s->tier_count; i++) {
		const struct tier_ops *o = s->tiers[i].ops;
		bool named = false;
		if (o == &tier_ssd_ops || o == &tier_remote_ops || o == &tier_shared_ops)
			continue;
		for (const char *p = list; *p;) {
			size_t len = strcspn(p, ",");
			if (len == strlen(o->name) && memcmp(p, o->name, len) == 0)
				named = true;
			p += len + (p[len] == ',');
		}
		if (!named) {
			chain[n++] = s->tiers[i];
			placed[i] = true;
		}
	}
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		int at = store_tier_named(s, p, len);
		if (!store_tier_known(s, p, len)) {
			kvt_logf(&s->log, KVT_LOG_ERROR, "store.tiers: no tier named %.*s", (int)len,
				 p);
			return KVT_EOPTVAL;
		}
		if (at >= 0 && !placed[at]) {
			chain[n++] = s->tiers[at];
			placed[at] = true;
		}
		p += len + (p[len] == ',');
	}
	for (unsigned i = 0; i < s->tier_count; i++) {
		if (!placed[i]) {
			kvt_logf(&s->log, KVT_LOG_ERROR,
				 "the %s tier is configured but store.tiers (%s) leaves it out",
				 s->tiers[i].ops->name, list);
			return KVT_EOPTVAL;
		}
	}
	memcpy(s->tiers, chain, n * sizeof(chain[0]));
	return 0;
}

int store_tiers_open(struct kvt_store *s)
{
	struct tier_env env = {
		.dram = s->dram, .ns = &s->ns, .quota = &s->quota, .mem = &s->mem,
		.log = &s->log, .dir_fd = s->dir_fd, .dram_capacity = s->dram_cfg.capacity,
		.find = store_env_find, .store = s,
	};
	int ret = 0;

	s->tier_count = 0;
	if (store_wants_ssd(s))
		ret = store_tier_open1(s, &tier_ssd_ops, &s->ssd_cfg, &env);
	if (ret == 0 && store_wants_remote(s))
		ret = store_tier_open1(s, &tier_remote_ops, &s->remote_cfg, &env);
	if (ret == 0 && store_wants_shared(s))
		ret = store_tier_open1(s, &tier_shared_ops, &s->shared_cfg, &env);
	for (unsigned i = 0; ret == 0 && i < s->extra_count; i++)
		ret = store_tier_open1(s, s->extra[i].ops, s->extra[i].arg, &env);
	if (ret == 0)
		ret = store_tiers_order(s);
	if (ret < 0)
		return ret;
	s->tier_flags = 0;
	s->tier_find = s->tier_through = s->tier_down = s->tier_over = s->tier_prepare = false;
	for (unsigned i = 0; i < s->tier_count; i++) {
		const struct tier_ops *o = s->tiers[i].ops;
		s->tier_flags |= o->flags;
		s->tier_find |= o->find != NULL;
		s->tier_through |= o->put_through != NULL;
		s->tier_down |= o->put_down != NULL;
		s->tier_over |= o->put_over != NULL;
		s->tier_prepare |= o->prepare != NULL;
	}
	store_put_absent_hook(s); /* DRAM asks the tiers' put_over under its lock */
	return 0;
}

void store_tiers_stop(struct kvt_store *s, bool child)
{
	for (unsigned i = 0; i < s->tier_count && !child; i++)
		if (s->tiers[i].ops->stop)
			s->tiers[i].ops->stop(s->tiers[i].t);
}

void store_tiers_free(struct kvt_store *s, bool child)
{
	/* A child forgets them: their memory and threads are the parent's. */
	for (unsigned i = 0; i < s->tier_count && !child; i++)
		if (s->tiers[i].ops->free)
			s->tiers[i].ops->free(s->tiers[i].t);
	s->tier_count = 0;
	s->tier_flags = 0;
	s->tier_find = s->tier_through = s->tier_down = s->tier_over = s->tier_prepare = false;
}

/*
 * tstat.c - the tenants table: each tenant's counters and shares
 * (struct kvtd_tstat: its connections, its part of --max-memory, its
 * namespaces, ...), by name.  Every per-tenant limit keys on an entry,
 * so a tenant without one would be held to none: a login that gets no
 * entry is refused (metrics.c kvtd_tenant_conn_admit), never admitted.
 *
 * At most KVTD_TSTAT_MAX entries (KVTD_TEST_TSTAT_MAX in the environment
 * lowers it, for tests).  Until 2026-12-05 an entry was never freed:
 * past 4,096 tenant names over the server's life (tenants files
 * reloaded with new names), a new tenant got no entry and was admitted
 * with no per-tenant limit at all (test_hostile_http tenant_table).
 * Now an entry is held by each connection admitted as its tenant
 * (kvtd_tstat_hold; given back as the connection is freed, loop_reap,
 * once its frames, answers and requests -- every holder of the pointer --
 * are gone), and a reload (kvtd_tstat_sweep) marks the entries of
 * tenants no longer in the file: freed at once if none holds them, else
 * when the last holder gives it back.  An entry made again later counts
 * its tenant's namespaces from the registry (tenant_ns.c), so the
 * namespace quota does not start over.
 *
 * Without --tenants there is one tenant, "default", whose entry nobody
 * holds and nothing frees (no reload sweeps without a tenants file).
 *
 * Locking: lock guards the array, the count and each entry's refs and
 * gone; /metrics walks the table under it (kvtd_tstat_walk).  The
 * counters in an entry are relaxed atomics, used without the lock by
 * whoever holds the entry.  Order: lock, then tenant_ns.c's and
 * auth.c's (an entry made looks its tenant up in both).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

struct tstat_entry {
	char name[PROTO_TENANT_MAX + 1];
	uint32_t name_len;
	uint32_t refs; /* connections holding it (lock) */
	bool gone;     /* its tenant is not in the tenants file: freed at refs 0 (lock) */
	struct kvtd_tstat st;
};

struct kvtd_tstats {
	pthread_mutex_t lock;
	unsigned count, max;
	struct tstat_entry *v[KVTD_TSTAT_MAX];
};

/* An entry made, and freed (its lock's state with it). */
static struct tstat_entry *tstat_entry_new(void)
{
	struct tstat_entry *e = calloc(1, sizeof(*e));

	if (e)
		pthread_mutex_init(&e->st.pin_lock, NULL);
	return e;
}

static void tstat_entry_free(struct tstat_entry *e)
{
	pthread_mutex_destroy(&e->st.pin_lock);
	kvtd_pinset_free(&e->st.pin_set);
	free(e);
}

static struct tstat_entry *tstat_entry_of(struct kvtd_tstat *st)
{
	return (struct tstat_entry *)((char *)st - offsetof(struct tstat_entry, st));
}

int kvtd_tstat_init(struct kvtd_server *srv)
{
	struct kvtd_tstats *x = calloc(1, sizeof(*x));
	const char *env = getenv("KVTD_TEST_TSTAT_MAX");

	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->max = KVTD_TSTAT_MAX;
	if (env && atoi(env) > 0 && atoi(env) < KVTD_TSTAT_MAX)
		x->max = (unsigned)atoi(env);
	srv->tstats = x;
	return 0;
}

void kvtd_tstat_free(struct kvtd_server *srv)
{
	struct kvtd_tstats *x = srv->tstats;

	if (!x)
		return;
	for (unsigned i = 0; i < x->count; i++)
		tstat_entry_free(x->v[i]);
	pthread_mutex_destroy(&x->lock);
	free(x);
	srv->tstats = NULL;
}

static struct tstat_entry *tstat_find_locked(struct kvtd_tstats *x, const char *name,
					     size_t len)
{
	for (unsigned i = 0; i < x->count; i++)
		if (x->v[i]->name_len == len && memcmp(x->v[i]->name, name, len) == 0)
			return x->v[i];
	return NULL;
}

/* A new entry for name: NULL when the table is full or memory (or the
 * tenant's namespace count) is not to be had. */
static struct tstat_entry *tstat_new_locked(struct kvtd_server *srv, const char *name,
					    size_t len)
{
	struct kvtd_tstats *x = srv->tstats;
	struct tstat_entry *e;
	int64_t ns;
	uint32_t role;

	if (x->count >= x->max || !(e = tstat_entry_new()))
		return NULL;
	memcpy(e->name, name, len);
	e->name_len = (uint32_t)len;
	/* Its namespaces so far (KVTD_NS_TENANT_MAX counts them): not
	 * known, no entry -- a quota that started over would be none. */
	ns = kvtd_tenant_ns_ids(srv, name, len, NULL);
	if (ns < 0) {
		tstat_entry_free(e);
		return NULL;
	}
	atomic_store_explicit(&e->st.ns_count, (uint32_t)ns, memory_order_relaxed);
	/* Made for a tenant a reload removed before it was admitted: the
	 * sweep is done already, so it is marked here. */
	e->gone = kvtd_auth_enabled() && kvtd_tenant_role(name, len, &role) < 0;
	x->v[x->count++] = e;
	return e;
}

/* name's entry, made if it has none: NULL as tstat_new_locked. */
static struct tstat_entry *tstat_get_locked(struct kvtd_server *srv, const char *name,
					    size_t len)
{
	struct tstat_entry *e = tstat_find_locked(srv->tstats, name, len);
	return e ? e : tstat_new_locked(srv, name, len);
}

static void tstat_drop_locked(struct kvtd_tstats *x, struct tstat_entry *e)
{
	for (unsigned i = 0; i < x->count; i++)
		if (x->v[i] == e) {
			memmove(&x->v[i], &x->v[i + 1], (x->count - i - 1) * sizeof(x->v[0]));
			x->count--;
			break;
		}
	tstat_entry_free(e);
}

struct kvtd_tstat *kvtd_tstat_named(struct kvtd_server *srv, const char *name, size_t len)
{
	struct kvtd_tstats *x = srv->tstats;
	struct tstat_entry *e;

	if (!x || len == 0 || len > PROTO_TENANT_MAX)
		return NULL;
	pthread_mutex_lock(&x->lock);
	e = tstat_get_locked(srv, name, len);
	pthread_mutex_unlock(&x->lock);
	return e ? &e->st : NULL;
}

struct kvtd_tstat *kvtd_tstat_hold(struct kvtd_conn *c, const char *name, size_t len)
{
	struct kvtd_server *srv = c->loop->srv;
	struct kvtd_tstats *x = srv->tstats;
	struct tstat_entry *e;
	struct kvtd_tstat **held;

	if (!x || len == 0 || len > PROTO_TENANT_MAX)
		return NULL;
	pthread_mutex_lock(&x->lock);
	e = tstat_get_locked(srv, name, len);
	for (uint32_t i = 0; e && i < c->tstat_held_count; i++)
		if (c->tstat_held[i] == &e->st)
			goto out; /* held already */
	/* A connection is one tenant's, or an S3 one each signer's in turn:
	 * held until it is freed, as its requests may still point at them. */
	held = e ? realloc(c->tstat_held, (c->tstat_held_count + 1) * sizeof(*held)) : NULL;
	if (!held) {
		if (e && !e->refs && e->gone)
			tstat_drop_locked(x, e);
		e = NULL;
		goto out;
	}
	c->tstat_held = held;
	held[c->tstat_held_count++] = &e->st;
	e->refs++;
out:
	pthread_mutex_unlock(&x->lock);
	return e ? &e->st : NULL;
}

void kvtd_tstat_release(struct kvtd_conn *c)
{
	struct kvtd_tstats *x = c->loop->srv->tstats;

	if (!c->tstat_held_count)
		return;
	pthread_mutex_lock(&x->lock);
	for (uint32_t i = 0; i < c->tstat_held_count; i++) {
		struct tstat_entry *e = tstat_entry_of(c->tstat_held[i]);
		if (--e->refs == 0 && e->gone)
			tstat_drop_locked(x, e);
	}
	pthread_mutex_unlock(&x->lock);
	free(c->tstat_held);
	c->tstat_held = NULL;
	c->tstat_held_count = 0;
}

struct kvtd_tstat *kvtd_tstat_of(struct kvtd_conn *c)
{
	if (c->tstat || c->tenant_len == 0 || c->state != KVTD_CS_READY)
		return c->tstat;
	if (c->conns_tstat)
		c->tstat = c->conns_tstat; /* the entry it was admitted with, held */
	else if (!kvtd_auth_enabled())
		c->tstat = kvtd_tstat_named(c->loop->srv, c->tenant, c->tenant_len);
	return c->tstat;
}

/* FNV-1a over a name: the sweep's index of the entries. */
static uint32_t tstat_hash(const char *name, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 16777619u;
	return h;
}

int kvtd_tstat_sweep(struct kvtd_server *srv, const struct kvtd_tenants *t)
{
	struct kvtd_tstats *x = srv->tstats;
	unsigned cap = 16, *slot, n = kvtd_tenants_count(t), kept = 0;
	bool *listed;
	int freed = 0;

	if (!x)
		return 0;
	pthread_mutex_lock(&x->lock);
	while (cap < 2 * x->count)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot)); /* entry index + 1; 0: empty */
	listed = calloc(x->count + 1, sizeof(*listed));
	if (!slot || !listed) {
		pthread_mutex_unlock(&x->lock);
		free(slot);
		free(listed);
		return -ENOMEM; /* nothing freed: the entries keep their limits */
	}
	for (unsigned i = 0; i < x->count; i++) {
		unsigned h = tstat_hash(x->v[i]->name, x->v[i]->name_len) & (cap - 1);
		while (slot[h])
			h = (h + 1) & (cap - 1);
		slot[h] = i + 1;
	}
	for (unsigned j = 0; j < n; j++) {
		size_t len;
		const char *name = kvtd_tenants_name(t, j, &len);
		unsigned h = tstat_hash(name, len) & (cap - 1);
		for (; slot[h]; h = (h + 1) & (cap - 1)) {
			struct tstat_entry *e = x->v[slot[h] - 1];
			if (e->name_len == len && memcmp(e->name, name, len) == 0) {
				listed[slot[h] - 1] = true;
				break;
			}
		}
	}
	for (unsigned i = 0; i < x->count; i++) {
		struct tstat_entry *e = x->v[i];
		e->gone = !listed[i];
		if (e->gone && !e->refs) {
			tstat_entry_free(e);
			freed++;
		} else {
			x->v[kept++] = e;
		}
	}
	x->count = kept;
	pthread_mutex_unlock(&x->lock);
	free(slot);
	free(listed);
	return freed;
}

unsigned kvtd_tstat_walk(struct kvtd_server *srv,
			 void (*fn)(void *arg, const char *name, const struct kvtd_tstat *st),
			 void *arg)
{
	struct kvtd_tstats *x = srv->tstats;
	unsigned n;

	if (!x)
		return 0;
	pthread_mutex_lock(&x->lock);
	n = x->count;
	for (unsigned i = 0; fn && i < n; i++)
		fn(arg, x->v[i]->name, &x->v[i]->st);
	pthread_mutex_unlock(&x->lock);
	return n;
}

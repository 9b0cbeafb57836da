/*
 * expiry.c - RESP's expiry index: the (namespace, key, expiry) of each
 * value a SET stored with EX or PX, by expiry, so that values never read
 * again after they expire are found and deleted (Redis's active expiry;
 * respd.c "Active expiry" pops them and deletes under the read path's
 * rule; doc/resp.md "Expiry").
 *
 * A binary min-heap of fixed-size entries under one mutex: any loop
 * thread adds (a SET's put back), loop 0 pops (its sweep).  Bounded: at
 * most KVTD_EXPIRY_MAX entries (KVTD_TEST_EXPIRY_MAX in the environment
 * lowers it, for tests), and with per-tenant shares (kvtd_auth_enabled
 * and --max-memory, as loop.c's shares) a namespace -- a tenant's RESP
 * keys live in one -- holds at most a quarter of them.  An entry past
 * either, or whose memory --max-memory refuses, is dropped and counted
 * (server.resp_expiry_dropped): its value still expires when read.  The
 * heap's array and the per-namespace counts are charged to --max-memory
 * as they grow (kvtd_mem_charge), uncharged at exit.
 *
 * The index lives in memory only: after a restart it is empty, and the
 * values set before expire when read, as before.
 *
 * One entry a key: a table from (namespace, key) to its heap index (open
 * addressing, linear probing, twice the heap's capacity, grown and
 * charged with it: 12 bytes an entry more) finds a key set again with a
 * TTL, and its entry keeps the earlier of the two expiries.  The sweep's
 * probe decides: a value not expired any more is left, and if it has an
 * expiry of its own (a later SET's) the probe adds it again
 * (respd.c "Active expiry").  Until 2026-12-06 each SET took an entry of
 * its own: a key set again with `EX 3600` 16,384 times held a tenant's
 * quarter for that hour.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

struct expiry_ent {
	uint64_t at_ms;
	uint32_t ns;
	uint32_t key_len;
	uint8_t key[KVT_KEY_MAX];
};

struct kvtd_expiry {
	pthread_mutex_t lock;
	struct expiry_ent *heap; /* (lock) */
	uint32_t count, cap, max;
	uint32_t *slot_of;       /* heap index -> its slot of tab (lock) */
	uint32_t *tab;           /* (namespace, key) -> heap index + 1, 0 empty */
	uint32_t tab_cap;        /* a power of two, >= 2 x cap */
	uint32_t *per_ns;        /* entries of each namespace id (lock) */
	uint32_t ns_cap;
	uint64_t charged;        /* of --max-memory: heap and per_ns */
	uint64_t secret;         /* kvtd_key_hash's key (srv->key_secret) */
	_Atomic uint64_t next_ms; /* heap[0].at_ms, 0 with none: loop 0's wait */
};

int kvtd_expiry_init(struct kvtd_server *srv)
{
	struct kvtd_expiry *x = calloc(1, sizeof(*x));
	const char *env = getenv("KVTD_TEST_EXPIRY_MAX");

	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->max = KVTD_EXPIRY_MAX;
	x->secret = srv->key_secret;
	if (env && atoi(env) > 0 && (uint32_t)atoi(env) < KVTD_EXPIRY_MAX)
		x->max = (uint32_t)atoi(env);
	srv->expiry = x;
	return 0;
}

void kvtd_expiry_free(struct kvtd_server *srv)
{
	struct kvtd_expiry *x = srv->expiry;

	if (!x)
		return;
	kvtd_mem_uncharge(srv, x->charged);
	pthread_mutex_destroy(&x->lock);
	free(x->heap);
	free(x->slot_of);
	free(x->tab);
	free(x->per_ns);
	free(x);
	srv->expiry = NULL;
}

/* Grow an array of *cap elements of size sz to hold need, charging the
 * growth; false: no memory, or --max-memory refused it. */
static bool expiry_grow(struct kvtd_server *srv, void **p, uint32_t *cap, size_t sz,
			uint32_t need, uint32_t limit)
{
	struct kvtd_expiry *x = srv->expiry;
	uint32_t ncap = *cap ? *cap : 64;
	void *np;

	while (ncap < need)
		ncap = ncap > limit / 2 ? limit : ncap * 2;
	if (ncap < need)
		return false;
	if (!kvtd_mem_charge(srv, (uint64_t)(ncap - *cap) * sz, false))
		return false;
	np = realloc(*p, (size_t)ncap * sz);
	if (!np) {
		kvtd_mem_uncharge(srv, (uint64_t)(ncap - *cap) * sz);
		return false;
	}
	memset((char *)np + (size_t)*cap * sz, 0, (size_t)(ncap - *cap) * sz);
	x->charged += (uint64_t)(ncap - *cap) * sz;
	*p = np;
	*cap = ncap;
	return true;
}

static uint32_t expiry_home(const struct kvtd_expiry *x, const struct expiry_ent *e)
{
	return (uint32_t)kvtd_key_hash(x->secret, e->ns, e->key, e->key_len) & (x->tab_cap - 1);
}

/* The heap index of (ns, key), or UINT32_MAX with *slot its free slot. */
static uint32_t expiry_find(const struct kvtd_expiry *x, uint32_t ns, const struct kvt_key *key,
			    uint32_t *slot)
{
	uint32_t s;

	if (!x->tab_cap)
		return UINT32_MAX;
	for (s = (uint32_t)kvtd_key_hash(x->secret, ns, key->bytes, key->len) & (x->tab_cap - 1);
	     x->tab[s]; s = (s + 1) & (x->tab_cap - 1)) {
		const struct expiry_ent *e = &x->heap[x->tab[s] - 1];
		if (e->ns == ns && e->key_len == key->len &&
		    memcmp(e->key, key->bytes, key->len) == 0)
			return x->tab[s] - 1;
	}
	*slot = s;
	return UINT32_MAX;
}

/* Empty slot s of tab, shifting back the entries after it that linear
 * probing placed past their home. */
static void expiry_unslot(struct kvtd_expiry *x, uint32_t s)
{
	uint32_t mask = x->tab_cap - 1, j = s;

	x->tab[s] = 0;
	for (;;) {
		uint32_t home;
		j = (j + 1) & mask;
		if (!x->tab[j])
			return;
		home = expiry_home(x, &x->heap[x->tab[j] - 1]);
		/* stays if its home is cyclically in (s, j] */
		if (s <= j ? (home > s && home <= j) : (home > s || home <= j))
			continue;
		x->tab[s] = x->tab[j];
		x->slot_of[x->tab[s] - 1] = s;
		x->tab[j] = 0;
		s = j;
	}
}

/* The heap and its tables grown to hold one entry more, charged; false:
 * no memory, or --max-memory refused it. */
static bool expiry_grow_heap(struct kvtd_server *srv, struct kvtd_expiry *x)
{
	uint32_t ncap = x->cap ? (x->cap > x->max / 2 ? x->max : x->cap * 2) : 64, ntab = 1;
	uint64_t more;
	struct expiry_ent *nh;
	uint32_t *ns, *nt;

	if (ncap <= x->count)
		return false;
	while (ntab < 2 * ncap)
		ntab <<= 1;
	more = (uint64_t)(ncap - x->cap) * (sizeof(*nh) + sizeof(*ns)) +
	       (uint64_t)(ntab - x->tab_cap) * sizeof(*nt);
	if (!kvtd_mem_charge(srv, more, false))
		return false;
	nt = calloc(ntab, sizeof(*nt));
	nh = nt ? realloc(x->heap, (size_t)ncap * sizeof(*nh)) : NULL;
	if (nh)
		x->heap = nh;
	ns = nh ? realloc(x->slot_of, (size_t)ncap * sizeof(*ns)) : NULL;
	if (!ns) {
		free(nt);
		kvtd_mem_uncharge(srv, more);
		return false;
	}
	x->slot_of = ns;
	free(x->tab);
	x->tab = nt;
	x->tab_cap = ntab;
	x->cap = ncap;
	x->charged += more;
	for (uint32_t i = 0; i < x->count; i++) {
		uint32_t s = expiry_home(x, &x->heap[i]);
		while (x->tab[s])
			s = (s + 1) & (ntab - 1);
		x->tab[s] = i + 1;
		x->slot_of[i] = s;
	}
	return true;
}

static void expiry_swap(struct kvtd_expiry *x, uint32_t a, uint32_t b)
{
	struct expiry_ent t = x->heap[a];
	uint32_t s = x->slot_of[a];

	x->heap[a] = x->heap[b];
	x->heap[b] = t;
	x->slot_of[a] = x->slot_of[b];
	x->slot_of[b] = s;
	x->tab[x->slot_of[a]] = a + 1;
	x->tab[x->slot_of[b]] = b + 1;
}

static void expiry_up(struct kvtd_expiry *x, uint32_t i)
{
	while (i > 0 && x->heap[(i - 1) / 2].at_ms > x->heap[i].at_ms) {
		expiry_swap(x, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static uint32_t expiry_share(const struct kvtd_server *srv, const struct kvtd_expiry *x)
{
	bool shares = srv->cfg.max_memory && kvtd_auth_enabled(); /* as loop.c's */
	return shares ? x->max / 4 : x->max;
}

bool kvtd_expiry_add(struct kvtd_server *srv, uint32_t ns, const struct kvt_key *key,
		     uint64_t at_ms)
{
	struct kvtd_expiry *x = srv->expiry;
	struct expiry_ent *e;
	uint32_t i, slot = 0;
	bool first;

	if (!x || !at_ms || key->len > KVT_KEY_MAX)
		return false;
	pthread_mutex_lock(&x->lock);
	/* earlier than loop 0's wait for the sweep (respd_tick_wait_ms) */
	first = !x->count || at_ms < x->heap[0].at_ms;
	i = expiry_find(x, ns, key, &slot);
	if (i != UINT32_MAX) { /* the key's entry: the earlier expiry */
		if (at_ms < x->heap[i].at_ms) {
			x->heap[i].at_ms = at_ms;
			expiry_up(x, i);
			atomic_store_explicit(&x->next_ms, x->heap[0].at_ms, memory_order_relaxed);
		}
		pthread_mutex_unlock(&x->lock);
		return first;
	}
	if (x->count >= x->max ||
	    (ns >= x->ns_cap && !expiry_grow(srv, (void **)&x->per_ns, &x->ns_cap,
					      sizeof(*x->per_ns), ns + 1, UINT32_MAX)) ||
	    x->per_ns[ns] >= expiry_share(srv, x) ||
	    (x->count >= x->cap && !expiry_grow_heap(srv, x))) {
		pthread_mutex_unlock(&x->lock);
		KVTD_COUNT(srv, resp_expiry_dropped, 1);
		return false;
	}
	(void)expiry_find(x, ns, key, &slot); /* the tables may have grown */
	i = x->count++;
	x->per_ns[ns]++;
	e = &x->heap[i];
	e->at_ms = at_ms;
	e->ns = ns;
	e->key_len = key->len;
	memcpy(e->key, key->bytes, key->len);
	x->tab[slot] = i + 1;
	x->slot_of[i] = slot;
	expiry_up(x, i);
	atomic_store_explicit(&srv->ctr.resp_expiry_held, x->count, memory_order_relaxed);
	atomic_store_explicit(&x->next_ms, x->count ? x->heap[0].at_ms : 0, memory_order_relaxed);
	pthread_mutex_unlock(&x->lock);
	return first;
}

unsigned kvtd_expiry_due(struct kvtd_server *srv, uint64_t now_ms, uint32_t *ns,
			 struct kvt_key *keys, unsigned max)
{
	struct kvtd_expiry *x = srv->expiry;
	unsigned n = 0;

	if (!x)
		return 0;
	pthread_mutex_lock(&x->lock);
	while (n < max && x->count && x->heap[0].at_ms <= now_ms) {
		struct expiry_ent *h = x->heap;
		uint32_t i = 0;

		ns[n] = h[0].ns;
		keys[n].len = h[0].key_len;
		memcpy(keys[n].bytes, h[0].key, h[0].key_len);
		n++;
		x->per_ns[h[0].ns]--;
		expiry_unslot(x, x->slot_of[0]);
		if (--x->count) {
			h[0] = h[x->count];
			x->slot_of[0] = x->slot_of[x->count];
			x->tab[x->slot_of[0]] = 1;
		}
		for (;;) {
			uint32_t l = 2 * i + 1, m = i;
			if (l < x->count && h[l].at_ms < h[m].at_ms)
				m = l;
			if (l + 1 < x->count && h[l + 1].at_ms < h[m].at_ms)
				m = l + 1;
			if (m == i)
				break;
			expiry_swap(x, i, m);
			i = m;
		}
	}
	atomic_store_explicit(&srv->ctr.resp_expiry_held, x->count, memory_order_relaxed);
	atomic_store_explicit(&x->next_ms, x->count ? x->heap[0].at_ms : 0, memory_order_relaxed);
	pthread_mutex_unlock(&x->lock);
	return n;
}

uint64_t kvtd_expiry_next_ms(const struct kvtd_server *srv)
{
	return srv->expiry ? atomic_load_explicit(&srv->expiry->next_ms, memory_order_relaxed) : 0;
}

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
 * A key set twice with a TTL has two entries; each pops at its own time
 * and the sweep's probe decides (a value not expired any more is left).
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
	uint32_t *per_ns;        /* entries of each namespace id (lock) */
	uint32_t ns_cap;
	uint64_t charged;        /* of --max-memory: heap and per_ns */
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

static void expiry_swap(struct expiry_ent *h, uint32_t a, uint32_t b)
{
	struct expiry_ent t = h[a];
	h[a] = h[b];
	h[b] = t;
}

static uint32_t expiry_share(const struct kvtd_server *srv, const struct kvtd_expiry *x)
{
	bool shares = srv->cfg.max_memory && kvtd_auth_enabled(); /* as loop.c's */
	return shares ? x->max / 4 : x->max;
}

void kvtd_expiry_add(struct kvtd_server *srv, uint32_t ns, const struct kvt_key *key,
		     uint64_t at_ms)
{
	struct kvtd_expiry *x = srv->expiry;
	struct expiry_ent *e;
	uint32_t i;

	if (!x || !at_ms || key->len > KVT_KEY_MAX)
		return;
	pthread_mutex_lock(&x->lock);
	if (x->count >= x->max ||
	    (ns >= x->ns_cap && !expiry_grow(srv, (void **)&x->per_ns, &x->ns_cap,
					      sizeof(*x->per_ns), ns + 1, UINT32_MAX)) ||
	    x->per_ns[ns] >= expiry_share(srv, x) ||
	    (x->count >= x->cap && !expiry_grow(srv, (void **)&x->heap, &x->cap,
						 sizeof(*x->heap), x->count + 1, x->max))) {
		pthread_mutex_unlock(&x->lock);
		KVTD_COUNT(srv, resp_expiry_dropped, 1);
		return;
	}
	i = x->count++;
	x->per_ns[ns]++;
	e = &x->heap[i];
	e->at_ms = at_ms;
	e->ns = ns;
	e->key_len = key->len;
	memcpy(e->key, key->bytes, key->len);
	while (i > 0 && x->heap[(i - 1) / 2].at_ms > x->heap[i].at_ms) {
		expiry_swap(x->heap, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	atomic_store_explicit(&srv->ctr.resp_expiry_held, x->count, memory_order_relaxed);
	atomic_store_explicit(&x->next_ms, x->count ? x->heap[0].at_ms : 0, memory_order_relaxed);
	pthread_mutex_unlock(&x->lock);
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
		h[0] = h[--x->count];
		for (;;) {
			uint32_t l = 2 * i + 1, m = i;
			if (l < x->count && h[l].at_ms < h[m].at_ms)
				m = l;
			if (l + 1 < x->count && h[l + 1].at_ms < h[m].at_ms)
				m = l + 1;
			if (m == i)
				break;
			expiry_swap(h, i, m);
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

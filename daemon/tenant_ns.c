/*
 * tenant_ns.c - each tenant's namespace ids, so that a tenant's STATS and
 * CLEAR cost its own namespaces and not the whole registry's (issue 21,
 * item 6; doc/security.md "Threats").
 *
 * The registry hands out ids 1, 2, 3 ... in order and never reuses or
 * moves one (lib/ns.c, doc/keys.md); kvt_ns_info answers for published ids
 * only.  So the index follows the registry with a cursor: before each
 * answer it reads the ids published since the last one (each id once over
 * the server's life, whoever registered it: NS_REGISTER, RESP, S3, a
 * peer) and appends each to its tenant's list, found by name in a hash
 * table.  Namespaces without a tenant line (no --tenants) are not listed.
 *
 * Locking: one mutex guards the cursor, the table and the lists; it is
 * held while reading new registry entries (memory only: the registry never
 * holds its lock across disk I/O) and while copying one tenant's list.
 * Any thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

struct tenant_ns_list {
	struct tenant_ns_list *next; /* hash chain */
	uint32_t *ids;
	uint32_t count, cap;
	uint32_t name_len;
	char name[PROTO_TENANT_MAX + 1];
};

struct kvtd_tenant_ns {
	pthread_mutex_t lock;
	uint32_t seen;                    /* ids 1..seen are in the lists */
	struct tenant_ns_list **buckets; /* bucket_mask + 1 chains */
	uint32_t bucket_mask, lists;
};

/* FNV-1a: tenant names come from the tenants file, not from requests. */
static uint32_t tenant_ns_hash(const char *name, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 16777619u;
	return h;
}

static struct tenant_ns_list *tenant_ns_find_locked(struct kvtd_tenant_ns *x, const char *name,
						    size_t len)
{
	struct tenant_ns_list *l = x->buckets[tenant_ns_hash(name, len) & x->bucket_mask];
	for (; l; l = l->next)
		if (l->name_len == len && memcmp(l->name, name, len) == 0)
			return l;
	return NULL;
}

/* Double the table once the lists outnumber the buckets. */
static void tenant_ns_grow_locked(struct kvtd_tenant_ns *x)
{
	uint32_t n = (x->bucket_mask + 1) * 2;
	struct tenant_ns_list **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (uint32_t i = 0; i <= x->bucket_mask; i++) {
		struct tenant_ns_list *l = x->buckets[i], *next;
		for (; l; l = next) {
			uint32_t h = tenant_ns_hash(l->name, l->name_len) & (n - 1);
			next = l->next;
			l->next = b[h];
			b[h] = l;
		}
	}
	free(x->buckets);
	x->buckets = b;
	x->bucket_mask = n - 1;
}

static int tenant_ns_add_locked(struct kvtd_tenant_ns *x, const char *name, size_t len,
				uint32_t id)
{
	struct tenant_ns_list *l = tenant_ns_find_locked(x, name, len);

	if (!l) {
		uint32_t h = tenant_ns_hash(name, len) & x->bucket_mask;
		if (len > PROTO_TENANT_MAX || !(l = calloc(1, sizeof(*l))))
			return -ENOMEM;
		memcpy(l->name, name, len);
		l->name_len = (uint32_t)len;
		l->next = x->buckets[h];
		x->buckets[h] = l;
		if (++x->lists > x->bucket_mask + 1)
			tenant_ns_grow_locked(x);
	}
	if (l->count == l->cap) {
		uint32_t nc = l->cap ? 2 * l->cap : 8;
		uint32_t *ni = realloc(l->ids, nc * sizeof(*ni));
		if (!ni)
			return -ENOMEM;
		l->ids = ni;
		l->cap = nc;
	}
	l->ids[l->count++] = id;
	return 0;
}

/* Index the ids published since the last call.  0, or -ENOMEM (the
 * cursor stays before the id that could not be listed: the next call
 * tries it again). */
static int tenant_ns_catch_up_locked(struct kvtd_server *srv, struct kvtd_tenant_ns *x)
{
	char canon[PROTO_CANON_MAX + 1];
	uint8_t dg[PROTO_DIGEST_LEN];

	for (;;) {
		const char *tn;
		int len = kvt_ns_info(srv->store, x->seen + 1, dg, canon, sizeof(canon)), tl;
		if (len < 0)
			return 0; /* not published (yet) */
		tl = (size_t)len < sizeof(canon) ? kvtd_canon_tenant(canon, (size_t)len, &tn) : -1;
		if (tl > 0 && tenant_ns_add_locked(x, tn, (size_t)tl, x->seen + 1) < 0)
			return -ENOMEM;
		x->seen++;
	}
}

int kvtd_tenant_ns_init(struct kvtd_server *srv)
{
	struct kvtd_tenant_ns *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	x->bucket_mask = 63;
	x->buckets = calloc(x->bucket_mask + 1, sizeof(*x->buckets));
	if (!x->buckets) {
		free(x);
		return -ENOMEM;
	}
	pthread_mutex_init(&x->lock, NULL);
	srv->tenant_ns = x;
	pthread_mutex_lock(&x->lock);
	rc = tenant_ns_catch_up_locked(srv, x);
	pthread_mutex_unlock(&x->lock);
	return rc;
}

void kvtd_tenant_ns_free(struct kvtd_server *srv)
{
	struct kvtd_tenant_ns *x = srv->tenant_ns;

	if (!x)
		return;
	for (uint32_t i = 0; i <= x->bucket_mask; i++) {
		struct tenant_ns_list *l = x->buckets[i], *next;
		for (; l; l = next) {
			next = l->next;
			free(l->ids);
			free(l);
		}
	}
	free(x->buckets);
	pthread_mutex_destroy(&x->lock);
	free(x);
	srv->tenant_ns = NULL;
}

int64_t kvtd_tenant_ns_ids(struct kvtd_server *srv, const char *tenant, size_t len,
			   uint32_t **ids)
{
	struct kvtd_tenant_ns *x = srv->tenant_ns;
	struct tenant_ns_list *l;
	int64_t n = 0;
	int rc;

	if (ids)
		*ids = NULL;
	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&x->lock);
	rc = tenant_ns_catch_up_locked(srv, x);
	l = rc == 0 ? tenant_ns_find_locked(x, tenant, len) : NULL;
	if (rc == 0 && l && l->count) {
		n = l->count;
		if (ids) {
			*ids = malloc(l->count * sizeof(**ids));
			if (*ids)
				memcpy(*ids, l->ids, l->count * sizeof(**ids));
			else
				rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&x->lock);
	return rc < 0 ? rc : n;
}

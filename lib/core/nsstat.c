/*
 * nsstat.c - per-namespace statistics: a fixed table of relaxed atomic
 * counters, one row per namespace id up to the option stats.namespaces
 * and one "other" row for the rest (nsstat.h says who counts what).
 *
 * Owns: the table (allocated at open through the store's allocation
 * wrapper, freed at close).  Sits in core beside the DRAM tier that
 * counts into it; the store reports it with its other statistics.
 *
 * Cost on the request path: a get adds one relaxed atomic to its row (the
 * hit's tier, a miss, or an error), a lookup three; a put and an eviction
 * in DRAM add a few more under the shard lock they already hold.  Rows
 * are cache-line aligned, so two namespaces never share a line.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kvt_int.h"
#include "nsstat.h"

int nsstat_init(struct nsstat *t, struct kvt_mem *mem, uint32_t namespaces)
{
	memset(t, 0, sizeof(*t));
	t->mem = mem;
	if (namespaces == 0)
		return 0;
	if (namespaces > NSSTAT_MAX)
		namespaces = NSSTAT_MAX;
	t->rows = kvt_mem_alloc_aligned(mem, 64, (size_t)(namespaces + 1) * sizeof(*t->rows));
	if (!t->rows)
		return -ENOMEM;
	for (uint32_t i = 0; i <= namespaces; i++)
		for (unsigned c = 0; c < NSS__COUNT; c++)
			atomic_init(&t->rows[i].c[c], 0);
	t->row_count = namespaces + 1;
	return 0;
}

void nsstat_fini(struct nsstat *t)
{
	if (t->rows)
		kvt_mem_free(t->mem, t->rows, (size_t)t->row_count * sizeof(*t->rows));
	t->rows = NULL;
	t->row_count = 0;
}

void nsstat_req_slow(const struct nsstat *t, const struct kvt_req *r, int status)
{
	struct nsstat_row *row = nsstat_row(t, r->ns);
	enum nsstat_counter c;

	if (r->op == KVT_OP_LOOKUP) {
		atomic_fetch_add_explicit(&row->c[NSS_LOOKUPS], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&row->c[NSS_LOOKUP_KEYS], r->key_count,
					  memory_order_relaxed);
		if (status == KVT_OK && r->length)
			atomic_fetch_add_explicit(&row->c[NSS_LOOKUP_HITS], r->length,
						  memory_order_relaxed);
		return;
	}
	if (r->flags & KVT_F_QUIET)
		return; /* leaves no trace (kvtier.h): not counted in DRAM either */
	if (status == KVT_OK && r->tier >= KVT_TIER_DRAM && r->tier < KVT_TIER_COUNT)
		c = (enum nsstat_counter)(NSS_HITS + r->tier - KVT_TIER_DRAM);
	else if (status == KVT_MISS || status == KVT_OK)
		c = NSS_MISSES; /* KVT_OK without a tier cannot happen; never a hit then */
	else
		c = NSS_GET_ERRORS;
	atomic_fetch_add_explicit(&row->c[c], 1, memory_order_relaxed);
}

/* Statistic names, by counter; NULL: not reported under its own name. */
static const char *const nsstat_names[NSS__COUNT] = {
	[NSS_LOOKUPS] = "lookups",
	[NSS_LOOKUP_KEYS] = "lookup_keys",
	[NSS_LOOKUP_HITS] = "lookup_hits",
	[NSS_HITS + KVT_TIER_DRAM - 1] = "hits_dram",
	[NSS_HITS + KVT_TIER_SSD - 1] = "hits_ssd",
	[NSS_HITS + KVT_TIER_REMOTE - 1] = "hits_remote",
	[NSS_HITS + KVT_TIER_SHARED - 1] = "hits_shared",
	[NSS_MISSES] = "misses",
	[NSS_GET_ERRORS] = "get_errors",
	[NSS_PUTS] = "puts",
	[NSS_PUT_BYTES] = "put_bytes",
	[NSS_DRAM_BYTES] = "dram_bytes",
	[NSS_DRAM_BLOCKS] = "dram_blocks",
	[NSS_EVICTED] = "evicted",
	[NSS_EVICTED_BYTES] = "evicted_bytes",
	[NSS_EVICTED_UNREAD] = "evicted_unread",
	[NSS_EVICTED_UNREAD_BYTES] = "evicted_unread_bytes",
};

/* The value of "key=" in a canonical text (one line), into out. */
static void nsstat_canon_field(const char *canon, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key), n = 0;
	const char *p = canon;
	out[0] = 0;
	while (p && *p) {
		if (strncmp(p, key, kl) == 0) {
			p += kl;
			while (p[n] && p[n] != '\n' && n + 1 < cap)
				n++;
			memcpy(out, p, n);
			out[n] = 0;
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
}

/* One row under "ns.<label>.": the counters, gets as their sum. */
static void nsstat_row_stats(const struct nsstat_row *row, const char *label, kvt_stats_fn fn,
			     void *ctx)
{
	uint64_t v[NSS__COUNT], gets = 0;
	char name[64];

	for (unsigned c = 0; c < NSS__COUNT; c++)
		v[c] = atomic_load_explicit(&row->c[c], memory_order_relaxed);
	for (unsigned c = NSS_HITS; c <= NSS_GET_ERRORS; c++)
		gets += v[c];
	snprintf(name, sizeof(name), "ns.%s.gets", label);
	fn(ctx, name, gets, NULL);
	for (unsigned c = 0; c < NSS__COUNT; c++) {
		snprintf(name, sizeof(name), "ns.%s.%s", label, nsstat_names[c]);
		fn(ctx, name, v[c], NULL);
	}
}

static bool nsstat_row_used(const struct nsstat_row *row)
{
	for (unsigned c = 0; c < NSS__COUNT; c++)
		if (atomic_load_explicit(&row->c[c], memory_order_relaxed))
			return true;
	return false;
}

/* Row id's texts (digest, model, tenant) and counters. */
static void nsstat_id_stats(const struct nsstat *t, struct ns_registry *reg, uint32_t id,
			    kvt_stats_fn fn, void *ctx)
{
	const struct ns_entry *e = ns_reg_get(reg, id);
	char label[16], name[64], text[256];

	snprintf(label, sizeof(label), "%u", id);
	if (e) {
		for (unsigned i = 0; i < 8; i++)
			snprintf(text + 2 * i, 3, "%02x", e->digest[i]);
		snprintf(name, sizeof(name), "ns.%s.digest", label);
		fn(ctx, name, 0, text);
		nsstat_canon_field(e->canon, "model=", text, sizeof(text));
		snprintf(name, sizeof(name), "ns.%s.model", label);
		fn(ctx, name, 0, text);
		nsstat_canon_field(e->canon, "tenant=", text, sizeof(text));
		snprintf(name, sizeof(name), "ns.%s.tenant", label);
		fn(ctx, name, 0, text);
	}
	nsstat_row_stats(&t->rows[id], label, fn, ctx);
}

void nsstat_stats(const struct nsstat *t, struct ns_registry *reg, kvt_stats_fn fn, void *ctx)
{
	uint32_t registered;

	if (!t->rows)
		return;
	registered = atomic_load_explicit(&reg->count, memory_order_acquire);
	fn(ctx, "ns.table_rows", t->row_count - 1, NULL);
	fn(ctx, "ns.other_namespaces",
	   registered > t->row_count - 1 ? registered - (t->row_count - 1) : 0, NULL);
	for (uint32_t id = 1; id < t->row_count; id++)
		if (nsstat_row_used(&t->rows[id]))
			nsstat_id_stats(t, reg, id, fn, ctx);
	if (nsstat_row_used(&t->rows[0]))
		nsstat_row_stats(&t->rows[0], "other", fn, ctx);
}

void nsstat_ns_stats(const struct nsstat *t, struct ns_registry *reg, uint32_t ns,
		     kvt_stats_fn fn, void *ctx)
{
	if (!t->rows || ns == 0 || ns >= t->row_count)
		return;
	nsstat_id_stats(t, reg, ns, fn, ctx);
}

/*
 * nsstat.h - per-namespace statistics (nsstat.c): which namespace (model,
 * tenant, rank) finds its context again and which only costs space.
 *
 * A fixed table allocated at open: one row per namespace id 1..rows-1
 * (ids are dense and start at 1, kvt_int.h), row 0 is "other", where
 * every namespace with a larger id is counted.  Memory is bounded by the
 * option stats.namespaces, never by how many namespaces register; the
 * same cap bounds the `namespace` label of kvtierd's metrics.
 *
 * Who counts what:
 *   the store (store_dispatch.c, store_sync.c)  lookups, gets, hits by
 *              tier, misses: once per request, when it completes
 *   DRAM (dram.c)   puts stored, their bytes, the bytes held now, and
 *              blocks evicted -- read at least once while in DRAM, or never
 *
 * Threads: any; every counter is a relaxed atomic (each exact, a row not
 * one snapshot), as the store's other counters (doc/threads.md).  No lock.
 */
#ifndef KVT_NSSTAT_H
#define KVT_NSSTAT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvtier.h"

struct kvt_mem;
struct ns_registry;

#define NSSTAT_DEFAULT 64  /* namespaces with their own row, by default */
#define NSSTAT_MAX 256     /* most the option allows (kvtierd's STATS frame, metrics) */

enum nsstat_counter {
	NSS_LOOKUPS = 0,     /* lookup_prefix calls */
	NSS_LOOKUP_KEYS,     /* keys they asked about */
	NSS_LOOKUP_HITS,     /* leading keys they found (any tier) */
	NSS_HITS,            /* gets served: + tier - 1 (DRAM, SSD, remote, shared) */
	NSS_HITS_LAST = NSS_HITS + KVT_TIER_COUNT - 2,
	NSS_MISSES,          /* gets that found nothing */
	NSS_GET_ERRORS,      /* gets that ended in an error (canceled included) */
	NSS_PUTS,            /* values stored in DRAM by puts (not promotions) */
	NSS_PUT_BYTES,       /* their bytes */
	NSS_DRAM_BYTES,      /* gauge: value bytes in DRAM now */
	NSS_DRAM_BLOCKS,     /* gauge: blocks in DRAM now */
	NSS_EVICTED,         /* blocks evicted from DRAM */
	NSS_EVICTED_BYTES,
	NSS_EVICTED_UNREAD,  /* of those, never read while in DRAM */
	NSS_EVICTED_UNREAD_BYTES,
	NSS__COUNT
};

struct nsstat_row {
	_Atomic uint64_t c[NSS__COUNT];
} __attribute__((aligned(64)));

struct nsstat {
	struct kvt_mem *mem;
	struct nsstat_row *rows; /* row_count rows, or NULL: not counting */
	uint32_t row_count;      /* namespaces with their own row + 1 ("other") */
};

/* namespaces: ids 1..namespaces get a row each; 0 turns counting off.
 * 0 or -ENOMEM. */
int nsstat_init(struct nsstat *t, struct kvt_mem *mem, uint32_t namespaces);
void nsstat_fini(struct nsstat *t);

/* ns's row (row 0 "other" for ids past the table); NULL when off. */
static inline struct nsstat_row *nsstat_row(const struct nsstat *t, uint32_t ns)
{
	if (!t || !t->rows)
		return NULL;
	return &t->rows[ns < t->row_count ? ns : 0];
}

static inline void nsstat_add(const struct nsstat *t, uint32_t ns, enum nsstat_counter c,
			      uint64_t v)
{
	struct nsstat_row *row = nsstat_row(t, ns);
	if (row)
		atomic_fetch_add_explicit(&row->c[c], v, memory_order_relaxed);
}

static inline void nsstat_sub(const struct nsstat *t, uint32_t ns, enum nsstat_counter c,
			      uint64_t v)
{
	struct nsstat_row *row = nsstat_row(t, ns);
	if (row)
		atomic_fetch_sub_explicit(&row->c[c], v, memory_order_relaxed);
}

/* A request completed with status (lookups and non-quiet gets count;
 * everything else is ignored). */
void nsstat_req_slow(const struct nsstat *t, const struct kvt_req *r, int status);
static inline void nsstat_req(const struct nsstat *t, const struct kvt_req *r, int status)
{
	if (t->rows && (r->op == KVT_OP_GET || r->op == KVT_OP_GET_PINNED ||
			r->op == KVT_OP_LOOKUP))
		nsstat_req_slow(t, r, status);
}

/* "ns.<id>.*" for every row that counted something (id "other" for row
 * 0), with each namespace's digest, model and tenant as text: doc/stats.md. */
void nsstat_stats(const struct nsstat *t, struct ns_registry *reg, kvt_stats_fn fn, void *ctx);
/* One namespace's row under "ns.<id>." (nothing if ns has no row of its
 * own: an id past the table is in "other", which mixes namespaces). */
void nsstat_ns_stats(const struct nsstat *t, struct ns_registry *reg, uint32_t ns,
		     kvt_stats_fn fn, void *ctx);

#endif /* KVT_NSSTAT_H */

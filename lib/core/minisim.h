/*
 * minisim.h - a miniature cache simulation over sampled keys (see minisim.c).
 * Not thread-safe: the owner (one DRAM shard's evict state) calls it under
 * its lock.
 */
#ifndef KVT_MINISIM_H
#define KVT_MINISIM_H

#include <stdbool.h>
#include <stdint.h>

#include "ghost.h"
#include "kvt_int.h"

struct minisim_ent;

struct minisim {
	struct kvt_mem *mem;
	struct minisim_ent *ent; /* [0] probation sentinel, [1] main sentinel, then entries */
	uint32_t *bucket;        /* chained index: entry number, 0 = empty */
	uint32_t bucket_mask;
	struct ghost ghost;      /* evicted keys (seg only) */
	uint32_t nent, free_head, next_unused;
	uint64_t cap_chunks, main_max; /* main_max: chunks M may hold before it gives victims */
	uint64_t used_chunks, main_chunks;
	unsigned horizon;        /* seg: a key back within this many ghost generations goes to M */
	bool seg;                /* false: LRU; true: probation + main (doc/policies.md) */
};

/* A simulated cache of cap_chunks chunks holding at most max_entries keys;
 * seg: segmented (new keys on probation, reused ones in main, main at most
 * main_pct % of it, a ghost of ghost_keys keys, of which a key back within
 * horizon generations (at most GHOST_LIFE) goes to main: the real cache's
 * rule), else LRU. */
int minisim_init(struct minisim *m, struct kvt_mem *mem, uint64_t cap_chunks, uint32_t max_entries,
		 bool seg, unsigned main_pct, uint64_t ghost_keys, unsigned horizon);
void minisim_fini(struct minisim *m);
/* One access (a get or a put) of the key with this hash and size: true if
 * the simulated cache held it; it does afterwards.  retain: the caller's
 * hint (KVT_F_RETAIN): a new key starts in main (segmented only). */
bool minisim_access(struct minisim *m, uint64_t hash, uint32_t chunks, bool retain);

#endif

/*
 * ghost.h - a set of recently evicted keys, by fingerprint (see ghost.c).
 * Not thread-safe: the owner calls it under its lock.
 */
#ifndef KVT_GHOST_H
#define KVT_GHOST_H

#include <stdbool.h>
#include <stdint.h>

#include "kvt_int.h"

#define GHOST_WAYS 32 /* 2-byte slots per bucket */
#define GHOST_LIFE 8  /* generations an entry lives: one table of adds */
#define GHOST_LINE 64 /* bytes per bucket: one cache line */

struct ghost {
	struct kvt_mem *mem;
	uint8_t *line;      /* `buckets` lines of GHOST_WAYS slots (ghost.c) */
	uint32_t buckets;
	uint64_t adds, per_gen;
};

/* Room for `keys` keys (rounded up to a whole bucket of GHOST_WAYS). */
int ghost_init(struct ghost *g, struct kvt_mem *mem, uint64_t keys);
void ghost_fini(struct ghost *g);
void ghost_add(struct ghost *g, uint64_t hash);
/* Was the key added and not yet forgotten?  Forgets it if so. */
bool ghost_take(struct ghost *g, uint64_t hash);
/* The same, and how long ago it was added: 0 .. GHOST_LIFE-1 generations
 * of size / GHOST_LIFE adds each, or -1 if not held. */
int ghost_take_age(struct ghost *g, uint64_t hash);

#endif

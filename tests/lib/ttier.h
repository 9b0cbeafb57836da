/*
 * ttier.h - a tier for tests only (ttier.c): it plugs into a store's chain
 * through store_tier_register (tier.h), as any tier outside the library
 * would, and injects latency, errors and misses on demand.
 *
 * It holds blocks in memory: those its test hands it (ttier_hold), and,
 * with hold_puts, a copy of every block put into the store (its put_down
 * reads the DRAM block through dram.h's narrow interface).  A get of a
 * held block promotes it into DRAM (reserve, copy, publish).
 *
 * The knobs may change at any time, from any thread.
 */
#ifndef KVT_TEST_TTIER_H
#define KVT_TEST_TTIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvtier.h"

struct tier_ops;

struct ttier_conf {
	/* Knobs. */
	_Atomic unsigned latency_us; /* > 0: every answer comes from the tier's
				      * thread after this long (TIER_PENDING) */
	_Atomic int fail;            /* < 0: every operation fails with it (at the
				      * call, or through the callback with latency) */
	_Atomic bool miss;           /* every read misses, held or not */
	bool hold_puts;              /* copy blocks put into the store (at open) */
	uint32_t id;                 /* the KVT_TIER_* its hits report; 0: 5 */
	/* Counters. */
	_Atomic uint64_t gets, hits, exists, lookups, puts, dels, clears, pending;
};

/* The tier's table, named "ttier"; ttier_ops_named gives one more table
 * with another name (a second test tier in one chain). */
extern const struct tier_ops ttier_ops;
const struct tier_ops *ttier_ops_named(const char *name);

/* Add a test tier to a created store (store_tier_register). */
int ttier_add(struct kvt_store *s, struct ttier_conf *conf);
int ttier_add_ops(struct kvt_store *s, const struct tier_ops *ops, struct ttier_conf *conf);

/* Give the tier of conf (open) a block of its own: len bytes at buf. */
int ttier_hold(struct ttier_conf *conf, uint32_t ns, const struct kvt_key *key, const void *buf,
	       uint64_t len);
/* Blocks it holds. */
uint64_t ttier_count(struct ttier_conf *conf);

#endif

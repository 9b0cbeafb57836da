/*
 * ttier_chain.h - force-included (-include) into a second build of a store
 * test (tests/meson.build: test_store_ttier and friends) so that every
 * store it opens has the test tier (ttier.h) at the head of its chain,
 * answering every read with a miss, from its own thread after a delay
 * (TTIER_CHAIN_LATENCY_US), and failing nothing.  The test's source is not edited: if the store's walk
 * over its tiers were wrong (a miss not passed on, a pending answer lost,
 * a completion on the wrong thread), the test's own assertions fail.
 */
#ifndef KVT_TEST_TTIER_CHAIN_H
#define KVT_TEST_TTIER_CHAIN_H

#include "kvtier.h"
#include "ttier.h"

/* Answers from the tier's thread after this long; 0: at the call. */
#ifndef TTIER_CHAIN_LATENCY_US
#define TTIER_CHAIN_LATENCY_US 200
#endif

static inline int ttier_chain_open(struct kvt_store *s)
{
	/* A conf must outlive its store, and the test never says when that
	 * ends: one of a ring, reused after 256 opens. */
	static struct ttier_conf confs[256];
	static _Atomic unsigned next;
	struct ttier_conf *c = &confs[atomic_fetch_add(&next, 1) % 256];
	atomic_store(&c->latency_us, TTIER_CHAIN_LATENCY_US);
	atomic_store(&c->miss, true);
	(void)ttier_add(s, c); /* KVT_ESTATE on a store already open: its call fails anyway */
	return kvt_store_open(s);
}

#define kvt_store_open(s) ttier_chain_open(s)

#endif

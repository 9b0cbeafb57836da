/*
 * test_tier.c - the tier interface (lib/tier.h) through the test-only tier
 * (tests/lib/ttier.h), which plugs into stores with store_tier_register:
 * blocks it holds are promoted into DRAM and served with its tier id;
 * its latency makes every answer come from its thread; its misses pass
 * requests on; its errors are misses to gets and errors to deletes; the
 * chain's order is option store.tiers.
 */
#include <errno.h>
#include <string.h>

#include "kvt_int.h"
#include "tier.h"
#include "t.h"
#include "tstore.h"
#include "ttier.h"

#define TT_ID 5 /* what the test tier's hits report */

static struct kvt_store *open_with(struct ttier_conf *c, const char *tiers)
{
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "dram.capacity", "16M"));
	if (tiers)
		T_OK(kvt_store_set_option(s, "store.tiers", tiers));
	T_OK(ttier_add(s, c));
	T_OK(kvt_store_open(s));
	return s;
}

static int get(struct kvt_store *s, uint32_t ns, uint64_t k, uint8_t *buf, size_t len,
	       uint32_t *tier)
{
	struct kvt_key key = t_key(k);
	struct iovec v = { buf, len };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = key, .iov = &v, .iov_count = 1 };
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	int ret;
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
	ret = r.status;
	*tier = r.tier;
	T_OK(kvt_queue_destroy(q));
	return ret;
}

/* Held blocks are promoted into DRAM, once; exists and lookups see them. */
static void test_hits(bool slow)
{
	struct ttier_conf c = { 0 };
	uint8_t val[3][5000], buf[5000];
	struct kvt_key keys[4];
	uint8_t tiers[4];
	uint32_t tier;
	struct kvt_store *s;
	uint32_t ns;
	uint64_t t0;

	atomic_store(&c.latency_us, slow ? 30000 : 0);
	s = open_with(&c, NULL);
	ns = t_ns(s, "tier");
	for (int i = 0; i < 3; i++) {
		t_fill(val[i], sizeof(val[i]), 100 + (uint64_t)i);
		keys[i] = t_key((uint64_t)i);
	}
	keys[3] = t_key(3);
	/* Key 0 in DRAM, keys 1 and 2 in the tier only. */
	T_OK(kvt_put(s, ns, &keys[0], &(struct iovec){ val[0], sizeof(val[0]) }, 1));
	T_OK(ttier_hold(&c, ns, &keys[1], val[1], sizeof(val[1])));
	T_OK(ttier_hold(&c, ns, &keys[2], val[2], sizeof(val[2])));

	T_RC(kvt_lookup_prefix(s, ns, keys, 4, tiers), 3);
	T_EQ_INT(tiers[0], KVT_TIER_DRAM);
	T_EQ_INT(tiers[1], TT_ID);
	T_EQ_INT(tiers[2], TT_ID);
	T_EQ_INT(tiers[3], KVT_TIER_NONE);
	T_RC(kvt_exists(s, ns, &keys[2]), KVT_OK);
	T_RC(kvt_exists(s, ns, &keys[3]), KVT_MISS);

	t0 = t_now_ms();
	T_RC(get(s, ns, 1, buf, sizeof(buf), &tier), KVT_OK);
	if (slow)
		T_GE_INT(t_now_ms() - t0, 30); /* answered by the tier's thread, when due */
	T_EQ_INT(tier, TT_ID);
	T_EQ_MEM(buf, val[1], sizeof(buf));
	T_EQ_U64(atomic_load(&c.hits), 1);
	/* Now in DRAM: served from there, the tier not asked. */
	T_RC(get(s, ns, 1, buf, sizeof(buf), &tier), KVT_OK);
	T_EQ_INT(tier, KVT_TIER_DRAM);
	T_EQ_U64(atomic_load(&c.hits), 1);
	/* The synchronous call waits for the tier as well. */
	T_RC(kvt_get(s, ns, &keys[2], buf, sizeof(buf), NULL), KVT_OK);
	T_EQ_MEM(buf, val[2], sizeof(buf));
	T_RC(get(s, ns, 3, buf, sizeof(buf), &tier), KVT_MISS);
	T_EQ_INT(tier, KVT_TIER_NONE);
	T_EQ_U64(t_stat(s, "ttier.hits"), 2);

	/* Deletes reach the tier: a block only it holds is a hit, then gone. */
	T_OK(ttier_hold(&c, ns, &keys[3], val[0], 100));
	T_RC(kvt_delete(s, ns, &keys[3]), KVT_OK);
	T_RC(kvt_exists(s, ns, &keys[3]), KVT_MISS);
	T_EQ_U64(ttier_count(&c), 2);
	T_RC(kvt_clear(s, ns), 3); /* 3 in DRAM (0, 1, 2); 2 in the tier */
	T_EQ_U64(ttier_count(&c), 0);
	kvt_store_destroy(s);
}

/* Misses pass requests on; errors are misses to gets and errors to deletes. */
static void test_misses_errors(bool slow)
{
	struct ttier_conf c = { 0 };
	uint8_t val[4096], buf[4096];
	struct kvt_key k = t_key(7);
	struct kvt_store *s;
	uint32_t tier, ns;

	atomic_store(&c.latency_us, slow ? 1000 : 0);
	s = open_with(&c, NULL);
	ns = t_ns(s, "tier");
	t_fill(val, sizeof(val), 7);
	T_OK(ttier_hold(&c, ns, &k, val, sizeof(val)));

	atomic_store(&c.miss, true);
	T_RC(get(s, ns, 7, buf, sizeof(buf), &tier), KVT_MISS);
	T_RC(kvt_exists(s, ns, &k), KVT_MISS);
	T_RC(kvt_lookup_prefix(s, ns, &k, 1, NULL), 0);
	atomic_store(&c.miss, false);

	atomic_store(&c.fail, -EIO);
	T_RC(get(s, ns, 7, buf, sizeof(buf), &tier), KVT_MISS); /* never an error to the model */
	T_RC(kvt_exists(s, ns, &k), KVT_MISS);
	T_RC(kvt_delete(s, ns, &k), -EIO); /* the block may still be there: say so */
	T_RC(kvt_clear(s, ns), -EIO);
	atomic_store(&c.fail, 0);

	T_RC(get(s, ns, 7, buf, sizeof(buf), &tier), KVT_OK);
	T_EQ_INT(tier, TT_ID);
	T_EQ_MEM(buf, val, sizeof(buf));
	T_ASSERT(atomic_load(&c.gets) >= 3);
	kvt_store_destroy(s);
}

/* Puts are written down to a tier that takes them (put_down), which
 * reads the DRAM block through dram.h; blocks DRAM evicted come back from
 * it with its tier id. */
static void test_put_down(void)
{
	struct ttier_conf c = { .hold_puts = true };
	static uint8_t val[64 << 10], buf[64 << 10];
	struct kvt_store *s;
	uint32_t tier, ns;
	int n = 64;

	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "dram.capacity", "1M"));
	T_OK(ttier_add(s, &c));
	T_OK(kvt_store_open(s));
	ns = t_ns(s, "down");
	for (int i = 0; i < n; i++) {
		struct kvt_key k = t_key((uint64_t)i);
		t_fill(val, sizeof(val), 500 + (uint64_t)i);
		T_OK(kvt_put(s, ns, &k, &(struct iovec){ val, sizeof(val) }, 1));
	}
	T_EQ_U64(atomic_load(&c.puts), (uint64_t)n);
	T_EQ_U64(ttier_count(&c), (uint64_t)n);
	/* 4 MiB put into 1 MiB of DRAM: block 0 was evicted, the tier has it. */
	T_RC(get(s, ns, 0, buf, sizeof(buf), &tier), KVT_OK);
	T_EQ_INT(tier, TT_ID);
	t_fill(val, sizeof(val), 500);
	T_EQ_MEM(buf, val, sizeof(buf));
	kvt_store_destroy(s);
}

/* Two test tiers holding different bytes under one key: which answers is
 * the order store.tiers gives; a name nobody knows fails the open. */
static void test_order(void)
{
	const struct tier_ops *a = ttier_ops_named("ta"), *b = ttier_ops_named("tb");
	const char *orders[2] = { "ta,tb", "tb,ta" };
	struct kvt_store *s;

	for (int o = 0; o < 2; o++) {
		struct ttier_conf ca = { 0 }, cb = { 0 };
		uint8_t va[3000], vb[3000], buf[3000];
		struct kvt_key k = t_key(1);
		uint32_t tier, ns;
		T_OK(kvt_store_create(&s));
		T_OK(kvt_store_set_option(s, "store.tiers", orders[o]));
		T_OK(ttier_add_ops(s, a, &ca));
		T_OK(ttier_add_ops(s, b, &cb));
		T_OK(kvt_store_open(s));
		ns = t_ns(s, "order");
		t_fill(va, sizeof(va), 1);
		t_fill(vb, sizeof(vb), 2);
		T_OK(ttier_hold(&ca, ns, &k, va, sizeof(va)));
		T_OK(ttier_hold(&cb, ns, &k, vb, sizeof(vb)));
		T_RC(get(s, ns, 1, buf, sizeof(buf), &tier), KVT_OK);
		T_EQ_MEM(buf, o == 0 ? va : vb, sizeof(buf));
		T_EQ_U64(atomic_load(o == 0 ? &cb.gets : &ca.gets), 0); /* the second never asked */
		kvt_store_destroy(s);
	}
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "store.tiers", "ssd,,shared"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "store.tiers", "ssd,ssd"), KVT_EOPTVAL);
	T_OK(kvt_store_set_option(s, "store.tiers", "ssd,nosuch"));
	T_RC(kvt_store_open(s), KVT_EOPTVAL);
	kvt_store_destroy(s);
	/* A configured built-in tier left out of the list is an error too. */
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "remote.addr", "127.0.0.1:1"));
	T_OK(kvt_store_set_option(s, "store.tiers", "ssd,shared"));
	T_RC(kvt_store_open(s), KVT_EOPTVAL);
	kvt_store_destroy(s);
	/* Registration is before open only. */
	{
		struct ttier_conf c = { 0 };
		s = t_store_open("dram.capacity", "8M", NULL);
		T_RC(ttier_add(s, &c), KVT_ESTATE);
		kvt_store_destroy(s);
	}
}

int main(void)
{
	test_hits(false);
	test_hits(true);
	test_misses_errors(false);
	test_misses_errors(true);
	test_put_down();
	test_order();
	return 0;
}

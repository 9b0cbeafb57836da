/*
 * test_dram.c - the DRAM tier through the public API: values of every
 * shape, parts and ranges, put-if-absent, pins, delete, clear, eviction by
 * S3-FIFO and LRU, pinned blocks never evicted, split allocations, the
 * eviction hook, and the statistics that describe it all.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "dram.h"
#include "kvt_int.h"
#include "t.h"
#include "tstore.h"

/* A 1 MiB DRAM tier of 4 KiB chunks in one shard with `policy`, no huge
 * pages, no prefault, no log; its metadata counted in *mem. */
static struct dram *small_dram(struct kvt_mem *mem, int policy)
{
	static const struct kvt_logger quiet = { 0 };
	struct dram_config cfg = { .capacity = 1 << 20, .chunk = 4096, .shards = 1,
				   .policy = policy, .hugepages = DRAM_HUGE_OFF, .prefault = false };
	struct dram *d;
	T_OK(dram_open(&d, &cfg, mem, &quiet));
	return d;
}

static void test_shapes(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "64M", "dram.chunk", "64K", NULL);
	uint32_t ns = t_ns(s, "shapes");
	static const size_t sizes[] = { 1, 7, 4095, 4096, 4097, 65535, 65536, 65537,
					1 << 20, (3 << 20) + 13 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		T_RC(t_put_filled(s, ns, 100 + i, sizes[i]), KVT_OK);
		T_RC(t_get_filled(s, ns, 100 + i, sizes[i]), KVT_OK);
	}
	/* Put-if-absent: a second put with other bytes is a no-op. */
	{
		char other[16] = "different bytes";
		struct iovec v = { other, sizeof(other) };
		struct kvt_key k = t_key(100 + 3);
		T_RC(kvt_put(s, ns, &k, &v, 1), KVT_EXISTS);
		T_RC(t_get_filled(s, ns, 100 + 3, 4096), KVT_OK);
		T_EQ_U64(t_stat(s, "dram.put_exists"), 1);
	}
	/* Too small a buffer: EBUFSMALL with the length to retry with. */
	{
		char small[10];
		uint64_t vl = 0;
		struct kvt_key k = t_key(100 + 8);
		T_RC(kvt_get(s, ns, &k, small, sizeof(small), &vl), KVT_EBUFSMALL);
		T_EQ_U64(vl, 1 << 20);
	}
	/* Same key in another namespace is another block. */
	{
		uint32_t ns2 = t_ns(s, "shapes-2");
		char buf[8];
		struct kvt_key k = t_key(100);
		T_NE_INT(ns, ns2);
		T_RC(kvt_get(s, ns2, &k, buf, sizeof(buf), NULL), KVT_MISS);
		T_RC(kvt_exists(s, ns2, &k), KVT_MISS);
		T_RC(kvt_exists(s, ns, &k), KVT_OK);
	}
	/* Opaque keys of every length 1..64 are distinct blocks. */
	for (uint32_t len = 1; len <= KVT_KEY_MAX; len++) {
		struct kvt_key k;
		uint8_t raw[KVT_KEY_MAX];
		char val[3] = { (char)len, 'v', (char)(len * 3) }, got[3];
		struct iovec v = { val, 3 };
		memset(raw, 0xab, sizeof(raw));
		T_OK(kvt_key_set(&k, raw, len));
		T_RC(kvt_put(s, ns, &k, &v, 1), KVT_OK);
		T_RC(kvt_get(s, ns, &k, got, 3, NULL), KVT_OK);
		T_EQ_MEM(got, val, 3);
	}
	kvt_store_destroy(s);
}

static void test_parts_ranges(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "32M", "dram.chunk", "4K", NULL);
	uint32_t ns = t_ns(s, "parts");
	size_t plen[5] = { 5000, 1, 4096, 70000, 12345 }, total = 0, off[6] = { 0 };
	struct iovec parts[5];
	char *src[5], *whole, *buf;
	struct kvt_key k = t_key(7);
	struct kvt_queue *q;
	struct kvt_req r, *rp = &r, *got;
	uint32_t crcs[5];

	for (int i = 0; i < 5; i++) {
		src[i] = malloc(plen[i]);
		t_fill(src[i], plen[i], 1000 + i);
		parts[i].iov_base = src[i];
		parts[i].iov_len = plen[i];
		off[i + 1] = off[i] + plen[i];
		total += plen[i];
		crcs[i] = kvt_crc32c(0, src[i], plen[i]);
	}
	whole = malloc(total);
	for (int i = 0; i < 5; i++)
		memcpy(whole + off[i], src[i], plen[i]);
	buf = malloc(total);

	T_OK(kvt_queue_create(s, &q));
	/* Wrong supplied CRC: refused, nothing stored. */
	crcs[2] ^= 1;
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_PUT; r.ns = ns; r.key = k; r.iov = parts; r.iov_count = 5;
	r.flags = KVT_F_CRC; r.crcs = crcs;
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_poll(q, &got, 1), 1);
	T_ASSERT(got == &r);
	T_RC(r.status, KVT_ECORRUPT);
	T_RC(kvt_exists(s, ns, &k), KVT_MISS);
	crcs[2] ^= 1;
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_poll(q, &got, 1), 1);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_DRAM);

	/* The part table of a pinned value: lengths and CRCs as put. */
	{
		uint64_t lens[8];
		uint32_t got_crcs[8];
		uint64_t pin;
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET_PINNED; r.ns = ns; r.key = k;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_OK);
		pin = r.pin;
		T_RC(kvt_pin_parts(s, pin, lens, got_crcs, 8), 5);
		for (int i = 0; i < 5; i++) {
			T_EQ_U64(lens[i], plen[i]);
			T_EQ_U64(got_crcs[i], crcs[i]);
		}
		T_RC(kvt_pin_parts(s, pin, lens, NULL, 2), 5); /* count even if more */
		T_RC(kvt_pin_parts(s, pin + 1, lens, NULL, 2), KVT_EPIN);
		T_OK(kvt_pin_release(s, pin));
		T_RC(kvt_pin_parts(s, pin, lens, NULL, 2), KVT_EPIN);
		T_RC(kvt_pin_parts(NULL, pin, lens, NULL, 2), KVT_ENULL);
	}
	/* Whole value, verified. */
	for (int verify = 0; verify < 2; verify++) {
		struct iovec dst = { buf, total };
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = &dst; r.iov_count = 1;
		r.flags = verify ? KVT_F_VERIFY : 0;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, total);
		T_EQ_MEM(buf, whole, total);
	}
	/* Each part alone, into two scattered buffers, verified. */
	for (uint32_t p = 0; p < 5; p++) {
		char *b1 = malloc(plen[p]);
		size_t half = plen[p] / 2;
		struct iovec dst[2] = { { b1, half }, { b1 + half, plen[p] - half } };
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = dst; r.iov_count = 2;
		r.flags = KVT_F_PART | KVT_F_VERIFY; r.part = p;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, plen[p]);
		T_EQ_U64(r.value_len, total);
		T_EQ_MEM(b1, src[p], plen[p]);
		free(b1);
	}
	/* Part out of range. */
	{
		struct iovec dst = { buf, total };
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = &dst; r.iov_count = 1;
		r.flags = KVT_F_PART; r.part = 5;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_ERANGE);
	}
	/* Byte ranges across part and chunk boundaries. */
	{
		static const uint64_t ro[][2] = { { 0, 1 }, { 4999, 3 }, { 4096, 8192 },
						  { 9000, 70000 }, { 91441, 1 }, { 1, 91441 } };
		for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
			struct iovec dst = { buf, total };
			memset(&r, 0, sizeof(r));
			r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = &dst; r.iov_count = 1;
			r.flags = KVT_F_RANGE; r.off = ro[i][0]; r.len = ro[i][1];
			T_RC(kvt_submit(q, &rp, 1), 1);
			T_RC(kvt_queue_poll(q, &got, 1), 1);
			T_RC(r.status, KVT_OK);
			T_EQ_U64(r.length, ro[i][1]);
			T_EQ_MEM(buf, whole + ro[i][0], ro[i][1]);
		}
		struct iovec dst = { buf, total };
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = &dst; r.iov_count = 1;
		r.flags = KVT_F_RANGE; r.off = total - 1; r.len = 2;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_ERANGE);
	}
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
	for (int i = 0; i < 5; i++)
		free(src[i]);
	free(whole);
	free(buf);
}

static void test_pins(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "8M", "dram.chunk", "64K",
					   "dram.shards", "1", NULL);
	uint32_t ns = t_ns(s, "pins");
	struct kvt_queue *q;
	struct kvt_req r, *rp = &r, *got;
	size_t len = 300000;
	char *want = malloc(len);
	uint64_t pin;

	T_RC(t_put_filled(s, ns, 1, len), KVT_OK);
	t_fill(want, len, 1);
	T_OK(kvt_queue_create(s, &q));
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_GET_PINNED; r.ns = ns; r.key = t_key(1);
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_poll(q, &got, 1), 1);
	T_RC(r.status, KVT_OK);
	T_EQ_U64(r.length, len);
	T_EQ_INT(r.view_count, 1);
	T_ASSERT(((uintptr_t)r.view[0].iov_base & 4095) == 0);
	T_EQ_MEM(r.view[0].iov_base, want, len);
	pin = r.pin;
	/* Deferred CRC: computed when first asked for. */
	{
		uint64_t l;
		uint32_t c;
		T_RC(kvt_pin_parts(s, pin, &l, &c, 1), 1);
		T_EQ_U64(l, len);
		T_EQ_U64(c, kvt_crc32c(0, want, len));
	}
	T_EQ_U64(t_stat(s, "store.pins_active"), 1);
	T_EQ_U64(t_stat(s, "dram.pinned_blocks"), 1);

	/* Delete while pinned: gone for everyone else, bytes stay for us. */
	{
		struct kvt_key k = t_key(1);
		T_RC(kvt_delete(s, ns, &k), KVT_OK);
		T_RC(kvt_exists(s, ns, &k), KVT_MISS);
		T_RC(kvt_delete(s, ns, &k), KVT_MISS);
	}
	/* Fill the tier well past capacity: the pinned block's chunks are never reused. */
	for (uint64_t i = 10; i < 100; i++)
		T_RC(t_put_filled(s, ns, i, len), KVT_OK);
	T_ASSERT(t_stat(s, "dram.evictions") > 0);
	T_EQ_MEM(r.view[0].iov_base, want, len);
	T_EQ_U64(t_stat(s, "dram.dead_pending"), 1);

	T_RC(kvt_pin_release(s, pin), 0);
	T_RC(kvt_pin_release(s, pin), KVT_EPIN);     /* double release is detected */
	T_RC(kvt_pin_release(s, 0), KVT_EPIN);
	T_RC(kvt_pin_release(s, 12345), KVT_EPIN);
	T_EQ_U64(t_stat(s, "dram.dead_pending"), 0);
	T_EQ_U64(t_stat(s, "store.pins_active"), 0);

	/* Pin everything that is left, then a put finds no room: EFULL, not a hang. */
	{
		uint64_t pins[200];
		int npins = 0;
		for (uint64_t i = 10; i < 100; i++) {
			memset(&r, 0, sizeof(r));
			r.op = KVT_OP_GET_PINNED; r.ns = ns; r.key = t_key(i);
			T_RC(kvt_submit(q, &rp, 1), 1);
			T_RC(kvt_queue_poll(q, &got, 1), 1);
			if (r.status == KVT_OK)
				pins[npins++] = r.pin;
			else
				T_RC(r.status, KVT_MISS);
		}
		T_ASSERT(npins > 10);
		/* Free space fills up first; then no victim is left. */
		{
			int pr = KVT_OK;
			for (uint64_t i = 5000; i < 5100 && pr == KVT_OK; i++) {
				pr = t_put_filled(s, ns, i, len);
				T_ASSERT(pr == KVT_OK || pr == KVT_EFULL);
				/* Each new block evicts the previous new one, never a pinned one. */
			}
			T_RC(t_put_filled(s, ns, 6000, 8 << 20), KVT_EFULL);
		}
		T_ASSERT(t_stat(s, "dram.full_errors") >= 1);
		for (int i = 0; i < npins; i++)
			T_OK(kvt_pin_release(s, pins[i]));
		for (int i = 0; i < npins; i++)
			T_RC(kvt_pin_release(s, pins[i]), KVT_EPIN);
		/* Unpinned again: a put that needs the whole tier evicts them all. */
		T_RC(t_put_filled(s, ns, 6001, 8 << 20), KVT_OK);
		T_RC(t_get_filled(s, ns, 6001, 8 << 20), KVT_OK);
		/* Pin one more and close while holding it. */
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET_PINNED; r.ns = ns; r.key = t_key(6001);
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_OK);
		pins[0] = r.pin;
		/* Closing with pins held drops them (and says so in the log). */
		T_OK(kvt_queue_destroy(q));
		T_OK(kvt_store_close(s));
		T_RC(kvt_pin_release(s, pins[0]), KVT_ECLOSED);
	}
	kvt_store_destroy(s);
	free(want);
}

/* A hot set that is read survives a scan of one-time blocks. */
static double hot_survival(const char *policy)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", "dram.chunk", "64K",
					   "dram.shards", "1", "dram.policy", policy, NULL);
	uint32_t ns = t_ns(s, "policy");
	size_t len = 65536;
	int hot = 64, alive = 0;
	char buf[65536];

	for (int i = 0; i < hot; i++)
		T_RC(t_put_filled(s, ns, (uint64_t)i, len), KVT_OK);
	for (int scan = 0; scan < 8; scan++) {
		for (int i = 0; i < hot; i++) {
			struct kvt_key k = t_key((uint64_t)i);
			int r = kvt_get(s, ns, &k, buf, sizeof(buf), NULL);
			T_ASSERT(r == KVT_OK || r == KVT_MISS);
			if (r == KVT_MISS)
				T_RC(t_put_filled(s, ns, (uint64_t)i, len), KVT_OK);
		}
		/* 300 one-time blocks: more than the whole tier (256). */
		for (int i = 0; i < 300; i++)
			T_RC(t_put_filled(s, ns, 100000 + (uint64_t)scan * 1000 + i, len), KVT_OK);
	}
	for (int i = 0; i < hot; i++)
		alive += t_get_filled(s, ns, (uint64_t)i, len) == KVT_OK;
	T_ASSERT(t_stat(s, "dram.evictions") > 0);
	T_LE_INT(t_stat(s, "dram.used_bytes"), 16 << 20);
	kvt_store_destroy(s);
	return (double)alive / hot;
}

static void test_policies(void)
{
	double s3 = hot_survival("s3fifo"), lru = hot_survival("lru");
	fprintf(stderr, "hot-set survival after scans: s3fifo %.2f, lru %.2f\n", s3, lru);
	/* S3-FIFO keeps the hot set through scans larger than the tier;
	 * LRU loses it to whatever was recent. */
	T_ASSERT(s3 >= 0.95);
	T_ASSERT(lru <= 0.1);
}

static void test_eviction_capacity(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "4M", "dram.chunk", "64K",
					   "dram.shards", "1", NULL);
	uint32_t ns = t_ns(s, "cap");
	size_t len = 200000; /* 4 chunks each, 62144 bytes of slack */
	int present = 0;
	for (uint64_t i = 0; i < 200; i++)
		T_RC(t_put_filled(s, ns, i, len), KVT_OK);
	for (uint64_t i = 0; i < 200; i++) {
		int r = t_get_filled(s, ns, i, len);
		T_ASSERT(r == KVT_OK || r == KVT_MISS);
		present += r == KVT_OK;
	}
	T_EQ_U64(t_stat(s, "dram.blocks"), (uint64_t)present);
	T_EQ_U64(t_stat(s, "dram.used_bytes"), (uint64_t)present * 4 * 65536);
	T_EQ_U64(t_stat(s, "dram.frag_bytes"), (uint64_t)present * (4 * 65536 - len));
	T_EQ_U64(t_stat(s, "dram.evictions"), 200 - (uint64_t)present);
	T_GE_INT(present, 14); /* 16 fit; S3-FIFO may keep a little less */
	/* The newest block is always there. */
	T_RC(t_get_filled(s, ns, 199, len), KVT_OK);
	/* Larger than a shard can ever hold. */
	T_RC(t_put_filled(s, ns, 9999, (4 << 20) + 1), KVT_ETOOBIG);
	kvt_store_destroy(s);
}

static void test_split(void)
{
	/* 1 shard of 32 chunks: fill with 1-chunk values, free every other one,
	 * and a 16-chunk value must be stored split (no eviction needed). */
	struct kvt_store *s = t_store_open("dram.capacity", "128K", "dram.chunk", "4K",
					   "dram.shards", "1", NULL);
	uint32_t ns = t_ns(s, "split");
	for (uint64_t i = 0; i < 32; i++)
		T_RC(t_put_filled(s, ns, i, 4096), KVT_OK);
	for (uint64_t i = 0; i < 32; i += 2) {
		struct kvt_key k = t_key(i);
		T_RC(kvt_delete(s, ns, &k), KVT_OK);
	}
	T_EQ_U64(t_stat(s, "dram.evictions"), 0);
	T_RC(t_put_filled(s, ns, 1000, 16 * 4096), KVT_OK);
	T_EQ_U64(t_stat(s, "dram.evictions"), 0);
	T_EQ_U64(t_stat(s, "dram.split_allocs"), 1);
	T_RC(t_get_filled(s, ns, 1000, 16 * 4096), KVT_OK);
	for (uint64_t i = 1; i < 32; i += 2)
		T_RC(t_get_filled(s, ns, i, 4096), KVT_OK);
	/* A pinned split value is a view of 16 runs, in order. */
	{
		struct kvt_queue *q;
		struct kvt_req r, *rp = &r, *got;
		char *want = malloc(16 * 4096);
		size_t off = 0;
		t_fill(want, 16 * 4096, 1000);
		T_OK(kvt_queue_create(s, &q));
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET_PINNED; r.ns = ns; r.key = t_key(1000);
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_poll(q, &got, 1), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.view_count, 16);
		for (uint32_t i = 0; i < r.view_count; i++) {
			T_EQ_MEM(r.view[i].iov_base, want + off, r.view[i].iov_len);
			off += r.view[i].iov_len;
		}
		T_EQ_U64(off, 16 * 4096);
		T_OK(kvt_pin_release(s, r.pin));
		T_OK(kvt_queue_destroy(q));
		free(want);
	}
	kvt_store_destroy(s);
}

static void test_lookup_clear(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", NULL);
	uint32_t a = t_ns(s, "lookup-a"), b = t_ns(s, "lookup-b");
	struct kvt_key keys[40];
	uint8_t tiers[40];
	for (uint64_t i = 0; i < 40; i++)
		keys[i] = t_key(i);
	for (uint64_t i = 0; i < 25; i++) {
		T_RC(t_put_filled(s, a, i, 1000), KVT_OK);
		T_RC(t_put_filled(s, b, i, 1000), KVT_OK);
	}
	T_RC(t_put_filled(s, a, 30, 1000), KVT_OK); /* present, but after a gap */
	memset(tiers, 0xee, sizeof(tiers));
	T_RC(kvt_lookup_prefix(s, a, keys, 40, tiers), 25);
	for (int i = 0; i < 40; i++)
		T_EQ_INT(tiers[i], i < 25 ? KVT_TIER_DRAM : KVT_TIER_NONE);
	T_RC(kvt_lookup_prefix(s, a, keys + 25, 15, NULL), 0);
	/* Lookups do not count as hits (never extend a block's life). */
	T_EQ_U64(t_stat(s, "dram.hits"), 0);
	/* Prefetch reports what the fastest tier holds. */
	{
		struct kvt_queue *q;
		struct kvt_req r, *rp = &r, *got;
		T_OK(kvt_queue_create(s, &q));
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_PREFETCH; r.ns = a; r.keys = keys; r.key_count = 40;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 5000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, 26);
		T_OK(kvt_queue_destroy(q));
	}
	T_RC(kvt_clear(s, a), 26);
	T_RC(kvt_lookup_prefix(s, a, keys, 40, NULL), 0);
	T_RC(kvt_lookup_prefix(s, b, keys, 40, NULL), 25);
	T_RC(kvt_clear(s, KVT_NS_ALL), 25);
	T_RC(kvt_lookup_prefix(s, b, keys, 40, NULL), 0);
	T_EQ_U64(t_stat(s, "dram.blocks"), 0);
	T_EQ_U64(t_stat(s, "dram.used_bytes"), 0);
	kvt_store_destroy(s);
}

/* The eviction hook sees every evicted block's exact bytes. */
struct hook_seen {
	uint64_t count, bytes, bad;
};

static void hook(void *ctx, const struct dram_victim *v)
{
	struct hook_seen *h = ctx;
	uint64_t k, total = 0, len = v->len, lens[2];
	uint32_t crcs[2];
	bool crcs_valid;
	char *want = malloc(len);
	/* What the tier hands the hook: the block's namespace, no reads
	 * (never got), its one part. */
	if (v->ns != 1 || v->reads != 0 || v->flags != 0 ||
	    dram_victim_parts(v, lens, crcs, 2, &crcs_valid) != 1 || lens[0] != len)
		h->bad++;
	memcpy(&k, v->key->bytes, sizeof(k));
	t_fill(want, len, k);
	for (unsigned i = 0; i < v->view_count; i++) {
		if (memcmp(v->view[i].iov_base, want + total, v->view[i].iov_len))
			h->bad++;
		total += v->view[i].iov_len;
	}
	if (total != len)
		h->bad++;
	h->count++;
	h->bytes += len;
	free(want);
}

static void test_hook(void)
{
	struct kvt_mem mem;
	struct dram *d;
	struct hook_seen seen = { 0 };
	char *buf = malloc(10000);

	kvt_mem_init(&mem);
	d = small_dram(&mem, DRAM_POLICY_S3FIFO);
	dram_set_evict_hook(d, hook, &seen);
	for (uint64_t i = 0; i < 300; i++) {
		struct kvt_key k = t_key(i);
		struct iovec v = { buf, 10000 };
		t_fill(buf, 10000, i);
		T_RC(dram_put(d, 1, &k, &v, 1, NULL, 0), KVT_OK);
	}
	T_ASSERT(seen.count > 200);
	T_EQ_U64(seen.bad, 0);
	T_EQ_U64(seen.bytes, seen.count * 10000);
	dram_close(d);
	T_EQ_INT(atomic_load(&mem.bytes), 0); /* every metadata byte given back */
	free(buf);
}

/* A block's holders are counted in 21 bits (struct dram_item, 88 bytes):
 * at ITEM_REFS_MAX (2,097,151) one more is refused -- a miss, the count
 * untouched -- and once one lets go the next is taken; all let go, the
 * block is whole and evictable. */
static void test_ref_cap(void)
{
	struct kvt_mem mem;
	const uint32_t max = (UINT32_C(1) << 21) - 1;
	struct dram *d;
	struct dram_item *it, *first = NULL;
	struct kvt_key k = t_key(7);
	char buf[4096];
	struct iovec v = { buf, sizeof(buf) };

	kvt_mem_init(&mem);
	d = small_dram(&mem, DRAM_POLICY_LRU);
	t_fill(buf, sizeof(buf), 7);
	T_RC(dram_put(d, 1, &k, &v, 1, NULL, 0), KVT_OK);
	for (uint32_t i = 0; i < max; i++) {
		if (dram_ref_quiet(d, 1, &k, &it) != KVT_OK)
			T_FAIL("ref %u of %u refused", i + 1, max);
		if (!first)
			first = it;
	}
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_MISS);
	T_ASSERT(it == NULL);
	T_ASSERT(!dram_item_ref(d, first));
	dram_unpin(d, first);
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_OK);
	T_ASSERT(it == first);
	for (uint32_t i = 0; i < max; i++)
		dram_unpin(d, first);
	/* whole, and no longer held: 300 more blocks of 4 KiB evict it */
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_OK);
	{
		struct iovec view[4];
		uint64_t len = 0;
		T_EQ_INT(dram_item_view(d, it, view, &len), 1);
		T_EQ_U64(len, sizeof(buf));
		T_EQ_MEM(view[0].iov_base, buf, sizeof(buf));
	}
	dram_unpin(d, it);
	for (uint64_t i = 100; i < 400; i++) {
		struct kvt_key o = t_key(i);
		T_RC(dram_put(d, 1, &o, &v, 1, NULL, 0), KVT_OK);
	}
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_MISS);
	dram_close(d);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

/* The index hash mixes a per-store random secret into the seed (issue 21
 * item 14): two stores put the same key of the same namespace id into
 * unrelated buckets; one store always into the same. */
static void test_hash_secret(void)
{
	struct kvt_mem mem;
	struct dram *a, *b;
	unsigned same_bucket = 0;

	kvt_mem_init(&mem);
	a = small_dram(&mem, DRAM_POLICY_S3FIFO);
	b = small_dram(&mem, DRAM_POLICY_S3FIFO);
	for (uint64_t i = 0; i < 64; i++) {
		struct kvt_key k = t_key(i);
		uint64_t ha = dram_key_hash(a, 1, &k), hb = dram_key_hash(b, 1, &k);
		T_EQ_U64(ha, dram_key_hash(a, 1, &k));
		T_ASSERT(ha != hb);
		T_ASSERT(ha != dram_key_hash(a, 2, &k));
		same_bucket += (ha & 1023) == (hb & 1023);
	}
	T_LE_INT(same_bucket, 8); /* chance alone: 64/1024 expected */
	dram_close(a);
	dram_close(b);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

/*
 * The lower-copy gauges (dram.on_lower_*, dram.cold_*): blocks a lower
 * tier holds too, and of them first reads' cold copies not read again.
 * Worked by hand, blocks of 4 KiB in one LRU shard of 256 chunks:
 *   put 1 (a plain put)                                  lower 0, cold 0
 *   promote 2 (ON_LOWER)                                 lower 1, cold 0
 *   promote 3 (ON_LOWER | COLD)                          lower 2, cold 1
 *   promote 4 (COLD alone: nothing below, not counted)   lower 2, cold 1
 *   get 3 (read again: no longer cold)                   lower 2, cold 0
 *   promote 5, 6 cold                                    lower 4, cold 2
 *   the tier below drops 5 (dram_forget_lower)           lower 3, cold 1
 *   1's write-down ends, stored                          lower 4, cold 1
 *   delete 6                                             lower 3, cold 0
 *   promote 8 cold, deleted while reserved: canceled     unchanged
 *   9's write-down ends after 9 was deleted              unchanged
 *   promote 7 cold: the next victim                      lower 4, cold 1
 *   puts until the first eviction: 7 goes                lower 3, cold 0
 *   clear                                                lower 0, cold 0
 */
struct gauges {
	uint64_t lower_blocks, lower_bytes, cold_blocks, cold_bytes;
};

static void gauges_cb(void *ctx, const char *name, uint64_t v, const char *str)
{
	struct gauges *g = ctx;
	(void)str;
	if (!strcmp(name, "dram.on_lower_blocks"))
		g->lower_blocks = v;
	else if (!strcmp(name, "dram.on_lower_bytes"))
		g->lower_bytes = v;
	else if (!strcmp(name, "dram.cold_blocks"))
		g->cold_blocks = v;
	else if (!strcmp(name, "dram.cold_bytes"))
		g->cold_bytes = v;
}

static void gauges_are(struct dram *d, uint64_t lower, uint64_t cold)
{
	struct gauges g = { 1, 1, 1, 1 };
	dram_stats(d, gauges_cb, &g);
	T_EQ_U64(g.lower_blocks, lower);
	T_EQ_U64(g.lower_bytes, lower * 4096);
	T_EQ_U64(g.cold_blocks, cold);
	T_EQ_U64(g.cold_bytes, cold * 4096);
}

static int promote_one(struct dram *d, uint64_t k, unsigned flags)
{
	struct kvt_key key = t_key(k);
	struct dram_item *it;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned vc = 0;
	int ret = dram_reserve(d, 1, &key, 4096, NULL, 1, &it, view, &vc);
	if (ret != KVT_OK)
		return ret;
	t_fill(view[0].iov_base, 4096, k);
	ret = dram_publish(d, it, NULL, NULL, DRAM_PROMOTED | flags, true);
	if (ret == KVT_OK)
		dram_unpin(d, it);
	return ret;
}

/*
 * The passes after a lower tier's delete or clear (dram_delete_promoted,
 * dram_clear_promoted; store_dispatch.c store_del_done): only a visible
 * copy a promotion published goes.  A put's copy stays, and so does one
 * still being written (put or promotion), which publishes as usual; the
 * same item recycled by a put after a promotion is a put's.
 */
static void test_delete_promoted(void)
{
	struct kvt_mem mem;
	struct dram *d;
	struct dram_item *it;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned vc = 0;
	char buf[4096];
	struct iovec v = { buf, sizeof(buf) };
	struct kvt_key k1 = t_key(1), k2 = t_key(2), k3 = t_key(3);

	kvt_mem_init(&mem);
	d = small_dram(&mem, DRAM_POLICY_LRU);
	t_fill(buf, sizeof(buf), 1);
	T_RC(dram_put(d, 1, &k1, &v, 1, NULL, 0), KVT_OK);
	T_RC(promote_one(d, 2, DRAM_ON_LOWER), KVT_OK);
	T_RC(dram_delete_promoted(d, 1, &k1), KVT_MISS); /* a put's: stays */
	T_RC(dram_exists(d, 1, &k1), KVT_OK);
	T_RC(dram_delete_promoted(d, 1, &k2), KVT_OK);
	T_RC(dram_exists(d, 1, &k2), KVT_MISS);
	/* being written: left to publish */
	T_RC(dram_reserve(d, 1, &k3, 4096, NULL, 1, &it, view, &vc), KVT_OK);
	T_RC(dram_delete_promoted(d, 1, &k3), KVT_MISS);
	T_RC(dram_publish(d, it, NULL, NULL, DRAM_PROMOTED, false), KVT_OK);
	/* a put after promotions were freed (items recycled): a put's */
	T_RC(dram_delete(d, 1, &k3), KVT_OK);
	T_RC(dram_put(d, 1, &k2, &v, 1, NULL, 0), KVT_OK);
	T_RC(dram_delete_promoted(d, 1, &k2), KVT_MISS);
	T_RC(promote_one(d, 4, 0), KVT_OK);
	T_RC(promote_one(d, 5, DRAM_ON_LOWER), KVT_OK);
	T_RC(dram_clear_promoted(d, 1), 2); /* 4 and 5; 1 and 2 stay */
	T_RC(dram_exists(d, 1, &k1), KVT_OK);
	T_RC(dram_exists(d, 1, &k2), KVT_OK);
	T_RC(dram_clear(d, 1), 2);
	dram_close(d);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

static void test_lower_gauges(void)
{
	struct kvt_mem mem;
	struct dram *d;
	struct dram_item *it;
	char buf[4096], out[4096];
	struct iovec v = { buf, sizeof(buf) }, o = { out, sizeof(out) };
	struct kvt_key k;

	kvt_mem_init(&mem);
	d = small_dram(&mem, DRAM_POLICY_LRU);
	k = t_key(1);
	t_fill(buf, sizeof(buf), 1);
	T_RC(dram_put(d, 1, &k, &v, 1, NULL, 0), KVT_OK);
	gauges_are(d, 0, 0);
	T_RC(promote_one(d, 2, DRAM_ON_LOWER), KVT_OK);
	gauges_are(d, 1, 0);
	T_RC(promote_one(d, 3, DRAM_ON_LOWER | DRAM_COLD), KVT_OK);
	gauges_are(d, 2, 1);
	T_RC(promote_one(d, 4, DRAM_COLD), KVT_OK);
	gauges_are(d, 2, 1);
	{
		struct dram_read rd = { .dst = &o, .dst_count = 1 };
		k = t_key(3);
		T_RC(dram_get(d, 1, &k, &rd), KVT_OK);
		T_EQ_U64(rd.copied, 4096);
	}
	gauges_are(d, 2, 0);
	T_RC(promote_one(d, 5, DRAM_ON_LOWER | DRAM_COLD), KVT_OK);
	T_RC(promote_one(d, 6, DRAM_ON_LOWER | DRAM_COLD), KVT_OK);
	gauges_are(d, 4, 2);
	k = t_key(5);
	dram_forget_lower(d, 1, &k);
	gauges_are(d, 3, 1);
	k = t_key(1);
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_OK);
	dram_writedown_done(d, it, true);
	gauges_are(d, 4, 1);
	k = t_key(6);
	T_RC(dram_delete(d, 1, &k), KVT_OK);
	gauges_are(d, 3, 0);
	{
		struct iovec view[DRAM_MAX_RUNS];
		unsigned vc = 0;
		k = t_key(8);
		T_RC(dram_reserve(d, 1, &k, 4096, NULL, 1, &it, view, &vc), KVT_OK);
		T_RC(dram_delete(d, 1, &k), KVT_MISS);
		T_RC(dram_publish(d, it, NULL, NULL, DRAM_PROMOTED | DRAM_ON_LOWER | DRAM_COLD,
				  true),
		     -ECANCELED);
	}
	gauges_are(d, 3, 0);
	k = t_key(9);
	t_fill(buf, sizeof(buf), 9);
	T_RC(dram_put(d, 1, &k, &v, 1, NULL, 0), KVT_OK);
	T_RC(dram_ref_quiet(d, 1, &k, &it), KVT_OK);
	T_RC(dram_delete(d, 1, &k), KVT_OK);
	dram_writedown_done(d, it, true);
	gauges_are(d, 3, 0);
	T_RC(promote_one(d, 7, DRAM_ON_LOWER | DRAM_COLD), KVT_OK);
	gauges_are(d, 4, 1);
	for (uint64_t i = 100; i < 400; i++) {
		k = t_key(i);
		t_fill(buf, sizeof(buf), i);
		T_RC(dram_put(d, 1, &k, &v, 1, NULL, 0), KVT_OK);
		k = t_key(7);
		if (dram_exists(d, 1, &k) == KVT_MISS)
			break;
	}
	k = t_key(7);
	T_RC(dram_exists(d, 1, &k), KVT_MISS);
	k = t_key(2);
	T_RC(dram_exists(d, 1, &k), KVT_OK); /* the cold one went first */
	gauges_are(d, 3, 0);
	T_ASSERT(dram_clear(d, KVT_NS_ALL) > 3);
	gauges_are(d, 0, 0);
	dram_close(d);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

/* Pre-faulting a large DRAM is announced before it starts (it takes
 * seconds per few GiB, and nothing else is said meanwhile: a start looked
 * hung), and the open's line says how much was pre-faulted. */
struct said {
	char text[4096];
	size_t len;
};

static void said_line(void *ctx, int level, const char *msg)
{
	struct said *sd = ctx;
	(void)level;
	sd->len += (size_t)snprintf(sd->text + sd->len, sizeof(sd->text) - sd->len, "%s\n",
				    msg);
	if (sd->len >= sizeof(sd->text))
		sd->len = sizeof(sd->text) - 1;
}

static void test_prefault_said(void)
{
	struct kvt_mem mem;
	struct said sd = { .len = 0 };
	struct kvt_logger lg = { .fn = said_line, .ctx = &sd, .min_level = KVT_LOG_DEBUG };
	struct dram_config cfg = { .capacity = 1 << 30, .chunk = 65536, .shards = 4,
				   .policy = DRAM_POLICY_LRU, .hugepages = DRAM_HUGE_OFF,
				   .prefault = true };
	struct dram *d;
	const char *start, *done;

	kvt_mem_init(&mem);
	T_OK(dram_open(&d, &cfg, &mem, &lg));
	start = strstr(sd.text, "dram: pre-faulting 1024 MiB in 4 shards");
	done = strstr(sd.text, "(pre-faulted 1024 MiB in ");
	T_ASSERT(start != NULL && done != NULL && start < done);
	dram_close(d);
	/* A small one is not announced. */
	sd.len = 0;
	sd.text[0] = 0;
	cfg.capacity = 64 << 20;
	T_OK(dram_open(&d, &cfg, &mem, &lg));
	T_ASSERT(strstr(sd.text, "pre-faulting") == NULL);
	T_ASSERT(strstr(sd.text, "(pre-faulted 64 MiB in ") != NULL);
	dram_close(d);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

/*
 * A put's ask below (dram_set_absent_hook) never waits for the lower
 * tier's locks with the shard's lock held (review44g): the SSD's index
 * sweep holds an SSD shard for a walk of its entries, and a put waiting
 * there under DRAM's lock held every get of its DRAM shard.  The hook
 * here answers -EAGAIN to the first ask without waiting, then waits
 * (wait true) until released; a lookup of another key of the one shard
 * must finish meanwhile, and the put goes in after the release.  On the
 * code before (the hook asked once, waiting, under the lock) the lookup
 * waited for the release.
 */
struct absent_state {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nowait, waits;
	bool holding, release;
	struct dram *d;
	int put_rc;
	atomic_bool looked;
};

static int absent_hook(void *ctx, uint32_t ns, const struct kvt_key *key, bool wait)
{
	struct absent_state *st = ctx;
	(void)ns;
	(void)key;
	pthread_mutex_lock(&st->mu);
	if (!wait) {
		int first = st->nowait++ == 0;
		pthread_mutex_unlock(&st->mu);
		return first ? -EAGAIN : KVT_OK;
	}
	st->waits++;
	st->holding = true;
	pthread_cond_broadcast(&st->cv);
	while (!st->release)
		pthread_cond_wait(&st->cv, &st->mu);
	pthread_mutex_unlock(&st->mu);
	return KVT_OK;
}

static void *absent_putter(void *arg)
{
	struct absent_state *st = arg;
	struct kvt_key k = t_key(2);
	char buf[4096];
	struct iovec v = { buf, sizeof(buf) };
	t_fill(buf, sizeof(buf), 2);
	st->put_rc = dram_put(st->d, 1, &k, &v, 1, NULL, 0);
	return NULL;
}

static void *absent_looker(void *arg)
{
	struct absent_state *st = arg;
	struct kvt_key k = t_key(1);
	if (dram_exists(st->d, 1, &k) == KVT_OK)
		atomic_store(&st->looked, true);
	return NULL;
}

static void test_absent_nowait(void)
{
	struct kvt_mem mem;
	struct absent_state st = { .mu = PTHREAD_MUTEX_INITIALIZER,
				   .cv = PTHREAD_COND_INITIALIZER };
	struct kvt_key k1 = t_key(1), k2 = t_key(2);
	char buf[4096];
	struct iovec v = { buf, sizeof(buf) };
	pthread_t put_th, look_th;
	bool looked = false;

	kvt_mem_init(&mem);
	st.d = small_dram(&mem, DRAM_POLICY_LRU);
	t_fill(buf, sizeof(buf), 1);
	T_RC(dram_put(st.d, 1, &k1, &v, 1, NULL, 0), KVT_OK); /* no hook yet */
	dram_set_absent_hook(st.d, absent_hook, &st);
	T_OK(pthread_create(&put_th, NULL, absent_putter, &st));
	pthread_mutex_lock(&st.mu);
	while (!st.holding)
		pthread_cond_wait(&st.cv, &st.mu);
	pthread_mutex_unlock(&st.mu);
	/* The put waits below: the shard's lookups go on (2 s at most). */
	T_OK(pthread_create(&look_th, NULL, absent_looker, &st));
	for (int i = 0; i < 200 && !(looked = atomic_load(&st.looked)); i++)
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	pthread_mutex_lock(&st.mu);
	st.release = true;
	pthread_cond_broadcast(&st.cv);
	pthread_mutex_unlock(&st.mu);
	T_OK(pthread_join(put_th, NULL));
	T_OK(pthread_join(look_th, NULL));
	T_ASSERT(looked); /* before: held until the release */
	T_RC(st.put_rc, KVT_OK);
	T_EQ_INT(st.waits, 1);
	T_EQ_INT(st.nowait, 2); /* -EAGAIN, then OK under the lock */
	T_RC(dram_exists(st.d, 1, &k2), KVT_OK);
	dram_close(st.d);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

int main(void)
{
	test_shapes();
	test_parts_ranges();
	test_pins();
	test_policies();
	test_eviction_capacity();
	test_split();
	test_lookup_clear();
	test_hook();
	test_ref_cap();
	test_hash_secret();
	test_lower_gauges();
	test_delete_promoted();
	test_prefault_said();
	test_absent_nowait();
	return 0;
}

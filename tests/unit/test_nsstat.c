/*
 * test_nsstat.c - per-namespace statistics (lib/core/nsstat.c, option
 * stats.namespaces): puts, gets and lookups in three namespaces of a
 * store whose table holds two, so the third is counted in "other"; the
 * counts are checked exactly, per namespace, for the synchronous and the
 * queued paths; then a flood of puts in one namespace evicts the others,
 * and each namespace's evictions are split into blocks read at least once
 * in DRAM and blocks never read; a delete is not an eviction;
 * kvt_ns_stats reports one namespace's row alone; the option at 0 reports
 * nothing.
 */
#include <stdlib.h>

#include "t.h"
#include "tstore.h"

#define BLK (64u << 10) /* one chunk */

static struct kvt_key key_of(uint32_t ns, uint64_t k)
{
	return t_key(ns * 100000 + k);
}

static void put_blk(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	static char buf[BLK];
	struct kvt_key key = key_of(ns, k);
	struct iovec v = { buf, BLK };
	t_fill(buf, BLK, ns * 100000 + k);
	T_OK(kvt_put(s, ns, &key, &v, 1));
}

static int get_blk(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	static char buf[BLK];
	struct kvt_key key = key_of(ns, k);
	return kvt_get(s, ns, &key, buf, BLK, NULL);
}

static uint64_t nstat(struct kvt_store *s, const char *row, const char *field)
{
	char name[96];
	snprintf(name, sizeof(name), "ns.%s.%s", row, field);
	return t_stat(s, name);
}

/* A text statistic by name, into out ("" if absent). */
struct text_find {
	const char *name;
	char out[256];
	int numbers_with_prefix; /* statistics (numbers and texts) named prefix* */
	const char *prefix;
};

static void text_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct text_find *f = ctx;
	(void)value;
	if (str && f->name && strcmp(name, f->name) == 0)
		snprintf(f->out, sizeof(f->out), "%s", str);
	if (f->prefix && strncmp(name, f->prefix, strlen(f->prefix)) == 0)
		f->numbers_with_prefix++;
}

static const char *stext(struct kvt_store *s, const char *name, struct text_find *f)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	T_OK(kvt_store_stats(s, text_cb, f));
	return f->out;
}

static void test_counts(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "1M", "dram.chunk", "64K",
					   "dram.shards", "1", "dram.policy", "lru",
					   "stats.namespaces", "2", NULL);
	uint32_t a = t_ns(s, "model-a"), b = t_ns(s, "model-b"), c = t_ns(s, "model-c"),
		 d = t_ns(s, "model-d");
	struct kvt_key keys[5];
	struct text_find f;

	T_EQ_INT(a, 1);
	T_EQ_INT(b, 2);
	T_EQ_INT(c, 3);
	T_EQ_INT(d, 4);
	T_EQ_U64(t_stat(s, "ns.table_rows"), 2);
	T_EQ_U64(t_stat(s, "ns.other_namespaces"), 2);

	/* A: 4 puts, 4 hits, 3 misses, one lookup of 5 keys finding 4. */
	for (uint64_t k = 0; k < 4; k++)
		put_blk(s, a, k);
	for (int i = 0; i < 2; i++) {
		T_EQ_INT(get_blk(s, a, 0), KVT_OK);
		T_EQ_INT(get_blk(s, a, 1), KVT_OK);
	}
	for (uint64_t k = 50; k < 53; k++)
		T_EQ_INT(get_blk(s, a, k), KVT_MISS);
	for (int i = 0; i < 4; i++)
		keys[i] = key_of(a, (uint64_t)i);
	keys[4] = key_of(a, 99);
	T_EQ_INT(kvt_lookup_prefix(s, a, keys, 5, NULL), 4);

	/* B: 2 puts, 1 miss, and one queued get (a hit) and one queued miss. */
	put_blk(s, b, 0);
	put_blk(s, b, 1);
	T_EQ_INT(get_blk(s, b, 7), KVT_MISS);
	{
		static char buf[BLK];
		struct iovec v = { buf, BLK };
		struct kvt_req r = { .op = KVT_OP_GET, .ns = b, .key = key_of(b, 0), .iov = &v,
				     .iov_count = 1 };
		struct kvt_req got = t_req1(s, r);
		T_EQ_INT(got.status, KVT_OK);
		r.key = key_of(b, 8);
		got = t_req1(s, r);
		T_EQ_INT(got.status, KVT_MISS);
	}

	/* C and D, past the table: both in "other".  C: 1 put, 1 hit; D:
	 * 1 put, 2 misses, one lookup of 1 key finding 0. */
	put_blk(s, c, 0);
	T_EQ_INT(get_blk(s, c, 0), KVT_OK);
	put_blk(s, d, 0);
	T_EQ_INT(get_blk(s, d, 5), KVT_MISS);
	T_EQ_INT(get_blk(s, d, 6), KVT_MISS);
	keys[0] = key_of(d, 9);
	T_EQ_INT(kvt_lookup_prefix(s, d, keys, 1, NULL), 0);

	T_EQ_U64(nstat(s, "1", "puts"), 4);
	T_EQ_U64(nstat(s, "1", "put_bytes"), 4 * BLK);
	T_EQ_U64(nstat(s, "1", "gets"), 7);
	T_EQ_U64(nstat(s, "1", "hits_dram"), 4);
	T_EQ_U64(nstat(s, "1", "hits_ssd"), 0);
	T_EQ_U64(nstat(s, "1", "misses"), 3);
	T_EQ_U64(nstat(s, "1", "lookups"), 1);
	T_EQ_U64(nstat(s, "1", "lookup_keys"), 5);
	T_EQ_U64(nstat(s, "1", "lookup_hits"), 4);
	T_EQ_U64(nstat(s, "1", "dram_blocks"), 4);
	T_EQ_U64(nstat(s, "1", "dram_bytes"), 4 * BLK);
	T_EQ_U64(nstat(s, "1", "evicted"), 0);

	T_EQ_U64(nstat(s, "2", "puts"), 2);
	T_EQ_U64(nstat(s, "2", "gets"), 3);
	T_EQ_U64(nstat(s, "2", "hits_dram"), 1);
	T_EQ_U64(nstat(s, "2", "misses"), 2);
	T_EQ_U64(nstat(s, "2", "lookups"), 0);
	T_EQ_U64(nstat(s, "2", "dram_blocks"), 2);

	T_EQ_U64(nstat(s, "other", "puts"), 2);
	T_EQ_U64(nstat(s, "other", "gets"), 3);
	T_EQ_U64(nstat(s, "other", "hits_dram"), 1);
	T_EQ_U64(nstat(s, "other", "misses"), 2);
	T_EQ_U64(nstat(s, "other", "lookups"), 1);
	T_EQ_U64(nstat(s, "other", "lookup_keys"), 1);
	T_EQ_U64(nstat(s, "other", "lookup_hits"), 0);
	T_EQ_U64(nstat(s, "other", "dram_blocks"), 2);
	/* The rows add up to the tier's own counters. */
	T_EQ_U64(t_stat(s, "dram.hits"), 4 + 1 + 1);
	T_EQ_U64(t_stat(s, "dram.puts"), 4 + 2 + 2);

	/* Each namespace's row names it; "other" has no texts. */
	T_EQ_STR(stext(s, "ns.1.model", &f), "model-a");
	T_EQ_STR(stext(s, "ns.2.model", &f), "model-b");
	T_EQ_STR(stext(s, "ns.2.tenant", &f), "test");
	T_EQ_INT((int)strlen(stext(s, "ns.1.digest", &f)), 16);
	T_EQ_STR(stext(s, "ns.other.model", &f), "");
	T_RC(kvt_store_stat(s, "ns.3.puts", &(uint64_t){ 0 }), KVT_MISS);

	/* A delete leaves DRAM without being an eviction. */
	{
		struct kvt_key k = key_of(b, 1);
		T_OK(kvt_delete(s, b, &k));
	}
	T_EQ_U64(nstat(s, "2", "dram_blocks"), 1);
	T_EQ_U64(nstat(s, "2", "dram_bytes"), BLK);
	T_EQ_U64(nstat(s, "2", "evicted"), 0);

	/* 40 puts in B evict everything else (LRU, 16 blocks of DRAM): A's
	 * blocks 0 and 1 were read, 2 and 3 never; B's block 0 was read; C's
	 * block was read, D's never. */
	for (uint64_t k = 100; k < 140; k++)
		put_blk(s, b, k);
	T_EQ_U64(nstat(s, "1", "dram_blocks"), 0);
	T_EQ_U64(nstat(s, "1", "dram_bytes"), 0);
	T_EQ_U64(nstat(s, "1", "evicted"), 4);
	T_EQ_U64(nstat(s, "1", "evicted_bytes"), 4 * BLK);
	T_EQ_U64(nstat(s, "1", "evicted_unread"), 2);
	T_EQ_U64(nstat(s, "1", "evicted_unread_bytes"), 2 * BLK);
	T_EQ_U64(nstat(s, "other", "evicted"), 2);
	T_EQ_U64(nstat(s, "other", "evicted_unread"), 1);
	T_EQ_U64(nstat(s, "other", "dram_blocks"), 0);
	/* B: 41 stored (1 deleted); what DRAM holds and what it evicted add
	 * up, and only block 0 of those evicted was ever read. */
	T_EQ_U64(nstat(s, "2", "puts"), 42);
	T_EQ_U64(nstat(s, "2", "dram_blocks") + nstat(s, "2", "evicted"), 41);
	T_EQ_U64(nstat(s, "2", "evicted_unread") + 1, nstat(s, "2", "evicted"));
	T_EQ_U64(nstat(s, "2", "dram_blocks"), t_stat(s, "dram.blocks"));
	T_EQ_U64(nstat(s, "1", "evicted") + nstat(s, "2", "evicted") + nstat(s, "other", "evicted"),
		 t_stat(s, "dram.evictions"));
	/* kvt_ns_stats: B's row alone; nothing for C (in "other"). */
	{
		struct text_find g;
		memset(&g, 0, sizeof(g));
		g.prefix = "ns.2.";
		g.name = "ns.2.model";
		T_OK(kvt_ns_stats(s, b, text_cb, &g));
		T_EQ_STR(g.out, "model-b");
		T_EQ_INT(g.numbers_with_prefix, 21); /* 3 texts + gets + 17 counters */
		memset(&g, 0, sizeof(g));
		g.prefix = "ns.";
		T_OK(kvt_ns_stats(s, c, text_cb, &g));
		T_EQ_INT(g.numbers_with_prefix, 0);
		T_RC(kvt_ns_stats(s, 99, text_cb, &g), KVT_ENONS);
		T_RC(kvt_ns_stats(s, a, NULL, &g), KVT_ENULL);
	}
	T_OK(kvt_store_close(s));
	kvt_store_destroy(s);
}

/* stats.namespaces 0: nothing counted, nothing reported. */
static void test_off(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "1M", "stats.namespaces", "0", NULL);
	uint32_t a = t_ns(s, "model-a");
	struct text_find f;
	put_blk(s, a, 0);
	T_EQ_INT(get_blk(s, a, 0), KVT_OK);
	memset(&f, 0, sizeof(f));
	f.prefix = "ns.";
	T_OK(kvt_store_stats(s, text_cb, &f));
	T_EQ_INT(f.numbers_with_prefix, 0);
	T_OK(kvt_store_close(s));
	kvt_store_destroy(s);
}

static void test_args(void)
{
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "stats.namespaces", "257"), KVT_EOPTVAL);
	T_OK(kvt_store_set_option(s, "stats.namespaces", "256"));
	kvt_store_destroy(s);
}

int main(void)
{
	test_args();
	test_counts();
	test_off();
	return 0;
}

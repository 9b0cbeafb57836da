/*
 * test_shared.c - the shared tier (lib/shdir.c, lib/shared.c): the header
 * codec, and stores that share one real directory under $TMPDIR (with an
 * SSD tier above it: the SSD eviction hook).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvt_int.h"
#include "shdir.h"
#include "t.h"
#include "tstore.h"


static struct kvt_store *open_shared(const char *dir, const char *dram, const char *admission)
{
	return t_store_open("dram.capacity", dram, "dram.chunk", "64K", "dram.shards", "1",
			    "shared.dir", dir, "shared.threads", "4", "shared.admission", admission,
			    NULL);
}

static uint32_t ns_persistent(struct kvt_store *s)
{
	struct kvt_ns_desc d = t_desc("shared-model", 0);
	uint32_t id;
	d.flags = KVT_NS_PERSISTENT;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

/* The block file's path of (ns, key) in store s. */
static void block_path(struct kvt_store *s, const char *dir, uint32_t ns, uint64_t k, char *out,
		       size_t cap)
{
	uint8_t dg[32];
	char rel[SHDIR_RELPATH_MAX];
	struct kvt_key key = t_key(k);
	T_OK(kvt_ns_info(s, ns, dg, NULL, 0));
	T_OK(shdir_relpath(dg, &key, rel));
	snprintf(out, cap, "%s/%s", dir, rel);
}

static const size_t sizes[] = { 1, 4095, 4096, 5000, 65536 + 17, (1u << 20) + 123 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* A store over the shared tier in dir with 4 MiB of DRAM in 64 KiB
 * chunks, one shard, LRU (S3-FIFO would keep a twice-read block in its
 * main queue while the fillers churn through the small one); then the
 * test's other "name", "value" pairs, NULL-ended. */
static struct kvt_store *small_dram(const char *dir, ...)
{
	const char *base[] = { "dram.capacity", "4M", "dram.chunk", "64K", "dram.shards", "1",
			       "dram.policy", "lru", "shared.dir", dir, NULL };
	struct kvt_store *s;
	va_list ap;
	va_start(ap, dir);
	s = t_store_vopen(base, va_arg(ap, const char *), &ap);
	va_end(ap);
	return s;
}

/* Get block k (len bytes, t_put_thirds) of ns twice, each a hit. */
static void read_twice(struct kvt_store *a, uint32_t ns, uint64_t k, uint8_t *buf, size_t len)
{
	for (int r = 0; r < 2; r++) {
		struct kvt_key key = t_key(k);
		T_RC(kvt_get(a, ns, &key, buf, len, NULL), KVT_OK);
	}
}

/* Put 40 blocks of len (256 KiB) from key first on: 10 MiB through
 * small_dram's 4 MiB, evicting what it held. */
static void churn_dram(struct kvt_store *a, uint32_t ns, uint64_t first, size_t len)
{
	for (uint64_t i = first; i < first + 40; i++)
		t_put_thirds(a, ns, i, len);
}

/* A store over dir with an SSD tier in path (16 MiB in 1 MiB segments,
 * admission always, no reinsertion) between 2 MiB of DRAM (4 KiB chunks,
 * LRU: a block leaves DRAM after a DRAM's worth of puts; S3-FIFO kept the
 * first block put through 16 MiB of churn) and the shared tier (two
 * threads); then the test's other "name", "value" pairs, NULL-ended. */
static struct kvt_store *ssd_shared(const char *path, const char *dir, ...)
{
	const char *base[] = { "path", path, "dram.capacity", "2M", "dram.chunk", "4K",
			       "dram.prefault", "off", "dram.policy", "lru", "ssd.capacity", "16M",
			       "ssd.segment", "1M", "ssd.admission", "always", "ssd.reinsert_pct",
			       "0", "shared.dir", dir, "shared.threads", "2", NULL };
	struct kvt_store *s;
	va_list ap;
	va_start(ap, dir);
	s = t_store_vopen(base, va_arg(ap, const char *), &ap);
	va_end(ap);
	return s;
}

/* ------------------------------------------------------------------------ */

/* An exists asked with KVT_F_ERRORS (kvtierd's S3 sweeps) whose shared
 * lookup cannot start (no memory) is that failure, not a miss: the block
 * may be in the directory (review47e, 2026-12-07: tier_shared.c answered
 * every refused lookup KVT_MISS; s3e47 did so for the remote tier only).
 * A namespace the directory does not know stays a miss. */
static void test_exists_errors(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *a = open_shared(dir, "64M", "persistent");
	uint32_t na = ns_persistent(a);
	struct kvt_key k = t_key(4242);
	struct kvt_req x;

	T_OK(kvt_store_set_option(a, "debug.fail_alloc", "1"));
	x = t_req1(a, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = na, .key = k,
					.flags = KVT_F_ERRORS });
	T_OK(kvt_store_set_option(a, "debug.fail_alloc", "0"));
	fprintf(stderr, "exists with KVT_F_ERRORS, the shared lookup's allocation failed: %s\n",
		kvt_strerror(x.status));
	T_RC(x.status, -ENOMEM);
	T_OK(kvt_store_set_option(a, "debug.fail_alloc", "1"));
	T_RC(kvt_exists(a, na, &k), KVT_MISS); /* without the flag: a miss, as before */
	T_OK(kvt_store_set_option(a, "debug.fail_alloc", "0"));
	x = t_req1(a, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = na, .key = k,
					.flags = KVT_F_ERRORS });
	T_RC(x.status, KVT_MISS);
	kvt_store_destroy(a);
	t_rmtree(dir);
	free(dir);
}

static void test_hdr_codec(void)
{
	uint8_t buf[SHDIR_ALIGN * 2], ns[32];
	uint64_t lens[3] = { 10, 20, 30 }, pl[KVT_PARTS_MAX];
	uint32_t crcs[3] = { 1, 2, 3 }, pc[KVT_PARTS_MAX];
	struct shdir_hdr h = { .part_lens = pl, .crcs = pc };
	struct kvt_key k = t_key(5);
	int64_t off;

	memset(ns, 0xab, sizeof(ns));
	off = shdir_hdr_encode(buf, sizeof(buf), ns, &k, 3, lens, crcs, 0);
	T_EQ_INT(off, SHDIR_ALIGN);
	T_RC(shdir_hdr_parse(buf, (size_t)off, &h), 0);
	T_EQ_U64(h.value_len, 60);
	T_EQ_INT(h.part_count, 3);
	T_EQ_INT(pc[2], 3);
	T_EQ_U64(pl[1], 20);
	T_EQ_MEM(h.key.bytes, k.bytes, 32);
	/* Every prefix, ending at a guard page: more bytes or a verdict,
	 * never a read past the end. */
	for (size_t n = 0; n < SHDIR_FIXED_LEN + 3 * SHDIR_PART_LEN; n++) {
		uint8_t *g = t_at_guard(buf, n);
		int r = shdir_hdr_parse(g, n, &h);
		T_ASSERT(r > 0);
		T_ASSERT((size_t)r > n);
	}
	/* Every single-bit flip of the header proper is caught. */
	for (size_t i = 0; i < SHDIR_FIXED_LEN + 3 * SHDIR_PART_LEN; i++) {
		buf[i] ^= 0x10;
		int r = shdir_hdr_parse(buf, (size_t)off, &h);
		T_ASSERT(r != 0);
		buf[i] ^= 0x10;
	}
	buf[4] = 9; /* version */
	T_RC(shdir_hdr_parse(buf, (size_t)off, &h), KVT_EVERSION);
}

/* One store writes (persistent namespace), another reads byte-exact; a
 * restart of both keeps the blocks; lookup spans DRAM and shared. */
static void test_two_stores(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *a = open_shared(dir, "64M", "persistent");
	struct kvt_store *b = open_shared(dir, "64M", "persistent");
	uint32_t na = ns_persistent(a), nb = ns_persistent(b);

	for (size_t i = 0; i < NSIZES; i++)
		t_put_thirds(a, na, i, sizes[i]);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.writes"), NSIZES);
	for (size_t i = 0; i < NSIZES; i++)
		T_RC(t_get_tier(b, nb, i, sizes[i], KVT_TIER_SHARED, 10000), KVT_OK);
	T_EQ_U64(t_stat(b, "shared.hits"), NSIZES);
	/* Promoted: the second get is a DRAM hit. */
	T_RC(t_get_tier(b, nb, 3, sizes[3], KVT_TIER_DRAM, 10000), KVT_OK);
	/* A part read after promotion: the part table came along. */
	{
		size_t len = sizes[5];
		uint8_t *buf = malloc(len), *want = malloc(len);
		struct kvt_key k = t_key(5);
		struct iovec io = { buf, len };
		struct kvt_req r = { .op = KVT_OP_GET, .flags = KVT_F_PART | KVT_F_VERIFY,
				     .part = 2, .ns = nb, .key = k, .iov = &io, .iov_count = 1 };
		struct kvt_req *rp = &r, *done;
		struct kvt_queue *q;
		T_OK(kvt_queue_create(b, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &done, 1, 10000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, len - 2 * (len / 3));
		t_fill(want, len, 5);
		T_EQ_MEM(buf, want + 2 * (len / 3), r.length);
		T_OK(kvt_queue_destroy(q));
		free(buf);
		free(want);
	}
	/* Lookup across both tiers: b has 0..5 in DRAM now?  Only what it
	 * read; a fresh key put in b, and a key nobody has. */
	{
		struct kvt_key keys[NSIZES + 2];
		uint8_t tiers[NSIZES + 2];
		struct kvt_store *c = open_shared(dir, "64M", "persistent");
		uint32_t nc = ns_persistent(c);
		t_put_thirds(c, nc, 0, sizes[0]); /* EXISTS on the shared tier: harmless */
		for (size_t i = 0; i < NSIZES + 2; i++)
			keys[i] = t_key(i == NSIZES ? 1000 : i);
		T_RC(kvt_lookup_prefix(c, nc, keys, NSIZES + 2, tiers), NSIZES);
		T_EQ_INT(tiers[0], KVT_TIER_DRAM);
		for (size_t i = 1; i < NSIZES; i++)
			T_EQ_INT(tiers[i], KVT_TIER_SHARED);
		T_EQ_INT(tiers[NSIZES], KVT_TIER_NONE);
		T_EQ_INT(tiers[NSIZES + 1], KVT_TIER_NONE);
		T_ASSERT(t_stat(c, "shared.stats_issued") >= NSIZES - 1);
		T_RC(kvt_exists(c, nc, &keys[2]), KVT_OK);
		T_RC(kvt_exists(c, nc, &keys[NSIZES]), KVT_MISS);
		kvt_store_destroy(c);
	}
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	/* Restart: a new store, nothing in DRAM, every block still there. */
	b = open_shared(dir, "64M", "persistent");
	nb = ns_persistent(b);
	for (size_t i = 0; i < NSIZES; i++)
		T_RC(t_get_tier(b, nb, i, sizes[i], KVT_TIER_SHARED, 10000), KVT_OK);
	/* Delete removes the file for everyone; clear removes the namespace. */
	{
		struct kvt_key k = t_key(1);
		char p[512];
		struct stat st;
		block_path(b, dir, nb, 1, p, sizeof(p));
		T_ASSERT(stat(p, &st) == 0);
		T_RC(kvt_delete(b, nb, &k), KVT_OK);
		T_ASSERT(stat(p, &st) < 0 && errno == ENOENT);
		T_GE_INT(kvt_clear(b, nb), NSIZES - 1);
		block_path(b, dir, nb, 2, p, sizeof(p));
		T_ASSERT(stat(p, &st) < 0 && errno == ENOENT);
	}
	kvt_store_destroy(b);
	t_rmtree(dir);
	free(dir);
}

/* A corrupted file is a miss, counted, and removed. */
static void test_corrupt(void)
{
	char *dir = t_mkdtemp(), p[512];
	struct kvt_store *a = open_shared(dir, "64M", "always");
	uint32_t na = t_ns(a, "shared-model");
	struct stat st;
	int fd;

	t_put_thirds(a, na, 7, 100000);
	t_put_thirds(a, na, 8, 100000);
	T_OK(kvt_flush(a));
	block_path(a, dir, na, 7, p, sizeof(p));
	kvt_store_destroy(a);
	/* One byte of the value flipped (past the 4 KiB header page). */
	fd = open(p, O_RDWR);
	T_ASSERT(fd >= 0);
	{
		uint8_t c;
		T_EQ_INT(pread(fd, &c, 1, 4096 + 50000), 1);
		c ^= 1;
		T_EQ_INT(pwrite(fd, &c, 1, 4096 + 50000), 1);
	}
	close(fd);
	a = open_shared(dir, "64M", "always");
	na = t_ns(a, "shared-model");
	{
		uint8_t *buf = malloc(100000);
		struct kvt_key k = t_key(7);
		T_RC(kvt_get(a, na, &k, buf, 100000, NULL), KVT_MISS);
		free(buf);
	}
	T_EQ_U64(t_stat(a, "shared.corrupt"), 1);
	T_EQ_U64(t_stat(a, "shared.bad_removed"), 1);
	T_ASSERT(stat(p, &st) < 0 && errno == ENOENT);
	/* its neighbour is fine */
	T_RC(t_get_tier(a, na, 8, 100000, KVT_TIER_SHARED, 10000), KVT_OK);
	/* A truncated file, too. */
	block_path(a, dir, na, 8, p, sizeof(p));
	kvt_store_destroy(a);
	T_OK(truncate(p, 4096 + 10));
	a = open_shared(dir, "64M", "always");
	na = t_ns(a, "shared-model");
	{
		struct kvt_key k = t_key(8);
		uint8_t buf[16];
		T_RC(kvt_get(a, na, &k, buf, sizeof(buf), NULL), KVT_MISS);
	}
	T_ASSERT(stat(p, &st) < 0 && errno == ENOENT);
	kvt_store_destroy(a);
	t_rmtree(dir);
	free(dir);
}

/* A bad file replaced by a good one between the read and the removal is
 * kept: the backend compares inodes before it unlinks. */
struct swap_ctx {
	int root_fd;
	const char *good; /* a good file's relative path to rename into place */
	int calls;
};

static void swap_hook(void *ctx, const char *relpath)
{
	struct swap_ctx *c = ctx;
	c->calls++;
	T_ASSERT(renameat(c->root_fd, c->good, c->root_fd, relpath) == 0);
}

static void test_replaced_not_removed(void)
{
	char *dir = t_mkdtemp(), rel[SHDIR_RELPATH_MAX], good[SHDIR_RELPATH_MAX + 8];
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	struct shdir *sd;
	struct shdir_rd *rd = malloc(sizeof(*rd));
	uint8_t ns[32], val[10000], *view;
	uint64_t len = sizeof(val);
	uint32_t crc;
	struct kvt_key k = t_key(42);
	struct iovec v = { val, len };
	struct swap_ctx sc = { 0 };
	int fd;

	kvt_mem_init(&mem);
	memset(ns, 7, sizeof(ns));
	t_fill(val, len, 42);
	crc = kvt_crc32c(0, val, len);
	T_OK(shdir_open(&sd, dir, true, &mem, &lg));
	T_RC(shdir_write(sd, ns, &k, &v, 1, len, 1, &len, &crc, 0), KVT_OK);
	T_RC(shdir_write(sd, ns, &k, &v, 1, len, 1, &len, &crc, 0), KVT_EXISTS);
	T_OK(shdir_relpath(ns, &k, rel));
	/* Keep a good copy aside, then corrupt the block in place. */
	snprintf(good, sizeof(good), "%s.good", rel);
	{
		char a[512], b[512], cmd[1100];
		snprintf(a, sizeof(a), "%s/%s", dir, rel);
		snprintf(b, sizeof(b), "%s/%s", dir, good);
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", a, b);
		T_EQ_INT(system(cmd), 0);
		fd = open(a, O_RDWR);
		T_ASSERT(fd >= 0);
		T_EQ_INT(pwrite(fd, "X", 1, 4096 + 9999), 1);
		close(fd);
	}
	sc.root_fd = shdir_root_fd(sd);
	sc.good = good;
	shdir_set_bad_hook(sd, swap_hook, &sc);
	view = aligned_alloc(4096, 12288);
	T_RC(shdir_rd_open(sd, ns, &k, rd), KVT_OK);
	{
		struct iovec dv = { view, 12288 };
		T_RC(shdir_rd_value(sd, rd, &dv, 1), KVT_ECORRUPT);
	}
	shdir_rd_bad(sd, rd); /* the hook swaps a good file in first */
	shdir_rd_close(rd);
	T_EQ_INT(sc.calls, 1);
	T_EQ_U64(shdir_stats(sd)->bad_kept, 1);
	T_EQ_U64(shdir_stats(sd)->bad_removed, 0);
	/* The good block is still there and reads back exactly. */
	shdir_set_bad_hook(sd, NULL, NULL);
	T_RC(shdir_rd_open(sd, ns, &k, rd), KVT_OK);
	{
		struct iovec dv = { view, 12288 };
		T_RC(shdir_rd_value(sd, rd, &dv, 1), KVT_OK);
		T_EQ_MEM(view, val, len);
	}
	shdir_rd_close(rd);
	free(view);
	free(rd);
	shdir_close(sd);
	t_rmtree(dir);
	free(dir);
}

/* Blocks evicted from DRAM go down only if they were read twice there. */
static void test_evict_writedown(void)
{
	char *dir = t_mkdtemp(), p[512];
	struct kvt_store *a = small_dram(dir, NULL);
	uint32_t na = t_ns(a, "evict-model"); /* not persistent */
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len);
	struct stat st;

	t_put_thirds(a, na, 1, len); /* read twice below */
	t_put_thirds(a, na, 2, len); /* read once */
	read_twice(a, na, 1, buf, len);
	{
		struct kvt_key k = t_key(2);
		T_RC(kvt_get(a, na, &k, buf, len, NULL), KVT_OK);
	}
	churn_dram(a, na, 100, len);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.wd_evicted"), 1);
	block_path(a, dir, na, 1, p, sizeof(p));
	T_ASSERT(stat(p, &st) == 0);
	block_path(a, dir, na, 2, p, sizeof(p));
	T_ASSERT(stat(p, &st) < 0);
	/* And it comes back, parts and bytes, from the shared tier. */
	T_RC(t_get_tier(a, na, 1, len, KVT_TIER_SHARED, 10000), KVT_OK);
	kvt_store_destroy(a);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

/* shared.writedown_max of one block, with the pool slowed: of two blocks
 * read twice and evicted from DRAM, the first is reserved and queued
 * (shared.wd_evicted), the second finds the budget spent and is shed
 * (shared.wd_shed) -- written nowhere, its reservation never taken; once
 * the first is written the budget is whole again (shared.wd_bytes 0) and
 * a third goes down.  (The DRAM eviction hook's queued and shed paths,
 * kept apart from the SSD one's since 2026-12-07: wd_buf_queue, wd_shed.) */
static void test_evict_writedown_budget(void)
{
	char *dir = t_mkdtemp(), p[512];
	size_t len = 256 * 1024;
	struct kvt_store *a = small_dram(dir, "shared.threads", "1", "shared.writedown_max", "256K",
					 "shared.debug_write_delay_ms", "400", NULL);
	uint32_t na = t_ns(a, "evict-budget"); /* not persistent */
	uint8_t *buf = malloc(len);
	struct stat st;

	for (uint64_t k = 1; k <= 3; k++)
		t_put_thirds(a, na, k, len);
	for (uint64_t k = 1; k <= 2; k++)
		read_twice(a, na, k, buf, len);
	churn_dram(a, na, 100, len);
	T_EQ_U64(t_stat(a, "shared.wd_evicted"), 1);
	T_EQ_U64(t_stat(a, "shared.wd_shed"), 1);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.wd_bytes"), 0);
	T_EQ_U64(t_stat(a, "shared.writes"), 1);
	block_path(a, dir, na, 1, p, sizeof(p));
	T_ASSERT(stat(p, &st) == 0);
	block_path(a, dir, na, 2, p, sizeof(p));
	T_ASSERT(stat(p, &st) < 0);
	/* The budget is back: block 3, put again and read twice, goes down. */
	t_put_thirds(a, na, 3, len);
	read_twice(a, na, 3, buf, len);
	churn_dram(a, na, 200, len);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.wd_evicted"), 2);
	T_EQ_U64(t_stat(a, "shared.wd_shed"), 1);
	T_EQ_U64(t_stat(a, "shared.wd_bytes"), 0);
	block_path(a, dir, na, 3, p, sizeof(p));
	T_ASSERT(stat(p, &st) == 0);
	kvt_store_destroy(a);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

/* A store over dir whose shared tier writes down one block at a time,
 * each after 400 ms (shared.debug_write_delay_ms), with blocks 1 and 2 of
 * namespace name (256 KiB, read twice) evicted from its 4 MiB of DRAM:
 * one being written, one queued.  *ns: the namespace. */
static struct kvt_store *slow_wd_store(const char *dir, const char *name, uint32_t *ns,
				       uint8_t *buf, size_t len)
{
	struct kvt_store *a = small_dram(dir, "shared.threads", "1",
					 "shared.debug_write_delay_ms", "400", NULL);
	uint32_t na = t_ns(a, name);

	for (uint64_t k = 1; k <= 2; k++)
		t_put_thirds(a, na, k, len);
	for (uint64_t k = 1; k <= 2; k++)
		read_twice(a, na, k, buf, len);
	churn_dram(a, na, 100, len);
	T_EQ_U64(t_stat(a, "shared.wd_evicted"), 2); /* one being written, one queued */
	*ns = na;
	return a;
}

/* Wait (at most 10 s) until the pool thread has taken the first
 * write-down and is writing it (shared.wd_running): true once it has,
 * none finished yet. */
static bool wd_taken(struct kvt_store *a)
{
	uint64_t end = t_now_ms() + 10000;

	while (t_stat(a, "shared.wd_running") == 0 && t_now_ms() < end)
		usleep(1000);
	return t_stat(a, "shared.wd_running") == 1 && t_stat(a, "shared.wd_done") == 0;
}

/*
 * Delete and clear win over a write-down taken before them (design.md
 * "Semantics"): with one pool thread slowed to 400 ms a write-down
 * (shared.debug_write_delay_ms), two twice-read blocks are evicted: the
 * first is being written, the second waits in the queue.  A delete (or a
 * clear of their namespace) then found no file, and both were written
 * after it: a get brought the deleted blocks back from the shared tier.
 * Now the delete waits for the one being written and removes it, and the
 * queued one is dropped (shared.wd_cancelled).  The deletes come once the
 * thread has taken the first (shared.wd_running): the second cannot be
 * taken before the first is written, 400 ms later.  (Until 2026-12-05
 * they came right after the evictions, and under load the thread had not
 * taken the first yet: both were dropped, and the test took 1 or 2.)
 */
static void test_delete_vs_writedown(bool clear)
{
	char *dir = t_mkdtemp(), p[512];
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len);
	uint32_t na;
	struct kvt_store *a = slow_wd_store(dir, "wd-delete-model", &na, buf, len); /* not persistent */
	struct stat st;

	T_ASSERT(wd_taken(a));
	if (clear) {
		T_ASSERT(kvt_clear(a, na) >= 0);
	} else {
		/* The queued one first (dropped), then the one being written
		 * (waited for, then removed). */
		for (uint64_t k = 2; k >= 1; k--) {
			struct kvt_key key = t_key(k);
			T_ASSERT(kvt_delete(a, na, &key) >= 0);
		}
	}
	T_OK(kvt_flush(a));
	for (uint64_t k = 1; k <= 2; k++) {
		struct kvt_key key = t_key(k);
		block_path(a, dir, na, k, p, sizeof(p));
		T_ASSERT(stat(p, &st) < 0);
		T_RC(kvt_get(a, na, &key, buf, len, NULL), KVT_MISS);
	}
	/* The one being written was waited for (written, then removed);
	 * the queued one dropped. */
	T_EQ_U64(t_stat(a, "shared.wd_done"), 1);
	T_EQ_U64(t_stat(a, "shared.wd_cancelled"), 1);
	T_EQ_U64(t_stat(a, "shared.wd_running"), 0);
	kvt_store_destroy(a);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

/*
 * Deletes of other blocks do not cancel a write-down (review25): with the
 * write-downs slowed as above, one twice-read victim is being written and
 * one waits in the queue; then 300 deletes of blocks that were never
 * there (a client's DEL of missing keys, any tenant's).  The shared tier
 * remembered the last 256 deletes and, past them, dropped every write-down
 * older than the one it forgot: the queued block, deleted by nobody, was
 * not written (shared.wd_cancelled 1) and was lost to the shared tier.
 */
static void test_writedown_vs_other_deletes(void)
{
	char *dir = t_mkdtemp(), p[512];
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len);
	uint32_t na;
	struct kvt_store *a = slow_wd_store(dir, "wd-other-deletes", &na, buf, len);
	struct stat st;

	for (uint64_t i = 0; i < 300; i++) {
		struct kvt_key key = t_key(100000 + i);
		T_RC(kvt_delete(a, na, &key), KVT_MISS);
	}
	T_OK(kvt_flush(a));
	fprintf(stderr, "write-downs after 300 deletes of other blocks: %llu cancelled\n",
		(unsigned long long)t_stat(a, "shared.wd_cancelled"));
	T_EQ_U64(t_stat(a, "shared.wd_cancelled"), 0);
	for (uint64_t k = 1; k <= 2; k++) {
		block_path(a, dir, na, k, p, sizeof(p));
		T_ASSERT(stat(p, &st) == 0);
	}
	kvt_store_destroy(a);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

/*
 * A promotion from the shared tier racing a delete: it has opened the file
 * and read its header, and waits 400 ms before its DRAM reservation
 * (shared.debug_read_delay_ms) when the delete runs.  The delete used to
 * unlink the file and return, having passed over DRAM before the
 * promotion reserved: the promotion read on from its open file and
 * published, the block was then in DRAM, and every later get hit it.  Now the delete waits for the
 * promotion and deletes what it published: the get racing it may hit (it
 * began first), the next one misses.
 */
static void test_delete_vs_promotion(void)
{
	char *dir = t_mkdtemp(), p[512];
	struct kvt_store *a = open_shared(dir, "64M", "persistent");
	struct kvt_store *b = t_store_open("dram.capacity", "64M", "dram.chunk", "64K",
					   "dram.shards", "1", "shared.dir", dir,
					   "shared.debug_read_delay_ms", "400", NULL);
	uint32_t na = ns_persistent(a), nb = ns_persistent(b);
	size_t len = 65536 + 17;
	uint8_t *buf = malloc(len);
	struct kvt_key key = t_key(1);
	struct iovec io = { buf, len };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = nb, .key = key, .iov = &io, .iov_count = 1 };
	struct kvt_req *rp = &r, *done;
	struct kvt_queue *q;
	struct stat st;

	t_put_thirds(a, na, 1, len);
	T_OK(kvt_flush(a));
	kvt_store_destroy(a);
	T_OK(kvt_queue_create(b, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	usleep(150 * 1000); /* the promotion has read the file and waits */
	T_RC(kvt_delete(b, nb, &key), KVT_OK);
	T_RC(kvt_queue_wait(q, &done, 1, 10000), 1);
	T_ASSERT(r.status == KVT_OK || r.status == KVT_MISS);
	T_OK(kvt_queue_destroy(q));
	T_RC(kvt_get(b, nb, &key, buf, len, NULL), KVT_MISS);
	T_RC(kvt_lookup_prefix(b, nb, &key, 1, NULL), 0);
	block_path(b, dir, nb, 1, p, sizeof(p));
	T_ASSERT(stat(p, &st) < 0);
	kvt_store_destroy(b);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

/* Files planted in the tree: a FIFO where a block should be must not hang
 * the reader (it would block in open), a symlink is not followed; both
 * are misses.  An alarm turns a hang into a failure. */
static void test_planted(void)
{
	char *dir = t_mkdtemp(), rel[SHDIR_RELPATH_MAX], path[700], cmd[1500], out[700];
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	struct shdir *sd;
	struct shdir_rd *rd = malloc(sizeof(*rd));
	uint8_t ns[32];
	struct kvt_key kf = t_key(77), ks = t_key(78);
	char *slash;

	kvt_mem_init(&mem);
	memset(ns, 9, sizeof(ns));
	T_OK(shdir_open(&sd, dir, false, &mem, &lg));
	T_OK(shdir_relpath(ns, &kf, rel));
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	slash = strrchr(path, '/');
	*slash = 0;
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	T_EQ_INT(system(cmd), 0);
	*slash = '/';
	T_EQ_INT(mkfifo(path, 0600), 0);
	alarm(10);
	T_RC(shdir_rd_open(sd, ns, &kf, rd), KVT_MISS);
	alarm(0);
	/* A symlink to a file outside the tree. */
	snprintf(out, sizeof(out), "%s/outside", dir);
	{
		int fd = open(out, O_WRONLY | O_CREAT, 0600);
		T_ASSERT(fd >= 0);
		T_EQ_INT(write(fd, "x", 1), 1);
		close(fd);
	}
	T_OK(shdir_relpath(ns, &ks, rel));
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	slash = strrchr(path, '/');
	*slash = 0;
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	T_EQ_INT(system(cmd), 0);
	*slash = '/';
	T_EQ_INT(symlink(out, path), 0);
	T_RC(shdir_rd_open(sd, ns, &ks, rd), KVT_MISS);
	free(rd);
	shdir_close(sd);
	t_rmtree(dir);
	free(dir);
}

/* kvt_shared_gc: the age limit, then the budget, oldest first. */
static void test_gc(void)
{
	char *dir = t_mkdtemp(), p[512];
	struct kvt_store *a = open_shared(dir, "64M", "always");
	uint32_t na = t_ns(a, "gc-model");
	struct kvt_shared_gc_result res;
	struct stat st;

	for (uint64_t i = 0; i < 10; i++)
		t_put_thirds(a, na, i, 60000);
	T_OK(kvt_flush(a));
	/* Ages: block i written 1000 * (10 - i) seconds ago. */
	for (uint64_t i = 0; i < 10; i++) {
		struct timespec ts[2];
		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= (time_t)(1000 * (10 - i));
		ts[1] = ts[0];
		block_path(a, dir, na, i, p, sizeof(p));
		T_OK(utimensat(AT_FDCWD, p, ts, 0));
	}
	/* Older than 7500 s: blocks 0..2. */
	T_OK(kvt_shared_gc(dir, 0, 7500, &res));
	T_EQ_U64(res.files, 10);
	T_EQ_U64(res.removed_files, 3);
	for (uint64_t i = 0; i < 10; i++) {
		block_path(a, dir, na, i, p, sizeof(p));
		T_EQ_INT(stat(p, &st) == 0, i >= 3);
	}
	/* Budget of three files' bytes: the four oldest of the seven go. */
	T_OK(kvt_shared_gc(dir, 3 * (4096 + 60000), 0, &res));
	T_EQ_U64(res.files, 7);
	T_EQ_U64(res.removed_files, 4);
	for (uint64_t i = 3; i < 10; i++) {
		block_path(a, dir, na, i, p, sizeof(p));
		T_EQ_INT(stat(p, &st) == 0, i >= 7);
	}
	/* The store sees the survivors, and misses the rest. */
	kvt_store_destroy(a);
	a = open_shared(dir, "64M", "always");
	na = t_ns(a, "gc-model");
	T_RC(t_get_tier(a, na, 8, 60000, KVT_TIER_SHARED, 10000), KVT_OK);
	{
		struct kvt_key k = t_key(4);
		uint8_t b[16];
		T_RC(kvt_get(a, na, &k, b, sizeof(b), NULL), KVT_MISS);
	}
	T_RC(kvt_shared_gc(NULL, 0, 0, NULL), KVT_ENULL);
	T_ASSERT(kvt_shared_gc("/nonexistent/kvtier", 0, 0, NULL) == -ENOENT);
	kvt_store_destroy(a);
	t_rmtree(dir);
	free(dir);
}

/* Prefetch moves shared blocks into DRAM. */
static void test_prefetch(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *a = open_shared(dir, "64M", "always");
	uint32_t na = t_ns(a, "pf-model");
	struct kvt_key keys[4];
	for (uint64_t i = 0; i < 4; i++) {
		t_put_thirds(a, na, i, 70000);
		keys[i] = t_key(i);
	}
	T_OK(kvt_flush(a));
	kvt_store_destroy(a);
	a = open_shared(dir, "64M", "always");
	na = t_ns(a, "pf-model");
	{
		struct kvt_req r = { .op = KVT_OP_PREFETCH, .ns = na, .keys = keys, .key_count = 4 };
		struct kvt_req *rp = &r, *done;
		struct kvt_queue *q;
		T_OK(kvt_queue_create(a, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &done, 1, 10000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, 4);
		T_OK(kvt_queue_destroy(q));
	}
	for (uint64_t i = 0; i < 4; i++)
		T_RC(t_get_tier(a, na, i, 70000, KVT_TIER_DRAM, 10000), KVT_OK);
	kvt_store_destroy(a);
	t_rmtree(dir);
	free(dir);
}

/* Below an SSD tier: a persistent put goes to both; a store with an
 * empty SSD of its own finds the block on the shared tier. */
static void test_below_ssd(void)
{
	char *dir = t_mkdtemp(), *pa = t_mkdtemp(), *pb = t_mkdtemp();
	struct kvt_store *a = t_store_open("path", pa, "dram.capacity", "64M", "ssd.capacity", "64M",
					   "ssd.segment", "8M", "shared.dir", dir, NULL);
	struct kvt_store *b;
	uint32_t na = ns_persistent(a), nb;
	t_put_thirds(a, na, 3, 300000);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.writes"), 1);
	kvt_store_destroy(a);
	b = t_store_open("path", pb, "dram.capacity", "64M", "ssd.capacity", "64M", "ssd.segment",
			 "8M", "shared.dir", dir, NULL);
	nb = ns_persistent(b);
	T_RC(t_get_tier(b, nb, 3, 300000, KVT_TIER_SHARED, 10000), KVT_OK);
	kvt_store_destroy(b);
	/* The first store's own SSD still has it, before the shared tier. */
	a = t_store_open("path", pa, "dram.capacity", "64M", "ssd.capacity", "64M", "ssd.segment",
			 "8M", "shared.dir", dir, NULL);
	na = ns_persistent(a);
	T_RC(t_get_tier(a, na, 3, 300000, KVT_TIER_SSD, 10000), KVT_OK);
	kvt_store_destroy(a);
	t_rmtree(dir);
	t_rmtree(pa);
	t_rmtree(pb);
	free(dir);
	free(pa);
	free(pb);
}

/* Put fillers (64 KiB, keys from *next on) until `bytes` have gone in,
 * flushing every 512 KiB so that the SSD write-down never sheds. */
static void churn(struct kvt_store *s, uint32_t ns, uint64_t *next, size_t bytes)
{
	for (size_t done = 0; done < bytes; done += 65536) {
		t_put_thirds(s, ns, (*next)++, 65536);
		if (done % (512 * 1024) == 0)
			T_OK(kvt_flush(s));
	}
	T_OK(kvt_flush(s));
}

/* Churn until key k is no longer in DRAM (lookups do not extend a life). */
static void churn_out(struct kvt_store *s, uint32_t ns, uint64_t *next, uint64_t k)
{
	struct kvt_key key = t_key(k);
	uint8_t tier = KVT_TIER_DRAM;
	for (int i = 0; i < 16 && tier == KVT_TIER_DRAM; i++) {
		churn(s, ns, next, 1u << 20);
		T_RC(kvt_lookup_prefix(s, ns, &key, 1, &tier), 1);
	}
	T_EQ_INT(tier, KVT_TIER_SSD);
}

/* The SSD eviction tests' opening: keys 1 to `keys` put (64 KiB each),
 * key 1 promoted from SSD twice and the others once -- each read from SSD
 * after churn_out dropped it from DRAM -- then 20 MiB of churn through
 * the whole SSD (16 MiB), which evicts segments (none evicted and nothing
 * shed before), flushed. */
static void ssd_evict_open(struct kvt_store *s, uint32_t ns, uint64_t keys)
{
	uint64_t next = 1000;

	for (uint64_t k = 1; k <= keys; k++)
		t_put_thirds(s, ns, k, 65536);
	T_OK(kvt_flush(s));
	for (uint64_t k = 1; k <= keys + 1; k++) {
		uint64_t key = k <= keys ? k : 1; /* key 1 again last */
		churn_out(s, ns, &next, key); /* out of DRAM, still on SSD */
		T_RC(t_get_tier(s, ns, key, 65536, KVT_TIER_SSD, 10000), KVT_OK);
	}
	T_EQ_U64(t_stat(s, "ssd.evicted_blocks"), 0);
	T_EQ_U64(t_stat(s, "shared.wd_shed"), 0);
	churn(s, ns, &next, 20u << 20); /* through the whole SSD */
	T_ASSERT(t_stat(s, "ssd.evicted_blocks") > 0);
	T_OK(kvt_flush(s));
}

/* The SSD eviction hook: a block promoted from SSD twice, then dropped by
 * SSD segment eviction, is written down to the shared tier; a block
 * promoted once is not. */
static void test_ssd_evict_writedown(void)
{
	char *dir = t_mkdtemp(), *path = t_mkdtemp(), file[1024];
	struct kvt_store *s = ssd_shared(path, dir, NULL);
	uint32_t ns = t_ns(s, "ssd-evict"); /* not persistent: nothing goes down at put */
	struct stat st;

	ssd_evict_open(s, ns, 2);
	T_EQ_U64(t_stat(s, "ssd.evicted_to_shared"), 1);
	T_EQ_U64(t_stat(s, "shared.wd_ssd_evicted"), 1);
	T_EQ_U64(t_stat(s, "shared.writes"), 1);
	block_path(s, dir, ns, 1, file, sizeof(file));
	T_ASSERT(stat(file, &st) == 0);
	block_path(s, dir, ns, 2, file, sizeof(file));
	T_ASSERT(stat(file, &st) < 0);
	kvt_store_destroy(s);
	/* Another store finds it there, byte-exact. */
	s = open_shared(dir, "64M", "persistent");
	ns = t_ns(s, "ssd-evict");
	T_RC(t_get_tier(s, ns, 1, 65536, KVT_TIER_SHARED, 10000), KVT_OK);
	kvt_store_destroy(s);
	t_rmtree(dir);
	t_rmtree(path);
	free(dir);
	free(path);
}

/* The SSD eviction hook past shared.writedown_max (here under one
 * block): a block promoted twice and dropped by SSD segment eviction is
 * refused at the reserve and counted as shed (shared.wd_shed), neither
 * handed down (ssd.evicted_to_shared) nor queued (shared.wd_ssd_evicted);
 * nothing stays reserved (shared.wd_bytes 0). */
static void test_ssd_evict_writedown_budget(void)
{
	char *dir = t_mkdtemp(), *path = t_mkdtemp(), file[1024];
	struct kvt_store *s = ssd_shared(path, dir, "shared.writedown_max", "32K", NULL);
	uint32_t ns = t_ns(s, "ssd-evict-budget");
	struct stat st;

	ssd_evict_open(s, ns, 1);
	T_EQ_U64(t_stat(s, "ssd.evicted_to_shared"), 0);
	T_EQ_U64(t_stat(s, "shared.wd_ssd_evicted"), 0);
	T_EQ_U64(t_stat(s, "shared.wd_shed"), 1);
	T_EQ_U64(t_stat(s, "shared.wd_bytes"), 0);
	T_EQ_U64(t_stat(s, "shared.writes"), 0);
	block_path(s, dir, ns, 1, file, sizeof(file));
	T_ASSERT(stat(file, &st) < 0);
	kvt_store_destroy(s);
	t_rmtree(dir);
	t_rmtree(path);
	free(dir);
	free(path);
}

/* kvt_shared_gc over a budget, mtimes spread over 45 days (the plan's
 * histograms narrow twice, gcplan.h) with four files of one second at the
 * cut: exactly the oldest go, and of the cut's second only as many as
 * the budget needs. */
static void test_gc_spread(void)
{
	char *dir = t_mkdtemp(), p[512];
	struct kvt_store *a = open_shared(dir, "64M", "always");
	uint32_t na = t_ns(a, "gc-spread");
	struct kvt_shared_gc_result res;
	struct stat st;
	struct timespec now;
	unsigned tied_gone = 0;

	for (uint64_t i = 0; i < 40; i++)
		t_put_thirds(a, na, i, 6000);
	T_OK(kvt_flush(a));
	clock_gettime(CLOCK_REALTIME, &now);
	/* Block i written (40 - i) * 100,000 s ago; 13..16 at one second. */
	for (uint64_t i = 0; i < 40; i++) {
		struct timespec ts[2] = { now, now };
		uint64_t age = i >= 13 && i <= 16 ? 27 * 100000 : (40 - i) * 100000;
		ts[0].tv_sec -= (time_t)age;
		ts[0].tv_nsec = 0;
		ts[1] = ts[0];
		block_path(a, dir, na, i, p, sizeof(p));
		T_OK(utimensat(AT_FDCWD, p, ts, 0));
	}
	/* Room for 25 files: the 15 oldest go, 0..12 and two of 13..16. */
	T_OK(kvt_shared_gc(dir, 25 * (4096 + 6000) + 100, 0, &res));
	T_EQ_U64(res.files, 40);
	T_EQ_U64(res.removed_files, 15);
	for (uint64_t i = 0; i < 40; i++) {
		bool here;
		block_path(a, dir, na, i, p, sizeof(p));
		here = stat(p, &st) == 0;
		if (i >= 13 && i <= 16)
			tied_gone += !here;
		else
			T_EQ_INT(here, i > 16);
	}
	T_EQ_INT(tied_gone, 2);
	/* Within budget now: one walk, nothing removed. */
	T_OK(kvt_shared_gc(dir, 25 * (4096 + 6000) + 100, 0, &res));
	T_EQ_U64(res.files, 25);
	T_EQ_U64(res.removed_files, 0);
	kvt_store_destroy(a);
	t_rmtree(dir);
	free(dir);
}

/* kvtier gc, the command (argv[1] of this test: the CLI's path). */
static void test_gc_cli(const char *cli)
{
	char *dir = t_mkdtemp(), cmd[1024], line[512], p[512];
	struct kvt_store *a = open_shared(dir, "64M", "always");
	uint32_t na = t_ns(a, "gc-cli");
	struct timespec ts[2];
	FILE *f;

	t_put_thirds(a, na, 1, 10000);
	t_put_thirds(a, na, 2, 10000);
	T_OK(kvt_flush(a));
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 100;
	ts[1] = ts[0];
	block_path(a, dir, na, 1, p, sizeof(p));
	T_OK(utimensat(AT_FDCWD, p, ts, 0));
	kvt_store_destroy(a);
	snprintf(cmd, sizeof(cmd), "'%s' gc --dir '%s' --max-age 50 --json", cli, dir);
	f = popen(cmd, "r");
	T_ASSERT(f);
	T_ASSERT(fgets(line, sizeof(line), f));
	T_EQ_INT(pclose(f), 0);
	T_EQ_STR(line, "{\"files\":2,\"bytes\":28192,\"removed_files\":1,"
		       "\"removed_bytes\":14096,\"temp_removed\":0}\n");
	snprintf(cmd, sizeof(cmd), "'%s' gc --budget 1Q --dir '%s' 2>/dev/null", cli, dir);
	T_EQ_INT(WEXITSTATUS(system(cmd)), 2);
	t_rmtree(dir);
	free(dir);
}

int main(int argc, char **argv)
{
	test_hdr_codec();
	test_exists_errors();
	test_replaced_not_removed();
	test_two_stores();
	test_corrupt();
	test_evict_writedown();
	test_evict_writedown_budget();
	test_delete_vs_writedown(false);
	test_delete_vs_writedown(true);
	test_writedown_vs_other_deletes();
	test_delete_vs_promotion();
	test_gc();
	test_gc_spread();
	test_planted();
	test_prefetch();
	test_below_ssd();
	test_ssd_evict_writedown();
	test_ssd_evict_writedown_budget();
	if (argc > 1)
		test_gc_cli(argv[1]);
	printf("test_shared: ok\n");
	return 0;
}

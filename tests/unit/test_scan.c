/*
 * test_scan.c - kvt_scan (lib/store_scan.c): a namespace's keys in order,
 * a page at a time, from DRAM only, SSD only, both, after deletes, across
 * eviction and restarts, and under concurrent puts and deletes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "tstore.h"

/* KVT_TEST_IO=psync|uring picks the SSD engine (the TSan run uses psync:
 * TSan cannot see the kernel fill io_uring's read buffers). */
static struct kvt_store *open_ssd(const char *dir, const char *dram)
{
	const char *io = getenv("KVT_TEST_IO") ? getenv("KVT_TEST_IO") : "uring";
	return t_store_open("path", dir, "dram.capacity", dram, "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", "128M", "ssd.segment", "1M",
			    "ssd.admission", "always", "ssd.io", io, NULL);
}

static int put_key(struct kvt_store *s, uint32_t ns, const struct kvt_key *k, size_t len)
{
	char *buf = malloc(len);
	struct iovec v = { buf, len };
	int r;
	T_ASSERT(buf);
	memset(buf, (int)k->bytes[0], len);
	r = kvt_put(s, ns, k, &v, 1);
	free(buf);
	return r;
}

static struct kvt_key str_key(const char *p)
{
	struct kvt_key k;
	T_OK(kvt_key_set(&k, p, strlen(p)));
	return k;
}

static int key_cmp(const void *a, const void *b)
{
	const struct kvt_key *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->bytes, y->bytes, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Every key of ns, paging by `page`, calling between(ctx) (if not NULL)
 * after each page; asserts the pages ascend strictly.  Returns how many
 * (into out, of cap). */
static size_t scan_pages(struct kvt_store *s, uint32_t ns, const char *prefix, size_t page,
			 struct kvt_key *out, size_t cap, void (*between)(void *), void *ctx)
{
	struct kvt_key cur = { .len = 0 };
	size_t n = 0;
	struct kvt_key *buf = calloc(page, sizeof(*buf));
	for (;;) {
		int64_t r = kvt_scan(s, ns, &cur, prefix, prefix ? strlen(prefix) : 0, buf, page);
		T_ASSERT(r >= 0 && (size_t)r <= page);
		for (int64_t i = 0; i < r; i++) {
			T_ASSERT(n < cap);
			if (n)
				T_ASSERT(key_cmp(&out[n - 1], &buf[i]) < 0);
			out[n++] = buf[i];
		}
		if (r)
			T_ASSERT(key_cmp(&cur, &buf[r - 1]) == 0);
		if ((size_t)r < page)
			break;
		if (between)
			between(ctx);
	}
	free(buf);
	return n;
}

static size_t scan_all(struct kvt_store *s, uint32_t ns, const char *prefix, size_t page,
		       struct kvt_key *out, size_t cap)
{
	return scan_pages(s, ns, prefix, page, out, cap, NULL, NULL);
}

/* The hand-worked case: opaque keys in byte order, a key before its
 * extensions, prefixes, cursors in the middle, other namespaces apart. */
static void test_dram_order(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", "dram.prefault", "off", NULL);
	uint32_t ns = t_ns(s, "scan"), ns2 = t_ns(s, "scan-2");
	const char *names[] = { "b", "a", "ab", "ba", "\xff", "a\x01", "bb", "abc" };
	const char *sorted[] = { "a", "a\x01", "ab", "abc", "b", "ba", "bb", "\xff" };
	struct kvt_key got[16], cur = { .len = 0 }, k;

	for (size_t i = 0; i < 8; i++) {
		k = str_key(names[i]);
		T_RC(put_key(s, ns, &k, 100), KVT_OK);
	}
	k = str_key("aa");
	T_RC(put_key(s, ns2, &k, 100), KVT_OK);

	T_EQ_U64(scan_all(s, ns, NULL, 1, got, 16), 8);
	for (size_t i = 0; i < 8; i++) {
		k = str_key(sorted[i]);
		T_ASSERT(key_cmp(&got[i], &k) == 0);
	}
	T_EQ_U64(scan_all(s, ns, NULL, 3, got, 16), 8);
	T_EQ_U64(scan_all(s, ns, NULL, 100, got, 16), 8);
	/* Prefix "a": a, a\x01, ab, abc; "ab": ab, abc; "c": none. */
	T_EQ_U64(scan_all(s, ns, "a", 2, got, 16), 4);
	T_ASSERT(key_cmp(&got[3], &(struct kvt_key){ .len = 3, .bytes = "abc" }) == 0);
	T_EQ_U64(scan_all(s, ns, "ab", 1, got, 16), 2);
	T_EQ_U64(scan_all(s, ns, "c", 5, got, 16), 0);
	/* A cursor that is not a stored key: after "aa" comes "ab". */
	cur = str_key("aa");
	T_RC(kvt_scan(s, ns, &cur, NULL, 0, got, 2), 2);
	T_ASSERT(key_cmp(&got[0], &(struct kvt_key){ .len = 2, .bytes = "ab" }) == 0);
	T_ASSERT(key_cmp(&cur, &(struct kvt_key){ .len = 3, .bytes = "abc" }) == 0);
	/* Past the end: 0, cursor unchanged. */
	cur = str_key("\xff");
	T_RC(kvt_scan(s, ns, &cur, NULL, 0, got, 2), 0);
	T_EQ_U64(cur.len, 1);
	/* The other namespace sees only its own key. */
	T_EQ_U64(scan_all(s, ns2, NULL, 4, got, 16), 1);

	/* Deleted keys go; cleared namespaces are empty. */
	k = str_key("ab");
	T_RC(kvt_delete(s, ns, &k), KVT_OK);
	T_EQ_U64(scan_all(s, ns, "a", 10, got, 16), 3);
	T_RC(kvt_clear(s, ns2), 1);
	T_EQ_U64(scan_all(s, ns2, NULL, 10, got, 16), 0);

	/* Errors. */
	cur.len = 0;
	T_RC(kvt_scan(s, ns, &cur, NULL, 0, got, 0), KVT_EBADLEN);
	T_RC(kvt_scan(s, ns, &cur, NULL, 0, got, KVT_SCAN_MAX + 1), KVT_EBADLEN);
	T_RC(kvt_scan(s, ns, &cur, "x", KVT_KEY_MAX + 1, got, 4), KVT_EBADLEN);
	T_RC(kvt_scan(s, 999, &cur, NULL, 0, got, 4), KVT_ENONS);
	T_RC(kvt_scan(s, KVT_NS_ALL, &cur, NULL, 0, got, 4), KVT_ENONS);
	T_RC(kvt_scan(s, ns, NULL, NULL, 0, got, 4), KVT_ENULL);
	T_RC(kvt_scan(s, ns, &cur, NULL, 3, got, 4), KVT_ENULL);
	cur.len = KVT_KEY_MAX + 1;
	T_RC(kvt_scan(s, ns, &cur, NULL, 0, got, 4), KVT_EKEYLEN);
	kvt_store_destroy(s);
}

#define N_SSD 200

static void expect_keys(struct kvt_store *s, uint32_t ns, const bool *present, size_t page)
{
	struct kvt_key *got = calloc(N_SSD + 1, sizeof(*got)), *want = calloc(N_SSD, sizeof(*want));
	size_t nw = 0, n;
	for (uint64_t i = 0; i < N_SSD; i++)
		if (present[i])
			want[nw++] = t_key(i);
	qsort(want, nw, sizeof(*want), key_cmp);
	n = scan_all(s, ns, NULL, page, got, N_SSD + 1);
	T_EQ_U64(n, nw);
	for (size_t i = 0; i < n; i++)
		T_ASSERT(key_cmp(&got[i], &want[i]) == 0);
	free(got);
	free(want);
}

/* SSD only (after a restart DRAM is cold), both (some read back into
 * DRAM: listed once), deletes in both, a restart after the deletes. */
static void test_ssd(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_ssd(dir, "64M");
	uint32_t ns = t_ns(s, "scan-ssd"), ns2 = t_ns(s, "scan-ssd-2");
	bool present[N_SSD];
	char buf[8192];

	for (uint64_t i = 0; i < N_SSD; i++) {
		struct kvt_key k = t_key(i);
		T_RC(put_key(s, ns, &k, 3000), KVT_OK);
		T_RC(put_key(s, ns2, &k, 3000), KVT_OK);
		present[i] = true;
	}
	T_OK(kvt_flush(s));
	expect_keys(s, ns, present, 7);     /* DRAM and SSD both hold every key */
	kvt_store_destroy(s);

	s = open_ssd(dir, "64M");
	T_EQ_U64(t_stat(s, "dram.blocks"), 0);
	expect_keys(s, ns, present, 13);    /* SSD only */
	for (uint64_t i = 0; i < N_SSD; i += 3) {   /* a third back in DRAM */
		struct kvt_key k = t_key(i);
		T_RC(kvt_get(s, ns, &k, buf, sizeof(buf), NULL), KVT_OK);
	}
	T_ASSERT(t_stat(s, "dram.blocks") >= N_SSD / 3);
	expect_keys(s, ns, present, 1);     /* both: no key twice */
	expect_keys(s, ns, present, 64);
	for (uint64_t i = 0; i < N_SSD; i += 5) {   /* some in DRAM too, some SSD only */
		struct kvt_key k = t_key(i);
		T_RC(kvt_delete(s, ns, &k), KVT_OK);
		present[i] = false;
	}
	expect_keys(s, ns, present, 9);
	T_OK(kvt_flush(s));
	kvt_store_destroy(s);

	s = open_ssd(dir, "64M");
	expect_keys(s, ns, present, 50);
	T_RC(kvt_clear(s, ns), N_SSD - N_SSD / 5);
	for (uint64_t i = 0; i < N_SSD; i++)
		present[i] = false;
	expect_keys(s, ns, present, 50);
	for (uint64_t i = 0; i < N_SSD; i++)
		present[i] = true;
	expect_keys(s, ns2, present, 50);  /* the other namespace untouched */
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* Across eviction: a DRAM much smaller than the namespace; the scan lists
 * exactly the keys the store answers exists for. */
static void test_eviction(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_ssd(dir, "4M");
	uint32_t ns = t_ns(s, "scan-evict");
	bool present[N_SSD];
	size_t in = 0;

	for (uint64_t i = 0; i < N_SSD; i++) {
		struct kvt_key k = t_key(i);
		T_RC(put_key(s, ns, &k, 60000), KVT_OK);
		if (i % 8 == 7)
			T_OK(kvt_flush(s)); /* write-downs never shed */
	}
	T_OK(kvt_flush(s));
	T_ASSERT(t_stat(s, "dram.evictions") > 0);
	T_ASSERT(t_stat(s, "dram.blocks") < N_SSD);
	for (uint64_t i = 0; i < N_SSD; i++) {
		struct kvt_key k = t_key(i);
		int r = kvt_exists(s, ns, &k);
		T_ASSERT(r == KVT_OK || r == KVT_MISS);
		present[i] = r == KVT_OK;
		in += present[i];
	}
	T_ASSERT(in > t_stat(s, "dram.blocks")); /* some are on SSD only */
	expect_keys(s, ns, present, 16);
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* Under concurrent puts (new keys) and deletes (of keys outside the base
 * set) -- from another thread, and between pages from the scanning one --
 * with evictions: pages never repeat a key and every base key -- present
 * throughout -- is listed exactly once. */
struct churn {
	struct kvt_store *s;
	uint32_t ns;
	atomic_bool stop;
	atomic_uint_fast64_t puts;
};

#define BASE 300
#define CHURN 15000

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	/* At most CHURN puts of 4 KiB: the SSD (128 MiB) never evicts. */
	for (uint64_t i = BASE; !atomic_load(&c->stop) && i < BASE + CHURN; i++) {
		struct kvt_key k = t_key(i);
		T_ASSERT(put_key(c->s, c->ns, &k, 4096) >= 0);
		if (i % 3 == 0 && i - 2 >= BASE) {
			struct kvt_key d = t_key(i - 2);
			T_ASSERT(kvt_delete(c->s, c->ns, &d) >= 0);
		}
		atomic_fetch_add(&c->puts, 1);
	}
	return NULL;
}

/* Between two pages, on the scanning thread: two new keys (one may sort
 * before the cursor, one after) and a delete of an earlier such key, so
 * every resumption meets changes whatever the other thread managed. */
struct between {
	struct kvt_store *s;
	uint32_t ns;
	uint64_t next;
};

static void between_pages(void *arg)
{
	struct between *b = arg;
	for (int i = 0; i < 2; i++) {
		struct kvt_key k = t_key(b->next++);
		T_ASSERT(put_key(b->s, b->ns, &k, 4096) >= 0);
	}
	if (b->next > 2000005) {
		struct kvt_key d = t_key(b->next - 5);
		T_ASSERT(kvt_delete(b->s, b->ns, &d) >= 0);
	}
}

static void test_concurrent(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_ssd(dir, "4M");
	struct churn c = { .s = s };
	pthread_t th;
	struct kvt_key *got = calloc(100000, sizeof(*got));
	struct between bt = { .s = s, .next = 2000000 };

	c.ns = t_ns(s, "scan-churn");
	for (uint64_t i = 0; i < BASE; i++) {
		struct kvt_key k = t_key(i);
		T_RC(put_key(s, c.ns, &k, 20000), KVT_OK);
		if (i % 8 == 7)
			T_OK(kvt_flush(s)); /* all on SSD: present throughout */
	}
	T_OK(kvt_flush(s));
	T_ASSERT(pthread_create(&th, NULL, churn_main, &c) == 0);
	while (atomic_load(&c.puts) < 20)
		usleep(1000);
	bt.ns = c.ns;
	for (int round = 0; round < 4; round++) {
		/* ascends strictly */
		size_t n = scan_pages(s, c.ns, NULL, 20 + round * 50, got, 100000, between_pages, &bt);
		size_t base = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t id;
			memcpy(&id, got[i].bytes, sizeof(id));
			base += id < BASE;
		}
		T_EQ_U64(base, BASE);
	}
	T_ASSERT(bt.next > 2000000 + 20);
	atomic_store(&c.stop, true);
	pthread_join(th, NULL);
	for (uint64_t i = 0; i < BASE; i++) {
		struct kvt_key k = t_key(i);
		T_RC(kvt_exists(s, c.ns, &k), KVT_OK);
	}
	T_ASSERT(t_stat(s, "dram.evictions") > 0);
	free(got);
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_dram_order();
	test_ssd();
	test_eviction();
	test_concurrent();
	return 0;
}

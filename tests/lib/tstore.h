/*
 * tstore.h - open a store for a test in one line, and a test namespace.
 */
#ifndef KVT_TEST_TSTORE_H
#define KVT_TEST_TSTORE_H

#include "t.h"

/* The SSD format (ssd.format) the tests' stores are opened with unless a
 * test names one: KVT_TEST_SSD_FORMAT if set (meson's format re-runs),
 * else the library's default (kvt_option_info), so that a test asking
 * follows the default when it changes. */
static inline int t_ssd_format(void)
{
	const char *f = getenv("KVT_TEST_SSD_FORMAT");
	struct kvt_option o;
	if (f)
		return atoi(f);
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (!strcmp(o.name, "ssd.format"))
			return atoi(o.def);
	T_FAIL("no option ssd.format");
}

/* That format is 3 (batches). */
static inline bool t_ssd_format3(void)
{
	return t_ssd_format() == 3;
}

/* Set option n=v of s for t_store_vopen; a refused one fails the test.
 * *format_named: whether a test's option pins ssd.format. */
static inline void t_store_opt(struct kvt_store *s, const char *n, const char *v,
			       bool *format_named)
{
	int r = kvt_store_set_option(s, n, v);
	*format_named |= !strcmp(n, "ssd.format");
	if (r < 0)
		T_FAIL("option %s=%s: %s", n, v, kvt_strerror(r));
}

/* Open a memory-only store with the "name", "value" pairs of base (an
 * array ended by a NULL name; NULL: none), then first and the pairs that
 * follow it in *more (ended by a NULL name; first NULL: none, and more
 * may be NULL).  A later pair of the same name overrides an earlier one,
 * so a test's own helper can keep its common options in base and take a
 * test's others as its variadic arguments. */
static inline struct kvt_store *t_store_vopen(const char *const *base, const char *first,
					      va_list *more)
{
	struct kvt_store *s;
	const char *n;
	bool format_named = false; /* the test pins ssd.format */
	T_OK(kvt_store_create(&s));
	for (; base && base[0]; base += 2)
		t_store_opt(s, base[0], base[1], &format_named);
	for (n = first; n; n = va_arg(*more, const char *))
		t_store_opt(s, n, va_arg(*more, const char *), &format_named);
	/* KVT_TEST_DIO_ALIGN=4096: every store's SSD tier lays records out at
	 * 4096 bytes, as on a 4Kn drive (meson test test_ssd_4k). */
	if (getenv("KVT_TEST_DIO_ALIGN"))
		T_OK(kvt_store_set_option(s, "ssd.dio_align", getenv("KVT_TEST_DIO_ALIGN")));
	/* KVT_TEST_SSD_FORMAT=2|3: the segments' format (doc/ssd.md
	 * ssd.format), for meson's re-runs of a suite at the format that is
	 * not the default -- except where the test pins ssd.format itself
	 * (it builds or inspects one format's bytes by hand). */
	if (getenv("KVT_TEST_SSD_FORMAT") && !format_named)
		T_OK(kvt_store_set_option(s, "ssd.format", getenv("KVT_TEST_SSD_FORMAT")));
	T_OK(kvt_store_open(s));
	return s;
}

/* Open a memory-only store with options given as "name", "value" pairs, NULL-terminated. */
static inline struct kvt_store *t_store_open(const char *first, ...)
{
	struct kvt_store *s;
	va_list ap;
	va_start(ap, first);
	s = t_store_vopen(NULL, first, &ap);
	va_end(ap);
	return s;
}

/* A statistic of s that must exist (kvt_store_stat); fails the test otherwise. */
static inline uint64_t t_stat(struct kvt_store *s, const char *name)
{
	uint64_t v = 0;
	int r = kvt_store_stat(s, name, &v);
	if (r != 0)
		T_FAIL("stat %s: %s", name, kvt_strerror(r));
	return v;
}

static inline struct kvt_ns_desc t_desc(const char *model, uint32_t tp_rank)
{
	struct kvt_ns_desc d = {
		.model = model, .dtype = "bf16", .layout = "test-contiguous",
		.block_tokens = 16, .tp_rank = tp_rank, .tp_size = 8,
		.pp_rank = 0, .pp_size = 1, .tenant = "test",
	};
	return d;
}

static inline uint32_t t_ns(struct kvt_store *s, const char *model)
{
	struct kvt_ns_desc d = t_desc(model, 0);
	uint32_t id = 0;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

/* One request on a queue of its own, waited for (30 s): the finished
 * request (its buffers are the caller's). */
static inline struct kvt_req t_req1(struct kvt_store *s, struct kvt_req r)
{
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
	T_OK(kvt_queue_destroy(q));
	return r;
}

/* Submit reqs[0..n) on q in one kvt_submit. */
static inline void t_submit_all(struct kvt_queue *q, struct kvt_req *reqs, unsigned n)
{
	struct kvt_req **rp = malloc((n ? n : 1) * sizeof(*rp));
	T_ASSERT(rp);
	for (unsigned i = 0; i < n; i++)
		rp[i] = &reqs[i];
	T_RC(kvt_submit(q, rp, n), (int)n);
	free(rp);
}

/* Wait until n requests submitted on q have completed (each wait up to
 * 30 s); their statuses are the caller's to check. */
static inline void t_wait_all(struct kvt_queue *q, unsigned n)
{
	struct kvt_req **got = malloc((n ? n : 1) * sizeof(*got));
	T_ASSERT(got);
	for (unsigned done = 0; done < n;) {
		int k = kvt_queue_wait(q, got, n - done, 30000);
		T_ASSERT(k > 0);
		done += (unsigned)k;
	}
	free(got);
}

/* A batch: reqs[0..n) submitted at once on q, all waited for. */
static inline void t_run_batch(struct kvt_queue *q, struct kvt_req *reqs, unsigned n)
{
	t_submit_all(q, reqs, n);
	t_wait_all(q, n);
}

/* Key number i: 32 bytes derived from i. */
static inline struct kvt_key t_key(uint64_t i)
{
	struct kvt_key k;
	k.len = 32;
	t_fill(k.bytes, sizeof(k.bytes), i * 7919 + 17);
	memcpy(k.bytes, &i, sizeof(i));
	return k;
}

/* Put t_key(k) as one part of len bytes of t_fill(.., k): kvt_put's status. */
static inline int t_put_filled(struct kvt_store *s, uint32_t ns, uint64_t k, size_t len)
{
	char *buf = malloc(len ? len : 1);
	struct kvt_key key = t_key(k);
	struct iovec v = { buf, len };
	int r;
	T_ASSERT(buf);
	t_fill(buf, len, k);
	r = kvt_put(s, ns, &key, &v, 1);
	free(buf);
	return r;
}

/* Get t_key(k), put as len bytes of t_fill(.., k): KVT_OK with exactly
 * those bytes, or KVT_MISS; anything else fails the test. */
static inline int t_get_filled(struct kvt_store *s, uint32_t ns, uint64_t k, size_t len)
{
	char *buf = malloc(len + 10), *want = malloc(len);
	struct kvt_key key = t_key(k);
	uint64_t vl = 0;
	int r = kvt_get(s, ns, &key, buf, len + 10, &vl);
	if (r == KVT_OK) {
		T_EQ_U64(vl, len);
		t_fill(want, len, k);
		T_EQ_MEM(buf, want, len);
	} else if (r != KVT_MISS) {
		T_FAIL("get %llu: %s", (unsigned long long)k, kvt_strerror(r));
	}
	free(buf);
	free(want);
	return r;
}

/* Put t_key(k) as three parts of t_fill(.., k), len bytes in all (one
 * part if len < 3; part i is len/3 bytes at i*(len/3), the last takes
 * the rest): asserts KVT_OK.  (test_s3, test_shared.) */
static inline void t_put_thirds(struct kvt_store *s, uint32_t ns, uint64_t k, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	struct kvt_key key = t_key(k);
	T_ASSERT(b);
	t_fill(b, len, k);
	if (len >= 3) {
		struct iovec p[3] = { { b, len / 3 }, { b + len / 3, len / 3 },
				      { b + 2 * (len / 3), len - 2 * (len / 3) } };
		T_RC(kvt_put(s, ns, &key, p, 3), KVT_OK);
	} else {
		struct iovec p = { b, len };
		T_RC(kvt_put(s, ns, &key, &p, 1), KVT_OK);
	}
	free(b);
}

/* Get t_key(k), put as len bytes of t_fill(.., k), through a queue of its
 * own, waited for at most wait_ms: its status; on KVT_OK the bytes must
 * be exactly those and come from tier want_tier.  (test_s3, test_s3_g4,
 * test_shared.) */
static inline int t_get_tier(struct kvt_store *s, uint32_t ns, uint64_t k, size_t len,
			     uint32_t want_tier, int wait_ms)
{
	uint8_t *b = malloc(len + 1), *want = malloc(len ? len : 1);
	struct iovec io = { b, len + 1 };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = t_key(k), .iov = &io,
			     .iov_count = 1 };
	struct kvt_req *rp = &r, *done;
	struct kvt_queue *q;
	T_ASSERT(b && want);
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &done, 1, wait_ms), 1);
	if (r.status == KVT_OK) {
		T_EQ_U64(r.length, len);
		T_EQ_INT(r.tier, want_tier);
		t_fill(want, len, k);
		T_EQ_MEM(b, want, len);
	}
	T_OK(kvt_queue_destroy(q));
	free(b);
	free(want);
	return r.status;
}

#endif

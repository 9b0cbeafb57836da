/*
 * test_allocfail.c - fail the Nth allocation, for every N along every path
 * the store has (open, namespace registration and persistence, puts with
 * long keys and many parts, index growth, pins, delete, clear, close), and
 * check after each run that the store is consistent: every call failed
 * cleanly or did its job, everything reported stored reads back exactly,
 * nothing reported failed is visible, and no metadata byte leaks.
 */
#include <errno.h>
#include <stdlib.h>

#include "t.h"
#include "tstore.h"
#include <stdio.h>

#define NVAL 40

static uint64_t stat(struct kvt_store *s, const char *name)
{
	uint64_t v = 0;
	T_OK(kvt_store_stat(s, name, &v));
	return v;
}

static struct kvt_key key_of(int i)
{
	struct kvt_key k = t_key((uint64_t)i);
	if (i % 5 == 0)
		k.len = 40 + (uint32_t)(i % 24); /* long keys live out of line */
	return k;
}

static size_t len_of(int i)
{
	return 1000 + (size_t)i * 3001;
}

/* Ok(any >= 0 or want) or -ENOMEM; anything else fails the test. */
#define ALLOWED(call, want)                                                \
	({                                                                 \
		int a_r_ = (int)(call);                                    \
		if (a_r_ != (want) && a_r_ != -ENOMEM)                     \
			T_FAIL("%s: %d (%s)", #call, a_r_, kvt_strerror(a_r_)); \
		a_r_;                                                      \
	})

/* Returns the allocations the scenario made (when nothing failed). */
static uint64_t scenario(const char *dir, int64_t fail_at)
{
	struct kvt_store *s;
	char fail[32];
	uint32_t ns[2] = { 0, 0 };
	int stored[NVAL] = { 0 };
	char *buf = malloc(len_of(NVAL));
	int r;
	uint64_t allocs;

	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "path", dir));
	T_OK(kvt_store_set_option(s, "dram.capacity", "8M")); /* no eviction */
	T_OK(kvt_store_set_option(s, "dram.chunk", "4K"));
	T_OK(kvt_store_set_option(s, "dram.shards", "2"));
	T_OK(kvt_store_set_option(s, "dram.prefault", "off"));
	snprintf(fail, sizeof(fail), "%lld", (long long)fail_at);
	T_OK(kvt_store_set_option(s, "debug.fail_alloc", fail));
	r = kvt_store_open(s);
	if (r == -ENOMEM) {
		/* A failed open leaves a usable handle: open again works. */
		T_OK(kvt_store_set_option(s, "debug.fail_alloc", "0"));
		T_OK(kvt_store_open(s));
		kvt_store_destroy(s);
		free(buf);
		return 0;
	}
	T_OK(r);

	for (int i = 0; i < 2; i++) {
		struct kvt_ns_desc d = t_desc(i ? "allocfail-b" : "allocfail-a", 0);
		r = ALLOWED(kvt_ns_register(s, &d, &ns[i]), 0);
		if (r < 0)
			ns[i] = 0;
	}
	if (ns[0]) {
		for (int i = 0; i < NVAL; i++) {
			struct kvt_key k = key_of(i);
			size_t len = len_of(i);
			struct iovec parts[3];
			unsigned np = i % 3 == 0 ? 3 : 1;
			t_fill(buf, len, (uint64_t)i);
			parts[0].iov_base = buf;
			parts[0].iov_len = np == 3 ? 100 : len;
			parts[1].iov_base = buf + 100;
			parts[1].iov_len = 200;
			parts[2].iov_base = buf + 300;
			parts[2].iov_len = len - 300;
			r = ALLOWED(kvt_put(s, ns[0], &k, parts, np), KVT_OK);
			stored[i] = r == KVT_OK;
			if (!stored[i])
				T_RC(kvt_exists(s, ns[0], &k), KVT_MISS);
		}
		/* Pinned gets through a queue. */
		{
			struct kvt_queue *q;
			if (kvt_queue_create(s, &q) == 0) {
				for (int i = 0; i < 6; i++) {
					struct kvt_req req, *rp = &req, *got;
					memset(&req, 0, sizeof(req));
					req.op = KVT_OP_GET_PINNED;
					req.ns = ns[0];
					req.key = key_of(i);
					T_RC(kvt_submit(q, &rp, 1), 1);
					T_RC(kvt_queue_poll(q, &got, 1), 1);
					if (req.status == KVT_OK) {
						T_ASSERT(stored[i]);
						T_OK(kvt_pin_release(s, req.pin));
					} else if (req.status != -ENOMEM && req.status != KVT_MISS) {
						T_FAIL("pinned get: %s", kvt_strerror(req.status));
					}
				}
				T_OK(kvt_queue_destroy(q));
			}
		}
		for (int i = 0; i < NVAL; i += 7) {
			struct kvt_key k = key_of(i);
			T_RC(kvt_delete(s, ns[0], &k), stored[i] ? KVT_OK : KVT_MISS);
			stored[i] = 0;
		}
	}
	/* Consistency, with allocations working again. */
	T_OK(kvt_store_set_option(s, "debug.fail_alloc", "0"));
	if (ns[0]) {
		for (int i = 0; i < NVAL; i++) {
			struct kvt_key k = key_of(i);
			uint64_t vl = 0;
			char *want = malloc(len_of(i));
			r = kvt_get(s, ns[0], &k, buf, len_of(NVAL), &vl);
			if (stored[i]) {
				T_RC(r, KVT_OK);
				T_EQ_U64(vl, len_of(i));
				t_fill(want, len_of(i), (uint64_t)i);
				T_EQ_MEM(buf, want, len_of(i));
			} else {
				T_RC(r, KVT_MISS);
			}
			free(want);
		}
		T_OK(kvt_clear(s, KVT_NS_ALL));
		T_EQ_U64(stat(s, "dram.blocks"), 0);
		T_EQ_U64(stat(s, "dram.used_bytes"), 0);
		T_EQ_U64(stat(s, "store.pins_active"), 0);
	}
	allocs = stat(s, "mem.allocs");
	T_OK(kvt_store_close(s));
	kvt_store_destroy(s);

	/* Registered namespaces persisted exactly: a reopen finds them. */
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "path", dir));
	T_OK(kvt_store_set_option(s, "dram.capacity", "1M"));
	T_OK(kvt_store_open(s));
	for (int i = 0; i < 2; i++) {
		if (ns[i]) {
			struct kvt_ns_desc d = t_desc(i ? "allocfail-b" : "allocfail-a", 0);
			uint32_t id = 0;
			uint8_t dg[32];
			T_OK(kvt_ns_digest(&d, dg, NULL, 0));
			T_RC(kvt_ns_find(s, dg, &id), 0);
			T_EQ_INT(id, ns[i]);
		}
	}
	kvt_store_destroy(s);
	free(buf);
	return allocs;
}

/*
 * The same with the SSD tier (pread backend, write-through): allocation
 * failures land in the writer and I/O threads too.  Afterwards every block
 * reads back exactly or misses, and -- the point -- a delete that reported
 * success stays deleted across a restart.
 */
static uint64_t scenario_ssd(const char *dir, int64_t fail_at)
{
	struct kvt_store *s;
	char fail[32];
	uint32_t ns = 0;
	int deleted[NVAL] = { 0 };
	char *buf = malloc(len_of(NVAL));
	uint64_t allocs = 0;
	int r;

	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "path", dir));
	T_OK(kvt_store_set_option(s, "dram.capacity", "16M"));
	T_OK(kvt_store_set_option(s, "dram.chunk", "4K"));
	T_OK(kvt_store_set_option(s, "dram.prefault", "off"));
	T_OK(kvt_store_set_option(s, "ssd.capacity", "8M"));
	T_OK(kvt_store_set_option(s, "ssd.segment", "1M"));
	T_OK(kvt_store_set_option(s, "ssd.admission", "always"));
	T_OK(kvt_store_set_option(s, "ssd.io", "psync"));
	snprintf(fail, sizeof(fail), "%lld", (long long)fail_at);
	T_OK(kvt_store_set_option(s, "debug.fail_alloc", fail));
	r = kvt_store_open(s);
	if (r == -ENOMEM) {
		kvt_store_destroy(s);
		free(buf);
		return 0;
	}
	T_OK(r);
	{
		struct kvt_ns_desc d = t_desc("allocfail-ssd", 0);
		if (ALLOWED(kvt_ns_register(s, &d, &ns), 0) < 0)
			ns = 0;
	}
	if (ns) {
		for (int i = 0; i < NVAL; i++) {
			struct kvt_key k = key_of(i);
			struct iovec v = { buf, len_of(i) };
			t_fill(buf, len_of(i), (uint64_t)i);
			ALLOWED(kvt_put(s, ns, &k, &v, 1), KVT_OK);
		}
		ALLOWED(kvt_flush(s), 0);
		for (int i = 0; i < NVAL; i += 6) {
			struct kvt_key k = key_of(i);
			r = kvt_delete(s, ns, &k);
			if (r != KVT_OK && r != KVT_MISS && r != -ENOMEM)
				T_FAIL("delete: %s", kvt_strerror(r));
			deleted[i] = r == KVT_OK || r == KVT_MISS;
		}
	}
	T_OK(kvt_store_set_option(s, "debug.fail_alloc", "0"));
	allocs = 0;
	kvt_store_stat(s, "mem.allocs", &allocs);
	kvt_store_destroy(s);

	/* Reopen with allocation working: exact or missing, deletes hold. */
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "path", dir));
	T_OK(kvt_store_set_option(s, "dram.capacity", "16M"));
	T_OK(kvt_store_set_option(s, "dram.prefault", "off"));
	T_OK(kvt_store_set_option(s, "ssd.capacity", "8M"));
	T_OK(kvt_store_set_option(s, "ssd.segment", "1M"));
	T_OK(kvt_store_set_option(s, "ssd.io", "psync"));
	T_OK(kvt_store_open(s));
	if (ns) {
		struct kvt_ns_desc d = t_desc("allocfail-ssd", 0);
		uint32_t id;
		T_OK(kvt_ns_register(s, &d, &id));
		T_EQ_INT(id, ns);
		for (int i = 0; i < NVAL; i++) {
			struct kvt_key k = key_of(i);
			uint64_t vl = 0;
			r = kvt_get(s, ns, &k, buf, len_of(NVAL), &vl);
			if (deleted[i])
				T_RC(r, KVT_MISS);
			if (r == KVT_OK) {
				char *want = malloc(len_of(i));
				t_fill(want, len_of(i), (uint64_t)i);
				T_EQ_U64(vl, len_of(i));
				T_EQ_MEM(buf, want, len_of(i));
				free(want);
			} else {
				T_RC(r, KVT_MISS);
			}
		}
	}
	kvt_store_destroy(s);
	free(buf);
	return allocs;
}

int main(void)
{
	uint64_t total;
	char *dir = t_mkdtemp();

	total = scenario(dir, 0);
	T_ASSERT(total > 20);
	fprintf(stderr, "scenario makes %llu allocations; failing each in turn\n",
		(unsigned long long)total);
	for (int64_t n = 1; n <= (int64_t)total + 1; n++) {
		char *d = t_mkdtemp();
		scenario(d, n);
		t_rmtree(d);
		free(d);
	}
	t_rmtree(dir);
	free(dir);

	/* With the SSD tier: every N up to 400, then every 7th up to the total
	 * (the threads make the exact count vary from run to run). */
	dir = t_mkdtemp();
	total = scenario_ssd(dir, 0);
	t_rmtree(dir);
	free(dir);
	T_ASSERT(total > 20);
	fprintf(stderr, "ssd scenario makes about %llu allocations; failing each in turn\n",
		(unsigned long long)total);
	for (int64_t n = 1; n <= (int64_t)total + 20; n += n < 400 ? 1 : 7) {
		char *d = t_mkdtemp();
		scenario_ssd(d, n);
		t_rmtree(d);
		free(d);
	}
	return 0;
}

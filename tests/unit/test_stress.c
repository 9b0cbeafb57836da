/*
 * test_stress.c - many threads on one store: put, get, pinned get (held
 * while other threads evict), delete, clear and lookup, with a DRAM tier
 * small enough that eviction runs all the time.  Every byte any thread
 * reads must equal the bytes written under that key (values are derived
 * from the key), every status must be one the contract allows, and the
 * accounting must add up at the end.  Meant to run under TSan too.
 *
 * KVT_STRESS_OPS sets the operations per thread (default 20000).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "t.h"
#include "tstore.h"

#define THREADS 6
#define KEYS 400
#define MAXLEN (96 * 1024)

struct ctx {
	struct kvt_store *s;
	uint32_t ns;
	int ops;
	_Atomic uint64_t gets_ok, pins_ok, puts_ok, bad;
};

static size_t len_of(uint64_t k)
{
	return 1 + (size_t)((k * 2654435761u) % MAXLEN);
}

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *worker(void *arg)
{
	struct ctx *c = arg;
	struct kvt_queue *q;
	char *buf = malloc(MAXLEN), *want = malloc(MAXLEN);
	uint64_t x = (uint64_t)(uintptr_t)&q | 1;
	struct kvt_req held;
	int holding = 0;

	T_OK(kvt_queue_create(c->s, &q));
	memset(&held, 0, sizeof(held));
	for (int i = 0; i < c->ops; i++) {
		uint64_t k = xs(&x) % KEYS, op = xs(&x) % 100;
		struct kvt_key key = t_key(k);
		size_t len = len_of(k);
		int r;

		if (op < 35) {
			struct iovec v = { buf, len };
			t_fill(buf, len, k);
			r = kvt_put(c->s, c->ns, &key, &v, 1);
			if (r == KVT_OK)
				c->puts_ok++;
			else if (r != KVT_EXISTS && r != -ECANCELED && r != KVT_EFULL)
				T_FAIL("put: %s", kvt_strerror(r));
		} else if (op < 70) {
			uint64_t vl = 0;
			r = kvt_get(c->s, c->ns, &key, buf, MAXLEN, &vl);
			if (r == KVT_OK) {
				t_fill(want, len, k);
				if (vl != len || memcmp(buf, want, len))
					c->bad++;
				c->gets_ok++;
			} else if (r != KVT_MISS) {
				T_FAIL("get: %s", kvt_strerror(r));
			}
		} else if (op < 85) {
			/* Pinned get, held until the next pinned get. */
			struct kvt_req r2, *rp = &r2, *got;
			if (holding) {
				T_OK(kvt_pin_release(c->s, held.pin));
				holding = 0;
			}
			memset(&r2, 0, sizeof(r2));
			r2.op = KVT_OP_GET_PINNED;
			r2.ns = c->ns;
			r2.key = key;
			T_RC(kvt_submit(q, &rp, 1), 1);
			T_RC(kvt_queue_poll(q, &got, 1), 1);
			if (r2.status == KVT_OK) {
				size_t off = 0;
				t_fill(want, len, k);
				if (r2.length != len)
					c->bad++;
				for (uint32_t j = 0; j < r2.view_count; j++) {
					if (memcmp(r2.view[j].iov_base, want + off, r2.view[j].iov_len))
						c->bad++;
					off += r2.view[j].iov_len;
				}
				c->pins_ok++;
				held = r2;
				holding = 1;
			} else if (r2.status != KVT_MISS) {
				T_FAIL("pin: %s", kvt_strerror(r2.status));
			}
		} else if (op < 95) {
			r = kvt_delete(c->s, c->ns, &key);
			if (r != KVT_OK && r != KVT_MISS)
				T_FAIL("delete: %s", kvt_strerror(r));
		} else if (op < 99) {
			struct kvt_key keys[8];
			for (int j = 0; j < 8; j++)
				keys[j] = t_key((k + (uint64_t)j) % KEYS);
			T_GE_INT(kvt_lookup_prefix(c->s, c->ns, keys, 8, NULL), 0);
		} else {
			if (xs(&x) % 20 == 0)
				T_GE_INT(kvt_clear(c->s, c->ns), 0);
		}
		/* A held pin's bytes never change under us. */
		if (holding && (i & 63) == 0) {
			uint64_t hk;
			size_t off = 0;
			memcpy(&hk, held.key.bytes, sizeof(hk));
			t_fill(want, len_of(hk), hk);
			for (uint32_t j = 0; j < held.view_count; j++) {
				if (memcmp(held.view[j].iov_base, want + off, held.view[j].iov_len))
					c->bad++;
				off += held.view[j].iov_len;
			}
		}
	}
	if (holding)
		T_OK(kvt_pin_release(c->s, held.pin));
	T_OK(kvt_queue_destroy(q));
	free(buf);
	free(want);
	return NULL;
}

static void run(const char *policy, int ops)
{
	struct ctx c = { 0 };
	pthread_t th[THREADS];
	uint64_t blocks = 0, used = 0, pins = 0, dead = 0, evictions = 0;

	/* 6 MiB for ~20 MiB of distinct values: eviction is constant. */
	c.s = t_store_open("dram.capacity", "6M", "dram.chunk", "4K", "dram.shards", "3",
			   "dram.policy", policy, "workers", "2", NULL);
	c.ns = t_ns(c.s, "stress");
	c.ops = ops;
	for (int i = 0; i < THREADS; i++)
		T_EQ_INT(pthread_create(&th[i], NULL, worker, &c), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	T_OK(kvt_flush(c.s));
	T_OK(kvt_store_stat(c.s, "dram.blocks", &blocks));
	T_OK(kvt_store_stat(c.s, "dram.used_bytes", &used));
	T_OK(kvt_store_stat(c.s, "store.pins_active", &pins));
	T_OK(kvt_store_stat(c.s, "dram.dead_pending", &dead));
	T_OK(kvt_store_stat(c.s, "dram.evictions", &evictions));
	fprintf(stderr,
		"%s: %d threads x %d ops: %llu puts, %llu gets, %llu pins ok; %llu evictions; "
		"%llu blocks left\n",
		policy, THREADS, ops, (unsigned long long)c.puts_ok,
		(unsigned long long)c.gets_ok, (unsigned long long)c.pins_ok,
		(unsigned long long)evictions, (unsigned long long)blocks);
	T_EQ_U64(c.bad, 0);
	T_EQ_U64(pins, 0);
	T_EQ_U64(dead, 0);
	T_ASSERT(evictions > 0);
	T_ASSERT(c.gets_ok > 0 && c.pins_ok > 0);
	T_LE_INT(used, 6 << 20);
	/* Everything left is readable and exact. */
	{
		char *buf = malloc(MAXLEN), *want = malloc(MAXLEN);
		uint64_t found = 0;
		for (uint64_t k = 0; k < KEYS; k++) {
			struct kvt_key key = t_key(k);
			int r = kvt_get(c.s, c.ns, &key, buf, MAXLEN, NULL);
			if (r == KVT_OK) {
				t_fill(want, len_of(k), k);
				T_EQ_MEM(buf, want, len_of(k));
				found++;
			}
		}
		T_EQ_U64(found, blocks);
		T_EQ_U64(kvt_clear(c.s, KVT_NS_ALL), blocks);
		T_OK(kvt_store_stat(c.s, "dram.used_bytes", &used));
		T_EQ_U64(used, 0);
		free(buf);
		free(want);
	}
	kvt_store_destroy(c.s);
}

int main(void)
{
	const char *e = getenv("KVT_STRESS_OPS");
	int ops = e ? atoi(e) : 20000;
	run("s3fifo", ops);
	run("lru", ops / 2);
	return 0;
}

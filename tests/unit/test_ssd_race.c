/*
 * test_ssd_race.c - gets racing a promotion of the same SSD-resident
 * block: a prefetch and two readers (in opposite key orders) start
 * together on a store whose blocks are only on SSD.  Every get must be a
 * hit with the exact bytes: a get that finds the block's promotion in
 * flight (reserved in DRAM, not yet published) joins it (ssd_promote's
 * single flight) instead of answering a miss for a block that is on SSD
 * and on its way.  Both I/O backends.  Again as DRAM's victim tier
 * (ssd.first_hit=cold): a reader's first read of a block leaves a cold
 * DRAM copy while the other reader and the prefetch read the same block:
 * still every get a hit with the exact bytes, each block read once.
 */
#include <pthread.h>
#include <stdlib.h>

#include "kvt_int.h"
#include "t.h"
#include "tstore.h"

#define KEYS 23
#define PART (64 * 1024)
#define ROUNDS 8

static const char *io_backend = "uring";
static const char *admission = "always"; /* of the rounds; the puts: always */

static struct kvt_store *open_store(const char *dir, const char *adm)
{
	return t_store_open("path", dir, "dram.capacity", "64M", "dram.prefault", "off",
			    "ssd.capacity", "64M", "ssd.segment", "4M", "ssd.admission", adm,
			    "ssd.io", io_backend, NULL);
}

struct race {
	struct kvt_store *s;
	uint32_t ns;
	pthread_barrier_t go;
	int misses[2];
	uint64_t prefetched;
};

static void *prefetcher(void *arg)
{
	struct race *rc = arg;
	struct kvt_key keys[KEYS];
	struct kvt_queue *q;
	struct kvt_req r, *rp = &r, *got;
	for (uint64_t k = 0; k < KEYS; k++)
		keys[k] = t_key(k);
	T_OK(kvt_queue_create(rc->s, &q));
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_PREFETCH;
	r.ns = rc->ns;
	r.keys = keys;
	r.key_count = KEYS;
	pthread_barrier_wait(&rc->go);
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
	T_RC(r.status, KVT_OK);
	rc->prefetched = r.length;
	T_OK(kvt_queue_destroy(q));
	return NULL;
}

struct reader {
	struct race *rc;
	int dir; /* 0: keys in order, 1: reversed */
};

static void *reader(void *arg)
{
	struct reader *rd = arg;
	struct race *rc = rd->rc;
	char *buf = malloc(2 * PART + 16), *want = malloc(2 * PART);
	pthread_barrier_wait(&rc->go);
	for (uint64_t i = 0; i < KEYS; i++) {
		uint64_t k = rd->dir ? KEYS - 1 - i : i, vl = 0;
		struct kvt_key key = t_key(k);
		int r = kvt_get(rc->s, rc->ns, &key, buf, 2 * PART + 16, &vl);
		if (r != KVT_OK) {
			rc->misses[rd->dir]++;
			continue;
		}
		T_EQ_U64(vl, 2 * PART);
		t_fill(want, 2 * PART, k);
		T_EQ_MEM(buf, want, 2 * PART);
	}
	free(buf);
	free(want);
	return NULL;
}

static void test_race(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_store(dir, "always");
	uint32_t ns = t_ns(s, "race");
	char *buf = malloc(2 * PART);
	int misses = 0;

	for (uint64_t k = 0; k < KEYS; k++) {
		struct kvt_key key = t_key(k);
		struct iovec v[2] = { { buf, PART }, { buf + PART, PART } };
		t_fill(buf, 2 * PART, k);
		T_RC(kvt_put(s, ns, &key, v, 2), KVT_OK);
	}
	T_OK(kvt_flush(s));
	kvt_store_destroy(s);
	for (int round = 0; round < ROUNDS; round++) {
		struct race rc = { 0 };
		struct reader rd[2] = { { &rc, 0 }, { &rc, 1 } };
		pthread_t th[3];
		rc.s = open_store(dir, admission);
		rc.ns = t_ns(rc.s, "race");
		T_EQ_U64(t_stat(rc.s, "dram.blocks"), 0); /* everything on SSD only */
		pthread_barrier_init(&rc.go, NULL, 3);
		T_EQ_INT(pthread_create(&th[0], NULL, prefetcher, &rc), 0);
		T_EQ_INT(pthread_create(&th[1], NULL, reader, &rd[0]), 0);
		T_EQ_INT(pthread_create(&th[2], NULL, reader, &rd[1]), 0);
		for (int i = 0; i < 3; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&rc.go);
		misses += rc.misses[0] + rc.misses[1];
		/* Each block was read from SSD once, whoever asked first. */
		T_EQ_U64(t_stat(rc.s, "ssd.reads"), KEYS);
		T_EQ_U64(t_stat(rc.s, "dram.blocks"), KEYS);
		kvt_store_destroy(rc.s);
	}
	if (misses)
		T_FAIL("%s, %s: %d of %d gets racing a promotion missed", io_backend, admission,
		       misses, ROUNDS * 2 * KEYS);
	free(buf);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	const char *only = getenv("KVT_TEST_IO");
	const char *backends[2] = { "uring", "psync" };
	for (int b = 0; b < 2; b++) {
		if (only && strcmp(only, backends[b]))
			continue;
		io_backend = backends[b];
		admission = "always";
		test_race();
		admission = "victim";
		test_race();
	}
	return 0;
}

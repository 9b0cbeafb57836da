/*
 * test_room.c - KVT_OP_ROOM and KVT_F_NOWAIT (kvtier.h): a persistent
 * namespace's wait for SSD write-down room with no thread blocked.  With
 * the writer held and the backlog full: a reservation or put with
 * KVT_F_NOWAIT says KVT_EWAIT at once, counting nothing; KVT_OP_ROOM
 * returns from kvt_submit at once and completes through the queue's
 * eventfd -- KVT_EFULL after ssd.writedown_wait_ms (a counted timeout),
 * or KVT_OK once the writer is released -- in order; other namespaces get
 * KVT_OK inline.
 */
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "ssd.h"
#include "store_int.h"
#include "t.h"
#include "tstore.h"

static struct ssd *ssd_of(struct kvt_store *s)
{
	for (unsigned i = 0; i < s->tier_count; i++)
		if (s->tiers[i].ops == &tier_ssd_ops)
			return s->tiers[i].t;
	T_FAIL("no ssd tier");
	return NULL;
}

static int put_64k(struct kvt_store *s, uint32_t ns, uint64_t k, uint32_t flags)
{
	static char buf[65536];
	struct kvt_key key = t_key(k);
	struct iovec v = { buf, sizeof buf };
	struct kvt_queue *q;
	struct kvt_req r = { .op = KVT_OP_PUT, .flags = flags, .ns = ns, .key = key,
			     .iov = &v, .iov_count = 1 }, *rp = &r, *got;
	t_fill(buf, sizeof buf, k);
	T_OK(kvt_queue_create(s, &q));
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	T_EQ_INT(kvt_queue_wait(q, &got, 1, -1), 1);
	T_OK(kvt_queue_destroy(q));
	return r.status;
}

/* The next completion of q within ms: the request, or NULL. */
static struct kvt_req *wait_one(struct kvt_queue *q, int ms)
{
	struct kvt_req *got = NULL;
	uint64_t end = t_now_ms() + (uint64_t)ms;
	for (;;) {
		struct pollfd pf = { .fd = kvt_queue_fd(q), .events = POLLIN };
		uint64_t now = t_now_ms();
		if (kvt_queue_poll(q, &got, 1) == 1)
			return got;
		if (now >= end)
			return NULL;
		poll(&pf, 1, (int)(end - now));
	}
}

struct release {
	struct ssd *ssd;
	unsigned ms;
};

static void *release_later(void *arg)
{
	struct release *h = arg;
	usleep(h->ms * 1000u);
	ssd_hold_writes(h->ssd, false);
	return NULL;
}

int main(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
					   "dram.prefault", "off", "ssd.capacity", "16M",
					   "ssd.segment", "1M", "ssd.writedown_max", "1M",
					   "ssd.writedown_wait_ms", "600", NULL);
	struct kvt_ns_desc d = t_desc("room", 0);
	uint32_t pns, ons;
	struct kvt_queue *q;
	struct kvt_req r1 = { .op = KVT_OP_ROOM, .len = 65536 }, r2, *rp, *got;
	struct kvt_reservation res;
	uint64_t lens[1] = { 65536 }, t0;
	struct release h;
	pthread_t th;
	struct kvt_key k;

	d.flags = KVT_NS_PERSISTENT;
	T_OK(kvt_ns_register(s, &d, &pns));
	d = t_desc("room-other", 0);
	T_OK(kvt_ns_register(s, &d, &ons));
	h = (struct release){ ssd_of(s), 150 };
	T_OK(kvt_queue_create(s, &q));

	/* Room: NOWAIT puts go in, and ROOM is OK inline. */
	T_RC(put_64k(s, pns, 100, KVT_F_NOWAIT), KVT_OK);
	r1.ns = pns;
	rp = &r1;
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	T_ASSERT(wait_one(q, 0) == &r1);
	T_RC(r1.status, KVT_OK);

	/* The backlog full (the writer held), from empty. */
	T_OK(kvt_flush(s));
	ssd_hold_writes(h.ssd, true);
	for (uint64_t i = 0; i < 16; i++)
		T_RC(put_64k(s, pns, i, 0), KVT_OK);
	t0 = t_now_ms();
	k = t_key(16);
	T_RC(kvt_put_reserve(s, pns, &k, lens, 1, KVT_F_NOWAIT, &res), KVT_EWAIT);
	T_RC(put_64k(s, pns, 16, KVT_F_NOWAIT), KVT_EWAIT);
	T_LE_INT((long long)(t_now_ms() - t0), 200);
	T_EQ_U64(t_stat(s, "ssd.writedown_put_waits"), 0);
	/* Another namespace never waits. */
	r2 = (struct kvt_req){ .op = KVT_OP_ROOM, .ns = ons, .len = 65536 };
	rp = &r2;
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	T_ASSERT(wait_one(q, 0) == &r2);
	T_RC(r2.status, KVT_OK);

	/* ROOM does not block the submitter; it fails after the bound. */
	r1 = (struct kvt_req){ .op = KVT_OP_ROOM, .ns = pns, .len = 65536 };
	rp = &r1;
	t0 = t_now_ms();
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	T_LE_INT((long long)(t_now_ms() - t0), 200);
	T_ASSERT(wait_one(q, 300) == NULL); /* still waiting */
	got = wait_one(q, 3000);
	T_ASSERT(got == &r1);
	T_RC(r1.status, KVT_EFULL);
	T_GE_INT((long long)(t_now_ms() - t0), 550);
	T_LE_INT((long long)(t_now_ms() - t0), 2500);
	T_EQ_U64(t_stat(s, "ssd.writedown_put_waits"), 1);
	T_EQ_U64(t_stat(s, "ssd.writedown_put_timeouts"), 1);

	/* Two wait; the writer is released 150 ms in: both OK, in order,
	 * and the put then goes in without waiting. */
	r1 = (struct kvt_req){ .op = KVT_OP_ROOM, .ns = pns, .len = 65536 };
	r2 = r1;
	t0 = t_now_ms();
	rp = &r1;
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	rp = &r2;
	T_EQ_INT(kvt_submit(q, &rp, 1), 1);
	T_ASSERT(pthread_create(&th, NULL, release_later, &h) == 0);
	T_ASSERT(wait_one(q, 3000) == &r1);
	T_ASSERT(wait_one(q, 3000) == &r2);
	pthread_join(th, NULL);
	T_RC(r1.status, KVT_OK);
	T_RC(r2.status, KVT_OK);
	T_GE_INT((long long)(t_now_ms() - t0), 140);
	T_LE_INT((long long)(t_now_ms() - t0), 550); /* before the bound */
	T_EQ_U64(t_stat(s, "ssd.writedown_put_waits"), 3);
	T_EQ_U64(t_stat(s, "ssd.writedown_put_timeouts"), 1);
	T_RC(put_64k(s, pns, 16, KVT_F_NOWAIT), KVT_OK);

	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
	return 0;
}

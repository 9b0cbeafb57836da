/*
 * test_store.c - the store handle and the request machinery: lifecycle and
 * options, batches through a queue with per-item status, the eventfd,
 * deferred work, cancellation, the flush barrier, close with work in
 * flight, the log callback, fork, and every kind of bad input getting its
 * own error code while the store stays consistent.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "tstore.h"

static void test_lifecycle_options(void)
{
	struct kvt_store *s;
	char v[4] = "abc";
	struct iovec iov = { v, 3 };
	struct kvt_key k = t_key(1);

	T_RC(kvt_store_create(NULL), KVT_ENULL);
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "no.such.option", "1"), KVT_EOPTION);
	T_RC(kvt_store_set_option(s, "dram.capacity", "12X"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "dram.capacity", "-1"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "dram.capacity", ""), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "dram.chunk", "3000"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "dram.chunk", "4M"), KVT_EOPTVAL);
	/* ssd.segment: whole 4 KiB pages (the tier's largest I/O alignment),
	 * at least 1 MiB; until 2026-12-05 whole MiB only. */
	T_OK(kvt_store_set_option(s, "ssd.segment", "8433664")); /* 2059 pages */
	T_OK(kvt_store_set_option(s, "ssd.segment", "1M"));
	T_RC(kvt_store_set_option(s, "ssd.segment", "8433665"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "ssd.segment", "8432664"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "ssd.segment", "1044480"), KVT_EOPTVAL); /* 255 pages */
	T_RC(kvt_store_set_option(s, "dram.policy", "fifo"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "dram.hugepages", "maybe"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "workers", "0"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "workers", "65"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, NULL, "1"), KVT_ENULL);
	T_RC(kvt_store_set_option(NULL, "workers", "1"), KVT_ENULL);
	T_OK(kvt_store_set_option(s, "dram.capacity", "8MiB"));
	T_OK(kvt_store_set_option(s, "workers", "3"));
	/* Not open yet: every data call says so. */
	T_RC(kvt_put(s, 1, &k, &iov, 1), KVT_ECLOSED);
	T_RC(kvt_store_close(s), KVT_ECLOSED);
	T_OK(kvt_store_open(s));
	T_RC(kvt_store_open(s), KVT_ESTATE);
	T_RC(kvt_store_set_option(s, "dram.capacity", "16M"), KVT_ESTATE);
	T_RC(kvt_store_set_log(s, NULL, NULL, 0), KVT_ESTATE);
	{
		uint64_t w = 0, cap = 0;
		T_OK(kvt_store_stat(s, "store.workers", &w));
		T_EQ_U64(w, 3);
		T_OK(kvt_store_stat(s, "dram.capacity_bytes", &cap));
		T_EQ_U64(cap, 8 << 20);
		T_RC(kvt_store_stat(s, "no.such.stat", &w), KVT_MISS);
		T_RC(kvt_store_stat(s, "dram.policy", &w), KVT_MISS); /* text, not numeric */
	}
	T_OK(kvt_store_close(s));
	/* Use after close: a distinct error, not a crash. */
	T_RC(kvt_store_close(s), KVT_ECLOSED);
	T_RC(kvt_put(s, 1, &k, &iov, 1), KVT_ECLOSED);
	T_RC(kvt_exists(s, 1, &k), KVT_ECLOSED);
	T_RC(kvt_clear(s, KVT_NS_ALL), KVT_ECLOSED);
	T_RC(kvt_flush(s), KVT_ECLOSED);
	{
		struct kvt_queue *q;
		struct kvt_ns_desc d = t_desc("m", 0);
		uint32_t id;
		T_RC(kvt_queue_create(s, &q), KVT_ECLOSED);
		T_RC(kvt_ns_register(s, &d, &id), KVT_ECLOSED);
	}
	kvt_store_destroy(s);
	kvt_store_destroy(NULL);

	/* Several stores in one process share nothing. */
	{
		struct kvt_store *a = t_store_open("dram.capacity", "4M", NULL);
		struct kvt_store *b = t_store_open("dram.capacity", "4M", NULL);
		uint32_t na = t_ns(a, "two"), nb = t_ns(b, "two");
		char got[4];
		T_OK(kvt_put(a, na, &k, &iov, 1));
		T_RC(kvt_exists(b, nb, &k), KVT_MISS);
		T_RC(kvt_get(a, na, &k, got, sizeof(got), NULL), KVT_OK);
		kvt_store_destroy(a);
		T_RC(kvt_exists(b, nb, &k), KVT_MISS);
		kvt_store_destroy(b);
	}
	/* A store with no tiers opens, and every get is a miss. */
	{
		struct kvt_store *z = t_store_open("dram.capacity", "0", NULL);
		uint32_t nz = t_ns(z, "none");
		char got[4];
		T_RC(kvt_put(z, nz, &k, &iov, 1), KVT_ETOOBIG);
		T_RC(kvt_get(z, nz, &k, got, 4, NULL), KVT_MISS);
		T_RC(kvt_lookup_prefix(z, nz, &k, 1, NULL), 0);
		kvt_store_destroy(z);
	}
}

static void test_batches(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", NULL);
	uint32_t ns = t_ns(s, "batch");
	struct kvt_queue *q;
	enum { N = 64 };
	struct kvt_req reqs[N], *rp[N], *got[N];
	char vals[N][100], dst[N][100];
	struct iovec src[N], out[N];
	struct pollfd pfd;
	int fd;

	T_OK(kvt_queue_create(s, &q));
	fd = kvt_queue_fd(q);
	T_GE_INT(fd, 0);
	/* Nothing done: the eventfd is not readable. */
	pfd.fd = fd; pfd.events = POLLIN;
	T_EQ_INT(poll(&pfd, 1, 0), 0);

	memset(reqs, 0, sizeof(reqs));
	for (int i = 0; i < N; i++) {
		t_fill(vals[i], 100, (uint64_t)i);
		src[i].iov_base = vals[i];
		src[i].iov_len = 100;
		reqs[i].op = KVT_OP_PUT;
		reqs[i].ns = ns;
		reqs[i].key = t_key((uint64_t)(i % 60)); /* 4 duplicates: EXISTS */
		reqs[i].iov = &src[i];
		reqs[i].iov_count = 1;
		reqs[i].user_data = (uint64_t)i;
		rp[i] = &reqs[i];
	}
	T_RC(kvt_queue_set_flags(q, 0x80), KVT_EBADOP);
	T_RC(kvt_queue_set_flags(NULL, 0), KVT_ENULL);
	T_RC(kvt_submit(q, rp, N), N);
	T_EQ_INT(kvt_queue_inflight(q), N);
	T_EQ_INT(poll(&pfd, 1, 0), 1);
	/* A request in flight cannot be submitted again. */
	T_RC(kvt_submit(q, rp, 1), KVT_EBUSY);
	{
		int n = 0, exists = 0;
		while (n < N) {
			int k = kvt_queue_poll(q, got + n, 10);
			T_GE_INT(k, 1);
			n += k;
		}
		T_EQ_INT(kvt_queue_poll(q, got, N), 0);
		T_EQ_INT(kvt_queue_inflight(q), 0);
		T_EQ_INT(poll(&pfd, 1, 0), 0);
		for (int i = 0; i < N; i++) {
			T_EQ_U64(got[i]->user_data, (uint64_t)(got[i] - reqs));
			if (got[i]->status == KVT_EXISTS)
				exists++;
			else
				T_RC(got[i]->status, KVT_OK);
		}
		T_EQ_INT(exists, 4);
	}
	/* A batch of gets of mixed outcome, each with its own status. */
	memset(reqs, 0, sizeof(reqs));
	for (int i = 0; i < N; i++) {
		out[i].iov_base = dst[i];
		out[i].iov_len = 100;
		reqs[i].op = KVT_OP_GET;
		reqs[i].ns = ns;
		reqs[i].key = t_key((uint64_t)i); /* 60..63 were never put */
		reqs[i].iov = &out[i];
		reqs[i].iov_count = 1;
	}
	T_RC(kvt_submit(q, rp, N), N);
	T_RC(kvt_queue_wait(q, got, N, 1000), N);
	for (int i = 0; i < N; i++) {
		if (i < 60) {
			T_RC(reqs[i].status, KVT_OK);
			T_EQ_MEM(dst[i], vals[i], 100);
		} else {
			T_RC(reqs[i].status, KVT_MISS);
		}
	}
	/* Deferred requests run on a worker and complete through the fd. */
	memset(reqs, 0, sizeof(reqs));
	for (int i = 0; i < 8; i++) {
		reqs[i].op = KVT_OP_EXISTS;
		reqs[i].flags = KVT_F_DEFER;
		reqs[i].ns = ns;
		reqs[i].key = t_key((uint64_t)i * 10);
	}
	T_RC(kvt_submit(q, rp, 8), 8);
	{
		int n = 0;
		while (n < 8) {
			T_EQ_INT(poll(&pfd, 1, 5000), 1);
			n += kvt_queue_poll(q, got + n, N);
		}
		for (int i = 0; i < 8; i++)
			T_RC(reqs[i].status, i * 10 < 60 ? KVT_OK : KVT_MISS);
	}
	/* KVT_QUEUE_POLL_AFTER_SUBMIT: inline completions are on the done
	 * list without making the fd readable; deferred ones still ring. */
	T_OK(kvt_queue_set_flags(q, KVT_QUEUE_POLL_AFTER_SUBMIT));
	for (int i = 0; i < 8; i++)
		reqs[i].flags = 0;
	T_RC(kvt_submit(q, rp, 8), 8);
	T_EQ_INT(poll(&pfd, 1, 0), 0);
	T_RC(kvt_queue_poll(q, got, N), 8);
	for (int i = 0; i < 8; i++)
		reqs[i].flags = i < 4 ? 0 : KVT_F_DEFER;
	T_RC(kvt_submit(q, rp, 8), 8);
	{
		int n = kvt_queue_poll(q, got, N);
		T_GE_INT(n, 4);
		while (n < 8) {
			T_EQ_INT(poll(&pfd, 1, 5000), 1);
			n += kvt_queue_poll(q, got + n, N);
		}
		for (int i = 0; i < 8; i++)
			T_RC(reqs[i].status, i * 10 < 60 ? KVT_OK : KVT_MISS);
	}
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
}

static void test_cancel_flush_close(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", "workers", "2", NULL);
	uint32_t ns = t_ns(s, "cancel");
	struct kvt_queue *q;
	struct kvt_req reqs[6], *rp[6], *got[6];
	char v[1000];
	struct iovec iov = { v, sizeof(v) };

	T_OK(kvt_queue_create(s, &q));
	T_OK(kvt_store_set_option(s, "debug.pause_workers", "1"));
	memset(reqs, 0, sizeof(reqs));
	for (int i = 0; i < 4; i++) {
		reqs[i].op = KVT_OP_PUT;
		reqs[i].flags = KVT_F_DEFER;
		reqs[i].ns = ns;
		reqs[i].key = t_key((uint64_t)i);
		reqs[i].iov = &iov;
		reqs[i].iov_count = 1;
		rp[i] = &reqs[i];
	}
	reqs[4].op = KVT_OP_FLUSH;
	rp[4] = &reqs[4];
	T_RC(kvt_submit(q, rp, 5), 5);
	/* Paused: nothing completes; cancel two of them. */
	T_EQ_INT(kvt_queue_poll(q, got, 6), 0);
	T_RC(kvt_cancel(q, &reqs[1]), 0);
	T_RC(kvt_cancel(q, &reqs[3]), 0);
	T_RC(kvt_cancel(q, &reqs[3]), -ENOENT); /* already completed */
	T_RC(kvt_queue_poll(q, got, 6), 2);
	T_RC(got[0]->status, -ECANCELED);
	T_RC(got[1]->status, -ECANCELED);
	/* The queue cannot go while requests are in flight. */
	T_RC(kvt_queue_destroy(q), KVT_EBUSY);
	/* Resume: the two puts land, then the flush completes after them. */
	T_OK(kvt_store_set_option(s, "debug.pause_workers", "0"));
	{
		int n = 0;
		while (n < 3)
			n += kvt_queue_wait(q, got + n, 6 - (unsigned)n, 5000);
		T_RC(reqs[0].status, KVT_OK);
		T_RC(reqs[2].status, KVT_OK);
		T_RC(reqs[4].status, KVT_OK);
		/* FIFO and the barrier: the flush is the last to complete. */
		T_ASSERT(got[2] == &reqs[4]);
	}
	{
		struct kvt_key k1 = t_key(1), k2 = t_key(2);
		T_RC(kvt_exists(s, ns, &k1), KVT_MISS);
		T_RC(kvt_exists(s, ns, &k2), KVT_OK);
	}
	T_RC(kvt_cancel(q, &reqs[0]), -ENOENT);
	T_OK(kvt_flush(s));

	/* Close with deferred work still queued: it completes -ECANCELED and
	 * can be collected after close. */
	T_OK(kvt_store_set_option(s, "debug.pause_workers", "1"));
	memset(reqs, 0, sizeof(reqs));
	for (int i = 0; i < 3; i++) {
		reqs[i].op = KVT_OP_DELETE;
		reqs[i].flags = KVT_F_DEFER;
		reqs[i].ns = ns;
		reqs[i].key = t_key((uint64_t)i);
		rp[i] = &reqs[i];
	}
	T_RC(kvt_submit(q, rp, 3), 3);
	T_OK(kvt_store_close(s));
	T_RC(kvt_queue_poll(q, got, 6), 3);
	for (int i = 0; i < 3; i++)
		T_RC(reqs[i].status, -ECANCELED);
	T_RC(kvt_submit(q, rp, 1), KVT_ECLOSED);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
}

static void test_bad_input(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "4M", NULL);
	uint32_t ns = t_ns(s, "bad");
	struct kvt_queue *q;
	struct kvt_req r, r2, *rp[2] = { &r, &r2 }, *got[2];
	char v[8] = "1234567";
	struct iovec iov = { v, 8 }, zero = { v, 0 }, nul = { NULL, 8 };
	struct kvt_key k = t_key(1), empty = { 0 }, toolong = t_key(2);
	toolong.len = 65;

	T_OK(kvt_queue_create(s, &q));
#define SUBMIT_RC(want)                                                  \
	do {                                                             \
		T_RC(kvt_submit(q, rp, 1), want);                        \
		T_EQ_INT(kvt_queue_inflight(q), 0);                      \
	} while (0)
	/* Each malformed request: its own code, nothing submitted. */
	memset(&r, 0, sizeof(r));
	r.op = 0;
	SUBMIT_RC(KVT_EBADOP);
	r.op = 99;
	SUBMIT_RC(KVT_EBADOP);
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_PUT; r.ns = ns; r.key = k; r.iov = &iov; r.iov_count = 1;
	r.flags = 0x8000;
	SUBMIT_RC(KVT_EBADOP);
	r.flags = KVT_F_PART; /* a get flag on a put */
	SUBMIT_RC(KVT_EBADOP);
	r.flags = KVT_F_ERRORS; /* an exists flag on a put */
	SUBMIT_RC(KVT_EBADOP);
	{ /* on an exists, no tier failing: a miss is still a miss */
		struct kvt_req x = t_req1(s, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = ns,
							      .key = t_key(77), .flags = KVT_F_ERRORS });
		T_RC(x.status, KVT_MISS);
	}
	r.flags = KVT_F_CRC; /* crcs NULL */
	SUBMIT_RC(KVT_ENULL);
	r.flags = 0;
	r.ns = 9999;
	SUBMIT_RC(KVT_ENONS);
	r.ns = 0;
	SUBMIT_RC(KVT_ENONS);
	r.ns = ns;
	r.key = empty;
	SUBMIT_RC(KVT_EKEYLEN);
	r.key = toolong;
	SUBMIT_RC(KVT_EKEYLEN);
	r.key = k;
	r.iov = NULL;
	SUBMIT_RC(KVT_ENULL);
	r.iov = &zero;
	SUBMIT_RC(KVT_EBADLEN);
	r.iov = &nul;
	SUBMIT_RC(KVT_ENULL);
	r.iov = &iov;
	r.iov_count = 0;
	SUBMIT_RC(KVT_EBADLEN);
	r.iov_count = KVT_PARTS_MAX + 1;
	SUBMIT_RC(KVT_EBADLEN);
	r.iov_count = 1;
	/* Range and part together, verify with range. */
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_GET; r.ns = ns; r.key = k; r.iov = &iov; r.iov_count = 1;
	r.flags = KVT_F_PART | KVT_F_RANGE;
	SUBMIT_RC(KVT_EBADOP);
	r.flags = KVT_F_VERIFY | KVT_F_RANGE;
	r.len = 1;
	SUBMIT_RC(KVT_EBADOP);
	r.flags = KVT_F_RANGE;
	r.len = 0;
	SUBMIT_RC(KVT_EBADLEN);
	/* Lookups: keys NULL, zero or too many keys, one bad key. */
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_LOOKUP; r.ns = ns;
	SUBMIT_RC(KVT_ENULL);
	r.keys = &k;
	r.key_count = 0;
	SUBMIT_RC(KVT_EBADLEN);
	r.key_count = KVT_BATCH_MAX + 1;
	SUBMIT_RC(KVT_EBADLEN);
	r.keys = &empty;
	r.key_count = 1;
	SUBMIT_RC(KVT_EKEYLEN);
	/* Batch-level errors. */
	T_RC(kvt_submit(q, rp, 0), KVT_EBADLEN);
	T_RC(kvt_submit(q, NULL, 1), KVT_ENULL);
	T_RC(kvt_submit(NULL, rp, 1), KVT_ENULL);
	{
		struct kvt_req *nulls[1] = { NULL };
		T_RC(kvt_submit(q, nulls, 1), KVT_ENULL);
	}
	/* One bad request in a batch: none of them is submitted. */
	memset(&r, 0, sizeof(r));
	memset(&r2, 0, sizeof(r2));
	r.op = KVT_OP_PUT; r.ns = ns; r.key = k; r.iov = &iov; r.iov_count = 1;
	r2.op = KVT_OP_PUT; r2.ns = ns; r2.key = empty; r2.iov = &iov; r2.iov_count = 1;
	T_RC(kvt_submit(q, rp, 2), KVT_EKEYLEN);
	T_EQ_INT(kvt_queue_inflight(q), 0);
	T_RC(kvt_exists(s, ns, &k), KVT_MISS);
	/* The same request twice in one batch. */
	{
		struct kvt_req *twice[2] = { &r, &r };
		T_RC(kvt_submit(q, twice, 2), KVT_EBUSY);
	}
	/* ...and the store is fine afterwards. */
	r2.key = t_key(3);
	T_RC(kvt_submit(q, rp, 2), 2);
	T_RC(kvt_queue_poll(q, got, 2), 2);
	T_RC(r.status, KVT_OK);
	T_RC(r2.status, KVT_OK);

	/* Sync helpers check the same things. */
	T_RC(kvt_put(s, ns, NULL, &iov, 1), KVT_ENULL);
	T_RC(kvt_put(NULL, ns, &k, &iov, 1), KVT_ENULL);
	T_RC(kvt_put(s, ns, &toolong, &iov, 1), KVT_EKEYLEN);
	T_RC(kvt_get(s, ns, &k, NULL, 8, NULL), KVT_ENULL);
	T_RC(kvt_lookup_prefix(s, ns, NULL, 3, NULL), KVT_ENULL);
	T_RC(kvt_clear(s, 777), KVT_ENONS);
	T_RC(kvt_queue_poll(NULL, got, 1), KVT_ENULL);
	T_RC(kvt_queue_fd(NULL), KVT_ENULL);
	T_RC(kvt_cancel(q, NULL), KVT_ENULL);
	T_RC(kvt_pin_release(NULL, 1), KVT_ENULL);
	T_RC(kvt_store_stats(s, NULL, NULL), KVT_ENULL);
	{
		uint8_t dg[32];
		T_RC(kvt_ns_info(s, 4242, dg, NULL, 0), KVT_ENONS);
		T_RC(kvt_ns_register(s, NULL, &ns), KVT_ENULL);
	}
	T_RC(kvt_exists(s, ns, &k), KVT_OK);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
}

struct logbuf {
	pthread_mutex_t lock;
	int count;
	char last[512];
};

static void log_cb(void *ctx, int level, const char *msg)
{
	struct logbuf *b = ctx;
	(void)level;
	pthread_mutex_lock(&b->lock);
	b->count++;
	snprintf(b->last, sizeof(b->last), "%s", msg);
	pthread_mutex_unlock(&b->lock);
}

static void test_log_and_fork(void)
{
	struct logbuf lb = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct kvt_store *s;
	uint32_t ns;
	char v[16] = "fork-test-bytes";
	struct iovec iov = { v, 16 };
	struct kvt_key k = t_key(5);
	pid_t pid;
	int st;

	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "dram.capacity", "4M"));
	T_OK(kvt_store_set_log(s, log_cb, &lb, KVT_LOG_DEBUG));
	T_OK(kvt_store_open(s));
	T_GE_INT(lb.count, 1);
	T_ASSERT(strstr(lb.last, "dram") != NULL);
	ns = t_ns(s, "fork");
	T_OK(kvt_put(s, ns, &k, &iov, 1));

	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		char got[16];
		int bad = 0;
		bad |= kvt_get(s, ns, &k, got, 16, NULL) != KVT_EFORK;
		bad |= kvt_put(s, ns, &k, &iov, 1) != KVT_EFORK;
		bad |= kvt_store_close(s) != KVT_EFORK;
		kvt_store_destroy(s); /* must not hang on the parent's threads */
		_exit(bad ? 1 : 0);
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The parent is untouched. */
	{
		char got[16];
		T_RC(kvt_get(s, ns, &k, got, 16, NULL), KVT_OK);
		T_EQ_MEM(got, v, 16);
	}
	kvt_store_destroy(s);
}

/* A KVT_OP_GET_PINNED of key, a hit of three parts: their CRCs into
 * got[3], the pin released. */
static void pinned_crcs(struct kvt_store *s, uint32_t ns, const struct kvt_key *key,
			uint32_t got[3])
{
	struct kvt_req r = { .op = KVT_OP_GET_PINNED, .ns = ns, .key = *key }, *rp = &r, *done;
	struct kvt_queue *q;
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &done, 1, 1000), 1);
	T_RC(r.status, KVT_OK);
	T_RC(kvt_pin_parts(s, r.pin, NULL, got, 3), 3);
	T_OK(kvt_pin_release(s, r.pin));
	T_OK(kvt_queue_destroy(q));
}

/* Zero-copy puts: reserve, fill the view, commit (or abort). */
static void test_reserve_commit(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "16M", "dram.chunk", "4K",
					   "dram.prefault", "off", NULL);
	uint32_t ns = t_ns(s, "resv");
	uint64_t lens[3] = { 5000, 1, 70000 }, total = 75001;
	uint8_t *src = malloc(total), *out = malloc(total + 8);
	uint32_t crcs[3];
	struct kvt_reservation res, res2;
	struct kvt_key k = t_key(1), k2 = t_key(2);
	uint64_t off = 0, vlen = 0;
	T_ASSERT(src && out);
	t_fill(src, total, 77);
	crcs[0] = kvt_crc32c(0, src, 5000);
	crcs[1] = kvt_crc32c(0, src + 5000, 1);
	crcs[2] = kvt_crc32c(0, src + 5001, 70000);

	T_RC(kvt_put_reserve(s, ns, &k, lens, 3, 0, &res), KVT_OK);
	T_EQ_U64(res.len, total);
	/* Invisible until committed; a second writer of the key is refused. */
	T_RC(kvt_get(s, ns, &k, out, total, NULL), KVT_MISS);
	T_RC(kvt_put_reserve(s, ns, &k, lens, 3, 0, &res2), KVT_EXISTS);
	/* A pin handle is not a reservation, nor the reverse. */
	T_RC(kvt_pin_release(s, res.handle), KVT_EPIN);
	for (uint32_t i = 0; i < res.view_count; i++) {
		memcpy(res.view[i].iov_base, src + off, res.view[i].iov_len);
		off += res.view[i].iov_len;
	}
	T_EQ_U64(off, total);
	T_RC(kvt_put_commit(s, res.handle, crcs), KVT_OK);
	T_RC(kvt_put_commit(s, res.handle, crcs), KVT_EPIN); /* spent */
	T_RC(kvt_get(s, ns, &k, out, total + 8, &vlen), KVT_OK);
	T_EQ_U64(vlen, total);
	T_EQ_MEM(out, src, total);
	{
		uint32_t got[3];
		pinned_crcs(s, ns, &k, got);
		T_EQ_INT(got[2], crcs[2]);
	}

	/* Wrong bytes: commit checks the CRCs and drops the value. */
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 3, KVT_F_SEALED, &res), KVT_OK);
	for (uint32_t i = 0; i < res.view_count; i++)
		memset(res.view[i].iov_base, 0xab, res.view[i].iov_len);
	T_RC(kvt_put_commit(s, res.handle, crcs), KVT_ECORRUPT);
	T_RC(kvt_exists(s, ns, &k2), KVT_MISS);
	/* Abort, then the key is free again; sealed flag travels. */
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 1, KVT_F_SEALED, &res), KVT_OK);
	T_OK(kvt_put_abort(s, res.handle));
	T_RC(kvt_put_abort(s, res.handle), KVT_EPIN);
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 1, KVT_F_SEALED, &res), KVT_OK);
	memcpy(res.view[0].iov_base, src, 5000);
	T_RC(kvt_put_commit(s, res.handle, NULL), KVT_OK);
	{
		struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = k2, .iov_count = 1 }, *rp = &r, *done;
		struct iovec iov = { out, total };
		struct kvt_queue *q;
		r.iov = &iov;
		T_OK(kvt_queue_create(s, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &done, 1, 1000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.value_flags & KVT_F_SEALED, KVT_F_SEALED);
		T_EQ_MEM(out, src, 5000);
		T_OK(kvt_queue_destroy(q));
	}
	/* Checked commit: the caller's CRCs are stored as given, unread. */
	k2 = t_key(4);
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 3, 0, &res), KVT_OK);
	T_RC(kvt_put_commit_checked(s, res.handle, NULL), KVT_ENULL);
	off = 0;
	for (uint32_t i = 0; i < res.view_count; i++) {
		memcpy(res.view[i].iov_base, src + off, res.view[i].iov_len);
		off += res.view[i].iov_len;
	}
	T_RC(kvt_put_commit_checked(s, res.handle, crcs), KVT_OK);
	T_RC(kvt_put_commit_checked(s, res.handle, crcs), KVT_EPIN);
	{
		uint32_t got[3];
		pinned_crcs(s, ns, &k2, got);
		T_EQ_MEM(got, crcs, sizeof(got));
	}
	/* A delete while reserved wins. */
	k2 = t_key(3);
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 1, 0, &res), KVT_OK);
	T_RC(kvt_delete(s, ns, &k2), KVT_MISS);
	T_RC(kvt_put_commit(s, res.handle, NULL), -ECANCELED);
	T_RC(kvt_exists(s, ns, &k2), KVT_MISS);
	/* Bad input. */
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 0, 0, &res), KVT_EBADLEN);
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 1, KVT_F_CRC, &res), KVT_EBADOP);
	T_RC(kvt_put_reserve(s, 999, &k2, lens, 1, 0, &res), KVT_ENONS);
	T_RC(kvt_put_reserve(s, ns, &k2, NULL, 1, 0, &res), KVT_ENULL);
	{
		uint64_t zero = 0;
		T_RC(kvt_put_reserve(s, ns, &k2, &zero, 1, 0, &res), KVT_EBADLEN);
	}
	/* Close aborts what is left reserved. */
	T_RC(kvt_put_reserve(s, ns, &k2, lens, 1, 0, &res), KVT_OK);
	T_OK(kvt_store_close(s));
	kvt_store_destroy(s);
	free(src);
	free(out);
}

/* Region hook (kvt_store_register_regions): what the CUDA module uses to
 * pin the DRAM arena.  A fake driver records the regions it was given. */
struct fake_pin {
	unsigned attached, detached, fail_at; /* fail_at: 1-based attach that fails, 0 none */
	uint64_t bytes;
	void *bases[8];
};

static int fake_attach(void *ctx, void *base, size_t len)
{
	struct fake_pin *f = ctx;
	if (f->fail_at && f->attached + 1 == f->fail_at)
		return -ENOMEM;
	T_ASSERT(((uintptr_t)base & 4095) == 0 && len > 0 && (len & 4095) == 0);
	memset(base, 0x5a, 1); /* the region is mapped and writable */
	f->bases[f->attached++ % 8] = base;
	f->bytes += len;
	return 0;
}

static void fake_detach(void *ctx, void *base, size_t len)
{
	struct fake_pin *f = ctx;
	f->detached++;
	f->bytes -= len;
	(void)base;
}

struct text_stat {
	const char *name;
	char value[64];
};

static void text_stat_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct text_stat *t = ctx;
	(void)value;
	if (str && strcmp(name, t->name) == 0)
		snprintf(t->value, sizeof(t->value), "%s", str);
}

static void test_region_hook(void)
{
	struct fake_pin f = { 0 }, g = { 0 };
	struct kvt_region_hook h = { "fake", fake_attach, fake_detach, &f };
	struct text_stat ts = { "dram.registered", "" };
	struct kvt_store *s;
	uint64_t v = 1;

	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_register_regions(s, &h), KVT_ECLOSED);
	kvt_store_destroy(s);

	s = t_store_open("dram.capacity", "8M", "dram.shards", "4", NULL);
	T_OK(kvt_store_stats(s, text_stat_cb, &ts));
	T_EQ_STR(ts.value, "not registered");
	T_OK(kvt_store_stat(s, "dram.registered_bytes", &v));
	T_EQ_U64(v, 0);
	/* The third attach fails: the two before it are undone, nothing installed. */
	f.fail_at = 3;
	T_RC(kvt_store_register_regions(s, &h), -ENOMEM);
	T_EQ_INT(f.attached, 2);
	T_EQ_INT(f.detached, 2);
	T_EQ_U64(f.bytes, 0);
	T_OK(kvt_store_stats(s, text_stat_cb, &ts));
	T_EQ_STR(ts.value, "not registered");

	h.ctx = &g;
	h.name = NULL;
	T_RC(kvt_store_register_regions(s, &h), KVT_ENULL);
	h.name = "fake";
	T_OK(kvt_store_register_regions(s, &h));
	T_EQ_INT(g.attached, 4);
	T_ASSERT(g.bytes >= 8u << 20);
	T_RC(kvt_store_register_regions(s, &h), KVT_EBUSY);
	T_OK(kvt_store_stats(s, text_stat_cb, &ts));
	T_EQ_STR(ts.value, "fake");
	T_OK(kvt_store_stat(s, "dram.registered_bytes", &v));
	T_EQ_U64(v, g.bytes);
	T_EQ_INT(g.detached, 0);
	T_OK(kvt_store_close(s));
	/* Close detached every region it attached. */
	T_EQ_INT(g.detached, 4);
	T_EQ_U64(g.bytes, 0);
	kvt_store_destroy(s);
}

/* dram.prefault: on, the arenas are populated at open (all of each
 * shard's mapping) and the time it took is a statistic and in the open's
 * log line; off, both are 0 and the line does not say it. */
static void test_prefault_stats(void)
{
	for (int on = 0; on < 2; on++) {
		struct logbuf lb = { .lock = PTHREAD_MUTEX_INITIALIZER };
		uint64_t bytes = 1, ms = 1, cap = 0, flag = 2;
		char want[64];
		struct kvt_store *s;

		T_OK(kvt_store_create(&s));
		T_OK(kvt_store_set_option(s, "dram.capacity", "12M"));
		T_OK(kvt_store_set_option(s, "dram.shards", "3"));
		T_OK(kvt_store_set_option(s, "dram.prefault", on ? "on" : "off"));
		T_OK(kvt_store_set_log(s, log_cb, &lb, KVT_LOG_INFO));
		T_OK(kvt_store_open(s));
		T_OK(kvt_store_stat(s, "dram.prefault_bytes", &bytes));
		T_OK(kvt_store_stat(s, "dram.prefault_ms", &ms));
		T_OK(kvt_store_stat(s, "dram.capacity_bytes", &cap));
		T_OK(kvt_store_stat(s, "dram.prefaulted", &flag));
		T_EQ_U64(flag, (uint64_t)on);
		if (on) {
			/* 4 MiB a shard, mapped in whole 2 MiB pages */
			T_EQ_U64(cap, 12u << 20);
			T_EQ_U64(bytes, 12u << 20);
			snprintf(want, sizeof(want), "(pre-faulted 12 MiB in %llu ms)",
				 (unsigned long long)ms);
			if (!strstr(lb.last, want))
				T_FAIL("no '%s' in the open's log line: %s", want, lb.last);
		} else {
			T_EQ_U64(bytes, 0);
			T_EQ_U64(ms, 0);
			T_ASSERT(strstr(lb.last, "dram: ") && !strstr(lb.last, "pre-faulted"));
		}
		kvt_store_destroy(s);
	}
}

int main(void)
{
	test_lifecycle_options();
	test_batches();
	test_cancel_flush_close();
	test_bad_input();
	test_log_and_fork();
	test_reserve_commit();
	test_region_hook();
	test_prefault_stats();
	return 0;
}

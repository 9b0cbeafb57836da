/*
 * test_remote_direct.c - gets of the remote tier straight into the
 * caller's buffers (remote_get_into, tier.h get_into) against a real
 * kvtierd, with a relaying TCP proxy in between that can corrupt or stall
 * the server's bytes in the middle of a value.
 *
 * Usage: test_remote_direct PATH-TO-KVTIERD
 *
 * What it proves:
 *   - a plain get with the caller's buffers is received into them
 *     (remote.direct_gets), byte-exact, for values of several parts over
 *     iovecs whose boundaries are not the parts'; a bigger buffer reports
 *     the value's length; a smaller one is KVT_EBUFSMALL with value_len;
 *   - a batch of 1 MiB gets in one submit goes out in 4 MiB frames, one
 *     on each of the pool's 4 connections (counted by the proxy, on the
 *     wire);
 *   - with remote.io_threads=2 the store runs two I/O threads for the
 *     one server, and a batch of 8 1 MiB puts and one of 8 1 MiB gets are
 *     split between them (each sent and received at least a quarter of
 *     the bytes: remote.lane_min_bytes_*), every get byte-exact (the
 *     puts' CRC32Cs, computed by the lanes' threads, are checked by the
 *     server and again by the gets);
 *   - a byte flipped in the middle of a value on the wire (after part of
 *     it already landed in the caller's buffer) is a miss, never a hit,
 *     and counted as remote.crc_errors; the next get of it is a hit;
 *   - of a batch of small gets answered in one frame, the value flipped
 *     on the wire is the only miss, every other a byte-exact hit;
 *   - a load stalled mid-value that times out is a miss by its deadline,
 *     and a load stalled mid-value while the store is destroyed releases
 *     everything (ASan/LSan) and writes nothing to the buffer afterwards.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define VLEN (1u << 20)
#define MARK 0xa5            /* every byte of the proxy's target values */
#define AT (600u * 1024)     /* the proxy acts at this byte of a run of MARKs */

enum { P_RELAY = 0, P_FLIP, P_STALL };

/* The proxy's filter (proxy.h): server-to-client bytes are scanned for
 * runs of MARK, and at byte AT of a run it flips that byte (P_FLIP, once)
 * or stalls that connection (P_STALL, until the mode changes: then the
 * relay closes both ends). */
static size_t mark_filter(struct tproxy *p, int mode, uint64_t *run, uint8_t *buf, size_t n,
			  bool *stall)
{
	for (size_t i = 0; i < n; i++) {
		*run = buf[i] == MARK ? *run + 1 : 0;
		if (*run != AT)
			continue;
		if (mode == P_FLIP) {
			buf[i] ^= 0x01;
			atomic_store(&p->mode, P_RELAY);
			mode = P_RELAY;
			atomic_fetch_add(&p->acted, 1);
		} else if (mode == P_STALL) {
			*stall = true; /* the value's first AT - 1 bytes went through */
			atomic_fetch_add(&p->acted, 1);
			return i;
		}
	}
	return n;
}

/* ------------------------------------------------------------------------ */

static struct kvt_store *engine(const char *addr, const char *timeout_ms)
{
	return tsrv_engine(addr, (const char *[]){ "remote.timeout_ms", timeout_ms,
						   "remote.backoff_ms", "20",
						   "remote.backoff_max_ms", "200", NULL });
}

/* An engine through the proxy px (the server's bytes to it filtered). */
static struct kvt_store *proxied(struct tproxy *px, const char *timeout_ms)
{
	char paddr[64];
	snprintf(paddr, sizeof(paddr), "127.0.0.1:%u", px->port);
	return engine(paddr, timeout_ms);
}

/* Through a, id's VLEN bytes of MARK (where the filter flips or stalls)
 * from v, in the namespace "direct". */
static void put_marked(struct kvt_store *a, uint64_t id, uint8_t *v)
{
	struct kvt_key k = t_key(id);
	struct iovec part = { v, VLEN };
	memset(v, MARK, VLEN);
	T_RC(kvt_put(a, t_ns(a, "direct"), &k, &part, 1), KVT_OK);
}

/* One plain get into iov[0..n): the finished request. */
static struct kvt_req get_into(struct kvt_store *s, uint32_t ns, uint64_t id,
			       const struct iovec *iov, unsigned n)
{
	return t_req1(s, (struct kvt_req){ .op = KVT_OP_GET, .ns = ns, .key = t_key(id),
					   .iov = iov, .iov_count = n });
}

/* Byte-exact gets of a three-part value over iovecs that split it
 * elsewhere; a bigger buffer; a buffer too small. */
static void test_exact(const char *addr)
{
	struct kvt_store *a = engine(addr, "5000"), *b = engine(addr, "5000");
	uint32_t na = t_ns(a, "direct"), nb = t_ns(b, "direct");
	const size_t len = 3 * (VLEN / 3) + 7;
	uint8_t *v = malloc(len), *dst = malloc(len + 4096);
	struct kvt_key k = t_key(1);
	T_ASSERT(v && dst);
	t_fill(v, len, 1);
	struct iovec parts[3] = { { v, VLEN / 3 }, { v + VLEN / 3, VLEN / 3 },
				  { v + 2 * (VLEN / 3), len - 2 * (VLEN / 3) } };
	T_RC(kvt_put(a, na, &k, parts, 3), KVT_OK);

	/* Five pieces, none on a part boundary, the last with room to spare. */
	size_t cuts[] = { 1000, 700001, 3, 65536 };
	struct iovec iov[5];
	size_t off = 0;
	for (int i = 0; i < 4; i++) {
		iov[i] = (struct iovec){ dst + off, cuts[i] };
		off += cuts[i];
	}
	iov[4] = (struct iovec){ dst + off, len + 4096 - off };
	memset(dst, 0, len + 4096);
	uint64_t d0 = t_stat(b, "remote.direct_gets");
	struct kvt_req r = get_into(b, nb, 1, iov, 5);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	T_EQ_U64(r.length, len);
	T_EQ_U64(r.value_len, len);
	T_EQ_MEM(dst, v, len);
	T_EQ_U64(t_stat(b, "remote.direct_gets"), d0 + 1);
	/* Nothing past the value was written. */
	for (size_t i = len; i < len + 4096; i++)
		T_ASSERT(dst[i] == 0);

	/* Too small: KVT_EBUFSMALL with the value's length, from the server;
	 * the value went to DRAM meanwhile, so the retry with room is local. */
	struct iovec small = { dst, len - 1 }, whole = { dst, len };
	uint64_t in0 = t_stat(b, "remote.bytes_in"), g0 = t_stat(b, "remote.gets");
	r = get_into(b, nb, 1, &small, 1);
	T_RC(r.status, KVT_EBUFSMALL);
	T_EQ_U64(r.value_len, len);
	T_ASSERT(t_stat(b, "remote.bytes_in") - in0 >= len);
	T_EQ_U64(t_stat(b, "remote.gets") - g0, 1);
	memset(dst, 0, len);
	/* No request went out.  (Not "no bytes came in": a pool connection
	 * opened by the last get may get its HELLO answer meanwhile, 88
	 * bytes, seen on a loaded machine.) */
	in0 = t_stat(b, "remote.gets");
	r = get_into(b, nb, 1, &whole, 1);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_DRAM);
	T_EQ_MEM(dst, v, len);
	T_EQ_U64(t_stat(b, "remote.gets") - in0, 0);

	/* Absent: a miss. */
	r = get_into(b, nb, 2, &small, 1);
	T_RC(r.status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.crc_errors"), 0);
	T_EQ_U64(t_stat(b, "remote.errors"), 0);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* Striping: a batch of 1 MiB gets in one kvt_submit goes out in frames
 * of about REMOTE_GET_STRIPE_BYTES (4 MiB: 4 gets each), not one frame,
 * and the frames go over every connection of the pool (grown to
 * remote.conns_max, 4, by the 1 MiB mean): the proxy between the engine
 * and the server sees the answers come back on 4 connections, 4 MiB
 * each. */
static void test_stripe(const char *addr, struct tproxy *px)
{
	enum { N = 16 };
	struct kvt_store *a = engine(addr, "5000"), *b = proxied(px, "5000");
	uint64_t down0[TPROXY_SLOTS];
	uint32_t na = t_ns(a, "stripe"), nb = t_ns(b, "stripe");
	uint8_t *v = malloc(VLEN), *dst = malloc((size_t)N * VLEN);
	struct kvt_req reqs[N];
	struct iovec iov[N];
	struct kvt_queue *q;
	T_ASSERT(v && dst);
	for (int i = 0; i < N; i++) {
		struct kvt_key k = t_key(100 + (uint64_t)i);
		struct iovec part = { v, VLEN };
		t_fill(v, VLEN, 100 + (uint64_t)i);
		T_RC(kvt_put(a, na, &k, &part, 1), KVT_OK);
	}
	/* One get first: the tier learns the size of the blocks. */
	iov[0] = (struct iovec){ dst, VLEN };
	T_RC(get_into(b, nb, 100, iov, 1).status, KVT_OK);
	T_EQ_U64(t_stat(b, "remote.pool"), 4);
	for (int i = 0; i < 1000 && t_stat(b, "remote.conns_up") < 4; i++)
		tsrv_sleep_ms(10);
	T_EQ_U64(t_stat(b, "remote.conns_up"), 4);
	T_ASSERT(atomic_load(&px->opened) <= TPROXY_SLOTS);
	for (int i = 0; i < TPROXY_SLOTS; i++)
		down0[i] = atomic_load(&px->down[i]);
	uint64_t f0 = t_stat(b, "remote.frames_out"), rd0 = t_stat(b, "remote.reads");
	uint64_t wk0 = t_stat(b, "remote.wakeups");
	T_OK(kvt_queue_create(b, &q));
	for (int i = 0; i < N; i++) {
		iov[i] = (struct iovec){ dst + (size_t)i * VLEN, VLEN };
		reqs[i] = (struct kvt_req){ .op = KVT_OP_GET, .ns = nb, .key = t_key(100 + (uint64_t)i),
					    .iov = &iov[i], .iov_count = 1 };
	}
	t_run_batch(q, reqs, N);
	uint64_t frames = t_stat(b, "remote.frames_out") - f0;
	fprintf(stderr, "%d gets of 1 MiB went out in %llu frames\n", N, (unsigned long long)frames);
	T_ASSERT(frames >= N / 4 && frames <= N);
	/* Each answer took a header and a table read and at least one readv
	 * per value; the I/O thread woke at least once for them. */
	uint64_t reads = t_stat(b, "remote.reads") - rd0, wakeups = t_stat(b, "remote.wakeups") - wk0;
	fprintf(stderr, "  %llu receive calls, %llu wake-ups of the I/O thread\n",
		(unsigned long long)reads, (unsigned long long)wakeups);
	T_ASSERT(reads >= 2 * frames + N);
	T_ASSERT(wakeups >= 1);
	/* Every connection carried its share: 4 of them at least 4 MiB. */
	int busy = 0;
	for (int i = 0; i < TPROXY_SLOTS; i++) {
		uint64_t d = atomic_load(&px->down[i]) - down0[i];
		if (d > 0)
			fprintf(stderr, "  connection %d: %llu bytes of answers\n", i,
				(unsigned long long)d);
		busy += d >= (uint64_t)N / 4 * VLEN;
	}
	T_EQ_INT(busy, 4);
	for (int i = 0; i < N; i++) {
		T_RC(reqs[i].status, KVT_OK);
		t_fill(v, VLEN, 100 + (uint64_t)i);
		T_EQ_MEM(dst + (size_t)i * VLEN, v, VLEN);
	}
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* Threads of this process named name. */
static int count_threads(const char *name)
{
	char path[300], comm[64];
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	T_ASSERT(d != NULL);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, name, strlen(name)) == 0 &&
		    (comm[strlen(name)] == '\n' || comm[strlen(name)] == 0))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* remote.io_threads=2: two I/O threads for one server, a batch of puts
 * and one of gets split between them, every byte right. */
static void test_lanes(const char *addr)
{
	enum { N = 8 };
	int before = count_threads("kvt-remote");
	struct kvt_store *b = tsrv_engine(addr, (const char *[]){ "remote.timeout_ms", "5000",
								 "remote.io_threads", "2", NULL });
	T_EQ_INT(count_threads("kvt-remote") - before, 2);
	uint64_t t0 = t_now_ms();
	T_EQ_U64(t_stat(b, "remote.io_threads"), 2);
	uint32_t nb = t_ns(b, "lanes");
	uint8_t *v = malloc((size_t)N * VLEN), *dst = malloc((size_t)N * VLEN);
	struct kvt_req reqs[N], *rp[N], *got[N];
	struct iovec iov[N];
	struct kvt_queue *q;
	T_ASSERT(v && dst);
	T_OK(kvt_queue_create(b, &q));
	for (int op = 0; op < 2; op++) {
		uint64_t in0 = t_stat(b, "remote.lane_min_bytes_in");
		uint64_t out0 = t_stat(b, "remote.lane_min_bytes_out");
		for (int i = 0; i < N; i++) {
			uint8_t *p = (op == 0 ? v : dst) + (size_t)i * VLEN;
			if (op == 0)
				t_fill(p, VLEN, 300 + (uint64_t)i);
			iov[i] = (struct iovec){ p, VLEN };
			reqs[i] = (struct kvt_req){ .op = op == 0 ? KVT_OP_PUT : KVT_OP_GET, .ns = nb,
						    .key = t_key(300 + (uint64_t)i), .iov = &iov[i],
						    .iov_count = 1 };
			rp[i] = &reqs[i];
		}
		if (op == 1) {
			/* A fresh store's gets must come from the server. */
			T_OK(kvt_queue_destroy(q));
			kvt_store_destroy(b);
			b = tsrv_engine(addr, (const char *[]){ "remote.timeout_ms", "5000",
								"remote.io_threads", "2", NULL });
			nb = t_ns(b, "lanes");
			for (int i = 0; i < N; i++)
				reqs[i].ns = nb;
			T_OK(kvt_queue_create(b, &q));
			in0 = t_stat(b, "remote.lane_min_bytes_in");
			out0 = t_stat(b, "remote.lane_min_bytes_out");
		}
		T_RC(kvt_submit(q, rp, N), N);
		for (int done = 0; done < N;) {
			int n = kvt_queue_wait(q, got, N, 30000);
			T_ASSERT(n > 0);
			done += n;
		}
		for (int i = 0; i < N; i++)
			T_RC(reqs[i].status, KVT_OK);
		uint64_t in = t_stat(b, "remote.lane_min_bytes_in") - in0;
		uint64_t out = t_stat(b, "remote.lane_min_bytes_out") - out0;
		fprintf(stderr, "%s of %d x 1 MiB over 2 I/O threads: the lesser one received %llu"
			" bytes, sent %llu\n", op == 0 ? "puts" : "gets", N,
			(unsigned long long)in, (unsigned long long)out);
		if (op == 0)
			T_ASSERT(out >= (uint64_t)N / 4 * VLEN);
		else
			T_ASSERT(in >= (uint64_t)N / 4 * VLEN);
	}
	T_EQ_U64(t_stat(b, "remote.direct_gets"), N);
	T_EQ_MEM(dst, v, (size_t)N * VLEN);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	T_EQ_INT(count_threads("kvt-remote"), before);
	fprintf(stderr, "test_lanes took %llu ms\n", (unsigned long long)(t_now_ms() - t0));
	free(v);
	free(dst);
}

/* A byte flipped mid-value on the wire: a miss, never a hit. */
static void test_crc(const char *addr, struct tproxy *px)
{
	struct kvt_store *a = engine(addr, "5000"), *b = proxied(px, "5000");
	uint32_t nb = t_ns(b, "direct");
	uint8_t *v = malloc(VLEN), *dst = malloc(VLEN);
	struct iovec iov = { dst, VLEN };
	T_ASSERT(v && dst);
	put_marked(a, 10, v);

	atomic_store(&px->mode, P_FLIP);
	memset(dst, 0, VLEN);
	struct kvt_req r = get_into(b, nb, 10, &iov, 1);
	T_EQ_INT(atomic_load(&px->acted), 1); /* the proxy did flip a byte of it */
	T_RC(r.status, KVT_MISS);
	T_EQ_U64(r.length, 0);
	T_EQ_U64(t_stat(b, "remote.crc_errors"), 1);
	T_EQ_U64(t_stat(b, "remote.hits"), 0);
	/* The bytes before the flip had landed in the buffer: it was mid-stream. */
	T_ASSERT(dst[0] == MARK && dst[AT / 2] == MARK);

	/* The server's copy is intact: the next get is a hit, byte-exact. */
	memset(dst, 0, VLEN);
	r = get_into(b, nb, 10, &iov, 1);
	T_RC(r.status, KVT_OK);
	T_EQ_U64(r.length, VLEN);
	T_EQ_MEM(dst, v, VLEN);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* Small gets in one submit, answered in one frame: the value flipped on
 * the wire among them is the only miss, the others land intact. */
static void test_batch_crc(const char *addr, struct tproxy *px)
{
	enum { N = 7, BAD = 3, SMALL = 64 << 10, BIG = 700 << 10 };
	struct kvt_store *a = engine(addr, "5000"), *b = proxied(px, "5000");
	uint32_t na = t_ns(a, "batch"), nb = t_ns(b, "batch");
	uint8_t *v = malloc(BIG), *dst = malloc((size_t)N * BIG);
	struct kvt_req reqs[N];
	struct iovec iov[N];
	struct kvt_queue *q;
	T_ASSERT(v && dst);
	for (int i = 0; i < N; i++) {
		struct kvt_key k = t_key(200 + (uint64_t)i);
		struct iovec part = { v, i == BAD ? BIG : SMALL };
		if (i == BAD)
			memset(v, MARK, BIG); /* the proxy flips byte AT of it */
		else
			t_fill(v, SMALL, 200 + (uint64_t)i);
		T_RC(kvt_put(a, na, &k, &part, 1), KVT_OK);
	}
	int acted = atomic_load(&px->acted);
	uint64_t crc0 = t_stat(b, "remote.crc_errors");
	memset(dst, 0, (size_t)N * BIG);
	atomic_store(&px->mode, P_FLIP);
	T_OK(kvt_queue_create(b, &q));
	for (int i = 0; i < N; i++) {
		iov[i] = (struct iovec){ dst + (size_t)i * BIG, BIG };
		reqs[i] = (struct kvt_req){ .op = KVT_OP_GET, .ns = nb, .key = t_key(200 + (uint64_t)i),
					    .iov = &iov[i], .iov_count = 1 };
	}
	t_run_batch(q, reqs, N);
	T_EQ_INT(atomic_load(&px->acted), acted + 1);
	T_EQ_U64(t_stat(b, "remote.crc_errors") - crc0, 1);
	for (int i = 0; i < N; i++) {
		if (i == BAD) {
			T_RC(reqs[i].status, KVT_MISS);
			T_EQ_U64(reqs[i].length, 0);
			continue;
		}
		T_RC(reqs[i].status, KVT_OK);
		T_EQ_U64(reqs[i].length, SMALL);
		t_fill(v, SMALL, 200 + (uint64_t)i);
		T_EQ_MEM(dst + (size_t)i * BIG, v, SMALL);
	}
	T_OK(kvt_queue_destroy(q));
	atomic_store(&px->mode, P_RELAY);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* Loads stalled mid-value: a timeout is a miss by the deadline; a store
 * destroyed under one releases everything and stops writing. */
static void test_stall(const char *addr, struct tproxy *px)
{
	struct kvt_store *a = engine(addr, "5000"), *b = proxied(px, "400");
	uint32_t nb = t_ns(b, "direct");
	uint8_t *v = malloc(VLEN), *dst = malloc(VLEN);
	struct iovec iov = { dst, VLEN };
	T_ASSERT(v && dst);
	put_marked(a, 20, v);

	int acted = atomic_load(&px->acted);
	atomic_store(&px->mode, P_STALL);
	uint64_t t0 = t_now_ms();
	struct kvt_req r = get_into(b, nb, 20, &iov, 1);
	uint64_t t = t_now_ms() - t0;
	T_EQ_INT(atomic_load(&px->acted), acted + 1);
	T_RC(r.status, KVT_MISS);
	T_ASSERT(t >= 300 && t < 5000);
	T_ASSERT(t_stat(b, "remote.timeouts") >= 1);
	atomic_store(&px->mode, P_RELAY);
	kvt_store_destroy(b);

	/* Destroyed with the load in flight, stalled mid-value. */
	b = proxied(px, "30000");
	nb = t_ns(b, "direct");
	acted = atomic_load(&px->acted);
	atomic_store(&px->mode, P_STALL);
	struct kvt_req rq = { .op = KVT_OP_GET, .ns = nb, .key = t_key(20), .iov = &iov,
			      .iov_count = 1 };
	struct kvt_req *rp = &rq;
	struct kvt_queue *q;
	T_OK(kvt_queue_create(b, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	for (int i = 0; i < 500 && atomic_load(&px->acted) == acted; i++)
		tsrv_sleep_ms(10);
	T_EQ_INT(atomic_load(&px->acted), acted + 1);
	kvt_store_destroy(b); /* frees the queue; the load fails, its memory goes */
	memset(dst, 0x5a, VLEN);
	atomic_store(&px->mode, P_RELAY); /* the rest would come now: nobody reads it */
	tsrv_sleep_ms(200);
	for (size_t i = 0; i < VLEN; i += 4093)
		T_ASSERT(dst[i] == 0x5a);
	kvt_store_destroy(a);
	free(v);
	free(dst);
}

/* A server that is down: a get into buffers is one fast miss (counted
 * once: the tier's DRAM path is not asked again). */
static void test_down(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char addr[64];
	uint8_t buf[64];
	struct iovec iov = { buf, sizeof(buf) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(fd >= 0);
	T_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	T_OK(getsockname(fd, (struct sockaddr *)&sa, &sl));
	close(fd); /* nothing listens there now */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	struct kvt_store *s = t_store_open("dram.capacity", "16M", "dram.prefault", "off",
					   "remote.addr", addr, "remote.timeout_ms", "500",
					   "remote.backoff_ms", "20", "remote.backoff_max_ms", "200",
					   NULL);
	uint32_t ns = t_ns(s, "direct");
	for (int i = 0; i < 500 && t_stat(s, "remote.down") == 0; i++)
		tsrv_sleep_ms(10);
	T_EQ_U64(t_stat(s, "remote.down"), 1);
	uint64_t f0 = t_stat(s, "remote.fast_fails");
	for (int i = 0; i < 10; i++)
		T_RC(get_into(s, ns, 300 + (uint64_t)i, &iov, 1).status, KVT_MISS);
	T_EQ_U64(t_stat(s, "remote.fast_fails") - f0, 10);
	kvt_store_destroy(s);
}

int main(int argc, char **argv)
{
	struct tsrv srv;
	struct tproxy px;
	char dir[600], addr[700];
	char *base;

	if (argc < 2)
		T_SKIP("usage: test_remote_direct PATH-TO-KVTIERD");
	if (access(argv[1], X_OK) != 0)
		T_FAIL("%s is not executable", argv[1]);
	signal(SIGPIPE, SIG_IGN);
	test_down();
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/main", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, argv[1], base, dir, NULL, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	tproxy_start(&px, srv.port, mark_filter, false);
	test_exact(addr);
	test_stripe(addr, &px);
	test_lanes(addr);
	test_crc(addr, &px);
	test_batch_crc(addr, &px);
	test_stall(addr, &px);
	tproxy_stop(&px);
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	printf("test_remote_direct: ok\n");
	return 0;
}

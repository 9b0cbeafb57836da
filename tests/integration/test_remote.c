/*
 * test_remote.c - libkvtier's remote tier against a real kvtierd: two
 * engines (two stores in this process, each with its own DRAM) share one
 * server over TCP or a Unix socket.
 *
 * Usage: test_remote PATH-TO-KVTIERD
 *
 * What it proves: a put is written through (the other engine sees it),
 * gets from the server are byte-exact and land in DRAM, lookups and exists
 * reach the server, deletes and clears propagate, batches are packed into
 * fewer frames, authentication works (and fails safely), and a server
 * that is killed, stopped (slow) or restarted costs misses, never a hang
 * or an error of a get.  A server's busy answers (KVT_EBUSY: the tenant's
 * answers pin its share, its values being received reserve theirs) are
 * counted in remote.busy, not remote.errors: a get is a miss, a put fails
 * KVT_EBUSY and succeeds when tried again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

static const char *bin;
static char *base;

/* An engine: a DRAM-only store whose remote tier is the server at addr. */
static struct kvt_store *engine(const char *addr, const char *timeout_ms)
{
	return t_store_open("dram.capacity", "64M", "dram.chunk", "4K", "dram.prefault", "off",
			    "remote.addr", addr, "remote.timeout_ms", timeout_ms,
			    "remote.backoff_ms", "20", "remote.backoff_max_ms", "200", NULL);
}

/* Wait until the engine's pool has a connection up (at most 10 s). */
static void wait_up(struct kvt_store *s)
{
	for (int i = 0; i < 1000; i++) {
		if (t_stat(s, "remote.conns_up") > 0)
			return;
		tsrv_sleep_ms(10);
	}
	T_FAIL("remote tier never connected");
}

static size_t value_len_of(uint64_t i)
{
	static const size_t lens[] = { 4096, 65536, 1, 300000, 2u << 20, 3u << 20 };
	/* The threads test's blocks (ids from 5000) are small, so that with the
	 * others they fit the server's 64 MiB DRAM: a server that evicts
	 * (and admits to SSD only on a second access) loses blocks, rightly. */
	return i >= 5000 ? 65536 + i % 3 : lens[i % 6];
}

static void put_value(struct kvt_store *s, uint32_t ns, uint64_t i)
{
	size_t len = value_len_of(i);
	uint8_t *buf = malloc(len);
	struct kvt_key k = t_key(i);
	T_ASSERT(buf);
	t_fill(buf, len, i);
	if (i % 3 == 0 && len >= 3) {
		/* Three parts, as an engine that stores one per layer group would. */
		struct iovec parts[3] = { { buf, len / 3 }, { buf + len / 3, len / 3 },
					  { buf + 2 * (len / 3), len - 2 * (len / 3) } };
		T_RC(kvt_put(s, ns, &k, parts, 3), KVT_OK);
	} else {
		struct iovec part = { buf, len };
		T_RC(kvt_put(s, ns, &k, &part, 1), KVT_OK);
	}
	free(buf);
}

/* Get value i with a request, check its bytes; returns the tier. */
static int get_check(struct kvt_store *s, uint32_t ns, uint64_t i)
{
	size_t len = value_len_of(i);
	uint8_t *buf = malloc(len + 16), *want = malloc(len);
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = t_key(i), .iov_count = 1 };
	struct kvt_req *rp = &r, *got;
	struct iovec iov = { buf, len + 16 };
	struct kvt_queue *q;
	T_ASSERT(buf && want);
	r.iov = &iov;
	t_fill(want, len, i);
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
	T_RC(r.status, KVT_OK);
	T_EQ_U64(r.length, len);
	T_EQ_U64(r.value_len, len);
	T_EQ_MEM(buf, want, len);
	T_OK(kvt_queue_destroy(q));
	free(buf);
	free(want);
	return (int)r.tier;
}

/* Prefetch blocks first..first+n into DRAM (promoted from the server). */
static void prefetch(struct kvt_store *s, uint32_t ns, uint64_t first, uint32_t n)
{
	struct kvt_key keys[64];
	struct kvt_req r = { .op = KVT_OP_PREFETCH, .ns = ns, .keys = keys, .key_count = n };
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	T_ASSERT(n <= 64);
	for (uint32_t i = 0; i < n; i++)
		keys[i] = t_key(first + i);
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
	T_RC(r.status, KVT_OK);
	T_OK(kvt_queue_destroy(q));
}

static void test_share(const char *addr)
{
	struct kvt_store *a = engine(addr, "5000"), *b = engine(addr, "5000");
	uint32_t na = t_ns(a, "remote-share"), nb = t_ns(b, "remote-share");
	uint8_t buf[64];

	wait_up(a);
	wait_up(b);
	/* Engine A puts: written through, so B finds every block remotely. */
	for (uint64_t i = 0; i < 24; i++)
		put_value(a, na, i);
	T_EQ_U64(t_stat(a, "remote.puts_stored"), 24);
	for (uint64_t i = 0; i < 24; i++)
		T_EQ_INT(get_check(b, nb, i), KVT_TIER_REMOTE);
	/* ... straight into the caller's buffers, not into B's DRAM: the
	 * second get asks the server again. */
	for (uint64_t i = 0; i < 24; i++)
		T_EQ_INT(get_check(b, nb, i), KVT_TIER_REMOTE);
	T_EQ_U64(t_stat(b, "remote.hits"), 48);
	T_EQ_U64(t_stat(b, "remote.direct_gets"), 48);
	/* A prefetch promotes them into B's DRAM: then gets are DRAM hits. */
	prefetch(b, nb, 0, 24);
	for (uint64_t i = 0; i < 24; i++)
		T_EQ_INT(get_check(b, nb, i), KVT_TIER_DRAM);
	T_EQ_U64(t_stat(b, "remote.hits"), 72);
	T_EQ_U64(t_stat(b, "remote.direct_gets"), 48);

	/* A second put of a present key is EXISTS, locally and remotely. */
	{
		struct kvt_key k = t_key(1);
		uint8_t v[16] = { 0 };
		struct iovec part = { v, sizeof(v) };
		T_RC(kvt_put(a, na, &k, &part, 1), KVT_EXISTS);
		T_RC(kvt_put(b, nb, &k, &part, 1), KVT_EXISTS); /* B holds it in DRAM now */
	}

	/* Exists and lookup_prefix reach the server. */
	{
		struct kvt_key keys[8];
		uint8_t tiers[8];
		struct kvt_key k = t_key(100);
		uint8_t v[512];
		struct iovec part = { v, sizeof(v) };
		t_fill(v, sizeof(v), 100);
		T_RC(kvt_put(a, na, &k, &part, 1), KVT_OK);
		T_RC(kvt_exists(b, nb, &k), KVT_OK);
		k = t_key(101);
		T_RC(kvt_exists(b, nb, &k), KVT_MISS);
		/* B holds 0..23 in DRAM; 100 only remotely; 101 nowhere. */
		keys[0] = t_key(0);
		keys[1] = t_key(1);
		keys[2] = t_key(100);
		keys[3] = t_key(101);
		keys[4] = t_key(2);
		T_RC(kvt_lookup_prefix(b, nb, keys, 5, tiers), 3);
		T_EQ_INT(tiers[0], KVT_TIER_DRAM);
		T_EQ_INT(tiers[1], KVT_TIER_DRAM);
		T_EQ_INT(tiers[2], KVT_TIER_REMOTE);
		T_EQ_INT(tiers[3], KVT_TIER_NONE);
		T_EQ_INT(tiers[4], KVT_TIER_NONE);
		/* A prompt held only by the server. */
		for (int i = 0; i < 8; i++) {
			keys[i] = t_key(200 + (uint64_t)i);
			if (i < 6) {
				t_fill(v, sizeof(v), 200 + (uint64_t)i);
				T_RC(kvt_put(a, na, &keys[i], &part, 1), KVT_OK);
			}
		}
		T_RC(kvt_lookup_prefix(b, nb, keys, 8, tiers), 6);
		for (int i = 0; i < 6; i++)
			T_EQ_INT(tiers[i], KVT_TIER_REMOTE);
		/* A lookup never pins or promotes: B still has none of them. */
		T_RC(kvt_lookup_prefix(b, nb, keys, 8, tiers), 6);
		T_EQ_INT(tiers[0], KVT_TIER_REMOTE);
	}

	/* A lookup longer than a frame may name (kvtierd: 1,024 keys): the
	 * first 1,024 are asked, the prefix found still found (it failed
	 * whole: 0). */
	{
		static struct kvt_key big[1500];
		static uint8_t bt[1500];
		uint8_t v[512];
		struct iovec part = { v, sizeof(v) };
		for (int i = 0; i < 1500; i++)
			big[i] = t_key(5000 + (uint64_t)i);
		for (int i = 0; i < 10; i++) {
			t_fill(v, sizeof(v), 5000 + (uint64_t)i);
			T_RC(kvt_put(a, na, &big[i], &part, 1), KVT_OK);
		}
		T_RC(kvt_lookup_prefix(b, nb, big, 1024, bt), 10);
		T_RC(kvt_lookup_prefix(b, nb, big, 1500, bt), 10);
		T_EQ_INT(bt[9], KVT_TIER_REMOTE);
		T_EQ_INT(bt[10], KVT_TIER_NONE);
	}
	/* A batch of gets goes out in fewer frames than requests. */
	{
		enum { N = 48 };
		struct kvt_req reqs[N];
		static uint8_t bufs[N][512];
		struct iovec iov[N];
		struct kvt_queue *q;
		struct kvt_store *c = engine(addr, "5000");
		uint32_t nc = t_ns(c, "remote-share");
		uint64_t frames0;
		uint8_t v[512];
		struct iovec part = { v, sizeof(v) };

		for (int i = 0; i < N; i++) {
			struct kvt_key k = t_key(1000 + (uint64_t)i);
			t_fill(v, sizeof(v), 1000 + (uint64_t)i);
			T_RC(kvt_put(a, na, &k, &part, 1), KVT_OK);
		}
		wait_up(c);
		T_RC(kvt_exists(c, nc, &(struct kvt_key){ .len = 1, .bytes = { 1 } }), KVT_MISS);
		frames0 = t_stat(c, "remote.frames_out");
		T_OK(kvt_queue_create(c, &q));
		for (int i = 0; i < N; i++) {
			memset(&reqs[i], 0, sizeof(reqs[i]));
			reqs[i].op = KVT_OP_GET;
			reqs[i].ns = nc;
			reqs[i].key = t_key(1000 + (uint64_t)i);
			iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
			reqs[i].iov = &iov[i];
			reqs[i].iov_count = 1;
		}
		t_run_batch(q, reqs, N);
		for (int i = 0; i < N; i++) {
			T_RC(reqs[i].status, KVT_OK);
			T_EQ_INT(reqs[i].tier, KVT_TIER_REMOTE);
			t_fill(v, sizeof(v), 1000 + (uint64_t)i);
			T_EQ_MEM(bufs[i], v, sizeof(v));
		}
		fprintf(stderr, "batch of %d gets went out in %llu frames\n", N,
			(unsigned long long)(t_stat(c, "remote.frames_out") - frames0));
		/* One kvt_submit is one wake-up of the remote thread (remote_plug):
		 * one frame, unless its timer woke it in the middle. */
		T_ASSERT(t_stat(c, "remote.frames_out") - frames0 <= 4);
		T_OK(kvt_queue_destroy(q));
		kvt_store_destroy(c);
	}

	/* Deletes propagate: B deletes, a fresh engine no longer finds it. */
	{
		struct kvt_key k = t_key(5);
		struct kvt_store *c = engine(addr, "5000");
		uint32_t nc = t_ns(c, "remote-share");
		T_RC(kvt_delete(b, nb, &k), KVT_OK);
		T_RC(kvt_get(c, nc, &k, buf, sizeof(buf), NULL), KVT_MISS);
		T_RC(kvt_delete(c, nc, &k), KVT_MISS);
		/* Clear of the namespace reaches the server too. */
		T_ASSERT(kvt_clear(a, na) > 0);
		k = t_key(100);
		T_RC(kvt_exists(c, nc, &k), KVT_MISS);
		kvt_store_destroy(c);
	}
	T_EQ_U64(t_stat(a, "remote.errors"), 0);
	T_EQ_U64(t_stat(b, "remote.errors"), 0);
	T_EQ_U64(t_stat(b, "remote.crc_errors"), 0);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
}

/* Kill, stop and restart the server under an engine: misses, not hangs. */
static void test_failures(struct tsrv *srv, const char *dir)
{
	char addr[64];
	struct kvt_store *e;
	uint32_t ns;
	uint8_t buf[64];
	uint64_t t0, t;
	struct kvt_key k = t_key(7);

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv->port);
	e = engine(addr, "400");
	ns = t_ns(e, "remote-fail");
	wait_up(e);
	put_value(e, ns, 7);

	/* Slow: a stopped server answers nothing; the get misses by its deadline. */
	T_RC(kill(srv->pid, SIGSTOP), 0);
	tsrv_wait_stopped(srv->pid);
	k = t_key(8);
	t0 = t_now_ms();
	T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
	t = t_now_ms() - t0;
	fprintf(stderr, "get against a stopped server: miss after %llu ms\n", (unsigned long long)t);
	T_ASSERT(t >= 300 && t < 5000);
	T_ASSERT(t_stat(e, "remote.timeouts") >= 1);
	/* An exists that times out: a miss, unless asked with KVT_F_ERRORS,
	 * which answers the pod's failure (s3e47: before, a miss either way,
	 * and kvtierd's S3 Abort took it for "no such part") */
	k = t_key(8);
	T_RC(kvt_exists(e, ns, &k), KVT_MISS);
	{
		struct kvt_req x = t_req1(e, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = ns,
							      .key = k, .flags = KVT_F_ERRORS });
		fprintf(stderr, "exists with KVT_F_ERRORS against a stopped server: %s\n",
			kvt_strerror(x.status));
		T_ASSERT(x.status < 0);
		/* present locally: found, whatever the server */
		k = t_key(7);
		x = t_req1(e, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = ns, .key = k,
						.flags = KVT_F_ERRORS });
		T_RC(x.status, KVT_OK);
	}
	/* A put still succeeds locally while the server is unreachable. */
	k = t_key(9);
	{
		uint8_t v[100] = { 9 };
		struct iovec part = { v, sizeof(v) };
		T_RC(kvt_put(e, ns, &k, &part, 1), KVT_OK);
	}
	T_RC(kill(srv->pid, SIGCONT), 0);

	/* Dead: every connection refused; gets fail fast. */
	tsrv_kill9(srv);
	for (int i = 0; i < 200 && t_stat(e, "remote.down") == 0; i++) {
		k = t_key(10);
		T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
		tsrv_sleep_ms(10);
	}
	T_EQ_U64(t_stat(e, "remote.down"), 1);
	t0 = t_now_ms();
	for (int i = 0; i < 100; i++) {
		k = t_key(11 + (uint64_t)i);
		T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
		T_RC(kvt_exists(e, ns, &k), KVT_MISS);
	}
	t = t_now_ms() - t0;
	{ /* refused at once: KVT_F_ERRORS answers it (-ENOTCONN), not a miss */
		struct kvt_req x = t_req1(e, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = ns,
							      .key = t_key(11), .flags = KVT_F_ERRORS });
		fprintf(stderr, "exists with KVT_F_ERRORS against a dead server: %s\n",
			kvt_strerror(x.status));
		T_ASSERT(x.status < 0);
	}
	fprintf(stderr, "200 requests against a dead server: %llu ms\n", (unsigned long long)t);
	T_ASSERT(t < 2000);
	T_ASSERT(t_stat(e, "remote.fast_fails") >= 100);
	/* The local DRAM still serves what it holds. */
	T_EQ_INT(get_check(e, ns, 7), KVT_TIER_DRAM);

	/* Back: the pool reconnects on its own and writes go through again. */
	tsrv_start(srv, bin, base, dir, NULL, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv->port);
	/* The restarted server listens on a new port: a new engine finds it;
	 * the old one keeps retrying its old address, failing fast. */
	{
		struct kvt_store *e2 = engine(addr, "2000");
		uint32_t ns2 = t_ns(e2, "remote-fail");
		wait_up(e2);
		put_value(e2, ns2, 12);
		kvt_store_destroy(e2);
		e2 = engine(addr, "2000");
		ns2 = t_ns(e2, "remote-fail");
		T_EQ_INT(get_check(e2, ns2, 12), KVT_TIER_REMOTE);
		kvt_store_destroy(e2);
	}
	k = t_key(12);
	T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
	kvt_store_destroy(e);
}

/* Same port across a restart: the engine's pool comes back by itself. */
static void test_reconnect(void)
{
	struct tsrv srv;
	char dir[600], addr[64], port_opt[32];
	struct kvt_store *e;
	uint32_t ns;
	struct kvt_key k = t_key(40);
	uint8_t buf[64];
	const char *extra[3] = { "--listen", NULL, NULL };

	snprintf(dir, sizeof(dir), "%s/reconnect", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, bin, base, dir, NULL, NULL);
	/* Restart it on the port it got, so the engine's address stays good. */
	tsrv_stop(&srv);
	snprintf(port_opt, sizeof(port_opt), "127.0.0.1:%u", srv.port);
	extra[1] = port_opt;
	tsrv_start(&srv, bin, base, dir, NULL, extra);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	e = engine(addr, "1000");
	ns = t_ns(e, "remote-reconnect");
	wait_up(e);
	tsrv_kill9(&srv);
	T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
	tsrv_start(&srv, bin, base, dir, NULL, extra);
	wait_up(e);
	T_ASSERT(t_stat(e, "remote.disconnects") >= 1);
	T_ASSERT(t_stat(e, "remote.connects") >= 2);
	/* Puts work again.  A 2 MiB put on a connection just made may run past
	 * the 1 s deadline on a loaded machine (TSan): a failed put is counted
	 * and the next is tried, at most three. */
	for (uint64_t i = 40; i < 58 && t_stat(e, "remote.puts_stored") == 0; i += 6) {
		put_value(e, ns, i);
		if (t_stat(e, "remote.puts_stored") == 0)
			fprintf(stderr, "reconnect: put %" PRIu64 " not stored (failed %" PRIu64 ")\n",
				i, t_stat(e, "remote.puts_failed"));
	}
	T_EQ_U64(t_stat(e, "remote.puts_stored"), 1);
	kvt_store_destroy(e);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* Tenants: HMAC over a secret file; a wrong secret costs misses, not errors. */
static void test_auth(void)
{
	struct tsrv srv;
	char dir[600], tenants[600], secret[600], bad[600], loose[600], addr[64];
	struct kvt_store *s;
	uint32_t ns;
	uint8_t buf[64];
	struct kvt_key k = t_key(50);
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/auth", base);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	snprintf(secret, sizeof(secret), "%s/alice.secret", base);
	snprintf(bad, sizeof(bad), "%s/wrong.secret", base);
	snprintf(loose, sizeof(loose), "%s/loose.secret", base);
	T_RC(mkdir(dir, 0700), 0);
	f = fopen(tenants, "w");
	T_ASSERT(f);
	fprintf(f, "alice alice-secret-0123456789 tenant\n");
	fclose(f);
	T_RC(chmod(tenants, 0600), 0);
	f = fopen(secret, "w");
	fprintf(f, "alice-secret-0123456789\n");
	fclose(f);
	T_RC(chmod(secret, 0600), 0);
	f = fopen(bad, "w");
	fprintf(f, "not-alices-secret-at-all\n");
	fclose(f);
	T_RC(chmod(bad, 0600), 0);
	f = fopen(loose, "w");
	fprintf(f, "alice-secret-0123456789\n");
	fclose(f);
	T_RC(chmod(loose, 0644), 0);
	tsrv_start(&srv, bin, base, dir, tenants, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);

	s = t_store_open("dram.capacity", "16M", "dram.prefault", "off", "remote.addr", addr,
			 "remote.tenant", "alice", "remote.secret_file", secret, NULL);
	ns = t_ns(s, "remote-auth");
	wait_up(s);
	put_value(s, ns, 50);
	T_EQ_U64(t_stat(s, "remote.puts_stored"), 1);
	kvt_store_destroy(s);

	/* Wrong secret: never up; gets miss, counted. */
	s = t_store_open("dram.capacity", "16M", "dram.prefault", "off", "remote.addr", addr,
			 "remote.tenant", "alice", "remote.secret_file", bad,
			 "remote.timeout_ms", "500", NULL);
	ns = t_ns(s, "remote-auth");
	T_RC(kvt_get(s, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
	tsrv_sleep_ms(100);
	T_EQ_U64(t_stat(s, "remote.conns_up"), 0);
	T_ASSERT(t_stat(s, "remote.connect_failures") >= 1);
	kvt_store_destroy(s);

	/* A secret file others can read is refused at open. */
	{
		struct kvt_store *x;
		T_OK(kvt_store_create(&x));
		T_OK(kvt_store_set_option(x, "dram.capacity", "16M"));
		T_OK(kvt_store_set_option(x, "remote.addr", addr));
		T_OK(kvt_store_set_option(x, "remote.secret_file", loose));
		T_RC(kvt_store_open(x), KVT_EOPTVAL);
		kvt_store_destroy(x);
	}
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/*
 * Busy answers (session 46).  alice's 6 GETs of 6 MiB values on raw
 * connections, never read, pin her share of the server's DRAM (a quarter
 * of --dram: 16 MiB): her engine's get of another key is answered
 * KVT_EBUSY -- a miss, remote.busy, not remote.errors (before: counted in
 * remote.errors).  Once they are read (closed), the same get is a hit,
 * byte-exact.  A raw PUT of a 15 MiB value, 1 KiB of it sent, reserves
 * her receive share: her engine's put of 2 MiB (remote.put_local never)
 * is refused KVT_EBUSY, counted the same; once that connection closes,
 * the put tried again is stored and read back exactly.
 */
#define BUSY_GETS 6u
#define BUSY_BIG (6u << 20)
#define BUSY_RESV (15u << 20)
#define BUSY_PUT (2u << 20)
#define BUSY_X 65536u

static void busy_counts(struct kvt_store *e, uint64_t busy0, uint64_t err0, uint64_t busy)
{
	fprintf(stderr, "busy: remote.busy +%" PRIu64 ", remote.errors +%" PRIu64 "\n",
		t_stat(e, "remote.busy") - busy0, t_stat(e, "remote.errors") - err0);
	T_EQ_U64(t_stat(e, "remote.busy") - busy0, busy);
	T_EQ_U64(t_stat(e, "remote.errors") - err0, 0);
}

static void test_busy(void)
{
	static const struct kvt_ns_desc rdesc = {
		.model = "busy-raw", .dtype = "bf16", .layout = "test-contiguous",
		.block_tokens = 16, .tp_size = 1, .pp_size = 1,
	};
	const char *secret_text = "alice-secret-0123456789";
	struct tsrv srv;
	char dir[600], tenants[600], secret[600], addr[64];
	uint8_t digest[PROTO_DIGEST_LEN];
	uint8_t *big = malloc(BUSY_BIG), *x = malloc(BUSY_X), *back = malloc(BUSY_PUT);
	uint8_t *pv = malloc(BUSY_PUT);
	struct kc raw[BUSY_GETS], g, r;
	struct kvt_store *e;
	struct kvt_key kx = t_key(70), kp = t_key(71);
	struct iovec xpart = { x, BUSY_X }, ppart = { pv, BUSY_PUT };
	uint64_t busy0, err0, miss0, failed0;
	uint32_t ns;

	T_ASSERT(big && x && back && pv);
	snprintf(dir, sizeof(dir), "%s/busy", base);
	snprintf(tenants, sizeof(tenants), "%s/busy-tenants", base);
	snprintf(secret, sizeof(secret), "%s/busy-alice.secret", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_write_file(NULL, tenants, "alice alice-secret-0123456789 tenant\n");
	tsrv_write_file(NULL, secret, "alice-secret-0123456789\n");
	tsrv_start(&srv, bin, base, dir, tenants, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	e = t_store_open("dram.capacity", "16M", "dram.prefault", "off", "remote.addr", addr,
			 "remote.tenant", "alice", "remote.secret_file", secret,
			 "remote.put_local", "never", "remote.timeout_ms", "10000", NULL);
	ns = t_ns(e, "remote-busy");
	wait_up(e);
	t_fill(x, BUSY_X, 70);
	T_RC(kvt_put(e, ns, &kx, &xpart, 1), KVT_OK);

	/* Her answers pin her share. */
	T_RC(kc_dial(&g, srv.port, "alice", secret_text), 0);
	T_RC(kc_register(&g, &rdesc, digest, NULL, 0), KVT_OK);
	tsrv_fill(big, BUSY_BIG, 72);
	for (unsigned i = 0; i < BUSY_GETS; i++) {
		struct iovec iov = { big, BUSY_BIG };
		struct kvt_key k;
		char key[16];
		snprintf(key, sizeof(key), "big-%u", i);
		kvt_key_set(&k, key, strlen(key));
		T_RC(kc_put(&g, digest, &k, &iov, 1, NULL), KVT_OK);
	}
	for (unsigned i = 0; i < BUSY_GETS; i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = digest };
		struct proto_item it = { 0 };
		int small = 4096;
		char key[16];
		T_RC(kc_dial(&raw[i], srv.port, "alice", secret_text), 0);
		T_EQ_INT(setsockopt(raw[i].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
		snprintf(key, sizeof(key), "big-%u", i);
		kvt_key_set(&it.key, key, strlen(key));
		T_ASSERT(kc_request(&raw[i], &f, &it, 1, NULL, 0) > 0);
	}
	tsrv_sleep_ms(500);
	busy0 = t_stat(e, "remote.busy");
	err0 = t_stat(e, "remote.errors");
	miss0 = t_stat(e, "remote.misses");
	memset(back, 0, BUSY_X);
	T_RC(kvt_get(e, ns, &kx, back, BUSY_X, NULL), KVT_MISS);
	T_EQ_U64(t_stat(e, "remote.misses") - miss0, 1);
	busy_counts(e, busy0, err0, 1);
	for (unsigned i = 0; i < BUSY_GETS; i++)
		kc_close(&raw[i]);
	{
		/* Her pins go as the server sees the closes. */
		uint64_t end = tsrv_now_ns() + 10000000000ull;
		int rc;
		while ((rc = kvt_get(e, ns, &kx, back, BUSY_X, NULL)) == KVT_MISS &&
		       tsrv_now_ns() < end)
			tsrv_sleep_ms(20);
		T_RC(rc, KVT_OK);
		T_EQ_MEM(back, x, BUSY_X);
	}
	busy0 = t_stat(e, "remote.busy");
	err0 = t_stat(e, "remote.errors");

	/* Her values being received reserve her share. */
	{
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = digest };
		struct proto_item it = { 0 };
		struct iovec part = { big, 1024 };
		uint64_t len = BUSY_RESV;
		uint32_t crc = 0; /* never checked: the value never comes whole */
		T_RC(kc_dial(&r, srv.port, "alice", secret_text), 0);
		kvt_key_set(&it.key, "resv", 4);
		it.part_count = 1;
		it.part_lens = &len;
		it.part_crcs = &crc;
		T_ASSERT(kc_request(&r, &f, &it, 1, &part, 1) > 0);
	}
	tsrv_sleep_ms(300);
	failed0 = t_stat(e, "remote.puts_failed");
	t_fill(pv, BUSY_PUT, 71);
	{
		int rc = kvt_put(e, ns, &kp, &ppart, 1);
		fprintf(stderr, "busy: a put of 2 MiB beside a receive of 15 MiB: %s\n",
			kvt_strerror(rc));
		T_RC(rc, KVT_EBUSY);
	}
	T_EQ_U64(t_stat(e, "remote.puts_failed") - failed0, 1);
	busy_counts(e, busy0, err0, 1);
	kc_close(&r);
	{
		/* Tried again once her reservation is gone: stored. */
		uint64_t end = tsrv_now_ns() + 10000000000ull;
		int rc;
		while ((rc = kvt_put(e, ns, &kp, &ppart, 1)) == KVT_EBUSY && tsrv_now_ns() < end)
			tsrv_sleep_ms(20);
		T_RC(rc, KVT_OK);
	}
	memset(back, 0, BUSY_PUT);
	T_RC(kvt_get(e, ns, &kp, back, BUSY_PUT, NULL), KVT_OK);
	T_EQ_MEM(back, pv, BUSY_PUT);
	T_EQ_U64(t_stat(e, "remote.errors") - err0, 0);
	kc_close(&g);
	kvt_store_destroy(e);
	T_EQ_INT(tsrv_stop(&srv), 0);
	free(big);
	free(x);
	free(back);
	free(pv);
}

/* Options that cannot work are refused at open, with the reason logged. */
static void test_options(void)
{
	struct kvt_store *x;
	T_OK(kvt_store_create(&x));
	T_RC(kvt_store_set_option(x, "remote.conns", "0"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(x, "remote.nonsense", "1"), KVT_EOPTION);
	T_OK(kvt_store_set_option(x, "remote.addr", "no-port-here"));
	T_RC(kvt_store_open(x), KVT_EOPTVAL);
	kvt_store_destroy(x);
	T_OK(kvt_store_create(&x));
	T_OK(kvt_store_set_option(x, "dram.capacity", "0"));
	T_OK(kvt_store_set_option(x, "remote.addr", "127.0.0.1:1"));
	T_RC(kvt_store_open(x), KVT_EOPTVAL); /* the remote tier lands gets in DRAM */
	kvt_store_destroy(x);
}

/* Threads: several engine threads share one store and its pool. */
struct worker {
	struct kvt_store *s;
	uint32_t ns;
	unsigned id;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (uint64_t i = 0; i < 30; i++) {
		uint64_t id = 5000 + w->id * 100 + i;
		put_value(w->s, w->ns, id);
		T_ASSERT(get_check(w->s, w->ns, id) != KVT_TIER_NONE);
	}
	return NULL;
}

static void test_threads(const char *addr)
{
	struct kvt_store *a = engine(addr, "10000"), *b = engine(addr, "10000");
	uint32_t na = t_ns(a, "remote-threads"), nb = t_ns(b, "remote-threads");
	pthread_t th[4];
	struct worker w[4];
	wait_up(a);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ a, na, i };
		T_RC(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	/* Everything the four threads wrote, the other engine reads remotely. */
	for (unsigned t = 0; t < 4; t++)
		for (uint64_t i = 0; i < 30; i += 7)
			T_EQ_INT(get_check(b, nb, 5000 + t * 100 + i), KVT_TIER_REMOTE);
	T_EQ_U64(t_stat(a, "remote.errors"), 0);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
}

int main(int argc, char **argv)
{
	struct tsrv srv;
	char dir[600], addr[700];

	if (argc < 2)
		T_SKIP("usage: test_remote PATH-TO-KVTIERD");
	bin = argv[1];
	if (access(bin, X_OK) != 0)
		T_FAIL("%s is not executable", bin);
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/main", base);
	T_RC(mkdir(dir, 0700), 0);

	test_options();
	tsrv_start(&srv, bin, base, dir, NULL, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	test_share(addr);
	snprintf(addr, sizeof(addr), "unix:%s", srv.sock);
	test_threads(addr);
	test_failures(&srv, dir);
	T_EQ_INT(tsrv_stop(&srv), 0);
	test_reconnect();
	test_auth();
	test_busy();
	tsrv_check_reports(base);
	t_rmtree(base);
	printf("test_remote: ok\n");
	return 0;
}

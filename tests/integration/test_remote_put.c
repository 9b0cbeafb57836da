/*
 * test_remote_put.c - puts of the remote tier without staging, against a
 * real kvtierd.
 *
 * Usage: test_remote_put PATH-TO-KVTIERD
 *
 * What it proves:
 *   - with remote.put_local=never a put reaches the server and nothing
 *     else: no DRAM reservation, copy or publish (dram.puts, put_bytes,
 *     used_bytes, full_errors stay 0; remote.puts_only counts it), status
 *     KVT_OK with tier remote; another engine and this one read it back
 *     byte-exact; a second put of it is KVT_EXISTS; with the default
 *     (always) the same put lands in DRAM;
 *   - a value of 100 parts goes out in one sendmsg (remote.sends ==
 *     remote.frames_out), from the caller's parts;
 *   - a sealed namespace's put with remote.put_local=never seals into a
 *     buffer (DRAM untouched) and another engine with the key opens it;
 *   - the pool and striping rule: small values keep remote.conns
 *     connections, 1 MiB values (a mean past 512 KiB) grow the pool to remote.conns_max and a
 *     batch of them goes out in frames of about 4 MiB (remote.pool,
 *     remote.frames_out); a fixed pool stays;
 *   - a store destroyed while such puts wait on a stopped server releases
 *     everything and never touches the caller's parts afterwards
 *     (ASan/LSan: the parts are freed right after);
 *   - a server killed while such puts are in flight: each completes, by
 *     its deadline, with the server's failure (an errno such as -EIO or
 *     -ETIMEDOUT: stored nowhere), never KVT_OK nor KVT_EFULL (a full
 *     store, which it is not), and DRAM is still untouched; a put once
 *     nothing listens fails the same way (refused at once or by its
 *     connect), and remote.puts_failed counts each;
 *   - the window: with a pool of 2 connections and the server stopped,
 *     16 puts of 1 MiB submitted together put one frame of 4 MiB on each
 *     connection and the other 8 wait (remote.window_waits), instead of
 *     all 4 frames going at once; the rest go when answers come back
 *     (server continued), all stored;
 *   - one frame, one bad item: of 6 puts packed into one PUT frame, the
 *     one whose caller's CRC32C is wrong gets the server's failure and
 *     the other 5 KVT_OK, each its own item's answer; a cold engine
 *     reads the 5 back byte-exact and misses the bad one; the same with
 *     remote.crc_at_send on (the I/O thread computes the CRC32Cs of the 3
 *     puts that carry none, one of 3 parts at odd addresses, as it packs
 *     the frame): the server's check of every part passes for those, the
 *     caller's wrong CRC is still sent as given and refused;
 *   - no lost wake-up: the I/O thread is woken only while it sleeps, and
 *     20 puts one after the other complete in well under the thread's
 *     100 ms tick each (fastest of 3 rounds under 1 s);
 *   - with the default (always) the CRC32Cs a put sends are the ones its
 *     DRAM copy computed (remote.put_crc_bytes stays 0: the tier made no
 *     pass of its own), and they are right: the server checks every
 *     part's CRC32C and stored each value (a value of 1 MiB from an
 *     unaligned address, copied with streaming stores; one of 3 parts of
 *     odd lengths; a small one), which a cold engine reads back
 *     byte-exact, and so does this engine from its DRAM;
 *   - remote.put_local=auto, by the counters: puts the engine reads back
 *     keep their local copy even with DRAM full (store.put_local_skips
 *     stays 0, each read counted in store.put_local_reads); puts never
 *     read stop being copied within two epochs of 64 puts (skips,
 *     dram.puts + skips = puts), with no copies while skipping; reads of
 *     puts older than DRAM's capacity in bytes put since are not counted;
 *     once the engine reads back what it puts again (remote hits now, the
 *     puts skipped) the copies come back; each skipped put is on the
 *     server, byte-exact; a fresh engine that only puts copies its first
 *     16 puts at most and no more;
 *   - a prefix whose blocks lie partly in local DRAM only (a hole in the
 *     pod's copy of the chain) and partly on the pod only: the lookup
 *     walks back to local DRAM where the pod's run ends, and on to the
 *     pod again (all 5 blocks, by their tiers), where it used to stop at
 *     the hole (2), which made remote.put_local=auto lose hits; the walk
 *     back is counted (store.lookup_rounds 1 there, 0 where it stops);
 *   - delete and clear win over a put submitted before them: a DELETE of a
 *     key whose PUT still waits for the window (server stopped) is held
 *     until that PUT is answered, and a cold engine then misses the key
 *     (before: the DELETE went out first and found nothing, and the cold
 *     engine read the deleted block back); a CLEAR the same for every key
 *     of its namespace;
 *   - a get submitted while a DELETE is on its way, answered (with the
 *     block) before the server applied the DELETE and seen by the engine
 *     after the DELETE's answer, does not leave the deleted block in local
 *     DRAM: the delete completes (and the store passes over DRAM) only
 *     once that promotion was published; a get into buffers too small for
 *     the value does not publish it (before: every later get of it hit
 *     local DRAM, all three cases); a get after the delete completed is
 *     promoted as before (through a proxy that holds one connection's
 *     bytes in either direction; with one I/O lane, and with two, where
 *     the get's lane completes the delete);
 *   - a put of a key made after its delete (or its namespace's clear)
 *     was issued and before the DELETE's answer keeps its DRAM copy: a
 *     get then is a DRAM hit with the new bytes (before: the pass over
 *     DRAM at the delete's completion dropped it, tier remote), and a
 *     cold engine reads the new bytes from the server: the DELETE (CLEAR)
 *     goes out before the PUT on the connection and kvtierd applies them
 *     in that order (before, session 42: the PUT's frame went out first
 *     in about half the runs, and a CLEAR's walk removed a PUT stored
 *     behind it);
 *   - the same put on another connection of the pool than the DELETE's
 *     (CLEAR's), or another lane: it waits for the DELETE's answer
 *     (remote.put_waits), through a proxy that holds the DELETE on its
 *     way, and a cold engine reads the new bytes (before: the PUT reached
 *     the server first, KVT_EXISTS, and the DELETE removed X: a miss);
 *   - a get and an exists of X made while the DELETE of X (a CLEAR of its
 *     namespace) is on its way are misses at once, no frame sent
 *     (remote.gets_removed), with one lane and with two; a lookup of Y, X
 *     ends before X (1 hit; a CLEAR's, 0: no frame); a get of another
 *     key still hits (before: the get went out on the other connection,
 *     reached the server first and read X's deleted bytes);
 *   - a put that waited for a DELETE answered late (held behind an
 *     earlier put of its key, then on its way) has its own
 *     remote.timeout_ms from the end of its wait: stored, where it failed
 *     -ETIMEDOUT at its submission's deadline, never sent.
 */
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define VLEN (1u << 20)

static struct kvt_store *engine(const char *addr, const char *put_local, const char *timeout_ms)
{
	return tsrv_engine(addr, (const char *[]){ "remote.put_local", put_local,
						   "remote.timeout_ms", timeout_ms,
						   "remote.backoff_ms", "20",
						   "remote.backoff_max_ms", "200", NULL });
}

/* Local DRAM was never asked. */
static void dram_untouched(struct kvt_store *s)
{
	T_EQ_U64(t_stat(s, "dram.puts"), 0);
	T_EQ_U64(t_stat(s, "dram.put_bytes"), 0);
	T_EQ_U64(t_stat(s, "dram.used_bytes"), 0);
	T_EQ_U64(t_stat(s, "dram.full_errors"), 0);
	T_EQ_U64(t_stat(s, "dram.put_exists"), 0);
}

static struct kvt_req get_into(struct kvt_store *s, uint32_t ns, uint64_t id, uint8_t *dst,
			       size_t len)
{
	struct iovec iov = { dst, len };
	return t_req1(s, (struct kvt_req){ .op = KVT_OP_GET, .ns = ns, .key = t_key(id),
					   .iov = &iov, .iov_count = 1 });
}

static struct kvt_req put1(struct kvt_store *s, uint32_t ns, uint64_t id,
			   const struct iovec *parts, unsigned n)
{
	return t_req1(s, (struct kvt_req){ .op = KVT_OP_PUT, .ns = ns, .key = t_key(id),
					   .iov = parts, .iov_count = n });
}

/* A cold engine (a fresh store, local copies kept) reads X of the
 * namespace name from the server at addr: a hit with v's len bytes
 * (back: len bytes of the caller's). */
static void cold_get_is(const char *addr, const char *name, uint64_t x, uint8_t *back,
			const uint8_t *v, size_t len)
{
	struct kvt_store *c = engine(addr, "always", "5000");
	struct kvt_req g = get_into(c, t_ns(c, name), x, back, len);
	fprintf(stderr, "%s: a cold get of X: %s\n", name, kvt_strerror(g.status));
	T_RC(g.status, KVT_OK);
	T_EQ_MEM(back, v, len);
	kvt_store_destroy(c);
}

static void test_exact(const char *addr)
{
	enum { NP = 100, PLEN = 512 };
	struct kvt_store *a = engine(addr, "always", "5000"), *b = engine(addr, "never", "5000");
	uint32_t na = t_ns(a, "put"), nb = t_ns(b, "put");
	uint8_t *v = malloc(VLEN), *dst = malloc(VLEN);
	struct iovec parts[NP];
	struct kvt_req r;
	T_ASSERT(v && dst);

	/* A 1 MiB value: the server only. */
	t_fill(v, VLEN, 1);
	struct iovec one = { v, VLEN };
	r = put1(b, nb, 1, &one, 1);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	dram_untouched(b);
	T_EQ_U64(t_stat(b, "remote.puts_only"), 1);
	T_EQ_U64(t_stat(b, "remote.puts_stored"), 1);

	/* A value of 100 parts: one frame, one sendmsg (once the pool the
	 * 1 MiB value grew is up: handshakes are frames too). */
	for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < t_stat(b, "remote.pool"); i++)
		tsrv_sleep_ms(10);
	for (unsigned i = 0; i < NP; i++)
		parts[i] = (struct iovec){ dst + (size_t)i * PLEN, PLEN };
	t_fill(dst, (size_t)NP * PLEN, 2);
	uint64_t f0 = t_stat(b, "remote.frames_out"), s0 = t_stat(b, "remote.sends");
	r = put1(b, nb, 2, parts, NP);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	T_EQ_U64(t_stat(b, "remote.frames_out") - f0, 1);
	T_EQ_U64(t_stat(b, "remote.sends") - s0, 1);
	dram_untouched(b);
	T_EQ_U64(t_stat(b, "remote.puts_only"), 2);

	/* Present on the server: EXISTS, nothing stored twice. */
	r = put1(b, nb, 1, &one, 1);
	T_RC(r.status, KVT_EXISTS);
	dram_untouched(b);

	/* Byte-exact from another engine and from this one (received into
	 * the buffer, still not into DRAM). */
	memset(dst, 0, VLEN);
	r = get_into(a, na, 1, dst, VLEN);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	T_EQ_MEM(dst, v, VLEN);
	memset(dst, 0, VLEN);
	r = get_into(b, nb, 1, dst, VLEN);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	T_EQ_MEM(dst, v, VLEN);
	t_fill(v, (size_t)NP * PLEN, 2);
	memset(dst, 0, VLEN);
	r = get_into(a, na, 2, dst, VLEN);
	T_RC(r.status, KVT_OK);
	T_EQ_U64(r.length, (uint64_t)NP * PLEN);
	T_EQ_MEM(dst, v, (size_t)NP * PLEN);
	dram_untouched(b);

	/* The default: the same kind of put lands in DRAM too. */
	t_fill(v, VLEN, 3);
	r = put1(a, na, 3, &one, 1);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_DRAM);
	T_EQ_U64(t_stat(a, "dram.puts"), 1);
	T_EQ_U64(t_stat(a, "remote.puts_only"), 0);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* put_local=always: the DRAM copy computes the CRC32Cs the put sends. */
static void test_copy_crc(const char *addr)
{
	struct kvt_store *a = engine(addr, "always", "5000"), *b = engine(addr, "never", "5000");
	uint32_t na = t_ns(a, "copycrc"), nb = t_ns(b, "copycrc");
	uint8_t *v = malloc(VLEN + 64), *dst = malloc(VLEN + 64);
	const size_t lens[3] = { 300001, 5, 400000 }; /* 700006 bytes */
	struct iovec vals[3][3] = {
		{ { v + 7, VLEN } },                       /* unaligned, streamed */
		{ { v + 1, lens[0] }, { v + 300100, lens[1] }, { v + 300200, lens[2] } },
		{ { v + 3, 4096 } },                       /* small: plain copy */
	};
	const unsigned counts[3] = { 1, 3, 1 };
	struct kvt_req r;
	T_ASSERT(v && dst);

	for (unsigned k = 0; k < 3; k++) {
		t_fill(v, VLEN + 64, 40 + k);
		r = put1(a, na, 40 + k, vals[k], counts[k]);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_DRAM);
		T_EQ_U64(t_stat(a, "remote.puts_stored"), k + 1); /* the server's check passed */
		T_EQ_U64(t_stat(a, "remote.put_crc_bytes"), 0);   /* no pass of the tier's */
		/* Byte-exact on the server (a cold engine) and in this DRAM. */
		uint64_t len = 0;
		for (unsigned p = 0; p < counts[k]; p++)
			len += vals[k][p].iov_len;
		for (int from = 0; from < 2; from++) {
			uint64_t off = 0;
			memset(dst, 0, VLEN);
			r = from ? get_into(a, na, 40 + k, dst, VLEN) : get_into(b, nb, 40 + k, dst, VLEN);
			T_RC(r.status, KVT_OK);
			T_EQ_INT(r.tier, from ? KVT_TIER_DRAM : KVT_TIER_REMOTE);
			T_EQ_U64(r.length, len);
			for (unsigned p = 0; p < counts[k]; p++) {
				T_EQ_MEM(dst + off, vals[k][p].iov_base, vals[k][p].iov_len);
				off += vals[k][p].iov_len;
			}
		}
	}
	T_EQ_U64(t_stat(a, "remote.crc_errors"), 0);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

/* A sealed namespace: the ciphertext goes out from a buffer, not from
 * DRAM, and another engine with the key opens it byte-exact. */
static void test_sealed(const char *addr)
{
	struct kvt_store *a = engine(addr, "always", "5000"), *b = engine(addr, "never", "5000");
	uint32_t na = t_ns(a, "sealed-put"), nb = t_ns(b, "sealed-put");
	uint8_t m[32], *v = malloc(VLEN), *dst = malloc(VLEN);
	struct kvt_key k = t_key(700);
	T_ASSERT(v && dst);
	t_fill(m, sizeof(m), 77);
	T_OK(kvt_ns_set_seal_key(a, na, m, 32));
	T_OK(kvt_ns_set_seal_key(b, nb, m, 32));
	t_fill(v, VLEN, 700);
	struct iovec parts[3] = { { v, VLEN / 3 }, { v + VLEN / 3, VLEN / 3 },
				  { v + 2 * (VLEN / 3), VLEN - 2 * (VLEN / 3) } };
	struct kvt_req r = put1(b, nb, 700, parts, 3);
	T_RC(r.status, KVT_OK);
	T_EQ_INT(r.tier, KVT_TIER_REMOTE);
	dram_untouched(b);
	T_RC(kvt_get(a, na, &k, dst, VLEN, NULL), KVT_OK);
	T_EQ_MEM(dst, v, VLEN);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	free(v);
	free(dst);
}

enum { NPUT = 8 };

/* n puts of 1 MiB submitted on q; the requests and values are the caller's. */
static void put_batch(struct kvt_queue *q, uint32_t ns, uint64_t id0, struct kvt_req *reqs,
		      struct iovec *parts, uint8_t **vals, int n)
{
	for (int i = 0; i < n; i++) {
		vals[i] = malloc(VLEN);
		T_ASSERT(vals[i]);
		t_fill(vals[i], VLEN, id0 + (uint64_t)i);
		parts[i] = (struct iovec){ vals[i], VLEN };
		reqs[i] = (struct kvt_req){ .op = KVT_OP_PUT, .ns = ns, .key = t_key(id0 + (uint64_t)i),
					    .iov = &parts[i], .iov_count = 1 };
	}
	t_submit_all(q, reqs, (unsigned)n);
}

/* An engine with remote.put_local=never and the deadline timeout_ms, its
 * namespace registered on the server (a put of one byte, key id), then
 * the server stopped (SIGSTOP, every thread), and a queue for puts. */
struct stopped {
	struct kvt_store *s;
	uint32_t ns;
	struct kvt_queue *q;
};

static struct stopped stopped_server(struct tsrv *srv, const char *addr, const char *timeout_ms,
				     uint64_t id)
{
	struct stopped st = { .s = engine(addr, "never", timeout_ms) };
	uint8_t x = (uint8_t)id;
	struct iovec one = { &x, 1 };

	st.ns = t_ns(st.s, "put");
	T_RC(put1(st.s, st.ns, id, &one, 1).status, KVT_OK);
	T_RC(kill(srv->pid, SIGSTOP), 0);
	tsrv_wait_stopped(srv->pid);
	T_OK(kvt_queue_create(st.s, &st.q));
	return st;
}

/* Destroyed while its puts wait on a stopped server. */
static void test_close(struct tsrv *srv, const char *addr)
{
	struct stopped st = stopped_server(srv, addr, "30000", 99);
	struct kvt_store *b = st.s;
	struct kvt_req reqs[NPUT];
	struct iovec parts[NPUT];
	uint8_t *vals[NPUT];

	uint64_t o0 = t_stat(b, "remote.bytes_out");
	put_batch(st.q, st.ns, 200, reqs, parts, vals, NPUT);
	/* Some of the values went into the socket, the rest wait for room. */
	for (int i = 0; i < 500 && t_stat(b, "remote.bytes_out") - o0 < VLEN / 2; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(t_stat(b, "remote.bytes_out") - o0 >= VLEN / 2);
	dram_untouched(b);
	kvt_store_destroy(b); /* frees q; the puts fail, nobody reads the parts after */
	for (int i = 0; i < NPUT; i++)
		free(vals[i]);
	T_RC(kill(srv->pid, SIGCONT), 0);
}

/* A put local DRAM did not take, failed by the server: its error, not
 * "full" (before: KVT_EFULL, the server's failure lost). */
static void assert_server_failure(int status)
{
	if (status >= 0 || status == KVT_EFULL)
		T_FAIL("put status %d (%s): want the server's failure", status,
		       kvt_strerror(status));
}

/* Killed while puts are in flight: each completes with the server's
 * failure; so does one once nothing listens. */
static void test_down(struct tsrv *srv, const char *addr)
{
	struct stopped st = stopped_server(srv, addr, "1000", 98);
	struct kvt_store *b = st.s;
	struct kvt_queue *q = st.q;
	uint32_t nb = st.ns;
	struct kvt_req reqs[NPUT];
	struct iovec parts[NPUT];
	uint8_t *vals[NPUT];
	uint8_t x = 2;
	struct iovec one = { &x, 1 };

	put_batch(q, nb, 300, reqs, parts, vals, NPUT);
	tsrv_sleep_ms(50);
	uint64_t t0 = t_now_ms();
	tsrv_kill9(srv);
	t_wait_all(q, NPUT);
	T_ASSERT(t_now_ms() - t0 < 5000);
	for (int i = 0; i < NPUT; i++)
		assert_server_failure(reqs[i].status);
	dram_untouched(b);
	T_EQ_U64(t_stat(b, "remote.puts_only"), 1 + NPUT);
	T_EQ_U64(t_stat(b, "remote.puts_failed"), NPUT);
	/* Nothing listens now: refused at once (the server marked down) or
	 * by the connect. */
	int after = put1(b, nb, 310, &one, 1).status;
	assert_server_failure(after);
	dram_untouched(b);
	fprintf(stderr, "server killed: puts in flight failed with %s; the next put with %s\n",
		kvt_strerror(reqs[0].status), kvt_strerror(after));
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	for (int i = 0; i < NPUT; i++)
		free(vals[i]);
}

/* The pool and striping rule at work: small values keep remote.conns
 * (2); 1 MiB values grow the pool to remote.conns_max (4), and a batch of
 * 16 of them goes out in frames of about 4 MiB, byte-exact; a fixed pool
 * (conns_max = conns) stays. */
static void test_pool(const char *addr)
{
	enum { N = 16 };
	struct kvt_store *b = engine(addr, "never", "10000");
	uint32_t nb = t_ns(b, "pool");
	struct kvt_req reqs[N];
	struct iovec parts[N];
	uint8_t *vals[N], small[4096];
	struct kvt_queue *q;
	struct iovec one = { small, sizeof(small) };

	T_EQ_U64(t_stat(b, "remote.pool"), 2);
	for (int i = 0; i < N; i++) {
		t_fill(small, sizeof(small), 500 + (uint64_t)i);
		T_RC(put1(b, nb, 500 + (uint64_t)i, &one, 1).status, KVT_OK);
	}
	T_EQ_U64(t_stat(b, "remote.pool"), 2);

	T_OK(kvt_queue_create(b, &q));
	uint64_t f0 = t_stat(b, "remote.frames_out");
	for (int i = 0; i < N; i++) {
		vals[i] = malloc(VLEN);
		T_ASSERT(vals[i]);
		t_fill(vals[i], VLEN, 600 + (uint64_t)i);
		parts[i] = (struct iovec){ vals[i], VLEN };
		reqs[i] = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(600 + (uint64_t)i),
					    .iov = &parts[i], .iov_count = 1 };
	}
	t_run_batch(q, reqs, N);
	uint64_t frames = t_stat(b, "remote.frames_out") - f0;
	fprintf(stderr, "%d puts of 1 MiB went out in %llu frames\n", N, (unsigned long long)frames);
	T_ASSERT(frames >= N / 4 && frames <= N);
	for (int i = 0; i < N; i++)
		T_RC(reqs[i].status, KVT_OK);
	T_EQ_U64(t_stat(b, "remote.pool"), 4);
	for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 4; i++)
		tsrv_sleep_ms(10);
	T_EQ_U64(t_stat(b, "remote.conns_up"), 4);
	/* Read back over the grown pool, byte-exact. */
	uint8_t *dst = malloc(VLEN);
	T_ASSERT(dst);
	for (int i = 0; i < N; i++) {
		memset(dst, 0, VLEN);
		struct kvt_req r = get_into(b, nb, 600 + (uint64_t)i, dst, VLEN);
		T_RC(r.status, KVT_OK);
		T_EQ_MEM(dst, vals[i], VLEN);
	}
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);

	/* A fixed pool stays as it is. */
	struct kvt_store *c = t_store_open("dram.capacity", "16M", "dram.prefault", "off",
					   "remote.addr", addr, "remote.conns", "2",
					   "remote.conns_max", "2", NULL);
	uint32_t nc = t_ns(c, "pool");
	memset(dst, 0, VLEN);
	T_RC(get_into(c, nc, 600, dst, VLEN).status, KVT_OK);
	T_EQ_MEM(dst, vals[0], VLEN);
	T_EQ_U64(t_stat(c, "remote.pool"), 2);
	kvt_store_destroy(c);
	for (int i = 0; i < N; i++)
		free(vals[i]);
	free(dst);
}

/* remote.put_local=auto (opt-in), by its counters: DRAM of 2 MiB,
 * values of 64 KiB (32 fit). */
static void test_auto(const char *addr)
{
	enum { AL = 64 << 10, NA = 96, NB = 128, NC = 256, ND = 64 };
	const char *opts[] = { "dram.capacity", "2M", "remote.put_local", "auto",
			       "remote.timeout_ms", "5000", NULL };
	struct kvt_store *s = tsrv_engine(addr, opts);
	uint32_t ns = t_ns(s, "auto");
	uint8_t *v = malloc(AL), *dst = malloc(AL);
	struct iovec one = { v, AL };
	struct kvt_req r;
	uint64_t id = 1000, skips, puts0, reads;
	T_ASSERT(v && dst);

	/* A: every put read back (a DRAM hit) before the next: DRAM fills and
	 * evicts, but each put was read, so every put keeps its copy. */
	for (int i = 0; i < NA; i++, id++) {
		t_fill(v, AL, id);
		r = put1(s, ns, id, &one, 1);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_DRAM);
		r = get_into(s, ns, id, dst, AL);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_DRAM);
	}
	T_ASSERT(t_stat(s, "dram.evictions") > 0);
	T_EQ_U64(t_stat(s, "store.put_local_skips"), 0);
	T_EQ_U64(t_stat(s, "store.put_local_skipping"), 0);
	T_EQ_U64(t_stat(s, "store.put_local_reads"), NA);
	T_EQ_U64(t_stat(s, "dram.puts"), NA);

	/* B: puts never read.  Once the last two epochs' puts were read less
	 * than one in 16 (A's reads age out within 2 x 64 puts), puts skip
	 * DRAM, every one of them, sent from the caller's parts only. */
	puts0 = t_stat(s, "dram.puts");
	uint64_t first = id;
	for (int i = 0; i < NB; i++, id++) {
		t_fill(v, AL, id);
		r = put1(s, ns, id, &one, 1);
		T_RC(r.status, KVT_OK);
	}
	skips = t_stat(s, "store.put_local_skips");
	T_EQ_U64(t_stat(s, "store.put_local_skipping"), 1);
	T_ASSERT(skips >= NB / 8);
	T_ASSERT(skips <= NB / 2);
	T_EQ_U64(t_stat(s, "dram.puts") - puts0 + skips, NB);
	T_EQ_U64(t_stat(s, "remote.puts_only"), skips);
	/* B's first puts are 8 MiB of puts old, DRAM is 2 MiB: their reads
	 * are not reads of recent puts.  The last ones were skipped: on the
	 * server, exact, and (within 2 MiB) counted. */
	reads = t_stat(s, "store.put_local_reads");
	for (uint64_t k = first; k < first + 4; k++)
		T_RC(get_into(s, ns, k, dst, AL).status, KVT_OK);
	T_EQ_U64(t_stat(s, "store.put_local_reads"), reads);
	for (uint64_t k = first + NB - 4; k < first + NB; k++) {
		memset(dst, 0, AL);
		r = get_into(s, ns, k, dst, AL);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_REMOTE);
		t_fill(v, AL, k);
		T_EQ_MEM(dst, v, AL);
	}
	T_EQ_U64(t_stat(s, "store.put_local_reads"), reads + 4);

	/* C: the engine reads back what it puts again: the skipped puts' reads
	 * (remote hits) bring the copies back within two epochs. */
	int i;
	for (i = 0; i < NC && t_stat(s, "store.put_local_skipping"); i++, id++) {
		t_fill(v, AL, id);
		r = put1(s, ns, id, &one, 1);
		T_RC(r.status, KVT_OK);
		T_RC(get_into(s, ns, id, dst, AL).status, KVT_OK);
	}
	T_ASSERT(i <= 2 * 64);
	T_EQ_U64(t_stat(s, "store.put_local_skipping"), 0);
	puts0 = t_stat(s, "dram.puts");
	skips = t_stat(s, "store.put_local_skips");
	for (i = 0; i < 8; i++, id++) {
		t_fill(v, AL, id);
		r = put1(s, ns, id, &one, 1);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_DRAM);
		T_RC(get_into(s, ns, id, dst, AL).status, KVT_OK);
	}
	T_EQ_U64(t_stat(s, "dram.puts") - puts0, 8);
	T_EQ_U64(t_stat(s, "store.put_local_skips"), skips);
	kvt_store_destroy(s);

	/* D: a fresh engine that only puts: its first 16 puts at most are
	 * copied, then none. */
	s = tsrv_engine(addr, opts);
	ns = t_ns(s, "auto");
	for (i = 0; i < ND; i++, id++) {
		t_fill(v, AL, id);
		T_RC(put1(s, ns, id, &one, 1).status, KVT_OK);
	}
	T_ASSERT(t_stat(s, "dram.puts") <= 16);
	T_EQ_U64(t_stat(s, "dram.puts") + t_stat(s, "store.put_local_skips"), ND);
	T_EQ_U64(t_stat(s, "store.put_local_reads"), 0);
	kvt_store_destroy(s);
	free(v);
	free(dst);
}

/* Keys 0-1 and 4 on the pod only, 2-3 in a's DRAM only: the prefix is all 5. */
static void test_holes(const char *addr)
{
	enum { HL = 4096 };
	struct kvt_store *a = engine(addr, "always", "5000"), *b = engine(addr, "never", "5000");
	uint32_t na = t_ns(a, "holes"), nb = t_ns(b, "holes");
	uint8_t v[HL];
	struct iovec one = { v, HL };
	struct kvt_key keys[5];
	uint8_t tiers[5];
	const uint8_t want[5] = { KVT_TIER_REMOTE, KVT_TIER_REMOTE, KVT_TIER_DRAM, KVT_TIER_DRAM,
				  KVT_TIER_REMOTE };

	for (uint64_t i = 0; i < 5; i++) {
		keys[i] = t_key(7000 + i);
		t_fill(v, HL, 7000 + i);
		struct kvt_store *s = i == 2 || i == 3 ? a : b;
		T_RC(put1(s, s == a ? na : nb, 7000 + i, &one, 1).status, KVT_OK);
	}
	/* 2 and 3 are gone from the pod (b has no local copy to delete). */
	T_RC(t_req1(b, (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = keys[2] }).status,
	     KVT_OK);
	T_RC(t_req1(b, (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = keys[3] }).status,
	     KVT_OK);
	T_EQ_INT((int)kvt_lookup_prefix(b, nb, keys, 5, NULL), 2);
	T_EQ_U64(t_stat(b, "store.lookup_rounds"), 0);
	T_EQ_INT((int)kvt_lookup_prefix(a, na, keys, 5, tiers), 5);
	for (int i = 0; i < 5; i++)
		T_EQ_INT(tiers[i], want[i]);
	T_EQ_U64(t_stat(a, "store.lookup_rounds"), 1);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
}

/* Wake-ups: the I/O thread is woken by a submission only while it sleeps
 * (a running thread takes what was queued before it sleeps again).  A
 * submission that found it asleep and did not wake it would wait for the
 * thread's 100 ms tick: 20 puts one after the other (each submitted once
 * the last completed, as an engine refills its slots) would take 2 s or
 * more.  The fastest of 3 rounds must be under 1 s (a few ms each here,
 * under TSan too: doc/testing.md). */
static void test_wakeups(const char *addr)
{
	struct kvt_store *b = engine(addr, "never", "5000");
	uint32_t nb = t_ns(b, "wakeups");
	uint64_t best = UINT64_MAX;
	uint8_t x = 9;
	struct iovec one = { &x, 1 };

	T_RC(put1(b, nb, 900, &one, 1).status, KVT_OK); /* namespace registered */
	for (int round = 0; round < 3; round++) {
		uint64_t t0 = t_now_ms();
		for (int i = 0; i < 20; i++)
			T_RC(put1(b, nb, 901 + (uint64_t)(round * 20 + i), &one, 1).status, KVT_OK);
		uint64_t ms = t_now_ms() - t0;
		if (ms < best)
			best = ms;
	}
	fprintf(stderr, "20 puts one after the other: %llu ms (fastest of 3)\n",
		(unsigned long long)best);
	T_ASSERT(best < 1000);
	kvt_store_destroy(b);
}

/* One frame, one bad item: 6 puts of 64 KiB submitted together go out in
 * one PUT frame; the 4th carries a wrong CRC32C (the caller's, KVT_F_CRC),
 * which the server refuses for that item only.  Each put gets its own
 * item's answer: the 4th the server's failure, never KVT_OK or another
 * item's success, the other 5 KVT_OK; a cold engine then reads the 5
 * back byte-exact and misses the 4th.  The 1st, 3rd and 5th carry no CRC
 * (the tier computes it: on the caller's thread, or with at_send on the
 * I/O thread as it packs this frame), the 1st in 3 parts of odd lengths
 * from odd addresses; the server checks every part's CRC32C, so a CRC
 * computed over other bytes than those sent fails the put, and a
 * caller's CRC the tier replaced by its own would store the 4th. */
static void test_mixed(const char *addr, const char *at_send)
{
	enum { M = 6, BAD = 3, MLEN = 64 << 10 };
	struct kvt_store *b = tsrv_engine(addr, (const char *[]){ "remote.put_local", "never",
								   "remote.timeout_ms", "5000",
								   "remote.crc_at_send", at_send,
								   NULL });
	uint32_t nb = t_ns(b, at_send[1] == 'n' ? "mixed-on" : "mixed");
	struct kvt_req reqs[M];
	struct iovec parts[M];
	uint32_t crcs[M];
	uint8_t *vals[M], *back = malloc(MLEN);
	struct kvt_queue *q;
	uint8_t x = 5;
	struct iovec one = { &x, 1 };
	uint64_t tier_crc_bytes = 0;

	T_ASSERT(back);
	T_RC(put1(b, nb, 800, &one, 1).status, KVT_OK); /* namespace registered */
	uint64_t c0 = t_stat(b, "remote.put_crc_bytes");
	for (int i = 0; i < M; i++) {
		vals[i] = malloc(MLEN + 16);
		T_ASSERT(vals[i]);
		t_fill(vals[i], MLEN + 16, 810 + (uint64_t)i);
		parts[i] = (struct iovec){ vals[i], MLEN };
		crcs[i] = kvt_crc32c(0, vals[i], MLEN) ^ (i == BAD ? 1u : 0u);
		reqs[i] = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .flags = KVT_F_CRC,
					    .key = t_key(810 + (uint64_t)i), .iov = &parts[i],
					    .iov_count = 1, .crcs = &crcs[i] };
		if (i % 2 == 0) {
			reqs[i].flags = 0;
			reqs[i].crcs = NULL;
			tier_crc_bytes += MLEN;
		}
	}
	/* The 1st: 3 parts (1 + 30001 + 35534 bytes at odd offsets), the
	 * value read back being their concatenation. */
	uint8_t *v0 = vals[0];
	struct iovec three[3] = { { v0 + 1, 1 }, { v0 + 3, 30001 }, { v0 + 30005, MLEN - 30002 } };
	reqs[0].iov = three;
	reqs[0].iov_count = 3;
	T_OK(kvt_queue_create(b, &q));
	uint64_t f0 = t_stat(b, "remote.frames_out");
	t_run_batch(q, reqs, M);
	fprintf(stderr, "crc_at_send %s: %d puts, one with a bad CRC32C, went out in %llu frames\n",
		at_send, M, (unsigned long long)(t_stat(b, "remote.frames_out") - f0));
	T_EQ_U64(t_stat(b, "remote.frames_out") - f0, 1);
	for (int i = 0; i < M; i++) {
		if (i == BAD)
			assert_server_failure(reqs[i].status);
		else
			T_RC(reqs[i].status, KVT_OK);
	}
	/* The tier's own passes: the 3 values without a caller's CRC. */
	T_EQ_U64(t_stat(b, "remote.put_crc_bytes") - c0, tier_crc_bytes);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);

	struct kvt_store *c = engine(addr, "never", "5000");
	uint32_t nc = t_ns(c, at_send[1] == 'n' ? "mixed-on" : "mixed");
	for (int i = 0; i < M; i++) {
		struct kvt_req g = get_into(c, nc, 810 + (uint64_t)i, back, MLEN);
		if (i == BAD) {
			T_RC(g.status, KVT_MISS);
			continue;
		}
		T_RC(g.status, KVT_OK);
		T_EQ_U64(g.length, MLEN);
		if (i == 0) {
			T_EQ_MEM(back, three[0].iov_base, 1);
			T_EQ_MEM(back + 1, three[1].iov_base, 30001);
			T_EQ_MEM(back + 30002, three[2].iov_base, MLEN - 30002);
		} else {
			T_EQ_MEM(back, vals[i], MLEN);
		}
	}
	kvt_store_destroy(c);
	for (int i = 0; i < M; i++)
		free(vals[i]);
	free(back);
}

/* An engine over addr with its two connections up (puts never local, a
 * 30 s timeout), namespace name registered with block id put, then the
 * server stopped (SIGSTOP): what is submitted next waits.  *nb: the
 * namespace. */
static struct kvt_store *two_conns_stopped(struct tsrv *srv, const char *addr, const char *name,
					   uint64_t id, uint32_t *nb)
{
	struct kvt_store *b = tsrv_engine(addr, (const char *[]){ "remote.put_local", "never",
								   "remote.timeout_ms", "30000",
								   "remote.conns", "2",
								   "remote.conns_max", "2", NULL });
	uint8_t x = 3;
	struct iovec one = { &x, 1 };

	*nb = t_ns(b, name);
	T_RC(put1(b, *nb, id, &one, 1).status, KVT_OK); /* namespace registered */
	for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 2; i++)
		tsrv_sleep_ms(10);
	T_EQ_U64(t_stat(b, "remote.conns_up"), 2);
	T_RC(kill(srv->pid, SIGSTOP), 0);
	tsrv_wait_stopped(srv->pid);
	return b;
}

/* The per-connection window (remote.c, the pool and striping rule). */
static void test_window(struct tsrv *srv, const char *addr)
{
	enum { N = 16 };
	uint32_t nb;
	struct kvt_store *b = two_conns_stopped(srv, addr, "window", 700, &nb);
	struct kvt_req reqs[N];
	struct iovec parts[N];
	uint8_t *vals[N];
	struct kvt_queue *q;

	T_OK(kvt_queue_create(b, &q));
	uint64_t f0 = t_stat(b, "remote.frames_out"), w0 = t_stat(b, "remote.window_waits");
	put_batch(q, nb, 710, reqs, parts, vals, N);
	/* Until the puts past the window all wait (TSan counted 6 of 8 by
	 * the time the first wait was seen: this waited for that one only). */
	for (int i = 0; i < 500 && t_stat(b, "remote.window_waits") - w0 < N / 2; i++)
		tsrv_sleep_ms(10);
	/* Without the window all 4 frames of 4 MiB would be queued on the
	 * connections at once and nothing would wait. */
	uint64_t waits = t_stat(b, "remote.window_waits") - w0;
	fprintf(stderr, "server stopped: %llu waits of puts for a window\n",
		(unsigned long long)waits);
	T_ASSERT(waits >= N / 2);
	T_RC(kill(srv->pid, SIGCONT), 0);
	t_wait_all(q, N);
	for (int i = 0; i < N; i++)
		T_RC(reqs[i].status, KVT_OK);
	T_ASSERT(t_stat(b, "remote.frames_out") - f0 >= 4);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	for (int i = 0; i < N; i++)
		free(vals[i]);
}

/*
 * Delete and clear win over a put that started before them (design.md
 * "Semantics"): with the server stopped, 8 puts of 1 MiB fill the window
 * of both connections and a 9th (key X) waits for it; a DELETE of X (or a
 * CLEAR of its namespace) submitted then used to go out at once, be
 * answered (nothing there) before X was even sent, and X landed on the
 * server after it: a cold engine then read the deleted block back.  Now
 * the delete waits until the puts before it of its key (the clear: of its
 * namespace) were answered, and nothing it removed comes back.
 */
static void test_delete_wins(struct tsrv *srv, const char *addr, bool clear)
{
	enum { N = 9 };
	const char *name = clear ? "delete-wins-clear" : "delete-wins";
	uint64_t base = clear ? 900 : 800, x = base + N - 1;
	uint32_t nb;
	struct kvt_store *b = two_conns_stopped(srv, addr, name, base + 99, &nb);
	struct kvt_req reqs[N], del;
	struct iovec parts[N];
	uint8_t *vals[N];
	struct kvt_queue *q;

	T_OK(kvt_queue_create(b, &q));
	uint64_t w0 = t_stat(b, "remote.window_waits");
	put_batch(q, nb, base, reqs, parts, vals, N);
	for (int i = 0; i < 500 && t_stat(b, "remote.window_waits") == w0; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(t_stat(b, "remote.window_waits") > w0); /* X waits for the window */
	del = (struct kvt_req){ .op = clear ? KVT_OP_CLEAR : KVT_OP_DELETE, .ns = nb,
				.key = t_key(x) };
	t_submit_all(q, &del, 1);
	tsrv_sleep_ms(200); /* the old code sent the DELETE now */
	T_RC(kill(srv->pid, SIGCONT), 0);
	t_wait_all(q, N + 1);
	for (int i = 0; i < N; i++)
		T_RC(reqs[i].status, KVT_OK);
	{
		struct kvt_store *c = engine(addr, "always", "5000");
		uint32_t nc = t_ns(c, name);
		uint8_t *buf = malloc(VLEN);
		T_ASSERT(buf);
		struct kvt_req g = get_into(c, nc, x, buf, VLEN);
		fprintf(stderr, "%s after puts waiting for the window: a cold get of X: %s\n",
			clear ? "clear" : "delete", kvt_strerror(g.status));
		T_RC(g.status, KVT_MISS);
		if (clear)
			for (uint64_t i = 0; i < N; i++)
				T_RC(get_into(c, nc, base + i, buf, VLEN).status, KVT_MISS);
		else
			T_RC(get_into(c, nc, base, buf, VLEN).status, KVT_OK);
		free(buf);
		kvt_store_destroy(c);
	}
	T_RC(del.status, KVT_OK); /* it removed X: X was stored first */
	if (clear)
		T_ASSERT(del.length >= N);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	for (int i = 0; i < N; i++)
		free(vals[i]);
}

/*
 * A delete wins over a promotion from the server in flight: with one
 * connection and the server stopped, a prefetch of X (the server holds
 * it, local DRAM does not) is sent, then a DELETE of X.  The server
 * answers the GET (X) and then the DELETE; the GET's answer used to be
 * published in local DRAM after the delete's passes over DRAM, and every
 * later get of X hit it there.  Now the store passes over DRAM again when
 * the DELETE completes, which is once its answer came and every promotion
 * of X submitted before that answer was published (remove_hold in
 * remote.c; coher25's fix, earlier on 2026-12-04, held the DELETE back
 * until the promotion was answered instead).
 */
static void test_delete_vs_promotion(struct tsrv *srv, const char *addr)
{
	struct kvt_store *b = tsrv_engine(addr, (const char *[]){ "remote.put_local", "never",
								   "remote.timeout_ms", "30000",
								   "remote.conns", "1",
								   "remote.conns_max", "1", NULL });
	uint32_t nb = t_ns(b, "delete-vs-promotion");
	uint64_t x = 950;
	uint8_t *v = malloc(VLEN);
	struct iovec part = { v, VLEN };
	struct kvt_key key = t_key(x);
	struct kvt_req reqs[2];
	struct kvt_queue *q;

	T_ASSERT(v);
	t_fill(v, VLEN, x);
	T_RC(put1(b, nb, x, &part, 1).status, KVT_OK); /* on the server only */
	T_RC(kill(srv->pid, SIGSTOP), 0);
	tsrv_wait_stopped(srv->pid);
	T_OK(kvt_queue_create(b, &q));
	reqs[0] = (struct kvt_req){ .op = KVT_OP_PREFETCH, .ns = nb, .keys = &key, .key_count = 1 };
	reqs[1] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = key };
	t_submit_all(q, &reqs[0], 1);
	tsrv_sleep_ms(100);
	t_submit_all(q, &reqs[1], 1);
	tsrv_sleep_ms(200);
	T_RC(kill(srv->pid, SIGCONT), 0);
	t_wait_all(q, 2);
	T_RC(reqs[1].status, KVT_OK);
	{
		struct kvt_req g = get_into(b, nb, x, v, VLEN);
		fprintf(stderr, "delete racing a promotion: a get of X after it: %s (tier %d)\n",
			kvt_strerror(g.status), g.tier);
		T_RC(g.status, KVT_MISS);
	}
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	free(v);
}

/*
 * A put made after a delete (clear) was issued and before its answer
 * keeps its DRAM copy (session 42): with one connection and the server
 * stopped, X (in DRAM and on the server) is deleted -- the store's first
 * pass over DRAM done, the DELETE on its way -- and put again with new
 * bytes, which land in DRAM and follow the DELETE to the server.  The
 * store's pass over DRAM once the DELETE completed (store_del_done, for
 * a promotion that raced it) used to delete the new put's copy too: the
 * next get of X went to the server, a miss where it had applied the two
 * at once in the other order (seen in most runs), where the engine had
 * just put X locally.  Now that pass removes only what a promotion
 * published: the get is a DRAM hit with the new bytes.
 */
static void test_delete_then_put(struct tsrv *srv, const char *addr, bool clear)
{
	enum { XLEN = 64u << 10 };
	const char *name = clear ? "clear-then-put" : "delete-then-put";
	struct kvt_store *b = tsrv_engine(addr, (const char *[]){ "remote.timeout_ms", "30000",
								   "remote.conns", "1",
								   "remote.conns_max", "1", NULL });
	uint32_t nb = t_ns(b, name);
	uint64_t x = clear ? 1010 : 1000;
	uint8_t *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req del, put;
	struct kvt_queue *q;
	const char *sent = clear ? "remote.clears" : "remote.deletes";

	T_ASSERT(v && back);
	t_fill(v, XLEN, x);
	T_RC(put1(b, nb, x, &part, 1).status, KVT_OK); /* DRAM and the server */
	T_RC(kill(srv->pid, SIGSTOP), 0);
	tsrv_wait_stopped(srv->pid);
	T_OK(kvt_queue_create(b, &q));
	uint64_t d0 = t_stat(b, sent), p0 = t_stat(b, "dram.puts");
	del = (struct kvt_req){ .op = clear ? KVT_OP_CLEAR : KVT_OP_DELETE, .ns = nb,
				.key = t_key(x) };
	t_submit_all(q, &del, 1);
	/* The first pass over DRAM is done once the DELETE is submitted. */
	for (int i = 0; i < 500 && t_stat(b, sent) == d0; i++)
		tsrv_sleep_ms(2);
	T_ASSERT(t_stat(b, sent) > d0);
	t_fill(v, XLEN, x + 1);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(q, &put, 1);
	for (int i = 0; i < 500 && t_stat(b, "dram.puts") == p0; i++)
		tsrv_sleep_ms(2);
	T_EQ_U64(t_stat(b, "dram.puts"), p0 + 1); /* the new bytes in DRAM */
	T_RC(kill(srv->pid, SIGCONT), 0);
	t_wait_all(q, 2);
	T_RC(del.status, KVT_OK);
	T_RC(put.status, KVT_OK);
	{
		struct kvt_req g = get_into(b, nb, x, back, XLEN);
		fprintf(stderr, "%s: a get of X put again before the answer: %s (tier %d)\n", name,
			kvt_strerror(g.status), g.tier);
		T_RC(g.status, KVT_OK);
		T_EQ_INT(g.tier, KVT_TIER_DRAM); /* before: a miss */
		T_EQ_MEM(back, v, XLEN);
	}
	/* Another engine: the new bytes.  The DELETE (CLEAR) and the PUT go
	 * out on the one connection in that order, and kvtierd applies them
	 * in it (doc/protocol.md section 2, "Writes of one connection").
	 * Before (session 42) a miss: the engine sent the PUT's frame first
	 * when its I/O thread took both in one pass (about half the runs),
	 * and the server stored the PUT before a CLEAR's walk, which then
	 * removed it (most runs). */
	cold_get_is(addr, name, x, back, v, XLEN);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	free(back);
	free(v);
}

/*
 * The engine of the proxy tests below: two connections through px (slots
 * s0 and s0 + 1; with lanes, two lanes of one each), remote.timeout_ms
 * timeout_ms, X's part put on the server only (remote.put_local never),
 * and with lanes the namespace registered by lane 1 too (two misses of
 * X + 100 into scratch, XLEN bytes), so that the next get or put goes there.
 */
static struct kvt_store *pair_engine(struct tproxy *px, int s0, const char *name,
				     const char *timeout_ms, bool lanes, uint64_t x,
				     struct iovec *part, void *scratch, uint32_t *nb)
{
	char paddr[64];
	struct kvt_store *b;

	snprintf(paddr, sizeof(paddr), "127.0.0.1:%u", px->port);
	b = tsrv_engine(paddr, (const char *[]){ "remote.put_local", "never",
						 "remote.timeout_ms", timeout_ms,
						 "remote.conns", "2", "remote.conns_max", "2",
						 "remote.batch", "256",
						 "remote.io_threads", lanes ? "2" : "1", NULL });
	*nb = t_ns(b, name);
	/* Up first: the put has timeout_ms (hold_expiry's 70) for the
	 * handshakes, its registration and its answer, which a loaded machine
	 * passed (review46d: 1 run of 4 beside 4 busy loops; with this still
	 * 1 of 3 -- the registration and the put). */
	for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 2; i++)
		tsrv_sleep_ms(10);
	/* on the server only; a put past timeout_ms (setup, not what a test
	 * checks) is tried again, the same bytes */
	int st = -ETIMEDOUT;
	for (int i = 0; i < 8 && st == -ETIMEDOUT; i++)
		st = put1(b, *nb, x, part, 1).status;
	T_RC(st, KVT_OK);
	for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 2; i++)
		tsrv_sleep_ms(10);
	T_EQ_U64(t_stat(b, "remote.conns_up"), 2);
	T_EQ_INT(atomic_load(&px->opened) - s0, 2); /* slots s0 and s0 + 1 */
	if (lanes)
		for (int i = 0; i < 2; i++)
			T_RC(get_into(b, *nb, x + 100, scratch, part->iov_len).status, KVT_MISS);
	return b;
}

/* A request (r: a DELETE or CLEAR, or a get) submitted on q while both
 * of pair_engine's connections are held on their way up: the slot it
 * went out on. */
static int pair_remove_held(struct tproxy *px, int s0, struct kvt_queue *q, struct kvt_req *r)
{
	int sd = -1;

	atomic_fetch_or(&px->hold_up, UINT64_C(3) << s0);
	t_submit_all(q, r, 1);
	for (int i = 0; i < 500 && sd < 0; i++) {
		for (int s = s0; s < s0 + 2 && sd < 0; s++)
			if (tproxy_queued(px, s, true) > 0)
				sd = s;
		if (sd < 0)
			tsrv_sleep_ms(10);
	}
	T_ASSERT(sd >= 0);
	return sd;
}

/* pair_remove_held, then the other connection let go: r held on its way
 * on slot *sd; returns the other slot, open. */
static int pair_remove_one_held(struct tproxy *px, int s0, struct kvt_queue *q,
				struct kvt_req *r, int *sd)
{
	int so;

	*sd = pair_remove_held(px, s0, q, r);
	so = *sd == s0 ? s0 + 1 : s0;
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << so));
	return so;
}

/*
 * A promotion on its way when the DELETE is answered (review25): an
 * engine of two connections through a proxy that can hold either
 * direction of each.  X is on the server only.  A get of X is held on
 * its way (client to server) on one connection; the DELETE of X
 * submitted then goes out on the other (and is held there); the get goes
 * on, reaches the server first and is answered with X, and that answer
 * is held (server to client); then the DELETE goes on, is applied and
 * answered.  The get's answer comes last.  (Until order43 the get was
 * submitted after the DELETE; such a get is now a miss at once,
 * test_get_after_remove, so the promotion the delete must wait for is
 * one submitted before it, still on its way at its answer.)  It
 * used to be published in local DRAM after the store's pass over DRAM
 * that follows the DELETE's answer, and every later get of X hit the
 * deleted block there.  Now the delete completes only once that
 * promotion was handled (remote.removes_waited), and a get into the
 * caller's buffers too small for X (whose value would be published too)
 * does not publish a value of a get submitted before a delete's answer
 * (remote.promotes_stale).  A get submitted after the delete completed
 * is not affected: X put again is promoted (direct: published) as before.
 */
static void test_delete_vs_late_get(struct tproxy *px, bool direct, bool lanes)
{
	enum { XLEN = 64u << 10 };
	const char *name = lanes ? "delete-vs-late-get-lanes"
			   : direct ? "delete-vs-late-small-get"
				    : "delete-vs-late-get";
	int s0 = atomic_load(&px->opened), sd, sg;
	uint64_t x = lanes ? 980 : direct ? 970 : 960, down0;
	uint8_t *v = malloc(XLEN), small[16];
	struct iovec part = { v, XLEN }, sbuf = { small, sizeof(small) };
	struct kvt_key key = t_key(x);
	struct kvt_req del, get, *got;
	struct kvt_queue *qd, *qg;
	struct kvt_store *b;
	uint32_t nb;
	int k;

	T_ASSERT(v);
	/* With 2 lanes, one connection each: the DELETE goes to lane 0, the
	 * get (the fourth get or put: round-robin) to lane 1, whose thread
	 * then completes the delete. */
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, "30000", lanes, x, &part, v, &nb);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qg));

	/* The get, held on its way. */
	if (direct)
		get = (struct kvt_req){ .op = KVT_OP_GET, .ns = nb, .key = key, .iov = &sbuf,
					.iov_count = 1 };
	else
		get = (struct kvt_req){ .op = KVT_OP_PREFETCH, .ns = nb, .keys = &key,
					.key_count = 1 };
	sg = pair_remove_held(px, s0, qg, &get);
	sd = sg == s0 ? s0 + 1 : s0;
	/* The DELETE, submitted then: the other connection (the fewest bytes
	 * in flight; with lanes, lane 0's), held on its way too. */
	del = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = key };
	t_submit_all(qd, &del, 1);
	for (int i = 0; i < 500 && tproxy_queued(px, sd, true) == 0; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(tproxy_queued(px, sd, true) > 0);
	/* It reaches the server, which answers X; the answer is held. */
	atomic_fetch_or(&px->hold_down, UINT64_C(1) << sg);
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sg));
	for (int i = 0; i < 500 && tproxy_queued(px, sg, false) < XLEN; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(tproxy_queued(px, sg, false) >= XLEN);
	/* The DELETE goes on: applied, answered, relayed. */
	down0 = atomic_load(&px->down[sd]);
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	for (int i = 0; i < 500 && atomic_load(&px->down[sd]) == down0; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&px->down[sd]) > down0);
	/* Direct: nothing holds it (it completes, however loaded the machine);
	 * else held until the get's answer, which does not come in 300 ms. */
	k = kvt_queue_wait(qd, &got, 1, direct ? 10000 : 300);
	fprintf(stderr, "%s: the delete %s before the get's answer came\n", name,
		k == 1 ? "completed" : "did not complete");
	/* Then the get's answer. */
	atomic_fetch_and(&px->hold_down, ~(UINT64_C(1) << sg));
	if (k == 0)
		t_wait_all(qd, 1);
	t_wait_all(qg, 1);
	T_RC(del.status, KVT_OK);
	if (direct)
		T_RC(get.status, KVT_EBUFSMALL);
	{
		struct kvt_req g = get_into(b, nb, x, v, XLEN);
		fprintf(stderr, "%s: a get of X after the delete: %s (tier %d)\n", name,
			kvt_strerror(g.status), g.tier);
		T_RC(g.status, KVT_MISS); /* before: KVT_OK from local DRAM */
	}
	if (direct) {
		T_EQ_INT(k, 1); /* nothing to wait for: the value is dropped */
		T_EQ_U64(t_stat(b, "remote.promotes_stale"), 1);
		T_EQ_U64(t_stat(b, "remote.removes_waited"), 0);
	} else {
		T_EQ_INT(k, 0); /* the delete waited for the promotion */
		T_EQ_U64(t_stat(b, "remote.removes_waited"), 1);
		T_EQ_U64(t_stat(b, "remote.promotes_stale"), 0);
	}
	/* A get after the delete completed: promoted as before. */
	t_fill(v, XLEN, x + 1);
	T_RC(put1(b, nb, x, &part, 1).status, KVT_OK);
	if (direct)
		T_RC(t_req1(b, get).status, KVT_EBUFSMALL);
	else
		t_req1(b, get);
	{
		uint8_t *back = malloc(XLEN);
		T_ASSERT(back);
		struct kvt_req g = get_into(b, nb, x, back, XLEN);
		T_RC(g.status, KVT_OK);
		T_EQ_INT(g.tier, KVT_TIER_DRAM);
		T_EQ_MEM(back, v, XLEN);
		free(back);
	}
	T_OK(kvt_queue_destroy(qg));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(v);
}

/*
 * A put of a key made after its delete (its namespace's clear) was sent
 * is not sent before the DELETE's answer, on any connection of the pool
 * (hold42): through a proxy that holds one connection's bytes, an engine
 * of two connections (or two lanes of one each), X on the server.  The
 * DELETE of X (a CLEAR of its namespace) is held on its way on one
 * connection; X put again with new bytes then went out on the other
 * (fewer bytes in flight; with lanes, lane 1's), reached the server
 * first, found the old X there and was answered KVT_EXISTS (a no-op),
 * and the DELETE, let go, removed X: a cold engine missed the value the
 * engine had just put (15 of 15: 5 runs of the 3 cases, 2026-12-06).
 * Now the put waits for the DELETE's answer (remote.put_waits), goes out
 * after it and is stored (KVT_OK): the cold engine reads the new bytes.
 */
static void test_put_after_remove(struct tproxy *px, const char *addr, bool clear, bool lanes)
{
	enum { XLEN = 64u << 10 };
	const char *name = clear ? lanes ? "put-after-clear-lanes" : "put-after-clear"
			   : lanes ? "put-after-delete-lanes"
				   : "put-after-delete";
	int s0 = atomic_load(&px->opened), sd, k;
	uint64_t x = 990 + (clear ? 2u : 0u) + (lanes ? 1u : 0u), w0;
	uint8_t *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req del, put, *got;
	struct kvt_queue *qd, *qp;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v && back);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, "30000", lanes, x, &part, back, &nb);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qp));
	w0 = t_stat(b, "remote.put_waits");

	/* The DELETE (CLEAR), held on its way. */
	del = (struct kvt_req){ .op = clear ? KVT_OP_CLEAR : KVT_OP_DELETE, .ns = nb,
				.key = t_key(x) };
	pair_remove_one_held(px, s0, qd, &del, &sd);
	/* X again, new bytes: the other connection is open. */
	t_fill(v, XLEN, x + 1);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(qp, &put, 1);
	k = kvt_queue_wait(qp, &got, 1, 300);
	fprintf(stderr, "%s: the put %s before the %s's answer\n", name,
		k == 1 ? "completed" : "did not complete", clear ? "CLEAR" : "DELETE");
	/* The DELETE (CLEAR) goes on: applied, answered; then the put. */
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	t_wait_all(qd, 1);
	if (k == 0)
		t_wait_all(qp, 1);
	T_RC(del.status, KVT_OK);
	T_RC(put.status, KVT_OK);
	cold_get_is(addr, name, x, back, v, XLEN); /* before: KVT_MISS */
	T_EQ_INT(k, 0); /* the put waited for the answer */
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	T_OK(kvt_queue_destroy(qp));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(back);
	free(v);
}

/*
 * The DELETE a put waits for fails (its connection lost, no answer):
 * it leaves the list of removes not yet answered (the put goes out), and
 * a later put of the key does not wait (a leaked entry made every later
 * put of the key wait until its own deadline: -ETIMEDOUT).
 */
static void test_put_after_failed_remove(struct tproxy *px)
{
	enum { XLEN = 4096 };
	const char *name = "put-after-failed-delete";
	int s0 = atomic_load(&px->opened), sd;
	uint64_t x = 1990, w0;
	uint8_t *v = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req del, put, *got;
	struct kvt_queue *qd, *qp;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, "1500", false, x, &part, NULL, &nb);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qp));
	w0 = t_stat(b, "remote.put_waits");
	del = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = t_key(x) };
	pair_remove_one_held(px, s0, qd, &del, &sd);
	t_fill(v, XLEN, x + 1);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(qp, &put, 1);
	T_EQ_INT(kvt_queue_wait(qp, &got, 1, 300), 0); /* it waits */
	/* The DELETE's connection lost: the DELETE fails, the put goes. */
	T_RC(shutdown(atomic_load(&px->fd_up[sd]), SHUT_RDWR), 0);
	t_wait_all(qd, 1);
	t_wait_all(qp, 1);
	fprintf(stderr, "%s: delete %s, put %s\n", name, kvt_strerror(del.status),
		kvt_strerror(put.status));
	T_ASSERT(del.status < 0);
	T_ASSERT(put.status == KVT_OK || put.status == KVT_EXISTS);
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	/* No DELETE is out: the next put of X does not wait. */
	t_fill(v, XLEN, x + 2);
	{
		struct kvt_req r = put1(b, nb, x, &part, 1);
		fprintf(stderr, "%s: the next put: %s\n", name, kvt_strerror(r.status));
		T_ASSERT(r.status == KVT_OK || r.status == KVT_EXISTS);
	}
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	T_OK(kvt_queue_destroy(qp));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(v);
}

/*
 * A get (and an exists) of a key submitted after its delete (its
 * namespace's clear) and before the DELETE's answer: through the proxy,
 * the DELETE held on its way on one connection of pair_engine's two, X
 * on the server only.  The get went out on the other connection (the
 * fewest bytes in flight; with lanes, lane 1's), reached the server
 * before the DELETE and was a hit with X's bytes, deleted before the get
 * was made (order43, 2026-12-07: every run of the three cases).  Now it
 * is a miss at once, no frame sent (remote.gets_removed): the delete was
 * submitted first and its outcome is the get's; a lookup of Y, X ends
 * before X (before: 2 hits, both cases).  A get of another key
 * (DELETE case) still goes to the server and hits; once the DELETE is
 * answered, gets go to the server again (a miss there, X deleted).
 */
static void test_get_after_remove(struct tproxy *px, const char *addr, bool clear, bool lanes)
{
	enum { XLEN = 4096 };
	const char *name = clear ? "get-after-clear" : lanes ? "get-after-delete-lanes"
							     : "get-after-delete";
	int s0 = atomic_load(&px->opened), sd;
	uint64_t x = 2990 + (clear ? 2u : 0u) + (lanes ? 1u : 0u), r0;
	uint8_t *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_key key;
	struct kvt_req del, ex;
	struct kvt_queue *qd;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v && back);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, "30000", lanes, x, &part, back, &nb);
	t_fill(v, XLEN, x + 10);
	{ /* Y, on the server only, by another engine (b's next get: lane 1) */
		struct kvt_store *c = engine(addr, "never", "5000");
		T_RC(put1(c, t_ns(c, name), x + 10, &part, 1).status, KVT_OK);
		kvt_store_destroy(c);
	}
	T_OK(kvt_queue_create(b, &qd));
	r0 = t_stat(b, "remote.gets_removed");

	key = t_key(x);
	del = (struct kvt_req){ .op = clear ? KVT_OP_CLEAR : KVT_OP_DELETE, .ns = nb, .key = key };
	pair_remove_one_held(px, s0, qd, &del, &sd);
	{
		struct kvt_req g = get_into(b, nb, x, back, XLEN);
		fprintf(stderr, "%s: a get of X while the %s is on its way: %s (tier %d)\n", name,
			clear ? "CLEAR" : "DELETE", kvt_strerror(g.status), g.tier);
		T_RC(g.status, KVT_MISS); /* before: KVT_OK, X's deleted bytes */
	}
	ex = t_req1(b, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = nb, .key = key });
	T_RC(ex.status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 2);
	if (!lanes) { /* a lookup of Y, X (lane 0's other connection) ends before X */
		struct kvt_key keys[2] = { t_key(x + 10), key };
		int64_t n = kvt_lookup_prefix(b, nb, keys, 2, NULL);
		fprintf(stderr, "%s: a lookup of Y, X: %" PRId64 "\n", name, n);
		T_EQ_INT(n, clear ? 0 : 1); /* before: 2 */
		T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, clear ? 3 : 2);
		r0 += clear ? 1 : 0;
	}
	if (!clear) { /* another key: to the server, a hit */
		struct kvt_req g = get_into(b, nb, x + 10, back, XLEN);
		T_RC(g.status, KVT_OK);
		T_EQ_MEM(back, v, XLEN);
		T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 2);
	}
	T_EQ_INT(kvt_queue_wait(qd, &(struct kvt_req *){ NULL }, 1, 0), 0); /* still out */
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	t_wait_all(qd, 1);
	T_RC(del.status, KVT_OK);
	/* Answered: gets go to the server again, which applied it. */
	T_RC(get_into(b, nb, x, back, XLEN).status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 2);
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(back);
	free(v);
}

/* The deletes dels[0..n) (X's: dels[xi]) and the put of X waiting for
 * them, held on their way up on pair_engine's connections, let go: X's
 * applied, each other one applied or a miss, the put stored. */
static void removes_let_go(struct tproxy *px, int s0, struct kvt_queue *qd,
			   struct kvt_req *dels, int n, int xi, struct kvt_queue *qp,
			   struct kvt_req *put)
{
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(3) << s0));
	t_wait_all(qd, (unsigned)n);
	t_wait_all(qp, 1);
	T_RC(dels[xi].status, KVT_OK);
	for (int i = 0; i < n; i++)
		T_ASSERT(dels[i].status == KVT_OK || dels[i].status == KVT_MISS);
	T_RC(put->status, KVT_OK);
}

/*
 * Many DELETEs out at once (lookup43): the index of those not yet
 * answered grows past its first 16 chains (16, 32, 64, 128) and shrinks
 * back when the last is answered.  DELETEs of X and of 99 keys not on
 * the server, all held on their way; a get of X and exists of three of
 * the others are misses at once (remote.gets_removed), a put of X waits
 * (remote.put_waits).  Once they are answered the put goes out and X is
 * read back from the server, no miss at once.
 */
static void test_many_removes(struct tproxy *px)
{
	enum { XLEN = 4096, N = 100 };
	int s0 = atomic_load(&px->opened), k;
	uint64_t x = 3990, r0, w0;
	uint8_t *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req dels[N], put, *got;
	struct kvt_queue *qd, *qp;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v && back);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, "many-removes", "30000", false, x, &part, back, &nb);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qp));
	r0 = t_stat(b, "remote.gets_removed");
	w0 = t_stat(b, "remote.put_waits");
	for (int i = 0; i < N; i++)
		dels[i] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb,
					    .key = t_key(i ? x + 1000 + (uint64_t)i : x) };
	pair_remove_held(px, s0, qd, &dels[0]);
	t_submit_all(qd, dels + 1, N - 1);
	T_RC(get_into(b, nb, x, back, XLEN).status, KVT_MISS);
	for (int i = 1; i < N; i += 49) {
		struct kvt_req e = t_req1(b, (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = nb,
							      .key = t_key(x + 1000 + (uint64_t)i) });
		T_RC(e.status, KVT_MISS);
	}
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 4);
	t_fill(v, XLEN, x + 1);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(qp, &put, 1);
	k = kvt_queue_wait(qp, &got, 1, 100);
	T_EQ_INT(k, 0); /* waits for the DELETE of X */
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	removes_let_go(px, s0, qd, dels, N, 0, qp, &put);
	memset(back, 0, XLEN);
	T_RC(get_into(b, nb, x, back, XLEN).status, KVT_OK);
	T_EQ_MEM(back, v, XLEN);
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 4);
	T_OK(kvt_queue_destroy(qp));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(back);
	free(v);
}

/*
 * A put that waited for a DELETE has its own remote.timeout_ms from the
 * end of its wait.  Through the proxy: X put (P0) and its answer held on
 * the way back; the DELETE of X, held behind P0 (remote.removes_held);
 * X put again with new bytes (P), waiting for the DELETE
 * (remote.put_waits); P0's answer let go at 0.5 T (T = remote.timeout_ms,
 * 800 ms), the DELETE then sent and held on its way until 1.2 T.  P's
 * deadline ran from its submission: it failed -ETIMEDOUT at T while it
 * waited, never sent, and a cold engine missed X (order43, 2026-12-07).
 * Now it waits at most 2 T and then has T of its own: stored, KVT_OK.
 */
static void test_put_wait_deadline(struct tproxy *px, const char *addr)
{
	enum { XLEN = 4096, T_MS = 800 };
	const char *name = "put-wait-deadline";
	int s0 = atomic_load(&px->opened);
	uint64_t x = 3990, h0, w0, t0;
	uint8_t *v0 = malloc(XLEN), *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part0 = { v0, XLEN }, part = { v, XLEN };
	struct kvt_req p0, del, put;
	struct kvt_queue *q0, *qd, *qp;
	struct kvt_store *b;
	uint32_t nb;
	char tms[16];

	T_ASSERT(v0 && v && back);
	snprintf(tms, sizeof(tms), "%u", (unsigned)T_MS);
	t_fill(v0, XLEN, x);
	b = pair_engine(px, s0, name, tms, false, x, &part0, NULL, &nb);
	T_OK(kvt_queue_create(b, &q0));
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qp));
	h0 = t_stat(b, "remote.removes_held");
	w0 = t_stat(b, "remote.put_waits");

	/* P0 reaches the server; its answer waits in the proxy. */
	atomic_fetch_or(&px->hold_down, UINT64_C(3) << s0);
	t_fill(v0, XLEN, x + 1);
	p0 = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part0,
			       .iov_count = 1 };
	t_submit_all(q0, &p0, 1);
	for (int i = 0; i < 500 && tproxy_queued(px, s0, false) == 0 &&
			tproxy_queued(px, s0 + 1, false) == 0;
	     i++)
		tsrv_sleep_ms(5);
	t0 = t_now_ms();
	/* Whatever goes up from now on waits in the proxy. */
	atomic_fetch_or(&px->hold_up, UINT64_C(3) << s0);
	del = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = t_key(x) };
	t_submit_all(qd, &del, 1);
	T_EQ_U64(t_stat(b, "remote.removes_held") - h0, 1);
	t_fill(v, XLEN, x + 2);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(qp, &put, 1);
	for (int i = 0; i < 100 && t_stat(b, "remote.put_waits") == w0; i++)
		tsrv_sleep_ms(5);
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	/* 0.5 T: P0 answered (X was there), the DELETE goes out, held. */
	tsrv_sleep_ms((long)T_MS / 2 - (long)(t_now_ms() - t0));
	atomic_fetch_and(&px->hold_down, ~(UINT64_C(3) << s0));
	t_wait_all(q0, 1);
	T_RC(p0.status, KVT_EXISTS);
	for (int i = 0; i < 1000 && tproxy_queued(px, s0, true) == 0 &&
			tproxy_queued(px, s0 + 1, true) == 0;
	     i++)
		tsrv_sleep_ms(2);
	T_ASSERT(tproxy_queued(px, s0, true) + tproxy_queued(px, s0 + 1, true) > 0);
	/* 0.7 T later (past P's T from its submission, within the DELETE's
	 * own): the DELETE goes on, P after it. */
	tsrv_sleep_ms(T_MS * 7 / 10);
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(3) << s0));
	t_wait_all(qd, 1);
	t_wait_all(qp, 1);
	fprintf(stderr, "%s: delete %s, the put that waited %s after %" PRIu64 " ms\n", name,
		kvt_strerror(del.status), kvt_strerror(put.status), t_now_ms() - t0);
	T_RC(del.status, KVT_OK);
	T_RC(put.status, KVT_OK); /* before: -ETIMEDOUT at T, never sent */
	cold_get_is(addr, name, x, back, v, XLEN);
	T_OK(kvt_queue_destroy(qp));
	T_OK(kvt_queue_destroy(qd));
	T_OK(kvt_queue_destroy(q0));
	kvt_store_destroy(b);
	free(back);
	free(v);
	free(v0);
}

/*
 * The order indexes shrink as they empty (remote44): a DELETE of X held
 * on its way on one connection, then 255 DELETEs of keys not on the
 * server in one submission (one frame on the other connection, its
 * answer held): 256 open, the index of open deletes grown to 256 chains
 * (remote.order_index_bytes 2 KiB).  Once the 255 are answered, X's
 * DELETE still out, it is back to its 16 chains inside the store (0
 * bytes); until remote44 it kept its 2 KiB until every delete was
 * answered, a burst's largest table for as long as one delete stayed
 * out.  Then X's answer: 0 too.
 */
static void test_index_shrink(struct tproxy *px)
{
	enum { XLEN = 4096, N = 256 };
	int s0 = atomic_load(&px->opened), sd, so;
	uint64_t x = 4990, peak, after;
	uint8_t *v = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req *dels = calloc(N, sizeof(*dels));
	struct kvt_queue *qd, *qo;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v && dels);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, "index-shrink", "30000", false, x, &part, NULL, &nb);
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 0);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qo));
	dels[0] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = t_key(x) };
	so = pair_remove_one_held(px, s0, qd, &dels[0], &sd);
	atomic_fetch_or(&px->hold_down, UINT64_C(1) << so);
	for (int i = 1; i < N; i++)
		dels[i] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb,
					    .key = t_key(x + 1000 + (uint64_t)i) };
	t_submit_all(qo, dels + 1, N - 1);
	for (int i = 0; i < 500 && tproxy_queued(px, so, false) == 0; i++)
		tsrv_sleep_ms(10);
	peak = t_stat(b, "remote.order_index_bytes");
	atomic_fetch_and(&px->hold_down, ~(UINT64_C(1) << so));
	t_wait_all(qo, N - 1);
	after = t_stat(b, "remote.order_index_bytes");
	fprintf(stderr, "index-shrink: %d deletes out: %" PRIu64 " bytes of index; 1 out: %" PRIu64
		"\n", N, peak, after);
	T_EQ_U64(peak, N * sizeof(void *));
	T_EQ_U64(after, 0); /* before: 2048, until the last answer */
	T_EQ_INT(kvt_queue_wait(qd, &(struct kvt_req *){ NULL }, 1, 0), 0); /* X's: still out */
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	t_wait_all(qd, 1);
	T_RC(dels[0].status, KVT_OK);
	for (int i = 1; i < N; i++)
		T_RC(dels[i].status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 0);
	T_OK(kvt_queue_destroy(qo));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(dels);
	free(v);
}

/*
 * A put behind a DELETE held behind a put that itself waits (remote44):
 * D1 (DELETE of X) held on its way on one connection; P0 (X put again)
 * waits for it; D2 (DELETE of X) is held behind P0; P (X again) waits
 * for both.  T = remote.timeout_ms.  D1 reaches the server at 0.3 T,
 * its answer let go at 0.9 T; P0 then goes out, held on its way until
 * 1.6 T, its answer until 1.7 T; what goes up then is held until 2.3 T.
 * D2 was held until P0's answer at 1.7 T, then on its way until 2.3 T,
 * each within its own timeout (frames: T from their send), and P
 * failed -ETIMEDOUT at 2 T from its submission, never sent: the 2 T a
 * put waits for a DELETE (one T held, one T on its way) did not hold for
 * a DELETE held behind a put that waited 2 T itself.  Now a DELETE is
 * held at most T from its own submission, then fails -ETIMEDOUT, never
 * sent (remote.timeouts): D2 fails at T, P goes out after D1's answer
 * and D2's failure, and X is read back.  P (new bytes) and P0 are then
 * both on their way, on the two connections as often as not, released
 * together: the server applies either first, the other is KVT_EXISTS,
 * and X holds the bytes of the one stored (review44b: it asserted P0
 * stored, and TSan's run had P first -- a failed DELETE orders nothing).
 */
/* Both of pair_engine's slots: up held and down let go (up), or the
 * other way. */
static void pair_phase(struct tproxy *px, int s0, bool up)
{
	atomic_fetch_or(up ? &px->hold_up : &px->hold_down, UINT64_C(3) << s0);
	atomic_fetch_and(up ? &px->hold_down : &px->hold_up, ~(UINT64_C(3) << s0));
}

static void test_put_wait_chain(struct tproxy *px, const char *addr)
{
	enum { XLEN = 4096, T_MS = 2000 };
	const char *name = "put-wait-chain";
	int s0 = atomic_load(&px->opened), sd;
	uint64_t x = 5990, h0, w0, to0, t0;
	uint8_t *v = malloc(XLEN), *vp = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN }, partp = { vp, XLEN };
	struct kvt_req d1, p0, d2, p;
	struct kvt_queue *q;
	struct kvt_store *b;
	uint32_t nb;
	char tms[16];

	T_ASSERT(v && vp && back);
	snprintf(tms, sizeof(tms), "%u", (unsigned)T_MS);
	t_fill(v, XLEN, x);
	t_fill(vp, XLEN, x + 1);
	b = pair_engine(px, s0, name, tms, false, x, &part, NULL, &nb);
	T_OK(kvt_queue_create(b, &q));
	h0 = t_stat(b, "remote.removes_held");
	w0 = t_stat(b, "remote.put_waits");
	to0 = t_stat(b, "remote.timeouts");
	d1 = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb, .key = t_key(x) };
	d2 = d1;
	p0 = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
			       .iov_count = 1 };
	p = p0;
	p.iov = &partp;
	t0 = t_now_ms();
	pair_remove_one_held(px, s0, q, &d1, &sd);
	t_submit_all(q, &p0, 1);
	t_submit_all(q, &d2, 1);
	t_submit_all(q, &p, 1);
	T_EQ_U64(t_stat(b, "remote.removes_held") - h0, 1);
	for (int i = 0; i < 100 && t_stat(b, "remote.put_waits") - w0 < 2; i++)
		tsrv_sleep_ms(5);
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 2);
	/* 0.3 T: D1 reaches the server, its answer waits. */
	tsrv_sleep_ms((long)T_MS * 3 / 10 - (long)(t_now_ms() - t0));
	atomic_fetch_or(&px->hold_down, UINT64_C(3) << s0);
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(1) << sd));
	for (int i = 0; i < 100 && tproxy_queued(px, sd, false) == 0; i++)
		tsrv_sleep_ms(5);
	T_ASSERT(tproxy_queued(px, sd, false) > 0);
	/* 0.9 T: D1 answered; what goes up (P0) waits. */
	tsrv_sleep_ms((long)T_MS * 9 / 10 - (long)(t_now_ms() - t0));
	pair_phase(px, s0, true);
	/* 1.6 T: P0 (and P, let go) reach the server, their answers wait. */
	tsrv_sleep_ms((long)T_MS * 16 / 10 - (long)(t_now_ms() - t0));
	pair_phase(px, s0, false);
	for (int i = 0; i < 50 && tproxy_queued(px, s0, false) == 0 &&
			tproxy_queued(px, s0 + 1, false) == 0;
	     i++)
		tsrv_sleep_ms(2);
	/* 1.7 T: answered; what goes up (D2, before) waits. */
	tsrv_sleep_ms((long)T_MS * 17 / 10 - (long)(t_now_ms() - t0));
	pair_phase(px, s0, true);
	/* 2.3 T: all goes on. */
	tsrv_sleep_ms((long)T_MS * 23 / 10 - (long)(t_now_ms() - t0));
	atomic_fetch_and(&px->hold_up, ~(UINT64_C(3) << s0));
	t_wait_all(q, 4);
	fprintf(stderr, "%s: D1 %s, P0 %s, D2 %s, P %s after %" PRIu64 " ms\n", name,
		kvt_strerror(d1.status), kvt_strerror(p0.status), kvt_strerror(d2.status),
		kvt_strerror(p.status), t_now_ms() - t0);
	T_RC(d1.status, KVT_OK);
	/* One stored, the other a no-op; before: P -ETIMEDOUT, never sent. */
	T_ASSERT((p0.status == KVT_OK && p.status == KVT_EXISTS) ||
		 (p0.status == KVT_EXISTS && p.status == KVT_OK));
	T_RC(d2.status, -EAGAIN); /* held past T: never sent (-ETIMEDOUT before session 46) */
	T_EQ_U64(t_stat(b, "remote.timeouts") - to0, 1);
	cold_get_is(addr, name, x, back, p.status == KVT_OK ? vp : v, XLEN);
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(b);
	free(back);
	free(vp);
	free(v);
}

/*
 * The order indexes' growth failing (review44b): both connections held
 * on their way up, 16 DELETEs of other keys out (the open deletes' index
 * full at its 16 chains), then the DELETE of X with the allocation of
 * the larger table failed (debug.fail_alloc 2: the op, then the table):
 * the index stays at 16 chains (remote.order_index_bytes 0), longer
 * chains, and X's DELETE is still in it -- a get of X is a miss at once,
 * a put of X with new bytes waits for the DELETE's answer.  More deletes
 * then grow it (each one's rehash moves X's along), and X is still
 * covered; once all is answered the put goes out and X reads back new.
 */
static void test_index_grow_fail(struct tproxy *px, const char *addr)
{
	enum { XLEN = 4096, N = 40 };
	const char *name = "index-grow-fail";
	int s0 = atomic_load(&px->opened), k;
	uint64_t x = 6990, r0, w0;
	uint8_t *v = malloc(XLEN), *back = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_req dels[N], put, *got;
	struct kvt_queue *qd, *qp;
	struct kvt_store *b;
	uint32_t nb;

	T_ASSERT(v && back);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, "30000", false, x, &part, NULL, &nb);
	T_OK(kvt_queue_create(b, &qd));
	T_OK(kvt_queue_create(b, &qp));
	r0 = t_stat(b, "remote.gets_removed");
	w0 = t_stat(b, "remote.put_waits");
	for (int i = 0; i < N; i++)
		dels[i] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb,
					    .key = t_key(i == 16 ? x : x + 1000 + (uint64_t)i) };
	atomic_fetch_or(&px->hold_up, UINT64_C(3) << s0);
	t_submit_all(qd, dels, 16);
	for (int i = 0; i < 500 && tproxy_queued(px, s0, true) == 0 &&
			tproxy_queued(px, s0 + 1, true) == 0;
	     i++)
		tsrv_sleep_ms(10);
	tsrv_sleep_ms(50); /* the thread done packing: the next allocations are X's */
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 0);
	T_OK(kvt_store_set_option(b, "debug.fail_alloc", "2"));
	t_submit_all(qd, dels + 16, 1);
	T_OK(kvt_store_set_option(b, "debug.fail_alloc", "0"));
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 0); /* its growth failed */
	T_RC(get_into(b, nb, x, back, XLEN).status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 1);
	t_fill(v, XLEN, x + 1);
	put = (struct kvt_req){ .op = KVT_OP_PUT, .ns = nb, .key = t_key(x), .iov = &part,
				.iov_count = 1 };
	t_submit_all(qp, &put, 1);
	T_EQ_U64(t_stat(b, "remote.put_waits") - w0, 1);
	/* Grown now, past 16 then 32 entries: X's entry moved along. */
	t_submit_all(qd, dels + 17, N - 17);
	fprintf(stderr, "%s: %d deletes out: %" PRIu64 " bytes of index\n", name, N,
		t_stat(b, "remote.order_index_bytes"));
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 64 * sizeof(void *));
	T_RC(get_into(b, nb, x, back, XLEN).status, KVT_MISS);
	T_EQ_U64(t_stat(b, "remote.gets_removed") - r0, 2);
	k = kvt_queue_wait(qp, &got, 1, 100);
	T_EQ_INT(k, 0); /* still waits for the DELETE of X */
	removes_let_go(px, s0, qd, dels, N, 16, qp, &put);
	T_EQ_U64(t_stat(b, "remote.order_index_bytes"), 0);
	cold_get_is(addr, name, x, back, v, XLEN);
	T_OK(kvt_queue_destroy(qp));
	T_OK(kvt_queue_destroy(qd));
	kvt_store_destroy(b);
	free(back);
	free(v);
}

/*
 * A held DELETE expires at its deadline (session 46).  Two lanes, T =
 * remote.timeout_ms 70 ms.  Each round: a get answered on lane 0 (the
 * head lane's thread plans its sleep then: its 100 ms tick); P0, a
 * put of X in a namespace lane 1 has not registered, goes to lane 1,
 * whose NS_REGISTER answer the proxy delays 40 ms (HOLD_DELAY) and then
 * holds what lane 1 sends (P0 stays open, past T); the DELETE of X,
 * submitted right after P0, is held behind it and expires at T, never
 * sent: -EAGAIN.  Nothing of the head's own wakes its thread: until
 * session 46 the hold was seen at the thread's next wake-up, about 100
 * ms after the other DELETE, 30 ms (0.43 T) late in each round (the
 * status was -ETIMEDOUT).  Asserted: never early, at most T/4 late in
 * the best of 3 rounds, and under T in each, past the round's baseline
 * (wake_base; until review46d a fixed T/4).  A round in which P0 failed
 * before the DELETE did (its registration answered past its deadline, a
 * loaded machine) proves nothing and is run again (6 rounds at most).
 */
enum { HOLD_T_MS = 70, HOLD_DELAY_MS = 40, HOLD_ROUNDS = 3 };
static _Atomic uint64_t hold_mask; /* what the filter holds once it acted */
/* Set once the filter's act is over.  Its 40 ms sleep may end after the
 * round (the put failed first on a loaded machine): it holds only while
 * mode is still 1, and the round waits for it before it lets go, where
 * until review46d it could hold the engine's slots after the round let
 * go of them -- conns_up stayed 1 (4 busy loops beside the test: 2 runs
 * of 3). */
static _Atomic int hold_done;

static size_t hold_filter(struct tproxy *p, int mode, uint64_t *conn, uint8_t *buf, size_t n,
			  bool *stall)
{
	(void)conn;
	(void)buf;
	(void)stall;
	if (mode == 1 && atomic_fetch_add(&p->acted, 1) == 0) {
		tsrv_sleep_ms(HOLD_DELAY_MS);
		if (atomic_load(&p->mode) == 1)
			atomic_fetch_or(&p->hold_up, atomic_load(&hold_mask));
		atomic_store(&hold_done, 1);
	}
	return n;
}

/* The proxy's bytes to the clients, by slot; the slot (one) that moved
 * since, or -1. */
static void snap_down(struct tproxy *px, uint64_t *snap)
{
	for (int i = 0; i < TPROXY_SLOTS; i++)
		snap[i] = atomic_load(&px->down[i]);
}

static int slot_moved(struct tproxy *px, const uint64_t *snap)
{
	int moved = -1;
	for (int i = 0; i < TPROXY_SLOTS; i++)
		if (atomic_load(&px->down[i]) != snap[i]) {
			T_ASSERT(moved < 0);
			moved = i;
		}
	return moved;
}

/* A round's baseline (the machine is loaded: review46d, 2026-12-07, a
 * run 13.5 ms late in its best round beside a build, bound T/4 = 17.5
 * ms): a thread asleep until the DELETE's deadline wakes a second one --
 * the two wake-ups its expiry takes, the head's thread and the test's --
 * and how late that one woke is taken off the DELETE's lateness. */
struct wake_base {
	uint64_t due, late;
	sem_t sem;
	pthread_t a, b;
};

static void *base_sleeper(void *arg)
{
	struct wake_base *w = arg;
	struct timespec ts = { (time_t)(w->due / 1000000000u), (long)(w->due % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	sem_post(&w->sem);
	return NULL;
}

static void *base_waiter(void *arg)
{
	struct wake_base *w = arg;
	uint64_t now;
	while (sem_wait(&w->sem) != 0)
		;
	now = tsrv_now_ns();
	w->late = now > w->due ? (now - w->due) / 1000 : 0;
	return NULL;
}

static void base_start(struct wake_base *w, uint64_t due)
{
	w->due = due;
	w->late = 0;
	T_EQ_INT(sem_init(&w->sem, 0, 0), 0);
	T_EQ_INT(pthread_create(&w->b, NULL, base_waiter, w), 0);
	T_EQ_INT(pthread_create(&w->a, NULL, base_sleeper, w), 0);
}

static uint64_t base_end(struct wake_base *w)
{
	T_EQ_INT(pthread_join(w->a, NULL), 0);
	T_EQ_INT(pthread_join(w->b, NULL), 0);
	sem_destroy(&w->sem);
	return w->late;
}

static void test_hold_expiry(struct tproxy *px)
{
	enum { XLEN = 4096 };
	const char *name = "hold-expiry";
	int s0 = atomic_load(&px->opened), valid = 0;
	uint64_t x = 7990, best = UINT64_MAX;
	uint8_t *v = malloc(XLEN), *scratch = malloc(XLEN);
	struct iovec part = { v, XLEN };
	struct kvt_queue *q0, *qd;
	struct kvt_store *b;
	uint32_t nb;
	char tms[16];

	T_ASSERT(v && scratch);
	snprintf(tms, sizeof(tms), "%u", (unsigned)HOLD_T_MS);
	t_fill(v, XLEN, x);
	b = pair_engine(px, s0, name, tms, true, x, &part, scratch, &nb);
	T_OK(kvt_queue_create(b, &q0));
	T_OK(kvt_queue_create(b, &qd));
	atomic_store(&hold_mask, ~UINT64_C(0) << s0); /* this engine's slots, reconnects too */
	for (int r = 0; r < 2 * HOLD_ROUNDS && valid < HOLD_ROUNDS; r++) {
		struct kvt_req p0, del, *got;
		struct wake_base wb;
		uint64_t h0 = t_stat(b, "remote.removes_held"), td, tc, held, late, base;
		uint64_t snap[TPROXY_SLOTS];
		int sh, sg = -1;
		uint32_t ns;
		char nsname[32];
		bool p0_first;

		snprintf(nsname, sizeof(nsname), "%s-%d", name, r);
		ns = t_ns(b, nsname);
		/* A DELETE goes to lane 0: its answer names lane 0's slot.
		 * Then gets (round-robin) until one goes there: P0, next,
		 * goes to lane 1, and the head's thread plans its sleep once
		 * that get is answered. */
		/* (past T on a loaded machine -- CI's TSan run -- tried again:
		 * setup, not what the round times) */
		int dst = -1;
		for (int t = 0; t < 8 && dst < 0; t++) {
			for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 2; i++)
				tsrv_sleep_ms(10);
			snap_down(px, snap);
			dst = t_req1(b, (struct kvt_req){ .op = KVT_OP_DELETE, .ns = nb,
							   .key = t_key(x + 200 + (uint64_t)r) })
				      .status;
		}
		T_ASSERT(dst >= 0);
		sh = slot_moved(px, snap);
		T_ASSERT(sh >= 0);
		for (int i = 0; i < 4 && sg != sh; i++) {
			snap_down(px, snap);
			T_RC(get_into(b, nb, x + 100, scratch, XLEN).status, KVT_MISS);
			sg = slot_moved(px, snap);
		}
		T_EQ_INT(sg, sh);
		atomic_store(&hold_done, 0);
		atomic_store(&px->acted, 0);
		atomic_store(&px->mode, 1);
		p0 = (struct kvt_req){ .op = KVT_OP_PUT, .ns = ns, .key = t_key(x), .iov = &part,
				       .iov_count = 1 };
		del = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = ns, .key = t_key(x) };
		t_submit_all(q0, &p0, 1);
		td = tsrv_now_ns();
		t_submit_all(qd, &del, 1);
		base_start(&wb, td + (uint64_t)HOLD_T_MS * 1000000u);
		T_EQ_U64(t_stat(b, "remote.removes_held") - h0, 1);
		t_wait_all(qd, 1);
		tc = tsrv_now_ns();
		base = base_end(&wb);
		p0_first = kvt_queue_wait(q0, &got, 1, 0) == 1;
		held = (tc - td) / 1000;
		fprintf(stderr,
			"%s: round %d: the DELETE held %" PRIu64 " us (T %u ms; baseline %" PRIu64
			" us late): %s%s\n",
			name, r, held, (unsigned)HOLD_T_MS, base, kvt_strerror(del.status),
			p0_first ? "; P0 failed first (void)" : "");
		atomic_store(&px->mode, 0);
		for (int i = 0; i < 500 && atomic_load(&px->acted) > 0 && !atomic_load(&hold_done);
		     i++)
			tsrv_sleep_ms(10);
		T_ASSERT(atomic_load(&px->acted) == 0 || atomic_load(&hold_done));
		atomic_fetch_and(&px->hold_up, ~atomic_load(&hold_mask));
		if (!p0_first)
			t_wait_all(q0, 1);
		T_ASSERT(p0.status == KVT_OK || p0.status == -ETIMEDOUT);
		for (int i = 0; i < 500 && t_stat(b, "remote.conns_up") < 2; i++)
			tsrv_sleep_ms(10);
		T_EQ_U64(t_stat(b, "remote.conns_up"), 2);
		if (p0_first)
			continue;
		valid++;
		T_RC(del.status, -EAGAIN); /* never sent; -ETIMEDOUT before session 46 */
		T_ASSERT(held >= (uint64_t)HOLD_T_MS * 1000 - 1000); /* not early (1 ms: rounding) */
		late = held > (uint64_t)HOLD_T_MS * 1000 ? held - (uint64_t)HOLD_T_MS * 1000 : 0;
		late = late > base ? late - base : 0; /* past the round's baseline */
		T_ASSERT(late < (uint64_t)HOLD_T_MS * 1000); /* under T late, every round */
		best = late < best ? late : best;
	}
	fprintf(stderr, "%s: %d rounds, best %" PRIu64 " us past T and the baseline\n", name, valid,
		best);
	T_EQ_INT(valid, HOLD_ROUNDS);
	T_ASSERT(best <= (uint64_t)HOLD_T_MS * 1000 / 4);
	T_OK(kvt_queue_destroy(qd));
	T_OK(kvt_queue_destroy(q0));
	kvt_store_destroy(b);
	free(scratch);
	free(v);
}

int main(int argc, char **argv)
{
	struct tsrv srv;
	struct tproxy px;
	char dir[600], addr[700];
	char *base;

	if (argc < 2)
		T_SKIP("usage: test_remote_put PATH-TO-KVTIERD");
	if (access(argv[1], X_OK) != 0)
		T_FAIL("%s is not executable", argv[1]);
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/main", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, argv[1], base, dir, NULL, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	test_exact(addr);
	test_copy_crc(addr);
	test_pool(addr);
	test_auto(addr);
	test_holes(addr);
	test_window(&srv, addr);
	test_delete_wins(&srv, addr, false);
	test_delete_wins(&srv, addr, true);
	test_delete_vs_promotion(&srv, addr);
	test_delete_then_put(&srv, addr, false);
	test_delete_then_put(&srv, addr, true);
	tproxy_start(&px, srv.port, hold_filter, false);
	test_delete_vs_late_get(&px, false, false);
	test_delete_vs_late_get(&px, true, false);
	test_delete_vs_late_get(&px, false, true);
	test_put_after_remove(&px, addr, false, false);
	test_put_after_remove(&px, addr, true, false);
	test_put_after_remove(&px, addr, false, true);
	test_put_after_failed_remove(&px);
	test_get_after_remove(&px, addr, false, false);
	test_get_after_remove(&px, addr, true, false);
	test_get_after_remove(&px, addr, false, true);
	test_put_wait_deadline(&px, addr);
	test_many_removes(&px);
	test_index_shrink(&px);
	test_put_wait_chain(&px, addr);
	test_index_grow_fail(&px, addr);
	test_hold_expiry(&px);
	tproxy_stop(&px);
	test_mixed(addr, "off");
	test_mixed(addr, "on");
	test_wakeups(addr);
	test_sealed(addr);
	test_close(&srv, addr);
	test_down(&srv, addr);
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	printf("test_remote_put: ok\n");
	return 0;
}

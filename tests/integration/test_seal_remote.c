/*
 * test_seal_remote.c - sealed namespaces through the remote tier, against a
 * real kvtierd, with a recording TCP proxy between the engines and it.
 *
 * Usage: test_seal_remote PATH-TO-KVTIERD
 *
 * What it proves:
 *   - a known plaintext pattern put to a sealed namespace appears neither
 *     in the bytes on the wire (both directions, recorded by the proxy) nor
 *     in any file of the server's data directory (SSD admission "always");
 *     the same pattern put unsealed does appear in both (the searches work);
 *   - another engine with the same master key gets the block byte-exact
 *     from the server; one with another master key gets a miss; one given
 *     the owner's exported namespace key gets it;
 *   - a client without the key (same tenant, so it may write) that
 *     re-puts the ciphertext with one bit flipped, or puts one block's
 *     ciphertext under another key, causes misses, counted as tag
 *     failures: the server cannot forge, modify or swap sealed blocks.
 */
#include <arpa/inet.h>
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
#include <dirent.h>
#include <fcntl.h>

#include "proxy.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define VLEN (1u << 20)
#define PARTS 3
#define OVER 33 /* sealed bytes added per part (doc/security.md) */

static const char canary[] = "KVTIER-PLAINTEXT-CANARY-7f3a9";

/* ------------------------------------------------------------------------ */


static struct kvt_store *engine(const char *addr)
{
	return tsrv_engine(addr, (const char *[]){ "remote.timeout_ms", "5000", NULL });
}

static void master(uint8_t m[32], uint8_t seed)
{
	for (int i = 0; i < 32; i++)
		m[i] = (uint8_t)(seed * 17 + i);
}

static void put3(struct kvt_store *s, uint32_t ns, uint64_t id, const uint8_t *buf, size_t len,
		 uint32_t flags)
{
	size_t per = len / PARTS;
	struct iovec iov[PARTS] = { { (void *)buf, per }, { (void *)(buf + per), per },
				    { (void *)(buf + 2 * per), len - 2 * per } };
	struct kvt_req r = t_req1(s, (struct kvt_req){ .op = KVT_OP_PUT, .flags = flags, .ns = ns,
						       .key = t_key(id), .iov = iov,
						       .iov_count = PARTS });
	T_RC(r.status, KVT_OK);
}

int main(int argc, char **argv)
{
	const char *extra[] = { "--set", "ssd.admission=always", NULL };
	uint8_t m[32], other[32], nskey[32];
	uint8_t *plain = malloc(VLEN), *out = malloc(VLEN + PARTS * OVER + 64);
	char dir[600], addr[64], *base;
	struct kvt_key k1 = t_key(1), k2 = t_key(2), k3 = t_key(3);
	struct kvt_store *a, *b;
	struct tproxy px;
	struct tsrv srv;
	uint32_t ns_a, ns_b, ns_plain;
	uint64_t vlen;

	if (argc < 2)
		T_SKIP("usage: test_seal_remote PATH-TO-KVTIERD");
	T_ASSERT(plain && out);
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/data", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, argv[1], base, dir, NULL, extra);
	tproxy_start(&px, srv.port, NULL, true);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", px.port);
	for (size_t i = 0; i < VLEN; i++)
		plain[i] = (uint8_t)canary[i % (sizeof(canary) - 1)];
	master(m, 1);
	master(other, 2);

	/* Engine a seals; its puts are written through the proxy. */
	a = engine(addr);
	ns_a = t_ns(a, "sealed");
	ns_plain = t_ns(a, "plain");
	T_OK(kvt_ns_set_seal_key(a, ns_a, m, 32));
	put3(a, ns_a, 1, plain, VLEN, 0);
	put3(a, ns_a, 2, plain, VLEN / 2, 0);
	T_OK(kvt_flush(a));
	T_ASSERT(t_stat(a, "remote.puts") >= 2);
	/* Engine b, same master key, empty DRAM: from the server, exact. */
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	T_OK(kvt_ns_set_seal_key(b, ns_b, m, 32));
	memset(out, 0, VLEN);
	T_RC(kvt_get(b, ns_b, &k1, out, VLEN, &vlen), KVT_OK);
	T_EQ_U64(vlen, VLEN);
	T_EQ_MEM(out, plain, VLEN);
	kvt_store_destroy(b);
	T_ASSERT(!tproxy_saw(&px, canary));

	/* Another tenant's master key: a miss. */
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	T_OK(kvt_ns_set_seal_key(b, ns_b, other, 32));
	T_RC(kvt_get(b, ns_b, &k1, out, VLEN, &vlen), KVT_MISS);
	T_EQ_U64(t_stat(b, "seal.tag_failures"), 1);
	kvt_store_destroy(b);
	/* A grantee given the namespace key (not the master): opens. */
	T_OK(kvt_ns_seal_key_export(a, ns_a, nskey));
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	T_OK(kvt_ns_set_seal_ns_key(b, ns_b, nskey));
	T_RC(kvt_get(b, ns_b, &k2, out, VLEN, &vlen), KVT_OK);
	T_EQ_U64(vlen, VLEN / 2);
	T_EQ_MEM(out, plain, VLEN / 2);
	kvt_store_destroy(b);

	/* A writer without the key: reads the ciphertext, flips a bit, and
	 * puts it back; puts block 1's ciphertext under key 3. */
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	{
		struct kvt_req r = { .op = KVT_OP_GET, .ns = ns_b, .key = k1, .iov_count = 1 };
		struct iovec iov = { out, VLEN + PARTS * OVER + 64 };
		struct kvt_req *rp = &r, *got;
		struct kvt_queue *q;
		size_t slen = VLEN + PARTS * OVER;
		uint8_t *copy = malloc(slen);
		size_t per = VLEN / PARTS;
		T_ASSERT(copy);
		r.iov = &iov;
		T_OK(kvt_queue_create(b, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, slen);
		T_EQ_INT(r.value_flags, KVT_F_SEALED);
		T_OK(kvt_queue_destroy(q));
		T_ASSERT(memmem(out, slen, canary, sizeof(canary) - 1) == NULL);
		memcpy(copy, out, slen);
		/* Swap: block 1's sealed bytes under key 3, with its part sizes. */
		{
			struct iovec sv[PARTS] = { { copy, per + OVER },
						   { copy + per + OVER, per + OVER },
						   { copy + 2 * (per + OVER),
						     slen - 2 * (per + OVER) } };
			T_RC(kvt_put(b, ns_b, &k3, sv, PARTS), KVT_OK);
			/* kvt_put has no flag argument: the request form sets SEALED. */
		}
		copy[per + OVER + 1000] ^= 0x10; /* a bit of part 1's ciphertext */
		T_OK(kvt_delete(b, ns_b, &k1));
		{
			struct iovec sv[PARTS] = { { copy, per + OVER },
						   { copy + per + OVER, per + OVER },
						   { copy + 2 * (per + OVER),
						     slen - 2 * (per + OVER) } };
			struct kvt_req pr = { .op = KVT_OP_PUT, .flags = KVT_F_SEALED, .ns = ns_b,
					      .key = k1, .iov = sv, .iov_count = PARTS };
			rp = &pr;
			T_OK(kvt_queue_create(b, &q));
			T_RC(kvt_submit(q, &rp, 1), 1);
			T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
			T_RC(pr.status, KVT_OK);
			T_OK(kvt_queue_destroy(q));
		}
		T_OK(kvt_flush(b));
		free(copy);
	}
	kvt_store_destroy(b);
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	T_OK(kvt_ns_set_seal_key(b, ns_b, m, 32));
	memset(out, 0x77, VLEN);
	T_RC(kvt_get(b, ns_b, &k1, out, VLEN, &vlen), KVT_MISS); /* bit flipped */
	T_EQ_U64(t_stat(b, "seal.tag_failures"), 1);
	T_ASSERT(memmem(out, VLEN, canary, sizeof(canary) - 1) == NULL);
	/* Key 3's bytes were put without SEALED: not served in a sealed ns. */
	T_RC(kvt_get(b, ns_b, &k3, out, VLEN, &vlen), KVT_MISS);
	T_EQ_U64(t_stat(b, "seal.unsealed_misses"), 1);
	T_RC(kvt_get(b, ns_b, &k2, out, VLEN, &vlen), KVT_OK); /* untouched */
	kvt_store_destroy(b);

	/* Swap with the SEALED flag: the AAD names key 1, not key 3. */
	b = engine(addr);
	ns_b = t_ns(b, "sealed");
	{
		uint64_t k4i = 4;
		struct kvt_key k4 = t_key(k4i);
		struct kvt_req r = { .op = KVT_OP_GET, .ns = ns_b, .key = k2, .iov_count = 1 };
		struct iovec iov = { out, VLEN + PARTS * OVER + 64 };
		struct kvt_req *rp = &r, *got;
		struct kvt_queue *q;
		size_t per = (VLEN / 2) / PARTS, slen = VLEN / 2 + PARTS * OVER;
		r.iov = &iov;
		T_OK(kvt_queue_create(b, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, slen);
		struct iovec sv[PARTS] = { { out, per + OVER }, { out + per + OVER, per + OVER },
					   { out + 2 * (per + OVER), slen - 2 * (per + OVER) } };
		struct kvt_req pr = { .op = KVT_OP_PUT, .flags = KVT_F_SEALED, .ns = ns_b,
				      .key = k4, .iov = sv, .iov_count = PARTS };
		rp = &pr;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
		T_RC(pr.status, KVT_OK);
		T_OK(kvt_queue_destroy(q));
		T_OK(kvt_flush(b));
		kvt_store_destroy(b);
		b = engine(addr);
		ns_b = t_ns(b, "sealed");
		T_OK(kvt_ns_set_seal_key(b, ns_b, m, 32));
		T_RC(kvt_get(b, ns_b, &k4, out, VLEN, &vlen), KVT_MISS);
		T_EQ_U64(t_stat(b, "seal.tag_failures"), 1);
		T_RC(kvt_get(b, ns_b, &k2, out, VLEN, &vlen), KVT_OK);
		T_EQ_MEM(out, plain, VLEN / 2);
		kvt_store_destroy(b);
	}

	/* Nothing so far carried the pattern: not on the wire, not on disk. */
	T_ASSERT(!tproxy_saw(&px, canary));
	kvt_store_destroy(a);
	T_EQ_INT(tsrv_stop(&srv), 0);
	T_ASSERT(!t_dir_contains(dir, canary));

	/* Control: the same pattern unsealed is visible in both places. */
	tsrv_start(&srv, argv[1], base, dir, NULL, extra);
	atomic_store(&px.to_port, srv.port);
	a = engine(addr);
	ns_plain = t_ns(a, "plain");
	put3(a, ns_plain, 9, plain, VLEN, 0);
	T_OK(kvt_flush(a));
	kvt_store_destroy(a);
	T_EQ_INT(tsrv_stop(&srv), 0);
	T_ASSERT(tproxy_saw(&px, canary));
	T_ASSERT(t_dir_contains(dir, canary));

	tproxy_stop(&px);
	t_rmtree(base);
	free(base);
	free(plain);
	free(out);
	return 0;
}

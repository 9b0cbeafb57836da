/*
 * test_isolation.c - tenant isolation in kvtierd, red-teamed (leak22):
 * an authenticated hostile tenant (bob, carol) against another tenant's
 * (alice's) blocks, through every protocol kvtierd speaks -- native over
 * TCP and the Unix socket, RESP, S3 with SigV4 -- and its admin-ish paths
 * (doc/security.md "Cross-tenant probing", "Tenant isolation, red team").
 * Each attempt asserts its outcome: refused, a miss, or the attacker's own
 * bytes; and afterwards alice's bytes are exactly what she put.
 *
 * One phase per run (argv[2]), each with one real kvtierd on loopback
 * (tenants alice, bob, carol, Alice -- alice's name in another case --
 * and an admin; grants of alice's "iso-shared" and S3 bucket "shared" to
 * bob):
 *
 *   native   the same key bytes in two tenants' namespaces; alice's
 *            digests replayed by bob in GET, EXISTS, LOOKUP, PUT, DELETE,
 *            CLEAR (NS, TENANT), STATS (TENANT, ALL), and DRAIN, over TCP
 *            and the Unix socket, answered as an unknown digest is;
 *            NS_REGISTER texts naming alice (tenant=alice, ALICE, Alice,
 *            the RESP and S3 descriptors of alice) answered with bob's own
 *            namespace; keys of 64 bytes (the largest) and one byte
 *            shorter; a read-only grant used to PUT, DELETE and CLEAR
 *            (PROTO_EPERM), and to register a namespace alice never did;
 *            range and part reads past the end or at the largest offsets;
 *            HELLO as "kvtierd-peer" and AUTH method NONE; two tenants
 *            racing PUT, DELETE and GET of the same key bytes (every hit
 *            whole, of the reader's tenant)
 *   resp_s3  RESP: GET, MGET, EXISTS, DEL, FLUSHDB, DBSIZE, INFO, KEYS,
 *            SCAN, SELECT and AUTH forms against alice's keys, a connection
 *            re-AUTHed from alice to bob with a SET NX in flight; a native
 *            client forging values in its own RESP and S3 namespaces
 *            (another key's header, lengths that lie).  S3: alice's bucket
 *            name in bob's namespace, "alice.BUCKET" without a grant, a
 *            granted bucket written through (PUT, DELETE, DeleteObjects,
 *            multipart, copy into it), copies out of alice's buckets,
 *            alice's upload id used in bob's bucket, ListObjects with
 *            forged continuation tokens, markers and prefixes,
 *            ListBuckets, ranges past the end and overflowing, keys of
 *            1024 and 1025 bytes; /metrics with a tenant's secret
 *   pod      a member of a static pod (--members): bob's STATS keep the
 *            member list and repair.drain_state, but none of the repair
 *            thread's counters, which count every tenant's placed puts
 *            and deletes (before leak22 bob's repair.tracked went 0 -> 11
 *            around alice's 12 placed puts and a delete); the admin's
 *            STATS still have them
 *   ssd_race alice deletes and re-puts keys with other bytes while 16 MiB
 *            of DRAM overflows to SSD; bob's quiet GETs through the grant
 *            (SSD-only blocks read into a private buffer) and alice's own
 *            race them: every hit one whole version of alice's
 *
 * argv[1]: kvtierd.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define SA "secret-of-alice-0123456789"
#define SB "secret-of-bob-0123456789ab"
#define SC "secret-of-carol-012345678"
#define SA2 "secret-of-Alice-upper-0123"
#define SO "secret-of-ops-0123456789ab"

static const char *bin;
static char base[512];
static struct tsrv srv;
static uint16_t resp_port, s3_port, m_port;

static void start(const char *name)
{
	char tenants[700], dir[700];
	static const char *const extra[] = {
		"--resp", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
		"--metrics-token", NULL, NULL,
	};
	const char *argv[16];
	char tok[700];
	int n = 0;

	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants,
			"alice " SA " tenant\n"
			"bob " SB " tenant\n"
			"carol " SC " tenant\n"
			"Alice " SA2 " tenant\n"
			"ops " SO " admin\n"
			"grant alice model=iso-shared to bob\n"
			"grant alice model=s3/shared to bob\n");
	snprintf(tok, sizeof(tok), "%s/token", base);
	tsrv_write_file(NULL, tok, "metrics-token-0123456789abcdef\n");
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n++] = tok;
	argv[n] = NULL;
	tsrv_start(&srv, bin, base, dir, tenants, argv);
	resp_port = tsrv_listener_port(srv.log, "RESP");
	s3_port = tsrv_s3_port(srv.log);
	m_port = tsrv_listener_port(srv.log, "metrics");
}

static void login(struct kc *c, const char *who, const char *secret)
{
	T_RC(kc_connect_tcp(c, srv.port), 0);
	T_RC(kc_login(c, who, secret), 0);
}

static struct kvt_ns_desc desc_of(const char *model, const char *tenant)
{
	struct kvt_ns_desc d = {
		.model = model, .dtype = "bf16", .layout = "vllm-flash-nhd",
		.block_tokens = 16, .tp_size = 1, .pp_size = 1, .tenant = tenant,
	};
	return d;
}

/* The digest a descriptor has, computed here (what an attacker can do). */
static void digest_of(const struct kvt_ns_desc *d, uint8_t out[PROTO_DIGEST_LEN])
{
	T_ASSERT(kvt_ns_digest(d, out, NULL, 0) >= 0);
}

static struct kvt_key key_of(const char *s, size_t n)
{
	struct kvt_key k = { .len = (uint32_t)n };
	memcpy(k.bytes, s, n);
	return k;
}

static int put_bytes(struct kc *c, const uint8_t *ns, const struct kvt_key *k, const void *p,
		     size_t n)
{
	struct iovec v = { (void *)p, n };
	return kc_put(c, ns, k, &v, 1, NULL);
}

/* GET k: must be KVT_OK with exactly want (n bytes), every CRC good. */
static void expect_value(struct kc *c, const uint8_t *ns, const struct kvt_key *k,
			 const void *want, size_t n, const char *what)
{
	struct kc_value v = { 0 };
	int rc = kc_get(c, ns, k, 0, 0, 0, 0, &v);
	if (rc != KVT_OK || v.len != n || memcmp(v.bytes, want, n) != 0 || !v.crc_ok)
		T_FAIL("%s: GET %d, %" PRIu64 " bytes (want %zu)", what, rc, v.len, n);
	kc_value_free(&v);
}

/* NS_REGISTER of a raw canonical text: the item status; digest and the
 * server's text (NUL-terminated) when KVT_OK. */
static int reg_text(struct kc *c, const char *text, size_t len, uint8_t *digest, char *canon,
		    size_t cap)
{
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct proto_item it = { .text = text, .text_len = (uint32_t)len }, got;
	struct proto_iter iter;
	struct kc_resp r;
	int64_t tag = kc_request(c, &f, &it, 1, NULL, 0);
	int rc;

	if (tag < 0)
		return (int)tag;
	rc = kc_recv(c, &r, 20000);
	if (rc < 0)
		return rc;
	if (r.f.status < 0) {
		rc = r.f.status;
		goto out;
	}
	proto_iter_init(&iter, &r.f, NULL, NULL, 0);
	T_EQ_INT(proto_iter_next(&iter, &got), 1);
	rc = got.status;
	if (rc == KVT_OK) {
		size_t m = got.text_len < cap - 1 ? got.text_len : cap - 1;
		memcpy(digest, got.digest, PROTO_DIGEST_LEN);
		memcpy(canon, got.text, m);
		canon[m] = 0;
	}
out:
	kc_resp_free(&r);
	return rc;
}

/* A frame-level request with no items (DRAIN): the response status. */
static int32_t drain_status(struct kc *c)
{
	struct proto_frame f = { .op = PROTO_OP_DRAIN };
	struct kc_resp r;
	int32_t st;

	f.drain_mode = PROTO_DRAIN_STAY;
	T_ASSERT(kc_request(c, &f, NULL, 0, NULL, 0) > 0);
	T_RC(kc_recv(c, &r, 20000), 0);
	st = r.f.status;
	kc_resp_free(&r);
	return st;
}

/* Everything bob may try with a digest he does not own: each answered as
 * an unknown digest is (KVT_ENONS), the connection kept. */
static void replay_digest(struct kc *c, const uint8_t *ns, const struct kvt_key *k,
			  const char *what)
{
	struct kc_value v = { 0 };
	uint32_t hits = 99, tier = 0;
	uint64_t removed = 0;
	const char junk[] = "planted by bob";

	T_EQ_INT(kc_get(c, ns, k, 0, 0, 0, 0, &v), KVT_ENONS);
	kc_value_free(&v);
	memset(&v, 0, sizeof(v));
	T_EQ_INT(kc_get(c, ns, k, PROTO_IF_RANGE, 0, 0, 1, &v), KVT_ENONS);
	kc_value_free(&v);
	memset(&v, 0, sizeof(v));
	T_EQ_INT(kc_get(c, ns, k, PROTO_IF_PART, 0, 0, 0, &v), KVT_ENONS);
	kc_value_free(&v);
	T_EQ_INT(kc_exists(c, ns, k, &tier), KVT_ENONS);
	T_EQ_INT(kc_lookup(c, ns, k, 1, &hits, NULL), KVT_ENONS);
	T_EQ_INT(kc_delete(c, ns, k), KVT_ENONS);
	T_EQ_INT(put_bytes(c, ns, k, junk, sizeof(junk)), KVT_ENONS);
	T_EQ_INT(kc_clear(c, PROTO_SCOPE_NS, ns, NULL, &removed), KVT_ENONS);
	T_RC(kc_ping(c), 0);
	printf("  %s: GET, RANGE, PART, EXISTS, LOOKUP, DELETE, PUT, CLEAR NS: KVT_ENONS\n",
	       what);
}

/* ------------------------------------------------------------------------
 * native
 */

#define RANGE_REFUSED 1000 /* any error: KVT_ERANGE, or the codec's */
#define RACE_MS 1500
#define RACE_KEYS 4

struct racer {
	const char *who, *secret;
	uint8_t ns[PROTO_DIGEST_LEN];
	uint8_t mark;         /* the tenant's byte: every value is full of it */
	bool writer;
	_Atomic bool *stop;
	uint64_t gets, hits, bad, puts;
};

/* A value of this tenant: [mark][version u32][len u32] then mark bytes
 * xored with the version's low byte, len 64..4095 by version. */
static size_t race_value(uint8_t *b, uint8_t mark, uint32_t ver)
{
	size_t n = 64 + (ver * 2654435761u) % 4032;
	b[0] = mark;
	memcpy(b + 1, &ver, 4);
	uint32_t l = (uint32_t)n;
	memcpy(b + 5, &l, 4);
	for (size_t i = 9; i < n; i++)
		b[i] = (uint8_t)(mark ^ ver ^ i);
	return n;
}

static bool race_check(const uint8_t *b, size_t n, uint8_t mark)
{
	uint32_t ver, l;
	uint8_t want[4096];
	if (n < 9 || b[0] != mark)
		return false;
	memcpy(&ver, b + 1, 4);
	memcpy(&l, b + 5, 4);
	if (l != n || race_value(want, mark, ver) != n)
		return false;
	return memcmp(want, b, n) == 0;
}

static void *race_main(void *arg)
{
	struct racer *r = arg;
	struct kc c;
	uint8_t buf[4096];
	uint32_t ver = r->writer ? 1 : 0;

	login(&c, r->who, r->secret);
	while (!atomic_load(r->stop)) {
		char kb[8];
		snprintf(kb, sizeof(kb), "race%u", ver % RACE_KEYS);
		struct kvt_key k = key_of(kb, strlen(kb));
		if (r->writer) {
			size_t n = race_value(buf, r->mark, ver);
			int rc = put_bytes(&c, r->ns, &k, buf, n);
			T_ASSERT(rc == KVT_OK || rc == KVT_EXISTS);
			r->puts++;
			if (ver % 2) {
				rc = kc_delete(&c, r->ns, &k);
				T_ASSERT(rc == KVT_OK || rc == KVT_MISS);
			}
		} else {
			struct kc_value v = { 0 };
			int rc = kc_get(&c, r->ns, &k, 0, 0, 0, 0, &v);
			r->gets++;
			if (rc == KVT_OK) {
				r->hits++;
				if (!v.crc_ok || !race_check(v.bytes, v.len, r->mark))
					r->bad++;
			} else if (rc != KVT_MISS) {
				r->bad++;
			}
			kc_value_free(&v);
		}
		ver++;
	}
	kc_close(&c);
	return NULL;
}

static void phase_native(void)
{
	struct kc a, b, cr, o, u;
	uint8_t da[PROTO_DIGEST_LEN], db[PROTO_DIGEST_LEN], dc[PROTO_DIGEST_LEN];
	uint8_t ds[PROTO_DIGEST_LEN], dx[PROTO_DIGEST_LEN], unknown[PROTO_DIGEST_LEN];
	char canon[PROTO_CANON_MAX + 1];
	struct kvt_ns_desc d = desc_of("iso-model", NULL);
	const char va[] = "alice's bytes, exactly these", vb[] = "bob's";
	char k64[64], k63[63];
	struct kvt_key k = key_of("same-key-bytes", 14);
	uint64_t removed = 0, val = 0;

	start("native");
	login(&a, "alice", SA);
	login(&b, "bob", SB);
	login(&cr, "carol", SC);
	login(&o, "ops", SO);
	T_EQ_INT((int)o.role, PROTO_ROLE_ADMIN);
	T_EQ_INT((int)b.role, PROTO_ROLE_TENANT);

	/* 1. The same descriptor, two tenants: two namespaces; the same key
	 * bytes in each hold each tenant's own bytes. */
	T_RC(kc_register(&a, &d, da, canon, sizeof(canon)), KVT_OK);
	T_ASSERT(strstr(canon, "\ntenant=alice\n") != NULL);
	T_RC(kc_register(&b, &d, db, canon, sizeof(canon)), KVT_OK);
	T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
	T_ASSERT(memcmp(da, db, PROTO_DIGEST_LEN) != 0);
	T_RC(put_bytes(&a, da, &k, va, sizeof(va)), KVT_OK);
	T_RC(put_bytes(&b, db, &k, vb, sizeof(vb)), KVT_OK);
	expect_value(&a, da, &k, va, sizeof(va), "alice's key");
	expect_value(&b, db, &k, vb, sizeof(vb), "bob's key of the same bytes");
	/* keys of the largest length (64) and one less, in both: each its own */
	memset(k64, 'K', sizeof(k64));
	memset(k63, 'K', sizeof(k63));
	struct kvt_key kk64 = key_of(k64, 64), kk63 = key_of(k63, 63);
	T_RC(put_bytes(&a, da, &kk64, "a64", 3), KVT_OK);
	T_RC(put_bytes(&a, da, &kk63, "a63", 3), KVT_OK);
	T_RC(put_bytes(&b, db, &kk64, "b64", 3), KVT_OK);
	{
		struct kc_value v = { 0 };
		T_EQ_INT(kc_get(&b, db, &kk63, 0, 0, 0, 0, &v), KVT_MISS);
		kc_value_free(&v);
	}
	expect_value(&a, da, &kk64, "a64", 3, "alice's 64-byte key");
	expect_value(&a, da, &kk63, "a63", 3, "alice's 63-byte key");
	expect_value(&b, db, &kk64, "b64", 3, "bob's 64-byte key");
	printf("native: same key bytes (14, 63, 64 bytes) in two tenants: each its own\n");

	/* 2. alice's digest replayed by bob (and by carol), over TCP and the
	 * Unix socket: answered exactly as a digest nobody registered. */
	memset(unknown, 0x5a, sizeof(unknown));
	replay_digest(&b, da, &k, "bob, TCP, alice's digest");
	replay_digest(&b, unknown, &k, "bob, TCP, an unknown digest");
	replay_digest(&cr, da, &k, "carol, TCP, alice's digest");
	T_RC(kc_connect_unix(&u, srv.sock), 0);
	T_RC(kc_login(&u, "bob", SB), 0);
	replay_digest(&u, da, &k, "bob, Unix socket, alice's digest");
	/* one frame naming his own and alice's namespace: his item served,
	 * hers refused, the answer per item */
	{
		uint8_t two[2 * PROTO_DIGEST_LEN];
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 2, .ns = two };
		struct proto_item its[2] = { { .ns_index = 0, .key = k },
					     { .ns_index = 1, .key = k } };
		memcpy(two, db, PROTO_DIGEST_LEN);
		memcpy(two + PROTO_DIGEST_LEN, da, PROTO_DIGEST_LEN);
		T_ASSERT(kc_request(&b, &f, its, 2, NULL, 0) > 0);
		int st[2] = { 1, 1 };
		for (int got = 0; got < 2;) {
			struct kc_resp r;
			struct proto_iter it;
			struct proto_item pi;
			T_RC(kc_recv(&b, &r, 20000), 0);
			T_EQ_INT(r.f.status, 0);
			proto_iter_init(&it, &r.f, NULL, NULL, 0);
			while (proto_iter_next(&it, &pi) == 1) {
				st[pi.index] = pi.status;
				if (pi.status == KVT_OK) {
					T_EQ_U64(pi.data_len, sizeof(vb));
					T_EQ_MEM(r.data + pi.data_off, vb, sizeof(vb));
				}
				got++;
			}
			kc_resp_free(&r);
		}
		T_EQ_INT(st[0], KVT_OK);
		T_EQ_INT(st[1], KVT_ENONS);
	}
	/* whole-request paths: another tenant's CLEAR and STATS, STATS ALL,
	 * CLEAR ALL, DRAIN: PROTO_EPERM; alice's name in another case is
	 * another tenant (Alice), not alice */
	T_EQ_INT(kc_clear(&b, PROTO_SCOPE_TENANT, NULL, "alice", &removed), PROTO_EPERM);
	T_EQ_INT(kc_clear(&b, PROTO_SCOPE_ALL, NULL, NULL, &removed), PROTO_EPERM);
	T_EQ_INT(kc_stat_of(&b, PROTO_SCOPE_TENANT, "alice", "tenant.namespaces", &val),
		 PROTO_EPERM);
	T_EQ_INT(kc_stat(&b, PROTO_SCOPE_ALL, "dram.blocks", &val), PROTO_EPERM);
	T_EQ_INT(drain_status(&b), PROTO_EPERM);
	T_RC(kc_ping(&b), 0);
	{
		struct kc up;
		uint64_t ns_n = 99;
		login(&up, "Alice", SA2);
		T_EQ_INT(kc_stat(&up, PROTO_SCOPE_TENANT, "tenant.namespaces", &ns_n), 0);
		T_EQ_U64(ns_n, 0);
		replay_digest(&up, da, &k, "Alice (another case), alice's digest");
		T_EQ_INT(kc_clear(&up, PROTO_SCOPE_TENANT, NULL, "alice", &removed), PROTO_EPERM);
		T_RC(kc_clear(&up, PROTO_SCOPE_TENANT, NULL, NULL, &removed), 0);
		kc_close(&up);
	}
	/* bob's own CLEAR of his own tenant removes his, not alice's */
	T_RC(kc_clear(&b, PROTO_SCOPE_TENANT, NULL, NULL, &removed), 0);
	T_ASSERT(removed >= 2);
	{
		struct kc_value v = { 0 };
		T_EQ_INT(kc_get(&b, db, &k, 0, 0, 0, 0, &v), KVT_MISS);
		kc_value_free(&v);
	}
	expect_value(&a, da, &k, va, sizeof(va), "alice's key after bob's attempts");
	expect_value(&a, da, &kk64, "a64", 3, "alice's 64-byte key after bob's clear");
	printf("native: CLEAR/STATS of alice, STATS ALL, CLEAR ALL, DRAIN by bob: "
	       "PROTO_EPERM; Alice (case) is not alice\n");

	/* 3. NS_REGISTER texts naming alice: each answered with bob's own
	 * namespace (the tenant line replaced), or refused; never alice's. */
	{
		struct kvt_ns_desc named = desc_of("iso-model", "alice");
		uint8_t resp_a[PROTO_DIGEST_LEN], s3_a[PROTO_DIGEST_LEN], got[PROTO_DIGEST_LEN];
		struct kvt_ns_desc rd = {
			.model = "resp", .dtype = "bytes", .layout = "redis-string",
			.block_tokens = 1, .tp_size = 1, .pp_size = 1, .tenant = "alice",
		};
		struct kvt_ns_desc sd = rd;
		char text[PROTO_CANON_MAX + 1];
		static const char *const tails[] = {
			"tenant=alice\n", "tenant=ALICE\n", "tenant=Alice\n", "tenant=alice\n\n",
			"tenant=alice\ntenant=bob\n", "tenant=-\n", "tenant=\n", "tenant=alice",
			"tenant=alice \n", "tenant=al\001ice\n", "tenant=alice\0\n",
		};
		int n;

		T_RC(kc_register(&b, &named, got, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(memcmp(got, db, PROTO_DIGEST_LEN) == 0);
		T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
		digest_of(&rd, resp_a);
		sd.model = "s3/shared";
		sd.layout = "s3-object";
		digest_of(&sd, s3_a);
		T_RC(kc_register(&b, &rd, got, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(memcmp(got, resp_a, PROTO_DIGEST_LEN) != 0);
		T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
		T_RC(kc_register(&cr, &sd, got, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(memcmp(got, s3_a, PROTO_DIGEST_LEN) != 0);
		T_ASSERT(strstr(canon, "\ntenant=carol\n") != NULL);
		/* raw texts: the descriptor's first nine lines, then a tenant
		 * line of each form.  A text the codec refuses closes the
		 * connection (an ERROR frame): a fresh one each time. */
		n = kvt_ns_digest(&named, NULL, text, sizeof(text));
		T_ASSERT(n > 0);
		char *tl = strstr(text, "tenant=");
		T_ASSERT(tl != NULL);
		for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
			struct kc e;
			size_t tlen = i == 10 ? 14 : strlen(tails[i]);
			char raw[PROTO_CANON_MAX + 64];
			size_t pre = (size_t)(tl - text);
			memcpy(raw, text, pre);
			memcpy(raw + pre, tails[i], tlen);
			login(&e, "bob", SB);
			int rc = reg_text(&e, raw, pre + tlen, got, canon, sizeof(canon));
			if (rc == KVT_OK) {
				T_ASSERT(memcmp(got, da, PROTO_DIGEST_LEN) != 0);
				T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
			}
			printf("  NS_REGISTER, tenant line form %zu, by bob: %d%s\n", i, rc,
			       rc == KVT_OK ? " (bob's own namespace)" : "");
			kc_close(&e);
		}
	}
	printf("native: NS_REGISTER texts naming alice: bob's own namespace or refused\n");

	/* 4. A read-only grant (alice's model=iso-shared to bob): bob reads,
	 * never writes; carol (no grant) gets her own namespace. */
	{
		struct kvt_ns_desc sh = desc_of("iso-shared", NULL);
		struct kvt_ns_desc shn = desc_of("iso-shared", "alice"), other = shn;
		uint8_t got[PROTO_DIGEST_LEN];
		const char vs[] = "alice's shared prompt";
		other.dtype = "fp8";
		T_RC(kc_register(&a, &sh, ds, canon, sizeof(canon)), KVT_OK);
		T_RC(put_bytes(&a, ds, &k, vs, sizeof(vs)), KVT_OK);
		T_RC(kc_register(&b, &shn, got, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(memcmp(got, ds, PROTO_DIGEST_LEN) == 0);
		expect_value(&b, ds, &k, vs, sizeof(vs), "bob's granted read");
		T_EQ_INT(put_bytes(&b, ds, &kk63, "x", 1), PROTO_EPERM);
		T_EQ_INT(put_bytes(&b, ds, &k, "x", 1), PROTO_EPERM);
		T_EQ_INT(kc_delete(&b, ds, &k), PROTO_EPERM);
		T_EQ_INT(kc_clear(&b, PROTO_SCOPE_NS, ds, NULL, &removed), PROTO_EPERM);
		T_EQ_INT(kc_clear(&b, PROTO_SCOPE_TENANT, NULL, "alice", &removed), PROTO_EPERM);
		/* a granted model alice never registered (other dtype): not
		 * created in her name */
		T_EQ_INT(kc_register(&b, &other, got, canon, sizeof(canon)), KVT_ENONS);
		/* carol has no grant: her own namespace, alice's digest refused */
		T_RC(kc_register(&cr, &shn, dc, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(memcmp(dc, ds, PROTO_DIGEST_LEN) != 0);
		replay_digest(&cr, ds, &k, "carol, alice's granted-to-bob digest");
		expect_value(&a, ds, &k, vs, sizeof(vs), "alice's shared value after the grantee");
		{
			struct kc_value v = { 0 };
			T_EQ_INT(kc_get(&a, ds, &kk63, 0, 0, 0, 0, &v), KVT_MISS);
			kc_value_free(&v);
		}
	}
	printf("native: a read-only grant: PUT, DELETE, CLEAR PROTO_EPERM; no namespace "
	       "created in alice's name\n");

	/* 5. Ranges and parts past the end, at the largest offsets: a miss
	 * of bytes (KVT_ERANGE), never bytes from past the value. */
	{
		uint8_t p0[600], p1[400];
		struct iovec parts[2] = { { p0, sizeof(p0) }, { p1, sizeof(p1) } };
		struct kvt_key kr = key_of("ranged", 6);
		uint64_t vmax = a.lim.value_max;
		struct { uint32_t flags, part; uint64_t off, len; int want; uint64_t got; } rs[] = {
			{ PROTO_IF_RANGE, 0, 999, 1, KVT_OK, 1 },
			{ PROTO_IF_RANGE, 0, 599, 2, KVT_OK, 2 },
			{ PROTO_IF_RANGE, 0, 1000, 1, KVT_ERANGE, 0 },
			{ PROTO_IF_RANGE, 0, 999, 2, KVT_ERANGE, 0 },
			{ PROTO_IF_RANGE, 0, 0, 1001, KVT_ERANGE, 0 },
			{ PROTO_IF_RANGE, 0, 500, vmax, RANGE_REFUSED, 0 },
			{ PROTO_IF_RANGE, 0, vmax - 1, 1, RANGE_REFUSED, 0 },
			{ PROTO_IF_RANGE, 0, 1, vmax, RANGE_REFUSED, 0 },
			{ PROTO_IF_RANGE, 0, vmax - 1, vmax, RANGE_REFUSED, 0 },
			{ PROTO_IF_PART, 1, 0, 0, KVT_OK, 400 },
			{ PROTO_IF_PART, 2, 0, 0, KVT_ERANGE, 0 },
			{ PROTO_IF_PART, 1023, 0, 0, KVT_ERANGE, 0 },
		};
		tsrv_fill(p0, sizeof(p0), 7);
		tsrv_fill(p1, sizeof(p1), 8);
		T_RC(kc_put(&a, da, &kr, parts, 2, NULL), KVT_OK);
		for (size_t i = 0; i < sizeof(rs) / sizeof(rs[0]); i++) {
			struct kc_value v = { 0 };
			struct kc e; /* a refusal by the codec closes: a fresh one each */
			login(&e, "alice", SA);
			int rc = kc_get(&e, da, &kr, rs[i].flags, rs[i].part, rs[i].off, rs[i].len,
					&v);
			kc_close(&e);
			printf("  GET %s %u off %" PRIu64 " len %" PRIu64
			       " of 600 + 400 bytes: %d\n",
			       rs[i].flags & PROTO_IF_PART ? "PART" : "RANGE", rs[i].part,
			       rs[i].off, rs[i].len, rc);
			if (rs[i].want == RANGE_REFUSED ? rc >= 0 : rc != rs[i].want)
				T_FAIL("range/part case %zu: %d, want %d", i, rc, rs[i].want);
			if (rc == KVT_OK) {
				T_EQ_U64(v.len, rs[i].got);
				T_ASSERT(v.crc_ok);
				const uint8_t *src = rs[i].flags & PROTO_IF_PART ? p1 : NULL;
				if (!src) {
					uint8_t whole[1000];
					memcpy(whole, p0, 600);
					memcpy(whole + 600, p1, 400);
					T_EQ_MEM(v.bytes, whole + rs[i].off, v.len);
				} else {
					T_EQ_MEM(v.bytes, src, v.len);
				}
			}
			kc_value_free(&v);
		}
		T_RC(kc_ping(&a), 0);
	}
	printf("native: ranges and parts past the end (to value_max): KVT_ERANGE, no bytes\n");

	/* 6. A client claiming to be a pod peer, and AUTH NONE naming alice
	 * (TCP and Unix): no privilege, no login. */
	{
		struct kc p;
		struct proto_frame f = { .op = PROTO_OP_HELLO };
		struct kc_resp r;
		T_RC(kc_connect_tcp(&p, srv.port), 0);
		f.hello.min_version = PROTO_VERSION_MIN;
		f.hello.max_version = PROTO_VERSION_MAX;
		f.hello.name = "kvtierd-peer";
		f.hello.name_len = 12;
		T_ASSERT(kc_request(&p, &f, NULL, 0, NULL, 0) > 0);
		T_RC(kc_recv(&p, &r, 20000), 0);
		T_EQ_INT(r.f.status, 0);
		p.version = r.f.hello.version;
		p.auth_method = r.f.hello.auth[0];
		p.lim = r.f.hello.limits;
		memcpy(p.nonce, r.f.hello.nonce, PROTO_NONCE_LEN);
		T_EQ_INT(r.f.hello.auth_count, 1);
		T_EQ_INT(r.f.hello.auth[0], PROTO_AUTH_HMAC_SHA256);
		kc_resp_free(&r);
		T_RC(kc_auth(&p, "bob", SB), 0);
		T_EQ_INT((int)p.role, PROTO_ROLE_TENANT);
		replay_digest(&p, da, &k, "bob as kvtierd-peer, alice's digest");
		T_EQ_INT(kc_stat(&p, PROTO_SCOPE_ALL, "dram.blocks", &val), PROTO_EPERM);
		T_EQ_INT(drain_status(&p), PROTO_EPERM);
		kc_close(&p);
		for (int unix_ = 0; unix_ < 2; unix_++) {
			struct kc n;
			if (unix_)
				T_RC(kc_connect_unix(&n, srv.sock), 0);
			else
				T_RC(kc_connect_tcp(&n, srv.port), 0);
			T_RC(kc_hello(&n), 0);
			n.auth_method = PROTO_AUTH_NONE;
			T_EQ_INT(kc_auth(&n, "alice", NULL), PROTO_EAUTH);
			T_ASSERT(kc_wait_closed(&n, 5000));
			kc_close(&n);
		}
	}
	printf("native: HELLO as kvtierd-peer: a tenant still; AUTH NONE as alice (TCP, Unix): "
	       "PROTO_EAUTH, closed\n");

	/* 7. Two tenants racing PUT, DELETE and GET of the same key bytes,
	 * each in its own namespace: every hit whole, its own tenant's. */
	{
		_Atomic bool stop = false;
		struct racer rc[4] = {
			{ "alice", SA, { 0 }, 0xa1, true, &stop, 0, 0, 0, 0 },
			{ "alice", SA, { 0 }, 0xa1, false, &stop, 0, 0, 0, 0 },
			{ "bob", SB, { 0 }, 0xb0, true, &stop, 0, 0, 0, 0 },
			{ "bob", SB, { 0 }, 0xb0, false, &stop, 0, 0, 0, 0 },
		};
		pthread_t th[4];
		for (int i = 0; i < 4; i++) {
			memcpy(rc[i].ns, i < 2 ? da : db, PROTO_DIGEST_LEN);
			T_EQ_INT(pthread_create(&th[i], NULL, race_main, &rc[i]), 0);
		}
		tsrv_sleep_ms(RACE_MS);
		atomic_store(&stop, true);
		for (int i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		printf("native: racing PUT/DELETE/GET of the same keys, two tenants: alice %" PRIu64
		       " gets, %" PRIu64 " hits, %" PRIu64 " wrong; bob %" PRIu64 " gets, %" PRIu64
		       " hits, %" PRIu64 " wrong (%" PRIu64 " + %" PRIu64 " puts)\n",
		       rc[1].gets, rc[1].hits, rc[1].bad, rc[3].gets, rc[3].hits, rc[3].bad,
		       rc[0].puts, rc[2].puts);
		T_EQ_U64(rc[1].bad, 0);
		T_EQ_U64(rc[3].bad, 0);
		T_ASSERT(rc[1].hits > 0 && rc[3].hits > 0);
	}
	(void)dx;
	expect_value(&a, da, &k, va, sizeof(va), "alice's key at the end");
	kc_close(&u);
	kc_close(&a);
	kc_close(&b);
	kc_close(&cr);
	kc_close(&o);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * RESP: a blocking client of whole replies, compared as raw bytes
 */

struct rconn {
	int fd;
	char buf[1 << 16];
	size_t len, pos;
};

static void r_open(struct rconn *r, const char *who, const char *secret);

static int r_connect(struct rconn *r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(resp_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r->len = r->pos = 0;
	T_ASSERT(r->fd >= 0);
	return connect(r->fd, (struct sockaddr *)&sa, sizeof(sa));
}

static bool r_fill(struct rconn *r)
{
	ssize_t n;
	if (r->pos == r->len)
		r->pos = r->len = 0;
	if (r->len == sizeof(r->buf))
		return false;
	n = recv(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, 0);
	if (n <= 0)
		return false;
	r->len += (size_t)n;
	return true;
}

/* One line (with its CRLF) appended to out. */
static bool r_line(struct rconn *r, char *out, size_t cap, size_t *ol)
{
	for (;;) {
		char *e = memchr(r->buf + r->pos, '\n', r->len - r->pos);
		if (e) {
			size_t n = (size_t)(e + 1 - (r->buf + r->pos));
			T_ASSERT(*ol + n < cap);
			memcpy(out + *ol, r->buf + r->pos, n);
			*ol += n;
			r->pos += n;
			return true;
		}
		if (r->pos) {
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
			r->len -= r->pos;
			r->pos = 0;
		}
		if (!r_fill(r))
			return false;
	}
}

static bool r_reply(struct rconn *r, char *out, size_t cap, size_t *ol)
{
	size_t at = *ol;
	long n;
	if (!r_line(r, out, cap, ol))
		return false;
	n = strtol(out + at + 1, NULL, 10);
	if (out[at] == '$' && n >= 0) {
		size_t need = (size_t)n + 2;
		T_ASSERT(*ol + need < cap);
		while (need) {
			if (r->pos == r->len && !r_fill(r))
				return false;
			size_t t = r->len - r->pos < need ? r->len - r->pos : need;
			memcpy(out + *ol, r->buf + r->pos, t);
			*ol += t;
			r->pos += t;
			need -= t;
		}
	} else if (out[at] == '*') {
		for (long i = 0; i < n; i++)
			if (!r_reply(r, out, cap, ol))
				return false;
	}
	return true;
}

/* Send a command (NULL-ended arguments), return its whole reply
 * (NUL-terminated, static). */
static const char *r_cmd(struct rconn *r, ...)
{
	static char out[1 << 16];
	char cmd[8192];
	const char *argv[32];
	int argc = 0;
	size_t n, ol = 0;
	va_list ap;

	va_start(ap, r);
	while (argc < 32 && (argv[argc] = va_arg(ap, const char *)) != NULL)
		argc++;
	va_end(ap);
	n = (size_t)snprintf(cmd, sizeof(cmd), "*%d\r\n", argc);
	for (int i = 0; i < argc; i++)
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "$%zu\r\n%s\r\n", strlen(argv[i]),
				      argv[i]);
	T_ASSERT(n < sizeof(cmd));
	T_EQ_INT((int)send(r->fd, cmd, n, MSG_NOSIGNAL), (int)n);
	if (!r_reply(r, out, sizeof(out), &ol))
		return "(closed)";
	out[ol] = 0;
	return out;
}

static void r_open(struct rconn *r, const char *who, const char *secret)
{
	T_RC(r_connect(r), 0);
	T_EQ_STR(r_cmd(r, "AUTH", who, secret, NULL), "+OK\r\n");
}

#define R_EQ(r, want, ...)                                                        \
	do {                                                                      \
		const char *got_ = r_cmd(r, __VA_ARGS__, NULL);                   \
		if (strcmp(got_, want) != 0)                                      \
			T_FAIL("RESP %s: got %s", #__VA_ARGS__, got_);            \
	} while (0)

/* The reply starts with c ('-': an error). */
#define R_IS(r, c, ...)                                                           \
	do {                                                                      \
		const char *got_ = r_cmd(r, __VA_ARGS__, NULL);                   \
		if (got_[0] != (c))                                               \
			T_FAIL("RESP %s: got %s", #__VA_ARGS__, got_);            \
	} while (0)

/* ------------------------------------------------------------------------
 * S3: libcurl's SigV4
 */

struct body {
	char *p;
	size_t len, cap;
};

static size_t sink(char *p, size_t size, size_t nm, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nm;
	if (b->len + n + 1 > b->cap) {
		size_t nc = (b->len + n + 1) * 2;
		char *np = realloc(b->p, nc);
		T_ASSERT(np != NULL);
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
	return n;
}

/* One request signed by who; the body into *out (freed by the caller;
 * "" when none).  Returns the HTTP status. */
static long s3(const char *who, const char *method, const char *path, const void *data,
	       size_t len, const char *hdr, struct body *out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char url[4096], up[128];
	long status = 0;
	const char *sec = strcmp(who, "alice") == 0 ? SA : strcmp(who, "bob") == 0 ? SB : SC;

	memset(out, 0, sizeof(*out));
	sink("", 0, 0, out);
	hd = curl_slist_append(hd, "Expect:");
	if (hdr)
		hd = curl_slist_append(hd, hdr);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", s3_port, path);
	snprintf(up, sizeof(up), "%s:%s", who, sec);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	curl_easy_setopt(h, CURLOPT_USERPWD, up);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (data || strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, data ? data : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	T_EQ_INT(curl_easy_perform(h), CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	return status;
}

/* status and, if code, the S3 error <Code>. */
static void s3_expect(const char *who, const char *method, const char *path, const void *data,
		      size_t len, const char *hdr, long want, const char *code)
{
	struct body b;
	long st = s3(who, method, path, data, len, hdr, &b);
	if (st != want || (code && !strstr(b.p, code)))
		T_FAIL("S3 %s %s %s%s%s: %ld, want %ld %s: %.300s", who, method, path,
		       hdr ? " " : "", hdr ? hdr : "", st, want, code ? code : "", b.p);
	free(b.p);
}

/* GET must be 200 with exactly want. */
static void s3_body_is(const char *who, const char *path, const char *hdr, const void *want,
		       size_t n, long st_want)
{
	struct body b;
	long st = s3(who, "GET", path, NULL, 0, hdr, &b);
	if (st != st_want || b.len != n || memcmp(b.p, want, n) != 0)
		T_FAIL("S3 %s GET %s %s: %ld, %zu bytes: %.200s", who, path, hdr ? hdr : "", st,
		       b.len, b.p);
	free(b.p);
}

/* The upload id in a CreateMultipartUpload answer. */
static void upload_id(const char *xml, char *out, size_t cap)
{
	const char *p = strstr(xml, "<UploadId>"), *e;
	T_ASSERT(p != NULL);
	p += 10;
	e = strstr(p, "</UploadId>");
	T_ASSERT(e && (size_t)(e - p) < cap);
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = 0;
}

/* A RESP key of 63 bytes: the largest stored inline ('s' + key) */
#define K63 "k63-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void phase_resp_s3(void)
{
	struct rconn ra, rb, rx;
	struct kc b;
	char path[2200];
	struct body bd;

	start("resp_s3");

	/* 1. RESP: alice's keys from bob's connection, every command that
	 * names keys or the keyspace. */
	r_open(&ra, "alice", SA);
	r_open(&rb, "bob", SB);
	R_EQ(&ra, "+OK\r\n", "SET", "k", "alice-value");
	R_EQ(&ra, "+OK\r\n", "SET", K63, "alice-63");
	R_EQ(&ra, "+OK\r\n", "SET",
	     "long-key-past-63-bytes-hashed-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	     "alice-long");
	R_EQ(&rb, "$-1\r\n", "GET", "k");
	R_EQ(&rb, "*2\r\n$-1\r\n$-1\r\n", "MGET", "k",
	     "long-key-past-63-bytes-hashed-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	R_EQ(&rb, ":0\r\n", "EXISTS", "k", K63);
	R_EQ(&rb, ":0\r\n", "DEL", "k");
	R_EQ(&rb, "+OK\r\n", "SET", "k", "bob-value");
	R_EQ(&rb, "$9\r\nbob-value\r\n", "GET", "k");
	R_EQ(&rb, "+OK\r\n", "FLUSHDB");
	R_EQ(&rb, "+OK\r\n", "FLUSHALL");
	R_IS(&rb, '-', "DBSIZE");
	R_IS(&rb, '-', "KEYS", "*");
	R_IS(&rb, '-', "SCAN", "0");
	R_IS(&rb, '-', "SELECT", "1");
	R_IS(&rb, '-', "SELECT", "-1");
	R_EQ(&rb, "+OK\r\n", "SELECT", "0");
	R_IS(&rb, '-', "MOVE", "k", "0");
	R_IS(&rb, '-', "RANDOMKEY");
	R_IS(&rb, '-', "COPY", "k", "k2");
	R_IS(&rb, '-', "RENAME", "k", "k2");
	R_IS(&rb, '-', "DEBUG", "OBJECT", "k");
	R_IS(&rb, '-', "MIGRATE", "127.0.0.1", "1", "k", "0", "1");
	{
		const char *info = r_cmd(&rb, "INFO", NULL);
		T_ASSERT(info[0] == '$');
		T_ASSERT(strstr(info, "alice") == NULL);
	}
	/* AUTH as alice with bob's secret, or as nobody: refused, bob stays bob */
	{
		/* each on a fresh connection: a failed AUTH closes it */
		static const char *const au[][2] = {
			{ "alice", SB }, { "ALICE", SA }, { "alice\x01", SA }, { "alice ", SA },
		};
		for (size_t i = 0; i < sizeof(au) / sizeof(au[0]); i++) {
			T_RC(r_connect(&rx), 0);
			R_IS(&rx, '-', "AUTH", au[i][0], au[i][1]);
			close(rx.fd);
		}
		T_RC(r_connect(&rx), 0);
		R_IS(&rx, '-', "AUTH", SA); /* as tenant "default": none here */
		close(rx.fd);
		T_RC(r_connect(&rx), 0);
		R_IS(&rx, '-', "HELLO", "3", "AUTH", "alice", SB);
		close(rx.fd);
	}
	R_EQ(&rb, "$-1\r\n", "GET", "k");
	/* one connection AUTHed as alice, then as bob (a pooling proxy): the
	 * keyspace follows the tenant, also for a SET NX in flight (its put
	 * after its check) with the AUTH and a GET pipelined behind it */
	{
		static const char pipe[] =
			"*4\r\n$3\r\nSET\r\n$2\r\nnx\r\n$5\r\nalice\r\n$2\r\nNX\r\n"
			"*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$26\r\n" SB "\r\n"
			"*2\r\n$3\r\nGET\r\n$2\r\nnx\r\n"
			"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
		char out[512];
		size_t ol = 0;
		r_open(&rx, "alice", SA);
		R_EQ(&rx, "$11\r\nalice-value\r\n", "GET", "k");
		_Static_assert(sizeof(SB) - 1 == 26, "the pipeline's length of bob's secret");
		T_EQ_INT((int)send(rx.fd, pipe, sizeof(pipe) - 1, MSG_NOSIGNAL),
			 (int)sizeof(pipe) - 1);
		for (int i = 0; i < 4; i++)
			T_ASSERT(r_reply(&rx, out, sizeof(out), &ol));
		out[ol] = 0;
		if (strcmp(out, "+OK\r\n+OK\r\n$-1\r\n$-1\r\n") != 0)
			T_FAIL("RESP re-AUTH pipeline: %s", out);
		R_EQ(&rx, "$-1\r\n", "GET", "nx");
		close(rx.fd);
		R_EQ(&ra, "$5\r\nalice\r\n", "GET", "nx");
		R_EQ(&rb, "$-1\r\n", "GET", "nx");
	}
	R_EQ(&ra, "$11\r\nalice-value\r\n", "GET", "k");
	R_EQ(&ra, "$8\r\nalice-63\r\n", "GET", K63);
	R_EQ(&ra, "$10\r\nalice-long\r\n", "GET",
	     "long-key-past-63-bytes-hashed-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	/* a connection that never authenticated */
	T_RC(r_connect(&rx), 0);
	R_IS(&rx, '-', "GET", "k");
	close(rx.fd);
	printf("resp_s3: RESP GET, MGET, EXISTS, DEL, FLUSHDB, FLUSHALL, DBSIZE, KEYS, SCAN, "
	       "SELECT, INFO, AUTH forms by bob: none reached alice's keys\n");

	/* 2. A native client forging values in its own RESP namespace: a
	 * header naming another key, a key length that lies: misses (nil),
	 * never bytes past the value. */
	login(&b, "bob", SB);
	{
		struct kvt_ns_desc rd = {
			.model = "resp", .dtype = "bytes", .layout = "redis-string",
			.block_tokens = 1, .tp_size = 1, .pp_size = 1,
		};
		uint8_t dr[PROTO_DIGEST_LEN];
		char canon[PROTO_CANON_MAX + 1];
		uint8_t v[64];
		struct kvt_key kf = key_of("sforged", 7);
		T_RC(kc_register(&b, &rd, dr, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
		/* header KVR1, key length 6 ("forged"), no expiry, key, value */
		memset(v, 0, sizeof(v));
		memcpy(v, "KVR1", 4);
		v[4] = 6;
		memcpy(v + 16, "forged", 6);
		memcpy(v + 22, "own", 3);
		T_RC(put_bytes(&b, dr, &kf, v, 25), KVT_OK);
		R_EQ(&rb, "$3\r\nown\r\n", "GET", "forged");
		R_EQ(&ra, "$-1\r\n", "GET", "forged");
		/* the same key's header claiming a key of 4 GiB - 1, then of
		 * the value's whole length plus one */
		kf = key_of("slie1", 5);
		v[4] = v[5] = v[6] = v[7] = 0xff;
		T_RC(put_bytes(&b, dr, &kf, v, 25), KVT_OK);
		R_EQ(&rb, "$-1\r\n", "GET", "lie1");
		kf = key_of("slie2", 5);
		memset(v + 4, 0, 4);
		v[4] = 4;
		memcpy(v + 16, "lie2", 4);
		T_RC(put_bytes(&b, dr, &kf, v, 19), KVT_OK); /* 16 + 4 would be 20 */
		R_EQ(&rb, "$-1\r\n", "GET", "lie2");
		R_EQ(&rb, ":0\r\n", "EXISTS", "lie1", "lie2");
	}
	printf("resp_s3: values forged over the native protocol in bob's RESP namespace: his "
	       "own, or nil\n");

	/* 3. S3. alice's bucket kv (and shared, granted to bob) */
	s3_expect("alice", "PUT", "/kvb", NULL, 0, NULL, 200, NULL);
	s3_expect("alice", "PUT", "/kvb/obj", "alice-object", 12, NULL, 200, NULL);
	s3_expect("alice", "PUT", "/shared", NULL, 0, NULL, 200, NULL);
	s3_expect("alice", "PUT", "/shared/obj", "alice-shared", 12, NULL, 200, NULL);
	/* bob: the same bucket name is his own namespace */
	s3_expect("bob", "GET", "/kvb/obj", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "HEAD", "/kvb", NULL, 0, NULL, 404, NULL);
	s3_expect("bob", "GET", "/kvb?list-type=2", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "PUT", "/kvb/obj", "bob", 3, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "DELETE", "/kvb", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "PUT", "/kvb", NULL, 0, NULL, 200, NULL);
	s3_expect("bob", "GET", "/kvb/obj", NULL, 0, NULL, 404, "NoSuchKey");
	s3_expect("bob", "HEAD", "/kvb/obj", NULL, 0, NULL, 404, NULL);
	s3_expect("bob", "PUT", "/kvb/obj", "bob-object", 10, NULL, 200, NULL);
	s3_body_is("bob", "/kvb/obj", NULL, "bob-object", 10, 200);
	s3_body_is("alice", "/kvb/obj", NULL, "alice-object", 12, 200);
	/* "alice.kvb" (no grant): as a bucket nobody created, for every op */
	s3_expect("bob", "GET", "/alice.kvb/obj", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "HEAD", "/alice.kvb", NULL, 0, NULL, 404, NULL);
	s3_expect("bob", "GET", "/alice.kvb?list-type=2", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "GET", "/alice.kvb?uploads=", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "DELETE", "/alice.kvb/obj", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "PUT", "/alice.kvb/x", "x", 1, NULL, 404, "NoSuchBucket");
	s3_expect("bob", "PUT", "/kvb/c1", NULL, 0, "x-amz-copy-source: /alice.kvb/obj", 404,
		  "NoSuchBucket");
	s3_expect("bob", "PUT", "/kvb/c1", NULL, 0, "x-amz-copy-source: alice.kvb/obj", 404,
		  "NoSuchBucket");
	s3_expect("bob", "PUT", "/kvb/c1", NULL, 0, "x-amz-copy-source: /ALICE.kvb/obj", 404,
		  "NoSuchBucket");
	s3_expect("carol", "GET", "/alice.shared/obj", NULL, 0, NULL, 404, "NoSuchBucket");
	s3_expect("carol", "PUT", "/kvb", NULL, 0, NULL, 200, NULL);
	s3_expect("carol", "PUT", "/kvb/c1", NULL, 0, "x-amz-copy-source: /alice.shared/obj", 404,
		  "NoSuchBucket");
	s3_expect("alice", "GET", "/bob.kvb/obj", NULL, 0, NULL, 404, "NoSuchBucket");
	/* the granted bucket: bob reads, never writes */
	s3_body_is("bob", "/alice.shared/obj", NULL, "alice-shared", 12, 200);
	s3_expect("bob", "PUT", "/alice.shared/obj", "bob", 3, NULL, 403, "AccessDenied");
	s3_expect("bob", "PUT", "/alice.shared/new", "bob", 3, NULL, 403, "AccessDenied");
	s3_expect("bob", "DELETE", "/alice.shared/obj", NULL, 0, NULL, 403, "AccessDenied");
	s3_expect("bob", "DELETE", "/alice.shared", NULL, 0, NULL, 403, "AccessDenied");
	s3_expect("bob", "POST", "/alice.shared/obj?uploads=", NULL, 0, NULL, 403, "AccessDenied");
	s3_expect("bob", "GET", "/alice.shared?uploads=", NULL, 0, NULL, 403, "AccessDenied");
	s3_expect("bob", "PUT", "/alice.shared/c1", NULL, 0, "x-amz-copy-source: /kvb/obj", 403,
		  "AccessDenied");
	{
		static const char del[] = "<Delete><Object><Key>obj</Key></Object></Delete>";
		uint32_t crc = kvt_crc32c(0, del, sizeof(del) - 1);
		uint8_t be[4] = { (uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
				  (uint8_t)crc };
		char hdr[64] = "x-amz-checksum-crc32c: ";
		EVP_EncodeBlock((unsigned char *)hdr + strlen(hdr), be, 4);
		s3_expect("bob", "POST", "/alice.shared?delete=", del, sizeof(del) - 1, hdr, 403,
			  "AccessDenied");
	}
	/* copying out of it into his own bucket is a read (doc/s3.md) */
	s3_expect("bob", "PUT", "/kvb/copied", NULL, 0, "x-amz-copy-source: /alice.shared/obj", 200,
		  NULL);
	s3_body_is("bob", "/kvb/copied", NULL, "alice-shared", 12, 200);
	/* ranges: past the end refused, overflowing numbers the whole
	 * object or a suffix: never a byte past it */
	s3_expect("bob", "GET", "/alice.shared/obj", NULL, 0, "Range: bytes=12-", 416,
		  "InvalidRange");
	s3_expect("bob", "GET", "/alice.shared/obj", NULL, 0, "Range: bytes=12-20", 416,
		  "InvalidRange");
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=5-100", "-shared", 7, 206);
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=-100", "alice-shared", 12, 206);
	/* positions of 20 digits and more saturate: a last byte past the
	 * end is the end (206 "d", as S3), a first one past it 416 */
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=11-18446744073709551615", "d", 1,
		   206);
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=11-9999999999999999", "d", 1, 206);
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=0-18446744073709551616",
		   "alice-shared", 12, 206);
	s3_expect("bob", "GET", "/alice.shared/obj", NULL, 0,
		  "Range: bytes=18446744073709551615-18446744073709551616", 416, "InvalidRange");
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=-18446744073709551615",
		   "alice-shared", 12, 206);
	s3_body_is("bob", "/alice.shared/obj", "Range: bytes=-9999999999999999", "alice-shared",
		   12, 206);
	printf("resp_s3: S3 bucket names of alice (kvb, alice.kvb, ALICE.kvb, carol's "
	       "alice.shared): NoSuchBucket; the grant read-only; ranges exact\n");

	/* alice's upload id used in bob's bucket of the same name */
	{
		char up[64], q[256];
		long st;
		T_EQ_INT((int)s3("alice", "POST", "/kvb/big?uploads=", NULL, 0, NULL, &bd), 200);
		upload_id(bd.p, up, sizeof(up));
		free(bd.p);
		snprintf(q, sizeof(q), "/kvb/big?partNumber=1&uploadId=%s", up);
		s3_expect("bob", "PUT", q, "bob-part", 8, NULL, 404, "NoSuchUpload");
		snprintf(q, sizeof(q), "/kvb/big?uploadId=%s", up);
		s3_expect("bob", "GET", q, NULL, 0, NULL, 404, "NoSuchUpload");
		st = s3("bob", "DELETE", q, NULL, 0, NULL, &bd);
		free(bd.p);
		printf("  bob's AbortMultipartUpload of alice's upload id: %ld\n", st);
		T_EQ_INT((int)s3("bob", "GET", "/kvb?uploads=", NULL, 0, NULL, &bd), 200);
		T_ASSERT(strstr(bd.p, up) == NULL);
		free(bd.p);
		snprintf(q, sizeof(q), "/kvb/big?partNumber=1&uploadId=%s", up);
		s3_expect("alice", "PUT", q, "alice-part", 10, NULL, 200, NULL);
		T_EQ_INT((int)s3("alice", "GET", "/kvb?uploads=", NULL, 0, NULL, &bd), 200);
		T_ASSERT(strstr(bd.p, up) != NULL);
		free(bd.p);
	}
	printf("resp_s3: alice's upload id in bob's bucket: NoSuchUpload; hers untouched\n");

	/* listings: forged markers, tokens and prefixes into alice's names */
	s3_expect("alice", "PUT", "/kvb/alice-only-1", "1", 1, NULL, 200, NULL);
	s3_expect("alice", "PUT", "/kvb/alice-only-2", "2", 1, NULL, 200, NULL);
	s3_expect("bob", "PUT", "/kvb/bob-only", "b", 1, NULL, 200, NULL);
	{
		static const char *const lists[] = {
			"/kvb?list-type=2",
			"/kvb?list-type=2&prefix=alice-only",
			"/kvb?list-type=2&start-after=alice-only-0",
			"/kvb?continuation-token=616c6963652d6f6e6c792d30&list-type=2",
			"/kvb?continuation-token=00&list-type=2",
			"/kvb?delimiter=-&list-type=2",
			"/kvb?marker=alice-only-0",
			"/kvb?delimiter=-&prefix=alice",
			"/kvb?max-keys=1000",
			"/?max-keys=1000",
			"/",
		};
		for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
			T_EQ_INT((int)s3("bob", "GET", lists[i], NULL, 0, NULL, &bd), 200);
			/* (the request's own prefix and marker are echoed) */
			if (strstr(bd.p, "<Key>alice") || strstr(bd.p, "<Prefix>alice-</Prefix>") ||
			    strstr(bd.p, "<Name>shared") || strstr(bd.p, "<Name>alice") ||
			    strstr(bd.p, "<Key>big</Key>") ||
			    (i == 0 && !strstr(bd.p, "<Key>bob-only</Key>")) ||
			    (lists[i][1] != 'k' && !strstr(bd.p, "<Name>kvb</Name>")))
				T_FAIL("bob's listing %s shows alice's: %.400s", lists[i], bd.p);
			free(bd.p);
		}
		T_EQ_INT((int)s3("alice", "GET", "/kvb?list-type=2", NULL, 0, NULL, &bd), 200);
		T_ASSERT(strstr(bd.p, "alice-only-2") != NULL && strstr(bd.p, "bob-only") == NULL &&
			 strstr(bd.p, "copied") == NULL);
		free(bd.p);
	}
	printf("resp_s3: ListObjects (v1, v2) and ListBuckets with forged tokens, markers, "
	       "prefixes: bob's names only\n");

	/* keys of 1024 bytes (the largest) and 1025 */
	{
		char key[1026];
		memset(key, 'q', sizeof(key));
		key[1024] = 0;
		snprintf(path, sizeof(path), "/kvb/%s", key);
		s3_expect("bob", "PUT", path, "long", 4, NULL, 200, NULL);
		s3_expect("alice", "GET", path, NULL, 0, NULL, 404, "NoSuchKey");
		key[1024] = 'q';
		key[1025] = 0;
		snprintf(path, sizeof(path), "/kvb/%s", key);
		s3_expect("bob", "PUT", path, "long", 4, NULL, 400, "KeyTooLong");
	}

	/* a native client forging objects in bob's own bucket namespace: a
	 * length that lies, another name: NoSuchKey, never other bytes */
	{
		struct kvt_ns_desc sd = {
			.model = "s3/kvb", .dtype = "bytes", .layout = "s3-object",
			.block_tokens = 1, .tp_size = 1, .pp_size = 1, .tenant = "alice",
		};
		uint8_t ds[PROTO_DIGEST_LEN], h[128];
		char canon[PROTO_CANON_MAX + 1];
		struct kvt_key ko = { .len = 33 };
		/* forged-crlf: a content type that would split the answer,
		 * sent back as it was until 2026-12-04 (attack27): 200 with
		 * an "x-forged: 1" header */
		static const struct {
			const char *name, *stored, *ctype;
			uint64_t len;
			long st;
		} fs[] = {
			{ "forged-ok", "forged-ok", "", 5, 200 },
			{ "forged-long", "forged-long", "", 4096, 404 },
			{ "forged-short", "forged-short", "", 1, 404 },
			{ "forged-wrap", "forged-wrap", "", UINT64_MAX - 70, 404 },
			{ "forged-name", "forged-nam3", "", 5, 404 },
			{ "forged-ctype", "forged-ctype", "text/plain; charset=x", 5, 200 },
			{ "forged-crlf", "forged-crlf", "text/plain\r\nx-forged: 1", 5, 404 },
			/* a tab is a header value's byte: still an object */
			{ "forged-tab", "forged-tab", "text/plain;\tcharset=x", 5, 200 },
		};
		T_RC(kc_register(&b, &sd, ds, canon, sizeof(canon)), KVT_OK);
		T_ASSERT(strstr(canon, "\ntenant=bob\n") != NULL);
		for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
			size_t nl = strlen(fs[i].stored), cl = strlen(fs[i].ctype);
			memset(h, 0, sizeof(h));
			memcpy(h, "KVS3", 4);
			h[4] = 1;
			memcpy(h + 8, &fs[i].len, 8);
			h[28] = (uint8_t)nl;
			h[32] = (uint8_t)cl;
			memcpy(h + 64, fs[i].stored, nl);
			memcpy(h + 64 + nl, fs[i].ctype, cl);
			memcpy(h + 64 + nl + cl, "bytes", 5);
			ko.bytes[0] = 'o';
			SHA256((const uint8_t *)fs[i].name, strlen(fs[i].name), ko.bytes + 1);
			T_RC(put_bytes(&b, ds, &ko, h, 64 + nl + cl + 5), KVT_OK);
			snprintf(path, sizeof(path), "/kvb/%s", fs[i].name);
			if (fs[i].st == 200)
				s3_body_is("bob", path, NULL, "bytes", 5, 200);
			else
				s3_expect("bob", "GET", path, NULL, 0, NULL, 404, "NoSuchKey");
			s3_expect("alice", "GET", path, NULL, 0, NULL, 404, "NoSuchKey");
		}
	}
	printf("resp_s3: S3 objects forged over the native protocol in bob's bucket: his own "
	       "bytes, or NoSuchKey\n");

	/* /metrics: a tenant's secrets are not its token */
	{
		int code = 0;
		char *page = tsrv_http_get(m_port, "/metrics", SB, &code);
		T_EQ_INT(code, 401);
		free(page);
		page = tsrv_http_get(m_port, "/metrics", SA, &code);
		T_EQ_INT(code, 401);
		free(page);
	}
	/* bob's own bucket named "alice.shared" takes the name over, for
	 * him only (doc/s3.md): his reads are then his own */
	s3_expect("bob", "PUT", "/alice.shared", NULL, 0, NULL, 200, NULL);
	s3_expect("bob", "GET", "/alice.shared/obj", NULL, 0, NULL, 404, "NoSuchKey");
	s3_expect("bob", "PUT", "/alice.shared/obj", "bob-in-his", 10, NULL, 200, NULL);
	/* alice's bytes, every protocol, exactly as she put them */
	s3_body_is("alice", "/kvb/obj", NULL, "alice-object", 12, 200);
	s3_body_is("alice", "/shared/obj", NULL, "alice-shared", 12, 200);
	R_EQ(&ra, "$11\r\nalice-value\r\n", "GET", "k");
	close(ra.fd);
	close(rb.fd);
	kc_close(&b);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * pod: a member of a pod (--members) answers every tenant's STATS with the
 * cluster's list (engines learn the pod from any server); the repair
 * thread's counters are server-wide -- every tenant's placed puts, deletes
 * and forwards -- and before leak22 went with it to every tenant.
 */

static void pod_item(void *ctx, const struct kc_resp *r, const struct proto_item *it)
{
	(void)r;
	if (it->status == KVT_OK)
		(*(unsigned *)ctx)++;
}

/* n placed puts (PROTO_IF_PLACED, 2 copies) of 64 bytes in ns, one frame. */
static unsigned placed_puts(struct kc *c, const uint8_t *ns, unsigned n, const char *prefix)
{
	struct proto_item its[16] = { 0 };
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
	uint8_t val[16 * 64];
	uint64_t lens[1] = { 64 };
	uint32_t crc[1];
	struct iovec d = { val, (size_t)n * 64 };
	unsigned ok = 0;

	T_ASSERT(n <= 16);
	memset(val, 0x5a, sizeof(val));
	crc[0] = kvt_crc32c(0, val, 64);
	for (unsigned i = 0; i < n; i++) {
		char name[24];
		snprintf(name, sizeof(name), "%s%02u", prefix, i);
		kvt_key_set(&its[i].key, name, strlen(name));
		its[i].flags = PROTO_IF_PLACED;
		its[i].anchor = i;
		its[i].copies = 2;
		its[i].part_count = 1;
		its[i].part_lens = lens;
		its[i].part_crcs = crc;
	}
	T_ASSERT(kc_request(c, &f, its, n, &d, 1) > 0);
	T_ASSERT(kc_recv_items(c, 30000, pod_item, &ok, NULL) > 0);
	return ok;
}

static void phase_pod(void)
{
	char listen_at[32], members[80], tenants[700], dir[700];
	uint16_t p = t_free_port(), other = t_free_port();
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, NULL };
	struct kc a, b, o;
	struct kvt_ns_desc d = desc_of("iso-model", NULL);
	uint8_t da[PROTO_DIGEST_LEN];
	uint64_t tracked0 = 0, tracked1 = 0, v = 0, members_n = 0;
	int rc0, rc1;

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, other);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants,
			"alice " SA " tenant\nbob " SB " tenant\nops " SO " admin\n");
	snprintf(dir, sizeof(dir), "%s/pod", base);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	login(&a, "alice", SA);
	login(&b, "bob", SB);
	login(&o, "ops", SO);
	T_RC(kc_register(&a, &d, da, NULL, 0), KVT_OK);
	/* the pod's list and a member's drain state: every tenant's (the
	 * engines and the other members' polls read them) */
	T_RC(kc_stat(&b, PROTO_SCOPE_TENANT, "cluster.members", &members_n), 0);
	T_EQ_U64(members_n, 2);
	T_RC(kc_stat(&b, PROTO_SCOPE_TENANT, "repair.drain_state", &v), 0);
	/* what alice's placed puts do to bob's STATS */
	rc0 = kc_stat(&b, PROTO_SCOPE_TENANT, "repair.tracked", &tracked0);
	T_EQ_INT((int)placed_puts(&a, da, 12, "placed"), 12);
	T_EQ_INT(kc_delete(&a, da, &(struct kvt_key){ .len = 8, .bytes = "placed00" }), KVT_OK);
	rc1 = kc_stat(&b, PROTO_SCOPE_TENANT, "repair.tracked", &tracked1);
	printf("pod: bob's STATS repair.tracked around alice's 12 placed puts: %d %" PRIu64
	       " -> %d %" PRIu64 "\n", rc0, tracked0, rc1, tracked1);
	for (size_t i = 0; i < 4; i++) {
		static const char *const names[] = { "repair.tracked", "repair.tombstones",
						     "repair.forward_queued", "repair.bytes" };
		T_EQ_INT(kc_stat(&b, PROTO_SCOPE_TENANT, names[i], &v), KVT_MISS);
	}
	/* the admin still sees them */
	T_RC(kc_stat(&o, PROTO_SCOPE_TENANT, "repair.tracked", &tracked1), 0);
	T_GE_INT(tracked1, 11);
	T_RC(kc_stat(&o, PROTO_SCOPE_ALL, "repair.tombstones", &v), 0);
	T_GE_INT(v, 1);
	printf("pod: bob's STATS: the pod's list and drain state, no repair counters; the "
	       "admin's: repair.tracked %" PRIu64 ", repair.tombstones %" PRIu64 "\n", tracked1,
	       v);
	kc_close(&a);
	kc_close(&b);
	kc_close(&o);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ssd_race: alice PUTs, DELETEs and re-PUTs the same keys with other bytes
 * (64..256 KiB, self-describing) in her namespace granted to bob, while
 * filling a 16 MiB DRAM tier so that her blocks go down to SSD and out of
 * DRAM; bob's quiet GETs (SSD-only blocks read into a private buffer, not
 * promoted) and alice's own GETs race them: every hit one whole version
 * of alice's, never another version's bytes or anyone else's.
 */

#define SR_KEYS 32
#define SR_MS 2000

struct srace {
	const char *who, *secret;
	uint8_t ns[PROTO_DIGEST_LEN];
	int role;              /* 0 writer, 1 reader */
	_Atomic bool *stop;
	uint64_t gets, hits, bad, puts;
};

/* version ver of a key: [0xa1][ver u32][len u32][key index u32] then
 * bytes from ver and the offset; 64..256 KiB */
static size_t sr_value(uint8_t *b, uint32_t key, uint32_t ver)
{
	size_t n = (64u << 10) + ((ver * 2654435761u + key * 40503u) % (192u << 10));
	uint32_t l = (uint32_t)n;
	b[0] = 0xa1;
	memcpy(b + 1, &ver, 4);
	memcpy(b + 5, &l, 4);
	memcpy(b + 9, &key, 4);
	for (size_t i = 13; i < n; i++)
		b[i] = (uint8_t)((ver * 131u) ^ (i * 7u) ^ (i >> 9) ^ key);
	return n;
}

static bool sr_check(const uint8_t *b, size_t n, uint32_t key, uint8_t *scratch)
{
	uint32_t ver, l, k;
	if (n < 13 || b[0] != 0xa1)
		return false;
	memcpy(&ver, b + 1, 4);
	memcpy(&l, b + 5, 4);
	memcpy(&k, b + 9, 4);
	if (l != n || k != key || sr_value(scratch, key, ver) != n)
		return false;
	return memcmp(scratch, b, n) == 0;
}

static void *sr_main(void *arg)
{
	struct srace *r = arg;
	struct kc c;
	uint8_t *buf = malloc(256u << 10), *scratch = malloc(256u << 10);
	uint32_t ver = 1, fill = 0;

	T_ASSERT(buf && scratch);
	login(&c, r->who, r->secret);
	for (uint32_t it = 0; !atomic_load(r->stop); it++) {
		char kb[16];
		uint32_t key = it % SR_KEYS;
		snprintf(kb, sizeof(kb), "sr%u", key);
		struct kvt_key k = key_of(kb, strlen(kb));
		if (r->role == 0) {
			int rc;
			/* each key re-put every 2 * SR_KEYS iterations, 32 MiB of
			 * filler later: by then on SSD only, where bob reads it */
			key = (it / 2) % SR_KEYS;
			snprintf(kb, sizeof(kb), "sr%u", key);
			k = key_of(kb, strlen(kb));
			if (it % 2 == 0) {
				size_t n = sr_value(buf, key, ver++);
				rc = kc_delete(&c, r->ns, &k);
				T_ASSERT(rc == KVT_OK || rc == KVT_MISS);
				rc = put_bytes(&c, r->ns, &k, buf, n);
				T_ASSERT(rc == KVT_OK || rc == KVT_EXISTS);
				r->puts++;
			}
			/* and 512 KiB of filler: DRAM over, down to SSD */
			for (int f = 0; f < 2; f++) {
				snprintf(kb, sizeof(kb), "fill%u", fill++);
				struct kvt_key fk = key_of(kb, strlen(kb));
				memset(scratch, 0x33, 256u << 10);
				rc = put_bytes(&c, r->ns, &fk, scratch, 256u << 10);
				T_ASSERT(rc == KVT_OK || rc == KVT_EXISTS || rc == KVT_EFULL);
			}
		} else {
			struct kc_value v = { 0 };
			int rc = kc_get(&c, r->ns, &k, 0, 0, 0, 0, &v);
			r->gets++;
			if (rc == KVT_OK) {
				r->hits++;
				if (!v.crc_ok || !sr_check(v.bytes, v.len, key, scratch))
					r->bad++;
			} else if (rc != KVT_MISS) {
				r->bad++;
			}
			kc_value_free(&v);
		}
	}
	kc_close(&c);
	free(buf);
	free(scratch);
	return NULL;
}

static void phase_ssd_race(void)
{
	char tenants[700], dir[700];
	static const char *const extra[] = {
		"--dram", "16M", "--ssd", "256M", "--set", "ssd.admission=always", NULL,
	};
	struct kc a, b, o;
	struct kvt_ns_desc sh = desc_of("iso-shared", NULL), shn = desc_of("iso-shared", "alice");
	uint8_t ds[PROTO_DIGEST_LEN], got[PROTO_DIGEST_LEN];
	_Atomic bool stop = false;
	struct srace rs[4] = {
		{ "alice", SA, { 0 }, 0, &stop, 0, 0, 0, 0 },
		{ "bob", SB, { 0 }, 1, &stop, 0, 0, 0, 0 },
		{ "bob", SB, { 0 }, 1, &stop, 0, 0, 0, 0 },
		{ "alice", SA, { 0 }, 1, &stop, 0, 0, 0, 0 },
	};
	pthread_t th[4];
	uint64_t copy_reads = 0, gets = 0, hits = 0;

	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, "alice " SA " tenant\nbob " SB " tenant\nops " SO
			" admin\ngrant alice model=iso-shared to bob\n");
	snprintf(dir, sizeof(dir), "%s/ssd_race", base);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	login(&a, "alice", SA);
	login(&b, "bob", SB);
	login(&o, "ops", SO);
	T_RC(kc_register(&a, &sh, ds, NULL, 0), KVT_OK);
	T_RC(kc_register(&b, &shn, got, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(got, ds, PROTO_DIGEST_LEN) == 0);
	for (int i = 0; i < 4; i++) {
		memcpy(rs[i].ns, ds, PROTO_DIGEST_LEN);
		T_EQ_INT(pthread_create(&th[i], NULL, sr_main, &rs[i]), 0);
	}
	tsrv_sleep_ms(SR_MS);
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	(void)kc_stat(&o, PROTO_SCOPE_ALL, "ssd.copy_reads", &copy_reads);
	for (int i = 1; i < 3; i++) {
		gets += rs[i].gets;
		hits += rs[i].hits;
	}
	printf("ssd_race: alice's %" PRIu64 " delete + re-puts of %u keys (64..256 KiB) beside "
	       "fillers in 16 MiB of DRAM: bob's quiet GETs %" PRIu64 ", %" PRIu64 " hits, %"
	       PRIu64 " wrong; alice's GETs %" PRIu64 ", %" PRIu64 " hits, %" PRIu64
	       " wrong; ssd.copy_reads %" PRIu64 "\n", rs[0].puts, SR_KEYS, gets, hits,
	       rs[1].bad + rs[2].bad, rs[3].gets, rs[3].hits, rs[3].bad, copy_reads);
	T_EQ_U64(rs[1].bad + rs[2].bad + rs[3].bad, 0);
	T_ASSERT(hits > 0 && rs[3].hits > 0);
	kc_close(&a);
	kc_close(&b);
	kc_close(&o);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

static const struct tsrv_phase phases[] = {
	{ "native", phase_native },
	{ "resp_s3", phase_resp_s3 },
	{ "pod", phase_pod },
	{ "ssd_race", phase_ssd_race },
};

int main(int argc, char **argv)
{
	bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	return tsrv_run_phase("test_isolation", argc, argv, phases,
			      sizeof(phases) / sizeof(phases[0]), base, sizeof(base));
}

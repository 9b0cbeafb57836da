/*
 * test_retain.c - the retain hint (KVT_F_RETAIN) end to end: an engine's
 * hinted puts cross the wire (PROTO_IF_RETAIN, remote.retain_hint on) and
 * reorder victims in kvtierd's DRAM, in the sending tenant's quota group
 * only.
 *
 * Usage: test_retain PATH-TO-KVTIERD
 *
 * A kvtierd with DRAM only (no SSD: prefix-adapt chooses its mode per
 * quota group, doc/policies.md), one shard, 4 KiB chunks; tenants alice
 * and bob, each with a 1 MiB DRAM quota (256 blocks of 4 KiB).  Each
 * round, alice puts 64 "document" blocks (hinted, when the run hints),
 * then 320 blocks read never again, then reads the 64 documents back:
 * LRU of 256 blocks misses them (384 blocks came between), and so does the
 * segmented order without the hint (they wait on probation, which the
 * one-time blocks flush).  With the hint, alice's group's segmented
 * simulation hits them, the group goes segmented, and then her hinted
 * documents start in main and are read back from the server.  Between
 * alice's steps, bob (never hinting) does the same with 160 one-time
 * blocks: LRU keeps all his documents, the segmented order (unhinted, on
 * probation) would lose them -- so his reads show whether his group's
 * order moved.
 *
 * What it proves:
 *   - hinted: alice's late rounds read nearly all her documents back
 *     from kvtierd (>= 3/4), and the server says one quota group is
 *     segmented (hers) and counts her hints (dram.retain_hints);
 *   - with remote.retain_hint off (what an engine sends a server that
 *     predates the flag: nothing) the same run reads almost none back
 *     (<= 1/8), no group switches, and the server counts no hint;
 *   - bob's reads are the same, block for block, whether alice hints or
 *     not: a tenant's hint reorders only its own group's blocks
 *     (doc/security.md "Cross-tenant probing", item 3).
 * Shown failing with the flag dropped on the wire (op_item not setting
 * PROTO_IF_RETAIN): the hinted run reads what the unhinted one does.
 *
 * And the namespace default (KVT_NS_RETAIN) crosses the wire as the same
 * flag: after the hinted run, alice registers a namespace with it and
 * puts 16 blocks with no flag of their own; the server counts 16 more
 * hints.  (What the default does to the order is test_policy's 7m.)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define VLEN 4096u
#define ROUNDS 30
#define LATE 10 /* the rounds counted: the last LATE */
#define DOCS 64
#define ONCE_ALICE 320
#define ONCE_BOB 160
#define SECRET_A "alice-secret-0123456789ab"
#define SECRET_B "bob-secret-0123456789abcd"
#define SECRET_R "root-secret-0123456789abc"

static const char *kvtierd_bin;
static char *base;
static uint8_t val[VLEN];

static struct kvt_store *engine(const struct tsrv *s, const char *tenant, bool hint)
{
	char addr[64], secret[700];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s->port);
	snprintf(secret, sizeof(secret), "%s/secret-%s", base, tenant);
	return tsrv_engine(addr, (const char *[]){ "remote.put_local", "never", "remote.tenant",
						   tenant, "remote.secret_file", secret,
						   "remote.retain_hint", hint ? "on" : "off",
						   NULL });
}

static void put(struct kvt_store *s, uint32_t ns, uint64_t id, bool retain)
{
	struct iovec v = { val, VLEN };
	struct kvt_req r = t_req1(s, (struct kvt_req){ .op = KVT_OP_PUT,
						       .flags = retain ? KVT_F_RETAIN : 0,
						       .ns = ns, .key = t_key(id), .iov = &v,
						       .iov_count = 1 });
	if (r.status != KVT_OK && r.status != KVT_EXISTS)
		T_FAIL("put %llu: %s", (unsigned long long)id, kvt_strerror(r.status));
}

/* Read id back: true if kvtierd had it (else it is put again). */
static bool reread(struct kvt_store *s, uint32_t ns, uint64_t id, bool retain)
{
	uint8_t dst[VLEN];
	struct iovec v = { dst, VLEN };
	struct kvt_req r = t_req1(s, (struct kvt_req){ .op = KVT_OP_GET, .ns = ns,
						       .key = t_key(id), .iov = &v,
						       .iov_count = 1 });
	if (r.status >= 0 && r.status != KVT_MISS)
		return true;
	T_RC(r.status, KVT_MISS);
	put(s, ns, id, retain);
	return false;
}

struct outcome {
	unsigned alice_hits, bob_hits; /* documents read back in the last LATE rounds */
	uint8_t bob_read[ROUNDS][DOCS]; /* which of bob's came back, every round */
	uint64_t seg_groups, hints, switches;
};

static uint64_t server_stat(struct kc *admin, const char *name)
{
	uint64_t v = 0;
	T_RC(kc_stat(admin, PROTO_SCOPE_ALL, name, &v), 0);
	return v;
}

static void run(bool hint, struct outcome *o)
{
	char dir[700], tenants[700];
	struct tsrv s;
	struct kvt_store *a, *b;
	struct kc admin;
	uint32_t na, nb;
	uint64_t ida = 1, idb = 1u << 30;

	memset(o, 0, sizeof(*o));
	snprintf(dir, sizeof(dir), "%s/srv-%d", base, hint);
	T_RC(mkdir(dir, 0700), 0);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_start(&s, kvtierd_bin, base, dir, tenants,
		   (const char *[]){ "--ssd", "0", "--set", "dram.shards=1", "--set",
				     "dram.chunk=4K", NULL });
	a = engine(&s, "alice", hint);
	b = engine(&s, "bob", false); /* bob never hints: the control */
	na = t_ns(a, "retain-docs");
	nb = t_ns(b, "retain-docs");
	for (unsigned r = 0; r < ROUNDS; r++) {
		uint64_t doc_a = ida, doc_b = idb;
		for (unsigned i = 0; i < DOCS; i++) {
			put(a, na, ida++, true);
			put(b, nb, idb++, false);
		}
		for (unsigned i = 0; i < ONCE_ALICE; i++)
			put(a, na, ida++, false);
		for (unsigned i = 0; i < ONCE_BOB; i++)
			put(b, nb, idb++, false);
		for (unsigned i = 0; i < DOCS; i++) {
			bool ha = reread(a, na, doc_a + i, true);
			bool hb = reread(b, nb, doc_b + i, false);
			o->bob_read[r][i] = hb;
			if (r >= ROUNDS - LATE) {
				o->alice_hits += ha;
				o->bob_hits += hb;
			}
		}
	}
	T_RC(kc_dial(&admin, s.port, "root", SECRET_R), 0);
	o->seg_groups = server_stat(&admin, "dram.adapt_segmented_groups");
	o->hints = server_stat(&admin, "dram.retain_hints");
	o->switches = server_stat(&admin, "dram.adapt_switches");
	if (hint) {
		/* The namespace default: no per-put flag, every put hinted. */
		struct kvt_ns_desc d = t_desc("retain-default", 0);
		uint32_t nd;
		d.flags = KVT_NS_RETAIN;
		T_OK(kvt_ns_register(a, &d, &nd));
		for (unsigned i = 0; i < 16; i++)
			put(a, nd, ida++, false);
		T_OK(kvt_flush(a));
		T_EQ_U64(server_stat(&admin, "dram.retain_hints"), o->hints + 16);
	}
	kc_close(&admin);
	printf("retain hint %s: alice read back %u of %u late documents, bob %u; server: "
	       "%llu hints, %llu segmented groups, %llu switches\n",
	       hint ? "on" : "off", o->alice_hits, DOCS * LATE, o->bob_hits,
	       (unsigned long long)o->hints, (unsigned long long)o->seg_groups,
	       (unsigned long long)o->switches);
	kvt_store_destroy(a);
	kvt_store_destroy(b);
	T_EQ_INT(tsrv_stop(&s), 0);
}

int main(int argc, char **argv)
{
	static struct outcome on, off;
	if (argc < 2)
		T_SKIP("usage: test_retain PATH-TO-KVTIERD");
	kvtierd_bin = argv[1];
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	memset(val, 0x5a, sizeof(val));
	tsrv_write_file(base, "tenants", "alice " SECRET_A " tenant dram=1M\n"
					 "bob   " SECRET_B " tenant dram=1M\n"
					 "root  " SECRET_R " admin dram=1M\n");
	tsrv_write_file(base, "secret-alice", SECRET_A "\n");
	tsrv_write_file(base, "secret-bob", SECRET_B "\n");

	run(true, &on);
	run(false, &off);
	/* Hinted: alice's documents come back; one group switched (hers: bob
	 * hints nothing and reads the same in both runs, below). */
	T_ASSERT(on.alice_hits * 4 >= DOCS * LATE * 3);
	T_EQ_U64(on.seg_groups, 1);
	T_ASSERT(on.hints > 0);
	/* Not sent: nothing reaches the server, nothing switches. */
	T_ASSERT(off.alice_hits * 8 <= DOCS * LATE);
	T_EQ_U64(off.seg_groups, 0);
	T_EQ_U64(off.hints, 0);
	/* Bob's blocks did not move with alice's hints. */
	T_ASSERT(memcmp(on.bob_read, off.bob_read, sizeof(on.bob_read)) == 0);
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	printf("test_retain: ok\n");
	return 0;
}

/*
 * test_heal.c - the pod heals itself (doc/cluster.md "Healing"): four
 * kvtierd registered in a real etcd, an engine following them, a
 * namespace with replicas = 2.  kill -9 of one member: once etcd dropped
 * it and --repair-grace passed, the survivors copy its groups to their
 * new owners until every block is on two members again (counted on the
 * servers: the sum of their dram.blocks), every block reads back
 * byte-exact through a fresh engine, and a second kill -9 then loses
 * nothing.
 *
 * KVT_HEAL_OFF=1 starts the servers with --repair-rate 0 (healing off):
 * the test must then fail (the copies never come back), which is how it
 * was shown able to fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "etcd.h"
#include "t.h"
#include "tstore.h"

#define NODES 4
#define PROMPTS 4
#define RPROMPTS 2   /* rolling: prompts a namespace */
#define PLEN 32      /* blocks a prompt: 4 groups of 8 */
#define GROUP 8
#define BLOCKS (PROMPTS * PLEN)
#define VLEN 4096

static const char *bin;
static char *base;
static struct t_etcd etcd;
#define SLOTS (2 * NODES) /* nodes and their restarts */
static const char *cli;
static char node_base[SLOTS][600], node_addr[SLOTS][64];
static struct tsrv srv[SLOTS];
static bool alive[SLOTS];

/* Auth on (doc/cluster.md "Peers"): engines are tenant "team"; the
 * servers copy team's blocks to each other logged in as team, with its
 * secret from the tenants file they share; "root" (admin) reads the
 * servers' own statistics and drains. */
#define SECRET_TEAM "team-secret-0123456789abcdef"
#define SECRET_ROOT "root-secret-abcdefghijklmnop"
static char tenants_path[700], team_secret[700], root_secret[700];

static void auth_files(void)
{
	snprintf(tenants_path, sizeof(tenants_path), "%s/tenants", base);
	snprintf(team_secret, sizeof(team_secret), "%s/team.secret", base);
	snprintf(root_secret, sizeof(root_secret), "%s/root.secret", base);
	tsrv_write_file(NULL, tenants_path,
			"team " SECRET_TEAM " tenant\nroot " SECRET_ROOT " admin\n");
	tsrv_write_file(NULL, team_secret, SECRET_TEAM "\n");
	tsrv_write_file(NULL, root_secret, SECRET_ROOT "\n");
}

static void etcd_atexit(void)
{
	t_etcd_kill(&etcd);
}

static const char *drain_budget = "0"; /* --drain-budget of the nodes started */

static void node_start(unsigned i, bool heal_off)
{
	const char *extra[] = { "--etcd", etcd.url, "--etcd-ttl", "2", "--repair-grace", "500",
				"--repair-rate", heal_off ? "0" : "256K",
				/* idle or not: a pass takes about a second (the
				 * delete during repair lands while it copies) */
				"--repair-idle-rate", "256K",
				drain_budget[0] != '0' ? "--drain-budget" : NULL, drain_budget, NULL };
	char dir[700];
	snprintf(node_base[i], sizeof(node_base[i]), "%s/node%u", base, i);
	T_RC(mkdir(node_base[i], 0700), 0);
	snprintf(dir, sizeof(dir), "%s/data", node_base[i]);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv[i], bin, node_base[i], dir, tenants_path, extra);
	snprintf(node_addr[i], sizeof(node_addr[i]), "127.0.0.1:%u", srv[i].port);
	alive[i] = true;
}

static struct kvt_store *engine_follow(const char *seed)
{
	/* KVT_HEAL_WARM_MS=0: no join warm-up reads (test_heal_scaleout
	 * must then fail: it was shown able to) */
	const char *warm = getenv("KVT_HEAL_WARM_MS");
	return t_store_open("remote.warm_ms", warm && *warm ? warm : "60000",
			    "dram.capacity", "32M", "dram.chunk", "4K", "dram.prefault", "off",
			    "remote.discover", seed, "remote.refresh_ms", "200",
			    "remote.group", "8", "remote.hot_replicas", "2",
			    "remote.timeout_ms", "2000", "remote.backoff_ms", "20",
			    "remote.backoff_max_ms", "200", "remote.tenant", "team",
			    "remote.secret_file", team_secret, NULL);
}

static uint64_t members_now(struct kvt_store *s)
{
	uint64_t v = 1;
	int rc = kvt_store_stat(s, "remote.members", &v);
	T_ASSERT(rc == KVT_OK || rc == KVT_MISS);
	return rc == KVT_OK ? v : 1;
}

static void wait_members(struct kvt_store *s, uint64_t want)
{
	uint64_t t0 = tsrv_now_ns();
	while (members_now(s) != want) {
		if (tsrv_now_ns() - t0 > 15000000000ull)
			T_FAIL("the engine sees %llu members, want %llu",
			       (unsigned long long)members_now(s), (unsigned long long)want);
		tsrv_sleep_ms(20);
	}
}

static void wait_up(struct kvt_store *s, uint64_t want)
{
	for (int i = 0; i < 1000; i++) {
		if (t_stat(s, "remote.conns_up") >= want)
			return;
		tsrv_sleep_ms(10);
	}
	T_FAIL("remote tier never connected");
}

static uint32_t ns_r2(struct kvt_store *s)
{
	struct kvt_ns_desc d = t_desc("heal", 0);
	uint32_t id = 0;
	d.replicas = 2;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

static void put_block(struct kvt_store *s, uint32_t ns, const struct kvt_key *prompt, uint32_t i,
		      uint64_t seed)
{
	static uint8_t v[VLEN];
	struct iovec part = { v, sizeof(v) };
	struct kvt_req r = { .op = KVT_OP_PUT, .ns = ns, .key = prompt[i], .iov = &part,
			     .iov_count = 1, .flags = KVT_F_PROMPT, .keys = prompt,
			     .key_count = i + 1 };
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	t_fill(v, sizeof(v), seed);
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 30000), 1);
	T_RC(r.status, KVT_OK);
	T_OK(kvt_queue_destroy(q));
}

struct nstat {
	uint64_t blocks, copied, pending, passes, members, refused, drain_state;
};


/* One server's own figures: STATS of the whole server, as root. */
static struct nstat node_stat(unsigned m)
{
	static const char *const names[] = { "dram.blocks", "repair.copied", "repair.pending",
					     "repair.passes", "cluster.members", "repair.refused",
					     "repair.drain_state" };
	struct nstat n = { 0 };
	uint64_t *dst[] = { &n.blocks, &n.copied, &n.pending, &n.passes, &n.members, &n.refused,
			    &n.drain_state };
	struct kc c;

	T_OK(kc_connect_tcp(&c, srv[m].port));
	T_OK(kc_login(&c, "root", SECRET_ROOT));
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		T_RC(kc_stat(&c, PROTO_SCOPE_ALL, names[i], dst[i]), 0);
	kc_close(&c);
	return n;
}

static uint64_t copies_held(uint64_t *copied)
{
	uint64_t sum = 0;
	*copied = 0;
	for (unsigned m = 0; m < SLOTS; m++)
		if (alive[m]) {
			struct nstat n = node_stat(m);
			sum += n.blocks;
			*copied += n.copied;
		}
	return sum;
}

static struct kvt_key keys[PROMPTS][PLEN];
static bool deleted[PROMPTS];

static uint64_t refused_all(void)
{
	uint64_t r = 0;
	for (unsigned m = 0; m < SLOTS; m++)
		if (alive[m])
			r += node_stat(m).refused;
	return r;
}

/* Every live server lists want members and has no repair pass due: the
 * pod agrees on placement (a pass run while members disagree copies to
 * the owners of a list the engines no longer use: extra copies). */
static void wait_settled(uint64_t want)
{
	for (int i = 0; i < 300; i++) {
		bool ok = true;
		for (unsigned m = 0; m < SLOTS && ok; m++)
			if (alive[m]) {
				struct nstat n = node_stat(m);
				ok = n.members == want && n.pending == 0;
			}
		if (ok)
			return;
		tsrv_sleep_ms(50);
	}
	T_FAIL("the servers never agreed on %llu members", (unsigned long long)want);
}

/* Members 0..nodes-1 are done healing: each has run a pass since passes0
 * (its figure before the list changed; 0 for a newcomer, whose first
 * pass runs after its grace period too), none is due, and no copy landed
 * between two looks 200 ms apart.  wait_settled alone is not that: a
 * member that has not yet seen the new list reports nothing due, and a
 * pass under way still copies (test_drain_budget counts where blocks
 * are). */
static void wait_passes_done(unsigned nodes, const uint64_t *passes0)
{
	uint64_t copied_before = UINT64_MAX;
	for (int i = 0; i < 150; i++) {
		uint64_t copied = 0;
		bool ok = true;
		for (unsigned m = 0; m < nodes; m++) {
			struct nstat n = node_stat(m);
			copied += n.copied;
			ok = ok && n.pending == 0 && n.passes > passes0[m];
		}
		if (ok && copied == copied_before)
			return;
		copied_before = ok ? copied : UINT64_MAX;
		tsrv_sleep_ms(200);
	}
	T_FAIL("the pod's repair passes never settled");
}

/* Every block through a fresh engine (nothing in its DRAM): hits, and
 * the bytes put. */
static uint32_t read_all(unsigned seed_node)
{
	static uint8_t buf[VLEN], want[VLEN];
	struct kvt_store *e = engine_follow(node_addr[seed_node]);
	uint32_t ns = ns_r2(e), hits = 0;
	unsigned live = 0;
	for (unsigned m = 0; m < SLOTS; m++)
		live += alive[m];
	wait_members(e, live);
	wait_up(e, live * 2);
	for (uint32_t p = 0; p < PROMPTS; p++) {
		T_RC(kvt_lookup_prefix(e, ns, keys[p], PLEN, NULL), deleted[p] ? 0 : PLEN);
		for (uint32_t i = 0; i < PLEN; i++) {
			uint64_t len = 0;
			int rc = kvt_get(e, ns, &keys[p][i], buf, sizeof(buf), &len);
			if (deleted[p])
				T_RC(rc, KVT_MISS); /* never resurrected */
			if (rc != KVT_OK)
				continue;
			t_fill(want, sizeof(want), p * 1000 + i);
			T_EQ_U64(len, VLEN);
			T_EQ_MEM(buf, want, VLEN);
			hits++;
		}
	}
	kvt_store_destroy(e);
	return hits;
}

/* Wait until the live servers hold want copies in all. */
static uint64_t wait_healed(uint64_t want, uint64_t limit_ms)
{
	uint64_t t0 = tsrv_now_ns(), held, copied;
	for (;;) {
		held = copies_held(&copied);
		if (held == want)
			return (tsrv_now_ns() - t0) / 1000000;
		if (tsrv_now_ns() - t0 > limit_ms * 1000000)
			T_FAIL("the pod holds %llu copies, want %llu (%llu copied by repair)",
			       (unsigned long long)held, (unsigned long long)want,
			       (unsigned long long)copied);
		tsrv_sleep_ms(100);
	}
}

/* A PLACED|REPAIR put of one value (what a peer sends while healing). */
static int repair_put(struct kc *c, const uint8_t dg[PROTO_DIGEST_LEN], const struct kvt_key *k,
		      uint32_t flags)
{
	static uint8_t v[VLEN];
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = dg };
	struct proto_item it = { .key = *k, .flags = flags, .anchor = 42, .copies = 2,
				 .part_count = 1 }, got;
	struct iovec iov = { v, sizeof(v) };
	uint64_t len = sizeof(v);
	uint32_t crc = kvt_crc32c(0, v, sizeof(v));
	struct proto_iter iter;
	struct kc_resp r;
	int64_t tag;
	int rc;

	it.part_lens = &len;
	it.part_crcs = &crc;
	tag = kc_request(c, &f, &it, 1, &iov, 1);
	T_ASSERT(tag > 0);
	T_OK(kc_recv(c, &r, 10000));
	T_EQ_U64(r.f.tag, (uint64_t)tag);
	T_OK(r.f.status);
	proto_iter_init(&iter, &r.f, NULL, NULL, 0);
	T_RC(proto_iter_next(&iter, &got), 1);
	rc = got.status;
	kc_resp_free(&r);
	return rc;
}

/* DRAIN is the admin's: a tenant is refused (PROTO_EPERM), and the
 * member is left as it was. */
static void test_drain_perm(unsigned m)
{
	struct proto_frame f = { .op = PROTO_OP_DRAIN, .drain_mode = PROTO_DRAIN_EXIT };
	uint64_t members = node_stat(m).members;
	struct kc_resp r;
	struct kc c;
	int64_t tag;

	T_OK(kc_connect_tcp(&c, srv[m].port));
	T_OK(kc_login(&c, "team", SECRET_TEAM));
	tag = kc_request(&c, &f, NULL, 0, NULL, 0);
	T_ASSERT(tag > 0);
	T_OK(kc_recv(&c, &r, 10000));
	T_EQ_U64(r.f.tag, (uint64_t)tag);
	T_RC(r.f.status, PROTO_EPERM);
	kc_resp_free(&r);
	kc_close(&c);
	tsrv_sleep_ms(300);
	T_EQ_U64(node_stat(m).members, members);
	T_EQ_U64(node_stat(m).drain_state, 0);
}

/* A repair copy never resurrects a deleted block: a member that saw a
 * DELETE of a key refuses a REPAIR put of it (-ECANCELED) for a minute,
 * while an engine's own put of it (recomputed) is taken. */
static void test_repair_refused(unsigned m)
{
	struct kvt_ns_desc d = t_desc("rawheal", 0);
	uint8_t dg[PROTO_DIGEST_LEN];
	struct kvt_key k1 = t_key(900001), k2 = t_key(900002);
	struct kc c;

	T_OK(kc_connect_tcp(&c, srv[m].port));
	T_OK(kc_login(&c, "team", SECRET_TEAM));
	T_OK(kc_register(&c, &d, dg, NULL, 0));
	/* Never deleted: a repair copy is stored. */
	T_RC(repair_put(&c, dg, &k1, PROTO_IF_PLACED | PROTO_IF_REPAIR), KVT_OK);
	T_RC(kc_exists(&c, dg, &k1, NULL), KVT_OK);
	/* Deleted (here it was not even present): refused, not stored. */
	T_RC(kc_delete(&c, dg, &k2), KVT_MISS);
	T_RC(repair_put(&c, dg, &k2, PROTO_IF_PLACED | PROTO_IF_REPAIR), -ECANCELED);
	T_RC(kc_exists(&c, dg, &k2, NULL), KVT_MISS);
	T_RC(kc_delete(&c, dg, &k1), KVT_OK);
	T_RC(repair_put(&c, dg, &k1, PROTO_IF_PLACED | PROTO_IF_REPAIR), -ECANCELED);
	T_RC(kc_exists(&c, dg, &k1, NULL), KVT_MISS);
	/* An engine's put of it is taken. */
	T_RC(repair_put(&c, dg, &k1, PROTO_IF_PLACED), KVT_OK);
	T_RC(kc_exists(&c, dg, &k1, NULL), KVT_OK);
	T_RC(kc_delete(&c, dg, &k1), KVT_OK);
	/* A CLEAR of the namespace: no repair copy into it for a while, while
	 * another namespace keeps healing. */
	{
		struct kvt_ns_desc d2 = t_desc("rawheal2", 0);
		uint8_t dg2[PROTO_DIGEST_LEN];
		struct kvt_key k3 = t_key(900003);
		uint64_t removed = 0;
		T_OK(kc_register(&c, &d2, dg2, NULL, 0));
		T_OK(kc_clear(&c, PROTO_SCOPE_NS, dg, NULL, &removed));
		T_RC(repair_put(&c, dg, &k3, PROTO_IF_PLACED | PROTO_IF_REPAIR), -ECANCELED);
		T_RC(kc_exists(&c, dg, &k3, NULL), KVT_MISS);
		T_RC(repair_put(&c, dg2, &k3, PROTO_IF_PLACED | PROTO_IF_REPAIR), KVT_OK);
		T_RC(kc_delete(&c, dg2, &k3), KVT_OK);
	}
	kc_close(&c);
}

static void test_kill_heal(bool heal_off)
{
	struct kvt_store *e;
	uint64_t held, copied, ms, lost_left, t0;
	uint32_t ns;

	for (unsigned m = 0; m < NODES; m++)
		node_start(m, heal_off);
	wait_settled(NODES);
	e = engine_follow(node_addr[0]);
	ns = ns_r2(e);
	wait_members(e, NODES);
	wait_up(e, NODES * 2);
	for (uint32_t p = 0; p < PROMPTS; p++) {
		for (uint32_t i = 0; i < PLEN; i++)
			keys[p][i] = t_key(50000 + p * 1000 + i);
		for (uint32_t i = 0; i < PLEN; i++)
			put_block(e, ns, keys[p], i, p * 1000 + i);
	}
	T_OK(kvt_flush(e));
	kvt_store_destroy(e);
	/* Every group on two members.  A prompt's hot first group reaches its
	 * second member from the first (remote.hot_forward=auto, the default)
	 * after the flush has returned: wait for it, as for a repair. */
	wait_healed(2 * BLOCKS, 10000);
	copies_held(&copied);
	T_EQ_U64(copied, 0);

	/* 1. kill -9 one member: its copies are gone from the pod ... */
	tsrv_kill9(&srv[1]);
	alive[1] = false;
	held = lost_left = copies_held(&copied);
	T_ASSERT(held < 2 * BLOCKS);
	fprintf(stderr, "node 1 killed: %llu of %u copies left\n", (unsigned long long)held,
		2 * BLOCKS);
	/* ... and come back once etcd dropped it (2 s lease) and the grace
	 * (500 ms) passed. */
	/* Delete during repair: once the survivors started copying (at 256
	 * KiB/s the pass takes about a second), the last prompt is deleted
	 * through an engine; copies read before the delete and sent after it
	 * must not bring any of it back. */
	t0 = tsrv_now_ns();
	while (copies_held(&copied) == lost_left && copied == 0) {
		if (tsrv_now_ns() - t0 > 12000000000ull)
			T_FAIL("the repair never started");
		tsrv_sleep_ms(20);
	}
	e = engine_follow(node_addr[0]);
	ns = ns_r2(e);
	wait_members(e, NODES - 1);
	for (uint32_t i = 0; i < PLEN; i++) {
		int rc = kvt_delete(e, ns, &keys[PROMPTS - 1][i]);
		T_ASSERT(rc == KVT_OK || rc == KVT_MISS);
	}
	deleted[PROMPTS - 1] = true;
	kvt_store_destroy(e);
	ms = wait_healed(2 * (BLOCKS - PLEN), 12000);
	held = copies_held(&copied);
	fprintf(stderr, "healed: %llu copies after %llu ms, %llu copied by repair, "
		"%llu repair copies of deleted blocks refused\n",
		(unsigned long long)held, (unsigned long long)ms, (unsigned long long)copied,
		(unsigned long long)refused_all());
	/* The repair counted at least the copies the kill took of the
	 * blocks left. */
	T_ASSERT(copied > 0);
	T_EQ_U64(read_all(0), BLOCKS - PLEN);
	tsrv_sleep_ms(500); /* nothing left in flight comes back later either */
	T_EQ_U64(copies_held(&copied), 2 * (BLOCKS - PLEN));

	test_repair_refused(0);
	test_drain_perm(0);

	/* 2. A second kill -9 loses nothing. */
	tsrv_kill9(&srv[2]);
	alive[2] = false;
	T_EQ_U64(read_all(0), BLOCKS - PLEN);
	fprintf(stderr, "second kill: all %u blocks read back byte-exact\n", BLOCKS - PLEN);
	/* and the two left heal again: every block on both. */
	ms = wait_healed(2 * (BLOCKS - PLEN), 12000);
	fprintf(stderr, "healed again on two members after %llu ms\n", (unsigned long long)ms);

	for (unsigned m = 0; m < SLOTS; m++)
		if (alive[m]) {
			T_EQ_INT(tsrv_stop(&srv[m]), 0);
			alive[m] = false;
		}
	for (unsigned m = 0; m < NODES; m++)
		tsrv_check_reports(node_base[m]);
}

/* ------------------------------------------------------------------------
 * Rolling restart: every member in turn drained (kvtier drain --exit),
 * then a new one started in its place, under a steady read load from two
 * engines (processes of their own, forked before each opens its store),
 * with a namespace of replicas = 2 and one of replicas = 1.
 */
struct reader {
	pthread_t th;
	unsigned seed_node;
	_Atomic bool stop;
	_Atomic uint64_t gets[2], misses[2]; /* [R - 1]; read while it runs */
	_Atomic uint64_t rounds;
};

static struct kvt_key rkeys[2][RPROMPTS][PLEN];

static uint32_t ns_r(struct kvt_store *s, uint32_t r)
{
	struct kvt_ns_desc d = t_desc(r == 2 ? "roll2" : "roll1", 0);
	uint32_t id = 0;
	d.replicas = r;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	static _Thread_local uint8_t buf[VLEN], want[VLEN];
	struct kvt_store *e = engine_follow(node_addr[rd->seed_node]);
	uint32_t ns[2] = { ns_r(e, 1), ns_r(e, 2) };

	while (!atomic_load(&rd->stop)) {
		for (uint32_t r = 0; r < 2; r++)
			for (uint32_t p = 0; p < RPROMPTS; p++) {
				/* A lookup first, as engines do (the anchors). */
				kvt_lookup_prefix(e, ns[r], rkeys[r][p], PLEN, NULL);
				for (uint32_t i = 0; i < PLEN; i++) {
					uint64_t len = 0;
					int rc = kvt_get(e, ns[r], &rkeys[r][p][i], buf, sizeof(buf),
							 &len);
					rd->gets[r]++;
					if (rc != KVT_OK) {
						/* a miss or an error (a timeout on a loaded
						 * machine): say which, for the log */
						if (rd->misses[r]++ < 8)
							fprintf(stderr, "reader %u: R=%u prompt %u block "
								"%u: %s\n", rd->seed_node, r + 1, p, i,
								kvt_strerror(rc));
						continue;
					}
					t_fill(want, sizeof(want), r * 100000 + p * 1000 + i);
					T_EQ_U64(len, VLEN);
					T_EQ_MEM(buf, want, VLEN);
				}
			}
		rd->rounds++;
	}
	kvt_store_destroy(e);
	return NULL;
}

/* A reader in a process of its own (an engine process: fork before it
 * opens its store); its counters in shared memory.  The exit status
 * says whether every byte it read was right. */
static pid_t reader_spawn(struct reader *rd)
{
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		/* dies with the test, also when a check there fails */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		etcd.pid = 0; /* the parent's: never this process's to stop */
		reader_main(rd);
		_exit(0);
	}
	return pid;
}

static void test_rolling(void)
{
	/* two engine processes: shared counters */
	struct reader *rd = mmap(NULL, 2 * sizeof(*rd), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t rpid[2];
	struct kvt_store *e;
	unsigned next = NODES;
	uint64_t t0, t1, t2;

	for (unsigned m = 0; m < NODES; m++)
		node_start(m, false);
	wait_settled(NODES);
	e = engine_follow(node_addr[0]);
	wait_members(e, NODES);
	wait_up(e, NODES * 2);
	for (uint32_t r = 0; r < 2; r++) {
		uint32_t ns = ns_r(e, r + 1);
		for (uint32_t p = 0; p < RPROMPTS; p++) {
			for (uint32_t i = 0; i < PLEN; i++)
				rkeys[r][p][i] = t_key(70000 + r * 100000 + p * 1000 + i);
			for (uint32_t i = 0; i < PLEN; i++)
				put_block(e, ns, rkeys[r][p], i, r * 100000 + p * 1000 + i);
		}
	}
	T_OK(kvt_flush(e));
	kvt_store_destroy(e);

	T_ASSERT(rd != MAP_FAILED);
	for (unsigned k = 0; k < 2; k++) {
		memset(&rd[k], 0, sizeof(rd[k]));
		rd[k].seed_node = 3 - k; /* restarted last */
		rpid[k] = reader_spawn(&rd[k]);
	}
	tsrv_sleep_ms(300);
	t0 = tsrv_now_ns();
	for (unsigned m = 0; m < NODES; m++) {
		char cmd[4096];
		/* 1. Drain: hand over, leave, stop. */
		snprintf(cmd, sizeof(cmd), "%s drain %s --exit --timeout 30 --tenant root "
			 "--secret-file %s >%s/drain%u.out 2>&1", cli, node_addr[m], root_secret,
			 base, m);
		T_EQ_INT(system(cmd), 0);
		T_EQ_INT(tsrv_wait_exit(&srv[m], 15000), 0);
		alive[m] = false;
		t1 = tsrv_now_ns();
		/* 2. Its replacement joins (a new address: a new member). */
		node_start(next++, false);
		t2 = tsrv_now_ns();
		wait_settled(NODES);
		fprintf(stderr, "node %u: drained in %llu ms, replacement up in %llu ms, "
			"settled in %llu ms\n", m, (unsigned long long)((t1 - t0) / 1000000),
			(unsigned long long)((t2 - t1) / 1000000),
			(unsigned long long)((tsrv_now_ns() - t2) / 1000000));
		t0 = tsrv_now_ns();
	}
	tsrv_sleep_ms(300);
	for (unsigned k = 0; k < 2; k++) {
		int st = 0;
		atomic_store(&rd[k].stop, true);
		T_EQ_INT(waitpid(rpid[k], &st, 0), rpid[k]);
		T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* every byte right */
		fprintf(stderr, "reader %u: %llu rounds; replicas=2: %llu gets, %llu misses; "
			"replicas=1: %llu gets, %llu misses\n", k,
			(unsigned long long)rd[k].rounds, (unsigned long long)rd[k].gets[1],
			(unsigned long long)rd[k].misses[1], (unsigned long long)rd[k].gets[0],
			(unsigned long long)rd[k].misses[0]);
		T_ASSERT(rd[k].rounds >= 2);
		/* Zero misses: the replicated namespace by its other copy, the
		 * other by drain (handed over before leaving) and the join's
		 * warm-up (the previous owner tried too). */
		T_EQ_U64(rd[k].misses[1], 0);
		T_EQ_U64(rd[k].misses[0], 0);
	}
	/* After the roll every block of both namespaces is in the pod of
	 * four new members: what drains handed over and joins warmed up. */
	{
		struct reader last = { .seed_node = NODES };
		atomic_store(&last.stop, false);
		/* one round */
		T_EQ_INT(pthread_create(&last.th, NULL, reader_main, &last), 0);
		while (last.rounds == 0 && !atomic_load(&last.stop)) {
			tsrv_sleep_ms(20);
			if (last.gets[0] + last.gets[1] >= 2 * RPROMPTS * PLEN)
				atomic_store(&last.stop, true);
		}
		atomic_store(&last.stop, true);
		T_EQ_INT(pthread_join(last.th, NULL), 0);
		fprintf(stderr, "after the roll: replicas=1 %llu/%llu hits, replicas=2 %llu/%llu\n",
			(unsigned long long)(last.gets[0] - last.misses[0]),
			(unsigned long long)last.gets[0],
			(unsigned long long)(last.gets[1] - last.misses[1]),
			(unsigned long long)last.gets[1]);
		T_EQ_U64(last.misses[0], 0);
		T_EQ_U64(last.misses[1], 0);
	}
	/* kvtier stat shows a member's repair progress. */
	{
		char cmd[4096], path[700], out[8192] = "";
		FILE *f;
		size_t n;
		snprintf(path, sizeof(path), "%s/stat.out", base);
		snprintf(cmd, sizeof(cmd), "%s stat --server %s --tenant root --secret-file %s "
			 ">%s 2>&1", cli, node_addr[NODES], root_secret, path);
		T_EQ_INT(system(cmd), 0);
		T_ASSERT((f = fopen(path, "r")) != NULL);
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		fclose(f);
		T_ASSERT(strstr(out, "repair: ") && strstr(out, " copied ("));
	}
	for (unsigned m = 0; m < SLOTS; m++)
		if (alive[m]) {
			T_EQ_INT(tsrv_stop(&srv[m]), 0);
			alive[m] = false;
		}
	for (unsigned m = 0; m < next; m++)
		tsrv_check_reports(node_base[m]);
}

static void test_drain_budget(unsigned nodes);

/* ------------------------------------------------------------------------
 * A static pod (--members, no etcd) drained (doc/cluster.md "Drain"):
 * three members, an engine following them (remote.discover); member 2 is
 * drained with kvtier drain unix:SOCKET --exit: the others drop it from
 * the list they serve (they ask it), the engine follows, every block reads
 * back from the two left; started again at the same address it is listed
 * again.
 */
static char static_members[256], static_listen[SLOTS][32];

static void node_start_static(unsigned i)
{
	const char *extra[] = { "--listen", static_listen[i], "--members", static_members,
				"--repair-grace", "500", "--repair-rate", "256K", NULL };
	char dir[700];
	snprintf(node_base[i], sizeof(node_base[i]), "%s/snode%u-%d", base, i, (int)alive[i]);
	mkdir(node_base[i], 0700);
	snprintf(dir, sizeof(dir), "%s/data", node_base[i]);
	mkdir(dir, 0700);
	tsrv_start(&srv[i], bin, node_base[i], dir, tenants_path, extra);
	snprintf(node_addr[i], sizeof(node_addr[i]), "%s", static_listen[i]);
	alive[i] = true;
}

static void test_static_drain(void)
{
	struct kvt_store *e;
	char cmd[4096];
	uint32_t ns[2];

	for (unsigned m = 0; m < 3; m++)
		snprintf(static_listen[m], sizeof(static_listen[m]), "127.0.0.1:%u",
			 t_free_port());
	snprintf(static_members, sizeof(static_members), "%s,%s,%s", static_listen[0],
		 static_listen[1], static_listen[2]);
	for (unsigned m = 0; m < 3; m++)
		node_start_static(m);
	wait_settled(3);
	e = engine_follow(node_addr[0]);
	wait_members(e, 3);
	wait_up(e, 6);
	for (uint32_t r = 0; r < 2; r++) {
		ns[r] = ns_r(e, r + 1);
		for (uint32_t p = 0; p < RPROMPTS; p++) {
			for (uint32_t i = 0; i < PLEN; i++)
				rkeys[r][p][i] = t_key(95000 + r * 100000 + p * 1000 + i);
			for (uint32_t i = 0; i < PLEN; i++)
				put_block(e, ns[r], rkeys[r][p], i, r * 100000 + p * 1000 + i);
		}
	}
	T_OK(kvt_flush(e));
	T_ASSERT(node_stat(2).blocks > 0);

	/* Drain member 2 (stops once done), through its Unix socket, as an
	 * operator on its host would (the rolling test drains over TCP).
	 * TLS there needs a name to check: a usage error without one. */
	snprintf(cmd, sizeof(cmd), "%s drain unix:%s --tls --tenant root >%s/sdrain.out 2>&1",
		 cli, srv[2].sock, base);
	T_EQ_INT(WEXITSTATUS(system(cmd)), 2);
	snprintf(cmd, sizeof(cmd), "%s drain unix:%s --exit --timeout 30 --tenant root "
		 "--secret-file %s >%s/sdrain.out 2>&1", cli, srv[2].sock, root_secret, base);
	T_EQ_INT(system(cmd), 0);
	T_EQ_INT(tsrv_wait_exit(&srv[2], 15000), 0);
	alive[2] = false;
	/* The others list two members (they asked it before it stopped), and
	 * the engine follows them. */
	T_EQ_U64(node_stat(0).members, 2);
	T_EQ_U64(node_stat(1).members, 2);
	wait_members(e, 2);
	kvt_store_destroy(e);
	/* Every block from the two left, through a fresh engine. */
	e = engine_follow(node_addr[1]);
	wait_members(e, 2);
	for (uint32_t r = 0; r < 2; r++) {
		uint32_t id = ns_r(e, r + 1);
		for (uint32_t p = 0; p < RPROMPTS; p++) {
			T_RC(kvt_lookup_prefix(e, id, rkeys[r][p], PLEN, NULL), PLEN);
			for (uint32_t i = 0; i < PLEN; i++) {
				static uint8_t buf[VLEN], want[VLEN];
				uint64_t len = 0;
				T_RC(kvt_get(e, id, &rkeys[r][p][i], buf, sizeof(buf), &len), KVT_OK);
				t_fill(want, sizeof(want), r * 100000 + p * 1000 + i);
				T_EQ_U64(len, VLEN);
				T_EQ_MEM(buf, want, VLEN);
			}
		}
	}
	fprintf(stderr, "static pod: member 2 drained and stopped, %u blocks read back from "
		"the two left\n", 2 * RPROMPTS * PLEN);
	/* Back at the same address: listed again. */
	node_start_static(2);
	wait_settled(3);
	wait_members(e, 3);
	kvt_store_destroy(e);
	for (unsigned m = 0; m < 3; m++) {
		T_EQ_INT(tsrv_stop(&srv[m]), 0);
		alive[m] = false;
	}
}

/* Scale-out 3 -> 4 under a read load: the hit ratio while the new member
 * takes its share stays within 2 points of the steady state (here: both
 * are 100 %, by the engines' warm-up reads and the members' push). */
static void test_scaleout(void)
{
	struct reader rd = { .seed_node = 0 };
	struct kvt_store *e;
	uint64_t g0, m0, g1, m1, g2, m2, passes0[4] = { 0 };
	double steady, move;

	for (unsigned m = 0; m < 3; m++)
		node_start(m, false);
	wait_settled(3);
	e = engine_follow(node_addr[0]);
	wait_members(e, 3);
	wait_up(e, 6);
	for (uint32_t r = 0; r < 2; r++) {
		uint32_t ns = ns_r(e, r + 1);
		for (uint32_t p = 0; p < RPROMPTS; p++) {
			for (uint32_t i = 0; i < PLEN; i++)
				rkeys[r][p][i] = t_key(90000 + r * 100000 + p * 1000 + i);
			for (uint32_t i = 0; i < PLEN; i++)
				put_block(e, ns, rkeys[r][p], i, r * 100000 + p * 1000 + i);
		}
	}
	T_OK(kvt_flush(e));
	kvt_store_destroy(e);
	T_EQ_INT(pthread_create(&rd.th, NULL, reader_main, &rd), 0);
	tsrv_sleep_ms(1500);
	g0 = rd.gets[0];
	m0 = rd.misses[0];
	tsrv_sleep_ms(1000);
	g1 = rd.gets[0];
	m1 = rd.misses[0];
	for (unsigned m = 0; m < 3; m++)
		passes0[m] = node_stat(m).passes;
	node_start(3, false);
	wait_settled(4);
	tsrv_sleep_ms(500);
	g2 = rd.gets[0];
	m2 = rd.misses[0];
	atomic_store(&rd.stop, true);
	T_EQ_INT(pthread_join(rd.th, NULL), 0);
	steady = 1.0 - (double)(m1 - m0) / (double)(g1 - g0);
	move = 1.0 - (double)(m2 - m1) / (double)(g2 - g1);
	fprintf(stderr, "scale-out 3 -> 4, replicas=1: hit ratio %.4f steady (%llu gets), "
		"%.4f over the move (%llu gets); replicas=2: %llu misses in %llu gets\n", steady,
		(unsigned long long)(g1 - g0), move, (unsigned long long)(g2 - g1),
		(unsigned long long)rd.misses[1], (unsigned long long)rd.gets[1]);
	T_ASSERT(g1 > g0 && g2 > g1);
	T_ASSERT(move >= steady - 0.02);
	T_EQ_U64(rd.misses[1], 0);
	/* The newcomer gets its share: the members' push runs after the grace
	 * period and at the repair rate, so it may land after the window. */
	for (int i = 0; i < 100 && node_stat(3).blocks == 0; i++)
		tsrv_sleep_ms(100);
	T_ASSERT(node_stat(3).blocks > 0);
	wait_passes_done(4, passes0);
	test_drain_budget(4);
	for (unsigned m = 0; m < 4; m++) {
		T_EQ_INT(tsrv_stop(&srv[m]), 0);
		alive[m] = false;
	}
	for (unsigned m = 0; m < 4; m++)
		tsrv_check_reports(node_base[m]);
}

/* Does member n hold key in namespace d? */
static unsigned holds(unsigned n, const struct kvt_ns_desc *d, const struct kvt_key *key)
{
	uint8_t dg[PROTO_DIGEST_LEN];
	struct kc o;
	int rc;
	T_OK(kc_connect_tcp(&o, srv[n].port));
	T_OK(kc_login(&o, "team", SECRET_TEAM));
	T_OK(kc_register(&o, d, dg, NULL, 0));
	rc = kc_exists(&o, dg, key, NULL);
	kc_close(&o);
	return rc == KVT_OK;
}

/* Drain with a byte budget (doc/cluster.md "Drain"): the pod has
 * --drain-budget 16K (4 blocks); the member that holds the most blocks
 * of one copy that no other member holds hands over every block of the
 * replicated namespace, and of the unreplicated one only the 4 read last,
 * hottest first; the others stay behind (repair.drain_skipped).  A value
 * of 3 parts arrives in 3 parts, each readable alone. */
static void test_drain_budget(unsigned nodes)
{
	struct kvt_ns_desc d1 = t_desc("roll1", 0), d2 = t_desc("roll2", 0);
	uint8_t dg1[PROTO_DIGEST_LEN], dg2[PROTO_DIGEST_LEN];
	static struct kvt_key only[SLOTS][RPROMPTS * PLEN];
	struct kvt_key *held, mk = t_key(990001);
	unsigned nonly[SLOTS] = { 0 }, single[SLOTS] = { 0 }, nheld, nsingle, hot = 4, m = 0;
	uint64_t skipped = 0;
	struct kc c, o;

	/* Each member's blocks of one copy (a prompt's first group has
	 * remote.hot_replicas = 2 copies), and of those the ones no other
	 * member holds (a join's push leaves the previous owner its copy). */
	for (uint32_t p = 0; p < RPROMPTS; p++)
		for (uint32_t i = GROUP; i < PLEN; i++) {
			unsigned who = 0, n_at = 0;
			for (unsigned n = 0; n < nodes; n++)
				if (holds(n, &d1, &rkeys[0][p][i])) {
					who++;
					n_at = n;
					single[n]++;
				}
			if (who == 1)
				only[n_at][nonly[n_at]++] = rkeys[0][p][i];
		}
	for (unsigned n = 1; n < nodes; n++)
		if (nonly[n] > nonly[m])
			m = n;
	held = only[m];
	nheld = nonly[m];
	nsingle = single[m];
	T_ASSERT(nheld > hot);

	T_OK(kc_connect_tcp(&c, srv[m].port));
	T_OK(kc_login(&c, "team", SECRET_TEAM));
	T_OK(kc_register(&c, &d1, dg1, NULL, 0));
	T_OK(kc_register(&c, &d2, dg2, NULL, 0));
	/* The last `hot` of them read after every put: the hottest. */
	tsrv_sleep_ms(20);
	for (unsigned j = nheld - hot; j < nheld; j++) {
		struct kc_value v;
		T_RC(kc_get(&c, dg1, &held[j], 0, 0, 0, 0, &v), KVT_OK);
		kc_value_free(&v);
	}
	/* A placed value of 3 parts (as an engine's layer-wise put). */
	{
		static uint8_t v[3 * 4096];
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = dg2 };
		uint64_t lens[3] = { 4096, 4096, 4096 };
		uint32_t crcs[3];
		struct proto_item it = { .key = mk, .flags = PROTO_IF_PLACED, .anchor = 4242,
					 .copies = 2, .part_count = 3, .part_lens = lens,
					 .part_crcs = crcs }, got;
		struct iovec iov = { v, sizeof(v) };
		struct proto_iter iter;
		struct kc_resp r;
		t_fill(v, sizeof(v), 4242);
		for (unsigned k = 0; k < 3; k++)
			crcs[k] = kvt_crc32c(0, v + k * 4096, 4096);
		T_ASSERT(kc_request(&c, &f, &it, 1, &iov, 1) > 0);
		T_OK(kc_recv(&c, &r, 10000));
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		T_RC(proto_iter_next(&iter, &got), 1);
		T_RC(got.status, KVT_OK);
		kc_resp_free(&r);
	}
	kc_close(&c);

	/* Drain it (it stays up), as root. */
	{
		struct proto_frame f = { .op = PROTO_OP_DRAIN, .drain_mode = PROTO_DRAIN_STAY };
		struct kc_resp r;
		T_OK(kc_connect_tcp(&c, srv[m].port));
		T_OK(kc_login(&c, "root", SECRET_ROOT));
		T_ASSERT(kc_request(&c, &f, NULL, 0, NULL, 0) > 0);
		T_OK(kc_recv(&c, &r, 10000));
		T_OK(r.f.status);
		kc_resp_free(&r);
		kc_close(&c);
	}
	for (int i = 0; i < 300 && node_stat(m).drain_state != 3; i++)
		tsrv_sleep_ms(50);
	T_EQ_U64(node_stat(m).drain_state, 3);
	T_OK(kc_connect_tcp(&c, srv[m].port));
	T_OK(kc_login(&c, "root", SECRET_ROOT));
	T_RC(kc_stat(&c, PROTO_SCOPE_ALL, "repair.drain_skipped", &skipped), 0);
	kc_close(&c);
	fprintf(stderr, "drain of member %u with a budget of %u blocks: %u blocks of one copy "
		"held (%u only there), %llu left behind\n", m, hot, nsingle, nheld,
		(unsigned long long)skipped);
	T_EQ_U64(skipped, nsingle - hot);

	/* Where they are now, asked of every other member: the hot ones
	 * handed over, the others not. */
	for (unsigned j = 0; j < nheld; j++) {
		unsigned found = 0;
		for (unsigned n = 0; n < nodes; n++)
			if (n != m)
				found += holds(n, &d1, &held[j]);
		T_EQ_U64(found, j >= nheld - hot ? 1 : 0);
	}
	/* Every replicated block on two members or more among the rest, the
	 * 3-part value by parts. */
	for (uint32_t p = 0; p < RPROMPTS; p++)
		for (uint32_t i = 0; i < PLEN; i++) {
			unsigned found = 0;
			for (unsigned n = 0; n < nodes; n++)
				if (n != m)
					found += holds(n, &d2, &rkeys[1][p][i]);
			T_ASSERT(found >= 2);
		}
	{
		unsigned parts_ok = 0;
		for (unsigned n = 0; n < nodes; n++) {
			struct kc_value v;
			if (n == m)
				continue;
			T_OK(kc_connect_tcp(&o, srv[n].port));
			T_OK(kc_login(&o, "team", SECRET_TEAM));
			T_OK(kc_register(&o, &d2, dg2, NULL, 0));
			if (kc_get(&o, dg2, &mk, PROTO_IF_PART, 1, 0, 0, &v) == KVT_OK) {
				static uint8_t want[3 * 4096];
				t_fill(want, sizeof(want), 4242);
				T_EQ_U64(v.part_count, 1);
				T_EQ_U64(v.first_part, 1);
				T_EQ_U64(v.lens[0], 4096);
				T_EQ_U64(v.len, 4096);
				T_EQ_MEM(v.bytes, want + 4096, 4096);
				parts_ok++;
				kc_value_free(&v);
			}
			kc_close(&o);
		}
		T_ASSERT(parts_ok >= 2);
	}
}

int main(int argc, char **argv)
{
	const char *off = getenv("KVT_HEAL_OFF");

	if (argc < 2)
		T_SKIP("usage: test_heal PATH-TO-KVTIERD [PATH-TO-KVTIER rolling]");
	bin = argv[1];
	cli = argc > 2 ? argv[2] : NULL;
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	auth_files();
	t_etcd_init(&etcd, base);
	atexit(etcd_atexit);
	/* A static pod has no etcd: none started for it (it was, a second
	 * of the test under ASan, and without etcd the test was skipped) */
	if (argc > 3 && strcmp(argv[3], "static") == 0)
		test_static_drain();
	else if (!t_etcd_start(&etcd)) {
		if (t_etcd_required())
			T_FAIL("no etcd, and KVT_REQUIRE_ETCD or CI is set (scripts/deps.txt)");
		T_SKIP("test_heal: no etcd to run (Debian: etcd-server)");
	} else if (argc > 3 && strcmp(argv[3], "rolling") == 0)
		test_rolling();
	else if (argc > 2 && strcmp(argv[argc - 1], "scaleout") == 0) {
		drain_budget = "16K"; /* test_drain_budget: 4 blocks */
		test_scaleout();
	}
	else
		test_kill_heal(off && *off && strcmp(off, "0") != 0);
	etcd_atexit();
	t_rmtree(base);
	printf("test_heal: ok\n");
	return 0;
}

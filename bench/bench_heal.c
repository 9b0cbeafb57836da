/*
 * bench_heal.c - "kvtier bench cluster --heal": how fast a pod of kvtierd
 * heals itself (doc/cluster.md "Healing", "Drain"), against iperf3 over
 * loopback in the same run.
 *
 *   etcd (loopback)  <- N kvtierd, --etcd-ttl 2, --repair-grace, --repair-rate
 *   engine (this process): a namespace with replicas = 2, W bytes of
 *      blocks put as prompts, a reader thread timing single-block gets
 *   1. kill -9 one node while no client reads (--repair-idle-rate); time
 *      until the live nodes hold 2 copies of every block again (the sum of
 *      their dram.blocks), the repair's GB/s (the bytes the survivors
 *      copied over their longest pass)
 *   2. the same with a reader thread reading (--repair-rate), and its
 *      GET p99 while the repair ran against the 2 s before the kill
 *   3. drain one of the survivors (kvtier drain, without exit): the GB/s
 *      of its hand-over (bytes over the time to leave the list)
 *
 * Every block is read back byte-exact after the heal.  Exit: 0 ran, 1
 * failure, 2 usage, 77 iperf3 or etcd not installed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvtier.h"
#include "proto.h"
#include "daemon/peer.h"

#include "bench.h"

#define BH_WHO "kvtier bench cluster --heal" /* how its messages start */

#define BH_MIB (UINT64_C(1) << 20)
#define BH_NODES_MAX 8
#define BH_PROMPT 32
#define BH_LAT_MAX (1u << 20)

struct bh_lat {
	uint64_t t_ns;   /* when the get started */
	uint32_t us;     /* how long it took */
};

struct bh {
	const char *kvtierd, *iperf3, *etcd, *dir;
	unsigned nodes, threads;
	uint64_t bytes, size, rate, idle_rate, grace_ms;
	bool json, keep;
	char run_dir[PATH_MAX], etcd_url[64];
	pid_t etcd_pid, iperf_pid, pid[BH_NODES_MAX];
	uint16_t iperf_port, port[BH_NODES_MAX];
	bool alive[BH_NODES_MAX];
	unsigned blocks;
	struct kvt_key *keys;
	/* the reader */
	struct kvt_store *rs;
	uint32_t rns;
	pthread_t rth;
	_Atomic bool rstop;
	struct bh_lat *lat;
	_Atomic uint32_t nlat;
	_Atomic uint64_t rmiss, rbad;
};

static const struct kvt_ns_desc bh_desc = {
	.model = "bench-heal", .dtype = "bf16", .layout = "bench", .block_tokens = 16,
	.tp_size = 1, .pp_size = 1, .tenant = "bench", .replicas = 2,
};

static uint64_t bh_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bh_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static uint64_t bh_seed(unsigned i)
{
	return bench_seed(0x4ea1, i);
}

/* A node's numeric statistic, or UINT64_MAX. */
static uint64_t bh_stat(struct bh *b, unsigned i, const char *name)
{
	char addr[32];
	struct kvtd_peer p;
	uint64_t v = UINT64_MAX;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", b->port[i]);
	if (kvtd_peer_open(&p, addr, "bench", NULL, 0, 0) < 0)
		return UINT64_MAX;
	if (kvtd_peer_stat(&p, PROTO_SCOPE_ALL, name, &v) != KVT_OK)
		v = UINT64_MAX;
	kvtd_peer_close(&p);
	return v;
}

static uint64_t bh_sum(struct bh *b, const char *name)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < b->nodes; i++)
		if (b->alive[i]) {
			uint64_t v = bh_stat(b, i, name);
			s += v == UINT64_MAX ? 0 : v;
		}
	return s;
}

static int bh_etcd_start(struct bh *b)
{
	uint16_t cp, pp;
	char peer[64], cluster[96], dir[PATH_MAX + 16], log[PATH_MAX + 16], rest[64];
	if (bench_free_port(&cp) < 0 || bench_free_port(&pp) < 0)
		return -EADDRINUSE;
	snprintf(b->etcd_url, sizeof(b->etcd_url), "http://127.0.0.1:%u", cp);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%u", pp);
	snprintf(cluster, sizeof(cluster), "default=%s", peer);
	snprintf(dir, sizeof(dir), "%s/etcd", b->run_dir);
	snprintf(log, sizeof(log), "%s/etcd.log", b->run_dir);
	char *const argv[] = { (char *)b->etcd, "--data-dir", dir, "--listen-client-urls",
			       b->etcd_url, "--advertise-client-urls", b->etcd_url,
			       "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			       "--initial-cluster", cluster, NULL };
	b->etcd_pid = bench_spawn(argv, log);
	if (b->etcd_pid < 0)
		return (int)b->etcd_pid;
	return bench_wait_log(&b->etcd_pid, log, "ready to serve client requests", 30, rest,
			      sizeof(rest));
}

static int bh_node_start(struct bh *b, unsigned i)
{
	char dir[PATH_MAX + 32], log[PATH_MAX + 32], grace[24], rate[24], irate[24];
	snprintf(dir, sizeof(dir), "%s/node-%u", b->run_dir, i);
	snprintf(log, sizeof(log), "%s/node-%u.log", b->run_dir, i);
	snprintf(grace, sizeof(grace), "%" PRIu64, b->grace_ms);
	snprintf(rate, sizeof(rate), "%" PRIu64, b->rate);
	snprintf(irate, sizeof(irate), "%" PRIu64, b->idle_rate);
	const char *extra[] = { "--etcd", b->etcd_url, "--etcd-ttl", "2", "--repair-grace", grace,
				"--repair-rate", rate, "--repair-idle-rate", irate, NULL };
	struct bench_kvtierd k = {
		.path = b->kvtierd, .dir = dir, .log = log,
		/* a node holds 2 x bytes / nodes on average; after the kills
		 * and the drain two members hold every block: bytes each */
		.dram = bench_align_up(b->bytes + b->bytes / 8 + 128 * BH_MIB, BH_MIB), .ssd = 0,
		.threads = b->threads, .extra = extra,
	};
	int rc = bench_kvtierd_start(&k, &b->pid[i], &b->port[i]);
	b->alive[i] = b->pid[i] > 0;
	if (rc < 0)
		bench_err(BH_WHO, "node %u did not start: %s; log %s", i, kvt_strerror(rc), log);
	return rc;
}

static struct kvt_store *bh_engine(struct bh *b, uint32_t *ns)
{
	struct kvt_store *s;
	char seed[32];
	unsigned i = 0;
	while (!b->alive[i])
		i++;
	snprintf(seed, sizeof(seed), "127.0.0.1:%u", b->port[i]);
	if (kvt_store_create(&s) < 0)
		return NULL;
	kvt_store_set_option(s, "dram.capacity", "64M");
	kvt_store_set_option(s, "dram.prefault", "off");
	kvt_store_set_option(s, "remote.discover", seed);
	kvt_store_set_option(s, "remote.refresh_ms", "200");
	kvt_store_set_option(s, "remote.group", "16");
	kvt_store_set_option(s, "remote.tenant", "bench");
	if (kvt_store_open(s) < 0 || kvt_ns_register(s, &bh_desc, ns) < 0) {
		kvt_store_destroy(s);
		return NULL;
	}
	/* Look every prompt up first, as engines do: the groups' anchors. */
	for (unsigned p = 0; b->keys && p * BH_PROMPT < b->blocks; p++) {
		unsigned n = b->blocks - p * BH_PROMPT < BH_PROMPT ? b->blocks - p * BH_PROMPT :
				 BH_PROMPT;
		kvt_lookup_prefix(s, *ns, &b->keys[p * BH_PROMPT], n, NULL);
	}
	return s;
}

static void *bh_reader(void *arg)
{
	struct bh *b = arg;
	uint8_t *buf = malloc(b->size);
	unsigned i = 0;
	while (buf && !atomic_load(&b->rstop)) {
		uint64_t len = 0, t0 = bh_now();
		int rc = kvt_get(b->rs, b->rns, &b->keys[i], buf, b->size, &len);
		uint64_t t1 = bh_now();
		uint32_t n = atomic_load(&b->nlat);
		if (rc != KVT_OK)
			atomic_fetch_add(&b->rmiss, 1);
		if (n < BH_LAT_MAX) {
			b->lat[n].t_ns = t0;
			b->lat[n].us = (uint32_t)((t1 - t0) / 1000);
			atomic_store(&b->nlat, n + 1);
		}
		i = (i * 7 + 13) % b->blocks;
	}
	free(buf);
	return NULL;
}

static int bh_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* p99 (ms) of the reader's gets that started in [t0, t1), and how many. */
static double bh_p99(struct bh *b, uint64_t t0, uint64_t t1, unsigned *count)
{
	uint32_t n = atomic_load(&b->nlat), k = 0;
	uint32_t *v = malloc((size_t)(n ? n : 1) * sizeof(*v));
	double p = -1;
	for (uint32_t i = 0; v && i < n; i++)
		if (b->lat[i].t_ns >= t0 && b->lat[i].t_ns < t1)
			v[k++] = b->lat[i].us;
	if (k) {
		qsort(v, k, sizeof(*v), bh_cmp_u32);
		p = v[(size_t)((k - 1) * 0.99)] / 1000.0;
	}
	*count = k;
	free(v);
	return p;
}

/* Kill node victim (-9) and wait until the live nodes hold `want` copies
 * again: the repair's GB/s (the bytes the survivors copied over their
 * longest pass), when the copying started and ended. */
static int bh_kill_heal(struct bh *b, unsigned victim, uint64_t want, double *gbps,
			uint64_t *t_kill, uint64_t *t_start, uint64_t *t_healed, uint64_t *bytes)
{
	uint64_t held, lost, rbytes0 = bh_sum(b, "repair.bytes"), maxpass = 0;
	int rc = 0;

	*t_start = *t_healed = 0;
	*t_kill = bh_now();
	kill(b->pid[victim], SIGKILL);
	waitpid(b->pid[victim], NULL, 0);
	b->pid[victim] = 0;
	b->alive[victim] = false;
	lost = want - bh_sum(b, "dram.blocks");
	for (;;) {
		held = bh_sum(b, "dram.blocks");
		if (!*t_start && held > want - lost)
			*t_start = bh_now();
		if (held >= want) {
			*t_healed = bh_now();
			break;
		}
		if (bh_now() - *t_kill > 600ull * 1000000000ull) {
			bench_err(BH_WHO,
				  "not healed after 600 s (%" PRIu64 " of %" PRIu64 " copies)",
				  held, want);
			*t_healed = bh_now();
			rc = -ETIMEDOUT;
			break;
		}
		bh_sleep_ms(20);
	}
	if (!*t_start)
		*t_start = *t_healed;
	/* the passes' own clocks: wait until none is pending */
	for (int t = 0; t < 500 && bh_sum(b, "repair.pending"); t++)
		bh_sleep_ms(20);
	*bytes = bh_sum(b, "repair.bytes") - rbytes0;
	for (unsigned i = 0; i < b->nodes; i++)
		if (b->alive[i]) {
			uint64_t v = bh_stat(b, i, "repair.last_pass_ms");
			if (v != UINT64_MAX && v > maxpass)
				maxpass = v;
		}
	*gbps = maxpass ? (double)*bytes / ((double)maxpass / 1e3) / 1e9 : 0;
	return rc;
}

static int bh_run(struct bh *b)
{
	struct kvt_store *e;
	uint32_t ns;
	uint8_t *val = malloc(b->size);
	double iperf = 0, idle_gbps = 0, repair_gbps = 0, drain_gbps = 0, p99_base, p99_rep;
	uint64_t t_kill, t_start = 0, t_healed = 0, held, want, rbytes, ibytes;
	uint64_t i_kill, i_start, i_healed;
	uint64_t t_d0, t_d1, dbytes0, dbytes;
	unsigned nb, nr, idle_victim = 1, victim = 3, drained = 2;
	char out[PATH_MAX + 32], addr[32];
	struct kvtd_peer p;
	int rc = 0;

	if (!val)
		return -ENOMEM;
	snprintf(out, sizeof(out), "%s/iperf3.json", b->run_dir);
	if (bench_iperf3(b->iperf3, b->iperf_port, 1, "-n", "1G", out, &iperf) < 0)
		bench_err(BH_WHO, "iperf3 failed (the ratio is left out)");

	/* Members up and agreeing. */
	for (int t = 0; t < 200; t++) {
		bool ok = true;
		for (unsigned i = 0; i < b->nodes && ok; i++)
			ok = bh_stat(b, i, "cluster.members") == b->nodes &&
			     bh_stat(b, i, "repair.pending") == 0;
		if (ok)
			break;
		bh_sleep_ms(100);
	}
	e = bh_engine(b, &ns); /* every prompt looked up: the anchors */
	if (!e) {
		free(val);
		return -EIO;
	}
	/* Fill: prompts of BH_PROMPT blocks. */
	for (unsigned pr = 0; pr * BH_PROMPT < b->blocks && rc == 0; pr++) {
		unsigned n = b->blocks - pr * BH_PROMPT < BH_PROMPT ? b->blocks - pr * BH_PROMPT :
				 BH_PROMPT;
		for (unsigned i = pr * BH_PROMPT; i < pr * BH_PROMPT + n && rc == 0; i++) {
			struct iovec iov = { val, b->size };
			bench_fill(val, b->size, bh_seed(i));
			rc = kvt_put(e, ns, &b->keys[i], &iov, 1);
			if (rc == KVT_EXISTS)
				rc = 0;
		}
	}
	kvt_flush(e);
	kvt_store_destroy(e);
	if (rc < 0) {
		bench_err(BH_WHO, "put failed: %s", kvt_strerror(rc));
		free(val);
		return rc;
	}
	want = 2ull * b->blocks;
	held = bh_sum(b, "dram.blocks");
	if (held != want) {
		bench_err(BH_WHO, "the pod holds %" PRIu64 " copies after the puts, want %" PRIu64,
			  held, want);
		free(val);
		return -EIO;
	}

	/* 1. kill -9 one node while no client reads: the repair at
	 * --repair-idle-rate (the servers' default: no limit). */
	rc = bh_kill_heal(b, idle_victim, want, &idle_gbps, &i_kill, &i_start, &i_healed, &ibytes);

	/* The reader, then a baseline of 2 s. */
	b->lat = calloc(BH_LAT_MAX, sizeof(*b->lat));
	b->rs = rc == 0 ? bh_engine(b, &b->rns) : NULL;
	if (!b->lat || !b->rs) {
		free(val);
		return rc < 0 ? rc : -ENOMEM;
	}
	pthread_create(&b->rth, NULL, bh_reader, b);
	bh_sleep_ms(3000); /* 1 s of warm-up (connections, view), then the baseline */

	/* 2. kill -9 another while the reader reads: --repair-rate. */
	rc = bh_kill_heal(b, victim, want, &repair_gbps, &t_kill, &t_start, &t_healed, &rbytes);
	p99_base = bh_p99(b, t_kill - 2000000000ull, t_kill, &nb);
	p99_rep = bh_p99(b, t_start, t_healed, &nr);

	/* 3. Drain one survivor (it stays up), the reader still reading. */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", b->port[drained]);
	dbytes0 = bh_stat(b, drained, "repair.bytes");
	t_d0 = bh_now();
	t_d1 = 0;
	if (rc == 0 && kvtd_peer_open(&p, addr, "bench", NULL, 0, 0) == 0) {
		if (kvtd_peer_drain(&p, PROTO_DRAIN_STAY) == 0)
			for (int t = 0; t < 60000; t++) {
				uint64_t st = 0;
				if (kvtd_peer_stat(&p, PROTO_SCOPE_TENANT, "repair.drain_state", &st) == KVT_OK && st >= 2) {
					t_d1 = bh_now();
					break;
				}
				bh_sleep_ms(10);
			}
		kvtd_peer_close(&p);
	}
	dbytes = bh_stat(b, drained, "repair.bytes") - dbytes0;
	drain_gbps = t_d1 > t_d0 ? (double)dbytes / ((double)(t_d1 - t_d0) / 1e9) / 1e9 : 0;

	atomic_store(&b->rstop, true);
	pthread_join(b->rth, NULL);

	/* Every block back, byte-exact (a fresh engine). */
	if (rc == 0) {
		uint8_t *got = malloc(b->size);
		e = bh_engine(b, &ns);
		for (unsigned i = 0; e && got && i < b->blocks && rc == 0; i++) {
			uint64_t len = 0;
			bench_fill(val, b->size, bh_seed(i));
			if (kvt_get(e, ns, &b->keys[i], got, b->size, &len) != KVT_OK ||
			    len != b->size || memcmp(got, val, b->size) != 0) {
				bench_err(BH_WHO, "block %u did not read back after the heal", i);
				rc = -EIO;
			}
		}
		free(got);
		if (e)
			kvt_store_destroy(e);
	}

	{
		double heal_s = (double)(t_healed - t_kill) / 1e9;
		double copy_s = (double)(t_healed - t_start) / 1e9;
		double iheal_s = (double)(i_healed - i_kill) / 1e9;
		double icopy_s = (double)(i_healed - i_start) / 1e9;
		if (b->json) {
			printf("{\"suite\":\"cluster-heal\",\"nodes\":%u,\"block\":%" PRIu64
			       ",\"bytes\":%" PRIu64 ",\"rate\":%" PRIu64 ",\"grace_ms\":%" PRIu64,
			       b->nodes, b->size, b->bytes, b->rate, b->grace_ms);
			printf(",\"iperf3_gbps\":%.3f,\"idle_repair_bytes\":%" PRIu64
			       ",\"idle_repair_gbps\":%.3f,\"idle_repair_vs_iperf3\":%.3f"
			       ",\"idle_time_to_heal_s\":%.3f,\"idle_copy_s\":%.3f", iperf, ibytes,
			       idle_gbps, iperf > 0 ? idle_gbps / iperf : 0, iheal_s, icopy_s);
			printf(",\"repair_bytes\":%" PRIu64
			       ",\"repair_gbps\":%.3f,\"repair_vs_iperf3\":%.3f", rbytes,
			       repair_gbps, iperf > 0 ? repair_gbps / iperf : 0);
			printf(",\"time_to_heal_s\":%.3f,\"copy_s\":%.3f,\"drain_bytes\":%" PRIu64
			       ",\"drain_gbps\":%.3f,\"drain_vs_iperf3\":%.3f", heal_s, copy_s, dbytes,
			       drain_gbps, iperf > 0 ? drain_gbps / iperf : 0);
			printf(",\"get_p99_ms_base\":%.3f,\"get_p99_ms_repair\":%.3f,"
			       "\"p99_ratio\":%.3f,\"gets_base\":%u,\"gets_repair\":%u,"
			       "\"reader_misses\":%" PRIu64 "}\n",
			       p99_base, p99_rep, p99_base > 0 ? p99_rep / p99_base : 0, nb, nr,
			       atomic_load(&b->rmiss));
		} else {
			printf("# kvtier bench cluster --heal: %u kvtierd + etcd on loopback, replicas 2, "
			       "%" PRIu64 " MiB in %" PRIu64 " KiB blocks, --repair-rate %" PRIu64
			       " MiB/s, --repair-grace %" PRIu64 " ms\n",
			       b->nodes, b->bytes / BH_MIB, b->size >> 10, b->rate / BH_MIB,
			       b->grace_ms);
			printf("iperf3 loopback (1 stream)      %8.2f GB/s\n", iperf);
			printf("repair, pod idle (kill -9)      %8.2f GB/s  %.2fx iperf3  (%" PRIu64
			       " MiB copied)\n", idle_gbps, iperf > 0 ? idle_gbps / iperf : 0,
			       ibytes / BH_MIB);
			printf("time to heal, idle              %8.2f s     (etcd ttl 2 s + grace + "
			       "%.2f s copying)\n", iheal_s, icopy_s);
			printf("repair, a reader (kill -9)      %8.2f GB/s  %.2fx iperf3  (%" PRIu64
			       " MiB copied)\n", repair_gbps, iperf > 0 ? repair_gbps / iperf : 0,
			       rbytes / BH_MIB);
			printf("time to heal, a reader          %8.2f s     (etcd ttl 2 s + grace + "
			       "%.2f s copying)\n", heal_s, copy_s);
			printf("drain of one member, a reader   %8.2f GB/s  %.2fx iperf3  (%" PRIu64
			       " MiB handed over)\n", drain_gbps, iperf > 0 ? drain_gbps / iperf : 0,
			       dbytes / BH_MIB);
			printf("client GET p99, no repair       %8.2f ms    (%u gets)\n", p99_base, nb);
			printf("client GET p99, during repair   %8.2f ms    (%u gets)  %.2fx\n", p99_rep,
			       nr, p99_base > 0 ? p99_rep / p99_base : 0);
		}
	}
	free(val);
	return rc;
}

static void bh_usage(FILE *f)
{
	fputs("usage: kvtier bench cluster --heal [--nodes N] [--bytes SIZE] [--size SIZE]\n"
	      "       [--rate SIZE] [--idle-rate SIZE] [--grace MS] [--threads N] [--json]\n"
	      "       [--keep] [--dir DIR] [--kvtierd PATH] [--iperf3 PATH] [--etcd PATH]\n"
	      "\n"
	      "N kvtierd (default 5) in a loopback etcd, --bytes (default 256M) of blocks of\n"
	      "--size (default 2M) in a namespace with replicas 2; kill -9 one node while no\n"
	      "client reads and time the heal back to 2 copies (repair GB/s vs iperf3), then\n"
	      "kill -9 another under a reader (repair GB/s, the reader's GET p99 during the\n"
	      "repair vs before), then drain one survivor (its GB/s).\n"
	      "--rate is each node's --repair-rate (default 128M), --idle-rate its\n"
	      "--repair-idle-rate (default 0: no limit), --grace its --repair-grace\n"
	      "(default 200 ms).\n", f);
}

int bench_heal_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "heal", no_argument, NULL, 'E' }, { "nodes", required_argument, NULL, 'n' },
		{ "bytes", required_argument, NULL, 'b' }, { "size", required_argument, NULL, 'z' },
		{ "rate", required_argument, NULL, 'R' }, { "grace", required_argument, NULL, 'G' },
		{ "idle-rate", required_argument, NULL, 'D' },
		{ "threads", required_argument, NULL, 'T' }, { "json", no_argument, NULL, 'j' },
		{ "keep", no_argument, NULL, 'k' }, { "dir", required_argument, NULL, 'd' },
		{ "kvtierd", required_argument, NULL, 'K' }, { "iperf3", required_argument, NULL, 'I' },
		{ "etcd", required_argument, NULL, 'e' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static char kvtierd[PATH_MAX], iperf[PATH_MAX], etcd[PATH_MAX];
	struct bh *b = calloc(1, sizeof(*b));
	const char *p_iperf = "iperf3", *p_etcd = "etcd";
	struct sigaction old[3];
	int ch, rc = BENCH_EXIT_OK;

	if (!b)
		return BENCH_EXIT_FAIL;
	*b = (struct bh){ .dir = ".", .nodes = 5, .threads = 1, .bytes = 256 * BH_MIB,
			  .size = 2 * BH_MIB, .rate = 128 * BH_MIB, .grace_ms = 200 };
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'E': break;
		case 'n': b->nodes = (unsigned)atoi(optarg); break;
		case 'b': if (bench_parse_size(optarg, &b->bytes) < 0) goto usage; break;
		case 'z': if (bench_parse_size(optarg, &b->size) < 0) goto usage; break;
		case 'R': if (bench_parse_size(optarg, &b->rate) < 0) goto usage; break;
		case 'D': if (bench_parse_size(optarg, &b->idle_rate) < 0) goto usage; break;
		case 'G': b->grace_ms = (uint64_t)atoll(optarg); break;
		case 'T': b->threads = (unsigned)atoi(optarg); break;
		case 'j': b->json = true; break;
		case 'k': b->keep = true; break;
		case 'd': b->dir = optarg; break;
		case 'K': b->kvtierd = optarg; break;
		case 'I': p_iperf = optarg; break;
		case 'e': p_etcd = optarg; break;
		case 'h': bh_usage(stdout); free(b); return BENCH_EXIT_OK;
		default: goto usage;
		}
	}
	if (optind < argc || b->nodes < 5 || b->nodes > BH_NODES_MAX || b->size < 4096 ||
	    b->bytes < b->size || b->rate == 0 || b->threads < 1 || b->threads > 64)
		goto usage;
	b->blocks = (unsigned)(b->bytes / b->size);
	if (b->kvtierd)
		snprintf(kvtierd, sizeof(kvtierd), "%s", b->kvtierd);
	else if (!bench_find_kvtierd(kvtierd, sizeof(kvtierd))) {
		bench_err(BH_WHO, "kvtierd not found next to this kvtier; give --kvtierd PATH");
		free(b);
		return BENCH_EXIT_FAIL;
	}
	if (!bench_which(p_iperf, iperf, sizeof(iperf)) || !bench_which(p_etcd, etcd, sizeof(etcd))) {
		bench_err(BH_WHO,
			  "skipped: iperf3 or etcd is not installed (Debian: iperf3, etcd-server)");
		free(b);
		return 77;
	}
	b->kvtierd = kvtierd;
	b->iperf3 = iperf;
	b->etcd = etcd;
	b->keys = calloc(b->blocks, sizeof(*b->keys));
	if (!b->keys) {
		free(b);
		return BENCH_EXIT_FAIL;
	}
	for (unsigned i = 0; i < b->blocks; i++) {
		uint64_t k[4] = { 0x4ea1, i, bh_seed(i), ~(uint64_t)i };
		kvt_key_set(&b->keys[i], k, sizeof(k));
	}
	snprintf(b->run_dir, sizeof(b->run_dir), "%s/kvtier-bench-heal-XXXXXX", b->dir);
	if (!mkdtemp(b->run_dir)) {
		bench_err(BH_WHO, "mkdtemp %s: %s", b->run_dir, strerror(errno));
		free(b->keys);
		free(b);
		return BENCH_EXIT_FAIL;
	}
	bench_signals_catch(old);
	{
		char log[PATH_MAX + 32];
		snprintf(log, sizeof(log), "%s/iperf3-server.log", b->run_dir);
		if (bench_iperf3_start(b->iperf3, log, &b->iperf_pid, &b->iperf_port) < 0 ||
		    bh_etcd_start(b) < 0) {
			bench_err(BH_WHO, "could not start iperf3 -s or etcd; logs in %s",
				  b->run_dir);
			rc = BENCH_EXIT_FAIL;
			goto out;
		}
	}
	for (unsigned i = 0; i < b->nodes; i++)
		if (bh_node_start(b, i) < 0) {
			rc = BENCH_EXIT_FAIL;
			goto out;
		}
	if (bh_run(b) < 0)
		rc = BENCH_EXIT_FAIL;
out:
	if (b->rs)
		kvt_store_destroy(b->rs);
	for (unsigned i = 0; i < b->nodes; i++)
		if (b->pid[i] > 0)
			bench_stop(b->pid[i]);
	if (b->etcd_pid > 0)
		bench_stop(b->etcd_pid);
	if (b->iperf_pid > 0)
		bench_stop(b->iperf_pid);
	if (!b->keep && rc == BENCH_EXIT_OK)
		bench_rm_tree(b->run_dir);
	else
		bench_err(BH_WHO, "run directory (logs) kept: %s", b->run_dir);
	bench_signals_restore(old);
	free(b->lat);
	free(b->keys);
	free(b);
	return rc;
usage:
	bh_usage(stderr);
	free(b);
	return BENCH_EXIT_USAGE;
}

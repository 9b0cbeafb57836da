/*
 * bench_cluster.c - "kvtier bench cluster": the throughput of a pod of
 * kvtierd nodes (doc/cluster.md) as one engine sees it, with 1 and 3 nodes.
 *
 * Owns the cluster suite: for every (size, round, node count N) cell it
 * starts N kvtierd on 127.0.0.1 port 0, each with its own run directory,
 * log and DRAM tier big enough for the whole working set (so nothing is
 * evicted and every get must hit), and stops them (SIGTERM, wait) when
 * the cell ends, on failure too (bench_proc.c kills them if the bench dies).
 *
 *   engine (this process, include/kvtier.h only)
 *     kvt_store: dram.capacity --local-dram, remote.addrs = the N nodes
 *        |  put: W blocks, prompts of --prompt-blocks keys, KVT_F_PROMPT,
 *        |       --inflight in flight, written through to the group's node
 *        |       (a prompt's first group to remote.hot_replicas nodes),
 *        |       after --put-warmup untimed puts (the steady state)
 *        |  get: a fresh store (cold DRAM), the same W blocks, every byte
 *        v       checked against its value, rotating destination buffers
 *     node 0 .. node N-1 (kvtierd, --threads loop threads each)
 *
 * Block i holds bench_fill(bench_seed(size, i)), made before timing; the
 * get phase compares each value in full as it completes.  A put completes
 * once its node answered; afterwards every node's dram.blocks (STATS of
 * the whole server, through kvt_remote_stats) must add up to the blocks
 * placement sent (hot blocks count once per replica): a put the server
 * dropped would otherwise pass unseen, since a write-through reports the
 * local put's status.  Timing covers submit of the first request to the
 * completion of the last; GB/s counts the engine's bytes (W x size).
 *
 * iperf3 over loopback runs once per round as the reference limit.
 * Rounds alternate the order of the node counts, and in each cell which
 * of the engine and the direct client goes first; medians are reported,
 * and for the ratios engine / direct and N nodes / 1 the median, min and
 * max of the per-round ratios (each measured side by side in one round).
 * Exit: 0 ran, 1 failure (a node that did not start or stop cleanly, a
 * miss, a wrong byte, blocks missing on the nodes), 2 usage, 77 iperf3
 * not installed.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "kvtier.h"

#include "bench.h"

#define BC_WHO "kvtier bench cluster" /* how its messages start */

#define BC_MIB (UINT64_C(1) << 20)
#define BC_NODE_CHUNK (64 * 1024) /* the nodes' dram.chunk (the default) */
#define BC_NODES_MAX 8
#define BC_SIZES_MAX 4
#define BC_INFLIGHT_MAX 256
#define BC_WAIT_MS 60000
#define BC_BLOCK_TOKENS 16u
#define BC_LAT_PROMPTS 16       /* prompt loads timed per cell */

#define BC_SET_MAX 8
/* Puts after which remote.put_local=auto has decided a put-only engine
 * skips local copies (it copies its first 16, deciding every 8). */
#define BC_WARMUP_STEADY 32u

struct bc_opts {
	bool smoke, json, keep;
	bool direct_crc;              /* the direct client checks each got value's CRC32C */
	unsigned nodes[BC_NODES_MAX], node_count;
	uint64_t sizes[BC_SIZES_MAX];
	unsigned size_count;
	unsigned rounds, threads, inflight, conns, prompt_blocks, group, hot;
	unsigned conns_max;           /* remote.conns_max; 0: --conns (a fixed pool) */
	unsigned io_threads;          /* remote.io_threads */
	unsigned put_warmup;          /* --put-warmup: untimed puts before each put phase */
	const char *put_local;        /* remote.put_local */
	int fwd;                      /* --hot-forward: BC_FWD_* */
	bool seq;                     /* --order seq: the engine's phases walk blocks 0, 1, 2... */
	uint64_t bytes;               /* working set per size */
	uint64_t local_dram;          /* the engine's DRAM tier */
	uint64_t ssd;                 /* each node's --ssd, 0: DRAM only */
	const char *kvtierd, *iperf3, *dir;
	const char *set[BC_SET_MAX];  /* --set NAME=VALUE: the engine's store options, last */
	unsigned set_count;
};

#define BC_FWD_OFF 0 /* the engine writes hot replicas itself */
#define BC_FWD_ON 1  /* remote.hot_forward on: the nodes forward them (a static pod) */
#define BC_FWD_AB 2  /* both, each cell, on the same nodes (another namespace) */
#define BC_FWD_AUTO 3 /* remote.hot_forward auto, the default: the nodes (a static
		       * pod) announce forwarding, and the engine uses it */

struct bc_node {
	pid_t pid;
	uint16_t port;
	char log[PATH_MAX];
};

/* One cell's results: one size, one round, one node count. */
struct bc_cell {
	double put_gbps, get_gbps;
	double dput_gbps, dget_gbps;  /* the direct client's (bench_kvt_*), same nodes */
	double lat_ms[BC_LAT_PROMPTS], dlat_ms[BC_LAT_PROMPTS]; /* whole-prompt loads */
	unsigned nlat;
	/* Summed over the whole-prompt loads, engine and direct client: the
	 * process's minor page faults and context switches (getrusage), and
	 * the engine's frames, receive calls and remote-thread wake-ups. */
	uint64_t lat_faults, dlat_faults, lat_csw, dlat_csw;
	uint64_t lat_frames, lat_reads, lat_wakeups;
	double lat_cpu_s, dlat_cpu_s;
	/* The engine process's CPU seconds in each phase (the servers' not
	 * included): engine put, direct put, engine get, direct get. */
	double put_cpu_s, dput_cpu_s, get_cpu_s, dget_cpu_s;
	double put_io_cpu_s, get_io_cpu_s; /* of those, the remote I/O threads' */
	/* The process's context switches in the same phases, and the
	 * engine's sendmsg calls and I/O-thread wake-ups in its two. */
	uint64_t put_csw, dput_csw, get_csw, dget_csw;
	uint64_t put_sends, get_sends, put_wakeups, get_wakeups;
	/* The nodes' CPU (every thread of every kvtierd) in the same phases:
	 * on loopback the receive path of a segment runs on whichever side's
	 * thread meets it, so what one side saves the other may pay. */
	double put_srv_s, dput_srv_s, get_srv_s, dget_srv_s;
	double get_check_cpu_s, dget_check_cpu_s; /* and the bench's byte checks' */
	uint64_t node_blocks[BC_NODES_MAX]; /* each node's dram.blocks after the puts */
	uint64_t local_hits;          /* gets served by the engine's own DRAM (expected 0) */
	uint64_t put_wire_bytes;      /* remote.bytes_out of the engine's put phase */
	uint64_t put_skips;           /* store.put_local_skips of it (put_local auto) */
	/* --hot-forward ab: the same puts with remote.hot_forward on */
	double fput_gbps, fwd_lag_ms; /* ... and how long after them the last copy landed */
	double fput_cpu_s;            /* the engine process's CPU seconds in that phase */
	uint64_t fput_wire_bytes;
};

struct bc {
	struct bc_opts o;
	char run_dir[PATH_MAX];
	unsigned starts;              /* nodes started: names each one's dir and log */
	struct bc_node node[BC_NODES_MAX];
	unsigned running;             /* node[0..running) are up */
	pid_t iperf_pid;
	uint16_t iperf_port;
	uint8_t ns_digest[32];
	bool fwd_now;                 /* bc_store_open: remote.hot_forward on */
	/* The working set of the current size, owned here, freed per size. */
	uint64_t size;
	unsigned blocks;              /* W, whole prompts */
	uint8_t *vals;                /* blocks x size: value i at i * size */
	uint32_t *crcs;               /* value i's CRC32C (--direct-crc) */
	struct kvt_key *keys;         /* prompt p's keys at [p * prompt_blocks] */
	unsigned *order;              /* the engine's phases submit block order[j] j-th */
	uint8_t *dst;                 /* inflight x size: rotating get buffers */
	/* A phase's requests: here, not on bc_phase's stack, because one still
	 * in flight after a failed wait completes when its store is destroyed. */
	struct kvt_req reqs[BC_INFLIGHT_MAX];
	struct iovec iov[BC_INFLIGHT_MAX];
};

/* ------------------------------------------------------------------------
 * Nodes.
 */
static int bc_nodes_stop(struct bc *b)
{
	int rc = 0;
	for (unsigned i = 0; i < b->running; i++) {
		int st = bench_stop(b->node[i].pid);
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			bench_err(BC_WHO, "node %u did not stop cleanly (status 0x%x); log %s", i,
				  st, b->node[i].log);
			rc = -EIO;
		}
		b->node[i].pid = 0;
	}
	b->running = 0;
	return rc;
}

/* Each node's DRAM holds the whole working set: placement may put any
 * share on one node, and an eviction would turn into a miss. */
static int bc_nodes_start(struct bc *b, unsigned n)
{
	char dir[PATH_MAX + 32], a_ssd[32], listen[BC_NODES_MAX][24], members[BC_NODES_MAX * 24];
	const char *extra[8] = { NULL };
	unsigned ne = 0;
	snprintf(a_ssd, sizeof(a_ssd), "%" PRIu64, b->o.ssd);
	if (b->o.ssd) {
		extra[ne++] = "--set";
		extra[ne++] = "ssd.admission=always";
	}
	/* Forwarding needs a pod: each node knows the list (--members), so
	 * its port is chosen before it starts. */
	members[0] = 0;
	for (unsigned i = 0; b->o.fwd != BC_FWD_OFF && n > 1 && i < n; i++) {
		uint16_t port = 0;
		size_t l = strlen(members);
		int rc = bench_free_port(&port);
		if (rc < 0)
			return rc;
		snprintf(listen[i], sizeof(listen[i]), "127.0.0.1:%u", port);
		snprintf(members + l, sizeof(members) - l, "%s%s", i ? "," : "", listen[i]);
	}
	if (members[0]) {
		extra[ne++] = "--members";
		extra[ne++] = members;
		extra[ne++] = "--listen";
	}
	for (unsigned i = 0; i < n; i++) {
		if (members[0]) { /* its own address: "--listen" ADDR */
			extra[ne] = listen[i];
			extra[ne + 1] = NULL;
		}
		struct bc_node *nd = &b->node[i];
		unsigned seq = ++b->starts;
		uint64_t set = (uint64_t)b->blocks * bench_align_up(b->size, BC_NODE_CHUNK);
		snprintf(dir, sizeof(dir), "%s/node-%u", b->run_dir, seq);
		if (snprintf(nd->log, sizeof(nd->log), "%s/node-%u.log", b->run_dir, seq) >=
		    (int)sizeof(nd->log))
			return -ENAMETOOLONG;
		struct bench_kvtierd k = {
			.path = b->o.kvtierd, .dir = dir, .log = nd->log,
			/* the engine's working set, and the direct client's copy,
			 * each block in whole DRAM chunks (a 16K block takes a
			 * 64K chunk: --sizes 16K did not fit) */
			.dram = bench_align_up((b->o.fwd == BC_FWD_AB ? 3 : 2) * set +
						       set / 2 + 64 * BC_MIB, BC_MIB),
			.ssd = b->o.ssd, .threads = b->o.threads, .extra = ne ? extra : NULL,
		};
		int rc = bench_kvtierd_start(&k, &nd->pid, &nd->port);
		if (nd->pid > 0)
			b->running = i + 1; /* stopped by bc_nodes_stop, also on failure */
		if (rc < 0) {
			bench_err(BC_WHO, "node %u did not start: %s; log %s", i, kvt_strerror(rc),
				  nd->log);
			return rc;
		}
	}
	return 0;
}

/* Fault p[0..len) in before timing.  Not with zeros: the compiler turns
 * malloc + memset(0) into calloc, which leaves fresh pages unmapped (a
 * first timed load then took 16384 faults for 64 MiB). */
static void bc_fault_in(uint8_t *p, uint64_t len)
{
	memset(p, 0xee, len);
}

/* This thread's CPU seconds so far. */
static double bc_thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The process's minor faults and context switches (every thread's). */
struct bc_ru {
	uint64_t faults, csw;
	double cpu_s;                /* user + system, every thread */
	double check_s;              /* of it, in the bench's byte checks (memcmp) */
};

static void bc_ru_now(struct bc_ru *r)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	r->faults = (uint64_t)u.ru_minflt;
	r->csw = (uint64_t)u.ru_nvcsw + (uint64_t)u.ru_nivcsw;
	r->cpu_s = (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
		   (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

/* *acc += now - *from */
static void bc_ru_since(struct bc_ru *acc, const struct bc_ru *from)
{
	struct bc_ru now;
	bc_ru_now(&now);
	acc->faults += now.faults - from->faults;
	acc->csw += now.csw - from->csw;
	acc->cpu_s += now.cpu_s - from->cpu_s;
}

/* CPU seconds the tasks of process pid ("self" or a number) have run so
 * far (their schedstat), only those whose name starts with comm if one is
 * given. */
static double bc_tasks_cpu(const char *pid, const char *comm)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/task", pid);
	DIR *d = opendir(path);
	struct dirent *e;
	double sum = 0;
	while (d && (e = readdir(d))) {
		char name[32] = "";
		unsigned long long ns = 0;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		if (comm) {
			snprintf(path, sizeof(path), "/proc/%s/task/%s/comm", pid, e->d_name);
			if (!(f = fopen(path, "r")))
				continue;
			if (!fgets(name, sizeof(name), f))
				name[0] = 0;
			fclose(f);
			if (strncmp(name, comm, strlen(comm)) != 0)
				continue;
		}
		snprintf(path, sizeof(path), "/proc/%s/task/%s/schedstat", pid, e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fscanf(f, "%llu", &ns) == 1)
			sum += (double)ns * 1e-9;
		fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

/* CPU seconds the remote tier's I/O threads ("kvt-remote", one per
 * member) have run so far: what one of them costs per GB sets how fast
 * one member can go on a machine with cores to spare. */
static double bc_io_cpu(void)
{
	return bc_tasks_cpu("self", "kvt-remote");
}

/* CPU seconds every thread of the running nodes has run so far. */
static double bc_nodes_cpu(const struct bc *b)
{
	double sum = 0;
	for (unsigned i = 0; i < b->running; i++) {
		char pid[24];
		snprintf(pid, sizeof(pid), "%d", (int)b->node[i].pid);
		sum += bc_tasks_cpu(pid, NULL);
	}
	return sum;
}

static uint64_t bc_stat(struct kvt_store *s, const char *name)
{
	uint64_t v = 0;
	kvt_store_stat(s, name, &v);
	return v;
}

/* ------------------------------------------------------------------------
 * The engine.
 */
static const struct kvt_ns_desc bc_desc = {
	.model = "bench-cluster", .dtype = "bf16", .layout = "bench",
	.block_tokens = BC_BLOCK_TOKENS, .tp_size = 1, .pp_size = 1, .tenant = "bench",
};

/* A store whose remote tier is node[0..n): *s owned by the caller. */
static int bc_store_open(struct bc *b, unsigned n, struct kvt_store **out, uint32_t *ns)
{
	char addrs[BC_NODES_MAX * 24] = "", dram[32], group[16], hot[16], conns[16], cmax[16];
	char iot[16];
	struct kvt_store *s = NULL;
	int r;

	for (unsigned i = 0; i < n; i++) {
		size_t l = strlen(addrs);
		snprintf(addrs + l, sizeof(addrs) - l, "%s127.0.0.1:%u", i ? "," : "",
			 b->node[i].port);
	}
	snprintf(dram, sizeof(dram), "%" PRIu64, b->o.local_dram);
	snprintf(group, sizeof(group), "%u", b->o.group);
	snprintf(hot, sizeof(hot), "%u", b->o.hot);
	snprintf(conns, sizeof(conns), "%u", b->o.conns);
	snprintf(cmax, sizeof(cmax), "%u", b->o.conns_max ? b->o.conns_max : b->o.conns);
	snprintf(iot, sizeof(iot), "%u", b->o.io_threads);
	const char *opts[][2] = {
		{ "dram.capacity", dram }, { "remote.addrs", addrs },
		{ "remote.group", group }, { "remote.hot_replicas", hot },
		{ "remote.conns", conns }, { "remote.timeout_ms", "20000" },
		{ "remote.conns_max", cmax }, { "remote.put_local", b->o.put_local },
		{ "remote.io_threads", iot },
		{ "remote.hot_forward", b->fwd_now ? "on" : b->o.fwd == BC_FWD_AUTO ? "auto" : "off" },
	};
	if ((r = kvt_store_create(&s)) < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if ((r = kvt_store_set_option(s, opts[i][0], opts[i][1])) < 0) {
			bench_err(BC_WHO, "option %s=%s: %s", opts[i][0], opts[i][1],
				  kvt_strerror(r));
			goto fail;
		}
	for (unsigned i = 0; i < b->o.set_count; i++) {
		char name[128];
		const char *eq = strchr(b->o.set[i], '=');
		snprintf(name, sizeof(name), "%.*s", (int)(eq - b->o.set[i]), b->o.set[i]);
		if ((r = kvt_store_set_option(s, name, eq + 1)) < 0) {
			bench_err(BC_WHO, "--set %s: %s", b->o.set[i], kvt_strerror(r));
			goto fail;
		}
	}
	/* --hot-forward ab: the forwarded puts in a namespace of their own */
	struct kvt_ns_desc desc = bc_desc;
	if (b->o.fwd == BC_FWD_AB && b->fwd_now)
		desc.model = "bench-cluster-fwd";
	if ((r = kvt_store_open(s)) < 0 || (r = kvt_ns_register(s, &desc, ns)) < 0)
		goto fail;
	/* auto: the engine forwards through members whose HELLO it has seen;
	 * puts before that are written to each replica.  Measure the steady
	 * state: wait (up to BC_WAIT_MS) until every node answered one. */
	for (double t0 = bench_now(); b->o.fwd == BC_FWD_AUTO && n > 1;) {
		unsigned seen = 0;
		for (unsigned i = 0; i < n; i++) {
			char name[64];
			snprintf(name, sizeof(name), "remote.node.%u.version", i);
			seen += bc_stat(s, name) > 0;
		}
		if (seen == n)
			break;
		if (bench_now() - t0 > BC_WAIT_MS / 1000.0) {
			bench_err(BC_WHO, "%u of %u nodes answered HELLO", seen, n);
			r = -ETIMEDOUT;
			goto fail;
		}
		usleep(1000);
	}
	*out = s;
	return 0;
fail:
	bench_err(BC_WHO, "opening the engine's store: %s", kvt_strerror(r));
	kvt_store_destroy(s);
	return r;
}

/*
 * One phase: every block put (or got) with o.inflight requests in flight,
 * each request on a slot of its own (its iovec, and for gets its
 * destination buffer).  *gbps: W x size over the time from the first
 * submit to the last completion.
 */
static int bc_phase(struct bc *b, struct kvt_store *s, uint32_t ns, bool put, double *gbps,
		    double *cpu_s, double *io_cpu_s, double *check_cpu_s, uint64_t *local_hits,
		    double *srv_s, uint64_t *csw)
{
	double io0, srv0, check = 0;
	struct bc_ru ru = { 0 }, ru0;
	struct kvt_req *reqs = b->reqs, *done[BC_INFLIGHT_MAX];
	struct iovec *iov = b->iov;
	unsigned free_slots[BC_INFLIGHT_MAX], nfree = b->o.inflight, next = 0, finished = 0;
	struct kvt_queue *q = NULL;
	int r, rc = -EIO;

	if ((r = kvt_queue_create(s, &q)) < 0) {
		bench_err(BC_WHO, "kvt_queue_create: %s", kvt_strerror(r));
		return r;
	}
	for (unsigned i = 0; i < nfree; i++)
		free_slots[i] = i;
	/* The get buffers were faulted in when the working set was made, but
	 * every node started since (fork) left them copy-on-write protected:
	 * the first write to each page is a fault again (8 slots of 2 MiB:
	 * 4096 pages), which the engine's I/O thread took inside the timed
	 * phase (its CPU per GB got went from 0.26-0.29 s to 0.22 when the
	 * buffers were faulted in here, 2026-12-02), while the direct
	 * client's buffers are made after the nodes start. */
	if (!put)
		bc_fault_in(b->dst, (uint64_t)b->o.inflight * b->size);
	bc_ru_now(&ru0);
	io0 = bc_io_cpu();
	srv0 = bc_nodes_cpu(b);
	double t0 = bench_now();
	while (finished < b->blocks) {
		while (next < b->blocks && nfree > 0) {
			unsigned slot = free_slots[--nfree], i = b->order[next++];
			unsigned p0 = i / b->o.prompt_blocks * b->o.prompt_blocks;
			struct kvt_req *rq = &reqs[slot];
			iov[slot] = (struct iovec){ put ? b->vals + (uint64_t)i * b->size :
							  b->dst + (uint64_t)slot * b->size,
						    b->size };
			*rq = (struct kvt_req){ .op = put ? KVT_OP_PUT : KVT_OP_GET,
						.flags = KVT_F_PROMPT, .ns = ns, .key = b->keys[i],
						.keys = &b->keys[p0], .key_count = i - p0 + 1,
						.iov = &iov[slot], .iov_count = 1,
						.user_data = (uint64_t)slot << 32 | i };
			if ((r = kvt_submit(q, &rq, 1)) != 1) {
				bench_err(BC_WHO, "kvt_submit: %s", kvt_strerror(r));
				goto out;
			}
		}
		r = kvt_queue_wait(q, done, BC_INFLIGHT_MAX, BC_WAIT_MS);
		if (r <= 0) {
			bench_err(BC_WHO, "kvt_queue_wait: %s",
				  r == 0 ? "nothing in 60 s" : kvt_strerror(r));
			goto out;
		}
		for (int j = 0; j < r; j++) {
			struct kvt_req *d = done[j];
			unsigned slot = (unsigned)(d->user_data >> 32), i = (uint32_t)d->user_data;
			free_slots[nfree++] = slot;
			if (d->status != KVT_OK || (!put && d->length != b->size)) {
				bench_err(BC_WHO, "%s of block %u: %s (%" PRIu64 " bytes)",
					  put ? "put" : "get", i,
					  d->status == KVT_MISS ? "a miss"
								: kvt_strerror(d->status),
					  d->length);
				goto out;
			}
			double c0 = put ? 0 : bc_thread_cpu();
			if (!put && memcmp(b->dst + (uint64_t)slot * b->size,
					   b->vals + (uint64_t)i * b->size, b->size) != 0) {
				bench_err(BC_WHO, "get of block %u: wrong bytes", i);
				goto out;
			}
			if (!put)
				check += bc_thread_cpu() - c0;
			if (!put && d->tier == KVT_TIER_DRAM)
				(*local_hits)++;
		}
		finished += (unsigned)r;
	}
	*gbps = bench_rate((double)b->blocks * (double)b->size, bench_now() - t0) / 1e9;
	bc_ru_since(&ru, &ru0);
	*cpu_s = ru.cpu_s;
	if (csw)
		*csw = ru.csw;
	*io_cpu_s = bc_io_cpu() - io0;
	*srv_s = bc_nodes_cpu(b) - srv0;
	*check_cpu_s = check;
	rc = 0;
out:
	/* On failure, collect what is still in flight before the queue goes. */
	while (kvt_queue_inflight(q) > 0 && kvt_queue_wait(q, done, BC_INFLIGHT_MAX, BC_WAIT_MS) > 0)
		;
	kvt_queue_destroy(q);
	return rc;
}

/* ------------------------------------------------------------------------
 * The direct client: bench net's native client (bench_kvt_*), o.conns
 * connections per node, each one thread with one request in flight, on
 * the same nodes in the same cell.  Block i goes to node (i / group) % n,
 * like a placement that puts each group on one node, and to connection
 * i % conns of that node; its key is "bc-direct-<i>" in the net suite's
 * namespace.  A put computes its CRC32C in the timed loop (the library
 * computes it at put); a get lands in the connection's own buffer and is
 * compared in full, as bc_phase does.
 */
struct bc_direct_job {
	struct bc *b;
	struct bench_kvt *k;
	unsigned n, node, j;
	bool put;
	uint8_t *dst;                /* this connection's buffer, or NULL: */
	uint8_t *base;               /* block i lands at base + (i - from) x size */
	unsigned from, to;           /* blocks [from, to) */
	int err;
	unsigned block;
	double check_cpu_s;          /* in the bench's byte check (memcmp) */
};

static void *bc_direct_run(void *arg)
{
	struct bc_direct_job *jb = arg;
	struct bc *b = jb->b;
	char key[32];
	for (unsigned i = jb->from; i < jb->to; i++) {
		if ((i / b->o.group) % jb->n != jb->node || i % b->o.conns != jb->j)
			continue;
		const uint8_t *v = b->vals + (uint64_t)i * b->size;
		uint64_t got = 0;
		int kl = snprintf(key, sizeof(key), "bc-direct-%u", i), rc;
		jb->block = i;
		if (jb->put) {
			rc = bench_kvt_put(jb->k, key, (uint32_t)kl, v, b->size,
					   kvt_crc32c(0, v, b->size));
		} else {
			uint8_t *d = jb->dst ? jb->dst : jb->base + (uint64_t)(i - jb->from) * b->size;
			rc = bench_kvt_get(jb->k, key, (uint32_t)kl, d, b->size, &got);
			if (rc == 0 && b->o.direct_crc && kvt_crc32c(0, d, got) != b->crcs[i])
				rc = -EBADMSG; /* as the library checks what it receives */
			double c0 = bc_thread_cpu();
			if (rc == 0 && (got != b->size || memcmp(d, v, b->size) != 0))
				rc = -EBADMSG;
			jb->check_cpu_s += bc_thread_cpu() - c0;
		}
		if (rc != 0) {
			jb->err = rc;
			return NULL;
		}
	}
	return NULL;
}

/* Blocks [from, to) by the direct client; *secs the time it took.  Gets
 * land in a buffer per connection, or with base (prompt loads) each block
 * at its place in base, as the engine's do. */
static int bc_direct_phase(struct bc *b, unsigned n, bool put, unsigned from, unsigned to,
			   uint8_t *base, double *secs, struct bc_ru *ru)
{
	struct bc_ru ru0;
	unsigned nj = n * b->o.conns, started = 0;
	struct bc_direct_job *jobs = calloc(nj, sizeof(*jobs));
	pthread_t *th = calloc(nj, sizeof(*th));
	uint8_t *dst = put || base ? NULL : malloc((uint64_t)nj * b->size);
	int rc = -ENOMEM;

	if (!jobs || !th || (!put && !base && !dst))
		goto out;
	if (dst)
		bc_fault_in(dst, (uint64_t)nj * b->size);
	for (unsigned t = 0; t < nj; t++) {
		jobs[t] = (struct bc_direct_job){ .b = b, .n = n, .node = t % n, .j = t / n,
						  .put = put, .from = from, .to = to, .base = base,
						  .dst = dst ? dst + (uint64_t)t * b->size : NULL };
		if ((rc = bench_kvt_connect(&jobs[t].k, b->node[t % n].port)) < 0) {
			bench_err(BC_WHO, "direct client to node %u: %s", t % n, kvt_strerror(rc));
			goto out;
		}
	}
	bc_ru_now(&ru0);
	double t0 = bench_now();
	for (; started < nj; started++)
		if (pthread_create(&th[started], NULL, bc_direct_run, &jobs[started]) != 0) {
			rc = -EAGAIN;
			break;
		}
	for (unsigned t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	double t1 = bench_now();
	if (ru) {
		bc_ru_since(ru, &ru0);
		for (unsigned t = 0; t < started; t++)
			ru->check_s += jobs[t].check_cpu_s;
	}
	if (started < nj)
		goto out;
	rc = 0;
	for (unsigned t = 0; t < nj && rc == 0; t++)
		if (jobs[t].err) {
			rc = jobs[t].err < 0 ? jobs[t].err : -EIO;
			bench_err(BC_WHO, "direct %s of block %u: %s", put ? "put" : "get",
				  jobs[t].block,
				  jobs[t].err == KVT_MISS ? "a miss" : kvt_strerror(jobs[t].err));
		}
	if (rc == 0)
		*secs = t1 - t0;
out:
	for (unsigned t = 0; jobs && t < nj; t++)
		bench_kvt_close(jobs[t].k);
	free(jobs);
	free(th);
	free(dst);
	return rc;
}

/* Every block, by the direct client: *gbps. */
static int bc_direct_all(struct bc *b, unsigned n, bool put, double *gbps, double *cpu_s,
			 double *check_cpu_s, double *srv_s, uint64_t *csw)
{
	double secs = 0;
	struct bc_ru ru = { 0 };
	double srv0 = bc_nodes_cpu(b);
	int rc = bc_direct_phase(b, n, put, 0, b->blocks, NULL, &secs, &ru);
	*srv_s = bc_nodes_cpu(b) - srv0;
	*cpu_s = ru.cpu_s;
	*csw = ru.csw;
	*check_cpu_s = ru.check_s;
	if (rc == 0)
		*gbps = bench_rate((double)b->blocks * (double)b->size, secs) / 1e9;
	return rc;
}

/*
 * Whole-prompt loads (the latency target): the first BC_LAT_PROMPTS
 * prompts, each loaded at once, its prompt_blocks gets submitted together
 * into buffers of their own (KVT_F_PROMPT); the time from the submit to
 * the last completion.  Then the same prompt by the direct client (its
 * connections in parallel, one request in flight each), alternating which
 * goes first.  Both land every block at its own place in a prompt-sized
 * buffer faulted in before timing (an engine's are pinned), the direct
 * client in a second one, so that the engine's bytes are its own when
 * they are checked after timing.
 */
static int bc_prompt_loads(struct bc *b, struct kvt_store *s, uint32_t ns, unsigned n,
			   struct bc_cell *c)
{
	unsigned pb = b->o.prompt_blocks, np = b->blocks / pb;
	uint64_t bytes = (uint64_t)pb * b->size;
	uint8_t *buf = malloc(bytes), *dbuf = malloc(bytes);
	struct kvt_req *reqs = calloc(pb, sizeof(*reqs)), **rp = calloc(pb, sizeof(*rp));
	struct kvt_req **done = calloc(pb, sizeof(*done));
	struct iovec *iov = calloc(pb, sizeof(*iov));
	struct kvt_queue *q = NULL;
	int r, rc = -ENOMEM;

	np = np < BC_LAT_PROMPTS ? np : BC_LAT_PROMPTS;
	if (!buf || !dbuf || !reqs || !rp || !done || !iov)
		goto out;
	bc_fault_in(dbuf, bytes);
	if ((rc = kvt_queue_create(s, &q)) < 0)
		goto out;
	for (unsigned p = 0; p < np; p++) {
		unsigned p0 = p * pb, got = 0;
		double dsecs = 0;
		struct bc_ru dru = { 0 }, ru = { 0 }, ru0;
		bc_fault_in(buf, bytes); /* and no byte of the last load left */
		if (p % 2 && (rc = bc_direct_phase(b, n, false, p0, p0 + pb, dbuf, &dsecs, &dru)) < 0)
			goto out;
		for (unsigned j = 0; j < pb; j++) {
			iov[j] = (struct iovec){ buf + (uint64_t)j * b->size, b->size };
			reqs[j] = (struct kvt_req){ .op = KVT_OP_GET, .flags = KVT_F_PROMPT, .ns = ns,
						    .key = b->keys[p0 + j], .keys = &b->keys[p0],
						    .key_count = j + 1, .iov = &iov[j], .iov_count = 1 };
			rp[j] = &reqs[j];
		}
		uint64_t f0 = bc_stat(s, "remote.frames_out"), rd0 = bc_stat(s, "remote.reads");
		uint64_t w0 = bc_stat(s, "remote.wakeups");
		bc_ru_now(&ru0);
		double t0 = bench_now();
		if ((r = kvt_submit(q, rp, pb)) != (int)pb) {
			bench_err(BC_WHO, "kvt_submit of a prompt: %s", kvt_strerror(r));
			rc = r < 0 ? r : -EIO;
			goto out;
		}
		while (got < pb) {
			r = kvt_queue_wait(q, done, pb, BC_WAIT_MS);
			if (r <= 0) {
				bench_err(BC_WHO, "kvt_queue_wait: %s",
					  r == 0 ? "nothing in 60 s" : kvt_strerror(r));
				rc = r < 0 ? r : -ETIMEDOUT;
				goto out;
			}
			got += (unsigned)r;
		}
		double t1 = bench_now();
		bc_ru_since(&ru, &ru0);
		c->lat_frames += bc_stat(s, "remote.frames_out") - f0;
		c->lat_reads += bc_stat(s, "remote.reads") - rd0;
		c->lat_wakeups += bc_stat(s, "remote.wakeups") - w0;
		for (unsigned j = 0; j < pb; j++)
			if (reqs[j].status != KVT_OK || reqs[j].length != b->size ||
			    memcmp(buf + (uint64_t)j * b->size, b->vals + (uint64_t)(p0 + j) * b->size,
				   b->size) != 0) {
				bench_err(BC_WHO, "prompt load, block %u: %s", p0 + j,
					  reqs[j].status != KVT_OK ? kvt_strerror(reqs[j].status)
								   : "wrong bytes");
				rc = -EIO;
				goto out;
			}
		if (p % 2 == 0 &&
		    (rc = bc_direct_phase(b, n, false, p0, p0 + pb, dbuf, &dsecs, &dru)) < 0)
			goto out;
		c->lat_cpu_s += ru.cpu_s;
		c->dlat_cpu_s += dru.cpu_s;
		c->lat_faults += ru.faults;
		c->lat_csw += ru.csw;
		c->dlat_faults += dru.faults;
		c->dlat_csw += dru.csw;
		c->lat_ms[c->nlat] = (t1 - t0) * 1e3;
		c->dlat_ms[c->nlat++] = dsecs * 1e3;
	}
	rc = 0;
out:
	while (q && kvt_queue_inflight(q) > 0 && kvt_queue_wait(q, done, pb, BC_WAIT_MS) > 0)
		;
	kvt_queue_destroy(q);
	free(buf);
	free(dbuf);
	free(reqs);
	free(rp);
	free(done);
	free(iov);
	return rc;
}

struct bc_blocks {
	uint64_t *v;
	unsigned n;
};

/* node.<i>.dram.blocks from kvt_remote_stats; one member: no prefix. */
static void bc_blocks_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct bc_blocks *bl = ctx;
	unsigned i = 0;
	int at = 0;
	if (str)
		return;
	if (strcmp(name, "dram.blocks") == 0 && bl->n == 1)
		bl->v[0] = value;
	else if (sscanf(name, "node.%u.dram.blocks%n", &i, &at) == 1 && name[at] == '\0' &&
		 i < bl->n)
		bl->v[i] = value;
}

/* What placement sends: each prompt's first group to min(hot, n) nodes. */
static uint64_t bc_expected_blocks(const struct bc *b, unsigned n)
{
	unsigned first = b->o.group < b->o.prompt_blocks ? b->o.group : b->o.prompt_blocks;
	unsigned copies = b->o.hot < n ? b->o.hot : n;
	uint64_t prompts = b->blocks / b->o.prompt_blocks;
	return prompts * ((uint64_t)first * copies + (b->o.prompt_blocks - first));
}

/* One cell: N fresh nodes, the puts (the engine's and the direct
 * client's, in the order direct_first says), the node counts, the gets
 * from a fresh engine and the direct client, the nodes stopped. */
static void bc_fwd_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	size_t l = strlen(name), w = sizeof("repair.forwarded") - 1;
	(void)str;
	/* "node.<i>.repair.forwarded" with several members */
	if (l >= w && strcmp(name + l - w, "repair.forwarded") == 0 &&
	    (l == w || name[l - w - 1] == '.'))
		*(uint64_t *)ctx += value;
}

/* The copies n nodes forwarded so far (every node's repair.forwarded). */
static uint64_t bc_forwarded(struct kvt_store *s)
{
	uint64_t sum = 0;
	kvt_remote_stats(s, "*", bc_fwd_stat, &sum);
	return sum;
}

/* Wait until the nodes forwarded want copies in all: how long (ms), or
 * < 0 after BC_WAIT_MS. */
static double bc_fwd_wait(struct kvt_store *s, uint64_t want)
{
	double t0 = bench_now();
	while (bc_forwarded(s) < want) {
		if (bench_now() - t0 > BC_WAIT_MS / 1000.0) {
			bench_err(BC_WHO, "the nodes forwarded %" PRIu64 " of %" PRIu64 " copies",
				  bc_forwarded(s), want);
			return -1;
		}
		usleep(1000);
	}
	return (bench_now() - t0) * 1e3;
}

/*
 * --put-warmup N: N untimed puts through the engine's store s before its
 * timed put phase, so that the phase measures an engine that has been
 * putting for a while rather than a fresh store.  What a fresh store does
 * differently: remote.put_local=auto copies its first 16 puts into local
 * DRAM (faulting in the arena's pages) before it knows whether puts are
 * read back (doc/remote.md), which at 2 MiB and 128 MiB is a quarter of
 * the phase's puts.  The warm-up puts go to a namespace of their own
 * (the working set's first N blocks in the phase's order), are waited
 * for (answers, and the nodes' forwarded copies), then cleared from the
 * nodes and local DRAM, so the nodes' block counts hold the timed puts
 * only.  The forwarded phase (--hot-forward ab) warms up in a namespace
 * of its own: a member refuses forwarded copies into a namespace cleared
 * within the last minute (doc/cluster.md "Consistency").
 */
static int bc_put_warmup(struct bc *b, unsigned n, struct kvt_store *s)
{
	struct kvt_ns_desc desc = bc_desc;
	unsigned blocks = b->blocks;
	double skip, srv;
	uint64_t fwd0 = bc_forwarded(s), fputs0 = bc_stat(s, "remote.forwarded_puts");
	uint32_t ns;
	int64_t cleared;
	int rc;

	if (b->o.put_warmup == 0)
		return 0;
	desc.model = b->fwd_now ? "bench-cluster-warmup-fwd" : "bench-cluster-warmup";
	if ((rc = kvt_ns_register(s, &desc, &ns)) < 0)
		return rc;
	b->blocks = b->o.put_warmup < blocks ? b->o.put_warmup : blocks;
	rc = bc_phase(b, s, ns, true, &skip, &skip, &skip, &skip, NULL, &srv, NULL);
	b->blocks = blocks;
	if (rc < 0 || (rc = kvt_flush(s)) < 0)
		return rc;
	if (n > 1) { /* the copies the nodes forward (none with forwarding off) */
		unsigned copies = b->o.hot < n ? b->o.hot : n;
		uint64_t fputs = bc_stat(s, "remote.forwarded_puts") - fputs0;
		if (bc_fwd_wait(s, fwd0 + fputs * (copies - 1)) < 0)
			return -EIO;
	}
	if ((cleared = kvt_clear(s, ns)) < 0) {
		bench_err(BC_WHO, "clearing the warm-up's namespace: %s",
			  kvt_strerror((int)cleared));
		return (int)cleared;
	}
	return 0;
}

/* --hot-forward on / ab: an engine put phase with remote.hot_forward on,
 * its written-through puts answered, then the time until the nodes'
 * forwarded copies landed (the next phase does not overlap them). */
static int bc_fwd_phase(struct bc *b, unsigned n, struct bc_cell *c, uint64_t *fwd_base)
{
	struct kvt_store *s = NULL;
	uint64_t out0 = 0, out1 = 0;
	double skip, srv;
	uint32_t ns;
	int rc;

	b->fwd_now = true;
	rc = bc_store_open(b, n, &s, &ns);
	if (rc == 0)
		rc = bc_put_warmup(b, n, s);
	b->fwd_now = false;
	if (rc < 0)
		goto out;
	*fwd_base = bc_forwarded(s); /* the warm-up's copies landed */
	kvt_store_stat(s, "remote.bytes_out", &out0);
	if ((rc = bc_phase(b, s, ns, true, &c->fput_gbps, &c->fput_cpu_s, &skip, &skip, NULL,
			    &srv, NULL)) < 0 ||
	    (rc = kvt_flush(s)) < 0)
		goto out;
	kvt_store_stat(s, "remote.bytes_out", &out1);
	c->fput_wire_bytes = out1 - out0;
	*fwd_base += bc_expected_blocks(b, n) - b->blocks;
	c->fwd_lag_ms = n > 1 ? bc_fwd_wait(s, *fwd_base) : 0;
	if (c->fwd_lag_ms < 0)
		rc = -EIO;
out:
	kvt_store_destroy(s);
	return rc;
}

static int bc_cell(struct bc *b, unsigned n, struct bc_cell *c, bool direct_first)
{
	uint64_t fwd_base = 0;
	struct kvt_store *s = NULL;
	uint32_t ns;
	int rc;

	uint64_t out0 = 0, out1 = 0;
	double skip;

	memset(c, 0, sizeof(*c));
	if ((rc = bc_nodes_start(b, n)) < 0 || (rc = bc_store_open(b, n, &s, &ns)) < 0 ||
	    (rc = bc_put_warmup(b, n, s)) < 0)
		goto out;
	uint64_t skips0 = bc_stat(s, "store.put_local_skips");
	kvt_store_stat(s, "remote.bytes_out", &out0);
	/* ab: the forwarded puts before the engine's in odd rounds, after
	 * them in even ones */
	if (b->o.fwd == BC_FWD_AB && direct_first && (rc = bc_fwd_phase(b, n, c, &fwd_base)) < 0)
		goto out;
	uint64_t sends0 = bc_stat(s, "remote.sends"), wk0 = bc_stat(s, "remote.wakeups");
	if ((direct_first && (rc = bc_direct_all(b, n, true, &c->dput_gbps, &c->dput_cpu_s, &skip,
						 &c->dput_srv_s, &c->dput_csw)) < 0) ||
	    (rc = bc_phase(b, s, ns, true, &c->put_gbps, &c->put_cpu_s, &c->put_io_cpu_s, &skip, NULL,
			    &c->put_srv_s, &c->put_csw)) < 0 ||
	    (!direct_first && (rc = bc_direct_all(b, n, true, &c->dput_gbps, &c->dput_cpu_s, &skip,
						  &c->dput_srv_s, &c->dput_csw)) < 0))
		goto out;
	c->put_sends = bc_stat(s, "remote.sends") - sends0;
	c->put_wakeups = bc_stat(s, "remote.wakeups") - wk0;
	kvt_store_stat(s, "remote.bytes_out", &out1);
	c->put_wire_bytes = out1 - out0;
	c->put_skips = bc_stat(s, "store.put_local_skips") - skips0;
	/* The row claims the steady state: after the warm-up a put-only
	 * engine with put_local auto copies none of its puts (doc/remote.md). */
	bool auto_local = strcmp(b->o.put_local, "auto") == 0;
	for (unsigned i = 0; i < b->o.set_count; i++)
		if (strncmp(b->o.set[i], "remote.put_local=", 17) == 0)
			auto_local = strcmp(b->o.set[i] + 17, "auto") == 0;
	if (auto_local && b->o.put_warmup >= BC_WARMUP_STEADY && c->put_skips < b->blocks) {
		bench_err(BC_WHO,
			  "put_local auto copied %" PRIu64 " of %u puts after a warm-up of %u:"
			  " the put row is not the steady state",
			  b->blocks - c->put_skips, b->blocks, b->o.put_warmup);
		rc = -EIO;
		goto out;
	}
	if (b->o.fwd == BC_FWD_AB && !direct_first && (rc = bc_fwd_phase(b, n, c, &fwd_base)) < 0)
		goto out;
	if ((b->o.fwd == BC_FWD_ON || b->o.fwd == BC_FWD_AUTO) && n > 1) {
		/* the engine's own puts were forwarded: one copy less each */
		unsigned copies = b->o.hot < n ? b->o.hot : n;
		uint64_t want = bc_stat(s, "remote.forwarded_puts") * (copies - 1);
		if ((rc = kvt_flush(s)) < 0 || bc_fwd_wait(s, want) < 0) {
			rc = rc < 0 ? rc : -EIO;
			goto out;
		}
	}
	struct bc_blocks bl = { c->node_blocks, n };
	uint64_t sum = 0, want = bc_expected_blocks(b, n) + b->blocks;
	if (b->o.fwd == BC_FWD_AB)
		want += bc_expected_blocks(b, n);
	if ((rc = kvt_flush(s)) < 0 || (rc = kvt_remote_stats(s, "*", bc_blocks_stat, &bl)) < 0) {
		bench_err(BC_WHO, "the nodes' STATS: %s", kvt_strerror(rc));
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		sum += c->node_blocks[i];
	if (sum != want) {
		bench_err(BC_WHO,
			  "%u nodes hold %" PRIu64
			  " blocks, placement and the direct client sent %" PRIu64,
			  n, sum, want);
		rc = -EIO;
		goto out;
	}
	/* The shares reported are the engine's: less the direct client's
	 * blocks (and the forwarded puts', placed alike: half of the rest). */
	for (unsigned i = 0; i < b->blocks; i++)
		if (c->node_blocks[(i / b->o.group) % n] > 0)
			c->node_blocks[(i / b->o.group) % n]--;
	for (unsigned i = 0; b->o.fwd == BC_FWD_AB && i < n; i++)
		c->node_blocks[i] /= 2;
	kvt_store_destroy(s); /* the gets come from a cold engine: every one a remote hit */
	s = NULL;
	if ((rc = bc_store_open(b, n, &s, &ns)) < 0)
		goto out;
	sends0 = bc_stat(s, "remote.sends"), wk0 = bc_stat(s, "remote.wakeups");
	if ((direct_first && (rc = bc_direct_all(b, n, false, &c->dget_gbps, &c->dget_cpu_s,
					&c->dget_check_cpu_s, &c->dget_srv_s, &c->dget_csw)) < 0) ||
	    (rc = bc_phase(b, s, ns, false, &c->get_gbps, &c->get_cpu_s, &c->get_io_cpu_s,
			   &c->get_check_cpu_s, &c->local_hits, &c->get_srv_s, &c->get_csw)) < 0 ||
	    (!direct_first &&
	     (rc = bc_direct_all(b, n, false, &c->dget_gbps, &c->dget_cpu_s,
					&c->dget_check_cpu_s, &c->dget_srv_s, &c->dget_csw)) < 0))
		goto out;
	c->get_sends = bc_stat(s, "remote.sends") - sends0;
	c->get_wakeups = bc_stat(s, "remote.wakeups") - wk0;
	if ((rc = bc_prompt_loads(b, s, ns, n, c)) < 0)
		goto out;
out:
	kvt_store_destroy(s);
	int st = bc_nodes_stop(b);
	return rc < 0 ? rc : st;
}

/* ------------------------------------------------------------------------
 * The working set of one size.
 */
static void bc_set_free(struct bc *b)
{
	free(b->vals);
	free(b->crcs);
	b->crcs = NULL;
	free(b->keys);
	free(b->order);
	b->order = NULL;
	free(b->dst);
	b->vals = b->dst = NULL;
	b->keys = NULL;
}

static int bc_set_make(struct bc *b, uint64_t size)
{
	unsigned pb = b->o.prompt_blocks;
	uint64_t w = b->o.bytes / size;
	uint32_t tokens[BC_BLOCK_TOKENS * 1024];

	w = w < pb ? pb : w / pb * pb; /* whole prompts, at least one */
	if (w > UINT32_MAX / 2) {
		bench_err(BC_WHO, "--bytes over --sizes is too many blocks");
		return -EINVAL;
	}
	b->size = size;
	b->blocks = (unsigned)w;
	b->vals = malloc(w * size);
	b->crcs = malloc(w * sizeof(*b->crcs));
	b->keys = calloc(w, sizeof(*b->keys));
	b->order = malloc(w * sizeof(*b->order));
	b->dst = malloc((uint64_t)b->o.inflight * size);
	if (!b->vals || !b->crcs || !b->keys || !b->order || !b->dst) {
		bench_err(BC_WHO, "out of memory for %" PRIu64 " blocks of %" PRIu64 " bytes", w,
			  size);
		return -ENOMEM;
	}
	bc_fault_in(b->dst, (uint64_t)b->o.inflight * size);
	/* The order of the engine's phases: by default round-robin over the
	 * groups (block 0 of every group, then block 1 of every group...),
	 * so that the blocks in flight at any time belong to --inflight
	 * different groups, which placement spreads over the nodes, as the
	 * direct client's threads (one set per node, working side by side)
	 * spread theirs: an engine serving several prompts at once.  With
	 * --order seq the window is --inflight consecutive blocks, mostly of
	 * one group and so on one node at a time (3 nodes cannot then beat
	 * one). */
	{
		unsigned groups = (unsigned)((w + b->o.group - 1) / b->o.group), j = 0;
		if (b->o.seq)
			for (unsigned i = 0; i < w; i++)
				b->order[j++] = i;
		else
			for (unsigned r = 0; r < b->o.group; r++)
				for (unsigned g = 0; g < groups; g++)
					if ((uint64_t)g * b->o.group + r < w)
						b->order[j++] = g * b->o.group + r;
	}
	for (uint64_t i = 0; i < w; i++) {
		bench_fill(b->vals + i * size, size, bench_seed(size, i));
		b->crcs[i] = kvt_crc32c(0, b->vals + i * size, size);
	}
	for (uint64_t p = 0; p < w / pb; p++) {
		uint64_t x = bench_seed(size, UINT64_C(1) << 40 | p);
		for (unsigned t = 0; t < pb * BC_BLOCK_TOKENS; t++)
			tokens[t] = (uint32_t)bench_xorshift(&x) % 128000;
		int64_t k = kvt_key_chain_prompt(b->ns_digest, tokens, (size_t)pb * BC_BLOCK_TOKENS,
						 BC_BLOCK_TOKENS, 0, NULL, 0, &b->keys[p * pb], pb);
		if (k != pb) {
			bench_err(BC_WHO, "kvt_key_chain_prompt: %s", kvt_strerror((int)k));
			return k < 0 ? (int)k : -EIO;
		}
	}
	return 0;
}

/* The p-th percentile (nearest rank) of v[0..n), sorted here; -1 if none. */
static double bc_pct(double *v, unsigned n, double p)
{
	if (n == 0)
		return -1;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	unsigned i = (unsigned)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

/* ------------------------------------------------------------------------
 * Report: one line (or row) per op and node count, medians of the rounds.
 */
/* --hot-forward ab: the forwarded puts of every round against the direct
 * client's and the engine's own (hot replicas sent by the engine), each
 * per round, measured side by side. */
static void bc_report_fwd(struct bc *b, unsigned ni, struct bc_cell cells[][BC_NODES_MAX],
			  bool json)
{
	unsigned rounds = b->o.rounds;
	double f[BENCH_ROUNDS_MAX], fd[BENCH_ROUNDS_MAX], fo[BENCH_ROUNDS_MAX];
	double wf[BENCH_ROUNDS_MAX], lag[BENCH_ROUNDS_MAX], cpu[BENCH_ROUNDS_MAX];
	double gbytes = (double)b->blocks * (double)b->size / 1e9;
	double fdmin = 0, fdmax = 0, fomin = 0, fomax = 0;
	for (unsigned r = 0; r < rounds; r++) {
		const struct bc_cell *c = &cells[r][ni];
		f[r] = c->fput_gbps;
		fd[r] = c->fput_gbps / (c->dput_gbps > 0 ? c->dput_gbps : 1e-12);
		fo[r] = c->fput_gbps / (c->put_gbps > 0 ? c->put_gbps : 1e-12);
		wf[r] = (double)c->fput_wire_bytes / ((double)b->blocks * (double)b->size);
		lag[r] = c->fwd_lag_ms;
		cpu[r] = c->fput_cpu_s / gbytes;
		fdmin = r == 0 || fd[r] < fdmin ? fd[r] : fdmin;
		fdmax = r == 0 || fd[r] > fdmax ? fd[r] : fdmax;
		fomin = r == 0 || fo[r] < fomin ? fo[r] : fomin;
		fomax = r == 0 || fo[r] > fomax ? fo[r] : fomax;
	}
	if (json) {
		bench_json_num("fwd_gbps", bench_median(f, rounds), "%.3f");
		bench_json_num("fwd_ratio_direct_median_of_rounds", bench_median(fd, rounds), "%.4f");
		bench_json_num("fwd_ratio_direct_min", fdmin, "%.4f");
		bench_json_num("fwd_ratio_direct_max", fdmax, "%.4f");
		bench_json_num("fwd_vs_engine_median_of_rounds", bench_median(fo, rounds), "%.4f");
		bench_json_num("fwd_vs_engine_min", fomin, "%.4f");
		bench_json_num("fwd_vs_engine_max", fomax, "%.4f");
		bench_json_num("fwd_put_wire_measured", bench_median(wf, rounds), "%.4f");
		bench_json_num("fwd_copies_landed_ms", bench_median(lag, rounds), "%.1f");
		bench_json_num("fwd_cpu_s_per_gb", bench_median(cpu, rounds), "%.4f");
		bench_json_rounds("fwd_ratio_direct_rounds", fd, rounds);
		bench_json_rounds("fwd_vs_engine_rounds", fo, rounds);
		return;
	}
	printf("#   hot_forward on: %.3f GB/s, /direct per round median %.3f [%.3f..%.3f],"
	       " /engine (off) median %.3f [%.3f..%.3f], wire %.3f of the bytes put,"
	       " copies landed %.1f ms after the puts (median), engine CPU %.3f s per GB\n",
	       bench_median(f, rounds), bench_median(fd, rounds), fdmin, fdmax,
	       bench_median(fo, rounds), fomin, fomax, bench_median(wf, rounds),
	       bench_median(lag, rounds), bench_median(cpu, rounds));
}

static void bc_report(struct bc *b, bool put, unsigned ni, struct bc_cell cells[][BC_NODES_MAX],
		      const double *iperf)
{
	unsigned n = b->o.nodes[ni], rounds = b->o.rounds, one = UINT_MAX;
	double g[BENCH_ROUNDS_MAX], g1[BENCH_ROUNDS_MAX], d[BENCH_ROUNDS_MAX];
	double dr[BENCH_ROUNDS_MAX]; /* per round: engine / direct, measured next to each other */
	uint64_t bmin = UINT64_MAX, bmax = 0, hits = 0;

	for (unsigned i = 0; i < b->o.node_count; i++)
		one = b->o.nodes[i] == 1 ? i : one;
	for (unsigned r = 0; r < rounds; r++) {
		const struct bc_cell *c = &cells[r][ni];
		g[r] = put ? c->put_gbps : c->get_gbps;
		d[r] = put ? c->dput_gbps : c->dget_gbps;
		dr[r] = g[r] / (d[r] > 0 ? d[r] : 1e-12);
		g1[r] = one != UINT_MAX ? (put ? cells[r][one].put_gbps : cells[r][one].get_gbps) : 0;
		hits += c->local_hits;
		for (unsigned i = 0; i < n; i++) {
			bmin = c->node_blocks[i] < bmin ? c->node_blocks[i] : bmin;
			bmax = c->node_blocks[i] > bmax ? c->node_blocks[i] : bmax;
		}
	}
	double cpu[BENCH_ROUNDS_MAX], dcpu[BENCH_ROUNDS_MAX], iocpu[BENCH_ROUNDS_MAX];
	double srv[BENCH_ROUNDS_MAX], dsrv[BENCH_ROUNDS_MAX];
	double gbytes = (double)b->blocks * (double)b->size / 1e9;
	for (unsigned r = 0; r < rounds; r++) {
		const struct bc_cell *c = &cells[r][ni];
		/* less the bench's own byte checks (gets: a memcmp of each value) */
		cpu[r] = (put ? c->put_cpu_s : c->get_cpu_s - c->get_check_cpu_s) / gbytes;
		dcpu[r] = (put ? c->dput_cpu_s : c->dget_cpu_s - c->dget_check_cpu_s) / gbytes;
		iocpu[r] = (put ? c->put_io_cpu_s : c->get_io_cpu_s) / gbytes;
		srv[r] = (put ? c->put_srv_s : c->get_srv_s) / gbytes;
		dsrv[r] = (put ? c->dput_srv_s : c->dget_srv_s) / gbytes;
	}
	/* Per GB moved: context switches (engine, direct client), the
	 * engine's sendmsg calls and I/O-thread wake-ups. */
	double csw[BENCH_ROUNDS_MAX], dcsw[BENCH_ROUNDS_MAX], snd[BENCH_ROUNDS_MAX];
	double wak[BENCH_ROUNDS_MAX];
	for (unsigned r = 0; r < rounds; r++) {
		const struct bc_cell *c = &cells[r][ni];
		csw[r] = (double)(put ? c->put_csw : c->get_csw) / gbytes;
		dcsw[r] = (double)(put ? c->dput_csw : c->dget_csw) / gbytes;
		snd[r] = (double)(put ? c->put_sends : c->get_sends) / gbytes;
		wak[r] = (double)(put ? c->put_wakeups : c->get_wakeups) / gbytes;
	}
	double cswm = bench_median(csw, rounds), dcswm = bench_median(dcsw, rounds);
	double sndm = bench_median(snd, rounds), wakm = bench_median(wak, rounds);
	double srvm = bench_median(srv, rounds), dsrvm = bench_median(dsrv, rounds);
	double cpum = bench_median(cpu, rounds), dcpum = bench_median(dcpu, rounds);
	double iocpum = bench_median(iocpu, rounds);
	double gm = bench_median(g, rounds), im = bench_median(iperf, rounds);
	double dm = bench_median(d, rounds);
	/* Whole-prompt loads of every round, pooled (gets only). */
	double lat[BENCH_ROUNDS_MAX * BC_LAT_PROMPTS], dlat[BENCH_ROUNDS_MAX * BC_LAT_PROMPTS];
	unsigned nl = 0;
	for (unsigned r = 0; !put && r < rounds; r++)
		for (unsigned i = 0; i < cells[r][ni].nlat; i++, nl++) {
			lat[nl] = cells[r][ni].lat_ms[i];
			dlat[nl] = cells[r][ni].dlat_ms[i];
		}
	uint64_t lf = 0, dlf = 0, lcsw = 0, dlcsw = 0, lfr = 0, lrd = 0, lwk = 0;
	double lcpu = 0, dlcpu = 0;
	for (unsigned r = 0; !put && r < rounds; r++) {
		const struct bc_cell *c = &cells[r][ni];
		lf += c->lat_faults, dlf += c->dlat_faults, lcsw += c->lat_csw;
		dlcsw += c->dlat_csw, lfr += c->lat_frames, lrd += c->lat_reads;
		lwk += c->lat_wakeups;
		lcpu += c->lat_cpu_s, dlcpu += c->dlat_cpu_s;
	}
	double per = nl ? 1.0 / nl : 0;
	double l50 = bc_pct(lat, nl, 0.5), l99 = bc_pct(lat, nl, 0.99);
	double d50 = bc_pct(dlat, nl, 0.5), d99 = bc_pct(dlat, nl, 0.99);
	double g1m = one != UINT_MAX ? bench_median(g1, rounds) : -1;
	double placed = (double)bc_expected_blocks(b, n);
	/* The spread of the per-round ratios (engine / direct client, and N
	 * nodes / 1 node), each measured side by side in one round: on a
	 * shared machine the medians alone hide runs that differ 2x. */
	double drm = bench_median(dr, rounds), drmin = dr[0], drmax = dr[0];
	double n1[BENCH_ROUNDS_MAX], n1min = -1, n1max = -1;
	for (unsigned r = 0; r < rounds; r++) {
		drmin = dr[r] < drmin ? dr[r] : drmin;
		drmax = dr[r] > drmax ? dr[r] : drmax;
		n1[r] = g1[r] > 0 ? g[r] / g1[r] : -1;
		n1min = r == 0 || n1[r] < n1min ? n1[r] : n1min;
		n1max = r == 0 || n1[r] > n1max ? n1[r] : n1max;
	}
	if (b->o.json) {
		printf("{\"bench\":\"cluster.%s\",\"nodes\":%u,\"threads_per_node\":%u"
		       ",\"server_threads\":%u,\"value_bytes\":%" PRIu64 ",\"blocks\":%u"
		       ",\"inflight\":%u,\"order\":\"%s\",\"conns_per_node\":%u,\"conns_max\":%u"
		       ",\"put_local\":\"%s\",\"put_warmup\":%u,\"io_threads\":%u"
		       ",\"prompt_blocks\":%u,\"group\":%u"
		       ",\"hot_replicas\":%u,\"ssd_bytes\":%" PRIu64 ",\"gbps\":%.3f,\"per_node_gbps\":%.3f"
		       ",\"baseline\":\"iperf3\",\"baseline_gbps\":%.3f,\"ratio\":%.4f",
		       put ? "put" : "get", n, b->o.threads, n * b->o.threads, b->size, b->blocks,
		       b->o.inflight, b->o.seq ? "seq" : "groups", b->o.conns,
		       b->o.conns_max ? b->o.conns_max : b->o.conns, b->o.put_local,
		       b->o.put_warmup, b->o.io_threads, b->o.prompt_blocks, b->o.group,
		       b->o.hot < n ? b->o.hot : n, b->o.ssd, gm, gm / n, im,
		       gm / (im > 0 ? im : 1e-12));
		for (unsigned i = 0; i < b->o.set_count; i++)
			printf("%s\"%s\"%s", i ? "," : ",\"set\":[", b->o.set[i],
			       i + 1 == b->o.set_count ? "]" : "");
		printf(",\"direct\":\"bench net client%s\",\"direct_conns\":%u,\"direct_gbps\":%.3f"
		       ",\"ratio_direct\":%.4f",
		       b->o.direct_crc ? ", CRC32C checked" : "", n * b->o.conns, dm,
		       gm / (dm > 0 ? dm : 1e-12));
		/* CPU seconds of this process (engine or direct client, not the
		 * servers) per GB moved, less the bench's byte checks: holds
		 * better than GB/s on a loaded box. */
		printf(",\"cpu_s_per_gb\":%.4f,\"direct_cpu_s_per_gb\":%.4f"
		       ",\"io_threads_cpu_s_per_gb\":%.4f",
		       cpum, dcpum, iocpum);
		printf(",\"nodes_cpu_s_per_gb\":%.4f,\"direct_nodes_cpu_s_per_gb\":%.4f", srvm,
		       dsrvm);
		printf(",\"csw_per_gb\":%.1f,\"direct_csw_per_gb\":%.1f,\"sends_per_gb\":%.1f"
		       ",\"wakeups_per_gb\":%.1f",
		       cswm, dcswm, sndm, wakm);
		/* Puts: what the engine sent per block it put (hot replicas: the
		 * first group of a prompt once per replica), by placement and as
		 * measured (remote.bytes_out, frames and all, over the bytes put);
		 * the direct client 1. */
		if (put) {
			double wf[BENCH_ROUNDS_MAX];
			for (unsigned r = 0; r < rounds; r++)
				wf[r] = (double)cells[r][ni].put_wire_bytes /
					((double)b->blocks * (double)b->size);
			printf(",\"put_wire_factor\":%.4f,\"put_wire_measured\":%.4f",
			       placed / (double)b->blocks, bench_median(wf, rounds));
			for (unsigned r = 0; r < rounds; r++)
				wf[r] = (double)cells[r][ni].put_skips / (double)b->blocks;
			printf(",\"put_local_skipped\":%.4f", bench_median(wf, rounds));
			printf(",\"hot_forward\":\"%s\"",
			       b->o.fwd == BC_FWD_ON	 ? "on" :
			       b->o.fwd == BC_FWD_AB	 ? "ab" :
			       b->o.fwd == BC_FWD_AUTO ? "auto" :
							 "off");
			if (b->o.fwd == BC_FWD_AB)
				bc_report_fwd(b, ni, cells, true);
		}
		if (!put) {
			printf(",\"prompt_loads\":%u,\"prompt_load_p50_ms\":%.3f,\"prompt_load_p99_ms\":%.3f"
			       ",\"direct_prompt_load_p50_ms\":%.3f,\"direct_prompt_load_p99_ms\":%.3f",
			       nl, l50, l99, d50, d99);
			/* Per load, means: counts that hold under a loaded machine. */
			printf(",\"prompt_load_cpu_ms\":%.2f,\"direct_prompt_load_cpu_ms\":%.2f",
			       lcpu * per * 1e3, dlcpu * per * 1e3);
			printf(",\"prompt_load_faults\":%.1f,\"direct_prompt_load_faults\":%.1f"
			       ",\"prompt_load_csw\":%.1f,\"direct_prompt_load_csw\":%.1f"
			       ",\"prompt_load_frames\":%.1f,\"prompt_load_reads\":%.1f"
			       ",\"prompt_load_wakeups\":%.1f",
			       (double)lf * per, (double)dlf * per, (double)lcsw * per,
			       (double)dlcsw * per, (double)lfr * per, (double)lrd * per,
			       (double)lwk * per);
		}
		bench_json_num("nodes1_gbps", g1m, "%.3f");
		bench_json_num("ratio_nodes1", g1m > 0 ? gm / g1m : -1, "%.4f");
		printf(",\"node_blocks_min\":%" PRIu64 ",\"node_blocks_max\":%" PRIu64
		       ",\"node_share_min\":%.4f,\"node_share_max\":%.4f,\"blocks_placed\":%.0f"
		       ",\"local_hits\":%" PRIu64 ",\"rounds\":%u",
		       bmin, bmax, (double)bmin / placed, (double)bmax / placed, placed, hits, rounds);
		bench_json_rounds("gbps_rounds", g, rounds);
		bench_json_rounds("baseline_gbps_rounds", iperf, rounds);
		bench_json_rounds("direct_gbps_rounds", d, rounds);
		bench_json_rounds("ratio_direct_rounds", dr, rounds);
		bench_json_num("ratio_direct_median_of_rounds", drm, "%.4f");
		bench_json_num("ratio_direct_min", drmin, "%.4f");
		bench_json_num("ratio_direct_max", drmax, "%.4f");
		if (g1m > 0) {
			bench_json_rounds("ratio_nodes1_rounds", n1, rounds);
			bench_json_num("ratio_nodes1_min", n1min, "%.4f");
			bench_json_num("ratio_nodes1_max", n1max, "%.4f");
		}
		printf("}\n");
	} else {
		char sz[32], rel[32] = "-";
		if (g1m > 0)
			snprintf(rel, sizeof(rel), "%.3f", gm / g1m);
		printf("%-4s %-8s %5u %4u %8.3f %8.3f %8.3f %6.3f %8.3f %7.3f %8s %6.1f%%..%.1f%%\n",
		       put ? "put" : "get", bench_fmt_size(sz, sizeof(sz), b->size), n,
		       b->o.threads, gm, gm / n, im, gm / (im > 0 ? im : 1e-12), dm, drm, rel,
		       100.0 * (double)bmin / placed, 100.0 * (double)bmax / placed);
		printf("#   /direct per round: median %.3f, min %.3f, max %.3f (%u rounds)", drm,
		       drmin, drmax, rounds);
		if (g1m > 0 && n != 1)
			printf("; vs-1node per round: min %.3f, max %.3f", n1min, n1max);
		printf("\n");
		if (put && b->o.fwd == BC_FWD_AB)
			bc_report_fwd(b, ni, cells, false);
		printf("#   CPU per GB (this process, less the byte checks): engine %.3f s (its remote"
		       " I/O threads %.3f s),"
		       " direct %.3f s; the nodes' %.3f s with the engine, %.3f s with the direct"
		       " client\n",
		       cpum, iocpum, dcpum, srvm, dsrvm);
		printf("#   per GB: %.0f context switches (engine), %.0f (direct); the engine's %.0f"
		       " sendmsg calls, %.0f I/O-thread wake-ups\n",
		       cswm, dcswm, sndm, wakm);
		if (put) {
			double sk[BENCH_ROUNDS_MAX];
			for (unsigned r = 0; r < rounds; r++)
				sk[r] = (double)cells[r][ni].put_skips / (double)b->blocks;
			printf("#   puts without a local DRAM copy (store.put_local_skips): %.0f %%"
			       " (median of rounds)\n", 100.0 * bench_median(sk, rounds));
		}
		if (!put && nl)
			printf("#   %u-block prompt loads (%u): p50/p99 %.1f/%.1f ms, direct %.1f/%.1f ms;"
			       " per load: %.1f/%.1f CPU ms, %.0f/%.0f faults, %.0f/%.0f context"
			       " switches (engine/direct); the engine's %.0f frames, %.0f reads,"
			       " %.0f wake-ups\n",
			       b->o.prompt_blocks, nl, l50, l99, d50, d99, lcpu * per * 1e3,
			       dlcpu * per * 1e3, (double)lf * per, (double)dlf * per,
			       (double)lcsw * per, (double)dlcsw * per, (double)lfr * per,
			       (double)lrd * per, (double)lwk * per);
	}
	fflush(stdout);
}

/* Every round: iperf3, then each node count, the order reversed in odd
 * rounds so that neither count always runs first. */
static int bc_size(struct bc *b, uint64_t size)
{
	struct bc_cell cells[BENCH_ROUNDS_MAX][BC_NODES_MAX];
	double iperf[BENCH_ROUNDS_MAX];
	char out_path[PATH_MAX + 32];
	int rc;

	if ((rc = bc_set_make(b, size)) < 0)
		goto out;
	snprintf(out_path, sizeof(out_path), "%s/iperf3-client.json", b->run_dir);
	for (unsigned r = 0; r < b->o.rounds; r++) {
		if ((rc = bench_iperf3(b->o.iperf3, b->iperf_port, b->o.conns,
				       b->o.smoke ? "-n" : "-t", b->o.smoke ? "64M" : "2", out_path,
				       &iperf[r])) < 0)
			goto out;
		for (unsigned k = 0; k < b->o.node_count; k++) {
			unsigned ni = r % 2 ? b->o.node_count - 1 - k : k;
			if ((rc = bc_cell(b, b->o.nodes[ni], &cells[r][ni], r % 2 == 1)) < 0)
				goto out;
		}
	}
	for (unsigned op = 0; op < 2; op++)
		for (unsigned ni = 0; ni < b->o.node_count; ni++)
			bc_report(b, op == 0, ni, cells, iperf);
out:
	bc_set_free(b);
	return rc;
}

/* ------------------------------------------------------------------------
 * Command line.
 */
static void bc_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench cluster [options]\n"
		"\n"
		"A pod of kvtierd nodes as one engine sees it: for each node count N the\n"
		"bench starts N kvtierd on 127.0.0.1 (DRAM only), puts a working set of\n"
		"prompts through an engine's store (remote.addrs = the N nodes,\n"
		"KVT_F_PROMPT, written through), checks every node's share of the blocks,\n"
		"reads every block back through a cold engine and checks every byte.\n"
		"Reports aggregate and per-node GB/s, the ratio of N nodes to 1, and\n"
		"iperf3 over loopback in the same run.  Rounds alternate the node counts.\n"
		"In every cell the direct client of 'kvtier bench net' (the wire protocol,\n"
		"no library; --conns connections per node, one request in flight each)\n"
		"puts and gets the same number of blocks on the same nodes, before the\n"
		"engine in odd rounds and after it in even ones: /direct is the median\n"
		"of the per-round ratios (their min and max on the line below it).\n"
		"\n"
		"Options:\n"
		"  --smoke            32 blocks of 256K, 1 round: fields and bytes only\n"
		"  --json             JSON lines instead of a table\n"
		"  --heal             the healing suite instead (kvtier bench cluster --heal --help)\n"
		"  --nodes LIST       node counts (default 1,3; at most %u nodes)\n"
		"  --sizes LIST       block sizes (default 2M; e.g. 256K,2M)\n"
		"  --bytes SIZE       working set per size (default 512M; --smoke 8M)\n"
		"  --rounds N         rounds (default 3; --smoke 1)\n"
		"  --threads N        loop threads of each node (default 1)\n"
		"  --inflight N       requests in flight (default 8)\n"
		"  --conns N          engine connections per node, remote.conns (default 2)\n"
		"  --conns-max N      remote.conns_max (default: --conns, so that the\n"
		"                     engine and the direct client use as many)\n"
		"  --io-threads N     remote.io_threads: the engine's I/O threads per node\n"
		"                     (default 1; the direct client has --conns per node)\n"
		"  --put-local MODE   remote.put_local: auto (default, the library's), always or never\n"
		"  --put-warmup N     untimed puts (a namespace of their own, cleared\n"
		"                     after) through each engine store before its put\n"
		"                     phase, so the phase measures the steady state: a\n"
		"                     fresh store with put_local auto copies its first 16\n"
		"                     puts into local DRAM (default 32; 0: none)\n"
		"  --order ORDER      the engine's put and get phases submit blocks\n"
		"                     round-robin over the groups (groups, default: the\n"
		"                     blocks in flight are on several nodes, as the\n"
		"                     direct client's are) or 0, 1, 2... (seq)\n"
		"  --direct-crc       the direct client also checks each value it gets\n"
		"                     against its CRC32C, as the library does (the same CPU\n"
		"                     work; default: bytes only, as 'bench net' does)\n"
		"  --prompt-blocks N  blocks per prompt (default 32; --smoke 8)\n"
		"  --group N          remote.group (default 16; --smoke 4)\n"
		"  --hot-replicas N   remote.hot_replicas (default 2)\n"
		"  --hot-forward M    remote.hot_forward: auto (default: the nodes run as\n"
		"                     a static pod, --members, announce forwarding in\n"
		"                     HELLO, and forward the hot replicas; the engine\n"
		"                     waits for every node's HELLO before it puts), off\n"
		"                     (the nodes are no pod, the engine writes each\n"
		"                     replica), on (a pod, forwarding forced), or ab:\n"
		"                     off and on in every cell on the\n"
		"                     same nodes, the forwarded puts in a namespace of\n"
		"                     their own, before the engine's puts in odd rounds\n"
		"                     and after them in even ones, each waited for until\n"
		"                     the nodes' copies landed\n"
		"  --local-dram SIZE  the engine's own DRAM tier (default 64M)\n"
		"  --ssd SIZE         give each node an SSD tier (write-through) too\n"
		"  --dir DIR          run directory goes under DIR (default .)\n"
		"  --keep             leave the run directory (logs) behind\n"
		"  --set NAME=VALUE   a store option of the engine (kvt_store_set_option),\n"
		"                     after the bench's own (at most %u)\n"
		"  --kvtierd PATH     the server (default: next to kvtier in the build tree)\n"
		"  --iperf3 PATH      the reference (default: iperf3 on PATH)\n"
		"\n"
		"Exit: 0 ran, 1 failure (a node that does not start or stop, a miss,\n"
		"wrong bytes, blocks missing on the nodes), 2 usage, 77 iperf3 not\n"
		"installed.  kvtier-bench(1).\n",
		BC_NODES_MAX, BC_SET_MAX);
}

/* "1,3" or "256K,2M" into out[0..max): the count, or -1. */
static int bc_parse_list(const char *s, uint64_t *out, unsigned max, bool sizes)
{
	char buf[256];
	unsigned n = 0;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		if (n == max)
			return -1;
		if (sizes) {
			if (bench_parse_size(t, &out[n]) < 0 || out[n] < 4096 || out[n] > 64 * BC_MIB)
				return -1;
		} else {
			out[n] = strtoull(t, &end, 10);
			if (*end || out[n] < 1 || out[n] > BC_NODES_MAX)
				return -1;
		}
		n++;
	}
	return n ? (int)n : -1;
}

int bench_cluster_main(int argc, char **argv)
{
	/* --heal: the healing suite (bench_heal.c). */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--heal") == 0)
			return bench_heal_main(argc, argv);

	static const struct option lo[] = {
		{ "smoke", no_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "nodes", required_argument, NULL, 'n' }, { "sizes", required_argument, NULL, 'z' },
		{ "bytes", required_argument, NULL, 'b' }, { "rounds", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 'T' },
		{ "inflight", required_argument, NULL, 'i' }, { "conns", required_argument, NULL, 'c' },
		{ "prompt-blocks", required_argument, NULL, 'p' },
		{ "group", required_argument, NULL, 'g' },
		{ "hot-replicas", required_argument, NULL, 'H' },
		{ "hot-forward", required_argument, NULL, 'W' },
		{ "conns-max", required_argument, NULL, 'C' },
		{ "put-local", required_argument, NULL, 'P' },
		{ "direct-crc", no_argument, NULL, 'R' },
		{ "io-threads", required_argument, NULL, 'Y' },
		{ "put-warmup", required_argument, NULL, 'U' },
		{ "order", required_argument, NULL, 'O' },
		{ "local-dram", required_argument, NULL, 'L' }, { "ssd", required_argument, NULL, 'S' },
		{ "dir", required_argument, NULL, 'd' }, { "keep", no_argument, NULL, 'k' },
		{ "set", required_argument, NULL, 'E' },
		{ "kvtierd", required_argument, NULL, 'K' }, { "iperf3", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	static char kvtierd[PATH_MAX], iperf[PATH_MAX];
	struct bc *b = calloc(1, sizeof(*b));
	const char *p_iperf = "iperf3", *nodes = "1,3", *sizes = NULL;
	int rounds = -1, pb = -1, group = -1, ch, rc = BENCH_EXIT_OK;
	uint64_t list[BC_NODES_MAX], bytes = 0;
	struct sigaction old[3];

	if (!b) {
		bench_err(BC_WHO, "out of memory");
		return BENCH_EXIT_FAIL;
	}
	b->o = (struct bc_opts){ .dir = ".", .threads = 1, .inflight = 8, .conns = 2, .hot = 2,
				 .fwd = BC_FWD_AUTO,
				 .local_dram = 64 * BC_MIB, .put_local = "auto",
				 .io_threads = 1, .put_warmup = BC_WARMUP_STEADY };
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int v = optarg ? atoi(optarg) : 0;
		switch (ch) {
		case 's': b->o.smoke = true; break;
		case 'j': b->o.json = true; break;
		case 'R': b->o.direct_crc = true; break;
		case 'Y':
			if (v < 1 || v > 8)
				goto usage;
			b->o.io_threads = (unsigned)v;
			break;
		case 'U':
			if (v < 0 || (v == 0 && strcmp(optarg, "0") != 0))
				goto usage;
			b->o.put_warmup = (unsigned)v;
			break;
		case 'n': nodes = optarg; break;
		case 'z': sizes = optarg; break;
		case 'b':
			if (bench_parse_size(optarg, &bytes) < 0 || bytes < BC_MIB)
				goto usage;
			break;
		case 'r': rounds = v; break;
		case 'T': b->o.threads = (unsigned)v; break;
		case 'i': b->o.inflight = (unsigned)v; break;
		case 'c': b->o.conns = (unsigned)v; break;
		case 'C':
			if (v < 1 || v > 64)
				goto usage;
			b->o.conns_max = (unsigned)v;
			break;
		case 'O':
			if (strcmp(optarg, "groups") != 0 && strcmp(optarg, "seq") != 0)
				goto usage;
			b->o.seq = strcmp(optarg, "seq") == 0;
			break;
		case 'P':
			if (strcmp(optarg, "always") != 0 && strcmp(optarg, "never") != 0 &&
			    strcmp(optarg, "auto") != 0)
				goto usage;
			b->o.put_local = optarg;
			break;
		case 'p': pb = v; break;
		case 'g': group = v; break;
		case 'H': b->o.hot = (unsigned)v; break;
		case 'W':
			if (strcmp(optarg, "off") == 0)
				b->o.fwd = BC_FWD_OFF;
			else if (strcmp(optarg, "on") == 0)
				b->o.fwd = BC_FWD_ON;
			else if (strcmp(optarg, "ab") == 0)
				b->o.fwd = BC_FWD_AB;
			else if (strcmp(optarg, "auto") == 0)
				b->o.fwd = BC_FWD_AUTO;
			else
				goto usage;
			break;
		case 'L':
			if (bench_parse_size(optarg, &b->o.local_dram) < 0)
				goto usage;
			break;
		case 'S':
			if (bench_parse_size(optarg, &b->o.ssd) < 0 || b->o.ssd < 64 * BC_MIB)
				goto usage;
			break;
		case 'd': b->o.dir = optarg; break;
		case 'k': b->o.keep = true; break;
		case 'E':
			if (b->o.set_count == BC_SET_MAX || !strchr(optarg, '=') ||
			    strchr(optarg, '=') == optarg || strlen(optarg) > 120 ||
			    strpbrk(optarg, "\"\\"))
				goto usage;
			b->o.set[b->o.set_count++] = optarg;
			break;
		case 'K': b->o.kvtierd = optarg; break;
		case 'I': p_iperf = optarg; break;
		case 'h':
			bc_usage(stdout);
			free(b);
			return BENCH_EXIT_OK;
		default:
			goto usage;
		}
	}
	if (optind < argc)
		goto usage;
	int nn = bc_parse_list(nodes, list, BC_NODES_MAX, false);
	for (int i = 0; i < nn; i++)
		b->o.nodes[i] = (unsigned)list[i];
	b->o.node_count = nn < 0 ? 0 : (unsigned)nn;
	int ns = bc_parse_list(sizes ? sizes : b->o.smoke ? "256K" : "2M", b->o.sizes,
			       BC_SIZES_MAX, true);
	b->o.size_count = ns < 0 ? 0 : (unsigned)ns;
	b->o.rounds = rounds < 0 ? (b->o.smoke ? 1 : 3) : (unsigned)rounds;
	b->o.prompt_blocks = pb < 0 ? (b->o.smoke ? 8 : 32) : (unsigned)pb;
	b->o.group = group < 0 ? (b->o.smoke ? 4 : 16) : (unsigned)group;
	b->o.bytes = bytes ? bytes : b->o.smoke ? 8 * BC_MIB : 512 * BC_MIB;
	if (!b->o.node_count || !b->o.size_count || b->o.rounds < 1 ||
	    b->o.rounds > BENCH_ROUNDS_MAX || b->o.threads < 1 || b->o.threads > 64 ||
	    b->o.inflight < 1 || b->o.inflight > BC_INFLIGHT_MAX || b->o.conns < 1 ||
	    b->o.conns > 64 || b->o.prompt_blocks < 1 || b->o.prompt_blocks > 1024 ||
	    b->o.group < 1 || b->o.group > 65536 || b->o.hot < 1 || b->o.hot > 8 ||
	    b->o.local_dram < 16 * BC_MIB)
		goto usage;

	if (b->o.kvtierd) {
		snprintf(kvtierd, sizeof(kvtierd), "%s", b->o.kvtierd);
	} else if (!bench_find_kvtierd(kvtierd, sizeof(kvtierd))) {
		bench_err(BC_WHO, "kvtierd not found next to this kvtier; give --kvtierd PATH");
		free(b);
		return BENCH_EXIT_FAIL;
	}
	if (access(kvtierd, X_OK) != 0) {
		bench_err(BC_WHO, "%s: %s", kvtierd, strerror(errno));
		free(b);
		return BENCH_EXIT_FAIL;
	}
	if (!bench_which(p_iperf, iperf, sizeof(iperf))) {
		bench_err(BC_WHO, "skipped: '%s' is not installed (Debian: iperf3)", p_iperf);
		free(b);
		return 77;
	}
	b->o.kvtierd = kvtierd;
	b->o.iperf3 = iperf;
	if (kvt_ns_digest(&bc_desc, b->ns_digest, NULL, 0) < 0) {
		bench_err(BC_WHO, "kvt_ns_digest failed");
		free(b);
		return BENCH_EXIT_FAIL;
	}
	snprintf(b->run_dir, sizeof(b->run_dir), "%s/kvtier-bench-cluster-XXXXXX", b->o.dir);
	if (!mkdtemp(b->run_dir)) {
		bench_err(BC_WHO, "mkdtemp %s: %s", b->run_dir, strerror(errno));
		free(b);
		return BENCH_EXIT_FAIL;
	}
	bench_signals_catch(old);
	char iperf_log[PATH_MAX + 32];
	snprintf(iperf_log, sizeof(iperf_log), "%s/iperf3-server.log", b->run_dir);
	if (bench_iperf3_start(b->o.iperf3, iperf_log, &b->iperf_pid, &b->iperf_port) < 0) {
		bench_err(BC_WHO, "could not start iperf3 -s; log %s", iperf_log);
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	if (!b->o.json) {
		printf("# kvtier bench cluster: loopback, %u loop thread(s) per node, %u round(s), "
		       "%u in flight (order %s), put_local %s (warm-up %u puts),"
		       " engine I/O threads %u per node,"
		       " hot replicas %u%s, kvtierd %s\n"
		       "%-4s %-8s %5s %4s %8s %8s %8s %6s %8s %7s %8s %s\n",
		       b->o.threads, b->o.rounds, b->o.inflight, b->o.seq ? "seq" : "groups",
		       b->o.put_local, b->o.put_warmup, b->o.io_threads, b->o.hot,
		       b->o.direct_crc ? ", the direct client checks CRC32C" : "", kvtierd, "op",
		       "size", "nodes",
		       "thr", "GB/s", "per-node", "iperf3", "ratio", "direct", "/direct", "vs-1node",
		       "node share");
		fflush(stdout);
	}
	for (unsigned i = 0; i < b->o.size_count && rc == BENCH_EXIT_OK; i++)
		if (bc_size(b, b->o.sizes[i]) < 0)
			rc = BENCH_EXIT_FAIL;
out:
	bc_nodes_stop(b);
	if (b->iperf_pid > 0)
		bench_stop(b->iperf_pid);
	if (!b->o.keep && rc == BENCH_EXIT_OK)
		bench_rm_tree(b->run_dir);
	else
		bench_err(BC_WHO, "run directory (logs) kept: %s", b->run_dir);
	bench_signals_restore(old);
	free(b);
	return rc;
usage:
	fprintf(stderr, "kvtier bench cluster: bad option or value%s%s\n",
		optind > 0 && optind <= argc ? " near " : "",
		optind > 0 && optind <= argc ? argv[optind - 1] : "");
	fprintf(stderr, "Run 'kvtier bench cluster --help'.\n");
	free(b);
	return BENCH_EXIT_USAGE;
}

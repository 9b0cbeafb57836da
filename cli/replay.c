/*
 * replay.c - "kvtier replay TRACE": replay a request trace against a store
 * the way an inference engine would, and report what the tiers did.
 *
 * Owns the command line of "kvtier replay", the replay driver and the
 * report (a table, or JSON lines with --json).  Reaches the library only
 * through include/kvtier.h; the trace reader lives in cli/trace.c, the
 * profiles and the what-if model in cli/profiles.c.
 *
 * One request of the trace, replayed (the numbers are the code's steps):
 *
 *   hash_ids  [ 7][ 8][ 9][31][32]      prefix-chained ids of 512-token blocks
 *   (1) keys  k0 = chain(ns, -, 7), k1 = chain(ns, k0, 8), ...
 *   (2) lookup_prefix(k0..k4) -> 3 leading blocks present (tiers[] says where)
 *   (3) get k0..k2, each checked byte for byte against fill(k)
 *   (4) put k3, k4 with fill(k)          (what an engine computes and saves)
 *
 * Values are value_len = bytes_per_token x 512 bytes, filled with bytes
 * derived from the key (replay_fill), so a wrong byte anywhere -- another
 * key's value, a stale or torn one -- is caught: the replay stops and exits
 * 1.  A block whose lookup hit but whose get missed (evicted in between by
 * this request's own promotions) is counted as lost and ends the hit prefix.
 *
 * Invariant: every byte a get returned was verified before it counted as a
 * hit.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kvtier.h"

#include "../bench/bench.h"
#include "replay.h"
#include "progress.h"
#include "tlsopt.h"

#define RP_SWEEP_MAX 16
#define RP_DEFAULT_DRAM (UINT64_C(1) << 30)
#define RP_FILL_FRAC 0.8 /* default bytes/token: the working set fills this much */
#define RP_CHUNK_MIN 4096 /* dram.chunk's least: a smaller value still takes one */
#define RP_SYNTH_DEFAULT 2000u
/* dram.hash_seed of every replay: "kvtier" in ASCII, not chosen by its figure */
#define REPLAY_HASH_SEED "118156503377266"
#define REPLAY_FLUSH_WAIT_MS "60000" /* dram.victim_wait_ms with --flush-each: its maximum */

struct replay_opts {
	const char *trace_path;     /* NULL with synth */
	uint32_t synth;             /* > 0: a synthetic trace of this many requests */
	uint64_t synth_seed;
	const char *synth_write;    /* write the synthetic trace here */
	const struct rp_model *model;
	const struct rp_gpu *gpu;
	double prefill_tok_s;       /* > 0 overrides the FLOPs model */
	uint64_t bytes_per_token;   /* 0: pick */
	uint64_t dram[RP_SWEEP_MAX], ssd[RP_SWEEP_MAX];
	unsigned n_dram, n_ssd;     /* > 1 in either: sweep */
	const char *dir;            /* parent of the run directory */
	const char *admission;      /* ssd.admission or NULL */
	const char *policy;         /* dram.policy or NULL */
	const char *server;         /* remote.addr: a kvtierd below the local tiers */
	uint64_t server_cap;        /* --server-capacity: its bytes, counted in the optimum */
	const char *tenant;         /* remote.tenant */
	const char *secret_file;    /* remote.secret_file */
	struct cli_tls tls;         /* --tls*: remote.tls* */
	const char *plot;           /* --plot FILE: an SVG chart */
	const char *hit_log;        /* --hit-log FILE: per-request hits (one run) */
	bool retain_oracle;         /* --retain-oracle: KVT_F_RETAIN from the future */
	bool retain_all;            /* --retain-all: the namespace KVT_NS_RETAIN */
	double speed;               /* 0: as fast as possible */
	uint64_t limit;             /* replay the first N requests (0: all) */
	uint32_t block_tokens;      /* --block-tokens: the trace's (0: found) */
	const char *ts_unit;        /* --time-unit: ms or s (NULL: found) */
	const char *set[16];        /* --set NAME=VALUE: store options, applied last */
	unsigned n_set;
	bool json, flush_each, keep, progress;
};

/* What one replay measured. */
struct replay_result {
	uint64_t dram_cap, ssd_cap;
	uint64_t requests, blocks, tokens;
	uint64_t hit_blocks, hit_tokens;
	uint64_t tier_hits[KVT_TIER_COUNT];   /* hit blocks by the tier lookup named */
	uint64_t tier_tokens[KVT_TIER_COUNT];
	uint64_t lost;                        /* lookup hit, get missed */
	uint64_t puts, put_exists, put_errors;
	uint64_t gets, verified_bytes;
	double wall_s, lag_max_s;
	double get_p50_s, get_p99_s, get_max_s;
	double put_p50_s, put_p99_s, put_max_s; /* kvt_put alone (not --flush-each's flush) */
	/* store statistics, read at the end (0 where a tier is absent) */
	uint64_t dram_put_bytes, dram_get_bytes, dram_evictions;
	uint64_t put_local_skips, lookup_rounds; /* store.* (remote.put_local=auto, lookups) */
	uint64_t ssd_wd_bytes, ssd_wd_blocks, ssd_wd_shed, ssd_read_bytes, ssd_reads,
		ssd_evicted;
	uint64_t victim_wd, victim_filtered; /* DRAM evictions written down, or not (policy) */
	/* blocks held, averaged over the requests (sampled after each): what the
	 * tiers' bytes really hold, against capacity / value size */
	double dram_blocks_avg, ssd_blocks_avg;
	double dram_leaving_avg, dram_used_avg, ssd_segments_avg; /* bytes on their way down; slots in use */
	/* the SSD's bytes, averaged as above (doc/ssd.md "Where the bytes go"):
	 * records in the slots (live or dead), live records, live values */
	double ssd_log_bytes_avg, ssd_live_bytes_avg, ssd_value_bytes_avg;
	/* DRAM's value bytes a lower tier holds too, and of them first reads'
	 * cold copies (dram.on_lower_bytes, dram.cold_bytes), averaged as above */
	double dram_lower_bytes_avg, dram_cold_bytes_avg;
	uint64_t ssd_capacity; /* ssd.capacity_bytes: the whole segments held */
	uint64_t full_samples; /* requests sampled: from the first SSD segment eviction on
				* (DRAM only: the first DRAM eviction), so warm-up is not averaged */
	/* per request, for the what-if model (requests entries) */
	uint64_t *req_dram_tokens, *req_ssd_tokens; /* SSD: and the shared tier */
	uint64_t *req_remote_tokens;                 /* kvtierd's (--server) */
	uint64_t *req_dram_lead; /* leading hit tokens before the first non-DRAM one */
	/* the offline optimum at DRAM + SSD capacity (optimum.c), set by replay_main */
	struct rp_optimum opt;
};

static void replay_result_free(struct replay_result *r)
{
	free(r->req_dram_tokens);
	free(r->req_ssd_tokens);
	free(r->req_remote_tokens);
	free(r->req_dram_lead);
	r->req_dram_tokens = r->req_ssd_tokens = r->req_remote_tokens = r->req_dram_lead = NULL;
}

/* ------------------------------------------------------------------------
 * Values derived from keys
 */

static uint64_t replay_seed(const struct kvt_key *k)
{
	uint64_t s;
	memcpy(&s, k->bytes, sizeof s);
	return s | 1;
}

/* Word j of a value: a mix of the key's seed and j (so a moved word fails). */
static inline uint64_t replay_word(uint64_t seed, uint64_t j)
{
	uint64_t w = (seed + j) * UINT64_C(0x9e3779b97f4a7c15);
	return w ^ (w >> 29);
}

static void replay_fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t *w = (uint64_t *)(void *)p; /* p is 4 KiB aligned, len a multiple of 8 */
	for (size_t j = 0; j < len / 8; j++)
		w[j] = replay_word(seed, j);
}

/* Index of the first wrong byte, or len. */
static size_t replay_check(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t j = 0; j < len / 8; j++) {
		if (w[j] != replay_word(seed, j)) {
			uint64_t want = replay_word(seed, j);
			const uint8_t *a = (const uint8_t *)&w[j], *b = (const uint8_t *)&want;
			size_t k = 0;
			while (a[k] == b[k])
				k++;
			return j * 8 + k;
		}
	}
	return len;
}

/* ------------------------------------------------------------------------
 * Small helpers
 */

static double replay_now(void)
{
	return bench_now();
}

static int replay_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

static void replay_rmtree(const char *dir)
{
	nftw(dir, replay_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *replay_fmt_size(char *buf, size_t len, uint64_t v)
{
	return bench_fmt_size(buf, len, v);
}

static uint64_t replay_stat(struct kvt_store *st, const char *name)
{
	uint64_t v = 0;
	if (kvt_store_stat(st, name, &v) != KVT_OK)
		return 0;
	return v;
}

/* --hit-log FILE (a diagnostic, bench/ssd_lost.py): one line per request
 * "q got n_ids tiers" (a tier letter per hit block: D dram, S ssd, R
 * remote, H shared), then every store statistic as "# name value".  A
 * sweep writes the last of its runs. */
static void replay_hitlog_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	if (str == NULL)
		fprintf(ctx, "# %s %" PRIu64 "\n", name, value);
}

/* Latency samples in ns. */
struct replay_lat {
	uint64_t *ns;
	size_t n, cap;
};

static bool replay_lat_add(struct replay_lat *l, double s)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		uint64_t *p = realloc(l->ns, cap * sizeof *p);
		if (p == NULL)
			return false;
		l->ns = p;
		l->cap = cap;
	}
	l->ns[l->n++] = (uint64_t)(s * 1e9);
	return true;
}

static int replay_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Median, 99th percentile and maximum of the samples, in seconds. */
static void replay_lat_pct(struct replay_lat *l, double *p50, double *p99, double *max)
{
	if (l->n == 0)
		return;
	qsort(l->ns, l->n, sizeof *l->ns, replay_cmp_u64);
	*p50 = (double)l->ns[(l->n - 1) / 2] / 1e9;
	*p99 = (double)l->ns[(size_t)((double)(l->n - 1) * 0.99)] / 1e9;
	*max = (double)l->ns[l->n - 1] / 1e9;
}

/* Largest power of two dividing v, within the DRAM chunk's bounds. */
static uint64_t replay_chunk(uint64_t value_len)
{
	uint64_t c = value_len & (~value_len + 1);
	if (c > (UINT64_C(2) << 20))
		c = UINT64_C(2) << 20;
	if (c < RP_CHUNK_MIN)
		c = RP_CHUNK_MIN;
	return c;
}

/* DRAM bytes one value of value_len takes: whole chunks (replay_chunk's). */
static uint64_t replay_footprint(uint64_t value_len)
{
	uint64_t c = replay_chunk(value_len);
	return (value_len + c - 1) / c * c;
}

static uint64_t replay_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

/* The default bytes per token's step for blocks of block_tokens: a
 * multiple of 8 that makes every value a whole number of DRAM's smallest
 * chunks (8 at 512 tokens a block, 256 at 16), so that no value wastes
 * DRAM: a 512-byte value takes a 4 KiB chunk, and DRAM would hold an
 * eighth of the blocks its bytes say (doc/policies.md "Small blocks"). */
static uint64_t replay_bpt_step(uint64_t block_tokens)
{
	uint64_t need = RP_CHUNK_MIN / replay_gcd(block_tokens, RP_CHUNK_MIN);
	return need / replay_gcd(need, 8) * 8;
}

/* SSD segment for a tier of cap bytes: about 16 segments, a multiple of
 * 4 KiB (ssd.segment's unit), at least 1 MiB and 4 values, at most 256 MiB
 * (unless 4 values need more).  Of the segment counts within a quarter of
 * the fewest segments no larger than cap/16, the nearest one that divides
 * cap into whole 4 KiB pages is taken: the tier then holds every byte
 * asked.  Else that count's segment, cap/n rounded down to 4 KiB, leaves
 * less than 4 KiB per segment out.  Whole MiB (until 2026-12-05) left up
 * to 1/128 out: 0.53 % of a 128.69 MiB tier (16 x 8 MiB), so DRAM+SSD
 * held fewer bytes than the LRU it is compared with (doc/ssd.md, "Where
 * the bytes go"). */
static uint64_t replay_segment(uint64_t cap, uint64_t value_len)
{
	const uint64_t pg = 4096, max = UINT64_C(256) << 20;
	uint64_t min = bench_align_up(4 * (value_len + 8192), pg);
	uint64_t hi, want, n0, pages = cap / pg;

	if (min < (UINT64_C(1) << 20))
		min = UINT64_C(1) << 20;
	if (cap / min < 2)
		return min; /* under two segments: the open refuses it, says so */
	hi = max < min ? min : max;
	want = cap / 16 < min ? min : cap / 16 > hi ? hi : cap / 16;
	n0 = (cap + want - 1) / want;
	if (cap / n0 < min)
		n0--; /* cap / min >= 2, so n0 >= 2 */
	for (uint64_t d = 0; cap % pg == 0 && d <= n0 / 4; d++) {
		for (int up = 0; up < 2; up++) {
			uint64_t n = up ? n0 + d : n0 - d, sz;
			if (n < 2 || pages % n)
				continue;
			sz = pages / n * pg;
			if (sz >= min && sz <= hi)
				return sz;
		}
	}
	return cap / n0 / pg * pg;
}

/* ------------------------------------------------------------------------
 * One replay
 */

struct replay_run {
	const struct replay_opts *o;
	const struct rp_trace *t;
	uint64_t value_len;
	uint64_t dram_cap, ssd_cap;
	bool quiet; /* no progress bar (sweep points) */
};

static int replay_open(const struct replay_run *run, const char *dir, struct kvt_store **out,
		       uint32_t *ns, uint8_t digest[32], char *err, size_t err_len)
{
	char v[64];
	struct kvt_store *st = NULL;
	int rc;

	if ((rc = kvt_store_create(&st)) < 0)
		goto fail;
#define RP_OPT(name, val)                                                          \
	do {                                                                       \
		if ((rc = kvt_store_set_option(st, name, val)) < 0) {              \
			snprintf(err, err_len, "option %s=%s: %s", name, val,        \
				 kvt_strerror(rc));                                  \
			goto fail_msg;                                               \
		}                                                                  \
	} while (0)
	snprintf(v, sizeof v, "%" PRIu64, run->dram_cap);
	RP_OPT("dram.capacity", v);
	snprintf(v, sizeof v, "%" PRIu64, replay_chunk(run->value_len));
	RP_OPT("dram.chunk", v);
	/* One shard: its capacity is the whole tier, so a sweep's DRAM size
	 * means what it says and no shard evicts early (kvtier.h). */
	RP_OPT("dram.shards", "1");
	/* A fixed hash secret: prefix-adapt samples keys and its ghost keeps
	 * them by hash, so with a random one the same trace gave 45.5-46.3 %
	 * (doc/policies.md "Reproducible replays"); --set may choose another. */
	RP_OPT("dram.hash_seed", REPLAY_HASH_SEED);
	if (run->o->policy != NULL)
		RP_OPT("dram.policy", run->o->policy);
	if (run->ssd_cap > 0) {
		RP_OPT("path", dir);
		snprintf(v, sizeof v, "%" PRIu64, run->ssd_cap);
		RP_OPT("ssd.capacity", v);
		snprintf(v, sizeof v, "%" PRIu64, replay_segment(run->ssd_cap, run->value_len));
		RP_OPT("ssd.segment", v);
		if (run->o->admission != NULL)
			RP_OPT("ssd.admission", run->o->admission);
		/* A throwaway store: no warm-restart write-down at close. */
		RP_OPT("ssd.close_writedown_ms", "0");
		/* --flush-each: a put or a promotion that waits for the disk
		 * waits until it is done, never sheds after the usual 20 ms --
		 * on a loaded machine that wait is the writer thread's
		 * scheduling, and a shed made the figure differ run to run
		 * (doc/policies.md "Twelfth pass"); --set may say otherwise. */
		if (run->o->flush_each)
			RP_OPT("dram.victim_wait_ms", REPLAY_FLUSH_WAIT_MS);
	}
	/* The hints go to the kvtierd too (PROTO_IF_RETAIN) where it announced
	 * the flag (auto, the default); --set may say otherwise. */
	if (run->o->server != NULL && (run->o->retain_oracle || run->o->retain_all))
		RP_OPT("remote.retain_hint", "auto");
	for (unsigned i = 0; i < run->o->n_set; i++) {
		char name[128];
		const char *eq = strchr(run->o->set[i], '=');
		size_t nl = (size_t)(eq - run->o->set[i]);
		if (nl >= sizeof name)
			nl = sizeof name - 1;
		memcpy(name, run->o->set[i], nl);
		name[nl] = '\0';
		RP_OPT(name, eq + 1);
	}
	if (run->o->server != NULL) {
		/* A list is a pod of kvtierd (doc/cluster.md). */
		RP_OPT(strchr(run->o->server, ',') ? "remote.addrs" : "remote.addr",
		       run->o->server);
		if (run->o->tenant != NULL)
			RP_OPT("remote.tenant", run->o->tenant);
		if (run->o->secret_file != NULL)
			RP_OPT("remote.secret_file", run->o->secret_file);
		const char *tkv[5][2];
		for (unsigned i = 0, n = cli_tls_kv(&run->o->tls, tkv); i < n; i++)
			RP_OPT(tkv[i][0], tkv[i][1]);
	}
#undef RP_OPT
	if ((rc = kvt_store_open(st)) < 0)
		goto fail;
	struct kvt_ns_desc desc = {
		.model = run->o->model->name, .dtype = "bf16", .layout = "kvtier-replay",
		.block_tokens = run->t->block_tokens, .tp_size = 1, .pp_size = 1,
		/* --retain-all: every put hinted, by the namespace's default
		 * (policy: the digest, so the keys, are the same). */
		.flags = run->o->retain_all ? KVT_NS_RETAIN : 0,
	};
	if ((rc = kvt_ns_register(st, &desc, ns)) < 0 || (rc = kvt_ns_digest(&desc, digest, NULL, 0)) < 0)
		goto fail;
	*out = st;
	return 0;
fail:
	snprintf(err, err_len, "opening the store: %s", kvt_strerror(rc));
fail_msg:
	kvt_store_destroy(st);
	return -1;
}

/* The chained key of each of r's blocks: a block's "tokens" are its hash
 * id's two 32-bit halves, chained on the previous block's key, so equal
 * hash-id prefixes give equal keys exactly as equal token prefixes would. */
static int replay_keys(const uint8_t digest[32], const struct rp_req *r, struct kvt_key *keys)
{
	for (uint32_t i = 0; i < r->n_ids; i++) {
		uint32_t tok[2] = { (uint32_t)r->ids[i], (uint32_t)(r->ids[i] >> 32) };
		int rc = kvt_key_chain(digest, i ? &keys[i - 1] : NULL, tok, 2, NULL, 0, &keys[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * --retain-oracle (an experiment, doc/policies.md "Fifth pass"): which
 * requests a later request starts with the same block -- what a router
 * that knows a document is shared could say with KVT_F_RETAIN.  later[q]
 * for q < count; NULL on no memory.
 */
static bool *replay_later_roots(const struct rp_trace *t, size_t count)
{
	struct rp_idset roots = { 0 };
	bool *later = calloc(count ? count : 1, sizeof *later);
	if (!later)
		return NULL;
	for (size_t q = count; q-- > 0;) {
		int r;
		if (t->reqs[q].n_ids == 0)
			continue;
		r = rp_idset_add(&roots, t->reqs[q].ids[0]);
		if (r < 0) {
			rp_idset_free(&roots);
			free(later);
			return NULL;
		}
		later[q] = r == 0;
	}
	rp_idset_free(&roots);
	return later;
}

/* kvt_put with KVT_F_RETAIN, through the request queue. */
static int replay_put_retain(struct kvt_queue *qh, uint32_t ns, const struct kvt_key *key,
			     const void *buf, uint64_t len)
{
	struct iovec v = { (void *)buf, len };
	struct kvt_req r, *rp = &r, *got;
	int rc;
	memset(&r, 0, sizeof r);
	r.op = KVT_OP_PUT;
	r.flags = KVT_F_RETAIN;
	r.ns = ns;
	r.key = *key;
	r.iov = &v;
	r.iov_count = 1;
	if ((rc = kvt_submit(qh, &rp, 1)) < 0)
		return rc;
	if ((rc = kvt_queue_wait(qh, &got, 1, -1)) < 0)
		return rc;
	return got->status;
}

static int replay_run_one(const struct replay_run *run, struct replay_result *res, char *err,
			  size_t err_len)
{
	const struct replay_opts *o = run->o;
	const struct rp_trace *t = run->t;
	size_t count = o->limit && o->limit < t->count ? o->limit : t->count;
	char dir[4096] = "";
	struct kvt_store *st = NULL;
	struct kvt_key *keys = NULL;
	uint8_t *buf = NULL, *tiers = NULL, digest[32];
	struct replay_lat get_lat = { 0 }, put_lat = { 0 };
	uint32_t ns;
	int ret = -1, rc;
	FILE *hitlog = run->o->hit_log ? fopen(run->o->hit_log, "w") : NULL;
	bool *later = NULL;
	struct kvt_queue *qh = NULL;

	memset(res, 0, sizeof *res);
	res->dram_cap = run->dram_cap;
	res->ssd_cap = run->ssd_cap;
	res->req_dram_tokens = calloc(count ? count : 1, sizeof(uint64_t));
	res->req_ssd_tokens = calloc(count ? count : 1, sizeof(uint64_t));
	res->req_remote_tokens = calloc(count ? count : 1, sizeof(uint64_t));
	res->req_dram_lead = calloc(count ? count : 1, sizeof(uint64_t));
	keys = calloc(RP_IDS_MAX, sizeof *keys);
	tiers = calloc(RP_IDS_MAX, 1);
	if (!res->req_dram_tokens || !res->req_ssd_tokens || !res->req_remote_tokens ||
	    !res->req_dram_lead || !keys || !tiers ||
	    posix_memalign((void **)&buf, 4096, run->value_len) != 0) {
		buf = NULL;
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	if (run->ssd_cap > 0) {
		snprintf(dir, sizeof dir, "%s/kvtier-replay.XXXXXX", o->dir);
		/* --dir itself is made if missing (not its parents: a typo in
		 * one is said, not built). */
		if ((mkdir(o->dir, 0700) < 0 && errno != EEXIST) || mkdtemp(dir) == NULL) {
			snprintf(err, err_len, "creating a run directory under %s: %s", o->dir,
				 strerror(errno));
			dir[0] = '\0';
			goto out;
		}
	}
	if (replay_open(run, dir, &st, &ns, digest, err, err_len) < 0)
		goto out;
	if (o->retain_oracle &&
	    (!(later = replay_later_roots(t, count)) || kvt_queue_create(st, &qh) < 0)) {
		snprintf(err, err_len, "--retain-oracle: out of memory");
		goto out;
	}

	double t0 = replay_now();
	uint64_t ts0 = count ? t->reqs[0].ts_ms : 0;
	struct cli_progress bar;
	cli_progress_start(&bar, "requests", o->progress && !run->quiet);
	for (size_t q = 0; q < count; q++) {
		const struct rp_req *r = &t->reqs[q];
		if (o->speed > 0) { /* arrival time, scaled */
			double due = t0 + (double)(r->ts_ms - (r->ts_ms > ts0 ? ts0 : r->ts_ms)) /
						  1000.0 / o->speed;
			double now = replay_now();
			if (due > now) {
				struct timespec ts = { (time_t)(due - now),
						       (long)((due - now - (double)(time_t)(due - now)) * 1e9) };
				nanosleep(&ts, NULL);
			} else if (now - due > res->lag_max_s) {
				res->lag_max_s = now - due;
			}
		}
		/* (1) keys */
		if ((rc = replay_keys(digest, r, keys)) < 0) {
			snprintf(err, err_len, "request %zu: key: %s", q + 1, kvt_strerror(rc));
			goto out;
		}
		/* (2) lookup */
		memset(tiers, 0, r->n_ids);
		int64_t h = kvt_lookup_prefix(st, ns, keys, r->n_ids, tiers);
		if (h < 0) {
			snprintf(err, err_len, "request %zu: lookup: %s", q + 1, kvt_strerror((int)h));
			goto out;
		}
		/* (3) get the hits, verify every byte */
		uint32_t got = 0;
		for (; got < (uint32_t)h; got++) {
			uint64_t vlen = 0;
			double g0 = replay_now();
			rc = kvt_get(st, ns, &keys[got], buf, run->value_len, &vlen);
			double g1 = replay_now();
			/* A read from below takes DRAM room for its copy and may
			 * send victims down, found or not: --flush-each waits
			 * for them too, or the next reads race their writes. */
			if (o->flush_each && run->ssd_cap > 0 && tiers[got] != KVT_TIER_DRAM) {
				int frc = kvt_flush(st);
				if (frc < 0) {
					snprintf(err, err_len, "flush: %s", kvt_strerror(frc));
					goto out;
				}
			}
			res->gets++;
			if (!replay_lat_add(&get_lat, g1 - g0)) {
				snprintf(err, err_len, "out of memory");
				goto out;
			}
			if (rc == KVT_MISS) {
				res->lost++;
				break;
			}
			if (rc != KVT_OK) {
				snprintf(err, err_len, "request %zu block %u: get: %s", q + 1, got,
					 kvt_strerror(rc));
				goto out;
			}
			size_t bad = vlen == run->value_len ? replay_check(buf, vlen, replay_seed(&keys[got]))
							    : 0;
			if (vlen != run->value_len || bad != vlen) {
				snprintf(err, err_len,
					 "request %zu block %u (hash id %" PRIu64 "): WRONG BYTES: "
					 "length %" PRIu64 " (want %" PRIu64 "), first bad byte at %zu",
					 q + 1, got, r->ids[got], vlen, run->value_len, bad);
				goto out;
			}
			res->verified_bytes += vlen;
			uint64_t tok = rp_block_tokens(r, got);
			int tier = tiers[got] < KVT_TIER_COUNT ? tiers[got] : KVT_TIER_NONE;
			res->tier_hits[tier]++;
			res->tier_tokens[tier] += tok;
			res->hit_blocks++;
			res->hit_tokens += tok;
			if (tier == KVT_TIER_DRAM)
				res->req_dram_tokens[q] += tok;
			else if (tier == KVT_TIER_REMOTE)
				res->req_remote_tokens[q] += tok;
			else
				res->req_ssd_tokens[q] += tok;
			/* Without the tiers below DRAM, the prefix would end at
			 * the first block that came from elsewhere. */
			if (res->req_ssd_tokens[q] == 0 && res->req_remote_tokens[q] == 0)
				res->req_dram_lead[q] = res->req_dram_tokens[q];
		}
		if (hitlog) {
			fprintf(hitlog, "%zu %u %u ", q, got, r->n_ids);
			for (uint32_t i = 0; i < got; i++)
				fputc("?DSRH"[tiers[i] <= KVT_TIER_SHARED ? tiers[i] : 0], hitlog);
			fputc('\n', hitlog);
		}
		/* (4) put what was missed */
		for (uint32_t i = got; i < r->n_ids; i++) {
			replay_fill(buf, run->value_len, replay_seed(&keys[i]));
			double p0 = replay_now();
			if (later && later[q])
				rc = replay_put_retain(qh, ns, &keys[i], buf, run->value_len);
			else
				rc = kvt_put(st, ns, &keys[i], &(struct iovec){ buf, run->value_len }, 1);
			if (!replay_lat_add(&put_lat, replay_now() - p0)) {
				snprintf(err, err_len, "out of memory");
				goto out;
			}
			if (rc == KVT_OK) {
				res->puts++;
			} else if (rc == KVT_EXISTS) {
				res->put_exists++;
			} else if (rc == KVT_ETOOBIG) {
				snprintf(err, err_len,
					 "a %" PRIu64 "-byte block is larger than the DRAM tier can "
					 "hold: lower --bytes-per-token or raise --dram",
					 run->value_len);
				goto out;
			} else if (rc < 0) {
				res->put_errors++;
			}
			/* One write-down at a time: none is shed, none pins
			 * DRAM when the next put needs room. */
			if (o->flush_each && run->ssd_cap > 0 && (rc = kvt_flush(st)) < 0) {
				snprintf(err, err_len, "flush: %s", kvt_strerror(rc));
				goto out;
			}
		}
		if (run->ssd_cap > 0 ? replay_stat(st, "ssd.segments_evicted") > 0
				     : replay_stat(st, "dram.evictions") > 0) {
			res->full_samples++;
			res->dram_blocks_avg += (double)replay_stat(st, "dram.blocks");
			res->dram_leaving_avg += (double)replay_stat(st, "dram.leaving_bytes");
			res->dram_used_avg += (double)replay_stat(st, "dram.used_bytes");
			res->ssd_blocks_avg += (double)replay_stat(st, "ssd.blocks");
			res->ssd_segments_avg += (double)replay_stat(st, "ssd.segments_used");
			res->ssd_log_bytes_avg += (double)replay_stat(st, "ssd.log_record_bytes");
			res->ssd_live_bytes_avg += (double)replay_stat(st, "ssd.live_record_bytes");
			res->ssd_value_bytes_avg += (double)replay_stat(st, "ssd.value_bytes");
			res->dram_lower_bytes_avg += (double)replay_stat(st, "dram.on_lower_bytes");
			res->dram_cold_bytes_avg += (double)replay_stat(st, "dram.cold_bytes");
		}
		res->requests++;
		res->blocks += r->n_ids;
		res->tokens += r->input_len;
		cli_progress_update(&bar, q + 1, count);
	}
	cli_progress_end(&bar);
	if ((rc = kvt_flush(st)) < 0) {
		snprintf(err, err_len, "flush: %s", kvt_strerror(rc));
		goto out;
	}
	res->wall_s = replay_now() - t0;
	if (res->full_samples > 0) {
		res->dram_blocks_avg /= (double)res->full_samples;
		res->dram_leaving_avg /= (double)res->full_samples;
		res->dram_used_avg /= (double)res->full_samples;
		res->ssd_blocks_avg /= (double)res->full_samples;
		res->ssd_segments_avg /= (double)res->full_samples;
		res->ssd_log_bytes_avg /= (double)res->full_samples;
		res->ssd_live_bytes_avg /= (double)res->full_samples;
		res->ssd_value_bytes_avg /= (double)res->full_samples;
		res->dram_lower_bytes_avg /= (double)res->full_samples;
		res->dram_cold_bytes_avg /= (double)res->full_samples;
	}
	res->ssd_capacity = replay_stat(st, "ssd.capacity_bytes");
	replay_lat_pct(&get_lat, &res->get_p50_s, &res->get_p99_s, &res->get_max_s);
	replay_lat_pct(&put_lat, &res->put_p50_s, &res->put_p99_s, &res->put_max_s);
	res->dram_put_bytes = replay_stat(st, "dram.put_bytes");
	res->dram_get_bytes = replay_stat(st, "dram.get_bytes");
	res->dram_evictions = replay_stat(st, "dram.evictions");
	res->put_local_skips = replay_stat(st, "store.put_local_skips");
	res->lookup_rounds = replay_stat(st, "store.lookup_rounds");
	res->ssd_wd_bytes = replay_stat(st, "ssd.writedown_bytes");
	res->ssd_wd_blocks = replay_stat(st, "ssd.writedown_blocks");
	/* Write-downs that never happened: shed by the SSD's queue, or DRAM
	 * victims shed under write pressure (doc/policies.md). */
	res->ssd_wd_shed = replay_stat(st, "ssd.writedown_shed") + replay_stat(st, "dram.victim_shed");
	res->victim_wd = replay_stat(st, "dram.victim_writedowns");
	res->victim_filtered = replay_stat(st, "dram.victim_filtered");
	res->ssd_read_bytes = replay_stat(st, "ssd.read_bytes");
	res->ssd_reads = replay_stat(st, "ssd.reads");
	res->ssd_evicted = replay_stat(st, "ssd.evicted_blocks");
	if (hitlog)
		kvt_store_stats(st, replay_hitlog_stat, hitlog);
	ret = 0;
out:
	free(later);
	if (hitlog)
		fclose(hitlog);
	if (st != NULL) {
		kvt_store_close(st);
		kvt_store_destroy(st);
	}
	if (dir[0] != '\0' && !o->keep)
		replay_rmtree(dir);
	else if (dir[0] != '\0')
		fprintf(stderr, "kvtier replay: kept the store directory %s\n", dir);
	free(get_lat.ns);
	free(put_lat.ns);
	free(buf);
	free(tiers);
	free(keys);
	if (ret < 0)
		replay_result_free(res);
	return ret;
}

/* ------------------------------------------------------------------------
 * The report
 */

static double replay_pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static double replay_frac(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* Print one JSON object as a line and free it. */
static void replay_json_line(json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s != NULL) {
		puts(s);
		free(s);
	}
	json_decref(obj);
}

struct replay_ctx {
	const struct replay_opts *o;
	const struct rp_trace *t;
	const char *trace_name;
	struct rp_ideal ideal;    /* over the requests replayed */
	uint64_t value_len, model_bpt, run_bpt;
	const char *bpt_why;
};

/* The ceiling: the offline optimum at this capacity and the unlimited ideal. */
static void replay_json_optimum(json_t *j, const struct replay_ctx *c, const struct replay_result *r)
{
	double hit = replay_frac(r->hit_blocks, r->blocks);
	double opt = replay_frac(r->opt.prefix_hits, r->opt.blocks);
	double ideal = replay_frac(c->ideal.hit_blocks, c->ideal.blocks);
	json_object_set_new(j, "optimum_capacity_blocks", json_integer((json_int_t)r->opt.capacity));
	json_object_set_new(j, "optimum_server_bytes", json_integer((json_int_t)c->o->server_cap));
	json_object_set_new(j, "optimum_block_hit_ratio", json_real(opt));
	json_object_set_new(j, "optimum_bound_block_hit_ratio",
			    json_real(replay_frac(r->opt.any_hits, r->opt.blocks)));
	json_object_set_new(j, "of_optimum", json_real(opt > 0 ? hit / opt : 0));
	json_object_set_new(j, "of_ideal", json_real(ideal > 0 ? hit / ideal : 0));
	json_object_set_new(j, "ssd_writedown_shed", json_integer((json_int_t)r->ssd_wd_shed));
	json_object_set_new(j, "victim_writedowns", json_integer((json_int_t)r->victim_wd));
	json_object_set_new(j, "victim_filtered", json_integer((json_int_t)r->victim_filtered));
}

static void replay_print_optimum(const struct replay_ctx *c, const struct replay_result *r)
{
	double hit = replay_frac(r->hit_blocks, r->blocks);
	double opt = replay_frac(r->opt.prefix_hits, r->opt.blocks);
	double ideal = replay_frac(c->ideal.hit_blocks, c->ideal.blocks);
	printf("optimum here          %7.2f %%                 offline, at DRAM+SSD%s = %" PRIu64
	       " blocks (Belady MIN with bypass, prefix hits)\n",
	       100.0 * opt, c->o->server_cap ? "+server" : "", r->opt.capacity);
	if (r->opt.any_hits != r->opt.prefix_hits)
		printf("optimum bound         %7.2f %%                 ids with several parents: the true "
		       "optimum lies between\n",
		       replay_pct(r->opt.any_hits, r->opt.blocks));
	printf("of optimum, ideal     %7.3f       %7.3f     hit ratio / optimum here, / ideal\n",
	       opt > 0 ? hit / opt : 0, ideal > 0 ? hit / ideal : 0);
}

static void replay_report_store(const struct replay_ctx *c, const struct replay_result *r)
{
	char a[32], b[32], v[32];
	printf("trace     %s%s: %" PRIu64 " requests, %" PRIu64 " blocks of %u tokens (%s), %"
	       PRIu64 " distinct, %" PRIu64 " prompt tokens; timestamps in %s\n",
	       c->trace_name, c->t->synthetic ? " (SYNTHETIC)" : "", r->requests, r->blocks,
	       c->t->block_tokens, c->t->block_why, c->ideal.unique_blocks, r->tokens,
	       c->t->ts_unit);
	if (r->dram_cap == 0) /* a sweep: the sizes are in its table */
		printf("store     embedded: DRAM and SSD sizes swept (below)%s%s",
		       c->o->admission ? ", SSD admission " : "", c->o->admission ? c->o->admission : "");
	else
		printf("store     embedded: DRAM %s", replay_fmt_size(a, sizeof a, r->dram_cap));
	if (r->ssd_cap && r->dram_cap)
		printf(", SSD %s (admission %s) under %s", replay_fmt_size(b, sizeof b, r->ssd_cap),
		       c->o->admission ? c->o->admission : "victim", c->o->dir);
	printf("; time %s\n", c->o->speed > 0 ? "scaled from the trace" : "as fast as possible");
	printf("values    %s: %" PRIu64 " B/token (%s per block); replayed at %" PRIu64
	       " B/token (%s per block), %s\n",
	       c->o->model->name, c->model_bpt,
	       replay_fmt_size(a, sizeof a, c->model_bpt * c->t->block_tokens), c->run_bpt,
	       replay_fmt_size(v, sizeof v, c->value_len), c->bpt_why);
	printf("          a last, partial block counts its real tokens and is stored at full size\n");
	uint64_t fp = replay_footprint(c->value_len);
	if (fp != c->value_len)
		printf("          each value takes %s of DRAM (whole chunks of at least 4 KiB): DRAM holds "
		       "%" PRIu64 " %% of the blocks its bytes would (a multiple of %" PRIu64
		       " B/token would not waste it)\n", replay_fmt_size(a, sizeof a, fp),
		       c->value_len * 100 / fp, replay_bpt_step(c->t->block_tokens));
}

static void replay_report(const struct replay_ctx *c, const struct replay_result *r,
			  const struct rp_whatif *w, int nw)
{
	const struct replay_opts *o = c->o;
	char a[32], b[32], d[32], e[32];
	if (o->json) {
		json_t *j = json_pack(
			"{s:s, s:s, s:b, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, s:f, s:f,"
			" s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"kind", "replay", "trace", c->trace_name, "synthetic", c->t->synthetic,
			"block_tokens", (json_int_t)c->t->block_tokens, "time_unit", c->t->ts_unit,
			"requests", (json_int_t)r->requests, "blocks", (json_int_t)r->blocks,
			"tokens", (json_int_t)r->tokens, "unique_blocks", (json_int_t)c->ideal.unique_blocks,
			"dram_bytes", (json_int_t)r->dram_cap, "ssd_bytes", (json_int_t)r->ssd_cap,
			"model", o->model->name, "model_bytes_per_token", (json_int_t)c->model_bpt,
			"bytes_per_token", (json_int_t)c->run_bpt, "value_bytes", (json_int_t)c->value_len,
			"block_hit_ratio", replay_frac(r->hit_blocks, r->blocks),
			"token_hit_ratio", replay_frac(r->hit_tokens, r->tokens),
			"ideal_block_hit_ratio", replay_frac(c->ideal.hit_blocks, c->ideal.blocks),
			"ideal_token_hit_ratio", replay_frac(c->ideal.hit_tokens, c->ideal.tokens),
			"hit_blocks", (json_int_t)r->hit_blocks, "hit_tokens", (json_int_t)r->hit_tokens,
			"dram_hits", (json_int_t)r->tier_hits[KVT_TIER_DRAM],
			"ssd_hits", (json_int_t)r->tier_hits[KVT_TIER_SSD],
			"remote_hits", (json_int_t)r->tier_hits[KVT_TIER_REMOTE],
			"lost", (json_int_t)r->lost, "puts", (json_int_t)r->puts,
			"put_exists", (json_int_t)r->put_exists, "put_errors", (json_int_t)r->put_errors,
			"gets", (json_int_t)r->gets);
		replay_json_optimum(j, c, r);
		json_object_set_new(j, "dram_value_footprint",
				    json_integer((json_int_t)replay_footprint(c->value_len)));
		json_object_set_new(j, "verified_bytes", json_integer((json_int_t)r->verified_bytes));
		json_object_set_new(j, "dram_put_bytes", json_integer((json_int_t)r->dram_put_bytes));
		json_object_set_new(j, "dram_get_bytes", json_integer((json_int_t)r->dram_get_bytes));
		json_object_set_new(j, "dram_evictions", json_integer((json_int_t)r->dram_evictions));
		json_object_set_new(j, "put_local_skips", json_integer((json_int_t)r->put_local_skips));
		json_object_set_new(j, "lookup_rounds", json_integer((json_int_t)r->lookup_rounds));
		json_object_set_new(j, "dram_blocks_avg", json_real(r->dram_blocks_avg));
		json_object_set_new(j, "ssd_writedown_bytes", json_integer((json_int_t)r->ssd_wd_bytes));
		json_object_set_new(j, "ssd_writedown_shed", json_integer((json_int_t)r->ssd_wd_shed));
		json_object_set_new(j, "ssd_read_bytes", json_integer((json_int_t)r->ssd_read_bytes));
		json_object_set_new(j, "ssd_evicted_blocks", json_integer((json_int_t)r->ssd_evicted));
		json_object_set_new(j, "ssd_blocks_avg", json_real(r->ssd_blocks_avg));
		json_object_set_new(j, "ssd_segments_avg", json_real(r->ssd_segments_avg));
		json_object_set_new(j, "ssd_capacity_bytes", json_integer((json_int_t)r->ssd_capacity));
		json_object_set_new(j, "ssd_log_bytes_avg", json_real(r->ssd_log_bytes_avg));
		json_object_set_new(j, "ssd_live_bytes_avg", json_real(r->ssd_live_bytes_avg));
		json_object_set_new(j, "ssd_value_bytes_avg", json_real(r->ssd_value_bytes_avg));
		json_object_set_new(j, "dram_on_lower_bytes_avg", json_real(r->dram_lower_bytes_avg));
		json_object_set_new(j, "dram_cold_bytes_avg", json_real(r->dram_cold_bytes_avg));
		json_object_set_new(j, "dram_leaving_avg", json_real(r->dram_leaving_avg));
		json_object_set_new(j, "dram_used_avg", json_real(r->dram_used_avg));
		json_object_set_new(j, "full_samples", json_integer((json_int_t)r->full_samples));
		json_object_set_new(j, "wall_s", json_real(r->wall_s));
		json_object_set_new(j, "requests_per_s", json_real(bench_rate((double)r->requests, r->wall_s)));
		json_object_set_new(j, "get_p50_us", json_real(r->get_p50_s * 1e6));
		json_object_set_new(j, "get_p99_us", json_real(r->get_p99_s * 1e6));
		json_object_set_new(j, "put_p50_us", json_real(r->put_p50_s * 1e6));
		json_object_set_new(j, "put_p99_us", json_real(r->put_p99_s * 1e6));
		json_object_set_new(j, "put_max_us", json_real(r->put_max_s * 1e6));
		json_object_set_new(j, "speed", json_real(o->speed));
		json_object_set_new(j, "lag_max_s", json_real(r->lag_max_s));
		replay_json_line(j);
		for (int i = 0; i < nw; i++) {
			json_t *x = json_pack("{s:s, s:b, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f}",
					      "kind", "whatif", "modelled", 1, "scenario", w[i].name,
					      "model", o->model->name, "gpu", o->gpu->name,
					      "ttft_mean_s", w[i].ttft_mean_s, "ttft_p50_s", w[i].ttft_p50_s,
					      "ttft_p99_s", w[i].ttft_p99_s,
					      "prefill_tok_s", w[i].prefill_tok_s, "speedup", w[i].speedup,
					      "loaded_token_frac", w[i].hit_tokens_frac);
			replay_json_line(x);
		}
		return;
	}
	replay_report_store(c, r);
	printf("\n                        blocks        tokens   (measured)\n");
	printf("hit ratio             %7.2f %%     %7.2f %%\n", replay_pct(r->hit_blocks, r->blocks),
	       replay_pct(r->hit_tokens, r->tokens));
	printf("ideal, unlimited      %7.2f %%     %7.2f %%   same trace, a cache that never evicts\n",
	       replay_pct(c->ideal.hit_blocks, c->ideal.blocks),
	       replay_pct(c->ideal.hit_tokens, c->ideal.tokens));
	replay_print_optimum(c, r);
	if (c->o->server && !c->o->server_cap)
		printf("                      (the optimum counts the local tiers only, not kvtierd: "
		       "--server-capacity)\n");
	printf("hits from DRAM     %10" PRIu64 "    %10" PRIu64 "\n", r->tier_hits[KVT_TIER_DRAM],
	       r->tier_tokens[KVT_TIER_DRAM]);
	printf("hits from SSD      %10" PRIu64 "    %10" PRIu64 "\n", r->tier_hits[KVT_TIER_SSD],
	       r->tier_tokens[KVT_TIER_SSD]);
	if (c->o->server)
		printf("hits from kvtierd  %10" PRIu64 "    %10" PRIu64 "   %s\n",
		       r->tier_hits[KVT_TIER_REMOTE], r->tier_tokens[KVT_TIER_REMOTE], c->o->server);
	if (r->lost)
		printf("lost               %10" PRIu64 "                 lookup hit, evicted before its get\n",
		       r->lost);
	printf("\nbytes     DRAM put %s, DRAM get %s, %" PRIu64 " evictions\n",
	       replay_fmt_size(a, sizeof a, r->dram_put_bytes), replay_fmt_size(b, sizeof b, r->dram_get_bytes),
	       r->dram_evictions);
	if (r->ssd_cap)
		printf("          SSD write-down %s (%" PRIu64 " blocks, %" PRIu64
		       " shed), SSD read %s (%" PRIu64 " reads), %" PRIu64 " evicted\n",
		       replay_fmt_size(d, sizeof d, r->ssd_wd_bytes), r->ssd_wd_blocks, r->ssd_wd_shed,
		       replay_fmt_size(e, sizeof e, r->ssd_read_bytes), r->ssd_reads, r->ssd_evicted);
	if (r->ssd_cap)
		printf("          DRAM evictions written down %" PRIu64 ", not written (predicted "
		       "unused) %" PRIu64 "\n", r->victim_wd, r->victim_filtered);
	printf("puts      %" PRIu64 " stored, %" PRIu64 " already present, %" PRIu64 " failed\n",
	       r->puts, r->put_exists, r->put_errors);
	double moved = (double)(r->dram_put_bytes + r->verified_bytes);
	printf("rate      %.2f s: %.0f requests/s, %.0f blocks/s, %.2f GB/s put+get\n", r->wall_s,
	       bench_rate((double)r->requests, r->wall_s), bench_rate((double)r->blocks, r->wall_s),
	       bench_rate(moved, r->wall_s) / 1e9);
	if (o->speed > 0)
		printf("          speed x%g: the replay fell behind the trace by at most %.3f s\n",
		       o->speed, r->lag_max_s);
	printf("get       p50 %.1f us, p99 %.1f us, max %.1f us over %" PRIu64
	       " gets; every one verified byte for byte (%s)\n",
	       r->get_p50_s * 1e6, r->get_p99_s * 1e6, r->get_max_s * 1e6, r->gets,
	       replay_fmt_size(a, sizeof a, r->verified_bytes));
	printf("put       p50 %.1f us, p99 %.1f us, max %.1f us over %" PRIu64 " puts\n",
	       r->put_p50_s * 1e6, r->put_p99_s * 1e6, r->put_max_s * 1e6,
	       r->puts + r->put_exists + r->put_errors);

	printf("\nWHAT-IF (MODELLED, not measured): %s on one %s\n", o->model->name, o->gpu->name);
	printf("  %-11s %11s %11s %11s %14s %8s %8s\n", "scenario", "TTFT mean", "TTFT p50", "TTFT p99",
	       "prefill tok/s", "speedup", "loaded");
	for (int i = 0; i < nw; i++)
		printf("  %-11s %9.1f ms %8.1f ms %8.1f ms %14.0f %7.2fx %7.1f%%   %s\n", w[i].name,
		       w[i].ttft_mean_s * 1e3, w[i].ttft_p50_s * 1e3, w[i].ttft_p99_s * 1e3,
		       w[i].prefill_tok_s, w[i].speedup, 100 * w[i].hit_tokens_frac, w[i].what);
	printf("assumptions (doc/replay.md):\n");
	if (o->prefill_tok_s > 0)
		printf("  prefill at a fixed %.0f tokens/s (--prefill-tps)\n", o->prefill_tok_s);
	else
		printf("  prefill FLOPs = 2 x %.3g active params per token + attention over the context;"
		       " %.0f TFLOPS BF16 at %.0f%% utilisation\n",
		       o->model->active_params, o->gpu->peak_flops / 1e12, o->gpu->mfu * 100);
	printf("  loads at the real model's %" PRIu64 " B/token: PCIe %.0f GB/s (DRAM), NVMe %.0f GB/s"
	       " (SSD), network %.0f GB/s (pod store); HBM %.1f TB/s not a bottleneck\n",
	       c->model_bpt, o->gpu->pcie_bps / 1e9, o->gpu->nvme_bps / 1e9, o->gpu->net_bps / 1e9,
	       o->gpu->hbm_bps / 1e12);
	printf("  per request: TTFT = min(load hits, recompute them) + prefill of the rest;"
	       " no queueing, no load/compute overlap, decode not counted\n");
	printf("  hits are this replay's (scaled values; which blocks hit does not depend on their size)\n");
	printf("  sources: %s; %s\n", o->model->source, o->gpu->source);
}

/* ------------------------------------------------------------------------
 * The command line
 */

static void replay_usage(FILE *f)
{
	size_t nm, ng;
	const struct rp_model *m = rp_models(&nm);
	const struct rp_gpu *g = rp_gpus(&ng);
	fprintf(f,
		"usage: kvtier replay TRACE [options]\n"
		"       kvtier replay --synth[=N] [options]\n"
		"\n"
		"Replay a request trace (Mooncake JSONL: one request a line, hash_ids of\n"
		"its prompt's blocks) against an embedded store as an engine would: look up\n"
		"each prompt's prefix, get the hits (every byte verified), put the misses.\n"
		"Report hit ratios against an unlimited cache, hits and bytes per tier,\n"
		"throughput, get latency, and a MODELLED what-if: TTFT and prefill\n"
		"throughput with and without each tier (doc/replay.md, kvtier-replay(1)).\n"
		"\n"
		"Trace:\n"
		"  TRACE                 a Mooncake-style JSONL file (timestamp,\n"
		"                        input_length, hash_ids; other fields ignored)\n"
		"  --synth[=N]           a synthetic trace of N requests instead (default %u)\n"
		"  --seed S              its seed (default 1)\n"
		"  --synth-write FILE    also write the synthetic trace to FILE\n"
		"  --limit N             replay the first N requests only\n"
		"  --block-tokens N      tokens a hash id stands for (default: the size\n"
		"                        every request's hash_ids count fits, 512 where\n"
		"                        it fits: Mooncake's; 16 for Alibaba's Qwen traces)\n"
		"  --time-unit ms|s      the timestamps' unit (default: ms, or s if any\n"
		"                        has a fraction); a missing timestamp is the one\n"
		"                        before it\n"
		"Store:\n"
		"  --dram SIZE           DRAM tier (default 1G); a comma list sweeps\n"
		"  --ssd SIZE            SSD tier (default 0: none); a comma list sweeps\n"
		"  --dir DIR             where SSD run directories go (default $TMPDIR or\n"
		"                        /var/tmp; made if missing; must support O_DIRECT);\n"
		"                        each is removed after its run (unless --keep)\n"
		"  --dram-policy P       DRAM eviction: prefix-adapt (default), prefix,\n"
		"                        prefix-learn, lru or s3fifo (doc/policies.md)\n"
		"  --admission POLICY    SSD admission: victim (default: what DRAM evicts),\n"
		"                        second (on a second access) or always (every put)\n"
		"  --keep                keep the run directory\n"
		"  --set NAME=VALUE      a store option (kvt_store_set_option), after the\n"
		"                        replay's own; repeatable\n"
		"  --flush-each          wait for the write-downs of each put and each\n"
		"                        read from below (the same hits every run,\n"
		"                        nothing shed; slower)\n"
		"  --server ADDR         a kvtierd below the local tiers (the remote tier:\n"
		"                        HOST:PORT or unix:/PATH); the server is not\n"
		"                        cleared: replay twice to see what it kept.\n"
		"                        ADDR,ADDR[=WEIGHT],...: a pod of kvtierd\n"
		"                        (remote.addrs, doc/cluster.md)\n"
		"  --server-capacity SIZE  the bytes the server (or pod) holds for this\n"
		"                        replay, added to DRAM+SSD for the optimum, so that\n"
		"                        'of optimum' is against the whole hierarchy\n"
		"                        (default 0: the local tiers only)\n"
		"  --tenant NAME         tenant to authenticate as (default \"default\")\n"
		"  --plot FILE           also write an SVG chart: hit ratio against capacity\n"
		"                        (every point of a sweep), modelled TTFT per tier\n"
		"  --hit-log FILE        write each request's hits (a tier letter per\n"
		"                        block) and every store statistic (a diagnostic:\n"
		"                        bench/ssd_lost.py reads it)\n"
		"  --retain-oracle       put with KVT_F_RETAIN the blocks of each request\n"
		"                        whose first block a later request starts with\n"
		"                        (the future known: what a router's retain hint\n"
		"                        could give; doc/policies.md \"Fifth pass\");\n"
		"                        with --server the kvtierd gets them too\n"
		"                        (remote.retain_hint auto)\n"
		"  --retain-all          register the replay's namespace KVT_NS_RETAIN:\n"
		"                        every put carries the retain hint (a router that\n"
		"                        hints everything; doc/policies.md \"Hints on every\n"
		"                        put\"); with --server as --retain-oracle\n"
		"  --secret-file FILE    the tenant's secret (mode 600)\n"
		"TLS to --server (a kvtierd run with --tls-cert):\n"
		CLI_TLS_HELP
		"Values and time:\n"
		"  --model NAME          model profile (default Llama-3.1-8B)\n"
		"  --bytes-per-token N   value bytes per token actually stored, a multiple\n"
		"                        of 8 (default: the largest that lets the trace's\n"
		"                        distinct blocks fill 80%% of DRAM+SSD with values\n"
		"                        of whole 4 KiB chunks, at most the model's)\n"
		"  --speed X             replay at X times the trace's timestamps\n"
		"                        (default: as fast as possible)\n"
		"What-if model:\n"
		"  --gpu NAME            GPU profile (default H200)\n"
		"  --prefill-tps N       fixed prefill tokens/s instead of the FLOPs model\n"
		"Output:\n"
		"  --json                JSON lines instead of the table\n"
		"  --no-progress         no progress bar on stderr\n"
		"\n"
		"Models:",
		RP_SYNTH_DEFAULT);
	for (size_t i = 0; i < nm; i++)
		fprintf(f, " %s (%" PRIu64 " B/token)%s", m[i].name, rp_kv_bytes_per_token(&m[i]),
			i + 1 < nm ? "," : "\n");
	fprintf(f, "GPUs:");
	for (size_t i = 0; i < ng; i++)
		fprintf(f, " %s%s", g[i].name, i + 1 < ng ? "," : "\n");
	fprintf(f, "Exit status: 0 ok, 1 failure (a wrong byte, a store error), 2 usage.\n");
}

static int replay_bad(const char *msg, const char *arg)
{
	fprintf(stderr, "kvtier replay: %s '%s'\nRun 'kvtier replay --help'.\n", msg, arg);
	return BENCH_EXIT_USAGE;
}

/* "1G,2G,4G" into v[]; returns the count or -1. */
static int replay_sizes(const char *s, uint64_t *v, unsigned max)
{
	char tmp[512];
	unsigned n = 0;
	if (strlen(s) >= sizeof tmp)
		return -1;
	strcpy(tmp, s);
	for (char *save = NULL, *p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (n == max || bench_parse_size(p, &v[n]) < 0)
			return -1;
		n++;
	}
	return n ? (int)n : -1;
}

static int replay_parse(int argc, char **argv, struct replay_opts *o)
{
	enum { O_SYNTH = 256, O_SEED, O_SYNTH_WRITE, O_LIMIT, O_DRAM, O_SSD, O_DIR, O_ADMIT, O_KEEP,
	       O_FLUSH, O_POLICY, O_SERVER, O_TENANT, O_SECRET, O_PLOT, O_MODEL, O_BPT, O_SPEED, O_GPU, O_TPS, O_JSON, O_NOPROG, O_SET, O_HITLOG,
	       O_SERVER_CAP, O_RETAIN, O_RETAIN_ALL, O_BLOCK_TOKENS, O_TIME_UNIT };
	static const struct option longs[] = {
		{ "synth", optional_argument, NULL, O_SYNTH },
		{ "seed", required_argument, NULL, O_SEED },
		{ "synth-write", required_argument, NULL, O_SYNTH_WRITE },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "block-tokens", required_argument, NULL, O_BLOCK_TOKENS },
		{ "time-unit", required_argument, NULL, O_TIME_UNIT },
		{ "dram", required_argument, NULL, O_DRAM },
		{ "ssd", required_argument, NULL, O_SSD },
		{ "dir", required_argument, NULL, O_DIR },
		{ "admission", required_argument, NULL, O_ADMIT },
		{ "keep", no_argument, NULL, O_KEEP },
		{ "flush-each", no_argument, NULL, O_FLUSH },
		{ "dram-policy", required_argument, NULL, O_POLICY },
		{ "server", required_argument, NULL, O_SERVER },
		{ "server-capacity", required_argument, NULL, O_SERVER_CAP },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "plot", required_argument, NULL, O_PLOT },
		{ "hit-log", required_argument, NULL, O_HITLOG },
		{ "retain-oracle", no_argument, NULL, O_RETAIN },
		{ "retain-all", no_argument, NULL, O_RETAIN_ALL },
		{ "secret-file", required_argument, NULL, O_SECRET },
		{ "model", required_argument, NULL, O_MODEL },
		{ "bytes-per-token", required_argument, NULL, O_BPT },
		{ "speed", required_argument, NULL, O_SPEED },
		{ "gpu", required_argument, NULL, O_GPU },
		{ "prefill-tps", required_argument, NULL, O_TPS },
		{ "json", no_argument, NULL, O_JSON },
		{ "no-progress", no_argument, NULL, O_NOPROG },
		{ "set", required_argument, NULL, O_SET },
		{ "help", no_argument, NULL, 'h' },
		CLI_TLS_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	const char *tmp = getenv("TMPDIR");
	int c, n;
	char *end;

	memset(o, 0, sizeof *o);
	o->model = rp_model_find("Llama-3.1-8B");
	o->gpu = rp_gpu_find("H200");
	o->dram[0] = RP_DEFAULT_DRAM;
	o->n_dram = o->n_ssd = 1;
	o->dir = tmp && *tmp ? tmp : "/var/tmp";
	o->synth_seed = 1;
	o->progress = isatty(2);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'h':
			replay_usage(stdout);
			return 1;
		case O_SYNTH:
			o->synth = RP_SYNTH_DEFAULT;
			if (optarg) {
				unsigned long v = strtoul(optarg, &end, 10);
				if (*end || v == 0 || v > 10000000)
					return replay_bad("--synth wants a request count, not", optarg);
				o->synth = (uint32_t)v;
			}
			break;
		case O_SEED:
			o->synth_seed = strtoull(optarg, &end, 10);
			if (*end || !*optarg)
				return replay_bad("--seed wants an integer, not", optarg);
			break;
		case O_SYNTH_WRITE: o->synth_write = optarg; break;
		case O_LIMIT:
			o->limit = strtoull(optarg, &end, 10);
			if (*end || o->limit == 0)
				return replay_bad("--limit wants a positive count, not", optarg);
			break;
		case O_BLOCK_TOKENS: {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !*optarg || v == 0 || v > 1048576)
				return replay_bad("--block-tokens wants tokens a block (1 to 1048576), "
						  "not", optarg);
			o->block_tokens = (uint32_t)v;
			break;
		}
		case O_TIME_UNIT:
			if (strcmp(optarg, "ms") != 0 && strcmp(optarg, "s") != 0)
				return replay_bad("--time-unit wants ms or s, not", optarg);
			o->ts_unit = optarg;
			break;
		case O_DRAM:
			if ((n = replay_sizes(optarg, o->dram, RP_SWEEP_MAX)) < 0)
				return replay_bad("--dram wants sizes like 1G or 256M,512M,1G, not", optarg);
			o->n_dram = (unsigned)n;
			break;
		case O_SSD:
			if ((n = replay_sizes(optarg, o->ssd, RP_SWEEP_MAX)) < 0)
				return replay_bad("--ssd wants sizes like 4G or 0,2G,8G, not", optarg);
			o->n_ssd = (unsigned)n;
			break;
		case O_DIR: o->dir = optarg; break;
		case O_ADMIT:
			if (strcmp(optarg, "victim") && strcmp(optarg, "second") && strcmp(optarg, "always"))
				return replay_bad("--admission is victim, second or always, not", optarg);
			o->admission = optarg;
			break;
		case O_KEEP: o->keep = true; break;
		case O_FLUSH: o->flush_each = true; break;
		case O_POLICY:
			if (strcmp(optarg, "prefix") && strcmp(optarg, "prefix-learn") &&
			    strcmp(optarg, "prefix-adapt") && strcmp(optarg, "s3fifo") &&
			    strcmp(optarg, "lru"))
				return replay_bad("--dram-policy is prefix, prefix-adapt, prefix-learn, lru or "
						  "s3fifo, not",
						  optarg);
			o->policy = optarg;
			break;
		case O_SERVER: o->server = optarg; break;
		case O_SERVER_CAP:
			if (bench_parse_size(optarg, &o->server_cap) < 0 || o->server_cap == 0)
				return replay_bad("--server-capacity wants a size like 64G, not", optarg);
			break;
		case O_TENANT: o->tenant = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_HITLOG: o->hit_log = optarg; break;
		case O_RETAIN: o->retain_oracle = true; break;
		case O_RETAIN_ALL: o->retain_all = true; break;
		case O_SECRET: o->secret_file = optarg; break;
		case O_MODEL:
			if ((o->model = rp_model_find(optarg)) == NULL)
				return replay_bad("unknown model (see --help)", optarg);
			break;
		case O_BPT:
			o->bytes_per_token = strtoull(optarg, &end, 10);
			if (*end || o->bytes_per_token == 0 || o->bytes_per_token % 8 ||
			    o->bytes_per_token > (UINT64_C(1) << 20))
				return replay_bad("--bytes-per-token wants a multiple of 8 up to 1048576, not",
						  optarg);
			break;
		case O_SPEED:
			o->speed = strtod(optarg, &end);
			if (*end || !(o->speed > 0) || o->speed > 1e9)
				return replay_bad("--speed wants a positive factor, not", optarg);
			break;
		case O_GPU:
			if ((o->gpu = rp_gpu_find(optarg)) == NULL)
				return replay_bad("unknown GPU (see --help)", optarg);
			break;
		case O_TPS:
			o->prefill_tok_s = strtod(optarg, &end);
			if (*end || !(o->prefill_tok_s > 0))
				return replay_bad("--prefill-tps wants a positive rate, not", optarg);
			break;
		case O_JSON: o->json = true; break;
		case O_NOPROG: o->progress = false; break;
		case O_SET:
			if (strchr(optarg, '=') == NULL || optarg[0] == '=' ||
			    o->n_set == sizeof o->set / sizeof o->set[0])
				return replay_bad("--set wants NAME=VALUE (at most 16), not", optarg);
			o->set[o->n_set++] = optarg;
			break;
		default:
			if (cli_tls_opt(&o->tls, c, optarg))
				break;
			return replay_bad("unknown or incomplete option", argv[optind - 1]);
		}
	}
	if (optind < argc)
		o->trace_path = argv[optind++];
	if (optind < argc)
		return replay_bad("unexpected argument", argv[optind]);
	if (o->tls.on && !o->server) {
		fprintf(stderr, "kvtier replay: --tls* go with --server\n"
				"Run 'kvtier replay --help'.\n");
		return BENCH_EXIT_USAGE;
	}
	if (o->server_cap && !o->server) {
		fprintf(stderr, "kvtier replay: --server-capacity goes with --server\n"
				"Run 'kvtier replay --help'.\n");
		return BENCH_EXIT_USAGE;
	}
	if ((o->trace_path == NULL) == (o->synth == 0)) {
		fprintf(stderr, "kvtier replay: give a TRACE file or --synth (not both)\n"
				"Run 'kvtier replay --help'.\n");
		return BENCH_EXIT_USAGE;
	}
	return 0;
}

static void replay_sweep_print(const struct replay_ctx *c, const struct replay_result *r,
			       const struct rp_whatif *w, bool first)
{
	char a[32], b[32];
	if (c->o->json) {
		json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:f, s:f}",
				      "kind", "sweep", "dram_bytes", (json_int_t)r->dram_cap,
				      "ssd_bytes", (json_int_t)r->ssd_cap,
				      "block_hit_ratio", replay_frac(r->hit_blocks, r->blocks),
				      "token_hit_ratio", replay_frac(r->hit_tokens, r->tokens),
				      "ideal_block_hit_ratio", replay_frac(c->ideal.hit_blocks, c->ideal.blocks),
				      "ideal_token_hit_ratio", replay_frac(c->ideal.hit_tokens, c->ideal.tokens),
				      "dram_hits", (json_int_t)r->tier_hits[KVT_TIER_DRAM],
				      "ssd_hits", (json_int_t)r->tier_hits[KVT_TIER_SSD],
				      "lost", (json_int_t)r->lost, "modelled_speedup", w[2].speedup,
				      "wall_s", r->wall_s);
		replay_json_optimum(j, c, r);
		replay_json_line(j);
		return;
	}
	if (first)
		printf("\n%10s %10s %9s %9s %6s %10s %10s %8s %8s %s\n", "DRAM", "SSD", "block hit",
		       "optimum", "of opt", "DRAM hits", "SSD hits", "shed", "seconds",
		       "modelled speedup (dram+ssd)");
	double opt = replay_frac(r->opt.prefix_hits, r->opt.blocks);
	printf("%10s %10s %8.2f%% %8.2f%% %6.3f %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8.1f %6.2fx\n",
	       replay_fmt_size(a, sizeof a, r->dram_cap), r->ssd_cap ? replay_fmt_size(b, sizeof b, r->ssd_cap) : "-",
	       replay_pct(r->hit_blocks, r->blocks), 100.0 * opt,
	       opt > 0 ? replay_frac(r->hit_blocks, r->blocks) / opt : 0,
	       r->tier_hits[KVT_TIER_DRAM], r->tier_hits[KVT_TIER_SSD], r->ssd_wd_shed, r->wall_s,
	       w[2].speedup);
	fflush(stdout);
}

int replay_main(int argc, char **argv)
{
	struct replay_opts o;
	struct rp_trace t = { 0 };
	struct replay_ctx c = { 0 };
	char err[512], why[160];
	int rc = replay_parse(argc, argv, &o);

	if (rc != 0)
		return rc == 1 ? BENCH_EXIT_OK : rc;
	if (o.synth > 0) {
		if (rp_trace_synth(&t, o.synth, o.synth_seed) < 0) {
			fprintf(stderr, "kvtier replay: out of memory\n");
			return BENCH_EXIT_FAIL;
		}
		if (o.synth_write != NULL) {
			FILE *f = fopen(o.synth_write, "w");
			if (f == NULL || rp_trace_write(&t, f) < 0 || fclose(f) != 0) {
				fprintf(stderr, "kvtier replay: writing %s: %s\n", o.synth_write,
					strerror(errno));
				rp_trace_free(&t);
				return BENCH_EXIT_FAIL;
			}
		}
	} else if (rp_trace_load(o.trace_path, o.block_tokens, o.ts_unit, &t, err,
				 sizeof err) < 0) {
		fprintf(stderr, "kvtier replay: %s\n", err);
		return BENCH_EXIT_FAIL;
	}
	char synth_name[64];
	snprintf(synth_name, sizeof synth_name, "--synth=%u --seed %" PRIu64, o.synth, o.synth_seed);
	c.o = &o;
	c.t = &t;
	c.trace_name = o.synth ? synth_name : o.trace_path;
	/* The ideal over exactly the requests replayed. */
	struct rp_trace view = t;
	if (o.limit && o.limit < t.count)
		view.count = o.limit;
	if (rp_ideal(&view, 1, &c.ideal) < 0) {
		fprintf(stderr, "kvtier replay: out of memory\n");
		rp_trace_free(&t);
		return BENCH_EXIT_FAIL;
	}

	/* Bytes per token actually stored. */
	uint64_t budget = 0;
	for (unsigned i = 0; i < o.n_dram; i++)
		for (unsigned j = 0; j < o.n_ssd; j++)
			if (o.dram[i] + o.ssd[j] > budget)
				budget = o.dram[i] + o.ssd[j];
	c.model_bpt = rp_kv_bytes_per_token(o.model);
	if (o.bytes_per_token) {
		c.run_bpt = o.bytes_per_token;
		snprintf(why, sizeof why, "as asked (--bytes-per-token)");
	} else {
		double fit = (double)budget * RP_FILL_FRAC /
			     ((double)(c.ideal.unique_blocks ? c.ideal.unique_blocks : 1) *
			      t.block_tokens);
		uint64_t step = replay_bpt_step(t.block_tokens);
		uint64_t b = (uint64_t)fit / step * step;
		if (b < step)
			b = step;
		if (b > c.model_bpt)
			b = c.model_bpt / 8 * 8;
		c.run_bpt = b;
		snprintf(why, sizeof why, "so the %" PRIu64 " distinct blocks fill %s80%% of the largest "
			 "DRAM+SSD (default)%s", c.ideal.unique_blocks,
			 b == step && fit < (double)step ? "more than " : "",
			 step > 8 ? ", a multiple of 4 KiB" : "");
	}
	c.bpt_why = why;
	c.value_len = c.run_bpt * t.block_tokens;
	if (replay_footprint(c.value_len) != c.value_len)
		fprintf(stderr, "kvtier replay: note: %" PRIu64 "-byte values take %" PRIu64 " bytes of "
			"DRAM each (whole chunks of at least 4 KiB): DRAM holds %" PRIu64 " %% of the blocks "
			"its bytes would; --bytes-per-token a multiple of %" PRIu64 " would not waste it\n",
			c.value_len, replay_footprint(c.value_len),
			c.value_len * 100 / replay_footprint(c.value_len),
			replay_bpt_step(t.block_tokens));

	bool sweep = o.n_dram > 1 || o.n_ssd > 1;
	int exit_rc = BENCH_EXIT_OK;
	bool first = true;
	struct rp_plot_point pts[RP_SWEEP_MAX * RP_SWEEP_MAX];
	struct rp_whatif last_w[RP_WHATIF_MAX];
	unsigned npts = 0;
	int last_nw = 0;
	for (unsigned i = 0; i < o.n_dram && exit_rc == BENCH_EXIT_OK; i++) {
		for (unsigned j = 0; j < o.n_ssd && exit_rc == BENCH_EXIT_OK; j++) {
			struct replay_run run = { &o, &t, c.value_len, o.dram[i], o.ssd[j], sweep };
			struct replay_result res;
			struct rp_whatif w[RP_WHATIF_MAX];
			if (run.dram_cap == 0) {
				fprintf(stderr, "kvtier replay: --dram 0: the SSD tier needs a DRAM tier\n");
				exit_rc = BENCH_EXIT_USAGE;
				break;
			}
			if (sweep && first && !o.json) {
				struct replay_result none = { 0 };
				none.requests = view.count;
				none.blocks = c.ideal.blocks;
				none.tokens = c.ideal.tokens;
				replay_report_store(&c, &none);
				printf("sweep     %u DRAM x %u SSD sizes, a fresh store each; ideal (unlimited)"
				       " %.2f %% of blocks, %.2f %% of tokens\n", o.n_dram, o.n_ssd,
				       replay_pct(c.ideal.hit_blocks, c.ideal.blocks),
				       replay_pct(c.ideal.hit_tokens, c.ideal.tokens));
			}
			if (sweep && o.progress)
				fprintf(stderr, "kvtier replay: DRAM %" PRIu64 " SSD %" PRIu64 " ...\n",
					run.dram_cap, run.ssd_cap);
			if (replay_run_one(&run, &res, err, sizeof err) < 0) {
				fprintf(stderr, "kvtier replay: %s\n", err);
				exit_rc = BENCH_EXIT_FAIL;
				break;
			}
			/* The ceiling at this point's total capacity, in blocks
			 * (with the server's, --server-capacity). */
			if (rp_optimum(&t, res.requests,
				       (run.dram_cap + run.ssd_cap + o.server_cap) / c.value_len,
				       &res.opt) < 0) {
				fprintf(stderr, "kvtier replay: out of memory\n");
				replay_result_free(&res);
				exit_rc = BENCH_EXIT_FAIL;
				break;
			}
			struct rp_whatif_in in = {
				.count = res.requests, .input_len = NULL,
				.hit_dram = res.req_dram_tokens, .hit_dram_lead = res.req_dram_lead,
				.hit_ssd = res.req_ssd_tokens, .hit_remote = res.req_remote_tokens,
				.hit_ideal = c.ideal.req_hit_tokens, .prefill_tok_s = o.prefill_tok_s,
			};
			uint64_t *lens = malloc((res.requests ? res.requests : 1) * sizeof *lens);
			int nw = -ENOMEM;
			if (lens != NULL) {
				for (size_t k = 0; k < res.requests; k++)
					lens[k] = t.reqs[k].input_len;
				in.input_len = lens;
				nw = rp_whatif(o.model, o.gpu, &in, w);
			}
			free(lens);
			if (nw < 0) {
				fprintf(stderr, "kvtier replay: out of memory\n");
				exit_rc = BENCH_EXIT_FAIL;
			} else if (sweep) {
				replay_sweep_print(&c, &res, w, first);
			} else {
				replay_report(&c, &res, w, nw);
			}
			if (nw > 0) {
				pts[npts].dram = run.dram_cap;
				pts[npts].ssd = run.ssd_cap;
				pts[npts].block_hit = replay_frac(res.hit_blocks, res.blocks);
				npts++;
				memcpy(last_w, w, (size_t)nw * sizeof(*w));
				last_nw = nw;
			}
			first = false;
			replay_result_free(&res);
		}
	}
	if (o.plot && exit_rc == BENCH_EXIT_OK && npts) {
		if (rp_plot_svg(o.plot, c.trace_name, pts, npts,
				replay_frac(c.ideal.hit_blocks, c.ideal.blocks), last_w, last_nw) < 0) {
			fprintf(stderr, "kvtier replay: --plot %s: %s\n", o.plot, strerror(errno));
			exit_rc = BENCH_EXIT_FAIL;
		} else if (!o.json) {
			printf("plot      %s (SVG: hit ratio against capacity, modelled TTFT)\n", o.plot);
		}
	}
	free(c.ideal.req_hit_tokens);
	rp_trace_free(&t);
	return exit_rc;
}

/*
 * bench_dram.c - "kvtier bench dram": the DRAM tier against memcpy.
 *
 * Measures libkvtier's DRAM tier through include/kvtier.h alone, the way
 * doc/design-notes.md ("Measuring") asks: every figure is a ratio against the
 * physical limit measured in the same run, working sets exceed the caches,
 * the baseline moves the same bytes the same way, A and B are interleaved
 * and medians are reported.  Bytes are verified after every timed phase;
 * a wrong byte or a library error exits 1.  Targets missed do not change
 * the exit status (CI runs --smoke and never judges ratios).
 *
 * The copy rows, one size at a time, one thread:
 *
 *     src  [v0][v1]...[vN-1]   caller's put sources, >= footprint, filled
 *      |                       with a stream derived from (size, i)
 *      +-- memcpy-put --> arena [v0]...[vN-1]   a plain mapping, as big
 *      +-- kvt put -----> store (dram.capacity = footprint + slack,
 *                               one shard, so nothing is ever evicted)
 *
 *     dst  [v0][v1]...[vN-1]   caller's get destinations, >= footprint
 *      ^-- memcpy-get --- arena
 *      ^-- kvt get ------ store             (KVT_OP_GET: the store copies)
 *      ^-- kvt get_pinned + memcpy(view) + kvt_pin_release
 *
 * All three mappings are 2 MiB aligned, in the same page mode as the
 * store's arena (--hugepages), and pre-faulted before any timing.  Each
 * value sits at i * align_up(size, 4 KiB).  Rounds 1, 3, ... run memcpy-put,
 * kvt-put (into a store emptied by kvt_clear), memcpy-get, kvt-get,
 * kvt-get_pinned; rounds 2, 4, ... run kvtier first (kvt-put, memcpy-put,
 * kvt-get_pinned, kvt-get, memcpy-get), so neither side owns a place in
 * the round.  dst is overwritten with a poison byte before each get
 * phase, so a get that copies nothing cannot verify.  Requests go
 * through kvt_submit in batches (--batch, default 16) and kvt_queue_poll,
 * as an engine issues them.
 *
 * The index rows: a second store with dram.chunk 4K holds >= 1 Mi blocks
 * of 4 KiB.  Keys are prefix-chained (kvt_key_chain_prompt) over random
 * tokens, 16 tokens per block, 64 keys per prompt: keys 0..31 of every
 * prompt are put, 32..63 are not, so every lookup answers 32.  All keys
 * are computed before timing.  keys_per_s counts the keys a longest-prefix
 * scan examines: 33 per prompt (32 hits and the first miss).
 * mem.meta_bytes (the library's allocation wrapper) divided by the blocks
 * gives index and metadata bytes per block.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kvtier.h"

#include "bench.h"

#define BD_WHO "kvtier bench dram" /* how its messages start */

#define BD_KIB (UINT64_C(1) << 10)
#define BD_MIB (UINT64_C(1) << 20)
#define BD_GIB (UINT64_C(1) << 30)

#define BD_ALIGN 4096u            /* caller buffers and value slots */
#define BD_HUGE_ALIGN (2 * BD_MIB) /* mappings start on a 2 MiB boundary for THP */
#define BD_SIZES_MAX 16
#define BD_STORE_OPTS_MAX 32
#define BD_ROUNDS_MAX BENCH_MEDIAN_MAX
#define BD_BATCH_MAX 4096u
#define BD_SAMPLE 64              /* values verified per phase outside --smoke */

/* Targets from the issue; judged only outside --smoke. */
#define BD_TARGET_RATIO 0.9
#define BD_TARGET_KEYS_PER_S 5e6
#define BD_TARGET_META 128.0

/* Lookup workload. */
#define BD_LK_KEYS 64    /* keys per prompt */
#define BD_LK_HITS 32    /* leading keys present */
#define BD_LK_TOKENS 16  /* tokens per block */
#define BD_LK_VALUE 4096 /* bytes per indexed block */

/* Key hashing workload: prompts of this many tokens. */
#define BD_KH_PROMPT 8192

#define BD_POISON 0x5a

#define BD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* --only groups */
#define BD_GROUP_COPY 0x1u
#define BD_GROUP_KEYHASH 0x2u
#define BD_GROUP_LOOKUP 0x4u

struct bd_opts {
	bool smoke;
	bool json;
	bool progress;                  /* stderr is a TTY */
	unsigned groups;                /* BD_GROUP_* */
	uint64_t footprint;             /* bytes per size, rounded up to whole values */
	unsigned rounds;
	uint64_t sizes[BD_SIZES_MAX];
	unsigned size_count;
	uint64_t lookup_blocks;
	unsigned batch;                 /* requests per kvt_submit */
	const char *hugepages;          /* "auto", "thp", "off" */
	const char *store_opts[BD_STORE_OPTS_MAX]; /* "name=value", applied last */
	unsigned store_opt_count;
};

/* One anonymous mapping, 2 MiB aligned, len usable bytes at p. */
struct bd_buf {
	uint8_t *p;
	size_t len;
	void *map;
	size_t map_len;
};

/* A row of the human table (JSON is printed straight from the figures). */
struct bd {
	struct bd_opts o;
	unsigned targets_missed;
	bool header_done;     /* the table's column names are out */
	/* Filled by the lookup rows, printed last. */
	bool meta_done;
	uint64_t meta_blocks, meta_open, meta_loaded;
	char meta_huge[32];
};

/* ------------------------------------------------------------------------
 * Small helpers: time, random bytes, sizes, output.
 */

/* Offset of the first byte of p that differs from bench_fill(seed), or -1. */
static int64_t bd_check(const uint8_t *p, size_t len, uint64_t seed, uint8_t *got,
			uint8_t *want)
{
	uint64_t x = seed, w, v;
	size_t off = 0;
	for (; off < len; off += 8) {
		size_t n = len - off < 8 ? len - off : 8;
		w = bench_xorshift(&x);
		v = w;
		if (memcmp(p + off, &w, n) == 0)
			continue;
		for (size_t k = 0; k < n; k++) {
			uint8_t b = (uint8_t)(v >> (8 * k));
			if (p[off + k] != b) {
				*got = p[off + k];
				*want = b;
				return (int64_t)(off + k);
			}
		}
	}
	return -1;
}

/* A JSON string: the names here are plain, but library text is escaped. */
static void bd_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static const char *bd_verdict(const struct bd *b, bool pass)
{
	if (b->o.smoke)
		return "smoke";
	return pass ? "ok" : "FAIL";
}

static void bd_cell_print(struct bd *b, const struct bench_cell *c)
{
	bench_cell_print(c, b->o.json, b->o.progress, &b->header_done, 16, 6);
}

/* ------------------------------------------------------------------------
 * Buffers: 2 MiB aligned anonymous mappings, page mode as the store's.
 */

static int bd_buf_alloc(const struct bd *b, struct bd_buf *buf, size_t len)
{
	memset(buf, 0, sizeof(*buf));
	buf->map_len = len + BD_HUGE_ALIGN;
	buf->map = mmap(NULL, buf->map_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf->map == MAP_FAILED) {
		buf->map = NULL;
		return -errno;
	}
	buf->p = (uint8_t *)bench_align_up((uintptr_t)buf->map, BD_HUGE_ALIGN);
	buf->len = len;
	/* Same page mode as the store's arena: a baseline on 4 KiB pages
	 * against a store on huge pages would flatter the store.  Advice
	 * only: the kernel may refuse, and the header reports what it did. */
	if (strcmp(b->o.hugepages, "off") == 0)
		(void)madvise(buf->p, len, MADV_NOHUGEPAGE);
	else
		(void)madvise(buf->p, len, MADV_HUGEPAGE);
	return 0;
}

static void bd_buf_free(struct bd_buf *buf)
{
	if (buf->map != NULL)
		munmap(buf->map, buf->map_len);
	memset(buf, 0, sizeof(*buf));
}

/* AnonHugePages of this process in KiB (0 if unknown). */
static uint64_t bd_anon_huge_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	uint64_t kib = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;
		if (sscanf(line, "AnonHugePages: %llu kB", &v) == 1) {
			kib = v;
			break;
		}
	}
	fclose(f);
	return kib;
}

static uint64_t bd_avail_bytes(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	uint64_t kib = 0;
	if (f != NULL) {
		while (fgets(line, sizeof(line), f) != NULL) {
			unsigned long long v;
			if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
				kib = v;
				break;
			}
		}
		fclose(f);
	}
	return kib * 1024;
}

/* ------------------------------------------------------------------------
 * Stores.
 */

struct bd_text_stat {
	const char *name;
	char value[32];
};

static void bd_text_stat_fn(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct bd_text_stat *t = ctx;
	if (strcmp(name, t->name) != 0)
		return;
	if (str != NULL)
		snprintf(t->value, sizeof(t->value), "%s", str);
	else
		snprintf(t->value, sizeof(t->value), "%" PRIu64, value);
}

/* A statistic as text ("?" if the store has none by that name). */
static void bd_text_stat(struct kvt_store *s, const char *name, char *out, size_t len)
{
	struct bd_text_stat t = { .name = name, .value = "?" };
	(void)kvt_store_stats(s, bd_text_stat_fn, &t);
	snprintf(out, len, "%s", t.value);
}

static int bd_set_option(struct kvt_store *s, const char *name, const char *value)
{
	int rc = kvt_store_set_option(s, name, value);
	if (rc < 0)
		bench_err(BD_WHO, "store option %s=%s: %s (see kvtier-bench(1) for -o)", name,
			  value, kvt_strerror(rc));
	return rc;
}

static const struct kvt_ns_desc bd_ns_desc = {
	.model = "kvtier-bench",
	.dtype = "bf16",
	.layout = "opaque",
	.block_tokens = BD_LK_TOKENS,
	.tp_rank = 0, .tp_size = 1,
	.pp_rank = 0, .pp_size = 1,
};

/*
 * Create, configure and open a memory-only store of capacity bytes; chunk
 * and shards NULL keep the library's defaults.  Returns BENCH_EXIT_OK, _USAGE (a bad -o) or
 * _FAIL; on success *out is open and *ns registered.
 */
static int bd_store_open(struct bd *b, uint64_t capacity, const char *chunk,
			 const char *shards, struct kvt_store **out, uint32_t *ns)
{
	struct kvt_store *s = NULL;
	char cap[32], sz[32];
	int rc = kvt_store_create(&s);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_store_create: %s", kvt_strerror(rc));
		return BENCH_EXIT_FAIL;
	}
	snprintf(cap, sizeof(cap), "%" PRIu64 "M", bench_align_up(capacity, BD_MIB) / BD_MIB);
	if (bd_set_option(s, "dram.capacity", cap) < 0 ||
	    bd_set_option(s, "dram.prefault", "on") < 0 ||
	    bd_set_option(s, "dram.hugepages", b->o.hugepages) < 0 ||
	    (chunk != NULL && bd_set_option(s, "dram.chunk", chunk) < 0) ||
	    (shards != NULL && bd_set_option(s, "dram.shards", shards) < 0))
		goto usage;
	for (unsigned i = 0; i < b->o.store_opt_count; i++) {
		char name[128];
		const char *eq = strchr(b->o.store_opts[i], '=');
		size_t nlen = (size_t)(eq - b->o.store_opts[i]);
		if (nlen >= sizeof(name))
			nlen = sizeof(name) - 1;
		memcpy(name, b->o.store_opts[i], nlen);
		name[nlen] = '\0';
		if (bd_set_option(s, name, eq + 1) < 0)
			goto usage;
	}
	(void)kvt_store_set_log(s, bench_store_log, NULL, KVT_LOG_WARN);
	rc = kvt_store_open(s);
	if (rc < 0) {
		bench_err(BD_WHO,
			  "kvt_store_open (dram.capacity %s): %s; lower --footprint or "
			  "--lookup-blocks, or free memory",
			  bench_fmt_size(sz, sizeof(sz), capacity), kvt_strerror(rc));
		goto fail;
	}
	rc = kvt_ns_register(s, &bd_ns_desc, ns);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_ns_register: %s", kvt_strerror(rc));
		goto fail;
	}
	*out = s;
	return BENCH_EXIT_OK;
usage:
	kvt_store_destroy(s);
	return BENCH_EXIT_USAGE;
fail:
	kvt_store_destroy(s);
	return BENCH_EXIT_FAIL;
}

/* ------------------------------------------------------------------------
 * Batches: submit k requests, collect their k completions.
 */

typedef int (*bd_done_fn)(void *ctx, struct kvt_req *req);

/*
 * Submit reqs[0..k) as one batch and poll until all k came back, calling
 * done() on each.  DRAM requests complete inside kvt_submit; anything the
 * library defers is waited for (10 s, then it is reported as stuck).
 * Returns 0, or -1 after printing.
 */
static int bd_batch(struct kvt_queue *q, struct kvt_req *reqs, unsigned k, bd_done_fn done,
		    void *ctx)
{
	struct kvt_req *ptrs[BD_BATCH_MAX], *out[BD_BATCH_MAX];
	unsigned got = 0;
	int bad = 0;
	if (k == 0 || k > BD_BATCH_MAX)
		return 0;
	for (unsigned j = 0; j < k; j++)
		ptrs[j] = &reqs[j];
	int rc = kvt_submit(q, ptrs, k);
	if (rc != (int)k) {
		bench_err(BD_WHO, "kvt_submit of %u requests: %s", k,
			  rc < 0 ? kvt_strerror(rc) : "returned a wrong count");
		return -1;
	}
	while (got < k) {
		int m = kvt_queue_poll(q, out, k);
		if (m == 0)
			m = kvt_queue_wait(q, out, k, 10000);
		if (m == -EINTR)
			continue;
		if (m < 0) {
			bench_err(BD_WHO, "kvt_queue_poll: %s", kvt_strerror(m));
			return -1;
		}
		if (m == 0) {
			bench_err(BD_WHO, "%u of %u requests still in flight after 10 s", k - got,
				  k);
			return -1;
		}
		for (int j = 0; j < m; j++)
			if (done(ctx, out[j]) < 0)
				bad = 1;
		got += (unsigned)m;
	}
	return bad ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * Copy rows: put, get, get_pinned against memcpy.
 */

enum { BD_PH_MPUT, BD_PH_KPUT, BD_PH_MGET, BD_PH_KGET, BD_PH_KPIN, BD_PH_COUNT };
static const char *const bd_ph_name[BD_PH_COUNT] = {
	"memcpy put", "dram.put", "memcpy get", "dram.get", "dram.get_pinned",
};

/*
 * Phase order by round r (from 0): ABBA.  Odd r run kvtier first, so a phase's
 * place in the round (what ran just before it, drift over the round)
 * favours neither side.  Each order keeps the dependencies: the puts come
 * before the gets, and each get side reads what its own put wrote.
 */
static const unsigned bd_ph_order[2][BD_PH_COUNT] = {
	{ BD_PH_MPUT, BD_PH_KPUT, BD_PH_MGET, BD_PH_KGET, BD_PH_KPIN },
	{ BD_PH_KPUT, BD_PH_MPUT, BD_PH_KPIN, BD_PH_KGET, BD_PH_MGET },
};

struct bd_copy {
	struct bd *b;
	struct kvt_store *s;
	struct kvt_queue *q;
	uint32_t ns;
	uint64_t size;     /* bytes per value */
	uint64_t slot;     /* size rounded up to 4 KiB: value i at i * slot */
	size_t n;          /* values */
	struct bd_buf *src, *arena, *dst;
	uint8_t *scratch;  /* one value, for checking what kvt put stored */
	struct kvt_key *keys;
	struct kvt_req *reqs;  /* batch ring */
	struct iovec *iov;     /* one per ring slot */
	size_t base;           /* index of reqs[0] in the current batch */
	unsigned phase;        /* BD_PH_* while running */
	uint64_t views;        /* pinned gets: views seen (fragmentation) */
	unsigned max_views;
	unsigned errors;       /* in this phase; only the first few are printed */
	double secs[BD_PH_COUNT][BD_ROUNDS_MAX];
};

/* Report a failed request: the first three of a phase, then silence. */
static int bd_copy_fail(struct bd_copy *c, const char *fmt, ...) BENCH_PRINTF(2, 3);
static int bd_copy_fail(struct bd_copy *c, const char *fmt, ...)
{
	va_list ap;
	if (c->errors++ >= 3)
		return -1;
	va_start(ap, fmt);
	bench_verr(BD_WHO, fmt, ap);
	va_end(ap);
	return -1;
}

static int bd_copy_done(void *ctx, struct kvt_req *r)
{
	struct bd_copy *c = ctx;
	size_t i = (size_t)r->user_data;
	char sz[32];
	if (r->status != KVT_OK)
		return bd_copy_fail(c, "%s of %s value %zu: %s%s", bd_ph_name[c->phase],
				    bench_fmt_size(sz, sizeof(sz), c->size), i, kvt_strerror(r->status),
				    r->status == KVT_MISS ? " (the store lost a value it had room for)" :
				    r->status == KVT_EXISTS ? " (kvt_clear left the key behind)" : "");
	if (c->phase == BD_PH_KPUT)
		return 0;
	if (r->length != c->size || (c->phase == BD_PH_KGET && r->value_len != c->size)) {
		if (c->phase == BD_PH_KPIN)
			(void)kvt_pin_release(c->s, r->pin);
		return bd_copy_fail(c, "%s of value %zu: length %" PRIu64 ", value_len %" PRIu64
				    ", want %" PRIu64, bd_ph_name[c->phase], i, r->length,
				    r->value_len, c->size);
	}
	if (c->phase != BD_PH_KPIN)
		return 0;
	/* A consumer of a pinned view copies the bytes out, then releases. */
	uint8_t *d = c->dst->p + i * c->slot;
	uint64_t off = 0;
	bool over = false;
	for (uint32_t v = 0; v < r->view_count; v++) {
		if (off + r->view[v].iov_len > c->size) {
			over = true;
			break;
		}
		memcpy(d + off, r->view[v].iov_base, r->view[v].iov_len);
		off += r->view[v].iov_len;
	}
	c->views += r->view_count;
	if (r->view_count > c->max_views)
		c->max_views = r->view_count;
	int rel = kvt_pin_release(c->s, r->pin);
	if (over || off != c->size)
		return bd_copy_fail(c, "dram.get_pinned of value %zu: views hold %s%" PRIu64
				    " bytes, want %" PRIu64, i, over ? "more than " : "", off, c->size);
	if (rel < 0)
		return bd_copy_fail(c, "kvt_pin_release of value %zu: %s", i, kvt_strerror(rel));
	return 0;
}

/* One timed kvt phase over all n values; *secs gets its wall time. */
static int bd_copy_kvt(struct bd_copy *c, unsigned phase, double *secs)
{
	unsigned batch = c->b->o.batch;
	uint32_t op = phase == BD_PH_KPUT ? KVT_OP_PUT :
		      phase == BD_PH_KGET ? KVT_OP_GET : KVT_OP_GET_PINNED;
	struct bd_buf *buf = phase == BD_PH_KPUT ? c->src : c->dst;
	c->phase = phase;
	c->errors = 0;
	double t0 = bench_now();
	for (size_t i = 0; i < c->n; i += batch) {
		unsigned k = c->n - i < batch ? (unsigned)(c->n - i) : batch;
		for (unsigned j = 0; j < k; j++) {
			struct kvt_req *r = &c->reqs[j];
			memset(r, 0, sizeof(*r));
			r->op = op;
			r->ns = c->ns;
			r->key = c->keys[i + j];
			r->user_data = i + j;
			if (op != KVT_OP_GET_PINNED) {
				c->iov[j].iov_base = buf->p + (i + j) * c->slot;
				c->iov[j].iov_len = c->size;
				r->iov = &c->iov[j];
				r->iov_count = 1;
			}
		}
		if (bd_batch(c->q, c->reqs, k, bd_copy_done, c) < 0)
			return -1;
	}
	*secs = bench_now() - t0;
	return 0;
}

static int bd_copy_memcpy(struct bd_copy *c, unsigned phase, double *secs)
{
	uint8_t *from = phase == BD_PH_MPUT ? c->src->p : c->arena->p;
	uint8_t *to = phase == BD_PH_MPUT ? c->arena->p : c->dst->p;
	double t0 = bench_now();
	for (size_t i = 0; i < c->n; i++)
		memcpy(to + i * c->slot, from + i * c->slot, c->size);
	*secs = bench_now() - t0;
	return 0;
}

static int bd_check_value(const struct bd_copy *c, const uint8_t *p, size_t i, unsigned round)
{
	uint8_t got, want;
	char sz[32];
	int64_t off = bd_check(p, c->size, bench_seed(c->size, i), &got, &want);
	if (off < 0)
		return 0;
	bench_err(BD_WHO,
		  "%s %s, round %u: value %zu differs from what was put at byte %" PRId64
		  " (got 0x%02x, want 0x%02x)",
		  bd_ph_name[c->phase], bench_fmt_size(sz, sizeof(sz), c->size), round + 1, i, off,
		  got, want);
	return -1;
}

/*
 * Verify the phase just timed: every value under --smoke, else BD_SAMPLE
 * spread over the footprint (a different offset each round) and the last.
 */
static int bd_copy_verify(struct bd_copy *c, unsigned phase, unsigned round)
{
	size_t stride = c->b->o.smoke || c->n <= BD_SAMPLE ? 1 : c->n / BD_SAMPLE;
	size_t first = (round * 7 + phase) % stride;
	c->phase = phase;
	for (size_t i = first;; i = i + stride < c->n ? i + stride : c->n - 1) {
		const uint8_t *p;
		if (phase == BD_PH_MPUT) {
			p = c->arena->p + i * c->slot;
		} else if (phase == BD_PH_KPUT) {
			uint64_t len = 0;
			memset(c->scratch, BD_POISON, c->size);
			int rc = kvt_get(c->s, c->ns, &c->keys[i], c->scratch, c->size, &len);
			if (rc != KVT_OK || len != c->size) {
				bench_err(BD_WHO,
					  "kvt_get of value %zu after dram.put: %s (value_len "
					  "%" PRIu64 ")",
					  i, kvt_strerror(rc), len);
				bench_stat_dump(BD_WHO, c->s);
				return -1;
			}
			p = c->scratch;
		} else {
			p = c->dst->p + i * c->slot;
		}
		if (bd_check_value(c, p, i, round) < 0)
			return -1;
		if (i == c->n - 1)
			break;
	}
	return 0;
}

static int bd_copy_clear(struct bd_copy *c, int64_t expect)
{
	int64_t rc = kvt_clear(c->s, c->ns);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_clear: %s", kvt_strerror((int)rc));
		return -1;
	}
	if (expect >= 0 && rc != expect) {
		bench_err(BD_WHO,
			  "kvt_clear removed %" PRId64 " blocks, expected %" PRId64
			  " (were values evicted? raise the slack: -o dram.capacity=...)",
			  rc, expect);
		bench_stat_dump(BD_WHO, c->s);
		return -1;
	}
	return 0;
}

static void bd_copy_report(struct bd *b, struct bd_copy *c, unsigned phase, unsigned base_phase)
{
	static const char *const names[BD_PH_COUNT] = {
		NULL, "dram.put", NULL, "dram.get", "dram.get_pinned",
	};
	unsigned rounds = b->o.rounds;
	double bytes = (double)c->n * (double)c->size;
	double x[BD_ROUNDS_MAX], y[BD_ROUNDS_MAX];
	for (unsigned r = 0; r < rounds; r++) {
		x[r] = bench_rate(bytes, c->secs[phase][r]) / 1e9;
		y[r] = bench_rate(bytes, c->secs[base_phase][r]) / 1e9;
	}
	double gx = bench_median(x, rounds), gy = bench_median(y, rounds);
	double ratio = gx / (gy > 0 ? gy : 1e-12);
	bool pass = ratio >= BD_TARGET_RATIO;
	if (!pass && !b->o.smoke)
		b->targets_missed++;
	if (b->o.json) {
		printf("{\"bench\":\"%s\",\"value_bytes\":%" PRIu64 ",\"gbps\":%.3f,"
		       "\"baseline\":\"memcpy\",\"baseline_gbps\":%.3f,\"ratio\":%.4f,"
		       "\"values\":%zu,\"footprint_bytes\":%" PRIu64 ",\"rounds\":%u,\"batch\":%u",
		       names[phase], c->size, gx, gy, ratio, c->n, (uint64_t)c->n * c->slot, rounds,
		       b->o.batch);
		printf(",\"gbps_rounds\":[");
		for (unsigned r = 0; r < rounds; r++)
			printf("%s%.3f", r ? "," : "", x[r]);
		printf("],\"baseline_gbps_rounds\":[");
		for (unsigned r = 0; r < rounds; r++)
			printf("%s%.3f", r ? "," : "", y[r]);
		printf("],\"ratio_rounds\":[");
		for (unsigned r = 0; r < rounds; r++)
			printf("%s%.4f", r ? "," : "", x[r] / (y[r] > 0 ? y[r] : 1e-12));
		printf("]");
		if (phase == BD_PH_KPIN)
			printf(",\"views_per_get\":%.3f,\"max_views\":%u",
			       (double)c->views / ((double)c->n * rounds), c->max_views);
		printf(",\"target\":%.2f", BD_TARGET_RATIO);
		bench_json_pass(b->o.smoke, pass);
		printf("}\n");
		fflush(stdout);
		return;
	}
	struct bench_cell cell = { .bench = names[phase], .result = bd_verdict(b, pass) };
	bench_fmt_size(cell.value, sizeof(cell.value), c->size);
	snprintf(cell.kvtier, sizeof(cell.kvtier), "%.2f GB/s", gx);
	snprintf(cell.baseline, sizeof(cell.baseline), "%.2f GB/s", gy);
	snprintf(cell.ratio, sizeof(cell.ratio), "%.3f", ratio);
	snprintf(cell.target, sizeof(cell.target), ">= %.2f", BD_TARGET_RATIO);
	if (phase == BD_PH_KPIN)
		snprintf(cell.notes, sizeof(cell.notes), "%zu values; %.2f views/get (max %u)", c->n,
			 (double)c->views / ((double)c->n * rounds), c->max_views);
	else
		snprintf(cell.notes, sizeof(cell.notes), "%zu values, batches of %u", c->n,
			 b->o.batch);
	bd_cell_print(b, &cell);
}

/* All rounds of one value size.  Buffers and the store are shared. */
static int bd_copy_size(struct bd_copy *c)
{
	struct bd *b = c->b;
	char sz[32];
	bench_fmt_size(sz, sizeof(sz), c->size);
	c->slot = bench_align_up(c->size, BD_ALIGN);
	c->n = (size_t)((b->o.footprint + c->size - 1) / c->size);
	c->views = 0;
	c->max_views = 0;

	/* Keys and source bytes: derived from (size, i), before any timing. */
	bench_progress(b->o.progress, "dram", "%s: filling %zu source values", sz, c->n);
	for (size_t i = 0; i < c->n; i++) {
		uint64_t w[4];
		for (unsigned k = 0; k < 4; k++)
			w[k] = bench_splitmix(bench_seed(c->size, i) + k);
		(void)kvt_key_set(&c->keys[i], w, sizeof(w));
		bench_fill(c->src->p + i * c->slot, c->size, bench_seed(c->size, i));
	}

	for (unsigned r = 0; r < b->o.rounds; r++) {
		for (unsigned k = 0; k < BD_PH_COUNT; k++) {
			unsigned ph = bd_ph_order[r % 2][k];
			bench_progress(b->o.progress, "dram", "%s round %u/%u: %s", sz, r + 1,
				       b->o.rounds, bd_ph_name[ph]);
			if (ph == BD_PH_KPUT && bd_copy_clear(c, r == 0 ? -1 : (int64_t)c->n) < 0)
				return -1;
			if (ph == BD_PH_MGET || ph == BD_PH_KGET || ph == BD_PH_KPIN)
				memset(c->dst->p, BD_POISON, c->n * c->slot);
			int rc = (ph == BD_PH_MPUT || ph == BD_PH_MGET) ?
					 bd_copy_memcpy(c, ph, &c->secs[ph][r]) :
					 bd_copy_kvt(c, ph, &c->secs[ph][r]);
			if (rc < 0) {
				bench_stat_dump(BD_WHO, c->s);
				return -1;
			}
			if (bd_copy_verify(c, ph, r) < 0)
				return -1;
		}
	}
	if (bd_copy_clear(c, (int64_t)c->n) < 0)
		return -1;
	bd_copy_report(b, c, BD_PH_KPUT, BD_PH_MPUT);
	bd_copy_report(b, c, BD_PH_KGET, BD_PH_MGET);
	bd_copy_report(b, c, BD_PH_KPIN, BD_PH_MGET);
	return 0;
}

static void bd_blank(const struct bd *b)
{
	if (!b->o.json) {
		bench_progress_end(b->o.progress);
		fputc('\n', stdout);
	}
}

static int bd_copy_rows(struct bd *b)
{
	struct bd_copy c = { .b = b };
	struct bd_buf src, arena, dst;
	char a[32], d[32], e[32], f[32];
	int ret = BENCH_EXIT_FAIL;
	uint64_t max_size = 0, max_bytes = 0;
	memset(&src, 0, sizeof(src));
	memset(&arena, 0, sizeof(arena));
	memset(&dst, 0, sizeof(dst));

	/* The largest footprint any size needs: whole values, 4 KiB slots. */
	size_t max_n = 0;
	for (unsigned i = 0; i < b->o.size_count; i++) {
		uint64_t sz = b->o.sizes[i], n = (b->o.footprint + sz - 1) / sz;
		uint64_t bytes = n * bench_align_up(sz, BD_ALIGN);
		if (bytes > max_bytes)
			max_bytes = bytes;
		if (sz > max_size)
			max_size = sz;
		if (n > max_n)
			max_n = (size_t)n;
	}
	/* Store: the footprint plus a quarter (at least 64 MiB) of slack, so a
	 * round's puts never evict (kvt_clear's count checks that). */
	uint64_t slack = max_bytes / 4 > 64 * BD_MIB ? max_bytes / 4 : 64 * BD_MIB;
	uint64_t capacity = bench_align_up(max_bytes + slack, BD_MIB);
	uint64_t need = 3 * max_bytes + capacity + max_size;
	uint64_t avail = bd_avail_bytes();
	if (avail != 0 && need > avail) {
		bench_err(
			BD_WHO,
			"the copy rows need %s (3 buffers of %s and a store of %s) but only %s is "
			"available; lower --footprint",
			bench_fmt_size(a, sizeof(a), need), bench_fmt_size(d, sizeof(d), max_bytes),
			bench_fmt_size(e, sizeof(e), capacity),
			bench_fmt_size(f, sizeof(f), avail));
		return BENCH_EXIT_FAIL;
	}

	bench_progress(b->o.progress, "dram", "mapping and pre-faulting %s of caller buffers",
		       bench_fmt_size(a, sizeof(a), 3 * max_bytes));
	uint64_t huge0 = bd_anon_huge_kib();
	int rc;
	if ((rc = bd_buf_alloc(b, &src, max_bytes)) < 0 ||
	    (rc = bd_buf_alloc(b, &arena, max_bytes)) < 0 ||
	    (rc = bd_buf_alloc(b, &dst, max_bytes)) < 0) {
		bench_err(BD_WHO, "mmap of %s: %s", bench_fmt_size(a, sizeof(a), max_bytes),
			  strerror(-rc));
		goto out;
	}
	/* Pre-fault: first touch runs at a fifth of memcpy speed. */
	memset(src.p, 1, max_bytes);
	memset(arena.p, 2, max_bytes);
	memset(dst.p, 3, max_bytes);
	uint64_t huge1 = bd_anon_huge_kib();
	c.src = &src;
	c.arena = &arena;
	c.dst = &dst;
	c.scratch = aligned_alloc(BD_ALIGN, bench_align_up(max_size, BD_ALIGN));
	c.keys = calloc(max_n, sizeof(*c.keys));
	c.reqs = aligned_alloc(64, bench_align_up(b->o.batch * sizeof(*c.reqs), 64));
	c.iov = calloc(b->o.batch, sizeof(*c.iov));
	if (c.scratch == NULL || c.keys == NULL || c.reqs == NULL || c.iov == NULL) {
		bench_err(BD_WHO, "out of memory for %zu keys", max_n);
		goto out;
	}

	bench_progress(b->o.progress, "dram", "opening a store of %s",
		       bench_fmt_size(a, sizeof(a), capacity));
	/* One shard: the rows run one thread, so shards buy nothing, and
	 * each shard owns capacity/shards of the arena, so a default store
	 * (10 shards for 2.5 GiB) evicts 16 MiB values well before it is
	 * full.  Puts here must land in an empty store and never evict;
	 * -o dram.shards=N puts the default back. */
	ret = bd_store_open(b, capacity, NULL, "1", &c.s, &c.ns);
	if (ret != BENCH_EXIT_OK)
		goto out;
	ret = BENCH_EXIT_FAIL;
	uint64_t huge2 = bd_anon_huge_kib();
	rc = kvt_queue_create(c.s, &c.q);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_queue_create: %s", kvt_strerror(rc));
		goto out;
	}
	char hp[32], chunk[32], shards[32], policy[32];
	bd_text_stat(c.s, "dram.hugepages", hp, sizeof(hp));
	bd_text_stat(c.s, "dram.chunk_bytes", chunk, sizeof(chunk));
	bd_text_stat(c.s, "dram.shards", shards, sizeof(shards));
	bd_text_stat(c.s, "dram.policy", policy, sizeof(policy));
	double cap_huge = (double)(huge2 - huge1) * 1024 / (double)capacity;
	double buf_huge = (double)(huge1 - huge0) * 1024 / (double)(3 * max_bytes);
	bench_note(b->o.json, b->o.progress,
		   "copy rows: 1 thread; GB/s = 1e9 bytes/s; medians of %u rounds; rounds 1, 3, "
		   "... run memcpy-put, dram.put, memcpy-get, dram.get, dram.get_pinned, rounds "
		   "2, 4, ... the kvtier side of each pair first",
		   b->o.rounds);
	bench_note(b->o.json, b->o.progress,
		   "footprint per size >= %s; caller buffers: put sources %s, get destinations "
		   "%s, memcpy arena %s, 4 KiB-aligned slots, %.0f%% on huge pages",
		   bench_fmt_size(a, sizeof(a), b->o.footprint),
		   bench_fmt_size(d, sizeof(d), max_bytes), bench_fmt_size(d, sizeof(d), max_bytes),
		   bench_fmt_size(e, sizeof(e), max_bytes), 100 * buf_huge);
	bench_note(b->o.json, b->o.progress,
		   "store: dram.capacity %s, dram.hugepages=%s (%.0f%% of the arena on THP "
		   "by AnonHugePages), chunk %s, shards %s, policy %s",
		   bench_fmt_size(a, sizeof(a), capacity), hp, 100 * cap_huge, chunk, shards,
		   policy);
	if (!b->o.smoke && b->o.footprint < 2 * BD_GIB)
		bench_note(
			b->o.json, b->o.progress,
			"WARNING: footprint below 2 GiB: caches may answer; not a reportable run");
	bd_blank(b);

	for (unsigned i = 0; i < b->o.size_count; i++) {
		c.size = b->o.sizes[i];
		if (bd_copy_size(&c) < 0)
			goto out;
	}
	ret = BENCH_EXIT_OK;
out:
	if (c.q != NULL)
		(void)kvt_queue_destroy(c.q);
	kvt_store_destroy(c.s);
	free(c.scratch);
	free(c.keys);
	free(c.reqs);
	free(c.iov);
	bd_buf_free(&src);
	bd_buf_free(&arena);
	bd_buf_free(&dst);
	return ret;
}

/* ------------------------------------------------------------------------
 * Key derivation: kvt_key_chain_prompt, 16 and 512 tokens per block.
 */

static int bd_keyhash_rows(struct bd *b)
{
	static const uint32_t block_tokens[] = { BD_LK_TOKENS, 512 };
	size_t tokens = b->o.smoke ? 64 * 1024 : 4 * 1024 * 1024;
	size_t prompts = tokens / BD_KH_PROMPT;
	uint8_t digest[32];
	uint32_t *tok = malloc(tokens * sizeof(*tok));
	struct kvt_key *keys = calloc(BD_KH_PROMPT / BD_LK_TOKENS, sizeof(*keys));
	int ret = BENCH_EXIT_FAIL;
	if (tok == NULL || keys == NULL) {
		bench_err(BD_WHO, "out of memory for %zu tokens", tokens);
		goto out;
	}
	int rc = kvt_ns_digest(&bd_ns_desc, digest, NULL, 0);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_ns_digest: %s", kvt_strerror(rc));
		goto out;
	}
	uint64_t x = bench_seed(1, 0xbe9c);
	for (size_t i = 0; i < tokens; i++)
		tok[i] = (uint32_t)(bench_xorshift(&x) % 151936); /* a vocabulary's size */

	for (unsigned t = 0; t < BD_ARRAY_LEN(block_tokens); t++) {
		uint32_t bt = block_tokens[t];
		size_t per = BD_KH_PROMPT / bt;
		double secs[BD_ROUNDS_MAX];
		/* Correctness: the prompt helper agrees with kvt_key_chain. */
		struct kvt_key k0, k1;
		if (kvt_key_chain_prompt(digest, tok, 2 * bt, bt, 0, NULL, 0, keys, 2) != 2 ||
		    kvt_key_chain(digest, NULL, tok, bt, NULL, 0, &k0) != 0 ||
		    kvt_key_chain(digest, &k0, tok + bt, bt, NULL, 0, &k1) != 0 ||
		    keys[0].len != KVT_KEY_HASH_LEN || memcmp(&keys[0].bytes, k0.bytes, 32) != 0 ||
		    memcmp(&keys[1].bytes, k1.bytes, 32) != 0) {
			bench_err(
				BD_WHO,
				"kvt_key_chain_prompt and kvt_key_chain disagree (%u tokens/block)",
				bt);
			goto out;
		}
		for (unsigned r = 0; r < b->o.rounds; r++) {
			bench_progress(b->o.progress, "dram",
				       "keyhash %u tokens/block, round %u/%u", bt, r + 1,
				       b->o.rounds);
			double t0 = bench_now();
			for (size_t p = 0; p < prompts; p++) {
				int64_t n = kvt_key_chain_prompt(digest, tok + p * BD_KH_PROMPT,
								 BD_KH_PROMPT, bt, 0, NULL, 0, keys,
								 per);
				if (n != (int64_t)per) {
					bench_err(BD_WHO,
						  "kvt_key_chain_prompt returned %" PRId64
						  ", want %zu: %s",
						  n, per, n < 0 ? kvt_strerror((int)n) : "short");
					goto out;
				}
			}
			secs[r] = bench_now() - t0;
		}
		double s = bench_median(secs, b->o.rounds);
		double kps = bench_rate((double)(prompts * per), s);
		double mbps = bench_rate((double)tokens * 4, s) / 1e6;
		if (b->o.json) {
			printf("{\"bench\":\"dram.keyhash\",\"block_tokens\":%u,\"keys_per_s\":%.0f,"
			       "\"mbps\":%.1f,\"tokens_per_s\":%.0f,\"keys\":%zu,\"rounds\":%u,"
			       "\"keys_per_s_rounds\":[",
			       bt, kps, mbps, bench_rate((double)tokens, s), prompts * per, b->o.rounds);
			for (unsigned r = 0; r < b->o.rounds; r++)
				printf("%s%.0f", r ? "," : "", bench_rate((double)(prompts * per), secs[r]));
			printf("]}\n");
			fflush(stdout);
		} else {
			struct bench_cell cell = { .bench = "dram.keyhash", .result = "-" };
			snprintf(cell.value, sizeof(cell.value), "%u tok", bt);
			snprintf(cell.kvtier, sizeof(cell.kvtier), "%.3f Mkey/s", kps / 1e6);
			snprintf(cell.baseline, sizeof(cell.baseline), "-");
			snprintf(cell.ratio, sizeof(cell.ratio), "-");
			snprintf(cell.target, sizeof(cell.target), "-");
			snprintf(cell.notes, sizeof(cell.notes),
				 "SHA-256 chain; %.1f MB/s of token bytes (4 B/token)", mbps);
			bd_cell_print(b, &cell);
		}
	}
	ret = BENCH_EXIT_OK;
out:
	free(tok);
	free(keys);
	return ret;
}

/* ------------------------------------------------------------------------
 * Index rows: load >= 1 Mi blocks, longest-prefix lookups, bytes per block.
 */

struct bd_lookup {
	struct bd *b;
	struct kvt_store *s;
	struct kvt_queue *q;
	uint32_t ns;
	size_t prompts;
	struct kvt_key *keys;  /* prompts * BD_LK_KEYS */
	uint8_t *tiers;        /* batch * BD_LK_KEYS */
	struct kvt_req *reqs;
	struct iovec *iov;
	uint8_t *value;        /* the one 4 KiB value every block stores */
	uint8_t want_tiers[BD_LK_HITS];
};

static int bd_load_done(void *ctx, struct kvt_req *r)
{
	(void)ctx;
	if (r->status != KVT_OK) {
		bench_err(BD_WHO, "put of index block %" PRIu64 ": %s", r->user_data,
			  kvt_strerror(r->status));
		return -1;
	}
	return 0;
}

static int bd_lookup_done(void *ctx, struct kvt_req *r)
{
	struct bd_lookup *l = ctx;
	if (r->status != KVT_OK || r->length != BD_LK_HITS) {
		bench_err(BD_WHO,
			  "lookup of prompt %" PRIu64 ": status %s, %" PRIu64
			  " leading blocks, want %d",
			  r->user_data, kvt_strerror(r->status), r->length, BD_LK_HITS);
		return -1;
	}
	if (memcmp(r->tiers, l->want_tiers, BD_LK_HITS) != 0) {
		bench_err(BD_WHO,
			  "lookup of prompt %" PRIu64 ": tiers[] of a hit is not KVT_TIER_DRAM",
			  r->user_data);
		return -1;
	}
	return 0;
}

static int bd_lookup_load(struct bd_lookup *l, double *secs)
{
	unsigned batch = l->b->o.batch;
	size_t n = l->prompts * BD_LK_HITS;
	double t0 = bench_now();
	for (size_t i = 0; i < n; i += batch) {
		unsigned k = n - i < batch ? (unsigned)(n - i) : batch;
		if ((i & 0xffff) == 0)
			bench_progress(l->b->o.progress, "dram", "index: loading block %zu of %zu",
				       i, n);
		for (unsigned j = 0; j < k; j++) {
			size_t b = i + j, p = b / BD_LK_HITS, h = b % BD_LK_HITS;
			struct kvt_req *r = &l->reqs[j];
			memset(r, 0, sizeof(*r));
			r->op = KVT_OP_PUT;
			r->ns = l->ns;
			r->key = l->keys[p * BD_LK_KEYS + h];
			r->iov = l->iov;
			r->iov_count = 1;
			r->user_data = b;
		}
		if (bd_batch(l->q, l->reqs, k, bd_load_done, l) < 0)
			return -1;
	}
	*secs = bench_now() - t0;
	return 0;
}

static double bd_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One pass over every prompt in perm order; batched (KVT_OP_LOOKUP) or sync.
 * secs: wall time; cpu: the process's CPU time (what the pass cost where
 * other processes took the cores: a contended machine stretches secs only). */
static int bd_lookup_pass(struct bd_lookup *l, const uint32_t *perm, bool sync, double *secs,
			  double *cpu)
{
	unsigned batch = l->b->o.batch;
	double t0 = bench_now(), c0 = bd_cpu_now();
	if (sync) {
		for (size_t i = 0; i < l->prompts; i++) {
			size_t p = perm[i];
			int64_t n = kvt_lookup_prefix(l->s, l->ns, &l->keys[p * BD_LK_KEYS],
						      BD_LK_KEYS, l->tiers);
			if (n != BD_LK_HITS || memcmp(l->tiers, l->want_tiers, BD_LK_HITS) != 0) {
				bench_err(BD_WHO,
					  "kvt_lookup_prefix of prompt %zu: %" PRId64 "%s, want %d",
					  p, n,
					  n < 0 ? kvt_strerror((int)n)
						: " leading blocks (or tiers wrong)",
					  BD_LK_HITS);
				return -1;
			}
		}
	} else {
		for (size_t i = 0; i < l->prompts; i += batch) {
			unsigned k = l->prompts - i < batch ? (unsigned)(l->prompts - i) : batch;
			for (unsigned j = 0; j < k; j++) {
				size_t p = perm[i + j];
				struct kvt_req *r = &l->reqs[j];
				memset(r, 0, sizeof(*r));
				r->op = KVT_OP_LOOKUP;
				r->ns = l->ns;
				r->keys = &l->keys[p * BD_LK_KEYS];
				r->key_count = BD_LK_KEYS;
				r->tiers = &l->tiers[j * BD_LK_KEYS];
				r->user_data = p;
			}
			if (bd_batch(l->q, l->reqs, k, bd_lookup_done, l) < 0)
				return -1;
		}
	}
	*secs = bench_now() - t0;
	*cpu = bd_cpu_now() - c0;
	return 0;
}

static void bd_lookup_report(struct bd *b, const char *name, const char *how, size_t prompts,
			     const double *secs, const double *cpu)
{
	double s = bench_median(secs, b->o.rounds);
	double pps = bench_rate((double)prompts, s);
	double kps = pps * (BD_LK_HITS + 1);
	double kpcs = bench_rate((double)prompts * (BD_LK_HITS + 1), bench_median(cpu, b->o.rounds));
	bool pass = kps >= BD_TARGET_KEYS_PER_S;
	if (!pass && !b->o.smoke)
		b->targets_missed++;
	if (b->o.json) {
		printf("{\"bench\":\"%s\",\"keys_per_s\":%.0f,\"prompts_per_s\":%.0f,"
		       "\"keys_submitted_per_s\":%.0f,\"keys_per_prompt\":%d,\"hits_per_prompt\":%d,"
		       "\"index_blocks\":%zu,\"prompts\":%zu,\"rounds\":%u,\"batch\":%u,"
		       "\"target_keys_per_s\":%.0f,\"keys_per_cpu_s\":%.0f",
		       name, kps, pps, pps * BD_LK_KEYS, BD_LK_KEYS, BD_LK_HITS,
		       prompts * BD_LK_HITS, prompts, b->o.rounds, strcmp(how, "sync") ? b->o.batch : 1,
		       BD_TARGET_KEYS_PER_S, kpcs);
		printf(",\"keys_per_s_rounds\":[");
		for (unsigned r = 0; r < b->o.rounds; r++)
			printf("%s%.0f", r ? "," : "",
			       bench_rate((double)prompts * (BD_LK_HITS + 1), secs[r]));
		printf("]");
		bench_json_pass(b->o.smoke, pass);
		printf("}\n");
		fflush(stdout);
		return;
	}
	struct bench_cell cell = { .bench = name, .result = bd_verdict(b, pass) };
	snprintf(cell.value, sizeof(cell.value), "%d keys", BD_LK_KEYS);
	snprintf(cell.kvtier, sizeof(cell.kvtier), "%.2f Mkey/s", kps / 1e6);
	snprintf(cell.baseline, sizeof(cell.baseline), "-");
	snprintf(cell.ratio, sizeof(cell.ratio), "-");
	snprintf(cell.target, sizeof(cell.target), ">= %.0f M", BD_TARGET_KEYS_PER_S / 1e6);
	snprintf(cell.notes, sizeof(cell.notes),
		 "%.0f K prompts/s, %s; %zu-block index; %.2f Mkey per CPU-s", pps / 1e3, how,
		 prompts * BD_LK_HITS, kpcs / 1e6);
	bd_cell_print(b, &cell);
}

static int bd_lookup_rows(struct bd *b)
{
	struct bd_lookup l = { .b = b };
	uint32_t *perm = NULL;
	uint32_t *tok = NULL;
	uint8_t digest[32];
	char a[32], d[32], e[32];
	int ret = BENCH_EXIT_FAIL, rc;
	double secs[BD_ROUNDS_MAX], load_secs;

	l.prompts = (size_t)((b->o.lookup_blocks + BD_LK_HITS - 1) / BD_LK_HITS);
	size_t blocks = l.prompts * BD_LK_HITS;
	uint64_t data = (uint64_t)blocks * BD_LK_VALUE;
	/* Slack for shard imbalance: an eighth, at least 64 MiB. */
	uint64_t capacity = bench_align_up(data + (data / 8 > 64 * BD_MIB ? data / 8 : 64 * BD_MIB), BD_MIB);
	size_t key_bytes = l.prompts * BD_LK_KEYS * sizeof(struct kvt_key);
	uint64_t avail = bd_avail_bytes();
	if (avail != 0 && capacity + key_bytes > avail) {
		bench_err(BD_WHO,
			  "the index rows need %s (store) and %s (keys) but only %s is available; "
			  "lower --lookup-blocks",
			  bench_fmt_size(a, sizeof(a), capacity),
			  bench_fmt_size(d, sizeof(d), key_bytes),
			  bench_fmt_size(e, sizeof(e), avail));
		return BENCH_EXIT_FAIL;
	}

	l.keys = calloc(l.prompts * BD_LK_KEYS, sizeof(*l.keys));
	perm = calloc(l.prompts, sizeof(*perm));
	tok = calloc(BD_LK_KEYS * BD_LK_TOKENS, sizeof(*tok));
	l.tiers = calloc(b->o.batch, BD_LK_KEYS);
	l.reqs = aligned_alloc(64, bench_align_up(b->o.batch * sizeof(*l.reqs), 64));
	l.iov = calloc(1, sizeof(*l.iov));
	l.value = aligned_alloc(BD_ALIGN, BD_LK_VALUE);
	if (l.keys == NULL || perm == NULL || tok == NULL || l.tiers == NULL || l.reqs == NULL ||
	    l.iov == NULL || l.value == NULL) {
		bench_err(BD_WHO, "out of memory for %zu prompts of keys", l.prompts);
		goto out;
	}
	bench_fill(l.value, BD_LK_VALUE, bench_seed(BD_LK_VALUE, 0));
	l.iov->iov_base = l.value;
	l.iov->iov_len = BD_LK_VALUE;
	memset(l.want_tiers, KVT_TIER_DRAM, sizeof(l.want_tiers));

	/* Keys first, untimed: 64-block prompts of random tokens. */
	rc = kvt_ns_digest(&bd_ns_desc, digest, NULL, 0);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_ns_digest: %s", kvt_strerror(rc));
		goto out;
	}
	uint64_t x = bench_seed(2, 0x10c);
	for (size_t p = 0; p < l.prompts; p++) {
		if ((p & 0xfff) == 0)
			bench_progress(b->o.progress, "dram",
				       "index: computing keys of prompt %zu of %zu", p, l.prompts);
		for (size_t t = 0; t < BD_LK_KEYS * BD_LK_TOKENS; t++)
			tok[t] = (uint32_t)(bench_xorshift(&x) % 151936);
		int64_t n = kvt_key_chain_prompt(digest, tok, BD_LK_KEYS * BD_LK_TOKENS, BD_LK_TOKENS,
						 0, NULL, 0, &l.keys[p * BD_LK_KEYS], BD_LK_KEYS);
		if (n != BD_LK_KEYS) {
			bench_err(BD_WHO, "kvt_key_chain_prompt returned %" PRId64 ", want %d", n,
				  BD_LK_KEYS);
			goto out;
		}
		perm[p] = (uint32_t)p;
	}
	/* Prompts arrive in no particular order: a fixed shuffle. */
	for (size_t p = l.prompts; p > 1; p--) {
		size_t j = (size_t)(bench_xorshift(&x) % p);
		uint32_t t = perm[p - 1];
		perm[p - 1] = perm[j];
		perm[j] = t;
	}

	bench_progress(b->o.progress, "dram", "index: opening a store of %s",
		       bench_fmt_size(a, sizeof(a), capacity));
	ret = bd_store_open(b, capacity, "4K", NULL, &l.s, &l.ns);
	if (ret != BENCH_EXIT_OK)
		goto out;
	ret = BENCH_EXIT_FAIL;
	rc = kvt_queue_create(l.s, &l.q);
	if (rc < 0) {
		bench_err(BD_WHO, "kvt_queue_create: %s", kvt_strerror(rc));
		goto out;
	}
	uint64_t meta_open = 0, meta_loaded = 0;
	rc = kvt_store_stat(l.s, "mem.meta_bytes", &meta_open);
	if (rc != KVT_OK) {
		bench_err(BD_WHO, "kvt_store_stat(\"mem.meta_bytes\"): %s",
			  rc == KVT_MISS ? "no such statistic" : kvt_strerror(rc));
		goto out;
	}

	if (bd_lookup_load(&l, &load_secs) < 0) {
		bench_stat_dump(BD_WHO, l.s);
		goto out;
	}
	rc = kvt_store_stat(l.s, "mem.meta_bytes", &meta_loaded);
	if (rc != KVT_OK) {
		bench_err(BD_WHO, "kvt_store_stat(\"mem.meta_bytes\"): %s", kvt_strerror(rc));
		goto out;
	}
	b->meta_done = true;
	b->meta_blocks = blocks;
	b->meta_open = meta_open;
	b->meta_loaded = meta_loaded;
	bd_text_stat(l.s, "dram.hugepages", b->meta_huge, sizeof(b->meta_huge));

	double bps = bench_rate((double)blocks, load_secs);
	if (b->o.json) {
		printf("{\"bench\":\"dram.index_load\",\"value_bytes\":%d,\"blocks\":%zu,"
		       "\"blocks_per_s\":%.0f,\"gbps\":%.3f,\"batch\":%u}\n",
		       BD_LK_VALUE, blocks, bps, bps * BD_LK_VALUE / 1e9, b->o.batch);
	} else {
		struct bench_cell cell = { .bench = "dram.index_load", .result = "-" };
		bench_fmt_size(cell.value, sizeof(cell.value), BD_LK_VALUE);
		snprintf(cell.kvtier, sizeof(cell.kvtier), "%.3f Mput/s", bps / 1e6);
		snprintf(cell.baseline, sizeof(cell.baseline), "-");
		snprintf(cell.ratio, sizeof(cell.ratio), "-");
		snprintf(cell.target, sizeof(cell.target), "-");
		snprintf(cell.notes, sizeof(cell.notes), "%zu blocks into an empty store, once; %.2f GB/s",
			 blocks, bps * BD_LK_VALUE / 1e9);
		bd_cell_print(b, &cell);
	}

	/* A/B: batched submit and the synchronous helper, interleaved. */
	double sync_secs[BD_ROUNDS_MAX], cpu[BD_ROUNDS_MAX], sync_cpu[BD_ROUNDS_MAX];
	for (unsigned r = 0; r < b->o.rounds; r++) {
		bench_progress(b->o.progress, "dram", "lookup round %u/%u", r + 1, b->o.rounds);
		if (bd_lookup_pass(&l, perm, false, &secs[r], &cpu[r]) < 0 ||
		    bd_lookup_pass(&l, perm, true, &sync_secs[r], &sync_cpu[r]) < 0) {
			bench_stat_dump(BD_WHO, l.s);
			goto out;
		}
	}
	bd_lookup_report(b, "dram.lookup", "kvt_submit", l.prompts, secs, cpu);
	bd_lookup_report(b, "dram.lookup_sync", "sync", l.prompts, sync_secs, sync_cpu);
	ret = BENCH_EXIT_OK;
out:
	if (l.q != NULL)
		(void)kvt_queue_destroy(l.q);
	kvt_store_destroy(l.s);
	free(l.keys);
	free(perm);
	free(tok);
	free(l.tiers);
	free(l.reqs);
	free(l.iov);
	free(l.value);
	return ret;
}

static void bd_meta_report(struct bd *b)
{
	if (!b->meta_done)
		return;
	double per = (double)b->meta_loaded / (double)b->meta_blocks;
	double delta = ((double)b->meta_loaded - (double)b->meta_open) / (double)b->meta_blocks;
	bool pass = per <= BD_TARGET_META;
	if (!pass && !b->o.smoke)
		b->targets_missed++;
	if (b->o.json) {
		printf("{\"bench\":\"dram.meta\",\"bytes_per_block\":%.1f,\"blocks\":%" PRIu64
		       ",\"value_bytes\":%d,\"meta_bytes\":%" PRIu64 ",\"meta_bytes_at_open\":%" PRIu64
		       ",\"delta_bytes_per_block\":%.1f,\"hugepages\":",
		       per, b->meta_blocks, BD_LK_VALUE, b->meta_loaded, b->meta_open, delta);
		bd_json_str(stdout, b->meta_huge);
		printf(",\"target\":%.0f", BD_TARGET_META);
		bench_json_pass(b->o.smoke, pass);
		printf("}\n");
		fflush(stdout);
		return;
	}
	struct bench_cell cell = { .bench = "dram.meta", .result = bd_verdict(b, pass) };
	bench_fmt_size(cell.value, sizeof(cell.value), BD_LK_VALUE);
	snprintf(cell.kvtier, sizeof(cell.kvtier), "%.1f B/block", per);
	snprintf(cell.baseline, sizeof(cell.baseline), "-");
	snprintf(cell.ratio, sizeof(cell.ratio), "-");
	snprintf(cell.target, sizeof(cell.target), "<= %.0f B", BD_TARGET_META);
	snprintf(cell.notes, sizeof(cell.notes),
		 "mem.meta_bytes / blocks (%.1f B/block added by the load); hugepages=%s", delta,
		 b->meta_huge);
	bd_cell_print(b, &cell);
}

/* ------------------------------------------------------------------------
 * Command line.
 */

static void bd_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench dram [options]\n"
		"\n"
		"Measure libkvtier's DRAM tier through its public API, one thread:\n"
		"  dram.put, dram.get, dram.get_pinned  GB/s against memcpy of the same bytes\n"
		"                       between caller buffers rotating over the footprint\n"
		"  dram.keyhash         SHA-256 key derivation (kvt_key_chain_prompt)\n"
		"  dram.index_load, dram.lookup, dram.lookup_sync\n"
		"                       longest-prefix lookups of 64-key prompts (32 hits)\n"
		"                       over an index of --lookup-blocks blocks\n"
		"  dram.meta            index and metadata bytes per block (mem.meta_bytes)\n"
		"Every timed phase is verified byte for byte; a wrong byte exits 1.\n"
		"\n"
		"Options:\n"
		"  --smoke              small and quick (CI): 64 MiB footprint, 16 Ki-block\n"
		"                       index, every value verified, targets not judged\n"
		"  --json               one JSON object per line instead of the table\n"
		"  --footprint SIZE     bytes each value size rotates over (default 2G;\n"
		"                       the three caller buffers are each this big)\n"
		"  --sizes LIST         value sizes, comma-separated (default 256K,2M,16M)\n"
		"  --rounds N           A/B rounds; medians are reported (default 3)\n"
		"  --lookup-blocks N    blocks in the lookup index (default 1M = 1048576)\n"
		"  --batch N            requests per kvt_submit (default 16)\n"
		"  --hugepages MODE     auto, thp or off: the store's dram.hugepages and the\n"
		"                       page mode of the bench's own buffers (default auto)\n"
		"  --only LIST          run some rows: copy, keyhash, lookup (default all)\n"
		"  -o, --option NAME=VALUE\n"
		"                       set a store option after the bench's own (repeatable)\n"
		"  -h, --help           this text\n"
		"\n"
		"SIZE takes K, M, G, T suffixes (powers of 1024).  GB/s is 1e9 bytes/s.\n"
		"Exit status: 0 ran and verified (even if a target was missed), 1 runtime\n"
		"failure or wrong bytes, 2 usage error.  Manual: kvtier-bench(1).\n");
}

static int bd_parse_args(struct bd_opts *o, int argc, char **argv)
{
	enum { O_SMOKE = 256, O_JSON, O_FOOTPRINT, O_ROUNDS, O_SIZES, O_BLOCKS, O_BATCH,
	       O_HUGE, O_ONLY };
	static const struct option longopts[] = {
		{ "smoke", no_argument, NULL, O_SMOKE },
		{ "json", no_argument, NULL, O_JSON },
		{ "footprint", required_argument, NULL, O_FOOTPRINT },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "lookup-blocks", required_argument, NULL, O_BLOCKS },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "hugepages", required_argument, NULL, O_HUGE },
		{ "only", required_argument, NULL, O_ONLY },
		{ "option", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_fp = false, have_blocks = false, have_sizes = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->rounds = 3;
	o->batch = 16;
	o->hugepages = "auto";
	o->groups = BD_GROUP_COPY | BD_GROUP_KEYHASH | BD_GROUP_LOOKUP;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			bd_usage(stdout);
			return -1;
		case O_SMOKE:
			o->smoke = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_FOOTPRINT:
			if (bench_parse_size(optarg, &o->footprint) < 0 || o->footprint == 0)
				return bench_usage_err(
					BD_WHO, "--footprint '%s': want a size such as 2G", optarg);
			have_fp = true;
			break;
		case O_ROUNDS:
			if (bench_parse_uint(optarg, 1, BD_ROUNDS_MAX, &o->rounds) < 0)
				return bench_usage_err(BD_WHO, "--rounds '%s': want 1..%d", optarg,
						       BD_ROUNDS_MAX);
			break;
		case O_SIZES:
			if (bench_parse_sizes(BD_WHO, optarg, KVT_VALUE_MAX, o->sizes, BD_SIZES_MAX,
					      &o->size_count) != 0)
				return BENCH_EXIT_USAGE;
			have_sizes = true;
			break;
		case O_BLOCKS:
			if (bench_parse_size(optarg, &o->lookup_blocks) < 0 || o->lookup_blocks == 0 ||
			    o->lookup_blocks > (UINT64_C(1) << 32))
				return bench_usage_err(BD_WHO,
						       "--lookup-blocks '%s': want 1..4G, e.g. 1M",
						       optarg);
			have_blocks = true;
			break;
		case O_BATCH:
			if (bench_parse_uint(optarg, 1, BD_BATCH_MAX, &o->batch) < 0)
				return bench_usage_err(BD_WHO, "--batch '%s': want 1..%u", optarg,
						       BD_BATCH_MAX);
			break;
		case O_HUGE:
			if (strcmp(optarg, "auto") && strcmp(optarg, "thp") && strcmp(optarg, "off"))
				return bench_usage_err(
					BD_WHO, "--hugepages '%s': want auto, thp or off", optarg);
			o->hugepages = optarg;
			break;
		case O_ONLY: {
			char buf[128], *save = NULL, *tok;
			snprintf(buf, sizeof(buf), "%s", optarg);
			o->groups = 0;
			for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
				if (strcmp(tok, "copy") == 0)
					o->groups |= BD_GROUP_COPY;
				else if (strcmp(tok, "keyhash") == 0)
					o->groups |= BD_GROUP_KEYHASH;
				else if (strcmp(tok, "lookup") == 0)
					o->groups |= BD_GROUP_LOOKUP;
				else
					return bench_usage_err(
						BD_WHO,
						"--only: '%s' is not copy, keyhash or lookup", tok);
			}
			if (o->groups == 0)
				return bench_usage_err(
					BD_WHO, "--only: empty list; e.g. --only copy,lookup");
			break;
		}
		case 'o':
			if (strchr(optarg, '=') == NULL || optarg[0] == '=')
				return bench_usage_err(
					BD_WHO, "-o '%s': want NAME=VALUE, e.g. -o dram.policy=lru",
					optarg);
			if (o->store_opt_count == BD_STORE_OPTS_MAX)
				return bench_usage_err(BD_WHO, "-o: at most %d store options",
						       BD_STORE_OPTS_MAX);
			o->store_opts[o->store_opt_count++] = optarg;
			break;
		case ':':
			return bench_usage_err(BD_WHO, "option '%s' needs a value",
					       argv[optind - 1]);
		default:
			return bench_usage_err(BD_WHO, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bench_usage_err(BD_WHO, "unexpected argument '%s'", argv[optind]);
	if (!have_sizes) {
		o->sizes[0] = 256 * BD_KIB;
		o->sizes[1] = 2 * BD_MIB;
		o->sizes[2] = 16 * BD_MIB;
		o->size_count = 3;
	}
	if (!have_fp)
		o->footprint = o->smoke ? 64 * BD_MIB : 2 * BD_GIB;
	if (!have_blocks)
		o->lookup_blocks = o->smoke ? 16 * 1024 : 1024 * 1024;
	for (unsigned i = 0; i < o->size_count; i++)
		if (o->sizes[i] > o->footprint)
			return bench_usage_err(
				BD_WHO, "value size %" PRIu64 " exceeds --footprint %" PRIu64,
				o->sizes[i], o->footprint);
	o->progress = isatty(STDERR_FILENO);
	return 0;
}

int bench_dram_main(int argc, char **argv)
{
	struct bd b;
	memset(&b, 0, sizeof(b));
	int rc = bd_parse_args(&b.o, argc, argv);
	if (rc != 0)
		return rc < 0 ? BENCH_EXIT_OK : rc;

	if (!b.o.json) {
		printf("# kvtier bench dram%s: libkvtier %s\n", b.o.smoke ? " --smoke" : "",
		       kvt_version());
		if (b.o.smoke)
			printf("# smoke run: checks that the rows run and verify; ratios mean nothing\n");
	}
	bench_load_note(BD_WHO, b.o.json, b.o.progress, "start");
	rc = BENCH_EXIT_OK;
	if (b.o.groups & BD_GROUP_COPY)
		rc = bd_copy_rows(&b);
	if (rc == BENCH_EXIT_OK && (b.o.groups & BD_GROUP_KEYHASH)) {
		if (!b.o.json)
			printf("\n");
		rc = bd_keyhash_rows(&b);
	}
	if (rc == BENCH_EXIT_OK && (b.o.groups & BD_GROUP_LOOKUP)) {
		bd_blank(&b);
		bench_note(b.o.json, b.o.progress,
			   "index rows: keys_per_s counts the keys a longest-prefix scan examines: "
			   "33 per 64-key prompt (32 hits, then the first miss)");
		rc = bd_lookup_rows(&b);
		bd_meta_report(&b);
	}
	bench_progress_end(b.o.progress);
	if (rc == BENCH_EXIT_OK)
		bench_load_note(BD_WHO, b.o.json, b.o.progress, "end");
	if (rc == BENCH_EXIT_OK && !b.o.json) {
		if (b.o.smoke)
			printf("# smoke: every row ran and every byte verified\n");
		else if (b.targets_missed)
			printf("# %u row(s) missed a target (marked FAIL); bytes all verified\n",
			       b.targets_missed);
		else
			printf("# every target met; bytes all verified\n");
	}
	return rc;
}

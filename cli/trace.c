/*
 * trace.c - request traces for "kvtier replay": the Mooncake JSONL reader,
 * a synthetic trace generator, and the ideal (unlimited cache) hit ratio.
 *
 * Owns struct rp_trace and everything it points to.  A Mooncake trace has
 * one JSON object per line (shared/data/traces/README.md):
 *
 *   {"timestamp": 27482, "input_length": 6955, "output_length": 52,
 *    "hash_ids": [46, 47, 48, ...]}
 *
 * hash_ids name 512-token blocks, each a hash of its block and every block
 * before it, so equal ids mean equal prefixes.  Other traces in the same
 * shape name blocks of other sizes (Alibaba's Qwen traces: 16 tokens, with
 * chat_id, turn, ... beside, and timestamps in seconds with a fraction):
 * rp_trace_check finds the block size every request fits, and the
 * timestamps' unit, over the whole file.  JSON is parsed by jansson; this
 * file only checks what the fields must be and says which line broke the
 * rule.  Nothing here touches a store.
 *
 * Invariant: every request held by a loaded trace has 1 <= n_ids <=
 * RP_IDS_MAX and n_ids == ceil(input_len / block_tokens), the trace's.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "replay.h"

static void trace_err(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || err_len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
}

/* A non-negative JSON integer field of obj into *v; -1 with a message. */
static int trace_uint(json_t *obj, const char *name, int required, uint64_t *v, char *err,
		      size_t err_len)
{
	json_t *f = json_object_get(obj, name);
	if (f == NULL) {
		if (!required) {
			*v = 0;
			return 0;
		}
		trace_err(err, err_len, "missing field \"%s\"", name);
		return -1;
	}
	if (!json_is_integer(f) || json_integer_value(f) < 0) {
		trace_err(err, err_len, "field \"%s\" is not a non-negative integer", name);
		return -1;
	}
	*v = (uint64_t)json_integer_value(f);
	return 0;
}

int rp_parse_line(const char *line, size_t len, struct rp_req *out, char *err, size_t err_len)
{
	json_error_t jerr;
	json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	uint64_t *ids = NULL;
	int rc = -1;

	if (root == NULL) {
		trace_err(err, err_len, "bad JSON at column %d: %s", jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		trace_err(err, err_len, "not a JSON object");
		goto out;
	}
	struct rp_req r = { .ts = -1 };
	json_t *ts = json_object_get(root, "timestamp");
	if (ts != NULL) {
		if (!json_is_number(ts) || json_number_value(ts) < 0 ||
		    json_number_value(ts) > 1e15) {
			trace_err(err, err_len, "field \"timestamp\" is not a non-negative number");
			goto out;
		}
		r.ts = json_number_value(ts);
	}
	if (trace_uint(root, "input_length", 1, &r.input_len, err, err_len) < 0 ||
	    trace_uint(root, "output_length", 0, &r.output_len, err, err_len) < 0)
		goto out;
	if (r.input_len == 0) {
		trace_err(err, err_len, "input_length is 0");
		goto out;
	}
	json_t *arr = json_object_get(root, "hash_ids");
	if (arr == NULL || !json_is_array(arr)) {
		trace_err(err, err_len, "missing array \"hash_ids\"");
		goto out;
	}
	size_t n = json_array_size(arr);
	if (n == 0 || n > r.input_len) {
		trace_err(err, err_len, "hash_ids has %zu ids for input_length %" PRIu64
			  " (1 to one a token)", n, r.input_len);
		goto out;
	}
	if (n > RP_IDS_MAX) {
		trace_err(err, err_len, "request of %zu blocks: more than %u", n, RP_IDS_MAX);
		goto out;
	}
	ids = malloc(n * sizeof *ids);
	if (ids == NULL) {
		trace_err(err, err_len, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(arr, i);
		if (!json_is_integer(e)) {
			trace_err(err, err_len, "hash_ids[%zu] is not an integer", i);
			goto out;
		}
		/* a negative id (a signed 64-bit hash) as its two's complement */
		ids[i] = (uint64_t)json_integer_value(e);
	}
	r.ids = ids;
	r.n_ids = (uint32_t)n;
	*out = r;
	ids = NULL;
	rc = 0;
out:
	free(ids);
	json_decref(root);
	return rc;
}

static int trace_push(struct rp_trace *t, const struct rp_req *r)
{
	if (t->count == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct rp_req *p = realloc(t->reqs, cap * sizeof *p);
		if (p == NULL)
			return -ENOMEM;
		t->reqs = p;
		t->cap = cap;
	}
	t->reqs[t->count++] = *r;
	return 0;
}

void rp_trace_free(struct rp_trace *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->count; i++)
		free(t->reqs[i].ids);
	free(t->reqs);
	memset(t, 0, sizeof *t);
}

/* The fewest and the most tokens a block of r can hold for its hash_ids
 * count to be ceil(input_len / B): [*lo, *hi]. */
static void trace_block_range(const struct rp_req *r, uint64_t *lo, uint64_t *hi)
{
	*lo = (r->input_len + r->n_ids - 1) / r->n_ids;
	*hi = r->n_ids > 1 ? (r->input_len - 1) / (r->n_ids - 1) : UINT64_MAX;
}

int rp_trace_check(struct rp_trace *t, const uint64_t *line, uint32_t block_tokens,
		   const char *ts_unit, char *err, size_t err_len)
{
	uint64_t lo = 1, hi = UINT64_MAX, b = block_tokens, prev = 0;
	size_t lo_at = 0, hi_at = 0;
	double scale = 1;
	bool frac = false;

	for (size_t i = 0; i < t->count; i++) {
		uint64_t l, h;
		trace_block_range(&t->reqs[i], &l, &h);
		if (block_tokens && (block_tokens < l || block_tokens > h)) {
			trace_err(err, err_len, "line %" PRIu64 ": hash_ids has %" PRIu32 " ids but "
				  "input_length %" PRIu64 " needs %" PRIu64 " blocks of %" PRIu32
				  " tokens", line[i], t->reqs[i].n_ids, t->reqs[i].input_len,
				  (t->reqs[i].input_len + block_tokens - 1) / block_tokens,
				  block_tokens);
			return -1;
		}
		if (l > lo) {
			lo = l;
			lo_at = i;
		}
		if (h < hi) {
			hi = h;
			hi_at = i;
		}
		frac |= t->reqs[i].ts >= 0 && t->reqs[i].ts != floor(t->reqs[i].ts);
	}
	if (!block_tokens) {
		if (lo > hi) {
			trace_err(err, err_len, "line %" PRIu64 ": hash_ids has %" PRIu32 " ids for "
				  "input_length %" PRIu64 ", at least %" PRIu64 " tokens a block, but "
				  "line %" PRIu64 " has %" PRIu32 " for %" PRIu64 ", at most %" PRIu64
				  ": no one block size fits the trace", line[lo_at],
				  t->reqs[lo_at].n_ids, t->reqs[lo_at].input_len, lo, line[hi_at],
				  t->reqs[hi_at].n_ids, t->reqs[hi_at].input_len, hi);
			return -1;
		}
		if (lo <= RP_BLOCK_TOKENS && RP_BLOCK_TOKENS <= hi) {
			b = RP_BLOCK_TOKENS;
			t->block_why = "fits every request, Mooncake's";
		} else {
			/* the power of two nearest 512 in [lo, hi], else lo */
			b = lo;
			if (hi < RP_BLOCK_TOKENS) {
				uint64_t p = RP_BLOCK_TOKENS;
				while (p > hi)
					p /= 2;
				if (p >= lo)
					b = p;
			} else {
				uint64_t p = RP_BLOCK_TOKENS;
				while (p < lo && p <= UINT32_MAX / 2)
					p *= 2;
				if (p >= lo && p <= hi)
					b = p;
			}
			if (b > UINT32_MAX) {
				trace_err(err, err_len, "no block size under 2^32 tokens fits the trace");
				return -1;
			}
			t->block_why = "the one the hash_ids counts fit";
		}
	} else {
		t->block_why = "as asked (--block-tokens)";
	}
	t->block_tokens = (uint32_t)b;
	if (ts_unit == NULL)
		ts_unit = frac ? "s" : "ms";
	if (strcmp(ts_unit, "s") == 0)
		scale = 1000;
	else if (strcmp(ts_unit, "ms") != 0) {
		trace_err(err, err_len, "timestamp unit \"%s\": ms or s", ts_unit);
		return -1;
	}
	t->ts_unit = scale == 1 ? "ms" : "s";
	for (size_t i = 0; i < t->count; i++) {
		struct rp_req *r = &t->reqs[i];
		r->block_tokens = (uint32_t)b;
		if (r->ts >= 0)
			prev = (uint64_t)llround(r->ts * scale);
		r->ts_ms = prev;
	}
	return 0;
}

int rp_trace_load(const char *path, uint32_t block_tokens, const char *ts_unit,
		  struct rp_trace *t, char *err, size_t err_len)
{
	char msg[512];
	char *line = NULL;
	size_t line_cap = 0, lines_cap = 0;
	uint64_t lineno = 0, *lines = NULL;
	ssize_t n;
	int rc = -1;

	memset(t, 0, sizeof *t);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		trace_err(err, err_len, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &line_cap, f)) >= 0) {
		lineno++;
		size_t len = (size_t)n;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
				   line[len - 1] == ' ' || line[len - 1] == '\t'))
			len--;
		if (len == 0)
			continue;
		struct rp_req r;
		if (rp_parse_line(line, len, &r, msg, sizeof msg) < 0) {
			if (t->count == 0 && lineno == 1 && line[0] != '{' && memchr(line, ',', len))
				trace_err(err, err_len, "%s:1: not a JSON-lines trace (CSV? a CSV "
					  "trace such as Azure's has no hash_ids: replay needs "
					  "each prompt's block hashes)", path);
			else
				trace_err(err, err_len, "%s:%" PRIu64 ": %s", path, lineno, msg);
			goto out;
		}
		if (t->count == lines_cap) {
			size_t cap = lines_cap ? 2 * lines_cap : 1024;
			uint64_t *nl = realloc(lines, cap * sizeof *nl);
			if (nl == NULL) {
				free(r.ids);
				trace_err(err, err_len, "%s:%" PRIu64 ": out of memory", path, lineno);
				goto out;
			}
			lines = nl;
			lines_cap = cap;
		}
		lines[t->count] = lineno;
		if (trace_push(t, &r) < 0) {
			free(r.ids);
			trace_err(err, err_len, "%s:%" PRIu64 ": out of memory", path, lineno);
			goto out;
		}
	}
	if (ferror(f)) {
		trace_err(err, err_len, "%s: read error after line %" PRIu64, path, lineno);
		goto out;
	}
	if (t->count == 0) {
		trace_err(err, err_len, "%s: no requests in the file", path);
		goto out;
	}
	if (rp_trace_check(t, lines, block_tokens, ts_unit, msg, sizeof msg) < 0) {
		if (strncmp(msg, "line ", 5) == 0)
			trace_err(err, err_len, "%s:%s", path, msg + 5);
		else
			trace_err(err, err_len, "%s: %s", path, msg);
		goto out;
	}
	rc = 0;
out:
	free(lines);
	free(line);
	fclose(f);
	if (rc < 0)
		rp_trace_free(t);
	return rc;
}

int rp_trace_write(const struct rp_trace *t, FILE *f)
{
	for (size_t i = 0; i < t->count; i++) {
		const struct rp_req *r = &t->reqs[i];
		fprintf(f, "{\"timestamp\": %" PRIu64 ", \"input_length\": %" PRIu64
			   ", \"output_length\": %" PRIu64 ", \"hash_ids\": [",
			r->ts_ms, r->input_len, r->output_len);
		for (uint32_t j = 0; j < r->n_ids; j++) /* signed, as read */
			fprintf(f, "%s%" PRId64, j ? ", " : "", (int64_t)r->ids[j]);
		fputs("]}\n", f);
	}
	return ferror(f) ? -1 : 0;
}

uint64_t rp_block_tokens(const struct rp_req *r, uint32_t i)
{
	uint64_t start = (uint64_t)i * r->block_tokens;
	if (start >= r->input_len)
		return 0;
	uint64_t left = r->input_len - start;
	return left < r->block_tokens ? left : r->block_tokens;
}

/* ------------------------------------------------------------------------
 * A set of hash ids (replay.h): open addressing, a byte a slot saying
 * whether it is taken (an id is any 64-bit value: negative JSON integers
 * are kept as their two's complement).
 */
static uint64_t trace_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return x;
}

int rp_idset_has(const struct rp_idset *s, uint64_t id)
{
	if (s->cap == 0)
		return 0;
	for (size_t i = trace_mix(id) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->used[i])
			return 0;
		if (s->slot[i] == id)
			return 1;
	}
}

int rp_idset_add(struct rp_idset *s, uint64_t id)
{
	if ((s->count + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *p = malloc(cap * sizeof *p);
		uint8_t *u = calloc(cap, 1);
		if (p == NULL || u == NULL) {
			free(p);
			free(u);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->used[i])
				continue;
			size_t j = trace_mix(s->slot[i]) & (cap - 1);
			while (u[j])
				j = (j + 1) & (cap - 1);
			p[j] = s->slot[i];
			u[j] = 1;
		}
		rp_idset_free(s);
		s->slot = p;
		s->used = u;
		s->cap = cap;
	}
	size_t i = trace_mix(id) & (s->cap - 1);
	while (s->used[i]) {
		if (s->slot[i] == id)
			return 0;
		i = (i + 1) & (s->cap - 1);
	}
	s->slot[i] = id;
	s->used[i] = 1;
	s->count++;
	return 1;
}

void rp_idset_free(struct rp_idset *s)
{
	free(s->slot);
	free(s->used);
	s->slot = NULL;
	s->used = NULL;
	s->cap = 0;
}

int rp_ideal(const struct rp_trace *t, int per_req, struct rp_ideal *out)
{
	struct rp_idset set = { 0 };
	memset(out, 0, sizeof *out);
	if (per_req) {
		out->req_hit_tokens = calloc(t->count ? t->count : 1, sizeof(uint64_t));
		if (out->req_hit_tokens == NULL)
			return -ENOMEM;
	}
	for (size_t i = 0; i < t->count; i++) {
		const struct rp_req *r = &t->reqs[i];
		uint32_t h = 0;
		uint64_t ht = 0;
		/* The lookup first: only blocks put by earlier requests count. */
		while (h < r->n_ids && rp_idset_has(&set, r->ids[h])) {
			ht += rp_block_tokens(r, h);
			h++;
		}
		for (uint32_t j = 0; j < r->n_ids; j++) {
			if (rp_idset_add(&set, r->ids[j]) < 0) {
				rp_idset_free(&set);
				free(out->req_hit_tokens);
				out->req_hit_tokens = NULL;
				return -ENOMEM;
			}
		}
		out->blocks += r->n_ids;
		out->hit_blocks += h;
		out->tokens += r->input_len;
		out->hit_tokens += ht;
		if (per_req)
			out->req_hit_tokens[i] = ht;
	}
	out->unique_blocks = set.count;
	rp_idset_free(&set);
	return 0;
}

/* ------------------------------------------------------------------------
 * The synthetic trace.  Three kinds of request, drawn per request:
 *
 *   50%  the next turn of an open conversation: its previous prompt's full
 *        blocks, then 1..3 new blocks (the answer and the next question);
 *   30%  a new conversation: one of 8 shared system prompts (1..4 blocks)
 *        then 1..2 new blocks;
 *   20%  a question on a document (8..40 blocks): one of the 16 most
 *        recent documents (60%) or a new one, then one new block.
 *
 * The last block of every prompt is partial (1..512 tokens), as in the
 * Mooncake traces; arrivals are Poisson, 4 requests a second on average.
 */

#define SYNTH_SYS 8
#define SYNTH_CONVS 64
#define SYNTH_DOCS 16

struct synth_rng {
	uint64_t s;
};

static uint64_t synth_next(struct synth_rng *r)
{
	uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint32_t synth_range(struct synth_rng *r, uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(synth_next(r) % (uint64_t)(hi - lo + 1));
}

struct synth_seq {
	uint64_t ids[RP_SYNTH_IDS_MAX];
	uint32_t n; /* full blocks only */
};

int rp_trace_synth(struct rp_trace *t, uint32_t count, uint64_t seed)
{
	struct synth_rng rng = { seed };
	struct synth_seq *sys = calloc(SYNTH_SYS, sizeof *sys);
	struct synth_seq *conv = calloc(SYNTH_CONVS, sizeof *conv);
	struct synth_seq *doc = calloc(SYNTH_DOCS, sizeof *doc);
	uint32_t n_conv = 0, n_doc = 0, next_doc = 0;
	uint64_t next_id = 0;
	double now_ms = 0;
	int rc = -ENOMEM;

	memset(t, 0, sizeof *t);
	t->synthetic = 1;
	t->block_tokens = RP_BLOCK_TOKENS;
	t->block_why = "the synthetic traces'";
	t->ts_unit = "ms";
	if (sys == NULL || conv == NULL || doc == NULL)
		goto out;
	for (int i = 0; i < SYNTH_SYS; i++) {
		sys[i].n = synth_range(&rng, 1, 4);
		for (uint32_t j = 0; j < sys[i].n; j++)
			sys[i].ids[j] = next_id++;
	}
	for (uint32_t k = 0; k < count; k++) {
		uint64_t ids[RP_SYNTH_IDS_MAX];
		uint32_t n = 0, add;
		uint32_t pick = synth_range(&rng, 0, 99);
		struct synth_seq *keep = NULL; /* where this prompt's full blocks go */

		if (pick < 50 && n_conv > 0) {
			keep = &conv[synth_range(&rng, 0, n_conv - 1)];
			memcpy(ids, keep->ids, keep->n * sizeof ids[0]);
			n = keep->n;
			add = synth_range(&rng, 1, 3);
		} else if (pick < 80) { /* (or a first turn when none is open) */
			/* a new conversation replaces a random one when all are open */
			keep = n_conv < SYNTH_CONVS ? &conv[n_conv++]
						    : &conv[synth_range(&rng, 0, SYNTH_CONVS - 1)];
			const struct synth_seq *s = &sys[synth_range(&rng, 0, SYNTH_SYS - 1)];
			memcpy(ids, s->ids, s->n * sizeof ids[0]);
			n = s->n;
			add = synth_range(&rng, 1, 2);
		} else {
			struct synth_seq *d;
			if (n_doc > 0 && synth_range(&rng, 0, 99) < 60) {
				d = &doc[synth_range(&rng, 0, n_doc - 1)];
			} else {
				d = &doc[next_doc];
				next_doc = (next_doc + 1) % SYNTH_DOCS;
				if (n_doc < SYNTH_DOCS)
					n_doc++;
				d->n = synth_range(&rng, 8, 40);
				for (uint32_t j = 0; j < d->n; j++)
					d->ids[j] = next_id++;
			}
			memcpy(ids, d->ids, d->n * sizeof ids[0]);
			n = d->n;
			add = 1;
		}
		if (n + add > RP_SYNTH_IDS_MAX / 2) { /* a conversation that grew too long restarts */
			n = 0;
			add = 1;
		}
		for (uint32_t j = 0; j < add; j++)
			ids[n++] = next_id++;
		if (keep != NULL) { /* the next turn keeps every block but the partial last */
			memcpy(keep->ids, ids, (n - 1) * sizeof ids[0]);
			keep->n = n - 1;
		}
		struct rp_req r = {
			.ts_ms = (uint64_t)now_ms,
			.input_len = (uint64_t)(n - 1) * RP_BLOCK_TOKENS + synth_range(&rng, 1, RP_BLOCK_TOKENS),
			.output_len = synth_range(&rng, 1, 512),
			.n_ids = n,
			.block_tokens = RP_BLOCK_TOKENS,
			.ts = now_ms,
		};
		r.ids = malloc(n * sizeof ids[0]);
		if (r.ids == NULL)
			goto out;
		memcpy(r.ids, ids, n * sizeof ids[0]);
		if (trace_push(t, &r) < 0) {
			free(r.ids);
			goto out;
		}
		/* exponential gap, mean 250 ms */
		double u = ((double)(synth_next(&rng) >> 11) + 0.5) / 9007199254740992.0;
		now_ms += -250.0 * log(u);
	}
	rc = 0;
out:
	free(sys);
	free(conv);
	free(doc);
	if (rc < 0)
		rp_trace_free(t);
	return rc;
}

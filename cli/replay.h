/*
 * replay.h - "kvtier replay": request traces, model and GPU profiles, the
 * what-if model.  Internal to the CLI (cli/trace.c, cli/profiles.c,
 * cli/replay.c), exposed here so that unit tests and the fuzzer reach the
 * trace parser and the formulas without going through the command line.
 * Nothing here touches a store; only cli/replay.c does, through kvtier.h.
 */
#ifndef KVT_CLI_REPLAY_H
#define KVT_CLI_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Tokens per block (per hash id) in a Mooncake trace, and of the synthetic
 * traces; other traces have other block sizes (Alibaba's Qwen traces: 16;
 * Dynamo's data generator: any), which rp_trace_load finds or is told. */
#define RP_BLOCK_TOKENS 512u
/* Longest request accepted, in blocks: a sanity bound (2M tokens at 32
 * tokens a block, 32M at 512). */
#define RP_IDS_MAX 65536u
/* The synthetic traces' longest conversation: a bound of their generator. */
#define RP_SYNTH_IDS_MAX 4096u

/* ------------------------------------------------------------------------
 * Traces (cli/trace.c)
 */

/* One request of a trace.  ids is owned by the trace that holds it. */
struct rp_req {
	uint64_t ts_ms;      /* arrival, ms from trace start */
	uint64_t input_len;  /* prompt tokens, >= 1 */
	uint64_t output_len; /* generated tokens (not replayed; reported) */
	uint64_t *ids;       /* n_ids prefix-chained block hash ids (a negative
			      * one as its two's complement) */
	uint32_t n_ids;      /* == ceil(input_len / block_tokens) */
	uint32_t block_tokens; /* the trace's tokens a block */
	double ts;           /* rp_parse_line: the timestamp as written (-1: none) */
};

struct rp_trace {
	struct rp_req *reqs; /* count requests, in file order */
	size_t count, cap;
	int synthetic;       /* 1 if made by rp_trace_synth */
	uint32_t block_tokens; /* tokens a hash id stands for */
	const char *block_why; /* how block_tokens was chosen (static string) */
	const char *ts_unit; /* "ms" or "s": the timestamps' unit */
};

/*
 * Parse one JSON line of a Mooncake trace into *out (out->ids allocated
 * with malloc; the caller frees it).  Required fields: input_length (a
 * non-negative integer) and hash_ids (1 to RP_IDS_MAX integers, signed
 * 64-bit, at most one a token); timestamp (a non-negative number, kept as written in out->ts)
 * and output_length (0) optional; other fields (chat_id, turn, ...) are
 * ignored.  out->block_tokens is 0 and out->ts_ms unset: whether the ids
 * match the input length, and the timestamps' unit, are the whole
 * trace's (rp_trace_check).  Returns 0, or -1 with a message in err
 * (never allocates on failure).  Any thread.
 */
int rp_parse_line(const char *line, size_t len, struct rp_req *out, char *err, size_t err_len);

/*
 * Give t's requests (parsed by rp_parse_line; line[i] the file line of
 * request i, for messages) their block size and arrival times.
 * block_tokens 0: the block size every request's hash_ids count fits
 * (ceil(input_length / B) ids), 512 (Mooncake's) where it fits, else the
 * power of two nearest it; otherwise every request must fit the one given.
 * ts_unit NULL: milliseconds (Mooncake's), or seconds if any timestamp has
 * a fraction (Alibaba's traces); "ms" or "s": as told.  A request without
 * a timestamp arrives with the one before it.  Returns 0, or -1 with a
 * message in err.
 */
int rp_trace_check(struct rp_trace *t, const uint64_t *line, uint32_t block_tokens,
		   const char *ts_unit, char *err, size_t err_len);

/*
 * Read a whole trace file: one request a line; empty lines are skipped;
 * then rp_trace_check (block_tokens, ts_unit: as there).  Returns 0, or -1
 * with "PATH:LINE: what is wrong" in err (and *t empty).
 */
int rp_trace_load(const char *path, uint32_t block_tokens, const char *ts_unit,
		  struct rp_trace *t, char *err, size_t err_len);

/*
 * A synthetic trace, deterministic for (count, seed): shared system
 * prompts, multi-turn conversations that extend their own earlier turns,
 * and one-off documents, with Poisson arrivals (doc/replay.md says how).
 * Returns 0 or -ENOMEM.
 */
int rp_trace_synth(struct rp_trace *t, uint32_t count, uint64_t seed);

/* Write t as Mooncake JSONL.  Returns 0 or -1 (I/O error). */
int rp_trace_write(const struct rp_trace *t, FILE *f);

void rp_trace_free(struct rp_trace *t);

/* Tokens of block i of r: r->block_tokens, or fewer for a last partial block. */
uint64_t rp_block_tokens(const struct rp_req *r, uint32_t i);

/* A set of hash ids (any 64-bit values).  Zeroed: empty.  add: 1 if id
 * was not in it, 0 if it was, -ENOMEM. */
struct rp_idset {
	uint64_t *slot;
	uint8_t *used;       /* slot i holds an id */
	size_t cap, count;   /* cap a power of two */
};
int rp_idset_has(const struct rp_idset *s, uint64_t id);
int rp_idset_add(struct rp_idset *s, uint64_t id);
void rp_idset_free(struct rp_idset *s);

/* What an unlimited cache would hit on the same trace, in order. */
struct rp_ideal {
	uint64_t blocks, hit_blocks;  /* block lookups, and leading blocks already seen */
	uint64_t tokens, hit_tokens;  /* the same in tokens (partial blocks by real length) */
	uint64_t unique_blocks;       /* distinct hash ids: the working set */
	uint64_t *req_hit_tokens;     /* per request (malloc'd, count entries), or NULL */
};

/*
 * The ideal (unlimited cache) hits of t: a request hits the longest
 * leading run of its hash ids that earlier requests have already put.
 * With per_req non-zero also fills req_hit_tokens (free it).
 * Returns 0 or -ENOMEM.
 */
int rp_ideal(const struct rp_trace *t, int per_req, struct rp_ideal *out);

/*
 * The offline optimum at a capacity of cap blocks (optimum.c): Belady's
 * MIN with bypass over the first count requests, prefix semantics.
 * prefix_hits is what that offline policy achieves (leading hits, as the
 * replay counts them); any_hits counts every access that found its block
 * and bounds every policy from above.  Equal when each hash id always has
 * the same parent (prefix hashes).  Returns 0 or -ENOMEM.
 */
struct rp_optimum {
	uint64_t capacity;      /* blocks */
	uint64_t blocks;        /* block lookups */
	uint64_t prefix_hits;   /* leading hits under MIN (achievable) */
	uint64_t any_hits;      /* all hits under MIN (an upper bound) */
};
int rp_optimum(const struct rp_trace *t, size_t count, uint64_t cap, struct rp_optimum *out);

/* ------------------------------------------------------------------------
 * Profiles and the what-if model (cli/profiles.c)
 */

struct rp_model {
	const char *name;
	uint32_t layers;
	uint32_t kv_heads, head_dim;   /* standard attention (MHA/GQA) */
	uint32_t mla_latent, mla_rope; /* MLA: kv_lora_rank, qk_rope_head_dim (else 0) */
	uint32_t attn_heads, attn_head_dim; /* query heads and their dim (FLOPs) */
	uint32_t elem_bytes;           /* KV element size (2: bf16) */
	double active_params;          /* parameters active per token */
	const char *source;            /* where the shape comes from */
};

/* KV bytes per token: 2 x layers x kv_heads x head_dim x elem_bytes, or
 * for MLA layers x (latent + rope) x elem_bytes. */
uint64_t rp_kv_bytes_per_token(const struct rp_model *m);

/* Profile by name (case-insensitive), or NULL.  Static storage. */
const struct rp_model *rp_model_find(const char *name);
/* All profiles: *n gets the count. */
const struct rp_model *rp_models(size_t *n);

struct rp_gpu {
	const char *name;
	double peak_flops; /* dense BF16 FLOP/s */
	double mfu;        /* fraction of peak prefill reaches */
	double hbm_bps;    /* bytes/s */
	double pcie_bps;   /* host to device, achieved */
	double nvme_bps;   /* one local NVMe SSD, sequential read */
	double net_bps;    /* pod network to a context store */
	const char *source;
};

const struct rp_gpu *rp_gpu_find(const char *name);
const struct rp_gpu *rp_gpus(size_t *n);

/*
 * Prefill FLOPs for tokens [cached, total) of one prompt, computed:
 * 2 x active_params per token plus attention over the context so far,
 * 2 x layers x attn_heads x attn_head_dim x position per token, summed:
 * layers x attn_heads x attn_head_dim x (total^2 - cached^2).
 */
double rp_prefill_flops(const struct rp_model *m, uint64_t cached, uint64_t total);

/* One what-if scenario over a whole replay: modelled, not measured. */
struct rp_whatif {
	const char *name;    /* "recompute", "dram", ... */
	const char *what;    /* one line */
	double ttft_mean_s, ttft_p50_s, ttft_p99_s;
	double prefill_tok_s; /* input tokens per second of GPU time */
	double speedup;       /* prefill_tok_s / recompute's */
	double hit_tokens_frac; /* tokens loaded rather than computed */
};

/* Per-request inputs to the model. */
struct rp_whatif_in {
	size_t count;
	const uint64_t *input_len;    /* count prompts */
	const uint64_t *hit_dram;     /* hit tokens found in DRAM (replayed) */
	const uint64_t *hit_dram_lead; /* leading tokens before the first non-DRAM hit */
	const uint64_t *hit_ssd;      /* tokens found on SSD or the shared tier (replayed) */
	const uint64_t *hit_ideal;    /* leading tokens an unlimited cache holds */
	double prefill_tok_s;         /* > 0: fixed prefill rate instead of FLOPs */
	const uint64_t *hit_remote;   /* tokens kvtierd served (--server), or NULL */
};

#define RP_WHATIF_MAX 5

/*
 * Fill out[] with the scenarios (returns how many, <= RP_WHATIF_MAX), or
 * -ENOMEM.  Per request, TTFT = load time of its hit tokens (each tier's
 * bytes at that tier's bandwidth, or recomputing them if that is faster)
 * + prefill of the rest; no queueing, no overlap of load and compute.
 */
int rp_whatif(const struct rp_model *m, const struct rp_gpu *g, const struct rp_whatif_in *in,
	      struct rp_whatif out[RP_WHATIF_MAX]);

/* --plot: one measured point of a run (plot.c). */
struct rp_plot_point {
	uint64_t dram, ssd;   /* capacities replayed, bytes */
	double block_hit;     /* measured block hit ratio, 0..1 */
};
/* A self-contained SVG at path: hit ratio against capacity for the points
 * (one line per SSD size), the unlimited ideal, and the modelled TTFT of
 * the what-if scenarios w[0..nw).  0, or -1 with errno. */
int rp_plot_svg(const char *path, const char *title, const struct rp_plot_point *pts, unsigned n,
		double ideal, const struct rp_whatif *w, int nw);

/* "kvtier replay": cli/replay.c. */
int replay_main(int argc, char **argv);

#endif /* KVT_CLI_REPLAY_H */

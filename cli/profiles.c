/*
 * profiles.c - model and GPU profiles for "kvtier replay", and the what-if
 * model that turns a replay's hits into modelled time-to-first-token and
 * prefill throughput.
 *
 * Owns two static tables (models, GPUs) and pure functions over them: no
 * store, no I/O, no global mutable state.  Figures are public ones
 * gathered in shared/data/profiles.md (model shapes from each model's
 * config.json; peaks and bandwidths from datasheets); doc/replay.md cites
 * them and states every assumption of the model.  Everything this file
 * returns about time is modelled, never measured.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "replay.h"

static const struct rp_model profiles_models[] = {
	{ "Llama-3.1-8B", 32, 8, 128, 0, 0, 32, 128, 2, 8.03e9,
	  "meta-llama/Llama-3.1-8B config.json" },
	{ "Llama-3.1-70B", 80, 8, 128, 0, 0, 64, 128, 2, 70.6e9,
	  "meta-llama/Llama-3.1-70B config.json" },
	{ "Llama-3.1-405B", 126, 8, 128, 0, 0, 128, 128, 2, 405.9e9,
	  "meta-llama/Llama-3.1-405B config.json" },
	{ "Qwen3-8B", 36, 8, 128, 0, 0, 32, 128, 2, 8.2e9, "Qwen/Qwen3-8B config.json" },
	{ "Qwen3-32B", 64, 8, 128, 0, 0, 64, 128, 2, 32.8e9, "Qwen/Qwen3-32B config.json" },
	/* MLA: the cache holds the compressed latent (kv_lora_rank 512) and the
	 * decoupled RoPE key (64) per layer; queries are 128 heads of 192
	 * (128 + 64); 37B parameters active per token of 671B. */
	{ "DeepSeek-V3", 61, 0, 0, 512, 64, 128, 192, 2, 37e9,
	  "deepseek-ai/DeepSeek-V3 config.json (MLA)" },
};

static const struct rp_gpu profiles_gpus[] = {
	{ "H200", 989e12, 0.5, 4.8e12, 50e9, 14e9, 50e9,
	  "NVIDIA H200 datasheet (989 TFLOPS dense BF16, HBM3e 4.8 TB/s); PCIe Gen5 x16 "
	  "~50 GB/s achieved; one Gen5 NVMe ~14 GB/s; 400 Gb/s NIC 50 GB/s" },
	{ "H100", 989e12, 0.5, 3.35e12, 50e9, 14e9, 50e9,
	  "NVIDIA H100 SXM datasheet (989 TFLOPS dense BF16, HBM3 3.35 TB/s); PCIe Gen5 x16 "
	  "~50 GB/s achieved; one Gen5 NVMe ~14 GB/s; 400 Gb/s NIC 50 GB/s" },
};

#define PROFILES_LEN(a) (sizeof(a) / sizeof((a)[0]))

uint64_t rp_kv_bytes_per_token(const struct rp_model *m)
{
	if (m->mla_latent != 0)
		return (uint64_t)m->layers * (m->mla_latent + m->mla_rope) * m->elem_bytes;
	return UINT64_C(2) * m->layers * m->kv_heads * m->head_dim * m->elem_bytes;
}

const struct rp_model *rp_models(size_t *n)
{
	*n = PROFILES_LEN(profiles_models);
	return profiles_models;
}

const struct rp_model *rp_model_find(const char *name)
{
	for (size_t i = 0; i < PROFILES_LEN(profiles_models); i++)
		if (strcasecmp(profiles_models[i].name, name) == 0)
			return &profiles_models[i];
	return NULL;
}

const struct rp_gpu *rp_gpus(size_t *n)
{
	*n = PROFILES_LEN(profiles_gpus);
	return profiles_gpus;
}

const struct rp_gpu *rp_gpu_find(const char *name)
{
	for (size_t i = 0; i < PROFILES_LEN(profiles_gpus); i++)
		if (strcasecmp(profiles_gpus[i].name, name) == 0)
			return &profiles_gpus[i];
	return NULL;
}

double rp_prefill_flops(const struct rp_model *m, uint64_t cached, uint64_t total)
{
	if (cached >= total)
		return 0;
	double c = (double)cached, t = (double)total;
	double attn = (double)m->layers * m->attn_heads * m->attn_head_dim * (t * t - c * c);
	return 2.0 * m->active_params * (t - c) + attn;
}

/* Modelled seconds to prefill tokens [cached, total). */
static double profiles_prefill_s(const struct rp_model *m, const struct rp_gpu *g, double tok_s,
				 uint64_t cached, uint64_t total)
{
	if (cached >= total)
		return 0;
	if (tok_s > 0)
		return (double)(total - cached) / tok_s;
	return rp_prefill_flops(m, cached, total) / (g->peak_flops * g->mfu);
}

static int profiles_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double profiles_min(double a, double b)
{
	return a < b ? a : b;
}

/*
 * One scenario.  Per request: h[0] tokens load at bw[0], h[1] more at
 * bw[1], h[2] more at bw[2] (any count may be 0, any h NULL), or are
 * recomputed if that is faster; the rest is prefilled.  At least the last
 * token is always computed (it produces the first output token).
 */
static int profiles_scenario(const struct rp_model *m, const struct rp_gpu *g,
			     const struct rp_whatif_in *in, const uint64_t *const h[3],
			     const double bw[3], struct rp_whatif *out)
{
	double *ttft = malloc((in->count ? in->count : 1) * sizeof *ttft);
	double sum = 0, tokens = 0, hit = 0;
	uint64_t bpt = rp_kv_bytes_per_token(m);

	if (ttft == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < in->count; i++) {
		uint64_t len = in->input_len[i], room = len - 1, got = 0;
		double load = 0;
		for (int t = 0; t < 3; t++) {
			uint64_t a = h[t] ? h[t][i] : 0;
			if (a > room) /* the last token is always computed */
				a = room;
			room -= a;
			got += a;
			if (a > 0)
				load += (double)a * bpt / bw[t];
		}
		double recompute = profiles_prefill_s(m, g, in->prefill_tok_s, 0, got);
		double t = profiles_min(load, recompute) +
			   profiles_prefill_s(m, g, in->prefill_tok_s, got, len);
		ttft[i] = t;
		sum += t;
		tokens += (double)len;
		if (load <= recompute)
			hit += (double)got;
	}
	qsort(ttft, in->count, sizeof *ttft, profiles_cmp);
	out->ttft_mean_s = in->count ? sum / (double)in->count : 0;
	out->ttft_p50_s = in->count ? ttft[(in->count - 1) / 2] : 0;
	out->ttft_p99_s = in->count ? ttft[(size_t)((double)(in->count - 1) * 0.99)] : 0;
	out->prefill_tok_s = sum > 0 ? tokens / sum : 0;
	out->hit_tokens_frac = tokens > 0 ? hit / tokens : 0;
	free(ttft);
	return 0;
}

int rp_whatif(const struct rp_model *m, const struct rp_gpu *g, const struct rp_whatif_in *in,
	      struct rp_whatif out[RP_WHATIF_MAX])
{
	double ssd_bw = profiles_min(g->nvme_bps, g->pcie_bps);
	double net_bw = profiles_min(g->net_bps, g->pcie_bps);
	bool remote = false;

	/* With --server the replay's hits below DRAM include kvtierd's: they
	 * load over the network, as ideal-pod's do, and the rows say so (they
	 * read "SSD hits at NVMe speed", with none on SSD). */
	for (size_t i = 0; in->hit_remote && i < in->count && !remote; i++)
		remote = in->hit_remote[i] > 0;
	const struct {
		const char *name, *what;
		const uint64_t *h[3];
		double bw[3];
	} sc[RP_WHATIF_MAX] = {
		{ "recompute", "no context tier: every prompt token is prefilled", { 0 }, { 0 } },
		{ "dram",
		  remote ? "replayed DRAM hits up to the first hit below DRAM, over PCIe; the rest "
			   "recomputed"
			 : "replayed DRAM hits up to the first SSD hit, over PCIe; the rest recomputed",
		  { in->hit_dram_lead }, { g->pcie_bps } },
		{ "dram+ssd",
		  remote ? "replayed DRAM hits over PCIe, SSD hits at NVMe speed, kvtierd hits over "
			   "the network"
			 : "replayed DRAM hits over PCIe, SSD hits at NVMe speed",
		  { in->hit_dram, in->hit_ssd, in->hit_remote }, { g->pcie_bps, ssd_bw, net_bw } },
		{ "ideal-dram", "unlimited host DRAM: every earlier block, over PCIe",
		  { in->hit_ideal }, { g->pcie_bps } },
		{ "ideal-pod", "unlimited pod store (G3.5): every earlier block, over the network",
		  { in->hit_ideal }, { net_bw } },
	};
	for (int i = 0; i < RP_WHATIF_MAX; i++) {
		out[i].name = sc[i].name;
		out[i].what = sc[i].what;
		if (profiles_scenario(m, g, in, sc[i].h, sc[i].bw, &out[i]) < 0)
			return -ENOMEM;
		out[i].speedup = out[0].prefill_tok_s > 0 ? out[i].prefill_tok_s / out[0].prefill_tok_s
							 : 0;
	}
	return RP_WHATIF_MAX;
}

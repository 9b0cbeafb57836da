/*
 * test_replay.c - the pieces of "kvtier replay" that are not the store:
 * KV bytes per token of each model profile, the prefill FLOPs formula,
 * the what-if model on numbers worked out by hand, the trace parser (good
 * lines, each kind of bad line, every truncated prefix, a guard page), the
 * trace file reader's line numbers, the synthetic trace, and the ideal
 * (unlimited cache) hit ratio on tests/data/replay-small.jsonl.
 *
 * argv[1]: the tests/data directory.
 */
#include <math.h>

#include "t.h"

#include "../../cli/replay.h"

static void test_bytes_per_token(void)
{
	/* 2 (K, V) x layers x kv heads x head dim x 2 bytes (bf16) */
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("Llama-3.1-8B")), 2u * 32 * 8 * 128 * 2);
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("Llama-3.1-8B")), 131072);
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("llama-3.1-70b")), 2u * 80 * 8 * 128 * 2);
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("Qwen3-8B")), 147456);
	/* 32K tokens of Qwen3-8B = 4.5 GiB (Mooncake's docs) */
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("Qwen3-8B")) * 32768, UINT64_C(4608) << 20);
	/* MLA: layers x (kv_lora_rank + qk_rope_head_dim) x 2 bytes */
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("DeepSeek-V3")), 61u * (512 + 64) * 2);
	T_EQ_U64(rp_kv_bytes_per_token(rp_model_find("DeepSeek-V3")), 70272);
	T_ASSERT(rp_model_find("GPT-9") == NULL);
	size_t n;
	const struct rp_model *m = rp_models(&n);
	T_GE_INT(n, 4);
	for (size_t i = 0; i < n; i++)
		T_ASSERT(rp_kv_bytes_per_token(&m[i]) > 0 && m[i].source != NULL);
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fabs(b) + 1e-12;
}

static void test_flops(void)
{
	const struct rp_model *m = rp_model_find("Llama-3.1-8B");
	/* 2 x 8.03e9 x 8192 + 32 x 32 x 128 x 8192^2 */
	double want = 2 * 8.03e9 * 8192 + 32.0 * 32 * 128 * 8192.0 * 8192;
	T_ASSERT(near(rp_prefill_flops(m, 0, 8192), want));
	/* the cached part costs nothing; the rest still attends to it */
	want = 2 * 8.03e9 * 4096 + 32.0 * 32 * 128 * (8192.0 * 8192 - 4096.0 * 4096);
	T_ASSERT(near(rp_prefill_flops(m, 4096, 8192), want));
	T_ASSERT(rp_prefill_flops(m, 8192, 8192) == 0);
	/* ~27K tokens/s at 8K on an H200 at half of peak (profiles.md): the
	 * context-so-far form is a little cheaper than full-context-per-token */
	const struct rp_gpu *g = rp_gpu_find("H200");
	double tok_s = 8192 / (rp_prefill_flops(m, 0, 8192) / (g->peak_flops * g->mfu));
	T_ASSERT(tok_s > 27000 && tok_s < 30000);
}

static void test_whatif(void)
{
	/* Two requests at a fixed 10,000 prefill tokens/s, Llama-3.1-8B
	 * (131072 B/token) on an H200 profile (PCIe 50 GB/s, NVMe 14 GB/s):
	 *   A: 1000 tokens, 512 hit in DRAM, 0 on SSD, ideal 512
	 *   B: 2048 tokens, 512 in DRAM then 1024 on SSD, ideal 2048 (all)
	 * recompute: A 0.1 s, B 0.2048 s
	 * dram (leading DRAM only): A 512*131072/50e9 + 488/1e4;
	 *                           B 512*131072/50e9 + 1536/1e4
	 * dram+ssd: B adds 1024*131072/14e9 for the SSD part, prefills 512
	 * ideal-dram: B hits all but the last token (2047 loaded, 1 computed) */
	const struct rp_model *m = rp_model_find("Llama-3.1-8B");
	const struct rp_gpu *g = rp_gpu_find("H200");
	uint64_t len[2] = { 1000, 2048 }, dram[2] = { 512, 512 }, lead[2] = { 512, 512 },
		 ssd[2] = { 0, 1024 }, ideal[2] = { 512, 2048 };
	struct rp_whatif_in in = { 2, len, dram, lead, ssd, ideal, 10000, NULL };
	struct rp_whatif w[RP_WHATIF_MAX];
	T_EQ_INT(rp_whatif(m, g, &in, w), RP_WHATIF_MAX);
	double bpt = 131072, pcie = 50e9, nvme = 14e9;
	T_EQ_STR(w[0].name, "recompute");
	T_ASSERT(near(w[0].ttft_mean_s, (0.1 + 0.2048) / 2));
	T_ASSERT(near(w[0].prefill_tok_s, 3048 / 0.3048));
	T_ASSERT(near(w[0].speedup, 1));
	T_EQ_STR(w[1].name, "dram");
	double a = 512 * bpt / pcie + 488 / 1e4, b = 512 * bpt / pcie + 1536 / 1e4;
	T_ASSERT(near(w[1].ttft_mean_s, (a + b) / 2));
	T_ASSERT(near(w[1].ttft_p50_s, a));
	T_ASSERT(near(w[1].speedup, (3048 / (a + b)) / (3048 / 0.3048)));
	T_ASSERT(near(w[1].hit_tokens_frac, 1024.0 / 3048));
	T_EQ_STR(w[2].name, "dram+ssd");
	double b2 = 512 * bpt / pcie + 1024 * bpt / nvme + 512 / 1e4;
	T_ASSERT(near(w[2].ttft_mean_s, (a + b2) / 2));
	T_EQ_STR(w[3].name, "ideal-dram");
	double b3 = 2047 * bpt / pcie + 1 / 1e4;
	T_ASSERT(near(w[3].ttft_mean_s, (a + b3) / 2));
	T_ASSERT(near(w[3].hit_tokens_frac, (512.0 + 2047) / 3048));
	/* Loading slower than recomputing: the engine recomputes. */
	struct rp_gpu slow = *g;
	slow.pcie_bps = 1e6;
	T_EQ_INT(rp_whatif(m, &slow, &in, w), RP_WHATIF_MAX);
	T_ASSERT(near(w[1].ttft_mean_s, (0.1 + 0.2048) / 2));
	T_ASSERT(w[1].hit_tokens_frac == 0);
	T_ASSERT(strstr(w[2].what, "kvtierd") == NULL);

	/* With --server, B's 1024 hits below DRAM came from kvtierd instead:
	 * they load over the network (50 GB/s), not at NVMe speed, and the
	 * rows say so (they read "SSD hits at NVMe speed" with none on SSD,
	 * under the README's first command). */
	uint64_t none[2] = { 0, 0 }, remote[2] = { 0, 1024 };
	struct rp_whatif_in inr = { 2, len, dram, lead, none, ideal, 10000, remote };
	T_EQ_INT(rp_whatif(m, g, &inr, w), RP_WHATIF_MAX);
	double net = 50e9, b4 = 512 * bpt / pcie + 1024 * bpt / net + 512 / 1e4;
	T_ASSERT(near(w[2].ttft_mean_s, (a + b4) / 2));
	T_ASSERT(strstr(w[2].what, "kvtierd hits over the network") != NULL);
	T_ASSERT(strstr(w[1].what, "first hit below DRAM") != NULL);
	T_ASSERT(near(w[1].ttft_mean_s, (a + b) / 2)); /* the DRAM prefix alone */
}

static void parse_bad(const char *line, const char *want)
{
	struct rp_req r;
	char err[256] = "";
	if (rp_parse_line(line, strlen(line), &r, err, sizeof err) == 0)
		T_FAIL("accepted: %s", line);
	if (strstr(err, want) == NULL)
		T_FAIL("'%s': message '%s' lacks '%s'", line, err, want);
}

static void test_parse(void)
{
	static const char good[] =
		"{\"timestamp\": 27482, \"input_length\": 1025, \"output_length\": 52, "
		"\"hash_ids\": [46, 47, 9007199254740993], \"extra\": {\"x\": [1]}}";
	struct rp_req r;
	char err[256];

	T_OK(rp_parse_line(good, strlen(good), &r, err, sizeof err));
	T_ASSERT(r.ts == 27482);
	/* the block size and the unit are the trace's: of this one line, 512
	 * (1025 tokens in 3 blocks of 342 to 512) and ms (no fraction) */
	struct rp_trace one = { .reqs = &r, .count = 1 };
	uint64_t ln = 1;
	T_OK(rp_trace_check(&one, &ln, 0, NULL, err, sizeof err));
	T_EQ_INT(one.block_tokens, 512);
	T_ASSERT(strcmp(one.ts_unit, "ms") == 0);
	T_EQ_U64(r.ts_ms, 27482);
	T_EQ_U64(r.input_len, 1025);
	T_EQ_U64(r.output_len, 52);
	T_EQ_INT(r.n_ids, 3);
	T_EQ_U64(r.ids[0], 46);
	T_EQ_U64(r.ids[2], UINT64_C(9007199254740993)); /* exact, not via a double */
	T_EQ_U64(rp_block_tokens(&r, 0), 512);
	T_EQ_U64(rp_block_tokens(&r, 2), 1);
	T_EQ_U64(rp_block_tokens(&r, 3), 0);
	free(r.ids);

	/* Against a guard page: the parser reads only len bytes. */
	uint8_t *g = t_at_guard(good, strlen(good));
	T_OK(rp_parse_line((const char *)g, strlen(good), &r, err, sizeof err));
	free(r.ids);
	/* Every strict prefix is an error, never a crash or a request. */
	for (size_t n = 0; n < strlen(good); n++) {
		g = t_at_guard(good, n);
		if (rp_parse_line((const char *)g, n, &r, err, sizeof err) == 0)
			T_FAIL("prefix of %zu bytes accepted", n);
	}

	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [1", "bad JSON");
	parse_bad("[1, 2]", "not a JSON object");
	parse_bad("{\"timestamp\": 1, \"hash_ids\": [1]}", "missing field \"input_length\"");
	parse_bad("{\"timestamp\": -1, \"input_length\": 10, \"hash_ids\": [1]}", "\"timestamp\"");
	parse_bad("{\"timestamp\": \"1\", \"input_length\": 10, \"hash_ids\": [1]}",
		  "\"timestamp\"");
	parse_bad("{\"timestamp\": 1, \"input_length\": 0, \"hash_ids\": []}", "input_length is 0");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": []}", "0 ids");
	parse_bad("{\"timestamp\": 1, \"input_length\": 1, \"hash_ids\": [1, 2]}", "2 ids");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10}", "hash_ids");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": 7}", "hash_ids");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [1.5]}", "hash_ids[0]");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [\"a\"]}", "hash_ids[0]");
	parse_bad("{\"timestamp\": 1, \"timestamp\": 2, \"input_length\": 10, \"hash_ids\": [1]}",
		  "bad JSON");
	parse_bad("{\"timestamp\": 1, \"input_length\": 10, \"hash_ids\": [1]} {}", "bad JSON");
}

static void test_ideal(const char *data)
{
	char path[4096], err[512];
	struct rp_trace t;
	struct rp_ideal id;

	snprintf(path, sizeof path, "%s/replay-small.jsonl", data);
	T_OK(rp_trace_load(path, 0, NULL, &t, err, sizeof err));
	T_EQ_INT(t.count, 7); /* the blank line is skipped */
	T_EQ_INT(t.block_tokens, 512);
	T_OK(rp_ideal(&t, 1, &id));
	/* By hand: hits per request (leading ids already seen)
	 *   [1,2,3] 0   [1,2,4] 2 (1024 tok)   [5] 0   [1,2,4,6] 3 (1536)
	 *   [5,7] 1 (512)   [8,10,11,12] 0   [1,2,3] 3 (512+512+76 = 1100) */
	T_EQ_U64(id.blocks, 20);
	T_EQ_U64(id.hit_blocks, 9);
	T_EQ_U64(id.tokens, 1100 + 1324 + 512 + 1600 + 700 + 2000 + 1100);
	T_EQ_U64(id.hit_tokens, 1024 + 1536 + 512 + 1100);
	T_EQ_U64(id.unique_blocks, 11);
	uint64_t want[7] = { 0, 1024, 0, 1536, 512, 0, 1100 };
	for (int i = 0; i < 7; i++)
		T_EQ_U64(id.req_hit_tokens[i], want[i]);
	free(id.req_hit_tokens);
	rp_trace_free(&t);

	/* A bad line is named by its number: 1,600 tokens in 2 blocks (at
	 * least 800 a block) after 1,100 in 3 (at most 549): no block size
	 * fits both; told 512, line 3 needs 4 blocks. */
	snprintf(path, sizeof path, "%s/replay-bad.jsonl", data);
	T_RC(rp_trace_load(path, 0, NULL, &t, err, sizeof err), -1);
	T_ASSERT(strstr(err, "replay-bad.jsonl:3: ") != NULL);
	T_ASSERT(strstr(err, "no one block size fits") != NULL);
	T_ASSERT(strstr(err, "line 1 has 3") != NULL);
	T_EQ_INT(t.count, 0);
	T_RC(rp_trace_load(path, 512, NULL, &t, err, sizeof err), -1);
	T_ASSERT(strstr(err, "replay-bad.jsonl:3: ") != NULL);
	T_ASSERT(strstr(err, "needs 4 blocks of 512") != NULL);
	T_RC(rp_trace_load("/nonexistent/trace.jsonl", 0, NULL, &t, err, sizeof err), -1);
	T_ASSERT(strstr(err, "No such file") != NULL);
}

static void test_synth(void)
{
	struct rp_trace a, b;
	struct rp_ideal id;
	T_OK(rp_trace_synth(&a, 500, 7));
	T_OK(rp_trace_synth(&b, 500, 7));
	T_EQ_INT(a.count, 500);
	T_ASSERT(a.synthetic);
	for (size_t i = 0; i < a.count; i++) {
		const struct rp_req *r = &a.reqs[i], *s = &b.reqs[i];
		T_EQ_U64(r->input_len, s->input_len);
		T_EQ_INT(r->n_ids, (r->input_len + 511) / 512);
		T_EQ_MEM(r->ids, s->ids, r->n_ids * sizeof r->ids[0]);
		if (i > 0)
			T_ASSERT(r->ts_ms >= a.reqs[i - 1].ts_ms);
	}
	/* It reuses prefixes, but not all of them. */
	T_OK(rp_ideal(&a, 0, &id));
	T_ASSERT(id.hit_blocks > id.blocks / 5 && id.hit_blocks < id.blocks);
	/* What it writes, the reader reads back the same. */
	char *dir = t_mkdtemp(), path[4096], err[256];
	snprintf(path, sizeof path, "%s/synth.jsonl", dir);
	FILE *f = fopen(path, "w");
	T_ASSERT(f != NULL);
	T_OK(rp_trace_write(&a, f));
	T_OK(fclose(f));
	rp_trace_free(&b);
	if (rp_trace_load(path, 0, NULL, &b, err, sizeof err) < 0)
		T_FAIL("%s", err);
	T_EQ_INT(b.count, a.count);
	for (size_t i = 0; i < a.count; i++) {
		T_EQ_U64(a.reqs[i].ts_ms, b.reqs[i].ts_ms);
		T_EQ_U64(a.reqs[i].input_len, b.reqs[i].input_len);
		T_EQ_U64(a.reqs[i].output_len, b.reqs[i].output_len);
		T_EQ_MEM(a.reqs[i].ids, b.reqs[i].ids, a.reqs[i].n_ids * sizeof a.reqs[i].ids[0]);
	}
	rp_trace_free(&a);
	rp_trace_free(&b);
	t_rmtree(dir);
	free(dir);
}

/* Write lines to DIR/name; the path into path. */
static void trace_file(const char *dir, const char *name, const char *lines, char *path,
		       size_t cap)
{
	snprintf(path, cap, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	T_ASSERT(f != NULL);
	T_ASSERT(fputs(lines, f) >= 0);
	T_OK(fclose(f));
}

/* Traces in Mooncake's shape with other block sizes and clocks: Alibaba's
 * Qwen traces (16-token blocks, seconds with a fraction, chat_id and turn
 * beside), one without timestamps, short single-block prompts, and a CSV
 * trace (Azure's: no hash_ids). */
static void test_block_sizes(void)
{
	char *dir = t_mkdtemp(), path[4096], err[512];
	struct rp_trace t;

	trace_file(dir, "qwen.jsonl",
		   "{\"chat_id\": 7, \"parent_chat_id\": -1, \"timestamp\": 0.5, \"input_length\": "
		   "40, \"output_length\": 9, \"type\": \"text\", \"turn\": 1, \"hash_ids\": "
		   "[1, 2, 3]}\n"
		   "{\"chat_id\": 8, \"parent_chat_id\": 7, \"timestamp\": 2.25, \"input_length\": "
		   "64, \"output_length\": 9, \"type\": \"text\", \"turn\": 2, \"hash_ids\": "
		   "[1, 2, 4, 5]}\n"
		   "{\"chat_id\": 9, \"parent_chat_id\": -1, \"timestamp\": 3, \"input_length\": "
		   "17, \"output_length\": 1, \"type\": \"text\", \"turn\": 1, \"hash_ids\": "
		   "[6, 7]}\n",
		   path, sizeof path);
	if (rp_trace_load(path, 0, NULL, &t, err, sizeof err) < 0)
		T_FAIL("%s", err);
	/* 40 in 3 (14-19 a block), 64 in 4 (16-21), 17 in 2 (9-16): 16 */
	T_EQ_INT(t.block_tokens, 16);
	T_ASSERT(strcmp(t.ts_unit, "s") == 0);
	T_EQ_U64(t.reqs[0].ts_ms, 500);
	T_EQ_U64(t.reqs[1].ts_ms, 2250);
	T_EQ_U64(t.reqs[2].ts_ms, 3000);
	T_EQ_U64(rp_block_tokens(&t.reqs[0], 2), 8);
	T_EQ_U64(rp_block_tokens(&t.reqs[2], 1), 1);
	rp_trace_free(&t);
	/* told ms, the same file's clock is in ms (rounded) */
	T_OK(rp_trace_load(path, 0, "ms", &t, err, sizeof err));
	T_EQ_U64(t.reqs[1].ts_ms, 2);
	rp_trace_free(&t);
	/* told 512 tokens a block, line 1 needs 1 block, not 3 */
	T_RC(rp_trace_load(path, 512, NULL, &t, err, sizeof err), -1);
	T_ASSERT(strstr(err, "qwen.jsonl:1: ") != NULL && strstr(err, "needs 1 blocks") != NULL);

	/* signed 64-bit hashes (-1 among them: the set has no sentinel id) */
	trace_file(dir, "signed.jsonl",
		   "{\"input_length\": 1000, \"hash_ids\": [-1, -9223372036854775808]}\n"
		   "{\"input_length\": 1000, \"hash_ids\": [-1, 9223372036854775807]}\n"
		   "{\"input_length\": 1000, \"hash_ids\": [-1, -9223372036854775808]}\n",
		   path, sizeof path);
	T_OK(rp_trace_load(path, 0, NULL, &t, err, sizeof err));
	T_EQ_U64(t.reqs[0].ids[0], UINT64_MAX);
	T_EQ_U64(t.reqs[0].ids[1], UINT64_C(1) << 63);
	{
		struct rp_ideal id;
		T_OK(rp_ideal(&t, 0, &id));
		T_EQ_U64(id.unique_blocks, 3);
		T_EQ_U64(id.hit_blocks, 1 + 2);
	}
	rp_trace_free(&t);

	/* no timestamps: each request arrives with the one before it, at 0 */
	trace_file(dir, "nots.jsonl",
		   "{\"input_length\": 600, \"hash_ids\": [1, 2]}\n"
		   "{\"timestamp\": 70, \"input_length\": 600, \"hash_ids\": [1, 3]}\n"
		   "{\"input_length\": 100, \"hash_ids\": [1]}\n",
		   path, sizeof path);
	T_OK(rp_trace_load(path, 0, NULL, &t, err, sizeof err));
	T_EQ_INT(t.block_tokens, 512);
	T_EQ_U64(t.reqs[0].ts_ms, 0);
	T_EQ_U64(t.reqs[2].ts_ms, 70);
	rp_trace_free(&t);

	/* every prompt one block: 512 fits */
	trace_file(dir, "short.jsonl", "{\"timestamp\": 0, \"input_length\": 300, \"hash_ids\": [1]}\n",
		   path, sizeof path);
	T_OK(rp_trace_load(path, 0, NULL, &t, err, sizeof err));
	T_EQ_INT(t.block_tokens, 512);
	rp_trace_free(&t);

	/* a CSV trace is named as one */
	trace_file(dir, "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
		   "2023-11-16 18:15:46.6805900,374,44\n", path, sizeof path);
	T_RC(rp_trace_load(path, 0, NULL, &t, err, sizeof err), -1);
	T_ASSERT(strstr(err, "azure.csv:1: not a JSON-lines trace") != NULL);
	T_ASSERT(strstr(err, "no hash_ids") != NULL);
	t_rmtree(dir);
	free(dir);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_FAIL("usage: test_replay DATA_DIR");
	test_bytes_per_token();
	test_flops();
	test_whatif();
	test_parse();
	test_ideal(argv[1]);
	test_block_sizes();
	test_synth();
	return 0;
}

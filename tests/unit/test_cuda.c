/*
 * test_cuda.c - libkvtier_cuda on a GPU: random paged caches in device
 * memory for every layout, dtype sizes 1, 2, 4, odd page counts, partially
 * filled pages; batched gather into pinned host memory equals the
 * element-by-element reference (tests/lib/kvref.h) on the host copy, byte
 * for byte; scatter into a second, zeroed device cache (one launch, or
 * layer by layer with an event per layer) equals the reference's scatter,
 * every byte of the cache.  Also the DRAM tier's pinning.
 *
 * Without a GPU (or a driver) it checks what must hold there (pinning
 * says -ENODEV and the store says "not registered") and exits 77.  It
 * links the CUDA runtime statically, so it starts where libcuda.so is
 * absent.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdlib.h>

#include "kvref.h"
#include "t.h"
#include "tstore.h"

static uint64_t rng = 0x2545f4914f6cdd1du;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define CU(call)                                                               \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess)                                         \
			T_FAIL("%s: %s", #call, cudaGetErrorString(e_));       \
	} while (0)

struct text_stat {
	const char *name;
	char value[64];
};

static void text_stat_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct text_stat *t = ctx;
	(void)value;
	if (str && strcmp(name, t->name) == 0)
		snprintf(t->value, sizeof(t->value), "%s", str);
}

static void test_pinning(int gpus)
{
	struct kvt_store *s = t_store_open("dram.capacity", "64M", "dram.shards", "2", NULL);
	struct text_stat ts = { "dram.registered", "" };
	uint64_t bytes = 0;
	T_RC(kvt_cuda_register_store(NULL), KVT_ENULL);
	if (gpus == 0) {
		T_RC(kvt_cuda_register_store(s), -ENODEV);
		T_OK(kvt_store_stats(s, text_stat_cb, &ts));
		T_EQ_STR(ts.value, "not registered");
	} else {
		T_OK(kvt_cuda_register_store(s));
		T_RC(kvt_cuda_register_store(s), KVT_EBUSY);
		T_OK(kvt_store_stats(s, text_stat_cb, &ts));
		T_EQ_STR(ts.value, "cuda");
		T_OK(kvt_store_stat(s, "dram.registered_bytes", &bytes));
		T_ASSERT(bytes >= 64u << 20);
	}
	T_OK(kvt_store_close(s)); /* unregisters */
	kvt_store_destroy(s);
}

#define MAXB 5

static void one_case(struct kvt_cuda *ctx, int kind, uint32_t dtype, uint32_t layers,
		     uint32_t nb, uint32_t bs, uint32_t heads, uint32_t dim, int partial,
		     int layerwise)
{
	void *ha[64], *hc[64], *da[64], *db[64];
	struct kvt_kv_layout hl = { kind, dtype, layers, nb, bs, heads, dim, ha };
	struct kvt_kv_layout dl = hl, hcl = hl;
	uint32_t nbases = kind == KVT_KV_CROSS_LAYER ? 1 : layers;
	uint32_t perm[512], pages[MAXB][4], used = 0;
	struct kvt_kv_block blk[MAXB], ref[MAXB];
	cudaEvent_t ev[64];
	unsigned n = 0;
	size_t len;

	T_ASSERT(layers <= 64 && nb <= 512);
	for (uint32_t i = 0; i < 64; i++)
		ha[i] = hc[i] = da[i] = db[i] = NULL;
	for (uint32_t i = 0; i < nbases; i++)
		ha[i] = &rng; /* placeholders for the size check */
	len = (size_t)kvt_kv_cache_len(&hl);
	for (uint32_t i = 0; i < nbases; i++) {
		T_ASSERT((ha[i] = malloc(len)) && (hc[i] = calloc(1, len)));
		for (size_t j = 0; j < len; j++)
			((unsigned char *)ha[i])[j] = (unsigned char)rnd();
		CU(cudaMalloc(&da[i], len));
		CU(cudaMalloc(&db[i], len));
		CU(cudaMemcpy(da[i], ha[i], len, cudaMemcpyHostToDevice));
		CU(cudaMemset(db[i], 0, len));
	}
	hcl.layer_base = hc;
	dl.layer_base = da;
	for (uint32_t i = 0; i < nb; i++)
		perm[i] = i;
	for (uint32_t i = nb - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rnd() % (i + 1)), t = perm[i];
		perm[i] = perm[j], perm[j] = t;
	}
	while (n < MAXB && used < nb) {
		uint32_t pc = 1 + (uint32_t)(rnd() % 4);
		if (pc > nb - used)
			pc = nb - used;
		for (uint32_t i = 0; i < pc; i++)
			pages[n][i] = perm[used++];
		blk[n] = (struct kvt_kv_block){ pages[n], pc, pc * bs, NULL };
		if (partial)
			blk[n].tokens -= (uint32_t)(rnd() % bs);
		size_t bl = (size_t)kvt_kv_block_len(&hl, blk[n].tokens);
		CU(cudaHostAlloc(&blk[n].buf, bl, cudaHostAllocDefault));
		memset(blk[n].buf, 0xee, bl);
		ref[n] = blk[n];
		T_ASSERT((ref[n].buf = malloc(bl)) != NULL);
		kvref_move(&hl, &ref[n], 1);
		n++;
	}
	for (uint32_t i = 0; i < layers; i++)
		CU(cudaEventCreate(&ev[i]));

	/* gather on the GPU == reference gather on the CPU */
	T_OK(kvt_cuda_gather(ctx, &dl, blk, n, NULL, layerwise ? (void *const *)ev : NULL));
	CU(cudaDeviceSynchronize());
	for (unsigned i = 0; i < n; i++)
		T_EQ_MEM(blk[i].buf, ref[i].buf, (size_t)kvt_kv_block_len(&hl, blk[i].tokens));
	/* scatter into the zeroed cache == reference scatter, whole caches */
	dl.layer_base = db;
	T_OK(kvt_cuda_scatter(ctx, &dl, blk, n, NULL, layerwise ? (void *const *)ev : NULL));
	if (layerwise)
		for (uint32_t i = 0; i < layers; i++)
			CU(cudaEventSynchronize(ev[i]));
	CU(cudaDeviceSynchronize());
	for (unsigned i = 0; i < n; i++)
		kvref_move(&hcl, &ref[i], 0);
	for (uint32_t i = 0; i < nbases; i++) {
		void *back = malloc(len);
		T_ASSERT(back != NULL);
		CU(cudaMemcpy(back, db[i], len, cudaMemcpyDeviceToHost));
		T_EQ_MEM(back, hc[i], len);
		free(back);
	}
	for (uint32_t i = 0; i < layers; i++)
		cudaEventDestroy(ev[i]);
	for (unsigned i = 0; i < n; i++) {
		cudaFreeHost(blk[i].buf);
		free(ref[i].buf);
	}
	for (uint32_t i = 0; i < nbases; i++) {
		free(ha[i]);
		free(hc[i]);
		cudaFree(da[i]);
		cudaFree(db[i]);
	}
}

int main(void)
{
	int gpus = kvt_cuda_device_count(), driver = 0, runtime = 0;
	struct kvt_cuda *ctx = NULL;
	static const uint32_t dtypes[] = { 1, 2, 4 };

	kvt_cuda_versions(&driver, &runtime);
	printf("cuda: %d GPU(s), driver %d, runtime %d\n", gpus, driver, runtime);
	fflush(stdout); /* before a skip message on stderr: gpu-check.sh reads this line */
	test_pinning(gpus);
	if (gpus == 0) {
		T_RC(kvt_cuda_open(&ctx, 0), -ENODEV);
		T_SKIP("no GPU");
	}
	T_OK(kvt_cuda_open(&ctx, 0));
	for (int kind = KVT_KV_FLASH_ATTN; kind <= KVT_KV_CROSS_LAYER; kind++)
		for (unsigned d = 0; d < 3; d++)
			for (int partial = 0; partial <= 1; partial++) {
				uint32_t h = kind == KVT_KV_MLA ? 1 : 3;
				one_case(ctx, kind, dtypes[d], 3, 7, 5, h, 9, partial, partial);
				one_case(ctx, kind, dtypes[d], 4, 33, 16, kind == KVT_KV_MLA ? 1 : 8,
					 kind == KVT_KV_MLA ? 576 : 128, partial, !partial);
			}
	kvt_cuda_close(ctx);
	printf("cuda: every layout gathered and scattered byte for byte\n");
	return 0;
}

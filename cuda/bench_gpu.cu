/*
 * bench_gpu.cu - kvtier-bench-gpu: GB/s of libkvtier_cuda's batched
 * gather (device -> pinned host) and scatter (pinned host -> device) over
 * a vLLM FlashAttention cache of real 16-token pages (Llama-3.1-8B shape:
 * 32 layers, 8 KV heads x 128, bf16: 2 MiB per page, all layers), for
 * kvtier blocks of 2, 16 and 64 MiB, against one contiguous
 * cudaMemcpyAsync of the same bytes from pinned memory (the bus limit);
 * then the same while a compute kernel runs on another stream.  One JSON
 * line per figure on stdout (scripts/gpu-check.sh keeps them).  Exits 77
 * without a GPU.  Usage: kvtier-bench-gpu [--smoke]
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier_cuda.h"

#define CK(call)                                                                         \
	do {                                                                             \
		cudaError_t e_ = (call);                                                 \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));      \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

__global__ void spin(float *x, int iters)
{
	float v = x[blockIdx.x * blockDim.x + threadIdx.x];
	for (int i = 0; i < iters; i++)
		v = v * 1.0000001f + 0.5f;
	x[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
	int driver = 0, runtime = 0, reps = smoke ? 2 : 7;
	const uint32_t layers = 32, heads = 8, dim = 128, bs = 16, nb = smoke ? 64 : 512;
	void *bases[32];
	struct kvt_kv_layout l = { KVT_KV_FLASH_ATTN, 2, layers, nb, bs, heads, dim, bases };
	struct kvt_cuda *ctx;
	cudaStream_t s1, s2;
	cudaEvent_t e0, e1, c0, c1;
	static const uint32_t block_pages[] = { 1, 8, 32 };
	const size_t page_len = (size_t)layers * 2 * bs * heads * dim * 2; /* 2 MiB */
	const size_t total = page_len * nb;
	char *host, *dev_flat;
	float *spin_buf;
	int spin_iters = smoke ? 1000 : 200000;

	kvt_cuda_versions(&driver, &runtime);
	if (kvt_cuda_device_count() == 0) {
		printf("{\"bench\":\"gpu\",\"skipped\":\"no GPU\",\"driver\":%d,\"runtime\":%d}\n",
		       driver, runtime);
		return 77;
	}
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("{\"bench\":\"gpu\",\"device\":\"%s\",\"driver\":%d,\"runtime\":%d,\"pages\":%u,"
	       "\"page_bytes\":%zu}\n", prop.name, driver, runtime, nb, page_len);
	for (uint32_t i = 0; i < layers; i++)
		CK(cudaMalloc(&bases[i], (size_t)kvt_kv_cache_len(&l)));
	CK(cudaHostAlloc((void **)&host, total, cudaHostAllocDefault));
	CK(cudaMalloc((void **)&dev_flat, total));
	CK(cudaMalloc((void **)&spin_buf, 132 * 4 * 256 * sizeof(float)));
	CK(cudaMemset(spin_buf, 0, 132 * 4 * 256 * sizeof(float)));
	memset(host, 1, total);
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventCreate(&c0));
	CK(cudaEventCreate(&c1));
	if (kvt_cuda_open(&ctx, 0) < 0)
		return 1;

	uint32_t *pages = (uint32_t *)malloc(nb * sizeof(uint32_t));
	for (uint32_t i = 0; i < nb; i++)
		pages[i] = (i * 7919u) % nb; /* scattered, every page once (nb | 7919 coprime) */
	for (int overlap = 0; overlap <= 1; overlap++)
		for (unsigned bi = 0; bi < 3; bi++) {
			uint32_t pp = block_pages[bi], n = nb / pp;
			struct kvt_kv_block *blk =
				(struct kvt_kv_block *)calloc(n, sizeof(*blk));
			for (uint32_t i = 0; i < n; i++)
				blk[i] = (struct kvt_kv_block){ pages + i * pp, pp, pp * bs,
								host + (size_t)i * pp * page_len };
			for (int dir = 0; dir < 2; dir++) { /* 0 D2H (gather), 1 H2D (scatter) */
				float t_k[16], t_m[16], t_c = 0;
				for (int r = 0; r < reps; r++) {
					if (overlap) {
						CK(cudaEventRecord(c0, s2));
						spin<<<132 * 4, 256, 0, s2>>>(spin_buf, spin_iters);
						CK(cudaEventRecord(c1, s2));
					}
					CK(cudaEventRecord(e0, s1));
					int rc = dir == 0 ? kvt_cuda_gather(ctx, &l, blk, n, s1, NULL)
							  : kvt_cuda_scatter(ctx, &l, blk, n, s1, NULL);
					if (rc < 0) {
						fprintf(stderr, "copy: %s\n", kvt_strerror(rc));
						return 1;
					}
					CK(cudaEventRecord(e1, s1));
					CK(cudaDeviceSynchronize());
					CK(cudaEventElapsedTime(&t_k[r], e0, e1));
					if (overlap) {
						float tc;
						CK(cudaEventElapsedTime(&tc, c0, c1));
						t_c += tc / reps;
					}
					CK(cudaEventRecord(e0, s1));
					if (dir == 0)
						CK(cudaMemcpyAsync(host, dev_flat, total,
								   cudaMemcpyDeviceToHost, s1));
					else
						CK(cudaMemcpyAsync(dev_flat, host, total,
								   cudaMemcpyHostToDevice, s1));
					CK(cudaEventRecord(e1, s1));
					CK(cudaDeviceSynchronize());
					CK(cudaEventElapsedTime(&t_m[r], e0, e1));
				}
				qsort(t_k, reps, sizeof(float), cmp_f);
				qsort(t_m, reps, sizeof(float), cmp_f);
				double gk = total / (t_k[reps / 2] * 1e6), gm = total / (t_m[reps / 2] * 1e6);
				printf("{\"bench\":\"gpu\",\"op\":\"%s\",\"block_mib\":%u,\"blocks\":%u,"
				       "\"bytes\":%zu,\"overlap_compute\":%s,\"kvtier_gbps\":%.2f,"
				       "\"memcpy_gbps\":%.2f,\"ratio\":%.3f,\"compute_ms\":%.2f}\n",
				       dir == 0 ? "gather_d2h" : "scatter_h2d", pp * 2, n, total,
				       overlap ? "true" : "false", gk, gm, gk / gm, t_c);
				fflush(stdout);
			}
			free(blk);
		}
	{ /* compute alone, for the overlap lines' compute_ms */
		float tc;
		CK(cudaEventRecord(c0, s2));
		spin<<<132 * 4, 256, 0, s2>>>(spin_buf, spin_iters);
		CK(cudaEventRecord(c1, s2));
		CK(cudaDeviceSynchronize());
		CK(cudaEventElapsedTime(&tc, c0, c1));
		printf("{\"bench\":\"gpu\",\"op\":\"compute_alone\",\"compute_ms\":%.2f}\n", tc);
	}
	kvt_cuda_close(ctx);
	return 0;
}

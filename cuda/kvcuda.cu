/*
 * kvcuda.cu - libkvtier_cuda's CUDA half: pinning the DRAM tier
 * (kvt_cuda_register_store), the copy contexts, and the batched
 * gather/scatter kernels over the layouts of kvtier_cuda.h.
 *
 * Owns: each struct kvt_cuda's staging memory (a pinned host table and
 * its device copy) and events.  No global state: the CUDA runtime is
 * linked statically (the shared object needs no libcudart.so, and the
 * driver, libcuda.so, is opened by the runtime only when first called).
 *
 * One launch moves many blocks:
 *
 *   grid.x  one thread block per page of every kvtier block in the batch
 *   grid.y  layers (all of them, or one per launch in layer-wise mode)
 *   grid.z  K and V (1 for MLA)
 *
 * Each thread block computes its span with the same inline layout logic
 * as the host path (lib/kvlayout.h) and copies it in 16-byte units when
 * every address and stride allows, else byte by byte.  The packed side is
 * pinned host memory reached over the bus through unified addressing (or
 * device memory): no staging copy.
 *
 * The work table (one entry per page, plus the layer base pointers) goes
 * to the device with one cudaMemcpyAsync on the caller's stream; the host
 * side is rewritten only after the previous copy of it completed
 * (staged event), the device side only after the previous kernels read it
 * (done event, waited on by the stream).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvlayout.h"

struct kvcuda_work {
	char *buf;         /* the block's packed bytes */
	uint32_t page;     /* page id */
	uint32_t page_tok; /* the page's first token in the block */
	uint32_t ntok;     /* tokens of this page in the block */
	uint32_t tokens;   /* tokens in the block */
};

struct kvt_cuda {
	int device;
	void *host;        /* pinned staging: bases then work */
	void *dev;         /* device copy */
	size_t cap;        /* bytes of each */
	cudaEvent_t staged; /* the host table was copied */
	cudaEvent_t done;   /* the kernels that read the device table ran */
	bool used;
};

#define KVCUDA_THREADS 256
#define KVCUDA_MAX_Y 65535u

__global__ void kvcuda_copy(struct kvt_kv_layout l, char *const *bases,
			    const struct kvcuda_work *works, uint32_t layer0, int gather)
{
	const struct kvcuda_work w = works[blockIdx.x];
	const uint32_t layer = layer0 + blockIdx.y, kv = blockIdx.z;
	struct kvt_kv_span s;
	kvl_span(&l, layer, w.page, kv, 0, w.ntok, w.page_tok, w.tokens, &s);
	char *cache = bases[kvl_base_index(&l, layer)] + s.src_off;
	char *buf = w.buf + s.dst_off;
	const uint64_t pieces = (uint64_t)s.n_inner * s.n_outer;
	const bool vec = (((uintptr_t)cache | (uintptr_t)buf | s.len | s.src_inner | s.dst_inner |
			   s.src_outer | s.dst_outer) & 15) == 0;
	const uint64_t unit = vec ? 16 : 1, units = s.len / unit;

	if (pieces == 1 && vec) {
		uint4 *c = (uint4 *)cache, *p = (uint4 *)buf;
		for (uint64_t i = threadIdx.x; i < units; i += blockDim.x) {
			if (gather)
				p[i] = c[i];
			else
				c[i] = p[i];
		}
		return;
	}
	for (uint64_t i = threadIdx.x; i < units * pieces; i += blockDim.x) {
		const uint64_t piece = i / units, u = i - piece * units;
		const uint64_t o = piece / s.n_inner, in = piece - o * s.n_inner;
		char *c = cache + o * s.src_outer + in * s.src_inner + u * unit;
		char *p = buf + o * s.dst_outer + in * s.dst_inner + u * unit;
		if (vec) {
			if (gather)
				*(uint4 *)p = *(const uint4 *)c;
			else
				*(uint4 *)c = *(const uint4 *)p;
		} else {
			if (gather)
				*p = *c;
			else
				*c = *p;
		}
	}
}

extern "C" int kvt_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); /* clear the sticky "no driver" error */
		return 0;
	}
	return n;
}

extern "C" int kvt_cuda_versions(int *driver, int *runtime)
{
	int d = 0, r = 0;
	if (cudaDriverGetVersion(&d) != cudaSuccess)
		d = 0;
	if (cudaRuntimeGetVersion(&r) != cudaSuccess)
		r = 0;
	if (driver)
		*driver = d;
	if (runtime)
		*runtime = r;
	return 0;
}

static int kvcuda_attach(void *ctx, void *base, size_t len)
{
	(void)ctx;
	if (cudaHostRegister(base, len, cudaHostRegisterPortable | cudaHostRegisterMapped) !=
	    cudaSuccess) {
		cudaGetLastError();
		return -EIO;
	}
	return 0;
}

static void kvcuda_detach(void *ctx, void *base, size_t len)
{
	(void)ctx;
	(void)len;
	if (cudaHostUnregister(base) != cudaSuccess)
		cudaGetLastError();
}

extern "C" int kvt_cuda_register_store(struct kvt_store *store)
{
	struct kvt_region_hook h = { "cuda", kvcuda_attach, kvcuda_detach, NULL };
	if (!store)
		return KVT_ENULL;
	if (kvt_cuda_device_count() <= 0)
		return -ENODEV;
	return kvt_store_register_regions(store, &h);
}

extern "C" int kvt_cuda_open(struct kvt_cuda **out, int device)
{
	struct kvt_cuda *c;
	if (!out)
		return KVT_ENULL;
	*out = NULL;
	if (device < 0 || device >= kvt_cuda_device_count())
		return -ENODEV;
	c = (struct kvt_cuda *)calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->device = device;
	if (cudaSetDevice(device) != cudaSuccess ||
	    cudaEventCreateWithFlags(&c->staged, cudaEventDisableTiming) != cudaSuccess)
		goto fail;
	if (cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming) != cudaSuccess) {
		cudaEventDestroy(c->staged);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	cudaGetLastError();
	free(c);
	return -EIO;
}

extern "C" void kvt_cuda_close(struct kvt_cuda *c)
{
	if (!c)
		return;
	cudaSetDevice(c->device);
	cudaEventSynchronize(c->done);
	cudaEventSynchronize(c->staged);
	cudaFreeHost(c->host);
	cudaFree(c->dev);
	cudaEventDestroy(c->staged);
	cudaEventDestroy(c->done);
	free(c);
}

/* Room for len bytes of table, after the previous user of it finished. */
static int kvcuda_reserve(struct kvt_cuda *c, size_t len)
{
	if (c->used && cudaEventSynchronize(c->staged) != cudaSuccess)
		return -EIO;
	if (len <= c->cap)
		return 0;
	if (c->used && cudaEventSynchronize(c->done) != cudaSuccess)
		return -EIO;
	cudaFreeHost(c->host);
	cudaFree(c->dev);
	c->host = c->dev = NULL;
	c->cap = 0;
	len = len < 65536 ? 65536 : len * 2;
	if (cudaHostAlloc(&c->host, len, cudaHostAllocDefault) != cudaSuccess ||
	    cudaMalloc(&c->dev, len) != cudaSuccess) {
		cudaGetLastError();
		cudaFreeHost(c->host);
		c->host = NULL;
		return -ENOMEM;
	}
	c->cap = len;
	return 0;
}

static int kvcuda_run(struct kvt_cuda *c, const struct kvt_kv_layout *l,
		      const struct kvt_kv_block *blocks, unsigned n, void *stream_p,
		      void *const *events, int gather)
{
	cudaStream_t stream = (cudaStream_t)stream_p;
	uint64_t works = 0;
	uint32_t nbases, layers_per;
	size_t len;
	int ret;

	if (!c || (!blocks && n))
		return KVT_ENULL;
	if ((ret = kvt_kv_layout_check(l)) < 0)
		return ret;
	for (unsigned i = 0; i < n; i++) {
		if ((ret = kvt_kv_block_check(l, &blocks[i])) < 0)
			return ret;
		works += blocks[i].page_count;
	}
	if (works == 0)
		return 0;
	if (works > INT32_MAX)
		return KVT_EBADLEN;
	nbases = l->kind == KVT_KV_CROSS_LAYER ? 1 : l->layer_count;
	len = nbases * sizeof(char *) + works * sizeof(struct kvcuda_work);
	if (cudaSetDevice(c->device) != cudaSuccess)
		goto cuda_fail;
	if ((ret = kvcuda_reserve(c, len)) < 0)
		return ret;
	{
		char **hb = (char **)c->host;
		struct kvcuda_work *hw = (struct kvcuda_work *)(hb + nbases);
		for (uint32_t i = 0; i < nbases; i++)
			hb[i] = (char *)l->layer_base[i];
		for (unsigned i = 0; i < n; i++)
			for (uint32_t p = 0; p < blocks[i].page_count; p++, hw++) {
				uint32_t first = p * l->block_tokens, nt = blocks[i].tokens - first;
				hw->buf = (char *)blocks[i].buf;
				hw->page = blocks[i].pages[p];
				hw->page_tok = first;
				hw->ntok = nt < l->block_tokens ? nt : l->block_tokens;
				hw->tokens = blocks[i].tokens;
			}
	}
	/* The previous kernels on any stream must be done reading the table. */
	if ((c->used && cudaStreamWaitEvent(stream, c->done, 0) != cudaSuccess) ||
	    cudaMemcpyAsync(c->dev, c->host, len, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
	    cudaEventRecord(c->staged, stream) != cudaSuccess)
		goto cuda_fail;
	c->used = true;
	{
		char *const *db = (char *const *)c->dev;
		const struct kvcuda_work *dw = (const struct kvcuda_work *)(db + nbases);
		struct kvt_kv_layout kl = *l;
		kl.layer_base = NULL; /* the kernel reads db */
		layers_per = events ? 1 : KVCUDA_MAX_Y;
		for (uint32_t l0 = 0; l0 < l->layer_count; l0 += layers_per) {
			uint32_t ny = l->layer_count - l0 < layers_per ? l->layer_count - l0 : layers_per;
			dim3 grid((unsigned)works, ny, kvl_kv_count(l));
			kvcuda_copy<<<grid, KVCUDA_THREADS, 0, stream>>>(kl, db, dw, l0, gather);
			if (cudaGetLastError() != cudaSuccess)
				goto cuda_fail;
			if (events && cudaEventRecord((cudaEvent_t)events[l0], stream) != cudaSuccess)
				goto cuda_fail;
		}
	}
	if (cudaEventRecord(c->done, stream) != cudaSuccess)
		goto cuda_fail;
	return 0;
cuda_fail:
	cudaGetLastError();
	return -EIO;
}

extern "C" int kvt_cuda_gather(struct kvt_cuda *c, const struct kvt_kv_layout *l,
			       const struct kvt_kv_block *blocks, unsigned n, void *stream,
			       void *const *layer_events)
{
	return kvcuda_run(c, l, blocks, n, stream, layer_events, 1);
}

extern "C" int kvt_cuda_scatter(struct kvt_cuda *c, const struct kvt_kv_layout *l,
				const struct kvt_kv_block *blocks, unsigned n, void *stream,
				void *const *layer_events)
{
	return kvcuda_run(c, l, blocks, n, stream, layer_events, 0);
}

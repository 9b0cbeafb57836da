/*
 * kvtier_cuda.h - moving KV blocks between an engine's paged GPU cache and
 * kvtier (libkvtier_cuda, built when the CUDA toolkit is present; doc/cuda.md).
 *
 * An inference engine keeps its KV cache in GPU memory as pages ("engine
 * blocks") of block_tokens tokens, in one of a few layouts.  A kvtier block
 * is a run of such pages, all layers, packed contiguously so it can be
 * stored, hashed and moved as one value.  This header has three parts:
 *
 *   1. the layout descriptor and the layout logic (pure C, no CUDA: also
 *      usable on host memory, and what the kernels themselves compute);
 *   2. the packed format of a kvtier block;
 *   3. the CUDA calls: pinning the DRAM tier, batched gather and scatter.
 *
 * Every call returns >= 0 on success or a negative code that kvt_strerror
 * names (KVT_E* from kvtier.h, or -errno: -ENODEV when there is no usable
 * GPU, -EIO for any other CUDA error).  C17 and C++; no CUDA header needed:
 * streams and events are passed as void * (cudaStream_t, cudaEvent_t).
 */
#ifndef KVTIER_CUDA_H
#define KVTIER_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kvtier.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * 1. Layouts
 *
 * Shapes, outermost first; NB = block_count, BS = block_tokens, H =
 * kv_heads, D = head_dim, L = layer_count.  "Per layer": one tensor per
 * layer, layer_base[l] its start; cross-layer: one tensor, layer_base[0].
 *
 *   KVT_KV_FLASH_ATTN      per layer [2, NB, BS, H, D]   vLLM FlashAttention (NHD)
 *   KVT_KV_FLASH_ATTN_HND  per layer [2, NB, H, BS, D]   the same, head-major
 *   KVT_KV_FLASHINFER      per layer [NB, 2, BS, H, D]   FlashInfer (NHD)
 *   KVT_KV_FLASHINFER_HND  per layer [NB, 2, H, BS, D]   FlashInfer head-major
 *   KVT_KV_MLA             per layer [NB, BS, D]         MLA latent cache (H must be 1,
 *                                                        D = kv_lora_rank + rope dim)
 *   KVT_KV_CROSS_LAYER     one tensor [NB, L, 2, BS, H, D]  all layers of a page together
 *
 * The "2" is K then V.  Elements are dtype_len bytes (1 fp8, 2 bf16/fp16,
 * 4 fp32); their values are never looked at.
 */
enum kvt_kv_kind {
	KVT_KV_FLASH_ATTN = 1,
	KVT_KV_FLASH_ATTN_HND = 2,
	KVT_KV_FLASHINFER = 3,
	KVT_KV_FLASHINFER_HND = 4,
	KVT_KV_MLA = 5,
	KVT_KV_CROSS_LAYER = 6,
};

struct kvt_kv_layout {
	int kind;              /* enum kvt_kv_kind */
	uint32_t dtype_len;    /* bytes per element: 1, 2, 4 or 8 */
	uint32_t layer_count;  /* L */
	uint32_t block_count;  /* NB: pages per layer tensor */
	uint32_t block_tokens; /* BS: tokens per page */
	uint32_t kv_heads;     /* H (1 for MLA) */
	uint32_t head_dim;     /* D, elements */
	/* layer_count pointers (one for KVT_KV_CROSS_LAYER), owned by the
	 * caller: device memory for the CUDA calls, host memory for the host
	 * calls.  Read during each call only. */
	void *const *layer_base;
};

/* 0 if the descriptor is usable; KVT_ENULL, KVT_EDESC (a field is zero or
 * out of range, an unknown kind, MLA with kv_heads != 1, a tensor over
 * 2^62 bytes).  Any thread. */
int kvt_kv_layout_check(const struct kvt_kv_layout *layout);

/* Bytes of the tensor at each layer_base pointer (for allocating one), or
 * a negative code as kvt_kv_layout_check. */
int64_t kvt_kv_cache_len(const struct kvt_kv_layout *layout);

/*
 * The layout logic: where (layer, page, kv, tokens [t0, t1)) of the cache
 * lies, as n_outer x n_inner pieces of len contiguous bytes.  Piece (o, i)
 * starts at src_off + o * src_outer + i * src_inner bytes from the layer's
 * base pointer, and goes to dst_off + o * dst_outer + i * dst_inner in the
 * packed block (section 2) of `tokens` tokens whose page starts at token
 * page_tok.  NHD layouts give one piece; head-major ones one per (head,
 * token).  Returns 0, or KVT_EDESC / KVT_ERANGE (indices out of range).
 */
struct kvt_kv_span {
	uint64_t src_off, dst_off;
	uint64_t len;
	uint32_t n_inner, n_outer;
	uint64_t src_inner, dst_inner;
	uint64_t src_outer, dst_outer;
};
int kvt_kv_layout_span(const struct kvt_kv_layout *layout, uint32_t layer, uint32_t page,
		       uint32_t kv, uint32_t t0, uint32_t t1, uint32_t page_tok, uint32_t tokens,
		       struct kvt_kv_span *span);

/* ------------------------------------------------------------------------
 * 2. A kvtier block, packed
 *
 * The pages of one kvtier block (pages[0..page_count), in token order; all
 * full but the last, which holds the rest of `tokens`) packed as
 *
 *     [L][K][tokens][H][D]      K = 2 (K, V), or 1 for MLA
 *
 * whatever the cache layout, so a block gathered from one layout scatters
 * into another, and each layer's bytes are contiguous (layer-wise loads).
 * Partially filled pages move only their `tokens` tokens.
 */
struct kvt_kv_block {
	const uint32_t *pages; /* page ids < block_count; caller's, read during the call */
	uint32_t page_count;
	uint32_t tokens;       /* (page_count - 1) * BS < tokens <= page_count * BS */
	void *buf;             /* kvt_kv_block_len bytes; pinned host or device memory
				* for the CUDA calls */
};

/* Packed bytes of a block of `tokens` tokens, or a negative code. */
int64_t kvt_kv_block_len(const struct kvt_kv_layout *layout, uint32_t tokens);

/* 0 if blk fits the layout (KVT_ENULL, KVT_EBADLEN, KVT_ERANGE otherwise). */
int kvt_kv_block_check(const struct kvt_kv_layout *layout, const struct kvt_kv_block *blk);

/* The layout logic run on the CPU over host memory: pack (gather) or
 * unpack (scatter) block_count blocks.  Every block is checked before
 * anything is copied.  Any thread. */
int kvt_kv_gather_host(const struct kvt_kv_layout *layout, const struct kvt_kv_block *blocks,
		       unsigned block_count);
int kvt_kv_scatter_host(const struct kvt_kv_layout *layout, const struct kvt_kv_block *blocks,
			unsigned block_count);

/* ------------------------------------------------------------------------
 * 3. CUDA
 */

/* GPUs this process can use (>= 0; 0 when there is no driver or no GPU,
 * never an error).  Loads nothing but the CUDA runtime linked into
 * libkvtier_cuda; the driver (libcuda.so) is opened at run time. */
int kvt_cuda_device_count(void);

/* Driver and runtime CUDA versions as 1000 * major + 10 * minor (0 where
 * there is no driver).  Returns 0. */
int kvt_cuda_versions(int *driver, int *runtime);

/*
 * Pin the store's DRAM arena: cudaHostRegister (portable, mapped) of every
 * region, through kvt_store_register_regions; the store unregisters them
 * at kvt_store_close.  Then host-device copies and the kernels below reach
 * values in DRAM directly.  Returns 0; -ENODEV (no GPU: nothing done,
 * stat dram.registered stays "not registered"); -EIO (cudaHostRegister
 * failed, e.g. over the locked-memory limit: nothing stays registered);
 * the errors of kvt_store_register_regions.
 */
int kvt_cuda_register_store(struct kvt_store *store);

/* A context for the copies: the device it was opened on and its staging
 * memory.  One thread at a time per context; create one per stream that
 * submits concurrently. */
struct kvt_cuda;

/* Open on `device`: returns 0 or -ENODEV, -EIO, -ENOMEM. */
int kvt_cuda_open(struct kvt_cuda **out, int device);
/* Waits for the context's copies and frees it.  NULL is a no-op. */
void kvt_cuda_close(struct kvt_cuda *ctx);

/*
 * Batched gather: pack block_count blocks from the layout's device pages
 * into their bufs (pinned host memory: a kvtier DRAM value after
 * kvt_cuda_register_store, or cudaHostAlloc'd; or device memory) in one
 * kernel launch on `stream` (NULL: the default stream).  Asynchronous: the
 * bytes are in place when the stream reaches this point; the caller keeps
 * layout->layer_base, pages and bufs alive until then.
 *
 * layer_events: NULL, or layer_count cudaEvent_t the caller created; then
 * the copy runs as one launch per layer and records layer_events[l] once
 * layer l is done, so a store can start a layer's write as soon as the
 * forward pass has produced it, and a load (scatter) can let the engine
 * start layer 0 while later layers are in flight.
 *
 * Returns 0, KVT_ENULL, the block and layout checks' errors, -ENOMEM,
 * -EIO (a launch failed).
 */
int kvt_cuda_gather(struct kvt_cuda *ctx, const struct kvt_kv_layout *layout,
		    const struct kvt_kv_block *blocks, unsigned block_count, void *stream,
		    void *const *layer_events);
/* Batched scatter: unpack the bufs into the pages; as kvt_cuda_gather. */
int kvt_cuda_scatter(struct kvt_cuda *ctx, const struct kvt_kv_layout *layout,
		     const struct kvt_kv_block *blocks, unsigned block_count, void *stream,
		     void *const *layer_events);

#ifdef __cplusplus
}
#endif
#endif /* KVTIER_CUDA_H */

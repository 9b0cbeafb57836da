/*
 * kvlayout.h - the layout logic of kvtier_cuda.h, as inline functions that
 * compile both as C (kvlayout.c, the host gather/scatter and every check)
 * and as CUDA device code (cuda/kvcopy.cu: each thread block computes its
 * own span).  One definition, so the kernels and the CPU path cannot
 * disagree about where a byte lives; the tests check this logic against
 * independent index formulas (tests/unit/test_kvlayout.c).
 *
 * No checks here: callers validate the layout and the indices first
 * (kvt_kv_layout_check, kvt_kv_block_check).
 */
#ifndef KVT_KVLAYOUT_H
#define KVT_KVLAYOUT_H

#include "kvtier_cuda.h"

#ifdef __CUDACC__
#define KVL_FN static __host__ __device__ __forceinline__
#else
#define KVL_FN static inline
#endif

/* K and V, or the one latent tensor of MLA. */
KVL_FN uint32_t kvl_kv_count(const struct kvt_kv_layout *l)
{
	return l->kind == KVT_KV_MLA ? 1u : 2u;
}

/* Bytes of one head's vector, and of one token (all heads). */
KVL_FN uint64_t kvl_row_len(const struct kvt_kv_layout *l)
{
	return (uint64_t)l->head_dim * l->dtype_len;
}

KVL_FN uint64_t kvl_tok_len(const struct kvt_kv_layout *l)
{
	return kvl_row_len(l) * l->kv_heads;
}

/* Packed offset of (layer, kv, token t) in a block of `tokens` tokens:
 * [L][K][tokens][H][D]. */
KVL_FN uint64_t kvl_packed_off(const struct kvt_kv_layout *l, uint32_t tokens, uint32_t layer,
			       uint32_t kv, uint32_t t)
{
	return (((uint64_t)layer * kvl_kv_count(l) + kv) * tokens + t) * kvl_tok_len(l);
}

/* Which base pointer a layer's bytes hang off. */
KVL_FN uint32_t kvl_base_index(const struct kvt_kv_layout *l, uint32_t layer)
{
	return l->kind == KVT_KV_CROSS_LAYER ? 0 : layer;
}

/* Offset from the layer's base of (page, kv, token t, head 0), and whether
 * the layout is head-major (heads outside tokens within a page). */
KVL_FN uint64_t kvl_src_off(const struct kvt_kv_layout *l, uint32_t layer, uint32_t page,
			    uint32_t kv, uint32_t t, int *hnd)
{
	const uint64_t row = kvl_row_len(l), tok = kvl_tok_len(l);
	const uint64_t bs = l->block_tokens, nb = l->block_count, h = l->kv_heads;
	*hnd = 0;
	switch (l->kind) {
	case KVT_KV_FLASH_ATTN: /* [2, NB, BS, H, D] */
		return ((kv * nb + page) * bs + t) * tok;
	case KVT_KV_FLASH_ATTN_HND: /* [2, NB, H, BS, D] */
		*hnd = 1;
		return (kv * nb + page) * h * bs * row + t * row;
	case KVT_KV_FLASHINFER: /* [NB, 2, BS, H, D] */
		return (((uint64_t)page * 2 + kv) * bs + t) * tok;
	case KVT_KV_FLASHINFER_HND: /* [NB, 2, H, BS, D] */
		*hnd = 1;
		return ((uint64_t)page * 2 + kv) * h * bs * row + t * row;
	case KVT_KV_MLA: /* [NB, BS, D] */
		return ((uint64_t)page * bs + t) * row;
	default: /* KVT_KV_CROSS_LAYER: [NB, L, 2, BS, H, D] */
		return ((((uint64_t)page * l->layer_count + layer) * 2 + kv) * bs + t) * tok;
	}
}

/*
 * The span of (layer, page, kv, tokens [t0, t1)) for a page whose first
 * token is token page_tok of a packed block of `tokens` tokens:
 *
 *   NHD   the page holds tokens x heads x D contiguously, as the packed
 *         block does: one piece of (t1 - t0) * tok bytes.
 *   HND   heads outside tokens: piece (head o, token i) is one row; in the
 *         cache rows of a head are adjacent (src_inner = row) and heads are
 *         BS rows apart; in the block tokens are tok apart and heads row.
 */
KVL_FN void kvl_span(const struct kvt_kv_layout *l, uint32_t layer, uint32_t page, uint32_t kv,
		     uint32_t t0, uint32_t t1, uint32_t page_tok, uint32_t tokens,
		     struct kvt_kv_span *s)
{
	int hnd;
	const uint64_t row = kvl_row_len(l), tok = kvl_tok_len(l);
	s->src_off = kvl_src_off(l, layer, page, kv, t0, &hnd);
	s->dst_off = kvl_packed_off(l, tokens, layer, kv, page_tok + t0);
	if (!hnd || l->kv_heads == 1) {
		s->len = (uint64_t)(t1 - t0) * tok;
		s->n_inner = s->n_outer = 1;
		s->src_inner = s->dst_inner = s->src_outer = s->dst_outer = 0;
	} else {
		s->len = row;
		s->n_inner = t1 - t0;
		s->src_inner = row;
		s->dst_inner = tok;
		s->n_outer = l->kv_heads;
		s->src_outer = (uint64_t)l->block_tokens * row;
		s->dst_outer = row;
	}
}

#endif

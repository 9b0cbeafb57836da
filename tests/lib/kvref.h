/*
 * kvref.h - a plain reference for kvtier_cuda.h's layouts: every element's
 * index written out from the shapes in the header's table, one loop per
 * dimension, no spans and no shared code with lib/kvlayout.h.  The layout
 * logic (CPU and GPU) is tested against it byte for byte.
 */
#ifndef KVT_TEST_KVREF_H
#define KVT_TEST_KVREF_H

#include <stdint.h>
#include <string.h>

#include "kvtier_cuda.h"

/* Element index of (layer, kv, page p, token t, head h, dim d) in the tensor
 * at layer_base[layer] (or [0] for cross-layer). */
static inline uint64_t kvref_index(const struct kvt_kv_layout *l, uint64_t layer, uint64_t kv,
				   uint64_t p, uint64_t t, uint64_t h, uint64_t d)
{
	uint64_t NB = l->block_count, BS = l->block_tokens, H = l->kv_heads, D = l->head_dim;
	uint64_t L = l->layer_count;
	switch (l->kind) {
	case KVT_KV_FLASH_ATTN: return (((kv * NB + p) * BS + t) * H + h) * D + d;
	case KVT_KV_FLASH_ATTN_HND: return (((kv * NB + p) * H + h) * BS + t) * D + d;
	case KVT_KV_FLASHINFER: return (((p * 2 + kv) * BS + t) * H + h) * D + d;
	case KVT_KV_FLASHINFER_HND: return (((p * 2 + kv) * H + h) * BS + t) * D + d;
	case KVT_KV_MLA: return (p * BS + t) * D + d;
	case KVT_KV_CROSS_LAYER: return ((((p * L + layer) * 2 + kv) * BS + t) * H + h) * D + d;
	}
	return UINT64_MAX;
}

/* Element index in the packed block [L][K][T][H][D]. */
static inline uint64_t kvref_packed(const struct kvt_kv_layout *l, uint64_t T, uint64_t layer,
				    uint64_t kv, uint64_t tt, uint64_t h, uint64_t d)
{
	uint64_t K = l->kind == KVT_KV_MLA ? 1 : 2;
	return (((layer * K + kv) * T + tt) * l->kv_heads + h) * l->head_dim + d;
}

/* Naive gather (gather != 0) or scatter of one block, element by element. */
static inline void kvref_move(const struct kvt_kv_layout *l, const struct kvt_kv_block *b,
			      int gather)
{
	uint64_t K = l->kind == KVT_KV_MLA ? 1 : 2, E = l->dtype_len;
	for (uint64_t layer = 0; layer < l->layer_count; layer++) {
		char *base = l->layer_base[l->kind == KVT_KV_CROSS_LAYER ? 0 : layer];
		for (uint64_t kv = 0; kv < K; kv++)
			for (uint64_t tt = 0; tt < b->tokens; tt++) {
				uint64_t p = b->pages[tt / l->block_tokens], t = tt % l->block_tokens;
				for (uint64_t h = 0; h < l->kv_heads; h++)
					for (uint64_t d = 0; d < l->head_dim; d++) {
						char *c = base + kvref_index(l, layer, kv, p, t, h, d) * E;
						char *q = (char *)b->buf +
							  kvref_packed(l, b->tokens, layer, kv, tt, h, d) * E;
						if (gather)
							memcpy(q, c, E);
						else
							memcpy(c, q, E);
					}
			}
	}
}

#endif

/*
 * kvlayout.c - the checks and the host (CPU) path of kvtier_cuda.h's layout
 * logic: validating a layout and its blocks, sizes, and gather/scatter over
 * host memory with the same spans the kernels use (kvlayout.h).
 *
 * Owns nothing: pure functions of their arguments, no allocation, any
 * thread.  Built into libkvtier_cuda and, without CUDA, into the CPU test.
 * A kvtier block is checked whole before a byte moves, so a call either
 * copies every block or none.
 */
#include <stdbool.h>
#include <string.h>

#include "kvlayout.h"

#define KVL_MAX_LEN (UINT64_C(1) << 62)

int kvt_kv_layout_check(const struct kvt_kv_layout *l)
{
	uint64_t n;
	if (!l || !l->layer_base)
		return KVT_ENULL;
	if (l->kind < KVT_KV_FLASH_ATTN || l->kind > KVT_KV_CROSS_LAYER)
		return KVT_EDESC;
	if (l->dtype_len != 1 && l->dtype_len != 2 && l->dtype_len != 4 && l->dtype_len != 8)
		return KVT_EDESC;
	if (!l->layer_count || !l->block_count || !l->block_tokens || !l->kv_heads || !l->head_dim)
		return KVT_EDESC;
	if (l->kind == KVT_KV_MLA && l->kv_heads != 1)
		return KVT_EDESC;
	/* Every factor is < 2^32 and all layers' bytes must stay under 2^62
	 * (so no offset computed later overflows): check before each step. */
	n = kvl_row_len(l); /* < 2^35 */
	if (n > KVL_MAX_LEN / l->kv_heads)
		return KVT_EDESC;
	n *= l->kv_heads;
	if (n > KVL_MAX_LEN / l->block_tokens)
		return KVT_EDESC;
	n *= l->block_tokens;
	if (n > KVL_MAX_LEN / ((uint64_t)l->block_count * 2))
		return KVT_EDESC;
	n *= (uint64_t)l->block_count * 2;
	if (n > KVL_MAX_LEN / l->layer_count)
		return KVT_EDESC;
	for (uint32_t i = 0; i < (l->kind == KVT_KV_CROSS_LAYER ? 1 : l->layer_count); i++)
		if (!l->layer_base[i])
			return KVT_ENULL;
	return 0;
}

int64_t kvt_kv_cache_len(const struct kvt_kv_layout *l)
{
	int ret = kvt_kv_layout_check(l);
	uint64_t n;
	if (ret < 0)
		return ret;
	n = kvl_tok_len(l) * l->block_tokens * l->block_count * kvl_kv_count(l);
	if (l->kind == KVT_KV_CROSS_LAYER)
		n *= l->layer_count;
	return (int64_t)n;
}

int64_t kvt_kv_block_len(const struct kvt_kv_layout *l, uint32_t tokens)
{
	int ret = kvt_kv_layout_check(l);
	if (ret < 0)
		return ret;
	if (tokens == 0)
		return KVT_EBADLEN;
	/* tokens <= page_count * BS of a block, so it is < 2^62 too if the
	 * cache is; a block larger than the cache is out of range anyway. */
	if ((uint64_t)tokens > (uint64_t)l->block_count * l->block_tokens)
		return KVT_ERANGE;
	return (int64_t)(kvl_tok_len(l) * tokens * kvl_kv_count(l) * l->layer_count);
}

int kvt_kv_block_check(const struct kvt_kv_layout *l, const struct kvt_kv_block *b)
{
	int ret = kvt_kv_layout_check(l);
	if (ret < 0)
		return ret;
	if (!b || !b->pages || !b->buf)
		return KVT_ENULL;
	if (b->page_count == 0 || b->tokens == 0)
		return KVT_EBADLEN;
	if (b->tokens > (uint64_t)b->page_count * l->block_tokens ||
	    b->tokens <= (uint64_t)(b->page_count - 1) * l->block_tokens)
		return KVT_EBADLEN;
	for (uint32_t i = 0; i < b->page_count; i++)
		if (b->pages[i] >= l->block_count)
			return KVT_ERANGE;
	return 0;
}

int kvt_kv_layout_span(const struct kvt_kv_layout *l, uint32_t layer, uint32_t page,
		       uint32_t kv, uint32_t t0, uint32_t t1, uint32_t page_tok, uint32_t tokens,
		       struct kvt_kv_span *span)
{
	int ret = kvt_kv_layout_check(l);
	if (ret < 0)
		return ret;
	if (!span)
		return KVT_ENULL;
	if (layer >= l->layer_count || page >= l->block_count || kv >= kvl_kv_count(l) ||
	    t0 >= t1 || t1 > l->block_tokens || (uint64_t)page_tok + t1 > tokens)
		return KVT_ERANGE;
	kvl_span(l, layer, page, kv, t0, t1, page_tok, tokens, span);
	return 0;
}

/* Move every piece of a span: to the block (gather) or from it. */
static void kvlayout_move(char *cache, char *buf, const struct kvt_kv_span *s, bool gather)
{
	for (uint32_t o = 0; o < s->n_outer; o++)
		for (uint32_t i = 0; i < s->n_inner; i++) {
			char *c = cache + s->src_off + o * s->src_outer + i * s->src_inner;
			char *p = buf + s->dst_off + o * s->dst_outer + i * s->dst_inner;
			if (gather)
				memcpy(p, c, s->len);
			else
				memcpy(c, p, s->len);
		}
}

static int kvlayout_host(const struct kvt_kv_layout *l, const struct kvt_kv_block *blocks,
			 unsigned n, bool gather)
{
	int ret;
	if (!blocks && n)
		return KVT_ENULL;
	for (unsigned i = 0; i < n; i++)
		if ((ret = kvt_kv_block_check(l, &blocks[i])) < 0)
			return ret;
	for (unsigned i = 0; i < n; i++) {
		const struct kvt_kv_block *b = &blocks[i];
		for (uint32_t layer = 0; layer < l->layer_count; layer++) {
			char *base = l->layer_base[kvl_base_index(l, layer)];
			for (uint32_t kv = 0; kv < kvl_kv_count(l); kv++)
				for (uint32_t p = 0; p < b->page_count; p++) {
					struct kvt_kv_span s;
					uint32_t first = p * l->block_tokens;
					uint32_t nt = b->tokens - first;
					if (nt > l->block_tokens)
						nt = l->block_tokens;
					kvl_span(l, layer, b->pages[p], kv, 0, nt, first, b->tokens,
						 &s);
					kvlayout_move(base, b->buf, &s, gather);
				}
		}
	}
	return 0;
}

int kvt_kv_gather_host(const struct kvt_kv_layout *l, const struct kvt_kv_block *blocks,
		       unsigned n)
{
	return kvlayout_host(l, blocks, n, true);
}

int kvt_kv_scatter_host(const struct kvt_kv_layout *l, const struct kvt_kv_block *blocks,
			unsigned n)
{
	return kvlayout_host(l, blocks, n, false);
}

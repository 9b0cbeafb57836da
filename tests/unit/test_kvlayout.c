/*
 * test_kvlayout.c - the layout logic of kvtier_cuda.h on the CPU (no GPU,
 * no CUDA needed): for every layout, dtype size 1..8, odd page counts and
 * head dims, partially filled pages, the host gather and scatter
 * (lib/kvlayout.c, the spans the kernels use) against the element-by-
 * element reference of tests/lib/kvref.h, every byte of the packed blocks
 * and of the whole caches compared.  Caches are malloc'd to their exact
 * size, so under ASan a span reaching past a tensor fails here too.
 */
#include <stdlib.h>

#include "kvref.h"
#include "t.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((unsigned char *)p)[i] = (unsigned char)rnd();
}

struct cache {
	struct kvt_kv_layout l;
	void *base[8];
	size_t len; /* per base */
	unsigned bases;
};

static void cache_init(struct cache *c, int kind, uint32_t dtype, uint32_t layers, uint32_t nb,
		       uint32_t bs, uint32_t heads, uint32_t dim, int random)
{
	int64_t len;
	memset(c, 0, sizeof(*c));
	c->l = (struct kvt_kv_layout){ kind, dtype, layers, nb, bs, heads, dim, c->base };
	/* layer_base is read for the check: point it at placeholders first */
	for (unsigned i = 0; i < 8; i++)
		c->base[i] = c;
	len = kvt_kv_cache_len(&c->l);
	T_ASSERT(len > 0);
	c->len = (size_t)len;
	c->bases = kind == KVT_KV_CROSS_LAYER ? 1 : layers;
	for (unsigned i = 0; i < c->bases; i++) {
		T_ASSERT((c->base[i] = calloc(1, c->len)) != NULL);
		if (random)
			fill(c->base[i], c->len);
	}
}

static void cache_free(struct cache *c)
{
	for (unsigned i = 0; i < c->bases; i++)
		free(c->base[i]);
}

static void cache_eq(const struct cache *a, const struct cache *b)
{
	T_EQ_INT(a->bases, b->bases);
	for (unsigned i = 0; i < a->bases; i++)
		T_EQ_MEM(a->base[i], b->base[i], a->len);
}

#define MAXB 4

/* Up to MAXB blocks over distinct random pages; the last page of each
 * partially filled when partial. */
static unsigned make_blocks(const struct kvt_kv_layout *l, struct kvt_kv_block *b,
			    uint32_t pages[MAXB][3], int partial)
{
	uint32_t perm[64];
	unsigned n = 0, used = 0;
	T_ASSERT(l->block_count <= 64);
	for (uint32_t i = 0; i < l->block_count; i++)
		perm[i] = i;
	for (uint32_t i = l->block_count - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rnd() % (i + 1)), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	while (n < MAXB && used < l->block_count) {
		uint32_t pc = 1 + (uint32_t)(rnd() % 3);
		if (pc > l->block_count - used)
			pc = l->block_count - used;
		for (uint32_t i = 0; i < pc; i++)
			pages[n][i] = perm[used++];
		b[n].pages = pages[n];
		b[n].page_count = pc;
		b[n].tokens = pc * l->block_tokens;
		if (partial)
			b[n].tokens -= (uint32_t)(rnd() % l->block_tokens);
		int64_t len = kvt_kv_block_len(l, b[n].tokens);
		T_ASSERT(len > 0);
		T_ASSERT((b[n].buf = malloc((size_t)len)) != NULL);
		n++;
	}
	return n;
}

static void one_case(int kind, uint32_t dtype, uint32_t layers, uint32_t nb, uint32_t bs,
		     uint32_t heads, uint32_t dim, int partial)
{
	struct cache a, b, c;
	struct kvt_kv_block blk[MAXB], ref[MAXB];
	uint32_t pages[MAXB][3];
	unsigned n;

	cache_init(&a, kind, dtype, layers, nb, bs, heads, dim, 1);
	cache_init(&b, kind, dtype, layers, nb, bs, heads, dim, 0);
	cache_init(&c, kind, dtype, layers, nb, bs, heads, dim, 0);
	n = make_blocks(&a.l, blk, pages, partial);
	for (unsigned i = 0; i < n; i++) {
		size_t len = (size_t)kvt_kv_block_len(&a.l, blk[i].tokens);
		ref[i] = blk[i];
		T_ASSERT((ref[i].buf = malloc(len)) != NULL);
		memset(blk[i].buf, 0xee, len);
		kvref_move(&a.l, &ref[i], 1);
	}
	/* gather: the packed blocks equal the reference's */
	T_OK(kvt_kv_gather_host(&a.l, blk, n));
	for (unsigned i = 0; i < n; i++)
		T_EQ_MEM(blk[i].buf, ref[i].buf, (size_t)kvt_kv_block_len(&a.l, blk[i].tokens));
	/* scatter into a zeroed cache: equal to the reference's scatter,
	 * every byte of the caches (untouched pages and tails stay zero) */
	for (unsigned i = 0; i < n; i++)
		kvref_move(&c.l, &ref[i], 0);
	T_OK(kvt_kv_scatter_host(&b.l, blk, n));
	cache_eq(&b, &c);
	/* and the scattered pages read back as what was gathered */
	for (unsigned i = 0; i < n; i++) {
		size_t len = (size_t)kvt_kv_block_len(&a.l, blk[i].tokens);
		memset(ref[i].buf, 0, len);
		kvref_move(&b.l, &ref[i], 1);
		T_EQ_MEM(blk[i].buf, ref[i].buf, len);
	}
	for (unsigned i = 0; i < n; i++) {
		free(blk[i].buf);
		free(ref[i].buf);
	}
	cache_free(&a);
	cache_free(&b);
	cache_free(&c);
}

static void test_layouts(void)
{
	static const uint32_t dtypes[] = { 1, 2, 4, 8 };
	unsigned cases = 0;
	for (int kind = KVT_KV_FLASH_ATTN; kind <= KVT_KV_CROSS_LAYER; kind++)
		for (unsigned d = 0; d < 4; d++)
			for (int partial = 0; partial <= 1; partial++) {
				uint32_t heads = kind == KVT_KV_MLA ? 1 : 3;
				/* odd everything: 7 pages, 5-token pages, 3 heads, dim 9 */
				one_case(kind, dtypes[d], 3, 7, 5, heads, 9, partial);
				/* engine-like: 16-token pages, dim 64, 11 pages */
				one_case(kind, dtypes[d], 2, 11, 16, kind == KVT_KV_MLA ? 1 : 2, 64,
					 partial);
				/* one head, one page of one token */
				one_case(kind, dtypes[d], 1, 1, 1, 1, 1, partial);
				cases += 3;
			}
	T_EQ_INT(cases, 6 * 4 * 2 * 3);
}

/* A block gathered from one layout scatters into any other: the packed
 * format does not depend on the cache's layout. */
static void test_cross_layout(void)
{
	for (int from = KVT_KV_FLASH_ATTN; from <= KVT_KV_CROSS_LAYER; from++)
		for (int to = KVT_KV_FLASH_ATTN; to <= KVT_KV_CROSS_LAYER; to++) {
			struct cache a, b;
			struct kvt_kv_block blk[MAXB];
			uint32_t pages[MAXB][3];
			void *copy[MAXB];
			unsigned n;
			if ((from == KVT_KV_MLA) != (to == KVT_KV_MLA))
				continue; /* MLA has one tensor per layer, the rest two */
			uint32_t h = from == KVT_KV_MLA ? 1 : 2;
			cache_init(&a, from, 2, 2, 5, 4, h, 6, 1);
			cache_init(&b, to, 2, 2, 5, 4, h, 6, 0);
			n = make_blocks(&a.l, blk, pages, 1);
			T_OK(kvt_kv_gather_host(&a.l, blk, n));
			T_OK(kvt_kv_scatter_host(&b.l, blk, n));
			for (unsigned i = 0; i < n; i++) {
				size_t len = (size_t)kvt_kv_block_len(&a.l, blk[i].tokens);
				T_ASSERT((copy[i] = malloc(len)) != NULL);
				memcpy(copy[i], blk[i].buf, len);
				memset(blk[i].buf, 0, len);
			}
			T_OK(kvt_kv_gather_host(&b.l, blk, n));
			for (unsigned i = 0; i < n; i++) {
				T_EQ_MEM(blk[i].buf, copy[i],
					 (size_t)kvt_kv_block_len(&a.l, blk[i].tokens));
				free(copy[i]);
				free(blk[i].buf);
			}
			cache_free(&a);
			cache_free(&b);
		}
}

/* The spans themselves: NHD is one piece, HND one row per (head, token). */
static void test_spans(void)
{
	void *bases[2] = { &rng, &rng };
	struct kvt_kv_layout l = { KVT_KV_FLASH_ATTN_HND, 2, 2, 10, 16, 8, 128, bases };
	struct kvt_kv_span s;
	T_OK(kvt_kv_layout_span(&l, 1, 3, 1, 2, 7, 16, 40, &s));
	T_EQ_U64(s.len, 256);
	T_EQ_INT(s.n_inner, 5);
	T_EQ_INT(s.n_outer, 8);
	T_EQ_U64(s.src_off, ((1 * 10 + 3) * 8 * 16 + 2) * 256);
	T_EQ_U64(s.src_inner, 256);
	T_EQ_U64(s.src_outer, 16 * 256);
	T_EQ_U64(s.dst_off, ((1 * 2 + 1) * 40 + 18) * 8 * 256);
	T_EQ_U64(s.dst_inner, 8 * 256);
	T_EQ_U64(s.dst_outer, 256);
	l.kind = KVT_KV_FLASHINFER;
	T_OK(kvt_kv_layout_span(&l, 0, 9, 1, 0, 16, 0, 16, &s));
	T_EQ_INT(s.n_inner * s.n_outer, 1);
	T_EQ_U64(s.len, 16 * 8 * 256);
	T_EQ_U64(s.src_off, (9 * 2 + 1) * 16 * 8 * 256);
	/* out of range */
	T_RC(kvt_kv_layout_span(&l, 2, 0, 0, 0, 1, 0, 16, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 10, 0, 0, 1, 0, 16, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 0, 2, 0, 1, 0, 16, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 0, 0, 3, 3, 0, 16, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 0, 0, 0, 17, 0, 17, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 0, 0, 0, 16, 8, 16, &s), KVT_ERANGE);
	T_RC(kvt_kv_layout_span(&l, 0, 0, 0, 0, 1, 0, 16, NULL), KVT_ENULL);
}

/* Every span of every layout, for random sub-ranges of tokens, against
 * the reference's index of each row it covers. */
static void test_spans_reference(void)
{
	void *bases[3] = { &rng, &rng, &rng };
	for (int kind = KVT_KV_FLASH_ATTN; kind <= KVT_KV_CROSS_LAYER; kind++)
		for (int iter = 0; iter < 200; iter++) {
			uint32_t h = kind == KVT_KV_MLA ? 1 : 1 + (uint32_t)(rnd() % 4);
			struct kvt_kv_layout l = { kind, 1u << (rnd() % 4), 3, 1 + (uint32_t)(rnd() % 9),
						   1 + (uint32_t)(rnd() % 17), h,
						   1 + (uint32_t)(rnd() % 70), bases };
			uint32_t layer = (uint32_t)(rnd() % 3), page = (uint32_t)(rnd() % l.block_count);
			uint32_t kv = kind == KVT_KV_MLA ? 0 : (uint32_t)(rnd() % 2);
			uint32_t t0 = (uint32_t)(rnd() % l.block_tokens);
			uint32_t t1 = t0 + 1 + (uint32_t)(rnd() % (l.block_tokens - t0));
			uint32_t page_tok = (uint32_t)(rnd() % 40), tokens = page_tok + t1 + (uint32_t)(rnd() % 3);
			uint64_t E = l.dtype_len, row = (uint64_t)l.head_dim * E;
			struct kvt_kv_span s;
			T_OK(kvt_kv_layout_span(&l, layer, page, kv, t0, t1, page_tok, tokens, &s));
			/* walk the rows the span covers, in (token, head) order */
			for (uint32_t t = t0; t < t1; t++)
				for (uint32_t hh = 0; hh < h; hh++) {
					uint64_t want_src = kvref_index(&l, layer, kv, page, t, hh, 0) * E;
					uint64_t want_dst =
						kvref_packed(&l, tokens, layer, kv, page_tok + t, hh, 0) * E;
					uint64_t src, dst;
					if (s.n_inner * s.n_outer == 1) {
						uint64_t k = ((uint64_t)(t - t0) * h + hh) * row;
						T_ASSERT(k + row <= s.len);
						src = s.src_off + k;
						dst = s.dst_off + k;
					} else {
						T_EQ_U64(s.len, row);
						src = s.src_off + hh * s.src_outer + (t - t0) * s.src_inner;
						dst = s.dst_off + hh * s.dst_outer + (t - t0) * s.dst_inner;
					}
					T_EQ_U64(src, want_src);
					T_EQ_U64(dst, want_dst);
				}
			T_EQ_U64(s.len * s.n_inner * s.n_outer, (uint64_t)(t1 - t0) * h * row);
		}
}

static void test_checks(void)
{
	void *bases[3] = { &rng, &rng, NULL };
	struct kvt_kv_layout l = { KVT_KV_FLASH_ATTN, 2, 2, 10, 16, 8, 128, bases }, m;
	uint32_t pages[3] = { 1, 2, 10 };
	char buf[1];
	struct kvt_kv_block b = { pages, 2, 17, buf };

	T_OK(kvt_kv_layout_check(&l));
	T_RC(kvt_kv_layout_check(NULL), KVT_ENULL);
	m = l, m.kind = 0;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC);
	m = l, m.kind = 7;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC);
	m = l, m.dtype_len = 3;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC);
	m = l, m.head_dim = 0;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC);
	m = l, m.kind = KVT_KV_MLA;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC); /* MLA needs kv_heads 1 */
	m = l, m.layer_count = 3;
	T_RC(kvt_kv_layout_check(&m), KVT_ENULL); /* bases[2] NULL */
	m.kind = KVT_KV_CROSS_LAYER;
	T_OK(kvt_kv_layout_check(&m)); /* one base only */
	m = l, m.block_count = m.block_tokens = m.kv_heads = m.head_dim = UINT32_MAX;
	T_RC(kvt_kv_layout_check(&m), KVT_EDESC); /* overflow */
	m = l, m.layer_base = NULL;
	T_RC(kvt_kv_layout_check(&m), KVT_ENULL);

	T_EQ_U64((uint64_t)kvt_kv_block_len(&l, 17), 2 * 2 * 17 * 8 * 128 * 2);
	T_EQ_U64((uint64_t)kvt_kv_cache_len(&l), 2 * 10 * 16 * 8 * 128 * 2);
	T_RC(kvt_kv_block_len(&l, 0), KVT_EBADLEN);
	T_RC(kvt_kv_block_len(&l, 161), KVT_ERANGE);
	T_OK(kvt_kv_block_check(&l, &b));
	b.tokens = 16; /* the second page would be empty */
	T_RC(kvt_kv_block_check(&l, &b), KVT_EBADLEN);
	b.tokens = 33;
	T_RC(kvt_kv_block_check(&l, &b), KVT_EBADLEN);
	b.tokens = 40, b.page_count = 3; /* page 10 of 10 */
	T_RC(kvt_kv_block_check(&l, &b), KVT_ERANGE);
	/* a bad block anywhere in a batch: nothing moves */
	{
		struct kvt_kv_block two[2] = { { pages, 1, 16, buf }, { pages, 3, 40, buf } };
		T_RC(kvt_kv_gather_host(&l, two, 2), KVT_ERANGE);
	}
	b.buf = NULL, b.page_count = 1, b.tokens = 1;
	T_RC(kvt_kv_block_check(&l, &b), KVT_ENULL);
}

int main(void)
{
	test_checks();
	test_spans();
	test_spans_reference();
	test_layouts();
	test_cross_layout();
	return 0;
}

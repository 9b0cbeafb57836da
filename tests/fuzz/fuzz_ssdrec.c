/*
 * fuzz_ssdrec.c - libFuzzer target for the decoders of what recovery reads
 * from a segment (lib/ssdfmt.c, doc/ssd-format.md): record headers,
 * segment summaries and segment headers.
 *
 * The input is an untrusted piece of a segment.  Each decoder runs on it
 * as it is, and once more on a copy whose CRC fields were recomputed the
 * way the format defines them, so that mutations reach the field checks
 * behind the CRC.  Every copy is exactly as long as the input (ASan sees a
 * read one byte too far).  Record headers are decoded as a 512-aligned
 * segment's and as a 4096-aligned one's (ssd.dio_align).  Properties, each
 * a trap when broken:
 *   - results are only the documented codes;
 *   - KVT_EBUFSMALL asks for a bounded, aligned length beyond the input;
 *   - what a decoder accepts is in range (counts, lengths, keys), and its
 *     encoder reproduces it byte for byte: one encoding per value;
 *   - a summary's callbacks see exactly the count it returns;
 *   - a part read's decode (ssd_rec_hdr_decode_part) takes what the whole
 *     decode takes, and finds the part where the whole table puts it.
 * Seed corpus: tests/fuzz/corpus/ssdrec/ (tests/fuzz/gen_ssd_seeds.c).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "le.h"
#include "fuzz.h"

#define REC_HDR_MAX (5 * SSD_REC_ALIGN_4K) /* ssd_rec_hdr_len(KVT_PARTS_MAX, 4096) */
#define SUM_KEEP 8192               /* summaries with more entries skip the re-encode */

static struct ssd_part g_parts[KVT_PARTS_MAX];
static uint8_t g_enc[1 << 20];
static struct ssd_sum_entry g_ents[SUM_KEEP];

/* The CRC32C of p[0, len) with the 4 bytes at 12 as zero, stored there. */
static void fix_crc12(uint8_t *p, size_t len)
{
	le_put32(p + 12, 0);
	le_put32(p + 12, kvt_crc32c(0, p, len));
}

static void check_key(const struct kvt_key *k)
{
	FUZZ_CHECK(k->len <= KVT_KEY_MAX);
	for (uint32_t i = k->len; i < KVT_KEY_MAX; i++)
		FUZZ_CHECK(k->bytes[i] == 0);
}

static bool same_hdr(const struct ssd_rec_hdr *a, const struct ssd_rec_hdr *b)
{
	return a->type == b->type && a->hdr_len == b->hdr_len && a->part_count == b->part_count &&
	       a->ns_id == b->ns_id && a->value_len == b->value_len && a->seq == b->seq &&
	       a->generation == b->generation && a->flags == b->flags &&
	       memcmp(a->ns_digest, b->ns_digest, 32) == 0 && a->key.len == b->key.len &&
	       memcmp(a->key.bytes, b->key.bytes, KVT_KEY_MAX) == 0;
}

/* ssd_rec_hdr_decode_part (a part read's decode) agrees with the whole
 * table's decode, whose result rc and header *h were: the same result
 * and header, and part i's length, CRC and offset (the lengths before it
 * summed) those of g_parts[i]; KVT_ERANGE past the table.  Parts 0, the
 * last and one the input picks (each decode is the whole header's CRC). */
static void fuzz_rec_part(const uint8_t *buf, size_t len, uint32_t align, int rc,
			  const struct ssd_rec_hdr *h)
{
	uint32_t n = rc == 0 ? h->part_count : 0;
	uint32_t pick = len >= 2 ? buf[len - 1] | (uint32_t)buf[len - 2] << 8 : 0;
	uint32_t which[4] = { 0, n ? n - 1 : 0, n ? pick % n : 0, n };

	for (unsigned w = 0; w < 4; w++) {
		struct ssd_rec_hdr ph;
		struct ssd_part pt = { 7, 7 };
		uint64_t off = 7, sum = 0;
		int prc = ssd_rec_hdr_decode_part(buf, len, align, &ph, which[w], &pt, &off);

		if (rc != 0) {
			FUZZ_CHECK(prc == rc && pt.len == 0 && pt.crc == 0 && off == 0);
			FUZZ_CHECK(same_hdr(&ph, h));
			continue;
		}
		FUZZ_CHECK(same_hdr(&ph, h));
		if (which[w] >= n) {
			FUZZ_CHECK(prc == KVT_ERANGE && pt.len == 0 && off == 0);
			continue;
		}
		for (uint32_t i = 0; i < which[w]; i++)
			sum += g_parts[i].len;
		FUZZ_CHECK(prc == 0 && pt.len == g_parts[which[w]].len &&
			   pt.crc == g_parts[which[w]].crc && off == sum);
		FUZZ_CHECK(off + pt.len <= h->value_len);
	}
}

static void fuzz_rec_at(const uint8_t *buf, size_t len, uint32_t align)
{
	struct ssd_rec_hdr h;
	uint64_t sum = 0;
	int rc, enc;

	rc = ssd_rec_hdr_decode(buf, len, align, &h, g_parts, KVT_PARTS_MAX);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION || rc == KVT_EBUFSMALL);
	fuzz_rec_part(buf, len, align, rc, &h);
	if (rc == KVT_EBUFSMALL) {
		FUZZ_CHECK(h.hdr_len > len && h.hdr_len % SSD_REC_ALIGN == 0 && h.hdr_len <= REC_HDR_MAX);
		return;
	}
	if (rc != 0)
		return;
	FUZZ_CHECK(h.hdr_len <= len && h.hdr_len == ssd_rec_hdr_len(h.part_count, align));
	FUZZ_CHECK(h.part_count <= KVT_PARTS_MAX && h.value_len <= KVT_VALUE_MAX);
	FUZZ_CHECK(h.seq != 0 && h.generation != 0 && (h.flags & ~SSD_REC_F_SEALED) == 0);
	check_key(&h.key);
	for (uint32_t i = 0; i < h.part_count; i++) {
		FUZZ_CHECK(g_parts[i].len >= 1);
		sum += g_parts[i].len;
	}
	FUZZ_CHECK(sum == h.value_len);

	/* One encoding per value. */
	enc = ssd_rec_hdr_encode(&h, g_parts, align, g_enc, sizeof(g_enc));
	FUZZ_CHECK(enc == (int)h.hdr_len);
	FUZZ_CHECK(memcmp(g_enc, buf, h.hdr_len) == 0);

	/* The other ways to call it agree. */
	FUZZ_CHECK(ssd_rec_hdr_decode(buf, len, align, &h, NULL, 0) == 0);
	if (h.part_count > 0)
		FUZZ_CHECK(ssd_rec_hdr_decode(buf, len, align, &h, g_parts, h.part_count - 1) ==
			   KVT_ERANGE);
	/* Never both layouts: a header differs between them unless they are
	 * the same bytes. */
	if (ssd_rec_hdr_len(h.part_count, SSD_REC_ALIGN) !=
	    ssd_rec_hdr_len(h.part_count, SSD_REC_ALIGN_4K))
		FUZZ_CHECK(ssd_rec_hdr_decode(buf, len,
					      align == SSD_REC_ALIGN ? SSD_REC_ALIGN_4K : SSD_REC_ALIGN,
					      &h, NULL, 0) == KVT_ECORRUPT);
}

static void fuzz_rec(const uint8_t *buf, size_t len)
{
	fuzz_rec_at(buf, len, SSD_REC_ALIGN);
	fuzz_rec_at(buf, len, SSD_REC_ALIGN_4K);
}

struct sum_ctx {
	size_t n;
	uint32_t prev_end;
	uint32_t version;     /* the summary's, as its header says */
};

static int sum_fn(void *p, const struct ssd_sum_entry *e)
{
	struct sum_ctx *c = p;

	FUZZ_CHECK(e->type >= SSD_REC_PUT && e->type <= SSD_REC_CLEAR_ALL);
	FUZZ_CHECK(e->part_count <= KVT_PARTS_MAX && e->value_len <= KVT_VALUE_MAX);
	FUZZ_CHECK(e->seq != 0 && e->off_512 >= c->prev_end && e->len_512 >= 1);
	if (e->flags & SSD_ENT_F_BATCHED) /* format 3: the value alone */
		FUZZ_CHECK(c->version == SSD_SUM_VERSION_BATCH && e->part_count == 1 &&
			   e->value_len <= SSD_BATCH_VALUE_MAX &&
			   ((uint64_t)e->len_512 * SSD_REC_ALIGN ==
				    KVT_ALIGN_UP(e->value_len, SSD_REC_ALIGN) ||
			    (uint64_t)e->len_512 * SSD_REC_ALIGN ==
				    KVT_ALIGN_UP(e->value_len, SSD_REC_ALIGN_4K)));
	else
		FUZZ_CHECK(e->flags == 0 && e->value_crc == 0 &&
			   ssd_rec_align_of(e->part_count, e->value_len,
					    (uint64_t)e->len_512 * SSD_REC_ALIGN) != 0);
	check_key(&e->key);
	c->prev_end = e->off_512 + e->len_512;
	if (c->n < SUM_KEEP)
		g_ents[c->n] = *e;
	c->n++;
	return 0;
}

static void fuzz_sum(const uint8_t *buf, size_t len)
{
	struct sum_ctx c = { 0, 1, len >= 12 ? le_get32(buf + 8) : 0 };
	uint64_t generation = len >= 24 ? le_get64(buf + 16) : 0;
	int64_t rc, enc;

	rc = ssd_sum_decode(buf, len, generation, sum_fn, &c);
	FUZZ_CHECK(rc >= 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION);
	if (rc < 0) {
		FUZZ_CHECK(c.n == 0); /* no callback for a summary that fails */
		return;
	}
	FUZZ_CHECK((size_t)rc == c.n && len % SSD_ALIGN == 0);
	FUZZ_CHECK(ssd_sum_decode(buf, len, generation + 1, NULL, NULL) == KVT_ECORRUPT);
	if (c.n > SUM_KEEP || len > sizeof(g_enc))
		return;
	enc = ssd_sum_encode(c.version, generation, g_ents, c.n, g_enc, sizeof(g_enc));
	FUZZ_CHECK(enc == (int64_t)len);
	FUZZ_CHECK(memcmp(g_enc, buf, len) == 0);
}

static void fuzz_seg(const uint8_t *buf)
{
	struct ssd_seg_hdr h;
	int rc = ssd_seg_hdr_decode(buf, &h);

	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION);
	if (rc != 0)
		return;
	FUZZ_CHECK(h.rec_align == SSD_REC_ALIGN || h.rec_align == SSD_REC_ALIGN_4K);
	FUZZ_CHECK(h.seg_size % SSD_ALIGN == 0 && h.summary_off % h.rec_align == 0 &&
		   h.summary_off + h.summary_len <= h.seg_size);
	ssd_seg_hdr_encode(&h, g_enc);
	FUZZ_CHECK(memcmp(g_enc, buf, SSD_ALIGN) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	fuzz_rec(data, size);
	fuzz_sum(data, size);
	if (size >= SSD_ALIGN)
		fuzz_seg(data);

	copy = malloc(size ? size : 1);
	FUZZ_CHECK(copy != NULL);

	/* Record header: CRC over [0, hdr_len) when hdr_len is plausible. */
	memcpy(copy, data, size);
	if (size >= 16) {
		uint32_t hdr_len = le_get32(copy + 8);
		if (hdr_len >= 16 && hdr_len <= size)
			fix_crc12(copy, hdr_len);
	}
	fuzz_rec(copy, size);

	/* Summary: the entries' CRC, then the header's. */
	memcpy(copy, data, size);
	if (size >= 64) {
		uint64_t ent_len = le_get64(copy + 32);
		if (ent_len <= size - 64)
			le_put32(copy + 28, kvt_crc32c(0, copy + 64, ent_len));
		fix_crc12(copy, 64);
	}
	fuzz_sum(copy, size);

	/* Segment header: CRC over its 4096 bytes. */
	if (size >= SSD_ALIGN) {
		memcpy(copy, data, size);
		fix_crc12(copy, SSD_ALIGN);
		fuzz_seg(copy);
	}
	free(copy);
	return 0;
}

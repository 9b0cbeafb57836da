/*
 * fuzz_ssdbatch.c - libFuzzer target for the batch header decoder of
 * format 3 (lib/fmt/ssdfmt.c ssd_batch_decode, doc/ssd-format.md
 * "Format 3: batch headers").
 *
 * Input: 8 bytes, the batch's offset in its segment (little-endian; the
 * low bits are cleared to 512 and bounded to 2^41, a segment's reach),
 * then the bytes at that offset: an untrusted piece of a segment.  The
 * decoder runs on them as they are, and once more on a copy whose CRC
 * was recomputed over [0, hdr_len) as the format defines it, so that
 * mutations reach the field checks behind the CRC; each at both record
 * alignments.  Every copy is exactly as long as the input (ASan sees a
 * read one byte too far).  Properties, each a trap when broken:
 *   - results are only the documented codes; a refusal leaves no entry;
 *   - KVT_EBUFSMALL asks for a bounded (<= 4096), 512-aligned length
 *     beyond the input, and only when fewer bytes than it were given;
 *   - what the decoder accepts is in range (counts, lengths, keys, flags,
 *     the ns table canonical), its values follow its header in entry
 *     order without overlap, and its encoder reproduces it byte for byte
 *     at the same offset: one encoding per value;
 *   - the recovery walk's step (ssd_walk_batch) never takes a batch that
 *     runs past its segment, and steps exactly past its values.
 * Seed corpus: tests/fuzz/corpus/ssdbatch/ (tests/fuzz/gen_ssd_seeds.c).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "le.h"
#include "fuzz.h"

static uint8_t g_enc[SSD_BATCH_HDR_MAX];

static void fuzz_batch_at(const uint8_t *buf, size_t len, uint64_t off, uint32_t align)
{
	struct ssd_batch b, again;
	uint64_t voff, walked, seg_size;
	uint32_t named = 0;
	int rc, enc;

	rc = ssd_batch_decode(buf, len, off, align, &b);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION || rc == KVT_EBUFSMALL);
	if (rc == KVT_EBUFSMALL) {
		FUZZ_CHECK(b.hdr_len > len && b.hdr_len % SSD_REC_ALIGN == 0 &&
			   b.hdr_len <= SSD_BATCH_HDR_MAX && b.count == 0);
		return;
	}
	if (rc != 0) {
		FUZZ_CHECK(b.count == 0 && b.hdr_len == 0);
		return;
	}
	FUZZ_CHECK(b.hdr_len <= len && b.hdr_len <= SSD_BATCH_HDR_MAX && b.hdr_len % align == 0);
	FUZZ_CHECK(b.count >= 1 && b.count <= SSD_BATCH_MAX && b.ns_count >= 1 &&
		   b.ns_count <= b.count);
	FUZZ_CHECK(b.generation >= 1 && b.generation <= SSD_GEN_MAX);
	for (uint32_t i = 0; i < b.ns_count; i++) {
		FUZZ_CHECK(b.ns[i].ns_id != 0);
		for (uint32_t j = 0; j < i; j++)
			FUZZ_CHECK(b.ns[j].ns_id != b.ns[i].ns_id);
	}
	voff = off + b.hdr_len;
	for (uint32_t i = 0; i < b.count; i++) {
		const struct ssd_batch_ent *e = &b.ent[i];

		FUZZ_CHECK(e->ns_index <= named && e->ns_index < b.ns_count);
		if (e->ns_index == named)
			named++;
		FUZZ_CHECK(e->key.len >= 1 && e->key.len <= KVT_KEY_MAX);
		for (uint32_t k = e->key.len; k < KVT_KEY_MAX; k++)
			FUZZ_CHECK(e->key.bytes[k] == 0);
		FUZZ_CHECK((e->flags & ~SSD_REC_F_SEALED) == 0 && e->seq >= 1);
		FUZZ_CHECK(e->value_len >= 1 && e->value_len <= SSD_BATCH_VALUE_MAX);
		FUZZ_CHECK((uint64_t)e->value_off_512 * SSD_REC_ALIGN == voff && voff % align == 0);
		voff += KVT_ALIGN_UP(e->value_len, align);
	}
	FUZZ_CHECK(named == b.ns_count && voff - off - b.hdr_len == b.values_len);

	/* One encoding per value, at the same offset. */
	again = b;
	enc = ssd_batch_encode(&again, off, align, g_enc, sizeof(g_enc));
	FUZZ_CHECK(enc == (int)b.hdr_len && memcmp(g_enc, buf, b.hdr_len) == 0);
	FUZZ_CHECK(again.values_len == b.values_len);

	/* The walk: exactly past the values, never past the segment. */
	seg_size = voff;
	FUZZ_CHECK(ssd_walk_batch(0, &b, b.generation, off, seg_size, &walked) == NULL &&
		   off + walked == voff);
	FUZZ_CHECK(ssd_walk_batch(0, &b, b.generation, off, seg_size - 1, &walked) != NULL);
	FUZZ_CHECK(ssd_walk_batch(0, &b, b.generation + 1, off, seg_size, &walked) != NULL);
	/* Elsewhere in the segment the same bytes are not a batch. */
	FUZZ_CHECK(ssd_batch_decode(buf, len, off + SSD_REC_ALIGN_4K, align, &again) ==
		   KVT_ECORRUPT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t off;
	uint8_t *copy;

	if (size < 8)
		return 0;
	/* At or past the segment header, a multiple of 512, within 2^41. */
	off = le_get64(data) & ((UINT64_C(1) << 41) - 1) & ~(uint64_t)(SSD_REC_ALIGN - 1);
	if (off < SSD_ALIGN)
		off = SSD_ALIGN;
	data += 8;
	size -= 8;
	copy = malloc(size ? size : 1);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	for (int pass = 0; pass < 2; pass++) {
		fuzz_batch_at(copy, size, off, SSD_REC_ALIGN);
		fuzz_batch_at(copy, size, off & ~(uint64_t)(SSD_REC_ALIGN_4K - 1), SSD_REC_ALIGN_4K);
		if (size < 16)
			break;
		uint32_t hdr_len = le_get32(copy + 8);
		if (hdr_len < 16 || hdr_len > size)
			break;
		le_put32(copy + 12, 0);
		le_put32(copy + 12, kvt_crc32c(0, copy, hdr_len));
	}
	free(copy);
	return 0;
}

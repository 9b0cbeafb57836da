/*
 * fuzz_ckpthdr.c - libFuzzer target for ssd_ckpt_hdr_decode (lib/fmt/ssdfmt.c),
 * the decoder of an SSD checkpoint's fixed header alone, which kvtier --dir
 * reads for a store's slot count (cli/admin.c; doc/ssd-format.md
 * "Checkpoint").
 *
 * The input is an 8-byte little-endian file length (the size a stat
 * would give), then the bytes of the file's start as read: any number,
 * fewer than a header too.  It is decoded as it is and once more with
 * its header CRC recomputed (and the length made the one body_len asks
 * for), so that mutations reach the checks behind the CRC.  The bytes are
 * copied to a heap block of exactly their length, so ASan traps a read
 * past them.  Properties, each a trap when broken:
 *   - results are only 0, KVT_ECORRUPT, KVT_EVERSION and KVT_EBUFSMALL,
 *     the last only for fewer than 128 bytes of a file of at least 128;
 *     and *h is all zero unless 0;
 *   - the result depends on the first 128 bytes only (the same from
 *     exactly 128 as from more);
 *   - on 0: the file length is roundup(128 + body_len, 4096) and the
 *     counts fit the body, as the fields read back say;
 *   - where the bytes are the whole file, it agrees with the whole-image
 *     decoder: that one succeeds only where the header decoder does, with
 *     the same header, and a header refused is refused by it with the
 *     same code.
 * Seed corpus: tests/fuzz/corpus/ckpthdr/ (tests/fuzz/gen_ssd_seeds.c).
 */
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "le.h"
#include "ssdfmt.h"
#include "fuzz.h"

static bool hdr_zero(const struct ssd_ckpt_hdr *h)
{
	static const uint8_t zero[16];
	return memcmp(h->store_id, zero, 16) == 0 && h->seq == 0 && h->slot_count == 0 &&
	       h->clear_count == 0 && h->entry_count == 0 && h->version == 0;
}

static bool hdr_same(const struct ssd_ckpt_hdr *a, const struct ssd_ckpt_hdr *b)
{
	return memcmp(a->store_id, b->store_id, 16) == 0 && a->seq == b->seq &&
	       a->version == b->version &&
	       a->slot_count == b->slot_count && a->clear_count == b->clear_count &&
	       a->entry_count == b->entry_count;
}

static void fuzz_one(const uint8_t *data, size_t n, uint64_t file_len)
{
	struct ssd_ckpt_hdr h, h2;
	uint8_t *buf = malloc(n ? n : 1);
	int rc;

	FUZZ_CHECK(buf != NULL);
	memcpy(buf, data, n);
	rc = ssd_ckpt_hdr_decode(buf, n, file_len, &h);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION || rc == KVT_EBUFSMALL);
	FUZZ_CHECK(rc == 0 || hdr_zero(&h));
	if (n < SSD_CKPT_HDR) {
		FUZZ_CHECK(rc == (file_len < SSD_CKPT_HDR ? KVT_ECORRUPT : KVT_EBUFSMALL));
		free(buf);
		return;
	}
	FUZZ_CHECK(rc != KVT_EBUFSMALL);
	/* The first 128 bytes decide. */
	FUZZ_CHECK(ssd_ckpt_hdr_decode(buf, SSD_CKPT_HDR, file_len, &h2) == rc);
	FUZZ_CHECK(hdr_same(&h, &h2));
	if (rc == 0) {
		uint64_t body_len = le_get64(buf + 56);
		uint64_t tables = (uint64_t)h.slot_count * 16 + (uint64_t)h.clear_count * 16;
		FUZZ_CHECK(file_len % SSD_ALIGN == 0 && file_len >= SSD_ALIGN);
		FUZZ_CHECK(body_len <= file_len - SSD_CKPT_HDR &&
			   file_len - SSD_CKPT_HDR - body_len < SSD_ALIGN);
		FUZZ_CHECK(tables <= body_len && h.entry_count * 48 <= body_len - tables);
		/* Version 2, or 3 (format 3's entries), as the header says. */
		FUZZ_CHECK(memcmp(buf, "KVTCKPT1", 8) == 0 && le_get32(buf + 8) == h.version &&
			   (h.version == SSD_FMT_VERSION || h.version == SSD_CKPT_VERSION_BATCH));
	}
	if (file_len == n) {
		int full = ssd_ckpt_decode(buf, n, &h2, NULL, NULL);
		if (full == 0)
			FUZZ_CHECK(rc == 0 && hdr_same(&h, &h2));
		if (rc != 0)
			FUZZ_CHECK(full == rc);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t file_len;
	uint8_t *copy;

	if (size < 8)
		return 0;
	file_len = le_get64(data);
	data += 8;
	size -= 8;
	/* A small length field means "the bytes given are the file". */
	if (file_len < 16)
		file_len = size;
	fuzz_one(data, size, file_len);
	if (size < SSD_CKPT_HDR)
		return 0;

	copy = malloc(size);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	le_put32(copy + 12, 0);
	le_put32(copy + 12, kvt_crc32c(0, copy, SSD_CKPT_HDR));
	fuzz_one(copy, size, file_len);
	{
		/* The length its body_len asks for (never 0: at least 4096). */
		uint64_t body_len = le_get64(copy + 56);
		if (body_len <= UINT64_MAX - SSD_CKPT_HDR - SSD_ALIGN)
			fuzz_one(copy, size,
				 (SSD_CKPT_HDR + body_len + SSD_ALIGN - 1) & ~(uint64_t)(SSD_ALIGN - 1));
	}
	free(copy);
	return 0;
}

/*
 * fuzz_shdir.c - libFuzzer target for shdir_hdr_parse (lib/shdir.c), the
 * parser of a shared-tier block file's header (doc/shared.md).
 *
 * The input is an untrusted file's first bytes: another node, a torn
 * write or a person may have put anything there.  The parser must never
 * read outside the input, never crash, and accept only headers whose
 * lengths agree; what it accepts must re-encode to the same bytes (so
 * no field is ignored).  A short input must ask for more bytes than it
 * had.  Returns 0 always; a broken property traps.
 * Seed corpus: tests/fuzz/corpus/shdir/ (valid headers).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shdir.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t lens[KVT_PARTS_MAX];
static uint32_t crcs[KVT_PARTS_MAX];
static uint8_t again[SHDIR_HDR_MAX + SHDIR_ALIGN];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shdir_hdr h = { .part_lens = lens, .crcs = crcs };
	int r = shdir_hdr_parse(data, size, &h);
	if (r > 0) {
		FUZZ_CHECK((size_t)r > size);
		return 0;
	}
	if (r < 0) {
		FUZZ_CHECK(r == KVT_ECORRUPT || r == KVT_EVERSION);
		return 0;
	}
	FUZZ_CHECK(h.hdr_len <= size && h.part_count >= 1 && h.part_count <= KVT_PARTS_MAX);
	FUZZ_CHECK(h.key.len >= 1 && h.key.len <= KVT_KEY_MAX);
	{
		uint64_t sum = 0;
		for (uint32_t p = 0; p < h.part_count; p++)
			sum += lens[p];
		FUZZ_CHECK(sum == h.value_len && sum <= KVT_VALUE_MAX);
	}
	int64_t off = shdir_hdr_encode(again, sizeof(again), h.ns_digest, &h.key, h.part_count, lens,
				       crcs, h.flags);
	FUZZ_CHECK(off == (int64_t)h.data_off);
	FUZZ_CHECK(memcmp(again, data, h.hdr_len) == 0);
	return 0;
}

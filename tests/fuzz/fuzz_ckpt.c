/*
 * fuzz_ckpt.c - libFuzzer target for ssd_ckpt_decode (lib/ssdfmt.c), the
 * decoder of the SSD tier's checkpoint file (doc/ssd-format.md).
 *
 * The input is an untrusted checkpoint image.  It is decoded as it is and
 * once more from a copy (exactly as long) whose body and header CRCs were
 * recomputed, so that mutations reach the checks behind them.
 * Properties, each a trap when broken:
 *   - results are only the documented codes, and no callback runs for an
 *     image that is refused;
 *   - the callbacks see exactly the counts the header gives, in file order
 *     (slots, clears, entries), with every entry naming an existing slot;
 *   - re-encoding what was decoded with the streaming writer reproduces the
 *     image byte for byte: one encoding per value.
 * Seed corpus: tests/fuzz/corpus/ckpt/ (tests/fuzz/gen_ssd_seeds.c).
 */
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "le.h"
#include "fuzz.h"

#define KEEP 4096 /* of each kind; bigger images skip the re-encode */

struct ck_ctx {
	uint32_t slots, clears;
	uint64_t entries;
	uint64_t key_bytes;
	uint32_t slot_count; /* from the header, to check entries against */
	struct ssd_ckpt_slot s[KEEP];
	struct ssd_ckpt_clear c[KEEP];
	struct ssd_ckpt_entry e[KEEP];
};

static struct ck_ctx g_ctx;
static uint8_t g_enc[4 << 20];

static int slot_fn(void *p, uint32_t idx, const struct ssd_ckpt_slot *s)
{
	struct ck_ctx *c = p;

	FUZZ_CHECK(idx == c->slots && c->clears == 0 && c->entries == 0);
	FUZZ_CHECK(s->write_off % SSD_REC_ALIGN == 0);
	if (c->slots < KEEP)
		c->s[c->slots] = *s;
	c->slots++;
	return 0;
}

static int clear_fn(void *p, const struct ssd_ckpt_clear *cl)
{
	struct ck_ctx *c = p;

	FUZZ_CHECK(c->entries == 0 && cl->seq != 0);
	if (c->clears < KEEP)
		c->c[c->clears] = *cl;
	c->clears++;
	return 0;
}

static int entry_fn(void *p, const struct ssd_ckpt_entry *e)
{
	struct ck_ctx *c = p;

	FUZZ_CHECK(e->slot < c->slot_count && e->generation != 0);
	FUZZ_CHECK(e->e.key.len <= KVT_KEY_MAX && e->e.seq != 0);
	FUZZ_CHECK(e->e.part_count <= KVT_PARTS_MAX && e->e.value_len <= KVT_VALUE_MAX);
	for (uint32_t i = e->e.key.len; i < KVT_KEY_MAX; i++)
		FUZZ_CHECK(e->e.key.bytes[i] == 0);
	/* A batched value (format 3): one part, under 256 KiB. */
	FUZZ_CHECK(!(e->e.flags & SSD_ENT_F_BATCHED) ||
		   (e->e.part_count == 1 && e->e.value_len <= SSD_BATCH_VALUE_MAX));
	FUZZ_CHECK((e->e.flags & SSD_ENT_F_BATCHED) || (e->e.flags == 0 && e->e.value_crc == 0));
	if (c->entries < KEEP)
		c->e[c->entries] = *e;
	c->entries++;
	c->key_bytes += e->e.key.len;
	return 0;
}

static const struct ssd_ckpt_cbs CBS = { slot_fn, clear_fn, entry_fn };

static void fuzz_one(const uint8_t *buf, size_t len)
{
	struct ck_ctx *c = &g_ctx;
	struct ssd_ckpt_writer w;
	struct ssd_ckpt_hdr h, h2;
	size_t cap;
	int64_t enc;
	int rc;

	c->slots = c->clears = 0;
	c->entries = c->key_bytes = 0;
	c->slot_count = len >= 44 ? le_get32(buf + 40) : 0;
	rc = ssd_ckpt_decode(buf, len, &h, &CBS, c);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION);
	if (rc != 0) {
		FUZZ_CHECK(c->slots == 0 && c->clears == 0 && c->entries == 0);
		return;
	}
	FUZZ_CHECK(c->slots == h.slot_count && c->clears == h.clear_count &&
		   c->entries == h.entry_count);
	FUZZ_CHECK(len % SSD_ALIGN == 0);
	FUZZ_CHECK(ssd_ckpt_decode(buf, len, &h2, NULL, NULL) == 0);
	FUZZ_CHECK(memcmp(&h2.store_id, &h.store_id, 16) == 0 && h2.seq == h.seq);

	if (c->slots > KEEP || c->clears > KEEP || c->entries > KEEP)
		return;
	cap = ssd_ckpt_size(h.slot_count, h.clear_count, h.entry_count, c->key_bytes);
	FUZZ_CHECK(cap >= len);
	if (cap > sizeof(g_enc))
		return;
	FUZZ_CHECK(h.version == SSD_FMT_VERSION || h.version == SSD_CKPT_VERSION_BATCH);
	ssd_ckpt_begin_version(&w, g_enc, cap, h.version);
	for (uint32_t i = 0; i < c->slots; i++)
		FUZZ_CHECK(ssd_ckpt_put_slot(&w, &c->s[i]) == 0);
	for (uint32_t i = 0; i < c->clears; i++)
		FUZZ_CHECK(ssd_ckpt_put_clear(&w, &c->c[i]) == 0);
	for (uint64_t i = 0; i < c->entries; i++)
		FUZZ_CHECK(ssd_ckpt_put_entry(&w, &c->e[i]) == 0);
	enc = ssd_ckpt_finish(&w, &h);
	FUZZ_CHECK(enc == (int64_t)len);
	FUZZ_CHECK(memcmp(g_enc, buf, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	fuzz_one(data, size);

	if (size < 128)
		return 0;
	copy = malloc(size);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	{
		uint64_t body_len = le_get64(copy + 56);
		if (body_len <= size - 128)
			le_put32(copy + 64, kvt_crc32c(0, copy + 128, body_len));
		le_put32(copy + 12, 0);
		le_put32(copy + 12, kvt_crc32c(0, copy, 128));
	}
	fuzz_one(copy, size);
	free(copy);
	return 0;
}

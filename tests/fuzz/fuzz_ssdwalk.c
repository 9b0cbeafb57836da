/*
 * fuzz_ssdwalk.c - libFuzzer target for the walk of an open segment by
 * structure (lib/fmt/ssdfmt.c ssd_struct_decode, ssd_walk_struct;
 * doc/ssd-format.md "Recovery of an open segment"), as recovery and fsck
 * take it after a crash.
 *
 * Input: 1 byte (bit 0: the segment's records are 4096-aligned, else 512;
 * bit 1: the segment is of format 3, so batches are structures), 8 bytes
 * of generation (little-endian), then the segment's bytes from offset
 * 4096 (after its header) to its end; the segment is 4096 + that many
 * bytes, cut to its alignment.  The walk starts at 4096 and reads each
 * header as recovery does: 512 bytes first, then what KVT_EBUFSMALL asks
 * for, never past the segment.  When bit 2 of the first byte is set, the
 * walk first recomputes the CRC of each header it meets (over the
 * hdr_len the header names, within the segment), so that mutations reach
 * the field checks and the walk behind the CRC.  Properties, each a trap
 * when broken:
 *   - the walk ends (every step moves forward by a whole structure);
 *   - every structure it takes lies inside the segment, at the
 *     alignment, and the entries it yields (records, batched values)
 *     rise without overlap and pass ssd_sum_entry_bound -- recovery's
 *     check of a summary -- for a summary at the walk's end;
 *   - what the walk found, the seal can write: the entries encode as the
 *     segment's summary (version 3 with batches, else 2) and decode back
 *     to as many;
 *   - tombstones twice (ssd_walk_twin, ssd_rec_is_twin), as recovery
 *     walks: where a structure stops the walk, it goes on one alignment
 *     unit further only at a structure the walk takes whose seq is above
 *     every one taken, and a twin is taken as no entry;
 *   - the walk of a headerless slot (ssd_hl_walk, which recovery and
 *     fsck both call, over ssd_walk: recovery's walk of a segment too)
 *     under the same generation and alignment meets the same tombstones
 *     as this walk, and the probe (ssd_hl_probe) ends with 0 or 1.
 * Seed corpus: tests/fuzz/corpus/ssdwalk/ (tests/fuzz/gen_ssd_seeds.c).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "le.h"
#include "fuzz.h"

#define WALK_KEEP 4096 /* entries kept; the segment is at most 1 MiB */
#define SEG_MAX (1u << 20)

static struct ssd_sum_entry g_ents[WALK_KEEP];
static uint8_t g_sum[1 << 20];
static struct ssd_struct g_st;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The structure at off into g_st as recovery reads it (512 bytes, then
 * what KVT_EBUFSMALL asks for within the segment), its CRC recomputed
 * first if fix: ssd_struct_decode's result. */
static int walk_decode(uint8_t *seg, uint64_t seg_size, uint64_t off, uint32_t align,
		       bool batches, bool fix)
{
	int d;

	if (fix) {
		uint32_t hl = le_get32(seg + off + 8);

		if (hl >= 16 && hl <= seg_size - off) {
			le_put32(seg + off + 12, 0);
			le_put32(seg + off + 12, kvt_crc32c(0, seg + off, hl));
		}
	}
	d = ssd_struct_decode(seg + off, align, off, align, batches, &g_st);
	if (d == KVT_EBUFSMALL) {
		FUZZ_CHECK(g_st.hdr_len > align && g_st.hdr_len <= 5 * SSD_REC_ALIGN_4K);
		if (g_st.hdr_len > seg_size - off)
			return KVT_ECORRUPT;
		d = ssd_struct_decode(seg + off, g_st.hdr_len, off, align, batches, &g_st);
		FUZZ_CHECK(d != KVT_EBUFSMALL);
	}
	return d;
}

/* ssd_hl's read over the segment buffer, as walk_decode reads. */
struct hl_seg {
	uint8_t *seg;
	uint64_t seg_size;
	bool batches, fix;
	uint64_t tombs;
};

static int hl_read(void *ctx, uint64_t off, uint64_t limit, uint32_t align, struct ssd_struct *st)
{
	struct hl_seg *h = ctx;

	FUZZ_CHECK(st == &g_st && limit == h->seg_size && off % align == 0 &&
		   off + align <= limit);
	return walk_decode(h->seg, h->seg_size, off, align, h->batches, h->fix);
}

static int hl_tomb(void *ctx, const struct ssd_rec_hdr *h)
{
	FUZZ_CHECK(h->type != SSD_REC_PUT);
	((struct hl_seg *)ctx)->tombs++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t align;
	uint64_t gen, seg_size, off = SSD_ALIGN, prev_end = 1, last_seq = 0;
	struct ssd_rec_hdr tomb;
	bool batches, lone = false;
	uint8_t *seg;
	size_t n = 0, tombs = 0;
	int64_t len;

	if (size < 9 || size - 9 > SEG_MAX)
		return 0;
	align = data[0] & 1 ? SSD_REC_ALIGN_4K : SSD_REC_ALIGN;
	batches = data[0] & 2;
	gen = le_get64(data + 1);
	seg_size = (SSD_ALIGN + (uint64_t)(size - 9)) / align * align;
	/* The segment as one buffer: its header zero, the input after it. */
	seg = calloc(1, seg_size);
	FUZZ_CHECK(seg != NULL);
	memcpy(seg + SSD_ALIGN, data + 9, seg_size - SSD_ALIGN);

	while (off % align == 0 && off + align <= seg_size) {
		uint64_t step;
		int d = walk_decode(seg, seg_size, off, align, batches, data[0] & 4);

		if (ssd_walk_struct(d, &g_st, gen, off, seg_size, align, &step)) {
			/* A damaged copy of a tombstone: the walk goes on past it
			 * only at a structure it takes, newer than all it took. */
			if (off + 2 * (uint64_t)align > seg_size)
				break;
			d = walk_decode(seg, seg_size, off + align, align, batches, data[0] & 4);
			if (!ssd_walk_twin(lone, last_seq, d, &g_st, gen, off + align, seg_size,
					   align))
				break;
			off += align;
			FUZZ_CHECK(!ssd_walk_struct(d, &g_st, gen, off, seg_size, align, &step));
			FUZZ_CHECK((g_st.kind == SSD_STRUCT_BATCH ? g_st.batch.ent[0].seq
								  : g_st.rec.seq) > last_seq);
			lone = false;
		} else if (g_st.kind == SSD_STRUCT_REC && lone && ssd_rec_is_twin(&tomb, &g_st.rec)) {
			lone = false; /* a twin: no entry */
			off += step;
			continue;
		}
		lone = false;
		FUZZ_CHECK(step >= align && step % align == 0 && step <= seg_size - off);
		if (g_st.kind == SSD_STRUCT_BATCH) {
			FUZZ_CHECK(batches && g_st.batch.generation == gen);
			for (uint32_t i = 0; i < g_st.batch.count; i++) {
				if (g_st.batch.ent[i].seq > last_seq)
					last_seq = g_st.batch.ent[i].seq;
				if (n < WALK_KEEP)
					ssd_batch_sum_entry(&g_st.batch, i, align, &g_ents[n++]);
			}
		} else {
			if (g_st.rec.seq > last_seq)
				last_seq = g_st.rec.seq;
			if (g_st.rec.type != SSD_REC_PUT) {
				tomb = g_st.rec;
				lone = true;
				tombs++;
			}
		}
		if (g_st.kind == SSD_STRUCT_REC && n < WALK_KEEP) {
			struct ssd_sum_entry *e = &g_ents[n++];

			FUZZ_CHECK(g_st.kind == SSD_STRUCT_REC && g_st.rec.generation == gen);
			memset(e, 0, sizeof(*e));
			e->type = g_st.rec.type;
			e->ns_id = g_st.rec.ns_id;
			e->off_512 = (uint32_t)(off / SSD_REC_ALIGN);
			e->len_512 = (uint32_t)(step / SSD_REC_ALIGN);
			e->part_count = (uint16_t)g_st.rec.part_count;
			e->seq = g_st.rec.seq;
			e->value_len = g_st.rec.value_len;
			e->key = g_st.rec.key;
		}
		off += step;
	}
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(g_ents[i].off_512 >= prev_end);
		FUZZ_CHECK(ssd_sum_entry_bound(&g_ents[i], align, off, batches) == NULL);
		prev_end = (uint64_t)g_ents[i].off_512 + g_ents[i].len_512;
	}
	FUZZ_CHECK(prev_end * SSD_REC_ALIGN <= off || n == 0);
	if (n > 0 && n < WALK_KEEP) {
		uint32_t v = batches ? SSD_SUM_VERSION_BATCH : SSD_FMT_VERSION;

		len = ssd_sum_encode(v, gen, g_ents, n, g_sum, sizeof(g_sum));
		FUZZ_CHECK(len > 0);
		FUZZ_CHECK(ssd_sum_decode(g_sum, (size_t)len, gen, NULL, NULL) == (int64_t)n);
	}
	if (gen) {
		struct hl_seg hs = { seg, seg_size, batches, data[0] & 4, 0 };
		struct ssd_hl w = { .read = hl_read, .ctx = &hs, .limit = seg_size };
		int p = ssd_hl_probe(&w, &g_st);

		FUZZ_CHECK(p == 0 || p == 1);
		FUZZ_CHECK(p == 0 || w.align == SSD_REC_ALIGN || w.align == SSD_REC_ALIGN_4K);
		w.gen = gen;
		w.align = align;
		FUZZ_CHECK(ssd_hl_walk(&w, &g_st, hl_tomb, &hs) == 0);
		FUZZ_CHECK(hs.tombs == tombs);
	}
	free(seg);
	return 0;
}

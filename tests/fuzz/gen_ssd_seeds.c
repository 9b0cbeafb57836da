/*
 * gen_ssd_seeds.c - writes the seed corpora of fuzz_ssdrec, fuzz_ckpt,
 * fuzz_ckpthdr, fuzz_ssdbatch and fuzz_ssdwalk: a handful of small, valid encodings from
 * lib/fmt/ssdfmt.c.  Run once, by hand, when the format changes; the
 * output is checked in:
 *
 *   build-fuzz/tests/fuzz/gen_ssd_seeds tests/fuzz/corpus/ssdrec tests/fuzz/corpus/ckpt \
 *       tests/fuzz/corpus/ckpthdr tests/fuzz/corpus/ssdbatch tests/fuzz/corpus/ssdwalk
 *
 * Deterministic: the same build writes the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"

static uint8_t g_buf[64 << 10];
static struct ssd_part g_parts[KVT_PARTS_MAX];

static void die(const char *what)
{
	fprintf(stderr, "gen_ssd_seeds: %s\n", what);
	exit(1);
}

static void write_file(const char *dir, const char *name, const uint8_t *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0)
		die(path);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 29 + 7);
}

static void rec(const char *dir, const char *name, uint32_t type, uint32_t parts, uint32_t key_len,
		uint32_t align)
{
	struct ssd_rec_hdr h;
	int len;

	memset(&h, 0, sizeof(h));
	h.type = type;
	h.part_count = parts;
	h.ns_id = type == SSD_REC_CLEAR_ALL ? 0 : 3;
	h.seq = 41 + parts;
	h.generation = 2;
	if (type != SSD_REC_CLEAR_ALL)
		fill(h.ns_digest, 32, 1);
	h.key.len = key_len;
	fill(h.key.bytes, key_len, 2);
	for (uint32_t i = 0; i < parts; i++) {
		g_parts[i].len = 1000 + i;
		g_parts[i].crc = 0x12345678u + i;
		h.value_len += g_parts[i].len;
	}
	len = ssd_rec_hdr_encode(&h, g_parts, align, g_buf, sizeof(g_buf));
	if (len < 0)
		die(name);
	write_file(dir, name, g_buf, (size_t)len);
}

/* version SSD_SUM_VERSION_BATCH: every fourth entry a batched value. */
static void sum(const char *dir, const char *name, size_t n, uint32_t version)
{
	struct ssd_sum_entry e[64];
	uint32_t off = 1;
	int64_t len;

	for (size_t i = 0; i < n; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].seq = 100 + i;
		e[i].ns_id = 1 + (uint32_t)(i % 3);
		switch (i % 4) {
		case 0:
		case 1:
			e[i].type = SSD_REC_PUT;
			e[i].part_count = (uint16_t)(1 + i % 3);
			e[i].value_len = 5000 + i * 100;
			e[i].key.len = i % 2 ? 32 : 7;
			break;
		case 2:
			e[i].type = SSD_REC_DELETE;
			e[i].key.len = 32;
			break;
		default:
			e[i].type = i % 8 == 7 ? SSD_REC_CLEAR_ALL : SSD_REC_CLEAR_NS;
			if (e[i].type == SSD_REC_CLEAR_ALL)
				e[i].ns_id = 0;
			break;
		}
		fill(e[i].key.bytes, e[i].key.len, (uint32_t)i);
		e[i].off_512 = off;
		e[i].len_512 = (uint32_t)(ssd_rec_len(e[i].part_count, e[i].value_len, SSD_REC_ALIGN) / SSD_REC_ALIGN);
		if (version == SSD_SUM_VERSION_BATCH && i % 4 == 0) {
			e[i].part_count = 1;
			e[i].flags = SSD_ENT_F_BATCHED | (i % 8 == 4 ? SSD_ENT_F_SEALED : 0);
			e[i].value_crc = 0x5eed0000u + (uint32_t)i;
			e[i].len_512 = (uint32_t)((e[i].value_len + SSD_REC_ALIGN - 1) / SSD_REC_ALIGN);
		}
		off += e[i].len_512;
	}
	len = ssd_sum_encode(version, 9, e, n, g_buf, sizeof(g_buf));
	if (len < 0)
		die(name);
	write_file(dir, name, g_buf, (size_t)len);
}

static void seg(const char *dir, const char *name, int sealed, uint32_t align)
{
	struct ssd_seg_hdr h;

	memset(&h, 0, sizeof(h));
	h.rec_align = align;
	h.slot = 4;
	h.generation = 9;
	h.seg_size = 64u << 20;
	h.created_ns = 1700000000000000000ull;
	if (sealed) {
		h.summary_off = 1000 * SSD_ALIGN;
		h.summary_len = SSD_ALIGN;
	}
	fill(h.store_id, 16, 5);
	ssd_seg_hdr_encode(&h, g_buf);
	write_file(dir, name, g_buf, SSD_ALIGN);
}

/* fuzz_ckpthdr's input: an 8-byte file length, then the file's first
 * bytes (the whole image, its length field 0: "the bytes are the file";
 * or its 128-byte header alone, with the image's length). */
static void ckpthdr(const char *dir, const char *name, const uint8_t *img, size_t len)
{
	static uint8_t in[8 + sizeof(g_buf)];
	char n2[128];

	memset(in, 0, 8);
	memcpy(in + 8, img, len);
	snprintf(n2, sizeof(n2), "%s-whole", name);
	write_file(dir, n2, in, 8 + len);
	for (int i = 0; i < 8; i++)
		in[i] = (uint8_t)((uint64_t)len >> (8 * i));
	snprintf(n2, sizeof(n2), "%s-head", name);
	write_file(dir, n2, in, 8 + SSD_CKPT_HDR);
}

/* version SSD_CKPT_VERSION_BATCH: every fifth entry a batched value. */
static void ckpt(const char *dir, const char *hdir, const char *name, uint32_t slots,
		 uint32_t clears, uint32_t entries, uint32_t version)
{
	struct ssd_ckpt_writer w;
	struct ssd_ckpt_hdr h;
	int64_t len;

	ssd_ckpt_begin_version(&w, g_buf, sizeof(g_buf), version);
	for (uint32_t i = 0; i < slots; i++) {
		struct ssd_ckpt_slot s = { i % 4 ? i + 1 : 0, (uint64_t)(i % 5) * 16 * SSD_ALIGN };
		if (ssd_ckpt_put_slot(&w, &s) < 0)
			die(name);
	}
	for (uint32_t i = 0; i < clears; i++) {
		struct ssd_ckpt_clear c = { i, 50 + i };
		if (ssd_ckpt_put_clear(&w, &c) < 0)
			die(name);
	}
	for (uint32_t i = 0; i < entries; i++) {
		struct ssd_ckpt_entry e;

		memset(&e, 0, sizeof(e));
		e.e.type = i % 5 == 4 ? SSD_REC_DELETE : SSD_REC_PUT;
		e.e.ns_id = 1 + i % 2;
		e.e.seq = 10 + i;
		if (e.e.type == SSD_REC_PUT) {
			e.e.part_count = (uint16_t)(1 + i % 2);
			e.e.value_len = 65536 + i;
		}
		e.e.key.len = i % 3 ? 32 : 64;
		fill(e.e.key.bytes, e.e.key.len, i);
		e.e.off_512 = 1 + i * 20;
		e.e.len_512 = (uint32_t)(ssd_rec_len(e.e.part_count, e.e.value_len, SSD_REC_ALIGN) / SSD_REC_ALIGN);
		if (version == SSD_CKPT_VERSION_BATCH && i % 5 == 0) {
			e.e.part_count = 1;
			e.e.value_len = 16384 + i;
			e.e.flags = SSD_ENT_F_BATCHED;
			e.e.value_crc = 0xc0de0000u + i;
			e.e.len_512 = (uint32_t)((e.e.value_len + SSD_REC_ALIGN - 1) / SSD_REC_ALIGN);
		}
		e.slot = i % slots;
		e.generation = 1 + i % slots;
		if (ssd_ckpt_put_entry(&w, &e) < 0)
			die(name);
	}
	memset(&h, 0, sizeof(h));
	fill(h.store_id, 16, 5);
	h.seq = 1000;
	h.slot_count = slots;
	h.clear_count = clears;
	h.entry_count = entries;
	len = ssd_ckpt_finish(&w, &h);
	if (len < 0)
		die(name);
	write_file(dir, name, g_buf, (size_t)len);
	if (hdir)
		ckpthdr(hdir, name, g_buf, (size_t)len);
}

/* A batch of n entries over ns_count namespaces at offset off (fuzz_ssdbatch's
 * input: the offset in 8 bytes, then the header). */
static void batch(const char *dir, const char *name, uint32_t n, uint32_t ns_count,
		  uint32_t key_len, uint64_t off, uint32_t align)
{
	struct ssd_batch b;
	int len;

	memset(&b, 0, sizeof(b));
	b.generation = 4;
	b.count = n;
	b.ns_count = ns_count;
	for (uint32_t i = 0; i < ns_count; i++) {
		b.ns[i].ns_id = 2 + i;
		fill(b.ns[i].digest, 32, 5 + i);
	}
	for (uint32_t i = 0; i < n; i++) {
		b.ent[i].ns_index = i < ns_count ? i : i % ns_count;
		b.ent[i].flags = i % 5 == 4 ? SSD_REC_F_SEALED : 0;
		b.ent[i].key.len = key_len;
		fill(b.ent[i].key.bytes, key_len, 9 + i);
		b.ent[i].value_len = 16384 + 100 * i;
		b.ent[i].seq = 500 + i;
		b.ent[i].value_crc = 0x9abc0000u + i;
	}
	for (int i = 0; i < 8; i++)
		g_buf[i] = (uint8_t)(off >> (8 * i));
	len = ssd_batch_encode(&b, off, align, g_buf + 8, sizeof(g_buf) - 8);
	if (len < 0)
		die(name);
	write_file(dir, name, g_buf, 8 + (size_t)len);
}

/* fuzz_ssdwalk's input: flags (bit 0 4096-aligned, bit 1 batches),
 * generation 4, then a segment after its header: a framed PUT, a batch of
 * n (if batches), a DELETE, and 1024 zero bytes.  twin (doc/ssd-format.md
 * "Tombstones twice"): the DELETE's twin after it, then a PUT of seq 100;
 * 2: the DELETE's CRC flipped, 3: the twin's. */
static void walk(const char *dir, const char *name, uint32_t align, int batches, uint32_t n,
		 int twin)
{
	static uint8_t img[256 << 10];
	struct ssd_rec_hdr h;
	struct ssd_part part = { 3000, 0x77777777u };
	uint64_t off = SSD_ALIGN; /* the segment's offset of img[9] is 4096 */
	int len;

	memset(img, 0, sizeof(img));
	img[0] = (uint8_t)((align == SSD_REC_ALIGN_4K ? 1 : 0) | (batches ? 2 : 0));
	img[1] = 4;
	memset(&h, 0, sizeof(h));
	h.type = SSD_REC_PUT;
	h.part_count = 1;
	h.ns_id = 2;
	h.value_len = 3000;
	h.seq = 70;
	h.generation = 4;
	fill(h.ns_digest, 32, 5);
	h.key.len = 20;
	fill(h.key.bytes, 20, 11);
	len = ssd_rec_hdr_encode(&h, &part, align, img + 9 + off - SSD_ALIGN, sizeof(img) / 2);
	if (len < 0)
		die(name);
	off += ssd_rec_len(1, 3000, align);
	if (batches) {
		struct ssd_batch b;

		memset(&b, 0, sizeof(b));
		b.generation = 4;
		b.count = n;
		b.ns_count = 1;
		b.ns[0].ns_id = 2;
		fill(b.ns[0].digest, 32, 5);
		for (uint32_t i = 0; i < n; i++) {
			b.ent[i].key.len = 32;
			fill(b.ent[i].key.bytes, 32, 20 + i);
			b.ent[i].value_len = 1000 + 700 * i;
			b.ent[i].seq = 80 + i;
			b.ent[i].value_crc = 0xabc00000u + i;
		}
		len = ssd_batch_encode(&b, off, align, img + 9 + off - SSD_ALIGN, sizeof(img) / 2);
		if (len < 0)
			die(name);
		off += b.hdr_len + b.values_len;
	}
	h.type = SSD_REC_DELETE;
	h.part_count = 0;
	h.value_len = 0;
	h.seq = 99;
	len = ssd_rec_hdr_encode(&h, NULL, align, img + 9 + off - SSD_ALIGN, align);
	if (len < 0)
		die(name);
	if (twin) {
		uint8_t *rec = img + 9 + off - SSD_ALIGN;
		memcpy(rec + len, rec, (size_t)len);
		if (twin >= 2)
			rec[(twin - 2) * len + 12] ^= 0x40; /* a copy's CRC */
		off += 2 * (uint64_t)len;
		h.type = SSD_REC_PUT;
		h.part_count = 1;
		h.value_len = 3000;
		h.seq = 100;
		len = ssd_rec_hdr_encode(&h, &part, align, img + 9 + off - SSD_ALIGN,
					 sizeof(img) / 2);
		if (len < 0)
			die(name);
		off += ssd_rec_len(1, 3000, align);
		len = 0;
	}
	off += (uint64_t)len + 1024;
	write_file(dir, name, img, 9 + off - SSD_ALIGN);
}

int main(int argc, char **argv)
{
	const char *hdir = argc >= 4 ? argv[3] : NULL;

	if (argc < 3 || argc > 6)
		die("usage: gen_ssd_seeds <ssdrec dir> <ckpt dir> [<ckpthdr dir> [<ssdbatch dir> "
		    "[<ssdwalk dir>]]]");
	if (argc == 6) {
		walk(argv[5], "walk-records", SSD_REC_ALIGN, 0, 0, 0);
		walk(argv[5], "walk-batch-8", SSD_REC_ALIGN, 1, 8, 0);
		walk(argv[5], "walk4k-batch-3", SSD_REC_ALIGN_4K, 1, 3, 0);
		walk(argv[5], "walk-twin", SSD_REC_ALIGN, 0, 0, 1);
		walk(argv[5], "walk-twin-first-bad", SSD_REC_ALIGN, 1, 4, 2);
		walk(argv[5], "walk4k-twin-second-bad", SSD_REC_ALIGN_4K, 0, 0, 3);
	}
	if (argc >= 5) {
		batch(argv[4], "batch-1", 1, 1, 32, 4096, SSD_REC_ALIGN);
		batch(argv[4], "batch-8", 8, 1, 32, 1 << 20, SSD_REC_ALIGN);
		batch(argv[4], "batch-32-3ns", 32, 3, 64, 8 << 20, SSD_REC_ALIGN);
		batch(argv[4], "batch4k-8-2ns", 8, 2, 16, 1 << 20, SSD_REC_ALIGN_4K);
	}

	rec(argv[1], "rec-put-1part", SSD_REC_PUT, 1, 32, SSD_REC_ALIGN);
	rec(argv[1], "rec-put-3parts", SSD_REC_PUT, 3, 64, SSD_REC_ALIGN);
	rec(argv[1], "rec-put-300parts", SSD_REC_PUT, 300, 1, SSD_REC_ALIGN);
	rec(argv[1], "rec-delete", SSD_REC_DELETE, 0, 32, SSD_REC_ALIGN);
	rec(argv[1], "rec-clear-ns", SSD_REC_CLEAR_NS, 0, 0, SSD_REC_ALIGN);
	rec(argv[1], "rec-clear-all", SSD_REC_CLEAR_ALL, 0, 0, SSD_REC_ALIGN);
	sum(argv[1], "sum-empty", 0, SSD_FMT_VERSION);
	sum(argv[1], "sum-1", 1, SSD_FMT_VERSION);
	sum(argv[1], "sum-8", 8, SSD_FMT_VERSION);
	sum(argv[1], "sum-60", 60, SSD_FMT_VERSION);
	sum(argv[1], "sum3-8", 8, SSD_SUM_VERSION_BATCH);
	sum(argv[1], "sum3-60", 60, SSD_SUM_VERSION_BATCH);
	rec(argv[1], "rec4k-put-1part", SSD_REC_PUT, 1, 32, SSD_REC_ALIGN_4K);
	rec(argv[1], "rec4k-put-300parts", SSD_REC_PUT, 300, 1, SSD_REC_ALIGN_4K);
	rec(argv[1], "rec4k-delete", SSD_REC_DELETE, 0, 32, SSD_REC_ALIGN_4K);
	seg(argv[1], "seg-open", 0, SSD_REC_ALIGN);
	seg(argv[1], "seg-sealed", 1, SSD_REC_ALIGN);
	seg(argv[1], "seg4k-open", 0, SSD_REC_ALIGN_4K);
	seg(argv[1], "seg4k-sealed", 1, SSD_REC_ALIGN_4K);

	ckpt(argv[2], hdir, "ckpt-empty", 0, 0, 0, SSD_FMT_VERSION);
	ckpt(argv[2], hdir, "ckpt-slots", 8, 0, 0, SSD_FMT_VERSION);
	ckpt(argv[2], hdir, "ckpt-small", 3, 2, 10, SSD_FMT_VERSION);
	ckpt(argv[2], hdir, "ckpt-two-pages", 16, 4, 60, SSD_FMT_VERSION);
	ckpt(argv[2], hdir, "ckpt3-small", 3, 2, 10, SSD_CKPT_VERSION_BATCH);
	return 0;
}

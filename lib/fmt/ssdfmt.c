/*
 * ssdfmt.c - the SSD tier's on-disk formats (ssdfmt.h; the specification,
 * byte by byte, is doc/ssd-format.md): segment headers, record headers,
 * segment summaries and checkpoints, encoded into and decoded from caller
 * buffers.
 *
 * Pure functions: no I/O, no allocation, no state, no locks; any thread.
 * The offset tables below are the format; every field is written and read
 * one at a time, little-endian, never through a struct overlay.
 *
 * Invariants:
 *   - A decoder reads only [buf, buf + buf_len) and trusts nothing in it:
 *     every count and length is bounded before it becomes an offset, in
 *     64-bit arithmetic that cannot wrap.
 *   - Every structure is covered by a CRC32C, and its reserved fields and
 *     padding must be zero, so each value has exactly one encoding: what a
 *     decoder accepts, the encoder reproduces byte for byte (the fuzz
 *     targets check this).
 *   - Encoders refuse what decoders refuse (the ssdfmt_*_ok checks are
 *     shared), so nothing that was encoded is rejected on the way back.
 *   - The magic, the version and the header CRC (and for records hdr_len)
 *     sit where no format version may move them.  Decoders check the
 *     magic, then the CRC, then the version: a flipped bit anywhere reads
 *     as KVT_ECORRUPT, and only an intact header of another version reads
 *     as KVT_EVERSION.
 *   - Summary and checkpoint decoders validate the whole image before the
 *     first callback: a caller never applies half of a corrupt file.
 */
#include <string.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "le.h"

/* ------------------------------------------------------------------------
 * Little-endian fields and CRCs
 */

bool ssd_is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* CRC32C of p[0, len) as if the 4 bytes at crc_off were zero. */
static uint32_t ssdfmt_crc_skip(const uint8_t *p, size_t len, size_t crc_off)
{
	static const uint8_t zero[4];
	uint32_t crc;

	crc = kvt_crc32c(0, p, crc_off);
	crc = kvt_crc32c(crc, zero, 4);
	return kvt_crc32c(crc, p + crc_off + 4, len - crc_off - 4);
}

/* Bytes up to the next multiple of SSD_ALIGN (n <= 2^63). */
static uint64_t ssdfmt_align(uint64_t n)
{
	return KVT_ALIGN_UP(n, SSD_ALIGN);
}

/* A record alignment a segment may use. */
static bool ssdfmt_align_ok(uint32_t align)
{
	return align == SSD_REC_ALIGN || align == SSD_REC_ALIGN_4K;
}

/* ------------------------------------------------------------------------
 * What a record, summary entry or checkpoint entry may say (doc/ssd-format.md,
 * "Record types").  Shared by every encoder and decoder.
 */
static bool ssdfmt_kind_ok(uint32_t type, uint32_t ns_id, uint32_t key_len,
			   uint32_t part_count, uint64_t value_len, uint64_t seq)
{
	if (seq == 0)
		return false;
	switch (type) {
	case SSD_REC_PUT:
		return ns_id != 0 && key_len >= 1 && key_len <= KVT_KEY_MAX &&
		       part_count >= 1 && part_count <= KVT_PARTS_MAX &&
		       value_len >= part_count && value_len <= KVT_VALUE_MAX;
	case SSD_REC_DELETE:
		return ns_id != 0 && key_len >= 1 && key_len <= KVT_KEY_MAX &&
		       part_count == 0 && value_len == 0;
	case SSD_REC_CLEAR_NS:
		return ns_id != 0 && key_len == 0 && part_count == 0 && value_len == 0;
	case SSD_REC_CLEAR_ALL:
		return ns_id == 0 && key_len == 0 && part_count == 0 && value_len == 0;
	default:
		return false;
	}
}

/* ------------------------------------------------------------------------
 * Segment header: one SSD_ALIGN block at offset 0 of every segment file.
 *
 *   off  size  field
 *     0     8  magic "KVTSEG01"
 *     8     4  u32 version (SSD_FMT_VERSION)
 *    12     4  u32 CRC32C of the whole 4096-byte block, this field as zero
 *    16     4  u32 slot
 *    20     4  u32 version 2: reserved, 0 (records 512-aligned);
 *              version 3: rec_align, 4096
 *    24     8  u64 generation
 *    32     8  u64 seg_size: multiple of 4096, >= 8192
 *    40     8  u64 created_ns
 *    48     8  u64 summary_off: 0 (open), else multiple of 512, >= 4096
 *    56     8  u64 summary_len: 0 (open), else multiple of 4096, >= 4096
 *    64    16  store_id
 *    80  4016  zero
 */
enum {
	SEG_MAGIC = 0,
	SEG_VERSION = 8,
	SEG_CRC = 12,
	SEG_SLOT = 16,
	SEG_REC_ALIGN = 20,
	SEG_GENERATION = 24,
	SEG_SIZE = 32,
	SEG_CREATED = 40,
	SEG_SUM_OFF = 48,
	SEG_SUM_LEN = 56,
	SEG_STORE_ID = 64,
	SEG_FIXED = 80,
};
_Static_assert(sizeof(SSD_SEG_MAGIC) - 1 == SEG_VERSION - SEG_MAGIC, "segment magic is 8 bytes");
_Static_assert(SEG_FIXED == SEG_STORE_ID + 16, "segment header fields end at 80");
_Static_assert(SEG_FIXED <= SSD_ALIGN, "segment header fits its block");

/* Largest segment: summary entries address it in u32 units of SSD_REC_ALIGN. */
#define SSDFMT_SEG_MAX ((uint64_t)UINT32_MAX / SSD_ALIGN * SSD_ALIGN * SSD_REC_ALIGN)

void ssd_seg_hdr_encode(const struct ssd_seg_hdr *h, uint8_t *buf)
{
	memset(buf, 0, SSD_ALIGN);
	memcpy(buf + SEG_MAGIC, SSD_SEG_MAGIC, 8);
	/* A 512-aligned segment stays version 2, readable by older kvtier;
	 * one of format 3 names its alignment at either. */
	if (h->version == SSD_SEG_VERSION_BATCH) {
		le_put32(buf + SEG_VERSION, SSD_SEG_VERSION_BATCH);
		le_put32(buf + SEG_REC_ALIGN, h->rec_align > SSD_REC_ALIGN ? h->rec_align
									  : SSD_REC_ALIGN);
	} else if (h->rec_align > SSD_REC_ALIGN) {
		le_put32(buf + SEG_VERSION, SSD_SEG_VERSION_4K);
		le_put32(buf + SEG_REC_ALIGN, h->rec_align);
	} else {
		le_put32(buf + SEG_VERSION, SSD_FMT_VERSION);
	}
	le_put32(buf + SEG_SLOT, h->slot);
	le_put64(buf + SEG_GENERATION, h->generation);
	le_put64(buf + SEG_SIZE, h->seg_size);
	le_put64(buf + SEG_CREATED, h->created_ns);
	le_put64(buf + SEG_SUM_OFF, h->summary_off);
	le_put64(buf + SEG_SUM_LEN, h->summary_len);
	memcpy(buf + SEG_STORE_ID, h->store_id, 16);
	le_put32(buf + SEG_CRC, kvt_crc32c(0, buf, SSD_ALIGN));
}

int ssd_seg_hdr_decode(const uint8_t *buf, struct ssd_seg_hdr *h)
{
	struct ssd_seg_hdr t;

	memset(h, 0, sizeof(*h));
	memset(&t, 0, sizeof(t));
	if (memcmp(buf + SEG_MAGIC, SSD_SEG_MAGIC, 8) != 0)
		return KVT_ECORRUPT;
	if (ssdfmt_crc_skip(buf, SSD_ALIGN, SEG_CRC) != le_get32(buf + SEG_CRC))
		return KVT_ECORRUPT;
	t.version = le_get32(buf + SEG_VERSION);
	if (t.version != SSD_FMT_VERSION && t.version != SSD_SEG_VERSION_4K &&
	    t.version != SSD_SEG_VERSION_BATCH) {
		/* Recovery tells an older format (dropped) from a newer one
		 * (refused): doc/ssd-format.md "Versions". */
		h->version = t.version;
		return KVT_EVERSION;
	}

	t.rec_align = t.version == SSD_FMT_VERSION ? SSD_REC_ALIGN : le_get32(buf + SEG_REC_ALIGN);
	t.slot = le_get32(buf + SEG_SLOT);
	t.generation = le_get64(buf + SEG_GENERATION);
	t.seg_size = le_get64(buf + SEG_SIZE);
	t.created_ns = le_get64(buf + SEG_CREATED);
	t.summary_off = le_get64(buf + SEG_SUM_OFF);
	t.summary_len = le_get64(buf + SEG_SUM_LEN);
	memcpy(t.store_id, buf + SEG_STORE_ID, 16);

	/* Version 3 exists only for 4096-aligned records: a 512-aligned
	 * segment is written as version 2, so a version 3 naming 512 was
	 * never written by kvtier (and would not encode back the same).
	 * Version 4 (format 3) names either. */
	if ((t.version == SSD_FMT_VERSION      ? le_get32(buf + SEG_REC_ALIGN) != 0
	     : t.version == SSD_SEG_VERSION_4K ? t.rec_align != SSD_REC_ALIGN_4K
					       : !ssdfmt_align_ok(t.rec_align)) ||
	    !ssd_is_zero(buf + SEG_FIXED, SSD_ALIGN - SEG_FIXED))
		return KVT_ECORRUPT;
	if (t.seg_size < 2 * SSD_ALIGN || t.seg_size > SSDFMT_SEG_MAX || t.seg_size % SSD_ALIGN ||
	    t.generation > SSD_GEN_MAX)
		return KVT_ECORRUPT;
	if (t.summary_off == 0 || t.summary_len == 0) {
		/* Open: neither is set. */
		if (t.summary_off != 0 || t.summary_len != 0)
			return KVT_ECORRUPT;
	} else {
		/* Both are at most seg_size, so the sum cannot wrap. */
		if (t.summary_off % t.rec_align || t.summary_off < SSD_ALIGN ||
		    t.summary_len % SSD_ALIGN || t.summary_off > t.seg_size ||
		    t.summary_len > t.seg_size || t.summary_off + t.summary_len > t.seg_size)
			return KVT_ECORRUPT;
	}
	*h = t;
	return 0;
}

/* ------------------------------------------------------------------------
 * Record header: hdr_len bytes (a multiple of the segment's record
 * alignment, 512 or 4096) before the value.
 *
 *   off  size  field
 *     0     4  magic "KVR1"
 *     4     4  u32 version (SSD_FMT_VERSION)
 *     8     4  u32 hdr_len: ssd_rec_hdr_len(part_count, the segment's alignment)
 *    12     4  u32 CRC32C of bytes [0, hdr_len), this field as zero
 *    16     4  u32 type (enum ssd_rec_type)
 *    20     4  u32 part_count
 *    24     4  u32 ns_id
 *    28     4  u32 flags, 0
 *    32     8  u64 value_len
 *    40     8  u64 seq
 *    48     8  u64 generation
 *    56    32  ns_digest
 *    88     4  u32 key_len
 *    92    64  key bytes, zero past key_len
 *   156     4  u32 reserved, 0
 *   160        part table: part_count entries of 16 bytes
 *                 +0  8  u64 len (>= 1)
 *                 +8  4  u32 crc (CRC32C of the part's bytes)
 *                +12  4  u32 reserved, 0
 *   160+16n    zero up to hdr_len
 *
 * Magic, version, hdr_len and the CRC are the frame that every version
 * keeps.  hdr_len is bounded (<= SSDFMT_REC_HDR_MAX) before the CRC is
 * computed over it.  (SSD_REC_MAGIC: ssdfmt.h.)
 */

enum {
	REC_MAGIC = 0,
	REC_VERSION = 4,
	REC_HDR_LEN = 8,
	REC_CRC = 12,
	REC_TYPE = 16,
	REC_PART_COUNT = 20,
	REC_NS_ID = 24,
	REC_FLAGS = 28,
	REC_VALUE_LEN = 32,
	REC_SEQ = 40,
	REC_GENERATION = 48,
	REC_NS_DIGEST = 56,
	REC_KEY_LEN = 88,
	REC_KEY = 92,
	REC_RESERVED = 156,
	REC_FIXED = 160,
	/* offsets inside one part-table entry */
	PART_LEN = 0,
	PART_CRC = 8,
	PART_RESERVED = 12,
};
_Static_assert(sizeof(SSD_REC_MAGIC) - 1 == REC_VERSION - REC_MAGIC, "record magic is 4 bytes");
_Static_assert(REC_KEY + KVT_KEY_MAX == REC_RESERVED, "key field holds KVT_KEY_MAX bytes");

/* The frame a record header and a batch header share: a 4-byte magic at
 * 0, the version at 4, hdr_len at 8 and at 12 the CRC of hdr_len bytes.
 * Checked in that order, the version last -- only after the CRC is the
 * rest of the layout known -- and hdr_len bounded by max and a multiple
 * of SSD_REC_ALIGN before the CRC reads that far.  0 with *hdr_len;
 * KVT_EBUFSMALL with *hdr_len the bytes wanted (buf holds fewer);
 * KVT_ECORRUPT; KVT_EVERSION. */
static int ssdfmt_frame_decode(const uint8_t *buf, size_t buf_len, const char *magic,
			       uint32_t max, uint32_t version, uint32_t *hdr_len)
{
	*hdr_len = SSD_REC_ALIGN;
	if (buf_len < SSD_REC_ALIGN)
		return KVT_EBUFSMALL;
	if (memcmp(buf + REC_MAGIC, magic, 4) != 0)
		return KVT_ECORRUPT;
	*hdr_len = le_get32(buf + REC_HDR_LEN);
	if (*hdr_len < SSD_REC_ALIGN || *hdr_len > max || *hdr_len % SSD_REC_ALIGN)
		return KVT_ECORRUPT;
	if (*hdr_len > buf_len)
		return KVT_EBUFSMALL;
	if (ssdfmt_crc_skip(buf, *hdr_len, REC_CRC) != le_get32(buf + REC_CRC))
		return KVT_ECORRUPT;
	return le_get32(buf + REC_VERSION) == version ? 0 : KVT_EVERSION;
}
_Static_assert(REC_FIXED == SSD_REC_FIXED, "fixed part of a record header ends at 160");
_Static_assert(PART_RESERVED + 4 == SSD_PART_ENTRY, "part-table entries are 16 bytes");
_Static_assert(KVT_PARTS_MAX <= UINT16_MAX, "part_count fits a summary entry's u16");
_Static_assert(KVT_KEY_MAX <= UINT8_MAX, "key_len fits a summary entry's u8");

/* The largest header at either alignment (hdr_len is bounded by it before
 * the CRC is computed over it). */
#define SSDFMT_REC_HDR_MAX \
	((uint32_t)KVT_ALIGN_UP(SSD_REC_FIXED + (uint64_t)KVT_PARTS_MAX * SSD_PART_ENTRY, \
				SSD_REC_ALIGN_4K))
_Static_assert(SSDFMT_REC_HDR_MAX == 5 * SSD_REC_ALIGN_4K, "largest record header is 20 KiB");
_Static_assert(SSD_REC_FIXED + 22 * SSD_PART_ENTRY <= SSD_REC_ALIGN,
	       "a record of up to 22 parts has a 512-byte header");

uint32_t ssd_rec_hdr_len(uint32_t part_count, uint32_t align)
{
	if (part_count > KVT_PARTS_MAX || !ssdfmt_align_ok(align))
		return 0;
	return (uint32_t)KVT_ALIGN_UP(SSD_REC_FIXED + (uint64_t)part_count * SSD_PART_ENTRY, align);
}

uint64_t ssd_rec_len(uint32_t part_count, uint64_t value_len, uint32_t align)
{
	if (part_count > KVT_PARTS_MAX || value_len > KVT_VALUE_MAX || !ssdfmt_align_ok(align))
		return 0;
	return ssd_rec_hdr_len(part_count, align) + KVT_ALIGN_UP(value_len, align);
}

const char *ssd_sum_entry_bound(const struct ssd_sum_entry *e, uint32_t align, uint64_t sum_off,
				bool batches)
{
	uint64_t off = (uint64_t)e->off_512 * SSD_REC_ALIGN;
	uint64_t len = (uint64_t)e->len_512 * SSD_REC_ALIGN;
	/* A batched entry names its value alone (format 3). */
	uint64_t want = e->flags & SSD_ENT_F_BATCHED
				? (ssdfmt_align_ok(align) ? KVT_ALIGN_UP(e->value_len, align) : 0)
				: ssd_rec_len(e->part_count, e->value_len, align);

	if ((e->flags & SSD_ENT_F_BATCHED) && !batches)
		return "a batched entry in a segment without batches";
	if (!ssdfmt_align_ok(align) || off % align || len != want)
		return "an entry off the segment's record alignment";
	if (off + len > sum_off)
		return "an entry past the summary's offset";
	return NULL;
}

const char *ssd_walk_rec(int d, const struct ssd_rec_hdr *h, uint64_t gen, uint64_t off,
			 uint64_t seg_size, uint32_t align, uint64_t *rec_len)
{
	uint64_t len;

	if (d < 0)
		return "no sound record header";
	if (h->generation != gen)
		return h->generation < gen ? "a record of an older generation"
					   : "a record of a newer generation";
	/* A checksum-valid header that claims more than the segment holds
	 * is not a record of this segment. */
	len = ssd_rec_len(h->part_count, h->value_len, align);
	if (len == 0 || off > seg_size || len > seg_size - off)
		return "a record that runs past its segment";
	*rec_len = len;
	return NULL;
}

int ssd_seg_hdr_ours(const struct ssd_seg_hdr *h, uint32_t slot, uint64_t seg_size,
		     const uint8_t *store_id)
{
	if (h->slot != slot)
		return SSD_SEG_OTHER_SLOT;
	if (h->generation == 0)
		return SSD_SEG_UNUSED;
	if (store_id && memcmp(h->store_id, store_id, 16) != 0)
		return SSD_SEG_OTHER_STORE;
	if (seg_size && h->seg_size != seg_size)
		return SSD_SEG_OTHER_SIZE;
	return 0;
}

uint32_t ssd_rec_align_of(uint32_t part_count, uint64_t value_len, uint64_t rec_len)
{
	uint64_t l512 = ssd_rec_len(part_count, value_len, SSD_REC_ALIGN);

	if (l512 != 0 && l512 == rec_len)
		return SSD_REC_ALIGN;
	if (l512 != 0 && ssd_rec_len(part_count, value_len, SSD_REC_ALIGN_4K) == rec_len)
		return SSD_REC_ALIGN_4K;
	return 0;
}

/* Fields of a record header besides its part table, as both sides check them. */
static bool ssdfmt_rec_ok(const struct ssd_rec_hdr *h)
{
	static const uint8_t zero_digest[32];

	if (!ssdfmt_kind_ok(h->type, h->ns_id, h->key.len, h->part_count, h->value_len, h->seq))
		return false;
	if (h->generation == 0 || h->generation > SSD_GEN_MAX ||
	    (h->flags & ~SSD_REC_F_SEALED) != 0 ||
	    (h->flags != 0 && h->type != SSD_REC_PUT))
		return false;
	/* A clear of every namespace names none. */
	if (h->type == SSD_REC_CLEAR_ALL && memcmp(h->ns_digest, zero_digest, 32) != 0)
		return false;
	return true;
}

int ssd_rec_hdr_encode(const struct ssd_rec_hdr *h, const struct ssd_part *parts,
		       uint32_t align, uint8_t *buf, size_t buf_len)
{
	uint32_t hdr_len;
	uint64_t sum = 0;

	if (!ssdfmt_rec_ok(h) || !ssdfmt_align_ok(align))
		return KVT_EBADLEN;
	hdr_len = ssd_rec_hdr_len(h->part_count, align);
	if (buf_len < hdr_len || (h->part_count && !parts))
		return KVT_EBADLEN;
	for (uint32_t i = 0; i < h->part_count; i++) {
		/* Each len is checked before it is added: the sum cannot wrap. */
		if (parts[i].len == 0 || parts[i].len > KVT_VALUE_MAX)
			return KVT_EBADLEN;
		sum += parts[i].len;
	}
	if (sum != h->value_len)
		return KVT_EBADLEN;

	memset(buf, 0, hdr_len);
	memcpy(buf + REC_MAGIC, SSD_REC_MAGIC, 4);
	le_put32(buf + REC_VERSION, SSD_FMT_VERSION);
	le_put32(buf + REC_HDR_LEN, hdr_len);
	le_put32(buf + REC_TYPE, h->type);
	le_put32(buf + REC_PART_COUNT, h->part_count);
	le_put32(buf + REC_NS_ID, h->ns_id);
	le_put32(buf + REC_FLAGS, h->flags);
	le_put64(buf + REC_VALUE_LEN, h->value_len);
	le_put64(buf + REC_SEQ, h->seq);
	le_put64(buf + REC_GENERATION, h->generation);
	memcpy(buf + REC_NS_DIGEST, h->ns_digest, 32);
	le_put32(buf + REC_KEY_LEN, h->key.len);
	memcpy(buf + REC_KEY, h->key.bytes, h->key.len);
	for (uint32_t i = 0; i < h->part_count; i++) {
		uint8_t *p = buf + REC_FIXED + (size_t)i * SSD_PART_ENTRY;
		le_put64(p + PART_LEN, parts[i].len);
		le_put32(p + PART_CRC, parts[i].crc);
	}
	le_put32(buf + REC_CRC, kvt_crc32c(0, buf, hdr_len));
	return (int)hdr_len;
}

/* ssd_rec_hdr_decode's checks, every one, over the whole header; on the
 * way through the part table, part `want`'s entry into *want_part and the
 * sum of the lengths before it into *want_off (want_part NULL: none; want
 * past the table: untouched).  The table itself is not kept. */
static int ssdfmt_rec_decode(const uint8_t *buf, size_t buf_len, uint32_t align,
			     struct ssd_rec_hdr *h, uint32_t want, struct ssd_part *want_part,
			     uint64_t *want_off)
{
	struct ssd_rec_hdr t;
	uint32_t hdr_len, table_end;
	uint64_t sum = 0;

	int rc;

	memset(h, 0, sizeof(*h));
	/* 1-2. The frame, then the version. */
	rc = ssdfmt_frame_decode(buf, buf_len, SSD_REC_MAGIC, SSDFMT_REC_HDR_MAX, SSD_FMT_VERSION,
				 &hdr_len);
	if (rc == KVT_EBUFSMALL)
		h->hdr_len = hdr_len;
	if (rc)
		return rc;

	/* 3. The fixed fields. */
	memset(&t, 0, sizeof(t));
	t.hdr_len = hdr_len;
	t.type = le_get32(buf + REC_TYPE);
	t.part_count = le_get32(buf + REC_PART_COUNT);
	t.ns_id = le_get32(buf + REC_NS_ID);
	t.flags = le_get32(buf + REC_FLAGS);
	t.value_len = le_get64(buf + REC_VALUE_LEN);
	t.seq = le_get64(buf + REC_SEQ);
	t.generation = le_get64(buf + REC_GENERATION);
	memcpy(t.ns_digest, buf + REC_NS_DIGEST, 32);
	t.key.len = le_get32(buf + REC_KEY_LEN);
	if (t.key.len > KVT_KEY_MAX)
		return KVT_ECORRUPT;
	memcpy(t.key.bytes, buf + REC_KEY, t.key.len);
	if (!ssdfmt_rec_ok(&t))
		return KVT_ECORRUPT;
	if (!ssd_is_zero(buf + REC_KEY + t.key.len, KVT_KEY_MAX - t.key.len) ||
	    le_get32(buf + REC_RESERVED) != 0)
		return KVT_ECORRUPT;

	/* 4. The part table (part_count <= KVT_PARTS_MAX now) and the padding. */
	if (hdr_len != ssd_rec_hdr_len(t.part_count, align))
		return KVT_ECORRUPT;
	table_end = REC_FIXED + t.part_count * SSD_PART_ENTRY;
	for (uint32_t i = 0; i < t.part_count; i++) {
		const uint8_t *p = buf + REC_FIXED + (size_t)i * SSD_PART_ENTRY;
		uint64_t len = le_get64(p + PART_LEN);

		if (len == 0 || len > KVT_VALUE_MAX || le_get32(p + PART_RESERVED) != 0)
			return KVT_ECORRUPT;
		if (i == want && want_part) {
			want_part->len = len;
			want_part->crc = le_get32(p + PART_CRC);
			*want_off = sum;
		}
		sum += len;
	}
	if (sum != t.value_len)
		return KVT_ECORRUPT;
	if (!ssd_is_zero(buf + table_end, hdr_len - table_end))
		return KVT_ECORRUPT;

	*h = t;
	return 0;
}

int ssd_rec_hdr_decode(const uint8_t *buf, size_t buf_len, uint32_t align,
		       struct ssd_rec_hdr *h, struct ssd_part *parts, uint32_t max_parts)
{
	int rc = ssdfmt_rec_decode(buf, buf_len, align, h, 0, NULL, NULL);

	if (rc != 0 || !parts)
		return rc;
	if (max_parts < h->part_count)
		return KVT_ERANGE;
	for (uint32_t i = 0; i < h->part_count; i++) {
		const uint8_t *p = buf + REC_FIXED + (size_t)i * SSD_PART_ENTRY;
		parts[i].len = le_get64(p + PART_LEN);
		parts[i].crc = le_get32(p + PART_CRC);
	}
	return 0;
}

int ssd_rec_hdr_decode_part(const uint8_t *buf, size_t buf_len, uint32_t align,
			    struct ssd_rec_hdr *h, uint32_t part, struct ssd_part *pt,
			    uint64_t *part_off)
{
	struct ssd_part t = { 0, 0 };
	uint64_t off = 0;
	int rc = ssdfmt_rec_decode(buf, buf_len, align, h, part, &t, &off);

	if (rc == 0 && part >= h->part_count)
		rc = KVT_ERANGE;
	/* A header that fails may have passed the part's entry first. */
	*pt = rc == 0 ? t : (struct ssd_part){ 0, 0 };
	*part_off = rc == 0 ? off : 0;
	return rc;
}

/* ------------------------------------------------------------------------
 * Summary entries (also the body of checkpoint entries): 32 bytes, then the
 * key padded with zeros to a multiple of 8.
 *
 *   off  size  field
 *     0     1  u8  type
 *     1     1  u8  key_len
 *     2     2  u16 part_count
 *     4     4  u32 ns_id
 *     8     4  u32 off_512: record offset in the segment / 512, >= 1
 *    12     4  u32 len_512: ssd_rec_len(part_count, value_len, 512 or 4096) / 512
 *    16     8  u64 seq
 *    24     8  u64 value_len
 *    32     K  key bytes, K = key_len rounded up to 8, zero past key_len
 *
 * Version 3 (SSD_SUM_VERSION_BATCH, SSD_CKPT_VERSION_BATCH; format 3)
 * inserts 8 bytes before the key:
 *    32     4  u32 value_crc: SSD_ENT_F_BATCHED: the batch entry's; else 0
 *    36     4  u32 flags: SSD_ENT_F_BATCHED, SSD_ENT_F_SEALED (batched only)
 *    40     K  key bytes
 * A batched entry is a single-part PUT of at most SSD_BATCH_VALUE_MAX
 * bytes whose len_512 is its value's, padded to 512 or to 4096.
 */
enum {
	ENT_TYPE = 0,
	ENT_KEY_LEN = 1,
	ENT_PART_COUNT = 2,
	ENT_NS_ID = 4,
	ENT_OFF_4K = 8,
	ENT_LEN_4K = 12,
	ENT_SEQ = 16,
	ENT_VALUE_LEN = 24,
	ENT_FIXED = 32,
	/* version 3 */
	ENT_VALUE_CRC = 32,
	ENT_FLAGS = 36,
	ENT_FIXED_V3 = 40,
};
_Static_assert(ENT_VALUE_LEN + 8 == ENT_FIXED, "summary entry fixed part is 32 bytes");
_Static_assert(ENT_FLAGS + 4 == ENT_FIXED_V3, "version 3's entry fixed part is 40 bytes");
_Static_assert((int)SSD_SUM_VERSION_BATCH == (int)SSD_CKPT_VERSION_BATCH,
	       "summary and checkpoint entries share a version number");

static size_t ssdfmt_key_pad(uint32_t key_len)
{
	return ((size_t)key_len + 7) & ~(size_t)7;
}

/* An entry of a summary or checkpoint of this version. */
static bool ssdfmt_ent_ok(const struct ssd_sum_entry *e, uint32_t version)
{
	uint64_t len = (uint64_t)e->len_512 * SSD_REC_ALIGN;

	if (!ssdfmt_kind_ok(e->type, e->ns_id, e->key.len, e->part_count, e->value_len, e->seq))
		return false;
	if (e->off_512 < 1 || e->len_512 < 1 || (uint64_t)e->off_512 + e->len_512 > UINT32_MAX)
		return false;
	if (version == SSD_FMT_VERSION && (e->flags != 0 || e->value_crc != 0))
		return false;
	if (version != SSD_FMT_VERSION && version != SSD_SUM_VERSION_BATCH)
		return false;
	if ((e->flags & ~(SSD_ENT_F_BATCHED | SSD_ENT_F_SEALED)) != 0 ||
	    (e->flags == SSD_ENT_F_SEALED))
		return false;
	/* Either alignment's layout: the segment's header says which its
	 * records use, and the tier checks each entry against it. */
	if (e->flags & SSD_ENT_F_BATCHED)
		return e->type == SSD_REC_PUT && e->part_count == 1 &&
		       e->value_len <= SSD_BATCH_VALUE_MAX &&
		       (len == KVT_ALIGN_UP(e->value_len, SSD_REC_ALIGN) ||
			len == KVT_ALIGN_UP(e->value_len, SSD_REC_ALIGN_4K));
	return e->value_crc == 0 && ssd_rec_align_of(e->part_count, e->value_len, len) != 0;
}

static size_t ssdfmt_ent_fixed(uint32_t version)
{
	return version == SSD_SUM_VERSION_BATCH ? ENT_FIXED_V3 : ENT_FIXED;
}

size_t ssd_sum_entry_len(const struct ssd_sum_entry *e, uint32_t version)
{
	return ssdfmt_ent_fixed(version) + ssdfmt_key_pad(e->key.len);
}

/* Write e (already checked) at p; returns the bytes written. */
static size_t ssdfmt_ent_put(uint8_t *p, const struct ssd_sum_entry *e, uint32_t version)
{
	size_t fixed = ssdfmt_ent_fixed(version);
	size_t len = ssd_sum_entry_len(e, version);

	memset(p, 0, len);
	p[ENT_TYPE] = (uint8_t)e->type;
	p[ENT_KEY_LEN] = (uint8_t)e->key.len;
	le_put16(p + ENT_PART_COUNT, e->part_count);
	le_put32(p + ENT_NS_ID, e->ns_id);
	le_put32(p + ENT_OFF_4K, e->off_512);
	le_put32(p + ENT_LEN_4K, e->len_512);
	le_put64(p + ENT_SEQ, e->seq);
	le_put64(p + ENT_VALUE_LEN, e->value_len);
	if (fixed == ENT_FIXED_V3) {
		le_put32(p + ENT_VALUE_CRC, e->value_crc);
		le_put32(p + ENT_FLAGS, e->flags);
	}
	memcpy(p + fixed, e->key.bytes, e->key.len);
	return len;
}

/* Read one entry of this version from p[0, avail) into *e; returns its
 * length or KVT_ECORRUPT. */
static int64_t ssdfmt_ent_get(const uint8_t *p, size_t avail, struct ssd_sum_entry *e,
			      uint32_t version)
{
	size_t fixed = ssdfmt_ent_fixed(version);
	size_t len;

	if (avail < fixed)
		return KVT_ECORRUPT;
	memset(e, 0, sizeof(*e));
	e->type = p[ENT_TYPE];
	e->key.len = p[ENT_KEY_LEN];
	e->part_count = le_get16(p + ENT_PART_COUNT);
	e->ns_id = le_get32(p + ENT_NS_ID);
	e->off_512 = le_get32(p + ENT_OFF_4K);
	e->len_512 = le_get32(p + ENT_LEN_4K);
	e->seq = le_get64(p + ENT_SEQ);
	e->value_len = le_get64(p + ENT_VALUE_LEN);
	if (fixed == ENT_FIXED_V3) {
		e->value_crc = le_get32(p + ENT_VALUE_CRC);
		e->flags = le_get32(p + ENT_FLAGS);
	}
	if (e->key.len > KVT_KEY_MAX || !ssdfmt_ent_ok(e, version))
		return KVT_ECORRUPT;
	len = ssd_sum_entry_len(e, version);
	if (avail < len)
		return KVT_ECORRUPT;
	memcpy(e->key.bytes, p + fixed, e->key.len);
	if (!ssd_is_zero(p + fixed + e->key.len, len - fixed - e->key.len))
		return KVT_ECORRUPT;
	return (int64_t)len;
}

/* ------------------------------------------------------------------------
 * Batch header (format 3): hdr_len bytes (a multiple of the segment's
 * record alignment, at most 4096) before the batch's values.
 *
 *   off  size  field
 *     0     4  magic "KVB1"
 *     4     4  u32 version (SSD_BATCH_VERSION)
 *     8     4  u32 hdr_len: roundup(64 + 40 ns_count + entries' bytes, align)
 *    12     4  u32 CRC32C of bytes [0, hdr_len), this field as zero
 *    16     8  u64 generation
 *    24     2  u16 count: 1..32
 *    26     2  u16 ns_count: 1..count
 *    28     4  u32 values_len: sum of roundup(value_len, align)
 *    32    32  reserved, 0
 *    64        ns table: ns_count entries of 40 bytes
 *                 +0  4  u32 ns_id (>= 1)
 *                 +4  4  reserved, 0
 *                 +8 32  the namespace's digest
 *              entries, back to back: 32 bytes, then the key padded to 8
 *                 +0  1  u8  ns_index
 *                 +1  1  u8  key_len: 1..64
 *                 +2  2  u16 flags: SSD_REC_F_SEALED or 0
 *                 +4  4  u32 value_crc (ssd_value_crc)
 *                 +8  8  u64 value_len: 1..SSD_BATCH_VALUE_MAX
 *                +16  8  u64 seq
 *                +24  4  u32 value_off_512
 *                +28  4  reserved, 0
 *                +32     key bytes, zero up to the next multiple of 8
 *              zero up to hdr_len
 *
 * Magic, version, hdr_len and the CRC sit where a record header's do, so
 * one look at the first 16 bytes of a structure tells what it is and how
 * long its header is.  hdr_len is bounded (<= SSD_BATCH_HDR_MAX) before
 * the CRC is computed over it.
 */
enum {
	BAT_MAGIC = 0,
	BAT_VERSION = 4,
	BAT_HDR_LEN = 8,
	BAT_CRC = 12,
	BAT_GENERATION = 16,
	BAT_COUNT = 24,
	BAT_NS_COUNT = 26,
	BAT_VALUES_LEN = 28,
	BAT_RESERVED = 32,
	BAT_FIXED = 64,
	/* offsets inside one ns-table entry */
	BNS_ID = 0,
	BNS_RESERVED = 4,
	BNS_DIGEST = 8,
	/* offsets inside one entry */
	BENT_NS_INDEX = 0,
	BENT_KEY_LEN = 1,
	BENT_FLAGS = 2,
	BENT_VALUE_CRC = 4,
	BENT_VALUE_LEN = 8,
	BENT_SEQ = 16,
	BENT_VALUE_OFF = 24,
	BENT_RESERVED = 28,
	BENT_FIXED = 32,
};
_Static_assert(sizeof(SSD_BATCH_MAGIC) - 1 == BAT_VERSION - BAT_MAGIC, "batch magic is 4 bytes");
_Static_assert((int)BAT_MAGIC == (int)REC_MAGIC && (int)BAT_VERSION == (int)REC_VERSION &&
		       (int)BAT_HDR_LEN == (int)REC_HDR_LEN && (int)BAT_CRC == (int)REC_CRC,
	       "a batch header's frame is a record header's");
_Static_assert(BAT_FIXED == SSD_BATCH_FIXED && BENT_FIXED == SSD_BATCH_ENT_FIXED,
	       "batch header sizes");
_Static_assert(BNS_DIGEST + 32 == SSD_BATCH_NS_LEN, "ns-table entries are 40 bytes");
_Static_assert(SSD_BATCH_MAX <= UINT8_MAX + 1, "ns_index fits a u8");
_Static_assert(SSD_BATCH_MAX * ((SSD_BATCH_VALUE_MAX + SSD_REC_ALIGN_4K) / SSD_REC_ALIGN_4K *
				SSD_REC_ALIGN_4K) <= UINT32_MAX,
	       "values_len fits a u32");

uint64_t ssd_batch_values_max(uint64_t seg_size)
{
	return seg_size / 4 < SSD_BATCH_VALUES_LIM - 1 ? seg_size / 4 : SSD_BATCH_VALUES_LIM - 1;
}

size_t ssd_batch_ent_len(uint32_t key_len)
{
	return BENT_FIXED + ssdfmt_key_pad(key_len);
}

uint32_t ssd_batch_hdr_len(uint32_t count, uint32_t ns_count, uint64_t key_pad, uint32_t align)
{
	uint64_t n;

	if (!ssdfmt_align_ok(align) || count > SSD_BATCH_MAX || ns_count > SSD_BATCH_MAX ||
	    key_pad > (uint64_t)SSD_BATCH_MAX * KVT_KEY_MAX)
		return 0;
	n = KVT_ALIGN_UP(BAT_FIXED + (uint64_t)ns_count * SSD_BATCH_NS_LEN +
				 (uint64_t)count * BENT_FIXED + key_pad, align);
	return n <= SSD_BATCH_HDR_MAX ? (uint32_t)n : 0;
}

/* The fields of one entry, as both sides check them. */
static bool ssdfmt_bent_ok(const struct ssd_batch_ent *e, uint32_t ns_count)
{
	return e->ns_index < ns_count && e->key.len >= 1 && e->key.len <= KVT_KEY_MAX &&
	       (e->flags & ~SSD_REC_F_SEALED) == 0 && e->value_len >= 1 &&
	       e->value_len <= SSD_BATCH_VALUE_MAX && e->seq >= 1;
}

/* Whether b's counts, ns table and entries are in range and canonical
 * (the ns table in the order of first use, distinct, each used), and
 * how many bytes the header needs before its padding (*used) and the
 * values take (*values). */
static bool ssdfmt_batch_ok(const struct ssd_batch *b, uint32_t align, uint64_t *used,
			    uint64_t *values)
{
	uint32_t named = 0;
	uint64_t u = BAT_FIXED, v = 0;

	if (b->generation == 0 || b->generation > SSD_GEN_MAX || b->count < 1 ||
	    b->count > SSD_BATCH_MAX || b->ns_count < 1 || b->ns_count > b->count)
		return false;
	for (uint32_t i = 0; i < b->ns_count; i++) {
		if (b->ns[i].ns_id == 0)
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (b->ns[j].ns_id == b->ns[i].ns_id)
				return false;
	}
	u += (uint64_t)b->ns_count * SSD_BATCH_NS_LEN;
	for (uint32_t i = 0; i < b->count; i++) {
		const struct ssd_batch_ent *e = &b->ent[i];

		if (!ssdfmt_bent_ok(e, b->ns_count) || e->ns_index > named)
			return false;
		if (e->ns_index == named)
			named++;
		u += ssd_batch_ent_len(e->key.len);
		v += KVT_ALIGN_UP(e->value_len, align);
	}
	if (named != b->ns_count)
		return false;
	*used = u;
	*values = v;
	return true;
}

int ssd_batch_encode(struct ssd_batch *b, uint64_t off, uint32_t align, uint8_t *buf,
		     size_t buf_len)
{
	uint64_t used, values, hdr_len, voff;
	size_t p;

	if (!ssdfmt_align_ok(align) || off < SSD_ALIGN || off % align ||
	    !ssdfmt_batch_ok(b, align, &used, &values))
		return KVT_EBADLEN;
	hdr_len = KVT_ALIGN_UP(used, align);
	if (hdr_len > SSD_BATCH_HDR_MAX || buf_len < hdr_len ||
	    off > (uint64_t)UINT32_MAX * SSD_REC_ALIGN ||
	    (off + hdr_len + values) / SSD_REC_ALIGN > UINT32_MAX)
		return KVT_EBADLEN;

	b->hdr_len = (uint32_t)hdr_len;
	b->values_len = (uint32_t)values;
	memset(buf, 0, hdr_len);
	memcpy(buf + BAT_MAGIC, SSD_BATCH_MAGIC, 4);
	le_put32(buf + BAT_VERSION, SSD_BATCH_VERSION);
	le_put32(buf + BAT_HDR_LEN, b->hdr_len);
	le_put64(buf + BAT_GENERATION, b->generation);
	le_put16(buf + BAT_COUNT, (uint16_t)b->count);
	le_put16(buf + BAT_NS_COUNT, (uint16_t)b->ns_count);
	le_put32(buf + BAT_VALUES_LEN, b->values_len);
	p = BAT_FIXED;
	for (uint32_t i = 0; i < b->ns_count; i++, p += SSD_BATCH_NS_LEN) {
		le_put32(buf + p + BNS_ID, b->ns[i].ns_id);
		memcpy(buf + p + BNS_DIGEST, b->ns[i].digest, 32);
	}
	voff = off + hdr_len;
	for (uint32_t i = 0; i < b->count; i++) {
		struct ssd_batch_ent *e = &b->ent[i];

		e->value_off_512 = (uint32_t)(voff / SSD_REC_ALIGN);
		voff += KVT_ALIGN_UP(e->value_len, align);
		buf[p + BENT_NS_INDEX] = (uint8_t)e->ns_index;
		buf[p + BENT_KEY_LEN] = (uint8_t)e->key.len;
		le_put16(buf + p + BENT_FLAGS, (uint16_t)e->flags);
		le_put32(buf + p + BENT_VALUE_CRC, e->value_crc);
		le_put64(buf + p + BENT_VALUE_LEN, e->value_len);
		le_put64(buf + p + BENT_SEQ, e->seq);
		le_put32(buf + p + BENT_VALUE_OFF, e->value_off_512);
		memcpy(buf + p + BENT_FIXED, e->key.bytes, e->key.len);
		p += ssd_batch_ent_len(e->key.len);
	}
	le_put32(buf + BAT_CRC, kvt_crc32c(0, buf, hdr_len));
	return (int)hdr_len;
}

int ssd_batch_decode(const uint8_t *buf, size_t buf_len, uint64_t off, uint32_t align,
		     struct ssd_batch *b)
{
	uint32_t hdr_len;
	int rc;
	uint64_t used, values, voff;
	size_t p;

	memset(b, 0, sizeof(*b));
	/* 1-2. The frame (a record header's), then the version. */
	rc = ssdfmt_frame_decode(buf, buf_len, SSD_BATCH_MAGIC, SSD_BATCH_HDR_MAX,
				 SSD_BATCH_VERSION, &hdr_len);
	if (rc == KVT_EBUFSMALL)
		b->hdr_len = hdr_len;
	if (rc)
		return rc;
	if (!ssdfmt_align_ok(align) || hdr_len % align)
		return KVT_ECORRUPT;

	/* 3. The fixed fields and the tables, each bounded by hdr_len before
	 * it is read (count <= 32 entries of at most 96 bytes: no wrap). */
	b->generation = le_get64(buf + BAT_GENERATION);
	b->count = le_get16(buf + BAT_COUNT);
	b->ns_count = le_get16(buf + BAT_NS_COUNT);
	b->values_len = le_get32(buf + BAT_VALUES_LEN);
	if (b->count < 1 || b->count > SSD_BATCH_MAX || b->ns_count < 1 ||
	    b->ns_count > b->count || !ssd_is_zero(buf + BAT_RESERVED, BAT_FIXED - BAT_RESERVED))
		goto corrupt;
	p = BAT_FIXED;
	if (p + (size_t)b->ns_count * SSD_BATCH_NS_LEN > hdr_len)
		goto corrupt;
	for (uint32_t i = 0; i < b->ns_count; i++, p += SSD_BATCH_NS_LEN) {
		b->ns[i].ns_id = le_get32(buf + p + BNS_ID);
		if (le_get32(buf + p + BNS_RESERVED) != 0)
			goto corrupt;
		memcpy(b->ns[i].digest, buf + p + BNS_DIGEST, 32);
	}
	voff = off + hdr_len;
	for (uint32_t i = 0; i < b->count; i++) {
		struct ssd_batch_ent *e = &b->ent[i];
		size_t len;

		if (p + BENT_FIXED > hdr_len)
			goto corrupt;
		e->ns_index = buf[p + BENT_NS_INDEX];
		e->key.len = buf[p + BENT_KEY_LEN];
		e->flags = le_get16(buf + p + BENT_FLAGS);
		e->value_crc = le_get32(buf + p + BENT_VALUE_CRC);
		e->value_len = le_get64(buf + p + BENT_VALUE_LEN);
		e->seq = le_get64(buf + p + BENT_SEQ);
		e->value_off_512 = le_get32(buf + p + BENT_VALUE_OFF);
		if (e->key.len > KVT_KEY_MAX || le_get32(buf + p + BENT_RESERVED) != 0)
			goto corrupt;
		len = ssd_batch_ent_len(e->key.len);
		if (p + len > hdr_len)
			goto corrupt;
		memcpy(e->key.bytes, buf + p + BENT_FIXED, e->key.len);
		if (!ssd_is_zero(buf + p + BENT_FIXED + e->key.len,
				    len - BENT_FIXED - e->key.len))
			goto corrupt;
		/* Redundant, so checked: the values follow the header in
		 * entry order (value_len is bounded before it is added). */
		if (e->value_len > SSD_BATCH_VALUE_MAX || voff % SSD_REC_ALIGN ||
		    voff / SSD_REC_ALIGN != e->value_off_512)
			goto corrupt;
		voff += KVT_ALIGN_UP(e->value_len, align);
		p += len;
	}
	/* 4. Every rule of the encoder, the header's exact length, the
	 * padding, the values' length. */
	if (!ssdfmt_batch_ok(b, align, &used, &values) || used != p ||
	    KVT_ALIGN_UP(used, align) != hdr_len || values != b->values_len ||
	    !ssd_is_zero(buf + p, hdr_len - p))
		goto corrupt;
	b->hdr_len = hdr_len;
	return 0;
corrupt:
	memset(b, 0, sizeof(*b));
	return KVT_ECORRUPT;
}

const char *ssd_walk_batch(int d, const struct ssd_batch *b, uint64_t gen, uint64_t off,
			   uint64_t seg_size, uint64_t *len)
{
	uint64_t n;

	if (d < 0)
		return "no sound batch header";
	if (b->generation != gen)
		return b->generation < gen ? "a batch of an older generation"
					   : "a batch of a newer generation";
	n = (uint64_t)b->hdr_len + b->values_len;
	if (off > seg_size || n > seg_size - off)
		return "a batch that runs past its segment";
	*len = n;
	return NULL;
}

void ssd_batch_sum_entry(const struct ssd_batch *b, uint32_t i, uint32_t align,
			 struct ssd_sum_entry *e)
{
	const struct ssd_batch_ent *be = &b->ent[i];

	memset(e, 0, sizeof(*e));
	e->type = SSD_REC_PUT;
	e->ns_id = b->ns[be->ns_index].ns_id;
	e->off_512 = be->value_off_512;
	e->len_512 = (uint32_t)(KVT_ALIGN_UP(be->value_len, align) / SSD_REC_ALIGN);
	e->seq = be->seq;
	e->value_len = be->value_len;
	e->part_count = 1;
	e->key = be->key;
	e->flags = SSD_ENT_F_BATCHED | (be->flags & SSD_REC_F_SEALED ? SSD_ENT_F_SEALED : 0);
	e->value_crc = be->value_crc;
}

int ssd_struct_decode(const uint8_t *buf, size_t buf_len, uint64_t off, uint32_t align,
		      bool batches, struct ssd_struct *st)
{
	int rc;

	st->kind = 0;
	st->hdr_len = 0;
	/* Both frames put the magic at 0 and hdr_len at 8: 512 bytes say
	 * which it is and how long its header is. */
	if (buf_len < SSD_REC_ALIGN) {
		st->hdr_len = SSD_REC_ALIGN;
		return KVT_EBUFSMALL;
	}
	if (batches && memcmp(buf, SSD_BATCH_MAGIC, 4) == 0) {
		rc = ssd_batch_decode(buf, buf_len, off, align, &st->batch);
		st->hdr_len = st->batch.hdr_len;
		if (rc == 0)
			st->kind = SSD_STRUCT_BATCH;
		return rc;
	}
	rc = ssd_rec_hdr_decode(buf, buf_len, align, &st->rec, NULL, 0);
	st->hdr_len = st->rec.hdr_len;
	if (rc == 0)
		st->kind = SSD_STRUCT_REC;
	return rc;
}

const char *ssd_walk_struct(int d, const struct ssd_struct *st, uint64_t gen, uint64_t off,
			    uint64_t seg_size, uint32_t align, uint64_t *len)
{
	if (d < 0 || st->kind == 0)
		return "no sound record or batch header";
	if (st->kind == SSD_STRUCT_BATCH)
		return ssd_walk_batch(d, &st->batch, gen, off, seg_size, len);
	return ssd_walk_rec(d, &st->rec, gen, off, seg_size, align, len);
}

bool ssd_rec_is_twin(const struct ssd_rec_hdr *prev, const struct ssd_rec_hdr *r)
{
	return prev->type != SSD_REC_PUT && r->type == prev->type && r->seq == prev->seq &&
	       r->generation == prev->generation && r->ns_id == prev->ns_id &&
	       r->part_count == 0 && r->key.len == prev->key.len &&
	       memcmp(r->key.bytes, prev->key.bytes, r->key.len) == 0;
}

bool ssd_walk_twin(bool lone, uint64_t last_seq, int d, const struct ssd_struct *next,
		   uint64_t gen, uint64_t off, uint64_t seg_size, uint32_t align)
{
	uint64_t len, seq;

	if (ssd_walk_struct(d, next, gen, off, seg_size, align, &len))
		return false;
	seq = next->kind == SSD_STRUCT_BATCH ? next->batch.ent[0].seq : next->rec.seq;
	if (lone) /* the first copy was taken: what stopped the walk was its twin */
		return seq > last_seq;
	/* The first copy damaged: off - align may as well be where a record
	 * whose header was torn begins, and off inside its value, whose
	 * bytes a client chose -- a tombstone planted there must name the
	 * seq the walk waits for exactly (seqs rise by one record to the
	 * next in a segment), not any above it. */
	return last_seq && seq == last_seq + 1 && next->kind == SSD_STRUCT_REC &&
	       next->rec.type != SSD_REC_PUT;
}

/* A read's result that ends a walk or a headerless probe with it: an
 * error of the system (-ENOMEM, an errno), not one of kvtier's codes
 * ([-5999, -5000]: a structure that fails its checks, where a walk
 * stops). */
static bool ssdfmt_read_fatal(int d)
{
	return d < 0 && (d > -5000 || d < -5999);
}

int ssd_walk(struct ssd_walk *w, struct ssd_struct *st)
{
	struct ssd_rec_hdr prev; /* the last structure, if a lone tombstone */
	bool lone = false;       /* its twin due next */
	uint64_t off = SSD_ALIGN, len, last_seq = 0;
	uint32_t a = w->align;
	int d, r = 0;

	memset(&prev, 0, sizeof(prev));
	while (off % a == 0 && off + a <= w->limit) {
		d = w->read(w->ctx, off, w->limit, a, st);
		if (ssdfmt_read_fatal(d)) {
			r = d;
			break;
		}
		if (ssd_walk_struct(d, st, w->gen, off, w->limit, a, &len)) {
			/* A damaged copy of a tombstone, its other copy next? */
			if (off + 2 * (uint64_t)a > w->limit)
				break;
			d = w->read(w->ctx, off + a, w->limit, a, st);
			if (ssdfmt_read_fatal(d)) {
				r = d;
				break;
			}
			if (!ssd_walk_twin(lone, last_seq, d, st, w->gen, off + a, w->limit, a))
				break; /* the end of what this generation wrote */
			w->twins_used++;
			off += a;
			(void)ssd_walk_struct(d, st, w->gen, off, w->limit, a, &len);
			lone = false; /* what follows is taken as new */
		}
		if (st->kind == SSD_STRUCT_REC && lone && ssd_rec_is_twin(&prev, &st->rec)) {
			lone = false; /* the twin of the tombstone just taken */
			off += len;
			continue;
		}
		/* Values only in a batch: their seqs, for the twin rule. */
		if (st->kind == SSD_STRUCT_BATCH) {
			lone = false;
			for (uint32_t i = 0; i < st->batch.count; i++)
				if (st->batch.ent[i].seq > last_seq)
					last_seq = st->batch.ent[i].seq;
		} else {
			lone = st->rec.type != SSD_REC_PUT;
			if (lone)
				prev = st->rec;
			if (st->rec.seq > last_seq)
				last_seq = st->rec.seq;
		}
		if ((r = w->take(w->tctx, st, off, len)) < 0)
			break;
		off += len;
	}
	w->end = off;
	return r;
}

int ssd_hl_probe(struct ssd_hl *w, struct ssd_struct *st)
{
	static const uint32_t aligns[] = { SSD_REC_ALIGN, SSD_REC_ALIGN_4K };

	w->gen = 0;
	w->align = 0;
	if (w->limit < SSD_ALIGN + SSD_REC_ALIGN)
		return 0; /* no room for a record */
	for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		uint64_t gen, len;
		int d;
		if (SSD_ALIGN + (uint64_t)aligns[i] > w->limit)
			break; /* as the walk: no structure past limit */
		d = w->read(w->ctx, SSD_ALIGN, w->limit, aligns[i], st);
		if (ssdfmt_read_fatal(d))
			return d;
		if (d < 0 || st->kind == 0)
			continue;
		gen = st->kind == SSD_STRUCT_BATCH ? st->batch.generation : st->rec.generation;
		if (!ssd_walk_struct(d, st, gen, SSD_ALIGN, w->limit, aligns[i], &len)) {
			w->gen = gen;
			w->align = aligns[i];
			return 1;
		}
	}
	return 0;
}

bool ssd_hl_reflected(bool have_ckpt, bool slot_in_ckpt, uint64_t ck_slot_gen,
		      uint64_t ck_max_gen, uint64_t gen)
{
	return have_ckpt && slot_in_ckpt && ck_slot_gen == 0 && gen <= ck_max_gen;
}

/* ssd_hl_walk's take: the tombstone records to tomb. */
struct ssdfmt_hl_tomb {
	int (*tomb)(void *tctx, const struct ssd_rec_hdr *h);
	void *tctx;
};

static int ssdfmt_hl_take(void *ctx, const struct ssd_struct *st, uint64_t off, uint64_t len)
{
	const struct ssdfmt_hl_tomb *t = ctx;

	(void)off;
	(void)len;
	if (st->kind != SSD_STRUCT_REC || st->rec.type == SSD_REC_PUT)
		return 0;
	return t->tomb(t->tctx, &st->rec);
}

int ssd_hl_walk(struct ssd_hl *w, struct ssd_struct *st,
		int (*tomb)(void *tctx, const struct ssd_rec_hdr *h), void *tctx)
{
	struct ssdfmt_hl_tomb t = { tomb, tctx };
	struct ssd_walk wk = { .read = w->read, .ctx = w->ctx, .take = ssdfmt_hl_take,
			       .tctx = &t, .gen = w->gen, .limit = w->limit, .align = w->align };
	int r;

	if (!w->gen || !w->align)
		return 0;
	r = ssd_walk(&wk, st);
	w->twins_used += wk.twins_used;
	return r;
}

bool ssd_hl_applies(const struct ssd_rec_hdr *h, uint64_t ck_seq, const uint8_t *reg_digest)
{
	if (h->type == SSD_REC_PUT || h->seq <= ck_seq)
		return false;
	return h->type == SSD_REC_CLEAR_ALL ||
	       (reg_digest && memcmp(h->ns_digest, reg_digest, 32) == 0);
}

uint32_t ssd_value_crc(uint32_t value_crc32c, uint32_t ns_id, const struct kvt_key *key,
		       uint64_t seq)
{
	uint8_t id[4 + 1 + KVT_KEY_MAX + 8];
	uint32_t klen = key->len <= KVT_KEY_MAX ? key->len : KVT_KEY_MAX;
	size_t n = 0;

	le_put32(id, ns_id);
	id[4] = (uint8_t)klen;
	memcpy(id + 5, key->bytes, klen);
	n = 5 + (size_t)klen;
	le_put64(id + n, seq);
	n += 8;
	return kvt_crc32c(value_crc32c, id, n);
}

/* ------------------------------------------------------------------------
 * Segment summary: written at summary_off when a segment is sealed.
 *
 *   off  size  field
 *     0     8  magic "KVTSUM01"
 *     8     4  u32 version (SSD_FMT_VERSION)
 *    12     4  u32 CRC32C of bytes [0, 64), this field as zero
 *    16     8  u64 generation: the segment's
 *    24     4  u32 count: entries
 *    28     4  u32 CRC32C of the entries, bytes [64, 64 + entries_len)
 *    32     8  u64 entries_len
 *    40    24  reserved, 0
 *    64        count entries, back to back, in write order (offsets rise)
 *              zero up to the next multiple of 4096: the summary's length
 */
#define SSD_SUM_MAGIC "KVTSUM01"

enum {
	SUM_MAGIC = 0,
	SUM_VERSION = 8,
	SUM_CRC = 12,
	SUM_GENERATION = 16,
	SUM_COUNT = 24,
	SUM_ENTRIES_CRC = 28,
	SUM_ENTRIES_LEN = 32,
	SUM_RESERVED = 40,
	SUM_HDR = 64,
};
_Static_assert(sizeof(SSD_SUM_MAGIC) - 1 == SUM_VERSION - SUM_MAGIC, "summary magic is 8 bytes");
_Static_assert(SUM_RESERVED + 24 == SUM_HDR, "summary header is 64 bytes");

int64_t ssd_sum_encode(uint32_t version, uint64_t generation, const struct ssd_sum_entry *e,
		       size_t n, uint8_t *buf, size_t buf_len)
{
	uint64_t off = SUM_HDR, total, prev_end = 1;

	if (n > UINT32_MAX || (version != SSD_FMT_VERSION && version != SSD_SUM_VERSION_BATCH))
		return KVT_EBADLEN;
	/* Check everything and size it before the first byte is written. */
	for (size_t i = 0; i < n; i++) {
		if (!ssdfmt_ent_ok(&e[i], version) || e[i].off_512 < prev_end)
			return KVT_EBADLEN;
		prev_end = (uint64_t)e[i].off_512 + e[i].len_512;
		off += ssd_sum_entry_len(&e[i], version);
	}
	total = ssdfmt_align(off);
	if (total > buf_len || total > INT64_MAX)
		return KVT_EBADLEN;

	memset(buf, 0, total);
	off = SUM_HDR;
	for (size_t i = 0; i < n; i++)
		off += ssdfmt_ent_put(buf + off, &e[i], version);
	memcpy(buf + SUM_MAGIC, SSD_SUM_MAGIC, 8);
	le_put32(buf + SUM_VERSION, version);
	le_put64(buf + SUM_GENERATION, generation);
	le_put32(buf + SUM_COUNT, (uint32_t)n);
	le_put32(buf + SUM_ENTRIES_CRC, kvt_crc32c(0, buf + SUM_HDR, off - SUM_HDR));
	le_put64(buf + SUM_ENTRIES_LEN, off - SUM_HDR);
	le_put32(buf + SUM_CRC, kvt_crc32c(0, buf, SUM_HDR));
	return (int64_t)total;
}

/* One pass over the entries of a summary whose header checked out; fn NULL validates. */
static int64_t ssdfmt_sum_walk(const uint8_t *buf, uint32_t version, uint32_t count,
			       uint64_t entries_len, ssd_sum_fn fn, void *ctx)
{
	const uint8_t *p = buf + SUM_HDR;
	uint64_t off = 0, prev_end = 1;
	struct ssd_sum_entry e;

	for (uint32_t i = 0; i < count; i++) {
		int64_t len = ssdfmt_ent_get(p + off, entries_len - off, &e, version);

		if (len < 0)
			return len;
		if (e.off_512 < prev_end)
			return KVT_ECORRUPT;
		prev_end = (uint64_t)e.off_512 + e.len_512;
		off += (uint64_t)len;
		if (fn) {
			int ret = fn(ctx, &e);
			if (ret < 0)
				return ret;
		}
	}
	if (off != entries_len)
		return KVT_ECORRUPT;
	return count;
}

int64_t ssd_sum_decode(const uint8_t *buf, size_t buf_len, uint64_t generation,
		       ssd_sum_fn fn, void *ctx)
{
	uint64_t entries_len, total;
	uint32_t count, version;
	int64_t ret;

	if (buf_len < SUM_HDR || memcmp(buf + SUM_MAGIC, SSD_SUM_MAGIC, 8) != 0)
		return KVT_ECORRUPT;
	if (ssdfmt_crc_skip(buf, SUM_HDR, SUM_CRC) != le_get32(buf + SUM_CRC))
		return KVT_ECORRUPT;
	version = le_get32(buf + SUM_VERSION);
	if (version != SSD_FMT_VERSION && version != SSD_SUM_VERSION_BATCH)
		return KVT_EVERSION;
	if (le_get64(buf + SUM_GENERATION) != generation ||
	    !ssd_is_zero(buf + SUM_RESERVED, SUM_HDR - SUM_RESERVED))
		return KVT_ECORRUPT;
	count = le_get32(buf + SUM_COUNT);
	entries_len = le_get64(buf + SUM_ENTRIES_LEN);
	/* The summary is exactly buf_len bytes: header, entries, padding. */
	if (entries_len > buf_len - SUM_HDR)
		return KVT_ECORRUPT;
	total = ssdfmt_align(SUM_HDR + entries_len);
	if (total != buf_len || count > entries_len / ENT_FIXED)
		return KVT_ECORRUPT;
	if (kvt_crc32c(0, buf + SUM_HDR, entries_len) != le_get32(buf + SUM_ENTRIES_CRC))
		return KVT_ECORRUPT;
	if (!ssd_is_zero(buf + SUM_HDR + entries_len, total - SUM_HDR - entries_len))
		return KVT_ECORRUPT;

	ret = ssdfmt_sum_walk(buf, version, count, entries_len, NULL, NULL);
	if (ret < 0 || !fn)
		return ret;
	return ssdfmt_sum_walk(buf, version, count, entries_len, fn, ctx);
}

/* ------------------------------------------------------------------------
 * Checkpoint: the file ssd/checkpoint.
 *
 *   off  size  field
 *     0     8  magic "KVTCKPT1"
 *     8     4  u32 version (SSD_FMT_VERSION)
 *    12     4  u32 CRC32C of bytes [0, 128), this field as zero
 *    16    16  store_id
 *    32     8  u64 seq: every record with seq <= this is reflected
 *    40     4  u32 slot_count
 *    44     4  u32 clear_count
 *    48     8  u64 entry_count
 *    56     8  u64 body_len: bytes after the header, before the padding
 *    64     4  u32 CRC32C of the body, bytes [128, 128 + body_len)
 *    68    60  reserved, 0
 *   128        slot table: slot_count x 16
 *                 +0  8  u64 generation
 *                 +8  8  u64 write_off (multiple of 512)
 *              clear table: clear_count x 16
 *                 +0  4  u32 ns_id (0: every namespace)
 *                 +4  4  u32 reserved, 0
 *                 +8  8  u64 seq (>= 1)
 *              entries: entry_count x (16 + a summary entry)
 *                 +0  4  u32 slot (< slot_count)
 *                 +4  4  u32 reserved, 0
 *                 +8  8  u64 generation (>= 1)
 *                +16     summary entry (32 + key padded to 8)
 *              zero up to the next multiple of 4096: the file's length
 */
#define SSD_CKPT_MAGIC "KVTCKPT1"

enum {
	CKPT_MAGIC = 0,
	CKPT_VERSION = 8,
	CKPT_CRC = 12,
	CKPT_STORE_ID = 16,
	CKPT_SEQ = 32,
	CKPT_SLOT_COUNT = 40,
	CKPT_CLEAR_COUNT = 44,
	CKPT_ENTRY_COUNT = 48,
	CKPT_BODY_LEN = 56,
	CKPT_BODY_CRC = 64,
	CKPT_RESERVED = 68,
	CKPT_HDR = 128,
	/* slot table entry */
	CSLOT_GENERATION = 0,
	CSLOT_WRITE_OFF = 8,
	CSLOT_LEN = 16,
	/* clear table entry */
	CCLR_NS_ID = 0,
	CCLR_RESERVED = 4,
	CCLR_SEQ = 8,
	CCLR_LEN = 16,
	/* entry, before its summary entry */
	CENT_SLOT = 0,
	CENT_RESERVED = 4,
	CENT_GENERATION = 8,
	CENT_FIXED = 16,
};
_Static_assert(sizeof(SSD_CKPT_MAGIC) - 1 == CKPT_VERSION - CKPT_MAGIC, "checkpoint magic is 8 bytes");
_Static_assert(CKPT_RESERVED + 60 == CKPT_HDR && CKPT_HDR == SSD_CKPT_HDR,
	       "checkpoint header is 128 bytes");
_Static_assert(CSLOT_WRITE_OFF + 8 == CSLOT_LEN && CCLR_SEQ + 8 == CCLR_LEN,
	       "slot and clear entries are 16 bytes");
_Static_assert(CENT_GENERATION + 8 == CENT_FIXED, "checkpoint entry prefix is 16 bytes");

static bool ssdfmt_add(size_t *acc, uint64_t v)
{
	if (v > SIZE_MAX - *acc)
		return false;
	*acc += (size_t)v;
	return true;
}

size_t ssd_ckpt_size(uint32_t slot_count, uint32_t clear_count, uint64_t entry_count,
		     uint64_t key_bytes)
{
	/* Each key's padding to 8 is counted at its worst, 7 bytes. */
	const uint64_t ent_max = CENT_FIXED + ENT_FIXED_V3 + 7; /* either version */
	size_t n = CKPT_HDR;

	if (!ssdfmt_add(&n, (uint64_t)slot_count * CSLOT_LEN) ||
	    !ssdfmt_add(&n, (uint64_t)clear_count * CCLR_LEN) ||
	    entry_count > UINT64_MAX / ent_max || !ssdfmt_add(&n, entry_count * ent_max) ||
	    !ssdfmt_add(&n, key_bytes) || !ssdfmt_add(&n, SSD_ALIGN - 1))
		return SIZE_MAX;
	return n & ~(size_t)(SSD_ALIGN - 1);
}

void ssd_ckpt_begin_version(struct ssd_ckpt_writer *w, uint8_t *buf, size_t cap,
			    uint32_t version)
{
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->cap = cap;
	w->off = CKPT_HDR;
	w->version = version;
}

void ssd_ckpt_begin(struct ssd_ckpt_writer *w, uint8_t *buf, size_t cap)
{
	ssd_ckpt_begin_version(w, buf, cap, SSD_FMT_VERSION);
}

static bool ssdfmt_ckpt_version_ok(uint32_t version)
{
	return version == SSD_FMT_VERSION || version == SSD_CKPT_VERSION_BATCH;
}

/* Room for n more bytes at w->off? */
static bool ssdfmt_room(const struct ssd_ckpt_writer *w, size_t n)
{
	return w->off <= w->cap && w->cap - w->off >= n;
}

int ssd_ckpt_put_slot(struct ssd_ckpt_writer *w, const struct ssd_ckpt_slot *s)
{
	uint8_t *p;

	if (w->clears || w->entries)
		return KVT_ESTATE;
	if (w->slots == UINT32_MAX || s->write_off % SSD_REC_ALIGN || s->generation > SSD_GEN_MAX ||
	    !ssdfmt_room(w, CSLOT_LEN))
		return KVT_EBADLEN;
	p = w->buf + w->off;
	le_put64(p + CSLOT_GENERATION, s->generation);
	le_put64(p + CSLOT_WRITE_OFF, s->write_off);
	w->off += CSLOT_LEN;
	w->slots++;
	return 0;
}

int ssd_ckpt_put_clear(struct ssd_ckpt_writer *w, const struct ssd_ckpt_clear *c)
{
	uint8_t *p;

	if (w->entries)
		return KVT_ESTATE;
	if (w->clears == UINT32_MAX || c->seq == 0 || !ssdfmt_room(w, CCLR_LEN))
		return KVT_EBADLEN;
	p = w->buf + w->off;
	le_put32(p + CCLR_NS_ID, c->ns_id);
	le_put32(p + CCLR_RESERVED, 0);
	le_put64(p + CCLR_SEQ, c->seq);
	w->off += CCLR_LEN;
	w->clears++;
	return 0;
}

int ssd_ckpt_put_entry(struct ssd_ckpt_writer *w, const struct ssd_ckpt_entry *e)
{
	uint8_t *p;

	/* Slots come first: an entry names one of them. */
	if (!ssdfmt_ent_ok(&e->e, w->version) || e->slot >= w->slots || e->generation == 0 ||
	    e->generation > SSD_GEN_MAX ||
	    !ssdfmt_room(w, CENT_FIXED + ssd_sum_entry_len(&e->e, w->version)))
		return KVT_EBADLEN;
	p = w->buf + w->off;
	le_put32(p + CENT_SLOT, e->slot);
	le_put32(p + CENT_RESERVED, 0);
	le_put64(p + CENT_GENERATION, e->generation);
	w->off += CENT_FIXED + ssdfmt_ent_put(p + CENT_FIXED, &e->e, w->version);
	w->entries++;
	return 0;
}

int64_t ssd_ckpt_finish(struct ssd_ckpt_writer *w, const struct ssd_ckpt_hdr *h)
{
	uint8_t *buf = w->buf;
	size_t body_len, total;

	if (h->slot_count != w->slots || h->clear_count != w->clears ||
	    h->entry_count != w->entries || w->off > w->cap || !ssdfmt_ckpt_version_ok(w->version))
		return KVT_EBADLEN;
	body_len = w->off - CKPT_HDR;
	total = (size_t)ssdfmt_align(w->off);
	if (total > w->cap)
		return KVT_EBADLEN;

	memset(buf, 0, CKPT_HDR);
	memset(buf + w->off, 0, total - w->off);
	memcpy(buf + CKPT_MAGIC, SSD_CKPT_MAGIC, 8);
	le_put32(buf + CKPT_VERSION, w->version);
	memcpy(buf + CKPT_STORE_ID, h->store_id, 16);
	le_put64(buf + CKPT_SEQ, h->seq);
	le_put32(buf + CKPT_SLOT_COUNT, h->slot_count);
	le_put32(buf + CKPT_CLEAR_COUNT, h->clear_count);
	le_put64(buf + CKPT_ENTRY_COUNT, h->entry_count);
	le_put64(buf + CKPT_BODY_LEN, body_len);
	le_put32(buf + CKPT_BODY_CRC, kvt_crc32c(0, buf + CKPT_HDR, body_len));
	le_put32(buf + CKPT_CRC, kvt_crc32c(0, buf, CKPT_HDR));
	return (int64_t)total;
}

/* One pass over a checkpoint body whose header checked out; cbs NULL validates. */
static int ssdfmt_ckpt_walk(const uint8_t *buf, const struct ssd_ckpt_hdr *h, uint64_t body_len,
			    const struct ssd_ckpt_cbs *cbs, void *ctx)
{
	const uint8_t *p = buf + CKPT_HDR;
	uint64_t off = 0;
	int ret;

	for (uint32_t i = 0; i < h->slot_count; i++, off += CSLOT_LEN) {
		struct ssd_ckpt_slot s;

		s.generation = le_get64(p + off + CSLOT_GENERATION);
		s.write_off = le_get64(p + off + CSLOT_WRITE_OFF);
		if (s.write_off % SSD_REC_ALIGN || s.generation > SSD_GEN_MAX)
			return KVT_ECORRUPT;
		if (cbs && cbs->slot && (ret = cbs->slot(ctx, i, &s)) < 0)
			return ret;
	}
	for (uint32_t i = 0; i < h->clear_count; i++, off += CCLR_LEN) {
		struct ssd_ckpt_clear c;

		c.ns_id = le_get32(p + off + CCLR_NS_ID);
		c.seq = le_get64(p + off + CCLR_SEQ);
		if (le_get32(p + off + CCLR_RESERVED) != 0 || c.seq == 0)
			return KVT_ECORRUPT;
		if (cbs && cbs->clear && (ret = cbs->clear(ctx, &c)) < 0)
			return ret;
	}
	for (uint64_t i = 0; i < h->entry_count; i++) {
		struct ssd_ckpt_entry e;
		int64_t len;

		if (body_len - off < CENT_FIXED)
			return KVT_ECORRUPT;
		memset(&e, 0, sizeof(e));
		e.slot = le_get32(p + off + CENT_SLOT);
		e.generation = le_get64(p + off + CENT_GENERATION);
		if (le_get32(p + off + CENT_RESERVED) != 0 || e.slot >= h->slot_count ||
		    e.generation == 0 || e.generation > SSD_GEN_MAX)
			return KVT_ECORRUPT;
		off += CENT_FIXED;
		len = ssdfmt_ent_get(p + off, body_len - off, &e.e, h->version);
		if (len < 0)
			return (int)len;
		off += (uint64_t)len;
		if (cbs && cbs->entry && (ret = cbs->entry(ctx, &e)) < 0)
			return ret;
	}
	return off == body_len ? 0 : KVT_ECORRUPT;
}

const char *ssd_ckpt_ours(const struct ssd_ckpt_hdr *h, const uint8_t *store_id,
			  uint32_t slot_count)
{
	if (store_id && memcmp(h->store_id, store_id, 16) != 0)
		return "from another store";
	if (h->slot_count != slot_count)
		return "from a store of another size (its slot count differs)";
	return NULL;
}

/* The fixed header's checks, shared by both decoders: the image is
 * file_len bytes, of which buf holds the first 128. */
static int ssdfmt_ckpt_hdr(const uint8_t *buf, uint64_t file_len, struct ssd_ckpt_hdr *t,
			   uint64_t *body_len)
{
	uint64_t tables;

	if (memcmp(buf + CKPT_MAGIC, SSD_CKPT_MAGIC, 8) != 0)
		return KVT_ECORRUPT;
	if (ssdfmt_crc_skip(buf, CKPT_HDR, CKPT_CRC) != le_get32(buf + CKPT_CRC))
		return KVT_ECORRUPT;
	if (!ssdfmt_ckpt_version_ok(le_get32(buf + CKPT_VERSION)))
		return KVT_EVERSION;
	if (!ssd_is_zero(buf + CKPT_RESERVED, CKPT_HDR - CKPT_RESERVED))
		return KVT_ECORRUPT;

	memset(t, 0, sizeof(*t));
	t->version = le_get32(buf + CKPT_VERSION);
	memcpy(t->store_id, buf + CKPT_STORE_ID, 16);
	t->seq = le_get64(buf + CKPT_SEQ);
	t->slot_count = le_get32(buf + CKPT_SLOT_COUNT);
	t->clear_count = le_get32(buf + CKPT_CLEAR_COUNT);
	t->entry_count = le_get64(buf + CKPT_ENTRY_COUNT);
	*body_len = le_get64(buf + CKPT_BODY_LEN);

	/* The image is exactly file_len bytes: header, body, padding. */
	if (file_len < CKPT_HDR || *body_len > file_len - CKPT_HDR ||
	    ssdfmt_align(CKPT_HDR + *body_len) != file_len)
		return KVT_ECORRUPT;
	/* Counts against the body, in u64 (each product is below 2^37). */
	tables = (uint64_t)t->slot_count * CSLOT_LEN + (uint64_t)t->clear_count * CCLR_LEN;
	if (tables > *body_len ||
	    t->entry_count > (*body_len - tables) / (CENT_FIXED + ENT_FIXED))
		return KVT_ECORRUPT;
	return 0;
}

int ssd_ckpt_hdr_decode(const uint8_t *buf, size_t buf_len, uint64_t file_len,
			struct ssd_ckpt_hdr *h)
{
	struct ssd_ckpt_hdr t;
	uint64_t body_len;
	int ret;

	memset(h, 0, sizeof(*h));
	if (buf_len < CKPT_HDR)
		return file_len < CKPT_HDR ? KVT_ECORRUPT : KVT_EBUFSMALL;
	ret = ssdfmt_ckpt_hdr(buf, file_len, &t, &body_len);
	if (ret == 0)
		*h = t;
	return ret;
}

int ssd_ckpt_decode(const uint8_t *buf, size_t len, struct ssd_ckpt_hdr *h,
		    const struct ssd_ckpt_cbs *cbs, void *ctx)
{
	struct ssd_ckpt_hdr t;
	uint64_t body_len;
	int ret;

	memset(h, 0, sizeof(*h));
	if (len < CKPT_HDR)
		return KVT_ECORRUPT;
	if ((ret = ssdfmt_ckpt_hdr(buf, len, &t, &body_len)) < 0)
		return ret;
	if (kvt_crc32c(0, buf + CKPT_HDR, body_len) != le_get32(buf + CKPT_BODY_CRC))
		return KVT_ECORRUPT;
	if (!ssd_is_zero(buf + CKPT_HDR + body_len, len - CKPT_HDR - body_len))
		return KVT_ECORRUPT;

	ret = ssdfmt_ckpt_walk(buf, &t, body_len, NULL, NULL);
	if (ret < 0)
		return ret;
	*h = t;
	if (!cbs)
		return 0;
	return ssdfmt_ckpt_walk(buf, &t, body_len, cbs, ctx);
}

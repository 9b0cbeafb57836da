/*
 * ssdfmt.h - the SSD tier's on-disk formats: segment headers, records,
 * segment summaries, checkpoints.  Pure encode/decode over byte buffers:
 * no I/O, no allocation, every length from disk bounded before use
 * (ssdfmt.c; byte-by-byte specification in doc/ssd-format.md).
 *
 * All integers are little-endian.  Segment headers, summaries and
 * checkpoints are in units of SSD_ALIGN (4096) bytes; records, and every
 * offset into a segment, in units of SSD_REC_ALIGN (512) bytes, the
 * logical block of most devices, so that they can still be read and
 * written with O_DIRECT while a small block does not pay a 4 KiB header
 * (format version 2; version 1 aligned records to 4096).
 *
 * A store directory holds ssd/seg-NNNNNN (fixed-size segment files, one per
 * slot) and ssd/checkpoint.  A segment is:
 *
 *   [segment header, 4096 B][record][record]...[summary][free space]
 *
 * A record is [record header, hdr_len B (multiple of 512)][value, padded
 * with zeros to a multiple of 512].  A summary (written when a segment is
 * sealed, at a multiple of 512, its length a multiple of 4096) lists every
 * record of the segment so recovery need not walk them.
 */
#ifndef KVT_SSDFMT_H
#define KVT_SSDFMT_H

#include <stddef.h>
#include <stdint.h>

#include "kvtier.h"

#define SSD_ALIGN 4096u
#define SSD_REC_ALIGN 512u
#define SSD_FMT_VERSION 2u
/* Record alignments a segment may use (doc/ssd-format.md "Record
 * alignment"): SSD_REC_ALIGN, or SSD_REC_ALIGN_4K for drives whose O_DIRECT
 * needs 4096-byte offsets (4Kn).  A segment at SSD_REC_ALIGN_4K has a
 * header of version SSD_SEG_VERSION_4K, which names its alignment; every
 * other structure stays at SSD_FMT_VERSION. */
#define SSD_REC_ALIGN_4K 4096u
#define SSD_SEG_VERSION_4K 3u
/* Format 3 (doc/ssd-format.md "Format 3: batch headers"): a segment that
 * may hold batches has a header of this version, which names its record
 * alignment (512 or 4096) at offset 20. */
#define SSD_SEG_VERSION_BATCH 4u

/* ------------------------------------------------------------------------
 * Segment header: the first 4096 bytes of every segment file.
 */
#define SSD_SEG_MAGIC "KVTSEG01" /* 8 bytes, no NUL */

/* The highest generation any header may name.  A store starting a
 * segment every microsecond reaches it in 146,000 years; a header naming
 * more was never written by kvtier, and taking it would wrap recovery's
 * next generation (one more than the highest seen) to 0, "never written".
 * Decoders refuse it as corrupt; the record and checkpoint encoders as a
 * bad length. */
#define SSD_GEN_MAX (UINT64_C(1) << 62)

struct ssd_seg_hdr {
	uint32_t version;      /* decode: the version found (also with KVT_EVERSION);
			        * encode: SSD_SEG_VERSION_BATCH for a segment of
			        * format 3, else ignored (set from rec_align) */
	uint32_t slot;         /* this file's slot number */
	uint32_t rec_align;    /* records' alignment: SSD_REC_ALIGN (version
			        * SSD_FMT_VERSION) or SSD_REC_ALIGN_4K (version
			        * SSD_SEG_VERSION_4K); encode: 0 reads as 512 */
	uint64_t generation;   /* bumped each time the slot is reused; 0: never written */
	uint64_t seg_size;     /* bytes, multiple of SSD_ALIGN */
	uint64_t created_ns;   /* CLOCK_REALTIME when the generation began */
	uint64_t summary_off;  /* byte offset of the summary, 0 while the segment is open */
	uint64_t summary_len;  /* bytes of the summary (multiple of SSD_ALIGN), 0 while open */
	uint8_t store_id[16];  /* random id of the store, so a foreign file is never read */
};

/* Encode into buf[SSD_ALIGN] (zero padding, CRC).  Always succeeds. */
void ssd_seg_hdr_encode(const struct ssd_seg_hdr *h, uint8_t *buf);

/* Whether recovery takes a decoded segment header h, read from slot's
 * file, as a segment of the store whose segments are seg_size bytes and
 * whose id is store_id (doc/ssd-format.md "Recovery" step 2): 0 if so,
 * else which SSD_SEG_* it is instead (recovery then takes the slot for
 * free).  seg_size 0 or store_id NULL: not known, not checked (fsck). */
#define SSD_SEG_UNUSED      1 /* generation 0: never written */
#define SSD_SEG_OTHER_SLOT  2 /* the header names another slot */
#define SSD_SEG_OTHER_SIZE  3 /* made with another segment size */
#define SSD_SEG_OTHER_STORE 4 /* another store's (store_id differs) */
int ssd_seg_hdr_ours(const struct ssd_seg_hdr *h, uint32_t slot, uint64_t seg_size,
		     const uint8_t *store_id);
/* Decode buf[SSD_ALIGN].  0, KVT_ECORRUPT (magic, CRC, fields), KVT_EVERSION
 * (an intact header of a version other than SSD_FMT_VERSION,
 * SSD_SEG_VERSION_4K and SSD_SEG_VERSION_BATCH: h->version says which). */
int ssd_seg_hdr_decode(const uint8_t *buf, struct ssd_seg_hdr *h);
/* Whether p[0, n) is all zero bytes (a zeroed header: a free slot, or one
 * over records -- ssd_recover.c "Headerless"). */
bool ssd_is_zero(const uint8_t *p, size_t n);

/* ------------------------------------------------------------------------
 * Records.
 */
enum ssd_rec_type {
	SSD_REC_PUT = 1,       /* a value: parts follow the header */
	SSD_REC_DELETE = 2,    /* tombstone for (ns, key): no value */
	SSD_REC_CLEAR_NS = 3,  /* every record of ns with a lower seq is gone */
	SSD_REC_CLEAR_ALL = 4, /* every record with a lower seq is gone */
};

#define SSD_REC_F_SEALED 0x1u /* PUT: the value is client-sealed ciphertext */

#define SSD_REC_FIXED 160u   /* bytes of the fixed part of a record header */
#define SSD_PART_ENTRY 16u   /* bytes per part-table entry */

struct ssd_part {
	uint64_t len;  /* bytes */
	uint32_t crc;  /* CRC32C of the part's bytes (kvt_crc32c) */
};

struct ssd_rec_hdr {
	uint32_t type;           /* enum ssd_rec_type */
	/* bytes from the record start to the value, multiple of SSD_REC_ALIGN */
	uint32_t hdr_len;
	uint32_t part_count;     /* PUT: 1..KVT_PARTS_MAX; others 0 */
	uint32_t ns_id;          /* store-local namespace id (stable: the registry is persisted) */
	uint64_t value_len;      /* PUT: sum of part lengths; others 0 */
	uint64_t seq;            /* store-wide sequence number, increasing */
	uint64_t generation;     /* generation of the segment it was written into */
	uint8_t ns_digest[32];   /* the namespace's digest: records describe themselves */
	struct kvt_key key;      /* PUT, DELETE: the key; CLEAR_*: len 0 */
	uint32_t flags;          /* SSD_REC_F_* (PUT only); other bits 0 */
};

#define SSD_REC_MAGIC "KVR1" /* 4 bytes, no NUL: a record header's first */

/* Header bytes for a record with this many parts in a segment whose
 * records are align-aligned (SSD_REC_ALIGN: 512 up to 22 parts;
 * SSD_REC_ALIGN_4K: 4096 up to 246); 0 if part_count > KVT_PARTS_MAX or
 * align is neither. */
uint32_t ssd_rec_hdr_len(uint32_t part_count, uint32_t align);
/* Total bytes on disk of a record: hdr_len + value rounded up to align;
 * 0 if part_count > KVT_PARTS_MAX, value_len > KVT_VALUE_MAX or align is
 * neither alignment. */
uint64_t ssd_rec_len(uint32_t part_count, uint64_t value_len, uint32_t align);
/* The alignment a record of rec_len bytes was laid out at: SSD_REC_ALIGN,
 * SSD_REC_ALIGN_4K, or 0 if rec_len fits neither.  Where both give the
 * same length the two layouts are the same bytes (SSD_REC_ALIGN). */
uint32_t ssd_rec_align_of(uint32_t part_count, uint64_t value_len, uint64_t rec_len);

/*
 * Encode h and its part table into buf[ssd_rec_hdr_len(h->part_count,
 * align)] (zero padding, header CRC over everything).  h->hdr_len is
 * ignored and written as computed.  Returns the header length, or
 * KVT_EBADLEN if buf_len is too small, align is not a record alignment or
 * the counts are out of range.
 */
int ssd_rec_hdr_encode(const struct ssd_rec_hdr *h, const struct ssd_part *parts,
		       uint32_t align, uint8_t *buf, size_t buf_len);

/*
 * Decode a record header of a segment whose records are align-aligned
 * from buf (buf_len bytes available, at least SSD_REC_ALIGN; fewer gives
 * KVT_EBUFSMALL with h->hdr_len SSD_REC_ALIGN).  Checks magic, version,
 * CRC, type, lengths (hdr_len == ssd_rec_hdr_len(part_count, align)) and
 * that the whole header fits in buf_len (if hdr_len > buf_len it returns
 * KVT_EBUFSMALL and sets h->hdr_len so the caller can read more).  parts
 * may be NULL to skip the table; otherwise it must hold max_parts entries
 * (KVT_ERANGE if fewer than h->part_count). Returns 0, KVT_ECORRUPT,
 * KVT_EVERSION, KVT_EBUFSMALL, KVT_ERANGE.
 */
int ssd_rec_hdr_decode(const uint8_t *buf, size_t buf_len, uint32_t align,
		       struct ssd_rec_hdr *h, struct ssd_part *parts, uint32_t max_parts);
/*
 * ssd_rec_hdr_decode with every one of its checks (over the whole part
 * table), keeping of the table only part `part`: *pt its length and CRC,
 * *part_off its offset in the value (the sum of the lengths before it),
 * so that a read of one part holds no decoded table (16 KiB for
 * KVT_PARTS_MAX parts).  KVT_ERANGE (h decoded) if part >= h->part_count;
 * otherwise as ssd_rec_hdr_decode.  *pt and *part_off are 0 unless it
 * returns 0.
 */
int ssd_rec_hdr_decode_part(const uint8_t *buf, size_t buf_len, uint32_t align,
			    struct ssd_rec_hdr *h, uint32_t part, struct ssd_part *pt,
			    uint64_t *part_off);

/* ------------------------------------------------------------------------
 * Batches (format 3, doc/ssd-format.md "Format 3: batch headers"): one
 * header naming up to SSD_BATCH_MAX single-part PUTs, then their values,
 * each starting at the segment's record alignment and zero-padded to it.
 *
 *   [batch header, hdr_len B: magic "KVB1", version, hdr_len, CRC,
 *    generation, counts, ns table, entries][value 0][value 1]...
 *
 * A batch is read by its values alone: an entry's value_crc binds the
 * value to its identity (ssd_value_crc), so a read that finds another
 * block's bytes at the offset fails like a damaged one.  Pure functions,
 * as the rest of this file.
 */
#define SSD_BATCH_MAGIC "KVB1"  /* 4 bytes, no NUL */
#define SSD_BATCH_VERSION 3u
#define SSD_BATCH_MAX 32u        /* entries in one batch */
#define SSD_BATCH_HDR_MAX 4096u  /* hdr_len's bound, at either alignment */
#define SSD_BATCH_FIXED 64u      /* bytes before the ns table */
#define SSD_BATCH_NS_LEN 40u     /* bytes per ns-table entry */
#define SSD_BATCH_ENT_FIXED 32u  /* bytes of an entry before its key */
/* The largest value a batch holds: larger ones go down as records. */
#define SSD_BATCH_VALUE_MAX ((uint64_t)256 * 1024 - 1)

struct ssd_batch_ns {
	uint32_t ns_id;          /* store-local id, >= 1 */
	uint8_t digest[32];      /* the namespace's digest */
};

struct ssd_batch_ent {
	uint32_t ns_index;       /* into the batch's ns table */
	uint32_t flags;          /* SSD_REC_F_SEALED or 0 */
	uint32_t value_crc;      /* ssd_value_crc of the value and the identity */
	uint64_t value_len;      /* 1..SSD_BATCH_VALUE_MAX */
	uint64_t seq;            /* >= 1 */
	uint32_t value_off_512;  /* the value's offset in the segment / 512 */
	struct kvt_key key;      /* 1..KVT_KEY_MAX bytes */
};

struct ssd_batch {
	uint32_t hdr_len;        /* bytes, multiple of the record alignment */
	uint32_t count;          /* entries, 1..SSD_BATCH_MAX */
	uint32_t ns_count;       /* namespaces named, 1..count */
	uint32_t values_len;     /* sum of the values rounded up to the alignment */
	uint64_t generation;     /* the segment's */
	struct ssd_batch_ns ns[SSD_BATCH_MAX];
	struct ssd_batch_ent ent[SSD_BATCH_MAX];
};

/* The most bytes of values (each padded to the records' alignment) the
 * writer puts in one batch in segments of seg_size bytes: under
 * SSD_BATCH_VALUES_LIM, so that header and values go as one vectored
 * request (lib/tier/ssd/ssd.c, whose SSD_SPLIT_MIN splits larger ones),
 * and at most a quarter of a segment.  Not a bound of the format (a reader
 * takes any values_len): the writer's cut, kept here with the format so
 * that what sizes its writes (kvtier bench ssd's fio reference) reads the
 * same rule. */
#define SSD_BATCH_VALUES_LIM (UINT64_C(1) << 20)
uint64_t ssd_batch_values_max(uint64_t seg_size);
/* Bytes one entry of key_len key bytes takes in a batch header. */
size_t ssd_batch_ent_len(uint32_t key_len);
/* The header length of a batch of count entries over ns_count namespaces
 * whose keys total key_pad bytes rounded up to 8 each, at align; 0 if it
 * exceeds SSD_BATCH_HDR_MAX (the writer cuts a batch before that) or
 * align is not a record alignment. */
uint32_t ssd_batch_hdr_len(uint32_t count, uint32_t ns_count, uint64_t key_pad, uint32_t align);
/*
 * Encode b's header for a batch at byte offset off of a segment whose
 * records are align-aligned into buf (buf_len bytes).  b->hdr_len,
 * b->values_len and every entry's value_off_512 are computed here and
 * written back into *b.  The ns table must be canonical: distinct ns_ids,
 * in the order the entries first name them, each named.  Returns hdr_len
 * or KVT_EBADLEN (buf too small, a field out of range, the header past
 * SSD_BATCH_HDR_MAX, an offset past 2^32 - 1 units of 512).
 */
int ssd_batch_encode(struct ssd_batch *b, uint64_t off, uint32_t align, uint8_t *buf,
		     size_t buf_len);
/*
 * Decode the batch header at byte offset off of a segment whose records
 * are align-aligned, from buf (buf_len bytes available).  The
 * KVT_EBUFSMALL protocol of record headers: fewer than SSD_REC_ALIGN bytes
 * give KVT_EBUFSMALL with b->hdr_len SSD_REC_ALIGN; a bounded hdr_len
 * (<= SSD_BATCH_HDR_MAX, checked before the CRC) past buf_len gives
 * KVT_EBUFSMALL with b->hdr_len set; nothing past buf_len is read.  Then
 * the CRC, the version, every field and entry (value offsets consistent,
 * the ns table canonical), the padding zero.  The values are not read.
 * Returns 0, KVT_ECORRUPT, KVT_EVERSION or KVT_EBUFSMALL.
 */
int ssd_batch_decode(const uint8_t *buf, size_t buf_len, uint64_t off, uint32_t align,
		     struct ssd_batch *b);
/* One step of recovery's walk of a format-3 segment at a batch header
 * that ssd_batch_decode (result d) decoded into b, at byte off of a
 * segment of generation gen and seg_size bytes: NULL if the walk takes
 * it (*len: header and values, where the next structure starts), else
 * why the walk stops there. */
const char *ssd_walk_batch(int d, const struct ssd_batch *b, uint64_t gen, uint64_t off,
			   uint64_t seg_size, uint64_t *len);
struct ssd_sum_entry; /* below */
/* Batch entry i of b, at align, as its summary (and checkpoint) entry of
 * version SSD_SUM_VERSION_BATCH: a batched PUT naming its value alone. */
void ssd_batch_sum_entry(const struct ssd_batch *b, uint32_t i, uint32_t align,
			 struct ssd_sum_entry *e);

/* One structure of a segment, as recovery's walk of an open segment and
 * fsck read it (doc/ssd-format.md "Recovery of an open segment"): a
 * record (SSD_STRUCT_REC, in rec) or, in a segment of format 3, a batch
 * (SSD_STRUCT_BATCH, in batch). */
#define SSD_STRUCT_REC 1u
#define SSD_STRUCT_BATCH 2u
struct ssd_struct {
	uint32_t kind;           /* SSD_STRUCT_*, 0 unless decoded */
	uint32_t hdr_len;        /* decoded, or KVT_EBUFSMALL: the bytes to read */
	struct ssd_rec_hdr rec;
	struct ssd_batch batch;
};
/* Decode the structure at byte off of a segment whose records are
 * align-aligned from buf (buf_len bytes): by its magic, a batch header
 * (only if batches: the segment is of format 3) or a record header, with
 * their decoders' checks and KVT_EBUFSMALL protocol (st->hdr_len: read
 * that many; at most 20480).  Returns 0, KVT_ECORRUPT, KVT_EVERSION,
 * KVT_EBUFSMALL. */
int ssd_struct_decode(const uint8_t *buf, size_t buf_len, uint64_t off, uint32_t align,
		      bool batches, struct ssd_struct *st);
/* The walk's step over what ssd_struct_decode (result d) decoded:
 * ssd_walk_rec or ssd_walk_batch by its kind.  NULL if the walk takes it
 * (*len: its bytes, header and values), else why the walk stops. */
const char *ssd_walk_struct(int d, const struct ssd_struct *st, uint64_t gen, uint64_t off,
			    uint64_t seg_size, uint32_t align, uint64_t *len);

/*
 * Tombstones twice (doc/ssd-format.md "Tombstones twice").  A tombstone
 * record (DELETE, CLEAR_NS, CLEAR_ALL) is written twice, back to back in
 * one write: the record, then its twin -- the same bytes at the next
 * multiple of the alignment, which no summary names.  A walk takes the
 * twin as nothing new (ssd_rec_is_twin), and where a structure at off
 * stops it, ssd_walk_twin says whether it goes on at off + align instead:
 * the damaged structure was a tombstone's first copy, or its twin.
 */
/* r, at the offset where prev (a record the walk took) ends, is prev's
 * twin: a tombstone record identical to it (type, namespace, key, seq,
 * generation). */
bool ssd_rec_is_twin(const struct ssd_rec_hdr *prev, const struct ssd_rec_hdr *r);
/* A walk of generation gen stopped at off - align (by ssd_walk_struct);
 * ssd_struct_decode returned d into next at off.  True if the walk goes
 * on at off (and takes next): next is a structure of the generation the
 * walk takes and either lone (the walk's last structure was a tombstone
 * that ended at off - align without its twin: what stopped it was the
 * twin), next's (first) seq above last_seq, the highest the walk took, or
 * a tombstone record whose seq is last_seq + 1 exactly (what stopped the
 * walk was its first copy; last_seq 0, none taken: never). */
bool ssd_walk_twin(bool lone, uint64_t last_seq, int d, const struct ssd_struct *next,
		   uint64_t gen, uint64_t off, uint64_t seg_size, uint32_t align);

/*
 * The walk of a segment by structure, from offset 4096 (the first write
 * of every generation) up to limit, as recovery walks one a crash left
 * open, or whose summary it does not use, and a headerless slot
 * (ssd_hl_walk): each structure ssd_walk_struct takes goes to take, but a
 * tombstone's twin (ssd_rec_is_twin: nothing new); where a structure
 * stops it, it goes on one alignment unit further when ssd_walk_twin says
 * so (a damaged copy of a tombstone passed over, counted in twins_used).
 * read: decode the structure at off of a segment laid out at align,
 * reading at most up to limit, into st; returns ssd_struct_decode's
 * result, KVT_ECORRUPT where the bytes cannot be read (the walk stops
 * there), or an error of the system (-ENOMEM, an errno), which ends the
 * walk with it.  take(tctx, st, off, len): the structure taken at off, len
 * bytes; < 0 ends the walk with it.  Returns 0 or that error; end: where
 * the walk ended (off of the structure that stopped it).
 */
typedef int (*ssd_struct_read_fn)(void *ctx, uint64_t off, uint64_t limit, uint32_t align,
				  struct ssd_struct *st);
struct ssd_walk {
	ssd_struct_read_fn read;
	void *ctx;
	int (*take)(void *tctx, const struct ssd_struct *st, uint64_t off, uint64_t len);
	void *tctx;
	uint64_t gen, limit;
	uint32_t align;
	uint64_t end;        /* out */
	uint64_t twins_used; /* out: added to */
};
int ssd_walk(struct ssd_walk *w, struct ssd_struct *st);

/*
 * Headerless slots (doc/ssd-format.md "Recovery" step 2).  A slot of the
 * store whose segment header is zero or fails its checks is free, but the
 * tombstones among its records are applied: recovery (ssd_recover.c)
 * walks it for them, and fsck (ssd_fsck.c) counts what recovery will
 * apply, through these -- one probe, one walk, one filter -- each reading
 * the file its own way.  read: as ssd_walk's (a record header, or a batch
 * header: the walk takes format 3's too); an error of the system ends the
 * probe or walk with it.
 */
struct ssd_hl {
	ssd_struct_read_fn read;
	void *ctx;
	uint64_t limit;      /* the store's segment size, or the file's size if less */
	uint64_t gen;        /* ssd_hl_probe: the generation walked under, 0 none */
	uint32_t align;      /* ssd_hl_probe: its record alignment */
	uint64_t twins_used; /* ssd_hl_walk: damaged tombstone copies passed over */
};
/* The structure at offset 4096 (the first write of every generation,
 * never a client's bytes), at SSD_REC_ALIGN and then SSD_REC_ALIGN_4K,
 * taken as a walk under its own generation takes it (ssd_walk_struct):
 * sets gen and align.  1 if found, 0 if none (nothing written there, or
 * damaged too), or read's error. */
int ssd_hl_probe(struct ssd_hl *w, struct ssd_struct *st);
/* Whether the walk is skipped: the checkpoint recovery uses (have_ckpt)
 * names the slot (slot_in_ckpt) free (ck_slot_gen 0), and gen is at most
 * the highest generation it names (ck_max_gen) -- the segment ended
 * before the checkpoint, which reflects all its records. */
bool ssd_hl_reflected(bool have_ckpt, bool slot_in_ckpt, uint64_t ck_slot_gen,
		      uint64_t ck_max_gen, uint64_t gen);
/* ssd_walk under the probe's generation and alignment, up to limit;
 * tomb(tctx, h) for every tombstone record (DELETE, CLEAR_NS, CLEAR_ALL)
 * taken.  0, or the first error of read or tomb. */
int ssd_hl_walk(struct ssd_hl *w, struct ssd_struct *st,
		int (*tomb)(void *tctx, const struct ssd_rec_hdr *h), void *tctx);
/* Whether recovery applies tombstone h of such a walk: newer than the
 * checkpoint it uses (ck_seq; 0 if none) and, but for a CLEAR_ALL, of a
 * namespace registered under h's digest (reg_digest: the registry's
 * digest of h->ns_id, NULL if the id is not registered). */
bool ssd_hl_applies(const struct ssd_rec_hdr *h, uint64_t ck_seq, const uint8_t *reg_digest);

/* The check value of a batched value (doc/ssd-format.md "Reads"):
 * CRC32C of the value (value_crc32c: kvt_crc32c(0, value, len)),
 * continued over ns_id (u32), key_len (u8), the key bytes and seq (u64),
 * little-endian, so that the same bytes under another identity fail. */
uint32_t ssd_value_crc(uint32_t value_crc32c, uint32_t ns_id, const struct kvt_key *key,
		       uint64_t seq);

/* ------------------------------------------------------------------------
 * Segment summary: every record of a sealed segment, in write order.
 *
 *   [summary header 64 B: magic "KVTSUM01", version, count, generation,
 *    byte length, CRC32C of the entries, CRC32C of the header]
 *   [entries, each 32 B + key bytes padded to 8]
 *   [zero padding to SSD_ALIGN]
 */
struct ssd_sum_entry {
	uint32_t type;        /* enum ssd_rec_type */
	uint32_t ns_id;
	uint32_t off_512;     /* record offset in the segment, in SSD_REC_ALIGN units
			       * (SSD_ENT_F_BATCHED: the value's) */
	uint32_t len_512;     /* record length, in SSD_REC_ALIGN units: the
			       * record's at SSD_REC_ALIGN or SSD_REC_ALIGN_4K
			       * (SSD_ENT_F_BATCHED: the value's, padded) */
	uint64_t seq;
	uint64_t value_len;
	uint16_t part_count;  /* PUT */
	struct kvt_key key;
	/* Version SSD_SUM_VERSION_BATCH only (0 in version 2): */
	uint32_t flags;       /* SSD_ENT_F_* */
	uint32_t value_crc;   /* SSD_ENT_F_BATCHED: the batch entry's value_crc; else 0 */
};

/* Summary and checkpoint entries of format 3 (doc/ssd-format.md "Format 3:
 * batch headers"): version SSD_SUM_VERSION_BATCH of the summary and
 * SSD_CKPT_VERSION_BATCH of the checkpoint hold 40-byte entries, the
 * version-2 fields then value_crc and flags.  A batched entry names a
 * value of a batch: a single-part PUT of at most SSD_BATCH_VALUE_MAX
 * bytes, off_512/len_512 the value alone (padded to the segment's
 * alignment). */
#define SSD_SUM_VERSION_BATCH 3u
#define SSD_CKPT_VERSION_BATCH 3u
#define SSD_ENT_F_BATCHED 0x1u /* the entry names a batched value */
#define SSD_ENT_F_SEALED 0x2u  /* batched only: the value is client-sealed */

/* Whether a summary entry can describe a record of a segment whose
 * records are align-aligned and whose summary starts at sum_off: NULL if
 * it is laid out at align (its length ssd_rec_len's; a batched entry's,
 * its value padded to align) and ends at or before sum_off, else why not.
 * batches: the segment is of format 3; a batched entry of any other is
 * refused.  Recovery and fsck both judge a summary by it before they use
 * any of its entries (doc/ssd-format.md). */
const char *ssd_sum_entry_bound(const struct ssd_sum_entry *e, uint32_t align, uint64_t sum_off,
				bool batches);
/* One step of recovery's walk of a segment's records (doc/ssd-format.md
 * "Recovery" step 4), at byte off of a segment of generation gen and
 * seg_size bytes whose records are align-aligned, where
 * ssd_rec_hdr_decode returned d into h: NULL if the walk takes the record
 * (*rec_len: its length; the walk goes on after it), else why the walk
 * stops there -- where the segment's writes ended, as recovery reads it.
 * Recovery and fsck both walk by it. */
const char *ssd_walk_rec(int d, const struct ssd_rec_hdr *h, uint64_t gen, uint64_t off,
			 uint64_t seg_size, uint32_t align, uint64_t *rec_len);
/* Bytes one entry takes in a summary of this version (SSD_FMT_VERSION or
 * SSD_SUM_VERSION_BATCH; any other: version 2's). */
size_t ssd_sum_entry_len(const struct ssd_sum_entry *e, uint32_t version);
/* Encode a summary of n entries of this version (SSD_FMT_VERSION: no
 * entry may have flags or a value_crc; SSD_SUM_VERSION_BATCH) into buf
 * (zero padded to SSD_ALIGN).  Returns its length (multiple of SSD_ALIGN)
 * or KVT_EBADLEN (buf too small, another version, an entry out of range,
 * or record offsets not rising). */
int64_t ssd_sum_encode(uint32_t version, uint64_t generation, const struct ssd_sum_entry *e,
		       size_t n, uint8_t *buf, size_t buf_len);
/*
 * Decode (either version: the entries say which by their flags and
 * value_crc, 0 in version 2): calls fn (may be NULL) for each entry in
 * order, only once the whole summary has been checked.  buf_len must be the summary's exact
 * length (summary_len in the segment header).  Returns the entry count,
 * KVT_ECORRUPT, KVT_EVERSION, or fn's negative return.  Checks the
 * generation matches.  No allocation.
 */
typedef int (*ssd_sum_fn)(void *ctx, const struct ssd_sum_entry *e);
int64_t ssd_sum_decode(const uint8_t *buf, size_t buf_len, uint64_t generation,
		       ssd_sum_fn fn, void *ctx);

/* ------------------------------------------------------------------------
 * Checkpoint file (ssd/checkpoint): the index at one moment, so a restart
 * scans only what was written after it.
 *
 *   [header 128 B: magic "KVTCKPT1", version, store_id, seq (every record
 *    with seq <= this is reflected), slot_count, entry_count, clear_count,
 *    lengths, CRC32C of the body, CRC32C of the header]
 *   [slot table: slot_count x { u64 generation, u64 write_off }]
 *   [clear table: clear_count x { u32 ns_id (0 = all), u32 pad, u64 seq }]
 *   [entries: entry_count x checkpoint entries (as summary entries plus
 *    u32 slot, u32 pad, u64 generation)]
 */
struct ssd_ckpt_hdr {
	uint32_t version;     /* decode: SSD_FMT_VERSION or SSD_CKPT_VERSION_BATCH */
	uint8_t store_id[16];
	uint64_t seq;
	uint32_t slot_count;
	uint64_t entry_count;
	uint32_t clear_count;
};

struct ssd_ckpt_slot {
	uint64_t generation; /* the slot's generation when the checkpoint was taken */
	uint64_t write_off;  /* bytes written into it then (open segment), or its seal point */
};

struct ssd_ckpt_clear {
	uint32_t ns_id;      /* 0: clear of every namespace */
	uint64_t seq;
};

struct ssd_ckpt_entry {
	struct ssd_sum_entry e;
	uint32_t slot;
	uint64_t generation;
};

/*
 * Streaming encoder: the caller provides the whole output buffer (size from
 * ssd_ckpt_size) and fills it in order.  ssd_ckpt_finish writes the header
 * and the CRCs.  No allocation.
 *
 * ssd_ckpt_size is an upper bound, a multiple of SSD_ALIGN (key_bytes: the
 * sum of the entries' key lengths); SIZE_MAX if it does not fit a size_t.
 */
size_t ssd_ckpt_size(uint32_t slot_count, uint32_t clear_count, uint64_t entry_count,
		     uint64_t key_bytes);
struct ssd_ckpt_writer {
	uint8_t *buf;
	size_t cap, off;
	uint64_t entries;
	uint32_t slots, clears;
	uint32_t version;    /* of the checkpoint, so of its entries */
};
/*
 * Slots, then clears, then entries: each put returns 0, KVT_ESTATE (out of
 * that order), or KVT_EBADLEN (no room; a field out of range; an entry
 * naming a slot not yet put).
 */
void ssd_ckpt_begin(struct ssd_ckpt_writer *w, uint8_t *buf, size_t cap);
/* ssd_ckpt_begin for a checkpoint of this version: SSD_FMT_VERSION (what
 * ssd_ckpt_begin writes) or SSD_CKPT_VERSION_BATCH, whose entries may be
 * batched (any other version: every put fails with KVT_EBADLEN). */
void ssd_ckpt_begin_version(struct ssd_ckpt_writer *w, uint8_t *buf, size_t cap,
			    uint32_t version);
int ssd_ckpt_put_slot(struct ssd_ckpt_writer *w, const struct ssd_ckpt_slot *s);
int ssd_ckpt_put_clear(struct ssd_ckpt_writer *w, const struct ssd_ckpt_clear *c);
int ssd_ckpt_put_entry(struct ssd_ckpt_writer *w, const struct ssd_ckpt_entry *e);
/* Returns the total length written (zero padded to SSD_ALIGN), or
 * KVT_EBADLEN (counts in *h differ from what was put, or no room). */
int64_t ssd_ckpt_finish(struct ssd_ckpt_writer *w, const struct ssd_ckpt_hdr *h);

/*
 * Decode a checkpoint image (len: the file's exact length): header into
 * *h, then callbacks in file order, only once the whole image has been
 * checked.  cbs and any callback may be NULL.  Returns 0, KVT_ECORRUPT,
 * KVT_EVERSION, or a callback's negative return.  No allocation.
 */
struct ssd_ckpt_cbs {
	int (*slot)(void *ctx, uint32_t idx, const struct ssd_ckpt_slot *s);
	int (*clear)(void *ctx, const struct ssd_ckpt_clear *c);
	int (*entry)(void *ctx, const struct ssd_ckpt_entry *e);
};
int ssd_ckpt_decode(const uint8_t *buf, size_t len, struct ssd_ckpt_hdr *h,
		    const struct ssd_ckpt_cbs *cbs, void *ctx);
/*
 * Decode and check only a checkpoint's fixed header: buf holds its first
 * buf_len bytes (SSD_CKPT_HDR suffice), file_len is the file's size.
 * Checks what ssd_ckpt_decode checks of the header -- magic, header CRC,
 * version, reserved bytes zero, the image exactly
 * roundup(128 + body_len, 4096) = file_len bytes, the counts fitting
 * body_len -- and nothing of the body (its CRC, the tables, the
 * entries), which it does not read.  So a header that decodes holds the
 * values its writer wrote (slot_count, store_id, seq), but the
 * checkpoint may still be refused whole by ssd_ckpt_decode (a damaged
 * body): what it says is a hint, which the store's own open verifies
 * (doc/ssd-format.md "Checkpoint").  Returns 0, KVT_ECORRUPT,
 * KVT_EVERSION, or KVT_EBUFSMALL (buf_len < SSD_CKPT_HDR while the file
 * is at least that long: read SSD_CKPT_HDR bytes).  No allocation.
 */
#define SSD_CKPT_HDR 128u
int ssd_ckpt_hdr_decode(const uint8_t *buf, size_t buf_len, uint64_t file_len,
			struct ssd_ckpt_hdr *h);
/* Whether recovery uses a checkpoint whose header h decoded, for a store
 * of slot_count slots (ssd.capacity / ssd.segment) and id store_id
 * (doc/ssd-format.md "Recovery" step 1): NULL if so, else why it ignores
 * it and scans every segment instead.  store_id NULL: not known. */
const char *ssd_ckpt_ours(const struct ssd_ckpt_hdr *h, const uint8_t *store_id,
			  uint32_t slot_count);

#endif

/*
 * ssd_fsck.c - kvt_store_fsck: an offline check of a store directory's SSD
 * tier (doc/ssd-format.md), for "kvtier fsck".
 *
 * Owns nothing beyond one call: it takes the directory's LOCK (shared,
 * non-blocking, so a store open in another process is refused, not read
 * half-written), reads the namespace registry, every segment, and the
 * checkpoint with plain preads, and reports what it finds through the
 * caller's callbacks.  It never writes.  No store handle exists here, so
 * it allocates with malloc, not through a store's kvt_mem.
 *
 * What it checks, per segment: the segment header; every record of the
 * current generation (through the summary in a sealed segment; in an open
 * one walked from offset 4096 as recovery walks it, below): header CRC
 * and fields, each part's CRC32C over the value bytes, and that the
 * namespace id is in the registry with the same digest (otherwise the
 * record is an orphan).  Then the checkpoint: store id, slot count, and
 * that every entry of a generation still on disk names a record that is
 * there (same offset, type, namespace, key and seq).
 *
 * An open segment's records end where recovery's walk stops: at the first
 * block that is not a sound header of the segment's generation -- zeros,
 * a header of an older generation, or, in a slot reused in place
 * (ssd.reuse), the old records' leftover value bytes.  Those are not
 * damage.  What fsck can hold against the segment is the checkpoint's
 * write point for that generation (every write before it was synced
 * before the checkpoint was taken): a walk that stops short of it has hit
 * damage.  Past it, a header that fails to decode looks like a write a
 * crash tore; if a sound header of the generation follows it (a record's,
 * or in a segment of format 3 a batch's: next_sound_hdr), recovery will
 * not find those records, which is said as a warning.  Where the walk
 * stops is recovery's own predicate (ssd_walk_rec, lib/fmt/ssdfmt.c).  A
 * record whose header is sound but whose value is not all there (a part
 * fails its CRC, or the file ends inside it) at or past that write point,
 * in any segment, is likewise a write a crash cut short: recovery's walk
 * leaves it out of the index and of the summary it seals the segment with
 * (or, cut by the file's end, stops before it): a miss, so it is a
 * warning; before the write point it is damage.  (In a segment sealed
 * before the crash its summary names it, and a later checkpoint's write
 * point covers it: only a power loss or damage leaves such a value.)
 *
 * The files are judged by the store's shape as recovery will judge them
 * (store_shape): its segment size (ssd.segment: a segment of another
 * size is a free slot to recovery, not read) and slot count (ssd.capacity
 * / ssd.segment: a checkpoint of another slot count is ignored, so none
 * of its write points holds; a slot beyond the count is not read), by
 * recovery's predicates (ssd_seg_hdr_ours, ssd_ckpt_ours).  The caller
 * may give both (kvt_fsck's ssd_capacity and ssd_segment); otherwise the
 * segment size is that of the segments the checkpoint names, and the
 * checkpoint is taken as recovery's last run left it.
 * The store id is ssd/id's, read as the store's open reads it
 * (ssd_id_read): a segment or checkpoint of another id is damage, which
 * recovery frees or ignores; without ssd/id the open makes a new id and
 * no file is the store's, so none is read.
 * Files in ssd/ that are not segments or checkpoints are reported as
 * strays (a warning, not damage).
 *
 * It also works out which blocks are live (the newest PUT of each key
 * with no later DELETE or CLEAR), per namespace, for "kvtier ls".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvt_int.h"
#include "ssd.h"
#include "ssdfmt.h"

#define FSCK_CHUNK (1u << 20)
#define FSCK_HDR_MAX 20480u /* the largest record header (doc/ssd-format.md) */

struct fsck_rec {
	uint32_t slot, off_512;
	uint32_t type, ns;
	uint64_t seq, value_len;
	struct kvt_key key;
	bool bad; /* a part failed its CRC: recovery skips it, never live */
};

struct fsck_ns {
	uint32_t id;
	uint8_t digest[32];
	char *canon;
	uint64_t blocks, bytes;
};

struct fsck {
	struct kvt_fsck *f;
	int dfd;                  /* ssd/ */
	uint8_t store_id[16];     /* ssd/id's, as the store's open reads it */
	bool have_id;             /* false: the open will make a new id */
	struct fsck_rec *recs;
	size_t n, cap;
	struct fsck_ns *ns;
	uint32_t ns_count;
	uint64_t *gen;            /* per slot: generation on disk, 0 none */
	uint32_t slots;
	uint64_t clear_all;       /* highest CLEAR_ALL seq */
	uint64_t *clear_ns;       /* per namespace id (ns_count + 1) */
	uint8_t *buf;             /* FSCK_CHUNK */
	uint8_t *hbuf;            /* FSCK_HDR_MAX: a header past a walk's end */
	char why[96];             /* why an open segment's walk stopped */
	/* The structure check_record or check_batch took last: a record's
	 * header (last_is_rec), and the highest seq it holds. */
	struct ssd_rec_hdr last_rec;
	bool last_is_rec;
	uint64_t last_seq;
	uint64_t done, total;     /* progress, bytes */
	/* The checkpoint, read before the segments: its image (ck_len bytes,
	 * NULL if there is none), whether its header decoded, and per slot
	 * the generation and write point it recorded. */
	uint8_t *ck;
	size_t ck_len;
	bool ck_ok;
	struct ssd_ckpt_hdr ck_hdr;
	uint64_t *ck_gen, *ck_off;
	uint64_t ck_max_gen;      /* the highest generation its slot table names */
	/* The store's shape as recovery will judge the files (0: not known):
	 * its segment size (ssd.segment; else that of the segments the
	 * checkpoint names) and slot count (ssd.capacity / ssd.segment), and
	 * why recovery will ignore the checkpoint (NULL: it uses it). */
	uint64_t seg_size;
	uint32_t store_slots;
	const char *ck_ignored;
};

static void fsck_say(struct fsck *c, int damage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fsck_say(struct fsck *c, int damage, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (damage == KVT_FSCK_DAMAGE)
		c->f->damaged++;
	else if (damage == KVT_FSCK_ORPHAN)
		c->f->orphans++;
	else
		c->f->warnings++;
	if (!c->f->problem)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->f->problem(c->f->ctx, damage, msg);
}

static void fsck_progress(struct fsck *c, uint64_t add)
{
	c->done += add;
	if (c->f->progress)
		c->f->progress(c->f->ctx, c->done, c->total);
}

static void key_hex(const struct kvt_key *k, char *out, size_t cap)
{
	size_t o = 0;
	for (uint32_t i = 0; i < k->len && o + 3 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%02x", k->bytes[i]);
	if (o == 0 && cap)
		snprintf(out, cap, "-");
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENODATA;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static const struct fsck_ns *ns_by_id(const struct fsck *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->ns_count; i++)
		if (c->ns[i].id == id)
			return &c->ns[i];
	return NULL;
}

static int reg_cb(void *ctx, uint32_t id, const uint8_t digest[32], const char *canon,
		  uint32_t canon_len)
{
	struct fsck *c = ctx;
	struct fsck_ns *n = realloc(c->ns, (c->ns_count + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	c->ns = n;
	n = &c->ns[c->ns_count];
	memset(n, 0, sizeof(*n));
	n->id = id;
	memcpy(n->digest, digest, 32);
	/* canon is not NUL-terminated (it points into the file image):
	 * copy exactly its bytes, never read one past them (strndup may). */
	n->canon = malloc((size_t)canon_len + 1);
	if (!n->canon)
		return -ENOMEM;
	memcpy(n->canon, canon, canon_len);
	n->canon[canon_len] = 0;
	c->ns_count++;
	return 0;
}

/* The registry (<path>/namespaces); a missing one is an empty store. */
static int load_registry(struct fsck *c, int pfd)
{
	struct stat st;
	uint8_t *b;
	int fd = openat(pfd, "namespaces", O_RDONLY | O_CLOEXEC), r;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || st.st_size > (64 << 20)) {
		r = fd < 0 ? -errno : -EFBIG;
		close(fd);
		return r;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	r = pread_full(fd, b, (size_t)st.st_size, 0);
	close(fd);
	if (r == 0)
		r = ns_reg_parse(b, (size_t)st.st_size, reg_cb, c);
	free(b);
	if (r == KVT_ECORRUPT || r == KVT_EVERSION) {
		fsck_say(c, KVT_FSCK_DAMAGE, "namespaces: the registry is unreadable (%s)",
			 kvt_strerror(r));
		return 0;
	}
	return r < 0 ? r : 0;
}

static int rec_add(struct fsck *c, const struct fsck_rec *r)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct fsck_rec *n = realloc(c->recs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->recs = n;
		c->cap = cap;
	}
	c->recs[c->n++] = *r;
	return 0;
}

/* Decode the record header at byte off of fd into buf (cap bytes, at
 * least align), laid out at align, reading no further than end: 0, or
 * < 0 as ssd_rec_hdr_decode (KVT_EBUFSMALL: it claims more than cap or
 * end allow), or -errno from the read. */
static int rec_hdr_read(int fd, uint8_t *buf, size_t cap, uint64_t off, uint64_t end,
			uint32_t align, struct ssd_rec_hdr *h, struct ssd_part *parts)
{
	int r = pread_full(fd, buf, align, off);
	if (r < 0)
		return r;
	r = ssd_rec_hdr_decode(buf, align, align, h, parts, parts ? KVT_PARTS_MAX : 0);
	if (r == KVT_EBUFSMALL && h->hdr_len <= cap && off + h->hdr_len <= end) {
		if ((r = pread_full(fd, buf, h->hdr_len, off)) == 0)
			r = ssd_rec_hdr_decode(buf, h->hdr_len, align, h, parts,
					       parts ? KVT_PARTS_MAX : 0);
	}
	return r;
}

static bool rec_hdr_err(int r)
{
	return r == KVT_ECORRUPT || r == KVT_EVERSION || r == KVT_EBUFSMALL || r == KVT_ERANGE;
}

/* A record whose header is sound but whose value is not all there (a
 * part fails its CRC, or the file ends inside it: cut), at byte off: at
 * or past `wrote`, the checkpoint's write point for the segment's
 * generation (0: none that recovery uses), it is a write a crash cut short
 * -- recovery's walk checks it and leaves it out (ssd_recover.c "Values
 * torn by a crash"; until 2026-12-07 it indexed it, and the summary the
 * seal wrote named it: damage once a checkpoint covered it), or, where
 * the file ends inside it, stops before it (no walk reads past its
 * file's end): a miss either way -- said as a warning; before it,
 * damage.  Until 2026-12-06 a record cut by the file's end was said to be
 * indexed too. */
static void torn_say(struct fsck *c, uint32_t slot, uint64_t off, uint64_t wrote,
		     const char *what, bool cut)
{
	if (off < wrote)
		fsck_say(c, KVT_FSCK_DAMAGE, "ssd/seg-%06u offset %llu %s", slot,
			 (unsigned long long)off, what);
	else
		fsck_say(c, KVT_FSCK_WARN,
			 "ssd/seg-%06u offset %llu %s, at or past the checkpoint's write point "
			 "for its generation (%llu): a write torn by a crash, not damage "
			 "(%s)", slot, (unsigned long long)off, what, (unsigned long long)wrote,
			 cut ? "recovery stops before it; a miss"
			     : "a miss: recovery leaves it out, or a read finds it");
}

/* A batched value (format 3) named by summary entry e in slot's file
 * (reading no further than end): its bytes' CRC32C continued over its
 * identity against e->value_crc, as a read checks it.  0, or < 0 (an I/O
 * error, -ENOMEM). */
static int check_batch_value(struct fsck *c, int fd, uint32_t slot, const struct ssd_sum_entry *e,
			     uint64_t end, uint64_t wrote)
{
	uint64_t off = (uint64_t)e->off_512 * SSD_REC_ALIGN, left = e->value_len, vo = off;
	struct fsck_rec fr = { 0 };
	char kh[2 * KVT_KEY_MAX + 1], what[320];
	uint32_t crc = 0;
	int r;

	key_hex(&e->key, kh, sizeof(kh));
	c->f->records++;
	if (off + e->value_len > end) {
		snprintf(what, sizeof(what), "seq %llu key %s: the file ends inside the batched value",
			 (unsigned long long)e->seq, kh);
		torn_say(c, slot, off, wrote, what, true);
		fr.bad = true;
		left = 0;
	}
	while (left) {
		size_t n = left < FSCK_CHUNK ? (size_t)left : FSCK_CHUNK;
		if ((r = pread_full(fd, c->buf, n, vo)) < 0)
			return r;
		crc = kvt_crc32c(crc, c->buf, n);
		vo += n;
		left -= n;
		fsck_progress(c, n);
	}
	if (!fr.bad && ssd_value_crc(crc, e->ns_id, &e->key, e->seq) != e->value_crc) {
		snprintf(what, sizeof(what),
			 "seq %llu ns %u key %s: batched value fails its value_crc (stored %08x)",
			 (unsigned long long)e->seq, e->ns_id, kh, e->value_crc);
		torn_say(c, slot, off, wrote, what, false);
		fr.bad = true;
	}
	if (!ns_by_id(c, e->ns_id)) {
		fsck_say(c, KVT_FSCK_ORPHAN,
			 "ssd/seg-%06u offset %llu seq %llu key %s: namespace %u is not in the "
			 "registry", slot, (unsigned long long)off, (unsigned long long)e->seq, kh,
			 e->ns_id);
		return 0;
	}
	if (!fr.bad)
		c->f->blocks_checked++;
	fr.slot = slot;
	fr.off_512 = e->off_512;
	fr.type = SSD_REC_PUT;
	fr.ns = e->ns_id;
	fr.seq = e->seq;
	fr.value_len = e->value_len;
	fr.key = e->key;
	return rec_add(c, &fr);
}

/* Decode the structure (a record or, if batches, a batch header) at byte
 * off of fd into st by ssd_struct_decode, through c->hbuf, reading no
 * further than end and at most FSCK_HDR_MAX bytes: its result (0, or
 * < 0 as ssd_struct_decode), or -errno from the read. */
static int struct_read(struct fsck *c, int fd, uint64_t off, uint64_t end, uint32_t align,
		       bool batches, struct ssd_struct *st)
{
	int r = pread_full(fd, c->hbuf, align, off);
	if (r < 0)
		return r;
	r = ssd_struct_decode(c->hbuf, align, off, align, batches, st);
	if (r == KVT_EBUFSMALL && st->hdr_len <= FSCK_HDR_MAX && off + st->hdr_len <= end) {
		uint32_t want = st->hdr_len;
		if ((r = pread_full(fd, c->hbuf, want, off)) < 0)
			return r;
		r = ssd_struct_decode(c->hbuf, want, off, align, batches, st);
	}
	return r;
}

/* The batch header at byte off of a format-3 segment (its magic seen),
 * as check_record a record: its length (> 0), KVT_ECORRUPT (reported),
 * 0 where recovery's walk stops in an open segment (*why), or < 0. */
static int64_t check_batch(struct fsck *c, int fd, uint32_t slot, const struct ssd_seg_hdr *sh,
			   uint64_t off, uint64_t end, bool sealed, uint64_t wrote,
			   const char **why)
{
	uint32_t align = sh->rec_align;
	struct ssd_struct *st = malloc(sizeof(*st));
	const char *stop;
	uint64_t len = 0;
	int r;

	if (!st)
		return -ENOMEM;
	r = struct_read(c, fd, off, end, align, true, st);
	if (r < 0 && !rec_hdr_err(r))
		goto out;
	stop = ssd_walk_struct(r, st, sh->generation, off, sh->seg_size, align, &len);
	if (stop) {
		r = 0;
		if (sealed) {
			fsck_say(c, KVT_FSCK_DAMAGE, "ssd/seg-%06u offset %llu: batch: %s", slot,
				 (unsigned long long)off, stop);
			r = KVT_ECORRUPT;
		}
		*why = stop;
		goto out;
	}
	c->last_is_rec = false;
	c->last_seq = 0;
	for (uint32_t i = 0; i < st->batch.count; i++)
		if (st->batch.ent[i].seq > c->last_seq)
			c->last_seq = st->batch.ent[i].seq;
	for (uint32_t i = 0; i < st->batch.count; i++) {
		struct ssd_sum_entry e;
		ssd_batch_sum_entry(&st->batch, i, align, &e);
		if ((r = check_batch_value(c, fd, slot, &e, end, wrote)) < 0)
			goto out;
	}
	free(st);
	return (int64_t)len;
out:
	free(st);
	return r;
}

/* Check one record at byte off of the file of slot, whose header is h,
 * reading no further than end (the segment or the file, if shorter).
 * Returns its length in bytes (> 0), KVT_ECORRUPT if it is damaged
 * (reported), or another < 0 error.  In an open segment (!sealed) it
 * returns 0 where recovery's walk stops (ssd_walk_rec: a header that fails
 * to decode or of another generation, one that runs past the segment; or
 * no room for a record), with *why saying which; the caller judges it.
 * wrote: as torn_say's. */
static int64_t check_record(struct fsck *c, int fd, uint32_t slot, const struct ssd_seg_hdr *sh,
			    uint64_t off, uint64_t end, bool sealed, uint64_t wrote,
			    const char **why)
{
	static const uint8_t zero[64];
	uint64_t gen = sh->generation;
	uint32_t align = sh->rec_align;
	struct ssd_rec_hdr h;
	struct ssd_part *parts = NULL;
	struct fsck_rec fr = { 0 };
	char kh[2 * KVT_KEY_MAX + 1], what[320];
	const char *stop;
	uint64_t len = 0, vo;
	int r;

	*why = "no room for a record";
	if (off + align > end)
		return 0;
	if (off % align) {
		fsck_say(c, KVT_FSCK_DAMAGE,
			 "ssd/seg-%06u offset %llu: a record off its segment's %u-byte alignment",
			 slot, (unsigned long long)off, align);
		return KVT_ECORRUPT;
	}
	if (sh->version == SSD_SEG_VERSION_BATCH) {
		/* Format 3: a batch where its magic is (ssd_struct_decode). */
		if ((r = pread_full(fd, c->hbuf, align, off)) < 0)
			return r;
		if (memcmp(c->hbuf, SSD_BATCH_MAGIC, 4) == 0)
			return check_batch(c, fd, slot, sh, off, end, sealed, wrote, why);
	}
	parts = malloc(KVT_PARTS_MAX * sizeof(*parts));
	if (!parts)
		return -ENOMEM;
	r = rec_hdr_read(fd, c->buf, FSCK_CHUNK, off, end, align, &h, parts);
	if (r < 0 && !rec_hdr_err(r)) {
		free(parts);
		return r;
	}
	/* Where recovery's walk stops, by the same predicate. */
	stop = ssd_walk_rec(r, &h, gen, off, sh->seg_size, align, &len);
	if (stop && !sealed) {
		free(parts);
		*why = stop;
		if (r < 0 && memcmp(c->buf, zero, sizeof(zero)) == 0) {
			*why = "zeros, no record";
		} else if (r < 0) {
			snprintf(c->why, sizeof(c->why), "record header damaged (%s)",
				 kvt_strerror(r));
			*why = c->why;
		}
		return 0;
	}
	if (stop) {
		free(parts);
		if (r < 0)
			fsck_say(c, KVT_FSCK_DAMAGE,
				 "ssd/seg-%06u offset %llu: record header damaged (%s)", slot,
				 (unsigned long long)off, kvt_strerror(r));
		else if (h.generation != gen)
			fsck_say(c, KVT_FSCK_DAMAGE,
				 "ssd/seg-%06u offset %llu: record of generation %llu in "
				 "generation %llu", slot, (unsigned long long)off,
				 (unsigned long long)h.generation, (unsigned long long)gen);
		else
			fsck_say(c, KVT_FSCK_DAMAGE,
				 "ssd/seg-%06u offset %llu seq %llu: record runs past its segment",
				 slot, (unsigned long long)off, (unsigned long long)h.seq);
		return KVT_ECORRUPT;
	}
	key_hex(&h.key, kh, sizeof(kh));
	c->f->records++;
	c->last_rec = h; /* for the walk's twins (twin_took) */
	c->last_is_rec = true;
	c->last_seq = h.seq;
	if (off + len > end) {
		/* Within the segment, past the end of its file: recovery's walk
		 * stops before it (and drops a checkpoint entry naming it). */
		snprintf(what, sizeof(what), "seq %llu key %s: the file ends inside the record",
			 (unsigned long long)h.seq, kh);
		torn_say(c, slot, off, wrote, what, true);
		fr.bad = true;
		h.part_count = 0; /* no bytes to check */
	}
	/* Each part's CRC over its bytes, read in chunks. */
	vo = off + h.hdr_len;
	for (uint32_t p = 0; p < h.part_count; p++) {
		uint64_t left = parts[p].len;
		uint32_t crc = 0;
		while (left) {
			size_t n = left < FSCK_CHUNK ? (size_t)left : FSCK_CHUNK;
			if ((r = pread_full(fd, c->buf, n, vo)) < 0) {
				free(parts);
				return r;
			}
			crc = kvt_crc32c(crc, c->buf, n);
			vo += n;
			left -= n;
			fsck_progress(c, n);
		}
		if (crc != parts[p].crc) {
			snprintf(what, sizeof(what),
				 "seq %llu ns %u key %s: part %u of %u fails its CRC32C (stored "
				 "%08x, bytes give %08x)", (unsigned long long)h.seq, h.ns_id, kh,
				 p, h.part_count, parts[p].crc, crc);
			torn_say(c, slot, off, wrote, what, false);
			fr.bad = true; /* the header is sound: walk on */
			break;
		}
	}
	free(parts);
	if (h.type != SSD_REC_CLEAR_ALL) {
		const struct fsck_ns *n = ns_by_id(c, h.ns_id);
		if (!n || memcmp(n->digest, h.ns_digest, 32) != 0) {
			fsck_say(c, KVT_FSCK_ORPHAN,
				 "ssd/seg-%06u offset %llu seq %llu key %s: namespace %u is %s",
				 slot, (unsigned long long)off, (unsigned long long)h.seq, kh,
				 h.ns_id,
				 n ? "registered with another digest" : "not in the registry");
			return (int64_t)len;
		}
	}
	if (h.type == SSD_REC_PUT && !fr.bad)
		c->f->blocks_checked++;
	fr.slot = slot;
	fr.off_512 = (uint32_t)(off / SSD_REC_ALIGN);
	fr.type = h.type;
	fr.ns = h.ns_id;
	fr.seq = h.seq;
	fr.value_len = h.value_len;
	fr.key = h.key;
	if ((r = rec_add(c, &fr)) < 0)
		return r;
	return (int64_t)len;
}

struct sum_walk {
	struct fsck *c;
	int fd;
	uint32_t slot;
	const struct ssd_seg_hdr *h;
	uint64_t end, wrote; /* wrote: as torn_say's */
	const char *bad;     /* why recovery would not use the summary */
};

/* Recovery's first pass over a summary (rec_sum_bound_cb), by the same
 * predicate. */
static int sum_bound_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct sum_walk *w = ctx;
	w->bad = ssd_sum_entry_bound(e, w->h->rec_align, w->h->summary_off,
				     w->h->version == SSD_SEG_VERSION_BATCH);
	return w->bad ? KVT_ECORRUPT : 0;
}

static int sum_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct sum_walk *w = ctx;
	const char *why;
	int64_t r;

	if (e->flags & SSD_ENT_F_BATCHED) /* the value alone, as recovery takes it */
		return check_batch_value(w->c, w->fd, w->slot, e, w->end, w->wrote);
	r = check_record(w->c, w->fd, w->slot, w->h, (uint64_t)e->off_512 * SSD_REC_ALIGN,
				 w->end, true, w->wrote, &why);
	if (r < 0 && r != KVT_ECORRUPT)
		return (int)r;
	if (r > 0 && (uint64_t)r != (uint64_t)e->len_512 * SSD_REC_ALIGN)
		fsck_say(w->c, KVT_FSCK_DAMAGE,
			 "ssd/seg-%06u offset %llu seq %llu: the summary's length differs from the "
			 "record's", w->slot, (unsigned long long)e->off_512 * SSD_REC_ALIGN,
			 (unsigned long long)e->seq);
	return 0;
}

/* The generation of a decoded structure (st->kind set). */
static uint64_t struct_gen(const struct ssd_struct *st)
{
	return st->kind == SSD_STRUCT_BATCH ? st->batch.generation : st->rec.generation;
}

/* The first sound structure of h's generation in [from, end) at its
 * record alignment's multiples -- a record header or, in a segment of
 * format 3, a batch header (ssd_struct_decode, as recovery's walk reads
 * them): its offset, 0 if none, or < 0 (an I/O error, -ENOMEM). */
static int64_t next_sound_hdr(struct fsck *c, int fd, const struct ssd_seg_hdr *h, uint64_t from,
			      uint64_t end)
{
	bool batches = h->version == SSD_SEG_VERSION_BATCH;
	uint32_t align = h->rec_align;
	struct ssd_struct *st = malloc(sizeof(*st));
	int64_t found = 0;

	if (!st)
		return -ENOMEM;
	while (!found && from + align <= end) {
		size_t n = end - from < FSCK_CHUNK ? (size_t)(end - from) : FSCK_CHUNK;
		int r;
		n -= n % align;
		if ((r = pread_full(fd, c->buf, n, from)) < 0) {
			found = r;
			break;
		}
		for (size_t i = 0; i < n && !found; i += align) {
			if (memcmp(c->buf + i, SSD_REC_MAGIC, 4) != 0 &&
			    !(batches && memcmp(c->buf + i, SSD_BATCH_MAGIC, 4) == 0))
				continue;
			r = struct_read(c, fd, from + i, end, align, batches, st);
			if (r < 0 && !rec_hdr_err(r)) {
				found = r;
				break;
			}
			if (r == 0 && struct_gen(st) == h->generation)
				found = (int64_t)(from + i);
		}
		from += n;
	}
	free(st);
	return found;
}

/* Where the checkpoint says the writes of slot's generation (h's) had
 * reached when it was taken; 0 if it does not know that generation, or if
 * recovery will ignore it (ck_ignored: the store's size differs). */
static uint64_t ck_wrote(const struct fsck *c, uint32_t slot, const struct ssd_seg_hdr *h)
{
	if (c->ck_ok && !c->ck_ignored && slot < c->ck_hdr.slot_count && slot < c->slots &&
	    c->ck_gen[slot] == h->generation && memcmp(c->ck_hdr.store_id, h->store_id, 16) == 0)
		return c->ck_off[slot];
	return 0;
}

/* Tombstones twice, as recovery's walk takes them (ssd_walk_twin): the
 * walk's last record, if a tombstone without its twin yet. */
struct twin_walk {
	bool lone;
	uint64_t end, last_seq;
	struct ssd_rec_hdr tomb;
};

/* check_record took what lies at off (len bytes; c->last_*): note the
 * last tombstone, and drop a twin from the records (it is nothing new). */
static void twin_took(struct fsck *c, struct twin_walk *t, size_t n0, uint64_t off, int64_t len)
{
	bool lone = t->lone;

	t->lone = false;
	if (c->last_is_rec && lone && t->end == off && ssd_rec_is_twin(&t->tomb, &c->last_rec)) {
		if (c->n > n0)
			c->n--;
		c->f->records--;
		return;
	}
	if (c->last_seq > t->last_seq)
		t->last_seq = c->last_seq;
	if (c->last_is_rec && c->last_rec.type != SSD_REC_PUT) {
		t->lone = true;
		t->tomb = c->last_rec;
		t->end = off + (uint64_t)len;
	}
}

/* Recovery's walk stopped at off: does it go on at off + align, the
 * structure at off a damaged copy of a tombstone (ssd_walk_twin)?  1 yes,
 * 0 no, < 0 an error. */
static int twin_next(struct fsck *c, int fd, const struct ssd_seg_hdr *h, uint64_t off,
		     uint64_t end, const struct twin_walk *t)
{
	bool batches = h->version == SSD_SEG_VERSION_BATCH;
	struct ssd_struct *st;
	int r;

	if (off + 2 * (uint64_t)h->rec_align > end)
		return 0;
	if (!(st = malloc(sizeof(*st))))
		return -ENOMEM;
	r = struct_read(c, fd, off + h->rec_align, end, h->rec_align, batches, st);
	if (r < 0 && !rec_hdr_err(r)) {
		free(st);
		return r == -ENODATA ? 0 : r;
	}
	r = ssd_walk_twin(t->lone && t->end == off, t->last_seq, r, st, h->generation,
			  off + h->rec_align, end, h->rec_align);
	free(st);
	return r;
}

/* An open segment's records (or a sealed one's whose summary recovery
 * refuses), walked as recovery walks them (rec_walk), judged against
 * `wrote`, the checkpoint's write point for its generation (the top of
 * this file; 0: none).  A walk stopped short of that point by damage goes on at
 * the next sound record or batch header (the checkpoint holds what follows:
 * recovery loses only the damaged record or batch), up to it.  A damaged
 * copy of a tombstone whose other copy is sound does not stop it, as it
 * does not stop recovery's (twin_next): said, damage before the write
 * point, a warning past it. */
static int walk_open(struct fsck *c, int fd, uint32_t slot, const struct ssd_seg_hdr *h,
		     uint64_t end, uint64_t wrote)
{
	uint64_t off = SSD_ALIGN;
	const char *why = "";
	int64_t len, next;
	bool lost = false; /* a stop before the write point: recovery's walk ends there */
	struct twin_walk tw = { 0 };

	for (;;) {
		bool past = false; /* at the write point, after a stop before it */
		size_t n0 = c->n;
		len = 0;
		while (!(past = lost && off >= wrote) &&
		       (len = check_record(c, fd, slot, h, off, end, false, wrote, &why)) > 0) {
			twin_took(c, &tw, n0, off, len);
			off += (uint64_t)len;
			n0 = c->n;
		}
		if (len < 0 && len != KVT_ECORRUPT)
			return (int)len;
		if (!past && len == 0) {
			/* Where recovery's walk goes on past a damaged
			 * tombstone copy, so does this one. */
			int t = twin_next(c, fd, h, off, end, &tw);
			if (t < 0)
				return t;
			if (t) {
				fsck_say(c, off < wrote ? KVT_FSCK_DAMAGE : KVT_FSCK_WARN,
					 "ssd/seg-%06u offset %llu: %s; a copy of a tombstone, "
					 "whose other copy is sound: nothing is lost", slot,
					 (unsigned long long)off, why);
				tw.lone = false;
				off += h->rec_align;
				continue;
			}
		}
		if (past) {
			next = next_sound_hdr(c, fd, h, off, end);
		} else {
			if (len == KVT_ECORRUPT) /* reported; its length is not known */
				why = "a damaged record";
			else if (off < wrote)
				fsck_say(c, KVT_FSCK_DAMAGE,
					 "ssd/seg-%06u offset %llu: %s, where the checkpoint says "
					 "generation %llu was written up to offset %llu",
					 slot, (unsigned long long)off, why,
					 (unsigned long long)h->generation,
					 (unsigned long long)wrote);
			next = next_sound_hdr(c, fd, h, off + h->rec_align, end);
		}
		if (next < 0)
			return (int)next;
		if (next == 0)
			return 0;
		if (!past && (uint64_t)next < wrote) {
			lost = true;
			off = (uint64_t)next;
			continue;
		}
		if (past) /* recovery's walk stopped at the damage said above */
			fsck_say(c, KVT_FSCK_WARN,
				 "ssd/seg-%06u: recovery's walk of this segment stops at the "
				 "damage before offset %llu, so the records written after the "
				 "checkpoint (the first at offset %llu) are not recovered",
				 slot, (unsigned long long)wrote, (unsigned long long)next);
		else /* leftovers or a torn write, but a record of this generation follows */
			fsck_say(c, KVT_FSCK_WARN,
				 "ssd/seg-%06u offset %llu: %s; recovery's walk of this "
				 "segment stops here, before a record of its generation at offset "
				 "%llu: the records from there on are not recovered (a write torn "
				 "or lost by a crash, or a damaged header)",
				 slot, (unsigned long long)off, why, (unsigned long long)next);
		return 0;
	}
}

/* A sealed segment, through its summary as recovery reads it.  A summary
 * recovery does not use (damaged, cut short, an entry outside the
 * records) is damage, and the records are walked instead, as recovery
 * walks them. */
static int check_sealed(struct fsck *c, int fd, uint32_t slot, const struct ssd_seg_hdr *h,
			uint64_t end)
{
	struct sum_walk w = { c, fd, slot, h, h->summary_off, ck_wrote(c, slot, h), NULL };
	uint8_t *sb = NULL;
	int64_t n = 0;
	int r = 0;

	if (h->summary_off + h->summary_len > end) { /* decoded: both within seg_size */
		w.bad = "it lies past the end of the file";
	} else if (!(sb = malloc(h->summary_len))) {
		return -ENOMEM;
	} else if ((r = pread_full(fd, sb, h->summary_len, h->summary_off)) < 0) {
		if (r != -ENODATA)
			goto out;
		w.bad = "it lies past the end of the file";
	} else if ((n = ssd_sum_decode(sb, h->summary_len, h->generation, sum_bound_cb, &w)) < 0) {
		if (n != KVT_ECORRUPT && n != KVT_EVERSION) {
			r = (int)n;
			goto out;
		}
		if (!w.bad)
			w.bad = kvt_strerror((int)n);
	} else if ((n = ssd_sum_decode(sb, h->summary_len, h->generation, sum_cb, &w)) < 0) {
		r = (int)n; /* checked already: only sum_cb's own error */
		goto out;
	}
	if (w.bad) {
		fsck_say(c, KVT_FSCK_DAMAGE,
			 "ssd/seg-%06u: summary damaged (%s): recovery walks the segment's "
			 "records instead", slot, w.bad);
		/* Up to the summary: records end before it (recovery's too). */
		r = walk_open(c, fd, slot, h, end < h->summary_off ? end : h->summary_off, 0);
	}
out:
	free(sb);
	return r;
}

/* ssd_hl's read, from fd: what cannot be read is no structure. */
struct fsck_hl {
	struct fsck *c;
	int fd;
	uint64_t tombs, ck_seq;
};

static int fsck_hl_read(void *ctx, uint64_t off, uint64_t limit, uint32_t align,
			struct ssd_struct *st)
{
	struct fsck_hl *h = ctx;
	int r = struct_read(h->c, h->fd, off, limit, align, true, st);
	return r < 0 && !rec_hdr_err(r) ? KVT_ECORRUPT : r;
}

static int fsck_hl_tomb(void *ctx, const struct ssd_rec_hdr *h)
{
	struct fsck_hl *hl = ctx;
	const struct fsck_ns *n = ns_by_id(hl->c, h->ns_id);
	hl->tombs += ssd_hl_applies(h, hl->ck_seq, n ? n->digest : NULL);
	return 0;
}

/* A slot whose header is zero or damaged: the generation of the
 * structure at offset 4096, from which recovery walks it for tombstones,
 * or 0 if none is there; *tombs: the tombstones recovery applies from it
 * (0 where it skips the walk).  Recovery's own probe, walk and filter
 * (ssd_hl_probe, ssd_hl_reflected, ssd_hl_walk, ssd_hl_applies), up to
 * the store's segment size where it is known, as recovery's; until
 * 2026-12-06 fsck had its own copy of the probe and walk, which counted
 * tombstones of unregistered namespaces and past the segment size (more
 * than recovery applied) and stopped at a damaged copy of one (fewer). */
static uint64_t headerless_scan(struct fsck *c, uint32_t slot, int fd, uint64_t fsize,
				uint64_t *tombs)
{
	struct ssd_struct *st = malloc(sizeof(*st));
	struct fsck_hl hl = { c, fd, 0, 0 };
	struct ssd_hl w = { .read = fsck_hl_read, .ctx = &hl, .limit = fsize };
	bool have_ckpt = c->ck_ok && !c->ck_ignored;
	bool in_ckpt = have_ckpt && slot < c->ck_hdr.slot_count && slot < c->slots;

	*tombs = 0;
	if (!st)
		return 0;
	if (c->seg_size && c->seg_size < w.limit)
		w.limit = c->seg_size;
	if (have_ckpt)
		hl.ck_seq = c->ck_hdr.seq;
	if (ssd_hl_probe(&w, st) == 1 &&
	    !ssd_hl_reflected(have_ckpt, in_ckpt, in_ckpt ? c->ck_gen[slot] : 0, c->ck_max_gen,
			      w.gen) &&
	    ssd_hl_walk(&w, st, fsck_hl_tomb, &hl) == 0)
		*tombs = hl.tombs;
	free(st);
	return w.gen;
}

static int check_segment(struct fsck *c, uint32_t slot, uint64_t fsize)
{
	char name[32];
	struct ssd_seg_hdr h;
	uint64_t end;
	int fd, r;

	snprintf(name, sizeof(name), "seg-%06u", slot);
	fd = openat(c->dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	c->f->segments++;
	/* An empty file is a free slot, as recovery takes it: created and
	 * never allocated (a crash between the two, or no room on the file
	 * system: ssd.c "Room"). */
	r = 0;
	if (fsize == 0)
		goto out;
	r = pread_full(fd, c->buf, SSD_ALIGN, 0);
	if (r == -ENODATA) {
		fsck_say(c, KVT_FSCK_DAMAGE, "ssd/%s: shorter than a segment header", name);
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;
	{
		/* A zeroed header is a free slot (doc/ssd-format.md "Recovery"
		 * step 2: whole-segment eviction zeroes and syncs it before its
		 * blocks are forgotten; a crash before the next header leaves
		 * it so). */
		bool zero = ssd_is_zero(c->buf, SSD_ALIGN);
		uint64_t g, tombs;
		/* Over records, it is an eviction's or damage: the two look
		 * alike, and matter where recovery applies tombstones from
		 * them (since 2026-12-06; before, nothing was said, and they
		 * were lost). */
		if (zero && (g = headerless_scan(c, slot, fd, fsize, &tombs)) && tombs)
			fsck_say(c, KVT_FSCK_WARN,
				 "ssd/%s: header zeroed over records (generation %llu) holding %llu "
				 "tombstones newer than the checkpoint: a segment evicted, or its "
				 "header damaged; the store takes its slot for free when it opens, "
				 "applies those tombstones and voids it (its blocks are misses)",
				 name, (unsigned long long)g, (unsigned long long)tombs);
		if (zero)
			goto out;
	}
	r = ssd_seg_hdr_decode(c->buf, &h);
	if (r == KVT_EVERSION && h.version < SSD_FMT_VERSION) {
		fsck_say(c, KVT_FSCK_WARN,
			 "ssd/%s: format version %u, older than %u: its blocks are dropped when "
			 "the store opens", name, h.version, SSD_FMT_VERSION);
		r = 0;
		goto out;
	}
	if (r < 0) {
		uint64_t tombs, g = headerless_scan(c, slot, fd, fsize, &tombs);
		if (g)
			fsck_say(c, KVT_FSCK_DAMAGE,
				 "ssd/%s: segment header damaged (%s), records under it "
				 "(generation %llu, %llu tombstones newer than the checkpoint): the "
				 "store takes its slot for free when it opens, applies those "
				 "tombstones (and voids it if any) and reads nothing else there "
				 "(its blocks are misses)", name, kvt_strerror(r),
				 (unsigned long long)g, (unsigned long long)tombs);
		else
			fsck_say(c, KVT_FSCK_DAMAGE, "ssd/%s: segment header damaged (%s)", name,
				 kvt_strerror(r));
		r = 0;
		goto out;
	}
	/* Whether recovery takes it as a segment of the store, by its own
	 * predicate. */
	switch (ssd_seg_hdr_ours(&h, slot, c->seg_size, c->have_id ? c->store_id : NULL)) {
	case SSD_SEG_OTHER_SLOT:
		fsck_say(c, KVT_FSCK_DAMAGE, "ssd/%s: header says slot %u", name, h.slot);
		goto out;
	case SSD_SEG_UNUSED:
		goto out; /* never written: free */
	case SSD_SEG_OTHER_STORE:
		fsck_say(c, KVT_FSCK_DAMAGE,
			 "ssd/%s: belongs to another store (its store id is not ssd/id's): the "
			 "store takes its slot for free when it opens (its records are not read)",
			 name);
		goto out;
	case SSD_SEG_OTHER_SIZE:
		fsck_say(c, KVT_FSCK_WARN,
			 "ssd/%s: a segment of %llu bytes, where the store's are %llu: the store "
			 "takes its slot for free when it opens (its records are not read)",
			 name, (unsigned long long)h.seg_size, (unsigned long long)c->seg_size);
		goto out;
	}
	c->gen[slot] = h.generation;
	end = h.seg_size < fsize ? h.seg_size : fsize;
	if (h.summary_off) {
		r = check_sealed(c, fd, slot, &h, end);
		goto out;
	}
	r = walk_open(c, fd, slot, &h, end, ck_wrote(c, slot, &h));
out:
	close(fd);
	return r;
}

static int rec_pos_cmp(const void *a, const void *b)
{
	const struct fsck_rec *x = a, *y = b;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->off_512 < y->off_512 ? -1 : x->off_512 > y->off_512;
}

static int rec_key_cmp(const void *a, const void *b)
{
	const struct fsck_rec *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	if (x->key.len != y->key.len)
		return x->key.len < y->key.len ? -1 : 1;
	int m = memcmp(x->key.bytes, y->key.bytes, x->key.len);
	if (m)
		return m;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int ck_clear(void *ctx, const struct ssd_ckpt_clear *cl)
{
	struct fsck *c = ctx;
	if (cl->ns_id == 0) {
		if (cl->seq > c->clear_all)
			c->clear_all = cl->seq;
	} else if (cl->ns_id <= c->ns_count + 1 && cl->seq > c->clear_ns[cl->ns_id]) {
		c->clear_ns[cl->ns_id] = cl->seq;
	}
	return 0;
}

static int ck_entry(void *ctx, const struct ssd_ckpt_entry *e)
{
	struct fsck *c = ctx;
	struct fsck_rec k = { .slot = e->slot, .off_512 = e->e.off_512 }, *r;
	char kh[2 * KVT_KEY_MAX + 1];
	if (e->slot >= c->slots || c->gen[e->slot] != e->generation)
		return 0; /* its segment was evicted since: dropped by generation */
	r = c->n ? bsearch(&k, c->recs, c->n, sizeof(*r), rec_pos_cmp) : NULL;
	if (r && !r->bad && r->type == e->e.type && r->ns == e->e.ns_id && r->seq == e->e.seq &&
	    r->key.len == e->e.key.len && memcmp(r->key.bytes, e->e.key.bytes, r->key.len) == 0)
		return 0;
	key_hex(&e->e.key, kh, sizeof(kh));
	fsck_say(c, KVT_FSCK_DAMAGE,
		 "ssd/checkpoint: entry seq %llu ns %u key %s names ssd/seg-%06u offset %llu, "
		 "where there is no such sound record",
		 (unsigned long long)e->e.seq, e->e.ns_id, kh, e->slot,
		 (unsigned long long)e->e.off_512 * SSD_REC_ALIGN);
	return 0;
}

static int ck_slot(void *ctx, uint32_t idx, const struct ssd_ckpt_slot *sl)
{
	struct fsck *c = ctx;
	if (sl->generation > c->ck_max_gen)
		c->ck_max_gen = sl->generation;
	if (idx < c->slots) {
		c->ck_gen[idx] = sl->generation;
		c->ck_off[idx] = sl->write_off;
	}
	return 0;
}

/* Read ssd/checkpoint, and from it each slot's generation and write point
 * (what an open segment's walk is judged against), before the segments
 * are read.  A missing, damaged or foreign one gives none. */
static int ckpt_load(struct fsck *c)
{
	struct ssd_ckpt_cbs cbs = { .slot = ck_slot };
	struct stat st;
	int fd = openat(c->dfd, "checkpoint", O_RDONLY | O_CLOEXEC), r;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	c->ck_len = (size_t)st.st_size;
	c->ck = malloc(c->ck_len ? c->ck_len : 1);
	if (!c->ck) {
		close(fd);
		return -ENOMEM;
	}
	r = pread_full(fd, c->ck, c->ck_len, 0);
	close(fd);
	if (r < 0)
		return r;
	/* Every check passes before the first callback: all or nothing. */
	c->ck_ok = ssd_ckpt_decode(c->ck, c->ck_len, &c->ck_hdr, &cbs, c) == 0;
	return 0;
}

/* The store's segment size and slot count, as recovery will judge the
 * files: the caller's (ssd.segment, ssd.capacity / ssd.segment), else the
 * size of the segments the checkpoint names (the store that wrote it made
 * them) and no slot count; and from them whether recovery will use the
 * checkpoint (the same predicate as recovery's).  Never assumes a default:
 * without either, each segment is read at its header's size, as before. */
static void store_shape(struct fsck *c, const uint64_t *sizes)
{
	/* Another store's checkpoint tells nothing of this one. */
	bool ck_ours = c->ck_ok && !ssd_ckpt_ours(&c->ck_hdr, c->store_id, c->ck_hdr.slot_count);

	c->seg_size = c->f->ssd_segment;
	for (uint32_t s = 0; !c->seg_size && ck_ours && s < c->slots; s++) {
		struct ssd_seg_hdr h;
		char name[32];
		int fd;
		if (!sizes[s] || !c->ck_gen[s])
			continue;
		snprintf(name, sizeof(name), "seg-%06u", s);
		fd = openat(c->dfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (pread_full(fd, c->buf, SSD_ALIGN, 0) == 0 &&
		    ssd_seg_hdr_decode(c->buf, &h) == 0 &&
		    ssd_seg_hdr_ours(&h, s, 0, c->store_id) == 0 &&
		    h.generation == c->ck_gen[s])
			c->seg_size = h.seg_size;
		close(fd);
	}
	if (c->f->ssd_capacity && c->seg_size)
		c->store_slots = (uint32_t)(c->f->ssd_capacity / c->seg_size);
	/* Recovery's predicate, with what is known of the store. */
	if (c->ck_ok)
		c->ck_ignored = ssd_ckpt_ours(&c->ck_hdr, c->store_id,
					      c->store_slots ? c->store_slots
							     : c->ck_hdr.slot_count);
}

/* The checkpoint read by ckpt_load, against the records found. */
static void check_checkpoint(struct fsck *c)
{
	struct ssd_ckpt_cbs cbs = { .clear = ck_clear, .entry = ck_entry };
	struct ssd_ckpt_hdr h;
	int r;
	if (!c->ck)
		return;
	if (c->ck_ignored && memcmp(c->ck_hdr.store_id, c->store_id, 16) != 0) {
		fsck_say(c, KVT_FSCK_DAMAGE,
			 "ssd/checkpoint: belongs to another store (its store id is not ssd/id's): "
			 "recovery ignores it and scans every segment");
		return;
	}
	if (c->ck_ignored) {
		/* Neither its entries nor its clears will be used. */
		fsck_say(c, KVT_FSCK_WARN,
			 "ssd/checkpoint: %s (it names %u slots, the store has %u): recovery "
			 "ignores it and scans every segment", c->ck_ignored, c->ck_hdr.slot_count,
			 c->store_slots);
		return;
	}
	r = ssd_ckpt_decode(c->ck, c->ck_len, &h, &cbs, c);
	if (r < 0) {
		/* Another format version (an upgrade): ignored at open, like damage. */
		fsck_say(c, r == KVT_EVERSION ? KVT_FSCK_WARN : KVT_FSCK_DAMAGE,
			 "ssd/checkpoint: %s; recovery will scan every segment",
			 r == KVT_EVERSION ? "another format version" : "damaged");
		return;
	}
	/* more is normal: files are made as slots are used (with the store's
	 * slot count known, a slot beyond it was said as such) */
	if (!c->store_slots && h.slot_count < c->slots)
		fsck_say(c, KVT_FSCK_WARN, "ssd/checkpoint: names %u slots, the directory holds %u",
			 h.slot_count, c->slots);
}

/* Live blocks per namespace: the newest record of each key, if a PUT that
 * no clear covers. */
static void count_live(struct fsck *c)
{
	if (c->n) /* recs is NULL then, which qsort must not be given */
		qsort(c->recs, c->n, sizeof(*c->recs), rec_key_cmp);
	for (size_t i = 0; i < c->n; i++) {
		const struct fsck_rec *r = &c->recs[i];
		if (r->type == SSD_REC_CLEAR_ALL && r->seq > c->clear_all)
			c->clear_all = r->seq;
		if (r->type == SSD_REC_CLEAR_NS && r->ns <= c->ns_count + 1 &&
		    r->seq > c->clear_ns[r->ns])
			c->clear_ns[r->ns] = r->seq;
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct fsck_rec *r = &c->recs[i];
		struct fsck_ns *n;
		if (r->type != SSD_REC_PUT && r->type != SSD_REC_DELETE)
			continue;
		if (i + 1 < c->n && c->recs[i + 1].ns == r->ns &&
		    c->recs[i + 1].key.len == r->key.len &&
		    memcmp(c->recs[i + 1].key.bytes, r->key.bytes, r->key.len) == 0)
			continue; /* not the newest of its key */
		if (r->type != SSD_REC_PUT || r->bad || r->seq < c->clear_all ||
		    (r->ns <= c->ns_count + 1 && r->seq < c->clear_ns[r->ns]))
			continue;
		n = (struct fsck_ns *)ns_by_id(c, r->ns);
		if (n) {
			n->blocks++;
			n->bytes += r->value_len;
			c->f->blocks++;
			c->f->bytes += r->value_len;
		}
	}
}

static int seg_slot(const char *name, uint32_t *slot)
{
	char *end;
	unsigned long v;
	if (strncmp(name, "seg-", 4) != 0 || strlen(name) != 10)
		return -1;
	v = strtoul(name + 4, &end, 10);
	if (*end || v > UINT32_MAX)
		return -1;
	*slot = (uint32_t)v;
	return 0;
}

int kvt_store_fsck(const char *path, struct kvt_fsck *f)
{
	struct fsck c = { .f = f, .dfd = -1 };
	int pfd = -1, lfd = -1, r;
	DIR *d = NULL;
	struct dirent *de;
	uint64_t *sizes = NULL;

	if (!path || !f)
		return KVT_ENULL;
	f->segments = f->records = f->blocks_checked = f->blocks = f->bytes = 0;
	f->damaged = f->orphans = f->warnings = 0;
	pfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	/* A store has made at least one of these; a directory with none of
	 * them (a mistyped path) is not one, rather than a clean store. */
	if (faccessat(pfd, "LOCK", F_OK, 0) < 0 && faccessat(pfd, "namespaces", F_OK, 0) < 0 &&
	    faccessat(pfd, "ssd", F_OK, 0) < 0) {
		close(pfd);
		return -ENOENT;
	}
	lfd = openat(pfd, "LOCK", O_RDONLY | O_CLOEXEC);
	if (lfd >= 0 && flock(lfd, LOCK_SH | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? KVT_ELOCKED : -errno;
		goto out;
	}
	c.buf = malloc(FSCK_CHUNK);
	if (!c.buf) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = load_registry(&c, pfd)) < 0)
		goto out;
	c.dfd = openat(pfd, "ssd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.dfd < 0) {
		r = errno == ENOENT ? 0 : -errno;
		goto report; /* no SSD tier: nothing on disk to check */
	}
	/* Which slots exist, their sizes (for progress), and strays. */
	d = fdopendir(dup(c.dfd));
	if (!d) {
		r = -errno;
		goto out;
	}
	while ((de = readdir(d))) {
		uint32_t slot;
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		if (seg_slot(de->d_name, &slot) == 0) {
			if (slot >= (1u << 24))
				continue;
			if (slot >= c.slots) {
				uint64_t *n = realloc(sizes, (slot + 1) * sizeof(*n));
				if (!n) {
					r = -ENOMEM;
					goto out;
				}
				memset(n + c.slots, 0, (slot + 1 - c.slots) * sizeof(*n));
				sizes = n;
				c.slots = slot + 1;
			}
			if (fstatat(c.dfd, de->d_name, &st, 0) == 0) {
				sizes[slot] = (uint64_t)st.st_size + 1; /* +1: present */
				c.total += (uint64_t)st.st_size;
			}
		} else if (strcmp(de->d_name, "checkpoint") == 0 || strcmp(de->d_name, "id") == 0) {
			continue;
		} else if (strcmp(de->d_name, "checkpoint.tmp") == 0) {
			fsck_say(&c, KVT_FSCK_WARN,
				 "ssd/checkpoint.tmp: a checkpoint being written when the store "
				 "last stopped (harmless; replaced at the next checkpoint)");
		} else {
			fsck_say(&c, KVT_FSCK_WARN, "ssd/%s: not a file of the store (stray)",
				 de->d_name);
		}
	}
	c.gen = calloc(c.slots ? c.slots : 1, sizeof(*c.gen));
	c.ck_gen = calloc(c.slots ? c.slots : 1, sizeof(*c.ck_gen));
	c.ck_off = calloc(c.slots ? c.slots : 1, sizeof(*c.ck_off));
	c.clear_ns = calloc(c.ns_count + 2, sizeof(*c.clear_ns));
	c.hbuf = malloc(FSCK_HDR_MAX);
	if (!c.gen || !c.ck_gen || !c.ck_off || !c.clear_ns || !c.hbuf) {
		r = -ENOMEM;
		goto out;
	}
	/* The store id from where the store's open takes it (ssd_id_read),
	 * not from a segment header.  Without one the open makes a new id:
	 * no segment or checkpoint there is the store's, and none is read. */
	r = ssd_id_read(c.dfd, c.store_id);
	if (r < 0 && r != -ENOENT && r != KVT_ECORRUPT)
		goto out;
	c.have_id = r == 0;
	if (!c.have_id) {
		bool files = faccessat(c.dfd, "checkpoint", F_OK, 0) == 0;
		for (uint32_t i = 0; i < c.slots && !files; i++)
			files = sizes[i] != 0;
		if (files)
			fsck_say(&c, KVT_FSCK_DAMAGE,
				 "ssd/id: %s: the store takes a new id when it opens, and then "
				 "no segment or checkpoint here is its own (their blocks are "
				 "dropped; the files are not read)",
				 r == -ENOENT ? "missing" : "shorter than 16 bytes");
		r = 0;
		goto report;
	}
	if ((r = ckpt_load(&c)) < 0)
		goto out;
	store_shape(&c, sizes);
	for (uint32_t s = 0; s < c.slots; s++) {
		if (c.store_slots && s >= c.store_slots) {
			if (sizes[s])
				fsck_say(&c, KVT_FSCK_WARN,
					 "ssd/seg-%06u: beyond the store's %u slots (ssd.capacity / "
					 "ssd.segment): not read when it opens", s, c.store_slots);
			continue;
		}
		if (!sizes[s]) {
			fsck_say(&c, KVT_FSCK_DAMAGE, "ssd/seg-%06u: missing (slots 0..%u exist)", s,
				 c.slots - 1);
			continue;
		}
		if ((r = check_segment(&c, s, sizes[s] - 1)) < 0)
			goto out;
	}
	if (c.n)
		qsort(c.recs, c.n, sizeof(*c.recs), rec_pos_cmp);
	check_checkpoint(&c);
	count_live(&c);
report:
	if (f->ns_info)
		for (uint32_t i = 0; i < c.ns_count; i++)
			f->ns_info(f->ctx, c.ns[i].id, c.ns[i].digest, c.ns[i].canon,
				   c.ns[i].blocks, c.ns[i].bytes);
	r = f->damaged || f->orphans ? KVT_ECORRUPT : 0;
out:
	if (d)
		closedir(d);
	if (c.dfd >= 0)
		close(c.dfd);
	if (lfd >= 0)
		close(lfd);
	if (pfd >= 0)
		close(pfd);
	for (uint32_t i = 0; i < c.ns_count; i++)
		free(c.ns[i].canon);
	free(c.ns);
	free(c.recs);
	free(c.gen);
	free(c.ck_gen);
	free(c.ck_off);
	free(c.ck);
	free(c.hbuf);
	free(c.clear_ns);
	free(c.buf);
	free(sizes);
	return r;
}

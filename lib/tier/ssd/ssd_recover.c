/*
 * ssd_recover.c - the SSD tier's checkpoints and recovery: writing the
 * index to ssd/checkpoint (temp file, fsync, rename, fsync of the
 * directory), and rebuilding the index at open from the newest checkpoint
 * plus only the records written after it (doc/ssd-format.md, "Recovery").
 *
 * Runs on the writer thread (checkpoints) or alone in ssd_open before any
 * other thread exists (recovery), so the slot table and clear table it
 * touches need seg_lock only for the checkpoint snapshot.
 */
#include <dirent.h>

#include "ssd_int.h"

/* ------------------------------------------------------------------------
 * Checkpoints
 */

struct ckpt_fill {
	struct ssd_ckpt_writer w;
	int err;
};

int ssd_ckpt_write(struct ssd *s)
{
	uint64_t entries = 0, key_bytes = 0, seq;
	uint32_t clears = 0;
	size_t cap;
	uint8_t *buf;
	struct ssd_ckpt_writer w;
	struct ssd_ckpt_hdr h;
	int64_t len;
	bool batches = false;
	int fd, r;

	r = ssd_sync_all(s); /* what the checkpoint names must be durable first */
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->seg_lock);
	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		entries += s->shards[i].count;
		pthread_mutex_unlock(&s->shards[i].lock);
	}
	key_bytes = entries * KVT_KEY_MAX;
	for (uint32_t i = 0; i < s->clear_cap; i++)
		clears += s->clear_seq[i] != 0;
	cap = ssd_ckpt_size(s->slot_count, clears, entries, key_bytes);
	buf = kvt_mem_alloc(s->mem, cap);
	if (!buf) {
		pthread_mutex_unlock(&s->seg_lock);
		return -ENOMEM;
	}
	/* Version 3 (its entries name batched values) only while a segment
	 * of format 3 holds some: else the checkpoint older kvtier reads. */
	for (uint32_t i = 0; i < s->slot_count; i++)
		batches |= s->segs[i].batches && s->segs[i].state != SEG_FREE &&
			   s->segs[i].state != SEG_BAD;
	ssd_ckpt_begin_version(&w, buf, cap, batches ? SSD_CKPT_VERSION_BATCH : SSD_FMT_VERSION);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_ckpt_slot sl = { s->segs[i].generation, s->segs[i].write_off };
		const struct ssd_seg *g = &s->segs[i];
		if (g->state == SEG_FREE || g->state == SEG_BAD)
			sl.generation = 0;
		/* A segment the open could not seal (its header still open)
		 * holds the values its walk left out as torn: the write point
		 * stops before the first, which recovery then checks again
		 * and fsck calls torn, not damage ("Values torn by a crash"). */
		if (!g->sealed_ok && g->torn_off && g->torn_off < sl.write_off)
			sl.write_off = g->torn_off;
		ssd_ckpt_put_slot(&w, &sl);
	}
	for (uint32_t i = 0; i < s->clear_cap; i++) {
		if (s->clear_seq[i]) {
			struct ssd_ckpt_clear c = { i, s->clear_seq[i] };
			ssd_ckpt_put_clear(&w, &c);
		}
	}
	seq = s->next_seq - 1;
	/* The writer thread is the only one that adds entries, and it is here:
	 * the index holds no PENDING entry but dead ones, and cannot grow
	 * meanwhile.  A dead entry (E_DEAD: a miss whose record is still on
	 * disk -- promoted out of the SSD, a read that failed its checks, a
	 * write-down that failed but may have landed, a quarantined slot's)
	 * is written as a block: a recovery from this checkpoint must know
	 * it, so that a delete of the block logs a tombstone.  Left out
	 * until 2026-12-06, the reopened store knew no entry, the delete
	 * logged none, and a later recovery that scanned the segments (the
	 * checkpoint damaged, removed, or of another slot count) brought the
	 * block back with its old bytes (test_ssd_fsck dead_ckpt).  Its
	 * record is read and checked as any: exact bytes or a miss. */
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		for (uint64_t b = 0; b < ssd_idx_chains(sh); b++) {
			for (struct ssd_entry *e = *ssd_idx_chain(sh, b); e; e = e->hnext) {
				struct ssd_ckpt_entry ce;
				if ((e->flags & E_PENDING) && !(e->flags & E_DEAD))
					continue;
				memset(&ce, 0, sizeof(ce));
				ce.e.type = SSD_REC_PUT;
				ce.e.ns_id = e->ns;
				ce.e.off_512 = e->off_512;
				ce.e.len_512 = e->len_512;
				ce.e.seq = e->seq;
				ce.e.value_len = e->value_len;
				ce.e.part_count = e->part_count;
				if (e->flags & E_BATCHED) {
					ce.e.flags = SSD_ENT_F_BATCHED |
						     (e->flags & E_SEALED_VALUE ? SSD_ENT_F_SEALED
										: 0);
					ce.e.value_crc = e->value_crc;
				}
				ce.e.key.len = e->key_len;
				memcpy(ce.e.key.bytes, e->key, e->key_len);
				ce.slot = e->slot;
				ce.generation = e->generation;
				if (ssd_ckpt_put_entry(&w, &ce) < 0)
					break;
			}
		}
		pthread_mutex_unlock(&sh->lock);
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.store_id, s->store_id, 16);
	h.seq = seq;
	h.slot_count = s->slot_count;
	h.clear_count = clears;
	h.entry_count = w.entries;
	len = ssd_ckpt_finish(&w, &h);
	s->seals_since_ckpt = 0;
	pthread_mutex_unlock(&s->seg_lock);
	if (len < 0) {
		kvt_mem_free(s->mem, buf, cap);
		return (int)len;
	}
	fd = openat(s->dir_fd, SSD_CKPT ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
	} else {
		size_t done = 0;
		r = 0;
		while (done < (size_t)len) {
			ssize_t n = write(fd, buf + done, (size_t)len - done);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				break;
			}
			done += (size_t)n;
		}
		if (r == 0 && fsync(fd) < 0)
			r = -errno;
		close(fd);
		if (r == 0 && renameat(s->dir_fd, SSD_CKPT ".tmp", s->dir_fd, SSD_CKPT) < 0)
			r = -errno;
		if (r == 0 && fsync(s->dir_fd) < 0)
			r = -errno;
	}
	kvt_mem_free(s->mem, buf, cap);
	if (r < 0) {
		/* A part written (ENOSPC) would hold on to the little room
		 * a full disk has; the previous checkpoint stays. */
		if (fd >= 0)
			(void)unlinkat(s->dir_fd, SSD_CKPT ".tmp", 0);
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint: %s", kvt_strerror(r));
	} else
		A(s->ckpts);
	return r;
}

/* ------------------------------------------------------------------------
 * Recovery
 *
 * Generations.  A generation is the only thing that tells a record (and
 * a checkpoint's entry or write point) of a slot's current segment from
 * one of an earlier use of the same file: segment files are reused in
 * place, so old records stay in them past a new segment's write point,
 * at offsets the new records may also take.  The walk of an open segment
 * takes the next record if its generation is the segment's; a checkpoint
 * entry is kept if its generation is its slot's.  So a generation is
 * never handed out twice in one directory: the next one is above every
 * generation any segment header there names -- of this store's segment
 * size or another's (a segment-size change frees every old segment but
 * leaves its records in the file), of this store's id or another's -- and
 * every one this store's checkpoint names, used or not (another slot
 * count).  Restarting at 1 after a segment-size change let the new
 * segment in slot 0 take generation 1, the old one's: the walk after a
 * crash went on into the old records, and the old checkpoint's entries
 * matched (test_ssd resize).  Sequence numbers likewise go on above an
 * unused checkpoint of this store, so that a later open that does use
 * it (the slot count changed back) skips none of the newer records.
 */


struct recovery {
	struct ssd *s;
	struct ssd_ckpt_hdr ck;
	bool have_ckpt;
	uint64_t *ck_gen, *ck_off;  /* per slot, from the checkpoint */
	uint64_t *fsize;            /* per slot, its file's size (0: none) */
	uint64_t ck_max_gen;        /* the highest generation the checkpoint names
				     * (used or not: "Generations" below) */
	struct ssd_ckpt_entry *items;
	size_t count, cap;
	uint32_t cur_slot;
	uint64_t cur_gen;
	uint64_t cur_sum_off;       /* the summary being read starts here */
	uint64_t max_seq;
	int err;
	/* Headerless slots (below): per slot 0, or HL_ZERO / HL_DAMAGED;
	 * the tombstones their walks found, applied as deletes alone. */
	uint8_t *headerless;
	struct ssd_ckpt_entry *tombs;
	size_t tomb_count, tomb_cap;
};

enum { HL_ZERO = 1, HL_DAMAGED = 2 };

static int rec_push(struct recovery *rc, const struct ssd_ckpt_entry *it)
{
	if (rc->count == rc->cap) {
		size_t ncap = rc->cap ? rc->cap * 2 : 1024;
		struct ssd_ckpt_entry *n = kvt_mem_realloc(rc->s->mem, rc->items,
							   rc->cap * sizeof(*n), ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rc->items = n;
		rc->cap = ncap;
	}
	rc->items[rc->count++] = *it;
	if (it->e.seq > rc->max_seq)
		rc->max_seq = it->e.seq;
	return 0;
}

/* doc/ssd-format.md: every record ends at or before summary_off; an entry
 * past it describes bytes that are not a record, and the summary is not
 * used (the records are walked instead).  A first pass, so that nothing
 * of a bad summary reaches the index. */
static int rec_sum_bound_cb(void *ctx, const struct ssd_sum_entry *e)
{
	const struct recovery *rc = ctx;
	const struct ssd_seg *g = &rc->s->segs[rc->cur_slot];
	/* A batched entry only in a segment of format 3. */
	return ssd_sum_entry_bound(e, g->rec_align, rc->cur_sum_off, g->batches) ? KVT_ECORRUPT
										   : 0;
}

static int rec_sum_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct recovery *rc = ctx;
	struct ssd_ckpt_entry it;
	if (rc->have_ckpt && e->seq <= rc->ck.seq)
		return 0; /* reflected in the checkpoint */
	it.e = *e;
	it.slot = rc->cur_slot;
	it.generation = rc->cur_gen;
	return rec_push(rc, &it);
}

static uint64_t clear_of(struct ssd *s, uint32_t ns)
{
	uint64_t a = s->clear_seq[0], b = ns < s->clear_cap ? s->clear_seq[ns] : 0;
	return a > b ? a : b;
}

/* Enter a PUT found in the checkpoint or a scan into the index (if its
 * namespace is known and no clear came after it).  0, -ENOMEM. */
static int rec_insert(struct ssd *s, const struct ssd_ckpt_entry *ce)
{
	struct ssd_entry e;
	uint64_t h;
	int r;

	if (!ns_reg_get(s->reg, ce->e.ns_id) || ce->e.seq <= clear_of(s, ce->e.ns_id)) {
		s->rec_dropped++;
		return 0;
	}
	memset(&e, 0, sizeof(e));
	e.seq = ce->e.seq;
	e.value_len = ce->e.value_len;
	e.generation = ce->generation;
	e.ns = ce->e.ns_id;
	e.slot = ce->slot;
	e.off_512 = ce->e.off_512;
	e.len_512 = ce->e.len_512;
	e.part_count = ce->e.part_count;
	if (ce->e.flags & SSD_ENT_F_BATCHED) {
		/* Format 3: off_512/len_512 name the value alone, checked on
		 * read by value_crc (callers take one only from a segment of
		 * format 3). */
		e.flags = E_BATCHED | (ce->e.flags & SSD_ENT_F_SEALED ? E_SEALED_VALUE : 0);
		e.value_crc = ce->e.value_crc;
	}
	e.key_len = (uint8_t)ce->e.key.len;
	memcpy(e.key, ce->e.key.bytes, ce->e.key.len);
	h = ssd_hash(s, e.ns, &ce->e.key);
	r = ssd_idx_put(s, h, &e, NULL);
	return r == -ENOMEM ? r : 0;
}

/* A checkpoint of this store that recovery does not use (another slot
 * count): only the generations it names. */
static int ck_gen_cb(void *ctx, uint32_t idx, const struct ssd_ckpt_slot *sl)
{
	struct recovery *rc = ctx;
	(void)idx;
	if (sl->generation > rc->ck_max_gen)
		rc->ck_max_gen = sl->generation;
	return 0;
}

static int ck_slot_cb(void *ctx, uint32_t idx, const struct ssd_ckpt_slot *sl)
{
	struct recovery *rc = ctx;
	ck_gen_cb(ctx, idx, sl);
	if (idx < rc->s->slot_count) {
		rc->ck_gen[idx] = sl->generation;
		rc->ck_off[idx] = sl->write_off;
	}
	return 0;
}

static int ck_clear_cb(void *ctx, const struct ssd_ckpt_clear *c)
{
	struct recovery *rc = ctx;
	ssd_clear_raise(rc->s, c->ns_id, c->seq);
	return 0;
}

static int ck_entry_cb(void *ctx, const struct ssd_ckpt_entry *ce)
{
	struct recovery *rc = ctx;
	struct ssd *s = rc->s;
	int r;

	/* A batched value only in a segment of format 3: elsewhere a miss,
	 * never a value looked for where a record header is. */
	if (ce->slot >= s->slot_count || s->segs[ce->slot].generation != ce->generation ||
	    s->segs[ce->slot].state == SEG_FREE ||
	    ((ce->e.flags & SSD_ENT_F_BATCHED) && !s->segs[ce->slot].batches)) {
		s->rec_dropped++;
		return 0;
	}
	/* A record past its file's end (the file cut short) is gone: a miss,
	 * and the checkpoint that names it is replaced after recovery, so
	 * that fsck does not report it until the next one (before
	 * 2026-12-06 it did; test_ssd_fsck seg_cut). */
	if (((uint64_t)ce->e.off_512 + ce->e.len_512) * SSD_REC_ALIGN > rc->fsize[ce->slot]) {
		s->rec_dropped++;
		s->rec_ckpt_gone++;
		s->rec_ckpt_damaged = true;
		return 0;
	}
	r = rec_insert(s, ce);
	if (r == 0)
		s->rec_ckpt_entries++;
	return r == -ENOMEM ? r : 0;
}

static void rec_load_ckpt(struct recovery *rc)
{
	struct ssd *s = rc->s;
	struct ssd_ckpt_cbs cbs = { ck_slot_cb, ck_clear_cb, ck_entry_cb };
	struct stat st;
	uint8_t *buf = NULL;
	const char *why = NULL;
	int fd, r;

	fd = openat(s->dir_fd, SSD_CKPT, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0)
		goto out;
	/*
	 * A checkpoint that cannot be used here and never will be -- cut to
	 * nothing, unreadable, failing its checks, another store's -- is
	 * replaced once recovery is done (ssd_open: rec_ckpt_damaged), so
	 * that it is not read, and reported by fsck, again at every open
	 * until the next periodic one.  Not one of another format version
	 * (an upgrade or a downgrade, read again by the kvtier that wrote it)
	 * or of another slot count (the operator may open with the old
	 * ssd.capacity again): those stay until the next periodic one.
	 */
	if (st.st_size <= 0 || st.st_size > (INT64_C(1) << 36)) {
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: checkpoint ignored (%lld bytes): scanning every segment",
			 (long long)st.st_size);
		s->rec_ckpt_damaged = true;
		goto out;
	}
	/* Aligned as O_DIRECT would want it (ssd.debug_check_align). */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, (size_t)st.st_size);
	if (!buf)
		goto out;
	r = ssd_pread_full(s, fd, buf, (size_t)st.st_size, 0);
	if (r < 0) {
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint ignored (%s): scanning every segment",
			 kvt_strerror(r));
		s->rec_ckpt_damaged = true;
		goto out;
	}
	/* Two passes: the header first, to check it is ours and sized right. */
	r = ssd_ckpt_decode(buf, (size_t)st.st_size, &rc->ck, NULL, NULL);
	if (r < 0 || (why = ssd_ckpt_ours(&rc->ck, s->store_id, s->slot_count))) {
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint ignored (%s): scanning every segment",
			 r < 0 ? kvt_strerror(r) : why);
		s->rec_ckpt_damaged = r < 0 ? r != KVT_EVERSION
					    : memcmp(rc->ck.store_id, s->store_id, 16) != 0;
		if (r == 0 && !ssd_ckpt_ours(&rc->ck, s->store_id, rc->ck.slot_count)) {
			/* This store's, of another slot count: generations and
			 * sequence numbers go on above its ("Generations"). */
			struct ssd_ckpt_cbs gen_only = { .slot = ck_gen_cb };
			(void)ssd_ckpt_decode(buf, (size_t)st.st_size, &rc->ck, &gen_only, rc);
			rc->max_seq = rc->ck.seq;
		}
		goto out;
	}
	r = ssd_ckpt_decode(buf, (size_t)st.st_size, &rc->ck, &cbs, rc);
	if (r < 0) {
		/* Entries already loaded are each checked on read; keep them,
		 * but scan everything as if there were no checkpoint. */
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: checkpoint: %s", kvt_strerror(r));
		goto out;
	}
	rc->have_ckpt = true;
	rc->max_seq = rc->ck.seq;
out:
	if (buf)
		kvt_mem_free(s->mem, buf, (size_t)st.st_size);
	close(fd);
}

/* Walk the records (and, in a segment of format 3, the batches) of a
 * segment without a summary, from byte `from`: one summary entry per
 * record or batched value (doc/ssd-format.md "Recovery of an open
 * segment"). */
static int rec_walk_take(struct recovery *rc, uint32_t slot, const struct ssd_sum_entry *se)
{
	struct ssd *s = rc->s;
	struct ssd_seg *g = &s->segs[slot];
	struct ssd_ckpt_entry it;

	/* The summary the crash prevented: rebuilt for sealing. */
	if (ssd_seg_sum_room(s, g, 1) < 0)
		return -ENOMEM;
	g->sum[g->sum_count++] = *se;
	g->sum_bytes += ssd_sum_entry_len(se, ssd_seg_sum_version(g));
	if (rc->have_ckpt && se->seq <= rc->ck.seq) {
		if (se->seq > rc->max_seq)
			rc->max_seq = se->seq;
		return 0;
	}
	memset(&it, 0, sizeof(it));
	it.e = *se;
	it.slot = slot;
	it.generation = g->generation;
	return rec_push(rc, &it);
}

/* The structure at off of slot's segment into st (buf, *cap bytes,
 * grown as its header asks, never past limit): ssd_struct_decode's
 * result, or KVT_ECORRUPT if it cannot be read; -ENOMEM. */
static int rec_walk_read(struct ssd *s, uint32_t slot, uint64_t off, uint64_t limit,
			 uint8_t **buf, size_t *cap, struct ssd_struct *st)
{
	struct ssd_seg *g = &s->segs[slot];
	uint32_t a = g->rec_align;
	int d;

	if (ssd_pread_full(s, g->fd, *buf, a, off) < 0)
		return KVT_ECORRUPT;
	d = ssd_struct_decode(*buf, a, off, a, g->batches, st);
	if (d == KVT_EBUFSMALL && st->hdr_len <= limit - off) {
		uint32_t want = st->hdr_len;
		if (want > *cap) {
			kvt_mem_free(s->mem, *buf, *cap);
			*cap = want;
			*buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, *cap);
			if (!*buf)
				return -ENOMEM;
		}
		if (ssd_pread_full(s, g->fd, *buf, want, off) < 0)
			return KVT_ECORRUPT;
		d = ssd_struct_decode(*buf, want, off, a, g->batches, st);
	}
	return d;
}

/* A walk's reads (ssd_walk, ssd_hl's): the structure at off of the
 * slot's file, laid out at align (a headerless slot's: its probe's; the
 * file's O_DIRECT or page cache set for that alignment), read into buf;
 * vbuf (vcap bytes, allocated at the first value checked): the values
 * rec_walk_took checks. */
struct rec_hl {
	struct recovery *rc;
	uint32_t slot;
	uint8_t *buf;
	size_t cap;
	uint8_t *vbuf;
	size_t vcap;
	uint64_t voff, vlen, vend; /* vbuf holds [voff, voff + vlen); vend: the walk's limit */
	uint64_t torn;             /* values rec_walk_took left out */
};

static int rec_hl_read(void *ctx, uint64_t off, uint64_t limit, uint32_t align,
		       struct ssd_struct *st)
{
	struct rec_hl *h = ctx;
	struct ssd *s = h->rc->s;

	if (s->segs[h->slot].rec_align != align)
		ssd_seg_set_align(s, h->slot, align);
	return rec_walk_read(s, h->slot, off, limit, &h->buf, &h->cap, st);
}

/*
 * Values torn by a crash.  A batch is one pwritev and a record one write:
 * a kill (or a power loss) can leave the header with only some of the
 * values' bytes after it, and the walk, which decodes headers, takes it.
 * Indexed, such a value was a miss at its first read (its CRC), but the
 * seal of leftovers (ssd_seal_leftovers) then wrote a summary naming it,
 * and the next checkpoint moved the segment's write point past it: fsck
 * called it torn (a warning) until then, and damage from then on -- a
 * store a kill had left "damaged" for good, against doc/ssd.md's write
 * point rule (test_crashloop, seed 1796608538: "batched value fails its
 * value_crc" two restarts after the kill; test_ssd_fsck torn_sealed).  So
 * every value the walk takes after the checkpoint (what recovery indexes
 * from the walk) is read and checked as a read checks it -- a batched
 * value by its value_crc, a record's parts by their CRC32C -- and one
 * that fails is left out of both the index and the summary: a miss, no
 * summary names it, fsck does not look at it again.  Its seq still
 * raises the store's counter, so that no later put takes it.  The cost:
 * one read of what the segment holds past the checkpoint, once per
 * recovery from a crash (bench/RESULTS.md, session 44).  What lies before
 * the checkpoint is the checkpoint's, and its damage stays damage.
 */
#define REC_VCHUNK ((size_t)1 << 20)

/* Bytes [off, off + n) of h's slot (n at most REC_VCHUNK, off and n
 * multiples of its alignment), through h->vbuf, which holds [h->voff,
 * h->voff + h->vlen) of the file: read again from off, REC_VCHUNK bytes
 * (no further than h->vend, the walk's limit), where it does not hold
 * them -- so the values of a segment's tail are read 1 MiB at a time, as
 * they lie, not one read each.  NULL if they cannot be read; *nomem set
 * if the buffer cannot be had. */
static const uint8_t *rec_vbytes(struct rec_hl *h, uint64_t off, size_t n, bool *nomem)
{
	struct ssd *s = h->rc->s;
	const struct ssd_seg *g = &s->segs[h->slot];
	size_t want = REC_VCHUNK;

	if (h->vlen && off >= h->voff && off + n <= h->voff + h->vlen)
		return h->vbuf + (off - h->voff);
	if (!h->vbuf) {
		h->vcap = REC_VCHUNK;
		h->vbuf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, h->vcap);
		if (!h->vbuf) {
			*nomem = true;
			return NULL;
		}
	}
	h->vlen = 0;
	if (off >= h->vend)
		return NULL;
	if (h->vend - off < want)
		want = (size_t)(h->vend - off);
	want -= want % g->rec_align;
	if (want < n || ssd_pread_full(s, g->fd, h->vbuf, want, off) < 0)
		return NULL;
	h->voff = off;
	h->vlen = want;
	return h->vbuf;
}

/* Batched value se of h's slot: 1 sound (its value_crc) or not readable
 * (an I/O error is no tear: indexed as before, its read checks it), 0
 * torn, -ENOMEM. */
static int rec_batched_ok(struct rec_hl *h, const struct ssd_sum_entry *se)
{
	uint64_t off = (uint64_t)se->off_512 * SSD_REC_ALIGN, left = se->value_len;
	uint64_t padded = (uint64_t)se->len_512 * SSD_REC_ALIGN;
	bool nomem = false;
	uint32_t crc = 0;

	while (left) {
		size_t n = padded < REC_VCHUNK ? (size_t)padded : REC_VCHUNK;
		size_t take = left < n ? (size_t)left : n;
		const uint8_t *p = n ? rec_vbytes(h, off, n, &nomem) : NULL;
		if (!p)
			return nomem ? -ENOMEM : n != 0;
		crc = kvt_crc32c(crc, p, take);
		off += n;
		padded -= n;
		left -= take;
	}
	return ssd_value_crc(crc, se->ns_id, &se->key, se->seq) == se->value_crc;
}

/* The record of len bytes at off of h's slot (its header rh, as the walk
 * decoded it): 1 sound (every part's CRC32C) or not readable (as
 * rec_batched_ok), 0 torn, -ENOMEM. */
static int rec_record_ok(struct rec_hl *h, const struct ssd_rec_hdr *rh, uint64_t off,
			 uint64_t len)
{
	struct ssd *s = h->rc->s;
	const struct ssd_seg *g = &s->segs[h->slot];
	size_t pl = (size_t)rh->part_count * sizeof(struct ssd_part);
	uint64_t pos = off + rh->hdr_len, end = off + len, left;
	struct ssd_part *parts;
	struct ssd_rec_hdr dh;
	const uint8_t *p;
	bool nomem = false;
	uint32_t part = 0, crc = 0;
	int ok = 1;

	if (rh->type != SSD_REC_PUT || rh->part_count == 0 || rh->hdr_len > REC_VCHUNK ||
	    len < rh->hdr_len)
		return 1; /* no value (or no header this reads: its read checks it) */
	if (!(parts = kvt_mem_alloc(s->mem, pl)))
		return -ENOMEM;
	if (!(p = rec_vbytes(h, off, rh->hdr_len, &nomem)))
		goto out; /* not a tear (above), or -ENOMEM */
	if (ssd_rec_hdr_decode(p, rh->hdr_len, g->rec_align, &dh, parts, rh->part_count) ||
	    dh.part_count != rh->part_count) {
		ok = 0;
		goto out;
	}
	left = parts[0].len;
	/* The value's bytes, a piece at a time, each part's CRC over its own. */
	while (part < dh.part_count && pos < end) {
		size_t n = end - pos < REC_VCHUNK ? (size_t)(end - pos) : REC_VCHUNK, at = 0;
		if (!(p = rec_vbytes(h, pos, n, &nomem)))
			goto out;
		/* (left 0 at n: a part of no bytes, checked too) */
		while (part < dh.part_count && (at < n || left == 0)) {
			size_t take = left < n - at ? (size_t)left : n - at;
			crc = kvt_crc32c(crc, p + at, take);
			at += take;
			left -= take;
			if (left == 0) {
				if (crc != parts[part].crc) {
					ok = 0;
					goto out;
				}
				crc = 0;
				if (++part < dh.part_count)
					left = parts[part].len;
			}
		}
		pos += n;
	}
	ok = part == dh.part_count;
out:
	kvt_mem_free(s->mem, parts, pl);
	return nomem ? -ENOMEM : ok;
}

/* se, taken by the walk at off (len bytes, a record's; 0 for a batched
 * value): is it for the index and the summary ("Values torn by a crash"
 * above)?  1 yes, 0 no (torn: counted, its seq kept), -ENOMEM. */
static int rec_walk_sound(struct rec_hl *h, const struct ssd_struct *st,
			  const struct ssd_sum_entry *se, uint64_t off, uint64_t len)
{
	struct recovery *rc = h->rc;
	struct ssd_seg *g = &rc->s->segs[h->slot];
	uint64_t voff = (uint64_t)se->off_512 * SSD_REC_ALIGN;
	int ok;

	/* The checkpoint's: older than it, and before its write point for
	 * this generation.  By seq alone, a value the walk of an earlier
	 * open left out as torn, in a segment that open could not seal
	 * (ENOSPC, EIO: its header still open), was taken unread once a
	 * checkpoint's seq passed it, and the seal's summary named it. */
	if (rc->have_ckpt && se->seq <= rc->ck.seq && rc->ck_gen[h->slot] == g->generation &&
	    voff + (uint64_t)se->len_512 * SSD_REC_ALIGN <= rc->ck_off[h->slot])
		return 1;
	ok = se->flags & SSD_ENT_F_BATCHED ? rec_batched_ok(h, se)
					   : rec_record_ok(h, &st->rec, off, len);
	if (ok == 0) {
		h->torn++;
		if (se->seq > rc->max_seq)
			rc->max_seq = se->seq;
		if (!g->torn_off || voff < g->torn_off)
			g->torn_off = voff;
	}
	return ok;
}

/* ssd_walk's take: a record, or each value of a batch, as a summary
 * entry of the slot -- each sound one (rec_walk_sound). */
static int rec_walk_took(void *ctx, const struct ssd_struct *st, uint64_t off, uint64_t len)
{
	struct rec_hl *h = ctx;
	const struct ssd_rec_hdr *rh = &st->rec;
	struct ssd_sum_entry se;
	int r = 0;

	if (st->kind == SSD_STRUCT_BATCH) {
		for (uint32_t i = 0; i < st->batch.count && r >= 0; i++) {
			ssd_batch_sum_entry(&st->batch, i, h->rc->s->segs[h->slot].rec_align, &se);
			r = rec_walk_sound(h, st, &se, 0, 0);
			if (r > 0)
				r = rec_walk_take(h->rc, h->slot, &se);
		}
		return r < 0 ? r : 0;
	}
	memset(&se, 0, sizeof(se));
	se.type = rh->type;
	se.ns_id = rh->ns_id;
	se.off_512 = (uint32_t)(off / SSD_REC_ALIGN);
	se.len_512 = (uint32_t)(len / SSD_REC_ALIGN);
	se.part_count = (uint16_t)rh->part_count;
	se.seq = rh->seq;
	se.value_len = rh->value_len;
	se.key = rh->key;
	r = rec_walk_sound(h, st, &se, off, len);
	return r > 0 ? rec_walk_take(h->rc, h->slot, &se) : r;
}

/* Walk slot's segment (ssd_walk) to at most limit: the segment's end, or
 * a sealed one's summary (records end before it; what lies past it was
 * never this summary's), and its file's end (a record cut there is not
 * taken); *end: where it ended.  Tombstones come in twins: a twin is
 * taken as nothing new, and a damaged copy does not end the walk when the
 * other is sound -- before 2026-12-06 the walk ended at a damaged
 * tombstone, and the block it deleted, in an older segment, came back
 * with its old bytes (test_ssd_fsck tomb_damaged). */
static int rec_walk(struct recovery *rc, uint32_t slot, uint64_t limit, uint64_t *end)
{
	struct ssd *s = rc->s;
	struct ssd_seg *g = &s->segs[slot];
	struct rec_hl h = { rc, slot, NULL, SSD_ALIGN * 4, NULL, 0, 0, 0, 0, 0 };
	struct ssd_struct *st = kvt_mem_alloc(s->mem, sizeof(*st)); /* ~8 KiB: not on the stack */
	struct ssd_walk w = { .read = rec_hl_read, .ctx = &h, .take = rec_walk_took, .tctx = &h,
			      .gen = g->generation, .limit = limit, .align = g->rec_align };
	int r = -ENOMEM;

	h.buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, h.cap);
	if (w.limit > s->cfg.seg_size)
		w.limit = s->cfg.seg_size;
	if (w.limit > rc->fsize[slot])
		w.limit = rc->fsize[slot];
	h.vend = w.limit;
	if (h.buf && st) {
		r = ssd_walk(&w, st);
		s->rec_twins_used += w.twins_used;
		*end = w.end;
	}
	if (h.torn) {
		s->rec_torn += h.torn;
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: seg-%06u: %llu values written after the checkpoint fail their CRC "
			 "(torn by a crash): left out of the index and the segment's summary, "
			 "misses", slot, (unsigned long long)h.torn);
	}
	if (h.vbuf)
		kvt_mem_free(s->mem, h.vbuf, h.vcap);
	if (h.buf)
		kvt_mem_free(s->mem, h.buf, h.cap);
	if (st)
		kvt_mem_free(s->mem, st, sizeof(*st));
	return r;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct ssd_ckpt_entry *x = a, *y = b;
	return x->e.seq < y->e.seq ? -1 : x->e.seq > y->e.seq;
}

/* Raise a namespace's clear sequence (0: every namespace).  seg_lock held
 * (or recovery, single-threaded).  A failed growth loses nothing at run
 * time: the index was swept already; only a later recovery would replay
 * older records of the namespace, which their own CLEAR record kills. */
void ssd_clear_raise(struct ssd *s, uint32_t ns, uint64_t seq)
{
	/* ns comes from disk: only registered namespaces (or 0, "all") get a
	 * slot, so the table is bounded by the registry, not by the file. */
	if (ns != 0 && !ns_reg_get(s->reg, ns))
		return;
	if (ns >= s->clear_cap) {
		uint32_t ncap = ns + 64 > ns ? ns + 64 : ns + 1;
		uint64_t *n = kvt_mem_realloc(s->mem, s->clear_seq, s->clear_cap * sizeof(*n),
					      ncap * sizeof(*n));
		if (!n)
			return;
		memset(n + s->clear_cap, 0, (ncap - s->clear_cap) * sizeof(*n));
		s->clear_seq = n;
		s->clear_cap = ncap;
	}
	if (seq > s->clear_seq[ns])
		s->clear_seq[ns] = seq;
}


/* Apply scanned records in sequence order. */
static int rec_apply(struct recovery *rc)
{
	struct ssd *s = rc->s;
	if (rc->count)
		qsort(rc->items, rc->count, sizeof(*rc->items), rec_cmp);
	for (size_t i = 0; i < rc->count; i++) {
		struct ssd_ckpt_entry *it = &rc->items[i];
		switch (it->e.type) {
		case SSD_REC_PUT:
			if (rec_insert(s, it) == -ENOMEM)
				return -ENOMEM;
			break;
		case SSD_REC_DELETE:
			ssd_idx_remove_key(s, it->e.ns_id, &it->e.key, it->e.seq);
			break;
		case SSD_REC_CLEAR_NS:
			ssd_clear_raise(s, it->e.ns_id, it->e.seq);
			ssd_idx_sweep(s, it->e.ns_id, UINT32_MAX, 0, it->e.seq);
			break;
		case SSD_REC_CLEAR_ALL:
			ssd_clear_raise(s, 0, it->e.seq);
			ssd_idx_sweep(s, KVT_NS_ALL, UINT32_MAX, 0, it->e.seq);
			break;
		}
	}
	s->rec_records = rc->count;
	return 0;
}

/*
 * Headerless slots.  A slot whose segment header is zero or fails its
 * checks is free: its blocks are misses and the slot is reused.  But its
 * records may hold tombstones, and the blocks they deleted lie in older,
 * sound segments: until 2026-12-06 those came back after the restart
 * with their old bytes whenever no newer checkpoint reflected the delete
 * (test_crashloop: 31 in 40 damage rounds, every one after a header was
 * flipped or zeroed; test_ssd_fsck hdr_damaged).  So such a slot is
 * walked as a segment left open is -- from offset 4096, under the
 * generation and record alignment of the structure found there (the
 * first write of every generation lies there, never a client's bytes),
 * the same predicate and twin rule (ssd_walk_struct, ssd_walk_twin) --
 * and only the tombstones found are kept, and applied only as deletes,
 * after every sound record (rec_apply_headerless).  The probe, the walk
 * and which tombstones count are ssdfmt's (ssd_hl_probe, ssd_hl_walk,
 * ssd_hl_reflected, ssd_hl_applies), which fsck calls too: what it
 * reports is what this applies.
 *
 * A tombstone only ever removes versions older than its seq; it makes
 * nothing visible, and its seq does not raise the store's sequence
 * counter: one above every seq sound data names acts as that seq on the
 * index (whose entries all come from sound data) and raises a clear seq
 * no further than the highest of those.  A zeroed header is also what
 * whole-segment eviction leaves (doc/ssd-format.md "Recovery" step 2):
 * an evicted segment's tombstones are older than the checkpoint, or, if
 * none is used, remove only versions older than themselves, which they
 * deleted when they were written.  So a tombstone found where it should
 * not be costs at worst a miss (doc/security.md "Tombstones under a
 * damaged segment header").  A slot whose tombstones were applied is
 * voided -- its file cut to nothing -- once a checkpoint that reflects
 * them is durable (ssd_void_headerless): a later open does not walk it
 * again, where its tombstones, of seqs the counter may have handed out
 * again since, would remove newer puts.  Cut, not its header and first
 * record zeroed (until 2026-12-06): then nothing named its generation
 * any more, an open after one that wrote nothing handed it out again, to
 * this slot (the lowest free), and the walk of that new segment after a
 * crash went on past its records into the old ones beyond the void --
 * puts of seqs above the new ones, stale bytes served (test_ssd_fsck
 * hdr_void_gen).
 */
/* ssd_hl's tombstone: kept if recovery applies it (ssd_hl_applies). */
static int rec_hl_tomb(void *ctx, const struct ssd_rec_hdr *h)
{
	struct rec_hl *hl = ctx;
	struct recovery *rc = hl->rc;
	struct ssd *s = rc->s;
	const struct ns_entry *nse = ns_reg_get(s->reg, h->ns_id);
	struct ssd_ckpt_entry it;

	if (!ssd_hl_applies(h, rc->have_ckpt ? rc->ck.seq : 0, nse ? nse->digest : NULL))
		return 0;
	if (rc->tomb_count == rc->tomb_cap) {
		size_t ncap = rc->tomb_cap ? rc->tomb_cap * 2 : 64;
		struct ssd_ckpt_entry *n = kvt_mem_realloc(s->mem, rc->tombs,
							   rc->tomb_cap * sizeof(*n),
							   ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rc->tombs = n;
		rc->tomb_cap = ncap;
	}
	memset(&it, 0, sizeof(it));
	it.e.type = h->type;
	it.e.ns_id = h->ns_id;
	it.e.seq = h->seq;
	it.e.key = h->key;
	it.slot = hl->slot;
	it.generation = h->generation;
	rc->tombs[rc->tomb_count++] = it;
	return 0;
}

static int rec_headerless(struct recovery *rc, uint32_t slot, uint64_t *max_gen)
{
	struct ssd *s = rc->s;
	struct ssd_seg *g = &s->segs[slot];
	size_t before = rc->tomb_count;
	struct rec_hl hl = { rc, slot, NULL, SSD_ALIGN, NULL, 0, 0, 0, 0, 0 };
	struct ssd_struct *st = kvt_mem_alloc(s->mem, sizeof(*st));
	struct ssd_hl w = { .read = rec_hl_read, .ctx = &hl, .limit = s->cfg.seg_size };
	bool in_ckpt;
	int r = 0;

	hl.buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, hl.cap);
	if (!hl.buf || !st) {
		r = -ENOMEM;
		goto out;
	}
	if (w.limit > rc->fsize[slot])
		w.limit = rc->fsize[slot];
	g->batches = true; /* a batch header decodes only where one was written */
	r = ssd_hl_probe(&w, st);
	if (r <= 0)
		goto out; /* nothing written there (a new file), or damaged too */
	r = 0;
	/* Its generation is no longer named by a header: new ones go on
	 * above it all the same ("Generations"). */
	if (w.gen > *max_gen)
		*max_gen = w.gen;
	/* Free at the checkpoint, and its generation handed out before it
	 * (every later one is above all the checkpoint names): its segment
	 * ended before the checkpoint, so its records are all reflected
	 * there -- an eviction's leftovers, skipped without a walk. */
	in_ckpt = slot < rc->ck.slot_count;
	if (ssd_hl_reflected(rc->have_ckpt, in_ckpt, in_ckpt ? rc->ck_gen[slot] : 0,
			     rc->ck_max_gen, w.gen))
		goto out;
	g->generation = w.gen;
	r = ssd_hl_walk(&w, st, rec_hl_tomb, &hl);
	s->rec_twins_used += w.twins_used;
	g->generation = 0;
	if (r == 0 && rc->tomb_count > before)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: seg-%06u: header %s over records of generation %llu: %zu "
			 "tombstones there applied, its blocks are misses",
			 slot, rc->headerless[slot] == HL_ZERO ? "zeroed" : "damaged",
			 (unsigned long long)w.gen, rc->tomb_count - before);
out:
	g->batches = false;
	if (hl.buf)
		kvt_mem_free(s->mem, hl.buf, hl.cap);
	if (st)
		kvt_mem_free(s->mem, st, sizeof(*st));
	return r;
}

/* The headerless slots' tombstones, after every sound record: a delete
 * removes the versions below its seq, a clear those of its namespace (or
 * all) and raises its clear seq, each with the seq bounded by sound data
 * (above). */
static void rec_apply_headerless(struct recovery *rc)
{
	struct ssd *s = rc->s;
	uint64_t top = rc->max_seq;

	for (size_t i = 0; i < rc->tomb_count; i++) {
		const struct ssd_ckpt_entry *t = &rc->tombs[i];
		uint64_t below = t->e.seq > top ? top + 1 : t->e.seq;
		uint64_t clear = t->e.seq > top ? top : t->e.seq;
		switch (t->e.type) {
		case SSD_REC_DELETE:
			ssd_idx_remove_key(s, t->e.ns_id, &t->e.key, below);
			break;
		case SSD_REC_CLEAR_NS:
			ssd_clear_raise(s, t->e.ns_id, clear);
			ssd_idx_sweep(s, t->e.ns_id, UINT32_MAX, 0, below);
			break;
		case SSD_REC_CLEAR_ALL:
			ssd_clear_raise(s, 0, clear);
			ssd_idx_sweep(s, KVT_NS_ALL, UINT32_MAX, 0, below);
			break;
		default:
			continue;
		}
		s->segs[t->slot].hdr_void = true;
		s->rec_hdr_tombs++;
	}
}

/* Void the headerless slots whose tombstones recovery applied (above),
 * now that a durable checkpoint reflects them: their file cut to nothing
 * and synced (an empty file is a free slot; its next segment allocates
 * it again), so that no record of their old generation is left for a
 * walk under that generation handed out again.  Alone in ssd_open,
 * before the writer starts.  A failure is logged: the next open walks
 * the slot again. */
void ssd_void_headerless(struct ssd *s)
{
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		if (!g->hdr_void)
			continue;
		g->hdr_void = false;
		if (g->fd < 0 || ftruncate(g->fd, 0) < 0 || fdatasync(g->fd) < 0)
			kvt_logf(s->log, KVT_LOG_WARN,
				 "ssd: seg-%06u: could not void it after applying its tombstones "
				 "(the next open walks it again)", i);
	}
}

int ssd_id_read(int ssd_dfd, uint8_t id[16])
{
	size_t got = 0;
	int fd = openat(ssd_dfd, SSD_ID, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	while (got < 16) {
		ssize_t n = pread(fd, id + got, 16 - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : KVT_ECORRUPT;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	return r;
}

int ssd_store_id(struct ssd *s)
{
	int fd, r;

	/* Only an id that is not there (or is cut short) is replaced: every
	 * segment and checkpoint then belongs to another store to this one.
	 * One that is there but cannot be read (EACCES: a file the server's
	 * user may not read, EIO, EMFILE) fails the open: replacing it threw
	 * the whole SSD tier away without a word until session 45 (test_ssd
	 * id_unreadable). */
	r = ssd_id_read(s->dir_fd, s->store_id);
	if (r == 0)
		return 0;
	if (r != -ENOENT && r != KVT_ECORRUPT) {
		kvt_logf(s->log, KVT_LOG_ERROR,
			 "ssd: cannot read the store id ssd/id: %s (not replaced: the "
			 "segments there would be another store's)", kvt_strerror(r));
		return r;
	}
	/* Cut short: written whole and renamed into place (below), an id is
	 * never left short by a crash -- something else damaged it, and the
	 * segments it named are dropped now as another store's.  Said, not
	 * silent (review45e; test_ssd id_short). */
	if (r == KVT_ECORRUPT)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: the store id ssd/id is cut short (damaged): replaced, and the "
			 "segments there are dropped as another store's");
	if (getrandom(s->store_id, 16, 0) != 16)
		return -EIO;
	fd = openat(s->dir_fd, SSD_ID ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, s->store_id, 16) != 16 || fsync(fd) < 0) {
		int e = -errno;
		close(fd);
		return e ? e : -EIO;
	}
	close(fd);
	if (renameat(s->dir_fd, SSD_ID ".tmp", s->dir_fd, SSD_ID) < 0)
		return -errno;
	return fsync(s->dir_fd) < 0 ? -errno : 0;
}

int ssd_recover(struct ssd *s)
{
	struct recovery rc;
	uint8_t *buf;
	uint64_t t0 = kvt_now_ns(), max_gen = 0;
	int r = 0;

	memset(&rc, 0, sizeof(rc));
	rc.s = s;
	rc.ck_gen = kvt_mem_calloc(s->mem, s->slot_count, sizeof(uint64_t));
	rc.ck_off = kvt_mem_calloc(s->mem, s->slot_count, sizeof(uint64_t));
	rc.fsize = kvt_mem_calloc(s->mem, s->slot_count, sizeof(uint64_t));
	rc.headerless = kvt_mem_calloc(s->mem, s->slot_count, 1);
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (!rc.ck_gen || !rc.ck_off || !rc.fsize || !rc.headerless || !buf) {
		r = -ENOMEM;
		goto out;
	}
	/* 1. Segment headers: which generation each slot holds. */
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		struct ssd_seg_hdr h;
		char name[32];
		int why;
		snprintf(name, sizeof(name), "seg-%06u", i);
		if (faccessat(s->dir_fd, name, F_OK, 0) < 0)
			continue;
		r = ssd_seg_open_file(s, i, false);
		if (r < 0)
			goto out;
		{
			struct stat fst;
			if (fstat(g->fd, &fst) == 0 && fst.st_size > 0)
				rc.fsize[i] = (uint64_t)fst.st_size;
		}
		/* Format 3 (batches, version 4) is read: its batches by
		 * value_crc, its framed records as before. */
		if (ssd_pread_full(s, g->fd, buf, SSD_ALIGN, 0) == 0 &&
		    ssd_seg_hdr_decode(buf, &h) == KVT_EVERSION) {
			if (h.version > SSD_SEG_VERSION_BATCH) {
				/* A newer kvtier wrote this: never overwrite what we
				 * cannot read. */
				kvt_logf(s->log, KVT_LOG_ERROR,
					 "ssd: segment %u has format version %u, newer than this "
					 "kvtier's %u: refusing to open",
					 i, h.version, SSD_SEG_VERSION_BATCH);
				r = KVT_EVERSION;
				goto out;
			}
			/* An older format (doc/ssd-format.md "Versions"): its blocks
			 * are dropped, the slot reused as free.  A cache loses
			 * nothing it cannot recompute, and nothing deleted comes
			 * back: its tombstones go with the blocks they covered. */
			s->rec_old_format++;
			continue;
		}
		if (ssd_pread_full(s, g->fd, buf, SSD_ALIGN, 0) < 0)
			continue; /* free: reused as such */
		if (ssd_seg_hdr_decode(buf, &h) < 0) {
			/* Free as well, but its records may hold tombstones
			 * ("Headerless", above): walked for them in step 3. */
			rc.headerless[i] = ssd_is_zero(buf, SSD_ALIGN) ? HL_ZERO : HL_DAMAGED;
			continue;
		}
		/* Whatever header this file holds, its records may lie in it
		 * past a new segment's write point: new generations go on
		 * above its ("Generations", above). */
		if (h.generation > max_gen)
			max_gen = h.generation;
		why = ssd_seg_hdr_ours(&h, i, s->cfg.seg_size, s->store_id);
		/* This store's, written under another ssd.segment: said below,
		 * with the setting that would keep it. */
		if (why == SSD_SEG_OTHER_SIZE && !s->rec_other_size++)
			s->rec_other_seg = h.seg_size;
		if (why != 0)
			continue; /* another size's, slot's or store's: free */
		g->generation = h.generation;
		/* Its records' alignment: O_DIRECT or the page cache for it. */
		ssd_seg_set_align(s, i, h.rec_align);
		g->batches = h.version == SSD_SEG_VERSION_BATCH;
		g->state = h.summary_len ? SEG_SEALED : SEG_OPEN;
		g->write_off = h.summary_len ? h.summary_off + h.summary_len : s->cfg.seg_size;
		/* stash the summary location for step 3 */
		g->sum_bytes = h.summary_len;
		g->write_off = h.summary_off;
	}
	/* 2. The checkpoint. */
	rec_load_ckpt(&rc);
	/* 3. Segments with records newer than the checkpoint.  A long
	 * recovery says how far it got, once a second (kvtierd logs it). */
	uint64_t said = t0;
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		uint64_t sum_off = g->write_off, sum_len = g->sum_bytes;
		bool same = rc.have_ckpt && rc.ck_gen[i] == g->generation;
		if (kvt_now_ns() - said >= 1000000000u) {
			said = kvt_now_ns();
			kvt_logf(s->log, KVT_LOG_INFO,
				 "ssd: recovering: %u of %u segments looked at, %zu records read",
				 i, s->slot_count, rc.count);
		}
		if (g->state == SEG_FREE) {
			if (rc.headerless[i] && (r = rec_headerless(&rc, i, &max_gen)) < 0)
				goto out;
			continue;
		}
		g->sum_bytes = 0;
		rc.cur_slot = i;
		rc.cur_gen = g->generation;
		if (g->state == SEG_SEALED && sum_off + sum_len > rc.fsize[i]) {
			/* Its file cut short of its summary: walked up to the
			 * file's end and sealed again there, as a segment a
			 * crash left open (ssd_seal_leftovers), so that its
			 * header names a summary that is there (fsck clean). */
			uint64_t end = SSD_ALIGN;
			s->rec_segments++;
			r = rec_walk(&rc, i, sum_off, &end);
			if (r < 0)
				goto out;
			g->state = SEG_OPEN;
			g->write_off = end;
			g->sum_bytes += 64;
			s->rec_ckpt_damaged |= rc.have_ckpt;
			continue;
		}
		if (g->state == SEG_SEALED) {
			g->write_off = sum_off + sum_len;
			g->rec_end = sum_off;
			/* Sealed before the checkpoint and unchanged: nothing newer. */
			if (same && rc.ck_off[i] >= sum_off)
				continue;
			s->rec_segments++;
			{
				uint8_t *sum = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, sum_len);
				int64_t n = -ENOMEM;
				rc.cur_sum_off = sum_off;
				/* A summary that cannot be read (the file cut short, an
				 * I/O error) is a bad one, not out of memory: walked. */
				if (sum && ssd_pread_full(s, g->fd, sum, sum_len, sum_off) < 0)
					n = KVT_ECORRUPT;
				else if (sum)
					n = ssd_sum_decode(sum, sum_len, g->generation,
							   rec_sum_bound_cb, &rc);
				if (n >= 0)
					n = ssd_sum_decode(sum, sum_len, g->generation, rec_sum_cb,
							   &rc);
				if (sum)
					kvt_mem_free(s->mem, sum, sum_len);
				if (n == -ENOMEM) {
					r = -ENOMEM;
					goto out;
				}
				if (n < 0) {
					/* Bad summary: walk the records instead. */
					uint64_t end;
					r = rec_walk(&rc, i, sum_off, &end);
					ssd_seg_sum_free(s, g);
					if (r < 0)
						goto out;
				}
			}
		} else {
			/* Open when the process stopped: walk it, then seal it. */
			uint64_t end = SSD_ALIGN;
			s->rec_segments++;
			r = rec_walk(&rc, i, s->cfg.seg_size, &end);
			if (r < 0)
				goto out;
			g->write_off = end;
			g->sum_bytes += 64;
		}
	}
	if (s->rec_old_format)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: %llu segments of an older format (before version %u) dropped: "
			 "their blocks are misses, the space is reused",
			 (unsigned long long)s->rec_old_format, SSD_FMT_VERSION);
	s->unread_pending = true; /* ssd_void_unread_locked looks */
	if (s->rec_other_size)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: %llu segments were written with ssd.segment=%llu, not this "
			 "store's %llu: their blocks are not recovered and their files are voided "
			 "at the first write (to keep them, stop now and open with ssd.segment=%llu)",
			 (unsigned long long)s->rec_other_size,
			 (unsigned long long)s->rec_other_seg, (unsigned long long)s->cfg.seg_size,
			 (unsigned long long)s->rec_other_seg);
	if (rc.ck_max_gen > max_gen)
		max_gen = rc.ck_max_gen;
	s->next_gen = max_gen + 1;
	r = rec_apply(&rc);
	if (r < 0)
		goto out;
	rec_apply_headerless(&rc);
	s->next_seq = rc.max_seq + 1;
	for (uint32_t i = 0; i < s->slot_count; i++)
		if (s->segs[i].generation >= s->next_gen)
			s->next_gen = s->segs[i].generation + 1;
out:
	s->rec_ns = kvt_now_ns() - t0;
	kvt_mem_free(s->mem, rc.items, rc.cap * sizeof(*rc.items));
	kvt_mem_free(s->mem, rc.ck_gen, s->slot_count * sizeof(uint64_t));
	kvt_mem_free(s->mem, rc.ck_off, s->slot_count * sizeof(uint64_t));
	kvt_mem_free(s->mem, rc.fsize, s->slot_count * sizeof(uint64_t));
	kvt_mem_free(s->mem, rc.headerless, s->slot_count);
	kvt_mem_free(s->mem, rc.tombs, rc.tomb_cap * sizeof(*rc.tombs));
	if (buf)
		kvt_mem_free(s->mem, buf, SSD_ALIGN);
	return r;
}

/*
 * The segment files this open does not read: a slot's file whose header is
 * this store's under another ssd.segment, and a file of this store past the
 * slot count (ssd.capacity lowered).  Recovery leaves them alone, so that
 * an operator who stops at the warning and opens with the old settings
 * keeps their blocks.  But a tombstone this open logs lies in segments a
 * later open with the old settings does not read (another size), or may
 * have been evicted by then (a smaller log), while their records are
 * read again: a block deleted in between, its delete answered, came back
 * with its older bytes (test_crashloop_resize: 192 and 214 of 256 keys).
 * So they are voided -- cut to nothing, synced -- before this open's
 * first new segment, which comes before any record it writes.  Cut, not
 * their header zeroed (until 2026-12-06): a zeroed header over records
 * is a headerless slot to every later open (rec_headerless), which
 * walked the old records for tombstones whenever it used no checkpoint
 * (a kill before this open's first) and applied them -- tombstones of
 * seqs this open's counter, which never saw them, handed out again to
 * its own puts: a put made after the change, flushed, was a miss after
 * the next restart (test_ssd_fsck void_other_size).  An empty file is a
 * free slot; the slot's next segment allocates it again, and where the
 * file system has no room by then it takes the no-room path (ssd.c
 * "Room") as a new file's would.
 */
static int void_one(struct ssd *s, int fd, uint32_t slot, uint8_t *buf, bool any_size)
{
	struct ssd_seg_hdr h;
	int why;

	if (ssd_pread_full(s, fd, buf, SSD_ALIGN, 0) < 0 || ssd_seg_hdr_decode(buf, &h) < 0)
		return 0; /* no header of this version: nothing to read there */
	why = ssd_seg_hdr_ours(&h, slot, any_size ? h.seg_size : s->cfg.seg_size, s->store_id);
	if (why != (any_size ? 0 : SSD_SEG_OTHER_SIZE))
		return 0;
	if (ftruncate(fd, 0) < 0 || fdatasync(fd) < 0)
		return -EIO;
	kvt_logf(s->log, KVT_LOG_INFO,
		 "ssd: segment file seg-%06u (ssd.segment=%llu%s) voided (cut to nothing) before "
		 "the first write",
		 slot, (unsigned long long)h.seg_size, slot >= s->slot_count ? ", past the count" : "");
	return 0;
}

int ssd_void_unread_locked(struct ssd *s)
{
	uint8_t *buf;
	struct dirent *e;
	DIR *d = NULL;
	int fd, r = 0;

	if (!s->unread_pending)
		return 0;
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (!buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->slot_count && r == 0; i++)
		if (s->segs[i].state == SEG_FREE && s->segs[i].fd >= 0)
			r = void_one(s, s->segs[i].fd, i, buf, false);
	fd = r == 0 ? fcntl(s->dir_fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd >= 0) {
		d = fdopendir(fd);
		if (!d)
			close(fd);
	}
	if (r == 0 && !d)
		r = -errno;
	while (d && r == 0 && (e = readdir(d))) {
		unsigned slot;
		char tail;
		int sfd;

		if (sscanf(e->d_name, "seg-%6u%c", &slot, &tail) != 1 || slot < s->slot_count ||
		    strlen(e->d_name) != 10)
			continue;
		sfd = openat(s->dir_fd, e->d_name, O_RDWR | O_CLOEXEC);
		if (sfd < 0)
			continue;
		r = void_one(s, sfd, slot, buf, true);
		close(sfd);
	}
	if (d)
		closedir(d);
	kvt_mem_free(s->mem, buf, SSD_ALIGN);
	if (r < 0)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: could not void a segment file this store does not read: %s (tried "
			 "again at the next segment; until then a delete may not hold if the store "
			 "is reopened with the old ssd.segment or ssd.capacity)", kvt_strerror(r));
	else
		s->unread_pending = false;
	return r;
}

/* Seal the segments a crash left open (their summaries were rebuilt by the
 * walk).  Runs on the writer's behalf before it starts. */
void ssd_seal_leftovers(struct ssd *s)
{
	pthread_mutex_lock(&s->seg_lock);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state == SEG_OPEN) {
			s->open_slot = (int32_t)i;
			ssd_seg_seal_locked(s);
		}
	}
	s->seals_since_ckpt = 0;
	pthread_mutex_unlock(&s->seg_lock);
}

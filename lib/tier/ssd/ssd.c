/*
 * ssd.c - the SSD tier (G3): a log-structured store of blocks on local
 * flash, under the DRAM tier, that survives restarts and faults.
 *
 * Owns: the segment files (ssd/seg-NNNNNN), the checkpoint, the in-memory
 * index of what is on SSD (the index and segment-file helpers are in
 * ssd_idx.c, below this file and ssd_recover.c), the write-down thread,
 * and an I/O engine (io.c).
 * Formats: ssdfmt.c and doc/ssd-format.md.  Design notes: doc/ssd.md.
 *
 * Writes.  Blocks reach SSD only by write-down from DRAM: the DRAM tier's
 * admission hook (ssd_admit) queues a pinned block; one writer thread
 * assigns it a sequence number and space at the end of the open segment,
 * enters it in the index as PENDING, and submits one O_DIRECT write of
 * [record header][the DRAM chunks themselves] -- no copy.  Its completion
 * publishes the index entry and unpins the DRAM block.  A write-down queue
 * holding more than wd_max_bytes sheds new blocks (counted) instead of
 * stalling puts.  Deletes and clears update the index at once and log a
 * tombstone record through the same writer, so recovery never brings back
 * what was deleted.
 *
 *   segment: [hdr 4K][rec][rec]...[rec][summary]   <- sealed when full
 *            summary: every record's (key, seq, offset), for recovery and
 *            eviction
 *
 * Reads.  A DRAM miss that the index knows is promoted: DRAM space is
 * reserved, the record is read into it with one O_DIRECT read (header into
 * a small buffer, value straight into the DRAM chunks), the index entry
 * is looked up again (still that record: ssd_entry_same), the header is
 * checked against the index (key, namespace digest, sequence, generation)
 * and every part's CRC32C against the bytes, and only then is the block
 * published in DRAM.  Anything that fails is a miss, counted, never bytes.
 *
 * Eviction: FIFO by segment (oldest generation first).  By default
 * (ssd.reuse=progressive, watermarks 100/100) the writer that needs a slot
 * and finds none free reuses the oldest segment's slot in place: a new
 * generation, its header synced first, and the old records stay indexed
 * and readable until the new writes reach them, each reclaimed just before
 * (seg_reclaim_upto_locked), the rest at the seal.  With ssd.reuse=whole,
 * or watermarks below 100, whole segments go at once when at least
 * high_pct of the slots are used, down to low_pct.  No garbage-collection
 * copying of cold data.  Blocks read while in the dropped segment get a
 * second chance (at most reinsert_pct of a segment): written down again
 * from DRAM if DRAM holds them, else read back from the segment and
 * carried to the log's head (T_CARRY, their index entry kept PENDING
 * meanwhile so that a delete still finds it).  Blocks promoted
 * at least twice that are not reinserted are read back from the dropped
 * segment and handed to the eviction hook (the shared tier).
 *
 * Recovery: the newest checkpoint, then only records newer than it (see
 * doc/ssd-format.md "Recovery").  A segment left open by a crash is walked
 * record by record and sealed.
 *
 * Locks: index shard locks; seg_lock guards the slot table, the sequence
 * and generation counters and the open segment's summary; wd_lock guards
 * the write-down queue and in-flight counters; ns_lock the persistent
 * flags; pf_lock (a leaf) the promotions in flight.  Order: seg_lock ->
 * DRAM shard lock (eviction pins blocks to reinsert them) -> wd_lock /
 * ns_lock (the DRAM admission hook takes these under a DRAM shard lock)
 * -> SSD shard lock (ssd_put_over, under a DRAM shard lock as DRAM's
 * put-if-absent asks it, and under wd_lock); no SSD shard lock is held
 * while another lock is taken.  Only the writer thread holds
 * seg_lock across I/O, and I/O completions never take seg_lock (they mark
 * a slot bad or broken; the writer acts on it), or they could deadlock
 * with it.  The writer is the only thread that allocates space, seals,
 * evicts, quarantines or checkpoints.
 */
#include <sys/statvfs.h>

#include "ssd_int.h"

/* ------------------------------------------------------------------------
 * Record I/O in single-buffer parts
 */

static void multi_part_done(struct io_req *r)
{
	struct multi_io *m = r->ctx;
	uint64_t want = 0;
	for (unsigned i = 0; i < r->iov_count; i++)
		want += r->iov[i].iov_len;
	if (r->res < 0) {
		int64_t zero = 0;
		atomic_compare_exchange_strong(&m->err, &zero, r->res);
	} else if ((uint64_t)r->res != want) {
		int64_t zero = 0;
		/* Short: not a device error (no quarantine), just not the record. */
		atomic_compare_exchange_strong(&m->err, &zero, -ENODATA);
	} else {
		atomic_fetch_add(&m->total, r->res);
	}
	if (atomic_fetch_sub(&m->left, 1) == 1) {
		int64_t err = atomic_load(&m->err);
		m->done(m, err ? err : atomic_load(&m->total));
	}
}

/*
 * Submit iov[0..n) from byte off.  Large records (value >= SSD_SPLIT_MIN)
 * go as consecutive single-buffer requests, so their DRAM runs use the
 * registered buffers; smaller ones as one vectored request, since a second
 * device request per record costs more than fixed buffers save (64 KiB
 * records ran at 0.7 of fio split, on this machine).
 */
#define SSD_SPLIT_MIN (UINT64_C(1) << 20)

static void multi_submit(struct ssd *s, struct multi_io *m, int op, int prio, int fd,
			 uint64_t off, const struct iovec *iov, unsigned n,
			 void (*done)(struct multi_io *, int64_t), void *ctx)
{
	uint64_t value = 0;
	for (unsigned i = 1; i < n; i++)
		value += iov[i].iov_len;
	if (value < SSD_SPLIT_MIN) {
		struct io_req *r = &m->req[0];
		m->n = 1;
		atomic_init(&m->left, 1);
		atomic_init(&m->total, 0);
		atomic_init(&m->err, 0);
		m->done = done;
		m->ctx = ctx;
		memset(r, 0, sizeof(*r));
		r->opcode = (uint8_t)op;
		r->prio = (uint8_t)prio;
		r->fd = fd;
		r->off = off;
		r->iov = iov;
		r->iov_count = n;
		r->done = multi_part_done;
		r->ctx = m;
		io_submit(s->io, r);
		return;
	}
	m->n = n;
	atomic_init(&m->left, n);
	atomic_init(&m->total, 0);
	atomic_init(&m->err, 0);
	m->done = done;
	m->ctx = ctx;
	for (unsigned i = 0; i < n; i++) {
		struct io_req *r = &m->req[i];
		memset(r, 0, sizeof(*r));
		r->opcode = (uint8_t)op;
		r->prio = (uint8_t)prio;
		r->fd = fd;
		r->off = off;
		r->iov = &iov[i];
		r->iov_count = 1;
		r->done = multi_part_done;
		r->ctx = m;
		off += iov[i].iov_len;
	}
	/* After this loop the first completion may free m's owner: submit
	 * from a copy of the count. */
	for (unsigned i = 0; i < n; i++)
		io_submit(s->io, &m->req[i]);
}

/* A write into slot failed: the writer seals the segment at its next step. */
static void seg_mark_broken(struct ssd *s, uint32_t slot)
{
	atomic_store(&s->segs[slot].broken, true);
}

/*
 * Quarantine slot: its blocks become misses, their entries kept dead
 * (ssd_idx_kill) until the store reopens, since the segment is not voided
 * on disk and a delete must still find them to log its tombstone.  The
 * writer thread, seg_lock held (seg_lock before a shard's lock, as a
 * sweep takes them).
 */
static void seg_quarantine_locked(struct ssd *s, uint32_t slot, int err)
{
	struct ssd_seg *g = &s->segs[slot];
	uint64_t gen = g->generation, old_gen = g->old_gen, n;

	if (s->open_slot == (int32_t)slot) {
		ssd_seg_sum_free(s, g);
		s->open_slot = -1;
	}
	g->state = SEG_BAD;
	if (old_gen) {
		/* A generation being reclaimed here goes too. */
		kvt_mem_free(s->mem, g->old_sum, g->old_cap * sizeof(*g->old_sum));
		g->old_sum = NULL;
		g->old_count = g->old_next = 0;
		g->old_cap = 0;
		g->old_gen = 0;
	}
	/* Judged at the mark; again now that syncs skip it, for a tombstone
	 * the writer placed there meanwhile. */
	ssd_seg_tombs_check(s, slot, err);
	n = gen ? ssd_idx_kill(s, slot, gen) : 0;
	if (old_gen)
		n += ssd_idx_kill(s, slot, old_gen);
	/* Its records stay on disk (not voided, not reused until the store
	 * reopens), and the tombstones of the deletes of its dead entries lie
	 * in segments the log may reuse before then: a recovery walking it
	 * with no checkpoint newer than this would bring those blocks back.
	 * A checkpoint now (it names the slot free, and a walk skips what it
	 * reflects) makes its records void for recovery (before review28:
	 * test_ssd quarantine_wrap_kill9). */
	s->ckpt_due = true;
	atomic_fetch_add(&s->quarantined, 1); /* release: after the kill */
	kvt_logf(s->log, KVT_LOG_ERROR, "ssd: segment %u quarantined after %s; %llu blocks dropped",
		 slot, kvt_strerror(err), (unsigned long long)n);
}

/* Writer thread: quarantine every slot marked bad; their blocks become misses. */
static void seg_quarantine_pending(struct ssd *s)
{
	for (uint32_t slot = 0; slot < s->slot_count; slot++) {
		int err = atomic_load(&s->segs[slot].bad_err);
		if (!err)
			continue;
		pthread_mutex_lock(&s->seg_lock);
		if (s->segs[slot].state != SEG_BAD)
			seg_quarantine_locked(s, slot, err);
		pthread_mutex_unlock(&s->seg_lock);
	}
}

static bool reinsert_cb_budget(struct ssd *s, uint64_t *budget, uint64_t len)
{
	(void)s;
	if (*budget < len)
		return false;
	*budget -= len;
	return true;
}

static void wd_enqueue(struct ssd *s, struct wd_task *t, int lane);
static void wd_task_free(struct ssd *s, struct wd_task *t);

/* A batched value (format 3) read back from the segment being reclaimed
 * into dst (rec_len bytes: the value and its padding, from its index
 * entry), and checked by its value_crc (vcrc); *crc: the value's plain
 * CRC32C, its one part's.  False if it could not be read or fails. */
static bool evict_read_batched(struct ssd *s, uint32_t slot, uint32_t ns,
			       const struct kvt_key *key, uint64_t seq, uint64_t off,
			       uint64_t rec_len, uint64_t value_len, uint32_t vcrc, uint8_t *dst,
			       uint32_t *crc)
{
	if (ssd_pread_full(s, s->segs[slot].fd, dst, rec_len, off) < 0)
		return false;
	*crc = kvt_crc32c(0, dst, value_len);
	return ssd_value_crc(*crc, ns, key, seq) == vcrc;
}

/* A hot block leaves: read its record back from the segment being
 * evicted (its bytes are intact until the slot is reused), check it, and
 * hand it to the eviction hook.  A batched value (format 3: vcrc its
 * value_crc, sealed from its index entry) is read alone and handed over
 * as one part, buf[0, value_len).  seg_lock held (the writer thread). */
static void evict_to_hook(struct ssd *s, uint32_t slot, uint32_t ns, const struct kvt_key *key,
			  uint64_t seq, uint64_t off, uint64_t rec_len, uint64_t value_len,
			  unsigned pc, uint64_t gen, bool batched, uint32_t vcrc, bool sealed)
{
	const struct ssd_evict_hook *hk = s->evict_hook;
	uint32_t align = batched ? SSD_REC_ALIGN : ssd_rec_align_of(pc, value_len, rec_len);
	uint32_t hdr_len = batched ? 0 : ssd_rec_hdr_len(pc, align);
	struct ssd_rec_hdr rh;
	struct ssd_part *parts = NULL;
	uint64_t *lens = NULL, o;
	uint32_t *crcs = NULL;
	uint8_t *buf = NULL;
	size_t pl = (size_t)pc * (sizeof(*parts) + sizeof(*lens) + sizeof(*crcs));
	bool ok;

	/* A batched value's entry: one part, its padding under 4096 bytes
	 * (promote_from_entry's test) */
	if (batched && (pc != 1 || rec_len < value_len || rec_len - value_len >= SSD_REC_ALIGN_4K))
		pc = 0;
	if (pc == 0 || align == 0 || !hk->reserve(s->evict_ctx, ns, value_len))
		return;
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, rec_len);
	parts = kvt_mem_alloc(s->mem, pl);
	if (batched) {
		ok = buf && parts;
		if (ok) {
			lens = (uint64_t *)(parts + pc);
			crcs = (uint32_t *)(lens + pc);
			lens[0] = value_len;
			ok = evict_read_batched(s, slot, ns, key, seq, off, rec_len, value_len,
						vcrc, buf, &crcs[0]);
		}
	} else {
		ok = buf && parts && ssd_pread_full(s, s->segs[slot].fd, buf, rec_len, off) == 0 &&
		     ssd_rec_hdr_decode(buf, hdr_len, align, &rh, parts, pc) == 0 &&
		     rh.type == SSD_REC_PUT && rh.seq == seq && rh.ns_id == ns &&
		     rh.part_count == pc && rh.value_len == value_len && rh.key.len == key->len &&
		     memcmp(rh.key.bytes, key->bytes, key->len) == 0;
		if (ok) {
			lens = (uint64_t *)(parts + pc);
			crcs = (uint32_t *)(lens + pc);
			o = hdr_len;
			for (unsigned p = 0; p < pc && ok; p++) {
				lens[p] = parts[p].len;
				crcs[p] = parts[p].crc;
				ok = kvt_crc32c(0, buf + o, lens[p]) == crcs[p];
				o += lens[p];
			}
			sealed = rh.flags & SSD_REC_F_SEALED;
		}
	}
	if (!ok) {
		hk->take(s->evict_ctx, ns, key, NULL, 0, 0, value_len, 0, NULL, NULL, 0, gen);
		if (buf)
			kvt_mem_free(s->mem, buf, rec_len);
	} else {
		hk->take(s->evict_ctx, ns, key, buf, rec_len, hdr_len, value_len, pc, lens, crcs,
			 sealed ? KVT_F_SEALED : 0, gen);
		A(s->evicted_handed);
	}
	if (parts)
		kvt_mem_free(s->mem, parts, pl);
}

struct evict_ctx {
	struct ssd *s;
	uint32_t slot;
	uint64_t gen;
	uint64_t dropped;
	uint64_t budget;
};

/*
 * Read a hot record of the segment being reclaimed back (its bytes are
 * intact until the slot is reused), check it against the index entry
 * (header, key, seq, every part's CRC32C), and queue it to be written
 * again at the log's head (T_CARRY).  Its index entry stays, PENDING,
 * until that write replaces it: a delete or clear meanwhile finds it,
 * removes it and logs its tombstone, and the carry is then dropped
 * (wd_carry_write).  Writer thread, seg_lock held.  False if the record
 * could not be carried (the caller drops the entry).
 */
/* A batched value (format 3) is carried as a record of one part: its
 * bytes read back into the record's place after a header, checked by its
 * value_crc (vcrc), the part's CRC taken from that check; written framed
 * (wd_carry_write), or at format 3 as a value of a batch (wd_batch_prep).
 * rec_len: the value's padded length on disk. */
static bool evict_carry_batched(struct ssd *s, uint32_t slot, uint32_t ns,
				const struct kvt_key *key, uint64_t seq, uint64_t off,
				uint64_t rec_len, uint64_t value_len, uint32_t vcrc, bool sealed)
{
	uint32_t align = s->rec_align, hdr_len = ssd_rec_hdr_len(1, align);
	uint64_t len = ssd_rec_len(1, value_len, align);
	struct ssd_part *part = NULL;
	struct wd_task *t = NULL;
	uint8_t *buf = NULL;
	bool ok;

	if (rec_len != align_rec(value_len, align) || len > UINT32_MAX)
		return false; /* another alignment: dropped, as a record of it */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, len);
	part = kvt_mem_alloc(s->mem, sizeof(*part));
	t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	ok = buf && part && t &&
	     evict_read_batched(s, slot, ns, key, seq, off, rec_len, value_len, vcrc,
				buf + hdr_len, &part->crc);
	if (ok)
		part->len = value_len;
	if (!ok) {
		if (buf)
			kvt_mem_free(s->mem, buf, len);
		if (part)
			kvt_mem_free(s->mem, part, sizeof(*part));
		if (t)
			kvt_mem_free(s->mem, t, sizeof(*t));
		return false;
	}
	memset(buf, 0, hdr_len); /* wd_carry_write encodes the header there */
	A(s->batched_carried);
	t->type = T_CARRY;
	t->s = s;
	t->ns = ns;
	t->key = *key;
	t->value_len = value_len;
	t->part_count = 1;
	t->hdr = buf;
	t->hdr_len = (uint32_t)len;
	t->carry_parts = part;
	t->carry_seq = seq;
	t->carry_flags = sealed ? SSD_REC_F_SEALED : 0;
	pthread_mutex_lock(&s->wd_lock);
	s->wd_bytes += value_len;
	pthread_mutex_unlock(&s->wd_lock);
	wd_enqueue(s, t, WD_BACK);
	return true;
}

static bool evict_carry(struct ssd *s, uint32_t slot, uint32_t ns, const struct kvt_key *key,
			uint64_t seq, uint64_t off, uint64_t rec_len, uint64_t value_len,
			unsigned pc)
{
	uint32_t align = s->rec_align, hdr_len = ssd_rec_hdr_len(pc, align);
	struct ssd_rec_hdr rh;
	struct ssd_part *parts = NULL;
	struct wd_task *t = NULL;
	uint8_t *buf = NULL;
	uint64_t o = hdr_len;
	bool ok;

	/* A carry writes the record's bytes again as they are: only a record
	 * of the open segment's alignment can go (ssd.dio_align changed since
	 * it was written: it is dropped, once). */
	if (pc == 0 || rec_len != ssd_rec_len(pc, value_len, align) || rec_len > UINT32_MAX)
		return false; /* hdr_len below holds the record's length */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, rec_len);
	parts = kvt_mem_alloc(s->mem, (size_t)pc * sizeof(*parts));
	t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	ok = buf && parts && t && ssd_pread_full(s, s->segs[slot].fd, buf, rec_len, off) == 0 &&
	     ssd_rec_hdr_decode(buf, hdr_len, align, &rh, parts, pc) == 0 &&
	     rh.type == SSD_REC_PUT &&
	     rh.seq == seq && rh.ns_id == ns && rh.part_count == pc && rh.value_len == value_len &&
	     rh.key.len == key->len && memcmp(rh.key.bytes, key->bytes, key->len) == 0;
	for (unsigned p = 0; ok && p < pc; p++) {
		ok = kvt_crc32c(0, buf + o, parts[p].len) == parts[p].crc;
		o += parts[p].len;
	}
	if (!ok) {
		if (buf)
			kvt_mem_free(s->mem, buf, rec_len);
		if (parts)
			kvt_mem_free(s->mem, parts, (size_t)pc * sizeof(*parts));
		if (t)
			kvt_mem_free(s->mem, t, sizeof(*t));
		return false;
	}
	t->type = T_CARRY;
	t->s = s;
	t->ns = ns;
	t->key = *key;
	t->value_len = value_len;
	t->part_count = pc;
	t->hdr = buf;
	t->hdr_len = (uint32_t)rec_len;
	t->carry_parts = parts;
	t->carry_seq = seq;
	t->carry_flags = rh.flags;
	pthread_mutex_lock(&s->wd_lock);
	s->wd_bytes += value_len;
	pthread_mutex_unlock(&s->wd_lock);
	wd_enqueue(s, t, WD_BACK);
	return true;
}

/* Does index entry e name the record se of the segment ec reclaims: its
 * slot, generation and offset?  Not the slot and generation alone: a key
 * put twice into one segment has a superseded record and the live one
 * there, and reaching the superseded one (progressive reuse reclaims by
 * offset, seg_reclaim_upto_locked) dropped the live entry while its
 * record was still intact -- a lost hit (until session 48; test_ssd
 * reclaim_superseded).  The offset names one record of a generation. */
static bool entry_is_rec(const struct ssd_entry *e, const struct evict_ctx *ec,
			 const struct ssd_sum_entry *se)
{
	return e->slot == ec->slot && e->generation == ec->gen && e->off_512 == se->off_512;
}

/*
 * For each summary entry of the evicted segment: drop it, or keep it
 * (reclamation with a second chance, within the budget of reinsert_pct of
 * the segment): a record read while here (E_READ) is written again at the
 * log's head -- from its DRAM copy if DRAM holds one, else read back from
 * this segment (evict_carry) -- instead of leaving with the rest.
 */
static int evict_entry_cb(void *ctx, const struct ssd_sum_entry *se)
{
	struct evict_ctx *ec = ctx;
	struct ssd *s = ec->s;
	uint64_t h;
	struct ssd_shard *sh;
	struct ssd_entry **pp;
	bool reinsert = false, dropped = false, hot = false, carry = false, in_dram;
	bool batched = false, sealed = false;
	uint32_t vcrc = 0;
	uint64_t seq = 0, off = 0, rec_len = 0, value_len = 0, hgen = 0;
	unsigned pc = 0;

	if (se->type != SSD_REC_PUT)
		return 0;
	/* Before the shard lock: a hint only (the pin below decides). */
	in_dram = dram_exists(s->dram, se->ns_id, &se->key) == KVT_OK;
	h = ssd_hash(s, se->ns_id, &se->key);
	sh = shard_of(s, h);
	pthread_mutex_lock(&sh->lock);
	pp = ssd_idx_slot(sh, h, se->ns_id, &se->key);
	/* A promotion's read of it in flight (promote_settle): it ends
	 * without any lock or work of the writer's, so wait for it. */
	while (*pp && entry_is_rec(*pp, ec, se) && ((*pp)->flags & E_PINNED)) {
		A(s->reclaim_read_waits);
		pthread_cond_wait(&s->pin_cond, &sh->lock);
		pp = ssd_idx_slot(sh, h, se->ns_id, &se->key);
	}
	if (*pp && entry_is_rec(*pp, ec, se) && !((*pp)->flags & E_PENDING)) {
		/* A batched value (format 3) is read back by its value
		 * alone: evict_carry_batched, evict_to_hook. */
		batched = (*pp)->flags & E_BATCHED;
		sealed = (*pp)->flags & E_SEALED_VALUE;
		vcrc = (*pp)->value_crc;
		reinsert = ((*pp)->flags & E_READ) &&
			   reinsert_cb_budget(s, &ec->budget, (*pp)->value_len);
		hot = ((*pp)->flags & E_READ2) && s->evict_hook;
		/* Under the lock a delete takes first: one it missed here
		 * reaches the hook later, with a higher generation. */
		if (hot)
			hgen = s->evict_hook->gen(s->evict_ctx);
		seq = (*pp)->seq;
		off = (uint64_t)(*pp)->off_512 * SSD_REC_ALIGN;
		rec_len = (uint64_t)(*pp)->len_512 * SSD_REC_ALIGN;
		value_len = (*pp)->value_len;
		pc = (*pp)->part_count;
		if (reinsert && !in_dram) {
			/* Kept for the carry, unpublished meanwhile. */
			struct ssd_entry *e = *pp;
			e->flags |= E_PENDING | E_CARRY;
			sh->bytes -= e->value_len;
			sh->rec_bytes -= (uint64_t)e->len_512 * SSD_REC_ALIGN;
			quota_ssd_add(s->cfg.quota, e->ns, e->value_len, false);
			carry = true;
		} else {
			/* Why it leaves (doc/policies.md "Where the rest goes"):
			 * never read while here, or read but past the budget. */
			if (!((*pp)->flags & E_READ))
				A(s->evicted_unread);
			else if (!reinsert)
				A(s->evicted_over_budget);
			ssd_idx_remove_locked(s, sh, pp);
			ec->dropped++;
			dropped = true;
		}
	} else {
		/* A dead record: superseded, deleted, or promoted and dropped;
		 * its room held no cache since. */
		A(s->evicted_dead);
	}
	pthread_mutex_unlock(&sh->lock);
	if (carry) {
		if (batched ? evict_carry_batched(s, ec->slot, se->ns_id, &se->key, seq, off,
						  rec_len, value_len, vcrc, sealed)
			    : evict_carry(s, ec->slot, se->ns_id, &se->key, seq, off, rec_len,
					  value_len, pc))
			return 0;
		/* Not carried after all: it leaves with the segment. */
		A(s->carry_lost);
		ssd_idx_remove_key(s, se->ns_id, &se->key, seq + 1);
		ec->dropped++;
		dropped = true;
		reinsert = false;
	}
	/* A DRAM copy no longer has one below it: let a later hit admit it
	 * again (lock order: seg_lock -> DRAM shard lock). */
	if (dropped && !reinsert)
		dram_forget_lower(s->dram, se->ns_id, &se->key);
	/* Hot, and not staying: the tier below takes it (if reinsertion finds
	 * no DRAM copy, the block is lost to SSD: the shared tier's write is
	 * put-if-absent, so handing it down as well costs little). */
	if (dropped && hot && (!reinsert || dram_exists(s->dram, se->ns_id, &se->key) != KVT_OK))
		evict_to_hook(s, ec->slot, se->ns_id, &se->key, seq, off, rec_len, value_len, pc,
			      hgen, batched, vcrc, sealed);
	if (reinsert) {
		/* Read while here and still in DRAM: write it down again. */
		struct iovec view[DRAM_MAX_RUNS];
		struct dram_item *it;
		unsigned vc;
		uint64_t len;
		if (dram_pin(s->dram, se->ns_id, &se->key, &it, view, &vc, &len) == KVT_OK) {
			struct wd_task *t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
			if (t) {
				t->type = T_PUT;
				t->s = s;
				t->item = it;
				t->value_len = len;
				t->reinsert = true;
				pthread_mutex_lock(&s->wd_lock);
				s->wd_bytes += len;
				pthread_mutex_unlock(&s->wd_lock);
				wd_enqueue(s, t, WD_BACK);
				A(s->reinserted);
			} else {
				dram_unpin(s->dram, it);
			}
		}
	}
	return 0;
}

/* Where the open segment's records end: its own, or the old generation's
 * not yet overwritten (progressive reuse).  seg_lock held. */
static uint64_t seg_records_end(const struct ssd_seg *g)
{
	uint64_t end = g->write_off;

	if (g->old_next < g->old_count) {
		const struct ssd_sum_entry *e = &g->old_sum[g->old_count - 1];
		uint64_t old_end = ((uint64_t)e->off_512 + e->len_512) * SSD_REC_ALIGN;
		end = old_end > end ? old_end : end;
	}
	return end;
}

/* The sealed segment of the lowest generation (the log's oldest), or -1.
 * seg_lock held. */
static int64_t seg_oldest_sealed_locked(const struct ssd *s)
{
	int64_t victim = -1;

	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state != SEG_SEALED)
			continue;
		if (victim < 0 || s->segs[i].generation < s->segs[victim].generation)
			victim = i;
	}
	return victim;
}

/* Evict the oldest sealed segment.  seg_lock held.  Returns false if none. */
static bool seg_evict_oldest_locked(struct ssd *s)
{
	int64_t victim = seg_oldest_sealed_locked(s);
	struct ssd_seg *g;
	struct evict_ctx ec;
	uint8_t *buf = NULL, *sum = NULL;
	uint64_t sum_len = 0;
	struct ssd_seg_hdr hdr;
	int r = 0;

	if (victim < 0)
		return false;
	g = &s->segs[victim];
	memset(&ec, 0, sizeof(ec));
	ec.s = s;
	ec.slot = (uint32_t)victim;
	ec.gen = g->generation;
	ec.budget = s->cfg.seg_size / 100 * s->cfg.reinsert_pct;

	/* 1. The summary names every record (read it while it is there).
	 *    Without a buffer to void the slot with (step 2), nothing is
	 *    evicted (until 2026-12-05 its entries went, the slot not voided). */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (!buf)
		return false;
	if (ssd_pread_full(s, g->fd, buf, SSD_ALIGN, 0) == 0 &&
	    ssd_seg_hdr_decode(buf, &hdr) == 0 && hdr.generation == g->generation &&
	    hdr.summary_len > 0 && hdr.summary_len <= s->cfg.seg_size) {
		sum_len = hdr.summary_len;
		sum = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, sum_len);
		if (sum && ssd_pread_full(s, g->fd, sum, sum_len, hdr.summary_off) < 0) {
			kvt_mem_free(s->mem, sum, sum_len);
			sum = NULL;
		}
	}
	/* 2. Durably free the slot before forgetting its blocks: a delete that
	 *    finds a block gone logs no tombstone, so a restart must not find
	 *    the block here either (through the checkpoint or a scan).  Not
	 *    voided, the slot is quarantined instead: its records may still
	 *    be found by a recovery, so its entries stay, dead, for a delete
	 *    to find (until 2026-12-05 they were dropped, and a delete
	 *    answered 0 came back after a kill -9: test_ssd void_fail_kill9). */
	memset(buf, 0, SSD_ALIGN);
	if (ssd_io_sync(s, IO_WRITE, g->fd, 0, buf, SSD_ALIGN) < 0 ||
	    ssd_seg_fsync_locked(s, (uint32_t)victim) < 0)
		r = -EIO;
	kvt_mem_free(s->mem, buf, SSD_ALIGN);
	if (r < 0) {
		if (sum)
			kvt_mem_free(s->mem, sum, sum_len);
		ssd_seg_mark_bad(s, (uint32_t)victim, r);
		seg_quarantine_locked(s, (uint32_t)victim, atomic_load(&g->bad_err));
		return true;
	}
	/* 3. Drop its index entries, reinserting the hot ones; then whatever
	 *    the summary missed. */
	if (sum) {
		ssd_sum_decode(sum, sum_len, g->generation, evict_entry_cb, &ec);
		kvt_mem_free(s->mem, sum, sum_len);
	}
	ec.dropped += ssd_idx_sweep(s, KVT_NS_ALL, (uint32_t)victim, g->generation, UINT64_MAX);
	g->state = SEG_FREE;
	A(s->seg_evicted);
	AN(s->evicted_blocks, ec.dropped);
	kvt_logf(s->log, KVT_LOG_DEBUG, "ssd: evicted segment %lld (generation %llu): %llu blocks",
		 (long long)victim, (unsigned long long)ec.gen, (unsigned long long)ec.dropped);
	return true;
}

/* ssd_sum_decode's callback: the entries of a segment's summary, in write
 * order (rising offsets, ssd-format.md), into an array. */
struct sum_collect {
	struct ssd *s;
	struct ssd_sum_entry *v;
	size_t n, cap;
};

static int sum_collect_cb(void *ctx, const struct ssd_sum_entry *se)
{
	struct sum_collect *c = ctx;
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 256;
		struct ssd_sum_entry *n = kvt_mem_realloc(c->s->mem, c->v, c->cap * sizeof(*n),
							  ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->v = n;
		c->cap = ncap;
	}
	c->v[c->n++] = *se;
	return 0;
}

/*
 * Progressive reuse: reclaim the records of the slot's old generation
 * that start before `end` (UINT64_MAX: all of them, then whatever the
 * summary missed), each as whole-segment eviction would (evict_entry_cb:
 * dropped, or given its second chance within the old segment's budget).
 * Called before a reservation hands out [off, end) and before the
 * segment seals (its summary lands past the last record).  Writer
 * thread, seg_lock held.
 */
static void seg_reclaim_upto_locked(struct ssd *s, uint32_t slot, uint64_t end)
{
	struct ssd_seg *g = &s->segs[slot];
	struct evict_ctx ec;

	if (!g->old_gen)
		return;
	memset(&ec, 0, sizeof(ec));
	ec.s = s;
	ec.slot = slot;
	ec.gen = g->old_gen;
	ec.budget = g->old_budget;
	while (g->old_next < g->old_count &&
	       (uint64_t)g->old_sum[g->old_next].off_512 * SSD_REC_ALIGN < end)
		evict_entry_cb(&ec, &g->old_sum[g->old_next++]);
	g->old_budget = ec.budget;
	if (end == UINT64_MAX) {
		/* What the summary's entries left: nothing, since the reuse
		 * swept the entries it does not name (ssd_idx_sweep_unnamed);
		 * counted to show it (ssd.reclaim_leftovers). */
		uint64_t left = ssd_idx_sweep(s, KVT_NS_ALL, slot, g->old_gen, UINT64_MAX);
		AN(s->reclaim_leftovers, left);
		ec.dropped += left;
		kvt_mem_free(s->mem, g->old_sum, g->old_cap * sizeof(*g->old_sum));
		g->old_sum = NULL;
		g->old_count = g->old_next = g->old_cap = 0;
		kvt_logf(s->log, KVT_LOG_DEBUG,
			 "ssd: segment %u (generation %llu) reclaimed: %llu blocks", slot,
			 (unsigned long long)g->old_gen,
			 (unsigned long long)(g->old_dropped + ec.dropped));
		g->old_gen = 0;
		g->old_dropped = 0;
	} else {
		g->old_dropped += ec.dropped;
	}
	AN(s->evicted_blocks, ec.dropped);
}

/* A new generation in g: no hole, no seal yet (its tombstone counts go
 * on: a sync covers the old generation's with the new one's).  seg_lock
 * held. */
static void seg_gen_reset_locked(struct ssd_seg *g)
{
	atomic_store(&g->tomb_hole, 0);
	atomic_store(&g->seal_synced, false);
	g->sealed_ok = false;
	g->torn_off = 0;
}

/* Seal the open segment: its old generation's last records first (the
 * summary is written over them).  seg_lock held. */
static void seg_seal_locked(struct ssd *s)
{
	if (s->open_slot >= 0)
		seg_reclaim_upto_locked(s, (uint32_t)s->open_slot, UINT64_MAX);
	ssd_seg_seal_locked(s);
}

/*
 * Open a new segment in the slot of the oldest sealed one, reclaiming its
 * records progressively (ssd.reuse=progressive): they stay indexed and
 * readable until the new generation's writes reach them, so the open
 * segment costs the tier no room -- with whole-segment eviction a slot
 * emptied at once, and the open segment, half full on average, held half
 * a segment less cache (3 % of a 16-segment tier).
 *
 * Crash safety: the new header (the new generation) is written and synced
 * before any old record is forgotten, so that a delete which then finds no
 * entry (and logs no tombstone) cannot see the block come back: recovery
 * drops every checkpoint entry of the old generation (the slot's header
 * names the new one) and its walk of the open segment stops at the first
 * header of another generation.  A read racing the overwrite checks the
 * record's header (generation, seq, key) and every part's CRC32C: exact
 * bytes or a miss, as with whole-segment reuse.  seg_lock held.
 */
static int seg_reuse_oldest_locked(struct ssd *s)
{
	int64_t victim = seg_oldest_sealed_locked(s);
	struct ssd_seg *g;
	struct sum_collect c = { s, NULL, 0, 0 };
	uint8_t *buf, *sum = NULL;
	uint64_t sum_len = 0, old_gen;
	struct ssd_seg_hdr hdr;
	int r;

	if (victim < 0)
		return KVT_EFULL;
	g = &s->segs[victim];
	old_gen = g->generation;
	/* 1. The old summary, kept in memory: its records, by offset. */
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	if (!buf)
		return -ENOMEM;
	if (ssd_pread_full(s, g->fd, buf, SSD_ALIGN, 0) == 0 &&
	    ssd_seg_hdr_decode(buf, &hdr) == 0 &&
	    hdr.generation == old_gen && hdr.summary_len > 0 &&
	    hdr.summary_len <= s->cfg.seg_size) {
		sum_len = hdr.summary_len;
		sum = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, sum_len);
		if (sum && (ssd_pread_full(s, g->fd, sum, sum_len, hdr.summary_off) < 0 ||
			    ssd_sum_decode(sum, sum_len, old_gen, sum_collect_cb, &c) < 0)) {
			/* Unreadable: its entries go at once (the sweep below). */
			kvt_mem_free(s->mem, c.v, c.cap * sizeof(*c.v));
			c.v = NULL;
			c.n = c.cap = 0;
		}
		if (sum)
			kvt_mem_free(s->mem, sum, sum_len);
	}
	kvt_mem_free(s->mem, buf, SSD_ALIGN);
	if (c.v && g->rec_align != s->rec_align) {
		/* Laid out at another alignment (ssd.dio_align changed): its file
		 * may leave or take O_DIRECT, which the old records' offsets
		 * might not meet.  They go at once (the sweep below). */
		kvt_mem_free(s->mem, c.v, c.cap * sizeof(*c.v));
		c.v = NULL;
		c.n = c.cap = 0;
	}
	/* 2. The new generation's header, durable before anything old is
	 *    forgotten (above). */
	g->generation = __atomic_fetch_add(&s->next_gen, 1, __ATOMIC_RELAXED);
	ssd_seg_set_align(s, (uint32_t)victim, s->rec_align);
	g->batches = s->cfg.format == 3; /* ssd.format: "Batches" */
	atomic_store(&g->broken, false);
	seg_gen_reset_locked(g);
	g->write_off = SSD_ALIGN;
	g->sum_bytes = 64; /* the summary header */
	r = ssd_seg_write_hdr(s, (uint32_t)victim, 0, 0);
	if (r == 0 && ssd_seg_fsync_locked(s, (uint32_t)victim) < 0)
		r = -EIO;
	A(s->seg_evicted);
	if (r < 0) {
		/* The old records may or may not be void on disk: the slot is
		 * quarantined, their entries kept dead for a delete to find
		 * (until 2026-12-05 they were swept, and a delete answered 0
		 * came back after a kill -9: test_ssd void_fail_kill9). */
		kvt_mem_free(s->mem, c.v, c.cap * sizeof(*c.v));
		g->generation = old_gen;
		ssd_seg_mark_bad(s, (uint32_t)victim, r);
		seg_quarantine_locked(s, (uint32_t)victim, atomic_load(&g->bad_err));
		return r;
	}
	g->old_gen = old_gen;
	g->old_sum = c.v;
	g->old_count = c.n;
	g->old_cap = c.cap;
	g->old_next = 0;
	g->old_budget = s->cfg.seg_size / 100 * s->cfg.reinsert_pct;
	g->old_dropped = 0;
	if (!c.v)
		AN(s->evicted_blocks, ssd_idx_sweep(s, KVT_NS_ALL, (uint32_t)victim, old_gen,
						    UINT64_MAX));
	else /* what the summary does not name is never reclaimed before a write */
		AN(s->evicted_blocks,
		   ssd_idx_sweep_unnamed(s, (uint32_t)victim, old_gen, c.v, c.n));
	g->state = SEG_OPEN;
	s->open_slot = (int32_t)victim;
	return 0;
}

/*
 * Room.  A segment's file is allocated whole when its slot is first
 * opened (io_allocate), so a full file system is met there, not in the
 * middle of a record.  Then the slot is marked noroom and the log keeps
 * to the slots it has: the watermarks count only those, and the open
 * reuses (or evicts) the oldest as if --ssd were that size -- a tier
 * that stopped at a full disk would keep what it held when the disk
 * filled, forever.  Every ssd.enospc_retry_ms one allocation is tried
 * again (the room may have been freed), and the marks are dropped if it
 * fits (seg_room_retry_locked).  Only
 * with no slot at all does the write fail with ENOSPC (the tier degrades
 * as before: "Faults" in doc/ssd.md).
 */

/* The log's high and low watermarks in slots, and the slots in use.
 * seg_lock held. */
static uint32_t seg_marks_locked(const struct ssd *s, uint64_t *high, uint64_t *low)
{
	uint32_t used = 0, room = ssd_room_slots(s);

	for (uint32_t i = 0; i < s->slot_count; i++)
		if (s->segs[i].state == SEG_OPEN || s->segs[i].state == SEG_SEALED)
			used++;
	/* Rounded up to whole segments: on a small tier (16 slots at 95/90)
	 * rounding down kept two of sixteen free -- an eighth of the flash,
	 * about 1.3 points of hit ratio on the repository's trace.  The
	 * defaults are 100/100 (since 2026-12-02): a cache log has no garbage
	 * to collect, so a free slot held in reserve is flash holding no
	 * cache -- at 95/90 a tier of 400 segments kept 20 to 40 of them
	 * empty (doc/policies.md). */
	*high = ((uint64_t)room * s->cfg.high_pct + 99) / 100;
	*low = ((uint64_t)room * s->cfg.low_pct + 99) / 100;
	/* Progressive reuse takes the oldest slot in place (no slot need be
	 * free); whole-segment eviction frees one ahead of the open. */
	if (*high + (s->cfg.reuse_progressive ? 0 : 1) > room)
		*high = room > 0 ? room - (s->cfg.reuse_progressive ? 0 : 1) : 0;
	if (*low > *high)
		*low = *high;
	return used;
}

/* Would the next segment opened evict (or reuse) one?  seg_lock held. */
static bool seg_next_evicts_locked(const struct ssd *s)
{
	uint64_t high, low;
	uint32_t used = seg_marks_locked(s, &high, &low);

	if (used >= high)
		return true;
	for (uint32_t i = 0; i < s->slot_count; i++)
		if (s->segs[i].state == SEG_FREE && !s->segs[i].noroom)
			return false;
	return true;
}

/* The file system had no room for slot's file: release what it got and
 * keep the log to the other slots.  seg_lock held. */
static void seg_noroom_locked(struct ssd *s, uint32_t slot)
{
	struct ssd_seg *g = &s->segs[slot];

	if (g->fd >= 0 && ftruncate(g->fd, 0) < 0) {
		/* Nothing to release then; the mark stands either way. */
	}
	if (!g->noroom) {
		g->noroom = true;
		atomic_fetch_add_explicit(&s->noroom_slots, 1, memory_order_relaxed);
	}
	s->noroom_at_ns = kvt_now_ns();
}

/* The room retry: every ssd.enospc_retry_ms, one allocation is tried
 * (the lowest slot marked); if it fits, the noroom marks go and the next
 * opens try those slots again.  Not every slot marked each time: on a
 * file system still full, each failed fallocate takes what room it has
 * from everyone else on it for a moment, and a tier of thousands of
 * segments capped to a few made as many under seg_lock (at each open
 * with a retry of 0).  seg_lock held. */
static bool seg_room_retry_locked(struct ssd *s)
{
	uint32_t probe = UINT32_MAX;
	int r;

	if (!atomic_load_explicit(&s->noroom_slots, memory_order_relaxed) ||
	    kvt_now_ns() - s->noroom_at_ns < s->cfg.retry_ns)
		return false;
	s->noroom_at_ns = kvt_now_ns();
	for (uint32_t i = 0; i < s->slot_count && probe == UINT32_MAX; i++)
		if (s->segs[i].noroom && s->segs[i].state == SEG_FREE)
			probe = i;
	if (probe != UINT32_MAX) {
		r = ssd_seg_open_file(s, probe, true);
		if (r == 0)
			r = io_allocate(s->io, s->segs[probe].fd, s->cfg.seg_size);
		if (r < 0) {
			if (s->segs[probe].fd >= 0 && ftruncate(s->segs[probe].fd, 0) < 0) {
				/* as seg_noroom_locked */
			}
			return false;
		}
	}
	for (uint32_t i = 0; i < s->slot_count; i++)
		s->segs[i].noroom = false;
	atomic_store_explicit(&s->noroom_slots, 0, memory_order_relaxed);
	s->noroom_at_ns = kvt_now_ns();
	return true;
}

/* v bytes as a log message says them: whole MiB or KiB where exact
 * (segments are 4 KiB multiples, ssd.segment), else bytes. */
static const char *ssd_size_text(char *buf, size_t len, uint64_t v)
{
	if (v % (UINT64_C(1) << 20) == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(v >> 20));
	else if (v % 1024 == 0)
		snprintf(buf, len, "%llu KiB", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu B", (unsigned long long)v);
	return buf;
}

/* At open: will the file system hold the segments not yet allocated?
 * Said once if not (the log will keep to what fits: "Room" above). */
static void ssd_room_check(struct ssd *s)
{
	uint64_t have = 0, want = (uint64_t)s->slot_count * s->cfg.seg_size, avail;
	char t_want[32], t_hold[32], t_free[32];
	struct statvfs sv;

	if (fstatvfs(s->dir_fd, &sv) < 0)
		return;
	avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct stat st;
		if (s->segs[i].fd >= 0 && fstat(s->segs[i].fd, &st) == 0) {
			uint64_t b = (uint64_t)st.st_blocks * 512;
			have += b < s->cfg.seg_size ? b : s->cfg.seg_size;
		}
	}
	if (have + avail < want)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: ssd.capacity is %s but the file system holds %s of "
			 "segments here (%s free): the log will keep to what fits",
			 ssd_size_text(t_want, sizeof(t_want), want),
			 ssd_size_text(t_hold, sizeof(t_hold), have + avail),
			 ssd_size_text(t_free, sizeof(t_free), avail));
}

/* Say what the last open found of the room (ROOM_SAY_*), once; called
 * with no lock held (the logger is the embedder's). */
static void ssd_room_tell(struct ssd *s)
{
	int say = atomic_exchange(&s->room_say, ROOM_SAY_NONE);
	uint32_t room = ssd_room_slots(s);
	uint64_t all = (uint64_t)s->slot_count * s->cfg.seg_size;
	char t_room[32], t_all[32];

	if (say == ROOM_SAY_CAPPED)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: the file system has no room for more segments: the log keeps to "
			 "%u of its %u (%s of %s), reusing its oldest; more tried every "
			 "%llu ms (stat ssd.segments_room)",
			 room, s->slot_count,
			 ssd_size_text(t_room, sizeof(t_room), (uint64_t)room * s->cfg.seg_size),
			 ssd_size_text(t_all, sizeof(t_all), all),
			 (unsigned long long)(s->cfg.retry_ns / 1000000));
	else if (say == ROOM_SAY_GREW)
		kvt_logf(s->log, KVT_LOG_INFO,
			 "ssd: room for more segments again: the log may use %u of its %u", room,
			 s->slot_count);
}

/* Start a new segment in a free slot, evicting by watermarks.  seg_lock
 * held.  Sets log_full: whether this open had to evict or reuse, or the
 * log was full and still holds more than the low watermark. */
static int seg_open_slot_locked(struct ssd *s)
{
	uint32_t used, slot;
	uint64_t high, low;
	bool evicted = false;
	int r;

again:
	slot = UINT32_MAX;
	used = seg_marks_locked(s, &high, &low);
	if (s->open_keep && seg_next_evicts_locked(s)) {
		/* A graceful stop writes DRAM's blocks into free room only:
		 * what the SSD holds is not pushed out for them, nor are the
		 * stop's own first (most valuable) writes for its later ones
		 * -- also when the file system turns out to hold fewer
		 * segments than the stop counted on (seg_noroom_locked, then
		 * here again).  Until session 45 this open evicted the oldest
		 * and the write-down wrapped the log (doc/policies.md "Warm
		 * restarts"). */
		atomic_store_explicit(&s->close_full, true, memory_order_relaxed);
		return KVT_EFULL;
	}
	if (used >= high) {
		while (used > low && seg_evict_oldest_locked(s)) {
			used--;
			evicted = true;
		}
	}
	/* Lowest-numbered free slot: files are reused in place. */
	for (uint32_t i = 0; i < s->slot_count; i++) {
		if (s->segs[i].state == SEG_FREE && !s->segs[i].noroom) {
			slot = i;
			break;
		}
	}
	if (slot == UINT32_MAX && s->cfg.reuse_progressive) {
		r = seg_reuse_oldest_locked(s);
		if (r == 0)
			atomic_store(&s->log_full, true);
		return r;
	}
	if (slot == UINT32_MAX && seg_evict_oldest_locked(s)) {
		evicted = true;
		for (uint32_t i = 0; i < s->slot_count; i++)
			if (s->segs[i].state == SEG_FREE && !s->segs[i].noroom) {
				slot = i;
				break;
			}
	}
	if (slot == UINT32_MAX)
		return KVT_EFULL;
	r = ssd_seg_open_file(s, slot, true);
	if (r == 0)
		r = io_allocate(s->io, s->segs[slot].fd, s->cfg.seg_size);
	if (r == -ENOSPC || r == -EDQUOT) {
		/* No room for this file (the disk, or a quota on it): the log
		 * keeps to the others (each pass marks one more slot, so this
		 * ends). */
		seg_noroom_locked(s, slot);
		goto again;
	}
	if (r < 0)
		return r;
	s->segs[slot].generation = __atomic_fetch_add(&s->next_gen, 1, __ATOMIC_RELAXED);
	ssd_seg_set_align(s, slot, s->rec_align);
	s->segs[slot].batches = s->cfg.format == 3; /* ssd.format: "Batches" */
	atomic_store(&s->segs[slot].broken, false);
	seg_gen_reset_locked(&s->segs[slot]);
	s->segs[slot].write_off = SSD_ALIGN;
	s->segs[slot].sum_bytes = 64; /* the summary header */
	r = ssd_seg_write_hdr(s, slot, 0, 0);
	if (r < 0) {
		s->segs[slot].generation = 0;
		return r;
	}
	s->segs[slot].state = SEG_OPEN;
	s->open_slot = (int32_t)slot;
	/* With the low watermark below the high one, the opens between two
	 * evictions take the free slots the last one made: they evict
	 * nothing, but every record written brings the next eviction
	 * closer, so the log stays full while it holds more than the low
	 * mark (at the default 100/100 no slot is free past the first lap,
	 * and every open there evicts or reuses). */
	atomic_store(&s->log_full, evicted || (atomic_load(&s->log_full) && used + 1 > low));
	return 0;
}

/* Start a new segment (seg_open_slot_locked), first trying the room
 * again when it is due, and note what changed for ssd_room_tell.
 * seg_lock held. */
static int seg_open_next_locked(struct ssd *s)
{
	uint32_t noroom0 = atomic_load_explicit(&s->noroom_slots, memory_order_relaxed), noroom;
	bool retried;
	int r;

	/* The open's first segment: the files it does not read go first. */
	ssd_void_unread_locked(s);
	retried = noroom0 && seg_room_retry_locked(s);
	r = seg_open_slot_locked(s);

	noroom = atomic_load_explicit(&s->noroom_slots, memory_order_relaxed);
	if (noroom0 == 0 && noroom > 0) {
		A(s->room_capped);
		atomic_store(&s->room_say, ROOM_SAY_CAPPED);
	} else if (retried && noroom < noroom0) {
		atomic_store(&s->room_say, ROOM_SAY_GREW);
	}
	return r;
}

bool ssd_log_full(void *ctx)
{
	struct ssd *s = ctx;
	return atomic_load_explicit(&s->log_full, memory_order_relaxed);
}

/*
 * An open segment whose end takes what is to be placed (fits(s, g, ctx)):
 * the open one, else a new one (the open one sealed), three tries.  0:
 * s->open_slot takes it; KVT_EFULL: none did; or seg_open_next_locked's
 * error.  A record's reservation and a batch's differ only in the test
 * (seg_fits_rec, seg_fits_batch).  seg_lock held.
 */
static int seg_open_fitting_locked(struct ssd *s,
				   bool (*fits)(const struct ssd *s, const struct ssd_seg *g,
						void *ctx),
				   void *ctx)
{
	for (int tries = 0; tries < 3; tries++) {
		if (s->open_slot < 0) {
			int r = seg_open_next_locked(s);
			if (r < 0)
				return r;
		}
		if (fits(s, &s->segs[s->open_slot], ctx))
			return 0;
		seg_seal_locked(s); /* s->open_slot -1 */
	}
	return KVT_EFULL;
}

/* A record of rec_len bytes, its summary entry se (its length by g's
 * summary version), and the summary's aligned end. */
struct seg_fit_rec {
	uint64_t rec_len;
	const struct ssd_sum_entry *se;
};

static bool seg_fits_rec(const struct ssd *s, const struct ssd_seg *g, void *ctx)
{
	const struct seg_fit_rec *f = ctx;
	size_t elen = ssd_sum_entry_len(f->se, ssd_seg_sum_version(g));
	return g->write_off + f->rec_len + align4k(g->sum_bytes + elen) <= s->cfg.seg_size;
}

/*
 * Space for a record of rec_len bytes whose summary entry is se, and its
 * twin if twin (a tombstone: the same record again right after it, not in
 * the summary; ssd_walk_twin, doc/ssd-format.md "Tombstones twice").  Sets
 * *slot, *off and se's offsets, records se in the summary, assigns the
 * sequence number -- the next one, unless se->seq names one already (a
 * tombstone logged again keeps the seq of its first placement: "A
 * tombstone that will not go down").  seg_lock held.
 */
static int seg_reserve_locked(struct ssd *s, uint64_t rec_len, bool twin,
			      struct ssd_sum_entry *se, uint32_t *slot, uint64_t *off,
			      uint64_t *gen)
{
	/* The entry's length in the open segment's summary (its version):
	 * at most a version-3 entry's */
	size_t elen = ssd_sum_entry_len(se, SSD_SUM_VERSION_BATCH);
	uint64_t room = twin ? 2 * rec_len : rec_len;
	struct seg_fit_rec fit = { room, se };
	struct ssd_seg *g;
	int r;

	if (SSD_ALIGN + room + align4k(64 + elen) > s->cfg.seg_size)
		return KVT_ETOOBIG;
	r = seg_open_fitting_locked(s, seg_fits_rec, &fit);
	if (r < 0)
		return r;
	g = &s->segs[s->open_slot];
	elen = ssd_sum_entry_len(se, ssd_seg_sum_version(g));
	r = ssd_seg_sum_room(s, g, 1);
	if (r < 0)
		return r;
	/* The old generation's records this one overwrites go first. */
	seg_reclaim_upto_locked(s, (uint32_t)s->open_slot, g->write_off + room);
	if (se->seq == 0)
		se->seq = s->next_seq++;
	se->off_512 = (uint32_t)(g->write_off / SSD_REC_ALIGN);
	se->len_512 = (uint32_t)(rec_len / SSD_REC_ALIGN);
	g->sum[g->sum_count++] = *se;
	g->sum_bytes += elen;
	*slot = (uint32_t)s->open_slot;
	*off = g->write_off;
	*gen = g->generation;
	g->write_off += room;
	g->dirty = true;
	/* Counted before its write is submitted, let alone complete: a
	 * quarantine from now on judges it (ssd_idx.c "Tombstones at risk"). */
	if (se->type != SSD_REC_PUT)
		atomic_fetch_add(&g->tomb_placed, 1);
	return 0;
}

/* ------------------------------------------------------------------------
 * Write-down
 */

/*
 * Deletes jump the queue.  The writer takes tasks from two lanes: the
 * urgent one (tombstones, and the syncs kvt_delete / kvt_clear wait on)
 * first, then the write-down queue (write-downs, carries, flushes,
 * checkpoints).  And it places write-downs in the log -- a sequence number,
 * an offset, a PENDING entry, a write submitted -- only while fewer than
 * ssd.writedown_window bytes of them are in flight (8 MiB); the rest of a
 * backlog waits in the queue, unplaced.  So a tombstone is placed after at most a window of
 * write-downs, and a delete's sync (T_DSYNC in the urgent lane: those
 * writes, then fdatasync, on the sync thread: "A delete's sync beside the
 * writer") waits for that window, not for the backlog: the writes before
 * it must be on the device too, or a crash would leave a hole before the
 * tombstone and recovery's walk of the open segment would stop there.
 * Before 2026-12-04 every write-down was submitted at once (the I/O engine
 * queued the backlog), tombstones queued behind them, and a delete behind
 * a 256 MiB backlog waited 0.26 s (bench/RESULTS.md, perf25).
 *
 * Why a tombstone placed before a queued write-down of its key (or of its
 * namespace, for a clear) is safe: the store kills the DRAM block before it
 * touches the SSD index (ssd.h), every queued T_PUT holds a DRAM block that
 * stays in DRAM's index until its write ends (dram.c ITEM_WD), and wd_write
 * checks that block before placing it (skipped if dead) and again after
 * entering its PENDING entry (then removed, and a tombstone logged after
 * it: WD_NOW); a queued T_CARRY keeps an index entry (E_CARRY) that the
 * delete removes, and wd_carry_write drops the carry when its entry is
 * gone.  So no record of the key older than the delete is placed after its
 * tombstone: nothing comes back at runtime, nor at recovery (records in
 * sequence order), nor when the tombstone's segment is reclaimed before a
 * later one (doc/ssd.md "Deletes and clears").
 */
/* Put t in lane: at the tail, or at the urgent lane's head (WD_NOW).
 * wd_lock held; the caller wakes the writer. */
static void wd_append_locked(struct ssd *s, struct wd_task *t, int lane)
{
	struct wd_task **head = lane == WD_BACK ? &s->wd_head : &s->wd_uhead;
	struct wd_task **tail = lane == WD_BACK ? &s->wd_tail : &s->wd_utail;
	if (lane == WD_NOW) {
		t->next = *head;
		*head = t;
		if (!*tail)
			*tail = t;
	} else {
		t->next = NULL;
		if (*tail)
			(*tail)->next = t;
		else
			*head = t;
		*tail = t;
	}
}

static void wd_enqueue(struct ssd *s, struct wd_task *t, int lane)
{
	pthread_mutex_lock(&s->wd_lock);
	wd_append_locked(s, t, lane);
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
}

static bool ns_persistent(struct ssd *s, uint32_t ns)
{
	bool p;
	pthread_mutex_lock(&s->ns_lock);
	p = ns < s->persistent_cap && s->persistent[ns];
	pthread_mutex_unlock(&s->ns_lock);
	return p;
}

void ssd_set_evict_hook(struct ssd *s, const struct ssd_evict_hook *hook, void *ctx)
{
	pthread_mutex_lock(&s->seg_lock);
	s->evict_hook = hook;
	s->evict_ctx = ctx;
	pthread_mutex_unlock(&s->seg_lock);
}

int ssd_set_persistent(struct ssd *s, uint32_t ns)
{
	int ret = 0;
	pthread_mutex_lock(&s->ns_lock);
	if (ns >= s->persistent_cap) {
		uint32_t ncap = ns + 64;
		uint8_t *n = kvt_mem_realloc(s->mem, s->persistent, s->persistent_cap, ncap);
		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		memset(n + s->persistent_cap, 0, ncap - s->persistent_cap);
		s->persistent = n;
		s->persistent_cap = ncap;
	}
	s->persistent[ns] = 1;
out:
	pthread_mutex_unlock(&s->ns_lock);
	return ret;
}

/*
 * A quota group's share of the write-down queue.  The queue (wd_max) was
 * whoever's came first: one tenant's burst of puts on 4 connections,
 * past a slowed writer, filled it, and another tenant's write-downs
 * beside it were shed -- 4 of 4 lost once his DRAM quota let them go,
 * none alone (test_hostile wd_share).  Now a group's write-downs within a
 * quarter of wd_max (SSD_WD_GROUP_SHARE) are its own: one that finds the
 * queue full takes the place of the newest queued write-downs of the
 * groups past their quarter (wd_preempt_locked: counted in wd_preempted,
 * and in wd_shed as they are shed).  A group past its quarter is shed as
 * before when the queue is full.  So a group alone keeps the whole
 * queue, and a burst sheds its own write-downs, not the others'.  Puts
 * and second hits only: DRAM's victims are bounded by DRAM, a close's
 * write-down keeps its order.
 */
#define SSD_WD_GROUP_SHARE(max) ((max) / 4)

/* t's bytes leave the queue (written, failed or on SSD already).
 * wd_lock held. */
static void wd_put_gone_locked(struct ssd *s, struct wd_task *t)
{
	s->wd_bytes -= t->value_len;
	if (t->rewrite)
		s->wd_victim_bytes -= t->value_len;
	if (t->wd_group)
		s->wd_group_bytes[t->wd_group] -= t->value_len;
}

/* A write-down shed: a graceful stop's (DRAM_ADMIT_CLOSE) counted apart
 * (ssd.stop_writedown_shed) from the runtime's (ssd.writedown_shed): a
 * stop that keeps what fits and leaves the rest is no sign of write-down
 * pressure (until session 46 both were in ssd.writedown_shed). */
static void wd_shed_count(struct ssd *s, bool stop)
{
	if (stop)
		A(s->stop_wd_shed);
	else
		A(s->wd_shed);
}

/*
 * Room for len bytes of group, within its share, in a full queue: the
 * newest queued write-downs of the groups past their share are taken off
 * the queue (onto wd_dropped, their blocks let go by the writer: the
 * caller holds a DRAM shard lock) until len fits.  False, nothing taken,
 * if theirs would not make room.  wd_lock held.
 */
static bool wd_preempt_locked(struct ssd *s, uint32_t group, uint64_t len)
{
	uint64_t max = s->cfg.wd_max_bytes, share = SSD_WD_GROUP_SHARE(max), can = 0;

	for (struct wd_task *t = s->wd_head; t; t = t->next)
		if (t->type == T_PUT && t->sheddable && t->wd_group != group &&
		    s->wd_group_bytes[t->wd_group] > share)
			can += t->value_len;
	if (s->wd_bytes - s->wd_victim_bytes + len > max + can)
		return false;
	while (s->wd_bytes - s->wd_victim_bytes + len > max) {
		struct wd_task *v = NULL, *vp = NULL;
		for (struct wd_task *p = NULL, *t = s->wd_head; t; p = t, t = t->next)
			if (t->type == T_PUT && t->sheddable && t->wd_group != group &&
			    s->wd_group_bytes[t->wd_group] > share) {
				v = t;
				vp = p;
			}
		if (!v) /* the others' fell within their shares meanwhile */
			return false;
		if (vp)
			vp->next = v->next;
		else
			s->wd_head = v->next;
		if (s->wd_tail == v)
			s->wd_tail = vp;
		wd_put_gone_locked(s, v);
		v->next = s->wd_dropped;
		s->wd_dropped = v;
		A(s->wd_preempted);
		wd_shed_count(s, v->close);
	}
	pthread_cond_broadcast(&s->wd_cond);
	return true;
}

/* The writer: let the blocks of the write-downs taken off the queue go
 * (not written: as if shed), and free them.  wd_lock not held. */
static void wd_dropped_run(struct ssd *s)
{
	struct wd_task *t;

	pthread_mutex_lock(&s->wd_lock);
	t = s->wd_dropped;
	s->wd_dropped = NULL;
	pthread_mutex_unlock(&s->wd_lock);
	while (t) {
		struct wd_task *n = t->next;
		dram_writedown_done(s->dram, t->item, false);
		wd_task_free(s, t);
		t = n;
	}
}

bool ssd_admit(void *ctx, struct dram_item *item, uint32_t ns, int why)
{
	struct ssd *s = ctx;
	struct wd_task *t;
	struct iovec view[DRAM_MAX_RUNS];
	uint64_t len, max;
	uint32_t group = 0;
	bool limited, over, full;

	/* Puts go down at once only in write-through mode or for persistent
	 * namespaces.  Otherwise, as the victim tier (default), a block goes
	 * down when DRAM evicts it (DRAM's policy filtered it already); in
	 * "second" mode, on its second access. */
	bool persistent = ns_persistent(s, ns);
	switch (why) {
	case DRAM_ADMIT_PUT:
		if (s->cfg.admission != SSD_ADMIT_ALWAYS && !persistent)
			return false;
		break;
	case DRAM_ADMIT_HIT:
		if (s->cfg.admission == SSD_ADMIT_VICTIM && !persistent)
			return false;
		break;
	case DRAM_ADMIT_EVICT:
		if (s->cfg.admission != SSD_ADMIT_VICTIM && !persistent)
			return false;
		break;
	case DRAM_ADMIT_CLOSE: /* a graceful stop keeps DRAM's blocks (warm restart) */
		/* ... in the free room: none left, the rest stays DRAM's */
		if (atomic_load_explicit(&s->close_full, memory_order_relaxed)) {
			wd_shed_count(s, true);
			return false;
		}
		break;
	default:
		return false;
	}
	dram_item_view(s->dram, item, view, &len);
	/* A quota group at its SSD limit keeps its new blocks in DRAM only
	 * (counted per group as quota.<g>.ssd_declined). */
	if (quota_ssd_refuse(s->cfg.quota, ns, len))
		return false;
	if (s->wd_group_bytes && (why == DRAM_ADMIT_PUT || why == DRAM_ADMIT_HIT))
		group = quota_group_of(s->cfg.quota, ns);
	/* DRAM bounds its victims in flight itself (dram.c): they neither
	 * count against wd_max nor crowd out puts of persistent namespaces. */
	/* A persistent namespace's put waited for room before it reached
	 * DRAM (ssd_put_room): it is never shed here, even when puts that
	 * waited together pass wd_max by a block each. */
	limited = why != DRAM_ADMIT_EVICT && !(why == DRAM_ADMIT_PUT && persistent);
	max = s->cfg.wd_max_bytes;
	pthread_mutex_lock(&s->wd_lock);
	/* Within its share: a quarter of the queue with this one, or its
	 * first one queued (a value over a quarter would never go down). */
	over = group && s->wd_group_bytes[group] > 0 &&
	       s->wd_group_bytes[group] + len > SSD_WD_GROUP_SHARE(max);
	full = limited && s->wd_bytes - s->wd_victim_bytes + len > max;
	if (full && group && !over && !s->wd_stop && !s->degraded)
		full = !wd_preempt_locked(s, group, len);
	if (s->wd_stop || full ||
	    (s->degraded && kvt_now_ns() - s->degraded_at_ns < s->cfg.retry_ns)) {
		pthread_mutex_unlock(&s->wd_lock);
		wd_shed_count(s, why == DRAM_ADMIT_CLOSE);
		return false;
	}
	s->wd_bytes += len;
	if (why == DRAM_ADMIT_EVICT)
		s->wd_victim_bytes += len;
	if (group)
		s->wd_group_bytes[group] += len;
	pthread_mutex_unlock(&s->wd_lock);
	t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	if (!t) {
		pthread_mutex_lock(&s->wd_lock);
		s->wd_bytes -= len;
		if (why == DRAM_ADMIT_EVICT)
			s->wd_victim_bytes -= len;
		if (group)
			s->wd_group_bytes[group] -= len;
		pthread_mutex_unlock(&s->wd_lock);
		wd_shed_count(s, why == DRAM_ADMIT_CLOSE);
		return false;
	}
	t->wd_group = group;
	t->sheddable = limited;
	t->close = why == DRAM_ADMIT_CLOSE;
	t->type = T_PUT;
	t->s = s;
	t->item = item;
	t->ns = ns;
	t->value_len = len;
	t->rewrite = why == DRAM_ADMIT_EVICT;
	A(s->wd_queued);
	wd_enqueue(s, t, WD_BACK);
	return true;
}

/* A kvt_now_ns deadline as the timespec of a timed wait on wd_cond (on
 * CLOCK_MONOTONIC, as kvt_now_ns: ssd_open). */
static struct timespec ssd_deadline_ts(uint64_t deadline_ns)
{
	uint64_t now = kvt_now_ns();
	return kvt_deadline(CLOCK_MONOTONIC, deadline_ns > now ? deadline_ns - now : 0);
}

int ssd_put_room(struct ssd *s, uint32_t ns, uint64_t len)
{
	struct timespec dl;
	bool waited = false;
	int ret = KVT_OK;

	if (!ns_persistent(s, ns))
		return KVT_OK;
	dl = kvt_deadline(CLOCK_MONOTONIC, s->cfg.wd_wait_ns);
	pthread_mutex_lock(&s->wd_lock);
	/* A value larger than the whole queue goes alone, once it is empty. */
	while (!s->wd_stop && !s->degraded &&
	       s->wd_bytes - s->wd_victim_bytes + len > s->cfg.wd_max_bytes &&
	       s->wd_bytes - s->wd_victim_bytes > 0) {
		if (!waited) {
			waited = true;
			A(s->wd_put_waits);
		}
		if (pthread_cond_timedwait(&s->wd_cond, &s->wd_lock, &dl) == ETIMEDOUT) {
			if (s->wd_bytes - s->wd_victim_bytes + len > s->cfg.wd_max_bytes &&
			    s->wd_bytes - s->wd_victim_bytes > 0) {
				A(s->wd_put_timeouts);
				ret = KVT_EFULL;
			}
			break;
		}
	}
	pthread_mutex_unlock(&s->wd_lock);
	return ret;
}

/* ------------------------------------------------------------------------
 * Parked puts (ssd_room_watch): the wait of ssd_put_room with no thread
 * blocked.  A waiter is completed by whoever next changes the backlog or
 * passes its deadline: wd_finish (an I/O thread), the writer between
 * tasks, or the writer's wait, timed to the head's deadline.
 */
struct ssd_room_waiter {
	struct ssd_room_waiter *next;
	uint64_t len;
	uint64_t deadline_ns;       /* kvt_now_ns */
	int status;
	tier_done_fn done;
	void *ctx;
};

/* Would a persistent put of len bytes wait?  ssd_put_room's condition.
 * wd_lock. */
static bool ssd_room_short_locked(const struct ssd *s, uint64_t len)
{
	return !s->wd_stop && !s->degraded &&
	       s->wd_bytes - s->wd_victim_bytes + len > s->cfg.wd_max_bytes &&
	       s->wd_bytes - s->wd_victim_bytes > 0;
}

/* Complete the parked puts that now fit, in order, and those past their
 * deadline.  Takes wd_lock; the callbacks run without it. */
static void ssd_room_run(struct ssd *s)
{
	struct ssd_room_waiter *ready = NULL, **tail = &ready, *w;
	uint64_t promised = 0, now;

	pthread_mutex_lock(&s->wd_lock);
	if (!s->room_head) {
		pthread_mutex_unlock(&s->wd_lock);
		return;
	}
	now = kvt_now_ns();
	while ((w = s->room_head)) {
		/* Those woken together pass wd_max by a block each at most,
		 * as puts that waited in ssd_put_room do. */
		if (!ssd_room_short_locked(s, promised + w->len)) {
			w->status = KVT_OK;
			promised += w->len;
		} else if (now >= w->deadline_ns) {
			w->status = KVT_EFULL;
			A(s->wd_put_timeouts);
		} else {
			break; /* FIFO, one bound: the rest are later still */
		}
		s->room_head = w->next;
		w->next = NULL;
		*tail = w;
		tail = &w->next;
	}
	if (!s->room_head)
		s->room_tail = NULL;
	pthread_mutex_unlock(&s->wd_lock);
	while ((w = ready)) {
		struct tier_result res = { .status = w->status };
		ready = w->next;
		w->done(w->ctx, &res);
		kvt_mem_free(s->mem, w, sizeof(*w));
	}
}

int ssd_room_watch(struct ssd *s, uint32_t ns, uint64_t len, tier_done_fn done, void *ctx)
{
	struct ssd_room_waiter *w;

	if (!ns_persistent(s, ns))
		return KVT_OK;
	pthread_mutex_lock(&s->wd_lock);
	/* A new wait queues behind those parked before it; a put (done
	 * NULL) -- typically one whose wait just ended -- only needs room. */
	if ((!done || !s->room_head) && !ssd_room_short_locked(s, len)) {
		pthread_mutex_unlock(&s->wd_lock);
		return KVT_OK;
	}
	if (!done || s->cfg.wd_wait_ns == 0) {
		if (done) {
			A(s->wd_put_waits);
			A(s->wd_put_timeouts);
		}
		pthread_mutex_unlock(&s->wd_lock);
		return done ? KVT_EFULL : KVT_EWAIT;
	}
	pthread_mutex_unlock(&s->wd_lock);
	w = kvt_mem_calloc(s->mem, 1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->len = len;
	w->deadline_ns = kvt_now_ns() + s->cfg.wd_wait_ns;
	w->done = done;
	w->ctx = ctx;
	pthread_mutex_lock(&s->wd_lock);
	if (s->room_tail)
		s->room_tail->next = w;
	else
		s->room_head = w;
	s->room_tail = w;
	A(s->wd_put_waits);
	pthread_cond_broadcast(&s->wd_cond); /* the writer times its wait by the head */
	pthread_mutex_unlock(&s->wd_lock);
	ssd_room_run(s); /* room may have come meanwhile: done may run now */
	return TIER_PENDING;
}

void ssd_plug(void *ctx, bool on)
{
	struct ssd *s = ctx;
	pthread_mutex_lock(&s->wd_lock);
	if (on)
		s->wd_plugs++;
	else if (s->wd_plugs > 0 && --s->wd_plugs == 0)
		pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
}

void ssd_hold_writes(struct ssd *s, bool hold)
{
	pthread_mutex_lock(&s->wd_lock);
	s->wd_hold = hold;
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
}

static void wd_task_free(struct ssd *s, struct wd_task *t)
{
	if (t->hdr)
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
	if (t->carry_parts)
		kvt_mem_free(s->mem, t->carry_parts,
			     (size_t)t->part_count * sizeof(*t->carry_parts));
	kvt_mem_free(s->mem, t, sizeof(*t));
}

/* A write placed in g, about to be submitted: tagged with the tombstones
 * placed there so far (the writer places one write at a time, so the
 * count now is the count at its reservation, itself included), and
 * counted in flight by tag (ssd_idx.c ssd_sync_all_prio).  wd_lock held. */
static void seg_infl_add_locked(struct ssd_seg *g, struct wd_task *t)
{
	t->tomb_tag = atomic_load(&g->tomb_placed);
	if (t->tomb_tag != g->infl_tag) {
		g->infl_old += g->infl_cur;
		g->infl_cur = 0;
		g->infl_tag = t->tomb_tag;
	}
	g->infl_cur++;
}

/* A write placed, about to be submitted (or finished as failed): counted
 * in flight, in its epoch and its segment's tag, its bytes placed (a put's
 * or a carry's: wd_finish takes them off).  Writer thread. */
static void wd_placed(struct ssd *s, struct wd_task *t)
{
	pthread_mutex_lock(&s->wd_lock);
	s->wd_inflight++;
	t->sync_epoch = s->sync_epoch;
	seg_infl_add_locked(&s->segs[t->slot], t);
	if (t->type == T_PUT || t->type == T_CARRY) {
		s->wd_placed_bytes += t->rec_len;
		s->wd_placed_values += t->value_len;
	}
	pthread_mutex_unlock(&s->wd_lock);
}

/* A write finished (or was never submitted: res < 0).  Any thread. */
static void wd_finish(struct ssd *s, struct wd_task *t, int64_t res)
{
	bool ok = res >= 0 && (uint64_t)res == t->rec_len, stopping, broke = false;
	bool placed = t->hdr || t->batched; /* a write was placed (wd_placed) */

	if (t->type == T_PUT || t->type == T_CARRY) {
		uint64_t h = ssd_hash(s, t->ns, &t->key);
		struct ssd_shard *sh = shard_of(s, h);
		struct ssd_entry **pp;
		pthread_mutex_lock(&sh->lock);
		pp = ssd_idx_slot(sh, h, t->ns, &t->key);
		/* Its segment quarantined meanwhile (E_DEAD): kept unpublished,
		 * if written (ssd_idx_kill). */
		if (*pp && (*pp)->seq == t->seq && !(ok && ((*pp)->flags & E_DEAD))) {
			if (ok) {
				(*pp)->flags &= (uint8_t)~E_PENDING;
				sh->bytes += (*pp)->value_len;
				sh->rec_bytes += (uint64_t)(*pp)->len_512 * SSD_REC_ALIGN;
				quota_ssd_add(s->cfg.quota, t->ns, (*pp)->value_len, true);
			} else if (res == -ECANCELED) {
				ssd_idx_remove_locked(s, sh, pp);
			} else if (!((*pp)->flags & E_DEAD)) {
				/* Failed, but its bytes may be on disk (a device
				 * may fail a write that landed, whole or torn),
				 * and a recovery walk may find the record: the
				 * entry stays, dead, for a delete of the block
				 * (in DRAM still) to log its tombstone.  Until
				 * 2026-12-05 it went, and a delete answered 0
				 * came back after a kill -9 (test_ssd
				 * eio_landed_kill9). */
				(*pp)->flags |= E_DEAD;
				sh->dead++;
			}
		}
		pthread_mutex_unlock(&sh->lock);
		if (t->type == T_CARRY) {
			if (ok && !t->carry_gone) {
				A(s->carried);
				AN(s->carried_bytes, t->value_len);
			}
		} else {
			dram_writedown_done(s->dram, t->item, ok);
			if (ok) {
				A(s->wd_written);
				AN(s->wd_written_bytes, t->value_len);
			}
		}
	} else if (ok) {
		A(s->tombstones);
	}
	if (!ok && res != -ECANCELED) {
		A(s->wd_errors);
		/* A hole a recovery walk stops at, before the tombstones placed
		 * after this write: set before a quarantine judges them. */
		if (placed)
			ssd_seg_hole(&s->segs[t->slot], t->tomb_tag,
				     t->type == T_DELETE || t->type == T_CLEAR);
		if (res == -ENOSPC) {
			bool was;
			A(s->enospc);
			pthread_mutex_lock(&s->wd_lock);
			was = s->degraded;
			s->degraded = true;
			s->degraded_at_ns = kvt_now_ns();
			pthread_mutex_unlock(&s->wd_lock);
			if (!was) /* logged outside the lock: the callback is the embedder's */
				kvt_logf(s->log, KVT_LOG_ERROR,
					 "ssd: device full (ENOSPC): serving from DRAM only, "
					 "write-downs shed; retrying every %llu ms",
					 (unsigned long long)(s->cfg.retry_ns / 1000000));
		} else if (res == -EIO && placed) {
			/* Quarantined, the segment is not synced again nor
			 * sealed (a recovery walk stops at this write): its
			 * tombstones not yet durable, or past this hole, are
			 * judged lost there -- before the count a delete's sync
			 * waits on, below (test_ssd quarantine_tomb). */
			ssd_seg_mark_bad(s, t->slot, (int)res);
		}
		if (placed) {
			seg_mark_broken(s, t->slot); /* a hole: seal before more goes there */
			broke = true;
		}
		pthread_mutex_lock(&s->wd_lock);
		stopping = s->wd_stop;
		pthread_mutex_unlock(&s->wd_lock);
		if ((t->type == T_DELETE || t->type == T_CLEAR) && !stopping) {
			/* A delete that is not on disk would come back after a
			 * restart: log it again, in the next segment.  A sync
			 * waiting for it goes behind the new one
			 * (wd_tombs_check_locked), or fails if it is given up. */
			struct wd_task *again = kvt_mem_calloc(s->mem, 1, sizeof(*again));
			bool parked = false, dropped = false, was_dropped;
			if (again) {
				again->type = t->type;
				again->s = s;
				again->ns = t->ns;
				again->key = t->key;
				/* The seq its first placement took (or, never
				 * placed, the one wd_write gave it then): the
				 * delete's bound, kept.  A new one, above a
				 * put of the key placed since, deleted that
				 * put at the next open (test_ssd retry_bound,
				 * retry_unplaced). */
				again->seq = t->seq;
				/* 4: parked */
				again->retries = t->retries < 3 ? t->retries + 1 : 4;
			}
			pthread_mutex_lock(&s->wd_lock);
			was_dropped = s->tomb_dropped;
			if (again && t->retries < 3) {
				s->tomb_retrying++;
			} else if (again && s->tomb_parked_n < SSD_TOMB_PARKED_MAX) {
				again->next = s->tomb_parked;
				s->tomb_parked = again;
				s->tomb_parked_n++;
				parked = true;
			} else {
				s->tomb_dropped = true;
				dropped = true;
			}
			pthread_mutex_unlock(&s->wd_lock);
			if (again && !parked && !dropped)
				wd_enqueue(s, again, WD_URGENT);
			if (dropped && again)
				kvt_mem_free(s->mem, again, sizeof(*again));
			if ((parked && t->retries == 3) || (dropped && !was_dropped))
				kvt_logf(s->log, KVT_LOG_ERROR,
					 "ssd: a %s could not be logged (%s): %s",
					 t->type == T_DELETE ? "delete" : "clear",
					 kvt_strerror((int)res),
					 dropped ? "it may come back after a restart; every "
						   "later delete fails until the store reopens"
						 : "deletes fail until it is written");
		}
	} else if (ok) {
		bool was;
		pthread_mutex_lock(&s->wd_lock);
		was = s->degraded;
		s->degraded = false;
		pthread_mutex_unlock(&s->wd_lock);
		if (was)
			kvt_logf(s->log, KVT_LOG_INFO, "ssd: writes succeed again: tier re-enabled");
	}
	pthread_mutex_lock(&s->wd_lock);
	if ((t->type == T_DELETE || t->type == T_CLEAR) && t->retries > 0)
		s->tomb_retrying--; /* written, queued again or given up: above */
	if (t->type == T_PUT)
		wd_put_gone_locked(s, t);
	else if (t->type == T_CARRY)
		s->wd_bytes -= t->value_len;
	if (placed) {
		/* Its segment needs an fdatasync (again, if a sync took the
		 * flag while it was in flight): before the count below, which
		 * a delete's sync waits on (sync_main). */
		struct ssd_seg *g = &s->segs[t->slot];
		atomic_store(&g->dirty, true);
		if (t->tomb_tag == g->infl_tag)
			g->infl_cur--;
		else
			g->infl_old--;
		if (t->type == T_DELETE || t->type == T_CLEAR)
			g->tomb_done++;
		s->wd_inflight--;
		if (t->type == T_PUT || t->type == T_CARRY) {
			s->wd_placed_bytes -= t->rec_len;
			s->wd_placed_values -= t->value_len;
		}
		/* A hole before a delete's tombstone: its sync waits for the
		 * writer to seal the segment (sync_main) */
		if (broke && t->sync_epoch != s->sync_epoch)
			s->broken_marks++;
		if (t->sync_epoch != s->sync_epoch && s->sync_before > 0 &&
		    --s->sync_before == 0)
			pthread_cond_signal(&s->sync_cond);
	}
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
	wd_task_free(s, t);
	ssd_room_run(s);
}

/* A graceful stop's write-down taken after the stop's time ran out
 * (ssd_close_writedown). */
static bool wd_close_late(struct ssd *s)
{
	uint64_t end = atomic_load_explicit(&s->close_deadline_ns, memory_order_relaxed);
	return end && kvt_now_ns() >= end;
}

/* A graceful stop's write-down that found no free room (open_keep): not
 * written, not an error -- the block stays DRAM's, and the stop writes no
 * more (close_full).  Never placed: finished as a cancelled task. */
static void wd_close_refused(struct ssd *s, struct wd_task *t)
{
	AN(s->close_refused, t->value_len);
	wd_finish(s, t, -ECANCELED);
}

static void wd_io_done(struct multi_io *m, int64_t res)
{
	struct wd_task *t = m->ctx;
	wd_finish(t->s, t, res);
}

static int ssd_find_gen(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t *gen);

/* A put whose block is on SSD already (e.g. reinsertion raced a
 * promotion): nothing to do, t finished and freed -- unless DRAM evicted
 * it again (victim tier) and the copy is in the older half of the log,
 * soon gone with its segment: then it is written anew, so a block in use
 * moves to the log's head as it would to an LRU list's
 * (doc/policies.md).  t's ns and key known.  Writer thread. */
static bool wd_already_down(struct ssd *s, struct wd_task *t)
{
	uint64_t gen = 0;
	if (ssd_find_gen(s, t->ns, &t->key, &gen) != KVT_OK ||
	    (t->rewrite && gen + ssd_room_slots(s) / 2 <= s->next_gen))
		return false;
	dram_writedown_done(s->dram, t->item, true);
	t->item = NULL;
	pthread_mutex_lock(&s->wd_lock);
	wd_put_gone_locked(s, t);
	pthread_mutex_unlock(&s->wd_lock);
	wd_task_free(s, t);
	return true;
}

/*
 * Whether the index entry kept for the carry t (PENDING, E_CARRY, its
 * seq carry_seq) is still there: a delete, clear or newer write takes it.
 * If so and n is not NULL, it is moved to the carry's new place: n's seq,
 * generation, slot, offset, length, flags and value_crc (wd_finish
 * publishes it once written).  Writer thread.
 */
static bool wd_carry_move(struct ssd *s, const struct wd_task *t, const struct ssd_entry *n)
{
	uint64_t h = ssd_hash(s, t->ns, &t->key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry **pp;
	bool alive;

	pthread_mutex_lock(&sh->lock);
	pp = ssd_idx_slot(sh, h, t->ns, &t->key);
	alive = *pp && (*pp)->seq == t->carry_seq && ((*pp)->flags & E_CARRY);
	if (alive && n) {
		struct ssd_entry *e = *pp;
		e->seq = n->seq;
		e->generation = n->generation;
		ssd_idx_reslot_locked(s, sh, e, n->slot); /* its new slot's list */
		e->off_512 = n->off_512;
		e->len_512 = n->len_512;
		e->flags = n->flags; /* not read at its new place yet */
		e->value_crc = n->value_crc;
	}
	pthread_mutex_unlock(&sh->lock);
	return alive;
}

/* A carry not written: the index entry kept for it goes if still its own
 * (a seq below `below`), counted lost, t freed.  Writer thread. */
static void wd_carry_drop(struct ssd *s, struct wd_task *t, uint64_t below)
{
	ssd_idx_remove_key(s, t->ns, &t->key, below);
	A(s->carry_lost);
	pthread_mutex_lock(&s->wd_lock);
	s->wd_bytes -= t->value_len;
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
	wd_task_free(s, t);
	ssd_room_run(s);
}

/* Build, place and submit one record.  Writer thread. */
static void wd_write(struct ssd *s, struct wd_task *t)
{
	struct ssd_entry *spare = NULL; /* T_PUT: its index entry, allocated up front */
	struct wd_task *tomb = NULL;    /* T_PUT: a tombstone, should a delete win */
	struct ssd_part parts_small[16], *parts = parts_small;
	uint64_t lens_small[16], *lens = lens_small;
	uint32_t crcs_small[16], *crcs = crcs_small;
	const struct ns_entry *nse;
	struct ssd_rec_hdr rh;
	struct ssd_sum_entry se;
	struct ssd_entry e;
	uint64_t off = 0, rec_len, h;
	unsigned np = 1, vc = 0;
	int r;

	memset(&rh, 0, sizeof(rh));
	memset(&se, 0, sizeof(se));
	if (t->type == T_PUT) {
		if (!dram_item_alive(s->dram, t->item)) {
			A(s->wd_skipped);
			wd_finish(s, t, -ECANCELED);
			return;
		}
		lens = kvt_mem_alloc(s->mem, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							      sizeof(*parts)));
		if (!lens) {
			wd_finish(s, t, -ENOMEM);
			return;
		}
		crcs = (uint32_t *)(lens + KVT_PARTS_MAX);
		parts = (struct ssd_part *)(void *)(crcs + KVT_PARTS_MAX);
		spare = kvt_mem_alloc(s->mem, sizeof(*spare));
		tomb = kvt_mem_calloc(s->mem, 1, sizeof(*tomb));
		if (!spare || !tomb) {
			r = -ENOMEM;
			goto fail;
		}
		r = dram_item_meta(s->dram, t->item, &t->ns, &t->key, lens, crcs, KVT_PARTS_MAX);
		if (r < 0)
			goto fail;
		np = (unsigned)r;
		for (unsigned i = 0; i < np; i++) {
			parts[i].len = lens[i];
			parts[i].crc = crcs[i];
		}
		if (wd_already_down(s, t)) {
			kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
								   sizeof(*parts)));
			kvt_mem_free(s->mem, spare, sizeof(*spare));
			kvt_mem_free(s->mem, tomb, sizeof(*tomb));
			return;
		}
		rh.type = SSD_REC_PUT;
		rh.part_count = np;
		rh.value_len = t->value_len;
		if (dram_item_flags(t->item) & KVT_F_SEALED)
			rh.flags = SSD_REC_F_SEALED;
	} else {
		rh.type = t->type == T_DELETE ? SSD_REC_DELETE
			  : t->ns == KVT_NS_ALL ? SSD_REC_CLEAR_ALL : SSD_REC_CLEAR_NS;
		np = 0;
	}
	nse = t->ns != KVT_NS_ALL ? ns_reg_get(s->reg, t->ns) : NULL;
	rh.ns_id = t->ns == KVT_NS_ALL ? 0 : t->ns;
	if (nse)
		memcpy(rh.ns_digest, nse->digest, 32);
	if (t->type != T_CLEAR)
		rh.key = t->key;
	/* The open segment's alignment is the store's (every segment this
	 * open starts uses it): the header and the value's padding take it,
	 * so that each of the write's buffers is a whole number of it. */
	t->hdr_len = ssd_rec_hdr_len(np, s->rec_align);
	rec_len = ssd_rec_len(np, rh.value_len, s->rec_align);
	t->rec_len = rec_len;
	if (t->type != T_PUT) {
		/* A tombstone goes down twice, in one write: the record and its
		 * twin right after it, so that damage to one (bit rot, a bad
		 * sector) does not bring back what it deleted when a recovery
		 * walk has to find it (ssd_walk_twin, doc/ssd.md "What damage
		 * costs").  t->hdr holds both; the summary names the first. */
		t->hdr_len *= 2;
		t->rec_len *= 2;
	}
	t->hdr = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, t->hdr_len);
	if (!t->hdr) {
		r = -ENOMEM;
		goto fail;
	}

	se.type = rh.type;
	se.ns_id = rh.ns_id;
	se.value_len = rh.value_len;
	se.part_count = (uint16_t)np;
	se.key = rh.key;
	if (t->type != T_PUT)
		se.seq = t->seq; /* logged again: its first placement's (0: none) */
	pthread_mutex_lock(&s->seg_lock);
	s->open_keep = t->close;
	r = seg_reserve_locked(s, rec_len, t->type != T_PUT, &se, &t->slot, &off,
			       &t->generation);
	s->open_keep = false;
	pthread_mutex_unlock(&s->seg_lock);
	ssd_room_tell(s);
	if (r < 0) {
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
		t->hdr = NULL;
		goto fail;
	}
	t->seq = se.seq;
	t->off_512 = se.off_512;
	if (t->type == T_CLEAR) {
		pthread_mutex_lock(&s->seg_lock);
		ssd_clear_raise(s, rh.ns_id, se.seq);
		pthread_mutex_unlock(&s->seg_lock);
	}
	rh.seq = se.seq;
	rh.generation = t->generation;
	r = ssd_rec_hdr_encode(&rh, np ? parts : NULL, s->rec_align, t->hdr, t->hdr_len);
	if (r >= 0 && t->type != T_PUT)
		memcpy(t->hdr + rec_len, t->hdr, rec_len); /* the twin */
	if (r < 0) {
		/* Cannot happen: lengths were checked.  The reserved space stays
		 * unwritten: finished as a write placed and failed (wd_finish:
		 * a hole, the segment sealed before more goes there, a
		 * tombstone logged again), so that a tombstone counted placed
		 * (tomb_placed) is counted done too -- until 2026-12-05 it
		 * was not, and the slot's newest tombstone stayed "at risk"
		 * (ssd_idx.c) for good. */
		kvt_logf(s->log, KVT_LOG_ERROR, "ssd: encoding a record: %s", kvt_strerror(r));
		kvt_mem_free(s->mem, spare, sizeof(*spare));
		kvt_mem_free(s->mem, tomb, sizeof(*tomb));
		if (lens != lens_small)
			kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
								   sizeof(*parts)));
		wd_placed(s, t);
		wd_finish(s, t, r);
		return;
	}

	if (t->type == T_PUT) {
		/* Enter it as PENDING, then look again: a delete that killed the
		 * DRAM block before this point finds no entry and logs no
		 * tombstone, so the record must not be published. */
		memset(&e, 0, sizeof(e));
		e.seq = t->seq;
		e.value_len = t->value_len;
		e.generation = t->generation;
		e.ns = t->ns;
		e.slot = t->slot;
		e.off_512 = se.off_512;
		e.len_512 = se.len_512;
		e.part_count = (uint16_t)np;
		e.flags = E_PENDING;
		e.key_len = (uint8_t)t->key.len;
		memcpy(e.key, t->key.bytes, t->key.len);
		h = ssd_hash(s, t->ns, &t->key);
		/* With the entry and the tombstone allocated before the space
		 * was reserved, nothing below can leave a record on disk that
		 * the index does not know and no tombstone covers. */
		r = ssd_idx_put(s, h, &e, &spare);
		if (!dram_item_alive(s->dram, t->item) &&
		    ssd_idx_remove_key(s, t->ns, &t->key, t->seq + 1)) {
			/* Lost to a delete after all: log a tombstone after it. */
			tomb->type = T_DELETE;
			tomb->s = s;
			tomb->ns = t->ns;
			tomb->key = t->key;
			wd_enqueue(s, tomb, WD_NOW);
			tomb = NULL;
		}
		kvt_mem_free(s->mem, spare, sizeof(*spare));
		kvt_mem_free(s->mem, tomb, sizeof(*tomb));
		spare = NULL;
		tomb = NULL;
		t->iov[0].iov_base = t->hdr;
		t->iov[0].iov_len = t->hdr_len;
		/* DRAM's runs are 4 KiB aligned, the last one's tail zeroed to
		 * its 4 KiB boundary (dram.h): padding to 4096 reads no
		 * recycled bytes. */
		vc = dram_item_view(s->dram, t->item, t->iov + 1, &h);
		t->iov[vc].iov_len = align_rec(t->iov[vc].iov_len, s->rec_align);
		vc++;
		kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							   sizeof(*parts)));
		lens = lens_small;
	} else {
		t->iov[0].iov_base = t->hdr;
		t->iov[0].iov_len = t->hdr_len;
		vc = 1;
	}
	wd_placed(s, t);
	multi_submit(s, &t->io, IO_WRITE, IO_PRIO_WRITE, s->segs[t->slot].fd, off, t->iov, vc,
		     wd_io_done, t);
	return;

fail:
	kvt_mem_free(s->mem, spare, sizeof(*spare));
	kvt_mem_free(s->mem, tomb, sizeof(*tomb));
	if (lens != lens_small)
		kvt_mem_free(s->mem, lens, KVT_PARTS_MAX * (sizeof(*lens) + sizeof(*crcs) +
							   sizeof(*parts)));
	if (t->hdr) {
		kvt_mem_free(s->mem, t->hdr, t->hdr_len);
		t->hdr = NULL;
	}
	if (r == KVT_ETOOBIG)
		A(s->wd_skipped);
	if (t->type != T_PUT && t->seq == 0) {
		/* A tombstone never placed (its buffer or its space refused)
		 * takes its seq now, and its retry keeps it: parked after
		 * three more refusals, it is tried again only at a sync, and
		 * a seq taken then was above a put of the key written
		 * meanwhile, which the next open deleted (test_ssd
		 * retry_unplaced, review42c). */
		pthread_mutex_lock(&s->seg_lock);
		t->seq = s->next_seq++;
		pthread_mutex_unlock(&s->seg_lock);
	}
	if (r == KVT_EFULL && t->close)
		wd_close_refused(s, t);
	else
		wd_finish(s, t, r == -ENOSPC || r == KVT_EFULL ? -ENOSPC : r);
}

/*
 * Batches (ssd.format=3; doc/ssd-format.md "Format 3: batch headers").
 * The writer takes consecutive single-part write-downs of at most
 * SSD_BATCH_VALUE_MAX bytes from the head of the write-down queue -- up to
 * SSD_BATCH_MAX, while their header fits SSD_BATCH_HDR_MAX, their values
 * stay within ssd_batch_values_max (under SSD_SPLIT_MIN: one vectored
 * request; a quarter of a segment at most), their DRAM runs under
 * the engine's 1024 iovecs, the write-down window allows them, and no
 * tombstone or sync waits in the urgent lane -- and writes them as one
 * batch: one reservation (one sequence number each, in queue order), one
 * header, one write, each task finished with its result.  Carries of one
 * part (T_CARRY, their bytes read back into memory at reclamation) join
 * batches as write-downs do.  A batch of one is written as a record
 * (framed: it costs the same room), as are puts and carries of several
 * parts or larger values, and tombstones.
 *
 * Each task keeps every promise of a framed put (wd_write): its index
 * entry and a tombstone allocated before the space is reserved, its entry
 * entered PENDING after the reservation and its DRAM block looked at
 * again (a delete that won logs a tombstone after the batch), each counted
 * placed (wd_placed: in flight, its epoch, its segment's tombstone tag --
 * the same for all, no tombstone is placed between) before the one
 * submit, so a delete's sync waits for the whole batch.  A failed batch
 * fails every task (its entries kept E_DEAD: wd_finish); a torn one is
 * read value by value (value_crc): what landed is served after a
 * restart, the rest a miss.
 *
 * A carry keeps every promise of wd_carry_write: its index entry (kept
 * PENDING | E_CARRY since reclamation) is looked at when the batch takes
 * it (wd_batch_prep) -- after every tombstone and write placed before the
 * batch, since only this thread places them: one that took the entry is
 * older than the batch's sequence numbers, and writing the carry would
 * let a recovery bring back what it removed, so the carry is dropped --
 * and moved to the value's place after the reservation (wd_batch_place).
 * A delete or clear between the two logs its tombstone after the batch,
 * so the value, its bytes written anyway (a batch cannot take one value
 * back), stays deleted at recovery, and no entry names it
 * (carry_gone).  Quota, the shard's bytes and live_record_bytes: taken
 * off at reclamation, given back by wd_finish when the write lands, as a
 * framed carry's.
 */
#define WD_BATCH_IOV 1024u /* the I/O engine's iovecs per request (io.c IO_IOV_MAX) */
_Static_assert(SSD_BATCH_VALUES_LIM <= SSD_SPLIT_MIN, "a batch goes as one request");

struct wd_batch {
	struct ssd *s;
	struct multi_io io;
	uint8_t *hdr;
	uint32_t hdr_len;
	unsigned n, iovn, ns_count;
	uint64_t key_pad, values, total;
	struct wd_task *t[SSD_BATCH_MAX];
	uint32_t crc[SSD_BATCH_MAX];      /* each value's plain CRC32C (DRAM's) */
	unsigned iov_end[SSD_BATCH_MAX];  /* iovn once value i was added */
	struct ssd_entry *spare[SSD_BATCH_MAX];
	struct wd_task *tomb[SSD_BATCH_MAX];
	struct ssd_batch b;
	struct iovec iov[WD_BATCH_IOV];
};

/* Whether t may join a batch by what the queue knows (type, parts of a
 * carry, length). */
static bool wd_batchable(const struct wd_task *t)
{
	return (t->type == T_PUT || (t->type == T_CARRY && t->part_count == 1)) &&
	       t->value_len >= 1 && t->value_len <= SSD_BATCH_VALUE_MAX;
}

static void wd_carry_write(struct ssd *s, struct wd_task *t);

/* t alone, as a record. */
static void wd_write_one(struct ssd *s, struct wd_task *t)
{
	if (t->type == T_CARRY)
		wd_carry_write(s, t);
	else
		wd_write(s, t);
}

static void wd_batch_unprep(struct ssd *s, struct wd_batch *wb, unsigned i)
{
	kvt_mem_free(s->mem, wb->spare[i], sizeof(*wb->spare[i]));
	kvt_mem_free(s->mem, wb->tomb[i], sizeof(*wb->tomb[i]));
	wb->spare[i] = NULL;
	wb->tomb[i] = NULL;
}

/* Put t (taken from the write-down queue's head) back there. */
static void wd_unshift(struct ssd *s, struct wd_task *t)
{
	pthread_mutex_lock(&s->wd_lock);
	t->next = s->wd_head;
	s->wd_head = t;
	if (!s->wd_tail)
		s->wd_tail = t;
	pthread_mutex_unlock(&s->wd_lock);
}

enum { BP_DONE = 0, BP_ADDED, BP_FRAMED, BP_FULL };

/* Add the put or carry t to wb as its entry wb->n: BP_ADDED; BP_DONE: t
 * finished here (dead, on SSD already, a carry whose entry went, or
 * failed); BP_FRAMED: t is not for a batch (several parts, a length DRAM
 * does not confirm); BP_FULL: t does not fit in wb.  Writer thread. */
static int wd_batch_prep(struct ssd *s, struct wd_batch *wb, struct wd_task *t)
{
	struct iovec view[DRAM_MAX_RUNS];
	const struct ns_entry *nse;
	unsigned i = wb->n, vc, ns_index = wb->ns_count;
	uint64_t len = 0, h, key_pad, padded;
	uint32_t crc = 0;
	bool new_ns, sealed, carry = t->type == T_CARRY;
	int r;

	if (carry) {
		/* Its entry taken by a write or tombstone placed before this
		 * batch: dropped, as wd_carry_write does ("Batches"). */
		if (!wd_carry_move(s, t, NULL)) {
			wd_carry_drop(s, t, t->carry_seq + 1);
			return BP_DONE;
		}
		len = t->part_count == 1 ? t->carry_parts[0].len : 0;
		crc = t->part_count == 1 ? t->carry_parts[0].crc : 0;
		sealed = t->carry_flags & SSD_REC_F_SEALED;
	} else {
		if (!dram_item_alive(s->dram, t->item)) {
			A(s->wd_skipped);
			wd_finish(s, t, -ECANCELED);
			return BP_DONE;
		}
		r = dram_item_meta(s->dram, t->item, &t->ns, &t->key, &len, &crc, 1);
		if (r == KVT_ERANGE)
			return BP_FRAMED;
		if (r < 0) {
			wd_finish(s, t, r);
			return BP_DONE;
		}
		sealed = dram_item_flags(t->item) & KVT_F_SEALED;
	}
	nse = t->ns ? ns_reg_get(s->reg, t->ns) : NULL;
	if (!nse || len != t->value_len || len < 1 || len > SSD_BATCH_VALUE_MAX ||
	    t->key.len < 1)
		return BP_FRAMED;
	/* A key the batch holds already (its block deleted and put again
	 * while the batch was gathered): not in this batch.  Should the
	 * delete have killed the earlier block after its prep, the
	 * tombstone logged after the batch (wd_batch_place) would follow the
	 * new block's record, and a recovery would take the new block away
	 * (test_ssd f3_same_key); in the next batch it follows the
	 * tombstone, as a framed put does (wd_write: one record at a time,
	 * the tombstone in the urgent lane). */
	for (unsigned j = 0; j < i; j++)
		if (wb->t[j]->ns == t->ns && wb->t[j]->key.len == t->key.len &&
		    memcmp(wb->t[j]->key.bytes, t->key.bytes, t->key.len) == 0)
			return BP_FULL;
	if (!carry && wd_already_down(s, t))
		return BP_DONE;
	for (unsigned j = 0; j < wb->ns_count; j++)
		if (wb->b.ns[j].ns_id == t->ns)
			ns_index = j;
	key_pad = ssd_batch_ent_len(t->key.len) - SSD_BATCH_ENT_FIXED;
	padded = align_rec(len, s->rec_align);
	if (carry) {
		/* The value after its record header in the carry's buffer
		 * (evict_carry, evict_carry_batched: the store's alignment),
		 * padded as it was read back. */
		view[0].iov_base = t->hdr + ssd_rec_hdr_len(1, s->rec_align);
		view[0].iov_len = padded;
		vc = 1;
	} else {
		vc = dram_item_view(s->dram, t->item, view, &h);
	}
	new_ns = ns_index == wb->ns_count;
	if (i == SSD_BATCH_MAX || wb->values + padded > ssd_batch_values_max(s->cfg.seg_size) ||
	    wb->iovn + vc > WD_BATCH_IOV ||
	    ssd_batch_hdr_len(i + 1, wb->ns_count + new_ns, wb->key_pad + key_pad,
			      s->rec_align) == 0)
		return BP_FULL;
	if (!carry) { /* a carry's entry exists: wd_carry_move */
		wb->spare[i] = kvt_mem_alloc(s->mem, sizeof(*wb->spare[i]));
		wb->tomb[i] = kvt_mem_calloc(s->mem, 1, sizeof(*wb->tomb[i]));
		if (!wb->spare[i] || !wb->tomb[i]) {
			wd_batch_unprep(s, wb, i);
			wd_finish(s, t, -ENOMEM);
			return BP_DONE;
		}
	}
	if (new_ns) {
		wb->b.ns[ns_index].ns_id = t->ns;
		memcpy(wb->b.ns[ns_index].digest, nse->digest, 32);
		wb->ns_count++;
	}
	memset(&wb->b.ent[i], 0, sizeof(wb->b.ent[i]));
	wb->b.ent[i].ns_index = ns_index;
	wb->b.ent[i].flags = sealed ? SSD_REC_F_SEALED : 0;
	wb->b.ent[i].value_len = len;
	wb->b.ent[i].key = t->key;
	/* DRAM's runs are 4 KiB aligned, the last one's tail zeroed to its
	 * 4 KiB boundary (dram.h): padding to the alignment reads no
	 * recycled bytes (a carry's is padded already). */
	view[vc - 1].iov_len = align_rec(view[vc - 1].iov_len, s->rec_align);
	memcpy(&wb->iov[wb->iovn], view, vc * sizeof(view[0]));
	wb->iovn += vc;
	wb->iov_end[i] = wb->iovn;
	wb->crc[i] = crc;
	wb->key_pad += key_pad;
	wb->values += padded;
	wb->t[i] = t;
	t->rec_len = padded; /* its share of the write: wd_placed, wd_finish */
	wb->n++;
	return BP_ADDED;
}

/* How many of wb's values, from the first, fit at the end of g as one
 * batch (its header, values and summary entries); *hdr_len: that batch's
 * header length.  seg_lock held. */
static unsigned wd_batch_fit(const struct ssd *s, const struct wd_batch *wb,
			     const struct ssd_seg *g, uint32_t *hdr_len)
{
	uint64_t values = 0, key_pad = 0, elen = 0;
	unsigned ns_count = 0, k = 0;

	for (unsigned i = 0; i < wb->n; i++) {
		const struct ssd_batch_ent *e = &wb->b.ent[i];
		struct ssd_sum_entry se;
		uint32_t hl;

		memset(&se, 0, sizeof(se));
		se.key = e->key;
		values += align_rec(e->value_len, s->rec_align);
		key_pad += ssd_batch_ent_len(e->key.len) - SSD_BATCH_ENT_FIXED;
		elen += ssd_sum_entry_len(&se, SSD_SUM_VERSION_BATCH);
		if (e->ns_index + 1 > ns_count)
			ns_count = e->ns_index + 1;
		hl = ssd_batch_hdr_len(i + 1, ns_count, key_pad, s->rec_align);
		if (!hl ||
		    g->write_off + hl + values + align4k(g->sum_bytes + elen) > s->cfg.seg_size)
			break;
		k = i + 1;
		*hdr_len = hl;
	}
	return k;
}

/* wb cut to its first k values (the rest the caller puts back in the
 * queue): its namespaces, key bytes, values and iovecs recounted. */
static void wd_batch_cut(const struct ssd *s, struct wd_batch *wb, unsigned k)
{
	wb->n = k;
	wb->ns_count = 0;
	wb->key_pad = 0;
	wb->values = 0;
	for (unsigned i = 0; i < k; i++) {
		const struct ssd_batch_ent *e = &wb->b.ent[i];
		if (e->ns_index + 1 > wb->ns_count)
			wb->ns_count = e->ns_index + 1;
		wb->key_pad += ssd_batch_ent_len(e->key.len) - SSD_BATCH_ENT_FIXED;
		wb->values += align_rec(e->value_len, s->rec_align);
	}
	wb->iovn = wb->iov_end[k - 1];
}

/* A batch: g of format 3 at the store's alignment, and k > 0 of wb's
 * values fitting its end (wd_batch_fit; hdr_len: their header's). */
struct seg_fit_batch {
	const struct wd_batch *wb;
	unsigned k;
	uint32_t hdr_len;
};

static bool seg_fits_batch(const struct ssd *s, const struct ssd_seg *g, void *ctx)
{
	struct seg_fit_batch *f = ctx;
	if (!g->batches || g->rec_align != s->rec_align)
		return false;
	f->k = wd_batch_fit(s, f->wb, g, &f->hdr_len);
	return f->k > 0;
}

/*
 * Space for wb at the end of the open segment, which must be of format 3
 * (one that is not is sealed): as many of its values as fit there, from
 * the first (wb cut to them: a segment's tail is not left empty for a
 * batch that does not fit whole; the caller puts the rest back), one
 * sequence number per value in order, its header encoded into wb->hdr
 * (SSD_BATCH_HDR_MAX bytes), one summary entry per value.  Sets *off.
 * seg_lock held.
 */
static int seg_reserve_batch_locked(struct ssd *s, struct wd_batch *wb, uint64_t *off)
{
	struct seg_fit_batch fit = { wb, 0, 0 };
	struct ssd_sum_entry se;
	struct ssd_seg *g;
	int r;

	/* an empty segment takes a value (wd_batch_prep's bounds) */
	r = seg_open_fitting_locked(s, seg_fits_batch, &fit);
	if (r < 0)
		return r;
	g = &s->segs[s->open_slot];
	wd_batch_cut(s, wb, fit.k);
	wb->hdr_len = fit.hdr_len;
	wb->total = wb->hdr_len + wb->values;
	r = ssd_seg_sum_room(s, g, wb->n);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < wb->n; i++) {
		struct ssd_batch_ent *e = &wb->b.ent[i];
		e->seq = s->next_seq + i;
		e->value_crc = ssd_value_crc(wb->crc[i], wb->b.ns[e->ns_index].ns_id, &e->key,
					     e->seq);
	}
	wb->b.count = wb->n;
	wb->b.ns_count = wb->ns_count;
	wb->b.generation = g->generation;
	r = ssd_batch_encode(&wb->b, g->write_off, s->rec_align, wb->hdr, SSD_BATCH_HDR_MAX);
	if (r < 0)
		return r; /* cannot happen: every length was checked; nothing taken */
	/* The old generation's records this one overwrites go first. */
	seg_reclaim_upto_locked(s, (uint32_t)s->open_slot, g->write_off + wb->total);
	s->next_seq += wb->n;
	for (unsigned i = 0; i < wb->n; i++) {
		struct wd_task *t = wb->t[i];
		ssd_batch_sum_entry(&wb->b, i, s->rec_align, &se);
		g->sum[g->sum_count++] = se;
		g->sum_bytes += ssd_sum_entry_len(&se, SSD_SUM_VERSION_BATCH);
		t->slot = (uint32_t)s->open_slot;
		t->generation = g->generation;
		t->seq = se.seq;
		t->off_512 = se.off_512;
	}
	*off = g->write_off;
	g->write_off += wb->total;
	g->dirty = true;
	return 0;
}

static void wd_batch_done(struct multi_io *m, int64_t res)
{
	struct wd_batch *wb = m->ctx;
	struct ssd *s = wb->s;
	bool ok = res >= 0 && (uint64_t)res == wb->total;

	for (unsigned i = 0; i < wb->n; i++) {
		struct wd_task *t = wb->t[i];
		wd_finish(s, t, ok ? (int64_t)t->rec_len : res < 0 ? res : -ENODATA);
	}
	kvt_mem_free(s->mem, wb->hdr, SSD_BATCH_HDR_MAX);
	kvt_mem_free(s->mem, wb, sizeof(*wb));
}

/* Place and submit wb (n >= 2 values).  Writer thread. */
static void wd_batch_place(struct ssd *s, struct wd_batch *wb)
{
	unsigned gathered = wb->n;
	uint64_t off = 0;
	int r;

	wb->hdr = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_BATCH_HDR_MAX);
	if (!wb->hdr) {
		r = -ENOMEM;
	} else {
		pthread_mutex_lock(&s->seg_lock);
		for (unsigned i = 0; i < wb->n && !s->open_keep; i++)
			s->open_keep = wb->t[i]->close;
		r = seg_reserve_batch_locked(s, wb, &off);
		s->open_keep = false;
		pthread_mutex_unlock(&s->seg_lock);
		ssd_room_tell(s);
	}
	/* Cut to what the segment had room for: the rest back to the
	 * queue's head, in order, for the next batch. */
	for (unsigned i = gathered; r == 0 && i-- > wb->n;) {
		wd_batch_unprep(s, wb, i);
		wd_unshift(s, wb->t[i]);
	}
	if (r < 0) {
		for (unsigned i = 0; i < gathered; i++) {
			wd_batch_unprep(s, wb, i);
			if (wb->t[i]->type == T_CARRY) {
				/* not placed: as wd_carry_write's failed reservation */
				wd_carry_drop(s, wb->t[i], wb->t[i]->carry_seq + 1);
				continue;
			}
			if (r == KVT_ETOOBIG)
				A(s->wd_skipped);
			if (r == KVT_EFULL && wb->t[i]->close)
				wd_close_refused(s, wb->t[i]);
			else
				wd_finish(s, wb->t[i],
					  r == -ENOSPC || r == KVT_EFULL ? -ENOSPC : r);
		}
		if (wb->hdr)
			kvt_mem_free(s->mem, wb->hdr, SSD_BATCH_HDR_MAX);
		kvt_mem_free(s->mem, wb, sizeof(*wb));
		return;
	}
	for (unsigned i = 0; i < wb->n; i++) {
		struct wd_task *t = wb->t[i];
		struct ssd_entry e;
		uint64_t h;

		/* As wd_write: entered PENDING, then the DRAM block looked at
		 * again -- a delete that killed it before finds no entry and
		 * logs no tombstone, so one is logged after the batch. */
		memset(&e, 0, sizeof(e));
		e.seq = t->seq;
		e.value_len = t->value_len;
		e.generation = t->generation;
		e.ns = t->ns;
		e.slot = t->slot;
		e.off_512 = t->off_512;
		e.len_512 = (uint32_t)(t->rec_len / SSD_REC_ALIGN);
		e.part_count = 1;
		e.flags = E_PENDING | E_BATCHED |
			  (wb->b.ent[i].flags & SSD_REC_F_SEALED ? E_SEALED_VALUE : 0);
		e.value_crc = wb->b.ent[i].value_crc;
		if (t->type == T_CARRY) {
			/* Its entry moved here, unless a delete or clear took it
			 * since wd_batch_prep: its tombstone follows the batch
			 * ("Batches"). */
			if (wd_carry_move(s, t, &e)) {
				A(s->carried_in_batches);
			} else {
				t->carry_gone = true;
				A(s->carry_lost);
			}
			continue;
		}
		e.key_len = (uint8_t)t->key.len;
		memcpy(e.key, t->key.bytes, t->key.len);
		h = ssd_hash(s, t->ns, &t->key);
		ssd_idx_put(s, h, &e, &wb->spare[i]);
		if (!dram_item_alive(s->dram, t->item) &&
		    ssd_idx_remove_key(s, t->ns, &t->key, t->seq + 1)) {
			struct wd_task *tomb = wb->tomb[i];
			tomb->type = T_DELETE;
			tomb->s = s;
			tomb->ns = t->ns;
			tomb->key = t->key;
			wd_enqueue(s, tomb, WD_NOW);
			wb->tomb[i] = NULL;
		}
		wd_batch_unprep(s, wb, i);
	}
	wb->iov[0].iov_base = wb->hdr;
	wb->iov[0].iov_len = wb->hdr_len;
	for (unsigned i = 0; i < wb->n; i++) {
		wb->t[i]->batched = true;
		wd_placed(s, wb->t[i]);
	}
	A(s->batches);
	AN(s->batched_blocks, wb->n);
	wb->s = s;
	multi_submit(s, &wb->io, IO_WRITE, IO_PRIO_WRITE, s->segs[wb->t[0]->slot].fd, off,
		     wb->iov, wb->iovn, wd_batch_done, wb);
}

/* The write-down queue's head t (taken), and the batchable puts and
 * carries behind it, as one batch; t alone, or not batchable, as a
 * record (wd_write, wd_carry_write).  Writer thread. */
static void wd_batch_write(struct ssd *s, struct wd_task *t)
{
	struct wd_batch *wb = kvt_mem_calloc(s->mem, 1, sizeof(*wb));
	unsigned marks = atomic_load(&s->bad_marks);
	int r;

	if (!wb) {
		wd_write_one(s, t);
		return;
	}
	wb->iovn = 1; /* iov[0]: the header */
	r = wd_batch_prep(s, wb, t);
	if (r != BP_ADDED) {
		kvt_mem_free(s->mem, wb, sizeof(*wb));
		if (r != BP_DONE)
			wd_write_one(s, t);
		return;
	}
	for (;;) {
		struct wd_task *n, *flush = NULL;
		pthread_mutex_lock(&s->wd_lock);
		/* A flush is passed over: it waits only for what is queued
		 * before it, and what joins the batch from behind it is
		 * written before it completes too.  Stopping at it cut a batch
		 * wherever the caller's flush happened to land among the
		 * carries reclamation queues meanwhile: other batches, other
		 * headers, other hits run to run (doc/policies.md "Twelfth
		 * pass"). */
		for (n = s->wd_head; n && n->type == T_FLUSH; n = n->next)
			flush = n;
		/* A graceful stop's write-downs batch only with their own
		 * (open_keep, wd_batch_place, holds the whole batch to free
		 * room: another put in it failed ENOSPC, a carry was dropped),
		 * and one taken past the stop's time goes alone, dropped
		 * (review45e: a batch ran up to a window past it). */
		if (s->wd_uhead || !n || !wd_batchable(n) || n->close != t->close ||
		    (n->close && wd_close_late(s)) || (s->wd_hold && !s->wd_stop) ||
		    (s->wd_plugs && !s->wd_stop) ||
		    s->wd_placed_bytes + wb->values + align_rec(n->value_len, s->rec_align) >
			    s->cfg.wd_window_bytes ||
		    atomic_load(&s->bad_marks) != marks) {
			pthread_mutex_unlock(&s->wd_lock);
			break;
		}
		if (flush) {
			flush->next = n->next;
			if (s->wd_tail == n)
				s->wd_tail = flush;
		} else {
			s->wd_head = n->next;
			if (!s->wd_head)
				s->wd_tail = NULL;
		}
		pthread_mutex_unlock(&s->wd_lock);
		r = wd_batch_prep(s, wb, n);
		if (r == BP_FRAMED || r == BP_FULL) {
			wd_unshift(s, n); /* the next task (before a flush passed over) */
			break;
		}
	}
	if (wb->n == 1) {
		/* One value: as a record (the same room). */
		struct wd_task *one = wb->t[0];
		wd_batch_unprep(s, wb, 0);
		kvt_mem_free(s->mem, wb, sizeof(*wb));
		wd_write_one(s, one);
		return;
	}
	wd_batch_place(s, wb);
}

/*
 * Write a carried record (evict_carry) at the log's head: reserve its
 * space, and -- under seg_lock, so the reservation can still be taken
 * back -- swap its PENDING index entry to the new place if it is still
 * the one kept for it; if a delete, clear or newer write took it
 * meanwhile, take the reservation back and drop the carry (writing it
 * would let recovery bring back what the delete removed).  Writer thread.
 */
static void wd_carry_write(struct ssd *s, struct wd_task *t)
{
	const struct ns_entry *nse = ns_reg_get(s->reg, t->ns);
	uint64_t off = 0;
	struct ssd_rec_hdr rh;
	struct ssd_sum_entry se;
	bool alive = false;
	int r;

	memset(&rh, 0, sizeof(rh));
	memset(&se, 0, sizeof(se));
	rh.type = SSD_REC_PUT;
	rh.part_count = t->part_count;
	rh.ns_id = t->ns;
	rh.value_len = t->value_len;
	rh.flags = t->carry_flags;
	rh.key = t->key;
	if (nse)
		memcpy(rh.ns_digest, nse->digest, 32);
	se.type = SSD_REC_PUT;
	se.ns_id = t->ns;
	se.value_len = t->value_len;
	se.part_count = (uint16_t)t->part_count;
	se.key = t->key;
	t->rec_len = t->hdr_len;
	pthread_mutex_lock(&s->seg_lock);
	r = nse ? seg_reserve_locked(s, t->rec_len, false, &se, &t->slot, &off, &t->generation)
		: KVT_MISS;
	if (r == 0) {
		struct ssd_entry n;
		memset(&n, 0, sizeof(n));
		n.seq = se.seq;
		n.generation = t->generation;
		n.slot = t->slot;
		n.off_512 = se.off_512;
		n.len_512 = se.len_512;
		n.flags = E_PENDING; /* framed: no value_crc */
		alive = wd_carry_move(s, t, &n);
		if (!alive) {
			/* The newest reservation, in the open segment: undo it. */
			struct ssd_seg *g = &s->segs[t->slot];
			g->write_off -= t->rec_len;
			g->sum_count--;
			g->sum_bytes -= ssd_sum_entry_len(&se, ssd_seg_sum_version(g));
			s->next_seq--;
		}
	}
	pthread_mutex_unlock(&s->seg_lock);
	ssd_room_tell(s);
	if (alive) {
		t->seq = se.seq; /* wd_finish publishes the entry of this seq */
		t->off_512 = se.off_512;
		rh.seq = se.seq;
		rh.generation = t->generation;
		/* evict_carry took only a record of this alignment */
		r = ssd_rec_hdr_encode(&rh, t->carry_parts, s->rec_align, t->hdr,
				       ssd_rec_hdr_len(t->part_count, s->rec_align));
	}
	if (!alive || r < 0) {
		/* Not written: the entry kept for it goes (if still its own). */
		wd_carry_drop(s, t, alive ? se.seq + 1 : t->carry_seq + 1);
		return;
	}
	t->iov[0].iov_base = t->hdr;
	t->iov[0].iov_len = t->rec_len;
	wd_placed(s, t);
	multi_submit(s, &t->io, IO_WRITE, IO_PRIO_WRITE, s->segs[t->slot].fd, off, t->iov, 1,
		     wd_io_done, t);
}

/* fdatasync every segment written since the last sync.  Writer thread. */
static void wd_wait_inflight(struct ssd *s)
{
	pthread_mutex_lock(&s->wd_lock);
	while (s->wd_inflight > 0)
		pthread_cond_wait(&s->wd_cond, &s->wd_lock);
	pthread_mutex_unlock(&s->wd_lock);
}


static void wd_wake_waiter(struct wd_task *t, int status)
{
	pthread_mutex_lock(t->wait_lock);
	t->wait_status = status;
	*t->wait_done = 1;
	pthread_cond_broadcast(t->wait_cond);
	pthread_mutex_unlock(t->wait_lock);
}

/* Tests (ssd.debug_write_delay_ms): a slow device.  A timed wait on
 * wd_cond rather than a sleep, so that parked puts still fail on time. */
static void wd_debug_delay(struct ssd *s)
{
	uint64_t until = kvt_now_ns() + s->cfg.debug_delay_ns;
	for (;;) {
		uint64_t at = until;
		struct timespec ts;
		ssd_room_run(s);
		if (kvt_now_ns() >= until)
			return;
		pthread_mutex_lock(&s->wd_lock);
		if (s->wd_stop) {
			pthread_mutex_unlock(&s->wd_lock);
			return;
		}
		if (s->room_head && s->room_head->deadline_ns < at)
			at = s->room_head->deadline_ns;
		ts = ssd_deadline_ts(at);
		pthread_cond_timedwait(&s->wd_cond, &s->wd_lock, &ts);
		pthread_mutex_unlock(&s->wd_lock);
	}
}

/*
 * A tombstone that will not go down.  A tombstone whose write fails is
 * logged again, in the urgent lane, up to 3 times, then parked.  A sync
 * (T_FLUSH, T_DSYNC) that finds one queued again goes behind it, or it would
 * acknowledge a delete whose tombstone is not on the device; one that
 * finds some parked queues them once more and goes behind them, and fails
 * (-EIO) if any is parked still: the delete may come back after a
 * restart, so it is not acknowledged -- nor is any other while a
 * tombstone is unwritten (a sync does not know whose deletes it covers;
 * the device is failing).  Past SSD_TOMB_PARKED_MAX parked, a tombstone
 * is dropped and every later sync fails until the store is reopened.
 * Before 2026-12-04 the retry went behind the sync, which succeeded:
 * test_ssd delete_retry.  A tombstone logged again keeps the seq of its
 * first placement (wd_finish, seg_reserve_locked): it deletes what is
 * older than the delete, not a put of the key placed since.  Until
 * 2026-12-06 it took a new seq, above such a put's, and the next open
 * that read both (a walk, or the summaries without a checkpoint past
 * them) deleted that put (test_ssd retry_bound).  Its record then lies
 * among higher seqs, so the walk's seq tests (ssd_walk_twin) do not take
 * it for the next write: damage to its first copy, or to the twin of a
 * tombstone just before it, ends a walk there, as before twins (doc/ssd.md
 * "A tombstone that will not go down": what is lost, why never other
 * bytes, why the walk is not made to take a lower seq).
 * syncs: the list of syncs (T_FLUSH, T_DSYNC) asking, after the writes
 * before them completed; wd_lock held; *again: requeue them in the
 * urgent lane.
 */
static void wd_tombs_check_locked(struct ssd *s, struct wd_task *syncs, bool *again,
				  bool *failed)
{
	bool tried = true;
	for (struct wd_task *t = syncs; t; t = t->next)
		tried = tried && t->parked_tried;
	if (s->wd_stop) {
		*failed = s->tomb_parked_n || s->tomb_dropped;
	} else if (s->tomb_retrying) {
		*again = true;
	} else if (s->tomb_parked && !tried) {
		struct wd_task *p = s->tomb_parked;
		s->tomb_parked = NULL;
		s->tomb_retrying += s->tomb_parked_n;
		s->tomb_parked_n = 0;
		while (p) {
			struct wd_task *n = p->next;
			wd_append_locked(s, p, WD_URGENT);
			p = n;
		}
		for (struct wd_task *t = syncs; t; t = t->next)
			t->parked_tried = true;
		*again = true;
	} else {
		*failed = s->tomb_parked_n || s->tomb_dropped;
	}
}

/* After a sync's ssd_sync_all: -EIO if tombstones were lost meanwhile --
 * another sync's fdatasync failed on a segment this one then found clean
 * (ssd_idx.c ssd_sync_all_prio).  wd_lock not held. */
static int wd_sync_lost(struct ssd *s)
{
	bool lost;
	pthread_mutex_lock(&s->wd_lock);
	lost = s->tomb_dropped;
	pthread_mutex_unlock(&s->wd_lock);
	return lost ? -EIO : 0;
}

/* The same for the writer's own flush t.  wd_lock not held. */
static void wd_tombs_unwritten(struct ssd *s, struct wd_task *t, bool *again, bool *failed)
{
	pthread_mutex_lock(&s->wd_lock);
	t->next = NULL; /* taken from its lane */
	wd_tombs_check_locked(s, t, again, failed);
	pthread_mutex_unlock(&s->wd_lock);
}

/*
 * Room for a batch.  At format 3 the writer takes a batchable write-down
 * from the queue's head only once the window has room for a full batch of
 * values its size (at most ssd_batch_values_max; half the window if that
 * is less), not as soon as it is under the window: a batch's completion
 * takes its values off one by one (wd_finish, which wakes the writer each
 * time), so a writer behind a backlog that went at the first byte of room
 * found room for one value, wrote it framed, and kept cutting the window
 * into such writes -- 6,810 of the 32,768 values of a 16 KiB bench run,
 * 85 % of its device requests, each costing this file system what a
 * 500 KiB batch does (bench/RESULTS.md 2026-12-05T12:32Z, f3write).  And
 * while a full batch's worth is in flight, it waits for the queue to hold
 * a full batch, or for what is in flight to fall below one (Nagle's rule):
 * a writer that outran the puts wrote each put alone as it came.  So the
 * writer waits only while the device has at least a full batch (or the
 * window less one) to write, wd_finish and wd_enqueue wake it, and a
 * tombstone or sync in the urgent lane is taken at once as before.  Other
 * write-downs (records: several parts, 256 KiB and more, format 2) go at
 * the first byte of room, as before.
 */
static uint64_t wd_batch_room(const struct ssd *s, const struct wd_task *t)
{
	uint64_t v = align_rec(t->value_len, s->rec_align);
	uint64_t lim = ssd_batch_values_max(s->cfg.seg_size);
	uint64_t n = v && lim / v < SSD_BATCH_MAX ? lim / v : SSD_BATCH_MAX;
	uint64_t room = (n ? n : 1) * v;
	return room < s->cfg.wd_window_bytes / 2 ? room : s->cfg.wd_window_bytes / 2;
}

/* The task the writer may take now, or NULL: the urgent lane's head, else
 * the queue's unless held (tests) or it is a write-down and the window is
 * full ("Deletes jump the queue"), DRAM is sending a burst of victims
 * (ssd_plug), or it has no room for a batch of it ("Room for a batch").
 * wd_lock held. */
static struct wd_task *wd_next_locked(struct ssd *s)
{
	struct wd_task *t = s->wd_uhead;
	if (t)
		return t;
	t = s->wd_head;
	if (!t || (s->wd_hold && !s->wd_stop))
		return NULL;
	if ((t->type == T_PUT || t->type == T_CARRY) &&
	    s->wd_placed_bytes >= s->cfg.wd_window_bytes)
		return NULL; /* wd_finish wakes the writer */
	if ((t->type == T_PUT || t->type == T_CARRY) && s->wd_plugs && !s->wd_stop)
		return NULL; /* ssd_plug wakes the writer */
	if (s->cfg.format == 3 && wd_batchable(t)) {
		uint64_t room = wd_batch_room(s, t), placed = s->wd_placed_bytes;
		uint64_t queued = s->wd_bytes - s->wd_placed_values;
		if (placed + room > s->cfg.wd_window_bytes)
			return NULL; /* the same */
		if (queued < room && placed >= room)
			return NULL; /* the same, or wd_enqueue */
	}
	return t;
}

/* Seal the open segment if a write there failed, once its writes land,
 * so its summary lists what a recovery walk would stop short of.  Writer
 * thread. */
static void wd_seal_broken(struct ssd *s)
{
	if (s->open_slot >= 0 && atomic_load(&s->segs[s->open_slot].broken)) {
		wd_wait_inflight(s);
		pthread_mutex_lock(&s->seg_lock);
		if (s->open_slot >= 0) {
			atomic_store(&s->segs[s->open_slot].broken, false);
			seg_seal_locked(s);
		}
		pthread_mutex_unlock(&s->seg_lock);
	}
}

/*
 * A flush waits for what reclamation queues too: a write-down it follows
 * may open a segment, and the carries and reinsertions (a DRAM copy of a
 * record read there, written again) that reclamation queues then -- at
 * the back, behind the flush -- would otherwise land after the flush
 * returned, their index entries still pending, racing whatever the caller
 * does next (`kvtier replay --flush-each` gave other batches and other
 * hits run to run, doc/policies.md "Twelfth pass").  If one is queued, t
 * goes behind the last: true.  Writing those may queue more; each round
 * is a segment's, and a flush goes behind at most WD_BEHIND_MAX times (a
 * server's flush behind a steady stream of writes, each reclaiming, still
 * ends).  Writer thread.
 */
#define WD_BEHIND_MAX 16 /* rounds: a flush under a steady stream of writes still ends */

static bool wd_behind_carries(struct ssd *s, struct wd_task *t)
{
	struct wd_task *last = NULL;
	if (t->behind >= WD_BEHIND_MAX)
		return false;
	pthread_mutex_lock(&s->wd_lock);
	for (struct wd_task *q = s->wd_head; q; q = q->next)
		if (q->type == T_CARRY || (q->type == T_PUT && q->reinsert))
			last = q;
	if (last) {
		t->next = last->next;
		last->next = t;
		if (s->wd_tail == last)
			s->wd_tail = t;
		t->behind++;
	}
	pthread_mutex_unlock(&s->wd_lock);
	return last != NULL;
}

static void *wd_main(void *arg)
{
	struct ssd *s = arg;
	unsigned marks_seen = 0;
	for (;;) {
		struct wd_task *t;
		uint64_t broken_seen;
		ssd_room_run(s);
		wd_dropped_run(s);
		pthread_mutex_lock(&s->wd_lock);
		while (!(t = wd_next_locked(s)) && !s->wd_dropped &&
		       !(s->wd_stop && !s->wd_head && !s->wd_uhead) &&
		       atomic_load(&s->bad_marks) == marks_seen) {
			if (s->room_head) {
				/* a parked put's deadline: ssd_room_run fails it */
				struct timespec ts = ssd_deadline_ts(s->room_head->deadline_ns);
				if (pthread_cond_timedwait(&s->wd_cond, &s->wd_lock, &ts) ==
				    ETIMEDOUT)
					break;
			} else {
				pthread_cond_wait(&s->wd_cond, &s->wd_lock);
			}
		}
		if (!t) {
			bool done = s->wd_stop && !s->wd_head && !s->wd_uhead && !s->wd_dropped;
			bool marked = atomic_load(&s->bad_marks) != marks_seen;
			marks_seen = atomic_load(&s->bad_marks);
			pthread_mutex_unlock(&s->wd_lock);
			if (done)
				break;
			/* An I/O error was reported: quarantine now, not at the
			 * next write (held, too: only faults).  Else a parked
			 * put's deadline passed. */
			if (marked)
				seg_quarantine_pending(s);
			continue;
		}
		marks_seen = atomic_load(&s->bad_marks);
		broken_seen = s->broken_marks; /* sealed below, if in the open segment */
		if (t == s->wd_uhead) {
			s->wd_uhead = t->next;
			if (!s->wd_uhead)
				s->wd_utail = NULL;
		} else {
			s->wd_head = t->next;
			if (!s->wd_head)
				s->wd_tail = NULL;
		}
		pthread_mutex_unlock(&s->wd_lock);

		/* Faults first: quarantine slots with I/O errors, and seal an open
		 * segment with a hole (a failed write) once its writes land, so
		 * its summary lists what a recovery walk would stop short of. */
		seg_quarantine_pending(s);
		wd_seal_broken(s);
		if (t->type == T_PUT && t->close && wd_close_late(s)) {
			AN(s->close_late, t->value_len);
			wd_finish(s, t, -ECANCELED); /* stays DRAM's */
			continue;
		}
		if (s->cfg.debug_delay_ns && t->type == T_PUT)
			wd_debug_delay(s);
		switch (t->type) {
		case T_PUT:
			if (s->cfg.format == 3 && wd_batchable(t))
				wd_batch_write(s, t);
			else
				wd_write(s, t);
			break;
		case T_DELETE:
		case T_CLEAR:
			wd_write(s, t);
			break;
		case T_CARRY:
			if (s->cfg.format == 3 && wd_batchable(t))
				wd_batch_write(s, t);
			else
				wd_carry_write(s, t);
			break;
		case T_DSYNC:
			/* Its tombstones are placed: the sync thread takes it
			 * from here, and the writer goes on. */
			pthread_mutex_lock(&s->wd_lock);
			s->broken_sealed = broken_seen;
			t->next = s->sync_new;
			s->sync_new = t;
			pthread_cond_signal(&s->sync_cond);
			pthread_mutex_unlock(&s->wd_lock);
			break;
		case T_FLUSH:
		case T_CKPT: {
			int r;
			bool again = false, failed = false;
			if (t->type == T_FLUSH && wd_behind_carries(s, t))
				break;
			wd_wait_inflight(s);
			/* a write that failed meanwhile left a hole before
			 * what this flush makes durable: sealed first */
			wd_seal_broken(s);
			if (t->type == T_FLUSH)
				wd_tombs_unwritten(s, t, &again, &failed);
			if (again) {
				wd_enqueue(s, t, WD_URGENT);
				break;
			}
			r = t->type == T_FLUSH ? ssd_sync_all(s) : ssd_ckpt_write(s);
			if (failed && r == 0)
				r = -EIO;
			if (t->type == T_FLUSH && r == 0)
				r = wd_sync_lost(s);
			wd_wake_waiter(t, r); /* the waiter owns t */
			break;
		}
		}
		if ((s->cfg.ckpt_seals && s->seals_since_ckpt >= s->cfg.ckpt_seals) ||
		    s->ckpt_due) {
			wd_wait_inflight(s);
			/* A failed one waits for the next periodic one. */
			s->ckpt_due = false;
			ssd_ckpt_write(s);
		}
	}
	return NULL;
}

/*
 * A delete's sync beside the writer (since 2026-12-05, delsync).  The
 * writer passes each T_DSYNC it takes -- its tombstones placed before it
 * -- to this thread (sync_new) and goes on placing write-downs.  Here a
 * boundary is set: the writes in flight then (sync_before), which include
 * every write placed before those tombstones and the tombstones
 * themselves; each write carries the epoch it was placed in, and those of
 * an epoch before the boundary's count it down as they complete
 * (wd_finish).  At 0: the failed tombstones are looked at
 * (wd_tombs_check_locked: behind a retry the syncs go back to the urgent
 * lane; a parked one fails them), then every segment a write completed in
 * since the last sync is fdatasynced (ssd_sync_all) and the deletes are
 * answered.  The syncs passed meanwhile wait together for the next
 * boundary and share its fdatasync (ssd.delete_sync_rounds).  A sync may
 * cover writes placed after its boundary: more durable, never less.
 * Before, the writer waited for its writes in flight and ran the
 * fdatasync itself, placing nothing meanwhile: a thread deleting ~2,000
 * times a second beside a backlog halved the write-down rate
 * (bench/RESULTS.md, tomb26 and delsync).
 */
static void *sync_main(void *arg)
{
	struct ssd *s = arg;
	pthread_mutex_lock(&s->wd_lock);
	for (;;) {
		struct wd_task *batch, *t;
		bool again = false, failed = false;
		int r;
		if (!s->sync_armed && s->sync_new) {
			s->sync_armed = s->sync_new;
			s->sync_new = NULL;
			s->sync_epoch++;
			s->sync_before = s->wd_inflight;
		}
		if (!s->sync_armed || s->sync_before > 0) {
			if (s->sync_stop && !s->sync_armed)
				break;
			pthread_cond_wait(&s->sync_cond, &s->wd_lock);
			continue;
		}
		batch = s->sync_armed;
		s->sync_armed = NULL;
		wd_tombs_check_locked(s, batch, &again, &failed);
		/* A write placed before the boundary failed: a hole before
		 * the tombstones, where a recovery walk of the open segment
		 * stops.  The syncs go back to the writer, which seals it
		 * (wd_seal_broken, its summary listing them) before it passes
		 * them on again.  Before, the delete was answered first, and
		 * a kill -9 then brought the block back (test_ssd
		 * delete_hole_kill9). */
		if (!again && !failed && !s->wd_stop && s->broken_sealed != s->broken_marks)
			again = true;
		if (again) {
			for (; batch; batch = t) {
				t = batch->next;
				wd_append_locked(s, batch, WD_URGENT);
			}
			pthread_cond_broadcast(&s->wd_cond);
			continue;
		}
		pthread_mutex_unlock(&s->wd_lock);
		A(s->delete_sync_rounds);
		r = ssd_sync_all_prio(s, IO_PRIO_PREFETCH);
		if (failed && r == 0)
			r = -EIO;
		if (r == 0)
			r = wd_sync_lost(s);
		for (; batch; batch = t) {
			t = batch->next;
			wd_wake_waiter(batch, r); /* the waiter owns batch */
		}
		pthread_mutex_lock(&s->wd_lock);
	}
	pthread_mutex_unlock(&s->wd_lock);
	return NULL;
}

/* Queue a flush or checkpoint marker in lane and wait for the writer to
 * reach it. */
static int wd_barrier(struct ssd *s, int type, int lane)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int done = 0, status;
	struct wd_task t;

	memset(&t, 0, sizeof(t));
	t.type = type;
	t.s = s;
	t.wait_lock = &lock;
	t.wait_cond = &cond;
	t.wait_done = &done;
	wd_enqueue(s, &t, lane);
	pthread_mutex_lock(&lock);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	status = t.wait_status;
	pthread_mutex_unlock(&lock);
	pthread_mutex_destroy(&lock);
	pthread_cond_destroy(&cond);
	return status;
}

int ssd_flush(struct ssd *s)
{
	return wd_barrier(s, T_FLUSH, WD_BACK);
}

int ssd_sync_deletes(struct ssd *s)
{
	A(s->delete_syncs);
	return wd_barrier(s, T_DSYNC, WD_URGENT);
}

int ssd_checkpoint(struct ssd *s)
{
	return wd_barrier(s, T_CKPT, WD_BACK);
}

/* ------------------------------------------------------------------------
 * Lookups, deletes, clears
 */

/* Like ssd_find, giving the generation of the segment holding the copy. */
static int ssd_find_gen(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t *gen)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	int ret = KVT_MISS;
	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, ns, key);
	if (e && !(e->flags & E_PENDING)) {
		*gen = e->generation;
		ret = KVT_OK;
	}
	pthread_mutex_unlock(&sh->lock);
	return ret;
}

int ssd_find(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t *value_len)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	int ret = KVT_MISS;
	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, ns, key);
	if (e && !(e->flags & E_PENDING)) {
		if (value_len)
			*value_len = e->value_len;
		ret = KVT_OK;
	}
	pthread_mutex_unlock(&sh->lock);
	return ret;
}

/*
 * Deletes and clears log a record, allocated first by ssd_log_prepare so
 * that the caller can fail whole (-ENOMEM) before changing any tier; the
 * DRAM tier must be changed before the SSD index (see wd_write), so the
 * caller prepares, deletes in DRAM, then calls ssd_delete / ssd_clear,
 * which consume the prepared record.
 */
void *ssd_log_prepare(struct ssd *s, bool clear, uint32_t ns, const struct kvt_key *key)
{
	struct wd_task *t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	if (!t)
		return NULL;
	t->type = clear ? T_CLEAR : T_DELETE;
	t->s = s;
	t->ns = ns;
	if (key)
		t->key = *key;
	return t;
}

/* A dead entry's (E_DEAD: a miss whose record may still be on disk)
 * delete logs its tombstone and answers deleted, though a GET missed: the
 * store makes a delete durable only when it answers deleted (kvt_delete,
 * store_deletes_durable), so an answer of not found would return before
 * the tombstone is on disk (tried 2026-12-05: void_fail_kill9 brought the
 * block back in 5 runs of 30).  A not-found answer needs a way to say
 * "logged" to the store first. */
int ssd_delete(struct ssd *s, void *prepared, uint32_t ns, const struct kvt_key *key)
{
	struct wd_task *t = prepared;
	if (!ssd_idx_remove_key(s, ns, key, UINT64_MAX)) {
		kvt_mem_free(s->mem, t, sizeof(*t));
		return KVT_MISS;
	}
	wd_enqueue(s, t, WD_URGENT);
	return KVT_OK;
}

/*
 * A put of a key whose entry here is dead (E_DEAD: a miss whose record is
 * still on disk -- promoted out of the SSD, a read that failed its checks,
 * a quarantined slot's, a write-down that failed but may have landed).
 * The put went ahead (a dead entry is no present block: put-if-absent
 * takes it for absent), and its bytes are in DRAM alone; the old record
 * is read again by the next open -- from the checkpoint, which writes a
 * dead entry as a block (ssd_recover.c), or by a walk -- and was served
 * over the put whenever the new bytes had not gone down by then (a close
 * that writes DRAM down in part, a declined write-down, a crash):
 * another put's bytes, until 2026-12-06 (test_ssd_fsck dead_reput).  So
 * the entry goes and a tombstone is logged for it, as a delete of the key
 * would log.  A live entry makes the put a no-op (KVT_EXISTS; its record
 * marked read, ssd.put_touch).  A
 * pending one is taken as a dead one is: DRAM did not hold the key when
 * the store asked it, so it is a carry (the block unpublished while it
 * moves: a get misses it) or a write-down whose DRAM block is gone (a
 * delete's, or another put's that entered and left DRAM since).  The
 * carry is then dropped (wd_carry_move), or its write, if placed, never
 * published (wd_finish) -- the tombstone, placed after it, covers it at
 * the next open.  From 57ab8693 until review43e a pending entry made the
 * put a no-op: a get missed the key while a put of it was refused, for as
 * long as the carry waited behind the write-down queue, and a carry that
 * then failed left the key in no tier (test_ssd carry_put).  Asked by
 * DRAM under the key's shard lock once DRAM holds no copy, the put's item
 * entering DRAM's index before that lock goes (store_below_absent): a
 * write-down publishes its entry before DRAM drops the block, so a block
 * moving down is found in one of the two, and no put of the key enters
 * DRAM in between (test_ssd_fsck put_reput_race).
 * Until 2026-12-07 the store's only SSD lookup came before DRAM's and
 * took a pending entry for absent: a victim's write-down that finished
 * between the two let the put in over a live copy of other bytes, no
 * tombstone logged, its own write-down later skipped as already down
 * (wd_already_down), and once DRAM evicted the put the old bytes were
 * served (test_ssd_fsck wd_reput_race).  Called before the new bytes
 * enter DRAM, so that the tombstone (urgent) is queued before their
 * write-down and takes a lower seq: it never removes them at the next
 * open.  A put that then fails has cost a tombstone for a block that was
 * a miss already.  Not called for a put of a key DRAM holds, which DRAM
 * refuses (a promoted block's dead entry, its block in DRAM, cost a
 * tombstone per put of it until 2026-12-06).  Out of memory, nothing
 * changes (as before).
 */
int ssd_put_over(struct ssd *s, uint32_t ns, const struct kvt_key *key, bool wait)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e, **pp;
	struct wd_task *t;
	bool taken, pending, live, dead;

	/* !wait: DRAM's shard lock is held (tier.h put_over), and a sweep
	 * holds this shard for a chunk of its walk (ssd_idx.c "Chunked
	 * walks"; its whole walk until session 47). */
	if (!wait) {
		if (pthread_mutex_trylock(&sh->lock) != 0)
			return -EAGAIN;
	} else {
		pthread_mutex_lock(&sh->lock);
	}
	e = *ssd_idx_slot(sh, h, ns, key);
	pending = e && (e->flags & E_PENDING); /* a dead entry is pending too */
	dead = e && (e->flags & E_DEAD);
	live = e && !pending;
	/* ssd.put_touch: a put of a block the SSD holds is a sighting of it
	 * (an engine saves the blocks of a prompt past the prefix it could
	 * load, those the SSD held among them): its record is marked read, so
	 * that reclamation gives it its second chance, as LRU would move it
	 * to the front (doc/policies.md "Fourteenth pass": up on
	 * conversations, down on agents in the model, so opt-in).  Not
	 * E_READ2: no promotion, no hot mark. */
	if (live && s->cfg.put_touch)
		e->flags |= E_READ;
	pthread_mutex_unlock(&sh->lock);
	if (live)
		return KVT_EXISTS;
	if (!pending)
		return KVT_OK; /* the common case: one lookup */
	t = ssd_log_prepare(s, false, ns, key);
	if (!t) /* out of memory: a dead entry stays (as before), a write waits */
		return dead ? KVT_OK : KVT_EXISTS;
	/* The entry goes and the tombstone is queued under wd_lock as one
	 * step.  Apart, a put of the key racing this one found the entry
	 * gone, went ahead, and its write-down -- queued under wd_lock, seqs
	 * taken in queue order, urgent first -- could be placed before this
	 * tombstone was queued: the tombstone's seq above the new record's,
	 * the next open deleted the put that went through.  Now a put that
	 * finds no pending entry queues its write-down behind the tombstone.
	 * A pending entry published meanwhile (its write ended) is live: the
	 * put is a no-op.  (wd_lock, then the shard's lock: no path holds a
	 * shard's lock while it takes wd_lock.) */
	if (!wait) {
		if (pthread_mutex_trylock(&s->wd_lock) != 0) {
			kvt_mem_free(s->mem, t, sizeof(*t));
			return -EAGAIN;
		}
		if (pthread_mutex_trylock(&sh->lock) != 0) {
			pthread_mutex_unlock(&s->wd_lock);
			kvt_mem_free(s->mem, t, sizeof(*t));
			return -EAGAIN;
		}
	} else {
		pthread_mutex_lock(&s->wd_lock);
		pthread_mutex_lock(&sh->lock);
	}
	pp = ssd_idx_slot(sh, h, ns, key);
	taken = *pp && ((*pp)->flags & E_PENDING);
	live = *pp && !taken;
	if (taken)
		ssd_idx_remove_locked(s, sh, pp);
	pthread_mutex_unlock(&sh->lock);
	if (taken) {
		wd_append_locked(s, t, WD_URGENT);
		pthread_cond_broadcast(&s->wd_cond);
	}
	pthread_mutex_unlock(&s->wd_lock);
	if (!taken)
		kvt_mem_free(s->mem, t, sizeof(*t));
	return live ? KVT_EXISTS : KVT_OK;
}

/* Does the index hold no block (published or being written)? */
static bool ssd_idx_empty(struct ssd *s)
{
	bool empty = true;
	for (int i = 0; i < SSD_SHARDS && empty; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		empty = s->shards[i].count == s->shards[i].dead;
		pthread_mutex_unlock(&s->shards[i].lock);
	}
	return empty;
}

int64_t ssd_clear(struct ssd *s, void *prepared, uint32_t ns)
{
	uint64_t n = ssd_idx_sweep(s, ns, UINT32_MAX, 0, UINT64_MAX);
	/* A clear that empties the index empties the log: whatever a
	 * write-down now pushes out is dead, so log_full (DRAM's write-down
	 * filter) goes false now, not at the next segment's open. */
	if (ssd_idx_empty(s)) {
		pthread_mutex_lock(&s->seg_lock);
		atomic_store(&s->log_full, false);
		pthread_mutex_unlock(&s->seg_lock);
	}
	wd_enqueue(s, prepared, WD_URGENT);
	return (int64_t)n;
}

/* ------------------------------------------------------------------------
 * Promotion
 */

/*
 * Single flight.  A promotion reserves the block in DRAM before its read
 * ends; a second get of the block meanwhile would find it reserved (not
 * yet visible: KVT_EXISTS) and the store could only answer a miss for a
 * block that is on SSD and on its way.  So each promotion is in s->pf[]
 * from before its reservation until after its publish or abort, and a get
 * of a block whose promotion is in flight joins it instead: its callback
 * runs when that promotion ends, with the same status and a ref of its own.
 */

/* Join the promotion of p's block if one is in flight (w is then queued
 * on it: true), else enter p as the one in flight (false). */
static bool pf_join_or_enter(struct ssd *s, struct promote_task *p, struct promote_waiter *w)
{
	struct promote_task **b = &s->pf[p->h % SSD_PF_BUCKETS], *q;
	pthread_mutex_lock(&s->pf_lock);
	for (q = *b; q; q = q->pf_next)
		if (q->h == p->h && q->ns == p->ns && q->key.len == p->key.len &&
		    memcmp(q->key.bytes, p->key.bytes, p->key.len) == 0)
			break;
	if (q) {
		w->next = q->waiters;
		q->waiters = w;
	} else {
		p->pf_next = *b;
		*b = p;
		p->in_flight = true;
	}
	pthread_mutex_unlock(&s->pf_lock);
	return q != NULL;
}

/* A promotion ended (published: KVT_OK and item, with the caller's ref;
 * else a status and NULL): leave s->pf[], answer the gets that joined it,
 * then, if cb, the one that started it (which owns the item's ref). */
static void pf_end(struct ssd *s, struct promote_task *p, int status, struct dram_item *item,
		   bool cb)
{
	struct promote_waiter *w = NULL, *n;
	if (p->in_flight) {
		struct promote_task **pp = &s->pf[p->h % SSD_PF_BUCKETS];
		pthread_mutex_lock(&s->pf_lock);
		while (*pp != p)
			pp = &(*pp)->pf_next;
		*pp = p->pf_next;
		w = p->waiters;
		p->waiters = NULL;
		p->in_flight = false;
		pthread_mutex_unlock(&s->pf_lock);
	}
	for (; w; w = n) {
		/* a ref of theirs (they dram_unpin it); none left: a miss */
		int st = status == KVT_OK && !dram_item_ref(s->dram, item) ? KVT_MISS : status;
		n = w->next;
		w->cb(w->ctx, st, st == KVT_OK ? item : NULL);
		kvt_mem_free(s->mem, w, sizeof(*w));
	}
	if (cb)
		p->cb(p->ctx, status, item);
}

static void promote_free(struct ssd *s, struct promote_task *p)
{
	if (p->hdr && !p->copy_cb) /* a copy's header is in its buffer */
		kvt_mem_free(s->mem, p->hdr, p->hdr_len);
	kvt_mem_free(s->mem, p, sizeof(*p));
}

/*
 * A read of the record of (ns, key, seq) has completed: is its entry still
 * that record, published (the same seq, not PENDING)?  Nothing but a
 * promotion's read pins a record (E_PINNED, promote_settle; part reads
 * and copies do not); what keeps its bytes is the order the writer
 * keeps: a record leaves the index, or turns PENDING (a carry, its seq
 * unchanged), under its shard lock before any write over it is submitted
 * (evict_entry_cb from seg_reclaim_upto_locked and seg_evict_oldest_locked).
 * So "yes" after the read means no write over the record had started
 * when the read ended: the bytes read are the record's.  "No" is a miss
 * and no sign of corruption: the header and CRC checks come after it, and
 * count only what fails them then.  The CRC32C alone would not do: it is
 * linear, and a value built to collide with another's part passes it.
 */
static bool ssd_entry_same(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t seq);

/* ssd_entry_same, and still in the place p read (its slot and generation):
 * a record carried and published elsewhere keeps nothing of its old place,
 * which may have been written over since (promote_settle).  Unpins the
 * entry if p pinned it (a copy, ssd_read_copy, never does). */
static bool ssd_entry_at(struct ssd *s, struct promote_task *p)
{
	uint64_t h = ssd_hash(s, p->ns, &p->key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	bool same;

	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, p->ns, &p->key);
	same = e && e->seq == p->seq && !(e->flags & E_PENDING) && e->slot == p->slot &&
	       e->generation == p->generation;
	if (p->pinned) {
		if (e && (e->flags & E_PINNED)) /* its own: one promotion a block */
			e->flags &= (uint8_t)~E_PINNED;
		/* Woken also when the pinned entry went meanwhile (a delete, a
		 * newer put: freed with its pin, and nobody woke the writer):
		 * reclamation may be waiting on it, and only this wakes it
		 * (review46h: a delete during the read left the writer asleep,
		 * seg_lock held, until another promotion's read ended). */
		pthread_cond_broadcast(&s->pin_cond);
	}
	p->pinned = false;
	pthread_mutex_unlock(&sh->lock);
	return same;
}

static bool ssd_entry_same(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t seq)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	bool same;

	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, ns, key);
	same = e && e->seq == seq && !(e->flags & E_PENDING);
	pthread_mutex_unlock(&sh->lock);
	return same;
}

/*
 * A read of the record of seq failed its checks (a bad header, a CRC
 * mismatch): the block is a miss from now on, but its entry is kept dead
 * (ssd_idx_kill_key), not removed -- the corruption may be the read's
 * alone (a transient bad read, a bit flipped in memory), the record on
 * disk intact, and a recovery walk would find it: a delete must still
 * find the entry to log its tombstone.  Until 2026-12-05 the entry was
 * removed, the delete answered not found and logged nothing, and after a
 * kill -9 the block was back (test_ssd read_corrupt_kill9).  An entry
 * made pending meanwhile (a carry, a quarantine) is its owner's.
 */
static void read_bad(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t seq)
{
	(void)ssd_idx_kill_key(s, ns, key, seq);
}

/* Whether crc, a read's CRC32C of one part of a value (chained over the
 * pieces it came in), is the one promised: want is the part's CRC from
 * its record's header, or for a batched value (format 3: one part, the
 * whole value; no header) its entry's value_crc, which binds the value's
 * identity too (ssd_value_crc).  Promotions and part reads alike. */
static bool read_crc_ok(uint32_t crc, uint32_t want, bool batched, uint32_t ns,
			const struct kvt_key *key, uint64_t seq)
{
	return (batched ? ssd_value_crc(crc, ns, key, seq) : crc) == want;
}

static void promote_done(struct multi_io *m, int64_t res)
{
	struct promote_task *p = m->ctx;
	struct ssd *s = p->s;
	struct ssd_rec_hdr rh;
	struct ssd_part parts_small[16], *parts = parts_small;
	uint64_t lens_small[16], *lens = lens_small;
	uint32_t crcs_small[16], *crcs = crcs_small;
	const struct ns_entry *nse = ns_reg_get(s->reg, p->ns);
	struct iovec view[DRAM_MAX_RUNS];
	uint64_t len, off = 0;
	unsigned vc;
	int status = KVT_MISS, rc;

	if (res < 0 || (uint64_t)res != p->rec_len) {
		(void)ssd_entry_at(s, p); /* unpins */
		A(s->io_errors);
		if (res == -EIO)
			ssd_seg_mark_bad(s, p->slot, -EIO);
		goto fail;
	}
	/* Reclaimed (its segment reused, a carry), deleted or dropped since
	 * the lookup: the bytes may be another record's. */
	if (!ssd_entry_at(s, p))
		goto fail;
	if (p->part_count > KVT_ARRAY_LEN(parts_small)) {
		parts = kvt_mem_alloc(s->mem, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							      sizeof(*crcs)));
		if (!parts)
			goto fail;
		lens = (uint64_t *)(parts + p->part_count);
		crcs = (uint32_t *)(lens + p->part_count);
	}
	if (p->batched) {
		/* Format 3: no header; the value's CRC continued over its
		 * identity (ssd_value_crc), so another block's bytes, a torn
		 * batch's or a reused slot's, fail like damaged ones. */
		memset(&rh, 0, sizeof(rh));
		rh.part_count = 1;
		rh.flags = p->sealed ? SSD_REC_F_SEALED : 0;
		parts[0].len = p->value_len;
		parts[0].crc = 0;
		rc = nse ? 0 : KVT_ECORRUPT;
	} else {
		rc = ssd_rec_hdr_decode(p->hdr, p->hdr_len, p->rec_align, &rh, parts,
					p->part_count);
	}
	if (p->batched && rc == 0) {
		/* checked by value_crc below */
	} else if (rc < 0 || rh.type != SSD_REC_PUT || rh.seq != p->seq ||
		   rh.generation != p->generation || rh.value_len != p->value_len ||
		   rh.part_count != p->part_count || rh.key.len != p->key.len ||
		   memcmp(rh.key.bytes, p->key.bytes, p->key.len) != 0 || !nse ||
		   memcmp(rh.ns_digest, nse->digest, 32) != 0) {
		/* Not the record the index still names: torn, or corrupt --
		 * on disk or in this read only: read_bad. */
		A(s->hdr_errors);
		read_bad(s, p->ns, &p->key, p->seq);
		goto fail_parts;
	}
	if (p->copy) {
		view[0].iov_base = (void *)p->copy->value;
		view[0].iov_len = p->value_len;
		vc = 1;
	} else {
		vc = dram_item_view(s->dram, p->item, view, &len);
	}
	for (uint32_t i = 0; i < rh.part_count; i++) {
		uint32_t crc = 0;
		uint64_t want = parts[i].len, o = off;
		for (unsigned v = 0; v < vc && want > 0; v++) {
			uint64_t n;
			if (o >= view[v].iov_len) {
				o -= view[v].iov_len;
				continue;
			}
			n = view[v].iov_len - o < want ? view[v].iov_len - o : want;
			crc = kvt_crc32c(crc, (char *)view[v].iov_base + o, n);
			want -= n;
			o = 0;
		}
		if (!read_crc_ok(crc, p->batched ? p->value_crc : parts[i].crc, p->batched, p->ns,
				 &p->key, p->seq)) {
			A(s->crc_errors);
			read_bad(s, p->ns, &p->key, p->seq);
			kvt_logf(s->log, KVT_LOG_WARN,
				 "ssd: CRC mismatch in segment %u part %u: block dropped (a miss)",
				 p->slot, i);
			goto fail_parts;
		}
		lens[i] = parts[i].len;
		crcs[i] = crc;
		off += parts[i].len;
	}
	if (p->copy) {
		/* A private copy: verified, handed over, nothing published. */
		struct ssd_copy *c = p->copy;
		memcpy(c->lens, lens, p->part_count * sizeof(*lens));
		memcpy(c->crcs, crcs, p->part_count * sizeof(*crcs));
		c->value_flags = (rh.flags & SSD_REC_F_SEALED) ? KVT_F_SEALED : 0;
		A(s->reads);
		A(s->copy_reads);
		AN(s->read_bytes, p->value_len);
		if (parts != parts_small)
			kvt_mem_free(s->mem, parts,
				     p->part_count *
					     (sizeof(*parts) + sizeof(*lens) + sizeof(*crcs)));
		p->copy = NULL;
		p->copy_cb(p->ctx, KVT_OK, c);
		promote_free(s, p);
		return;
	}
	/* As the victim tier (doc/policies.md), with ssd.first_hit=cold: a
	 * record's first read leaves the block here -- DRAM's copy is the
	 * next victim and is not written again; a second read promotes it
	 * and drops the copy here (exclusive: one copy of the bytes, written
	 * again at the log's head when DRAM evicts it), except for a
	 * persistent namespace.  A prefetch (the engine will read the block
	 * soon) promotes as before.  With first_hit=promote, a promoted block is
	 * written down again when DRAM evicts it if its copy here is old by
	 * then (wd_write); otherwise DRAM knows a copy is here.
	 *
	 * The copy here is dropped (its entry kept dead: a delete still logs
	 * its tombstone) before DRAM's is published: published first, DRAM
	 * could evict the block at once, and the write-down, finding the
	 * entry here still live, skipped it ("already on SSD") -- the block
	 * gone from both tiers once the entry died (review28b).  A get of the
	 * key in between misses once; a publish that fails (a delete or a
	 * clear took the reservation) had lost the block anyway. */
	if (p->demand && !p->first && s->cfg.admission == SSD_ADMIT_VICTIM &&
	    s->cfg.first_hit_cold && !ns_persistent(s, p->ns) &&
	    ssd_idx_kill_key(s, p->ns, &p->key, p->seq))
		A(s->dropped_promoted);
	if (dram_publish(s->dram, p->item, crcs, lens,
			 (s->cfg.admission != SSD_ADMIT_VICTIM ? DRAM_ON_LOWER
			  : p->demand && p->first && s->cfg.first_hit_cold
				  ? DRAM_ON_LOWER | DRAM_COLD
				  : 0) |
				 DRAM_PROMOTED | ((rh.flags & SSD_REC_F_SEALED) ? DRAM_SEALED : 0),
			 true) == KVT_OK) {
		uint64_t dt = kvt_now_ns() - p->start_ns;
		status = KVT_OK;
		A(s->reads);
		AN(s->read_bytes, p->value_len);
		if (dt > 0) {
			double bps = (double)p->rec_len * 1e9 / (double)dt;
			pthread_mutex_lock(&s->wd_lock);
			s->read_bps = s->read_measured ? 0.9 * s->read_bps + 0.1 * bps : bps;
			s->read_measured = true;
			pthread_mutex_unlock(&s->wd_lock);
		}
	}
	p->item = status == KVT_OK ? p->item : NULL;
	if (parts != parts_small)
		kvt_mem_free(s->mem, parts, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							    sizeof(*crcs)));
	pf_end(s, p, status, p->item, true);
	promote_free(s, p);
	return;

fail_parts:
	if (parts != parts_small)
		kvt_mem_free(s->mem, parts, p->part_count * (sizeof(*parts) + sizeof(*lens) +
							    sizeof(*crcs)));
fail:
	A(s->read_misses);
	if (p->copy) {
		ssd_copy_free(s->mem, p->copy);
		p->copy = NULL;
		p->copy_cb(p->ctx, KVT_MISS, NULL);
	} else {
		dram_abort(s->dram, p->item);
		pf_end(s, p, KVT_MISS, NULL, true);
	}
	promote_free(s, p);
}

/* A read's task from its index entry e (sh->lock held): the record's
 * place and, from its length, its layout (512 or 4096, its segment's).
 * Returns the record's offset in its segment; p->rec_align is 0 if the
 * length fits neither layout (a miss). */
static uint64_t promote_from_entry(struct promote_task *p, struct ssd *s, uint32_t ns,
				   const struct kvt_key *key, const struct ssd_entry *e)
{
	p->s = s;
	p->ns = ns;
	p->key = *key;
	p->seq = e->seq;
	p->generation = e->generation;
	p->value_len = e->value_len;
	p->slot = e->slot;
	p->part_count = e->part_count;
	p->rec_len = (uint64_t)e->len_512 * SSD_REC_ALIGN;
	if (e->flags & E_BATCHED) {
		/* Format 3: the value alone, padded to its segment's alignment
		 * (at most 4095 bytes past it, within DRAM's zeroed tail). */
		p->batched = true;
		p->sealed = e->flags & E_SEALED_VALUE;
		p->value_crc = e->value_crc;
		p->hdr_len = 0;
		p->rec_align = p->part_count == 1 && p->value_len > 0 &&
					       p->rec_len >= p->value_len &&
					       p->rec_len - p->value_len < SSD_REC_ALIGN_4K
				       ? SSD_REC_ALIGN
				       : 0;
		return (uint64_t)e->off_512 * SSD_REC_ALIGN;
	}
	p->rec_align = ssd_rec_align_of(p->part_count, p->value_len, p->rec_len);
	p->hdr_len = ssd_rec_hdr_len(p->part_count, p->rec_align);
	return (uint64_t)e->off_512 * SSD_REC_ALIGN;
}

/*
 * After a promotion's DRAM reservation, before its read: is the record the
 * lookup found still there, and where?  Pin it there for the read.
 *
 * The reservation may evict blocks and wait for their write-downs, and the
 * writer, placing them, may reclaim the segment holding this very record.
 * The record, read at the lookup (E_READ), is then carried: pending (E_CARRY,
 * its seq) until its copy at the log's head lands, published there under
 * a new seq.  Until 2026-12-07 the promotion read the old place regardless
 * and missed if the carry was in flight at its check: a hit lost, and
 * `kvtier replay --flush-each` gave 44.24 % instead of 44.28 % one run in
 * a few, as the writer was quicker or not (doc/ssd.md "Session 46: a
 * promotion's own victims").  Now it waits for the carry (wd_finish
 * broadcasts wd_cond) and reads the record where it landed.  And the
 * writer, placing the victims still queued, may reclaim it during the
 * read: the entry is pinned (E_PINNED, under its shard lock with this
 * check) until the read is checked (ssd_entry_at), and reclamation waits
 * for that (evict_entry_cb) -- the read needs nothing of the writer's, and
 * nothing waits on this get while it waits for a carry (no lock held).
 * False: a miss (gone, replaced, dead, a carry not landed within
 * PROMOTE_CARRY_WAIT_NS, or a layout other than the reservation's).
 * sh->lock and wd_lock not held.
 */
#define PROMOTE_CARRY_WAIT_NS (10 * UINT64_C(1000000000))

static bool promote_settle(struct ssd *s, struct promote_task *p, struct ssd_shard *sh,
			   uint64_t *off)
{
	struct timespec dl = kvt_deadline(CLOCK_MONOTONIC, PROMOTE_CARRY_WAIT_NS);
	bool ok = false, carried = false;

	pthread_mutex_lock(&s->wd_lock); /* wd_lock -> SSD shard lock */
	for (;;) {
		struct ssd_entry *e;
		bool wait;
		pthread_mutex_lock(&sh->lock);
		e = *ssd_idx_slot(sh, p->h, p->ns, &p->key);
		/* Carried: pending under its seq (E_CARRY), then under the
		 * carry's (placed, not landed: wd_finish).  Only a carry is
		 * waited for, not a newer put's write-down (a miss, as before).
		 * A record as new or newer already published will do (the
		 * carry's landed, or a newer put's): the read checks it is
		 * the one the index names. */
		wait = e && (e->flags & (E_PENDING | E_DEAD)) == E_PENDING &&
		       (e->seq == p->seq ? (e->flags & E_CARRY) != 0 : carried && e->seq > p->seq);
		carried |= wait;
		/* Its own record, or the one it was carried to (framed or
		 * batched: the caller sizes the header): the same value length
		 * and parts as the reservation, or a miss. */
		if (e && e->seq >= p->seq && !(e->flags & E_PENDING) &&
		    e->value_len == p->value_len && e->part_count == p->part_count) {
			if (e->seq != p->seq || e->slot != p->slot ||
			    e->generation != p->generation) {
				p->batched = p->sealed = false; /* as a new task */
				p->value_crc = 0;
				*off = promote_from_entry(p, s, p->ns, &p->key, e);
				A(s->promote_relocated);
			}
			e->flags |= E_PINNED;
			p->pinned = ok = true;
		}
		pthread_mutex_unlock(&sh->lock);
		if (!wait || pthread_cond_timedwait(&s->wd_cond, &s->wd_lock, &dl) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&s->wd_lock);
	return ok;
}

int ssd_promote(struct ssd *s, uint32_t ns, const struct kvt_key *key, int prio,
		tier_got_fn cb, void *ctx)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	struct promote_task *p;
	struct promote_waiter *w;
	uint64_t off;
	unsigned vc = 0;
	int ret;

	p = kvt_mem_calloc(s->mem, 1, sizeof(*p));
	w = kvt_mem_alloc(s->mem, sizeof(*w));
	if (!p || !w) {
		kvt_mem_free(s->mem, p, sizeof(*p));
		kvt_mem_free(s->mem, w, sizeof(*w));
		return -ENOMEM;
	}
	w->cb = cb;
	w->ctx = ctx;
	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, ns, key);
	if (!e || (e->flags & E_PENDING)) {
		pthread_mutex_unlock(&sh->lock);
		kvt_mem_free(s->mem, p, sizeof(*p));
		kvt_mem_free(s->mem, w, sizeof(*w));
		return KVT_MISS;
	}
	/* ssd.young_reads_pct: a record read again while young (in the newest
	 * young_pct % of the log's segments) is served as a first read -- a
	 * cold DRAM copy, the record stays: promoting it would leave its
	 * bytes dead for most of a lap and write them again at the head when
	 * DRAM evicts the block (doc/policies.md, "A probation share of the
	 * SSD: no; young records read again"). */
	p->first = !(e->flags & E_READ) ||
		   (s->cfg.young_pct &&
		    (__atomic_load_n(&s->next_gen, __ATOMIC_RELAXED) - e->generation) * 100 <=
			    (uint64_t)ssd_room_slots(s) * s->cfg.young_pct);
	p->demand = prio == IO_PRIO_DEMAND;
	if (e->flags & E_READ)
		e->flags |= E_READ2;
	e->flags |= E_READ;
	p->h = h;
	off = promote_from_entry(p, s, ns, key, e);
	pthread_mutex_unlock(&sh->lock);
	if (p->rec_align == 0) {
		promote_free(s, p);
		kvt_mem_free(s->mem, w, sizeof(*w));
		return KVT_MISS;
	}
	/* Its promotion in flight (another get's, a prefetch's): wait for it. */
	if (pf_join_or_enter(s, p, w)) {
		promote_free(s, p);
		return 0;
	}
	kvt_mem_free(s->mem, w, sizeof(*w));
	p->hdr = p->batched ? NULL : kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, p->hdr_len);
	if (!p->batched && !p->hdr) {
		pf_end(s, p, -ENOMEM, NULL, false);
		promote_free(s, p);
		return -ENOMEM;
	}
	/* Part lengths are known only once the header is read: reserve with the
	 * right part count; publish sets the real lengths. */
	{
		uint64_t *lens = NULL;
		if (p->part_count > 1) {
			lens = kvt_mem_calloc(s->mem, p->part_count, sizeof(*lens));
			if (!lens) {
				pf_end(s, p, -ENOMEM, NULL, false);
				promote_free(s, p);
				return -ENOMEM;
			}
			lens[p->part_count - 1] = p->value_len;
		}
		ret = dram_reserve(s->dram, ns, key, p->value_len, lens, p->part_count, &p->item,
				   p->iov + 1, &vc);
		if (lens)
			kvt_mem_free(s->mem, lens, p->part_count * sizeof(*lens));
	}
	if (ret == KVT_EFULL)
		A(s->promote_full);
	if (ret != KVT_OK) {
		pf_end(s, p, ret, NULL, false);
		promote_free(s, p);
		return ret;
	}
	/* A delete may have run between the index lookup and the reservation
	 * (finding nothing in DRAM yet): if the entry is gone, so is the block.
	 * A delete after this point kills the reserved DRAM item instead (the
	 * store deletes from DRAM again after the SSD index), and publish fails. */
	{
		uint8_t *hdr = p->hdr;
		uint32_t hdr_len = p->hdr_len;
		bool settled = promote_settle(s, p, sh, &off);
		if (settled && (p->hdr_len != hdr_len || p->batched != !hdr)) {
			/* Carried to another layout: its header's buffer. */
			if (hdr)
				kvt_mem_free(s->mem, hdr, hdr_len);
			p->hdr = p->batched ? NULL
					    : kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, p->hdr_len);
		}
		if (settled && ((!p->batched && !p->hdr) || p->rec_align == 0)) {
			(void)ssd_entry_at(s, p); /* unpins */
			settled = false;
		}
		if (!settled) {
			dram_abort(s->dram, p->item);
			pf_end(s, p, KVT_MISS, NULL, false);
			promote_free(s, p);
			return KVT_MISS;
		}
	}
	p->iov[0].iov_base = p->hdr;
	p->iov[0].iov_len = p->hdr_len;
	if (p->batched)
		/* The value's padding, into DRAM's zeroed tail of its last run. */
		p->iov[vc].iov_len += p->rec_len - p->value_len;
	else
		p->iov[vc].iov_len = align_rec(p->iov[vc].iov_len, p->rec_align);
	p->cb = cb;
	p->ctx = ctx;
	p->start_ns = kvt_now_ns();
	/* The fd of a slot an entry names is set once, before the entry
	 * exists: no lock (demand reads must not wait behind sealing).  A
	 * batched value has no header: its I/O starts at the value. */
	multi_submit(s, &p->io, IO_READ, prio,
		     __atomic_load_n(&s->segs[p->slot].fd, __ATOMIC_RELAXED), off,
		     p->iov + p->batched, vc + !p->batched, promote_done, p);
	return 0;
}

void ssd_copy_free(struct kvt_mem *mem, struct ssd_copy *c)
{
	if (!c)
		return;
	kvt_mem_free(mem, c->buf, c->buf_len);
	kvt_mem_free(mem, c->lens, c->part_count * (sizeof(*c->lens) + sizeof(*c->crcs)));
	kvt_mem_free(mem, c, sizeof(*c));
}

int ssd_read_copy(struct ssd *s, uint32_t ns, const struct kvt_key *key, int prio,
		  tier_copy_fn cb, void *ctx)
{
	uint64_t h = ssd_hash(s, ns, key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	struct promote_task *p;
	struct ssd_copy *c;
	uint64_t off;

	p = kvt_mem_calloc(s->mem, 1, sizeof(*p));
	c = kvt_mem_calloc(s->mem, 1, sizeof(*c));
	if (!p || !c) {
		kvt_mem_free(s->mem, p, sizeof(*p));
		kvt_mem_free(s->mem, c, sizeof(*c));
		return -ENOMEM;
	}
	p->copy_cb = cb;
	p->copy = c;
	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, ns, key);
	if (!e || (e->flags & E_PENDING)) {
		pthread_mutex_unlock(&sh->lock);
		goto miss;
	}
	/* Not E_READ: this read must not make the block hot (ssd.h). */
	off = promote_from_entry(p, s, ns, key, e);
	pthread_mutex_unlock(&sh->lock);
	if (p->rec_align == 0)
		goto miss;
	c->part_count = p->part_count;
	c->value_len = p->value_len;
	c->buf_len = p->rec_len;
	c->buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, p->rec_len);
	c->lens = kvt_mem_alloc(s->mem, p->part_count * (sizeof(*c->lens) + sizeof(*c->crcs)));
	if (!c->buf || !c->lens) {
		ssd_copy_free(s->mem, c);
		kvt_mem_free(s->mem, p, sizeof(*p));
		return -ENOMEM;
	}
	c->crcs = (uint32_t *)(c->lens + p->part_count);
	c->value = c->buf + p->hdr_len;
	p->hdr = c->buf;
	p->iov[0].iov_base = c->buf;
	p->iov[0].iov_len = p->hdr_len;
	p->iov[1].iov_base = c->buf + p->hdr_len;
	p->iov[1].iov_len = p->rec_len - p->hdr_len;
	p->ctx = ctx;
	p->start_ns = kvt_now_ns();
	/* A batched value (hdr_len 0): the value's iovec alone. */
	multi_submit(s, &p->io, IO_READ, prio,
		     __atomic_load_n(&s->segs[p->slot].fd, __ATOMIC_RELAXED), off,
		     p->iov + p->batched, 2 - p->batched, promote_done, p);
	return 0;
miss:
	ssd_copy_free(s->mem, c);
	kvt_mem_free(s->mem, p, sizeof(*p));
	return KVT_MISS;
}

/* ------------------------------------------------------------------------
 * Part reads (ssd_read_part): the record's header and one part, nothing
 * else read, nothing promoted, the entry not marked read.  The first read
 * takes the header and the value's first SSD_PART_HEAD bytes (part 0 of
 * most values: an S3 object's header, kvtierd's HEAD and listings); the
 * header's part table says where the part is, and a part beyond those
 * bytes takes a second read of its aligned run, in pieces of at most
 * SSD_PART_PIECE: straight into the caller's buffer where the part
 * starts on the device's alignment and the buffer's first iovec is
 * 4096-aligned and holds it (its whole blocks; the tail through a
 * buffer of one block), else through one buffer of SSD_PART_PIECE.  So
 * a part read holds at most the first read's buffer (the header and 4
 * KiB) and one piece, whatever the part's size, and of the header's part
 * table only its part's entry (ssd_rec_hdr_decode_part: the table is
 * checked whole but not decoded into memory; until 2026-12-04 it was,
 * 16 KiB more for KVT_PARTS_MAX parts).  Until 2026-12-04 the
 * second read went through a buffer of the whole run (a 64 MiB part,
 * 64 MiB more for the read's life).  A miss or error may have written
 * the caller's buffer.
 *
 * Reclamation.  Nothing pins the record while it is read: the writer may
 * reuse its segment between the index lookup and either read, or between
 * the two.  After each read completes, its entry is looked up again
 * (ssd_entry_same, as promotions do): the same seq and not PENDING means
 * the bytes read are the record's; anything else is a miss, counted as
 * neither a header nor a CRC error and not dropped.  Only then are the
 * header and the part's CRC32C checked, and a failure there is
 * corruption: counted, the entry dropped.
 *
 *   lookup -> read 1 (header, 4 KiB) -> same? -> header? -> [piece -> same?]... -> CRC?
 *             "no" at a same?: a plain miss;  at header? or CRC?: dropped
 *
 * (The CRC is chained over the pieces and checked after the last: the
 * bytes of the earlier ones are in the caller's buffer by then.)
 *
 * A promotion that drops the entry (ssd.first_hit=cold) makes such a read
 * miss while DRAM holds the block: the store then asks DRAM again
 * (store_quiet_part_walk).
 */
#define SSD_PART_HEAD 4096u
#define SSD_PART_PIECE (1u << 20) /* a second read's I/O, at most */

struct part_task {
	struct ssd *s;
	/* One request at a time, so not a multi_io (65 of them: 6 KiB more
	 * a read in flight, until 2026-12-04) */
	struct io_req req;
	void (*then)(struct part_task *t, int64_t res);
	struct iovec iov;
	uint8_t *buf;             /* aligned, buf_len bytes at record offset buf_off */
	uint64_t buf_len, buf_off;
	uint64_t io_len;          /* bytes of the read in flight */
	/* The second read (part_piece_next): record offsets of the next
	 * piece, of the end of the aligned run and of the end of what is read
	 * into the caller's buffer (direct_end == run_off: none) */
	uint64_t run_off, run_end, direct_end;
	uint64_t out_len;         /* bytes of the part in the caller's buffer */
	uint32_t crc;             /* chained over those bytes */
	unsigned dst_i;           /* the caller's iovec out_len ends in, and where */
	uint64_t dst_off;
	uint64_t rec_off;         /* the record's offset in its segment */
	uint32_t ns;
	struct kvt_key key;
	uint64_t seq, generation, value_len, rec_len;
	uint32_t slot, hdr_len, rec_align, part_count, part;
	uint64_t part_off, part_len; /* in the value (from the header) */
	uint32_t part_crc, value_flags; /* part_crc: a batched value's value_crc */
	bool batched;             /* E_BATCHED: no header, part 0 the value */
	unsigned relocations;     /* restarts at the record's new place */
	int prio;
	const struct iovec *dst;
	unsigned dst_count;
	tier_done_fn done;
	void *ctx;
};

/* What a read of a part of at most SSD_PART_HEAD bytes holds at once:
 * its state and the first read's buffer (a part beyond it, a piece of at
 * most two blocks, after that buffer is freed), for the largest header
 * (KVT_PARTS_MAX parts, 4096-aligned) -- the bound kvtier.h promises. */
_Static_assert(sizeof(struct part_task) +
		       KVT_ALIGN_UP(SSD_REC_FIXED + (uint64_t)KVT_PARTS_MAX * SSD_PART_ENTRY,
				    SSD_REC_ALIGN_4K) + SSD_PART_HEAD <= KVT_PART_QUIET_MEM,
	       "a quiet part read of a small part holds at most KVT_PART_QUIET_MEM");

static void part_end(struct part_task *t, int status, uint64_t count)
{
	struct ssd *s = t->s;
	struct tier_result res = { .status = status, .count = count,
				   .value_len = status == KVT_MISS ? 0 : t->value_len,
				   .value_flags = status == KVT_MISS ? 0 : t->value_flags };
	tier_done_fn done = t->done;
	void *ctx = t->ctx;
	if (status == KVT_MISS)
		A(s->read_misses);
	kvt_mem_free(s->mem, t->buf, t->buf_len);
	kvt_mem_free(s->mem, t, sizeof(*t));
	done(ctx, &res);
}

/* The record the index still names is not what it promised (a bad
 * header), or its part's bytes are not (the CRC): corruption, since
 * part_entry_same said no write had reached it.  The block is a miss, its
 * entry kept dead (read_bad, as a promotion does). */
static void part_bad(struct part_task *t, bool crc)
{
	struct ssd *s = t->s;
	if (crc) {
		A(s->crc_errors);
		kvt_logf(s->log, KVT_LOG_WARN,
			 "ssd: CRC mismatch in segment %u part %u: block dropped (a miss)", t->slot,
			 t->part);
	} else {
		A(s->hdr_errors);
	}
	read_bad(s, t->ns, &t->key, t->seq);
	part_end(t, KVT_MISS, 0);
}

/* The part's bytes are in buf: check them, then copy them out. */
static void part_deliver(struct part_task *t)
{
	struct ssd *s = t->s;
	const uint8_t *src = t->buf + (t->hdr_len + t->part_off - t->buf_off);
	uint64_t left = t->part_len;

	if (!read_crc_ok(kvt_crc32c(0, src, t->part_len), t->part_crc, t->batched, t->ns, &t->key,
			 t->seq)) {
		part_bad(t, true);
		return;
	}
	for (unsigned i = 0; i < t->dst_count && left > 0; i++) {
		uint64_t n = t->dst[i].iov_len < left ? t->dst[i].iov_len : left;
		memcpy(t->dst[i].iov_base, src, n);
		src += n;
		left -= n;
	}
	A(s->reads);
	A(s->part_reads);
	AN(s->read_bytes, t->part_len);
	part_end(t, KVT_OK, t->part_len);
}

static bool part_io_ok(struct part_task *t, int64_t res)
{
	if (res >= 0 && (uint64_t)res == t->io_len)
		return true;
	A(t->s->io_errors);
	if (res == -EIO)
		ssd_seg_mark_bad(t->s, t->slot, -EIO);
	part_end(t, KVT_MISS, 0);
	return false;
}

/* A read of t's record has completed: ssd_entry_same. */
static bool part_entry_same(struct part_task *t)
{
	return ssd_entry_same(t->s, t->ns, &t->key, t->seq);
}

static void part_piece_next(struct part_task *t);
static bool part_relocate(struct part_task *t);

static void part_io_done(struct io_req *r)
{
	struct part_task *t = r->ctx;
	t->then(t, r->res);
}

/* Read t->iov at off in t's segment, then then(t, bytes read or -errno). */
static void part_submit(struct part_task *t, uint64_t off,
			void (*then)(struct part_task *t, int64_t res))
{
	struct ssd *s = t->s;
	memset(&t->req, 0, sizeof(t->req));
	t->then = then;
	t->req.opcode = IO_READ;
	t->req.prio = (uint8_t)t->prio;
	t->req.fd = __atomic_load_n(&s->segs[t->slot].fd, __ATOMIC_RELAXED);
	t->req.off = off;
	t->req.iov = &t->iov;
	t->req.iov_count = 1;
	t->req.done = part_io_done;
	t->req.ctx = t;
	io_submit(s->io, &t->req);
}

/* n bytes of the part at src to the caller's iovecs, after those there. */
static void part_copy_out(struct part_task *t, const uint8_t *src, uint64_t n)
{
	while (n > 0 && t->dst_i < t->dst_count) {
		const struct iovec *d = &t->dst[t->dst_i];
		uint64_t k = d->iov_len - t->dst_off < n ? d->iov_len - t->dst_off : n;
		memcpy((uint8_t *)d->iov_base + t->dst_off, src, k);
		src += k;
		n -= k;
		t->dst_off += k;
		if (t->dst_off == d->iov_len) {
			t->dst_i++;
			t->dst_off = 0;
		}
	}
}

/* A piece of the second read is back: its bytes are the record's only if
 * it was not reclaimed since (ssd_entry_same); the part's among them
 * CRC'd and in the caller's buffer, then the next piece or the end. */
static void part_piece_done(struct part_task *t, int64_t res)
{
	struct ssd *s = t->s;
	uint64_t start = t->hdr_len + t->part_off, end = start + t->part_len;
	uint64_t lo = t->run_off > start ? t->run_off : start;
	uint64_t hi = t->run_off + t->io_len < end ? t->run_off + t->io_len : end;

	if (!part_io_ok(t, res))
		return;
	if (!part_entry_same(t)) {
		if (!part_relocate(t))
			part_end(t, KVT_MISS, 0);
		return;
	}
	if (t->run_off < t->direct_end) {
		/* read in place: the part starts at direct_end's run start */
		t->crc = kvt_crc32c(t->crc, (const uint8_t *)t->dst[0].iov_base + (lo - start),
				    hi - lo);
		t->dst_off = hi - start;
	} else if (hi > lo) {
		const uint8_t *src = t->buf + (lo - t->run_off);
		t->crc = kvt_crc32c(t->crc, src, hi - lo);
		part_copy_out(t, src, hi - lo);
	}
	t->out_len += hi > lo ? hi - lo : 0;
	t->run_off += t->io_len;
	if (t->run_off < t->run_end) {
		part_piece_next(t);
		return;
	}
	if (t->out_len != t->part_len ||
	    !read_crc_ok(t->crc, t->part_crc, t->batched, t->ns, &t->key, t->seq)) {
		part_bad(t, true);
		return;
	}
	A(s->reads);
	A(s->part_reads);
	AN(s->read_bytes, t->part_len);
	part_end(t, KVT_OK, t->part_len);
}

/* The second read's next piece: in place up to direct_end, then through
 * t->buf (allocated at the first such piece: a piece, or what is left of
 * the run if less). */
static void part_piece_next(struct part_task *t)
{
	struct ssd *s = t->s;
	uint64_t left = t->run_end - t->run_off;
	uint8_t *to;

	if (t->run_off < t->direct_end) {
		left = t->direct_end - t->run_off;
		t->io_len = left < SSD_PART_PIECE ? left : SSD_PART_PIECE;
		to = (uint8_t *)t->dst[0].iov_base + (t->run_off - (t->hdr_len + t->part_off));
	} else {
		t->io_len = left < SSD_PART_PIECE ? left : SSD_PART_PIECE;
		if (!t->buf) {
			t->buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, t->io_len);
			if (!t->buf) {
				part_end(t, KVT_MISS, 0);
				return;
			}
			t->buf_len = t->io_len;
			t->buf_off = t->run_off;
		}
		to = t->buf;
	}
	t->iov.iov_base = to;
	t->iov.iov_len = t->io_len;
	part_submit(t, t->rec_off + t->run_off, part_piece_done);
}

/* The alignment a part's run is read at: the device's, not the
 * layout's: a record of a 4096 segment can have the 512 layout's length
 * (over 214 parts, a value of whole 4 KiB: the same bytes either way),
 * so ssd_rec_align_of says 512 for it, which O_DIRECT on a 4Kn drive
 * refuses.  A record at a 4096 offset with a 4096 length is read in 4096
 * runs (within it). */
static uint32_t part_io_align(const struct part_task *t)
{
	return (t->rec_off | t->rec_len) % SSD_REC_ALIGN_4K == 0 ? SSD_REC_ALIGN_4K
								  : t->rec_align;
}

/* The second read's plan: the part's aligned run alone, in place (the
 * part's whole blocks) where the part starts on a block and the caller's
 * first iovec is aligned and holds them.  False if the run passes the
 * record's end. */
static bool part_run_plan(struct part_task *t)
{
	uint32_t io_align = part_io_align(t);
	uint64_t start = t->hdr_len + t->part_off;
	uint64_t a = start & ~(uint64_t)(io_align - 1);
	uint64_t b = align_rec(start + t->part_len, io_align);

	if (b > t->rec_len)
		return false;
	t->run_off = t->direct_end = a;
	t->run_end = b;
	if (a == start && (uintptr_t)t->dst[0].iov_base % SSD_ALIGN == 0 &&
	    t->dst[0].iov_len >= (t->part_len & ~(uint64_t)(io_align - 1)))
		t->direct_end = a + (t->part_len & ~(uint64_t)(io_align - 1));
	return true;
}

static void part_head_done(struct part_task *t, int64_t res)
{
	struct ssd *s = t->s;
	const struct ns_entry *nse = ns_reg_get(s->reg, t->ns);
	struct ssd_rec_hdr rh;
	struct ssd_part pt;
	uint64_t room = 0;
	int rc;

	if (!part_io_ok(t, res))
		return;
	/* Reclaimed since the lookup (its segment reused, a carry, a delete, a
	 * promotion's drop): the bytes may be another record's -- a miss. */
	if (!part_entry_same(t)) {
		if (!part_relocate(t))
			part_end(t, KVT_MISS, 0);
		return;
	}
	/* Every check of the header, its whole part table, but only the
	 * part's entry kept: no decoded table (16 KiB for KVT_PARTS_MAX
	 * parts, held beside buf until 2026-12-04).  t->part < t->part_count
	 * (ssd_read_part), so a KVT_ERANGE here is a header whose count
	 * differs from the entry's: bad, as the checks below. */
	rc = ssd_rec_hdr_decode_part(t->buf, t->hdr_len, t->rec_align, &rh, t->part, &pt,
				     &t->part_off);
	if (rc < 0 || rh.type != SSD_REC_PUT || rh.seq != t->seq ||
	    rh.generation != t->generation || rh.value_len != t->value_len ||
	    rh.part_count != t->part_count || rh.key.len != t->key.len ||
	    memcmp(rh.key.bytes, t->key.bytes, t->key.len) != 0 || !nse ||
	    memcmp(rh.ns_digest, nse->digest, 32) != 0) {
		part_bad(t, false);
		return;
	}
	t->value_flags = (rh.flags & SSD_REC_F_SEALED) ? KVT_F_SEALED : 0;
	t->part_len = pt.len;
	t->part_crc = pt.crc;
	if (t->part_off + t->part_len > t->value_len) {
		part_bad(t, false);
		return;
	}
	for (unsigned i = 0; i < t->dst_count; i++)
		room += t->dst[i].iov_len;
	if (t->part_len > room) {
		part_end(t, KVT_EBUFSMALL, 0);
		return;
	}
	if (t->hdr_len + t->part_off + t->part_len <= t->buf_len) {
		part_deliver(t);
		return;
	}
	kvt_mem_free(s->mem, t->buf, t->buf_len);
	t->buf = NULL;
	t->buf_len = 0;
	if (!part_run_plan(t)) {
		part_bad(t, false);
		return;
	}
	part_piece_next(t);
}

/* A batched value's part read with too small a buffer: KVT_EBUFSMALL
 * through done, as a framed record's, after one block's read (so that
 * done runs on the I/O thread, never inside ssd_read_part). */
static void part_small_done(struct part_task *t, int64_t res)
{
	if (!part_io_ok(t, res))
		return;
	if (part_entry_same(t))
		part_end(t, KVT_EBUFSMALL, 0);
	else if (!part_relocate(t))
		part_end(t, KVT_MISS, 0);
}

/*
 * A batched value (format 3): no header, one part, the whole value, at
 * the entry's offset.  Its check, the entry's value_crc, covers all of it
 * (and its identity: ssd_value_crc), so the whole value is read, as a
 * framed part beyond the first read is: its aligned run in pieces of at
 * most SSD_PART_PIECE, in place where the caller's buffer allows, the
 * CRC chained over them and checked after the last (part_piece_done),
 * each piece's entry looked up again.  Until 2026-12-05 a miss.  No first
 * read: the index says where the value is and how long.  Returns as
 * part_start.
 */
static int part_batched_start(struct part_task *t)
{
	struct ssd *s = t->s;
	uint64_t room = 0;
	bool small;

	/* As promote_from_entry: the value alone, padded within a block */
	if (t->part != 0 || t->value_len == 0 || t->rec_len < t->value_len ||
	    t->rec_len - t->value_len >= SSD_REC_ALIGN_4K) {
		return KVT_MISS;
	}
	t->rec_align = SSD_REC_ALIGN;
	t->hdr_len = 0;
	t->part_off = 0;
	t->part_len = t->value_len;
	for (unsigned i = 0; i < t->dst_count; i++)
		room += t->dst[i].iov_len;
	small = t->part_len > room;
	if (small) {
		t->buf_len = part_io_align(t);
	} else {
		if (!part_run_plan(t)) { /* cannot be: rec_len holds the run */
			return KVT_MISS;
		}
		/* The buffer now, as part_piece_next would allocate it at the
		 * first piece not in place: a failure is -ENOMEM here, not a
		 * done run inside ssd_read_part. */
		if (t->direct_end < t->run_end)
			t->buf_len = t->run_end - t->direct_end < SSD_PART_PIECE
					     ? t->run_end - t->direct_end
					     : SSD_PART_PIECE;
		t->buf_off = t->direct_end;
	}
	if (t->buf_len) {
		t->buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, t->buf_len);
		if (!t->buf) {
			t->buf_len = 0;
			return -ENOMEM;
		}
	}
	if (small) {
		t->io_len = t->buf_len;
		t->iov.iov_base = t->buf;
		t->iov.iov_len = t->buf_len;
		part_submit(t, t->rec_off, part_small_done);
		return 0;
	}
	part_piece_next(t);
	return 0;
}

/* Start t's read of (t->ns, t->key) part t->part where the index now
 * says the record is.  Returns 0 (the read is submitted: done will run on
 * the I/O thread), KVT_MISS, KVT_ERANGE or -ENOMEM; t and its buffer are
 * the caller's to free unless 0. */
static int part_start(struct part_task *t)
{
	struct ssd *s = t->s;
	uint64_t h = ssd_hash(s, t->ns, &t->key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;

	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, t->ns, &t->key);
	if (!e || (e->flags & E_PENDING)) {
		pthread_mutex_unlock(&sh->lock);
		return KVT_MISS;
	}
	/* A part past the value's: the entry knows its part count, so
	 * KVT_ERANGE (as DRAM answers it) before any read.  (Until
	 * 2026-12-04 after the first read, ~4.6 KiB, and only if it worked.) */
	if (t->part >= e->part_count) {
		pthread_mutex_unlock(&sh->lock);
		return KVT_ERANGE;
	}
	/* Not E_READ: a part read promotes nothing, so it is no read that
	 * should keep the block (ssd.h).  A batched value (format 3): its
	 * value_crc is the check (part_batched_start). */
	t->batched = e->flags & E_BATCHED;
	t->part_crc = t->batched ? e->value_crc : 0;
	t->value_flags = t->batched && (e->flags & E_SEALED_VALUE) ? KVT_F_SEALED : 0;
	t->seq = e->seq;
	t->generation = e->generation;
	t->value_len = e->value_len;
	t->slot = e->slot;
	t->part_count = e->part_count;
	t->rec_len = (uint64_t)e->len_512 * SSD_REC_ALIGN;
	t->rec_off = (uint64_t)e->off_512 * SSD_REC_ALIGN;
	pthread_mutex_unlock(&sh->lock);
	if (t->batched)
		return part_batched_start(t);
	t->rec_align = ssd_rec_align_of(t->part_count, t->value_len, t->rec_len);
	if (t->rec_align == 0)
		return KVT_MISS;
	t->hdr_len = ssd_rec_hdr_len(t->part_count, t->rec_align);
	t->buf_len = t->hdr_len + SSD_PART_HEAD;
	if (t->buf_len > t->rec_len)
		t->buf_len = t->rec_len;
	t->io_len = t->buf_len;
	t->buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, t->buf_len);
	if (!t->buf) {
		t->buf_len = 0;
		return -ENOMEM;
	}
	t->iov.iov_base = t->buf;
	t->iov.iov_len = t->buf_len;
	part_submit(t, t->rec_off, part_head_done);
	return 0;
}

/*
 * A read of t's record ended and its entry is no longer that record
 * (part_entry_same said no).  If the entry is published under another
 * seq -- the record carried to the log's head, or reinserted from DRAM,
 * during the read; or a newer put of the key -- the read starts over
 * there, at most PART_RELOCATE_MAX times (ssd.part_relocated): the key
 * held a block all along, and a miss sent an S3 HEAD to DRAM and then
 * answered 404 (pin47's "Left").  The restart is a read of the current
 * record, checked as any (a version of the key current during the call).
 * An entry still PENDING (a carry placed but not yet written, the usual
 * case: the carry is queued behind write-downs) is a miss, as before:
 * waiting for it here would hold the I/O thread the carry's own write
 * completes on (io_uring).  Whether it restarted; else t is the caller's.
 */
#define PART_RELOCATE_MAX 2u

static bool part_relocate(struct part_task *t)
{
	struct ssd *s = t->s;
	uint64_t h = ssd_hash(s, t->ns, &t->key);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry *e;
	bool moved;
	int rc;

	if (t->relocations >= PART_RELOCATE_MAX)
		return false;
	pthread_mutex_lock(&sh->lock);
	e = *ssd_idx_slot(sh, h, t->ns, &t->key);
	moved = e && !(e->flags & E_PENDING) && e->seq != t->seq;
	pthread_mutex_unlock(&sh->lock);
	if (!moved)
		return false;
	t->relocations++;
	A(s->part_relocated);
	kvt_mem_free(s->mem, t->buf, t->buf_len);
	t->buf = NULL;
	t->buf_len = t->buf_off = t->io_len = 0;
	t->run_off = t->run_end = t->direct_end = 0;
	t->out_len = t->dst_off = t->part_off = t->part_len = 0;
	t->crc = 0;
	t->dst_i = 0;
	t->hdr_len = t->rec_align = 0;
	rc = part_start(t);
	if (rc != 0) /* KVT_ERANGE too: the block changed under the read */
		part_end(t, KVT_MISS, 0);
	return true;
}

int ssd_read_part(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint32_t part,
		  const struct iovec *dst, unsigned dst_count, int prio, tier_done_fn done,
		  void *ctx)
{
	struct part_task *t;
	int rc;

	t = kvt_mem_calloc(s->mem, 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = s;
	t->ns = ns;
	t->key = *key;
	t->part = part;
	t->prio = prio;
	t->dst = dst;
	t->dst_count = dst_count;
	t->done = done;
	t->ctx = ctx;
	rc = part_start(t);
	if (rc != 0) {
		kvt_mem_free(s->mem, t->buf, t->buf_len);
		kvt_mem_free(s->mem, t, sizeof(*t));
	}
	return rc;
}

uint64_t ssd_load_ns(struct ssd *s, uint64_t len)
{
	double bps;
	pthread_mutex_lock(&s->wd_lock);
	bps = s->read_measured ? s->read_bps : 1e9; /* unmeasured: assume 1 GB/s */
	pthread_mutex_unlock(&s->wd_lock);
	return (uint64_t)((double)len * 1e9 / bps);
}

/* ------------------------------------------------------------------------
 * Open and close
 */

int ssd_open(struct ssd **out, const struct ssd_config *cfg, int dir_fd, struct kvt_mem *mem,
	     const struct kvt_logger *log, struct ns_registry *reg, struct dram *dram)
{
	struct io_config ioc = { .backend = cfg->backend, .depth = cfg->io_depth };
	struct ssd *s;
	uint64_t used = 0, blocks = 0, secret;
	int r;

	if (cfg->seg_size < (1u << 20) || cfg->seg_size % SSD_ALIGN ||
	    cfg->capacity / cfg->seg_size < 2)
		return KVT_EOPTVAL;
	r = kvt_secret_draw(&secret);	/* waits for the pool, EINTR retried */
	if (r)
		return r;
	s = kvt_mem_calloc(mem, 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	if (!s->cfg.wd_window_bytes)
		s->cfg.wd_window_bytes = SSD_WD_WINDOW;
	s->hash_secret = secret;
	s->mem = mem;
	s->log = log;
	s->reg = reg;
	s->dram = dram;
	s->dir_fd = -1;
	s->open_slot = -1;
	s->next_seq = 1;
	s->next_gen = 1;
	pthread_mutex_init(&s->seg_lock, NULL);
	pthread_mutex_init(&s->ns_lock, NULL);
	pthread_mutex_init(&s->wd_lock, NULL);
	pthread_mutex_init(&s->pf_lock, NULL);
	{
		/* wd_cond's timed waits are on the monotonic clock: a step of
		 * the wall clock neither stretches nor cuts a put's wait. */
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		r = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->wd_cond, &ca); /* made either way: fail destroys it */
		pthread_condattr_destroy(&ca);
	}
	pthread_cond_init(&s->sync_cond, NULL);
	pthread_cond_init(&s->pin_cond, NULL);
	pthread_mutex_init(&s->sync_run_lock, NULL);
	if (r < 0)
		goto fail;
	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_init(&s->shards[i].lock, NULL);
		s->shards[i].buckets = kvt_mem_calloc(mem, 64, sizeof(struct ssd_entry *));
		s->shards[i].mask = 63;
		if (!s->shards[i].buckets) {
			r = -ENOMEM;
			goto fail;
		}
	}
	s->slot_count = (uint32_t)(cfg->capacity / cfg->seg_size);
	s->segs = kvt_mem_calloc(mem, s->slot_count, sizeof(*s->segs));
	/* Before any entry: ssd_idx.c "One segment's entries". */
	for (int i = 0; i < SSD_SHARDS; i++) {
		s->shards[i].slot_heads = kvt_mem_calloc(mem, s->slot_count,
							 sizeof(struct ssd_entry *));
		if (!s->shards[i].slot_heads) {
			r = -ENOMEM;
			goto fail;
		}
	}
	s->clear_cap = 64;
	s->clear_seq = kvt_mem_calloc(mem, s->clear_cap, sizeof(uint64_t));
	if (cfg->quota)
		s->wd_group_bytes = kvt_mem_calloc(mem, KVT_QUOTA_GROUPS, sizeof(uint64_t));
	if (!s->segs || !s->clear_seq || (cfg->quota && !s->wd_group_bytes)) {
		r = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < s->slot_count; i++)
		s->segs[i].fd = -1;
	if (mkdirat(dir_fd, SSD_DIR, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		goto fail;
	}
	s->dir_fd = openat(dir_fd, SSD_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = ssd_store_id(s);
	if (r < 0)
		goto fail;
	r = io_open(&s->io, &ioc, mem, log);
	if (r < 0)
		goto fail;
	{
		/* The DRAM arena: value bytes move between it and the device as
		 * fixed-buffer I/O.  Failure only costs the fixed-buffer path. */
		struct iovec regions[256];
		unsigned n = dram_regions(dram, regions, 256);
		int rr = io_register_buffers(s->io, regions, n);
		if (rr < 0 && rr != -EOPNOTSUPP)
			kvt_logf(log, KVT_LOG_INFO, "ssd: DRAM arena not registered for fixed I/O: %s",
				 kvt_strerror(rr));
	}
	ssd_rec_align_pick(s);
	if (s->cfg.debug_check_align)
		io_align_check(s->io, s->rec_align);
	r = ssd_recover(s);
	if (r < 0)
		goto fail;
	ssd_seal_leftovers(s);
	/* A damaged checkpoint, ignored: a sound one in its place now, the
	 * index as recovered (what a close at once would write; the writer
	 * has not started).  A failure is logged and costs what it did
	 * before: the damaged file until the next checkpoint. */
	if ((s->rec_ckpt_damaged || s->rec_hdr_tombs) && ssd_ckpt_write(s) == 0) {
		if (s->rec_ckpt_damaged)
			kvt_logf(log, KVT_LOG_INFO, "ssd: damaged checkpoint replaced");
		/* Tombstones of slots whose header was damaged are applied,
		 * and the checkpoint that reflects them durable: those slots
		 * are voided (ssd_recover.c "Headerless"). */
		ssd_void_headerless(s);
	}
	pthread_mutex_lock(&s->seg_lock);
	/* A log of dead records only (cleared) is not full (ssd_clear). */
	atomic_store(&s->log_full, seg_next_evicts_locked(s) && !ssd_idx_empty(s));
	pthread_mutex_unlock(&s->seg_lock);
	for (int i = 0; i < SSD_SHARDS; i++) {
		used += s->shards[i].bytes;
		blocks += s->shards[i].count;
	}
	kvt_logf(log, KVT_LOG_INFO,
		 "ssd: %u segments of %llu KiB, io %s; recovered %llu blocks (%llu MiB) in %.3f s: "
		 "%llu from the checkpoint, %llu records scanned in %llu segments",
		 s->slot_count, (unsigned long long)(cfg->seg_size >> 10), io_backend_name(s->io),
		 (unsigned long long)blocks, (unsigned long long)(used >> 20),
		 (double)s->rec_ns / 1e9, (unsigned long long)s->rec_ckpt_entries,
		 (unsigned long long)s->rec_records, (unsigned long long)s->rec_segments);
	ssd_room_check(s);
	r = -pthread_create(&s->sync_thread, NULL, sync_main, s);
	if (r < 0)
		goto fail;
	pthread_setname_np(s->sync_thread, "kvt-ssd-sync");
	s->sync_started = true;
	r = -pthread_create(&s->wd_thread, NULL, wd_main, s);
	if (r < 0)
		goto fail;
	pthread_setname_np(s->wd_thread, "kvt-ssd-wd");
	s->wd_started = true;
	*out = s;
	return 0;
fail:
	ssd_close(s);
	return r;
}

/* Raise *stop under wd_lock, wake the thread on cond, join it. */
static void ssd_thread_stop(struct ssd *s, bool *stop, pthread_cond_t *cond, pthread_t th)
{
	pthread_mutex_lock(&s->wd_lock);
	*stop = true;
	pthread_cond_broadcast(cond);
	pthread_mutex_unlock(&s->wd_lock);
	pthread_join(th, NULL);
}

void ssd_close(struct ssd *s)
{
	if (!s)
		return;
	if (s->wd_started) {
		/* Everything queued is written, then a checkpoint is taken. */
		ssd_checkpoint(s);
		ssd_thread_stop(s, &s->wd_stop, &s->wd_cond, s->wd_thread);
		ssd_room_run(s); /* stopped: nothing waits any more (ssd_put_room's rule) */
	}
	if (s->wd_dropped) /* taken off the queue as the writer stopped */
		wd_dropped_run(s);
	/* After the writer: no sync is passed on any more; those passed are
	 * answered first. */
	if (s->sync_started)
		ssd_thread_stop(s, &s->sync_stop, &s->sync_cond, s->sync_thread);
	while (s->tomb_parked) {
		struct wd_task *p = s->tomb_parked;
		s->tomb_parked = p->next;
		wd_task_free(s, p);
	}
	if (s->io)
		io_close(s->io);
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		if (sh->slot_heads) {
			/* Two walks of the shard, cache misses each: a few
			 * seconds at 64 M entries on a graceful stop
			 * (review45d), so only on small indexes -- every test's
			 * -- where it costs nothing. */
			if (sh->count <= SSD_CLOSE_CHECK_MAX)
				ssd_idx_check_slots(s, sh);
			kvt_mem_free(s->mem, sh->slot_heads,
				     (size_t)s->slot_count * sizeof(*sh->slot_heads));
		}
		if (sh->buckets) {
			for (uint64_t b = 0; b < ssd_idx_chains(sh); b++) {
				struct ssd_entry *e = *ssd_idx_chain(sh, b), *n;
				for (; e; e = n) {
					n = e->hnext;
					kvt_mem_free(s->mem, e, sizeof(*e));
				}
			}
			kvt_mem_free(s->mem, sh->buckets,
				     ((size_t)sh->mask + 1) * sizeof(*sh->buckets));
			if (sh->old) /* a growth under way ("Index growth") */
				kvt_mem_free(s->mem, sh->old,
					     ((size_t)sh->old_mask + 1) * sizeof(*sh->old));
		}
		pthread_mutex_destroy(&sh->lock);
	}
	if (s->segs) {
		for (uint32_t i = 0; i < s->slot_count; i++) {
			if (s->segs[i].fd >= 0)
				close(s->segs[i].fd);
			ssd_seg_sum_free(s, &s->segs[i]);
			kvt_mem_free(s->mem, s->segs[i].old_sum,
				     s->segs[i].old_cap * sizeof(*s->segs[i].old_sum));
		}
		kvt_mem_free(s->mem, s->segs, s->slot_count * sizeof(*s->segs));
	}
	kvt_mem_free(s->mem, s->clear_seq, s->clear_cap * sizeof(uint64_t));
	kvt_mem_free(s->mem, s->persistent, s->persistent_cap);
	kvt_mem_free(s->mem, s->wd_group_bytes, KVT_QUOTA_GROUPS * sizeof(uint64_t));
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	pthread_mutex_destroy(&s->seg_lock);
	pthread_mutex_destroy(&s->ns_lock);
	pthread_mutex_destroy(&s->wd_lock);
	pthread_mutex_destroy(&s->pf_lock);
	pthread_cond_destroy(&s->wd_cond);
	pthread_cond_destroy(&s->sync_cond);
	pthread_cond_destroy(&s->pin_cond);
	pthread_mutex_destroy(&s->sync_run_lock);
	kvt_mem_free(s->mem, s, sizeof(*s));
}

struct kvt_io *ssd_io(struct ssd *s)
{
	return s->io;
}

/* ------------------------------------------------------------------------
 * Statistics
 */

uint64_t ssd_room_bytes(struct ssd *s)
{
	uint32_t room = ssd_room_slots(s);
	uint64_t used = 0, usable = (uint64_t)room * s->cfg.low_pct / 100;
	/* One slot stays out of it: the close write-down's cost estimate
	 * must never make the writer evict what the SSD holds (at the 100 %
	 * default the low watermark leaves no slot free by itself). */
	if (usable + 1 > room)
		usable = room > 0 ? room - 1 : 0;
	pthread_mutex_lock(&s->seg_lock);
	for (uint32_t i = 0; i < s->slot_count; i++)
		used += s->segs[i].state == SEG_OPEN || s->segs[i].state == SEG_SEALED;
	pthread_mutex_unlock(&s->seg_lock);
	return used < usable ? (usable - used) * s->cfg.seg_size : 0;
}

void ssd_stats(struct ssd *s, kvt_stats_fn fn, void *ctx)
{
	uint64_t blocks = 0, bytes = 0, rec_bytes = 0, log_bytes = 0, used_slots = 0, wd_bytes,
		 inflight, placed, parked, growing = 0;
	double bps;
	bool measured, degraded, lost;

	for (int i = 0; i < SSD_SHARDS; i++) {
		pthread_mutex_lock(&s->shards[i].lock);
		blocks += s->shards[i].count - s->shards[i].dead;
		bytes += s->shards[i].bytes;
		rec_bytes += s->shards[i].rec_bytes;
		growing += s->shards[i].old != NULL;
		pthread_mutex_unlock(&s->shards[i].lock);
	}
	pthread_mutex_lock(&s->seg_lock);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		const struct ssd_seg *g = &s->segs[i];
		used_slots += g->state == SEG_OPEN || g->state == SEG_SEALED;
		log_bytes += g->state == SEG_SEALED ? g->rec_end - SSD_ALIGN
			     : g->state == SEG_OPEN ? seg_records_end(g) - SSD_ALIGN
						    : 0;
	}
	pthread_mutex_unlock(&s->seg_lock);
	pthread_mutex_lock(&s->wd_lock);
	wd_bytes = s->wd_bytes;
	inflight = s->wd_inflight;
	placed = s->wd_placed_bytes;
	parked = s->tomb_parked_n + s->tomb_retrying;
	lost = s->tomb_dropped;
	bps = s->read_bps;
	measured = s->read_measured;
	degraded = s->degraded;
	pthread_mutex_unlock(&s->wd_lock);

	fn(ctx, "ssd.capacity_bytes", (uint64_t)s->slot_count * s->cfg.seg_size, NULL);
	fn(ctx, "ssd.segment_bytes", s->cfg.seg_size, NULL);
	fn(ctx, "ssd.segments", s->slot_count, NULL);
	fn(ctx, "ssd.segments_used", used_slots, NULL);
	/* Room: the segments the file system had room for (ssd.segments
	 * unless a full disk capped the log), and how often it did. */
	fn(ctx, "ssd.segments_room", ssd_room_slots(s), NULL);
	fn(ctx, "ssd.room_bytes", (uint64_t)ssd_room_slots(s) * s->cfg.seg_size, NULL);
	fn(ctx, "ssd.room_capped", AL(s->room_capped), NULL);
	/* Counted after the sweep, not from SEG_BAD: a reader who sees the
	 * count must also see the segment's blocks gone.  A slot never leaves
	 * SEG_BAD while the store is open, so this also equals that gauge. */
	fn(ctx, "ssd.segments_quarantined", atomic_load(&s->quarantined), NULL);
	fn(ctx, "ssd.blocks", blocks, NULL);
	fn(ctx, "ssd.value_bytes", bytes, NULL);
	/* Where the flash goes (doc/ssd.md, "Where the bytes go"): the
	 * records in the slots, live or dead, and the live ones' records. */
	fn(ctx, "ssd.log_record_bytes", log_bytes, NULL);
	fn(ctx, "ssd.live_record_bytes", rec_bytes, NULL);
	fn(ctx, "ssd.degraded", degraded, NULL);
	fn(ctx, "ssd.admission", 0,
	   s->cfg.admission == SSD_ADMIT_ALWAYS   ? "write-through"
	   : s->cfg.admission == SSD_ADMIT_VICTIM ? "victim"
						  : "second-access");
	fn(ctx, "ssd.writedown_queued", AL(s->wd_queued), NULL);
	fn(ctx, "ssd.writedown_blocks", AL(s->wd_written), NULL);
	fn(ctx, "ssd.writedown_bytes", AL(s->wd_written_bytes), NULL);
	fn(ctx, "ssd.writedown_shed", AL(s->wd_shed), NULL);
	fn(ctx, "ssd.stop_writedown_shed", AL(s->stop_wd_shed), NULL);
	fn(ctx, "ssd.writedown_preempted", AL(s->wd_preempted), NULL);
	fn(ctx, "ssd.writedown_put_waits", AL(s->wd_put_waits), NULL);
	fn(ctx, "ssd.promoted_dropped", AL(s->dropped_promoted), NULL);
	fn(ctx, "ssd.writedown_put_timeouts", AL(s->wd_put_timeouts), NULL);
	fn(ctx, "ssd.writedown_skipped", AL(s->wd_skipped), NULL);
	/* Format 3 (ssd.format=3): batches written, the values in them
	 * (write-downs and carries), batched values carried at reclamation
	 * (read back by value), and carries written as values of a batch
	 * (of ssd.carried_blocks; the others framed) */
	fn(ctx, "ssd.batches", AL(s->batches), NULL);
	fn(ctx, "ssd.batched_blocks", AL(s->batched_blocks), NULL);
	fn(ctx, "ssd.batched_carried", AL(s->batched_carried), NULL);
	fn(ctx, "ssd.carried_in_batches", AL(s->carried_in_batches), NULL);
	fn(ctx, "ssd.writedown_errors", AL(s->wd_errors), NULL);
	fn(ctx, "ssd.writedown_pending_bytes", wd_bytes, NULL);
	fn(ctx, "ssd.writes_inflight", inflight, NULL);
	/* Of the backlog, the records placed in the log and in flight (at
	 * most about ssd.writedown_window: "Deletes jump the queue"). */
	fn(ctx, "ssd.writedown_placed_bytes", placed, NULL);
	fn(ctx, "ssd.tombstones", AL(s->tombstones), NULL);
	fn(ctx, "ssd.delete_syncs", AL(s->delete_syncs), NULL);
	fn(ctx, "ssd.delete_sync_rounds", AL(s->delete_sync_rounds), NULL);
	fn(ctx, "ssd.tombstones_unwritten", parked, NULL);
	/* 1: a tombstone may be lost (dropped, or a segment holding one
	 * not yet durable quarantined: ssd_idx.c "Tombstones at risk"):
	 * every delete and flush fails until the store reopens
	 * (ssd_tombs_lost). */
	fn(ctx, "ssd.deletes_lost", lost, NULL);
	fn(ctx, "ssd.reads", AL(s->reads), NULL);
	fn(ctx, "ssd.read_bytes", AL(s->read_bytes), NULL);
	fn(ctx, "ssd.read_misses", AL(s->read_misses), NULL);
	fn(ctx, "ssd.promote_full", AL(s->promote_full), NULL);
	fn(ctx, "ssd.promote_relocated", AL(s->promote_relocated), NULL);
	fn(ctx, "ssd.reclaim_read_waits", AL(s->reclaim_read_waits), NULL);
	fn(ctx, "ssd.copy_reads", AL(s->copy_reads), NULL);
	fn(ctx, "ssd.part_reads", AL(s->part_reads), NULL);
	fn(ctx, "ssd.part_relocated", AL(s->part_relocated), NULL);
	fn(ctx, "ssd.reclaim_leftovers", AL(s->reclaim_leftovers), NULL);
	fn(ctx, "ssd.read_bps", (uint64_t)bps, NULL);
	fn(ctx, "ssd.read_bps_measured", measured, NULL);
	fn(ctx, "ssd.crc_errors", AL(s->crc_errors), NULL);
	fn(ctx, "ssd.header_errors", AL(s->hdr_errors), NULL);
	fn(ctx, "ssd.io_errors", AL(s->io_errors), NULL);
	fn(ctx, "ssd.enospc", AL(s->enospc), NULL);
	fn(ctx, "ssd.segments_sealed", AL(s->seg_sealed), NULL);
	fn(ctx, "ssd.segments_evicted", AL(s->seg_evicted), NULL);
	fn(ctx, "ssd.evicted_blocks", AL(s->evicted_blocks), NULL);
	fn(ctx, "ssd.reinserted_blocks", AL(s->reinserted), NULL);
	fn(ctx, "ssd.carried_blocks", AL(s->carried), NULL);
	fn(ctx, "ssd.carried_bytes", AL(s->carried_bytes), NULL);
	fn(ctx, "ssd.carry_lost", AL(s->carry_lost), NULL);
	/* Reclamation, record by record: dropped unread, dropped read but
	 * past ssd.reinsert_pct, dead already (room that held no cache). */
	fn(ctx, "ssd.evicted_unread", AL(s->evicted_unread), NULL);
	fn(ctx, "ssd.evicted_over_budget", AL(s->evicted_over_budget), NULL);
	fn(ctx, "ssd.evicted_dead", AL(s->evicted_dead), NULL);
	fn(ctx, "ssd.sealed_records", AL(s->sealed_records), NULL);
	/* What dropping one segment's index entries cost (ssd_idx.c "One
	 * segment's entries"). */
	fn(ctx, "ssd.slot_sweeps", AL(s->slot_sweeps), NULL);
	fn(ctx, "ssd.slot_sweep_visited", AL(s->slot_sweep_visited), NULL);
	fn(ctx, "ssd.slot_sweep_ns", AL(s->slot_sweep_ns), NULL);
	fn(ctx, "ssd.slot_sweep_max_ns", AL(s->slot_sweep_max_ns), NULL);
	fn(ctx, "ssd.slot_list_errors", AL(s->slot_list_errors), NULL);
	fn(ctx, "ssd.idx_grows", AL(s->idx_grows), NULL);
	fn(ctx, "ssd.idx_grow_max_ns", AL(s->idx_grow_max_ns), NULL);
	fn(ctx, "ssd.idx_grow_max_moved", AL(s->idx_grow_max_moved), NULL);
	fn(ctx, "ssd.idx_sweep_max_hold_ns", AL(s->idx_sweep_max_hold_ns), NULL);
	fn(ctx, "ssd.idx_sweep_max_chunk", AL(s->idx_sweep_max_chunk), NULL);
	fn(ctx, "ssd.idx_sweep_restarts", AL(s->idx_sweep_restarts), NULL);
	fn(ctx, "ssd.idx_sweep_chunks", AL(s->idx_sweep_chunks), NULL);
	fn(ctx, "ssd.idx_sweep_hold_ns", AL(s->idx_sweep_hold_ns), NULL);
	fn(ctx, "ssd.idx_growing", growing, NULL);
	fn(ctx, "ssd.seg_dir_syncs", AL(s->seg_dir_syncs), NULL);
	fn(ctx, "ssd.evicted_to_shared", AL(s->evicted_handed), NULL);
	fn(ctx, "ssd.checkpoints", AL(s->ckpts), NULL);
	fn(ctx, "ssd.recovery_ns", s->rec_ns, NULL);
	fn(ctx, "ssd.recovery_checkpoint_blocks", s->rec_ckpt_entries, NULL);
	fn(ctx, "ssd.recovery_records_scanned", s->rec_records, NULL);
	fn(ctx, "ssd.recovery_segments_scanned", s->rec_segments, NULL);
	fn(ctx, "ssd.recovery_dropped", s->rec_dropped, NULL);
	fn(ctx, "ssd.recovery_old_format_segments", s->rec_old_format, NULL);
	fn(ctx, "ssd.recovery_other_size_segments", s->rec_other_size, NULL);
	fn(ctx, "ssd.recovery_twins_used", s->rec_twins_used, NULL);
	fn(ctx, "ssd.recovery_torn_values", s->rec_torn, NULL);
	fn(ctx, "ssd.recovery_ckpt_gone", s->rec_ckpt_gone, NULL);
	fn(ctx, "ssd.recovery_headerless_tombstones", s->rec_hdr_tombs, NULL);
	io_stats(s->io, fn, ctx);
}

/*
 * Graceful stop (the SSD tier's stop, before ssd_close): write down what
 * only DRAM holds, most valuable first, within ssd.close_writedown_ms and
 * the SSD's free room (whole free segments under its low watermark: what
 * it holds is not pushed out for DRAM's older blocks), a pass of at most
 * 64 MiB at a time, flushing between passes.  Policy in doc/policies.md
 * ("Warm restarts").
 */
void ssd_close_writedown(struct ssd *s)
{
	uint64_t budget, total = 0, got, written0, written, refused, late;
	uint64_t t0;
	if (s->cfg.close_wd_ms == 0 || !s->dram)
		return;
	ssd_flush(s);
	budget = ssd_room_bytes(s);
	written0 = atomic_load_explicit(&s->wd_written_bytes, memory_order_relaxed);
	atomic_store_explicit(&s->close_full, false, memory_order_relaxed);
	atomic_store_explicit(&s->close_refused, 0, memory_order_relaxed);
	atomic_store_explicit(&s->close_late, 0, memory_order_relaxed);
	t0 = kvt_now_ns();
	/* A pass (up to 64 MiB, or ssd.writedown_max) on a slow device took
	 * its own time past the limit until session 45: the writer now drops
	 * the stop's writes it takes after it (test_fullstop, its fourth
	 * part). */
	atomic_store_explicit(&s->close_deadline_ns, t0 + s->cfg.close_wd_ms * 1000000u,
			      memory_order_relaxed);
	for (;;) {
		got = dram_writedown_pass(s->dram, &budget, UINT64_C(64) << 20);
		ssd_flush(s);
		total += got;
		/* close_full: a write found no free room (the file system
		 * holds fewer segments than counted): the rest stays DRAM's. */
		if (got == 0 || budget == 0 ||
		    atomic_load_explicit(&s->close_full, memory_order_relaxed) ||
		    (kvt_now_ns() - t0) / 1000000u >= s->cfg.close_wd_ms)
			break;
	}
	/* What reached the SSD, not what was queued: a block refused or
	 * failed comes back to DRAM, and the next pass would count it again
	 * (until session 45 the line said "wrote 62 MiB" for a DRAM of
	 * 19 MiB, 3 MiB of it on disk). */
	atomic_store_explicit(&s->close_deadline_ns, 0, memory_order_relaxed);
	written = atomic_load_explicit(&s->wd_written_bytes, memory_order_relaxed) - written0;
	refused = atomic_load_explicit(&s->close_refused, memory_order_relaxed);
	late = atomic_load_explicit(&s->close_late, memory_order_relaxed);
	if (late && !refused)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "close: wrote %llu MiB of DRAM blocks down to SSD in ssd.close_writedown_ms "
			 "(%llu ms); the rest of DRAM's blocks are not kept",
			 (unsigned long long)(written >> 20),
			 (unsigned long long)s->cfg.close_wd_ms);
	else if (refused)
		kvt_logf(s->log, KVT_LOG_WARN,
			 "close: wrote %llu MiB of DRAM blocks down to SSD, all its free room "
			 "took (the file system holds %u of its %u segments); the rest of "
			 "DRAM's blocks are not kept", (unsigned long long)(written >> 20),
			 ssd_room_slots(s), s->slot_count);
	else if (total)
		kvt_logf(s->log, KVT_LOG_INFO, "close: wrote %llu MiB of DRAM blocks down to SSD",
			 (unsigned long long)(written >> 20));
}

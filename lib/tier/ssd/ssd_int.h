/*
 * ssd_int.h - what ssd.c (the tier: write-down, promotion), ssd_idx.c
 * (the index, synchronous I/O, segment files) and ssd_recover.c
 * (checkpoints and recovery) share.  Nothing else includes it.
 */
#ifndef KVT_SSD_INT_H
#define KVT_SSD_INT_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "kvt_keyhash.h"
#include "ssd.h"
#include "ssdfmt.h"

#define SSD_SHARDS 16
/* ssd_close checks a shard's slot lists (ssd_idx_check_slots) up to this
 * many entries: every test's index, not a large one's stop. */
#define SSD_CLOSE_CHECK_MAX (1u << 16)
/* Write-down bytes the writer keeps placed in the log and in flight
 * (ssd.writedown_window, this if unset); the rest of a backlog waits
 * unplaced, so a tombstone passes it (ssd.c "Deletes jump the queue").
 * 8 MiB: 8 ms of a 1 GB/s device, 4x the I/O engine's 8 writes in flight
 * of 256 KiB, so that a writer descheduled for a few ms does not leave the
 * device idle (4 MiB cost ~30 % of write-down throughput on a loaded
 * 2-core VM: bench/RESULTS.md 2026-12-04, tomb26). */
#define SSD_WD_WINDOW (UINT64_C(8) << 20)
/* Tombstones that failed 3 times kept to retry at each sync, at most
 * (ssd.c "A tombstone that will not go down"). */
#define SSD_TOMB_PARKED_MAX 4096u
#define SSD_DIR "ssd"
#define SSD_CKPT "checkpoint"
#define SSD_ID "id"

enum { SEG_FREE = 0, SEG_OPEN, SEG_SEALED, SEG_BAD };
enum {
	E_PENDING = 0x1,
	E_READ = 0x2,
	E_READ2 = 0x4, /* promoted twice or more */
	E_CARRY = 0x8,  /* with E_PENDING: kept while its record is carried (ssd.c) */
	/* with E_PENDING: a miss whose record is still on disk -- a block of
	 * a quarantined segment (until the store reopens: ssd_idx_kill), or
	 * one a promotion took out of the SSD (until its segment is evicted
	 * or a newer record replaces it: ssd_idx_kill_key), or one whose
	 * write failed but may have landed (ssd.c wd_finish) -- kept so that
	 * a delete of it still logs its tombstone */
	E_DEAD = 0x10,
	/* Format 3 (doc/ssd-format.md "Format 3: batch headers"; written
	 * with ssd.format=3, ssd.c "Batches"): off_512/len_512 name a
	 * batched value alone, checked by value_crc; E_SEALED_VALUE its sealed flag, which
	 * a framed record keeps in its header. */
	E_BATCHED = 0x20,
	E_SEALED_VALUE = 0x40,
	/* a promotion's read of the record is in flight: reclamation waits
	 * for it before it carries or drops the record (ssd.c promote_settle;
	 * one promotion a block at a time: s->pf[]) */
	E_PINNED = 0x80,
};
/* T_CARRY: a hot record of a reclaimed segment, read back, written again
 * at the log's head (ssd.c, "Reclamation"). */
/* T_DSYNC: a delete's sync (ssd_sync_deletes), handed by the writer to
 * the sync thread (ssd.c "A delete's sync beside the writer"). */
enum { T_PUT = 1, T_DELETE, T_CLEAR, T_FLUSH, T_CKPT, T_CARRY, T_DSYNC };
/* wd_enqueue's lanes: the write-down queue's tail; the urgent lane's tail
 * (tombstones, a delete's sync); the urgent lane's head (the writer's own
 * tombstone for a write-down that lost to a delete: next, before any sync). */
enum { WD_BACK = 0, WD_URGENT, WD_NOW };

struct ssd_entry {
	struct ssd_entry *hnext;
	uint64_t seq;
	uint64_t value_len;
	uint64_t generation;  /* of the segment holding the record */
	uint32_t ns;
	uint32_t slot;
	uint32_t off_512, len_512;
	uint16_t part_count;
	uint8_t flags;        /* E_* */
	uint8_t key_len;
	uint8_t key[KVT_KEY_MAX];
	/* E_BATCHED: ssd_value_crc of the value and its identity; else 0.
	 * It fills the 4 bytes of padding the fields above leave: */
	uint32_t value_crc;
	/* Its shard's list of the entries naming its slot (ssd_idx.c "One
	 * segment's entries"): the next, and the link pointing at it (the
	 * list's head or the previous entry's snext); both NULL when slot
	 * is past the tier's slots (never swept by slot). */
	struct ssd_entry *snext, **sprev;
};
/* The SSD index's memory per block: 120 bytes of entry before format 3
 * and after (116 of fields, then value_crc in the padding), 136 since
 * session 45 (the slot list's two links: an eviction visits its
 * segment's entries, not the index), plus its share of the shards'
 * bucket arrays and slot heads.  With glibc's malloc the allocation
 * grows from 128 to 144 bytes (one link alone would cost as much). */
_Static_assert(sizeof(struct ssd_entry) <= 136, "an SSD index entry stays within 136 bytes");

/* A walk of a whole shard that removes looks at this many chains and
 * entries (about; it ends a chunk between chains) per hold of the shard's
 * lock (ssd_idx.c "Chunked walks"). */
#define SSD_IDX_SWEEP_CHUNK 4096u

struct ssd_shard {
	pthread_mutex_t lock;
	struct ssd_entry **buckets;
	uint32_t mask;
	/* During a growth (ssd_idx.c "Index growth"): the table being emptied
	 * into buckets, old_mask + 1 chains, of which those below old_next
	 * were moved; NULL otherwise. */
	struct ssd_entry **old;
	uint32_t old_mask, old_next;
	/* A doubling is due (set by a put under the lock); one thread at a
	 * time allocates its table unlocked (grow_busy): ssd_idx.c "Index
	 * growth" */
	_Atomic bool grow_due, grow_busy;
	/* Bumped (under the lock) whenever a table is installed or the old
	 * one freed: a chunked walk of the whole shard, which drops the lock
	 * between chunks, sees its tables changed (ssd_idx.c "Chunked
	 * walks"). */
	uint32_t tab_gen;
	uint64_t count;
	uint64_t dead;        /* of which E_DEAD (not blocks: ssd.blocks) */
	uint64_t bytes;       /* value bytes of published entries */
	uint64_t rec_bytes;   /* their records' bytes on flash (header, value,
			       * padding to SSD_REC_ALIGN): ssd.live_record_bytes */
	/* slot_count heads: the shard's entries naming each slot, linked by
	 * snext/sprev (ssd_idx.c "One segment's entries").  Set at open
	 * before any entry exists. */
	struct ssd_entry **slot_heads;
} __attribute__((aligned(64)));

struct ssd_seg {
	int fd;               /* -1 until the slot's file is opened; set once
			       * (atomic store), read without a lock */
	int state;            /* SEG_* */
	_Atomic int bad_err;  /* an I/O error seen here (set from any thread):
			       * the writer quarantines the slot */
	/* Tombstones a quarantine would lose (ssd_idx.c "Tombstones at
	 * risk"), counted over the slot's life:
	 * tomb_placed  delete and clear records placed here (seg_lock);
	 * tomb_synced  of those, the first tomb_synced are durable: an
	 *              fdatasync that began after they and every write placed
	 *              before them completed succeeded (ssd_sync_all_prio);
	 * tomb_hole    0, or where the first write here that failed or may be
	 *              lost (a failed fdatasync) lies among the tombstones
	 *              (ssd_seg_hole): a recovery walk stops there, so the
	 *              tombstones after it are lost unless a summary listing
	 *              them is durable (seal_synced: this generation's seal
	 *              succeeded and an fdatasync after it did). */
	_Atomic uint64_t tomb_placed, tomb_synced, tomb_hole;
	_Atomic bool seal_synced;
	bool sealed_ok;       /* this generation's seal succeeded (seg_lock) */
	uint64_t torn_off;    /* 0, or where the first value recovery's walk left
			       * out as torn lies (ssd_recover.c rec_walk_sound):
			       * while unsealed, the checkpoint's write point
			       * for the slot goes no further (seg_lock) */
	/* wd_lock: tombstone writes completed here; the writes in flight
	 * here placed when tomb_placed was infl_tag (infl_cur) and before
	 * (infl_old): with infl_old 0, every write before the newest
	 * tombstone has completed (ssd_sync_all_prio) */
	uint64_t tomb_done, infl_tag;
	uint64_t infl_cur, infl_old;
	_Atomic bool broken;  /* a write here failed, leaving a hole that would
			       * stop a recovery walk: the writer seals it */
	bool direct;          /* O_DIRECT in effect (seg_lock; set with rec_align) */
	bool dio_ok;          /* the file was opened with O_DIRECT (set once) */
	uint32_t dio_need;    /* the file's O_DIRECT offset alignment (statx
			       * STATX_DIOALIGN), 0: unknown (trusted); set once */
	uint32_t rec_align;   /* its generation's record alignment: SSD_REC_ALIGN or
			       * SSD_REC_ALIGN_4K (seg_lock; ssd_seg_set_align) */
	/* its generation is of format 3 (segment header version
	 * SSD_SEG_VERSION_BATCH): batches among its records, a version-3
	 * summary.  Set by recovery from the header, and for every
	 * generation this open starts with ssd.format=3 (ssd.c "Batches"). */
	bool batches;
	/* a write completed (or a record was placed) since the last
	 * fdatasync: set by any thread, taken by ssd_sync_all */
	_Atomic bool dirty;
	/* ssd_sync_all's fdatasyncs of this file in flight (raised under
	 * seg_lock with the flag taken, lowered once the result is judged):
	 * an fdatasync under seg_lock that overlaps one counts nothing
	 * durable (ssd_idx.c ssd_seg_fsync_locked) */
	_Atomic uint32_t syncs_out;
	bool noroom;          /* free, and its file could not be allocated
			       * (ENOSPC): not opened until the room retry
			       * (seg_lock; ssd.c "Room") */
	/* free, its header damaged over records whose tombstones recovery
	 * applied: voided by ssd_void_headerless once a checkpoint reflects
	 * them (ssd_recover.c "Headerless") */
	bool hdr_void;
	uint64_t generation;  /* 0: never written */
	uint64_t write_off;   /* bytes allocated so far */
	uint64_t sum_bytes;   /* summary bytes the entries so far need */
	uint64_t rec_end;     /* sealed: where its records end (its summary
			       * starts): ssd.log_record_bytes */
	struct ssd_sum_entry *sum; /* open segment: one entry per record */
	size_t sum_count, sum_cap;
	/* Progressive reuse (ssd.c, "Reclamation"): the open segment took
	 * this slot from the sealed generation old_gen, whose records past
	 * write_off are still intact and indexed; each is reclaimed just
	 * before the new generation's writes reach it (old_next: the first
	 * summary entry not yet reclaimed), the rest when the segment seals.
	 * old_gen 0: none. */
	uint64_t old_gen;
	struct ssd_sum_entry *old_sum;
	size_t old_count, old_next;
	size_t old_cap;       /* entries old_sum was allocated with: what its
			       * free counts off mem.meta_bytes (old_count
			       * left the rest counted for good, a segment's
			       * reuse at a time) */
	uint64_t old_budget;  /* reinsert budget left of the old segment */
	uint64_t old_dropped; /* index entries dropped so far */
};

/* The version of a segment's summary entries (and of its header). */
static inline uint32_t ssd_seg_sum_version(const struct ssd_seg *g)
{
	return g->batches ? SSD_SUM_VERSION_BATCH : SSD_FMT_VERSION;
}

/*
 * One record's I/O as single-buffer requests -- the header, then each DRAM
 * run -- so the engine can issue the runs as READ_FIXED/WRITE_FIXED from
 * the registered DRAM arena (vectored fixed I/O does not exist in the
 * io_uring of liburing 2.3).  done runs once, when the last part lands,
 * with res = total bytes or the first error.
 */
struct multi_io {
	struct io_req req[1 + DRAM_MAX_RUNS];
	unsigned n;
	_Atomic unsigned left;
	_Atomic int64_t total;
	_Atomic int64_t err;
	void (*done)(struct multi_io *m, int64_t res);
	void *ctx;
};

struct wd_task {
	struct wd_task *next;
	int type;             /* T_* */
	struct ssd *s;
	struct dram_item *item; /* T_PUT: pinned by admission */
	uint32_t ns;
	struct kvt_key key;
	uint64_t value_len;
	/* seq: a placed write's; a tombstone logged again (T_DELETE,
	 * T_CLEAR) has its first placement's (or the one its refused
	 * placement took) before it is placed, and keeps it (ssd.c "A
	 * tombstone that will not go down") */
	uint64_t seq, generation, rec_len;
	uint32_t slot, off_512, part_count;
	uint8_t *hdr;         /* aligned record header (T_CARRY: the whole record) */
	uint32_t hdr_len;
	struct iovec iov[1 + DRAM_MAX_RUNS];
	struct multi_io io;
	uint64_t sync_epoch;  /* a placed write: ssd.sync_epoch when placed */
	uint64_t tomb_tag;    /* a placed write: its segment's tomb_placed then */
	/* T_FLUSH / T_CKPT / T_DSYNC: a waiter */
	pthread_mutex_t *wait_lock;
	pthread_cond_t *wait_cond;
	int *wait_done;
	int wait_status;
	int retries;          /* T_DELETE, T_CLEAR: times the record was re-logged */
	bool parked_tried;    /* T_FLUSH, T_DSYNC: has queued the parked tombstones once */
	uint8_t behind;       /* T_FLUSH: times it went behind reclamation's writes
			       * (wd_behind_carries, at most WD_BEHIND_MAX) */
	bool rewrite;         /* T_PUT from a DRAM eviction: rewrite an old copy */
	bool reinsert;        /* T_PUT queued by reclamation (a DRAM copy written
			       * again): a flush waits for it (wd_behind_carries) */
	uint32_t wd_group;    /* T_PUT: the quota group its bytes count under in
			       * wd_group_bytes (ssd_admit's shares), 0 none */
	bool sheddable;       /* T_PUT counted against wd_max: another group's
			       * may take its place while queued (wd_preempt_locked) */
	bool close;           /* T_PUT of a graceful stop's write-down
			       * (DRAM_ADMIT_CLOSE): never evicts (seg_open_slot_locked) */
	/* T_PUT placed as a value of a batch (ssd.format=3, ssd.c "Batches"):
	 * placed though hdr is NULL (the batch owns its header), entered
	 * E_BATCHED */
	bool batched;
	/* T_CARRY: the record read back into hdr (hdr_len bytes: its header,
	 * re-encoded in place, then the value), its part table, and the seq
	 * of the index entry kept PENDING for it meanwhile.  In a batch
	 * (batched: only the value goes out, from hdr + its header's
	 * length): carry_gone if a delete took that entry after the batch
	 * took the carry (its bytes written, named by no entry). */
	struct ssd_part *carry_parts;
	uint64_t carry_seq;
	uint32_t carry_flags;  /* SSD_REC_F_* */
	bool carry_gone;
};

/* A get that found the same block's promotion in flight (ssd_promote):
 * answered when that promotion ends, with its own ref on the item. */
struct promote_waiter {
	struct promote_waiter *next;
	tier_got_fn cb;
	void *ctx;
};

#define SSD_PF_BUCKETS 64 /* in-flight promotions table (single flight) */

struct promote_task {
	struct ssd *s;
	struct multi_io io;
	struct iovec iov[1 + DRAM_MAX_RUNS];
	uint8_t *hdr;
	uint32_t hdr_len;
	uint32_t rec_align;       /* the record's layout (ssd_rec_align_of) */
	struct dram_item *item;
	uint32_t ns;
	struct kvt_key key;
	uint64_t seq, generation, value_len, rec_len;
	uint32_t slot;
	uint16_t part_count;
	tier_got_fn cb;
	void *ctx;
	uint64_t start_ns;
	struct ssd_copy *copy;    /* ssd_read_copy: read here, item NULL */
	tier_copy_fn copy_cb;
	uint64_t h;               /* ssd_hash of (ns, key) */
	struct promote_task *pf_next;     /* in s->pf[]: pf_lock */
	struct promote_waiter *waiters;   /* joined gets: pf_lock */
	bool in_flight;           /* in s->pf[] (promotions only, not copies) */
	bool first;               /* the record's first read (E_READ was clear) */
	bool demand;              /* a get's (IO_PRIO_DEMAND), not a prefetch */
	bool pinned;              /* its entry E_PINNED (promote_settle) */
	/* E_BATCHED (format 3): the I/O is the value alone (hdr_len 0),
	 * checked by value_crc; sealed from E_SEALED_VALUE. */
	bool batched, sealed;
	uint32_t value_crc;
};

struct ssd {
	struct ssd_config cfg;
	uint64_t hash_secret;  /* random per open (getrandom), in every index hash's seed */
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	struct ns_registry *reg;
	struct dram *dram;
	struct kvt_io *io;
	int dir_fd;                 /* <store>/ssd */
	uint8_t store_id[16];
	struct ssd_shard shards[SSD_SHARDS];

	pthread_mutex_t seg_lock;
	const struct ssd_evict_hook *evict_hook; /* seg_lock; NULL: none */
	void *evict_ctx;
	struct ssd_seg *segs;
	uint32_t slot_count;
	int32_t open_slot;          /* -1: none */
	/* segment files of this store that this open does not read (another
	 * ssd.segment, a slot past the count) remain to be voided before its
	 * first record (ssd_void_unread_locked); seg_lock */
	bool unread_pending;
	uint64_t next_seq, next_gen;
	uint64_t *clear_seq;        /* per namespace id; [0] is "all" */
	uint32_t clear_cap;
	uint32_t seals_since_ckpt;
	/* writer: a segment was quarantined since the last checkpoint, which
	 * is written at once (ssd.c seg_quarantine_pending) */
	bool ckpt_due;
	bool degraded;              /* ENOSPC: write-downs shed until retry */
	/* Room (ssd.c): slots marked noroom, when the last was, and what the
	 * writer says once seg_lock is released (ROOM_SAY_*). */
	_Atomic uint32_t noroom_slots; /* written under seg_lock, read anywhere */
	uint64_t noroom_at_ns;      /* seg_lock */
	_Atomic int room_say;
	/* The graceful stop's write-down (ssd_close_writedown): open_keep is
	 * set (seg_lock) around the reservation of its writes, so that
	 * opening a segment for them never evicts or reuses one; close_full
	 * once one was refused for it (the log's free room is used up, or
	 * the file system had less than the stop counted on): the write-down
	 * then stops.  close_refused: the bytes refused. */
	bool open_keep;
	_Atomic bool close_full;
	_Atomic uint64_t close_refused;
	/* ... and its end (kvt_now_ns, 0: none): a write of it the writer
	 * takes later is not made (close_late: its bytes), so the stop keeps
	 * to ssd.close_writedown_ms within one write, not one pass. */
	_Atomic uint64_t close_deadline_ns;
	_Atomic uint64_t close_late;
	/* The log has no free room: the segment open now was had by evicting
	 * or reusing the oldest (set at each open under seg_lock, at ssd_open
	 * if the next open must evict and the index holds a block; cleared by
	 * a clear that empties the index, ssd_clear; read unlocked by DRAM's
	 * write-down filter, ssd_log_full). */
	_Atomic bool log_full;
	bool dio_warned;            /* ssd_seg_set_align said it once (seg_lock or recovery) */
	/* Record alignment of every segment this open starts (fixed at
	 * ssd_open from ssd.dio_align and the device: ssd_idx.c "Record
	 * alignment"), SSD_REC_ALIGN or SSD_REC_ALIGN_4K. */
	uint32_t rec_align;
	uint64_t degraded_at_ns;
	pthread_mutex_t ns_lock;    /* leaf: guards persistent[] (taken under DRAM locks) */
	uint8_t *persistent;        /* per namespace id: write down at put */
	uint32_t persistent_cap;

	pthread_mutex_t pf_lock;    /* leaf: guards pf[] and its tasks' waiters */
	struct promote_task *pf[SSD_PF_BUCKETS]; /* promotions in flight, by key */

	pthread_mutex_t wd_lock;
	pthread_cond_t wd_cond;     /* work queued, stop, or an in-flight write finished */
	pthread_cond_t pin_cond;    /* an E_PINNED entry unpinned (with its shard's lock) */
	/* Two lanes (ssd.c "Deletes jump the queue"): write-downs, flushes
	 * and checkpoints in wd_head; tombstones and the syncs of the deletes
	 * waiting on them in wd_uhead, taken first. */
	struct wd_task *wd_head, *wd_tail;
	struct wd_task *wd_uhead, *wd_utail;
	uint64_t wd_bytes;          /* queued + in flight */
	uint64_t wd_victim_bytes;   /* of which DRAM victims (bounded by DRAM, not wd_max) */
	/* Of the rest, each quota group's (KVT_QUOTA_GROUPS entries, with
	 * cfg.quota only): a group holding SSD_WD_GROUP_SHARE of wd_max takes
	 * more only while as much stays free (ssd.c ssd_admit) */
	uint64_t *wd_group_bytes;
	/* Write-downs taken off the queue for another group's
	 * (wd_preempt_locked): the writer lets their DRAM blocks go */
	struct wd_task *wd_dropped;
	uint64_t wd_inflight;       /* writes submitted, not completed */
	uint64_t wd_placed_bytes;   /* records of write-downs (T_PUT, T_CARRY) submitted,
				     * not completed: at most about cfg.wd_window_bytes */
	uint64_t wd_placed_values;  /* their values' bytes (of wd_bytes: the rest is
				     * queued, ssd.c "Room for a batch") */
	/* Tombstones whose write failed (ssd.c "A tombstone that will not
	 * go down"): queued again and not yet written (a sync waits behind
	 * them); parked after 3 tries, each sync tries them once more and
	 * fails while any is left; past SSD_TOMB_PARKED_MAX, dropped: every
	 * later delete sync fails. */
	uint64_t tomb_retrying, tomb_parked_n;
	struct wd_task *tomb_parked;
	bool tomb_dropped;
	/* Deletes' syncs, off the writer (ssd.c "A delete's sync beside the
	 * writer"): T_DSYNC tasks the writer passed on (sync_new); those
	 * waiting for the writes in flight at their boundary (sync_armed:
	 * sync_before of them, placed in an epoch before sync_epoch); the
	 * thread that then fdatasyncs for them.  wd_lock. */
	struct wd_task *sync_new, *sync_armed;
	uint64_t sync_epoch, sync_before;
	/* failed writes placed before a boundary (broken_marks), and of them
	 * those the writer had seen when it last passed a sync on, its open
	 * segment sealed if one was there (broken_sealed) */
	uint64_t broken_marks, broken_sealed;
	bool sync_stop, sync_started;
	pthread_cond_t sync_cond;   /* sync_new, sync_before reached 0, sync_stop */
	pthread_t sync_thread;
	pthread_mutex_t sync_run_lock; /* one ssd_sync_all at a time (ssd_idx.c) */
	bool wd_stop;
	bool wd_hold;               /* tests: the writer takes no write-down (ssd_hold_writes) */
	unsigned wd_plugs;          /* DRAM shards sending a burst of victims (ssd_plug) */
	/* Puts parked for room (ssd_room_watch), FIFO; all share one bound,
	 * so the head's deadline is the earliest.  wd_lock. */
	struct ssd_room_waiter *room_head, *room_tail;
	_Atomic unsigned bad_marks; /* seg_mark_bad calls: the writer reacts */
	pthread_t wd_thread;
	bool wd_started;

	/* measured read throughput (EWMA), bytes per second; guarded by wd_lock */
	double read_bps;
	bool read_measured;

	/* statistics (relaxed atomics) */
	_Atomic uint64_t wd_queued, wd_written, delete_syncs, delete_sync_rounds, wd_written_bytes,
		wd_shed, wd_skipped, wd_errors, tombstones, reads, read_bytes, read_misses,
		crc_errors, hdr_errors, io_errors, seg_sealed, seg_evicted, evicted_blocks,
		reinserted, quarantined, ckpts, enospc, promote_full, promote_relocated,
		reclaim_read_waits, copy_reads, part_reads, part_relocated, reclaim_leftovers,
		evicted_handed, carried, carried_bytes, carry_lost, wd_put_waits, wd_put_timeouts,
		dropped_promoted, sealed_records, evicted_unread, evicted_over_budget, evicted_dead,
		room_capped, batches, batched_blocks, batched_carried, carried_in_batches,
		wd_preempted;
	/* One segment's index entries dropped or killed (ssd_idx_sweep and
	 * ssd_idx_kill of one slot): calls, entries looked at, nanoseconds
	 * in all, and the longest. */
	_Atomic uint64_t slot_sweeps, slot_sweep_visited, slot_sweep_ns, slot_sweep_max_ns;
	/* Entries found on a slot's list naming another slot (a sweep, a
	 * kill), or missing from their list (the close's check): a bug,
	 * whose entries an eviction would leave behind.  Tests assert 0. */
	_Atomic uint64_t slot_list_errors;
	/* The index's growth (ssd_idx.c "Index growth"): tables doubled,
	 * the longest time one put spent growing a shard's table under its
	 * lock, ns, and the most entries one put moved to a new table. */
	_Atomic uint64_t idx_grows, idx_grow_max_ns, idx_grow_max_moved;
	/* Walks of the whole index that remove (a namespace's clear,
	 * recovery's sweeps: ssd_idx.c "Chunked walks"): the longest one
	 * chunk held a shard's lock, ns, the most chains and entries one
	 * looked at, and the walks started over after a doubling began
	 * under them; the chunks, and their holds' ns in all. */
	_Atomic uint64_t idx_sweep_max_hold_ns, idx_sweep_max_chunk, idx_sweep_restarts;
	_Atomic uint64_t idx_sweep_chunks, idx_sweep_hold_ns;
	/* Tests only (test_ssd clear_grow): called by such a walk between
	 * two chunks, the shard's lock released; NULL: none. */
	void (*sweep_gap_hook)(void *ctx, struct ssd_shard *sh);
	void *sweep_gap_ctx;
	/* ssd/ fsynced for a segment file this open created (ssd_idx.c
	 * ssd_seg_open_file), before anything was written to it */
	_Atomic uint64_t seg_dir_syncs;
	/* ssd/ fsynced for the segment files this open found (once) */
	_Atomic bool seg_dir_synced;
	/* write-downs of a graceful stop shed (ssd.c wd_shed_count) */
	_Atomic uint64_t stop_wd_shed;
	uint64_t rec_ckpt_entries, rec_records, rec_segments, rec_ns, rec_dropped;
	uint64_t rec_old_format;     /* segments of an older format version, dropped */
	uint64_t rec_twins_used;     /* walks gone on past a damaged tombstone copy */
	uint64_t rec_torn;           /* values past the checkpoint failing their CRC,
				      * left out (ssd_recover.c "Values torn") */
	uint64_t rec_ckpt_gone;      /* checkpoint entries past their segment file's end */
	bool rec_ckpt_damaged;       /* recovery ignored a damaged checkpoint: open
				      * replaces it (ssd_recover.c rec_load_ckpt) */
	uint64_t rec_hdr_tombs;      /* tombstones applied from segments whose header
				      * was damaged (ssd_recover.c "Headerless") */
	uint64_t rec_other_size;     /* segments of another ssd.segment, dropped */
	uint64_t rec_other_seg;      /* the first one's segment size */
};

/* ------------------------------------------------------------------------
 * Small helpers
 */

enum { ROOM_SAY_NONE = 0, ROOM_SAY_CAPPED, ROOM_SAY_GREW };

/* The slots the log may use: all, less those the file system had no room
 * for (ssd.c "Room"). */
static inline uint32_t ssd_room_slots(const struct ssd *s)
{
	return s->slot_count - atomic_load_explicit(&s->noroom_slots, memory_order_relaxed);
}

/* CLOCK_REALTIME in ns: a generation's created_ns on disk.  Timeouts and
 * deadlines use kvt_now_ns (kvt_int.h), and kvt_deadline for the timed
 * waits on wd_cond (its default clock). */
static inline uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Index hash: XXH3 seeded by the namespace's seed under the store's random
 * secret (kvt_keyhash.h).  Never on disk: recovery rehashes every key. */
static inline uint64_t ssd_hash(const struct ssd *s, uint32_t ns, const struct kvt_key *k)
{
	return kvt_key_hash(s->hash_secret, ns, k->bytes, k->len);
}

static inline struct ssd_shard *shard_of(struct ssd *s, uint64_t h)
{
	return &s->shards[(h >> 40) % SSD_SHARDS];
}

/* A shard's hash chains, both tables' during a growth, for a walk of the
 * whole index: chains 0 .. ssd_idx_chains() - 1.  Locked. */
static inline uint64_t ssd_idx_chains(const struct ssd_shard *sh)
{
	return (uint64_t)sh->mask + 1 + (sh->old ? (uint64_t)sh->old_mask + 1 - sh->old_next : 0);
}

static inline struct ssd_entry **ssd_idx_chain(struct ssd_shard *sh, uint64_t i)
{
	return i <= sh->mask ? &sh->buckets[i] : &sh->old[sh->old_next + (i - sh->mask - 1)];
}

static inline uint64_t align4k(uint64_t v)
{
	return (v + SSD_ALIGN - 1) & ~(uint64_t)(SSD_ALIGN - 1);
}

/* Records and offsets in a segment: multiples of its record alignment
 * (SSD_REC_ALIGN or SSD_REC_ALIGN_4K). */
static inline uint64_t align_rec(uint64_t v, uint32_t align)
{
	return (v + align - 1) & ~(uint64_t)(align - 1);
}

#define A(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)
#define AN(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)
#define AL(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* ssd_idx.c: below ssd.c and ssd_recover.c */
/* Where (ns, k) with hash h is or would be linked in sh.  Locked. */
struct ssd_entry **ssd_idx_slot(struct ssd_shard *sh, uint64_t h, uint32_t ns,
				const struct kvt_key *k);
/* Unlink *pp (an entry of sh) and free it.  Locked. */
void ssd_idx_remove_locked(struct ssd *s, struct ssd_shard *sh, struct ssd_entry **pp);
/* Insert or replace (if newer) under the lock of h's shard, taken here;
 * uses *spare (then NULL) instead of allocating, if given.  Then, with
 * the lock released, begins a doubling of the shard's table if one is due
 * (ssd_idx.c "Index growth").  0, KVT_EXISTS, -ENOMEM. */
int ssd_idx_put(struct ssd *s, uint64_t h, const struct ssd_entry *src,
		struct ssd_entry **spare);
/* At close (and a test, sh's lock held): is every entry of sh on its
 * slot's list, and only those?  Returns the entries wrong, each once, added
 * to ssd.slot_list_errors and logged (a bug: an eviction would leave
 * entries behind). */
uint64_t ssd_idx_check_slots(struct ssd *s, struct ssd_shard *sh);
/* Move e (an entry of sh) to slot's list and name slot.  Locked. */
void ssd_idx_reslot_locked(struct ssd *s, struct ssd_shard *sh, struct ssd_entry *e,
			   uint32_t slot);
bool ssd_idx_remove_key(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t below);
/* Remove (ns, k)'s entry if it is dead (E_DEAD); whether it was. */
bool ssd_idx_remove_dead(struct ssd *s, uint32_t ns, const struct kvt_key *k);
uint64_t ssd_idx_sweep(struct ssd *s, uint32_t ns, uint32_t slot, uint64_t gen, uint64_t below);
/* Remove the entries of slot's generation gen (but those kept for a carry)
 * that the summary v[0..n) (rising offsets) does not name at their offset
 * and key; returns how many were published.  Progressive reuse, before the
 * new generation's first write (ssd.c seg_reuse_oldest_locked). */
uint64_t ssd_idx_sweep_unnamed(struct ssd *s, uint32_t slot, uint64_t gen,
			       const struct ssd_sum_entry *v, size_t n);
/* The entries of slot's generation gen become misses, kept (E_DEAD);
 * returns how many were published. */
uint64_t ssd_idx_kill(struct ssd *s, uint32_t slot, uint64_t gen);
/* The published entry of (ns, key) at seq becomes a miss, kept (E_DEAD):
 * a promotion's drop.  Whether it was there. */
bool ssd_idx_kill_key(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t seq);
/* Plain pread of exactly len bytes (recovery, reclamation), noted for
 * io_align_check. */
int ssd_pread_full(struct ssd *s, int fd, void *buf, size_t len, uint64_t off);
int64_t ssd_io_sync(struct ssd *s, int op, int fd, uint64_t off, void *buf, size_t len);
int ssd_seg_open_file(struct ssd *s, uint32_t slot, bool create);
/* The slot's generation lays records out at align: O_DIRECT on its file
 * if the device allows it at that alignment, else the page cache.
 * seg_lock held (or recovery). */
void ssd_seg_set_align(struct ssd *s, uint32_t slot, uint32_t align);
/* Resolve s->rec_align from ssd.dio_align and the device (ssd_open). */
void ssd_rec_align_pick(struct ssd *s);
/* Room in g->sum for n more entries (grown by doubling): 0 or -ENOMEM. */
int ssd_seg_sum_room(struct ssd *s, struct ssd_seg *g, size_t n);
void ssd_seg_sum_free(struct ssd *s, struct ssd_seg *g);
void ssd_void_headerless(struct ssd *s);
void ssd_seg_seal_locked(struct ssd *s);
/* fdatasync the slot's file from under seg_lock, taking its dirty flag
 * first and moving tomb_synced on success (ssd_idx.c): 0 or -EIO. */
int ssd_seg_fsync_locked(struct ssd *s, uint32_t slot);
/* Write the slot's segment header.  Writer thread. */
int ssd_seg_write_hdr(struct ssd *s, uint32_t slot, uint64_t sum_off, uint64_t sum_len);
/* An I/O error in a slot, from any thread: the writer quarantines it;
 * tombstones there not yet durable are lost (ssd_tombs_lost). */
void ssd_seg_mark_bad(struct ssd *s, uint32_t slot, int err);
/* The writer quarantined slot: the same look at its tombstones, for any
 * placed there between its mark and its quarantine. */
void ssd_seg_tombs_check(struct ssd *s, uint32_t slot, int err);
/* A write in g placed when its tomb_placed was tag (a tombstone itself:
 * tomb) failed, or may be lost: a hole before the tombstones placed after
 * it.  Kept: the first in the log, as 1 + 2 tag + !tomb (a tombstone
 * with tag k lies before a put tagged k).  Any thread. */
static inline void ssd_seg_hole(struct ssd_seg *g, uint64_t tag, bool tomb)
{
	uint64_t code = 1 + 2 * tag + !tomb, h = atomic_load(&g->tomb_hole);
	while ((h == 0 || code < h) && !atomic_compare_exchange_weak(&g->tomb_hole, &h, code))
		;
}
int ssd_sync_all(struct ssd *s);
/* Tombstones were lost (why: what happened): every later delete and
 * flush fails, as for a dropped tombstone, until the store reopens
 * (ssd.c). */
void ssd_tombs_lost(struct ssd *s, const char *why);
/* The same, its fdatasyncs queued at prio (IO_PRIO_*): a delete's sync
 * passes the write-downs queued in the engine (ssd.c sync_main). */
int ssd_sync_all_prio(struct ssd *s, int prio);

/* ssd_recover.c */
int ssd_ckpt_write(struct ssd *s);
void ssd_clear_raise(struct ssd *s, uint32_t ns, uint64_t seq);
int ssd_recover(struct ssd *s);
/* Read ssd/id, or make and persist a random one. */
int ssd_store_id(struct ssd *s);
void ssd_seal_leftovers(struct ssd *s);
/* Void the segment files of this store that this open does not read (their
 * header zeroed and synced), so that no tombstone this open logs is undone
 * by their records when a later open reads them.  Before the first new
 * segment of the open; seg_lock held.  0, or the first error (retried at
 * the next new segment). */
int ssd_void_unread_locked(struct ssd *s);

#endif

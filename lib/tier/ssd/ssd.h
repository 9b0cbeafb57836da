/*
 * ssd.h - the SSD tier (G3): a log-structured flash store under the DRAM
 * tier (ssd.c; format in doc/ssd-format.md, design in doc/ssd.md).
 */
#ifndef KVT_SSD_H
#define KVT_SSD_H

#include "io.h"
#include "dram.h"
#include "kvt_int.h"
#include "tier.h"

struct ssd;

/* VICTIM (default): what DRAM evicts goes down (doc/policies.md);
 * SECOND: a block goes down on its second access; ALWAYS: every put. */
enum { SSD_ADMIT_SECOND = 0, SSD_ADMIT_ALWAYS = 1, SSD_ADMIT_VICTIM = 2 };

struct ssd_config {
	uint64_t capacity;       /* bytes, rounded down to whole segments */
	uint64_t seg_size;       /* bytes per segment, multiple of 4096, >= 1 MiB */
	int backend;             /* IO_BACKEND_* */
	int admission;           /* SSD_ADMIT_*: victim (default), second access or write-through */
	uint64_t wd_max_bytes;   /* write-down bytes queued or in flight before shedding */
	uint64_t wd_wait_ns;     /* a persistent put waits this long for room, then fails */
	uint64_t wd_window_bytes; /* write-downs placed and in flight at most (ssd.c
				   * "Deletes jump the queue"); 0: SSD_WD_WINDOW */
	uint64_t debug_delay_ns; /* tests: the writer waits this long before each write-down */
	bool debug_check_align;  /* tests: count every I/O off the records' alignment
				  * (io_align_check; ssd.debug_check_align) */
	bool first_hit_cold;     /* victim: a record's first read is served from a DRAM
				  * copy that is the next victim, its second promotes it
				  * and drops the record (doc/policies.md) */
	unsigned young_pct;      /* victim, first_hit cold: a second read of a record in
				  * the newest young_pct % of the log's segments is
				  * served as a first read (the record stays); 0: off
				  * (ssd.young_reads_pct, doc/policies.md) */
	bool put_touch;          /* a put of a block the SSD holds marks its record read
				  * (E_READ: the second chance at reclamation;
				  * ssd.put_touch, doc/policies.md) */
	bool adapt_wd;           /* victim: prefix-adapt simulates DRAM + SSD and skips
				  * never-reused victims in its short-horizon mode
				  * (ssd.adapt_writedown, doc/policies.md) */
	unsigned ckpt_seals;     /* checkpoint after this many sealed segments */
	unsigned high_pct;       /* evict when more than this % of slots are used ... */
	unsigned low_pct;        /* ... down to this % */
	unsigned reinsert_pct;   /* at most this % of an evicted segment is reinserted */
	bool reuse_progressive;  /* the slot of the oldest segment is reused in place:
				  * its records stay readable until the new
				  * generation's writes reach them (ssd.c) */
	int dio_align;           /* records' alignment in new segments: 0 (auto: the
				  * device's O_DIRECT alignment, 512 or 4096),
				  * SSD_REC_ALIGN or SSD_REC_ALIGN_4K (ssd.dio_align) */
	int format;              /* layout of the segments this open starts: 2, or 3 --
				  * single-part puts under 256 KiB written as batches
				  * under one header (ssd.format; doc/ssd-format.md
				  * "Format 3: batch headers"); 0 reads as 2 */
	unsigned io_depth;       /* I/O engine queue depth */
	uint64_t retry_ns;       /* after ENOSPC, try writing again after this long */
	uint64_t close_wd_ms;    /* graceful stop: write DRAM's blocks down for this long
				  * at most (0: none; store.c, doc/policies.md) */
	struct quota *quota;     /* quota groups to charge, or NULL (quota.c) */
};

/*
 * Open (or create) the tier in dir_fd/ssd, recover its index (checkpoint,
 * then segments written after it), and start its threads.  reg and dram
 * must outlive it.  Returns 0, KVT_ECORRUPT/KVT_EVERSION (a file we cannot
 * trust as a whole), -errno.
 */
int ssd_open(struct ssd **out, const struct ssd_config *cfg, int dir_fd, struct kvt_mem *mem,
	     const struct kvt_logger *log, struct ns_registry *reg, struct dram *dram);
/*
 * The store's id as its open takes it (doc/ssd-format.md "Store
 * directory"): the first 16 bytes of ssd/id, ssd_dfd being the ssd/
 * directory.  0 with id filled; -ENOENT (none), KVT_ECORRUPT (shorter
 * than 16 bytes), -errno.  On any error the open makes a new random id,
 * so that no segment or checkpoint already there is the store's; kvtier
 * fsck (ssd_fsck.c) reads it the same way, to judge the files as the
 * open will.
 */
int ssd_id_read(int ssd_dfd, uint8_t id[16]);
/* Drain write-downs, seal nothing, write a checkpoint, stop. */
void ssd_close(struct ssd *s);

/* The DRAM admission hook (dram_set_admit_hook); ctx is the struct ssd. */
bool ssd_admit(void *ctx, struct dram_item *item, uint32_t ns, int why);
/* Has the log no free room, so that a write-down now would drop older
 * blocks (the segment open was had by evicting or reusing one)?  Lock-free;
 * DRAM's write-down filter asks it (dram_below_room); ctx is the ssd. */
bool ssd_log_full(void *ctx);
/* DRAM's plug (dram_below_plug; ctx is the ssd): while any shard holds
 * one, the writer takes no write-down or carry off the queue, nor adds one
 * to a batch it is gathering -- a put's victims go down as one burst, in
 * batches and with reclamation's carries after them, the same every run. */
void ssd_plug(void *ctx, bool on);
/*
 * The eviction hook (the shared tier's write-down): when segment eviction
 * drops a block that was promoted from SSD at least twice and is not
 * reinserted, reserve(ctx, ns, value_len) asks whether the hook takes it
 * now (policy, budget); if so the record is read back from the segment
 * (still intact: only its header page was cleared), checked (header,
 * key, sequence, every part's CRC32C; a batched value of format 3: the
 * value alone, by its value_crc, one part at value_off 0), and take()
 * gets it, with ownership
 * of buf (kvt_mem_alloc_aligned on the tier's kvt_mem, buf_cap bytes; the
 * value is buf[value_off, value_off + value_len)), or buf NULL (the read
 * or a check failed: drop the reservation).  Both run on the writer
 * thread under seg_lock: they must not block or call ssd_*.  gen(ctx) is
 * read under the index shard lock that drops the entry, and passed to
 * take: a delete or clear of the block that the hook saw after it (its
 * generation is higher) wins over the hand-down.
 */
struct ssd_evict_hook {
	bool (*reserve)(void *ctx, uint32_t ns, uint64_t value_len);
	void (*take)(void *ctx, uint32_t ns, const struct kvt_key *key, uint8_t *buf,
		     uint64_t buf_cap, uint64_t value_off, uint64_t value_len, unsigned part_count,
		     const uint64_t *part_lens, const uint32_t *crcs, uint32_t flags, uint64_t gen);
	uint64_t (*gen)(void *ctx);
};
/* hook and ctx must outlive the tier (NULL: none). */
void ssd_set_evict_hook(struct ssd *s, const struct ssd_evict_hook *hook, void *ctx);

/* Namespaces whose puts are written down at once. */
int ssd_set_persistent(struct ssd *s, uint32_t ns);

/* Present on SSD?  KVT_OK (with *value_len) or KVT_MISS.  Never pins. */
int ssd_find(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint64_t *value_len);
/* fn(ctx, key) for every published entry of ns, under its index shard's
 * lock: fn must not call into the SSD tier (store_scan.c). */
void ssd_scan(struct ssd *s, uint32_t ns, void (*fn)(void *ctx, const struct kvt_key *key),
	      void *ctx);

/*
 * Promote a block: reserve DRAM, read it (priority IO_PRIO_DEMAND or
 * IO_PRIO_PREFETCH), verify header and CRCs, publish it in DRAM, and call
 * cb on the I/O thread with KVT_OK and the item pinned (the callee must
 * dram_unpin it), or with KVT_MISS (absent, corrupt, I/O error: counted)
 * and NULL.  Returns 0 if cb will run; KVT_MISS if not on SSD; KVT_EXISTS
 * if the block is in DRAM (or being put there) already; errors.  A block
 * whose promotion is in flight (another get's, a prefetch's) is not read
 * twice: this call joins it, and cb gets that promotion's outcome (its own
 * ref on KVT_OK), on the I/O thread or, if that promotion failed before
 * its read, on the thread that started it.
 */
int ssd_promote(struct ssd *s, uint32_t ns, const struct kvt_key *key, int prio,
		tier_got_fn cb, void *ctx);

/*
 * A private copy of a block read from SSD (ssd_read_copy): the record in
 * one aligned buffer, the value at value, its part table checked.  Owned
 * by whoever the callback hands it to; freed with ssd_copy_free.
 */
struct ssd_copy {
	uint8_t *buf;            /* kvt_mem_alloc_aligned, buf_len bytes: [header][value] */
	uint64_t buf_len;
	const uint8_t *value;    /* value_len bytes inside buf */
	uint64_t value_len;
	uint32_t part_count;
	uint32_t value_flags;    /* KVT_F_SEALED if stored so */
	uint64_t *lens;          /* part_count part lengths, then ... */
	uint32_t *crcs;          /* ... part_count CRC32Cs (checked), in one allocation */
};
/*
 * Read a block into a private buffer without changing anything the tier
 * keeps: nothing is reserved or published in DRAM, and the index entry is
 * not marked read (so segment eviction does not reinsert it because of
 * this read).  The read is verified as a promotion is (header against the
 * index, every part's CRC32C).  cb runs on the I/O thread with KVT_OK and
 * the copy (the callee owns it), or KVT_MISS (absent, corrupt, I/O error:
 * counted) and NULL.  Returns 0 if cb will run; KVT_MISS if not on SSD;
 * -ENOMEM.  Used for reads that must leave no trace in the cache state
 * (KVT_F_QUIET, kvtierd's reads by grantees: doc/security.md).
 */
int ssd_read_copy(struct ssd *s, uint32_t ns, const struct kvt_key *key, int prio,
		  tier_copy_fn cb, void *ctx);
/*
 * Read part `part` of a block straight into dst[0..dst_count): the
 * record's header and that part only (aligned O_DIRECT reads: the header
 * with the value's first 4 KiB, then, for a part beyond them, its own
 * run; a batched value of format 3, whose one part is the whole value,
 * its value alone, whole, in the same pieces).  Verified as a promotion is
 * (the header against the index, the part's CRC32C -- a batched value's
 * value_crc over all of it: a mismatch drops the entry and is a miss, never other
 * bytes).  Nothing is reserved or published in DRAM and the entry is not
 * marked read.  done runs on the I/O thread with status KVT_OK (count:
 * the part's length), KVT_MISS, KVT_ERANGE (part >= the block's part
 * count) or KVT_EBUFSMALL, and value_len, value_flags.  Returns 0 if
 * done will run; KVT_MISS if not on SSD; -ENOMEM.  The SSD tier's
 * get_part_quiet (KVT_F_PART | KVT_F_QUIET gets; plain part gets
 * promote).
 */
int ssd_read_part(struct ssd *s, uint32_t ns, const struct kvt_key *key, uint32_t part,
		  const struct iovec *dst, unsigned dst_count, int prio, tier_done_fn done,
		  void *ctx);
/* mem: the store's allocator (the tier may be closed by then). */
void ssd_copy_free(struct kvt_mem *mem, struct ssd_copy *copy);

/*
 * Deletes and clears, in three steps so that nothing changes unless the
 * tombstone can be logged, and the DRAM tier changes before the SSD index
 * (a write-down racing the delete checks the DRAM block after entering its
 * SSD entry): prepare (NULL: out of memory, fail the request), delete or
 * clear in DRAM, then ssd_delete / ssd_clear, which consume `prepared`.
 */
void *ssd_log_prepare(struct ssd *s, bool clear, uint32_t ns, const struct kvt_key *key);
/* Remove and log a tombstone.  KVT_OK (a dead entry too: a miss whose
 * record may be on disk, its tombstone logged) or KVT_MISS (none). */
int ssd_delete(struct ssd *s, void *prepared, uint32_t ns, const struct kvt_key *key);
/* Remove every block of ns (KVT_NS_ALL: all) and log it.  Blocks removed. */
int64_t ssd_clear(struct ssd *s, void *prepared, uint32_t ns);
/* A put of (ns, key) that DRAM does not hold (the tier's put_over):
 * KVT_EXISTS if the index holds the block published; else KVT_OK, an
 * unpublished entry of the key (dead, or a carry or write in flight)
 * removed and a tombstone logged for it, as ssd_delete would.  Never
 * blocks on I/O. */
int ssd_put_over(struct ssd *s, uint32_t ns, const struct kvt_key *key, bool wait);
/* Wait until every write-down queued before now is on the device, durably. */
int ssd_flush(struct ssd *s);
/* Wait until every tombstone logged before now is on the device, durably,
 * not for the write-down backlog: the writer takes tombstones first and
 * keeps at most wd_window_bytes of write-downs in flight (ssd.c "Deletes
 * jump the queue").  0 or an error.  Any thread but the writer. */
int ssd_sync_deletes(struct ssd *s);
/* Bytes that can be written before segment eviction starts (whole free
 * segments under the low watermark): what a graceful stop may add without
 * pushing out what the tier holds. */
uint64_t ssd_room_bytes(struct ssd *s);
/* Graceful stop: write DRAM's blocks worth keeping down first (doc/policies.md). */
void ssd_close_writedown(struct ssd *s);
/* Estimated ns to read len bytes at the tier's measured throughput. */
uint64_t ssd_load_ns(struct ssd *s, uint64_t len);
void ssd_stats(struct ssd *s, kvt_stats_fn fn, void *ctx);
/*
 * A put of len bytes to ns is about to land in DRAM.  For a persistent
 * namespace (written down at put, never shed): wait until the write-down
 * queue holds at most wd_max_bytes with it, for at most wd_wait_ns; then
 * KVT_EFULL (counted as ssd.writedown_put_timeouts).  KVT_OK at once for
 * other namespaces, and while the device is full (ENOSPC: degraded, the
 * put is served from DRAM only, as before).  No lock may be held.
 */
int ssd_put_room(struct ssd *s, uint32_t ns, uint64_t len);
/*
 * ssd_put_room without blocking (what kvtierd parks a persistent put on):
 * KVT_OK when a put of len bytes to ns would not wait (or ns is not
 * persistent); with done NULL, KVT_EAGAIN when it would (nothing
 * counted); else TIER_PENDING: the request waits, after any that waited
 * before it, and done(ctx, res) runs once -- on the writer or an I/O
 * thread, no lock held -- with KVT_OK once there is room or KVT_EFULL
 * after wd_wait_ns (counted as ssd_put_room counts).  -ENOMEM.
 */
int ssd_room_watch(struct ssd *s, uint32_t ns, uint64_t len, tier_done_fn done, void *ctx);
/* Tests: hold (true) or release the writer thread; held, queued
 * write-downs (and flushes, checkpoints) wait and reach no disk; tombstones
 * and ssd_sync_deletes still go through. */
void ssd_hold_writes(struct ssd *s, bool hold);
/* Tests: the I/O engine, for fault injection. */
struct kvt_io *ssd_io(struct ssd *s);
/* Tests: write a checkpoint now (0 or -errno). */
int ssd_checkpoint(struct ssd *s);

#endif

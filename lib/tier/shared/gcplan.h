/*
 * gcplan.h - which block files a budget collection of the shared tier
 * removes, found in bounded memory over two walks of the directory or
 * listings of the bucket (kvt_shared_gc in shdir.c, shs3_gc in shs3.c).
 *
 * The rule: the oldest first (by modification time) until the rest fits
 * the budget.  A sort needs every name at once (~240 bytes a file: 2.4 GB
 * for ten million); the plan keeps the bytes by age instead, in
 * GCPLAN_BUCKETS buckets (30 KiB) whatever the count:
 *
 *   walk 1  every file's bytes by its age (now - mtime) in buckets of
 *           1/64 of the age (exact below 64 s); done here if the total
 *           fits the budget (the usual case);
 *   walk 2  the files of the buckets older than the one where the
 *           oldest-first sum reaches what must go, and of that bucket as
 *           the walk meets them until what must go has gone.
 *
 * So the order is oldest first to within 1/64 of a file's age (a day-old
 * file may swap with one 22 minutes younger): far finer than the mtimes
 * it orders, which a read refreshes only when older than half of
 * shared.max_age.  Files that change between the walks (written, read,
 * removed by another collector) make the result approximate, never
 * unsafe: a removed block is a miss.
 *
 * Use: gcplan_init; for each walk, gcplan_see for every block file (true:
 * remove it now), then gcplan_next (true: walk again); gcplan_free.  Not
 * thread-safe: one plan, one collector.
 */
#ifndef KVT_GCPLAN_H
#define KVT_GCPLAN_H

#include <stdbool.h>
#include <stdint.h>

#define GCPLAN_SUB 64u                               /* buckets an octave of age */
#define GCPLAN_BUCKETS (GCPLAN_SUB + 58u * GCPLAN_SUB) /* ages 0 .. 2^64-1 */

struct gcplan {
	unsigned walk;           /* 1, 2; 0 when done */
	int64_t now_s;           /* ages are from this */
	uint64_t budget;         /* bytes to keep at most; 0: no limit */
	uint64_t total;          /* walk 1: bytes of the block files seen */
	uint64_t *hist;          /* walk 1: bytes by age bucket, owned */
	uint32_t cut;            /* walk 2: the buckets past this go, */
	uint64_t at_cut;         /* and this many bytes of this one */
};

/* The age bucket of a file (the youngest 0, ages below 64 s exact). */
uint32_t gcplan_bucket(int64_t now_s, int64_t mtime_s);

/* 0 or -ENOMEM. */
int gcplan_init(struct gcplan *p, uint64_t budget, int64_t now_s);

/* A block file of the walk under way, mtime_s seconds, bytes long: true if
 * the collector should remove it now.  Sums saturate. */
bool gcplan_see(struct gcplan *p, int64_t mtime_s, uint64_t bytes);

/* After a walk: true if another is needed. */
bool gcplan_next(struct gcplan *p);

void gcplan_free(struct gcplan *p);

#endif

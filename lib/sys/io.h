/*
 * io.h - asynchronous block I/O for the SSD tier (io.c).
 *
 * One I/O engine per SSD tier.  Callers on any thread queue requests with
 * io_submit; the engine's own thread issues them, by priority, and calls
 * each request's done() on that thread when it finishes.  Two backends:
 *
 *   uring  io_uring (liburing 2.3 API; features probed at run time),
 *          batched submissions, registered (fixed) buffers for requests
 *          whose buffers lie inside a registered region
 *   psync  a few threads doing preadv/pwritev, chosen automatically when
 *          io_uring is refused (seccomp, old kernel, io_uring_disabled) and
 *          selectable by option; it runs the same test suite
 *
 * Priorities: demand reads before prefetch reads before write-downs.  A
 * queued request is issued only when no request of a higher priority is
 * queued; writes in flight are capped (write_depth) so a burst of
 * write-downs never fills the device queue ahead of a demand read.
 *
 * Transfers are complete or failed: partial transfers are continued
 * internally; res is the byte count (short only at end of file) or -errno.
 *
 * Faults (tests only): injected EIO, short reads, ENOSPC and torn writes,
 * and a power-loss mode that can roll back every write not yet made
 * durable by an IO_FSYNC on its file.
 */
#ifndef KVT_IO_H
#define KVT_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "kvt_int.h"

struct kvt_io;

enum { IO_BACKEND_AUTO = 0, IO_BACKEND_URING = 1, IO_BACKEND_PSYNC = 2 };
enum { IO_PRIO_DEMAND = 0, IO_PRIO_PREFETCH = 1, IO_PRIO_WRITE = 2, IO_PRIO_COUNT = 3 };
enum { IO_READ = 1, IO_WRITE = 2, IO_FSYNC = 3 /* fdatasync of fd */ };

struct io_req {
	/* in: set by the caller, untouched by the engine */
	uint8_t opcode;            /* IO_READ, IO_WRITE, IO_FSYNC */
	uint8_t prio;              /* IO_PRIO_* */
	int fd;
	uint64_t off;              /* byte offset in the file */
	const struct iovec *iov;   /* READ/WRITE buffers; with O_DIRECT each 4 KiB aligned */
	unsigned iov_count;        /* 1..IOV_MAX */
	void (*done)(struct io_req *r); /* called once, on the engine thread */
	void *ctx;                 /* the caller's */
	/* out */
	int64_t res;               /* bytes transferred, or -errno */
	/* engine-private */
	struct io_req *next_, *prev_;
	uint64_t done_len_;        /* bytes done so far (continuations) */
	uint64_t start_ns_;
	int state_;
};

struct io_config {
	int backend;            /* IO_BACKEND_* (default AUTO) */
	unsigned depth;         /* requests in flight at most (default 64) */
	unsigned write_depth;   /* writes in flight at most (default 8) */
	unsigned threads;       /* psync: worker threads (default 4) */
};

int io_open(struct kvt_io **out, const struct io_config *cfg, struct kvt_mem *mem,
	    const struct kvt_logger *log);
/* Waits for everything submitted to finish (done() runs), then stops. */
void io_close(struct kvt_io *io);
/* "uring" or "psync". */
const char *io_backend_name(const struct kvt_io *io);

/*
 * Register memory regions (the DRAM arena, header buffers) once, before the
 * first io_submit.  uring: fixed buffers, used for any request with one
 * iovec that lies inside one region (liburing 2.3 has no vectored fixed
 * opcode); psync: remembered, no effect.  Returns 0 or -errno (the engine
 * then runs without fixed buffers and says so); -EBUSY if called again or
 * after the first io_submit, -E2BIG past 1024 pieces of at most 1 GiB.
 */
int io_register_buffers(struct kvt_io *io, const struct iovec *regions, unsigned n);

/* Queue r.  Any thread; never blocks on the device. */
void io_submit(struct kvt_io *io, struct io_req *r);

/*
 * Cancel r if it has not been issued: its done() runs with res -ECANCELED
 * (on the engine thread, or on the caller's before this returns: either is
 * allowed) and this returns 0; -EALREADY if it is in flight; -ENOENT if it
 * already finished.
 */
int io_cancel(struct kvt_io *io, struct io_req *r);

/*
 * Open name under dir_fd with O_DIRECT (plus flags, mode).  If the file
 * system refuses O_DIRECT (EINVAL), open it buffered, log it once per
 * engine at KVT_LOG_WARN, count it (stat io.odirect_refused) and set
 * *direct false.  Returns the fd or -errno.
 */
int io_open_file(struct kvt_io *io, int dir_fd, const char *name, int flags, mode_t mode,
		 bool *direct);

/*
 * Allocate [0, len) of fd (fallocate mode 0: a segment's blocks, so that
 * its writes cannot fail for room later).  A file system that cannot
 * (EOPNOTSUPP) is not an error: its writes will say.  Returns 0 or
 * -errno (-ENOSPC: no room; IO_FAULT_ALLOC_ENOSPC injects it).
 */
int io_allocate(struct kvt_io *io, int fd, uint64_t len);

/* io.backend (text), io.fixed_buffers, io.fixed_ops (requests issued with a
 * fixed buffer), io.odirect_refused, io.reads, io.read_bytes,
 * io.writes, io.write_bytes, io.fsyncs, io.errors, io.faults_injected,
 * io.inflight, io.queued, io.read_ns (sum of read latencies), io.write_ns. */
void io_stats(struct kvt_io *io, kvt_stats_fn fn, void *ctx);

/* ------------------------------------------------------------------------
 * Fault injection (tests).
 */
enum {
	IO_FAULT_EIO_READ = 1,   /* reads fail with -EIO */
	IO_FAULT_EIO_WRITE,      /* writes fail with -EIO, nothing written */
	IO_FAULT_SHORT_READ,     /* reads return fewer bytes than asked (res short) */
	IO_FAULT_ENOSPC,         /* writes fail with -ENOSPC, nothing written (after
				  * delay_ms, if set: a write failing late) */
	IO_FAULT_TORN_WRITE,     /* only torn_bytes of the write reach the file, res -EIO */
	IO_FAULT_ALLOC_ENOSPC,   /* io_allocate fails with -ENOSPC, nothing allocated */
	/* an IO_FSYNC waits delay_ms before it runs (then succeeds or fails
	 * as it would): a slow device's fdatasync.  The thread issuing it
	 * waits: with psync one worker (the others go on), with uring the
	 * engine thread (every request waits). */
	IO_FAULT_SLOW_FSYNC,
	IO_FAULT_EIO_FSYNC,      /* an IO_FSYNC fails with -EIO, nothing synced */
	/* a read succeeds, but the byte in the middle of what it read has a
	 * bit flipped in memory (the file is intact): a transient bad read,
	 * or memory's bit flip (test_ssd read_corrupt_kill9) */
	IO_FAULT_CORRUPT_READ,
	/* a write waits delay_ms before it runs (then succeeds or fails as
	 * it would): a slow device's write, so a test can see what the SSD
	 * tier's writer places while writes are in flight (test_ssd
	 * f3_room).  The issuing thread waits, as for SLOW_FSYNC. */
	IO_FAULT_SLOW_WRITE,
	/* a read waits delay_ms before it runs (then succeeds): a slow
	 * device's read, so a test can see what the writer does while a
	 * promotion's read is in flight (test_ssd promote_own_victims) */
	IO_FAULT_SLOW_READ,
};

struct io_fault {
	int kind;
	int fd;              /* -1: any file */
	uint64_t skip;       /* let this many matching requests pass first */
	uint64_t count;      /* then fire this many times (0: until cleared) */
	uint64_t torn_bytes; /* TORN_WRITE */
	uint64_t delay_ms;   /* SLOW_FSYNC, SLOW_WRITE, SLOW_READ, ENOSPC */
	/* only reads or writes of exactly this many bytes (the iovecs'
	 * total) match (0: any): one kind of write among many, e.g. a
	 * segment's 4 KiB summary among larger records (test_ssd
	 * seal_fail_tomb) */
	uint64_t len;
};

int io_fault_add(struct kvt_io *io, const struct io_fault *f);
void io_fault_clear(struct kvt_io *io);
/* End the delays (delay_ms) of the requests whose fault has fired (counted
 * in io.faults_injected) and that are still waiting: each goes on at once,
 * as if delay_ms had passed (an ENOSPC one fails then).  Faults that fire
 * later wait their full delay_ms.  With a long delay_ms, a test holds a
 * request until what it waits for has happened, counted by a stat, instead
 * of racing the clock (test_ssd retry_bound). */
void io_fault_release(struct kvt_io *io);

/*
 * Alignment check (tests): once armed with align (0: off), every READ and
 * WRITE submitted, and every I/O noted with io_align_note, is checked as
 * O_DIRECT on a device of that logical block would check it -- the offset,
 * the total length and each iovec's base and length multiples of align --
 * and counted.  io_align_counts gives how many were checked and how many
 * failed (the first failure is logged at KVT_LOG_WARN).
 */
void io_align_check(struct kvt_io *io, uint32_t align);
void io_align_note(struct kvt_io *io, const struct iovec *iov, unsigned iov_count, uint64_t off);
void io_align_counts(struct kvt_io *io, uint64_t *checked, uint64_t *misaligned);

/*
 * Power loss: while armed, every write saves the bytes it overwrites; an
 * IO_FSYNC of a file forgets its saved pre-images (they are durable).
 * io_powerloss_cut restores all saved pre-images, newest first, as if the
 * machine lost power before they reached the device, and returns how many
 * writes it undid.  Call it only with no request in flight.
 */
void io_powerloss_arm(struct kvt_io *io, bool on);
int64_t io_powerloss_cut(struct kvt_io *io);

/*
 * Power loss as a device may leave it: the state at the last fsync (as
 * io_powerloss_cut), then each write since (unsynced) put back or not,
 * one in two, in a random order, and one of them torn: only its first k
 * 512-byte sectors (0 <= k < its sectors).  A write that failed is never
 * put back whole.  All choices follow from seed.  Fills *cut; returns how
 * many writes were dropped, or -errno.  Only with no request in flight.
 */
struct io_pl_cut {
	uint64_t writes;    /* unsynced writes found */
	uint64_t kept;      /* put back whole */
	uint64_t dropped;   /* lost */
	int torn;           /* 1: one write was torn, as below */
	int torn_fd;
	uint64_t torn_off, torn_len; /* its offset, and the bytes of it kept */
};
int64_t io_powerloss_cut_random(struct kvt_io *io, uint64_t seed, struct io_pl_cut *cut);

#endif

/*
 * io.c - the SSD tier's I/O engine: three priority FIFOs in front of either
 * io_uring or a small pool of preadv/pwritev threads (io.h).
 *
 * Owns: the queues, the ring and its engine thread (uring) or the worker
 * threads (psync), the eventfd that wakes the engine, the table of
 * registered (fixed) buffers, the fault table and the power-loss
 * pre-images.
 *
 * Threads and locks.
 *   io->lock        the queues, queued, inflight, writes_inflight, closing,
 *                   engine_waiting, submitted and every request's state_.
 *                   Never held across done(), a device call or a wake-up.
 *   io->fault_lock  the fault table and the pre-image list.  Taken inside
 *                   io->lock (fault decisions are made while dequeuing),
 *                   never the other way round.
 *   uring   one engine thread owns the ring: it alone gets SQEs, submits
 *           and reaps.  Other threads only write the eventfd.
 *   psync   cfg->threads workers, each issuing one request at a time.
 *   Counters for io_stats are relaxed atomics.
 *
 * Life of a request (state_ & IO_ST_MASK):
 *
 *   io_submit -> QUEUED in q[prio] -> io_take_locked -> INFLIGHT
 *       -> transfer(s) -> io_finish: DONE, then done(r), then the slot
 *          (inflight, writes_inflight) is given back
 *   io_cancel: QUEUED -> DONE with -ECANCELED, done() on the caller's thread
 *
 * A request counts as in flight from the moment it is taken until its
 * done() has returned, so depth also bounds callbacks running at once, and
 * a callback that blocks holds its slot (the tests rely on this to order
 * requests).  The engine never touches a request after calling its done():
 * the callback may free or resubmit it.
 *
 * Dispatch.  io_take_locked looks at the heads of q[DEMAND], q[PREFETCH],
 * q[WRITE] in that order and takes the first head it finds, unless that
 * head is an IO_WRITE and write_depth writes are in flight, in which case
 * it takes nothing (strict priority: nothing of a lower priority passes a
 * queued request of a higher one).  It repeats while fewer than depth
 * requests are in flight.
 *
 * Waking the engine (uring).  The engine keeps a one-shot POLLIN on the
 * eventfd armed in the ring, so one io_uring_submit_and_wait serves both
 * completions and new work:
 *
 *   engine                               submitter
 *   lock; take; nothing -> waiting=1     lock; append; w = waiting;
 *   unlock                               waiting = 0; unlock
 *   submit_and_wait(1)  <-- POLLIN ----  if (w) write(eventfd, 1)
 *   reap: eventfd CQE -> read, re-arm
 *
 * The flag is cleared by whoever sees it first, so a burst of submissions
 * costs one write; a write that lands between the engine's unlock and its
 * wait leaves the eventfd readable and the armed poll fires at once.
 *
 * Transfers are complete or failed (io_progress): a short transfer is
 * continued from the caller's own iovec array (the remainder of a split
 * iovec with a plain read/write, the rest with readv/writev), so no
 * per-request copy is needed; a short read that reaches end of file (by
 * fstat, or BLKGETSIZE64 for a block device) completes short.  iov_count
 * is capped at IOV_MAX (1024), the kernel's own limit for readv.
 *
 * Fixed buffers (uring).  A READ/WRITE with iov_count == 1 whose buffer
 * lies inside one registered region goes out as read_fixed/write_fixed;
 * liburing 2.3 has no vectored fixed opcode, so anything else uses
 * readv/writev.  Regions longer than 1 GiB (the kernel's limit per buffer)
 * are registered as 1 GiB pieces; at most 1024 pieces in all.
 *
 * Faults and power loss (tests) are decided in io_take_locked and applied
 * in io_pre_issue, just before the request would reach the device, in
 * both backends; the kind is kept in state_ bits 8..15 until completion
 * (a short read is cut to half its length there).  A torn write is a
 * synchronous pwrite of its first torn_bytes (keep them O_DIRECT-aligned).
 * While power loss is armed, each write first preads the range it covers
 * (zeros past end of file) and remembers the file size; a successful
 * IO_FSYNC drops the pre-images of its fd's finished writes (one still in
 * flight keeps its own); io_powerloss_cut writes them back newest first
 * and truncates to the remembered size.  Each pre-image also keeps a copy
 * of what its write writes, so that io_powerloss_cut_random can, after
 * that, put back a random subset of the unsynced writes in a random order,
 * one of them torn at a 512-byte boundary (through a buffered fd to the
 * same file, fsynced: 512-byte pieces are not O_DIRECT-aligned).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

#define IO_DEPTH_DEFAULT 64u
#define IO_DEPTH_MAX 4096u
#define IO_WRITE_DEPTH_DEFAULT 8u
#define IO_THREADS_DEFAULT 4u
#define IO_THREADS_MAX 256u
#define IO_IOV_MAX 1024u                /* iov_count at most (IOV_MAX) */
#define IO_REG_MAX 1024u                /* registered pieces at most */
#define IO_REG_PIECE (1ull << 30)       /* longest registered piece */
#define IO_XFER_MAX (1u << 30)          /* longest single read/write SQE */
#define IO_FAULT_MAX 32u
#define IO_PL_ALIGN 4096u               /* pre-image buffers, for O_DIRECT */
#define IO_TAG_WAKE ((uint64_t)1)       /* user_data of the eventfd poll */

enum { IO_ST_NONE = 0, IO_ST_QUEUED = 1, IO_ST_INFLIGHT = 2, IO_ST_DONE = 3 };
#define IO_ST_MASK 0xff
#define IO_ST_FAULT_SHIFT 8
#define IO_ST_FAULT(r) (((r)->state_ >> IO_ST_FAULT_SHIFT) & 0xff)

struct io_queue {
	struct io_req *head, *tail;
};

struct io_fault_slot {
	struct io_fault f;
	uint64_t seen;   /* matching requests so far */
	uint64_t fired;  /* times it fired */
};

/* One saved pre-image: the bytes a write is about to overwrite, and the
 * bytes it writes (for io_powerloss_cut_random). */
struct io_pre {
	struct io_pre *next;       /* older */
	const struct io_req *req;  /* the write while in flight, NULL once finished */
	int fd;
	bool failed;               /* the write finished with an error */
	uint64_t off, len;         /* the write's range, bytes */
	int64_t old_size;          /* file size before the write, bytes; -1 unknown */
	size_t alloc_len;          /* bytes of this allocation */
	unsigned char *buf;        /* len bytes, IO_PL_ALIGN aligned, inside this allocation */
	unsigned char *post;       /* len bytes: what the write writes */
};

struct kvt_io {
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	int backend;               /* IO_BACKEND_URING or IO_BACKEND_PSYNC */
	unsigned depth, write_depth;

	pthread_mutex_t lock;
	pthread_cond_t cond;       /* psync: a request may be takeable, or closing */
	struct io_queue q[IO_PRIO_COUNT]; /* lock */
	unsigned queued;           /* requests in q; lock */
	unsigned inflight;         /* taken, done() not yet returned; lock */
	unsigned writes_inflight;  /* IO_WRITEs among them; lock */
	bool closing;              /* io_close started; lock */
	bool engine_waiting;       /* uring engine may sleep: wake it; lock */
	bool submitted;            /* io_submit has been called; lock */

	pthread_t *threads;
	unsigned thread_count;     /* started */

	/* uring: the ring is the engine thread's after io_open, except for
	 * io_register_buffers, which only makes a syscall on its fd. */
	struct io_uring ring;
	bool ring_ok;
	int wake_fd;               /* eventfd, -1 none */

	/* Fixed buffers, sorted by base; written once before the first
	 * io_submit (under lock), read-only after. */
	struct iovec *regs;
	unsigned reg_count;
	uint64_t reg_max_len;
	bool regs_in_kernel;       /* registered with the ring */

	pthread_mutex_t fault_lock;
	struct io_fault_slot faults[IO_FAULT_MAX]; /* fault_lock */
	unsigned fault_count;      /* fault_lock */
	_Atomic bool faults_on;    /* fault_count != 0, read without the lock */
	_Atomic uint64_t fault_releases; /* io_fault_release calls: ends delays */
	_Atomic bool pl_armed;
	struct io_pre *pre;        /* newest first; fault_lock */
	_Atomic uint64_t pre_count;

	_Atomic uint32_t align_check;  /* io_align_check: 0 off */
	_Atomic uint64_t align_checked, align_bad;
	_Atomic bool odirect_warned;
	_Atomic uint64_t st_odirect_refused, st_reads, st_read_bytes, st_writes,
		st_write_bytes, st_fsyncs, st_errors, st_faults, st_read_ns, st_write_ns,
		st_fixed_ops;
};

#define IO_INC(io, f, v) atomic_fetch_add_explicit(&(io)->f, (v), memory_order_relaxed)

static uint64_t io_iov_total(const struct io_req *r)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < r->iov_count; i++)
		n += r->iov[i].iov_len;
	return n;
}

/* Index of the iovec holding byte done_len_ of r, and the offset inside it. */
static unsigned io_iov_locate(const struct io_req *r, uint64_t *inner)
{
	uint64_t skip = r->done_len_;
	unsigned i = 0;
	while (i < r->iov_count && skip >= r->iov[i].iov_len) {
		skip -= r->iov[i].iov_len;
		i++;
	}
	*inner = skip;
	return i;
}

/* Is pos at or past the end of fd?  False when it cannot tell (a pipe). */
static bool io_at_eof(int fd, uint64_t pos)
{
	struct stat st;
	uint64_t size;
	if (fstat(fd, &st) != 0)
		return false;
	if (S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	else if (!S_ISBLK(st.st_mode) || ioctl(fd, BLKGETSIZE64, &size) != 0)
		return false;
	return pos >= size;
}

static bool io_valid(const struct io_req *r)
{
	if (r->prio >= IO_PRIO_COUNT)
		return false;
	if (r->opcode == IO_FSYNC)
		return true;
	if (r->opcode != IO_READ && r->opcode != IO_WRITE)
		return false;
	return r->iov && r->iov_count >= 1 && r->iov_count <= IO_IOV_MAX;
}

/* ------------------------------------------------------------------------
 * Queues and dispatch
 */

static void io_q_append(struct io_queue *q, struct io_req *r)
{
	r->next_ = NULL;
	r->prev_ = q->tail;
	if (q->tail)
		q->tail->next_ = r;
	else
		q->head = r;
	q->tail = r;
}

static void io_q_unlink(struct io_queue *q, struct io_req *r)
{
	if (r->prev_)
		r->prev_->next_ = r->next_;
	else
		q->head = r->next_;
	if (r->next_)
		r->next_->prev_ = r->prev_;
	else
		q->tail = r->prev_;
	r->next_ = r->prev_ = NULL;
}

static unsigned io_q_index(const struct io_req *r)
{
	/* An invalid prio is queued as demand and failed at once. */
	return r->prio < IO_PRIO_COUNT ? r->prio : IO_PRIO_DEMAND;
}

/* Does slot s fire for an operation on fd of len bytes (UINT64_MAX:
 * io_allocate's, no length)?  Counts the operation against it (skip, then
 * count).  fault_lock held. */
static bool io_fault_fires_locked(struct io_fault_slot *s, int fd, uint64_t len)
{
	if (s->f.fd >= 0 && s->f.fd != fd)
		return false;
	if (s->f.len && len != UINT64_MAX && s->f.len != len)
		return false;
	if (s->f.count && s->fired >= s->f.count)
		return false;
	if (s->seen++ < s->f.skip)
		return false;
	s->fired++;
	return true;
}

/*
 * Which fault, if any, fires for r (fault_lock taken here).  Counts the
 * request against every enabled slot it matches until one fires.
 */
static int io_fault_pick_locked(struct kvt_io *io, struct io_req *r, uint64_t *torn)
{
	int kind = 0;
	uint64_t len = 0;
	for (unsigned i = 0; i < r->iov_count; i++)
		len += r->iov[i].iov_len;
	pthread_mutex_lock(&io->fault_lock);
	for (unsigned i = 0; i < io->fault_count && !kind; i++) {
		struct io_fault_slot *s = &io->faults[i];
		bool is_read = s->f.kind == IO_FAULT_EIO_READ || s->f.kind == IO_FAULT_SHORT_READ ||
			       s->f.kind == IO_FAULT_CORRUPT_READ ||
			       s->f.kind == IO_FAULT_SLOW_READ;
		bool is_sync = s->f.kind == IO_FAULT_SLOW_FSYNC || s->f.kind == IO_FAULT_EIO_FSYNC;
		int op = is_read ? IO_READ : is_sync ? IO_FSYNC : IO_WRITE;
		if (s->f.kind == IO_FAULT_ALLOC_ENOSPC)
			continue; /* io_allocate's */
		if (r->opcode != op || !io_fault_fires_locked(s, r->fd, len))
			continue;
		kind = s->f.kind;
		*torn = kind == IO_FAULT_SLOW_FSYNC || kind == IO_FAULT_ENOSPC ||
				kind == IO_FAULT_SLOW_WRITE || kind == IO_FAULT_SLOW_READ
			? s->f.delay_ms
			: s->f.torn_bytes;
	}
	pthread_mutex_unlock(&io->fault_lock);
	return kind;
}

/*
 * Move requests that may be issued now from the queues to *list (linked
 * by next_, in issue order), marking them INFLIGHT.  At most max.
 */
static unsigned io_take_locked(struct kvt_io *io, struct io_req **list, unsigned max)
{
	struct io_req *tail = NULL;
	unsigned n = 0;
	*list = NULL;
	while (n < max && io->inflight < io->depth) {
		struct io_req *r = NULL;
		unsigned p;
		for (p = 0; p < IO_PRIO_COUNT; p++) {
			if (!io->q[p].head)
				continue;
			if (io->q[p].head->opcode == IO_WRITE &&
			    io->writes_inflight >= io->write_depth)
				break; /* strict: nothing lower passes it */
			r = io->q[p].head;
			break;
		}
		if (!r)
			break;
		io_q_unlink(&io->q[p], r);
		io->queued--;
		io->inflight++;
		if (r->opcode == IO_WRITE)
			io->writes_inflight++;
		r->state_ = IO_ST_INFLIGHT;
		r->done_len_ = 0;
		if (atomic_load_explicit(&io->faults_on, memory_order_relaxed) && io_valid(r)) {
			uint64_t torn = 0;
			int kind = io_fault_pick_locked(io, r, &torn);
			if (kind) {
				r->state_ |= kind << IO_ST_FAULT_SHIFT;
				/* done_len_ carries the torn length (or the delay)
				 * to io_pre_issue. */
				if (kind == IO_FAULT_TORN_WRITE || kind == IO_FAULT_SLOW_FSYNC ||
				    kind == IO_FAULT_ENOSPC || kind == IO_FAULT_SLOW_WRITE ||
				    kind == IO_FAULT_SLOW_READ)
					r->done_len_ = torn;
			}
		}
		if (tail)
			tail->next_ = r;
		else
			*list = r;
		tail = r;
		n++;
	}
	return n;
}

/* ------------------------------------------------------------------------
 * Power loss: pre-images
 */

static void io_pre_free(struct kvt_io *io, struct io_pre *p)
{
	kvt_mem_free(io->mem, p, p->alloc_len);
}

static void io_pre_free_all_locked(struct kvt_io *io)
{
	struct io_pre *p = io->pre, *nx;
	for (; p; p = nx) {
		nx = p->next;
		io_pre_free(io, p);
	}
	io->pre = NULL;
	atomic_store(&io->pre_count, 0);
}

/* pread len bytes at off into buf, zero past end of file.  0 or -errno. */
static int io_pread_full(int fd, unsigned char *buf, uint64_t len, uint64_t off)
{
	uint64_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (uint64_t)n;
	}
	memset(buf + got, 0, len - got);
	return 0;
}

/* Save what r (a write of len bytes) is about to overwrite.  0 or -errno. */
static int io_pl_save(struct kvt_io *io, const struct io_req *r, uint64_t len)
{
	size_t alloc_len = sizeof(struct io_pre) + IO_PL_ALIGN + 2 * len;
	struct io_pre *p = kvt_mem_alloc(io->mem, alloc_len);
	struct stat st;
	uint64_t at = 0;
	int ret;
	if (!p)
		return -ENOMEM;
	p->alloc_len = alloc_len;
	p->buf = (unsigned char *)KVT_ALIGN_UP((uintptr_t)(p + 1), IO_PL_ALIGN);
	p->post = p->buf + len;
	for (unsigned i = 0; i < r->iov_count; i++) {
		memcpy(p->post + at, r->iov[i].iov_base, r->iov[i].iov_len);
		at += r->iov[i].iov_len;
	}
	p->req = r;
	p->failed = false;
	p->fd = r->fd;
	p->off = r->off;
	p->len = len;
	p->old_size = fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
	ret = io_pread_full(r->fd, p->buf, len, r->off);
	if (ret == -EBADF) {
		/* A write-only fd: read the same file through /proc. */
		char path[64];
		int rfd;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
		rfd = open(path, O_RDONLY | O_CLOEXEC);
		ret = rfd < 0 ? -errno : io_pread_full(rfd, p->buf, len, r->off);
		if (rfd >= 0)
			close(rfd);
	}
	if (ret < 0) {
		kvt_logf(io->log, KVT_LOG_WARN, "io: power-loss pre-image of fd %d failed: %s",
			 r->fd, strerror(-ret));
		io_pre_free(io, p);
		return ret;
	}
	pthread_mutex_lock(&io->fault_lock);
	p->next = io->pre;
	io->pre = p;
	atomic_fetch_add(&io->pre_count, 1);
	pthread_mutex_unlock(&io->fault_lock);
	return 0;
}

/* The write r finished: its pre-image may now be dropped by an fsync. */
static void io_pl_write_done(struct kvt_io *io, const struct io_req *r)
{
	pthread_mutex_lock(&io->fault_lock);
	for (struct io_pre *p = io->pre; p; p = p->next)
		if (p->req == r) {
			p->req = NULL;
			p->failed = r->res < 0 || (uint64_t)r->res != p->len;
			break;
		}
	pthread_mutex_unlock(&io->fault_lock);
}

/* An IO_FSYNC of fd succeeded: its finished writes are durable. */
static void io_pl_synced(struct kvt_io *io, int fd)
{
	struct io_pre **pp, *p;
	pthread_mutex_lock(&io->fault_lock);
	for (pp = &io->pre; (p = *pp);) {
		if (p->fd == fd && !p->req) {
			*pp = p->next;
			atomic_fetch_sub(&io->pre_count, 1);
			io_pre_free(io, p);
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&io->fault_lock);
}

/* ------------------------------------------------------------------------
 * Issue and completion, shared by both backends
 */

/* Write the first torn bytes of r synchronously.  Errors are ignored: the
 * request fails with -EIO either way. */
static void io_torn_write(const struct io_req *r, uint64_t torn)
{
	uint64_t pos = r->off;
	for (unsigned i = 0; i < r->iov_count && torn; i++) {
		const char *b = r->iov[i].iov_base;
		uint64_t n = r->iov[i].iov_len < torn ? r->iov[i].iov_len : torn;
		uint64_t done = 0;
		while (done < n) {
			ssize_t w = pwrite(r->fd, b + done, n - done, (off_t)(pos + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return;
			done += (uint64_t)w;
		}
		pos += n;
		torn -= n;
	}
}

/*
 * Just before r reaches the device: validate, apply its fault, save its
 * pre-image.  Returns true if r is finished already (r->res set).
 */
/*
 * A fault's delay: ms milliseconds, or until io_fault_release is called
 * after releases was read (before the fault was counted, so a test that
 * saw io.faults_injected move and then releases always ends this delay).
 * Slept in slices of at most 1 ms.
 */
static void io_fault_delay(struct kvt_io *io, uint64_t ms, uint64_t releases)
{
	uint64_t end = kvt_now_ns() + ms * 1000000u, now;
	while ((now = kvt_now_ns()) < end && atomic_load(&io->fault_releases) == releases) {
		uint64_t ns = end - now < 1000000u ? end - now : 1000000u;
		struct timespec ts = { 0, (long)ns };
		nanosleep(&ts, NULL);
	}
}

static bool io_pre_issue(struct kvt_io *io, struct io_req *r)
{
	int kind = IO_ST_FAULT(r);
	uint64_t torn = r->done_len_, releases = 0;
	r->done_len_ = 0;
	r->start_ns_ = kvt_now_ns();
	if (!io_valid(r)) {
		r->res = -EINVAL;
		return true;
	}
	if (kind) {
		releases = atomic_load(&io->fault_releases);
		IO_INC(io, st_faults, 1);
	}
	switch (kind) {
	case IO_FAULT_EIO_READ:
	case IO_FAULT_EIO_WRITE:
	case IO_FAULT_EIO_FSYNC:
		r->res = -EIO;
		return true;
	case IO_FAULT_ENOSPC:
	case IO_FAULT_SLOW_FSYNC:
	case IO_FAULT_SLOW_WRITE:
	case IO_FAULT_SLOW_READ:
		if (torn)
			io_fault_delay(io, torn, releases);
		if (kind == IO_FAULT_ENOSPC) {
			r->res = -ENOSPC;
			return true;
		}
		break;
	}
	if (r->opcode == IO_WRITE && atomic_load(&io->pl_armed)) {
		int ret = io_pl_save(io, r, io_iov_total(r));
		if (ret < 0) {
			r->res = ret;
			return true;
		}
	}
	if (kind == IO_FAULT_TORN_WRITE) {
		io_torn_write(r, torn);
		r->res = -EIO;
		return true;
	}
	return false;
}

/*
 * A transfer of r moved res bytes (or failed with -errno).  Returns true
 * if r is finished (r->res set), false if the rest must be issued.
 */
static bool io_progress(struct io_req *r, int64_t res, uint64_t total)
{
	if (res == -EINTR || res == -EAGAIN)
		return false;
	if (res < 0) {
		r->res = res;
		return true;
	}
	if (res == 0) {
		/* End of file for a read; a write that makes no progress never will. */
		r->res = r->opcode == IO_READ ? (int64_t)r->done_len_ : -EIO;
		return true;
	}
	r->done_len_ += (uint64_t)res;
	if (r->done_len_ >= total) {
		r->res = (int64_t)total;
		return true;
	}
	if (r->opcode == IO_READ && io_at_eof(r->fd, r->off + r->done_len_)) {
		/* Continuing would ask O_DIRECT for an unaligned offset. */
		r->res = (int64_t)r->done_len_;
		return true;
	}
	return false;
}

/* IO_FAULT_CORRUPT_READ: flip a bit of the byte in the middle of what r
 * read, in the caller's buffer. */
static void io_corrupt_read(struct io_req *r)
{
	uint64_t at = (uint64_t)r->res / 2;
	for (unsigned i = 0; i < r->iov_count; i++) {
		if (at < r->iov[i].iov_len) {
			((uint8_t *)r->iov[i].iov_base)[at] ^= 0x01;
			return;
		}
		at -= r->iov[i].iov_len;
	}
}

/* Statistics, the short-read and corrupt-read faults and power-loss
 * bookkeeping of a finished request, before its done() runs. */
static void io_account(struct kvt_io *io, struct io_req *r, uint64_t now)
{
	uint64_t lat = now - r->start_ns_;
	if (IO_ST_FAULT(r) == IO_FAULT_SHORT_READ && r->res > 0) {
		uint64_t half = io_iov_total(r) / 2;
		if ((uint64_t)r->res > half)
			r->res = (int64_t)half;
	}
	if (IO_ST_FAULT(r) == IO_FAULT_CORRUPT_READ && r->res > 0)
		io_corrupt_read(r);
	if (r->res < 0)
		IO_INC(io, st_errors, 1);
	switch (r->opcode) {
	case IO_READ:
		IO_INC(io, st_reads, 1);
		IO_INC(io, st_read_bytes, r->res > 0 ? (uint64_t)r->res : 0);
		IO_INC(io, st_read_ns, lat);
		break;
	case IO_WRITE:
		IO_INC(io, st_writes, 1);
		IO_INC(io, st_write_bytes, r->res > 0 ? (uint64_t)r->res : 0);
		IO_INC(io, st_write_ns, lat);
		if (atomic_load(&io->pre_count))
			io_pl_write_done(io, r);
		break;
	case IO_FSYNC:
		IO_INC(io, st_fsyncs, 1);
		if (r->res == 0 && atomic_load(&io->pre_count))
			io_pl_synced(io, r->fd);
		break;
	}
}

/*
 * Finish a list of requests (linked by next_): account, mark each DONE
 * just before its done() (so io_cancel answers -ENOENT only from then
 * on), run the callbacks, then give their slots back.
 */
static void io_finish(struct kvt_io *io, struct io_req *list)
{
	unsigned n = 0, nw = 0;
	uint64_t now = kvt_now_ns();
	struct io_req *r, *nx;
	for (r = list; r; r = nx) {
		nx = r->next_;
		io_account(io, r, now);
		n++;
		nw += r->opcode == IO_WRITE;
		pthread_mutex_lock(&io->lock);
		r->state_ = IO_ST_DONE;
		pthread_mutex_unlock(&io->lock);
		if (r->done)
			r->done(r);
	}
	pthread_mutex_lock(&io->lock);
	io->inflight -= n;
	io->writes_inflight -= nw;
	if (io->backend == IO_BACKEND_PSYNC && (io->queued || io->closing))
		pthread_cond_signal(&io->cond);
	pthread_mutex_unlock(&io->lock);
}

/* ------------------------------------------------------------------------
 * uring backend
 */

static void io_ring_wake(struct kvt_io *io)
{
	uint64_t one = 1;
	ssize_t n = write(io->wake_fd, &one, sizeof(one));
	KVT_UNUSED(n); /* EAGAIN: the counter is already non-zero */
}

static struct io_uring_sqe *io_ring_sqe(struct kvt_io *io)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&io->ring)))
		io_uring_submit(&io->ring);
	return sqe;
}

static void io_ring_arm_wake(struct kvt_io *io)
{
	struct io_uring_sqe *sqe = io_ring_sqe(io);
	io_uring_prep_poll_add(sqe, io->wake_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, IO_TAG_WAKE);
}

/* Index of the registered piece holding [p, p+len), or -1. */
static int io_fixed_index(const struct kvt_io *io, const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p;
	unsigned lo = 0, hi = io->reg_count;
	if (!io->regs_in_kernel || len > IO_REG_PIECE)
		return -1;
	while (lo < hi) { /* hi = pieces with base <= a */
		unsigned mid = lo + (hi - lo) / 2;
		if ((uintptr_t)io->regs[mid].iov_base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (hi-- > 0) {
		uintptr_t b = (uintptr_t)io->regs[hi].iov_base;
		if (a - b >= io->reg_max_len)
			break;
		if (a - b + len <= io->regs[hi].iov_len)
			return (int)hi;
	}
	return -1;
}

/* Queue an SQE for what is left of r. */
static void io_ring_prep(struct kvt_io *io, struct io_req *r)
{
	struct io_uring_sqe *sqe = io_ring_sqe(io);
	bool rd = r->opcode == IO_READ;
	uint64_t inner, pos = r->off + r->done_len_;
	unsigned i;
	int idx;

	if (r->opcode == IO_FSYNC) {
		io_uring_prep_fsync(sqe, r->fd, IORING_FSYNC_DATASYNC);
		goto out;
	}
	i = io_iov_locate(r, &inner);
	if (r->done_len_ == 0 && r->iov_count == 1 &&
	    (idx = io_fixed_index(io, r->iov[0].iov_base, r->iov[0].iov_len)) >= 0) {
		unsigned n = (unsigned)r->iov[0].iov_len;
		if (rd)
			io_uring_prep_read_fixed(sqe, r->fd, r->iov[0].iov_base, n, pos, idx);
		else
			io_uring_prep_write_fixed(sqe, r->fd, r->iov[0].iov_base, n, pos, idx);
		IO_INC(io, st_fixed_ops, 1);
	} else if (inner || r->iov_count - i == 1) {
		char *b = (char *)r->iov[i].iov_base + inner;
		uint64_t left = r->iov[i].iov_len - inner;
		unsigned n = left > IO_XFER_MAX ? IO_XFER_MAX : (unsigned)left;
		if (rd)
			io_uring_prep_read(sqe, r->fd, b, n, pos);
		else
			io_uring_prep_write(sqe, r->fd, b, n, pos);
	} else {
		if (rd)
			io_uring_prep_readv(sqe, r->fd, r->iov + i, r->iov_count - i, pos);
		else
			io_uring_prep_writev(sqe, r->fd, r->iov + i, r->iov_count - i, pos);
	}
out:
	io_uring_sqe_set_data(sqe, r);
}

static void *io_ring_main(void *arg)
{
	struct kvt_io *io = arg;
	io_ring_arm_wake(io);
	for (;;) {
		struct io_req *take, *fin = NULL, **fin_tail = &fin, *r, *nx;
		struct io_uring_cqe *cqe;
		unsigned n;
		bool stop;

		pthread_mutex_lock(&io->lock);
		io->engine_waiting = false;
		n = io_take_locked(io, &take, UINT32_MAX);
		stop = io->closing && !io->queued && !io->inflight;
		if (!n && !stop)
			io->engine_waiting = true;
		pthread_mutex_unlock(&io->lock);
		if (stop)
			break;

		for (r = take; r; r = nx) {
			nx = r->next_;
			if (io_pre_issue(io, r)) {
				*fin_tail = r;
				fin_tail = &r->next_;
			} else {
				io_ring_prep(io, r);
			}
		}
		*fin_tail = NULL;
		/* Requests went out: only reap.  Nothing to do: sleep until a
		 * completion or the eventfd. */
		if (n)
			io_uring_submit(&io->ring);
		else
			io_uring_submit_and_wait(&io->ring, 1);
		if (fin) { /* finished before issue (faults, invalid) */
			io_finish(io, fin);
			fin = NULL;
		}

		fin_tail = &fin;
		while (io_uring_peek_cqe(&io->ring, &cqe) == 0) {
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&io->ring, cqe);
			if (tag == IO_TAG_WAKE) {
				uint64_t v;
				ssize_t rn = read(io->wake_fd, &v, sizeof(v));
				KVT_UNUSED(rn);
				io_ring_arm_wake(io);
				continue;
			}
			r = (struct io_req *)(uintptr_t)tag;
			if (r->opcode == IO_FSYNC) {
				if (res == -EINTR || res == -EAGAIN) {
					io_ring_prep(io, r);
					continue;
				}
				r->res = res;
			} else if (!io_progress(r, res, io_iov_total(r))) {
				io_ring_prep(io, r);
				continue;
			}
			*fin_tail = r;
			fin_tail = &r->next_;
		}
		*fin_tail = NULL;
		if (fin) {
			io_uring_submit(&io->ring); /* continuations, the re-armed poll */
			io_finish(io, fin);
		}
	}
	return NULL;
}

/* Ring, eventfd and opcode probe.  0 or -errno; nothing left on failure. */
static int io_ring_setup(struct kvt_io *io)
{
	static const int need[] = { IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_READ,
				    IORING_OP_WRITE, IORING_OP_READ_FIXED,
				    IORING_OP_WRITE_FIXED, IORING_OP_FSYNC, IORING_OP_POLL_ADD };
	size_t probe_len = sizeof(struct io_uring_probe) + 256 * sizeof(struct io_uring_probe_op);
	struct io_uring_probe *probe = NULL;
	struct io_uring_params p;
	int ret;

	io->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (io->wake_fd < 0)
		return -errno;
	memset(&p, 0, sizeof(p));
	ret = io_uring_queue_init_params(io->depth + 2, &io->ring, &p);
	if (ret < 0)
		goto fail;
	io->ring_ok = true;
	probe = kvt_mem_calloc(io->mem, 1, probe_len);
	if (!probe) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = io_uring_register_probe(&io->ring, probe, 256);
	if (ret < 0)
		goto fail;
	for (size_t i = 0; i < KVT_ARRAY_LEN(need); i++)
		if (!io_uring_opcode_supported(probe, need[i])) {
			ret = -EOPNOTSUPP;
			goto fail;
		}
	kvt_mem_free(io->mem, probe, probe_len);
	return 0;
fail:
	kvt_mem_free(io->mem, probe, probe_len);
	if (io->ring_ok)
		io_uring_queue_exit(&io->ring);
	io->ring_ok = false;
	close(io->wake_fd);
	io->wake_fd = -1;
	return ret;
}

/* ------------------------------------------------------------------------
 * psync backend
 */

static void io_psync_run(struct kvt_io *io, struct io_req *r)
{
	uint64_t total;
	if (io_pre_issue(io, r))
		return;
	if (r->opcode == IO_FSYNC) {
		int ret;
		while ((ret = fdatasync(r->fd)) != 0 && errno == EINTR)
			;
		r->res = ret ? -errno : 0;
		return;
	}
	total = io_iov_total(r);
	for (;;) {
		uint64_t inner, pos = r->off + r->done_len_;
		unsigned i = io_iov_locate(r, &inner);
		ssize_t n;
		if (inner) {
			char *b = (char *)r->iov[i].iov_base + inner;
			size_t left = r->iov[i].iov_len - inner;
			n = r->opcode == IO_READ ? pread(r->fd, b, left, (off_t)pos)
						 : pwrite(r->fd, b, left, (off_t)pos);
		} else {
			int cnt = (int)(r->iov_count - i);
			n = r->opcode == IO_READ ? preadv(r->fd, r->iov + i, cnt, (off_t)pos)
						 : pwritev(r->fd, r->iov + i, cnt, (off_t)pos);
		}
		if (io_progress(r, n < 0 ? -errno : n, total))
			return;
	}
}

static void *io_psync_main(void *arg)
{
	struct kvt_io *io = arg;
	pthread_mutex_lock(&io->lock);
	for (;;) {
		struct io_req *r;
		if (io_take_locked(io, &r, 1)) {
			/* Pass the word on if more could go. */
			if (io->queued && io->inflight < io->depth)
				pthread_cond_signal(&io->cond);
			pthread_mutex_unlock(&io->lock);
			io_psync_run(io, r);
			r->next_ = NULL;
			io_finish(io, r);
			pthread_mutex_lock(&io->lock);
			continue;
		}
		if (io->closing && !io->queued)
			break;
		pthread_cond_wait(&io->cond, &io->lock);
	}
	/* Let the next worker see closing too. */
	pthread_cond_signal(&io->cond);
	pthread_mutex_unlock(&io->lock);
	return NULL;
}

/* ------------------------------------------------------------------------
 * Public interface
 */

static void io_free(struct kvt_io *io)
{
	kvt_mem_free(io->mem, io->threads, sizeof(pthread_t) * IO_THREADS_MAX);
	kvt_mem_free(io->mem, io->regs, sizeof(struct iovec) * io->reg_count);
	io_pre_free_all_locked(io);
	if (io->ring_ok)
		io_uring_queue_exit(&io->ring);
	if (io->wake_fd >= 0)
		close(io->wake_fd);
	pthread_mutex_destroy(&io->fault_lock);
	pthread_cond_destroy(&io->cond);
	pthread_mutex_destroy(&io->lock);
	kvt_mem_free(io->mem, io, sizeof(*io));
}

static void io_stop_threads(struct kvt_io *io)
{
	pthread_mutex_lock(&io->lock);
	io->closing = true;
	io->engine_waiting = false;
	pthread_cond_broadcast(&io->cond);
	pthread_mutex_unlock(&io->lock);
	if (io->backend == IO_BACKEND_URING && io->thread_count)
		io_ring_wake(io);
	for (unsigned i = 0; i < io->thread_count; i++)
		pthread_join(io->threads[i], NULL);
	io->thread_count = 0;
}

int io_open(struct kvt_io **out, const struct io_config *cfg, struct kvt_mem *mem,
	    const struct kvt_logger *log)
{
	struct io_config c = { 0 };
	struct kvt_io *io;
	unsigned nthreads;
	int ret;

	if (!out || !mem)
		return KVT_ENULL;
	*out = NULL;
	if (cfg)
		c = *cfg;
	if (c.backend < IO_BACKEND_AUTO || c.backend > IO_BACKEND_PSYNC)
		return -EINVAL;
	if (!c.depth)
		c.depth = IO_DEPTH_DEFAULT;
	if (c.depth > IO_DEPTH_MAX)
		c.depth = IO_DEPTH_MAX;
	if (!c.write_depth)
		c.write_depth = IO_WRITE_DEPTH_DEFAULT;
	if (c.write_depth > c.depth)
		c.write_depth = c.depth;
	if (!c.threads)
		c.threads = IO_THREADS_DEFAULT;
	if (c.threads > IO_THREADS_MAX)
		c.threads = IO_THREADS_MAX;

	io = kvt_mem_calloc(mem, 1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->mem = mem;
	io->log = log;
	io->depth = c.depth;
	io->write_depth = c.write_depth;
	io->wake_fd = -1;
	pthread_mutex_init(&io->lock, NULL);
	pthread_cond_init(&io->cond, NULL);
	pthread_mutex_init(&io->fault_lock, NULL);
	io->threads = kvt_mem_calloc(mem, IO_THREADS_MAX, sizeof(pthread_t));
	if (!io->threads) {
		io_free(io);
		return -ENOMEM;
	}

	io->backend = IO_BACKEND_PSYNC;
	if (c.backend != IO_BACKEND_PSYNC) {
		ret = io_ring_setup(io);
		if (ret == 0) {
			io->backend = IO_BACKEND_URING;
		} else if (c.backend == IO_BACKEND_URING) {
			io_free(io);
			return ret;
		} else {
			kvt_logf(log, KVT_LOG_WARN,
				 "io: io_uring unavailable (%s); using %u psync threads",
				 strerror(-ret), c.threads);
		}
	}

	nthreads = io->backend == IO_BACKEND_URING ? 1 : c.threads;
	for (unsigned i = 0; i < nthreads; i++) {
		ret = pthread_create(&io->threads[i], NULL,
				     io->backend == IO_BACKEND_URING ? io_ring_main : io_psync_main,
				     io);
		if (ret) {
			io_stop_threads(io);
			io_free(io);
			return -ret;
		}
		io->thread_count++;
		pthread_setname_np(io->threads[i], "kvt-io");
	}
	kvt_logf(log, KVT_LOG_INFO, "io: %s, %u threads, depth %u, %u writes in flight at most",
		 io_backend_name(io), nthreads, io->depth, io->write_depth);
	*out = io;
	return 0;
}

void io_close(struct kvt_io *io)
{
	if (!io)
		return;
	io_stop_threads(io);
	io_free(io);
}

const char *io_backend_name(const struct kvt_io *io)
{
	return io && io->backend == IO_BACKEND_URING ? "uring" : "psync";
}

static int io_reg_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct iovec *)a)->iov_base;
	uintptr_t y = (uintptr_t)((const struct iovec *)b)->iov_base;
	return x < y ? -1 : x > y;
}

int io_register_buffers(struct kvt_io *io, const struct iovec *regions, unsigned n)
{
	struct iovec *v;
	uint64_t count = 0, max_len = 0;
	unsigned k = 0;
	bool busy;
	int ret = 0;

	if (!io || (n && !regions))
		return KVT_ENULL;
	for (unsigned i = 0; i < n; i++)
		count += (regions[i].iov_len + IO_REG_PIECE - 1) / IO_REG_PIECE;
	if (count == 0)
		return 0;
	pthread_mutex_lock(&io->lock);
	busy = io->submitted || io->reg_count;
	pthread_mutex_unlock(&io->lock);
	if (busy)
		return -EBUSY;
	if (count > IO_REG_MAX) {
		kvt_logf(io->log, KVT_LOG_WARN,
			 "io: %llu buffer pieces exceed %u; running without fixed buffers",
			 (unsigned long long)count, IO_REG_MAX);
		return -E2BIG;
	}
	v = kvt_mem_calloc(io->mem, (size_t)count, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		for (uint64_t off = 0; off < regions[i].iov_len; off += IO_REG_PIECE) {
			uint64_t len = regions[i].iov_len - off;
			v[k].iov_base = (char *)regions[i].iov_base + off;
			v[k].iov_len = len > IO_REG_PIECE ? IO_REG_PIECE : len;
			if (v[k].iov_len > max_len)
				max_len = v[k].iov_len;
			k++;
		}
	qsort(v, k, sizeof(*v), io_reg_cmp);
	/* From this thread while the engine may sleep in io_uring_enter:
	 * fine since Linux 5.13, where buffer registration stopped
	 * quiescing the ring (the armed eventfd poll would block it). */
	if (io->backend == IO_BACKEND_URING) {
		ret = io_uring_register_buffers(&io->ring, v, k);
		if (ret < 0) {
			kvt_logf(io->log, KVT_LOG_WARN,
				 "io: registering %u fixed buffers failed (%s); running without",
				 k, strerror(-ret));
			kvt_mem_free(io->mem, v, sizeof(*v) * count);
			return ret;
		}
	}
	pthread_mutex_lock(&io->lock);
	io->regs = v;
	io->reg_count = k;
	io->reg_max_len = max_len;
	io->regs_in_kernel = io->backend == IO_BACKEND_URING;
	pthread_mutex_unlock(&io->lock);
	return 0;
}

void io_align_check(struct kvt_io *io, uint32_t align)
{
	atomic_store(&io->align_check, align);
}

void io_align_note(struct kvt_io *io, const struct iovec *iov, unsigned iov_count, uint64_t off)
{
	uint32_t a = atomic_load_explicit(&io->align_check, memory_order_relaxed);
	uint64_t total = 0;
	bool bad;
	if (a == 0)
		return;
	bad = off % a != 0;
	for (unsigned i = 0; i < iov_count; i++) {
		bad |= (uintptr_t)iov[i].iov_base % a != 0 || iov[i].iov_len % a != 0;
		total += iov[i].iov_len;
	}
	bad |= total % a != 0;
	IO_INC(io, align_checked, 1);
	if (bad && IO_INC(io, align_bad, 1) == 0)
		kvt_logf(io->log, KVT_LOG_WARN,
			 "io: an I/O off %u-byte alignment: offset %llu, %u iovecs, %llu bytes", a,
			 (unsigned long long)off, iov_count, (unsigned long long)total);
}

void io_align_counts(struct kvt_io *io, uint64_t *checked, uint64_t *misaligned)
{
	*checked = atomic_load(&io->align_checked);
	*misaligned = atomic_load(&io->align_bad);
}

void io_submit(struct kvt_io *io, struct io_req *r)
{
	bool wake = false;
	if (r->opcode != IO_FSYNC)
		io_align_note(io, r->iov, r->iov_count, r->off);
	r->res = 0;
	r->done_len_ = 0;
	r->start_ns_ = 0;
	pthread_mutex_lock(&io->lock);
	io_q_append(&io->q[io_q_index(r)], r);
	r->state_ = IO_ST_QUEUED;
	io->queued++;
	io->submitted = true;
	if (io->backend == IO_BACKEND_URING) {
		wake = io->engine_waiting;
		io->engine_waiting = false;
	} else {
		pthread_cond_signal(&io->cond);
	}
	pthread_mutex_unlock(&io->lock);
	if (wake)
		io_ring_wake(io);
}

int io_cancel(struct kvt_io *io, struct io_req *r)
{
	int st;
	pthread_mutex_lock(&io->lock);
	st = r->state_ & IO_ST_MASK;
	if (st == IO_ST_QUEUED) {
		io_q_unlink(&io->q[io_q_index(r)], r);
		io->queued--;
		r->state_ = IO_ST_DONE;
	}
	pthread_mutex_unlock(&io->lock);
	if (st == IO_ST_INFLIGHT)
		return -EALREADY;
	if (st != IO_ST_QUEUED)
		return -ENOENT;
	r->res = -ECANCELED;
	if (r->done)
		r->done(r);
	return 0;
}

int io_open_file(struct kvt_io *io, int dir_fd, const char *name, int flags, mode_t mode,
		 bool *direct)
{
	int fd = openat(dir_fd, name, flags | O_DIRECT | O_CLOEXEC, mode);
	if (fd >= 0) {
		if (direct)
			*direct = true;
		return fd;
	}
	if (errno != EINVAL)
		return -errno;
	fd = openat(dir_fd, name, flags | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST && (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		/* Older kernels create the file before refusing O_DIRECT. */
		fd = openat(dir_fd, name, (flags & ~O_EXCL) | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (io) {
		IO_INC(io, st_odirect_refused, 1);
		if (!atomic_exchange(&io->odirect_warned, true))
			kvt_logf(io->log, KVT_LOG_WARN,
				 "io: %s: the file system refuses O_DIRECT; using the page cache",
				 name);
	}
	if (direct)
		*direct = false;
	return fd;
}

void io_stats(struct kvt_io *io, kvt_stats_fn fn, void *ctx)
{
	unsigned queued, inflight, fixed;
#define IO_LOAD(f) atomic_load_explicit(&io->f, memory_order_relaxed)
	pthread_mutex_lock(&io->lock);
	queued = io->queued;
	inflight = io->inflight;
	fixed = io->regs_in_kernel ? io->reg_count : 0;
	pthread_mutex_unlock(&io->lock);
	fn(ctx, "io.backend", 0, io_backend_name(io));
	fn(ctx, "io.fixed_buffers", fixed, NULL);
	fn(ctx, "io.fixed_ops", IO_LOAD(st_fixed_ops), NULL);
	fn(ctx, "io.odirect_refused", IO_LOAD(st_odirect_refused), NULL);
	fn(ctx, "io.reads", IO_LOAD(st_reads), NULL);
	fn(ctx, "io.read_bytes", IO_LOAD(st_read_bytes), NULL);
	fn(ctx, "io.writes", IO_LOAD(st_writes), NULL);
	fn(ctx, "io.write_bytes", IO_LOAD(st_write_bytes), NULL);
	fn(ctx, "io.fsyncs", IO_LOAD(st_fsyncs), NULL);
	fn(ctx, "io.errors", IO_LOAD(st_errors), NULL);
	fn(ctx, "io.faults_injected", IO_LOAD(st_faults), NULL);
	fn(ctx, "io.inflight", inflight, NULL);
	fn(ctx, "io.queued", queued, NULL);
	fn(ctx, "io.read_ns", IO_LOAD(st_read_ns), NULL);
	fn(ctx, "io.write_ns", IO_LOAD(st_write_ns), NULL);
#undef IO_LOAD
}

/* ------------------------------------------------------------------------
 * Faults and power loss
 */

int io_fault_add(struct kvt_io *io, const struct io_fault *f)
{
	int ret = 0;
	if (!io || !f)
		return KVT_ENULL;
	if (f->kind < IO_FAULT_EIO_READ || f->kind > IO_FAULT_SLOW_READ)
		return -EINVAL;
	pthread_mutex_lock(&io->fault_lock);
	if (io->fault_count == IO_FAULT_MAX) {
		ret = -ENOSPC;
	} else {
		struct io_fault_slot *s = &io->faults[io->fault_count++];
		memset(s, 0, sizeof(*s));
		s->f = *f;
		atomic_store(&io->faults_on, true);
	}
	pthread_mutex_unlock(&io->fault_lock);
	return ret;
}

int io_allocate(struct kvt_io *io, int fd, uint64_t len)
{
	bool fire = false;

	if (atomic_load(&io->faults_on)) {
		pthread_mutex_lock(&io->fault_lock);
		for (unsigned i = 0; i < io->fault_count && !fire; i++) {
			struct io_fault_slot *s = &io->faults[i];
			fire = s->f.kind == IO_FAULT_ALLOC_ENOSPC &&
			       io_fault_fires_locked(s, fd, UINT64_MAX);
		}
		pthread_mutex_unlock(&io->fault_lock);
		if (fire) {
			IO_INC(io, st_faults, 1);
			return -ENOSPC;
		}
	}
	if (fallocate(fd, 0, 0, (off_t)len) < 0 && errno != EOPNOTSUPP)
		return -errno;
	return 0;
}

void io_fault_clear(struct kvt_io *io)
{
	pthread_mutex_lock(&io->fault_lock);
	io->fault_count = 0;
	atomic_store(&io->faults_on, false);
	pthread_mutex_unlock(&io->fault_lock);
}

void io_fault_release(struct kvt_io *io)
{
	atomic_fetch_add(&io->fault_releases, 1);
}

void io_powerloss_arm(struct kvt_io *io, bool on)
{
	pthread_mutex_lock(&io->fault_lock);
	atomic_store(&io->pl_armed, on);
	if (!on)
		io_pre_free_all_locked(io);
	pthread_mutex_unlock(&io->fault_lock);
}

/* pwrite len bytes from buf at off.  0 or -errno. */
static int io_pwrite_full(int fd, const unsigned char *buf, uint64_t len, uint64_t off)
{
	uint64_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

/* xorshift64*: the cut's random choices, reproducible from its seed. */
static uint64_t io_pl_rand(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

/* Write what write p wrote (its first len bytes) through a buffered fd to
 * the same file.  0 or -errno. */
static int io_pl_apply(const struct io_pre *p, uint64_t len)
{
	char path[64];
	int fd, ret;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->fd);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = io_pwrite_full(fd, p->post, len, p->off);
	if (ret == 0 && fsync(fd) != 0)
		ret = -errno;
	close(fd);
	return ret;
}

int64_t io_powerloss_cut_random(struct kvt_io *io, uint64_t seed, struct io_pl_cut *cut)
{
	struct io_pre *p, **v;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull, n = 0, torn;
	int64_t ret = 0;

	memset(cut, 0, sizeof(*cut));
	/* Take the list, as io_powerloss_cut does (newest first). */
	pthread_mutex_lock(&io->fault_lock);
	for (p = io->pre; p; p = p->next)
		n++;
	v = n ? malloc(n * sizeof(*v)) : NULL;
	if (n && !v) {
		pthread_mutex_unlock(&io->fault_lock);
		return -ENOMEM;
	}
	n = 0;
	for (p = io->pre; p; p = p->next)
		v[n++] = p;
	io->pre = NULL;
	atomic_store(&io->pre_count, 0);
	pthread_mutex_unlock(&io->fault_lock);

	/* 1. The medium as of the last fsync: every pre-image back, newest
	 *    first, sizes restored. */
	for (uint64_t i = 0; i < n; i++) {
		int r;
		p = v[i];
		r = io_pwrite_full(p->fd, p->buf, p->len, p->off);
		if (r == 0 && p->old_size >= 0 && (uint64_t)p->old_size < p->off + p->len &&
		    ftruncate(p->fd, (off_t)p->old_size) != 0)
			r = -errno;
		if (r < 0 && ret == 0)
			ret = r;
	}
	/* 2. Each unsynced write reached the medium or not (one in two), in
	 *    any order (a shuffle); one of them only in part: its first k
	 *    512-byte sectors, 0 <= k < its sectors. */
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = io_pl_rand(&x) % i;
		p = v[i - 1];
		v[i - 1] = v[j];
		v[j] = p;
	}
	torn = n ? io_pl_rand(&x) % n : 0;
	for (uint64_t i = 0; i < n && ret == 0; i++) {
		uint64_t len = v[i]->len;
		p = v[i];
		if (i == torn) {
			uint64_t sectors = len / 512;
			len = sectors ? io_pl_rand(&x) % sectors * 512 : 0;
			cut->torn_off = p->off;
			cut->torn_len = len;
			cut->torn_fd = p->fd;
			cut->torn = 1;
		} else if (p->failed || !(io_pl_rand(&x) & 1)) {
			cut->dropped++;
			continue;
		}
		if (len) {
			int r = io_pl_apply(p, len);
			if (r < 0)
				ret = r;
		}
		if (i != torn)
			cut->kept++;
	}
	cut->writes = n;
	if (ret < 0)
		kvt_logf(io->log, KVT_LOG_WARN, "io: power-loss cut (random): %s",
			 strerror((int)-ret));

	for (uint64_t i = 0; i < n; i++)
		io_pre_free(io, v[i]);
	free(v);
	return ret < 0 ? ret : (int64_t)cut->dropped;
}

int64_t io_powerloss_cut(struct kvt_io *io)
{
	struct io_pre *list, *p, *nx;
	int64_t undone = 0;
	pthread_mutex_lock(&io->fault_lock);
	list = io->pre;
	io->pre = NULL;
	atomic_store(&io->pre_count, 0);
	pthread_mutex_unlock(&io->fault_lock);
	/* Newest first: each step puts back the file as it was before that write. */
	for (p = list; p; p = nx) {
		int ret;
		nx = p->next;
		ret = io_pwrite_full(p->fd, p->buf, p->len, p->off);
		if (ret == 0 && p->old_size >= 0 && (uint64_t)p->old_size < p->off + p->len &&
		    ftruncate(p->fd, (off_t)p->old_size) != 0)
			ret = -errno;
		if (ret < 0)
			kvt_logf(io->log, KVT_LOG_WARN,
				 "io: power-loss cut: restoring fd %d at %llu failed: %s", p->fd,
				 (unsigned long long)p->off, strerror(-ret));
		else
			undone++;
		io_pre_free(io, p);
	}
	return undone;
}

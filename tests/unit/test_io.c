/*
 * test_io.c - the I/O engine (lib/io.c), run once per backend: uring, then
 * psync.  Files live in a temporary directory under $TMPDIR (the build
 * directory), opened with O_DIRECT, so buffers are 4 KiB aligned.
 *
 * Covered: vectored O_DIRECT reads and writes with 1..1024 iovecs; hundreds
 * of concurrent requests from several threads; fixed buffers; priority
 * order (demand, then prefetch, then write); io_cancel; short reads at end
 * of file; each injected fault; power loss; the O_DIRECT refusal path;
 * io_close draining what is queued; invalid requests; allocation failures.  uring only: a
 * request held in flight by a pipe (-EALREADY) and continuation of a
 * partial transfer across iovecs.
 *
 * Under TSan only the psync half runs, by design: TSan cannot see the
 * kernel write io_uring's read buffers.  If io_uring, or registering fixed
 * buffers, is refused here, the rest still runs and the program then exits
 * 77 (a skip, saying what did not run), never 0: the uring half is what
 * kvtier uses, so a run without it is not a pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "t.h"

#define K4 4096u
#define IO_IOV_MAX_TEST 1025 /* one more than the engine takes */

static struct kvt_mem g_mem;
static int g_backend;
static int g_dfd;
static int g_file_seq;

/* ------------------------------------------------------------------------
 * Logger: counts warnings (the engine calls it from its own thread).
 */
static pthread_mutex_t g_log_m = PTHREAD_MUTEX_INITIALIZER;
static int g_warns;
/* What this run could not test (io_uring or fixed buffers refused here):
 * the program ends in a skip naming it. */
static char g_partial[256];

static void t_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	pthread_mutex_lock(&g_log_m);
	if (level == KVT_LOG_WARN)
		g_warns++;
	pthread_mutex_unlock(&g_log_m);
	fprintf(stderr, "  log[%d]: %s\n", level, msg);
}

static int warns(void)
{
	int n;
	pthread_mutex_lock(&g_log_m);
	n = g_warns;
	pthread_mutex_unlock(&g_log_m);
	return n;
}

static const struct kvt_logger g_log = { t_log, NULL, KVT_LOG_DEBUG };

/* ------------------------------------------------------------------------
 * Requests that record their completion.
 */
#define ORDER_MAX 4096

struct tstate {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned left;          /* submitted, done() not yet run */
	unsigned n_order;
	int order[ORDER_MAX];   /* ids in done() order */
	int gate_id;            /* done() of this id waits for t_release; -1 none */
	bool entered, released;
};

struct treq {
	struct io_req r;        /* first: done() casts back */
	struct tstate *st;
	int id;
	unsigned calls;         /* done() calls; st->m */
};

static void ts_init(struct tstate *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->m, NULL);
	pthread_cond_init(&st->c, NULL);
	st->gate_id = -1;
}

static void ts_fini(struct tstate *st)
{
	pthread_mutex_destroy(&st->m);
	pthread_cond_destroy(&st->c);
}

static void t_done(struct io_req *r)
{
	struct treq *t = (struct treq *)r;
	struct tstate *st = t->st;
	pthread_mutex_lock(&st->m);
	t->calls++;
	if (st->n_order < ORDER_MAX)
		st->order[st->n_order++] = t->id;
	if (t->id == st->gate_id) {
		st->entered = true;
		pthread_cond_broadcast(&st->c);
		while (!st->released)
			pthread_cond_wait(&st->c, &st->m);
	}
	st->left--;
	pthread_cond_broadcast(&st->c);
	pthread_mutex_unlock(&st->m);
}

static void t_prep(struct treq *t, struct tstate *st, int id, int op, int prio, int fd,
		   uint64_t off, const struct iovec *iov, unsigned n)
{
	memset(t, 0, sizeof(*t));
	t->st = st;
	t->id = id;
	t->r.opcode = (uint8_t)op;
	t->r.prio = (uint8_t)prio;
	t->r.fd = fd;
	t->r.off = off;
	t->r.iov = iov;
	t->r.iov_count = n;
	t->r.done = t_done;
}

static void t_submit(struct kvt_io *io, struct treq *t)
{
	pthread_mutex_lock(&t->st->m);
	t->st->left++;
	pthread_mutex_unlock(&t->st->m);
	io_submit(io, &t->r);
}

static void ts_wait_all(struct tstate *st)
{
	pthread_mutex_lock(&st->m);
	while (st->left)
		pthread_cond_wait(&st->c, &st->m);
	pthread_mutex_unlock(&st->m);
}

static void ts_wait_entered(struct tstate *st)
{
	pthread_mutex_lock(&st->m);
	while (!st->entered)
		pthread_cond_wait(&st->c, &st->m);
	pthread_mutex_unlock(&st->m);
}

static void ts_release(struct tstate *st)
{
	pthread_mutex_lock(&st->m);
	st->released = true;
	pthread_cond_broadcast(&st->c);
	pthread_mutex_unlock(&st->m);
}

static unsigned t_calls(struct treq *t)
{
	unsigned n;
	pthread_mutex_lock(&t->st->m);
	n = t->calls;
	pthread_mutex_unlock(&t->st->m);
	return n;
}

/* One request, waited for.  Returns res. */
static int64_t t_rw(struct kvt_io *io, int op, int fd, uint64_t off, const struct iovec *iov,
		    unsigned n)
{
	struct tstate *st = malloc(sizeof(*st));
	struct treq t;
	int64_t res;
	T_ASSERT(st);
	ts_init(st);
	t_prep(&t, st, 0, op, op == IO_READ ? IO_PRIO_DEMAND : IO_PRIO_WRITE, fd, off, iov, n);
	t_submit(io, &t);
	ts_wait_all(st);
	T_EQ_INT(t.calls, 1);
	res = t.r.res;
	ts_fini(st);
	free(st);
	return res;
}

static int64_t t_rw1(struct kvt_io *io, int op, int fd, uint64_t off, void *buf, size_t len)
{
	struct iovec v = { buf, len };
	return t_rw(io, op, fd, off, &v, 1);
}

static int64_t t_fsync(struct kvt_io *io, int fd)
{
	return t_rw(io, IO_FSYNC, fd, 0, NULL, 0);
}

/* ------------------------------------------------------------------------
 * Helpers
 */

struct stat_find {
	const char *name;
	uint64_t value;
	bool found;
};

static void stat_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct stat_find *f = ctx;
	(void)str;
	if (strcmp(name, f->name) == 0) {
		f->value = value;
		f->found = true;
	}
}

static uint64_t stat_get(struct kvt_io *io, const char *name)
{
	struct stat_find f = { name, 0, false };
	io_stats(io, stat_cb, &f);
	if (!f.found)
		T_FAIL("no stat %s", name);
	return f.value;
}

/* The engine gives a slot back just after done() returns: wait for the
 * in-flight count to drain to zero (it must, promptly). */
static void t_wait_idle(struct kvt_io *io)
{
	for (int i = 0; i < 5000 && stat_get(io, "io.inflight") != 0; i++)
		usleep(1000);
	T_EQ_U64(stat_get(io, "io.inflight"), 0);
}

static void *abuf(size_t len)
{
	void *p = aligned_alloc(K4, KVT_ALIGN_UP(len ? len : 1, K4));
	T_ASSERT(p);
	return p;
}

static struct kvt_io *t_open(unsigned depth, unsigned write_depth, unsigned threads)
{
	struct io_config cfg = { g_backend, depth, write_depth, threads };
	struct kvt_io *io = NULL;
	T_OK(io_open(&io, &cfg, &g_mem, &g_log));
	T_EQ_STR(io_backend_name(io), g_backend == IO_BACKEND_URING ? "uring" : "psync");
	return io;
}

/* A fresh file in the test directory, opened O_DIRECT (the build directory
 * is expected to allow it). */
static int t_file(struct kvt_io *io, char *name, size_t name_len)
{
	bool direct = false;
	int fd;
	snprintf(name, name_len, "f%d", ++g_file_seq);
	fd = io_open_file(io, g_dfd, name, O_CREAT | O_EXCL | O_RDWR, 0600, &direct);
	T_OK(fd);
	if (!direct)
		T_SKIP("the test directory refuses O_DIRECT");
	return fd;
}

/* Read the whole file through a buffered fd. */
static unsigned char *t_slurp(const char *name, size_t *len)
{
	int fd = openat(g_dfd, name, O_RDONLY);
	struct stat st;
	unsigned char *p;
	T_ASSERT(fd >= 0);
	T_ASSERT(fstat(fd, &st) == 0);
	*len = (size_t)st.st_size;
	p = malloc(*len + 1);
	T_ASSERT(p);
	T_EQ_INT(pread(fd, p, *len, 0), (long long)*len);
	close(fd);
	return p;
}

/* ------------------------------------------------------------------------
 * Tests
 */

/* Vectored O_DIRECT writes and reads with 1..1024 iovecs, scattered
 * differently on each side. */
static void test_vectors(void)
{
	static const unsigned counts[] = { 1, 2, 3, 7, 64, 255, 1024 };
	struct kvt_io *io = t_open(0, 0, 0);
	char name[32];
	int fd = t_file(io, name, sizeof(name));
	uint64_t off = 0;

	for (size_t c = 0; c < KVT_ARRAY_LEN(counts); c++) {
		unsigned n = counts[c];
		struct iovec *wv = calloc(n, sizeof(*wv)), *rv = calloc(n, sizeof(*rv));
		size_t total = 0;
		unsigned char *wb, *rb;
		T_ASSERT(wv && rv);
		/* Lengths 4, 8 or 12 KiB; write buffers with a 4 KiB gap between
		 * them, read buffers packed in reverse order. */
		for (unsigned i = 0; i < n; i++)
			total += K4 * (1 + (i * 7 + c) % 3);
		wb = abuf(total * 2);
		rb = abuf(total);
		t_fill(wb, total * 2, 1000 + c);
		memset(rb, 0xee, total);
		{
			size_t wpos = 0, rpos = total;
			for (unsigned i = 0; i < n; i++) {
				size_t len = K4 * (1 + (i * 7 + c) % 3);
				wv[i].iov_base = wb + wpos;
				wv[i].iov_len = len;
				wpos += len + (i % 2 ? K4 : 0);
				rpos -= len;
				rv[i].iov_base = rb + rpos;
				rv[i].iov_len = len;
			}
			T_ASSERT(wpos <= total * 2);
		}
		T_EQ_INT(t_rw(io, IO_WRITE, fd, off, wv, n), (long long)total);
		T_EQ_INT(t_rw(io, IO_READ, fd, off, rv, n), (long long)total);
		for (unsigned i = 0; i < n; i++)
			T_EQ_MEM(rv[i].iov_base, wv[i].iov_base, wv[i].iov_len);
		off += total;
		free(wb);
		free(rb);
		free(wv);
		free(rv);
	}
	T_EQ_INT(t_fsync(io, fd), 0);
	T_EQ_U64(stat_get(io, "io.fsyncs"), 1);
	T_EQ_U64(stat_get(io, "io.writes"), KVT_ARRAY_LEN(counts));
	T_EQ_U64(stat_get(io, "io.reads"), KVT_ARRAY_LEN(counts));
	T_EQ_U64(stat_get(io, "io.write_bytes"), off);
	T_EQ_U64(stat_get(io, "io.read_bytes"), off);
	T_EQ_U64(stat_get(io, "io.errors"), 0);
	t_wait_idle(io);
	T_EQ_U64(stat_get(io, "io.queued"), 0);
	close(fd);
	io_close(io);
}

/* Hundreds of requests in flight from several threads at once. */
#define MANY_THREADS 4
#define MANY_PER 160
#define MANY_FILE (8u << 20)

struct many_ctx {
	struct kvt_io *io;
	int fd;
	const unsigned char *shadow;  /* expected file contents */
	int idx;
};

static void *many_worker(void *arg)
{
	struct many_ctx *m = arg;
	struct tstate *st = malloc(sizeof(*st));
	struct treq *t = calloc(MANY_PER, sizeof(*t));
	struct iovec *v = calloc(MANY_PER * 2, sizeof(*v));
	unsigned char *bufs = abuf((size_t)MANY_PER * 32 * 1024);
	uint64_t x = 0x1234567ull + (uint64_t)m->idx * 77;
	/* Each thread also rewrites its own quarter of the second half. */
	uint64_t wbase = MANY_FILE / 2 + (uint64_t)m->idx * (MANY_FILE / 8);
	T_ASSERT(st && t && v);
	ts_init(st);
	for (int i = 0; i < MANY_PER; i++) {
		unsigned char *b = bufs + (size_t)i * 32 * 1024;
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		if (i % 4 == 3) {
			/* 16 KiB write, from the shadow (same bytes again). */
			uint64_t off = wbase + (uint64_t)(i / 4) * 16384;
			memcpy(b, m->shadow + off, 16384);
			v[2 * i].iov_base = b;
			v[2 * i].iov_len = 16384;
			t_prep(&t[i], st, i, IO_WRITE, IO_PRIO_WRITE, m->fd, off, &v[2 * i], 1);
		} else {
			/* Read 8..32 KiB from the first half, in two iovecs. */
			uint64_t off = (x % (MANY_FILE / 2 / K4 - 8)) * K4;
			size_t a = K4 * (1 + x % 4), bl = K4 * (1 + (x >> 8) % 4);
			v[2 * i].iov_base = b;
			v[2 * i].iov_len = a;
			v[2 * i + 1].iov_base = b + 16384;
			v[2 * i + 1].iov_len = bl;
			t_prep(&t[i], st, i, IO_READ, i % 3 ? IO_PRIO_DEMAND : IO_PRIO_PREFETCH,
			       m->fd, off, &v[2 * i], 2);
		}
		t_submit(m->io, &t[i]);
	}
	ts_wait_all(st);
	for (int i = 0; i < MANY_PER; i++) {
		uint64_t want = v[2 * i].iov_len + (t[i].r.opcode == IO_READ ? v[2 * i + 1].iov_len : 0);
		T_EQ_INT(t[i].calls, 1);
		T_EQ_INT(t[i].r.res, (long long)want);
		if (t[i].r.opcode == IO_READ) {
			T_EQ_MEM(v[2 * i].iov_base, m->shadow + t[i].r.off, v[2 * i].iov_len);
			T_EQ_MEM(v[2 * i + 1].iov_base, m->shadow + t[i].r.off + v[2 * i].iov_len,
				 v[2 * i + 1].iov_len);
		}
	}
	ts_fini(st);
	free(st);
	free(t);
	free(v);
	free(bufs);
	return NULL;
}

static void test_many(void)
{
	struct kvt_io *io = t_open(32, 4, 4);
	pthread_t th[MANY_THREADS];
	struct many_ctx m[MANY_THREADS];
	unsigned char *shadow = abuf(MANY_FILE), *back = abuf(MANY_FILE);
	char name[32];
	int fd = t_file(io, name, sizeof(name));

	t_fill(shadow, MANY_FILE, 7);
	for (uint64_t off = 0; off < MANY_FILE; off += 1u << 20)
		T_EQ_INT(t_rw1(io, IO_WRITE, fd, off, shadow + off, 1u << 20), 1 << 20);
	for (int i = 0; i < MANY_THREADS; i++) {
		m[i] = (struct many_ctx){ io, fd, shadow, i };
		T_EQ_INT(pthread_create(&th[i], NULL, many_worker, &m[i]), 0);
	}
	for (int i = 0; i < MANY_THREADS; i++)
		pthread_join(th[i], NULL);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, back, MANY_FILE), MANY_FILE);
	T_EQ_MEM(back, shadow, MANY_FILE);
	T_EQ_U64(stat_get(io, "io.errors"), 0);
	t_wait_idle(io);
	close(fd);
	io_close(io);
	free(shadow);
	free(back);
}

/* Registered buffers: single-iovec requests inside the region go fixed. */
static void test_fixed(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	const size_t region_len = 1u << 20;
	/* Map twice the region, register the first half only. */
	unsigned char *region = mmap(NULL, 2 * region_len, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *out = abuf(64 * 1024), *check = abuf(64 * 1024);
	struct iovec reg;
	char name[32];
	int fd = t_file(io, name, sizeof(name)), ret;
	uint64_t fixed_want = 0;

	T_ASSERT(region != MAP_FAILED);
	reg.iov_base = region;
	reg.iov_len = region_len;
	ret = io_register_buffers(io, &reg, 1);
	if (ret == -ENOMEM || ret == -EPERM) {
		fprintf(stderr, "  fixed buffers: registration refused (%s)\n", strerror(-ret));
		snprintf(g_partial, sizeof(g_partial),
			 "%s: registering fixed buffers refused (%s; see ulimit -l)",
			 g_backend == IO_BACKEND_URING ? "uring" : "psync", strerror(-ret));
		goto out;
	}
	T_EQ_INT(ret, 0);
	T_EQ_INT(io_register_buffers(io, &reg, 1), -EBUSY);
	T_EQ_U64(stat_get(io, "io.fixed_buffers"), g_backend == IO_BACKEND_URING ? 1 : 0);
	t_fill(region, region_len, 99);
	/* Inside, one iovec each: 8 writes then 8 reads into another part. */
	for (int i = 0; i < 8; i++)
		T_EQ_INT(t_rw1(io, IO_WRITE, fd, (uint64_t)i * 65536, region + (size_t)i * 65536,
			       65536), 65536);
	for (int i = 0; i < 8; i++) {
		unsigned char *dst = region + region_len / 2 + (size_t)i * 65536;
		memset(dst, 0, 65536);
		T_EQ_INT(t_rw1(io, IO_READ, fd, (uint64_t)i * 65536, dst, 65536), 65536);
		T_EQ_MEM(dst, region + (size_t)i * 65536, 65536);
	}
	fixed_want += 16;
	/* Outside the region. */
	t_fill(out, 65536, 5);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 1u << 20, out, 65536), 65536);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 1u << 20, check, 65536), 65536);
	T_EQ_MEM(check, out, 65536);
	/* Inside, but two iovecs: not fixed. */
	{
		struct iovec v[2] = { { region, K4 }, { region + 8 * K4, K4 } };
		T_EQ_INT(t_rw(io, IO_WRITE, fd, 2u << 20, v, 2), 2 * K4);
		T_EQ_INT(t_rw1(io, IO_READ, fd, 2u << 20, check, 2 * K4), 2 * K4);
		T_EQ_MEM(check, region, K4);
		T_EQ_MEM(check + K4, region + 8 * K4, K4);
	}
	/* Straddling the region's end: not fixed. */
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 3u << 20, region + region_len - K4, 2 * K4), 2 * K4);
	/* Its last page: fixed. */
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 3u << 20, region + region_len - K4, K4), K4);
	fixed_want++;
	T_EQ_U64(stat_get(io, "io.fixed_ops"), g_backend == IO_BACKEND_URING ? fixed_want : 0);
out:
	close(fd);
	io_close(io);
	munmap(region, 2 * region_len);
	free(out);
	free(check);
}

/*
 * Priority: depth 1.  Write 0's done() blocks (holding the only slot)
 * while 19 more writes, then a prefetch read, then a demand read are
 * queued.  Released, the engine must issue demand, prefetch, then the
 * writes in order.
 */
static void test_priority(void)
{
	struct kvt_io *io = t_open(1, 1, 4);
	struct tstate *st = malloc(sizeof(*st));
	struct treq t[22];
	struct iovec wv[20], rv[2];
	unsigned char *buf = abuf(22 * K4);
	char name[32];
	int fd = t_file(io, name, sizeof(name));

	T_ASSERT(st);
	ts_init(st);
	st->gate_id = 0;
	t_fill(buf, 22 * K4, 3);
	for (int i = 0; i < 20; i++) {
		wv[i] = (struct iovec){ buf + (size_t)i * K4, K4 };
		t_prep(&t[i], st, i, IO_WRITE, IO_PRIO_WRITE, fd, (uint64_t)i * K4, &wv[i], 1);
	}
	rv[0] = (struct iovec){ buf + 20 * K4, K4 };
	rv[1] = (struct iovec){ buf + 21 * K4, K4 };
	t_prep(&t[20], st, 20, IO_READ, IO_PRIO_PREFETCH, fd, 0, &rv[0], 1);
	t_prep(&t[21], st, 21, IO_READ, IO_PRIO_DEMAND, fd, 0, &rv[1], 1);
	t_submit(io, &t[0]);
	ts_wait_entered(st);
	for (int i = 1; i < 20; i++)
		t_submit(io, &t[i]);
	t_submit(io, &t[20]);
	t_submit(io, &t[21]);
	T_EQ_U64(stat_get(io, "io.queued"), 21);
	T_EQ_U64(stat_get(io, "io.inflight"), 1);
	ts_release(st);
	ts_wait_all(st);
	T_EQ_INT(st->n_order, 22);
	T_EQ_INT(st->order[0], 0);
	T_EQ_INT(st->order[1], 21);
	T_EQ_INT(st->order[2], 20);
	for (int i = 1; i < 20; i++)
		T_EQ_INT(st->order[2 + i], i);
	for (int i = 0; i < 22; i++)
		T_EQ_INT(t[i].r.res, K4);
	T_EQ_MEM(buf + 21 * K4, buf, K4);
	ts_fini(st);
	free(st);
	free(buf);
	close(fd);
	io_close(io);
}

/* Cancel queued requests (gate as above); in-flight and finished ones refuse. */
static void test_cancel(void)
{
	struct kvt_io *io = t_open(1, 1, 2);
	struct tstate *st = malloc(sizeof(*st));
	struct treq t[10];
	struct iovec v[10];
	unsigned char *buf = abuf(10 * K4);
	char name[32];
	int fd = t_file(io, name, sizeof(name));

	T_ASSERT(st);
	ts_init(st);
	st->gate_id = 0;
	t_fill(buf, 10 * K4, 4);
	for (int i = 0; i < 10; i++) {
		v[i] = (struct iovec){ buf + (size_t)i * K4, K4 };
		t_prep(&t[i], st, i, IO_WRITE, IO_PRIO_WRITE, fd, (uint64_t)i * K4, &v[i], 1);
	}
	T_EQ_INT(io_cancel(io, &t[0].r), -ENOENT); /* never submitted */
	t_submit(io, &t[0]);
	ts_wait_entered(st);
	for (int i = 1; i < 10; i++)
		t_submit(io, &t[i]);
	T_EQ_INT(io_cancel(io, &t[3].r), 0);
	T_EQ_INT(io_cancel(io, &t[9].r), 0); /* the tail */
	T_EQ_INT(io_cancel(io, &t[1].r), 0); /* the head */
	T_EQ_INT(t_calls(&t[3]), 1);
	T_EQ_INT(t[3].r.res, -ECANCELED);
	T_EQ_INT(t[1].r.res, -ECANCELED);
	T_EQ_INT(t[9].r.res, -ECANCELED);
	T_EQ_INT(io_cancel(io, &t[3].r), -ENOENT);
	T_EQ_INT(io_cancel(io, &t[0].r), -ENOENT); /* its done() is running */
	T_EQ_U64(stat_get(io, "io.queued"), 6);
	ts_release(st);
	ts_wait_all(st);
	for (int i = 0; i < 10; i++) {
		T_EQ_INT(t[i].calls, 1);
		T_EQ_INT(t[i].r.res, i == 1 || i == 3 || i == 9 ? -ECANCELED : (int)K4);
		T_EQ_INT(io_cancel(io, &t[i].r), -ENOENT);
	}
	/* Order: the gate (recorded on entry), the cancels, then the
	 * survivors in FIFO order. */
	{
		static const int want[] = { 0, 3, 9, 1, 2, 4, 5, 6, 7, 8 };
		T_EQ_INT(st->n_order, 10);
		for (int i = 0; i < 10; i++)
			T_EQ_INT(st->order[i], want[i]);
	}
	T_EQ_U64(stat_get(io, "io.writes"), 7);
	ts_fini(st);
	free(st);
	free(buf);
	close(fd);
	io_close(io);
}

/* Short reads at end of file, including an unaligned end under O_DIRECT. */
static void test_eof(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char *w = abuf(8192), *r = abuf(16384);
	struct iovec v[2] = { { r, 8192 }, { r + 8192, 8192 } };
	char name[32];
	int fd = t_file(io, name, sizeof(name));

	t_fill(w, 8192, 11);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, w, 8192), 8192);
	T_EQ_INT(ftruncate(fd, 6000), 0);
	memset(r, 0, 16384);
	T_EQ_INT(t_rw(io, IO_READ, fd, 0, v, 2), 6000);
	T_EQ_MEM(r, w, 6000);
	T_EQ_INT(t_rw(io, IO_READ, fd, 4096, v, 2), 6000 - 4096);
	T_EQ_MEM(r, w + 4096, 6000 - 4096);
	T_EQ_INT(t_rw(io, IO_READ, fd, 8192, v, 2), 0);
	T_EQ_INT(t_rw(io, IO_READ, fd, 1u << 20, v, 2), 0);
	T_EQ_U64(stat_get(io, "io.errors"), 0);
	free(w);
	free(r);
	close(fd);
	io_close(io);
}

/* Each fault kind, on a real file. */
static void test_faults(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char *old = abuf(16384), *neu = abuf(16384), *r = abuf(16384);
	char name[32], name2[32];
	int fd = t_file(io, name, sizeof(name)), fd2 = t_file(io, name2, sizeof(name2));
	struct io_fault f;
	uint64_t faults = 0;

	t_fill(old, 16384, 21);
	t_fill(neu, 16384, 22);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, old, 16384), 16384);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd2, 0, old, 16384), 16384);

	f = (struct io_fault){ .kind = 99, .fd = -1 };
	T_EQ_INT(io_fault_add(io, &f), -EINVAL);

	/* EIO on reads: skip one, fire once, on fd only. */
	f = (struct io_fault){ .kind = IO_FAULT_EIO_READ, .fd = fd, .skip = 1, .count = 1 };
	T_OK(io_fault_add(io, &f));
	T_EQ_INT(t_rw1(io, IO_READ, fd2, 0, r, 4096), 4096); /* other file: not counted */
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, old, 4096), 4096); /* a write: not counted */
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), 4096);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), -EIO);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), 4096);
	T_EQ_U64(stat_get(io, "io.faults_injected"), ++faults);
	io_fault_clear(io);

	/* EIO on writes, any file: nothing written. */
	f = (struct io_fault){ .kind = IO_FAULT_EIO_WRITE, .fd = -1, .count = 1 };
	T_OK(io_fault_add(io, &f));
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, neu, 16384), -EIO);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 16384), 16384);
	T_EQ_MEM(r, old, 16384);
	T_EQ_U64(stat_get(io, "io.faults_injected"), ++faults);
	io_fault_clear(io);

	/* Short read: half the bytes, and they are the right ones. */
	f = (struct io_fault){ .kind = IO_FAULT_SHORT_READ, .fd = -1, .count = 1 };
	T_OK(io_fault_add(io, &f));
	memset(r, 0, 16384);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 16384), 8192);
	T_EQ_MEM(r, old, 8192);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 16384), 16384);
	T_EQ_U64(stat_get(io, "io.faults_injected"), ++faults);
	io_fault_clear(io);

	/* ENOSPC: nothing written. */
	f = (struct io_fault){ .kind = IO_FAULT_ENOSPC, .fd = fd, .count = 1 };
	T_OK(io_fault_add(io, &f));
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, neu, 16384), -ENOSPC);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 16384), 16384);
	T_EQ_MEM(r, old, 16384);
	T_EQ_U64(stat_get(io, "io.faults_injected"), ++faults);
	io_fault_clear(io);

	/* Torn write: only the first 4 KiB of a 12 KiB write (in 3 iovecs) lands. */
	f = (struct io_fault){ .kind = IO_FAULT_TORN_WRITE, .fd = fd, .count = 1, .torn_bytes = 4096 };
	T_OK(io_fault_add(io, &f));
	{
		struct iovec v[3] = { { neu, 4096 }, { neu + 4096, 4096 }, { neu + 8192, 4096 } };
		T_EQ_INT(t_rw(io, IO_WRITE, fd, 4096, v, 3), -EIO);
	}
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 16384), 16384);
	T_EQ_MEM(r, old, 4096);
	T_EQ_MEM(r + 4096, neu, 4096);
	T_EQ_MEM(r + 8192, old + 8192, 8192);
	T_EQ_U64(stat_get(io, "io.faults_injected"), ++faults);
	io_fault_clear(io);

	/* count 0: until cleared. */
	f = (struct io_fault){ .kind = IO_FAULT_EIO_READ, .fd = -1 };
	T_OK(io_fault_add(io, &f));
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), -EIO);
	T_EQ_INT(t_rw1(io, IO_READ, fd2, 0, r, 4096), -EIO);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), -EIO);
	faults += 3;
	io_fault_clear(io);
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, r, 4096), 4096);
	T_EQ_U64(stat_get(io, "io.faults_injected"), faults);
	T_EQ_U64(stat_get(io, "io.errors"), faults - 1); /* a short read is no error */

	free(old);
	free(neu);
	free(r);
	close(fd);
	close(fd2);
	io_close(io);
}

/*
 * Power loss: only what an IO_FSYNC covered survives the cut.
 *
 *   f: P0 [0,16K) written and synced before arming.  Armed: A [0,8K),
 *      B [16K,32K) (extends), fsync(f), C [8K,16K), D [32K,48K) (extends).
 *   g: Q0 [0,8K) before arming; armed: E [0,8K), F [8K,12K) (extends);
 *      the fsync of f must not cover g.
 *   After the cut: f = A + P0[8K,16K) + B, 32 KiB; g = Q0, 8 KiB.
 */
static void test_powerloss(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char *p = abuf(6 * 16384);
	unsigned char *P0 = p, *A = p + 16384, *B = p + 32768, *C = p + 49152, *D = p + 65536,
		      *Q = p + 81920;
	char fname[32], gname[32];
	int f = t_file(io, fname, sizeof(fname)), g = t_file(io, gname, sizeof(gname));
	unsigned char *got;
	size_t len;

	t_fill(p, 6 * 16384, 31);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 0, P0, 16384), 16384);
	T_EQ_INT(t_rw1(io, IO_WRITE, g, 0, Q, 8192), 8192);
	T_EQ_INT(t_fsync(io, f), 0);
	T_EQ_INT(t_fsync(io, g), 0);
	io_powerloss_arm(io, true);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 0, A, 8192), 8192);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 16384, B, 16384), 16384);
	T_EQ_INT(t_rw1(io, IO_WRITE, g, 0, Q + 8192, 8192), 8192);
	T_EQ_INT(t_fsync(io, f), 0);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 8192, C, 8192), 8192);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 32768, D, 16384), 16384);
	T_EQ_INT(t_rw1(io, IO_WRITE, g, 8192, Q + 4096, 4096), 4096);
	T_EQ_INT(io_powerloss_cut(io), 4);

	got = t_slurp(fname, &len);
	T_EQ_INT(len, 32768);
	T_EQ_MEM(got, A, 8192);
	T_EQ_MEM(got + 8192, P0 + 8192, 8192);
	T_EQ_MEM(got + 16384, B, 16384);
	free(got);
	got = t_slurp(gname, &len);
	T_EQ_INT(len, 8192);
	T_EQ_MEM(got, Q, 8192);
	free(got);

	/* Still armed: the cut emptied the list; a second cut undoes nothing. */
	T_EQ_INT(io_powerloss_cut(io), 0);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 0, C, 8192), 8192);
	io_powerloss_arm(io, false); /* forgets */
	T_EQ_INT(io_powerloss_cut(io), 0);
	T_EQ_INT(t_rw1(io, IO_WRITE, f, 8192, C, 8192), 8192);
	T_EQ_INT(io_powerloss_cut(io), 0);
	got = t_slurp(fname, &len);
	T_EQ_MEM(got, C, 8192);
	T_EQ_MEM(got + 8192, C, 8192);
	free(got);

	free(p);
	close(f);
	close(g);
	io_close(io);
}

/* io_powerloss_cut_random: after the cut, each unsynced write's range
 * holds its old bytes or its new ones, except one write that holds a
 * prefix of whole 512-byte sectors of its new bytes, then old ones; the
 * synced write stays; over many seeds both outcomes and tears happen. */
static void test_powerloss_random(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	enum { W = 6, WL = 8192 };
	unsigned char *p = abuf((W + 2) * WL);
	unsigned char *old = p, *news = p + WL, *synced = p + (W + 1) * WL;
	char fname[32];
	int f = t_file(io, fname, sizeof(fname));
	unsigned kept_seen = 0, lost_seen = 0, torn_mid = 0;

	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct io_pl_cut cut;
		unsigned char *got;
		size_t len;
		unsigned torn = 0;
		t_fill(p, (W + 2) * WL, (uint32_t)seed);
		/* The old bytes everywhere, synced; then one synced write. */
		for (unsigned i = 0; i <= W; i++)
			T_EQ_INT(t_rw1(io, IO_WRITE, f, (uint64_t)i * WL, old, WL), WL);
		T_EQ_INT(t_fsync(io, f), 0);
		io_powerloss_arm(io, true);
		T_EQ_INT(t_rw1(io, IO_WRITE, f, (uint64_t)W * WL, synced, WL), WL);
		T_EQ_INT(t_fsync(io, f), 0);
		for (unsigned i = 0; i < W; i++)
			T_EQ_INT(t_rw1(io, IO_WRITE, f, (uint64_t)i * WL, news + 0, WL), WL);
		T_EQ_INT(io_powerloss_cut_random(io, seed, &cut), (int64_t)cut.dropped);
		T_EQ_U64(cut.writes, W);
		T_EQ_U64(cut.kept + cut.dropped + (uint64_t)cut.torn, W);
		T_EQ_INT(cut.torn, 1);
		T_EQ_U64(cut.torn_len % 512, 0);
		T_ASSERT(cut.torn_len < WL);
		got = t_slurp(fname, &len);
		T_EQ_INT(len, (W + 1) * WL);
		T_EQ_MEM(got + W * WL, synced, WL);
		for (unsigned i = 0; i < W; i++) {
			unsigned char *r = got + (size_t)i * WL;
			if ((uint64_t)i * WL == cut.torn_off) {
				T_EQ_MEM(r, news, cut.torn_len);
				T_EQ_MEM(r + cut.torn_len, old + cut.torn_len, WL - cut.torn_len);
				torn++;
				torn_mid += cut.torn_len > 0;
			} else if (memcmp(r, news, WL) == 0) {
				kept_seen++;
			} else {
				T_EQ_MEM(r, old, WL);
				lost_seen++;
			}
		}
		T_EQ_INT(torn, 1);
		free(got);
		io_powerloss_arm(io, false);
	}
	T_ASSERT(kept_seen > 0 && lost_seen > 0 && torn_mid > 0);
	free(p);
	close(f);
	io_close(io);
}

/*
 * A file system that refuses O_DIRECT: open buffered, warn once, count.
 * tmpfs (/dev/shm) refused it before Linux 6.6; procfs still does, so the
 * refusal path is always exercised there.
 */
static void test_odirect_refused(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char *buf = abuf(8192);
	uint64_t refused = 0;
	int warn0 = warns(), fd, dfd;
	bool direct = true;

	dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		fprintf(stderr, "  /dev/shm absent: that part skipped\n");
	} else {
		char name[64];
		snprintf(name, sizeof(name), "kvtier-test-io-%d", (int)getpid());
		fd = io_open_file(io, dfd, name, O_CREAT | O_EXCL | O_RDWR, 0600, &direct);
		T_OK(fd);
		if (direct) {
			fprintf(stderr, "  /dev/shm accepts O_DIRECT on this kernel\n");
		} else {
			refused++;
			/* Buffered: unaligned I/O works. */
			t_fill(buf, 8192, 41);
			T_EQ_INT(t_rw1(io, IO_WRITE, fd, 3, buf + 1, 5000), 5000);
			T_EQ_INT(t_rw1(io, IO_READ, fd, 3, buf + 6000, 2000), 2000);
			T_EQ_MEM(buf + 6000, buf + 1, 2000);
		}
		T_EQ_U64(stat_get(io, "io.odirect_refused"), refused);
		close(fd);
		T_EQ_INT(unlinkat(dfd, name, 0), 0);
		close(dfd);
	}

	dfd = open("/proc/self", O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		direct = true;
		fd = io_open_file(io, dfd, "status", O_RDONLY, 0, &direct);
		T_OK(fd);
		T_ASSERT(!direct);
		refused++;
		T_EQ_U64(stat_get(io, "io.odirect_refused"), refused);
		/* Size 0 by fstat: the first read completes short, by design. */
		memset(buf, 0, 8192);
		{
			int64_t n = t_rw1(io, IO_READ, fd, 0, buf, 8192);
			T_ASSERT(n > 5);
			T_EQ_MEM(buf, "Name:", 5);
		}
		close(fd);
		close(dfd);
	}
	T_EQ_INT(warns() - warn0, refused ? 1 : 0);
	T_EQ_INT(io_open_file(io, g_dfd, "no-such-file", O_RDONLY, 0, &direct), -ENOENT);
	free(buf);
	io_close(io);
}

/* io_close runs everything already queued before it returns. */
static void test_close_drain(void)
{
	enum { N = 300 };
	struct kvt_io *io = t_open(2, 1, 2);
	struct tstate *st = malloc(sizeof(*st));
	struct treq *t = calloc(N, sizeof(*t));
	struct iovec *v = calloc(N, sizeof(*v));
	unsigned char *buf = abuf((size_t)N * K4), *back = abuf((size_t)N * K4);
	char name[32];
	int fd = t_file(io, name, sizeof(name));

	T_ASSERT(st && t && v);
	ts_init(st);
	t_fill(buf, (size_t)N * K4, 51);
	for (int i = 0; i < N; i++) {
		v[i] = (struct iovec){ buf + (size_t)i * K4, K4 };
		if (i % 3 == 2)
			t_prep(&t[i], st, i, IO_FSYNC, IO_PRIO_WRITE, fd, 0, NULL, 0);
		else
			t_prep(&t[i], st, i, IO_WRITE, i % 2 ? IO_PRIO_WRITE : IO_PRIO_PREFETCH, fd,
			       (uint64_t)i * K4, &v[i], 1);
		t_submit(io, &t[i]);
	}
	io_close(io);
	T_EQ_INT(st->left, 0);
	for (int i = 0; i < N; i++) {
		T_EQ_INT(t[i].calls, 1);
		T_EQ_INT(t[i].r.res, i % 3 == 2 ? 0 : K4);
	}
	io = t_open(0, 0, 0);
	/* The last request is an fsync: the file ends after request N - 2. */
	T_EQ_INT(t_rw1(io, IO_READ, fd, 0, back, (size_t)N * K4), (N - 1) * K4);
	for (int i = 0; i < N; i++)
		if (i % 3 != 2)
			T_EQ_MEM(back + (size_t)i * K4, buf + (size_t)i * K4, K4);
	io_close(io);
	ts_fini(st);
	free(st);
	free(t);
	free(v);
	free(buf);
	free(back);
	close(fd);
}

/* Malformed requests complete with -EINVAL through done(). */
static void test_invalid(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char *buf = abuf(K4);
	struct iovec v = { buf, K4 };
	char name[32];
	int fd = t_file(io, name, sizeof(name));
	struct tstate *st = malloc(sizeof(*st));
	struct treq t[4];

	T_ASSERT(st);
	ts_init(st);
	t_prep(&t[0], st, 0, IO_READ, IO_PRIO_DEMAND, fd, 0, &v, 0);
	t_prep(&t[1], st, 1, IO_READ, 7, fd, 0, &v, 1);
	t_prep(&t[2], st, 2, 9, IO_PRIO_DEMAND, fd, 0, &v, 1);
	t_prep(&t[3], st, 3, IO_WRITE, IO_PRIO_WRITE, fd, 0, &v, IO_IOV_MAX_TEST);
	for (int i = 0; i < 4; i++)
		t_submit(io, &t[i]);
	ts_wait_all(st);
	for (int i = 0; i < 4; i++)
		T_EQ_INT(t[i].r.res, -EINVAL);
	T_EQ_U64(stat_get(io, "io.errors"), 4);
	ts_fini(st);
	free(st);
	free(buf);
	close(fd);
	io_close(io);
}

/* Allocation failures: io_open fails cleanly (or, in auto mode, falls
 * back), and a power-loss pre-image that cannot be saved fails its write. */
static void test_allocfail(void)
{
	int64_t before = atomic_load(&g_mem.bytes);
	unsigned char *buf = abuf(K4);
	struct kvt_io *io;
	char name[32];
	int fd;

	for (int n = 1; n <= 6; n++) {
		struct io_config cfg = { g_backend, 0, 0, 0 };
		int ret;
		io = NULL;
		kvt_mem_fail_nth(&g_mem, n);
		ret = io_open(&io, &cfg, &g_mem, &g_log);
		kvt_mem_fail_nth(&g_mem, 0);
		if (ret == 0)
			io_close(io);
		else
			T_EQ_INT(ret, -ENOMEM);
		T_EQ_INT(atomic_load(&g_mem.bytes), before);
	}
	io = t_open(0, 0, 0);
	fd = t_file(io, name, sizeof(name));
	t_fill(buf, K4, 71);
	io_powerloss_arm(io, true);
	kvt_mem_fail_nth(&g_mem, 1);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, buf, K4), -ENOMEM);
	kvt_mem_fail_nth(&g_mem, 0);
	T_EQ_INT(t_rw1(io, IO_WRITE, fd, 0, buf, K4), K4);
	T_EQ_INT(io_powerloss_cut(io), 1);
	T_EQ_INT(lseek(fd, 0, SEEK_END), 0);
	free(buf);
	close(fd);
	io_close(io);
}

/*
 * uring only (pread on a pipe is ESPIPE): a read of a pipe stays in
 * flight until bytes arrive, so io_cancel answers -EALREADY; bytes that
 * arrive in pieces make the engine continue the transfer, splitting an
 * iovec.
 */
static void test_pipe(void)
{
	struct kvt_io *io = t_open(0, 0, 0);
	unsigned char src[8192], dst[8192];
	struct iovec v[3] = { { dst, 1000 }, { dst + 1000, 3000 }, { dst + 4000, 4192 } };
	struct tstate *st = malloc(sizeof(*st));
	struct treq t;
	int p[2], ret = 0;

	T_ASSERT(st);
	T_EQ_INT(pipe(p), 0);
	ts_init(st);
	t_fill(src, sizeof(src), 61);
	memset(dst, 0, sizeof(dst));
	t_prep(&t, st, 0, IO_READ, IO_PRIO_DEMAND, p[0], 0, v, 3);
	t_submit(io, &t);
	/* Wait until it is taken: cancelling it while queued would succeed. */
	for (int i = 0; i < 5000 && stat_get(io, "io.inflight") != 1; i++)
		usleep(1000);
	T_EQ_U64(stat_get(io, "io.inflight"), 1);
	ret = io_cancel(io, &t.r);
	T_EQ_INT(ret, -EALREADY);
	usleep(20000);
	T_EQ_INT(write(p[1], src, 2500), 2500);
	usleep(20000);
	T_EQ_INT(write(p[1], src + 2500, 3000), 3000);
	usleep(20000);
	T_EQ_INT(write(p[1], src + 5500, 2692), 2692);
	ts_wait_all(st);
	T_EQ_INT(t.r.res, 8192);
	T_EQ_MEM(dst, src, 8192);
	T_EQ_INT(io_cancel(io, &t.r), -ENOENT);
	ts_fini(st);
	free(st);
	close(p[0]);
	close(p[1]);
	io_close(io);
}

static void run_all(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
		bool uring_only;
	} tests[] = {
		{ "vectors", test_vectors, false },
		{ "many", test_many, false },
		{ "fixed", test_fixed, false },
		{ "priority", test_priority, false },
		{ "cancel", test_cancel, false },
		{ "eof", test_eof, false },
		{ "faults", test_faults, false },
		{ "powerloss", test_powerloss, false },
		{ "powerloss_random", test_powerloss_random, false },
		{ "odirect_refused", test_odirect_refused, false },
		{ "close_drain", test_close_drain, false },
		{ "invalid", test_invalid, false },
		{ "allocfail", test_allocfail, false },
		{ "pipe", test_pipe, true },
	};
	const char *b = g_backend == IO_BACKEND_URING ? "uring" : "psync";
	for (size_t i = 0; i < KVT_ARRAY_LEN(tests); i++) {
		int64_t before = atomic_load(&g_mem.bytes);
		if (tests[i].uring_only && g_backend != IO_BACKEND_URING)
			continue;
		fprintf(stderr, "%s: %s\n", b, tests[i].name);
		tests[i].fn();
		T_EQ_INT(atomic_load(&g_mem.bytes), before);
	}
}

static bool uring_available(void)
{
	struct io_config cfg = { IO_BACKEND_URING, 4, 1, 1 };
	struct kvt_io *io = NULL;
	int ret = io_open(&io, &cfg, &g_mem, &g_log);
	if (ret < 0) {
		snprintf(g_partial, sizeof(g_partial),
			 "io_uring refused here (%s): the uring half did not run", strerror(-ret));
		fprintf(stderr, "uring: %s\n", g_partial);
		return false;
	}
	io_close(io);
	return true;
}

int main(void)
{
	char *dir = t_mkdtemp();

	kvt_mem_init(&g_mem);
	g_dfd = open(dir, O_RDONLY | O_DIRECTORY);
	T_ASSERT(g_dfd >= 0);

	/* AUTO opens something and names it. */
	{
		struct kvt_io *io = NULL;
		T_OK(io_open(&io, NULL, &g_mem, &g_log));
		T_ASSERT(strcmp(io_backend_name(io), "uring") == 0 ||
			 strcmp(io_backend_name(io), "psync") == 0);
		io_close(io);
	}

	if (T_TSAN) {
		fprintf(stderr, "uring: not run under TSan (by design)\n");
	} else if (uring_available()) {
		g_backend = IO_BACKEND_URING;
		run_all();
	}
	g_backend = IO_BACKEND_PSYNC;
	run_all();

	T_EQ_INT(atomic_load(&g_mem.bytes), 0);
	close(g_dfd);
	t_rmtree(dir);
	free(dir);
	if (g_partial[0])
		T_SKIP("%s; everything else passed", g_partial);
	return 0;
}

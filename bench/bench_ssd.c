/*
 * bench_ssd.c - "kvtier bench ssd": the SSD tier against fio, and
 * "kvtier bench recovery": reopening a store after kill -9.
 *
 * Measures libkvtier's SSD tier through include/kvtier.h alone, the way
 * doc/design-notes.md ("Measuring") asks: fio runs in the same run, on the same
 * file system, with the same block size, queue depth and file state; A and
 * B are interleaved round after round (the order flips every round) and
 * medians are reported; reads are proven to come from the device by the
 * process's own I/O counters (/proc/self/io).  Every value read is checked
 * byte for byte; a wrong byte or a library error exits 1.  Targets missed do
 * not change the exit status (CI runs --smoke and never judges ratios).
 *
 * One round of one value size, in a fresh run directory under --dir:
 *
 *     src [v0][v1]...[vN-1]        caller's put sources (N * size >= footprint)
 *       |
 *       +-- kvt put, write-through --> store kvt-<size>-<round>/ (fresh)
 *       |     paced on ssd.writedown_pending_bytes, so nothing is shed;
 *       |     timed from the first put to kvt_flush() returning (fdatasync)
 *       +-- fio --rw=write, bs = a write's -------> fio.dat (fresh, fallocated)
 *             end_fsync=1
 *     close the store; reopen it: the DRAM tier is empty (cold)
 *     dst [v0][v1]...[vN-1] <-- kvt get, every value once, random order,
 *                               --qd requests in flight, from SSD only
 *     fio --rw=randread, bs = a get's read, iodepth = --qd, over fio.dat
 *
 * Record and block: fio's blocks are the store's I/Os at the format it
 * writes (ssd.format, the library's default unless -o sets it; bs_shape).
 * At format 2 -- and at format 3 for a value no batch takes (256 KiB and
 * up) -- a value is one record, a 512-byte header plus the value rounded
 * up to 512 bytes, written and read with one I/O each: fio writes and
 * reads blocks of the record's size.  At format 3 the writer puts up to
 * 32 such values under one batch header in one write, and a get reads the
 * value alone: fio writes blocks of a full batch (the header and the
 * values, as the writer cuts it) and reads blocks of one value.  So both
 * issue the same I/Os.  kvtier's GB/s counts value bytes only (the header
 * is honest overhead), fio's counts its blocks.  fio's GB/s is its own
 * bw_bytes (io_bytes over its runtime, which includes end_fsync:
 * backend.c, do_io()); kvtier's is timed here.
 *
 * Recovery: a child process opens a store (write-through, a checkpoint
 * after K sealed segments, K ~ 90% of the segments the run fills), writes
 * --blocks blocks, flushes, tells the parent and waits; the parent SIGKILLs
 * it, drops the store's files from the page cache, times kvt_store_open
 * (wall clock, and the store's own ssd.recovery_ns), reads what recovery
 * scanned from the ssd.recovery_* statistics and verifies a sample of the
 * blocks byte for byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvtier.h"

#include "bench.h"
#include "ssdfmt.h" /* the record and batch layouts fio's blocks follow */

#define BS_KIB (UINT64_C(1) << 10)
#define BS_MIB (UINT64_C(1) << 20)
#define BS_GIB (UINT64_C(1) << 30)

#define BS_ALIGN 4096u             /* caller buffers, value slots, record units */
#define BS_KEY_LEN 32u             /* the bench's keys (bs_key) */
#define BS_SUM_PER_REC 128u        /* summary bytes per record, an upper estimate */
#define BS_SIZES_MAX 16
#define BS_STORE_OPTS_MAX 32
#define BS_ROUNDS_MAX BENCH_MEDIAN_MAX
#define BS_QD_MAX 1024u
#define BS_POISON 0x5a
#define BS_KEEP_FREE (10 * BS_GIB) /* refuse runs that would leave less free */
#define BS_STALL_S 60.0            /* no write-down progress for this long: stuck */
#define BS_PATTERNS 64             /* recovery: distinct value patterns */

/* Targets from the issue; judged only outside --smoke. */
#define BS_TARGET_RATIO 0.9
#define BS_SUSPECT_RATIO 1.1
#define BS_TARGET_RECOVERY_S 2.0

#define BS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct bs_opts {
	bool smoke;
	bool json;
	bool progress;                  /* stderr is a TTY */
	bool keep;                      /* leave the run directory behind */
	bool recovery;                  /* bench ssd: add the recovery row */
	const char *dir;                /* where the run directory is made */
	const char *fio;                /* the fio program */
	const char *io;                 /* ssd.io */
	const char *fio_opts[BS_STORE_OPTS_MAX]; /* extra fio arguments, appended */
	unsigned fio_opt_count;
	uint64_t sizes[BS_SIZES_MAX];
	unsigned size_count;
	uint64_t footprint;             /* value bytes per size and round */
	unsigned rounds;
	unsigned qd;                    /* reads in flight: kvtier and fio */
	unsigned write_qd;              /* fio's iodepth for the writes */
	unsigned io_depth;              /* ssd.io_depth */
	uint64_t dram;                  /* DRAM tier capacity (a floor for bench ssd) */
	uint64_t segment;               /* ssd.segment */
	/* recovery */
	uint64_t blocks;
	uint64_t value;
	unsigned verify;                /* blocks checked after the reopen */
	const char *store_opts[BS_STORE_OPTS_MAX]; /* "name=value", applied last */
	unsigned store_opt_count;
};

/* A row of the human table (JSON is printed straight from the figures). */
struct bs {
	const char *who;      /* "kvtier bench ssd", for messages */
	struct bs_opts o;
	char run_dir[4096];   /* made by mkdtemp, removed at the end */
	char blk_stat[64];    /* /sys/dev/block/M:m/stat of its device, or "" */
	bool have_fio;
	unsigned targets_missed;
	unsigned suspects;
	bool header_done;
	uint64_t max_disk;    /* bytes one round of the largest size puts on disk */
};

/* ------------------------------------------------------------------------
 * Small helpers: time, bytes, sizes, output.
 */

static void bs_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Offset of the first byte of p that differs from bench_fill(seed), or -1. */
static int64_t bs_check(const uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed, w;
	for (size_t off = 0; off < len; off += 8) {
		size_t n = len - off < 8 ? len - off : 8;
		w = bench_xorshift(&x);
		if (memcmp(p + off, &w, n) == 0)
			continue;
		for (size_t k = 0; k < n; k++)
			if (p[off + k] != (uint8_t)(w >> (8 * k)))
				return (int64_t)(off + k);
	}
	return -1;
}

/* The 32-byte key of value i of a size (as bench dram derives them). */
static void bs_key(struct kvt_key *key, uint64_t size, uint64_t i)
{
	uint64_t w[BS_KEY_LEN / 8];
	for (unsigned k = 0; k < BS_KEY_LEN / 8; k++)
		w[k] = bench_splitmix(bench_seed(size, i) + k);
	(void)kvt_key_set(key, w, sizeof(w));
}

/* kvtier's record alignment: 512, or 4096 with -o ssd.dio_align=4096 (a
 * 4Kn drive's layout: header and value padding in 4096-byte units). */
static uint32_t bs_rec_unit = SSD_REC_ALIGN;
/* The layout the bench's stores write: ssd.format's default, or -o's. */
static unsigned bs_format;

/* Bytes of kvtier's record for a one-part value: header + value in units
 * of the record alignment. */
static uint64_t bs_rec_len(uint64_t value)
{
	return ssd_rec_hdr_len(1, bs_rec_unit) + bench_align_up(value, bs_rec_unit);
}

/* One size's I/O shape: what the store writes and reads per I/O. */
struct bs_shape {
	uint64_t wr_bs;    /* bytes of one write: a record, or a full batch */
	unsigned wr_vals;  /* values it holds */
	uint64_t rd_bs;    /* bytes one get reads: a record, or a batched value */
};

/*
 * The I/Os of a store at bs_format for values of `value` bytes under
 * write-through with a backlog (the bench keeps one): at format 2, or a
 * value over SSD_BATCH_VALUE_MAX, a record per value, read whole.  At
 * format 3 a full batch as lib/tier/ssd/ssd.c's writer cuts it ("Batches"):
 * up to SSD_BATCH_MAX values while their header (one namespace, keys of
 * BS_KEY_LEN) fits SSD_BATCH_HDR_MAX (ssd_batch_hdr_len) and their padded
 * values ssd_batch_values_max(segment), header and values in one write;
 * a get reads the value alone (its value_crc checks it).  The writer's
 * other bounds do not bind here: its 1024 iovecs (values under 1 MiB are
 * at most 256 DRAM runs of 4 KiB or more) and ssd.writedown_window (8M
 * by default; a -o under a batch's size cuts batches short, which the
 * row's batch mean shows).  A batch of one value is written as a record.
 */
static void bs_shape(uint64_t value, uint64_t segment, struct bs_shape *sh)
{
	uint64_t padded = bench_align_up(value, bs_rec_unit);
	uint64_t key_pad = ssd_batch_ent_len(BS_KEY_LEN) - SSD_BATCH_ENT_FIXED;
	uint32_t hdr = 0;
	unsigned n = 0;

	sh->wr_bs = sh->rd_bs = bs_rec_len(value);
	sh->wr_vals = 1;
	if (bs_format < 3 || value > SSD_BATCH_VALUE_MAX)
		return;
	while (n < SSD_BATCH_MAX && (n + 1) * padded <= ssd_batch_values_max(segment)) {
		uint32_t h = ssd_batch_hdr_len(n + 1, 1, (n + 1) * key_pad, bs_rec_unit);
		if (h == 0)
			break;
		hdr = h;
		n++;
	}
	if (n < 2)
		return;
	sh->wr_bs = hdr + n * padded;
	sh->wr_vals = n;
	sh->rd_bs = padded;
}

static void bs_cell_print(struct bs *b, const struct bench_cell *c)
{
	bench_cell_print(c, b->o.json, b->o.progress, &b->header_done, 14, 7);
}

static void bs_json_rounds(const char *name, const double *v, unsigned n, const char *fmt)
{
	printf(",\"%s\":[", name);
	for (unsigned r = 0; r < n; r++) {
		if (r)
			putchar(',');
		printf(fmt, v[r]);
	}
	putchar(']');
}

/* ------------------------------------------------------------------------
 * The machine: I/O counters, free space, files.
 */

/* Bytes an unprivileged process may still allocate on the file system of path. */
static int bs_free_bytes(const char *path, uint64_t *out)
{
	struct statvfs v;
	if (statvfs(path, &v) < 0)
		return -errno;
	*out = (uint64_t)v.f_bavail * v.f_frsize;
	return 0;
}

/*
 * Requests and bytes the block device under the run directory completed:
 * the device's own count (whole device, so other processes' I/O shows up
 * too).  Its average request size says how each side's I/O reached the
 * device after the block layer split or merged it.
 */
struct bs_blk {
	uint64_t rd_ios, rd_bytes, wr_ios, wr_bytes;
};

static void bs_blk_find(struct bs *b)
{
	struct stat st;
	b->blk_stat[0] = '\0';
	if (stat(b->run_dir, &st) < 0)
		return;
	snprintf(b->blk_stat, sizeof(b->blk_stat), "/sys/dev/block/%u:%u/stat",
		 major(st.st_dev), minor(st.st_dev));
	if (access(b->blk_stat, R_OK) < 0)
		b->blk_stat[0] = '\0';
}

static int bs_blk_read(const struct bs *b, struct bs_blk *out)
{
	unsigned long long v[7];
	FILE *f = b->blk_stat[0] ? fopen(b->blk_stat, "r") : NULL;
	int n = 0;
	if (f == NULL)
		return -1;
	n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &v[6]);
	fclose(f);
	if (n != 7)
		return -1;
	out->rd_ios = v[0];
	out->rd_bytes = v[2] * 512;
	out->wr_ios = v[4];
	out->wr_bytes = v[6] * 512;
	return 0;
}

/* Average bytes per device request between a and b (-1: unknown). */
static double bs_blk_req(bool ok, const struct bs_blk *a, const struct bs_blk *b, bool rd)
{
	uint64_t ios = rd ? b->rd_ios - a->rd_ios : b->wr_ios - a->wr_ios;
	uint64_t bytes = rd ? b->rd_bytes - a->rd_bytes : b->wr_bytes - a->wr_bytes;
	return ok && ios ? (double)bytes / (double)ios : -1;
}

static int bs_drop_fn(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag != FTW_F)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fdatasync(fd);
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	return 0;
}

/*
 * Evict every file under path from the page cache, so what a reopen reads
 * comes from the device (the segments are O_DIRECT already; the checkpoint
 * and the registry are read through the cache).
 */
static void bs_drop_cache(const char *path)
{
	(void)nftw(path, bs_drop_fn, 16, FTW_PHYS);
}

/* ------------------------------------------------------------------------
 * Stores.
 */

/* Several numeric statistics in one walk of kvt_store_stats. */
struct bs_statq {
	const char *const *names;
	uint64_t *vals;
	unsigned n;
	uint64_t found;       /* bit i: names[i] seen */
};

static void bs_statq_fn(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct bs_statq *q = ctx;
	if (str != NULL)
		return;
	for (unsigned i = 0; i < q->n; i++) {
		if (strcmp(name, q->names[i]) == 0) {
			q->vals[i] = value;
			q->found |= UINT64_C(1) << i;
			return;
		}
	}
}

/* Fill vals[0..n) (n <= 64).  Returns 0, or -1 after printing what is missing. */
static int bs_stats(const struct bs *b, struct kvt_store *s, const char *const *names,
		    uint64_t *vals, unsigned n)
{
	struct bs_statq q = { .names = names, .vals = vals, .n = n };
	int rc = kvt_store_stats(s, bs_statq_fn, &q);
	if (rc < 0) {
		bench_err(b->who, "kvt_store_stats: %s", kvt_strerror(rc));
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (!(q.found & (UINT64_C(1) << i))) {
			bench_err(b->who, "the store has no statistic \"%s\"", names[i]);
			return -1;
		}
	}
	return 0;
}

/* The statistics every phase reads, before and after. */
enum {
	ST_WD_BLOCKS, ST_WD_BYTES, ST_WD_SHED, ST_WD_SKIPPED, ST_WD_ERRORS, ST_SSD_BLOCKS,
	ST_SSD_READS, ST_SSD_READ_BYTES, ST_SSD_READ_MISSES, ST_CRC_ERRORS, ST_HDR_ERRORS,
	ST_IO_ERRORS, ST_SEG_EVICTED, ST_SEG_SEALED, ST_CKPTS, ST_DRAM_MISSES, ST_DRAM_BLOCKS,
	ST_IO_READ_BYTES, ST_IO_WRITE_BYTES, ST_IO_FSYNCS, ST_ODIRECT_REFUSED, ST_BATCHES,
	ST_BATCHED, ST_COUNT
};
static const char *const bs_stat_names[ST_COUNT] = {
	"ssd.writedown_blocks", "ssd.writedown_bytes", "ssd.writedown_shed",
	"ssd.writedown_skipped", "ssd.writedown_errors", "ssd.blocks", "ssd.reads",
	"ssd.read_bytes", "ssd.read_misses", "ssd.crc_errors", "ssd.header_errors",
	"ssd.io_errors", "ssd.segments_evicted", "ssd.segments_sealed", "ssd.checkpoints",
	"dram.misses", "dram.blocks", "io.read_bytes", "io.write_bytes", "io.fsyncs",
	"io.odirect_refused", "ssd.batches", "ssd.batched_blocks",
};

/* Write pacing: the backlog and the writes the tier has in flight. */
enum { PQ_PENDING, PQ_INFLIGHT, PQ_WRITTEN, PQ_COUNT };
static const char *const bs_pace_names[PQ_COUNT] = {
	"ssd.writedown_pending_bytes", "io.inflight", "ssd.writedown_blocks",
};

static const struct kvt_ns_desc bs_ns_desc = {
	.model = "kvtier-bench-ssd",
	.dtype = "bf16",
	.layout = "opaque",
	.block_tokens = 16,
	.tp_rank = 0, .tp_size = 1,
	.pp_rank = 0, .pp_size = 1,
};

/* What one store of the bench is opened with. */
struct bs_store_cfg {
	const char *path;
	uint64_t dram;          /* dram.capacity, bytes (a MiB multiple) */
	bool prefault;
	uint64_t ssd_cap;       /* ssd.capacity, bytes (a segment multiple) */
	uint64_t segment;
	uint64_t wd_max;        /* ssd.writedown_max; 0: the library's default */
	unsigned ckpt_seals;    /* ssd.checkpoint_seals; 0: the library's default */
	int log_level;
};

static int bs_set_option(const struct bs *b, struct kvt_store *s, const char *name,
			 const char *value)
{
	int rc = kvt_store_set_option(s, name, value);
	if (rc < 0)
		bench_err(b->who, "store option %s=%s: %s", name, value, kvt_strerror(rc));
	return rc;
}

static int bs_set_size(const struct bs *b, struct kvt_store *s, const char *name, uint64_t v)
{
	char buf[32];
	if (v % BS_MIB == 0)
		snprintf(buf, sizeof(buf), "%" PRIu64 "M", v / BS_MIB);
	else
		snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return bs_set_option(b, s, name, buf);
}

/*
 * Create, configure and open a store with an SSD tier in write-through mode,
 * then register the bench's namespace.  *open_s (may be NULL) gets the wall
 * time of kvt_store_open alone.  Returns BENCH_EXIT_OK, _USAGE (a bad -o)
 * or _FAIL; on success *out is open and *ns registered.
 */
static int bs_store_open(const struct bs *b, const struct bs_store_cfg *c,
			 struct kvt_store **out, uint32_t *ns, double *open_s)
{
	struct kvt_store *s = NULL;
	char v[32];
	int rc = kvt_store_create(&s);
	if (rc < 0) {
		bench_err(b->who, "kvt_store_create: %s", kvt_strerror(rc));
		return BENCH_EXIT_FAIL;
	}
	snprintf(v, sizeof(v), "%u", b->o.io_depth);
	if (bs_set_option(b, s, "path", c->path) < 0 ||
	    bs_set_size(b, s, "dram.capacity", c->dram) < 0 ||
	    bs_set_option(b, s, "dram.shards", "1") < 0 ||
	    bs_set_option(b, s, "dram.prefault", c->prefault ? "on" : "off") < 0 ||
	    bs_set_size(b, s, "ssd.capacity", c->ssd_cap) < 0 ||
	    bs_set_size(b, s, "ssd.segment", c->segment) < 0 ||
	    bs_set_option(b, s, "ssd.admission", "always") < 0 ||
	    bs_set_option(b, s, "ssd.io", b->o.io) < 0 ||
	    bs_set_option(b, s, "ssd.io_depth", v) < 0 ||
	    (c->wd_max != 0 && bs_set_size(b, s, "ssd.writedown_max", c->wd_max) < 0))
		goto usage;
	if (c->ckpt_seals != 0) {
		snprintf(v, sizeof(v), "%u", c->ckpt_seals);
		if (bs_set_option(b, s, "ssd.checkpoint_seals", v) < 0)
			goto usage;
	}
	for (unsigned i = 0; i < b->o.store_opt_count; i++) {
		char name[128];
		const char *eq = strchr(b->o.store_opts[i], '=');
		size_t nlen = (size_t)(eq - b->o.store_opts[i]);
		if (nlen >= sizeof(name))
			nlen = sizeof(name) - 1;
		memcpy(name, b->o.store_opts[i], nlen);
		name[nlen] = '\0';
		if (bs_set_option(b, s, name, eq + 1) < 0)
			goto usage;
	}
	(void)kvt_store_set_log(s, bench_store_log, NULL, c->log_level);
	/* The lock of a killed writer may outlive it by a moment (its files
	 * are closed as the kernel tears it down): retry, time the last try. */
	for (int tries = 0;; tries++) {
		double t0 = bench_now();
		rc = kvt_store_open(s);
		if (open_s != NULL)
			*open_s = bench_now() - t0;
		if (rc != KVT_ELOCKED || tries == 500)
			break;
		bs_sleep_us(10000);
	}
	if (rc < 0) {
		bench_err(b->who, "kvt_store_open of %s: %s", c->path, kvt_strerror(rc));
		goto fail;
	}
	rc = kvt_ns_register(s, &bs_ns_desc, ns);
	if (rc < 0) {
		bench_err(b->who, "kvt_ns_register: %s", kvt_strerror(rc));
		goto fail;
	}
	*out = s;
	return BENCH_EXIT_OK;
usage:
	kvt_store_destroy(s);
	return BENCH_EXIT_USAGE;
fail:
	kvt_store_destroy(s);
	return BENCH_EXIT_FAIL;
}

/* Slots for data bytes of rec-byte records, with room below the 95% watermark. */
static uint64_t bs_ssd_capacity(uint64_t data, uint64_t rec, uint64_t segment)
{
	uint64_t per_seg = (segment - BS_ALIGN) / (rec + BS_SUM_PER_REC);
	uint64_t recs = data / rec;
	uint64_t segs = per_seg ? (recs + per_seg - 1) / per_seg + 1 : 2;
	uint64_t slots = segs * 10 / 9 + 3;
	return slots * segment;
}

/* Segments n records of rec bytes fill (the last one partly). */
static double bs_segments_for(uint64_t n, uint64_t rec, uint64_t segment)
{
	uint64_t per_seg = (segment - BS_ALIGN) / (rec + BS_SUM_PER_REC);
	return per_seg ? (double)n / (double)per_seg : (double)n;
}

/*
 * Put value bytes with write-down admission in mind: the tier sheds a block
 * when its backlog plus the block would pass ssd.writedown_max (puts never
 * stall, by design), so wait until the backlog leaves room for this one.
 * This thread is the only producer, so a block admitted here is never shed.
 * Samples the tier's writes in flight into *qd_max / *qd_sum / *qd_n.
 */
static int bs_pace(const struct bs *b, struct kvt_store *s, uint64_t len, uint64_t cap,
		   uint64_t *qd_max, double *qd_sum, uint64_t *qd_n)
{
	uint64_t v[PQ_COUNT], last_written = UINT64_MAX;
	double since = 0;
	for (;;) {
		if (bs_stats(b, s, bs_pace_names, v, PQ_COUNT) < 0)
			return -1;
		if (v[PQ_PENDING] != 0) {
			if (v[PQ_INFLIGHT] > *qd_max)
				*qd_max = v[PQ_INFLIGHT];
			*qd_sum += (double)v[PQ_INFLIGHT];
			(*qd_n)++;
		}
		if (v[PQ_PENDING] + len <= cap)
			return 0;
		if (v[PQ_WRITTEN] != last_written) {
			last_written = v[PQ_WRITTEN];
			since = bench_now();
		} else if (bench_now() - since > BS_STALL_S) {
			bench_err(b->who,
				  "write-down made no progress for %.0f s (%" PRIu64
				  " bytes pending)",
				  BS_STALL_S, v[PQ_PENDING]);
			bench_stat_dump(b->who, s);
			return -1;
		}
		/* The backlog is tens of milliseconds of device work: a poll
		 * every 200 us never starves the writer, and costs little CPU. */
		bs_sleep_us(200);
	}
}

/* ------------------------------------------------------------------------
 * fio: run it, read its JSON.
 */

struct bs_fio {
	double gbps;          /* fio's bw_bytes / 1e9 */
	uint64_t io_bytes;
	uint64_t runtime_ms;
	double wall_s;        /* the fio process, start to exit */
	uint64_t dev_rd, dev_wr; /* /proc/self/io growth when it was reaped */
	bool dev_known;
	double req_bytes;     /* average device request, bytes (-1: unknown) */
};

/*
 * Run fio with argv (argv[0] is replaced by --fio), stdout into a buffer,
 * stderr into <run dir>/fio.err (bench_spawn_capture).  Returns the
 * malloc'd stdout (NUL terminated) or NULL after printing why (unless
 * quiet).
 */
static char *bs_fio_spawn(const struct bs *b, char **argv, double *wall_s, bool quiet)
{
	char errpath[4200], msg[2048];
	char *out;
	snprintf(errpath, sizeof(errpath), "%s/fio.err", b->run_dir);
	argv[0] = (char *)b->o.fio;
	out = bench_spawn_capture(argv, errpath, wall_s, msg, sizeof(msg));
	if (out == NULL && !quiet)
		bench_err(b->who, "%s", msg);
	return out;
}

/*
 * One fio job on <run dir>/fio.dat: rw "write" (sequential, fresh
 * fallocated file, end_fsync) or "randread" (every block once, fio's random
 * map), blocks of bs bytes, iodepth qd, size bytes, O_DIRECT, io_uring.
 */
static int bs_fio_run(const struct bs *b, const char *rw, uint64_t bs, unsigned qd,
		      uint64_t size, struct bs_fio *res)
{
	char a_file[4200], a_rw[32], a_bs[48], a_qd[32], a_size[48];
	char *argv[20 + BS_STORE_OPTS_MAX];
	unsigned n = 0;
	bool wr = strcmp(rw, "write") == 0;
	uint64_t rd0 = 0, wr0 = 0, rd1 = 0, wr1 = 0;

	snprintf(a_file, sizeof(a_file), "--filename=%s/fio.dat", b->run_dir);
	snprintf(a_rw, sizeof(a_rw), "--rw=%s", rw);
	snprintf(a_bs, sizeof(a_bs), "--bs=%" PRIu64, bs);
	snprintf(a_qd, sizeof(a_qd), "--iodepth=%u", qd);
	snprintf(a_size, sizeof(a_size), "--size=%" PRIu64, size);
	argv[n++] = NULL; /* the program, set by bs_fio_spawn */
	argv[n++] = (char *)(wr ? "--name=kvtier-bench-w" : "--name=kvtier-bench-r");
	argv[n++] = a_file;
	argv[n++] = a_rw;
	argv[n++] = a_bs;
	argv[n++] = a_qd;
	argv[n++] = (char *)"--ioengine=io_uring";
	argv[n++] = (char *)"--direct=1";
	argv[n++] = a_size;
	argv[n++] = (char *)"--numjobs=1";
	if (wr) {
		argv[n++] = (char *)"--fallocate=native";
		argv[n++] = (char *)"--end_fsync=1";
	}
	argv[n++] = (char *)"--output-format=json";
	for (unsigned i = 0; i < b->o.fio_opt_count; i++)
		argv[n++] = (char *)b->o.fio_opts[i];
	argv[n] = NULL;

	struct bs_blk k0 = { 0 }, k1 = { 0 };
	memset(res, 0, sizeof(*res));
	res->dev_known = bench_proc_io(&rd0, &wr0) == 0;
	bool blk = bs_blk_read(b, &k0) == 0;
	char *out = bs_fio_spawn(b, argv, &res->wall_s, false);
	if (out == NULL)
		return -1;
	blk = blk && bs_blk_read(b, &k1) == 0;
	res->req_bytes = bs_blk_req(blk, &k0, &k1, !wr);
	res->dev_known = res->dev_known && bench_proc_io(&rd1, &wr1) == 0;
	if (res->dev_known) {
		res->dev_rd = rd1 - rd0;
		res->dev_wr = wr1 - wr0;
	}
	/* fio may print notes before its JSON: start at the first '{'. */
	const char *json = strchr(out, '{');
	const char *jobs = json != NULL ? strstr(json, "\"jobs\"") : NULL;
	const char *obj = jobs != NULL ? bench_json_obj(jobs, wr ? "write" : "read") : NULL;
	uint64_t bw = 0, err = 1;
	if (obj == NULL || bench_json_u64(jobs, "error", &err) < 0 ||
	    bench_json_u64(obj, "io_bytes", &res->io_bytes) < 0 ||
	    bench_json_u64(obj, "bw_bytes", &bw) < 0 ||
	    bench_json_u64(obj, "runtime", &res->runtime_ms) < 0) {
		bench_err(b->who, "could not read fio's JSON output (%zu bytes)", strlen(out));
		free(out);
		return -1;
	}
	free(out);
	if (err != 0) {
		bench_err(b->who, "fio %s reports error %" PRIu64, rw, err);
		return -1;
	}
	if (res->io_bytes != size) {
		bench_err(b->who, "fio %s moved %" PRIu64 " bytes, asked %" PRIu64, rw,
			  res->io_bytes, size);
		return -1;
	}
	res->gbps = (double)bw / 1e9;
	return 0;
}

/* ------------------------------------------------------------------------
 * The ssd rows: write and read against fio, one value size at a time.
 */

struct bs_size {
	struct bs *b;
	uint64_t size;        /* value bytes */
	uint64_t slot;        /* size rounded up to 4 KiB: value i at i * slot in src, dst */
	uint64_t rec;         /* kvtier's record bytes (capacity planning) */
	struct bs_shape sh;   /* the store's I/Os = fio's blocks */
	uint64_t wr_count;    /* writes of sh.wr_bs that hold the n values */
	size_t n;             /* values */
	uint64_t dram;        /* DRAM tier capacity of both stores */
	uint64_t wd_cap;      /* write-down backlog cap: ssd.writedown_max */
	uint64_t ssd_cap;
	unsigned qd, write_qd;
	uint8_t *src, *dst;
	struct kvt_key *keys;
	uint32_t *perm;
	struct kvt_req *reqs;
	struct iovec *iov;
	/* per round */
	double w_gbps[BS_ROUNDS_MAX], fw_gbps[BS_ROUNDS_MAX];
	double r_gbps[BS_ROUNDS_MAX], fr_gbps[BS_ROUNDS_MAX];
	double w_rec_gbps[BS_ROUNDS_MAX], r_rec_gbps[BS_ROUNDS_MAX];
	double r_dev[BS_ROUNDS_MAX];    /* /proc/self/io read_bytes / value bytes, kvtier */
	double fr_dev[BS_ROUNDS_MAX];   /* the same for fio's read */
	double w_dev[BS_ROUNDS_MAX];    /* write_bytes / value bytes, kvtier */
	bool dev_known;
	/* average device request, bytes: kvtier and fio, write and read */
	double w_req[BS_ROUNDS_MAX], fw_req[BS_ROUNDS_MAX];
	double r_req[BS_ROUNDS_MAX], fr_req[BS_ROUNDS_MAX];
	uint64_t ssd_read_bytes;        /* last round: ssd.read_bytes growth */
	uint64_t qd_max;                /* writes in flight, largest seen */
	double qd_sum;
	uint64_t qd_n;
	uint64_t ckpts;                 /* checkpoints during the timed writes, all rounds */
	uint64_t fsyncs;                /* io.fsyncs during the timed writes, all rounds */
	uint64_t batches, batched;      /* ssd.batches, ssd.batched_blocks: the same */
};

static void bs_store_path(const struct bs_size *z, unsigned round, char *buf, size_t len)
{
	snprintf(buf, len, "%s/kvt-%" PRIu64 "-%u", z->b->run_dir, z->size, round);
}

static void bs_size_cfg(const struct bs_size *z, const char *path, struct bs_store_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->path = path;
	c->dram = z->dram;
	c->prefault = !z->b->o.smoke;
	c->ssd_cap = z->ssd_cap;
	c->segment = z->b->o.segment;
	c->wd_max = z->wd_cap;
	c->log_level = KVT_LOG_WARN;
}

/* kvtier write: every value put into a fresh store, timed to kvt_flush. */
static int bs_kvt_write(struct bs_size *z, unsigned round)
{
	struct bs *b = z->b;
	struct bs_store_cfg c;
	struct kvt_store *s = NULL;
	uint64_t st0[ST_COUNT], st1[ST_COUNT], rd0 = 0, wr0 = 0, rd1 = 0, wr1 = 0;
	char path[4200];
	uint32_t ns;
	int ret = BENCH_EXIT_FAIL, rc;

	bs_store_path(z, round, path, sizeof(path));
	bs_size_cfg(z, path, &c);
	ret = bs_store_open(b, &c, &s, &ns, NULL);
	if (ret != BENCH_EXIT_OK)
		return ret;
	ret = BENCH_EXIT_FAIL;
	if (bs_stats(b, s, bs_stat_names, st0, ST_COUNT) < 0)
		goto out;
	bool dev = bench_proc_io(&rd0, &wr0) == 0;
	struct bs_blk k0 = { 0 }, k1 = { 0 };
	bool blk = bs_blk_read(b, &k0) == 0;

	double t0 = bench_now();
	for (size_t i = 0; i < z->n; i++) {
		struct iovec iov = { z->src + i * z->slot, z->size };
		if (bs_pace(b, s, z->size, z->wd_cap, &z->qd_max, &z->qd_sum, &z->qd_n) < 0)
			goto out;
		rc = kvt_put(s, ns, &z->keys[i], &iov, 1);
		if (rc != KVT_OK) {
			bench_err(b->who, "kvt_put of value %zu: %s", i, kvt_strerror(rc));
			bench_stat_dump(b->who, s);
			goto out;
		}
	}
	rc = kvt_flush(s);
	double secs = bench_now() - t0;
	if (rc != KVT_OK) {
		bench_err(b->who, "kvt_flush: %s", kvt_strerror(rc));
		bench_stat_dump(b->who, s);
		goto out;
	}
	dev = dev && bench_proc_io(&rd1, &wr1) == 0;
	blk = blk && bs_blk_read(b, &k1) == 0;
	z->w_req[round] = bs_blk_req(blk, &k0, &k1, false);
	if (bs_stats(b, s, bs_stat_names, st1, ST_COUNT) < 0)
		goto out;

	/* Everything reached the device, nothing was shed or evicted, and
	 * the files really were O_DIRECT. */
	uint64_t written = st1[ST_WD_BLOCKS] - st0[ST_WD_BLOCKS];
	if (written != z->n || st1[ST_WD_SHED] != st0[ST_WD_SHED] ||
	    st1[ST_WD_ERRORS] != st0[ST_WD_ERRORS] || st1[ST_SSD_BLOCKS] != z->n ||
	    st1[ST_SEG_EVICTED] != 0) {
		bench_err(b->who,
			  "write-through of %zu values: %" PRIu64 " written down, %" PRIu64
			  " shed, %" PRIu64 " errors, %" PRIu64 " on SSD, %" PRIu64
			  " segments evicted",
			  z->n, written, st1[ST_WD_SHED] - st0[ST_WD_SHED],
			  st1[ST_WD_ERRORS] - st0[ST_WD_ERRORS], st1[ST_SSD_BLOCKS],
			  st1[ST_SEG_EVICTED]);
		bench_stat_dump(b->who, s);
		goto out;
	}
	/* A smoke run checks the bench, not the file system CI gave it. */
	if (st1[ST_ODIRECT_REFUSED] != 0) {
		bench_err(b->who,
			  "%s: the file system refused O_DIRECT (io.odirect_refused = %" PRIu64
			  "): the page cache would answer; run on another --dir",
			  b->o.smoke ? "warning" : "error", st1[ST_ODIRECT_REFUSED]);
		if (!b->o.smoke)
			goto out;
	}
	double value_bytes = (double)z->n * (double)z->size;
	z->w_gbps[round] = bench_rate(value_bytes, secs) / 1e9;
	z->w_rec_gbps[round] = bench_rate((double)z->wr_count * (double)z->sh.wr_bs, secs) / 1e9;
	z->w_dev[round] = dev ? (double)(wr1 - wr0) / value_bytes : -1;
	z->ckpts += st1[ST_CKPTS] - st0[ST_CKPTS];
	z->fsyncs += st1[ST_IO_FSYNCS] - st0[ST_IO_FSYNCS];
	z->batches += st1[ST_BATCHES] - st0[ST_BATCHES];
	z->batched += st1[ST_BATCHED] - st0[ST_BATCHED];
	ret = BENCH_EXIT_OK;
out:
	/* Closing writes a checkpoint: outside the timing, as it should be. */
	kvt_store_destroy(s);
	return ret;
}

/* Requests of the read window: the status a get must come back with. */
static int bs_read_done(struct bs_size *z, struct kvt_req *r)
{
	struct bs *b = z->b;
	size_t i = (size_t)r->user_data;
	if (r->status != KVT_OK || r->tier != KVT_TIER_SSD || r->length != z->size ||
	    r->value_len != z->size) {
		bench_err(b->who,
			  "get of value %zu: %s, tier %s, length %" PRIu64 ", value_len %" PRIu64
			  " (want ok from ssd, %" PRIu64 ")",
			  i, kvt_strerror(r->status), kvt_tier_name((int)r->tier), r->length,
			  r->value_len, z->size);
		return -1;
	}
	return 0;
}

static void bs_read_fill(struct bs_size *z, struct kvt_req *r, struct iovec *iov, uint32_t ns,
			 size_t i)
{
	memset(r, 0, sizeof(*r));
	r->op = KVT_OP_GET;
	r->ns = ns;
	r->key = z->keys[i];
	r->user_data = i;
	iov->iov_base = z->dst + i * z->slot;
	iov->iov_len = z->size;
	r->iov = iov;
	r->iov_count = 1;
}

/*
 * kvtier read: reopen the store written in this round (its DRAM tier is
 * empty), get every value once in a random order with z->qd requests in
 * flight, into dst, then check every byte.
 */
static int bs_kvt_read(struct bs_size *z, unsigned round)
{
	struct bs *b = z->b;
	struct bs_store_cfg c;
	struct kvt_store *s = NULL;
	struct kvt_queue *q = NULL;
	struct kvt_req *out[BS_QD_MAX], *sub[BS_QD_MAX];
	uint64_t st0[ST_COUNT], st1[ST_COUNT], rd0 = 0, wr0 = 0, rd1 = 0, wr1 = 0;
	char path[4200], sz[32];
	uint32_t ns;
	int ret, rc;
	size_t next = 0, done = 0;
	unsigned inflight = 0;

	bs_store_path(z, round, path, sizeof(path));
	bs_size_cfg(z, path, &c);
	ret = bs_store_open(b, &c, &s, &ns, NULL);
	if (ret != BENCH_EXIT_OK)
		return ret;
	ret = BENCH_EXIT_FAIL;
	rc = kvt_queue_create(s, &q);
	if (rc < 0) {
		bench_err(b->who, "kvt_queue_create: %s", kvt_strerror(rc));
		goto out;
	}
	if (bs_stats(b, s, bs_stat_names, st0, ST_COUNT) < 0)
		goto out;
	if (st0[ST_DRAM_BLOCKS] != 0 || st0[ST_SSD_BLOCKS] != z->n) {
		bench_err(b->who,
			  "reopened store holds %" PRIu64 " blocks in DRAM and %" PRIu64
			  " on SSD; want 0 and %zu",
			  st0[ST_DRAM_BLOCKS], st0[ST_SSD_BLOCKS], z->n);
		bench_stat_dump(b->who, s);
		goto out;
	}
	/* A get that copies nothing must not verify; this also pre-faults dst. */
	memset(z->dst, BS_POISON, z->n * z->slot);
	uint64_t x = bench_seed(z->size, 0x5eed0000u + round);
	for (size_t i = 0; i < z->n; i++)
		z->perm[i] = (uint32_t)i;
	for (size_t i = z->n; i > 1; i--) {
		size_t j = (size_t)(bench_xorshift(&x) % i);
		uint32_t t = z->perm[i - 1];
		z->perm[i - 1] = z->perm[j];
		z->perm[j] = t;
	}
	bool dev = bench_proc_io(&rd0, &wr0) == 0;
	struct bs_blk k0 = { 0 }, k1 = { 0 };
	bool blk = bs_blk_read(b, &k0) == 0;

	/* A window of qd gets, as fio keeps iodepth: refill each completed
	 * request's slot with the next value, all refills in one submit. */
	double t0 = bench_now();
	unsigned k = 0;
	while (next < z->n && k < z->qd) {
		bs_read_fill(z, &z->reqs[k], &z->iov[k], ns, z->perm[next++]);
		sub[k] = &z->reqs[k];
		k++;
	}
	while (done < z->n) {
		if (k > 0) {
			rc = kvt_submit(q, sub, k);
			if (rc != (int)k) {
				bench_err(b->who, "kvt_submit of %u gets: %s", k,
					  rc < 0 ? kvt_strerror(rc) : "wrong count");
				goto drain;
			}
			inflight += k;
			k = 0;
		}
		int m = kvt_queue_poll(q, out, z->qd);
		if (m == 0)
			m = kvt_queue_wait(q, out, z->qd, 10000);
		if (m < 0) {
			bench_err(b->who, "kvt_queue_wait: %s", kvt_strerror(m));
			goto drain;
		}
		if (m == 0) {
			bench_err(b->who, "%u gets still in flight after 10 s", inflight);
			bench_stat_dump(b->who, s);
			goto drain;
		}
		inflight -= (unsigned)m; /* all m are back, checked or not */
		for (int j = 0; j < m; j++) {
			done++;
			if (bs_read_done(z, out[j]) < 0) {
				bench_stat_dump(b->who, s);
				goto drain;
			}
			if (next < z->n) {
				size_t slot = (size_t)(out[j] - z->reqs);
				bs_read_fill(z, out[j], &z->iov[slot], ns, z->perm[next++]);
				sub[k++] = out[j];
			}
		}
	}
	double secs = bench_now() - t0;
	dev = dev && bench_proc_io(&rd1, &wr1) == 0;
	blk = blk && bs_blk_read(b, &k1) == 0;
	z->r_req[round] = bs_blk_req(blk, &k0, &k1, true);
	if (bs_stats(b, s, bs_stat_names, st1, ST_COUNT) < 0)
		goto out;

	for (size_t i = 0; i < z->n; i++) {
		int64_t off = bs_check(z->dst + i * z->slot, z->size, bench_seed(z->size, i));
		if (off >= 0) {
			bench_err(b->who,
				  "ssd read %s, round %u: value %zu differs from what was put at "
				  "byte %" PRId64,
				  bench_fmt_size(sz, sizeof(sz), z->size), round + 1, i, off);
			goto out;
		}
	}
	/* Every get missed DRAM and was promoted by one SSD read (a promoted
	 * block is then served from DRAM, which dram.hits also counts). */
	uint64_t reads = st1[ST_SSD_READS] - st0[ST_SSD_READS];
	uint64_t misses = st1[ST_DRAM_MISSES] - st0[ST_DRAM_MISSES];
	if (reads != z->n || misses != z->n) {
		bench_err(b->who,
			  "%zu gets made %" PRIu64 " SSD reads after %" PRIu64 " DRAM misses; want "
			  "%zu and %zu",
			  z->n, reads, misses, z->n, z->n);
		bench_stat_dump(b->who, s);
		goto out;
	}
	double value_bytes = (double)z->n * (double)z->size;
	z->r_gbps[round] = bench_rate(value_bytes, secs) / 1e9;
	z->r_rec_gbps[round] = bench_rate((double)z->n * (double)z->sh.rd_bs, secs) / 1e9;
	z->r_dev[round] = dev ? (double)(rd1 - rd0) / value_bytes : -1;
	z->dev_known = z->dev_known && dev;
	z->ssd_read_bytes = st1[ST_SSD_READ_BYTES] - st0[ST_SSD_READ_BYTES];
	ret = BENCH_EXIT_OK;
	goto out;
drain:
	/* Collect what is still in flight before the store goes away. */
	while (inflight > 0) {
		int m = kvt_queue_wait(q, out, z->qd, 10000);
		if (m <= 0)
			break;
		inflight -= (unsigned)m;
	}
out:
	if (q != NULL)
		(void)kvt_queue_destroy(q);
	kvt_store_destroy(s);
	return ret;
}

static int bs_fio_write(struct bs_size *z, unsigned round)
{
	struct bs_fio f;
	char path[4200];
	snprintf(path, sizeof(path), "%s/fio.dat", z->b->run_dir);
	(void)unlink(path); /* a fresh file, as kvtier's segments are */
	if (bs_fio_run(z->b, "write", z->sh.wr_bs, z->write_qd, z->wr_count * z->sh.wr_bs, &f) < 0)
		return -1;
	/* fio moves blocks: its GB/s is on block bytes. */
	z->fw_gbps[round] = f.gbps;
	z->fw_req[round] = f.req_bytes;
	return 0;
}

static int bs_fio_read(struct bs_size *z, unsigned round)
{
	struct bs_fio f;
	if (bs_fio_run(z->b, "randread", z->sh.rd_bs, z->qd, z->n * z->sh.rd_bs, &f) < 0)
		return -1;
	z->fr_gbps[round] = f.gbps;
	z->fr_req[round] = f.req_bytes;
	z->fr_dev[round] = f.dev_known ? (double)f.dev_rd / (double)(z->n * z->sh.rd_bs) : -1;
	z->dev_known = z->dev_known && f.dev_known;
	return 0;
}

/* One row's verdict: ratio against the target, and suspicion. */
static void bs_judge(struct bs *b, double ratio, bool suspect, bool *pass)
{
	*pass = ratio >= BS_TARGET_RATIO && !suspect;
	if (b->o.smoke)
		return;
	if (suspect)
		b->suspects++;
	else if (!*pass)
		b->targets_missed++;
}

static const char *bs_verdict(const struct bs *b, bool pass, bool suspect)
{
	if (b->o.smoke)
		return "smoke";
	if (suspect)
		return "SUSPECT";
	return pass ? "ok" : "FAIL";
}

static void bs_size_report(struct bs *b, struct bs_size *z, bool write)
{
	unsigned rounds = b->o.rounds;
	const double *x = write ? z->w_gbps : z->r_gbps;
	const double *y = write ? z->fw_gbps : z->fr_gbps;
	double rat[BS_ROUNDS_MAX];
	for (unsigned r = 0; r < rounds; r++)
		rat[r] = b->have_fio ? x[r] / (y[r] > 0 ? y[r] : 1e-12) : 0;
	double gx = bench_median(x, rounds), gy = b->have_fio ? bench_median(y, rounds) : 0;
	double ratio = b->have_fio ? gx / (gy > 0 ? gy : 1e-12) : 0;
	double rec = bench_median(write ? z->w_rec_gbps : z->r_rec_gbps, rounds);
	/* Reads must have come from the device: kvtier's and fio's
	 * read_bytes must cover the bytes they returned. */
	double dev = z->dev_known ? bench_median(write ? z->w_dev : z->r_dev, rounds) : -1;
	double fdev = z->dev_known && !write && b->have_fio ? bench_median(z->fr_dev, rounds) : -1;
	bool dev_short = !write && z->dev_known &&
			 (dev < 0.999 || (b->have_fio && fdev < 0.999));
	bool suspect = (b->have_fio && ratio > BS_SUSPECT_RATIO) || dev_short;
	bool pass = false;
	if (b->have_fio)
		bs_judge(b, ratio, suspect, &pass);
	double qd_mean = z->qd_n ? z->qd_sum / (double)z->qd_n : 0;
	double batch_mean = z->batches ? (double)z->batched / (double)z->batches : 0;
	/* values a round wrote as records, not in a batch (a batch of one,
	 * 256 KiB and more, format 2) */
	double framed = (double)z->n - (double)z->batched / (double)(rounds ? rounds : 1);
	const char *name = write ? "ssd.write" : "ssd.read";
	double req = bench_median(write ? z->w_req : z->r_req, rounds);
	double freq = b->have_fio ? bench_median(write ? z->fw_req : z->fr_req, rounds) : -1;

	if (b->o.json) {
		printf("{\"bench\":\"%s\",\"value_bytes\":%" PRIu64 ",\"gbps\":%.3f", name, z->size, gx);
		if (b->have_fio)
			printf(",\"baseline\":\"fio\",\"baseline_gbps\":%.3f,\"ratio\":%.4f", gy, ratio);
		else
			printf(",\"baseline\":\"fio\",\"baseline_gbps\":null,\"ratio\":null");
		printf(",\"suspect\":%s,\"suspect_reason\":%s", suspect ? "true" : "false",
		       dev_short ? "\"reads not all from the device\"" :
		       suspect ? "\"ratio above 1.1\"" : "null");
		printf(",\"format\":%u,\"record_bytes\":%" PRIu64 ",\"block_bytes\":%" PRIu64
		       ",\"record_gbps\":%.3f,\"values\":%zu"
		       ",\"value_bytes_total\":%" PRIu64 ",\"rounds\":%u", bs_format,
		       z->rec, write ? z->sh.wr_bs : z->sh.rd_bs, rec,
		       z->n, (uint64_t)z->n * z->size, rounds);
		if (write)
			printf(",\"block_values\":%u,\"batches\":%" PRIu64 ",\"batch_mean\":%.2f"
			       ",\"framed\":%.0f,\"qd\":%u,\"kvtier_ios_inflight_max\":%" PRIu64
			       ",\"kvtier_ios_inflight_mean\":%.2f,\"writedown_max\":%" PRIu64
			       ",\"shed\":0,\"checkpoints\":%" PRIu64 ",\"fsyncs\":%" PRIu64,
			       z->sh.wr_vals, z->batches, batch_mean, framed, z->write_qd, z->qd_max,
			       qd_mean, z->wd_cap, z->ckpts, z->fsyncs);
		else
			printf(",\"qd\":%u,\"dram_capacity\":%" PRIu64 ",\"ssd_read_bytes\":%" PRIu64,
			       z->qd, z->dram, z->ssd_read_bytes);
		if (dev >= 0)
			printf(",\"%s\":%.4f", write ? "device_write_per_value_byte" :
			       "device_read_per_value_byte", dev);
		else
			printf(",\"%s\":null", write ? "device_write_per_value_byte" :
			       "device_read_per_value_byte");
		if (!write) {
			if (fdev >= 0)
				printf(",\"baseline_device_read_per_byte\":%.4f", fdev);
			else
				printf(",\"baseline_device_read_per_byte\":null");
		}
		if (req >= 0)
			printf(",\"device_request_bytes\":%.0f", req);
		if (freq >= 0)
			printf(",\"baseline_device_request_bytes\":%.0f", freq);
		printf(",\"io\":\"%s\"", b->o.io);
		bs_json_rounds("gbps_rounds", x, rounds, "%.3f");
		if (b->have_fio) {
			bs_json_rounds("baseline_gbps_rounds", y, rounds, "%.3f");
			bs_json_rounds("ratio_rounds", rat, rounds, "%.4f");
		}
		printf(",\"target\":%.2f", BS_TARGET_RATIO);
		if (b->have_fio)
			bench_json_pass(b->o.smoke, pass);
		else
			printf(",\"pass\":null");
		printf("}\n");
		fflush(stdout);
		return;
	}
	struct bench_cell cell = { .bench = name };
	cell.result = b->have_fio ? bs_verdict(b, pass, suspect) : "-";
	bench_fmt_size(cell.value, sizeof(cell.value), z->size);
	snprintf(cell.kvtier, sizeof(cell.kvtier), "%.2f GB/s", gx);
	if (b->have_fio) {
		snprintf(cell.baseline, sizeof(cell.baseline), "%.2f GB/s", gy);
		snprintf(cell.ratio, sizeof(cell.ratio), "%.3f", ratio);
	} else {
		snprintf(cell.baseline, sizeof(cell.baseline), "(no fio)");
		snprintf(cell.ratio, sizeof(cell.ratio), "-");
	}
	snprintf(cell.target, sizeof(cell.target), ">= %.2f", BS_TARGET_RATIO);
	if (write)
		snprintf(cell.notes, sizeof(cell.notes),
			 "%zu values; fio blocks of %u value(s), %" PRIu64 " B (kvtier: %" PRIu64
			 " batches, %.1f values each, %.0f framed); blocks %.2f GB/s; fio iodepth %u, kvtier I/Os "
			 "in flight mean %.1f max %" PRIu64 "; 0 shed; %" PRIu64 " checkpoints; device "
			 "requests %.0f KiB (fio %.0f)", z->n, z->sh.wr_vals, z->sh.wr_bs, z->batches,
			 batch_mean, framed, rec, z->write_qd, qd_mean, z->qd_max, z->ckpts, req / 1024,
			 freq / 1024);
	else
		snprintf(cell.notes, sizeof(cell.notes),
			 "%zu values, qd %u; fio blocks of %" PRIu64 " B; blocks %.2f GB/s; device "
			 "read %.3f (fio %.3f) bytes per byte returned%s; device requests %.0f KiB "
			 "(fio %.0f)",
			 z->n, z->qd, z->sh.rd_bs, rec, dev, fdev,
			 dev_short ? ": NOT FROM THE DEVICE" : "", req / 1024, freq / 1024);
	bs_cell_print(b, &cell);
}

/* All rounds of one value size. */
static int bs_size_rows(struct bs *b, struct bs_size *z)
{
	char sz[32], path[4200];
	bench_fmt_size(sz, sizeof(sz), z->size);
	z->dev_known = true;
	bench_progress(b->o.progress, "ssd", "%s: filling %zu source values", sz, z->n);
	for (size_t i = 0; i < z->n; i++) {
		bs_key(&z->keys[i], z->size, i);
		bench_fill(z->src + i * z->slot, z->size, bench_seed(z->size, i));
	}
	/* The order flips every round, so neither side always runs on a
	 * device the other just warmed or dirtied. */
	for (unsigned r = 0; r < b->o.rounds; r++) {
		bool kvt_first = r % 2 == 1;
		for (unsigned step = 0; step < 4; step++) {
			bool kvt = (step % 2 == 0) == kvt_first;
			bool rd = step >= 2;
			int rc;
			bench_progress(b->o.progress, "ssd", "%s round %u/%u: %s %s", sz, r + 1,
				       b->o.rounds, kvt ? "kvtier" : "fio",
				       rd ? "random read" : "write");
			if (kvt)
				rc = rd ? bs_kvt_read(z, r) : bs_kvt_write(z, r);
			else if (!b->have_fio)
				rc = 0;
			else
				rc = (rd ? bs_fio_read(z, r) : bs_fio_write(z, r)) < 0 ? BENCH_EXIT_FAIL
										       : 0;
			if (rc != BENCH_EXIT_OK)
				return rc;
		}
		/* Both sides' files go before the next round: fresh files again. */
		bs_store_path(z, r, path, sizeof(path));
		bench_rm_tree(path);
		snprintf(path, sizeof(path), "%s/fio.dat", b->run_dir);
		(void)unlink(path);
	}
	bs_size_report(b, z, true);
	bs_size_report(b, z, false);
	return BENCH_EXIT_OK;
}

/*
 * Sizes of one value size's run: value count, DRAM (the write-down cap is
 * a quarter of it and must hold two windows of fio's write depth; reads
 * reserve DRAM for every get in flight, twice over), SSD capacity.
 */
static void bs_size_plan(const struct bs *b, struct bs_size *z, uint64_t size)
{
	z->size = size;
	z->slot = bench_align_up(size, BS_ALIGN);
	z->rec = bs_rec_len(size);
	bs_shape(size, b->o.segment, &z->sh);
	z->qd = b->o.qd;
	z->write_qd = b->o.write_qd;
	uint64_t dram = b->o.dram;
	if (dram < 2 * (uint64_t)z->qd * z->slot)
		dram = 2 * (uint64_t)z->qd * z->slot;
	if (dram < 8 * (uint64_t)z->write_qd * z->slot)
		dram = 8 * (uint64_t)z->write_qd * z->slot;
	z->dram = bench_align_up(dram, BS_MIB);
	z->wd_cap = z->dram / 4;
	/* The working set is larger than the DRAM tier (twice, outside smoke). */
	uint64_t fp = b->o.footprint;
	if (!b->o.smoke && fp < 2 * z->dram)
		fp = 2 * z->dram;
	z->n = (size_t)((fp + size - 1) / size);
	z->wr_count = (z->n + z->sh.wr_vals - 1) / z->sh.wr_vals;
	z->ssd_cap = bs_ssd_capacity(z->n * z->rec, z->rec, b->o.segment);
}

static int bs_ssd_rows(struct bs *b)
{
	struct bs_size z;
	char a[32], d[32], e[32], f[32];
	int ret = BENCH_EXIT_FAIL;
	size_t max_n = 0;
	uint64_t max_bytes = 0, free_b = 0;
	unsigned qd = b->o.qd;
	void *map = MAP_FAILED;
	size_t map_len = 0;

	/* Disk: one round of a size holds kvtier's records and fio's file. */
	for (unsigned i = 0; i < b->o.size_count; i++) {
		bs_size_plan(b, &z, b->o.sizes[i]);
		if (z.n > max_n)
			max_n = z.n;
		if (z.n * z.slot > max_bytes)
			max_bytes = z.n * z.slot;
		uint64_t disk = 2 * z.n * z.rec + 2 * b->o.segment;
		if (disk > b->max_disk)
			b->max_disk = disk;
	}
	int rc = bs_free_bytes(b->run_dir, &free_b);
	if (rc < 0) {
		bench_err(b->who, "statvfs %s: %s", b->run_dir, strerror(-rc));
		return BENCH_EXIT_FAIL;
	}
	uint64_t keep = b->o.smoke ? 256 * BS_MIB : BS_KEEP_FREE;
	if (b->max_disk + keep > free_b) {
		bench_err(b->who,
			  "a round needs %s on %s, which has %s free; the run would leave less "
			  "than %s: lower --footprint or pick another --dir",
			  bench_fmt_size(a, sizeof(a), b->max_disk), b->run_dir,
			  bench_fmt_size(d, sizeof(d), free_b), bench_fmt_size(e, sizeof(e), keep));
		return BENCH_EXIT_FAIL;
	}

	/* src and dst in one mapping, 2 MiB aligned. */
	map_len = 2 * max_bytes + 4 * BS_MIB;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	memset(&z, 0, sizeof(z));
	z.keys = calloc(max_n, sizeof(*z.keys));
	z.perm = calloc(max_n, sizeof(*z.perm));
	z.reqs = calloc(qd, sizeof(*z.reqs));
	z.iov = calloc(qd, sizeof(*z.iov));
	if (map == MAP_FAILED || !z.keys || !z.perm || !z.reqs || !z.iov) {
		bench_err(b->who, "out of memory for %s of caller buffers",
			  bench_fmt_size(a, sizeof(a), 2 * max_bytes));
		goto out;
	}
	uint8_t *base = (uint8_t *)bench_align_up((uintptr_t)map, 2 * BS_MIB);
	(void)madvise(base, 2 * max_bytes, MADV_HUGEPAGE);
	z.src = base;
	z.dst = base + bench_align_up(max_bytes, 2 * BS_MIB);

	for (unsigned i = 0; i < b->o.size_count; i++) {
		struct kvt_key *keys = z.keys;
		uint32_t *perm = z.perm;
		struct kvt_req *reqs = z.reqs;
		struct iovec *iov = z.iov;
		uint8_t *src = z.src, *dst = z.dst;
		memset(&z, 0, sizeof(z));
		z.b = b;
		z.keys = keys;
		z.perm = perm;
		z.reqs = reqs;
		z.iov = iov;
		z.src = src;
		z.dst = dst;
		bs_size_plan(b, &z, b->o.sizes[i]);
		bench_note(b->o.json, b->o.progress,
			   "%s: %zu values (%s), kvtier's writes %" PRIu64 " bytes (%u value(s)), "
			   "reads %" PRIu64 " bytes; DRAM tier %s, write-down cap %s; reads %u in "
			   "flight",
			   bench_fmt_size(a, sizeof(a), z.size), z.n,
			   bench_fmt_size(d, sizeof(d), (uint64_t)z.n * z.size), z.sh.wr_bs,
			   z.sh.wr_vals, z.sh.rd_bs,
			   bench_fmt_size(e, sizeof(e), z.dram),
			   bench_fmt_size(f, sizeof(f), z.wd_cap), z.qd);
		ret = bs_size_rows(b, &z);
		if (ret != BENCH_EXIT_OK)
			goto out;
	}
	ret = BENCH_EXIT_OK;
out:
	if (map != MAP_FAILED)
		munmap(map, map_len);
	free(z.keys);
	free(z.perm);
	free(z.reqs);
	free(z.iov);
	return ret;
}

/* ------------------------------------------------------------------------
 * Recovery: kill -9 a writer, time the reopen.
 */

/*
 * Block i of the recovery run: pattern i % BS_PATTERNS, its first 16 bytes
 * replaced by (i, ~i), so every block differs and writing a million of
 * them costs no generation time.
 */
static void bs_rec_value(uint8_t *dst, const uint8_t *patterns, uint64_t slot, uint64_t i)
{
	uint64_t stamp[2] = { i, ~i };
	const uint8_t *p = patterns + (i % BS_PATTERNS) * slot;
	if (dst != p)
		memmove(dst, p, slot);
	memcpy(dst, stamp, sizeof(stamp));
}

struct bs_rec {
	struct bs *b;
	char path[4200];
	struct bs_store_cfg cfg;
	uint64_t n, size, slot, rec;
	unsigned ckpt_seals;
	double segs;          /* segments the run fills */
	uint8_t *patterns;    /* BS_PATTERNS values of slot bytes */
};

/*
 * The child: write every block (paced: nothing shed), flush, report on fd,
 * then wait to be killed.  Never returns.
 */
static void bs_rec_child(struct bs_rec *rc, int fd)
{
	struct bs *b = rc->b;
	struct kvt_store *s = NULL;
	struct kvt_key key;
	uint64_t st[ST_COUNT], qd_max = 0, qd_n = 0;
	double qd_sum = 0;
	uint32_t ns;
	char msg[256];
	uint8_t *buf = aligned_alloc(BS_ALIGN, rc->slot);
	int n;

	if (buf == NULL || bs_store_open(b, &rc->cfg, &s, &ns, NULL) != BENCH_EXIT_OK)
		goto fail;
	double t0 = bench_now(), last = t0;
	for (uint64_t i = 0; i < rc->n; i++) {
		struct iovec iov = { buf, rc->size };
		if (bs_pace(b, s, rc->size, rc->cfg.wd_max, &qd_max, &qd_sum, &qd_n) < 0)
			goto fail;
		bs_rec_value(buf, rc->patterns, rc->slot, i);
		bs_key(&key, rc->size, i);
		/* A put copies into DRAM before it returns: buf is free again. */
		int r = kvt_put(s, ns, &key, &iov, 1);
		if (r != KVT_OK) {
			bench_err(b->who, "recovery writer: kvt_put of block %" PRIu64 ": %s", i,
				  kvt_strerror(r));
			goto fail;
		}
		if (b->o.progress && bench_now() - last > 0.5) {
			last = bench_now();
			bench_progress(b->o.progress, "ssd",
				       "recovery: writer put %" PRIu64 " of %" PRIu64 " blocks "
				       "(%.2f GB/s)",
				       i, rc->n,
				       bench_rate((double)i * (double)rc->size, last - t0) / 1e9);
		}
	}
	int r = kvt_flush(s);
	if (r != KVT_OK) {
		bench_err(b->who, "recovery writer: kvt_flush: %s", kvt_strerror(r));
		goto fail;
	}
	double secs = bench_now() - t0;
	if (bs_stats(b, s, bs_stat_names, st, ST_COUNT) < 0)
		goto fail;
	n = snprintf(msg, sizeof(msg), "ok %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		     " %.6f\n", st[ST_WD_BLOCKS], st[ST_WD_SHED], st[ST_CKPTS], st[ST_SEG_SEALED],
		     st[ST_SSD_BLOCKS], secs);
	if (write(fd, msg, (size_t)n) != n)
		_exit(1);
	for (;;)
		pause();
fail:
	if (s != NULL)
		bench_stat_dump(b->who, s);
	n = snprintf(msg, sizeof(msg), "fail\n");
	if (write(fd, msg, (size_t)n) != n)
		_exit(1);
	/* No close: what the writer did must stay as a crash left it. */
	_exit(1);
}

/* Read the child's one line (or EOF). */
static int bs_rec_wait_line(int fd, char *buf, size_t len)
{
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t n = read(fd, buf + got, len - got - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got) != NULL)
			break;
	}
	buf[got] = '\0';
	return got > 0 ? 0 : -1;
}

static int bs_recovery_row(struct bs *b)
{
	struct bs_rec rc;
	struct kvt_store *s = NULL;
	char a[32], d[32], e[32], line[256];
	int ret = BENCH_EXIT_FAIL, pfd[2] = { -1, -1 }, st = 0;
	pid_t pid = -1;
	uint64_t free_b = 0;
	uint8_t *got = NULL;

	memset(&rc, 0, sizeof(rc));
	rc.b = b;
	rc.n = b->o.blocks;
	rc.size = b->o.value;
	rc.slot = bench_align_up(rc.size, BS_ALIGN);
	rc.rec = bs_rec_len(rc.size);
	snprintf(rc.path, sizeof(rc.path), "%s/recovery", b->run_dir);

	/* The checkpoint goes stale by ~10% of the blocks: taken after K
	 * sealed segments, K = 90% of the segments the run fills (rounded
	 * down), and never again before the kill (the next would be at 2K). */
	rc.segs = bs_segments_for(rc.n, rc.rec, b->o.segment);
	rc.ckpt_seals = (unsigned)(rc.segs * 0.9);
	if (rc.ckpt_seals < 1) {
		bench_err(b->who,
			  "recovery: %" PRIu64 " blocks of %s fill %.2f segments of %s: too few "
			  "for a stale checkpoint; raise --blocks or lower --segment",
			  rc.n, bench_fmt_size(a, sizeof(a), rc.size), rc.segs,
			  bench_fmt_size(d, sizeof(d), b->o.segment));
		return BENCH_EXIT_USAGE;
	}
	uint64_t data = rc.n * rc.rec;
	int r = bs_free_bytes(b->run_dir, &free_b);
	if (r < 0) {
		bench_err(b->who, "statvfs %s: %s", b->run_dir, strerror(-r));
		return BENCH_EXIT_FAIL;
	}
	uint64_t need = data + 3 * b->o.segment;
	uint64_t keep = b->o.smoke ? 256 * BS_MIB : BS_KEEP_FREE;
	if (need + keep > free_b) {
		uint64_t fit = free_b > keep + 3 * b->o.segment ?
			(free_b - keep - 3 * b->o.segment) / rc.rec : 0;
		bench_err(b->who,
			  "recovery: %" PRIu64 " blocks of %s need %s on %s, which has %s free; "
			  "the run would leave less than %s.  Try --blocks %" PRIu64
			  " (or another --dir)",
			  rc.n, bench_fmt_size(a, sizeof(a), rc.size),
			  bench_fmt_size(d, sizeof(d), need), b->run_dir,
			  bench_fmt_size(e, sizeof(e), free_b),
			  bench_fmt_size(line, sizeof(line), keep), fit);
		return BENCH_EXIT_FAIL;
	}
	rc.cfg.path = rc.path;
	rc.cfg.dram = bench_align_up(b->o.dram, BS_MIB);
	rc.cfg.prefault = !b->o.smoke;
	rc.cfg.segment = b->o.segment;
	rc.cfg.ssd_cap = bs_ssd_capacity(data, rc.rec, b->o.segment);
	rc.cfg.wd_max = rc.cfg.dram / 4;
	rc.cfg.ckpt_seals = rc.ckpt_seals;
	rc.cfg.log_level = KVT_LOG_WARN;
	if (rc.cfg.wd_max < rc.slot) {
		bench_err(b->who, "recovery: --dram %s leaves a write-down cap below one block",
			  bench_fmt_size(a, sizeof(a), rc.cfg.dram));
		return BENCH_EXIT_USAGE;
	}
	rc.patterns = aligned_alloc(BS_ALIGN, BS_PATTERNS * rc.slot);
	got = aligned_alloc(BS_ALIGN, 2 * rc.slot);
	if (rc.patterns == NULL || got == NULL) {
		bench_err(b->who, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < BS_PATTERNS; i++)
		bench_fill(rc.patterns + i * rc.slot, rc.slot, bench_seed(rc.size, 0xabc000u + i));

	bench_note(b->o.json, b->o.progress,
		   "recovery: %" PRIu64 " blocks of %s (records of %" PRIu64 " bytes, %s) into "
		   "segments of %s, DRAM tier %s, checkpoint after %u sealed segments of ~%.1f",
		   rc.n, bench_fmt_size(a, sizeof(a), rc.size), rc.rec,
		   bench_fmt_size(d, sizeof(d), data), bench_fmt_size(e, sizeof(e), b->o.segment),
		   bench_fmt_size(line, sizeof(line), rc.cfg.dram), rc.ckpt_seals, rc.segs);

	/* 1. The writer, in a child: it opens the only store of its process. */
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		bench_err(b->who, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		bench_err(b->who, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		bs_rec_child(&rc, pfd[1]);
	}
	close(pfd[1]);
	pfd[1] = -1;
	uint64_t c_written = 0, c_shed = 0, c_ckpts = 0, c_sealed = 0, c_blocks = 0;
	double c_secs = 0;
	if (bs_rec_wait_line(pfd[0], line, sizeof(line)) < 0 ||
	    sscanf(line, "ok %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %lf",
		   &c_written, &c_shed, &c_ckpts, &c_sealed, &c_blocks, &c_secs) != 6) {
		bench_err(b->who, "recovery: the writer failed (see above)");
		goto out;
	}
	bench_progress_end(b->o.progress);

	/* 2. kill -9: no close, so no checkpoint at close. */
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		bench_err(b->who, "recovery: the writer exited on its own (status 0x%x)", st);
		goto out;
	}
	if (c_written != rc.n || c_shed != 0 || c_blocks != rc.n) {
		bench_err(b->who,
			  "recovery: the writer wrote down %" PRIu64 " of %" PRIu64
			  " blocks (%" PRIu64 " shed, %" PRIu64 " on SSD)",
			  c_written, rc.n, c_shed, c_blocks);
		goto out;
	}
	if (c_ckpts != 1)
		bench_err(b->who,
			  "recovery: warning: the writer took %" PRIu64 " checkpoints, want 1",
			  c_ckpts);

	/* 3. Cold: nothing of the store in the page cache. */
	bs_drop_cache(rc.path);
	uint64_t rd0 = 0, wr0 = 0, rd1 = 0, wr1 = 0;
	bool dev = bench_proc_io(&rd0, &wr0) == 0;
	double open_s = 0;
	uint32_t ns;
	ret = bs_store_open(b, &rc.cfg, &s, &ns, &open_s);
	if (ret != BENCH_EXIT_OK)
		goto out;
	ret = BENCH_EXIT_FAIL;
	dev = dev && bench_proc_io(&rd1, &wr1) == 0;

	static const char *const rn[] = {
		"ssd.recovery_ns", "ssd.blocks", "ssd.recovery_checkpoint_blocks",
		"ssd.recovery_records_scanned", "ssd.recovery_segments_scanned",
		"ssd.recovery_dropped", "ssd.segments_used",
	};
	uint64_t rv[BS_ARRAY_LEN(rn)];
	if (bs_stats(b, s, rn, rv, BS_ARRAY_LEN(rn)) < 0)
		goto out;
	if (rv[1] != rc.n) {
		bench_err(b->who,
			  "recovery: %" PRIu64 " blocks recovered, %" PRIu64 " were written and "
			  "flushed",
			  rv[1], rc.n);
		bench_stat_dump(b->who, s);
		goto out;
	}

	/* 4. Verify: every block under --smoke; else --verify blocks spread over
	 * the run, half of them from the part the checkpoint does not name. */
	uint64_t nv = b->o.smoke || b->o.verify >= rc.n ? rc.n : b->o.verify;
	uint64_t ck = rv[2] < rc.n ? rv[2] : 0;
	uint64_t x = bench_seed(rc.size, 0x7e57);
	for (uint64_t k = 0; k < nv; k++) {
		uint64_t i, len = 0;
		struct kvt_key key;
		if (nv == rc.n)
			i = k;
		else if (k == 0)
			i = 0;
		else if (k == 1)
			i = rc.n - 1;
		else if (k % 2 == 0 || ck == 0)
			i = bench_xorshift(&x) % rc.n;
		else
			i = ck + bench_xorshift(&x) % (rc.n - ck);
		bs_key(&key, rc.size, i);
		memset(got, BS_POISON, rc.slot);
		r = kvt_get(s, ns, &key, got, rc.slot, &len);
		bs_rec_value(got + rc.slot, rc.patterns, rc.slot, i);
		if (r != KVT_OK || len != rc.size || memcmp(got, got + rc.slot, rc.size) != 0) {
			bench_err(b->who,
				  "recovery: block %" PRIu64 " after the reopen: %s, %" PRIu64
				  " bytes%s",
				  i, kvt_strerror(r), len,
				  r == KVT_OK && len == rc.size ? ", bytes differ" : "");
			bench_stat_dump(b->who, s);
			goto out;
		}
	}

	double rec_s = (double)rv[0] / 1e9;
	bool pass = open_s < BS_TARGET_RECOVERY_S;
	if (!pass && !b->o.smoke)
		b->targets_missed++;
	double dev_mb = dev ? (double)(rd1 - rd0) / 1e6 : -1;
	if (b->o.json) {
		printf("{\"bench\":\"ssd.recovery\",\"value_bytes\":%" PRIu64 ",\"blocks\":%" PRIu64
		       ",\"record_bytes\":%" PRIu64 ",\"open_s\":%.4f,\"recovery_s\":%.4f"
		       ",\"blocks_recovered\":%" PRIu64 ",\"checkpoint_blocks\":%" PRIu64
		       ",\"stale_blocks\":%" PRIu64 ",\"records_scanned\":%" PRIu64
		       ",\"segments_scanned\":%" PRIu64 ",\"segments_used\":%" PRIu64
		       ",\"segment_bytes\":%" PRIu64 ",\"dropped\":%" PRIu64
		       ",\"checkpoints_before_kill\":%" PRIu64 ",\"checkpoint_seals\":%u"
		       ",\"dram_capacity\":%" PRIu64 ",\"verified\":%" PRIu64,
		       rc.size, rc.n, rc.rec, open_s, rec_s, rv[1], rv[2], rc.n - rv[2], rv[3],
		       rv[4], rv[6], b->o.segment, rv[5], c_ckpts, rc.ckpt_seals, rc.cfg.dram, nv);
		if (dev)
			printf(",\"device_read_bytes\":%" PRIu64, rd1 - rd0);
		else
			printf(",\"device_read_bytes\":null");
		printf(",\"writer_gbps\":%.3f,\"io\":\"%s\",\"target_s\":%.1f",
		       bench_rate((double)rc.n * (double)rc.size, c_secs) / 1e9, b->o.io,
		       BS_TARGET_RECOVERY_S);
		bench_json_pass(b->o.smoke, pass);
		printf("}\n");
		fflush(stdout);
	} else {
		struct bench_cell cell = { .bench = "ssd.recovery", .result = bs_verdict(b, pass, false) };
		bench_fmt_size(cell.value, sizeof(cell.value), rc.size);
		snprintf(cell.kvtier, sizeof(cell.kvtier), "%.3f s", open_s);
		snprintf(cell.baseline, sizeof(cell.baseline), "-");
		snprintf(cell.ratio, sizeof(cell.ratio), "-");
		snprintf(cell.target, sizeof(cell.target), "< %.1f s", BS_TARGET_RECOVERY_S);
		snprintf(cell.notes, sizeof(cell.notes),
			 "kvt_store_open after kill -9; %" PRIu64 " blocks: %" PRIu64
			 " from the checkpoint, %" PRIu64 " records scanned in %" PRIu64
			 " segments; recovery %.3f s; %.1f MB read; %" PRIu64 " verified",
			 rv[1], rv[2], rv[3], rv[4], rec_s, dev_mb, nv);
		bs_cell_print(b, &cell);
	}
	ret = BENCH_EXIT_OK;
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	/* Close writes a full checkpoint: not timed, and the run dir goes anyway. */
	kvt_store_destroy(s);
	if (!b->o.keep)
		bench_rm_tree(rc.path);
	free(rc.patterns);
	free(got);
	return ret;
}

/* ------------------------------------------------------------------------
 * Command lines.
 */

static void bs_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench ssd [options]\n"
		"\n"
		"Measure libkvtier's SSD tier through its public API against fio (O_DIRECT,\n"
		"io_uring) on the same file system, A/B interleaved, medians:\n"
		"  ssd.write     write-through puts into a fresh store, timed to kvt_flush,\n"
		"                against fio --rw=write on a fresh fallocated file\n"
		"  ssd.read      gets of every value once, random order, --qd in flight, from\n"
		"                a reopened store (DRAM tier cold), against fio --rw=randread\n"
		"  ssd.recovery  with --recovery: see 'kvtier bench recovery --help'\n"
		"fio's blocks are kvtier's I/Os at its ssd.format (the default, or -o's):\n"
		"at format 2, and for values of 256 KiB and more, a record (512 B header +\n"
		"value rounded to 512 B; 4096 and 4096 with -o ssd.dio_align=4096), written\n"
		"and read whole; at format 3, writes of a full batch (up to 32 values under\n"
		"one header, as the writer cuts them) and reads of one value alone.\n"
		"kvtier's GB/s counts value bytes, fio's block bytes.  Every value read is\n"
		"checked byte for byte; /proc/self/io must show the reads reached the device.\n"
		"\n"
		"Options:\n"
		"  --smoke              small and quick (CI): 64 MiB per size, 32 MiB\n"
		"                       segments, targets not judged\n"
		"  --json               one JSON object per line instead of the table\n"
		"  --dir DIR            where the run directory is made (default $TMPDIR,\n"
		"                       else .); it is removed at the end\n"
		"  --sizes LIST         value sizes (default 256K,2M,16M)\n"
		"  --footprint SIZE     value bytes written per size and round (default 2G,\n"
		"                       raised to twice the DRAM tier)\n"
		"  --rounds N           A/B rounds; medians are reported (default 3)\n"
		"  --qd N               reads in flight, kvtier and fio (default 32)\n"
		"  --write-qd N         fio's iodepth for writes (default 8: the writes\n"
		"                       kvtier keeps in flight; the row reports what it saw)\n"
		"  --io MODE            ssd.io: uring (default), psync or auto (fio: io_uring)\n"
		"  --io-depth N         ssd.io_depth (default 64)\n"
		"  --dram SIZE          DRAM tier capacity floor (default 256M; raised so\n"
		"                       write-down and reads in flight fit)\n"
		"  --segment SIZE       ssd.segment (default 256M): a multiple of 4K, at\n"
		"                       least 1M, as the option takes\n"
		"  --fio PATH           the fio program (default fio)\n"
		"  --fio-opt=OPT        one more fio option, after the bench's (repeatable),\n"
		"                       e.g. --fio-opt=--mem=mmaphuge where huge pages are\n"
		"                       reserved, so fio's buffers match kvtier's arena\n"
		"  --recovery           add the recovery row (--blocks, --value, --verify)\n"
		"  --keep               keep the run directory\n"
		"  -o, --option NAME=VALUE\n"
		"                       set a store option after the bench's own (repeatable)\n"
		"  -h, --help           this text\n"
		"\n"
		"SIZE takes K, M, G, T suffixes (powers of 1024).  GB/s is 1e9 bytes/s.\n"
		"Exit status: 0 ran and verified (even if a target was missed), 1 runtime\n"
		"failure or wrong bytes, 2 usage error.  Manual: kvtier-bench(1).\n");
}

static void bs_recovery_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench recovery [options]\n"
		"\n"
		"Time reopening an SSD tier after kill -9 with a stale checkpoint: a child\n"
		"writes --blocks blocks write-through (a checkpoint after ~90%% of them,\n"
		"none at the end), flushes and is killed with SIGKILL; the store's files\n"
		"are dropped from the page cache; kvt_store_open is timed (target < 2 s)\n"
		"and a sample of blocks is verified byte for byte.  Reports the blocks\n"
		"recovered, how many came from the checkpoint, and the records and\n"
		"segments recovery scanned.\n"
		"\n"
		"Options:\n"
		"  --blocks N           blocks to write (default 1000000; K, M suffixes are\n"
		"                       powers of 1024)\n"
		"  --value SIZE         bytes per block (default 64K)\n"
		"  --verify N           blocks checked after the reopen (default 1024)\n"
		"  --dram SIZE          DRAM tier of the writer and the reopen (default 1G)\n"
		"  --segment SIZE       ssd.segment (default 256M)\n"
		"  --io MODE            ssd.io: uring (default), psync or auto\n"
		"  --dir DIR            where the run directory is made (default $TMPDIR,\n"
		"                       else .); refused if the run would leave < 10 GiB free\n"
		"  --smoke              4096 blocks, 16 MiB segments, every block verified\n"
		"  --json, --keep, -o NAME=VALUE, -h: as for 'kvtier bench ssd'\n");
}

enum {
	O_SMOKE = 256, O_JSON, O_DIR, O_SIZES, O_FOOTPRINT, O_ROUNDS, O_QD, O_WQD, O_IO,
	O_IODEPTH, O_DRAM, O_SEGMENT, O_FIO, O_FIO_OPT, O_RECOVERY, O_KEEP, O_BLOCKS, O_VALUE,
	O_VERIFY,
};

/*
 * A size for store option `name` (a bench flag that sets it): what
 * kvt_store_set_option takes -- the library's own parser and bounds, on
 * a store made for the check -- into *out.  Returns 0, or -1 with why.
 */
static int bs_parse_option_size(const char *name, const char *arg, uint64_t *out, char *why,
				size_t why_len)
{
	struct kvt_store *s = NULL;
	struct kvt_option o;
	int rc = kvt_store_create(&s);
	if (rc == 0) {
		rc = kvt_store_set_option(s, name, arg);
		kvt_store_destroy(s);
	}
	if (rc == 0)
		rc = kvt_parse_size(arg, out);
	if (rc == 0)
		return 0;
	snprintf(why, why_len, "%s", kvt_strerror(rc));
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (strcmp(o.name, name) == 0)
			snprintf(why, why_len, "%s wants %s", name, o.doc);
	return -1;
}

/* The default of store option `name` as a number (0: none). */
static unsigned bs_option_default(const char *name)
{
	struct kvt_option o;
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (strcmp(o.name, name) == 0 && o.def != NULL)
			return (unsigned)strtoul(o.def, NULL, 10);
	return 0;
}

/* Both commands share the parser; recovery refuses the ssd-only options. */
static int bs_parse_args(struct bs *b, bool recovery_cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "smoke", no_argument, NULL, O_SMOKE },
		{ "json", no_argument, NULL, O_JSON },
		{ "dir", required_argument, NULL, O_DIR },
		{ "sizes", required_argument, NULL, O_SIZES },
		{ "footprint", required_argument, NULL, O_FOOTPRINT },
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "qd", required_argument, NULL, O_QD },
		{ "write-qd", required_argument, NULL, O_WQD },
		{ "io", required_argument, NULL, O_IO },
		{ "io-depth", required_argument, NULL, O_IODEPTH },
		{ "dram", required_argument, NULL, O_DRAM },
		{ "segment", required_argument, NULL, O_SEGMENT },
		{ "fio", required_argument, NULL, O_FIO },
		{ "fio-opt", required_argument, NULL, O_FIO_OPT },
		{ "recovery", no_argument, NULL, O_RECOVERY },
		{ "keep", no_argument, NULL, O_KEEP },
		{ "blocks", required_argument, NULL, O_BLOCKS },
		{ "value", required_argument, NULL, O_VALUE },
		{ "verify", required_argument, NULL, O_VERIFY },
		{ "option", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs_opts *o = &b->o;
	bool have_fp = false, have_sizes = false, have_blocks = false, have_seg = false;
	bool have_dram = false, have_qd = false, have_wqd = false;
	char why[512];
	int c, li = -1;

	memset(o, 0, sizeof(*o));
	bs_rec_unit = SSD_REC_ALIGN;
	bs_format = bs_option_default("ssd.format");
	o->rounds = 3;
	o->qd = 32;
	o->write_qd = 8;
	o->io_depth = 64;
	o->io = "uring";
	o->fio = "fio";
	o->value = 64 * BS_KIB;
	o->verify = 1024;
	o->recovery = recovery_cmd;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":ho:", longopts, &li)) != -1) {
		if (recovery_cmd && (c == O_SIZES || c == O_FOOTPRINT || c == O_ROUNDS || c == O_QD ||
				     c == O_WQD || c == O_IODEPTH || c == O_FIO || c == O_FIO_OPT ||
				     c == O_RECOVERY))
			return bench_usage_err(b->who, "--%s belongs to 'kvtier bench ssd'",
					       longopts[li].name);
		switch (c) {
		case 'h':
			if (recovery_cmd)
				bs_recovery_usage(stdout);
			else
				bs_usage(stdout);
			return -1;
		case O_SMOKE:
			o->smoke = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_DIR:
			o->dir = optarg;
			break;
		case O_SIZES:
			if (bench_parse_sizes(b->who, optarg, UINT64_C(1) << 32, o->sizes, BS_SIZES_MAX,
					      &o->size_count) != 0)
				return BENCH_EXIT_USAGE;
			have_sizes = true;
			break;
		case O_FOOTPRINT:
			if (bench_parse_size(optarg, &o->footprint) < 0 || o->footprint == 0)
				return bench_usage_err(
					b->who, "--footprint '%s': want a size such as 2G", optarg);
			have_fp = true;
			break;
		case O_ROUNDS:
			if (bench_parse_uint(optarg, 1, BS_ROUNDS_MAX, &o->rounds) < 0)
				return bench_usage_err(b->who, "--rounds '%s': want 1..%d", optarg,
						       BS_ROUNDS_MAX);
			break;
		case O_QD:
			if (bench_parse_uint(optarg, 1, BS_QD_MAX, &o->qd) < 0)
				return bench_usage_err(b->who, "--qd '%s': want 1..%u", optarg,
						       BS_QD_MAX);
			have_qd = true;
			break;
		case O_WQD:
			if (bench_parse_uint(optarg, 1, BS_QD_MAX, &o->write_qd) < 0)
				return bench_usage_err(b->who, "--write-qd '%s': want 1..%u",
						       optarg, BS_QD_MAX);
			have_wqd = true;
			break;
		case O_IO:
			if (strcmp(optarg, "uring") && strcmp(optarg, "psync") && strcmp(optarg, "auto"))
				return bench_usage_err(
					b->who, "--io '%s': want uring, psync or auto", optarg);
			o->io = optarg;
			break;
		case O_IODEPTH:
			if (bench_parse_uint(optarg, 1, 4096, &o->io_depth) < 0)
				return bench_usage_err(b->who, "--io-depth '%s': want 1..4096",
						       optarg);
			break;
		case O_DRAM:
			if (bench_parse_size(optarg, &o->dram) < 0 || o->dram < 16 * BS_MIB)
				return bench_usage_err(
					b->who, "--dram '%s': want a size of at least 16M", optarg);
			have_dram = true;
			break;
		case O_SEGMENT:
			if (bs_parse_option_size("ssd.segment", optarg, &o->segment, why,
						 sizeof(why)) < 0)
				return bench_usage_err(b->who, "--segment '%s': %s", optarg, why);
			have_seg = true;
			break;
		case O_FIO:
			o->fio = optarg;
			break;
		case O_FIO_OPT:
			if (strncmp(optarg, "--", 2) != 0)
				return bench_usage_err(b->who,
						       "--fio-opt '%s': want one fio option, e.g. "
						       "--fio-opt=--mem=mmaphuge",
						       optarg);
			if (o->fio_opt_count == BS_STORE_OPTS_MAX)
				return bench_usage_err(b->who, "--fio-opt: at most %d",
						       BS_STORE_OPTS_MAX);
			o->fio_opts[o->fio_opt_count++] = optarg;
			break;
		case O_RECOVERY:
			o->recovery = true;
			break;
		case O_KEEP:
			o->keep = true;
			break;
		case O_BLOCKS:
			if (bench_parse_size(optarg, &o->blocks) < 0 || o->blocks == 0 ||
			    o->blocks > (UINT64_C(1) << 32))
				return bench_usage_err(
					b->who, "--blocks '%s': want 1..4G, e.g. 100000", optarg);
			have_blocks = true;
			break;
		case O_VALUE:
			if (bench_parse_size(optarg, &o->value) < 0 || o->value < 16 ||
			    o->value > (UINT64_C(1) << 30))
				return bench_usage_err(
					b->who, "--value '%s': want 16..1G, e.g. 64K", optarg);
			break;
		case O_VERIFY:
			if (bench_parse_uint(optarg, 1, UINT32_MAX, &o->verify) < 0)
				return bench_usage_err(
					b->who, "--verify '%s': want a count of blocks", optarg);
			break;
		case 'o':
			if (strchr(optarg, '=') == NULL || optarg[0] == '=')
				return bench_usage_err(
					b->who,
					"-o '%s': want NAME=VALUE, e.g. -o ssd.reinsert_pct=0",
					optarg);
			if (o->store_opt_count == BS_STORE_OPTS_MAX)
				return bench_usage_err(b->who, "-o: at most %d store options",
						       BS_STORE_OPTS_MAX);
			o->store_opts[o->store_opt_count++] = optarg;
			/* fio's blocks follow kvtier's records and batches */
			if (strcmp(optarg, "ssd.dio_align=4096") == 0)
				bs_rec_unit = SSD_REC_ALIGN_4K;
			else if (strncmp(optarg, "ssd.dio_align=", 14) == 0)
				bs_rec_unit = SSD_REC_ALIGN;
			else if (strncmp(optarg, "ssd.format=", 11) == 0)
				bs_format = (unsigned)strtoul(optarg + 11, NULL, 10);
			break;
		case ':':
			return bench_usage_err(b->who, "option '%s' needs a value",
					       argv[optind - 1]);
		default:
			return bench_usage_err(b->who, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bench_usage_err(b->who, "unexpected argument '%s'", argv[optind]);
	if (!have_sizes) {
		o->sizes[0] = 256 * BS_KIB;
		o->sizes[1] = 2 * BS_MIB;
		o->sizes[2] = 16 * BS_MIB;
		o->size_count = 3;
	}
	if (!have_fp)
		o->footprint = o->smoke ? 64 * BS_MIB : 2 * BS_GIB;
	if (o->smoke && !have_qd)
		o->qd = 8;
	if (o->smoke && !have_wqd)
		o->write_qd = 4;
	if (!have_blocks)
		o->blocks = o->smoke ? 4096 : 1000000;
	/* Smoke: segments small enough that a few thousand blocks seal several. */
	if (!have_seg)
		o->segment = !o->smoke ? 256 * BS_MIB : recovery_cmd ? 16 * BS_MIB : 32 * BS_MIB;
	if (!have_dram)
		o->dram = recovery_cmd ? (o->smoke ? 64 : 1024) * BS_MIB : (o->smoke ? 64 : 256) * BS_MIB;
	if (o->dir == NULL) {
		const char *t = getenv("TMPDIR");
		o->dir = t != NULL && *t != '\0' ? t : ".";
	}
	for (unsigned i = 0; i < (recovery_cmd ? 0 : o->size_count); i++) {
		uint64_t rec = bs_rec_len(o->sizes[i]);
		if (rec + 2 * BS_ALIGN + BS_SUM_PER_REC > o->segment)
			return bench_usage_err(b->who,
					       "value size %" PRIu64
					       " does not fit a segment of %" PRIu64
					       " bytes: raise --segment",
					       o->sizes[i], o->segment);
	}
	if (bs_rec_len(o->value) + 2 * BS_ALIGN + BS_SUM_PER_REC > o->segment)
		return bench_usage_err(b->who,
				       "--value %" PRIu64 " does not fit a segment of %" PRIu64
				       " bytes: raise --segment",
				       o->value, o->segment);
	o->progress = isatty(STDERR_FILENO);
	return 0;
}

/* Is fio there?  Its version goes into the header. */
static bool bs_fio_probe(struct bs *b, char *ver, size_t len)
{
	char *argv[3] = { NULL, (char *)"--version", NULL };
	double wall;
	char errpath[4200];
	snprintf(errpath, sizeof(errpath), "%s/fio.err", b->run_dir);
	/* A missing fio is reported by the caller, who knows whether it matters. */
	char *out = bs_fio_spawn(b, argv, &wall, true);
	(void)unlink(errpath);
	if (out == NULL)
		return false;
	out[strcspn(out, "\n")] = '\0';
	snprintf(ver, len, "%s", out);
	free(out);
	return true;
}

/* Make the run directory: a fresh, private one under --dir. */
static int bs_run_dir(struct bs *b)
{
	snprintf(b->run_dir, sizeof(b->run_dir), "%s/kvtier-bench-ssd.XXXXXX", b->o.dir);
	if (mkdtemp(b->run_dir) == NULL) {
		bench_err(b->who, "making a run directory in %s: %s (use --dir)", b->o.dir,
			  strerror(errno));
		return -1;
	}
	bs_blk_find(b);
	return 0;
}

static void bs_footer(const struct bs *b, int rc)
{
	if (rc != BENCH_EXIT_OK || b->o.json)
		return;
	if (b->o.smoke)
		printf("# smoke: every row ran and every byte verified\n");
	else if (b->suspects || b->targets_missed)
		printf("# %u row(s) missed a target (FAIL), %u suspect (SUSPECT: ratio above %.1f "
		       "or reads not from the device); bytes all verified\n",
		       b->targets_missed, b->suspects, BS_SUSPECT_RATIO);
	else
		printf("# every target met; bytes all verified\n");
}

/* The end of a run that ended with rc: the machine's load then (if the
 * rows ran), the footer, the run directory removed (or kept: --keep). */
static int bs_finish(struct bs *b, int rc)
{
	bench_progress_end(b->o.progress);
	if (rc == BENCH_EXIT_OK)
		bench_load_note(b->who, b->o.json, b->o.progress, "end");
	bs_footer(b, rc);
	if (b->o.keep)
		fprintf(stderr, "%s: kept %s\n", b->who, b->run_dir);
	else
		bench_rm_tree(b->run_dir);
	return rc;
}

int bench_ssd_main(int argc, char **argv)
{
	struct bs b;
	char ver[128] = "", a[32];
	uint64_t free_b = 0;
	memset(&b, 0, sizeof(b));
	b.who = "kvtier bench ssd";
	int rc = bs_parse_args(&b, false, argc, argv);
	if (rc != 0)
		return rc < 0 ? BENCH_EXIT_OK : rc;
	if (bs_run_dir(&b) < 0)
		return BENCH_EXIT_FAIL;
	b.have_fio = bs_fio_probe(&b, ver, sizeof(ver));
	if (!b.have_fio && !b.o.smoke) {
		bench_err(b.who,
			  "cannot run '%s' (the baseline): install fio (Debian: apt-get install "
			  "fio) or pass --fio PATH",
			  b.o.fio);
		bench_rm_tree(b.run_dir);
		return BENCH_EXIT_FAIL;
	}
	if (!b.have_fio)
		fprintf(stderr, "%s: warning: no fio ('%s'): smoke run without the baseline\n", b.who,
			b.o.fio);
	(void)bs_free_bytes(b.run_dir, &free_b);
	if (!b.o.json) {
		printf("# kvtier bench ssd%s: libkvtier %s, %s\n", b.o.smoke ? " --smoke" : "",
		       kvt_version(), b.have_fio ? ver : "no fio");
		if (b.o.smoke)
			printf("# smoke run: checks that the rows run and verify; ratios mean nothing\n");
		bench_note(b.o.json, b.o.progress,
			   "run directory %s (%s free); kvtier ssd.io=%s io_depth=%u, fio io_uring "
			   "O_DIRECT",
			   b.run_dir, bench_fmt_size(a, sizeof(a), free_b), b.o.io, b.o.io_depth);
		bench_note(b.o.json, b.o.progress,
			   "ssd.format=%u: kvtier writes %s, values in %u B units; fio moves "
			   "blocks of what one write and one get of kvtier's move.  kvtier GB/s "
			   "counts value bytes, fio GB/s block bytes; 'blocks' is kvtier on fio's",
			   bs_format,
			   bs_format >= 3 ? "values under 256 KiB in batches under one header "
					    "(and reads them alone), larger ones as records" :
					    "a record per value (its header, then the value)",
			   (unsigned)bs_rec_unit);
		bench_note(
			b.o.json, b.o.progress,
			"write: write-through puts paced so nothing is shed, timed to kvt_flush "
			"(fdatasync); read: a reopened store (DRAM cold), every value once in "
			"random order; device read = /proc/self/io read_bytes per byte returned");
	}
	bench_load_note(b.who, b.o.json, b.o.progress, "start");
	rc = bs_ssd_rows(&b);
	if (rc == BENCH_EXIT_OK && b.o.recovery)
		rc = bs_recovery_row(&b);
	return bs_finish(&b, rc);
}

int bench_recovery_main(int argc, char **argv)
{
	struct bs b;
	char a[32];
	uint64_t free_b = 0;
	memset(&b, 0, sizeof(b));
	b.who = "kvtier bench recovery";
	int rc = bs_parse_args(&b, true, argc, argv);
	if (rc != 0)
		return rc < 0 ? BENCH_EXIT_OK : rc;
	if (bs_run_dir(&b) < 0)
		return BENCH_EXIT_FAIL;
	(void)bs_free_bytes(b.run_dir, &free_b);
	if (!b.o.json) {
		printf("# kvtier bench recovery%s: libkvtier %s\n", b.o.smoke ? " --smoke" : "",
		       kvt_version());
		bench_note(b.o.json, b.o.progress, "run directory %s (%s free); ssd.io=%s",
			   b.run_dir, bench_fmt_size(a, sizeof(a), free_b), b.o.io);
		bench_note(b.o.json, b.o.progress,
			   "kvtier: the open's wall time, after kill -9 of the writer and with the "
			   "store's files dropped from the page cache");
	}
	bench_load_note(b.who, b.o.json, b.o.progress, "start");
	rc = bs_recovery_row(&b);
	return bs_finish(&b, rc);
}

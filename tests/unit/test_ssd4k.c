/*
 * test_ssd4k.c - the SSD tier with records aligned to 4096 bytes
 * (ssd.dio_align=4096, what a 4Kn drive gets by default), on real files
 * with O_DIRECT: odd value sizes and multi-part values round-trip through
 * the SSD; every read and write the tier issues -- the engine's and
 * recovery's preads -- has its offset, total length and each iovec's base
 * and length a multiple of 4096 (io_align_check; a negative control shows
 * the check catches a 512-byte header); victim write-down; recovery after
 * kill -9 and after a simulated power loss; kvtier fsck clean; and a store
 * reopened at the other alignment, both ways, keeps every block readable
 * (mixed segments) while new segments take the new alignment; quiet part
 * reads of a record whose length names the 512 layout stay 4096-aligned.
 *
 * Every scenario runs on the io_uring backend and on the pread/pwrite
 * backend (KVT_TEST_IO=uring|psync picks one), at both on-disk formats
 * (ssd.format=2, a header per record; 3, small single-part values in
 * batches under one header, whose header and values' padding are 4096
 * bytes here too).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"
#include "kvt_int.h"
#include "ssd.h"
#include "ssd_int.h"
#include "ssdfmt.h"
#include "store_int.h"
#include "t.h"
#include "tkill9.h"
#include "tstore.h"

static const char *io_backend = "uring";
/* ssd.format, pinned: seg0_says reads the segment header's version,
 * which the format decides (format 3: version 4 at either alignment). */
static const char *ssd_format = "2";
static const char *seg_size = "2M"; /* room for the block of 1 MiB */

/* A store in dir at record alignment `align` ("512", "4096", "auto"),
 * with every I/O checked against it (ssd.debug_check_align) if check. */
static struct kvt_store *open_at(const char *dir, const char *align, const char *dram,
				 const char *ssd, const char *admission, bool check)
{
	return t_store_open("path", dir, "dram.capacity", dram, "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", ssd, "ssd.segment", seg_size,
			    "ssd.admission", admission, "ssd.io", io_backend, "ssd.dio_align", align,
			    "ssd.debug_check_align", check ? "on" : "off", "ssd.format", ssd_format,
			    NULL);
}

static uint32_t ns_of(struct kvt_store *s)
{
	return t_ns(s, "ssd4k-test");
}

/* Sizes that straddle both alignments, and a block of 1 MiB. */
static const size_t sizes[] = { 1, 511, 512, 513, 4095, 4096, 4097, 16384, 16385, 1u << 20 };
#define NSIZES KVT_ARRAY_LEN(sizes)

static size_t len_of(uint64_t k)
{
	return k < NSIZES ? sizes[k] : 1 + (size_t)((k * 7919) % 70000);
}

/* Values of up to 3 parts (k % 3 + 1), so that part tables round-trip. */
static int put_k(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	/* 1-3 parts; one at format 3, where a batch takes single-part values
	 * only and a run of them (format 2 covers the parts) */
	size_t len = len_of(k), np = len >= 3 && strcmp(ssd_format, "3") ? k % 3 + 1 : 1;
	char *buf = malloc(len);
	struct kvt_key key = t_key(k);
	struct iovec v[3];
	size_t off = 0;
	int r;
	t_fill(buf, len, k);
	for (size_t i = 0; i < np; i++) {
		size_t n = i + 1 == np ? len - off : len / np;
		v[i] = (struct iovec){ buf + off, n };
		off += n;
	}
	r = kvt_put(s, ns, &key, v, (unsigned)np);
	free(buf);
	return r;
}

/* KVT_OK with exact bytes, or KVT_MISS; anything else fails the test. */
static int get_k(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	return t_get_filled(s, ns, k, len_of(k));
}

/* Every I/O checked so far met the alignment; at least one was checked. */
static void aligned_io(struct kvt_store *s, const char *what)
{
	uint64_t checked, bad;
	io_align_counts(ssd_io(store_ssd(s)), &checked, &bad);
	fprintf(stderr, "  %s (%s): %llu I/Os checked, %llu misaligned\n", what, io_backend,
		(unsigned long long)checked, (unsigned long long)bad);
	T_ASSERT(checked > 0);
	T_EQ_U64(bad, 0);
}

/* Every segment file in use lays records out at align, and keeps O_DIRECT
 * where the device allows it. */
static void segs_at(struct kvt_store *s, uint32_t align)
{
	struct ssd *d = store_ssd(s);
	unsigned used = 0;
	for (uint32_t i = 0; i < d->slot_count; i++) {
		struct ssd_seg *g = &d->segs[i];
		if (g->fd < 0 || g->generation == 0)
			continue;
		used++;
		T_EQ_INT(g->rec_align, align);
		/* O_DIRECT where the device allows it at this alignment (both on
		 * the test machines; on a 4Kn drive not at 512: the page cache) */
		T_EQ_INT(g->direct, g->dio_ok && g->dio_need <= align);
	}
	T_ASSERT(used > 0);
}

/* The segment header of slot 0 on disk names the alignment. */
static void seg0_says(const char *dir, uint32_t align)
{
	char path[4096];
	uint8_t buf[SSD_ALIGN];
	struct ssd_seg_hdr h;
	int fd;
	snprintf(path, sizeof(path), "%s/ssd/seg-000000", dir);
	fd = open(path, O_RDONLY);
	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, buf, sizeof(buf), 0), (int)sizeof(buf));
	close(fd);
	T_OK(ssd_seg_hdr_decode(buf, &h));
	T_EQ_INT(h.rec_align, align);
	if (!strcmp(ssd_format, "3"))
		T_EQ_INT(h.version, SSD_SEG_VERSION_BATCH);
	else
		T_EQ_INT(h.version, align == SSD_REC_ALIGN ? SSD_FMT_VERSION : SSD_SEG_VERSION_4K);
}

static void problem(void *ctx, int kind, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "  fsck (%d): %s\n", kind, msg);
}

static void fsck_clean(const char *dir)
{
	struct kvt_fsck f;
	memset(&f, 0, sizeof(f));
	f.problem = problem;
	T_EQ_INT(kvt_store_fsck(dir, &f), 0);
	T_EQ_U64(f.damaged, 0);
	T_EQ_U64(f.orphans, 0);
	T_ASSERT(f.blocks_checked > 0);
}

/* 1. Odd sizes and multi-part values at 4096: put, flush, reopen with a
 *    cold DRAM, every block read back from SSD exactly; all I/O aligned
 *    (at format 3 batches among them). */
static void test_sizes(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s;
	uint32_t ns;
	const uint64_t n = 64;

	s = open_at(dir, "4096", "64M", "16M", "always", true);
	ns = ns_of(s);

	/* At format 3 the writer is held while they queue, so that the
	 * single-part ones under 256 KiB go down in batches. */
	ssd_hold_writes(store_ssd(s), !strcmp(ssd_format, "3"));
	for (uint64_t k = 0; k < n; k++)
		T_RC(put_k(s, ns, k), KVT_OK);
	ssd_hold_writes(store_ssd(s), false);
	T_RC(kvt_flush(s), KVT_OK);
	if (!strcmp(ssd_format, "3"))
		T_ASSERT(t_stat(s, "ssd.batches") > 0);
	segs_at(s, SSD_REC_ALIGN_4K);
	/* 4096-padded headers: a 1-byte value takes 8 KiB of flash. */
	T_ASSERT(t_stat(s, "ssd.live_record_bytes") % 4096 == 0);
	aligned_io(s, "puts");
	kvt_store_destroy(s);
	seg0_says(dir, SSD_REC_ALIGN_4K);

	s = open_at(dir, "4096", "64M", "16M", "always", true);
	ns = ns_of(s);
	T_EQ_U64(t_stat(s, "ssd.blocks"), n);
	for (uint64_t k = 0; k < n; k++)
		T_RC(get_k(s, ns, k), KVT_OK);
	T_ASSERT(t_stat(s, "ssd.reads") >= n);
	T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
	T_EQ_U64(t_stat(s, "ssd.header_errors"), 0);
	aligned_io(s, "reopen and gets");
	kvt_store_destroy(s);
	fsck_clean(dir);
	t_rmtree(dir);
	free(dir);
}

/* 2. The check itself: a store at 512 checked against 4096 sees its
 *    512-byte header buffers (what a 4Kn drive would refuse). */
static void test_check_catches_512(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_at(dir, "512", "64M", "16M", "always", false);
	uint32_t ns = ns_of(s);
	uint64_t checked, bad;
	io_align_check(ssd_io(store_ssd(s)), SSD_REC_ALIGN_4K);
	T_RC(put_k(s, ns, 2), KVT_OK); /* 512 bytes */
	T_RC(kvt_flush(s), KVT_OK);
	io_align_counts(ssd_io(store_ssd(s)), &checked, &bad);
	T_ASSERT(checked > 0);
	T_ASSERT(bad > 0);
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* 3. Victim write-down at 4096: a DRAM of 8 MiB under 20 MiB of puts
 *    writes its victims down; every block is exact or a miss, most hit,
 *    and the SSD served some; all I/O aligned. */
static void test_victims(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_at(dir, "4096", "8M", "32M", "victim", true);
	uint32_t ns = ns_of(s);
	uint64_t ok = 0, n = 600;

	for (uint64_t k = 0; k < n; k++)
		T_RC(put_k(s, ns, k + NSIZES), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	for (uint64_t k = 0; k < n; k++)
		ok += get_k(s, ns, k + NSIZES) == KVT_OK;
	fprintf(stderr, "  victims: %llu of %llu read back, %llu from SSD\n",
		(unsigned long long)ok, (unsigned long long)n,
		(unsigned long long)t_stat(s, "ssd.reads"));
	T_ASSERT(t_stat(s, "ssd.writedown_blocks") > 0);
	T_ASSERT(t_stat(s, "ssd.reads") > 0);
	T_ASSERT(ok > n / 2);
	T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
	aligned_io(s, "victims");
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* 4. kill -9 of a writer at 4096 (a stale checkpoint, an open segment
 *    walked by recovery): every flushed block is back, all I/O aligned,
 *    fsck clean. */
static struct kvt_store *kill9_open(const char *dir)
{
	return open_at(dir, "4096", "64M", "32M", "always", false);
}

static void test_kill9(void)
{
	/* 250 blocks flushed every 25, a checkpoint after 100 goes stale. */
	static const struct t_writer w = { kill9_open, ns_of, put_k, 100, 25, 250 };
	char *dir = t_mkdtemp();
	uint64_t flushed = t_kill9_writer(dir, &w);
	struct kvt_store *s;
	uint32_t ns;

	s = open_at(dir, "4096", "64M", "32M", "always", true);
	ns = ns_of(s);
	T_ASSERT(t_stat(s, "ssd.recovery_records_scanned") > 0);
	for (uint64_t k = 0; k < flushed + 100; k++) {
		int r = get_k(s, ns, k);
		if (k < flushed)
			T_RC(r, KVT_OK);
	}
	T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
	aligned_io(s, "recovery after kill -9");
	kvt_store_destroy(s);
	fsck_clean(dir);
	t_rmtree(dir);
	free(dir);
}

/* 5. Power loss at 4096: every unsynced write undone; flushed blocks back,
 *    the rest exact or a miss. */
static void test_powerloss(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s;
	uint32_t ns;
	pid_t pid;
	int st, lost = 0;

	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_at(dir, "4096", "64M", "16M", "always", false);
		uint32_t cns = ns_of(c);
		struct kvt_io *io = ssd_io(store_ssd(c));
		io_powerloss_arm(io, true);
		for (uint64_t k = 0; k < 40; k++)
			put_k(c, cns, k);
		kvt_flush(c);
		for (uint64_t k = 40; k < 80; k++)
			put_k(c, cns, k);
		for (int i = 0; i < 5000 && (t_stat(c, "ssd.writes_inflight") != 0 ||
					     t_stat(c, "ssd.writedown_pending_bytes") != 0); i++)
			usleep(1000);
		io_powerloss_cut(io);
		_exit(0);
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	s = open_at(dir, "4096", "64M", "16M", "always", true);
	ns = ns_of(s);
	for (uint64_t k = 0; k < 40; k++)
		T_RC(get_k(s, ns, k), KVT_OK);
	for (uint64_t k = 40; k < 80; k++)
		lost += get_k(s, ns, k) == KVT_MISS;
	T_GE_INT(lost, 1);
	aligned_io(s, "recovery after power loss");
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* 6. Reopened at the other alignment, both ways: old segments stay
 *    readable (their headers say their alignment), new ones take the new
 *    one; fsck is clean on the mixed store; a full log wraps over the old
 *    segments (their records dropped, not carried, when reused): every
 *    read exact or a miss, no CRC or I/O error. */
static void mixed_round(const char *first, const char *second)
{
	char *dir = t_mkdtemp();
	uint32_t a1 = atoi(first), a2 = atoi(second);
	struct kvt_store *s = open_at(dir, first, "64M", "8M", "always", false);
	uint32_t ns = ns_of(s);
	uint64_t ok = 0;

	for (uint64_t k = 0; k < 40; k++)
		T_RC(put_k(s, ns, k), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	kvt_store_destroy(s);
	seg0_says(dir, a1);

	s = open_at(dir, second, "64M", "8M", "always", false);
	ns = ns_of(s);
	for (uint64_t k = 0; k < 40; k++)
		T_RC(get_k(s, ns, k), KVT_OK);
	for (uint64_t k = 40; k < 80; k++)
		T_RC(put_k(s, ns, k), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	{
		/* The slot written now is at the new alignment. */
		struct ssd *d = store_ssd(s);
		bool seen = false;
		for (uint32_t i = 0; i < d->slot_count; i++)
			seen |= d->segs[i].generation != 0 && d->segs[i].rec_align == a2;
		T_ASSERT(seen);
	}
	kvt_store_destroy(s);
	fsck_clean(dir);

	/* Cold DRAM, both kinds of segment read from SSD. */
	s = open_at(dir, second, "64M", "8M", "always", false);
	ns = ns_of(s);
	for (uint64_t k = 0; k < 80; k++)
		T_RC(get_k(s, ns, k), KVT_OK);
	/* Wrap the log (4 slots of 2 MiB) several times over. */
	for (uint64_t k = 80; k < 600; k++)
		T_RC(put_k(s, ns, k), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	kvt_store_destroy(s);
	/* The open segment reuses a slot in place, and values of mixed sizes
	 * leave its end inside an old record's bytes: the end of its writes
	 * to fsck (the checkpoint's write point), not a damaged header. */
	fsck_clean(dir);
	s = open_at(dir, second, "64M", "8M", "always", false); /* cold DRAM again */
	ns = ns_of(s);
	for (uint64_t k = 0; k < 600; k++)
		ok += get_k(s, ns, k) == KVT_OK;
	T_ASSERT(t_stat(s, "ssd.reads") == ok);
	T_ASSERT(ok > 0);
	T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
	T_EQ_U64(t_stat(s, "ssd.io_errors"), 0);
	segs_at(s, a2);
	kvt_store_destroy(s);
	fsck_clean(dir); /* recovery sealed that segment where its walk ended */
	fprintf(stderr, "  %s then %s: %llu of 600 readable after the wrap (%s)\n", first, second,
		(unsigned long long)ok, io_backend);
	t_rmtree(dir);
	free(dir);
}

static void test_mixed(void);
static void test_mixed(void)
{
	mixed_round("512", "4096");
	mixed_round("4096", "512");
}

/* 7. auto: this file system's O_DIRECT alignment (512 or finer on the
 *    test machines, 4096 on a 4Kn drive) gives the records' alignment. */
static void test_auto(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_at(dir, "auto", "64M", "8M", "always", false);
	uint32_t a = store_ssd(s)->rec_align;
	T_ASSERT(a == SSD_REC_ALIGN || a == SSD_REC_ALIGN_4K);
	fprintf(stderr, "  auto: records %u-byte aligned here\n", a);
	T_RC(put_k(s, ns_of(s), 3), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	kvt_store_destroy(s);
	seg0_says(dir, a);
	t_rmtree(dir);
	free(dir);
}

/* 8. Quiet part reads at 4096.  A record of 215-246 parts whose value is
 *    whole 4 KiB pages has the same length in both layouts (its header
 *    pads to 4096 either way), so its length names the 512 layout; a part
 *    past the first read's 4 KiB is then read on its own, and that read
 *    must still be 4096-aligned (before the fix it was rounded to 512: a
 *    4Kn drive refuses it, EINVAL, every such part a miss).  Every part
 *    read back exactly, from SSD, all I/O aligned. */
#define PA_PARTS 230
#define PA_LEN (64 * 4096)

static size_t pa_len(uint32_t i)
{
	return i + 1 < PA_PARTS ? 1139 : PA_LEN - (PA_PARTS - 1) * 1139;
}

static void test_part_align(void)
{
	char *dir = t_mkdtemp(), *buf = malloc(PA_LEN), *got = malloc(8192);
	struct iovec *v = calloc(PA_PARTS, sizeof(*v));
	struct kvt_key key = t_key(7);
	struct kvt_store *s;
	struct kvt_queue *q;
	uint32_t ns, parts[] = { 0, 1, 3, 5, 100, 228, 229 };
	size_t off = 0;

	T_ASSERT(buf && got && v);
	T_EQ_U64(ssd_rec_align_of(PA_PARTS, PA_LEN, ssd_rec_len(PA_PARTS, PA_LEN, 4096)),
		 SSD_REC_ALIGN);
	t_fill(buf, PA_LEN, 7);
	for (uint32_t i = 0; i < PA_PARTS; i++) {
		v[i] = (struct iovec){ buf + off, pa_len(i) };
		off += pa_len(i);
	}
	s = open_at(dir, "4096", "64M", "16M", "always", true);
	ns = ns_of(s);
	T_RC(kvt_put(s, ns, &key, v, PA_PARTS), KVT_OK);
	T_RC(kvt_flush(s), KVT_OK);
	kvt_store_destroy(s);
	s = open_at(dir, "4096", "64M", "16M", "always", true);
	ns = ns_of(s);
	T_OK(kvt_queue_create(s, &q));
	for (size_t j = 0; j < KVT_ARRAY_LEN(parts); j++) {
		struct kvt_req r, *rp = &r, *done;
		struct iovec d = { got, 8192 };
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET;
		r.flags = KVT_F_PART | KVT_F_QUIET;
		r.part = parts[j];
		r.ns = ns;
		r.key = key;
		r.iov = &d;
		r.iov_count = 1;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &done, 1, 10000), 1);
		T_RC(r.status, KVT_OK);
		T_EQ_INT(r.tier, KVT_TIER_SSD);
		T_EQ_U64(r.length, pa_len(parts[j]));
		T_EQ_MEM(got, v[parts[j]].iov_base, pa_len(parts[j]));
	}
	T_EQ_U64(t_stat(s, "ssd.part_reads"), KVT_ARRAY_LEN(parts));
	T_EQ_U64(t_stat(s, "dram.blocks"), 0);
	aligned_io(s, "quiet part reads");
	T_OK(kvt_queue_destroy(q));
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
	free(buf);
	free(got);
	free(v);
}

int main(void)
{
	const char *only = getenv("KVT_TEST_IO");
	const char *backends[2] = { "uring", "psync" }, *formats[2] = { "2", "3" };
	for (int f = 0; f < 2; f++) {
		ssd_format = formats[f];
		for (int b = 0; b < 2; b++) {
			if (only && strcmp(only, backends[b]))
				continue;
			io_backend = backends[b];
			fprintf(stderr, "== backend %s, format %s\n", io_backend, ssd_format);
			test_sizes();
			test_check_catches_512();
			test_victims();
			test_kill9();
			test_powerloss();
			test_mixed();
			test_auto();
			test_part_align();
		}
	}
	return 0;
}

/*
 * test_ssd_fsck.c - kvtier fsck (lib/tier/ssd/ssd_fsck.c) and recovery
 * (ssd_recover.c) agree about where a segment's records end, on the
 * stores a running tier leaves: an open segment in a slot reused in place
 * (ssd.reuse=progressive and whole) with values of mixed sizes, whose end
 * lies inside an old record's bytes, after a graceful stop and after a
 * crash, at both record alignments (ssd.dio_align=512|4096).  fsck
 * reports no damage there and walks exactly the records recovery then
 * seals into the segment's summary; a damaged header before the
 * checkpoint's write point is damage, one past it (what a crash may leave)
 * a warning naming the records recovery will not find -- and recovery
 * indeed does not find them.  A torn value (header sound, a part failing
 * its CRC) past the write point is a warning too, and its block a miss
 * after recovery; before it, damage.  The store id fsck judges segments
 * and the checkpoint by is the one recovery takes, ssd/id's.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io.h"
#include "kvt_int.h"
#include "ssd.h"
#include "ssdfmt.h"
#include "store_int.h"
#include "t.h"
#include "tstore.h"

/* The stores of cases 1-6 write format 2 (ssd.format pinned, whatever
 * the default or KVT_TEST_SSD_FORMAT): they damage and count records
 * one per value, and case 3 edits a v2 summary by hand.  Case 7 is
 * format 3's. */
static struct kvt_store *open_fmt(const char *dir, const char *align, const char *reuse,
				  const char *format)
{
	return t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", "4M", "ssd.segment", "1M",
			    "ssd.admission", "always", "ssd.checkpoint_seals", "0", "ssd.reuse",
			    reuse, "ssd.dio_align", align, "ssd.format", format, NULL);
}

static struct kvt_store *open_at(const char *dir, const char *align, const char *reuse)
{
	return open_fmt(dir, align, reuse, "2");
}

/* A store of another shape: capacity and segment size. */
static struct kvt_store *open_sized(const char *dir, const char *cap, const char *seg)
{
	return t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", cap, "ssd.segment", seg,
			    "ssd.admission", "always", "ssd.checkpoint_seals", "0", "ssd.format",
			    "2", NULL);
}

static uint32_t ns_of(struct kvt_store *s)
{
	return t_ns(s, "ssd-fsck-test");
}

static size_t len_of(uint64_t k)
{
	return 1 + (size_t)((k * 7919) % 70000);
}

static void put_k(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	T_RC(t_put_filled(s, ns, k, len_of(k)), KVT_OK);
}

/* What fsck said. */
struct said {
	struct kvt_fsck f;
	char text[8192];
};

static void said_cb(void *ctx, int kind, const char *msg)
{
	struct said *w = ctx;
	size_t n = strlen(w->text);
	fprintf(stderr, "    fsck (%d): %s\n", kind, msg);
	snprintf(w->text + n, sizeof(w->text) - n, "%d %s\n", kind, msg);
}

/* fsck told the store's ssd.capacity and ssd.segment (0: not). */
static int fsck_as(const char *dir, struct said *w, uint64_t cap, uint64_t seg)
{
	memset(w, 0, sizeof(*w));
	w->f.problem = said_cb;
	w->f.ctx = w;
	w->f.ssd_capacity = cap;
	w->f.ssd_segment = seg;
	return kvt_store_fsck(dir, &w->f);
}

static int fsck(const char *dir, struct said *w)
{
	return fsck_as(dir, w, 0, 0);
}

/* The store's open segment on disk: its slot, header, and the
 * structures (records; in a segment of format 3 batches too) a walk like
 * recovery's finds (ssd_struct_decode, ssd_walk_struct): offsets in
 * offs[], count n; *end: where the walk stops. */
struct open_seg {
	uint32_t slot;
	struct ssd_seg_hdr h;
	uint64_t offs[512];
	uint32_t kinds[512]; /* SSD_STRUCT_REC or SSD_STRUCT_BATCH */
	uint32_t types[512]; /* a record's type (SSD_REC_*); 0 for a batch */
	uint64_t seqs[512];  /* a record's seq; a batch's first entry's */
	uint32_t n;
	uint64_t end;
	uint64_t keys[512]; /* k of each record's t_key(k); a batch's first entry's */
};

static int seg_fd(const char *dir, uint32_t slot, int flags)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/ssd/seg-%06u", dir, slot);
	return open(path, flags);
}

static bool find_open(const char *dir, struct open_seg *o)
{
	uint8_t hb[SSD_ALIGN], *buf = malloc(20480);
	struct ssd_struct *st = malloc(sizeof(*st));
	bool found = false;
	T_ASSERT(buf && st);
	memset(o, 0, sizeof(*o));
	for (uint32_t slot = 0;; slot++) {
		struct ssd_seg_hdr h;
		int fd = seg_fd(dir, slot, O_RDONLY);
		if (fd < 0)
			break;
		T_EQ_INT(pread(fd, hb, sizeof(hb), 0), (int)sizeof(hb));
		if (ssd_seg_hdr_decode(hb, &h) == 0 && h.generation && !h.summary_len) {
			bool batches = h.version == SSD_SEG_VERSION_BATCH;
			uint64_t off = SSD_ALIGN, len = 0;
			uint32_t a = h.rec_align;
			T_ASSERT(!found); /* one open segment */
			found = true;
			o->slot = slot;
			o->h = h;
			for (;;) {
				const struct kvt_key *key;
				int d;
				if (off + a > h.seg_size || pread(fd, buf, a, (off_t)off) != (ssize_t)a)
					break;
				d = ssd_struct_decode(buf, a, off, a, batches, st);
				if (d == KVT_EBUFSMALL && st->hdr_len <= 20480 &&
				    pread(fd, buf, st->hdr_len, (off_t)off) == (ssize_t)st->hdr_len)
					d = ssd_struct_decode(buf, st->hdr_len, off, a, batches, st);
				if (ssd_walk_struct(d, st, h.generation, off, h.seg_size, a, &len))
					break;
				T_ASSERT(o->n < KVT_ARRAY_LEN(o->offs));
				key = st->kind == SSD_STRUCT_BATCH ? &st->batch.ent[0].key
								   : &st->rec.key;
				o->offs[o->n] = off;
				o->kinds[o->n] = st->kind;
				o->types[o->n] = st->kind == SSD_STRUCT_REC ? st->rec.type : 0;
				o->seqs[o->n] = st->kind == SSD_STRUCT_REC ? st->rec.seq
									 : st->batch.ent[0].seq;
				memcpy(&o->keys[o->n], key->bytes, sizeof(uint64_t));
				o->n++;
				off += len;
			}
			o->end = off;
		}
		close(fd);
	}
	free(st);
	free(buf);
	return found;
}

/* The 512 bytes at off in slot's file: all zero? */
static bool zero_at(const char *dir, uint32_t slot, uint64_t off)
{
	uint8_t b[512];
	int fd = seg_fd(dir, slot, O_RDONLY);
	bool z = true;
	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, b, sizeof(b), (off_t)off), (int)sizeof(b));
	close(fd);
	for (size_t i = 0; i < sizeof(b); i++)
		z &= b[i] == 0;
	return z;
}

/* Flip one bit of the record header CRC at off (its header then fails to
 * decode); flipping it again restores it. */
static void flip_crc(const char *dir, uint32_t slot, uint64_t off)
{
	uint8_t b;
	int fd = seg_fd(dir, slot, O_RDWR);
	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, &b, 1, (off_t)off + 12), 1);
	b ^= 0x40;
	T_EQ_INT(pwrite(fd, &b, 1, (off_t)off + 12), 1);
	close(fd);
}

/* Tear the value of the record at off: invert the 512 bytes of its last
 * 512-byte block that holds value bytes, as a write a crash cut at a
 * 512-byte boundary leaves the old bytes there (doing it again restores
 * it).  The header stays sound. */
static void tear_value(const char *dir, uint32_t slot, uint64_t off, uint32_t align)
{
	uint8_t *b = malloc(20480), blk[512];
	struct ssd_rec_hdr r;
	uint64_t at;
	int fd = seg_fd(dir, slot, O_RDWR), d;
	T_GE_INT(fd, 0);
	T_ASSERT(b);
	T_EQ_INT(pread(fd, b, 20480, (off_t)off), 20480);
	d = ssd_rec_hdr_decode(b, 20480, align, &r, NULL, 0);
	T_OK(d);
	T_ASSERT(r.value_len > 0);
	at = (off + r.hdr_len + r.value_len - 1) / 512 * 512;
	T_EQ_INT(pread(fd, blk, sizeof(blk), (off_t)at), (int)sizeof(blk));
	for (size_t i = 0; i < sizeof(blk); i++)
		blk[i] ^= 0xff;
	T_EQ_INT(pwrite(fd, blk, sizeof(blk), (off_t)at), (int)sizeof(blk));
	close(fd);
	free(b);
}

/* Keys k.. into s until a slot has been reused and the open segment in it
 * holds at least min records, ends inside an old record's bytes (not
 * zeros: the case fsck took for damage) and has room left for a few more
 * (under half full).  Returns the next key. */
static uint64_t fill_until_leftover(struct kvt_store *s, uint32_t ns, const char *dir, uint64_t k,
				    uint32_t min)
{
	struct open_seg o;
	for (uint64_t stop = k + 2000; k < stop; k++) {
		put_k(s, ns, k);
		if (t_stat(s, "ssd.segments_evicted") == 0)
			continue;
		T_OK(kvt_flush(s));
		if (find_open(dir, &o) && o.n >= min && o.end < o.h.seg_size / 2 &&
		    !zero_at(dir, o.slot, o.end))
			return k + 1;
	}
	T_FAIL("no open segment ended inside an old record's bytes");
}

static void clean(const struct said *w, int r)
{
	T_EQ_INT(r, 0);
	T_EQ_U64(w->f.damaged, 0);
	T_EQ_U64(w->f.orphans, 0);
	T_EQ_U64(w->f.warnings, 0);
	T_ASSERT(w->f.blocks_checked > 0);
}

/* 1. A graceful stop with the open segment in a reused slot: fsck clean,
 *    and it walks exactly the records recovery seals into the summary at
 *    the next open.  A damaged header there (before the checkpoint's
 *    write point: the first record, a middle one) is damage, named. */
static void graceful(const char *align, const char *reuse)
{
	char *dir = t_mkdtemp(), want[64];
	struct kvt_store *s = open_at(dir, align, reuse);
	uint32_t ns = ns_of(s);
	struct open_seg o, o2;
	struct said w;
	uint64_t records;

	fill_until_leftover(s, ns, dir, 0, 3);
	kvt_store_destroy(s);
	T_ASSERT(find_open(dir, &o));
	T_EQ_INT(o.h.rec_align, atoi(align));
	fprintf(stderr, "  %s %s: open segment %u, %u records, ending at %llu in old bytes\n",
		align, reuse, o.slot, o.n, (unsigned long long)o.end);
	clean(&w, fsck(dir, &w));
	records = w.f.records;

	/* Negative controls: a header in the new part that fails its CRC. */
	for (uint32_t i = 0; i < 2; i++) {
		uint64_t off = o.offs[i == 0 ? 0 : o.n / 2];
		flip_crc(dir, o.slot, off);
		T_RC(fsck(dir, &w), KVT_ECORRUPT);
		/* the header, and the checkpoint's entry for its record; the
		 * walk goes on at the next header */
		T_EQ_U64(w.f.damaged, 2);
		T_EQ_U64(w.f.records, records - 1);
		snprintf(want, sizeof(want), "ssd/seg-%06u offset %llu: record header damaged",
			 o.slot, (unsigned long long)off);
		T_ASSERT(strstr(w.text, want) != NULL);
		flip_crc(dir, o.slot, off);
	}
	clean(&w, fsck(dir, &w));

	/* Recovery seals the segment where its walk stops: where fsck's did. */
	s = open_at(dir, align, reuse);
	kvt_store_destroy(s);
	T_ASSERT(!find_open(dir, &o2));
	{
		uint8_t hb[SSD_ALIGN];
		struct ssd_seg_hdr h;
		int fd = seg_fd(dir, o.slot, O_RDONLY);
		T_EQ_INT(pread(fd, hb, sizeof(hb), 0), (int)sizeof(hb));
		close(fd);
		T_OK(ssd_seg_hdr_decode(hb, &h));
		T_EQ_U64(h.generation, o.h.generation);
		T_EQ_U64(h.summary_off, o.end);
	}
	clean(&w, fsck(dir, &w));
	T_EQ_U64(w.f.records, records);
	t_rmtree(dir);
	free(dir);
}

/* fsck finds no damage and one warning, which names slot's offset off. */
static void one_warning(const char *dir, struct said *w, uint32_t slot, uint64_t off)
{
	char want[96];
	T_RC(fsck(dir, w), 0);
	T_EQ_U64(w->f.damaged, 0);
	T_EQ_U64(w->f.warnings, 1);
	snprintf(want, sizeof(want), "ssd/seg-%06u offset %llu", slot, (unsigned long long)off);
	T_ASSERT(strstr(w->text, want) != NULL);
}

/* The end of a writer that crashes (a child): a checkpoint if ckpt, keys
 * k..k+more-1, a flush, and an exit without a close. */
static void die_after(struct kvt_store *c, uint32_t ns, uint64_t k, bool ckpt, uint64_t more)
{
	if (ckpt && ssd_checkpoint(store_ssd(c)) < 0)
		_exit(3);
	for (uint64_t i = 0; i < more; i++)
		put_k(c, ns, k + i);
	if (kvt_flush(c) != KVT_OK)
		_exit(4);
	_exit(0); /* no close, no checkpoint */
}

/* Wait for that child; o: the open segment it left. */
static void reap(pid_t pid, const char *dir, struct open_seg *o)
{
	int st;
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	T_ASSERT(find_open(dir, o));
}

/* The first tombstone among o's records (there is one). */
static uint32_t first_tomb(const struct open_seg *o)
{
	uint32_t at = 0;
	while (at < o->n && o->types[at] != SSD_REC_DELETE)
		at++;
	T_ASSERT(at < o->n);
	return at;
}

/* The writer of 9 and 12, in a child (it dies, _exit, with no close):
 * key 0 put, then more until its segment is sealed, flushed one by one so
 * that the delete goes into a segment just begun, room for it and the 4
 * puts after it; a checkpoint naming the open segment before the delete
 * if ckpt (recovery skips the records below its seq, the delete above
 * it); key 0 deleted (its tombstone durable when kvt_delete returns);
 * keys 1000-1003 put. */
static void tomb_writer(struct kvt_store *c, bool ckpt)
{
	uint32_t cns = ns_of(c);
	struct kvt_key key0 = t_key(0);
	uint64_t k = 0;
	put_k(c, cns, k++);
	while (t_stat(c, "ssd.segments_sealed") < 1) {
		put_k(c, cns, k++);
		T_OK(kvt_flush(c));
	}
	if (ckpt && ssd_checkpoint(store_ssd(c)) < 0)
		_exit(3);
	if (kvt_delete(c, cns, &key0) != KVT_OK)
		_exit(5);
	for (uint64_t i = 0; i < 4; i++)
		put_k(c, cns, 1000 + i);
	if (kvt_flush(c) != KVT_OK)
		_exit(4);
	_exit(0);
}

/* 2. A crash (no graceful stop) with the open segment in a reused slot,
 *    the checkpoint taken after its first records (ckpt) or none taken:
 *    fsck reports no damage.  A header past the checkpoint's write point
 *    (with none: any) that fails to decode is where recovery's walk stops
 *    (a write a crash tore, or damage: the two look alike): a warning
 *    naming the records past it, which recovery indeed does not find;
 *    before the write point it is damage. */
static void crash(const char *align, const char *reuse, bool ckpt)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	uint64_t ck_off = 0;
	uint32_t past = 0;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_at(dir, align, reuse);
		uint32_t cns = ns_of(c);
		uint64_t k = fill_until_leftover(c, cns, dir, 0, 2);
		/* The checkpoint's write point: after the open segment's first
		 * records, before the 4 below. */
		die_after(c, cns, k, ckpt, 4);
	}
	reap(pid, dir, &o);
	if (ckpt) {
		/* The checkpoint names the open segment's generation and where
		 * its writes were then. */
		char path[4096];
		uint8_t *b = malloc(1 << 20);
		struct ssd_ckpt_hdr h;
		int fd;
		ssize_t n;
		snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
		fd = open(path, O_RDONLY);
		T_GE_INT(fd, 0);
		n = pread(fd, b, 1 << 20, 0);
		close(fd);
		T_ASSERT(n > 0);
		T_OK(ssd_ckpt_decode(b, (size_t)n, &h, NULL, NULL));
		{
			/* slot table right after the 128-byte header */
			const uint8_t *sl = b + 128 + 16 * o.slot;
			uint64_t gen, off;
			memcpy(&gen, sl, 8);
			memcpy(&off, sl + 8, 8);
			T_EQ_U64(gen, o.h.generation);
			ck_off = off;
		}
		free(b);
		T_ASSERT(ck_off > SSD_ALIGN && ck_off < o.end);
	}
	fprintf(stderr, "  crash %s %s: open segment %u, %u records to %llu, checkpoint at %llu\n",
		align, reuse, o.slot, o.n, (unsigned long long)o.end, (unsigned long long)ck_off);
	clean(&w, fsck(dir, &w));

	if (ckpt) {
		/* Before the checkpoint's write point: damage. */
		flip_crc(dir, o.slot, o.offs[0]);
		T_RC(fsck(dir, &w), KVT_ECORRUPT);
		T_ASSERT(w.f.damaged >= 1);
		flip_crc(dir, o.slot, o.offs[0]);
	}

	/* A torn value (its header sound, a part failing its CRC) at or past
	 * the checkpoint's write point (with none: anywhere) is a write the
	 * crash cut: recovery leaves it out (a miss), so fsck notes it (a
	 * warning), no damage; before the write point it is damage. */
	while (past < o.n && o.offs[past] < ck_off)
		past++; /* the first record past the write point */
	{
		uint32_t i = past;
		T_ASSERT(i < o.n);
		tear_value(dir, o.slot, o.offs[i], o.h.rec_align);
		one_warning(dir, &w, o.slot, o.offs[i]);
		T_ASSERT(strstr(w.text, "torn") != NULL);
		{
			/* Recovery (on a copy): the torn block is a miss, every
			 * other exact -- left out by recovery (since 2026-12-07;
			 * before, indexed and its first read failed its CRC). */
			char *cp = t_mkdtemp(), cmd[8300];
			struct kvt_store *s;
			uint32_t ns;
			snprintf(cmd, sizeof(cmd), "cp -a '%s'/. '%s'", dir, cp);
			T_EQ_INT(system(cmd), 0);
			s = open_at(cp, align, reuse);
			ns = ns_of(s);
			for (uint32_t j = 0; j < o.n; j++)
				T_RC(t_get_filled(s, ns, o.keys[j], len_of(o.keys[j])),
				     j == i ? KVT_MISS : KVT_OK);
			T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
			T_EQ_U64(t_stat(s, "ssd.recovery_torn_values"), 1);
			kvt_store_destroy(s);
			t_rmtree(cp);
			free(cp);
		}
		tear_value(dir, o.slot, o.offs[i], o.h.rec_align);
		if (ckpt) {
			tear_value(dir, o.slot, o.offs[0], o.h.rec_align);
			T_RC(fsck(dir, &w), KVT_ECORRUPT);
			T_EQ_U64(w.f.damaged, 2); /* the part, and the checkpoint's entry */
			tear_value(dir, o.slot, o.offs[0], o.h.rec_align);
		}
		clean(&w, fsck(dir, &w));
	}

	/* Past it, with records after it: a warning, no damage. */
	{
		uint32_t i = past;
		T_ASSERT(i + 1 < o.n); /* a record past the damaged one */
		flip_crc(dir, o.slot, o.offs[i]);
		one_warning(dir, &w, o.slot, o.offs[i]);
		/* Recovery: the records before it come back, those from it on
		 * do not (cold DRAM). */
		{
			struct kvt_store *s = open_at(dir, align, reuse);
			uint32_t ns = ns_of(s);
			for (uint32_t j = 0; j < o.n; j++)
				T_RC(t_get_filled(s, ns, o.keys[j], len_of(o.keys[j])),
				     j < i ? KVT_OK : KVT_MISS);
			kvt_store_destroy(s);
		}
	}
	t_rmtree(dir);
	free(dir);
}

/* Copy dir/from to dir/to (what a segment file held, kept aside). */
static void copy_file(const char *dir, const char *from, const char *to)
{
	char cmd[8400];
	snprintf(cmd, sizeof(cmd), "cp '%s/%s' '%s/%s'", dir, from, dir, to);
	T_EQ_INT(system(cmd), 0);
}

/* A sealed segment's header: its summary's place. */
static struct ssd_seg_hdr seg_hdr(const char *dir, uint32_t slot)
{
	uint8_t hb[SSD_ALIGN];
	struct ssd_seg_hdr h;
	int fd = seg_fd(dir, slot, O_RDONLY);
	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, hb, sizeof(hb), 0), (int)sizeof(hb));
	close(fd);
	T_OK(ssd_seg_hdr_decode(hb, &h));
	return h;
}

/* 3. A sealed segment whose summary was cut short (its file truncated
 *    inside the summary), or whose summary names a record past the
 *    summary's own offset (CRCs fixed), with no checkpoint: recovery
 *    walks the segment's records instead of failing to open (a cut
 *    summary made it fail with -ENOMEM), and fsck, saying the summary is
 *    damaged, walks them too: the same records, every block of the
 *    segment readable. */
static void summary_bad(const char *align, bool cut)
{
	char *dir = t_mkdtemp(), path[4096];
	struct kvt_store *s = open_at(dir, align, "progressive");
	uint32_t ns = ns_of(s);
	struct ssd_seg_hdr h;
	struct said w;
	uint64_t k = 0, records;
	uint64_t ok = 0;

	/* A flush after each put: the writer is caught up at each look, so
	 * the loop stops at the first seal.  Without it, a loaded machine's
	 * writer lagged the puts, wrote more than the 4 slots hold after the
	 * first seal was counted, and reused slot 0 (open again: no summary;
	 * or its keys gone: misses). */
	while (t_stat(s, "ssd.segments_sealed") == 0) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
	}
	kvt_store_destroy(s);
	clean(&w, fsck(dir, &w));
	records = w.f.records;
	h = seg_hdr(dir, 0);
	T_ASSERT(h.summary_off > 0);
	snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	T_EQ_INT(unlink(path), 0);
	if (cut) {
		snprintf(path, sizeof(path), "%s/ssd/seg-000000", dir);
		T_EQ_INT(truncate(path, (off_t)(h.summary_off + 512)), 0);
	} else {
		/* The last entry's offset moved past summary_off (entries from
		 * 64, each 32 bytes and the key padded to 8: type, key_len,
		 * part_count, ns_id, off_512...). */
		uint8_t *sum = malloc(h.summary_len);
		uint32_t off_512 = (uint32_t)(h.summary_off / 512) + 8, crc, count;
		uint64_t elen, pos = 64;
		int fd = seg_fd(dir, 0, O_RDWR);
		T_EQ_INT(pread(fd, sum, h.summary_len, (off_t)h.summary_off),
			 (int)h.summary_len);
		memcpy(&count, sum + 24, 4);
		T_ASSERT(count >= 2);
		for (uint32_t i = 0; i + 1 < count; i++)
			pos += 32 + ((sum[pos + 1] + 7u) & ~7u);
		memcpy(sum + pos + 8, &off_512, 4);
		memcpy(&elen, sum + 32, 8);
		crc = kvt_crc32c(0, sum + 64, (size_t)elen);
		memcpy(sum + 28, &crc, 4);
		memset(sum + 12, 0, 4);
		crc = kvt_crc32c(0, sum, 64);
		memcpy(sum + 12, &crc, 4);
		T_EQ_INT(pwrite(fd, sum, h.summary_len, (off_t)h.summary_off),
			 (int)h.summary_len);
		close(fd);
		free(sum);
	}
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_ASSERT(strstr(w.text, "ssd/seg-000000: summary") != NULL);
	T_EQ_U64(w.f.records, records);
	s = open_at(dir, align, "progressive");
	ns = ns_of(s);
	for (uint64_t j = 0; j < k; j++)
		ok += t_get_filled(s, ns, j, len_of(j)) == KVT_OK;
	T_EQ_U64(ok, k);
	T_EQ_U64(t_stat(s, "ssd.crc_errors"), 0);
	kvt_store_destroy(s);
	fprintf(stderr, "  summary %s at %s: %llu records walked instead\n",
		cut ? "cut short" : "past its offset", align, (unsigned long long)records);
	t_rmtree(dir);
	free(dir);
}

/* 4. The store's capacity changed (4 slots to 8, ssd.segment the same)
 *    after a crash that left an open segment and a checkpoint naming its
 *    write point: recovery ignores that checkpoint (its slot count
 *    differs) and walks the segment from its start.  A header there that
 *    fails is then where recovery's walk stops and what follows is lost --
 *    fsck told the new capacity says that (a warning, as with no
 *    checkpoint), not "damage before the checkpoint's write point, the
 *    records after it in the checkpoint", and that the checkpoint is
 *    ignored; recovery at 8 slots indeed misses every record from there.
 *    Not told, fsck judges by the checkpoint as before (damage). */
static void capacity_changed(void)
{
	char *dir = t_mkdtemp(), want[96];
	struct open_seg o;
	struct said w;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_sized(dir, "4M", "1M");
		uint32_t cns = ns_of(c);
		uint64_t k = 0;
		struct open_seg co;
		do {
			put_k(c, cns, k++);
			if (kvt_flush(c) != KVT_OK)
				_exit(4);
		} while (!find_open(dir, &co) || co.n < 2 || co.end > co.h.seg_size / 2);
		/* (room left: the two puts below stay in this segment) */
		die_after(c, cns, k, true, 2);
	}
	reap(pid, dir, &o);
	T_ASSERT(o.n >= 3);
	clean(&w, fsck(dir, &w));
	T_RC(fsck_as(dir, &w, 8 << 20, 1 << 20), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_EQ_U64(w.f.warnings, 1); /* the checkpoint, ignored */
	flip_crc(dir, o.slot, o.offs[0]);
	/* Not told: the checkpoint's write point holds (as recovery at 4
	 * slots reads it). */
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	/* Told 4 slots: the same. */
	T_RC(fsck_as(dir, &w, 4 << 20, 1 << 20), KVT_ECORRUPT);
	/* Told 8: recovery's view. */
	T_RC(fsck_as(dir, &w, 8 << 20, 1 << 20), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_EQ_U64(w.f.warnings, 2);
	T_ASSERT(strstr(w.text, "ssd/checkpoint: from a store of another size") != NULL);
	snprintf(want, sizeof(want), "ssd/seg-%06u offset %llu:", o.slot,
		 (unsigned long long)o.offs[0]);
	T_ASSERT(strstr(w.text, want) != NULL);
	{
		struct kvt_store *s = open_sized(dir, "8M", "1M");
		uint32_t ns = ns_of(s);
		for (uint32_t j = 0; j < o.n; j++)
			T_RC(t_get_filled(s, ns, o.keys[j], len_of(o.keys[j])), KVT_MISS);
		kvt_store_destroy(s);
	}
	fprintf(stderr, "  capacity 4M to 8M: open segment %u, %u records lost at open\n", o.slot,
		o.n);
	t_rmtree(dir);
	free(dir);
}

/* 5. The store reopened with another segment size (1M to 2M, the same 4
 *    slots): recovery takes every 1M segment's slot for free (its header's
 *    seg_size is not the store's) and never reads its records.  A damaged
 *    record in one of them is no damage of the store: fsck, reading the
 *    store's segment size where recovery's last run left it (the segments
 *    its checkpoint names) or told it, says the segment is another size's
 *    and checks it no further; recovery indeed serves none of its keys,
 *    and every key of the 2M segment. */
static void segment_changed(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	struct ssd_seg_hdr h;
	struct said w;
	uint64_t k = 0, k2;

	while (t_stat(s, "ssd.segments_sealed") < 3) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
	}
	kvt_store_destroy(s);
	h = seg_hdr(dir, 2);
	T_EQ_U64(h.seg_size, 1 << 20);
	T_ASSERT(h.summary_off > 0);
	/* Since 2026-12-06 the 2M open voids the 1M segments at its first
	 * write (ssd_void_unread_locked: its deletes must hold when the store
	 * is opened at 1M again): slot 2's file is put back after it, as a
	 * kvtier before then left it, or as a 2M open that wrote nothing
	 * would (what fsck must still judge). */
	copy_file(dir, "ssd/seg-000002", "seg2.keep");
	s = open_sized(dir, "8M", "2M");
	ns = ns_of(s);
	for (k2 = k; k2 < k + 8; k2++)
		put_k(s, ns, k2);
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.segments_sealed"), 0);
	kvt_store_destroy(s);
	T_EQ_U64(seg_hdr(dir, 0).seg_size, 2 << 20);
	{
		/* voided at the first write: cut to nothing */
		struct stat vst;
		char vpath[4200];
		snprintf(vpath, sizeof(vpath), "%s/ssd/seg-000002", dir);
		T_EQ_INT(stat(vpath, &vst), 0);
		T_EQ_U64((uint64_t)vst.st_size, 0);
	}
	copy_file(dir, "seg2.keep", "ssd/seg-000002");
	{
		char keep[4200];
		snprintf(keep, sizeof(keep), "%s/seg2.keep", dir);
		T_ASSERT(unlink(keep) == 0);
	}
	T_EQ_U64(seg_hdr(dir, 2).seg_size, 1 << 20);
	/* The first record of the 1M segment in slot 2, damaged. */
	flip_crc(dir, 2, SSD_ALIGN);
	T_RC(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_ASSERT(strstr(w.text, "ssd/seg-000002: a segment of 1048576 bytes, where the "
				"store's are 2097152") != NULL);
	T_EQ_U64(w.f.blocks, 8); /* the 2M segment's, only */
	T_RC(fsck_as(dir, &w, 8 << 20, 2 << 20), 0);
	T_EQ_U64(w.f.damaged, 0);
	/* Told the old size, the old segments are checked (and the new one is
	 * the other size's). */
	T_RC(fsck_as(dir, &w, 4 << 20, 1 << 20), KVT_ECORRUPT);
	T_ASSERT(strstr(w.text, "ssd/seg-000000: a segment of 2097152 bytes") != NULL);
	s = open_sized(dir, "8M", "2M");
	ns = ns_of(s);
	for (uint64_t j = 0; j < k2; j++)
		T_RC(t_get_filled(s, ns, j, len_of(j)), j < k ? KVT_MISS : KVT_OK);
	kvt_store_destroy(s);
	fprintf(stderr, "  segment 1M to 2M: %llu old keys in free slots, 8 new\n",
		(unsigned long long)k);
	t_rmtree(dir);
	free(dir);
}

/* 6. The store's id is ssd/id's, where its open takes it, not the first
 *    segment header's.  seg-000000's header rewritten with another store
 *    id (its CRC fixed): fsck calls that one segment another store's, and
 *    counts live only the other segments' blocks -- exactly the keys the
 *    store's open then serves (it takes slot 0 for free).  Until
 *    2026-12-03 fsck took seg-000000's id as the store's, called every
 *    other segment and the checkpoint another store's, and counted slot
 *    0's blocks.  ssd/id removed: fsck says so and reads no segment; the
 *    open (a new id) serves no key. */
/* Give the header at the start of path (a segment header: store_id at
 * 64, CRC over 4096 bytes; a checkpoint: at 16, over 128) another store
 * id, its CRC (at 12, computed with that field 0) fixed. */
static void other_store_id(const char *path, size_t id_off, size_t crc_len)
{
	uint8_t b[SSD_ALIGN];
	uint32_t crc = 0;
	int fd = open(path, O_RDWR);

	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, b, crc_len, 0), (int)crc_len);
	b[id_off] ^= 1;
	memcpy(b + 12, &crc, 4);
	crc = kvt_crc32c(0, b, crc_len);
	memcpy(b + 12, &crc, 4);
	T_EQ_INT(pwrite(fd, b, crc_len, 0), (int)crc_len);
	close(fd);
}

/* Reopen dir (4M of 1M): keys below `from` of 0..k-1 miss, the others
 * read back exactly; returns how many did.  *ck_blocks (if not NULL):
 * the blocks recovery took from the checkpoint. */
static uint64_t reopen_served(const char *dir, uint64_t k, uint64_t from, uint64_t *ck_blocks)
{
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	uint64_t served = 0;

	for (uint64_t j = 0; j < k; j++) {
		int r = t_get_filled(s, ns, j, len_of(j));
		T_RC(r, j < from ? KVT_MISS : KVT_OK);
		served += r == KVT_OK;
	}
	if (ck_blocks)
		*ck_blocks = t_stat(s, "ssd.recovery_checkpoint_blocks");
	kvt_store_destroy(s);
	return served;
}

static void store_id_source(void)
{
	char *dir = t_mkdtemp(), path[4096];
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	struct said w;
	uint64_t k = 0, first1 = 0, served, ck_blocks;

	while (t_stat(s, "ssd.segments_sealed") < 2) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
		if (!first1 && t_stat(s, "ssd.segments_sealed") == 1)
			first1 = k - 1; /* sealing slot 0 made room for it in slot 1 */
	}
	kvt_store_destroy(s);
	T_ASSERT(first1 > 1 && first1 < k);
	clean(&w, fsck(dir, &w));
	T_EQ_U64(w.f.blocks, k);

	snprintf(path, sizeof(path), "%s/ssd/seg-000000", dir);
	other_store_id(path, 64, SSD_ALIGN);
	T_ASSERT(seg_hdr(dir, 0).generation > 0); /* still a sound header */
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_EQ_U64(w.f.damaged, 1);
	T_ASSERT(strstr(w.text, "ssd/seg-000000: belongs to another store (its store id is not "
				"ssd/id's)") != NULL);
	T_EQ_U64(w.f.blocks, k - first1);
	served = reopen_served(dir, k, first1, NULL);
	T_EQ_U64(served, k - first1);

	/* The checkpoint (the one that open wrote) made another store's, its
	 * header CRC fixed: damage, and ignored as recovery ignores it (the
	 * segments are scanned: the same blocks). */
	snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	other_store_id(path, 16, 128);
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_EQ_U64(w.f.damaged, 2);
	T_ASSERT(strstr(w.text, "ssd/checkpoint: belongs to another store (its store id is not "
				"ssd/id's): recovery ignores it") != NULL);
	T_EQ_U64(w.f.blocks, k - first1);
	T_EQ_U64(reopen_served(dir, k, first1, &ck_blocks), k - first1);
	T_EQ_U64(ck_blocks, 0);

	snprintf(path, sizeof(path), "%s/ssd/id", dir);
	T_EQ_INT(unlink(path), 0);
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_EQ_U64(w.f.damaged, 1);
	T_ASSERT(strstr(w.text, "ssd/id: missing: the store takes a new id") != NULL);
	T_EQ_U64(w.f.records, 0);
	T_EQ_U64(w.f.blocks, 0);
	T_EQ_U64(reopen_served(dir, k, k, NULL), 0);
	fprintf(stderr, "  store id from ssd/id: slot 0 another store's (%llu keys), %llu served\n",
		(unsigned long long)first1, (unsigned long long)served);
	t_rmtree(dir);
	free(dir);
}

/* 6b. A damaged checkpoint (a byte flipped in its entries, or the file
 *    cut to half) is ignored at open, every segment scanned -- and
 *    replaced by that open, once recovery is done, with a sound one: an
 *    open killed at once (a child's _exit, no close, so no checkpoint of
 *    close's) leaves fsck clean, and the next open takes every block
 *    from the checkpoint.  Until 2026-12-06 the damaged file stayed until
 *    the next checkpoint (ssd.checkpoint_seals seals, or a graceful
 *    stop): fsck reported damage recovery had already handled, after any
 *    number of such opens. */
static void ckpt_damaged(bool cut)
{
	char *dir = t_mkdtemp(), path[4096];
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	struct said w;
	struct stat st;
	uint64_t k = 0, ck_blocks;
	pid_t pid;
	int fd, status;

	while (t_stat(s, "ssd.segments_sealed") < 1 || k < 8) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
	}
	kvt_store_destroy(s); /* a checkpoint */
	clean(&w, fsck(dir, &w));
	T_EQ_U64(w.f.blocks, k);

	snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	fd = open(path, O_RDWR);
	T_GE_INT(fd, 0);
	T_EQ_INT(fstat(fd, &st), 0);
	T_ASSERT(st.st_size > 256);
	if (cut) {
		T_EQ_INT(ftruncate(fd, st.st_size / 2), 0);
	} else {
		uint8_t b;
		off_t at = st.st_size - 40; /* in the last entry */
		T_EQ_INT(pread(fd, &b, 1, at), 1);
		b ^= 0x10;
		T_EQ_INT(pwrite(fd, &b, 1, at), 1);
	}
	close(fd);
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_EQ_U64(w.f.damaged, 1);
	T_ASSERT(strstr(w.text, "ssd/checkpoint: damaged") != NULL);

	/* An open, killed before it writes or closes anything. */
	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_sized(dir, "4M", "1M");
		if (!c)
			_exit(2);
		_exit(0); /* no close, no checkpoint of close's */
	}
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	clean(&w, fsck(dir, &w));
	T_EQ_U64(w.f.blocks, k);
	T_EQ_U64(reopen_served(dir, k, 0, &ck_blocks), k);
	T_EQ_U64(ck_blocks, k);
	fprintf(stderr, "  checkpoint %s: replaced at open, %llu blocks from it at the next\n",
		cut ? "cut short" : "flipped", (unsigned long long)ck_blocks);
	t_rmtree(dir);
	free(dir);
}

/* 7. Format 3: after damage in an open segment, fsck looks for the
 *    generation's next record *or batch* (next_sound_hdr).  A writer
 *    (format 3, a child killed by _exit) leaves an open segment holding a
 *    record (key 0, written alone: framed), then, if batch_first, batch A
 *    (keys 1-4), then batch B (keys 5-8), each batch four 16 KiB puts
 *    queued while the writer was held; then (ckpt) a checkpoint, whose
 *    write point is past B.  Damaged: the record's header, or
 *    (batch_first) batch A's header.
 *    - With the checkpoint: damage before the write point; the walk goes
 *      on at batch B (the checkpoint holds it) and checks its four values.
 *      fsck finds the damaged header and the checkpoint's entries naming
 *      what it held, nothing else; blocks_checked counts B's four (and the
 *      record, when A is the damage).  Recovery serves B's values.
 *    - Without: the damage lies past the write point, where recovery's
 *      walk stops; fsck warns that the batch after it (named by offset) is
 *      not recovered -- and recovery indeed misses B's values.
 *    Until 2026-12-05 next_sound_hdr found record headers only: with the
 *    checkpoint it found nothing after the damage, checked no batch and
 *    said B's four checkpoint entries were damage too; without, fsck was
 *    clean while recovery lost B. */
static void f3_put4(struct kvt_store *s, uint32_t ns, uint64_t from)
{
	ssd_hold_writes(store_ssd(s), true);
	for (uint64_t k = from; k < from + 4; k++)
		T_RC(t_put_filled(s, ns, k, 16384), KVT_OK);
	ssd_hold_writes(store_ssd(s), false);
	T_OK(kvt_flush(s));
}

static void f3_damage_then_batch(const char *align, bool batch_first, bool ckpt)
{
	char *dir = t_mkdtemp(), want[160];
	struct open_seg o;
	struct said w;
	uint32_t dmg = batch_first ? 1 : 0, b = batch_first ? 2 : 1, ck_dmg;
	uint64_t first_b = batch_first ? 5 : 1;
	int r;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_fmt(dir, align, "progressive", "3");
		uint32_t cns = ns_of(c);
		T_RC(t_put_filled(c, cns, 0, 16384), KVT_OK);
		T_OK(kvt_flush(c));
		f3_put4(c, cns, 1);
		if (batch_first)
			f3_put4(c, cns, 5);
		if (ckpt && ssd_checkpoint(store_ssd(c)) < 0)
			_exit(3);
		_exit(0); /* no close */
	}
	reap(pid, dir, &o);
	T_EQ_INT(o.h.version, SSD_SEG_VERSION_BATCH);
	T_EQ_U64(o.n, b + 1);
	T_EQ_INT(o.kinds[0], SSD_STRUCT_REC);
	for (uint32_t i = 1; i <= b; i++)
		T_EQ_INT(o.kinds[i], SSD_STRUCT_BATCH);
	clean(&w, fsck(dir, &w));
	T_EQ_U64(w.f.blocks_checked, 1 + 4 * (uint64_t)b);

	flip_crc(dir, o.slot, o.offs[dmg]);
	r = fsck(dir, &w);
	if (ckpt) {
		/* the header, and the checkpoint's entries for what it held */
		ck_dmg = o.kinds[dmg] == SSD_STRUCT_BATCH ? 4 : 1;
		T_RC(r, KVT_ECORRUPT);
		T_EQ_U64(w.f.damaged, 1 + ck_dmg);
		T_EQ_U64(w.f.warnings, 0);
		T_EQ_U64(w.f.blocks_checked, 4 + (batch_first ? 1 : 0));
		snprintf(want, sizeof(want), "ssd/seg-%06u offset %llu:", o.slot,
			 (unsigned long long)o.offs[dmg]);
		T_ASSERT(strstr(w.text, want) != NULL);
	} else {
		one_warning(dir, &w, o.slot, o.offs[dmg]);
		snprintf(want, sizeof(want), "before a record of its generation at offset %llu",
			 (unsigned long long)o.offs[b]);
		T_ASSERT(strstr(w.text, want) != NULL);
		T_EQ_U64(w.f.blocks_checked, batch_first ? 1 : 0);
	}
	{
		struct kvt_store *s = open_fmt(dir, align, "progressive", "3");
		uint32_t ns = ns_of(s);
		for (uint64_t k = first_b; k < first_b + 4; k++)
			T_RC(t_get_filled(s, ns, k, 16384), ckpt ? KVT_OK : KVT_MISS);
		kvt_store_destroy(s);
	}
	fprintf(stderr, "  format 3 %s, %s damaged, %s: batch after it at %llu %s\n", align,
		batch_first ? "batch" : "record", ckpt ? "checkpoint" : "no checkpoint",
		(unsigned long long)o.offs[b], ckpt ? "checked, served" : "warned of, lost");
	t_rmtree(dir);
	free(dir);
}

/* Tear batched value i of the batch at off (format 3): invert the last
 * 512 bytes of it, as tear_value a record's (doing it again restores
 * it).  The batch header stays sound. */
static void tear_batched(const char *dir, uint32_t slot, uint64_t off, uint32_t align,
			 uint32_t i)
{
	uint8_t *b = malloc(20480), blk[512];
	struct ssd_struct *st = malloc(sizeof(*st));
	uint64_t at;
	int fd = seg_fd(dir, slot, O_RDWR);
	T_GE_INT(fd, 0);
	T_ASSERT(b && st);
	T_EQ_INT(pread(fd, b, 20480, (off_t)off), 20480);
	T_OK(ssd_struct_decode(b, 20480, off, align, true, st));
	T_EQ_INT(st->kind, SSD_STRUCT_BATCH);
	T_ASSERT(i < st->batch.count);
	at = ((uint64_t)st->batch.ent[i].value_off_512 * 512 + st->batch.ent[i].value_len - 1) /
	     512 * 512;
	T_EQ_INT(pread(fd, blk, sizeof(blk), (off_t)at), (int)sizeof(blk));
	for (size_t j = 0; j < sizeof(blk); j++)
		blk[j] ^= 0xff;
	T_EQ_INT(pwrite(fd, blk, sizeof(blk), (off_t)at), (int)sizeof(blk));
	close(fd);
	free(st);
	free(b);
}

/* 7b. A value torn past the checkpoint's write point (with ckpt: one
 *     taken after key 0; without, none) by a crash -- at format 3 the
 *     second value of a batch of keys 1-4, at format 2 the record of key
 *     2 -- is a warning to fsck, and stays one: recovery leaves it out of
 *     the index and of the summary it seals the segment with, so that
 *     after a graceful stop (whose checkpoint moves the write point past
 *     the sealed segment) fsck finds the store clean, and the key is a
 *     miss without a read failing its CRC, at this open and the next.
 *     Until 2026-12-07 recovery indexed it and the seal's summary named
 *     it: fsck after the graceful stop called it damage ("batched value
 *     fails its value_crc", "part 0 of 1 fails its CRC32C"), for good --
 *     test_crashloop seed 1796608538. */
static void torn_sealed(const char *format, const char *align, bool ckpt)
{
	char *dir = t_mkdtemp();
	bool f3 = strcmp(format, "3") == 0;
	uint32_t at = f3 ? 1 : 2; /* the batch, or key 2's record */
	uint64_t torn = 2;
	struct open_seg o;
	struct said w;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_fmt(dir, align, "progressive", format);
		uint32_t cns = ns_of(c);
		T_RC(t_put_filled(c, cns, 0, 16384), KVT_OK);
		T_OK(kvt_flush(c));
		if (ckpt && ssd_checkpoint(store_ssd(c)) < 0)
			_exit(3);
		if (f3) {
			f3_put4(c, cns, 1);
		} else {
			for (uint64_t k = 1; k < 5; k++) {
				T_RC(t_put_filled(c, cns, k, 16384), KVT_OK);
				T_OK(kvt_flush(c));
			}
		}
		_exit(0); /* no close */
	}
	reap(pid, dir, &o);
	T_EQ_U64(o.n, f3 ? 2 : 5);
	T_EQ_INT(o.kinds[at], f3 ? SSD_STRUCT_BATCH : SSD_STRUCT_REC);
	clean(&w, fsck(dir, &w));
	if (f3)
		tear_batched(dir, o.slot, o.offs[at], o.h.rec_align, 1);
	else
		tear_value(dir, o.slot, o.offs[at], o.h.rec_align);
	T_RC(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_EQ_U64(w.f.warnings, 1);
	T_ASSERT(strstr(w.text, "torn") != NULL);
	for (int pass = 0; pass < 2; pass++) {
		/* Recovery, then a graceful stop (its checkpoint covers the
		 * segment sealed at the first pass). */
		struct kvt_store *s = open_fmt(dir, align, "progressive", format);
		uint32_t ns = ns_of(s);
		uint64_t crc_errors, left_out;
		for (uint64_t k = 0; k < 5; k++)
			T_RC(t_get_filled(s, ns, k, 16384), k == torn ? KVT_MISS : KVT_OK);
		crc_errors = t_stat(s, "ssd.crc_errors");
		left_out = t_stat(s, "ssd.recovery_torn_values");
		kvt_store_destroy(s);
		clean(&w, fsck(dir, &w));
		T_EQ_U64(crc_errors, 0); /* not indexed: no read found it */
		T_EQ_U64(left_out, pass == 0 ? 1 : 0);
	}
	fprintf(stderr, "  torn past the write point, format %s %s, %s: left out, fsck clean\n",
		format, align, ckpt ? "checkpoint" : "no checkpoint");
	t_rmtree(dir);
	free(dir);
}

/* 7c. A segment sealed while a write placed in it is still in flight
 *     (ssd.io=psync: the write of key 1's record held by
 *     IO_FAULT_SLOW_WRITE on one worker, the segment filled behind it and
 *     sealed on the others), then a kill before that write lands: the
 *     header names a summary that names a record never written.  A seal
 *     waits for the writes placed in its segment (ssd_idx.c
 *     ssd_seg_seal_locked), so a kill leaves an open segment (recovery
 *     walks it) or a sealed one whose records are all there: no damage.
 *     Until 2026-12-07 it did not: "record header damaged" in a sealed
 *     segment, damage after a kill -9 alone (test_crashloop, CI of
 *     1fa138b7, round 1). */
#define SI_HELD_LEN 100000u /* key 1's value: the one record of its length */
#define SI_RELEASE_MS 1500u

struct si_release {
	struct kvt_store *s;
	_Atomic bool done;
};

static void *si_release_main(void *arg)
{
	struct si_release *r = arg;
	usleep(SI_RELEASE_MS * 1000);
	atomic_store(&r->done, true);
	io_fault_release(ssd_io(store_ssd(r->s)));
	return NULL;
}

static void seal_inflight(void)
{
	char *dir = t_mkdtemp();
	struct said w;
	int st;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = t_store_open(
			"path", dir, "dram.capacity", "64M", "dram.chunk", "4K", "dram.prefault",
			"off", "ssd.capacity", "4M", "ssd.segment", "1M", "ssd.admission", "always",
			"ssd.checkpoint_seals", "0", "ssd.format", "2", "ssd.dio_align", "512",
			"ssd.io", "psync", NULL);
		uint32_t cns = ns_of(c);
		struct io_fault held = { .kind = IO_FAULT_SLOW_WRITE, .fd = -1, .count = 1,
					 .delay_ms = 600000,
					 .len = 512 + KVT_ALIGN_UP(SI_HELD_LEN, 512) };
		struct si_release rel = { c, false };
		pthread_t th;
		bool early;
		T_RC(t_put_filled(c, cns, 0, 4096), KVT_OK);
		T_OK(kvt_flush(c));
		T_OK(io_fault_add(ssd_io(store_ssd(c)), &held));
		T_RC(t_put_filled(c, cns, 1, SI_HELD_LEN), KVT_OK);
		for (int i = 0; i < 30000 && t_stat(c, "io.faults_injected") == 0; i++)
			usleep(1000); /* key 1's write taken, and held */
		if (t_stat(c, "io.faults_injected") == 0)
			_exit(5);
		T_ASSERT(pthread_create(&th, NULL, si_release_main, &rel) == 0);
		/* Never joined: the _exit below may come while it sleeps (on the
		 * old code), and a finished thread not joined is a leak TSan
		 * reports at the _exit, its exit status 66 (review44c). */
		T_ASSERT(pthread_detach(th) == 0);
		/* 60000-byte values until the segment (1 MiB) is sealed */
		for (uint64_t k = 2; k < 40 && t_stat(c, "ssd.segments_sealed") == 0; k++) {
			T_RC(t_put_filled(c, cns, k, 60000), KVT_OK);
			usleep(2000);
		}
		for (int i = 0; i < 30000 && t_stat(c, "ssd.segments_sealed") == 0; i++)
			usleep(1000);
		if (t_stat(c, "ssd.segments_sealed") == 0)
			_exit(6);
		early = !atomic_load(&rel.done);
		fprintf(stderr, "  seal with a write in flight: sealed %s its write was released\n",
			early ? "before" : "after");
		if (early)
			_exit(7); /* sealed over a write in flight (the old code) */
		_exit(0); /* a kill: key 1's write lands only if it was released */
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	T_RC(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	t_rmtree(dir);
	free(dir);
}

/* 7d. A power loss after a segment sealed past the checkpoint, the device
 *     having kept the seal's summary and header and lost the records
 *     before them (nothing but a flush orders writes on a device:
 *     io_powerloss_cut drops every unsynced write, then the summary and
 *     header are put back as they were).  Recovery takes a sealed
 *     segment's summary unchecked, so the seal fdatasyncs the segment
 *     before it writes them (ssd_idx.c ssd_seg_seal_locked, "Power
 *     loss"): the records are there, every key is back exactly, fsck finds
 *     the store clean after a graceful stop.  Until 2026-12-07 the seal
 *     did not sync: the summary named values never written, recovery
 *     indexed them (misses at their read, by their CRCs), and the graceful
 *     stop's checkpoint moved the write point past them -- fsck said
 *     damage (review44c). */
static void seal_powerloss(const char *format)
{
	char *dir = t_mkdtemp(), path[4096];
	uint64_t keys = 0, hits = 0, crc_errors;
	struct kvt_store *s;
	struct said w;
	int st, fd;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_fmt(dir, "4096", "progressive", format);
		uint32_t cns = ns_of(c);
		struct kvt_io *io = ssd_io(store_ssd(c));
		struct ssd_seg_hdr h;
		uint8_t *hdr = malloc(SSD_ALIGN), *sum;
		uint64_t k;
		if (t_put_filled(c, cns, 0, 4096) != KVT_OK || kvt_flush(c) != KVT_OK ||
		    ssd_checkpoint(store_ssd(c)) < 0)
			_exit(3);
		io_powerloss_arm(io, true);
		/* 60000-byte values until segment 0 (1 MiB) seals */
		for (k = 1; k < 40 && t_stat(c, "ssd.segments_sealed") == 0; k++) {
			if (t_put_filled(c, cns, k, 60000) != KVT_OK)
				_exit(4);
			usleep(2000);
		}
		for (int i = 0; i < 10000 && (t_stat(c, "ssd.segments_sealed") == 0 ||
					      t_stat(c, "ssd.writes_inflight") != 0 ||
					      t_stat(c, "ssd.writedown_pending_bytes") != 0); i++)
			usleep(1000);
		if (t_stat(c, "ssd.segments_sealed") == 0 || t_stat(c, "ssd.writes_inflight"))
			_exit(5);
		snprintf(path, sizeof(path), "%s/ssd/seg-000000", dir);
		fd = open(path, O_RDWR);
		if (fd < 0 || !hdr || pread(fd, hdr, SSD_ALIGN, 0) != SSD_ALIGN ||
		    ssd_seg_hdr_decode(hdr, &h) < 0 || h.summary_len == 0)
			_exit(6);
		sum = malloc(h.summary_len);
		if (!sum || pread(fd, sum, h.summary_len, (off_t)h.summary_off) !=
				    (ssize_t)h.summary_len)
			_exit(7);
		fprintf(stderr, "  power loss: %lld unsynced writes undone, %llu keys put\n",
			(long long)io_powerloss_cut(io), (unsigned long long)k);
		/* ... but the summary and the header reached the device */
		if (pwrite(fd, sum, h.summary_len, (off_t)h.summary_off) !=
			    (ssize_t)h.summary_len ||
		    pwrite(fd, hdr, SSD_ALIGN, 0) != SSD_ALIGN || fdatasync(fd) < 0)
			_exit(8);
		_exit((int)k); /* the machine is off: no close, no checkpoint */
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) > 8);
	keys = (uint64_t)WEXITSTATUS(st);
	s = open_fmt(dir, "4096", "progressive", format);
	/* Exact or a miss (t_get_filled fails on other bytes): those put
	 * after the seal, in the next segment, are lost with its writes. */
	for (uint64_t k = 0; k < keys; k++)
		hits += t_get_filled(s, ns_of(s), k, k ? 60000 : 4096) == KVT_OK;
	crc_errors = t_stat(s, "ssd.crc_errors");
	kvt_store_destroy(s); /* its checkpoint's write point covers segment 0 */
	T_RC(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_EQ_U64(crc_errors, 0);
	T_GE_INT((int)hits, 2); /* key 0, and segment 0's keys past the checkpoint */
	fprintf(stderr, "  power loss past a seal, format %s: %llu of %llu keys back, fsck clean\n",
		format, (unsigned long long)hits, (unsigned long long)keys);
	t_rmtree(dir);
	free(dir);
}

/* 7e. A torn value past the checkpoint (key 2's record, as torn_sealed),
 *     then an open whose seal of the leftovers fails (the summary's write
 *     past RLIMIT_FSIZE, the segment file cut to its records' end: EFBIG,
 *     as ENOSPC would), so the segment keeps its open header, and a
 *     graceful stop: its checkpoint's seq passes the torn value's, and its
 *     write point stops before it (ssd_recover.c ssd_ckpt_write), so fsck
 *     calls it torn, not damage; the next recovery checks it again
 *     (rec_walk_sound: unread only before the write point), leaves it out
 *     of the summary it seals with, and fsck finds the store clean after
 *     the next graceful stop.  Until 2026-12-07 the write point passed it
 *     -- damage at once -- and the next recovery took it unread by its seq
 *     alone, the seal's summary naming it (review44c). */
static struct kvt_store *sfo_open(const char *dir)
{
	return t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", "4M", "ssd.segment", "1M",
			    "ssd.admission", "always", "ssd.checkpoint_seals", "0", "ssd.format",
			    "2", "ssd.dio_align", "4096", "ssd.io", "psync", NULL);
}

static void seal_fail_open(void)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	uint64_t cut, crc_errors;
	int st, fd;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = sfo_open(dir);
		uint32_t cns = ns_of(c);
		T_RC(t_put_filled(c, cns, 0, 16384), KVT_OK);
		T_OK(kvt_flush(c));
		if (ssd_checkpoint(store_ssd(c)) < 0)
			_exit(3);
		for (uint64_t k = 1; k < 5; k++) {
			T_RC(t_put_filled(c, cns, k, 16384), KVT_OK);
			T_OK(kvt_flush(c));
		}
		_exit(0); /* no close */
	}
	reap(pid, dir, &o);
	T_EQ_U64(o.n, 5);
	tear_value(dir, o.slot, o.offs[2], o.h.rec_align);
	cut = (o.end + 4095) / 4096 * 4096;
	fd = seg_fd(dir, o.slot, O_RDWR);
	T_GE_INT(fd, 0);
	T_OK(ftruncate(fd, (off_t)cut));
	close(fd);
	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct rlimit rl = { cut, cut };
		struct kvt_store *c;
		uint32_t cns;
		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			_exit(3);
		c = sfo_open(dir);
		cns = ns_of(c);
		if (t_stat(c, "ssd.recovery_torn_values") != 1)
			_exit(4);
		for (uint64_t k = 0; k < 5; k++)
			if (t_get_filled(c, cns, k, 16384) != (k == 2 ? KVT_MISS : KVT_OK))
				_exit(5);
		kvt_store_destroy(c); /* its checkpoint: seq past key 2's */
		_exit(0);
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The seal failed: the header is still open. */
	T_ASSERT(find_open(dir, &o));
	T_RC(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_ASSERT(strstr(w.text, "torn") != NULL);
	for (int pass = 0; pass < 2; pass++) {
		struct kvt_store *s = sfo_open(dir);
		uint32_t ns = ns_of(s);
		for (uint64_t k = 0; k < 5; k++)
			T_RC(t_get_filled(s, ns, k, 16384), k == 2 ? KVT_MISS : KVT_OK);
		crc_errors = t_stat(s, "ssd.crc_errors");
		T_EQ_U64(t_stat(s, "ssd.recovery_torn_values"), pass == 0 ? 1 : 0);
		kvt_store_destroy(s);
		clean(&w, fsck(dir, &w));
		T_EQ_U64(crc_errors, 0);
	}
	fprintf(stderr, "  torn value, seal at open failed, checkpoint: torn, then clean\n");
	t_rmtree(dir);
	free(dir);
}

/* 8. A segment of whole 4 KiB pages, not of whole MiB (ssd.segment
 *    1 MiB + 12 KiB, five of them exactly the capacity), at formats 3 and
 *    2: the log writes and reclaims it over several laps, every slot's
 *    header says its size, fsck finds it clean, and the store reopens
 *    with the blocks fsck counts live -- from the checkpoint a close
 *    writes, and by walking the segments with the checkpoint gone.
 *    Until 2026-12-05 ssd.segment took whole MiB only. */
static void odd_segment(const char *format)
{
	const uint64_t seg = (1u << 20) + 3 * SSD_ALIGN;
	char *dir = t_mkdtemp(), cap[32], sz[32], path[4096];
	struct kvt_store *s;
	struct said w;
	uint32_t ns;
	uint64_t k = 0, live, hits;

	snprintf(cap, sizeof(cap), "%llu", (unsigned long long)(5 * seg));
	snprintf(sz, sizeof(sz), "%llu", (unsigned long long)seg);
#define ODD_OPEN()                                                                         \
	t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",              \
		     "dram.prefault", "off", "ssd.capacity", cap, "ssd.segment", sz,        \
		     "ssd.admission", "always", "ssd.checkpoint_seals", "0", "ssd.format", \
		     format, NULL)
	s = ODD_OPEN();
	ns = ns_of(s);
	T_EQ_U64(t_stat(s, "ssd.capacity_bytes"), 5 * seg);
	while (t_stat(s, "ssd.segments_evicted") < 15) { /* three laps */
		put_k(s, ns, k++);
		if (k % 8 == 0)
			T_OK(kvt_flush(s));
	}
	T_OK(kvt_flush(s));
	kvt_store_destroy(s);
	for (uint32_t slot = 0; slot < 5; slot++)
		T_EQ_U64(seg_hdr(dir, slot).seg_size, seg);
	T_ASSERT(seg_fd(dir, 5, O_RDONLY) < 0);
	clean(&w, fsck(dir, &w));
	live = w.f.blocks;
	T_ASSERT(live > 0);
	clean(&w, fsck_as(dir, &w, 5 * seg, seg));
	T_EQ_U64(w.f.blocks, live);
	for (int walk = 0; walk < 2; walk++) {
		if (walk) {
			snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
			T_OK(unlink(path));
		}
		s = ODD_OPEN();
		ns = ns_of(s);
		if (walk)
			T_EQ_U64(t_stat(s, "ssd.recovery_checkpoint_blocks"), 0);
		else
			T_ASSERT(t_stat(s, "ssd.recovery_checkpoint_blocks") > 0);
		hits = 0;
		for (uint64_t j = 0; j < k; j++)
			hits += t_get_filled(s, ns, j, len_of(j)) == KVT_OK;
		T_EQ_U64(hits, live);
		kvt_store_destroy(s);
		clean(&w, fsck(dir, &w));
	}
#undef ODD_OPEN
	fprintf(stderr, "  segment %llu bytes, format %s: %llu keys, %llu live after 3 laps\n",
		(unsigned long long)seg, format, (unsigned long long)k,
		(unsigned long long)live);
	t_rmtree(dir);
	free(dir);
}

/* 9. A damaged tombstone.  A writer (a child, killed by _exit) puts key
 *    0, then more until key 0's segment is sealed, deletes key 0 (its
 *    tombstone durable when kvt_delete returns), puts 4 more, and dies:
 *    the tombstone lies in the segment left open, key 0's record in a
 *    sealed one.  The tombstone's bytes are damaged (its header's CRC
 *    flipped, at format 2, or its whole 512 or 4096 bytes zeroed, at
 *    format 3, as bit rot or a bad sector would): copy 0 (the record), or copy 1 (its twin).  After recovery
 *    key 0 is a miss and the 4 keys after it exact; fsck reports the
 *    damaged copy as a warning (past the checkpoint's write point: none
 *    was taken), then, after a graceful stop, is clean.  Until 2026-12-06
 *    a tombstone was written once and the walk stopped at it: key 0 came
 *    back with its old bytes, and the 4 keys after it were misses. */
static void tomb_damaged(const char *format, const char *align, int copy, bool zero)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	uint32_t at;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0)
		tomb_writer(open_fmt(dir, align, "progressive", format), false);
	reap(pid, dir, &o);
	at = first_tomb(&o);
	T_EQ_U64(o.keys[at], 0);
	/* Its twin, the same record, right after it. */
	T_ASSERT(at + 1 < o.n);
	T_EQ_INT((int)o.types[at + 1], SSD_REC_DELETE);
	T_EQ_U64(o.seqs[at + 1], o.seqs[at]);
	T_EQ_U64(o.offs[at + 1], o.offs[at] + o.h.rec_align);
	clean(&w, fsck(dir, &w));
	if (zero) {
		int fd = seg_fd(dir, o.slot, O_RDWR);
		uint8_t *z = calloc(1, o.h.rec_align);
		T_ASSERT(fd >= 0 && z);
		T_EQ_INT(pwrite(fd, z, o.h.rec_align, (off_t)o.offs[at + (uint32_t)copy]),
			 (int)o.h.rec_align);
		close(fd);
		free(z);
	} else {
		flip_crc(dir, o.slot, o.offs[at + (uint32_t)copy]);
	}
	T_EQ_INT(fsck(dir, &w), 0);
	T_EQ_U64(w.f.damaged, 0);
	T_EQ_U64(w.f.warnings, 1);
	T_ASSERT(strstr(w.text, "a copy of a tombstone") != NULL);
	{
		struct kvt_store *s = open_fmt(dir, align, "progressive", format);
		uint32_t ns = ns_of(s);
		T_RC(t_get_filled(s, ns, 0, len_of(0)), KVT_MISS);
		for (uint64_t i = 0; i < 4; i++)
			T_RC(t_get_filled(s, ns, 1000 + i, len_of(1000 + i)), KVT_OK);
		T_EQ_U64(t_stat(s, "ssd.recovery_twins_used"), 1);
		kvt_store_destroy(s);
	}
	clean(&w, fsck(dir, &w));
	fprintf(stderr, "  tombstone, format %s %s, copy %d %s: deleted key stays deleted\n",
		format, align, copy, zero ? "zeroed" : "flipped");
	t_rmtree(dir);
	free(dir);
}

/* 12. A segment header damaged over a tombstone.  As in 9, a child puts
 *     key 0, more until its segment seals, deletes key 0 and puts 4 more,
 *     and dies; the tombstone lies in the segment left open, key 0's
 *     record in a sealed one, no checkpoint taken.  Then that open
 *     segment's header is damaged: a bit flipped (its CRC), or zeroed (as
 *     eviction leaves a header).  fsck reports it: damage, or for zeros
 *     (what whole-segment eviction leaves too) a warning that names the
 *     records under it.  After recovery key 0 is a miss -- until
 *     2026-12-06 the slot was taken for free and its records never read,
 *     and key 0 came back with its old bytes -- the 4 keys after it are
 *     misses too (their segment's header is gone), the keys of the sealed
 *     segment exact; the slot is voided once the checkpoint reflecting
 *     the delete is written, so fsck is clean, and a second open (a new
 *     put of key 0 first) finds nothing to apply again. */
static void hdr_damaged(const char *align, bool zero, bool ckpt)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	uint32_t at;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0)
		tomb_writer(open_at(dir, align, "progressive"), ckpt);
	reap(pid, dir, &o);
	at = first_tomb(&o);
	T_EQ_U64(o.keys[at], 0);
	{
		int fd = seg_fd(dir, o.slot, O_RDWR);
		uint8_t hb[SSD_ALIGN];
		T_ASSERT(fd >= 0);
		T_EQ_INT(pread(fd, hb, SSD_ALIGN, 0), SSD_ALIGN);
		if (zero)
			memset(hb, 0, sizeof(hb));
		else
			hb[12] ^= 0x10; /* its CRC */
		T_EQ_INT(pwrite(fd, hb, SSD_ALIGN, 0), SSD_ALIGN);
		close(fd);
	}
	T_RC(fsck(dir, &w), zero ? 0 : KVT_ECORRUPT);
	if (ckpt) {
		/* and the checkpoint's entries there: sound records no more */
		T_ASSERT(strstr(w.text, zero ? "header zeroed over records" : "records under it"));
	} else if (zero) {
		T_EQ_U64(w.f.damaged, 0);
		T_EQ_U64(w.f.warnings, 1);
		T_ASSERT(strstr(w.text, "header zeroed over records") != NULL);
	} else {
		T_EQ_U64(w.f.damaged, 1);
		T_ASSERT(strstr(w.text, "segment header damaged") != NULL);
		T_ASSERT(strstr(w.text, "records under it") != NULL);
	}
	{
		struct kvt_store *s = open_at(dir, align, "progressive");
		uint32_t ns = ns_of(s);
		T_RC(t_get_filled(s, ns, 0, len_of(0)), KVT_MISS);
		for (uint64_t i = 0; i < 4; i++)
			T_RC(t_get_filled(s, ns, 1000 + i, len_of(1000 + i)), KVT_MISS);
		/* Keys 1-7 exact where their records lie in the sealed
		 * segment, misses where in the damaged one. */
		for (uint64_t j = 1; j < 8; j++) {
			bool here = false;
			for (uint32_t i = 0; i < o.n; i++)
				here |= o.types[i] == SSD_REC_PUT && o.keys[i] == j;
			T_RC(t_get_filled(s, ns, j, len_of(j)), here ? KVT_MISS : KVT_OK);
		}
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 1);
		/* A new put of key 0, below the deleted one's seq perhaps
		 * (the counter goes on from sound data): it stays. */
		put_k(s, ns, 0);
		T_OK(kvt_flush(s));
		kvt_store_destroy(s);
	}
	clean(&w, fsck(dir, &w));
	{
		struct kvt_store *s = open_at(dir, align, "progressive");
		uint32_t ns = ns_of(s);
		T_RC(t_get_filled(s, ns, 0, len_of(0)), KVT_OK);
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 0);
		kvt_store_destroy(s);
	}
	fprintf(stderr, "  segment header %s over a tombstone, %s%s: deleted key stays deleted\n",
		zero ? "zeroed" : "flipped", align, ckpt ? ", a checkpoint before" : "");
	t_rmtree(dir);
	free(dir);
}

/* 13. A voided slot's generation handed out again.  A child puts keys 1
 *     and 2 (100 bytes each), deletes key 1 and dies: one segment, open,
 *     generation 1.  Its header is damaged; the next open walks it for
 *     the tombstone, takes generation 1 as used ("Generations") and voids
 *     the slot -- header and first record zeroed -- and stops with nothing
 *     written.  Then no header, record or checkpoint names generation 1,
 *     and the open after hands it out again, to the same slot (the lowest
 *     free): a child puts key 2 anew (200 bytes) and dies.  The walk of
 *     that open segment went on past the new record into the old ones of
 *     generation 1 beyond the void, and key 2 came back with its old 100
 *     bytes, of a seq above the new put's (the counter went on from sound
 *     data, of which there was none): stale bytes, until 2026-12-06.  The
 *     slot's file is now cut to nothing when voided: an empty file is a
 *     free slot, and no record of the old generation is left to walk. */
static void hdr_void_gen(const char *align)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_at(dir, align, "progressive");
		uint32_t cns = ns_of(c);
		struct kvt_key key1 = t_key(1);
		if (t_put_filled(c, cns, 1, 100) != KVT_OK ||
		    t_put_filled(c, cns, 2, 100) != KVT_OK || kvt_flush(c) != KVT_OK ||
		    kvt_delete(c, cns, &key1) != KVT_OK || kvt_flush(c) != KVT_OK)
			_exit(3);
		_exit(0);
	}
	reap(pid, dir, &o);
	T_EQ_U64(o.h.generation, 1);
	T_EQ_U64(o.n, 4); /* the two puts, the tombstone and its twin */
	T_EQ_U64(o.types[2], SSD_REC_DELETE);
	{
		int fd = seg_fd(dir, o.slot, O_RDWR);
		uint8_t hb[SSD_ALIGN];
		T_ASSERT(fd >= 0);
		T_EQ_INT(pread(fd, hb, SSD_ALIGN, 0), SSD_ALIGN);
		hb[12] ^= 0x10; /* its CRC */
		T_EQ_INT(pwrite(fd, hb, SSD_ALIGN, 0), SSD_ALIGN);
		close(fd);
	}
	{
		struct kvt_store *s = open_at(dir, align, "progressive");
		uint32_t ns = ns_of(s);
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 1);
		T_RC(t_get_filled(s, ns, 1, 100), KVT_MISS);
		T_RC(t_get_filled(s, ns, 2, 100), KVT_MISS);
		kvt_store_destroy(s);
	}
	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_at(dir, align, "progressive");
		if (t_put_filled(c, ns_of(c), 2, 200) != KVT_OK || kvt_flush(c) != KVT_OK)
			_exit(3);
		_exit(0);
	}
	reap(pid, dir, &o);
	{
		struct kvt_store *s = open_at(dir, align, "progressive");
		uint32_t ns = ns_of(s);
		/* the new bytes, never the old ones (t_get_filled checks the
		 * length and the bytes) */
		T_RC(t_get_filled(s, ns, 2, 200), KVT_OK);
		T_RC(t_get_filled(s, ns, 1, 100), KVT_MISS);
		kvt_store_destroy(s);
	}
	clean(&w, fsck(dir, &w));
	fprintf(stderr, "  voided slot, %s: its generation again, no old record taken\n", align);
	t_rmtree(dir);
	free(dir);
}

/* 9b. A store reopened with another segment size voids the old size's
 *     segment files at its first write.  Stopped by a kill after a
 *     checkpoint and a delete logged after it (in slot 1, the open
 *     segment), the 4M/1M store is reopened at 4M/2M (2 slots: the old
 *     checkpoint is not used, and its seq is where the counter goes on,
 *     below the delete's); that open puts the deleted key again with new
 *     bytes, flushes, and is killed before any checkpoint.  The next open
 *     (no checkpoint it uses) serves the new bytes.  Until 2026-12-06 the
 *     old files were voided by their header zeroed: slot 1, free at the
 *     2M open, was a headerless slot to the next, walked for tombstones,
 *     and the old delete -- its seq above the new put's -- removed the
 *     put: a miss, the put lost (ssd.recovery_headerless_tombstones 1).
 *     The old files are cut to nothing now. */
static void void_other_size(void)
{
	char *dir = t_mkdtemp();
	struct kvt_key key0 = t_key(0);
	struct stat st;
	char path[4200];
	int wst;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_sized(dir, "4M", "1M");
		uint32_t cns = ns_of(c);
		uint64_t k = 0;
		while (t_stat(c, "ssd.segments_sealed") < 1) {
			if (t_put_filled(c, cns, k++, 60000) != KVT_OK || kvt_flush(c) != KVT_OK)
				_exit(3);
		}
		if (ssd_checkpoint(store_ssd(c)) < 0)
			_exit(4);
		for (uint64_t j = 0; j < 4; j++)
			if (t_put_filled(c, cns, 1000 + j, 100) != KVT_OK)
				_exit(5);
		if (kvt_flush(c) != KVT_OK || kvt_delete(c, cns, &key0) != KVT_OK)
			_exit(6);
		_exit(0); /* no close, no checkpoint */
	}
	T_EQ_INT(waitpid(pid, &wst, 0), pid);
	T_ASSERT(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_sized(dir, "4M", "2M");
		uint32_t cns = ns_of(c);
		if (t_get_filled(c, cns, 0, 60000) != KVT_MISS ||
		    t_put_filled(c, cns, 0, 200) != KVT_OK || kvt_flush(c) != KVT_OK)
			_exit(3);
		_exit(0);
	}
	T_EQ_INT(waitpid(pid, &wst, 0), pid);
	T_ASSERT(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	/* Slot 1 held the old delete. */
	snprintf(path, sizeof(path), "%s/ssd/seg-%06u", dir, 1u);
	T_EQ_INT(stat(path, &st), 0);
	T_EQ_U64((uint64_t)st.st_size, 0);
	{
		struct kvt_store *s = open_sized(dir, "4M", "2M");
		uint32_t ns = ns_of(s);
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 0);
		T_RC(t_get_filled(s, ns, 0, 200), KVT_OK);
		kvt_store_destroy(s);
	}
	fprintf(stderr, "  segment 1M to 2M, killed twice: the put after the change holds\n");
	t_rmtree(dir);
	free(dir);
}

/* 9b'. The void on a full file system: the old size's files cut to
 *      nothing give their room back, and the new segment must allocate
 *      its file again (ssd.c "Room").  With no allocation allowed, the
 *      open after the change voids the 1M files at its first write-down
 *      and takes the no-room path for both slots (the write-downs are
 *      shed, the block is served from DRAM); with the room back, the
 *      retry takes it and the next write-downs land; reopened, every key
 *      of the new size is exact or a miss, none of the old size served. */
static void void_noroom(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	struct io_fault f = { .kind = IO_FAULT_ALLOC_ENOSPC, .fd = -1 };
	struct stat st;
	char path[4200];
	uint64_t k = 0;

	while (t_stat(s, "ssd.segments_sealed") < 2) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
	}
	kvt_store_destroy(s);
	s = t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
			 "dram.prefault", "off", "ssd.capacity", "4M", "ssd.segment", "2M",
			 "ssd.admission", "always", "ssd.checkpoint_seals", "0", "ssd.format",
			 "2", "ssd.enospc_retry_ms", "50", NULL);
	ns = ns_of(s);
	T_OK(io_fault_add(ssd_io(store_ssd(s)), &f));
	put_k(s, ns, 10000);
	(void)kvt_flush(s);
	T_EQ_U64(t_stat(s, "ssd.room_capped"), 1);
	T_EQ_U64(t_stat(s, "ssd.segments_room"), 0);
	for (uint32_t slot = 0; slot < 2; slot++) {
		snprintf(path, sizeof(path), "%s/ssd/seg-%06u", dir, slot);
		T_EQ_INT(stat(path, &st), 0);
		T_EQ_U64((uint64_t)st.st_size, 0);
	}
	T_RC(t_get_filled(s, ns, 10000, len_of(10000)), KVT_OK); /* from DRAM */
	io_fault_clear(ssd_io(store_ssd(s)));
	usleep(100 * 1000);
	for (uint64_t j = 10001; j < 10009; j++)
		put_k(s, ns, j);
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.segments_room"), 2);
	kvt_store_destroy(s);
	s = open_sized(dir, "4M", "2M");
	ns = ns_of(s);
	for (uint64_t j = 0; j < k; j++)
		T_RC(t_get_filled(s, ns, j, len_of(j)), KVT_MISS);
	for (uint64_t j = 10001; j < 10009; j++)
		T_RC(t_get_filled(s, ns, j, len_of(j)), KVT_OK);
	kvt_store_destroy(s);
	fprintf(stderr, "  segment 1M to 2M on a full file system: voided, no room, then room\n");
	t_rmtree(dir);
	free(dir);
}

/* 9c. fsck counts the tombstones of a headerless slot that recovery
 *     applies: one probe, walk and filter (ssdfmt's ssd_hl_*).  (a) The
 *     header zeroed and the first copy of the tombstone damaged:
 *     recovery's walk goes on at its twin and applies it; fsck's own
 *     walk, until 2026-12-06, stopped there and said nothing.  (b) A
 *     2M segment whose delete lies past its first 1M, its header zeroed,
 *     judged as a 1M store: recovery walks no further than its segment
 *     size and applies nothing; fsck walked to the file's end and said
 *     1 tombstone would be applied. */
static void zero_hdr(const char *dir, uint32_t slot)
{
	uint8_t hb[SSD_ALIGN];
	int fd = seg_fd(dir, slot, O_RDWR);
	T_ASSERT(fd >= 0);
	memset(hb, 0, sizeof(hb));
	T_EQ_INT(pwrite(fd, hb, SSD_ALIGN, 0), SSD_ALIGN);
	close(fd);
}

static void hl_agree(void)
{
	char *dir = t_mkdtemp();
	struct open_seg o;
	struct said w;
	uint32_t at;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_at(dir, "512", "progressive");
		uint32_t cns = ns_of(c);
		struct kvt_key key0 = t_key(0);
		for (uint64_t k = 0; k < 4; k++)
			put_k(c, cns, k);
		if (kvt_flush(c) != KVT_OK || kvt_delete(c, cns, &key0) != KVT_OK)
			_exit(3);
		put_k(c, cns, 1000);
		if (kvt_flush(c) != KVT_OK)
			_exit(4);
		_exit(0);
	}
	reap(pid, dir, &o);
	at = first_tomb(&o);
	zero_hdr(dir, o.slot);
	flip_crc(dir, o.slot, o.offs[at]);
	T_RC(fsck(dir, &w), 0);
	T_ASSERT(strstr(w.text, "header zeroed over records (generation 1) holding 1 "
				"tombstones") != NULL);
	{
		struct kvt_store *s = open_at(dir, "512", "progressive");
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 1);
		kvt_store_destroy(s);
	}
	t_rmtree(dir);
	free(dir);

	dir = t_mkdtemp();
	{
		struct kvt_store *s = open_sized(dir, "4M", "2M");
		uint32_t ns = ns_of(s);
		struct kvt_key key0 = t_key(0);
		for (uint64_t k = 0; k < 20; k++) /* 20 x 60000 bytes: past 1M */
			T_RC(t_put_filled(s, ns, k, 60000), KVT_OK);
		T_OK(kvt_flush(s));
		T_OK(kvt_delete(s, ns, &key0));
		T_EQ_U64(t_stat(s, "ssd.segments_sealed"), 0);
		kvt_store_destroy(s);
	}
	zero_hdr(dir, 0);
	T_RC(fsck_as(dir, &w, 4 << 20, 1 << 20), 0);
	T_ASSERT(strstr(w.text, "header zeroed over records") == NULL);
	{
		struct kvt_store *s = open_sized(dir, "4M", "1M");
		T_EQ_U64(t_stat(s, "ssd.recovery_headerless_tombstones"), 0);
		kvt_store_destroy(s);
	}
	fprintf(stderr, "  headerless slots: fsck counts the tombstones recovery applies\n");
	t_rmtree(dir);
	free(dir);
}

/* 10. A segment file cut short under a sound checkpoint that names records
 *     in the part cut off.  A store of 4 segments is filled past two seals
 *     and stopped (a checkpoint naming every block); slot 0's file (sealed)
 *     is cut in the middle of its records.  fsck reports damage.  Then an
 *     open, killed before it writes anything of its own: recovery drops
 *     the checkpoint's entries past the file's end (misses), seals the
 *     segment again where its records end, and replaces the checkpoint --
 *     so fsck is clean at once; every block before the cut is exact.
 *     Until 2026-12-06 the checkpoint's entries stayed (misses at read)
 *     and fsck reported them, and the summary past the file's end, until
 *     the next checkpoint. */
struct cut_rec {
	uint64_t end[512], k[512];
	uint32_t n;
};

static int cut_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct cut_rec *c = ctx;
	if (e->type == SSD_REC_PUT && c->n < KVT_ARRAY_LEN(c->end)) {
		c->end[c->n] = ((uint64_t)e->off_512 + e->len_512) * SSD_REC_ALIGN;
		memcpy(&c->k[c->n], e->key.bytes, sizeof(uint64_t));
		c->n++;
	}
	return 0;
}

static void seg_cut(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_sized(dir, "4M", "1M");
	uint32_t ns = ns_of(s);
	struct ssd_seg_hdr h;
	struct cut_rec cr = { .n = 0 };
	struct said w;
	uint64_t k = 0, cut, lost = 0;
	uint8_t *sum;
	pid_t pid;
	int fd, status;

	while (t_stat(s, "ssd.segments_sealed") < 2) {
		put_k(s, ns, k++);
		T_OK(kvt_flush(s));
	}
	kvt_store_destroy(s); /* a checkpoint */
	clean(&w, fsck(dir, &w));
	h = seg_hdr(dir, 0);
	T_ASSERT(h.summary_len > 0);
	sum = malloc(h.summary_len);
	fd = seg_fd(dir, 0, O_RDWR);
	T_ASSERT(sum && fd >= 0);
	T_EQ_INT(pread(fd, sum, h.summary_len, (off_t)h.summary_off), (int)h.summary_len);
	T_ASSERT(ssd_sum_decode(sum, h.summary_len, h.generation, cut_cb, &cr) >= 0);
	free(sum);
	T_ASSERT(cr.n >= 4);
	cut = h.summary_off / 2 / 4096 * 4096;
	T_EQ_INT(ftruncate(fd, (off_t)cut), 0);
	close(fd);
	T_RC(fsck(dir, &w), KVT_ECORRUPT);
	T_ASSERT(w.f.damaged >= 2);
	/* The record the cut runs through: recovery's walk stops before
	 * it (fsck said "recovery indexes it" until 2026-12-06). */
	T_ASSERT(strstr(w.text, "the file ends inside the record") == NULL ||
		 strstr(w.text, "recovery stops before it; a miss") != NULL);

	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = open_sized(dir, "4M", "1M");
		if (!c)
			_exit(2);
		_exit(0); /* no close, no checkpoint of close's */
	}
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	clean(&w, fsck(dir, &w));
	s = open_sized(dir, "4M", "1M");
	ns = ns_of(s);
	for (uint32_t i = 0; i < cr.n; i++) {
		T_RC(t_get_filled(s, ns, cr.k[i], len_of(cr.k[i])),
		     cr.end[i] > cut ? KVT_MISS : KVT_OK);
		lost += cr.end[i] > cut;
	}
	T_ASSERT(lost > 0 && lost < cr.n);
	for (uint64_t j = 0; j < k; j++) {
		bool in0 = false;
		for (uint32_t i = 0; i < cr.n; i++)
			in0 |= cr.k[i] == j;
		if (!in0)
			T_RC(t_get_filled(s, ns, j, len_of(j)), KVT_OK);
	}
	kvt_store_destroy(s);
	clean(&w, fsck(dir, &w));
	fprintf(stderr, "  segment cut at %llu: %llu of %u blocks there lost, fsck clean\n",
		(unsigned long long)cut, (unsigned long long)lost, cr.n);
	t_rmtree(dir);
	free(dir);
}

/* 11. A block promoted out of the SSD, then deleted across a restart,
 *     then the checkpoint lost.  Victim admission: key 0 goes down when
 *     DRAM evicts it; two reads promote it and drop its record
 *     (ssd.first_hit=cold; young_reads_pct 0), its index entry kept dead
 *     so that a delete logs a tombstone.  A graceful stop (no write-down
 *     at close) writes a checkpoint; reopened, key 0 is a miss and is
 *     deleted; stopped again.  Then the checkpoint is removed (or damaged:
 *     recovery ignores it alike) and the store opened: key 0 must stay a
 *     miss.  Until 2026-12-06 the checkpoint left dead entries out: the
 *     reopened store knew no entry of key 0, the delete logged no
 *     tombstone, and the scan of every segment without the checkpoint
 *     found its record -- the deleted block back with its old bytes
 *     (test_crashloop: a round after "ckpt-rm", fsck clean). */
static struct kvt_store *open_victim(const char *dir)
{
	return t_store_open("path", dir, "dram.capacity", "4M", "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.segment", "1M", "ssd.capacity", "16M", "ssd.admission", "victim", "ssd.first_hit", "cold",
			    "ssd.young_reads_pct", "0", "ssd.close_writedown_ms", "0",
			    "ssd.checkpoint_seals", "0", NULL);
}

static void dead_ckpt(void)
{
	char *dir = t_mkdtemp(), path[4096];
	struct kvt_store *s = open_victim(dir);
	uint32_t ns = ns_of(s);
	struct kvt_key key0 = t_key(0);
	uint64_t k = 1;

	/* Key 0, then enough to push it out of DRAM onto the SSD (and
	 * past its first segment's seal). */
	for (; k < 1 + 400; k++)
		T_RC(t_put_filled(s, ns, k - 1, 16384), KVT_OK);
	T_OK(kvt_flush(s));
	T_ASSERT(t_stat(s, "ssd.segments_sealed") >= 1);
	/* Read from the SSD twice (DRAM's copy of the first read evicted
	 * between): promoted, its record dropped. */
	for (int i = 0; i < 8; i++) {
		T_RC(t_get_filled(s, ns, 0, 16384), KVT_OK);
		if (t_stat(s, "ssd.promoted_dropped") > 0)
			break; /* in DRAM alone now: nothing after it evicts it */
		for (uint64_t j = 0; j < 100; j++, k++)
			T_RC(t_put_filled(s, ns, 100000 + k, 16384), KVT_OK);
		T_OK(kvt_flush(s));
	}
	T_ASSERT(t_stat(s, "ssd.promoted_dropped") >= 1);
	kvt_store_destroy(s);

	s = open_victim(dir);
	ns = ns_of(s);
	(void)kvt_delete(s, ns, &key0);
	T_RC(t_get_filled(s, ns, 0, 16384), KVT_MISS);
	kvt_store_destroy(s);

	snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	T_EQ_INT(unlink(path), 0);
	s = open_victim(dir);
	ns = ns_of(s);
	T_RC(t_get_filled(s, ns, 0, 16384), KVT_MISS);
	kvt_store_destroy(s);
	fprintf(stderr, "  a promoted block deleted across a restart stays deleted without "
		"the checkpoint\n");
	t_rmtree(dir);
	free(dir);
}

/* Key 0 of ns (16384 bytes) promoted into DRAM, its SSD record left dead:
 * put and written down beside fillers of fns, read until a promotion
 * leaves its record dead (ssd.promoted_dropped).  Returns the next filler
 * key.  Key 0 is then in DRAM. */
static uint64_t dead_promoted(struct kvt_store *s, uint32_t ns, uint32_t fns)
{
	uint64_t k = 1;

	T_RC(t_put_filled(s, ns, 0, 16384), KVT_OK);
	for (; k < 1 + 400; k++)
		T_RC(t_put_filled(s, fns, k, 16384), KVT_OK);
	T_OK(kvt_flush(s));
	for (int i = 0; i < 8; i++) {
		T_RC(t_get_filled(s, ns, 0, 16384), KVT_OK);
		if (t_stat(s, "ssd.promoted_dropped") > 0)
			break;
		for (uint64_t j = 0; j < 100; j++, k++)
			T_RC(t_put_filled(s, fns, k, 16384), KVT_OK);
		T_OK(kvt_flush(s));
	}
	T_ASSERT(t_stat(s, "ssd.promoted_dropped") >= 1);
	return k;
}

/* Key 0 of ns (16384 bytes) made a dead SSD entry out of DRAM: promoted
 * (dead_promoted), then pushed out of DRAM by 400 more fillers with its
 * group's SSD quota at 1 byte (the write-down declined: the entry stays
 * dead; the quota is left so).  Returns the next filler key.  Key 0 is
 * then a miss. */
static uint64_t dead_key0(struct kvt_store *s, uint32_t ns, uint32_t fns)
{
	uint64_t k = dead_promoted(s, ns, fns);

	T_OK(kvt_quota_set(s, 1, 0, 1));
	T_OK(kvt_ns_set_group(s, ns, 1));
	for (uint64_t j = 0; j < 400; j++, k++)
		T_RC(t_put_filled(s, fns, k, 16384), KVT_OK);
	T_OK(kvt_flush(s));
	T_RC(t_get_filled(s, ns, 0, 16384), KVT_MISS);
	return k;
}

/* 12b. A dead entry (a block promoted out of the SSD) is a miss, so a put
 *      of its key is no put of a present key: the key's new bytes go into
 *      DRAM.  Key 0 (16384 bytes) is promoted (its record dead), then
 *      pushed out of DRAM without a write-down (its group's SSD quota is
 *      1 byte: declined); a put of key 0 with 8192 other bytes lands in
 *      DRAM alone (declined too), and the store is closed without writing
 *      DRAM down.  Reopened, key 0 is its new bytes or a miss.  Until
 *      2026-12-06 the close's checkpoint wrote the dead entry as a block,
 *      and key 0 was served with its 16384 old bytes, over the put that
 *      replaced them (and after a crash, the walk of its segment did the
 *      same).  A put over a dead entry now logs a tombstone for it
 *      (ssd_put_over), as a delete of the key would (ssd.tombstones +1).
 *      reserve: the put is a reservation, filled and committed; DRAM does
 *      not hold the key, so it logs the tombstone as a put does. */
static void dead_reput(bool reserve)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_victim(dir);
	uint32_t ns = ns_of(s), fns = t_ns(s, "ssd-fsck-filler");
	struct kvt_key key0 = t_key(0);
	struct kvt_reservation res;
	char buf[16384 + 10];
	uint64_t vl = 0, tombs;
	int r;

	dead_key0(s, ns, fns);
	T_RC(kvt_get(s, ns, &key0, buf, sizeof(buf), &vl), KVT_MISS);
	tombs = t_stat(s, "ssd.tombstones");
	if (reserve) { /* the same through a reservation: DRAM holds no copy */
		vl = 8192;
		size_t off = 0;
		T_OK(kvt_put_reserve(s, ns, &key0, &vl, 1, 0, &res));
		t_fill(buf, 8192, 0);
		for (unsigned i = 0; i < res.view_count; i++) {
			memcpy(res.view[i].iov_base, buf + off, res.view[i].iov_len);
			off += res.view[i].iov_len;
		}
		T_EQ_U64(off, 8192);
		T_OK(kvt_put_commit(s, res.handle, NULL));
	} else {
		T_RC(t_put_filled(s, ns, 0, 8192), KVT_OK);
	}
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.tombstones"), tombs + 1);
	kvt_store_destroy(s);

	s = open_victim(dir);
	ns = ns_of(s);
	r = kvt_get(s, ns, &key0, buf, sizeof(buf), &vl);
	if (r == KVT_OK)
		T_EQ_U64(vl, 8192); /* its old 16384 bytes until 2026-12-06 */
	T_RC(t_get_filled(s, ns, 0, 8192), r);
	kvt_store_destroy(s);
	fprintf(stderr, "  a %s over a promoted block: after a restart its bytes or a miss (%s)\n",
		reserve ? "reservation" : "put", r == KVT_OK ? "its bytes" : "a miss");
	t_rmtree(dir);
	free(dir);
}

/* 12b'. dead_held: a put of a key whose SSD entry is dead while DRAM
 *       holds the block -- key 0 promoted (ssd.first_hit=cold: its record
 *       dead), then put again with 8192 other bytes -- is refused
 *       (KVT_EXISTS) and logs no tombstone: ssd.tombstones +0 (+1 until
 *       2026-12-06: the SSD logged one for every put over a dead entry,
 *       which DRAM then refused; the store now asks DRAM first,
 *       store_put_absent).  A reservation of it too (kvt_put_reserve
 *       asked the SSD first until 2026-12-07: +1).  The block stays: its
 *       16384 bytes, and after a restart its bytes or a miss, never the
 *       refused put's. */
static void dead_held(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_victim(dir);
	uint32_t ns = ns_of(s), fns = t_ns(s, "ssd-fsck-filler");
	struct kvt_key key0 = t_key(0);
	struct kvt_reservation res;
	uint64_t tombs, len = 8192;
	int r;

	dead_promoted(s, ns, fns);
	T_OK(kvt_flush(s));
	tombs = t_stat(s, "ssd.tombstones");
	T_RC(t_put_filled(s, ns, 0, 8192), KVT_EXISTS);
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.tombstones"), tombs);
	/* A reservation of it: refused, and no tombstone either (+1 until
	 * 2026-12-07: kvt_put_reserve asked the SSD before DRAM). */
	T_RC(kvt_put_reserve(s, ns, &key0, &len, 1, 0, &res), KVT_EXISTS);
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.tombstones"), tombs);
	T_RC(t_get_filled(s, ns, 0, 16384), KVT_OK);
	kvt_store_destroy(s);

	s = open_victim(dir);
	r = t_get_filled(s, ns_of(s), 0, 16384);
	kvt_store_destroy(s);
	fprintf(stderr, "  a put of a promoted block while in DRAM: refused, no tombstone; "
		"after a restart %s\n", r == KVT_OK ? "its bytes" : "a miss");
	t_rmtree(dir);
	free(dir);
}

/* 12b''. wd_reput_race: a put of key 0 (8192 other bytes) while a victim
 *        write-down moves its 16384 bytes from DRAM to the SSD.  The
 *        store's test hook (debug_put_hook, called where the put asks
 *        DRAM) runs once the put's first lookup (store_tiers_have) missed
 *        -- key 0 then in DRAM alone -- and pushes key 0 out of DRAM with
 *        fillers: written down, its entry live, DRAM's copy let go.  The
 *        put must answer KVT_EXISTS, the key keeping its 16384 bytes
 *        (KVT_EXISTS: a put of a present key is a no-op, kvtier.h).
 *        Until 2026-12-07 the store asked the SSD before DRAM only: the
 *        put went in (KVT_OK) over the live record, no tombstone; a get
 *        served its 8192 bytes from DRAM, and once DRAM evicted them --
 *        their write-down skipped as already on SSD (wd_already_down) --
 *        the 16384 old ones.  reserve: the put is a reservation, filled
 *        and committed (the same until 2026-12-07). */
struct wdr_ctx {
	uint32_t ns, fns;
	uint64_t k; /* the next filler */
	int fired;
};

/* Key 0's length as a get sees it: 0 for a miss. */
static uint64_t wdr_len(struct kvt_store *s, uint32_t ns)
{
	static char buf[16384 + 10];
	struct kvt_key key0 = t_key(0);
	uint64_t vl = 0;
	int r = kvt_get(s, ns, &key0, buf, sizeof(buf), &vl);
	T_ASSERT(r == KVT_OK || r == KVT_MISS);
	return r == KVT_OK ? vl : 0;
}

/* Key 0's 8192 new bytes, by a put or a reservation (reserve): the
 * put's answer.  The races below (wd_reput_race, put_reput_race). */
static int wdr_put0(struct kvt_store *s, uint32_t ns, bool reserve)
{
	struct kvt_key key0 = t_key(0);
	struct kvt_reservation res;
	uint64_t len = 8192;
	char buf[8192];
	int r;

	if (!reserve)
		return t_put_filled(s, ns, 0, 8192);
	r = kvt_put_reserve(s, ns, &key0, &len, 1, 0, &res);
	if (r == KVT_OK) {
		size_t off = 0;
		t_fill(buf, sizeof(buf), 0);
		for (unsigned i = 0; i < res.view_count; i++) {
			memcpy(res.view[i].iov_base, buf + off, res.view[i].iov_len);
			off += res.view[i].iov_len;
		}
		T_OK(kvt_put_commit(s, res.handle, NULL));
	}
	return r;
}

/* Key 0 pushed out of DRAM by fillers, its write-down flushed. */
static void wdr_push(struct kvt_store *s, struct wdr_ctx *c)
{
	struct kvt_key key0 = t_key(0);
	for (int i = 0; i < 8 && dram_exists(s->dram, c->ns, &key0) == KVT_OK; i++) {
		for (int j = 0; j < 100; j++, c->k++)
			T_RC(t_put_filled(s, c->fns, c->k, 16384), KVT_OK);
		T_OK(kvt_flush(s));
	}
	T_RC(dram_exists(s->dram, c->ns, &key0), KVT_MISS);
}

static void wdr_hook(struct kvt_store *s, void *arg)
{
	struct wdr_ctx *c = arg;
	struct kvt_key key0 = t_key(0);
	s->debug_put_hook = NULL; /* once: the fillers' puts pass */
	c->fired = 1;
	wdr_push(s, c);
	T_RC(ssd_find(store_ssd(s), c->ns, &key0, NULL), KVT_OK);
}

/* 12b'''. put_reput_race: two puts of key 0 with other bytes (RESP SET, an
 *         S3 PUT of one name: keys not content-addressed), the second
 *         entering DRAM after the first's DRAM ask and leaving it,
 *         written down, before the first's put-if-absent.  The store's
 *         test hook (debug_put_hook, just before DRAM's put-if-absent)
 *         puts 16384 bytes, then pushes them out of DRAM with fillers:
 *         written down, their entry live.  The first put (8192 bytes)
 *         must then answer KVT_EXISTS, a get 16384 bytes throughout.
 *         Until 2026-12-07 the store asked DRAM, then the SSD, then
 *         went into DRAM's put-if-absent, no lock held between them: the
 *         put answered KVT_OK over the other's live record, a get served
 *         its 8192 bytes, and once DRAM evicted them -- their write-down
 *         skipped as already on SSD (wd_already_down) -- the other's
 *         16384: a read going backwards.  reserve: the first put is a
 *         reservation, filled and committed (the same until then). */
static void prr_hook(struct kvt_store *s, void *arg)
{
	struct wdr_ctx *c = arg;
	struct kvt_key key0 = t_key(0);
	s->debug_put_hook = NULL; /* once: the second put and the fillers' pass */
	c->fired = 1;
	T_RC(t_put_filled(s, c->ns, 0, 16384), KVT_OK);
	wdr_push(s, c);
	T_RC(ssd_find(store_ssd(s), c->ns, &key0, NULL), KVT_OK);
}

/* The two races above: wd_reput_race (other false: key 0's 16384 bytes
 * put first, the hook writes them down) and put_reput_race (other true:
 * the hook puts them and writes them down). */
static void reput_race(bool reserve, bool other)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s = open_victim(dir);
	struct wdr_ctx c = { .ns = ns_of(s), .fns = t_ns(s, "ssd-fsck-filler"), .k = 1 };
	uint64_t now, later;
	int r;

	if (!other)
		T_RC(t_put_filled(s, c.ns, 0, 16384), KVT_OK);
	s->debug_put_ctx = &c;
	s->debug_put_hook = other ? prr_hook : wdr_hook;
	r = wdr_put0(s, c.ns, reserve);
	T_ASSERT(c.fired);
	s->debug_put_hook = NULL;
	now = wdr_len(s, c.ns);
	/* DRAM lets any copy of key 0 go again. */
	wdr_push(s, &c);
	later = wdr_len(s, c.ns);
	fprintf(stderr, "  a %s racing %s: %s; a get %llu bytes, then %llu once out of DRAM "
		"(16384: %s)\n", reserve ? "reservation" : "put",
		other ? "another put of its key, written down" : "a write-down of its key",
		r == KVT_OK ? "KVT_OK" : r == KVT_EXISTS ? "KVT_EXISTS" : kvt_strerror(r),
		(unsigned long long)now, (unsigned long long)later,
		other ? "the other's" : "the old bytes");
	T_RC(r, KVT_EXISTS);
	T_EQ_U64(now, 16384);
	T_ASSERT(later == 16384 || later == 0);
	if (later)
		T_RC(t_get_filled(s, c.ns, 0, 16384), KVT_OK);
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

/* 12c. Two puts of key 0 over its dead entry at once: the one that
 *      removes the entry logs the tombstone, the other may find the entry
 *      gone and go ahead.  A thread puts 4096 bytes while this one puts
 *      8192, then pushes the key out of DRAM (written down: the quota
 *      lifted) and flushes; reopened, key 0 is the bytes of whichever put
 *      returned KVT_OK -- its write-down was flushed -- never a miss.
 *      Until 2026-12-06 the entry's removal and the tombstone's queueing
 *      were two steps: a put between them went ahead, its write-down
 *      placed first, and the tombstone, with the higher seq, deleted it at
 *      the next open (shown with a 300 ms sleep between the two steps: a
 *      miss; with the two under wd_lock, its bytes). */
struct reput_ctx {
	struct kvt_store *s;
	uint32_t ns;
	int ret;
};

static void *reput_thread(void *arg)
{
	struct reput_ctx *c = arg;
	c->ret = t_put_filled(c->s, c->ns, 0, 4096);
	return NULL;
}

/* The child of dead_reput_race: the two puts, then killed (_exit: no
 * close, no checkpoint; the next open walks the log).  Exit status: 1 if
 * the second put went through, | 2 if the first did. */
static void dead_reput_race_child(const char *dir)
{
	struct kvt_store *s = open_victim(dir);
	uint32_t ns = ns_of(s), fns = t_ns(s, "ssd-fsck-filler");
	struct reput_ctx c = { s, ns, 0 };
	pthread_t th;
	uint64_t k;
	int mine;

	k = dead_key0(s, ns, fns);
	T_OK(kvt_quota_set(s, 1, 0, 0));

	T_ASSERT(pthread_create(&th, NULL, reput_thread, &c) == 0);
	usleep(50 * 1000);
	mine = t_put_filled(s, ns, 0, 8192);
	/* Key 0 out of DRAM, written down this time, and flushed. */
	for (uint64_t j = 0; j < 400; j++, k++)
		T_RC(t_put_filled(s, fns, k, 16384), KVT_OK);
	T_OK(kvt_flush(s));
	T_ASSERT(pthread_join(th, NULL) == 0);
	/* Both go through where the first reaches DRAM after the second's
	 * bytes left it (written down). */
	T_ASSERT(mine == KVT_OK || mine == KVT_EXISTS);
	T_ASSERT(c.ret == KVT_OK || c.ret == KVT_EXISTS);
	T_ASSERT(mine == KVT_OK || c.ret == KVT_OK);
	T_OK(kvt_flush(s));
	_exit((mine == KVT_OK ? 1 : 0) | (c.ret == KVT_OK ? 2 : 0));
}

static void dead_reput_race(void)
{
	char *dir = t_mkdtemp();
	struct kvt_store *s;
	int st = 0, got = 0, went;
	pid_t pid = fork();

	T_GE_INT(pid, 0);
	if (pid == 0)
		dead_reput_race_child(dir);
	T_ASSERT(waitpid(pid, &st, 0) == pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) >= 1 && WEXITSTATUS(st) <= 3);
	went = WEXITSTATUS(st);
	s = open_victim(dir);
	/* A put that went through: its bytes (a miss until 2026-12-06). */
	if ((went & 1) && t_get_filled(s, ns_of(s), 0, 8192) == KVT_OK)
		got = 8192;
	else if ((went & 2) && t_get_filled(s, ns_of(s), 0, 4096) == KVT_OK)
		got = 4096;
	if (!got)
		T_FAIL("two puts over a dead entry (went %d): key 0 a miss after a kill", went);
	kvt_store_destroy(s);
	fprintf(stderr, "  two puts over a dead entry at once (went %d), killed: %d bytes back\n",
		went, got);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	static const char *const aligns[] = { "512", "4096" };
	static const char *const reuses[] = { "progressive", "whole" };
	/* KVT_TEST_ONLY=tomb: cases 9 and 10 alone. */
	const char *only = getenv("KVT_TEST_ONLY");
	if (only && strcmp(only, "tomb") == 0)
		goto tomb;
	if (only && strcmp(only, "hdr") == 0)
		goto hdr;
	if (only && strcmp(only, "seal") == 0) {
		seal_inflight();
		return 0;
	}
	if (only && strcmp(only, "power") == 0) {
		seal_powerloss("3");
		seal_powerloss("2");
		return 0;
	}
	if (only && strcmp(only, "sealfail") == 0) {
		seal_fail_open();
		return 0;
	}
	if (only && strcmp(only, "torn") == 0) {
		for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
			for (int ck = 0; ck < 2; ck++) {
				torn_sealed("3", aligns[a], ck);
				torn_sealed("2", aligns[a], ck);
			}
		return 0;
	}
	if (only && strcmp(only, "void") == 0) {
		void_other_size();
		void_noroom();
		hl_agree();
		return 0;
	}
	if (only && strcmp(only, "dead") == 0) {
		dead_reput_race();
		dead_ckpt();
		dead_reput(false);
		dead_reput(true);
		dead_held();
		reput_race(false, false);
		reput_race(true, false);
		reput_race(false, true);
		reput_race(true, true);
		return 0;
	}
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++) {
		for (size_t r = 0; r < KVT_ARRAY_LEN(reuses); r++) {
			graceful(aligns[a], reuses[r]);
			crash(aligns[a], reuses[r], true);
			crash(aligns[a], reuses[r], false);
		}
		summary_bad(aligns[a], true);
		summary_bad(aligns[a], false);
	}
	segment_changed();
	void_other_size();
	void_noroom();
	hl_agree();
	capacity_changed();
	store_id_source();
	ckpt_damaged(false);
	ckpt_damaged(true);
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
		for (int bf = 0; bf < 2; bf++)
			for (int ck = 0; ck < 2; ck++)
				f3_damage_then_batch(aligns[a], bf, ck);
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
		for (int ck = 0; ck < 2; ck++) {
			torn_sealed("3", aligns[a], ck);
			torn_sealed("2", aligns[a], ck);
		}
	seal_inflight();
	seal_powerloss("3");
	seal_powerloss("2");
	seal_fail_open();
	odd_segment("3");
	odd_segment("2");
tomb:
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
		for (int copy = 0; copy < 2; copy++)
			for (int z = 0; z < 2; z++)
				tomb_damaged(z ? "3" : "2", aligns[a], copy, z);
	seg_cut();
	dead_ckpt();
	dead_reput(false);
	dead_reput(true);
	dead_held();
	reput_race(false, false);
	reput_race(true, false);
	reput_race(false, true);
	reput_race(true, true);
	dead_reput_race();
hdr:
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
		for (int z = 0; z < 2; z++)
			for (int ck = 0; ck < 2; ck++)
				hdr_damaged(aligns[a], z, ck);
	for (size_t a = 0; a < KVT_ARRAY_LEN(aligns); a++)
		hdr_void_gen(aligns[a]);
	return 0;
}

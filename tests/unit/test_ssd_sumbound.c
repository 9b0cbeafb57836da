/*
 * test_ssd_sumbound.c - recovery's check that a sealed segment's summary
 * describes records only (doc/ssd-format.md: every record ends at or
 * before summary_off; issue 21 item 16).  A summary whose last entry is
 * moved past summary_off, CRCs and all rewritten, must not be used:
 * recovery walks the segment's records instead and every block reads
 * back exactly.  Trusting the summary would index that block at bytes
 * that are not its record (a miss, or worse).  At both on-disk formats
 * (ssd.format pinned): 2, a v2 summary of records; 3, a v3 summary whose
 * entries may name batched values alone (its last entry moved, framed
 * or batched).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvt_int.h"
#include "ssdfmt.h"
#include "t.h"
#include "tstore.h"

#define N_BLOCKS 300
#define SUM_MAX 256

static struct kvt_store *open_store(const char *dir, const char *format)
{
	return t_store_open("path", dir, "dram.capacity", "64M", "dram.chunk", "4K",
			    "dram.prefault", "off", "ssd.capacity", "32M", "ssd.segment", "1M",
			    "ssd.admission", "always", "ssd.format", format, NULL);
}

static size_t len_of(uint64_t k)
{
	return 1000 + (size_t)((k * 7919) % 60000);
}

/* KVT_OK with exact bytes, or what kvt_get said. */
static int get_k(struct kvt_store *s, uint32_t ns, uint64_t k)
{
	size_t len = len_of(k);
	char *buf = malloc(len + 10), *want = malloc(len);
	struct kvt_key key = t_key(k);
	uint64_t vl = 0;
	int r = kvt_get(s, ns, &key, buf, len + 10, &vl);

	if (r == KVT_OK) {
		t_fill(want, len, k);
		if (vl != len || memcmp(buf, want, len) != 0)
			r = KVT_ECORRUPT;
	}
	free(buf);
	free(want);
	return r;
}

struct sum_copy {
	struct ssd_sum_entry e[SUM_MAX];
	size_t n;
};

static int sum_copy_cb(void *ctx, const struct ssd_sum_entry *e)
{
	struct sum_copy *c = ctx;

	if (c->n == SUM_MAX)
		return KVT_EBADLEN;
	c->e[c->n++] = *e;
	return 0;
}

static void moved_past(const char *format)
{
	char *dir = t_mkdtemp(), path[4096];
	static struct sum_copy sc;
	struct kvt_store *s = open_store(dir, format);
	uint32_t ns = t_ns(s, "sumbound"), moved_ns;
	struct ssd_seg_hdr h;
	struct kvt_key moved;
	uint8_t hdr[SSD_ALIGN], *sum;
	uint64_t moved_k = UINT64_MAX;
	bool moved_batched;
	int fd, bad = 0;

	sc.n = 0;
	for (uint64_t k = 0; k < N_BLOCKS; k++)
		T_RC(t_put_filled(s, ns, k, len_of(k)), KVT_OK);
	T_OK(kvt_flush(s));
	T_ASSERT(t_stat(s, "ssd.blocks") == N_BLOCKS);
	kvt_store_destroy(s);
	/* Without a checkpoint, a restart reads the sealed segments' summaries. */
	snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	unlink(path);

	/* The first segment is sealed: move its summary's last entry past
	 * summary_off, and rewrite the summary with good CRCs. */
	snprintf(path, sizeof(path), "%s/ssd/seg-000000", dir);
	fd = open(path, O_RDWR);
	T_GE_INT(fd, 0);
	T_EQ_INT(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	T_OK(ssd_seg_hdr_decode(hdr, &h));
	T_ASSERT(h.summary_off != 0 && h.summary_len != 0);
	T_EQ_INT(h.version, atoi(format) == 3 ? SSD_SEG_VERSION_BATCH : SSD_FMT_VERSION);
	sum = malloc(h.summary_len);
	T_EQ_INT(pread(fd, sum, h.summary_len, (off_t)h.summary_off), (ssize_t)h.summary_len);
	T_GE_INT(ssd_sum_decode(sum, h.summary_len, h.generation, sum_copy_cb, &sc), 2);
	if (h.version == SSD_SEG_VERSION_BATCH) { /* the twin covers batched entries */
		size_t batched = 0;
		for (size_t i = 0; i < sc.n; i++)
			batched += (sc.e[i].flags & SSD_ENT_F_BATCHED) != 0;
		T_ASSERT(batched > 0);
	}
	{
		struct ssd_sum_entry *last = &sc.e[sc.n - 1];
		moved = last->key;
		moved_ns = last->ns_id;
		moved_batched = (last->flags & SSD_ENT_F_BATCHED) != 0;
		T_EQ_INT(moved_ns, ns);
		last->off_512 = (uint32_t)(h.summary_off / SSD_REC_ALIGN); /* ends past it */
	}
	memset(sum, 0, h.summary_len);
	T_EQ_INT(ssd_sum_encode(h.version == SSD_SEG_VERSION_BATCH ? SSD_SUM_VERSION_BATCH
								   : SSD_FMT_VERSION,
				h.generation, sc.e, sc.n, sum, h.summary_len),
		 (int64_t)h.summary_len);
	T_EQ_INT(pwrite(fd, sum, h.summary_len, (off_t)h.summary_off), (ssize_t)h.summary_len);
	close(fd);
	free(sum);
	for (uint64_t k = 0; k < N_BLOCKS; k++) {
		struct kvt_key key = t_key(k);
		if (key.len == moved.len && memcmp(key.bytes, moved.bytes, key.len) == 0)
			moved_k = k;
	}
	T_ASSERT(moved_k != UINT64_MAX);

	/* Every block, the moved one included, reads back exactly. */
	s = open_store(dir, format);
	T_EQ_INT(t_ns(s, "sumbound"), ns);
	for (uint64_t k = 0; k < N_BLOCKS; k++) {
		int r = get_k(s, ns, k);
		if (r != KVT_OK) {
			if (!bad)
				printf("block %llu%s: %s\n", (unsigned long long)k,
				       k == moved_k ? " (its summary entry moved)" : "",
				       kvt_strerror(r));
			bad++;
		}
	}
	printf("format %s: summary entry of block %llu (%s) moved past summary_off: %d of %d "
	       "blocks failed\n", format, (unsigned long long)moved_k,
	       moved_batched ? "batched" : "framed", bad, N_BLOCKS);
	T_EQ_INT(bad, 0);
	kvt_store_destroy(s);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	moved_past("2");
	moved_past("3");
	return 0;
}

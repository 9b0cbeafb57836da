/*
 * gen_recover_seeds.c - writes the seed corpus of fuzz_recover
 * (tests/fuzz/corpus/recover/): real store directories in its input format
 * ([u32 len][checkpoint] [u32 len][segment 0] [u32 len][segment 1],
 * segments without their trailing zeros), made by a store that puts
 * recover.h's keys:
 *   seg-only       the segment, no checkpoint: recovery walks it all
 *   ckpt-and-seg   the checkpoint written at close, and the segment
 *   old-ckpt       the first close's checkpoint with the segments after a
 *                  second session's puts and a delete: the walk resumes
 *                  after the checkpoint
 *   ckpt-only      the checkpoint alone: its entries name missing records
 *   cleared        a session that cleared the namespace after its puts
 * Run by hand when the SSD format changes: gen_recover_seeds DIR.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "recover.h"

/* dir/ssd/name into *len bytes, or NULL (*len 0) if it is not there. */
static uint8_t *slurp(const char *dir, const char *name, size_t *len)
{
	char path[4096];
	uint8_t *buf;
	struct stat st;
	int fd;

	*len = 0;
	snprintf(path, sizeof(path), "%s/ssd/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return NULL;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "gen_recover_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		exit(1);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void section(FILE *f, const uint8_t *buf, size_t len, bool seg)
{
	uint8_t hdr[4];

	while (seg && len > 0 && buf[len - 1] == 0)
		len--;
	for (int i = 0; i < 4; i++)
		hdr[i] = (uint8_t)(len >> (8 * i));
	if (fwrite(hdr, 1, 4, f) != 4 || (len && fwrite(buf, 1, len, f) != len))
		exit(1);
}

/* One seed: ck (or NULL) and the directory's segments now. */
static void emit(const char *out, const char *name, const char *dir, const uint8_t *ck,
		 size_t ck_len, bool segs)
{
	static const char *const seg_names[] = { "seg-000000", "seg-000001" };
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out, name);
	f = fopen(path, "wb");
	if (!f)
		exit(1);
	section(f, ck, ck ? ck_len : 0, false);
	for (int i = 0; i < 2; i++) {
		size_t len = 0;
		uint8_t *seg = segs ? slurp(dir, seg_names[i], &len) : NULL;
		section(f, seg, len, true);
		free(seg);
	}
	if (fclose(f) != 0)
		exit(1);
}

static void put_keys(struct kvt_store *s, uint32_t ns, uint32_t from, uint32_t to)
{
	static uint8_t v[4096];

	for (uint32_t i = from; i < to; i++) {
		struct kvt_key k = recover_key(i);
		size_t len = 300 + 100 * i; /* one 4 KiB page of value */
		struct iovec parts[2] = { { v, len / 2 }, { v + len / 2, len - len / 2 } };
		memset(v, (int)i + 1, len);
		if (kvt_put(s, ns, &k, parts, 2) != KVT_OK)
			exit(1);
	}
	if (kvt_flush(s) != 0)
		exit(1);
}

static struct kvt_store *must_open(const char *dir, uint32_t *ns)
{
	struct kvt_store *s;
	int rc = recover_open(dir, &s);

	if (rc == 0)
		rc = recover_ns(s, ns);
	if (rc != 0) {
		fprintf(stderr, "gen_recover_seeds: store: %s\n", kvt_strerror(rc));
		exit(1);
	}
	return s;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/kvtier-gen-recover.XXXXXX";
	uint8_t *ck1, *ck;
	size_t ck1_len, ck_len;
	struct kvt_store *s;
	uint32_t ns;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_recover_seeds OUTDIR\n");
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	s = must_open(dir, &ns);
	put_keys(s, ns, 0, RECOVER_KEYS / 2);
	kvt_store_destroy(s);
	ck1 = slurp(dir, "checkpoint", &ck1_len);
	emit(argv[1], "seg-only", dir, NULL, 0, true);
	emit(argv[1], "ckpt-and-seg", dir, ck1, ck1_len, true);
	emit(argv[1], "ckpt-only", dir, ck1, ck1_len, false);

	s = must_open(dir, &ns);
	put_keys(s, ns, RECOVER_KEYS / 2, RECOVER_KEYS);
	{
		struct kvt_key k = recover_key(1);
		if (kvt_delete(s, ns, &k) != KVT_OK || kvt_flush(s) != 0)
			exit(1);
	}
	kvt_store_destroy(s);
	emit(argv[1], "old-ckpt", dir, ck1, ck1_len, true);

	s = must_open(dir, &ns);
	if (kvt_clear(s, ns) < 0 || kvt_flush(s) != 0)
		exit(1);
	kvt_store_destroy(s);
	ck = slurp(dir, "checkpoint", &ck_len);
	emit(argv[1], "cleared", dir, ck, ck_len, true);
	free(ck);
	free(ck1);
	{
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 1;
	}

	/* Segments of 4096-aligned records (ssd.dio_align=4096), which the
	 * fuzzer's store (512) must read as they are. */
	{
		char dir4[] = "/tmp/kvtier-gen-recover.XXXXXX";
		char cmd[64];
		if (!mkdtemp(dir4))
			return 1;
		recover_dio_align = "4096";
		s = must_open(dir4, &ns);
		put_keys(s, ns, 0, RECOVER_KEYS);
		kvt_store_destroy(s);
		ck = slurp(dir4, "checkpoint", &ck_len);
		emit(argv[1], "seg4k-only", dir4, NULL, 0, true);
		emit(argv[1], "ckpt-and-seg4k", dir4, ck, ck_len, true);
		free(ck);
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir4);
		return system(cmd) == 0 ? 0 : 1;
	}
}

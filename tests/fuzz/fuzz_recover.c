/*
 * fuzz_recover.c - libFuzzer target for the SSD tier's recovery over whole
 * files (ssd_recover, lib/ssd_recover.c: checkpoint, then a walk of every
 * segment written after it) and for the offline check that reads the same
 * files (kvt_store_fsck, lib/ssd_fsck.c).  fuzz_ssdrec and fuzz_ckpt
 * decode one record, summary or checkpoint image; this one runs the code
 * that strings them together: the walk from offset 4096 until the first
 * bad or older header, summaries of sealed segments, checkpoint entries
 * pointing into a segment, generations, clears.
 *
 * Input, an untrusted store directory in a few bytes:
 *
 *   [u32 LE len][len bytes: ssd/checkpoint]
 *   [u32 LE len][len bytes: ssd/seg-000000]
 *   [u32 LE len][len bytes: ssd/seg-000001]
 *
 * A len of 0 (or an input that ends first) leaves that file out; a len
 * past the input's end takes the rest.  Segment files are cut or
 * zero-filled to 1 MiB (ssd.segment; the store has two slots).
 * The directory (under $TMPDIR, one per process, removed at exit) keeps the namespace
 * registry made at start-up (recover.h's namespace) and a fixed store id,
 * so the seeds' records belong to a known namespace and their checkpoint
 * to this store.  Each run: fsck the files (read only), then open a store
 * on them (recovery), read back every key the seeds put (a record that
 * recovery indexed is read and its CRCs checked), close (which writes a
 * checkpoint), destroy.  Properties, each a trap when broken: fsck and
 * open return only their documented codes, a get is KVT_OK with a value
 * of the recorded length or KVT_MISS, and nothing leaks.
 * Slow for a fuzz target (a store open per run: threads, files); expect
 * hundreds of runs a second, not thousands.
 * Seed corpus: tests/fuzz/corpus/recover/ (tests/fuzz/gen_recover_seeds.c).
 */
#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>

#include "recover.h"
#include "fuzz.h"

static char g_dir[256];
static uint32_t g_ns;
static uint8_t g_val[RECOVER_SEG];

/* Remove every file of dir/ssd but the store id. */
static void recover_clean(void)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/ssd", g_dir);
	d = opendir(path);
	FUZZ_CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strcmp(de->d_name, "id") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/ssd/%s", g_dir, de->d_name);
		FUZZ_CHECK(unlink(path) == 0);
	}
	closedir(d);
}

static void recover_write(const char *name, const uint8_t *buf, size_t len, off_t size)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/ssd/%s", g_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(len == 0 || write(fd, buf, len) == (ssize_t)len);
	FUZZ_CHECK(ftruncate(fd, size) == 0);
	close(fd);
}

static int recover_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

/* At exit (a crash leaves the directory, with the files that crashed). */
static void recover_cleanup(void)
{
	nftw(g_dir, recover_rm, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	struct kvt_store *s;

	(void)argc;
	(void)argv;
	snprintf(g_dir, sizeof(g_dir), "%s/kvtier-fuzz-recover.XXXXXX", tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(g_dir) != NULL);
	atexit(recover_cleanup);
	FUZZ_CHECK(recover_open(g_dir, &s) == 0);
	FUZZ_CHECK(recover_ns(s, &g_ns) == 0);
	kvt_store_destroy(s);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const files[] = { "checkpoint", "seg-000000", "seg-000001" };
	struct kvt_fsck f;
	struct kvt_store *s;
	size_t off = 0;
	int rc;

	recover_clean();
	for (int i = 0; i < 3 && size - off >= 4; i++) {
		const uint8_t *p = data + off;
		size_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;
		off += 4;
		if (len > size - off)
			len = size - off;
		if (len > 0) {
			if (i == 0)
				recover_write(files[i], data + off, len, (off_t)len);
			else
				recover_write(files[i], data + off, len < RECOVER_SEG ? len : RECOVER_SEG,
					      RECOVER_SEG);
		}
		off += len;
	}

	memset(&f, 0, sizeof(f));
	rc = kvt_store_fsck(g_dir, &f);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION);
	FUZZ_CHECK(rc != 0 || (f.damaged == 0 && f.orphans == 0));

	rc = recover_open(g_dir, &s);
	FUZZ_CHECK(rc == 0 || rc == KVT_ECORRUPT || rc == KVT_EVERSION);
	if (rc != 0)
		return 0;
	for (uint32_t i = 0; i < RECOVER_KEYS; i++) {
		struct kvt_key k = recover_key(i);
		uint64_t vl = 0;
		int r = kvt_get(s, g_ns, &k, g_val, sizeof(g_val), &vl);
		FUZZ_CHECK(r == KVT_OK || r == KVT_MISS);
		FUZZ_CHECK(r != KVT_OK || vl <= sizeof(g_val));
	}
	kvt_store_destroy(s);
	return 0;
}

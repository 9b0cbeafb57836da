/*
 * shdir.c - the directory backend of the shared tier: block files under a
 * shared directory (shdir.h; format in doc/shared.md), and kvt_shared_gc.
 *
 * Owns: the header codec, the path layout, writing (temp file + rename),
 * reading (header, value, CRCs), the careful removal of bad files, clears
 * and the budget/age collector's walks (what they remove: gcplan.c).
 * Holds no lock: the file system is the only shared state, and every step
 * is safe against other processes doing the same (renames are atomic; bad
 * files are removed only if the path still names the inode read).
 *
 * O_DIRECT: probed at open by creating a file with it in the root; if the
 * file system refuses (tmpfs, some FUSE and NFS setups), every I/O is
 * buffered and stat shared.o_direct says 0.  With it, writes go straight
 * from the DRAM view when its spans are aligned (the value's unaligned
 * tail through a zeroed bounce page, the file then truncated to its exact
 * length), else through the buffered descriptor.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gcplan.h"
#include "le.h"
#include "shdir.h"

struct shdir {
	int root_fd;            /* the directory given; kvt1/ below it */
	bool direct;            /* O_DIRECT works here (probed) */
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	_Atomic uint64_t tmp_seq; /* makes temp names unique within the process */
	struct shdir_stats st;
	void (*bad_hook)(void *ctx, const char *relpath);
	void *bad_ctx;
};

#define A(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)
#define AN(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Header codec.  Offsets (little-endian, doc/shared.md):
 *
 *     0  u32 magic "KTSH"        4  u16 version      6  u16 key_len
 *     8  u32 part_count         12  u32 hdr_len     16  u64 value_len
 *    24  u64 data_off           32  u8 ns_digest[32]
 *    64  u8 key[64] (zero past key_len)
 *   128  u32 flags             132  u32 hdr_crc (CRC32C of [0, hdr_len)
 *                                              with this field zero)
 *   136  part table: part_count x { u64 len, u32 crc32c, u32 zero }
 */

static uint32_t hdr_crc(const uint8_t *buf, uint32_t hdr_len)
{
	static const uint8_t zero[4];
	uint32_t c = kvt_crc32c(0, buf, 132);
	c = kvt_crc32c(c, zero, 4);
	return kvt_crc32c(c, buf + 136, hdr_len - 136);
}

int64_t shdir_hdr_encode(uint8_t *buf, size_t cap, const uint8_t ns_digest[32],
			 const struct kvt_key *key, unsigned part_count, const uint64_t *part_lens,
			 const uint32_t *crcs, uint32_t flags)
{
	uint64_t value_len = 0, data_off;
	uint32_t hdr_len;

	if (part_count == 0 || part_count > KVT_PARTS_MAX || key->len == 0 ||
	    key->len > KVT_KEY_MAX)
		return KVT_EBADLEN;
	hdr_len = SHDIR_FIXED_LEN + part_count * SHDIR_PART_LEN;
	data_off = KVT_ALIGN_UP(hdr_len, SHDIR_ALIGN);
	if (cap < data_off)
		return KVT_EBADLEN;
	memset(buf, 0, data_off);
	for (unsigned p = 0; p < part_count; p++) {
		if (part_lens[p] == 0 || part_lens[p] > KVT_VALUE_MAX)
			return KVT_EBADLEN;
		value_len += part_lens[p];
		le_put64(buf + SHDIR_FIXED_LEN + p * SHDIR_PART_LEN, part_lens[p]);
		le_put32(buf + SHDIR_FIXED_LEN + p * SHDIR_PART_LEN + 8, crcs[p]);
	}
	if (value_len > KVT_VALUE_MAX)
		return KVT_EBADLEN;
	le_put32(buf, SHDIR_MAGIC);
	le_put16(buf + 4, SHDIR_VERSION);
	le_put16(buf + 6, (uint16_t)key->len);
	le_put32(buf + 8, part_count);
	le_put32(buf + 12, hdr_len);
	le_put64(buf + 16, value_len);
	le_put64(buf + 24, data_off);
	memcpy(buf + 32, ns_digest, 32);
	memcpy(buf + 64, key->bytes, key->len);
	le_put32(buf + 128, flags);
	le_put32(buf + 132, hdr_crc(buf, hdr_len));
	return (int64_t)data_off;
}

bool shdir_hdr_names(const struct shdir_hdr *h, const uint8_t ns_digest[32],
		     const struct kvt_key *key)
{
	return memcmp(h->ns_digest, ns_digest, 32) == 0 && h->key.len == key->len &&
	       memcmp(h->key.bytes, key->bytes, key->len) == 0;
}

int shdir_hdr_parse(const uint8_t *buf, size_t len, struct shdir_hdr *h)
{
	uint32_t hdr_len, parts, key_len, flags;
	uint64_t value_len = 0, data_off;

	if (len < SHDIR_FIXED_LEN)
		return len >= 4 && le_get32(buf) != SHDIR_MAGIC ? KVT_ECORRUPT : SHDIR_FIXED_LEN;
	if (le_get32(buf) != SHDIR_MAGIC)
		return KVT_ECORRUPT;
	if (le_get16(buf + 4) != SHDIR_VERSION)
		return KVT_EVERSION;
	key_len = le_get16(buf + 6);
	parts = le_get32(buf + 8);
	hdr_len = le_get32(buf + 12);
	data_off = le_get64(buf + 24);
	if (key_len == 0 || key_len > KVT_KEY_MAX || parts == 0 || parts > KVT_PARTS_MAX ||
	    hdr_len != SHDIR_FIXED_LEN + parts * SHDIR_PART_LEN ||
	    data_off != KVT_ALIGN_UP(hdr_len, SHDIR_ALIGN))
		return KVT_ECORRUPT;
	if (len < hdr_len)
		return (int)hdr_len;
	if (le_get32(buf + 132) != hdr_crc(buf, hdr_len))
		return KVT_ECORRUPT;
	flags = le_get32(buf + 128);
	if (flags & ~(uint32_t)KVT_F_SEALED)
		return KVT_ECORRUPT;
	for (uint32_t k = key_len; k < KVT_KEY_MAX; k++)
		if (buf[64 + k])
			return KVT_ECORRUPT;
	for (uint32_t p = 0; p < parts; p++) {
		const uint8_t *e = buf + SHDIR_FIXED_LEN + p * SHDIR_PART_LEN;
		uint64_t pl = le_get64(e);
		if (pl == 0 || pl > KVT_VALUE_MAX || le_get32(e + 12) != 0)
			return KVT_ECORRUPT;
		value_len += pl;
		if (value_len > KVT_VALUE_MAX)
			return KVT_ECORRUPT;
		h->part_lens[p] = pl;
		h->crcs[p] = le_get32(e + 8);
	}
	if (value_len != le_get64(buf + 16))
		return KVT_ECORRUPT;
	memcpy(h->ns_digest, buf + 32, 32);
	memset(&h->key, 0, sizeof(h->key));
	h->key.len = key_len;
	memcpy(h->key.bytes, buf + 64, key_len);
	h->value_len = value_len;
	h->data_off = data_off;
	h->hdr_len = hdr_len;
	h->part_count = parts;
	h->flags = flags;
	return 0;
}

/* ------------------------------------------------------------------------
 * Paths
 */

static void hex(char *out, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
}

int shdir_relpath(const uint8_t ns_digest[32], const struct kvt_key *key, char *buf)
{
	uint8_t h[32];
	unsigned hl = 0;
	char nsx[65], kx[65];
	uint8_t kl = (uint8_t)key->len;

	/* SHA-256(key_len || key): opaque keys of any length get a fixed-size,
	 * evenly spread name; the header holds the key itself. */
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c)
		return -ENOMEM;
	if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(c, &kl, 1) != 1 ||
	    EVP_DigestUpdate(c, key->bytes, key->len) != 1 || EVP_DigestFinal_ex(c, h, &hl) != 1) {
		EVP_MD_CTX_free(c);
		return -ENOMEM;
	}
	EVP_MD_CTX_free(c);
	hex(nsx, ns_digest, 32);
	hex(kx, h, 32);
	snprintf(buf, SHDIR_RELPATH_MAX, "kvt1/%s/%.2s/%.2s/%s", nsx, kx, kx + 2, kx);
	return 0;
}

/* mkdir -p of the directories above relpath (relative to root_fd). */
static int mkdirs(int root_fd, const char *relpath)
{
	char p[SHDIR_RELPATH_MAX];
	snprintf(p, sizeof(p), "%s", relpath);
	for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		if (mkdirat(root_fd, p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

static bool probe_direct(int root_fd)
{
	char name[64];
	snprintf(name, sizeof(name), ".odirect-probe.%d", (int)getpid());
	int fd = openat(root_fd, name, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	bool ok = false;
	if (fd >= 0) {
		void *b = NULL;
		if (posix_memalign(&b, SHDIR_ALIGN, SHDIR_ALIGN) == 0) {
			memset(b, 0, SHDIR_ALIGN);
			ok = pwrite(fd, b, SHDIR_ALIGN, 0) == SHDIR_ALIGN &&
			     pread(fd, b, SHDIR_ALIGN, 0) == SHDIR_ALIGN;
			free(b);
		}
		close(fd);
	}
	unlinkat(root_fd, name, 0);
	return ok;
}

int shdir_open(struct shdir **out, const char *path, bool direct, struct kvt_mem *mem,
	       const struct kvt_logger *log)
{
	struct shdir *sd;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	sd = kvt_mem_calloc(mem, 1, sizeof(*sd));
	if (!sd)
		return -ENOMEM;
	sd->mem = mem;
	sd->log = log;
	sd->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sd->root_fd < 0) {
		int e = -errno;
		kvt_mem_free(mem, sd, sizeof(*sd));
		return e;
	}
	if (mkdirat(sd->root_fd, "kvt1", 0755) < 0 && errno != EEXIST) {
		int e = -errno;
		close(sd->root_fd);
		kvt_mem_free(mem, sd, sizeof(*sd));
		return e;
	}
	sd->direct = direct && probe_direct(sd->root_fd);
	kvt_logf(log, KVT_LOG_INFO, "shared tier %s: O_DIRECT %s", path,
		 sd->direct ? "on" : "off (refused by the file system or disabled)");
	*out = sd;
	return 0;
}

void shdir_close(struct shdir *sd)
{
	if (!sd)
		return;
	close(sd->root_fd);
	kvt_mem_free(sd->mem, sd, sizeof(*sd));
}

bool shdir_o_direct(const struct shdir *sd)
{
	return sd->direct;
}

struct shdir_stats *shdir_stats(struct shdir *sd)
{
	return &sd->st;
}

int shdir_root_fd(const struct shdir *sd)
{
	return sd->root_fd;
}

void shdir_set_bad_hook(struct shdir *sd, void (*fn)(void *ctx, const char *relpath), void *ctx)
{
	sd->bad_hook = fn;
	sd->bad_ctx = ctx;
}

int shdir_stat(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
	       uint64_t *file_len)
{
	char rel[SHDIR_RELPATH_MAX];
	struct stat st;
	int ret = shdir_relpath(ns_digest, key, rel);
	if (ret < 0)
		return ret;
	A(sd->st.stats_issued);
	if (fstatat(sd->root_fd, rel, &st, 0) < 0)
		return errno == ENOENT || errno == ENOTDIR ? KVT_MISS : -errno;
	if (file_len)
		*file_len = (uint64_t)st.st_size;
	return KVT_OK;
}

/* ------------------------------------------------------------------------
 * Writes
 */

static bool aligned(const void *p, uint64_t n)
{
	return ((uintptr_t)p % SHDIR_ALIGN) == 0 && n % SHDIR_ALIGN == 0;
}

/* Write all of iov[0..n) at off, retrying short writes. */
static int pwritev_all(int fd, struct iovec *iov, int n, off_t off)
{
	while (n > 0) {
		ssize_t w = pwritev(fd, iov, n > IOV_MAX ? IOV_MAX : n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += w;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++, n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int shdir_write(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
		const struct iovec *view, unsigned view_count, uint64_t value_len,
		unsigned part_count, const uint64_t *part_lens, const uint32_t *crcs,
		uint32_t flags)
{
	char rel[SHDIR_RELPATH_MAX], tmp[SHDIR_RELPATH_MAX + 48];
	size_t hcap = KVT_ALIGN_UP(SHDIR_HDR_MAX, SHDIR_ALIGN);
	uint8_t *hdr = NULL, *bounce = NULL;
	struct iovec *iov = NULL;
	size_t iov_cap = (size_t)view_count + 2;
	uint64_t left = value_len, tail = 0;
	int64_t data_off;
	int fd = -1, n = 0, ret;
	bool direct = sd->direct;
	struct stat st;

	if ((ret = shdir_relpath(ns_digest, key, rel)) < 0)
		return ret;
	/* Put if absent: a key names immutable bytes. */
	if (fstatat(sd->root_fd, rel, &st, 0) == 0) {
		A(sd->st.write_exists);
		return KVT_EXISTS;
	}
	hdr = kvt_mem_alloc_aligned(sd->mem, SHDIR_ALIGN, hcap);
	bounce = kvt_mem_alloc_aligned(sd->mem, SHDIR_ALIGN, SHDIR_ALIGN);
	iov = kvt_mem_calloc(sd->mem, iov_cap, sizeof(*iov));
	ret = -ENOMEM;
	if (!hdr || !bounce || !iov)
		goto out;
	data_off = shdir_hdr_encode(hdr, hcap, ns_digest, key, part_count, part_lens, crcs, flags);
	if (data_off < 0) {
		ret = (int)data_off;
		goto out;
	}
	iov[n++] = (struct iovec){ hdr, (size_t)data_off };
	for (unsigned i = 0; i < view_count && left > 0; i++) {
		uint64_t len = view[i].iov_len < left ? view[i].iov_len : left;
		left -= len;
		if (left == 0 && len % SHDIR_ALIGN) {
			/* The tail goes through a zeroed page: the DRAM chunk past
			 * the value holds recycled bytes that must not reach disk. */
			uint64_t whole = len - len % SHDIR_ALIGN;
			tail = len % SHDIR_ALIGN;
			if (direct && !aligned(view[i].iov_base, whole))
				direct = false;
			if (whole)
				iov[n++] = (struct iovec){ view[i].iov_base, whole };
			memset(bounce, 0, SHDIR_ALIGN);
			memcpy(bounce, (char *)view[i].iov_base + whole, tail);
			iov[n++] = (struct iovec){ bounce, SHDIR_ALIGN };
		} else {
			if (direct && !aligned(view[i].iov_base, len))
				direct = false;
			iov[n++] = (struct iovec){ view[i].iov_base, len };
		}
	}
	if (left) {
		ret = KVT_EBADLEN;
		goto out;
	}
	if (!direct && tail)
		iov[n - 1].iov_len = tail; /* buffered: no padding at all */
	if ((ret = mkdirs(sd->root_fd, rel)) < 0)
		goto out;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%llu", rel, (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&sd->tmp_seq, 1));
	fd = openat(sd->root_fd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = pwritev_all(fd, iov, n, 0);
	if (ret == 0 && direct && tail &&
	    ftruncate(fd, (off_t)((uint64_t)data_off + value_len)) < 0)
		ret = -errno;
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	fd = -1;
	if (ret == 0 && renameat(sd->root_fd, tmp, sd->root_fd, rel) < 0)
		ret = -errno;
	if (ret < 0)
		unlinkat(sd->root_fd, tmp, 0);
	else {
		A(sd->st.writes);
		AN(sd->st.write_bytes, value_len);
	}
out:
	if (ret < 0 && ret != KVT_EXISTS)
		A(sd->st.write_errors);
	if (hdr)
		kvt_mem_free(sd->mem, hdr, hcap);
	if (bounce)
		kvt_mem_free(sd->mem, bounce, SHDIR_ALIGN);
	if (iov)
		kvt_mem_free(sd->mem, iov, iov_cap * sizeof(*iov));
	return ret;
}

/* ------------------------------------------------------------------------
 * Reads
 */

void shdir_rd_close(struct shdir_rd *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	rd->fd = -1;
}

int shdir_rd_open(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
		  struct shdir_rd *rd)
{
	size_t hcap = KVT_ALIGN_UP(SHDIR_HDR_MAX, SHDIR_ALIGN);
	uint8_t *buf;
	struct stat st;
	ssize_t got;
	int ret;

	rd->fd = -1;
	if ((ret = shdir_relpath(ns_digest, key, rd->relpath)) < 0)
		return ret;
	rd->h.part_lens = rd->part_lens;
	rd->h.crcs = rd->crcs;
	rd->direct = sd->direct;
	/* Not a symlink, and never a FIFO or device that could block a pool
	 * thread on open or read: non-blocking, then a regular file only
	 * (anything else planted in the tree is a miss). */
	rd->fd = openat(sd->root_fd, rd->relpath,
			O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
				(rd->direct ? O_DIRECT : 0));
	if (rd->fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? KVT_MISS : -errno;
	if (fstat(rd->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ret = S_ISREG(st.st_mode) ? -errno : KVT_MISS;
		shdir_rd_close(rd);
		return ret;
	}
	rd->dev = st.st_dev;
	rd->ino = st.st_ino;
	rd->file_len = (uint64_t)st.st_size;
	buf = kvt_mem_alloc_aligned(sd->mem, SHDIR_ALIGN, hcap);
	if (!buf) {
		shdir_rd_close(rd);
		return -ENOMEM;
	}
	/* One aligned read of the first page; a header with many parts needs
	 * the rest (the parser says how much). */
	got = pread(rd->fd, buf, SHDIR_ALIGN, 0);
	ret = got < 0 ? -errno : shdir_hdr_parse(buf, (size_t)got, &rd->h);
	if (ret > 0 && (size_t)got == SHDIR_ALIGN) {
		size_t need = KVT_ALIGN_UP((size_t)ret, SHDIR_ALIGN);
		got = pread(rd->fd, buf, need, 0);
		ret = got < 0 ? -errno : shdir_hdr_parse(buf, (size_t)got, &rd->h);
	}
	kvt_mem_free(sd->mem, buf, hcap);
	if (ret > 0)
		ret = KVT_ECORRUPT; /* the file ends inside its header */
	if (ret == 0 && (!shdir_hdr_names(&rd->h, ns_digest, key) ||
			 rd->file_len != rd->h.data_off + rd->h.value_len))
		ret = KVT_ECORRUPT;
	if (ret == KVT_EVERSION)
		ret = KVT_ECORRUPT; /* a format we cannot read: a miss, like a bad file */
	if (ret < 0 && ret != KVT_ECORRUPT) {
		A(sd->st.read_errors);
		shdir_rd_close(rd);
	} else if (ret == KVT_ECORRUPT) {
		A(sd->st.corrupt);
	}
	return ret;
}

int shdir_rd_value(struct shdir *sd, struct shdir_rd *rd, const struct iovec *view,
		   unsigned view_count)
{
	struct iovec iov[DRAM_MAX_RUNS];
	uint64_t left = rd->h.value_len, off = rd->h.data_off;
	unsigned n = 0;
	bool direct = rd->direct;

	if (view_count > DRAM_MAX_RUNS)
		return KVT_EBADLEN;
	for (unsigned i = 0; i < view_count && left > 0; i++) {
		uint64_t len = view[i].iov_len < left ? view[i].iov_len : left;
		left -= len;
		if (left == 0 && direct) /* the tail: read the whole last page */
			len = KVT_ALIGN_UP(len, SHDIR_ALIGN) <= view[i].iov_len
				      ? KVT_ALIGN_UP(len, SHDIR_ALIGN)
				      : len;
		if (direct && !aligned(view[i].iov_base, len))
			direct = false;
		iov[n++] = (struct iovec){ view[i].iov_base, len };
	}
	if (left)
		return KVT_EBADLEN;
	if (!direct && rd->direct) {
		/* The view does not suit O_DIRECT: reopen buffered (same inode). */
		char proc[64];
		int fd;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", rd->fd);
		fd = open(proc, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			A(sd->st.read_errors);
			return -errno;
		}
		close(rd->fd);
		rd->fd = fd;
		rd->direct = false;
		left = rd->h.value_len;
		for (unsigned i = 0; i < n; i++) {
			if (iov[i].iov_len > left)
				iov[i].iov_len = left;
			left -= iov[i].iov_len;
		}
	}
	{
		struct iovec *p = iov;
		int cnt = (int)n;
		uint64_t want = rd->h.value_len, done = 0;
		while (cnt > 0 && done < want) {
			ssize_t r = preadv(rd->fd, p, cnt, (off_t)off);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				A(sd->st.read_errors);
				return -errno;
			}
			if (r == 0)
				break;
			off += (uint64_t)r;
			done += (uint64_t)r;
			while (cnt > 0 && (size_t)r >= p->iov_len) {
				r -= (ssize_t)p->iov_len;
				p++, cnt--;
			}
			if (cnt > 0 && r > 0) {
				p->iov_base = (char *)p->iov_base + r;
				p->iov_len -= (size_t)r;
			}
		}
		if (done < want) {
			A(sd->st.corrupt);
			return KVT_ECORRUPT; /* truncated under us */
		}
	}
	/* Every part's CRC over the view. */
	{
		unsigned vi = 0;
		uint64_t voff = 0;
		for (uint32_t p = 0; p < rd->h.part_count; p++) {
			uint64_t pl = rd->h.part_lens[p];
			uint32_t crc = 0;
			while (pl > 0) {
				uint64_t avail = view[vi].iov_len - voff,
					 k = pl < avail ? pl : avail;
				crc = kvt_crc32c(crc, (char *)view[vi].iov_base + voff, k);
				pl -= k;
				voff += k;
				if (voff == view[vi].iov_len)
					vi++, voff = 0;
			}
			if (crc != rd->h.crcs[p]) {
				A(sd->st.corrupt);
				return KVT_ECORRUPT;
			}
		}
	}
	A(sd->st.reads);
	AN(sd->st.read_bytes, rd->h.value_len);
	return KVT_OK;
}

void shdir_rd_bad(struct shdir *sd, struct shdir_rd *rd)
{
	struct stat st;
	if (sd->bad_hook)
		sd->bad_hook(sd->bad_ctx, rd->relpath);
	/* Only if the path still names what we read: a writer may have
	 * renamed a good block into place since (the window between this
	 * stat and the unlink is as small as POSIX lets it be). */
	if (fstatat(sd->root_fd, rd->relpath, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    st.st_dev == rd->dev && st.st_ino == rd->ino &&
	    unlinkat(sd->root_fd, rd->relpath, 0) == 0) {
		A(sd->st.bad_removed);
		kvt_logf(sd->log, KVT_LOG_WARN, "shared tier: removed bad block file %s",
			 rd->relpath);
	} else {
		A(sd->st.bad_kept);
	}
}

int shdir_remove(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key)
{
	char rel[SHDIR_RELPATH_MAX];
	int ret = shdir_relpath(ns_digest, key, rel);
	if (ret < 0)
		return ret;
	if (unlinkat(sd->root_fd, rel, 0) < 0)
		return errno == ENOENT || errno == ENOTDIR ? KVT_MISS : -errno;
	return KVT_OK;
}

/* ------------------------------------------------------------------------
 * Walks: clear and gc
 */

/* Remove the tree at dfd/name (a directory); count the files. */
static int64_t rm_tree(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int64_t n = 0;
	DIR *d;
	struct dirent *e;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0) {
			n++;
		} else if (errno == EISDIR || errno == EPERM) {
			int64_t k = rm_tree(fd, e->d_name);
			if (k > 0)
				n += k;
			unlinkat(fd, e->d_name, AT_REMOVEDIR);
		}
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
	return n;
}

/* Rename kvt1/<ns> out of the way (so new writes start a fresh tree at
 * once), then delete it. */
static int64_t clear_ns(struct shdir *sd, const char *nsx)
{
	char from[128], to[160];
	snprintf(from, sizeof(from), "kvt1/%s", nsx);
	snprintf(to, sizeof(to), "kvt1/.trash-%s-%d-%llu", nsx, (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&sd->tmp_seq, 1));
	if (renameat(sd->root_fd, from, sd->root_fd, to) < 0)
		return errno == ENOENT ? 0 : -errno;
	return rm_tree(sd->root_fd, to);
}

int64_t shdir_clear(struct shdir *sd, const uint8_t *ns_digest)
{
	char nsx[65];
	int64_t total = 0;
	if (ns_digest) {
		hex(nsx, ns_digest, 32);
		return clear_ns(sd, nsx);
	}
	int fd = openat(sd->root_fd, "kvt1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *e;
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (strlen(e->d_name) != 64)
			continue;
		int64_t k = clear_ns(sd, e->d_name);
		if (k > 0)
			total += k;
	}
	closedir(d);
	return total;
}

struct gc_walk {
	struct gcplan plan;
	bool first;               /* the plan's first walk: counts, the age limit */
	int64_t now_s;
	uint64_t max_age_s;
	struct kvt_shared_gc_result *res;
};

#define GC_TEMP_AGE_S 3600 /* a temp file this old lost its writer */

/* A block file the walk met, in the directory fd: counted and aged on the
 * first walk, then as the plan says (gcplan.h). */
static void gc_file(int fd, const char *name, const struct stat *st, struct gc_walk *w)
{
	uint64_t len = (uint64_t)st->st_size;

	if (w->first) {
		w->res->files++;
		w->res->bytes += len;
		if (w->max_age_s && w->now_s - st->st_mtime > (int64_t)w->max_age_s) {
			if (unlinkat(fd, name, 0) == 0) {
				w->res->removed_files++;
				w->res->removed_bytes += len;
			}
			return;
		}
	}
	if (gcplan_see(&w->plan, st->st_mtime, len) && unlinkat(fd, name, 0) == 0) {
		w->res->removed_files++;
		w->res->removed_bytes += len;
	}
}

/*
 * Visit the files under rel (depth: 0 = kvt1, 1 = ns, 2 = ab, 3 = cd).
 * Every directory is opened relative to its parent's descriptor with
 * O_NOFOLLOW, one component at a time, so a symlink swapped into the tree
 * is never followed (a path re-resolved from the root could cross one);
 * a file is removed by its name in the directory the walk holds open.
 */
static void gc_dir(int parent_fd, const char *name, int depth, struct gc_walk *w)
{
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' && depth < 3) {
			if (depth == 0 && !strncmp(e->d_name, ".trash-", 7)) {
				/* A clear that died half way: finish it. */
				if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				    w->now_s - st.st_mtime > GC_TEMP_AGE_S)
					rm_tree(fd, e->d_name);
			}
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (depth < 3) {
			gc_dir(fd, e->d_name, depth + 1, w);
			continue;
		}
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (strstr(e->d_name, ".tmp.")) {
			if (w->now_s - st.st_mtime > GC_TEMP_AGE_S &&
			    unlinkat(fd, e->d_name, 0) == 0)
				w->res->temp_removed++;
			continue;
		}
		gc_file(fd, e->d_name, &st, w);
	}
	closedir(d);
}

int kvt_shared_gc(const char *dir, uint64_t budget_bytes, uint64_t max_age_s,
		  struct kvt_shared_gc_result *out)
{
	struct kvt_shared_gc_result res = { 0 };
	struct gc_walk w = { .first = true, .max_age_s = max_age_s, .res = &res };
	int root_fd, ret;

	if (!dir)
		return KVT_ENULL;
	root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -errno;
	w.now_s = (int64_t)time(NULL);
	/* Over budget: oldest first (by mtime, which a read refreshes), found
	 * in a second walk, in bounded memory (gcplan.h). */
	ret = gcplan_init(&w.plan, budget_bytes, w.now_s);
	if (ret < 0) {
		close(root_fd);
		return ret;
	}
	do {
		gc_dir(root_fd, "kvt1", 0, &w);
		w.first = false;
	} while (gcplan_next(&w.plan));
	gcplan_free(&w.plan);
	close(root_fd);
	if (out)
		*out = res;
	return 0;
}

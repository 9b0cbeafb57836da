/*
 * test_seal.c - sealed namespaces (lib/seal.c): round trips, keys, what the
 * SSD files hold, and that any changed bit is a miss.
 *
 * 1. one part, every bit: flipping any single bit of a sealed part (header,
 *    nonce, ciphertext, tag) fails to open, and nothing is left in the
 *    destination; wrong key, key, part index or part count fail too.
 * 2. round trips through a store, byte-exact, 1 B .. 16 MiB, 1..300 parts,
 *    whole values and single parts; pinned gets and ranges are refused.
 * 4. threads: puts and gets of one sealed namespace from four threads at
 *    once (the pooled HKDF contexts, the key table), every byte checked.
 * 3. SSD: a known pattern put sealed is in no file of the store directory
 *    (and, as a control, is there when put to an unsealed namespace);
 *    after a restart the block opens with the right master key, misses
 *    with another, opens with the exported ns key; a bit flipped in the
 *    segment file, with the record's CRCs recomputed so that the SSD tier
 *    accepts it, is a miss counted as a tag failure.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seal.h"
#include "t.h"
#include "tstore.h"

static const char canary[] = "KVTIER-PLAINTEXT-CANARY-7f3a9";

static void master(uint8_t m[32], uint8_t seed)
{
	for (int i = 0; i < 32; i++)
		m[i] = (uint8_t)(seed * 31 + i);
}

/* 1. */
static void test_part_bits(void)
{
	struct kvt_mem mem;
	struct seal *sl;
	struct seal_key k = { 0 }, k2 = { 0 };
	struct kvt_key key = t_key(1), key2 = t_key(2);
	uint8_t m[32], plain[100], sealed[100 + SEAL_OVERHEAD], out[100];
	struct iovec sv = { sealed, sizeof(sealed) }, ov = { out, sizeof(out) };

	kvt_mem_init(&mem);
	T_OK(seal_open(&sl, &mem));
	master(m, 1);
	memset(k.digest, 0xd1, 32);
	T_OK(seal_derive_ns_key(sl, m, 32, k.digest, k.key));
	k2 = k;
	k2.key[0] ^= 1;
	T_RC(seal_derive_ns_key(sl, m, 31, k.digest, k2.key), KVT_EBADLEN);
	t_fill(plain, sizeof(plain), 5);
	T_OK(seal_part_encrypt(sl, &k, &key, 2, 3, plain, sizeof(plain), &sv, 1, 0));
	T_EQ_INT(sealed[0], SEAL_VERSION);
	T_ASSERT(memcmp(sealed + SEAL_HDR_LEN, plain, sizeof(plain)) != 0);
	T_OK(seal_part_decrypt(sl, &k, &key, 2, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0));
	T_EQ_MEM(out, plain, sizeof(plain));

	for (size_t bit = 0; bit < sizeof(sealed) * 8; bit++) {
		sealed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		memset(out, 0xee, sizeof(out));
		T_RC(seal_part_decrypt(sl, &k, &key, 2, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
		     KVT_MISS);
		for (size_t i = 0; i < sizeof(out); i++)
			if (out[i] != 0xee && out[i] != 0)
				T_FAIL("bit %zu: unauthenticated plaintext left at %zu", bit, i);
		sealed[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* What the AAD and the part key bind: each change is a miss. */
	T_RC(seal_part_decrypt(sl, &k2, &key, 2, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
	     KVT_MISS);
	T_RC(seal_part_decrypt(sl, &k, &key2, 2, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
	     KVT_MISS);
	T_RC(seal_part_decrypt(sl, &k, &key, 1, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
	     KVT_MISS);
	T_RC(seal_part_decrypt(sl, &k, &key, 2, 4, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
	     KVT_MISS);
	k2 = k;
	k2.digest[31] ^= 0x80;
	T_RC(seal_part_decrypt(sl, &k2, &key, 2, 3, &sv, 1, 0, sizeof(sealed), &ov, 1, 0),
	     KVT_MISS);
	T_RC(seal_part_decrypt(sl, &k, &key, 2, 3, &sv, 1, 0, sizeof(sealed) - 1, &ov, 1, 0),
	     KVT_MISS);
	/* Split source and destination (runs) work the same. */
	{
		struct iovec src3[3] = { { sealed, 5 }, { sealed + 5, 50 },
					 { sealed + 55, sizeof(sealed) - 55 } };
		struct iovec dst2[2] = { { out, 33 }, { out + 33, 67 } };
		memset(out, 0, sizeof(out));
		T_OK(seal_part_decrypt(sl, &k, &key, 2, 3, src3, 3, 0, sizeof(sealed), dst2, 2, 0));
		T_EQ_MEM(out, plain, sizeof(plain));
		T_OK(seal_part_encrypt(sl, &k, &key, 0, 1, plain, sizeof(plain), src3, 3, 0));
		T_OK(seal_part_decrypt(sl, &k, &key, 0, 1, &sv, 1, 0, sizeof(sealed), dst2, 2, 0));
		T_EQ_MEM(out, plain, sizeof(plain));
	}
	seal_close(sl);
	T_EQ_U64((uint64_t)atomic_load(&mem.bytes), 0);
}

static int put_parts(struct kvt_store *s, uint32_t ns, uint64_t id, const uint8_t *buf,
		     size_t len, unsigned parts)
{
	struct iovec *iov = calloc(parts, sizeof(*iov));
	struct kvt_key k = t_key(id);
	size_t off = 0;
	int rc;
	T_ASSERT(iov);
	for (unsigned i = 0; i < parts; i++) {
		size_t n = i + 1 == parts ? len - off : len / parts;
		iov[i].iov_base = (void *)(buf + off);
		iov[i].iov_len = n;
		off += n;
	}
	rc = kvt_put(s, ns, &k, iov, parts);
	free(iov);
	return rc;
}

/* 2. */
static void test_round_trips(void)
{
	static const size_t lens[] = { 1, 2, 4095, 4096, 65536 + 7, 1u << 20, 3000001, 16u << 20 };
	static const unsigned parts[] = { 1, 3, 300 };
	struct kvt_store *s = t_store_open("dram.capacity", "160M", "dram.shards", "1",
					   "dram.chunk", "4K", "dram.prefault", "off", NULL);
	uint32_t ns = t_ns(s, "sealed"), plain_ns = t_ns(s, "plain");
	uint8_t m[32], *buf = malloc(16u << 20), *out = malloc((16u << 20) + 64);
	uint64_t id = 100, vlen;
	T_ASSERT(buf && out);
	master(m, 2);
	T_RC(kvt_ns_set_seal_key(s, ns, m, 16), KVT_EBADLEN);
	T_RC(kvt_ns_set_seal_key(s, 999, m, 32), KVT_ENONS);
	T_OK(kvt_ns_set_seal_key(s, ns, m, 32));
	T_EQ_U64(t_stat(s, "seal.namespaces"), 1);

	for (size_t li = 0; li < KVT_ARRAY_LEN(lens); li++) {
		for (size_t pi = 0; pi < KVT_ARRAY_LEN(parts); pi++, id++) {
			size_t len = lens[li];
			unsigned np = parts[pi] > len ? (unsigned)len : parts[pi];
			struct kvt_key k = t_key(id);
			t_fill(buf, len, id);
			T_RC(put_parts(s, ns, id, buf, len, np), KVT_OK);
			T_RC(put_parts(s, ns, id, buf, len, np), KVT_EXISTS);
			memset(out, 0xaa, len + 64);
			vlen = 0;
			T_RC(kvt_get(s, ns, &k, out, len + 64, &vlen), KVT_OK);
			T_EQ_U64(vlen, len);
			T_EQ_MEM(out, buf, len);
			/* Too small a buffer: told the plaintext length. */
			if (len > 1)
				T_RC(kvt_get(s, ns, &k, out, len - 1, &vlen), KVT_EBUFSMALL);
			/* The last part alone. */
			if (np > 1) {
				struct kvt_req r = { .op = KVT_OP_GET, .flags = KVT_F_PART,
						     .ns = ns, .key = k, .part = np - 1,
						     .iov_count = 1 };
				struct iovec iov = { out, len };
				struct kvt_queue *q;
				struct kvt_req *rp = &r, *got;
				size_t off = (size_t)(np - 1) * (len / np);
				r.iov = &iov;
				T_OK(kvt_queue_create(s, &q));
				T_RC(kvt_submit(q, &rp, 1), 1);
				T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
				T_RC(r.status, KVT_OK);
				T_EQ_U64(r.length, len - off);
				T_EQ_INT(r.value_flags, KVT_F_SEALED);
				T_EQ_MEM(out, buf + off, len - off);
				T_OK(kvt_queue_destroy(q));
			}
			T_OK(kvt_delete(s, ns, &k)); /* keep DRAM room */
		}
	}
	T_GE_INT((int64_t)t_stat(s, "seal.puts"), 20);
	T_EQ_U64(t_stat(s, "seal.tag_failures"), 0);

	/* Refused on a sealed namespace, allowed elsewhere. */
	{
		struct kvt_key k = t_key(1);
		struct kvt_queue *q;
		struct kvt_req pin = { .op = KVT_OP_GET_PINNED, .ns = ns, .key = k };
		struct kvt_req rng = { .op = KVT_OP_GET, .flags = KVT_F_RANGE, .ns = ns, .key = k,
				       .off = 0, .len = 1, .iov_count = 1 };
		struct kvt_req pre = { .op = KVT_OP_PUT, .flags = KVT_F_SEALED, .ns = ns, .key = k,
				       .iov_count = 1 };
		struct iovec iov = { out, 16 };
		struct kvt_req *rp;
		rng.iov = &iov;
		pre.iov = &iov;
		T_OK(kvt_queue_create(s, &q));
		rp = &pin;
		T_RC(kvt_submit(q, &rp, 1), KVT_EBADOP);
		rp = &rng;
		T_RC(kvt_submit(q, &rp, 1), KVT_EBADOP);
		rp = &pre;
		T_RC(kvt_submit(q, &rp, 1), KVT_EBADOP);
		T_OK(kvt_queue_destroy(q));
	}
	/* Plain CRCs supplied with a sealed put are checked. */
	{
		struct kvt_key k = t_key(2);
		struct iovec iov = { buf, 1000 };
		uint32_t crc = kvt_crc32c(0, buf, 1000) ^ 1;
		struct kvt_req r = { .op = KVT_OP_PUT, .flags = KVT_F_CRC, .ns = ns, .key = k,
				     .iov = &iov, .iov_count = 1, .crcs = &crc };
		struct kvt_req *rp = &r, *got;
		struct kvt_queue *q;
		T_OK(kvt_queue_create(s, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
		T_RC(r.status, KVT_ECORRUPT);
		crc ^= 1;
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
		T_RC(r.status, KVT_OK);
		T_OK(kvt_queue_destroy(q));
	}
	/* An unsealed namespace still stores what it is given. */
	T_RC(put_parts(s, plain_ns, 7, buf, 100, 1), KVT_OK);
	{
		struct kvt_key k = t_key(7);
		T_RC(kvt_get(s, plain_ns, &k, out, 100, &vlen), KVT_OK);
		T_EQ_MEM(out, buf, 100);
	}
	kvt_store_destroy(s);
	free(buf);
	free(out);
}


static void fill_canary(uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)canary[i % (sizeof(canary) - 1)];
}

/* Flip one bit of the value of the first PUT record with ns digest ns_digest in
 * any segment file under dir, then fix the part's CRC and the header CRC so
 * that only the GCM tag can notice.  Returns true if it found one. */
static bool flip_in_segments(const char *dir, uint64_t value_bit)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool done = false;
	T_ASSERT(d);
	while (!done && (e = readdir(d))) {
		char path[4096];
		struct stat st;
		uint8_t *b;
		int fd;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			done = flip_in_segments(path, value_bit);
			continue;
		}
		if (!S_ISREG(st.st_mode) || st.st_size < 8192)
			continue;
		b = malloc((size_t)st.st_size);
		fd = open(path, O_RDWR);
		T_ASSERT(b && fd >= 0);
		T_EQ_INT(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
		for (size_t off = 4096; !done && off + 4096 <= (size_t)st.st_size; off += 4096) {
			uint8_t *h = b + off;
			uint32_t hdr_len, type, parts, flags, crc;
			uint64_t p0len, p0crc_off, voff;
			if (memcmp(h, "KVR1", 4) != 0)
				continue;
			memcpy(&hdr_len, h + 8, 4);
			memcpy(&type, h + 16, 4);
			memcpy(&parts, h + 20, 4);
			memcpy(&flags, h + 28, 4);
			if (!(flags & 1) || hdr_len > 20480 || off + hdr_len > (size_t)st.st_size)
				continue;
			memcpy(&p0len, h + 160, 8);
			voff = off + hdr_len;
			if (value_bit / 8 >= p0len || voff + p0len > (size_t)st.st_size)
				continue;
			b[voff + value_bit / 8] ^= (uint8_t)(1u << (value_bit % 8));
			crc = kvt_crc32c(0, b + voff, p0len);
			p0crc_off = 160 + 8;
			memcpy(h + p0crc_off, &crc, 4);
			memset(h + 12, 0, 4);
			crc = kvt_crc32c(0, h, hdr_len);
			memcpy(h + 12, &crc, 4);
			T_EQ_INT(pwrite(fd, h, hdr_len, (off_t)off), hdr_len);
			T_EQ_INT(pwrite(fd, b + voff, p0len, (off_t)voff), (int64_t)p0len);
			done = true;
			(void)type;
			(void)parts;
		}
		T_OK(fsync(fd));
		close(fd);
		free(b);
	}
	closedir(d);
	return done;
}

/* 3. */
static void test_ssd(void)
{
	char *dir = t_mkdtemp();
	const char *io = getenv("KVT_TEST_IO") ? getenv("KVT_TEST_IO") : "auto";
	struct kvt_store *s;
	uint8_t m[32], other[32], nskey[32], *buf = malloc(1u << 20), *out = malloc(1u << 20);
	struct kvt_key k = t_key(42);
	uint32_t ns, plain_ns;
	uint64_t vlen;

#define OPEN()                                                                               \
	t_store_open("path", dir, "dram.capacity", "32M", "dram.chunk", "64K",                \
		     "dram.prefault", "off", "ssd.capacity", "64M", "ssd.segment", "4M",      \
		     "ssd.admission", "always", "ssd.io", io, NULL)
	T_ASSERT(buf && out);
	master(m, 3);
	master(other, 4);
	fill_canary(buf, 1u << 20);

	s = OPEN();
	ns = t_ns(s, "sealed");
	plain_ns = t_ns(s, "plain");
	T_OK(kvt_ns_set_seal_key(s, ns, m, 32));
	T_RC(put_parts(s, ns, 42, buf, 1u << 20, 4), KVT_OK);
	T_OK(kvt_flush(s));
	T_EQ_U64(t_stat(s, "ssd.blocks"), 1);
	T_OK(kvt_ns_seal_key_export(s, ns, nskey));
	T_RC(kvt_ns_seal_key_export(s, plain_ns, nskey + 0), KVT_MISS);
	T_OK(kvt_ns_seal_key_export(s, ns, nskey));
	kvt_store_destroy(s);
	T_ASSERT(!t_dir_contains(dir, canary));

	/* Restart: the block comes from SSD. */
	s = OPEN();
	T_EQ_U64(t_stat(s, "ssd.blocks"), 1);
	/* Without a key the namespace is not sealed: the ciphertext, flagged. */
	{
		struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = k, .iov_count = 1 };
		struct iovec iov = { out, 1u << 20 };
		struct kvt_req *rp = &r, *got;
		struct kvt_queue *q;
		r.iov = &iov;
		T_OK(kvt_queue_create(s, &q));
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
		T_RC(r.status, KVT_EBUFSMALL); /* 4 parts of 33 more bytes each */
		T_EQ_U64(r.value_len, (1u << 20) + 4 * SEAL_OVERHEAD);
		T_OK(kvt_queue_destroy(q));
	}
	/* Another tenant's master key: a miss, counted. */
	T_OK(kvt_ns_set_seal_key(s, ns, other, 32));
	T_RC(kvt_get(s, ns, &k, out, 1u << 20, &vlen), KVT_MISS);
	T_EQ_U64(t_stat(s, "seal.tag_failures"), 1);
	/* The owner's ns key, handed over: opens. */
	T_OK(kvt_ns_set_seal_ns_key(s, ns, nskey));
	memset(out, 0, 1u << 20);
	T_RC(kvt_get(s, ns, &k, out, 1u << 20, &vlen), KVT_OK);
	T_EQ_MEM(out, buf, 1u << 20);
	/* Control: the same bytes unsealed do reach the files. */
	T_RC(put_parts(s, plain_ns, 43, buf, 65536, 1), KVT_OK);
	T_OK(kvt_flush(s));
	kvt_store_destroy(s);
	T_ASSERT(t_dir_contains(dir, canary));

	/* A bit flipped on disk, CRCs made right again: the tag catches it. */
	for (uint64_t bit = 0; bit < 3; bit++) {
		static const uint64_t bits[] = { 8 * 5 + 3 /* nonce */, 8 * 5000 /* ciphertext */,
						 8 * ((1u << 18) + SEAL_OVERHEAD - 2) /* tag */ };
		T_ASSERT(flip_in_segments(dir, bits[bit]));
		s = OPEN();
		T_OK(kvt_ns_set_seal_key(s, ns, m, 32));
		memset(out, 0x55, 1u << 20);
		T_RC(kvt_get(s, ns, &k, out, 1u << 20, &vlen), KVT_MISS);
		T_EQ_U64(t_stat(s, "seal.tag_failures"), 1);
		T_ASSERT(memmem(out, 1u << 20, canary, sizeof(canary) - 1) == NULL);
		kvt_store_destroy(s);
		T_ASSERT(flip_in_segments(dir, bits[bit])); /* flip back: opens again */
		s = OPEN();
		T_OK(kvt_ns_set_seal_key(s, ns, m, 32));
		T_RC(kvt_get(s, ns, &k, out, 1u << 20, &vlen), KVT_OK);
		T_EQ_MEM(out, buf, 1u << 20);
		kvt_store_destroy(s);
	}
#undef OPEN
	t_rmtree(dir);
	free(dir);
	free(buf);
	free(out);
}

/* 4. */
struct thr_arg {
	struct kvt_store *s;
	uint32_t ns;
	uint64_t base;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	uint8_t *buf = malloc(65536), *out = malloc(65536);
	uint64_t vlen;
	T_ASSERT(buf && out);
	for (uint64_t i = a->base; i < a->base + 64; i++) {
		struct kvt_key k = t_key(i);
		t_fill(buf, 65536, i);
		T_RC(put_parts(a->s, a->ns, i, buf, 65536, 2), KVT_OK);
		memset(out, 0, 65536);
		T_RC(kvt_get(a->s, a->ns, &k, out, 65536, &vlen), KVT_OK);
		T_EQ_MEM(out, buf, 65536);
	}
	free(buf);
	free(out);
	return NULL;
}

static void test_threads(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "64M", "dram.prefault", "off", NULL);
	struct thr_arg args[4];
	pthread_t t[4];
	uint8_t m[32];
	uint32_t ns = t_ns(s, "threads");
	master(m, 9);
	T_OK(kvt_ns_set_seal_key(s, ns, m, 32));
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thr_arg){ s, ns, 10000 + 1000 * (uint64_t)i };
		T_OK(pthread_create(&t[i], NULL, thr_main, &args[i]));
	}
	for (int i = 0; i < 4; i++)
		T_OK(pthread_join(t[i], NULL));
	T_EQ_U64(t_stat(s, "seal.puts"), 256);
	T_EQ_U64(t_stat(s, "seal.gets"), 256);
	T_EQ_U64(t_stat(s, "seal.tag_failures"), 0);
	kvt_store_destroy(s);
}

int main(void)
{
	test_threads();
	test_part_bits();
	test_round_trips();
	test_ssd();
	return 0;
}

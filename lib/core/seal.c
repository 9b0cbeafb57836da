/*
 * seal.c - sealed namespaces: AES-256-GCM of every part of a block, done by
 * the library on the engine's side, so that no tier below DRAM (SSD files, a
 * remote kvtierd, the wire) holds plaintext or any key.
 *
 * Owns: the per-store table of namespace keys (struct seal), the key
 * derivations (HKDF-SHA-256 through OpenSSL's EVP_KDF), the sealed part
 * layout (seal.h), and sealed puts and gets against the DRAM tier.
 *
 * Where it sits: store.c asks seal_key_of() for every put and get; for a
 * sealed namespace it calls seal_put / seal_get / seal_read instead of
 * dram_put / dram_get / dram_read_item.  Everything below DRAM sees opaque
 * bytes flagged KVT_F_SEALED, whose CRC32Cs are over the ciphertext.
 *
 * Invariants:
 *   - a put is one pass: AES-GCM reads the caller's part and writes the
 *     DRAM reservation; a get is one pass the other way;
 *   - every part key encrypts exactly one message (its salt is a fresh
 *     16-byte random nonce), so the fixed GCM IV is never reused under a
 *     key (doc/security.md, "Nonces");
 *   - a get hands back plaintext only after the part's tag verified; a
 *     failed part wipes what it wrote and the get is a miss;
 *   - keys in the table are never freed before seal_close, so readers
 *     take no lock.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "seal.h"
#include "le.h"

#define SEAL_PAGE_SHIFT NS_PAGE_SHIFT
#define SEAL_PAGE_LEN NS_PAGE_LEN
#define SEAL_AAD_MAX (1 + 32 + 1 + KVT_KEY_MAX + 4 + 4 + 8)
#define SEAL_INFO_MAX (32 + 1 + KVT_KEY_MAX + 4)
#define SEAL_CHUNK_MAX (1u << 30) /* EVP lengths are int */

static const uint8_t seal_iv[12]; /* zeros: each part key is used once */
static const char seal_info_ns[] = "kvtier-seal-v1 ns";
static const char seal_info_part[] = "kvtier-seal-v1 part";

struct seal {
	struct kvt_mem *mem;
	EVP_KDF *hkdf;                 /* fetched once: implicit fetches per part */
	EVP_CIPHER *gcm;               /* cost more than the HKDF itself */
	pthread_mutex_t lock;          /* guards set and the page allocation */
	/* pages[ns >> SHIFT][ns & (LEN-1)]: written under lock, read without */
	_Atomic(struct seal_key *) *_Atomic pages[NS_PAGES];
	_Atomic uint32_t namespaces;   /* sealed namespaces */
	_Atomic uint64_t puts, put_bytes;   /* sealed puts published; plaintext bytes */
	_Atomic uint64_t gets, get_bytes;   /* gets opened; plaintext bytes handed out */
	_Atomic uint64_t tag_failures;      /* parts whose tag (or layout) failed: misses */
	_Atomic uint64_t unsealed;          /* blocks without KVT_F_SEALED in a sealed ns */
	_Atomic uint64_t wt_copies;         /* write-throughs sealed into a buffer */
};

/* ------------------------------------------------------------------------
 * A cursor over an iovec array: where the next byte goes or comes from.
 */
struct cur {
	const struct iovec *v;
	unsigned n, i;
	size_t off; /* into v[i] */
};

static void cur_init(struct cur *c, const struct iovec *v, unsigned n, uint64_t off)
{
	c->v = v;
	c->n = n;
	c->i = 0;
	while (c->i < n && off >= v[c->i].iov_len)
		off -= v[c->i++].iov_len;
	c->off = (size_t)off;
}

/* Contiguous bytes at the cursor (0 at the end). */
static size_t cur_span(const struct cur *c, uint8_t **p)
{
	if (c->i >= c->n)
		return 0;
	*p = (uint8_t *)c->v[c->i].iov_base + c->off;
	return c->v[c->i].iov_len - c->off;
}

static void cur_adv(struct cur *c, size_t len)
{
	c->off += len;
	while (c->i < c->n && c->off >= c->v[c->i].iov_len) {
		c->off -= c->v[c->i].iov_len;
		c->i++;
	}
}

/* Copy len bytes into (to) or out of the cursor's memory. */
static void cur_copy(struct cur *c, uint8_t *mem, size_t len, bool to)
{
	while (len) {
		uint8_t *p = NULL;
		size_t n = cur_span(c, &p);
		if (!n)
			return;
		if (n > len)
			n = len;
		if (to)
			memcpy(p, mem, n);
		else
			memcpy(mem, p, n);
		mem += n;
		len -= n;
		cur_adv(c, n);
	}
}

static void cur_zero(struct cur *c, uint64_t len)
{
	while (len) {
		uint8_t *p = NULL;
		size_t n = cur_span(c, &p);
		if (!n)
			return;
		if (n > len)
			n = (size_t)len;
		OPENSSL_cleanse(p, n);
		len -= n;
		cur_adv(c, n);
	}
}

static uint64_t iov_total(const struct iovec *v, unsigned n)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

/* ------------------------------------------------------------------------
 * Table and key derivation
 */

int seal_open(struct seal **out, struct kvt_mem *mem)
{
	struct seal *sl = kvt_mem_calloc(mem, 1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	sl->mem = mem;
	sl->hkdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
	sl->gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	if (!sl->hkdf || !sl->gcm || pthread_mutex_init(&sl->lock, NULL) != 0) {
		EVP_KDF_free(sl->hkdf);
		EVP_CIPHER_free(sl->gcm);
		kvt_mem_free(mem, sl, sizeof(*sl));
		return -ENOMEM;
	}
	*out = sl;
	return 0;
}

static void seal_key_free(struct seal *sl, struct seal_key *k)
{
	while (k) {
		struct seal_key *older = k->older;
		for (unsigned i = 0; i < k->pool_count; i++)
			EVP_KDF_CTX_free(k->pool[i]);
		if (k->pooled)
			pthread_mutex_destroy(&k->pool_lock);
		OPENSSL_cleanse(k, sizeof(*k));
		kvt_mem_free(sl->mem, k, sizeof(*k));
		k = older;
	}
}

void seal_close(struct seal *sl)
{
	if (!sl)
		return;
	for (unsigned p = 0; p < NS_PAGES; p++) {
		_Atomic(struct seal_key *) *page = atomic_load(&sl->pages[p]);
		if (!page)
			continue;
		for (unsigned i = 0; i < SEAL_PAGE_LEN; i++)
			seal_key_free(sl, atomic_load(&page[i]));
		kvt_mem_free(sl->mem, (void *)page, SEAL_PAGE_LEN * sizeof(*page));
	}
	pthread_mutex_destroy(&sl->lock);
	EVP_KDF_free(sl->hkdf);
	EVP_CIPHER_free(sl->gcm);
	kvt_mem_free(sl->mem, sl, sizeof(*sl));
}

/* HKDF-SHA-256 (extract and expand), out_len bytes.  0 or -ENOMEM. */
static int seal_hkdf(struct seal *sl, const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
		     size_t salt_len, const uint8_t *info, size_t info_len, uint8_t *out,
		     size_t out_len)
{
	EVP_KDF_CTX *kc = EVP_KDF_CTX_new(sl->hkdf);
	OSSL_PARAM params[5], *p = params;
	int ok;
	if (!kc)
		return -ENOMEM;
	*p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
	if (salt_len)
		*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
							 salt_len);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	*p = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(kc, out, out_len, params);
	EVP_KDF_CTX_free(kc);
	return ok > 0 ? 0 : -ENOMEM;
}

int seal_derive_ns_key(struct seal *sl, const uint8_t *master, size_t len,
		       const uint8_t digest[32], uint8_t out[SEAL_KEY_LEN])
{
	uint8_t info[sizeof(seal_info_ns) - 1 + 32];
	if (len < SEAL_MASTER_MIN || len > SEAL_MASTER_MAX)
		return KVT_EBADLEN;
	memcpy(info, seal_info_ns, sizeof(seal_info_ns) - 1);
	memcpy(info + sizeof(seal_info_ns) - 1, digest, 32);
	return seal_hkdf(sl, master, len, NULL, 0, info, sizeof(info), out, SEAL_KEY_LEN);
}

int seal_set_key(struct seal *sl, uint32_t ns, const uint8_t digest[32],
		 const uint8_t key[SEAL_KEY_LEN])
{
	unsigned pg = ns >> SEAL_PAGE_SHIFT;
	_Atomic(struct seal_key *) *page;
	struct seal_key *k, *old;
	if (pg >= NS_PAGES)
		return KVT_ENONS;
	k = kvt_mem_calloc(sl->mem, 1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	memcpy(k->key, key, SEAL_KEY_LEN);
	memcpy(k->digest, digest, 32);
	if (pthread_mutex_init(&k->pool_lock, NULL) != 0) {
		kvt_mem_free(sl->mem, k, sizeof(*k));
		return -ENOMEM;
	}
	k->pooled = true;
	pthread_mutex_lock(&sl->lock);
	page = atomic_load(&sl->pages[pg]);
	if (!page) {
		page = kvt_mem_calloc(sl->mem, SEAL_PAGE_LEN, sizeof(*page));
		if (!page) {
			pthread_mutex_unlock(&sl->lock);
			seal_key_free(sl, k);
			return -ENOMEM;
		}
		atomic_store(&sl->pages[pg], page);
	}
	old = atomic_load(&page[ns & (SEAL_PAGE_LEN - 1)]);
	k->older = old; /* kept: a reader may still be using it */
	atomic_store(&page[ns & (SEAL_PAGE_LEN - 1)], k);
	if (!old)
		atomic_fetch_add(&sl->namespaces, 1);
	pthread_mutex_unlock(&sl->lock);
	return 0;
}

const struct seal_key *seal_key_of(struct seal *sl, uint32_t ns)
{
	_Atomic(struct seal_key *) *page;
	if (!sl || KVT_LIKELY(atomic_load_explicit(&sl->namespaces, memory_order_acquire) == 0))
		return NULL;
	if ((ns >> SEAL_PAGE_SHIFT) >= NS_PAGES)
		return NULL;
	page = atomic_load_explicit(&sl->pages[ns >> SEAL_PAGE_SHIFT], memory_order_acquire);
	if (!page)
		return NULL;
	return atomic_load_explicit(&page[ns & (SEAL_PAGE_LEN - 1)], memory_order_acquire);
}

/* ------------------------------------------------------------------------
 * One part
 */

static size_t seal_aad(uint8_t *a, const struct seal_key *k, const struct kvt_key *key,
		       uint32_t part, uint32_t part_count, uint64_t plain_len)
{
	size_t n = 0;
	a[n++] = SEAL_VERSION;
	memcpy(a + n, k->digest, 32);
	n += 32;
	a[n++] = (uint8_t)key->len;
	memcpy(a + n, key->bytes, key->len);
	n += key->len;
	le_put32(a + n, part);
	le_put32(a + n + 4, part_count);
	le_put64(a + n + 8, plain_len);
	return n + 16;
}

/* An HKDF context keyed with k's ns key and SHA-256: from k's pool, or new
 * (setting the digest fetches SHA-256 and HMAC: several µs, more than the
 * derivation itself; OpenSSL 3.0 cannot dup an HKDF context). */
static EVP_KDF_CTX *seal_kdf_take(struct seal *sl, struct seal_key *k)
{
	EVP_KDF_CTX *kc = NULL;
	pthread_mutex_lock(&k->pool_lock);
	if (k->pool_count)
		kc = k->pool[--k->pool_count];
	pthread_mutex_unlock(&k->pool_lock);
	if (!kc) {
		OSSL_PARAM params[3] = {
			OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
			OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, k->key, SEAL_KEY_LEN),
			OSSL_PARAM_construct_end(),
		};
		kc = EVP_KDF_CTX_new(sl->hkdf);
		if (kc && EVP_KDF_CTX_set_params(kc, params) != 1) {
			EVP_KDF_CTX_free(kc);
			kc = NULL;
		}
	}
	return kc;
}

static void seal_kdf_give(struct seal_key *k, EVP_KDF_CTX *kc)
{
	if (!kc)
		return;
	pthread_mutex_lock(&k->pool_lock);
	if (k->pool_count < SEAL_KDF_POOL) {
		k->pool[k->pool_count++] = kc;
		kc = NULL;
	}
	pthread_mutex_unlock(&k->pool_lock);
	EVP_KDF_CTX_free(kc); /* NULL: kept */
}

/* The part key for nonce, into out.  0 or -ENOMEM. */
static int seal_part_key(struct seal *sl, const struct seal_key *ck, const uint8_t *nonce,
			 const struct kvt_key *key, uint32_t part, uint8_t out[SEAL_KEY_LEN])
{
	/* The pool is the one mutable part of a key (behind its own lock). */
	struct seal_key *k = (struct seal_key *)ck;
	uint8_t info[sizeof(seal_info_part) - 1 + 1 + KVT_KEY_MAX + 4];
	size_t n = sizeof(seal_info_part) - 1;
	memcpy(info, seal_info_part, n);
	info[n++] = (uint8_t)key->len;
	memcpy(info + n, key->bytes, key->len);
	n += key->len;
	le_put32(info + n, part);
	if (!k->pooled) /* a key made by hand (tests) */
		return seal_hkdf(sl, k->key, SEAL_KEY_LEN, nonce, SEAL_NONCE_LEN, info, n + 4, out,
				 SEAL_KEY_LEN);
	{
		EVP_KDF_CTX *kc = seal_kdf_take(sl, k);
		OSSL_PARAM params[3] = {
			OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)nonce,
							  SEAL_NONCE_LEN),
			OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n + 4),
			OSSL_PARAM_construct_end(),
		};
		int ok = kc && EVP_KDF_derive(kc, out, SEAL_KEY_LEN, params) == 1;
		seal_kdf_give(k, kc);
		return ok ? 0 : -ENOMEM;
	}
}

int seal_part_encrypt(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		      uint32_t part, uint32_t part_count, const void *plain, uint64_t len,
		      const struct iovec *dst, unsigned dst_count, uint64_t dst_off)
{
	uint8_t hdr[SEAL_HDR_LEN], pk[SEAL_KEY_LEN], aad[SEAL_AAD_MAX], tag[SEAL_TAG_LEN];
	const uint8_t *in = plain;
	EVP_CIPHER_CTX *c;
	struct cur dc;
	int outl, ret = -ENOMEM;

	hdr[0] = SEAL_VERSION;
	if (RAND_bytes(hdr + 1, SEAL_NONCE_LEN) != 1)
		return -ENOMEM;
	if (seal_part_key(sl, k, hdr + 1, key, part, pk) < 0)
		return -ENOMEM;
	c = EVP_CIPHER_CTX_new();
	if (!c)
		goto out;
	if (EVP_EncryptInit_ex(c, sl->gcm, NULL, pk, seal_iv) != 1)
		goto out;
	if (EVP_EncryptUpdate(c, NULL, &outl, aad,
			      (int)seal_aad(aad, k, key, part, part_count, len)) != 1)
		goto out;
	cur_init(&dc, dst, dst_count, dst_off);
	cur_copy(&dc, hdr, sizeof(hdr), true);
	while (len) {
		uint8_t *p = NULL;
		size_t n = cur_span(&dc, &p);
		if (n > len)
			n = (size_t)len;
		if (n > SEAL_CHUNK_MAX)
			n = SEAL_CHUNK_MAX;
		if (!n || EVP_EncryptUpdate(c, p, &outl, in, (int)n) != 1 || (size_t)outl != n)
			goto out;
		in += n;
		len -= n;
		cur_adv(&dc, n);
	}
	if (EVP_EncryptFinal_ex(c, tag, &outl) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN, tag) != 1)
		goto out;
	cur_copy(&dc, tag, sizeof(tag), true);
	ret = 0;
out:
	OPENSSL_cleanse(pk, sizeof(pk));
	EVP_CIPHER_CTX_free(c);
	return ret;
}

int seal_part_decrypt(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		      uint32_t part, uint32_t part_count, const struct iovec *src,
		      unsigned src_count, uint64_t src_off, uint64_t sealed_len,
		      const struct iovec *dst, unsigned dst_count, uint64_t dst_off)
{
	uint8_t hdr[SEAL_HDR_LEN], pk[SEAL_KEY_LEN], aad[SEAL_AAD_MAX], tag[SEAL_TAG_LEN];
	EVP_CIPHER_CTX *c = NULL;
	struct cur sc, dc;
	uint64_t len, left;
	int outl, ret = KVT_MISS;

	if (sealed_len <= SEAL_OVERHEAD)
		return KVT_MISS;
	len = left = sealed_len - SEAL_OVERHEAD;
	cur_init(&sc, src, src_count, src_off);
	cur_copy(&sc, hdr, sizeof(hdr), false);
	if (hdr[0] != SEAL_VERSION)
		return KVT_MISS;
	if (seal_part_key(sl, k, hdr + 1, key, part, pk) < 0)
		return -ENOMEM;
	c = EVP_CIPHER_CTX_new();
	if (!c ||
	    EVP_DecryptInit_ex(c, sl->gcm, NULL, pk, seal_iv) != 1 ||
	    EVP_DecryptUpdate(c, NULL, &outl, aad,
			      (int)seal_aad(aad, k, key, part, part_count, len)) != 1) {
		ret = -ENOMEM;
		goto out;
	}
	cur_init(&dc, dst, dst_count, dst_off);
	while (left) {
		uint8_t *in = NULL, *outp = NULL;
		size_t n = cur_span(&sc, &in), m = cur_span(&dc, &outp);
		if (m < n)
			n = m;
		if (n > left)
			n = (size_t)left;
		if (n > SEAL_CHUNK_MAX)
			n = SEAL_CHUNK_MAX;
		if (!n || EVP_DecryptUpdate(c, outp, &outl, in, (int)n) != 1 || (size_t)outl != n)
			goto wipe;
		left -= n;
		cur_adv(&sc, n);
		cur_adv(&dc, n);
	}
	cur_copy(&sc, tag, sizeof(tag), false);
	if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN, tag) != 1 ||
	    EVP_DecryptFinal_ex(c, tag, &outl) != 1)
		goto wipe;
	ret = 0;
	goto out;
wipe:
	/* Never leave unauthenticated plaintext in the caller's buffer. */
	cur_init(&dc, dst, dst_count, dst_off);
	cur_zero(&dc, len - left);
out:
	OPENSSL_cleanse(pk, sizeof(pk));
	EVP_CIPHER_CTX_free(c);
	return ret;
}

/* ------------------------------------------------------------------------
 * Puts
 */

int seal_put(struct seal *sl, const struct seal_key *k, struct dram *d, uint32_t ns,
	     const struct kvt_key *key, const struct iovec *parts, unsigned part_count,
	     const uint32_t *crcs, struct dram_item **keep)
{
	uint64_t lens[KVT_PARTS_MAX], total = 0, off = 0;
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *it;
	unsigned vc = 0;
	int ret;

	if (keep)
		*keep = NULL;
	for (unsigned i = 0; i < part_count; i++) {
		if (crcs && kvt_crc32c(0, parts[i].iov_base, parts[i].iov_len) != crcs[i])
			return KVT_ECORRUPT;
		lens[i] = parts[i].iov_len + SEAL_OVERHEAD;
		total += lens[i];
	}
	ret = dram_reserve_put(d, ns, key, total, part_count > 1 ? lens : NULL, part_count, &it,
			       view, &vc);
	if (ret != KVT_OK)
		return ret;
	for (unsigned i = 0; i < part_count; i++) {
		ret = seal_part_encrypt(sl, k, key, i, part_count, parts[i].iov_base,
					parts[i].iov_len, view, vc, off);
		if (ret < 0) {
			dram_abort(d, it);
			return ret;
		}
		off += lens[i];
	}
	if (keep && !dram_item_ref(d, it)) { /* cannot fail: the writer's is the one ref */
		dram_abort(d, it);
		return KVT_EBUSY;
	}
	ret = dram_publish(d, it, NULL, part_count > 1 ? lens : NULL, DRAM_SEALED, false);
	if (ret != KVT_OK) {
		if (keep)
			dram_unpin(d, it);
		return ret;
	}
	if (keep)
		*keep = it;
	atomic_fetch_add_explicit(&sl->puts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sl->put_bytes, total - (uint64_t)part_count * SEAL_OVERHEAD,
				  memory_order_relaxed);
	return KVT_OK;
}

int seal_to_buf(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		const struct iovec *parts, unsigned part_count, uint8_t **buf, size_t *buf_len,
		struct iovec *out)
{
	uint64_t total = iov_total(parts, part_count) + (uint64_t)part_count * SEAL_OVERHEAD;
	size_t off = 0;
	uint8_t *b = kvt_mem_alloc(sl->mem, (size_t)total);
	if (!b)
		return -ENOMEM;
	for (unsigned i = 0; i < part_count; i++) {
		struct iovec one = { b + off, parts[i].iov_len + SEAL_OVERHEAD };
		int ret = seal_part_encrypt(sl, k, key, i, part_count, parts[i].iov_base,
					    parts[i].iov_len, &one, 1, 0);
		if (ret < 0) {
			kvt_mem_free(sl->mem, b, (size_t)total);
			return ret;
		}
		out[i] = one;
		off += one.iov_len;
	}
	atomic_fetch_add_explicit(&sl->wt_copies, 1, memory_order_relaxed);
	*buf = b;
	*buf_len = (size_t)total;
	return 0;
}

int seal_item_parts(struct dram *d, struct dram_item *item, struct iovec *out, unsigned max)
{
	uint64_t lens[KVT_PARTS_MAX], vlen, off = 0;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned vc = dram_item_view(d, item, view, &vlen);
	int np = dram_item_part_lens(d, item, lens, max < KVT_PARTS_MAX ? max : KVT_PARTS_MAX);
	if (np < 0)
		return np;
	for (int p = 0; p < np; p++) {
		struct cur c;
		uint8_t *base = NULL;
		cur_init(&c, view, vc, off);
		if (cur_span(&c, &base) < lens[p])
			return KVT_ERANGE; /* straddles two runs */
		out[p].iov_base = base;
		out[p].iov_len = lens[p];
		off += lens[p];
	}
	return np;
}

/* ------------------------------------------------------------------------
 * Gets
 */

int seal_read(struct seal *sl, const struct seal_key *k, struct dram *d,
	      struct dram_item *item, const struct kvt_key *key, struct dram_read *rd)
{
	uint64_t lens[KVT_PARTS_MAX], starts[KVT_PARTS_MAX], plain = 0, want, room, vlen;
	uint64_t dst_off = 0;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned p0, p1, vc;
	int np;

	rd->copied = 0;
	rd->value_len = 0;
	rd->value_flags = dram_item_flags(item);
	if (rd->flags & KVT_F_RANGE)
		return KVT_EBADOP;
	if (!(rd->value_flags & KVT_F_SEALED)) {
		/* Stored in the clear (or by a peer that did not seal): not
		 * what this namespace's writers put, so not served. */
		atomic_fetch_add_explicit(&sl->unsealed, 1, memory_order_relaxed);
		return SEAL_FAILED;
	}
	np = dram_item_part_lens(d, item, lens, KVT_PARTS_MAX);
	if (np < 0)
		return SEAL_FAILED;
	for (int p = 0; p < np; p++) {
		starts[p] = p ? starts[p - 1] + lens[p - 1] : 0;
		if (lens[p] <= SEAL_OVERHEAD) {
			atomic_fetch_add_explicit(&sl->tag_failures, 1, memory_order_relaxed);
			return SEAL_FAILED;
		}
		plain += lens[p] - SEAL_OVERHEAD;
	}
	rd->value_len = plain;
	p0 = 0;
	p1 = (unsigned)np;
	want = plain;
	if (rd->flags & KVT_F_PART) {
		if (rd->part >= (uint32_t)np)
			return KVT_ERANGE;
		p0 = rd->part;
		p1 = p0 + 1;
		want = lens[p0] - SEAL_OVERHEAD;
	}
	room = iov_total(rd->dst, rd->dst_count);
	if (want > room)
		return KVT_EBUFSMALL;
	vc = dram_item_view(d, item, view, &vlen);
	for (unsigned p = p0; p < p1; p++) {
		int ret = seal_part_decrypt(sl, k, key, p, (uint32_t)np, view, vc, starts[p],
					    lens[p], rd->dst, rd->dst_count, dst_off);
		if (ret != 0) {
			if (ret == KVT_MISS)
				atomic_fetch_add_explicit(&sl->tag_failures, 1,
							  memory_order_relaxed);
			/* Parts already opened are wiped too: a miss hands out nothing. */
			struct cur c;
			cur_init(&c, rd->dst, rd->dst_count, 0);
			cur_zero(&c, dst_off);
			return ret == KVT_MISS ? SEAL_FAILED : ret;
		}
		dst_off += lens[p] - SEAL_OVERHEAD;
	}
	rd->copied = want;
	atomic_fetch_add_explicit(&sl->gets, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sl->get_bytes, want, memory_order_relaxed);
	return KVT_OK;
}

int seal_get(struct seal *sl, const struct seal_key *k, struct dram *d, uint32_t ns,
	     const struct kvt_key *key, struct dram_read *rd)
{
	struct iovec view[DRAM_MAX_RUNS];
	struct dram_item *it;
	unsigned vc = 0;
	uint64_t len = 0;
	int ret = dram_pin(d, ns, key, &it, view, &vc, &len);
	if (ret != KVT_OK) {
		rd->copied = 0;
		return ret;
	}
	ret = seal_read(sl, k, d, it, key, rd);
	dram_unpin(d, it);
	return ret;
}

void seal_stats(struct seal *sl, kvt_stats_fn fn, void *ctx)
{
	fn(ctx, "seal.namespaces", atomic_load(&sl->namespaces), NULL);
	fn(ctx, "seal.puts", atomic_load(&sl->puts), NULL);
	fn(ctx, "seal.put_bytes", atomic_load(&sl->put_bytes), NULL);
	fn(ctx, "seal.gets", atomic_load(&sl->gets), NULL);
	fn(ctx, "seal.get_bytes", atomic_load(&sl->get_bytes), NULL);
	fn(ctx, "seal.tag_failures", atomic_load(&sl->tag_failures), NULL);
	fn(ctx, "seal.unsealed_misses", atomic_load(&sl->unsealed), NULL);
	fn(ctx, "seal.writethrough_copies", atomic_load(&sl->wt_copies), NULL);
}

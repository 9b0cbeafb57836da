/*
 * seal.h - sealing: the library encrypts and authenticates every part of a
 * block of a sealed namespace with AES-256-GCM before it is stored, so that
 * the SSD tier, a remote kvtierd and the wire only ever hold ciphertext.
 * doc/security.md is the argument; this is the interface store.c uses.
 *
 * Keys:
 *   ns key     = HKDF-SHA-256(ikm = tenant master key, salt = none,
 *                             info = "kvtier-seal-v1 ns" || ns digest[32])
 *   part key   = HKDF-SHA-256(ikm = ns key, salt = nonce[16],
 *                             info = "kvtier-seal-v1 part" || u8 key_len
 *                                    || key || u32le part)
 *   one GCM message per part key, IV = 12 zero bytes (the key is fresh).
 *
 * A sealed part, byte by byte (plain_len + SEAL_OVERHEAD bytes):
 *   [0]                 version, SEAL_VERSION
 *   [1, 17)             nonce: 16 random bytes (RAND_bytes), the HKDF salt
 *   [17, 17 + n)        ciphertext, n = plain_len
 *   [17 + n, 33 + n)    GCM tag
 *   AAD = version || ns digest[32] || u8 key_len || key || u32le part
 *         || u32le part_count || u64le plain_len
 *
 * The table of sealed namespaces hangs off the store (struct seal); keys
 * are set under its lock and read without one.  Replaced keys are kept
 * until seal_close, so a reader never sees a key freed under it.
 */
#ifndef KVT_SEAL_H
#define KVT_SEAL_H

#include "dram.h"
#include "kvt_int.h"

#define SEAL_VERSION 1
#define SEAL_NONCE_LEN 16
#define SEAL_TAG_LEN 16
#define SEAL_HDR_LEN (1 + SEAL_NONCE_LEN)
#define SEAL_OVERHEAD (SEAL_HDR_LEN + SEAL_TAG_LEN) /* 33 bytes per part */
#define SEAL_KEY_LEN 32
#define SEAL_MASTER_MIN 32   /* bytes of tenant master key, at least */
#define SEAL_MASTER_MAX 1024
/* seal_read / seal_get: the block is there but did not open (tag, layout,
 * or not stored sealed).  Internal: store.c makes it KVT_MISS without
 * asking the lower tiers, which would only hand back the same bytes. */
#define SEAL_FAILED 3

struct evp_kdf_ctx_st;
#define SEAL_KDF_POOL 16

struct seal_key {
	uint8_t key[SEAL_KEY_LEN]; /* the namespace key */
	/* HKDF contexts keyed with it, reused across parts and threads (a new
	 * one costs more than a derivation).  Not in keys made by hand. */
	bool pooled;
	pthread_mutex_t pool_lock;  /* guards pool, pool_count */
	struct evp_kdf_ctx_st *pool[SEAL_KDF_POOL];
	unsigned pool_count;
	uint8_t digest[32];        /* the namespace digest, bound in as AAD */
	struct seal_key *older;    /* keys this one replaced (freed at close) */
};

struct seal;

/* 0, -ENOMEM (also: OpenSSL has no HKDF). */
int seal_open(struct seal **out, struct kvt_mem *mem);
/* Frees every key (wiped first).  NULL is a no-op. */
void seal_close(struct seal *sl);

/* ns key from a master key (len SEAL_MASTER_MIN..MAX).  0, KVT_EBADLEN, -ENOMEM. */
int seal_derive_ns_key(struct seal *sl, const uint8_t *master, size_t len,
		       const uint8_t digest[32], uint8_t out[SEAL_KEY_LEN]);
/* Seal namespace ns with key (replacing any key it had).  0, -ENOMEM. */
int seal_set_key(struct seal *sl, uint32_t ns, const uint8_t digest[32],
		 const uint8_t key[SEAL_KEY_LEN]);
/* The key of ns, NULL if ns is not sealed.  Lock-free; any thread. */
const struct seal_key *seal_key_of(struct seal *sl, uint32_t ns);

/*
 * One part, on its own (tests and the functions below).  Encrypt plain
 * (len >= 1 bytes) into SEAL_OVERHEAD + len bytes of dst starting at byte
 * dst_off of the iovec array; 0 or -ENOMEM.  Decrypt the sealed_len bytes
 * at src_off of src into dst at dst_off: 0, or KVT_MISS (bad version,
 * length or tag: the plaintext written is wiped), -ENOMEM.
 */
int seal_part_encrypt(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		      uint32_t part, uint32_t part_count, const void *plain, uint64_t len,
		      const struct iovec *dst, unsigned dst_count, uint64_t dst_off);
int seal_part_decrypt(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		      uint32_t part, uint32_t part_count, const struct iovec *src,
		      unsigned src_count, uint64_t src_off, uint64_t sealed_len,
		      const struct iovec *dst, unsigned dst_count, uint64_t dst_off);

/*
 * A sealed put into DRAM: reserves room for the sealed parts and encrypts
 * the caller's parts straight into it (one pass), then publishes the block
 * with DRAM_SEALED and its CRCs deferred (they are computed over the
 * ciphertext when it leaves DRAM).  crcs: the caller's CRC32Cs of the
 * plaintext parts, checked first, or NULL.  keep non-NULL: on KVT_OK
 * *keep holds a ref on the published item (dram_unpin it).
 * The results of dram_put, and -ENOMEM.
 */
int seal_put(struct seal *sl, const struct seal_key *k, struct dram *d, uint32_t ns,
	     const struct kvt_key *key, const struct iovec *parts, unsigned part_count,
	     const uint32_t *crcs, struct dram_item **keep);
/*
 * The sealed value as ciphertext parts in one buffer (for a write-through
 * when DRAM could not take it): *buf (kvt_mem, *buf_len bytes) and
 * out[0..part_count) into it.  0, -ENOMEM.
 */
int seal_to_buf(struct seal *sl, const struct seal_key *k, const struct kvt_key *key,
		const struct iovec *parts, unsigned part_count, uint8_t **buf, size_t *buf_len,
		struct iovec *out);
/* One iovec per sealed part of an item the caller holds a ref on, if no
 * part straddles two runs: the part count, or KVT_ERANGE. */
int seal_item_parts(struct dram *d, struct dram_item *item, struct iovec *out, unsigned max);

/*
 * Reads: like dram_read_item (key: the item's key) and dram_get, but the bytes are opened into
 * rd->dst: value_len and copied count plaintext; value_flags is
 * KVT_F_SEALED.  A block not stored sealed, or whose tag fails, is
 * SEAL_FAILED (counted); KVT_MISS only if seal_get found no block.  KVT_F_RANGE is KVT_EBADOP
 * (store.c refuses it at submit); KVT_F_VERIFY adds nothing to the tags.
 */
int seal_read(struct seal *sl, const struct seal_key *k, struct dram *d,
	      struct dram_item *item, const struct kvt_key *key, struct dram_read *rd);
int seal_get(struct seal *sl, const struct seal_key *k, struct dram *d, uint32_t ns,
	     const struct kvt_key *key, struct dram_read *rd);

void seal_stats(struct seal *sl, kvt_stats_fn fn, void *ctx);

#endif

/*
 * key.c - block keys: opaque caller bytes, and prefix-chained SHA-256 keys.
 *
 * A chained key names a block *and everything before it* in the prompt:
 *
 *   key[i] = SHA-256( "kvtier-key-v1" || ns_digest[32] || key[i-1][32]
 *                     || u32le(token_count) || u32le(token) ...
 *                     || u32le(extra_len) || extra )
 *
 * with key[-1] taken as 32 zero bytes.  doc/keys.md defines it byte for
 * byte, gives test vectors and a Python reference.  Every variable-length
 * field is preceded by its length, so two different inputs never hash the
 * same byte string.
 *
 * Invariants: a chained key always has len == KVT_KEY_HASH_LEN and its
 * unused bytes [32, KVT_KEY_MAX) are zero, as are the unused bytes of an
 * opaque key, so whole structs compare and hash the same way everywhere.
 *
 * No state: every function works on its arguments only and may be called
 * from any thread.  SHA-256 is OpenSSL's EVP interface; the only memory
 * allocated is OpenSSL's digest context (one per call), which is freed
 * before returning.  kvt_key_chain_prompt reuses one context for all the
 * blocks of a prompt, which also skips OpenSSL 3's per-init algorithm fetch.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "kvt_int.h"
#include "le.h"

#define KEY_DOMAIN "kvtier-key-v1"
#define KEY_DOMAIN_LEN 13
_Static_assert(sizeof(KEY_DOMAIN) - 1 == KEY_DOMAIN_LEN, "domain tag is 13 bytes, no NUL");

/* Tokens are converted to little-endian through a stack buffer this long. */
#define KEY_TOK_CHUNK 256

int kvt_key_set(struct kvt_key *key, const void *data, size_t len)
{
	if (!key || !data)
		return KVT_ENULL;
	if (len == 0 || len > KVT_KEY_MAX)
		return KVT_EKEYLEN;
	key->len = (uint32_t)len;
	memcpy(key->bytes, data, len);
	memset(key->bytes + len, 0, KVT_KEY_MAX - len);
	return 0;
}

/* Hash tokens as u32le each; on little-endian hosts that is the array itself. */
static int key_update_tokens(EVP_MD_CTX *ctx, const uint32_t *tokens, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return EVP_DigestUpdate(ctx, tokens, n * sizeof(uint32_t));
#else
	uint8_t buf[KEY_TOK_CHUNK * 4];
	while (n) {
		size_t m = n < KEY_TOK_CHUNK ? n : KEY_TOK_CHUNK;
		for (size_t i = 0; i < m; i++)
			le_put32(buf + 4 * i, tokens[i]);
		if (!EVP_DigestUpdate(ctx, buf, m * 4))
			return 0;
		tokens += m;
		n -= m;
	}
	return 1;
#endif
}

/*
 * One block's key into out.  ctx is initialised for SHA-256 (fresh or
 * re-initialised by the caller).  parent32 is 32 bytes or NULL (zeros);
 * it may alias out->bytes: it is consumed before out is written.  Lengths
 * were checked to fit in u32 by the caller.  Returns 1 or 0 (OpenSSL).
 */
static int key_hash_block(EVP_MD_CTX *ctx, const uint8_t ns_digest[32], const uint8_t *parent32,
			  const uint32_t *tokens, size_t token_count,
			  const void *extra, size_t extra_len, struct kvt_key *out)
{
	static const uint8_t zero[KVT_KEY_HASH_LEN];
	uint8_t len_le[4];
	unsigned int md_len = 0;

	if (!EVP_DigestUpdate(ctx, KEY_DOMAIN, KEY_DOMAIN_LEN) ||
	    !EVP_DigestUpdate(ctx, ns_digest, 32) ||
	    !EVP_DigestUpdate(ctx, parent32 ? parent32 : zero, KVT_KEY_HASH_LEN))
		return 0;
	le_put32(len_le, (uint32_t)token_count);
	if (!EVP_DigestUpdate(ctx, len_le, 4) || !key_update_tokens(ctx, tokens, token_count))
		return 0;
	le_put32(len_le, (uint32_t)extra_len);
	if (!EVP_DigestUpdate(ctx, len_le, 4))
		return 0;
	if (extra_len && !EVP_DigestUpdate(ctx, extra, extra_len))
		return 0;
	/* parent32 may alias out->bytes: it has been absorbed above. */
	if (!EVP_DigestFinal_ex(ctx, out->bytes, &md_len) || md_len != KVT_KEY_HASH_LEN)
		return 0;
	out->len = KVT_KEY_HASH_LEN;
	memset(out->bytes + KVT_KEY_HASH_LEN, 0, KVT_KEY_MAX - KVT_KEY_HASH_LEN);
	return 1;
}

int kvt_key_chain(const uint8_t ns_digest[32], const struct kvt_key *parent,
		  const uint32_t *tokens, size_t token_count,
		  const void *extra, size_t extra_len, struct kvt_key *out)
{
	EVP_MD_CTX *ctx;
	int ret = 0;

	if (!ns_digest || !out || (!tokens && token_count) || (!extra && extra_len))
		return KVT_ENULL;
	if (parent && parent->len != KVT_KEY_HASH_LEN)
		return KVT_EKEYLEN;
	if (token_count == 0 || token_count > UINT32_MAX || extra_len > UINT32_MAX)
		return KVT_EBADLEN;

	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
	    !key_hash_block(ctx, ns_digest, parent ? parent->bytes : NULL, tokens, token_count,
			    extra, extra_len, out))
		ret = -ENOMEM;
	EVP_MD_CTX_free(ctx);
	return ret;
}

int64_t kvt_key_chain_prompt(const uint8_t ns_digest[32],
			     const uint32_t *tokens, size_t token_count,
			     uint32_t block_tokens, int include_partial,
			     const void *extra, size_t extra_len,
			     struct kvt_key *out, size_t max_keys)
{
	EVP_MD_CTX *ctx;
	size_t blocks, i;
	int64_t ret;

	if (!ns_digest || (!tokens && token_count) || (!extra && extra_len) ||
	    (!out && max_keys))
		return KVT_ENULL;
	if (block_tokens == 0 || extra_len > UINT32_MAX)
		return KVT_EBADLEN;

	blocks = token_count / block_tokens;
	if (include_partial && token_count % block_tokens)
		blocks++;
	if (blocks > max_keys)
		blocks = max_keys;
	if (blocks == 0)
		return 0;

	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	/* The first init fetches SHA-256; later ones (type NULL) reuse it. */
	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < blocks; i++) {
		size_t first = i * (size_t)block_tokens;
		size_t n = token_count - first < block_tokens ? token_count - first : block_tokens;

		if ((i > 0 && !EVP_DigestInit_ex(ctx, NULL, NULL)) ||
		    !key_hash_block(ctx, ns_digest, i ? out[i - 1].bytes : NULL, tokens + first, n,
				    extra, extra_len, &out[i])) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = (int64_t)blocks;
out:
	EVP_MD_CTX_free(ctx);
	return ret;
}

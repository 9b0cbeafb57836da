/*
 * kvt_keyhash.h - the library's keyed hash of (namespace, key) for its
 * indexes of client-chosen keys (the DRAM index and items, the SSD index,
 * the remote tier's index), and the draw of the secret that keys it.
 *
 * kvt_key_hash: XXH3 of the key seeded by XXH3 of the namespace id seeded
 * by the secret -- as the daemon's kvtd_key_hash (daemon/base.c).  Until
 * 2026-12-07 the seed was secret ^ ns: two namespaces' seeds then differ
 * by an XOR the tenant knows, and XXH3's 4-8-byte path subtracts the seed
 * from a constant, so one 8-byte key a namespace shared one full hash in
 * ~4 of 1,024 namespaces on average, up to 16, whatever the secret
 * (test_keyhash lib_related_namespaces; doc/security.md "Session 44").
 *
 * kvt_secret_draw: a secret from getrandom, blocking until the kernel's
 * pool is ready, EINTR retried; an error rather than a guessable value.
 *
 * Header-only (static inline): the hash is on every lookup's path.
 */
#ifndef KVT_KEYHASH_H
#define KVT_KEYHASH_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>

#include <xxhash.h>

/* The seed of namespace ns's key hashes under secret. */
static inline uint64_t kvt_key_seed(uint64_t secret, uint32_t ns)
{
	return XXH3_64bits_withSeed(&ns, sizeof(ns), secret);
}

static inline uint64_t kvt_key_hash(uint64_t secret, uint32_t ns, const void *bytes, size_t len)
{
	return XXH3_64bits_withSeed(bytes, len, kvt_key_seed(secret, ns));
}

/* Fills *out from getrandom (flags 0: waits for the pool).  0, or a
 * negative errno (-EIO on a short read); *out is then unspecified. */
static inline int kvt_secret_draw(uint64_t *out)
{
	for (;;) {
		ssize_t got = getrandom(out, sizeof(*out), 0);

		if (got == (ssize_t)sizeof(*out))
			return 0;
		if (got < 0 && errno == EINTR)
			continue;
		return got < 0 ? -errno : -EIO;
	}
}

#endif

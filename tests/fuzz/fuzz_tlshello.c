/*
 * fuzz_tlshello.c - libFuzzer target for the key_share walk of a kvtierd
 * server's client-hello callback (tlsio_share_refused, lib/sys/tlsio.c).
 *
 * The input is a key_share extension's body, attacker bytes as a
 * ClientHello carries them.  Properties: never a crash or a read outside
 * the input (a copy of exactly its length); the decision agrees with a
 * reference written apart -- the list validated whole first, the way
 * OpenSSL's parse takes it (RFC 8446 4.2.8), then searched for a group
 * of ours -- so a refusal means a well-formed list naming none; a refused
 * list written back from its entries is the input again.  Returns 0
 * always; a broken property traps.  Seed corpus: tests/fuzz/corpus/tlshello/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tlsio.h"

struct entry {
	unsigned group;
	size_t key_off, key_len;
};

/* The list's entries (at most cap), or -1 where it is malformed. */
static int ref_parse(const uint8_t *p, size_t n, struct entry *e, int cap)
{
	size_t list_len, off;
	int k = 0;

	if (n < 2)
		return -1;
	list_len = (size_t)p[0] * 256 + p[1];
	if (list_len + 2 != n)
		return -1;
	for (off = 2; off != n; k++) {
		size_t key_len;
		if (n - off < 4 || k == cap)
			return -1;
		key_len = (size_t)p[off + 2] * 256 + p[off + 3];
		if (key_len < 1 || key_len > n - off - 4)
			return -1;
		e[k].group = (unsigned)p[off] * 256 + p[off + 1];
		e[k].key_off = off + 4;
		e[k].key_len = key_len;
		off += 4 + key_len;
	}
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t ids[] = TLSIO_GROUP_IDS;
	/* an entry is 5 bytes at least: a list of 64 KiB holds < 13,108 */
	static struct entry e[13108];
	uint8_t *p = malloc(size ? size : 1);
	bool refused, ours = false;
	int k;

	if (!p)
		return 0;
	memcpy(p, data, size);
	refused = tlsio_share_refused(p, size);
	k = ref_parse(p, size, e, (int)(sizeof(e) / sizeof(e[0])));
	for (int i = 0; i < k; i++)
		for (size_t j = 0; j < sizeof(ids) / sizeof(ids[0]); j++)
			ours |= e[i].group == ids[j];
	/* refused exactly when well-formed and none of ours */
	FUZZ_CHECK(refused == (k >= 0 && !ours));
	if (refused) {
		uint8_t *w = malloc(size);
		size_t n = 2;
		FUZZ_CHECK(w != NULL);
		w[0] = (uint8_t)((size - 2) >> 8);
		w[1] = (uint8_t)(size - 2);
		for (int i = 0; i < k; i++) {
			w[n] = (uint8_t)(e[i].group >> 8);
			w[n + 1] = (uint8_t)e[i].group;
			w[n + 2] = (uint8_t)(e[i].key_len >> 8);
			w[n + 3] = (uint8_t)e[i].key_len;
			memcpy(w + n + 4, p + e[i].key_off, e[i].key_len);
			n += 4 + e[i].key_len;
		}
		FUZZ_CHECK(n == size && memcmp(w, p, size) == 0);
		free(w);
	}
	free(p);
	return 0;
}

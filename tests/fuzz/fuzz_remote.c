/*
 * fuzz_remote.c - libFuzzer target for what the remote tier's client reads
 * from a server beside the codec (lib/tier/remote): a seed's member line
 * (cluster_member_line, STATS cluster.member.<i>) and the check of an
 * NS_REGISTER answer against our canonical text (remote_ns_answer_ok).
 *
 * The first byte picks the parser.  'm': the rest is a member line.
 * Properties: never a crash or a read outside the input; a line it takes
 * has an address of 1..CLUSTER_ADDR_MAX bytes inside the input, without
 * ',', '=' or a blank, and a weight of 1..CLUSTER_MEMBER_WEIGHT_MAX; the
 * address with weight 1 as remote.addrs text parses back to that one
 * member; its kind (remote_addr_kind, what a seed's list may name) is one
 * of the three, REMOTE_KIND_UNIX exactly when it starts with "unix:", and
 * the same for any prefix of the line (never a read past it).  Anything else: the rest is split at its first 0 byte into our
 * text and the server's.  Properties: an answer with the SHA-256 of its
 * own text is taken exactly when the two texts are equal once their
 * "tenant=" lines are left out (checked here by a second, simpler
 * implementation), and the same with the roles swapped; a digest with one
 * bit flipped is never taken.  Returns 0 always; a broken property traps.
 * Seed corpus: tests/fuzz/corpus/remote/.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cluster.h"
#include "remote.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_member(const char *s, size_t n)
{
	struct cluster_entry e[2];
	size_t al = 0;
	uint64_t w = 0;
	char *text;

	for (size_t k = 0; k <= n && k <= CLUSTER_ADDR_MAX + 8; k += 1 + k / 4) {
		unsigned kind = remote_addr_kind(s, k);
		FUZZ_CHECK(kind == REMOTE_KIND_NET || kind == REMOTE_KIND_LOCAL ||
			   kind == REMOTE_KIND_UNIX);
		FUZZ_CHECK((kind == REMOTE_KIND_UNIX) == (k >= 5 && memcmp(s, "unix:", 5) == 0));
	}
	if (cluster_member_line(s, n, &al, &w) != 0)
		return;
	FUZZ_CHECK(al >= 1 && al <= CLUSTER_ADDR_MAX && al < n);
	FUZZ_CHECK(w >= 1 && w <= CLUSTER_MEMBER_WEIGHT_MAX);
	for (size_t i = 0; i < al; i++)
		FUZZ_CHECK(s[i] > ' ' && s[i] <= '~' && s[i] != ',' && s[i] != '=');
	text = malloc(al + 3);
	FUZZ_CHECK(text);
	memcpy(text, s, al);
	memcpy(text + al, "=1", 2);
	FUZZ_CHECK(cluster_parse_addrs(text, al + 2, e, 2) == 1);
	FUZZ_CHECK(e[0].addr == text && e[0].addr_len == al && e[0].weight == 1);
	free(text);
}

/* The lines of t[0..n) but "tenant=" ones, each with its '\n' (the last
 * one too), into out: the length. */
static size_t strip_tenant(const char *t, size_t n, char *out)
{
	size_t o = 0, i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && t[j] != '\n')
			j++;
		if (!(j - i >= 7 && memcmp(t + i, "tenant=", 7) == 0)) {
			memcpy(out + o, t + i, j - i);
			o += j - i;
			out[o++] = '\n';
		}
		i = j + 1;
	}
	return o;
}

static void fuzz_nsanswer(const char *s, size_t n)
{
	const char *z = memchr(s, 0, n);
	const char *a = s, *b;
	size_t an, bn, sa, sb;
	uint8_t da[32], db[32];
	unsigned l = 0;
	char *x, *y;
	bool same;

	if (!z)
		return;
	an = (size_t)(z - s);
	b = z + 1;
	bn = n - an - 1;
	x = malloc(an + 1);
	y = malloc(bn + 1);
	FUZZ_CHECK(x && y);
	sa = strip_tenant(a, an, x);
	sb = strip_tenant(b, bn, y);
	same = sa == sb && memcmp(x, y, sa) == 0;
	FUZZ_CHECK(EVP_Digest(b, bn, db, &l, EVP_sha256(), NULL) && l == 32);
	FUZZ_CHECK(EVP_Digest(a, an, da, &l, EVP_sha256(), NULL) && l == 32);
	FUZZ_CHECK(remote_ns_answer_ok(a, an, b, bn, db) == same);
	FUZZ_CHECK(remote_ns_answer_ok(b, bn, a, an, da) == same);
	db[n % 32] ^= (uint8_t)(1u << (n % 8));
	FUZZ_CHECK(!remote_ns_answer_ok(a, an, b, bn, db));
	free(x);
	free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] == 'm')
		fuzz_member((const char *)data + 1, size - 1);
	else
		fuzz_nsanswer((const char *)data + 1, size - 1);
	return 0;
}

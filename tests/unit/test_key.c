/*
 * test_key.c - lib/key.c: opaque keys and prefix-chained SHA-256 keys.
 *
 * The expected digests were computed independently with Python's hashlib
 * (the reference implementation and vector script in doc/keys.md), not with
 * this library.
 */
#include <stdint.h>
#include <string.h>

#include "t.h"

/* doc/keys.md, "Test vectors". */
static const char *const NS_A =
	"59ace3f23e1d9d4fed3d8eb211f925ae79d2a754c2e2a02e9ecab5eac7525dd1";
static const char *const KEY_FIRST =
	"e2294467fc597ef56fd91208957f19fe6389dbd744965c1d9cef48af46725526";
static const char *const KEY_SECOND =
	"49e3f755e0d32c51ee7c0b5ac4b31149b78173ff9198f1ec05522696d3615fac";
static const char *const KEY_EXTRA =
	"3f23dbd4e29a9b556dc8fd623980abfab0428ac1ead8640038a420a568c46b89";
static const char *const KEY_BYTES =
	"b27297da2aa6a00efcb6bcbb7cf9e3ec50b93aac118e4ac315af2c1b3d6751e6";
static const char *const PROMPT[3] = {
	"e8c0b292cfa6079e84c37db362d6cb81e4cb80002747780930fc792189a4c56b",
	"11186f5b2dd27f036d1f9091865037fda64e80e62efa84342e7fa311b69de09c",
	"90021eb259b8c2838b626c0ea1efe3e5020ed280f5b5184896a7bbb83463dc88",
};
static const char *const PROMPT_SALT[3] = {
	"4e60be2da12b81dd1a5cc05c01aa7b10ff66ec174f947940832c9ed4ff899013",
	"0f0930aa2ea36a4150f2a2b7ac376da1ec8c4bac0bb4b1bb275589d31938e2ab",
	"e5538a13cf83095235b4748ab6b5aaa14156884ed743e7b1b9e930bbb5243c26",
};

static void unhex(const char *hex, uint8_t *out, size_t len)
{
	T_EQ_INT(strlen(hex), 2 * len);
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		T_ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t)v;
	}
}

/* A chained key: 32 bytes equal to hex, the rest of bytes[] zero. */
static void check_key(const struct kvt_key *k, const char *hex)
{
	uint8_t want[KVT_KEY_MAX] = { 0 };

	unhex(hex, want, 32);
	T_EQ_INT(k->len, KVT_KEY_HASH_LEN);
	T_EQ_MEM(k->bytes, want, KVT_KEY_MAX);
}

static uint8_t ns_a[32];
static uint32_t prompt_tokens[37]; /* 2 full blocks of 16, then 5 */

static void test_key_set(void)
{
	uint8_t data[KVT_KEY_MAX + 1];
	uint8_t zero[KVT_KEY_MAX] = { 0 };
	struct kvt_key k;

	t_fill(data, sizeof(data), 1);
	T_RC(kvt_key_set(NULL, data, 8), KVT_ENULL);
	T_RC(kvt_key_set(&k, NULL, 8), KVT_ENULL);
	T_RC(kvt_key_set(&k, data, 0), KVT_EKEYLEN);
	T_RC(kvt_key_set(&k, data, KVT_KEY_MAX + 1), KVT_EKEYLEN);
	T_RC(kvt_key_set(&k, data, SIZE_MAX), KVT_EKEYLEN);

	T_RC(kvt_key_set(&k, data, KVT_KEY_MAX), 0);
	T_EQ_INT(k.len, KVT_KEY_MAX);
	T_EQ_MEM(k.bytes, data, KVT_KEY_MAX);

	/* A shorter key over a longer one leaves no stale bytes behind. */
	T_RC(kvt_key_set(&k, data, 1), 0);
	T_EQ_INT(k.len, 1);
	T_EQ_INT(k.bytes[0], data[0]);
	T_EQ_MEM(k.bytes + 1, zero, KVT_KEY_MAX - 1);
}

static void test_chain_vectors(void)
{
	uint32_t t1[16], t2[16];
	const uint32_t tb[2] = { 0x01020304u, 0xffffffffu };
	struct kvt_key k1, k2, k3;

	for (uint32_t i = 0; i < 16; i++) {
		t1[i] = i + 1;
		t2[i] = i + 17;
	}
	memset(&k1, 0xa5, sizeof(k1)); /* stale bytes must be cleared */
	T_RC(kvt_key_chain(ns_a, NULL, t1, 16, NULL, 0, &k1), 0);
	check_key(&k1, KEY_FIRST);
	T_RC(kvt_key_chain(ns_a, &k1, t2, 16, NULL, 0, &k2), 0);
	check_key(&k2, KEY_SECOND);
	T_RC(kvt_key_chain(ns_a, &k1, t2, 16, "lora:7", 6, &k3), 0);
	check_key(&k3, KEY_EXTRA);
	/* Byte order of tokens, and extra with NUL and high bytes. */
	T_RC(kvt_key_chain(ns_a, NULL, tb, 2, "\x00\xff\x10", 3, &k3), 0);
	check_key(&k3, KEY_BYTES);

	/* extra non-NULL with extra_len 0 is the same as no extra. */
	T_RC(kvt_key_chain(ns_a, NULL, t1, 16, "ignored", 0, &k3), 0);
	check_key(&k3, KEY_FIRST);

	/* out may alias parent. */
	k3 = k1;
	T_RC(kvt_key_chain(ns_a, &k3, t2, 16, NULL, 0, &k3), 0);
	check_key(&k3, KEY_SECOND);
}

static void test_chain_bad_args(void)
{
	uint32_t t[4] = { 1, 2, 3, 4 };
	struct kvt_key out, parent;
	uint8_t bytes[KVT_KEY_MAX];

	T_RC(kvt_key_chain(NULL, NULL, t, 4, NULL, 0, &out), KVT_ENULL);
	T_RC(kvt_key_chain(ns_a, NULL, t, 4, NULL, 0, NULL), KVT_ENULL);
	T_RC(kvt_key_chain(ns_a, NULL, NULL, 4, NULL, 0, &out), KVT_ENULL);
	T_RC(kvt_key_chain(ns_a, NULL, t, 4, NULL, 1, &out), KVT_ENULL);

	t_fill(bytes, sizeof(bytes), 2);
	T_RC(kvt_key_set(&parent, bytes, 16), 0);
	T_RC(kvt_key_chain(ns_a, &parent, t, 4, NULL, 0, &out), KVT_EKEYLEN);
	T_RC(kvt_key_set(&parent, bytes, KVT_KEY_MAX), 0);
	T_RC(kvt_key_chain(ns_a, &parent, t, 4, NULL, 0, &out), KVT_EKEYLEN);
	/* An opaque 32-byte parent is accepted: it is hashed as it is. */
	T_RC(kvt_key_set(&parent, bytes, 32), 0);
	T_RC(kvt_key_chain(ns_a, &parent, t, 4, NULL, 0, &out), 0);

	T_RC(kvt_key_chain(ns_a, NULL, t, 0, NULL, 0, &out), KVT_EBADLEN);
	T_RC(kvt_key_chain(ns_a, NULL, NULL, 0, NULL, 0, &out), KVT_EBADLEN);
	if (SIZE_MAX > UINT32_MAX) {
		/* Refused before any token is read. */
		T_RC(kvt_key_chain(ns_a, NULL, t, (size_t)UINT32_MAX + 1, NULL, 0, &out),
		     KVT_EBADLEN);
		T_RC(kvt_key_chain(ns_a, NULL, t, 4, "x", (size_t)UINT32_MAX + 1, &out),
		     KVT_EBADLEN);
	}
}

static void test_chain_separation(void)
{
	uint32_t t[16];
	uint8_t ns_b[32];
	struct kvt_key a, b;

	for (uint32_t i = 0; i < 16; i++)
		t[i] = i + 1;
	memcpy(ns_b, ns_a, 32);
	ns_b[31] ^= 1;
	T_RC(kvt_key_chain(ns_a, NULL, t, 16, NULL, 0, &a), 0);
	T_RC(kvt_key_chain(ns_b, NULL, t, 16, NULL, 0, &b), 0);
	T_ASSERT(memcmp(a.bytes, b.bytes, 32) != 0);
	/* A 15-token block and a 16-token block differ even if one is a prefix. */
	T_RC(kvt_key_chain(ns_a, NULL, t, 15, NULL, 0, &b), 0);
	T_ASSERT(memcmp(a.bytes, b.bytes, 32) != 0);
	/* Length-prefixed extra: "" vs "\0" differ. */
	T_RC(kvt_key_chain(ns_a, NULL, t, 16, "", 1, &b), 0);
	T_ASSERT(memcmp(a.bytes, b.bytes, 32) != 0);
}

static void test_prompt_vectors(void)
{
	struct kvt_key out[4];

	memset(out, 0, sizeof(out));
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 0, NULL, 0, out, 4), 2);
	check_key(&out[0], PROMPT[0]);
	check_key(&out[1], PROMPT[1]);
	T_EQ_INT(out[2].len, 0); /* untouched */

	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 1, NULL, 0, out, 4), 3);
	for (int i = 0; i < 3; i++)
		check_key(&out[i], PROMPT[i]);

	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 1, "salt", 4, out, 4), 3);
	for (int i = 0; i < 3; i++)
		check_key(&out[i], PROMPT_SALT[i]);

	/* max_keys caps the output; the keys written are the same. */
	memset(out, 0, sizeof(out));
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 1, NULL, 0, out, 1), 1);
	check_key(&out[0], PROMPT[0]);
	T_EQ_INT(out[1].len, 0);

	/* Exactly two full blocks: include_partial adds nothing. */
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 32, 16, 1, NULL, 0, out, 4), 2);
	check_key(&out[1], PROMPT[1]);
	/* Fewer tokens than a block. */
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 15, 16, 0, NULL, 0, out, 4), 0);
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 15, 16, 1, NULL, 0, out, 4), 1);
	/* Nothing to do. */
	T_RC(kvt_key_chain_prompt(ns_a, NULL, 0, 16, 1, NULL, 0, out, 4), 0);
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 1, NULL, 0, NULL, 0), 0);
}

static void test_prompt_bad_args(void)
{
	struct kvt_key out[4];

	T_RC(kvt_key_chain_prompt(NULL, prompt_tokens, 37, 16, 0, NULL, 0, out, 4), KVT_ENULL);
	T_RC(kvt_key_chain_prompt(ns_a, NULL, 37, 16, 0, NULL, 0, out, 4), KVT_ENULL);
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 0, NULL, 1, out, 4), KVT_ENULL);
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 16, 0, NULL, 0, NULL, 4), KVT_ENULL);
	T_RC(kvt_key_chain_prompt(ns_a, prompt_tokens, 37, 0, 0, NULL, 0, out, 4), KVT_EBADLEN);
}

/* The prompt helper agrees with chaining kvt_key_chain by hand. */
static void test_prompt_matches_chain(void)
{
	static uint32_t tokens[1000];
	static struct kvt_key pk[1000];
	const uint32_t bts[] = { 1, 3, 16, 999, 1000, 4096 };

	t_fill(tokens, sizeof(tokens), 3);
	for (size_t b = 0; b < sizeof(bts) / sizeof(bts[0]); b++) {
		for (int partial = 0; partial < 2; partial++) {
			uint32_t bt = bts[b];
			size_t want = 1000 / bt + (partial && 1000 % bt ? 1 : 0);
			struct kvt_key k;

			T_RC(kvt_key_chain_prompt(ns_a, tokens, 1000, bt, partial, "x", 1, pk, 1000),
			     (int64_t)want);
			for (size_t i = 0; i < want; i++) {
				size_t n = 1000 - i * bt < bt ? 1000 - i * bt : bt;
				T_RC(kvt_key_chain(ns_a, i ? &pk[i - 1] : NULL, tokens + i * bt, n,
						   "x", 1, &k), 0);
				T_EQ_MEM(&k, &pk[i], sizeof(k));
			}
		}
	}
}

int main(void)
{
	unhex(NS_A, ns_a, 32);
	for (uint32_t i = 0; i < 37; i++)
		prompt_tokens[i] = (uint32_t)(i * 2654435761u);

	test_key_set();
	test_chain_vectors();
	test_chain_bad_args();
	test_chain_separation();
	test_prompt_vectors();
	test_prompt_bad_args();
	test_prompt_matches_chain();
	return 0;
}

/*
 * fuzz_nsreg.c - libFuzzer target for ns_reg_parse_ex (lib/ns.c), the parser
 * of the persisted namespace registry file ("namespaces", doc/keys.md):
 * version 1 (whole file), version 2 (append-only, torn tail dropped) and
 * version 3 (version 2 with word records).
 *
 * The input is an untrusted file image.  The parser must never read
 * outside it, never crash, and hand its callback only records that pass
 * every check.  The callback touches every byte it is given (so ASan sees
 * any pointer or length that strays) and feeds each record into an
 * in-memory registry, which must accept it: what the parser passes, the
 * registry must be able to hold.  Returns 0 always; a broken property
 * traps.  Seed corpus: tests/fuzz/corpus/nsreg/.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kvt_int.h"

struct fuzz_ctx {
	const uint8_t *buf;
	size_t len;
	struct ns_registry reg;
	uint32_t records;
	uint32_t words;
	uint32_t sum;
};

#include "fuzz.h"

static int fuzz_rec(void *p, uint32_t id, const uint8_t digest[32], const char *canon,
		    uint32_t canon_len)
{
	struct fuzz_ctx *c = p;
	const uint8_t *cp = (const uint8_t *)canon;
	uint32_t got;

	FUZZ_CHECK(id == ++c->records);
	FUZZ_CHECK(canon_len >= 1 && canon_len <= NS_CANON_MAX);
	/* Both pointers lie inside the input. */
	FUZZ_CHECK(digest >= c->buf && digest + 32 <= c->buf + c->len);
	FUZZ_CHECK(cp >= c->buf && cp + canon_len <= c->buf + c->len);
	for (uint32_t i = 0; i < 32; i++)
		c->sum += digest[i];
	for (uint32_t i = 0; i < canon_len; i++) {
		FUZZ_CHECK(cp[i] != 0);
		c->sum += cp[i];
	}
	/* A duplicate digest gets the earlier id (ns_reg_load calls it corrupt). */
	FUZZ_CHECK(ns_reg_add(&c->reg, digest, canon, canon_len, &got) == 0);
	FUZZ_CHECK(got <= id);
	return 0;
}

/* A word record names a namespace already passed to fuzz_rec, which the
 * registry holds: setting its word there must work. */
static int fuzz_word(void *p, uint32_t id, uint64_t word)
{
	struct fuzz_ctx *c = p;
	uint64_t got = 0;

	FUZZ_CHECK(id >= 1 && id <= c->records);
	c->words++;
	c->sum += (uint32_t)word;
	/* (a duplicate digest's record shares an earlier id) */
	FUZZ_CHECK(ns_reg_word(&c->reg, id <= c->reg.count ? id : 1, &got) == 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvt_mem mem;
	static struct fuzz_ctx c; /* struct ns_registry is 8 KiB: keep it off the stack */
	size_t used = 0;
	uint32_t version = 0;
	int ret;

	kvt_mem_init(&mem);
	memset(&c, 0, sizeof(c));
	c.buf = data;
	c.len = size;
	FUZZ_CHECK(ns_reg_init(&c.reg, &mem) == 0);

	ret = ns_reg_parse_ex(data, size, fuzz_rec, fuzz_word, &c, &used, &version);
	FUZZ_CHECK(ret == KVT_ECORRUPT || ret == KVT_EVERSION || ret >= 0);
	if (ret >= 0) {
		FUZZ_CHECK((uint32_t)ret == c.records);
		/* Version 1 is exact; 2 and 3 may stop before a torn tail. */
		FUZZ_CHECK(version >= 1 && version <= 3);
		FUZZ_CHECK(version == 3 || c.words == 0);
		FUZZ_CHECK(used >= 16 && used <= size);
		FUZZ_CHECK(version != 1 || used == size);
		/* What was accepted is a file on its own, with the same records. */
		FUZZ_CHECK(ns_reg_parse(data, used, NULL, NULL) == ret);
	}

	ns_reg_free(&c.reg);
	FUZZ_CHECK(atomic_load(&mem.bytes) == 0);
	return 0;
}

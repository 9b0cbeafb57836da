/*
 * test_pinset.c - kvtierd's pin sets (kvtd_pinset, daemon/base.c): the
 * distinct values pins hold, each counted once in the pin caps.  As a
 * native answer's set (kvtd_pinset_add: true the first time, each
 * counted without a table or past its size); as a count of references
 * (kvtd_pinset_hold, kvtd_pinset_drop: the S3 requests in progress of a
 * connection and of a tenant), checked against a plain array of counts
 * through 200,000 random holds and drops of keys that collide in the
 * table (its deletion moves entries back: a lost one would count a value
 * twice, or uncount it while held), the table freed once it holds none;
 * each key held with a length of its own every time, the last drop
 * giving back the length its first hold counted (test_len: until
 * 2026-12-06 a slot kept no length, and the last dropper uncounted its
 * own -- equal while every holder pinned the whole value, not once a
 * ranged view shared one).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvtierd.h"
#include "t.h"

static void test_add(void)
{
	struct kvtd_pinset s = { 0 };

	/* no table: each counted */
	T_ASSERT(kvtd_pinset_add(&s, 0x1000));
	T_ASSERT(kvtd_pinset_add(&s, 0x1000));
	T_OK(kvtd_pinset_init(&s, 4));
	T_ASSERT(kvtd_pinset_add(&s, 0x1000));
	T_ASSERT(!kvtd_pinset_add(&s, 0x1000));
	T_ASSERT(kvtd_pinset_add(&s, 0x2000));
	T_ASSERT(kvtd_pinset_add(&s, 0)); /* nowhere: always */
	T_ASSERT(kvtd_pinset_add(&s, 0));
	kvtd_pinset_free(&s);
	T_ASSERT(s.slot == NULL && s.cap == 0);
}

#define KEYS 97

static void test_refs(void)
{
	struct kvtd_pinset s = { 0 };
	uint64_t refs[KEYS] = { 0 }, held = 0;
	unsigned seed = 7;

	uint64_t first[KEYS] = { 0 }, len = 7;

	T_EQ_INT(kvtd_pinset_hold(&s, 0, 5), 1); /* nowhere: counted, not kept */
	T_ASSERT(kvtd_pinset_drop(&s, 0, &len));
	T_EQ_U64(len, 7); /* not kept: the caller's */
	T_ASSERT(!kvtd_pinset_drop(&s, 0x40, &len)); /* never held */
	for (int n = 0; n < 200000; n++) {
		unsigned k = (unsigned)rand_r(&seed) % KEYS;
		/* keys a block apart, as values' addresses are: many share a
		 * home slot */
		uintptr_t at = (uintptr_t)(k + 1) << 21;
		if (rand_r(&seed) % 2 || !refs[k]) {
			uint64_t l = 1 + (uint64_t)rand_r(&seed);
			T_EQ_INT(kvtd_pinset_hold(&s, at, l), refs[k] == 0);
			if (refs[k] == 0)
				first[k] = l;
			held += refs[k] == 0;
			refs[k]++;
			T_EQ_U64(kvtd_pinset_refs(&s, at), refs[k]);
		} else {
			bool last = refs[k] == 1;
			len = 0;
			T_EQ_INT(kvtd_pinset_drop(&s, at, &len), last);
			T_EQ_U64(len, last ? first[k] : 0);
			held -= last;
			refs[k]--;
			T_EQ_U64(kvtd_pinset_refs(&s, at), refs[k]);
		}
		T_EQ_U64(s.used, held);
		T_ASSERT(s.used == 0 ? s.slot == NULL : 2 * s.used <= s.cap);
	}
	for (unsigned k = 0; k < KEYS; k++)
		while (refs[k]--)
			(void)kvtd_pinset_drop(&s, (uintptr_t)(k + 1) << 21, &len);
	T_ASSERT(s.slot == NULL && s.used == 0);
	T_ASSERT(!kvtd_pinset_drop(&s, (uintptr_t)1 << 21, &len));
}

/* A value held whole, then through a shorter view (a range), dropped
 * in the other order: the last drop gives back what the first counted,
 * so the count comes back to 0 (the last dropper's own length left 900
 * bytes counted for a value no longer pinned). */
static void test_len(void)
{
	struct kvtd_pinset s = { 0 };
	uint64_t counted = 0, len;
	uintptr_t at = 0x200000;

	if (kvtd_pinset_hold(&s, at, 1000) == 1)
		counted += 1000;
	if (kvtd_pinset_hold(&s, at, 100) == 1)
		counted += 100;
	T_EQ_U64(counted, 1000);
	len = 1000;
	T_ASSERT(!kvtd_pinset_drop(&s, at, &len)); /* the whole one goes first */
	len = 100;                                  /* the range's own length */
	T_ASSERT(kvtd_pinset_drop(&s, at, &len));
	counted -= len;
	T_EQ_U64(counted, 0);
	T_ASSERT(s.slot == NULL);
}

int main(void)
{
	test_add();
	test_refs();
	test_len();
	printf("test_pinset: ok\n");
	return 0;
}

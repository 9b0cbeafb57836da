/*
 * test_placement.c - lib/placement.c: weighted rendezvous hashing of
 * block groups over kvtierd members (doc/cluster.md "Placement").
 *
 * The fixed-point logarithm against libm's; balance within stated bounds
 * for equal and unequal weights; minimal movement when a member joins
 * (about w/sum(w) of the groups move, all to it) or leaves (only its
 * groups move); independence of the member list's order; skipping dead
 * members; golden placements (the same in every process on every
 * machine: a change here moves every group of a running pod); bad lists.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include <xxhash.h>

#include "kvt_int.h"
#include "placement.h"
#include "t.h"

#define ANCHORS 200000u

static struct kvt_mem mem;

static struct placement *mk(const char *const *names, const uint32_t *weights, unsigned n)
{
	struct placement_member m[PLACEMENT_MEMBERS_MAX];
	struct placement *p = NULL;
	for (unsigned i = 0; i < n; i++) {
		m[i].name = names[i];
		m[i].weight = weights ? weights[i] : 1;
	}
	T_OK(placement_new(&p, m, n, &mem));
	return p;
}

static uint64_t anchor_of(uint64_t i)
{
	struct kvt_key k;
	char txt[64];
	int len = snprintf(txt, sizeof(txt), "kvtier-placement-%llu", (unsigned long long)i);
	T_OK(kvt_key_set(&k, txt, (size_t)len));
	return placement_key_hash(&k);
}

static unsigned primary(const struct placement *p, uint64_t anchor)
{
	unsigned out = UINT32_MAX;
	T_EQ_INT(placement_rank(p, anchor, NULL, &out, 1), 1);
	return out;
}

/* The score is -log2((h + 1) / 2^64) / weight in 32.32 << 20: within a few
 * units of the last place of libm's double result. */
static void test_log(void)
{
	static const char *const names[] = { "10.0.0.1:7420" };
	struct placement *p = mk(names, NULL, 1);
	uint64_t seed = XXH3_64bits(names[0], strlen(names[0]));
	double sum = 0;
	for (uint64_t i = 0; i < ANCHORS; i++) {
		uint64_t a = anchor_of(i), h = XXH3_64bits_withSeed(&a, sizeof(a), seed);
		double want = -log2(((double)h + 1.0) / 18446744073709551616.0);
		double got = (double)(placement_score(p, 0, a) >> 20) / 4294967296.0;
		if (fabs(got - want) > 1e-8 + 1e-8 * want)
			T_FAIL("anchor %llu: fixed point %.12f, libm %.12f", (unsigned long long)i,
			       got, want);
		sum += got;
	}
	/* E[-log2 u] = 1 / ln 2 */
	T_ASSERT(fabs(sum / ANCHORS - 1.0 / log(2.0)) < 0.01);
	placement_free(p);
}

/* Shares of ANCHORS groups within 5% (relative) of weight / sum: the
 * sampling error is ~0.7% (one sigma) for the smallest share here. */
static void test_balance(const uint32_t *weights, unsigned n)
{
	static const char *const names[] = { "a:1", "b:1", "c:1", "d:1", "e:1", "f:1", "g:1",
					     "h:1", "i:1", "j:1" };
	struct placement *p = mk(names, weights, n);
	uint64_t count[10] = { 0 }, wsum = 0;
	for (unsigned i = 0; i < n; i++)
		wsum += weights[i];
	for (uint64_t i = 0; i < ANCHORS; i++)
		count[primary(p, anchor_of(i))]++;
	for (unsigned i = 0; i < n; i++) {
		double want = (double)weights[i] / (double)wsum, got = (double)count[i] / ANCHORS;
		if (fabs(got - want) > 0.05 * want)
			T_FAIL("member %u (weight %u): share %.4f, want %.4f +- 5%%", i, weights[i],
			       got, want);
	}
	placement_free(p);
}

/* A join moves ~1/(n+1) of the groups, every one to the new member; a
 * leave moves exactly the leaver's.  Replicas (rank 2) too: a group's
 * replica set changes only where the new member enters it. */
static void test_movement(void)
{
	static const char *const names[] = { "10.0.0.1:7420", "10.0.0.2:7420", "10.0.0.3:7420",
					     "10.0.0.4:7420", "10.0.0.5:7420", "10.0.0.6:7420",
					     "10.0.0.7:7420", "10.0.0.8:7420", "10.0.0.9:7420" };
	static const char *const without4[] = { "10.0.0.1:7420", "10.0.0.2:7420", "10.0.0.3:7420",
						"10.0.0.5:7420", "10.0.0.6:7420", "10.0.0.7:7420",
						"10.0.0.8:7420", "10.0.0.9:7420" };
	struct placement *p8 = mk(names, NULL, 8), *p9 = mk(names, NULL, 9);
	struct placement *pl = mk(without4, NULL, 7);
	uint64_t moved = 0, moved_leave = 0, owned4 = 0;

	for (uint64_t i = 0; i < ANCHORS; i++) {
		uint64_t a = anchor_of(i);
		unsigned a8 = primary(p8, a), a9 = primary(p9, a), al = primary(pl, a);
		unsigned r8[2], r9[2];
		if (a8 != a9) {
			moved++;
			T_EQ_INT(a9, 8); /* only to the newcomer */
		}
		T_EQ_INT(placement_rank(p8, a, NULL, r8, 2), 2);
		T_EQ_INT(placement_rank(p9, a, NULL, r9, 2), 2);
		if (r9[0] != 8 && r9[1] != 8) {
			T_EQ_INT(r9[0], r8[0]);
			T_EQ_INT(r9[1], r8[1]);
		}
		/* Leave: p8's member 3 ("10.0.0.4") is gone from pl; pl's
		 * indexes above 2 are p8's minus one. */
		if (a8 == 3) {
			owned4++;
			moved_leave++;
		} else {
			T_EQ_INT(al, a8 < 3 ? a8 : a8 - 1);
		}
	}
	fprintf(stderr, "join 8 -> 9: %.4f of groups moved (1/9 = 0.1111); leave: %.4f (its own)\n",
		(double)moved / ANCHORS, (double)moved_leave / ANCHORS);
	T_ASSERT(moved > ANCHORS / 9 * 95 / 100 && moved < ANCHORS / 9 * 105 / 100);
	T_EQ_U64(moved_leave, owned4);
	placement_free(p8);
	placement_free(p9);
	placement_free(pl);
}

/* The order of the list does not matter; skipping a member promotes the
 * next best; with every member skipped the ranking is the plain one. */
static void test_order_and_skip(void)
{
	static const char *const fwd[] = { "h1:1", "h2:1", "h3:1", "h4:1" };
	static const char *const rev[] = { "h4:1", "h3:1", "h2:1", "h1:1" };
	static const uint32_t wf[] = { 1, 2, 3, 4 }, wr[] = { 4, 3, 2, 1 };
	struct placement *pf = mk(fwd, wf, 4), *pr = mk(rev, wr, 4);
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t a = anchor_of(i);
		unsigned of[4], orr[4], os[4];
		bool skip[4] = { false }, all[4] = { true, true, true, true };
		T_EQ_INT(placement_rank(pf, a, NULL, of, 4), 4);
		T_EQ_INT(placement_rank(pr, a, NULL, orr, 4), 4);
		for (unsigned k = 0; k < 4; k++)
			T_EQ_INT(of[k], 3 - orr[k]);
		skip[of[0]] = true;
		T_EQ_INT(placement_rank(pf, a, skip, os, 2), 2);
		T_EQ_INT(os[0], of[1]);
		T_EQ_INT(os[1], of[2]);
		T_EQ_INT(placement_rank(pf, a, skip, os, 4), 4);
		T_EQ_INT(os[3], of[0]); /* the skipped one fills the last place */
		T_EQ_INT(placement_rank(pf, a, all, os, 3), 3);
		T_EQ_INT(os[0], of[0]);
		T_EQ_INT(os[2], of[2]);
		T_EQ_INT(placement_rank(pf, a, NULL, os, 9), 4); /* capped */
	}
	placement_free(pf);
	placement_free(pr);
}

/* Golden: the first member of anchors 0..15 over four members, one of
 * weight 2.  Any change to the hash, the logarithm or the tie rule shows
 * here -- and would move every group of a running pod. */
static void test_golden(void)
{
	static const char *const names[] = { "10.0.0.1:7420", "10.0.0.2:7420", "10.0.0.3:7420",
					     "10.0.0.4:7420" };
	static const uint32_t w[] = { 1, 1, 1, 2 };
	static const unsigned want[16] = { 1, 0, 3, 2, 3, 1, 3, 3, 3, 0, 3, 0, 0, 0, 3, 2 };
	struct placement *p = mk(names, w, 4);
	struct kvt_key k;
	T_OK(kvt_key_set(&k, "kvtier", 6));
	T_EQ_U64(placement_key_hash(&k), UINT64_C(0xa1669530aa735bce));
	for (uint64_t i = 0; i < 16; i++)
		if (primary(p, anchor_of(i)) != want[i])
			T_FAIL("anchor %llu: member %u, golden %u", (unsigned long long)i,
			       primary(p, anchor_of(i)), want[i]);
	placement_free(p);
}

static void test_errors(void)
{
	struct placement_member m[3] = { { "a:1", 1 }, { "b:1", 1 }, { "a:1", 1 } };
	struct placement *p = NULL;
	T_RC(placement_new(&p, m, 0, &mem), KVT_EOPTVAL);
	T_RC(placement_new(&p, m, 3, &mem), KVT_EOPTVAL); /* a name twice */
	m[2].name = "";
	T_RC(placement_new(&p, m, 3, &mem), KVT_EOPTVAL);
	m[2].name = "c:1";
	m[1].weight = 0;
	T_RC(placement_new(&p, m, 3, &mem), KVT_EOPTVAL);
	m[1].weight = PLACEMENT_WEIGHT_MAX + 1;
	T_RC(placement_new(&p, m, 3, &mem), KVT_EOPTVAL);
	m[1].weight = PLACEMENT_WEIGHT_MAX;
	kvt_mem_fail_nth(&mem, 1);
	T_RC(placement_new(&p, m, 3, &mem), -ENOMEM);
	T_OK(placement_new(&p, m, 3, &mem));
	T_EQ_INT(placement_count(p), 3);
	placement_free(p);
	placement_free(NULL);
}

/* Not a timed test: prints what placement costs per group (rank of 2)
 * for doc/cluster.md "Scale"; asserts only that it ran. */
static void report_cost(void)
{
	static char names[PLACEMENT_MEMBERS_MAX][32];
	static const char *np[PLACEMENT_MEMBERS_MAX];
	static uint32_t w[PLACEMENT_MEMBERS_MAX];
	static const unsigned sizes[] = { 3, 100, PLACEMENT_MEMBERS_MAX };
	for (unsigned i = 0; i < PLACEMENT_MEMBERS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "10.0.%u.%u:7420", i / 200, i % 200);
		np[i] = names[i];
		w[i] = 1 + i % 4;
	}
	for (unsigned k = 0; k < 3; k++) {
		struct placement *p = mk(np, w, sizes[k]);
		unsigned out[2], sum = 0, n = 20000;
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (unsigned i = 0; i < n; i++)
			sum += placement_rank(p, i * UINT64_C(0x9E3779B97F4A7C15), NULL, out, 2);
		clock_gettime(CLOCK_MONOTONIC, &b);
		T_EQ_U64(sum, 2 * n);
		double us = ((double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3) / n;
		fprintf(stderr, "placement cost: %u members: %.2f us per group, %.0f ns per member\n",
			sizes[k], us, us * 1e3 / sizes[k]);
		placement_free(p);
	}
}

int main(void)
{
	static const uint32_t equal[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	static const uint32_t skewed[4] = { 1, 1, 2, 4 };
	static const uint32_t gib[3] = { 64, 128, 512 };
	kvt_mem_init(&mem);
	test_log();
	test_balance(equal, 10);
	test_balance(skewed, 4);
	test_balance(gib, 3);
	test_movement();
	test_order_and_skip();
	test_golden();
	test_errors();
	report_cost();
	T_EQ_INT(mem.bytes, 0);
	return 0;
}

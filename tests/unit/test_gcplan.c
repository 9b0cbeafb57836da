/*
 * test_gcplan.c - the shared tier's budget collection plan (gcplan.c)
 * against a sort: on random sets of files (ties, ages from a second to all
 * of int64, sizes that saturate) the two walks remove exactly what a
 * stable sort by age bucket would, oldest first until the rest fits; the
 * buckets are within 1/64 of an age; files vanishing between the walks
 * end it anyway.
 */
#include <stdlib.h>
#include <string.h>

#include "gcplan.h"
#include "t.h"

struct file {
	int64_t mtime;
	uint64_t bytes;
	bool gone;
};

static const int64_t now = 1764800000;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Walk the files with the plan, as a collector does; vanish: a file
 * removed behind the plan's back before walk 2 (another collector). */
static unsigned plan_run(struct file *f, size_t n, uint64_t budget, size_t vanish)
{
	struct gcplan p;
	unsigned walks = 0;

	T_OK(gcplan_init(&p, budget, now));
	do {
		if (++walks == 2 && vanish < n)
			f[vanish].gone = true;
		for (size_t i = 0; i < n; i++)
			if (!f[i].gone && gcplan_see(&p, f[i].mtime, f[i].bytes))
				f[i].gone = true;
		T_ASSERT(walks <= 2);
	} while (gcplan_next(&p));
	gcplan_free(&p);
	return walks;
}

static uint32_t *sort_key;

static int oldest_first(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	if (sort_key[x] != sort_key[y])
		return sort_key[x] > sort_key[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* What a sort removes: oldest age bucket first, in walk order within one,
 * until the rest fits the budget. */
static void sort_run(const struct file *f, size_t n, uint64_t budget, bool *gone)
{
	size_t *ord = malloc(n * sizeof(*ord));
	uint32_t *keys = malloc(n * sizeof(*keys));
	uint64_t total = 0;

	T_ASSERT(ord && keys);
	for (size_t i = 0; i < n; i++) {
		ord[i] = i;
		keys[i] = gcplan_bucket(now, f[i].mtime);
		total += f[i].bytes;
		gone[i] = false;
	}
	sort_key = keys;
	qsort(ord, n, sizeof(*ord), oldest_first);
	for (size_t i = 0; i < n && budget && total > budget; i++) {
		gone[ord[i]] = true;
		total -= f[ord[i]].bytes;
	}
	free(ord);
	free(keys);
}

static uint32_t bucket_of_age(uint64_t age)
{
	return gcplan_bucket(INT64_MAX, (int64_t)((uint64_t)INT64_MAX - age));
}

/* Buckets: exact below 64 s, then monotonic and at most 1/64 of an age
 * wide (an age and 1/64 more are at most 2 buckets apart), to 2^64-1. */
static void test_buckets(void)
{
	uint32_t prev = 0;

	T_EQ_INT(gcplan_bucket(now, now + 100), 0);
	for (uint64_t a = 0; a < 64; a++)
		T_EQ_INT(gcplan_bucket(now, now - (int64_t)a), a);
	for (unsigned i = 0; i < 200000; i++) {
		uint64_t a = rnd() >> (1 + rnd() % 63);
		uint32_t ba = bucket_of_age(a), bb = bucket_of_age(a + a / 64);
		T_ASSERT(ba < GCPLAN_BUCKETS && bb < GCPLAN_BUCKETS);
		T_ASSERT(bb >= ba && bb - ba <= 2);
		T_ASSERT(a < 64 || bucket_of_age(a + a / 32 + 1) > ba);
	}
	for (uint64_t a = 1; a; a <<= 1) {
		T_ASSERT(bucket_of_age(a) > prev || a == 1);
		prev = bucket_of_age(a);
	}
	T_EQ_INT(bucket_of_age(UINT64_MAX), GCPLAN_BUCKETS - 1);
	T_EQ_INT(gcplan_bucket(INT64_MAX, INT64_MIN), GCPLAN_BUCKETS - 1);
}

static void test_random(void)
{
	static const uint64_t spans[] = { 0, 3, 1000, 65536, 86400 * 30, 1ull << 33, 1ull << 50 };
	unsigned cases = 0;

	for (unsigned s = 0; s < sizeof(spans) / sizeof(spans[0]); s++) {
		for (unsigned round = 0; round < 40; round++) {
			size_t n = 1 + rnd() % 3000;
			struct file *f = calloc(n, sizeof(*f));
			bool *want = calloc(n, sizeof(*want));
			uint64_t total = 0, budget, removed = 0;
			unsigned walks;

			T_ASSERT(f && want);
			for (size_t i = 0; i < n; i++) {
				/* every third set: a few ages shared by many files */
				uint64_t age = round % 3 == 0 ? rnd() % 8 * (spans[s] / 8 + 1)
							      : rnd() % (spans[s] + 1);
				f[i].mtime = now - (int64_t)age;
				f[i].bytes = 1 + rnd() % (1u << 20);
				total += f[i].bytes;
			}
			budget = round % 5 == 4 ? total : rnd() % total;
			sort_run(f, n, budget, want);
			walks = plan_run(f, n, budget, SIZE_MAX);
			for (size_t i = 0; i < n; i++) {
				T_ASSERT(f[i].gone == want[i]);
				if (f[i].gone)
					removed += f[i].bytes;
			}
			T_EQ_INT(walks, !budget || budget >= total ? 1 : 2);
			/* enough went (no more: the sort stops as soon as it fits) */
			if (budget && budget < total)
				T_ASSERT(total - removed <= budget);
			cases++;
			free(f);
			free(want);
		}
	}
	printf("gcplan: %u random sets as a sort by age bucket would\n", cases);
}

/* Hostile listings: mtimes at both ends of int64, sizes of 2^64-1. */
static void test_extremes(void)
{
	struct file f[] = {
		{ INT64_MIN, 10, false }, { INT64_MAX, 10, false }, { 0, UINT64_MAX, false },
		{ -(INT64_C(1) << 40), 7, false }, { INT64_MIN + 1, 3, false },
	};
	size_t n = sizeof(f) / sizeof(f[0]);

	T_EQ_INT(plan_run(f, n, 100, SIZE_MAX), 2);
	/* the sum saturates: everything up to the huge file goes, oldest first */
	T_ASSERT(f[0].gone && f[4].gone && f[3].gone && f[2].gone);
	T_ASSERT(!f[1].gone);
}

/* A file another collector removes between the walks: no kept file is in
 * an older bucket than a removed one. */
static void test_vanish(void)
{
	for (unsigned round = 0; round < 50; round++) {
		size_t n = 2 + rnd() % 500, v = rnd() % n;
		struct file *f = calloc(n, sizeof(*f));
		uint64_t total = 0;
		uint32_t youngest_gone = UINT32_MAX, oldest_kept = 0;

		T_ASSERT(f);
		for (size_t i = 0; i < n; i++) {
			f[i].mtime = now - (int64_t)(rnd() % 100000);
			f[i].bytes = 1 + rnd() % 4096;
			total += f[i].bytes;
		}
		plan_run(f, n, total / 2, v);
		for (size_t i = 0; i < n; i++) {
			uint32_t b = gcplan_bucket(now, f[i].mtime);
			if (i == v)
				continue;
			if (f[i].gone && b < youngest_gone)
				youngest_gone = b;
			if (!f[i].gone && b > oldest_kept)
				oldest_kept = b;
		}
		T_ASSERT(youngest_gone >= oldest_kept);
		free(f);
	}
}

int main(void)
{
	struct gcplan p;

	test_buckets();
	test_random();
	test_extremes();
	test_vanish();
	/* no budget: no histogram, one walk */
	T_OK(gcplan_init(&p, 0, now));
	T_ASSERT(!p.hist && !gcplan_see(&p, 0, 1) && !gcplan_next(&p));
	gcplan_free(&p);
	return 0;
}

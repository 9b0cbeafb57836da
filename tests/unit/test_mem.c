/* test_mem.c - the allocation wrapper counts exactly and fails on cue. */
#include "kvt_int.h"
#include "t.h"

int main(void)
{
	struct kvt_mem m;
	void *a, *b, *c;
	char *s;

	kvt_mem_init(&m);
	a = kvt_mem_alloc(&m, 100);
	T_ASSERT(a);
	T_EQ_INT(atomic_load(&m.bytes), 100);
	b = kvt_mem_calloc(&m, 10, 8);
	T_ASSERT(b);
	T_EQ_INT(((char *)b)[79], 0);
	T_EQ_INT(atomic_load(&m.bytes), 180);
	b = kvt_mem_realloc(&m, b, 80, 800);
	T_ASSERT(b);
	T_EQ_INT(atomic_load(&m.bytes), 900);
	T_EQ_INT(atomic_load(&m.peak_bytes), 900);
	kvt_mem_free(&m, b, 800);
	T_EQ_INT(atomic_load(&m.bytes), 100);
	T_EQ_INT(atomic_load(&m.peak_bytes), 900);

	/* Overflowing calloc and zero sizes fail without counting. */
	T_ASSERT(kvt_mem_calloc(&m, SIZE_MAX / 2, 4) == NULL);
	T_ASSERT(kvt_mem_alloc(&m, 0) == NULL);
	T_EQ_INT(atomic_load(&m.bytes), 100);

	/* The 3rd allocation from now fails, and only that one. */
	kvt_mem_fail_nth(&m, 3);
	b = kvt_mem_alloc(&m, 1);
	c = kvt_mem_alloc(&m, 1);
	T_ASSERT(b && c);
	T_ASSERT(kvt_mem_alloc(&m, 1) == NULL);
	s = kvt_mem_strdup(&m, "kvtier");
	T_ASSERT(s);
	T_EQ_STR(s, "kvtier");
	T_EQ_INT(atomic_load(&m.bytes), 109);
	kvt_mem_strfree(&m, s);
	kvt_mem_free(&m, b, 1);
	kvt_mem_free(&m, c, 1);
	/* A failed realloc leaves the block alone. */
	kvt_mem_fail_nth(&m, 1);
	T_ASSERT(kvt_mem_realloc(&m, a, 100, 200) == NULL);
	T_EQ_INT(atomic_load(&m.bytes), 100);
	kvt_mem_free(&m, a, 100);
	kvt_mem_free(&m, NULL, 5);
	T_EQ_INT(atomic_load(&m.bytes), 0);
	return 0;
}

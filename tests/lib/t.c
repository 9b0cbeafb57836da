/* t.c - helpers shared by the test programs (see t.h). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "t.h"

char *t_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *path;
	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/kvtier-test-XXXXXX", base) < 0)
		T_FAIL("asprintf");
	if (!mkdtemp(path))
		T_FAIL("mkdtemp %s", path);
	return path;
}

static int t_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

void t_rmtree(const char *path)
{
	if (path)
		nftw(path, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint8_t *t_at_guard(const void *src, size_t len)
{
	static uint8_t *area; /* mapped once per test program, never unmapped */
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *dst;

	if (!area) {
		uint8_t *p;
		if (page <= 0 || T_GUARD_AREA % (size_t)page)
			T_FAIL("page size %ld", page);
		p = mmap(NULL, T_GUARD_AREA + (size_t)page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED || mprotect(p + T_GUARD_AREA, (size_t)page, PROT_NONE) != 0)
			T_FAIL("guard page: mmap/mprotect failed");
		area = p;
	}
	if (len > T_GUARD_AREA)
		T_FAIL("t_at_guard: %zu bytes > %u", len, T_GUARD_AREA);
	dst = area + T_GUARD_AREA - len;
	if (src && len)
		memmove(dst, src, len);
	return dst;
}

/* t.c - helpers shared by the test programs (see t.h). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
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

/*
 * size.c - the one size grammar (kvt_parse_size, kvtier.h): the library's
 * options, kvtierd's flags and files, and the CLI all read sizes here.
 *
 *   size   = digits [ unit ] [ "i" ] [ "B" | "b" ]     (no spaces, no sign)
 *   unit   = K | M | G | T, either case: powers of 1024
 *
 * So 512, 100B, 64K, 64k, 64KB, 64KiB, 64Ki, 1mb, 2G and 1T all parse;
 * -1, 1.5G, 1 G, 1P, 1KK, 1iB and an empty string do not, nor does a
 * value that overflows 64 bits.  The base layer: calls nothing.
 */
#include <errno.h>
#include <stdlib.h>

#include "kvt_int.h"

int kvt_parse_size(const char *s, uint64_t *out)
{
	unsigned long long n;
	unsigned shift = 0;
	int saved_errno = errno, overflow;
	char *end;

	if (!s || !out)
		return KVT_ENULL;
	if (*s < '0' || *s > '9')
		return KVT_EOPTVAL; /* also '-', '+', spaces, and "" */
	errno = 0;
	n = strtoull(s, &end, 10);
	overflow = errno;
	errno = saved_errno; /* the caller's errno is never changed */
	if (overflow)
		return KVT_EOPTVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && n > (UINT64_MAX >> shift)))
		return KVT_EOPTVAL;
	*out = (uint64_t)n << shift;
	return 0;
}

/*
 * bench_reply.c - the parsers of what "kvtier bench net" reads from its
 * peers: memcached's meta reply lines, RESP reply lines (redis-server), and
 * numbers in the JSON that iperf3 and fio print.
 *
 * Pure functions over caller memory: no I/O, no allocation, no global
 * state, any thread; they never read past the length they are given (the
 * input need not be NUL-terminated).  The kvtierd side needs none of this:
 * its frames go through lib/proto.h.  Fuzzed by tests/fuzz/fuzz_netreply.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Decimal digits at p[0..len) (all of them, at least one, at most 20,
 * no overflow) into *v.  0 or -EPROTO. */
static int reply_u64(const char *p, size_t len, uint64_t *v)
{
	uint64_t x = 0;
	if (len == 0 || len > 20)
		return -EPROTO;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EPROTO;
		unsigned d = (unsigned)(p[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EPROTO;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

static bool reply_is(const char *line, size_t len, const char *word)
{
	size_t n = strlen(word);
	return len >= n && memcmp(line, word, n) == 0 && (len == n || line[n] == ' ');
}

int bench_reply_mc(const char *line, size_t len, uint64_t *vlen)
{
	*vlen = 0;
	if (reply_is(line, len, "EN"))
		return BENCH_REPLY_MISS;
	if (reply_is(line, len, "HD"))
		return BENCH_REPLY_STORED;
	if (reply_is(line, len, "MN"))
		return BENCH_REPLY_PONG;
	if (len > 3 && memcmp(line, "VA ", 3) == 0) {
		size_t end = 3;
		while (end < len && line[end] != ' ')
			end++;
		return reply_u64(line + 3, end - 3, vlen) == 0 ? BENCH_REPLY_VALUE : -EPROTO;
	}
	return -EPROTO;
}

int bench_reply_resp(const char *line, size_t len, uint64_t *vlen)
{
	*vlen = 0;
	if (len == 3 && memcmp(line, "$-1", 3) == 0)
		return BENCH_REPLY_MISS;
	if (len == 3 && memcmp(line, "+OK", 3) == 0)
		return BENCH_REPLY_STORED;
	if (len == 5 && memcmp(line, "+PONG", 5) == 0)
		return BENCH_REPLY_PONG;
	if (len >= 2 && line[0] == '$')
		return reply_u64(line + 1, len - 1, vlen) == 0 ? BENCH_REPLY_VALUE : -EPROTO;
	return -EPROTO; /* "-ERR ...", "-OOM ...", anything else */
}

/* First occurrence of needle[0..nl) in hay[0..hl), or NULL. */
static const char *reply_find(const char *hay, size_t hl, const char *needle, size_t nl)
{
	if (nl == 0 || hl < nl)
		return NULL;
	return memmem(hay, hl, needle, nl);
}

int bench_reply_json_num(const char *json, size_t len, const char *const *keys, unsigned n,
			 double *out)
{
	const char *p = json, *end = json + len;
	char quoted[72], num[64];

	if (n == 0)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		size_t kl = strlen(keys[i]);
		if (kl + 2 > sizeof(quoted))
			return -EINVAL;
		quoted[0] = '"';
		memcpy(quoted + 1, keys[i], kl);
		quoted[kl + 1] = '"';
		const char *q = reply_find(p, (size_t)(end - p), quoted, kl + 2);
		if (!q)
			return -ENOENT;
		p = q + kl + 2;
	}
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	if (p == end || *p != ':')
		return -EPROTO;
	p++;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	size_t k = 0;
	while (p + k < end && k < sizeof(num) - 1 && strchr("0123456789+-.eE", p[k]) && p[k])
		k++;
	if (k == 0 || k == sizeof(num) - 1)
		return -EPROTO;
	memcpy(num, p, k);
	num[k] = '\0';
	char *stop;
	double v = strtod(num, &stop);
	if (stop != num + k || !(v >= 0 && v <= 1e30))
		return -EPROTO;
	*out = v;
	return 0;
}

/*
 * test_bench_reply.c - the net bench's reply parsers (bench/bench_reply.c):
 * memcached meta lines, RESP lines, JSON numbers of iperf3 and fio; every
 * input also ending at a guard page, and every truncated prefix.
 */
#include <errno.h>

#include "t.h"

#include "../../bench/bench.h"

/* Parse s with f both from a plain buffer and from one ending at a guard
 * page; the two must agree. */
static int mc(const char *s, uint64_t *v)
{
	uint64_t g;
	int rc = bench_reply_mc(s, strlen(s), v);
	T_EQ_INT(bench_reply_mc((const char *)t_at_guard(s, strlen(s)), strlen(s), &g), rc);
	T_EQ_U64(g, *v);
	return rc;
}

static int resp(const char *s, uint64_t *v)
{
	uint64_t g;
	int rc = bench_reply_resp(s, strlen(s), v);
	T_EQ_INT(bench_reply_resp((const char *)t_at_guard(s, strlen(s)), strlen(s), &g), rc);
	T_EQ_U64(g, *v);
	return rc;
}

int main(void)
{
	uint64_t v;
	double d;

	T_EQ_INT(mc("VA 2097152", &v), BENCH_REPLY_VALUE);
	T_EQ_U64(v, 2097152);
	T_EQ_INT(mc("VA 16777216 t f0", &v), BENCH_REPLY_VALUE);
	T_EQ_U64(v, 16777216);
	T_EQ_INT(mc("VA 18446744073709551615", &v), BENCH_REPLY_VALUE);
	T_EQ_U64(v, UINT64_MAX);
	T_EQ_INT(mc("VA 18446744073709551616", &v), -EPROTO); /* overflow */
	T_EQ_INT(mc("VA -1", &v), -EPROTO);
	T_EQ_INT(mc("VA ", &v), -EPROTO);
	T_EQ_INT(mc("VA 12x", &v), -EPROTO);
	T_EQ_INT(mc("EN", &v), BENCH_REPLY_MISS);
	T_EQ_INT(mc("HD", &v), BENCH_REPLY_STORED);
	T_EQ_INT(mc("HD c1", &v), BENCH_REPLY_STORED);
	T_EQ_INT(mc("MN", &v), BENCH_REPLY_PONG);
	T_EQ_INT(mc("HDX", &v), -EPROTO);
	T_EQ_INT(mc("SERVER_ERROR Out of memory during read", &v), -EPROTO);
	T_EQ_INT(mc("", &v), -EPROTO);

	T_EQ_INT(resp("$262144", &v), BENCH_REPLY_VALUE);
	T_EQ_U64(v, 262144);
	T_EQ_INT(resp("$-1", &v), BENCH_REPLY_MISS);
	T_EQ_INT(resp("$-2", &v), -EPROTO);
	T_EQ_INT(resp("+OK", &v), BENCH_REPLY_STORED);
	T_EQ_INT(resp("+PONG", &v), BENCH_REPLY_PONG);
	T_EQ_INT(resp("-OOM command not allowed when used memory > 'maxmemory'.", &v), -EPROTO);
	T_EQ_INT(resp("$", &v), -EPROTO);
	T_EQ_INT(resp("", &v), -EPROTO);

	/* Every truncated prefix of a value line parses to a shorter value or
	 * fails; never reads past its end (the guard page). */
	const char *line = "VA 2097152";
	for (size_t n = 0; n <= strlen(line); n++) {
		int rc = bench_reply_mc((const char *)t_at_guard(line, n), n, &v);
		T_ASSERT(rc == -EPROTO || (rc == BENCH_REPLY_VALUE && n > 3));
	}

	static const char *const iperf[] = { "sum_received", "bits_per_second" };
	static const char *const fio[] = { "jobs", "read", "bw_bytes" };
	const char *ij = "{\"end\":{\"sum_sent\":{\"bits_per_second\":1},"
			 "\"sum_received\":{\"bytes\":5, \"bits_per_second\" : 2.5e10}}}";
	T_EQ_INT(bench_reply_json_num(ij, strlen(ij), iperf, 2, &d), 0);
	T_ASSERT(d == 2.5e10); /* the received one, not the sent one before it */
	const char *fj = "{\"jobs\":[{\"write\":{\"bw_bytes\":7},\"read\":{\"bw_bytes\":1500000000}}]}";
	T_EQ_INT(bench_reply_json_num(fj, strlen(fj), fio, 3, &d), 0);
	T_ASSERT(d == 1500000000.0);
	T_EQ_INT(bench_reply_json_num(fj, strlen(fj), iperf, 2, &d), -ENOENT);
	const char *bad = "{\"jobs\":{\"read\":{\"bw_bytes\":\"x\"}}}";
	T_EQ_INT(bench_reply_json_num(bad, strlen(bad), fio, 3, &d), -EPROTO);
	const char *neg = "{\"jobs\":{\"read\":{\"bw_bytes\":-5}}}";
	T_EQ_INT(bench_reply_json_num(neg, strlen(neg), fio, 3, &d), -EPROTO);
	for (size_t n = 0; n <= strlen(ij); n++) {
		int rc = bench_reply_json_num((const char *)t_at_guard(ij, n), n, iperf, 2, &d);
		T_ASSERT(rc == 0 || rc == -ENOENT || rc == -EPROTO);
	}
	return 0;
}

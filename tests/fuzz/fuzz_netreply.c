/*
 * fuzz_netreply.c - libFuzzer target for bench/bench_reply.c, the parsers
 * of memcached meta lines, RESP lines and the JSON numbers of iperf3 and
 * fio that "kvtier bench net" reads from its peers.
 *
 * Input: one selector byte, then the bytes handed to the parser (in a
 * buffer of exactly that size, so ASan sees any read past it).  Properties:
 * a VALUE result's length is the decimal the line spells (printed back, it
 * matches the digits); MISS, STORED and PONG only for their exact words;
 * a JSON number is finite and >= 0.  Returns 0 always; a broken property
 * traps.  Seed corpus: tests/fuzz/corpus/netreply/.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/bench.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_value(const char *digits, size_t len, uint64_t vlen)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64, vlen);
	/* leading zeros are digits too: compare the value, not the text */
	size_t skip = 0;
	while (skip + 1 < len && digits[skip] == '0')
		skip++;
	FUZZ_CHECK((size_t)n == len - skip && memcmp(buf, digits + skip, (size_t)n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned sel = data[0] % 3;
	size_t len = size - 1;
	char *p = malloc(len ? len : 1);
	if (!p)
		return 0;
	memcpy(p, data + 1, len);
	uint64_t vlen = 0;
	double v = -1;
	int rc;

	switch (sel) {
	case 0:
		rc = bench_reply_mc(p, len, &vlen);
		if (rc == BENCH_REPLY_VALUE) {
			FUZZ_CHECK(len > 3 && memcmp(p, "VA ", 3) == 0);
			size_t end = 3;
			while (end < len && p[end] != ' ')
				end++;
			fuzz_value(p + 3, end - 3, vlen);
		} else {
			FUZZ_CHECK(vlen == 0);
			FUZZ_CHECK(rc < 0 || len >= 2);
		}
		break;
	case 1:
		rc = bench_reply_resp(p, len, &vlen);
		if (rc == BENCH_REPLY_VALUE) {
			FUZZ_CHECK(len >= 2 && p[0] == '$');
			fuzz_value(p + 1, len - 1, vlen);
		} else if (rc == BENCH_REPLY_MISS) {
			FUZZ_CHECK(len == 3 && memcmp(p, "$-1", 3) == 0);
		} else if (rc == BENCH_REPLY_STORED) {
			FUZZ_CHECK(len == 3 && memcmp(p, "+OK", 3) == 0);
		}
		break;
	default: {
		static const char *const iperf[] = { "sum_received", "bits_per_second" };
		static const char *const fio[] = { "jobs", "read", "bw_bytes" };
		rc = bench_reply_json_num(p, len, iperf, 2, &v);
		FUZZ_CHECK(rc < 0 || (v >= 0 && v <= 1e30));
		rc = bench_reply_json_num(p, len, fio, 3, &v);
		FUZZ_CHECK(rc < 0 || (v >= 0 && v <= 1e30));
		break;
	}
	}
	free(p);
	return 0;
}

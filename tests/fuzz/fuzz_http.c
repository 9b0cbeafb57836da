/*
 * fuzz_http.c - libFuzzer target for the metrics listener's HTTP request
 * parser (daemon/http.c, doc/metrics.md).
 *
 * The input is copied to a buffer exactly its size.  Properties, each a
 * trap when broken: results are only the documented codes; HTTP_OK's head
 * lies within the input and within the limit, and its method, target and
 * Authorization value lie inside the head; the head alone, without what
 * follows it, parses to the same result; read in pieces of 1 to 16
 * bytes with its search carried on (http_parse_request_from), each prefix
 * is answered as http_parse_request answers it.  Seed corpus:
 * tests/fuzz/corpus/http/.
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "fuzz.h"

static void fuzz_check(const char *buf, size_t len, size_t max)
{
	struct http_req rq;
	int rc = http_parse_request(buf, len, max, &rq);

	FUZZ_CHECK(rc == HTTP_OK || rc == HTTP_NEED_MORE || rc == HTTP_EMALFORMED ||
		   rc == HTTP_ETOOBIG);
	if (rc != HTTP_OK)
		return;
	FUZZ_CHECK(rq.head_len >= 1 && rq.head_len <= len && rq.head_len <= max);
	FUZZ_CHECK(rq.method == buf && rq.method_len > 0 && rq.method_len < rq.head_len);
	FUZZ_CHECK(rq.path > buf && rq.path + rq.path_len <= buf + rq.head_len && rq.path_len > 0);
	FUZZ_CHECK(rq.minor >= 0 && rq.minor <= 9);
	if (rq.auth)
		FUZZ_CHECK(rq.auth >= buf && rq.auth + rq.auth_len <= buf + rq.head_len);
	/* the head alone parses the same */
	{
		struct http_req r2;
		FUZZ_CHECK(http_parse_request(buf, rq.head_len, max, &r2) == HTTP_OK);
		FUZZ_CHECK(r2.head_len == rq.head_len && r2.path_len == rq.path_len);
	}
}

/* Growing prefixes, step bytes more each, the search carried on. */
static void fuzz_pieces(const char *buf, size_t len, size_t max, size_t step)
{
	size_t scan = 0;

	for (size_t n = 0;; n = n + step < len ? n + step : len) {
		struct http_req r1, r2;
		int c1 = http_parse_request(buf, n, max, &r1);
		int c2 = http_parse_request_from(buf, n, max, &r2, &scan);
		FUZZ_CHECK(c1 == c2);
		FUZZ_CHECK(c2 == HTTP_NEED_MORE ? scan == (n < max ? n : max) : scan == 0);
		if (c1 == HTTP_OK)
			FUZZ_CHECK(r1.head_len == r2.head_len && r1.path == r2.path &&
				   r1.path_len == r2.path_len && r1.auth == r2.auth);
		if (c1 != HTTP_NEED_MORE || n == len)
			return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	fuzz_check(buf, size, 8192);
	fuzz_check(buf, size, 32);
	fuzz_pieces(buf, size, 8192, size ? 1 + (size_t)data[0] % 16 : 1);
	fuzz_pieces(buf, size, 32, size ? 1 + (size_t)data[0] % 16 : 1);
	free(buf);
	return 0;
}

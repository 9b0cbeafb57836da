/*
 * fuzz_sigv4.c - libFuzzer target for the S3 listener's SigV4 pieces
 * (daemon/sigv4.c): the Authorization-header and presigned-query parsers,
 * the canonical request, and the verifier (doc/s3.md).
 *
 * The input is a request head (parsed by s3http.c first; anything it
 * refuses ends there).  Properties, each a trap when broken: results are
 * the documented codes; parsed fields are NUL-terminated within their
 * arrays; the canonical request fits the buffer it was given or is
 * refused; it is deterministic; a request re-signed with the server's own
 * signature verifies, and with one hex digit changed does not.  Seed
 * corpus: tests/fuzz/corpus/sigv4/.
 */
#include <stdlib.h>
#include <string.h>

#include "s3http.h"
#include "sigv4.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char creq[8192], creq2[8192];
	struct s3h_hdr hd[S3H_HDRS_MAX];
	struct s3h_req rq;
	struct sigv4_cred c;
	struct sigv4_req sr = { 0 };
	char *buf = malloc(size ? size : 1);
	const char *q, *v;
	size_t vl, pl;
	int r;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (s3h_parse(buf, size, S3H_HEAD_MAX, hd, S3H_HDRS_MAX, &rq) != S3H_OK)
		goto out;
	q = memchr(rq.target, '?', rq.target_len);
	pl = q ? (size_t)(q - rq.target) : rq.target_len;
	v = s3h_header(&rq, "authorization", &vl);
	if (v) {
		r = sigv4_parse_header(v, vl, &c);
		FUZZ_CHECK(r == 0 || r == SIGV4_EMALFORMED);
		if (r)
			goto out;
		memcpy(c.amz_date, "20261201T000000Z", 17);
	} else {
		r = sigv4_parse_query(q ? q + 1 : "", q ? rq.target_len - pl - 1 : 0, &c);
		FUZZ_CHECK(r == 0 || r == 1 || r == SIGV4_EMALFORMED);
		if (r)
			goto out;
	}
	FUZZ_CHECK(memchr(c.access_key, 0, sizeof(c.access_key)));
	FUZZ_CHECK(memchr(c.signed_headers, 0, sizeof(c.signed_headers)));
	FUZZ_CHECK(memchr(c.scope, 0, sizeof(c.scope)));
	FUZZ_CHECK(strlen(c.signature) == 64);
	sr.method = rq.method;
	sr.method_len = rq.method_len;
	sr.path = rq.target;
	sr.path_len = pl;
	sr.query = q ? q + 1 : "";
	sr.query_len = q ? rq.target_len - pl - 1 : 0;
	sr.hdrs = hd;
	sr.hdr_count = rq.hdr_count;
	sr.payload_hash = "UNSIGNED-PAYLOAD";
	sr.payload_hash_len = 16;
	{
		size_t cap = 64 + (size % 8000);
		int64_t n = sigv4_canonical(&sr, &c, creq, cap);
		FUZZ_CHECK(n == SIGV4_ETOOBIG || n == SIGV4_EMALFORMED || (n >= 0 && (size_t)n <= cap));
		if (n < 0)
			goto out;
		int64_t n2 = sigv4_canonical(&sr, &c, creq2, sizeof(creq2));
		FUZZ_CHECK(n2 == n && memcmp(creq, creq2, (size_t)n) == 0);
		/* sign it as a client would, then verify; one digit off fails */
		uint8_t key[32];
		char sig[65];
		int64_t now = sigv4_time(c.amz_date);
		if (now < 0 || memcmp(c.amz_date, c.date, 8) != 0)
			goto out;
		sigv4_sign(&c, "fuzz-secret-0123", 16, creq, (size_t)n, key, sig);
		memcpy(c.signature, sig, 65);
		uint8_t k0[SIGV4_KEY0_MAX];
		size_t k0l = sigv4_key0("fuzz-secret-0123", 16, k0);
		FUZZ_CHECK(sigv4_verify(&c, k0, k0l, creq, (size_t)n, now, key) == 0);
		c.signature[7] = c.signature[7] == 'a' ? 'b' : 'a';
		FUZZ_CHECK(sigv4_verify(&c, k0, k0l, creq, (size_t)n, now, key) ==
			   SIGV4_EMISMATCH);
	}
out:
	free(buf);
	return 0;
}

/*
 * fuzz_s3http.c - libFuzzer target for the S3 listener's HTTP/1.1
 * request-head parser (daemon/s3http.c, doc/s3.md).
 *
 * The input is copied to a buffer exactly its size.  Properties, each a
 * trap when broken: results are only the documented codes; an S3H_OK head
 * lies within the input and the limit, every field and header lies inside
 * it, the header count is within the caller's array; Content-Length and
 * chunked never come together; the head alone parses the same; every
 * shorter prefix of a complete head is "need more".  The target's query
 * parameters (s3h_query, what ListObjects(V2) and ListParts read) decode
 * into a buffer exactly cap bytes long, never past it, with a result that
 * is -1, -2 or a length within cap; a value found decodes the same into a
 * larger buffer.  Read in pieces with its search carried on
 * (s3h_parse_from), each prefix of the input is answered as s3h_parse
 * answers it.  Each Host header's value is matched against fixed
 * --s3-domain names (s3h_vhost, virtual-hosted-style addressing) into a
 * buffer exactly cap bytes long: the result is one of the documented
 * codes; a bucket found is NUL-terminated within cap, lowercase, and the
 * host (port and one trailing dot dropped, case folded) is that bucket, a
 * dot and one of the names; the same host with more room gives the same
 * answer.  Seed corpus: tests/fuzz/corpus/s3http/.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3http.h"
#include "fuzz.h"

static int fuzz_parse(const char *buf, size_t len, size_t max, unsigned hmax, struct s3h_req *rq,
		      struct s3h_hdr *hd)
{
	int rc = s3h_parse(buf, len, max, hd, hmax, rq);
	FUZZ_CHECK(rc == S3H_OK || rc == S3H_NEED_MORE || rc == S3H_EMALFORMED ||
		   rc == S3H_ETOOBIG || rc == S3H_ETOOMANY || rc == S3H_EUNSUPPORTED);
	return rc;
}

/* s3h_vhost on one Host value: the properties in the header comment. */
static void fuzz_vhost(const char *v, size_t vl, size_t cap)
{
	static const char domains[] = "s3.test,example.com,b.example.com";
	char *out = malloc(cap ? cap : 1), big[S3H_HOST_MAX + 1];
	int r, r2;

	if (!out)
		return;
	r = s3h_vhost(v, vl, domains, out, cap);
	FUZZ_CHECK(r >= 0 || r == S3H_EMALFORMED || r == S3H_ETOOBIG);
	r2 = s3h_vhost(v, vl, domains, big, sizeof(big));
	if (r >= 0 || r == S3H_EMALFORMED)
		FUZZ_CHECK(r2 == r);
	if (r > 0) {
		size_t hl = vl, bl = (size_t)r;
		const char *colon = memchr(v, ':', vl);
		bool under = false;
		FUZZ_CHECK(bl < cap && out[bl] == 0 && memcmp(out, big, bl + 1) == 0);
		for (size_t i = 0; i < bl; i++)
			FUZZ_CHECK(!(out[i] >= 'A' && out[i] <= 'Z'));
		if (colon)
			hl = (size_t)(colon - v);
		if (hl && v[hl - 1] == '.')
			hl--;
		FUZZ_CHECK(hl > bl + 1 && v[bl] == '.' && strncasecmp(v, out, bl) == 0);
		for (const char *d = domains; *d;) {
			const char *e = strchr(d, ',');
			size_t dl = e ? (size_t)(e - d) : strlen(d);
			under |= dl == hl - bl - 1 && strncasecmp(v + bl + 1, d, dl) == 0;
			d += dl + (e ? 1 : 0);
		}
		FUZZ_CHECK(under);
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3h_hdr hd[S3H_HDRS_MAX];
	struct s3h_req rq;
	size_t max = size > 0 ? 64 + (size_t)data[0] * 64 : S3H_HEAD_MAX;
	unsigned hmax = size > 1 ? 1 + data[1] % S3H_HDRS_MAX : S3H_HDRS_MAX;
	char *buf = malloc(size ? size : 1);
	int rc;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	rc = fuzz_parse(buf, size, max, hmax, &rq, hd);
	/* read in pieces of 1 to 16 bytes, the search carried on: each
	 * prefix answered as s3h_parse answers it */
	{
		size_t scan = 0, step = size > 2 ? 1 + data[2] % 16 : 1;
		for (size_t n = 0;; n = n + step < size ? n + step : size) {
			struct s3h_req r1, r2;
			int c1 = s3h_parse(buf, n, max, hd, hmax, &r1);
			int c2 = s3h_parse_from(buf, n, max, hd, hmax, &r2, &scan);
			FUZZ_CHECK(c1 == c2);
			FUZZ_CHECK(c2 == S3H_NEED_MORE ? scan == (n < max ? n : max) : scan == 0);
			if (c1 == S3H_OK)
				FUZZ_CHECK(r1.head_len == r2.head_len && r1.hdr_count == r2.hdr_count &&
					   r1.content_length == r2.content_length);
			if (c1 != S3H_NEED_MORE || n == size)
				break;
		}
	}
	if (rc == S3H_OK) {
		const char *end = buf + rq.head_len;
		FUZZ_CHECK(rq.head_len >= 4 && rq.head_len <= size && rq.head_len <= max);
		FUZZ_CHECK(rq.method == buf && rq.method_len > 0);
		FUZZ_CHECK(rq.target > buf && rq.target + rq.target_len <= end);
		FUZZ_CHECK(rq.hdr_count <= hmax);
		FUZZ_CHECK(!(rq.chunked && rq.content_length >= 0));
		for (unsigned i = 0; i < rq.hdr_count; i++) {
			FUZZ_CHECK(hd[i].name >= buf && hd[i].name + hd[i].name_len <= end);
			FUZZ_CHECK(hd[i].value >= buf && hd[i].value + hd[i].value_len <= end);
			FUZZ_CHECK(hd[i].name_len > 0);
		}
		/* virtual-hosted style: every Host header */
		for (unsigned i = 0; i < rq.hdr_count; i++)
			if (hd[i].name_len == 4 && strncasecmp(hd[i].name, "host", 4) == 0)
				fuzz_vhost(hd[i].value, hd[i].value_len,
					   size > 3 ? (size_t)data[3] % 80 : 64);
		/* query parameters: bounded, and the same with more room */
		{
			static const char *const names[] = { "prefix", "delimiter", "max-keys",
							     "continuation-token", "uploadId", "" };
			size_t cap = size > 2 ? data[2] % 40 : 8;
			for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
				char *out = malloc(cap ? cap : 1), *big = malloc(rq.target_len + 1);
				if (!out || !big) {
					free(out);
					free(big);
					break;
				}
				int64_t l = s3h_query(rq.target, rq.target_len, names[n], out, cap);
				FUZZ_CHECK(l == -1 || l == -2 || (l >= 0 && (size_t)l <= cap));
				if (l >= 0) {
					int64_t l2 = s3h_query(rq.target, rq.target_len, names[n], big,
							       rq.target_len + 1);
					FUZZ_CHECK(l2 == l && memcmp(out, big, (size_t)l) == 0);
				}
				free(out);
				free(big);
			}
		}
		/* the head alone parses the same; a shorter prefix needs more */
		{
			struct s3h_hdr h2[S3H_HDRS_MAX];
			struct s3h_req r2;
			char *head = malloc(rq.head_len);
			if (head) {
				memcpy(head, buf, rq.head_len);
				FUZZ_CHECK(fuzz_parse(head, rq.head_len, max, hmax, &r2, h2) == S3H_OK);
				FUZZ_CHECK(r2.head_len == rq.head_len && r2.hdr_count == rq.hdr_count &&
					   r2.content_length == rq.content_length);
				FUZZ_CHECK(fuzz_parse(head, rq.head_len - 1, max, hmax, &r2, h2) ==
					   S3H_NEED_MORE);
				free(head);
			}
		}
	}
	free(buf);
	return 0;
}

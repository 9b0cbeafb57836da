/*
 * sigv4.h - AWS Signature Version 4 on the server side, for kvtierd's S3
 * listener (s3d.c): parsing the Authorization header and presigned-URL
 * query, the canonical request, the signing key, the verification (a
 * constant-time compare), the clock-skew and expiry checks, and the chunk
 * signatures of STREAMING-AWS4-HMAC-SHA256-PAYLOAD bodies.
 *
 * The algorithm is AWS's ("Signature Version 4 signing process", and
 * "Signature Calculations for the Authorization Header: Transferring
 * Payload in Multiple Chunks"); HMAC and SHA-256 are OpenSSL's.  The
 * client side of the same algorithm is lib/shs3.c (shs3_sign): the unit
 * test checks the two against each other and against AWS's examples.
 *
 * No allocation, no I/O, no clock: the caller passes "now".  Fuzzed
 * (tests/fuzz/fuzz_sigv4.c).  Threads: any.
 */
#ifndef KVTD_SIGV4_H
#define KVTD_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "s3http.h"

#define SIGV4_EMALFORMED (-7401) /* Authorization or X-Amz-* query not parseable */
#define SIGV4_EMISMATCH (-7402)  /* SignatureDoesNotMatch */
#define SIGV4_ESKEW (-7403)      /* RequestTimeTooSkewed */
#define SIGV4_EEXPIRED (-7404)   /* presigned URL past X-Amz-Expires */
#define SIGV4_ETOOBIG (-7405)    /* canonical request past the caller's buffer */

#define SIGV4_SKEW_MAX_S 900     /* AWS's 15 minutes */
#define SIGV4_EXPIRES_MAX_S 604800 /* presigned URLs: at most 7 days, as AWS */
#define SIGV4_AK_MAX 64          /* access key id = tenant name (PROTO_TENANT_MAX) */

struct sigv4_cred {
	char access_key[SIGV4_AK_MAX + 1];
	char date[9];            /* yyyymmdd of the scope */
	char region[64];
	char service[16];
	char scope[160];         /* date/region/service/aws4_request */
	char amz_date[17];       /* yyyymmddThhmmssZ: header x-amz-date, or X-Amz-Date */
	char signed_headers[1024]; /* "host;range;x-amz-date", lowercase, sorted */
	char signature[65];      /* lowercase hex, as sent */
	int64_t expires_s;       /* presigned: X-Amz-Expires; else -1 */
	bool presigned;
};

/* "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
 * SignedHeaders=a;b, Signature=HEX".  amz_date is left empty (the caller
 * copies x-amz-date).  0 or SIGV4_EMALFORMED. */
int sigv4_parse_header(const char *v, size_t len, struct sigv4_cred *c);
/* The X-Amz-* parameters of a presigned URL's query (raw, after '?').
 * 0, 1 (no X-Amz-Signature in the query: not presigned), or
 * SIGV4_EMALFORMED. */
int sigv4_parse_query(const char *q, size_t len, struct sigv4_cred *c);

/* yyyymmddThhmmssZ to Unix seconds, or -1. */
int64_t sigv4_time(const char *amz_date);

/*
 * The request as sent.  path and query are raw (percent-encoded as on the
 * wire); payload_hash is x-amz-content-sha256's value, or
 * "UNSIGNED-PAYLOAD" for a presigned URL.
 */
struct sigv4_req {
	const char *method;
	size_t method_len;
	const char *path;
	size_t path_len;
	const char *query;
	size_t query_len;
	const struct s3h_hdr *hdrs;
	unsigned hdr_count;
	const char *payload_hash;
	size_t payload_hash_len;
};

/* The canonical request into out[0, cap): its length, or SIGV4_ETOOBIG,
 * SIGV4_EMALFORMED (a bad escape, too many query parameters). */
int64_t sigv4_canonical(const struct sigv4_req *r, const struct sigv4_cred *c, char *out,
			size_t cap);

/* The first key of a secret's signing keys ("AWS4" + the secret, cut to
 * a SHA-256 block as HMAC cuts it: sigv4.c "A signing key's first key")
 * into out: its length, at most SIGV4_KEY0_MAX. */
#define SIGV4_KEY0_MAX 64
size_t sigv4_key0(const void *secret, size_t secret_len, uint8_t out[SIGV4_KEY0_MAX]);

/*
 * Check a request: the date checks against now_s (skew for header auth,
 * X-Amz-Expires for presigned URLs), then the signature over the
 * canonical request creq with the tenant's secret's first key, key0
 * (sigv4_key0: made once, its cost the same whatever the secret).  On success the signing
 * key goes to key (for chunk signatures).  0, SIGV4_ESKEW, SIGV4_EEXPIRED,
 * SIGV4_EMISMATCH, SIGV4_EMALFORMED.  The compare is constant-time.
 */
int sigv4_verify(const struct sigv4_cred *c, const uint8_t *key0, size_t key0_len,
		 const char *creq, size_t creq_len, int64_t now_s, uint8_t key[32]);

/* The signature of a canonical request (lowercase hex into sig[65]); used
 * by sigv4_verify and by tests that play the client. */
void sigv4_sign(const struct sigv4_cred *c, const void *secret, size_t secret_len,
		const char *creq, size_t creq_len, uint8_t key[32], char sig[65]);

/* A chunk's signature in a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body:
 * prev is the previous chunk's signature (the header's for the first),
 * chunk_sha the SHA-256 of the chunk's data. */
void sigv4_chunk_sign(const uint8_t key[32], const struct sigv4_cred *c, const char prev[65],
		      const uint8_t chunk_sha[32], char sig[65]);

/* Constant-time compare of two lowercase-hex signatures (64 chars). */
bool sigv4_sig_equal(const char *a, size_t a_len, const char b[65]);

void sigv4_hex(const uint8_t *p, size_t n, char *out);

#endif

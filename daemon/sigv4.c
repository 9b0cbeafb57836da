/*
 * sigv4.c - server-side AWS Signature Version 4 (sigv4.h).
 *
 * Owns nothing.  Invariants: every parsed field is bounded by its array
 * (a longer one is SIGV4_EMALFORMED, never truncated); the canonical
 * request is written within cap or refused, and no work is done past cap
 * (its cost is bounded by cap, whatever SignedHeaders names); the
 * signature compare reads all 64 bytes whatever they hold (CRYPTO_memcmp).
 *
 * Canonical request (what both sides hash):
 *
 *   METHOD \n
 *   canonical URI     the path decoded, then each byte but A-Za-z0-9-._~/
 *                     encoded as %XX (S3 does not normalize "." or "//")
 *   canonical query   name=value pairs decoded then encoded the same way
 *                     ('/' too), sorted by name then value; a presigned
 *                     URL's X-Amz-Signature left out
 *   canonical headers "name:value\n" for each signed header, the values
 *                     of repeated headers joined by ',', blanks trimmed
 *                     and runs of blanks collapsed
 *   signed headers    as the client listed them
 *   payload hash
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sigv4.h"

#define SIGV4_QPARAMS_MAX 64

void sigv4_hex(const uint8_t *p, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * n] = 0;
}

static bool sigv4_is(const char *p, size_t len, const char *lit)
{
	size_t l = strlen(lit);
	return len == l && memcmp(p, lit, l) == 0;
}

/* One of the presigned URL's parameters (sigv4_parse_query)? */
static bool sigv4_presign_param(const char *p, size_t len)
{
	static const char *const names[] = { "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
					     "X-Amz-Expires", "X-Amz-SignedHeaders",
					     "X-Amz-Signature" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (sigv4_is(p, len, names[i]))
			return true;
	return false;
}

/* Copy p[0, len) as a C string into dst[cap]: -1 if it does not fit. */
static int sigv4_copy(char *dst, size_t cap, const char *p, size_t len)
{
	if (len >= cap)
		return -1;
	memcpy(dst, p, len);
	dst[len] = 0;
	return 0;
}

/* "AK/DATE/REGION/SERVICE/aws4_request" into c. */
static int sigv4_credential(const char *p, size_t len, struct sigv4_cred *c)
{
	const char *f[5];
	size_t fl[5];
	unsigned n = 0;
	size_t s = 0;

	/* Five fields: the access key (a tenant name) may not hold '/'. */
	for (size_t i = 0; i <= len && n < 5; i++) {
		if (i == len || p[i] == '/') {
			f[n] = p + s;
			fl[n++] = i - s;
			s = i + 1;
		}
	}
	if (n != 5 || s <= len || fl[0] == 0 || fl[1] != 8 || !sigv4_is(f[4], fl[4], "aws4_request"))
		return SIGV4_EMALFORMED;
	for (size_t i = 0; i < 8; i++)
		if (f[1][i] < '0' || f[1][i] > '9')
			return SIGV4_EMALFORMED;
	if (sigv4_copy(c->access_key, sizeof(c->access_key), f[0], fl[0]) < 0 ||
	    sigv4_copy(c->date, sizeof(c->date), f[1], fl[1]) < 0 ||
	    sigv4_copy(c->region, sizeof(c->region), f[2], fl[2]) < 0 ||
	    sigv4_copy(c->service, sizeof(c->service), f[3], fl[3]) < 0 || fl[2] == 0 || fl[3] == 0)
		return SIGV4_EMALFORMED;
	if (sigv4_copy(c->scope, sizeof(c->scope), f[1], len - (size_t)(f[1] - p)) < 0)
		return SIGV4_EMALFORMED;
	return 0;
}

/* Signed headers: lowercase tokens separated by ';'. */
static int sigv4_signed_list(const char *p, size_t len, struct sigv4_cred *c)
{
	if (len == 0 || sigv4_copy(c->signed_headers, sizeof(c->signed_headers), p, len) < 0)
		return SIGV4_EMALFORMED;
	for (size_t i = 0; i < len; i++) {
		char ch = p[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '_' || ch == '.' || ch == ';'))
			return SIGV4_EMALFORMED;
		if (ch == ';' && (i == 0 || i + 1 == len || p[i + 1] == ';'))
			return SIGV4_EMALFORMED;
	}
	return 0;
}

static int sigv4_signature_field(const char *p, size_t len, struct sigv4_cred *c)
{
	if (len != 64)
		return SIGV4_EMALFORMED;
	for (size_t i = 0; i < 64; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return SIGV4_EMALFORMED;
	memcpy(c->signature, p, 64);
	c->signature[64] = 0;
	return 0;
}

int sigv4_parse_header(const char *v, size_t len, struct sigv4_cred *c)
{
	static const char alg[] = "AWS4-HMAC-SHA256 ";
	size_t i = sizeof(alg) - 1;
	unsigned seen = 0;

	memset(c, 0, sizeof(*c));
	c->expires_s = -1;
	if (len < i || memcmp(v, alg, i) != 0)
		return SIGV4_EMALFORMED;
	while (i < len) {
		size_t s, e, eq;
		while (i < len && (v[i] == ' ' || v[i] == ','))
			i++;
		if (i == len)
			break;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && v[e - 1] == ' ')
			e--;
		const char *q = memchr(v + s, '=', e - s);
		if (!q)
			return SIGV4_EMALFORMED;
		eq = (size_t)(q - v);
		const char *val = v + eq + 1;
		size_t vl = e - eq - 1;
		int r;
		if (sigv4_is(v + s, eq - s, "Credential") && !(seen & 1)) {
			r = sigv4_credential(val, vl, c);
			seen |= 1;
		} else if (sigv4_is(v + s, eq - s, "SignedHeaders") && !(seen & 2)) {
			r = sigv4_signed_list(val, vl, c);
			seen |= 2;
		} else if (sigv4_is(v + s, eq - s, "Signature") && !(seen & 4)) {
			r = sigv4_signature_field(val, vl, c);
			seen |= 4;
		} else {
			r = SIGV4_EMALFORMED;
		}
		if (r < 0)
			return r;
	}
	return seen == 7 ? 0 : SIGV4_EMALFORMED;
}

static int sigv4_hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int sigv4_parse_query(const char *q, size_t len, struct sigv4_cred *c)
{
	char buf[1024];
	unsigned seen = 0;
	size_t i = 0;

	memset(c, 0, sizeof(*c));
	c->expires_s = -1;
	while (i < len) {
		size_t s = i, e, eq;
		while (i < len && q[i] != '&')
			i++;
		e = i++;
		const char *x = memchr(q + s, '=', e - s);
		eq = x ? (size_t)(x - q) : e;
		const char *n = q + s;
		size_t nl = eq - s;
		if (nl < 6 || memcmp(n, "X-Amz-", 6) != 0)
			continue;
		int64_t vl = x ? s3h_unescape(q + eq + 1, e - eq - 1, buf, sizeof(buf) - 1) : 0;
		int r = 0;
		unsigned was = seen;
		if (vl < 0)
			return SIGV4_EMALFORMED;
		buf[vl] = 0;
		if (sigv4_is(n, nl, "X-Amz-Algorithm")) {
			if (strcmp(buf, "AWS4-HMAC-SHA256") != 0)
				r = SIGV4_EMALFORMED;
			seen |= 1;
		} else if (sigv4_is(n, nl, "X-Amz-Credential")) {
			r = sigv4_credential(buf, (size_t)vl, c);
			seen |= 2;
		} else if (sigv4_is(n, nl, "X-Amz-Date")) {
			r = sigv4_copy(c->amz_date, sizeof(c->amz_date), buf, (size_t)vl) < 0 ||
					    sigv4_time(c->amz_date) < 0
				    ? SIGV4_EMALFORMED
				    : 0;
			seen |= 4;
		} else if (sigv4_is(n, nl, "X-Amz-Expires")) {
			int64_t v = 0;
			if (vl == 0 || vl > 7)
				r = SIGV4_EMALFORMED;
			for (int64_t k = 0; k < vl && !r; k++) {
				if (buf[k] < '0' || buf[k] > '9')
					r = SIGV4_EMALFORMED;
				v = v * 10 + (buf[k] - '0');
			}
			if (!r && (v < 1 || v > SIGV4_EXPIRES_MAX_S))
				r = SIGV4_EMALFORMED;
			c->expires_s = v;
			seen |= 8;
		} else if (sigv4_is(n, nl, "X-Amz-SignedHeaders")) {
			r = sigv4_signed_list(buf, (size_t)vl, c);
			seen |= 16;
		} else if (sigv4_is(n, nl, "X-Amz-Signature")) {
			r = sigv4_signature_field(buf, (size_t)vl, c);
			seen |= 32;
		}
		if (r < 0)
			return r;
		/* each at most once: the last was used, and X-Amz-Signature,
		 * left out of the canonical query, could be sent twice
		 * (s3fix45, 2026-12-07) */
		if (seen == was && sigv4_presign_param(n, nl))
			return SIGV4_EMALFORMED;
	}
	if (!(seen & 32))
		return 1;
	if (seen != 63)
		return SIGV4_EMALFORMED;
	c->presigned = true;
	return 0;
}

int64_t sigv4_time(const char *d)
{
	int v[6], k = 0;
	static const int at[6] = { 0, 4, 6, 9, 11, 13 }, w[6] = { 4, 2, 2, 2, 2, 2 };
	struct tm tm;

	if (strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
		return -1;
	for (int f = 0; f < 6; f++) {
		v[f] = 0;
		for (k = 0; k < w[f]; k++) {
			char ch = d[at[f] + k];
			if (ch < '0' || ch > '9')
				return -1;
			v[f] = v[f] * 10 + (ch - '0');
		}
	}
	if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5];
	return (int64_t)timegm(&tm);
}

/* ------------------------------------------------------------------------
 * Canonical request
 */

struct sigv4_out {
	char *p;
	size_t len, cap;
	bool full;
};

static void sigv4_put(struct sigv4_out *o, const char *p, size_t n)
{
	if (o->full || o->len + n > o->cap) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void sigv4_putc(struct sigv4_out *o, char ch)
{
	sigv4_put(o, &ch, 1);
}

/* AWS's UriEncode of already decoded bytes; slash: keep '/'. */
static void sigv4_encode(struct sigv4_out *o, const char *p, size_t n, bool slash)
{
	static const char hx[] = "0123456789ABCDEF";
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
		    (slash && ch == '/')) {
			sigv4_putc(o, (char)ch);
		} else {
			char e[3] = { '%', hx[ch >> 4], hx[ch & 15] };
			sigv4_put(o, e, 3);
		}
	}
}

/* Decode then encode a raw (wire) component. */
static int sigv4_reencode(struct sigv4_out *o, const char *p, size_t n, bool slash)
{
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		if (ch == '%') {
			int h, l;
			if (i + 2 >= n)
				return SIGV4_EMALFORMED;
			h = sigv4_hexval((unsigned char)p[i + 1]);
			l = sigv4_hexval((unsigned char)p[i + 2]);
			if (h < 0 || l < 0)
				return SIGV4_EMALFORMED;
			ch = (char)(h << 4 | l);
			i += 2;
		}
		sigv4_encode(o, &ch, 1, slash);
	}
	return 0;
}

struct sigv4_qp {
	const char *n, *v; /* raw */
	size_t nl, vl;
};

/* Order of two raw components once encoded (compared on their first
 * 1 KiB encoded: enough for every S3 sub-resource and X-Amz-* name). */
static int sigv4_enc_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	char ea[1024], eb[1024];
	struct sigv4_out oa = { ea, 0, sizeof(ea), false }, ob = { eb, 0, sizeof(eb), false };
	int r;

	sigv4_reencode(&oa, a, al, false);
	sigv4_reencode(&ob, b, bl, false);
	r = memcmp(ea, eb, oa.len < ob.len ? oa.len : ob.len);
	if (r)
		return r;
	return (oa.len > ob.len) - (oa.len < ob.len);
}

static int sigv4_qp_cmp(const void *x, const void *y)
{
	const struct sigv4_qp *a = x, *b = y;
	int r = sigv4_enc_cmp(a->n, a->nl, b->n, b->nl);
	return r ? r : sigv4_enc_cmp(a->v, a->vl, b->v, b->vl);
}

/* The header's values joined by ',' (trimmed, blank runs collapsed). */
static void sigv4_header_values(struct sigv4_out *o, const struct sigv4_req *r, const char *name,
				size_t nl)
{
	bool first = true;

	for (unsigned i = 0; i < r->hdr_count && !o->full; i++) {
		const struct s3h_hdr *h = &r->hdrs[i];
		if (h->name_len != nl || strncasecmp(h->name, name, nl) != 0)
			continue;
		if (!first)
			sigv4_putc(o, ',');
		first = false;
		bool blank = false;
		for (size_t k = 0; k < h->value_len && !o->full; k++) {
			char ch = h->value[k];
			if (ch == ' ' || ch == '\t') {
				blank = true;
				continue;
			}
			if (blank)
				sigv4_putc(o, ' ');
			blank = false;
			sigv4_putc(o, ch);
		}
	}
}

int64_t sigv4_canonical(const struct sigv4_req *r, const struct sigv4_cred *c, char *out,
			size_t cap)
{
	struct sigv4_out o = { out, 0, cap, false };
	struct sigv4_qp qp[SIGV4_QPARAMS_MAX];
	unsigned nq = 0;
	size_t i;
	const char *sh;

	sigv4_put(&o, r->method, r->method_len);
	sigv4_putc(&o, '\n');
	if (sigv4_reencode(&o, r->path, r->path_len, true) < 0)
		return SIGV4_EMALFORMED;
	sigv4_putc(&o, '\n');
	for (i = 0; i < r->query_len;) {
		size_t s = i, e;
		while (i < r->query_len && r->query[i] != '&')
			i++;
		e = i++;
		if (e == s)
			continue;
		const char *x = memchr(r->query + s, '=', e - s);
		size_t eq = x ? (size_t)(x - r->query) : e;
		if (c->presigned && sigv4_is(r->query + s, eq - s, "X-Amz-Signature"))
			continue;
		if (nq == SIGV4_QPARAMS_MAX)
			return SIGV4_EMALFORMED;
		qp[nq].n = r->query + s;
		qp[nq].nl = eq - s;
		qp[nq].v = x ? x + 1 : "";
		qp[nq].vl = x ? e - eq - 1 : 0;
		nq++;
	}
	qsort(qp, nq, sizeof(qp[0]), sigv4_qp_cmp);
	for (unsigned k = 0; k < nq; k++) {
		if (k)
			sigv4_putc(&o, '&');
		if (sigv4_reencode(&o, qp[k].n, qp[k].nl, false) < 0)
			return SIGV4_EMALFORMED;
		sigv4_putc(&o, '=');
		if (sigv4_reencode(&o, qp[k].v, qp[k].vl, false) < 0)
			return SIGV4_EMALFORMED;
	}
	sigv4_putc(&o, '\n');
	/* Stop once the buffer is full: a list naming one large header 500
	 * times would otherwise be copied (and dropped) byte by byte, ~7 MB
	 * of work for an unauthenticated request. */
	sh = c->signed_headers;
	while (*sh && !o.full) {
		const char *e = strchr(sh, ';');
		size_t nl = e ? (size_t)(e - sh) : strlen(sh);
		sigv4_put(&o, sh, nl);
		sigv4_putc(&o, ':');
		sigv4_header_values(&o, r, sh, nl);
		sigv4_putc(&o, '\n');
		sh += nl + (e ? 1 : 0);
	}
	sigv4_putc(&o, '\n');
	sigv4_put(&o, c->signed_headers, strlen(c->signed_headers));
	sigv4_putc(&o, '\n');
	sigv4_put(&o, r->payload_hash, r->payload_hash_len);
	if (o.full)
		return SIGV4_ETOOBIG;
	return (int64_t)o.len;
}

/* ------------------------------------------------------------------------
 * Signing
 */

static void sigv4_hmac(const uint8_t *key, size_t kl, const void *msg, size_t ml, uint8_t out[32])
{
	unsigned ol = 32;
	if (!HMAC(EVP_sha256(), key, (int)kl, msg, ml, out, &ol))
		memset(out, 0, 32); /* cannot match a client's signature */
}

static void sigv4_sha256(const void *p, size_t n, uint8_t out[32])
{
	unsigned ol = 32;
	if (EVP_Digest(p, n, out, &ol, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

/*
 * A signing key's first key.  The signing key's first HMAC is keyed with
 * "AWS4" + the secret; HMAC hashes a key longer than SHA-256's block (64
 * bytes) first, so each signed request's time grew with the secret's
 * length: a tenant's 4,096-byte secret's failed checks took 1.33 times
 * the CPU of an unknown access key's 16-byte dummy (ASan; test_config
 * s3_time), the secret's length in the time of any request signed with
 * it (doc/security.md "Session 46: review of red46").  sigv4_key0 makes that key once -- "AWS4" + the
 * secret, or its SHA-256 when longer than a block, which HMAC takes as
 * the same key: the same signatures -- and kvtd_auth_install keeps it
 * per tenant; a request's HMACs then cost the same whatever the secret.
 */
size_t sigv4_key0(const void *secret, size_t sl, uint8_t out[SIGV4_KEY0_MAX])
{
	uint8_t k0[4 + 4096];
	size_t n = sl > 4096 ? 4096 : sl;

	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, secret, n);
	if (4 + n <= SIGV4_KEY0_MAX) {
		memcpy(out, k0, 4 + n);
		OPENSSL_cleanse(k0, 4 + n);
		return 4 + n;
	}
	sigv4_sha256(k0, 4 + n, out);
	OPENSSL_cleanse(k0, 4 + n);
	return 32;
}

static void sigv4_key(const struct sigv4_cred *c, const uint8_t *key0, size_t k0l,
		      uint8_t key[32])
{
	uint8_t t[32];

	sigv4_hmac(key0, k0l > SIGV4_KEY0_MAX ? SIGV4_KEY0_MAX : k0l, c->date, strlen(c->date), t);
	sigv4_hmac(t, 32, c->region, strlen(c->region), t);
	sigv4_hmac(t, 32, c->service, strlen(c->service), t);
	sigv4_hmac(t, 32, "aws4_request", 12, key);
	OPENSSL_cleanse(t, sizeof(t));
}

/* sigv4_sign with the secret's first key (sigv4_key0). */
static void sigv4_sign_key0(const struct sigv4_cred *c, const uint8_t *key0, size_t k0l,
			    const char *creq, size_t creq_len, uint8_t key[32], char sig[65])
{
	char sts[400], hx[65];
	uint8_t h[32], s[32];
	int n;

	sigv4_sha256(creq, creq_len, h);
	sigv4_hex(h, 32, hx);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", c->amz_date, c->scope, hx);
	sigv4_key(c, key0, k0l, key);
	sigv4_hmac(key, 32, sts, (size_t)n < sizeof(sts) ? (size_t)n : sizeof(sts) - 1, s);
	sigv4_hex(s, 32, sig);
}

void sigv4_sign(const struct sigv4_cred *c, const void *secret, size_t secret_len,
		const char *creq, size_t creq_len, uint8_t key[32], char sig[65])
{
	uint8_t k0[SIGV4_KEY0_MAX];
	size_t k0l = sigv4_key0(secret, secret_len, k0);

	sigv4_sign_key0(c, k0, k0l, creq, creq_len, key, sig);
	OPENSSL_cleanse(k0, sizeof(k0));
}

bool sigv4_sig_equal(const char *a, size_t a_len, const char b[65])
{
	char pad[64];

	/* Always 64 bytes compared: a wrong length compares padding. */
	memset(pad, 0, sizeof(pad));
	memcpy(pad, a, a_len < 64 ? a_len : 64);
	return (CRYPTO_memcmp(pad, b, 64) == 0) & (a_len == 64);
}

int sigv4_verify(const struct sigv4_cred *c, const uint8_t *key0, size_t key0_len,
		 const char *creq, size_t creq_len, int64_t now_s, uint8_t key[32])
{
	int64_t t = sigv4_time(c->amz_date);
	char sig[65];

	if (t < 0 || memcmp(c->amz_date, c->date, 8) != 0)
		return SIGV4_EMALFORMED;
	if (c->presigned) {
		if (now_s > t + c->expires_s)
			return SIGV4_EEXPIRED;
		if (t - now_s > SIGV4_SKEW_MAX_S)
			return SIGV4_ESKEW;
	} else if (t - now_s > SIGV4_SKEW_MAX_S || now_s - t > SIGV4_SKEW_MAX_S) {
		return SIGV4_ESKEW;
	}
	sigv4_sign_key0(c, key0, key0_len, creq, creq_len, key, sig);
	return sigv4_sig_equal(c->signature, strlen(c->signature), sig) ? 0 : SIGV4_EMISMATCH;
}

void sigv4_chunk_sign(const uint8_t key[32], const struct sigv4_cred *c, const char prev[65],
		      const uint8_t chunk_sha[32], char sig[65])
{
	/* SHA-256 of the empty string */
	static const char empty[] =
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	char sts[512], hx[65];
	uint8_t s[32];
	int n;

	sigv4_hex(chunk_sha, 32, hx);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s", c->amz_date,
		     c->scope, prev, empty, hx);
	sigv4_hmac(key, 32, sts, (size_t)n < sizeof(sts) ? (size_t)n : sizeof(sts) - 1, s);
	sigv4_hex(s, 32, sig);
}

/*
 * shs3.c - the S3 object-store backend of the shared tier (shs3.h):
 * SigV4 signing, a pool of kept-alive curl handles, PUT (multipart with
 * parallel parts above part_size), ranged GET, HEAD, DELETE.
 *
 * Owns: its handle pool (mutex + condition), the credentials (copied at
 * open, wiped at close, never logged) and its counters.  Every call may
 * come from any thread; each borrows handles from the pool for its
 * duration, so at most `conns` requests run at once.
 *
 * Retries (req_run), as the AWS SDKs' "standard" mode: a request that
 * failed transiently -- no HTTP answer (refused, reset, timed out, closed
 * early) or HTTP 500, 502, 503 (SlowDown), 504, 429 -- is tried again, at
 * most `attempts` times in all, after a full-jitter exponential backoff
 * (uniform in [0, retry_base_ms * 2^(n-1)], capped at 20 s), and all of
 * them within timeout_ms: each attempt gets what is left of it, so an
 * endpoint that stops answering still costs one timeout.  A retry starts
 * only with S3_MIN_ATTEMPT_MS of that time left after its backoff (the
 * backoff is cut short to leave it); with less, the request gives up at
 * once with the last attempt's error rather than sleep away the caller's
 * time and start an attempt bound to time out.  Only whole-object
 * PUT, GET, HEAD and DELETE are retried (idempotent: a PUT with
 * If-None-Match whose first attempt landed is answered 412, KVT_EXISTS);
 * POSTs (multipart initiate and complete) are not, nor a streamed GET
 * whose sink already took bytes.  The handle goes back to the pool during
 * the backoff.  Multipart parts (PUTs too) are retried by the same rule,
 * each part on its own while the others run (mp_retry).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "gcplan.h"
#include "s3list.h"
#include "shdir.h"
#include "shs3.h"

#define A(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)
#define AN(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)
#define S3_MAX_CONNS 64
#define S3_URL_MAX 1024
/* A canonical query: a listing's, with a continuation token of
 * S3LIST_TOKEN_MAX bytes percent-encoded (3 bytes each), its prefix
 * (shs3_list's epre) and the rest. */
#define S3_QUERY_MAX (3 * S3LIST_TOKEN_MAX + 1024)
#define S3_GET_BUFFER (512L << 10) /* curl's receive buffer for GETs (its default: 16 KiB) */
#define S3_BACKOFF_CAP_MS 20000u   /* the AWS SDKs' MAX_BACKOFF */
#define S3_MIN_ATTEMPT_MS 50u      /* the least time a retry is started with */
/* The most bytes kept of a body that goes to no block (listing XML,
 * multipart answers, error bodies): a ListObjectsV2 page of 1000 keys is
 * about 400 KiB; an endpoint sending more fails the request (-EIO). */
#define S3_RESP_MAX (8u << 20)
/* ... of an error's body (nothing reads it: S3's are under 1 KiB). */
#define S3_ERR_BODY_MAX (64u << 10)

struct shs3 {
	struct shs3_config cfg;
	char endpoint[256];
	char host[256];              /* the Host header: endpoint without scheme */
	char bucket[64];
	struct shs3_creds creds;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	pthread_mutex_t lock;        /* the free handles */
	pthread_cond_t cond;
	CURL *handles[S3_MAX_CONNS];
	unsigned free_count;         /* handles[0..free_count) are free; lock */
	struct shs3_stats st;
	struct shs3_blk_stats blk;
};

/* ------------------------------------------------------------------------
 * Credentials
 */

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	size_t i = 0;
	while (s[i] && isspace((unsigned char)s[i]))
		i++;
	memmove(s, s + i, strlen(s + i) + 1);
}

static int set_field(char *dst, size_t cap, const char *v)
{
	if (!v || !*v || strlen(v) >= cap)
		return KVT_EOPTVAL;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

int shs3_creds_load(struct shs3_creds *c, const char *file)
{
	int ret = 0;
	memset(c, 0, sizeof(*c));
	if (!file) {
		if ((ret = set_field(c->access_key, sizeof(c->access_key), getenv("AWS_ACCESS_KEY_ID"))) < 0 ||
		    (ret = set_field(c->secret_key, sizeof(c->secret_key), getenv("AWS_SECRET_ACCESS_KEY"))) < 0)
			return ret;
		return set_field(c->region, sizeof(c->region),
				 getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1");
	}
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char buf[2048];
	ssize_t n;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		close(fd);
		return KVT_EOPTVAL; /* a secret others can read is refused */
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	strcpy(c->region, "us-east-1");
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		trim(line);
		trim(eq + 1);
		if (!strcmp(line, "access_key"))
			ret = set_field(c->access_key, sizeof(c->access_key), eq + 1);
		else if (!strcmp(line, "secret_key"))
			ret = set_field(c->secret_key, sizeof(c->secret_key), eq + 1);
		else if (!strcmp(line, "region"))
			ret = set_field(c->region, sizeof(c->region), eq + 1);
		else
			ret = 0;
		if (ret < 0)
			break;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	if (ret == 0 && (!c->access_key[0] || !c->secret_key[0]))
		ret = KVT_EOPTVAL;
	if (ret < 0)
		OPENSSL_cleanse(c, sizeof(*c));
	return ret;
}

/* ------------------------------------------------------------------------
 * SigV4
 */

static void hexs(char *out, const uint8_t *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = 0;
}

static int sha256_hex(const void *p, size_t n, char out[65])
{
	uint8_t h[32];
	unsigned hl = 0;
	if (EVP_Digest(p, n, h, &hl, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	hexs(out, h, 32);
	return 0;
}

static int hmac(const uint8_t *key, size_t key_len, const char *msg, uint8_t out[32])
{
	unsigned ol = 0;
	return HMAC(EVP_sha256(), key, (int)key_len, (const uint8_t *)msg, strlen(msg), out, &ol)
		       ? 0
		       : -ENOMEM;
}

int shs3_sign(const char *method, const char *uri, const char *query,
	      const struct shs3_hdr *hdrs, unsigned hdr_count, const char *payload_sha256,
	      const char *amz_date, const char *region, const char *service,
	      const char *access_key, const char *secret_key, char *out, size_t out_len,
	      char *creq_hash)
{
	char creq[4096], signed_hdrs[512] = "", sts[512], date[9], ch[65], k0[200], sig[65];
	size_t o = 0, so = 0;
	uint8_t kd[32], kr[32], ks[32], kk[32], sg[32], h[32];
	unsigned hl = 0;
	EVP_MD_CTX *md;
	int ret = -ENOMEM;

	/* 1. The canonical request: method, path and query hashed as they
	 * are (a listing's query holds a continuation token of up to 12 KiB
	 * encoded), the rest written into creq[] first. */
	for (unsigned i = 0; i < hdr_count && o < sizeof(creq); i++) {
		o += (size_t)snprintf(creq + o, sizeof(creq) - o, "%s:%s\n", hdrs[i].name,
				      hdrs[i].value);
		so += (size_t)snprintf(signed_hdrs + so, sizeof(signed_hdrs) - so, "%s%s",
				       i ? ";" : "", hdrs[i].name);
	}
	if (o < sizeof(creq))
		o += (size_t)snprintf(creq + o, sizeof(creq) - o, "\n%s\n%s", signed_hdrs,
				      payload_sha256);
	if (o >= sizeof(creq) || so >= sizeof(signed_hdrs) || strlen(amz_date) != 16 ||
	    strlen(secret_key) + 5 > sizeof(k0))
		return KVT_EBADLEN;
	md = EVP_MD_CTX_new();
	if (!md)
		goto out;
	if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(md, method, strlen(method)) != 1 ||
	    EVP_DigestUpdate(md, "\n", 1) != 1 || EVP_DigestUpdate(md, uri, strlen(uri)) != 1 ||
	    EVP_DigestUpdate(md, "\n", 1) != 1 || EVP_DigestUpdate(md, query, strlen(query)) != 1 ||
	    EVP_DigestUpdate(md, "\n", 1) != 1 || EVP_DigestUpdate(md, creq, o) != 1 ||
	    EVP_DigestFinal_ex(md, h, &hl) != 1) {
		EVP_MD_CTX_free(md);
		goto out;
	}
	EVP_MD_CTX_free(md);
	hexs(ch, h, 32);
	if (creq_hash)
		memcpy(creq_hash, ch, 65);
	/* 2. The string to sign. */
	memcpy(date, amz_date, 8);
	date[8] = 0;
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amz_date, date,
		 region, service, ch);
	/* 3. The signing key and the signature. */
	snprintf(k0, sizeof(k0), "AWS4%s", secret_key);
	if (hmac((const uint8_t *)k0, strlen(k0), date, kd) < 0 || hmac(kd, 32, region, kr) < 0 ||
	    hmac(kr, 32, service, ks) < 0 || hmac(ks, 32, "aws4_request", kk) < 0 ||
	    hmac(kk, 32, sts, sg) < 0)
		goto out;
	hexs(sig, sg, 32);
	ret = snprintf(out, out_len,
		       "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
		       "Signature=%s",
		       access_key, date, region, service, signed_hdrs, sig) >= (int)out_len
		      ? KVT_EBADLEN
		      : 0;
out:
	OPENSSL_cleanse(k0, sizeof(k0));
	OPENSSL_cleanse(kk, sizeof(kk));
	return ret;
}

/* ------------------------------------------------------------------------
 * Requests
 */

struct s3req {
	struct shs3 *s3;
	const char *method;
	char uri[S3_URL_MAX];       /* canonical path: /bucket/name */
	bool uri_over;              /* the name did not fit uri: never sent (req_prepare) */
	char *query;                /* canonical query: qbuf, or a listing's (shs3_list) */
	size_t query_cap;           /* its bytes */
	char qbuf[2048];
	const uint8_t *body;        /* contiguous body (POST, simple PUT) ... */
	const struct iovec *iov;    /* ... or body bytes [body_off, body_off + body_len)
				     * of the stream iov[0..iovcnt) (PUT) */
	unsigned iovcnt;
	uint64_t body_off, body_len, sent;
	uint64_t range_off, range_len; /* range_len 0: none */
	uint8_t *dst;
	uint64_t dst_cap, got;
	shs3_sink_fn sink;          /* GET: bytes go here when set (else dst, else resp) */
	void *sink_ctx;
	bool if_none_match;         /* PUT: "If-None-Match: *" (412: KVT_EXISTS) */
	char *resp;                 /* small bodies (XML), for multipart */
	size_t resp_len, resp_cap;
	bool resp_over;             /* the body passed its cap (S3_RESP_MAX, ...): stopped */
	char etag[128];
	struct curl_slist *hdrs;
	CURL *cur;                  /* the handle running it */
	long status;
	bool head;                  /* HEAD: content_len is the object's size */
	int64_t content_len;        /* HEAD: Content-Length, -1 if none */
	unsigned timeout_ms;        /* this attempt's (req_run); 0: cfg.timeout_ms */
};

/* fn on each contiguous run of the iov stream's bytes [pos, pos + n), in
 * order: 0, or the first nonzero fn returned. */
static int body_iov_each(const struct s3req *r, uint64_t pos, uint64_t n,
			 int (*fn)(void *ctx, const uint8_t *p, uint64_t len), void *ctx)
{
	for (unsigned i = 0; i < r->iovcnt && n > 0; i++) {
		uint64_t l = r->iov[i].iov_len, k;
		int ret;
		if (pos >= l) {
			pos -= l;
			continue;
		}
		k = l - pos < n ? l - pos : n;
		ret = fn(ctx, (const uint8_t *)r->iov[i].iov_base + pos, k);
		if (ret != 0)
			return ret;
		n -= k;
		pos = 0;
	}
	return 0;
}

static int body_copy_run(void *ctx, const uint8_t *p, uint64_t len)
{
	uint8_t **dst = ctx;
	memcpy(*dst, p, len);
	*dst += len;
	return 0;
}

/* Copy n body bytes from stream position pos to dst. */
static void body_copy(const struct s3req *r, uint64_t pos, uint8_t *dst, uint64_t n)
{
	if (!r->iov)
		memcpy(dst, r->body + pos, n);
	else
		body_iov_each(r, pos, n, body_copy_run, &dst);
}

static size_t rd_cb(char *p, size_t size, size_t n, void *ctx)
{
	struct s3req *r = ctx;
	uint64_t k = size * n, left = r->body_len - r->sent;
	if (k > left)
		k = left;
	body_copy(r, r->body_off + r->sent, (uint8_t *)p, k);
	r->sent += k;
	return (size_t)k;
}

static int body_sha_run(void *ctx, const uint8_t *p, uint64_t len)
{
	return EVP_DigestUpdate(ctx, p, len) == 1 ? 0 : -ENOMEM;
}

/* SHA-256 (hex) of the body: the iov stream's range or the contiguous body. */
static int body_sha256_hex(const struct s3req *r, char out[65])
{
	if (!r->iov)
		return sha256_hex(r->body ? (const void *)r->body : "", r->body ? r->body_len : 0,
				  out);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	uint8_t h[32];
	unsigned hl = 0;
	int ret = -ENOMEM;
	if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 ||
	    body_iov_each(r, r->body_off, r->body_len, body_sha_run, c) != 0 ||
	    EVP_DigestFinal_ex(c, h, &hl) != 1)
		goto out;
	hexs(out, h, 32);
	ret = 0;
out:
	EVP_MD_CTX_free(c);
	return ret;
}

static size_t wr_cb(char *p, size_t size, size_t n, void *ctx)
{
	struct s3req *r = ctx;
	size_t k = size * n;
	if (r->sink && r->status == 0)
		curl_easy_getinfo(r->cur, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->sink && r->status >= 200 && r->status < 300) {
		if (r->sink(r->sink_ctx, (const uint8_t *)p, k) != 0)
			return 0; /* the sink refused: fail the transfer */
		r->got += k;
		return k;
	}
	if (r->dst) {
		if (r->got + k > r->dst_cap)
			return 0; /* more than asked for: fail the transfer */
		memcpy(r->dst + r->got, p, k);
		r->got += k;
		return k;
	}
	if (r->status == 0)
		curl_easy_getinfo(r->cur, CURLINFO_RESPONSE_CODE, &r->status);
	size_t cap = r->status >= 200 && r->status < 300 ? S3_RESP_MAX : S3_ERR_BODY_MAX;
	if (r->resp_len > cap || k > cap - r->resp_len) {
		r->resp_over = true;
		return 0; /* an endless body: fail the transfer */
	}
	if (r->resp_len + k + 1 > r->resp_cap) {
		size_t nc = (r->resp_len + k + 1) * 2;
		if (nc > cap + 1)
			nc = cap + 1;
		char *nr = realloc(r->resp, nc);
		if (!nr)
			return 0;
		r->resp = nr;
		r->resp_cap = nc;
	}
	memcpy(r->resp + r->resp_len, p, k);
	r->resp_len += k;
	r->resp[r->resp_len] = 0;
	return k;
}

static size_t hdr_cb(char *p, size_t size, size_t n, void *ctx)
{
	struct s3req *r = ctx;
	size_t k = size * n;
	if (k > 5 && !strncasecmp(p, "etag:", 5)) {
		size_t i = 5, e = k;
		while (i < k && isspace((unsigned char)p[i]))
			i++;
		while (e > i && isspace((unsigned char)p[e - 1]))
			e--;
		if (e - i < sizeof(r->etag)) {
			memcpy(r->etag, p + i, e - i);
			r->etag[e - i] = 0;
		}
	}
	return k;
}

/* Set h up for r: sign it and set every option. */
static int req_prepare(struct s3req *r, CURL *h)
{
	struct shs3 *s3 = r->s3;
	char *url, amz_date[17], payload[65], auth[512], range[64], line[600];
	struct shs3_hdr hs[4];
	unsigned hn = 0;
	time_t now = time(NULL);
	struct tm tm;

	if (r->uri_over)
		return -ENAMETOOLONG;
	gmtime_r(&now, &tm);
	strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
	/* Bulk PUT bodies are hashed only with sign_payload: a block carries
	 * its own CRCs, and a second pass over every byte would cap uploads. */
	if (!strcmp(r->method, "PUT") && !s3->cfg.sign_payload)
		strcpy(payload, "UNSIGNED-PAYLOAD");
	else if (body_sha256_hex(r, payload) < 0)
		return -ENOMEM;
	hs[hn++] = (struct shs3_hdr){ "host", s3->host };
	if (r->range_len) {
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)r->range_off,
			 (unsigned long long)(r->range_off + r->range_len - 1));
		hs[hn++] = (struct shs3_hdr){ "range", range };
	}
	hs[hn++] = (struct shs3_hdr){ "x-amz-content-sha256", payload };
	hs[hn++] = (struct shs3_hdr){ "x-amz-date", amz_date };
	if (shs3_sign(r->method, r->uri, r->query, hs, hn, payload, amz_date, s3->creds.region,
		      "s3", s3->creds.access_key, s3->creds.secret_key, auth, sizeof(auth), NULL) < 0)
		return -ENOMEM;
	curl_easy_reset(h);
	r->cur = h;
	r->status = 0;
	/* Off the stack: a listing's query is up to S3_QUERY_MAX; curl copies it. */
	url = malloc(strlen(s3->endpoint) + strlen(r->uri) + strlen(r->query) + 2);
	if (!url)
		return -ENOMEM;
	sprintf(url, "%s%s%s%s", s3->endpoint, r->uri, r->query[0] ? "?" : "", r->query);
	curl_easy_setopt(h, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 (long)(r->timeout_ms ? r->timeout_ms : s3->cfg.timeout_ms));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(r->timeout_ms ? r->timeout_ms : s3->cfg.timeout_ms));
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, wr_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	if (r->sink || r->dst) /* a block's bytes: fewer, larger reads */
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, S3_GET_BUFFER);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, hdr_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_PRIVATE, r);
	r->hdrs = NULL;
	for (unsigned i = 1; i < hn; i++) { /* curl sends Host itself */
		snprintf(line, sizeof(line), "%s: %s", hs[i].name, hs[i].value);
		r->hdrs = curl_slist_append(r->hdrs, line);
	}
	snprintf(line, sizeof(line), "Authorization: %s", auth);
	r->hdrs = curl_slist_append(r->hdrs, line);
	OPENSSL_cleanse(auth, sizeof(auth));
	OPENSSL_cleanse(line, sizeof(line));
	r->hdrs = curl_slist_append(r->hdrs, "Expect:");
	if (r->if_none_match)
		r->hdrs = curl_slist_append(r->hdrs, "If-None-Match: *");
	if (!r->hdrs)
		return -ENOMEM;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->hdrs);
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, rd_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, r);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	}
	return 0;
}

/* What a finished transfer means: KVT_OK, KVT_MISS or -errno. */
static int req_result(struct s3req *r, CURL *h, CURLcode cc)
{
	struct shs3 *s3 = r->s3;
	long conns = 0;
	A(s3->st.requests);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &conns) == CURLE_OK && conns > 0)
		AN(s3->st.conns_opened, (uint64_t)conns);
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	if (cc == CURLE_WRITE_ERROR && r->resp_over) {
		A(s3->st.errors); /* a body past its cap: not the sink's doing */
		return -EIO;
	}
	if (cc == CURLE_WRITE_ERROR && r->sink) {
		/* The caller's sink stopped it (a bad block, no DRAM room): the
		 * caller knows why; not a transport error. */
		return -ECANCELED;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		A(s3->st.timeouts);
		A(s3->st.errors);
		return -ETIMEDOUT;
	}
	if (cc == CURLE_COULDNT_CONNECT) {
		A(s3->st.errors);
		return -ECONNREFUSED;
	}
	if (cc != CURLE_OK) {
		A(s3->st.errors);
		return -EIO;
	}
	if (r->status >= 200 && r->status < 300) {
		AN(s3->st.bytes_out, r->sent + (r->body && strcmp(r->method, "PUT") ? r->body_len : 0));
		AN(s3->st.bytes_in, r->got);
		return KVT_OK;
	}
	if (r->status == 404)
		return KVT_MISS;
	if (r->status == 412 && r->if_none_match)
		return KVT_EXISTS;
	A(s3->st.errors);
	if (r->status == 403) {
		A(s3->st.denied);
		kvt_logf(s3->log, KVT_LOG_ERROR,
			 "s3 %s: access denied (HTTP 403) for key id %.4s...: check the credentials",
			 s3->endpoint, s3->creds.access_key);
		return -EACCES;
	}
	return -EIO;
}

/* Borrow up to want handles (at least one: waits).  Returns how many. */
static unsigned pool_take(struct shs3 *s3, CURL **out, unsigned want)
{
	unsigned n = 0;
	pthread_mutex_lock(&s3->lock);
	while (s3->free_count == 0)
		pthread_cond_wait(&s3->cond, &s3->lock);
	while (n < want && s3->free_count > 0)
		out[n++] = s3->handles[--s3->free_count];
	pthread_mutex_unlock(&s3->lock);
	return n;
}

static void pool_give(struct shs3 *s3, CURL **hs, unsigned n)
{
	pthread_mutex_lock(&s3->lock);
	for (unsigned i = 0; i < n; i++)
		s3->handles[s3->free_count++] = hs[i];
	pthread_cond_broadcast(&s3->cond);
	pthread_mutex_unlock(&s3->lock);
}

/* Whether a finished attempt failed transiently: no HTTP answer, or one
 * the AWS SDKs retry (throttling, 5xx but 501). */
static bool req_transient(const struct s3req *r, CURLcode cc)
{
	switch (cc) {
	case CURLE_OK:
		return r->status == 500 || r->status == 502 || r->status == 503 ||
		       r->status == 504 || r->status == 429;
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		return true;
	default:
		return false;
	}
}

/*
 * Run r, retrying transient failures (the file's header comment):
 * KVT_OK, KVT_MISS, KVT_EXISTS or -errno of the last attempt.  A request
 * that gives up after retrying is logged (a warning: the caller turns it
 * into a miss or a failed write-down) and counted in retry_giveups.
 */
/* A transient failure that will not be tried again (attempts or time used
 * up): counted and logged once, when retries were allowed at all. */
static int req_giveup(struct s3req *r, unsigned n, CURLcode cc, int ret)
{
	struct shs3 *s3 = r->s3;
	if (s3->cfg.attempts > 1) {
		A(s3->st.retry_giveups);
		kvt_logf(s3->log, KVT_LOG_WARN, "s3 %s: %s %s failed after %u attempts (last: %s%ld%s)",
			 s3->endpoint, r->method, r->uri, n, cc == CURLE_OK ? "HTTP " : "",
			 cc == CURLE_OK ? r->status : 0, cc == CURLE_OK ? "" : curl_easy_strerror(cc));
	}
	return ret;
}

/* Full jitter: uniform in [0, base * 2^(n-1)], capped, after n attempts. */
static uint64_t s3_backoff_ms(const struct shs3 *s3, unsigned n, uint64_t now)
{
	uint64_t cap = (uint64_t)s3->cfg.retry_base_ms << (n - 1 < 16 ? n - 1 : 16);
	uint32_t rnd = 0;
	if (cap > S3_BACKOFF_CAP_MS)
		cap = S3_BACKOFF_CAP_MS;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)(now * 2654435761u);
	return cap ? rnd % (cap + 1) : 0;
}

/* The next attempt starts over: body from its first byte, nothing received. */
static void req_rewind(struct s3req *r)
{
	r->sent = 0;
	r->got = 0;
	r->resp_len = 0;
	r->resp_over = false;
	r->etag[0] = 0;
	r->status = 0;
}

/* After n attempts, with the request's deadline: false when no retry
 * fits (attempts used up, or under S3_MIN_ATTEMPT_MS left); else true
 * with the backoff to wait, cut short to leave S3_MIN_ATTEMPT_MS. */
static bool s3_retry_plan(const struct shs3 *s3, unsigned n, uint64_t now, uint64_t deadline,
			  uint64_t *backoff)
{
	unsigned attempts = s3->cfg.attempts ? s3->cfg.attempts : 1;
	if (n >= attempts || now + S3_MIN_ATTEMPT_MS >= deadline)
		return false;
	*backoff = s3_backoff_ms(s3, n, now);
	if (now + *backoff + S3_MIN_ATTEMPT_MS > deadline)
		*backoff = deadline - now - S3_MIN_ATTEMPT_MS;
	return true;
}

static int req_run(struct s3req *r)
{
	struct shs3 *s3 = r->s3;
	uint64_t deadline = kvt_now_ms() + s3->cfg.timeout_ms;
	bool idem = strcmp(r->method, "POST") != 0;
	unsigned n = 0;

	for (;;) {
		CURLcode cc = CURLE_OK;
		uint64_t now, backoff = 0;
		CURL *h;
		int ret;

		pool_take(s3, &h, 1);
		ret = req_prepare(r, h);
		if (ret == 0) {
			cc = curl_easy_perform(h);
			if (r->head) {
				curl_off_t cl = -1;
				curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
				r->content_len = cl;
			}
			ret = req_result(r, h, cc);
		} else if (r->hdrs) {
			curl_slist_free_all(r->hdrs);
			r->hdrs = NULL;
		}
		pool_give(s3, &h, 1);
		n++;
		if (ret >= 0 || !idem || !req_transient(r, cc) || (r->sink && r->got > 0))
			return ret;
		if (!s3_retry_plan(s3, n, kvt_now_ms(), deadline, &backoff))
			return req_giveup(r, n, cc, ret);
		if (backoff) {
			struct timespec ts = { .tv_sec = (time_t)(backoff / 1000),
					       .tv_nsec = (long)(backoff % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		A(s3->st.retries);
		now = kvt_now_ms();
		if (now >= deadline) /* the sleep overran what was left */
			return req_giveup(r, n, cc, ret);
		r->timeout_ms = (unsigned)(deadline - now);
		req_rewind(r);
	}
}

/* The canonical path of name into out[S3_URL_MAX]; false if it does not
 * fit (it is not cut: a shorter path names another object). */
static bool uri_of(struct shs3 *s3, const char *name, char *out)
{
	/* Names are [0-9a-z/.] (shdir_relpath): nothing to escape; anything
	 * else is escaped the way SigV4 wants (RFC 3986 unreserved kept). */
	size_t o = (size_t)snprintf(out, S3_URL_MAX, "/%s/", s3->bucket);
	const char *p = name;

	for (; *p && o + 4 < S3_URL_MAX; p++) {
		unsigned char c = (unsigned char)*p;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, S3_URL_MAX - o, "%%%02X", c);
	}
	out[o < S3_URL_MAX ? o : S3_URL_MAX - 1] = 0;
	return *p == 0 && o < S3_URL_MAX;
}

/* Percent-encode a query value the way SigV4 wants (RFC 3986 unreserved kept). */
static void qenc(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 4 < cap; p++) {
		unsigned char c = (unsigned char)*p;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
	}
	out[o] = 0;
}

static void req_init(struct s3req *r, struct shs3 *s3, const char *method, const char *name)
{
	memset(r, 0, sizeof(*r));
	r->s3 = s3;
	r->method = method;
	r->query = r->qbuf;
	r->query_cap = sizeof(r->qbuf);
	r->uri_over = !uri_of(s3, name, r->uri);
}

/* ------------------------------------------------------------------------
 * Operations
 */

static char *xml_tag(const char *xml, const char *tag, char *out, size_t cap)
{
	char open_t[64], close_t[64];
	snprintf(open_t, sizeof(open_t), "<%s>", tag);
	snprintf(close_t, sizeof(close_t), "</%s>", tag);
	const char *a = xml ? strstr(xml, open_t) : NULL, *b;
	if (!a)
		return NULL;
	a += strlen(open_t);
	b = strstr(a, close_t);
	if (!b || (size_t)(b - a) >= cap)
		return NULL;
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = 0;
	return out;
}

/*
 * Multipart part retries.  The parts of one upload share a curl multi
 * handle, so a failed part cannot sleep out its backoff the way req_run
 * does: it is put back among the waiting parts with a time before which
 * it does not start (ready_ms), and the others keep running meanwhile.
 * Otherwise the rule is req_run's: a transient failure (req_transient) is
 * tried again, at most `attempts` times in all, after a full-jitter
 * backoff (s3_backoff_ms), all within timeout_ms of the part's first
 * attempt; a retry is counted in retries when it starts, a part that
 * gives up in retry_giveups (req_giveup).  A part is a PUT of a fixed
 * byte range under its part number: sending it again replaces it.
 */
struct mp_part {
	uint64_t deadline_ms;  /* first attempt's start + timeout_ms */
	uint64_t ready_ms;     /* a retry starts no earlier (monotonic ms) */
	unsigned tries;        /* attempts started */
	CURLcode cc;           /* the last failed attempt's, for req_giveup */
	int ret;
	bool running, done;
};

/* Part r (state p) failed with (cc, rr): schedule a retry and return true,
 * or return false (not transient, or attempts or time used up: then
 * counted and logged by req_giveup). */
static bool mp_retry(struct shs3 *s3, struct mp_part *p, CURLcode cc, int rr, struct s3req *r)
{
	uint64_t now = kvt_now_ms(), backoff = 0;
	if (!req_transient(r, cc))
		return false;
	if (!s3_retry_plan(s3, p->tries, now, p->deadline_ms, &backoff)) {
		req_giveup(r, p->tries, cc, rr);
		return false;
	}
	p->ready_ms = now + backoff;
	p->cc = cc;
	p->ret = rr;
	return true;
}

static int put_multipart(struct shs3 *s3, const char *name, const struct iovec *iov,
			 unsigned iovcnt, uint64_t len)
{
	uint64_t psz = s3->cfg.part_size;
	unsigned parts = (unsigned)((len + psz - 1) / psz), done = 0;
	struct s3req cr, *pr = calloc(parts, sizeof(*pr));
	struct mp_part *ps = NULL;
	char upload_id[256], eid[800], *xml = NULL; /* eid: upload_id as a query value */
	CURL *hs[S3_MAX_CONNS];
	CURLM *m = NULL;
	unsigned nh = 0;
	int ret;

	if (!pr)
		return -ENOMEM;
	req_init(&cr, s3, "POST", name);
	strcpy(cr.query, "uploads=");
	ret = req_run(&cr);
	if (ret == KVT_OK && !xml_tag(cr.resp, "UploadId", upload_id, sizeof(upload_id)))
		ret = -EIO;
	free(cr.resp);
	if (ret != KVT_OK)
		goto out;
	/* Whatever the server chose, it goes back percent-encoded: sent as
	 * signed, and no '&', '#' or space can add to or cut the query. */
	qenc(upload_id, eid, sizeof(eid));
	/* The parts, in parallel over as many handles as the pool lends,
	 * each retried on its own (mp_retry). */
	m = curl_multi_init();
	ps = calloc(parts, sizeof(*ps));
	if (!m || !ps) {
		ret = -ENOMEM;
		goto abort;
	}
	nh = pool_take(s3, hs, parts < S3_MAX_CONNS ? parts : S3_MAX_CONNS);
	for (unsigned i = 0; i < parts; i++) {
		req_init(&pr[i], s3, "PUT", name);
		snprintf(pr[i].query, pr[i].query_cap, "partNumber=%u&uploadId=%s", i + 1,
			 eid);
		pr[i].iov = iov;
		pr[i].iovcnt = iovcnt;
		pr[i].body_off = (uint64_t)i * psz;
		pr[i].body_len = i + 1 < parts ? psz : len - (uint64_t)i * psz;
	}
	{
		CURL *idle[S3_MAX_CONNS];
		unsigned nidle = nh, inflight = 0;
		memcpy(idle, hs, nh * sizeof(CURL *));
		while (done < parts && ret == KVT_OK) {
			uint64_t now = kvt_now_ms();
			/* 1. Start waiting parts whose time has come. */
			for (unsigned i = 0; i < parts && nidle > 0 && ret == KVT_OK; i++) {
				struct mp_part *p = &ps[i];
				if (p->running || p->done)
					continue;
				if (p->ready_ms > now)
					continue;
				if (p->tries == 0) {
					p->deadline_ms = now + s3->cfg.timeout_ms;
				} else if (now >= p->deadline_ms) { /* the backoff overran it */
					ret = req_giveup(&pr[i], p->tries, p->cc, p->ret);
					break;
				} else {
					A(s3->st.retries);
					req_rewind(&pr[i]);
					pr[i].timeout_ms = (unsigned)(p->deadline_ms - now);
				}
				CURL *h = idle[--nidle];
				if ((ret = req_prepare(&pr[i], h)) < 0) {
					curl_slist_free_all(pr[i].hdrs);
					pr[i].hdrs = NULL;
					idle[nidle++] = h;
					break;
				}
				curl_multi_add_handle(m, h);
				p->running = true;
				p->tries++;
				inflight++;
			}
			if (ret != KVT_OK)
				break;
			/* 2. Collect the parts that ended. */
			int running = 0, q;
			curl_multi_perform(m, &running);
			CURLMsg *msg;
			while ((msg = curl_multi_info_read(m, &q))) {
				if (msg->msg != CURLMSG_DONE)
					continue;
				CURL *h = msg->easy_handle;
				struct s3req *r;
				CURLcode cc = msg->data.result;
				curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
				curl_multi_remove_handle(m, h);
				idle[nidle++] = h;
				inflight--;
				int rr = req_result(r, h, cc);
				struct mp_part *p = &ps[r - pr];
				p->running = false;
				if (rr == KVT_OK) {
					A(s3->st.multipart_parts);
					p->done = true;
					done++;
				} else if (ret == KVT_OK && !mp_retry(s3, p, cc, rr, r)) {
					p->done = true;
					done++;
					ret = rr == KVT_MISS ? -EIO : rr;
				}
			}
			/* 3. Wait for a transfer, or (a handle idle) for the
			 * next waiting part's time. */
			if (done < parts && ret == KVT_OK) {
				uint64_t t = 100, wake = UINT64_MAX;
				now = kvt_now_ms();
				for (unsigned i = 0; i < parts && nidle > 0; i++)
					if (!ps[i].running && !ps[i].done && ps[i].ready_ms < wake)
						wake = ps[i].ready_ms;
				if (wake != UINT64_MAX)
					t = wake <= now ? 0 : (wake - now < t ? wake - now : t);
				if (inflight || t)
					curl_multi_poll(m, NULL, 0, (int)t, NULL);
			}
		}
		/* A failure with parts still running: let them end. */
		while (inflight > 0) {
			int running = 0, q;
			curl_multi_perform(m, &running);
			CURLMsg *msg;
			while ((msg = curl_multi_info_read(m, &q))) {
				if (msg->msg != CURLMSG_DONE)
					continue;
				struct s3req *r;
				curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
				curl_multi_remove_handle(m, msg->easy_handle);
				req_result(r, msg->easy_handle, msg->data.result);
				inflight--;
			}
			if (inflight > 0)
				curl_multi_poll(m, NULL, 0, 100, NULL);
		}
	}
	pool_give(s3, hs, nh);
	if (ret != KVT_OK)
		goto abort;
	/* Complete. */
	{
		size_t cap = 128 + (size_t)parts * 200, o;
		xml = malloc(cap);
		if (!xml) {
			ret = -ENOMEM;
			goto abort;
		}
		o = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
		for (unsigned i = 0; i < parts; i++)
			o += (size_t)snprintf(xml + o, cap - o,
					      "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
					      i + 1, pr[i].etag);
		o += (size_t)snprintf(xml + o, cap - o, "</CompleteMultipartUpload>");
		req_init(&cr, s3, "POST", name);
		snprintf(cr.query, cr.query_cap, "uploadId=%s", eid);
		cr.body = (const uint8_t *)xml;
		cr.body_len = o;
		ret = req_run(&cr);
		/* S3 may answer 200 with an <Error> body. */
		if (ret == KVT_OK && cr.resp && strstr(cr.resp, "<Error>"))
			ret = -EIO;
		free(cr.resp);
	}
abort:
	if (ret != KVT_OK) {
		req_init(&cr, s3, "DELETE", name);
		snprintf(cr.query, cr.query_cap, "uploadId=%s", eid);
		req_run(&cr);
		free(cr.resp);
	}
out:
	if (m)
		curl_multi_cleanup(m);
	for (unsigned i = 0; i < parts; i++)
		free(pr[i].resp);
	free(pr);
	free(ps);
	free(xml);
	return ret;
}

static int put_iov(struct shs3 *s3, const char *name, const struct iovec *iov, unsigned iovcnt,
		   uint64_t len, bool if_none_match)
{
	struct s3req r;
	int ret;
	if (len > s3->cfg.part_size)
		return put_multipart(s3, name, iov, iovcnt, len);
	req_init(&r, s3, "PUT", name);
	r.iov = iov;
	r.iovcnt = iovcnt;
	r.body_len = len;
	r.if_none_match = if_none_match;
	ret = req_run(&r);
	free(r.resp);
	return ret == KVT_MISS ? -EIO : ret; /* 404 on PUT: no such bucket */
}

int shs3_put(struct shs3 *s3, const char *name, const void *buf, uint64_t len)
{
	struct iovec v = { (void *)buf, len };
	return put_iov(s3, name, &v, 1, len, false);
}

int64_t shs3_get(struct shs3 *s3, const char *name, uint64_t off, uint64_t len, void *buf,
		 uint64_t buf_len)
{
	struct s3req r;
	int ret;
	req_init(&r, s3, "GET", name);
	r.range_off = off;
	r.range_len = len;
	r.dst = buf;
	r.dst_cap = len ? (len < buf_len ? len : buf_len) : buf_len;
	ret = req_run(&r);
	free(r.resp);
	if (ret == KVT_OK && r.range_len && r.status != 206 && off > 0)
		return -EIO; /* the server ignored the range */
	return ret == KVT_OK ? (int64_t)r.got : ret;
}

int shs3_head(struct shs3 *s3, const char *name, uint64_t *len)
{
	struct s3req r;
	int ret;
	req_init(&r, s3, "HEAD", name);
	r.head = true;
	ret = req_run(&r);
	if (ret == KVT_OK && len)
		*len = r.content_len >= 0 ? (uint64_t)r.content_len : 0;
	free(r.resp);
	return ret;
}

int shs3_delete(struct shs3 *s3, const char *name)
{
	struct s3req r;
	int ret;
	req_init(&r, s3, "DELETE", name);
	ret = req_run(&r);
	free(r.resp);
	return ret == KVT_MISS ? KVT_OK : ret;
}

struct shs3_stats *shs3_stats(struct shs3 *s3)
{
	return &s3->st;
}

/* GET of [off, off + len) (len 0: the whole object) into sink. */
static int64_t get_stream_range(struct shs3 *s3, const char *name, uint64_t off, uint64_t len,
				shs3_sink_fn sink, void *ctx)
{
	struct s3req r;
	int ret;
	req_init(&r, s3, "GET", name);
	r.range_off = off;
	r.range_len = len;
	r.sink = sink;
	r.sink_ctx = ctx;
	ret = req_run(&r);
	free(r.resp);
	if (ret == KVT_OK && len && r.status != 206 && off > 0)
		return -EIO; /* the server ignored the range */
	return ret == KVT_OK ? (int64_t)r.got : ret;
}

int64_t shs3_get_stream(struct shs3 *s3, const char *name, shs3_sink_fn sink, void *ctx)
{
	return get_stream_range(s3, name, 0, 0, sink, ctx);
}

/*
 * Each page is checked against what S3 promises of a listing, so that an
 * endpoint that breaks it cannot keep the walk going forever, feed it
 * keys it did not ask for, or hide some of the bucket from gc: keys come
 * in strictly increasing order (UTF-8 byte order, unescaped) and start
 * with the prefix; every entry has a size and an RFC 3339 date; a page
 * that says it is truncated carries at least one key and a
 * NextContinuationToken other than the one it answered.  A page that does
 * not is -EIO, never a listing silently cut short, and it is refused
 * whole, before fn sees any of its entries: clear and gc delete what fn
 * is given, and must not have deleted half a page that is then refused.
 * The parse and the checks are lib/fmt/s3list.c's, a pure function
 * fuzzed on its own.  The token goes back un-escaped, then
 * percent-encoded: S3LIST_TOKEN_MAX (4,096) bytes may take 12,288, in a
 * query of S3_QUERY_MAX, allocated with the walk's s3list; a query that
 * would not fit is -EIO too, never a token cut short.
 */
struct shs3_listing {
	struct s3list l;
	char etok[3 * S3LIST_TOKEN_MAX + 4];
	char query[S3_QUERY_MAX];
};

int shs3_list(struct shs3 *s3, const char *prefix, shs3_list_fn fn, void *ctx)
{
	char epre[600];
	struct shs3_listing *w;
	struct s3list *l;
	struct s3list_entry e;
	struct s3req r;
	int ret;
	qenc(prefix, epre, sizeof(epre));
	w = malloc(sizeof(*w)); /* 30 KiB: off the caller's stack */
	if (!w)
		return -ENOMEM;
	l = &w->l;
	s3list_init(l, prefix);
	for (;;) {
		req_init(&r, s3, "GET", "");
		r.query = w->query;
		r.query_cap = sizeof(w->query);
		/* The bucket itself: "/bucket" (uri_of gave "/bucket/"). */
		r.uri[strlen(r.uri) - 1] = 0;
		/* The canonical query: parameters sorted by name. */
		char mk[32] = "";
		if (s3->cfg.list_page)
			snprintf(mk, sizeof(mk), "&max-keys=%u", s3->cfg.list_page);
		if (l->token[0]) {
			qenc(l->token, w->etok, sizeof(w->etok));
			if ((size_t)snprintf(r.query, r.query_cap,
					     "continuation-token=%s&list-type=2%s&prefix=%s",
					     w->etok, mk, epre) >= r.query_cap) {
				A(s3->st.errors);
				kvt_logf(s3->log, KVT_LOG_WARN,
					 "s3 %s: a listing continuation token too long to send back",
					 s3->endpoint);
				ret = -EIO; /* r.resp: NULL (req_init) */
				goto out;
			}
		} else {
			snprintf(r.query, r.query_cap, "list-type=2%s&prefix=%s", mk, epre);
		}
		ret = req_run(&r);
		if (ret == KVT_MISS)
			ret = -ENOENT; /* no such bucket */
		if (ret != KVT_OK)
			goto out;
		if ((ret = s3list_page(l, r.resp, r.resp_len)) < 0) {
			A(s3->st.errors);
			kvt_logf(s3->log, KVT_LOG_WARN,
				 "s3 %s: a malformed listing page, refused whole (an entry "
				 "without key, size or date, not closed, a key out of order or "
				 "not under %s, a NUL, no IsTruncated, truncated without keys or "
				 "a new token, ...)",
				 s3->endpoint, prefix);
			goto out;
		}
		while ((ret = s3list_next(l, &e)) > 0)
			if ((ret = fn(ctx, e.key, e.size, e.mtime_s)) < 0)
				goto out;
		if (ret == 0)
			ret = s3list_end(l); /* 0 or 1: the page was checked whole */
		if (ret <= 0)
			goto out;
		free(r.resp);
	}
out:
	free(r.resp);
	free(w);
	return ret;
}

/* ------------------------------------------------------------------------
 * Blocks: the directory backend's files (shdir.h) as objects
 */

struct shs3_blk_stats *shs3_blk_stats(struct shs3 *s3)
{
	return &s3->blk;
}

int shs3_blk_stat(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		  uint64_t *obj_len)
{
	char name[SHDIR_RELPATH_MAX];
	int ret = shdir_relpath(ns_digest, key, name);
	if (ret < 0)
		return ret;
	A(s3->blk.stats_issued);
	return shs3_head(s3, name, obj_len);
}

int shs3_blk_write(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		   const struct iovec *view, unsigned view_count, uint64_t value_len,
		   unsigned part_count, const uint64_t *part_lens, const uint32_t *crcs,
		   uint32_t flags)
{
	char name[SHDIR_RELPATH_MAX];
	struct iovec iov[DRAM_MAX_RUNS + 2];
	uint64_t hcap = KVT_ALIGN_UP(SHDIR_HDR_MAX, SHDIR_ALIGN), left = value_len;
	uint8_t *hdr = NULL;
	unsigned n = 1;
	int64_t data_off;
	int ret;

	if (view_count > DRAM_MAX_RUNS + 1)
		return KVT_EBADLEN;
	if ((ret = shdir_relpath(ns_digest, key, name)) < 0)
		return ret;
	hdr = kvt_mem_alloc(s3->mem, hcap);
	if (!hdr)
		return -ENOMEM;
	data_off = shdir_hdr_encode(hdr, hcap, ns_digest, key, part_count, part_lens, crcs, flags);
	if (data_off < 0) {
		ret = (int)data_off;
		goto out;
	}
	iov[0] = (struct iovec){ hdr, (size_t)data_off };
	for (unsigned i = 0; i < view_count && left > 0; i++) {
		uint64_t k = view[i].iov_len < left ? view[i].iov_len : left;
		iov[n++] = (struct iovec){ view[i].iov_base, k };
		left -= k;
	}
	if (left > 0) {
		ret = KVT_EBADLEN;
		goto out;
	}
	/* Put if absent: a key names immutable bytes.  A server that ignores
	 * If-None-Match overwrites with the same bytes. */
	ret = put_iov(s3, name, iov, n, (uint64_t)data_off + value_len, true);
	if (ret == KVT_OK) {
		A(s3->blk.writes);
		AN(s3->blk.write_bytes, value_len);
	} else if (ret == KVT_EXISTS) {
		A(s3->blk.write_exists);
	} else {
		A(s3->blk.write_errors);
	}
out:
	kvt_mem_free(s3->mem, hdr, hcap);
	return ret;
}

/*
 * A block read streams one GET through this state machine:
 *
 *   HDR:   collect the header (4 KiB, more if its part table is longer),
 *          parse it, check that it names the block asked for, ask the
 *          caller where the value goes (reserve);
 *   VALUE: copy into the caller's view, chaining each part's CRC32C;
 *   (end)  the object must have been exactly data_off + value_len bytes
 *          and every part's CRC must match.
 */
struct blk_rd {
	struct shs3 *s3;
	const uint8_t *ns_digest;
	const struct kvt_key *key;
	struct shdir_hdr *h;
	shs3_reserve_fn reserve;
	void *ctx;
	uint8_t *hbuf;                /* hcap bytes */
	uint64_t hcap, hgot, want;    /* header bytes held, and wanted before parsing again */
	bool in_value;
	struct iovec view[DRAM_MAX_RUNS];
	unsigned vc, vi;              /* view spans, the one being filled */
	uint64_t voff;                /* bytes into view[vi] */
	uint64_t vgot;                /* value bytes received */
	unsigned part;
	uint64_t part_left;
	uint32_t crc;
	int err;                      /* why the sink refused (KVT_ECORRUPT, the reserve's) */
};

static int blk_header(struct blk_rd *b)
{
	int r = shdir_hdr_parse(b->hbuf, b->hgot, b->h);
	if (r > 0) {
		uint64_t w = KVT_ALIGN_UP((uint64_t)r, SHDIR_ALIGN);
		if (w > b->hcap || w <= b->hgot)
			return KVT_ECORRUPT;
		b->want = w;
		return 0;
	}
	if (r < 0)
		return KVT_ECORRUPT; /* KVT_EVERSION too: a miss */
	if (b->h->data_off > b->hgot) {
		if (b->h->data_off > b->hcap)
			return KVT_ECORRUPT;
		b->want = b->h->data_off;
		return 0;
	}
	if (!shdir_hdr_names(b->h, b->ns_digest, b->key))
		return KVT_ECORRUPT;
	r = b->reserve(b->ctx, b->h, b->view, &b->vc);
	if (r != KVT_OK)
		return r;
	b->in_value = true;
	b->part = 0;
	b->part_left = b->h->part_lens[0];
	b->crc = 0;
	return 0;
}

static int blk_sink(void *ctx, const uint8_t *p, size_t n)
{
	struct blk_rd *b = ctx;
	while (n > 0) {
		if (!b->in_value) {
			uint64_t k = b->want - b->hgot < n ? b->want - b->hgot : n;
			memcpy(b->hbuf + b->hgot, p, k);
			b->hgot += k;
			p += k;
			n -= k;
			if (b->hgot == b->want && (b->err = blk_header(b)) != 0)
				return -1;
			continue;
		}
		if (b->vgot == b->h->value_len || b->vi >= b->vc) {
			b->err = KVT_ECORRUPT; /* longer than its header says */
			return -1;
		}
		uint64_t k = b->view[b->vi].iov_len - b->voff;
		if (k > n)
			k = n;
		if (k > b->part_left)
			k = b->part_left;
		memcpy((uint8_t *)b->view[b->vi].iov_base + b->voff, p, k);
		b->crc = kvt_crc32c(b->crc, p, k);
		p += k;
		n -= k;
		b->vgot += k;
		b->voff += k;
		b->part_left -= k;
		if (b->voff == b->view[b->vi].iov_len) {
			b->vi++;
			b->voff = 0;
		}
		if (b->part_left == 0) {
			if (b->crc != b->h->crcs[b->part]) {
				b->err = KVT_ECORRUPT;
				return -1;
			}
			if (++b->part < b->h->part_count)
				b->part_left = b->h->part_lens[b->part];
			b->crc = 0;
		}
	}
	return 0;
}

int shs3_blk_read(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		  struct shdir_hdr *h, shs3_reserve_fn reserve, void *ctx)
{
	char name[SHDIR_RELPATH_MAX];
	struct blk_rd *b;
	int64_t got;
	int ret;

	if ((ret = shdir_relpath(ns_digest, key, name)) < 0)
		return ret;
	b = kvt_mem_calloc(s3->mem, 1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->s3 = s3;
	b->ns_digest = ns_digest;
	b->key = key;
	b->h = h;
	b->reserve = reserve;
	b->ctx = ctx;
	b->hcap = KVT_ALIGN_UP(SHDIR_HDR_MAX, SHDIR_ALIGN);
	b->want = SHDIR_ALIGN;
	b->hbuf = kvt_mem_alloc(s3->mem, b->hcap);
	if (!b->hbuf) {
		ret = -ENOMEM;
		goto out;
	}
	got = shs3_get_stream(s3, name, blk_sink, b);
	if (b->err) {
		ret = b->err; /* the sink stopped the transfer */
	} else if (got == KVT_MISS) {
		ret = KVT_MISS;
	} else if (got < 0) {
		ret = (int)got;
	} else if (!b->in_value || b->vgot != h->value_len || b->part != h->part_count) {
		ret = KVT_ECORRUPT; /* short */
	} else {
		ret = KVT_OK;
		A(s3->blk.reads);
		AN(s3->blk.read_bytes, h->value_len);
	}
	if (ret == KVT_ECORRUPT)
		A(s3->blk.corrupt);
	else if (ret < 0 && ret != KVT_MISS && !b->err)
		A(s3->blk.read_errors); /* the transfer failed: timeout, refused, 5xx */
out:
	if (b->hbuf)
		kvt_mem_free(s3->mem, b->hbuf, b->hcap);
	kvt_mem_free(s3->mem, b, sizeof(*b));
	return ret;
}

int shs3_blk_remove(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key)
{
	char name[SHDIR_RELPATH_MAX];
	int ret = shdir_relpath(ns_digest, key, name);
	return ret < 0 ? ret : shs3_delete(s3, name);
}

/* Lowercase hex digits, n of them, at s. */
static bool gc_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* A block's object name (shdir_relpath): kvt1/<64 hex>/<2 hex>/<2 hex>/<64 hex>.
 * gc counts and removes only those, as the directory's gc walks only
 * namespace directories: other objects under kvt1/ are not ours. */
static bool gc_block_name(const char *n)
{
	return strlen(n) == 5 + 64 + 1 + 2 + 1 + 2 + 1 + 64 && !strncmp(n, "kvt1/", 5) &&
	       gc_hex(n + 5, 64) && n[69] == '/' && gc_hex(n + 70, 2) && n[72] == '/' &&
	       gc_hex(n + 73, 2) && n[75] == '/' && gc_hex(n + 76, 64);
}

struct blk_del {
	struct shs3 *s3;
	int64_t removed;
};

static int blk_del_cb(void *ctx, const char *name, uint64_t len, int64_t mtime_s)
{
	struct blk_del *d = ctx;
	(void)len;
	(void)mtime_s;
	if (!gc_block_name(name))
		return 0; /* not a block: not ours to remove (as gc) */
	if (shs3_delete(d->s3, name) == KVT_OK)
		d->removed++;
	return 0;
}

int64_t shs3_blk_clear(struct shs3 *s3, const uint8_t *ns_digest)
{
	char prefix[80] = "kvt1/";
	struct blk_del d = { s3, 0 };
	int ret;
	if (ns_digest) {
		hexs(prefix + 5, ns_digest, 32);
		strcat(prefix, "/");
	}
	ret = shs3_list(s3, prefix, blk_del_cb, &d);
	return ret < 0 ? ret : d.removed;
}

struct gc_list {
	struct shs3 *s3;
	struct gcplan plan;
	bool first;              /* the plan's first listing: counts, the age limit */
	int64_t now_s;
	uint64_t max_age_s;
	struct kvt_shared_gc_result *res;
};

static int gc_list_cb(void *ctx, const char *name, uint64_t len, int64_t mtime_s)
{
	struct gc_list *g = ctx;
	if (!gc_block_name(name))
		return 0; /* not ours */
	if (g->first) {
		/* Sizes that sum past 2^64 bytes (16 EiB) are no bucket's: an
		 * endpoint that lists them is lying, so refuse the listing
		 * before deleting by size.  Kept exact, the sums cannot wrap. */
		if (len > UINT64_MAX - g->res->bytes) {
			A(g->s3->st.errors);
			kvt_logf(g->s3->log, KVT_LOG_WARN,
				 "s3 %s: listed sizes sum past 2^64 bytes (%s: %" PRIu64 ")",
				 g->s3->endpoint, name, len);
			return -EIO;
		}
		g->res->files++;
		g->res->bytes += len;
		if (g->max_age_s && g->now_s - mtime_s > (int64_t)g->max_age_s) {
			if (shs3_delete(g->s3, name) == KVT_OK) {
				g->res->removed_files++;
				g->res->removed_bytes += len;
			}
			return 0;
		}
	}
	if (gcplan_see(&g->plan, mtime_s, len) && shs3_delete(g->s3, name) == KVT_OK) {
		g->res->removed_files++;
		g->res->removed_bytes += len;
	}
	return 0;
}

int shs3_gc(struct shs3 *s3, uint64_t budget_bytes, uint64_t max_age_s,
	    struct kvt_shared_gc_result *out)
{
	struct kvt_shared_gc_result res = { 0 };
	struct gc_list g = { .s3 = s3, .first = true, .now_s = (int64_t)time(NULL),
			     .max_age_s = max_age_s, .res = &res };
	int ret = gcplan_init(&g.plan, budget_bytes, g.now_s);

	/* Over budget: oldest first, found in a second listing, in bounded
	 * memory (gcplan.h). */
	if (ret < 0)
		return ret;
	do {
		ret = shs3_list(s3, "kvt1/", gc_list_cb, &g);
		g.first = false;
	} while (ret >= 0 && gcplan_next(&g.plan));
	gcplan_free(&g.plan);
	if (ret < 0)
		return ret;
	if (out)
		*out = res;
	return 0;
}

/* ------------------------------------------------------------------------
 * Open and close
 */

int shs3_open(struct shs3 **out, const struct shs3_config *cfg, const struct shs3_creds *creds,
	      struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct shs3 *s3;
	const char *host;
	if (!cfg->endpoint || !cfg->bucket || strlen(cfg->endpoint) >= sizeof(s3->endpoint) ||
	    strlen(cfg->bucket) >= sizeof(((struct shs3 *)0)->bucket) || cfg->conns < 1 ||
	    cfg->conns > S3_MAX_CONNS || cfg->part_size < (UINT64_C(5) << 20))
		return KVT_EOPTVAL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	s3 = kvt_mem_calloc(mem, 1, sizeof(*s3));
	if (!s3)
		return -ENOMEM;
	s3->cfg = *cfg;
	s3->mem = mem;
	s3->log = log;
	s3->creds = *creds;
	snprintf(s3->endpoint, sizeof(s3->endpoint), "%s", cfg->endpoint);
	snprintf(s3->bucket, sizeof(s3->bucket), "%s", cfg->bucket);
	host = strstr(s3->endpoint, "://");
	snprintf(s3->host, sizeof(s3->host), "%s", host ? host + 3 : s3->endpoint);
	if (strchr(s3->host, '/'))
		*strchr(s3->host, '/') = 0;
	pthread_mutex_init(&s3->lock, NULL);
	pthread_cond_init(&s3->cond, NULL);
	for (unsigned i = 0; i < cfg->conns; i++) {
		s3->handles[i] = curl_easy_init();
		if (!s3->handles[i]) {
			s3->free_count = i;
			shs3_close(s3);
			return -ENOMEM;
		}
	}
	s3->free_count = cfg->conns;
	s3->cfg.endpoint = s3->endpoint;
	s3->cfg.bucket = s3->bucket;
	*out = s3;
	return 0;
}

void shs3_close(struct shs3 *s3)
{
	if (!s3)
		return;
	for (unsigned i = 0; i < s3->free_count; i++)
		curl_easy_cleanup(s3->handles[i]);
	pthread_mutex_destroy(&s3->lock);
	pthread_cond_destroy(&s3->cond);
	OPENSSL_cleanse(&s3->creds, sizeof(s3->creds));
	kvt_mem_free(s3->mem, s3, sizeof(*s3));
}

/* ------------------------------------------------------------------------
 * kvt_shared_gc_s3 (kvtier.h): "kvtier gc" for a bucket.
 */

int kvt_shared_gc_s3(const char *endpoint, const char *bucket, const char *credentials_file,
		     uint64_t budget_bytes, uint64_t max_age_s, struct kvt_shared_gc_result *out)
{
	struct shs3_config cfg = { .endpoint = endpoint, .bucket = bucket, .conns = 4,
				   .timeout_ms = 30000, .part_size = UINT64_C(64) << 20 };
	struct shs3_creds creds;
	struct kvt_mem mem;
	struct kvt_logger log = { 0 };
	struct shs3 *s3;
	int ret;

	if (!endpoint || !bucket)
		return KVT_ENULL;
	kvt_mem_init(&mem);
	ret = shs3_creds_load(&creds, credentials_file);
	if (ret < 0)
		return ret;
	ret = shs3_open(&s3, &cfg, &creds, &mem, &log);
	OPENSSL_cleanse(&creds, sizeof(creds));
	if (ret < 0)
		return ret;
	ret = shs3_gc(s3, budget_bytes, max_age_s, out);
	shs3_close(s3);
	return ret;
}

/* ------------------------------------------------------------------------
 * One part of a block: ranged GETs
 */

struct part_rd {
	const struct iovec *dst;
	unsigned dst_count, di;
	uint64_t doff, left;         /* bytes of the part still expected */
	uint32_t crc;
	bool too_long;               /* the server sent more than the range */
};

static int part_sink(void *ctx, const uint8_t *p, size_t n)
{
	struct part_rd *pr = ctx;
	if (n > pr->left) {
		pr->too_long = true;
		return -1; /* more than the range: fail the transfer */
	}
	pr->left -= n;
	pr->crc = kvt_crc32c(pr->crc, p, n);
	while (n) {
		size_t k = pr->dst[pr->di].iov_len - pr->doff;
		if (k > n)
			k = n;
		memcpy((uint8_t *)pr->dst[pr->di].iov_base + pr->doff, p, k);
		p += k;
		n -= k;
		pr->doff += k;
		if (pr->doff == pr->dst[pr->di].iov_len) {
			pr->di++;
			pr->doff = 0;
		}
	}
	return 0;
}

int64_t shs3_blk_read_part(struct shs3 *s3, const uint8_t ns_digest[32],
			   const struct kvt_key *key, uint32_t part, const struct iovec *dst,
			   unsigned dst_count, struct shdir_hdr *h)
{
	char name[SHDIR_RELPATH_MAX];
	size_t cap = KVT_ALIGN_UP(SHDIR_HDR_MAX, SHDIR_ALIGN);
	uint64_t want = SHDIR_ALIGN, off, len, room = 0;
	struct part_rd pr = { .dst = dst, .dst_count = dst_count };
	uint8_t *hbuf;
	int64_t got;
	int ret;

	if ((ret = shdir_relpath(ns_digest, key, name)) < 0)
		return ret;
	hbuf = kvt_mem_alloc(s3->mem, cap);
	if (!hbuf)
		return -ENOMEM;
	/* The header: its first page, then all of it if it is longer. */
	for (;;) {
		got = shs3_get(s3, name, 0, want, hbuf, cap);
		if (got < 0) {
			ret = (int)got;
			goto out;
		}
		ret = shdir_hdr_parse(hbuf, (size_t)got, h);
		if (ret > 0 && (uint64_t)got == want &&
		    KVT_ALIGN_UP((uint64_t)ret, SHDIR_ALIGN) > want &&
		    KVT_ALIGN_UP((uint64_t)ret, SHDIR_ALIGN) <= cap) {
			want = KVT_ALIGN_UP((uint64_t)ret, SHDIR_ALIGN);
			continue;
		}
		break;
	}
	if (ret != 0 || !shdir_hdr_names(h, ns_digest, key)) {
		ret = KVT_ECORRUPT; /* KVT_EVERSION too: a miss */
		goto out;
	}
	if (part >= h->part_count) {
		ret = KVT_ERANGE;
		goto out;
	}
	off = h->data_off;
	for (uint32_t i = 0; i < part; i++)
		off += h->part_lens[i];
	len = h->part_lens[part];
	for (unsigned i = 0; i < dst_count; i++)
		room += dst[i].iov_len;
	if (room < len) {
		ret = KVT_EBUFSMALL;
		goto out;
	}
	pr.left = len;
	got = get_stream_range(s3, name, off, len, part_sink, &pr);
	if (pr.too_long) {
		ret = KVT_ECORRUPT;
	} else if (got == KVT_MISS) {
		ret = KVT_MISS; /* removed since the header was read */
	} else if (got < 0 && got != -EIO) {
		ret = (int)got; /* the transfer failed: timeout, refused, 5xx */
	} else if (got < 0 || pr.left != 0 || pr.crc != h->crcs[part]) {
		ret = KVT_ECORRUPT; /* range ignored, short, or other bytes */
	} else {
		A(s3->blk.part_reads);
		AN(s3->blk.part_read_bytes, len);
		kvt_mem_free(s3->mem, hbuf, cap);
		return (int64_t)len;
	}
out:
	if (ret == KVT_ECORRUPT)
		A(s3->blk.corrupt);
	else if (ret < 0 && ret != KVT_MISS && ret != KVT_ERANGE && ret != KVT_EBUFSMALL)
		A(s3->blk.read_errors);
	kvt_mem_free(s3->mem, hbuf, cap);
	return ret;
}

/*
 * shs3.h - the object-store backend of the shared tier: the same block
 * files as shdir.c (header + value, doc/shared.md) stored as objects in an
 * S3-compatible bucket, over HTTP with AWS Signature Version 4 (libcurl
 * for HTTP, OpenSSL for SHA-256 and HMAC).
 *
 *   object name = the directory backend's relative path
 *                 (kvt1/<ns hex>/<ab>/<cd>/<key hash hex>)
 *
 * Connections: a pool of `conns` curl easy handles, each keeping its
 * connection alive between requests; a request borrows one.  Blocks
 * larger than part_size are uploaded as a multipart upload whose parts go
 * out in parallel over up to `conns` handles (curl multi).  A single part
 * of a block is read with a ranged GET.
 *
 * Credentials: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_REGION) or a file of "access_key = ..." / "secret_key = ..." /
 * "region = ..." lines readable by its owner only.  Never logged: error
 * messages name the key id's first four characters at most.
 *
 * Not wired into the store yet (issue 11 item 2): tests drive it directly.
 */
#ifndef KVT_SHS3_H
#define KVT_SHS3_H

#include "kvt_int.h"

struct shs3_creds {
	char access_key[129];
	char secret_key[129];
	char region[64];
};

/* From file (NULL: the environment).  0, KVT_EOPTVAL (missing or too long
 * fields, a file others may read), -errno. */
int shs3_creds_load(struct shs3_creds *c, const char *file);

/* One header of a request to sign: name lowercase, value trimmed. */
struct shs3_hdr {
	const char *name;
	const char *value;
};

/*
 * SigV4 "Authorization" value for one request.  hdrs: every signed header
 * (host included), sorted by name.  uri: the canonical (encoded) path;
 * query: the canonical query string ("" for none); payload_sha256: 64 hex
 * or "UNSIGNED-PAYLOAD"; amz_date: "YYYYMMDDTHHMMSSZ".  Writes a NUL-
 * terminated value to out; sts_hash (may be NULL, 65 bytes) gets the hex
 * SHA-256 of the canonical request (for tests against the published
 * vectors).  0, KVT_EBADLEN (out too small), -ENOMEM.  Pure.
 */
int shs3_sign(const char *method, const char *uri, const char *query,
	      const struct shs3_hdr *hdrs, unsigned hdr_count, const char *payload_sha256,
	      const char *amz_date, const char *region, const char *service,
	      const char *access_key, const char *secret_key, char *out, size_t out_len,
	      char *creq_hash);

struct shs3;

struct shs3_config {
	const char *endpoint;    /* "http://127.0.0.1:8333" (path-style requests) */
	const char *bucket;
	unsigned conns;          /* connections, 1..64 */
	unsigned timeout_ms;     /* per request */
	uint64_t part_size;      /* multipart above this, >= 5 MiB (S3's minimum part) */
};

int shs3_open(struct shs3 **out, const struct shs3_config *cfg, const struct shs3_creds *creds,
	      struct kvt_mem *mem, const struct kvt_logger *log);
void shs3_close(struct shs3 *s3);

/* PUT an object from buf[0..len).  KVT_OK, KVT_EPERM-like -EACCES (bad
 * credentials: the server's 403), -ETIMEDOUT, -ECONNREFUSED, -EIO. */
int shs3_put(struct shs3 *s3, const char *name, const void *buf, uint64_t len);
/* GET bytes [off, off+len) into buf (len 0: the whole object, buf_len
 * its room).  Bytes read (>= 0), KVT_MISS (no such object), errors as put. */
int64_t shs3_get(struct shs3 *s3, const char *name, uint64_t off, uint64_t len, void *buf,
		 uint64_t buf_len);
/* Object size into *len.  KVT_OK, KVT_MISS, errors. */
int shs3_head(struct shs3 *s3, const char *name, uint64_t *len);
/* KVT_OK (S3 answers 204 whether or not it existed), errors. */
int shs3_delete(struct shs3 *s3, const char *name);

struct shs3_stats {
	_Atomic uint64_t requests, errors, timeouts, denied, bytes_out, bytes_in, multipart_parts;
	_Atomic uint64_t conns_opened; /* new connections curl opened (reuse: stays low) */
};
struct shs3_stats *shs3_stats(struct shs3 *s3);

#endif

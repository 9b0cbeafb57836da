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
 * Blocks (shs3_blk_*): the directory backend's block files (shdir.h) as
 * objects, for the shared tier (shared.c) when the store has the
 * shared.s3_* options; kvt_shared_gc_s3 collects a bucket.
 */
#ifndef KVT_SHS3_H
#define KVT_SHS3_H

#include "kvt_int.h"
#include "shdir.h"

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
	bool sign_payload;       /* hash PUT bodies into the signature (else
				  * UNSIGNED-PAYLOAD: headers are still signed) */
	unsigned list_page;      /* ListObjectsV2 max-keys; 0: the server's (1000) */
	unsigned attempts;       /* tries of an idempotent request in all (0, 1: no retry) */
	unsigned retry_base_ms;  /* backoff before retry n: uniform in [0, base * 2^(n-1)] */
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

/* GET the whole object, streaming its body to sink(ctx, bytes, n), which
 * returns 0 to go on, nonzero to stop the transfer (then -EIO).  Bytes
 * read, KVT_MISS, errors as put. */
typedef int (*shs3_sink_fn)(void *ctx, const uint8_t *p, size_t n);
int64_t shs3_get_stream(struct shs3 *s3, const char *name, shs3_sink_fn sink, void *ctx);

/* ListObjectsV2 of every object whose name starts with prefix, page by
 * page: fn(ctx, name, bytes, last-modified seconds) for each; a negative
 * return from fn stops the walk and is returned.  Each page is checked
 * whole before fn sees any of its entries (lib/fmt/s3list.h): a malformed
 * page is -EIO with none of it given, the pages before it given.  0,
 * -ENOENT (no bucket), -EIO (a malformed page), errors as put. */
typedef int (*shs3_list_fn)(void *ctx, const char *name, uint64_t len, int64_t mtime_s);
int shs3_list(struct shs3 *s3, const char *prefix, shs3_list_fn fn, void *ctx);

struct shs3_stats {
	_Atomic uint64_t requests, errors, timeouts, denied, bytes_out, bytes_in, multipart_parts;
	_Atomic uint64_t conns_opened; /* new connections curl opened (reuse: stays low) */
	_Atomic uint64_t retries;       /* attempts after a transient failure (req_run, mp_retry) */
	/* requests (or parts) that failed after their last attempt */
	_Atomic uint64_t retry_giveups;
};
struct shs3_stats *shs3_stats(struct shs3 *s3);

/* ------------------------------------------------------------------------
 * Blocks: the same calls as the directory backend (shdir.h), over objects
 * named by shdir_relpath.
 */
struct shs3_blk_stats {
	_Atomic uint64_t writes, write_bytes, write_exists, write_errors;
	_Atomic uint64_t reads, read_bytes, read_errors, corrupt, bad_removed;
	_Atomic uint64_t part_reads, part_read_bytes; /* shs3_blk_read_part */
	_Atomic uint64_t stats_issued;
};
struct shs3_blk_stats *shs3_blk_stats(struct shs3 *s3);

/* HEAD: KVT_OK with *obj_len (header + value), KVT_MISS, errors. */
int shs3_blk_stat(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		  uint64_t *obj_len);
/* PUT header + view (value_len bytes) with If-None-Match: *.  KVT_OK,
 * KVT_EXISTS (the server said so; one that ignores the condition
 * overwrites with the same bytes), KVT_EBADLEN, errors. */
int shs3_blk_write(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		   const struct iovec *view, unsigned view_count, uint64_t value_len,
		   unsigned part_count, const uint64_t *part_lens, const uint32_t *crcs,
		   uint32_t flags);
/*
 * Read a block with one GET: once its header has arrived, been checked and
 * names ns_digest and key, reserve(ctx, h, view, &view_count) says where
 * the value goes (room for h->value_len bytes, at most DRAM_MAX_RUNS
 * spans); anything but KVT_OK from it stops the read and is returned.
 * The value is streamed into the view, each part's CRC32C checked.
 * h->part_lens and h->crcs must point at KVT_PARTS_MAX entries.
 * KVT_OK, KVT_MISS, KVT_ECORRUPT (bad header, short, long, CRC),
 * reserve's error, errors as get.  After a successful reserve, anything
 * but KVT_OK means the view holds garbage: the caller drops it.
 */
typedef int (*shs3_reserve_fn)(void *ctx, const struct shdir_hdr *h, struct iovec *view,
			       unsigned *view_count);
int shs3_blk_read(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key,
		  struct shdir_hdr *h, shs3_reserve_fn reserve, void *ctx);
/*
 * Read one part of a block and nothing else: a ranged GET of the header
 * (its first 4 KiB, more if the header says so), then a ranged GET of the
 * part's bytes, streamed into dst[0..dst_count) with their CRC32C checked
 * against the header's.  *h gets the header (value_len, flags, part
 * table; part_lens and crcs as for shs3_blk_read).  Returns the part's
 * length; KVT_MISS; KVT_ECORRUPT (a bad header, another key, a short
 * object, a CRC mismatch: dst holds garbage); KVT_ERANGE (no such part)
 * and KVT_EBUFSMALL (dst is shorter than the part), both with *h valid;
 * errors as get.
 */
int64_t shs3_blk_read_part(struct shs3 *s3, const uint8_t ns_digest[32],
			   const struct kvt_key *key, uint32_t part, const struct iovec *dst,
			   unsigned dst_count, struct shdir_hdr *h);
/* DELETE: KVT_OK, errors. */
int shs3_blk_remove(struct shs3 *s3, const uint8_t ns_digest[32], const struct kvt_key *key);
/* Delete every object of a namespace (NULL: under kvt1/): a listing, then
 * one DELETE per object (not atomic: a put racing it may survive).
 * Objects removed, or errors. */
int64_t shs3_blk_clear(struct shs3 *s3, const uint8_t *ns_digest);
/* kvt_shared_gc for a bucket: by LastModified (the write time: reads do
 * not refresh it), then oldest first over the budget. */
int shs3_gc(struct shs3 *s3, uint64_t budget_bytes, uint64_t max_age_s,
	    struct kvt_shared_gc_result *out);

#endif

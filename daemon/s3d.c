/*
 * s3d.c - kvtierd's S3 listener (--s3 ADDR): the subset of the Amazon S3
 * REST API that object-storage clients of a KV-cache tier use (NIXL's OBJ
 * plugin, boto3, the AWS CLI), served from the same store as the native
 * protocol (doc/s3.md).
 *
 * A connection lives in an event loop like every other: this file is
 * the protocol table's S3 entry (kvtd_s3_proto, at the end).  loop.c
 * accepts, reads into the connection's rbuf, writes the output queue and
 * runs the timeouts.  This file owns the input side: request heads,
 * routing, SigV4, bodies; s3ops.c the operations and the mapping of
 * buckets and keys; s3reply.c the answers and their order (s3d.h).
 *
 * A request's life: (1) its head is parsed (s3http.h) and (2) routed;
 * (3) its signature is checked (sigv4.h) before a body byte is read --
 * a failed one is answered and the connection closed, so no unauthenticated
 * client can make kvtierd receive or buffer anything past a head; (4) the
 * body is received -- a PutObject or UploadPart straight into a DRAM
 * reservation (kvt_put_reserve), through the aws-chunked decoder and the
 * chunk-signature and checksum checks as it arrives; anything else into a
 * buffer of at most 1 MiB charged to --max-memory; (5) the operation's
 * library requests run; (6) the answer is queued when every earlier
 * request of the connection has been answered.
 *
 * Overwrites: kvtier keys name immutable bytes.  A PUT whose key exists
 * (kvt_put_reserve says KVT_EXISTS) receives into a buffer charged to
 * --max-memory and is then a DELETE and a PUT submitted together, as
 * respd.c's SET; racing writers leave one complete value.  With
 * If-None-Match: * an existing key is 412 at once: the reservation is the
 * lock, so of two racing conditional writers exactly one wins.
 *
 * A remote tier below (kvt_put_reserve says KVT_ESTATE: a reservation has
 * nothing to write through from): every PUT and UploadPart body is
 * received into such a buffer and stored as an overwrite, DELETE + PUT,
 * answered once the remote tier is done with it.  A body larger than --max-memory is 400
 * EntityTooLarge before it is read; If-None-Match: * is 501 before it
 * too (the local put does not see a key only the pod holds: doc/s3.md).
 *
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3d.h"

/* ------------------------------------------------------------------------
 * Bodies
 */


static int s3d_ck_index(const char *name, size_t n)
{
	static const char *names[CK__COUNT] = { "x-amz-checksum-crc32c", "x-amz-checksum-crc32",
						"x-amz-checksum-sha256", "content-md5" };
	for (int i = 0; i < CK__COUNT; i++)
		if (strlen(names[i]) == n && strncasecmp(names[i], name, n) == 0)
			return i;
	return -1;
}

/* Content bytes (decoded): checksums, then into the sink. */
static void s3d_content(struct s3d_req *rq, const uint8_t *p, size_t n)
{
	if (n > rq->decoded_len - rq->got) {
		n = (size_t)(rq->decoded_len - rq->got); /* checked at the end */
		rq->err_status = rq->err_status ? rq->err_status : 400;
		if (!rq->err_code)
			rq->err_code = "IncompleteBody";
	}
	rq->crc32c = kvt_crc32c(rq->crc32c, p, n);
	if (rq->want_ck[CK_CRC32])
		rq->crc32 = crc32_gzip_refl(rq->crc32, p, n);
	if (rq->sha)
		EVP_DigestUpdate(rq->sha, p, n);
	if (rq->md5)
		EVP_DigestUpdate(rq->md5, p, n);
	if (rq->chunk_sha)
		EVP_DigestUpdate(rq->chunk_sha, p, n);
	if (rq->sink == SK_RESV) {
		uint64_t off = rq->hdr_len + rq->got;
		size_t left = n;
		for (uint32_t i = 0; i < rq->res.view_count && left; i++) {
			size_t l = rq->res.view[i].iov_len;
			if (off >= l) {
				off -= l;
				continue;
			}
			size_t t = l - (size_t)off < left ? l - (size_t)off : left;
			memcpy((uint8_t *)rq->res.view[i].iov_base + off, p, t);
			p += t;
			left -= t;
			off = 0;
		}
	} else if (rq->sink == SK_BUF) {
		memcpy(rq->buf + rq->buf_len, p, n);
		rq->buf_len += n;
	}
	rq->got += n;
}

/*
 * A signed aws-chunk's data is at least this long, but for the last one
 * (AWS: 403 InvalidChunkSizeError, "Only the last chunk is allowed to have
 * a size less than 8192 bytes").  Each chunk costs an HMAC chain step and
 * two SHA-256 contexts on the loop, ~2.1 us: chunks of one byte cost 25 ns
 * of the loop per byte received against 1.2 ns for chunks of 8 KiB, and 4
 * such PUTs held another tenant's GET p50 at 27 ms (test_hostile_http
 * s3_tiny_chunks).
 */
#define S3D_CHUNK_MIN 8192

/* An aws-chunked event of the inner decoder: 0, -1 (malformed), -2 (a
 * chunk's signature does not match: the request's error, the body read
 * on), -3 (a chunk after one too small: InvalidChunkSizeError). */
static int s3d_inner_event(struct s3d_req *rq, const struct s3c_ev *ev)
{
	switch (ev->kind) {
	case S3C_EV_CHUNK:
		if (ev->size > rq->decoded_len - rq->got)
			return -1; /* past the declared length: refused at its size line */
		if (rq->payload == PL_STREAM_SIGNED) {
			static const char pre[] = "chunk-signature=";
			if (ev->size > 0 && rq->chunk_small)
				return -3; /* at its size line, before its HMAC */
			rq->chunk_small = ev->size < S3D_CHUNK_MIN;
			if (ev->ext_len != sizeof(pre) - 1 + 64 ||
			    memcmp(ev->ext, pre, sizeof(pre) - 1) != 0)
				return -1;
			memcpy(rq->chunk_want, ev->ext + sizeof(pre) - 1, 64);
			rq->chunk_want[64] = 0;
			if (!rq->chunk_sha)
				rq->chunk_sha = EVP_MD_CTX_new();
			if (!rq->chunk_sha ||
			    EVP_DigestInit_ex(rq->chunk_sha, EVP_sha256(), NULL) != 1)
				return -1;
			if (ev->size == 0)
				goto verify;
		}
		return 0;
	case S3C_EV_DATA:
		s3d_content(rq, ev->p, ev->len);
		return 0;
	case S3C_EV_END:
		if (rq->payload == PL_STREAM_SIGNED)
			goto verify;
		return 0;
	case S3C_EV_TRAILER: {
		int i = s3d_ck_index(ev->name, ev->name_len);
		if (i >= 0 && i != CK_MD5) {
			/* too long to be one: "", which cannot match */
			size_t l = ev->value_len < sizeof(rq->ck_val[i]) ? ev->value_len : 0;
			memcpy(rq->ck_val[i], ev->value, l);
			rq->ck_val[i][l] = 0;
			rq->want_ck[i] = true;
		}
		return 0;
	}
	default:
		return 0;
	}
verify: {
	uint8_t h[32];
	unsigned hl = 32;
	char sig[65];
	if (!kvtd_auth_enabled())
		return 0; /* no secrets: nothing to check against */
	EVP_DigestFinal_ex(rq->chunk_sha, h, &hl);
	sigv4_chunk_sign(rq->sign_key, &rq->cred, rq->prev_sig, h, sig);
	if (!sigv4_sig_equal(rq->chunk_want, 64, sig)) {
		rq->err_status = 403;
		rq->err_code = "SignatureDoesNotMatch";
		snprintf(rq->err_msg, sizeof(rq->err_msg), "A chunk's signature does not match.");
		return -2;
	}
	memcpy(rq->prev_sig, sig, 65);
	return 0;
}
}

/* Body bytes as they come off the wire: transport decoding, then the
 * content encoding.  Returns bytes consumed, or -1 (malformed: close), or
 * -2 (a signed chunk after one under S3D_CHUNK_MIN: close). */
static int64_t s3d_body_feed(struct s3d_req *rq, const uint8_t *p, size_t n)
{
	size_t used = 0;

	while (used < n && !rq->body_done) {
		const uint8_t *q = p + used;
		size_t qn = n - used;
		struct s3c_ev ev;

		if (rq->transport_chunked) {
			int64_t r = s3c_next(rq->outer, q, qn, &ev);
			if (r < 0)
				return -1;
			used += (size_t)r;
			if (ev.kind == S3C_EV_DONE) {
				rq->body_done = true;
				break;
			}
			/* a chunk past the declared length: refused at its size
			 * line (else read and dropped to its end, up to 2^40) */
			if (ev.kind == S3C_EV_CHUNK && !rq->aws_chunked &&
			    ev.size > rq->decoded_len - rq->got)
				return -1;
			if (ev.kind != S3C_EV_DATA) {
				if (r == 0)
					break;
				continue;
			}
			q = ev.p;
			qn = ev.len;
		} else {
			if (qn > rq->wire_left)
				qn = (size_t)rq->wire_left;
			rq->wire_left -= qn;
			used += qn;
			if (rq->wire_left == 0 && !rq->aws_chunked)
				rq->body_done = true;
		}
		/* q[0, qn): content-encoded bytes */
		if (!rq->aws_chunked) {
			s3d_content(rq, q, qn);
		} else {
			size_t u = 0;
			while (u < qn) {
				int64_t r = s3c_next(rq->inner, q + u, qn - u, &ev);
				if (r < 0)
					return -1;
				u += (size_t)r;
				int e = s3d_inner_event(rq, &ev);
				if (e == -1)
					return -1;
				if (e == -3)
					return -2;
				if (ev.kind == S3C_EV_DONE)
					break;
				if (r == 0 && ev.kind == S3C_EV_NONE)
					break;
			}
			if (u < qn)
				return -1; /* bytes past the aws-chunked body */
		}
		if (!rq->transport_chunked && rq->wire_left == 0)
			rq->body_done = true;
	}
	return (int64_t)used;
}

static bool s3d_b64_equal(const char *b64, const uint8_t *raw, size_t rn)
{
	char mine[96];
	s3d_b64(raw, rn, mine);
	return strlen(b64) == strlen(mine) && CRYPTO_memcmp(b64, mine, strlen(mine)) == 0;
}

/*
 * Order.  HTTP/1.1 answers leave a connection in order, and a request that
 * changes the store runs before the requests behind it (RFC 9112 9.3.2
 * lets a server run only safe methods side by side).  A PUT's or a
 * DELETE's requests go to the store as its body ends or its head is
 * parsed, before anything behind it, in order; its answer may wait (a
 * DELETE's flush barrier) while the requests behind it run.  Those whose
 * writes come after a step of their own -- CopyObject and UploadPartCopy
 * (their source's probe), CompleteMultipartUpload (its parts'), a
 * bucket's creation or deletion (the registry, on the aux thread) -- hold
 * the heads behind them: none is parsed until they are finished
 * (s3reply.c s3d_finish; s3d_pin_flow pauses the parse).  Before
 * (attack40) the requests behind them ran as soon as parsed: a GET after
 * a CopyObject answered 200 was 404 (30 of 30), a DELETE after it was
 * answered 204 and the copy then stored the object again (30 of 30), a
 * PUT after a CreateBucket NoSuchBucket (10 of 10), and a DeleteBucket
 * after the DELETE of its last object BucketNotEmpty (9 of 10)
 * (test_hostile_http s3_order).  A DeleteObject (DeleteObjects) holds
 * them until its deletes are applied -- its store requests back, not its
 * flush barrier -- as the native protocol's DELETE (ops.c "One
 * connection's writes in order"): DRAM, the SSD and a shared tier apply
 * a delete inline (held until the loop drains its queue, the same
 * iteration), a remote tier under the server's store later (order43).
 * A PutObject or UploadPart over a remote tier (rq->through: DELETE +
 * PUT) holds them until both are back: its DELETE is answered by the pod
 * later, and a GET of the key behind it, submitted before that answer,
 * was a miss at once (remote.gets_removed) -- with remote.put_local=never
 * a pipelined PUT then GET was 200 then 404 (5 of 5; test_s3_remote).
 */
static bool s3d_op_holds(int op);

static void s3d_hold(struct s3d_req *rq)
{
	if (s3d_op_holds(rq->op) || rq->through)
		s3d_hold_write(rq);
}

/* The body is complete: check what must match, then run the operation. */
static void s3d_body_done(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uint8_t h[32];
	unsigned hl = 32;
	int r;

	rq->in_body = false;
	s3d_hold(rq);
	if (!rq->err_status && (rq->got != rq->decoded_len ||
				(rq->aws_chunked && !s3c_done(rq->inner)))) {
		rq->err_status = 400;
		rq->err_code = "IncompleteBody";
		snprintf(rq->err_msg, sizeof(rq->err_msg), "You did not provide the number of bytes "
			 "specified by the Content-Length HTTP header.");
	}
	if (!rq->err_status && rq->payload == PL_SIGNED) {
		char hx[65];
		size_t vl;
		const char *v = s3h_header(&rq->h, "x-amz-content-sha256", &vl);
		EVP_DigestFinal_ex(rq->sha, h, &hl);
		sigv4_hex(h, 32, hx);
		if (!v || vl != 64 || strncasecmp(v, hx, 64) != 0) {
			rq->err_status = 400;
			rq->err_code = "XAmzContentSHA256Mismatch";
			snprintf(rq->err_msg, sizeof(rq->err_msg), "The provided "
				 "'x-amz-content-sha256' header does not match what was computed.");
		}
		EVP_DigestInit_ex(rq->sha, EVP_sha256(), NULL);
		EVP_DigestUpdate(rq->sha, "", 0);
	}
	if (!rq->err_status) {
		uint8_t raw[32];
		for (int i = 0; i < CK__COUNT && !rq->err_status; i++) {
			bool ok = true;
			if (!rq->want_ck[i])
				continue;
			switch (i) {
			case CK_CRC32C:
			case CK_CRC32: {
				uint32_t v = i == CK_CRC32C ? rq->crc32c : rq->crc32;
				raw[0] = (uint8_t)(v >> 24);
				raw[1] = (uint8_t)(v >> 16);
				raw[2] = (uint8_t)(v >> 8);
				raw[3] = (uint8_t)v;
				ok = s3d_b64_equal(rq->ck_val[i], raw, 4);
				break;
			}
			case CK_SHA256:
				if (rq->payload == PL_SIGNED) {
					/* the digest was taken above: redo from the
					 * signed check's value */
					ok = s3d_b64_equal(rq->ck_val[i], h, 32);
				} else {
					EVP_DigestFinal_ex(rq->sha, raw, &hl);
					ok = s3d_b64_equal(rq->ck_val[i], raw, 32);
				}
				break;
			case CK_MD5:
				EVP_DigestFinal_ex(rq->md5, raw, &hl);
				ok = s3d_b64_equal(rq->ck_val[i], raw, 16);
				break;
			}
			if (!ok) {
				static const char *nm[CK__COUNT] = { "CRC32C", "CRC32", "SHA256",
								     "Content-MD5" };
				rq->err_status = 400;
				rq->err_code = "BadDigest";
				snprintf(rq->err_msg, sizeof(rq->err_msg), "The %s you specified did "
					 "not match the calculated checksum.", nm[i]);
			}
		}
	}
	if (rq->err_status) {
		s3d_fail(rq, rq->err_status, rq->err_code,
			 rq->err_msg[0] ? rq->err_msg : rq->err_code);
		return;
	}
	/* PUT, UploadPart: the body is in; no DeleteBucket of its bucket
	 * until answered, and none since its head */
	if ((rq->op == S3_PUT || rq->op == S3_MPU_PART) && (r = s3d_gate_stored(rq)) != 0) {
		s3d_gate_fail(rq, r);
		return;
	}
	/* PUT, UploadPart: the object is complete */
	if (rq->op == S3_PUT || rq->op == S3_MPU_PART) {
		rq->obj_crc = rq->crc32c;
		s3d_etag(rq->etag, sizeof(rq->etag), rq->crc32c, rq->got, 0);
		if (rq->sink == SK_RESV) {
			uint32_t crcs[2];
			struct kvt_key dummy;
			(void)dummy;
			s3d_put32(rq->hdrbuf + 24, rq->crc32c);
			/* header into the view's first bytes */
			{
				uint64_t left = rq->hdr_len;
				const uint8_t *src = rq->hdrbuf;
				for (uint32_t i = 0; i < rq->res.view_count && left; i++) {
					size_t t = rq->res.view[i].iov_len < left ?
							   rq->res.view[i].iov_len :
							   (size_t)left;
					memcpy(rq->res.view[i].iov_base, src, t);
					src += t;
					left -= t;
				}
			}
			crcs[0] = kvt_crc32c(0, rq->hdrbuf, rq->hdr_len);
			crcs[1] = rq->crc32c;
			r = kvt_put_commit_checked(srv->store, rq->res.handle, crcs);
			rq->reserved = false;
			s3d_resv_release(rq);
			if (r == KVT_OK && rq->tier < KVT_TIER_DRAM) /* committed into DRAM */
				rq->tier = KVT_TIER_DRAM;
			if (r != KVT_OK && r != -ECANCELED) {
				s3d_fail(rq, 500, "InternalError", kvt_strerror(r));
				return;
			}
			s3d_put_ok(rq);
			return;
		}
		/* SK_BUF: an overwrite */
		struct kvt_key k;
		if (rq->op == S3_PUT)
			s3d_key(&k, 'o', rq->key, rq->key_len);
		else
			s3d_part_key(&k, rq->upload_id, rq->part_no);
		s3d_put32(rq->hdrbuf + 24, rq->crc32c);
		s3d_put_buffered(rq, &k);
		return;
	}
	s3d_run(rq);
}

/* ------------------------------------------------------------------------
 * Routing and authentication
 */

/* The Host header: at most one (RFC 9112 3.2: two are 400, whatever
 * they say -- a front end routing by one and kvtierd by the other would
 * disagree on the bucket), at least one in HTTP/1.1 (HTTP/1.0 may omit
 * it), and with --s3-domain the bucket it names
 * (s3http.c s3h_vhost) into rq->bucket: 1 virtual-hosted, 0 path-style
 * (no --s3-domain, no Host, a Host not under a domain), or an answer was
 * written (-1). */
static int s3d_vhost(struct s3d_req *rq)
{
	const char *domains = rq->conn->loop->srv->cfg.s3_domain, *hv = NULL;
	size_t hvl = 0;
	unsigned hosts = 0;
	int r;

	for (unsigned i = 0; i < rq->h.hdr_count; i++)
		if (rq->hdrs[i].name_len == 4 && strncasecmp(rq->hdrs[i].name, "host", 4) == 0) {
			hosts++;
			hv = rq->hdrs[i].value;
			hvl = rq->hdrs[i].value_len;
		}
	if (hosts > 1) {
		s3d_fail(rq, 400, "InvalidArgument", "More than one Host header.");
		return -1;
	}
	/* and at least one in HTTP/1.1 (RFC 9112 3.2: 400, as S3 answers;
	 * it may be empty), which every client kvtierd documents sends:
	 * one without was served path-style */
	if (!hosts && rq->h.minor >= 1) {
		s3d_fail(rq, 400, "InvalidArgument", "An HTTP/1.1 request must have a Host "
			 "header.");
		return -1;
	}
	if (!domains || !hv)
		return 0;
	r = s3h_vhost(hv, hvl, domains, rq->bucket, sizeof(rq->bucket));
	if (r == S3H_ETOOBIG && hvl <= S3H_HOST_MAX) {
		rq->bucket[0] = 0;
		s3d_fail(rq, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return -1;
	}
	if (r < 0) {
		s3d_fail(rq, 400, "InvalidArgument", "The Host header is not a valid host[:port].");
		return -1;
	}
	if (r > 0 && !s3d_bucket_ok(rq->bucket, (size_t)r, false)) {
		rq->bucket[0] = 0;
		s3d_fail(rq, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return -1;
	}
	return r > 0;
}

/*
 * What each op is, a table by op (s3d_ops): the sub-resources (uploadId,
 * partNumber, uploads, delete) it takes and needs, and whether it holds
 * its connection's pipeline ("Order" above).
 *
 * Sub-resources: a write that carries one not its own is refused: the
 * method and the path chose the op and the rest was ignored, so a
 * request meant as another, or a client's bug, ran as a plainer write:
 * PUT ?uploadId= without partNumber (an UploadPart) replaced the object
 * with the part's bytes, DELETE ?delete or ?uploads of an empty bucket
 * deleted the bucket, DELETE ?partNumber= the object, DELETE
 * ?uploadId=&partNumber= aborted the whole upload, PUT ?uploadId= of a
 * bucket created it (red44b, 2026-12-07).  S3 has no such requests;
 * they are 501 NotImplemented, as another sub-resource is: nothing runs,
 * a body up to S3D_SMALL_MAX is read and dropped (the connection kept), a
 * larger one closes it.  Reads take any (GET ?uploads of a key is the
 * object).  An op without one it needs (an upload's ops without
 * uploadId) is 501 too.  Until s3fix45 (2026-12-07) a switch and an
 * if-chain in s3d_route said the same.
 *
 * Holds: an op whose store writes come after a step of its own.  Abort
 * held nothing until s3b45 (2026-12-07): an UploadPart pipelined behind
 * it read the marker before the Abort deleted it and wrote its part
 * after the sweep had passed its number -- 204 then 200, a part no
 * request could reach (test_hostile_http s3_abort_pipe).  The switch
 * of s3d_op_holds said which, a second list of ops beside this one.
 *
 * One entry an op, in the enum's order, each naming its op: one left
 * out fails the build (the _Static_assert below), one out of order
 * fails kvtierd's start (kvtd_s3_check).  Until s3b45 the entries were
 * designated initializers, and an op left out took no sub-resources.
 */
enum {
	S3D_SUB_UPLOAD_ID = 1u << 0,
	S3D_SUB_PART = 1u << 1,
	S3D_SUB_UPLOADS = 1u << 2,
	S3D_SUB_DELETE = 1u << 3,
	S3D_SUB_ANY = 0xfu,
};

#define S3D_UP_PART (S3D_SUB_UPLOAD_ID | S3D_SUB_PART)

static const struct s3d_op_info {
	uint8_t op;                /* its index (kvtd_s3_check) */
	uint8_t takes, needs;      /* sub-resources: S3D_SUB_* */
	bool holds;                /* the heads behind it wait for its answer */
} s3d_ops[] = {
	{ S3_NONE, S3D_SUB_ANY, 0, false },
	{ S3_LIST_BUCKETS, S3D_SUB_ANY, 0, false },
	{ S3_CREATE_BUCKET, 0, 0, true },
	{ S3_HEAD_BUCKET, S3D_SUB_ANY, 0, false },
	{ S3_DELETE_BUCKET, 0, 0, true },
	{ S3_BUCKET_LOCATION, S3D_SUB_ANY, 0, false },
	{ S3_PUT, 0, 0, false },
	{ S3_GET, S3D_SUB_ANY, 0, false },
	{ S3_HEAD, S3D_SUB_ANY, 0, false },
	{ S3_DELETE, 0, 0, false },
	{ S3_DELETE_MANY, S3D_SUB_DELETE, S3D_SUB_DELETE, false },
	{ S3_COPY, 0, 0, true },
	{ S3_MPU_CREATE, S3D_SUB_UPLOADS, S3D_SUB_UPLOADS, false },
	{ S3_MPU_PART, S3D_UP_PART, S3D_UP_PART, false },
	{ S3_MPU_COMPLETE, S3D_SUB_UPLOAD_ID, S3D_SUB_UPLOAD_ID, true },
	{ S3_MPU_ABORT, S3D_SUB_UPLOAD_ID, S3D_SUB_UPLOAD_ID, true },
	{ S3_LIST_V1, S3D_SUB_ANY, 0, false },
	{ S3_LIST_V2, S3D_SUB_ANY, 0, false },
	{ S3_MPU_PART_COPY, S3D_UP_PART, S3D_UP_PART, true },
	{ S3_LIST_PARTS, S3D_SUB_ANY, S3D_SUB_UPLOAD_ID, false },
	{ S3_LIST_UPLOADS, S3D_SUB_ANY, 0, false },
	{ S3_NOT_IMPL, S3D_SUB_ANY, 0, false },
};

_Static_assert(sizeof(s3d_ops) / sizeof(s3d_ops[0]) == S3__COUNT,
	       "s3d_ops: one entry for each op of enum s3d_op");

int kvtd_s3_check(void)
{
	for (unsigned i = 0; i < S3__COUNT; i++)
		if (s3d_ops[i].op != i)
			return -1;
	return 0;
}

/* Does op run with the sub-resources in subs (S3D_SUB_*)?  (s3d_ops) */
static bool s3d_subres_ok(int op, unsigned subs)
{
	const struct s3d_op_info *e = &s3d_ops[op];
	return (subs & ~(unsigned)e->takes) == 0 && (subs & e->needs) == e->needs;
}

/* Does op hold the heads behind it until it is answered?  (s3d_ops) */
static bool s3d_op_holds(int op)
{
	return s3d_ops[op].holds;
}

/*
 * The query parameters kvtierd reads (s3d_route; the listings' through
 * s3h_query).  Each at most once: a second one was read where another
 * was not -- s3d_route kept the last uploadId and partNumber, s3h_query
 * the first prefix or max-keys -- so a front end that checks or logs the
 * first saw another request than kvtierd ran (both are signed: the
 * canonical query keeps every pair).  400 InvalidArgument, as a
 * malformed parameter (until s3fix45, 2026-12-07, accepted).
 */
static const char *const s3d_params[] = {
	"uploads", "delete", "location", "list-type", "uploadId", "partNumber", "x-id",
	"max-keys", "prefix", "delimiter", "encoding-type", "continuation-token", "start-after",
	"fetch-owner", "marker", "max-parts", "part-number-marker", "max-uploads", "key-marker",
	"upload-id-marker",
};
_Static_assert(sizeof(s3d_params) / sizeof(s3d_params[0]) <= 32, "s3d_route's seen mask");

/* n (nl bytes, as sent) in s3d_params: its index, or -1. */
static int s3d_param_index(const char *n, size_t nl)
{
	for (size_t i = 0; i < sizeof(s3d_params) / sizeof(s3d_params[0]); i++)
		if (strlen(s3d_params[i]) == nl && memcmp(s3d_params[i], n, nl) == 0)
			return (int)i;
	return -1;
}

/* Path and query into bucket, key and the sub-resources read: path-style
 * /BUCKET/KEY, or virtual-hosted style /KEY with the bucket in the Host
 * (s3d_vhost).  0 or an answer was written (-1). */
static int s3d_route(struct s3d_req *rq)
{
	const char *t = rq->h.target, *q;
	size_t tl = rq->h.target_len, pl;
	char *dec;
	int64_t dl;
	const char *m = rq->h.method;
	size_t ml = rq->h.method_len;
	bool get = ml == 3 && !memcmp(m, "GET", 3), put = ml == 3 && !memcmp(m, "PUT", 3);
	bool head = ml == 4 && !memcmp(m, "HEAD", 4), del = ml == 6 && !memcmp(m, "DELETE", 6);
	bool post = ml == 4 && !memcmp(m, "POST", 4);
	bool has_upload = false, has_part = false, other_sub = false;
	uint32_t seen = 0; /* s3d_params given so far */
	size_t vl;
	int vhost;

	if (tl == 0 || t[0] != '/') {
		s3d_fail(rq, 400, "InvalidURI", "Couldn't parse the specified URI.");
		return -1;
	}
	q = memchr(t, '?', tl);
	pl = q ? (size_t)(q - t) : tl;
	dec = malloc(pl + 1);
	if (!dec) {
		rq->oom = true;
		s3d_finish(rq);
		return -1;
	}
	dl = s3h_unescape(t + 1, pl - 1, dec, pl);
	if (dl < 0) {
		free(dec);
		s3d_fail(rq, 400, "InvalidURI", "Couldn't parse the specified URI.");
		return -1;
	}
	dec[dl] = 0;
	vhost = s3d_vhost(rq);
	if (vhost < 0) {
		free(dec);
		return -1;
	}
	rq->vhost = vhost > 0;
	{
		/* where the key starts in the path: virtual-hosted, after its
		 * '/' (the whole path); path-style, after the bucket's '/' */
		size_t koff = 0;
		bool sep = vhost > 0;
		if (!vhost) {
			char *slash = memchr(dec, '/', (size_t)dl);
			size_t bl = slash ? (size_t)(slash - dec) : (size_t)dl;
			if (bl >= sizeof(rq->bucket) || (bl && !s3d_bucket_ok(dec, bl, false))) {
				free(dec);
				s3d_fail(rq, 400, "InvalidBucketName", "The specified bucket is not "
					 "valid.");
				return -1;
			}
			memcpy(rq->bucket, dec, bl);
			rq->bucket[bl] = 0;
			sep = slash != NULL;
			koff = bl + 1;
		}
		if (sep && (size_t)dl > koff) { /* a key, even one that starts with NUL */
			rq->key_len = (size_t)dl - koff;
			if (rq->key_len > S3D_KEY_MAX) {
				free(dec);
				s3d_fail(rq, 400, "KeyTooLongError", "Your key is too long");
				return -1;
			}
			memmove(dec, dec + koff, rq->key_len);
			dec[rq->key_len] = 0;
			rq->key = dec;
			dec = NULL;
		}
		free(dec);
	}
	/* sub-resources */
	for (size_t i = q ? (size_t)(q - t) + 1 : tl; i < tl;) {
		size_t s = i, e;
		while (i < tl && t[i] != '&')
			i++;
		e = i++;
		const char *eq = memchr(t + s, '=', e - s);
		size_t nl = eq ? (size_t)(eq - t) - s : e - s;
		const char *n = t + s, *v = eq ? eq + 1 : "";
		size_t vlen = eq ? e - (size_t)(eq - t) - 1 : 0;
		int pi = s3d_param_index(n, nl);
		if (pi >= 0 && (seen & (UINT32_C(1) << pi))) {
			s3d_fail(rq, 400, "InvalidArgument", "A query parameter is given more than "
				 "once.");
			return -1;
		}
		if (pi >= 0)
			seen |= UINT32_C(1) << pi;
#define IS(lit) (nl == sizeof(lit) - 1 && memcmp(n, lit, nl) == 0)
		if (IS("uploads")) {
			rq->q_uploads = true;
		} else if (IS("delete")) {
			rq->q_delete = true;
		} else if (IS("location")) {
			rq->q_location = true;
		} else if (IS("list-type")) {
			rq->q_list2 = true;
		} else if (IS("uploadId")) {
			if (vlen != 32) {
				s3d_fail(rq, 404, "NoSuchUpload", "The specified multipart upload does "
					 "not exist.");
				return -1;
			}
			for (size_t k = 0; k < 32; k++)
				if (!((v[k] >= '0' && v[k] <= '9') ||
				      (v[k] >= 'a' && v[k] <= 'f'))) {
					s3d_fail(rq, 404, "NoSuchUpload", "The specified multipart "
						 "upload does not exist.");
					return -1;
				}
			memcpy(rq->upload_id, v, 32);
			rq->upload_id[32] = 0;
			has_upload = true;
		} else if (IS("partNumber")) {
			unsigned long pn = 0;
			/* every byte a digit, not only the first 6 */
			for (size_t k = 0; k < vlen && pn <= 10000; k++)
				pn = v[k] >= '0' && v[k] <= '9'
					     ? pn * 10 + (unsigned long)(v[k] - '0')
					     : 100000;
			if (vlen == 0 || pn < 1 || pn > 10000) {
				s3d_fail(rq, 400, "InvalidArgument", "Part number must be an integer "
					 "between 1 and 10000, inclusive");
				return -1;
			}
			rq->part_no = (uint32_t)pn;
			has_part = true;
		} else if (IS("x-id") || (nl > 6 && memcmp(n, "X-Amz-", 6) == 0) ||
			   IS("max-keys") || IS("prefix") || IS("delimiter") || IS("encoding-type") ||
			   IS("continuation-token") || IS("start-after") || IS("fetch-owner") ||
			   IS("marker") || IS("max-parts") || IS("part-number-marker") ||
			   IS("max-uploads") || IS("key-marker") || IS("upload-id-marker")) {
			/* read elsewhere or harmless */
		} else {
			other_sub = true; /* ?acl, ?tagging, ?versioning, ... */
		}
#undef IS
	}
	if (other_sub) {
		rq->op = S3_NOT_IMPL;
	} else if (!rq->bucket[0]) {
		rq->op = get ? S3_LIST_BUCKETS : S3_NOT_IMPL;
	} else if (!rq->key) {
		if (put)
			rq->op = S3_CREATE_BUCKET;
		else if (head)
			rq->op = S3_HEAD_BUCKET;
		else if (del)
			rq->op = S3_DELETE_BUCKET;
		else if (get && rq->q_location)
			rq->op = S3_BUCKET_LOCATION;
		else if (post && rq->q_delete)
			rq->op = S3_DELETE_MANY;
		else if (get && rq->q_uploads)
			rq->op = S3_LIST_UPLOADS;
		else if (get)
			rq->op = rq->q_list2 ? S3_LIST_V2 : S3_LIST_V1;
		else
			rq->op = S3_NOT_IMPL;
	} else if (put && has_upload && has_part) {
		rq->op = s3h_header(&rq->h, "x-amz-copy-source", &vl) ? S3_MPU_PART_COPY : S3_MPU_PART;
	} else if (put) {
		rq->op = s3h_header(&rq->h, "x-amz-copy-source", &vl) ? S3_COPY : S3_PUT;
	} else if (get && !has_upload && !has_part) {
		rq->op = S3_GET;
	} else if (get && has_upload && !has_part) {
		rq->op = S3_LIST_PARTS;
	} else if (head && !has_upload && !has_part) {
		rq->op = S3_HEAD;
	} else if (del) {
		rq->op = has_upload ? S3_MPU_ABORT : S3_DELETE;
	} else if (post && rq->q_uploads) {
		rq->op = S3_MPU_CREATE;
	} else if (post && has_upload) {
		rq->op = S3_MPU_COMPLETE;
	} else {
		rq->op = S3_NOT_IMPL;
	}
	if (!s3d_subres_ok(rq->op, (has_upload ? S3D_SUB_UPLOAD_ID : 0) |
				   (has_part ? S3D_SUB_PART : 0) |
				   (rq->q_uploads ? S3D_SUB_UPLOADS : 0) |
				   (rq->q_delete ? S3D_SUB_DELETE : 0)))
		rq->op = S3_NOT_IMPL;
	return 0;
}

/* Is header name (n bytes) among those the request signed? */
static bool s3d_is_signed(const struct s3d_req *rq, const char *name, size_t n)
{
	const char *p = rq->cred.signed_headers;

	while (*p) { /* lowercase names, ';' between */
		const char *e = strchr(p, ';');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && strncasecmp(p, name, l) == 0)
			return true;
		p += l + (e ? 1 : 0);
	}
	return false;
}

/* Is every x-amz-* header of the request among those it signed?  S3
 * refuses one that is not (AccessDenied): else whoever holds a presigned
 * URL (only host signed) could add, say, x-amz-copy-source, and turn the
 * PUT it was given into a copy of another of the signer's objects. */
static bool s3d_amz_signed(const struct s3d_req *rq)
{
	for (unsigned i = 0; i < rq->h.hdr_count; i++) {
		const struct s3h_hdr *h = &rq->hdrs[i];

		if (h->name_len < 6 || strncasecmp(h->name, "x-amz-", 6) != 0)
			continue;
		if (!s3d_is_signed(rq, h->name, h->name_len))
			return false;
	}
	return true;
}

/* Who signed it: 0, or an answer was written (-1; the connection then
 * closes: no body byte of an unauthenticated request is read). */
static int s3d_auth(struct s3d_req *rq)
{
	struct kvtd_conn *c = rq->conn;
	struct kvtd_server *srv = c->loop->srv;
	struct sigv4_req sr = { 0 };
	const char *v, *q;
	size_t vl, pl;
	uint8_t secret[PROTO_SECRET_MAX];
	uint32_t sl = 0, role = 0;
	int r, known;
	char *creq;
	int64_t cl;

	q = memchr(rq->h.target, '?', rq->h.target_len);
	pl = q ? (size_t)(q - rq->h.target) : rq->h.target_len;
	v = s3h_header(&rq->h, "authorization", &vl);
	if (v) {
		r = sigv4_parse_header(v, vl, &rq->cred);
		if (r == 0) {
			const char *d = s3h_header(&rq->h, "x-amz-date", &vl);
			if (!d || vl != 16)
				r = SIGV4_EMALFORMED;
			else {
				memcpy(rq->cred.amz_date, d, 16);
				rq->cred.amz_date[16] = 0;
			}
		}
		sr.payload_hash = s3h_header(&rq->h, "x-amz-content-sha256", &sr.payload_hash_len);
		if (!sr.payload_hash && r == 0 && kvtd_auth_enabled()) {
			s3d_fail(rq, 400, "InvalidRequest", "Missing required header for this request: "
				 "x-amz-content-sha256");
			return -1;
		}
	} else {
		r = sigv4_parse_query(q ? q + 1 : "", q ? rq->h.target_len - pl - 1 : 0, &rq->cred);
		if (r == 1)
			r = kvtd_auth_enabled() ? -1 : 0; /* anonymous */
		sr.payload_hash = "UNSIGNED-PAYLOAD";
		sr.payload_hash_len = 16;
	}
	if (!kvtd_auth_enabled()) {
		snprintf(rq->tenant, sizeof(rq->tenant), "%s", KVTD_DEFAULT_TENANT);
		rq->tenant_len = strlen(rq->tenant);
		return 0;
	}
	/* A signature for another service is not one for S3 (S3 refuses
	 * it too); any region is taken: it is only signed (doc/s3.md) */
	if (r == 0 && strcmp(rq->cred.service, "s3") != 0)
		r = SIGV4_EMALFORMED;
	if (r == -1) {
		KVTD_COUNT(srv, errors[KVTD_ERR_NOAUTH], 1);
		s3d_fail(rq, 403, "AccessDenied", "Anonymous access is not allowed: sign the request "
			 "(AWS Signature Version 4).");
		return -1;
	}
	if (r < 0) {
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		s3d_fail(rq, 400, "AuthorizationHeaderMalformed", "The authorization header is "
			 "malformed (AWS4-HMAC-SHA256 only).");
		return -1;
	}
	/* With --s3-domain the Host names the bucket: a request whose
	 * signature left it out could be sent again (within its 15 minutes)
	 * with another Host, to the same key in another of the signer's
	 * buckets -- a DELETE of hbkt's /victim deleted other's (redhttp).
	 * S3 requires host signed; path-style requests are left as they
	 * were (doc/security.md "Left as they are"). */
	if (!s3d_amz_signed(rq) || (rq->vhost && !s3d_is_signed(rq, "host", 4))) {
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		s3d_fail(rq, 403, "AccessDenied", "There were headers present in the request "
			 "which were not signed");
		return -1;
	}
	/* Guessing is throttled per peer address, as native and RESP AUTH
	 * (doc/security.md): past the limit nothing is checked this second.
	 * Not a request of the signer this connection has proven already
	 * (its tenant, READY): every S3 request is signed, and the throttle
	 * an unauthenticated client's failures set on an address refused
	 * (and closed) the authenticated connections of every tenant there
	 * -- 21 bad signatures a second kept alice's keep-alive GETs at 503
	 * (redhttp).  Native and RESP check it once, at AUTH; here so does a
	 * connection, for its signer.  Another access key on it is checked. */
	if (!(c->state == KVTD_CS_READY && c->tenant_len == strlen(rq->cred.access_key) &&
	      memcmp(c->tenant, rq->cred.access_key, c->tenant_len) == 0) &&
	    kvtd_auth_throttled(c)) {
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		kvtd_auth_failed(c);
		s3d_fail(rq, 503, "SlowDown", "Too many failed authentications from this address; "
			 "retry later.");
		return -1;
	}
	creq = malloc(S3D_CREQ_MAX);
	if (!creq) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return -1;
	}
	sr.method = rq->h.method;
	sr.method_len = rq->h.method_len;
	sr.path = rq->h.target;
	sr.path_len = pl;
	sr.query = q ? q + 1 : "";
	sr.query_len = q ? rq->h.target_len - pl - 1 : 0;
	sr.hdrs = rq->hdrs;
	sr.hdr_count = rq->h.hdr_count;
	cl = sigv4_canonical(&sr, &rq->cred, creq, S3D_CREQ_MAX);
	known = kvtd_auth_s3_secret(rq->cred.access_key, strlen(rq->cred.access_key), secret, &sl,
				    &role);
	r = cl < 0 ? (int)cl :
		     sigv4_verify(&rq->cred, secret, sl, creq, (size_t)cl, (int64_t)time(NULL),
				  rq->sign_key);
	OPENSSL_cleanse(secret, sizeof(secret));
	free(creq);
	if (known != 0 || r != 0) {
		char qt[PROTO_TENANT_MAX * 4 + 8];
		kvtd_auth_failed(c);
		kvtd_log_client(KVTD_WARN, "authentication failed",
			 "conn=%llu peer=%s tenant=%s proto=s3 why=%s", (unsigned long long)c->id,
			 c->peer, kvtd_log_quote(qt, sizeof(qt), rq->cred.access_key),
			 known != 0 ? "unknown-access-key" : r == SIGV4_ESKEW ? "clock-skew" :
			 r == SIGV4_EEXPIRED ? "expired" : r == SIGV4_EMISMATCH ? "signature" :
			 "malformed");
	}
	if (known != 0) {
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		s3d_fail(rq, 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not "
			 "exist in our records.");
		return -1;
	}
	if (r != 0) {
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		if (r == SIGV4_ESKEW)
			s3d_fail(rq, 403, "RequestTimeTooSkewed", "The difference between the request "
				 "time and the current time is too large.");
		else if (r == SIGV4_EEXPIRED)
			s3d_fail(rq, 403, "AccessDenied", "Request has expired");
		else if (r == SIGV4_EMISMATCH)
			s3d_fail(rq, 403, "SignatureDoesNotMatch", "The request signature we "
				 "calculated does not match the signature you provided. Check your key "
				 "and signing method.");
		else
			s3d_fail(rq, 400, "AuthorizationHeaderMalformed", "The request could not be "
				 "canonicalized.");
		return -1;
	}
	snprintf(rq->tenant, sizeof(rq->tenant), "%s", rq->cred.access_key);
	rq->tenant_len = strlen(rq->tenant);
	memcpy(rq->prev_sig, rq->cred.signature, 65);
	if (c->tenant_len != rq->tenant_len || memcmp(c->tenant, rq->tenant, rq->tenant_len) ||
	    !c->conns_tstat) {
		/* Its tenant's --tenant-conns (metrics.c): counted in the
		 * signer's; past it, 503 and the connection closes. */
		char msg[200];
		if (!kvtd_tenant_conn_admit(c, rq->tenant, rq->tenant_len, msg, sizeof(msg))) {
			rq->keep_alive = false;
			s3d_fail(rq, 503, "SlowDown", msg);
			return -1;
		}
	}
	/* The connection's tenant is its latest signer's: the loop's checks
	 * after a SIGHUP (kvtd_conn_auth_current) and the per-tenant
	 * counters follow it; each request is still checked on its own. */
	if (c->tenant_len != rq->tenant_len || memcmp(c->tenant, rq->tenant, rq->tenant_len)) {
		memcpy(c->tenant, rq->tenant, rq->tenant_len + 1);
		c->tenant_len = (uint32_t)rq->tenant_len;
		c->tstat = NULL;
	}
	c->role = role;
	if (c->state != KVTD_CS_READY) {
		kvtd_conn_ready(c); /* leaves the unauthenticated count and limits */
		KVTD_COUNT(srv, auth_ok, 1);
	}
	return 0;
}

/*
 * A PutObject or UploadPart body of n bytes (its object header included)
 * about to be reserved in DRAM holds them in its tenant's resv_held until
 * it is committed or dropped.  Without, one tenant starting uploads on
 * many connections and sending their bodies slowly (or never) reserved
 * the whole DRAM tier: every other tenant's blocks were evicted (a bucket
 * whose marker went was NoSuchBucket) and its PUTs refused 503
 * (test_hostile_http s3_upload_share).  false: past the tenant's share
 * (KVTD_RESV_TENANT_MAX, its native PUTs' reservations counted too) while
 * it reserves for other values.
 */
static bool s3d_resv_hold(struct s3d_req *rq, uint64_t n)
{
	struct kvtd_tstat *t = rq->in_tstat;

	if (!kvtd_resv_hold(rq->conn->loop->srv, t, n))
		return false;
	if (!t || !kvtd_auth_enabled())
		return true; /* nothing held (kvtd_resv_hold) */
	rq->resv_tstat = t;
	rq->resv_held = n;
	return true;
}

/* Where a PutObject or UploadPart body goes, from kvt_put_reserve's
 * answer r: 0 (rq->sink set; an error to answer after the body may be
 * set too) or -1 (answered now). */
static int s3d_put_sink(struct s3d_req *rq, int r)
{
	struct kvtd_server *srv = rq->conn->loop->srv;

	if (r == KVT_OK) {
		rq->reserved = true;
		rq->sink = SK_RESV;
		return 0;
	}
	s3d_resv_release(rq); /* nothing reserved in DRAM */
	/* A remote tier below: nothing to reserve (kvtier.h), the body is
	 * buffered and written through as an overwrite ("Overwrites"). */
	bool through = rq->through = r == KVT_ESTATE;
	if (through && rq->cond_none_match) { /* as s3d_cond_refused's */
		rq->close_after = true; /* its body is not read */
		s3d_fail(rq, 501, "NotImplemented", "kvtierd does not evaluate If-None-Match over "
			 "a remote tier: the write would not be conditional (doc/s3.md).");
		return -1;
	}
	/* beside what the request holds (its head): one of --max-memory
	 * exactly was 503 SlowDown however often retried (review43g) */
	if (through && srv->cfg.max_memory &&
	    (rq->decoded_len > srv->cfg.max_memory ||
	     rq->decoded_len + rq->mem_charged > srv->cfg.max_memory)) {
		char m[200];
		snprintf(m, sizeof(m), "Your proposed upload exceeds what kvtierd over a remote "
			 "tier buffers (--max-memory, %" PRIu64 " bytes).", srv->cfg.max_memory);
		rq->close_after = true; /* do not read a body that large */
		s3d_fail(rq, 400, "EntityTooLarge", m);
		return -1;
	}
	if (r == KVT_EXISTS && rq->cond_none_match) {
		rq->sink = SK_DISCARD;
		rq->err_status = 412;
		rq->err_code = "PreconditionFailed";
		snprintf(rq->err_msg, sizeof(rq->err_msg), "At least one of the pre-conditions "
			 "you specified did not hold");
		return 0;
	}
	if (r != KVT_EXISTS && !through) {
		rq->sink = SK_DISCARD;
		rq->err_status = r == KVT_ETOOBIG || r == KVT_EBADLEN ? 400 : 503;
		rq->err_code = rq->err_status == 400 ? "EntityTooLarge" : "SlowDown";
		snprintf(rq->err_msg, sizeof(rq->err_msg), "%s", kvt_strerror(r));
		return 0;
	}
	/* an overwrite, or a remote tier below: into a buffer, then DELETE +
	 * PUT */
	if (!s3d_share_fits(rq, rq->decoded_len)) {
		KVTD_COUNT(srv, mem_refused, 1);
		rq->close_after = true; /* its body is not read */
		s3d_fail(rq, 503, "SlowDown", S3D_SHARE_MSG);
		return -1;
	}
	if (!kvtd_mem_charge(srv, rq->decoded_len, false)) {
		KVTD_COUNT(srv, mem_refused, 1);
		/* before s3d_fail: at the head of its connection rq is answered
		 * and freed in it (a write after it was a use after free) */
		rq->close_after = true;
		s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory); "
			 "retry later");
		return -1;
	}
	rq->buf_charged = rq->decoded_len;
	s3d_tenant_charge(rq, rq->buf_charged);
	rq->buf = malloc(rq->decoded_len ? rq->decoded_len : 1);
	if (!rq->buf)
		goto oom;
	rq->sink = SK_BUF;
	return 0;
oom:
	rq->close_after = true;
	s3d_fail(rq, 503, "SlowDown", "server out of memory");
	return -1;
}

/* PutObject, UploadPart (its upload checked: s3d_upload_probe): the new
 * value's header, its DRAM reservation, and so the sink -- as
 * s3d_body_setup answers: 0, -1 (answered, the connection closes), or 1
 * (would wait for write-down room: park it). */
static int s3d_put_reserve(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct kvt_key k;
	uint64_t lens[2];
	const char *name = rq->key, *v;
	size_t name_len = rq->key_len, vl;
	char pname[64];
	int r;

	if (rq->op == S3_MPU_PART) {
		name_len = (size_t)snprintf(pname, sizeof(pname), "%s/%u", rq->upload_id,
					    rq->part_no);
		name = pname;
		s3d_part_key(&k, rq->upload_id, rq->part_no);
	} else {
		s3d_key(&k, 'o', rq->key, rq->key_len);
	}
	rq->hdr_len = s3d_obj_header(rq->hdrbuf, rq->decoded_len, 0, name, name_len, rq->ctype,
				     0);
	lens[0] = rq->hdr_len;
	lens[1] = rq->decoded_len;
	v = s3h_header(&rq->h, "if-none-match", &vl);
	rq->cond_none_match = v && vl == 1 && v[0] == '*';
	if (rq->decoded_len > srv->dram_max_value) {
		char m[160];
		snprintf(m, sizeof(m), "Your proposed upload exceeds kvtierd's largest value "
			 "(%" PRIu64 " bytes).", srv->dram_max_value);
		rq->close_after = true; /* do not read a body that large */
		s3d_fail(rq, 400, "EntityTooLarge", m);
		return -1;
	}
	if (!s3d_resv_hold(rq, lens[0] + lens[1])) {
		KVTD_COUNT(srv, mem_refused, 1);
		rq->close_after = true; /* its body is not read */
		s3d_fail(rq, 503, "SlowDown", "The tenant's uploads in progress hold its "
			 "share of kvtierd's DRAM tier; retry later.");
		return -1;
	}
	rq->room_key = k;
	rq->room_parts = rq->decoded_len ? 2 : 1;
	/* A persistent namespace (every bucket) whose write-down queue is
	 * full: park the request rather than the loop (s3d_park). */
	r = kvt_put_reserve(srv->store, rq->ns, &k, lens, rq->room_parts, KVT_F_NOWAIT,
			    &rq->res);
	if (r == KVT_EWAIT)
		return 1;
	return s3d_put_sink(rq, r);
}

/*
 * A condition on a write that kvtierd does not evaluate: its name, or
 * NULL.  S3 keeps them (PutObject's If-Match, CopyObject's
 * x-amz-copy-source-if-*, CompleteMultipartUpload's If-None-Match); a
 * client that sends one relies on the write not happening when it does
 * not hold (a compare-and-swap, a copy of the version it looked at).
 * Ignored, each such write went ahead: a PUT with a stale If-Match
 * replaced the object (redhttp).  Refused instead, before the body, as
 * the checksums kvtierd does not compute.  PutObject's If-None-Match: *
 * is kept (s3d_put_sink: the reservation is the lock).
 */
static const char *s3d_cond_refused(const struct s3d_req *rq)
{
	size_t vl;
	const char *v;

	if (rq->op != S3_PUT && rq->op != S3_COPY && rq->op != S3_MPU_PART_COPY &&
	    rq->op != S3_MPU_COMPLETE)
		return NULL;
	if (s3h_header(&rq->h, "if-match", &vl))
		return "If-Match";
	v = s3h_header(&rq->h, "if-none-match", &vl);
	if (v && (rq->op != S3_PUT || vl != 1 || v[0] != '*'))
		return "If-None-Match";
	for (unsigned i = 0; i < rq->h.hdr_count; i++)
		if (rq->hdrs[i].name_len > 21 &&
		    strncasecmp(rq->hdrs[i].name, "x-amz-copy-source-if-", 21) == 0)
			return "x-amz-copy-source-if-*";
	return NULL;
}

/* Payload mode, lengths, checksums and the sink: 0, or an answer was
 * written and the connection closes (-1), or 1: a PutObject or UploadPart
 * would wait for write-down room (the caller parks it), or 2: an
 * UploadPart's upload is to be read first (s3d_upload_probe). */
static int s3d_body_setup(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	size_t vl;
	const char *v = s3h_header(&rq->h, "x-amz-content-sha256", &vl);
	const char *ce;
	size_t cel;
	bool streaming = false;

	if ((ce = s3d_cond_refused(rq))) {
		char m[160];
		snprintf(m, sizeof(m), "kvtierd does not evaluate %s on this operation: the "
			 "write would not be conditional (doc/s3.md).", ce);
		rq->close_after = true; /* its body is not read */
		s3d_fail(rq, 501, "NotImplemented", m);
		return -1;
	}
	rq->payload = PL_UNSIGNED;
	if (v && vl == 64) {
		rq->payload = PL_SIGNED;
	} else if (v && vl == 34 && memcmp(v, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", 34) == 0) {
		rq->payload = PL_STREAM_SIGNED;
		streaming = true;
	} else if (v && vl == 34 && memcmp(v, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", 34) == 0) {
		rq->payload = PL_STREAM_TRAILER;
		streaming = true;
	} else if (v && !(vl == 16 && memcmp(v, "UNSIGNED-PAYLOAD", 16) == 0)) {
		rq->close_after = true;
		s3d_fail(rq, 501, "NotImplemented", "This x-amz-content-sha256 payload mode is not "
			 "implemented (doc/s3.md).");
		return -1;
	}
	rq->transport_chunked = rq->h.chunked;
	ce = s3h_header(&rq->h, "content-encoding", &cel);
	rq->aws_chunked = streaming || (ce && cel >= 11 && memmem(ce, cel, "aws-chunked", 11));
	/* aws-chunked without a streaming mode: unsigned -- unless the
	 * request signed its content's SHA-256, which the decoded content
	 * must then match.  Content-Encoding need not be signed: added to a
	 * PUT that signed sha256("good") (and x-amz-decoded-content-length),
	 * it turned the hash off, and an aws-chunked body "evil" was stored
	 * under that signature (redhttp). */
	if (rq->aws_chunked && !streaming && rq->payload != PL_SIGNED)
		rq->payload = PL_STREAM_TRAILER;
	if (rq->aws_chunked || rq->transport_chunked) {
		const char *d = s3h_header(&rq->h, "x-amz-decoded-content-length", &vl);
		uint64_t n = 0;
		if (!d && !rq->aws_chunked) {
			rq->close_after = true;
			s3d_fail(rq, 411, "MissingContentLength", "You must provide the Content-Length "
				 "HTTP header.");
			return -1;
		}
		for (size_t i = 0; d && i < vl; i++) {
			if (d[i] < '0' || d[i] > '9' || i > 15) {
				rq->close_after = true;
				s3d_fail(rq, 400, "InvalidArgument", "bad x-amz-decoded-content-length");
				return -1;
			}
			n = n * 10 + (uint64_t)(d[i] - '0');
		}
		if (!d) {
			rq->close_after = true;
			s3d_fail(rq, 411, "MissingContentLength", "aws-chunked needs "
				 "x-amz-decoded-content-length");
			return -1;
		}
		rq->decoded_len = n;
	} else {
		rq->decoded_len = rq->h.content_length > 0 ? (uint64_t)rq->h.content_length : 0;
	}
	rq->wire_left = rq->h.content_length > 0 ? (uint64_t)rq->h.content_length : 0;
	if (rq->transport_chunked) {
		rq->outer = malloc(sizeof(*rq->outer));
		if (!rq->outer)
			goto oom;
		s3c_init(rq->outer, UINT64_C(1) << 40);
	}
	if (rq->aws_chunked) {
		rq->inner = malloc(sizeof(*rq->inner));
		if (!rq->inner)
			goto oom;
		s3c_init(rq->inner, UINT64_C(1) << 40);
	}
	/* checksums sent as headers; x-amz-trailer names the one to come */
	for (unsigned i = 0; i < rq->h.hdr_count; i++) {
		int k = s3d_ck_index(rq->hdrs[i].name, rq->hdrs[i].name_len);
		if (k >= 0) {
			/* one too long to be a checksum is kept as "", which
			 * cannot match (BadDigest), not left unchecked */
			size_t l = rq->hdrs[i].value_len < sizeof(rq->ck_val[k]) ?
					   rq->hdrs[i].value_len : 0;
			memcpy(rq->ck_val[k], rq->hdrs[i].value, l);
			rq->ck_val[k][l] = 0;
			rq->want_ck[k] = true;
		}
		if ((rq->hdrs[i].name_len == 24 &&
		     strncasecmp(rq->hdrs[i].name, "x-amz-checksum-crc64nvme", 24) == 0) ||
		    (rq->hdrs[i].name_len == 19 &&
		     strncasecmp(rq->hdrs[i].name, "x-amz-checksum-sha1", 19) == 0)) {
			rq->close_after = true;
			s3d_fail(rq, 501, "NotImplemented", "This checksum algorithm is not "
				 "implemented (CRC32C, CRC32, SHA256 and Content-MD5 are).");
			return -1;
		}
	}
	if ((v = s3h_header(&rq->h, "x-amz-trailer", &vl))) {
		int k = s3d_ck_index(v, vl);
		if (k < 0 || k == CK_MD5) {
			rq->close_after = true;
			s3d_fail(rq, 501, "NotImplemented", "This trailing checksum is not implemented.");
			return -1;
		}
		rq->want_ck[k] = true; /* its value arrives in the trailer */
	}
	if (rq->payload == PL_SIGNED || rq->want_ck[CK_SHA256]) {
		rq->sha = EVP_MD_CTX_new();
		if (!rq->sha || EVP_DigestInit_ex(rq->sha, EVP_sha256(), NULL) != 1)
			goto oom;
	}
	if (rq->want_ck[CK_MD5]) {
		rq->md5 = EVP_MD_CTX_new();
		if (!rq->md5 || EVP_DigestInit_ex(rq->md5, EVP_md5(), NULL) != 1)
			goto oom;
	}
	/* the sink */
	if (rq->op == S3_PUT || rq->op == S3_MPU_PART) {
		int r;

		if ((v = s3h_header(&rq->h, "content-type", &vl)) && vl <= S3D_CTYPE_MAX) {
			memcpy(rq->ctype, v, vl);
			rq->ctype[vl] = 0;
		}
		if ((r = s3d_bucket_ns(rq, false)) != 0) {
			/* answered now: no body is read for a bucket that is not
			 * there (a lookup that failed is no answer about it) */
			rq->close_after = true;
			if (r == KVT_MISS)
				s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not "
					 "exist");
			else
				s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
			return -1;
		}
		if (rq->granted) {
			rq->close_after = true;
			s3d_fail(rq, 403, "AccessDenied", "A grant gives read access only.");
			return -1;
		}
		/* none in progress; one that comes while its body does wins
		 * (s3ops.c "DeleteBucket against the bucket's writes") */
		if ((r = s3d_gate_receive(rq)) != 0) {
			rq->close_after = true; /* its body is not read */
			s3d_gate_fail(rq, r);
			return -1;
		}
		if (rq->op == S3_MPU_PART)
			return 2; /* its upload's marker read first (s3d_upload_probe) */
		return s3d_put_reserve(rq);
	}
	if (rq->op == S3_DELETE_MANY || rq->op == S3_MPU_COMPLETE || rq->op == S3_CREATE_BUCKET) {
		if (rq->decoded_len > S3D_SMALL_MAX) {
			rq->close_after = true;
			s3d_fail(rq, 400, "MaxMessageLengthExceeded", "Your request was too big.");
			return -1;
		}
		if (!s3d_share_fits(rq, rq->decoded_len + 1)) {
			KVTD_COUNT(srv, mem_refused, 1);
			rq->close_after = true;
			s3d_fail(rq, 503, "SlowDown", S3D_SHARE_MSG);
			return -1;
		}
		if (!kvtd_mem_charge(srv, rq->decoded_len + 1, false)) {
			KVTD_COUNT(srv, mem_refused, 1);
			rq->close_after = true;
			s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory)");
			return -1;
		}
		rq->buf_charged = rq->decoded_len + 1;
		s3d_tenant_charge(rq, rq->buf_charged);
		rq->buf = malloc(rq->decoded_len + 1);
		if (!rq->buf)
			goto oom;
		rq->sink = SK_BUF;
		return 0;
	}
	/* other bodies are read and dropped (bounded: authenticated, and at
	 * most the Content-Length the client signed) */
	if (rq->decoded_len > S3D_SMALL_MAX) {
		rq->close_after = true;
		s3d_fail(rq, 400, "MaxMessageLengthExceeded", "Your request was too big.");
		return -1;
	}
	rq->sink = SK_DISCARD;
	return 0;
oom:
	rq->close_after = true;
	s3d_fail(rq, 503, "SlowDown", "server out of memory");
	return -1;
}

/* ------------------------------------------------------------------------
 * Input
 */

static void s3d_proto_error(struct kvtd_conn *c, int status, const char *code, const char *msg)
{
	struct s3d_conn *sc = s3d_of(c);
	struct s3d_req *rq = calloc(1, sizeof(*rq));

	KVTD_COUNT(c->loop->srv, errors[KVTD_ERR_MALFORMED], 1);
	kvtd_conn_log(c, KVTD_INFO, "closing S3 connection after a protocol error", msg);
	if (rq) {
		rq->conn = c;
		rq->close_after = true;
		rq->start_ns = kvtd_now_ns();
		c->inflight++;
		if (sc->tail)
			sc->tail->next = rq;
		else
			sc->head = rq;
		sc->tail = rq;
		s3d_fail(rq, status, code, msg);
	}
	if (!c->dead && !c->no_more_input)
		kvtd_conn_stop_input(c);
}

static void s3d_send_continue(struct kvtd_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct kvtd_out *o = calloc(1, sizeof(*o));
	char *b = malloc(sizeof(cont) - 1);

	if (!o || !b) {
		free(o);
		free(b);
		return;
	}
	memcpy(b, cont, sizeof(cont) - 1);
	o->iov = o->iov_small;
	o->iov[0] = (struct iovec){ b, sizeof(cont) - 1 };
	o->iov_count = 1;
	o->hdr = (uint8_t *)b;
	o->bytes = sizeof(cont) - 1;
	kvtd_conn_queue(c, o);
}

/* The body of a request whose sink is set: received from here on. */
static void s3d_body_start(struct s3d_req *rq)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_conn *sc = s3d_of(c);

	if (rq->wire_left == 0 && !rq->transport_chunked) {
		/* No body: answered at once.  A client that asked to be told
		 * to continue is told first, as S3 does (RFC 9110 lets a
		 * server leave it out here).  botocore before 1.44 (awscli
		 * 1.46 carries its own 1.43) takes a final answer in that slot
		 * and then reads the connection's next answer after a 100 as
		 * headers only: no length, a 60 s read timeout, a retry
		 * (botocore issue 3755; an empty file in "aws s3 sync"). */
		if (rq->h.expect_continue && !rq->err_status && sc->head == rq)
			s3d_send_continue(c);
		s3d_body_done(rq);
		return;
	}
	if (rq->err_status && rq->h.expect_continue) {
		/* Already refused (412 of a conditional PUT, ...): a client that
		 * waits for 100 Continue gets the answer instead, and sends no
		 * body; the connection closes after it. */
		rq->close_after = true;
		s3d_fail(rq, rq->err_status, rq->err_code, rq->err_msg);
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
	rq->in_body = true;
	sc->rx = rq;
	if (rq->h.expect_continue && sc->head == rq)
		s3d_send_continue(c);
	c->frame_start_ns = c->loop->now_ns;
}

/*
 * Parking (doc/kvtierd.md "Persistent write-downs").  A PutObject or
 * UploadPart into a bucket -- a persistent namespace, whose puts go down
 * to the SSD at once and are never shed -- may find the SSD's write-down
 * queue full.  The library would then wait for room in the calling
 * thread, this loop, stalling every connection it serves.  Instead the
 * request is parked: its connection stops being read (its body stays in
 * the socket, nothing after it is parsed), a KVT_OP_ROOM waits in the
 * library with no thread blocked, and its completion, on this loop's
 * queue, resumes the request where s3d_begin left it: reserve again,
 * receive the body.  The ROOM fails after ssd.writedown_wait_ms; the PUT
 * is then answered 503 SlowDown once its body is read, as before.  A
 * reserve that finds the room taken again by another put parks once
 * more, then gives up the same way (at most twice the wait).
 */
static void s3d_room_done(struct s3d_req *rq, int status);

/* A parked request whose wait ended with its body not to be read: its
 * connection closed (the answer goes nowhere), or its input stopped by
 * kvtierd -- the server stopping (loop.c loop_begin_stop), an earlier
 * request refused -- not by the client, whose EOF is not read while the
 * connection is parked.  The latter is 503, which clients retry; until
 * review45a both were 400 IncompleteBody ("the connection closed"), which
 * they do not, to a client that had sent its whole body. */
static void s3d_parked_cut(struct s3d_req *rq)
{
	rq->close_after = true;
	if (rq->conn->dead)
		s3d_fail(rq, 400, "IncompleteBody",
			 "The connection closed before the body was complete.");
	else
		s3d_fail(rq, 503, "ServiceUnavailable", "kvtierd stopped reading this connection "
			 "before the request's body (stopping, or an earlier request refused); "
			 "retry.");
}

static void s3d_park(struct s3d_req *rq)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_item *it = calloc(1, sizeof(*it));
	struct kvt_req *r;

	if (!it) {
		s3d_room_done(rq, -ENOMEM);
		return;
	}
	it->rq = rq;
	it->req.op = KVT_OP_ROOM;
	it->req.ns = rq->ns;
	it->req.len = rq->hdr_len + rq->decoded_len;
	it->req.user_data = (uint64_t)(uintptr_t)it | S3D_UD;
	it->room_done = s3d_room_done;
	rq->room_item = it;
	rq->parks++;
	c->parked = true;
	kvtd_conn_flow(c); /* reads pause */
	KVTD_COUNT(c->loop->srv, put_parked, 1);
	r = &it->req;
	if (kvt_submit(c->loop->q, &r, 1) != 1) {
		rq->room_item = NULL;
		free(it);
		s3d_room_done(rq, KVT_EFULL);
	}
}

/* The parked request's KVT_OP_ROOM is back (s3d_req_done). */
static void s3d_room_done(struct s3d_req *rq, int status)
{
	struct kvtd_conn *c = rq->conn;
	struct kvtd_server *srv = c->loop->srv;
	uint64_t lens[2] = { rq->hdr_len, rq->decoded_len };
	int r = status;

	free(rq->room_item);
	rq->room_item = NULL;
	c->parked = false;
	if (c->dead || c->no_more_input) {
		s3d_parked_cut(rq);
		return;
	}
	if (r == KVT_OK) {
		r = kvt_put_reserve(srv->store, rq->ns, &rq->room_key, lens, rq->room_parts,
				    KVT_F_NOWAIT, &rq->res);
		if (r == KVT_EWAIT && rq->parks < 2) {
			s3d_park(rq); /* another put took the room first */
			return;
		}
	}
	if (r == KVT_EWAIT || r == -ENOMEM)
		r = KVT_EFULL;
	if (r == KVT_EFULL)
		KVTD_COUNT(srv, put_park_timeouts, 1);
	if (s3d_put_sink(rq, r) < 0) {
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		kvtd_conn_flow(c);
		return;
	}
	s3d_body_start(rq);
	kvtd_conn_flow(c); /* reads resume; what is buffered is parsed */
	kvtd_conn_touch(c);
}

/*
 * UploadPart's upload (s3ops.c s3d_upload_item): its marker is read
 * through the loop's queue before anything of the body, the connection
 * parked meanwhile as for write-down room (its body stays in the socket,
 * nothing after it is parsed), and the request goes on from its
 * completion: reserved and received if the upload is the key's, else
 * NoSuchUpload (404, as S3) or, the read failed or its miss's presence
 * did (s3ops.c s3d_upload_again: a pod member down), 503 -- the
 * connection closed, as any request refused from its head.  Until s3fix45
 * (2026-12-07) a kvt_exists of the upload id on the loop: any key's
 * upload in the bucket would do, and over a remote tier the lookup
 * waited for the pod with every connection of the loop.
 */
static void s3d_upload_checked(struct s3d_req *rq, int status);

static void s3d_upload_probe(struct s3d_req *rq)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_item *it = calloc(1, sizeof(*it));
	struct kvt_req *r;

	if (!it) {
		rq->close_after = true;
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
	s3d_upload_item(rq, it);
	it->room_done = s3d_upload_checked;
	rq->room_item = it;
	c->parked = true;
	kvtd_conn_flow(c); /* reads pause */
	r = &it->req;
	if (kvt_submit(c->loop->q, &r, 1) != 1) {
		it->req.status = KVT_EFULL;
		s3d_upload_checked(rq, KVT_EFULL);
	}
}

/* The marker read is back (s3d_req_done), or was never sent. */
static void s3d_upload_checked(struct s3d_req *rq, int status)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_item *it = rq->room_item;
	int r;

	(void)status; /* (it->req.status) */
	if (!c->dead && !c->no_more_input && s3d_upload_again(rq, it))
		return; /* asked of the tier below: back here */
	r = s3d_upload_found(rq, &it->req);
	free(it);
	rq->room_item = NULL;
	c->parked = false;
	if (c->dead || c->no_more_input) {
		s3d_parked_cut(rq);
		return;
	}
	if (r == 0) {
		r = s3d_put_reserve(rq);
	} else {
		rq->close_after = true; /* its body is not read */
		s3d_upload_fail(rq, r);
		r = -1;
	}
	if (r == 1) {
		s3d_park(rq);
		return;
	}
	if (r == 0)
		s3d_body_start(rq);
	else if (!c->dead && !c->no_more_input)
		kvtd_conn_stop_input(c);
	kvtd_conn_flow(c); /* reads resume; what is buffered is parsed */
	kvtd_conn_touch(c);
}

/* A complete head at the start of the buffer: a new request. */
static void s3d_begin(struct kvtd_conn *c, const struct s3h_req *h)
{
	struct s3d_conn *sc = s3d_of(c);
	struct s3d_req *rq = calloc(1, sizeof(*rq));
	const uint8_t *base = c->rbuf + c->rstart;

	/* A request in flight (its struct and head copy) is charged to
	 * --max-memory: a tenant pipelining many cannot grow kvtierd past it. */
	uint64_t charge = sizeof(*rq) + h->head_len;

	if (!kvtd_mem_charge(c->loop->srv, charge, false)) {
		free(rq);
		KVTD_COUNT(c->loop->srv, mem_refused, 1);
		s3d_proto_error(c, 503, "SlowDown", "server memory limit reached (--max-memory); "
				"retry later");
		return;
	}
	if (!rq || !(rq->head = malloc(h->head_len))) {
		free(rq);
		kvtd_mem_uncharge(c->loop->srv, charge);
		s3d_proto_error(c, 503, "SlowDown", "server out of memory");
		return;
	}
	rq->mem_charged = charge;
	memcpy(rq->head, base, h->head_len);
	rq->h = *h;
	rq->h.hdrs = rq->hdrs;
	/* re-point the parsed fields into the copy */
	{
		const char *b0 = (const char *)base, *nb = (const char *)rq->head;
		rq->h.method = nb + (h->method - b0);
		rq->h.target = nb + (h->target - b0);
		for (unsigned i = 0; i < h->hdr_count; i++) {
			rq->hdrs[i] = h->hdrs[i];
			rq->hdrs[i].name = nb + (h->hdrs[i].name - b0);
			rq->hdrs[i].value = nb + (h->hdrs[i].value - b0);
		}
	}
	c->rstart += h->head_len;
	rq->conn = c;
	rq->start_ns = kvtd_now_ns();
	rq->id = c->id << 32 | (c->frames & 0xffffffffu);
	rq->keep_alive = h->keep_alive;
	c->inflight++;
	c->frames++;
	if (sc->tail)
		sc->tail->next = rq;
	else
		sc->head = rq;
	sc->tail = rq;
	/* An answer from route or auth closes the connection: the request's
	 * body (if any) is never read, so nothing after it can be parsed. */
	rq->close_after = true;
	if (s3d_route(rq) < 0 || s3d_auth(rq) < 0) {
		/* answered: nothing of its body is read */
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
	rq->close_after = false;
	if (rq->op == S3_GET) {
		rq->get_counted = true;
		sc->gets++;
	}
	{
		/* the signer's counters (its body bytes are not counted), and
		 * its input share: what its requests in flight hold */
		struct kvtd_tstat *t = kvtd_tstat_of(c);
		if (t) {
			atomic_fetch_add_explicit(&t->requests, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&t->bytes_in, h->head_len, memory_order_relaxed);
			rq->in_tstat = t;
			s3d_tenant_charge(rq, rq->mem_charged);
		}
	}
	switch (s3d_body_setup(rq)) {
	case 0:
		s3d_body_start(rq);
		return;
	case 1:
		s3d_park(rq);
		return;
	case 2:
		s3d_upload_probe(rq);
		return;
	default:
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
}

static void s3d_written(struct kvtd_conn *c)
{
	if (c->alt)
		s3d_pin_flow(c);
}

/* Feed buffered bytes to the body being received; parse the next heads. */
static void s3d_parse(struct kvtd_conn *c)
{
	struct s3d_conn *sc = s3d_of(c);

	while (!c->dead && !c->no_more_input && c->rend > c->rstart) {
		if (sc->rx) {
			struct s3d_req *rq = sc->rx;
			int64_t u = s3d_body_feed(rq, c->rbuf + c->rstart, c->rend - c->rstart);
			if (u == -2) {
				sc->rx = NULL;
				rq->close_after = true;
				rq->in_body = false;
				s3d_fail(rq, 403, "InvalidChunkSizeError", "Only the last chunk is "
					 "allowed to have a size less than 8192 bytes.");
				if (!c->dead && !c->no_more_input)
					kvtd_conn_stop_input(c);
				return;
			}
			if (u < 0) {
				sc->rx = NULL;
				rq->close_after = true;
				rq->in_body = false;
				s3d_fail(rq, 400, "IncompleteBody", "The request body is malformed "
					 "(chunked or aws-chunked encoding).");
				if (!c->dead && !c->no_more_input)
					kvtd_conn_stop_input(c);
				return;
			}
			c->rstart += (size_t)u;
			/* the slow-client clock restarts every 16 MiB received */
			if (rq->got / KVTD_SLOW_PROGRESS != rq->rx_mark / KVTD_SLOW_PROGRESS) {
				rq->rx_mark = rq->got;
				c->frame_start_ns = c->loop->now_ns;
			}
			if (!rq->body_done)
				break;
			sc->rx = NULL;
			c->frame_start_ns = 0;
			s3d_body_done(rq);
			continue;
		}
		/* A request parked before its body (s3d_park, s3d_upload_probe):
		 * what is buffered is its body, read once it goes on.  Before
		 * (review45a) the Connection: close check below took it for a
		 * request after the last and stopped the input: an UploadPart
		 * with Connection: close whose body came in its head's packet
		 * was 400 IncompleteBody, every time. */
		if (c->parked)
			return;
		/* After a request that closes the connection (Connection:
		 * close, HTTP/1.0) nothing is parsed: its answer is the last,
		 * and a request after it would run unanswered (RFC 9112 9.6). */
		if (sc->tail && !sc->tail->keep_alive) {
			kvtd_conn_stop_input(c);
			return;
		}
		s3d_pin_flow(c);
		if (c->read_paused)
			return;
		/* Past --conn-inflight, or while its tenant's requests in flight
		 * hold their share of the budget (KVTD_IN_TENANT_MAX), the next
		 * head waits for this connection's own requests to be answered,
		 * and no more is read meanwhile (the read buffer would grow, up
		 * to the budget, with heads not parsed) */
		if (c->inflight >= c->loop->srv->cfg.conn_inflight || kvtd_conn_in_share_over(c)) {
			kvtd_conn_flow(c);
			return;
		}
		struct s3h_hdr hd[S3H_HDRS_MAX];
		struct s3h_req h;
		int r = s3h_parse_from((const char *)c->rbuf + c->rstart, c->rend - c->rstart,
				       S3H_HEAD_MAX, hd, S3H_HDRS_MAX, &h, &sc->head_scan);
		if (r == S3H_NEED_MORE) {
			if (!c->frame_start_ns)
				c->frame_start_ns = c->loop->now_ns;
			break;
		}
		/* At most KVTD_PARSE_FRAMES requests a loop iteration (as native
		 * frames and RESP commands): the rest of the buffer after the
		 * other connections' events, nothing more read from it till then */
		if (r == S3H_OK && !kvtd_conn_parse_budget(c, 1)) {
			kvtd_conn_defer(c);
			return;
		}
		if (r < 0) {
			s3d_proto_error(c,
					r == S3H_ETOOBIG ? 431 : r == S3H_EUNSUPPORTED ? 501 : 400,
					r == S3H_EUNSUPPORTED ? "NotImplemented" : "BadRequest",
					r == S3H_ETOOBIG ? "request head too large" :
					r == S3H_ETOOMANY ? "too many headers" :
					r == S3H_EUNSUPPORTED ? "Transfer-Encoding not supported" :
								"malformed HTTP request");
			return;
		}
		c->frame_start_ns = 0;
		s3d_begin(c, &h);
	}
	if (c->rstart == c->rend)
		c->rstart = c->rend = 0;
}

/* The protocol table's read: a plain (not chunked) body going straight
 * into its DRAM reservation is read() into place, no copy through rbuf (as
 * native PUTs are received), its CRCs and digests taken over the bytes
 * just landed; everything else through rbuf. */
static ssize_t s3d_read(struct kvtd_conn *c, size_t *asked)
{
	struct s3d_conn *sc = s3d_of(c);
	struct s3d_req *rq = sc->rx;
	ssize_t r;

	if (rq && c->rstart == c->rend && rq->sink == SK_RESV && !rq->transport_chunked &&
	    !rq->aws_chunked && rq->wire_left) {
		struct iovec iov[16] = { { 0 } };
		int n = 0;
		uint64_t off = rq->hdr_len + rq->got, want = rq->wire_left;
		for (uint32_t i = 0; i < rq->res.view_count && n < 16 && want; i++) {
			size_t l = rq->res.view[i].iov_len;
			if (off >= l) {
				off -= l;
				continue;
			}
			size_t t = l - (size_t)off < want ? l - (size_t)off : (size_t)want;
			iov[n++] = (struct iovec){ (uint8_t *)rq->res.view[i].iov_base + off, t };
			want -= t;
			off = 0;
		}
		if (n == 0) /* no room left in the view: cannot be, but never readv nothing */
			return kvtd_conn_read_rbuf(c, SIZE_MAX, asked);
		*asked = (size_t)(rq->wire_left - want);
		r = kvtd_conn_readv(c, iov, n);
		if (r > 0) {
			int e = errno;
			/* checksums over the bytes just landed, still in cache */
			size_t left = (size_t)r;
			for (int i = 0; i < n && left; i++) {
				size_t t = iov[i].iov_len < left ? iov[i].iov_len : left;
				rq->crc32c = kvt_crc32c(rq->crc32c, iov[i].iov_base, t);
				if (rq->want_ck[CK_CRC32])
					rq->crc32 = crc32_gzip_refl(rq->crc32, iov[i].iov_base, t);
				if (rq->sha)
					EVP_DigestUpdate(rq->sha, iov[i].iov_base, t);
				if (rq->md5)
					EVP_DigestUpdate(rq->md5, iov[i].iov_base, t);
				left -= t;
			}
			/* the slow-client clock restarts every 16 MiB received */
			if ((rq->got + (uint64_t)r) / KVTD_SLOW_PROGRESS !=
			    rq->got / KVTD_SLOW_PROGRESS)
				c->frame_start_ns = c->loop->now_ns;
			rq->got += (uint64_t)r;
			rq->wire_left -= (uint64_t)r;
			if (rq->wire_left == 0) {
				rq->body_done = true;
				sc->rx = NULL;
				c->frame_start_ns = 0;
				s3d_body_done(rq);
				*asked = SIZE_MAX; /* answer first */
			}
			errno = e;
		}
		return r;
	}
	return kvtd_conn_read_rbuf(c, SIZE_MAX, asked);
}

static int s3d_open(struct kvtd_conn *c)
{
	struct s3d_conn *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	c->alt = sc;
	kvtd_auth_open_conn(c);
	return 0;
}

static void s3d_free(struct kvtd_conn *c)
{
	struct s3d_conn *sc = s3d_of(c);

	if (!sc)
		return;
	while (sc->head) {
		struct s3d_req *rq = sc->head;
		sc->head = rq->next;
		s3d_req_free(c->loop->srv, rq);
	}
	kvtd_pinset_free(&sc->pin_set); /* (empty: its requests dropped theirs) */
	free(sc);
	c->alt = NULL;
}

/* A body partly received (closing loses it). */
static bool s3d_partial(const struct kvtd_conn *c)
{
	const struct s3d_conn *sc = c->alt;
	return sc && sc->rx;
}

/* No more input: a request whose body will not come is answered (the
 * answer may never be written) so that nothing stays in flight. */
static void s3d_drop_input(struct kvtd_conn *c)
{
	struct s3d_conn *sc = s3d_of(c);
	struct s3d_req *rq = sc ? sc->rx : NULL;

	if (!rq)
		return;
	sc->rx = NULL;
	rq->in_body = false;
	rq->close_after = true;
	s3d_fail(rq, 400, "IncompleteBody", "The connection closed before the body was complete.");
}

/* The loop's last word (past --max-conns, out of memory). */
static void s3d_conn_fail(struct kvtd_conn *c, int status, const char *msg)
{
	s3d_proto_error(c, 503, status == -EMSGSIZE ? "BadRequest" : "SlowDown", msg);
}

const struct kvtd_proto kvtd_s3_proto = {
	.name = "s3",
	/* Before a signature is checked, a request head and nothing more:
	 * a PUT's body stays in the kernel until its head is verified. */
	.preauth_buf = S3H_HEAD_MAX,
	.open = s3d_open,
	.read = s3d_read,
	.parse = s3d_parse,
	.partial = s3d_partial,
	.drop_input = s3d_drop_input,
	.fail = s3d_conn_fail,
	.written = s3d_written,
	.req_done = s3d_req_done,
	.free = s3d_free,
};

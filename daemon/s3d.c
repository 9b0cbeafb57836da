/*
 * s3d.c - kvtierd's S3 listener (--s3 ADDR): the subset of the Amazon S3
 * REST API that object-storage clients of a KV-cache tier use (NIXL's OBJ
 * plugin, boto3, the AWS CLI), served from the same store as the native
 * protocol (doc/s3.md).
 *
 * A connection lives in an event loop like every other: this file is
 * the protocol table's S3 entry (kvtd_s3_proto, at the end).  loop.c
 * accepts, reads into the connection's rbuf, writes the output queue and
 * runs the timeouts.  This file owns its requests (struct s3d_req,
 * answered in order: HTTP/1.1 pipelining), their library requests (on the
 * loop's own kvt_queue, user_data tagged with KVTD_PROTO_S3) and the
 * mapping:
 *
 *   bucket  a namespace of the tenant: model "s3/<bucket>", dtype
 *           "bytes", layout "s3-object", tenant = the signer's access key
 *           id; it exists while its marker block (key "B") does
 *   object  kvtier key 'o' + SHA-256(object key); multipart parts
 *           'p' + SHA-256(uploadId "/" partNumber), upload markers
 *           'u' + SHA-256(uploadId)
 *   value   part 0: the header below, part 1..: the object's bytes (one
 *           part per S3 part after CompleteMultipartUpload)
 *
 *     off 0  "KVS3"         off 4  u32 version (1)
 *     off 8  u64 length     off 16 u64 mtime, Unix ms
 *     off 24 u32 CRC32C of the bytes
 *     off 28 u32 name length (the object key, compared on every read)
 *     off 32 u32 content-type length
 *     off 36 u32 S3 parts (0: a single PUT)
 *     off 40 24 reserved (0)
 *     off 64 name, then content type
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
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "kvtierd.h"
#include "s3http.h"
#include "sigv4.h"

#define S3D_MODEL_PREFIX "s3/"
#define S3D_HDR_LEN 64
#define S3D_KEY_MAX 1024               /* S3's longest object key */
#define S3D_CTYPE_MAX 256
#define S3D_BUF (64u << 10)            /* a connection's input buffer */
#define S3D_SMALL_MAX (1u << 20)       /* XML request bodies */
#define S3D_PARTS_MAX (KVT_PARTS_MAX - 1) /* S3 parts of one object */
#define S3D_DELETE_MAX 1000            /* keys of one DeleteObjects */
#define S3D_CREQ_MAX (48u << 10)
#define S3D_UD ((uint64_t)KVTD_PROTO_S3) /* user_data tag of our library requests */

enum s3d_op {
	S3_NONE = 0, S3_LIST_BUCKETS, S3_CREATE_BUCKET, S3_HEAD_BUCKET, S3_DELETE_BUCKET,
	S3_BUCKET_LOCATION, S3_PUT, S3_GET, S3_HEAD, S3_DELETE, S3_DELETE_MANY, S3_COPY,
	S3_MPU_CREATE, S3_MPU_PART, S3_MPU_COMPLETE, S3_MPU_ABORT, S3_NOT_IMPL, S3__COUNT
};
_Static_assert(S3__COUNT == KVTD_S3_OPS, "kvtierd.h's KVTD_S3_OPS follows enum s3d_op");

/* Their names (metrics labels, logs) are metrics.c's kvtd_s3_op_names. */

enum s3d_payload {
	PL_UNSIGNED = 0,   /* UNSIGNED-PAYLOAD, or no auth */
	PL_SIGNED,         /* x-amz-content-sha256: hex */
	PL_STREAM_SIGNED,  /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
	PL_STREAM_TRAILER, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

enum s3d_sink { SK_NONE = 0, SK_RESV, SK_BUF, SK_DISCARD };

/* What the store requests of a request are for (its phase). */
enum { PH_NONE = 0, PH_PROBE, PH_WRITE, PH_ASSEMBLE_DEL, PH_DONE };

enum s3d_ck { CK_CRC32C = 0, CK_CRC32, CK_SHA256, CK_MD5, CK__COUNT };

struct s3d_req;

struct s3d_item {
	struct kvt_req req;        /* user_data: this | S3D_UD */
	struct s3d_req *rq;        /* NULL: fire and forget (freed on completion) */
	bool pinned;
	struct iovec iov[2];
	uint32_t part_no;
	char *etag_sent;           /* Complete: the part's ETag in the request (owned) */
};

/* A decoded object header. */
struct s3d_obj {
	uint64_t len, mtime_ms;
	uint32_t crc, name_len, ctype_len, nparts;
	uint64_t data_off;         /* offset of the bytes in the value */
	char ctype[S3D_CTYPE_MAX + 1];
};

struct s3d_seg {
	const void *p;             /* NULL: our text at off */
	size_t off, len;
};

struct s3d_req {
	struct s3d_req *next;
	struct kvtd_conn *conn;
	uint8_t *head;             /* owned copy of the head; hdrs point into it */
	struct s3h_hdr hdrs[S3H_HDRS_MAX];
	struct s3h_req h;
	uint64_t start_ns;
	uint64_t id;               /* x-amz-request-id */
	int op;
	bool keep_alive;
	/* target */
	char bucket[64];
	char *key;                 /* decoded, NUL-terminated, owned */
	size_t key_len;
	char upload_id[40];
	uint32_t part_no;
	bool q_uploads, q_delete, q_location, q_list2;
	/* identity */
	char tenant[PROTO_TENANT_MAX + 1];
	size_t tenant_len;
	struct sigv4_cred cred;
	uint8_t sign_key[32];
	/* bucket's namespace */
	uint32_t ns;
	bool ns_ok;
	/* body */
	int payload;
	bool transport_chunked;
	bool aws_chunked;
	uint64_t wire_left;        /* Content-Length bytes still to come (not chunked) */
	struct s3c_dec *outer, *inner;
	uint64_t decoded_len;      /* the content's length */
	uint64_t got;              /* content bytes received */
	uint64_t rx_mark;          /* got when the slow-client clock last restarted */
	int sink;
	bool body_done;
	bool in_body;
	EVP_MD_CTX *sha;           /* SHA-256 of the content (signed payload, checksum) */
	EVP_MD_CTX *chunk_sha;     /* SHA-256 of the current aws-chunk */
	EVP_MD_CTX *md5;
	char chunk_want[65];       /* the current chunk's signature as sent */
	char prev_sig[65];
	uint32_t crc32c, crc32;
	bool want_ck[CK__COUNT];
	char ck_val[CK__COUNT][96]; /* base64 as sent (header or trailer) */
	char trailer_ck[40];       /* x-amz-trailer: the checksum header it names */
	/* DRAM reservation (SK_RESV) */
	struct kvt_reservation res;
	bool reserved;
	uint64_t hdr_len;
	uint8_t hdrbuf[S3D_HDR_LEN + S3D_KEY_MAX + S3D_CTYPE_MAX];
	char ctype[S3D_CTYPE_MAX + 1];
	/* heap body (SK_BUF) */
	uint8_t *buf;
	uint64_t buf_len, buf_cap, buf_charged;
	uint64_t mem_charged;      /* this struct and head, charged to --max-memory */
	/* library requests */
	struct s3d_item *items;
	uint32_t n, pending;
	int phase;
	bool cond_none_match;      /* PUT with If-None-Match: *; DeleteObjects: Quiet */
	struct s3d_item *del_item; /* Complete, Copy: the DELETE of a replaced object (owned) */
	/* an error decided before the body was read: answered after it */
	int err_status;
	const char *err_code;
	char err_msg[160];
	/* the answer */
	bool done;
	bool close_after;
	uint8_t *text;
	size_t tlen, tcap;
	struct s3d_seg *segs;
	unsigned nseg, segcap;
	uint64_t *pins;
	unsigned npin, pincap;
	bool oom;
	char etag[48];
	uint64_t obj_len;
	uint32_t obj_crc;
	bool hundred_sent;
};

struct s3d_conn {
	struct s3d_req *head, *tail; /* in arrival order */
	struct s3d_req *rx;        /* the request whose body is being received */
	/* one-entry bucket cache */
	char ns_bucket[64];
	char ns_tenant[PROTO_TENANT_MAX + 1];
	uint32_t ns_id;
	bool ns_valid;
};

static struct s3d_conn *s3d_of(struct kvtd_conn *c)
{
	return c->alt;
}

static uint64_t s3d_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void s3d_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void s3d_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t s3d_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t s3d_get64(const uint8_t *p)
{
	return (uint64_t)s3d_get32(p) | (uint64_t)s3d_get32(p + 4) << 32;
}

/* ------------------------------------------------------------------------
 * Answers
 */

static void s3d_text(struct s3d_req *rq, const void *p, size_t len)
{
	if (rq->oom || len == 0)
		return;
	if (rq->tlen + len > rq->tcap) {
		size_t nc = rq->tcap ? rq->tcap : 1024;
		while (nc < rq->tlen + len)
			nc *= 2;
		uint8_t *nt = realloc(rq->text, nc);
		if (!nt) {
			rq->oom = true;
			return;
		}
		rq->text = nt;
		rq->tcap = nc;
	}
	memcpy(rq->text + rq->tlen, p, len);
	rq->tlen += len;
}

static void s3d_printf(struct s3d_req *rq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void s3d_printf(struct s3d_req *rq, const char *fmt, ...)
{
	char b[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(b)) {
		s3d_text(rq, b, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		rq->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s3d_text(rq, big, (size_t)n);
	free(big);
}

/* XML-escape s[0, n) into the answer. */
static void s3d_xml_str(struct s3d_req *rq, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		const char *e = NULL;
		switch (s[i]) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&quot;"; break;
		case '\'': e = "&apos;"; break;
		default:
			if ((unsigned char)s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
				e = "&#xFFFD;";
		}
		if (!e)
			continue;
		s3d_text(rq, s + run, i - run);
		s3d_text(rq, e, strlen(e));
		run = i + 1;
	}
	s3d_text(rq, s + run, n - run);
}

static void s3d_keep_pin(struct s3d_req *rq, struct s3d_item *it)
{
	if (rq->npin == rq->pincap) {
		unsigned nc = rq->pincap ? rq->pincap * 2 : 4;
		uint64_t *np = realloc(rq->pins, nc * sizeof(*np));
		if (!np) {
			rq->oom = true;
			return;
		}
		rq->pins = np;
		rq->pincap = nc;
	}
	rq->pins[rq->npin++] = it->req.pin;
	it->pinned = false;
}

static void s3d_seg_bytes(struct s3d_req *rq, const void *p, size_t len)
{
	if (rq->oom || len == 0)
		return;
	if (rq->nseg == rq->segcap) {
		unsigned nc = rq->segcap ? rq->segcap * 2 : 8;
		struct s3d_seg *ns = realloc(rq->segs, nc * sizeof(*ns));
		if (!ns) {
			rq->oom = true;
			return;
		}
		rq->segs = ns;
		rq->segcap = nc;
	}
	rq->segs[rq->nseg++] = (struct s3d_seg){ p, 0, len };
}

static const char *s3d_reason(int st)
{
	switch (st) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

/*
 * The answer: the status line and headers are built into a head (with
 * extra headers, CRLF-terminated lines), followed by body text already in
 * rq->text (body_text bytes) and the segments (pinned bytes).  HEAD
 * answers give content_len without a body.
 */
static void s3d_answer(struct s3d_req *rq, int status, const char *extra, uint64_t content_len,
		       bool no_body)
{
	struct kvtd_conn *c = rq->conn;
	char head[2048];
	int hl;

	if (!rq->keep_alive || rq->close_after)
		rq->close_after = true;
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 %d %s\r\nServer: kvtierd\r\nx-amz-request-id: %016" PRIx64
		      "\r\n%sContent-Length: %" PRIu64 "\r\n%s\r\n",
		      status, s3d_reason(status), rq->id, extra ? extra : "", content_len,
		      rq->close_after ? "Connection: close\r\n" : "");
	if (hl < 0 || (size_t)hl >= sizeof(head)) {
		rq->oom = true;
		return;
	}
	/* The head goes in front of the text: rebuild text = head + text. */
	size_t cap = (size_t)hl + rq->tlen + 1;
	uint8_t *nt = malloc(cap);
	if (!nt) {
		rq->oom = true;
		return;
	}
	memcpy(nt, head, (size_t)hl);
	if (rq->tlen && !no_body)
		memcpy(nt + hl, rq->text, rq->tlen);
	free(rq->text);
	rq->text = nt;
	rq->tlen = (size_t)hl + (no_body ? 0 : rq->tlen);
	rq->tcap = cap;
	(void)c;
}

static void s3d_error(struct s3d_req *rq, int status, const char *code, const char *msg)
{
	char extra[64] = "Content-Type: application/xml\r\n";
	bool head = rq->h.method_len == 4 && memcmp(rq->h.method, "HEAD", 4) == 0;

	rq->tlen = 0;
	rq->nseg = 0;
	for (unsigned i = 0; i < rq->npin; i++)
		kvt_pin_release(rq->conn->loop->srv->store, rq->pins[i]);
	rq->npin = 0;
	s3d_printf(rq, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>",
		   code);
	s3d_xml_str(rq, msg, strlen(msg));
	s3d_text(rq, "</Message>", 10);
	if (rq->bucket[0]) {
		s3d_text(rq, "<BucketName>", 12);
		s3d_xml_str(rq, rq->bucket, strlen(rq->bucket));
		s3d_text(rq, "</BucketName>", 13);
	}
	if (rq->key) {
		s3d_text(rq, "<Key>", 5);
		s3d_xml_str(rq, rq->key, rq->key_len);
		s3d_text(rq, "</Key>", 6);
	}
	s3d_printf(rq, "<RequestId>%016" PRIx64 "</RequestId></Error>\n", rq->id);
	s3d_answer(rq, status, extra, head ? 0 : rq->tlen, head);
}

/* XML body answer. */
static void s3d_xml_answer(struct s3d_req *rq, int status)
{
	s3d_answer(rq, status, "Content-Type: application/xml\r\n", rq->tlen, false);
}

static void s3d_xml_begin(struct s3d_req *rq, const char *root)
{
	rq->tlen = 0;
	s3d_printf(rq, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s xmlns=\"http://s3.amazonaws.com"
		   "/doc/2006-03-01/\">", root);
}

/* ------------------------------------------------------------------------
 * Requests: life and order
 */

static void s3d_req_free(struct kvtd_server *srv, struct s3d_req *rq)
{
	for (uint32_t i = 0; i < rq->n; i++) {
		if (rq->items[i].pinned)
			kvt_pin_release(srv->store, rq->items[i].req.pin);
		free(rq->items[i].etag_sent);
	}
	free(rq->del_item);
	for (unsigned i = 0; i < rq->npin; i++)
		kvt_pin_release(srv->store, rq->pins[i]);
	if (rq->reserved)
		kvt_put_abort(srv->store, rq->res.handle);
	if (rq->buf_charged)
		kvtd_mem_uncharge(srv, rq->buf_charged);
	if (rq->mem_charged)
		kvtd_mem_uncharge(srv, rq->mem_charged);
	EVP_MD_CTX_free(rq->sha);
	EVP_MD_CTX_free(rq->chunk_sha);
	EVP_MD_CTX_free(rq->md5);
	free(rq->outer);
	free(rq->inner);
	free(rq->buf);
	free(rq->pins);
	free(rq->items);
	free(rq->segs);
	free(rq->text);
	free(rq->key);
	free(rq->head);
	OPENSSL_cleanse(rq->sign_key, sizeof(rq->sign_key));
	free(rq);
}

static struct kvtd_out *s3d_out(struct kvtd_server *srv, struct s3d_req *rq)
{
	struct kvtd_out *o;
	unsigned n = 1 + rq->nseg;

	if (rq->oom) {
		for (unsigned i = 0; i < rq->npin; i++)
			kvt_pin_release(srv->store, rq->pins[i]);
		rq->npin = 0;
		rq->nseg = 0;
		rq->oom = false;
		rq->close_after = true;
		s3d_error(rq, 503, "SlowDown", "server out of memory");
		if (rq->oom)
			return NULL;
		n = 1;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->iov = n <= 2 ? o->iov_small : calloc(n, sizeof(*o->iov));
	if (!o->iov) {
		free(o);
		return NULL;
	}
	o->iov[0] = (struct iovec){ rq->text, rq->tlen };
	o->bytes = rq->tlen;
	for (unsigned i = 0; i < rq->nseg; i++) {
		o->iov[1 + i] = (struct iovec){ (void *)rq->segs[i].p, rq->segs[i].len };
		o->bytes += rq->segs[i].len;
	}
	o->iov_count = n;
	o->hdr = rq->text;
	o->pins = rq->pins;
	o->pin_count = rq->npin;
	rq->text = NULL;
	rq->pins = NULL;
	rq->npin = 0;
	return o;
}

static void s3d_flush_done(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct s3d_conn *sc = s3d_of(c);

	while (sc->head && sc->head->done) {
		struct s3d_req *rq = sc->head;
		bool quit = rq->close_after;

		sc->head = rq->next;
		if (!sc->head)
			sc->tail = NULL;
		if (!c->dead) {
			struct kvtd_out *o = s3d_out(srv, rq);
			if (o)
				kvtd_conn_queue(c, o);
			else
				quit = true;
		}
		s3d_req_free(srv, rq);
		kvtd_conn_frame_done(c);
		if (quit && !c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
	}
}

static void s3d_finish(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	bool write = rq->op == S3_PUT || rq->op == S3_MPU_PART || rq->op == S3_MPU_COMPLETE ||
		     rq->op == S3_COPY || rq->op == S3_DELETE || rq->op == S3_DELETE_MANY;

	rq->done = true;
	rq->phase = PH_DONE;
	kvtd_metrics_latency(srv, write ? KVTD_LAT_WRITE : KVTD_LAT_READ, KVT_TIER_NONE,
			     kvtd_now_ns() - rq->start_ns);
	kvtd_metrics_s3(srv, rq->op, rq->text && rq->tlen > 9 && rq->text[9] >= '4');
	if (kvtd_log_enabled(KVTD_DEBUG)) {
		static const char *const pl[] = { "unsigned", "signed", "streaming-signed",
						   "streaming-unsigned-trailer" };
		kvtd_log(KVTD_DEBUG, "s3 request",
			 "op=%s status=%.3s payload=%s chunked=%d bytes=%" PRIu64 " conn=%" PRIu64,
			 kvtd_s3_op_names[rq->op], rq->text && rq->tlen > 12 ? (char *)rq->text + 9 : "-",
			 pl[rq->payload], rq->transport_chunked, rq->got, rq->conn->id);
	}
	s3d_flush_done(rq->conn);
}

/* Answer with an error now and finish. */
static void s3d_fail(struct s3d_req *rq, int status, const char *code, const char *msg)
{
	s3d_error(rq, status, code, msg);
	s3d_finish(rq);
}

/* ------------------------------------------------------------------------
 * Keys, buckets, object headers
 */

static void s3d_key(struct kvt_key *k, char tag, const void *p, size_t len)
{
	k->bytes[0] = (uint8_t)tag;
	SHA256(p, len, k->bytes + 1);
	k->len = 1 + SHA256_DIGEST_LENGTH;
}

static void s3d_part_key(struct kvt_key *k, const char *upload_id, uint32_t part)
{
	char b[64];
	int n = snprintf(b, sizeof(b), "%s/%u", upload_id, part);
	s3d_key(k, 'p', b, (size_t)n);
}

/* S3's bucket naming rules (the DNS-compatible ones). */
static bool s3d_bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
			return false;
	}
	return b[0] != '-' && b[0] != '.' && b[n - 1] != '-' && b[n - 1] != '.';
}

static void s3d_bucket_desc(struct kvt_ns_desc *d, char *model, size_t mcap, const char *bucket,
			    const char *tenant)
{
	snprintf(model, mcap, "%s%s", S3D_MODEL_PREFIX, bucket);
	memset(d, 0, sizeof(*d));
	d->model = model;
	d->dtype = "bytes";
	d->layout = "s3-object";
	d->block_tokens = 1;
	d->tp_size = 1;
	d->pp_size = 1;
	d->tenant = tenant;
	d->flags = KVT_NS_PERSISTENT;
}

/* A bucket exists while its marker does (DeleteBucket clears the
 * namespace, marker included; the registry keeps the namespace).  An
 * index lookup: no I/O. */
static int s3d_bucket_live(struct kvtd_server *srv, uint32_t ns)
{
	struct kvt_key k = { .len = 1, .bytes = { 'B' } };
	int r = kvt_exists(srv->store, ns, &k);
	return r == KVT_OK ? 0 : r == KVT_MISS ? KVT_MISS : r;
}

/* The bucket's namespace: 0, KVT_MISS (no such bucket), or an error.
 * create: register it if new, and do not ask for the marker. */
static int s3d_bucket_ns(struct s3d_req *rq, bool create)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_conn *sc = s3d_of(c);
	struct kvt_ns_desc d;
	char model[80];
	uint8_t digest[32];
	int r;

	if (sc->ns_valid && strcmp(sc->ns_bucket, rq->bucket) == 0 &&
	    strcmp(sc->ns_tenant, rq->tenant) == 0) {
		rq->ns = sc->ns_id;
		rq->ns_ok = true;
		return create ? 0 : s3d_bucket_live(c->loop->srv, rq->ns);
	}
	s3d_bucket_desc(&d, model, sizeof(model), rq->bucket, rq->tenant);
	r = kvt_ns_digest(&d, digest, NULL, 0);
	if (r < 0)
		return r;
	r = kvt_ns_find(c->loop->srv->store, digest, &rq->ns);
	if (r == KVT_MISS && create) {
		/* Registering fsyncs the registry: once per bucket, on the
		 * loop (doc/s3.md says so, as RESP does for its namespace). */
		r = kvt_ns_register(c->loop->srv->store, &d, &rq->ns);
		if (r == 0)
			kvtd_ns_apply_group(c->loop->srv->store, rq->ns);
	} else if (r == 0) {
		/* Known already (e.g. from before a restart): registering it
		 * again writes nothing, and sets this process's policy for it
		 * -- KVT_NS_PERSISTENT is not kept in the registry. */
		r = kvt_ns_register(c->loop->srv->store, &d, &rq->ns);
	}
	if (r < 0 || r == KVT_MISS)
		return r;
	rq->ns_ok = true;
	sc->ns_valid = true;
	snprintf(sc->ns_bucket, sizeof(sc->ns_bucket), "%s", rq->bucket);
	snprintf(sc->ns_tenant, sizeof(sc->ns_tenant), "%s", rq->tenant);
	sc->ns_id = rq->ns;
	return create ? 0 : s3d_bucket_live(c->loop->srv, rq->ns);
}

/* Copy view bytes [off, off+len) of a pinned value into out. */
static bool s3d_view_read(const struct kvt_req *r, uint64_t off, void *out, size_t len)
{
	uint8_t *o = out;

	if (off + len > r->length)
		return false;
	for (uint32_t i = 0; i < r->view_count && len; i++) {
		size_t vl = r->view[i].iov_len;
		if (off >= vl) {
			off -= vl;
			continue;
		}
		size_t take = vl - (size_t)off < len ? vl - (size_t)off : len;
		memcpy(o, (uint8_t *)r->view[i].iov_base + off, take);
		o += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

/* Parse and check a pinned value's header against the expected name:
 * true if it is the object asked for. */
static bool s3d_obj_check(const struct kvt_req *r, const void *name, size_t name_len,
			  struct s3d_obj *ob)
{
	uint8_t h[S3D_HDR_LEN];
	uint8_t nb[S3D_KEY_MAX];

	if (r->status != KVT_OK || !s3d_view_read(r, 0, h, sizeof(h)) || memcmp(h, "KVS3", 4) != 0 ||
	    s3d_get32(h + 4) != 1)
		return false;
	ob->len = s3d_get64(h + 8);
	ob->mtime_ms = s3d_get64(h + 16);
	ob->crc = s3d_get32(h + 24);
	ob->name_len = s3d_get32(h + 28);
	ob->ctype_len = s3d_get32(h + 32);
	ob->nparts = s3d_get32(h + 36);
	if (ob->name_len != name_len || ob->name_len > S3D_KEY_MAX || ob->ctype_len > S3D_CTYPE_MAX)
		return false;
	ob->data_off = S3D_HDR_LEN + (uint64_t)ob->name_len + ob->ctype_len;
	if (ob->data_off + ob->len != r->length)
		return false;
	if (!s3d_view_read(r, S3D_HDR_LEN, nb, ob->name_len) ||
	    (name_len && memcmp(nb, name, name_len) != 0))
		return false;
	if (!s3d_view_read(r, S3D_HDR_LEN + ob->name_len, ob->ctype, ob->ctype_len))
		return false;
	ob->ctype[ob->ctype_len] = 0;
	return true;
}

/* Header of a new object into out (S3D_HDR_LEN + name + ctype). */
static uint64_t s3d_obj_header(uint8_t *out, uint64_t len, uint32_t crc, const void *name,
			       size_t name_len, const char *ctype, uint32_t nparts)
{
	size_t cl = strlen(ctype);

	memset(out, 0, S3D_HDR_LEN);
	memcpy(out, "KVS3", 4);
	s3d_put32(out + 4, 1);
	s3d_put64(out + 8, len);
	s3d_put64(out + 16, s3d_unix_ms());
	s3d_put32(out + 24, crc);
	s3d_put32(out + 28, (uint32_t)name_len);
	s3d_put32(out + 32, (uint32_t)cl);
	s3d_put32(out + 36, nparts);
	memcpy(out + S3D_HDR_LEN, name, name_len);
	memcpy(out + S3D_HDR_LEN + name_len, ctype, cl);
	return S3D_HDR_LEN + name_len + cl;
}

/* ETag: CRC32C and length in hex (doc/s3.md "ETags"); "-N" for an object
 * assembled from N parts. */
static void s3d_etag(char *out, size_t cap, uint32_t crc, uint64_t len, uint32_t nparts)
{
	if (nparts)
		snprintf(out, cap, "\"%08x%016" PRIx64 "-%u\"", crc, len, nparts);
	else
		snprintf(out, cap, "\"%08x%016" PRIx64 "\"", crc, len);
}

static void s3d_http_date(char *out, size_t cap, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void s3d_iso_date(char *out, size_t cap, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, ".%03uZ", (unsigned)(ms % 1000));
}

static int64_t s3d_parse_http_date(const char *v, size_t n)
{
	char b[64];
	struct tm tm;

	if (n >= sizeof(b))
		return -1;
	memcpy(b, v, n);
	b[n] = 0;
	memset(&tm, 0, sizeof(tm));
	if (!strptime(b, "%a, %d %b %Y %H:%M:%S GMT", &tm))
		return -1;
	return (int64_t)timegm(&tm);
}

static void s3d_b64(const uint8_t *p, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* ------------------------------------------------------------------------
 * Library requests
 */

static void s3d_step(struct s3d_req *rq);

static struct s3d_item *s3d_items(struct s3d_req *rq, uint32_t n)
{
	struct kvtd_server *srv = rq->conn->loop->srv;

	for (uint32_t i = 0; i < rq->n; i++) {
		if (rq->items[i].pinned) {
			kvt_pin_release(srv->store, rq->items[i].req.pin);
			rq->items[i].pinned = false;
		}
		free(rq->items[i].etag_sent);
	}
	free(rq->items);
	rq->items = calloc(n ? n : 1, sizeof(*rq->items));
	rq->n = rq->items ? n : 0;
	return rq->items;
}

static void s3d_item_init(struct s3d_req *rq, struct s3d_item *it, uint32_t op, const struct kvt_key *k)
{
	memset(it, 0, sizeof(*it));
	it->rq = rq;
	it->req.op = op;
	it->req.ns = rq->ns;
	if (k)
		it->req.key = *k;
	it->req.user_data = (uint64_t)(uintptr_t)it | S3D_UD;
}

/* Submit every item; the step runs once all are back (possibly inline). */
static void s3d_submit(struct s3d_req *rq, int phase)
{
	struct kvtd_loop *loop = rq->conn->loop;

	rq->phase = phase;
	rq->pending = 1; /* held while submitting */
	for (uint32_t i = 0; i < rq->n; i++) {
		struct kvt_req *r = &rq->items[i].req;
		rq->pending++;
		int rc = kvt_submit(loop->q, &r, 1);
		if (rc != 1) {
			r->status = rc;
			rq->pending--;
		}
	}
	if (--rq->pending == 0)
		s3d_step(rq);
}

/* A request of no S3 request (lazy deletes): freed when it completes. */
static void s3d_fire_delete(struct kvtd_conn *c, uint32_t ns, const struct kvt_key *k)
{
	struct s3d_item *it = calloc(1, sizeof(*it));
	struct kvt_req *r;

	if (!it)
		return;
	it->req.op = KVT_OP_DELETE;
	it->req.ns = ns;
	it->req.key = *k;
	it->req.user_data = (uint64_t)(uintptr_t)it | S3D_UD;
	r = &it->req;
	if (kvt_submit(c->loop->q, &r, 1) != 1)
		free(it);
}

static void s3d_req_done(struct kvtd_loop *loop, struct kvt_req *r)
{
	struct s3d_item *it = (struct s3d_item *)(uintptr_t)(r->user_data & ~(uint64_t)KVTD_UD_PROTO_MASK);
	struct s3d_req *rq = it->rq;

	(void)loop;
	if (!rq) {
		if (r->op == KVT_OP_GET_PINNED && r->status == KVT_OK)
			kvt_pin_release(loop->srv->store, r->pin);
		free(it);
		return;
	}
	if (r->op == KVT_OP_GET_PINNED && r->status == KVT_OK)
		it->pinned = true;
	if (--rq->pending == 0)
		s3d_step(rq);
}

/* ------------------------------------------------------------------------
 * Operations
 */

/* ListBuckets, step 1: the tenant's bucket namespaces, each with a quiet
 * pinned get of its marker (on SSD after a restart: read by the library,
 * not on this loop).  Namespace ids are 1, 2, 3 ... (lib/ns.c); a
 * tenant's buckets are those with model "s3/NAME", layout s3-object and
 * its tenant line. */
static void s3d_list_buckets(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	char canon[2100];
	uint32_t n = 0, cap = 0;
	struct s3d_item *it = NULL;

	for (uint32_t id = 1;; id++) {
		uint8_t digest[32];
		int len = kvt_ns_info(srv->store, id, digest, canon, sizeof(canon));
		if (len < 0)
			break;
		const char *t;
		int tl = kvtd_canon_tenant(canon, (size_t)len, &t);
		const char *m = strstr(canon, "\nmodel=" S3D_MODEL_PREFIX);
		if (tl < 0 || (size_t)tl != rq->tenant_len || memcmp(t, rq->tenant, rq->tenant_len) ||
		    !m || !strstr(canon, "\nlayout=s3-object\n"))
			continue;
		m += strlen("\nmodel=" S3D_MODEL_PREFIX);
		const char *e = strchr(m, '\n');
		if (!e)
			continue;
		if (n == cap) {
			uint32_t nc = cap ? 2 * cap : 16;
			struct s3d_item *ni = realloc(it, nc * sizeof(*ni));
			if (!ni)
				goto oom;
			it = ni;
			cap = nc;
		}
		struct kvt_key k = { .len = 1, .bytes = { 'B' } };
		s3d_item_init(rq, &it[n], KVT_OP_GET_PINNED, &k);
		it[n].req.ns = id;
		it[n].req.flags = KVT_F_QUIET;
		it[n].etag_sent = strndup(m, (size_t)(e - m)); /* the bucket's name */
		if (!it[n].etag_sent)
			goto oom;
		n++;
	}
	free(rq->items);
	rq->items = it;
	rq->n = n;
	/* user_data points at the items: set after the array stopped moving */
	for (uint32_t i = 0; i < n; i++)
		it[i].req.user_data = (uint64_t)(uintptr_t)&it[i] | S3D_UD;
	s3d_submit(rq, PH_PROBE);
	return;
oom:
	for (uint32_t i = 0; i < n; i++)
		free(it[i].etag_sent);
	free(it);
	s3d_fail(rq, 503, "SlowDown", "server out of memory");
}

/* ListBuckets, step 2: the buckets whose marker is there. */
static void s3d_list_buckets_answer(struct s3d_req *rq)
{
	s3d_xml_begin(rq, "ListAllMyBucketsResult");
	s3d_text(rq, "<Owner><ID>", 11);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</ID><DisplayName>", 18);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</DisplayName></Owner><Buckets>", 31);
	for (uint32_t i = 0; i < rq->n; i++) {
		struct s3d_item *it = &rq->items[i];
		uint8_t created[8];
		char d[40];
		if (it->req.status != KVT_OK || it->req.length != 8 ||
		    !s3d_view_read(&it->req, 0, created, 8))
			continue;
		s3d_iso_date(d, sizeof(d), s3d_get64(created));
		s3d_text(rq, "<Bucket><Name>", 14);
		s3d_xml_str(rq, it->etag_sent, strlen(it->etag_sent));
		s3d_printf(rq, "</Name><CreationDate>%s</CreationDate></Bucket>", d);
	}
	s3d_text(rq, "</Buckets></ListAllMyBucketsResult>\n", 36);
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

/* The answer to a GET or HEAD of a probed object (items[0]). */
static void s3d_get_answer(struct s3d_req *rq)
{
	struct s3d_item *it = &rq->items[0];
	struct s3d_obj ob;
	char etag[48], lm[40], extra[1024], crcb[16];
	size_t vl;
	const char *v;
	bool head = rq->op == S3_HEAD;
	uint64_t start = 0, end, mtime_s;
	int status = 200;
	int n;

	if (!s3d_obj_check(&it->req, rq->key, rq->key_len, &ob)) {
		if (it->req.status < 0 && it->req.status != KVT_MISS)
			kvtd_conn_log(rq->conn, KVTD_INFO, "S3 GET failed", kvt_strerror(it->req.status));
		s3d_fail(rq, 404, "NoSuchKey", "The specified key does not exist.");
		return;
	}
	s3d_etag(etag, sizeof(etag), ob.crc, ob.len, ob.nparts);
	s3d_http_date(lm, sizeof(lm), ob.mtime_ms);
	mtime_s = ob.mtime_ms / 1000;
	/* Conditions, in RFC 9110's order */
	if ((v = s3h_header(&rq->h, "if-match", &vl)) &&
	    !(vl == 1 && v[0] == '*') && !(vl == strlen(etag) && memcmp(v, etag, vl) == 0)) {
		s3d_fail(rq, 412, "PreconditionFailed", "At least one of the pre-conditions you "
			 "specified did not hold");
		return;
	}
	if (!s3h_header(&rq->h, "if-match", &vl) &&
	    (v = s3h_header(&rq->h, "if-unmodified-since", &vl))) {
		int64_t t = s3d_parse_http_date(v, vl);
		if (t >= 0 && (int64_t)mtime_s > t) {
			s3d_fail(rq, 412, "PreconditionFailed", "At least one of the pre-conditions "
				 "you specified did not hold");
			return;
		}
	}
	if ((v = s3h_header(&rq->h, "if-none-match", &vl))) {
		if ((vl == 1 && v[0] == '*') || (vl == strlen(etag) && memcmp(v, etag, vl) == 0)) {
			snprintf(extra, sizeof(extra), "ETag: %s\r\nLast-Modified: %s\r\n", etag, lm);
			rq->tlen = 0;
			s3d_answer(rq, 304, extra, 0, true);
			s3d_finish(rq);
			return;
		}
	} else if ((v = s3h_header(&rq->h, "if-modified-since", &vl))) {
		int64_t t = s3d_parse_http_date(v, vl);
		if (t >= 0 && (int64_t)mtime_s <= t) {
			snprintf(extra, sizeof(extra), "ETag: %s\r\nLast-Modified: %s\r\n", etag, lm);
			rq->tlen = 0;
			s3d_answer(rq, 304, extra, 0, true);
			s3d_finish(rq);
			return;
		}
	}
	end = ob.len; /* exclusive */
	if ((v = s3h_header(&rq->h, "range", &vl)) && vl > 6 && memcmp(v, "bytes=", 6) == 0 &&
	    !memchr(v, ',', vl)) {
		/* bytes=a-b, bytes=a-, bytes=-n; several ranges: the whole object, as S3 */
		char b[64];
		uint64_t a = 0, z = 0;
		bool ha = false, hz = false, bad = false;
		size_t i = 6;
		if (vl >= sizeof(b))
			bad = true;
		else {
			memcpy(b, v, vl);
			b[vl] = 0;
		}
		for (; !bad && i < vl && b[i] >= '0' && b[i] <= '9'; i++, ha = true)
			a = a > UINT64_MAX / 16 ? (bad = true, a) : a * 10 + (uint64_t)(b[i] - '0');
		if (!bad && (i >= vl || b[i] != '-'))
			bad = true;
		for (i++; !bad && i < vl && b[i] >= '0' && b[i] <= '9'; i++, hz = true)
			z = z > UINT64_MAX / 16 ? (bad = true, z) : z * 10 + (uint64_t)(b[i] - '0');
		if (!bad && i != vl)
			bad = true;
		if (!bad && (ha || hz)) {
			if (!ha) { /* suffix */
				if (z == 0) {
					s3d_fail(rq, 416, "InvalidRange", "The requested range is not "
						 "satisfiable");
					return;
				}
				start = z >= ob.len ? 0 : ob.len - z;
			} else {
				if (a >= ob.len || (hz && z < a)) {
					if (hz && z < a)
						goto whole; /* invalid syntax: ignored, as RFC 9110 */
					s3d_fail(rq, 416, "InvalidRange", "The requested range is not "
						 "satisfiable");
					return;
				}
				start = a;
				if (hz && z + 1 < ob.len)
					end = z + 1;
			}
			status = 206;
		}
	}
whole:
	crcb[0] = 0;
	if (status == 200) {
		uint8_t be[4] = { (uint8_t)(ob.crc >> 24), (uint8_t)(ob.crc >> 16),
				  (uint8_t)(ob.crc >> 8), (uint8_t)ob.crc };
		s3d_b64(be, 4, crcb);
	}
	n = snprintf(extra, sizeof(extra),
		     "Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: %s\r\nContent-Type: %s\r\n",
		     etag, lm, ob.ctype_len ? ob.ctype : "binary/octet-stream");
	if (status == 206)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n,
			      "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", start,
			      end - 1, ob.len);
	else
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "x-amz-checksum-crc32c: %s\r\n",
			      crcb);
	if (ob.nparts)
		snprintf(extra + n, sizeof(extra) - (size_t)n, "x-amz-mp-parts-count: %u\r\n",
			 ob.nparts);
	rq->tlen = 0;
	s3d_answer(rq, status, extra, end - start, true);
	if (!head && end > start) {
		/* Straight from the pinned DRAM view: no copy. */
		uint64_t off = ob.data_off + start, left = end - start;
		for (uint32_t i = 0; i < it->req.view_count && left; i++) {
			size_t l = it->req.view[i].iov_len;
			if (off >= l) {
				off -= l;
				continue;
			}
			size_t take = l - (size_t)off < left ? l - (size_t)off : (size_t)left;
			s3d_seg_bytes(rq, (uint8_t *)it->req.view[i].iov_base + off, take);
			left -= take;
			off = 0;
		}
		s3d_keep_pin(rq, it);
	}
	s3d_finish(rq);
}

/* The PUT of an object whose bytes are in rq->buf (an overwrite): DELETE
 * then PUT, submitted together. */
static void s3d_put_buffered(struct s3d_req *rq, const struct kvt_key *k)
{
	struct s3d_item *it = s3d_items(rq, 2);

	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_item_init(rq, &it[0], KVT_OP_DELETE, k);
	s3d_item_init(rq, &it[1], KVT_OP_PUT, k);
	it[1].iov[0] = (struct iovec){ rq->hdrbuf, rq->hdr_len };
	it[1].iov[1] = (struct iovec){ rq->buf, rq->buf_len };
	it[1].req.iov = it[1].iov;
	it[1].req.iov_count = rq->buf_len ? 2 : 1;
	s3d_submit(rq, PH_WRITE);
}

static void s3d_put_ok(struct s3d_req *rq)
{
	char extra[256], crcb[16];
	uint8_t be[4] = { (uint8_t)(rq->obj_crc >> 24), (uint8_t)(rq->obj_crc >> 16),
			  (uint8_t)(rq->obj_crc >> 8), (uint8_t)rq->obj_crc };

	s3d_b64(be, 4, crcb);
	snprintf(extra, sizeof(extra), "ETag: %s\r\nx-amz-checksum-crc32c: %s\r\n", rq->etag, crcb);
	rq->tlen = 0;
	s3d_answer(rq, 200, extra, 0, false);
	s3d_finish(rq);
}

/* ---- assembling an object from pinned sources (Complete, Copy) -------- */

/* items[0..n) hold pinned sources (their data at data_off); build the
 * destination object as parts = one per source, then answer. */
static void s3d_assemble(struct s3d_req *rq);

static void s3d_complete_answer(struct s3d_req *rq)
{
	char lm[40];

	if (rq->op == S3_COPY) {
		s3d_iso_date(lm, sizeof(lm), s3d_unix_ms());
		s3d_xml_begin(rq, "CopyObjectResult");
		s3d_printf(rq, "<LastModified>%s</LastModified><ETag>", lm);
		s3d_xml_str(rq, rq->etag, strlen(rq->etag));
		s3d_text(rq, "</ETag></CopyObjectResult>\n", 27);
	} else {
		s3d_xml_begin(rq, "CompleteMultipartUploadResult");
		s3d_text(rq, "<Bucket>", 8);
		s3d_xml_str(rq, rq->bucket, strlen(rq->bucket));
		s3d_text(rq, "</Bucket><Key>", 14);
		s3d_xml_str(rq, rq->key, rq->key_len);
		s3d_text(rq, "</Key><ETag>", 12);
		s3d_xml_str(rq, rq->etag, strlen(rq->etag));
		s3d_text(rq, "</ETag></CompleteMultipartUploadResult>\n", 40);
	}
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

static void s3d_assemble(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uint32_t nsrc = rq->op == S3_COPY ? 1 : rq->n - 1; /* Complete: items[0] is the marker */
	struct s3d_item *src = rq->op == S3_COPY ? rq->items : rq->items + 1;
	uint64_t lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct s3d_obj ob;
	struct kvt_key k;
	uint64_t total = 0;
	uint32_t whole = 0;
	int r;

	for (uint32_t i = 0; i < nsrc; i++) {
		/* data_off and len of each source were checked by the caller
		 * (part_no holds nothing here); recompute from headers */
		uint8_t h[S3D_HDR_LEN];
		s3d_view_read(&src[i].req, 0, h, sizeof(h));
		lens[1 + i] = s3d_get64(h + 8);
		total += lens[1 + i];
	}
	s3d_key(&k, 'o', rq->key, rq->key_len);
	rq->hdr_len = s3d_obj_header(rq->hdrbuf, total, 0, rq->key, rq->key_len, rq->ctype,
				     rq->op == S3_COPY ? 0 : nsrc);
	lens[0] = rq->hdr_len;
	/* Empty sources are not parts (kvtier parts are >= 1 byte). */
	unsigned np = 1;
	for (uint32_t i = 0; i < nsrc; i++)
		if (lens[1 + i])
			lens[np++] = lens[1 + i];
	r = kvt_put_reserve(srv->store, rq->ns, &k, lens, np, 0, &rq->res);
	if (r == KVT_EXISTS && rq->phase != PH_ASSEMBLE_DEL) {
		/* Replace: delete first, then come back here. */
		struct s3d_item *d = calloc(1, sizeof(*d));
		struct kvt_req *dr;
		if (!d) {
			s3d_fail(rq, 503, "SlowDown", "server out of memory");
			return;
		}
		/* the delete is one more item: held outside items[] */
		s3d_item_init(rq, d, KVT_OP_DELETE, &k);
		rq->phase = PH_ASSEMBLE_DEL;
		rq->pending = 1;
		dr = &d->req;
		free(rq->del_item);
		rq->del_item = d;
		if (kvt_submit(rq->conn->loop->q, &dr, 1) != 1) {
			rq->pending = 0;
			s3d_fail(rq, 500, "InternalError", "cannot replace the object");
		}
		return;
	}
	if (r != KVT_OK) {
		if (r == KVT_ETOOBIG || r == KVT_EBADLEN)
			s3d_fail(rq, 400, "EntityTooLarge", "The object is larger than kvtierd's "
				 "largest value");
		else if (r == KVT_EXISTS)
			s3d_fail(rq, 503, "SlowDown", "A concurrent write of this key; retry");
		else
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	rq->reserved = true;
	/* Copy: header, then each source's bytes, CRCs as they go. */
	{
		uint32_t vi = 0;
		size_t voff = 0;
		unsigned part = 0;
		uint64_t part_left = lens[0];
		uint32_t pcrc = 0;
		const struct iovec *view = rq->res.view;
#define S3D_EMIT(p_, n_)                                                                   \
	do {                                                                               \
		const uint8_t *pp = (const uint8_t *)(p_);                                 \
		size_t nn = (n_);                                                          \
		while (nn) {                                                               \
			size_t room = view[vi].iov_len - voff;                             \
			size_t t = nn < room ? nn : room;                                  \
			if (t > part_left)                                                 \
				t = (size_t)part_left;                                     \
			memcpy((uint8_t *)view[vi].iov_base + voff, pp, t);                \
			pcrc = kvt_crc32c(pcrc, pp, t);                                    \
			if (part > 0)                                                      \
				whole = kvt_crc32c(whole, pp, t);                          \
			pp += t;                                                           \
			nn -= t;                                                           \
			voff += t;                                                         \
			part_left -= t;                                                    \
			if (voff == view[vi].iov_len) {                                    \
				vi++;                                                      \
				voff = 0;                                                  \
			}                                                                  \
			if (part_left == 0) {                                              \
				crcs[part++] = pcrc;                                       \
				pcrc = 0;                                                  \
				part_left = part < np ? lens[part] : 0;                    \
			}                                                                  \
		}                                                                          \
	} while (0)
		S3D_EMIT(rq->hdrbuf, rq->hdr_len);
		for (uint32_t i = 0; i < nsrc; i++) {
			uint8_t h[S3D_HDR_LEN];
			const struct kvt_req *sr = &src[i].req;
			s3d_view_read(sr, 0, h, sizeof(h));
			uint64_t off = S3D_HDR_LEN + (uint64_t)s3d_get32(h + 28) + s3d_get32(h + 32);
			uint64_t left = s3d_get64(h + 8);
			for (uint32_t v = 0; v < sr->view_count && left; v++) {
				size_t l = sr->view[v].iov_len;
				if (off >= l) {
					off -= l;
					continue;
				}
				size_t take = l - (size_t)off < left ? l - (size_t)off : (size_t)left;
				S3D_EMIT((uint8_t *)sr->view[v].iov_base + off, take);
				left -= take;
				off = 0;
			}
		}
#undef S3D_EMIT
	}
	/* The whole object's CRC goes in the header (part 0): rewrite it. */
	s3d_put32(rq->hdrbuf + 24, whole);
	{
		size_t vi = 0, voff = 24;
		for (int b = 0; b < 4; b++) {
			while (voff >= rq->res.view[vi].iov_len) {
				voff -= rq->res.view[vi].iov_len;
				vi++;
			}
			((uint8_t *)rq->res.view[vi].iov_base)[voff++] = rq->hdrbuf[24 + b];
		}
		crcs[0] = kvt_crc32c(0, rq->hdrbuf, rq->hdr_len);
	}
	r = kvt_put_commit_checked(srv->store, rq->res.handle, crcs);
	rq->reserved = false;
	if (r != KVT_OK && r != -ECANCELED) {
		s3d_fail(rq, 500, "InternalError", kvt_strerror(r));
		return;
	}
	(void)ob;
	s3d_etag(rq->etag, sizeof(rq->etag), whole, total, rq->op == S3_COPY ? 0 : nsrc);
	if (rq->op == S3_MPU_COMPLETE) {
		/* The parts and the marker are no longer needed. */
		struct kvt_key pk;
		for (uint32_t i = 0; i < nsrc; i++) {
			s3d_part_key(&pk, rq->upload_id, src[i].part_no);
			s3d_fire_delete(rq->conn, rq->ns, &pk);
		}
		s3d_key(&pk, 'u', rq->upload_id, strlen(rq->upload_id));
		s3d_fire_delete(rq->conn, rq->ns, &pk);
	}
	s3d_complete_answer(rq);
}

/* ---- the step after each phase ---------------------------------------- */

static void s3d_step(struct s3d_req *rq)
{
	struct s3d_item *it = rq->items;

	switch (rq->op) {
	case S3_LIST_BUCKETS:
		s3d_list_buckets_answer(rq);
		return;
	case S3_GET:
	case S3_HEAD:
		s3d_get_answer(rq);
		return;
	case S3_PUT:
	case S3_MPU_PART:
		/* PH_WRITE: items are DELETE, PUT */
		if (rq->n == 2 && it[1].req.status < 0 && it[1].req.status != -ECANCELED) {
			int st = it[1].req.status;
			if (st == KVT_ETOOBIG || st == KVT_EBADLEN)
				s3d_fail(rq, 400, "EntityTooLarge", "The object is larger than "
					 "kvtierd's largest value");
			else
				s3d_fail(rq, 503, "SlowDown", kvt_strerror(st));
			return;
		}
		s3d_put_ok(rq);
		return;
	case S3_DELETE:
		rq->tlen = 0;
		s3d_answer(rq, 204, NULL, 0, false);
		s3d_finish(rq);
		return;
	case S3_HEAD_BUCKET:
		if (it[0].req.status != KVT_OK) {
			s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
			return;
		}
		rq->tlen = 0;
		s3d_answer(rq, 200, "x-amz-bucket-region: us-east-1\r\n", 0, false);
		s3d_finish(rq);
		return;
	case S3_CREATE_BUCKET:
		if (it[0].req.status == KVT_EXISTS) {
			s3d_fail(rq, 409, "BucketAlreadyOwnedByYou", "Your previous request to "
				 "create the named bucket succeeded and you already own it.");
			return;
		}
		if (it[0].req.status < 0) {
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(it[0].req.status));
			return;
		}
		{
			char loc[160];
			snprintf(loc, sizeof(loc), "Location: /%s\r\n", rq->bucket);
			rq->tlen = 0;
			s3d_answer(rq, 200, loc, 0, false);
		}
		s3d_finish(rq);
		return;
	case S3_DELETE_BUCKET:
		if (rq->phase == PH_PROBE) {
			if (it[0].req.status != KVT_OK) {
				s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
				return;
			}
			it = s3d_items(rq, 1);
			if (!it) {
				s3d_fail(rq, 503, "SlowDown", "server out of memory");
				return;
			}
			s3d_item_init(rq, it, KVT_OP_CLEAR, NULL);
			it->req.flags = KVT_F_DEFER;
			s3d_submit(rq, PH_WRITE);
			return;
		}
		if (it[0].req.status < 0) {
			s3d_fail(rq, 500, "InternalError", kvt_strerror(it[0].req.status));
			return;
		}
		rq->tlen = 0;
		s3d_answer(rq, 204, NULL, 0, false);
		s3d_finish(rq);
		return;
	case S3_DELETE_MANY: {
		/* items: the deletes, in the order of the request's keys (rq->buf
		 * holds the keys, NUL-separated) */
		bool quiet = rq->cond_none_match; /* reused: <Quiet>true</Quiet> */
		const char *kp = (const char *)rq->buf;
		s3d_xml_begin(rq, "DeleteResult");
		for (uint32_t i = 0; i < rq->n; i++) {
			size_t kl = strlen(kp);
			if (!quiet) {
				s3d_text(rq, "<Deleted><Key>", 14);
				s3d_xml_str(rq, kp, kl);
				s3d_text(rq, "</Key></Deleted>", 16);
			}
			kp += kl + 1;
		}
		s3d_text(rq, "</DeleteResult>\n", 16);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	}
	case S3_COPY: {
		struct s3d_obj ob;
		if (rq->phase == PH_ASSEMBLE_DEL) {
			s3d_assemble(rq);
			return;
		}
		/* items[0]: the source, whose name is in rq->buf */
		if (!s3d_obj_check(&it[0].req, rq->buf, strlen((char *)rq->buf), &ob)) {
			s3d_fail(rq, 404, "NoSuchKey", "The specified source key does not exist.");
			return;
		}
		snprintf(rq->ctype, sizeof(rq->ctype), "%s", ob.ctype);
		s3d_assemble(rq);
		return;
	}
	case S3_MPU_CREATE:
		if (it[0].req.status < 0) {
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(it[0].req.status));
			return;
		}
		s3d_xml_begin(rq, "InitiateMultipartUploadResult");
		s3d_text(rq, "<Bucket>", 8);
		s3d_xml_str(rq, rq->bucket, strlen(rq->bucket));
		s3d_text(rq, "</Bucket><Key>", 14);
		s3d_xml_str(rq, rq->key, rq->key_len);
		s3d_printf(rq, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>\n",
			   rq->upload_id);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	case S3_MPU_ABORT:
		rq->tlen = 0;
		s3d_answer(rq, 204, NULL, 0, false);
		s3d_finish(rq);
		return;
	case S3_MPU_COMPLETE: {
		struct s3d_obj ob;
		if (rq->phase == PH_ASSEMBLE_DEL) {
			s3d_assemble(rq);
			return;
		}
		/* items[0]: the upload's marker (its name is the object key) */
		if (!s3d_obj_check(&it[0].req, rq->key, rq->key_len, &ob)) {
			s3d_fail(rq, 404, "NoSuchUpload", "The specified multipart upload does not "
				 "exist.");
			return;
		}
		snprintf(rq->ctype, sizeof(rq->ctype), "%s", ob.ctype);
		for (uint32_t i = 1; i < rq->n; i++) {
			char name[64], etag[48];
			int nl = snprintf(name, sizeof(name), "%s/%u", rq->upload_id, it[i].part_no);
			if (!s3d_obj_check(&it[i].req, name, (size_t)nl, &ob)) {
				s3d_fail(rq, 400, "InvalidPart", "One or more of the specified parts "
					 "could not be found.");
				return;
			}
			s3d_etag(etag, sizeof(etag), ob.crc, ob.len, 0);
			/* the ETag the client sent for it (quotes optional) */
			const char *es = it[i].etag_sent;
			size_t el = es ? strlen(es) : 0;
			if (el && es[0] != '"' && el + 2 == strlen(etag) &&
			    memcmp(es, etag + 1, el) == 0)
				el = 0;
			if (el && (el != strlen(etag) || memcmp(es, etag, el) != 0)) {
				s3d_fail(rq, 400, "InvalidPart", "A part's ETag does not match.");
				return;
			}
			if (i + 1 < rq->n && ob.len < (5u << 20)) {
				s3d_fail(rq, 400, "EntityTooSmall", "Your proposed upload is smaller "
					 "than the minimum allowed object size.");
				return;
			}
		}
		s3d_assemble(rq);
		return;
	}
	default:
		s3d_fail(rq, 500, "InternalError", "unexpected state");
	}
}

/* ------------------------------------------------------------------------
 * Bodies
 */

static void s3d_run(struct s3d_req *rq);

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

/* An aws-chunked event of the inner decoder. */
static int s3d_inner_event(struct s3d_req *rq, const struct s3c_ev *ev)
{
	switch (ev->kind) {
	case S3C_EV_CHUNK:
		if (rq->payload == PL_STREAM_SIGNED) {
			static const char pre[] = "chunk-signature=";
			if (ev->ext_len != sizeof(pre) - 1 + 64 ||
			    memcmp(ev->ext, pre, sizeof(pre) - 1) != 0)
				return -1;
			memcpy(rq->chunk_want, ev->ext + sizeof(pre) - 1, 64);
			rq->chunk_want[64] = 0;
			if (!rq->chunk_sha)
				rq->chunk_sha = EVP_MD_CTX_new();
			if (!rq->chunk_sha || EVP_DigestInit_ex(rq->chunk_sha, EVP_sha256(), NULL) != 1)
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
		if (i >= 0 && i != CK_MD5 && ev->value_len < sizeof(rq->ck_val[i])) {
			memcpy(rq->ck_val[i], ev->value, ev->value_len);
			rq->ck_val[i][ev->value_len] = 0;
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
 * content encoding.  Returns bytes consumed, or -1 (malformed: close). */
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

/* The body is complete: check what must match, then run the operation. */
static void s3d_body_done(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uint8_t h[32];
	unsigned hl = 32;

	rq->in_body = false;
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
		s3d_fail(rq, rq->err_status, rq->err_code, rq->err_msg[0] ? rq->err_msg : rq->err_code);
		return;
	}
	/* PUT, UploadPart: the object is complete */
	if (rq->op == S3_PUT || rq->op == S3_MPU_PART) {
		rq->obj_crc = rq->crc32c;
		s3d_etag(rq->etag, sizeof(rq->etag), rq->crc32c, rq->got, 0);
		if (rq->sink == SK_RESV) {
			uint32_t crcs[2];
			struct kvt_key dummy;
			int r;
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
 * Request bodies in XML (CompleteMultipartUpload, DeleteObjects): a
 * scanner for the few elements read, not a general XML parser.  Entities
 * &amp; &lt; &gt; &quot; &apos; and numeric ones below 0x80 are decoded;
 * anything else in a value is refused (MalformedXML).
 */

/* The next <tag>value</tag> at or after *pos: value into out (decoded),
 * its length, or -1 (none), -2 (malformed). */
static int64_t s3d_xml_next(const char *x, size_t n, size_t *pos, const char *tag, char *out,
			    size_t cap)
{
	char open[40], close[40];
	int ol = snprintf(open, sizeof(open), "<%s>", tag);
	int cl = snprintf(close, sizeof(close), "</%s>", tag);
	const char *s = memmem(x + *pos, n - *pos, open, (size_t)ol), *e;
	size_t o = 0;

	if (!s)
		return -1;
	s += ol;
	e = memmem(s, n - (size_t)(s - x), close, (size_t)cl);
	if (!e)
		return -2;
	*pos = (size_t)(e - x) + (size_t)cl;
	for (const char *p = s; p < e; p++) {
		char ch = *p;
		if (ch == '&') {
			const char *semi = memchr(p, ';', (size_t)(e - p));
			size_t el;
			if (!semi)
				return -2;
			el = (size_t)(semi - p) + 1;
			if (el == 5 && memcmp(p, "&amp;", 5) == 0)
				ch = '&';
			else if (el == 4 && memcmp(p, "&lt;", 4) == 0)
				ch = '<';
			else if (el == 4 && memcmp(p, "&gt;", 4) == 0)
				ch = '>';
			else if (el == 6 && memcmp(p, "&quot;", 6) == 0)
				ch = '"';
			else if (el == 6 && memcmp(p, "&apos;", 6) == 0)
				ch = '\'';
			else if (el > 3 && p[1] == '#') {
				unsigned long v = strtoul(p + (p[2] == 'x' ? 3 : 2), NULL,
							  p[2] == 'x' ? 16 : 10);
				if (v == 0 || v >= 0x80)
					return -2;
				ch = (char)v;
			} else
				return -2;
			p = semi;
		} else if (ch == '<') {
			return -2;
		}
		if (o + 1 >= cap)
			return -2;
		out[o++] = ch;
	}
	out[o] = 0;
	return (int64_t)o;
}

static void s3d_complete_start(struct s3d_req *rq)
{
	const char *x = (const char *)rq->buf;
	size_t n = (size_t)rq->buf_len, pos = 0;
	uint32_t count = 0, last = 0;
	struct s3d_item *it;
	struct kvt_key k;

	/* count the parts first */
	for (const char *p = x; (p = memmem(p, n - (size_t)(p - x), "<Part>", 6)); p += 6)
		count++;
	if (count == 0 || count > S3D_PARTS_MAX) {
		s3d_fail(rq, 400, count ? "InvalidRequest" : "MalformedXML",
			 count ? "kvtierd assembles at most 1023 parts" : "No parts listed.");
		return;
	}
	it = s3d_items(rq, 1 + count);
	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_key(&k, 'u', rq->upload_id, strlen(rq->upload_id));
	s3d_item_init(rq, &it[0], KVT_OP_GET_PINNED, &k);
	for (uint32_t i = 0; i < count; i++) {
		size_t pend, inner;
		char part[512], etag[128];
		/* each <Part>...</Part> in turn */
		const char *ps = memmem(x + pos, n - pos, "<Part>", 6);
		const char *pe = ps ? memmem(ps, n - (size_t)(ps - x), "</Part>", 7) : NULL;
		if (!ps || !pe) {
			s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed.");
			return;
		}
		pend = (size_t)(pe - x) + 7;
		inner = 0;
		int64_t pl = s3d_xml_next(ps, (size_t)(pe - ps) + 7, &inner, "PartNumber", part,
					  sizeof(part));
		inner = 0;
		int64_t el = s3d_xml_next(ps, (size_t)(pe - ps) + 7, &inner, "ETag", etag,
					  sizeof(etag));
		pos = pend;
		char *end;
		unsigned long pn = pl > 0 ? strtoul(part, &end, 10) : 0;
		if (pl <= 0 || *end || pn < 1 || pn > 10000 || pn <= last) {
			s3d_fail(rq, 400, pn && pn <= last ? "InvalidPartOrder" : "MalformedXML",
				 pn && pn <= last ? "The list of parts was not in ascending order." :
						    "The XML you provided was not well-formed.");
			return;
		}
		last = (uint32_t)pn;
		s3d_part_key(&k, rq->upload_id, (uint32_t)pn);
		s3d_item_init(rq, &it[1 + i], KVT_OP_GET_PINNED, &k);
		it[1 + i].part_no = (uint32_t)pn;
		if (el > 0 && !(it[1 + i].etag_sent = strdup(etag))) {
			s3d_fail(rq, 503, "SlowDown", "server out of memory");
			return;
		}
	}
	s3d_submit(rq, PH_PROBE);
}

static void s3d_delete_many_start(struct s3d_req *rq)
{
	const char *x = (const char *)rq->buf;
	size_t n = (size_t)rq->buf_len, pos = 0;
	uint32_t count = 0;
	char *keys, *kp;
	char v[S3D_KEY_MAX + 1];
	int64_t l;
	struct s3d_item *it;

	keys = malloc(n + 1);
	if (!keys) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	kp = keys;
	while ((l = s3d_xml_next(x, n, &pos, "Key", v, sizeof(v))) >= 0) {
		if (++count > S3D_DELETE_MAX || l == 0) {
			free(keys);
			s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed "
				 "or did not validate against our published schema.");
			return;
		}
		memcpy(kp, v, (size_t)l + 1);
		kp += l + 1;
	}
	if (l == -2 || count == 0) {
		free(keys);
		s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed or did "
			 "not validate against our published schema.");
		return;
	}
	pos = 0;
	rq->cond_none_match = s3d_xml_next(x, n, &pos, "Quiet", v, sizeof(v)) == 4 &&
			      strcasecmp(v, "true") == 0;
	free(rq->buf);
	rq->buf = (uint8_t *)keys;
	it = s3d_items(rq, count);
	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	kp = keys;
	for (uint32_t i = 0; i < count; i++) {
		struct kvt_key k;
		size_t kl = strlen(kp);
		s3d_key(&k, 'o', kp, kl);
		s3d_item_init(rq, &it[i], KVT_OP_DELETE, &k);
		kp += kl + 1;
	}
	s3d_submit(rq, PH_WRITE);
}

/* Run the operation once the body (if any) is in. */
static void s3d_run(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_item *it;
	struct kvt_key k;
	int r;

	if (rq->op == S3_LIST_BUCKETS) {
		s3d_list_buckets(rq);
		return;
	}
	if (rq->op == S3_NOT_IMPL) {
		s3d_fail(rq, 501, "NotImplemented", "A header or query you provided implies "
			 "functionality that kvtierd does not implement (doc/s3.md).");
		return;
	}
	if (rq->op == S3_BUCKET_LOCATION) {
		s3d_xml_begin(rq, "LocationConstraint");
		s3d_text(rq, "</LocationConstraint>\n", 22);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	}
	r = s3d_bucket_ns(rq, rq->op == S3_CREATE_BUCKET);
	if (r == KVT_MISS) {
		s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
		return;
	}
	if (r < 0) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	switch (rq->op) {
	case S3_CREATE_BUCKET: {
		it = s3d_items(rq, 1);
		if (!it)
			break;
		k = (struct kvt_key){ .len = 1, .bytes = { 'B' } };
		s3d_item_init(rq, it, KVT_OP_PUT, &k);
		s3d_put64(rq->hdrbuf, s3d_unix_ms());
		it->iov[0] = (struct iovec){ rq->hdrbuf, 8 };
		it->req.iov = it->iov;
		it->req.iov_count = 1;
		s3d_submit(rq, PH_WRITE);
		return;
	}
	case S3_HEAD_BUCKET:
	case S3_DELETE_BUCKET:
		it = s3d_items(rq, 1);
		if (!it)
			break;
		k = (struct kvt_key){ .len = 1, .bytes = { 'B' } };
		s3d_item_init(rq, it, KVT_OP_EXISTS, &k);
		s3d_submit(rq, PH_PROBE);
		return;
	case S3_GET:
	case S3_HEAD:
		it = s3d_items(rq, 1);
		if (!it)
			break;
		s3d_key(&k, 'o', rq->key, rq->key_len);
		s3d_item_init(rq, it, KVT_OP_GET_PINNED, &k);
		s3d_submit(rq, PH_PROBE);
		return;
	case S3_DELETE:
		it = s3d_items(rq, 1);
		if (!it)
			break;
		s3d_key(&k, 'o', rq->key, rq->key_len);
		s3d_item_init(rq, it, KVT_OP_DELETE, &k);
		s3d_submit(rq, PH_WRITE);
		return;
	case S3_DELETE_MANY:
		s3d_delete_many_start(rq);
		return;
	case S3_MPU_CREATE: {
		uint8_t rnd[16];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			s3d_fail(rq, 500, "InternalError", "no randomness");
			return;
		}
		sigv4_hex(rnd, sizeof(rnd), rq->upload_id);
		it = s3d_items(rq, 1);
		if (!it)
			break;
		s3d_key(&k, 'u', rq->upload_id, strlen(rq->upload_id));
		s3d_item_init(rq, it, KVT_OP_PUT, &k);
		rq->hdr_len = s3d_obj_header(rq->hdrbuf, 0, 0, rq->key, rq->key_len, rq->ctype, 0);
		it->iov[0] = (struct iovec){ rq->hdrbuf, rq->hdr_len };
		it->req.iov = it->iov;
		it->req.iov_count = 1;
		s3d_submit(rq, PH_WRITE);
		return;
	}
	case S3_MPU_ABORT:
		it = s3d_items(rq, 1);
		if (!it)
			break;
		s3d_key(&k, 'u', rq->upload_id, strlen(rq->upload_id));
		s3d_item_init(rq, it, KVT_OP_DELETE, &k);
		s3d_submit(rq, PH_WRITE);
		return;
	case S3_MPU_COMPLETE:
		s3d_complete_start(rq);
		return;
	case S3_COPY: {
		/* x-amz-copy-source: [/]bucket/key, percent-encoded; within
		 * the tenant's own bucket (doc/s3.md) */
		size_t vl;
		const char *v = s3h_header(&rq->h, "x-amz-copy-source", &vl);
		char *dec = malloc(vl + 1);
		int64_t dl;
		if (!dec)
			break;
		dl = s3h_unescape(v, vl, dec, vl);
		if (dl < 0) {
			free(dec);
			s3d_fail(rq, 400, "InvalidArgument", "Copy Source must mention the source "
				 "bucket and key: sourcebucket/sourcekey.");
			return;
		}
		dec[dl] = 0;
		char *b = dec[0] == '/' ? dec + 1 : dec;
		char *q = strchr(b, '?');
		if (q)
			*q = 0;
		char *slash = strchr(b, '/');
		if (!slash || slash[1] == 0 || strlen(slash + 1) > S3D_KEY_MAX) {
			free(dec);
			s3d_fail(rq, 400, "InvalidArgument", "Copy Source must mention the source "
				 "bucket and key: sourcebucket/sourcekey.");
			return;
		}
		*slash = 0;
		if (strcmp(b, rq->bucket) != 0) {
			free(dec);
			s3d_fail(rq, 501, "NotImplemented", "kvtierd copies within one bucket only.");
			return;
		}
		/* the source's name goes to rq->buf (owned) */
		memmove(dec, slash + 1, strlen(slash + 1) + 1);
		free(rq->buf);
		rq->buf = (uint8_t *)dec;
		it = s3d_items(rq, 1);
		if (!it)
			break;
		s3d_key(&k, 'o', dec, strlen(dec));
		s3d_item_init(rq, it, KVT_OP_GET_PINNED, &k);
		s3d_submit(rq, PH_PROBE);
		return;
	}
	default:
		s3d_fail(rq, 500, "InternalError", "unexpected operation");
		return;
	}
	(void)srv;
	s3d_fail(rq, 503, "SlowDown", "server out of memory");
}

/* ------------------------------------------------------------------------
 * Routing and authentication
 */

/* Path and query into bucket, key and the sub-resources read.  0 or an
 * answer was written (-1). */
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
	size_t vl;

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
	{
		char *slash = memchr(dec, '/', (size_t)dl);
		size_t bl = slash ? (size_t)(slash - dec) : (size_t)dl;
		if (bl >= sizeof(rq->bucket) || (bl && !s3d_bucket_ok(dec, bl))) {
			free(dec);
			s3d_fail(rq, 400, "InvalidBucketName", "The specified bucket is not valid.");
			return -1;
		}
		memcpy(rq->bucket, dec, bl);
		rq->bucket[bl] = 0;
		if (slash && slash[1]) {
			rq->key_len = (size_t)dl - bl - 1;
			if (rq->key_len > S3D_KEY_MAX) {
				free(dec);
				s3d_fail(rq, 400, "KeyTooLongError", "Your key is too long");
				return -1;
			}
			memmove(dec, slash + 1, rq->key_len);
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
				if (!((v[k] >= '0' && v[k] <= '9') || (v[k] >= 'a' && v[k] <= 'f'))) {
					s3d_fail(rq, 404, "NoSuchUpload", "The specified multipart "
						 "upload does not exist.");
					return -1;
				}
			memcpy(rq->upload_id, v, 32);
			rq->upload_id[32] = 0;
			has_upload = true;
		} else if (IS("partNumber")) {
			unsigned long pn = 0;
			for (size_t k = 0; k < vlen && k < 6; k++)
				pn = v[k] >= '0' && v[k] <= '9' ? pn * 10 + (unsigned long)(v[k] - '0')
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
			   IS("continuation-token") || IS("start-after") || IS("fetch-owner")) {
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
		else
			rq->op = S3_NOT_IMPL; /* ListObjects(V2): doc/s3.md */
	} else if (put && has_upload && has_part) {
		rq->op = s3h_header(&rq->h, "x-amz-copy-source", &vl) ? S3_NOT_IMPL : S3_MPU_PART;
	} else if (put) {
		rq->op = s3h_header(&rq->h, "x-amz-copy-source", &vl) ? S3_COPY : S3_PUT;
	} else if (get && !has_upload && !has_part) {
		rq->op = S3_GET;
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
	if ((rq->op == S3_MPU_PART || rq->op == S3_MPU_ABORT || rq->op == S3_MPU_COMPLETE) &&
	    !has_upload)
		rq->op = S3_NOT_IMPL;
	return 0;
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
	if (c->state != KVTD_CS_READY) {
		c->state = KVTD_CS_READY; /* the sweep's unauthenticated clock stops */
		KVTD_COUNT(srv, auth_ok, 1);
	}
	(void)role;
	return 0;
}

/* Payload mode, lengths, checksums and the sink: 0, or an answer was
 * written and the connection closes (-1). */
static int s3d_body_setup(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	size_t vl;
	const char *v = s3h_header(&rq->h, "x-amz-content-sha256", &vl);
	const char *ce;
	size_t cel;
	bool streaming = false;

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
	if (rq->aws_chunked && !streaming)
		rq->payload = PL_STREAM_TRAILER; /* aws-chunked without a streaming mode: unsigned */
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
		if (k >= 0 && rq->hdrs[i].value_len < sizeof(rq->ck_val[k])) {
			memcpy(rq->ck_val[k], rq->hdrs[i].value, rq->hdrs[i].value_len);
			rq->ck_val[k][rq->hdrs[i].value_len] = 0;
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
		struct kvt_key k;
		uint64_t lens[2];
		const char *name = rq->key;
		size_t name_len = rq->key_len;
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
		if ((v = s3h_header(&rq->h, "content-type", &vl)) && vl <= S3D_CTYPE_MAX) {
			memcpy(rq->ctype, v, vl);
			rq->ctype[vl] = 0;
		}
		if (s3d_bucket_ns(rq, false) != 0) {
			/* answered now: no body is read for a bucket that is not there */
			rq->close_after = true;
			s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
			return -1;
		}
		rq->hdr_len = s3d_obj_header(rq->hdrbuf, rq->decoded_len, 0, name, name_len,
					     rq->ctype, 0);
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
		r = kvt_put_reserve(srv->store, rq->ns, &k, lens, rq->decoded_len ? 2 : 1, 0, &rq->res);
		if (r == KVT_OK) {
			rq->reserved = true;
			rq->sink = SK_RESV;
			return 0;
		}
		if (r == KVT_EXISTS && rq->cond_none_match) {
			rq->sink = SK_DISCARD;
			rq->err_status = 412;
			rq->err_code = "PreconditionFailed";
			snprintf(rq->err_msg, sizeof(rq->err_msg), "At least one of the pre-conditions "
				 "you specified did not hold");
			return 0;
		}
		if (r != KVT_EXISTS) {
			rq->sink = SK_DISCARD;
			rq->err_status = r == KVT_ETOOBIG || r == KVT_EBADLEN ? 400 : 503;
			rq->err_code = rq->err_status == 400 ? "EntityTooLarge" : "SlowDown";
			snprintf(rq->err_msg, sizeof(rq->err_msg), "%s", kvt_strerror(r));
			return 0;
		}
		/* an overwrite: into a buffer, then DELETE + PUT */
		if (!kvtd_mem_charge(srv, rq->decoded_len, false)) {
			KVTD_COUNT(srv, mem_refused, 1);
			s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory); "
				 "retry later");
			rq->close_after = true;
			return -1;
		}
		rq->buf_charged = rq->decoded_len;
		rq->buf = malloc(rq->decoded_len ? rq->decoded_len : 1);
		if (!rq->buf)
			goto oom;
		rq->sink = SK_BUF;
		return 0;
	}
	if (rq->op == S3_DELETE_MANY || rq->op == S3_MPU_COMPLETE || rq->op == S3_CREATE_BUCKET) {
		if (rq->decoded_len > S3D_SMALL_MAX) {
			rq->close_after = true;
			s3d_fail(rq, 400, "MaxMessageLengthExceeded", "Your request was too big.");
			return -1;
		}
		if (!kvtd_mem_charge(srv, rq->decoded_len + 1, false)) {
			KVTD_COUNT(srv, mem_refused, 1);
			rq->close_after = true;
			s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory)");
			return -1;
		}
		rq->buf_charged = rq->decoded_len + 1;
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
	{
		struct kvtd_tstat *t = kvtd_tstat_of(c);
		if (t) {
			atomic_fetch_add_explicit(&t->requests, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&t->bytes_in, h->head_len, memory_order_relaxed);
		}
	}
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
	if (s3d_body_setup(rq) < 0) {
		if (!c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
	if (rq->wire_left == 0 && !rq->transport_chunked) {
		s3d_body_done(rq);
		return;
	}
	if (rq->err_status && h->expect_continue) {
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
	if (h->expect_continue && sc->head == rq)
		s3d_send_continue(c);
	c->frame_start_ns = c->loop->now_ns;
}

/* Feed buffered bytes to the body being received; parse the next heads. */
static void s3d_parse(struct kvtd_conn *c)
{
	struct s3d_conn *sc = s3d_of(c);

	while (!c->dead && !c->no_more_input && c->rend > c->rstart) {
		if (sc->rx) {
			struct s3d_req *rq = sc->rx;
			int64_t u = s3d_body_feed(rq, c->rbuf + c->rstart, c->rend - c->rstart);
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
		if (c->read_paused || c->inflight >= c->loop->srv->cfg.conn_inflight)
			return;
		struct s3h_hdr hd[S3H_HDRS_MAX];
		struct s3h_req h;
		int r = s3h_parse((const char *)c->rbuf + c->rstart, c->rend - c->rstart,
				  S3H_HEAD_MAX, hd, S3H_HDRS_MAX, &h);
		if (r == S3H_NEED_MORE) {
			if (!c->frame_start_ns)
				c->frame_start_ns = c->loop->now_ns;
			break;
		}
		if (r < 0) {
			s3d_proto_error(c, r == S3H_ETOOBIG ? 431 : r == S3H_EUNSUPPORTED ? 501 : 400,
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

/* The protocol table's read: a plain body going straight into its DRAM
 * reservation is read() into place, no copy through rbuf (as native PUTs
 * are received); everything else through rbuf. */
static ssize_t s3d_read(struct kvtd_conn *c, size_t *asked)
{
	struct s3d_conn *sc = s3d_of(c);
	struct s3d_req *rq = sc->rx;
	ssize_t r;

	if (rq && c->rstart == c->rend && rq->sink == SK_RESV && !rq->transport_chunked &&
	    !rq->aws_chunked && rq->wire_left && !rq->sha && !rq->md5) {
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
				left -= t;
			}
			/* the slow-client clock restarts every 16 MiB received */
			if ((rq->got + (uint64_t)r) / KVTD_SLOW_PROGRESS != rq->got / KVTD_SLOW_PROGRESS)
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
	if (!kvtd_auth_enabled()) {
		c->state = KVTD_CS_READY;
		snprintf(c->tenant, sizeof(c->tenant), "%s", KVTD_DEFAULT_TENANT);
		c->tenant_len = (uint32_t)strlen(KVTD_DEFAULT_TENANT);
		c->role = PROTO_ROLE_ADMIN;
	}
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
	.req_done = s3d_req_done,
	.free = s3d_free,
};

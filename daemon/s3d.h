/*
 * s3d.h - what the three files of kvtierd's S3 listener share (doc/s3.md);
 * not a public interface: kvtierd.h has the listener's table entry,
 * kvtd_s3_proto.
 *
 *   s3d.c      the protocol table's S3 entry: input, request heads,
 *              routing, SigV4 authentication, bodies (aws-chunked,
 *              checksums, DRAM reservations)
 *   s3ops.c    the operations: keys and buckets, object headers, library
 *              requests through the loop's queue and what follows each
 *   s3reply.c  answers (status line, headers, S3 XML, pinned segments)
 *              and a connection's requests in order
 *
 * Each calls only those after it (tests/unit/test_daemon_layers.py).
 * Every function runs on the connection's loop thread.
 */
#ifndef KVTD_S3D_H
#define KVTD_S3D_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

#include "kvtierd.h"
#include "s3http.h"
#include "sigv4.h"

#define S3D_MODEL_PREFIX "s3/"
#define S3D_HDR_LEN 64
#define S3D_KEY_MAX 1024               /* S3's longest object key */
#define S3D_CTYPE_MAX 256
/* An object's header at its longest: part 0 of every value kvtierd
 * writes (objects, parts, upload markers) is the header alone, at most
 * this long (s3ops.c); a header read reads part 0 into as many bytes
 * (s3d_item_hdr) */
#define S3D_LIST_HDR (S3D_HDR_LEN + S3D_KEY_MAX + S3D_CTYPE_MAX)
#define S3D_BUF (64u << 10)            /* a connection's input buffer */
#define S3D_SMALL_MAX (1u << 20)       /* XML request bodies */
#define S3D_PARTS_MAX (KVT_PARTS_MAX - 1) /* S3 parts of one object */
#define S3D_DELETE_MAX 1000            /* keys of one DeleteObjects */
#define S3D_CREQ_MAX (48u << 10)
#define S3D_UD ((uint64_t)KVTD_PROTO_S3) /* user_data tag of our library requests */
/* GetObjects of one connection in the store or waiting for earlier
 * answers at once (their pins count against the pin caps from the moment
 * they are kept: s3d_keep_pin, s3d_pin_flow) */
#define S3D_GETS_MAX 4u
/* Quiet reads of whole objects (GetObject, a CopyObject source of a
 * granted bucket) of one tenant in the store at once, all its
 * connections together, as a native frame's (KVTD_QUIET_WINDOW): an
 * object on SSD only is read whole into a buffer allocated when the read
 * is submitted, before its length is known (s3ops.c "Quiet reads").
 * Header reads (HeadObject, listings) read part 0 alone into the
 * request's buffer and take none. */
#define S3D_QUIET_TENANT_MAX 4u
/* Work a loop does for S3 requests in one iteration beyond their parse
 * (s3ops.c "Work on the loop"), in units: S3D_WORK_XML bytes of a
 * DeleteObjects or CompleteMultipartUpload body (its XML parsed, then a
 * store request a key or part: an entry takes ~32 bytes at least), or
 * S3D_WORK_BYTES of an object assembled (CopyObject, UploadPartCopy,
 * Complete: a memcpy and two CRC32C passes).  4,096: as many keys as a
 * tenant's native items (KVTD_PARSE_TENANT_ITEMS), 16 MiB of copies; the
 * first request of an iteration is always taken. */
#define S3D_WORK_ITER KVTD_WORK_ITER
#define S3D_WORK_BYTES 4096u
#define S3D_WORK_XML 32u

enum s3d_op {
	S3_NONE = 0, S3_LIST_BUCKETS, S3_CREATE_BUCKET, S3_HEAD_BUCKET, S3_DELETE_BUCKET,
	S3_BUCKET_LOCATION, S3_PUT, S3_GET, S3_HEAD, S3_DELETE, S3_DELETE_MANY, S3_COPY,
	S3_MPU_CREATE, S3_MPU_PART, S3_MPU_COMPLETE, S3_MPU_ABORT, S3_LIST_V1, S3_LIST_V2,
	S3_MPU_PART_COPY, S3_LIST_PARTS, S3_LIST_UPLOADS, S3_NOT_IMPL, S3__COUNT
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
enum {
	PH_NONE = 0, PH_PROBE, PH_WRITE, PH_ASSEMBLE_DEL, PH_DURABLE,
	PH_SWEEP,     /* Abort, Complete: a window of its parts' presence (s3ops.c "Sweeps") */
	PH_SWEEP_DEL, /* ... the deletes of those present */
	PH_RECHECK,   /* Complete: its marker again, a listed part missing */
	PH_PART_DEL,  /* UploadPart(Copy): its part's delete, the marker's recheck failed */
	PH_DONE
};

enum s3d_ck { CK_CRC32C = 0, CK_CRC32, CK_SHA256, CK_MD5, CK__COUNT };

struct s3d_req;
struct s3d_list;

struct s3d_item {
	struct kvt_req req;        /* user_data: this | S3D_UD */
	struct s3d_req *rq;        /* NULL: fire and forget (freed on completion) */
	bool pinned;
	bool quiet_slot;           /* holds a quiet read's slots (s3ops.c) */
	struct kvtd_tstat *quiet_tstat; /* ... of this tenant's s3_quiet, or NULL */
	uint64_t copy_charged;     /* its pin is a private SSD copy of this many
				    * bytes, charged (s3ops.c "Quiet reads") */
	struct kvtd_tstat *copy_tstat; /* the tenant copy_charged counts in, or NULL */
	struct iovec iov[2];
	uint32_t part_no;
	bool reread;               /* ListParts: a quiet miss asked its presence,
				    * read again if there (s3ops.c s3d_parts_ask) */
	char *etag_sent;           /* Complete: the part's ETag in the request (owned) */
	uint64_t pin_charged;      /* Complete's part, Copy's source: its pin's
				    * value bytes, held in its connection's and
				    * pin_tstat's pin sets (counted once a value)
				    * until unpinned (s3reply.c s3d_pins_take) */
	uintptr_t pin_at;          /* ... the value, its key in those sets */
	struct kvtd_tstat *pin_tstat;
	/* A KVT_OP_ROOM's (s3d.c "Parking"): s3d_req_done calls this
	 * instead of counting it among the request's pending items */
	void (*room_done)(struct s3d_req *rq, int status);
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
	int tier;                  /* the slowest tier that served one of its
				    * requests (enum kvt_tier): its latency's label */
	uint64_t id;               /* x-amz-request-id */
	int op;
	bool keep_alive;
	/* target */
	char bucket[64];
	bool vhost;                /* the bucket named by the Host header (--s3-domain):
				    * Host must be signed (s3d.c s3d_auth) */
	char *key;                 /* decoded, NUL-terminated, owned */
	size_t key_len;
	char upload_id[40];
	uint32_t part_no;
	uint64_t copy_first, copy_last; /* UploadPartCopy: x-amz-copy-source-range */
	bool copy_range;
	bool q_uploads, q_delete, q_location, q_list2;
	/* identity */
	char tenant[PROTO_TENANT_MAX + 1];
	size_t tenant_len;
	struct sigv4_cred cred;
	uint8_t sign_key[32];
	/* bucket's namespace */
	uint32_t ns;
	bool ns_ok;
	bool granted;              /* another tenant's bucket, by a grant: read only */
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
	bool chunk_small;          /* a signed chunk under S3D_CHUNK_MIN was sent: the last */
	char prev_sig[65];
	uint32_t crc32c, crc32;
	bool want_ck[CK__COUNT];
	char ck_val[CK__COUNT][96]; /* base64 as sent (header or trailer) */
	char trailer_ck[40];       /* x-amz-trailer: the checksum header it names */
	/* DRAM reservation (SK_RESV) */
	struct kvt_reservation res;
	bool reserved;
	bool get_counted;          /* counted in its connection's gets */
	struct kvtd_tstat *resv_tstat; /* the signer's, holding resv_held of it */
	uint64_t resv_held;        /* counted in its resv_held (S3D_RESV_TENANT_MAX) */
	/* parked for write-down room (s3d.c "Parking") */
	struct kvt_key room_key;   /* what to reserve again */
	unsigned room_parts;
	struct s3d_item *room_item; /* its KVT_OP_ROOM in flight (owned), or NULL */
	unsigned parks;
	uint64_t hdr_len;
	uint8_t hdrbuf[S3D_LIST_HDR]; /* a new object's header; HEAD's, ListParts' read */
	char ctype[S3D_CTYPE_MAX + 1];
	/* heap body (SK_BUF) */
	uint8_t *buf;
	uint64_t buf_len, buf_cap, buf_charged;
	uint64_t mem_charged;      /* to --max-memory: struct, head, items, a waiting answer */
	struct kvtd_tstat *in_tstat; /* the signer's, counting in_charged of the two */
	uint64_t in_charged;       /* of them, in its tenant's input share */
	uint64_t items_charged;    /* of mem_charged, the items array (s3ops.c s3d_items) */
	/* library requests */
	struct s3d_item *items;
	uint32_t n, pending;
	int phase;
	bool cond_none_match;      /* PUT with If-None-Match: *; DeleteObjects: Quiet */
	bool through;              /* PUT, UploadPart over a remote tier: buffered, held
				    * (s3d.c "Order") */
	struct s3d_item *del_item; /* Complete, Copy: the DELETE of a replaced object (owned) */
	struct s3d_item *flush_item; /* DeleteObject(s): the KVT_OP_FLUSH behind them (owned) */
	int durable_status;        /* DeleteObjects: that flush's, when it failed */
	struct s3d_list *list;     /* ListObjects(V2): its state, one allocation (owned) */
	_Atomic uint32_t *scan_slot; /* its tenant's walks in progress, while it holds
				      * one (s3ops.c "Walks of the store") */
	uintptr_t gate_at;         /* its bucket's entry it holds in srv->s3.gate, or 0
				    * (s3ops.c "DeleteBucket against the bucket's writes") */
	uintptr_t abort_at;        /* Abort: its upload's entry it holds there, or 0 */
	/* Abort, Complete: the sweep of its upload's part numbers (s3ops.c
	 * "Sweeps"): the next to look for, the last */
	uint32_t sweep_next, sweep_end;
	uint32_t sweep_fail;       /* a test's: this part's presence fails */
	uint32_t sweep_unsure;     /* Complete: part numbers whose presence failed */
	uint32_t sweep_left;       /* ... and whose delete failed too (maybe left) */
	int recheck_st;            /* UploadPart: its recheck's failure (PH_PART_DEL) */
	bool swept_again;          /* Abort: its sweep after the marker's delete */
	uint64_t gate_word;        /* its bucket's word when its head was taken
				    * (s3d_gate_receive) */
	/* an error decided before the body was read: answered after it */
	int err_status;
	const char *err_code;
	char err_msg[160];
	/* the answer */
	bool done;
	bool write_held;           /* counted in its connection's writes (s3d_hold) */
	bool close_after;
	uint8_t *text;
	size_t tlen, tcap;
	struct s3d_seg *segs;
	unsigned nseg, segcap;
	uint64_t *pins;
	unsigned npin, pincap;
	uint64_t pins_copy;        /* of the pins' bytes, private SSD copies charged
				    * (s3d_keep_pin): the output entry's copy_len */
	struct kvtd_tstat *pins_copy_tstat;
	uint64_t pin_held;         /* value bytes behind its pins, counted in
				    * s3d_conn.pin_held and pin_tstat's pinned
				    * until queued or released (s3d_keep_pin) */
	struct kvtd_tstat *pin_tstat; /* in_tstat, the signer's, while pin_held */
	bool copy_refused;         /* a quiet read's copy was over its bounds */
	bool oom;
	char etag[48];
	uint64_t obj_len;
	uint32_t obj_crc;
	bool hundred_sent;
};

struct s3d_conn {
	struct s3d_req *head, *tail; /* in arrival order */
	struct s3d_req *rx;        /* the request whose body is being received */
	size_t head_scan;          /* of the head at rstart, bytes searched (s3h_parse_from) */
	unsigned gets;             /* GetObjects listed, their answers not queued
				    * (S3D_GETS_MAX) */
	unsigned writes;           /* copies, Completes, bucket creations and
				    * deletions begun, not finished: no head is
				    * parsed behind them (s3d.c "Order") */
	uint64_t pin_held;         /* value bytes its requests' kept pins hold,
				    * answers not queued (s3d_keep_pin), and the
				    * values of pin_set */
	struct kvtd_pinset pin_set; /* the values its requests in progress pin
				     * (s3reply.c s3d_pins_take) */
	/* one-entry bucket cache */
	char ns_bucket[64];
	char ns_tenant[PROTO_TENANT_MAX + 1];
	uint32_t ns_id;
	bool ns_valid;
};

static inline struct s3d_conn *s3d_of(struct kvtd_conn *c)
{
	return c->alt;
}

static inline uint64_t s3d_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void s3d_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void s3d_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t s3d_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t s3d_get64(const uint8_t *p)
{
	return (uint64_t)s3d_get32(p) | (uint64_t)s3d_get32(p + 4) << 32;
}

/* s3reply.c: building an answer (text, then the status line and headers
 * in front of it), and finishing requests in order. */
void s3d_text(struct s3d_req *rq, const void *p, size_t len);
void s3d_printf(struct s3d_req *rq, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void s3d_xml_str(struct s3d_req *rq, const char *s, size_t n);
/* The answer keeps its item's pin (len: the bytes of the value it holds,
 * the whole object's whatever range is sent), counted against the pin
 * caps from now: s3reply.c "Pinned answers". */
void s3d_keep_pin(struct s3d_req *rq, struct s3d_item *it, uint64_t len);
/* Whether rq's GET, done, may keep its pins (false: a cap refuses it,
 * *why says which): s3reply.c "Pinned answers". */
bool s3d_pin_admit(struct s3d_req *rq, const char **why);
/* The pins of items[0, n) of rq (a Complete's parts, a Copy's source)
 * counted against the pin caps, each value once a connection and once a
 * tenant: true, or false with *why (a cap, or no memory) and nothing
 * counted; s3reply.c "Pins of requests in progress". */
bool s3d_pins_take(struct s3d_req *rq, struct s3d_item *items, uint32_t n, const char **why);
/* An item's pin released, with its copy's charge (s3ops.c "Quiet reads"),
 * and the charge of copies moved to rq->pins given back. */
void s3d_item_unpin(struct kvtd_server *srv, struct s3d_req *rq, struct s3d_item *it);
void s3d_copy_uncharge(struct kvtd_server *srv, struct kvtd_conn *c, struct kvtd_tstat *t,
		       uint64_t len);
void s3d_pins_release(struct kvtd_server *srv, struct s3d_req *rq);
void s3d_seg_bytes(struct s3d_req *rq, const void *p, size_t len);
/* The status line and headers (extra: CRLF-terminated lines) go in front
 * of the text built so far; no_body (HEAD, 304) drops the text but keeps
 * content_len. */
void s3d_answer(struct s3d_req *rq, int status, const char *extra, uint64_t content_len,
		       bool no_body);
/* An S3 XML error document as the answer. */
void s3d_error(struct s3d_req *rq, int status, const char *code, const char *msg);
void s3d_xml_answer(struct s3d_req *rq, int status);
void s3d_xml_begin(struct s3d_req *rq, const char *root);
void s3d_req_free(struct kvtd_server *srv, struct s3d_req *rq);
/* n more bytes of what the request holds of --max-memory counted in its
 * signer's input share (KVTD_IN_TENANT_MAX), as native frames' (ops.c
 * kvtd_frame_charge); given back when it is freed. */
void s3d_tenant_charge(struct s3d_req *rq, uint64_t n);
void s3d_tenant_uncharge(struct s3d_req *rq, uint64_t n);
/* The request's upload no longer counts in its tenant's resv_held (its
 * reservation committed or dropped). */
void s3d_resv_release(struct s3d_req *rq);
/* Queue the answers of the finished requests at the head, in order. */
void s3d_flush_done(struct kvtd_conn *c);
/* Pause or resume parsing for c's pinned answers (s3reply.c). */
void s3d_pin_flow(struct kvtd_conn *c);
/* The request is answered: metrics, a debug line, then flush. */
void s3d_finish(struct s3d_req *rq);
/* Hold the heads behind rq (not parsed) until s3d_unhold or s3d_finish
 * (s3d.c "Order"). */
void s3d_hold_write(struct s3d_req *rq);
void s3d_unhold(struct s3d_req *rq);
/* s3d_error then s3d_finish: rq may be freed when it returns. */
/* Give back a request's walk slot (s3ops.c), if it holds one. */
void s3d_scan_release(struct s3d_req *rq);
void s3d_fail(struct s3d_req *rq, int status, const char *code, const char *msg);

/* s3ops.c: keys, buckets, object headers and the operations. */
void s3d_key(struct kvt_key *k, char tag, const void *p, size_t len);
void s3d_part_key(struct kvt_key *k, const char *upload_id, uint32_t part);
bool s3d_bucket_ok(const char *b, size_t n, bool create);
/* The bucket's namespace into rq->ns: 0, KVT_MISS (no such bucket), or an
 * error.  create: register it if new, and do not ask whether it exists. */
int s3d_bucket_ns(struct s3d_req *rq, bool create);
/* A write into rq->ns's bucket begins (s3ops.c "DeleteBucket against the
 * bucket's writes"): 0 (held until s3d_gate_leave; 0 too when rq holds
 * it already), KVT_MISS (the bucket is gone), -EBUSY (a DeleteBucket of
 * it is in progress) or -ENOMEM, nothing held.  s3d_gate_fail answers
 * such a refusal; s3d_gate_leave (s3reply.c) gives back what rq holds
 * (s3d_finish, s3d_req_free). */
int s3d_gate_write(struct s3d_req *rq);
/* A PutObject or UploadPart whose body is to come: its bucket's entry
 * held as receiving, which a DeleteBucket does not wait for, and the
 * bucket's word noted: 0, KVT_MISS, -EBUSY, -ENOMEM as s3d_gate_write.
 * s3d_gate_stored, once its body is in: held as a write (0), or -EBUSY
 * (a DeleteBucket in progress), KVT_MISS (the bucket deleted since),
 * -ESTALE (deleted and created again), -ENOMEM; 0 too when rq holds no
 * receiving entry. */
int s3d_gate_receive(struct s3d_req *rq);
int s3d_gate_stored(struct s3d_req *rq);
void s3d_gate_fail(struct s3d_req *rq, int r);
void s3d_gate_leave(struct s3d_req *rq);
/* A read's status as found (0), missing (KVT_MISS) or failed (< 0),
 * and a failed one answered 503 (s3ops.c "Reads that miss and reads that
 * fail"). */
int s3d_read_status(int st);
void s3d_store_fail(struct s3d_req *rq, int st);
/* An upload's marker read: KVT_MISS 404 NoSuchUpload, else s3d_store_fail. */
void s3d_upload_fail(struct s3d_req *rq, int r);
/* UploadPart's and UploadPartCopy's upload marker: its header read set up
 * in it (not sent), read back as the request key's (0), none or another
 * key's (KVT_MISS) or failed (< 0); asked again of a tier below if it
 * missed quietly, and that miss's presence asked (true: resubmitted). */
void s3d_upload_item(struct s3d_req *rq, struct s3d_item *it);
int s3d_upload_found(const struct s3d_req *rq, const struct kvt_req *r);
bool s3d_upload_again(struct s3d_req *rq, struct s3d_item *it);
/* The header of a new object into out (S3D_HDR_LEN + name + ctype). */
uint64_t s3d_obj_header(uint8_t *out, uint64_t len, uint32_t crc, const void *name,
			       size_t name_len, const char *ctype, uint32_t nparts);
void s3d_etag(char *out, size_t cap, uint32_t crc, uint64_t len, uint32_t nparts);
void s3d_b64(const uint8_t *p, size_t n, char *out);
/* May rq buffer n more bytes: does it fit its tenant's input share
 * (KVTD_IN_TENANT_MAX)?  (s3reply.c) */
bool s3d_share_fits(struct s3d_req *rq, uint64_t n);
#define S3D_SHARE_MSG "The tenant's requests in progress hold its share of kvtierd's memory " \
	"limit (--max-memory); retry later."
/* The PUT of an object whose bytes are in rq->buf (an overwrite). */
void s3d_put_buffered(struct s3d_req *rq, const struct kvt_key *k);
void s3d_put_ok(struct s3d_req *rq);
/* Run the operation once its body (if any) is in. */
void s3d_run(struct s3d_req *rq);
/* A library request of an S3 request completed (the table's req_done). */
void s3d_req_done(struct kvtd_loop *loop, struct kvt_req *r);

#endif

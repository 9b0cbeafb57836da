/*
 * s3http.h - the HTTP/1.1 pieces of kvtierd's S3 listener (s3d.c): a
 * bounded request-head parser that keeps every header, and an incremental
 * chunked-body decoder that serves both HTTP's Transfer-Encoding: chunked
 * and S3's aws-chunked content encoding (the same grammar; aws-chunked
 * carries a chunk signature in the chunk extension and checksums in the
 * trailer).  No allocation, no I/O; "need more bytes" is a normal result.
 *
 * Debian 12 packages no C HTTP/1.1 server-side parser that fits (llhttp
 * is shipped for Node.js only; see daemon/http.h), so this is written
 * here, strict, and fuzzed (tests/fuzz/fuzz_s3http.c).
 *
 * Threads: any; no state outside the arguments.
 */
#ifndef KVTD_S3HTTP_H
#define KVTD_S3HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3H_OK 0
#define S3H_NEED_MORE 1          /* positive: not complete yet */
#define S3H_EMALFORMED (-7301)   /* not a well-formed HTTP/1.x request */
#define S3H_ETOOBIG (-7302)      /* head (or a chunk line) past its limit */
#define S3H_ETOOMANY (-7303)     /* more headers (or trailers) than allowed */
#define S3H_EUNSUPPORTED (-7304) /* a Transfer-Encoding other than chunked */

/* Defaults the listener uses (s3d.c). */
#define S3H_HEAD_MAX (16u << 10) /* request line and headers */
#define S3H_HDRS_MAX 64          /* headers per request */
#define S3H_LINE_MAX 4096        /* a chunk-size line or a trailer line */
#define S3H_TRAILERS_MAX 8

struct s3h_hdr {
	const char *name;        /* into the buffer, not NUL-terminated */
	size_t name_len;
	const char *value;       /* leading and trailing blanks removed */
	size_t value_len;
};

struct s3h_req {
	const char *method;
	size_t method_len;
	const char *target;      /* request target as sent: path and query */
	size_t target_len;
	int minor;               /* HTTP/1.<minor> */
	struct s3h_hdr *hdrs;    /* the caller's array */
	unsigned hdr_count;
	size_t head_len;         /* bytes up to and including the blank line */
	/* From the headers: */
	int64_t content_length;  /* -1: none */
	bool chunked;            /* Transfer-Encoding: chunked */
	bool keep_alive;         /* HTTP/1.1 without "Connection: close", or
				  * 1.0 with "Connection: keep-alive" */
	bool expect_continue;    /* Expect: 100-continue */
};

/*
 * Parse a request head from buf[0, len), at most max bytes of it, keeping
 * at most hdr_max headers in hdrs.  Content-Length and Transfer-Encoding
 * together, two different Content-Lengths, a Content-Length that is not a
 * decimal number below 2^62, header folding, a line ended by a bare LF (seen
 * before the head is complete, too), and control bytes are all
 * S3H_EMALFORMED (they are how requests are smuggled).  Returns S3H_OK,
 * S3H_NEED_MORE, or an error above.
 */
int s3h_parse(const char *buf, size_t len, size_t max, struct s3h_hdr *hdrs, unsigned hdr_max,
	      struct s3h_req *req);

/*
 * s3h_parse for a head read in pieces: *scan (0 for a new head) is how much
 * of buf an earlier call on the same head searched for its end, and is set
 * to what this call searched when it returns S3H_NEED_MORE (0 on any other
 * result), so that a head of 16 KiB sent a byte at a time is searched once,
 * not once a read (a head of bare CRs: 77 us of the loop per one-byte
 * segment, before AUTH; test_hostile_http s3_head_scan).  The caller keeps
 * buf's bytes unchanged between the calls (they may move).
 */
int s3h_parse_from(const char *buf, size_t len, size_t max, struct s3h_hdr *hdrs,
		   unsigned hdr_max, struct s3h_req *req, size_t *scan);

/* The value of header name (case-insensitive), or NULL; *len its length.
 * The first one if repeated. */
const char *s3h_header(const struct s3h_req *req, const char *name, size_t *len);

/*
 * Chunked decoder.  Feed it the body's bytes in any split; each call
 * consumes some and reports at most one event:
 *
 *   S3C_EV_CHUNK    a chunk header: size, ext (the extension after ';',
 *                   e.g. "chunk-signature=..."), pointing into the decoder
 *   S3C_EV_DATA     p[0, len): chunk data, pointing into the input
 *   S3C_EV_END      the chunk's data and its CRLF are complete
 *   S3C_EV_TRAILER  name: value of one trailer line (into the decoder)
 *   S3C_EV_DONE     the last chunk and the trailer section are complete;
 *                   nothing more belongs to this body
 *   S3C_EV_NONE     the bytes were consumed, nothing to report yet
 *
 * Pointers into the decoder stay valid until the next call.  Chunk sizes
 * above size_max (and more than S3H_TRAILERS_MAX trailers) are errors.
 */
enum { S3C_EV_NONE = 0, S3C_EV_CHUNK, S3C_EV_DATA, S3C_EV_END, S3C_EV_TRAILER, S3C_EV_DONE };

struct s3c_ev {
	int kind;
	uint64_t size;           /* CHUNK */
	const char *ext;         /* CHUNK: after ';', or "" */
	size_t ext_len;
	const uint8_t *p;        /* DATA */
	size_t len;
	const char *name, *value; /* TRAILER */
	size_t name_len, value_len;
};

struct s3c_dec {
	int state;
	uint64_t left;           /* data bytes of the current chunk to come */
	uint64_t size_max;
	unsigned trailers;
	size_t line_len;
	char line[S3H_LINE_MAX];
};

void s3c_init(struct s3c_dec *d, uint64_t size_max);
/* Consume from in[0, len): bytes consumed (>= 0, possibly 0 with an event
 * at the end) with *ev set, or an S3H_ error.  After S3C_EV_DONE it
 * consumes nothing. */
int64_t s3c_next(struct s3c_dec *d, const uint8_t *in, size_t len, struct s3c_ev *ev);
/* Has the decoder seen the end of the body (S3C_EV_DONE)? */
bool s3c_done(const struct s3c_dec *d);

/* Percent-decode src into dst (cap bytes): the length, or -1 on a bad
 * escape or no room.  '+' stays '+' (S3 and SigV4 do not read it as a
 * space). */
int64_t s3h_unescape(const char *src, size_t len, char *dst, size_t cap);

/* The query parameter `name` of a request target (the part after '?'),
 * percent-decoded into out (cap bytes): its length (0 also for "name"
 * without '='), -1 absent, -2 malformed or longer than cap.  The first
 * occurrence counts. */
int64_t s3h_query(const char *target, size_t target_len, const char *name, char *out, size_t cap);

/*
 * Virtual-hosted-style addressing (doc/s3.md "Addressing"): the bucket a
 * Host header's value names under domains, a comma-separated list of
 * lowercase DNS names without a trailing dot (kvtierd's --s3-domain,
 * config.c makes it so).  The value is host[:port]; the port (digits, at
 * most 5, possibly none) and one trailing dot of the host are dropped and
 * the host compared without regard to case.  A host BUCKET.DOMAIN gives
 * BUCKET -- everything before the domain, dots included, lowercased --
 * into out (cap bytes, NUL-terminated) and returns its length (> 0); the
 * longest domain the host lies under counts.  0: the host is one of the
 * domains, or under none (an IP literal, another name), or the value is
 * empty (RFC 9112 3.2: no authority): path-style.  S3H_EMALFORMED: an
 * empty host before a port, a port that is not digits, a bracket that is
 * not an IP literal's; S3H_ETOOBIG: a value over S3H_HOST_MAX
 * bytes, or a bucket of cap bytes or more.  The bucket is not checked
 * against S3's naming rules here (s3ops.c s3d_bucket_ok does that, as for
 * a path's bucket).
 */
#define S3H_HOST_MAX 260         /* a DNS name's 253 bytes, a dot, ":65535" */
int s3h_vhost(const char *host, size_t len, const char *domains, char *out, size_t cap);

#endif

/*
 * http.h - a bounded parser for the HTTP/1.x requests kvtierd's metrics
 * listener answers (GET /metrics, GET /healthz): the request line, the
 * one header it reads (Authorization) and how many Host headers it has.  No allocation, no I/O; "need more
 * bytes" is a normal result.  Debian 12 packages no C HTTP parser that
 * fits (llhttp is shipped for Node.js only), so this stays minimal:
 * anything it does not understand is an error, answered 400.
 *
 * Threads: any; no state outside the arguments.
 */
#ifndef KVTD_HTTP_H
#define KVTD_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HTTP_OK 0
#define HTTP_NEED_MORE 1       /* positive: the head is not complete yet */
#define HTTP_EMALFORMED (-7201) /* not an HTTP/1.x request head */
#define HTTP_ETOOBIG (-7202)   /* head longer than the caller's limit */

struct http_req {
	const char *method;        /* into the buffer, not NUL-terminated */
	size_t method_len;
	const char *path;          /* the request target, query included */
	size_t path_len;
	int minor;                 /* HTTP/1.<minor> */
	const char *auth;          /* the Authorization header's value, or NULL */
	size_t auth_len;
	unsigned host_count;       /* Host headers (RFC 9112 3.2: one in HTTP/1.1) */
	size_t head_len;           /* HTTP_OK: bytes up to and including the blank line */
};

/* Parse a request head from buf[0, len), at most max bytes of it. */
int http_parse_request(const char *buf, size_t len, size_t max, struct http_req *req);

/* The same for a head read in pieces: *scan (0 for a new head) is how much
 * of buf an earlier call searched for the head's end, set to what this
 * call searched on HTTP_NEED_MORE (0 otherwise): a head is searched once,
 * not once a read.  buf's bytes stay the same between the calls. */
int http_parse_request_from(const char *buf, size_t len, size_t max, struct http_req *req,
			    size_t *scan);

/*
 * The request-line start both HTTP parsers share (this one and the S3
 * listener's, s3http.c); each checks the version and line end its own way.
 */

/* A token character (RFC 9110 tchar). */
static inline int http_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* "METHOD SP TARGET SP" at the start of buf[0, end): the method a token,
 * the target visible ASCII.  Returns the index just past the second SP, or
 * 0 if the line does not start so (*method may be set then). */
static inline size_t http_method_target(const char *buf, size_t end, const char **method,
					size_t *method_len, const char **target, size_t *target_len)
{
	size_t i = 0, s;

	while (i < end && http_tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i >= end || buf[i] != ' ')
		return 0;
	*method = buf;
	*method_len = i;
	s = ++i;
	while (i < end && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
		i++;
	if (i == s || i >= end || buf[i] != ' ')
		return 0;
	*target = buf + s;
	*target_len = i - s;
	return i + 1;
}

#endif

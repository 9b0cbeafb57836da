/*
 * http.h - a bounded parser for the HTTP/1.x requests kvtierd's metrics
 * listener answers (GET /metrics, GET /healthz): the request line and the
 * one header it reads (Authorization).  No allocation, no I/O; "need more
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
	size_t head_len;           /* HTTP_OK: bytes up to and including the blank line */
};

/* Parse a request head from buf[0, len), at most max bytes of it. */
int http_parse_request(const char *buf, size_t len, size_t max, struct http_req *req);

#endif

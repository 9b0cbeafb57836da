/*
 * httpd.c - kvtierd's HTTP listener (--metrics): GET /metrics (the page
 * metrics.c renders) and GET /healthz, as the protocol table's HTTP entry.
 *
 * One request head per connection (http.h parses it from the loop's read
 * buffer), one response queued on the connection's output, then the
 * connection closes once it is written ("Connection: close").  With
 * --metrics-token every request but GET /healthz must carry "Authorization: Bearer <token>"
 * (compared in constant time; failures throttled per address with the
 * other listeners' secrets); kvtierd.c refuses a non-loopback --metrics
 * without one.  A connection counts as unauthenticated until answered, so
 * the loop's pre-AUTH limits bound its head (HTTPD_HEAD_MAX) and its
 * unauthenticated timeout closes one that never sends it.
 *
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "http.h"
#include "kvtierd.h"

#define HTTPD_HEAD_MAX 8192
/*
 * Pages in flight.  A /metrics answer is a copy of the page (318 KB at
 * 256 namespace rows) held in the connection's output until the client
 * has read it, charged to --max-memory; a scraper with a small receive
 * window that never reads holds most of it (on loopback the kernel's
 * send buffer takes it whole).  300 such scrapes held 9 MB of the
 * budget with a 30 KB page, and enough of them would fill it and have
 * every other client's requests refused.  So a loop has at most
 * HTTPD_PAGES_LOOP pages queued and not yet written (the kernel took the
 * rest of each answer); past that a scrape is answered 503 with Retry-After (a few bytes,
 * server.metrics_refused).  Prometheus scrapes a target once an
 * interval, an HA pair twice (doc/security.md `metrics_slow`).
 */
#define HTTPD_PAGES_LOOP 16

struct httpd_conn {
	bool answered;
	bool head;        /* a HEAD: its answer's headers alone (RFC 9110 9.3.2) */
	size_t head_scan; /* of the head, bytes searched (http_parse_request_from) */
};

static int httpd_open(struct kvtd_conn *c)
{
	struct httpd_conn *hc = calloc(1, sizeof(*hc));

	if (!hc)
		return -ENOMEM;
	c->alt = hc;
	return 0;
}

static void httpd_free(struct kvtd_conn *c)
{
	free(c->alt);
	c->alt = NULL;
}

/* Queue the answer (body: owned, given); held, if not NULL, a count of
 * the loop that the answer holds one of until it is written or dropped. */
static void httpd_reply(struct kvtd_conn *c, int code, const char *reason, const char *ctype,
			char *body, size_t body_len, const char *extra, unsigned *held)
{
	struct httpd_conn *hc = c->alt;
	struct kvtd_out *o = calloc(1, sizeof(*o));
	char *head = NULL;
	int hl = -1;

	hc->answered = true;
	kvtd_conn_ready(c); /* answered: the sweep's "unauthenticated" clock stops */
	if (o)
		hl = asprintf(&head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			      "Connection: close\r\n%s\r\n", code, reason, ctype, body_len,
			      extra ? extra : "");
	if (!o || hl < 0) {
		free(o);
		free(body);
		kvtd_conn_stop_input(c);
		return;
	}
	if (hc->head) {
		/* Content-Length says what a GET would carry; no bytes follow
		 * (a HEAD /healthz was answered "ok\n" after its headers) */
		free(body);
		body = NULL;
		body_len = 0;
	}
	o->iov = o->iov_small;
	o->iov[0] = (struct iovec){ head, (size_t)hl };
	o->iov[1] = (struct iovec){ body, body_len };
	o->iov_count = body_len ? 2 : 1;
	o->hdr = (uint8_t *)head;
	o->buf = body;
	o->bytes = (uint64_t)hl + body_len;
	if (held) {
		o->held = held;
		(*held)++;
	}
	kvtd_conn_queue(c, o);
	kvtd_conn_stop_input(c);
}

/*
 * One render a loop iteration.  A page is a few hundred KB with the
 * namespace rows of stats.namespaces (318 KB at 256 rows: 2.5 ms of the
 * loop, release, 5-11 ms before metrics_ns_row looked at the last row
 * first), and a request for it is 40 bytes: 1,000 connections that each
 * asked once held another scrape (and every client of the loop) 7.7 s.
 * The scrapes a loop parses in one iteration now share the page rendered
 * for the first of them (each answer a copy: the connection owns its
 * output), so the loop renders at most once an iteration and another
 * client waits for one render at most (doc/security.md `metrics_cost`).
 * No page is older than the iteration that answers it.
 */
static int httpd_metrics_page(struct kvtd_conn *c, char **out, size_t *out_len)
{
	struct kvtd_loop *loop = c->loop;

	if (!loop->metrics_page || loop->metrics_iter != loop->iter) {
		char *b = NULL;
		size_t bl = 0;
		if (kvtd_metrics_render(loop->srv, &b, &bl) < 0)
			return -ENOMEM;
		free(loop->metrics_page);
		loop->metrics_page = b;
		loop->metrics_page_len = bl;
		loop->metrics_iter = loop->iter;
		KVTD_COUNT(loop->srv, metrics_renders, 1);
	}
	*out = malloc(loop->metrics_page_len ? loop->metrics_page_len : 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, loop->metrics_page, loop->metrics_page_len);
	*out_len = loop->metrics_page_len;
	return 0;
}

static void httpd_text(struct kvtd_conn *c, int code, const char *reason, const char *msg,
		       const char *extra)
{
	char *b = strdup(msg);
	httpd_reply(c, code, reason, "text/plain; charset=utf-8", b, b ? strlen(b) : 0, extra,
		    NULL);
}

static bool httpd_token_ok(const struct kvtd_server *srv, const struct http_req *rq)
{
	size_t tl;

	if (!srv->metrics_token)
		return true;
	tl = strlen(srv->metrics_token);
	if (!rq->auth || rq->auth_len != 7 + tl || strncasecmp(rq->auth, "Bearer ", 7) != 0)
		return false;
	return CRYPTO_memcmp(rq->auth + 7, srv->metrics_token, tl) == 0;
}

static void httpd_handle(struct kvtd_conn *c, const struct http_req *rq)
{
	struct kvtd_server *srv = c->loop->srv;
	bool get = rq->method_len == 3 && memcmp(rq->method, "GET", 3) == 0;
	bool head = rq->method_len == 4 && memcmp(rq->method, "HEAD", 4) == 0;
	size_t pl = rq->path_len;
	const char *q = memchr(rq->path, '?', pl);

	if (q)
		pl = (size_t)(q - rq->path);
	((struct httpd_conn *)c->alt)->head = head;
	kvtd_metrics_http(srv, KVTD_HTTP_REQUEST);
	/* RFC 9112 3.2: an HTTP/1.1 request has one Host header (it may be
	 * empty), HTTP/1.0 one at most; else 400, as the S3 listener
	 * answers.  Every probe and scraper sends it (kubelet's, Prometheus,
	 * curl); one without was served. */
	if (rq->host_count > 1 || (rq->minor >= 1 && rq->host_count == 0)) {
		kvtd_metrics_http(srv, KVTD_HTTP_BAD);
		KVTD_COUNT(srv, errors[KVTD_ERR_MALFORMED], 1);
		httpd_text(c, 400, "Bad Request", "a request has one Host header\n", NULL);
		return;
	}
	/* /healthz needs no token: kubelet's and load balancers' probes cannot
	 * carry a secret, and "ok" or "stopping" tells nothing (doc/deploy.md). */
	if ((get || head) && pl == 8 && memcmp(rq->path, "/healthz", 8) == 0) {
		if (atomic_load(&srv->stopping))
			httpd_text(c, 503, "Service Unavailable", "stopping\n", NULL);
		else
			httpd_text(c, 200, "OK", "ok\n", NULL);
		return;
	}
	/* Guessing the token is throttled per address with the native, RESP
	 * and S3 secrets (doc/security.md): past the limit nothing is checked
	 * this second, the right token included. */
	if (srv->metrics_token && kvtd_auth_throttled(c)) {
		kvtd_metrics_http(srv, KVTD_HTTP_DENIED);
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		kvtd_auth_failed(c);
		httpd_text(c, 503, "Service Unavailable", "too many failed authentications from "
			   "this address; retry later\n", "Retry-After: 1\r\n");
		return;
	}
	if (!httpd_token_ok(srv, rq)) {
		kvtd_metrics_http(srv, KVTD_HTTP_DENIED);
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		if (srv->metrics_token)
			kvtd_auth_failed(c);
		httpd_text(c, 401, "Unauthorized", "bearer token required\n",
			   "WWW-Authenticate: Bearer\r\n");
		return;
	}
	if (!get && !head) {
		httpd_text(c, 405, "Method Not Allowed", "GET only\n", "Allow: GET, HEAD\r\n");
		return;
	}
	if (pl == 8 && memcmp(rq->path, "/metrics", 8) == 0) {
		char *body = NULL;
		size_t bl = 0;
		if (get && c->loop->metrics_out >= HTTPD_PAGES_LOOP) {
			KVTD_COUNT(srv, metrics_refused, 1);
			httpd_text(c, 503, "Service Unavailable", "too many /metrics answers in "
				   "flight; retry later\n", "Retry-After: 1\r\n");
			return;
		}
		if (httpd_metrics_page(c, &body, &bl) < 0) {
			httpd_text(c, 500, "Internal Server Error", "out of memory\n", NULL);
			return;
		}
		httpd_reply(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, bl, NULL,
			    head ? NULL : &c->loop->metrics_out);
		return;
	}
	httpd_text(c, 404, "Not Found", "not found: try /metrics or /healthz\n", NULL);
}

static void httpd_parse(struct kvtd_conn *c)
{
	struct httpd_conn *hc = c->alt;
	struct http_req rq;
	size_t avail = c->rend - c->rstart;
	int rc;

	if (hc->answered) {
		/* Whatever follows the one request we answer is dropped. */
		c->rstart = c->rend;
		return;
	}
	if (!c->frame_start_ns)
		c->frame_start_ns = c->loop->now_ns;
	rc = http_parse_request_from((const char *)c->rbuf + c->rstart, avail, HTTPD_HEAD_MAX, &rq,
				     &hc->head_scan);
	if (rc == HTTP_NEED_MORE)
		return;
	c->frame_start_ns = 0;
	if (rc < 0) {
		kvtd_metrics_http(c->loop->srv, KVTD_HTTP_REQUEST);
		kvtd_metrics_http(c->loop->srv, KVTD_HTTP_BAD);
		KVTD_COUNT(c->loop->srv, errors[KVTD_ERR_MALFORMED], 1);
		httpd_text(c, rc == HTTP_ETOOBIG ? 431 : 400,
			   rc == HTTP_ETOOBIG ? "Request Header Fields Too Large" : "Bad Request",
			   "bad request\n", NULL);
	} else {
		httpd_handle(c, &rq);
	}
	c->rstart = c->rend;
}

/* The loop's last word: past --max-conns, a head too large, no memory. */
static void httpd_fail(struct kvtd_conn *c, int status, const char *msg)
{
	struct httpd_conn *hc = c->alt;
	char body[200];

	if (!hc || hc->answered) {
		kvtd_conn_stop_input(c);
		return;
	}
	snprintf(body, sizeof(body), "%s\n", msg);
	if (status == KVT_EBUSY)
		httpd_text(c, 503, "Service Unavailable", body, "Retry-After: 1\r\n");
	else if (status == -EMSGSIZE)
		httpd_text(c, 431, "Request Header Fields Too Large", body, NULL);
	else
		httpd_text(c, 500, "Internal Server Error", body, NULL);
}

static void httpd_req_done(struct kvtd_loop *loop, struct kvt_req *r)
{
	(void)loop;
	(void)r; /* HTTP submits no library requests */
}

const struct kvtd_proto kvtd_http_proto = {
	.name = "http",
	.preauth_buf = HTTPD_HEAD_MAX,
	.open = httpd_open,
	.parse = httpd_parse,
	.fail = httpd_fail,
	.req_done = httpd_req_done,
	.free = httpd_free,
};

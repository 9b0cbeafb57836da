/*
 * test_hostile_s3.c - the shared tier's S3 client (lib/tier/shared/shs3.c)
 * against a hostile or broken object store: a fake S3 endpoint on a
 * thread of this test (one connection at a time, "Connection: close")
 * that stores objects and lists them honestly in mode M_GOOD, and in every
 * other mode answers what the case scripts: bodies that never end, GET
 * answers that are not the object, listings that never end or lie,
 * UploadIds that would rewrite the query, answers that come a byte at a
 * time or never, redirects, HTTP/0.9.
 *
 * Usage: test_hostile_s3 [CASE]   (no CASE: every case)
 *
 * Cases: bodies (endless error, listing and multipart bodies: memory),
 * gets (a 200 longer or shorter than the object, a lying Content-Length,
 * a 206 not asked for, another block's object, a flipped value byte: a
 * counted miss, never other bytes), slow (no answer, a byte at a time,
 * endless headers, a 1 MiB header line, 100 Continue forever: the
 * timeout), redirect (3xx to another port or file://, HTTP/0.9), list
 * (ListObjectsV2 pages that never end, cycle, omit their token, or name
 * objects that are not blocks), listdate (LastModified as each store
 * sends it, and dates that are none), listsize (sizes that wrap a sum,
 * or are not plain digits), listbad (pages that break a listing's shape:
 * entries without a size or a date, not closed, a NUL, IsTruncated in an
 * entry, character references that are no character; escaped and long
 * tokens), listwhole (good entries, then a bad one: nothing deleted),
 * uploadid (an UploadId with '&', '#', ' ' in it; one of 1 MiB), store
 * (through the public API: an engine's store whose shared tier is the
 * fake gets counted misses, then its blocks again).
 *
 * What it proves (doc/security.md "A hostile or broken object store"):
 * exact bytes or a miss, within shared.s3_timeout_ms and a margin, memory
 * bounded (the peak RSS, VmHWM, reset before each attack), nothing
 * crashes (ASan, UBSan), and the client works again once the endpoint
 * answers well.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shdir.h"
#include "s3list.h"
#include "shs3.h"
#include "t.h"
#include "tstore.h"

#define TIMEOUT_MS 800     /* shared.s3_timeout_ms of every client here */
#define BOUND_MS 3000      /* an answer must come by then: the timeout and a wide margin */
#define HUGE_BODY (128u << 20) /* an "endless" body: 16 times S3_RESP_MAX */
#define RSS_BOUND_KB (48u << 10) /* peak RSS growth allowed during one attack */
#define ERR_RSS_BOUND_KB (4u << 10) /* ... an error's body (64 KiB kept; ASan's own) */
#define VLEN 10000         /* the blocks' values: two parts */
#define MAX_OBJS 16
#define MAX_LINES 64

enum mode {
	M_GOOD = 0,
	/* bodies */
	M_ERR_ENDLESS,     /* any request: 404 with a HUGE_BODY body */
	M_503_ENDLESS,     /* ... 503 (retried) */
	M_OK_ENDLESS,      /* ... 200 (a listing, a multipart initiate) */
	M_ERR_CHUNKED,     /* any request: 404, chunked, chunks of 64 KiB that never end */
	/* GET of an object */
	M_GET_LONG,        /* 200: the object, then 5000 bytes more (Content-Length says so) */
	M_GET_SHORT,       /* 200: Content-Length of the object, half of it, close */
	M_GET_CL_SHORT,    /* 200: Content-Length and body 100 bytes short */
	M_GET_206,         /* 206 for a range not asked: bytes 4096- of the object */
	M_GET_OTHER,       /* 200: another block's object, framing and CRCs valid */
	M_GET_FLIP,        /* 200: the object with a value byte flipped */
	M_GET_IGNORE_RANGE,/* a ranged GET answered 200 with the whole object */
	M_GET_RANGE_OTHER, /* a ranged GET answered 206 with other bytes of it */
	M_GET_RESET,       /* 200: half the object, then a reset (RST) */
	/* slow */
	M_SILENT,          /* read the request, answer nothing */
	M_TRICKLE_HEAD,    /* the status line a byte every 50 ms */
	M_HEADERS_FOREVER, /* a header line every 5 ms, never the end of them */
	M_HEADERS_FLOOD,   /* header lines as fast as they go, never the end of them */
	M_HUGE_HEADER,     /* one header line of 1 MiB */
	M_CONTINUE_FOREVER,/* "100 Continue" every 5 ms */
	M_TRICKLE_BODY,    /* 503 with a body a byte every 50 ms */
	/* redirect */
	M_REDIRECT_PORT,   /* 307 to another port of this host */
	M_REDIRECT_FILE,   /* 301 to file:///etc/passwd */
	M_HTTP09,          /* bytes without a status line */
	/* listing */
	M_LIST_SAME,       /* truncated, the same token forever */
	M_LIST_CYCLE,      /* truncated, tokens A, B, A, B, ... with the same keys */
	M_LIST_NOTOKEN,    /* truncated, no NextContinuationToken */
	M_LIST_EMPTY,      /* truncated, no keys, a new token every page */
	M_LIST_FOREIGN,    /* one page: path traversal, not-ours names, absurd sizes
			    * (list_size) */
	M_LIST_NESTED,     /* one page: 400,000 <Contents> opened, one closed */
	M_LIST_RAW,        /* the first page raw[0], every later one raw[1] */
	/* multipart */
	M_UPLOAD_ODD,      /* UploadId "a&partNumber=9#x y" */
	M_UPLOAD_HUGE,     /* an UploadId of 1 MiB */
};

static const char *const mode_names[] = {
	[M_GOOD] = "good",
	[M_ERR_ENDLESS] = "err_endless",
	[M_503_ENDLESS] = "503_endless",
	[M_OK_ENDLESS] = "ok_endless",
	[M_ERR_CHUNKED] = "err_chunked",
	[M_GET_LONG] = "get_long",
	[M_GET_SHORT] = "get_short",
	[M_GET_CL_SHORT] = "get_cl_short",
	[M_GET_206] = "get_206",
	[M_GET_OTHER] = "get_other",
	[M_GET_FLIP] = "get_flip",
	[M_GET_IGNORE_RANGE] = "get_ignore_range",
	[M_GET_RANGE_OTHER] = "get_range_other",
	[M_GET_RESET] = "get_reset",
	[M_SILENT] = "silent",
	[M_TRICKLE_HEAD] = "trickle_head",
	[M_HEADERS_FOREVER] = "headers_forever",
	[M_HEADERS_FLOOD] = "headers_flood",
	[M_HUGE_HEADER] = "huge_header",
	[M_CONTINUE_FOREVER] = "continue_forever",
	[M_TRICKLE_BODY] = "trickle_body",
	[M_REDIRECT_PORT] = "redirect_port",
	[M_REDIRECT_FILE] = "redirect_file",
	[M_HTTP09] = "http09",
	[M_LIST_SAME] = "list_same",
	[M_LIST_CYCLE] = "list_cycle",
	[M_LIST_NOTOKEN] = "list_notoken",
	[M_LIST_EMPTY] = "list_empty",
	[M_LIST_FOREIGN] = "list_foreign",
	[M_LIST_NESTED] = "list_nested",
	[M_LIST_RAW] = "list_raw",
	[M_UPLOAD_ODD] = "upload_odd",
	[M_UPLOAD_HUGE] = "upload_huge",
};

#define LIST_PAGES_MAX 50 /* the fake ends a never-ending listing here (for the old code) */

struct obj {
	char name[256];
	uint8_t *b;
	size_t n;
};

struct fake {
	int lfd, lfd2;              /* lfd2: the redirect target, never answered */
	uint16_t port, port2;
	pthread_t th;
	atomic_bool stop;
	pthread_mutex_t lock;       /* everything below */
	enum mode mode;
	unsigned requests, pages, accepted2;
	char lines[MAX_LINES][512]; /* request lines of DELETEs and multipart requests */
	unsigned nlines;
	struct obj objs[MAX_OBJS];
	unsigned nobj;
	char list_keys[8][6200];    /* M_LIST_*: the keys of every page (as sent: XML) */
	unsigned nlist_keys;
	char list_size[32];         /* M_LIST_FOREIGN: every entry's <Size> ("": 2^64 - 1) */
	char *raw[2];               /* M_LIST_RAW: the first page's body, every later one's */
	size_t raw_len[2];
	char list_line[16384];      /* M_LIST_RAW: the last listing's request line */
};

/* ------------------------------------------------------------------------
 * The fake endpoint
 */

static void fk_write(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
}

static bool fk_writeb(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
	return true;
}

static void fk_printf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fk_printf(int fd, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fk_write(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Wait up to ms for the client to go (or the test to stop): true if it went. */
static bool fk_gone(struct fake *f, int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN | POLLRDHUP };
	char c[256];
	if (atomic_load(&f->stop))
		return true;
	if (poll(&pf, 1, ms) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return true;
	if (pf.revents & POLLIN)
		return recv(fd, c, sizeof(c), MSG_DONTWAIT) == 0;
	return false;
}

/* The object name of a request line "GET /b/NAME?query HTTP/1.1". */
static void fk_name(const char *hdr, char *out, size_t cap)
{
	const char *p = strchr(hdr, ' '), *e;
	size_t n;
	out[0] = 0;
	if (!p || strncmp(p + 1, "/b/", 3))
		return;
	p += 4;
	e = p + strcspn(p, "? \r\n");
	n = (size_t)(e - p) < cap - 1 ? (size_t)(e - p) : cap - 1;
	memcpy(out, p, n);
	out[n] = 0;
}

static bool fk_line_has(const char *hdr, const char *s)
{
	const char *eol = strstr(hdr, "\r\n"), *hit = strstr(hdr, s);
	return hit && (!eol || hit < eol);
}

static struct obj *fk_find(struct fake *f, const char *name)
{
	for (unsigned i = 0; i < f->nobj; i++)
		if (!strcmp(f->objs[i].name, name))
			return &f->objs[i];
	return NULL;
}

static void fk_log_line(struct fake *f, const char *hdr)
{
	size_t n = strcspn(hdr, "\r\n");
	if (f->nlines == MAX_LINES)
		return;
	snprintf(f->lines[f->nlines++], sizeof(f->lines[0]), "%.*s", (int)n, hdr);
}

/* Send n bytes of filler after head (the status and headers, ending in a
 * blank line), until the client goes. */
static void fk_endless(int fd, const char *head, size_t n)
{
	static char chunk[64 << 10];
	memset(chunk, 'x', sizeof(chunk));
	fk_write(fd, head, strlen(head));
	while (n > 0) {
		size_t k = n < sizeof(chunk) ? n : sizeof(chunk);
		if (!fk_writeb(fd, chunk, k))
			return;
		n -= k;
	}
}

/* A chunked body of 64 KiB chunks that never ends, after head. */
static void fk_chunked(struct fake *f, int fd, const char *head)
{
	static char chunk[(64 << 10) + 16];
	int n = snprintf(chunk, sizeof(chunk), "10000\r\n");
	memset(chunk + n, 'x', 64 << 10);
	memcpy(chunk + n + (64 << 10), "\r\n", 2);
	fk_write(fd, head, strlen(head));
	while (!atomic_load(&f->stop) && fk_writeb(fd, chunk, (size_t)n + (64 << 10) + 2))
		;
}

/* A listing page of f->list_keys; token: the NextContinuationToken (NULL: none). */
static void fk_list_page(struct fake *f, int fd, bool truncated, const char *token, bool keys,
			 const char *size, const char *date)
{
	size_t cap = 256 << 10;
	char *x = malloc(cap);
	size_t o = 0;
	o += (size_t)snprintf(x + o, cap - o, "<?xml version=\"1.0\"?><ListBucketResult>"
			      "<Name>b</Name><IsTruncated>%s</IsTruncated>",
			      truncated ? "true" : "false");
	if (token)
		o += (size_t)snprintf(x + o, cap - o, "<NextContinuationToken>%s"
				      "</NextContinuationToken>", token);
	for (unsigned i = 0; keys && i < f->nlist_keys; i++)
		o += (size_t)snprintf(x + o, cap - o,
				      "<Contents><Key>%s</Key><LastModified>%s</LastModified>"
				      "<ETag>\"e\"</ETag><Size>%s</Size></Contents>",
				      f->list_keys[i], date, size);
	o += (size_t)snprintf(x + o, cap - o, "</ListBucketResult>");
	fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", o);
	fk_write(fd, x, o);
	free(x);
}

/* The honest store: PUT, GET (ranges), HEAD, DELETE, ListObjectsV2 in one
 * page, multipart (the parts are taken and dropped: no test reads a
 * multipart object back). */
static void fk_good(struct fake *f, int fd, const char *hdr, uint8_t *body, size_t body_len,
		    const char *upload_id)
{
	char name[256];
	struct obj *o;
	fk_name(hdr, name, sizeof(name));
	pthread_mutex_lock(&f->lock);
	o = fk_find(f, name);
	if (!strncmp(hdr, "POST ", 5) && fk_line_has(hdr, "?uploads")) {
		static const char a[] = "<InitiateMultipartUploadResult><UploadId>",
				  z[] = "</UploadId></InitiateMultipartUploadResult>";
		fk_log_line(f, hdr);
		pthread_mutex_unlock(&f->lock);
		free(body);
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  strlen(a) + strlen(upload_id) + strlen(z));
		fk_write(fd, a, strlen(a));
		fk_write(fd, upload_id, strlen(upload_id));
		fk_write(fd, z, strlen(z));
		return;
	}
	if (fk_line_has(hdr, "uploadId=")) {
		fk_log_line(f, hdr);
		pthread_mutex_unlock(&f->lock);
		free(body);
		if (!strncmp(hdr, "PUT ", 4))
			fk_printf(fd, "HTTP/1.1 200 OK\r\nETag: \"p\"\r\nContent-Length: 0\r\n"
				  "Connection: close\r\n\r\n");
		else if (!strncmp(hdr, "POST ", 5))
			fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: 26\r\nConnection: close"
				  "\r\n\r\n<CompleteMultipartUpload/>");
		else
			fk_printf(fd, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
		return;
	}
	if (!strncmp(hdr, "PUT ", 4)) {
		bool exists = o != NULL;
		if (!o && f->nobj < MAX_OBJS)
			o = &f->objs[f->nobj++];
		if (o && !exists) {
			snprintf(o->name, sizeof(o->name), "%s", name);
			o->b = body;
			o->n = body_len;
			body = NULL;
		}
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 %s\r\nETag: \"e\"\r\nContent-Length: 0\r\n"
			  "Connection: close\r\n\r\n", exists ? "412 Exists" : "200 OK");
		free(body);
		return;
	}
	free(body);
	if (!strncmp(hdr, "DELETE ", 7)) {
		fk_log_line(f, hdr);
		if (o) {
			free(o->b);
			*o = f->objs[--f->nobj];
		}
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
		return;
	}
	if (!strncmp(hdr, "HEAD /b ", 8) || !strncmp(hdr, "HEAD /b/ ", 9)) { /* the bucket */
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		return;
	}
	if (!strncmp(hdr, "GET /b?", 7)) { /* a listing: every object, one page */
		char *x = malloc(64 << 10);
		size_t n = 0;
		n += (size_t)sprintf(x, "<ListBucketResult><IsTruncated>false</IsTruncated>");
		for (unsigned i = 0; i < f->nobj; i++)
			n += (size_t)sprintf(x + n, "<Contents><Key>%s</Key><LastModified>"
					     "2026-12-04T10:00:00.000Z</LastModified><Size>%zu"
					     "</Size></Contents>", f->objs[i].name, f->objs[i].n);
		n += (size_t)sprintf(x + n, "</ListBucketResult>");
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n);
		fk_write(fd, x, n);
		free(x);
		return;
	}
	if (!o) {
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close"
			  "\r\n\r\n");
		return;
	}
	const char *rg = strcasestr(hdr, "\r\nrange: bytes=");
	size_t a = 0, b = o->n ? o->n - 1 : 0;
	if (rg) {
		a = strtoull(rg + 15, NULL, 10);
		b = strtoull(strchr(rg + 15, '-') + 1, NULL, 10);
		if (b >= o->n)
			b = o->n - 1;
	}
	fk_printf(fd, "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		  rg ? "206 Partial" : "200 OK", b - a + 1);
	if (strncmp(hdr, "HEAD ", 5))
		fk_write(fd, o->b + a, b - a + 1);
	pthread_mutex_unlock(&f->lock);
}

/* A GET of an object in one of the M_GET_* modes. */
static void fk_get_lie(struct fake *f, int fd, const char *hdr, enum mode m)
{
	char name[256];
	struct obj *o, *other = NULL;
	uint8_t *b;
	size_t n;
	fk_name(hdr, name, sizeof(name));
	pthread_mutex_lock(&f->lock);
	o = fk_find(f, name);
	for (unsigned i = 0; i < f->nobj; i++)
		if (&f->objs[i] != o)
			other = &f->objs[i];
	if (!o || !other) {
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 404 No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		return;
	}
	if (m == M_GET_OTHER)
		o = other;
	n = o->n;
	b = malloc(n + 5000);
	memcpy(b, o->b, n);
	memset(b + n, 0, 5000);
	pthread_mutex_unlock(&f->lock);
	bool ranged = strcasestr(hdr, "\r\nrange:") != NULL;
	switch (m) {
	case M_GET_LONG:
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n + 5000);
		fk_write(fd, b, n + 5000);
		break;
	case M_GET_RESET: {
		struct linger lg = { 1, 0 }; /* the close in fk_main sends RST */
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
		/* fall through */
	case M_GET_SHORT:
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n);
		fk_write(fd, b, n / 2);
		break;
	case M_GET_CL_SHORT:
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n - 100);
		fk_write(fd, b, n - 100);
		break;
	case M_GET_206:
		fk_printf(fd, "HTTP/1.1 206 Partial\r\nContent-Range: bytes 4096-%zu/%zu\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n\r\n", n - 1, n, n - 4096);
		fk_write(fd, b + 4096, n - 4096);
		break;
	case M_GET_FLIP:
		b[4096 + 7] ^= 0x20;
		/* fall through */
	case M_GET_OTHER:
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n);
		fk_write(fd, b, n);
		break;
	case M_GET_IGNORE_RANGE:
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  n);
		fk_write(fd, b, n);
		break;
	case M_GET_RANGE_OTHER: { /* the header page honestly, any other range 8 bytes off */
		const char *rg = strcasestr(hdr, "\r\nrange: bytes=");
		size_t a = rg ? strtoull(rg + 15, NULL, 10) : 0, e = rg ? n : n;
		if (rg)
			e = strtoull(strchr(rg + 15, '-') + 1, NULL, 10) + 1;
		if (e > n)
			e = n;
		if (a > 0 && ranged)
			a -= 8, e -= 8;
		fk_printf(fd, "HTTP/1.1 206 Partial\r\nContent-Length: %zu\r\nConnection: close"
			  "\r\n\r\n", e - a);
		fk_write(fd, b + a, e - a);
		break;
	}
	default:
		break;
	}
	free(b);
}

static void fk_slow(struct fake *f, int fd, enum mode m)
{
	static const char st[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
	static char big[(1 << 20) + 64];
	switch (m) {
	case M_SILENT:
		while (!fk_gone(f, fd, 50))
			;
		break;
	case M_TRICKLE_HEAD:
		for (size_t i = 0; !fk_gone(f, fd, 50); i = (i + 1) % (sizeof(st) - 1))
			if (!fk_writeb(fd, st + i, 1))
				break;
		break;
	case M_HEADERS_FOREVER:
		fk_printf(fd, "HTTP/1.1 200 OK\r\n");
		while (!fk_gone(f, fd, 5) && fk_writeb(fd, "X-Pad: aaaaaaaaaaaaaaaa\r\n", 25))
			;
		break;
	case M_HEADERS_FLOOD: {
		static char lines[64 << 10];
		for (size_t i = 0; i + 32 <= sizeof(lines); i += 32)
			memcpy(lines + i, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaa\r\n", 32);
		fk_printf(fd, "HTTP/1.1 200 OK\r\n");
		while (!atomic_load(&f->stop) && fk_writeb(fd, lines, sizeof(lines)))
			;
		break;
	}
	case M_HUGE_HEADER:
		memcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ", 24);
		memset(big + 24, 'a', sizeof(big) - 24);
		fk_writeb(fd, big, sizeof(big));
		while (!fk_gone(f, fd, 50))
			;
		break;
	case M_CONTINUE_FOREVER:
		while (!fk_gone(f, fd, 5) && fk_writeb(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			;
		break;
	case M_TRICKLE_BODY:
		fk_printf(fd, "HTTP/1.1 503 Slow\r\nContent-Length: 100000\r\n\r\n");
		while (!fk_gone(f, fd, 50) && fk_writeb(fd, "x", 1))
			;
		break;
	default:
		break;
	}
}

static void fk_list(struct fake *f, int fd, const char *hdr, enum mode m)
{
	char tok[32], size[32];
	unsigned page;
	pthread_mutex_lock(&f->lock);
	page = f->pages++;
	snprintf(size, sizeof(size), "%s", f->list_size[0] ? f->list_size : "18446744073709551615");
	pthread_mutex_unlock(&f->lock);
	bool more = page + 1 < LIST_PAGES_MAX;
	(void)hdr;
	switch (m) {
	case M_LIST_SAME:
		fk_list_page(f, fd, more, "same", true, "10000", "2026-12-04T10:00:00.000Z");
		break;
	case M_LIST_CYCLE:
		fk_list_page(f, fd, more, page % 2 ? "A" : "B", true, "10000",
			     "2026-12-04T10:00:00.000Z");
		break;
	case M_LIST_NOTOKEN:
		fk_list_page(f, fd, true, NULL, true, "10000", "2026-12-04T10:00:00.000Z");
		break;
	case M_LIST_EMPTY:
		snprintf(tok, sizeof(tok), "t%u", page);
		fk_list_page(f, fd, more, tok, false, "0", "");
		break;
	case M_LIST_FOREIGN:
		fk_list_page(f, fd, false, NULL, true, size, "2026-12-04T10:00:00.000Z");
		break;
	case M_LIST_RAW: {
		unsigned i = page > 0;
		char *x;
		size_t n;
		pthread_mutex_lock(&f->lock);
		snprintf(f->list_line, sizeof(f->list_line), "%.*s", (int)strcspn(hdr, "\r\n"),
			 hdr);
		n = f->raw_len[i];
		x = malloc(n + 1);
		memcpy(x, f->raw[i] ? f->raw[i] : "", n);
		pthread_mutex_unlock(&f->lock);
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close"
			  "\r\n\r\n", n);
		fk_write(fd, x, n);
		free(x);
		break;
	}
	case M_LIST_NESTED: {
		size_t cap = (400000 * 10) + sizeof(f->list_keys[0]) + 1024, o = 0;
		char *x = malloc(cap);
		o += (size_t)sprintf(x, "<ListBucketResult><IsTruncated>false</IsTruncated>");
		for (unsigned i = 0; i < 400000; i++, o += 10)
			memcpy(x + o, "<Contents>", 10);
		o += (size_t)snprintf(x + o, cap - o, "<Key>%s</Key><LastModified>"
				      "2026-12-04T10:00:00.000Z</LastModified><Size>1</Size>"
				      "</Contents></ListBucketResult>", f->list_keys[0]);
		fk_printf(fd, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close"
			  "\r\n\r\n", o);
		fk_write(fd, x, o);
		free(x);
		break;
	}
	default:
		break;
	}
}

static void *fk_main(void *arg)
{
	struct fake *f = arg;
	char *upload_huge = malloc((1 << 20) + 1);
	memset(upload_huge, 'u', 1 << 20);
	upload_huge[1 << 20] = 0;
	while (!atomic_load(&f->stop)) {
		struct pollfd pf[2] = { { .fd = f->lfd, .events = POLLIN },
					{ .fd = f->lfd2, .events = POLLIN } };
		static char hdr[1 << 16];
		uint8_t *body = NULL;
		size_t body_len = 0;
		enum mode m;
		int fd;
		if (poll(pf, 2, 50) <= 0)
			continue;
		if (pf[1].revents & POLLIN) {
			fd = accept(f->lfd2, NULL, NULL);
			pthread_mutex_lock(&f->lock);
			f->accepted2++;
			pthread_mutex_unlock(&f->lock);
			if (fd >= 0)
				close(fd);
			continue;
		}
		fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (!t_http_read(fd, hdr, sizeof(hdr), &body, &body_len)) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&f->lock);
		f->requests++;
		m = f->mode;
		pthread_mutex_unlock(&f->lock);
		switch (m) {
		case M_GOOD:
			fk_good(f, fd, hdr, body, body_len, "u-1");
			body = NULL;
			break;
		case M_ERR_ENDLESS:
			fk_endless(fd, "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n",
				   HUGE_BODY);
			break;
		case M_503_ENDLESS:
			fk_endless(fd, "HTTP/1.1 503 SlowDown\r\nConnection: close\r\n\r\n",
				   HUGE_BODY);
			break;
		case M_ERR_CHUNKED:
			fk_chunked(f, fd, "HTTP/1.1 404 Not Found\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n");
			break;
		case M_OK_ENDLESS:
			fk_endless(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
				   "<ListBucketResult>", HUGE_BODY);
			break;
		case M_GET_LONG: case M_GET_SHORT: case M_GET_CL_SHORT: case M_GET_206:
		case M_GET_OTHER: case M_GET_FLIP: case M_GET_IGNORE_RANGE: case M_GET_RANGE_OTHER:
		case M_GET_RESET:
			if (!strncmp(hdr, "GET ", 4)) {
				fk_get_lie(f, fd, hdr, m);
			} else { /* a HEAD, a DELETE: answered well */
				fk_good(f, fd, hdr, body, body_len, "u-1");
				body = NULL;
			}
			break;
		case M_SILENT: case M_TRICKLE_HEAD: case M_HEADERS_FOREVER: case M_HEADERS_FLOOD:
		case M_HUGE_HEADER:
		case M_CONTINUE_FOREVER: case M_TRICKLE_BODY:
			fk_slow(f, fd, m);
			break;
		case M_REDIRECT_PORT:
			fk_printf(fd, "HTTP/1.1 307 Temporary Redirect\r\nLocation: "
				  "http://127.0.0.1:%u/b/x\r\nContent-Length: 0\r\n"
				  "Connection: close\r\n\r\n", f->port2);
			break;
		case M_REDIRECT_FILE:
			fk_printf(fd, "HTTP/1.1 301 Moved\r\nLocation: file:///etc/passwd\r\n"
				  "Content-Length: 0\r\nConnection: close\r\n\r\n");
			break;
		case M_HTTP09:
			fk_printf(fd, "kvt1 objects are here, honest\n");
			break;
		case M_LIST_SAME: case M_LIST_CYCLE: case M_LIST_NOTOKEN: case M_LIST_EMPTY:
		case M_LIST_FOREIGN: case M_LIST_NESTED: case M_LIST_RAW:
			if (!strncmp(hdr, "GET /b?", 7)) {
				fk_list(f, fd, hdr, m);
			} else {
				fk_good(f, fd, hdr, body, body_len, "u-1");
				body = NULL;
			}
			break;
		case M_UPLOAD_ODD:
			fk_good(f, fd, hdr, body, body_len, "a&partNumber=9#x y");
			body = NULL;
			break;
		case M_UPLOAD_HUGE:
			fk_good(f, fd, hdr, body, body_len, upload_huge);
			body = NULL;
			break;
		}
		free(body);
		close(fd);
	}
	free(upload_huge);
	return NULL;
}

static int fk_listen(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_EQ_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_EQ_INT(listen(fd, 16), 0);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void fk_start(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	f->lfd = fk_listen(&f->port);
	f->lfd2 = fk_listen(&f->port2);
	T_EQ_INT(pthread_create(&f->th, NULL, fk_main, f), 0);
}

static void fk_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
	close(f->lfd2);
	for (unsigned i = 0; i < f->nobj; i++)
		free(f->objs[i].b);
	free(f->raw[0]);
	free(f->raw[1]);
	pthread_mutex_destroy(&f->lock);
}

static void fk_mode(struct fake *f, enum mode m)
{
	pthread_mutex_lock(&f->lock);
	f->mode = m;
	f->pages = 0;
	f->nlines = 0;
	pthread_mutex_unlock(&f->lock);
}

static unsigned fk_get(struct fake *f, const unsigned *c)
{
	unsigned v;
	pthread_mutex_lock(&f->lock);
	v = *c;
	pthread_mutex_unlock(&f->lock);
	return v;
}

/* ------------------------------------------------------------------------
 * The client side
 */

static struct kvt_mem mem;

static struct shs3 *open_s3(struct fake *f, unsigned attempts)
{
	static char ep[64];
	struct shs3_creds c;
	struct shs3_config cfg = { .endpoint = ep, .bucket = "b", .conns = 2,
				   .timeout_ms = TIMEOUT_MS, .part_size = UINT64_C(5) << 20,
				   .attempts = attempts, .retry_base_ms = 10 };
	struct shs3 *s3 = NULL;
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", f->port);
	memset(&c, 0, sizeof(c));
	strcpy(c.access_key, "AKIDEXAMPLE");
	strcpy(c.secret_key, "secret");
	strcpy(c.region, "us-east-1");
	T_OK(shs3_open(&s3, &cfg, &c, &mem, NULL));
	return s3;
}

static const uint8_t NS[32] = { 0x5a, 1, 2, 3 };

static struct kvt_key key_of(uint64_t i)
{
	struct kvt_key k = { .len = 32 };
	memset(k.bytes, 0, sizeof(k.bytes));
	memcpy(k.bytes, &i, sizeof(i));
	k.bytes[31] = 0x77;
	return k;
}

/* Write block i: VLEN bytes of t_fill(.., i) in two parts. */
static void put_block(struct shs3 *s3, uint64_t i)
{
	uint8_t *v = malloc(VLEN);
	uint64_t lens[2] = { 4000, VLEN - 4000 };
	uint32_t crcs[2];
	struct iovec io = { v, VLEN };
	struct kvt_key k = key_of(i);
	t_fill(v, VLEN, i);
	crcs[0] = kvt_crc32c(0, v, 4000);
	crcs[1] = kvt_crc32c(0, v + 4000, VLEN - 4000);
	T_OK(shs3_blk_write(s3, NS, &k, &io, 1, VLEN, 2, lens, crcs, 0));
	free(v);
}

struct rd {
	uint8_t *buf;
	uint64_t part_lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct shdir_hdr h;
};

static int rd_reserve(void *ctx, const struct shdir_hdr *h, struct iovec *view, unsigned *vc)
{
	struct rd *r = ctx;
	if (h->value_len > (64u << 20))
		return -ENOMEM;
	free(r->buf);
	r->buf = malloc(h->value_len ? h->value_len : 1);
	view[0] = (struct iovec){ r->buf, h->value_len };
	*vc = 1;
	return KVT_OK;
}

/* Read block i: KVT_OK only with its exact bytes (asserted), else the code. */
static int get_block(struct shs3 *s3, uint64_t i)
{
	struct rd r = { 0 };
	struct kvt_key k = key_of(i);
	uint8_t *want = malloc(VLEN);
	int ret;
	r.h.part_lens = r.part_lens;
	r.h.crcs = r.crcs;
	ret = shs3_blk_read(s3, NS, &k, &r.h, rd_reserve, &r);
	if (ret == KVT_OK) {
		t_fill(want, VLEN, i);
		T_EQ_U64(r.h.value_len, VLEN);
		T_EQ_MEM(r.buf, want, VLEN);
	}
	free(want);
	free(r.buf);
	return ret;
}

/* Read part 1 of block i: its length only with its exact bytes. */
static int64_t get_part(struct shs3 *s3, uint64_t i)
{
	uint8_t *buf = malloc(VLEN), *want = malloc(VLEN);
	uint64_t pl[KVT_PARTS_MAX];
	uint32_t cr[KVT_PARTS_MAX];
	struct shdir_hdr h = { .part_lens = pl, .crcs = cr };
	struct iovec io = { buf, VLEN };
	struct kvt_key k = key_of(i);
	int64_t ret = shs3_blk_read_part(s3, NS, &k, 1, &io, 1, &h);
	if (ret >= 0) {
		t_fill(want, VLEN, i);
		T_EQ_INT(ret, VLEN - 4000);
		T_EQ_MEM(buf, want + 4000, VLEN - 4000);
	}
	free(buf);
	free(want);
	return ret;
}

/* Peak RSS in KiB (VmHWM), after resetting it when the kernel lets us. */
static long hwm_kb(bool reset)
{
	char line[256];
	long v = -1;
	FILE *f;
	if (reset) {
		int fd = open("/proc/self/clear_refs", O_WRONLY);
		if (fd >= 0) {
			/* Without a reset, the growth is measured from here. */
			if (write(fd, "5", 1) < 0) {
			}
			close(fd);
		}
	}
	f = fopen("/proc/self/status", "r");
	T_ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			v = strtol(line + 6, NULL, 10);
	fclose(f);
	return v;
}

/* The client works again: a fresh block written and read byte-exact. */
static void works_again(struct fake *f, struct shs3 *s3, uint64_t i)
{
	fk_mode(f, M_GOOD);
	put_block(s3, i);
	T_RC(get_block(s3, i), KVT_OK);
	T_EQ_INT(get_part(s3, i), VLEN - 4000);
}

static long last_dh_kb; /* the last ATTACK's peak RSS growth */

#define ST(s3, x) atomic_load(&shs3_stats(s3)->x)
#define BL(s3, x) atomic_load(&shs3_blk_stats(s3)->x)

/* Run call under mode m: its result, with the time and peak RSS growth printed and bounded. */
#define ATTACK(f, m, call, rc)                                                          \
	do {                                                                           \
		long h0_ = hwm_kb(true);                                               \
		uint64_t t0_ = t_now_ms();                                             \
		fk_mode(f, m);                                                         \
		rc = (call);                                                           \
		uint64_t ms_ = t_now_ms() - t0_;                                       \
		long dh_ = hwm_kb(false) - h0_;                                        \
		last_dh_kb = dh_;                                                      \
		fk_mode(f, M_GOOD);                                                    \
		printf("%-16s %-36s rc %-6lld %5llu ms  peak RSS +%ld KiB\n",        \
		       mode_names[m], #call, (long long)(rc), (unsigned long long)ms_, \
		       dh_);                                                           \
		fflush(stdout);                                                        \
		T_LE_INT((long long)ms_, BOUND_MS);                                    \
		T_LE_INT((long long)dh_, (long long)RSS_BOUND_KB);                     \
	} while (0)

/* ------------------------------------------------------------------------
 * Cases
 */

static void case_bodies(struct fake *f)
{
	struct shs3 *s3 = open_s3(f, 3);
	struct kvt_shared_gc_result res;
	uint8_t *big = calloc(1, 6u << 20);
	int64_t rc;

	put_block(s3, 1);
	/* A block's GET answered 404 / 503 with an endless body: a miss or
	 * an error, and at most S3_ERR_BODY_MAX of it held. */
	ATTACK(f, M_ERR_ENDLESS, get_block(s3, 1), rc);
	T_ASSERT(rc == KVT_MISS || rc < 0);
	T_LE_INT(last_dh_kb, ERR_RSS_BOUND_KB);
	ATTACK(f, M_503_ENDLESS, get_block(s3, 1), rc);
	T_ASSERT(rc < 0 && rc != KVT_MISS);
	T_LE_INT(last_dh_kb, ERR_RSS_BOUND_KB);
	ATTACK(f, M_ERR_CHUNKED, get_block(s3, 1), rc);
	T_ASSERT(rc == KVT_MISS || rc < 0);
	T_LE_INT(last_dh_kb, ERR_RSS_BOUND_KB);
	ATTACK(f, M_ERR_ENDLESS, shs3_head(s3, "x", NULL), rc);
	T_ASSERT(rc == KVT_MISS || rc < 0);
	/* A listing of 128 MiB (gc, clear): at most S3_RESP_MAX held. */
	ATTACK(f, M_OK_ENDLESS, shs3_gc(s3, 1, 0, &res), rc);
	T_RC(rc, -EIO);
	ATTACK(f, M_OK_ENDLESS, shs3_blk_clear(s3, NS), rc);
	T_RC(rc, -EIO);
	/* A multipart initiate answered with 128 MiB. */
	ATTACK(f, M_OK_ENDLESS, shs3_put(s3, "big", big, 6u << 20), rc);
	T_RC(rc, -EIO);
	free(big);
	works_again(f, s3, 2);
	shs3_close(s3);
}

static void case_gets(struct fake *f)
{
	struct shs3 *s3 = open_s3(f, 3);
	static const enum mode whole[] = { M_GET_LONG, M_GET_SHORT, M_GET_CL_SHORT, M_GET_206,
					   M_GET_OTHER, M_GET_FLIP, M_GET_RESET };
	uint64_t c0;
	int64_t rc;

	put_block(s3, 1);
	put_block(s3, 2); /* the "other" block */
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		c0 = BL(s3, corrupt) + BL(s3, read_errors);
		ATTACK(f, whole[i], get_block(s3, 1), rc);
		T_ASSERT(rc != KVT_OK); /* get_block asserts the bytes if it were */
		T_EQ_U64(BL(s3, corrupt) + BL(s3, read_errors), c0 + 1); /* counted */
	}
	/* One part by ranged GETs. */
	static const enum mode part[] = { M_GET_IGNORE_RANGE, M_GET_RANGE_OTHER, M_GET_OTHER,
					  M_GET_FLIP, M_GET_SHORT, M_GET_LONG, M_GET_RESET };
	for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++) {
		c0 = BL(s3, corrupt) + BL(s3, read_errors);
		ATTACK(f, part[i], get_part(s3, 1), rc);
		T_ASSERT(rc < 0);
		T_EQ_U64(BL(s3, corrupt) + BL(s3, read_errors), c0 + 1);
	}
	T_RC(get_block(s3, 1), KVT_OK);
	/* A name whose path does not fit the request is refused, never cut
	 * short (a shorter path names another object): nothing is sent. */
	{
		static char name[1100], buf[64];
		unsigned r0 = f->requests;
		memset(name, 'a', sizeof(name) - 1);
		T_RC(shs3_head(s3, name, NULL), -ENAMETOOLONG);
		memset(name, ' ', 400); /* 1,200 bytes escaped */
		name[400] = 0;
		T_RC(shs3_get(s3, name, 0, 0, buf, sizeof(buf)), -ENAMETOOLONG);
		T_EQ_INT(f->requests, r0);
	}
	works_again(f, s3, 3);
	shs3_close(s3);
}

static void case_slow(struct fake *f)
{
	static const enum mode ms[] = { M_SILENT, M_TRICKLE_HEAD, M_HEADERS_FOREVER,
					M_HEADERS_FLOOD, M_HUGE_HEADER, M_CONTINUE_FOREVER,
					M_TRICKLE_BODY };
	struct shs3 *s3 = open_s3(f, 3);
	int64_t rc;

	put_block(s3, 1);
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		ATTACK(f, ms[i], get_block(s3, 1), rc);
		T_ASSERT(rc < 0 && rc != KVT_MISS);
		ATTACK(f, ms[i], shs3_head(s3, "x", NULL), rc);
		T_ASSERT(rc < 0 && rc != KVT_MISS);
	}
	works_again(f, s3, 2);
	shs3_close(s3);
}

static void case_redirect(struct fake *f)
{
	struct shs3 *s3 = open_s3(f, 3);
	uint8_t buf[100];
	int64_t rc;

	put_block(s3, 1);
	ATTACK(f, M_REDIRECT_PORT, get_block(s3, 1), rc);
	T_RC(rc, -EIO);
	ATTACK(f, M_REDIRECT_PORT, shs3_get(s3, "x", 0, 0, buf, sizeof(buf)), rc);
	T_RC(rc, -EIO);
	ATTACK(f, M_REDIRECT_FILE, shs3_get(s3, "x", 0, 0, buf, sizeof(buf)), rc);
	T_RC(rc, -EIO);
	ATTACK(f, M_HTTP09, get_block(s3, 1), rc);
	T_RC(rc, -EIO);
	usleep(100 * 1000);
	T_EQ_INT(fk_get(f, &f->accepted2), 0); /* never followed */
	works_again(f, s3, 2);
	shs3_close(s3);
}

static void set_list_keys(struct fake *f, const char *const *keys, unsigned n)
{
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < n; i++)
		snprintf(f->list_keys[i], sizeof(f->list_keys[i]), "%s", keys[i]);
	f->nlist_keys = n;
	pthread_mutex_unlock(&f->lock);
}

static void set_list_size(struct fake *f, const char *size)
{
	pthread_mutex_lock(&f->lock);
	snprintf(f->list_size, sizeof(f->list_size), "%s", size);
	pthread_mutex_unlock(&f->lock);
}

/* A block's object name for block i (shdir_relpath). */
static void block_name(uint64_t i, char *out)
{
	struct kvt_key k = key_of(i);
	T_OK(shdir_relpath(NS, &k, out));
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The object names of blocks 1 to n, in S3's (byte) order. */
static void block_names(char (*b)[SHDIR_RELPATH_MAX], unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		block_name(i + 1, b[i]);
	qsort(b, n, sizeof(b[0]), name_cmp);
}

static void case_list(struct fake *f)
{
	static const enum mode loops[] = { M_LIST_SAME, M_LIST_CYCLE, M_LIST_NOTOKEN,
					   M_LIST_EMPTY };
	struct shs3 *s3 = open_s3(f, 3);
	struct kvt_shared_gc_result res;
	char b[2][SHDIR_RELPATH_MAX], *b1 = b[0], *b2 = b[1], ns[80], t1[300], t2[300];
	int64_t rc;

	block_names(b, 2);
	{
		const char *keys[] = { b1, b2 };
		set_list_keys(f, keys, 2);
	}
	/* Listings that would never end, or end early without saying so:
	 * -EIO on the page that breaks S3's promise (LIST_PAGES_MAX pages,
	 * then an end, before: the fake's stop for the old code). */
	for (size_t i = 0; i < sizeof(loops) / sizeof(loops[0]); i++) {
		ATTACK(f, loops[i], shs3_gc(s3, 0, 0, &res), rc);
		T_RC(rc, -EIO);
		T_LE_INT(fk_get(f, &f->pages), 2);
		ATTACK(f, loops[i], shs3_blk_clear(s3, NS), rc);
		T_RC(rc, -EIO);
		T_LE_INT(fk_get(f, &f->pages), 2);
	}
	/* Names that are not blocks, under the prefix: path traversal, a
	 * name of ours with more after it, garbage; a size of 2^64 - 1.
	 * clear removes the blocks and nothing else. */
	memcpy(ns, b1, 69);
	ns[69] = 0; /* "kvt1/<ns hex>" */
	snprintf(t1, sizeof(t1), "%s/../../../other-bucket/precious", ns);
	snprintf(t2, sizeof(t2), "%s/zz/not-ours", ns);
	{
		const char *keys[] = { t1, b1, b2, t2 };
		set_list_keys(f, keys, 4);
	}
	pthread_mutex_lock(&f->lock);
	f->mode = M_LIST_FOREIGN;
	f->nlines = 0;
	pthread_mutex_unlock(&f->lock);
	T_RC(shs3_blk_clear(s3, NS), 2);
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nlines; i++) {
		printf("  deleted: %s\n", f->lines[i]);
		T_ASSERT(!strstr(f->lines[i], "..") && !strstr(f->lines[i], "not-ours"));
	}
	T_EQ_INT(f->nlines, 2);
	pthread_mutex_unlock(&f->lock);
	set_list_size(f, "10000"); /* two of 2^64 - 1 are no bucket's: case_listsize */
	fk_mode(f, M_LIST_FOREIGN);
	T_OK(shs3_gc(s3, 0, 0, &res));
	T_EQ_U64(res.files, 2); /* the blocks only */
	T_EQ_U64(res.bytes, 20000);
	set_list_size(f, "");
	fk_mode(f, M_GOOD);
	/* Keys are ordered by their bytes, not their XML escapes: "x<" comes
	 * after "x0" though "x&lt;" sorts before it. */
	{
		const char *keys[] = { "kvt1/x0", "kvt1/x&lt;", "kvt1/x&#x7a;" };
		set_list_keys(f, keys, 3);
	}
	fk_mode(f, M_LIST_FOREIGN);
	T_OK(shs3_gc(s3, 0, 0, &res));
	T_EQ_U64(res.files, 0);
	/* A key of S3's longest, 1,024 bytes, 1,019 of them '&' (6,100 as
	 * sent): taken; one byte more is no S3 key. */
	pthread_mutex_lock(&f->lock);
	strcpy(f->list_keys[0], "kvt1/");
	for (unsigned i = 0; i < 1019; i++)
		strcat(f->list_keys[0], "&amp;");
	f->nlist_keys = 1;
	pthread_mutex_unlock(&f->lock);
	T_OK(shs3_gc(s3, 0, 0, &res));
	pthread_mutex_lock(&f->lock);
	strcat(f->list_keys[0], "x");
	pthread_mutex_unlock(&f->lock);
	T_RC(shs3_gc(s3, 0, 0, &res), -EIO);
	fk_mode(f, M_GOOD);
	/* A key out of order, or not under the prefix. */
	{
		const char *keys[] = { b2, b1 };
		set_list_keys(f, keys, 2);
	}
	fk_mode(f, M_LIST_FOREIGN);
	T_RC(shs3_gc(s3, 0, 0, &res), -EIO);
	{
		const char *keys[] = { "zzz/x" };
		set_list_keys(f, keys, 1);
	}
	T_RC(shs3_gc(s3, 0, 0, &res), -EIO);
	/* 400,000 entries opened, one closed: the page scanned once (before:
	 * each entry searched to the one end, 400,000 times 2 MB on average),
	 * and refused, an entry in an entry (before: one entry, taken). */
	{
		const char *keys[] = { b1 };
		set_list_keys(f, keys, 1);
	}
	ATTACK(f, M_LIST_NESTED, shs3_gc(s3, 0, 0, &res), rc);
	T_RC(rc, -EIO);
	fk_mode(f, M_GOOD);
	works_again(f, s3, 5);
	T_OK(shs3_gc(s3, 0, 0, &res));
	T_GE_INT(res.files, 1);
	shs3_close(s3);
}

/* Sizes whose sum would wrap gc's (uint64_t): the listing is refused,
 * -EIO, before gc deletes anything by size.  Before: two sizes of 2^64 - 1
 * summed to 2^64 - 2, two of 2^63 to 0 bytes, under any budget. */
static void case_listsize(struct fake *f)
{
	struct shs3 *s3 = open_s3(f, 3);
	struct kvt_shared_gc_result res;
	char b1[SHDIR_RELPATH_MAX], b2[SHDIR_RELPATH_MAX];
	const char *keys[2] = { b1, b2 };
	uint64_t errors;

	block_name(1, b1);
	block_name(2, b2);
	if (strcmp(b1, b2) > 0) {
		keys[0] = b2;
		keys[1] = b1;
	}
	/* One of 2^64 - 1: absurd, but it sums exactly. */
	set_list_keys(f, keys, 1);
	set_list_size(f, "18446744073709551615");
	fk_mode(f, M_LIST_FOREIGN);
	T_OK(shs3_gc(s3, 0, 0, &res));
	T_EQ_U64(res.files, 1);
	T_EQ_U64(res.bytes, UINT64_MAX);
	/* Two: their sum wraps. */
	set_list_keys(f, keys, 2);
	errors = atomic_load(&shs3_stats(s3)->errors);
	T_RC(shs3_gc(s3, 0, 0, &res), -EIO);
	T_EQ_U64(atomic_load(&shs3_stats(s3)->errors), errors + 1);
	/* Two of 2^63 over a budget of 1 byte: refused, nothing deleted
	 * (before: 0 bytes in all, under the budget). */
	set_list_size(f, "9223372036854775808");
	fk_mode(f, M_LIST_FOREIGN);
	T_RC(shs3_gc(s3, 1, 0, &res), -EIO);
	T_EQ_INT(fk_get(f, &f->nlines), 0);
	/* Two of 2^63 - 1, 2^64 - 2 in all, one byte under the limit: taken,
	 * and over a budget of 2^63 one is deleted, the other kept. */
	set_list_size(f, "9223372036854775807");
	fk_mode(f, M_LIST_FOREIGN);
	T_OK(shs3_gc(s3, UINT64_C(1) << 63, 0, &res));
	T_EQ_U64(res.files, 2);
	T_EQ_U64(res.bytes, UINT64_MAX - 1);
	T_EQ_U64(res.removed_files, 1);
	T_EQ_U64(res.removed_bytes, INT64_MAX);
	T_EQ_INT(fk_get(f, &f->nlines), 1);
	/* Sizes that are not plain decimal digits that fit 64 bits: refused
	 * (before, strtoull read "-1" as 2^64 - 1, " +5x" as 5, an empty one
	 * as 0, 20 nines as 2^64 - 1: all taken). */
	{
		static const char *const odd[] = {
			"-1", "+5", " 5", "5 ", "5x", "0x10", "007", "00", "1e3", "5.0",
			"18446744073709551616", "99999999999999999999", "123456789012345678901",
		};
		set_list_keys(f, keys, 1);
		for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
			set_list_size(f, odd[i]);
			fk_mode(f, M_LIST_FOREIGN);
			errors = atomic_load(&shs3_stats(s3)->errors);
			printf("  size \"%s\"\n", odd[i]);
			T_RC(shs3_gc(s3, 1, 0, &res), -EIO);
			T_EQ_U64(atomic_load(&shs3_stats(s3)->errors), errors + 1);
			T_EQ_INT(fk_get(f, &f->nlines), 0);
		}
		/* 0 and 2^64 - 1, the least and the most: taken. */
		set_list_size(f, "0");
		fk_mode(f, M_LIST_FOREIGN);
		T_OK(shs3_gc(s3, 0, 0, &res));
		T_EQ_U64(res.files, 1);
		T_EQ_U64(res.bytes, 0);
	}
	set_list_size(f, "");
	fk_mode(f, M_GOOD);
	works_again(f, s3, 2);
	shs3_close(s3);
}

/* Page i of M_LIST_RAW (0: the first, 1: every later one): fmt's text,
 * with every '\1' in it a NUL. */
static void set_raw(struct fake *f, unsigned i, const char *fmt, ...)
{
	size_t cap = 64 << 10;
	char *x = malloc(cap);
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(x, cap, fmt, ap);
	va_end(ap);
	T_ASSERT(n >= 0 && (size_t)n < cap);
	for (int k = 0; k < n; k++)
		if (x[k] == '\1')
			x[k] = 0;
	pthread_mutex_lock(&f->lock);
	free(f->raw[i]);
	f->raw[i] = x;
	f->raw_len[i] = (size_t)n;
	pthread_mutex_unlock(&f->lock);
}

#define L_HEAD "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><Prefix>kvt1/</Prefix>"
#define L_FALSE "<IsTruncated>false</IsTruncated>"
#define L_TRUE "<IsTruncated>true</IsTruncated>"
#define L_END "</ListBucketResult>"
#define L_LM "<LastModified>2026-12-04T10:00:00.000Z</LastModified>"
#define L_SZ "<Size>10000</Size>"
#define L_E "<Contents><Key>%s</Key>" L_LM "<ETag>&quot;e&quot;</ETag>" L_SZ "</Contents>"
/* An entry whose key is the next %s with ref after it */
#define L_EREF(ref) "<Contents><Key>%s" ref "</Key>" L_LM L_SZ "</Contents>"
/* An entry as SeaweedFS sends it, of 2020: older than any age limit here */
#define L_EOLD "<Contents><Key>%s</Key><LastModified>2020-01-01T00:00:00Z</LastModified>" \
	L_SZ "</Contents>"

/* gc over M_LIST_RAW with the pages set: its result; *pages the pages asked. */
static int raw_gc(struct fake *f, struct shs3 *s3, struct kvt_shared_gc_result *res,
		  unsigned *pages)
{
	int rc;
	memset(res, 0, sizeof(*res));
	fk_mode(f, M_LIST_RAW);
	rc = shs3_gc(s3, 0, 0, res);
	*pages = fk_get(f, &f->pages);
	fk_mode(f, M_GOOD);
	return rc;
}

/* A first page truncated with NextContinuationToken tok (as sent) and the
 * entry key (raw[1], the next page, set by the caller): gc asks for page
 * 2 with want in its request line, and counts both pages' keys. */
static void token_trip(struct fake *f, struct shs3 *s3, const char *tok, const char *key,
		       const char *want)
{
	struct kvt_shared_gc_result res;
	unsigned pages;
	set_raw(f, 0, L_HEAD L_TRUE "<NextContinuationToken>%s</NextContinuationToken>"
		L_E L_END, tok, key);
	T_OK(raw_gc(f, s3, &res, &pages));
	T_EQ_INT(pages, 2);
	T_EQ_U64(res.files, 2);
	pthread_mutex_lock(&f->lock);
	printf("  %.100s%s\n", f->list_line, strlen(f->list_line) > 100 ? "..." : "");
	T_ASSERT(strstr(f->list_line, want));
	pthread_mutex_unlock(&f->lock);
}

struct listed {
	unsigned count;
	char key[1100];          /* the last one's */
	int64_t mtime_s;
};

static int listed_cb(void *ctx, const char *name, uint64_t len, int64_t mtime_s)
{
	struct listed *l = ctx;
	(void)len;
	l->count++;
	snprintf(l->key, sizeof(l->key), "%s", name);
	l->mtime_s = mtime_s;
	return 0;
}

/* shs3_list over M_LIST_RAW with the first page set: its result, *out what
 * it gave. */
static int raw_list(struct fake *f, struct shs3 *s3, struct listed *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	fk_mode(f, M_LIST_RAW);
	rc = shs3_list(s3, "kvt1/", listed_cb, out);
	fk_mode(f, M_GOOD);
	return rc;
}

/* Pages that break a listing's shape (doc/security.md "A hostile or
 * broken object store"), each -EIO and counted, before gc deletes by size
 * or age; before, each was read as a listing with less in it than the
 * page (or more), and gc went on.  Then what must be read right: the
 * top-level IsTruncated and NextContinuationToken wherever they are, not
 * an entry's; tokens un-escaped, and sent back whole or not at all. */
static void case_listbad(struct fake *f)
{
	static const struct {
		const char *what, *fmt; /* fmt: b1 and b2, the blocks, in order */
	} bad[] = {
		{ "an entry without Size",
		  L_HEAD L_FALSE L_E "<Contents><Key>%s</Key>" L_LM "</Contents>" L_END },
		{ "an entry without LastModified",
		  L_HEAD L_FALSE L_E "<Contents><Key>%s</Key>" L_SZ "</Contents>" L_END },
		{ "no entry with a Size (looked empty)",
		  L_HEAD L_FALSE "<Contents><Key>%s</Key>" L_LM "</Contents><Contents><Key>%s"
		  "</Key>" L_LM "</Contents>" L_END },
		{ "an entry without Key",
		  L_HEAD L_FALSE L_E "<Contents>" L_LM L_SZ "</Contents>" L_END },
		{ "an entry not closed",
		  L_HEAD L_FALSE L_E "<Contents><Key>%s</Key>" L_LM L_SZ L_END },
		{ "an entry in an entry", L_HEAD L_FALSE "<Contents>" L_E L_END },
		{ "an entry opened otherwise",
		  L_HEAD L_FALSE L_E "<Contents x=\"1\"><Key>%s</Key>" L_LM L_SZ "</Contents>"
		  L_END },
		{ "a NUL", L_HEAD L_FALSE L_E "\1" L_E L_END },
		{ "no IsTruncated", L_HEAD L_E L_E L_END },
		{ "IsTruncated neither true nor false",
		  L_HEAD "<IsTruncated>no</IsTruncated>" L_E L_E L_END },
		{ "IsTruncated twice",
		  L_HEAD L_FALSE L_E L_E L_TRUE "<NextContinuationToken>t</NextContinuationToken>"
		  L_END },
		{ "IsTruncated not closed before an entry",
		  L_HEAD "<IsTruncated>false" L_E "</IsTruncated>" L_E L_END },
		{ "an empty body", "" },
		/* Character references that are no character, or not one */
		{ "&#0;", L_HEAD L_FALSE L_E L_EREF("&#0;") L_END },
		{ "&#xD800; (a surrogate)", L_HEAD L_FALSE L_E L_EREF("&#xD800;") L_END },
		{ "&#x110000;", L_HEAD L_FALSE L_E L_EREF("&#x110000;") L_END },
		{ "&#1114112;", L_HEAD L_FALSE L_E L_EREF("&#1114112;") L_END },
		{ "&#; (no digits)", L_HEAD L_FALSE L_E L_EREF("&#;") L_END },
		{ "&#x; (no digits)", L_HEAD L_FALSE L_E L_EREF("&#x;") L_END },
		{ "&#12a;", L_HEAD L_FALSE L_E L_EREF("&#12a;") L_END },
		{ "&#X41; (XML's x is lower case)", L_HEAD L_FALSE L_E L_EREF("&#X41;") L_END },
		{ "&#00000065; (8 digits)", L_HEAD L_FALSE L_E L_EREF("&#00000065;") L_END },
		{ "&#65 (no ;)", L_HEAD L_FALSE L_E L_EREF("&#65") L_END },
	};
	struct shs3 *s3 = open_s3(f, 1);
	struct kvt_shared_gc_result res;
	static char tok[S3LIST_TOKEN_MAX + 2], want[3 * S3LIST_TOKEN_MAX + 16];
	char b[2][SHDIR_RELPATH_MAX], *b1 = b[0], *b2 = b[1];
	unsigned pages;
	uint64_t errors;

	block_names(b, 2);
	/* The honest page, for the record: both blocks. */
	set_raw(f, 0, L_HEAD L_FALSE L_E L_E L_END, b1, b2);
	T_OK(raw_gc(f, s3, &res, &pages));
	T_EQ_U64(res.files, 2);
	T_EQ_U64(res.bytes, 20000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;
		set_raw(f, 0, bad[i].fmt, b1, b2);
		errors = ST(s3, errors);
		rc = raw_gc(f, s3, &res, &pages);
		printf("  %-40s rc %d (files %llu)\n", bad[i].what, rc,
		       (unsigned long long)res.files);
		T_RC(rc, -EIO);
		T_EQ_U64(ST(s3, errors), errors + 1);
		T_EQ_INT(pages, 1);
	}
	/* Character references past ASCII are read as their UTF-8 (before:
	 * kept as "&#233;", a name no PUT made), leading zeros as XML allows. */
	{
		struct listed got;
		set_raw(f, 0, L_HEAD L_FALSE L_EREF("&#233;&#x1F600;&#x0041;&#0066;&#x10FFFF;&amp;")
			L_END, "kvt1/");
		T_OK(raw_list(f, s3, &got));
		T_EQ_INT(got.count, 1);
		T_EQ_STR(got.key, "kvt1/\xC3\xA9\xF0\x9F\x98\x80" "AB\xF4\x8F\xBF\xBF&");
	}

	/* IsTruncated and NextContinuationToken inside an entry are not the
	 * page's: "true" there asks for no page 2 (before: it did, and took
	 * b2 from it), "false" there ends nothing (before: the listing ended
	 * without b2).  The page's own may come after the entries (as Ceph
	 * RGW sends them). */
	set_raw(f, 0, L_HEAD "<Contents><Key>%s</Key>" L_LM L_SZ L_TRUE
		"<NextContinuationToken>t</NextContinuationToken></Contents>" L_FALSE L_END,
		b1);
	set_raw(f, 1, L_HEAD L_FALSE L_E L_END, b2);
	T_OK(raw_gc(f, s3, &res, &pages));
	T_EQ_INT(pages, 1);
	T_EQ_U64(res.files, 1);
	set_raw(f, 0, L_HEAD "<Contents><Key>%s</Key>" L_LM L_SZ L_FALSE "</Contents>" L_TRUE
		"<NextContinuationToken>t</NextContinuationToken>" L_END, b1);
	T_OK(raw_gc(f, s3, &res, &pages));
	T_EQ_INT(pages, 2);
	T_EQ_U64(res.files, 2);

	/* A token is XML in the page, and its bytes in the query: "k&amp;1&lt;/x&#x7a;"
	 * goes back as k&1</xz, percent-encoded (before: "k&amp;1..." encoded,
	 * a token the server never gave; Ceph RGW's and SeaweedFS's tokens are
	 * keys, escaped like any); "&#233;&#x1F600;" as their UTF-8 (before:
	 * sent as "&#233;...", encoded). */
	token_trip(f, s3, "k&amp;1&lt;/x&#x7a;", b1,
		   "?continuation-token=k%261%3C%2Fxz&list-type=2");
	token_trip(f, s3, "k&#233;&#x1F600;", b1, "?continuation-token=k%C3%A9%F0%9F%98%80&list");
	/* 300 '&', 1,500 bytes as sent: a token of 300 bytes, taken (before
	 * 2026-12-01: longer than S3LIST_TOKEN_MAX as sent, -EIO). */
	tok[0] = 0;
	want[0] = 0;
	for (unsigned i = 0; i < 300; i++) {
		strcat(tok, "&amp;");
		strcat(want, "%26");
	}
	token_trip(f, s3, tok, b1, want);
	/* '/' tokens of 600, 1,023 and 4,096 bytes (S3LIST_TOKEN_MAX), 12,288
	 * encoded: sent whole (before 2026-12-01: cut to 1,100 bytes encoded;
	 * before this: 1,023 past what a query held, -EIO, and 4,096 past
	 * S3LIST_TOKEN_MAX, -EIO: kvtierd's token for a key of 1,024 bytes is
	 * 2,048). */
	{
		static const unsigned lens[] = { 600, 1023, S3LIST_TOKEN_MAX };
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
			memset(tok, '/', lens[k]);
			tok[lens[k]] = 0;
			want[0] = 0;
			for (unsigned i = 0; i < lens[k]; i++)
				strcat(want, "%2F");
			strcat(want, "&list-type=2");
			token_trip(f, s3, tok, b1, want);
		}
	}
	/* One byte more: -EIO, no page 2 asked (nor the page's key taken). */
	memset(tok, '/', S3LIST_TOKEN_MAX + 1);
	tok[S3LIST_TOKEN_MAX + 1] = 0;
	set_raw(f, 0, L_HEAD L_TRUE "<NextContinuationToken>%s</NextContinuationToken>"
		L_E L_END, tok, b1);
	errors = ST(s3, errors);
	T_RC(raw_gc(f, s3, &res, &pages), -EIO);
	T_EQ_INT(pages, 1);
	T_EQ_U64(ST(s3, errors), errors + 1);
	works_again(f, s3, 2);
	shs3_close(s3);
}

/* LastModified as object stores send it, read exactly; anything else is
 * refused, -EIO, before age gc deletes by it (before: a date that did not
 * parse read as 0, the epoch, and age gc removed that object first; the
 * year -2147483648 was taken; an offset was ignored, hours off). */
static void case_listdate(struct fake *f)
{
	static const struct {
		const char *date;
		int64_t want;
	} good[] = {
		{ "2026-11-29T23:43:43.000Z", INT64_C(1795995823) }, /* AWS, MinIO, RGW, kvtierd */
		{ "2026-11-29T23:43:43Z", INT64_C(1795995823) },     /* SeaweedFS (Go) */
		{ "2026-11-29T23:43:43.123456789Z", INT64_C(1795995823) }, /* Go's RFC3339Nano */
		{ "2026-11-30T01:43:43+02:00", INT64_C(1795995823) },      /* ... local time */
		{ "2026-11-29T18:43:43.5-05:00", INT64_C(1795995823) },
		{ "2024-02-29T00:00:00Z", INT64_C(1709164800) },           /* a leap day */
		{ "2000-03-01T12:00:00Z", INT64_C(951912000) },
		{ "1970-01-01T00:00:00Z", 0 },
		{ "1969-12-31T23:59:59Z", -1 },
		{ "9999-12-31T23:59:59Z", INT64_C(253402300799) },
	};
	static const char *const bad[] = {
		"-2147483648-01-01T00:00:00.000Z", "", "yesterday", "2026-11-29",
		"2026-11-29T23:43:43", "2026-11-29 23:43:43Z", "2026-13-01T00:00:00Z",
		"2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-11-31T00:00:00Z",
		"2026-11-29T24:00:00Z", "2026-11-29T23:60:00Z", "2026-11-29T23:43:61Z",
		"2026-11-29T23:43:43.Z", "2026-11-29T23:43:43.1234567890Z",
		"2026-11-29T23:43:43+0200", "2026-11-29T23:43:43+24:00", "2026-11-29T23:43:43Zjunk",
		" 2026-11-29T23:43:43Z", "+2026-11-29T23:43:43Z", "2026-1-29T23:43:43Z",
	};
	struct shs3 *s3 = open_s3(f, 3);
	struct kvt_shared_gc_result res;
	struct listed got;
	char b1[SHDIR_RELPATH_MAX];

	block_name(1, b1);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		set_raw(f, 0, L_HEAD L_FALSE "<Contents><Key>%s</Key><LastModified>%s"
			"</LastModified>" L_SZ "</Contents>" L_END, b1, good[i].date);
		printf("  %-34s ", good[i].date);
		T_OK(raw_list(f, s3, &got));
		printf("%lld\n", (long long)got.mtime_s);
		T_EQ_INT(got.count, 1);
		T_EQ_INT(got.mtime_s, good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		set_raw(f, 0, L_HEAD L_FALSE "<Contents><Key>%s</Key><LastModified>%s"
			"</LastModified>" L_SZ "</Contents>" L_END, b1, bad[i]);
		printf("  \"%s\"\n", bad[i]);
		T_RC(raw_list(f, s3, &got), -EIO);
		T_EQ_INT(got.count, 0);
		/* age gc: refused, nothing deleted */
		fk_mode(f, M_LIST_RAW);
		T_RC(shs3_gc(s3, 1, 3600, &res), -EIO);
		T_EQ_INT(fk_get(f, &f->nlines), 0);
		fk_mode(f, M_GOOD);
	}
	works_again(f, s3, 2);
	shs3_close(s3);
}

/* A page is all or nothing (lib/fmt/s3list.h): entries, then a malformed
 * one or a malformed end: clear and age gc delete nothing and ask for no
 * more (before: the entries before the bad one had gone to the callback,
 * clear and age gc had deleted them, and then the page was -EIO). */
static void case_listwhole(struct fake *f)
{
	static const struct {
		const char *what, *fmt; /* fmt: b[0], b[1], b[2], the blocks, in order */
	} half[] = {
		{ "an entry without Size", L_HEAD L_FALSE L_EOLD L_EOLD
		  "<Contents><Key>%s</Key><LastModified>2020-01-01T00:00:00Z</LastModified>"
		  "</Contents>" L_END },
		{ "a date that is none", L_HEAD L_FALSE L_EOLD L_EOLD
		  "<Contents><Key>%s</Key><LastModified>yesterday</LastModified>" L_SZ
		  "</Contents>" L_END },
		{ "a key not in order", L_HEAD L_FALSE L_EOLD L_EOLD
		  "<Contents><Key>kvt1/0</Key>" L_LM L_SZ "</Contents>" L_END },
		{ "a character reference to 0", L_HEAD L_FALSE L_EOLD L_EOLD
		  "<Contents><Key>%s&#0;</Key>" L_LM L_SZ "</Contents>" L_END },
		{ "an entry not closed", L_HEAD L_FALSE L_EOLD L_EOLD
		  "<Contents><Key>%s</Key>" L_LM L_SZ L_END },
		{ "no IsTruncated", L_HEAD L_EOLD L_EOLD L_EOLD L_END },
		{ "truncated without a token", L_HEAD L_TRUE L_EOLD L_EOLD L_EOLD L_END },
	};
	struct shs3 *s3 = open_s3(f, 1);
	struct kvt_shared_gc_result res;
	char b[3][SHDIR_RELPATH_MAX];

	block_names(b, 3);
	for (size_t i = 0; i < sizeof(half) / sizeof(half[0]); i++) {
		for (int gc = 0; gc < 2; gc++) {
			int64_t rc;
			set_raw(f, 0, half[i].fmt, b[0], b[1], b[2]);
			fk_mode(f, M_LIST_RAW); /* and no DELETE, no page yet */
			rc = gc ? shs3_gc(s3, 0, 3600, &res) : shs3_blk_clear(s3, NS);
			printf("  %-28s %s: rc %lld, %u deleted\n", half[i].what,
			       gc ? "gc" : "clear", (long long)rc, fk_get(f, &f->nlines));
			T_RC(rc, -EIO);
			T_EQ_INT(fk_get(f, &f->nlines), 0);
			T_EQ_INT(fk_get(f, &f->pages), 1);
			fk_mode(f, M_GOOD);
		}
	}
	/* The same page whole: clear deletes the three. */
	set_raw(f, 0, L_HEAD L_FALSE L_EOLD L_EOLD L_EOLD L_END, b[0], b[1], b[2]);
	fk_mode(f, M_LIST_RAW);
	T_RC(shs3_blk_clear(s3, NS), 3);
	T_EQ_INT(fk_get(f, &f->nlines), 3);
	fk_mode(f, M_GOOD);
	works_again(f, s3, 2);
	shs3_close(s3);
}

static void case_uploadid(struct fake *f)
{
	const size_t len = (6u << 20) + 1000;
	uint8_t *val = malloc(len);
	struct shs3 *s3 = open_s3(f, 3);
	unsigned parts = 0;
	int64_t rc;

	t_fill(val, len, 9);
	/* The server's "a&partNumber=9#x y": sent back encoded, nothing added
	 * to the query, nothing cut from it. */
	fk_mode(f, M_UPLOAD_ODD);
	rc = shs3_put(s3, "big", val, len);
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->nlines; i++) {
		printf("  %s\n", f->lines[i]);
		if (!strncmp(f->lines[i], "PUT ", 4)) {
			char want[128];
			parts++;
			snprintf(want, sizeof(want),
				 "?partNumber=%u&uploadId=a%%26partNumber%%3D9%%23x%%20y HTTP/1.1",
				 parts);
			T_ASSERT(strstr(f->lines[i], want));
		} else if (strncmp(f->lines[i], "POST /b/big?uploads", 19)) {
			T_ASSERT(strstr(f->lines[i],
					"?uploadId=a%26partNumber%3D9%23x%20y HTTP/1.1"));
		}
	}
	pthread_mutex_unlock(&f->lock);
	T_OK(rc);
	T_EQ_INT(parts, 2);
	/* An UploadId of 1 MiB: refused, nothing more sent. */
	ATTACK(f, M_UPLOAD_HUGE, shs3_put(s3, "big", val, len), rc);
	T_RC(rc, -EIO);
	free(val);
	works_again(f, s3, 2);
	shs3_close(s3);
}

/* A store whose shared tier is the fake (DRAM only besides). */
static struct kvt_store *store_open(struct fake *f, const char *creds)
{
	char ep[64], to[16];
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", f->port);
	snprintf(to, sizeof(to), "%u", TIMEOUT_MS);
	return t_store_open("dram.capacity", "64M", "dram.chunk", "64K", "dram.shards", "1",
			    "dram.prefault", "off", "shared.s3_endpoint", ep,
			    "shared.s3_bucket", "b", "shared.s3_credentials", creds,
			    "shared.threads", "2", "shared.s3_conns", "2",
			    "shared.s3_timeout_ms", to, NULL);
}

static uint32_t store_ns(struct kvt_store *s)
{
	struct kvt_ns_desc d = t_desc("hostile-s3", 0);
	uint32_t id;
	d.flags = KVT_NS_PERSISTENT;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

/* A get through the queue (the shared tier answers there): KVT_OK only
 * with t_fill(.., i)'s VLEN bytes (asserted), else the status. */
static int store_get(struct kvt_store *s, uint32_t ns, uint64_t i)
{
	uint8_t *b = malloc(VLEN + 1), *want = malloc(VLEN);
	struct iovec io = { b, VLEN + 1 };
	struct kvt_req r = t_req1(s, (struct kvt_req){ .op = KVT_OP_GET, .ns = ns,
							.key = t_key(i), .iov = &io,
							.iov_count = 1 });
	if (r.status == KVT_OK) {
		T_EQ_U64(r.length, VLEN);
		t_fill(want, VLEN, i);
		T_EQ_MEM(b, want, VLEN);
	}
	free(b);
	free(want);
	return r.status;
}

/* Through the public API: an engine's store whose shared tier is the
 * fake gets a miss (counted) for each attack, and its blocks again once
 * the endpoint answers well. */
static void case_store(struct fake *f)
{
	char creds[600];
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct kvt_store *s;
	uint32_t ns;
	FILE *cf;
	int64_t rc;

	snprintf(creds, sizeof(creds), "%s/test_hostile_s3.creds.%d", tmp, (int)getpid());
	T_ASSERT((cf = fopen(creds, "w")));
	fprintf(cf, "access_key = AKIDEXAMPLE\nsecret_key = secret\n");
	fclose(cf);
	T_OK(chmod(creds, 0600));
	s = store_open(f, creds);
	ns = store_ns(s);
	T_OK(t_put_filled(s, ns, 1, VLEN));
	T_OK(t_put_filled(s, ns, 2, VLEN));
	T_OK(kvt_flush(s));
	kvt_store_close(s);
	kvt_store_destroy(s);

	/* A fresh store (empty DRAM): every attack is a miss, counted. */
	s = store_open(f, creds);
	ns = store_ns(s);
	ATTACK(f, M_ERR_ENDLESS, store_get(s, ns, 1), rc);
	T_RC(rc, KVT_MISS);
	ATTACK(f, M_SILENT, store_get(s, ns, 1), rc);
	T_RC(rc, KVT_MISS);
	T_EQ_U64(t_stat(s, "shared.read_errors"), 2);
	T_ASSERT(t_stat(s, "shared.s3_timeouts") >= 1);
	ATTACK(f, M_GET_OTHER, store_get(s, ns, 1), rc);
	T_RC(rc, KVT_MISS);
	T_EQ_U64(t_stat(s, "shared.corrupt"), 1);
	T_EQ_U64(t_stat(s, "shared.bad_removed"), 1); /* the object taken for bad goes */
	/* Good answers again: block 2 byte-exact; block 1 is gone. */
	T_RC(store_get(s, ns, 2), KVT_OK);
	T_RC(store_get(s, ns, 1), KVT_MISS);
	/* A delete the bucket never answers is the delete's error, not done
	 * (it said KVT_MISS, then KVT_OK with DRAM's copy): the object stays,
	 * and the next get finds it. */
	{
		struct kvt_key k2 = t_key(2);
		ATTACK(f, M_503_ENDLESS, kvt_delete(s, ns, &k2), rc);
		T_ASSERT(rc < 0 && rc != KVT_MISS);
		T_RC(store_get(s, ns, 2), KVT_OK);
		T_RC(kvt_delete(s, ns, &k2), KVT_OK);
		T_RC(store_get(s, ns, 2), KVT_MISS);
	}
	kvt_store_close(s);
	kvt_store_destroy(s);
	unlink(creds);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(struct fake *f);
	} cases[] = {
		{ "bodies", case_bodies },   { "gets", case_gets },
		{ "slow", case_slow },       { "redirect", case_redirect },
		{ "list", case_list },       { "listdate", case_listdate },
		{ "listsize", case_listsize }, { "listbad", case_listbad },
		{ "listwhole", case_listwhole },
		{ "uploadid", case_uploadid }, { "store", case_store },
	};
	bool any = false;
	kvt_mem_init(&mem);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fake f;
		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		any = true;
		printf("== %s\n", cases[i].name);
		fk_start(&f);
		cases[i].fn(&f);
		fk_stop(&f);
	}
	if (!any)
		T_FAIL("no case %s", argv[1]);
	return 0;
}

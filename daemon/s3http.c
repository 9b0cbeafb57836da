/*
 * s3http.c - the request-head parser and chunked decoder of s3http.h.
 *
 * Owns nothing.  Invariants: nothing at or past in + len is read; a head
 * is complete only when its CRLF CRLF is in the buffer within max bytes;
 * each line is checked for its shape before a field is returned; the
 * chunked decoder copies at most S3H_LINE_MAX bytes of any line and never
 * trusts a chunk size past size_max.
 */
#include <string.h>
#include <strings.h>

#include "http.h"
#include "s3http.h"

/* A byte allowed in a header value: visible, blank, or obs-text. */
static bool s3h_vchar(unsigned char ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

static bool s3h_is(const char *p, size_t len, const char *lit)
{
	size_t l = strlen(lit);
	return len == l && strncasecmp(p, lit, l) == 0;
}

/* Does the comma-separated list v contain token tok (case-insensitive)? */
static bool s3h_list_has(const char *v, size_t len, const char *tok)
{
	size_t i = 0;

	while (i < len) {
		size_t s, e;
		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && s3h_is(v + s, e - s, tok))
			return true;
	}
	return false;
}

static int s3h_decimal(const char *p, size_t len, int64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (v >= (UINT64_C(1) << 62))
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* Index just past the CRLF CRLF, or 0. */
static size_t s3h_head_end(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while (end - p >= 4) {
		const char *q = memchr(p, '\r', (size_t)(end - p - 3));
		if (!q)
			return 0;
		if (q[1] == '\n' && q[2] == '\r' && q[3] == '\n')
			return (size_t)(q - buf) + 4;
		p = q + 1;
	}
	return 0;
}

int s3h_parse(const char *buf, size_t len, size_t max, struct s3h_hdr *hdrs, unsigned hdr_max,
	      struct s3h_req *req)
{
	return s3h_parse_from(buf, len, max, hdrs, hdr_max, req, NULL);
}

int s3h_parse_from(const char *buf, size_t len, size_t max, struct s3h_hdr *hdrs,
		   unsigned hdr_max, struct s3h_req *req, size_t *scan)
{
	size_t end, i, avail = len < max ? len : max;
	size_t from = scan && *scan <= avail ? *scan : 0, back = from > 3 ? from - 3 : 0;
	bool have_cl = false, have_te = false, conn_close = false, conn_keep = false;

	memset(req, 0, sizeof(*req));
	req->hdrs = hdrs;
	req->content_length = -1;
	if (scan)
		*scan = 0;
	/* Searched before: buf[0, from), so an end starting before from - 3 */
	end = s3h_head_end(buf + back, avail - back);
	if (end)
		end += back;
	if (!end) {
		/* A line ended by a bare LF can never complete the head: refused
		 * now, not held until the head's timeout */
		for (const char *nl = memchr(buf + from, '\n', avail - from); nl;
		     nl = memchr(nl + 1, '\n', (size_t)(buf + avail - nl - 1)))
			if (nl == buf || nl[-1] != '\r')
				return S3H_EMALFORMED;
		if (len >= max)
			return S3H_ETOOBIG;
		if (scan)
			*scan = avail;
		return S3H_NEED_MORE;
	}
	/* method SP target SP HTTP/1.x CRLF */
	i = http_method_target(buf, end, &req->method, &req->method_len, &req->target,
			       &req->target_len);
	if (!i)
		return S3H_EMALFORMED;
	if (end - i < 10 || memcmp(buf + i, "HTTP/1.", 7) != 0 || buf[i + 7] < '0' ||
	    buf[i + 7] > '9' || buf[i + 8] != '\r' || buf[i + 9] != '\n')
		return S3H_EMALFORMED;
	req->minor = buf[i + 7] - '0';
	i += 10;
	/* Headers until the blank line (end - 2). */
	while (i < end - 2) {
		size_t ns = i, ne, vs, ve;
		while (i < end && http_tchar((unsigned char)buf[i]))
			i++;
		if (i == ns || i >= end || buf[i] != ':')
			return S3H_EMALFORMED; /* also folding: a line starting with a blank */
		ne = i++;
		while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		vs = i;
		while (i < end && buf[i] != '\r') {
			if (!s3h_vchar((unsigned char)buf[i]))
				return S3H_EMALFORMED;
			i++;
		}
		if (i + 1 >= end || buf[i + 1] != '\n')
			return S3H_EMALFORMED;
		ve = i;
		while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
			ve--;
		i += 2;
		if (req->hdr_count == hdr_max)
			return S3H_ETOOMANY;
		hdrs[req->hdr_count++] = (struct s3h_hdr){ buf + ns, ne - ns, buf + vs, ve - vs };
		const char *n = buf + ns, *v = buf + vs;
		size_t nl = ne - ns, vl = ve - vs;
		if (s3h_is(n, nl, "content-length")) {
			int64_t cl;
			if (s3h_decimal(v, vl, &cl) < 0 || (have_cl && cl != req->content_length))
				return S3H_EMALFORMED;
			have_cl = true;
			req->content_length = cl;
		} else if (s3h_is(n, nl, "transfer-encoding")) {
			if (have_te || !s3h_is(v, vl, "chunked"))
				return have_te ? S3H_EMALFORMED : S3H_EUNSUPPORTED;
			have_te = true;
			req->chunked = true;
		} else if (s3h_is(n, nl, "connection")) {
			conn_close |= s3h_list_has(v, vl, "close");
			conn_keep |= s3h_list_has(v, vl, "keep-alive");
		} else if (s3h_is(n, nl, "expect")) {
			/* HTTP/1.0 has no 1xx answers: ignored there (RFC 9110 10.1.1) */
			if (s3h_is(v, vl, "100-continue") && req->minor >= 1)
				req->expect_continue = true;
		}
	}
	if (have_cl && have_te)
		return S3H_EMALFORMED;
	req->keep_alive = req->minor >= 1 ? !conn_close : conn_keep && !conn_close;
	req->head_len = end;
	return S3H_OK;
}

const char *s3h_header(const struct s3h_req *req, const char *name, size_t *len)
{
	for (unsigned i = 0; i < req->hdr_count; i++)
		if (s3h_is(req->hdrs[i].name, req->hdrs[i].name_len, name)) {
			*len = req->hdrs[i].value_len;
			return req->hdrs[i].value;
		}
	*len = 0;
	return NULL;
}

/* ------------------------------------------------------------------------
 * Chunked bodies
 *
 *   chunk      = size-hex [ ";" ext ] CRLF data CRLF
 *   last-chunk = "0" [ ";" ext ] CRLF
 *   trailer    = *( name ":" OWS value OWS CRLF ) CRLF
 *
 * States: SIZE (collecting a size line), DATA (left bytes to pass on),
 * DATA_CR / DATA_LF (the CRLF after the data), TRAILER (collecting trailer
 * lines), DONE.
 */
enum { SC_SIZE = 0, SC_DATA, SC_DATA_CR, SC_DATA_LF, SC_TRAILER, SC_DONE };

void s3c_init(struct s3c_dec *d, uint64_t size_max)
{
	memset(d, 0, sizeof(*d));
	d->size_max = size_max;
}

static int s3c_hex(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Collect bytes of a CRLF-terminated line into d->line: 1 complete (CRLF
 * stripped), 0 need more, < 0 error.  *used gets the bytes consumed. */
static int s3c_line(struct s3c_dec *d, const uint8_t *in, size_t len, size_t *used)
{
	const uint8_t *nl = memchr(in, '\n', len);
	size_t take = nl ? (size_t)(nl - in) + 1 : len;

	if (d->line_len + take > sizeof(d->line))
		return S3H_ETOOBIG;
	memcpy(d->line + d->line_len, in, take);
	d->line_len += take;
	*used = take;
	if (!nl)
		return 0;
	if (d->line_len < 2 || d->line[d->line_len - 2] != '\r')
		return S3H_EMALFORMED;
	d->line_len -= 2;
	for (size_t i = 0; i < d->line_len; i++)
		if (!s3h_vchar((unsigned char)d->line[i]))
			return S3H_EMALFORMED;
	return 1;
}

static int s3c_size_line(struct s3c_dec *d, struct s3c_ev *ev)
{
	size_t i = 0, n = d->line_len;
	uint64_t v = 0;

	while (i < n && s3c_hex((unsigned char)d->line[i]) >= 0) {
		if (i >= 15)
			return S3H_ETOOBIG;
		v = v << 4 | (uint64_t)s3c_hex((unsigned char)d->line[i]);
		i++;
	}
	if (i == 0)
		return S3H_EMALFORMED;
	while (i < n && (d->line[i] == ' ' || d->line[i] == '\t'))
		i++;
	if (i < n && d->line[i] != ';')
		return S3H_EMALFORMED;
	if (v > d->size_max)
		return S3H_ETOOBIG;
	ev->kind = S3C_EV_CHUNK;
	ev->size = v;
	ev->ext = i < n ? d->line + i + 1 : "";
	ev->ext_len = i < n ? n - i - 1 : 0;
	d->left = v;
	d->state = v ? SC_DATA : SC_TRAILER;
	return 0;
}

static int s3c_trailer_line(struct s3c_dec *d, struct s3c_ev *ev)
{
	size_t i = 0, n = d->line_len, vs, ve;

	if (n == 0) {
		ev->kind = S3C_EV_DONE;
		d->state = SC_DONE;
		return 0;
	}
	while (i < n && http_tchar((unsigned char)d->line[i]))
		i++;
	if (i == 0 || i >= n || d->line[i] != ':')
		return S3H_EMALFORMED;
	if (++d->trailers > S3H_TRAILERS_MAX)
		return S3H_ETOOMANY;
	ev->kind = S3C_EV_TRAILER;
	ev->name = d->line;
	ev->name_len = i;
	vs = i + 1;
	while (vs < n && (d->line[vs] == ' ' || d->line[vs] == '\t'))
		vs++;
	ve = n;
	while (ve > vs && (d->line[ve - 1] == ' ' || d->line[ve - 1] == '\t'))
		ve--;
	ev->value = d->line + vs;
	ev->value_len = ve - vs;
	return 0;
}

int64_t s3c_next(struct s3c_dec *d, const uint8_t *in, size_t len, struct s3c_ev *ev)
{
	size_t used = 0;
	int r;

	memset(ev, 0, sizeof(*ev));
	switch (d->state) {
	case SC_SIZE:
	case SC_TRAILER:
		if (len == 0)
			return 0;
		r = s3c_line(d, in, len, &used);
		if (r <= 0)
			return r < 0 ? r : (int64_t)used;
		r = d->state == SC_SIZE ? s3c_size_line(d, ev) : s3c_trailer_line(d, ev);
		if (r < 0)
			return r;
		d->line_len = 0; /* the event points into line[] until the next call */
		return (int64_t)used;
	case SC_DATA:
		if (len == 0)
			return 0;
		ev->kind = S3C_EV_DATA;
		ev->p = in;
		ev->len = len < d->left ? len : (size_t)d->left;
		d->left -= ev->len;
		if (!d->left)
			d->state = SC_DATA_CR;
		return (int64_t)ev->len;
	case SC_DATA_CR:
		if (len == 0)
			return 0;
		if (in[0] != '\r')
			return S3H_EMALFORMED;
		d->state = SC_DATA_LF;
		return 1;
	case SC_DATA_LF:
		if (len == 0)
			return 0;
		if (in[0] != '\n')
			return S3H_EMALFORMED;
		d->state = SC_SIZE;
		ev->kind = S3C_EV_END;
		return 1;
	default:
		return 0;
	}
}

bool s3c_done(const struct s3c_dec *d)
{
	return d->state == SC_DONE;
}

int64_t s3h_unescape(const char *src, size_t len, char *dst, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int ch = (unsigned char)src[i];
		if (ch == '%') {
			int h, l;
			if (i + 2 >= len)
				return -1;
			h = s3c_hex((unsigned char)src[i + 1]);
			l = s3c_hex((unsigned char)src[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			ch = h << 4 | l;
			i += 2;
		}
		if (o == cap)
			return -1;
		dst[o++] = (char)ch;
	}
	return (int64_t)o;
}

int64_t s3h_query(const char *target, size_t target_len, const char *name, char *out, size_t cap)
{
	const char *q = memchr(target, '?', target_len);
	size_t nl = strlen(name);

	for (size_t i = q ? (size_t)(q - target) + 1 : target_len; i < target_len;) {
		size_t s = i, e;
		while (i < target_len && target[i] != '&')
			i++;
		e = i++;
		const char *eq = memchr(target + s, '=', e - s);
		size_t kl = eq ? (size_t)(eq - target) - s : e - s;
		if (kl != nl || memcmp(target + s, name, nl) != 0)
			continue;
		if (!eq)
			return 0;
		int64_t dl = s3h_unescape(eq + 1, e - (size_t)(eq + 1 - target), out, cap);
		return dl < 0 ? -2 : dl;
	}
	return -1;
}

/* ------------------------------------------------------------------------
 * Virtual-hosted-style addressing: the Host header's value against the
 * --s3-domain names
 */
int s3h_vhost(const char *host, size_t len, const char *domains, char *out, size_t cap)
{
	size_t hl = len, best = 0, bl;
	const char *d = domains;
	bool found = false;

	if (len == 0)
		return 0; /* no authority (RFC 9112 3.2): path-style */
	if (len > S3H_HOST_MAX)
		return S3H_ETOOBIG;
	if (host[0] == '[') {
		/* IP-literal [ ... ] [":" port]: never under a domain */
		const char *rb = memchr(host, ']', len);
		size_t i;
		if (!rb)
			return S3H_EMALFORMED;
		i = (size_t)(rb - host) + 1;
		if (i < len && host[i] != ':')
			return S3H_EMALFORMED;
		for (size_t k = i + 1; k < len; k++)
			if (host[k] < '0' || host[k] > '9' || k - i > 5)
				return S3H_EMALFORMED;
		return 0;
	}
	{
		const char *colon = memchr(host, ':', len);
		if (colon) {
			hl = (size_t)(colon - host);
			if (len - hl - 1 > 5)
				return S3H_EMALFORMED;
			for (size_t k = hl + 1; k < len; k++)
				if (host[k] < '0' || host[k] > '9')
					return S3H_EMALFORMED;
		}
	}
	if (hl > 0 && host[hl - 1] == '.')
		hl--; /* the absolute form, "bucket.example.com." */
	if (hl == 0)
		return S3H_EMALFORMED;
	while (*d) {
		const char *e = strchr(d, ',');
		size_t dl = e ? (size_t)(e - d) : strlen(d);
		if (dl > 0 && dl == hl && strncasecmp(host, d, dl) == 0)
			return 0; /* the domain itself: path-style */
		if (dl > 0 && hl > dl + 1 && host[hl - dl - 1] == '.' &&
		    strncasecmp(host + hl - dl, d, dl) == 0 && dl > best) {
			best = dl;
			found = true;
		}
		d += dl + (e ? 1 : 0);
	}
	if (!found)
		return 0;
	bl = hl - best - 1;
	if (bl >= cap)
		return S3H_ETOOBIG;
	for (size_t i = 0; i < bl; i++) {
		char ch = host[i];
		out[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
	}
	out[bl] = 0;
	return (int)bl;
}

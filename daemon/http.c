/*
 * http.c - the request-head parser of http.h.
 *
 * Owns nothing.  Invariants: nothing at or past buf + len is read; a head
 * is complete only when its CRLF CRLF (or LF LF) is in the buffer within
 * max bytes; every line is checked for its shape (method token, target of
 * visible bytes, "HTTP/1.x", "Name: value" headers) before a field is
 * returned.
 */
#include <string.h>
#include <strings.h>

#include "http.h"

/* End of the head: index just past the blank line, or 0. */
static size_t http_head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

int http_parse_request(const char *buf, size_t len, size_t max, struct http_req *req)
{
	return http_parse_request_from(buf, len, max, req, NULL);
}

int http_parse_request_from(const char *buf, size_t len, size_t max, struct http_req *req,
			    size_t *scan)
{
	size_t end, i, n = len < max ? len : max;
	size_t from = scan && *scan <= n ? *scan : 0, back = from > 2 ? from - 2 : 0;

	memset(req, 0, sizeof(*req));
	if (scan)
		*scan = 0;
	/* Searched before: buf[0, from), so an end whose LF is before from - 2 */
	end = http_head_end(buf + back, n - back);
	if (end)
		end += back;
	if (!end) {
		if (len >= max)
			return HTTP_ETOOBIG;
		if (scan)
			*scan = n;
		return HTTP_NEED_MORE;
	}
	/* method SP target SP HTTP/1.x CRLF */
	i = http_method_target(buf, end, &req->method, &req->method_len, &req->path,
			       &req->path_len);
	if (!i)
		return HTTP_EMALFORMED;
	if (end - i < 9 || memcmp(buf + i, "HTTP/1.", 7) != 0 || buf[i + 7] < '0' || buf[i + 7] > '9')
		return HTTP_EMALFORMED;
	req->minor = buf[i + 7] - '0';
	i += 8;
	if (buf[i] == '\r')
		i++;
	if (i >= end || buf[i] != '\n')
		return HTTP_EMALFORMED;
	i++;
	/* headers until the blank line */
	while (i < end) {
		size_t ls = i, colon = 0, le, vs, ve;
		if (buf[i] == '\n' || (buf[i] == '\r' && i + 1 < end && buf[i + 1] == '\n'))
			break;
		while (i < end && buf[i] != '\n')
			i++;
		if (i >= end)
			return HTTP_EMALFORMED;
		le = i > ls && buf[i - 1] == '\r' ? i - 1 : i;
		i++;
		for (size_t k = ls; k < le; k++) {
			if (buf[k] == ':') {
				colon = k;
				break;
			}
			if (!http_tchar((unsigned char)buf[k]))
				return HTTP_EMALFORMED;
		}
		if (colon == 0 || colon == ls)
			return HTTP_EMALFORMED;
		vs = colon + 1;
		while (vs < le && (buf[vs] == ' ' || buf[vs] == '\t'))
			vs++;
		ve = le;
		while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
			ve--;
		for (size_t k = vs; k < ve; k++)
			if ((unsigned char)buf[k] < 0x20 && buf[k] != '\t')
				return HTTP_EMALFORMED;
		if (colon - ls == 13 && strncasecmp(buf + ls, "Authorization", 13) == 0) {
			req->auth = buf + vs;
			req->auth_len = ve - vs;
		} else if (colon - ls == 4 && strncasecmp(buf + ls, "Host", 4) == 0) {
			req->host_count++;
		}
	}
	req->head_len = end;
	return HTTP_OK;
}

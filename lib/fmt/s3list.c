/*
 * s3list.c - one page of an S3 ListObjectsV2 answer (s3list.h): its
 * entries (key, size, last-modified), IsTruncated and
 * NextContinuationToken, each checked against S3's promises of a listing.
 *
 * Pure: no I/O, no allocation, no global state; reads only
 * page[0..page_len) and the struct it is given.
 *
 * Not an XML parser: like S3's SDKs' hand-written readers, it finds tags
 * by their text.  An entry is the bytes between a "<Contents>" and the
 * next "</Contents>", with no "<Contents>" between them, and its fields
 * are the first <Key>, <Size> and <LastModified> in them.  The page
 * outside its entries is its top level: IsTruncated and
 * NextContinuationToken are read there only, in the stretch before each
 * entry and after the last, so that no entry can carry the page's fields
 * (a conforming server escapes every '<' in a key, an ETag, an owner's
 * name: only a hostile or broken one puts tags in an entry).  The next
 * entry is searched from the end of the last one, so the page is scanned
 * once.  Every copy out of the page is bounded by the buffer it goes to:
 * a field too long for its buffer reads as missing, and a missing field
 * is a malformed page.
 *
 *   <ListBucketResult>...<IsTruncated>..  <Contents>..</Contents>  ..</ListBucketResult>
 *   |---- top level: searched -----------|-- an entry ------------|-- top level ------|
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3list.h"

#define S3LIST_CONTENTS "<Contents>"
#define S3LIST_CONTENTS_END "</Contents>"
#define S3LIST_TOKEN_XML_MAX (6 * S3LIST_TOKEN_MAX) /* a token as sent, escaped */
_Static_assert(S3LIST_TOKEN_XML_MAX <= S3LIST_KEY_XML_MAX, "s3list_end un-escapes in key[]");

/* The first needle (a string) in [a, end), or NULL. */
static const char *s3list_find(const char *a, const char *end, const char *needle)
{
	return memmem(a, (size_t)(end - a), needle, strlen(needle));
}

/* The text of the first <tag>...</tag> in [a, end) into out (cap bytes
 * with its NUL): out, or NULL if there is none or it does not fit. */
static char *s3list_tag(const char *a, const char *end, const char *tag, char *out, size_t cap)
{
	char open_t[32], close_t[32];
	const char *b;
	snprintf(open_t, sizeof(open_t), "<%s>", tag);
	snprintf(close_t, sizeof(close_t), "</%s>", tag);
	a = s3list_find(a, end, open_t);
	if (!a)
		return NULL;
	a += strlen(open_t);
	b = s3list_find(a, end, close_t);
	if (!b || (size_t)(b - a) >= cap)
		return NULL;
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = 0;
	return out;
}

/* "2026-11-29T23:43:43.000Z" -> seconds since the epoch (0 if malformed). */
static int64_t s3list_iso8601_s(const char *v)
{
	struct tm tm = { 0 };
	/* Widths: a year of -2147483648 would overflow tm_year - 1900. */
	if (sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
		   &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

/* A <Size>: 1 to 20 decimal digits, no sign, space or leading zero (but
 * "0"), at most 2^64 - 1: 0 and *v, or -EIO.  (strtoull read "-1" as
 * 2^64 - 1, " +5x" as 5, and 21 digits as 2^64 - 1.) */
static int s3list_size(const char *s, uint64_t *v)
{
	size_t n = strlen(s);
	uint64_t x = 0;
	if (n == 0 || n > 20 || (s[0] == '0' && n > 1))
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - (unsigned)'0';
		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return -EIO;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

/* The <tag>text</tag> in [a, end), a stretch of the top level: *text and
 * *len if it is there; -EIO if it is there and *text was set already (a
 * second one in the page), or it is not closed within the stretch. */
static int s3list_top1(const char *a, const char *end, const char *open_t,
		       const char *close_t, const char **text, size_t *len)
{
	size_t ol = strlen(open_t);
	while ((a = s3list_find(a, end, open_t))) {
		const char *b;
		a += ol;
		b = s3list_find(a, end, close_t);
		if (!b || *text)
			return -EIO;
		*text = a;
		*len = (size_t)(b - a);
		a = b + strlen(close_t);
	}
	return 0;
}

/* A stretch [a, end) of the top level: its IsTruncated and
 * NextContinuationToken, if there; -EIO for one twice in the page, one
 * not closed in the stretch, or a "</Contents>" that closes no entry (an
 * entry whose opening tag is not "<Contents>" would be skipped unseen). */
static int s3list_top(struct s3list *l, const char *a, const char *end)
{
	if (s3list_find(a, end, S3LIST_CONTENTS_END) ||
	    s3list_top1(a, end, "<IsTruncated>", "</IsTruncated>", &l->trunc, &l->trunc_len) ||
	    s3list_top1(a, end, "<NextContinuationToken>", "</NextContinuationToken>", &l->next,
			&l->next_len))
		return -EIO;
	return 0;
}

/* A key as S3 lists it, XML-escaped ("&amp;", "&lt;", "&#13;"), back to
 * its bytes in place: S3 orders keys by their bytes, not their escapes
 * ("x<" after "x0", "x&lt;" before it).  What is not one of XML's five
 * names or an ASCII character reference (1 to 127: never a NUL) stays as
 * it is. */
static void s3list_unescape(char *s)
{
	static const struct { const char *e; char c; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};
	char *o = s;
	while (*s) {
		size_t i;
		unsigned long v = 0;
		char *end = NULL;
		if (*s != '&') {
			*o++ = *s++;
			continue;
		}
		for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
			if (!strncmp(s, ents[i].e, strlen(ents[i].e)))
				break;
		if (i < sizeof(ents) / sizeof(ents[0])) {
			*o++ = ents[i].c;
			s += strlen(ents[i].e);
			continue;
		}
		if (s[1] == '#' && (s[2] == 'x' || s[2] == 'X') && isxdigit((unsigned char)s[3]))
			v = strtoul(s + 3, &end, 16);
		else if (s[1] == '#' && isdigit((unsigned char)s[2]))
			v = strtoul(s + 2, &end, 10);
		if (end && *end == ';' && v > 0 && v < 128) {
			*o++ = (char)v;
			s = end + 1;
			continue;
		}
		*o++ = *s++;
	}
	*o = 0;
}

void s3list_init(struct s3list *l, const char *prefix)
{
	memset(l, 0, sizeof(*l));
	l->prefix = prefix;
	l->prefix_len = strlen(prefix);
}

void s3list_page(struct s3list *l, const char *page, size_t len)
{
	l->page = page;
	l->page_len = page ? len : 0;
	l->pos = 0;
	l->keys = 0;
	l->bad = page && memchr(page, 0, len); /* strnlen cut such a page short */
	l->trunc = NULL;
	l->next = NULL;
	l->trunc_len = 0;
	l->next_len = 0;
}

int s3list_next(struct s3list *l, struct s3list_entry *e)
{
	const char *pend, *p, *end;
	char lm[64], sz[32];
	size_t n;
	if (l->bad)
		return -EIO;
	if (!l->page || l->pos >= l->page_len)
		return 0;
	pend = l->page + l->page_len;
	/* The top level up to the next entry (or the page's end). */
	p = s3list_find(l->page + l->pos, pend, S3LIST_CONTENTS);
	if (s3list_top(l, l->page + l->pos, p ? p : pend) < 0)
		goto bad;
	if (!p) {
		l->pos = l->page_len;
		return 0;
	}
	/* The entry: closed, and nothing opened in it. */
	p += strlen(S3LIST_CONTENTS);
	end = s3list_find(p, pend, S3LIST_CONTENTS_END);
	if (!end || s3list_find(p, end, S3LIST_CONTENTS))
		goto bad;
	l->pos = (size_t)(end - l->page) + strlen(S3LIST_CONTENTS_END);
	if (!s3list_tag(p, end, "Key", l->key, sizeof(l->key)))
		goto bad;
	s3list_unescape(l->key);
	n = strlen(l->key);
	if (!n || n > S3LIST_KEY_MAX || strncmp(l->key, l->prefix, l->prefix_len) ||
	    strcmp(l->key, l->last) <= 0)
		goto bad;
	memcpy(l->last, l->key, n + 1);
	l->keys++;
	/* S3 sends both with every entry: one without is not "nothing here". */
	if (!s3list_tag(p, end, "Size", sz, sizeof(sz)) || s3list_size(sz, &e->size) < 0 ||
	    !s3list_tag(p, end, "LastModified", lm, sizeof(lm)))
		goto bad;
	e->key = l->key;
	e->mtime_s = s3list_iso8601_s(lm);
	return 1;
bad:
	l->bad = true;
	l->pos = l->page_len;
	return -EIO;
}

int s3list_end(struct s3list *l)
{
	size_t n;
	if (l->bad || (l->page && l->pos < l->page_len))
		return -EIO; /* malformed, or not scanned to its end */
	if (!l->trunc)
		return -EIO; /* an empty body too: it says nothing */
	if ((l->trunc_len == 5 && !memcmp(l->trunc, "false", 5)) ||
	    (l->trunc_len == 1 && l->trunc[0] == '0'))
		return 0;
	if (!(l->trunc_len == 4 && !memcmp(l->trunc, "true", 4)) &&
	    !(l->trunc_len == 1 && l->trunc[0] == '1'))
		return -EIO;
	/* The token as sent is XML ("a&amp;b"): sent back, it is its bytes
	 * ("a&b"), as every SDK's XML reader would give them.  Ceph RGW's and
	 * SeaweedFS's tokens are the last key, escaped like one. */
	if (!l->keys || !l->next || l->next_len > S3LIST_TOKEN_XML_MAX)
		return -EIO;
	memcpy(l->key, l->next, l->next_len);
	l->key[l->next_len] = 0;
	s3list_unescape(l->key);
	n = strlen(l->key);
	if (!n || n > S3LIST_TOKEN_MAX || !strcmp(l->key, l->token))
		return -EIO;
	memcpy(l->token, l->key, n + 1);
	return 1;
}

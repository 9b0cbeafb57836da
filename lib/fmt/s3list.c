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
 * next "</Contents>", and its fields are the first <Key>, <Size> and
 * <LastModified> in them; IsTruncated and NextContinuationToken are the
 * first of their tags in the page.  The next entry is searched from the
 * end of the last one, so the page is scanned once, however many
 * "<Contents>" it opens without closing them.  Every copy out of the page
 * is bounded by the buffer it goes to: a field too long for its buffer
 * reads as missing.
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
	l->page_len = page ? strnlen(page, len) : 0;
	l->pos = 0;
	l->keys = 0;
}

int s3list_next(struct s3list *l, struct s3list_entry *e)
{
	const char *pend;
	if (!l->page)
		return 0;
	pend = l->page + l->page_len;
	while (l->pos < l->page_len) {
		const char *p = s3list_find(l->page + l->pos, pend, S3LIST_CONTENTS), *end;
		char lm[64], sz[32];
		size_t n;
		if (!p)
			break;
		end = s3list_find(p, pend, S3LIST_CONTENTS_END);
		if (!end)
			break;
		l->pos = (size_t)(end - l->page) + strlen(S3LIST_CONTENTS_END);
		if (s3list_tag(p, end, "Key", l->key, sizeof(l->key)))
			s3list_unescape(l->key);
		else
			l->key[0] = 0; /* none: below the prefix or the last key */
		n = strlen(l->key);
		if (!n || n > S3LIST_KEY_MAX || strncmp(l->key, l->prefix, l->prefix_len) ||
		    strcmp(l->key, l->last) <= 0) {
			l->pos = l->page_len; /* the walk is over */
			return -EIO;
		}
		memcpy(l->last, l->key, n + 1);
		l->keys++;
		if (!s3list_tag(p, end, "Size", sz, sizeof(sz)) ||
		    !s3list_tag(p, end, "LastModified", lm, sizeof(lm)))
			continue;
		e->key = l->key;
		e->size = strtoull(sz, NULL, 10);
		e->mtime_s = s3list_iso8601_s(lm);
		return 1;
	}
	l->pos = l->page_len;
	return 0;
}

int s3list_end(struct s3list *l)
{
	const char *a = l->page, *end;
	char v[8], next[S3LIST_TOKEN_MAX + 1];
	bool truncated;
	if (!a)
		return 0;
	end = a + l->page_len;
	truncated = s3list_tag(a, end, "IsTruncated", v, sizeof(v)) && !strcmp(v, "true");
	if (!truncated)
		return 0;
	if (!l->keys || !s3list_tag(a, end, "NextContinuationToken", next, sizeof(next)) ||
	    !next[0] || !strcmp(next, l->token))
		return -EIO;
	memcpy(l->token, next, strlen(next) + 1);
	return 1;
}

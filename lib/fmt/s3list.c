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
 * entry is searched from the end of the last one.  Every copy out of the
 * page is bounded by the buffer it goes to: a field too long for its
 * buffer is a malformed page.
 *
 *   <ListBucketResult>...<IsTruncated>..  <Contents>..</Contents>  ..</ListBucketResult>
 *   |---- top level: searched -----------|-- an entry ------------|-- top level ------|
 *
 * Two passes over a page (s3list.h: all or nothing): s3list_page reads
 * every entry and the top level and checks them all (s3list_check), then
 * s3list_next reads the entries again, one a call, and gives them.  The
 * order of keys is checked in the first pass only (l->last is then the
 * page's greatest); every other check is the same function's, so the
 * second pass reads what the first passed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "s3list.h"

#define S3LIST_CONTENTS "<Contents>"
#define S3LIST_CONTENTS_END "</Contents>"
#define S3LIST_REF_DIGITS 7 /* a character reference's most digits: 1114111 */
_Static_assert(S3LIST_TOKEN_MAX >= S3LIST_KEY_MAX, "a key fits where a token does");

/* The page's top level, as read by the check: the texts of its
 * IsTruncated and NextContinuationToken (as sent; NULL: none so far). */
struct s3list_top {
	const char *trunc, *next;
	size_t trunc_len, next_len;
};

/* The first needle (a string) in [a, end), or NULL. */
static const char *s3list_find(const char *a, const char *end, const char *needle)
{
	return memmem(a, (size_t)(end - a), needle, strlen(needle));
}

/* The text of the first open_t...close_t ("<Key>", "</Key>") in [a,
 * end): its start, *len its bytes; NULL if there is none. */
static const char *s3list_tag(const char *a, const char *end, const char *open_t,
			      const char *close_t, size_t *len)
{
	const char *b;
	a = s3list_find(a, end, open_t);
	if (!a)
		return NULL;
	a += strlen(open_t);
	b = s3list_find(a, end, close_t);
	if (!b)
		return NULL;
	*len = (size_t)(b - a);
	return a;
}

/* n decimal digits at s: their value, or -1 if one is not a digit. */
static int s3list_digits(const char *s, unsigned n)
{
	int v = 0;
	for (unsigned i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (the civil-from-days algorithm's inverse, eras of 400 years). */
static int64_t s3list_days(int y, unsigned m, unsigned d)
{
	int64_t yy = y - (m <= 2);
	int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
	unsigned yoe = (unsigned)(yy - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

/*
 * A <LastModified>: RFC 3339's date-time, as object stores send it:
 *
 *   2026-11-29T23:43:43.000Z        AWS, MinIO, Ceph RGW, kvtierd (ms)
 *   2026-11-29T23:43:43Z            SeaweedFS (Go's RFC3339Nano, a zero
 *   2026-11-29T23:43:43.123456789Z   fraction dropped; an offset
 *   2026-11-30T01:43:43+02:00        where the time is not UTC's)
 *
 * A year of 4 digits, a month and day of the calendar, 00-23, 00-59,
 * 00-60 (a leap second), a fraction of 1 to 9 digits or none, then 'Z' or
 * an offset of +-HH:MM, and nothing else: 0 and *t (seconds since the
 * epoch, the fraction dropped), or -EIO.  (Before, sscanf took any text
 * that began with a date, and anything else read as 0, the epoch: the
 * oldest of all, the first that age gc removed.)
 */
static int s3list_date(const char *s, size_t n, int64_t *t)
{
	static const unsigned mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, mo, d, h, mi, se, oh = 0, om = 0;
	size_t i = 19, f;
	if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
	    s[13] != ':' || s[16] != ':')
		return -EIO;
	y = s3list_digits(s, 4);
	mo = s3list_digits(s + 5, 2);
	d = s3list_digits(s + 8, 2);
	h = s3list_digits(s + 11, 2);
	mi = s3list_digits(s + 14, 2);
	se = s3list_digits(s + 17, 2);
	if (y < 0 || mo < 1 || mo > 12 || d < 1 || (unsigned)d > mdays[mo - 1] || h < 0 ||
	    h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
		return -EIO;
	if (mo == 2 && d == 29 && (y % 4 || (y % 100 == 0 && y % 400)))
		return -EIO;
	if (s[i] == '.') {
		for (f = ++i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == f || i - f > 9)
			return -EIO;
	}
	if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
		/* UTC */
	} else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		oh = s3list_digits(s + i + 1, 2);
		om = s3list_digits(s + i + 4, 2);
		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return -EIO;
		if (s[i] == '-') {
			oh = -oh;
			om = -om;
		}
	} else {
		return -EIO;
	}
	*t = s3list_days(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se -
	     (oh * 3600 + om * 60);
	return 0;
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
static int s3list_top(struct s3list_top *top, const char *a, const char *end)
{
	if (s3list_find(a, end, S3LIST_CONTENTS_END) ||
	    s3list_top1(a, end, "<IsTruncated>", "</IsTruncated>", &top->trunc, &top->trunc_len) ||
	    s3list_top1(a, end, "<NextContinuationToken>", "</NextContinuationToken>",
			&top->next, &top->next_len))
		return -EIO;
	return 0;
}

/* The character reference at s[0..n) ("&#233;", "&#xe9;"; s[0] is '&',
 * s[1] '#'): its code point, *used its bytes; -EIO for one that is no
 * character (0, a surrogate, over 0x10FFFF), has no digits, more than
 * S3LIST_REF_DIGITS, or no ';' after them ("&#X41;": XML's 'x' is lower
 * case). */
static int32_t s3list_ref(const char *s, size_t n, size_t *used)
{
	size_t i = 2, d0;
	unsigned base = 10;
	int32_t v = 0;
	if (i < n && s[i] == 'x') {
		base = 16;
		i++;
	}
	for (d0 = i; i < n && i - d0 < S3LIST_REF_DIGITS; i++) {
		unsigned c = (unsigned char)s[i], dv;
		if (c >= '0' && c <= '9')
			dv = c - '0';
		else if (base == 16 && (c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			dv = (c | 0x20) - 'a' + 10;
		else
			break;
		v = v * (int32_t)base + (int32_t)dv;
	}
	if (i == d0 || i >= n || s[i] != ';' || v == 0 || v > 0x10FFFF ||
	    (v >= 0xD800 && v <= 0xDFFF))
		return -EIO;
	*used = i + 1;
	return v;
}

/* XML text s[0..n) (a key, a token, as sent) back to its bytes in out
 * (cap bytes with the NUL): S3 orders keys by their bytes, not their
 * escapes ("x<" after "x0", "x&lt;" before it).  XML's five names and
 * character references (in UTF-8: "&#233;" is C3 A9) are read; another
 * '&' stays as it is.  The length, or -EIO for a character reference that
 * is none (s3list_ref) or bytes that do not fit out. */
static int s3list_unescape(const char *s, size_t n, char *out, size_t cap)
{
	static const struct { const char *e; char c; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};
	size_t o = 0, i = 0;
	while (i < n) {
		char u[4];
		size_t k = 1, used = 1;
		u[0] = s[i];
		if (s[i] == '&' && i + 1 < n && s[i + 1] == '#') {
			int32_t v = s3list_ref(s + i, n - i, &used);
			if (v < 0)
				return -EIO;
			if (v < 0x80) {
				u[0] = (char)v;
			} else if (v < 0x800) {
				u[0] = (char)(0xC0 | v >> 6);
				u[1] = (char)(0x80 | (v & 0x3F));
				k = 2;
			} else if (v < 0x10000) {
				u[0] = (char)(0xE0 | v >> 12);
				u[1] = (char)(0x80 | (v >> 6 & 0x3F));
				u[2] = (char)(0x80 | (v & 0x3F));
				k = 3;
			} else {
				u[0] = (char)(0xF0 | v >> 18);
				u[1] = (char)(0x80 | (v >> 12 & 0x3F));
				u[2] = (char)(0x80 | (v >> 6 & 0x3F));
				u[3] = (char)(0x80 | (v & 0x3F));
				k = 4;
			}
		} else if (s[i] == '&') {
			for (size_t e = 0; e < sizeof(ents) / sizeof(ents[0]); e++) {
				size_t el = strlen(ents[e].e);
				if (n - i >= el && !memcmp(s + i, ents[e].e, el)) {
					u[0] = ents[e].c;
					used = el;
					break;
				}
			}
		}
		if (cap - o <= k)
			return -EIO;
		memcpy(out + o, u, k);
		o += k;
		i += used;
	}
	out[o] = 0;
	return (int)o;
}

/* The page's entry after l->page[*pos]: 1, *e (its key in l->key) and
 * *pos past it; 0 when there is none (*pos the page's end); -EIO when it
 * is malformed.  With top (the check's pass), the top level before it
 * (or before the page's end) is read into *top and checked too. */
static int s3list_entry(struct s3list *l, size_t *pos, struct s3list_entry *e,
			struct s3list_top *top)
{
	const char *pend, *p, *end, *v;
	char sz[32];
	size_t n;
	int kl;
	if (!l->page || *pos >= l->page_len)
		return 0;
	pend = l->page + l->page_len;
	p = s3list_find(l->page + *pos, pend, S3LIST_CONTENTS);
	if (top && s3list_top(top, l->page + *pos, p ? p : pend) < 0)
		return -EIO;
	if (!p) {
		*pos = l->page_len;
		return 0;
	}
	/* The entry: closed, and nothing opened in it. */
	p += strlen(S3LIST_CONTENTS);
	end = s3list_find(p, pend, S3LIST_CONTENTS_END);
	if (!end || s3list_find(p, end, S3LIST_CONTENTS))
		return -EIO;
	*pos = (size_t)(end - l->page) + strlen(S3LIST_CONTENTS_END);
	if (!(v = s3list_tag(p, end, "<Key>", "</Key>", &n)) ||
	    (kl = s3list_unescape(v, n, l->key, sizeof(l->key))) < 1 ||
	    strncmp(l->key, l->prefix, l->prefix_len))
		return -EIO;
	/* S3 sends both with every entry: one without is not "nothing here". */
	if (!(v = s3list_tag(p, end, "<Size>", "</Size>", &n)) || n >= sizeof(sz))
		return -EIO;
	memcpy(sz, v, n);
	sz[n] = 0;
	if (s3list_size(sz, &e->size) < 0 ||
	    !(v = s3list_tag(p, end, "<LastModified>", "</LastModified>", &n)) ||
	    s3list_date(v, n, &e->mtime_s) < 0)
		return -EIO;
	e->key = l->key;
	return 1;
}

/* The first pass (s3list.h: all or nothing): every entry, keys in order
 * from l->last on, and the top level; l->keys, l->end and l->tok. */
static int s3list_check(struct s3list *l)
{
	struct s3list_top top = { 0 };
	struct s3list_entry e;
	size_t pos = 0;
	int r, n;
	if (l->page && memchr(l->page, 0, l->page_len))
		return -EIO; /* strnlen would cut such a page short */
	while ((r = s3list_entry(l, &pos, &e, &top)) > 0) {
		if (strcmp(e.key, l->last) <= 0)
			return -EIO;
		strcpy(l->last, e.key); /* both S3LIST_KEY_MAX + 1 */
		l->keys++;
	}
	if (r < 0 || !top.trunc)
		return -EIO; /* an empty body too: it says nothing */
	if ((top.trunc_len == 5 && !memcmp(top.trunc, "false", 5)) ||
	    (top.trunc_len == 1 && top.trunc[0] == '0')) {
		l->end = 0;
		return 0;
	}
	if (!(top.trunc_len == 4 && !memcmp(top.trunc, "true", 4)) &&
	    !(top.trunc_len == 1 && top.trunc[0] == '1'))
		return -EIO;
	/* The token as sent is XML ("a&amp;b"): sent back, it is its bytes
	 * ("a&b"), as every SDK's XML reader would give them.  Ceph RGW's and
	 * SeaweedFS's tokens are the last key, escaped like one. */
	if (!l->keys || !top.next)
		return -EIO;
	n = s3list_unescape(top.next, top.next_len, l->tok, sizeof(l->tok));
	if (n < 1 || !strcmp(l->tok, l->token))
		return -EIO;
	l->end = 1;
	return 0;
}

void s3list_init(struct s3list *l, const char *prefix)
{
	memset(l, 0, sizeof(*l));
	l->prefix = prefix;
	l->prefix_len = strlen(prefix);
}

int s3list_page(struct s3list *l, const char *page, size_t len)
{
	l->page = page;
	l->page_len = page ? len : 0;
	l->pos = 0;
	l->keys = 0;
	l->given = 0;
	l->end = 0;
	if (!l->bad && s3list_check(l) < 0)
		l->bad = true;
	return l->bad ? -EIO : 0;
}

int s3list_next(struct s3list *l, struct s3list_entry *e)
{
	int r;
	if (l->bad)
		return -EIO;
	if (l->given == l->keys)
		return 0;
	r = s3list_entry(l, &l->pos, e, NULL);
	if (r <= 0) { /* the check passed it: cannot be */
		l->bad = true;
		return -EIO;
	}
	l->given++;
	return 1;
}

int s3list_end(struct s3list *l)
{
	if (l->bad || l->given < l->keys)
		return -EIO; /* refused, or not all taken */
	if (l->end == 1)
		memcpy(l->token, l->tok, sizeof(l->token));
	return l->end;
}

/*
 * s3list.h - one page of an S3 ListObjectsV2 answer, parsed and checked
 * against what S3 promises of a listing (s3list.c).  The shared tier's S3
 * client (lib/tier/shared/shs3.c, shs3_list) walks a bucket page by page
 * through it; tests/fuzz/fuzz_s3list.c fuzzes it.  Pure: no I/O, no
 * allocation, no global state; one struct s3list per walk, one thread at
 * a time on it.
 *
 * A walk:
 *
 *   s3list_init(l, prefix);
 *   for each page (the first with no token, then with l->token):
 *       s3list_page(l, bytes, len);
 *       while ((r = s3list_next(l, &e)) > 0)  use e;
 *       if (r < 0)                           malformed: stop (-EIO)
 *       r = s3list_end(l);                   0: done, 1: l->token is the
 *                                            next page's, -EIO: malformed
 *
 * The checks (doc/security.md "A hostile or broken object store"): keys
 * come in strictly increasing byte order, compared after un-escaping
 * ("x&lt;" is "x<", after "x0"), across pages; each starts with the
 * prefix and is 1 to S3LIST_KEY_MAX bytes; every entry has a Key, a Size
 * of plain decimal digits that fit 64 bits and a LastModified, and is
 * closed before another opens; the page has no NUL and, outside its
 * entries, one IsTruncated and at most one NextContinuationToken; a page
 * that says it is truncated holds at least one key and a
 * NextContinuationToken of 1 to S3LIST_TOKEN_MAX bytes (un-escaped) other
 * than the one it answered.  Anything else is a malformed page: -EIO,
 * never a listing that says less than the page.  Each page is scanned
 * once, entry after entry.
 */
#ifndef KVT_S3LIST_H
#define KVT_S3LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3LIST_KEY_MAX 1024                   /* S3's longest object name, bytes */
#define S3LIST_KEY_XML_MAX (6 * S3LIST_KEY_MAX) /* ... escaped ("&quot;" for '"') */
#define S3LIST_TOKEN_MAX 1023                 /* a NextContinuationToken's bytes */

struct s3list {
	/* The walk */
	const char *prefix;          /* the caller's, for the walk's duration */
	size_t prefix_len;
	char last[S3LIST_KEY_MAX + 1];    /* the greatest key so far ("": none yet) */
	char token[S3LIST_TOKEN_MAX + 1]; /* the token the page answers ("": the first) */
	/* The page: the caller's bytes, until its s3list_end */
	const char *page;
	size_t page_len;
	size_t pos;                  /* where the next entry is searched from */
	unsigned keys;               /* keys taken from this page */
	bool bad;                    /* malformed: every call answers -EIO */
	const char *trunc, *next;    /* the texts of the page's IsTruncated and
				      * NextContinuationToken outside entries
				      * (as sent; NULL: none so far) */
	size_t trunc_len, next_len;
	char key[S3LIST_KEY_XML_MAX + 1]; /* the entry s3list_next returned;
					   * s3list_end's token, un-escaped */
};

/* One entry of a page. */
struct s3list_entry {
	const char *key;             /* un-escaped, NUL-terminated, in the struct
				      * s3list: valid until the next call on it */
	uint64_t size;               /* <Size>, bytes */
	int64_t mtime_s;             /* <LastModified>, seconds since the epoch;
				      * 0 if not "YYYY-MM-DDTHH:MM:SS..." */
};

/* A walk of the keys under prefix (kept, not copied). */
void s3list_init(struct s3list *l, const char *prefix);

/* The next page to parse: page[0..len) (page may be NULL when len is 0).
 * The bytes are the caller's and must stay until s3list_end.  A page
 * with a NUL in it is malformed (XML has none). */
void s3list_page(struct s3list *l, const char *page, size_t len);

/* The page's next entry: 1 and *e; 0 when no entry is left; -EIO when the
 * page is malformed (s3list.h's head: an entry without Key, Size or
 * LastModified, with a Size that is not 1 to 20 decimal digits without a
 * leading zero that fit 64 bits, not closed by </Contents>, with a
 * <Contents> in it, a </Contents> outside one; a key too long, not under
 * the prefix, not greater than the one before it; a NUL; IsTruncated or
 * NextContinuationToken twice outside entries, or not closed before the
 * next entry).  After -EIO every call answers -EIO: the walk is over. */
int s3list_next(struct s3list *l, struct s3list_entry *e);

/* After s3list_next returned 0: 0 when the listing ends with this page;
 * 1 when it is truncated, with l->token the NextContinuationToken
 * (un-escaped: "a&amp;b" is "a&b") to ask for the next page with; -EIO
 * when the page has no IsTruncated outside its entries, or one that is not
 * true, false, 1 or 0, or is truncated without a key, or without a token,
 * with an empty or too long one, or the one it answered. */
int s3list_end(struct s3list *l);

#endif

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
 *       if (s3list_page(l, bytes, len) < 0)  malformed: stop (-EIO)
 *       while ((r = s3list_next(l, &e)) > 0)  use e;
 *       r = s3list_end(l);                   0: done, 1: l->token is the
 *                                            next page's
 *
 * A page is all or nothing: s3list_page checks the whole of it, every
 * entry and the page's IsTruncated and NextContinuationToken, before
 * s3list_next gives its first entry, so that a caller that acts on each
 * entry (deletes it) never acts on a page that is then refused.
 *
 * The checks (doc/security.md "A hostile or broken object store"): keys
 * come in strictly increasing byte order, compared after un-escaping
 * ("x&lt;" is "x<", after "x0"), across pages; each starts with the
 * prefix and is 1 to S3LIST_KEY_MAX bytes; every entry has a Key, a Size
 * of plain decimal digits that fit 64 bits and a LastModified of RFC 3339
 * ("2026-11-29T23:43:43.000Z", s3list.c's s3list_date), and is closed
 * before another opens; character references ("&#233;", "&#x1F600;") are
 * code points 1 to 0x10FFFF but the surrogates, of at most 7 digits, and
 * read as their UTF-8; the page has no NUL and, outside its entries, one
 * IsTruncated and at most one NextContinuationToken; a page that says it
 * is truncated holds at least one key and a NextContinuationToken of 1 to
 * S3LIST_TOKEN_MAX bytes (un-escaped) other than the one it answered.
 * Anything else is a malformed page: -EIO before any entry, never a
 * listing that says less than the page.  Each page is scanned twice: once
 * to check it, once to give its entries.
 */
#ifndef KVT_S3LIST_H
#define KVT_S3LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3LIST_KEY_MAX 1024     /* S3's longest object name, bytes */
/* A NextContinuationToken's bytes, un-escaped: S3 keeps its tokens
 * opaque; MinIO's are base64 of a key (1,368 bytes for S3's longest),
 * Ceph RGW's and SeaweedFS's the key itself, kvtierd's the key in hex
 * (2,048): room for each with a margin. */
#define S3LIST_TOKEN_MAX 4096

struct s3list {
	/* The walk */
	const char *prefix;          /* the caller's, for the walk's duration */
	size_t prefix_len;
	char last[S3LIST_KEY_MAX + 1];    /* the greatest key checked so far ("": none) */
	char token[S3LIST_TOKEN_MAX + 1]; /* the token the page answers ("": the
					   * first); once s3list_end said 1, the
					   * next page's */
	/* The page: the caller's bytes, until its s3list_end */
	const char *page;
	size_t page_len;
	size_t pos;                  /* where the next entry is searched from */
	unsigned keys;               /* the page's keys (all checked) */
	unsigned given;              /* ... given by s3list_next so far */
	int end;                     /* s3list_end's answer: 0 or 1 */
	bool bad;                    /* malformed: every call answers -EIO */
	char key[S3LIST_KEY_MAX + 1]; /* the entry s3list_next returned */
	char tok[S3LIST_TOKEN_MAX + 1]; /* the page's token, while it is checked */
};

/* One entry of a page. */
struct s3list_entry {
	const char *key;             /* un-escaped, NUL-terminated, in the struct
				      * s3list: valid until the next call on it */
	uint64_t size;               /* <Size>, bytes */
	int64_t mtime_s;             /* <LastModified>, seconds since the epoch */
};

/* A walk of the keys under prefix (kept, not copied). */
void s3list_init(struct s3list *l, const char *prefix);

/* The next page: page[0..len) (page may be NULL when len is 0), checked
 * whole: 0, or -EIO when it is malformed (s3list.h's head: an entry
 * without Key, Size or LastModified, with a Size that is not 1 to 20
 * decimal digits without a leading zero that fit 64 bits, a LastModified
 * that is not RFC 3339, not closed by </Contents>, with a <Contents> in
 * it, a </Contents> outside one; a key too long, not under the prefix,
 * not greater than the one before it; a character reference that is no
 * character; a NUL; IsTruncated or NextContinuationToken twice outside
 * entries, or not closed before the next entry; no IsTruncated outside
 * the entries, or one that is not true, false, 1 or 0; truncated without
 * a key, or without a token, with an empty or too long one, or the one it
 * answered).  After -EIO every call answers -EIO: the walk is over, and
 * no entry of the page was given.  The bytes are the caller's and must
 * stay until s3list_end. */
int s3list_page(struct s3list *l, const char *page, size_t len);

/* The page's next entry: 1 and *e; 0 when no entry is left; -EIO when the
 * page was refused (s3list_page), before its first entry. */
int s3list_next(struct s3list *l, struct s3list_entry *e);

/* After s3list_next returned 0: 0 when the listing ends with this page;
 * 1 when it is truncated, with l->token the NextContinuationToken
 * (un-escaped: "a&amp;b" is "a&b") to ask for the next page with; -EIO
 * when the page was refused, or its entries not all taken. */
int s3list_end(struct s3list *l);

#endif

/*
 * fuzz_s3list.c - libFuzzer target for lib/fmt/s3list.c, the parse of an
 * S3 ListObjectsV2 page that the shared tier's S3 client (shs3_list)
 * reads from the object store: a hostile endpoint's bytes.
 *
 * Input: one selector byte (its low two bits pick the prefix: "",
 * "kvt1/", "kvt1/a", "x"), then one or more pages separated by "\n\1\n";
 * each page goes to the parser in a buffer of exactly its size (no NUL
 * after it, so ASan sees any read past it), and the walk goes on to the
 * next page while the last one said it was truncated, as shs3_list does.
 *
 * Properties, across the pages of one walk: every key returned is 1 to
 * S3LIST_KEY_MAX bytes, starts with the prefix and is greater than the one
 * before it, and its date lies in the years 0000 to 9999 (a day either
 * side: offsets); a page is all or nothing: refused by s3list_page, it
 * gives no entry (s3list_next and s3list_end say -EIO at once), taken,
 * it gives every key it counted (no entry is skipped) and s3list_end says
 * 0 or 1, never -EIO; a truncated page gave at least one key and a token
 * of 1 to S3LIST_TOKEN_MAX bytes other than the one before; after 0
 * s3list_next keeps returning 0; a walk refused stays refused.  Returns 0
 * always; a broken property traps.  Seed corpus: tests/fuzz/corpus/s3list/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "s3list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const prefixes[] = { "", "kvt1/", "kvt1/a", "x" };
static const char sep[] = "\n\1\n";
/* 0000-01-01T00:00:00+23:59 and 9999-12-31T23:59:60-23:59, in epoch seconds */
#define MTIME_MIN (INT64_C(-62167219200) - 86400)
#define MTIME_MAX (INT64_C(253402300800) + 86400)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct s3list l; /* 10 KiB: not on libFuzzer's stack */
	static char prev_key[S3LIST_KEY_MAX + 1], prev_token[S3LIST_TOKEN_MAX + 1];
	const char *in, *end, *prefix;
	struct s3list_entry e;

	if (size < 1)
		return 0;
	prefix = prefixes[data[0] & 3];
	in = (const char *)data + 1;
	end = (const char *)data + size;
	s3list_init(&l, prefix);
	prev_key[0] = 0;
	prev_token[0] = 0;
	for (;;) {
		const char *cut = memmem(in, (size_t)(end - in), sep, sizeof(sep) - 1);
		size_t len = (size_t)((cut ? cut : end) - in);
		char *page = malloc(len ? len : 1);
		unsigned got = 0;
		int rc;
		if (!page)
			return 0;
		memcpy(page, in, len);
		rc = s3list_page(&l, len ? page : NULL, len);
		if (rc < 0) {
			/* refused whole: not one entry */
			FUZZ_CHECK(rc == -EIO);
			FUZZ_CHECK(s3list_next(&l, &e) == -EIO);
			FUZZ_CHECK(s3list_end(&l) == -EIO);
			FUZZ_CHECK(s3list_page(&l, "", 0) == -EIO);
			free(page);
			return 0;
		}
		FUZZ_CHECK(rc == 0);
		while ((rc = s3list_next(&l, &e)) > 0) {
			size_t n = strlen(e.key);
			FUZZ_CHECK(n >= 1 && n <= S3LIST_KEY_MAX);
			FUZZ_CHECK(!strncmp(e.key, prefix, strlen(prefix)));
			FUZZ_CHECK(strcmp(e.key, prev_key) > 0);
			FUZZ_CHECK(e.mtime_s >= MTIME_MIN && e.mtime_s <= MTIME_MAX);
			memcpy(prev_key, e.key, n + 1);
			got++;
		}
		FUZZ_CHECK(rc == 0); /* taken: every entry, none refused */
		FUZZ_CHECK(s3list_next(&l, &e) == 0);
		FUZZ_CHECK(l.keys == got);
		rc = s3list_end(&l);
		free(page);
		FUZZ_CHECK(rc == 0 || rc == 1);
		if (rc == 0)
			return 0;
		FUZZ_CHECK(rc == 1 && l.keys >= 1);
		FUZZ_CHECK(l.token[0] && strlen(l.token) <= S3LIST_TOKEN_MAX);
		FUZZ_CHECK(strcmp(l.token, prev_token) != 0);
		memcpy(prev_token, l.token, strlen(l.token) + 1);
		if (!cut)
			return 0; /* truncated, but no next page in the input */
		in = cut + sizeof(sep) - 1;
	}
}

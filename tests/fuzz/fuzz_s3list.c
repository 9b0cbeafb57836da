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
 * before it; a page read to its end returned every key it counted (no
 * entry is skipped); a truncated page gave at least one key and a token
 * of 1 to S3LIST_TOKEN_MAX bytes other than the one before; after 0
 * s3list_next keeps returning 0, after -EIO it keeps returning -EIO, and
 * s3list_end then says -EIO too.  Returns 0 always; a broken
 * property traps.  Seed corpus: tests/fuzz/corpus/s3list/.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "s3list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const prefixes[] = { "", "kvt1/", "kvt1/a", "x" };
static const char sep[] = "\n\1\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct s3list l; /* 8 KiB: not on libFuzzer's stack */
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
		s3list_page(&l, len ? page : NULL, len);
		while ((rc = s3list_next(&l, &e)) > 0) {
			size_t n = strlen(e.key);
			FUZZ_CHECK(n >= 1 && n <= S3LIST_KEY_MAX);
			FUZZ_CHECK(!strncmp(e.key, prefix, strlen(prefix)));
			FUZZ_CHECK(strcmp(e.key, prev_key) > 0);
			memcpy(prev_key, e.key, n + 1);
			got++;
		}
		if (rc < 0) {
			FUZZ_CHECK(rc == -EIO);
			FUZZ_CHECK(s3list_next(&l, &e) == -EIO);
			FUZZ_CHECK(s3list_end(&l) == -EIO);
			free(page);
			return 0;
		}
		FUZZ_CHECK(s3list_next(&l, &e) == 0);
		FUZZ_CHECK(l.keys == got);
		rc = s3list_end(&l);
		free(page);
		if (rc <= 0) {
			FUZZ_CHECK(rc == 0 || rc == -EIO);
			return 0;
		}
		FUZZ_CHECK(rc == 1 && l.keys >= 1);
		FUZZ_CHECK(l.token[0] && strlen(l.token) <= S3LIST_TOKEN_MAX);
		FUZZ_CHECK(strcmp(l.token, prev_token) != 0);
		memcpy(prev_token, l.token, strlen(l.token) + 1);
		if (!cut)
			return 0; /* truncated, but no next page in the input */
		in = cut + sizeof(sep) - 1;
	}
}

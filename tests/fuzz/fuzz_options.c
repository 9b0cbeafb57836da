/*
 * fuzz_options.c - libFuzzer target for the store's option parser
 * (kvt_store_set_option, lib/store.c): what users hand it as name=value
 * strings, through kvtierd --set, the CLI's options and the Python
 * binding.
 *
 * The input is "name=value" lines (split at the first '='; a line without
 * one is a name with an empty value).  Each is set on a store that is
 * created, never opened, and destroyed at the end (LeakSanitizer checks
 * that every string an option kept is freed, including one replaced by a
 * later line).  Properties, each a trap when broken:
 *   - the result is 0, KVT_EOPTION, KVT_EOPTVAL or -ENOMEM (never
 *     KVT_ESTATE before open, never KVT_ENULL);
 *   - a name outside the list below is never accepted (a prefix or a
 *     suffix of a real name is not an option);
 *   - setting the same line twice gives the same result.
 * Seed corpus: tests/fuzz/corpus/options/ (every option, good and bad
 * values).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"
#include "fuzz.h"

/* The library's own table of options (kvt_option_info): the fuzzer's list
 * can no longer go stale. */
static int is_known(const char *name)
{
	struct kvt_option o;
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (strcmp(name, o.name) == 0)
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvt_store *s;
	char *text, *line, *next;

	if (size > 65536)
		return 0;
	FUZZ_CHECK(kvt_store_create(&s) == 0);
	text = malloc(size + 1);
	FUZZ_CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = 0;
	for (line = text; line; line = next) {
		char *eq, *value = "";
		int rc;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		eq = strchr(line, '=');
		if (eq) {
			*eq = 0;
			value = eq + 1;
		}
		/* Allocation failures are the allocator's test, not this one's. */
		if (strcmp(line, "debug.fail_alloc") == 0)
			continue;
		rc = kvt_store_set_option(s, line, value);
		FUZZ_CHECK(rc == 0 || rc == KVT_EOPTION || rc == KVT_EOPTVAL || rc == -ENOMEM);
		FUZZ_CHECK(rc != 0 || is_known(line));
		FUZZ_CHECK(kvt_store_set_option(s, line, value) == rc);
	}
	free(text);
	kvt_store_destroy(s);
	return 0;
}

/*
 * fuzz_logjson.c - libFuzzer target for kvtierd's --log-format json
 * (kvtd_log_json, daemon/logjson.c), which parses the logfmt fields of a
 * log event back into pairs.  Field values hold what clients sent (tenant
 * names, keys, addresses), quoted by kvtd_log_quote (daemon/log.c).
 *
 * Properties, each a trap when broken:
 *   - any bytes as the fields string give NULL (no memory) or a line that
 *     jansson parses back as an object whose ts, level and msg are the
 *     ones given, in that order, with no newline in the line;
 *   - a printable ASCII value quoted by kvtd_log_quote, as "k=<quoted>",
 *     comes back as that exact string (or, if it is a decimal integer of
 *     at most 18 digits, as that number).
 * Seed corpus: tests/fuzz/corpus/logjson/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"
#include "fuzz.h"

static json_t *fuzz_parse(const char *fields)
{
	char *line = kvtd_log_json("2026-01-01T00:00:00.000000Z", "info", NULL, "m", fields);
	json_t *o;
	const char *k;
	json_t *v;
	int i = 0;

	if (!line)
		return NULL;
	FUZZ_CHECK(!strchr(line, '\n'));
	o = json_loads(line, 0, NULL);
	FUZZ_CHECK(o && json_is_object(o));
	json_object_foreach(o, k, v) {
		static const char *const fixed[] = { "ts", "level", "msg" };
		if (i < 3)
			FUZZ_CHECK(strcmp(k, fixed[i]) == 0);
		i++;
	}
	FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "msg")), "m") == 0);
	FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "level")), "info") == 0);
	free(line);
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), q[1100], f[1200];
	bool printable = size > 0 && size < 200;
	json_t *o;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	o = fuzz_parse(s);
	json_decref(o);

	for (size_t i = 0; i < size; i++)
		printable &= data[i] >= 0x20 && data[i] < 0x7f;
	if (printable) {
		snprintf(f, sizeof(f), "k=%s", kvtd_log_quote(q, sizeof(q), s));
		o = fuzz_parse(f);
		if (o) {
			json_t *v = json_object_get(o, "k");
			if (json_is_integer(v))
				FUZZ_CHECK(strtoll(s, NULL, 10) == json_integer_value(v));
			else
				FUZZ_CHECK(json_is_string(v) && strcmp(json_string_value(v), s) == 0);
			json_decref(o);
		}
	}
	free(s);
	return 0;
}

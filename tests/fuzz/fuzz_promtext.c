/*
 * fuzz_promtext.c - libFuzzer target for the Prometheus text reader of
 * `kvtier top` (cli/promtext.c), which reads whatever a --metrics address
 * answers.
 *
 * Properties, each a trap when broken:
 *   - pt_parse never fails but for -ENOMEM and never reports more skipped
 *     lines than there are lines;
 *   - every sample's name is a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) and
 *     its labels fit;
 *   - pt_label on any key, into any buffer size, stays in bounds (ASan)
 *     and NUL-terminates what it returns; pt_sum of a sample's own name
 *     finds it;
 *   - parsing is deterministic: the same text again gives the same samples.
 * Seed corpus: tests/fuzz/corpus/promtext/ (a real kvtierd /metrics page).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "promtext.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_set a = { 0 }, b = { 0 };
	size_t lines = 1;
	int ra, rb;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	ra = pt_parse(&a, (const char *)data, size);
	rb = pt_parse(&b, (const char *)data, size);
	if (ra < 0 || rb < 0)
		goto out;
	FUZZ_CHECK((size_t)ra <= lines && ra == rb && a.n == b.n);
	for (size_t i = 0; i < a.n; i++) {
		const struct pt_sample *s = &a.v[i];
		char v[8], big[PT_LABELS_MAX];
		int found = 0;
		FUZZ_CHECK(strcmp(s->name, b.v[i].name) == 0 &&
			   strcmp(s->labels, b.v[i].labels) == 0 &&
			   (s->value == b.v[i].value || (isnan(s->value) && isnan(b.v[i].value))));
		FUZZ_CHECK(s->name[0] && strlen(s->name) < PT_NAME_MAX);
		for (const char *p = s->name; *p; p++)
			FUZZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				   *p == '_' || *p == ':' || (p != s->name && *p >= '0' && *p <= '9'));
		FUZZ_CHECK(strlen(s->labels) < PT_LABELS_MAX);
		if (pt_label(s, "le", v, sizeof(v)) == 0)
			FUZZ_CHECK(strlen(v) < sizeof(v));
		if (pt_label(s, "tenant", big, sizeof(big)) == 0)
			FUZZ_CHECK(strlen(big) < sizeof(big));
		pt_label(s, "", v, 1);
		pt_sum(&a, s->name, NULL, NULL, &found);
		FUZZ_CHECK(found >= 1);
	}
out:
	pt_free(&a);
	pt_free(&b);
	return 0;
}

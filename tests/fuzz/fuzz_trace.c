/*
 * fuzz_trace.c - libFuzzer target for the replay's trace-line parser
 * (cli/trace.c rp_parse_line): any bytes either parse into a request that
 * keeps the trace's invariants or are refused with a message; never a
 * crash, a leak or a read past len.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so ASan sees any read past the end. */
	char *line = malloc(size ? size : 1);
	char err[256];
	struct rp_req r;

	if (line == NULL)
		return 0;
	memcpy(line, data, size);
	if (rp_parse_line(line, size, &r, err, sizeof err) == 0) {
		if (r.input_len == 0 || r.n_ids == 0 || r.n_ids > RP_IDS_MAX ||
		    r.n_ids != (r.input_len + RP_BLOCK_TOKENS - 1) / RP_BLOCK_TOKENS)
			abort();
		uint64_t sum = 0;
		for (uint32_t i = 0; i < r.n_ids; i++)
			sum += rp_block_tokens(&r, i);
		if (sum != r.input_len)
			abort();
		free(r.ids);
	} else if (err[0] == '\0') {
		abort(); /* a refusal always says why */
	}
	free(line);
	return 0;
}

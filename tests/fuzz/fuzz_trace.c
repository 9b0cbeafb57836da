/*
 * fuzz_trace.c - libFuzzer target for the replay's trace-line parser
 * (cli/trace.c rp_parse_line, then rp_trace_check on the one line): any
 * bytes either parse into a request that keeps the trace's invariants or
 * are refused with a message; never a crash, a leak or a read past len.
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
		/* as the trace of this one line (the block size found), then
		 * told Mooncake's 512: either fits it or says why */
		struct rp_trace one = { .reqs = &r, .count = 1 };
		uint64_t ln = 1;
		uint32_t bt[2] = { 0, RP_BLOCK_TOKENS };
		if (r.input_len == 0 || r.n_ids == 0 || r.n_ids > RP_IDS_MAX)
			abort();
		for (int k = 0; k < 2; k++) {
			err[0] = '\0';
			if (rp_trace_check(&one, &ln, bt[k], NULL, err, sizeof err) < 0) {
				if (err[0] == '\0')
					abort();
				continue;
			}
			if (r.block_tokens == 0 || (bt[k] && r.block_tokens != bt[k]) ||
			    r.n_ids != (r.input_len + r.block_tokens - 1) / r.block_tokens)
				abort();
			uint64_t sum = 0;
			for (uint32_t i = 0; i < r.n_ids; i++)
				sum += rp_block_tokens(&r, i);
			if (sum != r.input_len)
				abort();
		}
		free(r.ids);
	} else if (err[0] == '\0') {
		abort(); /* a refusal always says why */
	}
	free(line);
	return 0;
}

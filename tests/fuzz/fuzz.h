/*
 * fuzz.h - what every fuzz target shares: FUZZ_CHECK, an invariant that
 * must hold whatever the input.  It traps, so libFuzzer (and the smoke and
 * regression runs) report the input that broke it as a crash, also in
 * builds without assertions.
 */
#ifndef KVT_FUZZ_H
#define KVT_FUZZ_H

#define FUZZ_CHECK(c)                   \
	do {                            \
		if (!(c))               \
			__builtin_trap(); \
	} while (0)

#endif

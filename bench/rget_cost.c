/*
 * rget_cost.c - what the remote tier's client spends on a put and on a get
 * into the caller's buffers (remote_get_into), counted in instructions
 * with valgrind --tool=callgrind.  Not built by meson: a one-off
 * measurement kept with its figures (bench/RESULTS.md, getdel26).
 *
 * One store over a running kvtierd (ADDR), remote.put_local=never: N puts
 * of 16 KiB (on the server only; a second run's are KVT_EXISTS there),
 * then ROUNDS rounds of kvt_get of all N into the caller's buffer (remote
 * direct gets: the value is not kept in local DRAM, so each is a round
 * trip).  Exits 1 if a put fails or a get is wrong.
 *
 *   cc -O2 -Iinclude -Ibuild-release bench/rget_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/rget_cost
 *   valgrind --tool=callgrind /tmp/rget_cost 127.0.0.1:PORT 4096 2
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"

#define VLEN 16384

static struct kvt_key key_of(uint64_t i)
{
	struct kvt_key k = { .len = 32 };
	for (int j = 0; j < 4; j++) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)j * 0xbf58476d1ce4e5b9ull;
		memcpy(k.bytes + 8 * j, &x, 8);
	}
	return k;
}

int main(int argc, char **argv)
{
	struct kvt_ns_desc d = { .model = "rget-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t v[VLEN], out[VLEN];
	struct kvt_store *s;
	uint64_t n;
	int rounds;
	uint32_t ns;

	if (argc < 4)
		return fprintf(stderr, "usage: rget_cost ADDR N ROUNDS\n"), 2;
	n = strtoull(argv[2], NULL, 0);
	rounds = atoi(argv[3]);
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "dram.capacity", "1G") < 0 ||
	    kvt_store_set_option(s, "remote.addr", argv[1]) < 0 ||
	    kvt_store_set_option(s, "remote.put_local", "never") < 0 || kvt_store_open(s) < 0 ||
	    kvt_ns_register(s, &d, &ns) < 0)
		return fprintf(stderr, "the store did not open\n"), 1;
	for (uint64_t i = 0; i < n; i++) {
		struct kvt_key k = key_of(i);
		memset(v, (int)(i * 7), sizeof(v));
		if (kvt_put(s, ns, &k, &(struct iovec){ v, sizeof(v) }, 1) < 0)
			return fprintf(stderr, "put %llu failed\n", (unsigned long long)i), 1;
	}
	for (int r = 0; r < rounds; r++)
		for (uint64_t i = 0; i < n; i++) {
			struct kvt_key k = key_of(i);
			uint64_t len = 0;
			if (kvt_get(s, ns, &k, out, sizeof(out), &len) != KVT_OK ||
			    out[VLEN - 1] != (uint8_t)(i * 7))
				return fprintf(stderr, "get %llu wrong\n", (unsigned long long)i), 1;
		}
	kvt_store_destroy(s);
	return 0;
}

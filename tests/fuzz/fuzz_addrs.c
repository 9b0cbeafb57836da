/*
 * fuzz_addrs.c - libFuzzer target for the remote.addrs parser
 * (cluster_parse_addrs, lib/cluster.c) and the placement built from what
 * it accepts (placement_new, placement_rank, lib/placement.c).
 *
 * The input is the option's text.  Properties: never a crash or a read
 * outside the input; every entry it accepts lies inside the input, has
 * no blank at either end, a weight of 1..1000000; writing the entries
 * back as "ADDR=WEIGHT,..." parses to the same entries; a list of
 * distinct names makes a placement whose rankings name every member once,
 * live members first.  Returns 0 always; a broken property traps.
 * Seed corpus: tests/fuzz/corpus/addrs/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "placement.h"
#include "fuzz.h"

#define MAXN 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cluster_entry e[MAXN], e2[MAXN];
	static char text[MAXN * (CLUSTER_ADDR_MAX + 16)];
	static char names[MAXN][CLUSTER_ADDR_MAX + 1];
	const char *list = (const char *)data;
	struct placement_member pm[MAXN];
	struct placement *p = NULL;
	struct kvt_mem mem;
	size_t off = 0;
	int n, n2;

	n = cluster_parse_addrs(list, size, e, MAXN);
	if (n < 0) {
		FUZZ_CHECK(n == KVT_EOPTVAL);
		return 0;
	}
	FUZZ_CHECK(n >= 1 && n <= MAXN);
	for (int i = 0; i < n; i++) {
		FUZZ_CHECK(e[i].addr >= list && e[i].addr + e[i].addr_len <= list + size);
		FUZZ_CHECK(e[i].addr_len >= 1 && e[i].addr_len <= CLUSTER_ADDR_MAX);
		FUZZ_CHECK(e[i].addr[0] != ' ' && e[i].addr[0] != '\t');
		FUZZ_CHECK(e[i].addr[e[i].addr_len - 1] != ' ' && e[i].addr[e[i].addr_len - 1] != '\t');
		FUZZ_CHECK(memchr(e[i].addr, ',', e[i].addr_len) == NULL);
		FUZZ_CHECK(e[i].weight >= 1 && e[i].weight <= PLACEMENT_WEIGHT_MAX);
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s%.*s=%u", i ? "," : "",
					(int)e[i].addr_len, e[i].addr, e[i].weight);
	}
	/* An address may end in "=digits" itself only if a weight followed. */
	n2 = cluster_parse_addrs(text, off, e2, MAXN);
	if (memchr(list, 0, size) == NULL) {
		FUZZ_CHECK(n2 == n);
		for (int i = 0; i < n; i++) {
			FUZZ_CHECK(e2[i].addr_len == e[i].addr_len && e2[i].weight == e[i].weight);
			FUZZ_CHECK(memcmp(e2[i].addr, e[i].addr, e[i].addr_len) == 0);
		}
	}
	/* A placement over them (when the names, as C strings, differ). */
	for (int i = 0; i < n; i++) {
		memcpy(names[i], e[i].addr, e[i].addr_len);
		names[i][e[i].addr_len] = 0;
		pm[i].name = names[i];
		pm[i].weight = e[i].weight;
	}
	kvt_mem_init(&mem);
	if (placement_new(&p, pm, (unsigned)n, &mem) == 0) {
		for (uint64_t a = 0; a < 4; a++) {
			unsigned out[MAXN], seen[MAXN] = { 0 };
			bool skip[MAXN];
			unsigned k;
			for (int i = 0; i < n; i++)
				skip[i] = ((a >> (i % 3)) & 1) != 0;
			k = placement_rank(p, a * 0x9e3779b97f4a7c15ull, skip, out, (unsigned)n);
			FUZZ_CHECK(k == (unsigned)n);
			for (unsigned i = 0; i < k; i++) {
				FUZZ_CHECK(out[i] < (unsigned)n && !seen[out[i]]);
				seen[out[i]] = 1;
				if (i > 0 && skip[out[i - 1]])
					FUZZ_CHECK(skip[out[i]]); /* live ones first */
			}
		}
		placement_free(p);
	}
	FUZZ_CHECK(mem.bytes == 0);
	return 0;
}

/*
 * open_delete_cost.c - what a LOOKUP (and a GET) costs the remote tier's
 * client while many DELETEs are out and not yet answered (the "open
 * deletes": remote.c remove_prefix, remove_shadows).  Not built by meson:
 * a one-off measurement kept with its figures (bench/RESULTS.md,
 * lookup43); built against each tree compared.
 *
 * One store over a running kvtierd (ADDR, its process PID),
 * remote.put_local=never: one put (the connection up, the namespace
 * registered), then the server is stopped (SIGSTOP) and DELETES deletes
 * of distinct keys are submitted: none is answered, all stay open.  Then
 * ROUNDS times: one LOOKUP of KEYS other keys (none deleted: each is
 * tested against the open deletes) and KEYS EXISTS of those keys, each
 * kvt_submit timed (the membership tests run on the submitting thread,
 * under the head's put_lock).  The server is let go (SIGCONT) and every
 * request waited for.  Prints the median and the worst of the rounds.
 * Exits 1 if a submission fails or a delete is neither KVT_OK nor KVT_MISS.
 *
 *   cc -O2 -Iinclude -Ibuild-release bench/open_delete_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/open_delete_cost
 *   build-release/daemon/kvtierd --dir D --listen 127.0.0.1:P --dram 64M --ssd 0 &
 *   /tmp/open_delete_cost 127.0.0.1:P $! 16384 1024 5
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "kvtier.h"

#define MAXR 64

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct kvt_key key_of(uint64_t i, uint64_t salt)
{
	struct kvt_key k = { .len = 32 };
	for (int j = 0; j < 4; j++) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^
			     (salt + (uint64_t)j) * 0xbf58476d1ce4e5b9ull;
		memcpy(k.bytes + 8 * j, &x, 8);
	}
	return k;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int submit(struct kvt_queue *q, struct kvt_req *r, struct kvt_req **ptrs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ptrs[i] = &r[i];
	for (uint32_t i = 0; i < n;) {
		uint32_t m = n - i < 65536 ? n - i : 65536;
		if (kvt_submit(q, ptrs + i, m) < 0)
			return -1;
		i += m;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct kvt_ns_desc d = { .model = "open-delete-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t v[4096];
	uint64_t t_lookup[MAXR], t_gets[MAXR];
	struct kvt_store *s;
	struct kvt_queue *q;
	struct kvt_req *dels, *gets, lookups[MAXR], **ptrs, **done;
	struct kvt_key *keys, k0 = key_of(0, 99);
	uint32_t nd, nk, ns, total;
	int rounds, bad = 0;
	pid_t pid;

	if (argc < 6)
		return fprintf(stderr, "usage: open_delete_cost ADDR PID DELETES KEYS ROUNDS\n"), 2;
	pid = (pid_t)atoi(argv[2]);
	nd = (uint32_t)strtoul(argv[3], NULL, 0);
	nk = (uint32_t)strtoul(argv[4], NULL, 0);
	rounds = atoi(argv[5]);
	if (rounds < 1 || rounds > MAXR || nk == 0)
		return fprintf(stderr, "ROUNDS 1..%d, KEYS > 0\n", MAXR), 2;
	total = nd + (uint32_t)rounds * (nk + 1);
	dels = calloc(nd ? nd : 1, sizeof(*dels));
	gets = calloc((size_t)rounds * nk, sizeof(*gets));
	keys = calloc(nk, sizeof(*keys));
	ptrs = calloc(total, sizeof(*ptrs));
	done = calloc(total, sizeof(*done));
	if (!dels || !gets || !keys || !ptrs || !done)
		return 1;
	if (kvt_store_create(&s) < 0 || kvt_store_set_option(s, "dram.capacity", "64M") < 0 ||
	    kvt_store_set_option(s, "remote.addr", argv[1]) < 0 ||
	    kvt_store_set_option(s, "remote.put_local", "never") < 0 ||
	    kvt_store_set_option(s, "remote.timeout_ms", "60000") < 0 || kvt_store_open(s) < 0 ||
	    kvt_ns_register(s, &d, &ns) < 0 ||
	    kvt_put(s, ns, &k0, &(struct iovec){ v, sizeof(v) }, 1) < 0 ||
	    kvt_queue_create(s, &q) < 0)
		return fprintf(stderr, "setup failed\n"), 1;
	if (kill(pid, SIGSTOP) < 0)
		return perror("SIGSTOP"), 1;
	for (uint32_t i = 0; i < nd; i++)
		dels[i] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = ns, .key = key_of(i, 1) };
	if (submit(q, dels, ptrs, nd) < 0)
		return fprintf(stderr, "delete submit failed\n"), 1;
	for (uint32_t i = 0; i < nk; i++)
		keys[i] = key_of(i, 2);
	for (int r = 0; r < rounds; r++) {
		struct kvt_req *g = gets + (size_t)r * nk;
		uint64_t t0;
		lookups[r] = (struct kvt_req){ .op = KVT_OP_LOOKUP, .ns = ns, .keys = keys,
					       .key_count = nk };
		t0 = now_ns();
		if (submit(q, &lookups[r], ptrs, 1) < 0)
			return fprintf(stderr, "lookup submit failed\n"), 1;
		t_lookup[r] = now_ns() - t0;
		for (uint32_t i = 0; i < nk; i++)
			g[i] = (struct kvt_req){ .op = KVT_OP_EXISTS, .ns = ns, .key = keys[i] };
		t0 = now_ns();
		if (submit(q, g, ptrs, nk) < 0)
			return fprintf(stderr, "exists submit failed\n"), 1;
		t_gets[r] = now_ns() - t0;
	}
	kill(pid, SIGCONT);
	for (uint32_t got = 0; got < total;) {
		int n = kvt_queue_wait(q, done, total - got, 120000);
		if (n <= 0)
			return fprintf(stderr, "wait: %d of %u\n", n, total - got), 1;
		got += (uint32_t)n;
	}
	for (uint32_t i = 0; i < nd; i++)
		bad += dels[i].status != KVT_OK && dels[i].status != KVT_MISS;
	qsort(t_lookup, (size_t)rounds, sizeof(uint64_t), cmp_u64);
	qsort(t_gets, (size_t)rounds, sizeof(uint64_t), cmp_u64);
	printf("open deletes %u, keys %u, rounds %d: lookup submit median %.3f ms max %.3f ms; "
	       "%u exists submit median %.3f ms max %.3f ms; deletes failed %d\n",
	       nd, nk, rounds, t_lookup[rounds / 2] / 1e6, t_lookup[rounds - 1] / 1e6, nk,
	       t_gets[rounds / 2] / 1e6, t_gets[rounds - 1] / 1e6, bad);
	kvt_queue_destroy(q);
	kvt_store_destroy(s);
	return bad ? 1 : 0;
}

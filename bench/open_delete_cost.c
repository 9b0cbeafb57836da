/*
 * open_delete_cost.c - what a LOOKUP, a GET and a DELETE cost the remote
 * tier's client while many DELETEs (and PUTs) are out and not yet
 * answered (the "open deletes": remote.c remove_prefix, remove_shadows;
 * the open puts: put_count_before).  Not built by meson: a one-off
 * measurement kept with its figures (bench/RESULTS.md, lookup43,
 * remote44); built against each tree compared.
 *
 * One store over a running kvtierd (ADDR, its process PID),
 * remote.put_local=never: one put (the connection up, the namespace
 * registered), then the server is stopped (SIGSTOP), PUTS puts of
 * distinct 4 KiB values (optional, since remote44: sent up to the
 * window, the rest waiting in the library; all open) and DELETES deletes
 * of other keys are submitted: none is answered, all stay open.  Then
 * ROUNDS times: one LOOKUP of KEYS other keys (none deleted: each is
 * tested against the open deletes), KEYS EXISTS of those keys, and
 * (since remote44) KEYS DELETEs of yet other keys (each tested against
 * the open puts: is one of its key before it?), each kvt_submit timed
 * (these tests run on the submitting thread, under the head's
 * put_lock).  The server is let go (SIGCONT) and every request waited
 * for.  Prints the median and the worst of the rounds, and the heap the
 * tables that order deletes against puts hold with all of it out and once
 * answered (remote.order_index_bytes, since remote44).  With CLEARS
 * (since session 45), that many CLEARs of the namespace are submitted
 * after the puts, each held until every put before it is answered; the
 * time from SIGCONT until everything is answered is printed ("drain").
 * Exits 1 if a
 * submission fails, a delete is neither KVT_OK nor KVT_MISS, or a put
 * not KVT_OK.
 *
 *   cc -O2 -Iinclude -Ibuild-release bench/open_delete_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/open_delete_cost
 *   build-release/daemon/kvtierd --dir D --listen 127.0.0.1:P --dram 64M --ssd 0 &
 *   /tmp/open_delete_cost 127.0.0.1:P $! 16384 1024 5 [PUTS [CLEARS]]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "kvtier.h"
#include "oneoff.h"

#define MAXR 64

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

/* remote.order_index_bytes (since remote44; "-" before: UINT64_MAX). */
static void index_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	(void)str;
	if (strcmp(name, "remote.order_index_bytes") == 0)
		*(uint64_t *)ctx = value;
}

static void index_print(struct kvt_store *s, const char *when)
{
	uint64_t b = UINT64_MAX;
	kvt_store_stats(s, index_stat, &b);
	if (b == UINT64_MAX)
		printf("order index %s: -\n", when);
	else
		printf("order index %s: %llu bytes\n", when, (unsigned long long)b);
}

int main(int argc, char **argv)
{
	struct kvt_ns_desc d = { .model = "open-delete-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t v[4096];
	static struct iovec vio = { v, sizeof(v) };
	uint64_t t_lookup[MAXR], t_gets[MAXR], t_dels[MAXR];
	struct kvt_store *s;
	struct kvt_queue *q;
	struct kvt_req *dels, *gets, *rdels, *wput, lookups[MAXR], clears[MAXR], **ptrs, **done;
	struct kvt_key *keys, k0 = key_of(0, 99);
	uint32_t nd, nk, np, nc, ns, total;
	uint64_t drain;
	int rounds, bad = 0;
	pid_t pid;

	if (argc < 6)
		return fprintf(stderr,
			       "usage: open_delete_cost ADDR PID DELETES KEYS ROUNDS [PUTS [CLEARS]]\n"),
		       2;
	pid = (pid_t)atoi(argv[2]);
	nd = (uint32_t)strtoul(argv[3], NULL, 0);
	nk = (uint32_t)strtoul(argv[4], NULL, 0);
	rounds = atoi(argv[5]);
	np = argc > 6 ? (uint32_t)strtoul(argv[6], NULL, 0) : 0;
	nc = argc > 7 ? (uint32_t)strtoul(argv[7], NULL, 0) : 0;
	if (rounds < 1 || rounds > MAXR || nk == 0 || nc > MAXR)
		return fprintf(stderr, "ROUNDS 1..%d, KEYS > 0, CLEARS 0..%d\n", MAXR, MAXR), 2;
	total = np + nc + nd + (uint32_t)rounds * (2 * nk + 1);
	dels = calloc(nd ? nd : 1, sizeof(*dels));
	wput = calloc(np ? np : 1, sizeof(*wput));
	gets = calloc((size_t)rounds * nk, sizeof(*gets));
	rdels = calloc((size_t)rounds * nk, sizeof(*rdels));
	keys = calloc(nk, sizeof(*keys));
	ptrs = calloc(total, sizeof(*ptrs));
	done = calloc(total, sizeof(*done));
	if (!dels || !wput || !gets || !rdels || !keys || !ptrs || !done)
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
	for (uint32_t i = 0; i < np; i++)
		wput[i] = (struct kvt_req){ .op = KVT_OP_PUT, .ns = ns, .key = key_of(i, 3),
					    .iov = &vio, .iov_count = 1 };
	if (submit(q, wput, ptrs, np) < 0)
		return fprintf(stderr, "put submit failed\n"), 1;
	for (uint32_t i = 0; i < nc; i++)
		clears[i] = (struct kvt_req){ .op = KVT_OP_CLEAR, .ns = ns };
	if (submit(q, clears, ptrs, nc) < 0)
		return fprintf(stderr, "clear submit failed\n"), 1;
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
		g = rdels + (size_t)r * nk;
		for (uint32_t i = 0; i < nk; i++)
			g[i] = (struct kvt_req){ .op = KVT_OP_DELETE, .ns = ns,
						 .key = key_of(i, 4 + (uint64_t)r) };
		t0 = now_ns();
		if (submit(q, g, ptrs, nk) < 0)
			return fprintf(stderr, "delete submit failed\n"), 1;
		t_dels[r] = now_ns() - t0;
	}
	index_print(s, "with all out");
	kill(pid, SIGCONT);
	drain = now_ns();
	for (uint32_t got = 0; got < total;) {
		int n = kvt_queue_wait(q, done, total - got, 120000);
		if (n <= 0)
			return fprintf(stderr, "wait: %d of %u\n", n, total - got), 1;
		got += (uint32_t)n;
	}
	drain = now_ns() - drain;
	for (uint32_t i = 0; i < nc; i++)
		bad += clears[i].status < 0;
	for (uint32_t i = 0; i < nd; i++)
		bad += dels[i].status != KVT_OK && dels[i].status != KVT_MISS;
	for (size_t i = 0; i < (size_t)rounds * nk; i++)
		bad += rdels[i].status != KVT_OK && rdels[i].status != KVT_MISS;
	for (uint32_t i = 0; i < np; i++)
		bad += wput[i].status != KVT_OK;
	index_print(s, "once answered");
	qsort(t_lookup, (size_t)rounds, sizeof(uint64_t), cmp_u64);
	qsort(t_gets, (size_t)rounds, sizeof(uint64_t), cmp_u64);
	qsort(t_dels, (size_t)rounds, sizeof(uint64_t), cmp_u64);
	printf("open puts %u, clears %u, open deletes %u, keys %u, rounds %d: lookup submit median "
	       "%.3f ms max %.3f ms; %u exists submit median %.3f ms max %.3f ms; %u deletes submit "
	       "median %.3f ms max %.3f ms; drain %.1f ms; failed %d\n",
	       np, nc, nd, nk, rounds, t_lookup[rounds / 2] / 1e6, t_lookup[rounds - 1] / 1e6, nk,
	       t_gets[rounds / 2] / 1e6, t_gets[rounds - 1] / 1e6, nk, t_dels[rounds / 2] / 1e6,
	       t_dels[rounds - 1] / 1e6, drain / 1e6, bad);
	kvt_queue_destroy(q);
	kvt_store_destroy(s);
	return bad ? 1 : 0;
}

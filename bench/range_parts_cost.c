/*
 * range_parts_cost.c - what a native GET frame of 1,024 one-byte RANGEs
 * (and one of 1,024 PARTs) costs kvtierd's loop over a value of 1,024
 * parts against the same frame over a value of one part, in the server's
 * CPU time (its process clock, before and after each answer is read).
 * Not built by meson: a one-off measurement kept with its figures
 * (bench/RESULTS.md, get46: the part tables a frame reads, value.c
 * "value_ptabs").
 *
 * It starts BIN itself (tests/integration/server.c: --tenants alice,
 * --threads 1 --ssd 0 --dram 256M --max-memory 512M), puts an 8 MiB value
 * of one part, one of 1,024 parts of 8 KiB and (get47) a 16 MiB value of
 * 1,024 parts of 16 KiB, reads one frame of each kind to warm up, then
 * ROUNDS rounds of: the ranges frame over each 8 MiB value, the parts
 * frame over the many-part one, and a frame of 1,024 one-byte ranges of
 * the 16 MiB value, its parts in a scattered order (range i in part
 * 7i mod 1,024) -- interleaved, so that load drifts alike.  Prints the
 * median and range of each, ms of the server's CPU.  Every answer is
 * checked (status, length, bytes, CRC); exits 1 if one is wrong.
 *
 *   ninja -C build-release daemon/kvtierd tests/libt.a tests/libt_server.a \
 *       tests/libt_client.a
 *   cc -O2 -std=c17 -D_GNU_SOURCE -Iinclude -Ilib/base -Ilib/fmt -Ilib/sys \
 *      -Ilib/core -Ilib/tier -Ilib/store -Itests/lib -Itests/integration \
 *      -Ibuild-release bench/range_parts_cost.c build-release/tests/libt_server.a \
 *      build-release/tests/libt_client.a build-release/tests/libt.a \
 *      build-release/lib/libkvtier_internal.a $(pkg-config --libs liburing \
 *      openssl libisal libxxhash libcurl libzmq msgpack) -lpthread -lm \
 *      -o /tmp/range_parts_cost
 *   /tmp/range_parts_cost build-release/daemon/kvtierd 30
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "kvtier.h"
#include "proto.h"
#include "server.h"

#define VLEN (8u << 20)
#define BIG_LEN (16u << 20) /* the 16 MiB value: v's first 8 MiB are the others */
#define PARTS 1024u
#define ITEMS 1024u
#define SECRET "secret-of-alice-0123456789"

static struct tsrv srv;

static uint64_t srv_cpu_ns(void)
{
	clockid_t ck;
	struct timespec ts;

	if (clock_getcpuclockid(srv.pid, &ck) != 0 || clock_gettime(ck, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct seen {
	const struct proto_item *its;
	const uint8_t *v;
	const uint64_t *part_off; /* PART items: where each part starts */
	unsigned ok, n;
};

static void check_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct seen *s = ctx;
	const struct proto_item *q = &s->its[pi->index];
	uint64_t off = q->flags & PROTO_IF_PART ? s->part_off[q->part] : q->off;
	uint64_t len = q->flags & PROTO_IF_PART ? VLEN / PARTS : q->len, l = 0;
	uint32_t crc = 0;

	s->n++;
	if (pi->status == KVT_OK && pi->data_len == len && pi->part_count == 1 &&
	    proto_item_part(pi, 0, &l, &crc) == 0 && l == len &&
	    memcmp(r->data + pi->data_off, s->v + off, len) == 0 &&
	    crc == kvt_crc32c(0, s->v + off, len))
		s->ok++;
}

/* One frame of its, read whole; the server's CPU for it, 0 if wrong. */
static uint64_t frame_cost(struct kc *c, const uint8_t *ns, const struct proto_item *its,
			   const uint8_t *v, const uint64_t *part_off)
{
	struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
	struct seen s = { its, v, part_off, 0, 0 };
	uint64_t t0 = srv_cpu_ns();

	if (kc_request(c, &f, its, ITEMS, NULL, 0) <= 0 ||
	    kc_recv_items(c, 60000, check_item, &s, NULL) < 1 || s.ok != ITEMS)
		return 0;
	return srv_cpu_ns() - t0;
}

static void report(const char *what, uint64_t *ns, unsigned n)
{
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("%-44s median %7.2f ms  (%.2f-%.2f), %u frames\n", what, ns[n / 2] / 1e6,
	       ns[0] / 1e6, ns[n - 1] / 1e6, n);
}

int main(int argc, char **argv)
{
	struct kvt_ns_desc d = { .model = "range-parts-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	const char *extra[] = { "--threads", "1", "--ssd", "0", "--dram", "256M",
				"--max-memory", "512M", NULL };
	static struct iovec parts[PARTS];
	static uint64_t part_off[PARTS];
	static struct proto_item one[ITEMS], many[ITEMS], pits[ITEMS];
	char base[] = "/tmp/range_parts_cost.XXXXXX", tenants[600], dir[600];
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(BIG_LEN);
	uint64_t *c_one, *c_many, *c_part, *c_big;
	struct iovec whole = { v, VLEN };
	static struct iovec big_parts[PARTS];
	static struct proto_item big[ITEMS];
	struct kvt_key k1, kn, kb;
	unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 20;
	struct kc c;
	FILE *tf;

	if (argc < 2 || !v || rounds == 0 || !mkdtemp(base))
		return fprintf(stderr, "usage: range_parts_cost KVTIERD [ROUNDS]\n"), 2;
	c_one = calloc(rounds, sizeof(*c_one));
	c_many = calloc(rounds, sizeof(*c_many));
	c_part = calloc(rounds, sizeof(*c_part));
	c_big = calloc(rounds, sizeof(*c_big));
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	snprintf(dir, sizeof(dir), "%s/data", base);
	tf = fopen(tenants, "w");
	if (!tf || !c_one || !c_many || !c_part || !c_big)
		return 1;
	fprintf(tf, "alice " SECRET " tenant\n");
	fclose(tf);
	chmod(tenants, 0600);
	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	for (uint32_t i = 0; i < BIG_LEN; i++)
		v[i] = (uint8_t)(i * 2654435761u >> 13);
	for (unsigned p = 0; p < PARTS; p++) {
		parts[p].iov_base = v + (size_t)p * (VLEN / PARTS);
		parts[p].iov_len = VLEN / PARTS;
		part_off[p] = (uint64_t)p * (VLEN / PARTS);
		big_parts[p].iov_base = v + (size_t)p * (BIG_LEN / PARTS);
		big_parts[p].iov_len = BIG_LEN / PARTS;
	}
	kvt_key_set(&k1, "one-part", 8);
	kvt_key_set(&kn, "many-parts", 10);
	kvt_key_set(&kb, "big-many-parts", 14);
	if (kc_dial(&c, srv.port, "alice", SECRET) != 0 ||
	    kc_register(&c, &d, ns, NULL, 0) != KVT_OK ||
	    kc_put(&c, ns, &k1, &whole, 1, NULL) != KVT_OK ||
	    kc_put(&c, ns, &kn, parts, PARTS, NULL) != KVT_OK ||
	    kc_put(&c, ns, &kb, big_parts, PARTS, NULL) != KVT_OK)
		return fprintf(stderr, "setup failed\n"), 1;
	for (unsigned i = 0; i < ITEMS; i++) {
		one[i].key = k1;
		one[i].flags = PROTO_IF_RANGE;
		one[i].off = (uint64_t)i * (VLEN / ITEMS) + 3; /* inside part i, not whole */
		one[i].len = 1;
		many[i] = one[i];
		many[i].key = kn;
		pits[i].key = kn;
		pits[i].flags = PROTO_IF_PART;
		pits[i].part = i;
		big[i].key = kb;
		big[i].flags = PROTO_IF_RANGE;
		big[i].off = (uint64_t)(i * 7 % PARTS) * (BIG_LEN / PARTS) + 5;
		big[i].len = 1;
	}
	if (!frame_cost(&c, ns, one, v, part_off) || !frame_cost(&c, ns, many, v, part_off) ||
	    !frame_cost(&c, ns, pits, v, part_off) || !frame_cost(&c, ns, big, v, part_off))
		return fprintf(stderr, "a warm-up answer was wrong\n"), 1;
	for (unsigned r = 0; r < rounds; r++) {
		c_one[r] = frame_cost(&c, ns, one, v, part_off);
		c_many[r] = frame_cost(&c, ns, many, v, part_off);
		c_part[r] = frame_cost(&c, ns, pits, v, part_off);
		c_big[r] = frame_cost(&c, ns, big, v, part_off);
		if (!c_one[r] || !c_many[r] || !c_part[r] || !c_big[r])
			return fprintf(stderr, "round %u: an answer was wrong\n", r), 1;
	}
	printf("kvtierd %s, %u rounds, the server's CPU a frame of %u items:\n", argv[1], rounds,
	       ITEMS);
	report("1-byte ranges, a value of 1 part", c_one, rounds);
	report("1-byte ranges, a value of 1,024 parts", c_many, rounds);
	report("PARTs, a value of 1,024 parts", c_part, rounds);
	report("1-byte ranges, 16 MiB in 1,024 parts", c_big, rounds);
	printf("ratio (medians) 1,024 parts / 1 part, ranges: %.2f; 16 MiB: %.2f\n",
	       (double)c_many[rounds / 2] / (double)c_one[rounds / 2],
	       (double)c_big[rounds / 2] / (double)c_one[rounds / 2]);
	kc_close(&c);
	return tsrv_stop(&srv) == 0 ? 0 : 1;
}

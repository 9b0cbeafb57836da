/*
 * bench_seal.c - "kvtier bench seal": sealed puts and gets against unsealed
 * ones and against OpenSSL's raw AES-256-GCM, one core, one run.
 *
 * The physical limit of a sealed put is the cipher: AES-256-GCM reading the
 * caller's bytes and writing as many somewhere else.  The baseline row
 * ("aes-gcm") does exactly that with EVP -- one key set up once, a fresh
 * 12-byte IV per part, the source values into a separate destination
 * buffer of the same size -- and the store rows move the same values:
 *
 *     src [v0][v1]...[vN-1]  caller's values (>= --footprint, past the L3),
 *      |                     each in --parts parts
 *      +-- aes-gcm -------> dst (same size, pre-faulted)
 *      +-- put plain -----> store, namespace without a key   (a copy)
 *      +-- put sealed ----> store, sealed namespace          (one AES-GCM pass)
 *     dst <-- get plain --- store
 *     dst <-- get sealed -- store (one AES-GCM pass, tags checked)
 *
 * Rounds alternate the order of the phases (odd rounds as above, even rounds
 * reversed within puts and within gets), every value is cleared out of the
 * store between rounds, and medians over rounds are reported.  After every
 * get phase a sample of values is compared with src byte by byte; a wrong
 * byte or a library error exits 1.  Ratios are reported, never judged in
 * --smoke (CI).  Everything runs on the calling thread.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/evp.h>

#include "kvtier.h"

#include "bench.h"

#define BS_ROUNDS_MAX BENCH_MEDIAN_MAX
#define BS_TARGET 0.8
#define BS_SAMPLE 16

enum { PH_GCM, PH_PUT_PLAIN, PH_PUT_SEALED, PH_GET_PLAIN, PH_GET_SEALED, PH_COUNT };
static const char *const ph_name[PH_COUNT] = { "aes-gcm", "put", "put", "get", "get" };
static const char *const ph_mode[PH_COUNT] = { "raw", "plain", "sealed", "plain", "sealed" };

struct bs {
	uint64_t size, footprint, n;
	unsigned parts, rounds;
	bool smoke, json;
	uint8_t *src, *dst;
	size_t map_len;
	struct kvt_store *st;
	uint32_t ns_plain, ns_sealed;
	struct kvt_key *keys;
	EVP_CIPHER_CTX *gcm;
	double gbps[PH_COUNT][BS_ROUNDS_MAX];
};

static void bs_usage(void)
{
	fprintf(stderr, "usage: kvtier bench seal [--smoke] [--json] [--size N] [--parts N]\n"
			"                         [--footprint N] [--rounds N]\n");
}

static int bs_parts(struct bs *b, uint8_t *base, struct iovec *iov)
{
	uint64_t off = 0, per = b->size / b->parts;
	for (unsigned p = 0; p < b->parts; p++) {
		iov[p].iov_base = base + off;
		iov[p].iov_len = p + 1 == b->parts ? b->size - off : per;
		off += iov[p].iov_len;
	}
	return 0;
}

static int bs_phase(struct bs *b, int ph)
{
	struct iovec iov[KVT_PARTS_MAX];
	uint8_t iv[12] = { 0 }, tag[16];
	int outl;
	for (uint64_t i = 0; i < b->n; i++) {
		uint8_t *s = b->src + i * b->size, *d = b->dst + i * b->size;
		uint32_t ns = (ph == PH_PUT_SEALED || ph == PH_GET_SEALED) ? b->ns_sealed
									     : b->ns_plain;
		int rc = 0;
		uint64_t vlen = 0;
		switch (ph) {
		case PH_GCM:
			bs_parts(b, s, iov);
			for (unsigned p = 0; p < b->parts; p++) {
				uint64_t off = (uint64_t)((uint8_t *)iov[p].iov_base - s);
				memcpy(iv, &i, sizeof(i));
				memcpy(iv + 8, &p, sizeof(p));
				if (EVP_EncryptInit_ex(b->gcm, NULL, NULL, NULL, iv) != 1 ||
				    EVP_EncryptUpdate(b->gcm, d + off, &outl, iov[p].iov_base,
						      (int)iov[p].iov_len) != 1 ||
				    EVP_EncryptFinal_ex(b->gcm, tag, &outl) != 1 ||
				    EVP_CIPHER_CTX_ctrl(b->gcm, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
					rc = -1;
			}
			break;
		case PH_PUT_PLAIN:
		case PH_PUT_SEALED:
			bs_parts(b, s, iov);
			rc = kvt_put(b->st, ns, &b->keys[i], iov, b->parts);
			break;
		default:
			rc = kvt_get(b->st, ns, &b->keys[i], d, b->size, &vlen);
			if (rc == KVT_OK && vlen != b->size)
				rc = -1;
			break;
		}
		if (rc != 0) {
			fprintf(stderr, "bench seal: %s %s value %" PRIu64 ": %s\n", ph_name[ph],
				ph_mode[ph], i, rc < 0 && rc != -1 ? kvt_strerror(rc) : "failed");
			return -1;
		}
	}
	return 0;
}

static int bs_verify(struct bs *b, const char *what)
{
	for (uint64_t j = 0; j < BS_SAMPLE && j < b->n; j++) {
		uint64_t i = j * (b->n / (BS_SAMPLE < b->n ? BS_SAMPLE : b->n));
		if (memcmp(b->src + i * b->size, b->dst + i * b->size, b->size) != 0) {
			fprintf(stderr, "bench seal: %s: value %" PRIu64 " differs\n", what, i);
			return -1;
		}
	}
	return 0;
}

static int bs_run(struct bs *b)
{
	static const int order_a[] = { PH_GCM, PH_PUT_PLAIN, PH_PUT_SEALED, PH_GET_PLAIN,
				       PH_GET_SEALED };
	static const int order_b[] = { PH_PUT_SEALED, PH_PUT_PLAIN, PH_GCM, PH_GET_SEALED,
				       PH_GET_PLAIN };
	for (unsigned r = 0; r < b->rounds; r++) {
		const int *order = r % 2 ? order_b : order_a;
		if (kvt_clear(b->st, KVT_NS_ALL) < 0)
			return -1;
		for (int k = 0; k < PH_COUNT; k++) {
			int ph = order[k];
			if (ph == PH_GET_PLAIN || ph == PH_GET_SEALED || ph == PH_GCM)
				memset(b->dst, 0x5c, b->map_len); /* a get that copies nothing fails */
			double t0 = bench_now();
			if (bs_phase(b, ph) < 0)
				return -1;
			b->gbps[ph][r] = bench_rate((double)(b->n * b->size), bench_now() - t0) / 1e9;
			if ((ph == PH_GET_PLAIN || ph == PH_GET_SEALED) &&
			    bs_verify(b, ph_mode[ph]) < 0)
				return -1;
		}
	}
	return 0;
}

static void bs_report(struct bs *b)
{
	double gcm = bench_median(b->gbps[PH_GCM], b->rounds);
	char sz[32];
	bench_fmt_size(sz, sizeof(sz), b->size);
	for (int ph = 0; ph < PH_COUNT; ph++) {
		double m = bench_median(b->gbps[ph], b->rounds);
		double plain = ph == PH_PUT_SEALED ? bench_median(b->gbps[PH_PUT_PLAIN], b->rounds)
			     : ph == PH_GET_SEALED ? bench_median(b->gbps[PH_GET_PLAIN], b->rounds)
						   : 0;
		if (b->json) {
			printf("{\"bench\": \"seal\", \"op\": \"%s\", \"mode\": \"%s\", "
			       "\"value_bytes\": %" PRIu64 ", \"parts\": %u, \"values\": %" PRIu64
			       ", \"rounds\": %u, \"gbps\": %.3f, \"baseline\": \"aes-gcm\", "
			       "\"baseline_gbps\": %.3f, \"ratio\": %.3f",
			       ph_name[ph], ph_mode[ph], b->size, b->parts, b->n, b->rounds, m, gcm,
			       gcm > 0 ? m / gcm : 0);
			if (plain > 0)
				printf(", \"vs_plain\": %.3f", m / plain);
			if (ph == PH_PUT_SEALED || ph == PH_GET_SEALED)
				printf(", \"target\": %.1f, \"smoke\": %s", BS_TARGET,
				       b->smoke ? "true" : "false");
			printf("}\n");
		} else {
			printf("%-8s %-7s %8s x%-4u %7.2f GB/s  %.2f of aes-gcm%s\n", ph_name[ph],
			       ph_mode[ph], sz, b->parts, m, gcm > 0 ? m / gcm : 0,
			       (ph == PH_PUT_SEALED || ph == PH_GET_SEALED) && !b->smoke &&
					       m / gcm < BS_TARGET
				       ? "  (below target 0.8)"
				       : "");
		}
	}
}

int bench_seal_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "smoke", no_argument, NULL, 's' },  { "json", no_argument, NULL, 'j' },
		{ "size", required_argument, NULL, 'z' }, { "parts", required_argument, NULL, 'p' },
		{ "footprint", required_argument, NULL, 'f' },
		{ "rounds", required_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bs b = { .size = 4u << 20, .footprint = 1ull << 30, .parts = 4, .rounds = 3 };
	uint8_t master[32];
	char cap[32];
	int c, ret = BENCH_EXIT_FAIL;
	uint64_t v;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': b.smoke = true; break;
		case 'j': b.json = true; break;
		case 'z': if (bench_parse_size(optarg, &b.size) < 0 || !b.size) goto usage; break;
		case 'f': if (bench_parse_size(optarg, &b.footprint) < 0) goto usage; break;
		case 'p': b.parts = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': b.rounds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': bs_usage(); return BENCH_EXIT_OK;
		default: goto usage;
		}
	}
	if (b.smoke) {
		b.footprint = 32u << 20;
		b.size = b.size > (1u << 20) ? 1u << 20 : b.size;
		b.rounds = 1;
	}
	if (optind != argc || !b.parts || b.parts > KVT_PARTS_MAX || b.parts > b.size ||
	    !b.rounds || b.rounds > BS_ROUNDS_MAX || b.size > (1ull << 30))
		goto usage;
	b.n = b.footprint / b.size ? b.footprint / b.size : 1;
	b.map_len = (size_t)(b.n * b.size);
	b.src = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	b.dst = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	b.keys = calloc(b.n, sizeof(*b.keys));
	b.gcm = EVP_CIPHER_CTX_new();
	if (b.src == MAP_FAILED || b.dst == MAP_FAILED || !b.keys || !b.gcm) {
		fprintf(stderr, "bench seal: out of memory\n");
		goto out;
	}
	for (v = 0; v < b.n; v++) {
		bench_fill(b.src + v * b.size, b.size, bench_seed(b.size, v));
		kvt_key_set(&b.keys[v], &(uint64_t){ v + 1 }, sizeof(uint64_t));
	}
	memset(master, 0x42, sizeof(master));
	if (EVP_EncryptInit_ex(b.gcm, EVP_aes_256_gcm(), NULL, master, master) != 1)
		goto out;
	/* Room for both namespaces' values (sealed ones are 33 bytes a part
	 * longer; each value rounds up to a 64 KiB chunk): nothing is evicted. */
	snprintf(cap, sizeof(cap), "%" PRIu64,
		 bench_align_up(2 * b.n * (b.size + 33ull * b.parts + 65536) + (64u << 20),
				1u << 20));
	if (kvt_store_create(&b.st) < 0 || kvt_store_set_option(b.st, "dram.capacity", cap) < 0 ||
	    kvt_store_set_option(b.st, "dram.shards", "1") < 0 ||
	    kvt_store_open(b.st) < 0) {
		fprintf(stderr, "bench seal: store (dram.capacity %s) did not open\n", cap);
		goto out;
	}
	{
		struct kvt_ns_desc d = { .model = "bench-seal", .dtype = "bf16", .layout = "plain",
					 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
		if (kvt_ns_register(b.st, &d, &b.ns_plain) < 0)
			goto out;
		d.layout = "sealed";
		if (kvt_ns_register(b.st, &d, &b.ns_sealed) < 0 ||
		    kvt_ns_set_seal_key(b.st, b.ns_sealed, master, sizeof(master)) < 0)
			goto out;
	}
	if (bs_run(&b) < 0)
		goto out;
	bs_report(&b);
	ret = BENCH_EXIT_OK;
out:
	kvt_store_destroy(b.st);
	EVP_CIPHER_CTX_free(b.gcm);
	free(b.keys);
	if (b.src && b.src != MAP_FAILED)
		munmap(b.src, b.map_len);
	if (b.dst && b.dst != MAP_FAILED)
		munmap(b.dst, b.map_len);
	return ret;
usage:
	bs_usage();
	return BENCH_EXIT_USAGE;
}

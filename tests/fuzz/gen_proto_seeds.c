/*
 * gen_proto_seeds.c - writes the seed corpus of fuzz_proto: one small,
 * valid frame (header and table; a PUT also carries its value bytes) of
 * most request and response kinds, encoded by lib/proto.c.  Run by hand
 * when the protocol changes; the output is checked in:
 *
 *   build-fuzz/tests/fuzz/gen_proto_seeds tests/fuzz/corpus/proto
 *
 * Deterministic: the same build writes the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "proto.h"

static uint8_t g_buf[64 << 10];
static const char *g_dir;

static void die(const char *what)
{
	fprintf(stderr, "gen_proto_seeds: %s\n", what);
	exit(1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 29 + 7);
}

/* Encode f and items, append data_len bytes of value, write <dir>/<name>. */
static void emit(const char *name, const struct proto_frame *f, const struct proto_item *items,
		 uint32_t n)
{
	char path[4096];
	struct proto_writer w;
	int64_t len;
	FILE *fp;

	if (proto_write_begin(&w, g_buf, sizeof(g_buf), NULL, f) != 0)
		die(name);
	for (uint32_t i = 0; i < n; i++)
		if (proto_write_item(&w, &items[i]) != 0)
			die(name);
	len = proto_write_end(&w, NULL);
	if (len < 0 || (uint64_t)len + w.data_len > sizeof(g_buf))
		die(name);
	fill(g_buf + len, w.data_len, 9);
	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	fp = fopen(path, "wb");
	if (!fp || fwrite(g_buf, 1, (size_t)len + w.data_len, fp) != (size_t)len + w.data_len ||
	    fclose(fp) != 0)
		die(path);
}

static struct proto_frame frame(unsigned op, bool resp, uint64_t tag)
{
	struct proto_frame f;

	memset(&f, 0, sizeof(f));
	f.op = (uint16_t)op;
	f.flags = resp ? PROTO_F_RESPONSE : 0;
	f.tag = tag;
	return f;
}

int main(int argc, char **argv)
{
	static const char canon[] = "kvtier-ns 1\nmodel=m\nconfig=-\ndtype=bf16\nkv_quant=-\n"
				    "layout=l\nblock_tokens=16\ntp=0/1\npp=0/1\ntenant=acme\n";
	uint8_t ns[2][32];
	uint64_t lens[3] = { 7, 1, 20 };
	uint32_t crcs[3] = { 0x01020304u, 0xa0b0c0d0u, 0 };
	struct proto_item it[4];
	struct proto_frame f;

	if (argc != 2)
		die("usage: gen_proto_seeds <corpus dir>");
	g_dir = argv[1];
	fill(ns[0], 32, 1);
	fill(ns[1], 32, 2);
	memset(it, 0, sizeof(it));
	for (int i = 0; i < 4; i++) {
		uint8_t k[32];
		fill(k, 32, 10 + (uint32_t)i);
		kvt_key_set(&it[i].key, k, i == 3 ? 5 : 32);
	}

	f = frame(PROTO_OP_HELLO, false, 1);
	f.hello.min_version = 1;
	f.hello.max_version = 1;
	f.hello.name = "kvtier/0.1.0";
	f.hello.name_len = 12;
	emit("hello-req", &f, NULL, 0);

	f = frame(PROTO_OP_HELLO, true, 1);
	f.hello.version = f.hello.min_version = f.hello.max_version = 1;
	f.hello.auth_count = 2;
	f.hello.auth[0] = PROTO_AUTH_HMAC_SHA256;
	f.hello.auth[1] = PROTO_AUTH_NONE;
	fill(f.hello.nonce, 32, 3);
	proto_limits_default(&f.hello.limits);
	f.hello.name = "kvtierd";
	f.hello.name_len = 7;
	emit("hello-resp", &f, NULL, 0);
	f.hello.max_version = PROTO_VERSION_MAX; /* version 2 on: what the server accepts */
	f.hello.version = PROTO_VERSION_CAPS;
	f.hello.caps = PROTO_CAP_FORWARD | PROTO_CAP_RETAIN;
	emit("hello-resp-caps", &f, NULL, 0);

	f = frame(PROTO_OP_AUTH, false, 2);
	f.auth.method = PROTO_AUTH_HMAC_SHA256;
	f.auth.tenant = "acme";
	f.auth.tenant_len = 4;
	fill(f.auth.nonce, 32, 4);
	fill(f.auth.proof, 32, 5);
	emit("auth-req", &f, NULL, 0);

	f = frame(PROTO_OP_AUTH, true, 2);
	fill(f.auth.proof, 32, 6);
	emit("auth-resp", &f, NULL, 0);

	f = frame(PROTO_OP_NS_REGISTER, false, 3);
	{
		struct proto_item t = { .text = canon, .text_len = sizeof(canon) - 1 };
		emit("nsreg-req", &f, &t, 1);
	}
	f = frame(PROTO_OP_NS_REGISTER, true, 3);
	{
		struct proto_item t[2] = {
			{ .status = KVT_OK, .digest = ns[0], .text = canon,
			  .text_len = sizeof(canon) - 1 },
			{ .index = 1, .status = KVT_EDESC },
		};
		emit("nsreg-resp", &f, t, 2);
	}

	f = frame(PROTO_OP_LOOKUP, false, 4);
	f.ns_count = 1;
	f.ns = ns[0];
	emit("lookup-req", &f, it, 3);
	f = frame(PROTO_OP_LOOKUP, true, 4);
	f.lookup.hits = 1;
	f.lookup.load_ns = 1000;
	{
		struct proto_item t[3] = {
			{ .index = 0, .status = KVT_OK, .tier = KVT_TIER_DRAM },
			{ .index = 1, .status = KVT_MISS },
			{ .index = 2, .status = KVT_MISS },
		};
		emit("lookup-resp", &f, t, 3);
	}

	f = frame(PROTO_OP_EXISTS, false, 5);
	f.ns_count = 2;
	f.ns = ns[0];
	it[1].ns_index = 1;
	emit("exists-req", &f, it, 4);
	it[1].ns_index = 0;
	f = frame(PROTO_OP_EXISTS, true, 5);
	{
		struct proto_item t[2] = {
			{ .index = 1, .status = KVT_OK, .tier = KVT_TIER_REMOTE },
			{ .index = 3, .status = KVT_MISS },
		};
		emit("exists-resp", &f, t, 2);
	}

	f = frame(PROTO_OP_GET, false, 6);
	f.ns_count = 1;
	f.ns = ns[1];
	it[1].flags = PROTO_IF_PART;
	it[1].part = 2;
	it[2].flags = PROTO_IF_RANGE;
	it[2].off = 3;
	it[2].len = 10;
	emit("get-req", &f, it, 3);
	it[1].flags = 0;
	it[1].part = 0;
	it[2].flags = 0;
	it[2].off = it[2].len = 0;

	f = frame(PROTO_OP_GET, true, 6);
	f.flags |= PROTO_F_MORE;
	{
		struct proto_item t[3] = {
			{ .index = 0, .status = KVT_OK, .part_count = 3, .part_lens = lens,
			  .part_crcs = crcs, .value_len = 28 },
			{ .index = 1, .status = KVT_OK, .flags = PROTO_IF_PART | PROTO_IF_SEALED,
			  .first_part = 1, .off = 7, .value_len = 28, .part_count = 1,
			  .part_lens = &lens[1], .part_crcs = &crcs[1] },
			{ .index = 4, .status = KVT_MISS },
		};
		emit("get-resp", &f, t, 3);
	}

	f = frame(PROTO_OP_PUT, false, 7);
	f.ns_count = 1;
	f.ns = ns[0];
	it[0].part_count = 3;
	it[0].part_lens = lens;
	it[0].part_crcs = crcs;
	it[3].flags = PROTO_IF_SEALED;
	it[3].part_count = 1;
	it[3].part_lens = &lens[1];
	it[3].part_crcs = &crcs[1];
	{
		struct proto_item t[2] = { it[0], it[3] };
		emit("put-req", &f, t, 2);
	}
	{
		/* A pod's put: anchor and copies (PLACED), and a repair copy. */
		struct proto_item t[2] = { it[0], it[3] };
		t[0].flags = PROTO_IF_PLACED;
		t[0].anchor = 0x0123456789abcdefull;
		t[0].copies = 2;
		t[1].flags |= PROTO_IF_PLACED | PROTO_IF_REPAIR;
		t[1].anchor = 42;
		t[1].copies = 8;
		emit("put-placed-req", &f, t, 2);
		/* ... and a hot put the server forwards to the other copy. */
		t[1].flags = PROTO_IF_SEALED | PROTO_IF_PLACED | PROTO_IF_FORWARD;
		emit("put-forward-req", &f, t, 2);
	}
	f = frame(PROTO_OP_PUT, true, 7);
	{
		struct proto_item t[2] = { { .index = 0, .status = KVT_OK },
					   { .index = 1, .status = KVT_EXISTS } };
		emit("put-resp", &f, t, 2);
	}

	f = frame(PROTO_OP_DELETE, false, 8);
	f.ns_count = 1;
	f.ns = ns[0];
	{
		struct proto_item t = { .key = it[1].key };
		emit("delete-req", &f, &t, 1);
	}

	f = frame(PROTO_OP_CLEAR, false, 9);
	f.scope.scope = PROTO_SCOPE_NS;
	memcpy(f.scope.digest, ns[1], 32);
	emit("clear-req", &f, NULL, 0);
	f = frame(PROTO_OP_CLEAR, true, 9);
	f.removed = 17;
	emit("clear-resp", &f, NULL, 0);

	f = frame(PROTO_OP_STATS, false, 10);
	f.scope.scope = PROTO_SCOPE_TENANT;
	f.scope.tenant = "acme";
	f.scope.tenant_len = 4;
	emit("stats-req", &f, NULL, 0);
	f = frame(PROTO_OP_STATS, true, 10);
	{
		struct proto_item t[2] = {
			{ .kind = PROTO_STAT_NUM, .name = "dram.hits", .name_len = 9, .value = 5 },
			{ .kind = PROTO_STAT_TEXT, .name = "version", .name_len = 7,
			  .text = "0.1.0", .text_len = 5 },
		};
		emit("stats-resp", &f, t, 2);
	}

	f = frame(PROTO_OP_DRAIN, false, 14);
	f.drain_mode = PROTO_DRAIN_EXIT;
	emit("drain-req", &f, NULL, 0);

	f = frame(PROTO_OP_PING, false, 11);
	emit("ping-req", &f, NULL, 0);
	f = frame(PROTO_OP_BYE, true, 12);
	emit("bye-resp", &f, NULL, 0);
	f = frame(PROTO_OP_ERROR, true, 13);
	f.status = KVT_EBADOP;
	f.msg = "unknown opcode";
	f.msg_len = 14;
	emit("error-resp", &f, NULL, 0);
	return 0;
}

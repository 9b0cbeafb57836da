/*
 * test_proto.c - lib/proto.c: the kvtierd wire codec (doc/protocol.md).
 *
 * Round trips of every request and response kind (encode, parse with the
 * frame's last byte just before a PROT_NONE page, compare every field);
 * golden bytes of one HELLO and one PUT frame and of the AUTH proofs
 * (computed in Python from the document, not by this library); every
 * truncated prefix of every valid frame is PROTO_NEED_MORE (never an
 * error, never a read past the end); single-bit flips never parse; each
 * limit and rule, with the CRC recomputed so that the rule and not the CRC
 * is what refuses the bytes; count and length overflow attempts; the
 * writer's "buffer too small"; the HMAC handshake.
 */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvt_int.h"
#include "proto.h"
#include "t.h"
#include "le.h"

/* T_RC, naming the codec's own codes too. */
#undef T_RC
#define T_RC(call, want)                                                   \
	do {                                                               \
		long long t_r_ = (long long)(call), t_w_ = (long long)(want); \
		if (t_r_ != t_w_)                                          \
			T_FAIL("%s: got %lld (%s), want %lld (%s)", #call, t_r_, \
			       proto_strerror((int)t_r_), t_w_, proto_strerror((int)t_w_)); \
	} while (0)

/* ------------------------------------------------------------------------
 * Guard page: parse input placed so that its last byte is the last byte
 * before an inaccessible page.
 */
/* ------------------------------------------------------------------------
 * Bytes
 */
#define H_VERSION 4
#define H_OP 6
#define H_FLAGS 8
#define H_ITEMS 12
#define H_TAG 16
#define H_TABLE_LEN 24
#define H_DATA_LEN 32
#define H_STATUS 40
#define H_CRC 44
#define T0 PROTO_HDR_LEN /* first table byte */

/* Recompute the frame CRC of buf[0, len) the way the format defines it. */
static void fix_crc(uint8_t *buf, size_t len)
{
	uint64_t table_len = le_get64(buf + H_TABLE_LEN);
	uint32_t crc;

	if (table_len > len - T0)
		table_len = len - T0;
	crc = kvt_crc32c(0, buf, H_CRC);
	crc = kvt_crc32c(crc, buf + T0, table_len);
	le_put32(buf + H_CRC, crc);
}

/* ------------------------------------------------------------------------
 * Sample values
 */
static uint8_t g_ns[3][32];
static struct kvt_key g_keys[8];
static uint64_t g_lens[4] = { 4096, 65536, 1, 12345 };
static uint32_t g_crcs[4] = { 0x11111111u, 0xdeadbeefu, 0, 0xffffffffu };
static const char g_canon[] = "kvtier-ns 1\nmodel=m\nconfig=-\ndtype=bf16\nkv_quant=-\n"
			      "layout=l\nblock_tokens=16\ntp=0/1\npp=0/1\ntenant=acme\n";

static void samples_init(void)
{
	for (int i = 0; i < 3; i++)
		t_fill(g_ns[i], 32, 100 + (uint64_t)i);
	for (int i = 0; i < 8; i++) {
		uint8_t b[KVT_KEY_MAX];
		size_t len = i == 3 ? 1 : i == 4 ? KVT_KEY_MAX : i == 5 ? 7 : 32;
		t_fill(b, len, 200 + (uint64_t)i);
		T_OK(kvt_key_set(&g_keys[i], b, len));
	}
}

/* ------------------------------------------------------------------------
 * Cases: one valid frame of every kind.
 */
#define ITEMS_MAX 8

struct tcase {
	const char *name;
	struct proto_frame f;
	struct proto_item items[ITEMS_MAX];
	uint32_t n;
};

static void key_item(struct proto_item *it, uint32_t ns, int key)
{
	memset(it, 0, sizeof(*it));
	it->ns_index = ns;
	it->key = g_keys[key];
}

static void resp_item(struct proto_item *it, uint32_t index, int32_t status)
{
	memset(it, 0, sizeof(*it));
	it->index = index;
	it->status = status;
}

static void frame_init(struct tcase *c, const char *name, unsigned op, bool resp, uint64_t tag)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->f.op = (uint16_t)op;
	c->f.flags = resp ? PROTO_F_RESPONSE : 0;
	c->f.tag = tag;
}

#define NCASES 40

static int build_case(int i, struct tcase *c)
{
	struct proto_frame *f = &c->f;
	struct proto_item *it = c->items;

	switch (i) {
	case 0:
		frame_init(c, "hello request", PROTO_OP_HELLO, false, 1);
		f->hello.min_version = 1;
		f->hello.max_version = 3;
		f->hello.name = "kvtier/0.1.0 test";
		f->hello.name_len = 17;
		return 1;
	case 1:
		frame_init(c, "hello response", PROTO_OP_HELLO, true, 1);
		f->hello.version = 1;
		f->hello.min_version = 1;
		f->hello.max_version = 1;
		f->hello.auth_count = 2;
		f->hello.auth[0] = PROTO_AUTH_HMAC_SHA256;
		f->hello.auth[1] = PROTO_AUTH_NONE;
		t_fill(f->hello.nonce, PROTO_NONCE_LEN, 7);
		proto_limits_default(&f->hello.limits);
		f->hello.name = "kvtierd 0.1.0";
		f->hello.name_len = 13;
		return 1;
	case 2:
		frame_init(c, "hello response, no name, odd limits, caps", PROTO_OP_HELLO, true, 0);
		f->hello.version = 2;
		f->hello.min_version = 2;
		f->hello.max_version = 9;
		f->hello.caps = PROTO_CAP_FORWARD | PROTO_CAP_RETAIN;
		f->hello.auth_count = 1;
		f->hello.auth[0] = 77;
		f->hello.limits = (struct proto_limits){ 1 << 20, 4096, 1000, 3, 2, 1, 32 };
		return 1;
	case 3:
		frame_init(c, "auth request (hmac)", PROTO_OP_AUTH, false, 2);
		f->auth.method = PROTO_AUTH_HMAC_SHA256;
		f->auth.tenant = "acme";
		f->auth.tenant_len = 4;
		t_fill(f->auth.nonce, PROTO_NONCE_LEN, 8);
		t_fill(f->auth.proof, PROTO_PROOF_LEN, 9);
		return 1;
	case 4:
		frame_init(c, "auth request (none)", PROTO_OP_AUTH, false, 2);
		f->auth.method = PROTO_AUTH_NONE;
		f->auth.tenant = "a-tenant-with-a-64-byte-name-01234567890123456789012345678901234";
		f->auth.tenant_len = 64;
		return 1;
	case 5:
		frame_init(c, "auth response", PROTO_OP_AUTH, true, 2);
		f->auth.role = PROTO_ROLE_ADMIN;
		t_fill(f->auth.proof, PROTO_PROOF_LEN, 10);
		return 1;
	case 6:
		frame_init(c, "ns_register request", PROTO_OP_NS_REGISTER, false, 3);
		memset(&it[0], 0, sizeof(it[0]));
		it[0].text = g_canon;
		it[0].text_len = (uint32_t)strlen(g_canon);
		memset(&it[1], 0, sizeof(it[1]));
		it[1].text = "x";
		it[1].text_len = 1;
		c->n = 2;
		return 1;
	case 7:
		frame_init(c, "ns_register response", PROTO_OP_NS_REGISTER, true, 3);
		resp_item(&it[0], 0, KVT_OK);
		it[0].digest = g_ns[0];
		it[0].text = g_canon;
		it[0].text_len = (uint32_t)strlen(g_canon);
		resp_item(&it[1], 1, KVT_EDESC);
		c->n = 2;
		return 1;
	case 8:
		frame_init(c, "lookup request", PROTO_OP_LOOKUP, false, 4);
		f->ns_count = 1;
		f->ns = g_ns[0];
		for (int k = 0; k < 5; k++)
			key_item(&it[k], 0, k);
		c->n = 5;
		return 1;
	case 9:
		frame_init(c, "lookup response", PROTO_OP_LOOKUP, true, 4);
		f->lookup.hits = 2;
		f->lookup.load_ns = 123456789;
		resp_item(&it[0], 0, KVT_OK);
		it[0].tier = KVT_TIER_DRAM;
		resp_item(&it[1], 1, KVT_OK);
		it[1].tier = KVT_TIER_SSD;
		resp_item(&it[2], 2, KVT_MISS);
		resp_item(&it[3], 3, KVT_MISS); /* the server stops at the first miss */
		resp_item(&it[4], 4, KVT_MISS);
		c->n = 5;
		return 1;
	case 10:
		frame_init(c, "exists request, two namespaces", PROTO_OP_EXISTS, false, 5);
		f->ns_count = 2;
		f->ns = g_ns[0];
		key_item(&it[0], 0, 0);
		key_item(&it[1], 1, 3);
		key_item(&it[2], 0, 4);
		c->n = 3;
		return 1;
	case 11:
		frame_init(c, "exists response, split", PROTO_OP_EXISTS, true, 5);
		f->flags |= PROTO_F_MORE;
		resp_item(&it[0], 0, KVT_OK);
		it[0].tier = KVT_TIER_REMOTE;
		resp_item(&it[1], 2, KVT_MISS);
		c->n = 2;
		return 1;
	case 12:
		frame_init(c, "get request", PROTO_OP_GET, false, 6);
		f->ns_count = 3;
		f->ns = g_ns[0];
		key_item(&it[0], 2, 0);
		key_item(&it[1], 1, 1);
		it[1].flags = PROTO_IF_PART;
		it[1].part = 3;
		key_item(&it[2], 0, 5);
		it[2].flags = PROTO_IF_RANGE;
		it[2].off = 100;
		it[2].len = 200;
		c->n = 3;
		return 1;
	case 13:
		frame_init(c, "get response", PROTO_OP_GET, true, 6);
		resp_item(&it[0], 0, KVT_OK);
		it[0].part_count = 4;
		it[0].part_lens = g_lens;
		it[0].part_crcs = g_crcs;
		it[0].value_len = 4096 + 65536 + 1 + 12345;
		resp_item(&it[1], 1, KVT_OK);
		it[1].flags = PROTO_IF_PART | PROTO_IF_SEALED;
		it[1].first_part = 1;
		it[1].off = 4096;
		it[1].value_len = 4096 + 65536 + 1 + 12345;
		it[1].part_count = 1;
		it[1].part_lens = &g_lens[1];
		it[1].part_crcs = &g_crcs[1];
		resp_item(&it[2], 2, KVT_OK);
		it[2].flags = PROTO_IF_RANGE;
		it[2].off = 100;
		it[2].value_len = 20000;
		it[2].part_count = 1;
		it[2].part_lens = &g_lens[3];
		it[2].part_crcs = &g_crcs[3];
		resp_item(&it[3], 3, KVT_MISS);
		resp_item(&it[4], 7, KVT_ERANGE);
		it[4].value_len = 99;
		c->n = 5;
		return 1;
	case 14:
		frame_init(c, "put request", PROTO_OP_PUT, false, 7);
		f->ns_count = 2;
		f->ns = g_ns[1];
		key_item(&it[0], 0, 0);
		it[0].part_count = 4;
		it[0].part_lens = g_lens;
		it[0].part_crcs = g_crcs;
		key_item(&it[1], 1, 4);
		it[1].flags = PROTO_IF_SEALED;
		it[1].part_count = 1;
		it[1].part_lens = &g_lens[2];
		it[1].part_crcs = &g_crcs[2];
		c->n = 2;
		return 1;
	case 15:
		frame_init(c, "put response", PROTO_OP_PUT, true, 7);
		resp_item(&it[0], 0, KVT_OK);
		resp_item(&it[1], 1, KVT_EXISTS);
		resp_item(&it[2], 2, KVT_EFULL);
		resp_item(&it[3], 3, -ECANCELED);
		c->n = 4;
		return 1;
	case 16:
		frame_init(c, "delete request", PROTO_OP_DELETE, false, 8);
		f->ns_count = 1;
		f->ns = g_ns[2];
		key_item(&it[0], 0, 6);
		c->n = 1;
		return 1;
	case 17:
		frame_init(c, "delete response", PROTO_OP_DELETE, true, 8);
		resp_item(&it[0], 0, KVT_MISS);
		c->n = 1;
		return 1;
	case 18:
		frame_init(c, "clear request, namespace", PROTO_OP_CLEAR, false, 9);
		f->scope.scope = PROTO_SCOPE_NS;
		memcpy(f->scope.digest, g_ns[1], 32);
		return 1;
	case 19:
		frame_init(c, "clear request, tenant", PROTO_OP_CLEAR, false, 9);
		f->scope.scope = PROTO_SCOPE_TENANT;
		f->scope.tenant = "other";
		f->scope.tenant_len = 5;
		return 1;
	case 20:
		frame_init(c, "clear request, all", PROTO_OP_CLEAR, false, 9);
		f->scope.scope = PROTO_SCOPE_ALL;
		return 1;
	case 21:
		frame_init(c, "clear response", PROTO_OP_CLEAR, true, 9);
		f->removed = UINT64_C(0x123456789abcdef0);
		return 1;
	case 22:
		frame_init(c, "stats request", PROTO_OP_STATS, false, 10);
		f->scope.scope = PROTO_SCOPE_TENANT;
		return 1;
	case 23:
		frame_init(c, "stats response", PROTO_OP_STATS, true, 10);
		f->flags |= PROTO_F_MORE;
		memset(&it[0], 0, sizeof(it[0]));
		it[0].kind = PROTO_STAT_NUM;
		it[0].name = "dram.hits";
		it[0].name_len = 9;
		it[0].value = 42;
		memset(&it[1], 0, sizeof(it[1]));
		it[1].kind = PROTO_STAT_TEXT;
		it[1].name = "version";
		it[1].name_len = 7;
		it[1].text = "kvtier 0.1.0";
		it[1].text_len = 12;
		memset(&it[2], 0, sizeof(it[2]));
		it[2].kind = PROTO_STAT_TEXT;
		it[2].name = "empty";
		it[2].name_len = 5;
		c->n = 3;
		return 1;
	case 24:
		frame_init(c, "stats response, last and empty", PROTO_OP_STATS, true, 10);
		return 1;
	case 25:
		frame_init(c, "ping request", PROTO_OP_PING, false, UINT64_MAX);
		return 1;
	case 26:
		frame_init(c, "ping response", PROTO_OP_PING, true, UINT64_MAX);
		return 1;
	case 27:
		frame_init(c, "bye request", PROTO_OP_BYE, false, 0);
		return 1;
	case 28:
		frame_init(c, "bye response", PROTO_OP_BYE, true, 0);
		return 1;
	case 29:
		frame_init(c, "error response with message", PROTO_OP_ERROR, true, 77);
		f->status = KVT_EBADOP;
		f->msg = "unknown opcode 99";
		f->msg_len = 17;
		return 1;
	case 30:
		frame_init(c, "auth failed", PROTO_OP_AUTH, true, 2);
		f->status = PROTO_EAUTH;
		f->msg = "authentication failed";
		f->msg_len = 21;
		return 1;
	case 31:
		frame_init(c, "get failed, no message", PROTO_OP_GET, true, 6);
		f->status = PROTO_ENOAUTH;
		return 1;
	case 32:
		frame_init(c, "hello failed with errno", PROTO_OP_HELLO, true, 1);
		f->status = -ENOMEM;
		return 1;
	case 33:
		frame_init(c, "stats request, all", PROTO_OP_STATS, false, 11);
		f->scope.scope = PROTO_SCOPE_ALL;
		return 1;
	case 34:
		frame_init(c, "clear request, own tenant", PROTO_OP_CLEAR, false, 9);
		f->scope.scope = PROTO_SCOPE_TENANT;
		return 1;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------------
 * Comparing what went in with what came out
 */
static void eq_text(const char *a, uint32_t alen, const char *b, uint32_t blen)
{
	T_EQ_INT(alen, blen);
	if (alen)
		T_EQ_MEM(a, b, alen);
}

static void check_frame(const struct proto_frame *w, const struct proto_frame *g, uint32_t n)
{
	bool resp = w->flags & PROTO_F_RESPONSE;

	T_EQ_INT(g->version, w->op == PROTO_OP_HELLO ? 1 : PROTO_VERSION_MAX);
	T_EQ_INT(g->op, w->op);
	T_EQ_INT(g->flags, w->flags);
	T_EQ_U64(g->tag, w->tag);
	T_EQ_INT(g->status, w->status);
	T_EQ_INT(g->item_count, n);
	T_EQ_INT(g->ns_count, w->ns_count);
	if (w->ns_count)
		T_EQ_MEM(g->ns, w->ns, 32 * (size_t)w->ns_count);
	eq_text(w->msg, w->msg_len, g->msg, g->msg_len);
	if (resp && w->status < 0)
		return;
	switch (w->op) {
	case PROTO_OP_HELLO:
		T_EQ_INT(g->hello.min_version, w->hello.min_version);
		T_EQ_INT(g->hello.max_version, w->hello.max_version);
		eq_text(w->hello.name, w->hello.name_len, g->hello.name, g->hello.name_len);
		if (!resp)
			break;
		T_EQ_INT(g->hello.version, w->hello.version);
		T_EQ_INT(g->hello.caps, w->hello.caps);
		T_EQ_INT(g->hello.auth_count, w->hello.auth_count);
		T_EQ_MEM(g->hello.auth, w->hello.auth, sizeof(w->hello.auth));
		T_EQ_MEM(g->hello.nonce, w->hello.nonce, PROTO_NONCE_LEN);
		T_EQ_U64(g->hello.limits.frame_max, w->hello.limits.frame_max);
		T_EQ_U64(g->hello.limits.table_max, w->hello.limits.table_max);
		T_EQ_U64(g->hello.limits.value_max, w->hello.limits.value_max);
		T_EQ_INT(g->hello.limits.items_max, w->hello.limits.items_max);
		T_EQ_INT(g->hello.limits.parts_max, w->hello.limits.parts_max);
		T_EQ_INT(g->hello.limits.ns_max, w->hello.limits.ns_max);
		T_EQ_INT(g->hello.limits.key_max, w->hello.limits.key_max);
		break;
	case PROTO_OP_AUTH:
		T_EQ_MEM(g->auth.proof, w->auth.proof, PROTO_PROOF_LEN);
		if (resp) {
			T_EQ_INT(g->auth.role, w->auth.role);
			break;
		}
		T_EQ_INT(g->auth.method, w->auth.method);
		T_EQ_MEM(g->auth.nonce, w->auth.nonce, PROTO_NONCE_LEN);
		eq_text(w->auth.tenant, w->auth.tenant_len, g->auth.tenant, g->auth.tenant_len);
		break;
	case PROTO_OP_CLEAR:
	case PROTO_OP_STATS:
		if (resp) {
			if (w->op == PROTO_OP_CLEAR)
				T_EQ_U64(g->removed, w->removed);
			break;
		}
		T_EQ_INT(g->scope.scope, w->scope.scope);
		T_EQ_MEM(g->scope.digest, w->scope.digest, 32);
		eq_text(w->scope.tenant, w->scope.tenant_len, g->scope.tenant, g->scope.tenant_len);
		break;
	case PROTO_OP_LOOKUP:
		if (resp) {
			T_EQ_INT(g->lookup.hits, w->lookup.hits);
			T_EQ_U64(g->lookup.load_ns, w->lookup.load_ns);
		}
		break;
	default:
		break;
	}
}

static void check_parts(const struct proto_item *w, const struct proto_item *g)
{
	T_EQ_INT(g->part_count, w->part_count);
	for (uint32_t i = 0; i < w->part_count; i++) {
		uint64_t len;
		uint32_t crc;

		T_EQ_U64(g->part_lens[i], w->part_lens[i]);
		T_EQ_U64(g->part_crcs[i], w->part_crcs[i]);
		T_RC(proto_item_part(g, i, &len, &crc), 0);
		T_EQ_U64(len, w->part_lens[i]);
		T_EQ_U64(crc, w->part_crcs[i]);
	}
	T_RC(proto_item_part(g, w->part_count, NULL, NULL), KVT_ERANGE);
}

static uint64_t parts_sum(const struct proto_item *it)
{
	uint64_t s = 0;

	for (uint32_t i = 0; i < it->part_count; i++)
		s += it->part_lens[i];
	return s;
}

static void check_item(const struct proto_frame *f, uint32_t pos, const struct proto_item *w,
		       const struct proto_item *g)
{
	bool resp = f->flags & PROTO_F_RESPONSE;

	if (!resp && f->op == PROTO_OP_NS_REGISTER) {
		T_EQ_INT(g->index, pos);
		eq_text(w->text, w->text_len, g->text, g->text_len);
		return;
	}
	if (!resp) {
		T_EQ_INT(g->index, pos);
		T_EQ_INT(g->ns_index, w->ns_index);
		T_ASSERT(g->ns == f->ns + 32 * (size_t)w->ns_index);
		T_EQ_INT(g->key.len, w->key.len);
		T_EQ_MEM(g->key.bytes, w->key.bytes, KVT_KEY_MAX);
		T_EQ_INT(g->flags, w->flags);
		if (f->op == PROTO_OP_GET) {
			T_EQ_INT(g->part, w->part);
			T_EQ_U64(g->off, w->off);
			T_EQ_U64(g->len, w->len);
		}
		if (f->op == PROTO_OP_PUT) {
			check_parts(w, g);
			T_EQ_U64(g->value_len, parts_sum(w));
			T_EQ_U64(g->data_len, parts_sum(w));
		} else {
			T_EQ_U64(g->data_len, 0);
		}
		return;
	}
	if (f->op == PROTO_OP_STATS) {
		T_EQ_INT(g->kind, w->kind);
		T_EQ_U64(g->value, w->value);
		eq_text(w->name, w->name_len, g->name, g->name_len);
		eq_text(w->text, w->text_len, g->text, g->text_len);
		return;
	}
	T_EQ_INT(g->index, w->index);
	T_EQ_INT(g->status, w->status);
	switch (f->op) {
	case PROTO_OP_EXISTS:
	case PROTO_OP_LOOKUP:
		T_EQ_INT(g->tier, w->tier);
		break;
	case PROTO_OP_NS_REGISTER:
		if (w->digest)
			T_EQ_MEM(g->digest, w->digest, 32);
		eq_text(w->text, w->text_len, g->text, g->text_len);
		break;
	case PROTO_OP_GET:
		T_EQ_INT(g->flags, w->flags);
		T_EQ_U64(g->value_len, w->value_len);
		T_EQ_U64(g->off, w->off);
		T_EQ_INT(g->first_part, w->first_part);
		check_parts(w, g);
		T_EQ_U64(g->data_len, parts_sum(w));
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------------------
 * Encode and parse helpers
 */
static uint8_t g_buf[1 << 18];
static uint64_t g_plens[KVT_PARTS_MAX];
static uint32_t g_pcrcs[KVT_PARTS_MAX];

static int64_t encode_case(const struct tcase *c, uint8_t *buf, size_t cap)
{
	uint64_t need = 0;
	int64_t len = proto_encode(&c->f, c->items, c->n, buf, cap, NULL, &need);

	if (len < 0)
		T_FAIL("%s: encode: %s", c->name, proto_strerror((int)len));
	return len;
}

static int parse_dir(bool resp, const uint8_t *buf, size_t len, const struct proto_limits *lim,
		     struct proto_frame *f)
{
	return resp ? proto_parse_response(buf, len, lim, f) : proto_parse_request(buf, len, lim, f);
}

/* Parse buf[0, len) placed at the guard page. */
static int parse_guard(bool resp, const uint8_t *buf, size_t len, const struct proto_limits *lim,
		       struct proto_frame *f)
{
	return parse_dir(resp, t_at_guard(buf, len), len, lim, f);
}

/* ------------------------------------------------------------------------
 * Tests
 */

static void test_round_trips(void)
{
	struct tcase c;
	int ncase = 0;

	for (int i = 0; build_case(i, &c); i++, ncase++) {
		bool resp = c.f.flags & PROTO_F_RESPONSE;
		struct proto_frame f;
		struct proto_iter iter;
		struct proto_item item;
		uint64_t data_off = 0, data_sum = 0;
		int64_t len = encode_case(&c, g_buf, sizeof(g_buf));
		uint8_t *p;
		uint32_t k = 0;
		int rc;

		T_GE_INT(len, PROTO_HDR_LEN);
		p = t_at_guard(g_buf, (size_t)len);
		rc = parse_dir(resp, p, (size_t)len, NULL, &f);
		if (rc != 0)
			T_FAIL("%s: parse: %s", c.name, proto_strerror(rc));
		T_EQ_U64(f.hdr_len, (uint64_t)len);
		T_EQ_U64(f.table_len, (uint64_t)len - PROTO_HDR_LEN);
		check_frame(&c.f, &f, c.n);

		proto_iter_init(&iter, &f, g_plens, g_pcrcs, KVT_PARTS_MAX);
		while ((rc = proto_iter_next(&iter, &item)) == 1) {
			T_ASSERT(k < c.n);
			check_item(&f, k, &c.items[k], &item);
			T_EQ_U64(item.data_off, data_off);
			data_off += item.data_len;
			data_sum += item.data_len;
			k++;
		}
		T_EQ_INT(rc, 0);
		T_EQ_INT(k, c.n);
		T_EQ_U64(f.data_len, data_sum);
		T_EQ_INT(proto_iter_next(&iter, &item), 0);

		/* Without arrays, parts come from the wire. */
		proto_iter_init(&iter, &f, NULL, NULL, 0);
		k = 0;
		while (proto_iter_next(&iter, &item) == 1) {
			if (item.part_count) {
				T_ASSERT(item.part_lens == NULL);
				check_parts(&c.items[k], &(struct proto_item){
					.part_count = item.part_count,
					.part_lens = c.items[k].part_lens,
					.part_crcs = c.items[k].part_crcs });
			}
			k++;
		}
		T_EQ_INT(k, c.n);

		/* The other direction's parser refuses it. */
		T_RC(parse_dir(!resp, p, (size_t)len, NULL, &f),
		     c.f.op == PROTO_OP_ERROR ? KVT_EBADOP : PROTO_EFLAGS);
	}
	T_GE_INT(ncase, 35);
}

/* Every prefix is NEED_MORE with a need beyond it; the whole is complete. */
static void test_truncated_prefixes(void)
{
	struct tcase c;

	for (int i = 0; build_case(i, &c); i++) {
		bool resp = c.f.flags & PROTO_F_RESPONSE;
		struct proto_frame f;
		int64_t len = encode_case(&c, g_buf, sizeof(g_buf));

		for (size_t k = 0; k < (size_t)len; k++) {
			int rc = parse_guard(resp, g_buf, k, NULL, &f);
			if (rc != PROTO_NEED_MORE)
				T_FAIL("%s: prefix %zu of %lld: %d (%s)", c.name, k, (long long)len,
				       rc, proto_strerror(rc));
			T_ASSERT(f.need > k && f.need <= (uint64_t)len);
			T_ASSERT(f.need == PROTO_HDR_LEN || f.need == (uint64_t)len);
		}
		T_RC(parse_guard(resp, g_buf, (size_t)len, NULL, &f), 0);
	}
}

/* Value bytes after the table are not the parser's: any amount is fine. */
static void test_data_not_read(void)
{
	struct tcase c;
	struct proto_frame f;
	int64_t len;

	T_ASSERT(build_case(14, &c)); /* put request */
	len = encode_case(&c, g_buf, sizeof(g_buf));
	memset(g_buf + len, 0xab, 1000);
	T_RC(proto_parse_request(g_buf, (size_t)len + 1000, NULL, &f), 0);
	T_EQ_U64(f.hdr_len, (uint64_t)len);
	T_EQ_U64(f.data_len, 4096 + 65536 + 1 + 12345 + 1);
}

/* No single-bit flip in header or table parses. */
static void test_bit_flips(void)
{
	struct tcase c;
	static uint8_t m[4096];

	for (int i = 0; build_case(i, &c); i++) {
		bool resp = c.f.flags & PROTO_F_RESPONSE;
		struct proto_frame f;
		int64_t len = encode_case(&c, m, sizeof(m));

		for (int64_t bit = 0; bit < len * 8; bit++) {
			int rc;

			m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = parse_guard(resp, m, (size_t)len, NULL, &f);
			if (rc == 0)
				T_FAIL("%s: bit %lld flipped still parses", c.name, (long long)bit);
			m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
	}
}

static const uint8_t golden_hello[] = {
	0x4b, 0x56, 0x54, 0x50, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
	0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb2, 0x6b, 0x53, 0x6e,
	0x01, 0x00, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x6b, 0x76, 0x74, 0x69,
	0x65, 0x72, 0x2f, 0x30, 0x2e, 0x31, 0x2e, 0x30,
};

static const uint8_t golden_put[] = {
	0x4b, 0x56, 0x54, 0x50, 0x01, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x01, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x5c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbd, 0xe1, 0x06, 0x80,
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03,
	0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
	0x1c, 0x1d, 0x1e, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x62, 0x6c, 0x6b, 0x31,
	0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4c, 0xbb, 0x71, 0x9a,
	0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x7c, 0x9d, 0x06, 0xa6, 0x00, 0x00, 0x00, 0x00,
};

/* doc/protocol.md, "Examples": computed in Python from the offset tables. */
static void test_golden(void)
{
	struct proto_frame f;
	struct proto_item it;
	struct proto_iter iter;
	uint8_t digest[32];
	uint64_t lens[2] = { 5, 6 };
	uint32_t crcs[2];
	int64_t len;

	memset(&f, 0, sizeof(f));
	f.op = PROTO_OP_HELLO;
	f.tag = UINT64_C(0x0102030405060708);
	f.hello.min_version = 1;
	f.hello.max_version = 1;
	f.hello.name = "kvtier/0.1.0";
	f.hello.name_len = 12;
	len = proto_encode(&f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL);
	T_EQ_INT(len, sizeof(golden_hello));
	T_EQ_MEM(g_buf, golden_hello, sizeof(golden_hello));
	T_RC(parse_guard(false, golden_hello, sizeof(golden_hello), NULL, &f), 0);
	T_EQ_INT(f.hello.name_len, 12);
	T_EQ_U64(f.tag, UINT64_C(0x0102030405060708));

	for (int i = 0; i < 32; i++)
		digest[i] = (uint8_t)i;
	crcs[0] = kvt_crc32c(0, "hello", 5);
	crcs[1] = kvt_crc32c(0, " world", 6);
	T_EQ_U64(crcs[0], 0x9a71bb4cu);
	T_EQ_U64(crcs[1], 0xa6069d7cu);
	memset(&f, 0, sizeof(f));
	f.op = PROTO_OP_PUT;
	f.version = 1; /* the example is a version 1 frame; version 2's differs at byte 4 */
	f.tag = 42;
	f.ns_count = 1;
	f.ns = digest;
	memset(&it, 0, sizeof(it));
	T_OK(kvt_key_set(&it.key, "blk1", 4));
	it.part_count = 2;
	it.part_lens = lens;
	it.part_crcs = crcs;
	len = proto_encode(&f, &it, 1, g_buf, sizeof(g_buf), NULL, NULL);
	T_EQ_INT(len, sizeof(golden_put));
	T_EQ_MEM(g_buf, golden_put, sizeof(golden_put));
	T_RC(parse_guard(false, golden_put, sizeof(golden_put), NULL, &f), 0);
	T_EQ_INT(f.version, 1);
	T_EQ_U64(f.data_len, 11);
	proto_iter_init(&iter, &f, NULL, NULL, 0);
	T_EQ_INT(proto_iter_next(&iter, &it), 1);
	T_EQ_U64(it.data_off, 0);
	T_EQ_U64(it.data_len, 11);
	T_EQ_INT(it.key.len, 4);
	T_EQ_MEM(it.key.bytes, "blk1", 4);
}

/* Patch a valid frame, recompute its CRC, parse: the rule must refuse it. */
static int patched(int casei, size_t off, const void *bytes, size_t n,
		   const struct proto_limits *lim)
{
	struct tcase c;
	struct proto_frame f;
	int64_t len;

	T_ASSERT(build_case(casei, &c));
	len = encode_case(&c, g_buf, sizeof(g_buf));
	T_ASSERT(off + n <= (size_t)len);
	memcpy(g_buf + off, bytes, n);
	fix_crc(g_buf, (size_t)len);
	return parse_guard(c.f.flags & PROTO_F_RESPONSE, g_buf, (size_t)len, lim, &f);
}

static int patched16(int casei, size_t off, uint16_t v)
{
	uint8_t b[2];

	le_put16(b, v);
	return patched(casei, off, b, 2, NULL);
}

static int patched32(int casei, size_t off, uint32_t v)
{
	uint8_t b[4];

	le_put32(b, v);
	return patched(casei, off, b, 4, NULL);
}

static int patched64(int casei, size_t off, uint64_t v)
{
	uint8_t b[8];

	le_put64(b, v);
	return patched(casei, off, b, 8, NULL);
}

static void test_header_errors(void)
{
	static const uint8_t http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct proto_frame f;

	/* Magic: refused on the first wrong byte, before a whole header. */
	T_RC(parse_guard(false, http, 2, NULL, &f), PROTO_EMAGIC);
	T_RC(parse_guard(false, (const uint8_t *)"KX", 2, NULL, &f), PROTO_EMAGIC);
	T_RC(parse_guard(false, (const uint8_t *)"KVT", 3, NULL, &f), PROTO_NEED_MORE);
	T_RC(parse_guard(false, http, sizeof(http) - 1, NULL, &f), PROTO_EMAGIC);
	T_RC(patched(0, 3, "Q", 1, NULL), PROTO_EMAGIC);
	T_RC(parse_guard(false, NULL, 0, NULL, &f), PROTO_NEED_MORE);
	T_EQ_U64(f.need, PROTO_HDR_LEN);

	/* Version: HELLO only as 1; others in [MIN, MAX]. */
	T_RC(patched16(0, H_VERSION, 2), KVT_EVERSION);
	T_RC(patched16(0, H_VERSION, 0), KVT_EVERSION);
	T_RC(patched16(25, H_VERSION, 0), KVT_EVERSION);
	T_RC(patched16(25, H_VERSION, PROTO_VERSION_MAX + 1), KVT_EVERSION);
	T_RC(patched16(25, H_VERSION, 0xffff), KVT_EVERSION);

	/* Opcode. */
	T_RC(patched16(25, H_OP, PROTO_OP__COUNT), KVT_EBADOP);
	T_RC(patched16(25, H_OP, 0xffff), KVT_EBADOP);
	T_RC(patched16(25, H_OP, PROTO_OP_ERROR), KVT_EBADOP);   /* ERROR as a request */
	T_RC(patched16(26, H_OP, PROTO_OP_ERROR), PROTO_EMALFORMED); /* status 0 */

	/* The header is kept on errors after the magic: the tag can be answered. */
	T_RC(patched16(25, H_OP, 999), KVT_EBADOP);
	{
		struct tcase c;
		int64_t len;

		T_ASSERT(build_case(25, &c));
		len = encode_case(&c, g_buf, sizeof(g_buf));
		le_put16(g_buf + H_OP, 999);
		T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &f), KVT_EBADOP);
		T_EQ_U64(f.tag, UINT64_MAX);
		T_EQ_INT(f.op, 999);
	}

	/* Flags: every reserved bit; RDMA; direction; MORE where it does not apply. */
	for (int bit = 3; bit < 32; bit++)
		T_RC(patched32(25, H_FLAGS, 1u << bit), PROTO_EFLAGS);
	T_RC(patched32(25, H_FLAGS, PROTO_F_RDMA), PROTO_ERDMA);
	T_RC(patched32(14, H_FLAGS, PROTO_F_RDMA), PROTO_ERDMA);
	T_RC(patched32(13, H_FLAGS, PROTO_F_RESPONSE | PROTO_F_RDMA), PROTO_ERDMA);
	T_RC(patched32(25, H_FLAGS, PROTO_F_MORE), PROTO_EFLAGS);
	T_RC(patched32(9, H_FLAGS, PROTO_F_RESPONSE | PROTO_F_MORE), PROTO_EFLAGS); /* lookup */
	T_RC(patched32(26, H_FLAGS, PROTO_F_RESPONSE | PROTO_F_MORE), PROTO_EFLAGS); /* ping */
	T_RC(patched32(31, H_FLAGS, PROTO_F_RESPONSE | PROTO_F_MORE), PROTO_EFLAGS); /* failed */
	T_RC(patched32(13, H_FLAGS, PROTO_F_RESPONSE | PROTO_F_MORE), 0);

	/* Status: 0 in requests; 0 or an error in responses. */
	T_RC(patched32(25, H_STATUS, 1), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, KVT_MISS), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, 5), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, (uint32_t)-4999), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, (uint32_t)INT32_MIN), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, (uint32_t)-6000), PROTO_EMALFORMED);
	T_RC(patched32(26, H_STATUS, (uint32_t)-EIO), 0);
	T_RC(patched32(26, H_STATUS, (uint32_t)KVT_EFULL), 0);

	/* CRC. */
	{
		uint8_t m[sizeof(golden_hello)];

		memcpy(m, golden_hello, sizeof(m));
		m[sizeof(m) - 1] ^= 1;
		T_RC(parse_guard(false, m, sizeof(m), NULL, &f), PROTO_ECRC);
		memcpy(m, golden_hello, sizeof(m));
		m[H_CRC] ^= 0x80;
		T_RC(parse_guard(false, m, sizeof(m), NULL, &f), PROTO_ECRC);
		memcpy(m, golden_hello, sizeof(m));
		m[H_TAG] ^= 0x01;
		T_RC(parse_guard(false, m, sizeof(m), NULL, &f), PROTO_ECRC);
	}
}

/* A bare header: op, flags, items, table_len, data_len, with a valid CRC
 * over whatever table bytes follow (none). */
static int bare(unsigned op, uint32_t flags, uint32_t items, uint64_t table_len,
		uint64_t data_len, const struct proto_limits *lim, struct proto_frame *f)
{
	uint8_t h[PROTO_HDR_LEN];

	memset(h, 0, sizeof(h));
	memcpy(h, PROTO_MAGIC, 4);
	le_put16(h + H_VERSION, op == PROTO_OP_HELLO ? 1 : PROTO_VERSION_MAX);
	le_put16(h + H_OP, (uint16_t)op);
	le_put32(h + H_FLAGS, flags);
	le_put32(h + H_ITEMS, items);
	le_put64(h + H_TABLE_LEN, table_len);
	le_put64(h + H_DATA_LEN, data_len);
	fix_crc(h, sizeof(h));
	return parse_guard(flags & PROTO_F_RESPONSE, h, sizeof(h), lim, f);
}

static void test_limits(void)
{
	struct proto_limits lim, small;
	struct proto_frame f;
	struct tcase c;
	int64_t len;

	proto_limits_default(&lim);
	T_RC(proto_limits_check(&lim), 0);
	T_RC(proto_limits_check(NULL), KVT_ENULL);
	small = lim;
	small.key_max = KVT_KEY_MAX + 1;
	T_RC(proto_limits_check(&small), KVT_EOPTVAL);
	small = lim;
	small.items_max = 0;
	T_RC(proto_limits_check(&small), KVT_EOPTVAL);
	small = lim;
	small.frame_max = small.table_max; /* no room for the header */
	T_RC(proto_limits_check(&small), KVT_EOPTVAL);
	small = lim;
	small.value_max = KVT_VALUE_MAX + 1;
	T_RC(proto_limits_check(&small), KVT_EOPTVAL);
	T_RC(proto_parse_request(golden_hello, sizeof(golden_hello), &small, &f), KVT_EOPTVAL);

	/* Header-level bounds are refused before the table arrives. */
	T_RC(bare(PROTO_OP_GET, 0, lim.items_max + 1, 1 << 20, 0, NULL, &f), PROTO_ECOUNT);
	T_RC(bare(PROTO_OP_GET, 0, UINT32_MAX, 10, 0, NULL, &f), PROTO_ECOUNT);
	T_RC(bare(PROTO_OP_GET, 0, 1, lim.table_max + 1, 0, NULL, &f), KVT_EBADLEN);
	T_RC(bare(PROTO_OP_GET, 0, 1, UINT64_MAX, 0, NULL, &f), KVT_EBADLEN);
	T_RC(bare(PROTO_OP_PUT, 0, 1, 100, UINT64_MAX, NULL, &f), KVT_EBADLEN);
	T_RC(bare(PROTO_OP_PUT, 0, 1, 100, lim.frame_max - PROTO_HDR_LEN - 100 + 1, NULL, &f),
	     KVT_EBADLEN);
	T_RC(bare(PROTO_OP_PUT, 0, 1, 100, lim.frame_max - PROTO_HDR_LEN - 100, NULL, &f),
	     PROTO_NEED_MORE);
	T_EQ_U64(f.need, PROTO_HDR_LEN + 100);
	/* count x smallest item beyond the table: refused without waiting. */
	T_RC(bare(PROTO_OP_GET, 0, lim.items_max, 1000, 0, NULL, &f), PROTO_EMALFORMED);
	/* Data where the op carries none. */
	T_RC(bare(PROTO_OP_GET, 0, 1, 100, 1, NULL, &f), PROTO_EMALFORMED);
	T_RC(bare(PROTO_OP_PING, 0, 0, 0, 1, NULL, &f), PROTO_EMALFORMED);
	/* Items where the op has none, and batches without items. */
	T_RC(bare(PROTO_OP_PING, 0, 1, 0, 0, NULL, &f), PROTO_ECOUNT);
	T_RC(bare(PROTO_OP_GET, 0, 0, 0, 0, NULL, &f), PROTO_ECOUNT);
	T_RC(bare(PROTO_OP_GET, PROTO_F_RESPONSE, 0, 0, 0, NULL, &f), 0);
	T_RC(bare(PROTO_OP_PING, 0, 0, 0, 0, NULL, &f), 0);
	T_RC(bare(PROTO_OP_HELLO, 0, 0, 0, 0, NULL, &f), PROTO_EMALFORMED);

	/* Each limit, on a valid frame parsed with a smaller one. */
	T_ASSERT(build_case(14, &c)); /* put: 2 items, 4 + 1 parts, keys of 32 and 64 */
	len = encode_case(&c, g_buf, sizeof(g_buf));
	small = lim;
	small.items_max = 1;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), PROTO_ECOUNT);
	small = lim;
	small.parts_max = 3;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), PROTO_ECOUNT);
	small = lim;
	small.key_max = 32;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), KVT_EKEYLEN);
	small = lim;
	small.ns_max = 1;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), PROTO_ECOUNT);
	small = lim;
	small.value_max = 65535; /* one part is 65536 */
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), KVT_EBADLEN);
	small = lim;
	small.value_max = 65536 + 4096 + 12345; /* parts fit, their sum does not */
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), KVT_EBADLEN);
	small = lim;
	small.table_max = (uint64_t)len - PROTO_HDR_LEN - 1;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), KVT_EBADLEN);
	small = lim;
	small.frame_max = (uint64_t)len + 81979 - 1; /* data is 81979: one byte short */
	small.table_max = 4096;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), KVT_EBADLEN);
	small.frame_max++;
	T_RC(parse_guard(false, g_buf, (size_t)len, &small, &f), 0);

	/* The encoder refuses the same. */
	small = lim;
	small.parts_max = 3;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), PROTO_ECOUNT);
	small = lim;
	small.key_max = 32;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), KVT_EKEYLEN);
	small = lim;
	small.items_max = 1;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), PROTO_ECOUNT);
	small = lim;
	small.ns_max = 1;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), PROTO_ECOUNT);
	small = lim;
	small.value_max = 65535;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), KVT_EBADLEN);
	small = lim;
	small.table_max = 100;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), KVT_EBADLEN);
	small = lim;
	small.table_max = 4096;
	small.frame_max = (uint64_t)len + 4096 + 65536 + 12345;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), &small, NULL), KVT_EBADLEN);
}

/*
 * Table offsets in the sample frames (doc/protocol.md):
 *   case 14 (put): ns table at T0 (8 + 2 x 32), item 0 at T0 + 72:
 *     +0 ns_index +4 flags +6 key_len +7 rsv +8 part_count +12 rsv +16 key (32)
 *     +48 parts (4 x 16); item 1 at T0 + 72 + 112.
 *   case 12 (get): ns table 8 + 3 x 32, item 0 at T0 + 104: +8 part +12 rsv +16 off +24 len
 *   case 13 (get response): item 0 at T0: +8 flags +12 part_count +16 value_len +24 off
 *     +32 first_part +36 rsv +40 parts
 */
#define PUT_I0 (T0 + 72)
#define PUT_I1 (PUT_I0 + 48 + 4 * 16)
#define GET_I0 (T0 + 104)
#define GET_I1 (GET_I0 + 32 + 32)
#define GET_I2 (GET_I1 + 32 + 32)
#define GETR_I0 T0
#define GETR_I1 (GETR_I0 + 40 + 4 * 16)

static void test_table_errors(void)
{
	uint8_t b[64];

	/* Overflow attempts: counts and lengths that would wrap a product or sum. */
	T_RC(patched32(14, PUT_I0 + 8, UINT32_MAX), PROTO_ECOUNT);     /* part_count */
	T_RC(patched32(14, PUT_I0 + 8, 0), PROTO_ECOUNT);
	T_RC(patched32(14, T0, UINT32_MAX), PROTO_ECOUNT);             /* ns_count */
	T_RC(patched32(14, T0, 0), PROTO_ECOUNT);
	T_RC(patched32(14, T0, 200), PROTO_EMALFORMED);                /* more ns than bytes */
	T_RC(patched64(14, PUT_I0 + 48, UINT64_MAX), KVT_EBADLEN);     /* part len */
	T_RC(patched64(14, PUT_I0 + 48, 0), KVT_EBADLEN);
	/* Two parts of 2^63 would wrap a 64-bit sum: each is refused first. */
	memset(b, 0, sizeof(b));
	le_put64(b, UINT64_C(1) << 63);
	le_put32(b + 8, g_crcs[0]);
	le_put64(b + 16, UINT64_C(1) << 63);
	le_put32(b + 24, g_crcs[1]);
	T_RC(patched(14, PUT_I0 + 48, b, 32, NULL), KVT_EBADLEN);
	/* Parts each within value_max whose sum is not. */
	{
		struct proto_limits lim;

		proto_limits_default(&lim);
		lim.value_max = 65536;
		le_put64(b, 65536);
		le_put64(b + 16, 65536);
		T_RC(patched(14, PUT_I0 + 48, b, 32, &lim), KVT_EBADLEN);
	}
	T_RC(patched64(12, GET_I2 + 16, UINT64_MAX), KVT_EBADLEN);    /* range off */
	T_RC(patched64(12, GET_I2 + 16, PROTO_DEF_VALUE_MAX - 199), KVT_EBADLEN);
	T_RC(patched64(12, GET_I2 + 16, PROTO_DEF_VALUE_MAX - 200), 0);
	T_RC(patched64(12, GET_I2 + 24, UINT64_MAX), KVT_EBADLEN);    /* range len */
	T_RC(patched64(12, GET_I2 + 24, 0), KVT_EBADLEN);
	T_RC(patched32(12, GET_I1 + 8, UINT32_MAX), PROTO_EMALFORMED); /* part index */
	T_RC(patched32(12, GET_I1 + 8, KVT_PARTS_MAX), PROTO_EMALFORMED);
	T_RC(patched16(0, T0 + 4, 0xffff), KVT_EBADLEN);             /* hello name_len */
	T_RC(patched16(6, T0, 0xffff), KVT_EBADLEN);                 /* canon text_len */
	T_RC(patched16(6, T0, 0), KVT_EBADLEN);
	T_RC(patched16(23, T0, 0xffff), KVT_EBADLEN);                /* stat name_len */
	T_RC(patched16(3, T0 + 2, 0xffff), KVT_EBADLEN);             /* tenant_len */
	T_RC(patched16(29, T0, 0xffff), KVT_EBADLEN);                /* msg_len */
	T_RC(patched16(29, T0, 0), KVT_EBADLEN);

	/* Keys. */
	T_RC(patched(14, PUT_I0 + 6, "\0", 1, NULL), KVT_EKEYLEN);
	T_RC(patched(14, PUT_I0 + 6, "\x41", 1, NULL), KVT_EKEYLEN);
	T_RC(patched(14, PUT_I0 + 6, "\xff", 1, NULL), KVT_EKEYLEN);
	T_ASSERT(patched(14, PUT_I0 + 6, "\x1f", 1, NULL) < 0);   /* sizes disagree */

	/* Item flags: reserved bits, flags of another op, PART with RANGE.
	 * (Bit 6, RETAIN, was reserved here until 2026-12-02: a server that
	 * predates it refuses a PUT with it so, PROTO_EFLAGS.) */
	for (int bit = 7; bit < 16; bit++)
		T_RC(patched16(14, PUT_I0 + 4, (uint16_t)(1u << bit)), PROTO_EFLAGS);
	/* RETAIN: a PUT request's only (and with SEALED). */
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_RETAIN), 0);
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_RETAIN | PROTO_IF_SEALED), 0);
	T_RC(patched16(12, GET_I0 + 4, PROTO_IF_RETAIN), PROTO_EFLAGS);
	T_RC(patched16(8, T0 + 40 + 4, PROTO_IF_RETAIN), PROTO_EFLAGS);    /* lookup key */
	T_RC(patched16(13, GETR_I0 + 8, PROTO_IF_RETAIN), PROTO_EFLAGS);
	/* PLACED without its anchor bytes and copies; REPAIR or FORWARD
	 * without PLACED. */
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_PLACED), PROTO_EMALFORMED);
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_REPAIR), PROTO_EFLAGS);
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_FORWARD), PROTO_EFLAGS);
	T_RC(patched16(14, PUT_I0 + 4, PROTO_IF_PART), PROTO_EFLAGS);
	T_RC(patched16(12, GET_I0 + 4, PROTO_IF_SEALED), PROTO_EFLAGS);
	T_RC(patched16(12, GET_I0 + 4, PROTO_IF_PART | PROTO_IF_RANGE), PROTO_EFLAGS);
	T_RC(patched16(8, T0 + 40 + 4, PROTO_IF_PART), PROTO_EFLAGS);    /* lookup key */
	T_RC(patched16(13, GETR_I0 + 8, 0x100), PROTO_EFLAGS);
	T_RC(patched16(13, GETR_I0 + 8, PROTO_IF_PART), PROTO_ECOUNT);  /* 4 entries for a part */

	/* Fields that must be 0 when their flag is clear. */
	T_RC(patched32(12, GET_I0 + 8, 1), PROTO_EMALFORMED);
	T_RC(patched64(12, GET_I0 + 16, 1), PROTO_EMALFORMED);

	/* Reserved bytes. */
	T_RC(patched(14, PUT_I0 + 7, "\1", 1, NULL), PROTO_EMALFORMED);
	T_RC(patched32(14, PUT_I0 + 12, 1), PROTO_EMALFORMED);
	T_RC(patched32(14, PUT_I0 + 48 + 12, 1), PROTO_EMALFORMED);
	T_RC(patched32(14, T0 + 4, 1), PROTO_EMALFORMED);
	T_RC(patched32(12, GET_I0 + 12, 1), PROTO_EMALFORMED);
	T_RC(patched16(0, T0 + 6, 1), PROTO_EMALFORMED);
	T_RC(patched32(3, T0 + 4, 1), PROTO_EMALFORMED);
	T_RC(patched32(5, T0 + 4, 1), PROTO_EMALFORMED);
	T_RC(patched16(1, T0 + 98, 1), PROTO_EMALFORMED);
	T_RC(patched16(1, T0 + 80 + 2 * 2, 5), PROTO_EMALFORMED);      /* auth past count */
	T_RC(patched32(13, GETR_I0 + 36, 1), PROTO_EMALFORMED);
	T_RC(patched(9, T0 + 16 + 9, "\1", 1, NULL), PROTO_EMALFORMED);

	/* Namespace index beyond the table. */
	T_RC(patched32(14, PUT_I0, 2), PROTO_EMALFORMED);
	T_RC(patched32(8, T0 + 40, 1), PROTO_EMALFORMED);
	T_RC(patched32(8, T0, 2), PROTO_ECOUNT); /* lookup: one namespace */

	/* Responses: index order, status, tier. */
	T_RC(patched32(15, T0 + 8, 0), PROTO_EMALFORMED);               /* index 0 twice */
	T_RC(patched32(15, T0 + 8 + 4, 3), PROTO_EMALFORMED);           /* status 3 */
	T_RC(patched32(15, T0 + 8 + 4, (uint32_t)-7000), PROTO_EMALFORMED);
	T_RC(patched32(15, T0 + 24, UINT32_MAX), PROTO_EMALFORMED);     /* index >= items_max */
	T_RC(patched(9, T0 + 16 + 8, "\x05", 1, NULL), PROTO_EMALFORMED);  /* tier 5 */
	T_RC(patched(9, T0 + 16 + 8, "\x00", 1, NULL), PROTO_EMALFORMED);  /* hit without tier */
	T_RC(patched(9, T0 + 16 + 24 + 8, "\x01", 1, NULL), PROTO_EMALFORMED); /* miss with one */
	T_RC(patched32(9, T0, 6), PROTO_EMALFORMED);                     /* hits > items */
	T_RC(patched32(9, T0, 5), 0);

	/* GET response consistency. */
	T_RC(patched64(13, GETR_I0 + 16, 1), PROTO_EMALFORMED);   /* value_len != parts */
	T_RC(patched64(13, GETR_I0 + 16, UINT64_MAX), KVT_EBADLEN);
	T_RC(patched64(13, GETR_I1 + 24, 81978 - 65536 + 1), KVT_EBADLEN); /* part past the end */
	T_RC(patched64(13, GETR_I1 + 24, 81978 - 65536), 0);
	T_RC(patched64(13, GETR_I0 + 24, 1), PROTO_EMALFORMED);   /* whole value at off 1 */
	T_RC(patched32(13, GETR_I0 + 32, 1), PROTO_EMALFORMED);   /* whole value from part 1 */

	/* Texts: printable ASCII only, tenants without spaces, not "-". */
	T_RC(patched(0, T0 + 8, "\x7f", 1, NULL), PROTO_EMALFORMED);
	T_RC(patched(6, T0 + 4, "\t", 1, NULL), PROTO_EMALFORMED);
	T_RC(patched(3, T0 + 72, " ", 1, NULL), PROTO_EMALFORMED);
	T_RC(patched(29, T0 + 4, "\n", 1, NULL), PROTO_EMALFORMED);
	T_RC(patched(23, T0 + 16, "=", 1, NULL), 0);
	T_RC(patched(23, T0 + 16, " ", 1, NULL), PROTO_EMALFORMED);
	{
		struct tcase c;
		struct proto_frame f;
		int64_t len;

		T_ASSERT(build_case(19, &c));
		c.f.scope.tenant = "-";
		c.f.scope.tenant_len = 1;
		T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL),
		     PROTO_EMALFORMED);
		c.f.scope.tenant = "x";
		len = encode_case(&c, g_buf, sizeof(g_buf));
		g_buf[T0 + 40] = '-';
		fix_crc(g_buf, (size_t)len);
		T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &f), PROTO_EMALFORMED);
	}

	/* Op sections. */
	T_RC(patched16(0, T0, 0), PROTO_EMALFORMED);             /* min_version 0 */
	T_RC(patched16(0, T0, 4), PROTO_EMALFORMED);             /* min > max */
	T_RC(patched16(1, T0, 2), PROTO_EMALFORMED);             /* chosen outside [min, max] */
	T_RC(patched16(1, T0 + 98, PROTO_CAP_RETAIN), PROTO_EMALFORMED); /* caps in version 1 */
	T_RC(patched16(2, T0 + 98, 0x4), PROTO_EMALFORMED);      /* an unknown cap */
	T_RC(patched16(2, T0 + 98, 0x8000), PROTO_EMALFORMED);
	T_RC(patched16(2, T0 + 98, 0), 0);                       /* version 2 without caps */
	T_RC(patched16(1, T0 + 6, 0), PROTO_ECOUNT);             /* no auth method */
	T_RC(patched16(1, T0 + 6, 9), PROTO_ECOUNT);
	T_RC(patched64(1, T0 + 40, 0), PROTO_EMALFORMED);        /* limits: frame_max 0 */
	T_RC(patched16(3, T0, 0), PROTO_EMALFORMED);             /* auth method 0 */
	T_RC(patched16(3, T0, PROTO_AUTH_NONE), PROTO_EMALFORMED); /* NONE with a proof */
	T_RC(patched32(5, T0, 2), PROTO_EMALFORMED);             /* role */
	T_RC(patched32(18, T0, 0), PROTO_EMALFORMED);            /* scope */
	T_RC(patched32(18, T0, 4), PROTO_EMALFORMED);
	T_RC(patched32(18, T0, PROTO_SCOPE_ALL), PROTO_EMALFORMED); /* ALL with a digest */
	T_RC(patched32(22, T0, PROTO_SCOPE_NS), PROTO_EMALFORMED);  /* STATS of a namespace */
	T_RC(patched32(23, T0 + 4, 2), PROTO_EMALFORMED);        /* stat kind */

	/* Sizes: data_len must be the items' sum, and nothing may trail. */
	T_RC(patched64(14, H_DATA_LEN, 4096 + 65536 + 1 + 12345), PROTO_EMALFORMED);
	T_RC(patched64(14, H_DATA_LEN, 4096 + 65536 + 1 + 12345 + 2), PROTO_EMALFORMED);
	T_RC(patched32(14, H_ITEMS, 1), PROTO_EMALFORMED);       /* second item trails */
	T_RC(patched32(14, H_ITEMS, 3), PROTO_EMALFORMED);       /* a third is missing */
	T_RC(patched32(23, H_ITEMS, 2), PROTO_EMALFORMED);
	T_RC(patched32(29, H_ITEMS, 1), PROTO_ECOUNT);           /* failed frames have none */
}

static void test_encoder(void)
{
	struct tcase c;
	struct proto_writer w;
	uint64_t need = 0;
	int64_t len;

	/* Too small: the exact length needed, nothing written past cap. */
	for (int i = 0; build_case(i, &c); i++) {
		len = encode_case(&c, g_buf, sizeof(g_buf));
		T_RC(proto_encode(&c.f, c.items, c.n, NULL, 0, NULL, &need), KVT_EBUFSMALL);
		T_EQ_U64(need, (uint64_t)len);
		for (size_t cap = 0; cap < (size_t)len; cap += 1 + cap / 3) {
			uint8_t *p = t_at_guard(NULL, cap);
			need = 0;
			T_RC(proto_encode(&c.f, c.items, c.n, p, cap, NULL, &need), KVT_EBUFSMALL);
			T_EQ_U64(need, (uint64_t)len);
		}
	}

	/* Streaming: errors stick. */
	T_ASSERT(build_case(14, &c));
	T_RC(proto_write_begin(&w, g_buf, sizeof(g_buf), NULL, &c.f), 0);
	T_RC(proto_write_item(&w, &c.items[0]), 0);
	c.items[1].key.len = 0;
	T_RC(proto_write_item(&w, &c.items[1]), KVT_EKEYLEN);
	T_RC(proto_write_item(&w, &c.items[0]), KVT_EKEYLEN);
	T_RC(proto_write_end(&w, &need), KVT_EKEYLEN);

	/* A batch request needs an item; a failed response takes none. */
	T_ASSERT(build_case(16, &c));
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_ECOUNT);
	T_ASSERT(build_case(31, &c));
	T_RC(proto_encode(&c.f, (struct proto_item[1]){ { .index = 0 } }, 1, g_buf,
			  sizeof(g_buf), NULL, NULL), PROTO_ECOUNT);

	/* What the header and op section may not say. */
	T_ASSERT(build_case(25, &c));
	c.f.flags = PROTO_F_RDMA;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_ERDMA);
	c.f.flags = 0x100;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EFLAGS);
	c.f.flags = 0;
	c.f.op = PROTO_OP__COUNT;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), KVT_EBADOP);
	c.f.op = PROTO_OP_PING;
	c.f.version = PROTO_VERSION_MAX + 1;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), KVT_EVERSION);
	c.f.version = 1; /* every version the codec speaks */
	T_ASSERT(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL) > 0);
	c.f.version = 2;
	T_ASSERT(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL) > 0);
	c.f.version = 0;
	c.f.status = KVT_EFULL;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
	c.f.status = 0;
	c.f.ns_count = 1;
	T_RC(proto_encode(&c.f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
	T_ASSERT(build_case(9, &c));
	c.f.lookup.hits = 6;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), NULL, NULL),
	     PROTO_EMALFORMED);
	T_ASSERT(build_case(13, &c));
	c.items[1].index = 0;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), NULL, NULL),
	     PROTO_EMALFORMED);
	T_ASSERT(build_case(14, &c));
	c.items[0].part_crcs = NULL;
	T_RC(proto_encode(&c.f, c.items, c.n, g_buf, sizeof(g_buf), NULL, NULL), KVT_ENULL);
	T_RC(proto_encode(NULL, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), KVT_ENULL);
}

static void test_iterator(void)
{
	struct tcase c;
	struct proto_frame f;
	struct proto_iter it;
	struct proto_item item;
	uint64_t lens[2];
	uint32_t crcs[2];
	int64_t len;

	/* Part arrays too short: that item says so, the others are fine. */
	T_ASSERT(build_case(14, &c));
	len = encode_case(&c, g_buf, sizeof(g_buf));
	T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &f), 0);
	proto_iter_init(&it, &f, lens, crcs, 2);
	T_RC(proto_iter_next(&it, &item), KVT_ERANGE);
	T_EQ_INT(item.part_count, 4);
	T_ASSERT(item.part_lens == NULL);
	T_RC(proto_item_part(&item, 3, &lens[0], &crcs[0]), 0);
	T_EQ_U64(lens[0], 12345);
	T_EQ_U64(crcs[0], 0xffffffffu);
	T_RC(proto_iter_next(&it, &item), 1);
	T_EQ_INT(item.part_count, 1);
	T_EQ_U64(item.part_lens[0], 1);
	T_EQ_U64(item.data_off, 4096 + 65536 + 1 + 12345);
	T_RC(proto_iter_next(&it, &item), 0);
	T_RC(proto_iter_next(NULL, &item), KVT_ENULL);

	/* A frame without items iterates to nothing. */
	T_RC(proto_parse_request(golden_hello, sizeof(golden_hello), NULL, &f), 0);
	proto_iter_init(&it, &f, NULL, NULL, 0);
	T_RC(proto_iter_next(&it, &item), 0);
}

static void test_auth(void)
{
	static const uint8_t want_client[32] = {
		0x44, 0x1d, 0x5c, 0x51, 0xba, 0xe4, 0x88, 0xac, 0xf9, 0x23, 0x31, 0x22,
		0x7d, 0x23, 0xad, 0xaf, 0x40, 0x10, 0xb2, 0x78, 0xda, 0x32, 0x98, 0x71,
		0x2b, 0xf7, 0xdf, 0x26, 0xae, 0x61, 0x35, 0xa5,
	};
	static const uint8_t want_server[32] = {
		0xa0, 0xb9, 0xa8, 0x49, 0x2b, 0x3f, 0x69, 0x98, 0x05, 0xa7, 0xf7, 0x66,
		0x0b, 0xa9, 0xc7, 0x3e, 0xfd, 0x11, 0xbb, 0xac, 0xeb, 0x3e, 0xb5, 0xc4,
		0x39, 0xd6, 0x2e, 0xb4, 0x6d, 0x45, 0xec, 0x27,
	};
	const char *secret = "0123456789abcdef0123456789abcdef";
	uint8_t sn[32], cn[32], proof[32], sproof[32];

	for (int i = 0; i < 32; i++) {
		sn[i] = (uint8_t)i;
		cn[i] = (uint8_t)(32 + i);
	}
	/* Golden vectors (Python's hmac over doc/protocol.md's definition). */
	T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme", 4, proof), 0);
	T_EQ_MEM(proof, want_client, 32);
	T_RC(proto_auth_proof(PROTO_PROOF_SERVER, secret, 32, sn, cn, "acme", 4, sproof), 0);
	T_EQ_MEM(sproof, want_server, 32);

	/* The server checks the client's proof, the client the server's. */
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme", 4, proof), 0);
	T_RC(proto_auth_check(PROTO_PROOF_SERVER, secret, 32, sn, cn, "acme", 4, sproof), 0);
	/* A wrong secret, tenant, nonce or direction fails. */
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, "0123456789abcdef0123456789abcdeF", 32, sn, cn,
			      "acme", 4, proof), PROTO_EAUTH);
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 31, sn, cn, "acme", 4, proof),
	     PROTO_EAUTH);
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acm3", 4, proof),
	     PROTO_EAUTH);
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 32, cn, sn, "acme", 4, proof),
	     PROTO_EAUTH);
	T_RC(proto_auth_check(PROTO_PROOF_SERVER, secret, 32, sn, cn, "acme", 4, proof),
	     PROTO_EAUTH);
	proof[31] ^= 1;
	T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme", 4, proof),
	     PROTO_EAUTH);
	/* Bounds. */
	T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, secret, PROTO_SECRET_MIN - 1, sn, cn, "acme",
			      4, proof), KVT_EBADLEN);
	T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme", 0, proof),
	     KVT_EBADLEN);
	T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme",
			      PROTO_TENANT_MAX + 1, proof), KVT_EBADLEN);
	T_RC(proto_auth_proof(2, secret, 32, sn, cn, "acme", 4, proof), KVT_EBADLEN);
	T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, NULL, 32, sn, cn, "acme", 4, proof), KVT_ENULL);

	/* The whole handshake through the codec: nonce out, proof in, checked. */
	{
		struct proto_frame f, g;
		int64_t len;

		memset(&f, 0, sizeof(f));
		f.op = PROTO_OP_AUTH;
		f.tag = 5;
		f.auth.method = PROTO_AUTH_HMAC_SHA256;
		f.auth.tenant = "acme";
		f.auth.tenant_len = 4;
		memcpy(f.auth.nonce, cn, 32);
		T_RC(proto_auth_proof(PROTO_PROOF_CLIENT, secret, 32, sn, cn, "acme", 4,
				      f.auth.proof), 0);
		len = proto_encode(&f, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL);
		T_RC(parse_guard(false, g_buf, (size_t)len, NULL, &g), 0);
		T_RC(proto_auth_check(PROTO_PROOF_CLIENT, secret, 32, sn, g.auth.nonce,
				      g.auth.tenant, g.auth.tenant_len, g.auth.proof), 0);
	}
}

static void test_names(void)
{
	static const int codes[] = { PROTO_EMAGIC, PROTO_EFLAGS, PROTO_ECOUNT, PROTO_EMALFORMED,
				     PROTO_ECRC, PROTO_ERDMA, PROTO_EAUTH, PROTO_ENOAUTH,
				     PROTO_EPERM, PROTO_NEED_MORE };

	for (size_t i = 0; i < KVT_ARRAY_LEN(codes); i++) {
		T_ASSERT(strcmp(proto_strerror(codes[i]), "unknown result code") != 0);
		/* Distinct from errno, in kvtier's range, named by the one strerror. */
		if (codes[i] < 0) {
			T_ASSERT(codes[i] >= -5999 && codes[i] <= -5900);
			T_EQ_STR(kvt_strerror(codes[i]), proto_strerror(codes[i]));
		}
	}
	T_EQ_STR(proto_strerror(KVT_EBADOP), kvt_strerror(KVT_EBADOP));
	T_EQ_STR(proto_op_name(PROTO_OP_GET), "get");
	T_EQ_STR(proto_op_name(PROTO_OP__COUNT), "unknown");
	for (unsigned op = 0; op < PROTO_OP__COUNT; op++)
		T_ASSERT(proto_op_name(op) != NULL && strcmp(proto_op_name(op), "unknown") != 0);
}

/* PUT items with PROTO_IF_PLACED (doc/protocol.md, PUT): the anchor and
 * copies round-trip; the encoder refuses what the parser would. */
static void test_placed(void)
{
	struct proto_frame f = { .op = PROTO_OP_PUT, .tag = 9, .ns_count = 1 }, g;
	struct proto_item it[2] = { 0 }, got;
	struct proto_iter iter;
	uint64_t lens[1] = { 100 };
	uint32_t crcs[1] = { 7 };
	int64_t len;

	f.ns = g_ns[0];
	for (int i = 0; i < 2; i++) {
		key_item(&it[i], 0, i);
		it[i].part_count = 1;
		it[i].part_lens = lens;
		it[i].part_crcs = crcs;
	}
	it[0].flags = PROTO_IF_PLACED | PROTO_IF_REPAIR;
	it[0].anchor = UINT64_C(0x0123456789abcdef);
	it[0].copies = 3;
	len = proto_encode(&f, it, 2, g_buf, sizeof(g_buf), NULL, NULL);
	T_ASSERT(len > 0);
	T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &g), 0);
	T_EQ_U64(g.data_len, 200);
	proto_iter_init(&iter, &g, NULL, NULL, 0);
	T_RC(proto_iter_next(&iter, &got), 1);
	T_EQ_U64(got.flags, PROTO_IF_PLACED | PROTO_IF_REPAIR);
	T_EQ_U64(got.anchor, UINT64_C(0x0123456789abcdef));
	T_EQ_U64(got.copies, 3);
	T_EQ_U64(got.value_len, 100);
	T_RC(proto_iter_next(&iter, &got), 1);
	T_EQ_U64(got.flags, 0);
	T_EQ_U64(got.anchor, 0);
	T_EQ_U64(got.copies, 0);
	T_RC(proto_iter_next(&iter, &got), 0);

	/* Refused: copies 0 or past PROTO_COPIES_MAX with PLACED, an anchor
	 * or copies without it, REPAIR alone. */
	it[0].copies = 0;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
	it[0].copies = PROTO_COPIES_MAX + 1;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
	it[0].copies = 2;
	it[0].flags = 0;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
	it[0].flags = PROTO_IF_REPAIR;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EFLAGS);
	/* FORWARD (the server makes the other copies): with PLACED it
	 * round-trips; alone, or with REPAIR (a peer's copy is never forwarded
	 * again), it is refused. */
	it[0].flags = PROTO_IF_PLACED | PROTO_IF_FORWARD | PROTO_IF_SEALED;
	len = proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL);
	T_ASSERT(len > 0);
	T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &g), 0);
	proto_iter_init(&iter, &g, NULL, NULL, 0);
	T_RC(proto_iter_next(&iter, &got), 1);
	T_EQ_U64(got.flags, PROTO_IF_PLACED | PROTO_IF_FORWARD | PROTO_IF_SEALED);
	T_EQ_U64(got.copies, 2);
	it[0].flags = PROTO_IF_FORWARD;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EFLAGS);
	it[0].flags = PROTO_IF_PLACED | PROTO_IF_FORWARD | PROTO_IF_REPAIR;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EFLAGS);
	/* DRAIN: the mode round-trips; another mode or reserved bytes are
	 * refused; the response is bare. */
	{
		struct proto_frame d = { .op = PROTO_OP_DRAIN, .tag = 5,
					 .drain_mode = PROTO_DRAIN_EXIT }, gd;
		len = proto_encode(&d, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL);
		T_EQ_U64(len, PROTO_HDR_LEN + 8);
		T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &gd), 0);
		T_EQ_U64(gd.drain_mode, PROTO_DRAIN_EXIT);
		g_buf[PROTO_HDR_LEN + 4] = 1;
		fix_crc(g_buf, (size_t)len);
		T_RC(proto_parse_request(g_buf, (size_t)len, NULL, &gd), PROTO_EMALFORMED);
		d.drain_mode = 3;
		T_RC(proto_encode(&d, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EMALFORMED);
		d.flags = PROTO_F_RESPONSE;
		d.drain_mode = 0;
		len = proto_encode(&d, NULL, 0, g_buf, sizeof(g_buf), NULL, NULL);
		T_EQ_U64(len, PROTO_HDR_LEN);
		T_RC(proto_parse_response(g_buf, (size_t)len, NULL, &gd), 0);
		T_EQ_STR(proto_op_name(PROTO_OP_DRAIN), "drain");
	}
	/* PLACED only on PUT requests. */
	f.op = PROTO_OP_GET;
	it[0].flags = PROTO_IF_PLACED;
	it[0].part_count = 0;
	T_RC(proto_encode(&f, it, 1, g_buf, sizeof(g_buf), NULL, NULL), PROTO_EFLAGS);
}

int main(void)
{
	samples_init();
	test_round_trips();
	test_truncated_prefixes();
	test_data_not_read();
	test_bit_flips();
	test_golden();
	test_header_errors();
	test_limits();
	test_table_errors();
	test_encoder();
	test_iterator();
	test_auth();
	test_names();
	test_placed();
	/* fuzz_proto has found no crash yet; each one it finds becomes a
	 * test_fuzz_<what>() here, with its input as bytes. */
	return 0;
}

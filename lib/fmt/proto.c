/*
 * proto.c - the kvtierd wire protocol codec (proto.h; the specification,
 * byte by byte, is doc/protocol.md): frames parsed from and encoded into
 * caller buffers, and the HMAC proofs of the AUTH handshake.
 *
 * Pure functions: no I/O, no allocation, no state, no locks; any thread.
 * (proto_auth_* call OpenSSL's HMAC, which allocates inside.)  The offset
 * tables below are the format; every field is read and written one at a
 * time, little-endian, never through a struct overlay.
 *
 * Invariants:
 *   - A parser reads only [buf, buf + len), and of that only the header and
 *     the table: the data section (values) is the caller's business.  It
 *     trusts nothing: every count and length is bounded by the limits
 *     before it becomes an offset, in 64-bit arithmetic that cannot wrap
 *     (table_len <= 2^30, counts <= 2^16, values <= 2^36).
 *   - A prefix of a valid frame is PROTO_NEED_MORE, never an error: the
 *     magic is compared on the bytes present, the other header checks wait
 *     for the whole header, the CRC and the table for the whole table.
 *   - The whole table is checked before the first item is handed out (the
 *     iterator re-decodes what the parser already accepted and cannot
 *     fail), so a server never acts on half a malformed batch.
 *   - Reserved fields and padding are zero and every text has one spelling,
 *     so each frame has exactly one encoding: what the parser accepts, the
 *     encoder reproduces byte for byte (fuzz_proto checks this).
 *   - Encoders and parsers share the checks (proto_hdr_check,
 *     proto_count_check, proto_op_check, proto_item_check): nothing encoded
 *     is refused on the way back.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "kvt_int.h"
#include "proto.h"
#include "le.h"

static bool proto_is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* ------------------------------------------------------------------------
 * Fixed header: the first PROTO_HDR_LEN bytes of every frame.
 *
 *   off  size  field
 *     0     4  magic "KVTP"
 *     4     2  u16 version
 *     6     2  u16 opcode (enum proto_op)
 *     8     4  u32 flags (PROTO_F_*)
 *    12     4  u32 item_count
 *    16     8  u64 tag
 *    24     8  u64 table_len
 *    32     8  u64 data_len
 *    40     4  i32 status (two's complement)
 *    44     4  u32 CRC32C of header bytes [0, 44) followed by the table
 *    48        table (table_len bytes), then data (data_len bytes)
 *
 * Magic, version, opcode and the lengths never move in any version.
 */
enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_OP = 6,
	H_FLAGS = 8,
	H_ITEMS = 12,
	H_TAG = 16,
	H_TABLE_LEN = 24,
	H_DATA_LEN = 32,
	H_STATUS = 40,
	H_CRC = 44,
	H_END = 48,
};
_Static_assert(sizeof(PROTO_MAGIC) - 1 == H_VERSION - H_MAGIC, "magic is 4 bytes");
_Static_assert(H_END == PROTO_HDR_LEN, "the fixed header is 48 bytes");
_Static_assert(H_CRC + 4 == H_END, "the CRC is the header's last field");

#define PROTO_F_KNOWN (PROTO_F_RESPONSE | PROTO_F_MORE | PROTO_F_RDMA)
#define PROTO_IF_KNOWN (PROTO_IF_PART | PROTO_IF_RANGE | PROTO_IF_SEALED | PROTO_IF_PLACED | \
			PROTO_IF_REPAIR | PROTO_IF_FORWARD | PROTO_IF_RETAIN)

/* ------------------------------------------------------------------------
 * Table: [op section][namespace table][items].  Op sections (only in
 * frames that have one; a response with status < 0 has the message
 * section instead and nothing else):
 *
 *   HELLO request             HELLO response (status 0)
 *     0  2 min_version          0  2 version (chosen)
 *     2  2 max_version          2  2 min_version (server)
 *     4  2 name_len             4  2 max_version (server)
 *     6  2 reserved, 0          6  2 auth_count
 *     8    name                 8 32 nonce
 *                              40  8 frame_max   48 8 table_max
 *                              56  8 value_max   64 4 items_max
 *                              68  4 parts_max   72 4 ns_max
 *                              76  4 key_max
 *                              80 16 auth methods, u16 x 8, zero past auth_count
 *                              96  2 name_len    98 2 reserved, 0
 *                             100    name
 *
 *   AUTH request              AUTH response (status 0)
 *     0  2 method               0  4 role
 *     2  2 tenant_len           4  4 reserved, 0
 *     4  4 reserved, 0          8 32 server proof
 *     8 32 client nonce
 *    40 32 client proof
 *    72    tenant
 *
 *   CLEAR, STATS request      CLEAR response       LOOKUP response
 *     0  4 scope                0  8 removed         0  4 hits
 *     4  2 tenant_len                                4  4 reserved, 0
 *     6  2 reserved, 0                               8  8 load_ns
 *     8 32 digest
 *    40    tenant
 *
 *   message (response, status < 0): empty, or
 *     0  2 msg_len (>= 1)   2  2 reserved, 0   4  msg
 *
 *   namespace table (requests of LOOKUP EXISTS GET PUT DELETE)
 *     0  4 ns_count   4  4 reserved, 0   8  ns_count x 32-byte digests
 */
enum {
	HQ_MIN = 0, HQ_MAX = 2, HQ_NAME_LEN = 4, HQ_RSV = 6, HQ_NAME = 8,
	HR_VERSION = 0, HR_MIN = 2, HR_MAX = 4, HR_AUTH_COUNT = 6, HR_NONCE = 8,
	HR_FRAME_MAX = 40, HR_TABLE_MAX = 48, HR_VALUE_MAX = 56, HR_ITEMS_MAX = 64,
	HR_PARTS_MAX = 68, HR_NS_MAX = 72, HR_KEY_MAX = 76, HR_AUTH = 80,
	HR_NAME_LEN = 96, HR_CAPS = 98, HR_NAME = 100,
	AQ_METHOD = 0, AQ_TENANT_LEN = 2, AQ_RSV = 4, AQ_NONCE = 8, AQ_PROOF = 40, AQ_TENANT = 72,
	AR_ROLE = 0, AR_RSV = 4, AR_PROOF = 8, AR_END = 40,
	SQ_SCOPE = 0, SQ_TENANT_LEN = 4, SQ_RSV = 6, SQ_DIGEST = 8, SQ_TENANT = 40,
	CR_REMOVED = 0, CR_END = 8,
	DQ_MODE = 0, DQ_RSV = 4, DQ_END = 8,
	LR_HITS = 0, LR_RSV = 4, LR_LOAD_NS = 8, LR_END = 16,
	M_LEN = 0, M_RSV = 2, M_TEXT = 4,
	NT_COUNT = 0, NT_RSV = 4, NT_DIGESTS = 8,
};
_Static_assert(HR_NONCE + PROTO_NONCE_LEN == HR_FRAME_MAX, "HELLO nonce is 32 bytes");
_Static_assert(HR_AUTH + 2 * PROTO_AUTH_MAX == HR_NAME_LEN, "HELLO offers 8 methods");
_Static_assert(AQ_NONCE + PROTO_NONCE_LEN == AQ_PROOF, "AUTH nonce is 32 bytes");
_Static_assert(AQ_PROOF + PROTO_PROOF_LEN == AQ_TENANT, "AUTH proof is 32 bytes");
_Static_assert(AR_PROOF + PROTO_PROOF_LEN == AR_END, "AUTH response is 40 bytes");
_Static_assert(SQ_DIGEST + PROTO_DIGEST_LEN == SQ_TENANT, "scope digest is 32 bytes");

/*
 * Items.  Request items of LOOKUP, EXISTS, DELETE, GET, PUT start with
 *
 *     0  4 ns_index   4  2 flags   6  1 key_len   7  1 reserved, 0
 *
 * then: LOOKUP/EXISTS/DELETE the key (at 8); GET 8 4 part, 12 4 reserved,
 * 16 8 off, 24 8 len, then the key (at 32); PUT 8 4 part_count,
 * 12 4 reserved, the key (at 16), then the part table.  NS_REGISTER:
 * 0 2 text_len, 2 2 reserved, 4 text.
 *
 * Response items start with 0 4 index, 4 4 status (i32), then:
 * PUT/DELETE nothing; EXISTS/LOOKUP 8 1 tier, 9 3 reserved; GET 8 2 flags,
 * 10 2 reserved, 12 4 part_count, 16 8 value_len, 24 8 off, 32 4
 * first_part, 36 4 reserved, 40 the part table; NS_REGISTER 8 32 digest,
 * 40 2 text_len, 42 2 reserved, 44 text.  STATS items have no index or
 * status: 0 2 name_len, 2 2 text_len, 4 4 kind, 8 8 value, 16 name, text.
 *
 * Part-table entry: 0 8 len, 8 4 crc, 12 4 reserved, 0.
 */
enum {
	KQ_NS = 0, KQ_FLAGS = 4, KQ_KEY_LEN = 6, KQ_RSV = 7, KQ_HEAD = 8,
	GQ_PART = 8, GQ_RSV = 12, GQ_OFF = 16, GQ_LEN = 24, GQ_KEY = 32,
	PQ_PARTS = 8, PQ_RSV = 12, PQ_KEY = 16,
	NQ_TEXT_LEN = 0, NQ_RSV = 2, NQ_TEXT = 4,
	R_INDEX = 0, R_STATUS = 4, R_HEAD = 8,
	TR_TIER = 8, TR_RSV = 9, TR_END = 12,
	GR_FLAGS = 8, GR_RSV = 10, GR_PARTS = 12, GR_VALUE_LEN = 16, GR_OFF = 24,
	GR_FIRST = 32, GR_RSV2 = 36, GR_TABLE = 40,
	NR_DIGEST = 8, NR_TEXT_LEN = 40, NR_RSV = 42, NR_TEXT = 44,
	ST_NAME_LEN = 0, ST_TEXT_LEN = 2, ST_KIND = 4, ST_VALUE = 8, ST_NAME = 16,
	PE_LEN = 0, PE_CRC = 8, PE_RSV = 12, PE_END = 16,
};
_Static_assert(PE_END == PROTO_PART_ENTRY, "part-table entries are 16 bytes");
_Static_assert(NR_DIGEST + PROTO_DIGEST_LEN == NR_TEXT_LEN, "NS_REGISTER digest is 32 bytes");
_Static_assert(PROTO_HARD_KEY_MAX <= UINT8_MAX, "key_len fits a u8");
_Static_assert(PROTO_CANON_MAX <= UINT16_MAX && PROTO_MSG_MAX <= UINT16_MAX &&
	       PROTO_STAT_TEXT_MAX <= UINT16_MAX, "text lengths fit a u16");
_Static_assert(PROTO_HARD_TABLE_MAX + PROTO_HDR_LEN < SIZE_MAX, "a table fits a size_t");

/* The smallest item of each kind: how many bytes item_count items need at least. */
#define PROTO_TEXT_MIN_ITEM (NQ_TEXT + 1)

/* ------------------------------------------------------------------------
 * What each opcode carries
 */

static bool proto_op_batch(unsigned op)
{
	return op == PROTO_OP_NS_REGISTER || op == PROTO_OP_LOOKUP || op == PROTO_OP_EXISTS ||
	       op == PROTO_OP_GET || op == PROTO_OP_PUT || op == PROTO_OP_DELETE;
}

/* Frames with a namespace table. */
static bool proto_has_ns(unsigned op, bool resp)
{
	return !resp && proto_op_batch(op) && op != PROTO_OP_NS_REGISTER;
}

static bool proto_has_items(unsigned op, bool resp, int32_t status)
{
	if (resp && status < 0)
		return false;
	return proto_op_batch(op) || (resp && op == PROTO_OP_STATS);
}

/* Responses that may come in several frames (PROTO_F_MORE). */
static bool proto_may_split(unsigned op)
{
	return op == PROTO_OP_EXISTS || op == PROTO_OP_GET || op == PROTO_OP_PUT ||
	       op == PROTO_OP_DELETE || op == PROTO_OP_NS_REGISTER || op == PROTO_OP_STATS;
}

/* Frames whose items carry value bytes in the data section. */
static bool proto_has_data(unsigned op, bool resp, int32_t status)
{
	if (resp)
		return status >= 0 && op == PROTO_OP_GET;
	return op == PROTO_OP_PUT;
}

static uint64_t proto_item_min(unsigned op, bool resp)
{
	if (!resp) {
		switch (op) {
		case PROTO_OP_NS_REGISTER: return PROTO_TEXT_MIN_ITEM;
		case PROTO_OP_GET: return GQ_KEY + 1;
		case PROTO_OP_PUT: return PQ_KEY + 1 + PROTO_PART_ENTRY;
		default: return KQ_HEAD + 1;
		}
	}
	switch (op) {
	case PROTO_OP_EXISTS:
	case PROTO_OP_LOOKUP: return TR_END;
	case PROTO_OP_GET: return GR_TABLE;
	case PROTO_OP_NS_REGISTER: return NR_TEXT;
	case PROTO_OP_STATS: return ST_NAME + 1;
	default: return R_HEAD;
	}
}

/* ------------------------------------------------------------------------
 * Limits
 */

void proto_limits_default(struct proto_limits *lim)
{
	lim->frame_max = PROTO_DEF_FRAME_MAX;
	lim->table_max = PROTO_DEF_TABLE_MAX;
	lim->value_max = PROTO_DEF_VALUE_MAX;
	lim->items_max = PROTO_DEF_ITEMS_MAX;
	lim->parts_max = PROTO_DEF_PARTS_MAX;
	lim->ns_max = PROTO_DEF_NS_MAX;
	lim->key_max = PROTO_DEF_KEY_MAX;
}

int proto_limits_check(const struct proto_limits *lim)
{
	if (!lim)
		return KVT_ENULL;
	if (lim->frame_max == 0 || lim->frame_max > PROTO_HARD_FRAME_MAX ||
	    lim->table_max == 0 || lim->table_max > PROTO_HARD_TABLE_MAX ||
	    lim->table_max + PROTO_HDR_LEN > lim->frame_max ||
	    lim->value_max == 0 || lim->value_max > PROTO_HARD_VALUE_MAX ||
	    lim->items_max == 0 || lim->items_max > PROTO_HARD_ITEMS_MAX ||
	    lim->parts_max == 0 || lim->parts_max > PROTO_HARD_PARTS_MAX ||
	    lim->ns_max == 0 || lim->ns_max > PROTO_HARD_NS_MAX ||
	    lim->key_max == 0 || lim->key_max > PROTO_HARD_KEY_MAX)
		return KVT_EOPTVAL;
	return 0;
}

/* *out = *lim or the defaults; 0 or KVT_EOPTVAL. */
static int proto_limits_get(const struct proto_limits *lim, struct proto_limits *out)
{
	if (!lim) {
		proto_limits_default(out);
		return 0;
	}
	*out = *lim;
	return proto_limits_check(out);
}

/* ------------------------------------------------------------------------
 * Texts and statuses
 */
enum { TEXT_PRINT, TEXT_TOKEN, TEXT_CANON };

/* PRINT: 0x20..0x7e; TOKEN: 0x21..0x7e; CANON: PRINT and '\n'. */
static bool proto_text_ok(const char *s, uint64_t len, int kind)
{
	if (len && !s)
		return false;
	for (uint64_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x21 && ch <= 0x7e)
			continue;
		if (ch == 0x20 && kind != TEXT_TOKEN)
			continue;
		if (ch == 0x0a && kind == TEXT_CANON)
			continue;
		return false;
	}
	return true;
}

/* A tenant name: 0..PROTO_TENANT_MAX token bytes, never "-" ("none" in a
 * canonical descriptor). */
static int proto_tenant_check(const char *s, uint32_t len, bool may_be_empty)
{
	if ((len == 0 && !may_be_empty) || len > PROTO_TENANT_MAX)
		return KVT_EBADLEN;
	if (!proto_text_ok(s, len, TEXT_TOKEN) || (len == 1 && s[0] == '-'))
		return PROTO_EMALFORMED;
	return 0;
}

/* What a status field may say: OK, MISS, EXISTS, a kvtier error or -errno. */
static bool proto_status_ok(int32_t s)
{
	return (s >= KVT_OK && s <= KVT_EXISTS) || (s >= -5999 && s <= -5000) ||
	       (s >= -4095 && s <= -1);
}

/* ------------------------------------------------------------------------
 * Checks shared by parsers and encoders
 */

/* Version, opcode, flags and status of a frame of direction resp. */
static int proto_hdr_check(unsigned version, unsigned op, uint32_t flags, int32_t status,
			   bool resp)
{
	if (op == PROTO_OP_HELLO ? version != PROTO_VERSION_HELLO :
	    version < PROTO_VERSION_MIN || version > PROTO_VERSION_MAX)
		return KVT_EVERSION;
	if (op >= PROTO_OP__COUNT || (op == PROTO_OP_ERROR && !resp))
		return KVT_EBADOP;
	if (flags & ~PROTO_F_KNOWN)
		return PROTO_EFLAGS;
	if (flags & PROTO_F_RDMA)
		return PROTO_ERDMA;
	if (!!(flags & PROTO_F_RESPONSE) != resp)
		return PROTO_EFLAGS;
	if ((flags & PROTO_F_MORE) && (!resp || !proto_may_split(op) || status < 0))
		return PROTO_EFLAGS;
	if (!resp)
		return status == 0 ? 0 : PROTO_EMALFORMED;
	if (!proto_status_ok(status) || status > 0 || (op == PROTO_OP_ERROR && status == 0))
		return PROTO_EMALFORMED;
	return 0;
}

/* item_count of a finished frame. */
static int proto_count_check(unsigned op, bool resp, int32_t status, uint32_t count,
			     const struct proto_limits *lim)
{
	if (count > lim->items_max)
		return PROTO_ECOUNT;
	if (!proto_has_items(op, resp, status))
		return count == 0 ? 0 : PROTO_ECOUNT;
	if (!resp && count == 0)
		return PROTO_ECOUNT; /* a batch request names at least one item */
	return 0;
}

static int proto_limits_fields_check(const struct proto_limits *l)
{
	return proto_limits_check(l) == 0 ? 0 : PROTO_EMALFORMED;
}

/* The op section (and message) of a frame, as decoded or as given. */
static int proto_op_check(const struct proto_frame *f, bool resp)
{
	int rc;

	if (resp && f->status < 0) {
		if (f->msg_len > PROTO_MSG_MAX)
			return KVT_EBADLEN;
		return proto_text_ok(f->msg, f->msg_len, TEXT_PRINT) ? 0 : PROTO_EMALFORMED;
	}
	if (f->msg_len != 0)
		return PROTO_EMALFORMED;

	switch (f->op) {
	case PROTO_OP_HELLO: {
		const struct proto_hello *h = &f->hello;
		if (h->min_version < 1 || h->min_version > h->max_version)
			return PROTO_EMALFORMED;
		if (h->name_len > PROTO_NAME_MAX)
			return KVT_EBADLEN;
		if (!proto_text_ok(h->name, h->name_len, TEXT_PRINT))
			return PROTO_EMALFORMED;
		if (!resp)
			return 0;
		if (h->version < h->min_version || h->version > h->max_version)
			return PROTO_EMALFORMED;
		/* Capabilities exist from version 2 on (a version 1 answer keeps
		 * the field reserved, 0), and unknown bits are errors, as
		 * anywhere: a later version may define more. */
		if (h->caps & ~PROTO_CAPS_KNOWN ||
		    (h->caps && h->version < PROTO_VERSION_CAPS))
			return PROTO_EMALFORMED;
		if (h->auth_count < 1 || h->auth_count > PROTO_AUTH_MAX)
			return PROTO_ECOUNT;
		for (unsigned i = 0; i < h->auth_count; i++)
			if (h->auth[i] == 0)
				return PROTO_EMALFORMED;
		return proto_limits_fields_check(&h->limits);
	}
	case PROTO_OP_AUTH: {
		const struct proto_auth *a = &f->auth;
		if (resp)
			return a->role <= PROTO_ROLE_ADMIN ? 0 : PROTO_EMALFORMED;
		if (a->method == 0)
			return PROTO_EMALFORMED;
		rc = proto_tenant_check(a->tenant, a->tenant_len, false);
		if (rc)
			return rc;
		if (a->method == PROTO_AUTH_NONE &&
		    (!proto_is_zero(a->nonce, PROTO_NONCE_LEN) ||
		     !proto_is_zero(a->proof, PROTO_PROOF_LEN)))
			return PROTO_EMALFORMED;
		return 0;
	}
	case PROTO_OP_CLEAR:
	case PROTO_OP_STATS: {
		const struct proto_scope *s = &f->scope;
		if (resp)
			return 0;
		if (s->scope < (f->op == PROTO_OP_CLEAR ? PROTO_SCOPE_NS : PROTO_SCOPE_TENANT) ||
		    s->scope > PROTO_SCOPE_ALL)
			return PROTO_EMALFORMED;
		if (s->scope != PROTO_SCOPE_NS && !proto_is_zero(s->digest, PROTO_DIGEST_LEN))
			return PROTO_EMALFORMED;
		if (s->scope != PROTO_SCOPE_TENANT && s->tenant_len != 0)
			return PROTO_EMALFORMED;
		return proto_tenant_check(s->tenant, s->tenant_len, true);
	}
	case PROTO_OP_DRAIN:
		return resp || f->drain_mode == PROTO_DRAIN_STAY ||
		       f->drain_mode == PROTO_DRAIN_EXIT ? 0 : PROTO_EMALFORMED;
	default:
		return 0;
	}
}

/* Part i of an item: from the arrays if it has them, else from the wire. */
static void proto_part_at(const struct proto_item *it, uint32_t i, uint64_t *len, uint32_t *crc)
{
	if (it->part_lens) {
		*len = it->part_lens[i];
		*crc = it->part_crcs ? it->part_crcs[i] : 0;
	} else {
		const uint8_t *p = it->parts_wire_ + (size_t)i * PROTO_PART_ENTRY;
		*len = le_get64(p + PE_LEN);
		*crc = le_get32(p + PE_CRC);
	}
}

/* Part count and lengths of a PUT or GET item; *sum gets their total. */
static int proto_parts_check(const struct proto_item *it, const struct proto_limits *lim,
			     uint64_t *sum)
{
	uint64_t total = 0, len;
	uint32_t crc;

	if (it->part_count < 1 || it->part_count > lim->parts_max)
		return PROTO_ECOUNT;
	if (!it->part_lens && !it->parts_wire_)
		return KVT_ENULL;
	if (it->part_lens && !it->part_crcs)
		return KVT_ENULL;
	for (uint32_t i = 0; i < it->part_count; i++) {
		proto_part_at(it, i, &len, &crc);
		/* Each len is bounded before it is added: the sum cannot wrap. */
		if (len == 0 || len > lim->value_max)
			return KVT_EBADLEN;
		total += len;
		if (total > lim->value_max)
			return KVT_EBADLEN;
	}
	*sum = total;
	return 0;
}

/*
 * One item of frame (op, resp), as decoded or as given.  prev: the
 * previous response item's index, or -1.  *data_len: its value bytes.
 */
static int proto_item_check(unsigned op, bool resp, const struct proto_item *it,
			    const struct proto_limits *lim, uint32_t ns_count, int64_t prev,
			    uint64_t *data_len)
{
	uint64_t sum = 0;
	int rc;

	*data_len = 0;
	if (!resp) {
		if (op == PROTO_OP_NS_REGISTER) {
			if (it->text_len < 1 || it->text_len > PROTO_CANON_MAX)
				return KVT_EBADLEN;
			return proto_text_ok(it->text, it->text_len, TEXT_CANON) ? 0 :
			       PROTO_EMALFORMED;
		}
		if (it->ns_index >= ns_count)
			return PROTO_EMALFORMED;
		if (it->key.len < 1 || it->key.len > lim->key_max)
			return KVT_EKEYLEN;
		if (it->flags & ~PROTO_IF_KNOWN)
			return PROTO_EFLAGS;
		switch (op) {
		case PROTO_OP_GET:
			if (it->flags & ~(PROTO_IF_PART | PROTO_IF_RANGE) ||
			    (it->flags & PROTO_IF_PART && it->flags & PROTO_IF_RANGE))
				return PROTO_EFLAGS;
			if (!(it->flags & PROTO_IF_PART) && it->part != 0)
				return PROTO_EMALFORMED;
			if (it->flags & PROTO_IF_PART && it->part >= lim->parts_max)
				return PROTO_EMALFORMED; /* an index, as a response's first_part */
			if (!(it->flags & PROTO_IF_RANGE))
				return it->off == 0 && it->len == 0 ? 0 : PROTO_EMALFORMED;
			if (it->len == 0 || it->len > lim->value_max ||
			    it->off > lim->value_max - it->len)
				return KVT_EBADLEN;
			return 0;
		case PROTO_OP_PUT:
			if (it->flags & ~(PROTO_IF_SEALED | PROTO_IF_PLACED | PROTO_IF_REPAIR |
					  PROTO_IF_FORWARD | PROTO_IF_RETAIN) ||
			    (it->flags & (PROTO_IF_REPAIR | PROTO_IF_FORWARD) &&
			     !(it->flags & PROTO_IF_PLACED)) ||
			    (it->flags & PROTO_IF_REPAIR && it->flags & PROTO_IF_FORWARD))
				return PROTO_EFLAGS;
			if (it->flags & PROTO_IF_PLACED ?
			    it->copies < 1 || it->copies > PROTO_COPIES_MAX :
			    it->copies != 0 || it->anchor != 0)
				return PROTO_EMALFORMED;
			rc = proto_parts_check(it, lim, &sum);
			if (rc)
				return rc;
			*data_len = sum;
			return 0;
		default:
			return it->flags ? PROTO_EFLAGS : 0;
		}
	}

	if (op == PROTO_OP_STATS) {
		if (it->name_len < 1 || it->name_len > PROTO_STAT_NAME_MAX ||
		    it->text_len > PROTO_STAT_TEXT_MAX)
			return KVT_EBADLEN;
		if (!proto_text_ok(it->name, it->name_len, TEXT_TOKEN) ||
		    !proto_text_ok(it->text, it->text_len, TEXT_PRINT))
			return PROTO_EMALFORMED;
		if (it->kind == PROTO_STAT_NUM)
			return it->text_len == 0 ? 0 : PROTO_EMALFORMED;
		if (it->kind == PROTO_STAT_TEXT)
			return it->value == 0 ? 0 : PROTO_EMALFORMED;
		return PROTO_EMALFORMED;
	}

	/* Indexes rise strictly within a frame and stay below items_max. */
	if ((int64_t)it->index <= prev || it->index >= lim->items_max)
		return PROTO_EMALFORMED;
	if (!proto_status_ok(it->status))
		return PROTO_EMALFORMED;
	switch (op) {
	case PROTO_OP_EXISTS:
	case PROTO_OP_LOOKUP:
		if (it->status == KVT_OK)
			return it->tier >= 1 && it->tier < KVT_TIER_COUNT ? 0 : PROTO_EMALFORMED;
		return it->tier == 0 ? 0 : PROTO_EMALFORMED;
	case PROTO_OP_NS_REGISTER:
		if (it->status != KVT_OK)
			return it->text_len == 0 &&
			       (!it->digest || proto_is_zero(it->digest, PROTO_DIGEST_LEN)) ?
			       0 : PROTO_EMALFORMED;
		if (!it->digest)
			return KVT_ENULL;
		if (it->text_len < 1 || it->text_len > PROTO_CANON_MAX)
			return KVT_EBADLEN;
		return proto_text_ok(it->text, it->text_len, TEXT_CANON) ? 0 : PROTO_EMALFORMED;
	case PROTO_OP_GET:
		if (it->value_len > lim->value_max)
			return KVT_EBADLEN;
		if (it->flags & ~(PROTO_IF_PART | PROTO_IF_RANGE | PROTO_IF_SEALED))
			return PROTO_EFLAGS;
		if (it->status != KVT_OK)
			return it->flags == 0 && it->part_count == 0 && it->off == 0 &&
			       it->first_part == 0 ? 0 : PROTO_EMALFORMED;
		if (it->flags & PROTO_IF_PART && it->flags & PROTO_IF_RANGE)
			return PROTO_EFLAGS;
		rc = proto_parts_check(it, lim, &sum);
		if (rc)
			return rc;
		if (it->flags & (PROTO_IF_PART | PROTO_IF_RANGE)) {
			/* One entry: a stored part, or a range with the server's CRC. */
			if (it->part_count != 1)
				return PROTO_ECOUNT;
			if (it->flags & PROTO_IF_PART ? it->first_part >= lim->parts_max :
			    it->first_part != 0)
				return PROTO_EMALFORMED;
			/* off <= value_len - sum: both sides are below 2^37. */
			if (sum > it->value_len || it->off > it->value_len - sum)
				return KVT_EBADLEN;
		} else if (it->first_part != 0 || it->off != 0 || sum != it->value_len) {
			return PROTO_EMALFORMED;
		}
		*data_len = sum;
		return 0;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------------
 * Parsing
 */

/* A read cursor over the table. */
struct proto_cur {
	const uint8_t *p;
	uint64_t len;
	uint64_t off;
};

/* The next n bytes, or NULL if the table ends first. */
static const uint8_t *proto_take(struct proto_cur *c, uint64_t n)
{
	const uint8_t *r;

	if (n > c->len - c->off)
		return NULL;
	r = c->p + c->off;
	c->off += n;
	return r;
}

/* A string of n bytes; *s points at it (NULL if n is 0). */
static bool proto_take_text(struct proto_cur *c, uint64_t n, const char **s)
{
	const uint8_t *p = proto_take(c, n);

	if (!p)
		return false;
	*s = n ? (const char *)p : NULL;
	return true;
}

/* The op section, message and namespace table of f (header already read). */
static int proto_op_decode(struct proto_frame *f, struct proto_cur *c, bool resp)
{
	const uint8_t *p;
	int rc;

	if (resp && f->status < 0) {
		if (c->len == 0)
			return 0;
		if (!(p = proto_take(c, M_TEXT)))
			return PROTO_EMALFORMED;
		f->msg_len = le_get16(p + M_LEN);
		if (le_get16(p + M_RSV) != 0)
			return PROTO_EMALFORMED;
		if (f->msg_len == 0 || f->msg_len > PROTO_MSG_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, f->msg_len, &f->msg))
			return PROTO_EMALFORMED;
		return proto_op_check(f, resp);
	}

	switch (f->op) {
	case PROTO_OP_HELLO: {
		struct proto_hello *h = &f->hello;
		if (!resp) {
			if (!(p = proto_take(c, HQ_NAME)))
				return PROTO_EMALFORMED;
			h->min_version = le_get16(p + HQ_MIN);
			h->max_version = le_get16(p + HQ_MAX);
			h->name_len = le_get16(p + HQ_NAME_LEN);
			if (le_get16(p + HQ_RSV) != 0)
				return PROTO_EMALFORMED;
		} else {
			if (!(p = proto_take(c, HR_NAME)))
				return PROTO_EMALFORMED;
			h->version = le_get16(p + HR_VERSION);
			h->min_version = le_get16(p + HR_MIN);
			h->max_version = le_get16(p + HR_MAX);
			h->auth_count = le_get16(p + HR_AUTH_COUNT);
			memcpy(h->nonce, p + HR_NONCE, PROTO_NONCE_LEN);
			h->limits.frame_max = le_get64(p + HR_FRAME_MAX);
			h->limits.table_max = le_get64(p + HR_TABLE_MAX);
			h->limits.value_max = le_get64(p + HR_VALUE_MAX);
			h->limits.items_max = le_get32(p + HR_ITEMS_MAX);
			h->limits.parts_max = le_get32(p + HR_PARTS_MAX);
			h->limits.ns_max = le_get32(p + HR_NS_MAX);
			h->limits.key_max = le_get32(p + HR_KEY_MAX);
			if (h->auth_count < 1 || h->auth_count > PROTO_AUTH_MAX)
				return PROTO_ECOUNT;
			for (unsigned i = 0; i < PROTO_AUTH_MAX; i++) {
				h->auth[i] = le_get16(p + HR_AUTH + 2 * i);
				if (i >= h->auth_count && h->auth[i] != 0)
					return PROTO_EMALFORMED;
			}
			h->name_len = le_get16(p + HR_NAME_LEN);
			h->caps = le_get16(p + HR_CAPS);
		}
		if (h->name_len > PROTO_NAME_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, h->name_len, &h->name))
			return PROTO_EMALFORMED;
		break;
	}
	case PROTO_OP_AUTH: {
		struct proto_auth *a = &f->auth;
		if (resp) {
			if (!(p = proto_take(c, AR_END)))
				return PROTO_EMALFORMED;
			a->role = le_get32(p + AR_ROLE);
			memcpy(a->proof, p + AR_PROOF, PROTO_PROOF_LEN);
			if (le_get32(p + AR_RSV) != 0)
				return PROTO_EMALFORMED;
			break;
		}
		if (!(p = proto_take(c, AQ_TENANT)))
			return PROTO_EMALFORMED;
		a->method = le_get16(p + AQ_METHOD);
		a->tenant_len = le_get16(p + AQ_TENANT_LEN);
		memcpy(a->nonce, p + AQ_NONCE, PROTO_NONCE_LEN);
		memcpy(a->proof, p + AQ_PROOF, PROTO_PROOF_LEN);
		if (le_get32(p + AQ_RSV) != 0)
			return PROTO_EMALFORMED;
		if (a->tenant_len > PROTO_TENANT_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, a->tenant_len, &a->tenant))
			return PROTO_EMALFORMED;
		break;
	}
	case PROTO_OP_CLEAR:
	case PROTO_OP_STATS:
		if (resp) {
			if (f->op == PROTO_OP_CLEAR) {
				if (!(p = proto_take(c, CR_END)))
					return PROTO_EMALFORMED;
				f->removed = le_get64(p + CR_REMOVED);
			}
			break;
		}
		if (!(p = proto_take(c, SQ_TENANT)))
			return PROTO_EMALFORMED;
		f->scope.scope = le_get32(p + SQ_SCOPE);
		f->scope.tenant_len = le_get16(p + SQ_TENANT_LEN);
		memcpy(f->scope.digest, p + SQ_DIGEST, PROTO_DIGEST_LEN);
		if (le_get16(p + SQ_RSV) != 0)
			return PROTO_EMALFORMED;
		if (f->scope.tenant_len > PROTO_TENANT_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, f->scope.tenant_len, &f->scope.tenant))
			return PROTO_EMALFORMED;
		break;
	case PROTO_OP_DRAIN:
		if (resp)
			break;
		if (!(p = proto_take(c, DQ_END)))
			return PROTO_EMALFORMED;
		f->drain_mode = le_get32(p + DQ_MODE);
		if (le_get32(p + DQ_RSV) != 0)
			return PROTO_EMALFORMED;
		break;
	case PROTO_OP_LOOKUP:
		if (resp) {
			if (!(p = proto_take(c, LR_END)))
				return PROTO_EMALFORMED;
			f->lookup.hits = le_get32(p + LR_HITS);
			f->lookup.load_ns = le_get64(p + LR_LOAD_NS);
			if (le_get32(p + LR_RSV) != 0)
				return PROTO_EMALFORMED;
			if (f->lookup.hits > f->item_count)
				return PROTO_EMALFORMED;
		}
		break;
	default:
		break;
	}
	rc = proto_op_check(f, resp);
	if (rc)
		return rc;

	if (proto_has_ns(f->op, resp)) {
		if (!(p = proto_take(c, NT_DIGESTS)))
			return PROTO_EMALFORMED;
		f->ns_count = le_get32(p + NT_COUNT);
		if (le_get32(p + NT_RSV) != 0)
			return PROTO_EMALFORMED;
		if (f->ns_count < 1 || f->ns_count > f->lim_.ns_max ||
		    (f->op == PROTO_OP_LOOKUP && f->ns_count != 1))
			return PROTO_ECOUNT;
		/* ns_count <= 2^16: the product cannot wrap. */
		if (!(f->ns = proto_take(c, (uint64_t)f->ns_count * PROTO_DIGEST_LEN)))
			return PROTO_EMALFORMED;
	}
	return 0;
}

/*
 * Decode the item at c into *it (wire-level checks: it fits, reserved
 * bytes are zero), then check it.  prev: the previous response index.
 */
static int proto_item_decode(const struct proto_frame *f, bool resp, struct proto_cur *c,
			     struct proto_item *it, int64_t prev)
{
	const struct proto_limits *lim = &f->lim_;
	const uint8_t *p;
	uint64_t data_len;
	unsigned op = f->op;
	int rc;

	memset(it, 0, sizeof(*it));
	if (!resp && op == PROTO_OP_NS_REGISTER) {
		if (!(p = proto_take(c, NQ_TEXT)))
			return PROTO_EMALFORMED;
		it->text_len = le_get16(p + NQ_TEXT_LEN);
		if (le_get16(p + NQ_RSV) != 0)
			return PROTO_EMALFORMED;
		if (it->text_len > PROTO_CANON_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, it->text_len, &it->text))
			return PROTO_EMALFORMED;
	} else if (!resp) {
		uint64_t fixed = op == PROTO_OP_GET ? GQ_KEY
				 : op == PROTO_OP_PUT ? PQ_KEY : KQ_HEAD;
		const uint8_t *k;

		if (!(p = proto_take(c, fixed)))
			return PROTO_EMALFORMED;
		it->ns_index = le_get32(p + KQ_NS);
		it->flags = le_get16(p + KQ_FLAGS);
		it->key.len = p[KQ_KEY_LEN];
		if (p[KQ_RSV] != 0)
			return PROTO_EMALFORMED;
		if (op == PROTO_OP_GET) {
			it->part = le_get32(p + GQ_PART);
			it->off = le_get64(p + GQ_OFF);
			it->len = le_get64(p + GQ_LEN);
			if (le_get32(p + GQ_RSV) != 0)
				return PROTO_EMALFORMED;
		} else if (op == PROTO_OP_PUT) {
			it->part_count = le_get32(p + PQ_PARTS);
			it->copies = le_get32(p + PQ_RSV); /* PLACED; else reserved, 0 */
			if (!(it->flags & PROTO_IF_PLACED) && it->copies != 0)
				return PROTO_EMALFORMED;
		}
		if (it->key.len < 1 || it->key.len > lim->key_max)
			return KVT_EKEYLEN;
		if (!(k = proto_take(c, it->key.len)))
			return PROTO_EMALFORMED;
		memcpy(it->key.bytes, k, it->key.len);
		if (it->ns_index < f->ns_count)
			it->ns = f->ns + (size_t)it->ns_index * PROTO_DIGEST_LEN;
	} else if (op == PROTO_OP_STATS) {
		if (!(p = proto_take(c, ST_NAME)))
			return PROTO_EMALFORMED;
		it->name_len = le_get16(p + ST_NAME_LEN);
		it->text_len = le_get16(p + ST_TEXT_LEN);
		it->kind = le_get32(p + ST_KIND);
		it->value = le_get64(p + ST_VALUE);
		if (it->name_len > PROTO_STAT_NAME_MAX || it->text_len > PROTO_STAT_TEXT_MAX)
			return KVT_EBADLEN;
		if (!proto_take_text(c, it->name_len, &it->name) ||
		    !proto_take_text(c, it->text_len, &it->text))
			return PROTO_EMALFORMED;
	} else {
		if (!(p = proto_take(c, R_HEAD)))
			return PROTO_EMALFORMED;
		it->index = le_get32(p + R_INDEX);
		it->status = (int32_t)le_get32(p + R_STATUS);
		switch (op) {
		case PROTO_OP_EXISTS:
		case PROTO_OP_LOOKUP:
			if (!(p = proto_take(c, TR_END - R_HEAD)))
				return PROTO_EMALFORMED;
			it->tier = p[TR_TIER - R_HEAD];
			if (!proto_is_zero(p + TR_RSV - R_HEAD, TR_END - TR_RSV))
				return PROTO_EMALFORMED;
			break;
		case PROTO_OP_GET:
			if (!(p = proto_take(c, GR_TABLE - R_HEAD)))
				return PROTO_EMALFORMED;
			p -= R_HEAD; /* offsets below are from the item's start */
			it->flags = le_get16(p + GR_FLAGS);
			it->part_count = le_get32(p + GR_PARTS);
			it->value_len = le_get64(p + GR_VALUE_LEN);
			it->off = le_get64(p + GR_OFF);
			it->first_part = le_get32(p + GR_FIRST);
			if (le_get16(p + GR_RSV) != 0 || le_get32(p + GR_RSV2) != 0)
				return PROTO_EMALFORMED;
			break;
		case PROTO_OP_NS_REGISTER:
			if (!(p = proto_take(c, NR_TEXT - R_HEAD)))
				return PROTO_EMALFORMED;
			p -= R_HEAD;
			it->digest = p + NR_DIGEST;
			it->text_len = le_get16(p + NR_TEXT_LEN);
			if (le_get16(p + NR_RSV) != 0)
				return PROTO_EMALFORMED;
			if (it->text_len > PROTO_CANON_MAX)
				return KVT_EBADLEN;
			if (!proto_take_text(c, it->text_len, &it->text))
				return PROTO_EMALFORMED;
			break;
		default:
			break;
		}
	}

	/* The part table (PUT requests, GET responses): bound the count
	 * before it sizes anything, then take it whole. */
	if (it->part_count) {
		if (it->part_count > lim->parts_max)
			return PROTO_ECOUNT;
		p = proto_take(c, (uint64_t)it->part_count * PROTO_PART_ENTRY);
		if (!p)
			return PROTO_EMALFORMED;
		for (uint32_t i = 0; i < it->part_count; i++)
			if (le_get32(p + (size_t)i * PROTO_PART_ENTRY + PE_RSV) != 0)
				return PROTO_EMALFORMED;
		it->parts_wire_ = p;
	}
	/* PLACED PUT: the anchor after the part table. */
	if (!resp && op == PROTO_OP_PUT && it->flags & PROTO_IF_PLACED) {
		if (!(p = proto_take(c, 8)))
			return PROTO_EMALFORMED;
		it->anchor = le_get64(p);
	}

	rc = proto_item_check(op, resp, it, lim, f->ns_count, prev, &data_len);
	if (rc)
		return rc;
	it->data_len = data_len;
	if (!resp && op == PROTO_OP_PUT)
		it->value_len = data_len;
	return 0;
}

static int proto_parse(const uint8_t *buf, size_t len, const struct proto_limits *lim,
		       bool resp, struct proto_frame *f)
{
	struct proto_cur c;
	struct proto_item it;
	uint64_t data_sum = 0, min;
	int64_t prev = -1;
	uint32_t crc;
	int rc;

	if (!f)
		return KVT_ENULL;
	memset(f, 0, sizeof(*f));
	if (!buf && len)
		return KVT_ENULL;
	rc = proto_limits_get(lim, &f->lim_);
	if (rc)
		return rc;

	/* 1. The magic, on the bytes there are; then the whole header. */
	if (len && memcmp(buf, PROTO_MAGIC, len < 4 ? len : 4) != 0)
		return PROTO_EMAGIC;
	if (len < PROTO_HDR_LEN) {
		f->need = PROTO_HDR_LEN;
		return PROTO_NEED_MORE;
	}
	f->version = le_get16(buf + H_VERSION);
	f->op = le_get16(buf + H_OP);
	f->flags = le_get32(buf + H_FLAGS);
	f->item_count = le_get32(buf + H_ITEMS);
	f->tag = le_get64(buf + H_TAG);
	f->table_len = le_get64(buf + H_TABLE_LEN);
	f->data_len = le_get64(buf + H_DATA_LEN);
	f->status = (int32_t)le_get32(buf + H_STATUS);

	/* 2. What the header says, each bound before anything is sized by it. */
	rc = proto_hdr_check(f->version, f->op, f->flags, f->status, resp);
	if (rc)
		return rc;
	if (f->item_count > f->lim_.items_max)
		return PROTO_ECOUNT;
	rc = proto_count_check(f->op, resp, f->status, f->item_count, &f->lim_);
	if (rc)
		return rc;
	if (f->table_len > f->lim_.table_max)
		return KVT_EBADLEN;
	/* table_max + PROTO_HDR_LEN <= frame_max (proto_limits_check). */
	if (f->data_len > f->lim_.frame_max - PROTO_HDR_LEN - f->table_len)
		return KVT_EBADLEN;
	if (f->data_len && !proto_has_data(f->op, resp, f->status))
		return PROTO_EMALFORMED;
	/* item_count <= 2^16 and an item is < 2^7 bytes: no wrap. */
	min = proto_has_items(f->op, resp, f->status) ?
	      (uint64_t)f->item_count * proto_item_min(f->op, resp) : 0;
	if (min > f->table_len)
		return PROTO_EMALFORMED;

	/* 3. The table, whole, and its CRC. */
	if (len - PROTO_HDR_LEN < f->table_len) {
		f->need = PROTO_HDR_LEN + f->table_len;
		return PROTO_NEED_MORE;
	}
	crc = kvt_crc32c(0, buf, H_CRC);
	crc = kvt_crc32c(crc, buf + PROTO_HDR_LEN, (size_t)f->table_len);
	if (crc != le_get32(buf + H_CRC))
		return PROTO_ECRC;

	/* 4. Op section, namespace table, then every item. */
	c.p = buf + PROTO_HDR_LEN;
	c.len = f->table_len;
	c.off = 0;
	rc = proto_op_decode(f, &c, resp);
	if (rc)
		return rc;
	f->items_ = c.p + c.off;
	f->items_len_ = c.len - c.off;
	if (proto_has_items(f->op, resp, f->status)) {
		for (uint32_t i = 0; i < f->item_count; i++) {
			rc = proto_item_decode(f, resp, &c, &it, prev);
			if (rc)
				return rc;
			prev = it.index;
			/* Each item is <= value_max <= 2^36, items <= 2^16. */
			data_sum += it.data_len;
		}
	}
	if (c.off != c.len || data_sum != f->data_len)
		return PROTO_EMALFORMED;
	f->hdr_len = PROTO_HDR_LEN + f->table_len;
	return 0;
}

int proto_parse_request(const uint8_t *buf, size_t len, const struct proto_limits *lim,
			struct proto_frame *f)
{
	return proto_parse(buf, len, lim, false, f);
}

int proto_parse_response(const uint8_t *buf, size_t len, const struct proto_limits *lim,
			 struct proto_frame *f)
{
	return proto_parse(buf, len, lim, true, f);
}

/* ------------------------------------------------------------------------
 * Items of a parsed frame
 */

void proto_iter_init(struct proto_iter *it, const struct proto_frame *f,
		     uint64_t *part_lens, uint32_t *part_crcs, uint32_t part_cap)
{
	memset(it, 0, sizeof(*it));
	it->f = f;
	if (part_lens && part_crcs) {
		it->lens = part_lens;
		it->crcs = part_crcs;
		it->cap = part_cap;
	}
}

int proto_iter_next(struct proto_iter *it, struct proto_item *item)
{
	const struct proto_frame *f;
	struct proto_cur c;
	bool resp;
	int rc;

	if (!it || !it->f || !item)
		return KVT_ENULL;
	f = it->f;
	resp = f->flags & PROTO_F_RESPONSE;
	if (!f->items_ || it->next >= f->item_count || !proto_has_items(f->op, resp, f->status))
		return 0;
	c.p = f->items_;
	c.len = f->items_len_;
	c.off = it->off;
	/* The parser accepted every item in this order: this cannot fail
	 * (prev is -1 because the order was checked there). */
	rc = proto_item_decode(f, resp, &c, item, -1);
	if (rc)
		return rc;
	if (!resp)
		item->index = it->next;
	item->data_off = it->data_off;
	it->data_off += item->data_len;
	it->off = c.off;
	it->next++;
	if (item->part_count && it->lens) {
		if (item->part_count > it->cap)
			return KVT_ERANGE;
		for (uint32_t i = 0; i < item->part_count; i++)
			proto_part_at(item, i, &it->lens[i], &it->crcs[i]);
		item->part_lens = it->lens;
		item->part_crcs = it->crcs;
	}
	return 1;
}

int proto_item_part(const struct proto_item *item, uint32_t i, uint64_t *len, uint32_t *crc)
{
	uint64_t l;
	uint32_t c;

	if (!item)
		return KVT_ENULL;
	if (i >= item->part_count || (!item->part_lens && !item->parts_wire_))
		return KVT_ERANGE;
	proto_part_at(item, i, &l, &c);
	if (len)
		*len = l;
	if (crc)
		*crc = c;
	return 0;
}

/* ------------------------------------------------------------------------
 * Encoding
 */

/* Append n bytes (src NULL: zeros); counted even when they do not fit. */
static void proto_w_put(struct proto_writer *w, const void *src, uint64_t n)
{
	if (w->len <= w->cap && n <= w->cap - w->len) {
		if (src)
			memcpy(w->buf + w->len, src, n);
		else
			memset(w->buf + w->len, 0, n);
	}
	w->len += n;
}

static int proto_w_fail(struct proto_writer *w, int err)
{
	if (!w->err)
		w->err = err;
	return w->err;
}

/* Bytes written so far must stay under the table limit. */
static int proto_w_room(struct proto_writer *w)
{
	if (w->len - PROTO_HDR_LEN > w->lim.table_max)
		return proto_w_fail(w, KVT_EBADLEN);
	return 0;
}

static void proto_w_op(struct proto_writer *w, const struct proto_frame *f, bool resp)
{
	uint8_t t[HR_NAME];

	memset(t, 0, sizeof(t));
	if (resp && f->status < 0) {
		if (f->msg_len) {
			le_put16(t + M_LEN, (uint16_t)f->msg_len);
			proto_w_put(w, t, M_TEXT);
			proto_w_put(w, f->msg, f->msg_len);
		}
		return;
	}
	switch (f->op) {
	case PROTO_OP_HELLO: {
		const struct proto_hello *h = &f->hello;
		if (!resp) {
			le_put16(t + HQ_MIN, h->min_version);
			le_put16(t + HQ_MAX, h->max_version);
			le_put16(t + HQ_NAME_LEN, (uint16_t)h->name_len);
			proto_w_put(w, t, HQ_NAME);
		} else {
			le_put16(t + HR_VERSION, h->version);
			le_put16(t + HR_MIN, h->min_version);
			le_put16(t + HR_MAX, h->max_version);
			le_put16(t + HR_AUTH_COUNT, h->auth_count);
			memcpy(t + HR_NONCE, h->nonce, PROTO_NONCE_LEN);
			le_put64(t + HR_FRAME_MAX, h->limits.frame_max);
			le_put64(t + HR_TABLE_MAX, h->limits.table_max);
			le_put64(t + HR_VALUE_MAX, h->limits.value_max);
			le_put32(t + HR_ITEMS_MAX, h->limits.items_max);
			le_put32(t + HR_PARTS_MAX, h->limits.parts_max);
			le_put32(t + HR_NS_MAX, h->limits.ns_max);
			le_put32(t + HR_KEY_MAX, h->limits.key_max);
			for (unsigned i = 0; i < h->auth_count; i++)
				le_put16(t + HR_AUTH + 2 * i, h->auth[i]);
			le_put16(t + HR_NAME_LEN, (uint16_t)h->name_len);
			le_put16(t + HR_CAPS, h->caps);
			proto_w_put(w, t, HR_NAME);
		}
		proto_w_put(w, h->name, h->name_len);
		break;
	}
	case PROTO_OP_AUTH: {
		const struct proto_auth *a = &f->auth;
		if (resp) {
			le_put32(t + AR_ROLE, a->role);
			memcpy(t + AR_PROOF, a->proof, PROTO_PROOF_LEN);
			proto_w_put(w, t, AR_END);
			break;
		}
		le_put16(t + AQ_METHOD, a->method);
		le_put16(t + AQ_TENANT_LEN, (uint16_t)a->tenant_len);
		memcpy(t + AQ_NONCE, a->nonce, PROTO_NONCE_LEN);
		memcpy(t + AQ_PROOF, a->proof, PROTO_PROOF_LEN);
		proto_w_put(w, t, AQ_TENANT);
		proto_w_put(w, a->tenant, a->tenant_len);
		break;
	}
	case PROTO_OP_CLEAR:
	case PROTO_OP_STATS:
		if (resp) {
			if (f->op == PROTO_OP_CLEAR) {
				le_put64(t + CR_REMOVED, f->removed);
				proto_w_put(w, t, CR_END);
			}
			break;
		}
		le_put32(t + SQ_SCOPE, f->scope.scope);
		le_put16(t + SQ_TENANT_LEN, (uint16_t)f->scope.tenant_len);
		memcpy(t + SQ_DIGEST, f->scope.digest, PROTO_DIGEST_LEN);
		proto_w_put(w, t, SQ_TENANT);
		proto_w_put(w, f->scope.tenant, f->scope.tenant_len);
		break;
	case PROTO_OP_DRAIN:
		if (!resp) {
			le_put32(t + DQ_MODE, f->drain_mode);
			proto_w_put(w, t, DQ_END);
		}
		break;
	case PROTO_OP_LOOKUP:
		if (resp) {
			le_put32(t + LR_HITS, f->lookup.hits);
			le_put64(t + LR_LOAD_NS, f->lookup.load_ns);
			proto_w_put(w, t, LR_END);
		}
		break;
	default:
		break;
	}
}

int proto_write_begin(struct proto_writer *w, uint8_t *buf, size_t cap,
		      const struct proto_limits *lim, const struct proto_frame *f)
{
	uint8_t t[NT_DIGESTS];
	bool resp;
	int rc;

	if (!w)
		return KVT_ENULL;
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->cap = buf ? cap : 0;
	w->len = PROTO_HDR_LEN;
	if (!f)
		return proto_w_fail(w, KVT_ENULL);
	rc = proto_limits_get(lim, &w->lim);
	if (rc)
		return proto_w_fail(w, rc);
	resp = f->flags & PROTO_F_RESPONSE;
	w->op = f->op;
	w->version = f->version ? f->version :
		     f->op == PROTO_OP_HELLO ? PROTO_VERSION_HELLO : PROTO_VERSION_MAX;
	w->flags = f->flags;
	w->status = f->status;
	w->tag = f->tag;
	rc = proto_hdr_check(w->version, w->op, w->flags, w->status, resp);
	if (rc)
		return proto_w_fail(w, rc);
	rc = proto_op_check(f, resp);
	if (rc)
		return proto_w_fail(w, rc);
	proto_w_op(w, f, resp);
	if (resp && f->op == PROTO_OP_LOOKUP && f->status == 0)
		w->hits = f->lookup.hits;

	if (proto_has_ns(f->op, resp)) {
		if (f->ns_count < 1 || f->ns_count > w->lim.ns_max ||
		    (f->op == PROTO_OP_LOOKUP && f->ns_count != 1))
			return proto_w_fail(w, PROTO_ECOUNT);
		if (!f->ns)
			return proto_w_fail(w, KVT_ENULL);
		memset(t, 0, sizeof(t));
		le_put32(t + NT_COUNT, f->ns_count);
		proto_w_put(w, t, NT_DIGESTS);
		proto_w_put(w, f->ns, (uint64_t)f->ns_count * PROTO_DIGEST_LEN);
		w->ns_count = f->ns_count;
	} else if (f->ns_count != 0) {
		return proto_w_fail(w, PROTO_EMALFORMED);
	}
	return proto_w_room(w);
}

int proto_write_item(struct proto_writer *w, const struct proto_item *it)
{
	uint8_t t[GR_TABLE + KVT_KEY_MAX];
	uint8_t pe[PROTO_PART_ENTRY];
	bool resp;
	uint64_t data_len;
	size_t n = 0;
	int rc;

	if (!w)
		return KVT_ENULL;
	if (w->err)
		return w->err;
	if (!it)
		return proto_w_fail(w, KVT_ENULL);
	resp = w->flags & PROTO_F_RESPONSE;
	if (!proto_has_items(w->op, resp, w->status) || w->item_count >= w->lim.items_max)
		return proto_w_fail(w, PROTO_ECOUNT);
	rc = proto_item_check(w->op, resp, it, &w->lim, w->ns_count,
			      w->item_count ? (int64_t)w->last_index : -1, &data_len);
	if (rc)
		return proto_w_fail(w, rc);

	memset(t, 0, sizeof(t));
	if (!resp && w->op == PROTO_OP_NS_REGISTER) {
		le_put16(t + NQ_TEXT_LEN, (uint16_t)it->text_len);
		proto_w_put(w, t, NQ_TEXT);
		proto_w_put(w, it->text, it->text_len);
	} else if (!resp) {
		n = w->op == PROTO_OP_GET ? GQ_KEY : w->op == PROTO_OP_PUT ? PQ_KEY : KQ_HEAD;
		le_put32(t + KQ_NS, it->ns_index);
		le_put16(t + KQ_FLAGS, (uint16_t)it->flags);
		t[KQ_KEY_LEN] = (uint8_t)it->key.len;
		if (w->op == PROTO_OP_GET) {
			le_put32(t + GQ_PART, it->part);
			le_put64(t + GQ_OFF, it->off);
			le_put64(t + GQ_LEN, it->len);
		} else if (w->op == PROTO_OP_PUT) {
			le_put32(t + PQ_PARTS, it->part_count);
			le_put32(t + PQ_RSV, it->copies);
		}
		memcpy(t + n, it->key.bytes, it->key.len);
		proto_w_put(w, t, n + it->key.len);
	} else if (w->op == PROTO_OP_STATS) {
		le_put16(t + ST_NAME_LEN, (uint16_t)it->name_len);
		le_put16(t + ST_TEXT_LEN, (uint16_t)it->text_len);
		le_put32(t + ST_KIND, it->kind);
		le_put64(t + ST_VALUE, it->value);
		proto_w_put(w, t, ST_NAME);
		proto_w_put(w, it->name, it->name_len);
		proto_w_put(w, it->text, it->text_len);
	} else {
		le_put32(t + R_INDEX, it->index);
		le_put32(t + R_STATUS, (uint32_t)it->status);
		switch (w->op) {
		case PROTO_OP_EXISTS:
		case PROTO_OP_LOOKUP:
			t[TR_TIER] = (uint8_t)it->tier;
			proto_w_put(w, t, TR_END);
			break;
		case PROTO_OP_GET:
			le_put16(t + GR_FLAGS, (uint16_t)it->flags);
			le_put32(t + GR_PARTS, it->part_count);
			le_put64(t + GR_VALUE_LEN, it->value_len);
			le_put64(t + GR_OFF, it->off);
			le_put32(t + GR_FIRST, it->first_part);
			proto_w_put(w, t, GR_TABLE);
			break;
		case PROTO_OP_NS_REGISTER:
			if (it->digest)
				memcpy(t + NR_DIGEST, it->digest, PROTO_DIGEST_LEN);
			le_put16(t + NR_TEXT_LEN, (uint16_t)it->text_len);
			proto_w_put(w, t, NR_TEXT);
			proto_w_put(w, it->text, it->text_len);
			break;
		default:
			proto_w_put(w, t, R_HEAD);
			break;
		}
		w->last_index = it->index;
	}
	/* The part table: checked by proto_item_check, 0 for items without. */
	if ((!resp && w->op == PROTO_OP_PUT) || (resp && w->op == PROTO_OP_GET)) {
		for (uint32_t i = 0; i < it->part_count; i++) {
			uint64_t len;
			uint32_t crc;

			proto_part_at(it, i, &len, &crc);
			memset(pe, 0, sizeof(pe));
			le_put64(pe + PE_LEN, len);
			le_put32(pe + PE_CRC, crc);
			proto_w_put(w, pe, PROTO_PART_ENTRY);
		}
	}
	if (!resp && w->op == PROTO_OP_PUT && it->flags & PROTO_IF_PLACED) {
		le_put64(pe, it->anchor);
		proto_w_put(w, pe, 8);
	}
	w->item_count++;
	w->data_len += data_len;
	return proto_w_room(w);
}

int64_t proto_write_end(struct proto_writer *w, uint64_t *need)
{
	uint8_t *b;
	uint32_t crc;
	bool resp;
	int rc;

	if (!w)
		return KVT_ENULL;
	if (w->err)
		return w->err;
	resp = w->flags & PROTO_F_RESPONSE;
	rc = proto_count_check(w->op, resp, w->status, w->item_count, &w->lim);
	if (rc)
		return proto_w_fail(w, rc);
	if (w->data_len > w->lim.frame_max - w->len)
		return proto_w_fail(w, KVT_EBADLEN);
	/* LOOKUP: hits counts leading items, so there are at least that many. */
	if (w->hits > w->item_count)
		return proto_w_fail(w, PROTO_EMALFORMED);
	if (w->len > w->cap) {
		if (need)
			*need = w->len;
		return KVT_EBUFSMALL;
	}
	b = w->buf;
	memcpy(b + H_MAGIC, PROTO_MAGIC, 4);
	le_put16(b + H_VERSION, w->version);
	le_put16(b + H_OP, w->op);
	le_put32(b + H_FLAGS, w->flags);
	le_put32(b + H_ITEMS, w->item_count);
	le_put64(b + H_TAG, w->tag);
	le_put64(b + H_TABLE_LEN, w->len - PROTO_HDR_LEN);
	le_put64(b + H_DATA_LEN, w->data_len);
	le_put32(b + H_STATUS, (uint32_t)w->status);
	crc = kvt_crc32c(0, b, H_CRC);
	crc = kvt_crc32c(crc, b + PROTO_HDR_LEN, (size_t)(w->len - PROTO_HDR_LEN));
	le_put32(b + H_CRC, crc);
	return (int64_t)w->len;
}

int64_t proto_encode(const struct proto_frame *f, const struct proto_item *items, uint32_t n,
		     uint8_t *buf, size_t cap, const struct proto_limits *lim, uint64_t *need)
{
	struct proto_writer w;
	int rc;

	rc = proto_write_begin(&w, buf, cap, lim, f);
	if (rc)
		return rc;
	if (n && !items)
		return KVT_ENULL;
	for (uint32_t i = 0; i < n; i++) {
		rc = proto_write_item(&w, &items[i]);
		if (rc)
			return rc;
	}
	return proto_write_end(&w, need);
}

/* ------------------------------------------------------------------------
 * Authentication: HMAC-SHA-256 over
 *
 *   label[22] || server_nonce[32] || client_nonce[32] || tenant[1..64]
 *
 * label: "kvtier-auth-v1-client\0" or "kvtier-auth-v1-server\0".  The two
 * directions differ so that a server's proof can never be replayed as a
 * client's; every field before the tenant has a fixed length, so the
 * message is unambiguous.
 */
#define PROTO_LABEL_LEN 22u
static const char proto_label_client[PROTO_LABEL_LEN] = "kvtier-auth-v1-client";
static const char proto_label_server[PROTO_LABEL_LEN] = "kvtier-auth-v1-server";
_Static_assert(sizeof("kvtier-auth-v1-client") == PROTO_LABEL_LEN, "label with its NUL");

int proto_auth_proof(int who, const void *secret, size_t secret_len,
		     const uint8_t server_nonce[PROTO_NONCE_LEN],
		     const uint8_t client_nonce[PROTO_NONCE_LEN],
		     const char *tenant, size_t tenant_len, uint8_t proof[PROTO_PROOF_LEN])
{
	uint8_t msg[PROTO_LABEL_LEN + 2 * PROTO_NONCE_LEN + PROTO_TENANT_MAX];
	unsigned int md_len = 0;
	size_t n = 0;

	if (!secret || !server_nonce || !client_nonce || !tenant || !proof)
		return KVT_ENULL;
	if (secret_len < PROTO_SECRET_MIN || secret_len > PROTO_SECRET_MAX ||
	    tenant_len < 1 || tenant_len > PROTO_TENANT_MAX ||
	    (who != PROTO_PROOF_CLIENT && who != PROTO_PROOF_SERVER))
		return KVT_EBADLEN;
	memcpy(msg, who == PROTO_PROOF_CLIENT ? proto_label_client : proto_label_server,
	       PROTO_LABEL_LEN);
	n += PROTO_LABEL_LEN;
	memcpy(msg + n, server_nonce, PROTO_NONCE_LEN);
	n += PROTO_NONCE_LEN;
	memcpy(msg + n, client_nonce, PROTO_NONCE_LEN);
	n += PROTO_NONCE_LEN;
	memcpy(msg + n, tenant, tenant_len);
	n += tenant_len;
	if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, proof, &md_len) ||
	    md_len != PROTO_PROOF_LEN)
		return -ENOMEM;
	return 0;
}

int proto_auth_check(int who, const void *secret, size_t secret_len,
		     const uint8_t server_nonce[PROTO_NONCE_LEN],
		     const uint8_t client_nonce[PROTO_NONCE_LEN],
		     const char *tenant, size_t tenant_len,
		     const uint8_t proof[PROTO_PROOF_LEN])
{
	uint8_t want[PROTO_PROOF_LEN];
	int rc;

	if (!proof)
		return KVT_ENULL;
	rc = proto_auth_proof(who, secret, secret_len, server_nonce, client_nonce, tenant,
			      tenant_len, want);
	if (rc)
		return rc;
	rc = CRYPTO_memcmp(want, proof, PROTO_PROOF_LEN) == 0 ? 0 : PROTO_EAUTH;
	OPENSSL_cleanse(want, sizeof(want));
	return rc;
}

/* ------------------------------------------------------------------------
 * Names
 */

/* The error codes' names are kvt_strerror's (err.c: one table); only the
 * positive "need more" result is the parser's own. */
const char *proto_strerror(int code)
{
	if (code == PROTO_NEED_MORE)
		return "frame incomplete: more bytes needed";
	return kvt_strerror(code);
}

const char *proto_op_name(unsigned op)
{
	static const char *const names[PROTO_OP__COUNT] = {
		[PROTO_OP_ERROR] = "error",
		[PROTO_OP_HELLO] = "hello",
		[PROTO_OP_AUTH] = "auth",
		[PROTO_OP_NS_REGISTER] = "ns_register",
		[PROTO_OP_LOOKUP] = "lookup",
		[PROTO_OP_EXISTS] = "exists",
		[PROTO_OP_GET] = "get",
		[PROTO_OP_PUT] = "put",
		[PROTO_OP_DELETE] = "delete",
		[PROTO_OP_CLEAR] = "clear",
		[PROTO_OP_STATS] = "stats",
		[PROTO_OP_PING] = "ping",
		[PROTO_OP_BYE] = "bye",
		[PROTO_OP_DRAIN] = "drain",
	};
	return op < PROTO_OP__COUNT ? names[op] : "unknown";
}

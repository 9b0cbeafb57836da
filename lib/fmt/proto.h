/*
 * proto.h - the kvtierd wire protocol: a pure codec shared by the server
 * (daemon/) and the remote tier's client (lib/).  The byte-by-byte
 * specification is doc/protocol.md; proto.c follows it.
 *
 * A frame is
 *
 *   [fixed header, PROTO_HDR_LEN bytes][table, table_len bytes][data, data_len bytes]
 *
 * The header and the table (op section, namespace table, item table) are
 * parsed from one contiguous buffer; the data section (value bytes) is not
 * touched by the codec at all: the parser says where each item's value
 * bytes start in the data section and how long they are, so the caller can
 * receive them straight into its own buffers (the DRAM tier's reserved,
 * 4 KiB-aligned chunks), and an encoder writes only header and table, after
 * which the caller sends the values from its own buffers (writev/sendmsg).
 *
 * Everything here is a pure function over caller memory: no I/O, no
 * allocation, no global state; any thread.  The one exception to "no
 * allocation" is proto_auth_proof/proto_auth_check, which call OpenSSL's
 * HMAC (OpenSSL allocates its MAC context inside the call).
 *
 * Results: 0 success, PROTO_NEED_MORE (a positive, normal result of the
 * parsers: give it more bytes), or a negative code.  The negative codes are
 * kvtier's KVT_E* (kvtier.h) where one fits, else the PROTO_E* below; they
 * all lie in kvtier's range [-5999, -5000] so they can travel as statuses.
 */
#ifndef KVT_PROTO_H
#define KVT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvtier.h"

/* ------------------------------------------------------------------------
 * Versions and sizes
 */
#define PROTO_MAGIC "KVTP"          /* 4 bytes at offset 0 of every frame, no NUL */
#define PROTO_VERSION_MIN 1u        /* oldest version this codec reads */
#define PROTO_VERSION_MAX 2u        /* newest version this codec reads and writes */
#define PROTO_VERSION_HELLO 1u      /* HELLO is always framed as version 1 */
#define PROTO_VERSION_CAPS 2u       /* first version whose HELLO response carries caps */
#define PROTO_HDR_LEN 48u           /* fixed header, bytes (a _Static_assert in proto.c) */
#define PROTO_NONCE_LEN 32u         /* HELLO's server nonce, AUTH's client nonce */
#define PROTO_PROOF_LEN 32u         /* HMAC-SHA-256 */
#define PROTO_DIGEST_LEN 32u        /* namespace digest (kvt_ns_digest) */
#define PROTO_PART_ENTRY 16u        /* bytes per part-table entry */
#define PROTO_NAME_MAX 64u          /* HELLO's software name, bytes */
#define PROTO_TENANT_MAX 64u        /* tenant name, bytes */
#define PROTO_AUTH_MAX 8u           /* auth methods a HELLO response may offer */
#define PROTO_MSG_MAX 1024u         /* error message of a failed request, bytes */
#define PROTO_CANON_MAX 2048u       /* canonical descriptor text (NS_CANON_MAX) */
#define PROTO_STAT_NAME_MAX 128u    /* STATS: name bytes */
#define PROTO_STAT_TEXT_MAX 1024u   /* STATS: text value bytes */
#define PROTO_SECRET_MIN 16u        /* shortest tenant secret, bytes */
#define PROTO_SECRET_MAX 4096u      /* longest tenant secret, bytes */

/* ------------------------------------------------------------------------
 * Result codes beyond kvtier.h's.  Parsers also return KVT_EVERSION (a
 * version this codec does not read), KVT_EBADOP (unknown opcode),
 * KVT_EBADLEN (a length zero where it must not be, or over its limit),
 * KVT_EKEYLEN (key empty or over key_max), KVT_EOPTVAL (a limits struct
 * beyond the hard caps).
 */
#define PROTO_NEED_MORE 256         /* positive: the buffer holds only part of the frame;
				     * never on the wire, not a kvtier status */
#define PROTO_EMAGIC     (-5901)    /* not a kvtier frame (magic) */
#define PROTO_EFLAGS     (-5902)    /* reserved flag bit set, or a flag where it does not apply */
#define PROTO_ECOUNT     (-5903)    /* item, part or namespace count zero or over its limit */
#define PROTO_EMALFORMED (-5904)    /* table malformed: sizes disagree, reserved bytes not
				     * zero, bad index, bad text, status out of range */
#define PROTO_ECRC       (-5905)    /* header and table fail their CRC32C */
#define PROTO_ERDMA      (-5906)    /* RDMA data plane requested: reserved, not supported */
#define PROTO_EAUTH      (-5907)    /* authentication failed */
#define PROTO_ENOAUTH    (-5908)    /* request before a successful AUTH */
#define PROTO_EPERM      (-5909)    /* not permitted for this tenant (admin only) */

/* Text for PROTO_* codes; anything else goes to kvt_strerror.  Static. */
const char *proto_strerror(int code);

/* ------------------------------------------------------------------------
 * Opcodes (u16 at header offset 6).  A response has the request's opcode
 * and PROTO_F_RESPONSE; ERROR is a response only.
 */
enum proto_op {
	PROTO_OP_ERROR = 0,       /* response to a request the server could not read */
	PROTO_OP_HELLO = 1,       /* version negotiation, server nonce, auth methods, limits */
	PROTO_OP_AUTH = 2,        /* challenge-response over a per-tenant secret */
	PROTO_OP_NS_REGISTER = 3, /* canonical descriptor text -> digest */
	PROTO_OP_LOOKUP = 4,      /* keys of one prompt -> leading hits, tier per key */
	PROTO_OP_EXISTS = 5,      /* keys -> present or not, tier */
	PROTO_OP_GET = 6,         /* keys -> values (whole, one part, a byte range) */
	PROTO_OP_PUT = 7,         /* keys + values in parts with CRC32C */
	PROTO_OP_DELETE = 8,      /* keys */
	PROTO_OP_CLEAR = 9,       /* a namespace, a tenant, or everything */
	PROTO_OP_STATS = 10,      /* name/value pairs */
	PROTO_OP_PING = 11,
	PROTO_OP_BYE = 12,        /* answered last, then the server closes */
	PROTO_OP_DRAIN = 13,      /* admin: hand the server's blocks over, leave the pod */
	PROTO_OP__COUNT
};

/* "hello", "get", ...; "unknown" otherwise.  Static. */
const char *proto_op_name(unsigned op);

/* Frame flags (u32 at header offset 8); every other bit is reserved, 0. */
#define PROTO_F_RESPONSE 0x1u /* a response (the request's tag and opcode) */
#define PROTO_F_MORE     0x2u /* response: more frames with this tag follow */
#define PROTO_F_RDMA     0x4u /* reserved: values described by remote memory
			       * descriptors, not inline; refused (PROTO_ERDMA) */

/* Item flags (u16 in items); every other bit is reserved, 0. */
#define PROTO_IF_PART   0x1u  /* GET: one part (request: which; response: that part) */
#define PROTO_IF_RANGE  0x2u  /* GET: a byte range of the value */
#define PROTO_IF_SEALED 0x4u  /* PUT, GET response: value sealed (AES-GCM) by the client */
#define PROTO_IF_PLACED 0x8u  /* PUT request: the item carries its group's anchor and the
			       * number of members it is placed on (doc/cluster.md "Healing") */
#define PROTO_IF_REPAIR 0x10u /* PUT request with PLACED: a pod peer's repair copy, refused
			       * (-ECANCELED) for a key the server saw deleted lately */
#define PROTO_IF_FORWARD 0x20u /* PUT request with PLACED, not REPAIR: the client sent
				* this one copy; the server forwards it to the group's
				* other copies - 1 members (doc/cluster.md "Forwarded
				* replicas") */
#define PROTO_IF_RETAIN 0x40u /* PUT request: the sender's retain hint (KVT_F_RETAIN): the
			       * server's store takes it for the sender's own quota group
			       * (doc/protocol.md "PUT"); a server older than it refuses
			       * the frame (PROTO_EFLAGS) */
#define PROTO_COPIES_MAX 8u   /* PLACED: copies 1..8 */

/* AUTH methods (u16). */
#define PROTO_AUTH_NONE 1u        /* tenant by name only: for trusted listeners */
#define PROTO_AUTH_HMAC_SHA256 2u /* challenge-response, doc/protocol.md "AUTH" */

/* AUTH response roles. */
#define PROTO_ROLE_TENANT 0u
#define PROTO_ROLE_ADMIN 1u

/* CLEAR and STATS scopes. */
#define PROTO_SCOPE_NS 1u     /* CLEAR: the namespace named by digest */
#define PROTO_SCOPE_TENANT 2u /* a tenant's namespaces (empty name: your own) */
#define PROTO_SCOPE_ALL 3u    /* every tenant (admin) */

/* DRAIN modes. */
#define PROTO_DRAIN_STAY 1u   /* hand over, leave the member list, keep serving */
#define PROTO_DRAIN_EXIT 2u   /* ... then exit */

/* STATS item kinds. */
#define PROTO_STAT_NUM 0u
#define PROTO_STAT_TEXT 1u

/* ------------------------------------------------------------------------
 * Limits: every length and count in a frame is checked against these
 * before it is used.  A server sends its own in the HELLO response.
 */
struct proto_limits {
	uint64_t frame_max;  /* header + table + data, bytes */
	uint64_t table_max;  /* table bytes: the contiguous buffer a parser needs
			      * is PROTO_HDR_LEN + table_max */
	uint64_t value_max;  /* one value, bytes */
	uint32_t items_max;  /* items in one frame */
	uint32_t parts_max;  /* parts of one value */
	uint32_t ns_max;     /* entries of one frame's namespace table */
	uint32_t key_max;    /* key bytes, <= KVT_KEY_MAX */
};

/* Defaults: 4 GiB frames, 16 MiB tables, 1 GiB values, 65536 items,
 * 1024 parts, 256 namespaces, 64-byte keys. */
#define PROTO_DEF_FRAME_MAX (UINT64_C(1) << 32)
#define PROTO_DEF_TABLE_MAX (UINT64_C(1) << 24)
#define PROTO_DEF_VALUE_MAX (UINT64_C(1) << 30)
#define PROTO_DEF_ITEMS_MAX 65536u
#define PROTO_DEF_PARTS_MAX KVT_PARTS_MAX
#define PROTO_DEF_NS_MAX 256u
#define PROTO_DEF_KEY_MAX KVT_KEY_MAX

/* Hard caps: no limits struct may exceed these (nor be 0). */
#define PROTO_HARD_FRAME_MAX (UINT64_C(1) << 40)
#define PROTO_HARD_TABLE_MAX (UINT64_C(1) << 30)
#define PROTO_HARD_VALUE_MAX KVT_VALUE_MAX
#define PROTO_HARD_ITEMS_MAX KVT_BATCH_MAX
#define PROTO_HARD_PARTS_MAX KVT_PARTS_MAX
#define PROTO_HARD_NS_MAX 65536u
#define PROTO_HARD_KEY_MAX KVT_KEY_MAX

void proto_limits_default(struct proto_limits *lim);
/* 0, or KVT_EOPTVAL if a field is 0 or over its hard cap (or table_max +
 * PROTO_HDR_LEN > frame_max), KVT_ENULL. */
int proto_limits_check(const struct proto_limits *lim);

/* ------------------------------------------------------------------------
 * A frame: the fixed header, its op section and namespace table.
 *
 * Parsers fill it; strings and the namespace table point into the parsed
 * buffer, which must stay unchanged while the frame and its items are used.
 * Encoders read it (and ignore item_count, table_len, data_len, hdr_len,
 * need: they compute those).
 */
struct proto_hello {
	/* request: oldest version the client speaks; response: the server's */
	uint16_t min_version;
	uint16_t max_version;  /* request: newest the client speaks; response: the server's */
	uint16_t version;      /* response: the version chosen for this connection */
	uint16_t auth_count;   /* response: methods in auth[], 1..PROTO_AUTH_MAX */
	uint16_t auth[PROTO_AUTH_MAX]; /* response: PROTO_AUTH_*, the server's preference first */
	uint8_t nonce[PROTO_NONCE_LEN]; /* response: fresh random bytes, the AUTH challenge */
	struct proto_limits limits;    /* response: what the server accepts */
	const char *name;      /* software name and version, for logs; may be NULL with len 0 */
	uint32_t name_len;     /* 0..PROTO_NAME_MAX bytes of 0x20..0x7e */
	uint16_t caps;         /* response: PROTO_CAP_*, what the server accepts and does;
				* 0 unless version >= PROTO_VERSION_CAPS */
};

/* HELLO response capabilities (u16 at offset 98; doc/protocol.md section 7).
 * A client sends an item flag a server may not know only where the server
 * announced it: an older server refuses the frame (PROTO_EFLAGS). */
#define PROTO_CAP_FORWARD 0x1u /* PUT FORWARD accepted, and this server forwards: it is
				* a pod member with a member list to rank with */
#define PROTO_CAP_RETAIN 0x2u  /* PUT RETAIN accepted (the retain hint) */
#define PROTO_CAPS_KNOWN (PROTO_CAP_FORWARD | PROTO_CAP_RETAIN)

struct proto_auth {
	uint16_t method;       /* request: PROTO_AUTH_* */
	uint32_t role;         /* response: PROTO_ROLE_* */
	const char *tenant;    /* request: 1..PROTO_TENANT_MAX bytes of 0x21..0x7e, not "-" */
	uint32_t tenant_len;
	uint8_t nonce[PROTO_NONCE_LEN];  /* request: client nonce (zero with AUTH_NONE) */
	uint8_t proof[PROTO_PROOF_LEN];  /* request: client proof; response: server proof
					  * (zero with AUTH_NONE) */
};

struct proto_scope {          /* CLEAR and STATS requests */
	uint32_t scope;        /* PROTO_SCOPE_* (STATS: TENANT or ALL) */
	uint8_t digest[PROTO_DIGEST_LEN]; /* SCOPE_NS; zero otherwise */
	const char *tenant;    /* SCOPE_TENANT: 0..PROTO_TENANT_MAX bytes, empty: your own */
	uint32_t tenant_len;
};

struct proto_frame {
	/* Fixed header */
	uint16_t version;      /* protocol version the frame is written in */
	uint16_t op;           /* enum proto_op */
	uint32_t flags;        /* PROTO_F_* */
	uint32_t item_count;   /* items in the item table */
	uint64_t tag;          /* the requester's; echoed by every response frame */
	uint64_t table_len;    /* bytes of the table after the header */
	uint64_t data_len;     /* bytes of value data after the table */
	int32_t status;        /* response: KVT_OK, or < 0 (the whole request failed);
				* request: 0 */

	/* Parser: header + table bytes (the data section starts here); and
	 * with PROTO_NEED_MORE, how many bytes the buffer must hold at least. */
	uint64_t hdr_len;
	uint64_t need;

	/* Namespace table (requests of LOOKUP, EXISTS, GET, PUT, DELETE). */
	uint32_t ns_count;     /* entries, 1..ns_max (LOOKUP: 1) */
	const uint8_t *ns;     /* ns_count digests of PROTO_DIGEST_LEN bytes */

	/* A response with status < 0: optional message (printable ASCII). */
	const char *msg;
	uint32_t msg_len;      /* 0..PROTO_MSG_MAX */

	/* Op section, by opcode (requests and responses with status 0). */
	union {
		struct proto_hello hello; /* HELLO */
		struct proto_auth auth;   /* AUTH */
		struct proto_scope scope; /* CLEAR and STATS requests */
		uint64_t removed;         /* CLEAR response: blocks removed */
		uint32_t drain_mode;      /* DRAIN request: PROTO_DRAIN_* */
		struct {                  /* LOOKUP response */
			uint32_t hits;    /* leading keys present */
			uint64_t load_ns; /* estimated time to load them */
		} lookup;
	};

	/* Parser-private: the item table and the limits it was checked against. */
	const uint8_t *items_;
	uint64_t items_len_;
	struct proto_limits lim_;
};

/* ------------------------------------------------------------------------
 * An item: one entry of a frame's item table.  Which fields a kind of item
 * uses (doc/protocol.md has the byte layouts):
 *
 *   request  LOOKUP EXISTS DELETE  ns_index key
 *            GET                   ns_index key flags (PART: part; RANGE: off len)
 *            PUT                   ns_index key flags (SEALED, PLACED, REPAIR, FORWARD,
 *                                  RETAIN)
 *                                  part_count part_lens part_crcs
 *                                  (PLACED: anchor copies)
 *            NS_REGISTER           text (canonical descriptor)
 *   response PUT DELETE            index status
 *            EXISTS LOOKUP         index status tier
 *            GET                   index status flags value_len off first_part
 *                                  part_count part_lens part_crcs
 *            NS_REGISTER           index status digest text
 *            STATS                 kind name value text
 *
 * Parsers also set: index (requests: the position), ns (the digest that
 * ns_index names), value_len (PUT request: the sum of the parts), data_off
 * and data_len (where the item's value bytes lie in the data section).
 */
struct proto_item {
	uint32_t index;        /* response: the request item it answers (within one
				* frame strictly increasing); request: position */
	int32_t status;        /* response: KVT_OK, KVT_MISS, KVT_EXISTS or an error */
	uint32_t flags;        /* PROTO_IF_* */
	uint32_t tier;         /* enum kvt_tier: where a hit was found; 0 otherwise */
	uint32_t ns_index;     /* request: entry of the frame's namespace table */
	const uint8_t *ns;     /* parser: that entry's digest (PROTO_DIGEST_LEN bytes) */
	struct kvt_key key;    /* request: the key (bytes past len are zero after parsing) */
	uint32_t part;         /* GET request with PROTO_IF_PART: part index */
	uint64_t off;          /* GET request with RANGE: first byte; GET response: where the
				* returned bytes start in the value */
	uint64_t len;          /* GET request with RANGE: bytes, >= 1 */
	uint64_t value_len;    /* GET response: the whole value's bytes; PUT request: sum */
	uint32_t first_part;   /* GET response: index of the first part described */
	uint32_t part_count;   /* PUT request, GET response: entries in the part table */
	uint64_t anchor;       /* PUT request with PROTO_IF_PLACED: the group's anchor */
	uint32_t copies;       /* ... and the members it is placed on, 1..PROTO_COPIES_MAX */
	const uint64_t *part_lens; /* part_count byte lengths, each >= 1 */
	const uint32_t *part_crcs; /* part_count CRC32C (kvt_crc32c) */
	const uint8_t *digest; /* NS_REGISTER response: PROTO_DIGEST_LEN bytes */
	const char *text;      /* NS_REGISTER: canonical text; STATS: text value */
	uint32_t text_len;
	const char *name;      /* STATS: statistic name */
	uint32_t name_len;
	uint32_t kind;         /* STATS: PROTO_STAT_NUM or PROTO_STAT_TEXT */
	uint64_t value;        /* STATS: numeric value */
	uint64_t data_off;     /* parser: offset of this item's value in the data section */
	uint64_t data_len;     /* parser: its length (0 for items without a value) */
	const uint8_t *parts_wire_; /* parser-private: the part table in the buffer */
};

/* ------------------------------------------------------------------------
 * Parsing
 *
 * proto_parse_request / proto_parse_response parse one frame from
 * buf[0, len): the header, then, once buf holds PROTO_HDR_LEN + table_len
 * bytes, the CRC and the whole table (every item is checked before any is
 * returned).  They never read past buf + len nor past the table, and never
 * touch the data section.  lim may be NULL for the defaults.  Returns:
 *
 *   0                complete: f->hdr_len bytes consumed; f->data_len value
 *                    bytes follow; walk the items with proto_iter_*.
 *   PROTO_NEED_MORE  buf holds only a prefix of the header and table: call
 *                    again when it holds at least f->need bytes (> len).
 *   < 0              PROTO_EMAGIC, KVT_EVERSION, KVT_EBADOP, PROTO_EFLAGS
 *                    (also: a response where a request was expected, or the
 *                    reverse), PROTO_ERDMA, PROTO_ECOUNT, KVT_EBADLEN,
 *                    KVT_EKEYLEN, PROTO_ECRC, PROTO_EMALFORMED, KVT_EOPTVAL
 *                    (lim), KVT_ENULL.  Once the first PROTO_HDR_LEN bytes
 *                    are present with the right magic, f holds the header's
 *                    fields (tag, op, ...) even on error, so that a server
 *                    can answer the tag with an ERROR frame.
 *
 * A prefix of a valid frame is never an error: it is PROTO_NEED_MORE up to
 * hdr_len bytes and complete from there on.
 */
int proto_parse_request(const uint8_t *buf, size_t len, const struct proto_limits *lim,
			struct proto_frame *f);
int proto_parse_response(const uint8_t *buf, size_t len, const struct proto_limits *lim,
			 struct proto_frame *f);

/*
 * Items of a parsed frame, in table order.  part_lens/part_crcs (may both
 * be NULL) receive each item's part table; part_cap entries each.  Items
 * point into the frame's buffer; with arrays, item->part_lens/part_crcs
 * point into them and are valid until the next call.
 */
struct proto_iter {
	const struct proto_frame *f;
	uint64_t off;          /* next item's offset in the item table */
	uint32_t next;         /* items returned */
	uint64_t data_off;     /* next item's offset in the data section */
	uint64_t *lens;
	uint32_t *crcs;
	uint32_t cap;
};
void proto_iter_init(struct proto_iter *it, const struct proto_frame *f,
		     uint64_t *part_lens, uint32_t *part_crcs, uint32_t part_cap);
/* 1: *item filled; 0: no more items; KVT_ERANGE: the item has more parts
 * than part_cap (item filled but for part_lens/part_crcs; iteration goes on);
 * KVT_ENULL. */
int proto_iter_next(struct proto_iter *it, struct proto_item *item);

/* Part i of a parsed item (read from the frame's buffer), whether or not
 * the iterator had arrays.  0, KVT_ERANGE (i >= part_count), KVT_ENULL. */
int proto_item_part(const struct proto_item *item, uint32_t i, uint64_t *len, uint32_t *crc);

/* ------------------------------------------------------------------------
 * Encoding: header and table into a caller buffer.  The value bytes are
 * not copied: the caller sends each item's value (in item order) after
 * the returned length.  Encoders refuse what parsers refuse, so what they
 * write parses back to the same fields.
 *
 * Streaming: begin with the frame (op, flags, tag, status, version -- 0
 * means PROTO_VERSION_MAX, or 1 for HELLO -- op section, namespace table,
 * msg), add items one at a time, end.  If buf is too small the writer goes
 * on counting, and end returns KVT_EBUFSMALL with *need the exact length
 * needed.  The first error sticks: every later call returns it.
 */
struct proto_writer {
	uint8_t *buf;
	uint64_t cap;
	uint64_t len;          /* header + table bytes so far (counted beyond cap) */
	uint64_t data_len;     /* value bytes the items announce */
	uint32_t item_count;
	uint32_t last_index;   /* response items: the previous index */
	uint16_t op;
	uint16_t version;
	uint32_t flags;
	uint32_t ns_count;
	uint32_t hits;         /* LOOKUP response: checked against item_count at end */
	int32_t status;
	uint64_t tag;
	int err;
	struct proto_limits lim;
};

/* 0 or an error (sticky): KVT_ENULL, KVT_EOPTVAL, KVT_EBADOP, KVT_EVERSION,
 * PROTO_EFLAGS, PROTO_ERDMA, PROTO_ECOUNT, KVT_EBADLEN, PROTO_EMALFORMED. */
int proto_write_begin(struct proto_writer *w, uint8_t *buf, size_t cap,
		      const struct proto_limits *lim, const struct proto_frame *f);
/* 0 or an error (sticky), as begin, and KVT_EKEYLEN. */
int proto_write_item(struct proto_writer *w, const struct proto_item *item);
/* Header + table length (>= PROTO_HDR_LEN), KVT_EBUFSMALL (*need set, may
 * be NULL), PROTO_ECOUNT (a batch request without items) or the sticky
 * error.  The frame's data_len is w->data_len. */
int64_t proto_write_end(struct proto_writer *w, uint64_t *need);

/* begin + n items + end. */
int64_t proto_encode(const struct proto_frame *f, const struct proto_item *items, uint32_t n,
		     uint8_t *buf, size_t cap, const struct proto_limits *lim, uint64_t *need);

/* ------------------------------------------------------------------------
 * Authentication (doc/protocol.md, "AUTH"):
 *
 *   proof = HMAC-SHA-256(secret, label || server_nonce[32] || client_nonce[32] || tenant)
 *
 * label is the 22 bytes "kvtier-auth-v1-client" plus a NUL for the client's
 * proof and "kvtier-auth-v1-server" plus a NUL for the server's.  secret is
 * PROTO_SECRET_MIN..PROTO_SECRET_MAX bytes; tenant 1..PROTO_TENANT_MAX.
 * The caller draws nonces (RAND_bytes).  check compares in constant time.
 * Returns 0, PROTO_EAUTH (check: mismatch), KVT_ENULL, KVT_EBADLEN (secret
 * or tenant length), -ENOMEM (OpenSSL failed).  Any thread.
 */
enum { PROTO_PROOF_CLIENT = 0, PROTO_PROOF_SERVER = 1 };
int proto_auth_proof(int who, const void *secret, size_t secret_len,
		     const uint8_t server_nonce[PROTO_NONCE_LEN],
		     const uint8_t client_nonce[PROTO_NONCE_LEN],
		     const char *tenant, size_t tenant_len, uint8_t proof[PROTO_PROOF_LEN]);
int proto_auth_check(int who, const void *secret, size_t secret_len,
		     const uint8_t server_nonce[PROTO_NONCE_LEN],
		     const uint8_t client_nonce[PROTO_NONCE_LEN],
		     const char *tenant, size_t tenant_len,
		     const uint8_t proof[PROTO_PROOF_LEN]);

#endif

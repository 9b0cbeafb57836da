/*
 * fuzz_proto.c - libFuzzer target for the kvtierd wire codec (lib/proto.c,
 * doc/protocol.md): request and response parsing, the item iterator, and
 * the encoders as the parsers' inverse.
 *
 * The input is an untrusted byte stream from a socket.  It is parsed as a
 * request and as a response, with the default limits and with small ones;
 * then once more from a copy whose header CRC was recomputed the way the
 * format defines it, so that mutations reach the checks behind the CRC.
 * Every copy is exactly as long as the input (ASan sees a read one byte too
 * far).  Properties, each a trap when broken:
 *   - results are only the documented codes;
 *   - PROTO_NEED_MORE asks for more than there is, and no more than a
 *     header plus the largest table;
 *   - a complete frame ends within the input; one byte less of it is
 *     PROTO_NEED_MORE; its items iterate without error, exactly item_count
 *     of them, within the limits, and their value bytes add up to data_len;
 *   - re-encoding what was parsed reproduces the input's header and table
 *     byte for byte: one encoding per frame;
 *   - once 48 bytes with the magic are there, the frame's version, opcode
 *     and tag are the header's, whatever the result (the server answers
 *     the tag and refuses by opcode and version before the table).
 * Seed corpus: tests/fuzz/corpus/proto/ (tests/fuzz/gen_proto_seeds.c).
 */
#include <stdlib.h>
#include <string.h>

#include "kvt_int.h"
#include "proto.h"
#include "le.h"
#include "fuzz.h"

static uint64_t g_lens[KVT_PARTS_MAX];
static uint32_t g_crcs[KVT_PARTS_MAX];
static uint8_t g_enc[1 << 20];

static bool known_rc(int rc)
{
	switch (rc) {
	case 0:
	case PROTO_NEED_MORE:
	case PROTO_EMAGIC:
	case KVT_EVERSION:
	case KVT_EBADOP:
	case PROTO_EFLAGS:
	case PROTO_ERDMA:
	case PROTO_ECOUNT:
	case KVT_EBADLEN:
	case KVT_EKEYLEN:
	case PROTO_ECRC:
	case PROTO_EMALFORMED:
		return true;
	default:
		return false;
	}
}

static void check_item(const struct proto_frame *f, bool resp, const struct proto_item *it,
		       const struct proto_limits *lim)
{
	FUZZ_CHECK(it->part_count <= lim->parts_max);
	FUZZ_CHECK(it->data_len <= lim->value_max);
	if (!resp && f->op != PROTO_OP_NS_REGISTER) {
		FUZZ_CHECK(it->key.len >= 1 && it->key.len <= lim->key_max);
		for (uint32_t i = it->key.len; i < KVT_KEY_MAX; i++)
			FUZZ_CHECK(it->key.bytes[i] == 0);
		FUZZ_CHECK(it->ns_index < f->ns_count && it->ns != NULL);
	}
	if (resp && f->op != PROTO_OP_STATS)
		FUZZ_CHECK(it->index < lim->items_max);
	for (uint32_t i = 0; i < it->part_count; i++) {
		uint64_t len;
		uint32_t crc;

		FUZZ_CHECK(proto_item_part(it, i, &len, &crc) == 0);
		FUZZ_CHECK(len >= 1 && len == it->part_lens[i] && crc == it->part_crcs[i]);
	}
}

static void fuzz_one(const uint8_t *buf, size_t len, bool resp, const struct proto_limits *lim)
{
	struct proto_frame f, g;
	struct proto_iter iter;
	struct proto_item item;
	struct proto_writer w;
	uint64_t data = 0;
	uint32_t n = 0;
	int64_t enc;
	int rc;

	rc = resp ? proto_parse_response(buf, len, lim, &f) : proto_parse_request(buf, len, lim, &f);
	FUZZ_CHECK(known_rc(rc));
	/* A readable header is the frame's, whatever the result: kvtierd
	 * answers the tag and decides on op and version (before AUTH, a frame
	 * of another version) from it while the table is still to come. */
	if (len >= PROTO_HDR_LEN && rc != PROTO_EMAGIC)
		FUZZ_CHECK(f.version == le_get16(buf + 4) && f.op == le_get16(buf + 6) &&
			   f.tag == le_get64(buf + 16));
	if (rc == PROTO_NEED_MORE) {
		FUZZ_CHECK(f.need > len && f.need <= PROTO_HDR_LEN + lim->table_max);
		return;
	}
	if (rc != 0)
		return;
	FUZZ_CHECK(f.hdr_len >= PROTO_HDR_LEN && f.hdr_len <= len);
	FUZZ_CHECK(f.hdr_len == PROTO_HDR_LEN + f.table_len);
	FUZZ_CHECK(f.item_count <= lim->items_max);
	FUZZ_CHECK(f.hdr_len + f.data_len <= lim->frame_max);
	FUZZ_CHECK(!!(f.flags & PROTO_F_RESPONSE) == resp);

	/* A prefix is never an error. */
	rc = resp ? proto_parse_response(buf, (size_t)f.hdr_len - 1, lim, &g) :
		    proto_parse_request(buf, (size_t)f.hdr_len - 1, lim, &g);
	FUZZ_CHECK(rc == PROTO_NEED_MORE && g.need == f.hdr_len);

	/* Iterate, re-encoding as we go. */
	FUZZ_CHECK(proto_write_begin(&w, g_enc, sizeof(g_enc), lim, &f) == 0);
	proto_iter_init(&iter, &f, g_lens, g_crcs, KVT_PARTS_MAX);
	while ((rc = proto_iter_next(&iter, &item)) == 1) {
		check_item(&f, resp, &item, lim);
		FUZZ_CHECK(item.data_off == data);
		data += item.data_len;
		FUZZ_CHECK(proto_write_item(&w, &item) == 0);
		n++;
	}
	FUZZ_CHECK(rc == 0 && n == f.item_count && data == f.data_len);
	enc = proto_write_end(&w, NULL);
	FUZZ_CHECK(enc == (int64_t)f.hdr_len);
	FUZZ_CHECK(w.data_len == f.data_len);
	FUZZ_CHECK(memcmp(g_enc, buf, (size_t)f.hdr_len) == 0);
}

static void fuzz_all(const uint8_t *buf, size_t len)
{
	static const struct proto_limits small = {
		.frame_max = 1 << 16, .table_max = 4096, .value_max = 1000,
		.items_max = 4, .parts_max = 3, .ns_max = 2, .key_max = 16,
	};
	struct proto_limits def;

	proto_limits_default(&def);
	fuzz_one(buf, len, false, &def);
	fuzz_one(buf, len, true, &def);
	fuzz_one(buf, len, false, &small);
	fuzz_one(buf, len, true, &small);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	fuzz_all(data, size);

	/* The same bytes with a valid CRC over the header and what there is
	 * of the table. */
	if (size < PROTO_HDR_LEN)
		return 0;
	copy = malloc(size);
	FUZZ_CHECK(copy != NULL);
	memcpy(copy, data, size);
	{
		uint64_t table_len = le_get64(copy + 24);
		uint32_t crc;

		if (table_len > size - PROTO_HDR_LEN)
			table_len = size - PROTO_HDR_LEN;
		crc = kvt_crc32c(0, copy, 44);
		crc = kvt_crc32c(crc, copy + PROTO_HDR_LEN, (size_t)table_len);
		for (int i = 0; i < 4; i++)
			copy[44 + i] = (uint8_t)(crc >> (8 * i));
	}
	fuzz_all(copy, size);
	free(copy);
	return 0;
}

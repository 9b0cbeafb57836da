/*
 * fuzz_awschunk.c - libFuzzer target for the chunked / aws-chunked body
 * decoder (daemon/s3http.c, s3c_next; doc/s3.md).
 *
 * The first input byte chooses how the rest is split into reads (1..256
 * bytes each); the rest is a body.  Properties, each a trap when broken:
 * every call consumes no more than it was given; DATA events point inside
 * the input given; the data of each chunk adds up to its announced size
 * (END comes only when it does); nothing is consumed after DONE; decoding
 * the same body in one read gives the same data, chunk count and result.
 * Seed corpus: tests/fuzz/corpus/awschunk/.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "s3http.h"
#include "fuzz.h"

struct fuzz_out {
	int result;        /* 1 done, 0 ran out of input, < 0 error */
	uint64_t data;     /* data bytes */
	uint32_t crc;      /* a digest of them, order included */
	unsigned chunks, trailers;
	size_t consumed;
};

static uint32_t fuzz_mix(uint32_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void fuzz_decode(const uint8_t *in, size_t n, size_t step, struct fuzz_out *o)
{
	struct s3c_dec *d = malloc(sizeof(*d));
	size_t pos = 0;
	uint64_t left = 0;
	bool in_chunk = false;

	memset(o, 0, sizeof(*o));
	o->crc = 2166136261u;
	if (!d)
		return;
	s3c_init(d, 1u << 20);
	while (pos < n || step == 0) {
		size_t give = n - pos < step ? n - pos : step;
		struct s3c_ev ev;
		int64_t r = s3c_next(d, in + pos, give, &ev);
		if (r < 0) {
			o->result = (int)r;
			break;
		}
		FUZZ_CHECK((size_t)r <= give);
		switch (ev.kind) {
		case S3C_EV_CHUNK:
			FUZZ_CHECK(!in_chunk || left == 0);
			FUZZ_CHECK(ev.size <= (1u << 20));
			left = ev.size;
			in_chunk = ev.size > 0;
			o->chunks++;
			break;
		case S3C_EV_DATA:
			FUZZ_CHECK(ev.p >= in + pos && ev.p + ev.len <= in + pos + give);
			FUZZ_CHECK(ev.len <= left && ev.len > 0);
			left -= ev.len;
			o->data += ev.len;
			o->crc = fuzz_mix(o->crc, ev.p, ev.len);
			break;
		case S3C_EV_END:
			FUZZ_CHECK(in_chunk && left == 0);
			in_chunk = false;
			break;
		case S3C_EV_TRAILER:
			FUZZ_CHECK(ev.name_len > 0);
			o->trailers++;
			break;
		case S3C_EV_DONE:
			o->result = 1;
			break;
		}
		pos += (size_t)r;
		if (o->result)
			break;
		if (r == 0 && ev.kind == S3C_EV_NONE)
			break;
	}
	if (o->result == 1) {
		struct s3c_ev ev;
		FUZZ_CHECK(s3c_done(d));
		FUZZ_CHECK(s3c_next(d, in + pos, n - pos, &ev) == 0);
	}
	o->consumed = pos;
	free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_out a, b;
	uint8_t *buf;

	if (size < 1)
		return 0;
	buf = malloc(size - 1 ? size - 1 : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	fuzz_decode(buf, size - 1, 1 + (size_t)data[0], &a);
	fuzz_decode(buf, size - 1, size, &b);
	if (a.result != 0 && b.result != 0) {
		FUZZ_CHECK(a.result == b.result);
		if (a.result == 1)
			FUZZ_CHECK(a.data == b.data && a.crc == b.crc && a.chunks == b.chunks &&
				   a.trailers == b.trailers && a.consumed == b.consumed);
	}
	free(buf);
	return 0;
}

/*
 * value.c - value bytes on their way in and out: the PUT items built from a
 * frame's data section, the GET responses built from pinned DRAM views,
 * and the value trailer that keeps a value's part table.
 *
 * Copies (doc/kvtierd.md "Copies"):
 *   GET  every item is a KVT_OP_GET_PINNED (ops.c submits it); the
 *        response's value bytes are iovecs into the pinned DRAM runs, sent
 *        with sendmsg and released once written (the output entry owns the
 *        pins): no copy in user space.  Parts and ranges are slices of the
 *        same view.
 *   PUT  the data section was received into one buffer; each item's parts
 *        are iovecs into it, submitted with KVT_F_CRC and the client's
 *        CRCs, which the library verifies before the put completes (a
 *        mismatch is KVT_ECORRUPT and nothing is stored).  One copy, buffer
 *        to DRAM, inside the library.
 *
 * The value trailer: the library's API does not return a stored value's
 * part lengths and CRCs, but a GET response carries them.  So a value put
 * with several parts (or sealed) is stored with one more part at its end,
 * the trailer, recording the client's part table and flags; a GET reads it
 * from the pinned view and strips it.  A single unsealed part is stored as
 * is (its CRC is recomputed on GET from the DRAM bytes, which the library
 * checked against the client's CRC at put and against the SSD record's
 * CRCs at promotion); one whose last bytes happen to look like a trailer
 * gets a trailer too, so reading is never ambiguous.  When the library
 * returns part tables (doc/kvtierd.md "Not yet"), new values need no
 * trailer and old ones still read.
 *
 * Threads: the loop that owns the frame's connection.  No locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

/* ------------------------------------------------------------------------
 * Value trailer
 *
 *   off      size  field
 *   0        4     u32 part_count n (1..KVT_PARTS_MAX - 1)
 *   4        4     u32 flags (PROTO_IF_SEALED)
 *   8        16n   n entries: u64 len, u32 crc, u32 reserved (0)
 *   8+16n    8     magic "KVTDPT1\0"
 *   16+16n   4     u32 trailer length, 24 + 16n
 *   20+16n   4     u32 CRC32C of bytes [0, 20 + 16n)
 */
#define TR_MAGIC "KVTDPT1"          /* with its NUL: 8 bytes */
#define TR_FIXED 24u
#define TR_ENTRY 16u
#define TR_TAIL 16u                 /* magic, length, CRC */
#define TR_LEN(n) (TR_FIXED + TR_ENTRY * (uint64_t)(n))
#define TR_PARTS_MAX (KVT_PARTS_MAX - 1u)
#define TR_MAX TR_LEN(TR_PARTS_MAX)
_Static_assert(sizeof(TR_MAGIC) == 8, "trailer magic is 8 bytes with its NUL");

struct value_parts {
	uint32_t n;
	uint32_t flags;
	uint64_t *lens;
	uint32_t *crcs;
};

static void value_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void value_put64(uint8_t *p, uint64_t v)
{
	value_put32(p, (uint32_t)v);
	value_put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t value_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t value_get64(const uint8_t *p)
{
	return value_get32(p) | (uint64_t)value_get32(p + 4) << 32;
}

/* Encode a trailer for n parts into buf (TR_LEN(n) bytes). */
static void value_trailer_write(uint8_t *buf, uint32_t n, uint32_t flags, const uint64_t *lens,
			      const uint32_t *crcs)
{
	uint8_t *p = buf;
	uint64_t tl = TR_LEN(n);

	memset(buf, 0, tl);
	value_put32(p, n);
	value_put32(p + 4, flags);
	for (uint32_t i = 0; i < n; i++) {
		value_put64(p + 8 + TR_ENTRY * i, lens[i]);
		value_put32(p + 8 + TR_ENTRY * i + 8, crcs[i]);
	}
	p = buf + tl - TR_TAIL;
	memcpy(p, TR_MAGIC, 8);
	value_put32(p + 8, (uint32_t)tl);
	value_put32(p + 12, kvt_crc32c(0, buf, tl - 4));
}

/* ------------------------------------------------------------------------
 * Views: the iovec runs of a pinned value
 */

/* Copy len bytes at off of the view into dst. */
static void value_view_copy(const struct iovec *v, unsigned vc, uint64_t off, void *dst, uint64_t len)
{
	uint8_t *d = dst;
	for (unsigned i = 0; i < vc && len; i++) {
		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		uint64_t n = v[i].iov_len - off;
		if (n > len)
			n = len;
		memcpy(d, (const uint8_t *)v[i].iov_base + off, n);
		d += n;
		len -= n;
		off = 0;
	}
}

/* The iovecs covering [off, off + len) of the view into out; returns how
 * many (at most vc). */
static unsigned value_view_slice(const struct iovec *v, unsigned vc, uint64_t off, uint64_t len,
			       struct iovec *out)
{
	unsigned n = 0;
	for (unsigned i = 0; i < vc && len; i++) {
		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		uint64_t k = v[i].iov_len - off;
		if (k > len)
			k = len;
		out[n].iov_base = (uint8_t *)v[i].iov_base + off;
		out[n].iov_len = k;
		n++;
		len -= k;
		off = 0;
	}
	return n;
}

/* CRC32C of [off, off + len) of the view. */
static uint32_t value_view_crc(const struct iovec *v, unsigned vc, uint64_t off, uint64_t len)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < vc && len; i++) {
		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		uint64_t n = v[i].iov_len - off;
		if (n > len)
			n = len;
		crc = kvt_crc32c(crc, (const uint8_t *)v[i].iov_base + off, n);
		len -= n;
		off = 0;
	}
	return crc;
}

static uint32_t value_iov_crc(const struct iovec *v, unsigned n)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < n; i++)
		crc = kvt_crc32c(crc, v[i].iov_base, v[i].iov_len);
	return crc;
}

/*
 * Does a stored value of len bytes (in view) end with a valid trailer?
 * If so fill *pt (arrays malloc'd) and return its length; 0 if not;
 * -ENOMEM.
 */
static int64_t value_trailer_read(const struct iovec *v, unsigned vc, uint64_t len,
				struct value_parts *pt)
{
	uint8_t tail[TR_TAIL], *buf;
	uint64_t tl, sum = 0;
	uint32_t n;

	memset(pt, 0, sizeof(*pt));
	if (len < TR_LEN(1) + 1)
		return 0;
	value_view_copy(v, vc, len - TR_TAIL, tail, TR_TAIL);
	if (memcmp(tail, TR_MAGIC, 8) != 0)
		return 0;
	tl = value_get32(tail + 8);
	if (tl < TR_LEN(1) || tl > TR_MAX || (tl - TR_FIXED) % TR_ENTRY != 0 || tl >= len)
		return 0;
	buf = malloc(tl);
	if (!buf)
		return -ENOMEM;
	value_view_copy(v, vc, len - tl, buf, tl);
	n = value_get32(buf);
	if (n < 1 || TR_LEN(n) != tl || (value_get32(buf + 4) & ~(uint32_t)PROTO_IF_SEALED) ||
	    kvt_crc32c(0, buf, tl - 4) != value_get32(buf + tl - 4))
		goto no;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t l = value_get64(buf + 8 + TR_ENTRY * i);
		if (l == 0 || l > len || value_get32(buf + 8 + TR_ENTRY * i + 12) != 0)
			goto no;
		sum += l;
	}
	if (sum != len - tl)
		goto no;
	pt->lens = malloc(n * sizeof(*pt->lens));
	pt->crcs = malloc(n * sizeof(*pt->crcs));
	if (!pt->lens || !pt->crcs) {
		free(pt->lens);
		free(pt->crcs);
		free(buf);
		memset(pt, 0, sizeof(*pt));
		return -ENOMEM;
	}
	pt->n = n;
	pt->flags = value_get32(buf + 4);
	for (uint32_t i = 0; i < n; i++) {
		pt->lens[i] = value_get64(buf + 8 + TR_ENTRY * i);
		pt->crcs[i] = value_get32(buf + 8 + TR_ENTRY * i + 8);
	}
	free(buf);
	return (int64_t)tl;
no:
	free(buf);
	return 0;
}

/* Does a single unsealed value's tail look like a trailer? (Then it gets
 * one, so that reading it back is never ambiguous.) */
static bool value_tail_ambiguous(const uint8_t *p, uint64_t len)
{
	struct iovec v = { (void *)p, (size_t)len };
	struct value_parts pt;
	int64_t tl = value_trailer_read(&v, 1, len, &pt);
	free(pt.lens);
	free(pt.crcs);
	return tl != 0;
}

int kvtd_value_put_item(struct kvtd_frame *fr, struct kvtd_item *it, const struct proto_item *pi)
{
	uint32_t n = pi->part_count, extra;
	uint64_t off = pi->data_off;
	bool trailer;

	trailer = n > 1 || (pi->flags & PROTO_IF_SEALED);
	if (!trailer) {
		uint64_t len;
		proto_item_part(pi, 0, &len, NULL);
		trailer = value_tail_ambiguous(fr->data + off, len);
	}
	extra = trailer ? 1 : 0;
	it->iov = malloc((n + extra) * sizeof(*it->iov));
	it->crcs = malloc((n + extra) * sizeof(*it->crcs));
	if (!it->iov || !it->crcs)
		return -ENOMEM;
	for (uint32_t p = 0; p < n; p++) {
		uint64_t len;
		uint32_t crc;
		proto_item_part(pi, p, &len, &crc);
		it->iov[p].iov_base = fr->data + off;
		it->iov[p].iov_len = (size_t)len;
		it->crcs[p] = crc;
		off += len;
	}
	if (trailer) {
		uint64_t tl = TR_LEN(n);
		uint64_t *lens = malloc(n * sizeof(*lens));
		if (!lens)
			return -ENOMEM;
		for (uint32_t p = 0; p < n; p++)
			lens[p] = it->iov[p].iov_len;
		it->trailer = malloc(tl);
		if (!it->trailer) {
			free(lens);
			return -ENOMEM;
		}
		value_trailer_write(it->trailer, n, pi->flags & PROTO_IF_SEALED, lens, it->crcs);
		free(lens);
		it->iov[n].iov_base = it->trailer;
		it->iov[n].iov_len = (size_t)tl;
		it->crcs[n] = kvt_crc32c(0, it->trailer, tl);
	}
	it->req.op = KVT_OP_PUT;
	it->req.flags = KVT_F_CRC;
	it->req.iov = it->iov;
	it->req.iov_count = n + extra;
	it->req.crcs = it->crcs;
	return 0;
}

/* A GET item's answer: response fields, and the value slices to send. */
struct value_get_out {
	struct proto_item pi;
	uint64_t lens1;           /* single-entry part table */
	uint32_t crcs1;
	struct value_parts pt;      /* the trailer's table (owned) */
	struct iovec *slices;     /* into the pinned view (owned array) */
	unsigned slice_count;
	uint64_t table_len;       /* bytes this item adds to the table */
	uint64_t data_len;        /* value bytes it adds to the data section */
};

/*
 * A range's bytes get a CRC computed here, so the stored parts they come
 * from are checked first against the writer's CRCs (doc/protocol.md, GET).
 * Single-part values have no trailer: the library checked their bytes at
 * put and at promotion, and its API does not return the stored CRC.
 */
static bool value_range_verified(const struct iovec *v, unsigned vc, const struct value_parts *pt,
				 uint64_t off, uint64_t len)
{
	uint64_t start = 0;

	for (uint32_t p = 0; p < pt->n; p++) {
		uint64_t end = start + pt->lens[p];
		if (end > off && start < off + len &&
		    value_view_crc(v, vc, start, pt->lens[p]) != pt->crcs[p])
			return false;
		start = end;
	}
	return true;
}

static int value_get_item(struct kvtd_server *srv, struct kvtd_item *it, uint32_t index,
			  struct value_get_out *g)
{
	const struct kvt_req *r = &it->req;
	uint64_t stored = r->length, vlen, off = 0, len;
	int64_t tl;

	memset(g, 0, sizeof(*g));
	g->pi.index = index;
	g->pi.status = it->status;
	g->table_len = 40;
	if (it->status != KVT_OK)
		return 0;
	tl = value_trailer_read(r->view, r->view_count, stored, &g->pt);
	if (tl < 0) {
		g->pi.status = (int32_t)tl;
		return 0;
	}
	vlen = stored - (uint64_t)tl;
	g->slices = malloc((r->view_count ? r->view_count : 1) * sizeof(*g->slices));
	if (!g->slices) {
		g->pi.status = -ENOMEM;
		return 0;
	}
	g->pi.value_len = vlen;
	g->pi.flags = tl ? (g->pt.flags & PROTO_IF_SEALED) : 0;
	if (it->flags & PROTO_IF_PART) {
		uint32_t np = tl ? g->pt.n : 1;
		if (it->part >= np) {
			g->pi.status = KVT_ERANGE;
			g->pi.flags = 0;
			return 0;
		}
		for (uint32_t p = 0; tl && p < it->part; p++)
			off += g->pt.lens[p];
		len = tl ? g->pt.lens[it->part] : vlen;
		g->slice_count = value_view_slice(r->view, r->view_count, off, len, g->slices);
		g->lens1 = len;
		g->crcs1 = tl ? g->pt.crcs[it->part] : value_iov_crc(g->slices, g->slice_count);
		g->pi.flags |= PROTO_IF_PART;
		g->pi.first_part = it->part;
		g->pi.off = off;
		g->pi.part_count = 1;
		g->pi.part_lens = &g->lens1;
		g->pi.part_crcs = &g->crcs1;
	} else if (it->flags & PROTO_IF_RANGE) {
		if (it->off > vlen || it->len > vlen - it->off) {
			g->pi.status = KVT_ERANGE;
			g->pi.flags = 0;
			return 0;
		}
		if (tl && !value_range_verified(r->view, r->view_count, &g->pt, it->off, it->len)) {
			/* Corruption is a miss, never other bytes. */
			KVTD_COUNT(srv, value_crc_errors, 1);
			g->pi.status = KVT_MISS;
			g->pi.flags = 0;
			g->pi.value_len = 0;
			return 0;
		}
		g->slice_count = value_view_slice(r->view, r->view_count, it->off, it->len, g->slices);
		g->lens1 = it->len;
		g->crcs1 = value_iov_crc(g->slices, g->slice_count);
		g->pi.flags |= PROTO_IF_RANGE;
		g->pi.off = it->off;
		g->pi.part_count = 1;
		g->pi.part_lens = &g->lens1;
		g->pi.part_crcs = &g->crcs1;
	} else {
		g->slice_count = value_view_slice(r->view, r->view_count, 0, vlen, g->slices);
		if (tl) {
			g->pi.part_count = g->pt.n;
			g->pi.part_lens = g->pt.lens;
			g->pi.part_crcs = g->pt.crcs;
		} else {
			g->lens1 = vlen;
			g->crcs1 = value_iov_crc(g->slices, g->slice_count);
			g->pi.part_count = 1;
			g->pi.part_lens = &g->lens1;
			g->pi.part_crcs = &g->crcs1;
		}
	}
	g->table_len += (uint64_t)PROTO_PART_ENTRY * g->pi.part_count;
	for (unsigned s = 0; s < g->slice_count; s++)
		g->data_len += g->slices[s].iov_len;
	return 0;
}

static void value_get_out_free(struct value_get_out *g)
{
	free(g->pt.lens);
	free(g->pt.crcs);
	free(g->slices);
}

/*
 * GET response: as many frames as the limits need (PROTO_F_MORE on all but
 * the last), each with the value slices of its items and the pins that
 * keep them valid until written.
 */
void kvtd_value_get_reply(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = fr->loop->srv;
	const struct proto_limits *lim = &srv->lim;
	struct value_get_out *g = calloc(fr->n, sizeof(*g));
	struct proto_item *pis = calloc(fr->n, sizeof(*pis));
	uint64_t table_budget = lim->table_max, data_budget;
	uint32_t start = 0;

	if (!g || !pis) {
		free(g);
		free(pis);
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		return;
	}
	data_budget = lim->frame_max - PROTO_HDR_LEN - lim->table_max;
	for (uint32_t i = 0; i < fr->n; i++) {
		value_get_item(srv, &fr->items[i], i, &g[i]);
		pis[i] = g[i].pi;
		if (g[i].pi.status != KVT_OK && fr->items[i].pinned) {
			/* Answered without bytes: let the block go now. */
			kvt_pin_release(srv->store, fr->items[i].req.pin);
			fr->items[i].pinned = false;
		}
	}
	while (start < fr->n) {
		uint64_t tb = 0, db = 0;
		uint32_t end = start, slices = 0, pins = 0;
		struct proto_frame rf;
		struct kvtd_out *o = NULL;
		int rc;

		/* Take items while they fit (at least one always does: an item
		 * is <= value_max and its table entry <= 40 + 16 * parts_max). */
		while (end < fr->n) {
			uint64_t d = g[end].pi.status == KVT_OK ? g[end].data_len : 0;
			if (end > start && (tb + g[end].table_len > table_budget ||
					    db + d > data_budget))
				break;
			tb += g[end].table_len;
			db += d;
			slices += g[end].pi.status == KVT_OK ? g[end].slice_count : 0;
			pins += fr->items[end].pinned;
			end++;
		}
		kvtd_resp_init(fr, &rf, 0);
		if (end < fr->n)
			rf.flags |= PROTO_F_MORE;
		rc = kvtd_resp_encode(&rf, pis + start, end - start, lim, &o);
		if (rc < 0) {
			kvtd_log(KVTD_ERROR, "cannot encode a GET response", "tag=%llu error=\"%s\"",
				 (unsigned long long)fr->f.tag, proto_strerror(rc));
			kvtd_conn_fail(fr->conn, PROTO_OP_GET, fr->f.tag, rc,
				       "server could not encode the response");
			break;
		}
		if (slices) {
			struct iovec *iov = malloc((1 + slices) * sizeof(*iov));
			uint64_t *pv = pins ? malloc(pins * sizeof(*pv)) : NULL;
			if (!iov || (pins && !pv)) {
				free(iov);
				free(pv);
				kvtd_out_free(srv, o);
				kvtd_conn_fail(fr->conn, PROTO_OP_GET, fr->f.tag, -ENOMEM,
					       "server out of memory");
				break;
			}
			iov[0] = o->iov[0];
			o->iov = iov;
			o->iov_count = 1;
			o->pins = pv;
			for (uint32_t i = start; i < end; i++) {
				if (g[i].pi.status == KVT_OK) {
					for (unsigned s = 0; s < g[i].slice_count; s++) {
						o->iov[o->iov_count++] = g[i].slices[s];
						o->bytes += g[i].slices[s].iov_len;
					}
				}
				if (fr->items[i].pinned) {
					/* The output owns the pin now. */
					o->pins[o->pin_count++] = fr->items[i].req.pin;
					fr->items[i].pinned = false;
				}
			}
		}
		kvtd_conn_queue(fr->conn, o);
		start = end;
	}
	for (uint32_t i = 0; i < fr->n; i++)
		value_get_out_free(&g[i]);
	free(g);
	free(pis);
}


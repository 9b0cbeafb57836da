/*
 * native.c - the native protocol's entry in the protocol table
 * (doc/protocol.md): frames taken out of the loop's read buffer, data
 * sections received into their own buffer or straight into DRAM
 * reservations, and what the loop asks of a protocol (a last error, BYE,
 * a partial frame, its requests' completions).
 *
 * Reading a frame:
 *
 *   rbuf [.........|hdr table|data...|next frame...]
 *        rstart -->^
 *   proto_parse_request on rbuf[rstart, rend): NEED_MORE grows rbuf up to
 *   PROTO_HDR_LEN + table_max (kvtd_conn_rbuf_room); complete: header and
 *   table are copied out to the frame, the data section goes to a buffer
 *   of its own (what rbuf already holds is copied, the rest is read()
 *   straight into it: native_read) or into DRAM reservations
 *   (kvtd_put_prepare), then the frame is dispatched (ops.c).
 *
 * Memory: the copies of headers and tables and data sections not received
 * in place are charged to --max-memory (loop.c "Limits"); input that does
 * not fit is refused with an ERROR frame (-ENOMEM) and the connection
 * closes, counted in mem_refused.
 *
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

/* What a connection may send before AUTH (doc/protocol.md section 7). */
static bool native_preauth_op(unsigned op)
{
	return op == PROTO_OP_HELLO || op == PROTO_OP_AUTH || op == PROTO_OP_PING ||
	       op == PROTO_OP_BYE;
}

/* Input that does not fit the budget: say so and close. */
static void native_mem_refuse(struct kvtd_conn *c, uint64_t tag, const char *what)
{
	char msg[200];

	KVTD_COUNT(c->loop->srv, mem_refused, 1);
	snprintf(msg, sizeof(msg),
		 "server memory limit reached (--max-memory) for the frame's %s; retry later", what);
	kvtd_conn_fail(c, PROTO_OP_ERROR, tag, -ENOMEM, msg);
}

#define NATIVE_SHARE_MSG "the tenant's frames in flight hold its share of the server " \
	"memory limit (--max-memory); retry later"

/* The header's crc field: the last 4 of its PROTO_HDR_LEN bytes (doc/protocol.md
 * section 2), over header bytes [0, NATIVE_CRC_OFF) then the table. */
#define NATIVE_CRC_OFF (PROTO_HDR_LEN - 4u)

/* A frame refused (native_refuse) is counted once it is known intact:
 * at once if its table was checked, else once its header and table
 * passed their CRC (native_drop_crc), so that one whose CRC fails is
 * counted once, in errors.crc, not in errors.count (or mem_refused) too. */
static void native_refused_count(struct kvtd_conn *c)
{
	if (c->rx_drop_status == -ENOMEM)
		KVTD_COUNT(c->loop->srv, mem_refused, 1);
	else
		KVTD_COUNT(c->loop->srv, errors[kvtd_err_of(c->rx_drop_status)], 1);
}

/* A refused frame's bytes all passed: its answer. */
static void native_refused_answer(struct kvtd_conn *c)
{
	int status = c->rx_drop_status;

	kvtd_conn_send(c, c->rx_drop_op, c->rx_drop_tag, status,
		       status == PROTO_ECOUNT ? KVTD_FRAME_ITEMS_MSG : NATIVE_SHARE_MSG);
}

/*
 * Bytes [c->rx_got, + n) of a frame refused from its header are being
 * dropped: its header (but the crc field) and table go into the CRC the
 * header names.  Once they all passed, a mismatch fails the connection
 * (PROTO_ECRC, as for a frame taken whole: the header that said how many
 * bytes to drop cannot be trusted, and what follows would be read out of
 * step) and false; else true.
 */
static bool native_drop_crc(struct kvtd_conn *c, const uint8_t *p, size_t n)
{
	uint64_t pos = c->rx_got;

	while (n && pos < c->rx_crc_end) {
		uint64_t end = pos < NATIVE_CRC_OFF ? NATIVE_CRC_OFF
			       : pos < PROTO_HDR_LEN ? PROTO_HDR_LEN : c->rx_crc_end;
		size_t k = end - pos < n ? (size_t)(end - pos) : n;
		if (pos < NATIVE_CRC_OFF || pos >= PROTO_HDR_LEN)
			c->rx_crc = kvt_crc32c(c->rx_crc, p, k);
		pos += k;
		p += k;
		n -= k;
	}
	if (!c->rx_crc_end || pos < c->rx_crc_end)
		return true;
	c->rx_crc_end = 0;
	if (c->rx_crc == c->rx_crc_want) {
		native_refused_count(c);
		return true;
	}
	c->rx_drop = 0;
	c->frame_start_ns = 0;
	kvtd_conn_fail(c, PROTO_OP_ERROR, c->rx_drop_tag, PROTO_ECRC,
		       "bad frame: header and table fail their CRC32C; closing the connection");
	return false;
}

/*
 * A frame refused before it is taken -- more than KVTD_FRAME_ITEMS_MAX
 * items (PROTO_ECOUNT), or past its tenant's input share (-ENOMEM,
 * kvtd_frame_charge -EDQUOT) -- of which rest bytes are still ahead of
 * rstart (its data section once its header and table are out of rbuf;
 * all of it when refused from its header, hdr): nothing of it is kept,
 * those bytes are read and dropped (rx_drop, native_read), then it is
 * answered; the connection is kept.  Refused from its header, its
 * header and table are checked against their CRC as they pass
 * (native_drop_crc): a corrupt one closes the connection.  false: its
 * bytes are still to come, or the connection failed.
 */
static bool native_refuse(struct kvtd_conn *c, const struct proto_frame *f, int status,
			  uint64_t rest, bool hdr)
{
	size_t take = c->rend - c->rstart;

	if (take > rest)
		take = (size_t)rest;
	c->rx_drop_op = f->op;
	c->rx_drop_tag = f->tag;
	c->rx_drop_status = status;
	c->rx_got = c->rx_mark = 0;
	c->rx_crc_end = 0;
	if (!hdr) {
		native_refused_count(c);
	} else {
		/* rest starts with the header: f->need is it and the table */
		const uint8_t *h = c->rbuf + c->rstart;
		c->rx_crc_end = f->need;
		c->rx_crc = 0;
		c->rx_crc_want = (uint32_t)h[NATIVE_CRC_OFF] |
				 (uint32_t)h[NATIVE_CRC_OFF + 1] << 8 |
				 (uint32_t)h[NATIVE_CRC_OFF + 2] << 16 |
				 (uint32_t)h[NATIVE_CRC_OFF + 3] << 24;
		if (!native_drop_crc(c, h, take))
			return false;
		c->rx_got = c->rx_mark = take;
	}
	c->rstart += take;
	c->rx_drop = rest - take;
	if (c->rx_drop)
		return false;
	c->frame_start_ns = c->rend > c->rstart ? c->loop->now_ns : 0;
	native_refused_answer(c);
	return true;
}

/* Charge n more bytes of f to its frame fr (kvtd_frame_charge): 0, or fr
 * is freed and 1: refused past its tenant's share, answered (parse on);
 * -1: parse no more (its data is being dropped, or over the budget: the
 * connection closes). */
static int native_charge(struct kvtd_conn *c, struct kvtd_frame *fr, const struct proto_frame *f,
			 uint64_t n, const char *what)
{
	int rc = kvtd_frame_charge(fr, n, false);

	if (rc == 0)
		return 0;
	kvtd_frame_free(fr);
	if (rc == -EDQUOT)
		return native_refuse(c, f, -ENOMEM, f->data_len, false) ? 1 : -1;
	native_mem_refuse(c, f->tag, what);
	return -1;
}

/* Per-tenant counters of a native frame (its bytes in; bytes out are
 * counted as they are written).  Frames before AUTH count for nobody. */
static void native_tenant_count(struct kvtd_conn *c, uint64_t bytes)
{
	struct kvtd_tstat *t = kvtd_tstat_of(c);

	if (!t)
		return;
	atomic_fetch_add_explicit(&t->requests, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->bytes_in, bytes, memory_order_relaxed);
}

/* Take every complete frame out of rbuf. */
static void native_parse(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;

	/* read_paused: past --conn-output or the budget (loop.c flow), what
	 * is buffered waits too; the loop parses it once reads resume. */
	while (!c->dead && !c->no_more_input && !c->rx && !c->rx_drop && !c->read_paused) {
		size_t avail = c->rend - c->rstart;
		struct proto_frame f;
		struct kvtd_frame *fr;
		uint8_t *hdr;
		bool pre;
		int rc;

		if (avail == 0) {
			c->frame_start_ns = 0;
			kvtd_conn_rbuf_drained(c); /* a big table passed: freed */
			return;
		}
		/* Past --conn-inflight, or while its tenant's frames in flight
		 * hold their share of the budget (KVTD_IN_TENANT_MAX): the next
		 * frame waits for this connection's own to be answered; behind
		 * a DELETE or CLEAR still in the store, for it to be applied
		 * (ops.c "One connection's writes in order"). */
		if (c->inflight >= srv->cfg.conn_inflight || kvtd_conn_in_share_over(c) ||
		    c->order_hold) {
			kvtd_conn_flow(c);
			return;
		}
		if (!c->frame_start_ns)
			c->frame_start_ns = c->loop->now_ns;
		rc = proto_parse_request(c->rbuf + c->rstart, avail, &srv->lim, &f);
		pre = c->state != KVTD_CS_READY;
		if (pre && (rc == 0 || (rc == PROTO_NEED_MORE && avail >= PROTO_HDR_LEN)) &&
		    !native_preauth_op(f.op)) {
			/* Nothing but HELLO, AUTH, PING and BYE is read before
			 * AUTH: the rest of the frame is not even buffered. */
			kvtd_conn_fail(c, f.op, f.tag, PROTO_ENOAUTH,
				       "HELLO and AUTH first; closing the connection");
			return;
		}
		if (!pre && (rc == 0 || (rc == PROTO_NEED_MORE && avail >= PROTO_HDR_LEN)) &&
		    f.op != PROTO_OP_HELLO && f.version != c->version) {
			/* Every frame after HELLO carries the version it chose
			 * (doc/protocol.md section 5): another is refused from its
			 * header, as the parser's own errors are, before a byte of
			 * its table or data is buffered. */
			kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, KVT_EVERSION,
				       "frame version differs from the one HELLO chose; "
				       "closing the connection");
			return;
		}
		if (rc == PROTO_NEED_MORE && !pre && avail >= PROTO_HDR_LEN) {
			/* The header says what is coming: more items than a
			 * frame may name here, or a big table past its tenant's
			 * input share, is refused before its table is buffered
			 * (a table still arriving is held to the share too). */
			int why = 0;
			if (f.item_count > KVTD_FRAME_ITEMS_MAX)
				why = PROTO_ECOUNT;
			else if (f.need > KVTD_RBUF_KEEP &&
				 !kvtd_in_hold(c, kvtd_tstat_of(c), f.need)) {
				if (c->inflight > 0) {
					/* its own frames' answers free the share;
					 * until then c is not read (tbl_want), or
					 * the table would be buffered whole
					 * outside the share */
					c->tbl_want = f.need;
					kvtd_conn_flow(c);
					return;
				}
				why = -ENOMEM;
			}
			if (why) {
				kvtd_in_release(c);
				if (native_refuse(c, &f, why, f.need + f.data_len, true))
					continue;
				return;
			}
		}
		if (rc == PROTO_NEED_MORE) {
			rc = kvtd_conn_rbuf_room(c, (size_t)f.need);
			if (rc == -EMSGSIZE)
				kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, PROTO_ENOAUTH,
					       "frame too large before AUTH; closing the connection");
			else if (rc == -ENOBUFS)
				native_mem_refuse(c, f.tag, "table");
			else if (rc < 0)
				kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, -ENOMEM,
					       "server out of memory for the frame's table");
			return;
		}
		if (rc < 0) {
			char msg[160];
			bool hdr_ok = avail >= PROTO_HDR_LEN && rc != PROTO_EMAGIC;
			snprintf(msg, sizeof(msg), "bad frame: %s", proto_strerror(rc));
			kvtd_conn_fail(c, PROTO_OP_ERROR, hdr_ok ? f.tag : 0, rc, msg);
			return;
		}
		/* Its share of this iteration taken: the rest after the
		 * other connections' events (kvtd_conn_defer); this frame is
		 * parsed again then.  Only whole frames count: 64 and the
		 * start of a 65th in one read were cut, nothing whole left
		 * (test_hostile parse_partial). */
		if (!kvtd_conn_parse_budget(c, f.item_count)) {
			kvtd_conn_defer(c);
			return;
		}
		/* More items than a frame may name here (KVTD_FRAME_ITEMS_MAX):
		 * refused from its parsed header, the connection kept. */
		if (f.item_count > KVTD_FRAME_ITEMS_MAX) {
			c->rstart += f.hdr_len;
			if (native_refuse(c, &f, PROTO_ECOUNT, f.data_len, false))
				continue;
			return;
		}
		hdr = malloc(f.hdr_len);
		if (!hdr) {
			kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, -ENOMEM, "server out of memory");
			return;
		}
		memcpy(hdr, c->rbuf + c->rstart, f.hdr_len);
		c->rstart += f.hdr_len;
		fr = kvtd_frame_new(c, hdr, f.hdr_len);
		if (!fr) {
			kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, -ENOMEM, "server out of memory");
			return;
		}
		/* Before AUTH a frame is at most NATIVE_PREAUTH_BUF bytes and
		 * has no data: bounded per connection, outside the budget, so
		 * unauthenticated clients never take it from the others. */
		kvtd_in_release(c); /* the frame's own charge holds it now */
		rc = pre ? 0 : native_charge(c, fr, &f, f.hdr_len, "table");
		if (rc > 0)
			continue;
		if (rc < 0)
			return;
		if (f.data_len) {
			size_t take = c->rend - c->rstart;
			if (take > f.data_len)
				take = (size_t)f.data_len;
			c->put_stream = false;
			if (kvtd_put_prepare(fr)) {
				/* Values go straight into their DRAM reservations. */
				kvtd_value_put_feed(fr, c->rbuf + c->rstart, take);
				c->put_stream = take < f.data_len;
			} else {
				uint8_t *data = NULL;
				rc = native_charge(c, fr, &f, f.data_len, "data section");
				if (rc > 0)
					continue;
				if (rc < 0)
					return;
				data = malloc(f.data_len);
				if (!data) {
					kvtd_frame_free(fr);
					kvtd_conn_fail(c, PROTO_OP_ERROR, f.tag, -ENOMEM,
						       "server out of memory for the frame's data");
					return;
				}
				kvtd_frame_set_data(fr, data);
				memcpy(data, c->rbuf + c->rstart, take);
			}
			c->rstart += take;
			if (take < f.data_len) {
				/* The rest is read straight into the buffer. */
				c->rx = fr;
				c->rx_got = take;
				c->rx_mark = take;
				return;
			}
		}
		c->put_stream = false;
		c->frame_start_ns = c->rend > c->rstart ? c->loop->now_ns : 0;
		native_tenant_count(c, f.hdr_len + f.data_len);
		kvtd_frame_dispatch(fr);
	}
}

/* Where a refused frame's data section is read, to be dropped. */
static _Thread_local uint8_t native_scratch[64u << 10];

/* The rest of a refused frame's data section (native_refuse): read and
 * dropped; once all of it came, the frame is answered. */
static ssize_t native_drop_read(struct kvtd_conn *c, size_t *asked)
{
	ssize_t r;

	*asked = c->rx_drop < sizeof(native_scratch) ? (size_t)c->rx_drop : sizeof(native_scratch);
	r = kvtd_conn_read(c, native_scratch, *asked);
	if (r <= 0)
		return r;
	if (c->rx_crc_end && !native_drop_crc(c, native_scratch, (size_t)r)) {
		*asked = SIZE_MAX; /* failed: its ERROR frame goes out */
		return r;
	}
	c->rx_drop -= (uint64_t)r;
	c->rx_got += (uint64_t)r;
	if (c->rx_got - c->rx_mark >= KVTD_SLOW_PROGRESS) {
		c->rx_mark = c->rx_got;
		c->frame_start_ns = c->loop->now_ns;
	}
	if (c->rx_drop == 0) {
		c->frame_start_ns = 0;
		native_refused_answer(c);
		*asked = SIZE_MAX; /* answer first, as for a frame taken */
	}
	return r;
}

/* The socket is readable: a data section being received goes straight to
 * its buffer (or DRAM, or is dropped); otherwise the loop's rbuf, a header
 * at a time after a streamed PUT (put_stream). */
static ssize_t native_read(struct kvtd_conn *c, size_t *asked)
{
	uint64_t len, want;
	ssize_t r;

	if (c->rx_drop)
		return native_drop_read(c, asked);
	if (!c->rx)
		return kvtd_conn_read_rbuf(c, c->put_stream ? KVTD_HDR_STEP : SIZE_MAX, asked);
	len = kvtd_frame_data_len(c->rx);
	want = len - c->rx_got;
	if (want > (1u << 30))
		want = 1u << 30;
	if (c->rx->in_place)
		r = kvtd_value_put_recv(c->rx, c->fd);
	else
		r = kvtd_conn_read(c, kvtd_frame_data(c->rx) + c->rx_got, *asked = (size_t)want);
	if (r > 0) {
		c->rx_got += (uint64_t)r;
		if (c->rx_got - c->rx_mark >= KVTD_SLOW_PROGRESS) {
			c->rx_mark = c->rx_got;
			c->frame_start_ns = c->loop->now_ns;
		}
		if (c->rx_got == len) {
			struct kvtd_frame *fr = c->rx;
			c->rx = NULL;
			c->frame_start_ns = 0;
			native_tenant_count(c, len);
			kvtd_frame_dispatch(fr);
			/* A client that waits for this answer has sent nothing
			 * more: answer first (settle flushes), rather than read
			 * for a next frame that is not there.  Epoll calls again
			 * if it is. */
			*asked = SIZE_MAX;
		}
	}
	return r;
}

static bool native_partial(const struct kvtd_conn *c)
{
	return c->rx != NULL || c->rx_drop;
}

/* No more input will be read: a frame whose data never all came is
 * dropped (nothing of it was submitted). */
static void native_drop_input(struct kvtd_conn *c)
{
	kvtd_in_release(c);
	c->rx_drop = 0;
	c->rx_crc_end = 0;
	if (c->rx) {
		struct kvtd_frame *fr = c->rx;
		c->rx = NULL;
		kvtd_frame_free(fr);
	}
	/* A GET waiting for the answers to drain goes on while they can
	 * (stopping); once closed, it ends. */
	if (c->dead)
		kvtd_get_abandon(c);
}

/* Pinned answers were written: a GET waiting for room goes on. */
static void native_written(struct kvtd_conn *c)
{
	kvtd_get_resume(c);
}

/* Nothing in flight: a BYE read earlier is answered now. */
static void native_idle(struct kvtd_conn *c)
{
	if (c->bye_pending) {
		c->bye_pending = false;
		kvtd_conn_send(c, PROTO_OP_BYE, c->bye_tag, 0, NULL);
	}
}

static void native_fail(struct kvtd_conn *c, int status, const char *msg)
{
	kvtd_conn_fail(c, PROTO_OP_ERROR, 0, status, msg);
}

static void native_free(struct kvtd_conn *c)
{
	kvtd_in_release(c);
	kvtd_ns_cache_free(c);
}

/* HELLO and AUTH fit in a few hundred bytes (a tenant name of at most
 * PROTO_TENANT_MAX, a nonce and a proof). */
#define NATIVE_PREAUTH_BUF 4096u

const struct kvtd_proto kvtd_native_proto = {
	.name = "native",
	.preauth_buf = NATIVE_PREAUTH_BUF,
	.read = native_read,
	.parse = native_parse,
	.partial = native_partial,
	.drop_input = native_drop_input,
	.idle = native_idle,
	.written = native_written,
	.fail = native_fail,
	.req_done = kvtd_req_done,
	.free = native_free,
};

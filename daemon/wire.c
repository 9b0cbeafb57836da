/*
 * wire.c - the native protocol's output: response frames encoded
 * (lib/proto.h) onto a connection's output queue, the ERROR frame that
 * closes a connection, and BYE.
 *
 * Below ops.c, value.c and native.c (which all answer frames) and above
 * loop.c (whose output queue it fills): the native protocol's half that
 * every other native file calls, so that no two of them call each other
 * (doc/kvtierd.md "Files").
 *
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

/* Queue a frame without items: an error, or a BYE response. */
void kvtd_conn_send(struct kvtd_conn *c, uint16_t op, uint64_t tag, int status,
			   const char *msg)
{
	struct kvtd_server *srv = c->loop->srv;
	struct proto_frame rf;
	struct kvtd_out *o;
	uint64_t need = 0;
	int64_t len;

	memset(&rf, 0, sizeof(rf));
	rf.version = c->version ? c->version : PROTO_VERSION_HELLO;
	rf.op = op;
	if (op == PROTO_OP_HELLO)
		rf.version = PROTO_VERSION_HELLO;
	rf.flags = PROTO_F_RESPONSE;
	rf.tag = tag;
	rf.status = status;
	rf.msg = status < 0 ? msg : NULL;
	rf.msg_len = rf.msg ? (uint32_t)strlen(msg) : 0;
	len = proto_encode(&rf, NULL, 0, NULL, 0, &srv->lim, &need);
	o = calloc(1, sizeof(*o));
	if (len != KVT_EBUFSMALL || !o || !(o->hdr = malloc(need)) ||
	    proto_encode(&rf, NULL, 0, o->hdr, need, &srv->lim, NULL) < 0) {
		if (o)
			free(o->hdr);
		free(o);
		kvtd_conn_touch(c);
		return;
	}
	o->iov = o->iov_small;
	o->iov[0].iov_base = o->hdr;
	o->iov[0].iov_len = need;
	o->iov_count = 1;
	o->bytes = need;
	kvtd_conn_queue(c, o);
}

void kvtd_conn_bye(struct kvtd_conn *c, uint64_t tag)
{
	/* The BYE frame itself is still counted in inflight: its answer goes
	 * out when kvtd_conn_frame_done drops the count to zero. */
	c->no_more_input = true;
	c->close_when_flushed = true;
	c->bye_pending = true;
	c->bye_tag = tag;
	kvtd_conn_events(c);
}

void kvtd_conn_fail(struct kvtd_conn *c, uint16_t op, uint64_t tag, int status, const char *msg)
{
	struct kvtd_server *srv = c->loop->srv;

	KVTD_COUNT(srv, errors[kvtd_err_of(status)], 1);
	kvtd_conn_log(c, KVTD_INFO, "closing connection after a protocol error", msg);
	c->no_more_input = true;
	c->close_when_flushed = true;
	c->bye_pending = false;
	if (c->dead)
		return;
	kvtd_conn_events(c);
	kvtd_conn_send(c, op, tag, status < 0 ? status : -EPROTO, msg);
}


/* Encode one response frame into a new output entry (header + table only;
 * the caller adds value iovecs). */
int kvtd_resp_encode(const struct proto_frame *rf, const struct proto_item *items, uint32_t n,
		      const struct proto_limits *lim, struct kvtd_out **out)
{
	struct kvtd_out *o;
	uint64_t need = 0;
	int64_t len;

	len = proto_encode(rf, items, n, NULL, 0, lim, &need);
	if (len != KVT_EBUFSMALL)
		return len < 0 ? (int)len : KVT_EBADLEN;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->hdr = malloc(need);
	if (!o->hdr) {
		free(o);
		return -ENOMEM;
	}
	len = proto_encode(rf, items, n, o->hdr, need, lim, NULL);
	if (len < 0) {
		free(o->hdr);
		free(o);
		return (int)len;
	}
	o->iov = o->iov_small;
	o->iov[0].iov_base = o->hdr;
	o->iov[0].iov_len = (size_t)len;
	o->iov_count = 1;
	o->bytes = (uint64_t)len;
	*out = o;
	return 0;
}

void kvtd_resp_init(const struct kvtd_frame *fr, struct proto_frame *rf, int32_t status)
{
	memset(rf, 0, sizeof(*rf));
	rf->version = fr->conn->version ? fr->conn->version : PROTO_VERSION_HELLO;
	if (fr->f.op == PROTO_OP_HELLO)
		rf->version = PROTO_VERSION_HELLO;
	rf->op = fr->f.op;
	rf->flags = PROTO_F_RESPONSE;
	rf->tag = fr->f.tag;
	rf->status = status;
}

/* Queue a response with no items or values; a failure to encode becomes
 * a failed response with that status. */
void kvtd_reply(struct kvtd_frame *fr, struct proto_frame *rf, const struct proto_item *items,
		      uint32_t n)
{
	struct kvtd_out *o = NULL;
	int rc = kvtd_resp_encode(rf, items, n, &fr->loop->srv->lim, &o);

	if (rc < 0) {
		struct proto_frame ef;
		char msg[96];
		kvtd_log(KVTD_ERROR, "cannot encode a response", "op=%s tag=%llu error=\"%s\"",
			 proto_op_name(rf->op), (unsigned long long)rf->tag, proto_strerror(rc));
		kvtd_resp_init(fr, &ef, rc);
		snprintf(msg, sizeof(msg), "server could not encode the response: %s",
			 proto_strerror(rc));
		ef.msg = msg;
		ef.msg_len = (uint32_t)strlen(msg);
		if (kvtd_resp_encode(&ef, NULL, 0, &fr->loop->srv->lim, &o) < 0)
			return;
	}
	kvtd_conn_queue(fr->conn, o);
}

/* The whole request failed: a response with its op and a negative status. */
void kvtd_reply_error(struct kvtd_frame *fr, int status, const char *msg)
{
	struct proto_frame rf;

	kvtd_resp_init(fr, &rf, status);
	if (msg) {
		rf.msg = msg;
		rf.msg_len = (uint32_t)strlen(msg);
		if (rf.msg_len > PROTO_MSG_MAX)
			rf.msg_len = PROTO_MSG_MAX;
	}
	KVTD_COUNT(fr->loop->srv, errors[kvtd_err_of(status)], 1);
	kvtd_reply(fr, &rf, NULL, 0);
}

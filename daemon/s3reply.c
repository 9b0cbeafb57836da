/*
 * s3reply.c - the S3 listener's answers and the order of a connection's
 * requests (s3d.h, doc/s3.md).
 *
 * An answer is text built in rq->text (S3 XML, or nothing), then the
 * status line and headers put in front of it (s3d_answer), plus segments
 * of pinned DRAM views (GET bodies, no copy) whose pins the output entry
 * releases once written.  Requests of a connection may complete in any
 * order (a DRAM hit before an SSD read) but are answered in the order
 * they came, as HTTP/1.1 pipelining requires: only a finished request at
 * the head of the connection's list is queued (s3d_flush_done).
 *
 * Threads: the connection's loop thread; no locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdarg.h>

#include <openssl/crypto.h>

#include "s3d.h"

/* ------------------------------------------------------------------------
 * Answers
 */

void s3d_text(struct s3d_req *rq, const void *p, size_t len)
{
	if (rq->oom || len == 0)
		return;
	if (rq->tlen + len > rq->tcap) {
		size_t nc = rq->tcap ? rq->tcap : 1024;
		while (nc < rq->tlen + len)
			nc *= 2;
		uint8_t *nt = realloc(rq->text, nc);
		if (!nt) {
			rq->oom = true;
			return;
		}
		rq->text = nt;
		rq->tcap = nc;
	}
	memcpy(rq->text + rq->tlen, p, len);
	rq->tlen += len;
}

void s3d_printf(struct s3d_req *rq, const char *fmt, ...)
{
	char b[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(b)) {
		s3d_text(rq, b, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		rq->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s3d_text(rq, big, (size_t)n);
	free(big);
}

/* XML-escape s[0, n) into the answer. */
void s3d_xml_str(struct s3d_req *rq, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		const char *e = NULL;
		switch (s[i]) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&quot;"; break;
		case '\'': e = "&apos;"; break;
		default:
			if ((unsigned char)s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' &&
			    s[i] != '\r')
				e = "&#xFFFD;";
		}
		if (!e)
			continue;
		s3d_text(rq, s + run, i - run);
		s3d_text(rq, e, strlen(e));
		run = i + 1;
	}
	s3d_text(rq, s + run, n - run);
}

void s3d_keep_pin(struct s3d_req *rq, struct s3d_item *it, uint64_t len)
{
	struct kvtd_conn *c = rq->conn;

	if (rq->npin == rq->pincap) {
		unsigned nc = rq->pincap ? rq->pincap * 2 : 4;
		uint64_t *np = realloc(rq->pins, nc * sizeof(*np));
		if (!np) {
			rq->oom = true;
			return;
		}
		rq->pins = np;
		rq->pincap = nc;
	}
	rq->pins[rq->npin++] = it->req.pin;
	it->pinned = false;
	/* counted from here, whether the answer is queued now or waits for
	 * earlier ones (s3d_pin_unhold gives it back), in the tenant that
	 * signed the GET: the connection's (its latest signer) counted one
	 * tenant's pins against another's cap when two signed requests on
	 * it (test_hostile_http s3_pins_signers) */
	if (len) {
		rq->pin_tstat = rq->in_tstat;
		rq->pin_held += len;
		s3d_of(c)->pin_held += len;
		if (rq->pin_tstat)
			atomic_fetch_add_explicit(&rq->pin_tstat->pinned, len,
						  memory_order_relaxed);
	}
	if (it->copy_charged) {
		rq->pins_copy += it->copy_charged;
		rq->pins_copy_tstat = it->copy_tstat; /* one signer a request */
		it->copy_charged = 0;
	}
}

void s3d_copy_uncharge(struct kvtd_server *srv, struct kvtd_conn *c, struct kvtd_tstat *t,
		       uint64_t len)
{
	if (!len)
		return;
	kvtd_mem_uncharge(srv, len);
	c->copy_bytes -= len;
	if (t)
		atomic_fetch_sub_explicit(&t->copies, len, memory_order_relaxed);
}

/* n bytes of pins counted against rq's connection and tenant t given back
 * (a GET's answer held, s3d_keep_pin). */
static void s3d_pin_give(struct s3d_req *rq, struct kvtd_tstat *t, uint64_t n)
{
	struct s3d_conn *sc = s3d_of(rq->conn);

	if (sc)
		sc->pin_held -= n;
	if (t)
		atomic_fetch_sub_explicit(&t->pinned, n, memory_order_relaxed);
}

/*
 * Pins of requests in progress.  A CompleteMultipartUpload pins its parts,
 * a CopyObject or an UploadPartCopy its source, from the probe until the
 * object is assembled (s3ops.c s3d_assemble): across work turns (16 MiB
 * of copying a loop iteration) and write-down parks.  They count in the
 * connection's pin_held and the signer's pinned as a GET's answer does,
 * but each value once a connection (sc->pin_set) and once a tenant
 * (t->pin_set, under t->pin_lock: its connections run on any loop),
 * however many of its requests pin it -- the idea of a native answer's
 * pins (value.c "Pinned values held"), on the same table: copies of one
 * source share its pin and its DRAM.  Counted a request each, as a
 * Complete's parts were, test_hostile_http s3_copy_loop's 256 copies of
 * one 32 MiB source (--dram 256M: 32 MiB a connection) were cut to 2
 * answered.  Copy sources were outside the caps before: one tenant's
 * copies of many distinct sources pinned as many objects at once
 * (s3_copy_pins).  Requests whose values not yet counted would take the
 * connection's pins past KVTD_PIN_CONN_MAX or the tenant's past
 * KVTD_PIN_TENANT_MAX are refused 503 SlowDown, nothing held -- unless
 * that connection and that tenant pin nothing, so that one of any size
 * goes ahead; one whose values are all counted already goes ahead (it
 * pins no more DRAM).
 */

/* An item whose pin is to be counted. */
static bool s3d_pin_new(const struct s3d_item *it)
{
	return it->pinned && !it->pin_charged && it->req.length;
}

/* Undo the holds of the new items of items[0, n) in set. */
static void s3d_pins_undo(struct kvtd_pinset *set, struct s3d_item *items, uint32_t n)
{
	uint64_t len;

	for (uint32_t i = 0; i < n; i++)
		if (s3d_pin_new(&items[i]))
			(void)kvtd_pinset_drop(set, kvtd_req_pin_at(&items[i].req), &len);
}

/* Hold the new items' values in set: the bytes of those it did not
 * hold, or -ENOMEM (*done: the items tried, holds of [0, *done) made).
 * A value is counted by its first holder's length, kept in its slot and
 * given back by its last (s3d_pins_put), whatever theirs: equal today
 * (every such pin holds a whole value), not if a ranged view shared one. */
static int64_t s3d_pins_hold(struct kvtd_pinset *set, struct s3d_item *items, uint32_t n,
			     uint32_t *done)
{
	uint64_t add = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		int r;
		if (!s3d_pin_new(&items[i]))
			continue;
		r = kvtd_pinset_hold(set, kvtd_req_pin_at(&items[i].req), items[i].req.length);
		if (r < 0)
			break;
		add += r ? items[i].req.length : 0;
	}
	*done = i;
	return i < n ? -ENOMEM : (int64_t)add;
}

bool s3d_pins_take(struct s3d_req *rq, struct s3d_item *items, uint32_t n, const char **why)
{
	struct kvtd_conn *c = rq->conn;
	struct kvtd_server *srv = c->loop->srv;
	struct s3d_conn *sc = s3d_of(c);
	struct kvtd_tstat *t = rq->in_tstat;
	uint64_t mine = c->pin_bytes + sc->pin_held;
	uint32_t hc, ht;
	int64_t add_c, add_t = 0;

	*why = NULL;
	add_c = s3d_pins_hold(&sc->pin_set, items, n, &hc);
	if (add_c < 0)
		*why = "server out of memory";
	else if (add_c && mine && mine + (uint64_t)add_c > KVTD_PIN_CONN_MAX(srv))
		*why = "The connection's requests in progress pin its share of kvtierd's "
		       "DRAM tier; retry later.";
	if (!*why && t) {
		pthread_mutex_lock(&t->pin_lock);
		add_t = s3d_pins_hold(&t->pin_set, items, n, &ht);
		uint64_t tp = atomic_load_explicit(&t->pinned, memory_order_relaxed);
		if (add_t < 0)
			*why = "server out of memory";
		else if (add_t && tp && tp + (uint64_t)add_t > KVTD_PIN_TENANT_MAX(srv))
			*why = "The tenant's requests in progress pin its share of kvtierd's "
			       "DRAM tier; retry later.";
		if (*why)
			s3d_pins_undo(&t->pin_set, items, ht);
		else
			atomic_fetch_add_explicit(&t->pinned, (uint64_t)add_t,
						  memory_order_relaxed);
		pthread_mutex_unlock(&t->pin_lock);
	}
	if (*why) {
		s3d_pins_undo(&sc->pin_set, items, hc);
		KVTD_COUNT(srv, pin_deferred, 1);
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct s3d_item *it = &items[i];
		if (!s3d_pin_new(it))
			continue;
		it->pin_charged = it->req.length;
		it->pin_at = kvtd_req_pin_at(&it->req);
		it->pin_tstat = t;
	}
	sc->pin_held += (uint64_t)add_c;
	return true;
}

/* An item's hold of its value given back: the value uncounted by the
 * last of them. */
static void s3d_pins_put(struct s3d_req *rq, struct s3d_item *it)
{
	struct s3d_conn *sc = s3d_of(rq->conn);
	struct kvtd_tstat *t = it->pin_tstat;
	uint64_t len = it->pin_charged; /* (pin_at 0: not kept in the sets) */

	if (sc && kvtd_pinset_drop(&sc->pin_set, it->pin_at, &len))
		sc->pin_held -= len;
	if (t) {
		len = it->pin_charged;
		pthread_mutex_lock(&t->pin_lock);
		if (kvtd_pinset_drop(&t->pin_set, it->pin_at, &len))
			atomic_fetch_sub_explicit(&t->pinned, len, memory_order_relaxed);
		pthread_mutex_unlock(&t->pin_lock);
	}
	it->pin_charged = 0;
	it->pin_at = 0;
	it->pin_tstat = NULL;
}

void s3d_item_unpin(struct kvtd_server *srv, struct s3d_req *rq, struct s3d_item *it)
{
	if (it->pinned)
		kvt_pin_release(srv->store, it->req.pin);
	it->pinned = false;
	if (it->pin_charged) /* a Complete's part, a Copy's source */
		s3d_pins_put(rq, it);
	s3d_copy_uncharge(srv, rq->conn, it->copy_tstat, it->copy_charged);
	it->copy_charged = 0;
}

/* What s3d_keep_pin counted of rq's pins is given back, once: they are
 * released, or the output entry counts them now (kvtd_conn_queue). */
static void s3d_pin_unhold(struct s3d_req *rq)
{
	if (!rq->pin_held)
		return;
	s3d_pin_give(rq, rq->pin_tstat, rq->pin_held);
	rq->pin_held = 0;
	rq->pin_tstat = NULL;
}

void s3d_pins_release(struct kvtd_server *srv, struct s3d_req *rq)
{
	for (unsigned i = 0; i < rq->npin; i++)
		kvt_pin_release(srv->store, rq->pins[i]);
	rq->npin = 0;
	s3d_pin_unhold(rq);
	s3d_copy_uncharge(srv, rq->conn, rq->pins_copy_tstat, rq->pins_copy);
	rq->pins_copy = 0;
}

void s3d_seg_bytes(struct s3d_req *rq, const void *p, size_t len)
{
	if (rq->oom || len == 0)
		return;
	if (rq->nseg == rq->segcap) {
		unsigned nc = rq->segcap ? rq->segcap * 2 : 8;
		struct s3d_seg *ns = realloc(rq->segs, nc * sizeof(*ns));
		if (!ns) {
			rq->oom = true;
			return;
		}
		rq->segs = ns;
		rq->segcap = nc;
	}
	rq->segs[rq->nseg++] = (struct s3d_seg){ p, 0, len };
}

static const char *s3d_reason(int st)
{
	switch (st) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

/*
 * The answer: the status line and headers are built into a head (with
 * extra headers, CRLF-terminated lines), followed by body text already in
 * rq->text (body_text bytes) and the segments (pinned bytes).  HEAD
 * answers give content_len without a body.
 */
void s3d_answer(struct s3d_req *rq, int status, const char *extra, uint64_t content_len,
		       bool no_body)
{
	struct kvtd_conn *c = rq->conn;
	char head[2048];
	int hl;

	if (!rq->keep_alive || rq->close_after)
		rq->close_after = true;
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 %d %s\r\nServer: kvtierd\r\nx-amz-request-id: %016" PRIx64
		      "\r\n%sContent-Length: %" PRIu64 "\r\n%s\r\n",
		      status, s3d_reason(status), rq->id, extra ? extra : "", content_len,
		      rq->close_after ? "Connection: close\r\n" : "");
	if (hl < 0 || (size_t)hl >= sizeof(head)) {
		rq->oom = true;
		return;
	}
	/* The head goes in front of the text: rebuild text = head + text. */
	size_t cap = (size_t)hl + rq->tlen + 1;
	uint8_t *nt = malloc(cap);
	if (!nt) {
		rq->oom = true;
		return;
	}
	memcpy(nt, head, (size_t)hl);
	if (rq->tlen && !no_body)
		memcpy(nt + hl, rq->text, rq->tlen);
	free(rq->text);
	rq->text = nt;
	rq->tlen = (size_t)hl + (no_body ? 0 : rq->tlen);
	rq->tcap = cap;
	(void)c;
}

void s3d_error(struct s3d_req *rq, int status, const char *code, const char *msg)
{
	char extra[64] = "Content-Type: application/xml\r\n";
	bool head = rq->h.method_len == 4 && memcmp(rq->h.method, "HEAD", 4) == 0;

	rq->tlen = 0;
	rq->nseg = 0;
	s3d_pins_release(rq->conn->loop->srv, rq);
	s3d_printf(rq, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>",
		   code);
	s3d_xml_str(rq, msg, strlen(msg));
	s3d_text(rq, "</Message>", 10);
	if (rq->bucket[0]) {
		s3d_text(rq, "<BucketName>", 12);
		s3d_xml_str(rq, rq->bucket, strlen(rq->bucket));
		s3d_text(rq, "</BucketName>", 13);
	}
	if (rq->key) {
		s3d_text(rq, "<Key>", 5);
		s3d_xml_str(rq, rq->key, rq->key_len);
		s3d_text(rq, "</Key>", 6);
	}
	s3d_printf(rq, "<RequestId>%016" PRIx64 "</RequestId></Error>\n", rq->id);
	s3d_answer(rq, status, extra, head ? 0 : rq->tlen, head);
}

/* XML body answer. */
void s3d_xml_answer(struct s3d_req *rq, int status)
{
	s3d_answer(rq, status, "Content-Type: application/xml\r\n", rq->tlen, false);
}

void s3d_xml_begin(struct s3d_req *rq, const char *root)
{
	rq->tlen = 0;
	s3d_printf(rq, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s xmlns=\"http://s3.amazonaws.com"
		   "/doc/2006-03-01/\">", root);
}

/* ------------------------------------------------------------------------
 * Requests: life and order
 */

/* (Taken by s3ops.c's s3d_scan_acquire: a tenant's walks in progress.) */
void s3d_scan_release(struct s3d_req *rq)
{
	if (rq->scan_slot)
		atomic_fetch_sub_explicit(rq->scan_slot, 1, memory_order_relaxed);
	rq->scan_slot = NULL;
}

/* (Taken by s3ops.c's s3d_gate_write and DeleteBucket: its bucket's
 * entry in srv->s3.gate, s3ops.c "DeleteBucket against the bucket's
 * writes"; by an Abort: its upload's, s3ops.c "Sweeps".) */
void s3d_gate_leave(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uint64_t len;

	if (!rq->gate_at && !rq->abort_at)
		return;
	pthread_mutex_lock(&srv->s3.gate_lock);
	if (rq->gate_at)
		(void)kvtd_pinset_drop(&srv->s3.gate, rq->gate_at, &len);
	if (rq->abort_at)
		(void)kvtd_pinset_drop(&srv->s3.gate, rq->abort_at, &len);
	pthread_mutex_unlock(&srv->s3.gate_lock);
	rq->gate_at = 0;
	rq->abort_at = 0;
}

void s3d_tenant_charge(struct s3d_req *rq, uint64_t n)
{
	if (!rq->in_tstat || n == 0)
		return;
	atomic_fetch_add_explicit(&rq->in_tstat->in_charged, n, memory_order_relaxed);
	rq->in_charged += n;
}

/* Give back n of what s3d_tenant_charge counted. */
void s3d_tenant_uncharge(struct s3d_req *rq, uint64_t n)
{
	if (!rq->in_tstat || n == 0)
		return;
	atomic_fetch_sub_explicit(&rq->in_tstat->in_charged, n, memory_order_relaxed);
	rq->in_charged -= n;
}

void s3d_resv_release(struct s3d_req *rq)
{
	if (rq->resv_tstat)
		atomic_fetch_sub_explicit(&rq->resv_tstat->resv_held, rq->resv_held,
					  memory_order_relaxed);
	rq->resv_tstat = NULL;
	rq->resv_held = 0;
}

void s3d_req_free(struct kvtd_server *srv, struct s3d_req *rq)
{
	s3d_resv_release(rq);
	if (rq->in_tstat)
		atomic_fetch_sub_explicit(&rq->in_tstat->in_charged, rq->in_charged,
					  memory_order_relaxed);
	for (uint32_t i = 0; i < rq->n; i++) {
		s3d_item_unpin(srv, rq, &rq->items[i]);
		free(rq->items[i].etag_sent);
	}
	free(rq->del_item);
	free(rq->flush_item);
	s3d_scan_release(rq);
	s3d_gate_leave(rq);
	free(rq->list);
	s3d_pins_release(srv, rq);
	if (rq->reserved)
		kvt_put_abort(srv->store, rq->res.handle);
	if (rq->buf_charged)
		kvtd_mem_uncharge(srv, rq->buf_charged);
	if (rq->mem_charged)
		kvtd_mem_uncharge(srv, rq->mem_charged);
	EVP_MD_CTX_free(rq->sha);
	EVP_MD_CTX_free(rq->chunk_sha);
	EVP_MD_CTX_free(rq->md5);
	free(rq->outer);
	free(rq->inner);
	free(rq->buf);
	free(rq->pins);
	free(rq->items);
	free(rq->segs);
	free(rq->text);
	free(rq->key);
	free(rq->head);
	OPENSSL_cleanse(rq->sign_key, sizeof(rq->sign_key));
	free(rq);
}

static struct kvtd_out *s3d_out(struct kvtd_server *srv, struct s3d_req *rq)
{
	struct kvtd_out *o;
	unsigned n = 1 + rq->nseg;

	if (rq->oom) {
		s3d_pins_release(srv, rq);
		rq->nseg = 0;
		rq->oom = false;
		rq->close_after = true;
		s3d_error(rq, 503, "SlowDown", "server out of memory");
		if (rq->oom)
			return NULL;
		n = 1;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->iov = n <= 2 ? o->iov_small : calloc(n, sizeof(*o->iov));
	if (!o->iov) {
		free(o);
		return NULL;
	}
	o->iov[0] = (struct iovec){ rq->text, rq->tlen };
	o->bytes = rq->tlen;
	for (unsigned i = 0; i < rq->nseg; i++) {
		o->iov[1 + i] = (struct iovec){ (void *)rq->segs[i].p, rq->segs[i].len };
		o->bytes += rq->segs[i].len;
	}
	o->iov_count = n;
	o->hdr = rq->text;
	o->pins = rq->pins;
	o->pin_count = rq->npin;
	/* DRAM the answer pins: a reader too slow for it is closed, as a
	 * native one (loop.c sweep, KVTD_MIN_DRAIN_BPS); how much a
	 * connection pins is bounded by --conn-output, past which s3d.c
	 * parses no new request. */
	if (rq->npin)
		o->pin_len = o->bytes - rq->tlen;
	/* the caps count the objects its pins hold (s3d_keep_pin), not the
	 * bytes sent from them: a Range of one byte kept a whole object */
	o->pin_held = rq->pin_held;
	/* private SSD copies behind the pins: their charge goes with them
	 * (given back when written, loop.c) */
	o->copy_len = rq->pins_copy;
	o->copy_tstat = rq->pins_copy_tstat;
	rq->pins_copy = 0;
	/* counted by the entry from now (kvtd_conn_queue), in the same
	 * tenant: the GET's signer, not the connection's latest -- its pins
	 * and its queued bytes (kvtd_tstat.out_charged) */
	o->pin_tstat = rq->in_tstat;
	o->tstat = rq->in_tstat;
	s3d_pin_unhold(rq);
	rq->text = NULL;
	rq->pins = NULL;
	rq->npin = 0;
	return o;
}

void s3d_flush_done(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct s3d_conn *sc = s3d_of(c);

	while (sc->head && sc->head->done) {
		struct s3d_req *rq = sc->head;
		bool quit = rq->close_after;

		sc->head = rq->next;
		if (!sc->head)
			sc->tail = NULL;
		if (!c->dead) {
			struct kvtd_out *o = s3d_out(srv, rq);
			if (o)
				kvtd_conn_queue(c, o);
			else
				quit = true;
		}
		if (rq->get_counted)
			sc->gets--;
		s3d_req_free(srv, rq);
		kvtd_conn_frame_done(c);
		if (quit && !c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
	}
	s3d_pin_flow(c); /* its GETs answered, their pins counted */
}

/*
 * Pinned answers (ops.c "Pinned answers"; respd.c respd_pin_flow): a GET
 * is answered from its object's pinned DRAM, counted in its connection's
 * and its tenant's pinned bytes from the moment its answer keeps the pin
 * (s3d_keep_pin: sc->pin_held, the tenant's pinned) -- moved to
 * c->pin_bytes once queued -- until it is released.  The tenant is the
 * GET's signer (rq->in_tstat), kept to the output entry (pin_tstat): a
 * connection's tenant is its latest signer, and two tenants' GETs
 * pipelined on one connection (a proxy's pool) counted the first's
 * pins against the second's cap, once queued behind a slow request,
 * and the second's GETs elsewhere were refused for them
 * (test_hostile_http s3_pins_signers).  A connection whose answers pin
 * past KVTD_PIN_CONN_MAX, or past KVTD_PIN_TENANT_MAX of its latest
 * signer or of a signer its queued answers count in (session 43), or
 * with S3D_GETS_MAX GETs not yet answered,
 * parses no more heads until that changes (its answers queued or
 * drained: s3d_flush_done, the written hook).  Pipelined GETs left
 * unread pinned up to --conn-output (64 MiB) a connection before
 * (test_hostile_http s3_pins).  A GET is refused (503 SlowDown, the
 * connection kept) when it is done and (s3d_pin_admit):
 *   - its connection pins nothing while its tenant pins its cap (a
 *     connection that pins something is paused instead);
 *   - its answer must wait for an earlier request of its connection (a
 *     DELETE waiting for its tombstone to be durable, a slow read) while
 *     its connection's or its tenant's answers pin their cap.  Such pins
 *     were counted only once their answers were queued: 4 GETs a
 *     connection, times --tenant-conns, pinned DRAM outside both caps
 *     behind slow requests (test_hostile_http s3_pins_waiting).
 */
bool s3d_pin_admit(struct s3d_req *rq, const char **why)
{
	struct kvtd_conn *c = rq->conn;
	struct kvtd_server *srv = c->loop->srv;
	struct s3d_conn *sc = s3d_of(c);
	uint64_t mine = c->pin_bytes + sc->pin_held;
	/* the GET's signer's pins: its connection's may be another tenant's */
	struct kvtd_tstat *t = rq->in_tstat;
	bool tenant = t && atomic_load_explicit(&t->pinned, memory_order_relaxed) >=
				   KVTD_PIN_TENANT_MAX(srv);

	if (!mine && tenant && kvtd_auth_enabled())
		*why = "The tenant's answers being sent pin its share of kvtierd's DRAM tier; "
		       "read them, or retry later.";
	else if (mine && sc->head != rq && (tenant || mine >= KVTD_PIN_CONN_MAX(srv)))
		*why = tenant ? "The tenant's answers waiting to be sent pin its share of "
				"kvtierd's DRAM tier; read them, or retry later."
			      : "The connection's answers waiting behind its earlier requests pin "
				"its share of kvtierd's DRAM tier; retry later.";
	else
		return true;
	KVTD_COUNT(srv, pin_deferred, 1);
	return false;
}

void s3d_pin_flow(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct s3d_conn *sc = s3d_of(c);
	bool pins = false, over;

	if (c->dead || !sc)
		return;
	/* the tenants: the latest signer's, whose next request is likeliest
	 * (each GET is still checked against its own signer's: s3d_pin_admit),
	 * and each one its queued answers count in (loop.c
	 * kvtd_conn_pin_tenants_over): alice's answers queued unread past
	 * her cap, then a request signed by bob, left the connection read
	 * (test_hostile_http s3_pins_flow) */
	if (c->pin_bytes + sc->pin_held)
		pins = c->pin_bytes + sc->pin_held >= KVTD_PIN_CONN_MAX(srv) ||
		       (c->tstat && atomic_load_explicit(&c->tstat->pinned, memory_order_relaxed) >=
					    KVTD_PIN_TENANT_MAX(srv)) ||
		       kvtd_conn_pin_tenants_over(c);
	over = pins || sc->gets >= S3D_GETS_MAX || sc->writes;
	if (over == c->pin_paused)
		return;
	c->pin_paused = over;
	if (pins)
		KVTD_COUNT(srv, pin_deferred, 1);
	kvtd_conn_flow(c);
}

/*
 * A body of n bytes to buffer (an overwrite's, an XML document) fits its
 * tenant's input share (KVTD_IN_TENANT_MAX): what the tenant's requests
 * in flight hold of --max-memory, all its connections together.  The
 * share paused only connections with requests in flight; a head on a
 * fresh connection was charged its body at once, so one tenant's
 * overwrites held open on ten connections took 28 MiB of a 32 MiB budget
 * (test_hostile_http s3_upload_share).  As native frames
 * (kvtd_frame_charge), a tenant holding nothing but this request makes
 * progress.  Here, not in s3d.c: s3ops.c asks it too (an assembly
 * buffered over a remote tier).
 */
bool s3d_share_fits(struct s3d_req *rq, uint64_t n)
{
	struct kvtd_tstat *t = rq->in_tstat;
	uint64_t held = 0, cap = t ? kvtd_in_share(rq->conn->loop->srv, t, &held) : 0;

	return !cap || held <= rq->in_charged || held + n <= cap;
}

/* Here, beside s3d_unhold: s3d.c and s3ops.c both hold (s3d.c "Order"). */
void s3d_hold_write(struct s3d_req *rq)
{
	if (rq->write_held || rq->done)
		return;
	rq->write_held = true;
	s3d_of(rq->conn)->writes++;
}

void s3d_unhold(struct s3d_req *rq)
{
	if (rq->write_held) { /* s3d.c s3d_hold: the heads behind it may be parsed */
		rq->write_held = false;
		s3d_of(rq->conn)->writes--;
		s3d_pin_flow(rq->conn);
	}
}

void s3d_finish(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	bool write = rq->op == S3_PUT || rq->op == S3_MPU_PART || rq->op == S3_MPU_COMPLETE ||
		     rq->op == S3_COPY || rq->op == S3_DELETE || rq->op == S3_DELETE_MANY ||
		     rq->op == S3_MPU_PART_COPY;

	rq->done = true;
	rq->phase = PH_DONE;
	s3d_unhold(rq);
	s3d_scan_release(rq);
	s3d_gate_leave(rq); /* its write landed, or will not */
	/* The pins its answer did not keep (a GET refused, a copy's sources)
	 * are let go now rather than once it is queued: a GET refused behind
	 * a request in flight held its object pinned until then
	 * (test_hostile_http s3_pins_waiting). */
	for (uint32_t i = 0; i < rq->n; i++)
		s3d_item_unpin(srv, rq, &rq->items[i]);
	/* An answer is queued (and charged, kvtd_conn_queue) once every
	 * earlier request of its connection is answered.  One that waits for
	 * them is charged from here, to --max-memory and its tenant's input
	 * share, until then: a listing's XML (up to ~8 MB: 1,000 keys of
	 * 1,024 control bytes, each "&#xFFFD;") behind a DELETE waiting for
	 * its flush was outside both, where the listing's ~2.5 MB of state
	 * was charged (test_hostile_http s3_answer_held). */
	if (s3d_of(rq->conn)->head != rq && rq->tcap) {
		kvtd_mem_charge(srv, rq->tcap, true);
		rq->mem_charged += rq->tcap;
		s3d_tenant_charge(rq, rq->tcap);
	}
	kvtd_metrics_latency(srv, write ? KVTD_LAT_WRITE : KVTD_LAT_READ, rq->tier,
			     kvtd_now_ns() - rq->start_ns);
	kvtd_metrics_s3(srv, rq->op, rq->text && rq->tlen > 9 && rq->text[9] >= '4');
	if (kvtd_log_enabled(KVTD_DEBUG)) {
		static const char *const pl[] = { "unsigned", "signed", "streaming-signed",
						   "streaming-unsigned-trailer" };
		kvtd_log(KVTD_DEBUG, "s3 request",
			 "op=%s status=%.3s payload=%s chunked=%d bytes=%" PRIu64 " conn=%" PRIu64,
			 kvtd_s3_op_names[rq->op], rq->text && rq->tlen > 12 ? (char *)rq->text + 9 : "-",
			 pl[rq->payload], rq->transport_chunked, rq->got, rq->conn->id);
	}
	s3d_flush_done(rq->conn);
}

/* Answer with an error now and finish. */
void s3d_fail(struct s3d_req *rq, int status, const char *code, const char *msg)
{
	s3d_error(rq, status, code, msg);
	s3d_finish(rq);
}

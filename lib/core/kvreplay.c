/*
 * kvreplay.c - the replay endpoints of the KV-events feeds, vLLM's
 * replay_endpoint (kvreplay.h; kvevents.h says what goes on the wire,
 * doc/kvevents.md "Replay" what a router asks and what it may cost).
 *
 * Owns, in one struct kvreplay that kvevents.c opens when it has
 * events.replay_endpoint or events.groups and closes before its own
 * sockets: the replay thread (kvt-events-rep), its wake eventfd, the
 * endpoints (struct kvreplay_ep: the main socket's and those of groups'
 * feeds), each one's ROUTER socket and ring of kept messages, and the
 * events.replay_* counters.  No global state: every call takes the
 * struct.  It sits below the publisher: it calls nothing of kvevents.c;
 * the peer bounds and the ZAP watch of its sockets are kvzap.c's (the
 * publisher's struct kvzap, in its config).
 *
 * The publisher thread copies each message it sends on a feed with an
 * endpoint into that endpoint's ring (kvreplay_keep: the last
 * events.replay_max, at most events.replay_bytes of payload), and the
 * replay thread answers [id, "", start seq] with the ring's messages
 * from there, then the end marker.  An endpoint is opened and bound by
 * the thread that asks for it (kvreplay_bind), then handed over; to
 * close one (kvreplay_unbind), that thread marks it and waits until the
 * replay thread has closed it.  It sends with ZMQ_DONTWAIT and
 * ZMQ_ROUTER_MANDATORY: at a peer's high-water mark it keeps the
 * replay's next seq and tries again 10 ms later, from wherever the ring
 * then is.
 *
 * Locks: r->ring_lock guards the rings and the list of endpoints (held
 * for one message's send at most; taken under the publisher's chan_lock,
 * never the other way); an endpoint's socket and its replays under way
 * belong to the replay thread once handed over.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <zmq.h>

#include "kvreplay.h"

/* A message kept for replay: its payload, as sent on the feed. */
struct kvreplay_rec {
	uint64_t seq;
	uint8_t *data;
	size_t len;
};

/* A replay under way: what its peer gets next. */
struct kvreplay_pend {
	uint8_t id[256];                /* the peer's ROUTER routing id */
	size_t id_len;
	uint64_t next;                  /* the first seq it still wants */
};

/* A feed's replay endpoint: its ring of kept messages (ring_lock) and
 * its ROUTER socket (the replay thread's once handed over). */
struct kvreplay_ep {
	void *rep;
	uint32_t zap_id;                /* kvzap_watch's id for it, or KVZAP_UNWATCHED */
	uint32_t group;                 /* 0: the main socket's */
	char want[KVREPLAY_EP_LEN];     /* the endpoint asked for */
	char endpoint[KVREPLAY_EP_LEN]; /* ZMQ_LAST_ENDPOINT */
	struct kvreplay_rec *ring;      /* ring_lock: cfg.max slots */
	size_t head, n;                 /* ring_lock: the oldest's slot; how many */
	uint64_t bytes;                 /* ring_lock: their payload bytes */
	bool closing;                   /* ring_lock: the replay thread closes it */
	struct kvreplay_pend *pend;     /* replay thread: replays under way */
	size_t pend_n;
};

struct kvreplay {
	struct kvreplay_config cfg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	pthread_mutex_t ring_lock;
	pthread_cond_t ring_cond;       /* an endpoint was closed */
	struct kvreplay_ep *eps[KVEVENTS_REPLAYS]; /* ring_lock */
	size_t ep_n;                    /* ring_lock */
	pthread_t thread;
	bool started;
	int wake;                       /* eventfd: stop or eps changed */
	_Atomic bool stop;
	_Atomic uint64_t c_requests, c_invalid, c_busy, c_msgs, c_bytes, c_waits, c_kept,
		c_kept_bytes;
};

/* ------------------------------------------------------------------------
 * The replay thread
 */

static void kvreplay_wake(struct kvreplay *r)
{
	uint64_t one = 1;
	ssize_t w = write(r->wake, &one, sizeof(one));
	(void)w; /* fails only if the count is huge: the thread wakes anyway */
}

/* Read one request on e: [routing id, "" (not checked, as vLLM does
 * not), start seq (big-endian, any length up to 256 bytes: vLLM reads it
 * with int.from_bytes, so a start past 2^64 gets only the end marker)];
 * queue its replay, replacing the peer's replay under way.  false if none
 * was waiting. */
static bool kvreplay_request(struct kvreplay *r, struct kvreplay_ep *e)
{
	uint8_t fr[3][256];
	size_t fr_len[3] = { 0 };
	unsigned nf = kvzap_recv(e->rep, fr, sizeof(fr[0]), fr_len, 3);
	uint64_t start = 0;
	struct kvreplay_pend *p = NULL;

	if (nf == 0)
		return false;
	atomic_fetch_add_explicit(&r->c_requests, 1, memory_order_relaxed);
	if (nf != 3 || fr_len[0] == 0 || fr_len[0] > sizeof(fr[0]) ||
	    fr_len[2] > sizeof(fr[2])) {
		atomic_fetch_add_explicit(&r->c_invalid, 1, memory_order_relaxed);
		return true; /* vLLM logs it and answers nothing */
	}
	for (size_t i = 0; i < fr_len[2]; i++) {
		if (i + 8 < fr_len[2] && fr[2][i]) {
			start = UINT64_MAX; /* past every seq */
			break;
		}
		start = start << 8 | fr[2][i];
	}
	for (size_t i = 0; i < e->pend_n && !p; i++)
		if (e->pend[i].id_len == fr_len[0] &&
		    memcmp(e->pend[i].id, fr[0], fr_len[0]) == 0)
			p = &e->pend[i];
	if (!p) {
		/* One replay a peer, and no more than a bound socket holds
		 * peers (ZAP): a peer past that would be refused anyway. */
		if (e->pend_n == r->cfg.sub_max) {
			atomic_fetch_add_explicit(&r->c_busy, 1, memory_order_relaxed);
			return true;
		}
		p = &e->pend[e->pend_n++];
		memcpy(p->id, fr[0], fr_len[0]);
		p->id_len = fr_len[0];
	}
	p->next = start;
	return true;
}

/* Send one message of replay p on e: the first kept with seq >= p->next,
 * or the end marker.  1: sent (more may follow), 0: the end marker went
 * (the replay is done), -EAGAIN: the peer's queue is full (try later),
 * -EHOSTUNREACH: the peer is gone. */
static int kvreplay_send(struct kvreplay *r, struct kvreplay_ep *e, struct kvreplay_pend *p)
{
	const char *topic = r->cfg.topic;
	uint8_t seq[8];
	size_t lo, hi;
	int ret = 1;

	pthread_mutex_lock(&r->ring_lock);
	/* The ring is in seq order: the first slot with seq >= next.  Those
	 * older than the ring went: the replay starts at the oldest kept, as
	 * vLLM's does (the peer sees the gap in the seqs). */
	lo = 0;
	hi = e->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->ring[(e->head + mid) % r->cfg.max].seq < p->next)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (zmq_send(e->rep, p->id, p->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
		/* ZMQ_ROUTER_MANDATORY: EAGAIN at the peer's high-water mark,
		 * EHOSTUNREACH for a peer that left; nothing was queued. */
		ret = zmq_errno() == EAGAIN ? -EAGAIN : -EHOSTUNREACH;
	} else if (lo < e->n) {
		const struct kvreplay_rec *rec = &e->ring[(e->head + lo) % r->cfg.max];
		kvevents_seq_bytes(rec->seq, seq);
		/* Past the routing id, the frames of one message are queued
		 * whole. */
		zmq_send(e->rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, seq, sizeof(seq), ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, rec->data, rec->len, ZMQ_DONTWAIT);
		p->next = rec->seq + 1;
		atomic_fetch_add_explicit(&r->c_msgs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->c_bytes, rec->len, memory_order_relaxed);
	} else {
		/* vLLM's end marker: an empty topic, seq -1, an empty payload. */
		memset(seq, 0xff, sizeof(seq));
		zmq_send(e->rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, seq, sizeof(seq), ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(e->rep, "", 0, ZMQ_DONTWAIT);
		ret = 0;
	}
	pthread_mutex_unlock(&r->ring_lock);
	return ret;
}

/* Serve each replay under way on e up to KVEVENTS_REPLAY_BURST messages. */
static void kvreplay_serve(struct kvreplay *r, struct kvreplay_ep *e)
{
	for (size_t i = 0; i < e->pend_n;) {
		int ret = 1;
		for (int k = 0; k < KVEVENTS_REPLAY_BURST && ret == 1; k++)
			ret = kvreplay_send(r, e, &e->pend[i]);
		if (ret == -EAGAIN)
			atomic_fetch_add_explicit(&r->c_waits, 1, memory_order_relaxed);
		if (ret == 0 || ret == -EHOSTUNREACH)
			e->pend[i] = e->pend[--e->pend_n];
		else
			i++;
	}
}

/* Drop every message e keeps.  ring_lock held. */
static void kvreplay_ring_clear(struct kvreplay *r, struct kvreplay_ep *e)
{
	for (size_t i = 0; i < e->n; i++) {
		struct kvreplay_rec *rec = &e->ring[(e->head + i) % r->cfg.max];
		kvt_mem_free(r->mem, rec->data, rec->len ? rec->len : 1);
	}
	atomic_fetch_sub_explicit(&r->c_kept, e->n, memory_order_relaxed);
	atomic_fetch_sub_explicit(&r->c_kept_bytes, e->bytes, memory_order_relaxed);
	e->n = e->head = 0;
	e->bytes = 0;
}

/* Close e's socket (from the thread that owns it), free it. */
static void kvreplay_free(struct kvreplay *r, struct kvreplay_ep *e)
{
	if (!e)
		return;
	if (e->rep)
		kvzap_close_socket(r->cfg.zap, e->rep, e->zap_id);
	if (e->ring) {
		pthread_mutex_lock(&r->ring_lock);
		kvreplay_ring_clear(r, e);
		pthread_mutex_unlock(&r->ring_lock);
	}
	kvt_mem_free(r->mem, e->ring, r->cfg.max * sizeof(*e->ring));
	kvt_mem_free(r->mem, e->pend, r->cfg.sub_max * sizeof(*e->pend));
	kvt_mem_free(r->mem, e, sizeof(*e));
}

static void *kvreplay_main(void *arg)
{
	struct kvreplay *r = arg;
	zmq_pollitem_t items[KVEVENTS_REPLAYS + 1];
	struct kvreplay_ep *eps[KVEVENTS_REPLAYS];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&r->stop)) {
		size_t n = 0;
		bool pending = false;
		uint64_t v;

		/* Close the replays given up (kvreplay_unbind waits), take
		 * the others. */
		pthread_mutex_lock(&r->ring_lock);
		for (size_t i = 0; i < r->ep_n;) {
			struct kvreplay_ep *e = r->eps[i];
			if (e->closing) {
				r->eps[i] = r->eps[--r->ep_n];
				pthread_mutex_unlock(&r->ring_lock);
				kvreplay_free(r, e);
				pthread_mutex_lock(&r->ring_lock);
				pthread_cond_broadcast(&r->ring_cond);
				continue;
			}
			eps[n] = e;
			items[n + 1] = (zmq_pollitem_t){ e->rep, 0, ZMQ_POLLIN, 0 };
			pending |= e->pend_n > 0;
			n++;
			i++;
		}
		pthread_mutex_unlock(&r->ring_lock);
		items[0] = (zmq_pollitem_t){ NULL, r->wake, ZMQ_POLLIN, 0 };
		/* A replay waiting on a peer's full queue is retried every
		 * 10 ms (ROUTER has no per-peer POLLOUT). */
		if (zmq_poll(items, (int)n + 1, pending ? 10 : -1) < 0)
			continue;
		if (items[0].revents & ZMQ_POLLIN) {
			ssize_t got = read(r->wake, &v, sizeof(v));
			(void)got;
		}
		for (size_t i = 0; i < n; i++) {
			/* A few requests a round: a peer that floods them is
			 * read at the pace of its replays. */
			int k = 0;
			while (k++ < KVEVENTS_REPLAY_BURST && kvreplay_request(r, eps[i]))
				;
			kvreplay_serve(r, eps[i]);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * Endpoints, and what the publisher thread keeps in their rings
 */

/* A replay endpoint for group's feed (0: the main socket) at ep: a ROUTER
 * always bound (as vLLM does), guarded like the publisher's bound PUB
 * sockets (kvzap: its peers' bounds and the ZAP watch).  Not yet
 * handed to the replay thread (kvreplay_add).  0, KVT_EOPTVAL (refused:
 * logged), -ENOMEM, -errno. */
static int kvreplay_new(struct kvreplay *r, const char *ep, uint32_t group,
			struct kvreplay_ep **out)
{
	int linger = 0, hwm = KVEVENTS_REPLAY_HWM, rcvhwm = KVEVENTS_REPLAY_BURST, one = 1;
	int ret;
	size_t len;
	struct kvreplay_ep *e = kvt_mem_calloc(r->mem, 1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->group = group;
	e->zap_id = KVZAP_UNWATCHED;
	snprintf(e->want, sizeof(e->want), "%s", ep);
	e->ring = kvt_mem_calloc(r->mem, r->cfg.max, sizeof(*e->ring));
	e->pend = kvt_mem_calloc(r->mem, r->cfg.sub_max, sizeof(*e->pend));
	e->rep = zmq_socket(r->cfg.zctx, ZMQ_ROUTER);
	if (!e->ring || !e->pend || !e->rep) {
		ret = -ENOMEM;
		goto fail;
	}
	zmq_setsockopt(e->rep, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(e->rep, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(e->rep, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm));
	zmq_setsockopt(e->rep, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
	kvzap_peer_bounds(e->rep);
	ret = kvzap_watch(r->cfg.zap, e->rep, &e->zap_id);
	if (ret < 0) {
		kvt_logf(r->log, KVT_LOG_ERROR, "events: cannot watch the replay endpoint %s: %s",
			 ep, kvt_strerror(ret));
		goto fail;
	}
	if (zmq_bind(e->rep, ep) < 0) {
		kvt_logf(r->log, KVT_LOG_ERROR, "events: cannot bind the replay endpoint %s: %s",
			 ep, zmq_strerror(zmq_errno()));
		ret = KVT_EOPTVAL;
		goto fail;
	}
	len = sizeof(e->endpoint);
	if (zmq_getsockopt(e->rep, ZMQ_LAST_ENDPOINT, e->endpoint, &len) < 0 ||
	    !e->endpoint[0])
		snprintf(e->endpoint, sizeof(e->endpoint), "%s", ep);
	if (group)
		kvt_logf(r->log, KVT_LOG_INFO, "events: replaying group %u's last %u messages "
			 "(%" PRIu64 " bytes at most) on %s", group, r->cfg.max,
			 r->cfg.bytes, e->endpoint);
	else
		kvt_logf(r->log, KVT_LOG_INFO, "events: replaying the last %u messages (%" PRIu64
			 " bytes at most) on %s", r->cfg.max, r->cfg.bytes,
			 e->endpoint);
	*out = e;
	return 0;
fail:
	kvreplay_free(r, e);
	return ret;
}

/* Hand e to the replay thread.  0, -ENOMEM (e freed). */
static int kvreplay_add(struct kvreplay *r, struct kvreplay_ep *e)
{
	pthread_mutex_lock(&r->ring_lock);
	if (r->ep_n == KVEVENTS_REPLAYS) {
		pthread_mutex_unlock(&r->ring_lock);
		kvreplay_free(r, e);
		return -ENOMEM;
	}
	r->eps[r->ep_n++] = e;
	pthread_mutex_unlock(&r->ring_lock);
	kvreplay_wake(r);
	return 0;
}

int kvreplay_bind(struct kvreplay *r, const char *ep, uint32_t group,
		  struct kvreplay_ep **out)
{
	struct kvreplay_ep *e;
	int ret = kvreplay_new(r, ep, group, &e);

	if (ret == 0)
		ret = kvreplay_add(r, e);
	if (ret == 0)
		*out = e;
	return ret;
}

/* Take e back from the replay thread, which closes and frees it; returns
 * once it has. */
void kvreplay_unbind(struct kvreplay *r, struct kvreplay_ep *e)
{
	bool in = true;

	pthread_mutex_lock(&r->ring_lock);
	e->closing = true;
	kvreplay_wake(r);
	while (in) {
		in = false;
		for (size_t i = 0; i < r->ep_n && !in; i++)
			in = r->eps[i] == e;
		if (in)
			pthread_cond_wait(&r->ring_cond, &r->ring_lock);
	}
	pthread_mutex_unlock(&r->ring_lock);
}

const char *kvreplay_want(const struct kvreplay_ep *e)
{
	return e->want;
}

const char *kvreplay_endpoint(const struct kvreplay_ep *e)
{
	return e->endpoint;
}

/* Keep message seq (payload p[0..len)) for replay on e: the oldest go
 * while the ring is full or would hold more than events.replay_bytes.
 * Without memory, or larger than the bound alone, it is not kept (a
 * replay skips it: the peer sees the gap). */
void kvreplay_keep(struct kvreplay *r, struct kvreplay_ep *e, uint64_t seq, const uint8_t *p,
		   size_t len)
{
	uint8_t *copy = len <= r->cfg.bytes ? kvt_mem_alloc(r->mem, len ? len : 1) : NULL;
	uint64_t gone = 0, gone_bytes = 0;

	if (copy)
		memcpy(copy, p, len);
	pthread_mutex_lock(&r->ring_lock);
	while (e->n && (e->n == r->cfg.max ||
			 (copy && e->bytes + len > r->cfg.bytes))) {
		struct kvreplay_rec *rec = &e->ring[e->head];
		e->bytes -= rec->len;
		gone++;
		gone_bytes += rec->len;
		kvt_mem_free(r->mem, rec->data, rec->len ? rec->len : 1);
		e->head = (e->head + 1) % r->cfg.max;
		e->n--;
	}
	if (copy) {
		size_t at = (e->head + e->n) % r->cfg.max;
		e->ring[at] = (struct kvreplay_rec){ seq, copy, len };
		e->n++;
		e->bytes += len;
	}
	atomic_fetch_sub_explicit(&r->c_kept, gone, memory_order_relaxed);
	atomic_fetch_sub_explicit(&r->c_kept_bytes, gone_bytes, memory_order_relaxed);
	if (copy) {
		atomic_fetch_add_explicit(&r->c_kept, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->c_kept_bytes, len, memory_order_relaxed);
	}
	pthread_mutex_unlock(&r->ring_lock);
}

void kvreplay_forget(struct kvreplay *r, struct kvreplay_ep *e)
{
	pthread_mutex_lock(&r->ring_lock);
	kvreplay_ring_clear(r, e);
	pthread_mutex_unlock(&r->ring_lock);
}

/* ------------------------------------------------------------------------
 * Open and close
 */

int kvreplay_open(struct kvreplay **out, const struct kvreplay_config *cfg,
		  struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct kvreplay *r = kvt_mem_calloc(mem, 1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	if (!r->cfg.topic)
		r->cfg.topic = "";
	r->mem = mem;
	r->log = log;
	pthread_mutex_init(&r->ring_lock, NULL);
	pthread_cond_init(&r->ring_cond, NULL);
	r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->wake < 0) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&r->thread, NULL, kvreplay_main, r);
	if (ret < 0)
		goto fail;
	pthread_setname_np(r->thread, "kvt-events-rep");
	r->started = true;
	*out = r;
	return 0;
fail:
	kvreplay_close(r);
	return ret;
}

/* Stop the replay thread; close and free every endpoint (the caller then
 * stops its ZAP thread). */
void kvreplay_close(struct kvreplay *r)
{
	if (!r)
		return;
	if (r->started) {
		atomic_store(&r->stop, true);
		kvreplay_wake(r);
		pthread_join(r->thread, NULL);
	}
	for (size_t i = 0; i < r->ep_n; i++)
		kvreplay_free(r, r->eps[i]);
	if (r->wake >= 0)
		close(r->wake);
	pthread_mutex_destroy(&r->ring_lock);
	pthread_cond_destroy(&r->ring_cond);
	kvt_mem_free(r->mem, r, sizeof(*r));
}

void kvreplay_stats(struct kvreplay *r, kvt_stats_fn fn, void *ctx)
{
#define S(name, c) fn(ctx, "events." name, atomic_load_explicit(&r->c, memory_order_relaxed), NULL)
	S("replay_kept", c_kept);
	S("replay_kept_bytes", c_kept_bytes);
	S("replay_requests", c_requests);
	S("replay_invalid", c_invalid);
	S("replay_busy", c_busy);
	S("replay_messages", c_msgs);
	S("replay_bytes", c_bytes);
	S("replay_waits", c_waits);
#undef S
}

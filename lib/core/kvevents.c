/*
 * kvevents.c - KV cache events in vLLM's KVEventBatch format over a
 * ZeroMQ PUB socket (kvevents.h says what goes on the wire,
 * doc/kvevents.md how a router subscribes).
 *
 * Owns: the ZeroMQ context and PUB socket (used by the publisher thread
 * only, after kvevents_open created it), the queue of events not yet sent
 * (two growable arrays: one filled under ev->lock, one being encoded by
 * the thread), the encode buffer, the sequence counter and the
 * events.* counters.
 *
 * The thread wakes when the first event is queued into an empty queue
 * (then waits up to events.batch_ms for more: one message per batch, as
 * vLLM sends one per scheduler step) or at close; it swaps the arrays,
 * encodes one KVEventBatch with msgpack-c's packer into its buffer, and
 * sends [topic, seq, payload].  A full queue drops new events (counted:
 * a router that misses events sees stale state, never a stalled put).
 *
 * The ZAP thread (kvevents_zap_main) bounds how many peers each bound
 * socket holds (kvevents.h, KVEVENTS_DEF_SUB_MAX).  libzmq asks the ZAP
 * handler of the socket's context (a REP socket bound at
 * inproc://zeromq.zap.01: one per context, and each kvevents has its own
 * context) about every peer of a socket that has a ZMQ_ZAP_DOMAIN, during
 * the handshake, even with the NULL mechanism; a refused peer gets ZMTP's
 * ERROR and never a READY, and libzmq closes it when it leaves or at the
 * handshake deadline (ZMQ_HANDSHAKE_IVL).  To know how many peers a socket has, the
 * thread reads the socket's monitor (ZMQ_EVENT_ACCEPTED and _DISCONNECTED:
 * libzmq reports both for every descriptor a listener takes, whatever
 * becomes of its handshake) into a table of live descriptors, with each
 * one's peer address (getpeername on the accepted descriptor: read only).
 * Each bound socket's domain is "kvevents.<id>", which names its monitor.
 *
 * libzmq's I/O thread blocks on a monitor event it cannot queue, so each
 * monitor's reading end is connected before the socket binds, takes any
 * number of events (ZMQ_RCVHWM 0), and the monitor is stopped
 * (zmq_socket_monitor(pub, NULL, 0)) before the socket is closed and
 * before its reading end is.
 *
 * The replay endpoints (vLLM's replay_endpoint: the main socket's, with
 * events.replay_endpoint, and those of groups' feeds) are kvreplay.c's,
 * below this file: ev->rep, opened with events.replay_endpoint or
 * events.groups, owns their thread, ROUTER sockets and rings; the
 * publisher thread hands it a copy of each message it sends on a feed
 * with one (kvreplay_keep), and the ZAP thread watches their sockets as
 * it does the bound PUB sockets (kvevents_rep_guard).
 *
 * Locks: ev->lock guards the filling array, stop and the wake flag;
 * ev->zap_lock the sockets handed to the ZAP thread and its stop flag;
 * ev->chan_lock the groups' sockets (kvreplay's ring lock is taken under
 * it, never the other way); everything else belongs to its thread (or
 * to open/close around them).
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <msgpack.h>
#include <zmq.h>

#include "kvevents.h"
#include "kvreplay.h"

struct evq {
	struct kvevent *ev;
	size_t n, cap;
};

#define KVEV_UNWATCHED UINT32_MAX /* a socket without a ZAP handler (connected) */

/* A bound socket, as handed to the ZAP thread. */
struct kvev_mon {
	uint32_t id;                    /* its ZMQ_ZAP_DOMAIN is "kvevents.<id>" */
	void *pair;                     /* its monitor's reading end; NULL: the socket
					 * was closed (handed over: forget it) */
};

/* A descriptor libzmq took for a bound socket and has not closed yet. */
struct kvev_peer {
	int fd;
	uint32_t mon;                   /* the socket's id */
	char addr[64];                  /* the peer's IP address; "" if not TCP */
};

/* A group's own socket. */
struct kvev_chan {
	uint32_t group;
	uint32_t zap_id;                /* KVEV_UNWATCHED if connected */
	void *pub;
	struct kvreplay_ep *rp;         /* its replay endpoint, or NULL */
	uint64_t seq;
	char want[256];                 /* the endpoint asked for */
};

struct kvevents {
	struct kvevents_config cfg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	void *zctx, *pub;               /* pub: NULL without events.endpoint */
	uint32_t pub_zap_id;            /* KVEV_UNWATCHED if connected */
	char endpoint[256];             /* ZMQ_LAST_ENDPOINT: what it is bound to */

	pthread_mutex_t chan_lock;      /* chans; their sockets are used under it */
	struct kvev_chan *chans;
	size_t chan_n, chan_cap;
	_Atomic bool listening;         /* a socket exists: events are worth queuing */

	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct evq fill;                /* lock */
	bool stop;                      /* lock */

	/* publisher thread */
	struct evq send;
	struct evq sub;                 /* one group's share of send */
	uint8_t *buf;
	size_t buf_cap;
	uint64_t seq;

	/* The ZAP thread */
	pthread_t zap_thread;
	bool zap_started;
	int zap_wake;                   /* eventfd: zap_stop or zap_new changed */
	pthread_mutex_t zap_lock;
	struct kvev_mon *zap_new;       /* zap_lock: sockets bound or closed, in order */
	size_t zap_new_n, zap_new_cap;  /* zap_lock */
	uint32_t zap_ids;               /* zap_lock: the next bound socket's id */
	bool zap_stop;                  /* zap_lock */
	void *zap_rep;                  /* bound at inproc://zeromq.zap.01 */
	struct kvev_mon *mons;          /* ZAP thread: the bound sockets it watches */
	size_t mon_n, mon_cap;
	struct kvev_peer *peers;        /* ZAP thread: their live descriptors */
	size_t peer_n, peer_cap;
	bool refusing;                  /* ZAP thread: the last answer was a refusal */

	/* Replay (doc/kvevents.md "Replay", kvreplay.c): NULL without
	 * events.replay_endpoint and events.groups. */
	struct kvreplay *rep;
	struct kvreplay_ep *main_rp;    /* the main socket's endpoint, or NULL */

	_Atomic uint64_t c_events, c_dropped, c_batches, c_send_errors, c_bytes, c_refused;
};

/* ------------------------------------------------------------------------
 * Encoding
 */

struct enc {
	uint8_t *buf;
	size_t cap, len;         /* len counts past cap: the size needed */
};

static int enc_write(void *data, const char *p, size_t n)
{
	struct enc *e = data;
	if (e->len + n <= e->cap)
		memcpy(e->buf + e->len, p, n);
	e->len += n;
	return 0;
}

static void enc_hash(msgpack_packer *pk, const struct kvt_key *k)
{
	msgpack_pack_bin(pk, k->len);
	msgpack_pack_bin_body(pk, k->bytes, k->len);
}

static void enc_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/* One event as a map (vLLM 0.32: tagged msgspec structs, omit_defaults). */
static void enc_event_map(msgpack_packer *pk, const struct kvevent *v, const char *medium)
{
	switch (v->type) {
	case KVEV_STORED:
		msgpack_pack_map(pk, 8);
		enc_str(pk, "type");
		enc_str(pk, "BlockStored");
		enc_str(pk, "block_hashes");
		msgpack_pack_array(pk, 1);
		enc_hash(pk, &v->key);
		enc_str(pk, "parent_block_hash");
		if (v->has_parent)
			enc_hash(pk, &v->parent);
		else
			msgpack_pack_nil(pk);
		enc_str(pk, "token_ids");
		msgpack_pack_array(pk, 0);   /* not known to the store */
		enc_str(pk, "block_size");
		msgpack_pack_uint32(pk, v->block_size);
		enc_str(pk, "lora_id");
		msgpack_pack_nil(pk);
		enc_str(pk, "medium");
		enc_str(pk, medium);
		enc_str(pk, "lora_name");
		msgpack_pack_nil(pk);
		break;
	case KVEV_REMOVED:
		msgpack_pack_map(pk, 3);
		enc_str(pk, "type");
		enc_str(pk, "BlockRemoved");
		enc_str(pk, "block_hashes");
		msgpack_pack_array(pk, 1);
		enc_hash(pk, &v->key);
		enc_str(pk, "medium");
		enc_str(pk, medium);
		break;
	default:
		msgpack_pack_map(pk, 1);
		enc_str(pk, "type");
		enc_str(pk, "AllBlocksCleared");
		break;
	}
}

/* One event as an array (older vLLM: array_like structs, tag first). */
static void enc_event_array(msgpack_packer *pk, const struct kvevent *v, const char *medium)
{
	switch (v->type) {
	case KVEV_STORED:
		msgpack_pack_array(pk, 7);
		enc_str(pk, "BlockStored");
		msgpack_pack_array(pk, 1);
		enc_hash(pk, &v->key);
		if (v->has_parent)
			enc_hash(pk, &v->parent);
		else
			msgpack_pack_nil(pk);
		msgpack_pack_array(pk, 0);
		msgpack_pack_uint32(pk, v->block_size);
		msgpack_pack_nil(pk);        /* lora_id */
		enc_str(pk, medium);
		break;
	case KVEV_REMOVED:
		msgpack_pack_array(pk, 3);
		enc_str(pk, "BlockRemoved");
		msgpack_pack_array(pk, 1);
		enc_hash(pk, &v->key);
		enc_str(pk, medium);
		break;
	default:
		msgpack_pack_array(pk, 1);
		enc_str(pk, "AllBlocksCleared");
		break;
	}
}

int64_t kvevents_encode(const struct kvevent *evs, size_t n, double ts, const char *medium,
			int format, uint8_t *buf, size_t cap, size_t *need)
{
	struct enc e = { buf, cap, 0 };
	msgpack_packer pk;

	msgpack_packer_init(&pk, &e, enc_write);
	/* vLLM 0.32's EventBatch is array_like with a trailing
	 * data_parallel_rank that msgspec writes as nil. */
	msgpack_pack_array(&pk, format == KVEVENTS_ARRAY ? 2 : 3);
	msgpack_pack_double(&pk, ts);
	msgpack_pack_array(&pk, n);
	for (size_t i = 0; i < n; i++) {
		if (format == KVEVENTS_ARRAY)
			enc_event_array(&pk, &evs[i], medium);
		else
			enc_event_map(&pk, &evs[i], medium);
	}
	if (format != KVEVENTS_ARRAY)
		msgpack_pack_nil(&pk);
	if (e.len > cap) {
		if (need)
			*need = e.len;
		return KVT_EBUFSMALL;
	}
	return (int64_t)e.len;
}

/* ------------------------------------------------------------------------
 * Queueing (any thread)
 */

static void kvevents_push(struct kvevents *ev, const struct kvevent *v)
{
	bool wake;
	if (!atomic_load_explicit(&ev->listening, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ev->lock);
	if (ev->fill.n == ev->fill.cap) {
		size_t nc = ev->fill.cap ? ev->fill.cap * 2 : 256;
		struct kvevent *na;
		if (nc > ev->cfg.queue_max)
			nc = ev->cfg.queue_max;
		na = nc > ev->fill.cap ? kvt_mem_realloc(ev->mem, ev->fill.ev,
							 ev->fill.cap * sizeof(*na),
							 nc * sizeof(*na))
				       : NULL;
		if (!na) {
			pthread_mutex_unlock(&ev->lock);
			atomic_fetch_add_explicit(&ev->c_dropped, 1, memory_order_relaxed);
			return;
		}
		ev->fill.ev = na;
		ev->fill.cap = nc;
	}
	ev->fill.ev[ev->fill.n++] = *v;
	wake = ev->fill.n == 1;
	pthread_mutex_unlock(&ev->lock);
	atomic_fetch_add_explicit(&ev->c_events, 1, memory_order_relaxed);
	if (wake)
		pthread_cond_signal(&ev->cond);
}

void kvevents_stored(struct kvevents *ev, uint32_t group, const struct kvt_key *key,
		     const struct kvt_key *parent, uint32_t block_size)
{
	struct kvevent v = { .type = KVEV_STORED, .group = group, .block_size = block_size,
			     .key = *key };
	if (parent) {
		v.has_parent = true;
		v.parent = *parent;
	}
	kvevents_push(ev, &v);
}

void kvevents_removed(struct kvevents *ev, uint32_t group, const struct kvt_key *key)
{
	struct kvevent v = { .type = KVEV_REMOVED, .group = group, .key = *key };
	kvevents_push(ev, &v);
}

void kvevents_cleared(struct kvevents *ev, uint32_t group)
{
	struct kvevent v = { .type = KVEV_CLEARED, .group = group };
	kvevents_push(ev, &v);
}

/* ------------------------------------------------------------------------
 * The publisher thread
 */

/* One KVEventBatch message of evs[0..n) on socket pub, numbered *seqp;
 * kept for replay on rp (NULL: none). */
static void kvevents_send_msg(struct kvevents *ev, void *pub, struct kvreplay_ep *rp,
			      uint64_t *seqp, const struct kvevent *evs, size_t n)
{
	struct timespec now;
	size_t need = 0;
	int64_t len;
	uint8_t seq[8];

	clock_gettime(CLOCK_REALTIME, &now);
	for (;;) {
		len = kvevents_encode(evs, n,
				      (double)now.tv_sec + (double)now.tv_nsec / 1e9,
				      ev->cfg.medium ? ev->cfg.medium : "CPU", ev->cfg.format,
				      ev->buf, ev->buf_cap,
				      &need);
		if (len != KVT_EBUFSMALL)
			break;
		kvt_mem_free(ev->mem, ev->buf, ev->buf_cap);
		ev->buf_cap = 0;
		ev->buf = kvt_mem_alloc(ev->mem, need);
		if (!ev->buf) {
			atomic_fetch_add_explicit(&ev->c_dropped, n, memory_order_relaxed);
			return;
		}
		ev->buf_cap = need;
	}
	kvevents_seq_bytes(*seqp, seq);
	(*seqp)++;
	/* Kept before it is sent: a router that has heard it can ask for it
	 * (kept after, a replay asked at once could end just before it). */
	if (rp)
		kvreplay_keep(ev->rep, rp, *seqp - 1, ev->buf, (size_t)len);
	{
		const char *topic = ev->cfg.topic ? ev->cfg.topic : "";
		/* A PUB socket never blocks: with no subscriber, or one past its
		 * high-water mark, ZeroMQ drops the message. */
		if (zmq_send(pub, topic, strlen(topic), ZMQ_SNDMORE) < 0 ||
		    zmq_send(pub, seq, sizeof(seq), ZMQ_SNDMORE) < 0 ||
		    zmq_send(pub, ev->buf, (size_t)len, 0) < 0) {
			atomic_fetch_add_explicit(&ev->c_send_errors, 1, memory_order_relaxed);
			return;
		}
	}
	atomic_fetch_add_explicit(&ev->c_batches, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ev->c_bytes, (uint64_t)len, memory_order_relaxed);
}

/* evs[0..n) on socket pub: messages of at most KVEVENTS_MSG_EVENTS events
 * (kvevents.h: what a peer that stops reading holds is their size times
 * KVEVENTS_SNDHWM). */
static void kvevents_send_on(struct kvevents *ev, void *pub, struct kvreplay_ep *rp,
			     uint64_t *seqp, const struct kvevent *evs, size_t n)
{
	for (size_t i = 0; i < n; i += KVEVENTS_MSG_EVENTS)
		kvevents_send_msg(ev, pub, rp, seqp, evs + i,
				  n - i < KVEVENTS_MSG_EVENTS ? n - i : KVEVENTS_MSG_EVENTS);
}

/* Everything to the main socket; each group's share (and the clears of
 * everything) to the group's. */
static void kvevents_send(struct kvevents *ev)
{
	if (ev->pub)
		kvevents_send_on(ev, ev->pub, ev->main_rp, &ev->seq, ev->send.ev, ev->send.n);
	pthread_mutex_lock(&ev->chan_lock);
	if (ev->chan_n && ev->sub.cap < ev->send.n) {
		struct kvevent *na = kvt_mem_realloc(ev->mem, ev->sub.ev,
						     ev->sub.cap * sizeof(*na),
						     ev->send.n * sizeof(*na));
		if (na) {
			ev->sub.ev = na;
			ev->sub.cap = ev->send.n;
		} else {
			atomic_fetch_add_explicit(&ev->c_dropped, ev->send.n, memory_order_relaxed);
		}
	}
	for (size_t c = 0; c < ev->chan_n && ev->sub.cap >= ev->send.n; c++) {
		struct kvev_chan *ch = &ev->chans[c];
		ev->sub.n = 0;
		for (size_t i = 0; i < ev->send.n; i++)
			if (ev->send.ev[i].group == ch->group ||
			    ev->send.ev[i].group == KVEV_GROUP_ALL)
				ev->sub.ev[ev->sub.n++] = ev->send.ev[i];
		if (ev->sub.n)
			kvevents_send_on(ev, ch->pub, ch->rp, &ch->seq, ev->sub.ev, ev->sub.n);
	}
	pthread_mutex_unlock(&ev->chan_lock);
}

static void *kvevents_main(void *arg)
{
	struct kvevents *ev = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&ev->lock);
	for (;;) {
		struct evq t;
		bool stop;
		while (!ev->stop && ev->fill.n == 0)
			pthread_cond_wait(&ev->cond, &ev->lock);
		if (!ev->stop && ev->cfg.batch_ms) {
			/* Let the batch fill: one message per burst. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += (long)(ev->cfg.batch_ms % 1000) * 1000000L;
			until.tv_sec += ev->cfg.batch_ms / 1000 + until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			while (!ev->stop &&
			       pthread_cond_timedwait(&ev->cond, &ev->lock, &until) != ETIMEDOUT)
				;
		}
		stop = ev->stop;
		t = ev->fill;
		ev->fill = ev->send;
		ev->fill.n = 0;
		ev->send = t;
		pthread_mutex_unlock(&ev->lock);
		if (ev->send.n)
			kvevents_send(ev);
		ev->send.n = 0;
		pthread_mutex_lock(&ev->lock);
		if (stop && ev->fill.n == 0)
			break;
	}
	pthread_mutex_unlock(&ev->lock);
	return NULL;
}

/* ------------------------------------------------------------------------
 * The ZAP thread: how many peers a bound socket holds
 */

static void kvevents_zap_wake(struct kvevents *ev)
{
	uint64_t one = 1;
	ssize_t w = write(ev->zap_wake, &one, sizeof(one));
	(void)w; /* fails only if the count is huge: the thread wakes anyway */
}

/* Hand socket id's monitor (pair), or its closing (pair NULL), to the ZAP
 * thread.  0, -ENOMEM. */
static int kvevents_zap_post(struct kvevents *ev, uint32_t id, void *pair)
{
	int ret = 0;

	pthread_mutex_lock(&ev->zap_lock);
	if (ev->zap_new_n == ev->zap_new_cap) {
		size_t nc = ev->zap_new_cap ? 2 * ev->zap_new_cap : 8;
		struct kvev_mon *na = kvt_mem_realloc(ev->mem, ev->zap_new,
						      ev->zap_new_cap * sizeof(*na),
						      nc * sizeof(*na));
		if (!na) {
			ret = -ENOMEM;
			goto out;
		}
		ev->zap_new = na;
		ev->zap_new_cap = nc;
	}
	ev->zap_new[ev->zap_new_n++] = (struct kvev_mon){ id, pair };
out:
	pthread_mutex_unlock(&ev->zap_lock);
	if (ret == 0)
		kvevents_zap_wake(ev);
	return ret;
}

/* Before pub (not bound yet) binds: give it a ZAP domain and a monitor the
 * ZAP thread reads.  *id: its id.  0, -ENOMEM, -errno. */
static int kvevents_watch(struct kvevents *ev, void *pub, uint32_t *id)
{
	char name[48];
	int zero = 0, ret;
	void *pair = zmq_socket(ev->zctx, ZMQ_PAIR);

	if (!pair)
		return -zmq_errno();
	pthread_mutex_lock(&ev->zap_lock);
	*id = ev->zap_ids++;
	pthread_mutex_unlock(&ev->zap_lock);
	zmq_setsockopt(pair, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(pair, ZMQ_LINGER, &zero, sizeof(zero));
	snprintf(name, sizeof(name), "inproc://kvevents.monitor.%" PRIu32, *id);
	/* Nothing is accepted before the bind: the pair is connected before
	 * the monitor has an event to send. */
	if (zmq_socket_monitor(pub, name, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) < 0) {
		ret = zmq_errno() ? -zmq_errno() : -ENOMEM;
		zmq_close(pair);
		return ret;
	}
	ret = zmq_connect(pair, name);
	if (ret == 0) {
		snprintf(name, sizeof(name), "kvevents.%" PRIu32, *id);
		ret = zmq_setsockopt(pub, ZMQ_ZAP_DOMAIN, name, strlen(name));
	}
	if (ret < 0)
		ret = zmq_errno() ? -zmq_errno() : -ENOMEM;
	else
		ret = kvevents_zap_post(ev, *id, pair);
	if (ret < 0) {
		zmq_socket_monitor(pub, NULL, 0);
		zmq_close(pair);
	}
	return ret;
}

/* Close pub; first stop its monitor (the thread that owns pub), so that
 * libzmq sends it no event its reader could miss. */
static void kvevents_pub_close(struct kvevents *ev, void *pub, uint32_t id)
{
	if (id != KVEV_UNWATCHED) {
		zmq_socket_monitor(pub, NULL, 0);
		/* Without memory, the thread keeps counting its peers (until
		 * close), whose ids no other socket uses. */
		kvevents_zap_post(ev, id, NULL);
	}
	zmq_close(pub);
}

/* ZAP thread: take the sockets handed over.  Returns the stop flag. */
static bool kvevents_zap_adopt(struct kvevents *ev)
{
	size_t i = 0;
	bool stop;

	pthread_mutex_lock(&ev->zap_lock);
	stop = ev->zap_stop;
	for (; i < ev->zap_new_n; i++) {
		struct kvev_mon *m = &ev->zap_new[i];
		if (!m->pair) {
			for (size_t k = 0; k < ev->mon_n; k++)
				if (ev->mons[k].id == m->id) {
					zmq_close(ev->mons[k].pair);
					ev->mons[k] = ev->mons[--ev->mon_n];
					break;
				}
			for (size_t k = 0; k < ev->peer_n;)
				if (ev->peers[k].mon == m->id)
					ev->peers[k] = ev->peers[--ev->peer_n];
				else
					k++;
			continue;
		}
		if (ev->mon_n == ev->mon_cap) {
			size_t nc = ev->mon_cap ? 2 * ev->mon_cap : 4;
			struct kvev_mon *na = kvt_mem_realloc(ev->mem, ev->mons,
							      ev->mon_cap * sizeof(*na),
							      nc * sizeof(*na));
			if (!na)
				break; /* the rest waits, in order (its events queue) */
			ev->mons = na;
			ev->mon_cap = nc;
		}
		ev->mons[ev->mon_n++] = *m;
	}
	if (i) {
		memmove(ev->zap_new, ev->zap_new + i,
			(ev->zap_new_n - i) * sizeof(*ev->zap_new));
		ev->zap_new_n -= i;
	}
	pthread_mutex_unlock(&ev->zap_lock);
	return stop;
}

/* The peer's IP address, as libzmq puts it in a ZAP request; "" if not
 * TCP, or fd is no socket any more. */
static void kvevents_peer_addr(int fd, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	out[0] = 0;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		return;
	if (getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)cap, NULL, 0,
			NI_NUMERICHOST) != 0)
		out[0] = 0;
}

/* ZAP thread: read every monitor's events into the table of peers. */
static void kvevents_zap_drain(struct kvevents *ev)
{
	for (size_t m = 0; m < ev->mon_n; m++) {
		for (;;) {
			uint8_t head[6];
			uint16_t event;
			uint32_t fd;
			zmq_msg_t msg;
			int more, n;

			zmq_msg_init(&msg);
			n = zmq_msg_recv(&msg, ev->mons[m].pair, ZMQ_DONTWAIT);
			if (n < 0) {
				zmq_msg_close(&msg);
				break;
			}
			/* Frame 1: event (16 bits), value (32: the fd); frame
			 * 2: the endpoint. */
			if (n == sizeof(head))
				memcpy(head, zmq_msg_data(&msg), sizeof(head));
			more = zmq_msg_more(&msg);
			zmq_msg_close(&msg);
			while (more) {
				zmq_msg_init(&msg);
				if (zmq_msg_recv(&msg, ev->mons[m].pair, 0) < 0)
					more = 0;
				else
					more = zmq_msg_more(&msg);
				zmq_msg_close(&msg);
			}
			if (n != sizeof(head))
				continue;
			memcpy(&event, head, sizeof(event));
			memcpy(&fd, head + 2, sizeof(fd));
			for (size_t k = 0; k < ev->peer_n; k++)
				if (ev->peers[k].mon == ev->mons[m].id &&
				    ev->peers[k].fd == (int)fd) {
					ev->peers[k] = ev->peers[--ev->peer_n];
					break;
				}
			if (event != ZMQ_EVENT_ACCEPTED)
				continue;
			if (ev->peer_n == ev->peer_cap) {
				size_t nc = ev->peer_cap ? 2 * ev->peer_cap : 64;
				struct kvev_peer *na = kvt_mem_realloc(ev->mem, ev->peers,
								       ev->peer_cap * sizeof(*na),
								       nc * sizeof(*na));
				if (!na)
					continue; /* not counted: the count errs low */
				ev->peers = na;
				ev->peer_cap = nc;
			}
			ev->peers[ev->peer_n].fd = (int)fd;
			ev->peers[ev->peer_n].mon = ev->mons[m].id;
			kvevents_peer_addr((int)fd, ev->peers[ev->peer_n].addr,
					   sizeof(ev->peers[ev->peer_n].addr));
			ev->peer_n++;
		}
	}
}

/* ZAP thread: answer one request waiting on the REP socket (RFC 27:
 * version, request id, domain, address, identity, mechanism,
 * credentials...).  false if none was waiting. */
static bool kvevents_zap_answer(struct kvevents *ev)
{
	enum { ZAP_VERSION, ZAP_REQID, ZAP_DOMAIN, ZAP_ADDRESS, ZAP_FRAMES = 6 };
	char fr[4][256];
	size_t fr_len[4] = { 0 };
	unsigned nf = 0;
	const char *status = "400", *text = "bad request";
	uint32_t id;
	size_t all = 0, here = 0;
	int more = 1;

	while (more) {
		zmq_msg_t msg;
		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, ev->zap_rep, nf ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			if (nf == 0)
				return false;
			break;
		}
		if (nf < 4) {
			fr_len[nf] = zmq_msg_size(&msg);
			if (fr_len[nf] >= sizeof(fr[nf]))
				fr_len[nf] = sizeof(fr[nf]) - 1;
			memcpy(fr[nf], zmq_msg_data(&msg), fr_len[nf]);
			fr[nf][fr_len[nf]] = 0;
		}
		nf++;
		more = zmq_msg_more(&msg);
		zmq_msg_close(&msg);
	}
	/* Its peer was accepted before it asked: read that (and any socket
	 * just bound) first. */
	kvevents_zap_adopt(ev);
	kvevents_zap_drain(ev);
	if (nf >= ZAP_FRAMES && strcmp(fr[ZAP_VERSION], "1.0") == 0 &&
	    sscanf(fr[ZAP_DOMAIN], "kvevents.%" SCNu32, &id) == 1) {
		for (size_t k = 0; k < ev->peer_n; k++) {
			if (ev->peers[k].mon != id)
				continue;
			all++;
			here += fr[ZAP_ADDRESS][0] &&
				strcmp(ev->peers[k].addr, fr[ZAP_ADDRESS]) == 0;
		}
		if (all > ev->cfg.sub_max || here > KVEVENTS_SUB_PER_ADDR) {
			text = "too many subscribers";
			atomic_fetch_add_explicit(&ev->c_refused, 1, memory_order_relaxed);
			if (!ev->refusing)
				kvt_logf(ev->log, KVT_LOG_WARN,
					 "events: refusing subscribers (socket %" PRIu32
					 ": %zu connections, events.max_subscribers %u; %zu "
					 "from %s, at most %d)", id, all, ev->cfg.sub_max, here,
					 fr[ZAP_ADDRESS], KVEVENTS_SUB_PER_ADDR);
			ev->refusing = true;
		} else {
			status = "200";
			text = "OK";
			ev->refusing = false;
		}
	}
	/* Reply: version, request id, status code, status text, user id,
	 * metadata. */
	zmq_send(ev->zap_rep, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(ev->zap_rep, fr[ZAP_REQID], fr_len[ZAP_REQID], ZMQ_SNDMORE);
	zmq_send(ev->zap_rep, status, 3, ZMQ_SNDMORE);
	zmq_send(ev->zap_rep, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(ev->zap_rep, "", 0, ZMQ_SNDMORE);
	zmq_send(ev->zap_rep, "", 0, 0);
	return true;
}

static void *kvevents_zap_main(void *arg)
{
	struct kvevents *ev = arg;
	zmq_pollitem_t *items = NULL;
	size_t items_cap = 0;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!kvevents_zap_adopt(ev)) {
		size_t n = 2;
		uint64_t v;
		if (items_cap < ev->mon_n + 2) {
			zmq_pollitem_t *na = kvt_mem_realloc(ev->mem, items,
							     items_cap * sizeof(*na),
							     (ev->mon_n + 2) * sizeof(*na));
			if (na) {
				items = na;
				items_cap = ev->mon_n + 2;
			}
		}
		if (!items) {
			/* Without memory for poll items: answer, and read the
			 * monitors, every 10 ms. */
			kvevents_zap_drain(ev);
			while (kvevents_zap_answer(ev))
				;
			usleep(10000);
			continue;
		}
		items[0] = (zmq_pollitem_t){ NULL, ev->zap_wake, ZMQ_POLLIN, 0 };
		items[1] = (zmq_pollitem_t){ ev->zap_rep, 0, ZMQ_POLLIN, 0 };
		for (size_t m = 0; m < ev->mon_n && n < items_cap; m++)
			items[n++] = (zmq_pollitem_t){ ev->mons[m].pair, 0, ZMQ_POLLIN, 0 };
		if (zmq_poll(items, (int)n, -1) < 0)
			continue;
		if (items[0].revents & ZMQ_POLLIN) {
			ssize_t r = read(ev->zap_wake, &v, sizeof(v));
			(void)r; /* EAGAIN: read with an earlier wake */
		}
		kvevents_zap_drain(ev);
		while (kvevents_zap_answer(ev))
			;
	}
	kvt_mem_free(ev->mem, items, items_cap * sizeof(*items));
	return NULL;
}

/* Bind the ZAP handler and start its thread.  0, -ENOMEM, -errno. */
static int kvevents_zap_start(struct kvevents *ev)
{
	int linger = 0, ret;

	ev->zap_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev->zap_wake < 0)
		return -errno;
	ev->zap_rep = zmq_socket(ev->zctx, ZMQ_REP);
	if (!ev->zap_rep)
		return -zmq_errno();
	zmq_setsockopt(ev->zap_rep, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_bind(ev->zap_rep, "inproc://zeromq.zap.01") < 0)
		return -zmq_errno();
	ret = -pthread_create(&ev->zap_thread, NULL, kvevents_zap_main, ev);
	if (ret < 0)
		return ret;
	pthread_setname_np(ev->zap_thread, "kvt-events-zap");
	ev->zap_started = true;
	return 0;
}

/* Stop the ZAP thread (every socket it watched is closed) and close its
 * sockets. */
static void kvevents_zap_stop(struct kvevents *ev)
{
	if (ev->zap_started) {
		pthread_mutex_lock(&ev->zap_lock);
		ev->zap_stop = true;
		pthread_mutex_unlock(&ev->zap_lock);
		kvevents_zap_wake(ev);
		pthread_join(ev->zap_thread, NULL);
		ev->zap_started = false;
	}
	for (size_t k = 0; k < ev->mon_n; k++)
		zmq_close(ev->mons[k].pair);
	for (size_t k = 0; k < ev->zap_new_n; k++)
		if (ev->zap_new[k].pair)
			zmq_close(ev->zap_new[k].pair);
	if (ev->zap_rep)
		zmq_close(ev->zap_rep);
	if (ev->zap_wake >= 0)
		close(ev->zap_wake);
	kvt_mem_free(ev->mem, ev->mons, ev->mon_cap * sizeof(*ev->mons));
	kvt_mem_free(ev->mem, ev->peers, ev->peer_cap * sizeof(*ev->peers));
	kvt_mem_free(ev->mem, ev->zap_new, ev->zap_new_cap * sizeof(*ev->zap_new));
}

/* ------------------------------------------------------------------------
 * What a peer may cost: the PUB sockets and the replay endpoints' ROUTERs
 */

/* Bound what a peer of sock (unauthenticated: anyone who reaches it) can
 * cost, before sock binds or connects (kvevents.h, doc/security.md): the
 * largest message libzmq takes from it (KVEVENTS_IN_MAX), the handshake
 * deadline (KVEVENTS_HANDSHAKE_MS) and TCP keepalive
 * (KVEVENTS_KEEPALIVE_*).  Every socket kvevents and kvreplay open for
 * peers gets these, here only; the high-water marks and linger are each
 * socket's own. */
static void kvevents_peer_bounds(void *sock)
{
	int64_t in_max = KVEVENTS_IN_MAX;
	int hs = KVEVENTS_HANDSHAKE_MS, ka = 1, ka_idle = KVEVENTS_KEEPALIVE_IDLE;
	int ka_intvl = KVEVENTS_KEEPALIVE_INTVL, ka_cnt = KVEVENTS_KEEPALIVE_CNT;

	zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &in_max, sizeof(in_max));
	zmq_setsockopt(sock, ZMQ_HANDSHAKE_IVL, &hs, sizeof(hs));
	zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE, &ka, sizeof(ka));
	zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_IDLE, &ka_idle, sizeof(ka_idle));
	zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_INTVL, &ka_intvl, sizeof(ka_intvl));
	zmq_setsockopt(sock, ZMQ_TCP_KEEPALIVE_CNT, &ka_cnt, sizeof(ka_cnt));
}

/* kvreplay_guard_fn: a replay ROUTER's peers are bounded as a bound PUB
 * socket's: kvevents_peer_bounds, and the ZAP thread watches it. */
static int kvevents_rep_guard(void *arg, void *sock, uint32_t *id)
{
	kvevents_peer_bounds(sock);
	return kvevents_watch(arg, sock, id);
}

/* kvreplay_close_fn. */
static void kvevents_rep_close(void *arg, void *sock, uint32_t id)
{
	kvevents_pub_close(arg, sock, id);
}

/* ------------------------------------------------------------------------
 * Open and close
 */

static void kvevents_free(struct kvevents *ev)
{
	/* The replay endpoints first: closing their sockets posts to the ZAP
	 * thread, stopped below. */
	kvreplay_close(ev->rep);
	ev->rep = NULL;
	ev->main_rp = NULL;
	for (size_t c = 0; c < ev->chan_n; c++)
		ev->chans[c].rp = NULL;
	for (size_t c = 0; c < ev->chan_n; c++)
		kvevents_pub_close(ev, ev->chans[c].pub, ev->chans[c].zap_id);
	kvt_mem_free(ev->mem, ev->chans, ev->chan_cap * sizeof(*ev->chans));
	kvt_mem_free(ev->mem, ev->sub.ev, ev->sub.cap * sizeof(*ev->sub.ev));
	pthread_mutex_destroy(&ev->chan_lock);
	if (ev->pub)
		kvevents_pub_close(ev, ev->pub, ev->pub_zap_id);
	/* The sockets it watched are closed, their monitors stopped. */
	kvevents_zap_stop(ev);
	pthread_mutex_destroy(&ev->zap_lock);
	if (ev->zctx)
		zmq_ctx_term(ev->zctx);
	kvt_mem_free(ev->mem, ev->fill.ev, ev->fill.cap * sizeof(*ev->fill.ev));
	kvt_mem_free(ev->mem, ev->send.ev, ev->send.cap * sizeof(*ev->send.ev));
	kvt_mem_free(ev->mem, ev->buf, ev->buf_cap);
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	kvt_mem_free(ev->mem, ev, sizeof(*ev));
}

/* A PUB socket on endpoint ep (what names it in the log): bound if ep
 * holds a wildcard or is a local transport, else connected (vLLM's rule).
 * A bound one is watched by the ZAP thread: *zap_id, else KVEV_UNWATCHED.
 * 0, KVT_EOPTVAL (refused: logged), -ENOMEM, -errno. */
static int kvevents_socket(struct kvevents *ev, const char *ep, const char *what, void **out,
			   uint32_t *zap_id)
{
	int linger = 200, hwm = KVEVENTS_SNDHWM, ret;
	void *pub = zmq_socket(ev->zctx, ZMQ_PUB);

	if (!pub)
		return -ENOMEM;
	zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	kvevents_peer_bounds(pub);
	*zap_id = KVEV_UNWATCHED;
	if (strchr(ep, '*') || strstr(ep, "::") || strncmp(ep, "ipc://", 6) == 0 ||
	    strncmp(ep, "inproc://", 9) == 0) {
		/* A listener: the ZAP thread bounds its peers. */
		ret = kvevents_watch(ev, pub, zap_id);
		if (ret < 0) {
			kvt_logf(ev->log, KVT_LOG_ERROR, "events: cannot watch %s %s: %s", what,
				 ep, kvt_strerror(ret));
			zmq_close(pub);
			return ret;
		}
		ret = zmq_bind(pub, ep);
	} else {
		ret = zmq_connect(pub, ep);
	}
	if (ret < 0) {
		kvt_logf(ev->log, KVT_LOG_ERROR, "events: cannot use %s %s: %s", what, ep,
			 zmq_strerror(zmq_errno()));
		kvevents_pub_close(ev, pub, *zap_id);
		return KVT_EOPTVAL;
	}
	*out = pub;
	return 0;
}

int kvevents_open(struct kvevents **out, const struct kvevents_config *cfg,
		  struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct kvevents *ev = kvt_mem_calloc(mem, 1, sizeof(*ev));
	const char *ep = cfg->endpoint;
	int ret;
	size_t len;

	if (!ev)
		return -ENOMEM;
	if (cfg->replay_endpoint && !ep) {
		/* It replays the main socket's messages. */
		kvt_logf(log, KVT_LOG_ERROR, "events: events.replay_endpoint needs "
			 "events.endpoint");
		kvt_mem_free(mem, ev, sizeof(*ev));
		return KVT_EOPTVAL;
	}
	ev->cfg = *cfg;
	if (!ev->cfg.queue_max)
		ev->cfg.queue_max = KVEVENTS_DEF_QUEUE_MAX;
	if (!ev->cfg.sub_max)
		ev->cfg.sub_max = KVEVENTS_DEF_SUB_MAX;
	if (!ev->cfg.replay_max)
		ev->cfg.replay_max = KVEVENTS_DEF_REPLAY_MAX;
	if (!ev->cfg.replay_bytes)
		ev->cfg.replay_bytes = KVEVENTS_DEF_REPLAY_BYTES;
	ev->mem = mem;
	ev->log = log;
	ev->zap_wake = -1;
	ev->pub_zap_id = KVEV_UNWATCHED;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_mutex_init(&ev->chan_lock, NULL);
	pthread_mutex_init(&ev->zap_lock, NULL);
	pthread_cond_init(&ev->cond, NULL);
	ev->zctx = zmq_ctx_new();
	if (!ev->zctx) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = kvevents_zap_start(ev);
	if (ret < 0) {
		kvt_logf(log, KVT_LOG_ERROR, "events: cannot start the ZAP handler: %s",
			 kvt_strerror(ret));
		goto fail;
	}
	if (ep) {
		ret = kvevents_socket(ev, ep, "events.endpoint", &ev->pub, &ev->pub_zap_id);
		if (ret < 0)
			goto fail;
		len = sizeof(ev->endpoint);
		if (zmq_getsockopt(ev->pub, ZMQ_LAST_ENDPOINT, ev->endpoint, &len) < 0 ||
		    !ev->endpoint[0])
			snprintf(ev->endpoint, sizeof(ev->endpoint), "%s", ep);
		atomic_store(&ev->listening, true);
	}
	if (ev->cfg.replay_endpoint || ev->cfg.groups) {
		struct kvreplay_config rc = {
			.zctx = ev->zctx, .topic = ev->cfg.topic, .max = ev->cfg.replay_max,
			.bytes = ev->cfg.replay_bytes, .sub_max = ev->cfg.sub_max,
			.guard = kvevents_rep_guard, .close = kvevents_rep_close, .arg = ev,
		};
		ret = kvreplay_open(&ev->rep, &rc, mem, log);
		if (ret < 0)
			goto fail;
	}
	if (ev->cfg.replay_endpoint) {
		ret = kvreplay_bind(ev->rep, ev->cfg.replay_endpoint, 0, &ev->main_rp);
		if (ret < 0)
			goto fail;
	}
	ret = -pthread_create(&ev->thread, NULL, kvevents_main, ev);
	if (ret < 0)
		goto fail;
	pthread_setname_np(ev->thread, "kvt-events");
	ev->started = true;
	if (ep)
		kvt_logf(log, KVT_LOG_INFO, "events: publishing KV events on %s", ev->endpoint);
	*out = ev;
	return 0;
fail:
	kvevents_free(ev);
	return ret;
}

void kvevents_close(struct kvevents *ev)
{
	if (!ev)
		return;
	if (ev->started) {
		pthread_mutex_lock(&ev->lock);
		ev->stop = true;
		pthread_cond_signal(&ev->cond);
		pthread_mutex_unlock(&ev->lock);
		pthread_join(ev->thread, NULL);
	}
	kvevents_free(ev);
}

int kvevents_group_endpoint(struct kvevents *ev, uint32_t group, const char *endpoint)
{
	struct kvev_chan *ch = NULL;
	void *pub = NULL;
	uint32_t zap_id = KVEV_UNWATCHED;
	int ret = 0;

	if (group == 0 || group >= KVT_QUOTA_GROUPS ||
	    (endpoint && strlen(endpoint) >= sizeof(ch->want)))
		return KVT_EOPTVAL;
	pthread_mutex_lock(&ev->chan_lock);
	for (size_t c = 0; c < ev->chan_n; c++)
		if (ev->chans[c].group == group)
			ch = &ev->chans[c];
	if (ch && endpoint && strcmp(ch->want, endpoint) == 0)
		goto out; /* as it is */
	if (endpoint && *endpoint) {
		char what[48];
		snprintf(what, sizeof(what), "the endpoint of group %u", group);
		ret = kvevents_socket(ev, endpoint, what, &pub, &zap_id);
		if (ret < 0)
			goto out;
	}
	if (!ch && pub) {
		if (ev->chan_n == ev->chan_cap) {
			size_t nc = ev->chan_cap ? 2 * ev->chan_cap : 8;
			struct kvev_chan *na = kvt_mem_realloc(ev->mem, ev->chans,
							       ev->chan_cap * sizeof(*na),
							       nc * sizeof(*na));
			if (!na) {
				kvevents_pub_close(ev, pub, zap_id);
				ret = -ENOMEM;
				goto out;
			}
			ev->chans = na;
			ev->chan_cap = nc;
		}
		ch = &ev->chans[ev->chan_n++];
		memset(ch, 0, sizeof(*ch));
		ch->group = group;
	} else if (ch) {
		kvevents_pub_close(ev, ch->pub, ch->zap_id);
		if (ch->rp && !pub) {
			/* The feed's replay goes with it. */
			kvreplay_unbind(ev->rep, ch->rp);
			ch->rp = NULL;
		} else if (ch->rp) {
			/* A new socket numbers from 0: what was kept is
			 * another feed's. */
			kvreplay_forget(ev->rep, ch->rp);
		}
		if (!pub) { /* closed: the last one takes its place */
			*ch = ev->chans[--ev->chan_n];
			ch = NULL;
		}
	}
	if (ch) {
		ch->pub = pub;
		ch->zap_id = zap_id;
		ch->seq = 0;
		snprintf(ch->want, sizeof(ch->want), "%s", endpoint);
		kvt_logf(ev->log, KVT_LOG_INFO, "events: publishing group %u's KV events on %s",
			 group, endpoint);
	}
	atomic_store(&ev->listening, ev->pub != NULL || ev->chan_n > 0);
out:
	pthread_mutex_unlock(&ev->chan_lock);
	return ret;
}

int kvevents_group_replay(struct kvevents *ev, uint32_t group, const char *endpoint)
{
	struct kvev_chan *ch = NULL;
	int ret = 0;

	if (group == 0 || group >= KVT_QUOTA_GROUPS ||
	    (endpoint && strlen(endpoint) >= KVREPLAY_EP_LEN))
		return KVT_EOPTVAL;
	if (!ev->rep)
		return KVT_ESTATE;
	pthread_mutex_lock(&ev->chan_lock);
	for (size_t c = 0; c < ev->chan_n; c++)
		if (ev->chans[c].group == group)
			ch = &ev->chans[c];
	if (!ch) {
		/* It replays the group's feed: none, nothing to replay. */
		ret = endpoint && *endpoint ? KVT_ESTATE : 0;
		goto out;
	}
	if (ch->rp && endpoint && strcmp(kvreplay_want(ch->rp), endpoint) == 0)
		goto out; /* as it is */
	if (ch->rp) {
		kvreplay_unbind(ev->rep, ch->rp);
		ch->rp = NULL;
	}
	if (endpoint && *endpoint)
		ret = kvreplay_bind(ev->rep, endpoint, group, &ch->rp);
out:
	pthread_mutex_unlock(&ev->chan_lock);
	return ret;
}

void kvevents_stats(struct kvevents *ev, kvt_stats_fn fn, void *ctx)
{
#define S(name, c) fn(ctx, "events." name, atomic_load_explicit(&ev->c, memory_order_relaxed), NULL)
	fn(ctx, "events.endpoint", 0, ev->endpoint);
	S("queued", c_events);
	S("dropped", c_dropped);
	S("batches", c_batches);
	S("send_errors", c_send_errors);
	S("bytes", c_bytes);
	S("refused", c_refused);
#undef S
	if (ev->rep) {
		if (ev->main_rp)
			fn(ctx, "events.replay_endpoint", 0, kvreplay_endpoint(ev->main_rp));
		kvreplay_stats(ev->rep, fn, ctx);
	}
}

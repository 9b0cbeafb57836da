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
 * vLLM sends one per scheduler step), at close, or when a bound socket
 * has subscriptions to read (kvevents_wait polls them); it swaps the arrays,
 * encodes one KVEventBatch with msgpack-c's packer into its buffer, and
 * sends [topic, seq, payload].  A full queue drops new events (counted:
 * a router that misses events sees stale state, never a stalled put).
 *
 * Each quota group has its share of the queue (doc/kvevents.md "Per
 * tenant"): events.queue_max over the groups with events queued, all of
 * it for a group alone.  A group at its share drops its own new events;
 * one under it finds room in a full queue by pushing out the oldest
 * queued event of a group over its share (left in place as a hole, type
 * 0, that the thread skips: the order of what stays is kept, and a put
 * never moves the queue), so that one tenant's burst cannot drop
 * another's events.
 *
 * What a peer of a socket may cost is kvzap.c's, below this file and
 * kvreplay.c: ev->zap, opened on the context before any socket, sets the
 * peer bounds of every socket (kvzap_peer_bounds) and its thread watches
 * every bound one (kvzap_watch: at most events.max_subscribers peers).
 * A bound socket's subscriptions are counted here, by peer address, as
 * the thread sends (kvevents_subs), and an address past the bound has
 * the ZAP thread let its peers go (kvzap_drop_addr).
 *
 * The replay endpoints (vLLM's replay_endpoint: the main socket's, with
 * events.replay_endpoint, and those of groups' feeds) are kvreplay.c's,
 * below this file: ev->rep, opened with events.replay_endpoint or
 * events.groups, owns their thread, ROUTER sockets and rings; the
 * publisher thread hands it a copy of each message it sends on a feed
 * with one (kvreplay_keep); it guards its ROUTER sockets with ev->zap
 * as this file does its bound PUB sockets.
 *
 * Locks: ev->lock guards the filling array and its groups' shares, stop
 * and the wake flag;
 * ev->chan_lock the groups' sockets (kvreplay's ring lock is taken under
 * it, never the other way; ev->lock too, reading batches); everything
 * else belongs to its thread (or to open/close around them).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include <msgpack.h>
#include <zmq.h>

#include "kvevents.h"
#include "kvt_keyhash.h"
#include "kvreplay.h"
#include "kvzap.h"

#define KVEV_XSTR(x) #x
#define KVEV_STR(x) KVEV_XSTR(x)

struct evq {
	struct kvevent *ev;
	size_t n, cap;
	size_t holes;                   /* of n, events pushed out (type 0) */
};

/* An event's group as the shares count it (KVEV_GROUP_ALL: none). */
static inline uint32_t kvevents_gi(uint32_t group)
{
	return group < KVT_QUOTA_GROUPS ? group : 0;
}

/* The distinct topics a bound socket's peers from one address subscribed
 * to (kvevents.h KVEVENTS_SUBS_MAX): their hashes. */
struct kvev_addr {
	char addr[KVZAP_ADDR_LEN];      /* libzmq's Peer-Address */
	uint32_t n;
	uint64_t h[KVEVENTS_SUBS_MAX];
};

/* A bound socket's subscriptions, by address. */
struct kvev_subs {
	bool bound;                     /* a listener: an XPUB */
	int fd;                         /* a listener's ZMQ_FD: readable when libzmq has
					 * commands for it, subscriptions among them
					 * (kvevents_wait); -1 if not one */
	uint32_t zap_id;                /* its kvzap id (KVZAP_UNWATCHED: none) */
	struct kvev_addr *a;            /* the addresses of its peers (a few stale) */
	size_t a_n, a_cap;
	uint32_t total;                 /* of a[].n */
	uint64_t resets;                /* times its peers from an address were let go
					 * (a group's: events.<g>.sub_resets) */
};

/* A group's own socket. */
struct kvev_chan {
	uint32_t group;
	uint32_t zap_id;                /* KVZAP_UNWATCHED if connected */
	void *pub;
	struct kvev_subs subs;
	struct kvreplay_ep *rp;         /* its replay endpoint, or NULL */
	uint64_t seq;
	uint64_t from_batch;            /* the first batch it gets: none queued
					 * before it opened (a group's feed that
					 * was closed is another tenant's now) */
	char want[256];                 /* the endpoint asked for */
};

struct kvevents {
	struct kvevents_config cfg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;
	void *zctx, *pub;               /* pub: NULL without events.endpoint */
	uint32_t pub_zap_id;            /* KVZAP_UNWATCHED if connected */
	struct kvev_subs pub_subs;
	char endpoint[256];             /* ZMQ_LAST_ENDPOINT: what it is bound to */

	pthread_mutex_t chan_lock;      /* chans; their sockets are used under it */
	struct kvev_chan *chans;
	size_t chan_n, chan_cap;
	uint64_t chan_gen;              /* chan_lock: changed whenever chans is */
	_Atomic bool listening;         /* a socket exists: events are worth queuing */

	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	int wake;                       /* eventfd: the thread's wake-up (an event queued
					 * into an empty queue, stop, chans changed) */
	struct evq fill;                /* lock */
	bool stop;                      /* lock */
	uint64_t batches;               /* lock: fill handed to send, so far */

	/* The groups' shares of fill (lock; kvevents_push): the events of
	 * each group queued (clears not counted) and where its oldest is;
	 * the groups with any (act[0..active)), and the share of each,
	 * queue_max / active (at least 1). */
	uint32_t gq_count[KVT_QUOTA_GROUPS];
	uint32_t gq_first[KVT_QUOTA_GROUPS];
	uint16_t gq_act[KVT_QUOTA_GROUPS];
	uint32_t gq_active, gq_share;
	uint32_t gq_hog;                /* the group holding the most, lately */
	size_t holes_max;               /* events pushed out of fill at most */

	/* publisher thread */
	struct evq send;                /* batch number send_batch */
	uint64_t send_batch;
	struct evq sub;                 /* one group's share of send */
	struct pollfd *pfd;             /* kvevents_wait's: wake, pub, chans[] */
	size_t pfd_cap;
	uint8_t *buf;
	size_t buf_cap;
	uint64_t seq;

	struct kvzap *zap;              /* the peer bounds (kvzap.c) */
	uint64_t topic_seed;            /* of the topics' hashes (kvevents_topic_hash) */

	/* Replay (doc/kvevents.md "Replay", kvreplay.c): NULL without
	 * events.replay_endpoint and events.groups. */
	struct kvreplay *rep;
	struct kvreplay_ep *main_rp;    /* the main socket's endpoint, or NULL */

	_Atomic uint64_t c_events, c_dropped, c_batches, c_send_errors, c_bytes, c_sub_resets;
	_Atomic uint64_t c_subscriptions;       /* subscriptions the bound sockets took */
	/* lock (counted where the drop is decided; read under it) */
	uint64_t c_share_dropped;
	uint64_t c_gdropped[KVT_QUOTA_GROUPS]; /* events.<g>.dropped */
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

/* An event of group dropped (KVEV_GROUP_ALL: a clear of everything, no
 * group's); share: by the share rule.  The caller adds it to c_dropped
 * (after the lock: a put holds it no longer for that). */
static void kvevents_drop_locked(struct kvevents *ev, uint32_t group, bool share)
{
	if (group < KVT_QUOTA_GROUPS)
		ev->c_gdropped[group]++;
	if (share)
		ev->c_share_dropped++;
}

/* gq_active groups have events queued: each one's share. */
static void kvevents_share_set_locked(struct kvevents *ev)
{
	ev->gq_share = ev->cfg.queue_max / (ev->gq_active ? ev->gq_active : 1);
	if (ev->gq_share == 0)
		ev->gq_share = 1;
}

/* fill was handed to the thread: empty again, no group's events in it. */
static void kvevents_share_reset_locked(struct kvevents *ev)
{
	for (uint32_t i = 0; i < ev->gq_active; i++)
		ev->gq_count[ev->gq_act[i]] = 0;
	ev->gq_active = 0;
	kvevents_share_set_locked(ev);
	ev->gq_hog = 0;
	ev->fill.holes = 0;
}

/* Room for one more event at fill.n (below the physical bound, which the
 * caller checked): false if the array cannot grow. */
static bool kvevents_grow_locked(struct kvevents *ev)
{
	size_t max = ev->cfg.queue_max + ev->holes_max;
	size_t nc = ev->fill.cap ? ev->fill.cap * 2 : 256;
	struct kvevent *na;

	if (ev->fill.n < ev->fill.cap)
		return true;
	if (nc > max)
		nc = max;
	if (nc <= ev->fill.cap)
		return false;
	na = kvt_mem_realloc(ev->mem, ev->fill.ev, ev->fill.cap * sizeof(*na), nc * sizeof(*na));
	if (!na)
		return false;
	ev->fill.ev = na;
	ev->fill.cap = nc;
	return true;
}

/* The queue holds queue_max events and a group under its share (or a
 * clear) needs one more place: the oldest queued event of a group over
 * its share is pushed out (a hole the thread skips), counted as that
 * group's.  false: no group is over its share (clears fill the queue), or
 * holes_max events were pushed out of this array already. */
static bool kvevents_push_out_locked(struct kvevents *ev)
{
	uint32_t h = ev->gq_hog;
	size_t at;

	if (ev->fill.holes >= ev->holes_max)
		return false;
	if (ev->gq_count[h] <= ev->gq_share) {
		/* The one that held the most holds its share no more (or
		 * never did): any other over its share. */
		uint32_t i;
		for (i = 0; i < ev->gq_active; i++)
			if (ev->gq_count[ev->gq_act[i]] > ev->gq_share)
				break;
		if (i == ev->gq_active)
			return false;
		h = ev->gq_hog = ev->gq_act[i];
	}
	at = ev->gq_first[h];
	kvevents_drop_locked(ev, ev->fill.ev[at].group, true);
	atomic_fetch_add_explicit(&ev->c_dropped, 1, memory_order_relaxed);
	ev->fill.ev[at].type = 0;
	ev->fill.holes++;
	/* Its next oldest: after this one (count > share >= 1 before). */
	if (--ev->gq_count[h]) {
		const struct kvevent *e = ev->fill.ev;
		do
			at++;
		while (e[at].type == 0 || e[at].type == KVEV_CLEARED ||
		       kvevents_gi(e[at].group) != h);
		ev->gq_first[h] = (uint32_t)at;
	}
	return true;
}

/* Wake the publisher thread (ev->wake). */
static void kvevents_wake(struct kvevents *ev)
{
	uint64_t one = 1;
	ssize_t w = write(ev->wake, &one, sizeof(one));
	(void)w; /* fails only if the count is huge: the thread wakes anyway */
}

static void kvevents_push(struct kvevents *ev, const struct kvevent *v)
{
	uint32_t g = kvevents_gi(v->group);
	bool clear = v->type == KVEV_CLEARED, fresh, wake;
	size_t at;

	if (!atomic_load_explicit(&ev->listening, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ev->lock);
	/* A group at its share drops its own new events; a clear has no
	 * share (and takes room as one under its share). */
	if (!clear && ev->gq_count[g] >= ev->gq_share) {
		/* (a group alone: the queue is full) */
		kvevents_drop_locked(ev, v->group, ev->gq_active > 1);
		pthread_mutex_unlock(&ev->lock);
		atomic_fetch_add_explicit(&ev->c_dropped, 1, memory_order_relaxed);
		return;
	}
	fresh = !clear && ev->gq_count[g] == 0;
	if (fresh) {
		/* One more group with events queued: every share shrinks,
		 * before this one looks for room. */
		ev->gq_act[ev->gq_active++] = (uint16_t)g;
		kvevents_share_set_locked(ev);
	}
	if (!kvevents_grow_locked(ev) ||
	    (ev->fill.n - ev->fill.holes >= ev->cfg.queue_max && !kvevents_push_out_locked(ev))) {
		if (fresh) {
			ev->gq_active--;
			kvevents_share_set_locked(ev);
		}
		kvevents_drop_locked(ev, v->group, false);
		pthread_mutex_unlock(&ev->lock);
		atomic_fetch_add_explicit(&ev->c_dropped, 1, memory_order_relaxed);
		return;
	}
	at = ev->fill.n++;
	ev->fill.ev[at] = *v;
	if (!clear) {
		if (fresh)
			ev->gq_first[g] = (uint32_t)at;
		if (++ev->gq_count[g] > ev->gq_count[ev->gq_hog])
			ev->gq_hog = g;
	}
	wake = ev->fill.n == 1;
	pthread_mutex_unlock(&ev->lock);
	atomic_fetch_add_explicit(&ev->c_events, 1, memory_order_relaxed);
	if (wake)
		kvevents_wake(ev);
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

/* What a bound socket's subscriptions' count holds. */
static void kvevents_subs_free(struct kvevents *ev, struct kvev_subs *s)
{
	kvt_mem_free(ev->mem, s->a, s->a_cap * sizeof(*s->a));
	s->a = NULL;
	s->a_n = s->a_cap = 0;
	s->total = 0;
}

/* A topic's hash, seeded per publisher: a peer cannot choose topics that
 * collide (which would count as one). */
static uint64_t kvevents_topic_hash(const struct kvevents *ev, const uint8_t *p, size_t n)
{
	uint64_t h = ev->topic_seed ^ 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

/* Forget address i of s (its topics no longer counted). */
static void kvevents_addr_forget(struct kvev_subs *s, size_t i)
{
	s->total -= s->a[i].n;
	s->a[i] = s->a[--s->a_n];
}

/* Let the peers of address addr of s go (kvzap_drop_addr). */
static void kvevents_addr_let_go(struct kvevents *ev, struct kvev_subs *s, const char *addr,
				 const char *why)
{
	uint64_t drops;

	/* Nothing more read from the socket until its descriptors from addr
	 * are disconnected: libzmq applies a subscription as this thread
	 * reads, so that what a flooder gets past the bound is what libzmq
	 * read before (kvevents.h KVEVENTS_SUBS_FLOOD_MAX). */
	(void)kvzap_drop_wait(ev->zap, kvzap_drop_addr(ev->zap, s->zap_id, addr),
			      KVEVENTS_DROP_WAIT_MS);
	s->resets++;
	drops = atomic_fetch_add_explicit(&ev->c_sub_resets, 1, memory_order_relaxed) + 1;
	if ((drops & (drops - 1)) == 0) /* 1, 2, 4, ...: a flood logs little */
		kvt_logf(ev->log, KVT_LOG_WARN, "events: the subscribers from %s held %s: "
			 "let go, the others kept (%" PRIu64 " times so far)", addr, why, drops);
}

/* Let the peers of address i of s go and forget it. */
static void kvevents_addr_drop(struct kvevents *ev, struct kvev_subs *s, size_t i,
			       const char *why)
{
	kvevents_addr_let_go(ev, s, s->a[i].addr, why);
	kvevents_addr_forget(s, i);
}

/* Forget the addresses of s that no peer connects from any more. */
static void kvevents_addr_sweep(struct kvevents *ev, struct kvev_subs *s)
{
	for (size_t i = 0; i < s->a_n;)
		if (!kvzap_addr_live(ev->zap, s->zap_id, s->a[i].addr))
			kvevents_addr_forget(s, i);
		else
			i++;
}

/* Address addr's entry in s, made if new; NULL without room. */
static struct kvev_addr *kvevents_addr(struct kvevents *ev, struct kvev_subs *s,
				       const char *addr)
{
	size_t cap = 2 * (size_t)ev->cfg.sub_max + 8;

	for (size_t i = 0; i < s->a_n; i++)
		if (strcmp(s->a[i].addr, addr) == 0)
			return &s->a[i];
	if (s->a_n == cap)
		kvevents_addr_sweep(ev, s);
	if (s->a_n == s->a_cap) {
		size_t nc = s->a_cap ? 2 * s->a_cap : 4;
		struct kvev_addr *na;
		if (nc > cap)
			nc = cap;
		if (nc <= s->a_cap)
			return NULL;
		na = kvt_mem_realloc(ev->mem, s->a, s->a_cap * sizeof(*na), nc * sizeof(*na));
		if (!na)
			return NULL;
		s->a = na;
		s->a_cap = nc;
	}
	memset(&s->a[s->a_n], 0, sizeof(s->a[0]));
	snprintf(s->a[s->a_n].addr, sizeof(s->a[0].addr), "%s", addr);
	return &s->a[s->a_n++];
}

/* A bound socket (an XPUB, ZMQ_XPUB_VERBOSE: every subscription, with the
 * peer's address) after a send: the subscriptions libzmq applied
 * meanwhile, counted by address (kvevents.h KVEVENTS_SUBS_MAX): an address
 * past KVEVENTS_SUBS_MAX distinct topics, or the one with the most when
 * the socket's total passes KVEVENTS_SUBS_SOCKET_MAX, is let go; the other
 * peers keep their connections and subscriptions.  Unsubscriptions are not
 * counted: libzmq passes one up for a topic the peer never held, and for
 * each topic of a peer it closed, without its address. */
static void kvevents_subs(struct kvevents *ev, void *pub, struct kvev_subs *s)
{
	for (;;) {
		zmq_msg_t msg;
		const char *addr;
		const uint8_t *b;
		size_t len;
		struct kvev_addr *a;
		uint64_t h;
		uint32_t k;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, pub, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			break;
		}
		b = zmq_msg_data(&msg);
		len = zmq_msg_size(&msg);
		addr = len >= 1 && b[0] == 1 ? zmq_msg_gets(&msg, "Peer-Address") : NULL;
		if (!addr || !addr[0] || strlen(addr) >= KVZAP_ADDR_LEN) {
			zmq_msg_close(&msg);
			continue;
		}
		atomic_fetch_add_explicit(&ev->c_subscriptions, 1, memory_order_relaxed);
		h = kvevents_topic_hash(ev, b + 1, len - 1);
		a = kvevents_addr(ev, s, addr);
		if (!a) {
			/* No room (or memory) to count it: let it go rather than
			 * leave its topics uncounted.  The table is full of live
			 * addresses: addresses that subscribed once and keep a
			 * connection open without a handshake (the ZAP thread
			 * counts it until its deadline) stay live
			 * (test_kvevents test_sub_cap_addr_table_full). */
			kvevents_addr_let_go(ev, s, addr, "topics beside a full table of "
					     "addresses");
			zmq_msg_close(&msg);
			continue;
		}
		for (k = 0; k < a->n && a->h[k] != h; k++)
			;
		if (k == a->n) {
			if (a->n == KVEVENTS_SUBS_MAX) {
				kvevents_addr_drop(ev, s, (size_t)(a - s->a),
						   "more than " KVEV_STR(KVEVENTS_SUBS_MAX)
						   " topics");
			} else {
				a->h[a->n++] = h;
				s->total++;
			}
		}
		zmq_msg_close(&msg);
	}
	if (s->total <= KVEVENTS_SUBS_SOCKET_MAX)
		return;
	kvevents_addr_sweep(ev, s);
	while (s->total > KVEVENTS_SUBS_SOCKET_MAX) {
		size_t most = 0;
		for (size_t i = 1; i < s->a_n; i++)
			if (s->a[i].n > s->a[most].n)
				most = i;
		kvevents_addr_drop(ev, s, most, "the most topics of a socket past "
				   KVEV_STR(KVEVENTS_SUBS_SOCKET_MAX));
	}
}

/* evs[0..n) on socket pub: messages of at most KVEVENTS_MSG_EVENTS events
 * (kvevents.h: what a peer that stops reading holds is their size times
 * KVEVENTS_SNDHWM); subs, a bound socket's count of topics, else NULL. */
static void kvevents_send_on(struct kvevents *ev, void *pub, struct kvreplay_ep *rp,
			     uint64_t *seqp, const struct kvevent *evs, size_t n,
			     struct kvev_subs *subs)
{
	for (size_t i = 0; i < n; i += KVEVENTS_MSG_EVENTS) {
		kvevents_send_msg(ev, pub, rp, seqp, evs + i,
				  n - i < KVEVENTS_MSG_EVENTS ? n - i : KVEVENTS_MSG_EVENTS);
		if (subs->bound) /* what this send applied */
			kvevents_subs(ev, pub, subs);
	}
}

/* Everything to the main socket; each group's share (and the clears of
 * everything) to the group's. */
static void kvevents_send(struct kvevents *ev)
{
	if (ev->pub)
		kvevents_send_on(ev, ev->pub, ev->main_rp, &ev->seq, ev->send.ev, ev->send.n,
				 &ev->pub_subs);
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
		if (ev->send_batch < ch->from_batch)
			continue;
		ev->sub.n = 0;
		for (size_t i = 0; i < ev->send.n; i++)
			if (ev->send.ev[i].group == ch->group ||
			    ev->send.ev[i].group == KVEV_GROUP_ALL)
				ev->sub.ev[ev->sub.n++] = ev->send.ev[i];
		if (ev->sub.n)
			kvevents_send_on(ev, ch->pub, ch->rp, &ch->seq, ev->sub.ev, ev->sub.n,
					 &ch->subs);
	}
	pthread_mutex_unlock(&ev->chan_lock);
}

/* Wait until ms have passed (-1: no limit) or ev->wake is written,
 * taking the subscriptions of each bound socket as they come: the thread
 * polls each one's ZMQ_FD (readable once libzmq has a command for the
 * socket, after a read that found none) and reads a readable one's
 * (kvevents_subs: libzmq applies a subscription only as the socket's
 * owner processes its commands -- before, as it sent, so that with
 * nothing to publish a flooder's subscriptions waited in the socket
 * buffers, and the first send took thousands on one connection).  The
 * groups' sockets are polled by descriptor, outside chan_lock; chans
 * changed meanwhile (chan_gen) are only polled again, their indexes
 * being others' now (a descriptor stays readable until its socket is
 * read). */
static void kvevents_wait(struct kvevents *ev, int ms)
{
	size_t n;
	uint64_t gen;

	pthread_mutex_lock(&ev->chan_lock);
	gen = ev->chan_gen;
	n = 2 + ev->chan_n;
	if (n > ev->pfd_cap) {
		struct pollfd *na = kvt_mem_realloc(ev->mem, ev->pfd,
						    ev->pfd_cap * sizeof(*na), n * sizeof(*na));
		if (na) {
			ev->pfd = na;
			ev->pfd_cap = n;
		}
	}
	if (n > ev->pfd_cap) {
		/* Without memory for them: the wake-up alone, and every socket
		 * read every 10 ms. */
		pthread_mutex_unlock(&ev->chan_lock);
		if (ev->pfd_cap) {
			ev->pfd[0] = (struct pollfd){ ev->wake, POLLIN, 0 };
			(void)poll(ev->pfd, 1, ms < 0 || ms > 10 ? 10 : ms);
		} else {
			usleep(1000);
		}
		n = 0;
	} else {
		int r;
		ev->pfd[0] = (struct pollfd){ ev->wake, POLLIN, 0 };
		ev->pfd[1] = (struct pollfd){ ev->pub_subs.fd, POLLIN, 0 };
		for (size_t c = 0; c < ev->chan_n; c++)
			ev->pfd[2 + c] = (struct pollfd){ ev->chans[c].subs.fd, POLLIN, 0 };
		pthread_mutex_unlock(&ev->chan_lock);
		r = poll(ev->pfd, (nfds_t)n, ms);
		if (r <= 0)
			return;
	}
	if (n == 0 || ev->pfd[0].revents) {
		uint64_t v;
		ssize_t r = read(ev->wake, &v, sizeof(v));
		(void)r; /* EAGAIN: read with an earlier wake */
	}
	if (ev->pub_subs.bound && (n == 0 || ev->pfd[1].revents))
		kvevents_subs(ev, ev->pub, &ev->pub_subs);
	pthread_mutex_lock(&ev->chan_lock);
	for (size_t c = 0; c < ev->chan_n && (n == 0 || gen == ev->chan_gen); c++) {
		struct kvev_chan *ch = &ev->chans[c];
		if (ch->subs.bound && (n == 0 || ev->pfd[2 + c].revents))
			kvevents_subs(ev, ch->pub, &ch->subs);
	}
	pthread_mutex_unlock(&ev->chan_lock);
}

static void *kvevents_main(void *arg)
{
	struct kvevents *ev = arg;
	uint64_t due = 0; /* when the batch being filled goes (ms); 0: none */
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct evq t;
		bool stop;
		size_t queued;

		pthread_mutex_lock(&ev->lock);
		stop = ev->stop;
		queued = ev->fill.n;
		if (!stop) {
			/* Wait for the first event, then up to batch_ms for
			 * more (one message per burst), reading subscriptions
			 * meanwhile. */
			int ms = -1;
			if (queued) {
				uint64_t now = kvt_now_ms();
				if (!due)
					due = now + ev->cfg.batch_ms;
				ms = due > now ? (int)(due - now) : 0;
			}
			if (ms != 0) {
				pthread_mutex_unlock(&ev->lock);
				kvevents_wait(ev, ms);
				continue;
			}
		} else if (queued == 0) { /* all sent */
			pthread_mutex_unlock(&ev->lock);
			break;
		}
		due = 0;
		t = ev->fill;
		ev->fill = ev->send;
		ev->fill.n = 0;
		ev->send = t;
		ev->send_batch = ++ev->batches;
		kvevents_share_reset_locked(ev);
		pthread_mutex_unlock(&ev->lock);
		if (ev->send.holes) {
			/* What was pushed out: the rest, in order. */
			size_t k = 0;
			for (size_t i = 0; i < ev->send.n; i++)
				if (ev->send.ev[i].type)
					ev->send.ev[k++] = ev->send.ev[i];
			ev->send.n = k;
			ev->send.holes = 0;
		}
		if (ev->send.n)
			kvevents_send(ev);
		ev->send.n = 0;
	}
	return NULL;
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
	for (size_t c = 0; c < ev->chan_n; c++) {
		kvzap_close_socket(ev->zap, ev->chans[c].pub, ev->chans[c].zap_id);
		kvevents_subs_free(ev, &ev->chans[c].subs);
	}
	kvevents_subs_free(ev, &ev->pub_subs);
	kvt_mem_free(ev->mem, ev->chans, ev->chan_cap * sizeof(*ev->chans));
	kvt_mem_free(ev->mem, ev->sub.ev, ev->sub.cap * sizeof(*ev->sub.ev));
	pthread_mutex_destroy(&ev->chan_lock);
	if (ev->pub)
		kvzap_close_socket(ev->zap, ev->pub, ev->pub_zap_id);
	/* The sockets it watched are closed, their monitors stopped. */
	kvzap_close(ev->zap);
	if (ev->zctx)
		zmq_ctx_term(ev->zctx);
	kvt_mem_free(ev->mem, ev->fill.ev, ev->fill.cap * sizeof(*ev->fill.ev));
	kvt_mem_free(ev->mem, ev->send.ev, ev->send.cap * sizeof(*ev->send.ev));
	kvt_mem_free(ev->mem, ev->buf, ev->buf_cap);
	kvt_mem_free(ev->mem, ev->pfd, ev->pfd_cap * sizeof(*ev->pfd));
	if (ev->wake >= 0)
		close(ev->wake);
	pthread_mutex_destroy(&ev->lock);
	kvt_mem_free(ev->mem, ev, sizeof(*ev));
}

/* A PUB socket on endpoint ep (what names it in the log): bound if ep
 * holds a wildcard or is a local transport, else connected (vLLM's rule).
 * A bound one is watched (kvzap_watch): *zap_id, else KVZAP_UNWATCHED.
 * 0, KVT_EOPTVAL (refused: logged), -ENOMEM, -errno. */
static int kvevents_socket(struct kvevents *ev, const char *ep, const char *what, void **out,
			   uint32_t *zap_id, bool *bound, int *fd)
{
	int linger = 200, hwm = KVEVENTS_SNDHWM, in_hwm = KVEVENTS_SUB_RCVHWM, ret;
	bool listen = strchr(ep, '*') || strstr(ep, "::") || strncmp(ep, "ipc://", 6) == 0 ||
		      strncmp(ep, "inproc://", 9) == 0;
	/* A listener is an XPUB, to count its peers' topics (kvevents.h
	 * KVEVENTS_SUBS_MAX); a SUB takes either. */
	void *pub = zmq_socket(ev->zctx, listen ? ZMQ_XPUB : ZMQ_PUB);

	if (!pub)
		return -ENOMEM;
	zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	if (listen) {
		int one = 1;
		zmq_setsockopt(pub, ZMQ_RCVHWM, &in_hwm, sizeof(in_hwm));
		/* every subscription up, each with its peer's address */
		zmq_setsockopt(pub, ZMQ_XPUB_VERBOSE, &one, sizeof(one));
	}
	kvzap_peer_bounds(pub);
	*zap_id = KVZAP_UNWATCHED;
	*bound = listen;
	*fd = -1;
	if (listen) {
		size_t fl = sizeof(*fd);
		if (zmq_getsockopt(pub, ZMQ_FD, fd, &fl) < 0) {
			zmq_close(pub);
			return -ENOMEM;
		}
	}
	if (listen) {
		/* A listener: the ZAP thread bounds its peers. */
		ret = kvzap_watch(ev->zap, pub, zap_id);
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
		kvzap_close_socket(ev->zap, pub, *zap_id);
		return KVT_EOPTVAL;
	}
	*out = pub;
	return 0;
}

int kvevents_open(struct kvevents **out, const struct kvevents_config *cfg,
		  struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct kvevents *ev;
	const char *ep = cfg->endpoint;
	uint64_t seed;
	int ret;
	size_t len;

	/* The topics' hash key: waits for the kernel's pool and fails without
	 * it (the object's address xor time(), which a subscriber could
	 * guess, until 2026-12-07; test_kvevents topic_seed). */
	ret = kvt_secret_draw(&seed);
	if (ret < 0) {
		kvt_logf(log, KVT_LOG_ERROR, "events: no random topic seed (getrandom): %s",
			 strerror(-ret));
		return ret;
	}
	ev = kvt_mem_calloc(mem, 1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	ev->topic_seed = seed;
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
	ev->holes_max = ev->cfg.queue_max / KVEVENTS_PUSH_OUT_DIV;
	if (ev->holes_max == 0)
		ev->holes_max = 1;
	kvevents_share_reset_locked(ev);
	if (!ev->cfg.sub_max)
		ev->cfg.sub_max = KVEVENTS_DEF_SUB_MAX;
	if (!ev->cfg.replay_max)
		ev->cfg.replay_max = KVEVENTS_DEF_REPLAY_MAX;
	if (!ev->cfg.replay_bytes)
		ev->cfg.replay_bytes = KVEVENTS_DEF_REPLAY_BYTES;
	ev->mem = mem;
	ev->log = log;
	ev->pub_zap_id = KVZAP_UNWATCHED;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_mutex_init(&ev->chan_lock, NULL);
	ev->pub_subs.fd = -1;
	ev->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev->wake < 0) {
		ret = -errno;
		goto fail;
	}
	ev->zctx = zmq_ctx_new();
	if (!ev->zctx) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = kvzap_open(&ev->zap, ev->zctx, ev->cfg.sub_max, mem, log);
	if (ret < 0) {
		kvt_logf(log, KVT_LOG_ERROR, "events: cannot start the ZAP handler: %s",
			 kvt_strerror(ret));
		goto fail;
	}
	if (ep) {
		ret = kvevents_socket(ev, ep, "events.endpoint", &ev->pub, &ev->pub_zap_id,
				      &ev->pub_subs.bound, &ev->pub_subs.fd);
		if (ret < 0)
			goto fail;
		ev->pub_subs.zap_id = ev->pub_zap_id;
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
			.zap = ev->zap,
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
		pthread_mutex_unlock(&ev->lock);
		kvevents_wake(ev);
		pthread_join(ev->thread, NULL);
	}
	kvevents_free(ev);
}

int kvevents_group_endpoint(struct kvevents *ev, uint32_t group, const char *endpoint)
{
	struct kvev_chan *ch = NULL;
	void *pub = NULL;
	uint32_t zap_id = KVZAP_UNWATCHED;
	bool bound = false;
	int ret = 0, fd = -1;

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
		ret = kvevents_socket(ev, endpoint, what, &pub, &zap_id, &bound, &fd);
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
				kvzap_close_socket(ev->zap, pub, zap_id);
				ret = -ENOMEM;
				goto out;
			}
			ev->chans = na;
			ev->chan_cap = nc;
		}
		ch = &ev->chans[ev->chan_n++];
		memset(ch, 0, sizeof(*ch));
		ch->group = group;
		/* A new feed: nothing queued before it, which may be an earlier
		 * feed's of the group (another tenant's), gets on it: from the
		 * next batch if none is queued now, else the one after (what
		 * is queued after this and before the next batch is lost to
		 * it, a batch_ms at most). */
		pthread_mutex_lock(&ev->lock);
		ch->from_batch = ev->batches + (ev->fill.n ? 2 : 1);
		pthread_mutex_unlock(&ev->lock);
	} else if (ch) {
		kvzap_close_socket(ev->zap, ch->pub, ch->zap_id);
		kvevents_subs_free(ev, &ch->subs);
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
		memset(&ch->subs, 0, sizeof(ch->subs));
		ch->subs.bound = bound;
		ch->subs.fd = fd;
		ch->subs.zap_id = zap_id;
		ch->seq = 0;
		snprintf(ch->want, sizeof(ch->want), "%s", endpoint);
		kvt_logf(ev->log, KVT_LOG_INFO, "events: publishing group %u's KV events on %s",
			 group, endpoint);
	}
	atomic_store(&ev->listening, ev->pub != NULL || ev->chan_n > 0);
	/* The thread polls the sockets as they are now. */
	ev->chan_gen++;
	kvevents_wake(ev);
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

void kvevents_group_stats(struct kvevents *ev, uint32_t group, kvt_stats_fn fn, void *ctx)
{
	uint64_t dropped, resets = 0;
	bool feed = false;
	char name[48];

	if (group == 0 || group >= KVT_QUOTA_GROUPS)
		return;
	pthread_mutex_lock(&ev->lock);
	dropped = ev->c_gdropped[group];
	pthread_mutex_unlock(&ev->lock);
	pthread_mutex_lock(&ev->chan_lock);
	for (size_t c = 0; c < ev->chan_n; c++)
		if (ev->chans[c].group == group) {
			feed = true;
			resets = ev->chans[c].subs.resets;
		}
	pthread_mutex_unlock(&ev->chan_lock);
	snprintf(name, sizeof(name), "events.%u.dropped", group);
	fn(ctx, name, dropped, NULL);
	if (feed) {
		snprintf(name, sizeof(name), "events.%u.sub_resets", group);
		fn(ctx, name, resets, NULL);
	}
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
	S("sub_resets", c_sub_resets);
	S("subscriptions", c_subscriptions);
#undef S
	/* Each group's, once it lost one: at most KVT_QUOTA_GROUPS rows,
	 * read under the lock that counts them, reported after it. */
	{
		uint64_t *gd = kvt_mem_alloc(ev->mem, sizeof(ev->c_gdropped)), shd;
		pthread_mutex_lock(&ev->lock);
		shd = ev->c_share_dropped;
		if (gd)
			memcpy(gd, ev->c_gdropped, sizeof(ev->c_gdropped));
		pthread_mutex_unlock(&ev->lock);
		fn(ctx, "events.share_dropped", shd, NULL);
		for (uint32_t g = 0; gd && g < KVT_QUOTA_GROUPS; g++) {
			char name[40];
			if (!gd[g])
				continue;
			snprintf(name, sizeof(name), "events.%u.dropped", g);
			fn(ctx, name, gd[g], NULL);
		}
		kvt_mem_free(ev->mem, gd, sizeof(ev->c_gdropped));
	}
	fn(ctx, "events.refused", kvzap_refused(ev->zap), NULL);
	if (ev->rep) {
		if (ev->main_rp)
			fn(ctx, "events.replay_endpoint", 0, kvreplay_endpoint(ev->main_rp));
		kvreplay_stats(ev->rep, fn, ctx);
	}
}

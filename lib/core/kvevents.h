/*
 * kvevents.h - KV cache events in vLLM's format (doc/kvevents.md): the
 * store reports the blocks it stores and drops, and a publisher thread
 * sends them as msgpack KVEventBatch messages on a ZeroMQ PUB socket, the
 * way vLLM's ZmqEventPublisher does, so that a KV-aware router (llm-d,
 * Dynamo) that follows vLLM engines can follow a kvtier store or a kvtierd.
 *
 * A message is three frames: topic (events.topic), an 8-byte big-endian
 * sequence number (0, 1, ... per publisher), and the payload:
 *
 *   KVEventBatch      [ts: float64, events: [event, ...], nil (dp rank)]
 *   BlockStored       {"type": "BlockStored", "block_hashes": [hash],
 *                      "parent_block_hash": hash | nil, "token_ids": [],
 *                      "block_size": n, "lora_id": nil, "medium": medium,
 *                      "lora_name": nil}
 *   BlockRemoved      {"type": "BlockRemoved", "block_hashes": [hash],
 *                      "medium": medium}
 *   AllBlocksCleared  {"type": "AllBlocksCleared"}
 *
 * byte for byte what vLLM 0.32's msgspec encoder writes (tagged structs
 * as maps, fields at their defaults omitted; tests/unit/test_kvevents.c
 * holds its bytes).  events.format=array writes the layout of older vLLM
 * releases instead: [ts, events], each event an array, tag first:
 * ["BlockStored", [hash], parent | nil, [], block_size, nil, medium],
 * ["BlockRemoved", [hash], medium], ["AllBlocksCleared"].  A hash is the
 * block's key as msgpack bin (vLLM's ExternalBlockHash is bytes).
 *
 * Each event carries its namespace's quota group.  Besides the main
 * socket (events.endpoint: every event), a group may have its own socket
 * (kvevents_group_endpoint) that gets only that group's events and the
 * clears of everything: kvtierd gives each tenant its own feed that way
 * (doc/kvevents.md "Per tenant").  Each socket numbers its own messages.
 *
 * Threads: kvevents_stored/removed/cleared from any thread (they queue
 * under a mutex and never block on the socket: past events.queue_max
 * queued events, or past their group's share of it, they drop, counted
 * per group; with no socket at all they return at once); one publisher
 * thread sends on the sockets, under chan_lock for the groups'
 * (kvevents_group_endpoint opens and closes them under it);
 * one ZAP thread answers libzmq's ZAP requests for the bound sockets
 * (KVEVENTS_DEF_SUB_MAX); with events.replay_endpoint or events.groups,
 * one replay thread answers replay requests from a ring of each replayed
 * socket's last messages (KVEVENTS_DEF_REPLAY_MAX, kvevents_group_replay).
 */
#ifndef KVT_KVEVENTS_H
#define KVT_KVEVENTS_H

#include "kvt_int.h"

struct kvevents;

struct kvevents_config {
	char *endpoint;          /* "tcp://HOST:*" or a wildcard host binds, "tcp://HOST:PORT"
				  * connects (vLLM's rule); owned by the store; NULL: no
				  * main socket (groups' sockets only) */
	bool groups;             /* events.groups: publish even without endpoint, for
				  * the groups' sockets */
	char *topic;             /* NULL: "" */
	char *medium;            /* NULL: "CPU" */
	int format;              /* KVEVENTS_MAP (default) or KVEVENTS_ARRAY */
	unsigned batch_ms;       /* most time an event waits for its batch */
	unsigned queue_max;      /* events queued before new ones are dropped */
	unsigned sub_max;        /* events.max_subscribers: connections a bound socket
				  * holds at once (0: KVEVENTS_DEF_SUB_MAX) */
	char *replay_endpoint;   /* events.replay_endpoint: the main socket's replay
				  * ROUTER, always bound; NULL: none */
	unsigned replay_max;     /* messages kept for replay (0: KVEVENTS_DEF_REPLAY_MAX) */
	uint64_t replay_bytes;   /* their payload bytes at most (0: ..._DEF_REPLAY_BYTES) */
};

#define KVEVENTS_DEF_BATCH_MS 10
#define KVEVENTS_DEF_QUEUE_MAX 65536

/* Each quota group's share of the queue (doc/kvevents.md "Per tenant"):
 * events.queue_max over the groups with events queued (the whole queue
 * for a group alone).  A group at its share drops its own new events; a
 * group under it (or a clear) finds room in a full queue by pushing out
 * the oldest event of a group over its share, at most queue_max /
 * KVEVENTS_PUSH_OUT_DIV of them a batch: the array holds at most that
 * many more entries than queue_max (holes the thread skips). */
#define KVEVENTS_PUSH_OUT_DIV 4

/* How many peers a bound PUB socket holds at once (doc/kvevents.md "What a
 * subscriber can cost"): a ZAP handler (RFC 27) that libzmq consults during
 * each peer's handshake, before its READY is answered, refuses a peer while
 * the socket has more than events.max_subscribers connections (default
 * KVEVENTS_DEF_SUB_MAX), or more than KVEVENTS_SUB_PER_ADDR from the
 * peer's IP address; libzmq then sends ZMTP's ERROR "400", and the
 * handshake deadline (KVEVENTS_HANDSHAKE_MS) closes the peer: libzmq 4.3.4
 * does not close it at once (measured: 5.0 s after, READY sent or not).
 * Counted: every descriptor libzmq accepted for the socket and has not
 * closed, handshaking or not.  The real subscribers are a router or two
 * (one connection each, a few for a router with replicas) and a tool now
 * and then: 64 is ten times that, and 64 descriptors and ~3 MiB is what a
 * flood can then take; 8 from one address leave room for a router's
 * replicas behind one NAT address while one host cannot take the socket
 * alone. */
#define KVEVENTS_DEF_SUB_MAX 64
#define KVEVENTS_SUB_PER_ADDR 8

/* What a subscriber (unauthenticated: anyone who reaches the socket) can
 * cost the PUB socket, doc/kvevents.md "What a subscriber can cost":
 * KVEVENTS_IN_MAX: the largest message libzmq takes from a peer
 * (ZMQ_MAXMSGSIZE; a subscription is 1 + topic bytes, the topic at most
 * 255, ZMTP's READY a few dozen): a larger one closes the connection
 * before libzmq allocates it (without it, a frame header claiming 1 GiB
 * had libzmq allocate and fill 1 GiB).
 * KVEVENTS_HANDSHAKE_MS: a peer that has not finished ZMTP's handshake by
 * then is closed (ZMQ_HANDSHAKE_IVL, libzmq's default 30 s).
 * KVEVENTS_KEEPALIVE_*: TCP keepalive (s), so that a peer that vanished
 * (no FIN) is closed and its queue freed.
 * KVEVENTS_MSG_EVENTS, KVEVENTS_SNDHWM: what a subscriber that stops
 * reading holds in the publisher's memory.  libzmq queues a PUB socket's
 * messages per peer up to ZMQ_SNDHWM, counted in messages whatever their
 * size; a batch was one message, up to events.queue_max events, and the
 * mark vLLM's 100,000: 8 subscribers that subscribed and never read grew
 * kvtierd by 718 MiB in 15 s of puts (bounded by nothing but the mark).
 * Now a batch goes as messages of at most KVEVENTS_MSG_EVENTS events
 * (an event encodes to at most ~300 bytes: two 64-byte keys and a few
 * fields), and a peer holds at most KVEVENTS_SNDHWM of them: ~2.4 MiB
 * at worst, ~0.3 MiB for short keys; a router that falls that far
 * behind loses messages (a gap in the sequence numbers), as past the
 * old mark. */
#define KVEVENTS_MSG_EVENTS 256
#define KVEVENTS_SNDHWM 32
#define KVEVENTS_IN_MAX 1024
#define KVEVENTS_HANDSHAKE_MS 5000
#define KVEVENTS_KEEPALIVE_IDLE 60
#define KVEVENTS_KEEPALIVE_INTVL 10
#define KVEVENTS_KEEPALIVE_CNT 6

/* KVEVENTS_SUBS_MAX, KVEVENTS_SUBS_SOCKET_MAX, KVEVENTS_SUB_RCVHWM: what
 * subscriptions can cost.  libzmq keeps each distinct topic a peer
 * subscribes to as a path of its trie, ~32 bytes a byte of it, until that
 * peer leaves: one peer's 100,000 distinct subscriptions of 1000 bytes
 * (100 MB sent) grew kvtierd by 3.2 GiB, kept after it left.  A bound
 * socket is an XPUB (ZMQ_XPUB_VERBOSE), which hands the publisher every
 * subscription with its peer's address (libzmq's Peer-Address: the IP
 * address, or the process on ipc://; libzmq tells no more of a peer), and
 * the publisher counts the distinct topics subscribed from each address
 * as they come (its thread polls each bound socket, not only as it sends):
 * past KVEVENTS_SUBS_MAX the peers from that address are let go
 * (kvzap_drop_addr: their connections closed, their subscriptions freed),
 * and past KVEVENTS_SUBS_SOCKET_MAX on the socket, those of the address
 * with the most; the socket's other peers keep their connections,
 * subscriptions and messages.  Counted in events.sub_resets; every
 * subscription taken in events.subscriptions.  A peer's subscriptions
 * wait in a pipe of KVEVENTS_SUB_RCVHWM messages (ZMQ_RCVHWM) until the
 * thread reads the socket.  A router subscribes to one topic
 * (events.topic, or everything: "").
 *
 * KVEVENTS_DROP_WAIT_MS: after letting an address go the thread reads
 * nothing more until the ZAP thread has disconnected its descriptors (at
 * most that long): libzmq applies a subscription only as the socket's
 * owner reads, so what a flooding connection gets past the bound is what
 * libzmq had read for it before (its pipe, and what libzmq reads while
 * the thread empties it: libzmq reads a peer's pipe until it finds it
 * empty, and its I/O thread refills it meanwhile).  That is no strict
 * bound (a publisher thread slower than libzmq's I/O thread reads more);
 * measured, one connection writing 1,000-byte topics as fast as it can
 * with nothing published (test_kvevents test_sub_flood_prompt), 100-250
 * taken, let go within 13-180 ms (release and ASan; 301 once with
 * ZMQ_RCVHWM 1, which does not help): ~8 MiB of trie at ~32 bytes a
 * topic byte, freed when libzmq closes the connection.  Before, the
 * bound socket was read only as the thread sent: with nothing to publish
 * the connection stayed, 4-8 MB of subscriptions waiting in the socket
 * buffers, and past the first send 99-323 were taken (an event every
 * 10 ms, ASan); reading promptly without the wait, up to 848.
 * KVEVENTS_SUBS_FLOOD_MAX: what that test allows, twice the most
 * measured. */
#define KVEVENTS_SUBS_MAX 64
#define KVEVENTS_SUBS_SOCKET_MAX 256
#define KVEVENTS_SUB_RCVHWM 16
#define KVEVENTS_DROP_WAIT_MS 100
#define KVEVENTS_SUBS_FLOOD_MAX 512

/* The replay endpoint (doc/kvevents.md "Replay"), vLLM's ZmqEventPublisher
 * replay_endpoint: a ROUTER socket; a peer (DEALER, or REQ) sends
 * ["", start seq as 8 bytes big-endian] and gets each message still kept
 * with a seq >= start as ["", topic, seq, payload], then the end marker
 * ["", "", -1 as 8 bytes, ""].  What it can cost:
 * KVEVENTS_DEF_REPLAY_MAX: messages kept (vLLM's buffer_steps default);
 * KVEVENTS_DEF_REPLAY_BYTES: and their payload bytes at most, whichever
 * bound comes first (the oldest go).
 * KVEVENTS_REPLAY_HWM: messages libzmq queues for one peer (ZMQ_SNDHWM,
 * ZMQ_ROUTER_MANDATORY): past it a send fails with EAGAIN and the replay
 * waits, its position kept, until the peer reads (a peer that never does
 * holds at most that many messages, ~2.4 MiB at worst, as on the PUB
 * socket); KVEVENTS_REPLAY_BURST: messages one replay sends before the
 * others get their turn.  The peers are those of a bound PUB socket
 * (ZAP: events.max_subscribers, 8 from one address; ZMQ_MAXMSGSIZE
 * KVEVENTS_IN_MAX; the handshake deadline): at most one replay under way
 * each (a new request replaces it). */
#define KVEVENTS_DEF_REPLAY_MAX 10000
#define KVEVENTS_DEF_REPLAY_BYTES (UINT64_C(16) << 20)
#define KVEVENTS_REPLAY_HWM KVEVENTS_SNDHWM
#define KVEVENTS_REPLAY_BURST 64
/* Replay endpoints at most: the main socket's and one a group's. */
#define KVEVENTS_REPLAYS KVT_QUOTA_GROUPS

enum { KVEV_STORED = 1, KVEV_REMOVED, KVEV_CLEARED };
#define KVEV_GROUP_ALL UINT32_MAX /* a clear of every namespace: to every socket */
enum { KVEVENTS_MAP = 0, KVEVENTS_ARRAY = 1 };

/* One event, as queued and as the encoder takes it. */
struct kvevent {
	uint8_t type;            /* KVEV_* */
	bool has_parent;
	uint32_t group;          /* the namespace's quota group (0: none), or KVEV_GROUP_ALL */
	uint32_t block_size;     /* STORED: tokens per block */
	struct kvt_key key;
	struct kvt_key parent;   /* STORED with has_parent */
};

/* A sequence number as it goes on the wire (a message's second frame, a
 * replay's fourth): 8 bytes, big-endian. */
static inline void kvevents_seq_bytes(uint64_t v, uint8_t out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)(v >> (56 - 8 * i));
}

/*
 * Open the socket (bind or connect, as vLLM decides: bind if the endpoint
 * has '*' or '::' or is ipc:// or inproc://) and start the thread.  0,
 * KVT_EOPTVAL (endpoint refused by ZeroMQ: logged), -ENOMEM, -errno.
 */
int kvevents_open(struct kvevents **out, const struct kvevents_config *cfg,
		  struct kvt_mem *mem, const struct kvt_logger *log);
/* Send what is queued, stop the thread, close the socket.  NULL: no-op. */
void kvevents_close(struct kvevents *ev);

void kvevents_stored(struct kvevents *ev, uint32_t group, const struct kvt_key *key,
		     const struct kvt_key *parent, uint32_t block_size);
void kvevents_removed(struct kvevents *ev, uint32_t group, const struct kvt_key *key);
void kvevents_cleared(struct kvevents *ev, uint32_t group);

/*
 * Publish group's events (1..KVT_QUOTA_GROUPS-1) on their own PUB socket
 * at endpoint as well (bound or connected by vLLM's rule, as the main
 * one); NULL or "" closes the group's socket.  Setting the endpoint a
 * group already has does nothing.  0, KVT_EOPTVAL (group out of range, or
 * endpoint refused by ZeroMQ: logged), -ENOMEM.  Any thread.
 */
int kvevents_group_endpoint(struct kvevents *ev, uint32_t group, const char *endpoint);

/*
 * A replay endpoint for group's own feed (kvevents_group_endpoint): a
 * ROUTER bound at endpoint that replays that feed's messages only, as
 * events.replay_endpoint does the main socket's; NULL or "" closes it (as
 * does closing the feed; a feed given a new endpoint starts its replay
 * empty).  0, KVT_EOPTVAL (group out of range, or endpoint refused:
 * logged), KVT_ESTATE (the group has no feed, or the publisher was opened
 * without events.groups or events.replay_endpoint), -ENOMEM.  Any thread.
 */
int kvevents_group_replay(struct kvevents *ev, uint32_t group, const char *endpoint);

void kvevents_stats(struct kvevents *ev, kvt_stats_fn fn, void *ctx);

/*
 * What concerns group (1..KVT_QUOTA_GROUPS-1) alone, through fn: its
 * events dropped ("events.<g>.dropped": the queue's share rule, or a full
 * queue; always reported), and with a feed of its own
 * (kvevents_group_endpoint) the times that feed's peers from one address
 * were let go ("events.<g>.sub_resets", the feed's since it opened).  Not
 * counted anywhere: the messages libzmq drops for a subscriber past
 * KVEVENTS_SNDHWM (a gap in its sequence numbers).  Any thread.
 */
void kvevents_group_stats(struct kvevents *ev, uint32_t group, kvt_stats_fn fn, void *ctx);

/*
 * Encode one KVEventBatch of evs[0..n) at time ts (seconds since the
 * epoch), in format (KVEVENTS_MAP or _ARRAY), into buf[0..cap).  Returns the length, or
 * KVT_EBUFSMALL with *need set (retry with that much), -ENOMEM.  Pure: for the thread and for
 * tests.
 */
int64_t kvevents_encode(const struct kvevent *evs, size_t n, double ts, const char *medium,
			int format, uint8_t *buf, size_t cap, size_t *need);

#endif

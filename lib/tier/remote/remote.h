/*
 * remote.h - the remote tier (G3.5): one kvtierd server behind the store,
 * reached over the wire protocol (lib/proto.h, doc/protocol.md).
 *
 * The store (store.c) calls these when its local tiers cannot answer:
 * a get that missed DRAM and SSD, a lookup whose leading hits ran out
 * locally, an exists that missed; and for every put (written through, so
 * that other engines see first-time blocks), delete and clear.  Each call
 * queues one operation and returns; the remote thread ("kvt-remote") packs
 * queued operations into pipelined batch frames over a small pool of
 * connections, and calls the operation's callback on that thread when the
 * server answered, the operation timed out, or its connection failed.
 *
 * A server that is down or slow costs misses and counted errors, never a
 * hang: every operation has a deadline (remote.timeout_ms); a connection
 * whose frame misses its deadline is closed and every operation on it
 * fails at once; while every connection is down (between reconnects, with
 * exponential backoff) operations fail at the call, without queueing.
 *
 * Gets land in DRAM: the value is received straight from the socket into a
 * DRAM reservation (no copy in user space), its parts are checked against
 * the writer's CRC32C that came with it, and it is published as a
 * promotion.  The callback then holds a ref, exactly as after ssd_promote.
 * Gets into the caller's buffers (remote_get_into) skip DRAM: the value
 * lands in those buffers, checked part by part as it lands.
 *
 * Threads: the remote_* calls, any thread; callbacks, the remote thread.
 * They must not block and must not call remote_* (they may call dram_*).
 */
#ifndef KVT_REMOTE_H
#define KVT_REMOTE_H

#include "dram.h"
#include "kvt_int.h"
#include "tier.h"

struct remote;

struct remote_config {
	char *addr;                 /* "HOST:PORT", "[V6]:PORT" or "unix:/PATH"; owned by the store */
	char *tenant;               /* NULL: "default" */
	char *secret_file;          /* NULL: AUTH method NONE */
	unsigned conns;             /* connections in the pool at open */
	unsigned conns_max;         /* ... grown to for big values (remote_rule_conns) */
	unsigned io_threads;        /* lanes (threads) the pool is split over; 0: 1 */
	unsigned timeout_ms;        /* deadline of one operation */
	unsigned connect_timeout_ms;
	unsigned backoff_ms;        /* first reconnect delay; doubles up to backoff_max_ms */
	unsigned backoff_max_ms;
	unsigned batch;             /* most items in one frame */
	uint64_t value_max;         /* largest value a GET answer may announce (remote.value_max);
				     * more is a protocol error; 0: REMOTE_DEF_VALUE_MAX */
	unsigned kinds;             /* REMOTE_KIND_*: what the address may resolve to (a
				     * member a server named); 0: anything */
	bool crc_at_send;           /* a put's CRC32Cs made by the I/O thread as it packs
				     * the frame, just before the send (remote.crc_at_send) */
	bool tls;                   /* TLS to the server (lib/tlsio.c) */
	char *tls_ca;               /* CA file that verifies the server; NULL: the system's */
	char *tls_cert, *tls_key;   /* client certificate for mutual TLS, or NULL */
	char *tls_server_name;      /* name the certificate must carry; NULL: addr's host */
	/* Several kvtierd (cluster.c; remote_open ignores these): */
	char *addrs;                /* "ADDR[=WEIGHT],..."; owned by the store; or NULL */
	char *discover;             /* "ADDR,...": seeds whose STATS name the members; or NULL */
	unsigned group_blocks;      /* blocks of a prompt placed together */
	unsigned hot_replicas;      /* members that hold a prompt's first group */
	unsigned anchor_slots;      /* remembered key -> group entries; 0: none */
	unsigned refresh_ms;        /* discover: re-read the member list this often; 0: never */
	unsigned warm_ms;           /* a join's warm-up: reads try the previous owner too; 0: off */
	unsigned members_max;       /* discover: a server's list of more is refused; 0: default */
	int hot_forward;            /* REMOTE_FLAG_*: replicated puts go to one member, which
				     * forwards them (doc/cluster.md "Forwarded replicas") */
	int retain_hint;            /* REMOTE_FLAG_*: puts carry KVT_F_RETAIN (PROTO_IF_RETAIN) */
	/* The store's (store_dispatch.c store_put_admit), not the tier's: */
	int put_local;              /* REMOTE_PUT_LOCAL_*: does a put also go to local DRAM */
};

/* remote.hot_forward and remote.retain_hint: a PUT flag that a server may
 * not know (doc/protocol.md section 7, "caps") is sent never, always (the
 * operator says every server knows it), or where the server announced it
 * in HELLO (the default). */
#define REMOTE_FLAG_OFF 0
#define REMOTE_FLAG_ON 1
#define REMOTE_FLAG_AUTO 2

#define REMOTE_PUT_LOCAL_ALWAYS 0 /* a put lands in DRAM and is written through */
#define REMOTE_PUT_LOCAL_NEVER 1  /* a put is written through only, DRAM untouched */
#define REMOTE_PUT_LOCAL_AUTO 2   /* the default: never while few recent puts are
				   * read back, else always (store_dispatch.c, doc/remote.md) */

#define REMOTE_DEF_CONNS 2
#define REMOTE_DEF_CONNS_MAX 4
#define REMOTE_DEF_IO_THREADS 1
#define REMOTE_IO_THREADS_MAX 8
#define REMOTE_BIG_VALUE (UINT64_C(512) << 10)   /* values this big grow the pool */
#define REMOTE_STRIPE_BYTES (UINT64_C(4) << 20)  /* values in one GET or PUT frame, about */
#define REMOTE_DEF_TIMEOUT_MS 2000
#define REMOTE_DEF_CONNECT_TIMEOUT_MS 1000
#define REMOTE_DEF_BACKOFF_MS 50
#define REMOTE_DEF_BACKOFF_MAX_MS 5000
#define REMOTE_DEF_BATCH 64
#define REMOTE_DEF_GROUP_BLOCKS 16
#define REMOTE_DEF_HOT_REPLICAS 2
#define REMOTE_DEF_WARM_MS 60000
#define REMOTE_HOT_REPLICAS_MAX 8
#define REMOTE_DEF_ANCHOR_SLOTS 262144
#define REMOTE_DEF_REFRESH_MS 2000
#define REMOTE_DEF_MEMBERS_MAX 64
#define REMOTE_MEMBERS_CAP 256 /* PLACEMENT_MEMBERS_MAX */
#define REMOTE_DEF_VALUE_MAX (UINT64_C(256) << 20)

/*
 * Kinds of address.  A member list a server sends (remote.discover) may
 * name only the kinds the engine's own seeds are (NET always): a unix:
 * member only if a seed is one, one on this host only if a seed is
 * (doc/remote.md, "A hostile or broken server").
 */
#define REMOTE_KIND_NET 1u   /* a host name, or an IP address that is not this host's */
#define REMOTE_KIND_LOCAL 2u /* this host: loopback (127/8, ::1), unspecified (0.0.0.0, ::),
			      * "localhost" */
#define REMOTE_KIND_UNIX 4u  /* unix:/PATH */

/* The kind of addr[0..len) ("HOST:PORT", "[V6]:PORT", "unix:/PATH") by its
 * text alone: a name is NET until resolved.  Pure (fuzz_remote). */
unsigned remote_addr_kind(const char *addr, size_t len);
/* The kind addr resolves to (getaddrinfo: may block on a resolver), or
 * its text's kind if it does not resolve. */
unsigned remote_addr_kind_resolved(const char *addr);

/*
 * The pool and striping rule (remote.c says why; doc/remote.md): the
 * connections a pool of conns (at open) .. conns_max holds for a mean
 * value size; the items of one GET frame; the most value bytes of one PUT
 * frame (always at least one value).  mean 0: not known yet.
 */
unsigned remote_rule_conns(unsigned conns, unsigned conns_max, uint64_t mean);
uint32_t remote_rule_get_items(uint64_t mean, uint32_t batch, unsigned conns);
uint64_t remote_rule_put_bytes(unsigned conns);

/* Operations complete through tier.h's two types: tier_done_fn with what
 * the operation learned (struct tier_result), and gets through tier_got_fn
 * (KVT_OK with a ref on item, else NULL). */

/*
 * Start the tier: reads the secret file, starts the remote thread, which
 * connects in the background (a server not up yet is not an error: the
 * first operations wait for it up to their deadline); with cfg->io_threads
 * K > 1, K such threads, the pool split between them (remote.c "Lanes").
 * 0, KVT_EOPTVAL
 * (addr or secret file unusable: logged), -ENOMEM, -errno.
 */
int remote_open(struct remote **out, const struct remote_config *cfg, struct dram *dram,
		struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log);
/* Stop the thread; operations still queued or in flight fail (-ECANCELED)
 * through their callbacks first, and later submissions fail at the call
 * (-ECANCELED); the handle stays valid until remote_close.  A cluster
 * (cluster.c) stops every member before it frees any, because one
 * member's callbacks may submit to another.  Stopping twice is a no-op. */
void remote_stop(struct remote *rm);
/* remote_stop, then free.  NULL is a no-op. */
void remote_close(struct remote *rm);

/* Every connection has failed: operations fail fast (remote.down).  Any thread. */
bool remote_is_down(struct remote *rm);
/* The server's address (cfg.addr); valid until remote_close. */
const char *remote_addr(const struct remote *rm);

/*
 * Operations.  Each returns 0 if its callback will run, or a result for
 * the caller to use at once: -ENOTCONN (every connection is down; counted
 * as remote.fast_fails), -ENOMEM.  Keys, key arrays, tiers and parts
 * must stay valid until the callback ran (the store's requests keep them).
 */
int remote_get(struct remote *rm, uint32_t ns, const struct kvt_key *key, unsigned flags,
	       tier_got_fn cb, void *ctx);
/* flags of remote_get and remote_get_into: a get that failed on the way (the
 * connection refused, reset or lost, a timeout, the tier stopping) reaches
 * cb with its status (a negative errno) instead of KVT_MISS, so that the
 * caller can tell a member that did not answer from one that has no such
 * block (cluster.c asks the next member then). */
#define REMOTE_GET_FAILURES 1u
/* The whole value straight from the socket into the caller's dst[0..
 * dst_count) (no DRAM, nothing published), each part's CRC32C checked as
 * its bytes land.  cb's result: KVT_OK (count = value_len bytes written),
 * KVT_EBUFSMALL (value_len set, dst untouched), or KVT_MISS (absent, a
 * CRC that failed, the connection lost, a timeout, the tier stopping: the
 * bytes in dst are then not the value; with REMOTE_GET_FAILURES a failure
 * on the way is its negative errno instead).  Once cb ran, nothing writes to
 * dst any more.  dst must stay valid until then. */
int remote_get_into(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		    const struct iovec *dst, unsigned dst_count, unsigned flags, tier_done_fn cb,
		    void *ctx);
/* parts: the value (valid until cb); crcs: one per part (copied at the
 * call) or NULL (computed here). */
int remote_put(struct remote *rm, uint32_t ns, const struct kvt_key *key,
	       const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
	       bool sealed, tier_done_fn cb, void *ctx);
/* The same, telling the server the block's placement (PROTO_IF_PLACED): its
 * group's anchor and the members it is placed on (copies; 0: say nothing),
 * what the server needs to heal the pod (doc/cluster.md "Healing").  copies |
 * REMOTE_PUT_FORWARD: the server forwards the block to the group's other
 * members (PROTO_IF_FORWARD; doc/cluster.md "Forwarded replicas").  copies |
 * REMOTE_PUT_RETAIN: the put carries the caller's retain hint
 * (PROTO_IF_RETAIN, KVT_F_RETAIN). */
#define REMOTE_PUT_FORWARD 0x100u
#define REMOTE_PUT_RETAIN 0x200u
int remote_put_placed(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		      const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
		      bool sealed, uint64_t anchor, unsigned copies, tier_done_fn cb, void *ctx);
/* Count parts whose CRC32Cs the caller (cluster_put, once for every
 * replica) computed for a put of this tier: remote.put_crc_bytes. */
void remote_note_crc(struct remote *rm, const struct iovec *parts, unsigned part_count);
int remote_exists(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		  tier_done_fn cb, void *ctx);
int remote_delete(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		  tier_done_fn cb, void *ctx);
/* Leading hits among keys[0..n); tiers[0..n) (may be NULL) get KVT_TIER_REMOTE
 * for them. */
int remote_lookup(struct remote *rm, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		  uint8_t *tiers, tier_done_fn cb, void *ctx);
/* One namespace, or KVT_NS_ALL: every namespace of this tenant. */
int remote_clear(struct remote *rm, uint32_t ns, tier_done_fn cb, void *ctx);

/*
 * Batching: between plug and unplug (nested, any thread) operations queue
 * without waking the remote thread; unplug wakes it once, so a batch
 * submitted in one kvt_submit goes out in as few frames as it can.
 */
void remote_plug(struct remote *rm);
void remote_unplug(struct remote *rm);

/* Wait until every put queued before the call was answered (or failed). */
void remote_flush(struct remote *rm);

void remote_stats(struct remote *rm, kvt_stats_fn fn, void *ctx);

/* What the server announced in HELLO (PROTO_CAP_*), as the latest
 * handshake of each lane saw it: a capability counts only where every
 * lane has seen it; 0 before any handshake succeeded.  *version (may be
 * NULL): the lanes' lowest protocol version, 0 likewise.  Any thread. */
unsigned remote_caps(struct remote *rm, unsigned *version);

/* The server's STATS (doc/protocol.md): tenant NULL for the connection's
 * own tenant, "*" for the whole server (admin), else that tenant (admin).
 * Synchronous: waits for the answer or remote.timeout_ms; fn runs on the
 * remote thread meanwhile.  KVT_OK or < 0 (KVT_EOPTVAL: tenant malformed). */
int remote_stats_query(struct remote *rm, const char *tenant, kvt_stats_fn fn, void *ctx);

/*
 * An NS_REGISTER answer (status KVT_OK) for our canonical text ours: the
 * server's text must be ours but for their tenant= lines (the server sets
 * it, doc/protocol.md "NS_REGISTER"), and digest its SHA-256, as every
 * digest is (doc/keys.md).  Else a broken server would have this engine
 * put and get its blocks under another namespace's digest.  Pure but for
 * OpenSSL's digest; reads nothing past either length (fuzz_remote).
 */
bool remote_ns_answer_ok(const char *ours, size_t ours_len, const char *text, size_t text_len,
			 const uint8_t digest[32]);

#endif

/*
 * remote.c - the remote tier: a pool of connections to one kvtierd, the
 * thread that drives them, and the operations the store queues on it
 * (remote.h says what each promises; doc/remote.md how to use it).
 *
 * Owns: the remote thread ("kvt-remote"), its epoll set and wake eventfd,
 * the connections (socket, handshake, send queue, frames awaiting their
 * answer, the receive state), the map from local namespace ids to the
 * server's digests, and the remote.* counters.
 *
 * Life of an operation:
 *   1. remote_get/put/... (any thread) fills a struct rop and appends it to
 *      rm->sub under rm->lock, waking the thread if the list was empty;
 *      with every connection down it fails at once instead (-ENOTCONN).
 *   2. The thread moves rm->sub to its private pending list, and each
 *      dispatch pass packs pending operations into frames: up to
 *      remote.batch items of one opcode per frame (LOOKUP and CLEAR: one
 *      operation per frame), on the ready connection with the fewest bytes
 *      in flight.  An operation whose namespace the server has not yet
 *      named waits for an NS_REGISTER of the namespace's canonical text
 *      (the server puts its own tenant in and returns the digest to use).
 *   3. Frames are sent with sendmsg (SSL_write per iovec with remote.tls:
 *      conn_sendv, conn_read, conn_readv below): header and table from the frame's
 *      buffer, PUT values straight from the caller's parts.
 *   4. Responses are read in two exact steps (48-byte header, then the
 *      table, so nothing of the data section lands in the table buffer) and
 *      matched to their frame by tag; GET values are then read straight
 *      into the caller's buffers or DRAM reservations (readv), CRC-checked
 *      and, into DRAM, published.
 *   5. A frame past its deadline, a protocol error or a closed socket
 *      fails the connection: every operation on it completes (gets as
 *      misses), the socket is closed, and the connection retries after a
 *      backoff that doubles up to remote.backoff_max_ms.
 *
 * TLS (remote.tls): after connect, a non-blocking handshake (C_TLS) under
 * the same connect deadline, verifying the server's certificate and name;
 * then the same framing through the SSL.  A failed handshake fails the
 * connection like a refused connect (remote.tls_failures).
 *
 * Lanes (remote.io_threads = K > 1): remote_open opens K remotes to the
 * same server, each with its share of the pool; the first is the handle
 * the caller holds, and gets, puts and exists go round-robin over the
 * lanes (lane_pick), so K threads receive and check values side by side.
 * Each lane is everything above on its own; the handle's plug, unplug,
 * flush, stop, close, is_down and stats cover every lane.
 *
 * Threads and locks: rm->lock guards rm->sub, rm->stop and the flush
 * counters; everything else but the atomic counters belongs to the remote
 * thread.  Callbacks run on the remote thread with no lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include <xxhash.h>

#include "kvt_keyhash.h"
#include "proto.h"
#include "remote.h"
#include "tlsio.h"

enum rop_kind {
	RK_GET, RK_PUT, RK_EXISTS, RK_DELETE, RK_LOOKUP, RK_CLEAR, RK_NSREG, RK_STATS, RK__COUNT
};

static const uint16_t rk_op[RK__COUNT] = {
	[RK_GET] = PROTO_OP_GET,       [RK_PUT] = PROTO_OP_PUT,
	[RK_EXISTS] = PROTO_OP_EXISTS, [RK_DELETE] = PROTO_OP_DELETE,
	[RK_LOOKUP] = PROTO_OP_LOOKUP, [RK_CLEAR] = PROTO_OP_CLEAR,
	[RK_NSREG] = PROTO_OP_NS_REGISTER, [RK_STATS] = PROTO_OP_STATS,
};

/* One operation the store queued. */
struct rop {
	struct rop *next;             /* rm->sub, pending list */
	uint8_t kind;                 /* enum rop_kind */
	bool sealed;                  /* PUT */
	bool retain;                  /* PUT: PROTO_IF_RETAIN */
	bool crc_later;               /* PUT: crcs computed by the lane's thread (frame_send) */
	bool failures;                /* GET: a failure reaches the callback as itself
				       * (REMOTE_GET_FAILURES), not as KVT_MISS */
	uint32_t copies;              /* PUT: PROTO_IF_PLACED with anchor (0: not placed) */
	uint64_t anchor;
	bool answered;                /* frame: its item was answered */
	uint32_t ns;                  /* local id (KVT_NS_ALL for a tenant-wide CLEAR) */
	struct kvt_key key;
	const struct kvt_key *keys;   /* LOOKUP */
	uint32_t key_count;
	uint8_t *tiers;               /* LOOKUP, may be NULL */
	const struct iovec *parts;    /* PUT: the caller's */
	uint32_t part_count;
	const struct iovec *dst;      /* GET into the caller's buffers (remote_get_into), or NULL */
	uint32_t dst_count;
	uint64_t *lens;               /* PUT: part_count lengths then crcs, one allocation */
	uint32_t *crcs;
	uint64_t value_len;
	tier_done_fn cb;
	tier_got_fn gcb;
	void *ctx;
	const char *tenant;           /* STATS: scope (NULL own, "*" all); the caller's */
	kvt_stats_fn sfn;             /* STATS: called per item on the remote thread */
	uint64_t deadline;            /* ns, CLOCK_MONOTONIC */
	/* PUT, GET into DRAM (a GET into the caller's buffers once its value
	 * goes to DRAM: promo_open_late): on the head's list of those not
	 * yet answered and handled (put_open).  DELETE, CLEAR: sent once the
	 * PUTs of a lower ticket were answered (held), completed once the
	 * GETs of a lower ticket than its answer's were handled (answered). */
	struct rop *o_prev, *o_next;
	uint64_t ticket;
	bool open;
	/* DELETE, CLEAR: on the head's list of those not yet answered, from
	 * submission (held or sent) to the answer, through o_prev/o_next
	 * (remove_open).  PUT: submitted while one of its key (namespace)
	 * was there; not sent until none of a lower ticket is (put_waits). */
	bool ropen;
	bool wait_remove;
	/* DELETE, CLEAR while ropen: also in the head's rm_idx, chain of
	 * hash h (rm_hash; a CLEAR's rm_hash_ns).  PUT, GET while open: in
	 * its open_idx, chain of rm_hash.  Never both at once. */
	struct rop *h_prev, *h_next;
	uint64_t h;
	/* GET, EXISTS: a DELETE of its key (CLEAR of its namespace) was
	 * submitted before it and not yet answered: answered a miss by the
	 * thread, no frame (remove_shadows).  LOOKUP: its first key was
	 * (remove_prefix): 0 hits. */
	bool after_remove;
	/* GET into the caller's buffers: the head's removes_answered when it
	 * was submitted (promo_open_late). */
	uint64_t removes_seen;
	int held_status;              /* DELETE, CLEAR answered and held: its status
				       * (a CLEAR's count in value_len) */
	/* DELETE, CLEAR held (answered and held): the open puts (promotions)
	 * before it when it was held, counted down as each closes
	 * (put_close); it goes (completes) at 0. */
	uint32_t before;
};

/* A frame sent (or to be sent) and the operations it carries. */
struct rframe {
	struct rframe *next_out;      /* conn's send queue */
	struct rframe *next_wait;     /* conn's frames awaiting their answer */
	uint64_t tag;
	uint16_t op;
	uint32_t count;               /* ops */
	struct rop **ops;
	uint8_t *buf;                 /* header and table */
	uint64_t buf_cap;
	struct iovec *iov;            /* [0] the buffer, then PUT parts */
	unsigned iov_count;
	uint64_t bytes;               /* all of it */
	uint64_t deadline;
	bool sent;                    /* all of it in the socket: only then answered */
};

enum { C_DOWN = 0, C_CONNECTING, C_TLS, C_HELLO, C_AUTH, C_READY };
enum { RX_HEAD = 0, RX_DATA };

#define RX_SCRATCH (64u << 10)
#define RX_KEEP (64u << 10) /* receive buffer kept by a failed connection, at most */
/* Turns (reads, frames) a connection takes in one go (conn_rx): past them
 * the thread looks at its deadlines and its other connections first. */
#define RX_BUDGET 256u
#define REMOTE_TABLE_MIN (64u << 10) /* a server's table_max under this is refused (HELLO) */
#define REMOTE_TX_IOV 1024u /* iovecs in one sendmsg: Linux's UIO_MAXIOV */
#define REMOTE_PUT_FRAME_BYTES (UINT64_C(256) << 20) /* PUT values in one frame, at most */
#define RT_TAB0 16u /* chains of an rtab before it grows (and once it shrinks back) */

/*
 * An index of operations by a 64-bit hash (rop.h), chained through
 * rop.h_prev/h_next: cap chains, a power of two, tab0 (no allocation)
 * while count <= RT_TAB0; doubled once count passes cap (a failed
 * allocation keeps it: longer chains), halved once count falls under
 * cap / 4 (a failed allocation keeps the larger), so that its chains are
 * about one entry each and its memory follows what it holds now, not
 * the most it ever held.  The caller's lock.
 */
struct rtab {
	struct rop **tab;
	unsigned cap, count;
	struct rop *tab0[RT_TAB0];
};

struct rconn {
	struct remote *rm;
	unsigned idx;
	int fd;
	SSL *ssl;                     /* remote.tls: the connection's SSL, else NULL */
	int tls_want;                 /* TLSIO_WANT_*: what the SSL last waited for */
	int state;                    /* C_* */
	bool failed_once;             /* since the last successful handshake */
	bool want_out;                /* EPOLLOUT armed */
	uint64_t retry_at;            /* C_DOWN: when to connect again */
	uint64_t deadline;            /* C_CONNECTING..C_AUTH: handshake deadline */
	uint64_t backoff_ms;
	uint64_t next_tag;
	struct proto_limits lim;      /* the server's (HELLO) */
	uint16_t version;             /* chosen by HELLO: every later frame carries it */
	uint16_t caps;                /* PROTO_CAP_*: what the server announced (HELLO) */
	uint8_t snonce[PROTO_NONCE_LEN], cnonce[PROTO_NONCE_LEN];

	struct rframe *out_head, *out_tail;
	unsigned out_iov;             /* send progress in out_head */
	size_t out_off;
	struct rframe *wait_head, *wait_tail;
	uint64_t inflight_bytes;

	/* receive */
	int rx;
	uint8_t *rbuf;
	size_t rcap, rlen;
	struct proto_frame rf;
	struct rframe *rx_fr;
	struct proto_iter it;
	uint64_t *plens;              /* KVT_PARTS_MAX each */
	uint32_t *pcrcs;
	struct proto_item cur;        /* GET item whose bytes are being read */
	bool have_cur;
	uint64_t cur_done;            /* its bytes read */
	struct dram_item *cur_item;   /* its DRAM reservation, NULL: discard */
	struct rop *cur_op;
	/* A GET into the caller's buffers (cur_op->dst): the bytes land there
	 * and each part's CRC32C is computed as they land; a part that fails
	 * (cur_bad) turns the rest into a discard and the answer into a miss. */
	bool cur_direct, cur_bad, cur_small;
	uint32_t cur_part, cur_crc;
	uint64_t cur_part_left;
	struct iovec cur_view[DRAM_MAX_RUNS];
	unsigned cur_vc;
	uint8_t *scratch;
	bool rx_more;                 /* conn_rx stopped at RX_BUDGET: to go on */
	uint64_t rx_gen;              /* the thread's wake-up conn_rx last ran in */
};

/* Where a local namespace stands with the server. */
enum { NS_NONE = 0, NS_PENDING, NS_READY };
struct rns {
	uint8_t state;
	uint8_t digest[PROTO_DIGEST_LEN];
	/* NS_NONE after the server refused to register it (KVT_EFULL, say;
	 * KVT_EDESC: remote.backoff_max_ms later, rop_done):
	 * not asked again before this (ns), and operations on it meanwhile
	 * fail at once (KVT_ENONS) rather than each pass of the thread
	 * registering it again, as fast as the server answers, until their
	 * deadline (8,000 to 10,000 registrations in one 400 ms get). */
	uint64_t retry_at;
	bool mismatch;                /* the answer being completed did not fit our text */
	bool logged_mm;               /* ... and the last one logged */
	int logged;                   /* the status last logged (KVT_OK: none since a success) */
};

struct remote {
	struct remote_config cfg;
	struct dram *dram;
	struct ns_registry *nsreg;
	struct kvt_mem *mem;
	const struct kvt_logger *log;

	struct sockaddr_storage addr;
	socklen_t addr_len;
	char *secret;
	size_t secret_len;
	SSL_CTX *tls_ctx;             /* remote.tls, read-only once open */
	char tls_host[256];           /* the name or address the certificate must carry */
	bool tls_host_ip;

	pthread_t thread;
	bool started;
	int epfd, wake_fd;
	uint64_t rx_gen;                 /* the thread's wake-ups (conn_rx: rx_more) */

	pthread_mutex_t lock;
	pthread_cond_t flush_cond;
	struct rop *sub_head, *sub_tail; /* lock */
	bool stop;                       /* lock */
	unsigned plugged;                /* lock: submitters holding the wake-up back */
	/* The thread is in (or about to enter) epoll_wait with nothing
	 * submitted: set by the thread under lock after finding rm->sub
	 * empty, cleared by the thread once it wakes or by the submitter
	 * that writes wake_fd.  While the thread runs, a submission only
	 * queues: the thread looks at rm->sub again before it sleeps. */
	_Atomic bool asleep;
	/* (lock) When the sleeping thread wakes by itself (asleep only), and
	 * the earliest deadline of a hold made since it last planned its
	 * sleep (UINT64_MAX: none): a DELETE (CLEAR) held on the head
	 * (rop_submit_after_puts) expires at its deadline, not at the
	 * thread's next wake-up (hold_wake). */
	uint64_t sleep_until, hold_due;
	uint64_t puts_inflight;          /* lock */
	_Atomic bool down;               /* every connection failed: fail fast */
	/* The latest handshake's HELLO answer (any connection of this lane):
	 * version << 16 | PROTO_CAP_*; 0 until one succeeded (remote_caps). */
	_Atomic uint32_t hello_seen;

	/* remote thread only */
	struct rop *pend_head, *pend_tail;
	struct rconn *conns;             /* conns_cap slots; [0, conns_used) started */
	unsigned conns_cap;              /* max(cfg.conns, cfg.conns_max) */
	unsigned conns_used;             /* the pool now (remote_rule_conns); grows only */
	struct rns *nsmap;
	struct rop **batch_ops;          /* RK__COUNT x cfg.batch: dispatch's batches */
	uint64_t get_mean;               /* running mean of value sizes, GETs received and
					  * PUTs sent (1/8 weight), 0: none yet */
	uint32_t nsmap_cap;

	/* I/O lanes (remote.io_threads): lane[0] is this remote itself, the
	 * others are remotes of their own (thread, epoll set, connections,
	 * namespace map) to the same server, opened and closed with it.  Set
	 * at open, read-only after; a lane's own lane_count is 1. */
	struct remote **lane;
	struct remote *lane_self;        /* lane[0] of a remote with one lane */
	unsigned lane_count;
	_Atomic unsigned lane_next;      /* round-robin of lane_pick */
	struct remote *head;             /* lane[0]: where put_max is kept */
	/* The largest value this tier put (lane[0]'s, every lane's puts): a
	 * GET answer may announce up to max(remote.value_max, this). */
	_Atomic uint64_t put_max;
	/* Delete and clear win over the puts and promotions submitted before
	 * them (head only, put_lock): every lane's puts and promoting gets
	 * not yet answered and handled, oldest first; the deletes and clears
	 * held until the puts before them of their key (clear: namespace)
	 * are answered -- sent at once, a DELETE could reach the server
	 * before a PUT still waiting for the window or on another
	 * connection, and the block came back after the delete -- and those
	 * answered whose completion waits for the promotions submitted
	 * before their answer came (remove_hold) -- completed at once, the
	 * store's pass over DRAM after the delete could come before such a
	 * promotion published what the server sent before it applied the
	 * delete, and every later get hit the deleted block in DRAM. */
	pthread_mutex_t put_lock;
	struct rop *open_head, *open_tail;
	/* Held deletes and clears, oldest first: their hold deadlines rise
	 * along it (held_expire looks at the first). */
	struct rop *held, *held_tail;
	struct rop *answered;
	/* The deletes and clears not yet answered, oldest first (ropen), and
	 * the puts waiting for one of them (wait_remove): a PUT of the key
	 * submitted after a DELETE (CLEAR of its namespace) is not sent
	 * before the DELETE's answer -- packed for another connection or
	 * lane, it could reach the server first and the DELETE removed the
	 * value just put (put_waits). */
	struct rop *rm_head, *rm_tail;
	/* The same deletes and clears by (ns, key) (a clear by its ns):
	 * rm_idx.  A get, exists, lookup key or put looks at one chain (and
	 * two more while rm_clears is not 0), not the list (remove_find). */
	struct rtab rm_idx;
	unsigned rm_clears;
	/* The puts and promotions on open_head's list by (ns, key): a DELETE
	 * looks at one chain for a put or promotion of its key before it
	 * (put_count_before), not the list. */
	struct rtab open_idx;
	uint64_t rm_secret;           /* in rm_hash's seed: random per lane */
	unsigned puts_waiting;
	uint64_t put_ticket;
	/* Entries on rm_head's list (put_lock to change): a get or exists
	 * reads it without the lock, and looks at the list only if it is
	 * not 0 (remove_shadows). */
	_Atomic unsigned removes_open;
	_Atomic uint64_t removes_answered; /* deletes and clears answered (put_lock) */

	_Atomic uint64_t c_gets, c_direct_gets, c_hits, c_misses, c_puts, c_put_stored,
		c_put_exists, c_put_failed, c_lookups, c_exists, c_deletes, c_clears, c_errors,
		c_timeouts, c_fast_fails, c_connects, c_connect_failures, c_disconnects, c_bytes_in,
		c_bytes_out, c_frames_out, c_crc_errors, c_promote_full, c_conns_up, c_tls_failures,
		c_sends, c_pool, c_reads, c_wakeups, c_put_crc_bytes, c_window_waits,
		c_ns_mismatches, c_removes_held, c_removes_waited, c_promotes_stale, c_put_waits,
		c_gets_removed, c_busy;
};

static void pool_note(struct remote *rm, uint64_t len);

#define A(c) atomic_fetch_add_explicit(&(c), 1, memory_order_relaxed)
#define AN(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Operations: allocation and completion
 */

static int rop_submit(struct remote *rm, struct rop *op);
static void put_close(struct remote *head, struct rop *op);
static bool remove_hold(struct remote *head, struct rop *d, const struct tier_result *res);
static bool promo_open_late(struct remote *head, struct rop *op);
static void remove_close(struct remote *head, struct rop *d);
static bool put_waits(struct remote *head, struct rop *op, uint64_t now);

static void rop_free(struct remote *rm, struct rop *op)
{
	if (op->open)
		put_close(rm->head, op);
	if (op->ropen)
		remove_close(rm->head, op);
	if (op->lens)
		kvt_mem_free(rm->mem, op->lens,
			     op->part_count * (sizeof(uint64_t) + sizeof(uint32_t)));
	kvt_mem_free(rm->mem, op, sizeof(*op));
}

static void rop_put_done(struct remote *rm)
{
	pthread_mutex_lock(&rm->lock);
	if (--rm->puts_inflight == 0)
		pthread_cond_broadcast(&rm->flush_cond);
	pthread_mutex_unlock(&rm->lock);
}

/*
 * Complete an operation and free it.  GET: status KVT_OK with item (a ref
 * the callee owns) or anything else with NULL; the others through res.
 */
static void rop_done(struct remote *rm, struct rop *op, int status, struct dram_item *item,
		     struct tier_result *res)
{
	struct tier_result r = { .status = status };
	if (!res)
		res = &r;
	res->status = status;
	/* KVT_EBUSY is the server's "not now" (a tenant past its pin or
	 * receive share, its CLEARs at their cap: doc/protocol.md), not a
	 * failure of the tier: counted apart (remote.busy).  A get is a miss,
	 * a put, delete or clear fails KVT_EBUSY, to be retried. */
	if (status == KVT_EBUSY)
		A(rm->c_busy);
	else if (status < 0 && status != -ECANCELED && status != KVT_EBUFSMALL)
		A(rm->c_errors);
	switch (op->kind) {
	case RK_GET:
		if (status == KVT_OK)
			A(rm->c_hits);
		else
			A(rm->c_misses);
		/* Anything but a hit (or a buffer too small) is a miss, or with
		 * REMOTE_GET_FAILURES the failure itself (a negative errno). */
		if (status != KVT_OK && status != KVT_EBUFSMALL && !(op->failures && status < 0))
			status = KVT_MISS;
		if (op->dst) {
			/* Into the caller's buffers: the bytes there are the value
			 * only on a hit. */
			res->status = status;
			op->cb(op->ctx, res);
			break;
		}
		op->gcb(op->ctx, status == KVT_EBUFSMALL ? KVT_MISS : status, item);
		break;
	case RK_PUT:
		if (status == KVT_OK)
			A(rm->c_put_stored);
		else if (status == KVT_EXISTS)
			A(rm->c_put_exists);
		else
			A(rm->c_put_failed);
		/* Closed before its caller hears of it: a DELETE (CLEAR) of
		 * its key submitted once the put completed is not held
		 * behind it (rop_submit_after_puts), where a PUT submitted
		 * with that DELETE went out first and the DELETE removed it
		 * on the server (test_tls tls_order: 8 of 8 rounds held). */
		if (op->open)
			put_close(rm->head, op);
		op->cb(op->ctx, res);
		rop_put_done(rm);
		break;
	case RK_NSREG: {
		struct rns *e = &rm->nsmap[op->ns];
		/* KVT_EDESC (the server does not take our text) is not asked
		 * again before remote.backoff_max_ms: a server that said it
		 * once (a broken one, another version) left the namespace
		 * failed for the life of the store. */
		e->state = status == KVT_OK ? NS_READY : NS_NONE;
		if (status == KVT_EDESC)
			e->retry_at = kvt_now_ns() + (uint64_t)rm->cfg.backoff_max_ms * 1000000u;
		/* Once per namespace and cause, not at every retry. */
		if (status != KVT_OK && (status != e->logged || e->mismatch != e->logged_mm))
			kvt_logf(rm->log, KVT_LOG_WARN, "remote: namespace %u not registered: %s%s",
				 op->ns, kvt_strerror(status),
				 e->mismatch ? " (the server's answer is not our canonical text "
					       "and its digest: remote.ns_mismatches)"
					     : "");
		e->logged = status;
		e->logged_mm = e->mismatch;
		e->mismatch = false;
		break;
	}
	case RK_DELETE:
	case RK_CLEAR:
		if (remove_hold(rm->head, op, res))
			return; /* put_close completes it */
		op->cb(op->ctx, res);
		break;
	default:
		op->cb(op->ctx, res);
		break;
	}
	rop_free(rm, op);
}

/* The status an operation gets when its frame or connection failed. */
static int rop_fail_status(int why)
{
	return why < 0 ? why : -EIO;
}

static void rns_forget(struct remote *rm, uint32_t ns)
{
	if (ns < rm->nsmap_cap && rm->nsmap[ns].state == NS_READY)
		rm->nsmap[ns].state = NS_NONE;
}

/* ------------------------------------------------------------------------
 * Frames
 */

static void frame_free(struct remote *rm, struct rframe *fr)
{
	if (!fr)
		return;
	kvt_mem_free(rm->mem, fr->buf, fr->buf_cap);
	kvt_mem_free(rm->mem, fr->iov, fr->iov_count * sizeof(*fr->iov));
	kvt_mem_free(rm->mem, fr->ops, fr->count * sizeof(*fr->ops));
	kvt_mem_free(rm->mem, fr, sizeof(*fr));
}

/* Complete every operation of fr not yet answered with status, free fr. */
static void frame_fail(struct remote *rm, struct rframe *fr, int status)
{
	for (uint32_t i = 0; i < fr->count; i++) {
		struct rop *op = fr->ops[i];
		if (op && !op->answered)
			rop_done(rm, op, status, NULL, NULL);
		fr->ops[i] = NULL;
	}
	frame_free(rm, fr);
}

/* ------------------------------------------------------------------------
 * Connections
 */

static void conn_epoll(struct rconn *c, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0),
				  .data.ptr = c };
	/* An SSL read that waits to write (after a key update) needs EPOLLOUT. */
	if (c->ssl && c->tls_want == TLSIO_WANT_OUT)
		out = true, ev.events |= EPOLLOUT;
	if (c->fd >= 0 && c->want_out != out) {
		epoll_ctl(c->rm->epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->want_out = out;
	}
}

static bool remote_all_down(struct remote *rm)
{
	for (unsigned i = 0; i < rm->conns_used; i++) {
		struct rconn *c = &rm->conns[i];
		if (c->state == C_READY || !c->failed_once)
			return false;
	}
	return true;
}

/* Close c and fail everything on it; retry after the backoff. */
static void conn_fail(struct rconn *c, int why, const char *what)
{
	struct remote *rm = c->rm;
	bool was_ready = c->state == C_READY;

	if (c->state == C_DOWN)
		return;
	if (was_ready) {
		A(rm->c_disconnects);
		atomic_fetch_sub_explicit(&rm->c_conns_up, 1, memory_order_relaxed);
	} else {
		A(rm->c_connect_failures);
	}
	if (!c->failed_once || was_ready)
		kvt_logf(rm->log, was_ready ? KVT_LOG_WARN : KVT_LOG_INFO,
			 "remote: connection %u to %s %s: %s (%s); retrying in %llu ms", c->idx,
			 rm->cfg.addr, was_ready ? "lost" : "failed", what, kvt_strerror(why),
			 (unsigned long long)c->backoff_ms);
	if (why == -ETIMEDOUT)
		A(rm->c_timeouts);
	if (c->fd >= 0) {
		epoll_ctl(rm->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		tlsio_free(c->ssl);
		c->ssl = NULL;
		c->tls_want = 0;
		close(c->fd);
		c->fd = -1;
	}
	if (c->cur_item) {
		dram_abort(rm->dram, c->cur_item);
		c->cur_item = NULL;
	}
	/* The frame being received, then the others (a frame is on the wait
	 * list until its last response frame was read). */
	while (c->wait_head) {
		struct rframe *fr = c->wait_head;
		c->wait_head = fr->next_wait;
		frame_fail(rm, fr, rop_fail_status(why));
	}
	c->wait_tail = NULL;
	c->out_head = c->out_tail = NULL;
	c->out_iov = 0;
	c->out_off = 0;
	c->inflight_bytes = 0;
	c->rx_fr = NULL;
	c->have_cur = false;
	c->cur_op = NULL;
	c->cur_direct = false;
	c->rx = RX_HEAD;
	c->rlen = 0;
	c->rx_more = false;
	/* The receive buffer grows to the largest table received (up to the
	 * codec's table_max, 16 MiB): a server that announced one and failed
	 * does not leave it held for the life of the store. */
	if (c->rcap > RX_KEEP) {
		uint8_t *nb = kvt_mem_realloc(rm->mem, c->rbuf, c->rcap, RX_KEEP);
		if (nb) {
			c->rbuf = nb;
			c->rcap = RX_KEEP;
		}
	}
	c->want_out = false;
	c->state = C_DOWN;
	c->failed_once = true;
	c->retry_at = kvt_now_ns() + c->backoff_ms * 1000000u;
	c->backoff_ms = c->backoff_ms * 2 > rm->cfg.backoff_max_ms ? rm->cfg.backoff_max_ms
								   : c->backoff_ms * 2;
	if (remote_all_down(rm) && !atomic_load(&rm->down)) {
		atomic_store(&rm->down, true);
		kvt_logf(rm->log, KVT_LOG_WARN,
			 "remote: %s is unreachable: operations fail fast (misses) until it is back",
			 rm->cfg.addr);
	}
}

/* Queue a frame on c (it is sent as the socket takes it). */
static void conn_queue(struct rconn *c, struct rframe *fr)
{
	fr->deadline = kvt_now_ns() + (uint64_t)c->rm->cfg.timeout_ms * 1000000u;
	if (c->out_tail)
		c->out_tail->next_out = fr;
	else
		c->out_head = fr;
	c->out_tail = fr;
	if (c->wait_tail)
		c->wait_tail->next_wait = fr;
	else
		c->wait_head = fr;
	c->wait_tail = fr;
	c->inflight_bytes += fr->bytes;
}

/* The socket I/O of a connection, plain or TLS (tlsio.c): like sendmsg,
 * read and readv, errno included. */
static ssize_t conn_sendv(struct rconn *c, const struct msghdr *mh)
{
	ssize_t w;
	if (!c->ssl)
		return sendmsg(c->fd, mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	w = tlsio_writev(c->ssl, mh->msg_iov, (int)mh->msg_iovlen, &c->tls_want);
	if (w >= 0)
		c->tls_want = 0;
	return w;
}

static ssize_t conn_read(struct rconn *c, void *buf, size_t len)
{
	ssize_t r;
	A(c->rm->c_reads);
	if (!c->ssl)
		return read(c->fd, buf, len);
	r = tlsio_read(c->ssl, buf, len, &c->tls_want);
	if (r >= 0)
		c->tls_want = 0;
	else if (c->tls_want == TLSIO_WANT_OUT)
		conn_epoll(c, true);
	return r;
}

static ssize_t conn_readv(struct rconn *c, const struct iovec *iov, int n)
{
	ssize_t r;
	A(c->rm->c_reads);
	if (!c->ssl)
		return readv(c->fd, iov, n);
	r = tlsio_readv(c->ssl, iov, n, &c->tls_want);
	if (r >= 0)
		c->tls_want = 0;
	else if (c->tls_want == TLSIO_WANT_OUT)
		conn_epoll(c, true);
	return r;
}

/* Send what the socket takes.  0, or an error (the caller fails c). */
static int conn_tx(struct rconn *c)
{
	struct remote *rm = c->rm;
	while (c->out_head) {
		struct rframe *fr = c->out_head;
		/* One sendmsg per frame: header, table and every part of every
		 * PUT value (a value of many parts, one per layer, still goes in
		 * one call), up to what the kernel takes at once. */
		struct iovec iov[REMOTE_TX_IOV];
		unsigned n = 0;
		struct msghdr mh = { 0 };
		ssize_t w;

		for (unsigned i = c->out_iov; i < fr->iov_count && n < REMOTE_TX_IOV; i++, n++) {
			iov[n] = fr->iov[i];
			if (i == c->out_iov) {
				iov[n].iov_base = (uint8_t *)iov[n].iov_base + c->out_off;
				iov[n].iov_len -= c->out_off;
			}
		}
		mh.msg_iov = iov;
		mh.msg_iovlen = n;
		w = conn_sendv(c, &mh);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				conn_epoll(c, true);
				return 0;
			}
			if (errno == EINTR)
				continue;
			return -errno;
		}
		AN(rm->c_bytes_out, (uint64_t)w);
		A(rm->c_sends);
		while (w > 0) {
			size_t left = fr->iov[c->out_iov].iov_len - c->out_off;
			if ((size_t)w >= left) {
				w -= (ssize_t)left;
				c->out_iov++;
				c->out_off = 0;
			} else {
				c->out_off += (size_t)w;
				w = 0;
			}
		}
		if (c->out_iov == fr->iov_count) {
			fr->sent = true;
			c->out_head = fr->next_out;
			if (!c->out_head)
				c->out_tail = NULL;
			c->out_iov = 0;
			c->out_off = 0;
			A(rm->c_frames_out);
		}
	}
	conn_epoll(c, false);
	return 0;
}

/* ------------------------------------------------------------------------
 * Encoding frames
 */

static struct rframe *frame_new(struct remote *rm, uint32_t count, unsigned extra_iov)
{
	struct rframe *fr = kvt_mem_calloc(rm->mem, 1, sizeof(*fr));
	if (!fr)
		return NULL;
	fr->iov_count = 1 + extra_iov;
	fr->iov = kvt_mem_calloc(rm->mem, fr->iov_count, sizeof(*fr->iov));
	if (fr->iov && count) {
		fr->ops = kvt_mem_calloc(rm->mem, count, sizeof(*fr->ops));
		fr->count = fr->ops ? count : 0;
	}
	if (!fr->iov || fr->count != count) {
		if (!fr->iov)
			fr->iov_count = 0;
		frame_free(rm, fr);
		return NULL;
	}
	return fr;
}

/* The item of op (index i of its frame, namespace table index nsi);
 * the item flags in drop are left out (op_drop). */
static void op_item(const struct rop *op, uint32_t nsi, uint32_t drop, struct proto_item *it)
{
	memset(it, 0, sizeof(*it));
	it->ns_index = nsi;
	it->key = op->key;
	if (op->kind == RK_PUT) {
		it->flags = (op->sealed ? PROTO_IF_SEALED : 0) | (op->retain ? PROTO_IF_RETAIN : 0);
		if (op->copies) {
			it->flags |= PROTO_IF_PLACED |
				     (op->copies & REMOTE_PUT_FORWARD ? PROTO_IF_FORWARD : 0);
			it->anchor = op->anchor;
			it->copies = op->copies & ~REMOTE_PUT_FORWARD;
		}
		it->flags &= ~drop;
		it->part_count = op->part_count;
		it->part_lens = op->lens;
		it->part_crcs = op->crcs;
	}
}

/* The PUT flags c's server did not announce, where the option says auto
 * (REMOTE_FLAG_AUTO): the cluster asked remote_caps before it chose to
 * send them, but a connection made since may be to an older server (one
 * replaced in between), which would refuse the frame.  Without FORWARD
 * the put still lands, on this member alone; without RETAIN, unhinted. */
static uint32_t op_drop(const struct remote *rm, const struct rconn *c)
{
	uint32_t drop = 0;
	if (rm->cfg.hot_forward == REMOTE_FLAG_AUTO && !(c->caps & PROTO_CAP_FORWARD))
		drop |= PROTO_IF_FORWARD;
	if (rm->cfg.retain_hint == REMOTE_FLAG_AUTO && !(c->caps & PROTO_CAP_RETAIN))
		drop |= PROTO_IF_RETAIN;
	return drop;
}

/*
 * Encode header and table into fr->buf: ops[0..n) of one kind (NS_REGISTER
 * items carry their canonical text), or one LOOKUP or CLEAR.  0 or < 0.
 */
static int frame_encode(struct remote *rm, struct rconn *c, struct rframe *fr, int kind)
{
	struct proto_frame f = { 0 };
	struct proto_writer w;
	uint8_t *digests = NULL;
	uint32_t *nsidx = NULL;
	uint32_t ns_count = 0;
	uint64_t need = 4096;
	int64_t len;
	int ret = 0;

	f.op = rk_op[kind];
	f.tag = fr->tag;
	f.version = c->version;
	if (kind != RK_NSREG && kind != RK_CLEAR && kind != RK_STATS) {
		digests = kvt_mem_alloc(rm->mem, (size_t)fr->count * PROTO_DIGEST_LEN);
		nsidx = kvt_mem_alloc(rm->mem, (size_t)fr->count * sizeof(*nsidx));
		if (!digests || !nsidx) {
			ret = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < fr->count; i++) {
			const uint8_t *d = rm->nsmap[fr->ops[i]->ns].digest;
			uint32_t j;
			for (j = 0; j < ns_count; j++)
				if (memcmp(digests + (size_t)j * PROTO_DIGEST_LEN, d,
					   PROTO_DIGEST_LEN) == 0)
					break;
			if (j == ns_count)
				memcpy(digests + (size_t)ns_count++ * PROTO_DIGEST_LEN, d,
				       PROTO_DIGEST_LEN);
			nsidx[i] = j;
		}
		f.ns_count = ns_count;
		f.ns = digests;
	}
	if (kind == RK_CLEAR) {
		const struct rop *op = fr->ops[0];
		if (op->ns == KVT_NS_ALL) {
			f.scope.scope = PROTO_SCOPE_TENANT;
		} else {
			f.scope.scope = PROTO_SCOPE_NS;
			memcpy(f.scope.digest, rm->nsmap[op->ns].digest, PROTO_DIGEST_LEN);
		}
	}
	if (kind == RK_STATS) {
		const char *t = fr->ops[0]->tenant;
		f.scope.scope = t && strcmp(t, "*") == 0 ? PROTO_SCOPE_ALL : PROTO_SCOPE_TENANT;
		if (t && f.scope.scope == PROTO_SCOPE_TENANT) {
			f.scope.tenant = t;
			f.scope.tenant_len = (uint32_t)strlen(t);
		}
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if (fr->buf_cap < need) {
			kvt_mem_free(rm->mem, fr->buf, fr->buf_cap);
			fr->buf_cap = 0;
			fr->buf = kvt_mem_alloc(rm->mem, need);
			if (!fr->buf) {
				ret = -ENOMEM;
				goto out;
			}
			fr->buf_cap = need;
		}
		proto_write_begin(&w, fr->buf, fr->buf_cap, &c->lim, &f);
		if (kind == RK_LOOKUP) {
			const struct rop *op = fr->ops[0];
			for (uint32_t k = 0; k < op->key_count; k++) {
				struct proto_item it = { .key = op->keys[k] };
				proto_write_item(&w, &it);
			}
		} else if (kind == RK_NSREG) {
			for (uint32_t i = 0; i < fr->count; i++) {
				const struct ns_entry *e = ns_reg_get(rm->nsreg, fr->ops[i]->ns);
				struct proto_item it = { .text = e ? e->canon : "",
							 .text_len = e ? e->canon_len : 0 };
				proto_write_item(&w, &it);
			}
		} else if (kind != RK_CLEAR && kind != RK_STATS) {
			uint32_t drop = kind == RK_PUT ? op_drop(rm, c) : 0;
			for (uint32_t i = 0; i < fr->count; i++) {
				struct proto_item it;
				op_item(fr->ops[i], nsidx[i], drop, &it);
				proto_write_item(&w, &it);
			}
		}
		len = proto_write_end(&w, &need);
		if (len >= 0) {
			fr->iov[0].iov_base = fr->buf;
			fr->iov[0].iov_len = (size_t)len;
			fr->bytes += (uint64_t)len;
			break;
		}
		if (len != KVT_EBUFSMALL || attempt == 1) {
			ret = (int)len;
			goto out;
		}
	}
out:
	kvt_mem_free(rm->mem, digests, digests ? (size_t)fr->count * PROTO_DIGEST_LEN : 0);
	kvt_mem_free(rm->mem, nsidx, nsidx ? (size_t)fr->count * sizeof(*nsidx) : 0);
	return ret;
}

/* Build, encode and queue one frame of ops[0..n) (kind) on c.  On failure
 * the ops complete with the error. */
static void frame_send(struct remote *rm, struct rconn *c, int kind, struct rop **ops, uint32_t n)
{
	unsigned extra = 0;
	struct rframe *fr;
	int ret;

	if (kind == RK_PUT)
		for (uint32_t i = 0; i < n; i++) {
			struct rop *op = ops[i];
			extra += op->part_count;
			for (uint32_t p = 0; op->crc_later && p < op->part_count; p++)
				op->crcs[p] =
					kvt_crc32c(0, op->parts[p].iov_base, op->parts[p].iov_len);
			op->crc_later = false;
		}
	fr = frame_new(rm, n, extra);
	if (!fr) {
		for (uint32_t i = 0; i < n; i++)
			rop_done(rm, ops[i], -ENOMEM, NULL, NULL);
		return;
	}
	memcpy(fr->ops, ops, n * sizeof(*ops));
	fr->op = rk_op[kind];
	fr->tag = ++c->next_tag;
	ret = frame_encode(rm, c, fr, kind);
	if (ret < 0) {
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: cannot encode a %s frame: %s",
			 proto_op_name(fr->op), kvt_strerror(ret));
		frame_fail(rm, fr, ret);
		return;
	}
	if (kind == RK_GET)
		fr->bytes += n * rm->get_mean; /* what the answer will likely bring */
	if (kind == RK_PUT) {
		unsigned k = 1;
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t p = 0; p < ops[i]->part_count; p++) {
				fr->iov[k++] = ops[i]->parts[p];
				fr->bytes += ops[i]->parts[p].iov_len;
			}
	}
	conn_queue(c, fr);
}

/* ------------------------------------------------------------------------
 * Handshake
 */

static int conn_send_simple(struct rconn *c, struct proto_frame *f)
{
	struct remote *rm = c->rm;
	struct rframe *fr = frame_new(rm, 0, 0);
	uint64_t need = 0;
	int64_t len;

	if (!fr)
		return -ENOMEM;
	fr->op = f->op;
	fr->tag = f->tag = ++c->next_tag;
	f->version = f->op == PROTO_OP_HELLO ? PROTO_VERSION_HELLO : c->version;
	fr->buf_cap = 1024;
	fr->buf = kvt_mem_alloc(rm->mem, fr->buf_cap);
	if (!fr->buf) {
		frame_free(rm, fr);
		return -ENOMEM;
	}
	len = proto_encode(f, NULL, 0, fr->buf, fr->buf_cap, NULL, &need);
	if (len < 0) {
		frame_free(rm, fr);
		return (int)len;
	}
	fr->iov[0].iov_base = fr->buf;
	fr->iov[0].iov_len = (size_t)len;
	fr->bytes = (uint64_t)len;
	conn_queue(c, fr);
	fr->deadline = c->deadline;
	return conn_tx(c);
}

static int conn_hello(struct rconn *c)
{
	static const char name[] = "libkvtier/" "0.1.0";
	struct proto_frame f = { .op = PROTO_OP_HELLO };
	f.hello.min_version = PROTO_VERSION_MIN;
	f.hello.max_version = PROTO_VERSION_MAX;
	f.hello.name = name;
	f.hello.name_len = sizeof(name) - 1;
	c->state = C_HELLO;
	return conn_send_simple(c, &f);
}

static int conn_auth(struct rconn *c, const struct proto_frame *hello)
{
	struct remote *rm = c->rm;
	struct proto_frame f = { .op = PROTO_OP_AUTH };
	uint16_t want = rm->secret ? PROTO_AUTH_HMAC_SHA256 : PROTO_AUTH_NONE;
	bool offered = false;
	const char *tenant = rm->cfg.tenant ? rm->cfg.tenant : "default";

	for (unsigned i = 0; i < hello->hello.auth_count; i++)
		offered |= hello->hello.auth[i] == want;
	if (!offered) {
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: %s does not offer %s authentication%s",
			 rm->cfg.addr, rm->secret ? "HMAC-SHA-256" : "NONE",
			 rm->secret ? "" : " (set remote.secret_file)");
		return PROTO_EAUTH;
	}
	/* The codec checked the version against the server's range; it must
	 * be in ours too (a server that picked one we did not offer). */
	if (hello->hello.version < PROTO_VERSION_MIN || hello->hello.version > PROTO_VERSION_MAX) {
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: %s chose protocol version %u (offered %u..%u)",
			 rm->cfg.addr, hello->hello.version, PROTO_VERSION_MIN, PROTO_VERSION_MAX);
		return KVT_EVERSION;
	}
	/* The codec checked each limit against its hard cap; a table too
	 * small for one namespace registration (a canonical text is up to
	 * 2048 bytes) or a batch of keys would fail every frame of this
	 * connection, one by one, while it looked up: refused here, once. */
	if (hello->hello.limits.table_max < REMOTE_TABLE_MIN) {
		kvt_logf(rm->log, KVT_LOG_ERROR,
			 "remote: %s announced table_max %" PRIu64 " (under %u): not a usable server",
			 rm->cfg.addr, hello->hello.limits.table_max, REMOTE_TABLE_MIN);
		return PROTO_EMALFORMED;
	}
	c->version = hello->hello.version;
	c->caps = hello->hello.caps;
	c->lim = hello->hello.limits;
	memcpy(c->snonce, hello->hello.nonce, PROTO_NONCE_LEN);
	f.auth.method = want;
	f.auth.tenant = tenant;
	f.auth.tenant_len = (uint32_t)strlen(tenant);
	if (rm->secret) {
		int ret;
		if (getrandom(c->cnonce, PROTO_NONCE_LEN, 0) != PROTO_NONCE_LEN)
			return -EIO;
		memcpy(f.auth.nonce, c->cnonce, PROTO_NONCE_LEN);
		ret = proto_auth_proof(PROTO_PROOF_CLIENT, rm->secret, rm->secret_len, c->snonce,
				       c->cnonce, tenant, f.auth.tenant_len, f.auth.proof);
		if (ret < 0)
			return ret;
	}
	c->state = C_AUTH;
	return conn_send_simple(c, &f);
}

static int conn_authed(struct rconn *c, const struct proto_frame *f)
{
	struct remote *rm = c->rm;
	const char *tenant = rm->cfg.tenant ? rm->cfg.tenant : "default";
	if (rm->secret &&
	    proto_auth_check(PROTO_PROOF_SERVER, rm->secret, rm->secret_len, c->snonce, c->cnonce,
			     tenant, strlen(tenant), f->auth.proof) != 0) {
		kvt_logf(rm->log, KVT_LOG_ERROR,
			 "remote: %s failed to prove it knows tenant %s's secret", rm->cfg.addr,
			 tenant);
		return PROTO_EAUTH;
	}
	c->state = C_READY;
	/* The backoff is reset by the first answer on the connection
	 * (rx_frame_end), not here: a server that completes every handshake
	 * and garbles every answer was reconnected to every remote.backoff_ms
	 * (19 times a second, two log lines each). */
	/* before conns_up: whoever saw the connection up sees what it announced */
	atomic_store(&rm->hello_seen, (uint32_t)c->version << 16 | c->caps);
	A(rm->c_connects);
	A(rm->c_conns_up);
	if (c->failed_once || atomic_load(&rm->down))
		kvt_logf(rm->log, KVT_LOG_INFO, "remote: connection %u to %s is up", c->idx,
			 rm->cfg.addr);
	c->failed_once = false;
	atomic_store(&rm->down, false);
	return 0;
}

static void conn_start(struct rconn *c)
{
	struct remote *rm = c->rm;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.ptr = c };
	int fd = socket(rm->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	c->deadline = kvt_now_ns() + (uint64_t)rm->cfg.connect_timeout_ms * 1000000u;
	c->state = C_CONNECTING;
	c->fd = fd;
	c->rx = RX_HEAD;
	c->rlen = 0;
	if (fd < 0) {
		conn_fail(c, -errno, "socket");
		return;
	}
	if (rm->addr.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (epoll_ctl(rm->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		conn_fail(c, -errno, "epoll");
		return;
	}
	c->want_out = true;
	if (connect(fd, (struct sockaddr *)&rm->addr, rm->addr_len) < 0 && errno != EINPROGRESS) {
		conn_fail(c, -errno, "connect");
		return;
	}
}

/* ------------------------------------------------------------------------
 * Receiving
 */

/* Complete a non-GET item of the frame being read. */
static void rx_item(struct rconn *c, const struct proto_item *it)
{
	struct remote *rm = c->rm;
	struct rframe *fr = c->rx_fr;
	struct rop *op;

	if (fr->op == PROTO_OP_STATS) {
		char name[PROTO_STAT_NAME_MAX + 1], text[PROTO_STAT_TEXT_MAX + 1];
		op = fr->ops[0];
		if (!op || !it->name_len || it->name_len > PROTO_STAT_NAME_MAX ||
		    it->text_len > PROTO_STAT_TEXT_MAX)
			return; /* the codec bounds both; belt and braces */
		memcpy(name, it->name, it->name_len);
		name[it->name_len] = 0;
		if (it->kind == PROTO_STAT_TEXT) {
			if (it->text_len)
				memcpy(text, it->text, it->text_len);
			text[it->text_len] = 0;
		}
		op->sfn(op->ctx, name, it->kind == PROTO_STAT_TEXT ? 0 : it->value,
			it->kind == PROTO_STAT_TEXT ? text : NULL);
		return;
	}
	if (fr->op == PROTO_OP_LOOKUP) {
		op = fr->ops[0];
		if (op->tiers && it->index < op->key_count && it->status == KVT_OK)
			op->tiers[it->index] = KVT_TIER_REMOTE;
		return;
	}
	if (it->index >= fr->count || !(op = fr->ops[it->index]) || op->answered)
		return; /* the codec checked the indexes rise; a repeat is ignored */
	op->answered = true;
	fr->ops[it->index] = NULL;
	if (fr->op == PROTO_OP_NS_REGISTER) {
		int status = it->status;
		if (status == KVT_OK) {
			/* Our text but for tenant=, and its SHA-256
			 * (remote_ns_answer_ok); else the keys of this namespace
			 * would go under another digest.  Not the connection's
			 * fault: the other namespaces keep it, this one is not
			 * registered (asked again after remote.backoff_max_ms,
			 * as KVT_EDESC), its operations KVT_ENONS (misses). */
			const struct ns_entry *e = ns_reg_get(rm->nsreg, op->ns);
			if (!e || !remote_ns_answer_ok(e->canon, e->canon_len, it->text,
						       it->text_len, it->digest)) {
				A(rm->c_ns_mismatches);
				status = KVT_EDESC;
			}
		}
		if (status == KVT_OK)
			memcpy(rm->nsmap[op->ns].digest, it->digest, PROTO_DIGEST_LEN);
		else
			rm->nsmap[op->ns].retry_at =
				kvt_now_ns() +
				(uint64_t)(rm->cfg.backoff_ms ? rm->cfg.backoff_ms : 1) * 1000000u;
		if (status != it->status)
			rm->nsmap[op->ns].mismatch = true;
		rop_done(rm, op, status, NULL, NULL);
		return;
	}
	if (it->status == KVT_ENONS)
		rns_forget(rm, op->ns); /* the server lost it (restarted empty?): register again */
	if (fr->op == PROTO_OP_EXISTS) {
		struct tier_result res = { .tier = it->tier };
		rop_done(rm, op, it->status, NULL, &res);
		return;
	}
	rop_done(rm, op, it->status, NULL, NULL);
}

/* The frame being read is done (all items and data); the last frame of
 * its tag completes the items it did not answer. */
static void rx_frame_end(struct rconn *c)
{
	struct remote *rm = c->rm;
	struct rframe *fr = c->rx_fr;
	c->rx_fr = NULL;
	c->rx = RX_HEAD;
	c->rlen = 0;
	if (fr->op != PROTO_OP_HELLO && fr->op != PROTO_OP_AUTH)
		c->backoff_ms = rm->cfg.backoff_ms; /* an answer read whole: the server works */
	if (c->rf.flags & PROTO_F_MORE)
		return;
	/* Unlink from the wait list. */
	for (struct rframe **pp = &c->wait_head, *prev = NULL; *pp;
	     prev = *pp, pp = &(*pp)->next_wait) {
		if (*pp == fr) {
			*pp = fr->next_wait;
			if (c->wait_tail == fr)
				c->wait_tail = prev;
			break;
		}
	}
	c->inflight_bytes -= fr->bytes;
	/* Items the server never answered (it must answer each once): a get
	 * or an exists is a miss; a put, a delete or a registration failed,
	 * its fate unknown (a put answered KVT_MISS was "no room" to the
	 * store, which it was not). */
	frame_fail(rm, fr,
		   fr->op == PROTO_OP_GET || fr->op == PROTO_OP_EXISTS ? KVT_MISS : -EPROTO);
}

static struct rframe *conn_find(struct rconn *c, uint64_t tag)
{
	for (struct rframe *fr = c->wait_head; fr; fr = fr->next_wait)
		if (fr->tag == tag)
			return fr;
	return NULL;
}

/* Set up the next GET item's receive, or end the frame.  Returns 0 or < 0. */
static int rx_get_next(struct rconn *c)
{
	struct remote *rm = c->rm;
	struct rframe *fr = c->rx_fr;
	int ret;

	for (;;) {
		struct proto_item *it = &c->cur;
		struct rop *op;
		ret = proto_iter_next(&c->it, it);
		if (ret == 0) {
			rx_frame_end(c);
			return 0;
		}
		if (ret < 0)
			return ret;
		if (it->index >= fr->count || !(op = fr->ops[it->index]))
			return -EPROTO;
		if (it->status != KVT_OK || it->data_len == 0) {
			op->answered = true;
			fr->ops[it->index] = NULL;
			if (it->status == KVT_ENONS)
				rns_forget(rm, op->ns);
			/* KVT_EBUFSMALL is the caller's buffer against a value that
			 * came (it carries value_len): from the server it says
			 * nothing, and would send the engine after a buffer of 0
			 * bytes.  A miss. */
			rop_done(rm, op,
				 it->status == KVT_OK || it->status == KVT_EBUFSMALL ? KVT_MISS
										      : it->status,
				 NULL, NULL);
			continue;
		}
		if ((it->flags & (PROTO_IF_PART | PROTO_IF_RANGE)) || it->off != 0 ||
		    it->data_len != it->value_len)
			return -EPROTO; /* we asked for whole values */
		pool_note(rm, it->value_len);
		c->have_cur = true;
		c->cur_done = 0;
		c->cur_vc = 0;
		c->cur_item = NULL;
		c->cur_op = op;
		c->cur_direct = c->cur_bad = c->cur_small = false;
		if (op->dst) {
			uint64_t room = 0;
			for (uint32_t i = 0; i < op->dst_count; i++)
				room += op->dst[i].iov_len;
			if (it->value_len > room) {
				/* KVT_EBUFSMALL; the value goes to DRAM as a promotion
				 * would, so that the caller's retry with a buffer of
				 * value_len is a local hit, not a second transfer --
				 * unless a delete may have removed it meanwhile. */
				c->cur_small = true;
				if (!promo_open_late(rm->head, op))
					return 0; /* read and drop (cur_item NULL) */
				goto reserve;
			}
			c->cur_direct = true;
			c->cur_part = 0;
			c->cur_crc = 0;
			c->cur_part_left = it->part_lens[0];
			return 0;
		}
	reserve:
		ret = dram_reserve(rm->dram, op->ns, &op->key, it->value_len,
				   it->part_count > 1 ? it->part_lens : NULL, it->part_count,
				   &c->cur_item, c->cur_view, &c->cur_vc);
		if (ret != KVT_OK) {
			c->cur_item = NULL; /* no room, or it is in DRAM already: read and drop */
			if (ret != KVT_EXISTS)
				A(rm->c_promote_full);
		}
		return 0;
	}
}

/* The current GET item's bytes, all in its DRAM reservation: true if each
 * part matches the writer's CRC32C. */
static bool rx_check_view(const struct rconn *c, const struct proto_item *it)
{
	unsigned v = 0;
	uint64_t voff = 0;
	for (uint32_t p = 0; p < it->part_count; p++) {
		uint64_t left = it->part_lens[p];
		uint32_t crc = 0;
		while (left) {
			uint64_t n = c->cur_view[v].iov_len - voff;
			if (n > left)
				n = left;
			crc = kvt_crc32c(crc, (uint8_t *)c->cur_view[v].iov_base + voff, n);
			left -= n;
			voff += n;
			if (voff == c->cur_view[v].iov_len)
				v++, voff = 0;
		}
		if (crc != it->part_crcs[p])
			return false;
	}
	return true;
}

/* The current GET item's bytes are all read: check, publish, complete. */
static void rx_get_done(struct rconn *c)
{
	struct remote *rm = c->rm;
	struct rframe *fr = c->rx_fr;
	struct proto_item *it = &c->cur;
	struct rop *op = fr->ops[it->index];
	struct dram_item *item = c->cur_item;
	int status = KVT_MISS;

	c->have_cur = false;
	c->cur_item = NULL;
	c->cur_op = NULL;
	op->answered = true;
	fr->ops[it->index] = NULL;
	if (c->cur_direct) {
		struct tier_result res = {
			.value_len = it->value_len,
			.value_flags = (it->flags & PROTO_IF_SEALED) ? KVT_F_SEALED : 0,
		};
		if (c->cur_bad || c->cur_part < it->part_count) {
			A(rm->c_crc_errors);
			kvt_logf(rm->log, KVT_LOG_WARN,
				 "remote: a value from %s failed its CRC32C: a miss", rm->cfg.addr);
		} else {
			status = KVT_OK;
			res.count = it->value_len;
		}
		c->cur_direct = c->cur_bad = false;
		rop_done(rm, op, status, NULL, &res);
		return;
	}
	if (c->cur_small) {
		/* Too big for the caller's buffers: published in DRAM below if
		 * it reached there intact (the retry is a local hit), and the
		 * answer is KVT_EBUFSMALL with the value's length either way. */
		struct tier_result res = { .value_len = it->value_len };
		c->cur_small = false;
		if (item && rx_check_view(c, it)) {
			dram_publish(rm->dram, item, it->part_crcs, it->part_lens,
				     DRAM_ON_LOWER | DRAM_PROMOTED |
					     ((it->flags & PROTO_IF_SEALED) ? DRAM_SEALED : 0),
				     false);
		} else if (item) {
			A(rm->c_crc_errors);
			dram_abort(rm->dram, item);
		}
		rop_done(rm, op, KVT_EBUFSMALL, NULL, &res);
		return;
	}
	if (item) {
		if (!rx_check_view(c, it)) {
			A(rm->c_crc_errors);
			kvt_logf(rm->log, KVT_LOG_WARN,
				 "remote: a value from %s failed its CRC32C: dropped (a miss)",
				 rm->cfg.addr);
			dram_abort(rm->dram, item);
		} else if (dram_publish(rm->dram, item, it->part_crcs, it->part_lens,
					DRAM_ON_LOWER | DRAM_PROMOTED |
						((it->flags & PROTO_IF_SEALED) ? DRAM_SEALED : 0),
					true) == KVT_OK) {
			rop_done(rm, op, KVT_OK, item, NULL);
			return;
		}
	}
	rop_done(rm, op, status, NULL, NULL);
}

/* n bytes landed in the caller's buffers at offset from: run them through
 * the current part's CRC32C; at the end of each part compare with the
 * writer's.  A part that fails sets cur_bad (the rest is discarded). */
static void rx_direct_crc(struct rconn *c, uint64_t from, uint64_t n)
{
	const struct rop *op = c->cur_op;
	const struct proto_item *it = &c->cur;
	for (uint32_t i = 0; i < op->dst_count && n && !c->cur_bad; i++) {
		uint64_t l = op->dst[i].iov_len;
		if (from >= l) {
			from -= l;
			continue;
		}
		const uint8_t *p = (const uint8_t *)op->dst[i].iov_base + from;
		uint64_t take = l - from < n ? l - from : n;
		from = 0;
		n -= take;
		while (take && !c->cur_bad) {
			uint64_t k = take < c->cur_part_left ? take : c->cur_part_left;
			c->cur_crc = kvt_crc32c(c->cur_crc, p, k);
			p += k;
			take -= k;
			c->cur_part_left -= k;
			while (c->cur_part_left == 0 && c->cur_part < it->part_count &&
			       !c->cur_bad) {
				if (c->cur_crc != it->part_crcs[c->cur_part])
					c->cur_bad = true;
				c->cur_crc = 0;
				if (++c->cur_part < it->part_count)
					c->cur_part_left = it->part_lens[c->cur_part];
			}
		}
	}
}

/* The bytes [skip, skip + want) of the buffers src[0..src_n) as at most
 * max iovecs in out: how many. */
static int iov_window(struct iovec *out, size_t max, const struct iovec *src, size_t src_n,
		      uint64_t skip, uint64_t want)
{
	size_t n = 0;
	for (size_t i = 0; i < src_n && want && n < max; i++) {
		uint64_t l = src[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		out[n].iov_base = (uint8_t *)src[i].iov_base + skip;
		out[n].iov_len = l - skip < want ? l - skip : want;
		want -= out[n].iov_len;
		skip = 0;
		n++;
	}
	return (int)n;
}

/* A receive's outcome (conn_read, conn_readv): 0 with r bytes read,
 * counted; RX_EMPTY (nothing to read now), RX_RETRY (interrupted), or
 * < 0 (the connection fails; -ECONNRESET: the server closed it). */
enum { RX_EMPTY = 1, RX_RETRY = 2 };

static int rx_took(struct rconn *c, ssize_t r)
{
	if (r < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return RX_EMPTY;
		return errno == EINTR ? RX_RETRY : -errno;
	}
	if (r == 0)
		return -ECONNRESET;
	AN(c->rm->c_bytes_in, (uint64_t)r);
	return 0;
}

/* Read the data of GET items.  1: more to read later (EAGAIN); 0: frame
 * done; < 0: failed. */
static int rx_data(struct rconn *c)
{
	for (;;) {
		ssize_t r;
		uint64_t left;
		int ret;
		if (!c->rx_fr)
			return 0;
		if (!c->have_cur) {
			ret = rx_get_next(c);
			if (ret < 0)
				return ret;
			continue;
		}
		left = c->cur.data_len - c->cur_done;
		if (left == 0) {
			rx_get_done(c);
			continue;
		}
		if (c->cur_direct && !c->cur_bad) {
			/* Straight into the caller's buffers, from where the bytes
			 * so far ended. */
			struct iovec iov[64];
			const struct rop *op = c->cur_op;
			int n = iov_window(iov, KVT_ARRAY_LEN(iov), op->dst, op->dst_count,
					   c->cur_done, left);
			r = conn_readv(c, iov, n);
			if (r > 0)
				rx_direct_crc(c, c->cur_done, (uint64_t)r);
		} else if (c->cur_item) {
			struct iovec iov[DRAM_MAX_RUNS];
			int n = iov_window(iov, KVT_ARRAY_LEN(iov), c->cur_view, c->cur_vc,
					   c->cur_done, left);
			r = conn_readv(c, iov, n);
		} else {
			r = conn_read(c, c->scratch, left < RX_SCRATCH ? left : RX_SCRATCH);
		}
		ret = rx_took(c, r);
		if (ret == RX_RETRY)
			continue;
		if (ret != 0)
			return ret == RX_EMPTY ? 1 : ret;
		c->cur_done += (uint64_t)r;
	}
}

/* The next line of t[*off, len) without its '\n', skipping "tenant=" lines:
 * false at the end. */
static bool canon_line(const char *t, size_t len, size_t *off, const char **line, size_t *n)
{
	while (*off < len) {
		const char *p = t + *off, *nl = memchr(p, '\n', len - *off);
		size_t l = nl ? (size_t)(nl - p) : len - *off;
		*off += l + (nl ? 1 : 0);
		if (l >= 7 && memcmp(p, "tenant=", 7) == 0)
			continue;
		*line = p;
		*n = l;
		return true;
	}
	return false;
}

/* remote.h: an NS_REGISTER answer against our text. */
bool remote_ns_answer_ok(const char *ours, size_t ours_len, const char *text, size_t text_len,
			 const uint8_t digest[PROTO_DIGEST_LEN])
{
	uint8_t d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	size_t ao = 0, bo = 0, an, bn;
	const char *al, *bl;

	if (!EVP_Digest(text, text_len, d, &dl, EVP_sha256(), NULL) || dl != PROTO_DIGEST_LEN ||
	    CRYPTO_memcmp(d, digest, PROTO_DIGEST_LEN) != 0)
		return false;
	while (canon_line(ours, ours_len, &ao, &al, &an)) {
		if (!canon_line(text, text_len, &bo, &bl, &bn) || an != bn ||
		    memcmp(al, bl, an) != 0)
			return false;
	}
	return !canon_line(text, text_len, &bo, &bl, &bn);
}

/* The largest value a GET answer may announce: remote.value_max, or the
 * largest value this tier put, if larger. */
static uint64_t value_bound(const struct remote *rm)
{
	uint64_t vmax = rm->cfg.value_max ? rm->cfg.value_max : REMOTE_DEF_VALUE_MAX;
	uint64_t put = atomic_load_explicit(&rm->head->put_max, memory_order_relaxed);
	return put > vmax ? put : vmax;
}

/*
 * The answer in c->rf against the request it names, before any of its items
 * is acted on (doc/protocol.md section 2, "Reading a frame": the codec
 * checked each item against the frame, this checks them against the
 * request): every index names an item of the request not answered yet,
 * and the last frame of a tag answers all that are left;
 * a LOOKUP answers each of its keys once, the first hits of them KVT_OK
 * and no other; a GET item is a whole value, as asked, of at most
 * value_bound bytes (-EFBIG).  (An NS_REGISTER answer that is not our
 * text and its digest fails that namespace alone: rx_item.)  A server that
 * says otherwise is broken or hostile: -EPROTO, and the connection fails
 * (every operation on it a miss or an error), rather than a lookup
 * claiming more keys than the engine has or an answer whose first items
 * were used before a later one showed the frame was wrong.
 */
static int rx_check_items(const struct rconn *c, const struct rframe *fr)
{
	const struct proto_frame *f = &c->rf;
	struct proto_iter it;
	struct proto_item item;
	int ret;

	if (f->op == PROTO_OP_STATS || f->op == PROTO_OP_CLEAR)
		return 0;
	if (f->op == PROTO_OP_LOOKUP) {
		const struct rop *op = fr->ops[0];
		if (!op || f->item_count != op->key_count || f->lookup.hits > op->key_count)
			return -EPROTO;
	} else if (!(f->flags & PROTO_F_MORE)) {
		/* The last frame of its tag answers every item not answered yet
		 * (each once: the indexes below are distinct and unanswered). */
		uint32_t left = 0;
		for (uint32_t i = 0; i < fr->count; i++)
			left += fr->ops[i] != NULL;
		if (f->item_count != left)
			return -EPROTO;
	} else if (f->item_count > fr->count) {
		return -EPROTO;
	}
	proto_iter_init(&it, f, NULL, NULL, 0);
	while ((ret = proto_iter_next(&it, &item)) != 0) {
		if (ret < 0 && ret != KVT_ERANGE)
			return ret;
		if (f->op == PROTO_OP_LOOKUP) {
			/* item_count == key_count and indexes rise: index i is key i */
			if ((item.index < f->lookup.hits) != (item.status == KVT_OK))
				return -EPROTO;
			continue;
		}
		if (item.index >= fr->count || !fr->ops[item.index])
			return -EPROTO;
		if (f->op == PROTO_OP_GET && item.status == KVT_OK &&
		    ((item.flags & (PROTO_IF_PART | PROTO_IF_RANGE)) || item.off != 0 ||
		     item.data_len != item.value_len))
			return -EPROTO; /* we asked for whole values */
		/* A value bigger than any this engine expects is not reserved
		 * (up to the server's value_max, 1 GiB, per answer). */
		if (f->op == PROTO_OP_GET && item.status == KVT_OK &&
		    item.value_len > value_bound(c->rm))
			return -EFBIG;
	}
	return 0;
}

/* A response frame's header and table are in c->rbuf and parsed in c->rf. */
static int rx_frame(struct rconn *c)
{
	struct remote *rm = c->rm;
	struct proto_frame *f = &c->rf;
	struct proto_item it;
	int ret;

	if (f->op == PROTO_OP_ERROR) {
		kvt_logf(rm->log, KVT_LOG_WARN, "remote: %s refused a frame: %s%s%.*s", rm->cfg.addr,
			 kvt_strerror(f->status), f->msg_len ? ": " : "", (int)f->msg_len,
			 f->msg ? f->msg : "");
		return f->status < 0 ? f->status : -EPROTO;
	}
	c->rx_fr = conn_find(c, f->tag);
	if (!c->rx_fr || c->rx_fr->op != f->op)
		return -EPROTO;
	if (!c->rx_fr->sent) {
		/* An answer to a frame still being sent (the header names the
		 * tag): a server answers what it received whole.  Taken, it
		 * completed the puts while their bytes were still to go out of
		 * the callers' buffers, and freed the frame the send queue
		 * went on from (test_hostile_server early: a use after free). */
		kvt_logf(rm->log, KVT_LOG_WARN,
			 "remote: %s answered a %s frame before it was sent whole: the connection is dropped",
			 rm->cfg.addr, proto_op_name(f->op));
		c->rx_fr = NULL;
		return -EPROTO;
	}
	if (c->state == C_HELLO || c->state == C_AUTH) {
		if (f->status < 0) {
			kvt_logf(rm->log, KVT_LOG_ERROR, "remote: %s refused %s: %s", rm->cfg.addr,
				 proto_op_name(f->op), kvt_strerror(f->status));
			return f->status;
		}
		ret = c->state == C_HELLO ? conn_auth(c, f) : conn_authed(c, f);
		rx_frame_end(c);
		return ret;
	}
	if (f->status < 0) {
		/* The whole request failed. */
		struct rframe *fr = c->rx_fr;
		if (f->status == KVT_ENONS)
			for (uint32_t i = 0; i < fr->count; i++)
				if (fr->ops[i])
					rns_forget(rm, fr->ops[i]->ns);
		for (uint32_t i = 0; i < fr->count; i++) {
			struct rop *op = fr->ops[i];
			if (op && !op->answered) {
				op->answered = true;
				fr->ops[i] = NULL;
				/* As an item refused (rx_item): a registration
				 * refused whole (-ENOMEM from a server past the
				 * tenant's share) was asked again at once, as fast
				 * as it answered, until the operations' deadline
				 * (11,782 in one 400 ms get). */
				if (fr->op == PROTO_OP_NS_REGISTER)
					rm->nsmap[op->ns].retry_at =
						kvt_now_ns() + (uint64_t)(rm->cfg.backoff_ms ?
								      rm->cfg.backoff_ms : 1) *
								   1000000u;
				if (fr->op == PROTO_OP_GET && f->status == KVT_EBUSY)
					A(rm->c_busy); /* a miss, not an error */
				rop_done(rm, op, fr->op == PROTO_OP_GET ? KVT_MISS : f->status,
					 NULL, NULL);
			}
		}
		c->rf.flags &= ~PROTO_F_MORE;
		rx_frame_end(c);
		return 0;
	}
	ret = rx_check_items(c, c->rx_fr);
	if (ret == -EFBIG) {
		kvt_logf(rm->log, KVT_LOG_WARN,
			 "remote: %s announced a value of more than %llu bytes (remote.value_max): the connection is dropped",
			 rm->cfg.addr, (unsigned long long)value_bound(rm));
		return ret;
	}
	if (ret < 0) {
		kvt_logf(rm->log, KVT_LOG_WARN,
			 "remote: %s answered a %s frame with items that do not fit it: %s",
			 rm->cfg.addr, proto_op_name(f->op), kvt_strerror(ret));
		return ret;
	}
	proto_iter_init(&c->it, f, c->plens, c->pcrcs, KVT_PARTS_MAX);
	if (f->op == PROTO_OP_GET) {
		c->rx = RX_DATA;
		c->have_cur = false;
		ret = rx_data(c);
		return ret < 0 ? ret : 0;
	}
	while ((ret = proto_iter_next(&c->it, &it)) == 1)
		rx_item(c, &it);
	if (ret < 0)
		return ret;
	if (f->op == PROTO_OP_LOOKUP || f->op == PROTO_OP_CLEAR) {
		struct rframe *fr = c->rx_fr;
		struct rop *op = fr->ops[0];
		struct tier_result res = { 0 };
		if (f->op == PROTO_OP_LOOKUP) {
			res.count = f->lookup.hits;
			res.load_ns = f->lookup.load_ns;
		} else {
			/* kvt_clear returns it as an int64_t, where a negative
			 * number is an error code: a server's 2^64 - 5003 would
			 * read as one. */
			res.count = f->removed > INT64_MAX ? INT64_MAX : f->removed;
		}
		op->answered = true;
		fr->ops[0] = NULL;
		rop_done(rm, op, KVT_OK, NULL, &res);
	}
	if (f->op == PROTO_OP_STATS && !(f->flags & PROTO_F_MORE)) {
		struct rframe *fr = c->rx_fr;
		struct rop *op = fr->ops[0];
		if (op) {
			op->answered = true;
			fr->ops[0] = NULL;
			rop_done(rm, op, KVT_OK, NULL, NULL);
		}
	}
	rx_frame_end(c);
	return 0;
}

/*
 * Read what the socket has, RX_BUDGET turns at most (then c->rx_more: the
 * thread calls again once it looked at its timers).  0 or < 0 (fail the
 * connection).  It read until the socket was empty: a server that sent
 * frames faster than they were read (empty MORE frames, 64 KiB a write)
 * kept the thread here, its deadlines never looked at, for as long as it
 * went on (test_hostile_server flood: a get of a 400 ms deadline answered
 * after the server's 3 s).
 */
static int conn_rx(struct rconn *c)
{
	struct remote *rm = c->rm;
	unsigned turns = 0;

	c->rx_more = false;
	c->rx_gen = rm->rx_gen;
	for (;;) {
		size_t want;
		ssize_t r;
		int ret;

		if (++turns > RX_BUDGET) {
			c->rx_more = true;
			return 0;
		}
		if (c->rx == RX_DATA) {
			ret = rx_data(c);
			if (ret != 0)
				return ret < 0 ? ret : 0;
			continue;
		}
		if (c->state < C_HELLO)
			return 0;
		want = PROTO_HDR_LEN;
		if (c->rlen >= PROTO_HDR_LEN) {
			ret = proto_parse_response(c->rbuf, c->rlen, NULL, &c->rf);
			if (ret == 0) {
				ret = rx_frame(c);
				if (ret < 0)
					return ret;
				continue;
			}
			if (ret != PROTO_NEED_MORE)
				return ret;
			want = c->rf.need;
		}
		if (want > c->rcap) {
			uint8_t *nb = kvt_mem_realloc(rm->mem, c->rbuf, c->rcap, want);
			if (!nb)
				return -ENOMEM;
			c->rbuf = nb;
			c->rcap = want;
		}
		r = conn_read(c, c->rbuf + c->rlen, want - c->rlen);
		ret = rx_took(c, r);
		if (ret == RX_RETRY)
			continue;
		if (ret != 0)
			return ret == RX_EMPTY ? 0 : ret;
		c->rlen += (size_t)r;
	}
}

/* One step of the TLS handshake; done: HELLO. */
static void conn_tls_step(struct rconn *c)
{
	struct remote *rm = c->rm;
	int want = 0, ret = tlsio_handshake(c->ssl, &want);
	char why[300];

	if (ret == 0) {
		conn_epoll(c, want == TLSIO_WANT_OUT);
		return;
	}
	if (ret < 0) {
		tlsio_errstr(c->ssl, why, sizeof(why));
		A(rm->c_tls_failures);
		if (!c->failed_once)
			kvt_logf(rm->log, KVT_LOG_ERROR, "remote: TLS handshake with %s failed: %s",
				 rm->cfg.addr, why);
		conn_fail(c, -EPROTO, "TLS handshake");
		return;
	}
	conn_epoll(c, false);
	ret = conn_hello(c);
	if (ret < 0)
		conn_fail(c, ret, "hello");
}

/* Connected: start TLS, verifying the server's certificate and name. */
static void conn_tls_start(struct rconn *c)
{
	struct remote *rm = c->rm;

	c->ssl = tlsio_new(rm->tls_ctx, c->fd, false);
	if (!c->ssl) {
		conn_fail(c, -ENOMEM, "TLS");
		return;
	}
	if (rm->tls_host_ip) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), rm->tls_host);
	} else {
		SSL_set_tlsext_host_name(c->ssl, rm->tls_host);
		SSL_set1_host(c->ssl, rm->tls_host);
	}
	c->state = C_TLS;
	conn_tls_step(c);
}

static void conn_event(struct rconn *c, uint32_t events)
{
	int ret = 0;
	if (c->state == C_TLS) {
		conn_tls_step(c);
		return;
	}
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			conn_fail(c, -err, "connect");
			return;
		}
		if (c->rm->tls_ctx) {
			conn_tls_start(c);
			return;
		}
		ret = conn_hello(c);
		if (ret < 0) {
			conn_fail(c, ret, "hello");
			return;
		}
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		ret = conn_rx(c);
		if (ret < 0) {
			conn_fail(c, ret, "receive");
			return;
		}
	}
	if (c->state != C_DOWN && c->ssl && c->tls_want == TLSIO_WANT_OUT &&
	    (events & EPOLLOUT) && (ret = conn_rx(c)) < 0) {
		conn_fail(c, ret, "receive");
		return;
	}
	if (c->state != C_DOWN && (events & EPOLLOUT) && c->out_head) {
		ret = conn_tx(c);
		if (ret < 0)
			conn_fail(c, ret, "send");
	}
}

/* ------------------------------------------------------------------------
 * Dispatch: pending operations into frames
 */

/* The ready connection with the fewest bytes in flight; with window (GET
 * and PUT frames, a pool of two or more: the rule below) only one with
 * fewer than REMOTE_STRIPE_BYTES in flight, else NULL. */
static struct rconn *conn_pick(struct remote *rm, bool window)
{
	struct rconn *best = NULL;
	window = window && rm->conns_used >= 2;
	for (unsigned i = 0; i < rm->conns_used; i++) {
		struct rconn *c = &rm->conns[i];
		if (c->state != C_READY || (window && c->inflight_bytes >= REMOTE_STRIPE_BYTES))
			continue;
		if (!best || c->inflight_bytes < best->inflight_bytes)
			best = c;
	}
	return best;
}

static int rns_grow(struct remote *rm, uint32_t ns)
{
	uint32_t cap = rm->nsmap_cap ? rm->nsmap_cap : 16;
	struct rns *m;
	if (ns < rm->nsmap_cap)
		return 0;
	while (cap <= ns)
		cap *= 2;
	m = kvt_mem_realloc(rm->mem, rm->nsmap, rm->nsmap_cap * sizeof(*m), cap * sizeof(*m));
	if (!m)
		return -ENOMEM;
	memset(m + rm->nsmap_cap, 0, (cap - rm->nsmap_cap) * sizeof(*m));
	rm->nsmap = m;
	rm->nsmap_cap = cap;
	return 0;
}

static void pend_push(struct remote *rm, struct rop *op)
{
	op->next = NULL;
	if (rm->pend_tail)
		rm->pend_tail->next = op;
	else
		rm->pend_head = op;
	rm->pend_tail = op;
}

/*
 * The pool and striping rule (doc/remote.md "Connections, batching,
 * pipelining"), by the running mean of value sizes (gets received, puts
 * sent: the engine's block size):
 *
 *   pool      cfg.conns at open; once the mean reaches REMOTE_BIG_VALUE
 *             (512 KiB: a 4 MiB frame holds 8 values or fewer),
 *             cfg.conns_max (4): a prompt of big blocks is many frames,
 *             worth more streams in parallel; one of small blocks is one
 *             or two frames, which more connections would not speed up
 *             (and every connection costs the server a slot per engine).
 *             The pool never shrinks.
 *   GET frame about REMOTE_STRIPE_BYTES (4 MiB) of values: mean 2 MiB: 2
 *             items, 256 KiB: 16, 64 KiB and less: remote.batch (64);
 *             remote.batch until the mean is known or with one connection.
 *   PUT frame values up to REMOTE_STRIPE_BYTES (at least one value), or
 *             REMOTE_PUT_FRAME_BYTES (256 MiB) with one connection.
 *   depth     a GET or PUT frame goes to the ready connection with the
 *             fewest bytes in flight, and with a pool of two or more only
 *             to one with less than REMOTE_STRIPE_BYTES (4 MiB) in flight
 *             (so about one such frame per connection); the others wait
 *             here until an answer comes back.  Deeper queues on the socket
 *             cost CPU per byte on both sides (a full receive window: the
 *             receiver reads it in pieces, the sender writes into it in
 *             pieces): with 8 puts of 2 MiB in flight over 2 connections,
 *             the server spent 1.5-1.9x the direct client's CPU per GB,
 *             1.2-1.5x with the window (bench cluster, 2026-12-02).  Other
 *             frames (exists, delete, lookup, clear, STATS, namespace
 *             registration) go at once.
 */
unsigned remote_rule_conns(unsigned conns, unsigned conns_max, uint64_t mean)
{
	return mean >= REMOTE_BIG_VALUE && conns_max > conns ? conns_max : conns;
}

uint32_t remote_rule_get_items(uint64_t mean, uint32_t batch, unsigned conns)
{
	uint64_t per;
	if (mean == 0 || conns < 2)
		return batch;
	per = REMOTE_STRIPE_BYTES / mean;
	return per < 1 ? 1 : per < batch ? (uint32_t)per : batch;
}

uint64_t remote_rule_put_bytes(unsigned conns)
{
	return conns < 2 ? REMOTE_PUT_FRAME_BYTES : REMOTE_STRIPE_BYTES;
}

/* A value of len bytes went out or came in: the mean, and the pool. */
static void pool_note(struct remote *rm, uint64_t len)
{
	unsigned want;
	rm->get_mean = rm->get_mean ? rm->get_mean - rm->get_mean / 8 + len / 8 : len;
	want = remote_rule_conns(rm->cfg.conns, rm->conns_cap, rm->get_mean);
	if (want <= rm->conns_used)
		return;
	kvt_logf(rm->log, KVT_LOG_INFO, "remote %s: values of ~%" PRIu64 " KiB: %u connections",
		 rm->cfg.addr, rm->get_mean >> 10, want);
	while (rm->conns_used < want)
		conn_start(&rm->conns[rm->conns_used++]);
	atomic_store(&rm->c_pool, rm->conns_used);
}

/* Batches being filled, one per kind. */
struct batch {
	struct rop **ops;
	uint32_t n, cap;
	uint64_t bytes;
};

static void batch_flush(struct remote *rm, struct rconn *c, struct batch *b, int kind)
{
	if (b->n)
		frame_send(rm, c, kind, b->ops, b->n);
	b->n = 0;
	b->bytes = 0;
}

static void dispatch(struct remote *rm, uint64_t now, uint64_t *next_timer)
{
	struct rconn *any = conn_pick(rm, false); /* for small frames */
	struct rconn *c = conn_pick(rm, true), *last = c; /* for GET and PUT frames */
	struct rop *list = rm->pend_head, *op;
	struct batch b[RK__COUNT] = { { 0 } };
	bool down = atomic_load_explicit(&rm->down, memory_order_relaxed);
	uint32_t batch_max = rm->cfg.batch;

	rm->pend_head = rm->pend_tail = NULL;
	if (!list)
		any = c = last = NULL; /* nothing to pack: go straight to sending */
	if (any) {
		if (batch_max > any->lim.items_max)
			batch_max = any->lim.items_max;
		if (batch_max > any->lim.ns_max)
			batch_max = any->lim.ns_max; /* every item may name its own namespace */
		for (int k = 0; k < RK__COUNT; k++) {
			b[k].ops = rm->batch_ops + (size_t)k * rm->cfg.batch;
			b[k].cap = batch_max;
		}
		b[RK_GET].cap = remote_rule_get_items(rm->get_mean, batch_max, rm->conns_used);
	}
	while ((op = list)) {
		int kind = op->kind;
		list = op->next;
		op->next = NULL;
		/* A get or exists after a DELETE of its key (CLEAR of its
		 * namespace) not yet answered: a miss, the delete's outcome. */
		if (op->after_remove) {
			A(rm->c_gets_removed);
			rop_done(rm, op, kind == RK_LOOKUP ? KVT_OK : KVT_MISS, NULL, NULL);
			continue;
		}
		if (now >= op->deadline) {
			A(rm->c_timeouts);
			if (kind == RK_NSREG)
				rns_forget(rm, op->ns);
			rop_done(rm, op, -ETIMEDOUT, NULL, NULL);
			continue;
		}
		if (down) {
			A(rm->c_fast_fails);
			rop_done(rm, op, -ENOTCONN, NULL, NULL);
			continue;
		}
		/* A PUT after a DELETE of its key (CLEAR of its namespace) not
		 * yet answered waits for the answer (at most twice
		 * remote.timeout_ms), then has its own remote.timeout_ms. */
		if (op->wait_remove && put_waits(rm->head, op, now)) {
			pend_push(rm, op);
			continue;
		}
		if (!any) {
			pend_push(rm, op);
			continue;
		}
		if (op->ns != KVT_NS_ALL && kind != RK_NSREG) {
			struct rns *e;
			if (rns_grow(rm, op->ns) < 0) {
				rop_done(rm, op, -ENOMEM, NULL, NULL);
				continue;
			}
			e = &rm->nsmap[op->ns];
			if (e->state == NS_NONE && now < e->retry_at) {
				rop_done(rm, op, KVT_ENONS, NULL, NULL);
				continue;
			}
			if (e->state != NS_READY) {
				if (e->state == NS_NONE) {
					struct rop *reg = kvt_mem_calloc(rm->mem, 1, sizeof(*reg));
					if (reg) {
						reg->kind = RK_NSREG;
						reg->ns = op->ns;
						reg->deadline = now + (uint64_t)rm->cfg.timeout_ms *
									      1000000u;
						e->state = NS_PENDING;
						frame_send(rm, any, RK_NSREG, &reg, 1);
					}
				}
				pend_push(rm, op);
				continue;
			}
		}
		if (kind == RK_PUT && (op->value_len > any->lim.value_max ||
				       op->part_count > any->lim.parts_max)) {
			rop_done(rm, op, KVT_ETOOBIG, NULL, NULL);
			continue;
		}
		/* One key the server does not take would fail its whole frame
		 * at the encoder: it fails alone, here. */
		if (kind != RK_LOOKUP && kind != RK_CLEAR && kind != RK_STATS &&
		    op->key.len > any->lim.key_max) {
			rop_done(rm, op, KVT_EKEYLEN, NULL, NULL);
			continue;
		}
		/* A LOOKUP names at most what the server takes a frame (kvtierd:
		 * 1,024): the first keys are asked, the rest count as misses --
		 * the prefix it answers is still a prefix, where a longer frame
		 * failed the whole lookup (1,500 keys, 10 held remotely: 0). */
		if (kind == RK_LOOKUP && op->key_count > any->lim.items_max)
			op->key_count = any->lim.items_max;
		/* The deletes taken before this op go out before it: the
		 * batches leave in kind order below, and a PUT submitted
		 * after a DELETE of its key, both taken in one pass, went
		 * out first on the connection -- the server applied the
		 * DELETE after it, and a cold engine missed the new value
		 * (test_remote_put delete_then_put, about half the runs).
		 * On one connection kvtierd applies them in that order
		 * (doc/protocol.md section 2). */
		if (kind != RK_DELETE && b[RK_DELETE].n)
			batch_flush(rm, any, &b[RK_DELETE], RK_DELETE);
		if (kind == RK_LOOKUP || kind == RK_CLEAR || kind == RK_STATS) {
			frame_send(rm, any, kind, &op, 1);
			continue;
		}
		bool big = kind == RK_GET || kind == RK_PUT;
		if (big && !c) {
			A(rm->c_window_waits);
			pend_push(rm, op); /* every connection has a window's worth in flight */
			continue;
		}
		if (kind == RK_PUT) {
			pool_note(rm, op->value_len);
			if (b[kind].n && b[kind].bytes + op->value_len >
						 remote_rule_put_bytes(rm->conns_used)) {
				batch_flush(rm, c, &b[kind], kind);
				c = conn_pick(rm, true); /* spread the next batch */
				if (!c) {
					A(rm->c_window_waits);
					pend_push(rm, op);
					continue;
				}
				last = c;
			}
		}
		b[kind].ops[b[kind].n++] = op;
		b[kind].bytes += op->value_len;
		if (b[kind].n == b[kind].cap) {
			if (big) {
				batch_flush(rm, c, &b[kind], kind);
				c = conn_pick(rm, true); /* spread the next batch */
				last = c ? c : last;
			} else {
				batch_flush(rm, any, &b[kind], kind);
				any = conn_pick(rm, false);
			}
		}
	}
	/* What is left: GET and PUT batches to the connection they were
	 * packed for (c, or the last one if that filled up since), the rest to
	 * any ready one. */
	for (int k = 0; k < RK__COUNT; k++) {
		struct rconn *to = k == RK_GET || k == RK_PUT ? (c ? c : last) : any;
		if (to && to->state == C_READY) {
			batch_flush(rm, to, &b[k], k);
			continue;
		}
		for (uint32_t i = 0; i < b[k].n; i++) /* its connection failed meanwhile */
			pend_push(rm, b[k].ops[i]);
		b[k].n = 0;
	}
	for (op = rm->pend_head; op; op = op->next)
		if (op->deadline < *next_timer)
			*next_timer = op->deadline;
	/* Send what was queued. */
	for (unsigned i = 0; i < rm->conns_used; i++) {
		struct rconn *cc = &rm->conns[i];
		if (cc->state == C_READY && cc->out_head && !cc->want_out) {
			int ret = conn_tx(cc);
			if (ret < 0)
				conn_fail(cc, ret, "send");
		}
	}
}

/* ------------------------------------------------------------------------
 * The thread
 */

/*
 * The head's thread: the deletes and clears held past their deadline
 * (rop_submit_after_puts) fail -EAGAIN, never sent; the puts waiting
 * for them go (a DELETE that failed lets them go, remove_hold).  Held
 * oldest first, all with remote.timeout_ms: the first is the next due.
 *
 * Failing is the rule, not a shortcut: sent while a put of its key
 * submitted before it is still unanswered, the DELETE could reach the
 * server first and the put bring the block back after a delete that
 * answered KVT_OK; held on, it would outlive its own deadline, and the
 * later puts of its key waiting for it theirs.  So a delete that cannot
 * be ordered after its put fails, and says so: -EAGAIN (never sent, the
 * server untouched by it: try again once the put is answered), where
 * until session 46 it was -ETIMEDOUT, which a DELETE sent and not
 * answered also gets (the block may or may not be gone).  Counted in
 * remote.timeouts still: its deadline passed.
 */
static void held_expire(struct remote *rm, uint64_t now, uint64_t *next)
{
	struct rop *due = NULL, **tail = &due;
	/* A held one is open (removes_open), on the head only: the other
	 * lanes' threads look at their count, never at rm->head (set after
	 * they start). */
	if (atomic_load_explicit(&rm->removes_open, memory_order_acquire) == 0)
		return;
	pthread_mutex_lock(&rm->put_lock);
	while (rm->held && now >= rm->held->deadline) {
		struct rop *d = rm->held;
		rm->held = d->next;
		d->next = NULL;
		*tail = d;
		tail = &d->next;
	}
	if (!rm->held)
		rm->held_tail = NULL;
	else if (rm->held->deadline < *next)
		*next = rm->held->deadline;
	pthread_mutex_unlock(&rm->put_lock);
	while (due) {
		struct rop *d = due;
		due = d->next;
		d->next = NULL;
		A(rm->c_timeouts);
		rop_done(rm, d, -EAGAIN, NULL, NULL);
	}
}

static void timers(struct remote *rm, uint64_t now, uint64_t *next)
{
	held_expire(rm, now, next);
	for (unsigned i = 0; i < rm->conns_used; i++) {
		struct rconn *c = &rm->conns[i];
		if (c->state == C_DOWN) {
			if (now >= c->retry_at)
				conn_start(c);
			else if (c->retry_at < *next)
				*next = c->retry_at;
		}
		if (c->state >= C_CONNECTING && c->state <= C_AUTH) {
			if (now >= c->deadline)
				conn_fail(c, -ETIMEDOUT, "handshake");
			else if (c->deadline < *next)
				*next = c->deadline;
		}
		if (c->state == C_READY && c->wait_head) {
			/* Deadlines rise along the wait list: the head is the oldest. */
			if (now >= c->wait_head->deadline)
				conn_fail(c, -ETIMEDOUT, "no answer in time");
			else if (c->wait_head->deadline < *next)
				*next = c->wait_head->deadline;
		}
		if (c->state == C_DOWN && c->retry_at < *next)
			*next = c->retry_at;
	}
}

static void *remote_main(void *arg)
{
	struct remote *rm = arg;
	struct epoll_event evs[16];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (unsigned i = 0; i < rm->conns_used; i++)
		conn_start(&rm->conns[i]);
	for (;;) {
		uint64_t now = kvt_now_ns(), next = now + 100000000u;
		struct rop *sub;
		bool stop;
		int n, ms;

		pthread_mutex_lock(&rm->lock);
		sub = rm->sub_head;
		rm->sub_head = rm->sub_tail = NULL;
		stop = rm->stop;
		pthread_mutex_unlock(&rm->lock);
		while (sub) {
			struct rop *nx = sub->next;
			pend_push(rm, sub);
			sub = nx;
		}
		if (stop)
			break;
		timers(rm, now, &next);
		dispatch(rm, now, &next);
		now = kvt_now_ns();
		pthread_mutex_lock(&rm->lock);
		/* A hold made after held_expire looked (hold_wake). */
		if (rm->hold_due < next)
			next = rm->hold_due;
		rm->hold_due = UINT64_MAX;
		ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		if (rm->sub_head && rm->plugged == 0) {
			ms = 0; /* submitted while this pass ran: nobody woke us */
		} else {
			rm->sleep_until = next;
			atomic_store_explicit(&rm->asleep, true, memory_order_relaxed);
		}
		pthread_mutex_unlock(&rm->lock);
		for (unsigned i = 0; i < rm->conns_used; i++)
			if (rm->conns[i].rx_more)
				ms = 0; /* a connection has more to read */
		n = epoll_wait(rm->epfd, evs, 16, ms);
		atomic_store_explicit(&rm->asleep, false, memory_order_relaxed);
		A(rm->c_wakeups);
		rm->rx_gen++;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == NULL) {
				uint64_t v;
				ssize_t r = read(rm->wake_fd, &v, sizeof(v));
				KVT_UNUSED(r);
				continue;
			}
			conn_event(evs[i].data.ptr, evs[i].events);
		}
		/* One that stopped at RX_BUDGET with no event now (the bytes an
		 * SSL holds wake no epoll) goes on. */
		for (unsigned i = 0; i < rm->conns_used; i++) {
			struct rconn *c = &rm->conns[i];
			int ret;
			if (!c->rx_more || c->rx_gen == rm->rx_gen || c->state == C_DOWN)
				continue;
			if ((ret = conn_rx(c)) < 0)
				conn_fail(c, ret, "receive");
		}
	}
	/* Closing: everything in flight or queued fails. */
	for (unsigned i = 0; i < rm->conns_used; i++) {
		struct rconn *c = &rm->conns[i];
		c->failed_once = true;
		conn_fail(c, -ECANCELED, "closing");
	}
	while (rm->pend_head) {
		struct rop *op = rm->pend_head;
		rm->pend_head = op->next;
		rop_done(rm, op, -ECANCELED, NULL, NULL);
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * Submission
 */

/*
 * Whether a submission must write wake_fd (rm->lock held): only if the
 * thread sleeps, and only the first since it fell asleep.  A thread that
 * is running (receiving, completing, packing) takes rm->sub before it
 * sleeps again, so the submissions of an engine that refills its slots
 * from completions cost no eventfd write and no extra pass of epoll_wait
 * (kvtier bench cluster, 256 KiB puts at one node: 1721 -> 1512 wake-ups
 * and 2794 -> 2027 context switches per GB; GB/s within the spread).
 */
static bool wake_take(struct remote *rm)
{
	if (!atomic_load_explicit(&rm->asleep, memory_order_relaxed))
		return false;
	atomic_store_explicit(&rm->asleep, false, memory_order_relaxed);
	return true;
}

/*
 * Deletes and clears against the puts and promotions before them.
 *
 * A PUT of the key (clear: namespace) submitted before a DELETE and not
 * yet answered: the DELETE is not sent before it is (held; put_close
 * sends it), or the server could apply the DELETE first and the PUT
 * after.  A promotion (a GET whose value is published in DRAM) of the
 * key submitted before the DELETE's answer came and not yet handled: the
 * DELETE does not complete before it was (answered; put_close completes
 * it), or the store's pass over DRAM that follows the completion could
 * come before the promotion published a value the server sent before it
 * applied the DELETE.  A GET submitted after the answer came reaches the
 * server after it sent that answer, the DELETE applied: a miss (or a
 * later put's value).  A GET submitted before the DELETE is covered by
 * the same rule; the DELETE need not wait for it to be sent.
 *
 * The other way, a PUT of the key (clear: namespace) submitted after a
 * DELETE and before its answer is not sent before that answer (put
 * waits; remove_hold lets it go): one connection's frames are applied in
 * order (doc/protocol.md section 2), but dispatch packs a PUT for the
 * connection with the fewest bytes in flight and a lane picks its own,
 * and the server could store the PUT first and then apply the DELETE --
 * the value just put removed.  A PUT after a held DELETE waits too: the
 * DELETE goes out once the PUTs before it were answered, and could then
 * remove the later one.  No cycle: each waits only for lower tickets.
 * A GET or EXISTS of the key (namespace) submitted after a DELETE and
 * before its answer is answered a miss by the thread, no frame
 * (remove_shadows): sent, it could reach the server first on another
 * connection or lane and read the deleted bytes.
 *
 * Tickets order them: a put or promotion takes the next when it opens;
 * a DELETE takes the next when submitted (the PUTs below it were
 * submitted before it, those above it after) and the current one again
 * when answered (the GETs below it were submitted before the answer
 * came).
 */

/* Whether op (open) is of d's key (clear: namespace) and below d's
 * ticket.  put_lock held. */
static bool put_precedes(const struct rop *op, const struct rop *d)
{
	if (op->ticket >= d->ticket)
		return false;
	if (d->kind == RK_CLEAR)
		return d->ns == KVT_NS_ALL || op->ns == d->ns;
	return op->ns == d->ns && op->key.len == d->key.len &&
	       memcmp(op->key.bytes, d->key.bytes, d->key.len) == 0;
}

static void rt_init(struct rtab *t)
{
	t->tab = t->tab0;
	t->cap = RT_TAB0;
	t->count = 0;
}

/* The heap bytes t holds: 0 while it is at tab0. */
static size_t rt_bytes(const struct rtab *t)
{
	return t->tab == t->tab0 ? 0 : t->cap * sizeof(*t->tab);
}

static void rt_fini(struct rtab *t, struct kvt_mem *mem)
{
	if (t->tab != t->tab0)
		kvt_mem_free(mem, t->tab, rt_bytes(t));
	rt_init(t);
}

static struct rop *rt_chain(const struct rtab *t, uint64_t h)
{
	return t->tab[h & (t->cap - 1)];
}

/* op into its chain, first. */
static void rt_link(struct rtab *t, struct rop *op)
{
	struct rop **slot = &t->tab[op->h & (t->cap - 1)];
	op->h_prev = NULL;
	op->h_next = *slot;
	if (*slot)
		(*slot)->h_prev = op;
	*slot = op;
}

/* t at cap chains, its entries moved over (their order in a chain does
 * not matter: a look matches on the whole entry).  A failed allocation
 * leaves it as it was. */
static void rt_resize(struct rtab *t, struct kvt_mem *mem, unsigned cap)
{
	struct rop **old = t->tab, **tab;
	unsigned old_cap = t->cap;
	if (cap == RT_TAB0) {
		tab = t->tab0; /* the old one is on the heap: cap != RT_TAB0 */
		memset(tab, 0, sizeof(t->tab0));
	} else if (!(tab = kvt_mem_calloc(mem, cap, sizeof(*tab)))) {
		return;
	}
	t->tab = tab;
	t->cap = cap;
	for (unsigned i = 0; i < old_cap; i++)
		for (struct rop *op = old[i], *nx; op; op = nx) {
			nx = op->h_next;
			rt_link(t, op);
		}
	if (old != t->tab0)
		kvt_mem_free(mem, old, old_cap * sizeof(*old));
}

/* op (its h set) into t, grown to twice its chains once it holds more
 * entries than chains. */
static void rt_add(struct rtab *t, struct kvt_mem *mem, struct rop *op)
{
	rt_link(t, op);
	if (++t->count > t->cap && t->cap <= UINT_MAX / 2)
		rt_resize(t, mem, t->cap * 2u);
}

/* op out of t, shrunk to half its chains once it holds fewer than a
 * quarter as many entries (down to tab0): a burst of deletes or puts
 * does not leave its largest table behind while a few stay open. */
static void rt_del(struct rtab *t, struct kvt_mem *mem, struct rop *op)
{
	if (op->h_prev)
		op->h_prev->h_next = op->h_next;
	else
		t->tab[op->h & (t->cap - 1)] = op->h_next;
	if (op->h_next)
		op->h_next->h_prev = op->h_prev;
	op->h_prev = op->h_next = NULL;
	if (--t->count < t->cap / 4 && t->cap > RT_TAB0)
		rt_resize(t, mem, t->cap / 2);
}

/* The index hash of a DELETE's (ns, key), of a CLEAR's ns, of an open
 * PUT's or promotion's (ns, key): keyed by the lane's random secret, as
 * the DRAM index's (dram_key_hash; kvt_keyhash.h). */
static uint64_t rm_hash(const struct remote *head, uint32_t ns, const struct kvt_key *key)
{
	return kvt_key_hash(head->rm_secret, ns, key->bytes, key->len);
}

static uint64_t rm_hash_ns(const struct remote *head, uint32_t ns)
{
	return XXH3_64bits_withSeed(&ns, sizeof(ns), ~head->rm_secret);
}

/* Whether a DELETE or CLEAR not yet answered of ticket below `below` is
 * of (ns, key), or of ns (a CLEAR), or of all: the chain of (ns, key),
 * and those of ns and KVT_NS_ALL while a CLEAR is open.  A chain holds
 * the open deletes whose hash falls in it, the same key's together:
 * about one each (rtab).  put_lock held. */
static bool remove_find(const struct remote *head, uint32_t ns, const struct kvt_key *key,
			uint64_t below)
{
	uint64_t h;
	const struct rop *d;
	if (head->rm_idx.count == 0)
		return false;
	h = rm_hash(head, ns, key);
	for (d = rt_chain(&head->rm_idx, h); d; d = d->h_next)
		if (d->h == h && d->ticket < below && d->kind == RK_DELETE && d->ns == ns &&
		    d->key.len == key->len && memcmp(d->key.bytes, key->bytes, key->len) == 0)
			return true;
	if (head->rm_clears == 0)
		return false;
	for (int all = 0; all < 2; all++) {
		uint32_t cns = all ? KVT_NS_ALL : ns;
		h = rm_hash_ns(head, cns);
		for (d = rt_chain(&head->rm_idx, h); d; d = d->h_next)
			if (d->h == h && d->ticket < below && d->kind == RK_CLEAR && d->ns == cns)
				return true;
	}
	return false;
}

/* Whether a DELETE or CLEAR not yet answered precedes the PUT op: one
 * look at the count when none is out.  put_lock held. */
static bool remove_pending_for(const struct remote *head, const struct rop *op)
{
	return remove_find(head, op->ns, &op->key, op->ticket);
}

/* How many open ops of kind (RK_PUT: d waits to be sent; RK_GET: d
 * waits to complete) precede d: for a DELETE, one chain of open_idx
 * (the open puts and promotions of its key, and of any key whose hash
 * shares the chain); for a CLEAR, the list from its oldest up to d's
 * ticket (a clear is of every key of a namespace) -- once, when d is
 * held; put_close counts it down (before).  Until remote44 a DELETE
 * walked that list too, every put and promotion open before it, at its
 * submission and its answer and at each close of a put of its key while
 * held; until session 45 a held CLEAR walked it at each close of a put
 * of its namespace, N closes of N open puts N^2 / 2 steps under
 * put_lock (bench/open_delete_cost.c CLEARS).  put_lock held. */
static uint32_t put_count_before(const struct remote *head, const struct rop *d, int kind)
{
	uint32_t n = 0;
	if (d->kind == RK_CLEAR) {
		for (const struct rop *p = head->open_head; p && p->ticket < d->ticket;
		     p = p->o_next)
			n += p->kind == kind && put_precedes(p, d);
		return n;
	}
	if (head->open_idx.count == 0)
		return 0;
	for (const struct rop *p = rt_chain(&head->open_idx, d->h); p; p = p->h_next)
		n += p->h == d->h && p->kind == kind && put_precedes(p, d);
	return n;
}

/* The head's two lists in ticket order -- the open puts and promotions
 * (open_head), the deletes and clears not yet answered (rm_head) -- and
 * their indexes: op (its h set) joins one at its tail with the next
 * ticket, or leaves it.  put_lock held. */
static void olist_add(struct remote *head, struct rop **first, struct rop **last,
		      struct rtab *t, struct rop *op)
{
	op->ticket = head->put_ticket++;
	op->o_prev = *last;
	op->o_next = NULL;
	if (*last)
		(*last)->o_next = op;
	else
		*first = op;
	*last = op;
	rt_add(t, head->mem, op);
}

static void olist_del(struct remote *head, struct rop **first, struct rop **last,
		      struct rtab *t, struct rop *op)
{
	if (op->o_prev)
		op->o_prev->o_next = op->o_next;
	else
		*first = op->o_next;
	if (op->o_next)
		op->o_next->o_prev = op->o_prev;
	else
		*last = op->o_prev;
	op->o_prev = op->o_next = NULL;
	rt_del(t, head->mem, op);
}

static void put_open_locked(struct remote *head, struct rop *op)
{
	op->open = true;
	op->h = rm_hash(head, op->ns, &op->key);
	olist_add(head, &head->open_head, &head->open_tail, &head->open_idx, op);
}

/* A put or promotion is submitted: it joins the head's list (any lane's);
 * a put after a DELETE (CLEAR) of its key not yet answered waits for it. */
static void put_open(struct remote *head, struct rop *op)
{
	bool waits = false;
	pthread_mutex_lock(&head->put_lock);
	put_open_locked(head, op);
	if (op->kind == RK_PUT && head->rm_head && remove_pending_for(head, op)) {
		op->wait_remove = waits = true;
		head->puts_waiting++;
	}
	pthread_mutex_unlock(&head->put_lock);
	if (waits)
		A(head->c_put_waits);
}

/* A put that waited (wait_remove) at dispatch: whether it still must.
 * Once it need not, its deadline is remote.timeout_ms from now, but no
 * later than the 2x its wait had (rop_submit): a wait that ended past
 * 1x leaves it less than remote.timeout_ms to be sent (a window, a
 * connection coming back); once sent, its frame has its own
 * (conn_queue).  Before, it kept what was left of the 1x from its
 * submission -- a DELETE answered late (held behind a put of its own,
 * or slow) left it a few ms, or none, and it failed -ETIMEDOUT having
 * never been sent.  Called on the put's lane thread, for those puts
 * only. */
static bool put_waits(struct remote *head, struct rop *op, uint64_t now)
{
	bool still;
	pthread_mutex_lock(&head->put_lock);
	still = remove_pending_for(head, op);
	if (!still) {
		op->wait_remove = false;
		head->puts_waiting--;
	}
	pthread_mutex_unlock(&head->put_lock);
	if (!still) {
		uint64_t mine = now + (uint64_t)head->cfg.timeout_ms * 1000000u;
		if (mine < op->deadline)
			op->deadline = mine;
	}
	return still;
}

/* Whether a DELETE of (ns, key) or a CLEAR of ns is on the list of
 * those not yet answered.  put_lock held. */
static bool remove_covers_locked(const struct remote *head, uint32_t ns,
				 const struct kvt_key *key)
{
	return remove_find(head, ns, key, UINT64_MAX);
}

/* Whether a DELETE of op's key (CLEAR of its namespace) not yet answered
 * was submitted before op, a get or exists: every one on the list was.
 * A plain get pays one atomic load when none is out. */
static bool remove_shadows(struct remote *head, const struct rop *op)
{
	bool hit;
	if (atomic_load_explicit(&head->removes_open, memory_order_acquire) == 0)
		return false;
	pthread_mutex_lock(&head->put_lock);
	hit = remove_covers_locked(head, op->ns, &op->key);
	pthread_mutex_unlock(&head->put_lock);
	return hit;
}

/* A LOOKUP's keys up to the first one a DELETE (CLEAR) not yet answered
 * covers: the prefix ends there, as the get of that key would miss. */
static uint32_t remove_prefix(struct remote *head, uint32_t ns, const struct kvt_key *keys,
			      uint32_t n)
{
	uint32_t k = 0;
	if (atomic_load_explicit(&head->removes_open, memory_order_acquire) == 0)
		return n;
	pthread_mutex_lock(&head->put_lock);
	while (k < n && !remove_covers_locked(head, ns, &keys[k]))
		k++;
	pthread_mutex_unlock(&head->put_lock);
	return k;
}

/* A DELETE or CLEAR is submitted: it joins the list of those not yet
 * answered, and the index.  put_lock held. */
static void remove_open_locked(struct remote *head, struct rop *d)
{
	d->ropen = true;
	d->h = d->kind == RK_CLEAR ? rm_hash_ns(head, d->ns) : rm_hash(head, d->ns, &d->key);
	if (d->kind == RK_CLEAR)
		head->rm_clears++;
	olist_add(head, &head->rm_head, &head->rm_tail, &head->rm_idx, d);
	atomic_fetch_add_explicit(&head->removes_open, 1, memory_order_release);
}

/* ... and leaves it, answered or failed: whether puts wait (to wake the
 * lanes, whose threads look at them again).  put_lock held. */
static bool remove_close_locked(struct remote *head, struct rop *d)
{
	if (!d->ropen)
		return false;
	olist_del(head, &head->rm_head, &head->rm_tail, &head->rm_idx, d);
	if (d->kind == RK_CLEAR)
		head->rm_clears--;
	d->ropen = false;
	atomic_fetch_sub_explicit(&head->removes_open, 1, memory_order_relaxed);
	return head->puts_waiting > 0;
}

/* Wake every lane's thread: a put that waited for a DELETE's answer on
 * its pending list goes out.  The eventfd keeps the wake-up for a thread
 * that is not yet asleep.  No lock held. */
static void lanes_wake(struct remote *head)
{
	uint64_t one = 1;
	for (unsigned i = 0; i < head->lane_count; i++) {
		ssize_t w = write(head->lane[i]->wake_fd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
}

/* A DELETE or CLEAR freed before its answer (its submission failed). */
static void remove_close(struct remote *head, struct rop *d)
{
	bool wake;
	pthread_mutex_lock(&head->put_lock);
	wake = remove_close_locked(head, d);
	pthread_mutex_unlock(&head->put_lock);
	if (wake)
		lanes_wake(head);
}

/*
 * A GET into the caller's buffers whose value goes to DRAM instead (too
 * big for them: KVT_EBUFSMALL, the value published for the retry) is a
 * promotion from now on: opened, unless a delete or clear was answered
 * since the GET was submitted -- the value may be one that delete
 * removed, and the delete may have completed already, since nothing
 * held it: the value is then not published (remote.promotes_stale).
 * Any delete, of any key, so that a plain get pays no lock: a delete
 * answered while a GET too big for its buffers is on its way costs that
 * GET's retry a second transfer.  true: opened, publish.
 */
static bool promo_open_late(struct remote *head, struct rop *op)
{
	bool ok;
	pthread_mutex_lock(&head->put_lock);
	ok = atomic_load_explicit(&head->removes_answered, memory_order_relaxed) ==
	     op->removes_seen;
	if (ok)
		put_open_locked(head, op);
	pthread_mutex_unlock(&head->put_lock);
	if (!ok)
		A(head->c_promotes_stale);
	return ok;
}

/* A put or promotion was answered and handled (or failed): it leaves the
 * list, and the deletes and clears that waited for it alone go out (a
 * put) or complete (a promotion).  No lock held. */
static void put_close(struct remote *head, struct rop *op)
{
	struct rop *go = NULL, *done = NULL, **pp, **go_tail = &go, *last = NULL;
	int kind = op->kind;
	pthread_mutex_lock(&head->put_lock);
	olist_del(head, &head->open_head, &head->open_tail, &head->open_idx, op);
	op->open = false;
	if (op->wait_remove) { /* failed or timed out while it waited */
		op->wait_remove = false;
		head->puts_waiting--;
	}
	/* Those it lets go: held ones sent oldest first. */
	for (pp = kind == RK_PUT ? &head->held : &head->answered; *pp;) {
		struct rop *d = *pp;
		if (put_precedes(op, d) && --d->before == 0) {
			*pp = d->next;
			if (kind == RK_PUT) {
				d->next = NULL;
				*go_tail = d;
				go_tail = &d->next;
			} else {
				d->next = done;
				done = d;
			}
		} else {
			last = d;
			pp = &d->next;
		}
	}
	if (kind == RK_PUT)
		head->held_tail = last;
	pthread_mutex_unlock(&head->put_lock);
	while (go) {
		struct rop *d = go;
		tier_done_fn cb = d->cb;
		void *ctx = d->ctx;
		int ret;
		go = d->next;
		d->next = NULL;
		ret = rop_submit(head, d);
		if (ret < 0) { /* stopped or down meanwhile: d is freed */
			struct tier_result r = { .status = ret };
			cb(ctx, &r);
		}
	}
	while (done) {
		struct rop *d = done;
		struct tier_result r = { .status = d->held_status, .count = d->value_len };
		done = d->next;
		d->cb(d->ctx, &r);
		rop_free(head, d);
	}
}

/*
 * A delete or clear: at once, or held until the puts before it of its key
 * (namespace) are answered, at most remote.timeout_ms from its submission
 * (held_expire: then it fails -EAGAIN, never sent), so that it is
 * answered or failed within 2x remote.timeout_ms of its submission -- the
 * wait a later put of its key is given (rop_submit), from the put's own
 * submission.  Before remote44 it was held as long as the put before it
 * took, and that put, itself waiting for an earlier DELETE (D1, P0, D2,
 * P), had 2x: the put P after it failed -ETIMEDOUT at its 2x, never
 * sent, while D2 still waited (test_remote_put put_wait_chain).  0 (the
 * callback will come) or < 0.
 */
/*
 * A DELETE or CLEAR was held on the head, to expire at due: the head's
 * thread looks at it by then.  Its sleep was planned without the hold,
 * up to its 100 ms tick: hold_due gives the deadline to a thread about
 * to sleep, and one asleep past due is woken.  Until session 46 the
 * hold was seen at the thread's next wake-up -- with remote.timeout_ms
 * under 100 ms and the put it waits for on another lane (nothing of the
 * head's own to wake it), up to 100 ms less remote.timeout_ms late
 * (test_remote_put hold_expiry).  No lock held.
 */
static void hold_wake(struct remote *head, uint64_t due)
{
	bool wake;
	pthread_mutex_lock(&head->lock);
	if (due < head->hold_due)
		head->hold_due = due;
	wake = due < head->sleep_until && wake_take(head);
	pthread_mutex_unlock(&head->lock);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(head->wake_fd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
}

static int rop_submit_after_puts(struct remote *head, struct rop *op)
{
	uint64_t due;
	pthread_mutex_lock(&head->put_lock);
	remove_open_locked(head, op);
	op->before = put_count_before(head, op, RK_PUT);
	if (op->before) {
		op->deadline = kvt_now_ns() + (uint64_t)head->cfg.timeout_ms * 1000000u;
		op->next = NULL;
		if (head->held_tail)
			head->held_tail->next = op;
		else
			head->held = op;
		head->held_tail = op;
		due = op->deadline; /* op may be freed once put_lock is let go */
		pthread_mutex_unlock(&head->put_lock);
		A(head->c_removes_held);
		hold_wake(head, due);
		return 0;
	}
	pthread_mutex_unlock(&head->put_lock);
	return rop_submit(head, op);
}

/*
 * A delete or clear was answered (or failed): it completes once every
 * promotion of its key (namespace) submitted before now was handled.
 * true: held (put_close completes it), else complete it now.
 */
static bool remove_hold(struct remote *head, struct rop *d, const struct tier_result *res)
{
	bool hold, wake;
	pthread_mutex_lock(&head->put_lock);
	wake = remove_close_locked(head, d); /* the puts after it may go */
	atomic_fetch_add_explicit(&head->removes_answered, 1, memory_order_relaxed);
	d->ticket = head->put_ticket;
	d->before = put_count_before(head, d, RK_GET);
	hold = d->before > 0;
	if (hold) {
		d->held_status = res->status;
		d->value_len = res->count;
		d->next = head->answered;
		head->answered = d;
	}
	pthread_mutex_unlock(&head->put_lock);
	if (wake)
		lanes_wake(head);
	if (hold)
		A(head->c_removes_waited);
	return hold;
}

static int rop_submit(struct remote *rm, struct rop *op)
{
	bool wake;
	if (atomic_load_explicit(&rm->down, memory_order_relaxed)) {
		A(rm->c_fast_fails);
		rop_free(rm, op);
		return -ENOTCONN;
	}
	/* A put waiting for a DELETE's answer (put_open) waits at most
	 * twice remote.timeout_ms -- a DELETE held behind a put of its key
	 * (one timeout), then on its way (another) -- and has its own
	 * timeout from the end of the wait (put_waits): 3x in all. */
	op->deadline = kvt_now_ns() + (uint64_t)rm->cfg.timeout_ms * 1000000u *
					      (op->wait_remove ? 2u : 1u);
	pthread_mutex_lock(&rm->lock);
	if (rm->stop) {
		pthread_mutex_unlock(&rm->lock);
		rop_free(rm, op);
		return -ECANCELED;
	}
	if (op->kind == RK_PUT)
		rm->puts_inflight++;
	/* While a batch is being submitted (remote_plug), the thread is woken
	 * once at the end, so that it finds the whole batch; a thread that is
	 * awake is not woken (wake_take). */
	wake = rm->plugged == 0 && wake_take(rm);
	if (rm->sub_tail)
		rm->sub_tail->next = op;
	else
		rm->sub_head = op;
	rm->sub_tail = op;
	pthread_mutex_unlock(&rm->lock);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(rm->wake_fd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
	return 0;
}

/*
 * The lane a get, put or exists goes to: round-robin over the lanes that
 * are up (each lane packs what it is given into its own frames, on its own
 * connections, and receives on its own thread, so a batch spread over K
 * lanes is received by K threads side by side); every lane down: lane 0,
 * which fails the operation fast.  Lookups, deletes, clears and STATS go
 * to lane 0.
 */
static struct remote *lane_pick(struct remote *rm)
{
	unsigned k = rm->lane_count;
	if (k <= 1)
		return rm;
	unsigned at = atomic_fetch_add_explicit(&rm->lane_next, 1, memory_order_relaxed);
	for (unsigned i = 0; i < k; i++) {
		struct remote *l = rm->lane[(at + i) % k];
		if (!atomic_load_explicit(&l->down, memory_order_relaxed))
			return l;
	}
	return rm;
}

static struct rop *rop_new(struct remote *rm, int kind, uint32_t ns, const struct kvt_key *key,
			   tier_done_fn cb, void *ctx)
{
	struct rop *op = kvt_mem_calloc(rm->mem, 1, sizeof(*op));
	if (!op)
		return NULL;
	op->kind = (uint8_t)kind;
	op->ns = ns;
	if (key)
		op->key = *key;
	op->cb = cb;
	op->ctx = ctx;
	return op;
}

int remote_get(struct remote *rm, uint32_t ns, const struct kvt_key *key, unsigned flags,
	       tier_got_fn cb, void *ctx)
{
	struct remote *head = rm->head;
	rm = lane_pick(rm);
	struct rop *op = rop_new(rm, RK_GET, ns, key, NULL, ctx);
	if (!op)
		return -ENOMEM;
	op->gcb = cb;
	op->failures = (flags & REMOTE_GET_FAILURES) != 0;
	A(rm->c_gets);
	/* After a delete of the key not yet answered: a miss, no promotion.
	 * Else a promotion publishes in DRAM: a delete answered before it
	 * was handled completes after it (remove_hold), so that the store's
	 * pass over DRAM after the delete sees it. */
	op->after_remove = remove_shadows(head, op);
	if (!op->after_remove)
		put_open(head, op);
	return rop_submit(rm, op);
}

int remote_get_into(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		    const struct iovec *dst, unsigned dst_count, unsigned flags, tier_done_fn cb,
		    void *ctx)
{
	struct remote *head = rm->head;
	struct rop *op;
	if (!dst_count)
		return -EINVAL;
	rm = lane_pick(rm);
	op = rop_new(rm, RK_GET, ns, key, cb, ctx);
	if (!op)
		return -ENOMEM;
	/* Read before the GET can go out (promo_open_late). */
	op->removes_seen = atomic_load_explicit(&head->removes_answered, memory_order_acquire);
	op->dst = dst;
	op->dst_count = dst_count;
	op->failures = (flags & REMOTE_GET_FAILURES) != 0;
	op->after_remove = remove_shadows(head, op);
	A(rm->c_gets);
	A(rm->c_direct_gets);
	return rop_submit(rm, op);
}

int remote_put(struct remote *rm, uint32_t ns, const struct kvt_key *key,
	       const struct iovec *parts, unsigned part_count, const uint32_t *crcs, bool sealed,
	       tier_done_fn cb, void *ctx)
{
	return remote_put_placed(rm, ns, key, parts, part_count, crcs, sealed, 0, 0, cb, ctx);
}

int remote_put_placed(struct remote *rm, uint32_t ns, const struct kvt_key *key,
		      const struct iovec *parts, unsigned part_count, const uint32_t *crcs,
		      bool sealed, uint64_t anchor, unsigned copies, tier_done_fn cb, void *ctx)
{
	struct remote *head = rm->head;
	rm = lane_pick(rm);
	struct rop *op = rop_new(rm, RK_PUT, ns, key, cb, ctx);
	if (!op)
		return -ENOMEM;
	op->lens = kvt_mem_alloc(rm->mem, part_count * (sizeof(uint64_t) + sizeof(uint32_t)));
	if (!op->lens) {
		kvt_mem_free(rm->mem, op, sizeof(*op));
		return -ENOMEM;
	}
	op->part_count = part_count;
	op->crcs = (uint32_t *)(op->lens + part_count);
	op->parts = parts;
	op->sealed = sealed;
	op->retain = (copies & REMOTE_PUT_RETAIN) != 0;
	copies &= ~REMOTE_PUT_RETAIN;
	op->anchor = anchor;
	op->copies = (copies & ~REMOTE_PUT_FORWARD) > PROTO_COPIES_MAX ?
			     PROTO_COPIES_MAX | (copies & REMOTE_PUT_FORWARD) : copies;
	/* The writer's CRCs travel end to end; deferred ones are computed
	 * here, on the caller's thread (ISA-L: 8-11 GB/s on the 2026-12-01
	 * test machine, 0.09-0.13 CPU s per GB: a value going to several
	 * replicas has them computed once, by cluster_put), or with several
	 * lanes by the lane's thread as it packs the frame, so that the
	 * lanes compute them side by side rather than the one caller; or,
	 * with remote.crc_at_send, by the lane's thread anyway, so that its
	 * send reads bytes the CRC pass just brought into cache.  A caller's
	 * CRCs (KVT_F_CRC) are sent as given: the server checks them. */
	op->crc_later = !crcs && (rm->cfg.crc_at_send || rm->cfg.io_threads > 1);
	for (unsigned i = 0; i < part_count; i++) {
		op->lens[i] = parts[i].iov_len;
		op->value_len += parts[i].iov_len;
		if (!op->crc_later)
			op->crcs[i] = crcs ? crcs[i] : kvt_crc32c(0, parts[i].iov_base,
								  parts[i].iov_len);
	}
	if (!crcs)
		AN(rm->c_put_crc_bytes, op->value_len);
	A(rm->c_puts);
	/* An engine whose blocks are bigger than remote.value_max gets them
	 * back: its own puts raise the bound (value_bound). */
	for (uint64_t m = atomic_load_explicit(&head->put_max, memory_order_relaxed);
	     op->value_len > m &&
	     !atomic_compare_exchange_weak_explicit(&head->put_max, &m, op->value_len,
						    memory_order_relaxed, memory_order_relaxed);)
		;
	put_open(head, op); /* a failed submission closes it (rop_free) */
	return rop_submit(rm, op);
}

void remote_note_crc(struct remote *rm, const struct iovec *parts, unsigned part_count)
{
	for (unsigned i = 0; i < part_count; i++)
		AN(rm->c_put_crc_bytes, parts[i].iov_len);
}

int remote_exists(struct remote *rm, uint32_t ns, const struct kvt_key *key, tier_done_fn cb,
		  void *ctx)
{
	struct remote *head = rm->head;
	rm = lane_pick(rm);
	struct rop *op = rop_new(rm, RK_EXISTS, ns, key, cb, ctx);
	if (!op)
		return -ENOMEM;
	op->after_remove = remove_shadows(head, op);
	A(rm->c_exists);
	return rop_submit(rm, op);
}

int remote_delete(struct remote *rm, uint32_t ns, const struct kvt_key *key, tier_done_fn cb,
		  void *ctx)
{
	struct rop *op = rop_new(rm, RK_DELETE, ns, key, cb, ctx);
	if (!op)
		return -ENOMEM;
	A(rm->c_deletes);
	return rop_submit_after_puts(rm->head, op);
}

int remote_lookup(struct remote *rm, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		  uint8_t *tiers, tier_done_fn cb, void *ctx)
{
	struct rop *op = rop_new(rm, RK_LOOKUP, ns, NULL, cb, ctx);
	if (!op)
		return -ENOMEM;
	op->keys = keys;
	op->key_count = remove_prefix(rm->head, ns, keys, n);
	op->after_remove = n > 0 && op->key_count == 0; /* 0 hits, no frame */
	op->tiers = tiers;
	A(rm->c_lookups);
	return rop_submit(rm, op);
}

int remote_clear(struct remote *rm, uint32_t ns, tier_done_fn cb, void *ctx)
{
	struct rop *op = rop_new(rm, RK_CLEAR, ns, NULL, cb, ctx);
	if (!op)
		return -ENOMEM;
	A(rm->c_clears);
	return rop_submit_after_puts(rm->head, op);
}

/* A synchronous STATS: the caller waits on stats_wait for the remote
 * thread's completion. */
struct stats_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	kvt_stats_fn fn;
	void *ctx;
};

static void stats_item(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct stats_wait *w = ctx;
	w->fn(w->ctx, name, value, str);
}

static void stats_done(void *ctx, const struct tier_result *res)
{
	struct stats_wait *w = ctx;
	pthread_mutex_lock(&w->lock);
	w->status = res->status;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int remote_stats_query(struct remote *rm, const char *tenant, kvt_stats_fn fn, void *ctx)
{
	struct stats_wait w = { .fn = fn, .ctx = ctx };
	struct rop *op;
	int ret;

	if (tenant && strcmp(tenant, "*") != 0 &&
	    (!tenant[0] || strlen(tenant) > PROTO_TENANT_MAX))
		return KVT_EOPTVAL;
	op = rop_new(rm, RK_STATS, KVT_NS_ALL, NULL, stats_done, &w);
	if (!op)
		return -ENOMEM;
	op->tenant = tenant;
	op->sfn = stats_item;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	ret = rop_submit(rm, op);
	if (ret == 0) {
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		ret = w.status;
	}
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return ret;
}

static void lane_plug(struct remote *rm)
{
	pthread_mutex_lock(&rm->lock);
	rm->plugged++;
	pthread_mutex_unlock(&rm->lock);
}

void remote_plug(struct remote *rm)
{
	for (unsigned i = 0; i < rm->lane_count; i++)
		lane_plug(rm->lane[i]);
}

static void lane_unplug(struct remote *rm)
{
	bool wake;
	pthread_mutex_lock(&rm->lock);
	wake = --rm->plugged == 0 && rm->sub_head != NULL && wake_take(rm);
	pthread_mutex_unlock(&rm->lock);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(rm->wake_fd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
}

void remote_unplug(struct remote *rm)
{
	for (unsigned i = 0; i < rm->lane_count; i++)
		lane_unplug(rm->lane[i]);
}

static void lane_flush(struct remote *rm)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Every put completes by its deadline (a connection that misses one is
	 * failed); twice that bounds a flush under a steady stream of puts. */
	ts.tv_sec += 2 * (time_t)(rm->cfg.timeout_ms / 1000) + 1;
	pthread_mutex_lock(&rm->lock);
	while (rm->puts_inflight > 0)
		if (pthread_cond_timedwait(&rm->flush_cond, &rm->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&rm->lock);
}

void remote_flush(struct remote *rm)
{
	for (unsigned i = 0; i < rm->lane_count; i++)
		lane_flush(rm->lane[i]);
}

/* ------------------------------------------------------------------------
 * Open and close
 */

/* a's host part into host (the brackets of "[V6]" taken off), *port at the
 * port's text.  0 or KVT_EOPTVAL. */
static int addr_host(const char *a, size_t len, char host[256], const char **port)
{
	const char *colon = NULL, *h = a;
	size_t hl;
	for (size_t i = len; i > 0 && !colon; i--)
		if (a[i - 1] == ':')
			colon = a + i - 1;
	if (!colon || colon + 1 == a + len)
		return KVT_EOPTVAL;
	hl = (size_t)(colon - a);
	if (hl >= 2 && a[0] == '[' && a[hl - 1] == ']')
		h = a + 1, hl -= 2;
	if (hl == 0 || hl >= 256)
		return KVT_EOPTVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	*port = colon + 1;
	return 0;
}

static unsigned sockaddr_kind(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_UNIX)
		return REMOTE_KIND_UNIX;
	if (sa->ss_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
		return (a >> 24) == 127 || a == 0 ? REMOTE_KIND_LOCAL : REMOTE_KIND_NET;
	}
	if (sa->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a))
			return REMOTE_KIND_LOCAL;
		if (IN6_IS_ADDR_V4MAPPED(a) && (a->s6_addr[12] == 127 ||
						(a->s6_addr[12] | a->s6_addr[13] | a->s6_addr[14] |
						 a->s6_addr[15]) == 0))
			return REMOTE_KIND_LOCAL;
	}
	return REMOTE_KIND_NET;
}

/* remote.h */
unsigned remote_addr_kind(const char *addr, size_t len)
{
	char host[256];
	const char *port;
	struct sockaddr_storage sa = { 0 };
	size_t hl;

	if (len >= 5 && memcmp(addr, "unix:", 5) == 0)
		return REMOTE_KIND_UNIX;
	if (addr_host(addr, len, host, &port) < 0)
		return REMOTE_KIND_NET; /* not an address: refused when opened */
	hl = strlen(host);
	if (strcasecmp(host, "localhost") == 0 ||
	    (hl > 10 && strcasecmp(host + hl - 10, ".localhost") == 0))
		return REMOTE_KIND_LOCAL;
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&sa)->sin_addr) == 1)
		sa.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&sa)->sin6_addr) == 1)
		sa.ss_family = AF_INET6;
	return sockaddr_kind(&sa);
}

/* a into *sa: 0, KVT_EOPTVAL (not an address, or it does not resolve). */
static int addr_resolve(const char *a, struct sockaddr_storage *sa, socklen_t *sa_len)
{
	char host[256];
	const char *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;

	if (strncmp(a, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)sa;
		size_t len = strlen(a + 5);
		if (len == 0 || len >= sizeof(un->sun_path))
			return KVT_EOPTVAL;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, a + 5, len + 1);
		*sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
		return 0;
	}
	if (addr_host(a, strlen(a), host, &port) < 0)
		return KVT_EOPTVAL;
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return KVT_EOPTVAL;
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*sa_len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* remote.h */
unsigned remote_addr_kind_resolved(const char *addr)
{
	struct sockaddr_storage sa = { 0 };
	socklen_t sl = 0;
	if (addr_resolve(addr, &sa, &sl) < 0)
		return remote_addr_kind(addr, strlen(addr));
	return sockaddr_kind(&sa);
}

/* rm->cfg.addr into rm->addr: 0, KVT_EOPTVAL, or -EPERM (it resolves to a
 * kind cfg.kinds does not allow: a member a server named). */
static int parse_addr(struct remote *rm)
{
	int ret = addr_resolve(rm->cfg.addr, &rm->addr, &rm->addr_len);
	if (ret == 0 && rm->cfg.kinds && !(sockaddr_kind(&rm->addr) & rm->cfg.kinds))
		return -EPERM;
	return ret;
}

static int read_secret(struct remote *rm)
{
	char buf[PROTO_SECRET_MAX + 2];
	struct stat st;
	ssize_t n;
	int fd = open(rm->cfg.secret_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: cannot open remote.secret_file %s: %s",
			 rm->cfg.secret_file, strerror(e));
		return KVT_EOPTVAL;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		kvt_logf(rm->log, KVT_LOG_ERROR,
			 "remote: remote.secret_file %s must be readable by its owner only (chmod 600)",
			 rm->cfg.secret_file);
		close(fd);
		return KVT_EOPTVAL;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	if (n < (ssize_t)PROTO_SECRET_MIN || n > (ssize_t)PROTO_SECRET_MAX) {
		kvt_logf(rm->log, KVT_LOG_ERROR,
			 "remote: the secret in %s must be %u..%u bytes", rm->cfg.secret_file,
			 PROTO_SECRET_MIN, PROTO_SECRET_MAX);
		OPENSSL_cleanse(buf, sizeof(buf));
		return KVT_EOPTVAL;
	}
	rm->secret = kvt_mem_alloc(rm->mem, (size_t)n);
	if (!rm->secret) {
		OPENSSL_cleanse(buf, sizeof(buf));
		return -ENOMEM;
	}
	memcpy(rm->secret, buf, (size_t)n);
	rm->secret_len = (size_t)n;
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

/* remote.tls: the client context, and the name to verify (remote.tls_server_name,
 * else the host of remote.addr).  0 or KVT_EOPTVAL (logged). */
static int remote_tls_open(struct remote *rm)
{
	const char *a = rm->cfg.addr, *name = rm->cfg.tls_server_name;
	char err[300];
	unsigned char bin[16];
	size_t hl;

	if (!name && strncmp(a, "unix:", 5) == 0) {
		kvt_logf(rm->log, KVT_LOG_ERROR,
			 "remote: remote.tls over a Unix socket needs remote.tls_server_name");
		return KVT_EOPTVAL;
	}
	if (name) {
		hl = strlen(name);
	} else {
		hl = (size_t)(strrchr(a, ':') - a); /* parse_addr checked the form */
		if (hl >= 2 && a[0] == '[' && a[hl - 1] == ']')
			a++, hl -= 2;
		name = a;
	}
	if (hl == 0 || hl >= sizeof(rm->tls_host)) {
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: remote.tls_server_name is unusable");
		return KVT_EOPTVAL;
	}
	memcpy(rm->tls_host, name, hl);
	rm->tls_host[hl] = 0;
	rm->tls_host_ip = inet_pton(AF_INET, rm->tls_host, bin) == 1 ||
			  inet_pton(AF_INET6, rm->tls_host, bin) == 1;
	rm->tls_ctx = tlsio_ctx_client(rm->cfg.tls_ca, rm->cfg.tls_cert, rm->cfg.tls_key, err,
				       sizeof(err));
	if (!rm->tls_ctx) {
		kvt_logf(rm->log, KVT_LOG_ERROR, "remote: remote.tls: %s", err);
		return KVT_EOPTVAL;
	}
	return 0;
}

static void remote_free(struct remote *rm)
{
	if (rm->conns) {
		for (unsigned i = 0; i < rm->conns_cap; i++) {
			struct rconn *c = &rm->conns[i];
			kvt_mem_free(rm->mem, c->rbuf, c->rcap);
			kvt_mem_free(rm->mem, c->plens,
				     c->plens ? KVT_PARTS_MAX * sizeof(uint64_t) : 0);
			kvt_mem_free(rm->mem, c->pcrcs,
				     c->pcrcs ? KVT_PARTS_MAX * sizeof(uint32_t) : 0);
			kvt_mem_free(rm->mem, c->scratch, c->scratch ? RX_SCRATCH : 0);
		}
		kvt_mem_free(rm->mem, rm->conns, rm->conns_cap * sizeof(*rm->conns));
	}
	if (rm->secret) {
		OPENSSL_cleanse(rm->secret, rm->secret_len);
		kvt_mem_free(rm->mem, rm->secret, rm->secret_len);
	}
	kvt_mem_free(rm->mem, rm->nsmap, rm->nsmap_cap * sizeof(*rm->nsmap));
	kvt_mem_free(rm->mem, rm->batch_ops,
		     rm->batch_ops ? (size_t)RK__COUNT * rm->cfg.batch * sizeof(*rm->batch_ops)
				   : 0);
	SSL_CTX_free(rm->tls_ctx);
	if (rm->epfd >= 0)
		close(rm->epfd);
	if (rm->wake_fd >= 0)
		close(rm->wake_fd);
	pthread_mutex_destroy(&rm->lock);
	pthread_cond_destroy(&rm->flush_cond);
	pthread_mutex_destroy(&rm->put_lock);
	rt_fini(&rm->rm_idx, rm->mem);
	rt_fini(&rm->open_idx, rm->mem);
	kvt_mem_free(rm->mem, rm, sizeof(*rm));
}

/* One lane: a remote with its own thread and connections (cfg: the lane's
 * share of the pool). */
static int lane_open(struct remote **out, const struct remote_config *cfg, struct dram *dram,
		     struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log)
{
	struct remote *rm = kvt_mem_calloc(mem, 1, sizeof(*rm));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int ret;

	if (!rm)
		return -ENOMEM;
	rm->cfg = *cfg;
	rm->head = rm;
	rm->lane_self = rm;
	rm->lane = &rm->lane_self;
	rm->lane_count = 1;
	rm->dram = dram;
	rm->nsreg = ns;
	rm->mem = mem;
	rm->log = log;
	rm->epfd = rm->wake_fd = -1;
	rm->hold_due = UINT64_MAX;
	pthread_mutex_init(&rm->lock, NULL);
	pthread_cond_init(&rm->flush_cond, NULL);
	pthread_mutex_init(&rm->put_lock, NULL);
	rt_init(&rm->rm_idx);
	rt_init(&rm->open_idx);
	/* Waits for the kernel's pool; fails without it (the lane's address
	 * xor time(), a key a peer could guess, until 2026-12-07). */
	ret = kvt_secret_draw(&rm->rm_secret);
	if (ret < 0) {
		kvt_logf(log, KVT_LOG_ERROR, "remote: no random index secret (getrandom): %s",
			 strerror(-ret));
		goto fail;
	}
	ret = parse_addr(rm);
	if (ret == -EPERM) {
		kvt_logf(log, KVT_LOG_ERROR,
			 "remote: member %s is on this host or a Unix socket, which no seed of remote.discover is: refused",
			 cfg->addr);
		goto fail;
	}
	if (ret < 0) {
		kvt_logf(log, KVT_LOG_ERROR,
			 "remote: remote.addr '%s' is not HOST:PORT, [V6]:PORT or unix:/PATH (or does not resolve)",
			 cfg->addr);
		goto fail;
	}
	if (cfg->secret_file && (ret = read_secret(rm)) < 0)
		goto fail;
	if (cfg->tls && (ret = remote_tls_open(rm)) < 0)
		goto fail;
	rm->batch_ops = kvt_mem_alloc(mem, (size_t)RK__COUNT * cfg->batch * sizeof(*rm->batch_ops));
	rm->conns_used = cfg->conns;
	rm->conns_cap = cfg->conns_max > cfg->conns ? cfg->conns_max : cfg->conns;
	rm->conns = kvt_mem_calloc(mem, rm->conns_cap, sizeof(*rm->conns));
	if (!rm->batch_ops || !rm->conns) {
		ret = -ENOMEM;
		goto fail;
	}
	atomic_store(&rm->c_pool, rm->conns_used);
	for (unsigned i = 0; i < rm->conns_cap; i++) {
		struct rconn *c = &rm->conns[i];
		c->rm = rm;
		c->idx = i;
		c->fd = -1;
		c->backoff_ms = cfg->backoff_ms;
		c->rcap = 4096;
		c->rbuf = kvt_mem_alloc(mem, c->rcap);
		c->plens = kvt_mem_alloc(mem, KVT_PARTS_MAX * sizeof(uint64_t));
		c->pcrcs = kvt_mem_alloc(mem, KVT_PARTS_MAX * sizeof(uint32_t));
		c->scratch = kvt_mem_alloc(mem, RX_SCRATCH);
		if (!c->rbuf || !c->plens || !c->pcrcs || !c->scratch) {
			if (!c->rbuf)
				c->rcap = 0;
			ret = -ENOMEM;
			goto fail;
		}
	}
	rm->epfd = epoll_create1(EPOLL_CLOEXEC);
	rm->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rm->epfd < 0 || rm->wake_fd < 0 ||
	    epoll_ctl(rm->epfd, EPOLL_CTL_ADD, rm->wake_fd, &ev) < 0) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&rm->thread, NULL, remote_main, rm);
	if (ret < 0)
		goto fail;
	pthread_setname_np(rm->thread, "kvt-remote");
	rm->started = true;
	*out = rm;
	return 0;
fail:
	remote_free(rm);
	return ret;
}

/*
 * remote.io_threads = K lanes, each a remote of its own to the same
 * server with its share of the pool: lane i gets conns / K connections at
 * open (one more for the first conns % K lanes) and conns_max / K at most
 * (likewise), at least one each; K is at most max(conns, conns_max).  The
 * pool and striping rule (remote_rule_*) applies within each lane.
 */
int remote_open(struct remote **out, const struct remote_config *cfg, struct dram *dram,
		struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log)
{
	unsigned cmax = cfg->conns_max > cfg->conns ? cfg->conns_max : cfg->conns;
	unsigned k = cfg->io_threads ? cfg->io_threads : 1, opened = 0;
	struct remote **lane;
	int ret = 0;

	if (k > cmax)
		k = cmax;
	if (k == 1)
		return lane_open(out, cfg, dram, ns, mem, log);
	lane = kvt_mem_calloc(mem, k, sizeof(*lane));
	if (!lane)
		return -ENOMEM;
	for (; opened < k; opened++) {
		struct remote_config lc = *cfg;
		lc.conns = cfg->conns / k + (opened < cfg->conns % k);
		lc.conns_max = cmax / k + (opened < cmax % k);
		lc.conns = lc.conns ? lc.conns : 1;
		lc.conns_max = lc.conns_max > lc.conns ? lc.conns_max : lc.conns;
		if ((ret = lane_open(&lane[opened], &lc, dram, ns, mem, log)) < 0)
			break;
	}
	if (ret < 0) {
		for (unsigned i = 0; i < opened; i++)
			remote_close(lane[i]);
		kvt_mem_free(mem, lane, k * sizeof(*lane));
		return ret;
	}
	lane[0]->lane = lane;
	lane[0]->lane_count = k;
	/* Before any operation (their submission orders it for the threads). */
	for (unsigned i = 1; i < k; i++)
		lane[i]->head = lane[0];
	*out = lane[0];
	return 0;
}

static void lane_stop(struct remote *rm)
{
	uint64_t one = 1;
	ssize_t w;
	if (!rm || !rm->started)
		return;
	pthread_mutex_lock(&rm->lock);
	rm->stop = true;
	pthread_mutex_unlock(&rm->lock);
	w = write(rm->wake_fd, &one, sizeof(one));
	KVT_UNUSED(w);
	pthread_join(rm->thread, NULL);
	rm->started = false;
	/* Submissions that raced the stop flag were refused by rop_submit;
	 * any that landed before it were moved to pending and failed. */
}

void remote_stop(struct remote *rm)
{
	if (!rm)
		return;
	for (unsigned i = 0; i < rm->lane_count; i++)
		lane_stop(rm->lane[i]);
}

void remote_close(struct remote *rm)
{
	struct remote **lane;
	unsigned k;
	if (!rm)
		return;
	remote_stop(rm);
	lane = rm->lane;
	k = rm->lane_count;
	for (unsigned i = 1; i < k; i++)
		remote_free(lane[i]);
	if (k > 1)
		kvt_mem_free(rm->mem, lane, k * sizeof(*lane));
	remote_free(rm);
}

bool remote_is_down(struct remote *rm)
{
	for (unsigned i = 0; i < rm->lane_count; i++)
		if (!atomic_load_explicit(&rm->lane[i]->down, memory_order_relaxed))
			return false;
	return true;
}

unsigned remote_caps(struct remote *rm, unsigned *version)
{
	unsigned caps = PROTO_CAPS_KNOWN, ver = PROTO_VERSION_MAX;
	for (unsigned i = 0; i < rm->lane_count; i++) {
		uint32_t h = atomic_load_explicit(&rm->lane[i]->hello_seen, memory_order_relaxed);
		caps &= h & 0xffffu;
		ver = h >> 16 < ver ? h >> 16 : ver;
	}
	if (version)
		*version = ver;
	return caps;
}

const char *remote_addr(const struct remote *rm)
{
	return rm->cfg.addr;
}

void remote_stats(struct remote *rm, kvt_stats_fn fn, void *ctx)
{
	/* Every lane's counters, summed (remote.pool: the connections of all). */
#define S(name, c)                                                                         \
	do {                                                                               \
		uint64_t v_ = 0;                                                           \
		for (unsigned i_ = 0; i_ < rm->lane_count; i_++)                          \
			v_ += atomic_load_explicit(&rm->lane[i_]->c, memory_order_relaxed); \
		fn(ctx, "remote." name, v_, NULL);                                         \
	} while (0)
	fn(ctx, "remote.addr", 0, rm->cfg.addr);
	S("conns_up", c_conns_up);
	fn(ctx, "remote.down", remote_is_down(rm), NULL);
	fn(ctx, "remote.io_threads", rm->lane_count, NULL);
	{
		/* The heap the order indexes hold now (rtab): 0 at rest. */
		size_t idx;
		pthread_mutex_lock(&rm->put_lock);
		idx = rt_bytes(&rm->rm_idx) + rt_bytes(&rm->open_idx);
		pthread_mutex_unlock(&rm->put_lock);
		fn(ctx, "remote.order_index_bytes", idx, NULL);
	}
	{
		unsigned version, caps = remote_caps(rm, &version);
		fn(ctx, "remote.version", version, NULL);
		fn(ctx, "remote.caps", caps, NULL);
	}
	{
		/* How evenly the lanes share the bytes: the least any moved. */
		uint64_t in = UINT64_MAX, out = UINT64_MAX;
		for (unsigned i = 0; i < rm->lane_count; i++) {
			uint64_t a = atomic_load_explicit(&rm->lane[i]->c_bytes_in,
							  memory_order_relaxed);
			uint64_t b = atomic_load_explicit(&rm->lane[i]->c_bytes_out,
							  memory_order_relaxed);
			in = a < in ? a : in;
			out = b < out ? b : out;
		}
		fn(ctx, "remote.lane_min_bytes_in", in, NULL);
		fn(ctx, "remote.lane_min_bytes_out", out, NULL);
	}
	S("gets", c_gets);
	S("direct_gets", c_direct_gets);
	S("hits", c_hits);
	S("misses", c_misses);
	S("puts", c_puts);
	S("puts_stored", c_put_stored);
	S("puts_exist", c_put_exists);
	S("puts_failed", c_put_failed);
	S("lookups", c_lookups);
	S("exists", c_exists);
	S("deletes", c_deletes);
	S("clears", c_clears);
	S("removes_held", c_removes_held);
	S("removes_waited", c_removes_waited);
	S("errors", c_errors);
	S("busy", c_busy);
	S("timeouts", c_timeouts);
	S("fast_fails", c_fast_fails);
	S("connects", c_connects);
	S("connect_failures", c_connect_failures);
	S("disconnects", c_disconnects);
	S("frames_out", c_frames_out);
	S("sends", c_sends);
	S("reads", c_reads);
	S("wakeups", c_wakeups);
	S("put_crc_bytes", c_put_crc_bytes);
	S("window_waits", c_window_waits);
	S("put_waits", c_put_waits);
	S("gets_removed", c_gets_removed);
	S("pool", c_pool);
	S("bytes_in", c_bytes_in);
	S("bytes_out", c_bytes_out);
	S("crc_errors", c_crc_errors);
	S("ns_mismatches", c_ns_mismatches);
	S("promote_full", c_promote_full);
	S("promotes_stale", c_promotes_stale);
	S("tls_failures", c_tls_failures);
#undef S
}

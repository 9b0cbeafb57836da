/*
 * respd.c - kvtierd's Redis-protocol (RESP2) listener: what each command
 * does with the store (doc/resp.md).
 *
 * A RESP connection lives in an event loop like a native one (loop.c),
 * as the protocol table's RESP entry (kvtd_resp_proto): the loop accepts
 * it, reads into its read buffer (charged to --max-memory past 64 KiB,
 * at most preauth_buf before AUTH), calls respd_parse, writes the output
 * queue and runs timeouts.  This file owns the commands parsed from the
 * buffer (resp.h) and their library requests, which go to the loop's own
 * kvt_queue with user_data tagged KVTD_UD_RESP.
 *
 * Commands of one connection may complete in any order (a DRAM hit before
 * an SSD read) but are answered in the order they came, as Redis clients
 * require: a connection keeps its commands in a list, and only a finished
 * command at the head is queued for output.  Each command in the list
 * counts in c->inflight: no more is parsed, and loop.c's flow control
 * pauses reading, while --conn-inflight commands are unanswered.
 *
 * Keys and values (doc/resp.md "How keys map"): each tenant's keys live
 * in one namespace (model "resp"); a Redis key of up to 63 bytes is the
 * kvtier key 's' + key, a longer one 'h' + SHA-256(key).  The value is
 * stored as two parts:
 *
 *   part 0: header   off 0  magic "KVR1"
 *                    off 4  u32 LE key length
 *                    off 8  u64 LE expiry, Unix ms (0: none)
 *                    off 16 the Redis key
 *   part 1: the value's bytes (absent when the value is empty)
 *
 * Every read compares the stored key with the one asked for (a mismatch
 * is a miss) and checks the expiry (an expired value is a miss, and is
 * deleted unless a SET of its key may have come since the read:
 * "Expiry" below).  GET replies are sent from the pinned DRAM view, no
 * copy.
 *
 * kvtier keys name immutable bytes (put if absent); SET is therefore
 * DELETE then PUT, submitted together.  A racing SET of the same key can
 * land between them: our PUT then reports KVT_EXISTS, which means another
 * SET's complete value was stored after our DELETE -- the two SETs
 * overlapped, and the outcome is the one where ours came first and was
 * overwritten.  Likewise a PUT canceled (-ECANCELED) by a racing SET's
 * DELETE or a FLUSHDB.  Both are answered +OK (SET NX: nil), with no
 * retry; the key always holds one complete value of one of the SETs, or
 * none if the last overlapping operation was a delete.
 *
 * Threads: the loop thread of the connection; no locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "kvtierd.h"
#include "resp.h"

#define RESPD_MODEL "resp"
#define RESPD_HDR_LEN 16
#define RESPD_KEY_INLINE 63           /* longest Redis key stored as itself */
#define RESPD_ARGC_MAX 65536
#define RESPD_INLINE_MAX (64u << 10)
#define RESPD_STEAL_MIN (256u << 10)  /* commands this large take the buffer */
#define RESPD_PREAUTH_ARGC 16         /* arguments of a command before AUTH */
#define RESPD_ARGS_FREE 64            /* parser scratch entries not charged */
/* A command refused by its tenant's input share (KVTD_IN_TENANT_MAX) */
#define RESPD_SHARE_ERR "ERR the tenant's commands hold its share of the server " \
			"memory limit (--max-memory); retry later"
#define RESPD_PROBE_MAX 16            /* commands of a connection pinning in the store */
#define RESPD_PROBE_WINDOW 64         /* keys of an MGET, EXISTS or DEL probed (pinned) at a time */
/* What an MGET's element of a pinned value holds besides the value while
 * its reply is built (respd_settle): two segments, its pin (and the
 * store's, KVTD_PIN_COST), its text ("$N\r\n", "\r\n") with room */
#define RESPD_ELEM_COST (2 * sizeof(struct respd_seg) + sizeof(uint64_t) + KVTD_PIN_COST + 32u)

enum respd_kind {
	RK_NONE = 0, RK_GET, RK_MGET, RK_EXISTS, RK_DEL, RK_SET, RK_MSET, RK_FLUSH,
};

enum { RP_PROBE = 1, RP_WRITE, RP_SYNC, RP_DONE };

enum { RESPD_K_LIVE = 1 }; /* respd_cmd.keyst */

struct respd_cmd;

/* One library request of a command. */
struct respd_item {
	struct kvt_req req;        /* user_data: (uintptr_t)this | KVTD_UD_RESP */
	struct respd_cmd *cmd;
	uint32_t key_arg;          /* argument index of its Redis key */
	uint32_t val_arg;          /* PUT: argument index of the value */
	bool pinned;               /* req.pin held */
	bool live;                 /* probe: present, same key, not expired */
	bool present;              /* probe: a block exists under the kvtier key */
	bool expired;              /* probe: this key's value, expired ("Expiry") */
	bool reapable;             /* probe: no SET of its stripe in progress when
				    * it went out; wseq: the stripe's started then */
	bool wseq_held;            /* PUT: counted in its stripe's started */
	uint64_t wseq;
	uint8_t hdr[RESPD_HDR_LEN];
	struct iovec iov[3];       /* PUT: header, key, value */
};

/* Reply pieces: text of ours, pinned value bytes, or the command's own. */
struct respd_seg {
	const void *p;             /* NULL: text at off */
	size_t off, len;
	bool own;                  /* p into the command's bytes (raw), not pinned */
};

struct respd_cmd {
	struct respd_cmd *next;
	struct kvtd_conn *conn;
	uint8_t *raw;              /* owned: the command's bytes */
	uint64_t raw_mem;          /* of raw_charged, raw's (its bytes, or the
				    * read buffer it took) */
	bool raw_sent;             /* the reply sends bytes of raw: it goes with
				    * the reply (respd_out) */
	uint64_t raw_charged;      /* charged to --max-memory and its tenant's input
				    * (tstat; respd_charge): bytes, arguments, items */
	struct kvtd_tstat *tstat;  /* its tenant (NULL before AUTH) */
	struct resp_arg *argv;     /* owned: argc args into raw */
	uint32_t argc;
	int kind, phase;
	uint32_t pending;          /* requests in flight */
	struct respd_item *items;  /* owned: icap of them, one window ("Windows") */
	uint32_t icap;
	uint32_t n;                /* requests of the phase, all windows */
	uint32_t probed;           /* of them submitted (respd_windows_next) */
	uint32_t settled;          /* of them back and looked at (respd_settle) */
	uint32_t probe_ns;         /* the namespace of its keys */
	uint64_t probe_bytes;      /* MGET: the bytes its probes pinned */
	uint8_t *keyst;            /* owned, DEL: RESPD_K_* of each key, probed */
	int64_t count;             /* EXISTS, DEL: live keys (deleted: DEL) */
	bool removed;              /* DEL: a delete removed a block */
	bool raced;                /* SET, MSET: a put raced (top of the file) */
	int werr;                  /* SET, MSET: a put's first error */
	uint64_t start_ns;
	int tier;                  /* the slowest tier that served one of its
				    * requests (enum kvt_tier): its latency's label */
	uint64_t expire_ms;        /* SET/MSET: absolute, 0 none */
	int cond;                  /* SET: 0, 'N' (NX), 'X' (XX) */
	int64_t synced;            /* RP_SYNC: DEL's count, answered once durable */
	_Atomic uint32_t *clear_slot; /* FLUSHDB: its tenant's CLEAR slot, held */
	bool done;
	bool windowed;             /* counted in its connection's windowed */
	bool quit;                 /* close after the reply */
	bool is_err;
	bool resp3;                /* reply in RESP3 (the connection's HELLO 3) */
	/* the reply */
	uint8_t *text;
	size_t tlen, tcap;
	struct respd_seg *segs;
	unsigned nseg, segcap;
	uint64_t *pins;
	unsigned npin, pincap;
	uint64_t pin_held;         /* value bytes behind pins, in respd_conn.pin_held
				    * until the reply is queued (respd_pin_flow) */
	bool oom;
	int oom_why;               /* a refused charge's (respd_charge): -EDQUOT past
				    * its tenant's share, -ENOBUFS past the budget;
				    * 0: an allocation failed */
};

struct respd_conn {
	struct resp_arg *args;     /* parser scratch */
	uint32_t args_cap;
	struct resp_resume resume; /* the command at rstart, as far as parsed */
	uint64_t args_charged;     /* of it, charged to --max-memory and its tenant's
				    * input share (respd_args) */
	struct kvtd_tstat *args_tstat; /* that tenant's (held by the connection) */
	struct respd_cmd *head, *tail;
	bool ns_ok;
	uint32_t ns;
	bool resp3;                /* HELLO 3 was answered */
	uint64_t pin_held;         /* value bytes its commands pin, replies not queued */
	uint32_t probing;          /* commands whose pinned probes are in the store */
	uint32_t windowed;         /* commands of several windows unfinished (respd_windowed) */
};

static struct respd_conn *respd_of(struct kvtd_conn *c)
{
	return c->alt;
}

static struct resp_limits respd_limits(const struct kvtd_server *srv)
{
	struct resp_limits l = {
		.argc_max = RESPD_ARGC_MAX,
		.bulk_max = srv->dram_max_value,
		.inline_max = RESPD_INLINE_MAX,
	};
	return l;
}

/* Largest command buffered whole: two largest values and some. */
static size_t respd_buf_max(const struct kvtd_server *srv)
{
	return (size_t)(2 * srv->dram_max_value + (1u << 20));
}

static uint64_t respd_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void respd_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t respd_get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------------------
 * Reply building
 */

/* Room for one more segment of the reply; false (cmd->oom) if none. */
static bool respd_seg_room(struct respd_cmd *cmd)
{
	unsigned nc;
	struct respd_seg *ns;

	if (cmd->nseg < cmd->segcap)
		return true;
	nc = cmd->segcap ? cmd->segcap * 2 : 8;
	ns = realloc(cmd->segs, nc * sizeof(*ns));
	if (!ns) {
		cmd->oom = true;
		return false;
	}
	cmd->segs = ns;
	cmd->segcap = nc;
	return true;
}

static void respd_text(struct respd_cmd *cmd, const void *p, size_t len)
{
	if (cmd->oom)
		return;
	if (cmd->tlen + len > cmd->tcap) {
		size_t nc = cmd->tcap ? cmd->tcap : 256;
		while (nc < cmd->tlen + len)
			nc *= 2;
		uint8_t *nt = realloc(cmd->text, nc);
		if (!nt) {
			cmd->oom = true;
			return;
		}
		cmd->text = nt;
		cmd->tcap = nc;
	}
	if (cmd->nseg && !cmd->segs[cmd->nseg - 1].p &&
	    cmd->segs[cmd->nseg - 1].off + cmd->segs[cmd->nseg - 1].len == cmd->tlen) {
		cmd->segs[cmd->nseg - 1].len += len;
	} else {
		if (!respd_seg_room(cmd))
			return;
		cmd->segs[cmd->nseg++] = (struct respd_seg){ NULL, cmd->tlen, len, false };
	}
	memcpy(cmd->text + cmd->tlen, p, len);
	cmd->tlen += len;
}

static void respd_bytes(struct respd_cmd *cmd, const void *p, size_t len)
{
	if (cmd->oom || len == 0 || !respd_seg_room(cmd))
		return;
	cmd->segs[cmd->nseg++] = (struct respd_seg){ p, 0, len, false };
}

static void respd_simple(struct respd_cmd *cmd, char type, const char *s)
{
	uint8_t b[512];
	size_t n = resp_enc_simple(b, sizeof(b), type, s, strlen(s));
	if (n <= sizeof(b))
		respd_text(cmd, b, n);
	if (type == '-')
		cmd->is_err = true;
}

static void respd_int(struct respd_cmd *cmd, char type, int64_t v)
{
	uint8_t b[RESP_HDR_MAX];
	respd_text(cmd, b, resp_enc_int(b, sizeof(b), type, v));
}

static void respd_bulk(struct respd_cmd *cmd, const void *p, size_t len)
{
	respd_int(cmd, '$', (int64_t)len);
	respd_text(cmd, p, len);
	respd_text(cmd, "\r\n", 2);
}

/*
 * An argument of the command as a bulk string (ECHO, PING msg): a large
 * one is sent from the command's bytes, which go with the reply
 * (respd_out), charged as they were.  It was copied into the reply's
 * text: a 64 MiB ECHO held 128 MiB at once, the copy outside
 * --max-memory until queued, and the loop copied 64 MiB (session 37:
 * test_hostile_http resp_echo_big, bench/resp_echo_mem.py).  A small one
 * is copied: one allocation for the reply, not an iovec array.
 */
#define RESPD_SEND_OWN_MIN 4096u
static void respd_bulk_arg(struct respd_cmd *cmd, const struct resp_arg *a)
{
	if (a->len < RESPD_SEND_OWN_MIN) {
		respd_bulk(cmd, a->p, (size_t)a->len);
		return;
	}
	respd_int(cmd, '$', (int64_t)a->len);
	if (!cmd->oom && respd_seg_room(cmd)) {
		cmd->segs[cmd->nseg++] = (struct respd_seg){ a->p, 0, (size_t)a->len, true };
		cmd->raw_sent = true;
	}
	respd_text(cmd, "\r\n", 2);
}

static void respd_bulk_str(struct respd_cmd *cmd, const char *s)
{
	respd_bulk(cmd, s, strlen(s));
}

/* RESP3 has its own null; RESP2's is the nil bulk string. */
static void respd_nil(struct respd_cmd *cmd)
{
	if (cmd->resp3)
		respd_text(cmd, "_\r\n", 3);
	else
		respd_text(cmd, "$-1\r\n", 5);
}

static void respd_keep_pin(struct respd_cmd *cmd, struct respd_item *it)
{
	if (cmd->npin == cmd->pincap) {
		unsigned nc = cmd->pincap ? cmd->pincap * 2 : 4;
		uint64_t *np = realloc(cmd->pins, nc * sizeof(*np));
		if (!np) {
			cmd->oom = true;
			return;
		}
		cmd->pins = np;
		cmd->pincap = nc;
	}
	cmd->pins[cmd->npin++] = it->req.pin;
	it->pinned = false; /* the reply owns it now */
}

/* ------------------------------------------------------------------------
 * Commands: life and order
 */

static void respd_cmd_free(struct kvtd_server *srv, struct respd_cmd *cmd)
{
	if (cmd->pin_held && cmd->conn && cmd->conn->alt)
		respd_of(cmd->conn)->pin_held -= cmd->pin_held;
	for (uint32_t i = 0; i < cmd->icap; i++)
		if (cmd->items[i].pinned)
			kvt_pin_release(srv->store, cmd->items[i].req.pin);
	for (unsigned i = 0; i < cmd->npin; i++)
		kvt_pin_release(srv->store, cmd->pins[i]);
	free(cmd->pins);
	free(cmd->items);
	free(cmd->keyst);
	free(cmd->segs);
	free(cmd->text);
	free(cmd->argv);
	free(cmd->raw);
	kvtd_in_uncharge(srv, cmd->tstat, cmd->raw_charged);
	kvtd_clear_release(cmd->clear_slot);
	free(cmd);
}

/* Drop the reply built so far (its pins released), for an error. */
static void respd_reply_drop(struct kvtd_server *srv, struct respd_cmd *cmd)
{
	for (unsigned i = 0; i < cmd->npin; i++)
		kvt_pin_release(srv->store, cmd->pins[i]);
	cmd->npin = 0;
	cmd->nseg = 0;
	cmd->tlen = 0;
	cmd->raw_sent = false;
	cmd->oom = false;
	cmd->oom_why = 0; /* read by the caller before: a later failure says its own */
	if (cmd->pin_held && cmd->conn->alt)
		respd_of(cmd->conn)->pin_held -= cmd->pin_held;
	cmd->pin_held = 0;
}

/* The reply of a finished command into an output entry (or NULL). */
static struct kvtd_out *respd_out(struct kvtd_server *srv, struct respd_cmd *cmd)
{
	struct kvtd_out *o;

	if (cmd->oom) {
		/* Drop whatever was built: a short error instead, which says
		 * whose limit it was.  A charge its tenant's share refused
		 * after the parse's check passed (the tenant's other commands
		 * charged meanwhile, or its first window of items) was
		 * answered "server out of memory", as if the server's budget
		 * were spent: a client could not tell its own share from the
		 * server's (test_hostile_http resp_share_answer). */
		int why = cmd->oom_why;
		respd_reply_drop(srv, cmd);
		respd_simple(cmd, '-', why == -EDQUOT ? RESPD_SHARE_ERR
				 : why == -ENOBUFS ? "ERR server memory limit reached "
						     "(--max-memory); retry later"
				 : "ERR server out of memory");
		if (cmd->oom)
			return NULL;
	}
	/* The text's room (256 bytes at least) goes back: a "+PONG" waiting
	 * in the queue holds 7 bytes, as it is charged (KVTD_OUT_COST). */
	if (cmd->text && cmd->tcap > cmd->tlen + 64) {
		uint8_t *nt = realloc(cmd->text, cmd->tlen ? cmd->tlen : 1);
		if (nt) {
			cmd->text = nt;
			cmd->tcap = cmd->tlen;
		}
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->iov = cmd->nseg <= 2 ? o->iov_small : calloc(cmd->nseg, sizeof(*o->iov));
	if (!o->iov) {
		free(o);
		return NULL;
	}
	for (unsigned i = 0; i < cmd->nseg; i++) {
		const struct respd_seg *s = &cmd->segs[i];
		o->iov[i].iov_base = s->p ? (void *)s->p : cmd->text + s->off;
		o->iov[i].iov_len = s->len;
		o->bytes += s->len;
		if (s->own)
			o->keep_ref_len += s->len;
		else if (s->p) /* value bytes in pinned DRAM: the loop's pin accounting */
			o->pin_len += s->len;
	}
	o->iov_count = cmd->nseg;
	if (cmd->raw_sent) { /* charged with the output from here (kvtd_conn_queue) */
		o->keep = cmd->raw;
		o->keep_len = cmd->raw_mem > o->keep_ref_len ? cmd->raw_mem : o->keep_ref_len;
		cmd->raw = NULL;
	}
	/* its pins are the output's now (c->pin_bytes) */
	if (cmd->pin_held && cmd->conn->alt)
		respd_of(cmd->conn)->pin_held -= cmd->pin_held;
	cmd->pin_held = 0;
	o->buf = cmd->text;
	o->pins = cmd->pins;
	o->pin_count = cmd->npin;
	/* Counted (kvtd_conn_queue) in the tenant whose command made it --
	 * its pins and its queued bytes -- not the connection's when it is
	 * queued: a command of alice's answered after an AUTH as bob
	 * further down the pipeline counted in bob's shares, and bob's
	 * other connections were refused for alice's replies while hers
	 * were served (session 42, test_hostile resp_auth_pins; the S3
	 * listener's signers: s3reply.c s3d_out).  Before AUTH: NULL, the
	 * connection's then. */
	o->tstat = cmd->tstat;
	o->pin_tstat = cmd->tstat;
	cmd->text = NULL;
	cmd->pins = NULL;
	cmd->npin = 0;
	return o;
}

/*
 * Pinned answers (doc/kvtierd.md "Overload"): GET and MGET replies are
 * sent from pinned DRAM, counted in c->pin_bytes and the tenant's pinned
 * bytes (o->pin_len), so loop.c closes a reader slower than
 * KVTD_MIN_DRAIN_BPS.  Replies go out in order and whole, so instead of
 * answering in chunks as native GETs do, a connection whose queued
 * answers pin past KVTD_PIN_CONN_MAX (or whose tenant's pass
 * KVTD_PIN_TENANT_MAX) is not read until its own drain (the written
 * hook), counted in pin_deferred; pins held by commands whose replies
 * are not queued yet count too (pin_held: an MGET's as its windows
 * settle, a finished command's waiting for earlier ones), so parsing stops
 * at the cap; and at most RESPD_PROBE_MAX commands of a connection have
 * their pinned probes in the store at once (their sizes are known only
 * once pinned).  A pipeline of GETs left unread pinned DRAM without bound
 * before.  One MGET probes its keys RESPD_PROBE_WINDOW at a time and stops
 * once they pin KVTD_PIN_CONN_MAX: it is answered with an error instead
 * (respd_mget_refuse); all of its keys were pinned at once before.  EXISTS
 * and DEL probe theirs a window at a time too, each window checked and
 * released before the next (respd_settle): they pinned every key at
 * once, up to 65535 blocks no put could evict while the probes lasted.
 *
 * "Its tenant's" is two: each tenant its queued replies are counted in
 * (respd_out: the command's; kvtd_conn_pin_tenants_over), which its
 * drain gives back, and the connection's now, whose commands it reads
 * next (a connection holding pins is not refused its GETs:
 * respd_tenant_pins_over).  Only the latter was checked: a pipeline of
 * GETs of alice's, then AUTH as bob, left the connection read while
 * alice's pins (its replies among them) were past her cap -- each of its
 * further commands was read and run (test_hostile resp_auth_flow).
 */
static void respd_pin_flow(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	bool bytes_over = false, over;

	if (c->dead)
		return;
	if (c->pin_bytes + respd_of(c)->pin_held) {
		bytes_over = c->pin_bytes + respd_of(c)->pin_held >= KVTD_PIN_CONN_MAX(srv);
		if (!bytes_over && c->tstat)
			bytes_over =
				atomic_load_explicit(&c->tstat->pinned, memory_order_relaxed) >=
				KVTD_PIN_TENANT_MAX(srv);
		if (!bytes_over)
			bytes_over = kvtd_conn_pin_tenants_over(c);
	}
	over = bytes_over || respd_of(c)->probing >= RESPD_PROBE_MAX || respd_of(c)->windowed;
	if (over == c->pin_paused)
		return;
	c->pin_paused = over;
	if (bytes_over)
		KVTD_COUNT(srv, pin_deferred, 1);
	kvtd_conn_flow(c);
}

/* A connection that pins nothing is read whatever its tenant pins (so
 * that it progresses): one unread GET reply on each of many connections
 * of one tenant pinned the whole DRAM tier, and every other tenant's SET
 * failed (test_hostile_http resp_pins).  Its GET or MGET of a live value
 * is refused instead while its tenant's replies pin KVTD_PIN_TENANT_MAX
 * (with --tenants: without, one trust domain).  The tenant is the one
 * the reply will be counted in (respd_out): the command's, not the
 * connection's when its probe completes -- after an AUTH further down
 * the pipeline that was another tenant's (or none yet), whose share
 * stayed empty, and every such GET was served (test_hostile
 * resp_auth_share). */
static bool respd_tenant_pins_over(struct respd_cmd *cmd)
{
	struct kvtd_conn *c = cmd->conn;
	struct kvtd_tstat *t = cmd->tstat ? cmd->tstat : c->tstat;

	return kvtd_auth_enabled() && t && !c->pin_bytes && !respd_of(c)->pin_held &&
	       atomic_load_explicit(&t->pinned, memory_order_relaxed) >=
		       KVTD_PIN_TENANT_MAX(c->loop->srv);
}

static void respd_pins_refuse(struct respd_cmd *cmd)
{
	KVTD_COUNT(cmd->conn->loop->srv, pin_deferred, 1);
	respd_simple(cmd, '-', "ERR the tenant's replies being sent pin its share of the DRAM "
		     "tier; read them, or retry later");
}

static void respd_written(struct kvtd_conn *c)
{
	respd_pin_flow(c);
}

/* Queue the replies of the finished commands at the head, in order. */
static void respd_flush_done(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct respd_conn *rc = respd_of(c);

	while (rc->head && rc->head->done) {
		struct respd_cmd *cmd = rc->head;
		bool quit = cmd->quit;

		rc->head = cmd->next;
		if (!rc->head)
			rc->tail = NULL;
		if (!c->dead) {
			struct kvtd_out *o = respd_out(srv, cmd);
			if (o)
				kvtd_conn_queue(c, o);
			else
				quit = true;
		}
		respd_cmd_free(srv, cmd);
		kvtd_conn_frame_done(c);
		if (quit && !c->dead && !c->no_more_input)
			kvtd_conn_stop_input(c);
	}
	respd_pin_flow(c);
}

static void respd_finish(struct respd_cmd *cmd)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;

	cmd->done = true;
	cmd->phase = RP_DONE;
	if (cmd->windowed) {
		cmd->windowed = false;
		respd_of(cmd->conn)->windowed--; /* respd_flush_done: reading may go on */
	}
	kvtd_clear_release(cmd->clear_slot); /* FLUSHDB's walk is back */
	cmd->clear_slot = NULL;
	if (cmd->kind == RK_GET || cmd->kind == RK_MGET || cmd->kind == RK_EXISTS)
		kvtd_metrics_latency(srv, KVTD_LAT_READ, cmd->tier, kvtd_now_ns() - cmd->start_ns);
	else if (cmd->kind == RK_SET || cmd->kind == RK_MSET || cmd->kind == RK_DEL)
		kvtd_metrics_latency(srv, KVTD_LAT_WRITE, cmd->tier, kvtd_now_ns() - cmd->start_ns);
	kvtd_metrics_resp(srv, cmd->is_err);
	respd_flush_done(cmd->conn);
}

/* ------------------------------------------------------------------------
 * Keys, namespaces, values
 */

static void respd_key(struct kvt_key *k, const struct resp_arg *a)
{
	if (a->len <= RESPD_KEY_INLINE) {
		k->bytes[0] = 's';
		memcpy(k->bytes + 1, a->p, (size_t)a->len);
		k->len = (uint32_t)a->len + 1;
	} else {
		k->bytes[0] = 'h';
		SHA256(a->p, (size_t)a->len, k->bytes + 1);
		k->len = 1 + SHA256_DIGEST_LENGTH;
	}
}

static int respd_ns_of(struct kvtd_server *srv, const char *tenant, uint32_t *id, bool may_register)
{
	struct kvt_ns_desc d = {
		.model = RESPD_MODEL, .dtype = "bytes", .layout = "redis-string",
		.block_tokens = 1, .tp_size = 1, .pp_size = 1, .tenant = tenant,
	};
	uint8_t digest[32];
	int rc = kvt_ns_digest(&d, digest, NULL, 0);

	if (rc < 0)
		return rc;
	if (kvt_ns_find(srv->store, digest, id) == 0)
		return 0;
	if (!may_register)
		return KVT_ENONS;
	return kvt_ns_register(srv->store, &d, id);
}

/* The connection's namespace; registering a tenant's first one fsyncs the
 * registry once (doc/resp.md says so). */
static int respd_ns(struct kvtd_conn *c, uint32_t *id)
{
	struct respd_conn *rc = respd_of(c);
	int r;

	if (rc->ns_ok) {
		*id = rc->ns;
		return 0;
	}
	r = respd_ns_of(c->loop->srv, c->tenant, &rc->ns, true);
	if (r < 0)
		return r;
	rc->ns_ok = true;
	*id = rc->ns;
	return 0;
}


static bool respd_view_equal(const struct kvt_req *r, uint64_t off, const uint8_t *p, size_t len)
{
	for (uint32_t i = 0; i < r->view_count && len; i++) {
		size_t vl = r->view[i].iov_len;
		if (off >= vl) {
			off -= vl;
			continue;
		}
		size_t take = vl - (size_t)off < len ? vl - (size_t)off : len;
		if (memcmp((uint8_t *)r->view[i].iov_base + off, p, take) != 0)
			return false;
		p += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

/* A pinned probe came back: is the value live for Redis key k?  Sets
 * it->present, it->live, it->expired; returns the value's length when
 * live.  The reads' check and the active expiry's ("Active expiry"). */
static uint64_t respd_check_key(struct respd_item *it, const struct resp_arg *k)
{
	uint8_t h[RESPD_HDR_LEN];
	uint64_t exp;

	it->present = it->req.status == KVT_OK;
	it->live = it->expired = false;
	if (!it->present)
		return 0;
	if (!kvtd_view_read(&it->req, 0, h, sizeof(h)) || memcmp(h, "KVR1", 4) != 0)
		return 0;
	if (((uint64_t)h[4] | (uint64_t)h[5] << 8 | (uint64_t)h[6] << 16 | (uint64_t)h[7] << 24) !=
		    k->len ||
	    it->req.length < RESPD_HDR_LEN + k->len ||
	    !respd_view_equal(&it->req, RESPD_HDR_LEN, k->p, (size_t)k->len))
		return 0;
	exp = respd_get64(h + 8);
	if (exp && respd_unix_ms() >= exp) {
		it->expired = true;
		return 0;
	}
	it->live = true;
	return it->req.length - RESPD_HDR_LEN - k->len;
}

static uint64_t respd_check(struct respd_cmd *cmd, struct respd_item *it)
{
	return respd_check_key(it, &cmd->argv[it->key_arg]);
}

/* Append the live value of a probe to the reply, from its pinned view. */
static void respd_reply_value(struct respd_cmd *cmd, struct respd_item *it, uint64_t vlen)
{
	uint64_t off = RESPD_HDR_LEN + cmd->argv[it->key_arg].len;

	respd_int(cmd, '$', (int64_t)vlen);
	for (uint32_t i = 0; i < it->req.view_count; i++) {
		size_t l = it->req.view[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		respd_bytes(cmd, (uint8_t *)it->req.view[i].iov_base + off, l - (size_t)off);
		off = 0;
	}
	respd_text(cmd, "\r\n", 2);
	if (vlen) {
		respd_keep_pin(cmd, it);
		cmd->pin_held += vlen;
		respd_of(cmd->conn)->pin_held += vlen;
	}
}

/* ------------------------------------------------------------------------
 * Expiry
 *
 * A read that finds an expired value deletes it (Redis's lazy expiry),
 * but only if no SET of that key can have come between the read and the
 * delete.  A plain delete from the read's completion went to the store
 * after the requests submitted meanwhile and removed the value a SET
 * pipelined behind the GET -- or another connection's, on any loop --
 * had just stored, answered +OK (attack40: 50 of 50); the store has no
 * conditional delete.  So RESP's writes are counted by stripe of keys
 * (srv->resp_wseq, a hash of namespace and key): a SET's or MSET's put
 * counts in its stripe's started, under the stripe's lock, before it
 * (and the delete paired with it) goes to the store, and in finished
 * once it is back.  A probe notes started when it goes out, if finished
 * equals it (no put of the stripe in progress); the delete goes only if
 * started still holds that value, submitted under the lock (it runs
 * inline: DRAM and the SSD index).  It does not count itself: a delete
 * removes, it stores nothing another read could lose, and counted it
 * made other keys of its stripe in the same MGET window skip theirs.
 *
 * Why that suffices: the read saw the expired value, so every SET that
 * replaced it had not yet run its delete when the read ran.  Such a SET
 * counted itself before its delete went out: before the probe's note (it
 * is then in progress, not finished, and the probe is not reapable) or
 * after it (started moved: no delete).  A SET counted after the expiry
 * delete's lock is released goes to the store after that delete ran.
 * Other stripes' keys and the library's other writers do not matter: a
 * put lands only on an absent key, and only RESP writes this namespace
 * -- except a native client of the same tenant that registers the
 * namespace by its descriptor (doc/resp.md "Expiry" says so).  A stripe
 * shared with a busy key costs a skipped delete, never a wrong one.
 */

/* Keyed (kvtd_key_hash): with FNV-1a unkeyed, another tenant could
 * compute keys of a victim key's stripe and keep it busy, so that the
 * victim's expired value was never deleted (doc/security.md "Session 44"). */
static struct kvtd_resp_wseq *respd_wseq_of(struct kvtd_server *srv, const struct kvt_req *r)
{
	uint64_t h = kvtd_key_hash(srv->key_secret, r->ns, r->key.bytes, r->key.len);

	return &srv->resp_wseq[(h ^ (h >> 32)) % KVTD_RESP_WSEQ];
}

void kvtd_resp_wseq_init(struct kvtd_server *srv)
{
	for (unsigned i = 0; i < KVTD_RESP_WSEQ; i++)
		pthread_mutex_init(&srv->resp_wseq[i].lock, NULL);
}

void kvtd_resp_wseq_free(struct kvtd_server *srv)
{
	for (unsigned i = 0; i < KVTD_RESP_WSEQ; i++)
		pthread_mutex_destroy(&srv->resp_wseq[i].lock);
}

/* A probe going out: the stripe's count of writes. */
static void respd_wseq_note(struct kvtd_server *srv, struct respd_item *it)
{
	struct kvtd_resp_wseq *w = respd_wseq_of(srv, &it->req);

	it->wseq = atomic_load(&w->started);
	it->reapable = atomic_load(&w->finished) == it->wseq;
}

/* A put going out (begin) or back (end). */
static void respd_wseq_begin(struct kvtd_server *srv, struct respd_item *it)
{
	struct kvtd_resp_wseq *w = respd_wseq_of(srv, &it->req);

	pthread_mutex_lock(&w->lock);
	atomic_fetch_add(&w->started, 1);
	pthread_mutex_unlock(&w->lock);
	it->wseq_held = true;
}

static void respd_wseq_end(struct kvtd_server *srv, struct respd_item *it)
{
	if (!it->wseq_held)
		return;
	it->wseq_held = false;
	atomic_fetch_add(&respd_wseq_of(srv, &it->req)->finished, 1);
}

/* The probe found its key's value expired: deleted if no write of the
 * stripe came since (above); true if the delete went to the store.  A
 * request of no command, freed when it completes. */
static bool respd_reap_on(struct kvtd_loop *loop, struct respd_item *it)
{
	struct kvtd_server *srv = loop->srv;
	struct kvtd_resp_wseq *w;
	struct respd_item *d;
	struct kvt_req *r;

	if (!it->expired || !it->reapable)
		return false;
	it->expired = false; /* once */
	w = respd_wseq_of(srv, &it->req);
	if (atomic_load(&w->started) != it->wseq)
		return false;
	d = calloc(1, sizeof(*d));
	if (!d)
		return false;
	d->req.op = KVT_OP_DELETE;
	d->req.ns = it->req.ns;
	d->req.key = it->req.key;
	d->req.user_data = (uint64_t)(uintptr_t)d | KVTD_UD_RESP;
	r = &d->req;
	pthread_mutex_lock(&w->lock);
	if (atomic_load(&w->started) == it->wseq && kvt_submit(loop->q, &r, 1) == 1)
		d = NULL;
	pthread_mutex_unlock(&w->lock);
	if (!d)
		return true;
	free(d);
	return false;
}

static void respd_reap(struct respd_cmd *cmd, struct respd_item *it)
{
	(void)respd_reap_on(cmd->conn->loop, it);
}

/* ------------------------------------------------------------------------
 * Active expiry
 *
 * A value set with EX or PX and never read again was deleted by nothing
 * but a SET, DEL, FLUSHDB or eviction: it held DRAM or SSD, and counted
 * in DBSIZE, however long ago it expired.  Now each SET with a TTL that
 * stored its value records (namespace, key, expiry) in the expiry index
 * (expiry.c: bounded, per-tenant shares, charged), and loop 0 sweeps it,
 * a sweep at most every KVTD_EXPIRY_TICK_MS (loop 0 waits until the
 * earliest entry is due: respd_tick_wait_ms): up to
 * KVTD_EXPIRY_TICK_KEYS entries due are popped, and each is a quiet
 * pinned probe of its key (KVT_F_QUIET: no hit, recency or promotion; a
 * value on SSD only read into a private copy), holding one of the
 * server's quiet slots, the sweep at most KVTD_QUIET_TENANT_MAX of them
 * (respd_expire_slot): entries due past the slots stay in the index for
 * the sweep's next try -- when a probe of its own is back, or the next
 * tick.  A probe is noted in its stripe's
 * write count like a read's (respd_wseq_note).  Its completion is a
 * read's: respd_check_key with the Redis key (the kvtier key's own for
 * a short one; for a hashed one the stored header alone:
 * respd_expire_check_hashed), and respd_reap_on deletes the value if it
 * is still expired and no write of its stripe came since -- a SET without a TTL
 * or with a later one since the entry was made leaves a value that is
 * not expired (skipped; with a later TTL, that expiry is the key's entry
 * again: respd_expire_again), and a SET in progress moves the stripe's count
 * (skipped: the next read or a later entry of the key sees to it).
 * Counted: server.resp_expiry_swept (deletes sent), _skipped (the rest).
 */
/* One of the server's quiet slots (KVTD_QUIET_INFLIGHT_MAX) for a sweep's
 * probe: the sweep holds at most a tenant's (KVTD_QUIET_TENANT_MAX), and
 * none while the server's are all held.  Loop 0's alone. */
static bool respd_expire_slot(struct kvtd_loop *loop)
{
	struct kvtd_server *srv = loop->srv;
	unsigned cur = atomic_load_explicit(&srv->quiet_inflight, memory_order_relaxed);

	if (loop->expire_inflight >= KVTD_QUIET_TENANT_MAX)
		return false;
	do {
		if (cur >= KVTD_QUIET_INFLIGHT_MAX)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&srv->quiet_inflight, &cur, cur + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	loop->expire_inflight++;
	return true;
}

static void respd_expire_slot_free(struct kvtd_loop *loop)
{
	loop->expire_inflight--;
	atomic_fetch_sub_explicit(&loop->srv->quiet_inflight, 1, memory_order_relaxed);
}

static void respd_tick(struct kvtd_loop *loop)
{
	struct kvtd_server *srv = loop->srv;
	uint32_t ns[KVTD_EXPIRY_TICK_KEYS];
	struct kvt_key keys[KVTD_EXPIRY_TICK_KEYS];
	uint64_t now_ms, next;
	unsigned n, want = 0;

	if (loop->idx != 0 || loop->stopping || loop->store_closed)
		return;
	if (loop->now_ns - loop->expire_tick_ns >= KVTD_EXPIRY_TICK_MS * 1000000ull) {
		loop->expire_tick_ns = loop->now_ns;
		loop->expire_left = KVTD_EXPIRY_TICK_KEYS;
	}
	if (!loop->expire_left ||
	    !atomic_load_explicit(&srv->ctr.resp_expiry_held, memory_order_relaxed))
		return;
	now_ms = respd_unix_ms();
	next = kvtd_expiry_next_ms(srv);
	if (!next || next > now_ms) {
		loop->expire_left = 0; /* none due: no lock until the next tick */
		return;
	}
	while (want < loop->expire_left && respd_expire_slot(loop))
		want++;
	if (!want)
		return; /* slots held: when some come back, or the next tick */
	n = kvtd_expiry_due(srv, now_ms, ns, keys, want);
	for (unsigned i = n; i < want; i++)
		respd_expire_slot_free(loop);
	loop->expire_left = n < want ? 0 : loop->expire_left - n;
	for (unsigned i = 0; i < n; i++) {
		struct respd_item *it = calloc(1, sizeof(*it));
		struct kvt_req *r;

		if (!it) {
			KVTD_COUNT(srv, resp_expiry_skipped, 1);
			respd_expire_slot_free(loop);
			continue;
		}
		it->req.op = KVT_OP_GET_PINNED;
		/* quiet: the sweep is no read -- a block on SSD is not promoted
		 * into DRAM (evicting live ones) to be deleted, and a value set
		 * again counts no hit, recency, admission read or second access */
		it->req.flags = KVT_F_QUIET;
		it->req.ns = ns[i];
		it->req.key = keys[i];
		it->req.user_data = (uint64_t)(uintptr_t)it | KVTD_UD_RESP;
		respd_wseq_note(srv, it);
		r = &it->req;
		if (kvt_submit(loop->q, &r, 1) != 1) {
			KVTD_COUNT(srv, resp_expiry_skipped, 1);
			respd_expire_slot_free(loop);
			free(it);
		}
	}
}

/* Loop 0 waits for the sweep until the earliest entry is due, but no
 * less than until its next tick (a tick's probes sent, or the server's
 * quiet slots held by others: a probe of its own coming back wakes it),
 * and no more than wait_ms.  It woke every KVTD_EXPIRY_TICK_MS while the
 * index held any entry, however far off. */
static int respd_tick_wait_ms(const struct kvtd_loop *loop, int wait_ms)
{
	const struct kvtd_server *srv = loop->srv;
	uint64_t next = kvtd_expiry_next_ms(srv), now_ns = kvtd_now_ns(), now_ms, w, tick_in;

	if (!next || loop->stopping || loop->store_closed ||
	    !atomic_load_explicit(&srv->ctr.resp_expiry_held, memory_order_relaxed))
		return wait_ms;
	now_ms = respd_unix_ms();
	w = next > now_ms ? next - now_ms : 0;
	tick_in = now_ns - loop->expire_tick_ns >= KVTD_EXPIRY_TICK_MS * 1000000ull ? 0
		  : (loop->expire_tick_ns + KVTD_EXPIRY_TICK_MS * 1000000ull - now_ns + 999999) /
			    1000000;
	if (w < tick_in)
		w = tick_in;
	return w < (uint64_t)wait_ms ? (int)w : wait_ms;
}

/* A sweep's probe of a hashed key ('h' and SHA-256 of a Redis key
 * longer than RESPD_KEY_INLINE; pinned, KVT_OK): its stored header alone
 * -- a RESP value whose key is longer than RESPD_KEY_INLINE and within
 * the value -- and its expiry, as respd_check_key's.  The stored key is
 * neither copied nor hashed: only RESP writes the namespace ("Expiry"),
 * so the value under 'h' + SHA-256(K) is K's, and the sweep has no key
 * of its own to compare.  Copying and hashing it cost loop 0 a malloc
 * and a SHA-256 of up to dram.max_value_bytes a probe, 64 a sweep: 64
 * keys of 7 MB set with PXs that end in the same tick held every PING
 * of loop 0 up to 1,058 ms (ASan, 2 loops; 4 ms with the PXs long). */
static void respd_expire_check_hashed(struct respd_item *it)
{
	uint8_t h[RESPD_HDR_LEN];
	uint64_t len, exp;

	it->present = true;
	it->live = it->expired = false;
	if (!kvtd_view_read(&it->req, 0, h, sizeof(h)) || memcmp(h, "KVR1", 4) != 0)
		return;
	len = (uint64_t)h[4] | (uint64_t)h[5] << 8 | (uint64_t)h[6] << 16 | (uint64_t)h[7] << 24;
	if (len <= RESPD_KEY_INLINE || it->req.length < RESPD_HDR_LEN + len)
		return;
	exp = respd_get64(h + 8);
	if (exp && respd_unix_ms() >= exp)
		it->expired = true;
	else
		it->live = true;
}

/* A sweep's probe found its key's value live: the key has one entry
 * (expiry.c), the earliest expiry it was set with; if the value has one
 * of its own (set again with a later TTL), it is the entry's now. */
static void respd_expire_again(struct kvtd_server *srv, struct respd_item *it)
{
	uint8_t h[RESPD_HDR_LEN];

	if (kvtd_view_read(&it->req, 0, h, sizeof(h)) && respd_get64(h + 8))
		(void)kvtd_expiry_add(srv, it->req.ns, &it->req.key, respd_get64(h + 8));
}

/* A sweep's probe is back: the read's check and delete. */
static void respd_expire_done(struct kvtd_loop *loop, struct respd_item *it)
{
	struct kvtd_server *srv = loop->srv;
	const struct kvt_key *key = &it->req.key;
	bool swept = false;

	if (it->req.status == KVT_OK && !loop->store_closed) {
		if (key->len >= 1 && key->bytes[0] == 's') {
			struct resp_arg k = { .p = key->bytes + 1, .len = key->len - 1 };
			(void)respd_check_key(it, &k);
		} else if (key->len == 1 + SHA256_DIGEST_LENGTH && key->bytes[0] == 'h') {
			respd_expire_check_hashed(it);
		}
		swept = respd_reap_on(loop, it);
		if (it->live) /* a later SET's: its expiry is the key's entry now */
			respd_expire_again(srv, it);
	}
	if (it->req.status == KVT_OK)
		kvt_pin_release(srv->store, it->req.pin);
	respd_expire_slot_free(loop);
	if (swept)
		KVTD_COUNT(srv, resp_expiry_swept, 1);
	else
		KVTD_COUNT(srv, resp_expiry_skipped, 1);
	free(it);
}

/* ------------------------------------------------------------------------
 * Submitting
 */

static void respd_item_init(struct respd_cmd *cmd, struct respd_item *it, uint32_t op,
			    uint32_t ns, uint32_t key_arg)
{
	memset(it, 0, sizeof(*it));
	it->cmd = cmd;
	it->key_arg = key_arg;
	it->req.op = op;
	it->req.ns = ns;
	it->req.user_data = (uint64_t)(uintptr_t)it | KVTD_UD_RESP;
	if (op != KVT_OP_CLEAR)
		respd_key(&it->req.key, &cmd->argv[key_arg]);
	if (op == KVT_OP_GET_PINNED)
		respd_wseq_note(cmd->conn->loop->srv, it);
}

/* PUT of key_arg = val_arg with the command's expiry. */
static void respd_item_put(struct respd_cmd *cmd, struct respd_item *it, uint32_t ns,
			   uint32_t key_arg, uint32_t val_arg)
{
	const struct resp_arg *k = &cmd->argv[key_arg], *v = &cmd->argv[val_arg];

	respd_item_init(cmd, it, KVT_OP_PUT, ns, key_arg);
	it->val_arg = val_arg;
	memcpy(it->hdr, "KVR1", 4);
	it->hdr[4] = (uint8_t)k->len;
	it->hdr[5] = (uint8_t)(k->len >> 8);
	it->hdr[6] = (uint8_t)(k->len >> 16);
	it->hdr[7] = (uint8_t)(k->len >> 24);
	respd_put64(it->hdr + 8, cmd->expire_ms);
	/* Stored as up to three parts -- header, key, value -- straight
	 * from the command's bytes; a value is the parts' concatenation. */
	it->iov[0] = (struct iovec){ it->hdr, RESPD_HDR_LEN };
	it->req.iov_count = 1;
	if (k->len)
		it->iov[it->req.iov_count++] = (struct iovec){ (void *)k->p, (size_t)k->len };
	if (v->len)
		it->iov[it->req.iov_count++] = (struct iovec){ (void *)v->p, (size_t)v->len };
	it->req.iov = it->iov;
}

/* Submit items [from, from+n); a refused batch is retried one by one so
 * each item gets its own status. */
static void respd_submit(struct respd_cmd *cmd, uint32_t from, uint32_t n)
{
	struct kvtd_loop *loop = cmd->conn->loop;
	struct kvt_req *reqs[64];
	uint32_t done = 0;

	cmd->pending += n;
	while (done < n) {
		uint32_t k = n - done > 64 ? 64 : n - done;
		for (uint32_t i = 0; i < k; i++) {
			struct respd_item *it = &cmd->items[from + done + i];
			reqs[i] = &it->req;
			if (it->req.op == KVT_OP_PUT) /* "Expiry" */
				respd_wseq_begin(loop->srv, it);
		}
		if (kvt_submit(loop->q, reqs, k) == (int)k) {
			done += k;
			continue;
		}
		for (uint32_t i = 0; i < k; i++) {
			int rc = kvt_submit(loop->q, &reqs[i], 1);
			if (rc != 1) {
				reqs[i]->status = rc;
				respd_wseq_end(loop->srv, &cmd->items[from + done + i]);
				cmd->pending--;
			}
		}
		done += k;
	}
}

static void respd_step(struct respd_cmd *cmd);

/*
 * Keys a loop iteration.  A command names up to 65535 keys (MGET, EXISTS,
 * DEL; MSET 32767 pairs, two requests each), and a probe or write of a
 * key in DRAM completes inline: one such command was all its keys' store
 * requests in one go on the loop, and the parse budget counted it as one
 * item -- 64 MGETs of 65535 keys an iteration on one connection.  Two
 * connections pipelining them held another client's PING 4-7 s (ASan;
 * test_hostile resp_keys).  Now a command counts its arguments in the
 * parse budget (respd_parse), and a command of more than one window goes
 * to the store a window (RESPD_PROBE_WINDOW keys) at a time, the loop's
 * windows of such commands counted in its work units with S3's
 * (loop.c kvtd_work_turn: KVTD_WORK_ITER an iteration, the first always):
 * past them the command waits for a later iteration through the aux
 * thread's mailbox, other connections served between
 * (server.work_deferred).  A command of
 * one window (a GET, a SET, an MGET of 64 keys) is not held back: the
 * parse budget bounds those.
 */
static void respd_resume(void *arg)
{
	respd_step(arg);
}

/* May cmd submit its next window of w requests now?  false: it goes on
 * in a later iteration (respd_resume). */
static bool respd_work_turn(struct respd_cmd *cmd, uint32_t w)
{
	/* (stopping: the rest is done now -- kvtd_work_turn -ESHUTDOWN) */
	return cmd->n <= RESPD_PROBE_WINDOW ||
	       kvtd_work_turn(cmd->conn->loop, cmd->tstat, w, respd_resume, cmd) != 0;
}

/*
 * A command of more than one window holds the commands pipelined behind
 * it on its connection until it is done (respd_pin_flow pauses the
 * parse; respd_finish lets it go on): its windows go to the store in
 * several loop iterations, and a GET of an MSET's last key parsed
 * meanwhile answered nil, an MGET saw a later SET of its last key, a GET
 * after a DEL the value (test_resp many_keys_order).  So does a FLUSHDB,
 * whose walk runs on the library's worker (respd_exec), and a command
 * whose writes wait for its probes (a DEL, a SET NX or XX): its deletes
 * and puts went to the store after the commands parsed meanwhile, so a
 * GET after a DEL answered the value, and a SET after it was answered +OK
 * and then deleted; a SET after a SET NX was overwritten by the NX's
 * value (attack40, test_resp probe_order).  Held until its writes are
 * back (respd_hold_release), not until its durability flush.  Redis runs
 * a connection's commands one at a time.  Commands of one window whose
 * requests do not wait for others go to the store in one batch, in
 * order, and are not held.
 */
static void respd_hold_behind(struct respd_cmd *cmd)
{
	if (cmd->windowed)
		return;
	cmd->windowed = true;
	respd_of(cmd->conn)->windowed++;
	respd_pin_flow(cmd->conn);
}

/* cmd's writes are applied (its deletes and puts back from the store,
 * its durability flush to wait for): the commands behind it go on. */
static void respd_hold_release(struct respd_cmd *cmd)
{
	if (!cmd->windowed)
		return;
	cmd->windowed = false;
	respd_of(cmd->conn)->windowed--;
	respd_pin_flow(cmd->conn);
}

static void respd_windowed(struct respd_cmd *cmd)
{
	if (cmd->n > RESPD_PROBE_WINDOW)
		respd_hold_behind(cmd);
}

/*
 * Windows.  A command of many keys holds one window of library requests
 * (RESPD_PROBE_WINDOW items, ~330 bytes each) at a time, not one a key:
 * each window's requests, once back, are looked at (respd_settle) and
 * their items reused for the next.  What a command keeps of a key past
 * its window is what its answer needs: an MGET its reply element (built
 * in order as the windows settle, its value's pin kept), a DEL a byte
 * (keyst), an EXISTS, an MSET nothing but counts.  An MGET of 65535 keys
 * held 21 MiB of requests while its windows went to the store over
 * several iterations, charged to the server's budget: one tenant's
 * pipelined MGETs on a dozen connections filled it, and another
 * tenant's AUTH was refused (test_hostile resp_tenant_items).  The
 * items are charged with the command (respd_charge) to its tenant's
 * input share too, as a native frame's (ops.c kvtd_frame_charge).
 */
/* Charge n more bytes to cmd: to --max-memory and its tenant's input
 * share (kvtd_in_charge).  false: over either (counted in mem_refused;
 * nothing charged). */
static bool respd_charge(struct respd_cmd *cmd, uint64_t n)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;

	int rc = kvtd_in_charge(srv, cmd->tstat, cmd->raw_charged, n, false);

	if (rc < 0) {
		KVTD_COUNT(srv, mem_refused, 1);
		cmd->oom_why = rc;
		return false;
	}
	cmd->raw_charged += n;
	return true;
}

/* Room for n items (at most a window) in cmd->items, charged; the items
 * there are dropped (no pin held).  false: cmd->oom. */
static bool respd_items(struct respd_cmd *cmd, uint32_t n)
{
	struct respd_item *it;

	if (n > RESPD_PROBE_WINDOW)
		n = RESPD_PROBE_WINDOW;
	if (n == 0)
		n = 1;
	if (n <= cmd->icap)
		return true;
	if (!respd_charge(cmd, (uint64_t)(n - cmd->icap) * sizeof(*it)) ||
	    !(it = calloc(n, sizeof(*it)))) {
		cmd->oom = true;
		return false;
	}
	free(cmd->items);
	cmd->items = it;
	cmd->icap = n;
	return true;
}

/* Probe phase: a pinned get per key argument [first, first + count). */
static void respd_probe(struct respd_cmd *cmd, uint32_t ns, uint32_t first, uint32_t count)
{
	if (!respd_items(cmd, count) ||
	    (cmd->kind == RK_DEL && (!respd_charge(cmd, count) ||
				     !(cmd->keyst = calloc(count, 1))))) {
		cmd->oom = true;
		respd_finish(cmd);
		return;
	}
	cmd->n = count;
	cmd->phase = RP_PROBE;
	cmd->probe_ns = ns;
	respd_of(cmd->conn)->probing++;
	/* An MGET's, EXISTS's or DEL's keys go a window at a time, each
	 * window's items made as it goes (respd_windows_next, from respd_step;
	 * the keys are arguments 1 to argc - 1) */
	if (cmd->kind == RK_MGET || cmd->kind == RK_EXISTS || cmd->kind == RK_DEL) {
		cmd->probed = cmd->settled = 0;
		if (cmd->kind == RK_MGET)
			respd_int(cmd, '*', count); /* the elements as windows settle */
		respd_windowed(cmd);
		respd_step(cmd);
		return;
	}
	for (uint32_t i = 0; i < count; i++)
		respd_item_init(cmd, &cmd->items[i], KVT_OP_GET_PINNED, ns, first + i);
	cmd->probed = count;
	cmd->pending = 1; /* held while submitting: completions come inline */
	respd_submit(cmd, 0, count);
	if (--cmd->pending == 0)
		respd_step(cmd);
}

/*
 * An MGET whose probes pin KVTD_PIN_CONN_MAX, or whose tenant's replies
 * pin their share while its connection pins nothing (respd_tenant_pins_over),
 * is answered an error: what it built and pinned is released at once
 * (counted in pin_deferred).  One MGET of 65535 big values pinned them
 * all at once, whatever the caps: DRAM no other client could use until it
 * was read.  Now an MGET pins at most the cap plus one window of values.
 */
enum { RESPD_REFUSE_CAP, RESPD_REFUSE_TENANT_PINS, RESPD_REFUSE_MEM };

static void respd_mget_refuse(struct respd_cmd *cmd, int why)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	int oom_why = cmd->oom_why;
	char m[160];

	for (uint32_t i = 0; i < cmd->icap; i++)
		if (cmd->items[i].pinned) {
			kvt_pin_release(srv->store, cmd->items[i].req.pin);
			cmd->items[i].pinned = false;
		}
	respd_reply_drop(srv, cmd);
	respd_of(cmd->conn)->probing--;
	respd_pin_flow(cmd->conn);
	if (why == RESPD_REFUSE_MEM) {
		/* respd_out says whose limit (respd_charge's oom_why) */
		cmd->oom = true;
		cmd->oom_why = oom_why;
	} else if (why == RESPD_REFUSE_TENANT_PINS) {
		respd_pins_refuse(cmd);
	} else {
		KVTD_COUNT(srv, pin_deferred, 1);
		snprintf(m, sizeof(m), "ERR MGET reply past %llu bytes (the connection's "
			 "pin cap); ask for fewer keys",
			 (unsigned long long)KVTD_PIN_CONN_MAX(srv));
		respd_simple(cmd, '-', m);
	}
	respd_finish(cmd);
}

/*
 * Write phase of SET / MSET / DEL: new items replace the probes.  A DEL
 * deletes every key it names, found or not: a probe's miss is not "no
 * record" -- an SSD index entry kept dead (doc/ssd.md "Dead entries": its
 * segment quarantined, a read that failed its checks, a failed
 * write-down) misses every read while its record may still be on disk,
 * and only the store's delete logs the tombstone that keeps recovery
 * from bringing it back.  Until 2026-12-05 a DEL deleted only the keys
 * its probes found: a DEL of such a key logged nothing, answered 0, and
 * after a kill -9 and a restart GET returned the old value (test_del_dead).
 * The count is still the probes' (Redis: the keys that were there to
 * read): a dead entry's delete removes a record but counts 0.
 */
static void respd_write(struct respd_cmd *cmd, uint32_t ns)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	uint32_t n = 0;

	for (uint32_t i = 0; i < cmd->icap; i++)
		if (cmd->items[i].pinned) {
			kvt_pin_release(srv->store, cmd->items[i].req.pin);
			cmd->items[i].pinned = false;
		}
	if (cmd->kind == RK_DEL) {
		n = cmd->n;
	} else {
		n = 2 * (cmd->kind == RK_SET ? 1 : (cmd->argc - 1) / 2);
	}
	if (!respd_items(cmd, n)) {
		respd_finish(cmd);
		return;
	}
	cmd->probe_ns = ns;
	cmd->n = n;
	cmd->phase = RP_WRITE;
	cmd->probed = cmd->settled = 0; /* a window at a time: respd_windows_next */
	cmd->count = 0;
	respd_windowed(cmd);
	respd_step(cmd);
}

/* A window of w items, made: counted and submitted.  true: some are
 * pending (the command goes on when they are back), false: all
 * completed inline. */
static bool respd_submit_window(struct respd_cmd *cmd, uint32_t w)
{
	cmd->probed += w;
	cmd->pending = 1;
	respd_submit(cmd, 0, w);
	return --cmd->pending != 0;
}

/*
 * The last window of a windowed command is back: look at each of its
 * requests, keep what the answer needs, release the rest.  Probes (MGET,
 * EXISTS, DEL): each checked (an expired value deleted as its window
 * settles, so that later windows miss it: an MGET naming one expired key
 * 65535 times submitted 65535 deletes in one go at its end, test_hostile
 * resp_keys); an MGET's element appended to its reply (its pin kept), an
 * EXISTS's live keys counted, a DEL's key marked.  Writes: a DEL's
 * deletes counted, an MSET's puts' outcomes noted.  false: the MGET was
 * refused (respd_mget_refuse: answered).
 */
static bool respd_settle(struct respd_cmd *cmd)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	uint32_t w = cmd->probed - cmd->settled;

	/* An MGET's elements of pinned values are charged with it as its
	 * reply is built (RESPD_ELEM_COST each, to --max-memory and its
	 * tenant's input share; once queued, the reply is charged its text,
	 * iovecs and pins instead: loop.c kvtd_conn_queue).  Neither was:
	 * an MGET naming one stored byte 65,535 times held ~10 MB outside
	 * the budget while built and while queued (test_hostile
	 * resp_mget_held).  Past either: refused, the connection kept. */
	if (cmd->kind == RK_MGET && cmd->phase == RP_PROBE) {
		uint32_t held = 0;
		for (uint32_t j = 0; j < w; j++)
			held += cmd->items[j].pinned;
		if (held && !respd_charge(cmd, (uint64_t)held * RESPD_ELEM_COST)) {
			respd_mget_refuse(cmd, RESPD_REFUSE_MEM);
			return false;
		}
	}
	for (uint32_t j = 0; j < w && cmd->phase == RP_PROBE; j++) {
		struct respd_item *it = &cmd->items[j];
		uint64_t vlen = respd_check(cmd, it);
		if (it->pinned)
			cmd->probe_bytes += it->req.length;
		if (cmd->kind != RK_DEL) /* a DEL deletes its keys anyway */
			respd_reap(cmd, it);
		if (cmd->kind == RK_MGET && it->live && vlen &&
		    respd_tenant_pins_over(cmd)) {
			respd_mget_refuse(cmd, RESPD_REFUSE_TENANT_PINS);
			return false;
		}
		if (cmd->kind == RK_MGET && it->live)
			respd_reply_value(cmd, it, vlen); /* keeps its pin */
		else if (cmd->kind == RK_MGET)
			respd_nil(cmd);
		if (it->live)
			cmd->count++;
		if (cmd->kind == RK_DEL)
			cmd->keyst[cmd->settled + j] = it->live ? RESPD_K_LIVE : 0;
		if (it->pinned) {
			kvt_pin_release(srv->store, it->req.pin);
			it->pinned = false;
		}
	}
	/* SET, MSET: items are (DELETE, PUT) pairs.  KVT_EXISTS (another
	 * SET's put landed after our delete) and -ECANCELED (another SET's
	 * delete, or a FLUSHDB, came while our put was in progress: delete
	 * wins) both mean a later write overlapped ours (top of the file). */
	for (uint32_t j = 0; j < w && cmd->phase == RP_WRITE; j++) {
		const struct respd_item *it = &cmd->items[j];
		int st = it->req.status;
		if (cmd->kind == RK_DEL) {
			cmd->removed |= st == KVT_OK;
			cmd->count += it->live && st == KVT_OK;
		} else if (j % 2 == 1 && (st == KVT_EXISTS || st == -ECANCELED)) {
			cmd->raced = true;
		} else if (j % 2 == 1 && st < 0 && !cmd->werr) {
			cmd->werr = st;
		}
	}
	cmd->settled = cmd->probed;
	if (cmd->kind == RK_MGET && cmd->phase == RP_PROBE &&
	    cmd->probe_bytes >= KVTD_PIN_CONN_MAX(srv) && cmd->probed < cmd->n) {
		respd_mget_refuse(cmd, RESPD_REFUSE_CAP);
		return false;
	}
	return true;
}

/* Make a window of w items from the phase's request from: a probe (a
 * pinned get) of each key; a write phase's DELETE of each key of a DEL
 * (keyst: was it live), or SET's and MSET's (DELETE, PUT) of each pair (the window is
 * even: a pair's two stay together). */
static void respd_window_make(struct respd_cmd *cmd, uint32_t from, uint32_t w)
{
	for (uint32_t j = 0; j < w; j++) {
		struct respd_item *it = &cmd->items[j];
		uint32_t i = from + j, k = 1 + 2 * (i / 2);
		if (cmd->phase == RP_PROBE) {
			respd_item_init(cmd, it, KVT_OP_GET_PINNED, cmd->probe_ns, 1 + i);
		} else if (cmd->kind == RK_DEL) {
			respd_item_init(cmd, it, KVT_OP_DELETE, cmd->probe_ns, 1 + i);
			it->live = cmd->keyst[i] & RESPD_K_LIVE;
		} else if (i % 2 == 0) {
			respd_item_init(cmd, it, KVT_OP_DELETE, cmd->probe_ns, k);
		} else {
			respd_item_put(cmd, it, cmd->probe_ns, k, k + 1);
		}
	}
}

/*
 * The windows of a phase (an MGET's, EXISTS's or DEL's probes; a SET's,
 * MSET's or DEL's writes): settle the last window back, then make and
 * submit the next.  true: the phase goes on (requests in flight, the
 * command waits for a later iteration, or it was refused); false: every
 * window settled.
 */
static bool respd_windows_next(struct respd_cmd *cmd)
{
	for (;;) {
		uint32_t from = cmd->probed, w = cmd->n - from;
		if (!respd_settle(cmd))
			return true;
		if (w == 0)
			return false;
		if (w > RESPD_PROBE_WINDOW)
			w = RESPD_PROBE_WINDOW;
		if (!respd_work_turn(cmd, w))
			return true;
		respd_window_make(cmd, from, w);
		if (respd_submit_window(cmd, w))
			return true;
	}
}

/*
 * DEL and FLUSHDB that removed something answer once their tombstones are
 * durable: a KVT_OP_FLUSH with KVT_F_DELETES after them (ops.c ops_durable
 * says why) -- a DEL whose count is 0 too, when a delete removed a dead
 * entry's record (respd_write).  count: DEL's answer.  true: the flush is
 * in flight (phase RP_SYNC).
 */
static bool respd_sync(struct respd_cmd *cmd, int64_t count)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	struct respd_item *it;

	if (!srv->cfg.ssd_bytes || !respd_items(cmd, 1))
		return false;
	respd_hold_release(cmd); /* applied: only durability is waited for */
	it = &cmd->items[0];
	cmd->n = 1;
	respd_item_init(cmd, it, KVT_OP_FLUSH, 0, 0);
	it->req.flags = KVT_F_DELETES;
	cmd->phase = RP_SYNC;
	cmd->synced = count;
	cmd->pending = 1;
	respd_submit(cmd, 0, 1);
	if (--cmd->pending == 0)
		respd_step(cmd);
	return true;
}

/*
 * A command taken back after kvt_store_close (kvtd_loops_finish: one
 * that waited in the aux thread's mailbox for a later iteration, or
 * whose requests the close canceled): the store dropped its pins and
 * freed their views, and an MGET read those of its first windows
 * (ASan: heap-use-after-free; test_resp stop_deferred).  It reads
 * nothing and is answered an error; its connection, closed next by
 * kvtd_loops_finish, is closed now, so that the replies behind it, which
 * may point into freed views, are dropped, not queued.
 */
static void respd_abandon(struct respd_cmd *cmd)
{
	for (uint32_t i = 0; i < cmd->icap; i++)
		cmd->items[i].pinned = false; /* dropped by the close */
	cmd->npin = 0; /* the reply's too */
	cmd->nseg = 0;
	cmd->tlen = 0;
	if (cmd->pin_held && cmd->conn->alt)
		respd_of(cmd->conn)->pin_held -= cmd->pin_held;
	cmd->pin_held = 0;
	if (cmd->phase == RP_PROBE) {
		respd_of(cmd->conn)->probing--;
		respd_pin_flow(cmd->conn);
	}
	kvtd_conn_close(cmd->conn, "server stopped");
	respd_simple(cmd, '-', "ERR server stopping");
	respd_finish(cmd);
}

/* All requests of the current phase are back: the next step. */
static void respd_step(struct respd_cmd *cmd)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	uint32_t ns = cmd->probe_ns;

	if (cmd->conn->loop->store_closed) {
		respd_abandon(cmd);
		return;
	}
	if (cmd->phase == RP_PROBE) {
		uint64_t vlen = 0;
		if ((cmd->kind == RK_MGET || cmd->kind == RK_EXISTS || cmd->kind == RK_DEL) &&
		    respd_windows_next(cmd))
			return;
		respd_of(cmd->conn)->probing--;
		respd_pin_flow(cmd->conn); /* reading may go on */
		if (cmd->kind == RK_GET || cmd->kind == RK_SET)
			vlen = respd_check(cmd, &cmd->items[0]);
		/* not a SET NX's: its write deletes the expired value */
		if (cmd->kind == RK_GET || (cmd->kind == RK_SET && cmd->cond == 'X'))
			respd_reap(cmd, &cmd->items[0]);
		switch (cmd->kind) {
		case RK_GET:
			if (cmd->items[0].live && vlen && respd_tenant_pins_over(cmd))
				respd_pins_refuse(cmd);
			else if (cmd->items[0].live)
				respd_reply_value(cmd, &cmd->items[0], vlen);
			else
				respd_nil(cmd);
			break;
		case RK_MGET: /* its reply built as its windows settled */
			break;
		case RK_EXISTS:
			respd_int(cmd, ':', cmd->count);
			break;
		case RK_SET:
			if ((cmd->cond == 'N' && cmd->items[0].live) ||
			    (cmd->cond == 'X' && !cmd->items[0].live)) {
				respd_nil(cmd);
				break;
			}
			respd_write(cmd, ns);
			return;
		case RK_DEL:
			respd_write(cmd, ns);
			return;
		}
		respd_finish(cmd);
		return;
	}
	if (cmd->phase == RP_SYNC) {
		if (cmd->items[0].req.status < 0) {
			char m[160];
			snprintf(m, sizeof(m), "ERR the delete may not be durable: %s",
				 kvt_strerror(cmd->items[0].req.status));
			respd_simple(cmd, '-', m);
		} else if (cmd->kind == RK_DEL) {
			respd_int(cmd, ':', cmd->synced);
		} else {
			respd_simple(cmd, '+', "OK");
		}
		respd_finish(cmd);
		return;
	}
	/* RP_WRITE */
	if (cmd->kind != RK_FLUSH && respd_windows_next(cmd))
		return;
	if (cmd->kind == RK_DEL) {
		if (cmd->removed && respd_sync(cmd, cmd->count))
			return;
		respd_int(cmd, ':', cmd->count);
		respd_finish(cmd);
		return;
	}
	if (cmd->kind == RK_FLUSH) {
		if (cmd->items[0].req.status < 0) {
			char m[160];
			snprintf(m, sizeof(m), "ERR flush failed: %s",
				 kvt_strerror(cmd->items[0].req.status));
			respd_simple(cmd, '-', m);
		} else if (!respd_sync(cmd, (int64_t)cmd->items[0].req.length + 1)) {
			respd_simple(cmd, '+', "OK");
		} else {
			return;
		}
		respd_finish(cmd);
		return;
	}
	if (cmd->werr) {
		char m[200];
		if (cmd->werr == KVT_ETOOBIG || cmd->werr == KVT_EBADLEN)
			snprintf(m, sizeof(m), "ERR value too large for kvtier (at most %" PRIu64
				 " bytes with its key)", srv->dram_max_value - RESPD_HDR_LEN);
		else
			snprintf(m, sizeof(m), "ERR %s", kvt_strerror(cmd->werr));
		respd_simple(cmd, '-', m);
	} else if (cmd->raced && cmd->cond == 'N') {
		respd_nil(cmd);
	} else {
		respd_simple(cmd, '+', "OK");
	}
	respd_finish(cmd);
}

static void respd_req_done(struct kvtd_loop *loop, struct kvt_req *r)
{
	struct respd_item *it =
		(struct respd_item *)(uintptr_t)(r->user_data & ~(uint64_t)KVTD_UD_RESP);
	struct respd_cmd *cmd = it->cmd;

	if (!cmd && r->op == KVT_OP_GET_PINNED) {
		respd_expire_done(loop, it); /* a sweep's probe */
		return;
	}
	if (!cmd) {
		free(it); /* an expiry delete (respd_reap_on) */
		return;
	}
	/* "Active expiry": loop 0 woken if it waits past this entry's expiry */
	if (r->op == KVT_OP_PUT && r->status == KVT_OK && cmd->expire_ms &&
	    kvtd_expiry_add(loop->srv, r->ns, &r->key, cmd->expire_ms) && loop->idx != 0)
		kvtd_loop_wake(&loop->srv->loops[0]);
	respd_wseq_end(loop->srv, it);
	if (r->op == KVT_OP_GET_PINNED && r->status == KVT_OK)
		it->pinned = true;
	if (r->status == KVT_OK && (int)r->tier > cmd->tier && r->tier < KVT_TIER_COUNT)
		cmd->tier = (int)r->tier;
	if (--cmd->pending == 0)
		respd_step(cmd);
}

/* ------------------------------------------------------------------------
 * Commands that need no request
 */

static bool respd_is(const struct resp_arg *a, const char *name)
{
	size_t l = strlen(name);
	return a->len == l && strncasecmp((const char *)a->p, name, l) == 0;
}

/*
 * INFO's and DBSIZE's figures, read in one pass of kvt_store_stats when
 * first asked for.  Each kvt_store_stat is a whole pass over the store's
 * statistics (every namespace's row of stats.namespaces, every quota
 * group): an admin's INFO made 22 of them, a tenant's 3, and a tenant's
 * INFO pipelined on 4 connections held another client's PING 873 ms
 * (p50, 256 rows; doc/security.md `resp_info_flood`).  A tenant's INFO
 * now reads its quota group alone (kvt_quota_stats), whatever the store
 * holds.
 */
static const char *const respd_fig_names[] = {
	"dram.used_bytes", "mem.meta_bytes", "dram.value_bytes", "dram.capacity_bytes",
	"dram.blocks", "ssd.capacity_bytes", "ssd.value_bytes", "ssd.blocks", "dram.hits",
	"dram.misses", "store.submitted", "dram.evictions", "ssd.reads", "ssd.read_misses",
	"ssd.evicted_blocks",
};
#define RESPD_FIGS (sizeof(respd_fig_names) / sizeof(respd_fig_names[0]))

struct respd_figs {
	uint64_t v[RESPD_FIGS];
	bool read;
};

static void respd_figs_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct respd_figs *fg = ctx;

	if (str || strncmp(name, "ns.", 3) == 0 || strncmp(name, "quota.", 6) == 0)
		return; /* the rows that grow: none of INFO's */
	for (size_t i = 0; i < RESPD_FIGS; i++)
		if (strcmp(name, respd_fig_names[i]) == 0) {
			fg->v[i] = value;
			return;
		}
}

static uint64_t respd_stat(struct kvtd_server *srv, struct respd_figs *fg, const char *name)
{
	if (!fg->read) {
		kvt_store_stats(srv->store, respd_figs_cb, fg);
		fg->read = true;
	}
	for (size_t i = 0; i < RESPD_FIGS; i++)
		if (strcmp(name, respd_fig_names[i]) == 0)
			return fg->v[i];
	return 0;
}

/* A tenant's quota group's figures ("quota.<g>.<field>", and its KV-events
 * drops "events.<g>.dropped"). */
static const char *const respd_quota_fields[] = { "dram_bytes", "dram_limit", "ssd_bytes",
						  "dropped" };
#define RESPD_QUOTA_FIELDS (sizeof(respd_quota_fields) / sizeof(respd_quota_fields[0]))

static void respd_quota_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	uint64_t *v = ctx;
	const char *f = strrchr(name, '.');

	if (str || !f)
		return;
	for (size_t i = 0; i < RESPD_QUOTA_FIELDS; i++)
		if (strcmp(f + 1, respd_quota_fields[i]) == 0)
			v[i] = value;
}

static void respd_info(struct respd_cmd *cmd)
{
	struct kvtd_server *srv = cmd->conn->loop->srv;
	char *b = NULL;
	size_t bl = 0;
	FILE *f = open_memstream(&b, &bl);
	const char *want = cmd->argc > 1 ? (const char *)cmd->argv[1].p : NULL;
	size_t wl = cmd->argc > 1 ? (size_t)cmd->argv[1].len : 0;
	uint64_t up = (kvtd_now_ns() - srv->start_ns) / 1000000000ull;
	uint64_t hits, misses, blocks;
	struct respd_figs fg = { .read = false };

#define SECTION(n) (!want || (wl == strlen(n) && strncasecmp(want, n, wl) == 0) || \
		    (wl == 3 && strncasecmp(want, "all", 3) == 0) || \
		    (wl == 10 && strncasecmp(want, "everything", 10) == 0) || \
		    (wl == 7 && strncasecmp(want, "default", 7) == 0))
	if (!f) {
		cmd->oom = true;
		return;
	}
	if (cmd->conn->role != PROTO_ROLE_ADMIN) {
		/* A tenant sees its own counters only (doc/security.md): the
		 * server-wide ones tell what other tenants do. */
		struct kvtd_tstat *t = kvtd_tstat_of(cmd->conn);
		uint32_t g = kvtd_tenant_group(cmd->conn->tenant, cmd->conn->tenant_len);
		uint64_t q[RESPD_QUOTA_FIELDS] = { 0 }, dram, dlim, ssd, evd, base = 0;
		char owner[PROTO_TENANT_MAX + 1];
		if (g) /* this group's statistics only: not a pass over all */
			kvt_quota_stats(srv->store, g, respd_quota_cb, q);
		dram = q[0];
		dlim = q[1];
		ssd = q[2];
		/* its KV-events drops since the group is its (STATS'
		 * tenant.events_dropped) */
		evd = g && kvtd_tenant_group_name(g, owner, &base) == cmd->conn->tenant_len &&
		      memcmp(owner, cmd->conn->tenant, cmd->conn->tenant_len) == 0 &&
		      q[3] > base ? q[3] - base : 0;
		if (SECTION("server"))
			fprintf(f, "# Server\r\nredis_version:7.0.0\r\nkvtier_version:%s\r\n"
				"redis_mode:standalone\r\nuptime_in_seconds:%" PRIu64 "\r\n\r\n",
				KVTD_VERSION, up);
		if (SECTION("memory"))
			fprintf(f, "# Memory\r\nused_memory:%" PRIu64 "\r\nmaxmemory:%" PRIu64
				"\r\nkvtier_tenant_dram_bytes:%" PRIu64
				"\r\nkvtier_tenant_ssd_bytes:%" PRIu64 "\r\n\r\n",
				dram, dlim, dram, ssd);
		if (SECTION("stats"))
			fprintf(f, "# Stats\r\nkvtier_tenant_requests:%" PRIu64
				"\r\nkvtier_tenant_net_input_bytes:%" PRIu64
				"\r\nkvtier_tenant_net_output_bytes:%" PRIu64
				"\r\nkvtier_tenant_events_dropped:%" PRIu64 "\r\n\r\n",
				t ? atomic_load(&t->requests) : 0,
				t ? atomic_load(&t->bytes_in) : 0,
				t ? atomic_load(&t->bytes_out) : 0, evd);
		fclose(f);
		respd_bulk(cmd, b, bl);
		free(b);
		return;
	}
	if (SECTION("server"))
		fprintf(f, "# Server\r\nredis_version:7.0.0\r\nkvtier_version:%s\r\n"
			"redis_mode:standalone\r\nos:Linux\r\nprocess_id:%d\r\n"
			"tcp_port:0\r\nuptime_in_seconds:%" PRIu64 "\r\nuptime_in_days:%" PRIu64
			"\r\nexecutable:kvtierd\r\n\r\n",
			KVTD_VERSION, (int)getpid(), up, up / 86400);
	if (SECTION("memory"))
		fprintf(f, "# Memory\r\nused_memory:%" PRIu64 "\r\nused_memory_dataset:%" PRIu64
			"\r\nmaxmemory:%" PRIu64 "\r\nmaxmemory_policy:%s\r\n"
			"kvtier_dram_capacity_bytes:%" PRIu64 "\r\nkvtier_dram_used_bytes:%" PRIu64
			"\r\nkvtier_dram_value_bytes:%" PRIu64 "\r\nkvtier_dram_blocks:%" PRIu64
			"\r\nkvtier_ssd_capacity_bytes:%" PRIu64 "\r\nkvtier_ssd_value_bytes:%" PRIu64
			"\r\nkvtier_ssd_blocks:%" PRIu64 "\r\n\r\n",
			respd_stat(srv, &fg, "dram.used_bytes") + respd_stat(srv, &fg, "mem.meta_bytes"),
			respd_stat(srv, &fg, "dram.value_bytes"), respd_stat(srv, &fg, "dram.capacity_bytes"),
			"kvtier-tiers", respd_stat(srv, &fg, "dram.capacity_bytes"),
			respd_stat(srv, &fg, "dram.used_bytes"), respd_stat(srv, &fg, "dram.value_bytes"),
			respd_stat(srv, &fg, "dram.blocks"), respd_stat(srv, &fg, "ssd.capacity_bytes"),
			respd_stat(srv, &fg, "ssd.value_bytes"), respd_stat(srv, &fg, "ssd.blocks"));
	hits = respd_stat(srv, &fg, "dram.hits");
	misses = respd_stat(srv, &fg, "dram.misses");
	if (SECTION("stats"))
		fprintf(f, "# Stats\r\ntotal_connections_received:%" PRIu64
			"\r\ntotal_commands_processed:%" PRIu64 "\r\ntotal_net_input_bytes:%" PRIu64
			"\r\ntotal_net_output_bytes:%" PRIu64 "\r\nevicted_keys:%" PRIu64
			"\r\nkeyspace_hits:%" PRIu64 "\r\nkeyspace_misses:%" PRIu64
			"\r\nkvtier_dram_hits:%" PRIu64 "\r\nkvtier_dram_misses:%" PRIu64
			"\r\nkvtier_dram_evictions:%" PRIu64 "\r\nkvtier_ssd_reads:%" PRIu64
			"\r\nkvtier_ssd_read_misses:%" PRIu64 "\r\nkvtier_ssd_evicted_blocks:%" PRIu64
			"\r\n\r\n",
			atomic_load(&srv->ctr.conns_accepted), respd_stat(srv, &fg, "store.submitted"),
			atomic_load(&srv->ctr.bytes_in), atomic_load(&srv->ctr.bytes_out),
			respd_stat(srv, &fg, "dram.evictions"), hits, misses, hits, misses,
			respd_stat(srv, &fg, "dram.evictions"), respd_stat(srv, &fg, "ssd.reads"),
			respd_stat(srv, &fg, "ssd.read_misses"), respd_stat(srv, &fg, "ssd.evicted_blocks"));
	blocks = respd_stat(srv, &fg, "dram.blocks");
	if (respd_stat(srv, &fg, "ssd.blocks") > blocks)
		blocks = respd_stat(srv, &fg, "ssd.blocks");
	if (SECTION("keyspace")) {
		fprintf(f, "# Keyspace\r\n");
		if (blocks)
			fprintf(f, "db0:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", blocks,
				(uint64_t)atomic_load_explicit(&srv->ctr.resp_expiry_held,
							       memory_order_relaxed));
	}
#undef SECTION
	fclose(f);
	respd_bulk(cmd, b, bl);
	free(b);
}

/* A signed 64-bit integer as Redis's string2ll takes one: an optional '-',
 * no '+', no leading zero, no blanks, no overflow. */
static bool respd_ll(const struct resp_arg *a, int64_t *out)
{
	const char *p = (const char *)a->p;
	size_t n = a->len, i = 0;
	bool neg = false;
	uint64_t v = 0;

	if (n == 1 && p[0] == '0') {
		*out = 0;
		return true;
	}
	if (n > 0 && p[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i >= n || n > 20 || p[i] < '1' || p[i] > '9')
		return false;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		uint64_t d = (uint64_t)(p[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static void respd_hello(struct respd_cmd *cmd)
{
	/* RESP3 answers with a map, RESP2 with the same pairs in an array */
	if (cmd->resp3)
		respd_int(cmd, '%', 7);
	else
		respd_int(cmd, '*', 14);
	respd_bulk_str(cmd, "server");
	respd_bulk_str(cmd, "redis");
	respd_bulk_str(cmd, "version");
	respd_bulk_str(cmd, "7.0.0");
	respd_bulk_str(cmd, "proto");
	respd_int(cmd, ':', cmd->resp3 ? 3 : 2);
	respd_bulk_str(cmd, "id");
	respd_int(cmd, ':', (int64_t)cmd->conn->id);
	respd_bulk_str(cmd, "mode");
	respd_bulk_str(cmd, "standalone");
	respd_bulk_str(cmd, "role");
	respd_bulk_str(cmd, "master");
	respd_bulk_str(cmd, "modules");
	respd_int(cmd, '*', 0);
}

/* AUTH [tenant] secret: 0 or an error reply was written. */
static int respd_auth(struct respd_cmd *cmd, const struct resp_arg *user, const struct resp_arg *pw)
{
	struct kvtd_conn *c = cmd->conn;
	struct kvtd_server *srv = c->loop->srv;
	const char *t = user ? (const char *)user->p : KVTD_DEFAULT_TENANT;
	size_t tl = user ? (size_t)user->len : strlen(KVTD_DEFAULT_TENANT);
	uint32_t role = 0;
	char msg[200];

	if (!kvtd_auth_enabled()) {
		respd_simple(cmd, '-', "ERR AUTH <password> called without any password configured "
			     "for the default user. Are you sure your configuration is correct?");
		return -1;
	}
	bool thr = kvtd_auth_throttled(c);

	if (tl == 0 || tl > PROTO_TENANT_MAX || thr ||
	    kvtd_auth_plain(t, (uint32_t)tl, pw->p, (size_t)pw->len, &role) != 0) {
		char q[PROTO_TENANT_MAX * 4 + 8], tn[PROTO_TENANT_MAX + 1];
		/* Guessing costs a connection per guess, is logged, and is
		 * throttled per peer address (doc/security.md). */
		KVTD_COUNT(srv, errors[KVTD_ERR_AUTH], 1);
		kvtd_auth_failed(c);
		snprintf(tn, sizeof(tn), "%.*s", (int)(tl <= PROTO_TENANT_MAX ? tl : 0), t);
		if (!thr) /* past the throttle, not every guess is a line */
			kvtd_log_client(KVTD_WARN, "authentication failed",
				 "conn=%llu peer=%s tenant=%s proto=resp", (unsigned long long)c->id,
				 c->peer, kvtd_log_quote(q, sizeof(q), tn));
		respd_simple(cmd, '-', "WRONGPASS invalid username-password pair or user is disabled.");
		cmd->quit = true;
		return -1;
	}
	if (!kvtd_tenant_conn_admit(c, t, tl, msg, sizeof(msg))) {
		/* its tenant's --tenant-conns; Redis says so past maxclients */
		char m[260];
		snprintf(m, sizeof(m), "ERR max number of clients reached: %s", msg);
		respd_simple(cmd, '-', m);
		cmd->quit = true;
		return -1;
	}
	memcpy(c->tenant, t, tl);
	c->tenant[tl] = 0;
	c->tenant_len = (uint32_t)tl;
	c->role = role;
	kvtd_conn_ready(c);
	c->tstat = NULL;
	respd_of(c)->ns_ok = false;
	KVTD_COUNT(srv, auth_ok, 1);
	return 0;
}

static void respd_unknown(struct respd_cmd *cmd)
{
	char m[300];
	int n = snprintf(m, sizeof(m), "ERR unknown command '%.*s', with args beginning with: ",
			 (int)(cmd->argv[0].len > 64 ? 64 : cmd->argv[0].len),
			 (const char *)cmd->argv[0].p);
	for (uint32_t i = 1; i < cmd->argc && n < 250; i++)
		n += snprintf(m + n, sizeof(m) - (size_t)n, "'%.*s' ",
			      (int)(cmd->argv[i].len > 32 ? 32 : cmd->argv[i].len),
			      (const char *)cmd->argv[i].p);
	/* Redis sanitizes: no CR/LF in an error line */
	for (char *p = m; *p; p++)
		if (*p == '\r' || *p == '\n')
			*p = ' ';
	respd_simple(cmd, '-', m);
}

/* Redis names the command as its table does, lower case ("'get'" for a
 * GET or a gEt: processCommand prints cmd->fullname), not as it was sent;
 * a client matching the message (redis-py's tests, a proxy's) sees the
 * same text here. */
static void respd_wrong_args(struct respd_cmd *cmd)
{
	char m[120], name[33];
	size_t n = cmd->argv[0].len > 32 ? 32 : cmd->argv[0].len;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = ((const unsigned char *)cmd->argv[0].p)[i];
		name[i] = (char)(ch < 0x20 ? ' ' : ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch);
	}
	name[n] = 0;
	snprintf(m, sizeof(m), "ERR wrong number of arguments for '%s' command", name);
	respd_simple(cmd, '-', m);
}

/* Parse SET's options; false (with the error written) if malformed. */
static bool respd_set_opts(struct respd_cmd *cmd)
{
	for (uint32_t i = 3; i < cmd->argc; i++) {
		const struct resp_arg *a = &cmd->argv[i];
		if (respd_is(a, "NX") || respd_is(a, "XX")) {
			if (cmd->cond) {
				respd_simple(cmd, '-', "ERR syntax error");
				return false;
			}
			cmd->cond = respd_is(a, "NX") ? 'N' : 'X';
		} else if ((respd_is(a, "EX") || respd_is(a, "PX")) && i + 1 < cmd->argc &&
			   !cmd->expire_ms) {
			const struct resp_arg *v = &cmd->argv[++i];
			uint64_t n = 0;
			if (v->len == 0 || v->len > 15)
				goto bad_int;
			for (uint64_t k = 0; k < v->len; k++) {
				if (v->p[k] < '0' || v->p[k] > '9')
					goto bad_int;
				n = n * 10 + (v->p[k] - '0');
			}
			if (n == 0) {
				respd_simple(cmd, '-', "ERR invalid expire time in 'set' command");
				return false;
			}
			cmd->expire_ms = respd_unix_ms() + (respd_is(a, "EX") ? n * 1000 : n);
		} else {
			respd_simple(cmd, '-', "ERR syntax error");
			return false;
		}
	}
	return true;
bad_int:
	respd_simple(cmd, '-', "ERR value is not an integer or out of range");
	return false;
}

/* Run a parsed command: reply now, or submit its requests. */
static void respd_exec(struct respd_cmd *cmd)
{
	struct kvtd_conn *c = cmd->conn;
	struct kvtd_server *srv = c->loop->srv;
	const struct resp_arg *a = cmd->argv;
	uint32_t argc = cmd->argc, ns;
	int rc;

	/* The protocol in force when the command arrived (a HELLO later in
	 * a pipeline does not change the replies queued before it). */
	cmd->resp3 = respd_of(c)->resp3;
	if (c->state != KVTD_CS_READY && !respd_is(a, "AUTH") && !respd_is(a, "HELLO") &&
	    !respd_is(a, "QUIT")) {
		KVTD_COUNT(srv, errors[KVTD_ERR_NOAUTH], 1);
		respd_simple(cmd, '-', "NOAUTH Authentication required.");
		goto done;
	}
	if (respd_is(a, "PING")) {
		if (argc > 2)
			respd_wrong_args(cmd);
		else if (argc == 2)
			respd_bulk_arg(cmd, &a[1]);
		else
			respd_simple(cmd, '+', "PONG");
		goto done;
	}
	if (respd_is(a, "ECHO")) {
		if (argc != 2)
			respd_wrong_args(cmd);
		else
			respd_bulk_arg(cmd, &a[1]);
		goto done;
	}
	if (respd_is(a, "QUIT")) {
		respd_simple(cmd, '+', "OK");
		cmd->quit = true;
		goto done;
	}
	if (respd_is(a, "AUTH")) {
		if (argc == 2 || argc == 3) {
			if (respd_auth(cmd, argc == 3 ? &a[1] : NULL, &a[argc - 1]) == 0)
				respd_simple(cmd, '+', "OK");
		} else {
			respd_wrong_args(cmd);
		}
		goto done;
	}
	if (respd_is(a, "HELLO")) {
		uint32_t i = 1;
		bool three = cmd->resp3;
		if (argc > 1) {
			int64_t ver = 0;
			if (!respd_ll(&a[1], &ver)) {
				respd_simple(cmd, '-', "ERR Protocol version is not an integer or out of range");
				goto done;
			}
			if (ver != 2 && ver != 3) {
				/* Redis 7's words (its helloCommand); the RESP3
				 * spec's "sorry, ..." is prose no server sends */
				respd_simple(cmd, '-', "NOPROTO unsupported protocol version");
				goto done;
			}
			i = 2;
		}
		/* The last AUTH is the one tried, once, after the options are
		 * read (as Redis does): one HELLO of 21,844 AUTHs was as many
		 * HMACs and tenant switches in one go, 50 ms of the loop
		 * (test_hostile resp_hello). */
		const struct resp_arg *user = NULL, *pw = NULL;
		for (; i < argc; i++) {
			if (respd_is(&a[i], "AUTH") && i + 2 < argc) {
				user = &a[i + 1];
				pw = &a[i + 2];
				i += 2;
			} else if (respd_is(&a[i], "SETNAME") && i + 1 < argc) {
				i++;
			} else {
				respd_simple(cmd, '-', "ERR syntax error in HELLO option");
				goto done;
			}
		}
		if (user && respd_auth(cmd, user, pw) < 0)
			goto done;
		if (argc > 1)
			three = respd_is(&a[1], "3");
		if (c->state != KVTD_CS_READY) {
			respd_simple(cmd, '-', "NOAUTH HELLO must be called with the client already "
				     "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
				     "option can be used to authenticate the client and select the "
				     "RESP protocol version at the same time");
			goto done;
		}
		/* Only a HELLO that succeeds switches the protocol, and its own
		 * reply is already in the new one (as Redis does). */
		respd_of(c)->resp3 = cmd->resp3 = three;
		respd_hello(cmd);
		goto done;
	}
	if (respd_is(a, "COMMAND")) {
		/* redis-cli asks for COMMAND DOCS at start; an empty answer
		 * makes it fall back to its built-in help. */
		if (argc >= 2 && respd_is(&a[1], "COUNT"))
			respd_int(cmd, ':', 0);
		else
			respd_int(cmd, '*', 0);
		goto done;
	}
	if (respd_is(a, "CONFIG") && argc >= 2 && respd_is(&a[1], "GET")) {
		/* redis-benchmark reads "save" and "appendonly": kvtierd has
		 * neither RDB snapshots nor an AOF. */
		char agg = cmd->resp3 ? '%' : '*';
		if (argc == 3 && respd_is(&a[2], "save")) {
			respd_int(cmd, agg, cmd->resp3 ? 1 : 2);
			respd_bulk_str(cmd, "save");
			respd_bulk_str(cmd, "");
		} else if (argc == 3 && respd_is(&a[2], "appendonly")) {
			respd_int(cmd, agg, cmd->resp3 ? 1 : 2);
			respd_bulk_str(cmd, "appendonly");
			respd_bulk_str(cmd, "no");
		} else {
			respd_int(cmd, agg, 0);
		}
		goto done;
	}
	if (respd_is(a, "CLIENT") && argc >= 2 &&
	    (respd_is(&a[1], "SETINFO") || respd_is(&a[1], "SETNAME"))) {
		/* redis-py (LMCache's redis:// client) sends CLIENT SETINFO
		 * LIB-NAME and LIB-VER on every new connection, and ignores an
		 * error: without this each connection counted two error
		 * replies.  Nothing is kept: kvtierd has no CLIENT LIST. */
		if (respd_is(&a[1], "SETNAME") ? argc != 3 : argc != 4)
			respd_simple(cmd, '-', respd_is(&a[1], "SETNAME") ?
				     "ERR wrong number of arguments for 'client|setname' command" :
				     "ERR wrong number of arguments for 'client|setinfo' command");
		else if (respd_is(&a[1], "SETINFO") && !respd_is(&a[2], "LIB-NAME") &&
			 !respd_is(&a[2], "LIB-VER"))
			respd_simple(cmd, '-', "ERR Unrecognized option");
		else
			respd_simple(cmd, '+', "OK");
		goto done;
	}
	if (respd_is(a, "SELECT")) {
		if (argc == 2 && respd_is(&a[1], "0"))
			respd_simple(cmd, '+', "OK");
		else
			respd_simple(cmd, '-', "ERR DB index is out of range");
		goto done;
	}
	if (respd_is(a, "INFO")) {
		respd_info(cmd);
		goto done;
	}
	if (respd_is(a, "DBSIZE") && c->role != PROTO_ROLE_ADMIN) {
		/* The count is server-wide (no per-tenant index yet): not a
		 * tenant's to see. */
		respd_simple(cmd, '-', "ERR DBSIZE counts every tenant's keys: admin only on kvtier");
		goto done;
	}
	if (respd_is(a, "DBSIZE")) {
		struct respd_figs fg = { .read = false };
		uint64_t d = respd_stat(srv, &fg, "dram.blocks"), s = respd_stat(srv, &fg, "ssd.blocks");
		respd_int(cmd, ':', (int64_t)(d > s ? d : s));
		goto done;
	}

	if (respd_is(a, "GET"))
		cmd->kind = argc == 2 ? RK_GET : -1;
	else if (respd_is(a, "MGET"))
		cmd->kind = argc >= 2 ? RK_MGET : -1;
	else if (respd_is(a, "EXISTS"))
		cmd->kind = argc >= 2 ? RK_EXISTS : -1;
	else if (respd_is(a, "DEL") || respd_is(a, "UNLINK"))
		cmd->kind = argc >= 2 ? RK_DEL : -1;
	else if (respd_is(a, "SET"))
		cmd->kind = argc >= 3 ? RK_SET : -1;
	else if (respd_is(a, "MSET"))
		cmd->kind = argc >= 3 && argc % 2 == 1 ? RK_MSET : -1;
	else if (respd_is(a, "FLUSHDB") || respd_is(a, "FLUSHALL"))
		cmd->kind = RK_FLUSH;
	if (cmd->kind == RK_NONE) {
		respd_unknown(cmd);
		goto done;
	}
	if (cmd->kind < 0) {
		cmd->kind = RK_NONE;
		respd_wrong_args(cmd);
		goto done;
	}
	if (cmd->kind == RK_SET && !respd_set_opts(cmd)) {
		cmd->kind = RK_NONE;
		goto done;
	}
	rc = respd_ns(c, &ns);
	if (rc < 0) {
		char m[160];
		snprintf(m, sizeof(m), "ERR cannot open the tenant's namespace: %s", kvt_strerror(rc));
		cmd->kind = RK_NONE;
		respd_simple(cmd, '-', m);
		goto done;
	}
	switch (cmd->kind) {
	case RK_GET:
	case RK_MGET:
	case RK_EXISTS:
		respd_probe(cmd, ns, 1, argc - 1);
		return;
	case RK_DEL: /* its writes wait for its probes: "Windows" */
		respd_hold_behind(cmd);
		respd_probe(cmd, ns, 1, argc - 1);
		return;
	case RK_SET:
		if (cmd->cond) {
			respd_hold_behind(cmd);
			respd_probe(cmd, ns, 1, 1);
		} else {
			respd_write(cmd, ns);
		}
		return;
	case RK_MSET:
		respd_write(cmd, ns);
		return;
	case RK_FLUSH:
		/* A walk of the whole store on the library's worker, which
		 * every tenant's DEL waits behind: at most KVTD_CLEAR_TENANT
		 * of a tenant's at once (ops.c "A CLEAR's walks"). */
		if (!(cmd->clear_slot = kvtd_clear_acquire(c))) {
			respd_simple(cmd, '-', "ERR this tenant's flushes in progress are at their "
				     "limit; retry later");
			goto done;
		}
		if (!respd_items(cmd, 1))
			goto done;
		/* The walk runs on the worker while the loop goes on: the
		 * commands pipelined behind it wait until it is answered, as
		 * behind a command of many windows.  Run beside it, a GET
		 * after FLUSHDB answered the flushed value (129 of 200) and a
		 * SET after it was answered +OK and then cleared (141 of 200;
		 * test_resp flush_order). */
		respd_hold_behind(cmd);
		cmd->n = 1;
		respd_item_init(cmd, &cmd->items[0], KVT_OP_CLEAR, ns, 0);
		cmd->items[0].req.flags = KVT_F_DEFER;
		cmd->phase = RP_WRITE;
		cmd->probed = 1;
		cmd->pending = 1;
		respd_submit(cmd, 0, 1);
		if (--cmd->pending == 0)
			respd_step(cmd);
		return;
	}
done:
	respd_finish(cmd);
}

/* ------------------------------------------------------------------------
 * Input
 */

static int respd_open(struct kvtd_conn *c)
{
	struct respd_conn *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return -ENOMEM;
	c->alt = rc;
	kvtd_auth_open_conn(c);
	return 0;
}

/*
 * A command larger than the first read buffer, still arriving on c, holds
 * its bytes (need) in its tenant's input share (KVTD_IN_TENANT_MAX, as a
 * native table: kvtd_in_hold) until it is whole.  Without,
 * one tenant's half-sent SETs on a few connections held the whole
 * --max-memory budget (each buffer grown to its command) and every other
 * tenant's next command was refused (test_hostile_http resp_share).
 * false: past the share, held by the tenant's other commands.
 */
static bool respd_share_hold(struct kvtd_conn *c, uint64_t need)
{
	return kvtd_in_hold(c, c->state == KVTD_CS_READY ? kvtd_tstat_of(c) : NULL, need);
}

/*
 * No more input (closed, refused, the server stopping): what a command
 * still arriving holds goes back now -- its bytes' place in the tenant's
 * input share (respd_share_hold), the argument scratch -- not when the
 * connection is freed (loop_reap, once a second): until then a client
 * that reconnected after a cut SET of 4 MiB had its next one refused for
 * 0.4-0.8 s (test_hostile_http resp_args_share), as native.c's
 * native_drop_input gives back a frame's table.
 */
static void respd_args_release(struct kvtd_conn *c, struct respd_conn *rc);

static void respd_drop_input(struct kvtd_conn *c)
{
	struct respd_conn *rc = respd_of(c);

	kvtd_in_release(c);
	if (rc)
		respd_args_release(c, rc);
}

static void respd_free(struct kvtd_conn *c)
{
	struct respd_conn *rc = respd_of(c);

	kvtd_in_release(c);
	if (!rc)
		return;
	/* Commands still listed were answered or their connection died;
	 * none has requests in flight (inflight is 0 when this runs). */
	while (rc->head) {
		struct respd_cmd *cmd = rc->head;
		rc->head = cmd->next;
		respd_cmd_free(c->loop->srv, cmd);
	}
	free(rc->args);
	kvtd_in_uncharge(c->loop->srv, rc->args_tstat, rc->args_charged);
	free(rc);
	c->alt = NULL;
}

/*
 * The parser's argument scratch for n arguments.  Past RESPD_ARGS_FREE
 * entries it is charged to --max-memory: "*65536" is 8 bytes that ask
 * for a 1 MiB array, kept for the connection's life, and a few thousand
 * connections asking were gigabytes outside the budget.  And to its
 * tenant's input share (kvtd_in_charge), as the command's bytes and
 * arguments are once it is whole: charged to the budget alone, 40 of one
 * tenant's connections that each sent "*65536" and one argument held all
 * of a 32 MiB budget for as long as they stayed, and another tenant's SET
 * of 1 MB was refused, its connection closed (test_hostile_http
 * resp_args_share).  0, -EDQUOT (the share), -ENOBUFS (the budget),
 * -ENOMEM.
 */
static int respd_args(struct kvtd_conn *c, struct respd_conn *rc, uint32_t n)
{
	struct kvtd_server *srv = c->loop->srv;
	uint64_t want = n > RESPD_ARGS_FREE ? (uint64_t)n * sizeof(*rc->args) : 0;
	uint64_t more = want > rc->args_charged ? want - rc->args_charged : 0;
	struct kvtd_tstat *t = rc->args_charged ? rc->args_tstat
			       : c->state == KVTD_CS_READY ? kvtd_tstat_of(c) : NULL;
	struct resp_arg *na;
	int r;

	if (more && (r = kvtd_in_charge(srv, t, rc->args_charged, more, false)) < 0)
		return r;
	na = realloc(rc->args, n * sizeof(*na));
	if (!na) {
		kvtd_in_uncharge(srv, t, more);
		return -ENOMEM;
	}
	if (more) {
		rc->args_charged = want;
		rc->args_tstat = t;
	}
	rc->args = na;
	rc->args_cap = n;
	return 0;
}

/* The scratch past RESPD_ARGS_FREE given back: a command parsed, or no
 * more input. */
static void respd_args_release(struct kvtd_conn *c, struct respd_conn *rc)
{
	if (rc->args_cap <= RESPD_ARGS_FREE)
		return;
	free(rc->args);
	rc->args = NULL;
	rc->args_cap = 0;
	kvtd_in_uncharge(c->loop->srv, rc->args_tstat, rc->args_charged);
	rc->args_charged = 0;
	rc->args_tstat = NULL;
}

/* cmd, parsed on c, at the end of its list: answered in order. */
static void respd_cmd_append(struct kvtd_conn *c, struct respd_cmd *cmd)
{
	struct respd_conn *rc = respd_of(c);

	cmd->conn = c;
	c->inflight++;
	if (rc->tail)
		rc->tail->next = cmd;
	else
		rc->head = cmd;
	rc->tail = cmd;
}

/* A command answered the error msg without running (nothing charged):
 * queued in order; quit: the connection closes after it. */
static void respd_error_cmd(struct kvtd_conn *c, const char *msg, bool quit)
{
	struct respd_cmd *cmd = calloc(1, sizeof(*cmd));

	if (!cmd) {
		if (!c->no_more_input)
			kvtd_conn_stop_input(c);
		return;
	}
	cmd->quit = quit;
	respd_cmd_append(c, cmd);
	respd_simple(cmd, '-', msg);
	respd_finish(cmd);
}

/* A fatal protocol error: the error reply, then close (as Redis does). */
static void respd_proto_error(struct kvtd_conn *c, const char *msg)
{
	char m[200];

	KVTD_COUNT(c->loop->srv, errors[KVTD_ERR_MALFORMED], 1);
	kvtd_conn_log(c, KVTD_INFO, "closing RESP connection after a protocol error", msg);
	snprintf(m, sizeof(m), "ERR %s", msg);
	respd_error_cmd(c, m, true);
	if (!c->no_more_input)
		kvtd_conn_stop_input(c);
}

/*
 * Cross-protocol scripting: a web page a browser shows can send an HTTP
 * request to any address and port the browser reaches (fetch() with
 * mode no-cors: a POST with a text/plain body goes without a preflight),
 * and every line of it is an inline command here -- "POST / HTTP/1.1",
 * "Host: ...", the headers, then the body's lines, run as commands: a
 * developer's kvtierd on 127.0.0.1 without --tenants (no AUTH) stored
 * what a page's body said (SET, FLUSHALL).  Redis closes a connection
 * whose command is POST or Host: at once, without an answer, and logs a
 * warning (securityWarningCommand, since 3.2.7); so does this, before
 * AUTH too.  Every browser request carries Host:, so one whose first line
 * is not POST is stopped at its second.  True if args[0] is one of them.
 */
static bool respd_http_line(const struct resp_arg *a0)
{
	uint8_t name[6];
	struct resp_arg d = *a0;

	if (a0->len > sizeof(name))
		return false;
	if (a0->raw_len) { /* quoted: compare what Redis would, the bytes decoded */
		if (a0->raw_len > 64)
			return false;
		{
			uint8_t raw[64];
			struct resp_arg r = *a0;
			memcpy(raw, a0->p, (size_t)a0->raw_len);
			r.p = raw;
			resp_unquote(name, &r);
		}
		d.p = name;
	}
	return respd_is(&d, "POST") || respd_is(&d, "Host:");
}

/* Parse and run the complete commands in the buffer, KVTD_PARSE_FRAMES
 * a loop iteration. */
static void respd_parse(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct respd_conn *rc = respd_of(c);
	struct resp_limits lim = respd_limits(srv);

	while (!c->dead && !c->no_more_input && !c->read_paused && c->rend > c->rstart) {
		struct resp_cmd pc;
		struct respd_cmd *cmd;
		uint8_t *base = c->rbuf + c->rstart;
		uint64_t argv_cost, held, cap;
		struct kvtd_tstat *tstat;
		int r;

		if (c->inflight >= srv->cfg.conn_inflight)
			return; /* loop.c pauses reads; settle brings us back */
		respd_pin_flow(c);
		if (c->pin_paused)
			return; /* the written hook or a probe's end brings us back */
		r = resp_parse_from(base, c->rend - c->rstart, &lim, &pc, rc->args, rc->args_cap,
				    &rc->resume);
		if (r == RESP_NEED_ARGS && c->state != KVTD_CS_READY &&
		    pc.argc > RESPD_PREAUTH_ARGC) {
			respd_proto_error(c, "NOAUTH Authentication required (too many arguments "
					  "before AUTH)");
			return;
		}
		if (r == RESP_NEED_ARGS) {
			r = respd_args(c, rc, pc.argc);
			/* Past the tenant's share: as a command still arriving
			 * (below), a connection with commands in flight waits
			 * for them, one without is refused. */
			if (r == -EDQUOT && c->inflight > 0) {
				c->tbl_want = (uint64_t)pc.argc * sizeof(*rc->args);
				kvtd_conn_flow(c);
				return;
			}
			if (r == -EDQUOT) {
				KVTD_COUNT(srv, mem_refused, 1);
				respd_proto_error(c, "the tenant's commands being received hold its "
						  "share of the server memory limit (--max-memory); "
						  "retry later");
				return;
			}
			if (r == -ENOBUFS) {
				KVTD_COUNT(srv, mem_refused, 1);
				respd_proto_error(c, "server memory limit reached (--max-memory); "
						  "retry later");
				return;
			}
			if (r < 0) {
				respd_proto_error(c, "server out of memory");
				return;
			}
			continue;
		}
		if (r == RESP_NEED_MORE) {
			if (pc.need > respd_buf_max(srv)) {
				respd_proto_error(c, "Protocol error: command too large");
				return;
			}
			/* Held to the tenant's input share: a connection with
			 * commands in flight waits for them (not read meanwhile,
			 * tbl_want), one without is refused. */
			if (pc.need > KVTD_RBUF_KEEP && !respd_share_hold(c, pc.need)) {
				if (c->inflight > 0) {
					c->tbl_want = pc.need;
					kvtd_conn_flow(c);
					return;
				}
				kvtd_in_release(c);
				KVTD_COUNT(srv, mem_refused, 1);
				respd_proto_error(c, "the tenant's commands being received hold its "
						  "share of the server memory limit (--max-memory); "
						  "retry later");
				return;
			}
			/* Room for the whole command: it is read in few calls. */
			r = kvtd_conn_rbuf_room(c, (size_t)pc.need);
			if (r == -EMSGSIZE) {
				respd_proto_error(c, "NOAUTH Authentication required (command too "
						  "large before AUTH)");
				return;
			}
			if (r < 0) {
				if (r == -ENOBUFS)
					KVTD_COUNT(srv, mem_refused, 1);
				respd_proto_error(c, "server memory limit reached (--max-memory); "
						  "retry later");
				return;
			}
			if (!c->frame_start_ns)
				c->frame_start_ns = c->loop->now_ns;
			return;
		}
		if (r < 0) {
			respd_proto_error(c, resp_strerror(r));
			return;
		}
		/* Its share of this iteration taken: the rest after the other
		 * connections' events (kvtd_conn_defer), as a native
		 * connection's frames; this command is parsed again then.
		 * ~2,600 ECHOs a 64 KiB buffer held the loop (test_hostile
		 * resp_flood).  Only whole commands count: a pipeline of 64
		 * that arrived in two reads is not cut before its last.  A
		 * command counts its arguments past the first as items, as a
		 * native frame its keys ("Keys a loop iteration"). */
		if (!kvtd_conn_parse_budget(c, pc.argc > 1 ? pc.argc - 1 : 1)) {
			kvtd_conn_defer(c);
			return;
		}
		c->frame_start_ns = 0;
		kvtd_in_release(c); /* whole: charged as a command from here */
		if (pc.argc == 0) { /* an empty inline line */
			c->rstart += pc.len;
			continue;
		}
		if (respd_http_line(&rc->args[0])) {
			/* "Cross-protocol scripting" above: no answer, closed */
			KVTD_COUNT(srv, errors[KVTD_ERR_MALFORMED], 1);
			kvtd_conn_log(c, KVTD_WARN, "closing RESP connection: an HTTP request "
				      "(possible cross-protocol scripting attack)",
				      "POST or Host: command");
			c->rstart = c->rend;
			kvtd_conn_close(c, "HTTP request on the RESP port");
			return;
		}
		/* The command's struct and argument array are charged to
		 * --max-memory with its bytes (raw_charged), and held to its
		 * tenant's input share with its items ("Windows"): a
		 * connection with commands in flight waits for them (not read
		 * meanwhile, tbl_want), one without has this command refused,
		 * as a command still arriving (respd_share_hold). */
		argv_cost = sizeof(*cmd) + (uint64_t)pc.argc * sizeof(*cmd->argv);
		tstat = c->state == KVTD_CS_READY ? kvtd_tstat_of(c) : NULL;
		held = 0;
		cap = kvtd_in_share(srv, tstat, &held);
		if (cap && held && held + argv_cost + pc.len > cap) {
			if (c->inflight > 0) {
				c->tbl_want = argv_cost + pc.len;
				kvtd_conn_flow(c);
				return;
			}
			KVTD_COUNT(srv, mem_refused, 1);
			c->rstart += pc.len;
			respd_error_cmd(c, RESPD_SHARE_ERR, false);
			continue;
		}
		if (!kvtd_mem_charge(srv, argv_cost, false)) {
			KVTD_COUNT(srv, mem_refused, 1);
			respd_proto_error(c, "server memory limit reached (--max-memory); "
					  "retry later");
			return;
		}
		cmd = calloc(1, sizeof(*cmd));
		if (!cmd || !(cmd->argv = malloc(pc.argc * sizeof(*cmd->argv)))) {
			free(cmd);
			kvtd_mem_uncharge(srv, argv_cost);
			respd_proto_error(c, "server out of memory");
			return;
		}
		/* The command's bytes become its own: a large one takes the
		 * buffer when it is all the buffer holds, others are copied. */
		if (c->rstart == 0 && pc.len == c->rend && pc.len >= RESPD_STEAL_MIN) {
			cmd->raw = kvtd_conn_rbuf_take(c, &cmd->raw_charged);
			cmd->raw_mem = cmd->raw_charged;
		} else {
			/* The copy is charged to --max-memory like the buffer. */
			if (!kvtd_mem_charge(srv, pc.len, false)) {
				free(cmd->argv);
				free(cmd);
				kvtd_mem_uncharge(srv, argv_cost);
				KVTD_COUNT(srv, mem_refused, 1);
				respd_proto_error(c, "server memory limit reached (--max-memory); "
						  "retry later");
				return;
			}
			cmd->raw_charged = cmd->raw_mem = pc.len;
			cmd->raw = malloc(pc.len ? pc.len : 1);
			if (!cmd->raw) {
				kvtd_mem_uncharge(srv, pc.len + argv_cost);
				free(cmd->argv);
				free(cmd);
				respd_proto_error(c, "server out of memory");
				return;
			}
			memcpy(cmd->raw, base, pc.len);
			c->rstart += pc.len;
		}
		for (uint32_t i = 0; i < pc.argc; i++) {
			uint8_t *at = cmd->raw + (rc->args[i].p - base);
			/* an inline argument with quotes: decoded in place, in
			 * the command's own bytes (resp.h resp_unquote) */
			if (rc->args[i].raw_len)
				resp_unquote(at, &rc->args[i]);
			cmd->argv[i].p = at;
			cmd->argv[i].len = rc->args[i].len;
			cmd->argv[i].raw_len = 0;
		}
		cmd->raw_charged += argv_cost;
		if ((cmd->tstat = tstat))
			atomic_fetch_add_explicit(&tstat->in_charged, cmd->raw_charged,
						  memory_order_relaxed);
		respd_args_release(c, rc);
		cmd->argc = pc.argc;
		cmd->start_ns = kvtd_now_ns();
		c->frames++;
		respd_cmd_append(c, cmd);
		{
			struct kvtd_tstat *t = kvtd_tstat_of(c);
			if (t) {
				atomic_fetch_add_explicit(&t->requests, 1, memory_order_relaxed);
				atomic_fetch_add_explicit(&t->bytes_in, pc.len,
							  memory_order_relaxed);
			}
		}
		respd_exec(cmd);
	}
	if (c->rstart == c->rend)
		kvtd_conn_rbuf_drained(c);
}

int kvtd_resp_setup(struct kvtd_server *srv)
{
	uint32_t id;

	/* Without tenants everyone is "default": register its namespace now,
	 * on the main thread, so no loop ever waits for the registry. */
	if (kvtd_auth_enabled())
		return 0;
	return respd_ns_of(srv, KVTD_DEFAULT_TENANT, &id, true);
}

/* ------------------------------------------------------------------------
 * The protocol table's RESP entry
 */

/* The loop's last word (past --max-conns, out of memory): an error reply,
 * then close. */
static void respd_fail(struct kvtd_conn *c, int status, const char *msg)
{
	(void)status;
	respd_proto_error(c, msg);
}

/* AUTH with a tenant name and its secret, or HELLO 3 AUTH ...: a few
 * hundred bytes; nothing larger is buffered before AUTH. */
#define RESPD_PREAUTH_BUF 4096u

const struct kvtd_proto kvtd_resp_proto = {
	.name = "resp",
	.preauth_buf = RESPD_PREAUTH_BUF,
	.open = respd_open,
	.parse = respd_parse,
	.drop_input = respd_drop_input,
	.fail = respd_fail,
	.written = respd_written,
	.req_done = respd_req_done,
	.free = respd_free,
	.tick = respd_tick,
	.tick_wait_ms = respd_tick_wait_ms,
};

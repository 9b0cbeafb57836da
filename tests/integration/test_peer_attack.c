/*
 * test_peer_attack.c - a kvtierd's repair thread (daemon/repair.c, its
 * connections through daemon/peer.c) against a hostile or broken member
 * of its pod: a fake member on a thread of this test, listed in the real
 * server's --members, that speaks enough of the native protocol (the
 * codec of lib/fmt/proto.h) to be connected to, then lies as each phase
 * scripts (doc/security.md "A hostile member").
 *
 * Usage: test_peer_attack KVTIERD PHASE [KVTIER | SHIM]
 *
 * Each phase starts a kvtierd with --tenants (alice), --members itself
 * and the fake, and puts one PLACED|FORWARD block of alice's with copies
 * 2: the server forwards it to the fake at once (doc/cluster.md
 * "Forwarded replicas"), as alice, with her secret.  Phases:
 *
 *   downgrade  the fake offers only AUTH method NONE: it cannot prove it
 *              knows alice's secret, so it must be sent nothing after
 *              HELLO (it was sent AUTH, the namespace's text, the keys and
 *              the block's bytes)
 *   table      the fake announces the codec's hard limits (a 1 GiB table)
 *              and answers with a header claiming a 1 GiB table, then
 *              streams junk: refused at the header (64 MiB were buffered)
 *   tags       answers of a tag never sent, 100 a second: refused at the
 *              first (read and skipped forever)
 *   more       answers of the right tag, each marked MORE, 10 a second:
 *              the connection given up after PEER_MORE_MAX (32) of them
 *              without a final answer (held for as long as the fake went
 *              on; then after PEER_TIMEOUT_MS, 5 s, of them)
 *   more_slow  an answer in 12 frames of MORE, one every 500 ms, then the
 *              final one: each frame in time, the whole past 5 s; the
 *              connection is kept, the block forwarded on it (it was
 *              given up 5 s after the question, PEER_TIMEOUT_MS being
 *              over every frame of one answer)
 *   more_stall 2 frames of MORE, then nothing: given up PEER_TIMEOUT_MS
 *              after the last
 *   slow_read  the forwarded block is 16 MiB; the fake answers the
 *              namespace's registration and the EXISTS (a miss), then
 *              reads the PUT 64 KiB every 100 ms (a receive buffer of
 *              128 KiB): the sender's socket was writable again within
 *              each PEER_TIMEOUT_MS, its only clock, so the fake set the
 *              pace of the send (466 KiB/s here: not given up in 20 s, the
 *              value pinned throughout); now each PEER_SEND_WINDOW (5 MiB)
 *              of a frame, or its rest, must go within PEER_TIMEOUT_MS:
 *              given up at ~7 s
 *   tls_pod    no fake: two real members with --tls-cert and --tls-ca, the
 *              block forwarded to the other over TLS (peer.c spoke plain
 *              TCP to the TLS port: nothing forwarded or healed), the
 *              members requiring client certificates of each other
 *   tls_drain  no fake (test_peer_attack KVTIERD tls_drain KVTIER): two
 *              real members with --tls-verify-client and a plain kvtierd;
 *              kvtier drain and stat through TLS (a client certificate),
 *              every block of the drained member then on the other, and
 *              the wrong modes said as such: no --tls to a TLS server, --tls
 *              to a plain one, no client certificate, an unknown CA
 *   tls_eku    one member whose certificate is serverAuth alone, with
 *              --tls-verify-client: the others would refuse it as a client
 *              (nothing forwarded), so its log warns at start
 *   poll_stall a static pod of three, two real members and the fake,
 *              which never answers the drain poll's STATS: forwards from
 *              one real member to the other each arrive within 2 s (the
 *              poll ran on the repair thread: each waited up to 5 s)
 *   poll_wide  a static pod of three, the real member, the fake holding
 *              the poll's STATS and, listed after it, a second address of
 *              the fake answering "left": the member drops it within 2 s
 *              (asked one after another, after the first one's 5 s)
 *   poll_stop  SIGTERM to the member while the fake holds its poll's
 *              STATS: it exits within 1.5 s (it waited the poll out, 5 s)
 *   poll_many  a static pod of 42: the real member, 40 addresses that
 *              refuse, and after them the fake answering "left": dropped
 *              within 4 s (each round asked the first 32 idle members
 *              only: one listed after them was never asked)
 *   fwd_batch  a static pod of ten: the forwarding member, the fake
 *              (slow_read's reader, closing after 3 s), 7 plain fakes
 *              and a real member last in the list; an 8 MiB block of
 *              copies 8 placed on the fake and the real member: the real
 *              member holds it within 2 s (a pass started its workers 8
 *              at a time and joined each 8: the last member waited for
 *              the slow one, 3 s here)
 *   fwd_lane   a static pod of three, the fake reading a 16 MiB forward
 *              slowly: two 4 KiB forwards put after it reach the healthy
 *              member within 4 times the same forward alone (measured
 *              first) and a second, the 16 MiB one within twice its own
 *              and a second (a forward pass waited for its slowest
 *              member: 7,160 ms); the fake's lane, at 4 KiB
 *              (KVTD_TEST_LANE_BYTES), drops the second's copy, counted
 *   fwd_heal   the same pod, a healing pass sending the fake a 16 MiB
 *              block: a 4 KiB forward put meanwhile reaches the healthy
 *              member within 1 s (forwards went to the lanes between
 *              passes: ~7 s, the fake given up)
 *   fwd_busy   the server and the fake, which refuses the first two PUT
 *              items KVT_EBUSY (its reservation full): the forward is
 *              stored there within the delays twice and 10 times a
 *              forward stored at once, sent again twice (the refused
 *              copy was lost until the member list changed); a copy
 *              always refused is given up after 3 more sends, counted;
 *              a stop during the lane's 400 ms delay stops within
 *              a plain server's stop, each read from its own log
 *              ("stopping" to "stopped"), and 190 ms (it waited the delay
 *              out)
 *   fwd_busy_hol the same, a copy always refused: a copy of another key
 *              forwarded 10 ms after its third refusal is stored within
 *              200 ms, before the refused copy is due again (400 ms; the
 *              lane slept its delay out first: 381-390 ms)
 *   heal_busy  the server and fwd_busy's fake, a healing pass's copy
 *              refused busy: handed to the fake's lane once, sent again
 *              once, stored once, by no second pass (counted as an error
 *              and lost until the member list changed)
 *   heal_cut   a static pod of four, a pass sending the slow_read fake a
 *              16 MiB block when another member leaves: the block the
 *              new list places on the healthy member is there before the
 *              slow fake is given up, the pass cut short (repair.cut, no
 *              repair.errors; it went on until the fake was given up,
 *              and the new list's pass waited for it)
 *   frame_busy the same, the fake refusing the first two PUT frames
 *              KVT_EBUSY as a whole (the request's op, no items): the
 *              forward stored within fwd_busy's bound, sent again twice,
 *              no error
 *              (the answer was read as one of no items: lost, uncounted)
 *   busy_dup   heal_busy's server, the fake answering the pass's PUT with
 *              its one item refused busy in 30 frames of MORE, then the
 *              whole frame refused: the copy handed to the lane once,
 *              stored once (each answer handed it again: 31 copies queued
 *              and sent to that member, unpaced)
 *   heal_pace  the same, --repair-rate and --repair-idle-rate 1 MiB/s, a
 *              pass's two blocks of 1 MiB, the first refused busy once:
 *              the lane sends it again no sooner than half the pass's own
 *              gap between the two after the second (it was unpaced:
 *              ~100 ms)
 *   lane_reuse the server and a fake storing every copy: 4 forwards, a
 *              batch each, come on one connection of the lane (each batch
 *              opened its own: a handshake each), closed once idle
 *              (KVTD_TEST_LANE_IDLE_MS), the next forward on a new one
 *   lane_list  a static pod of three, the fake and an address of it that
 *              leaves when told: 2 batches on one connection, the list
 *              changes, the next 2 on a new one (closed at the change)
 *   lane_busy  two real members, --tenant-conns 1, this test holding
 *              alice's one connection to s[1]: the lane's connection for
 *              alice's forward refused busy; once let go, the copy
 *              reaches s[1], sent again as a copy refused busy (it was
 *              lost: an error, until the list changed), counted; held
 *              throughout, given up after 3 more refusals, counted
 *   lane_busy_tenant  lane_busy's pod: one batch of alice's copy and
 *              bob's (s[1] stopped while the lane sends bob's first),
 *              alice's connection refused busy: bob's copy is stored,
 *              alice's given up alone (bob's was marked busy with it)
 *   pace_cut   heal_cut's pod, --repair-rate 1K: a pass waiting for the
 *              rate to send its second 1 MiB (~1,000 s) when a member
 *              leaves ends within 30 s, cut (the rate's wait looked at
 *              the stop alone)
 *   lane_pace  two real members and fwd_busy's fake, --repair-rate 1K: a
 *              pass's 1 MiB copy the fake refused busy, its lane waiting
 *              for the rate (~1,000 s); a 4 KiB forward for s[1] is
 *              there within 30 s (the lane waited holding the bucket's
 *              lock, which the repair thread takes between passes: every
 *              forward, and the next pass, waited with it)
 *   pass_busy  lane_busy's pod: a healing pass's connection refused busy
 *              (alice's --tenant-conns held): no repair.errors, no "cannot
 *              reach a member", counted in repair.pass_conn_busy; the pass
 *              run again copies the block once the slot is free (it was
 *              an error, logged as a member out of reach)
 *   pass_busy_tenant  pass_busy with bob's block too: copied while
 *              alice's slot is held (the pass gave the member up at
 *              alice's refusal: bob's copy waited on her, pass after pass)
 *   lane_stale the server and a fake storing every copy, which closes the
 *              lane's kept connection as the next batch's EXISTS comes:
 *              the batch sent again on a new connection, once, stored,
 *              no error (it was lost: an error, until a list change)
 *   lane_stale_ns  lane_stale, the next batch in another namespace of
 *              the same tenant: the fake closes at its NS_REGISTER; sent
 *              again all the same (it was "namespace refused", an error,
 *              the copy lost)
 *   lane_mem   the same fake: a lane's kept connection charged to
 *              --max-memory (server.mem_used 64 KiB and more above its
 *              figure once closed; it was the same)
 *   lane_keep  the same fake, --max-memory 1M, this test holding all of
 *              the budget but 40 KiB (a PUT's table declared, not sent):
 *              a forward stored, its connection closed after the batch,
 *              not kept (repair.lane_keep_refused; kept until idle)
 *   pass_busy_cap  a member at its --max-conns (this test holds them),
 *              ten tenants' blocks due there: each pass makes 4 refused
 *              connects to it at most (REPAIR_PASS_BUSY_MAX), not one a
 *              tenant; every block copied once it has room
 *   drain_busy (test_peer_attack KVTIERD drain_busy KVTIER) pass_busy's
 *              pod, alice's slot at s[1] held throughout, s[0] drained
 *              with the CLI: every hand-over refused busy, the drain ends
 *              with her block left behind -- repair.drains_incomplete 1,
 *              kvtier drain exit 1 saying so, kvtier stat's repair line
 *              (it said "drained", exit 0, every counter 0: a WARN in the
 *              log alone); a second drain the same, counted again (it
 *              said "drained" at once: the first one's state 3 seen
 *              before the repair thread took the request)
 *   drain_exit_late (test_peer_attack KVTIERD drain_exit_late KVTIER)
 *              the same pod, kvtier drain --exit: the first hand-over
 *              good, alice's slots at s[1] held once s[0] left the list
 *              and a block of hers put there -- the last hand-over
 *              refused, kvtier drain --exit exit 1 saying so (it said
 *              "drained", exit 0: the server stopped in the instant
 *              after counting it)
 *   drain_pass (test_peer_attack KVTIERD drain_pass KVTIER) the same
 *              pod, s[0]'s first pass copying 6 blocks to s[1] slowly
 *              (--repair-rate) when kvtier drain is asked: the pass copies
 *              them all, the drain none, and kvtier drain, the log's
 *              "drain: done" and repair.drain_copied say 0 (the CLI said
 *              the pass's copies after the DRAIN's answer)
 *   drain_item_busy (test_peer_attack KVTIERD drain_item_busy KVTIER)
 *              the server and fwd_busy's fake, a block the fake always
 *              refuses busy (an item's KVT_EBUSY), the server drained:
 *              kvtier drain exit 1, blocks left behind (it said
 *              "drained", exit 0: the copy handed to the lane, as a
 *              healing pass's, lost with the process under --exit)
 *   tls_lane   two real TLS members, s[0] reaching s[1] through a
 *              relaying proxy: the lane's kept TLS connection shut as the
 *              next batch's question waits at the proxy -- the batch sent
 *              again once on a new connection, stored, no error
 *              (repair.lane_resent); the kept TLS connection charged its
 *              read buffer and TLS state to --max-memory, given back at
 *              its idle close
 *   lane_bench a measurement, no test runs it (bench/RESULTS.md "Session 45:
 *              a lane's connection"): lane batches/s with a connection a
 *              batch and kept, TLS off and on
 *   dns_held   (test_peer_attack KVTIERD dns_held SHIM) a member named by
 *              a host whose lookup holds 10 s (the LD_PRELOAD shim
 *              shim_sync.c): a forward to it given up within 2 s (the
 *              lookup was outside the connect timeout: 10 s); a second
 *              forward, given up too, joins the held lookup (one in
 *              flight per name: a helper an ask held 4); and SIGTERM
 *              while a lookup is held exits within 600 ms (10 s)
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "placement.h"
#include "proxy.h"
#include "proto.h"
#include "server.h"
#include "t.h"

#define SECRET_ALICE "secret-of-alice-0123456789"
#define SECRET_ROOT "secret-of-root-0123456789abc"
#define SECRET_BOB "secret-of-bob-0123456789abcd"
#define VLEN 4096u
#define JUNK_MAX (64u << 20) /* the table phase's junk, at most */
#define SLOW_VLEN (16u << 20) /* the slow_read phase's block */
#define SLOW_STEP (64u << 10) /* ... read this much every SLOW_EVERY_MS */
#define SLOW_EVERY_MS 100
#define BATCH_TRICKLE_MS 3000 /* fwd_batch: the slow member reads this long */
#define BATCH_VLEN (8u << 20) /* ... its block: past the socket buffers' */

static const char *bin;
static uint32_t vlen = VLEN; /* the forwarded block's bytes */
static uint64_t fwd_anchor = 1; /* ... its anchor */
static uint32_t fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD; /* ... its flags */
static const char *cli; /* tls_drain: the kvtier CLI */
static const char *shim; /* dns_held: tests/libshim_sync.so */
static const char *pod_tag = ""; /* pod_start's members' directories: m0TAG, m1TAG */
static char base[512];
static struct tsrv srv;

static const struct kvt_ns_desc desc = {
	.model = "peer-attack-model", .dtype = "bf16", .layout = "vllm-flash-nhd",
	.block_tokens = 16, .tp_size = 1, .pp_size = 1,
};

enum { M_DOWNGRADE, M_TABLE, M_TAGS, M_MORE, M_MORE_SLOW, M_MORE_STALL, M_SLOW_READ,
       M_POLL_STALL, M_POLL_WIDE, M_POLL_STOP, M_FWD_BATCH, M_FWD_BUSY, M_FRAME_BUSY,
       M_HEAL_CUT, M_BUSY_DUP, M_HEAL_PACE, M_LANE };
/* What a listener of the fake plays: the phase's member (F.mode), the
 * member that left (poll_wide), a plain member answering everything
 * (fwd_batch) */
enum { ROLE_MAIN, ROLE_LEFT, ROLE_PLAIN };
#define PLAIN_MAX 7 /* fwd_batch: plain members */

#define CONN_MAX 64 /* the poll phases: connections served at once, each on a thread */

/* The fake member. */
static struct {
	int lfd;
	int mode;
	pthread_t th;
	_Atomic bool stop, lied;
	_Atomic unsigned accepts, hellos, after_hello; /* frames after a HELLO */
	_Atomic unsigned played;     /* connections past HELLO, ended */
	_Atomic uint64_t put_bytes;  /* data sections received */
	_Atomic uint64_t sent;       /* lies sent (bytes or frames) */
	_Atomic uint64_t lie_ns;     /* when the lie went out */
	_Atomic uint64_t closed_ns;  /* when the server closed the lying connection */
	_Atomic int send_errno;
	_Atomic uint64_t after_lie;  /* more_slow: data bytes on the lying connection after */
	_Atomic unsigned stats_held; /* the poll phases: STATS unanswered, connection open */
	_Atomic uint64_t held_ns;    /* ... when the first was held */
	_Atomic unsigned left_asked; /* poll_wide: STATS answered "left" (2) */
	int lfd_left;                /* poll_wide: the member that left (-1: none) */
	int lfd_plain[PLAIN_MAX];    /* fwd_batch: plain members */
	unsigned plain_n;
	pthread_t conn_th[CONN_MAX]; /* the poll phases: the connections' threads */
	unsigned conn_n;
	_Atomic unsigned busy_refused, busy_ok; /* fwd_busy: PUT items refused, stored */
	_Atomic uint64_t busy_ok_ns;            /* ... when the first was stored */
	_Atomic unsigned busy_ok_refused;       /* ... busy_refused then */
	_Atomic uint64_t busy_refused_ns;       /* ... when the last was refused */
	_Atomic bool leave;          /* heal_cut: the member that leaves says so now */
	_Atomic uint64_t left_ns;    /* ... when it first did */
	_Atomic bool dup_done;       /* busy_dup: the first PUT answered */
	/* heal_pace: when "pace-a" was refused, "pace-b" stored, "pace-a" stored */
	_Atomic uint64_t pace_a_ns, pace_b_ns, pace_a2_ns;
	/* lane_reuse: connections that carried an EXISTS or a PUT (a
	 * lane's, not the poll's STATS), and of them those the server closed */
	_Atomic unsigned data_conns, data_closed;
	_Atomic uint64_t data_closed_ns; /* ... when the last was */
	_Atomic bool drop_exists;    /* lane_stale: close at the next EXISTS, unanswered */
	_Atomic unsigned dropped;    /* ... connections so closed */
	_Atomic bool drop_register;  /* lane_stale_ns: close at the next NS_REGISTER */
} F = { .lfd = -1, .lfd_left = -1 };

/* Each connection on a thread of its own (the poll phases, fwd_batch). */
static bool fk_threaded(void);

/* The phases whose fake holds the poll's STATS, each connection on a
 * thread of its own (the forwards' beside the poll's). */
static bool fk_polls(void)
{
	return F.mode == M_POLL_STALL || F.mode == M_POLL_WIDE || F.mode == M_POLL_STOP;
}

static bool fk_write(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		ssize_t w;
		if (atomic_load(&F.stop))
			return false;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w <= 0) {
			atomic_store(&F.send_errno, errno);
			return false;
		}
		b += w;
		n -= (size_t)w;
	}
	return true;
}

/* Has the server closed fd (EOF or reset)?  Waits up to ms. */
static bool fk_closed(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN | POLLRDHUP };
	uint8_t sink[4096];
	ssize_t r;

	if (poll(&pf, 1, ms) <= 0)
		return false;
	r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

static bool fk_send(int fd, struct proto_frame *f, const struct proto_item *it, uint32_t n,
		    const struct proto_limits *lim)
{
	uint8_t *buf;
	int64_t l = kc_encode(f, it, n, lim, 0, &buf);
	bool ok;

	if (l < 0)
		T_FAIL("fake: cannot encode %s: %s", proto_op_name(f->op), kvt_strerror((int)l));
	ok = fk_write(fd, buf, (size_t)l);
	free(buf);
	return ok;
}

/* HELLO: NONE only (downgrade), else HMAC; the codec's hard limits in the
 * table phase; a zero nonce (fk_auth's proof uses it). */
static bool fk_hello(int fd, const struct proto_frame *req)
{
	struct proto_frame f;

	kc_fake_answer(&f, req);
	f.hello.version = req->hello.max_version < 2 ? req->hello.max_version : 2;
	f.hello.min_version = 1;
	f.hello.max_version = 2;
	f.hello.auth_count = 1;
	f.hello.auth[0] = F.mode == M_DOWNGRADE ? PROTO_AUTH_NONE : PROTO_AUTH_HMAC_SHA256;
	proto_limits_default(&f.hello.limits);
	if (F.mode == M_TABLE) {
		f.hello.limits.frame_max = PROTO_HARD_FRAME_MAX;
		f.hello.limits.table_max = PROTO_HARD_TABLE_MAX;
	}
	f.hello.name = "fake-member";
	f.hello.name_len = 11;
	return fk_send(fd, &f, NULL, 0, NULL);
}

/* AUTH: proves alice's secret (or nothing, with NONE). */
static bool fk_auth(int fd, const struct proto_frame *req)
{
	static const uint8_t snonce[PROTO_NONCE_LEN];
	struct proto_frame f;

	kc_fake_answer(&f, req);
	if (req->auth.method == PROTO_AUTH_HMAC_SHA256)
		T_OK(proto_auth_proof(PROTO_PROOF_SERVER, SECRET_ALICE, strlen(SECRET_ALICE),
				      snonce, req->auth.nonce, req->auth.tenant,
				      req->auth.tenant_len, f.auth.proof));
	return fk_send(fd, &f, NULL, 0, NULL);
}

/* A well-formed answer to req (NS_REGISTER: a digest; EXISTS: a miss;
 * PUT: stored), with flags and tag as given. */
static bool fk_answer(int fd, const struct proto_frame *req, uint32_t flags, uint64_t tag)
{
	static const uint8_t digest[PROTO_DIGEST_LEN] = { 0x5a, 0x5a, 0x5a };
	struct proto_frame f;
	struct proto_item it[1];

	kc_fake_answer(&f, req);
	f.flags |= flags;
	f.tag = tag;
	memset(it, 0, sizeof(it));
	it[0].status = req->op == PROTO_OP_EXISTS ? KVT_MISS : KVT_OK;
	if (req->op == PROTO_OP_NS_REGISTER) {
		struct proto_iter iter;
		struct proto_item in;
		proto_iter_init(&iter, req, NULL, NULL, 0);
		T_ASSERT(proto_iter_next(&iter, &in) == 1);
		it[0].text = in.text; /* its own text back, any digest */
		it[0].text_len = in.text_len;
		it[0].digest = digest;
	}
	return fk_send(fd, &f, it, 1, NULL);
}

/* The phases whose fake refuses PUTs busy (fwd_busy, fwd_busy_hol,
 * heal_busy: each item; frame_busy: the whole frame). */
static bool fk_busy(void)
{
	return F.mode == M_FWD_BUSY || F.mode == M_FRAME_BUSY || F.mode == M_BUSY_DUP ||
	       F.mode == M_HEAL_PACE || F.mode == M_LANE;
}

/* The busy phases' answer to an EXISTS or a PUT.  An EXISTS: a miss for
 * each of its items (fk_answer answers the first alone: a lane's batch
 * of two sent only one).  A PUT (fwd_busy): its items answered KVT_EBUSY
 * (a receiver's reservation full), the first BUSY_REFUSE of them and
 * every one of BUSY_ALWAYS...; the others stored; frame_busy: the first
 * BUSY_REFUSE frames answered KVT_EBUSY as a whole (doc/protocol.md,
 * level 2: the request's op, a negative status, no items). */
#define BUSY_REFUSE 2u
#define BUSY_ALWAYS "busy-always"
#define DUP_FRAMES 30u /* busy_dup: under peer.c's PEER_MORE_MAX (32) */
static bool fk_busy_answer(int fd, const struct proto_frame *req)
{
	bool put = req->op == PROTO_OP_PUT;
	struct proto_item it[16], in;
	struct proto_iter iter;
	struct proto_frame f;
	uint32_t n = 0;

	kc_fake_answer(&f, req);
	if (put && F.mode == M_BUSY_DUP && atomic_exchange(&F.dup_done, true) == false) {
		/* busy_dup: the first PUT's first item refused busy DUP_FRAMES
		 * times, each in a frame of MORE (PEER_MORE_MAX), then a final
		 * answer refusing the whole frame busy */
		memset(it, 0, sizeof(it));
		it[0].status = KVT_EBUSY;
		atomic_store(&F.busy_refused_ns, tsrv_now_ns());
		for (unsigned j = 0; j < DUP_FRAMES; j++) {
			f.flags |= PROTO_F_MORE;
			atomic_fetch_add(&F.busy_refused, 1);
			if (!fk_send(fd, &f, it, 1, NULL))
				return false;
		}
		f.flags &= ~PROTO_F_MORE;
		f.status = KVT_EBUSY;
		atomic_fetch_add(&F.busy_refused, 1);
		return fk_send(fd, &f, NULL, 0, NULL);
	}
	if (put && F.mode == M_FRAME_BUSY && atomic_load(&F.busy_refused) < BUSY_REFUSE) {
		f.status = KVT_EBUSY;
		atomic_store(&F.busy_refused_ns, tsrv_now_ns());
		atomic_fetch_add(&F.busy_refused, 1);
		return fk_send(fd, &f, NULL, 0, NULL);
	}
	proto_iter_init(&iter, req, NULL, NULL, 0);
	while (n < 16 && proto_iter_next(&iter, &in) == 1) {
		bool always = in.key.len >= strlen(BUSY_ALWAYS) && /* (a prefix) */
			      memcmp(in.key.bytes, BUSY_ALWAYS, strlen(BUSY_ALWAYS)) == 0;
		memset(&it[n], 0, sizeof(it[n]));
		it[n].index = n; /* (the encoder refuses a repeated index) */
		if (!put) {
			it[n].status = KVT_MISS;
		} else if (F.mode == M_HEAL_PACE) {
			/* "pace-a" refused busy once, the others stored */
			bool a = in.key.len == 6 && memcmp(in.key.bytes, "pace-a", 6) == 0;
			uint64_t zero = 0;
			it[n].status = a && !atomic_load(&F.pace_a_ns) ? KVT_EBUSY : KVT_OK;
			atomic_compare_exchange_strong(a ? (it[n].status == KVT_EBUSY ? &F.pace_a_ns
										    : &F.pace_a2_ns)
							 : &F.pace_b_ns,
						       &zero, tsrv_now_ns());
		} else if (always ||
			   (F.mode != M_LANE && atomic_load(&F.busy_refused) < BUSY_REFUSE)) {
			it[n].status = KVT_EBUSY;
			atomic_store(&F.busy_refused_ns, tsrv_now_ns());
			atomic_fetch_add(&F.busy_refused, 1);
		} else {
			uint64_t zero = 0;
			it[n].status = KVT_OK;
			if (atomic_compare_exchange_strong(&F.busy_ok_ns, &zero, tsrv_now_ns()))
				atomic_store(&F.busy_ok_refused, atomic_load(&F.busy_refused));
			atomic_fetch_add(&F.busy_ok, 1);
		}
		n++;
	}
	return fk_send(fd, &f, it, n, NULL);
}

/* The table phase's lie: an answer to req whose header claims a table of
 * 1 GiB, then junk until the server closes or JUNK_MAX went out. */
static void fk_big_table(int fd, const struct proto_frame *req)
{
	static uint8_t junk[1 << 16];
	uint8_t h[PROTO_HDR_LEN];
	struct proto_frame f;

	kc_fake_answer(&f, req);
	f.item_count = 1;
	f.table_len = PROTO_HARD_TABLE_MAX;
	kc_raw_frame(h, &f, NULL);
	memset(junk, 0xa5, sizeof(junk));
	atomic_store(&F.lie_ns, tsrv_now_ns());
	if (!fk_write(fd, h, sizeof(h)))
		return;
	while (atomic_load(&F.sent) < JUNK_MAX && fk_write(fd, junk, sizeof(junk)))
		atomic_fetch_add(&F.sent, sizeof(junk));
}

/* The tags and more phases' lies: answers every ms until the server
 * closes (or 12 s). */
static void fk_flood(int fd, const struct proto_frame *req)
{
	uint64_t end = tsrv_now_ns() + 12000000000ull;
	bool more = F.mode == M_MORE;

	atomic_store(&F.lie_ns, tsrv_now_ns());
	while (tsrv_now_ns() < end && !atomic_load(&F.stop)) {
		if (!fk_answer(fd, req, more ? PROTO_F_MORE : 0, more ? req->tag : req->tag + 1000))
			return;
		atomic_fetch_add(&F.sent, 1);
		if (fk_closed(fd, more ? 100 : 10))
			return;
	}
}

/* The more_slow and more_stall phases: n frames of MORE of req's tag,
 * every_ms apart (lie_ns: when the last went out), then (final) the final
 * answer.  false if the server closed meanwhile. */
static bool fk_more(int fd, const struct proto_frame *req, unsigned n, unsigned every_ms,
		    bool final)
{
	for (unsigned i = 0; i < n; i++) {
		if (i && fk_closed(fd, (int)every_ms))
			return false;
		if (!fk_answer(fd, req, PROTO_F_MORE, req->tag))
			return false;
		atomic_fetch_add(&F.sent, 1);
		atomic_store(&F.lie_ns, tsrv_now_ns());
	}
	if (!final)
		return true;
	if (fk_closed(fd, (int)every_ms))
		return false;
	return fk_answer(fd, req, 0, req->tag);
}

/* The slow_read phase: read what the server sends SLOW_STEP bytes every
 * SLOW_EVERY_MS (F.sent: bytes read), until it closes or ms pass. */
static void fk_trickle(int fd, uint64_t ms)
{
	static uint8_t sink[SLOW_STEP];
	uint64_t end = tsrv_now_ns() + ms * 1000000ull;

	atomic_store(&F.lie_ns, tsrv_now_ns());
	while (tsrv_now_ns() < end && !atomic_load(&F.stop)) {
		ssize_t r;
		tsrv_sleep_ms(SLOW_EVERY_MS);
		r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return;
		if (r > 0)
			atomic_fetch_add(&F.sent, (uint64_t)r);
	}
}

/* STATS (the static pod's poll: has the member left?): not draining, or
 * left (drain_state 2). */
static bool fk_stats(int fd, const struct proto_frame *req, bool left)
{
	struct proto_frame f;
	struct proto_item it = { .name = "repair.drain_state", .name_len = 18,
				 .kind = PROTO_STAT_NUM, .value = left ? 2 : 0 };

	kc_fake_answer(&f, req);
	return fk_send(fd, &f, &it, 1, NULL);
}

/* One connection from the server (to the member that left, in
 * poll_wide: left).  The first one to ask something else than STATS after
 * AUTH (the forward's: NS_REGISTER) is the one the phase lies on and
 * times. */
static void fk_serve(int fd, int role)
{
	size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	bool hello = false, lying = false, slow = false, data = false;

	T_ASSERT(buf);
	for (;;) {
		struct proto_frame f;
		int rc = kc_fake_request(fd, &buf, &cap, &f, &F.stop);
		if (rc < 0)
			T_FAIL("fake: the server sent a frame the codec refuses: %s",
			       kvt_strerror(rc));
		if (rc == 0)
			break;
		atomic_fetch_add(&F.put_bytes, f.data_len);
		if (slow)
			atomic_fetch_add(&F.after_lie, f.data_len);
		if (hello)
			atomic_fetch_add(&F.after_hello, 1);
		if (!data && (f.op == PROTO_OP_EXISTS || f.op == PROTO_OP_PUT)) {
			data = true;
			atomic_fetch_add(&F.data_conns, 1);
		}
		if (f.op == PROTO_OP_HELLO) {
			hello = true;
			atomic_fetch_add(&F.hellos, 1);
			if (!fk_hello(fd, &f))
				break;
		} else if (f.op == PROTO_OP_AUTH) {
			if (!fk_auth(fd, &f))
				break;
		} else if (f.op == PROTO_OP_STATS && role == ROLE_LEFT) {
			bool left = (F.mode != M_HEAL_CUT && F.mode != M_LANE) ||
				    atomic_load(&F.leave);
			uint64_t zero = 0;
			atomic_fetch_add(&F.left_asked, 1);
			if (left)
				atomic_compare_exchange_strong(&F.left_ns, &zero, tsrv_now_ns());
			if (!fk_stats(fd, &f, left))
				break;
		} else if (f.op == PROTO_OP_STATS && fk_polls() && role == ROLE_MAIN) {
			/* the poll's question, never answered: held until
			 * the server gives up (PEER_TIMEOUT_MS) or stops */
			uint64_t zero = 0;
			atomic_compare_exchange_strong(&F.held_ns, &zero, tsrv_now_ns());
			atomic_fetch_add(&F.stats_held, 1);
			while (!atomic_load(&F.stop) && !fk_closed(fd, 50))
				;
			atomic_fetch_sub(&F.stats_held, 1);
			break;
		} else if (f.op == PROTO_OP_STATS) {
			if (!fk_stats(fd, &f, false))
				break;
		} else if (f.op == PROTO_OP_BYE) {
			break;
		} else if (f.op == PROTO_OP_EXISTS && atomic_exchange(&F.drop_exists, false)) {
			/* lane_stale: the member closes the kept connection as
			 * the next batch's question comes (what the server
			 * sees of a close just after its reuse check) */
			atomic_fetch_add(&F.dropped, 1);
			break;
		} else if (f.op == PROTO_OP_NS_REGISTER && atomic_load(&F.drop_register) &&
			   atomic_load(&F.data_conns) > 0 && atomic_exchange(&F.drop_register, false)) {
			/* lane_stale_ns: the same, the next batch in a
			 * namespace new to the kept connection (its first
			 * question an NS_REGISTER, not an EXISTS) */
			atomic_fetch_add(&F.dropped, 1);
			break;
		} else if (fk_busy() && (f.op == PROTO_OP_EXISTS || f.op == PROTO_OP_PUT)) {
			if (!fk_busy_answer(fd, &f))
				break;
		} else if (F.mode != M_DOWNGRADE && !fk_busy() && !fk_polls() &&
			   role == ROLE_MAIN && !atomic_exchange(&F.lied, true)) {
			lying = true;
			if (F.mode == M_MORE_SLOW) {
				/* a long answer in time: served on after it */
				lying = false;
				slow = fk_more(fd, &f, 12, 500, true);
				if (!slow)
					break;
				continue;
			}
			if (F.mode == M_SLOW_READ || F.mode == M_FWD_BATCH ||
			    F.mode == M_HEAL_CUT) {
				/* the registration and the EXISTS answered (a
				 * miss), the PUT read slowly (fwd_batch: for
				 * BATCH_TRICKLE_MS, then closed) */
				if (fk_answer(fd, &f, 0, f.tag) &&
				    kc_fake_request(fd, &buf, &cap, &f, &F.stop) == 1 &&
				    f.op == PROTO_OP_EXISTS && fk_answer(fd, &f, 0, f.tag))
					fk_trickle(fd, F.mode == M_FWD_BATCH ? BATCH_TRICKLE_MS
									     : 30000);
				lying = false;
				break;
			}
			if (F.mode == M_TABLE)
				fk_big_table(fd, &f);
			else if (F.mode == M_MORE_STALL)
				fk_more(fd, &f, 2, 100, false);
			else
				fk_flood(fd, &f);
			break;
		} else if (role == ROLE_PLAIN && f.op == PROTO_OP_EXISTS) {
			/* no item answered: sent nothing (repair.c sends an
			 * item left unanswered to no one), its worker done */
			struct proto_frame a;
			kc_fake_answer(&a, &f);
			if (!fk_send(fd, &a, NULL, 0, NULL))
				break;
		} else if (!fk_answer(fd, &f, 0, f.tag)) {
			break;
		}
	}
	if (lying) {
		/* the server's close, seen (not a lie ended by our own stop) */
		while (!atomic_load(&F.stop) && !fk_closed(fd, 50))
			;
		if (!atomic_load(&F.stop))
			atomic_store(&F.closed_ns, tsrv_now_ns());
	}
	if (hello && !atomic_load(&F.stop))
		atomic_fetch_add(&F.played, 1);
	if (data && !atomic_load(&F.stop)) {
		atomic_store(&F.data_closed_ns, tsrv_now_ns());
		atomic_fetch_add(&F.data_closed, 1);
	}
	free(buf);
}

/* arg: the fd, times four, plus its listener's role */
static void *fk_conn(void *arg)
{
	intptr_t v = (intptr_t)arg;
	int fd = (int)(v >> 2);

	fk_serve(fd, (int)(v & 3));
	close(fd);
	return NULL;
}

static bool fk_threaded(void)
{
	return fk_polls() || F.mode == M_FWD_BATCH || F.mode == M_HEAL_CUT || F.mode == M_LANE;
}

static void *fk_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&F.stop)) {
		struct pollfd pf[2 + PLAIN_MAX] = { { .fd = F.lfd, .events = POLLIN } };
		int role[2 + PLAIN_MAX] = { ROLE_MAIN }, fd;
		unsigned np = 1, at;
		if (F.lfd_left >= 0) {
			pf[np] = (struct pollfd){ .fd = F.lfd_left, .events = POLLIN };
			role[np++] = ROLE_LEFT;
		}
		for (unsigned i = 0; i < F.plain_n; i++) {
			pf[np] = (struct pollfd){ .fd = F.lfd_plain[i], .events = POLLIN };
			role[np++] = ROLE_PLAIN;
		}
		if (poll(pf, np, 50) <= 0)
			continue;
		for (at = 0; at < np && !pf[at].revents; at++)
			;
		if (at == np)
			continue;
		/* not in a kvtierd started after */
		fd = accept4(pf[at].fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		atomic_fetch_add(&F.accepts, 1);
		if (fk_threaded() && F.conn_n < CONN_MAX &&
		    pthread_create(&F.conn_th[F.conn_n], NULL, fk_conn,
				   (void *)((intptr_t)fd * 4 + role[at])) == 0) {
			F.conn_n++; /* the forwards' connections beside the poll's */
			continue;
		}
		fk_serve(fd, role[at]);
		close(fd);
	}
	for (unsigned i = 0; i < F.conn_n; i++)
		pthread_join(F.conn_th[i], NULL);
	return NULL;
}

static uint16_t listen_tcp(int *lfd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	T_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	T_OK(getsockname(fd, (struct sockaddr *)&sa, &sl));
	if (lfd) {
		T_OK(listen(fd, 16));
		*lfd = fd;
	} else {
		close(fd);
	}
	return ntohs(sa.sin_port);
}

/* The fake on its thread, playing mode (slow_read's and fwd_batch's
 * reader with a small receive window: the sender waits on it), and the
 * tenants file at tenants (700 bytes): alice, then more (NULL: none). */
static void fake_start(int mode, char *tenants, const char *more)
{
	char text[256];

	F.mode = mode;
	if (mode == M_SLOW_READ || mode == M_FWD_BATCH || mode == M_HEAL_CUT)
		T_OK(setsockopt(F.lfd, SOL_SOCKET, SO_RCVBUF, &(int){ 65536 }, sizeof(int)));
	T_OK(-pthread_create(&F.th, NULL, fk_main, NULL));
	snprintf(tenants, 700, "%s/tenants", base);
	snprintf(text, sizeof(text), "alice " SECRET_ALICE " tenant\n%s", more ? more : "");
	tsrv_write_file(NULL, tenants, text);
}

/* The fake stopped (its connections closed: no server's stop waits on
 * them), its listeners closed. */
static void fake_stop(void)
{
	atomic_store(&F.stop, true);
	pthread_join(F.th, NULL);
	if (F.lfd >= 0)
		close(F.lfd);
	if (F.lfd_left >= 0)
		close(F.lfd_left);
	for (unsigned i = 0; i < F.plain_n; i++)
		close(F.lfd_plain[i]);
}

/* "127.0.0.1:P,..." of port[0..n) into out (cap bytes): a --members. */
static void members_of(char *out, size_t cap, const uint16_t *port, unsigned n)
{
	size_t at = 0;

	for (unsigned i = 0; i < n; i++) {
		int w = snprintf(out + at, cap - at, "%s127.0.0.1:%u", i ? "," : "", port[i]);
		T_ASSERT(w > 0 && (size_t)w < cap - at);
		at += (size_t)w;
	}
}

/* The two real members of a static pod listed in members, on port[0] and
 * port[1], each with its own base sub[i] (its log and Unix socket) and
 * data under it, then the options of more (NULL-ended, may be NULL). */
static void pod_start(struct tsrv s[2], char sub[2][600], const uint16_t port[2],
		      const char *members, const char *tenants, const char *const *more)
{
	for (int i = 0; i < 2; i++) {
		char self[32], dir[700];
		const char *extra[32] = { "--listen", self, "--advertise", self, "--members",
					  members, "--ssd", "0" };
		size_t n = 8;

		for (size_t j = 0; more && more[j]; j++) {
			T_ASSERT(n + 1 < sizeof(extra) / sizeof(extra[0]));
			extra[n++] = more[j];
		}
		snprintf(self, sizeof(self), "127.0.0.1:%u", port[i]);
		snprintf(sub[i], 600, "%s/m%d%s", base, i, pod_tag);
		T_OK(mkdir(sub[i], 0700));
		T_ASSERT(snprintf(dir, sizeof(dir), "%s/data", sub[i]) < (int)sizeof(dir));
		tsrv_start(&s[i], bin, sub[i], dir, tenants, extra);
	}
}

/* pod_start's two members (more: their other options) on port[0..1],
 * the tenants file the pod's account, root and the lines of users, the
 * members started under KVTD_TEST_LANE_IDLE_MS idle_ms (NULL: unset). */
static void pod_two(struct tsrv s[2], char sub[2][600], const uint16_t port[2],
		    const char *users, const char *idle_ms, const char *const *more)
{
	char tenants[700], members[80], text[600];

	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	snprintf(text, sizeof(text),
		 "pod secret-of-the-pod-0123456789 tenant\nroot " SECRET_ROOT " admin\n%s", users);
	tsrv_write_file(NULL, tenants, text);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	if (idle_ms)
		T_OK(setenv("KVTD_TEST_LANE_IDLE_MS", idle_ms, 1));
	pod_start(s, sub, port, members, tenants, more);
	if (idle_ms)
		T_OK(unsetenv("KVTD_TEST_LANE_IDLE_MS"));
}

/* The root's secret written to a file for the CLI (--secret-file): its
 * path in path (700 bytes). */
static void root_secret(char path[700])
{
	snprintf(path, 700, "%s/root.secret", base);
	tsrv_write_file(NULL, path, SECRET_ROOT "\n");
}

/* pod_start's members stopped, their reports checked. */
static void pod_members_stop(struct tsrv s[2], char sub[2][600])
{
	for (int i = 0; i < 2; i++)
		T_EQ_INT(tsrv_stop(&s[i]), 0);
	for (int i = 0; i < 2; i++)
		tsrv_check_reports(sub[i]);
}

/* The fake stopped, then pod_start's members (pod_members_stop). */
static void pod_stop(struct tsrv s[2], char sub[2][600])
{
	fake_stop();
	pod_members_stop(s, sub);
}

/* Alice's one PLACED|FORWARD put of copies to the server s: key, vlen
 * bytes of seed 7; its namespace's digest in ns. */
static const struct kvt_ns_desc *fwd_desc = &desc; /* ... its namespace */

/* c connected to s and logged in as tenant, a refusal busy (the
 * server's --max-conns or --tenant-conns full for now: the pod's other
 * member asks it every second, and a connection closed just before may
 * not be let go yet) tried again for 5 s, as stat_of does (pass_busy_cap
 * runs its members at --max-conns 2: its puts were refused so at load
 * 11, review47b). */
static void kc_open_as(struct kc *c, const struct tsrv *s, const char *tenant,
		       const char *secret)
{
	uint64_t end = tsrv_now_ns() + 5000000000ull;
	int rc;

	for (;;) {
		T_RC(kc_connect_unix(c, s->sock), 0);
		rc = kc_login(c, tenant, secret);
		if (rc != KVT_EBUSY || tsrv_now_ns() >= end)
			break;
		kc_close(c);
		tsrv_sleep_ms(5);
	}
	T_RC(rc, 0);
}

static void forward_put_as(const struct tsrv *s, uint8_t ns[PROTO_DIGEST_LEN],
			   const char *key, uint8_t copies, const char *tenant,
			   const char *secret)
{
	uint8_t *val = malloc(vlen);
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
	struct proto_item it = { 0 };
	uint64_t lens[1] = { vlen };
	uint32_t crc[1];
	struct iovec d = { val, vlen };
	struct kc c;
	struct kc_resp r;

	T_ASSERT(val);
	tsrv_fill(val, vlen, 7);
	crc[0] = kvt_crc32c(0, val, vlen);
	kc_open_as(&c, s, tenant, secret);
	T_RC(kc_register(&c, fwd_desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&it.key, key, strlen(key));
	it.flags = fwd_flags;
	it.anchor = fwd_anchor;
	it.copies = copies;
	it.part_count = 1;
	it.part_lens = lens;
	it.part_crcs = crc;
	T_ASSERT(kc_request(&c, &f, &it, 1, &d, 1) > 0);
	T_RC(kc_recv(&c, &r, 10000), 0);
	T_EQ_INT(r.f.status, 0);
	kc_resp_free(&r);
	kc_close(&c);
	free(val);
}

/* ... as alice. */
static void forward_put_key(const struct tsrv *s, uint8_t ns[PROTO_DIGEST_LEN],
			    const char *key, uint8_t copies)
{
	forward_put_as(s, ns, key, copies, "alice", SECRET_ALICE);
}

/* ... the key "forwarded-block", copies 2. */
static void forward_put(const struct tsrv *s, uint8_t ns[PROTO_DIGEST_LEN])
{
	forward_put_key(s, ns, "forwarded-block", 2);
}

/* The server (itself and the fake, playing mode, as its pod), its data
 * under base/name, the tenants alice and more (NULL: none; fake_start),
 * then the options of opts (NULL-ended, may be NULL). */
static void pod_fake(const char *name, int mode, const char *more, const char *const *opts)
{
	char tenants[700], dir[700], self[32], members[80];
	uint16_t fp = listen_tcp(&F.lfd), sp = listen_tcp(NULL);
	const char *extra[16] = { "--listen", self, "--advertise", self, "--members", members,
				  "--ssd", "0" };
	size_t n = 8;

	for (size_t j = 0; opts && opts[j]; j++) {
		T_ASSERT(n + 1 < sizeof(extra) / sizeof(extra[0]));
		extra[n++] = opts[j];
	}
	fake_start(mode, tenants, more);
	snprintf(self, sizeof(self), "127.0.0.1:%u", sp);
	members_of(members, sizeof(members), (const uint16_t[]){ sp, fp }, 2);
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
}

/* The server and the fake storing every copy (pod_fake: phase name,
 * users, opts), the server started with KVTD_TEST_LANE_IDLE_MS idle_ms
 * (its kept lane connections' idle time; the variable unset again). */
static void lane_pod(const char *name, const char *idle_ms, const char *users,
		     const char *const *opts)
{
	T_OK(setenv("KVTD_TEST_LANE_IDLE_MS", idle_ms, 1));
	pod_fake(name, M_LANE, users, opts);
	T_OK(unsetenv("KVTD_TEST_LANE_IDLE_MS"));
}

/* The server and the fake (pod_fake) and alice's forwarded put. */
static void start(const char *name, int mode)
{
	uint8_t ns[PROTO_DIGEST_LEN];

	pod_fake(name, mode, NULL, NULL);
	forward_put(&srv, ns);
}

/* Until the fake stored a copy refused busy before (F.busy_ok), at most
 * 10 s after t0: ms after t0 (UINT64_MAX: not stored). */
static uint64_t busy_stored_ms(uint64_t t0)
{
	uint64_t end = t0 + 10000000000ull; /* past the bounds: a failure said in figures */

	while (!atomic_load(&F.busy_ok) && tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	return atomic_load(&F.busy_ok) ? (atomic_load(&F.busy_ok_ns) - t0) / 1000000
				       : UINT64_MAX;
}

static void stop(void)
{
	fake_stop();
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* Stop s (SIGTERM, its exit waited for): how long it took, ms. */
static uint64_t stop_timed(struct tsrv *s)
{
	uint64_t t0 = tsrv_now_ns();

	T_EQ_INT(tsrv_stop(s), 0);
	return (tsrv_now_ns() - t0) / 1000000;
}

/* Wait (up to ms) until the fake's first connection is closed by the
 * server: true if it was. */
static bool wait_closed(uint64_t ms)
{
	uint64_t end = tsrv_now_ns() + ms * 1000000ull;

	while (tsrv_now_ns() < end && !atomic_load(&F.closed_ns))
		tsrv_sleep_ms(20);
	return atomic_load(&F.closed_ns) != 0;
}

static void wait_lie(void)
{
	uint64_t end = tsrv_now_ns() + 20000000000ull;

	while (tsrv_now_ns() < end && !atomic_load(&F.lie_ns))
		tsrv_sleep_ms(20);
	T_ASSERT(atomic_load(&F.lie_ns) != 0); /* the server connected and asked */
}

static void phase_downgrade(void)
{
	uint64_t end;

	start("downgrade", M_DOWNGRADE);
	/* the forward's connection and the static poll's, or retries: the
	 * server retries a failed member after a second */
	end = tsrv_now_ns() + 20000000000ull;
	while (tsrv_now_ns() < end && atomic_load(&F.played) < 3)
		tsrv_sleep_ms(20);
	printf("downgrade: a member offering only NONE to a server with alice's secret: "
	       "%u connections, %u frames after their HELLOs, %" PRIu64
	       " bytes of the block\n", atomic_load(&F.played), atomic_load(&F.after_hello),
	       atomic_load(&F.put_bytes));
	T_GE_INT(atomic_load(&F.played), 3);
	T_EQ_INT(atomic_load(&F.after_hello), 0);
	T_EQ_U64(atomic_load(&F.put_bytes), 0);
	stop();
}

static void phase_table(void)
{
	uint64_t rss0, rss1;

	start("table", M_TABLE);
	rss0 = tsrv_rss(srv.pid);
	wait_lie();
	T_ASSERT(wait_closed(15000));
	rss1 = tsrv_rss(srv.pid);
	printf("table: a header claiming a 1 GiB table: %" PRIu64 " KiB of junk taken before "
	       "the close (errno %d), %.0f ms; RSS %+" PRId64 " KiB\n",
	       atomic_load(&F.sent) >> 10, atomic_load(&F.send_errno),
	       (double)(atomic_load(&F.closed_ns) - atomic_load(&F.lie_ns)) / 1e6,
	       (int64_t)(rss1 - rss0) / 1024);
	/* Refused at the header: what went out sat in the sockets' buffers
	 * (a few MiB on loopback) when the server closed, at once (before:
	 * all JUNK_MAX taken, then the close 5 s after the junk stopped). */
	T_ASSERT(atomic_load(&F.sent) < JUNK_MAX);
	T_LE_INT((atomic_load(&F.closed_ns) - atomic_load(&F.lie_ns)) / 1000000, 3000);
	stop();
}

static void phase_flood(const char *name, int mode, uint64_t bound_ms)
{
	double ms;

	start(name, mode);
	wait_lie();
	T_ASSERT(wait_closed(bound_ms + 5000));
	ms = (double)(atomic_load(&F.closed_ns) - atomic_load(&F.lie_ns)) / 1e6;
	printf("%s: %" PRIu64 " answers sent before the server closed, %.0f ms\n", name,
	       atomic_load(&F.sent), ms);
	T_LE_INT((uint64_t)ms, bound_ms);
	stop();
}

static void phase_tags(void)
{
	phase_flood("tags", M_TAGS, 2000); /* refused at the first: ms */
}

static void phase_more(void)
{
	phase_flood("more", M_MORE, 8000); /* PEER_TIMEOUT_MS, and a margin */
}

static void phase_more_slow(void)
{
	uint64_t end;

	start("more_slow", M_MORE_SLOW);
	wait_lie();
	/* the 12 frames and the final answer take 6 s; the forward's PUT
	 * follows on the same connection */
	end = tsrv_now_ns() + 20000000000ull;
	while (tsrv_now_ns() < end && atomic_load(&F.after_lie) < VLEN)
		tsrv_sleep_ms(20);
	printf("more_slow: an answer in %" PRIu64 " frames of MORE 500 ms apart, then the final "
	       "one: %" PRIu64 " bytes forwarded on the connection after it\n",
	       atomic_load(&F.sent), atomic_load(&F.after_lie));
	T_EQ_U64(atomic_load(&F.sent), 12);
	T_GE_INT(atomic_load(&F.after_lie), VLEN);
	stop();
}

static void phase_more_stall(void)
{
	double ms;

	start("more_stall", M_MORE_STALL);
	wait_lie();
	T_ASSERT(wait_closed(15000));
	ms = (double)(atomic_load(&F.closed_ns) - atomic_load(&F.lie_ns)) / 1e6;
	printf("more_stall: 2 frames of MORE, then nothing: closed %.0f ms after the last\n", ms);
	/* PEER_TIMEOUT_MS after the last frame, with the fake's and a loaded
	 * machine's margins */
	T_GE_INT((uint64_t)ms, 4000);
	T_LE_INT((uint64_t)ms, 9000);
	stop();
}

/* Does the log at path hold the line naming what? */
static bool log_says(const char *path, const char *what);
static uint64_t anchor_of(char (*names)[32], unsigned n, const char *const *want,
			  unsigned copies, uint64_t from);

/* A member that takes the forward slowly (slow_read in the header). */
static void phase_slow_read(void)
{
	uint64_t end, lost_ns = 0;
	double ms;

	vlen = SLOW_VLEN;
	start("slow_read", M_SLOW_READ);
	wait_lie();
	end = atomic_load(&F.lie_ns) + 20000000000ull;
	while (tsrv_now_ns() < end && !lost_ns) {
		if (log_says(srv.log, "repair: lost a member"))
			lost_ns = tsrv_now_ns();
		else
			tsrv_sleep_ms(50);
	}
	ms = lost_ns ? (double)(lost_ns - atomic_load(&F.lie_ns)) / 1e6 : -1;
	printf("slow_read: a %u KiB forward read %u KiB every %d ms: %" PRIu64
	       " KiB read, the member given up %.0f ms after the registration's answer "
	       "(-1: not in 20 s)\n", SLOW_VLEN >> 10, SLOW_STEP >> 10, SLOW_EVERY_MS,
	       atomic_load(&F.sent) >> 10, ms);
	/* The socket buffers take most of the first window (5 MiB) at once,
	 * the rest comes at the fake's pace, and the second window's must
	 * go within PEER_TIMEOUT_MS of the first's end: given up 5-10 s in
	 * (7.2 s seen), bound with a loaded machine's margin.  Before, the
	 * send went on at the fake's pace (16 MiB: 35 s), then 5 s for the
	 * answer it never got. */
	T_ASSERT(lost_ns != 0);
	T_GE_INT((uint64_t)ms, 5000);
	T_LE_INT((uint64_t)ms, 13000);
	T_ASSERT(log_says(srv.log, "error=-110"));
	T_ASSERT(atomic_load(&F.sent) < SLOW_VLEN);
	stop();
}

/* Certificates of one CA made by the openssl CLI in base/pki: the CA's,
 * and a member's (its key in key) naming the IP address 127.0.0.1, with
 * the extension lines ext too (extfile syntax; "": no extended key usage,
 * so also a client certificate).  Skips the test without the openssl
 * command. */
static void make_pki(const char *ext, char ca[760], char cert[760], char key[760])
{
	char pki[700], cmd[2400];

	if (system("command -v openssl >/dev/null 2>&1") != 0)
		T_SKIP("no openssl command to make certificates with");
	snprintf(pki, sizeof(pki), "%s/pki", base);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cd '%s' && ("
		 "printf 'subjectAltName=IP:127.0.0.1\\n%s' >san.ext && "
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		 "-keyout ca.key -out ca.pem -days 2 -subj /CN=pod-ca && "
		 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		 "-keyout srv.key -out srv.csr -subj /CN=member && "
		 "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
		 "-out srv.pem -days 2 -extfile san.ext) >openssl.log 2>&1", pki, pki, ext);
	T_EQ_INT(system(cmd), 0);
	snprintf(ca, 760, "%s/ca.pem", pki);
	snprintf(cert, 760, "%s/srv.pem", pki);
	snprintf(key, 760, "%s/srv.key", pki);
}

/* Does the log at path hold the line naming what? */
static bool log_says(const char *path, const char *what)
{
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "grep -qF '%s' '%s'", what, path);
	return system(cmd) == 0;
}

/* The lines of the log at path that say what. */
static int log_count(const char *path, const char *what)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* The microseconds of a log line's ts= (its time of day: a stop does
 * not span days but may cross midnight, the caller's difference mod a
 * day). */
static uint64_t log_ts_us(const char *line)
{
	const char *t = strstr(line, "ts=");
	unsigned h, m, sec, us;

	if (!t || sscanf(t, "ts=%*4d-%*2d-%*2dT%2u:%2u:%2u.%6uZ", &h, &m, &sec, &us) != 4)
		return UINT64_MAX;
	return (((uint64_t)h * 60 + m) * 60 + sec) * 1000000ull + us;
}

/* A server's own stop, from its log at path: microseconds from its last
 * "stopping" to its "stopped" (the test fails without both). */
static uint64_t log_stop_us(const char *path)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	uint64_t a = UINT64_MAX, b = UINT64_MAX;

	T_ASSERT(f);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, " msg=stopping "))
			a = log_ts_us(line);
		else if (strstr(line, " msg=stopped "))
			b = log_ts_us(line);
	}
	fclose(f);
	T_ASSERT(a != UINT64_MAX && b != UINT64_MAX);
	return (b + 86400000000ull - a) % 86400000000ull;
}

#define EKU_WARNING "TLS certificate not valid for client authentication"

/* Two real members with --tls-cert (certificates of one CA, with the IP
 * address they are reached at), --tls-ca that CA: the forwarded block
 * reaches the other member (its repair thread spoke plain TCP to a TLS
 * port: "TLS handshake failed" there every second, nothing healed or
 * forwarded in a TLS pod). */
static void phase_tls_pod(void)
{
	char ca[760], cert[760], key[760], tenants[700];
	char members[80], sub[2][600];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	struct kvt_key k;
	struct kc c;
	uint64_t t0, end;
	bool held = false;

	make_pki("", ca, cert, key);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, "alice " SECRET_ALICE " tenant\n");
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	pod_start(s, sub, port, members, tenants,
		  (const char *[]){ "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca,
				    "--tls-verify-client", NULL });
	t0 = tsrv_now_ns();
	forward_put(&s[0], ns);
	kvt_key_set(&k, "forwarded-block", 15);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	end = t0 + 10000000000ull;
	while (!held && tsrv_now_ns() < end) {
		struct kc_value v;
		int rc = kc_get(&c, ns2, &k, 0, 0, 0, 0, &v);
		if (rc == KVT_OK) {
			uint8_t *want = malloc(VLEN);
			T_ASSERT(want);
			tsrv_fill(want, VLEN, 7);
			T_EQ_U64(v.len, VLEN);
			T_ASSERT(v.crc_ok && memcmp(v.bytes, want, VLEN) == 0);
			free(want);
			kc_value_free(&v);
			held = true;
		} else {
			T_RC(rc, KVT_MISS);
			kc_value_free(&v);
			tsrv_sleep_ms(50);
		}
	}
	kc_close(&c);
	printf("tls_pod: the block forwarded over TLS to the other member: %s, %.0f ms\n",
	       held ? "held, its bytes exact" : "not there", (double)(tsrv_now_ns() - t0) / 1e6);
	T_ASSERT(held);
	T_EQ_INT(tsrv_stop(&s[0]), 0);
	T_EQ_INT(tsrv_stop(&s[1]), 0);
	T_ASSERT(!log_says(s[0].log, EKU_WARNING)); /* the control of tls_eku */
	tsrv_check_reports(sub[0]);
	tsrv_check_reports(sub[1]);
}

/* A static pod of three: two real members (s[0], s[1]) and the fake,
 * which answers everything but the drain poll's STATS (held unanswered
 * until the member gives up, PEER_TIMEOUT_MS).  Once both members' polls
 * are held, alice's forwarded puts of copies 3 to s[0]: each must reach
 * s[1] within 2 s (the poll ran on the repair thread: every forward
 * waited for it, ~5 s of every 6). */
#define STALL_PUTS 5
#define STALL_BOUND_MS 2000
static void phase_poll_stall(void)
{
	char tenants[700], members[120], sub[2][600], key[32];
	uint16_t fp = listen_tcp(&F.lfd);
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	uint64_t worst = 0, end;
	struct kc c;

	fake_start(M_POLL_STALL, tenants, NULL);
	members_of(members, sizeof(members), (const uint16_t[]){ port[0], port[1], fp }, 3);
	pod_start(s, sub, port, members, tenants, NULL);
	/* both members' polls held by the fake */
	end = tsrv_now_ns() + 5000000000ull;
	while (atomic_load(&F.stats_held) < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_EQ_U64(atomic_load(&F.stats_held), 2);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	for (int i = 0; i < STALL_PUTS; i++) {
		uint64_t t0 = tsrv_now_ns(), ms;
		bool held = false;
		struct kvt_key k;

		snprintf(key, sizeof(key), "stall-%d", i);
		kvt_key_set(&k, key, strlen(key));
		forward_put_key(&s[0], ns, key, 3);
		T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
		end = t0 + 8000000000ull;
		while (!held && tsrv_now_ns() < end) {
			struct kc_value v;
			int rc = kc_get(&c, ns2, &k, 0, 0, 0, 0, &v);
			if (rc == KVT_OK) {
				T_EQ_U64(v.len, VLEN);
				held = true;
			} else {
				T_RC(rc, KVT_MISS);
				tsrv_sleep_ms(5);
			}
			kc_value_free(&v);
		}
		ms = (tsrv_now_ns() - t0) / 1000000;
		printf("poll_stall: forward %d to the healthy member: %s in %" PRIu64 " ms\n", i,
		       held ? "held" : "not there", ms);
		T_ASSERT(held);
		worst = ms > worst ? ms : worst;
	}
	kc_close(&c);
	printf("poll_stall: %d forwards beside a poll held by the third member: "
	       "the slowest in %" PRIu64 " ms (bound %d)\n", STALL_PUTS, worst, STALL_BOUND_MS);
	T_ASSERT(worst < STALL_BOUND_MS);
	pod_stop(s, sub);
}

/* Does 127.0.0.1:a sort after 127.0.0.1:b?  A static list is sorted by
 * address text (memberlist.c), and a member asks, and a pass starts its
 * workers, in that order. */
static bool port_after(uint16_t a, uint16_t b)
{
	char x[32], y[32];

	snprintf(x, sizeof(x), "127.0.0.1:%u", a);
	snprintf(y, sizeof(y), "127.0.0.1:%u", b);
	return strcmp(x, y) > 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* A static pod of three: the real member, the fake (A), listed before a
 * second fake address (B) that answers the poll's STATS "left"
 * (drain_state 2).  A holds the STATS until the member gives up
 * (PEER_TIMEOUT_MS).  The member must serve the list without B within
 * WIDE_BOUND_MS of A's question being held: asked one after another, B
 * was asked only once A's 5 s were over (~5,000 ms). */
#define WIDE_BOUND_MS 2000
static void phase_poll_wide(void)
{
	char tenants[700], dir[700], self[32], members[120];
	uint16_t ap = listen_tcp(&F.lfd), bp = listen_tcp(&F.lfd_left), sp = listen_tcp(NULL);
	const char *extra[] = { "--listen", self, "--advertise", self, "--members", members,
				"--ssd", "0", NULL };
	uint64_t end, seen_ns = 0, held, n = 0, ms;
	struct kc c;

	if (port_after(ap, bp)) { /* A first in the list: members sort it */
		int t = F.lfd;
		uint16_t tp = ap;
		F.lfd = F.lfd_left;
		F.lfd_left = t;
		ap = bp;
		bp = tp;
	}
	fake_start(M_POLL_WIDE, tenants, NULL);
	snprintf(self, sizeof(self), "127.0.0.1:%u", sp);
	members_of(members, sizeof(members), (const uint16_t[]){ sp, ap, bp }, 3);
	snprintf(dir, sizeof(dir), "%s/poll_wide", base);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	T_RC(kc_connect_unix(&c, srv.sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	end = tsrv_now_ns() + 10000000000ull;
	while (!seen_ns && tsrv_now_ns() < end) {
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "cluster.members", &n), KVT_OK);
		if (n == 2)
			seen_ns = tsrv_now_ns();
		else
			tsrv_sleep_ms(10);
	}
	kc_close(&c);
	T_ASSERT(seen_ns != 0); /* B was dropped from the list at all */
	while (!atomic_load(&F.held_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	held = atomic_load(&F.held_ns);
	T_ASSERT(held != 0); /* A held the poll */
	ms = seen_ns > held ? (seen_ns - held) / 1000000 : 0;
	printf("poll_wide: a member's leave seen %" PRIu64 " ms after the member listed "
	       "before it held the poll (bound %d; %u question(s) to the one that left)\n", ms,
	       WIDE_BOUND_MS, atomic_load(&F.left_asked));
	T_ASSERT(atomic_load(&F.left_asked) >= 1);
	T_LE_INT(ms, WIDE_BOUND_MS);
	fake_stop();
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
}

/* A static pod of more members than REPAIR_POLL_ASKERS (32): the real
 * member, 40 addresses refusing at once (127.0.0.1:1000..1039) and,
 * listed after them all, the fake answering "left".  The member must drop
 * it within MANY_BOUND_MS: each round gave the first 32 idle members its
 * askers and stopped, so a member listed after them was never asked. */
#define MANY_FILL 40
#define MANY_BOUND_MS 4000
static void phase_poll_many(void)
{
	char tenants[700], dir[700], self[32], members[MANY_FILL * 16 + 64];
	uint16_t bp = listen_tcp(&F.lfd_left), sp = listen_tcp(NULL);
	const char *extra[] = { "--listen", self, "--advertise", self, "--members", members,
				"--ssd", "0", NULL };
	uint64_t t0, end, seen_ns = 0, n = 0;
	uint16_t all[MANY_FILL + 2];
	struct kc c;

	/* the fillers sort before the one that left */
	T_ASSERT(port_after(bp, 1000 + MANY_FILL - 1));
	fake_start(M_POLL_WIDE, tenants, NULL);
	snprintf(self, sizeof(self), "127.0.0.1:%u", sp);
	all[0] = sp;
	all[1] = bp;
	for (unsigned i = 0; i < MANY_FILL; i++)
		all[2 + i] = (uint16_t)(1000 + i);
	members_of(members, sizeof(members), all, MANY_FILL + 2);
	snprintf(dir, sizeof(dir), "%s/poll_many", base);
	t0 = tsrv_now_ns();
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	T_RC(kc_connect_unix(&c, srv.sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	end = tsrv_now_ns() + 10000000000ull;
	while (!seen_ns && tsrv_now_ns() < end) {
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "cluster.members", &n), KVT_OK);
		if (n == MANY_FILL + 1)
			seen_ns = tsrv_now_ns();
		else
			tsrv_sleep_ms(10);
	}
	kc_close(&c);
	printf("poll_many: a pod of %d, the member that left listed after %d others: "
	       "%u question(s) to it, its leave seen %s%" PRIu64 " ms after start (bound %d)\n",
	       MANY_FILL + 2, MANY_FILL, atomic_load(&F.left_asked), seen_ns ? "" : "never, ",
	       ((seen_ns ? seen_ns : tsrv_now_ns()) - t0) / 1000000, MANY_BOUND_MS);
	T_ASSERT(seen_ns != 0);
	T_LE_INT((seen_ns - t0) / 1000000, MANY_BOUND_MS);
	fake_stop();
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
}

/* A member whose poll the fake holds (STATS unanswered): SIGTERM must
 * stop it within STOP_BOUND_MS -- its stop joined the poll thread, held
 * until PEER_TIMEOUT_MS (~5 s; 30 s with slow frames of MORE). */
#define STOP_BOUND_MS 1500
static void phase_poll_stop(void)
{
	uint64_t end, t0, ms, into;

	start("poll_stop", M_POLL_STOP);
	end = tsrv_now_ns() + 5000000000ull;
	while (!atomic_load(&F.stats_held) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&F.stats_held) >= 1);
	t0 = tsrv_now_ns();
	into = (t0 - atomic_load(&F.held_ns)) / 1000000;
	T_EQ_INT(tsrv_stop(&srv), 0);
	ms = (tsrv_now_ns() - t0) / 1000000;
	printf("poll_stop: SIGTERM %" PRIu64 " ms into a held poll: exited in %" PRIu64
	       " ms (bound %d)\n", into, ms, STOP_BOUND_MS);
	T_LE_INT(ms, STOP_BOUND_MS);
	fake_stop();
	tsrv_check_reports(base);
}

/* Until each of keys[0..n) (puts at t0[i]) is on the member c is
 * logged in to: ms[i] after its put (UINT64_MAX: not within 20 s). */
static void fwd_wait(struct kc *c, const uint8_t *ns, const char *const *key, unsigned n,
		     const uint64_t *t0, uint64_t *ms)
{
	uint64_t end = t0[n - 1] + 20000000000ull;
	unsigned left = n;

	for (unsigned i = 0; i < n; i++)
		ms[i] = UINT64_MAX;
	while (left && tsrv_now_ns() < end) {
		for (unsigned i = 0; i < n; i++) {
			struct kc_value v;
			struct kvt_key k;
			int rc;
			if (ms[i] != UINT64_MAX)
				continue;
			kvt_key_set(&k, key[i], strlen(key[i]));
			rc = kc_get(c, ns, &k, 0, 0, 0, 0, &v);
			kc_value_free(&v);
			if (rc == KVT_OK) {
				ms[i] = (tsrv_now_ns() - t0[i]) / 1000000;
				left--;
			} else {
				T_RC(rc, KVT_MISS);
			}
		}
		tsrv_sleep_ms(10);
	}
}

/* A member's forwards beside a slow member's (fwd_lane in the header).
 * A static pod of three, two real members and the fake, which reads the
 * first forward's 16 MiB PUT as slow_read does (~466 KiB/s).  Alice's
 * 16 MiB block, then two of 4 KiB, all copies 3, to s[0], each put once
 * the one before is on s[1], the healthy member: each 4 KiB one must be
 * there within lane_bound_ms of its put -- one pass over the queue was
 * done when its slowest worker was, so the 4 KiB blocks waited for the
 * fake to be given up (7,160 ms); the 16 MiB one, which no lane made
 * faster, within lane_bound_ms of its own baseline, twice it and a
 * second (287-670 ms under
 * ASan, 1,649-3,470 under TSan at load 7-9).  The baselines are measured
 * first in the same run: the same two sizes forwarded to s[1] alone (copies
 * 2, placed on s[0] and s[1]: the fake not involved).  The bounds were
 * 1,500 and 6,000 ms, fixed, until session 46.  The members run
 * with KVTD_TEST_LANE_BYTES 4096: the fake's lane, its thread held in the 16 MiB send, keeps the
 * first 4 KiB copy and drops the second (repair.forward_member_dropped),
 * which s[1] is sent all the same. */
/* k times the uncontended forward and a second: under the ~5 s a 4 KiB
 * forward waited for the slow member before the lanes (k 4), and under
 * the ~7 s the slow member takes to be given up for the 16 MiB one (k 2:
 * 1,627 ms alone under TSan at load 9) */
static uint64_t lane_bound_ms(uint64_t base_ms, unsigned k)
{
	return k * base_ms + 1000;
}

static void phase_fwd_lane(void)
{
	char tenants[700], members[120], sub[2][600], names[3][32], s0[32], s1[32];
	uint16_t fp = listen_tcp(&F.lfd);
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	const char *const key[3] = { "big", "small", "small2" };
	const char *const base_key[2] = { "base-big", "base-small" };
	uint64_t t0[3], ms[3], base_ms[2], dropped = 0, member_dropped = 0;
	struct kc c;

	fake_start(M_SLOW_READ, tenants, "root " SECRET_ROOT " admin\n");
	members_of(members, sizeof(members), (const uint16_t[]){ port[0], port[1], fp }, 3);
	T_OK(setenv("KVTD_TEST_LANE_BYTES", "4096", 1));
	pod_start(s, sub, port, members, tenants, NULL);
	T_OK(unsetenv("KVTD_TEST_LANE_BYTES"));
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	/* the baselines: each size to s[1] alone (the fake not in their top) */
	snprintf(s0, sizeof(s0), "127.0.0.1:%u", port[0]);
	snprintf(s1, sizeof(s1), "127.0.0.1:%u", port[1]);
	snprintf(names[0], 32, "%s", s0);
	snprintf(names[1], 32, "%s", s1);
	snprintf(names[2], 32, "127.0.0.1:%u", fp);
	fwd_anchor = anchor_of(names, 3, (const char *const[]){ s0, s1 }, 2, 1);
	for (int i = 0; i < 2; i++) {
		uint64_t b0 = tsrv_now_ns();
		vlen = i ? VLEN : SLOW_VLEN;
		forward_put_key(&s[0], ns, base_key[i], 2);
		T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
		fwd_wait(&c, ns2, &base_key[i], 1, &b0, &base_ms[i]);
		T_ASSERT(base_ms[i] != UINT64_MAX);
	}
	fwd_anchor = 1;
	T_EQ_INT(atomic_load(&F.lie_ns), 0); /* (the fake sent nothing yet) */
	for (int i = 0; i < 3; i++) {
		/* each once the last is there: s[1]'s lane has room (its
		 * thread sends the 16 MiB meanwhile) */
		vlen = i ? VLEN : SLOW_VLEN;
		t0[i] = tsrv_now_ns();
		forward_put_key(&s[0], ns, key[i], 3);
		T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
		fwd_wait(&c, ns2, &key[i], 1, &t0[i], &ms[i]);
	}
	vlen = VLEN;
	kc_close(&c);
	T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.forward_dropped", false,
			  &dropped), 0);
	T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.forward_member_dropped",
			  true, &member_dropped), 0);
	printf("fwd_lane: beside a member reading a 16 MiB forward at ~466 KiB/s: on the "
	       "healthy member the 16 MiB block in %" PRIu64 " ms, the 4 KiB ones put after "
	       "it in %" PRIu64 " and %" PRIu64 " ms (bounds %" PRIu64 ", %" PRIu64 ": alone "
	       "they took %" PRIu64 " and %" PRIu64 " ms; the slow member given up: "
	       "%s); %" PRIu64 " copy dropped at the slow member's lane (%" PRIu64 " forwards "
	       "dropped)\n", ms[0], ms[1], ms[2], lane_bound_ms(base_ms[0], 2),
	       lane_bound_ms(base_ms[1], 4), base_ms[0], base_ms[1],
	       log_says(s[0].log, "repair: lost a member") ? "yes" : "no", member_dropped,
	       dropped);
	for (int i = 0; i < 3; i++) /* (not there: T_LE_INT would take it for -1) */
		T_ASSERT(ms[i] != UINT64_MAX);
	T_LE_INT(ms[0], lane_bound_ms(base_ms[0], 2));
	for (int i = 1; i < 3; i++)
		T_LE_INT(ms[i], lane_bound_ms(base_ms[1], 4));
	T_ASSERT(atomic_load(&F.lie_ns) != 0); /* the slow member was sent the big one */
	T_GE_INT(member_dropped, 1);
	T_EQ_U64(dropped, member_dropped);
	pod_stop(s, sub);
}

/* A forward beside a healing pass held by a slow member (fwd_heal in
 * the header).  A static pod of three, the members with --repair-grace
 * HEAL_GRACE: s[0]'s first pass (its list set at start) copies alice's 16 MiB
 * block, put placed but not forwarded, to s[1] and to the fake, which
 * reads it as slow_read does.  Once the fake reads, a 4 KiB forward put
 * to s[0] must be on s[1] within HEAL_BOUND_MS: the repair thread handed
 * forwards to the lanes only between passes, and this one ended with the
 * fake given up (~7 s). */
#define HEAL_BOUND_MS 1000
/* The big block must be put before the grace ends, or the one pass runs
 * without it (the fake never sent it): 1,500 ms was short of the put's
 * 1,630-2,390 ms after s[0]'s start under TSan at load 8 (3 of 5 runs) */
#define HEAL_GRACE "4000"
static void phase_fwd_heal(void)
{
	char tenants[700], members[120], sub[2][600];
	uint16_t fp = listen_tcp(&F.lfd);
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--repair-grace", HEAL_GRACE, NULL };
	const char *const key[1] = { "heal-small" };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	uint64_t t0, ms, end, heal0, big_ms, passes = 0, pass_ms = 0;
	struct kc c;

	fake_start(M_SLOW_READ, tenants, "root " SECRET_ROOT " admin\n");
	members_of(members, sizeof(members), (const uint16_t[]){ port[0], port[1], fp }, 3);
	pod_start(s, sub, port, members, tenants, more);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	vlen = SLOW_VLEN;
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&s[0], ns, "heal-big", 3);
	vlen = VLEN;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	end = tsrv_now_ns() + 10000000000ull;
	while (!atomic_load(&F.lie_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&F.lie_ns) != 0); /* the pass sends the fake its copy */
	heal0 = atomic_load(&F.lie_ns);
	/* and s[1] its copy: while s[1] receives it, alice's reservation there
	 * is full (a quarter of --dram) and the forward's copy is refused
	 * KVT_EBUSY, left to the next pass (8 s: 3 of 3 runs with the grace
	 * at HEAL_GRACE) */
	t0 = tsrv_now_ns();
	fwd_wait(&c, ns2, (const char *const[]){ "heal-big" }, 1, &t0, &ms);
	T_ASSERT(ms != UINT64_MAX);
	big_ms = (tsrv_now_ns() - heal0) / 1000000;
	t0 = tsrv_now_ns();
	forward_put_key(&s[0], ns, key[0], 3);
	fwd_wait(&c, ns2, key, 1, &t0, &ms);
	kc_close(&c);
	printf("fwd_heal: a 4 KiB forward put while a healing pass sends 16 MiB to a member "
	       "reading it at ~466 KiB/s: on the healthy member in %" PRIu64 " ms (bound %d; "
	       "the slow member given up: %s)\n", ms, HEAL_BOUND_MS,
	       log_says(s[0].log, "repair: lost a member") ? "yes" : "no");
	T_ASSERT(ms != UINT64_MAX); /* (T_LE_INT would take it for -1) */
	T_LE_INT(ms, HEAL_BOUND_MS);
	/* a figure, not a bound: the pass's length against the healthy
	 * member's share of it (the pass ends with its slowest member) */
	end = tsrv_now_ns() + 15000000000ull;
	while (passes == 0 && tsrv_now_ns() < end) {
		T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.passes", false,
				  &passes), 0);
		if (!passes)
			tsrv_sleep_ms(20);
	}
	T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.last_pass_ms", false,
			  &pass_ms), 0);
	printf("fwd_heal: the pass's 16 MiB on the healthy member %" PRIu64 " ms after the slow "
	       "one began reading it; the first pass lasted %" PRIu64 " ms\n", big_ms, pass_ms);
	pod_stop(s, sub);
}

/* A pass's members 8 at a time (fwd_batch in the header).  A static pod
 * of ten: s[0], the slow fake, 7 plain fakes, s[1] last in the list; a
 * 8 MiB block of copies 8 whose top holds the slow fake and s[1] (the
 * anchor found here as repair.c ranks).  s[1] must hold it within
 * BATCH_BOUND_MS: s[0]'s pass started its workers 8 at a time, the slow
 * fake's among the first 8 and s[1]'s after them, and joined each 8 --
 * s[1] was sent the block once the fake closed (BATCH_TRICKLE_MS). */
#define BATCH_BOUND_MS 2000
static void phase_fwd_batch(void)
{
	char tenants[700], members[400], sub[2][600];
	char names[10][32];
	struct placement_member pm[10];
	struct placement *pl = NULL;
	struct kvt_mem mem;
	char fake[32];
	uint16_t fp, pp[PLAIN_MAX];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	uint64_t t0, ms = UINT64_MAX, end, a;
	size_t ml = 0;
	struct kc c;
	struct kvt_key k;

	/* s[1] last in the list (sorted by address), so after the 8 fakes
	 * in s[0]'s pass: its port the highest of four, every fake's below */
	for (int i = 0; i < 3; i++) {
		uint16_t q = listen_tcp(NULL);
		if (port_after(q, port[1]))
			port[1] = q;
	}
	if (port_after(port[0], port[1])) {
		uint16_t t = port[0];
		port[0] = port[1];
		port[1] = t;
	}
	for (unsigned i = 0; i < 1 + PLAIN_MAX; i++) {
		int *lfd = i ? &F.lfd_plain[i - 1] : &F.lfd;
		uint16_t q = listen_tcp(lfd);
		for (int tries = 0; port_after(q, port[1]) && tries < 1000; tries++) {
			close(*lfd);
			q = listen_tcp(lfd);
		}
		T_ASSERT(!port_after(q, port[1]));
		if (i)
			pp[i - 1] = q;
		else
			fp = q;
	}
	F.plain_n = PLAIN_MAX;
	snprintf(names[0], sizeof(names[0]), "127.0.0.1:%u", port[0]);
	snprintf(names[1], sizeof(names[1]), "127.0.0.1:%u", fp);
	for (unsigned i = 0; i < PLAIN_MAX; i++)
		snprintf(names[2 + i], sizeof(names[0]), "127.0.0.1:%u", pp[i]);
	snprintf(names[9], sizeof(names[9]), "127.0.0.1:%u", port[1]);
	memcpy(fake, names[1], sizeof(fake));
	qsort(names, 10, sizeof(names[0]), name_cmp); /* as the members list it */
	T_ASSERT(strcmp(names[9], fake) != 0);
	for (unsigned i = 0; i < 10; i++) {
		pm[i] = (struct placement_member){ .name = names[i], .weight = 1 };
		ml += (size_t)snprintf(members + ml, sizeof(members) - ml, "%s%s", i ? "," : "",
				       names[i]);
	}
	kvt_mem_init(&mem);
	T_RC(placement_new(&pl, pm, 10, &mem), 0);
	for (a = 1; a < 100000; a++) {
		unsigned top[8], got = 0, kn = placement_rank(pl, a, NULL, top, 8);
		for (unsigned j = 0; j < kn; j++)
			got |= (strcmp(names[top[j]], fake) == 0) | (top[j] == 9) << 1;
		if (got == 3)
			break;
	}
	placement_free(pl);
	T_ASSERT(a < 100000);
	fwd_anchor = a;

	fake_start(M_FWD_BATCH, tenants, NULL);
	pod_start(s, sub, port, members, tenants, NULL);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	vlen = BATCH_VLEN;
	t0 = tsrv_now_ns();
	forward_put_key(&s[0], ns, "batch", 8);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	kvt_key_set(&k, "batch", 5);
	end = t0 + 10000000000ull;
	while (ms == UINT64_MAX && tsrv_now_ns() < end) {
		struct kc_value v;
		int rc = kc_get(&c, ns2, &k, 0, 0, 0, 0, &v);
		if (rc == KVT_OK) {
			T_EQ_U64(v.len, BATCH_VLEN);
			ms = (tsrv_now_ns() - t0) / 1000000;
		} else {
			T_RC(rc, KVT_MISS);
			tsrv_sleep_ms(10);
		}
		kc_value_free(&v);
	}
	kc_close(&c);
	printf("fwd_batch: a pod of ten, the slow member among a pass's first 8: the block on "
	       "the member after them in %" PRIu64 " ms (bound %d; the slow one read %" PRIu64
	       " KiB for %d ms)\n", ms, BATCH_BOUND_MS, atomic_load(&F.sent) >> 10,
	       BATCH_TRICKLE_MS);
	T_ASSERT(atomic_load(&F.lie_ns) != 0); /* the slow member was sent it */
	T_ASSERT(ms != UINT64_MAX); /* (T_LE_INT would take it for -1) */
	T_LE_INT(ms, BATCH_BOUND_MS);
	pod_stop(s, sub);
}

/* The first anchor from `from` whose top `copies` over names[0..n)
 * (sorted here, as the members list them; weight 1) is, in any order, the
 * members named by want[0..copies). */
static uint64_t anchor_of(char (*names)[32], unsigned n, const char *const *want,
			  unsigned copies, uint64_t from)
{
	struct placement_member pm[8];
	struct placement *pl = NULL;
	struct kvt_mem mem;
	uint64_t a;

	T_ASSERT(n <= 8 && copies <= 8);
	qsort(names, n, sizeof(names[0]), name_cmp);
	for (unsigned i = 0; i < n; i++)
		pm[i] = (struct placement_member){ .name = names[i], .weight = 1 };
	kvt_mem_init(&mem);
	T_RC(placement_new(&pl, pm, n, &mem), 0);
	for (a = from; a < 100000; a++) {
		unsigned top[8], got = 0, k = placement_rank(pl, a, NULL, top, copies);
		for (unsigned j = 0; j < k; j++)
			for (unsigned w = 0; w < copies; w++)
				got += strcmp(names[top[j]], want[w]) == 0;
		if (k == copies && got == copies)
			break;
	}
	placement_free(pl);
	T_ASSERT(a < 100000);
	return a;
}

/* A pass cut short by a list change (heal_cut in the header).  A static
 * pod of four: s[0], s[1], the slow fake (slow_read's reader) and a
 * second address of the fake that answers the poll "left" once told to,
 * the members with --repair-grace HEAL_GRACE.  s[0] holds alice's 16 MiB
 * block placed on itself and the slow fake (copies 2) and a 4 KiB one
 * placed on the leaving member alone (copies 1), whose top over the list
 * without it is s[1]: s[0]'s first pass sends the fake the 16 MiB
 * (slowly) and the leaving member the 4 KiB.  Once the fake reads, the
 * leaving member says so: s[1] must come to hold the 4 KiB block (the
 * new list's pass) while s[0] has not given the slow member up -- no
 * "lost a member", repair.errors 0 when the block is there -- and the
 * first pass cut short (repair.cut).  Before, the new list's pass waited
 * for the first, which ended only when the fake was given up (7.2 s after
 * it began reading; logged and counted first).  The claim is that order
 * of events, not a time: a bound of the grace + 3 s, fixed, failed on a
 * loaded machine and said nothing the order does not (session 45). */
/* heal_cut's pod of four (heal_cut, pace_cut): s[0] and s[1] (sub: their
 * bases), the slow fake (M_HEAL_CUT: slow_read's reader) and a second
 * address of the fake that answers the poll "left" once told to, the
 * members started with the options of more; their addresses in addr, in
 * that order: s[0], s[1], the slow fake, the leaving one. */
static void heal_cut_pod(struct tsrv s[2], char sub[2][600], char addr[4][32],
			 const char *const *more)
{
	char tenants[700], members[160];
	uint16_t fp = listen_tcp(&F.lfd), lp = listen_tcp(&F.lfd_left);
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const uint16_t all[4] = { port[0], port[1], fp, lp };

	for (int i = 0; i < 4; i++)
		snprintf(addr[i], 32, "127.0.0.1:%u", all[i]);
	fake_start(M_HEAL_CUT, tenants, "root " SECRET_ROOT " admin\n");
	members_of(members, sizeof(members), all, 4);
	pod_start(s, sub, port, members, tenants, more);
}

static void phase_heal_cut(void)
{
	char sub[2][600], addr[4][32], names[4][32], three[3][32];
	const char *const more[] = { "--repair-grace", HEAL_GRACE, NULL };
	const char *s1, *s0, *slow, *gone;
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	uint64_t a_big, a_small, t0, ms, end, left, cut = 0, errors = 0;
	bool lost;
	struct kc c;

	heal_cut_pod(s, sub, addr, more);
	s0 = addr[0];
	s1 = addr[1];
	slow = addr[2];
	gone = addr[3];
	memcpy(names, addr, sizeof(names)); /* (anchor_of sorts them) */
	memcpy(three, addr, sizeof(three));
	a_big = anchor_of(names, 4, (const char *const[]){ s0, slow }, 2, 1);
	/* the small one on the leaving member, and on s[1] once it is gone */
	for (a_small = 1;; a_small++) {
		a_small = anchor_of(names, 4, (const char *const[]){ gone }, 1, a_small);
		if (anchor_of(three, 3, (const char *const[]){ s1 }, 1, a_small) == a_small)
			break;
	}
	fwd_flags = PROTO_IF_PLACED;
	vlen = SLOW_VLEN;
	fwd_anchor = a_big;
	forward_put_key(&s[0], ns, "cut-big", 2);
	vlen = VLEN;
	fwd_anchor = a_small;
	forward_put_key(&s[0], ns, "cut-small", 1);
	fwd_anchor = 1;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.lie_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&F.lie_ns) != 0); /* the first pass sends the fake its copy */
	atomic_store(&F.leave, true);
	while (!atomic_load(&F.left_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	left = atomic_load(&F.left_ns);
	T_ASSERT(left != 0); /* s[0]'s poll (or s[1]'s) was told */
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	t0 = left;
	fwd_wait(&c, ns2, (const char *const[]){ "cut-small" }, 1, &t0, &ms);
	kc_close(&c);
	/* read as soon as the block is there: what came before it */
	lost = log_says(s[0].log, "repair: lost a member");
	T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.errors", true, &errors), 0);
	T_RC(kc_stat_once(0, s[0].sock, "root", SECRET_ROOT, "repair.cut", true, &cut), 0);
	printf("heal_cut: a member left while a pass sent a slow member 16 MiB: the block the "
	       "new list places on a healthy member there %" PRIu64 " ms after the leave "
	       "(grace %s); %" PRIu64 " pass(es) cut; the slow member given up before: %s, "
	       "repair.errors %" PRIu64 "\n", ms, HEAL_GRACE, cut, lost ? "yes" : "no", errors);
	T_ASSERT(ms != UINT64_MAX); /* healed at all, within fwd_wait's 20 s */
	/* healed before the slow member was given up: the cut freed the new
	 * list's pass (before: after it, 1 + the frames in flight counted) */
	T_ASSERT(!lost);
	T_EQ_U64(errors, 0);
	T_GE_INT(cut, 1);
	T_ASSERT(log_says(s[0].log, "repair pass cut short"));
	pod_stop(s, sub);
}

/* A member named by a host whose nameserver does not answer: the shim's
 * getaddrinfo of DNS_HOST holds 10 s (shim_sync.c), the member runs with
 * --peer-connect-timeout DNS_CONNECT_MS.  A forward to it must be given
 * up within DNS_BOUND_MS of its put, timed out (the lookup was outside
 * the connect timeout: held the resolver's 10 s, then -EHOSTUNREACH);
 * SIGTERM while a lookup is held must stop the member within
 * DNS_STOP_MS (its stop waited the lookups out). */
#define DNS_HOST "held.kvtier.test"
#define DNS_CONNECT_MS "1000"
#define DNS_BOUND_MS 2000
#define DNS_STOP_MS 600
/* A forwarded copy the member refuses busy (fwd_busy in the header).
 * The server and the fake, which answers the first BUSY_REFUSE PUT items
 * KVT_EBUSY (its reservation full) and stores the next: alice's 4 KiB
 * forward must be stored there within busy_bound_ms (below), sent again twice
 * (a refused copy was counted as an error and lost until the member
 * list changed).  Then one the fake always refuses: given up after
 * REPAIR_BUSY_TRIES (3) more sends, counted. */
#define BUSY_DELAYS_MS 300 /* repair.c's delays before the second and third sends */
#define BUSY_TRIES 3u      /* repair.c's REPAIR_BUSY_TRIES */
/* The bound on a copy refused busy twice, against the same forward
 * stored at once in the same run (base_ms: the machine's load): the
 * delays three times over and ten such sends.  It was 2,500 ms, fixed
 * (session 46); the defect it guards is the copy lost (never stored).
 * (Twice the delays was too tight: at load 10 the baseline is 1-3 ms
 * -- on a lane started anew too -- while the copy's two timed waits and
 * three sends took 580 and 621 ms once each in 7 runs, against bounds
 * of 630 and 610: review46a.) */
static uint64_t busy_bound_ms(uint64_t base_ms)
{
	return 3 * BUSY_DELAYS_MS + 10 * base_ms;
}

/* The baseline: a forward of key the busy fake stores at once (its
 * refusals spent), ms from its put to its store. */
static uint64_t busy_base_ms(const char *key)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	unsigned ok = atomic_load(&F.busy_ok);
	uint64_t t0 = tsrv_now_ns(), end = t0 + 10000000000ull;

	forward_put_key(&srv, ns, key, 2);
	while (atomic_load(&F.busy_ok) == ok && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_EQ_INT(atomic_load(&F.busy_ok), ok + 1);
	return (tsrv_now_ns() - t0) / 1000000;
}

/* A stop during the lane's 400 ms delay, a copy queued: the server's
 * own stop -- from its log's "stopping" to its "stopped", timestamps of
 * microseconds -- within that of a plain server in the same run and half
 * the delay (the delay waited out: 380 ms more).  It was the whole
 * process's stop bounded by twice a plain server's whole stop and 190 ms
 * (session 46; 250 ms, fixed, before): the exit's leak check and the
 * signal's delivery are most of a stop on a loaded machine (a plain stop
 * of 175-432 ms at load 10), and past 210 ms twice it passed the delay
 * waited out too (review46a).  The log's interval leaves them out; the
 * bound is the baseline and a constant, so a slow machine never covers
 * the 380 ms.  (A server with --members of itself and an address nobody
 * listens on took 89-101 ms to stop, whole: no baseline for the 400 ms.) */
#define BUSY_STOP_SLACK_MS 190
static void phase_fwd_busy(void)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t0, end, ms, base_ms, base_stop, retried = 0, dropped = 0, fwd_dropped = 0;
	uint64_t own, base_own;
	unsigned refused;
	char dir[700], data[720];
	struct tsrv plain;

	pod_fake("fwd_busy", M_FWD_BUSY, "root " SECRET_ROOT " admin\n", NULL);
	t0 = tsrv_now_ns();
	forward_put_key(&srv, ns, "busy-then-stored", 2);
	ms = busy_stored_ms(t0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_busy_retried",
			  true, &retried), 0);
	T_ASSERT(ms != UINT64_MAX); /* stored at all (the old defect: lost) */
	base_ms = busy_base_ms("busy-baseline");
	printf("fwd_busy: a copy refused busy %u times stored after %" PRIu64 " ms (bound %"
	       PRIu64 ": one stored at once took %" PRIu64 " ms), %" PRIu64 " sent again\n",
	       atomic_load(&F.busy_refused), ms, busy_bound_ms(base_ms), base_ms, retried);
	T_LE_INT(ms, busy_bound_ms(base_ms));
	T_EQ_INT(atomic_load(&F.busy_refused), BUSY_REFUSE);
	T_EQ_U64(retried, BUSY_REFUSE);

	/* always refused: given up after BUSY_TRIES more, counted */
	t0 = tsrv_now_ns();
	forward_put_key(&srv, ns, BUSY_ALWAYS, 2);
	end = t0 + 10000000000ull;
	while (dropped == 0 && tsrv_now_ns() < end) {
		T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_busy_dropped",
				  true, &dropped), 0);
		if (!dropped)
			tsrv_sleep_ms(20);
	}
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_busy_retried",
			  true, &retried), 0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_dropped", false,
			  &fwd_dropped), 0);
	printf("fwd_busy: a copy always refused given up after %" PRIu64 " ms, sent %u times; "
	       "%" PRIu64 " sent again in all, %" PRIu64 " given up\n",
	       (tsrv_now_ns() - t0) / 1000000, atomic_load(&F.busy_refused) - BUSY_REFUSE,
	       retried, dropped);
	T_EQ_U64(dropped, 1);
	T_EQ_U64(retried, BUSY_REFUSE + BUSY_TRIES);
	T_EQ_INT(atomic_load(&F.busy_refused), BUSY_REFUSE + 1 + BUSY_TRIES);
	T_EQ_INT(atomic_load(&F.busy_ok), 2); /* (and the baseline's) */
	T_EQ_U64(fwd_dropped, 0); /* (the queue's, not the member's refusals) */

	/* again, stopped 20 ms into the 400 ms delay after its third
	 * refusal (the copy queued: ASan's leak check at the exit) */
	refused = atomic_load(&F.busy_refused);
	forward_put_key(&srv, ns, BUSY_ALWAYS "-stop", 2); /* (a put again: not forwarded) */
	end = tsrv_now_ns() + 10000000000ull;
	while (atomic_load(&F.busy_refused) < refused + 3 && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_EQ_INT(atomic_load(&F.busy_refused), refused + 3);
	tsrv_sleep_ms(20);
	fake_stop();
	ms = stop_timed(&srv);
	own = log_stop_us(srv.log);
	tsrv_check_reports(base);
	/* the baseline: a plain server's stop (its own base: its own log) */
	snprintf(dir, sizeof(dir), "%s/fwd_busy_plain", base);
	T_OK(mkdir(dir, 0700));
	T_ASSERT(snprintf(data, sizeof(data), "%s/data", dir) < (int)sizeof(data));
	tsrv_start(&plain, bin, dir, data, NULL, (const char *[]){ "--ssd", "0", NULL });
	base_stop = stop_timed(&plain);
	base_own = log_stop_us(plain.log);
	printf("fwd_busy: stopped during the lane's delay: stopping to stopped in %.1f ms "
	       "(bound %.1f: a plain server's %.1f ms); the whole stop %" PRIu64 " ms beside "
	       "%" PRIu64 " ms\n", own / 1e3, base_own / 1e3 + BUSY_STOP_SLACK_MS,
	       base_own / 1e3, ms, base_stop);
	T_LE_INT(own, base_own + BUSY_STOP_SLACK_MS * 1000ull);
	tsrv_check_reports(dir);
}

/* A copy refused busy waits out its delay in its lane, and another
 * copy to that member put meanwhile (another tenant's, say, whose
 * reservation there has room) does not (fwd_busy_hol in
 * the header).  The fake refuses every item of BUSY_ALWAYS...: after its
 * third refusal the copy is due again in 400 ms; a copy of another key
 * forwarded 10 ms later must be stored before that fourth send (the
 * lane slept out the delay before sending anything: stored after
 * 381-390 ms), and the refused copy still waits out its delay. */
#define BUSY_HOL_DELAY_MS 400 /* repair.c's REPAIR_BUSY_MS << 2 */
static void phase_fwd_busy_hol(void)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t3, t0, end, ok_ms = UINT64_MAX, fourth_ms = UINT64_MAX;

	pod_fake("fwd_busy_hol", M_FWD_BUSY, "root " SECRET_ROOT " admin\n", NULL);
	forward_put_key(&srv, ns, BUSY_ALWAYS, 2);
	end = tsrv_now_ns() + 10000000000ull;
	while (atomic_load(&F.busy_refused) < 3 && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_EQ_INT(atomic_load(&F.busy_refused), 3);
	t3 = atomic_load(&F.busy_refused_ns);
	tsrv_sleep_ms(10);
	t0 = tsrv_now_ns();
	forward_put_key(&srv, ns, "other-key", 2);
	while ((!atomic_load(&F.busy_ok) || atomic_load(&F.busy_refused) < 4) &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	if (atomic_load(&F.busy_ok))
		ok_ms = (atomic_load(&F.busy_ok_ns) - t0) / 1000000;
	if (atomic_load(&F.busy_refused) >= 4)
		fourth_ms = (atomic_load(&F.busy_refused_ns) - t3) / 1000000;
	printf("fwd_busy_hol: another key's copy stored after %" PRIu64 " ms, refused "
	       "before it %u times; the refused copy sent again %" PRIu64 " ms after its "
	       "third refusal (delay %d)\n", ok_ms, atomic_load(&F.busy_ok_refused), fourth_ms,
	       BUSY_HOL_DELAY_MS);
	T_ASSERT(ok_ms != UINT64_MAX && fourth_ms != UINT64_MAX);
	/* stored before the refused copy was due again, not behind its delay */
	T_EQ_INT(atomic_load(&F.busy_ok_refused), 3);
	T_LE_INT(ok_ms, BUSY_HOL_DELAY_MS / 2);
	/* and the refused copy waited its delay out (not sent with it) */
	T_LE_INT(BUSY_HOL_DELAY_MS - 20, fourth_ms);
	stop();
	tsrv_check_reports(base);
}

/* A healing pass's copy the member refuses busy (heal_busy in the
 * header).  The server and the fake of fwd_busy, the server with
 * --repair-grace HEAL_BUSY_GRACE: its first pass (its list set at start)
 * sends alice's block, put placed but not forwarded, to the fake, which
 * refuses it busy, then once more: it must be stored, by the fake's lane
 * (handed to it once, sent again by it once), with no second pass (the
 * pass counted it as an error, and it was lost until the member list
 * changed).  Those counts are the claim; the time it took is printed,
 * not bounded (a fixed 2.5 s said nothing more, and a loaded machine
 * failed it: session 45). */
#define HEAL_BUSY_GRACE "3000" /* (past the put after the start: fwd_heal's HEAL_GRACE) */
static void phase_heal_busy(void)
{
	const char *const opts[] = { "--repair-grace", HEAL_BUSY_GRACE, NULL };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t1, end, ms, handed = 0, retried = 0, passes = 0;

	pod_fake("heal_busy", M_FWD_BUSY, "root " SECRET_ROOT " admin\n", opts);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&srv, ns, "heal-busy", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.busy_refused) && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_ASSERT(atomic_load(&F.busy_refused) != 0); /* the pass sent it */
	t1 = atomic_load(&F.busy_refused_ns);
	ms = busy_stored_ms(t1);
	printf("heal_busy: a healing pass's copy refused busy %u times stored %" PRIu64
	       " ms after the pass's refusal\n", atomic_load(&F.busy_refused), ms);
	T_ASSERT(ms != UINT64_MAX); /* stored at all, within busy_stored_ms's 10 s */
	T_EQ_INT(atomic_load(&F.busy_refused), BUSY_REFUSE);
	T_EQ_INT(atomic_load(&F.busy_ok), 1);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.busy_handed", false,
			  &handed), 0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_busy_retried",
			  false, &retried), 0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.passes", false, &passes),
	     0);
	printf("heal_busy: %" PRIu64 " handed to the lane, sent again by it %" PRIu64
	       " times, %" PRIu64 " pass\n", handed, retried, passes);
	T_EQ_U64(handed, 1);
	T_EQ_U64(retried, BUSY_REFUSE - 1);
	T_EQ_U64(passes, 1);
	stop();
	tsrv_check_reports(base);
}

/* A PUT refused busy as a whole (frame_busy in the header): the fake
 * answers the first BUSY_REFUSE PUT frames KVT_EBUSY, the request's op
 * with no items (doc/protocol.md, level 2): the forward must be stored
 * within busy_bound_ms, sent again as an item refused busy is, and no
 * error counted (the answer was read as one of no items: the copy lost,
 * nothing counted). */
static void phase_frame_busy(void)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t0, ms, base_ms, retried = 0, errors = 0;

	pod_fake("frame_busy", M_FRAME_BUSY, "root " SECRET_ROOT " admin\n", NULL);
	t0 = tsrv_now_ns();
	forward_put_key(&srv, ns, "frame-busy", 2);
	ms = busy_stored_ms(t0);
	T_ASSERT(ms != UINT64_MAX); /* stored at all (the old defect: lost) */
	base_ms = busy_base_ms("frame-baseline");
	printf("frame_busy: a copy whose PUT was refused busy as a whole %u times stored "
	       "after %" PRIu64 " ms (bound %" PRIu64 ": one stored at once took %" PRIu64
	       " ms)\n", atomic_load(&F.busy_refused), ms, busy_bound_ms(base_ms), base_ms);
	T_LE_INT(ms, busy_bound_ms(base_ms));
	T_EQ_INT(atomic_load(&F.busy_refused), BUSY_REFUSE);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forward_busy_retried",
			  false, &retried), 0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.errors", false, &errors),
	     0);
	printf("frame_busy: %" PRIu64 " sent again, %" PRIu64 " errors\n", retried, errors);
	T_EQ_U64(retried, BUSY_REFUSE);
	T_EQ_U64(errors, 0);
	stop();
	tsrv_check_reports(base);
}

/* A copy refused busy many times over (busy_dup in the header): the
 * server of heal_busy, the fake answering the pass's PUT with its one
 * item refused busy in DUP_FRAMES frames of MORE, then the whole frame
 * refused busy.  The copy must be handed to the lane once and stored
 * once (each answer handed it again: 31 copies of one block queued and
 * sent to the member that refused it, unpaced, for ~30 small frames). */
static void phase_busy_dup(void)
{
	const char *const opts[] = { "--repair-grace", HEAL_BUSY_GRACE, NULL };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, ms, handed = 0, copied = 0;

	pod_fake("busy_dup", M_BUSY_DUP, "root " SECRET_ROOT " admin\n", opts);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&srv, ns, "busy-dup", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.dup_done) && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_ASSERT(atomic_load(&F.dup_done)); /* the pass sent it */
	ms = busy_stored_ms(atomic_load(&F.busy_refused_ns));
	T_ASSERT(ms != UINT64_MAX); /* stored by the lane */
	tsrv_sleep_ms(500); /* the lane's batch answered (one batch: the same due time) */
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.busy_handed", false,
			  &handed), 0);
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.forwarded", false,
			  &copied), 0);
	printf("busy_dup: one copy refused busy %u times in one answer: handed to the lane "
	       "%" PRIu64 " times, stored %u times (%" PRIu64 " ms), forwarded %" PRIu64 "\n",
	       atomic_load(&F.busy_refused), handed, atomic_load(&F.busy_ok), ms, copied);
	T_EQ_U64(handed, 1);
	T_EQ_INT(atomic_load(&F.busy_ok), 1);
	T_EQ_U64(copied, 1);
	stop();
	tsrv_check_reports(base);
}

/* A pass's copy refused busy, paced as the pass's (heal_pace in the
 * header).  The server and the fwd_busy fake, --repair-rate and
 * --repair-idle-rate 1 MiB/s, alice's blocks "pace-a" and "pace-b" of
 * 1 MiB each put placed (not forwarded): the pass sends "pace-a" (the
 * bucket's burst), then "pace-b" once the bucket refilled (the baseline:
 * PACE_GAP = its time after "pace-a"); the fake refuses "pace-a" busy,
 * and its lane must send it again no sooner than half of PACE_GAP after
 * "pace-b" (a lane's sends were unpaced: 100 ms after the pass read the
 * refusal, whatever the rates). */
static void phase_heal_pace(void)
{
	const char *const opts[] = { "--repair-grace", HEAL_BUSY_GRACE, "--repair-rate", "1M",
				     "--repair-idle-rate", "1M", NULL };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, gap, again, handed = 0;

	pod_fake("heal_pace", M_HEAL_PACE, "root " SECRET_ROOT " admin\n", opts);
	fwd_flags = PROTO_IF_PLACED;
	vlen = 1u << 20;
	fwd_anchor = 1;
	forward_put_key(&srv, ns, "pace-a", 2);
	fwd_anchor = 2;
	forward_put_key(&srv, ns, "pace-b", 2);
	vlen = VLEN;
	fwd_anchor = 1;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 30000000000ull;
	while (!atomic_load(&F.pace_a2_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&F.pace_a_ns) && atomic_load(&F.pace_b_ns) &&
		 atomic_load(&F.pace_a2_ns));
	gap = (atomic_load(&F.pace_b_ns) - atomic_load(&F.pace_a_ns)) / 1000000;
	again = (atomic_load(&F.pace_a2_ns) - atomic_load(&F.pace_b_ns)) / 1000000;
	T_RC(kc_stat_once(0, srv.sock, "root", SECRET_ROOT, "repair.busy_handed", false,
			  &handed), 0);
	printf("heal_pace: at 1 MiB/s the pass sent its second 1 MiB %" PRIu64 " ms after the "
	       "first; the lane sent the first again %" PRIu64 " ms after the second (bound: "
	       "half the first gap); handed %" PRIu64 "\n", gap, again, handed);
	T_EQ_U64(handed, 1);
	T_GE_INT(gap, 500); /* the rate holds the pass at all (else no baseline) */
	T_GE_INT(again, gap / 2);
	stop();
	tsrv_check_reports(base);
}

/* One numeric statistic of s (admin root), or 0 where it lacks it.
 * Refused busy (lane_busy's --tenant-conns 1: root's last connection not
 * yet closed there), asked again. */
static uint64_t stat_of(const struct tsrv *s, const char *name)
{
	uint64_t v = 0, end = tsrv_now_ns() + 5000000000ull;
	int rc;

	while ((rc = kc_stat_once(0, s->sock, "root", SECRET_ROOT, name, true, &v)) ==
		       KVT_EBUSY &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	T_RC(rc, 0);
	return v;
}

/* A lane's connection kept from batch to batch (lane_reuse in the
 * header).  The server and a fake that stores every copy, the server with
 * KVTD_TEST_LANE_IDLE_MS LANE_IDLE_MS and a grace past the phase (no
 * pass).  LANE_BATCHES forwards of alice's, each put once the one before
 * is stored (a batch each: repair.forward_passes): they must come on one
 * connection (the fake counts those that carried an EXISTS or a PUT;
 * each batch opened its own: LANE_BATCHES, a TLS handshake each in a TLS
 * pod), the server must close it once idle, and the next forward must
 * open a new one. */
#define LANE_BATCHES 4u
#define LANE_IDLE_MS "500"
static void phase_lane_reuse(void)
{
	const char *const opts[] = { "--repair-grace", "600000", NULL };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, t_idle, passes, connects, reused;
	char key[32];

	lane_pod("lane_reuse", LANE_IDLE_MS, "root " SECRET_ROOT " admin\n", opts);
	for (unsigned i = 0; i < LANE_BATCHES; i++) {
		snprintf(key, sizeof(key), "lane-%u", i);
		forward_put_key(&srv, ns, key, 2);
		end = tsrv_now_ns() + 10000000000ull;
		while (atomic_load(&F.busy_ok) < i + 1 && tsrv_now_ns() < end)
			tsrv_sleep_ms(2);
		T_EQ_INT(atomic_load(&F.busy_ok), i + 1);
	}
	passes = stat_of(&srv, "repair.forward_passes");
	connects = stat_of(&srv, "repair.lane_connects");
	reused = stat_of(&srv, "repair.lane_reused");
	printf("lane_reuse: %u forwards in %" PRIu64 " batches came on %u connection(s) "
	       "(repair.lane_connects %" PRIu64 ", lane_reused %" PRIu64 ")\n", LANE_BATCHES,
	       passes, atomic_load(&F.data_conns), connects, reused);
	T_EQ_U64(passes, LANE_BATCHES);
	T_EQ_INT(atomic_load(&F.data_conns), 1);
	T_EQ_U64(connects, 1);
	T_EQ_U64(reused, LANE_BATCHES - 1);

	/* idle: closed by the server (the lane's thread ends) */
	t_idle = atomic_load(&F.busy_ok_ns);
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.data_closed) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_EQ_INT(atomic_load(&F.data_closed), 1);
	printf("lane_reuse: the idle connection closed by the server %" PRIu64
	       " ms after its last batch was stored (KVTD_TEST_LANE_IDLE_MS %s)\n",
	       (atomic_load(&F.data_closed_ns) - t_idle) / 1000000, LANE_IDLE_MS);
	/* (the idle timeout is a lower bound: not before it) */
	T_GE_INT((atomic_load(&F.data_closed_ns) - t_idle) / 1000000, atoi(LANE_IDLE_MS) / 2);

	/* the next forward: a new connection */
	forward_put_key(&srv, ns, "lane-after-idle", 2);
	end = tsrv_now_ns() + 10000000000ull;
	while (atomic_load(&F.busy_ok) < LANE_BATCHES + 1 && tsrv_now_ns() < end)
		tsrv_sleep_ms(2);
	T_EQ_INT(atomic_load(&F.busy_ok), LANE_BATCHES + 1);
	T_EQ_INT(atomic_load(&F.data_conns), 2);
	T_EQ_U64(stat_of(&srv, "repair.lane_connects"), 2);
	T_EQ_U64(stat_of(&srv, "repair.errors"), 0);
	stop();
	tsrv_check_reports(base);
}

/* A lane's kept connection closed when the member list changes
 * (lane_list in the header).  A static pod of three: the server, the
 * fake storing every copy, and a second address of the fake that answers
 * the poll "left" once told to; alice's forwards placed on the server and
 * the fake.  Two batches come on one connection; then the third member
 * leaves (cluster.epoch moves): the next batch must come on a new
 * connection (the member at that address may be another process now, or
 * no longer the pod's), and the one after on that one again. */
static void lane_put_stored(const char *key, unsigned want)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end;

	forward_put_key(&srv, ns, key, 2);
	end = tsrv_now_ns() + 10000000000ull;
	while (atomic_load(&F.busy_ok) < want && tsrv_now_ns() < end)
		tsrv_sleep_ms(2);
	T_EQ_INT(atomic_load(&F.busy_ok), want);
}

static void phase_lane_list(void)
{
	char tenants[700], dir[700], self[32], members[120], names[3][32], me[32], fake[32];
	uint16_t fp = listen_tcp(&F.lfd), lp = listen_tcp(&F.lfd_left), sp = listen_tcp(NULL);
	const char *extra[] = { "--listen", self, "--advertise", self, "--members", members,
				"--ssd", "0", "--repair-grace", "600000", NULL };
	uint64_t epoch0, epoch, end;

	snprintf(self, sizeof(self), "127.0.0.1:%u", sp);
	snprintf(names[0], 32, "127.0.0.1:%u", sp);
	snprintf(names[1], 32, "127.0.0.1:%u", fp);
	snprintf(names[2], 32, "127.0.0.1:%u", lp);
	snprintf(me, sizeof(me), "%s", names[0]);
	snprintf(fake, sizeof(fake), "%s", names[1]);
	/* (anchor_of sorts names in place: the wanted ones apart) */
	fwd_anchor = anchor_of(names, 3, (const char *const[]){ me, fake }, 2, 1);
	fake_start(M_LANE, tenants, "root " SECRET_ROOT " admin\n");
	members_of(members, sizeof(members), (const uint16_t[]){ sp, fp, lp }, 3);
	snprintf(dir, sizeof(dir), "%s/lane_list", base);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	lane_put_stored("list-0", 1);
	lane_put_stored("list-1", 2);
	T_EQ_INT(atomic_load(&F.data_conns), 1);
	epoch0 = stat_of(&srv, "cluster.epoch");
	atomic_store(&F.leave, true);
	end = tsrv_now_ns() + 20000000000ull;
	while ((epoch = stat_of(&srv, "cluster.epoch")) == epoch0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(epoch != epoch0); /* the third member left the list */
	lane_put_stored("list-2", 3);
	lane_put_stored("list-3", 4);
	printf("lane_list: 2 batches, a list change, 2 batches: %u connection(s) "
	       "(repair.lane_connects %" PRIu64 ", lane_reused %" PRIu64 ")\n",
	       atomic_load(&F.data_conns), stat_of(&srv, "repair.lane_connects"),
	       stat_of(&srv, "repair.lane_reused"));
	T_EQ_INT(atomic_load(&F.data_conns), 2);
	T_EQ_U64(stat_of(&srv, "repair.lane_connects"), 2);
	T_EQ_U64(stat_of(&srv, "repair.lane_reused"), 2);
	fwd_anchor = 1;
	stop();
	tsrv_check_reports(base);
}

/* The forwarded value of key in namespace ns (its digest), read on c
 * (logged in as its tenant): there, byte-exact. */
static void forward_read_back(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN],
			      const char *key)
{
	uint8_t ns2[PROTO_DIGEST_LEN], *want = malloc(VLEN);
	struct kc_value v;
	struct kvt_key k;

	T_ASSERT(want);
	T_RC(kc_register(c, &desc, ns2, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns2)) == 0);
	kvt_key_set(&k, key, strlen(key));
	tsrv_fill(want, VLEN, 7);
	T_RC(kc_get(c, ns2, &k, 0, 0, 0, 0, &v), KVT_OK);
	T_EQ_U64(v.len, VLEN);
	T_ASSERT(v.crc_ok && memcmp(v.bytes, want, VLEN) == 0);
	kc_value_free(&v);
	free(want);
}

/* ... read at server s on a connection of its own, as tenant. */
static void read_back_at(const struct tsrv *s, const char *tenant, const char *secret,
			 const uint8_t ns[PROTO_DIGEST_LEN], const char *key)
{
	struct kc c;

	T_RC(kc_connect_unix(&c, s->sock), 0);
	T_RC(kc_login(&c, tenant, secret), 0);
	forward_read_back(&c, ns, key);
	kc_close(&c);
}

/* A lane's connection the member refuses busy (lane_busy in the header).
 * Two real members with --tenant-conns 1 (the tenants file's first
 * tenant, the pod's polls' own, is another); this test holds alice's one
 * connection to s[1], and alice's forward put to s[0] sends its copy to
 * s[1] as alice: refused KVT_EBUSY (server.tenant_conns_refused there).
 * Once it is, the test lets go of its connection: the copy must reach
 * s[1], sent again by the lane as a copy refused busy is (it was lost,
 * an error, until the member list changed), counted
 * (repair.lane_conn_busy, repair.forward_busy_retried).  Then, the
 * connection held throughout: a copy given up after REPAIR_BUSY_TRIES
 * more refusals (repair.forward_busy_dropped), not sent on forever. */
#define LANE_BUSY_IDLE_MS "200" /* the lane's connection lets go of the slot soon */
static void phase_lane_busy(void)
{
	char sub[2][600];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--tenant-conns", "1", "--repair-grace", "600000", NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, r0, r1, retried, dropped, conn_busy, fwd;
	struct kc c;
	int rc;

	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\n", LANE_BUSY_IDLE_MS, more);

	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	r0 = stat_of(&s[1], "server.tenant_conns_refused");
	forward_put_key(&s[0], ns, "lane-busy", 2);
	end = tsrv_now_ns() + 10000000000ull;
	while ((r1 = stat_of(&s[1], "server.tenant_conns_refused")) == r0 &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	T_GE_INT(r1, r0 + 1); /* the lane's connection refused */
	kc_close(&c);
	end = tsrv_now_ns() + 10000000000ull;
	while ((fwd = stat_of(&s[0], "repair.forwarded")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	retried = stat_of(&s[0], "repair.forward_busy_retried");
	dropped = stat_of(&s[0], "repair.forward_busy_dropped");
	conn_busy = stat_of(&s[0], "repair.lane_conn_busy");
	printf("lane_busy: a copy whose connection the member refused busy (--tenant-conns 1) "
	       "forwarded: %" PRIu64 "; lane_conn_busy %" PRIu64 ", sent again %" PRIu64
	       ", given up %" PRIu64 ", errors %" PRIu64 "\n", fwd, conn_busy, retried,
	       dropped, stat_of(&s[0], "repair.errors"));
	T_EQ_U64(fwd, 1);
	T_GE_INT(conn_busy, 1);
	T_GE_INT(retried, 1);
	T_EQ_U64(dropped, 0);
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	/* there, byte-exact (once the lane's idle connection let go of
	 * alice's one slot) */
	end = tsrv_now_ns() + 10000000000ull;
	do {
		T_RC(kc_connect_unix(&c, s[1].sock), 0);
		rc = kc_login(&c, "alice", SECRET_ALICE);
		if (rc != 0) {
			kc_close(&c);
			tsrv_sleep_ms(20);
		}
	} while (rc != 0 && tsrv_now_ns() < end);
	T_RC(rc, 0);
	forward_read_back(&c, ns, "lane-busy");

	/* the slot held throughout (c): given up after the tries, counted */
	r0 = stat_of(&s[1], "server.tenant_conns_refused");
	forward_put_key(&s[0], ns, "lane-busy-held", 2);
	end = tsrv_now_ns() + 10000000000ull;
	while ((dropped = stat_of(&s[0], "repair.forward_busy_dropped")) == 0 &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	r1 = stat_of(&s[1], "server.tenant_conns_refused");
	printf("lane_busy: the slot held: given up %" PRIu64 ", refused %" PRIu64
	       " times, sent again %" PRIu64 " in all\n", dropped, r1 - r0,
	       stat_of(&s[0], "repair.forward_busy_retried"));
	T_EQ_U64(dropped, 1);
	T_EQ_U64(r1 - r0, 1 + BUSY_TRIES);
	T_EQ_U64(stat_of(&s[0], "repair.forward_busy_retried"), retried + BUSY_TRIES);
	kc_close(&c);
	pod_members_stop(s, sub);
}

/* A lane's batch of two tenants' copies, one tenant's connection refused
 * busy (lane_busy_tenant in the header).  lane_busy's pod, each batch on
 * a connection of its own (KVTD_TEST_LANE_IDLE_MS 0); alice's namespace
 * registered at s[0] before bob's (a batch sorts by namespace: alice's
 * copies first); this test holds alice's one connection to s[1]
 * throughout.  s[1] is stopped while the lane sends bob's first copy, so
 * that alice's copy and bob's second queue behind it and go as one batch
 * once s[1] goes on: alice's connection is refused, and bob's copy must
 * still be stored (before review45b's note it was marked busy with
 * alice's, and given up with it after 3 more refusals). */
static void phase_lane_busy_tenant(void)
{
	char sub[2][600];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--tenant-conns", "1", "--repair-grace", "600000", NULL };
	struct tsrv s[2];
	uint8_t nsa[PROTO_DIGEST_LEN], nsb[PROTO_DIGEST_LEN];
	uint64_t end, fwd, dropped;
	struct kc c;

	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\nbob " SECRET_BOB " tenant\n", "0",
		more);

	T_RC(kc_connect_unix(&c, s[0].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, nsa, NULL, 0), KVT_OK);
	kc_close(&c);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);

	T_ASSERT(kill(s[1].pid, SIGSTOP) == 0);
	tsrv_wait_stopped(s[1].pid);
	forward_put_as(&s[0], nsb, "busy-tenant-warm", 2, "bob", SECRET_BOB);
	tsrv_sleep_ms(100); /* the lane took it: its HELLO waits for s[1] */
	forward_put_as(&s[0], nsa, "busy-tenant-alice", 2, "alice", SECRET_ALICE);
	forward_put_as(&s[0], nsb, "busy-tenant-bob", 2, "bob", SECRET_BOB);
	T_ASSERT(kill(s[1].pid, SIGCONT) == 0);

	end = tsrv_now_ns() + 15000000000ull;
	while ((dropped = stat_of(&s[0], "repair.forward_busy_dropped")) == 0 &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	end = tsrv_now_ns() + 5000000000ull;
	while ((fwd = stat_of(&s[0], "repair.forwarded")) < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	printf("lane_busy_tenant: alice's connection refused busy: forwarded %" PRIu64
	       " (bob's two), given up %" PRIu64 " (alice's), lane_conn_busy %" PRIu64
	       ", forward passes %" PRIu64 "\n", fwd, dropped,
	       stat_of(&s[0], "repair.lane_conn_busy"), stat_of(&s[0], "repair.forward_passes"));
	T_EQ_U64(dropped, 1);
	T_EQ_U64(fwd, 2);
	kc_close(&c);

	/* bob's second copy there, byte-exact */
	read_back_at(&s[1], "bob", SECRET_BOB, nsb, "busy-tenant-bob");
	pod_members_stop(s, sub);
}

/* A pass cut short while a worker waits for --repair-rate (pace_cut in
 * the header).  heal_cut's pod of four (the fake's second address
 * answering the poll "left" once told to), the members with
 * --repair-rate and --repair-idle-rate 1K: s[0] holds two 1 MiB blocks
 * of alice's placed on itself and s[1].  Its first pass sends s[1] the
 * first at once (the bucket's burst) and waits for the rate before the
 * second: 1 MiB at 1 KiB/s, 17 minutes.  Then a member leaves: the pass
 * must end (repair.passes, repair.cut), its second block not sent.  The
 * rate's wait looked at the stop alone: the cut pass went on waiting, and
 * the new list's healing with it.  The claim is the pass ending at all
 * within PACE_CUT_WAIT_MS, a 30th of the wait it was in. */
#define PACE_CUT_WAIT_MS 30000ull
static void phase_pace_cut(void)
{
	char sub[2][600], addr[4][32], names[4][32];
	const char *const more[] = { "--repair-grace", HEAL_GRACE, "--repair-rate", "1K",
				     "--repair-idle-rate", "1K", NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t a, end, left, passes = 0, held = 0;

	heal_cut_pod(s, sub, addr, more);
	memcpy(names, addr, sizeof(names)); /* (anchor_of sorts them) */
	a = anchor_of(names, 4, (const char *const[]){ addr[0], addr[1] }, 2, 1);
	fwd_flags = PROTO_IF_PLACED;
	vlen = 1u << 20;
	fwd_anchor = a;
	forward_put_key(&s[0], ns, "pace-cut-1", 2);
	forward_put_key(&s[0], ns, "pace-cut-2", 2);
	vlen = VLEN;
	fwd_anchor = 1;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	/* the first block on s[1] (tracked there: a placed put): the pass
	 * now waits for the rate */
	end = tsrv_now_ns() + 30000000000ull;
	while ((held = stat_of(&s[1], "repair.tracked")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	T_EQ_U64(held, 1);
	tsrv_sleep_ms(300);
	T_EQ_U64(stat_of(&s[0], "repair.passes"), 0); /* held by the rate */
	atomic_store(&F.leave, true);
	while (!atomic_load(&F.left_ns) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	left = atomic_load(&F.left_ns);
	T_ASSERT(left != 0);
	end = left + PACE_CUT_WAIT_MS * 1000000ull;
	while ((passes = stat_of(&s[0], "repair.passes")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	printf("pace_cut: a pass waiting for --repair-rate 1K (1 MiB: ~1,000 s) ended %" PRIu64
	       " ms after the leave (%" PRIu64 " pass(es), repair.cut %" PRIu64
	       ", blocks on s[1] %" PRIu64 ")\n",
	       passes ? (tsrv_now_ns() - left) / 1000000 : 0, passes,
	       stat_of(&s[0], "repair.cut"), stat_of(&s[1], "repair.tracked"));
	T_GE_INT(passes, 1);
	T_GE_INT(stat_of(&s[0], "repair.cut"), 1);
	T_EQ_U64(stat_of(&s[1], "repair.tracked"), 1); /* the second not sent */
	pod_stop(s, sub);
}

/* A lane waiting for --repair-rate holds nothing of the others'
 * (lane_pace in the header).  A static pod of three: s[0], s[1] and
 * fwd_busy's fake, the members with --repair-rate and --repair-idle-rate
 * 1K.  s[0] holds alice's 1 MiB block placed on itself and the fake: its
 * first pass sends it at once (the bucket's burst), the fake refuses it
 * busy, and the fake's lane, sending it again 100 ms later, waits for the
 * rate (1 MiB at 1 KiB/s: ~1,000 s).  Meanwhile a 4 KiB forward of
 * alice's placed on s[0] and s[1] must reach s[1] (its own lane, whose
 * forwards are not paced) within LANE_PACE_WAIT_MS, a 30th of the wait
 * the fake's lane is in.  The lane waited holding pace_lock, which the
 * repair thread takes between passes (repair_main: the clients' view):
 * the thread was held there, and every forward queued behind it (and a
 * pass, and with the pass's workers a cut: repair_busy_now). */
#define LANE_PACE_WAIT_MS 30000ull
static void phase_lane_pace(void)
{
	char tenants[700], members[120], sub[2][600], names[3][32], s0[32], s1[32], fk[32];
	uint16_t fp = listen_tcp(&F.lfd);
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--repair-grace", HEAL_BUSY_GRACE, "--repair-rate", "1K",
				     "--repair-idle-rate", "1K", NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	uint64_t a_big, a_small, end, t0, ms, passes = 0;
	struct kc c;

	snprintf(s0, sizeof(s0), "127.0.0.1:%u", port[0]);
	snprintf(s1, sizeof(s1), "127.0.0.1:%u", port[1]);
	snprintf(fk, sizeof(fk), "127.0.0.1:%u", fp);
	memcpy(names[0], s0, 32);
	memcpy(names[1], s1, 32);
	memcpy(names[2], fk, 32);
	a_big = anchor_of(names, 3, (const char *const[]){ s0, fk }, 2, 1);
	a_small = anchor_of(names, 3, (const char *const[]){ s0, s1 }, 2, 1);
	fake_start(M_FWD_BUSY, tenants, "root " SECRET_ROOT " admin\n");
	members_of(members, sizeof(members), (const uint16_t[]){ port[0], port[1], fp }, 3);
	pod_start(s, sub, port, members, tenants, more);
	fwd_flags = PROTO_IF_PLACED;
	vlen = 1u << 20;
	fwd_anchor = a_big;
	forward_put_key(&s[0], ns, "lane-pace-big", 2);
	vlen = VLEN;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 30000000000ull;
	while (!atomic_load(&F.busy_refused) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&F.busy_refused) != 0); /* the pass sent it, refused */
	while ((passes = stat_of(&s[0], "repair.passes")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_EQ_U64(passes, 1);
	tsrv_sleep_ms(300); /* the lane (100 ms after the refusal) waits for the rate */
	T_EQ_U64(stat_of(&s[0], "repair.busy_handed"), 1);
	T_EQ_INT(atomic_load(&F.busy_refused), 1); /* not sent again: the rate holds it */
	fwd_anchor = a_small;
	t0 = tsrv_now_ns();
	forward_put_key(&s[0], ns, "lane-pace-small", 2);
	fwd_anchor = 1;
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	ms = UINT64_MAX;
	end = t0 + LANE_PACE_WAIT_MS * 1000000ull;
	while (ms == UINT64_MAX && tsrv_now_ns() < end) {
		struct kc_value v;
		struct kvt_key k;
		int rc;
		kvt_key_set(&k, "lane-pace-small", 15);
		rc = kc_get(&c, ns2, &k, 0, 0, 0, 0, &v);
		kc_value_free(&v);
		if (rc == KVT_OK)
			ms = (tsrv_now_ns() - t0) / 1000000;
		else
			T_RC(rc, KVT_MISS);
		tsrv_sleep_ms(10);
	}
	kc_close(&c);
	printf("lane_pace: a lane waiting for --repair-rate 1K (1 MiB: ~1,000 s); a forward "
	       "for another member there %" PRIu64 " ms after its put (UINT64_MAX: not "
	       "within %llu ms); the fake refused it %d time(s)\n", ms,
	       (unsigned long long)LANE_PACE_WAIT_MS, atomic_load(&F.busy_refused));
	T_ASSERT(ms != UINT64_MAX);
	T_EQ_INT(atomic_load(&F.busy_refused), 1); /* the lane still waits for the rate */
	pod_stop(s, sub);
}

/* lane_bench (a measurement, run by hand, no test runs it:
 * bench/RESULTS.md "Session 45: a lane's connection"): forwards through a
 * pod of two real members, each member's lanes with a connection a batch
 * (KVTD_TEST_LANE_IDLE_MS 0: as before session 45) and with the
 * connection kept (the default), TLS off and on, each cell a pod of its
 * own, the four in one run and then again in reverse order:
 *   trickle  LB_TRICKLE forwards of 4 KiB, each put once the one before
 *            is forwarded (repair.forwarded on a kept admin connection):
 *            a batch each -- batches/s
 *   stream   LB_STREAM forwards of 4 KiB put back to back on one
 *            connection, until all are forwarded: copies/s, batches
 * Usage: test_peer_attack KVTIERD lane_bench (a release build's). */
#define LB_TRICKLE 300u
#define LB_STREAM 5000u
static void lane_bench_cell(bool tls, const char *idle, unsigned round)
{
	char tenants[700], members[80], sub[2][600], tag[32];
	char ca[760], cert[760], key[760], k[32];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	/* (a DRAM tier past the blocks: an evicted one is not forwarded) */
	const char *plain[] = { "--repair-grace", "600000", "--dram", "1G", NULL };
	const char *tlsopt[] = { "--repair-grace", "600000", "--dram", "1G", "--tls-cert", cert,
				 "--tls-key", key, "--tls-ca", ca, "--tls-verify-client", NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint8_t *val = malloc(VLEN);
	uint64_t lens[1] = { VLEN }, t0, t_trickle = 0, t_stream, fwd = 0, b0, b1 = 0, b2, conns;
	uint32_t crc[1];
	struct kc c, adm;

	T_ASSERT(val);
	tsrv_fill(val, VLEN, 7);
	crc[0] = kvt_crc32c(0, val, VLEN);
	snprintf(tag, sizeof(tag), "-%s-%s-%u", tls ? "tls" : "tcp", idle, round);
	pod_tag = tag;
	if (tls)
		make_pki("", ca, cert, key);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, "alice " SECRET_ALICE " tenant\nroot " SECRET_ROOT
			" admin\n");
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	T_OK(setenv("KVTD_TEST_LANE_IDLE_MS", idle, 1));
	pod_start(s, sub, port, members, tenants, tls ? tlsopt : plain);
	T_OK(unsetenv("KVTD_TEST_LANE_IDLE_MS"));
	pod_tag = "";
	T_RC(kc_connect_unix(&c, s[0].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	T_RC(kc_connect_unix(&adm, s[0].sock), 0);
	T_RC(kc_login(&adm, "root", SECRET_ROOT), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.forward_passes", &b0), KVT_OK);
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < LB_TRICKLE + LB_STREAM; i++) {
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		struct proto_item it = { 0 };
		struct iovec d = { val, VLEN };
		struct kc_resp r;
		uint64_t end;
		if (i == LB_TRICKLE) {
			t_trickle = tsrv_now_ns() - t0;
			T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.forward_passes", &b1),
			     KVT_OK);
			t0 = tsrv_now_ns();
		}
		snprintf(k, sizeof(k), "lb-%u", i);
		kvt_key_set(&it.key, k, strlen(k));
		it.flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
		it.anchor = 1 + i;
		it.copies = 2;
		it.part_count = 1;
		it.part_lens = lens;
		it.part_crcs = crc;
		T_ASSERT(kc_request(&c, &f, &it, 1, &d, 1) > 0);
		T_RC(kc_recv(&c, &r, 10000), 0);
		T_EQ_INT(r.f.status, 0);
		kc_resp_free(&r);
		end = tsrv_now_ns() + 20000000000ull;
		while (i < LB_TRICKLE && fwd < i + 1 && tsrv_now_ns() < end)
			T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.forwarded", &fwd), KVT_OK);
		T_ASSERT(i >= LB_TRICKLE || fwd == i + 1);
	}
	{
		uint64_t end = tsrv_now_ns() + 60000000000ull;
		while (fwd < LB_TRICKLE + LB_STREAM && tsrv_now_ns() < end) {
			T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.forwarded", &fwd), KVT_OK);
			if (fwd < LB_TRICKLE + LB_STREAM)
				tsrv_sleep_ms(1);
		}
	}
	t_stream = tsrv_now_ns() - t0;
	if (fwd != LB_TRICKLE + LB_STREAM) {
		static const char *const why[] = { "repair.forward_dropped",
			"repair.forward_busy_dropped", "repair.forward_busy_retried",
			"repair.errors", "repair.forward_queued", "repair.lane_conn_busy",
			"repair.gone", "repair.forward_member_dropped", "dram.blocks" };
		for (unsigned j = 0; j < sizeof(why) / sizeof(why[0]); j++) {
			uint64_t v = 0;
			kc_stat(&adm, PROTO_SCOPE_ALL, why[j], &v);
			printf("lane_bench: %s %" PRIu64 "\n", why[j], v);
		}
	}
	T_EQ_U64(fwd, LB_TRICKLE + LB_STREAM);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.forward_passes", &b2), KVT_OK);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "repair.lane_connects", &conns), KVT_OK);
	printf("lane_bench: round %u tls=%s lane_idle_ms=%-4s trickle: %u batches in %.0f ms "
	       "= %.0f batches/s (%.2f ms each) | stream: %u copies in %.0f ms = %.0f copies/s, "
	       "%" PRIu64 " batches | lane connections %" PRIu64 "\n",
	       round, tls ? "on " : "off", idle, (unsigned)(b1 - b0), (double)t_trickle / 1e6,
	       (double)(b1 - b0) * 1e9 / (double)t_trickle,
	       (double)t_trickle / 1e6 / (double)(b1 - b0), LB_STREAM,
	       (double)t_stream / 1e6, (double)LB_STREAM * 1e9 / (double)t_stream, b2 - b1,
	       conns);
	kc_close(&c);
	kc_close(&adm);
	free(val);
	for (int i = 0; i < 2; i++)
		T_EQ_INT(tsrv_stop(&s[i]), 0);
}

static void phase_lane_bench(void)
{
	static const struct {
		bool tls;
		const char *idle;
	} cell[] = { { false, "0" }, { false, "2000" }, { true, "0" }, { true, "2000" } };
	unsigned n = sizeof(cell) / sizeof(cell[0]);

	for (unsigned round = 0; round < 2; round++)
		for (unsigned j = 0; j < n; j++) {
			unsigned at = round ? n - 1 - j : j;
			lane_bench_cell(cell[at].tls, cell[at].idle, round);
		}
}

static off_t dns_entered(const char *file)
{
	struct stat st;

	return stat(file, &st) == 0 ? st.st_size : 0;
}

static void phase_dns_held(void)
{
	char tenants[700], dir[700], self[32], members[120], gate[700], file[720], asan[1200];
	uint16_t sp = listen_tcp(NULL);
	const char *extra[] = { "--listen", self, "--advertise", self, "--members", members,
				"--ssd", "0", "--peer-connect-timeout", DNS_CONNECT_MS, NULL };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t0, end, ms, stop_ms;
	int gave_up;

	T_ASSERT(shim != NULL && access(shim, R_OK) == 0);
	snprintf(gate, sizeof(gate), "%s/gai", base);
	T_OK(mkdir(gate, 0700));
	snprintf(file, sizeof(file), "%s/entered", gate);
	snprintf(asan, sizeof(asan), "%s:verify_asan_link_order=0",
		 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "");
	T_OK(setenv("ASAN_OPTIONS", asan, 1));
	/* TSan sleeps atexit_sleep_ms (1 s) at exit while other threads live:
	 * the lookup's helper does, in the shim's 10 s, by design */
	snprintf(asan, sizeof(asan), "%s:atexit_sleep_ms=0",
		 getenv("TSAN_OPTIONS") ? getenv("TSAN_OPTIONS") : "");
	T_OK(setenv("TSAN_OPTIONS", asan, 1));
	T_OK(setenv("KVT_SHIM_GAI_NAME", DNS_HOST, 1));
	T_OK(setenv("KVT_SHIM_GAI_DIR", gate, 1));
	T_OK(setenv("LD_PRELOAD", shim, 1));
	snprintf(self, sizeof(self), "127.0.0.1:%u", sp);
	snprintf(members, sizeof(members), "127.0.0.1:%u,%s:1", sp, DNS_HOST);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, "alice " SECRET_ALICE " tenant\n");
	snprintf(dir, sizeof(dir), "%s/dns_held", base);
	tsrv_start(&srv, bin, base, dir, tenants, extra);
	T_OK(unsetenv("LD_PRELOAD"));

	t0 = tsrv_now_ns();
	forward_put(&srv, ns);
	end = t0 + 15000000000ull;
	while (!log_says(srv.log, "repair: cannot reach a member") && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	ms = (tsrv_now_ns() - t0) / 1000000;
	printf("dns_held: a member whose name's lookup holds 10 s, --peer-connect-timeout %s: "
	       "a forward to it given up %" PRIu64 " ms after its put (bound %d; timed out: "
	       "%s; %lld lookup(s) held)\n", DNS_CONNECT_MS, ms, DNS_BOUND_MS,
	       log_says(srv.log, "error=-110") ? "yes" : "no", (long long)dns_entered(file));
	T_ASSERT(dns_entered(file) >= 1);
	T_LE_INT(ms, DNS_BOUND_MS);
	T_ASSERT(log_says(srv.log, "error=-110"));

	/* one lookup in flight per name: a second forward's, given up on its
	 * own clock, joins the held one, as the poll's asks (each second) do
	 * (a helper per attempt: 4 lookups held by then) */
	gave_up = log_count(srv.log, "error=-110");
	forward_put_key(&srv, ns, "forwarded-again", 2);
	end = tsrv_now_ns() + 3000000000ull;
	while (log_count(srv.log, "error=-110") == gave_up && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	printf("dns_held: a second forward given up (%s): %lld lookup(s) held\n",
	       log_count(srv.log, "error=-110") > gave_up ? "yes" : "no",
	       (long long)dns_entered(file));
	T_ASSERT(log_count(srv.log, "error=-110") > gave_up);
	T_EQ_INT(dns_entered(file), 1);

	/* the lookup still held (10 s): stop */
	stop_ms = stop_timed(&srv);
	printf("dns_held: SIGTERM while a lookup is held: exited in %" PRIu64 " ms (bound %d)\n",
	       stop_ms, DNS_STOP_MS);
	T_LE_INT(stop_ms, DNS_STOP_MS);
	tsrv_check_reports(base);
}

/* One PLACED put of alice's on c (logged in): key, VLEN bytes of seed,
 * copies 1 (tracked by the server's repair thread, so drained). */
static void placed_put(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const char *key,
		       uint32_t seed)
{
	static uint8_t val[VLEN];
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = (uint8_t *)ns };
	struct proto_item it = { 0 };
	uint64_t lens[1] = { VLEN };
	uint32_t crc[1];
	struct iovec d = { val, VLEN };
	struct kc_resp r;

	tsrv_fill(val, VLEN, seed);
	crc[0] = kvt_crc32c(0, val, VLEN);
	kvt_key_set(&it.key, key, strlen(key));
	it.flags = PROTO_IF_PLACED;
	it.anchor = seed;
	it.copies = 1;
	it.part_count = 1;
	it.part_lens = lens;
	it.part_crcs = crc;
	T_ASSERT(kc_request(c, &f, &it, 1, &d, 1) > 0);
	T_RC(kc_recv(c, &r, 10000), 0);
	T_EQ_INT(r.f.status, 0);
	kc_resp_free(&r);
}

/* Run "kvtier ARGS" (a shell fragment): its exit status, its output
 * (stdout and stderr) in out. */
static int cli_run(char *out, size_t len, const char *args)
{
	char cmd[6000], path[700];
	FILE *f;
	size_t n;
	uint64_t t0;
	int st;

	snprintf(path, sizeof(path), "%s/cli.out", base);
	T_ASSERT(snprintf(cmd, sizeof(cmd), "%s %s >'%s' 2>&1", cli, args, path) <
		 (int)sizeof(cmd));
	t0 = tsrv_now_ns();
	st = system(cmd);
	T_ASSERT((f = fopen(path, "r")) != NULL);
	n = fread(out, 1, len - 1, f);
	out[n] = 0;
	fclose(f);
	printf("kvtier %.60s... -> %d in %.0f ms: %s", args, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
	       (double)(tsrv_now_ns() - t0) / 1e6, out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The command fails (exit 1) and says what. */
static void cli_fails(const char *args, const char *says)
{
	char out[4096];

	T_EQ_INT(cli_run(out, sizeof(out), args), 1);
	if (!strstr(out, says))
		T_FAIL("kvtier %s: '%s' not in: %s", args, says, out);
}

#define DRAIN_BLOCKS 8u
#define FMT(buf, ...) T_ASSERT(snprintf(buf, sizeof(buf), __VA_ARGS__) < (int)sizeof(buf))

/* Two TLS members that require a client certificate (--tls-verify-client,
 * the pod's certificate for both roles) and a plain kvtierd: kvtier
 * drain and stat through TLS, the drained member's blocks then all on
 * the other; the wrong modes refused in words, each within a second. */
static void phase_tls_drain(void)
{
	char ca[760], cert[760], key[760], tenants[700], secret[700], dir[3][700], sub[3][600];
	char said[80];
	char self[3][32], members[80], auth[1000], tls[4000], args[5000], out[4096], name[32];
	uint16_t port[3] = { listen_tcp(NULL), listen_tcp(NULL), listen_tcp(NULL) };
	struct tsrv s[3];
	uint8_t ns[PROTO_DIGEST_LEN], ns2[PROTO_DIGEST_LEN];
	unsigned long long copied = 0;
	unsigned before = 0;
	const char *p;
	struct kc c;
	uint64_t t0 = tsrv_now_ns();

	if (!cli)
		T_FAIL("usage: test_peer_attack KVTIERD tls_drain KVTIER");
	make_pki("", ca, cert, key);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants,
			"alice " SECRET_ALICE " tenant\nroot " SECRET_ROOT " admin\n");
	root_secret(secret);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	for (int i = 0; i < 3; i++) {
		const char *pod[] = { "--listen", self[i], "--advertise", self[i], "--members",
				      members, "--ssd", "0", "--tls-cert", cert, "--tls-key", key,
				      "--tls-ca", ca, "--tls-verify-client", "--repair-grace",
				      "500", NULL };
		const char *plain[] = { "--listen", self[i], "--ssd", "0", NULL };
		snprintf(self[i], sizeof(self[i]), "127.0.0.1:%u", port[i]);
		snprintf(sub[i], sizeof(sub[i]), "%s/m%d", base, i);
		T_OK(mkdir(sub[i], 0700));
		T_ASSERT(snprintf(dir[i], sizeof(dir[i]), "%s/data", sub[i]) < (int)sizeof(dir[i]));
		tsrv_start(&s[i], bin, sub[i], dir[i], tenants, i < 2 ? pod : plain);
	}
	printf("tls_drain: servers up in %.0f ms\n", (double)(tsrv_now_ns() - t0) / 1e6);
	/* Alice's blocks on member 0 (its Unix socket is plain). */
	T_RC(kc_connect_unix(&c, s[0].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned b = 0; b < DRAIN_BLOCKS; b++) {
		snprintf(name, sizeof(name), "drain-block-%u", b);
		placed_put(&c, ns, name, 100 + b);
	}
	kc_close(&c);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns2, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns2, sizeof(ns)) == 0);
	for (unsigned b = 0; b < DRAIN_BLOCKS; b++) {
		struct kvt_key k;
		snprintf(name, sizeof(name), "drain-block-%u", b);
		kvt_key_set(&k, name, strlen(name));
		before += kc_exists(&c, ns2, &k, NULL) == KVT_OK;
	}

	FMT(auth, "--tenant root --secret-file '%s'", secret);
	FMT(tls, "%s --tls-ca '%s' --tls-cert '%s' --tls-key '%s'", auth, ca,
		 cert, key);
	/* The wrong modes, in words. */
	FMT(args, "drain %s %s", self[0], auth);
	cli_fails(args, "serves TLS only: give --tls");
	FMT(args, "stat --server %s %s", self[0], auth);
	cli_fails(args, "serves TLS only: give --tls");
	FMT(args, "stat --server %s %s --tls-ca '%s'", self[0], auth, ca);
	cli_fails(args, "requires a client certificate: --tls-cert");
	FMT(args, "drain %s %s --tls-ca '%s'", self[0], auth, ca);
	cli_fails(args, "requires a client certificate: --tls-cert");
	FMT(args, "drain %s %s --tls", self[0], auth);
	cli_fails(args, "its certificate does not verify");
	FMT(args, "drain %s %s", self[2], tls);
	cli_fails(args, "does not speak TLS");
	FMT(args, "stat --server %s %s", self[2], tls);
	cli_fails(args, "does not speak TLS");
	FMT(args, "drain %s %s --tls-cert '%s'", self[0], auth, cert);
	T_EQ_INT(cli_run(out, sizeof(out), args), 1); /* a certificate without its key */
	T_ASSERT(strstr(out, "--tls-key"));

	/* stat, then drain, through TLS. */
	FMT(args, "stat --server %s %s", self[0], tls);
	T_EQ_INT(cli_run(out, sizeof(out), args), 0);
	T_ASSERT(strstr(out, "kvtierd 127.0.0.1:") && strstr(out, "connections:"));
	FMT(args, "drain %s %s --tls-server-name wrong.example", self[0], tls);
	cli_fails(args, "its certificate does not verify: hostname mismatch");
	FMT(args, "drain %s %s --tls-server-name 127.0.0.1 --timeout 30", self[0], tls);
	T_EQ_INT(cli_run(out, sizeof(out), args), 0);
	T_ASSERT((p = strstr(out, "drained (")) && sscanf(p, "drained (%llu", &copied) == 1);
	/* Every block on member 1, its bytes exact.  The figure drain prints
	 * is member 0's repair.drain_copied: the drain's own copies (until
	 * flaky47 its lifetime repair.copied; until dup48 what that grew by
	 * while the drain ran, a repair pass under way then included), at
	 * most DRAIN_BLOCKS; its log's "drain: done" says the same. */
	T_ASSERT(copied <= DRAIN_BLOCKS);
	FMT(said, "complete=yes copied=%llu exit=no", copied);
	T_ASSERT(log_says(s[0].log, said));
	for (unsigned b = 0; b < DRAIN_BLOCKS; b++) {
		static uint8_t want[VLEN];
		struct kc_value v;
		struct kvt_key k;
		snprintf(name, sizeof(name), "drain-block-%u", b);
		kvt_key_set(&k, name, strlen(name));
		T_RC(kc_get(&c, ns2, &k, 0, 0, 0, 0, &v), KVT_OK);
		tsrv_fill(want, VLEN, 100 + b);
		T_EQ_U64(v.len, VLEN);
		T_ASSERT(v.crc_ok && memcmp(v.bytes, want, VLEN) == 0);
		kc_value_free(&v);
	}
	kc_close(&c);
	printf("tls_drain: member 0 drained through TLS, %llu blocks copied (%u there before), "
	       "all %u on member 1\n", copied, before, DRAIN_BLOCKS);
	/* Drained again: nothing left to hand over, and it says 0 copied
	 * (until flaky47 member 0's lifetime repair.copied, the first
	 * drain's copies again). */
	FMT(args, "drain %s %s --tls-server-name 127.0.0.1 --timeout 30", self[0], tls);
	T_EQ_INT(cli_run(out, sizeof(out), args), 0);
	T_ASSERT((p = strstr(out, "drained (")) && sscanf(p, "drained (%llu", &copied) == 1);
	T_EQ_U64(copied, 0);
	/* and so does its log line (until dup48 the lifetime count: the
	 * first drain's copies, or a pass's, again) */
	T_EQ_INT(log_count(s[0].log, "drain: done"), 2);
	T_ASSERT(log_says(s[0].log, "complete=yes copied=0 exit=no"));
	t0 = tsrv_now_ns();
	for (int i = 0; i < 3; i++) {
		T_EQ_INT(tsrv_stop(&s[i]), 0);
		tsrv_check_reports(sub[i]);
	}
	printf("tls_drain: servers stopped in %.0f ms\n", (double)(tsrv_now_ns() - t0) / 1e6);
}

/* A member's certificate whose extendedKeyUsage is serverAuth alone, in a
 * pod requiring client certificates: the other members refuse it as a
 * client (tls_pod with it: nothing forwarded in 10 s), so kvtierd says
 * so at start, a warning in its log. */
static void phase_tls_eku(void)
{
	char ca[760], cert[760], key[760], dir[700], self[32], members[80];
	uint16_t port = listen_tcp(NULL), other = listen_tcp(NULL);
	const char *extra[] = { "--listen", self, "--advertise", self, "--members", members,
				"--ssd", "0", "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca,
				"--tls-verify-client", NULL };

	make_pki("extendedKeyUsage=serverAuth\\n", ca, cert, key);
	snprintf(self, sizeof(self), "127.0.0.1:%u", port);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port, other);
	snprintf(dir, sizeof(dir), "%s/eku", base);
	tsrv_start(&srv, bin, base, dir, NULL, extra);
	T_EQ_INT(tsrv_stop(&srv), 0);
	T_ASSERT(log_says(srv.log, EKU_WARNING));
	printf("tls_eku: a serverAuth-only certificate in a pod requiring client "
	       "certificates: warned at start\n");
}

/* A healing pass's connection the member refuses busy (pass_busy in the
 * header).  lane_busy's pod, --repair-grace HEAL_BUSY_GRACE: s[0]'s first
 * pass copies alice's block (placed, not forwarded) to s[1], where this
 * test holds alice's one connection (--tenant-conns 1): the pass's
 * connection is refused KVT_EBUSY at AUTH.  That is a live member saying
 * wait: no repair.errors, no "cannot reach a member", counted in
 * repair.pass_conn_busy; and once the slot is let go, the pass run again
 * copies the block (it was counted as an error and logged as a member out
 * of reach). */
static void phase_pass_busy(void)
{
	char sub[2][600];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--tenant-conns", "1", "--repair-grace", HEAL_BUSY_GRACE,
				     NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, r0, r1, busy, errors, copied = 0;
	bool unreachable;
	struct kc c;

	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\n", NULL, more);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	r0 = stat_of(&s[1], "server.tenant_conns_refused");
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&s[0], ns, "pass-busy", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 20000000000ull;
	while ((r1 = stat_of(&s[1], "server.tenant_conns_refused")) == r0 &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	T_GE_INT(r1, r0 + 1); /* the pass's connection refused */
	/* its refusal taken by the pass: counted one way or the other (a
	 * fixed 50 ms here could read both counters before s[0] had seen
	 * the refusal on a loaded machine: review46a) */
	end = tsrv_now_ns() + 20000000000ull;
	while (stat_of(&s[0], "repair.pass_conn_busy") + stat_of(&s[0], "repair.errors") == 0 &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	errors = stat_of(&s[0], "repair.errors");
	unreachable = log_says(s[0].log, "repair: cannot reach a member");
	busy = stat_of(&s[0], "repair.pass_conn_busy");
	printf("pass_busy: a pass's connection refused busy (--tenant-conns 1): "
	       "repair.errors %" PRIu64 ", \"cannot reach\" logged: %s, "
	       "repair.pass_conn_busy %" PRIu64 "\n", errors, unreachable ? "yes" : "no",
	       busy);
	T_EQ_U64(errors, 0);
	T_ASSERT(!unreachable);
	T_GE_INT(busy, 1);
	/* let go: the pass run again copies it */
	kc_close(&c);
	end = tsrv_now_ns() + 20000000000ull;
	while ((copied = stat_of(&s[0], "repair.copied")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	printf("pass_busy: once let go, copied %" PRIu64 " (refused %" PRIu64 " times in all), "
	       "errors %" PRIu64 "\n", copied, stat_of(&s[0], "repair.pass_conn_busy"),
	       stat_of(&s[0], "repair.errors"));
	T_EQ_U64(copied, 1);
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	read_back_at(&s[1], "alice", SECRET_ALICE, ns, "pass-busy");
	pod_members_stop(s, sub);
}

/* A pass's connection refused busy for one tenant only
 * (pass_busy_tenant in the header).  pass_busy's pod with bob too: s[0]
 * holds a placed block of alice's (her namespace registered first: the
 * pass's first) and one of bob's, both due at s[1], where this test
 * holds alice's one connection.  Bob's block must be copied while
 * alice's slot stays held, no error counted, and alice's once it is let
 * go (the pass gave s[1] up at alice's refusal: bob's copy waited on
 * alice, pass after pass, every second, for as long as she held it). */
static void phase_pass_busy_tenant(void)
{
	char sub[2][600];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--tenant-conns", "1", "--repair-grace", HEAL_BUSY_GRACE,
				     NULL };
	struct tsrv s[2];
	uint8_t nsa[PROTO_DIGEST_LEN], nsb[PROTO_DIGEST_LEN];
	uint64_t end, copied = 0, busy;
	struct kc c;

	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\nbob " SECRET_BOB " tenant\n", NULL,
		more);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&s[0], nsa, "pass-busy-alice", 2);
	forward_put_as(&s[0], nsb, "pass-busy-bob", 2, "bob", SECRET_BOB);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 20000000000ull;
	while ((copied = stat_of(&s[0], "repair.copied")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	busy = stat_of(&s[0], "repair.pass_conn_busy");
	printf("pass_busy_tenant: alice's connection refused busy at s[1] (%" PRIu64
	       " times): copied %" PRIu64 " while she held it, repair.errors %" PRIu64 "\n",
	       busy, copied, stat_of(&s[0], "repair.errors"));
	T_EQ_U64(copied, 1); /* bob's */
	T_GE_INT(busy, 1);
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	kc_close(&c);
	end = tsrv_now_ns() + 20000000000ull;
	while ((copied = stat_of(&s[0], "repair.copied")) < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	T_EQ_U64(copied, 2);
	/* the pass over (its connections closed: one each at s[1]) */
	end = tsrv_now_ns() + 20000000000ull;
	while (stat_of(&s[0], "repair.pending") && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	T_EQ_U64(stat_of(&s[0], "repair.pending"), 0);
	read_back_at(&s[1], "bob", SECRET_BOB, nsb, "pass-busy-bob");
	read_back_at(&s[1], "alice", SECRET_ALICE, nsa, "pass-busy-alice");
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	pod_members_stop(s, sub);
}

/* lane_stale's and lane_stale_ns's outcome, said as `what`: once both
 * batches are stored (10 s at most), the kept connection closed once and
 * the second batch sent again, once, on a second connection, no error. */
static void lane_stale_check(const char *what)
{
	uint64_t resent, errors, end = tsrv_now_ns() + 10000000000ull;

	while (atomic_load(&F.busy_ok) < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(2);
	resent = stat_of(&srv, "repair.lane_resent");
	errors = stat_of(&srv, "repair.errors");
	printf("%s: stored %u of 2, closed %u, on %u connection(s); repair.lane_resent %" PRIu64
	       ", repair.errors %" PRIu64 "\n", what, atomic_load(&F.busy_ok),
	       atomic_load(&F.dropped), atomic_load(&F.data_conns), resent, errors);
	T_EQ_INT(atomic_load(&F.dropped), 1);
	T_EQ_INT(atomic_load(&F.busy_ok), 2);
	T_EQ_U64(errors, 0);
	T_EQ_U64(resent, 1);
	T_EQ_INT(atomic_load(&F.data_conns), 2);
}

/* A lane's kept connection the member closes just after the server's
 * reuse check (lane_stale in the header).  The server and the fake
 * storing every copy, KVTD_TEST_LANE_IDLE_MS STALE_IDLE_MS: a forward
 * stored, then the fake closes the kept connection when the next batch's
 * EXISTS arrives, unanswered (the server's check saw nothing readable: to
 * it, a close just after the check).  The batch must be sent again on a
 * new connection, once (no byte of an answer was read, nothing but the
 * EXISTS went out) and stored, no error (it was lost: repair.errors 1,
 * the copy on no member until the next list change's pass). */
#define STALE_IDLE_MS "10000"
static void phase_lane_stale(void)
{
	const char *const opts[] = { "--repair-grace", "600000", NULL };

	lane_pod("lane_stale", STALE_IDLE_MS, "root " SECRET_ROOT " admin\n", opts);
	lane_put_stored("stale-0", 1);
	atomic_store(&F.drop_exists, true);
	forward_put_key(&srv, (uint8_t[PROTO_DIGEST_LEN]){ 0 }, "stale-1", 2);
	lane_stale_check("lane_stale: the kept connection closed as the next batch came");
	T_EQ_U64(stat_of(&srv, "repair.forwarded"), 2);
	stop();
	tsrv_check_reports(base);
}

/* lane_stale with the next batch in another namespace of the same
 * tenant (lane_stale_ns in the header): the kept connection's first
 * question is then an NS_REGISTER, and the fake closes at it.  The
 * batch must be sent again on a new connection all the same (review46a:
 * the registration's failure was "namespace refused by a member",
 * repair.errors 1, the copy lost, and the dead connection kept and
 * charged as a healthy one). */
static void phase_lane_stale_ns(void)
{
	const char *const opts[] = { "--repair-grace", "600000", NULL };
	const struct kvt_ns_desc other = { .model = "peer-attack-other", .dtype = "bf16",
					   .layout = "vllm-flash-nhd", .block_tokens = 16,
					   .tp_size = 1, .pp_size = 1 };
	uint8_t ns[PROTO_DIGEST_LEN];

	lane_pod("lane_stale_ns", STALE_IDLE_MS, "root " SECRET_ROOT " admin\n", opts);
	lane_put_stored("stale-ns-0", 1);
	atomic_store(&F.drop_register, true);
	fwd_desc = &other;
	forward_put_key(&srv, ns, "stale-ns-1", 2);
	fwd_desc = &desc;
	lane_stale_check("lane_stale_ns: the kept connection closed at the next batch's "
			 "NS_REGISTER");
	stop();
	tsrv_check_reports(base);
}

/* A lane's kept connection charged to --max-memory (lane_mem in the
 * header).  The server and the fake storing every copy,
 * KVTD_TEST_LANE_IDLE_MS MEM_IDLE_MS: a forward stored, its connection
 * kept; server.mem_used then, and once the server closed it idle: the
 * kept connection's read buffer (64 KiB at least) must be the difference
 * (it was charged nothing: the same figure). */
#define MEM_IDLE_MS "3000"
static void phase_lane_mem(void)
{
	const char *const opts[] = { "--repair-grace", "600000", NULL };
	uint64_t kept, idle, end;

	lane_pod("lane_mem", MEM_IDLE_MS, "root " SECRET_ROOT " admin\n", opts);
	lane_put_stored("mem-0", 1);
	tsrv_sleep_ms(50); /* (the batch's end: its arrays given back) */
	kept = stat_of(&srv, "server.mem_used");
	T_EQ_INT(atomic_load(&F.data_closed), 0); /* still kept */
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.data_closed) && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_EQ_INT(atomic_load(&F.data_closed), 1);
	tsrv_sleep_ms(50);
	idle = stat_of(&srv, "server.mem_used");
	printf("lane_mem: server.mem_used %" PRIu64 " with the lane's connection kept, %" PRIu64
	       " once closed: %" PRId64 " bytes charged for it\n", kept, idle,
	       (int64_t)(kept - idle));
	T_GE_INT(kept, idle + 65536);
	stop();
	tsrv_check_reports(base);
}

/* A lane's connection not kept when --max-memory has no room for it
 * (lane_keep in the header).  The server with --max-memory 1M and the
 * fake storing every copy, KVTD_TEST_LANE_IDLE_MS KEEP_IDLE_MS: a placed
 * put (not forwarded) first, so that the repair table is there; then this
 * test holds a PUT whose table it declares and never sends, so that the
 * server's read buffer for it is charged (loop.c: growth past
 * KVTD_RBUF_MIN; as bob: as alice, her share of the input budget is
 * over and her forward refused) and KEEP_ROOM bytes of the budget stay
 * free -- room for
 * a batch's arrays, not for a kept connection's 64 KiB read buffer.  A
 * forward must be stored all the same, and its connection closed after
 * its batch rather than kept (repair.lane_keep_refused; it was kept,
 * outside the budget, until the idle time). */
#define KEEP_IDLE_MS "10000"
#define KEEP_ROOM (40u << 10)
static void phase_lane_keep(void)
{
	const char *const opts[] = { "--repair-grace", "600000", "--max-memory", "1M", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], h[PROTO_HDR_LEN + 1] = { 0 };
	struct proto_frame f = { .op = PROTO_OP_PUT, .item_count = 1, .tag = 1 };
	uint64_t used0, used1, end, refused, t_ok;
	struct kc a;

	lane_pod("lane_keep", KEEP_IDLE_MS,
		 "root " SECRET_ROOT " admin\nbob " SECRET_BOB " tenant\n", opts);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&srv, ns, "keep-warm", 2); /* the table made: tracked */
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	used0 = stat_of(&srv, "server.mem_used");
	T_ASSERT(used0 + KEEP_ROOM + (64u << 10) < (1u << 20));
	/* the read buffer grows to the frame's header and table, 4 KiB
	 * rounded, charged past its first 64 KiB */
	f.table_len = ((1u << 20) - used0 - KEEP_ROOM + (64u << 10)) / 4096 * 4096 -
		      PROTO_HDR_LEN;
	T_RC(kc_connect_unix(&a, srv.sock), 0);
	T_RC(kc_login(&a, "bob", SECRET_BOB), 0); /* (alice's share of the budget free) */
	f.version = a.version;
	kc_raw_frame(h, &f, NULL);
	T_RC(kc_send(&a, h, sizeof(h)), 0);
	end = tsrv_now_ns() + 10000000000ull;
	while ((used1 = stat_of(&srv, "server.mem_used")) < used0 + (256u << 10) &&
	       tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	printf("lane_keep: server.mem_used %" PRIu64 " before, %" PRIu64 " with a table of %"
	       PRIu64 " bytes declared: %" PRIu64 " bytes of the budget free\n", used0, used1,
	       f.table_len, (1u << 20) - used1);
	T_ASSERT(used1 <= (1u << 20) - (16u << 10) && used1 + (64u << 10) > (1u << 20));
	lane_put_stored("keep-0", 1);
	t_ok = atomic_load(&F.busy_ok_ns);
	end = tsrv_now_ns() + 20000000000ull;
	while (!atomic_load(&F.data_closed) && tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	refused = stat_of(&srv, "repair.lane_keep_refused");
	printf("lane_keep: the forward stored, its connection closed %" PRId64 " ms after "
	       "(idle time %s ms); repair.lane_keep_refused %" PRIu64 "\n",
	       atomic_load(&F.data_closed) ? (int64_t)(atomic_load(&F.data_closed_ns) - t_ok) /
						     1000000 : -1, KEEP_IDLE_MS, refused);
	T_EQ_U64(refused, 1);
	T_EQ_INT(atomic_load(&F.data_closed), 1);
	/* closed after its batch, not after the idle time */
	T_LE_INT((atomic_load(&F.data_closed_ns) - t_ok) / 1000000, atoi(KEEP_IDLE_MS) / 2);
	T_EQ_U64(stat_of(&srv, "repair.errors"), 0);
	kc_close(&a);
	stop();
	tsrv_check_reports(base);
}

/* A drain whose member keeps refusing busy (drain_busy in the header):
 * pass_busy's pod, this test holding alice's one connection at s[1]
 * throughout, s[0] drained with the CLI.  Its hand-over refused at every
 * try, the drain ends with alice's block left behind: that must be said
 * -- repair.drains_incomplete 1 (counted once), kvtier drain exit 1 with
 * the words, kvtier stat's repair line -- while repair.errors stays 0 (a
 * refusal busy is none).  It was "drained (0 blocks copied)", exit 0, and
 * every counter 0: the WARN "drain: done complete=no" in the log alone
 * (review46a). */
static void phase_drain_busy(void)
{
	char sub[2][600], secret[700], args[2000], out[4096];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--tenant-conns", "1", "--repair-grace", "500", NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t t0;
	struct kc c;
	int rc;

	if (!cli)
		T_FAIL("usage: test_peer_attack KVTIERD drain_busy KVTIER");
	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\n", NULL, more);
	root_secret(secret);
	T_RC(kc_connect_unix(&c, s[1].sock), 0);
	T_RC(kc_login(&c, "alice", SECRET_ALICE), 0); /* held to the end */
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&s[0], ns, "drain-busy", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	t0 = tsrv_now_ns();
	FMT(args, "drain 127.0.0.1:%u --tenant root --secret-file '%s' --timeout 50", port[0],
	    secret);
	rc = cli_run(out, sizeof(out), args);
	printf("drain_busy: the drain ended after %.0f ms: repair.drains_incomplete %" PRIu64
	       ", repair.errors %" PRIu64 ", repair.pass_conn_busy %" PRIu64 ", copied %"
	       PRIu64 ", drain_state %" PRIu64 "\n", (double)(tsrv_now_ns() - t0) / 1e6,
	       stat_of(&s[0], "repair.drains_incomplete"), stat_of(&s[0], "repair.errors"),
	       stat_of(&s[0], "repair.pass_conn_busy"), stat_of(&s[0], "repair.copied"),
	       stat_of(&s[0], "repair.drain_state"));
	T_EQ_INT(rc, 1);
	if (!strstr(out, "drained with blocks left behind"))
		T_FAIL("kvtier drain: no word of the blocks left behind: %s", out);
	T_EQ_U64(stat_of(&s[0], "repair.drain_state"), 3);
	T_EQ_U64(stat_of(&s[0], "repair.drains_incomplete"), 1);
	T_EQ_U64(stat_of(&s[0], "repair.copied"), 0);
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	T_ASSERT(log_says(s[0].log, "complete=no"));
	FMT(args, "stat --server 127.0.0.1:%u --tenant root --secret-file '%s'", port[0],
	    secret);
	T_EQ_INT(cli_run(out, sizeof(out), args), 0);
	if (!strstr(out, "1 drain(s) left blocks behind"))
		T_FAIL("kvtier stat: no word of the drain: %s", out);
	/* A second drain, alice's slot still held: as incomplete, and said
	 * so -- the first one's state 3 was there until the repair thread
	 * took the request (up to a tick later), so the CLI's first look
	 * said "drained", exit 0, at once (review47b) */
	t0 = tsrv_now_ns();
	FMT(args, "drain 127.0.0.1:%u --tenant root --secret-file '%s' --timeout 50", port[0],
	    secret);
	rc = cli_run(out, sizeof(out), args);
	printf("drain_busy: a second drain ended after %.0f ms, exit %d: "
	       "repair.drains_incomplete %" PRIu64 "\n", (double)(tsrv_now_ns() - t0) / 1e6, rc,
	       stat_of(&s[0], "repair.drains_incomplete"));
	T_EQ_INT(rc, 1);
	if (!strstr(out, "drained with blocks left behind"))
		T_FAIL("kvtier drain, the second: no word of the blocks left behind: %s", out);
	T_EQ_U64(stat_of(&s[0], "repair.drains_incomplete"), 2);
	T_EQ_U64(stat_of(&s[0], "repair.drain_state"), 3);
	kc_close(&c);
	pod_members_stop(s, sub);
}

/* A drain asked while a repair pass copies (drain_pass in the header):
 * pod_two's pod, DP_BLOCKS placed blocks of alice's (2 copies) put on
 * s[0] alone, s[0]'s first pass after the grace copying them to s[1] at
 * --repair-rate DP_RATE; at its first copy the CLI drains s[0].  The pass
 * copies the rest, the drain's hand-over then finds every block at s[1]:
 * the drain copied none, and kvtier drain, repair.drain_copied and the
 * log's "drain: done" say 0.  kvtier drain said what repair.copied grew by
 * from the DRAIN's answer on, the pass's copies after it (dup48). */
#define DP_BLOCKS 6u
#define DP_VLEN (1u << 20) /* a frame each (a pass paces frames: heal_pace) */
#define DP_RATE "1M"       /* a block a second: the pass takes 5 s */
static void phase_drain_pass(void)
{
	char sub[2][600], secret[700], args[2000], out[4096], key[32];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--repair-grace", "1500", "--repair-rate", DP_RATE,
				     "--repair-idle-rate", DP_RATE, NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	unsigned long long said = ~0ull;
	uint64_t end, at_ask, after;
	const char *p;
	int rc;

	if (!cli)
		T_FAIL("usage: test_peer_attack KVTIERD drain_pass KVTIER");
	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\n", NULL, more);
	root_secret(secret);
	fwd_flags = PROTO_IF_PLACED;
	vlen = DP_VLEN;
	for (unsigned b = 0; b < DP_BLOCKS; b++) {
		snprintf(key, sizeof(key), "drain-pass-%u", b);
		forward_put_key(&s[0], ns, key, 2);
	}
	vlen = VLEN;
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	end = tsrv_now_ns() + 30000000000ull;
	while ((at_ask = stat_of(&s[0], "repair.copied")) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	FMT(args, "drain 127.0.0.1:%u --tenant root --secret-file '%s' --timeout 50", port[0],
	    secret);
	rc = cli_run(out, sizeof(out), args);
	after = stat_of(&s[0], "repair.copied");
	if ((p = strstr(out, "drained (")))
		sscanf(p, "drained (%llu", &said);
	printf("drain_pass: the drain asked at the pass's copy %" PRIu64 " of %u, %" PRIu64
	       " copied at its end; kvtier drain exit %d, said %llu copied, "
	       "repair.drain_copied %" PRIu64 "\n", at_ask, DP_BLOCKS, after, rc, said,
	       stat_of(&s[0], "repair.drain_copied"));
	T_EQ_INT(rc, 0);
	/* the pass under way when the drain was asked, and copying after */
	T_ASSERT(at_ask >= 1 && at_ask + 2 <= DP_BLOCKS);
	T_EQ_U64(after, DP_BLOCKS);
	T_EQ_U64(said, 0);
	T_EQ_U64(stat_of(&s[0], "repair.drain_copied"), 0);
	T_ASSERT(log_says(s[0].log, "complete=yes copied=0 exit=no"));
	pod_members_stop(s, sub);
}

/* A drain whose member refuses its copy busy, item by item (drain_item_busy
 * in the header): the server and fwd_busy's fake, a block of alice's
 * whose key the fake always refuses (BUSY_ALWAYS), placed on both, the
 * server drained with the CLI.  The block never reaches the fake: the
 * drain must say it left it behind -- kvtier drain exit 1 with the words,
 * repair.drains_incomplete 1, the log's "complete=no".  Its hand-overs
 * handed the refused copy to the fake's lane, as a healing pass does, and
 * the drain said "drained (0 blocks copied)", exit 0, complete=yes: with
 * --exit the lane's queue went with the process, the block lost
 * (review48a). */
static void phase_drain_item_busy(void)
{
	const char *const opts[] = { "--repair-grace", "500", NULL };
	char secret[700], args[2000], out[4096];
	uint8_t ns[PROTO_DIGEST_LEN];
	int rc;

	if (!cli)
		T_FAIL("usage: test_peer_attack KVTIERD drain_item_busy KVTIER");
	pod_fake("drain_item_busy", M_FWD_BUSY, "root " SECRET_ROOT " admin\n", opts);
	root_secret(secret);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&srv, ns, BUSY_ALWAYS "-drain", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	FMT(args, "drain 127.0.0.1:%u --tenant root --secret-file '%s' --timeout 50", srv.port,
	    secret);
	rc = cli_run(out, sizeof(out), args);
	printf("drain_item_busy: kvtier drain exit %d; the fake refused %u copies busy, "
	       "stored %u; repair.drains_incomplete %" PRIu64 ", repair.busy_handed %" PRIu64
	       ", repair.drain_copied %" PRIu64 "\n", rc, atomic_load(&F.busy_refused),
	       atomic_load(&F.busy_ok), stat_of(&srv, "repair.drains_incomplete"),
	       stat_of(&srv, "repair.busy_handed"), stat_of(&srv, "repair.drain_copied"));
	T_EQ_INT(atomic_load(&F.busy_ok), 0);
	T_ASSERT(atomic_load(&F.busy_refused) != 0); /* the drain's copy reached the fake */
	T_EQ_INT(rc, 1);
	if (!strstr(out, "drained with blocks left behind"))
		T_FAIL("kvtier drain: no word of the block left behind: %s", out);
	T_EQ_U64(stat_of(&srv, "repair.drains_incomplete"), 1);
	T_EQ_U64(stat_of(&srv, "repair.drain_copied"), 0);
	T_ASSERT(log_says(srv.log, "complete=no"));
	T_ASSERT(log_says(srv.log, "refused a copy of the drain busy"));
	stop();
	tsrv_check_reports(base);
}

/* drain_exit_late (in the header): kvtier drain --exit on its own thread */
struct drain_cli {
	char args[2000], out[4096];
	int rc;
};

static void *drain_cli_main(void *arg)
{
	struct drain_cli *d = arg;
	d->rc = cli_run(d->out, sizeof(d->out), d->args);
	return NULL;
}

/* A drain with --exit whose first hand-over went well and whose last,
 * after the grace, was refused busy at every try: drain_busy's pod, no
 * block of alice's at first; once s[0] is out of the list (state 2) this
 * test holds alice's slot at s[1] and puts a block of hers on s[0], which
 * its last hand-over cannot copy.  kvtier drain --exit must say so, exit
 * 1: the drain counted it in the instant before its stop, and the CLI,
 * reading every 200 ms, found the server gone -- "drained", exit 0, the
 * count lost with the process (pod47's note; review47b). */
static void phase_drain_exit_late(void)
{
	char sub[2][600], secret[700];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	/* 2: the CLI's root connection and the test's stats at s[0] */
	const char *const more[] = { "--tenant-conns", "2", "--repair-grace", "500", NULL };
	struct tsrv s[2];
	struct drain_cli d = { .rc = -1 };
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end;
	pthread_t th;
	struct kc c[2];

	if (!cli)
		T_FAIL("usage: test_peer_attack KVTIERD drain_exit_late KVTIER");
	pod_two(s, sub, port, "alice " SECRET_ALICE " tenant\n", NULL, more);
	root_secret(secret);
	FMT(d.args, "drain 127.0.0.1:%u --exit --tenant root --secret-file '%s' --timeout 50",
	    port[0], secret);
	T_OK(pthread_create(&th, NULL, drain_cli_main, &d));
	end = tsrv_now_ns() + 20000000000ull;
	while (stat_of(&s[0], "repair.drain_state") < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	T_EQ_U64(stat_of(&s[0], "repair.drain_state"), 2);
	T_EQ_U64(stat_of(&s[0], "repair.drains_incomplete"), 0);
	for (int i = 0; i < 2; i++) /* alice's slots at s[1], held to the end */
		kc_open_as(&c[i], &s[1], "alice", SECRET_ALICE);
	fwd_flags = PROTO_IF_PLACED;
	forward_put_key(&s[0], ns, "drain-late", 2);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	T_OK(pthread_join(th, NULL));
	printf("drain_exit_late: kvtier drain --exit exit %d\n", d.rc);
	T_ASSERT(log_says(s[0].log, "complete=no"));
	T_EQ_INT(d.rc, 1);
	if (!strstr(d.out, "drained with blocks left behind"))
		T_FAIL("kvtier drain --exit: no word of the blocks left behind: %s", d.out);
	for (int i = 0; i < 2; i++)
		kc_close(&c[i]);
	pod_members_stop(s, sub);
}

/* A pass's refused connections to one member are capped (pass_busy_cap
 * in the header): s[1] at its --max-conns (this test holds both of its
 * connections), s[0] holding a placed block of each of CAP_TENANTS
 * tenants, each due at s[1].  Every pass's connection there is refused
 * busy; after REPAIR_PASS_BUSY_MAX (4) refusals the pass gives s[1] up:
 * repair.pass_conn_busy never more than 4 for each pass ended and the
 * one under way (a connect a tenant: 10 a pass, every second, for as
 * long as the member is full).  Once s[1] has room, every block is
 * copied, no error counted. */
#define CAP_TENANTS 10u
#define CAP_REFUSALS 4u /* repair.c's REPAIR_PASS_BUSY_MAX */
static void phase_pass_busy_cap(void)
{
	char tenants[2000], members[80], sub[2][600], name[CAP_TENANTS][16];
	char secret[CAP_TENANTS][40];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	const char *const more[] = { "--max-conns", "2", "--tenant-conns", "2",
				     "--repair-grace", HEAL_BUSY_GRACE,
				     NULL };
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t p0, b0, busy = 0, passes = 0, worst = 0, end, copied = 0;
	size_t at = 0;
	struct kc c[2];

	at += (size_t)snprintf(tenants, sizeof(tenants), "root " SECRET_ROOT " admin\n");
	for (unsigned i = 0; i < CAP_TENANTS; i++) {
		snprintf(name[i], sizeof(name[i]), "cap%u", i);
		snprintf(secret[i], sizeof(secret[i]), "secret-of-cap%u-0123456789abcdef", i);
		at += (size_t)snprintf(tenants + at, sizeof(tenants) - at, "%s %s tenant\n",
				       name[i], secret[i]);
		T_ASSERT(at < sizeof(tenants));
	}
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	{
		char path[700];
		snprintf(path, sizeof(path), "%s/tenants", base);
		tsrv_write_file(NULL, path, tenants);
		pod_start(s, sub, port, members, path, more);
	}
	for (int i = 0; i < 2; i++) /* s[1] full (s[0]'s poll of it may be there) */
		kc_open_as(&c[i], &s[1], "root", SECRET_ROOT);
	p0 = stat_of(&s[0], "repair.passes");
	b0 = stat_of(&s[0], "repair.pass_conn_busy");
	fwd_flags = PROTO_IF_PLACED;
	for (unsigned i = 0; i < CAP_TENANTS; i++)
		forward_put_as(&s[0], ns, "cap-block", 2, name[i], secret[i]);
	fwd_flags = PROTO_IF_PLACED | PROTO_IF_FORWARD;
	/* refusals read before passes: each pass counted after its
	 * refusals, so at most one pass under way is not in passes yet */
	end = tsrv_now_ns() + 6000000000ull;
	while (tsrv_now_ns() < end && busy < 3 * CAP_TENANTS) {
		busy = stat_of(&s[0], "repair.pass_conn_busy") - b0;
		passes = stat_of(&s[0], "repair.passes") - p0;
		if (busy > worst * (passes + 1))
			worst = (busy + passes) / (passes + 1); /* (rounded up) */
		T_LE_INT(busy, CAP_REFUSALS * (passes + 1));
		tsrv_sleep_ms(10);
	}
	printf("pass_busy_cap: %u tenants' blocks for a member at its --max-conns: %" PRIu64
	       " refused connections in %" PRIu64 " passes (and one under way), %" PRIu64
	       " a pass at most; repair.errors %" PRIu64 "\n", CAP_TENANTS, busy, passes, worst,
	       stat_of(&s[0], "repair.errors"));
	T_GE_INT(busy, CAP_REFUSALS); /* refused at all */
	for (int i = 0; i < 2; i++)
		kc_close(&c[i]);
	end = tsrv_now_ns() + 20000000000ull;
	while ((copied = stat_of(&s[0], "repair.copied")) < CAP_TENANTS && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	printf("pass_busy_cap: once s[1] had room, copied %" PRIu64 " of %u\n", copied,
	       CAP_TENANTS);
	T_EQ_U64(copied, CAP_TENANTS);
	pod_members_stop(s, sub);
}

/* A lane's kept connection over TLS (tls_lane in the header): two real
 * members with --tls-cert and --tls-verify-client, s[0] reaching s[1]
 * through a relaying proxy (s[0]'s --members names the proxy for s[1]),
 * KVTD_TEST_LANE_IDLE_MS TLS_LANE_IDLE_MS.  A forward stored, its TLS
 * connection kept; the proxy then holds what s[0] sends on it, and once
 * the next batch's first question waits there, the test shuts the
 * connection (its end to s[0]): to s[0] a member that closed the kept
 * connection just after its reuse check.  The batch must go again on a
 * new TLS connection, once, and be stored, no error (lane_stale's path,
 * which only a plain fake had tested: a TLS peer's end of file read as
 * -ECONNRESET).  The new connection, kept, is charged its read buffer
 * and its SSL's state and buffers (tlsmem.h: TLS_PEER_MEM + TLS_RBUF,
 * 57,853 bytes with OpenSSL 3.0) to --max-memory: server.mem_used while
 * it is kept, against once the lane closed it idle (a server SSL's
 * figures until session 47, 47,613: a client's holds 24,051 bytes idle,
 * with the member's chain, against 14 KiB charged for it). */
#define TLS_LANE_IDLE_MS "3000"
/* rbuf + a client SSL's state (24 KiB: TLS_PEER_KIB) + its buffers */
#define TLS_LANE_CHARGE (65536u + 24u * 1024 + 16568u + 16709u)
/* The proxy's slot past after that stays open 200 ms (the lane's kept
 * connection: s[0]'s polls of s[1] come through the proxy too, each
 * closed within ms), -1 if none. */
static int proxy_kept_slot(struct tproxy *px, int after)
{
	bool open[TPROXY_SLOTS] = { false };
	int kept = -1;

	for (int i = after + 1; i < atomic_load(&px->opened) && i < TPROXY_SLOTS; i++)
		open[i] = atomic_load(&px->fd_up[i]) >= 0;
	tsrv_sleep_ms(200);
	for (int i = after + 1; i < atomic_load(&px->opened) && i < TPROXY_SLOTS; i++)
		if (open[i] && atomic_load(&px->fd_up[i]) >= 0)
			kept = i;
	return kept;
}

/* server.mem_used of s, the least of 5 reads 20 ms apart: s[1]'s polls
 * of s[0] are TLS connections too, each charged there while it lasts
 * (its handshake: 61,765 bytes, tlsmem.h TLS_HS_MEM), a few ms a second. */
static uint64_t mem_used_least(const struct tsrv *s)
{
	uint64_t least = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t v = stat_of(s, "server.mem_used");
		least = v < least ? v : least;
		tsrv_sleep_ms(20);
	}
	return least;
}

static void phase_tls_lane(void)
{
	char ca[760], cert[760], key[760], tenants[700], members[2][80], sub[2][600];
	char self[2][32], dir[2][700];
	uint16_t port[2] = { listen_tcp(NULL), listen_tcp(NULL) };
	struct tproxy px;
	struct tsrv s[2];
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t end, kept, idle;
	int slot, slot2;

	make_pki("", ca, cert, key);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants,
			"root " SECRET_ROOT " admin\nalice " SECRET_ALICE " tenant\n");
	tproxy_start(&px, port[1], NULL, false);
	snprintf(members[0], sizeof(members[0]), "127.0.0.1:%u,127.0.0.1:%u", port[0], px.port);
	snprintf(members[1], sizeof(members[1]), "127.0.0.1:%u,127.0.0.1:%u", port[0], port[1]);
	for (int i = 1; i >= 0; i--) {
		const char *opts[] = { "--listen", self[i], "--advertise", self[i], "--members",
				       members[i], "--ssd", "0", "--tls-cert", cert, "--tls-key",
				       key, "--tls-ca", ca, "--tls-verify-client",
				       "--repair-grace", "600000", NULL };
		snprintf(self[i], sizeof(self[i]), "127.0.0.1:%u", port[i]);
		snprintf(sub[i], sizeof(sub[i]), "%s/m%d", base, i);
		T_OK(mkdir(sub[i], 0700));
		T_ASSERT(snprintf(dir[i], sizeof(dir[i]), "%s/data", sub[i]) < (int)sizeof(dir[i]));
		if (i == 0)
			T_OK(setenv("KVTD_TEST_LANE_IDLE_MS", TLS_LANE_IDLE_MS, 1));
		tsrv_start(&s[i], bin, sub[i], dir[i], tenants, opts);
	}
	T_OK(unsetenv("KVTD_TEST_LANE_IDLE_MS"));

	/* a forward stored over TLS: its connection kept */
	forward_put_key(&s[0], ns, "tls-lane-0", 2);
	end = tsrv_now_ns() + 10000000000ull;
	while (stat_of(&s[0], "repair.forwarded") < 1 && tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	T_EQ_U64(stat_of(&s[0], "repair.forwarded"), 1);
	read_back_at(&s[1], "alice", SECRET_ALICE, ns, "tls-lane-0");
	slot = proxy_kept_slot(&px, -1); /* the lane's, kept */
	T_ASSERT(slot >= 0);

	/* what s[0] sends on it held; once the next batch's question waits,
	 * the connection shut (an end of file to s[0]) */
	atomic_fetch_or(&px.hold_up, UINT64_C(1) << slot);
	tsrv_sleep_ms(120); /* (seen by the relay within 50 ms) */
	forward_put_key(&s[0], ns, "tls-lane-1", 2);
	end = tsrv_now_ns() + 10000000000ull;
	while (tproxy_queued(&px, slot, true) == 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(1);
	T_ASSERT(tproxy_queued(&px, slot, true) > 0);
	T_OK(shutdown(atomic_load(&px.fd_up[slot]), SHUT_RDWR));
	atomic_fetch_and(&px.hold_up, ~(UINT64_C(1) << slot));
	end = tsrv_now_ns() + 10000000000ull;
	while (stat_of(&s[0], "repair.forwarded") < 2 && tsrv_now_ns() < end)
		tsrv_sleep_ms(5);
	printf("tls_lane: the kept TLS connection shut as the next batch came: forwarded %"
	       PRIu64 ", repair.lane_resent %" PRIu64 ", repair.errors %" PRIu64
	       ", repair.lane_connects %" PRIu64 "\n", stat_of(&s[0], "repair.forwarded"),
	       stat_of(&s[0], "repair.lane_resent"), stat_of(&s[0], "repair.errors"),
	       stat_of(&s[0], "repair.lane_connects"));
	T_EQ_U64(stat_of(&s[0], "repair.forwarded"), 2);
	T_EQ_U64(stat_of(&s[0], "repair.lane_resent"), 1);
	T_EQ_U64(stat_of(&s[0], "repair.errors"), 0);
	read_back_at(&s[1], "alice", SECRET_ALICE, ns, "tls-lane-1");

	/* the new connection kept, charged; then closed idle, given back */
	slot2 = proxy_kept_slot(&px, slot);
	T_ASSERT(slot2 > slot);
	kept = mem_used_least(&s[0]);
	end = tsrv_now_ns() + 20000000000ull;
	while (atomic_load(&px.fd_up[slot2]) >= 0 && tsrv_now_ns() < end)
		tsrv_sleep_ms(10);
	T_ASSERT(atomic_load(&px.fd_up[slot2]) < 0);
	tsrv_sleep_ms(50);
	idle = mem_used_least(&s[0]);
	printf("tls_lane: server.mem_used %" PRIu64 " with the lane's TLS connection kept, %"
	       PRIu64 " once closed: %" PRId64 " bytes charged for it (read buffer and TLS: %u)\n",
	       kept, idle, (int64_t)(kept - idle), TLS_LANE_CHARGE);
	T_GE_INT(kept, idle + TLS_LANE_CHARGE);
	T_EQ_INT(tsrv_stop(&s[0]), 0);
	T_EQ_INT(tsrv_stop(&s[1]), 0);
	tproxy_stop(&px);
	tsrv_check_reports(sub[0]);
	tsrv_check_reports(sub[1]);
}

static const struct tsrv_phase phases[] = {
	{ "tls_pod", phase_tls_pod },
	{ "tls_drain", phase_tls_drain },
	{ "tls_eku", phase_tls_eku },
	{ "downgrade", phase_downgrade },
	{ "table", phase_table },
	{ "tags", phase_tags },
	{ "more", phase_more },
	{ "more_slow", phase_more_slow },
	{ "more_stall", phase_more_stall },
	{ "slow_read", phase_slow_read },
	{ "poll_stall", phase_poll_stall },
	{ "poll_wide", phase_poll_wide },
	{ "poll_stop", phase_poll_stop },
	{ "poll_many", phase_poll_many },
	{ "fwd_lane", phase_fwd_lane },
	{ "fwd_heal", phase_fwd_heal },
	{ "dns_held", phase_dns_held },
	{ "fwd_batch", phase_fwd_batch },
	{ "fwd_busy", phase_fwd_busy },
	{ "fwd_busy_hol", phase_fwd_busy_hol },
	{ "heal_busy", phase_heal_busy },
	{ "frame_busy", phase_frame_busy },
	{ "heal_cut", phase_heal_cut },
	{ "busy_dup", phase_busy_dup },
	{ "heal_pace", phase_heal_pace },
	{ "lane_reuse", phase_lane_reuse },
	{ "lane_list", phase_lane_list },
	{ "lane_busy", phase_lane_busy },
	{ "lane_busy_tenant", phase_lane_busy_tenant },
	{ "pace_cut", phase_pace_cut },
	{ "pass_busy", phase_pass_busy },
	{ "pass_busy_tenant", phase_pass_busy_tenant },
	{ "lane_stale", phase_lane_stale },
	{ "lane_stale_ns", phase_lane_stale_ns },
	{ "lane_mem", phase_lane_mem },
	{ "lane_keep", phase_lane_keep },
	{ "drain_busy", phase_drain_busy },
	{ "drain_exit_late", phase_drain_exit_late },
	{ "drain_pass", phase_drain_pass },
	{ "drain_item_busy", phase_drain_item_busy },
	{ "pass_busy_cap", phase_pass_busy_cap },
	{ "tls_lane", phase_tls_lane },
	{ "lane_pace", phase_lane_pace },
	{ "lane_bench", phase_lane_bench }, /* a measurement: no test runs it */
};

int main(int argc, char **argv)
{
	bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	cli = argc > 3 ? argv[3] : NULL;
	shim = cli;
	return tsrv_run_phase("test_peer_attack", argc, argv, phases,
			      sizeof(phases) / sizeof(phases[0]), base, sizeof(base));
}

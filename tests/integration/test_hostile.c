/*
 * test_hostile.c - kvtierd against hostile clients and careless operators
 * (issue 21; doc/security.md "Threats", each row names its phase here).
 *
 * One phase per run (argv[2]), each with a real kvtierd on loopback:
 *
 *   preauth       unauthenticated native clients declare PUTs of 24 MiB
 *                 after HELLO: each is refused (PROTO_ENOAUTH) and closed
 *                 before any of its data is buffered; an authenticated
 *                 tenant's PUT and GET and a new client's HELLO + AUTH all
 *                 succeed; mem_used stays ~0
 *   resp_preauth  unauthenticated RESP clients stream 48 MiB SETs: refused
 *                 after a few KiB; authenticated ones streaming SETs they
 *                 never finish are charged to --max-memory and refused
 *                 past it
 *   grant_race    a grant revoked (SIGHUP) while an NS_REGISTER frame waits
 *                 in the registry's sync (held there by the LD_PRELOAD shim
 *                 shim_sync.c, argv[3]): checked again, nothing cached
 *   native_edges  every opcode with each field at its edges (doc/security.md
 *                 "Native protocol review"): ERROR frame and close, or the
 *                 opcode's refusal and the connection kept; one key named
 *                 65536 times in a frame
 *   native_flood  frames a byte per send(), connections closed mid-frame,
 *                 pipelines never read while another client is timed
 *   resp_flood    4 RESP connections pipeline ECHO while another client's
 *                 PING is timed; every command sent is answered
 *   ns_items      NS_REGISTER frames of 1024 and 16,000 items (the most a
 *                 frame may name; more is refused whole)
 *   in_share      one tenant's GET frames left waiting on 6 connections:
 *                 its frames in flight hold at most a quarter of the budget
 *   big_frames    a frame of 65,536 keys refused (PROTO_ECOUNT, kept);
 *                 pipelines of 1024-key frames while another client's
 *                 PING is timed
 *   parse_partial 64 whole frames and the start of one more a read: none
 *                 deferred (only whole frames count against the budget)
 *   in_share_data PUTs past the tenant's input share: their data sections
 *                 dropped, not charged; the frames refused, connections kept
 *   tbl_share     big tables left a byte short on 48 connections: held to
 *                 the tenant's input share while they arrive
 *   tbl_wait      a table past the share behind a frame of its own
 *                 connection in flight: not read until that is answered
 *   resp_inflight a RESP pipeline behind a slow DEL: at most --conn-inflight
 *                 commands taken until it is answered
 *   delete_backlog a DEL behind another connection's write-down backlog:
 *                 answered behind the write in progress, not the backlog
 *   no_shares     without --tenants, PING floods never read are held by
 *                 the budget, not by a tenant's share (one trust domain)
 *   aux_walks     S3 listings' walks on the aux thread beside another
 *                 client's aux jobs (walks have a lane of their own)
 *   resp_info_flood  a tenant pipelines RESP INFO while another client's
 *                 PING is timed (INFO reads its figures in one pass)
 *   metrics_cost  600 connections each ask /metrics (318 KB, 256 rows)
 *                 and read nothing: renders shared within an iteration
 *   stats_flood   a tenant pipelines STATS of its 255 namespace rows on 4
 *                 connections while another client's PING is timed
 *   clear_flood   one tenant pipelines CLEARs of its 256 namespaces and
 *                 sends FLUSHDBs: at most 4 in progress, one walk each at a
 *                 time, the rest refused; another tenant's DELETE timed
 *   aux_share     one tenant's GET frames of large range checks pipelined
 *                 (aux jobs): another tenant's range and registration wait
 *                 for one slice of them, not for all (a queue per tenant)
 *   quiet_share   one grantee's quiet GETs of SSD-only blocks pipelined on
 *                 24 connections beside another grantee's: the server's
 *                 slots and the copies' memory held to a tenant's part
 *   copies_sum    a grantee with its answers and commands near its half
 *                 pipelines quiet GETs of SSD-only blocks: its copies cut
 *                 to what its half has left (kvtd_tenant_cap)
 *   wd_share      one tenant's puts overrun the SSD writer beside another
 *                 tenant's few: its write-downs shed first, the other's
 *                 (a quarter of the queue) written and read back
 *   resp_mget_held  MGETs of one stored byte named 65,535 times, left
 *                 unread on 4 connections: their replies' iovecs, pins and
 *                 text charged (as built and as queued), the budget holds
 *   kvevents_metrics  a burst of puts drops KV events: /metrics (read
 *                 strictly) has each events.* counter of STATS, and the
 *                 tenant's drops with a tenant label
 *   reload_refused  tenants files refused on SIGHUP (a bad line, a grant
 *                 to no tenant) change no login, quota group, quota or
 *                 series with a tenant label
 *   events_reuse  a removed tenant's quota group given to a new tenant
 *                 (every group given): the new one's KV-events drops
 *                 count from 0
 *   group_drain   a new tenant is not given a group holding a removed
 *                 tenant's DRAM blocks while another is free
 *   events_handover  a group given to a new tenant on the same events=
 *                 endpoints: the old subscribers and the replay ring
 *                 give it nothing of the earlier tenant's, nor it theirs
 *   ssd_read_share (by hand, not in the suite) one tenant's GETs of SSD-only
 *                 blocks on 24 connections beside another's single GET: the
 *                 latencies measured (doc/security.md "SSD reads between
 *                 tenants")
 *   quiet_slices, parts_amp, range_crc, quiet_pins, stats_unread (red45)
 *                 what a GET answer sends, counted: doc/security.md
 *                 "Session 45"
 *
 * Every phase samples the server's VmRSS every 20 ms and asserts the bound
 * of doc/security.md: RSS < RSS at start + --dram + --max-memory +
 * KVTD_RSS_SLACK (HOSTILE_SLACK here, with ASan's shadow and a small
 * quarantine).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <openssl/sha.h>
#include <xxhash.h>
#include <zmq.h>

#include "client.h"
#include "server.h"
#include "t.h"
#include "tprom.h"

/* Sanitized builds (GCC says so with __SANITIZE_*__, clang with
 * __has_feature) do the same work several times slower and bigger. */
#if defined(__SANITIZE_ADDRESS__)
#define HOSTILE_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define HOSTILE_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOSTILE_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define HOSTILE_TSAN 1
#endif
#endif

/* CI's asan phase runs the phases of tests/meson.build's
 * hostile_timed_release two at a time like every test (its release phase
 * runs them alone): ASan alone does their work 2-3x slower than release,
 * a test on the other core slows them up to 2x more.  Their latency
 * bounds are doubled there -- each still under what the server took
 * before the fix it guards where the phase gives that figure (at each
 * bound; aux_walks' and resp_keys' bound a loop held long). */
#ifdef HOSTILE_ASAN
#define HOSTILE_BESIDE 2ull
#else
#define HOSTILE_BESIDE 1ull
#endif

#define MAX_MEMORY (32u << 20)
#define DRAM (64u << 20)
#define HOSTILE_SLACK (48u << 20)

static const char *bin;
static char base[512];
static const char *shim; /* argv[3]: tests/libshim_sync.so */
static struct tsrv srv;
static _Atomic bool rss_stop;
static _Atomic uint64_t rss_max;
static struct tsrv_rss_watch rss_watch = {&srv, &rss_stop, &rss_max};

#define SECRET_ALICE "secret-of-alice-0123456789"
#define SECRET_ADMIN "secret-of-admin-0123456789"

static const struct kvt_ns_desc desc = {
	.model = "hostile-model", .dtype = "bf16", .layout = "vllm-flash-nhd",
	.block_tokens = 16, .tp_size = 1, .pp_size = 1,
};

/* ------------------------------------------------------------------------
 * Helpers
 */

/* Start kvtierd with the tenants alice (tenant) and admin (admin), or
 * the tenants file text given, the test's budget, plus extra
 * (NULL-ended). */
/* The next server started holds the registry's ("namespaces") syncs at
 * the gate directory made here (its path into gate): tsrv_shim_arm.  The
 * caller unsets LD_PRELOAD once it started. */
static void shim_arm(char *gate, size_t cap)
{
	snprintf(gate, cap, "%s/gate", base);
	T_EQ_INT(mkdir(gate, 0700), 0);
	tsrv_shim_arm(shim, gate, "namespaces");
}

static void start_with(const char *name, const char *const *extra, const char *tenants_text)
{
	char tenants[700], dir[700], mm[32], dr[32];
	const char *argv[40];
	int n = 0;

	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, tenants_text ? tenants_text
				       : "alice " SECRET_ALICE " tenant\n"
					 "admin " SECRET_ADMIN " admin\n");
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	snprintf(mm, sizeof(mm), "%u", MAX_MEMORY);
	snprintf(dr, sizeof(dr), "%u", DRAM);
	argv[n++] = "--max-memory";
	argv[n++] = mm;
	argv[n++] = "--dram";
	argv[n++] = dr;
	argv[n++] = "--threads";
	argv[n++] = "2";
	for (int i = 0; extra && extra[i] && n < 39; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	tsrv_start(&srv, bin, base, dir, tenants, argv);
}

static void start(const char *name, const char *const *extra)
{
	start_with(name, extra, NULL);
}

static pthread_t rss_t;
static uint64_t rss0;

static void rss_begin(void)
{
	tsrv_sleep_ms(300);
	rss0 = tsrv_rss(srv.pid);
	atomic_store(&rss_max, rss0);
	atomic_store(&rss_stop, false);
	pthread_create(&rss_t, NULL, tsrv_rss_thread, &rss_watch);
}

/* The bound of doc/security.md; returns the peak over the start. */
static uint64_t rss_end(uint64_t bound_extra)
{
	uint64_t peak, limit = rss0 + bound_extra + HOSTILE_SLACK;

	atomic_store(&rss_stop, true);
	pthread_join(rss_t, NULL);
	peak = atomic_load(&rss_max);
	printf("rss: start %" PRIu64 " MiB, peak %" PRIu64 " MiB (+%" PRIu64
	       " MiB), bound %" PRIu64 " MiB\n", rss0 >> 20, peak >> 20, (peak - rss0) >> 20,
	       limit >> 20);
	T_LE_INT(peak, limit);
	return peak - rss0;
}

/* A TCP connection to the server from 127.0.0.1, or from another
 * loopback address (from: its last byte) to be another peer. */
static int tcp_connect_from(uint16_t port, uint8_t from)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	T_ASSERT(fd >= 0);
	if (from > 1) {
		struct sockaddr_in me = { .sin_family = AF_INET };
		me.sin_addr.s_addr = htonl(0x7f000000u | from);
		T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int tcp_connect(uint16_t port)
{
	return tcp_connect_from(port, 1);
}

/*
 * A fixed peer's attempt after another peer's flood or throttle (as
 * test_hostile_http.py's from_fixed): the per-address limits count peers
 * in 4,096 slots hashed with a random key (daemon/base.c kvtd_peer_slot),
 * so 1 run in 4,096 the fixed peer shares the flooding peer's slot and is
 * refused early, as documented -- a test failing by chance.
 * attempt(peer, arg, &refused) runs from peer (what a peer is, the
 * caller's: an address's last byte, a Unix user id) and sets refused
 * where the server refused it as it refuses the flooding peer; then it
 * runs once more from fresh (printed): a server refusing everyone fails
 * again.  The result of the attempt that counts.
 */
typedef int (*fixed_attempt_fn)(unsigned peer, void *arg, bool *refused);

static int from_fixed(const char *what, unsigned peer, unsigned fresh, fixed_attempt_fn attempt,
		      void *arg)
{
	bool refused = false;
	int rc = attempt(peer, arg, &refused);

	if (!refused)
		return rc;
	printf("%s: peer %u refused per address (a shared slot); again from peer %u\n", what,
	       peer, fresh);
	refused = false;
	return attempt(fresh, arg, &refused);
}

/* Send as much of buf as the peer takes within ms: bytes sent, or -errno
 * once the peer closed or reset. */
static int64_t send_for(int fd, const void *buf, size_t len, int ms)
{
	uint64_t end = tsrv_now_ns() + (uint64_t)ms * 1000000ull;
	size_t off = 0;

	while (off < len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int64_t left = (int64_t)(end - tsrv_now_ns()) / 1000000;
		ssize_t w;
		if (left <= 0 || tsrv_now_ns() > end)
			break;
		if (poll(&p, 1, (int)left) <= 0)
			break;
		w = send(fd, (const uint8_t *)buf + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	return (int64_t)off;
}

/* Read whatever arrives within ms into buf (NUL-terminated): bytes, and
 * *closed if the peer closed. */
static size_t recv_for(int fd, char *buf, size_t cap, int ms, bool *closed)
{
	uint64_t end = tsrv_now_ns() + (uint64_t)ms * 1000000ull;
	size_t n = 0;

	*closed = false;
	while (n + 1 < cap && tsrv_now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;
		if (poll(&p, 1, (int)((end - tsrv_now_ns()) / 1000000) + 1) <= 0)
			break;
		r = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno == ECONNRESET)) {
			*closed = true;
			break;
		}
		if (r < 0)
			continue;
		n += (size_t)r;
	}
	buf[n] = 0;
	return n;
}

static uint64_t stat_of(const char *name)
{
	uint64_t v = 0;

	T_RC(kc_stat_once(srv.port, NULL, "admin", SECRET_ADMIN, name, false, &v), 0);
	return v;
}

/* The same for a counter an older server may lack: 0 then. */
static uint64_t stat_opt(const char *name)
{
	uint64_t v = 0;

	T_RC(kc_stat_once(srv.port, NULL, "admin", SECRET_ADMIN, name, true, &v), 0);
	return v;
}

/* PUT and GET n values of len bytes: how many round trips failed (a
 * status, or bytes that differ); the first failure is printed. */
static int roundtrips(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], int n, size_t len,
		      uint32_t seed)
{
	uint8_t *v = malloc(len);
	int bad = 0;

	for (int i = 0; i < n; i++) {
		struct kvt_key k;
		struct iovec p = { v, len };
		struct kc_value got = { 0 };
		char name[32];
		int rc;
		snprintf(name, sizeof(name), "rt-%u-%d", seed, i);
		kvt_key_set(&k, name, strlen(name));
		tsrv_fill(v, len, seed + (uint32_t)i);
		rc = kc_put(c, ns, &k, &p, 1, NULL);
		if (rc == KVT_OK || rc == KVT_EXISTS)
			rc = kc_get(c, ns, &k, 0, 0, 0, 0, &got);
		if (rc != KVT_OK || got.len != len || memcmp(got.bytes, v, len) != 0) {
			if (!bad)
				printf("  round trip %d failed: %d (%s)\n", i, rc, kvt_strerror(rc));
			bad++;
		}
		kc_value_free(&got);
	}
	free(v);
	return bad;
}

/* ------------------------------------------------------------------------
 * preauth (item 1): nothing large before AUTH
 */

/* Sized to fill the budget exactly: 1 MiB PUTs until one is refused,
 * then halves down to 64 bytes, so that what is left of --max-memory is
 * smaller than any frame (before the fix: an authenticated GET's own
 * header no longer fits). */
#define PREAUTH_BIG 40
#define PREAUTH_CONNS (PREAUTH_BIG + 15)

static void phase_preauth(void)
{
	static struct kc bad[PREAUTH_CONNS];
	uint8_t ns[PROTO_DIGEST_LEN];
	unsigned refused = 0, closed = 0, hello_refused = 0;
	struct kc good, late;
	uint64_t t0, login_ns, used;
	int login_rc, bad_good, bad_late = -1;

	start("preauth", NULL);
	rss_begin();
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&good, &desc, ns, NULL, 0), KVT_OK);

	/* Each: HELLO, then a PUT table declaring 24 MiB and 1 MiB of it. */
	for (unsigned i = 0; i < PREAUTH_CONNS; i++) {
		struct proto_frame f = { .op = PROTO_OP_PUT };
		struct proto_item it = { 0 };
		uint32_t crc = 0;
		uint8_t *buf;
		int64_t len;
		T_RC(kc_connect_tcp(&bad[i], srv.port), 0);
		if (kc_hello(&bad[i]) != 0) {
			hello_refused++;
			continue;
		}
		f.ns_count = 1;
		f.ns = ns;
		f.tag = 1000 + i;
		f.version = bad[i].version;
		kvt_key_set(&it.key, "pre-auth", 8);
		it.value_len = i < PREAUTH_BIG ? (1u << 20) : (1u << 20) >> (i - PREAUTH_BIG + 1);
		it.part_count = 1;
		it.part_lens = &it.value_len;
		it.part_crcs = &crc;
		len = kc_encode(&f, &it, 1, NULL, 0, &buf);
		T_ASSERT(len > 0);
		T_ASSERT(send_for(bad[i].fd, buf, (size_t)len, 1000) == len);
		free(buf);
	}
	tsrv_sleep_ms(500);

	/* The others are served: a new client logs in, alice's PUTs and
	 * GETs of 1 MiB succeed. */
	t0 = tsrv_now_ns();
	T_RC(kc_connect_tcp(&late, srv.port), 0);
	login_rc = kc_login(&late, "alice", SECRET_ALICE);
	login_ns = tsrv_now_ns() - t0;
	bad_good = roundtrips(&good, ns, 8, 1u << 20, 1);
	if (login_rc == 0)
		bad_late = roundtrips(&late, ns, 4, 1u << 20, 2);
	used = stat_of("server.mem_used");

	for (unsigned i = 0; i < PREAUTH_CONNS; i++) {
		struct kc_resp r;
		if (kc_recv(&bad[i], &r, 2000) == 0) {
			if (r.f.status == PROTO_ENOAUTH)
				refused++;
			kc_resp_free(&r);
		}
		if (kc_wait_closed(&bad[i], 2000))
			closed++;
		kc_close(&bad[i]);
	}
	printf("preauth: %u of %u refused with PROTO_ENOAUTH, %u closed, %u HELLOs refused; "
	       "late login %d in %.1f ms; failed round trips: %d of 8 (open), %d of 4 (late); "
	       "mem_used %" PRIu64 " bytes\n", refused, PREAUTH_CONNS, closed, hello_refused,
	       login_rc, login_ns / 1e6, bad_good, bad_late, used);
	T_EQ_INT(hello_refused, 0);
	T_EQ_INT(login_rc, 0);
	T_EQ_INT(bad_good, 0);
	T_EQ_INT(bad_late, 0);
	T_EQ_INT(refused, PREAUTH_CONNS);
	T_EQ_INT(closed, PREAUTH_CONNS);
	T_LE_INT(login_ns, 2000000000ull);
	/* Nothing of theirs is left charged: only alice's small frames. */
	T_LE_INT(used, 1u << 20);
	rss_end(DRAM + MAX_MEMORY);
	kc_close(&good);
	kc_close(&late);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_preauth (item 2): RESP before AUTH, and RESP buffers charged
 */

struct streamer {
	pthread_t t;
	uint16_t port;
	bool auth;
	uint64_t value_len;
	int64_t sent;
	char reply[256];
	bool closed;
};

/* One SET of value_len bytes, streamed for 3 s and never finished. */
static void *streamer_main(void *arg)
{
	struct streamer *s = arg;
	int fd = tcp_connect(s->port);
	uint8_t *chunk = calloc(1, 1u << 20);
	char head[128];
	uint64_t end = tsrv_now_ns() + 3000000000ull;
	int n;

	if (s->auth) {
		const char *a = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
		bool cl;
		send_for(fd, a, strlen(a), 1000);
		recv_for(fd, s->reply, sizeof(s->reply), 300, &cl);
	}
	n = snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$6\r\nstream\r\n$%" PRIu64 "\r\n",
		     s->value_len);
	s->sent = send_for(fd, head, (size_t)n, 1000);
	/* All but the value's last byte: the command never completes. */
	while (s->sent >= 0 && tsrv_now_ns() < end && (uint64_t)s->sent + 1 < s->value_len) {
		uint64_t left = s->value_len - 1 - (uint64_t)s->sent;
		int64_t w = send_for(fd, chunk, left < (1u << 20) ? (size_t)left : (1u << 20), 200);
		if (w < 0) {
			s->sent = w;
			break;
		}
		s->sent += w;
	}
	recv_for(fd, s->reply, sizeof(s->reply), 1000, &s->closed);
	close(fd);
	free(chunk);
	return NULL;
}

static void phase_resp_preauth(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", NULL };
	struct streamer st[8];
	uint64_t value_len, grew_unauth, grew_auth, refused;
	unsigned noauth = 0, limited = 0;
	struct kc probe;

	start("resp_preauth", extra);
	T_RC(kc_connect_tcp(&probe, srv.port), 0);
	T_RC(kc_hello(&probe), 0);
	/* The largest value the server takes, up to 48 MiB. */
	value_len = probe.lim.value_max < (48u << 20) ? probe.lim.value_max : (48u << 20);
	kc_close(&probe);
	printf("resp_preauth: SETs of %" PRIu64 " MiB\n", value_len >> 20);

	/* Unauthenticated: four streams. */
	rss_begin();
	for (int i = 0; i < 4; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].port = tsrv_listener_port(srv.log, "RESP");
		st[i].value_len = value_len;
		pthread_create(&st[i].t, NULL, streamer_main, &st[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(st[i].t, NULL);
		printf("  unauthenticated %d: sent %" PRId64 " bytes, reply '%.60s', closed %d\n", i,
		       st[i].sent, st[i].reply, st[i].closed);
		if (strstr(st[i].reply, "NOAUTH") && st[i].sent < (1 << 20))
			noauth++;
	}
	grew_unauth = rss_end(0);

	/* Authenticated: eight streams, more than --max-memory together. */
	rss_begin();
	for (int i = 0; i < 8; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].port = tsrv_listener_port(srv.log, "RESP");
		st[i].value_len = value_len;
		st[i].auth = true;
		pthread_create(&st[i].t, NULL, streamer_main, &st[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(st[i].t, NULL);
		printf("  authenticated %d: sent %" PRId64 " bytes, reply '%.60s', closed %d\n", i,
		       st[i].sent, st[i].reply, st[i].closed);
		if (strstr(st[i].reply, "--max-memory"))
			limited++;
	}
	grew_auth = rss_end(MAX_MEMORY);
	refused = stat_of("server.mem_refused");
	printf("resp_preauth: %u of 4 unauthenticated refused (NOAUTH) within 1 MiB, RSS +%" PRIu64
	       " MiB; %u of 8 authenticated refused at --max-memory (mem_refused %" PRIu64
	       "), RSS +%" PRIu64 " MiB\n", noauth, grew_unauth >> 20, limited, refused,
	       grew_auth >> 20);
	T_EQ_INT(noauth, 4);
	T_GE_INT(limited, 1);
	T_GE_INT(refused, limited);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * grantee_ssd (item 3): a grantee's GETs of SSD-only blocks
 */

#define G_BLOCKS 32
#define G_LEN (1u << 20)
#define G_DUPS 400
/* A quarter of --max-memory held, a few copies in flight, allocator
 * slack; TSan's shadow triples what is touched. */
#ifdef HOSTILE_TSAN
#define G_GROWTH_MAX (3 * (MAX_MEMORY / 4 + (16u << 20)))
#else
#define G_GROWTH_MAX (MAX_MEMORY / 4 + (16u << 20))
#endif

static uint64_t stat_wait_zero(const char *a, const char *b)
{
	for (int i = 0; i < 2000; i++) {
		if (stat_of(a) == 0 && stat_of(b) == 0)
			return 0;
		tsrv_sleep_ms(5);
	}
	T_FAIL("%s, %s did not drain", a, b);
	return 1;
}

static void g_key(struct kvt_key *k, unsigned i)
{
	char name[32];
	snprintf(name, sizeof(name), "g-block-%u", i);
	kvt_key_set(k, name, strlen(name));
}

/* Send one GET frame of n items (keys by index), read nothing. */
static void g_send(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const unsigned *idx,
		   unsigned n)
{
	struct proto_item *its = calloc(n, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };

	for (unsigned i = 0; i < n; i++)
		g_key(&its[i].key, idx[i]);
	f.ns_count = 1;
	f.ns = ns;
	T_ASSERT(kc_request(c, &f, its, n, NULL, 0) > 0);
	free(its);
}

struct g_seen {
	const unsigned *idx;
	unsigned n, seen, hits, misses;
	uint8_t *want;
};

static void g_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct g_seen *g = ctx;

	T_ASSERT(pi->index < g->n);
	g->seen++;
	if (pi->status == KVT_MISS) {
		g->misses++;
		return;
	}
	T_EQ_INT(pi->status, KVT_OK);
	T_EQ_U64(pi->data_len, G_LEN);
	tsrv_fill(g->want, G_LEN, 100 + g->idx[pi->index]);
	T_ASSERT(memcmp(r->data + pi->data_off, g->want, G_LEN) == 0);
	g->hits++;
}

/* Read the answers of one GET frame: each item the exact bytes or a miss.
 * Returns the hits. */
static unsigned g_check(struct kc *c, const unsigned *idx, unsigned n, unsigned *misses)
{
	struct g_seen g = { idx, n, 0, 0, 0, malloc(G_LEN) };

	T_ASSERT(g.want);
	T_GE_INT(kc_recv_items(c, 20000, g_item, &g, NULL), 1);
	T_EQ_INT(g.seen, n);
	free(g.want);
	*misses = g.misses;
	return g.hits;
}

/* alice (as olga) registers d and puts G_BLOCKS blocks of G_LEN from v
 * (her dram= quota leaves most on SSD only, written down); rita registers
 * the same namespace, granted, into ns's twin (checked equal) and lists
 * in ssd_only the blocks she sees on SSD only: their count. */
static unsigned g_put_ssd_only(struct kc *olga, struct kc *rita, struct kvt_ns_desc *d,
			       uint8_t *ns, uint8_t *v, unsigned *ssd_only)
{
	uint8_t ns_r[PROTO_DIGEST_LEN];
	unsigned n_ssd = 0;

	T_RC(kc_dial(olga, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(olga, d, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < G_BLOCKS; i++) {
		struct kvt_key k;
		struct iovec p = { v, G_LEN };
		int rc;
		g_key(&k, i);
		tsrv_fill(v, G_LEN, 100 + i);
		for (int t = 0; (rc = kc_put(olga, ns, &k, &p, 1, NULL)) == KVT_EFULL && t < 100; t++)
			stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
		T_EQ_INT(rc, KVT_OK);
	}
	stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
	T_RC(kc_dial(rita, srv.port, "rita", SECRET_ALICE), 0);
	d->tenant = "alice";
	T_RC(kc_register(rita, d, ns_r, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns_r, sizeof(ns_r)) == 0);
	for (unsigned i = 0; i < G_BLOCKS; i++) {
		struct kvt_key k;
		uint32_t tier = 0;
		g_key(&k, i);
		if (kc_exists(rita, ns, &k, &tier) == KVT_OK && tier == KVT_TIER_SSD)
			ssd_only[n_ssd++] = i;
	}
	return n_ssd;
}

static void phase_grantee_ssd(void)
{
	const char *extra[] = { "--ssd", "256M", "--set", "ssd.admission=always", NULL };
	struct kvt_ns_desc d = desc;
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(G_LEN);
	unsigned ssd_only[G_BLOCKS], n_ssd = 0, dups[G_DUPS], hits1, miss1, hits2, miss2;
	uint64_t grew_dup, grew_all, refused;
	struct kc olga, rita;

	/* The owner has a DRAM quota, so most of her blocks end up on SSD
	 * only; rita may read them. */
	start_with("grantee_ssd", extra, "alice " SECRET_ALICE " tenant dram=4M\n"
					 "admin " SECRET_ADMIN " admin\n"
					 "rita " SECRET_ALICE " tenant\n"
					 "grant alice model=hostile-model to rita\n");
	n_ssd = g_put_ssd_only(&olga, &rita, &d, ns, v, ssd_only);
	printf("grantee_ssd: %u of %u blocks on SSD only\n", n_ssd, G_BLOCKS);
	T_GE_INT(n_ssd, 16);

	/* One frame naming one SSD-only block 400 times, not read. */
	for (unsigned i = 0; i < G_DUPS; i++)
		dups[i] = ssd_only[0];
	rss_begin();
	g_send(&rita, ns, dups, G_DUPS);
	tsrv_sleep_ms(1500);
	grew_dup = rss_end(DRAM + MAX_MEMORY);
	hits1 = g_check(&rita, dups, G_DUPS, &miss1);

	/* One frame naming every SSD-only block, twice over, not read. */
	{
		unsigned all[2 * G_BLOCKS];
		for (unsigned i = 0; i < n_ssd; i++)
			all[i] = all[n_ssd + i] = ssd_only[i];
		rss_begin();
		g_send(&rita, ns, all, 2 * n_ssd);
		tsrv_sleep_ms(1500);
		grew_all = rss_end(DRAM + MAX_MEMORY);
		hits2 = g_check(&rita, all, 2 * n_ssd, &miss2);
	}
	refused = stat_of("server.copy_refused");
	printf("grantee_ssd: %u x 1 block: %u hits, %u misses, RSS +%" PRIu64 " MiB; %u x 2 "
	       "blocks: %u hits, %u misses, RSS +%" PRIu64 " MiB; copy_refused %" PRIu64 "\n",
	       G_DUPS, hits1, miss1, grew_dup >> 20, n_ssd, hits2, miss2, grew_all >> 20, refused);
	/* Duplicates cost one copy: all served. */
	T_EQ_INT(hits1, G_DUPS);
	T_LE_INT(grew_dup, 16u << 20);
	/* Distinct blocks: at most a quarter of --max-memory held. */
	T_GE_INT(hits2, 2);
	T_LE_INT(grew_all, G_GROWTH_MAX);
	/* And once read, the bytes are given back. */
	T_LE_INT(stat_of("server.mem_used"), 1u << 20);
	kc_close(&olga);
	kc_close(&rita);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * emfile (item 9): at the descriptor limit the loops shed, never spin
 */

/* CPU seconds (user + system) the process used so far. */
static double cpu_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	T_ASSERT(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	T_ASSERT(p != NULL);
	/* After the name: state is field 3; utime, stime are 14, 15. */
	T_ASSERT(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			&st) == 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

#define EMFILE_IDLE 70
#define EMFILE_SHED 6

/* Descriptors pid has open now. */
static unsigned fds_of(pid_t pid)
{
	char path[64];
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	T_ASSERT(d != NULL);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The clamp above keeps connections below the limit; here the limit is
 * lowered under the running server to what it holds, so that accept
 * itself fails with EMFILE: each new connection must be shed with the
 * loop's spare descriptor (server.conns_shed), and the loop must not
 * spin.  Then the limit goes back and a client logs in. */
static void emfile_shed(void)
{
	struct rlimit old, low;
	uint64_t shed0 = 0, shed1 = 0, paused = 0, acc0 = 0, acc1 = 0;
	int conns[EMFILE_SHED], login_rc;
	double cpu0, cpu1;
	struct kc adm, late;

	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.conns_shed", &shed0), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.conns_accepted", &acc0), 0);
	tsrv_sleep_ms(200);
	T_EQ_INT(prlimit(srv.pid, RLIMIT_NOFILE, NULL, &old), 0);
	low.rlim_cur = fds_of(srv.pid);
	low.rlim_max = old.rlim_max;
	T_EQ_INT(prlimit(srv.pid, RLIMIT_NOFILE, &low, NULL), 0);
	cpu0 = cpu_of(srv.pid);
	for (int i = 0; i < EMFILE_SHED; i++)
		conns[i] = tcp_connect_from(srv.port, 3);
	tsrv_sleep_ms(1000);
	cpu1 = cpu_of(srv.pid);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.conns_shed", &shed1), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.listen_paused", &paused), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.conns_accepted", &acc1), 0);
	T_EQ_INT(prlimit(srv.pid, RLIMIT_NOFILE, &old, NULL), 0);
	for (int i = 0; i < EMFILE_SHED; i++)
		close(conns[i]);
	T_RC(kc_connect_tcp(&late, srv.port), 0);
	login_rc = kc_login(&late, "alice", SECRET_ALICE);
	printf("emfile: NOFILE lowered to the %u descriptors the server holds: %d new "
	       "connections, %" PRIu64 " shed with the spare descriptor, %" PRIu64 " accepted "
	       "(a hole in its descriptor table), listeners paused %" PRIu64 " times, server "
	       "CPU %.2f s in 1 s; limit back: login %d\n", (unsigned)low.rlim_cur, EMFILE_SHED,
	       shed1 - shed0, acc1 - acc0, paused, cpu1 - cpu0, login_rc);
	/* Each was shed or, where a lower descriptor number was free (the
	 * limit caps numbers, not counts), accepted; most were shed. */
	T_EQ_INT(shed1 - shed0 + acc1 - acc0, EMFILE_SHED);
	T_GE_INT(shed1 - shed0, EMFILE_SHED / 2);
	T_LE_INT((uint64_t)((cpu1 - cpu0) * 1000), 500);
	T_EQ_INT(login_rc, 0);
	kc_close(&late);
	kc_close(&adm);
}

static void phase_emfile(void)
{
	char wrapper[700], text[1200];
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	const char *real = bin;
	int idle[EMFILE_IDLE];
	double cpu0, cpu1;
	uint64_t t0, login_ns;
	int login_rc, ping_rc;
	struct kc late;

	/* kvtierd under "ulimit -n 64" (soft and hard: it cannot raise it). */
	snprintf(wrapper, sizeof(wrapper), "%s/kvtierd-nofile64", base);
	snprintf(text, sizeof(text), "#!/bin/sh\nulimit -n 64 || exit 1\nexec %s \"$@\"\n", real);
	tsrv_write_file(NULL, wrapper, text);
	T_EQ_INT(chmod(wrapper, 0700), 0);
	bin = wrapper;
	start("emfile", extra);
	bin = real;
	tsrv_sleep_ms(300);

	/* From another address than the client that must get in. */
	for (int i = 0; i < EMFILE_IDLE; i++)
		idle[i] = tcp_connect_from(srv.port, 2);
	tsrv_sleep_ms(500);
	cpu0 = cpu_of(srv.pid);
	tsrv_sleep_ms(3000);
	cpu1 = cpu_of(srv.pid);

	t0 = tsrv_now_ns();
	T_RC(kc_connect_tcp(&late, srv.port), 0);
	login_rc = kc_login(&late, "alice", SECRET_ALICE);
	ping_rc = login_rc == 0 ? kc_ping(&late) : login_rc;
	login_ns = tsrv_now_ns() - t0;
	printf("emfile: %d idle connections at NOFILE 64: server CPU %.2f s in 3 s; a new "
	       "client's login %d, ping %d, in %.1f ms\n", EMFILE_IDLE, cpu1 - cpu0, login_rc,
	       ping_rc, login_ns / 1e6);
	T_LE_INT((uint64_t)((cpu1 - cpu0) * 1000), 500);
	T_EQ_INT(login_rc, 0);
	T_EQ_INT(ping_rc, 0);
	T_LE_INT(login_ns, 2000000000ull);
	kc_close(&late);
	for (int i = 0; i < EMFILE_IDLE; i++)
		close(idle[i]);
	emfile_shed();
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * revoke (item 7): a reloaded tenants file reaches open connections
 */

/* Rewrite the tenants file, SIGHUP, and wait until the server logs want
 * (a fresh log to look in). */
static void reload_wait(const char *text, const char *want)
{
	char path[700], rotated[720], buf[1 << 16];
	static int n;

	snprintf(path, sizeof(path), "%s/tenants", base);
	tsrv_write_file(NULL, path, text);
	snprintf(rotated, sizeof(rotated), "%s.r%d", srv.log, ++n);
	T_EQ_INT(rename(srv.log, rotated), 0);
	kill(srv.pid, SIGHUP);
	for (int i = 0; i < 500; i++) {
		int fd = open(srv.log, O_RDONLY);
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
		if (fd >= 0)
			close(fd);
		buf[r > 0 ? r : 0] = 0;
		if (strstr(buf, want))
			return;
		tsrv_sleep_ms(10);
	}
	T_FAIL("no \"%s\" in %s", want, srv.log);
}

/* The same until it says it reloaded the file. */
static void reload(const char *text)
{
	reload_wait(text, "tenants reloaded");
}

static void phase_revoke(void)
{
	const char *both = "alice " SECRET_ALICE " tenant\n"
			   "admin " SECRET_ADMIN " admin\n"
			   "boss " SECRET_ADMIN " admin\n";
	struct kc boss, alice, idle_alice;
	uint64_t v = 0, removed = 0;
	int stats_rc, clear_rc, alice_rc;
	bool idle_closed;

	start_with("revoke", NULL, both);
	T_RC(kc_dial(&boss, srv.port, "boss", SECRET_ADMIN), 0);
	T_RC(kc_stat(&boss, PROTO_SCOPE_ALL, "server.conns_accepted", &v), 0);
	T_RC(kc_dial(&alice, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&idle_alice, srv.port, "alice", SECRET_ALICE), 0);

	/* boss demoted, alice removed. */
	reload("boss " SECRET_ADMIN " tenant\n"
	       "admin " SECRET_ADMIN " admin\n");
	/* An idle connection of a removed tenant is closed without a request. */
	idle_closed = kc_wait_closed(&idle_alice, 3000);
	stats_rc = kc_stat(&boss, PROTO_SCOPE_ALL, "server.conns_accepted", &v);
	clear_rc = kc_clear(&boss, PROTO_SCOPE_ALL, NULL, NULL, &removed);
	alice_rc = kc_ping(&alice);
	if (alice_rc == 0)
		alice_rc = kc_stat(&alice, PROTO_SCOPE_TENANT, "tenant.requests", &v);
	printf("revoke: demoted admin: STATS ALL %d, CLEAR ALL %d; removed tenant: idle "
	       "connection closed %d, busy one's next request %d\n", stats_rc, clear_rc,
	       idle_closed, alice_rc);
	T_EQ_INT(stats_rc, PROTO_EPERM);
	T_EQ_INT(clear_rc, PROTO_EPERM);
	T_ASSERT(idle_closed);
	T_ASSERT(alice_rc != 0);
	T_ASSERT(kc_wait_closed(&alice, 3000));
	kc_close(&boss);
	kc_close(&alice);
	kc_close(&idle_alice);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * deletes (item 8): acknowledged deletes and clears survive kill -9
 */

#define D_ROUNDS 6
#define D_KEYS 20
#define D_LEN (64u << 10)

static void d_key(struct kvt_key *k, char what, int round, int i)
{
	char name[48];
	snprintf(name, sizeof(name), "del-%c-%d-%d", what, round, i);
	kvt_key_set(k, name, strlen(name));
}

static void phase_deletes(void)
{
	const char *extra[] = { "--ssd", "128M", "--set", "ssd.admission=always", NULL };
	uint8_t *v = malloc(D_LEN);
	unsigned resurrected = 0, deleted = 0, kept_lost = 0;

	start("deletes", extra);
	for (int round = 0; round < D_ROUNDS; round++) {
		struct kvt_ns_desc da = desc, db = desc;
		uint8_t na[PROTO_DIGEST_LEN], nb[PROTO_DIGEST_LEN];
		char model_b[64];
		uint64_t removed = 0;
		struct kc c;

		snprintf(model_b, sizeof(model_b), "hostile-clear-%d", round);
		db.model = model_b;
		T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
		T_RC(kc_register(&c, &da, na, NULL, 0), KVT_OK);
		T_RC(kc_register(&c, &db, nb, NULL, 0), KVT_OK);
		for (int i = 0; i < D_KEYS; i++) {
			struct kvt_key k;
			struct iovec p = { v, D_LEN };
			tsrv_fill(v, D_LEN, (uint32_t)(round * 1000 + i));
			d_key(&k, 'a', round, i);
			T_RC(kc_put(&c, na, &k, &p, 1, NULL), KVT_OK);
			d_key(&k, 'b', round, i);
			T_RC(kc_put(&c, nb, &k, &p, 1, NULL), KVT_OK);
		}
		/* On SSD, so that a restart would bring them back. */
		kc_close(&c);
		stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
		T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
		T_RC(kc_register(&c, &da, na, NULL, 0), KVT_OK);
		T_RC(kc_register(&c, &db, nb, NULL, 0), KVT_OK);
		/* Half of a's deleted, all of b cleared; kill -9 right after
		 * the last acknowledgment. */
		for (int i = 0; i < D_KEYS; i += 2) {
			struct kvt_key k;
			d_key(&k, 'a', round, i);
			T_RC(kc_delete(&c, na, &k), KVT_OK);
			deleted++;
		}
		T_RC(kc_clear(&c, PROTO_SCOPE_NS, nb, NULL, &removed), 0);
		T_EQ_U64(removed, D_KEYS);
		deleted += D_KEYS;
		tsrv_kill9(&srv);
		kc_close(&c);
		start("deletes", extra);

		T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
		T_RC(kc_register(&c, &da, na, NULL, 0), KVT_OK);
		T_RC(kc_register(&c, &db, nb, NULL, 0), KVT_OK);
		for (int i = 0; i < D_KEYS; i++) {
			struct kvt_key k;
			int rc;
			d_key(&k, 'a', round, i);
			rc = kc_exists(&c, na, &k, NULL);
			if (i % 2 == 0 && rc == KVT_OK)
				resurrected++;
			if (i % 2 == 1 && rc != KVT_OK)
				kept_lost++;
			d_key(&k, 'b', round, i);
			if (kc_exists(&c, nb, &k, NULL) == KVT_OK)
				resurrected++;
		}
		kc_close(&c);
	}
	printf("deletes: %d rounds of deletes and a clear, each followed by kill -9: %u of %u "
	       "acknowledged deletes came back; %u kept blocks lost\n", D_ROUNDS, resurrected,
	       deleted, kept_lost);
	T_EQ_INT(resurrected, 0);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range (item 5): range GETs are no CPU amplifier
 */

#define R_PARTS 4
#define R_PART_LEN (8u << 20)
#define R_RANGES 1024 /* the most a frame may name (2048 until big_frames) */
/* The baseline's value: 16 MiB in R_RANGES parts of 16 KiB, one range in
 * each: a range's item costs the loop with its value's view (512 runs of
 * 64 KiB for the 32 MiB), and a frame over a 16 KiB value costs 10x less,
 * no baseline.  Without the fix its frame checks 16 MiB on the loop
 * (1,024 parts of 16 KiB once each, either way), not 8 GiB. */
#define R_BASE_PART (16u << 10)
/* The bound, a ratio (get46): the server's CPU for the frame against
 * the baseline frame's just before it.  It was the slowest concurrent
 * PING under 100 ms (400 sanitized), which passed or failed with the
 * machine's load: the same frame's PING waited 35-140 ms under ASan at
 * load 7-15 for 4-20 ms of CPU.  The slowest PING is still printed. */
#define RANGE_RATIO 4u
#define RANGE_ROUNDS 4

static uint64_t srv_cpu_ns(void);

struct pinger {
	pthread_t t;
	_Atomic bool stop;
	_Atomic uint64_t max_ns, count; /* max_ns: reset by each round */
	_Atomic int fails;
	bool admin;               /* as admin (another tenant), not alice */
};

static void *pinger_main(void *arg)
{
	struct pinger *p = arg;
	struct kc c;

	T_RC(kc_dial(&c, srv.port, p->admin ? "admin" : "alice",
		     p->admin ? SECRET_ADMIN : SECRET_ALICE), 0);
	while (!atomic_load(&p->stop)) {
		uint64_t t0 = tsrv_now_ns(), dt;
		if (kc_ping(&c) != 0)
			p->fails++;
		dt = tsrv_now_ns() - t0;
		if (dt > atomic_load(&p->max_ns))
			atomic_store(&p->max_ns, dt);
		p->count++;
		tsrv_sleep_ms(5);
	}
	kc_close(&c);
	return NULL;
}

struct range_seen {
	const struct proto_item *its;
	const uint8_t *v;
	unsigned ok, seen;
};

static void range_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct range_seen *rs = ctx;

	rs->seen++;
	if (pi->status == KVT_OK && pi->data_len == 1 &&
	    r->data[pi->data_off] == rs->v[rs->its[pi->index].off])
		rs->ok++;
}

/* One frame of its (R_RANGES one-byte ranges) read, each byte checked
 * against v: the server's CPU for it; the slowest of p's PINGs meanwhile
 * in *ping. */
static uint64_t range_round(struct kc *c, struct proto_frame *f, const struct proto_item *its,
			    const uint8_t *v, struct pinger *p, uint64_t *ping)
{
	struct range_seen rs = { its, v, 0, 0 };
	uint64_t cpu0, cpu;

	tsrv_sleep_ms(100);
	atomic_store(&p->max_ns, 0);
	cpu0 = srv_cpu_ns();
	T_ASSERT(kc_request(c, f, its, R_RANGES, NULL, 0) > 0);
	T_GE_INT(kc_recv_items(c, 60000, range_item, &rs, NULL), 1);
	cpu = srv_cpu_ns() - cpu0;
	tsrv_sleep_ms(50); /* a PING the ranges held answers by now */
	*ping = atomic_load(&p->max_ns);
	T_EQ_INT(rs.seen, R_RANGES);
	T_EQ_INT(rs.ok, R_RANGES);
	return cpu;
}

static void phase_range(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc((size_t)R_PARTS * R_PART_LEN);
	struct iovec *parts = calloc(R_RANGES, sizeof(*parts));
	struct proto_item *its = calloc(R_RANGES, sizeof(*its));
	struct proto_item *base_its = calloc(R_RANGES, sizeof(*base_its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct pinger pg = { 0 };
	uint64_t best = UINT64_MAX, best_base = 0;
	struct kvt_key k, kb;
	struct kc c;
	bool within = false;

	T_ASSERT(v != NULL && parts != NULL && its != NULL && base_its != NULL);
	start("range", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, (size_t)R_PARTS * R_PART_LEN, 5);
	for (int i = 0; i < R_RANGES; i++)
		parts[i] = (struct iovec){ v + (size_t)i * R_BASE_PART, R_BASE_PART };
	kvt_key_set(&kb, "range-base", 10);
	T_RC(kc_put(&c, ns, &kb, parts, R_RANGES, NULL), KVT_OK);
	for (int i = 0; i < R_PARTS; i++)
		parts[i] = (struct iovec){ v + (size_t)i * R_PART_LEN, R_PART_LEN };
	kvt_key_set(&k, "range-big", 9);
	T_RC(kc_put(&c, ns, &k, parts, R_PARTS, NULL), KVT_OK);

	pthread_create(&pg.t, NULL, pinger_main, &pg);
	/* One frame of 1,024 one-byte ranges spread over the 32 MiB; each
	 * round first the baseline's, one in each of its parts.  Rounds
	 * repeat, up to RANGE_ROUNDS, until one is within the bound: a loop
	 * that checks each range's part does so in every round. */
	for (unsigned i = 0; i < R_RANGES; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = (uint64_t)i * ((uint64_t)R_PARTS * R_PART_LEN / R_RANGES) + 7;
		its[i].len = 1;
		base_its[i] = its[i];
		base_its[i].key = kb;
		base_its[i].off = (uint64_t)i * R_BASE_PART + 7;
	}
	f.ns_count = 1;
	f.ns = ns;
	for (int round = 0; round < RANGE_ROUNDS && !within; round++) {
		uint64_t cpu, base_cpu, ping, base_ping;
		base_cpu = range_round(&c, &f, base_its, v, &pg, &base_ping);
		cpu = range_round(&c, &f, its, v, &pg, &ping);
		if (cpu <= RANGE_RATIO * base_cpu)
			within = true;
		if (cpu < best) {
			best = cpu;
			best_base = base_cpu;
		}
		printf("range round %d: %u one-byte ranges of a 32 MiB value (4 parts) in one "
		       "frame: %.1f ms of the server's CPU, a concurrent PING (one loop thread) "
		       "%.1f ms at most; of a 16 MiB value (1,024 parts): %.1f ms, PING %.1f ms\n",
		       round + 1, R_RANGES, cpu / 1e6, ping / 1e6, base_cpu / 1e6, base_ping / 1e6);
	}
	atomic_store(&pg.stop, true);
	pthread_join(pg.t, NULL);
	printf("range: %" PRIu64 " PINGs; the best round's CPU %.1f ms (its baseline's %.1f ms)\n",
	       atomic_load(&pg.count), best / 1e6, best_base / 1e6);
	T_EQ_INT(atomic_load(&pg.fails), 0);
	/* Before the fix (d9de6bdb) each range checked its 8 MiB part on
	 * the loop: a PING waited 4.8 s (ASan). */
	T_ASSERT(within);
	kc_close(&c);
	free(parts);
	free(its);
	free(base_its);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_one_pin (get46): a chunk of a GET's answer stopped at the pin
 * budget whatever its next item added: ranges of one value larger than
 * the connection's pin budget (--dram/8, 8 MiB here) -- the first item
 * always taken -- were answered one item a chunk, each pinned and read
 * again after the last one drained: 1,024 one-byte ranges of a 32 MiB
 * value came back in 1,024 answer frames.  A grantee's (quiet, refused
 * past its tenant's share, 16 MiB) got its first range and 1,023
 * KVT_EBUSY.  The value's pin is counted once; a range of it adds none.
 */

static void phase_range_one_pin(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN];
	uint8_t *v = malloc((size_t)R_PARTS * R_PART_LEN);
	struct iovec parts[R_PARTS];
	struct proto_item *its = calloc(R_RANGES, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct range_seen own = { its, v, 0, 0 }, quiet = { its, v, 0, 0 };
	struct kvt_ns_desc d = desc;
	struct kvt_key k;
	struct kc c, r;
	int own_frames, quiet_frames;

	T_ASSERT(v != NULL && its != NULL);
	start_with("range_one_pin", extra, "alice " SECRET_ALICE " tenant\n"
					   "admin " SECRET_ADMIN " admin\n"
					   "rita " SECRET_ALICE " tenant\n"
					   "grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, (size_t)R_PARTS * R_PART_LEN, 47);
	for (int i = 0; i < R_PARTS; i++)
		parts[i] = (struct iovec){ v + (size_t)i * R_PART_LEN, R_PART_LEN };
	kvt_key_set(&k, "one-pin", 7);
	T_RC(kc_put(&c, ns, &k, parts, R_PARTS, NULL), KVT_OK);
	for (unsigned i = 0; i < R_RANGES; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = (uint64_t)i * ((uint64_t)R_PARTS * R_PART_LEN / R_RANGES) + 11;
		its[i].len = 1;
	}
	f.ns_count = 1;
	f.ns = ns;
	T_ASSERT(kc_request(&c, &f, its, R_RANGES, NULL, 0) > 0);
	own_frames = kc_recv_items(&c, 60000, range_item, &own, NULL);
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	d.tenant = "alice";
	T_RC(kc_register(&r, &d, ns_r, NULL, 0), KVT_OK);
	T_ASSERT(kc_request(&r, &f, its, R_RANGES, NULL, 0) > 0);
	quiet_frames = kc_recv_items(&r, 60000, range_item, &quiet, NULL);
	printf("range_one_pin: %u one-byte ranges of a 32 MiB value: the owner's %u exact in %d "
	       "answer frames; a grantee's %u exact in %d\n", R_RANGES, own.ok, own_frames,
	       quiet.ok, quiet_frames);
	kc_close(&r);
	kc_close(&c);
	free(its);
	free(v);
	T_EQ_INT(own.seen, R_RANGES);
	T_EQ_INT(own.ok, R_RANGES);
	T_EQ_INT(quiet.seen, R_RANGES);
	T_EQ_INT(quiet.ok, R_RANGES);
	/* 57 KB of table and 1 KiB of data: one frame, or a few */
	T_GE_INT(own_frames, 1);
	T_LE_INT(own_frames, 4);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_chunk_check (get46): the stored parts a frame's ranges read are
 * entered in the frame's check cache once, when all its items are pinned
 * (value.c kvtd_value_verify_plan), each with the view of the pin that
 * entered it; a check of at most 1 MiB in all is done as the answer is
 * built.  A frame answered in chunks lets the pins of its later items go
 * (deferred) and pins them again when the answers drain: their entries'
 * views were the released pins'.  Ranges of 1 byte in 4 values of 6 MiB
 * (parts of 256 KiB: 1 MiB of checks, inline), past the connection's pin
 * budget (8 MiB): answered in chunks, every byte exact.
 */

#define RCC_VALUES 4u
#define RCC_LEN (6u << 20)
#define RCC_PART (256u << 10)

/* Item i reads value i, stored from v + i * RCC_LEN. */
static void rcc_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct range_seen *rs = ctx;
	const struct proto_item *q = &rs->its[pi->index];

	rs->seen++;
	if (pi->status == KVT_OK && pi->data_len == 1 &&
	    r->data[pi->data_off] == rs->v[(size_t)pi->index * RCC_LEN + q->off])
		rs->ok++;
}

static void phase_range_chunk_check(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc((size_t)RCC_VALUES * RCC_LEN);
	struct iovec parts[RCC_LEN / RCC_PART];
	struct proto_item its[RCC_VALUES];
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kc c;

	T_ASSERT(v != NULL);
	start("range_chunk_check", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, (size_t)RCC_VALUES * RCC_LEN, 48);
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < RCC_VALUES; i++) {
		char key[16];
		for (unsigned p = 0; p < RCC_LEN / RCC_PART; p++)
			parts[p] = (struct iovec){ v + (size_t)i * RCC_LEN + (size_t)p * RCC_PART,
						   RCC_PART };
		snprintf(key, sizeof(key), "rcc-%u", i);
		kvt_key_set(&its[i].key, key, strlen(key));
		T_RC(kc_put(&c, ns, &its[i].key, parts, RCC_LEN / RCC_PART, NULL), KVT_OK);
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = 1000 + i;
		its[i].len = 1;
	}
	f.ns_count = 1;
	f.ns = ns;
	for (int round = 0; round < 4; round++) {
		struct range_seen rs = { its, v, 0, 0 };
		int frames;
		f.tag = 0;
		T_ASSERT(kc_request(&c, &f, its, RCC_VALUES, NULL, 0) > 0);
		frames = kc_recv_items(&c, 60000, rcc_item, &rs, NULL);
		printf("range_chunk_check round %d: %u ranges in %d answer frames, %u exact\n",
		       round + 1, rs.seen, frames, rs.ok);
		T_EQ_INT(rs.seen, RCC_VALUES);
		T_EQ_INT(rs.ok, RCC_VALUES);
		T_GE_INT(frames, 2); /* in chunks, else it proves nothing */
	}
	kc_close(&c);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_version (get47): a frame answered in chunks lets the pins of its
 * later items go and reads them again, by key, once its answers drain
 * (ops.c "Pinned answers").  A DELETE and PUT of the key meanwhile gave
 * them the new value: a client reading a value as ranges in one frame got
 * its first half old and its second half new, each range exact.  Now an
 * item read again must find the version it first read (value.c
 * "Versions": its part table's digest), or it is a miss.  The value
 * (16 MiB, 16 parts) is read as 64 ranges of 256 KiB, 16 MiB of range
 * CRCs against the connection's 8 MiB budget: two chunks or more.  The
 * reader's socket keeps a small window, so that its first chunk (8 MiB)
 * stays queued until it reads (the server's send buffer grows to
 * tcp_wmem's largest, 4 MiB by default; were it larger, round 2 would
 * find no miss and fail, not pass: skipped then, review47c).  Round 1 puts the same bytes again (the
 * same version: every range exact), round 2 other bytes (old ranges,
 * then misses: never a mix).
 */

#define RV_LEN (16u << 20)
#define RV_PARTS 16u
#define RV_RANGES 64u

struct rv_seen {
	const struct proto_item *its;
	const uint8_t *a, *b;     /* the two versions */
	unsigned seen, old, new_, miss, bad;
};

static void rv_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct rv_seen *rs = ctx;
	const struct proto_item *q = &rs->its[pi->index];
	const uint8_t *d = r->data + pi->data_off;
	uint64_t l = 0;
	uint32_t crc = 0;

	rs->seen++;
	if (pi->status == KVT_MISS) {
		rs->miss++;
		return;
	}
	if (pi->status != KVT_OK || pi->data_len != q->len || pi->off != q->off ||
	    proto_item_part(pi, 0, &l, &crc) != 0 || crc != kvt_crc32c(0, d, q->len)) {
		rs->bad++;
		return;
	}
	if (memcmp(d, rs->a + q->off, q->len) == 0)
		rs->old++;
	else if (memcmp(d, rs->b + q->off, q->len) == 0)
		rs->new_++;
	else
		rs->bad++;
}

static void phase_range_version(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *a = malloc(RV_LEN), *b = malloc(RV_LEN);
	struct iovec pa[RV_PARTS], pb[RV_PARTS];
	struct proto_item its[RV_RANGES];
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_key k;
	struct kc c, w, adm;
	int rb = 64 << 10;
	FILE *wmem = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");
	unsigned long wmem_max = 0;

	T_ASSERT(a != NULL && b != NULL);
	if (wmem && fscanf(wmem, "%*u %*u %lu", &wmem_max) == 1 && wmem_max > (4ul << 20))
		T_SKIP("range_version: tcp_wmem's largest is past 4 MiB, the first chunk "
		       "could drain before the PUT");
	if (wmem)
		fclose(wmem);
	start("range_version", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&w, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_EQ_INT(setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb)), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	T_RC(kc_register(&w, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(a, RV_LEN, 61);
	tsrv_fill(b, RV_LEN, 62);
	for (unsigned p = 0; p < RV_PARTS; p++) {
		pa[p] = (struct iovec){ a + (size_t)p * (RV_LEN / RV_PARTS), RV_LEN / RV_PARTS };
		pb[p] = (struct iovec){ b + (size_t)p * (RV_LEN / RV_PARTS), RV_LEN / RV_PARTS };
	}
	kvt_key_set(&k, "rv-value", 8);
	T_RC(kc_put(&w, ns, &k, pa, RV_PARTS, NULL), KVT_OK);
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < RV_RANGES; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = (uint64_t)i * (RV_LEN / RV_RANGES);
		its[i].len = RV_LEN / RV_RANGES;
	}
	f.ns_count = 1;
	f.ns = ns;
	for (int round = 1; round <= 2; round++) {
		struct rv_seen rs = { its, a, b, 0, 0, 0, 0, 0 };
		uint64_t vm0 = 0, vm1 = 0;
		int frames, st0, st1; /* (checked last: the mix first) */
		st0 = kc_stat(&adm, PROTO_SCOPE_ALL, "server.get_version_misses", &vm0);
		f.tag = 0;
		T_ASSERT(kc_request(&c, &f, its, RV_RANGES, NULL, 0) > 0);
		tsrv_sleep_ms(300); /* its first chunk answered, unread */
		T_RC(kc_delete(&w, ns, &k), KVT_OK);
		T_RC(kc_put(&w, ns, &k, round == 1 ? pa : pb, RV_PARTS, NULL), KVT_OK);
		frames = kc_recv_items(&c, 60000, rv_item, &rs, NULL);
		st1 = kc_stat(&adm, PROTO_SCOPE_ALL, "server.get_version_misses", &vm1);
		printf("range_version round %d (%s): %u ranges in %d answer frames: %u of the "
		       "first version, %u of the second, %u misses (get_version_misses +%" PRIu64
		       "), %u wrong\n", round, round == 1 ? "the same bytes put again"
						  : "other bytes put",
		       rs.seen, frames, rs.old, rs.new_, rs.miss, vm1 - vm0, rs.bad);
		T_EQ_INT(rs.seen, RV_RANGES);
		T_EQ_INT(rs.bad, 0);
		T_GE_INT(frames, 2); /* in chunks, else it proves nothing */
		T_GE_INT(rs.old, 1); /* the first chunk, read before the PUT */
		if (round == 1) {
			/* the same version: read again, every range exact */
			T_EQ_INT(rs.old, RV_RANGES);
		} else {
			/* never a mix: the rest missed, none of the new bytes */
			T_EQ_INT(rs.new_, 0);
			T_GE_INT(rs.miss, 1);
			T_EQ_INT(rs.old + rs.miss, RV_RANGES);
		}
		T_EQ_INT(st0, 0);
		T_EQ_INT(st1, 0);
		T_EQ_INT(vm1 - vm0, rs.miss);
	}
	kc_close(&adm);
	kc_close(&w);
	kc_close(&c);
	free(a);
	free(b);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_nomem (get47): review46g's use-after-free, which no test reached.
 * A frame's range checks are planned while all its items are pinned,
 * each stored part with the view of the first item that reads it; a
 * check of at most 1 MiB in all is left to the answer.  An item whose
 * slice array cannot be allocated is answered -ENOMEM and its pin let go
 * before the next item is read; a later item reading the same part then
 * checked it through the released pin's view (heap-use-after-free in
 * value_view_crc: kvtierd stopped by ASan, the connection reset).  The
 * allocation is made to fail by KVTD_TEST_GET_NOMEM=0 (item 0 of each
 * GET answer: value.c kvtd_value_test_init).  Two one-byte ranges of one
 * key (4 parts of 64 KiB) in one frame, 3 rounds: item 0 -ENOMEM, item 1
 * exact; a whole GET of the value alone after (its item 0 fails too).
 */

#define RN_PART (64u << 10)
#define RN_PARTS 4u

struct rn_seen {
	const uint8_t *v;
	const struct proto_item *its;
	int32_t status[2];
	unsigned ok;
};

static void rn_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct rn_seen *rs = ctx;
	const struct proto_item *q = &rs->its[pi->index];
	uint64_t l = 0;
	uint32_t crc = 0;

	if (pi->index < 2)
		rs->status[pi->index] = pi->status;
	if (pi->status == KVT_OK && pi->data_len == 1 && proto_item_part(pi, 0, &l, &crc) == 0 &&
	    r->data[pi->data_off] == rs->v[q->off] &&
	    crc == kvt_crc32c(0, r->data + pi->data_off, 1))
		rs->ok++;
}

static void phase_range_nomem(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(RN_PARTS * RN_PART);
	struct iovec parts[RN_PARTS];
	struct proto_item its[2];
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_key k;
	struct kc_value whole;
	struct kc c;

	T_ASSERT(v != NULL);
	T_OK(setenv("KVTD_TEST_GET_NOMEM", "0", 1));
	start("range_nomem", extra);
	T_OK(unsetenv("KVTD_TEST_GET_NOMEM"));
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, RN_PARTS * RN_PART, 63);
	for (unsigned p = 0; p < RN_PARTS; p++)
		parts[p] = (struct iovec){ v + (size_t)p * RN_PART, RN_PART };
	kvt_key_set(&k, "rn-value", 8);
	T_RC(kc_put(&c, ns, &k, parts, RN_PARTS, NULL), KVT_OK);
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < 2; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = RN_PART + 100 + i; /* both in part 1, neither the whole part */
		its[i].len = 1;
	}
	f.ns_count = 1;
	f.ns = ns;
	for (int round = 1; round <= 3; round++) {
		struct rn_seen rs = { v, its, { 1, 1 }, 0 };
		int frames;
		f.tag = 0;
		T_ASSERT(kc_request(&c, &f, its, 2, NULL, 0) > 0);
		frames = kc_recv_items(&c, 20000, rn_item, &rs, NULL);
		printf("range_nomem round %d: %d answer frames; item 0 status %d, item 1 status %d, "
		       "%u exact\n", round, frames, rs.status[0], rs.status[1], rs.ok);
		T_GE_INT(frames, 1);
		T_EQ_INT(rs.status[0], -ENOMEM);
		T_EQ_INT(rs.status[1], KVT_OK);
		T_EQ_INT(rs.ok, 1);
	}
	/* the hook is item 0 of every answer: a single GET fails, the
	 * connection stays */
	T_RC(kc_get(&c, ns, &k, 0, 0, 0, 0, &whole), -ENOMEM);
	T_RC(kc_ping(&c), 0);
	kc_close(&c);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_version_race (review47c): the ranges of one key in one frame that
 * is answered in one go were pinned one by one in the loop's kvt_submit,
 * and a DELETE and PUT of the key on another loop between two of those
 * pins gave the frame ranges of both versions, each exact with a
 * matching CRC (get47's "Versions" guarded only the items read again
 * after a chunk).  A reader sends frames of RVR_RANGES one-byte ranges of
 * a 128 KiB value of 8 parts (one answer each: the pin counts the value
 * once) while a writer on another connection (--threads 2: another loop)
 * deletes the key and puts it again, the two versions alternately, both
 * with the same part lengths.  No frame may hold bytes of both versions;
 * a frame's items of the key's later version are misses
 * (get_version_misses).
 */

#define RVR_PART (16u << 10)
#define RVR_PARTS 8u
#define RVR_LEN (RVR_PART * RVR_PARTS)
#define RVR_RANGES 1024u
#define RVR_FRAMES 300u

struct rvr_writer {
	pthread_t t;
	struct kc w;
	const uint8_t *ns;
	const struct kvt_key *k;
	struct iovec *pa, *pb;
	_Atomic bool stop;
	unsigned puts;
};

static void *rvr_writer_main(void *arg)
{
	struct rvr_writer *wr = arg;

	while (!atomic_load(&wr->stop)) {
		(void)kc_delete(&wr->w, wr->ns, wr->k);
		if (kc_put(&wr->w, wr->ns, wr->k, wr->puts % 2 ? wr->pb : wr->pa, RVR_PARTS, NULL) ==
		    KVT_OK)
			wr->puts++;
	}
	return NULL;
}

static void phase_range_version_race(void)
{
	const char *extra[] = { "--threads", "2", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *a = malloc(RVR_LEN), *b = malloc(RVR_LEN);
	struct iovec pa[RVR_PARTS], pb[RVR_PARTS];
	struct proto_item *its = calloc(RVR_RANGES, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct rvr_writer wr = { 0 };
	unsigned frames = 0, mixed = 0, hit_frames = 0, miss_frames = 0, bad = 0;
	uint64_t vm0 = 0, vm1 = 0;
	struct kvt_key k;
	struct kc c, adm;
	uint64_t t0;

	T_ASSERT(a != NULL && b != NULL && its != NULL);
	start("range_version_race", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&wr.w, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	T_RC(kc_register(&wr.w, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(a, RVR_LEN, 71);
	for (unsigned i = 0; i < RVR_LEN; i++)
		b[i] = a[i] ^ 0xa5; /* every byte differs: one byte tells the version */
	for (unsigned p = 0; p < RVR_PARTS; p++) {
		pa[p] = (struct iovec){ a + (size_t)p * RVR_PART, RVR_PART };
		pb[p] = (struct iovec){ b + (size_t)p * RVR_PART, RVR_PART };
	}
	kvt_key_set(&k, "rvr-value", 9);
	T_RC(kc_put(&wr.w, ns, &k, pa, RVR_PARTS, NULL), KVT_OK);
	for (unsigned i = 0; i < RVR_RANGES; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = (uint64_t)i * (RVR_LEN / RVR_RANGES) + i % 7;
		its[i].len = 1;
	}
	f.ns_count = 1;
	f.ns = ns;
	T_EQ_INT(kc_stat(&adm, PROTO_SCOPE_ALL, "server.get_version_misses", &vm0), 0);
	wr.ns = ns;
	wr.k = &k;
	wr.pa = pa;
	wr.pb = pb;
	T_OK(pthread_create(&wr.t, NULL, rvr_writer_main, &wr));
	t0 = tsrv_now_ns();
	/* until a frame mixed, or RVR_FRAMES frames (5 s at most) */
	while (frames < RVR_FRAMES && !mixed && tsrv_now_ns() - t0 < 5000000000ull) {
		struct rv_seen rs = { its, a, b, 0, 0, 0, 0, 0 };
		f.tag = 0;
		T_ASSERT(kc_request(&c, &f, its, RVR_RANGES, NULL, 0) > 0);
		T_GE_INT(kc_recv_items(&c, 20000, rv_item, &rs, NULL), 1);
		T_EQ_INT(rs.seen, RVR_RANGES);
		frames++;
		bad += rs.bad;
		mixed += rs.old && rs.new_;
		hit_frames += rs.old || rs.new_;
		miss_frames += rs.miss && (rs.old || rs.new_);
	}
	atomic_store(&wr.stop, true);
	pthread_join(wr.t, NULL);
	T_EQ_INT(kc_stat(&adm, PROTO_SCOPE_ALL, "server.get_version_misses", &vm1), 0);
	printf("range_version_race: %u frames of %u ranges beside %u puts: %u with hits, %u with "
	       "hits and misses, %u of both versions; get_version_misses +%" PRIu64 "; %u wrong\n",
	       frames, RVR_RANGES, wr.puts, hit_frames, miss_frames, mixed, vm1 - vm0, bad);
	T_EQ_INT(bad, 0);
	T_EQ_INT(mixed, 0);
	T_GE_INT(hit_frames, 1);
	T_GE_INT(wr.puts, 2);
	kc_close(&adm);
	kc_close(&wr.w);
	kc_close(&c);
	free(its);
	free(a);
	free(b);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_pins: a GET's answer keeps its whole value pinned whatever range
 * it sends, so the pin caps count the value, once per answer however
 * many of its items pin it (ops.c "Pinned answers").  They counted the
 * range: one unread frame of a whole GET of a 6 MiB value and one-byte
 * ranges of 9 others held 10 pins, 60 MiB of the 64 MiB tier, and
 * another tenant's PUT of 8 MiB failed (-5011).
 */

#define RP_LEN (6u << 20)
#define RP_VALUES 10
#define RP_RANGES 64

struct rpins_seen {
	const uint8_t *whole; /* the value item 0 reads */
	const uint8_t *first; /* ranges of other values: the byte each reads;
			       * NULL: ranges of whole */
	const struct proto_item *its;
	unsigned ok, seen, miss;
};

/* Item 0 whole, the others one byte each: as put. */
static void rpins_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct rpins_seen *rs = ctx;
	const struct proto_item *q = &rs->its[pi->index];

	rs->seen++;
	if (pi->status == KVT_MISS && pi->index)
		rs->miss++;
	if (pi->status != KVT_OK)
		return;
	if (pi->index == 0 && pi->data_len == RP_LEN &&
	    memcmp(r->data + pi->data_off, rs->whole, RP_LEN) == 0)
		rs->ok++;
	else if (pi->index && pi->data_len == 1 &&
		 r->data[pi->data_off] ==
			 (rs->first ? rs->first[pi->index] : rs->whole[q->off]))
		rs->ok++;
}

static void phase_range_pins(void)
{
	const char *extra[] = { "--ssd", "0", "--threads", "1", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], nsb[PROTO_DIGEST_LEN], first[RP_VALUES];
	uint8_t *v = malloc(RP_LEN), *v1 = malloc(RP_LEN), *big = malloc(8u << 20);
	struct proto_item its[RP_VALUES], one[1 + RP_RANGES];
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct rpins_seen rs;
	struct kvt_ns_desc db = desc;
	struct kc alice, a2, a3, bob, adm;
	struct iovec pb = { big, 8u << 20 };
	struct kvt_key kb;
	uint64_t pins = 0;
	int rc;

	memset(its, 0, sizeof(its));
	memset(one, 0, sizeof(one));
	start_with("range_pins", extra, "alice " SECRET_ALICE " tenant\n"
					"bob " SECRET_ALICE " tenant\n"
					"admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&alice, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&alice, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < RP_VALUES; i++) {
		struct iovec p = { i ? v1 : v, RP_LEN };
		tsrv_fill(p.iov_base, RP_LEN, i);
		first[i] = ((uint8_t *)p.iov_base)[0];
		g_key(&its[i].key, i);
		T_RC(kc_put(&alice, ns, &its[i].key, &p, 1, NULL), KVT_OK);
		if (i) {
			its[i].flags = PROTO_IF_RANGE;
			its[i].len = 1;
		}
	}
	T_RC(kc_dial(&a2, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&bob, srv.port, "bob", SECRET_ALICE), 0);
	db.model = "hostile-bob";
	T_RC(kc_register(&bob, &db, nsb, NULL, 0), KVT_OK);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	f.ns_count = 1;
	f.ns = ns;

	/* 1. A whole GET and one-byte ranges of 9 other values, unread: the
	 * connection's pins held to its cap (--dram 64M: 8 MiB, one value),
	 * the rest deferred; another tenant's PUT of 8 MiB finds room. */
	T_ASSERT(kc_request(&a2, &f, its, RP_VALUES, NULL, 0) > 0);
	tsrv_sleep_ms(300);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "store.pins_active", &pins), 0);
	kvt_key_set(&kb, "bob-big", 7);
	memset(big, 0x5a, 8u << 20);
	rc = kc_put(&bob, nsb, &kb, &pb, 1, NULL);
	printf("range_pins: a whole GET and 9 one-byte ranges of 6 MiB values in one frame, "
	       "unread: store.pins_active %" PRIu64 " (%" PRIu64 " MiB); bob's PUT of 8 MiB: "
	       "%d\n", pins, pins * (RP_LEN >> 20), rc);
	T_LE_INT(pins, 1);
	T_RC(rc, KVT_OK);
	/* read: the deferred ranges come as the answer drains, exact, or
	 * misses where bob's PUT evicted their values meanwhile (a resumed
	 * chunk of misses alone waited for a drain that never came) */
	rs = (struct rpins_seen){ v, first, its, 0, 0, 0 };
	T_GE_INT(kc_recv_items(&a2, 10000, rpins_item, &rs, NULL), 1);
	printf("range_pins: read: %u exact, %u misses (evicted)\n", rs.ok, rs.miss);
	T_EQ_INT(rs.seen, RP_VALUES);
	T_GE_INT(rs.ok, 1);
	T_EQ_INT(rs.ok + rs.miss, RP_VALUES);

	/* 2. Ranges of one value share its pin's DRAM: counted once, a whole
	 * GET of it and 64 ranges of it answered at once (not deferred one
	 * by one), every pin held while unread. */
	{
		struct iovec p = { v1, RP_LEN };
		tsrv_fill(v1, RP_LEN, RP_VALUES);
		g_key(&one[0].key, RP_VALUES);
		T_RC(kc_put(&alice, ns, &one[0].key, &p, 1, NULL), KVT_OK);
	}
	for (unsigned j = 1; j <= RP_RANGES; j++) {
		one[j].key = one[0].key;
		one[j].flags = PROTO_IF_RANGE;
		one[j].off = (uint64_t)j * (RP_LEN / (RP_RANGES + 1)) + 3;
		one[j].len = 1;
	}
	T_RC(kc_dial(&a3, srv.port, "alice", SECRET_ALICE), 0);
	T_ASSERT(kc_request(&a3, &f, one, 1 + RP_RANGES, NULL, 0) > 0);
	tsrv_sleep_ms(300);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "store.pins_active", &pins), 0);
	printf("range_pins: a whole GET and %u one-byte ranges of one 6 MiB value in one "
	       "frame, unread: store.pins_active %" PRIu64 "\n", RP_RANGES, pins);
	T_EQ_U64(pins, 1 + RP_RANGES);
	rs = (struct rpins_seen){ v1, NULL, one, 0, 0, 0 };
	T_GE_INT(kc_recv_items(&a3, 10000, rpins_item, &rs, NULL), 1);
	T_EQ_INT(rs.seen, 1 + RP_RANGES);
	T_EQ_INT(rs.ok, 1 + RP_RANGES);
	tsrv_sleep_ms(50);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "store.pins_active", &pins), 0);
	T_EQ_U64(pins, 0);

	kc_close(&alice);
	kc_close(&a2);
	kc_close(&a3);
	kc_close(&bob);
	kc_close(&adm);
	free(v);
	free(v1);
	free(big);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * slow_reader (item 4): a slow reader does not pin DRAM for everyone
 */

#define S_BLOCKS 56
#define S_LEN (1u << 20)

/* alice: 512 KiB a second, every second (progress, never a stall). */
struct slow_reader {
	pthread_t t;
	int fd;
	_Atomic bool stop;
	uint64_t got;
};

static void *slow_reader_main(void *arg)
{
	struct slow_reader *r = arg;
	char *sink = malloc(64u << 10);

	while (!atomic_load(&r->stop)) {
		uint64_t want = 512u << 10;
		while (want) {
			ssize_t n = recv(r->fd, sink, want < (64u << 10) ? want : (64u << 10),
					 MSG_DONTWAIT);
			if (n <= 0)
				break;
			r->got += (uint64_t)n;
			want -= (uint64_t)n;
		}
		tsrv_sleep_ms(1000);
	}
	free(sink);
	return NULL;
}

static void phase_slow_reader(void)
{
	const char *extra[] = { "--ssd", "0", "--idle-timeout", "3", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], nsb[PROTO_DIGEST_LEN], *v = malloc(S_LEN);
	struct kvt_ns_desc db = desc;
	struct proto_item *its = calloc(S_BLOCKS, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	unsigned puts = 0, efull = 0, other = 0;
	uint64_t t0, pins_max = 0, pins_end = 0;
	struct slow_reader sr = { 0 };
	struct kc alice, bob, adm;

	/* bob's quota is his: the pool must find him room. */
	start_with("slow_reader", extra, "alice " SECRET_ALICE " tenant\n"
					 "bob " SECRET_ALICE " tenant dram=16M\n"
					 "admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&alice, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&alice, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < S_BLOCKS; i++) {
		struct iovec p = { v, S_LEN };
		g_key(&its[i].key, i);
		tsrv_fill(v, S_LEN, i);
		T_RC(kc_put(&alice, ns, &its[i].key, &p, 1, NULL), KVT_OK);
	}
	T_RC(kc_dial(&bob, srv.port, "bob", SECRET_ALICE), 0);
	db.model = "hostile-bob";
	T_RC(kc_register(&bob, &db, nsb, NULL, 0), KVT_OK);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);

	/* alice: one GET of all of it, read at 0.5 MiB/s. */
	f.ns_count = 1;
	f.ns = ns;
	T_ASSERT(kc_request(&alice, &f, its, S_BLOCKS, NULL, 0) > 0);
	sr.fd = alice.fd;
	pthread_create(&sr.t, NULL, slow_reader_main, &sr);
	t0 = tsrv_now_ns();
	tsrv_fill(v, S_LEN, 999);
	for (unsigned round = 0; tsrv_now_ns() - t0 < 10000000000ull; round++) {
		struct kvt_key k;
		struct iovec p = { v, S_LEN };
		char name[32];
		uint64_t pins = 0;
		int rc;
		snprintf(name, sizeof(name), "bob-%u", round);
		kvt_key_set(&k, name, strlen(name));
		rc = kc_put(&bob, nsb, &k, &p, 1, NULL);
		puts++;
		if (rc == KVT_EFULL)
			efull++;
		else if (rc != KVT_OK)
			other++;
		if (kc_stat(&adm, PROTO_SCOPE_ALL, "store.pins_active", &pins) == 0) {
			if (pins > pins_max)
				pins_max = pins;
			pins_end = pins;
		}
		tsrv_sleep_ms(100);
	}
	/* She goes on reading; within the drain windows she is closed. */
	for (int i = 0; i < 100 && pins_end; i++) {
		tsrv_sleep_ms(100);
		if (kc_stat(&adm, PROTO_SCOPE_ALL, "store.pins_active", &pins_end) != 0)
			break;
	}
	atomic_store(&sr.stop, true);
	pthread_join(sr.t, NULL);
	printf("slow_reader: alice GETs %u MiB in one frame and reads 0.5 MiB/s (%" PRIu64
	       " KiB); store.pins_active peak %" PRIu64 ", at the end (10-20 s) %" PRIu64
	       "; bob's 1 MiB PUTs (dram=16M quota): %u, KVT_EFULL %u, other errors %u\n",
	       S_BLOCKS, sr.got >> 10, pins_max, pins_end, puts, efull, other);
	/* Pinned per connection: at most an eighth of --dram (8 blocks). */
	T_LE_INT(pins_max, DRAM / 8 / S_LEN + 1);
	/* She cannot have drained 56 MiB: she was closed, her pins let go. */
	T_EQ_INT(pins_end, 0);
	T_EQ_INT(efull, 0);
	T_EQ_INT(other, 0);
	kc_close(&alice);
	kc_close(&bob);
	kc_close(&adm);
	free(v);
	free(its);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ns_registry (item 6): registering namespaces stalls nobody; a quota
 */

#define N_TRIES 1100
#define N_QUOTA 1024

struct getter {
	pthread_t t;
	_Atomic bool stop;
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t lat[200000];
	unsigned n;
	int fails;
};

static void *getter_main(void *arg)
{
	struct getter *g = arg;
	struct kvt_key k;
	struct kc c;

	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, g->ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "alice-key", 9);
	while (!atomic_load(&g->stop) && g->n < 200000) {
		struct kvt_ns_desc d = desc;
		uint8_t dg[PROTO_DIGEST_LEN];
		struct kc_value v;
		uint64_t t0 = tsrv_now_ns();
		/* A GET and a lookup of her own (known) namespace. */
		if (kc_get(&c, g->ns, &k, 0, 0, 0, 0, &v) != KVT_OK)
			g->fails++;
		kc_value_free(&v);
		if (kc_register(&c, &d, dg, NULL, 0) != KVT_OK)
			g->fails++;
		g->lat[g->n++] = tsrv_now_ns() - t0;
		tsrv_sleep_ms(2);
	}
	kc_close(&c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void phase_ns_registry(void)
{
	static struct getter g;
	const char *extra[] = { "--ssd", "0", NULL };
	unsigned ok = 0, full = 0, other = 0;
	uint64_t t0, took, p50, p99, base_p99;
	uint8_t v[4096];
	struct kc m, a;

	start_with("ns_registry", extra, "alice " SECRET_ALICE " tenant\n"
					 "mallory " SECRET_ALICE " tenant\n"
					 "admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	{
		uint8_t ns[PROTO_DIGEST_LEN];
		struct kvt_key k;
		struct iovec p = { v, sizeof(v) };
		T_RC(kc_register(&a, &desc, ns, NULL, 0), KVT_OK);
		kvt_key_set(&k, "alice-key", 9);
		tsrv_fill(v, sizeof(v), 3);
		T_RC(kc_put(&a, ns, &k, &p, 1, NULL), KVT_OK);
	}
	/* alice's latency alone, then while mallory registers. */
	pthread_create(&g.t, NULL, getter_main, &g);
	tsrv_sleep_ms(1500);
	atomic_store(&g.stop, true);
	pthread_join(g.t, NULL);
	qsort(g.lat, g.n, sizeof(g.lat[0]), cmp_u64);
	base_p99 = g.lat[g.n * 99 / 100];
	memset(&g, 0, sizeof(g));
	pthread_create(&g.t, NULL, getter_main, &g);

	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < N_TRIES; i++) {
		struct kvt_ns_desc d = desc;
		char model[300];
		uint8_t dg[PROTO_DIGEST_LEN];
		int rc;
		/* Long descriptors: a registry that grows fast. */
		snprintf(model, sizeof(model), "mallory-%05u-%0240u", i, i);
		d.model = model;
		rc = kc_register(&m, &d, dg, NULL, 0);
		if (rc == KVT_OK)
			ok++;
		else if (rc == KVT_EFULL)
			full++;
		else
			other++;
	}
	took = tsrv_now_ns() - t0;
	atomic_store(&g.stop, true);
	pthread_join(g.t, NULL);
	qsort(g.lat, g.n, sizeof(g.lat[0]), cmp_u64);
	p50 = g.lat[g.n / 2];
	p99 = g.lat[g.n * 99 / 100];
	printf("ns_registry: mallory tried %u namespaces in %.1f s: %u registered, %u refused "
	       "(quota), %u other; alice's GET + NS_REGISTER of a known namespace: p50 %.2f ms, "
	       "p99 %.2f ms (%u samples, %d failed); alone p99 %.2f ms\n", N_TRIES, took / 1e9,
	       ok, full, other, p50 / 1e6, p99 / 1e6, g.n, g.fails, base_p99 / 1e6);
	T_EQ_INT(ok, N_QUOTA);
	T_EQ_INT(full, N_TRIES - N_QUOTA);
	T_EQ_INT(g.fails, 0);
	/* Lookups never wait on the registry's disk writes. */
	T_LE_INT(p99, base_p99 + 20000000ull);
	kc_close(&m);
	kc_close(&a);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tenant_index (item 6): a tenant's STATS and CLEAR cost its own
 * namespaces, not every tenant's
 */

#define TI_FILLERS 10   /* tenants that fill the registry ... */
#define TI_EACH 1000    /* ... with this many namespaces each */
#define TI_FRAME 250    /* namespaces per NS_REGISTER frame */

struct ti_filler {
	pthread_t t;
	unsigned who;
	unsigned ok;
};

static void *ti_filler_main(void *arg)
{
	struct ti_filler *fl = arg;
	static _Thread_local char texts[TI_FRAME][PROTO_CANON_MAX + 1];
	struct proto_item its[TI_FRAME];
	char name[32];
	struct kc c;

	snprintf(name, sizeof(name), "filler%u", fl->who);
	T_RC(kc_dial(&c, srv.port, name, SECRET_ALICE), 0);
	for (unsigned base_i = 0; base_i < TI_EACH; base_i += TI_FRAME) {
		struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
		struct proto_iter iter;
		struct proto_item pi;
		struct kc_resp r;
		memset(its, 0, sizeof(its));
		for (unsigned i = 0; i < TI_FRAME; i++) {
			struct kvt_ns_desc d = desc;
			char model[64];
			snprintf(model, sizeof(model), "fill-%u-%u", fl->who, base_i + i);
			d.model = model;
			its[i].text = texts[i];
			its[i].text_len = (uint32_t)kvt_ns_digest(&d, NULL, texts[i], PROTO_CANON_MAX + 1);
		}
		T_ASSERT(kc_request(&c, &f, its, TI_FRAME, NULL, 0) > 0);
		T_RC(kc_recv(&c, &r, 60000), 0);
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		while (proto_iter_next(&iter, &pi) == 1)
			fl->ok += pi.status == KVT_OK;
		kc_resp_free(&r);
	}
	kc_close(&c);
	return NULL;
}

/* Median of n latencies (sorts them). */
static uint64_t median_of(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(v[0]), cmp_u64);
	return v[n / 2];
}

/* mallory's STATS (own tenant) and CLEAR (own tenant) latencies: medians
 * over n of each.  The block she clears is put back each time. */
static void ti_mallory(struct kc *m, const uint8_t ns[PROTO_DIGEST_LEN], unsigned n,
		       uint64_t *stats_ns, uint64_t *clear_ns, uint64_t *namespaces)
{
	uint64_t *st = calloc(n, sizeof(*st)), *cl = calloc(n, sizeof(*cl));
	uint8_t v[512];
	struct iovec p = { v, sizeof(v) };
	struct kvt_key k;

	kvt_key_set(&k, "mallory-key", 11);
	tsrv_fill(v, sizeof(v), 5);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = tsrv_now_ns(), removed = 0;
		T_RC(kc_stat(m, PROTO_SCOPE_TENANT, "tenant.namespaces", namespaces), 0);
		st[i] = tsrv_now_ns() - t0;
		T_RC(kc_put(m, ns, &k, &p, 1, NULL), KVT_OK);
		t0 = tsrv_now_ns();
		T_RC(kc_clear(m, PROTO_SCOPE_TENANT, NULL, NULL, &removed), 0);
		cl[i] = tsrv_now_ns() - t0;
		T_EQ_U64(removed, 1);
	}
	*stats_ns = median_of(st, n);
	*clear_ns = median_of(cl, n);
	free(st);
	free(cl);
}

struct ti_hammer {
	pthread_t t;
	_Atomic bool stop;
	const uint8_t *ns;
	unsigned rounds;
};

static void *ti_hammer_main(void *arg)
{
	struct ti_hammer *h = arg;
	struct kc m;

	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	while (!atomic_load(&h->stop)) {
		uint64_t a, b, n;
		ti_mallory(&m, h->ns, 1, &a, &b, &n);
		h->rounds++;
		tsrv_sleep_ms(5); /* ~150 a second: a busy tenant, not a flood */
	}
	kc_close(&m);
	return NULL;
}

static char ti_shm[64]; /* the store's tmpfs directory, removed even if the phase fails */

static void ti_shm_remove(void)
{
	if (ti_shm[0])
		t_rmtree(ti_shm);
	ti_shm[0] = 0;
}

static void phase_tenant_index(void)
{
	static struct getter g;
	static struct ti_filler fl[TI_FILLERS];
	static struct ti_hammer h;
	const char *extra[] = { "--ssd", "0", "--threads", "1", NULL };
	char text[4096];
	size_t tl = 0;
	uint8_t mns[PROTO_DIGEST_LEN], v[4096];
	uint64_t st0, cl0, st1, cl1, nss, base_p50, base_p99, p50, p99, t0, fill_ns;
	unsigned filled = 0;
	struct kc a, m;

	tl += (size_t)snprintf(text + tl, sizeof(text) - tl,
			       "alice " SECRET_ALICE " tenant\nmallory " SECRET_ALICE " tenant\n"
			       "admin " SECRET_ADMIN " admin\n");
	for (unsigned i = 0; i < TI_FILLERS; i++)
		tl += (size_t)snprintf(text + tl, sizeof(text) - tl, "filler%u " SECRET_ALICE
				       " tenant\n", i);
	/* The store (a registry only: --ssd 0) on tmpfs where there is one:
	 * this phase is about the cost of STATS and CLEAR, not of 10,000
	 * fdatasyncs on a shared disk. */
	snprintf(ti_shm, sizeof(ti_shm), "/dev/shm/kvt-tenant-index.XXXXXX");
	if (mkdtemp(ti_shm)) {
		char link[700];
		atexit(ti_shm_remove);
		snprintf(link, sizeof(link), "%s/tenant_index", base);
		T_EQ_INT(symlink(ti_shm, link), 0);
	} else {
		ti_shm[0] = 0;
	}
	start_with("tenant_index", extra, text);
	rss_begin();
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	{
		uint8_t ns[PROTO_DIGEST_LEN];
		struct kvt_key k;
		struct iovec p = { v, sizeof(v) };
		T_RC(kc_register(&a, &desc, ns, NULL, 0), KVT_OK);
		kvt_key_set(&k, "alice-key", 9);
		tsrv_fill(v, sizeof(v), 3);
		T_RC(kc_put(&a, ns, &k, &p, 1, NULL), KVT_OK);
	}
	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	{
		struct kvt_ns_desc d = desc;
		d.model = "mallory-model";
		T_RC(kc_register(&m, &d, mns, NULL, 0), KVT_OK);
	}
	/* A registry of 3 namespaces: mallory's STATS and CLEAR. */
	ti_mallory(&m, mns, 40, &st0, &cl0, &nss);
	T_EQ_U64(nss, 1);

	/* Ten other tenants register 1000 namespaces each. */
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < TI_FILLERS; i++) {
		fl[i].who = i;
		pthread_create(&fl[i].t, NULL, ti_filler_main, &fl[i]);
	}
	for (unsigned i = 0; i < TI_FILLERS; i++) {
		pthread_join(fl[i].t, NULL);
		filled += fl[i].ok;
	}
	fill_ns = tsrv_now_ns() - t0;
	T_EQ_INT(filled, TI_FILLERS * TI_EACH);

	/* The same with 10,003: proportional to her one namespace, not to
	 * theirs. */
	ti_mallory(&m, mns, 40, &st1, &cl1, &nss);
	T_EQ_U64(nss, 1);

	/* alice's GET + lookup while nobody else works, then while mallory
	 * sends STATS, PUT and CLEAR every 5 ms (one loop thread serves
	 * all). */
	pthread_create(&g.t, NULL, getter_main, &g);
	tsrv_sleep_ms(1500);
	atomic_store(&g.stop, true);
	pthread_join(g.t, NULL);
	qsort(g.lat, g.n, sizeof(g.lat[0]), cmp_u64);
	base_p50 = g.lat[g.n / 2];
	base_p99 = g.lat[g.n * 99 / 100];
	T_EQ_INT(g.fails, 0);
	memset(&g, 0, sizeof(g));
	h.ns = mns;
	pthread_create(&h.t, NULL, ti_hammer_main, &h);
	pthread_create(&g.t, NULL, getter_main, &g);
	tsrv_sleep_ms(2000);
	atomic_store(&g.stop, true);
	pthread_join(g.t, NULL);
	atomic_store(&h.stop, true);
	pthread_join(h.t, NULL);
	qsort(g.lat, g.n, sizeof(g.lat[0]), cmp_u64);
	p50 = g.lat[g.n / 2];
	p99 = g.lat[g.n * 99 / 100];
	printf("tenant_index: %u namespaces of %u other tenants registered in %.1f s; "
	       "mallory's STATS (1 namespace) median %.2f ms with 3 namespaces in the "
	       "registry, %.2f ms with %u; her CLEAR %.2f ms, %.2f ms; alice's GET + lookup "
	       "while mallory sends %u STATS + CLEAR: p50 %.2f ms p99 %.2f ms (alone p50 %.2f "
	       "ms p99 %.2f ms, %u samples, %d failed)\n", filled, TI_FILLERS, fill_ns / 1e9,
	       st0 / 1e6, st1 / 1e6, filled + 3, cl0 / 1e6, cl1 / 1e6, h.rounds, p50 / 1e6,
	       p99 / 1e6, base_p50 / 1e6, base_p99 / 1e6, g.n, g.fails);
	T_EQ_INT(g.fails, 0);
	/* Her requests cost what they cost with an empty registry. */
	T_LE_INT(st1, 2 * st0 + 500000ull);
	T_LE_INT(cl1, 3 * cl0 + 1000000ull);
	/* And alice does not wait for them.  (Her p99 is printed: on a
	 * loaded 2-core machine it swings by tens of ms either way; only a
	 * stall of the loop would pass this bound.) */
	T_LE_INT(p50, 2 * base_p50 + 2000000ull);
	T_LE_INT(p99, base_p99 + 100000000ull);
	/* The index and the registry stay within the bound of doc/security.md. */
	rss_end(DRAM + MAX_MEMORY);
	kc_close(&m);
	kc_close(&a);
	T_EQ_INT(tsrv_stop(&srv), 0);
	ti_shm_remove();
}

/* ------------------------------------------------------------------------
 * auth_guess (item 11): RESP AUTH guessing is closed, logged, throttled
 */

/* One RESP AUTH on a new connection: the reply, and whether the server
 * closed the connection after it. */
static void resp_auth_once(uint16_t port, const char *secret, char *reply, size_t cap,
			   bool *closed)
{
	char req[256];
	int fd = tcp_connect(port), n;

	n = snprintf(req, sizeof(req), "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$%zu\r\n%s\r\n"
		     "*1\r\n$4\r\nPING\r\n", strlen(secret), secret);
	send_for(fd, req, (size_t)n, 1000);
	recv_for(fd, reply, cap, 500, closed);
	close(fd);
}

static void phase_auth_guess(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", NULL };
	char reply[256], buf[1 << 16];
	unsigned guesses = 0, throttled_ok = 0;
	bool closed = false, good_closed;
	uint64_t t0;
	uint16_t port;
	int fd;
	ssize_t r;

	start("auth_guess", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	/* A wrong password: WRONGPASS, and the connection is closed (the
	 * PING pipelined after it is not answered). */
	resp_auth_once(port, "wrong-password-000", reply, sizeof(reply), &closed);
	printf("auth_guess: wrong AUTH: reply '%.40s', closed %d\n", reply, closed);
	T_ASSERT(strstr(reply, "WRONGPASS") != NULL);
	T_ASSERT(strstr(reply, "PONG") == NULL);
	T_ASSERT(closed);
	/* The right one still works (and PING is answered). */
	tsrv_sleep_ms(1100);
	resp_auth_once(port, SECRET_ALICE, reply, sizeof(reply), &good_closed);
	T_ASSERT(strstr(reply, "+OK") != NULL && strstr(reply, "PONG") != NULL);
	/* Guessing from one address: past 20 failures in a second even the
	 * right password is refused until the second is over.  The server
	 * counts failures per second of CLOCK_MONOTONIC, this process's clock
	 * too: each try starts just after a second begins, so that its
	 * guesses and the right password fall in one second (a burst that
	 * crossed a second's end started a new count: the right password was
	 * accepted, CI 2026-12-02).  A try the machine stalled past its
	 * second is tried again, up to 3 times; the verdict is the first try
	 * that stayed in its second. */
	for (int try = 0; try < 3; try++) {
		uint64_t sec;
		tsrv_sleep_ms((long)((1000000000ull - tsrv_now_ns() % 1000000000ull) / 1000000ull) + 5);
		t0 = tsrv_now_ns();
		sec = t0 / 1000000000ull;
		guesses = 0;
		while (tsrv_now_ns() - t0 < 300000000ull && guesses < 200) {
			char g[32];
			snprintf(g, sizeof(g), "guess-%06u-xxxxxxxx", guesses++);
			resp_auth_once(port, g, reply, sizeof(reply), &closed);
		}
		resp_auth_once(port, SECRET_ALICE, reply, sizeof(reply), &closed);
		throttled_ok = strstr(reply, "WRONGPASS") != NULL;
		if (tsrv_now_ns() / 1000000000ull == sec)
			break;
		printf("auth_guess: try %d ran past its second (%u guesses), again\n", try, guesses);
	}
	tsrv_sleep_ms(1100);
	resp_auth_once(port, SECRET_ALICE, reply, sizeof(reply), &good_closed);
	printf("auth_guess: %u guesses in 0.3 s, then the right password %s; a second later "
	       "'%.10s'\n", guesses, throttled_ok ? "refused (throttled)" : "accepted", reply);
	T_ASSERT(throttled_ok);
	T_ASSERT(strstr(reply, "+OK") != NULL);
	/* Each failure is logged at warn. */
	fd = open(srv.log, O_RDONLY);
	T_ASSERT(fd >= 0);
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[r > 0 ? r : 0] = 0;
	T_ASSERT(strstr(buf, "level=warn msg=\"authentication failed\"") != NULL);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * throttle_slots (session 48): a flooder's slot-neighbour is not throttled
 */

/* kvtd_peer_slot (daemon/base.c) of an IPv4 address (host order) under
 * key: XXH3 of 4 and the address's bytes, into 4,096 slots. */
static uint32_t ts_slot(uint64_t key, uint32_t addr)
{
	uint8_t b[5] = { 4, (uint8_t)(addr >> 24), (uint8_t)(addr >> 16), (uint8_t)(addr >> 8),
			 (uint8_t)addr };
	return (uint32_t)(XXH3_64bits_withSeed(b, sizeof(b), key) % 4096u);
}

/* The rows' keys these phases give kvtierd (KVTD_TEST_THROTTLE_KEYS),
 * chosen so that 127.0.0.0/16 holds an address sharing both of
 * 127.0.0.1's slots (127.0.218.4), whose refusal shows the keys took:
 * without it a broken hook (random keys) passed these phases. */
#define TS_K0 0x48a11ce5ull
#define TS_K1 0x48b0b084ull
#define TS_KEYS "0x48a11ce5,0x48b0b084"

/* In 127.0.0.0/16: *one shares 127.0.0.1's row-0 slot and not its row-1
 * one; *both shares both. */
static void ts_neighbours(uint32_t *one, uint32_t *both)
{
	const uint32_t me = 0x7f000001u;

	*one = *both = 0;
	for (uint32_t a = 0x7f000002u; a < 0x7f010000u && !(*one && *both); a++) {
		if (ts_slot(TS_K0, a) != ts_slot(TS_K0, me))
			continue;
		if (ts_slot(TS_K1, a) == ts_slot(TS_K1, me)) {
			if (!*both)
				*both = a;
		} else if (!*one) {
			*one = a;
		}
	}
	T_ASSERT(*one != 0 && *both != 0);
}

/* resp_auth_once from the loopback address addr (host order). */
static void resp_auth_from(uint16_t port, uint32_t addr, const char *secret, char *reply,
			   size_t cap, int ms)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, sa = { .sin_family = AF_INET };
	char req[256];
	bool closed;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

	T_ASSERT(fd >= 0);
	me.sin_addr.s_addr = htonl(addr);
	T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	n = snprintf(req, sizeof(req), "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$%zu\r\n%s\r\n"
		     "*1\r\n$4\r\nPING\r\n", strlen(secret), secret);
	send_for(fd, req, (size_t)n, 1000);
	recv_for(fd, reply, cap, ms, &closed);
	close(fd);
}

/*
 * The failure throttle's slots under keys the test sets
 * (KVTD_TEST_THROTTLE_KEYS): 127.0.0.1 guesses alice's secret 60 times in
 * a second; a loopback address that shares 127.0.0.1's slot of the first
 * row (and not of the second) logs in with the right secret that second,
 * while 127.0.0.1's own right secret is refused (throttled).  With one
 * row of slots (before session 48) the neighbour was refused with it.
 */
static void phase_throttle_slots(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", NULL };
	const uint32_t flooder = 0x7f000001u;
	uint32_t nb, both;
	char reply[256], ok_reply[256] = "", fl_reply[256] = "", both_reply[256] = "";
	uint16_t port;

	ts_neighbours(&nb, &both);
	printf("throttle_slots: 127.%u.%u.%u shares 127.0.0.1's first-row slot %u\n",
	       (nb >> 16) & 255, (nb >> 8) & 255, nb & 255, ts_slot(TS_K0, flooder));
	T_OK(setenv("KVTD_TEST_THROTTLE_KEYS", TS_KEYS, 1));
	start("throttle_slots", extra);
	T_OK(unsetenv("KVTD_TEST_THROTTLE_KEYS"));
	port = tsrv_listener_port(srv.log, "RESP");
	/* In one second of CLOCK_MONOTONIC (the server's clock too), tried
	 * again up to 3 times where the machine stalled past it (as
	 * auth_guess does). */
	for (int try = 0; try < 3; try++) {
		uint64_t sec;
		tsrv_sleep_ms((long)((1000000000ull - tsrv_now_ns() % 1000000000ull) / 1000000ull) + 5);
		sec = tsrv_now_ns() / 1000000000ull;
		for (unsigned g = 0; g < 60; g++) {
			char guess[32];
			snprintf(guess, sizeof(guess), "guess-%06u-xxxxxxxx", g);
			resp_auth_from(port, flooder, guess, reply, sizeof(reply), 500);
		}
		/* the flooder's answer and close come at once; the neighbour's
		 * connection stays open after its PONG */
		resp_auth_from(port, flooder, SECRET_ALICE, fl_reply, sizeof(fl_reply), 500);
		resp_auth_from(port, nb, SECRET_ALICE, ok_reply, sizeof(ok_reply), 100);
		/* and one sharing both its slots: throttled with it (the keys
		 * took) */
		resp_auth_from(port, both, SECRET_ALICE, both_reply, sizeof(both_reply), 500);
		if (tsrv_now_ns() / 1000000000ull == sec)
			break;
		printf("throttle_slots: try %d ran past its second, again\n", try);
	}
	printf("throttle_slots: the neighbour's right AUTH %s; the flooder's %s\n",
	       strstr(ok_reply, "+OK") ? "served" : "refused",
	       strstr(fl_reply, "WRONGPASS") ? "refused (throttled)" : "served");
	T_ASSERT(strstr(fl_reply, "WRONGPASS") != NULL); /* the flooder throttled */
	T_ASSERT(strstr(both_reply, "WRONGPASS") != NULL); /* its both-slot neighbour too */
	T_ASSERT(strstr(ok_reply, "+OK") != NULL && strstr(ok_reply, "PONG") != NULL);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * unauth_slots (session 48 review): the unauthenticated connections'
 * per-address count in two rows; a slot-neighbour of an address at its
 * cap is not refused
 */

/* A TCP connection to the server from the loopback address addr (host
 * order). */
static int tcp_connect_addr(uint16_t port, uint32_t addr)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	T_ASSERT(fd >= 0);
	me.sin_addr.s_addr = htonl(addr);
	T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

#define US_CAP 16u /* --max-conns 64: 32 unauthenticated, 16 an address */

/*
 * Under row keys the test sets (KVTD_TEST_THROTTLE_KEYS): 127.0.0.1 holds
 * its 16 unauthenticated connections (HELLO answered, no AUTH) and its
 * 17th is refused; a loopback address sharing 127.0.0.1's slot of the
 * first row (not of the second) then logs in and PINGs.  With one row
 * (peer_unauth[peer_slot], before the review) its login was refused
 * (KVT_EBUSY, "too many unauthenticated connections from this address").
 */
static void phase_unauth_slots(void)
{
	const char *extra[] = { "--max-conns", "64", "--threads", "1", NULL };
	const uint32_t hog = 0x7f000001u;
	static struct kc held[US_CAP];
	struct kc more, nbc;
	uint32_t nb, both;
	unsigned ok = 0;
	int rc_more, rc_nb, rc_both, rc_ping = -1;

	ts_neighbours(&nb, &both);
	T_OK(setenv("KVTD_TEST_THROTTLE_KEYS", TS_KEYS, 1));
	start("unauth_slots", extra);
	T_OK(unsetenv("KVTD_TEST_THROTTLE_KEYS"));
	for (unsigned i = 0; i < US_CAP; i++) {
		kc_adopt(&held[i], tcp_connect_addr(srv.port, hog));
		ok += kc_hello(&held[i]) == 0;
	}
	kc_adopt(&more, tcp_connect_addr(srv.port, hog));
	rc_more = kc_hello(&more);
	kc_close(&more);
	/* one sharing both its slots is counted with it: refused (the keys
	 * took) */
	kc_adopt(&nbc, tcp_connect_addr(srv.port, both));
	rc_both = kc_hello(&nbc);
	kc_close(&nbc);
	kc_adopt(&nbc, tcp_connect_addr(srv.port, nb));
	rc_nb = kc_login(&nbc, "alice", SECRET_ALICE);
	if (rc_nb == 0)
		rc_ping = kc_ping(&nbc);
	kc_close(&nbc);
	printf("unauth_slots: 127.0.0.1 holds %u of %u unauthenticated, its next: %d; "
	       "127.0.%u.%u (both its slots): %d; 127.%u.%u.%u (its row-0 slot %u) logs in: "
	       "%d, PING %d\n", ok, US_CAP, rc_more, (both >> 8) & 255, both & 255, rc_both,
	       (nb >> 16) & 255, (nb >> 8) & 255, nb & 255, ts_slot(TS_K0, hog), rc_nb, rc_ping);
	for (unsigned i = 0; i < US_CAP; i++)
		kc_close(&held[i]);
	T_EQ_INT(ok, US_CAP);
	T_ASSERT(rc_more != 0); /* the address's own cap still holds */
	T_ASSERT(rc_both != 0); /* and its both-slot neighbour's */
	T_EQ_INT(rc_nb, 0);     /* its neighbour is not refused with it */
	T_EQ_INT(rc_ping, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * quota_groups (item 12): no tenant silently without its quota group
 */

static char *tenants_text(const char *prefix, unsigned n)
{
	size_t cap = (size_t)n * 80 + 200, len = 0;
	char *t = malloc(cap);

	len += (size_t)snprintf(t + len, cap - len, "admin " SECRET_ADMIN " admin\n");
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(t + len, cap - len, "%s%u " SECRET_ALICE " tenant dram=1M\n",
					prefix, i);
	return t;
}

/* A tenants file of line (so group 1 on a fresh server), admin and 1020
 * others, "f<from>".."f<from + 1019>": 1022 tenants, the most.  Given
 * from 0, then from 1 (groups_exhaust), every one of the 1023 groups has
 * been given, f0's free: a new tenant is then given a free group, the
 * one holding the fewest DRAM bytes, lowest first. */
static char *tenants_filled(const char *line, unsigned from)
{
	size_t cap = strlen(line) + 200 + (size_t)(KVT_QUOTA_GROUPS - 4) * 80, len;
	char *t = malloc(cap);

	T_ASSERT(t != NULL);
	len = (size_t)snprintf(t, cap, "%sadmin " SECRET_ADMIN " admin\n", line);
	for (unsigned i = from; i < from + KVT_QUOTA_GROUPS - 4; i++)
		len += (size_t)snprintf(t + len, cap - len, "f%u " SECRET_ALICE " tenant dram=1M\n",
					i);
	return t;
}

/* Start name with line's tenant and the others, then reload with f0
 * replaced by f1020: every group given. */
static void groups_exhaust(const char *name, const char *const *extra, const char *line,
			   uint16_t *mport)
{
	char *t = tenants_filled(line, 0);

	start_with(name, extra, t);
	free(t);
	if (mport) /* before the reload moves the log */
		*mport = tsrv_listener_port(srv.log, "metrics");
	t = tenants_filled(line, 1);
	reload(t);
	free(t);
}

static void phase_quota_groups(void)
{
	const char *extra[] = { "--ssd", "0", NULL };
	char path[700], cmd[2200], out[4096], *t;
	uint64_t group = 0, limit = 0;
	int status, fd;
	ssize_t r;
	struct kc c;

	/* 1030 tenants: refused at start, saying why. */
	snprintf(path, sizeof(path), "%s/tenants-1030", base);
	t = tenants_text("t", 1030);
	tsrv_write_file(NULL, path, t);
	free(t);
	snprintf(cmd, sizeof(cmd), "timeout 10 %s --dir %s/qg-refused --listen 127.0.0.1:0 "
		 "--ssd 0 --dram 16M --tenants %s > %s/qg.out 2>&1", bin, base, path, base);
	status = system(cmd);
	snprintf(path, sizeof(path), "%s/qg.out", base);
	fd = open(path, O_RDONLY);
	T_ASSERT(fd >= 0);
	r = read(fd, out, sizeof(out) - 1);
	close(fd);
	out[r > 0 ? r : 0] = 0;
	printf("quota_groups: 1030 tenants: exit %d, '%.120s'\n", WEXITSTATUS(status),
	       strstr(out, "tenants:") ? strstr(out, "tenants:") : out);
	T_EQ_INT(WEXITSTATUS(status), 2);
	T_ASSERT(strstr(out, "at most 1022") != NULL);

	/* 1000 tenants, then 1000 others: the removed names' groups are
	 * reused, so the new ones have their limits too. */
	t = tenants_text("t", 1000);
	start_with("quota_groups", extra, t);
	free(t);
	t = tenants_text("u", 1000);
	reload(t);
	free(t);
	T_RC(kc_dial(&c, srv.port, "u999", SECRET_ALICE), 0);
	kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &group);
	kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.dram_limit", &limit);
	printf("quota_groups: after a reload to 1000 new names, u999: group %" PRIu64
	       ", dram limit %" PRIu64 "\n", group, limit);
	T_ASSERT(group != 0);
	T_EQ_U64(limit, 1u << 20);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_info (item 10): INFO and DBSIZE are a tenant's own
 */

static void resp_as(uint16_t port, const char *who, const char *secret, const char *cmd,
		    char *reply, size_t cap)
{
	char req[512];
	bool closed;
	int fd = tcp_connect(port), n;

	n = snprintf(req, sizeof(req), "AUTH %s %s\r\n%s\r\n", who, secret, cmd);
	send_for(fd, req, (size_t)n, 1000);
	recv_for(fd, reply, cap, 500, &closed);
	close(fd);
}

static void phase_resp_info(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", NULL };
	char r1[8192], r2[8192], r3[256], r4[256];
	uint16_t port;

	start("resp_info", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	resp_as(port, "alice", SECRET_ALICE, "INFO", r1, sizeof(r1));
	resp_as(port, "admin", SECRET_ADMIN, "INFO", r2, sizeof(r2));
	resp_as(port, "alice", SECRET_ALICE, "DBSIZE", r3, sizeof(r3));
	resp_as(port, "admin", SECRET_ADMIN, "DBSIZE", r4, sizeof(r4));
	printf("resp_info: tenant INFO has server-wide hits: %d, connections: %d; admin: %d, %d; "
	       "tenant DBSIZE '%.40s', admin '%.20s'\n", strstr(r1, "kvtier_dram_hits") != NULL,
	       strstr(r1, "total_connections_received") != NULL,
	       strstr(r2, "kvtier_dram_hits") != NULL,
	       strstr(r2, "total_connections_received") != NULL, strchr(r3, '\n') + 1,
	       strchr(r4, '\n') + 1);
	T_ASSERT(strstr(r1, "kvtier_tenant_requests") != NULL);
	T_ASSERT(strstr(r1, "kvtier_dram_hits") == NULL);
	T_ASSERT(strstr(r1, "total_connections_received") == NULL);
	T_ASSERT(strstr(r2, "kvtier_dram_hits") != NULL);
	T_ASSERT(strstr(r3, "-ERR") != NULL);
	T_ASSERT(strstr(r4, ":") != NULL);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ns_split (item 16): an NS_REGISTER answer larger than a table is split.
 * Since attack14 a frame names at most KVTD_FRAME_ITEMS_MAX (1024)
 * descriptors, whose answer fits a table: more is refused as a whole
 * (PROTO_ECOUNT), the connection kept; 1024 long ones are answered whole.
 */

static void ns_split_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	(void)r;
	*(unsigned *)ctx += pi->status == KVT_OK;
}

/* The canonical text (into out, PROTO_CANON_MAX + 1 bytes) of a long
 * descriptor of alice's, about 860 bytes, distinct by prefix and k; its
 * length. */
static int long_desc_text(const char *prefix, unsigned k, char *out)
{
	struct kvt_ns_desc d = desc;
	char model[300], cfg[300], q[300];
	int tl;

	snprintf(model, sizeof(model), "%s-%06u-%0240u", prefix, k, k);
	snprintf(cfg, sizeof(cfg), "%0250u", k);
	snprintf(q, sizeof(q), "q%0250u", k);
	d.model = model;
	d.config_hash = cfg;
	d.kv_quant = q;
	d.tenant = "alice";
	tl = kvt_ns_digest(&d, NULL, out, PROTO_CANON_MAX + 1);
	T_ASSERT(tl > 0);
	return tl;
}

static void phase_ns_split(void)
{
	const char *extra[] = { "--ssd", "0", "--max-memory", "64M", NULL };
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct proto_item *its;
	char (*texts)[PROTO_CANON_MAX + 1];
	uint64_t need, len = 0;
	unsigned n = 0, ok = 0;
	int32_t bad_status = 0;
	int frames;
	struct kc c;

	start("ns_split", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	/* As many long descriptors as one request table holds. */
	need = c.lim.table_max;
	/* The server announces what it takes a frame (1024), the codec
	 * parses up to PROTO_DEF_ITEMS_MAX: this frame is past the first. */
	T_EQ_U64(c.lim.items_max, 1024);
	its = calloc(PROTO_DEF_ITEMS_MAX, sizeof(*its));
	texts = malloc((size_t)PROTO_DEF_ITEMS_MAX * sizeof(*texts));
	/* 500 distinct ones (within the tenant's quota), named over and
	 * over: registered ones answer OK again. */
	while (n < PROTO_DEF_ITEMS_MAX) {
		int tl = long_desc_text("split", n % 500, texts[n]);
		if (len + (uint64_t)tl + 16 > need - 4096)
			break;
		its[n].text = texts[n];
		its[n].text_len = (uint32_t)tl;
		len += (uint64_t)tl + 16;
		n++;
	}
	{
		/* The 500 first, in one frame of their own. */
		struct kc_resp r;
		T_ASSERT(kc_request(&c, &f, its, 500, NULL, 0) > 0);
		T_RC(kc_recv(&c, &r, 60000), 0);
		kc_resp_free(&r);
	}
	T_ASSERT(kc_request(&c, &f, its, n, NULL, 0) > 0);
	frames = kc_recv_items(&c, 60000, ns_split_item, &ok, &bad_status);
	T_GE_INT(frames, 1);
	printf("ns_split: %u descriptors (%" PRIu64 " KiB of request table, limit %" PRIu64
	       " KiB): status %d, %u registered\n", n, len >> 10, need >> 10, (int)bad_status,
	       ok);
	T_ASSERT(n > 1024);
	T_EQ_INT(bad_status, PROTO_ECOUNT);
	T_EQ_INT(ok, 0);
	ok = 0;
	bad_status = 0;
	T_ASSERT(kc_request(&c, &f, its, 1024, NULL, 0) > 0);
	frames = kc_recv_items(&c, 60000, ns_split_item, &ok, &bad_status);
	printf("ns_split: 1024 of them: %u registered, answered in %d frames (status %d)\n", ok,
	       frames, (int)bad_status);
	T_GE_INT(frames, 1);
	T_EQ_INT(bad_status, 0);
	T_EQ_INT(ok, 1024);
	free(its);
	free(texts);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * insecure (item 16): no listener off loopback without --tenants
 */

static int run_for(const char *args, char *out, size_t cap)
{
	char cmd[2000], path[700];
	int status, fd;
	ssize_t r;

	snprintf(path, sizeof(path), "%s/insecure.out", base);
	snprintf(cmd, sizeof(cmd), "timeout 5 %s %s > %s 2>&1", bin, args, path);
	status = system(cmd);
	fd = open(path, O_RDONLY);
	T_ASSERT(fd >= 0);
	r = read(fd, out, cap - 1);
	close(fd);
	out[r > 0 ? r : 0] = 0;
	return WEXITSTATUS(status);
}

static void phase_insecure(void)
{
	char args[1000], out[8192];
	int st1, st2;

	snprintf(args, sizeof(args), "--dir %s/insecure --ssd 0 --dram 16M --listen 0.0.0.0:0",
		 base);
	st1 = run_for(args, out, sizeof(out));
	printf("insecure: 0.0.0.0 without --tenants: exit %d (124: still running after 5 s)\n",
	       st1);
	T_EQ_INT(st1, 2);
	T_ASSERT(strstr(out, "--insecure") != NULL);
	/* (Nothing is bound before the refusal.  --insecure itself is not
	 * tried off loopback: tests listen on loopback only.) */
	snprintf(args, sizeof(args), "--dir %s/insecure --ssd 0 --dram 16M --listen "
		 "127.0.0.1:0 --insecure", base);
	st2 = run_for(args, out, sizeof(out));
	printf("insecure: loopback with --insecure: exit %d\n", st2);
	T_EQ_INT(st2, 124); /* it ran until timeout stopped it */
}

/* ------------------------------------------------------------------------
 * grant_race (item 13): a grant revoked while an NS_REGISTER waits on the
 * registry's sync is checked again, and nothing learned under the old
 * tenants table is cached
 */


/* Wait until path exists (ms at most): true if it does. */
static bool wait_file(const char *path, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (access(path, F_OK) == 0)
			return true;
		tsrv_sleep_ms(10);
	}
	return access(path, F_OK) == 0;
}

static void phase_grant_race(void)
{
	const char *owner_only = "alice " SECRET_ALICE " tenant\n"
				 "bob " SECRET_ALICE " tenant\n"
				 "admin " SECRET_ADMIN " admin\n";
	char gate[700], file[720], tenants[1000];
	const char *extra[] = { "--ssd", "0", NULL };
	struct kvt_ns_desc shared = desc, own = desc;
	char shared_text[PROTO_CANON_MAX + 1], own_text[PROTO_CANON_MAX + 1];
	uint8_t alice_ns[PROTO_DIGEST_LEN], bob_ns[PROTO_DIGEST_LEN], v[1000];
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct proto_item its[2] = { { 0 } };
	struct proto_iter iter;
	struct proto_item pi;
	struct kc_resp r;
	struct kc alice, bob;
	struct kvt_key k;
	struct iovec p = { v, sizeof(v) };
	struct kc_value got = { 0 };
	int st[2] = { 1, 1 }, get_rc, reg_rc;
	bool alice_digest = false, entered;
	unsigned n = 0;

	shim_arm(gate, sizeof(gate));
	snprintf(tenants, sizeof(tenants), "%sgrant alice model=race-model to bob\n", owner_only);
	start_with("grant_race", extra, tenants);
	unsetenv("LD_PRELOAD");

	/* alice's shared namespace, with one block. */
	shared.model = "race-model";
	T_RC(kc_dial(&alice, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&alice, &shared, alice_ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "race-key", 8);
	tsrv_fill(v, sizeof(v), 13);
	T_RC(kc_put(&alice, alice_ns, &k, &p, 1, NULL), KVT_OK);

	/* bob reads it under the grant (on another connection, which is
	 * left to cache it). */
	T_RC(kc_dial(&bob, srv.port, "bob", SECRET_ALICE), 0);
	shared.tenant = "alice";
	{
		uint8_t dg[PROTO_DIGEST_LEN];
		struct kc b0;
		T_RC(kc_dial(&b0, srv.port, "bob", SECRET_ALICE), 0);
		T_RC(kc_register(&b0, &shared, dg, NULL, 0), KVT_OK);
		T_ASSERT(memcmp(dg, alice_ns, sizeof(dg)) == 0);
		T_RC(kc_get(&b0, alice_ns, &k, 0, 0, 0, 0, &got), KVT_OK);
		kc_value_free(&got);
		kc_close(&b0);
	}

	/* One frame: alice's namespace under the grant, and a new one of
	 * bob's own, whose registration syncs the registry on the aux
	 * thread: the shim holds that sync until the grant is gone. */
	own.model = "race-own-model";
	its[0].text = shared_text;
	its[0].text_len = (uint32_t)kvt_ns_digest(&shared, NULL, shared_text, sizeof(shared_text));
	its[1].text = own_text;
	its[1].text_len = (uint32_t)kvt_ns_digest(&own, NULL, own_text, sizeof(own_text));
	snprintf(file, sizeof(file), "%s/arm", gate);
	tsrv_write_file(NULL, file, "");
	T_ASSERT(kc_request(&bob, &f, its, 2, NULL, 0) > 0);
	snprintf(file, sizeof(file), "%s/entered", gate);
	entered = wait_file(file, 10000);
	T_ASSERT(entered);
	/* Still held: no answer yet. */
	T_EQ_INT(kc_recv(&bob, &r, 200), -ETIMEDOUT);
	reload(owner_only); /* the grant revoked while the frame waits */
	snprintf(file, sizeof(file), "%s/release", gate);
	tsrv_write_file(NULL, file, "");

	T_RC(kc_recv(&bob, &r, 30000), 0);
	reg_rc = r.f.status;
	proto_iter_init(&iter, &r.f, NULL, NULL, 0);
	while (n < 2 && proto_iter_next(&iter, &pi) == 1) {
		st[n] = pi.status;
		if (n == 0 && pi.status == KVT_OK)
			alice_digest = memcmp(pi.digest, alice_ns, PROTO_DIGEST_LEN) == 0;
		if (n == 1 && pi.status == KVT_OK)
			memcpy(bob_ns, pi.digest, PROTO_DIGEST_LEN);
		n++;
	}
	kc_resp_free(&r);
	/* And on that connection, after the answer: alice's block. */
	get_rc = kc_get(&bob, alice_ns, &k, 0, 0, 0, 0, &got);
	kc_value_free(&got);
	printf("grant_race: NS_REGISTER held in the registry's sync across a reload that "
	       "revoked the grant: frame %d, granted item %d (alice's digest: %d), own item "
	       "%d; bob's GET of alice's block after it: %d (%s)\n", reg_rc, st[0],
	       alice_digest, st[1], get_rc, kvt_strerror(get_rc));
	T_EQ_INT(reg_rc, 0);
	T_EQ_INT(n, 2);
	/* The grant is checked again under the new table. */
	T_ASSERT(!alice_digest);
	T_EQ_INT(st[0], KVT_ENONS);
	T_EQ_INT(st[1], KVT_OK);
	/* Nothing cached: the revoked namespace is unknown to bob. */
	T_EQ_INT(get_rc, KVT_ENONS);
	T_RC(kc_exists(&bob, bob_ns, &k, NULL), KVT_MISS);
	kc_close(&bob);
	kc_close(&alice);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_tenant (item 16): each tenant's KV-events feed carries its own
 * blocks only, and so does its replay endpoint (events_replay=)
 */

/* Every message on sub within ms, payloads (third frames) appended to
 * buf: bytes. */
static size_t ev_drain(void *sub, uint8_t *buf, size_t cap, int ms, unsigned *msgs)
{
	uint64_t end = tsrv_now_ns() + (uint64_t)ms * 1000000ull;
	size_t n = 0;

	/* ms 0: only what waits now */
	for (bool now = ms == 0; now || tsrv_now_ns() < end;) {
		zmq_pollitem_t p = { .socket = sub, .events = ZMQ_POLLIN };
		if (zmq_poll(&p, 1, now ? 0 : 50) <= 0) {
			if (now)
				break;
			continue;
		}
		for (int frame = 0;; frame++) {
			zmq_msg_t m;
			int more;
			size_t ml = sizeof(more);
			zmq_msg_init(&m);
			T_ASSERT(zmq_msg_recv(&m, sub, 0) >= 0);
			if (frame == 2 && n + zmq_msg_size(&m) <= cap) {
				memcpy(buf + n, zmq_msg_data(&m), zmq_msg_size(&m));
				n += zmq_msg_size(&m);
			}
			zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &ml);
			zmq_msg_close(&m);
			if (!more)
				break;
		}
		(*msgs)++;
	}
	return n;
}

static unsigned ev_count(const uint8_t *buf, size_t n, const char *what)
{
	unsigned c = 0;
	size_t wl = strlen(what);

	for (const uint8_t *p = buf; n >= wl && (p = memmem(p, n - (size_t)(p - buf), what, wl));
	     p += wl)
		c++;
	return c;
}

/* The replay endpoint rep asked from seq 0: its messages' payloads into
 * buf; returns their bytes, *msgs their count. */
static size_t ev_replay(void *zctx, const char *rep, uint8_t *buf, size_t cap, unsigned *msgs)
{
	void *d = zmq_socket(zctx, ZMQ_DEALER);
	size_t rn = 0;

	*msgs = 0;
	T_ASSERT(d != NULL);
	T_EQ_INT(zmq_connect(d, rep), 0);
	T_EQ_INT(zmq_send(d, "", 0, ZMQ_SNDMORE), 0);
	T_EQ_INT(zmq_send(d, "\0\0\0\0\0\0\0\0", 8, 0), 8);
	for (;;) {
		zmq_pollitem_t p = { .socket = d, .events = ZMQ_POLLIN };
		zmq_msg_t fr[4];
		int nf = 0, more = 1;
		bool end;
		T_ASSERT(zmq_poll(&p, 1, 5000) == 1);
		while (more) {
			T_ASSERT(nf < 4);
			zmq_msg_init(&fr[nf]);
			T_ASSERT(zmq_msg_recv(&fr[nf], d, 0) >= 0);
			more = zmq_msg_more(&fr[nf]);
			nf++;
		}
		T_EQ_INT(nf, 4); /* "", topic, seq, payload */
		end = zmq_msg_size(&fr[3]) == 0;
		if (!end && rn + zmq_msg_size(&fr[3]) <= cap) {
			memcpy(buf + rn, zmq_msg_data(&fr[3]), zmq_msg_size(&fr[3]));
			rn += zmq_msg_size(&fr[3]);
		}
		for (int i = 0; i < nf; i++)
			zmq_msg_close(&fr[i]);
		if (end)
			break;
		(*msgs)++;
	}
	zmq_close(d);
	return rn;
}

#define EV_KEYS 10

/* A SUB socket of zctx subscribed to everything on ep. */
static void *ev_sub(void *zctx, const char *ep)
{
	void *sub = zmq_socket(zctx, ZMQ_SUB);

	T_ASSERT(sub != NULL);
	T_EQ_INT(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
	T_EQ_INT(zmq_connect(sub, ep), 0);
	return sub;
}

/* EV_KEYS blocks of 256 bytes put in ns, named "<what>0".. */
static void ev_put_keys(struct kc *c, const uint8_t *ns, const char *what)
{
	uint8_t v[256];

	for (int i = 0; i < EV_KEYS; i++) {
		struct kvt_key k;
		struct iovec p = { v, sizeof(v) };
		char name[48];
		snprintf(name, sizeof(name), "%s%d", what, i);
		kvt_key_set(&k, name, strlen(name));
		tsrv_fill(v, sizeof(v), (uint32_t)i);
		T_RC(kc_put(c, ns, &k, &p, 1, NULL), KVT_OK);
	}
}

static void phase_kvevents_tenant(void)
{
	const char *extra[] = { "--ssd", "0", "--set", "events.batch_ms=1", NULL };
	const char *who[2] = { "alice", "bob" };
	char text[3000], ep[2][700], rep[2][700];
	void *zctx = zmq_ctx_new(), *sub[2];
	static uint8_t got[2][1 << 20];
	size_t got_n[2];
	unsigned msgs[2] = { 0, 0 }, own[2], other[2], cleared[2];
	struct kc c[2];
	uint8_t ns[2][PROTO_DIGEST_LEN];

	for (int t = 0; t < 2; t++) {
		snprintf(ep[t], sizeof(ep[t]), "ipc://%s/%s.events", base, who[t]);
		snprintf(rep[t], sizeof(rep[t]), "ipc://%s/%s.replay", base, who[t]);
	}
	snprintf(text, sizeof(text), "alice " SECRET_ALICE " tenant events=%s events_replay=%s\n"
		 "bob " SECRET_ALICE " tenant events=%s events_replay=%s\n"
		 "admin " SECRET_ADMIN " admin\n", ep[0], rep[0], ep[1], rep[1]);
	start_with("kvevents_tenant", extra, text);
	for (int t = 0; t < 2; t++) {
		sub[t] = ev_sub(zctx, ep[t]);
		T_RC(kc_dial(&c[t], srv.port, who[t], SECRET_ALICE), 0);
		T_RC(kc_register(&c[t], &desc, ns[t], NULL, 0), KVT_OK);
	}
	tsrv_sleep_ms(300); /* the subscriptions reach the publisher */
	/* Both tenants put blocks; then alice clears hers. */
	ev_put_keys(&c[0], ns[0], "alice-ev-key-");
	ev_put_keys(&c[1], ns[1], "bob-ev-key-");
	{
		uint64_t removed = 0;
		T_RC(kc_clear(&c[0], PROTO_SCOPE_NS, ns[0], NULL, &removed), 0);
		T_EQ_U64(removed, EV_KEYS);
	}
	for (int t = 0; t < 2; t++) {
		got_n[t] = ev_drain(sub[t], got[t], sizeof(got[t]), 1000, &msgs[t]);
		own[t] = ev_count(got[t], got_n[t], t == 0 ? "alice-ev-key-" : "bob-ev-key-");
		other[t] = ev_count(got[t], got_n[t], t == 0 ? "bob-ev-key-" : "alice-ev-key-");
		cleared[t] = ev_count(got[t], got_n[t], "AllBlocksCleared");
	}
	printf("kvevents_tenant: alice's feed: %u messages, %u of her blocks, %u of bob's, %u "
	       "clears; bob's feed: %u messages, %u of his blocks, %u of alice's, %u clears\n",
	       msgs[0], own[0], other[0], cleared[0], msgs[1], own[1], other[1], cleared[1]);
	T_EQ_INT(own[0], EV_KEYS);
	T_EQ_INT(own[1], EV_KEYS);
	T_EQ_INT(other[0], 0);
	T_EQ_INT(other[1], 0);
	/* alice's clear is hers: bob's router keeps what it knows. */
	T_EQ_INT(cleared[0], 1);
	T_EQ_INT(cleared[1], 0);
	/* Each replay endpoint, asked from 0, gives its feed's messages
	 * back: the tenant's own blocks, none of the other's. */
	for (int t = 0; t < 2; t++) {
		unsigned rmsgs, rown, rother;
		size_t rn = ev_replay(zctx, rep[t], got[t], sizeof(got[t]), &rmsgs);

		rown = ev_count(got[t], rn, t == 0 ? "alice-ev-key-" : "bob-ev-key-");
		rother = ev_count(got[t], rn, t == 0 ? "bob-ev-key-" : "alice-ev-key-");
		printf("kvevents_tenant: %s's replay from 0: %u messages, %u of the own blocks, "
		       "%u of the other's\n", who[t], rmsgs, rown, rother);
		T_EQ_INT(rmsgs, msgs[t]);
		T_EQ_INT(rown, own[t]);
		T_EQ_INT(rother, 0);
	}
	for (int t = 0; t < 2; t++) {
		zmq_close(sub[t]);
		kc_close(&c[t]);
	}
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_flood (kvev23): the KV-events PUB socket is a listener that
 * authenticates nobody.  A peer that connects and sends nothing was held
 * for libzmq's 30 s handshake; a subscription frame claiming 1 GiB had
 * libzmq allocate it and fill it as the bytes came (no ZMQ_MAXMSGSIZE).
 * Now the handshake must end within KVEVENTS_HANDSHAKE_MS and a message
 * from a peer is at most KVEVENTS_IN_MAX bytes: such peers are closed,
 * kvtierd's fds and RSS come back, and the router and native clients are
 * served throughout.  (The number of peers that do finish the handshake:
 * kvevents_cap.)
 */

/* ZMTP 3.0 as a SUB would open: greeting (NULL mechanism, as client),
 * then READY with Socket-Type SUB. */
static const uint8_t zmtp_sub_hello[] = {
	0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L', 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 /* as-server */, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0x04, 25, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T',
	'y', 'p', 'e', 0, 0, 0, 3, 'S', 'U', 'B' };
_Static_assert(sizeof(zmtp_sub_hello) == 64 + 27, "greeting, READY");

/* kvtierd started as `name` with a KV-events publisher on TCP, a router
 * subscribed to it (*sub, of zctx), and alice logged in on *c with a
 * namespace ns registered; ep gets the endpoint.  Returns its port. */
static uint16_t kvev_start(const char *name, void *zctx, char ep[64], void **sub, struct kc *c,
			   uint8_t *ns)
{
	const char *extra[] = { "--ssd", "0", "--set", "events.endpoint=tcp://127.0.0.1:*",
				"--set", "events.batch_ms=1", NULL };
	uint16_t port;

	start_with(name, extra, NULL);
	port = tsrv_log_port(srv.log, "publishing KV events on tcp://127.0.0.1:");
	snprintf(ep, 64, "tcp://127.0.0.1:%u", port);
	*sub = ev_sub(zctx, ep);
	T_RC(kc_dial(c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_sleep_ms(300); /* the subscription reaches the publisher */
	return port;
}

#define EVF_IDLE 200u              /* connections that send nothing */
#define EVF_BIG (64u << 20)        /* bytes of the oversized subscription sent */

static void phase_kvevents_flood(void)
{
	/* After the hello, a message frame (long: 8-byte size) of 1 GiB. */
	static const uint8_t frame[] = { 0x02, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x01 /* subscribe */ };
	void *zctx = zmq_ctx_new(), *sub;
	static int idle[EVF_IDLE];
	static uint8_t got[1 << 20];
	char ep[64], junk[4096];
	unsigned fds0, fds_idle, fds_after, closed_n = 0, msgs = 0, seen;
	uint64_t rss_a, rss_peak = 0, t0;
	int64_t sent = 0;
	uint8_t *chunk = calloc(1, 1u << 20), ns[PROTO_DIGEST_LEN];
	struct kc c;
	bool closed = false;
	uint16_t port;
	int big;

	T_ASSERT(chunk != NULL);
	/* The router: subscribed before and served after. */
	port = kvev_start("kvevents_flood", zctx, ep, &sub, &c, ns);
	fds0 = fds_of(srv.pid);

	/* Connections that send nothing. */
	for (unsigned i = 0; i < EVF_IDLE; i++)
		idle[i] = tcp_connect(port);
	tsrv_sleep_ms(500);
	fds_idle = fds_of(srv.pid);
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < EVF_IDLE; i++) {
		int64_t left = 7000 - (int64_t)((tsrv_now_ns() - t0) / 1000000);
		recv_for(idle[i], junk, sizeof(junk), left > 0 ? (int)left : 1, &closed);
		closed_n += closed;
	}
	printf("kvevents_flood: %u idle connections: kvtierd fds %u -> %u, %u closed by it "
	       "within %.1f s\n", EVF_IDLE, fds0, fds_idle, closed_n,
	       (double)(tsrv_now_ns() - t0) / 1e9);

	/* A subscription of 1 GiB, 64 MiB of it sent. */
	rss_a = tsrv_rss(srv.pid);
	big = tcp_connect(port);
	T_ASSERT(send_for(big, zmtp_sub_hello, sizeof(zmtp_sub_hello), 1000) ==
		 (int64_t)sizeof(zmtp_sub_hello));
	T_ASSERT(send_for(big, frame, sizeof(frame), 1000) == (int64_t)sizeof(frame));
	t0 = tsrv_now_ns();
	while ((uint64_t)sent < EVF_BIG && tsrv_now_ns() - t0 < 10000000000ull) {
		int64_t w = send_for(big, chunk, 1u << 20, 500);
		uint64_t r = tsrv_rss(srv.pid);
		if (r > rss_peak)
			rss_peak = r;
		if (w < 0)
			break;
		sent += w;
	}
	recv_for(big, junk, sizeof(junk), 2000, &closed);
	printf("kvevents_flood: a 1 GiB subscription: %" PRId64 " MiB taken, closed %d; "
	       "RSS %" PRIu64 " -> peak %" PRIu64 " MiB\n", sent >> 20, closed, rss_a >> 20,
	       rss_peak >> 20);
	close(big);
	for (unsigned i = 0; i < EVF_IDLE; i++)
		close(idle[i]);

	/* The router and the native client are served. */
	ev_put_keys(&c, ns, "flood-ev-key-");
	seen = ev_count(got, ev_drain(sub, got, sizeof(got), 1000, &msgs), "flood-ev-key-");
	tsrv_sleep_ms(300);
	fds_after = fds_of(srv.pid);
	printf("kvevents_flood: after: router got %u of %u blocks; kvtierd fds %u\n", seen,
	       EV_KEYS, fds_after);
	T_EQ_INT(closed_n, EVF_IDLE);
	T_ASSERT(closed);
	T_LE_INT(sent, 16 << 20);
	T_LE_INT(rss_peak, rss_a + (16u << 20));
	T_EQ_INT(seen, EV_KEYS);
	T_LE_INT(fds_after, fds0 + 2);
	zmq_close(sub);
	kc_close(&c);
	zmq_ctx_term(zctx);
	free(chunk);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_cap (kvcap24): every peer that finishes ZMTP's handshake with
 * the KV-events PUB socket cost kvtierd a descriptor and ~50 KiB for as
 * long as it stayed, however many came.  Now a ZAP handler refuses a peer
 * during the handshake while the socket holds more than
 * events.max_subscribers connections (64) or more than
 * KVEVENTS_SUB_PER_ADDR (8) from its address: libzmq sends it ERROR "400"
 * and closes it at the handshake deadline (5 s) if it does not leave.
 * EVC_ONE raw peers from one address and EVC_MANY from as many others
 * each send a greeting and a SUB's READY and stay: at most 8 and 63 of
 * them (the router is the 64th) are still open after the handshake
 * deadline, kvtierd's descriptors with them; the router connected before
 * keeps getting its events, the native client is served, and once the
 * peers have gone a new subscriber is let in and served.
 */

#define EVC_ONE 20u                /* raw peers from 127.0.0.2 */
#define EVC_MANY 120u              /* raw peers from 127.0.1.x... one each */
#define EVC_CAP 64u                /* events.max_subscribers (default) */
#define EVC_PER_ADDR 8u            /* KVEVENTS_SUB_PER_ADDR */

/* The other loopback address of raw peer i of the many. */
static int evc_connect(uint16_t port, unsigned i)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	me.sin_addr.s_addr = htonl(0x7f000100u + 1 + i); /* 127.0.1.1 ... */
	T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void phase_kvevents_cap(void)
{
	static const char refusal[] = "\x05" "ERROR" "\x03" "400";
	enum { N = EVC_ONE + EVC_MANY };
	static int peer[N];
	static bool gone[N];
	static char in[N][256];
	static size_t in_n[N];
	static uint8_t got[1 << 20];
	void *zctx = zmq_ctx_new(), *sub, *sub2;
	char ep[64];
	unsigned fds0, fds_flood, fds_held, fds_after, open_one = 0, open_many = 0, refused = 0;
	unsigned msgs = 0, seen, seen2, left = N;
	uint64_t t0, refused_stat;
	uint8_t ns[PROTO_DIGEST_LEN];
	struct kc c;
	uint16_t port;

	/* The router: subscribed before and served throughout. */
	port = kvev_start("kvevents_cap", zctx, ep, &sub, &c, ns);
	fds0 = fds_of(srv.pid);

	for (unsigned i = 0; i < N; i++) {
		peer[i] = i < EVC_ONE ? tcp_connect_from(port, 2) : evc_connect(port, i - EVC_ONE);
		T_ASSERT(send_for(peer[i], zmtp_sub_hello, sizeof(zmtp_sub_hello), 1000) ==
			 (int64_t)sizeof(zmtp_sub_hello));
	}
	fds_flood = fds_of(srv.pid);
	/* Until the handshake deadline (5 s) has passed for all: who is
	 * closed, and who got ZMTP's ERROR "400" first. */
	t0 = tsrv_now_ns();
	while (left && tsrv_now_ns() - t0 < 7000000000ull) {
		static struct pollfd p[N];
		unsigned np = 0, map[N];
		for (unsigned i = 0; i < N; i++)
			if (!gone[i]) {
				p[np] = (struct pollfd){ .fd = peer[i], .events = POLLIN };
				map[np++] = i;
			}
		if (poll(p, np, 200) <= 0)
			continue;
		for (unsigned k = 0; k < np; k++) {
			unsigned i = map[k];
			char junk[256];
			char *to = in_n[i] < sizeof(in[i]) ? in[i] + in_n[i] : junk;
			size_t cap = in_n[i] < sizeof(in[i]) ? sizeof(in[i]) - in_n[i] : sizeof(junk);
			ssize_t r;
			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = recv(peer[i], to, cap, MSG_DONTWAIT);
			if (r > 0 && to != junk)
				in_n[i] += (size_t)r;
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				gone[i] = true;
				left--;
			}
		}
	}
	fds_held = fds_of(srv.pid);
	for (unsigned i = 0; i < N; i++) {
		if (!gone[i] && i < EVC_ONE)
			open_one++;
		else if (!gone[i])
			open_many++;
		refused += memmem(in[i], in_n[i], refusal, sizeof(refusal) - 1) != NULL;
	}
	printf("kvevents_cap: %u raw peers from one address, %u from others: kvtierd fds %u -> "
	       "%u, %u after %.1f s; still open %u + %u; %u got ERROR 400\n", EVC_ONE, EVC_MANY,
	       fds0, fds_flood, fds_held, (double)(tsrv_now_ns() - t0) / 1e9, open_one,
	       open_many, refused);
	T_LE_INT(open_one, EVC_PER_ADDR);
	T_LE_INT(open_one + open_many, EVC_CAP - 1);
	T_LE_INT(fds_held, fds0 + EVC_CAP);
	T_ASSERT(refused >= 1);
	refused_stat = stat_of("events.refused");
	printf("kvevents_cap: events.refused %" PRIu64 "\n", refused_stat);
	T_ASSERT(refused_stat >= N - open_one - open_many);

	/* The router and the native client are served. */
	ev_put_keys(&c, ns, "cap-ev-key-");
	seen = ev_count(got, ev_drain(sub, got, sizeof(got), 1000, &msgs), "cap-ev-key-");

	/* The peers leave: a new subscriber is let in. */
	for (unsigned i = 0; i < N; i++)
		close(peer[i]);
	tsrv_sleep_ms(500);
	sub2 = ev_sub(zctx, ep);
	tsrv_sleep_ms(500);
	ev_put_keys(&c, ns, "cap-ev-late-");
	seen2 = ev_count(got, ev_drain(sub2, got, sizeof(got), 1000, &msgs), "cap-ev-late-");
	fds_after = fds_of(srv.pid);
	printf("kvevents_cap: router got %u of %u blocks; after the peers left a new "
	       "subscriber got %u of %u; kvtierd fds %u\n", seen, EV_KEYS, seen2, EV_KEYS,
	       fds_after);
	T_EQ_INT(seen, EV_KEYS);
	T_EQ_INT(seen2, EV_KEYS);
	T_LE_INT(fds_after, fds0 + 2);
	zmq_close(sub);
	zmq_close(sub2);
	kc_close(&c);
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * out_flood (hostile7): requests pipelined, their answers never read.
 * Each answer waiting in the output queue is an entry of ~200 bytes (and
 * RESP's text room) besides its bytes: charged as its 48 (native PING) or
 * 7 (+PONG) bytes alone, a client that never read grew kvtierd past
 * --max-memory before the budget said so.  Now each entry is charged
 * what it holds (KVTD_OUT_COST), and reads pause once the budget is full
 * (mem_paused): RSS stays within --max-memory.
 */

#define FLOOD_BUDGET (16u << 20) /* --max-memory of this phase */
#define FLOOD_NATIVE 250000u /* PINGs: 12 MiB of answers (under the budget as the
			      * bytes alone were charged), ~60 MiB of entries */
#define RESP_SCRATCH_CONNS 64u
#define RESP_SCRATCH_ARGS 65536u /* RESPD_ARGC_MAX */

/* Send n copies of req (len bytes) on fd within ms, never reading, until
 * the server has taken nothing for 2 s (it stopped reading) or closed:
 * copies sent. */
static uint64_t flood_send(int fd, const void *req, size_t len, uint64_t n, int ms)
{
	uint64_t last = tsrv_now_ns();
	size_t per = 8192, chunk = per * len;
	uint8_t *buf = malloc(chunk);
	uint64_t total = n * len, sent = 0, end = tsrv_now_ns() + (uint64_t)ms * 1000000ull;

	T_ASSERT(buf != NULL);
	for (size_t i = 0; i < per; i++)
		memcpy(buf + i * len, req, len);
	while (sent < total && tsrv_now_ns() < end) {
		size_t off = (size_t)(sent % chunk), want = chunk - off;
		int64_t w;
		if (want > total - sent)
			want = (size_t)(total - sent);
		w = send_for(fd, buf + off, want, 200);
		if (w < 0)
			break;
		if (w > 0)
			last = tsrv_now_ns();
		else if (tsrv_now_ns() - last > 2000000000ull)
			break;
		sent += (uint64_t)w;
	}
	free(buf);
	return sent / len;
}

static void phase_out_flood(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--max-memory", "16M", "--dram", "16M",
				NULL };
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
	uint8_t ns[PROTO_DIGEST_LEN], ping[PROTO_HDR_LEN + 64];
	struct proto_frame f = { .op = PROTO_OP_PING, .tag = 1 };
	uint64_t stopped0, stopped, sent, grew_resp, grew_native, used;
	struct kc fl, good;
	char reply[256];
	bool closed;
	int64_t plen;

	start("out_flood", extra);
	/* paused for the budget or the tenant's share of it (out_share), or
	 * refused */
	stopped0 = stat_of("server.mem_paused") + stat_of("server.mem_refused") +
		   stat_of("server.out_share_paused");

	/* Native: HELLO + AUTH, then PING frames. */
	rss_begin();
	T_RC(kc_dial(&fl, srv.port, "alice", SECRET_ALICE), 0);
	f.version = fl.version;
	plen = proto_encode(&f, NULL, 0, ping, sizeof(ping), NULL, NULL);
	T_EQ_INT(plen, PROTO_HDR_LEN);
	sent = flood_send(fl.fd, ping, (size_t)plen, FLOOD_NATIVE, 10000);
	tsrv_sleep_ms(300);
	grew_native = rss_end(FLOOD_BUDGET);
	kc_close(&fl);
	/* The budget stopped it: its reads paused, or its next frame did not
	 * fit and it was closed. */
	for (int i = 0; i < 100 && stat_of("server.mem_used") > FLOOD_BUDGET; i++)
		tsrv_sleep_ms(50);
	stopped = stat_of("server.mem_paused") + stat_of("server.mem_refused") +
		  stat_of("server.out_share_paused") - stopped0;
	printf("out_flood: native: %" PRIu64 " PINGs sent unread, RSS +%" PRIu64
	       " MiB, reads paused or refused for memory %" PRIu64 " times\n", sent,
	       grew_native >> 20, stopped);

	/* RESP: each connection sends one command of 65536 arguments and
	 * stays.  Its parser's argument scratch (1 MiB) was kept for the
	 * connection's life, outside the budget: now charged, and given back
	 * once the command is parsed. */
	rss_begin();
	{
		size_t blen = 8 + 6 * (size_t)(RESP_SCRATCH_ARGS - 1) + 7;
		char *big = malloc(blen + 1);
		int fds[RESP_SCRATCH_CONNS];
		size_t o = 0;
		unsigned answered = 0;
		T_ASSERT(big != NULL);
		o += (size_t)snprintf(big + o, blen + 1 - o, "*%u\r\n$1\r\nX\r\n",
				      RESP_SCRATCH_ARGS);
		for (unsigned i = 1; i < RESP_SCRATCH_ARGS; i++) {
			memcpy(big + o, "$0\r\n\r\n", 6);
			o += 6;
		}
		for (unsigned i = 0; i < RESP_SCRATCH_CONNS; i++) {
			fds[i] = tcp_connect(tsrv_listener_port(srv.log, "RESP"));
			T_EQ_INT(send_for(fds[i], auth, strlen(auth), 1000), (int64_t)strlen(auth));
			recv_for(fds[i], reply, 6, 2000, &closed);
			T_ASSERT(strncmp(reply, "+OK", 3) == 0);
			T_EQ_INT(send_for(fds[i], big, o, 5000), (int64_t)o);
			recv_for(fds[i], reply, 5, 5000, &closed);
			if (strncmp(reply, "-ERR", 4) == 0)
				answered++;
		}
		tsrv_sleep_ms(300);
		grew_resp = rss_end(0);
		for (unsigned i = 0; i < RESP_SCRATCH_CONNS; i++)
			close(fds[i]);
		free(big);
		printf("out_flood: RESP: %u connections each parsed a command of %u arguments "
		       "(%u answered), RSS +%" PRIu64 " MiB\n", RESP_SCRATCH_CONNS,
		       RESP_SCRATCH_ARGS, answered, grew_resp >> 20);
		T_EQ_INT(answered, RESP_SCRATCH_CONNS);
	}

	/* The flooders are gone: their charges with them; others are served. */
	for (int i = 0; i < 100 && (used = stat_of("server.mem_used")) > (1u << 20); i++)
		tsrv_sleep_ms(50);
	printf("out_flood: mem_used %" PRIu64 " bytes after\n", used);
	T_LE_INT(used, 1u << 20);
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&good, &desc, ns, NULL, 0), KVT_OK);
	T_EQ_INT(roundtrips(&good, ns, 8, 64u << 10, 7), 0);
	kc_close(&good);
	/* The budget, not the machine, stopped both floods. */
	T_GE_INT(stopped, 1);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tls_handshake (hostile7): TLS handshakes that never end.  A native
 * connection is unauthenticated until AUTH, so the "not authenticated in
 * time" timeout bounded its handshake; a RESP (or S3) connection of a
 * server without --tenants is ready from its accept, and a client that
 * opened the TLS port and sent nothing, or half a ClientHello record,
 * held its connection (one of --max-conns, an SSL) for good.  Now a
 * handshake has --idle-timeout, whatever the protocol's state.
 */

#define TLS_SILENT 4u

/* A server counter without --tenants (over the Unix socket); opt: one an
 * older server may lack (0 then). */
static uint64_t stat_unix(const char *name, bool opt)
{
	uint64_t v = 0;

	T_RC(kc_stat_once(0, srv.sock, "default", NULL, name, opt, &v), 0);
	return v;
}

static void phase_tls_handshake(void)
{
	char pki[700], cmd[2000], cert[760], key[760], dir[700];
	const char *argv[] = { "--resp", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
			       "--idle-timeout", "2", "--threads", "2", NULL };
	/* A TLS handshake record header announcing 512 bytes that never come. */
	static const uint8_t half_hello[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01 };
	int fds[TLS_SILENT];
	unsigned closed_n = 0;
	uint64_t t0, timeouts0, timeouts;
	uint16_t port;

	if (system("command -v openssl >/dev/null 2>&1") != 0)
		T_SKIP("no openssl command to make a certificate with");
	snprintf(pki, sizeof(pki), "%s/pki", base);
	T_RC(mkdir(pki, 0700), 0);
	snprintf(cmd, sizeof(cmd), "cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
		 "ec_paramgen_curve:prime256v1 -nodes -keyout srv.key -out srv.pem -days 2 "
		 "-subj /CN=localhost >openssl.log 2>&1", pki);
	T_EQ_INT(system(cmd), 0);
	snprintf(cert, sizeof(cert), "%s/srv.pem", pki);
	snprintf(key, sizeof(key), "%s/srv.key", pki);
	snprintf(dir, sizeof(dir), "%s/tls_handshake", base);
	tsrv_start(&srv, bin, base, dir, NULL, argv); /* no tenants: RESP ready at once */
	port = tsrv_listener_port(srv.log, "RESP");
	timeouts0 = stat_unix("server.errors.timeout", false);

	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < TLS_SILENT; i++) {
		fds[i] = tcp_connect(port);
		if (i % 2)
			T_EQ_INT(send_for(fds[i], half_hello, sizeof(half_hello), 1000),
				 (int64_t)sizeof(half_hello));
	}
	/* --idle-timeout 2, swept once a second: closed within a few. */
	for (unsigned i = 0; i < TLS_SILENT; i++) {
		char buf[256];
		bool closed = false;
		while (tsrv_now_ns() - t0 < 12000000000ull) {
			recv_for(fds[i], buf, sizeof(buf), 500, &closed);
			if (closed)
				break;
		}
		if (closed)
			closed_n++;
		close(fds[i]);
	}
	timeouts = stat_unix("server.errors.timeout", false) - timeouts0;
	printf("tls_handshake: %u of %u unfinished handshakes closed by the server, "
	       "errors.timeout +%" PRIu64 "\n", closed_n, TLS_SILENT, timeouts);
	T_EQ_INT(closed_n, TLS_SILENT);
	T_GE_INT(timeouts, TLS_SILENT);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * log_flood (hostile7): a client that connects in a loop and sends garbage
 * got one log line per connection ("closing connection after a protocol
 * error"), as fast as it could connect: the log filled the disk.  Lines a
 * client causes are now at most KVTD_LOG_CLIENT_PER_SEC a second; the
 * rest are counted and a warning says how many were dropped.
 */

#define LOG_FLOOD_CONNS 600u

/* Occurrences of what in the server's log; *sum adds up the numbers that
 * follow each "dropped=" on those lines (if sum). */
static unsigned log_lines(const char *what, uint64_t *sum)
{
	FILE *f = fopen(srv.log, "r");
	char line[4096];
	unsigned n = 0;

	T_ASSERT(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		const char *d;
		if (!strstr(line, what))
			continue;
		n++;
		if (sum && (d = strstr(line, "dropped=")))
			*sum += strtoull(d + 8, NULL, 10);
	}
	fclose(f);
	return n;
}

static void phase_log_flood(void)
{
	static const char junk[48] = "GET / HTTP/1.1\r\nthis is not a kvtier frame\r\n\r\n";
	uint64_t t0, secs, magic0, magic, refused0, refused, dropped = 0;
	unsigned logged, warned;

	start("log_flood", NULL);
	magic0 = stat_of("server.errors.magic");
	refused0 = stat_of("server.unauth_refused");
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i <= LOG_FLOOD_CONNS; i++) {
		int fd;
		if (i == LOG_FLOOD_CONNS) /* one more, a second later: reports the drops */
			tsrv_sleep_ms(1100);
		fd = tcp_connect(srv.port);
		T_EQ_INT(send_for(fd, junk, sizeof(junk), 1000), (int64_t)sizeof(junk));
		close(fd);
	}
	/* Every one was read and refused (counted), whatever was logged, or
	 * refused at accept: a server slowed down (a loaded CI machine) can
	 * find more than 256 of them waiting unauthenticated from this one
	 * address (unauth_refused; a suite run on a loaded machine failed so,
	 * 577 read + 24 refused of 601).  The server
	 * counts an error before it logs it: wait for the last connection's
	 * warning too, or the log is read a line early. */
	for (int i = 0;
	     i < 200 && (stat_of("server.errors.magic") - magic0 +
				 stat_of("server.unauth_refused") - refused0 < LOG_FLOOD_CONNS + 1 ||
			 log_lines("client log lines dropped", NULL) == 0);
	     i++)
		tsrv_sleep_ms(50);
	magic = stat_of("server.errors.magic") - magic0;
	refused = stat_of("server.unauth_refused") - refused0;
	secs = (tsrv_now_ns() - t0) / 1000000000ull + 1;
	logged = log_lines("closing connection after a protocol error", NULL);
	warned = log_lines("client log lines dropped", &dropped);
	printf("log_flood: %" PRIu64 " bad connections refused in %" PRIu64 " s (%" PRIu64
	       " of them at accept); %u logged, %u warnings of %" PRIu64 " dropped lines\n",
	       magic + refused, secs, refused, logged, warned, dropped);
	T_EQ_INT(magic + refused, LOG_FLOOD_CONNS + 1);
	T_LE_INT(logged, (secs + 1) * 50u);
	T_GE_INT(warned, 1);
	/* one line each, two for one refused at accept (refusing, closing) */
	T_LE_INT(logged + dropped, LOG_FLOOD_CONNS + 1 + refused);
	/* The drops are counted on STATS (and so /metrics: counters.c,
	 * test_nsstat_kvtierd), at least what the warnings reported
	 * (hostile8: they were on neither). */
	T_GE_INT(stat_of("server.log_client_dropped"), dropped);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * preauth_out (hostile7): what an unauthenticated client may make the
 * server hold is bounded on the way in (preauth_buf); on the way out it
 * was not.  PING (native) and any RESP command (answered NOAUTH) are
 * answered before AUTH, and a client that pipelined them and never read
 * filled --max-memory with its answers, which are charged to the shared
 * budget: every authenticated client's next frame was then refused.  Now
 * an unauthenticated connection's queued output is at most its
 * protocol's preauth_buf, outside the budget; past that it is not read
 * (until it reads, or the unauthenticated timeout closes it).
 */

#define PREAUTH_OUT_NATIVE 4u
#define PREAUTH_OUT_RESP 2u

static void phase_preauth_out(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--max-memory", "16M", "--dram", "16M",
				NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ping[PROTO_HDR_LEN + 64];
	struct proto_frame f = { .op = PROTO_OP_PING, .tag = 1,
				 .version = PROTO_VERSION_HELLO };
	int fds[PREAUTH_OUT_NATIVE + PREAUTH_OUT_RESP];
	uint64_t sent[PREAUTH_OUT_NATIVE + PREAUTH_OUT_RESP], used, grew;
	struct kc good;
	int64_t plen;
	int bad;

	start("preauth_out", extra);
	plen = proto_encode(&f, NULL, 0, ping, sizeof(ping), NULL, NULL);
	T_EQ_INT(plen, PROTO_HDR_LEN);
	rss_begin();
	for (unsigned i = 0; i < PREAUTH_OUT_NATIVE + PREAUTH_OUT_RESP; i++) {
		bool resp = i >= PREAUTH_OUT_NATIVE;
		fds[i] = tcp_connect(resp ? tsrv_listener_port(srv.log, "RESP") : srv.port);
		sent[i] = resp ? flood_send(fds[i], "PING\r\n", 6, 400000, 6000)
			       : flood_send(fds[i], ping, (size_t)plen, 100000, 6000);
	}
	/* All still open, none read: the budget is the authenticated ones'. */
	used = stat_of("server.mem_used");
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&good, &desc, ns, NULL, 0), KVT_OK);
	bad = roundtrips(&good, ns, 8, 64u << 10, 11);
	kc_close(&good);
	grew = rss_end(0);
	for (unsigned i = 0; i < PREAUTH_OUT_NATIVE + PREAUTH_OUT_RESP; i++) {
		printf("  unauthenticated %s %u: %" PRIu64 " PINGs taken\n",
		       i >= PREAUTH_OUT_NATIVE ? "RESP" : "native", i, sent[i]);
		close(fds[i]);
	}
	printf("preauth_out: mem_used %" PRIu64 " bytes with %u unauthenticated floods unread; "
	       "alice's failed round trips %d of 8; RSS +%" PRIu64 " MiB\n", used,
	       PREAUTH_OUT_NATIVE + PREAUTH_OUT_RESP, bad, grew >> 20);
	T_LE_INT(used, 1u << 20);
	T_EQ_INT(bad, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_pins (hostile7): RESP GET replies are sent from pinned DRAM, and
 * their pins were outside the caps and the drain rule that bound native
 * GETs (slow_reader): a client pipelining GETs of 1 MiB values and
 * reading a byte now and then held every one of them pinned, for as long
 * as it liked.  Now a RESP connection is not read while its queued
 * answers pin past --dram/8 (pin_deferred), and a reader slower than
 * 1 MiB/s is closed after --idle-timeout, its pins released; at most 16
 * of its commands pin in the store at once (all 256 of a pipeline did).
 */

#define RESP_PIN_VALUES 8u
#define RESP_PIN_GETS 48u

/* A RESP connection to port, authenticated as alice. */
static int resp_alice(uint16_t port)
{
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
	char reply[8] = { 0 };
	bool closed = false;
	int fd = tcp_connect(port);

	T_EQ_INT(send_for(fd, auth, strlen(auth), 1000), (int64_t)strlen(auth));
	recv_for(fd, reply, 6, 2000, &closed);
	T_ASSERT(strncmp(reply, "+OK", 3) == 0);
	return fd;
}

/* SET key to vlen bytes of c on RESP connection fd (cmd: cap >= vlen + 64
 * bytes of scratch). */
static void resp_set(int fd, char *cmd, size_t cap, const char *key, char c, size_t vlen)
{
	char reply[8] = { 0 };
	bool closed = false;
	int n = snprintf(cmd, cap, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(key),
			 key, vlen);

	memset(cmd + n, c, vlen);
	memcpy(cmd + n + vlen, "\r\n", 2);
	T_EQ_INT(send_for(fd, cmd, (size_t)n + vlen + 2, 5000), (int64_t)(n + vlen + 2));
	recv_for(fd, reply, 6, 5000, &closed);
	T_ASSERT(strncmp(reply, "+OK", 3) == 0);
}

static void phase_resp_pins(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "16M", "--idle-timeout", "3",
				NULL };
	size_t vlen = 1u << 20, cap = 64 + vlen;
	char *cmd = malloc(cap);
	uint64_t deferred0, deferred, pins = 0, pins_end, t0, timeouts0;
	uint16_t port;
	bool closed = false;
	int w, r;

	T_ASSERT(cmd != NULL);
	start("resp_pins", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	for (unsigned i = 0; i < RESP_PIN_VALUES; i++) {
		char key[8];
		snprintf(key, sizeof(key), "v%u", i);
		resp_set(w, cmd, cap, key, (char)('a' + i), vlen);
	}
	close(w);
	deferred0 = stat_of("server.pin_deferred");

	/* 48 GETs pipelined (48 MiB of answers from 8 MiB of DRAM); then
	 * 128 KiB read every 300 ms (~430 KiB/s: enough that the output never
	 * stalls, below the 1 MiB/s a reader holding pins owes). */
	r = resp_alice(port);
	{
		size_t o = 0;
		for (unsigned i = 0; i < RESP_PIN_GETS; i++)
			o += (size_t)snprintf(cmd + o, cap - o, "*2\r\n$3\r\nGET\r\n$2\r\nv%u\r\n",
					      i % RESP_PIN_VALUES);
		T_EQ_INT(send_for(r, cmd, o, 2000), (int64_t)o);
	}
	timeouts0 = stat_of("server.errors.timeout");
	t0 = tsrv_now_ns();
	pins_end = 1;
	while (pins_end && tsrv_now_ns() - t0 < 15000000000ull) {
		static char b[128u << 10];
		tsrv_sleep_ms(300);
		if (recv(r, b, sizeof(b), MSG_DONTWAIT) == 0)
			break;
		if (tsrv_now_ns() - t0 > 1000000000ull && !pins)
			pins = stat_of("store.pins_active") + 1; /* +1: sampled */
		if (pins)
			pins_end = stat_of("store.pins_active");
	}
	closed = stat_of("server.errors.timeout") > timeouts0;
	deferred = stat_of("server.pin_deferred") - deferred0;
	printf("resp_pins: %u GETs of 1 MiB pipelined, read 128 KiB per 300 ms: store.pins_active "
	       "%" PRIu64 " after 1 s (cap --dram/8 = 2 MiB), %" PRIu64 " at the end; "
	       "pin_deferred +%" PRIu64 "; closed by the server (timeout) %d after %.1f s\n",
	       RESP_PIN_GETS,
	       pins - 1, pins_end, deferred, closed, (tsrv_now_ns() - t0) / 1e9);
	close(r);
	free(cmd);
	/* 16 commands' probes in the store at most, and 2 MiB of replies
	 * queued (before: all 48, 45 sampled) */
	T_LE_INT(pins - 1, 20);
	T_GE_INT(deferred, 1);
	T_ASSERT(closed);
	T_EQ_INT(pins_end, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * frame_items (hostile7): a frame's per-item state (struct kvtd_item,
 * ~560 bytes) against its table (~30 bytes an item, the part that was
 * charged).  GET frames of 16384 keys (1024 since big_frames) whose answers wait for the
 * connection's pins to drain (the client reads nothing) held 9 MiB each
 * outside --max-memory, up to --conn-inflight of them.  Now the items are
 * charged with their frame; a frame that does not fit is answered
 * -ENOMEM (mem_refused) and the connection stays.
 */

#define FI_FRAMES 192u
#define FI_ITEMS 1024u /* KVTD_FRAME_ITEMS_MAX */

static uint8_t *nat_encode(struct proto_frame *f, const struct proto_item *its, uint32_t n,
			   size_t *len);

/* Start the phase's server; alice logged in on c puts one 4 KiB value
 * under key in her namespace ns; its[0, n) all name it. */
/* Alice logged in on c, her namespace registered (ns), nvals values of
 * 4 KiB put (key, or key0, key1, ... when nvals > 1; k the first) and its[i]
 * naming value i % nvals. */
static void alice_values(const char *phase, struct kc *c, uint8_t *ns, struct kvt_key *k,
			 const char *key, struct proto_item *its, unsigned n, unsigned nvals)
{
	uint8_t val[4096];
	struct iovec v = { val, sizeof(val) };

	start(phase, NULL);
	T_RC(kc_connect_tcp(c, srv.port), 0);
	T_RC(kc_login(c, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(c, &desc, ns, NULL, 0), KVT_OK);
	memset(val, key[0], sizeof(val));
	for (unsigned j = 0; j < nvals; j++) {
		struct kvt_key kj;
		char name[32];
		snprintf(name, sizeof(name), nvals > 1 ? "%s%u" : "%s", key, j);
		kvt_key_set(&kj, name, strlen(name));
		T_RC(kc_put(c, ns, &kj, &v, 1, NULL), KVT_OK);
		for (unsigned i = j; i < n; i += nvals)
			its[i].key = kj;
		if (j == 0)
			*k = kj;
	}
}

static void alice_one_value(const char *phase, struct kc *c, uint8_t *ns, struct kvt_key *k,
			    const char *key, struct proto_item *its, unsigned n)
{
	alice_values(phase, c, ns, k, key, its, n, 1);
}

static void phase_frame_items(void)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	struct proto_item *its = calloc(FI_ITEMS, sizeof(*its));
	uint64_t refused0, refused, grew, paused0, paused;
	struct kvt_key k;
	struct kc c, good;
	int bad;
	uint8_t *all = NULL;
	size_t all_len = 0;
	int64_t sent;

	T_ASSERT(its != NULL);
	alice_one_value("frame_items", &c, ns, &k, "fi", its, FI_ITEMS);
	refused0 = stat_of("server.mem_refused");
	rss_begin();
	/* 192 frames x 1024 GETs of a 4 KiB value: 4 MiB of answers each,
	 * past the connection's pin cap after 2: they wait, none is read.  Since
	 * attack14 the tenant's input share (a quarter of the budget) stops
	 * reading the connection once its frames hold it: sent for 1.5 s
	 * without blocking, what the server takes. */
	paused0 = stat_of("server.out_share_paused");
	for (unsigned i = 0; i < FI_FRAMES; i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns,
					 .tag = c.next_tag++, .version = c.version };
		size_t len;
		uint8_t *b = nat_encode(&f, its, FI_ITEMS, &len);
		all = realloc(all, all_len + len);
		memcpy(all + all_len, b, len);
		all_len += len;
		free(b);
	}
	sent = send_for(c.fd, all, all_len, 1500);
	free(all);
	tsrv_sleep_ms(500);
	refused = stat_of("server.mem_refused") - refused0;
	paused = stat_of("server.out_share_paused") - paused0;
	/* Others are served meanwhile (what the budget left them): another
	 * tenant (alice's own frames are held to her input share). */
	T_RC(kc_dial(&good, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&good, &desc, ns, NULL, 0), KVT_OK);
	bad = roundtrips(&good, ns, 4, 4096, 13);
	kc_close(&good);
	grew = rss_end(MAX_MEMORY);
	kc_close(&c);
	printf("frame_items: %u GET frames of %u items waiting unread (%" PRId64 " of %zu bytes "
	       "taken): mem_refused +%" PRIu64 ", out_share_paused +%" PRIu64 ", RSS +%" PRIu64
	       " MiB, another client's failed round trips %d of 4\n", FI_FRAMES, FI_ITEMS, sent,
	       all_len, refused, paused, grew >> 20, bad);
	free(its);
	T_GE_INT(refused + paused, 1);
	T_EQ_INT(bad, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}


/* ------------------------------------------------------------------------
 * parts_amp (red45): a GET's answer carries a part table, 16 bytes a part
 * of the value, for every item.  One value of 1,024 one-byte parts (1 KiB,
 * stored once) named by every item of a GET frame of 1,024 (the frame ~41
 * KB) is answered with 16.8 MB of table; DRAM hits, pinned once a frame,
 * far below the pin caps, so nothing holds the answers back.  On many
 * connections at once, none read.
 */

#define PA_CONNS 16u
#define PA_FRAMES 4u
#define PA_ITEMS 1024u
#define PA_PARTS 1024u

struct pa_seen {
	const uint8_t *v;
	unsigned ok, seen;
};

static void pa_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct pa_seen *ps = ctx;
	uint64_t len;
	uint32_t crc;
	bool ok;

	ps->seen++;
	ok = pi->status == KVT_OK && pi->part_count == PA_PARTS && pi->data_len == PA_PARTS &&
	     memcmp(r->data + pi->data_off, ps->v, PA_PARTS) == 0;
	for (uint32_t p = 0; ok && p < PA_PARTS; p++)
		ok = proto_item_part(pi, p, &len, &crc) == 0 && len == 1 &&
		     crc == kvt_crc32c(0, ps->v + p, 1);
	ps->ok += ok;
}

static void phase_parts_amp(void)
{
	uint8_t ns[PROTO_DIGEST_LEN], val[PA_PARTS];
	struct iovec parts[PA_PARTS];
	struct proto_item *its = calloc(PA_ITEMS, sizeof(*its));
	struct kc c, good, *cs = calloc(PA_CONNS, sizeof(*cs));
	struct kvt_key k;
	uint64_t refused0, paused0, grew, used_max = 0;
	int bad, reg;
	uint8_t *all = NULL;
	size_t all_len = 0;

	T_ASSERT(its != NULL && cs != NULL);
	start("parts_amp", NULL);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "pa", 2);
	for (unsigned i = 0; i < PA_PARTS; i++) {
		val[i] = (uint8_t)i;
		parts[i].iov_base = &val[i];
		parts[i].iov_len = 1;
	}
	T_RC(kc_put(&c, ns, &k, parts, PA_PARTS, NULL), KVT_OK);
	for (unsigned i = 0; i < PA_ITEMS; i++)
		its[i].key = k;
	/* A frame of them read: every item the value, exactly, with its
	 * 1,024 parts (chunked by the fix, each chunk sent before the next
	 * is built). */
	{
		struct pa_seen ps = { val, 0, 0 };
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
		T_ASSERT(kc_request(&c, &f, its, PA_ITEMS, NULL, 0) > 0);
		T_GE_INT(kc_recv_items(&c, 60000, pa_item, &ps, NULL), 1);
		T_EQ_INT(ps.seen, PA_ITEMS);
		T_EQ_INT(ps.ok, PA_ITEMS);
	}
	for (unsigned i = 0; i < PA_FRAMES; i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns,
					 .tag = 1000 + i, .version = c.version };
		size_t len;
		uint8_t *b = nat_encode(&f, its, PA_ITEMS, &len);
		all = realloc(all, all_len + len);
		memcpy(all + all_len, b, len);
		all_len += len;
		free(b);
	}
	for (unsigned i = 0; i < PA_CONNS; i++)
		T_RC(kc_dial(&cs[i], srv.port, "alice", SECRET_ALICE), 0);
	refused0 = stat_opt("server.mem_refused");
	paused0 = stat_opt("server.out_share_paused");
	rss_begin();
	for (unsigned i = 0; i < PA_CONNS; i++)
		(void)send_for(cs[i].fd, all, all_len, 300);
	for (int i = 0; i < 10; i++) {
		uint64_t u;
		tsrv_sleep_ms(100);
		u = stat_opt("server.mem_used");
		if (u > used_max)
			used_max = u;
	}
	T_RC(kc_dial(&good, srv.port, "admin", SECRET_ADMIN), 0);
	reg = kc_register(&good, &desc, ns, NULL, 0);
	bad = reg == KVT_OK ? roundtrips(&good, ns, 4, 4096, 45) : 4;
	kc_close(&good);
	printf("parts_amp: another tenant's NS_REGISTER %d\n", reg);
	grew = rss_end(MAX_MEMORY);
	printf("parts_amp: %u connections x %u GET frames of %u items (%zu bytes each "
	       "connection) of a %u-part value: mem_used max %" PRIu64 " KiB, mem_refused +%"
	       PRIu64 ", out_share_paused +%" PRIu64 ", RSS +%" PRIu64 " MiB, another "
	       "client's failed round trips %d of 4\n", PA_CONNS, PA_FRAMES, PA_ITEMS, all_len,
	       PA_PARTS, used_max >> 10, stat_opt("server.mem_refused") - refused0,
	       stat_opt("server.out_share_paused") - paused0, grew >> 20, bad);
	for (unsigned i = 0; i < PA_CONNS; i++)
		kc_close(&cs[i]);
	kc_close(&c);
	free(all);
	free(its);
	free(cs);
	T_EQ_INT(bad, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * range_crc (red45): a RANGE that is not exactly one stored part is
 * answered with a CRC32C computed over its bytes on the loop thread (the
 * stored parts it reads are checked once a frame, off the loop: range).
 * One frame of 1,024 ranges of nearly all of one 8 MiB value (41 KB sent)
 * asked 8 GiB of CRC at once: their pins count the value once, so the pin
 * caps let the whole frame be answered in one go.
 */

#define RC_LEN (8u << 20)
#define RC_RANGES 1024u
#define RC_QUIET_FRAMES 8u
#define RC_READ 16u

/* A range read back exactly, its CRC over exactly its bytes. */
static void rcrc_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct range_seen *rs = ctx;
	const struct proto_item *q = &rs->its[pi->index];
	uint64_t len = 0;
	uint32_t crc = 0;

	rs->seen++;
	if (pi->status == KVT_OK && pi->data_len == q->len && pi->part_count == 1 &&
	    proto_item_part(pi, 0, &len, &crc) == 0 && len == q->len &&
	    memcmp(r->data + pi->data_off, rs->v + q->off, q->len) == 0 &&
	    crc == kvt_crc32c(0, rs->v + q->off, q->len))
		rs->ok++;
}

static void phase_range_crc(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(RC_LEN);
	struct iovec part = { v, RC_LEN };
	struct proto_item *its = calloc(RC_RANGES, sizeof(*its));
	struct proto_item *tiny = calloc(RC_RANGES, sizeof(*tiny));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct pinger pg = { .admin = true };
	struct range_seen rs = { its, v, 0, 0 }, ts = { tiny, v, 0, 0 };
	uint64_t cpu0, one_cpu, base_cpu, own_cpu, quiet_cpu, own_ping, quiet_ping, busy0, busy;
	struct kvt_ns_desc d = desc;
	struct kvt_key k;
	struct kc c, a, r;

	T_ASSERT(v != NULL && its != NULL && tiny != NULL);
	start_with("range_crc", extra, "alice " SECRET_ALICE " tenant\n"
				       "admin " SECRET_ADMIN " admin\n"
				       "rita " SECRET_ALICE " tenant\n"
				       "grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, RC_LEN, 45);
	kvt_key_set(&k, "range-crc", 9);
	T_RC(kc_put(&c, ns, &k, &part, 1, NULL), KVT_OK);
	for (unsigned i = 0; i < RC_RANGES; i++) {
		its[i].key = k;
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = 1 + i % 7;
		its[i].len = RC_LEN - 8;
		tiny[i] = its[i];
		tiny[i].off = (uint64_t)i * (RC_LEN / RC_RANGES) + 3;
		tiny[i].len = 1;
	}
	f.ns_count = 1;
	f.ns = ns;

	/* What a range of nearly 8 MiB costs, read; what a frame of 1,024
	 * one-byte ranges costs, read (the same items, no CRC to speak of);
	 * and RC_READ large ranges in one frame, read: all exact (chunked
	 * by the fix, each chunk sent before the next is computed). */
	cpu0 = srv_cpu_ns();
	T_ASSERT(kc_request(&c, &f, its, 1, NULL, 0) > 0);
	T_GE_INT(kc_recv_items(&c, 60000, rcrc_item, &rs, NULL), 1);
	one_cpu = srv_cpu_ns() - cpu0;
	T_EQ_INT(rs.ok, 1);
	cpu0 = srv_cpu_ns();
	T_ASSERT(kc_request(&c, &f, tiny, RC_RANGES, NULL, 0) > 0);
	T_GE_INT(kc_recv_items(&c, 60000, rcrc_item, &ts, NULL), 1);
	base_cpu = srv_cpu_ns() - cpu0;
	T_EQ_INT(ts.ok, RC_RANGES);
	rs.ok = rs.seen = 0;
	T_ASSERT(kc_request(&c, &f, its, RC_READ, NULL, 0) > 0);
	T_GE_INT(kc_recv_items(&c, 60000, rcrc_item, &rs, NULL), 1);
	T_EQ_INT(rs.seen, RC_READ);
	T_EQ_INT(rs.ok, RC_READ);

	pthread_create(&pg.t, NULL, pinger_main, &pg);
	tsrv_sleep_ms(200);
	/* The owner's frame of 1,024, on another connection, never read. */
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	atomic_store(&pg.max_ns, 0);
	cpu0 = srv_cpu_ns();
	f.tag = 0;
	T_ASSERT(kc_request(&a, &f, its, RC_RANGES, NULL, 0) > 0);
	tsrv_sleep_ms(1500);
	own_cpu = srv_cpu_ns() - cpu0;
	own_ping = atomic_load(&pg.max_ns);
	kc_close(&a);
	tsrv_sleep_ms(300);

	/* A grantee's (quiet GETs, answered whole): RC_QUIET_FRAMES such
	 * frames pipelined on one connection, never read. */
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	d.tenant = "alice";
	{
		uint8_t ns_r[PROTO_DIGEST_LEN];
		T_RC(kc_register(&r, &d, ns_r, NULL, 0), KVT_OK);
		T_ASSERT(memcmp(ns, ns_r, sizeof(ns_r)) == 0);
	}
	busy0 = stat_opt("server.pin_deferred");
	atomic_store(&pg.max_ns, 0);
	cpu0 = srv_cpu_ns();
	for (unsigned i = 0; i < RC_QUIET_FRAMES; i++) {
		f.tag = 0;
		T_ASSERT(kc_request(&r, &f, its, RC_RANGES, NULL, 0) > 0);
	}
	tsrv_sleep_ms(1500);
	quiet_cpu = srv_cpu_ns() - cpu0;
	quiet_ping = atomic_load(&pg.max_ns);
	busy = stat_opt("server.pin_deferred") - busy0;
	kc_close(&r);
	atomic_store(&pg.stop, true);
	pthread_join(pg.t, NULL);
	/* The grantee, on a fresh connection, is served its range. */
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	rs.ok = rs.seen = 0;
	f.tag = 0;
	T_ASSERT(kc_request(&r, &f, its, 1, NULL, 0) > 0);
	T_GE_INT(kc_recv_items(&r, 60000, rcrc_item, &rs, NULL), 1);
	kc_close(&r);
	printf("range_crc: one range of %u bytes read: %.1f ms of the server's CPU; %u one-byte "
	       "ranges read: %.1f ms; the owner's frame of %u ranges of %u bytes left unread: "
	       "%.1f ms in 1.5 s (another tenant's slowest PING %.1f ms); a grantee's %u such "
	       "frames: %.1f ms (slowest PING %.1f ms, pin_deferred +%" PRIu64 ")\n",
	       RC_LEN - 8, one_cpu / 1e6, RC_RANGES, base_cpu / 1e6, RC_RANGES, RC_LEN - 8,
	       own_cpu / 1e6, own_ping / 1e6, RC_QUIET_FRAMES, quiet_cpu / 1e6, quiet_ping / 1e6,
	       busy);
	kc_close(&c);
	free(its);
	free(tiny);
	free(v);
	T_EQ_INT(rs.ok, 1);
	T_EQ_INT(atomic_load(&pg.fails), 0);
	/* Each frame's CPU within a few times the same frame's of one-byte
	 * ranges, plus a few large ranges: before, 1,024 of them.  8x since
	 * get46: the one-byte ranges' frame reads its value's part table
	 * once (value.c value_ptabs), 11.6 ms -> 3.8 ms, and the owner's
	 * unread frame, deferred past its first range, 15-19 ms (ASan). */
	T_LE_INT(own_cpu, 8 * base_cpu + 4 * one_cpu);
	T_LE_INT(quiet_cpu, 3 * RC_QUIET_FRAMES * base_cpu + 4 * one_cpu);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * quiet_slices (red45): a grantee's GETs are quiet, and the duplicates of
 * one frame share the first item's pin, carried by the output of the last
 * item that uses it; the outputs before it carry no pin, and their value
 * bytes were charged to --max-memory as bytes of their own.  One frame of
 * rita's naming alice's 8 MiB value 1,024 times (41 KB), left unread:
 * 8 GiB charged, every tenant's next frame refused.
 */

static void phase_quiet_slices(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN], *v = malloc(RC_LEN);
	struct iovec part = { v, RC_LEN };
	struct proto_item *its = calloc(RC_RANGES, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_ns_desc d = desc;
	uint64_t used, pinned;
	struct kvt_key k;
	struct kc c, r, adm;
	int bad, src;

	T_ASSERT(v != NULL && its != NULL);
	start_with("quiet_slices", extra, "alice " SECRET_ALICE " tenant\n"
					  "admin " SECRET_ADMIN " admin\n"
					  "rita " SECRET_ALICE " tenant\n"
					  "grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, RC_LEN, 46);
	kvt_key_set(&k, "quiet-big", 9);
	T_RC(kc_put(&c, ns, &k, &part, 1, NULL), KVT_OK);
	for (unsigned i = 0; i < RC_RANGES; i++)
		its[i].key = k;
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	d.tenant = "alice";
	T_RC(kc_register(&r, &d, ns_r, NULL, 0), KVT_OK);
	T_ASSERT(memcmp(ns, ns_r, sizeof(ns_r)) == 0);
	f.ns_count = 1;
	f.ns = ns;
	T_ASSERT(kc_request(&r, &f, its, RC_RANGES, NULL, 0) > 0);
	tsrv_sleep_ms(1000);
	/* Another tenant, on a fresh connection and its own. */
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&adm, &desc, ns, NULL, 0), KVT_OK);
	bad = roundtrips(&adm, ns, 4, 4096, 46);
	src = kc_stat(&adm, PROTO_SCOPE_ALL, "server.mem_used", &used);
	if (src != 0)
		used = UINT64_MAX;
	pinned = stat_of("store.pins_active");
	printf("quiet_slices: a grantee's frame of %u GETs of one %u-byte value left unread: "
	       "mem_used %" PRIu64 " (STATS %d), store.pins_active %" PRIu64 ", another "
	       "tenant's failed round trips %d of 4\n", RC_RANGES, RC_LEN, used, src, pinned,
	       bad);
	kc_close(&adm);
	kc_close(&r);
	kc_close(&c);
	free(its);
	free(v);
	T_EQ_INT(bad, 0);
	T_EQ_INT(src, 0);
	T_LE_INT(used, MAX_MEMORY / 4);
	T_EQ_INT(tsrv_stop(&srv), 0);
}


/* ------------------------------------------------------------------------
 * quiet_pins (red45): a grantee's GETs of DRAM blocks pin them as any
 * GET, but a quiet frame was answered whole, outside the pin caps: its
 * frames of alice's 62 values of 1 MiB on 4 connections, unread, pinned
 * the whole 64 MiB tier, and another tenant's PUT of 8 MiB failed
 * KVT_EFULL.  Now a quiet frame's items past the caps are KVT_EBUSY.
 */

#define QP_VALUES 62u
#define QP_LEN (1u << 20)

/* reps: each frame names every value that many times (review45c: a
 * value named twice kept its pin past the share, below). */
static void quiet_pins_run(const char *phase, unsigned reps)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN], *v = malloc(8u << 20);
	struct proto_item its[QP_VALUES * 2];
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_ns_desc d = desc;
	struct kc c, r[4], adm;
	uint64_t pins;
	int rc;

	T_ASSERT(v != NULL);
	T_ASSERT(reps >= 1 && reps <= 2);
	start_with(phase, extra, "alice " SECRET_ALICE " tenant\n"
					"admin " SECRET_ADMIN " admin\n"
					"rita " SECRET_ALICE " tenant\n"
					"grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < QP_VALUES; i++) {
		char name[16];
		struct iovec p = { v, QP_LEN };
		snprintf(name, sizeof(name), "qp-%u", i);
		kvt_key_set(&its[i].key, name, strlen(name));
		tsrv_fill(v, QP_LEN, 300 + i);
		T_RC(kc_put(&c, ns, &its[i].key, &p, 1, NULL), KVT_OK);
		its[QP_VALUES + i] = its[i];
	}
	d.tenant = "alice";
	f.ns_count = 1;
	f.ns = ns;
	for (unsigned j = 0; j < 4; j++) {
		T_RC(kc_dial(&r[j], srv.port, "rita", SECRET_ALICE), 0);
		T_RC(kc_register(&r[j], &d, ns_r, NULL, 0), KVT_OK);
		f.tag = 0;
		T_ASSERT(kc_request(&r[j], &f, its, QP_VALUES * reps, NULL, 0) > 0);
	}
	tsrv_sleep_ms(500);
	pins = stat_of("store.pins_active");
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&adm, &desc, ns, NULL, 0), KVT_OK);
	{
		struct iovec p = { v, 8u << 20 };
		struct kvt_key k;
		kvt_key_set(&k, "adm-big", 7);
		rc = kc_put(&adm, ns, &k, &p, 1, NULL);
	}
	printf("%s: a grantee's 4 frames of %u GETs of 1 MiB DRAM values, unread: "
	       "store.pins_active %" PRIu64 "; another tenant's PUT of 8 MiB: %d\n", phase,
	       QP_VALUES * reps, pins, rc);
	kc_close(&adm);
	for (unsigned j = 0; j < 4; j++)
		kc_close(&r[j]);
	/* The grantee, on a fresh connection once those closed, is served
	 * what is left of them (the PUT evicted some), exactly. */
	{
		unsigned hit = 0, miss = 0, other = 0;
		T_RC(kc_dial(&r[0], srv.port, "rita", SECRET_ALICE), 0);
		T_RC(kc_register(&r[0], &d, ns_r, NULL, 0), KVT_OK);
		for (unsigned i = 0; i < QP_VALUES; i++) {
			struct kc_value val = { 0 };
			int g = kc_get(&r[0], ns_r, &its[i].key, 0, 0, 0, 0, &val);
			tsrv_fill(v, QP_LEN, 300 + i);
			if (g == KVT_OK && val.len == QP_LEN && memcmp(val.bytes, v, QP_LEN) == 0)
				hit++;
			else if (g == KVT_MISS)
				miss++;
			else if (other++ == 0)
				printf("quiet_pins: item %u: %d (%s)\n", i, g, kvt_strerror(g));
			kc_value_free(&val);
		}
		kc_close(&r[0]);
		printf("quiet_pins: read again: %u exact, %u misses, %u else\n", hit, miss, other);
		T_EQ_INT(other, 0);
		T_GE_INT(hit, QP_VALUES / 2);
	}
	kc_close(&c);
	free(v);
	/* the tenant's share of pins (--dram/4 = 16 MiB), a connection's
	 * first item past it: 4 more */
	T_LE_INT(pins, 16 + 4);
	T_EQ_INT(rc, KVT_OK);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

static void phase_quiet_pins(void)
{
	quiet_pins_run("quiet_pins", 1);
}

/* quiet_pins_dup (review45c): the same frames naming every value twice.
 * An item refused past the tenant's share whose duplicates share its pin
 * (the last of them carries it) kept that pin: the refused duplicates'
 * answers carried it, so the whole tier was pinned as before the share
 * (store.pins_active 248, the PUT KVT_EFULL). */
static void phase_quiet_pins_dup(void)
{
	quiet_pins_run("quiet_pins_dup", 2);
}

/* quiet_pins_once (get46): the duplicates of a grantee's frame share one
 * pin, and its value is held once, but every output of the answer
 * counted the bytes it sent from it in the pin caps: one frame naming a
 * 1 MiB value 128 times, left unread, counted 128 MiB in its tenant's
 * pinned (the share --dram/4, 16 MiB), and the tenant's next GET on a
 * fresh connection was KVT_EBUSY until that answer drained.  Now the
 * value counts once; the share still bounds distinct values
 * (quiet_pins_dup). */
#define QO_DUPS 128u

static void phase_quiet_pins_once(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN], *v = malloc(QP_LEN);
	struct proto_item *its = calloc(QO_DUPS, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_ns_desc d = desc;
	struct kvt_key ka, kb;
	struct kc_value val = { 0 };
	struct kc c, r, r2;
	uint64_t pins, busy0, busy;
	int g, exact;

	T_ASSERT(v != NULL && its != NULL);
	start_with("quiet_pins_once", extra, "alice " SECRET_ALICE " tenant\n"
					     "admin " SECRET_ADMIN " admin\n"
					     "rita " SECRET_ALICE " tenant\n"
					     "grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&ka, "qo-a", 4);
	kvt_key_set(&kb, "qo-b", 4);
	{
		struct iovec p = { v, QP_LEN };
		tsrv_fill(v, QP_LEN, 461);
		T_RC(kc_put(&c, ns, &ka, &p, 1, NULL), KVT_OK);
		tsrv_fill(v, QP_LEN, 462);
		T_RC(kc_put(&c, ns, &kb, &p, 1, NULL), KVT_OK);
	}
	for (unsigned i = 0; i < QO_DUPS; i++)
		its[i].key = ka;
	d.tenant = "alice";
	f.ns_count = 1;
	f.ns = ns;
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	T_RC(kc_register(&r, &d, ns_r, NULL, 0), KVT_OK);
	busy0 = stat_of("server.pin_deferred");
	T_ASSERT(kc_request(&r, &f, its, QO_DUPS, NULL, 0) > 0);
	tsrv_sleep_ms(500);
	pins = stat_of("store.pins_active");
	/* The same tenant on a fresh connection, the first answer unread. */
	T_RC(kc_dial(&r2, srv.port, "rita", SECRET_ALICE), 0);
	T_RC(kc_register(&r2, &d, ns_r, NULL, 0), KVT_OK);
	g = kc_get(&r2, ns_r, &kb, 0, 0, 0, 0, &val);
	exact = g == KVT_OK && val.len == QP_LEN && memcmp(val.bytes, v, QP_LEN) == 0;
	kc_value_free(&val);
	busy = stat_of("server.pin_deferred") - busy0;
	printf("quiet_pins_once: a grantee's frame naming one 1 MiB value %u times, unread: "
	       "store.pins_active %" PRIu64 "; the tenant's GET of another on a fresh "
	       "connection: %d (%s), pin_deferred +%" PRIu64 "\n", QO_DUPS, pins, g,
	       exact ? "exact" : "not exact", busy);
	kc_close(&r2);
	kc_close(&r);
	kc_close(&c);
	free(its);
	free(v);
	T_LE_INT(pins, 1);
	T_EQ_INT(g, KVT_OK);
	T_ASSERT(exact);
	T_EQ_INT(busy, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}
/* ------------------------------------------------------------------------
 * quiet_pins_pipe (review46g): quiet_pins_once counts a grantee's
 * duplicates once (pin_exact), the slices of an output whose pin a later
 * output carries counted there.  Pipelined and unread, frames each naming
 * one more 1 MiB value QO_DUPS times, on QPP_CONNS connections, must stop
 * at the tenant's share (--dram/4, 16 MiB): the values held are the
 * share's, not one a frame, and another tenant's PUT finds room.
 */
#define QPP_VALUES 40u
#define QPP_CONNS 4u

static void phase_quiet_pins_pipe(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN], *v = malloc(8u << 20);
	struct proto_item *its = calloc(QO_DUPS, sizeof(*its));
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct kvt_ns_desc d = desc;
	struct kc c, r[QPP_CONNS];
	uint64_t pins;
	int rc;

	T_ASSERT(v != NULL && its != NULL);
	start_with("quiet_pins_pipe", extra, "alice " SECRET_ALICE " tenant\n"
					     "admin " SECRET_ADMIN " admin\n"
					     "rita " SECRET_ALICE " tenant\n"
					     "grant alice model=hostile-model to rita\n");
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned k = 0; k < QPP_VALUES; k++) {
		struct iovec p = { v, QP_LEN };
		char key[16];
		struct kvt_key kk;
		snprintf(key, sizeof(key), "qpp-%u", k);
		kvt_key_set(&kk, key, strlen(key));
		tsrv_fill(v, QP_LEN, 470 + k);
		T_RC(kc_put(&c, ns, &kk, &p, 1, NULL), KVT_OK);
	}
	d.tenant = "alice";
	f.ns_count = 1;
	f.ns = ns;
	for (unsigned j = 0; j < QPP_CONNS; j++) {
		T_RC(kc_dial(&r[j], srv.port, "rita", SECRET_ALICE), 0);
		T_RC(kc_register(&r[j], &d, ns_r, NULL, 0), KVT_OK);
	}
	for (unsigned k = 0; k < QPP_VALUES; k++) {
		char key[16];
		snprintf(key, sizeof(key), "qpp-%u", k);
		for (unsigned i = 0; i < QO_DUPS; i++)
			kvt_key_set(&its[i].key, key, strlen(key));
		T_ASSERT(kc_request(&r[k % QPP_CONNS], &f, its, QO_DUPS, NULL, 0) > 0);
	}
	tsrv_sleep_ms(1000);
	pins = stat_of("store.pins_active");
	{
		struct iovec p = { v, 8u << 20 };
		struct kvt_key kk;
		kvt_key_set(&kk, "qpp-big", 7);
		memset(v, 7, 8u << 20);
		rc = kc_put(&c, ns, &kk, &p, 1, NULL);
	}
	printf("quiet_pins_pipe: %u frames each naming another 1 MiB value %u times, unread: "
	       "store.pins_active %" PRIu64 "; another PUT of 8 MiB: %d\n", QPP_VALUES, QO_DUPS,
	       pins, rc);
	for (unsigned j = 0; j < QPP_CONNS; j++)
		kc_close(&r[j]);
	kc_close(&c);
	free(its);
	free(v);
	/* the share's values, and a connection's first past it (quiet_pins) */
	T_LE_INT(pins, 16 + QPP_CONNS);
	T_EQ_INT(rc, KVT_OK);
	T_EQ_INT(tsrv_stop(&srv), 0);
}
/* ------------------------------------------------------------------------
 * resp_items (hostile7): each key of a RESP MGET gets a library request
 * (~330 bytes) against the 7 bytes of the key in the command, which alone
 * was charged: connections pipelining MGETs of 65535 keys, never reading,
 * grew kvtierd far past --max-memory.  Now the requests are charged with
 * the command; past the budget a command is answered with an error.  A
 * command holds one window of requests at a time, all its charges held to
 * its tenant's input share (resp_tenant_items): every connection's AUTH
 * is answered +OK -- 1 release run in 10 had one refused before.
 */

#define RI_CONNS 12u
#define RI_KEYS 65535u

static void phase_resp_items(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", NULL };
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
	size_t one = 32 + (size_t)RI_KEYS * 12, len = 0;
	char *cmd = malloc(4 * one), reply[64];
	int fds[RI_CONNS];
	uint64_t refused0, refused, grew;
	bool closed;

	T_ASSERT(cmd != NULL);
	start("resp_items", extra);
	len = (size_t)snprintf(cmd, one, "*%u\r\n$4\r\nMGET\r\n", RI_KEYS + 1);
	for (unsigned i = 0; i < RI_KEYS; i++)
		len += (size_t)snprintf(cmd + len, one - len, "$6\r\nk%05u\r\n", i);
	for (unsigned i = 1; i < 4; i++)
		memcpy(cmd + i * len, cmd, len);
	refused0 = stat_of("server.mem_refused");
	rss_begin();
	for (unsigned i = 0; i < RI_CONNS; i++) {
		fds[i] = tcp_connect(tsrv_listener_port(srv.log, "RESP"));
		T_EQ_INT(send_for(fds[i], auth, strlen(auth), 1000), (int64_t)strlen(auth));
		recv_for(fds[i], reply, 6, 10000, &closed);
		if (reply[0] == '-')
			recv_for(fds[i], reply + 5, sizeof(reply) - 5, 200, &closed);
		/* Never refused: the earlier connections' MGETs hold a window
		 * of requests each, within their tenant's input share, not
		 * the budget (security.md resp_items; test resp_tenant_items) */
		if (strncmp(reply, "+OK", 3) != 0)
			T_FAIL("connection %u: AUTH answered '%s'%s", i, reply,
			       closed ? ", then closed" : "");
		send_for(fds[i], cmd, 4 * len, 3000); /* what it takes; never read */
	}
	tsrv_sleep_ms(1000);
	grew = rss_end(MAX_MEMORY);
	for (unsigned i = 0; i < RI_CONNS; i++)
		close(fds[i]);
	refused = stat_of("server.mem_refused") - refused0;
	printf("resp_items: %u connections x 4 MGETs of %u keys, unread: RSS +%" PRIu64
	       " MiB, mem_refused +%" PRIu64 "\n", RI_CONNS, RI_KEYS, grew >> 20, refused);
	free(cmd);
	T_GE_INT(refused, 1);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_tenant_items (resptenant): the requests of a RESP command of many
 * keys were charged to the server's --max-memory alone, and since a
 * command of many keys goes to the store a window at a time (resp_keys)
 * it held them longer: while alice's pipelined MGETs and MSETs of 65535
 * keys, never read, held the budget, bob's AUTH and commands were
 * answered "-ERR server memory limit reached ... retry later".  Now a
 * command holds one window of requests at a time and its charges count
 * in its tenant's input share (doc/security.md): alice is bounded, bob is
 * answered.
 */

#define RT_CONNS 24u
#define RT_KEYS 65535u
#define RT_CMDS 3u  /* MGETs on each of alice's connections, after an MSET */
#define SECRET_BOB "secret-of-bob-0123456789ab"
#define RT_RSS_X 4u /* budgets in the RSS bound (rss_end below) */

/* One of bob's sessions: AUTH, SET, GET, a small MGET, each answered
 * exactly; false (and what came, in got) otherwise. */
static bool rt_bob(uint16_t port, char p, unsigned round, char *got, size_t cap)
{
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$26\r\n" SECRET_BOB "\r\n";
	char cmds[256], want[128];
	bool closed = false, ok = false;
	int fd = tcp_connect(port), n, wn;

	round %= 1000;
	got[0] = 0;
	if (send_for(fd, auth, strlen(auth), 1000) != (int64_t)strlen(auth))
		goto out;
	recv_for(fd, got, 6, 5000, &closed);
	if (strcmp(got, "+OK\r\n") != 0)
		goto out;
	n = snprintf(cmds, sizeof(cmds),
		     "*3\r\n$3\r\nSET\r\n$4\r\n%c%03u\r\n$4\r\nv%03u\r\n"
		     "*2\r\n$3\r\nGET\r\n$4\r\n%c%03u\r\n"
		     "*3\r\n$4\r\nMGET\r\n$4\r\n%c%03u\r\n$4\r\nnone\r\n",
		     p, round, round, p, round, p, round);
	wn = snprintf(want, sizeof(want), "+OK\r\n$4\r\nv%03u\r\n*2\r\n$4\r\nv%03u\r\n$-1\r\n",
		      round, round);
	if (send_for(fd, cmds, (size_t)n, 1000) != n)
		goto out;
	recv_for(fd, got, (size_t)wn + 1 < cap ? (size_t)wn + 1 : cap, 5000, &closed);
	ok = strcmp(got, want) == 0;
out:
	if (!ok)
		recv_for(fd, got + strlen(got), cap - strlen(got), 200, &closed);
	close(fd);
	return ok;
}

#define RT_BOBS 4u /* bob's sessions at once */

struct rt_bob_run {
	uint16_t port;
	char p;                    /* first letter of its keys */
	atomic_bool *stop;
	unsigned sessions, bad;
};

/* bob's sessions one after another until told to stop */
static void *rt_bob_thread(void *arg)
{
	struct rt_bob_run *b = arg;
	char got[256];

	while (!atomic_load(b->stop)) {
		if (!rt_bob(b->port, b->p, b->sessions, got, sizeof(got)) && b->bad++ < 2)
			printf("resp_tenant_items: bob's session %u got '%s'\n", b->sessions, got);
		b->sessions++;
	}
	return NULL;
}

static void phase_resp_tenant_items(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "16M", NULL };
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
	size_t one = 32 + (size_t)RT_KEYS * 12, mg = 0, ms = 0, all = 0;
	char *mget = malloc(one), *mset = malloc(one), *flood = malloc((RT_CMDS + 1) * one);
	char reply[64];
	struct rt_bob_run bob[RT_BOBS];
	atomic_bool stop = false;
	int fds[RT_CONNS];
	unsigned alice_in = 0, sessions = 0, bad = 0;
	uint64_t refused0, refused, grew, used;
	pthread_t bt[RT_BOBS];
	uint16_t port;
	bool closed;

	T_ASSERT(mget != NULL && mset != NULL && flood != NULL);
	start_with("resp_tenant_items", extra,
		   "alice " SECRET_ALICE " tenant\n"
		   "admin " SECRET_ADMIN " admin\n"
		   "bob " SECRET_BOB " tenant\n");
	port = tsrv_listener_port(srv.log, "RESP");
	mg = (size_t)snprintf(mget, one, "*%u\r\n$4\r\nMGET\r\n", RT_KEYS + 1);
	for (unsigned i = 0; i < RT_KEYS; i++)
		mg += (size_t)snprintf(mget + mg, one - mg, "$6\r\nk%05u\r\n", i);
	ms = (size_t)snprintf(mset, one, "*%u\r\n$4\r\nMSET\r\n", RT_KEYS);
	for (unsigned i = 0; i < RT_KEYS / 2; i++)
		ms += (size_t)snprintf(mset + ms, one - ms, "$6\r\nm%05u\r\n$1\r\nv\r\n", i);
	/* flood: MGET, MSET, MGET, MGET */
	for (unsigned k = 0; k < RT_CMDS; k++) {
		memcpy(flood + all, mget, mg);
		all += mg;
		if (k == 0) {
			memcpy(flood + all, mset, ms);
			all += ms;
		}
	}
	refused0 = stat_of("server.mem_refused");
	rss_begin();
	/* bob logs in and runs his commands all along, while alice sends on
	 * each connection MGET, MSET, MGET, MGET, never read (the MGETs' keys
	 * missing: no pins) */
	for (unsigned b = 0; b < RT_BOBS; b++) {
		bob[b] = (struct rt_bob_run){ .port = port, .p = (char)('p' + b), .stop = &stop };
		T_EQ_INT(pthread_create(&bt[b], NULL, rt_bob_thread, &bob[b]), 0);
	}
	for (unsigned i = 0; i < RT_CONNS; i++) {
		fds[i] = tcp_connect(port);
		T_EQ_INT(send_for(fds[i], auth, strlen(auth), 1000), (int64_t)strlen(auth));
		recv_for(fds[i], reply, 6, 10000, &closed);
		if (strncmp(reply, "+OK", 3) == 0)
			alice_in++;
		/* what it takes in 1 s (the rest cut: nothing follows it),
		 * one connection after another; never read */
		send_for(fds[i], flood, all, 1000);
	}
	tsrv_sleep_ms(1000);
	used = stat_of("server.mem_used");
	atomic_store(&stop, true);
	for (unsigned b = 0; b < RT_BOBS; b++) {
		pthread_join(bt[b], NULL);
		sessions += bob[b].sessions;
		bad += bob[b].bad;
	}
	/* the DRAM tier (alice's MSETs fill it) and the budget, which
	 * alice's commands, read buffers and replies fill, with what the
	 * store holds for her 24 MSETs of the same 32767 keys
	 * (mem.meta_bytes 2-43 MB) and the allocator's fragments: +36-71
	 * MiB in release, some runs +119 to +161, with the evictions to
	 * SSD her MSETs cause (security.md); +65-117 under ASan.  What
	 * bounds alice is the budget: asserted below */
	grew = rss_end((16u << 20) + RT_RSS_X * MAX_MEMORY);
	for (unsigned i = 0; i < RT_CONNS; i++)
		close(fds[i]);
	refused = stat_of("server.mem_refused") - refused0;
	printf("resp_tenant_items: alice %u connections (%u logged in) x an MSET and %u MGETs "
	       "of %u keys, unread: RSS +%" PRIu64 " MiB, mem_refused +%" PRIu64
	       ", budget used %" PRIu64 " KiB; bob's sessions failed %u of %u\n", RT_CONNS,
	       alice_in, RT_CMDS, RT_KEYS, grew >> 20, refused, used >> 10, bad, sessions);
	free(mget);
	free(mset);
	free(flood);
	T_GE_INT(sessions, 10);
	T_EQ_INT(bad, 0);
	/* alice's charges: the budget, passed by the answers owed */
	T_LE_INT(used, MAX_MEMORY + (8u << 20));
	T_GE_INT(refused, 1);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * out_share (hostile8): a logged-in client that pipelines requests and
 * never reads held up to --conn-output (64 MiB) of queued answers, all
 * charged to the shared --max-memory: two tenants' idle sockets took the
 * whole budget, and every other tenant's next frame was refused -ENOMEM
 * until --idle-timeout closed them.  Now a tenant's queued answers hold
 * at most a quarter of the budget (KVTD_OUT_TENANT_MAX): past that its
 * connections with answers queued are not read (out_share_paused).
 */

#define SHARE_BUDGET (16u << 20) /* --max-memory of this phase */
#define SHARE_CONNS 2u           /* flooding connections per hostile tenant */
#define SECRET_MALLORY "secret-of-mallory-0123456789"
#define SECRET_TRUDY "secret-of-trudy-01234567890"

static void phase_out_share(void)
{
	const char *extra[] = { "--max-memory", "16M", "--dram", "32M", "--idle-timeout", "120",
				NULL };
	static const struct {
		const char *who, *secret;
	} hostile[] = { { "mallory", SECRET_MALLORY }, { "trudy", SECRET_TRUDY } };
	uint8_t ns[PROTO_DIGEST_LEN], ping[PROTO_HDR_LEN + 64];
	struct proto_frame f = { .op = PROTO_OP_PING, .tag = 1 };
	struct kc fl[2 * SHARE_CONNS], good;
	uint64_t sent[2 * SHARE_CONNS], used, paused0, paused, t0, ms, grew;
	int64_t plen = 0;
	int bad;

	start_with("out_share", extra,
		   "alice " SECRET_ALICE " tenant\n"
		   "admin " SECRET_ADMIN " admin\n"
		   "mallory " SECRET_MALLORY " tenant\n"
		   "trudy " SECRET_TRUDY " tenant\n");
	paused0 = stat_of("server.mem_paused");
	rss_begin();
	for (unsigned i = 0; i < 2 * SHARE_CONNS; i++) {
		T_RC(kc_dial(&fl[i], srv.port, hostile[i % 2].who, hostile[i % 2].secret), 0);
		f.version = fl[i].version;
		plen = proto_encode(&f, NULL, 0, ping, sizeof(ping), NULL, NULL);
		T_EQ_INT(plen, PROTO_HDR_LEN);
		/* 250,000 PINGs: ~60 MiB of queued answers if all were taken */
		sent[i] = flood_send(fl[i].fd, ping, (size_t)plen, FLOOD_NATIVE, 10000);
	}
	/* All open, none read.  A third tenant is served, at once.  (Before,
	 * the admin's STATS itself could be refused: 0 then.) */
	used = stat_opt("server.mem_used");
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	t0 = tsrv_now_ns();
	T_RC(kc_register(&good, &desc, ns, NULL, 0), KVT_OK);
	bad = roundtrips(&good, ns, 8, 64u << 10, 17);
	ms = (tsrv_now_ns() - t0) / 1000000;
	kc_close(&good);
	grew = rss_end(SHARE_BUDGET);
	paused = stat_opt("server.out_share_paused");
	for (unsigned i = 0; i < 2 * SHARE_CONNS; i++) {
		printf("  %s connection %u: %" PRIu64 " PINGs taken, unread\n", hostile[i % 2].who,
		       i / 2, sent[i]);
		kc_close(&fl[i]);
	}
	printf("out_share: mem_used %" PRIu64 " KiB of %u with %u tenants' floods unread "
	       "(mem_paused +%" PRIu64 ", out_share_paused %" PRIu64 "); alice's failed round "
	       "trips %d of 8 in %" PRIu64 " ms; RSS +%" PRIu64 " MiB\n", used >> 10,
	       SHARE_BUDGET >> 10, 2, stat_of("server.mem_paused") - paused0, paused, bad, ms,
	       grew >> 20);
	/* Two quarters, and what the frames in flight answer past them */
	T_LE_INT(used, SHARE_BUDGET / 2 + (2u << 20));
	T_EQ_INT(bad, 0);
	T_LE_INT(ms, 5000);
	T_GE_INT(paused, 2);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * no_shares (the lead's review, 2026-12-03): a server without --tenants is
 * one trust domain and has no shares (doc/kvtierd.md "A tenant's share"):
 * every client is the default tenant, and a quarter of --max-memory for
 * all of their queued answers together throttled every client, not one
 * tenant.  The input share said so (kvtd_in_share); the output share
 * applied to the default tenant all the same (out_share_paused counted).
 * Three connections pipeline PINGs and never read (each holds at most
 * --conn-output, 4 MiB: together more than --max-memory 8M): they are
 * held by the budget (mem_paused, or mem_refused and closed), never by a
 * share.
 */

#define NS_CONNS 3u

static void phase_no_shares(void)
{
	const char *argv[] = { "--max-memory", "8M", "--dram", "32M", "--threads", "2", NULL };
	uint8_t ping[PROTO_HDR_LEN + 64];
	struct proto_frame f = { .op = PROTO_OP_PING, .tag = 1 };
	struct kc fl[NS_CONNS];
	uint64_t sent[NS_CONNS], paused, mem_held;
	char dir[700];
	int64_t plen = 0;

	snprintf(dir, sizeof(dir), "%s/no_shares", base);
	tsrv_start(&srv, bin, base, dir, NULL, argv);
	for (unsigned i = 0; i < NS_CONNS; i++) {
		T_RC(kc_dial(&fl[i], srv.port, "default", ""), 0);
		f.version = fl[i].version;
		plen = proto_encode(&f, NULL, 0, ping, sizeof(ping), NULL, NULL);
		T_EQ_INT(plen, PROTO_HDR_LEN);
		sent[i] = flood_send(fl[i].fd, ping, (size_t)plen, FLOOD_NATIVE, 10000);
	}
	/* Read once they closed: with the budget full, STATS is refused too. */
	for (unsigned i = 0; i < NS_CONNS; i++)
		kc_close(&fl[i]);
	tsrv_sleep_ms(200);
	paused = stat_of("server.out_share_paused");
	mem_held = stat_of("server.mem_paused") + stat_of("server.mem_refused");
	printf("no_shares: %u connections of the default tenant, %" PRIu64 " + %" PRIu64
	       " + %" PRIu64 " PINGs taken, unread: mem_paused + mem_refused %" PRIu64
	       ", out_share_paused %" PRIu64 "\n", NS_CONNS, sent[0], sent[1], sent[2], mem_held,
	       paused);
	/* Their answers reached the budget (paused, or the next frame refused
	 * and the connection closed), past any quarter of it. */
	T_GE_INT(mem_held, 1);
	T_EQ_INT(paused, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_mget (hostile8): one RESP MGET pinned every key it named before
 * its reply was built, whatever the connection's pin cap: an MGET naming
 * 24 values of 1 MiB 400 times each held 9600 pins (DRAM no other client
 * could evict into) for as long as its client did not read.  Now an MGET
 * probes 64 keys at a time and is answered with an error once they pin
 * the cap (--dram/8), its pins released at once.
 */

#define MG_VALUES 24u
#define MG_REPEAT 400u

/* SET m00..m23 to vlen bytes each (of 'a', 'b', ...) on RESP connection w. */
static void resp_set_mg(int w, char *cmd, size_t cap, size_t vlen)
{
	for (unsigned i = 0; i < MG_VALUES; i++) {
		char key[8];
		snprintf(key, sizeof(key), "m%02u", i);
		resp_set(w, cmd, cap, key, (char)('a' + i), vlen);
	}
}

static void phase_resp_mget(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "32M", NULL };
	size_t vlen = 1u << 20, cap = 64 + vlen + 16 * MG_VALUES * MG_REPEAT, o = 0;
	char *cmd = malloc(cap), reply[256], big[8] = { 0 };
	uint64_t pins = 0, t0;
	uint16_t port;
	bool closed = false;
	int w, r;

	T_ASSERT(cmd != NULL);
	start("resp_mget", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	resp_set_mg(w, cmd, cap, vlen);

	/* The hostile MGET, never read: 9600 keys, 9.4 GiB of reply. */
	r = resp_alice(port);
	o = (size_t)snprintf(cmd, cap, "*%u\r\n$4\r\nMGET\r\n", MG_VALUES * MG_REPEAT + 1);
	for (unsigned i = 0; i < MG_VALUES * MG_REPEAT; i++)
		o += (size_t)snprintf(cmd + o, cap - o, "$3\r\nm%02u\r\n", i % MG_VALUES);
	T_EQ_INT(send_for(r, cmd, o, 5000), (int64_t)o);
	/* Its probes settle (each pinned once, or refused): the most pins
	 * seen over 1 s */
	t0 = tsrv_now_ns();
	while (tsrv_now_ns() - t0 < 1000000000ull) {
		uint64_t p = stat_of("store.pins_active");
		if (p > pins)
			pins = p;
		tsrv_sleep_ms(50);
	}
	if (recv(r, big, 5, MSG_DONTWAIT) < 0)
		big[0] = 0;
	printf("resp_mget: an MGET of %u keys (%u values of 1 MiB) unread: at most %" PRIu64
	       " pins in its first second; its reply begins '%.5s'\n", MG_VALUES * MG_REPEAT,
	       MG_VALUES, pins, big);

	/* Another connection's small MGET is answered whole. */
	o = (size_t)snprintf(cmd, cap, "*4\r\n$4\r\nMGET\r\n$3\r\nm00\r\n$3\r\nm01\r\n"
			     "$4\r\nnone\r\n");
	T_EQ_INT(send_for(w, cmd, o, 1000), (int64_t)o);
	recv_for(w, reply, 15, 5000, &closed);
	printf("resp_mget: a small MGET's reply begins '%.14s'\n", reply);
	T_ASSERT(strncmp(reply, "*3\r\n$1048576\r\n", 14) == 0);
	close(w);
	close(r);
	free(cmd);
	/* The cap (--dram/8 = 4 MiB: 4 values) plus one window of 64 keys
	 * (before: all 9600) */
	T_LE_INT(pins, 4u + 64u + 4u);
	T_ASSERT(strncmp(big, "-ERR", 4) == 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_mget_held (rev36c): an MGET's reply waiting in the output queue
 * holds, besides its bytes, an iovec a run of pinned value and of text,
 * a pin a value (its handle, and its slot and view in the store) and its
 * text; the loop charged a reply with pins its first iovec alone (the
 * "*65535" line), so MGETs of one stored byte named 65,535 times, left
 * unread, held tens of MiB past --max-memory (--conn-output counts their
 * 458 KB of bytes each, the pin caps their 64 KiB of values).  Now a
 * queued reply is charged its text, iovecs and pins (KVTD_PIN_COST):
 * the budget and the tenant's share of it stop the flood, and another
 * tenant is served.
 */

#define MH_KEYS 65535u
#define MH_CONNS 4u
#define MH_CMDS 6u /* MGETs on each connection */

static int ms_connect_slow(uint16_t port);

/* alice's RESP connection with a receive window of 4 KiB (the kernel's
 * buffers take little of what it is sent: ms_connect_slow) */
static int mh_alice(uint16_t port)
{
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$26\r\n" SECRET_ALICE "\r\n";
	int fd = ms_connect_slow(port);
	char reply[8] = { 0 };
	bool closed = false;

	T_EQ_INT(send_for(fd, auth, strlen(auth), 1000), (int64_t)strlen(auth));
	recv_for(fd, reply, 6, 2000, &closed);
	T_ASSERT(strncmp(reply, "+OK", 3) == 0);
	return fd;
}

static void phase_resp_mget_held(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--max-memory", "16M", NULL };
	size_t cap = 64 + 7 * (size_t)MH_KEYS, o, sent[MH_CONNS] = { 0 }, all = 0;
	char *cmd = malloc(cap), got[256];
	int fds[MH_CONNS], w;
	uint64_t pins = 0, used = 0, t0, grew, refused0, refused;
	uint16_t port;

	T_ASSERT(cmd != NULL);
	start_with("resp_mget_held", extra,
		   "alice " SECRET_ALICE " tenant\n"
		   "admin " SECRET_ADMIN " admin\n"
		   "bob " SECRET_BOB " tenant\n");
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	resp_set(w, cmd, cap, "a", 'v', 1);
	close(w);
	o = (size_t)snprintf(cmd, cap, "*%u\r\n$4\r\nMGET\r\n", MH_KEYS + 1);
	for (unsigned i = 0; i < MH_KEYS; i++, o += 7)
		memcpy(cmd + o, "$1\r\na\r\n", 7);

	refused0 = stat_of("server.mem_refused");
	rss_begin();
	for (unsigned c = 0; c < MH_CONNS; c++)
		fds[c] = mh_alice(port);
	/* MH_CMDS MGETs on each, never read: sent as the server takes them,
	 * for at most 1 s */
	t0 = tsrv_now_ns();
	for (bool more = true; more && tsrv_now_ns() - t0 < 1000000000ull;) {
		more = false;
		for (unsigned c = 0; c < MH_CONNS; c++) {
			size_t want = MH_CMDS * o - sent[c], off = sent[c] % o;
			int64_t n;
			if (!want)
				continue;
			more = true;
			n = send_for(fds[c], cmd + off, o - off, 20);
			if (n > 0)
				sent[c] += (size_t)n;
		}
	}
	/* what they hold, over 0.5 s */
	t0 = tsrv_now_ns();
	while (tsrv_now_ns() - t0 < 500000000ull) {
		uint64_t p = stat_of("store.pins_active"), u = stat_of("server.mem_used");
		pins = p > pins ? p : pins;
		used = u > used ? u : used;
		tsrv_sleep_ms(100);
	}
	grew = rss_end(16u << 20);
	refused = stat_of("server.mem_refused") - refused0;
	for (unsigned c = 0; c < MH_CONNS; c++)
		all += sent[c];
	printf("resp_mget_held: %zu of %u MGETs of %u keys sent on %u connections, unread: "
	       "at most %" PRIu64 " pins, mem_used %" PRIu64 " KiB, %" PRIu64 " refused, RSS +%"
	       PRIu64 " MiB\n", all / o, MH_CONNS * MH_CMDS, MH_KEYS, MH_CONNS, pins, used >> 10,
	       refused, grew >> 20);
	/* Each pin held is charged at least KVTD_PIN_COST (128 bytes): the
	 * budget bounds them, but for a window of each connection's MGET
	 * (before: 786,420, 12 replies, mem_used 3 KiB) */
	T_LE_INT(pins, (16u << 20) / 128u + MH_CONNS * 64u);
	/* another tenant is served meanwhile */
	T_ASSERT(rt_bob(port, 'b', 1, got, sizeof(got)));
	for (unsigned c = 0; c < MH_CONNS; c++)
		close(fds[c]);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_auth_pins (session 42): a RESP reply counted in the tenant whose
 * command made it.  On 3 connections of alice's (a 4 KiB receive window,
 * never read) one send each: GET of her 1.5 MiB value, AUTH as bob, PING.
 * The GETs are answered once the whole pipeline was parsed, so their
 * replies are queued after the AUTH: they were counted in the connection's
 * tenant then, bob -- 4.5 MiB of pins in bob's share of the DRAM tier
 * (KVTD_PIN_TENANT_MAX, a quarter of --dram 16M: 4 MiB), none in alice's:
 * bob's GET on a fresh connection was refused and alice's served.  Now
 * alice's (refused: her replies pin her share), and bob is served.
 */

#define AP_CONNS 3u
#define AP_VLEN (3u << 19) /* 1.5 MiB: under a connection's cap (--dram/8) */

/* GET key on a fresh connection of alice's: its reply's first line. */
static void ap_alice_get(uint16_t port, const char *key, char *line, size_t cap)
{
	char cmd[64];
	bool closed = false;
	int fd = resp_alice(port);
	int n = snprintf(cmd, sizeof(cmd), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);

	T_EQ_INT(send_for(fd, cmd, (size_t)n, 1000), n);
	recv_for(fd, line, cap, 300, &closed);
	line[strcspn(line, "\r")] = 0;
	close(fd);
}

/*
 * The start resp_auth_pins and resp_auth_flow share: the server (phase
 * name), alice's "big" (AP_VLEN) and "small", then on AP_CONNS fresh
 * connections of alice's (fds) one send each, never read: GET big, AUTH
 * bob, PING; then alice's GET of small on a fresh connection until it is
 * refused (3 s at most).  cmd: a buffer of cap (256 + AP_VLEN); line:
 * the last GET's first line.  Returns the RESP port; *refused.
 */
static uint16_t ap_pin_alice(const char *phase, char *cmd, size_t cap, int *fds, char *line,
			     size_t line_cap, bool *refused)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "16M", NULL };
	const char *bob = "*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$26\r\n" SECRET_BOB "\r\n";
	uint64_t t0;
	uint16_t port;
	int w, n;

	start_with(phase, extra,
		   "alice " SECRET_ALICE " tenant\n"
		   "admin " SECRET_ADMIN " admin\n"
		   "bob " SECRET_BOB " tenant\n");
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	resp_set(w, cmd, cap, "big", 'b', AP_VLEN);
	resp_set(w, cmd, cap, "small", 's', 1);
	close(w);
	n = snprintf(cmd, cap, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n%s*1\r\n$4\r\nPING\r\n", bob);
	for (unsigned i = 0; i < AP_CONNS; i++) {
		fds[i] = mh_alice(port);
		T_EQ_INT(send_for(fds[i], cmd, (size_t)n, 1000), n);
	}
	/* Her replies queued (pinned, unread): alice's next GET is refused. */
	*refused = false;
	t0 = tsrv_now_ns();
	while (!*refused && tsrv_now_ns() - t0 < 3000000000ull) {
		ap_alice_get(port, "small", line, line_cap);
		*refused = strncmp(line, "-ERR the tenant's replies", 25) == 0;
		if (!*refused)
			tsrv_sleep_ms(20);
	}
	return port;
}

static void phase_resp_auth_pins(void)
{
	size_t cap = 256 + AP_VLEN;
	char *cmd = malloc(cap), line[64] = { 0 }, got[256];
	int fds[AP_CONNS];
	bool refused, bob_ok;
	uint16_t port;

	T_ASSERT(cmd != NULL);
	port = ap_pin_alice("resp_auth_pins", cmd, cap, fds, line, sizeof(line), &refused);
	bob_ok = rt_bob(port, 'p', 1, got, sizeof(got));
	printf("resp_auth_pins: %u GETs of %u KiB of alice's, each followed by AUTH bob, unread: "
	       "alice's next GET %s (%s), bob's round trip %s\n", AP_CONNS, AP_VLEN >> 10,
	       refused ? "refused" : "served", line, bob_ok ? "served" : "refused");
	T_ASSERT(refused); /* before: "$1", her pins counted in bob's share */
	T_ASSERT(bob_ok);  /* before: refused for alice's replies */
	for (unsigned i = 0; i < AP_CONNS; i++)
		close(fds[i]);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_auth_share (review42a): the share a RESP reply is checked against
 * is the one it is counted in.  resp_auth_pins counts a GET's reply in
 * the tenant whose command made it (alice's), but the GET's probe, which
 * completes once the whole pipeline was parsed, checked the connection's
 * tenant then (bob, or none just after AUTH): bob's share stayed empty,
 * and every such GET of alice's was served -- alice's pinned replies
 * grew past KVTD_PIN_TENANT_MAX (a quarter of --dram 16M: 4 MiB) by one
 * connection's each, the resp_pins attack by a client that holds two
 * tenants' secrets.  Now the GET is checked against alice's: at most 3
 * of 1.5 MiB are served (0, 1.5, 3 MiB pinned when checked).
 */

#define AU_CONNS 8u

static void phase_resp_auth_share(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "16M", NULL };
	const char *bob = "*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$26\r\n" SECRET_BOB "\r\n";
	size_t cap = 256 + AP_VLEN;
	char *cmd = malloc(cap), line[16];
	int fds[AU_CONNS], w, n;
	unsigned served = 0, refused = 0;
	bool closed;
	uint16_t port;

	T_ASSERT(cmd != NULL);
	start_with("resp_auth_share", extra,
		   "alice " SECRET_ALICE " tenant\n"
		   "admin " SECRET_ADMIN " admin\n"
		   "bob " SECRET_BOB " tenant\n");
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	resp_set(w, cmd, cap, "big", 'b', AP_VLEN);
	close(w);
	n = snprintf(cmd, cap, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n%s*1\r\n$4\r\nPING\r\n", bob);
	/* One at a time: each GET's reply queued (its pins counted) before
	 * the next is checked.  Its first bytes only are read. */
	for (unsigned i = 0; i < AU_CONNS; i++) {
		fds[i] = mh_alice(port);
		T_EQ_INT(send_for(fds[i], cmd, (size_t)n, 1000), n);
		recv_for(fds[i], line, 6, 2000, &closed);
		if (line[0] == '$')
			served++;
		else if (strncmp(line, "-ERR", 4) == 0)
			refused++;
	}
	printf("resp_auth_share: %u GETs of %u KiB of alice's, each followed by AUTH bob, "
	       "unread: %u served, %u refused\n", AU_CONNS, AP_VLEN >> 10, served, refused);
	T_ASSERT(served <= 3); /* before: all 8, 12 MiB pinned in alice's share */
	T_EQ_INT(served + refused, AU_CONNS);
	for (unsigned i = 0; i < AU_CONNS; i++)
		close(fds[i]);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_auth_flow (session 43): a RESP connection whose queued replies pin
 * past their tenant's share is not read until they drain -- the tenant
 * they are counted in (resp_auth_pins), not the connection's now.
 * resp_auth_pins' pipelines (3 connections of alice's, 4 KiB receive
 * windows, never read: GET of her 1.5 MiB value, AUTH as bob, PING) pin
 * 4.5 MiB of alice's, past her 4 MiB (KVTD_PIN_TENANT_MAX, a quarter of
 * --dram 16M), each connection 1.5 (under its 2 MiB).  Then on each, a
 * SET of bob's, twice, 150 ms apart.  The connections stayed read (bob
 * pins nothing): all 6 SETs were run.  Now none (0 and 0; the first
 * round's may be run, a connection's flow being checked when a command
 * of its is answered; the second's not).
 */

/* How many of the keys f<round>0 .. f<round>2 bob has. */
static unsigned af_bob_exists(uint16_t port, unsigned round)
{
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$26\r\n" SECRET_BOB "\r\n";
	char cmd[128], got[32] = { 0 };
	bool closed = false;
	int fd = tcp_connect(port), n;

	T_EQ_INT(send_for(fd, auth, strlen(auth), 1000), (int64_t)strlen(auth));
	recv_for(fd, got, 6, 2000, &closed);
	T_ASSERT(strncmp(got, "+OK\r\n", 5) == 0);
	n = snprintf(cmd, sizeof(cmd), "*4\r\n$6\r\nEXISTS\r\n$3\r\nf%u0\r\n$3\r\nf%u1\r\n"
		     "$3\r\nf%u2\r\n", round, round, round);
	T_EQ_INT(send_for(fd, cmd, (size_t)n, 1000), n);
	memset(got, 0, sizeof(got));
	recv_for(fd, got, 5, 2000, &closed);
	close(fd);
	T_ASSERT(got[0] == ':');
	return (unsigned)strtoul(got + 1, NULL, 10);
}

static void phase_resp_auth_flow(void)
{
	size_t cap = 256 + AP_VLEN;
	char *cmd = malloc(cap), line[64] = { 0 };
	int fds[AP_CONNS], n;
	unsigned ran[2];
	bool refused;
	uint16_t port;

	T_ASSERT(cmd != NULL);
	port = ap_pin_alice("resp_auth_flow", cmd, cap, fds, line, sizeof(line), &refused);
	T_ASSERT(refused);
	for (unsigned r = 0; r < 2; r++) {
		for (unsigned i = 0; i < AP_CONNS; i++) {
			n = snprintf(cmd, cap, "*3\r\n$3\r\nSET\r\n$3\r\nf%u%u\r\n$1\r\nv\r\n", r,
				     i);
			T_EQ_INT(send_for(fds[i], cmd, (size_t)n, 1000), n);
		}
		tsrv_sleep_ms(150);
	}
	ran[0] = af_bob_exists(port, 0);
	ran[1] = af_bob_exists(port, 1);
	printf("resp_auth_flow: %u connections, each GET of %u KiB of alice's, AUTH bob, unread: "
	       "bob's SETs run on them after: %u of %u, then %u of %u\n", AP_CONNS, AP_VLEN >> 10,
	       ran[0], AP_CONNS, ran[1], AP_CONNS);
	T_EQ_INT(ran[1], 0); /* before: 3 */
	for (unsigned i = 0; i < AP_CONNS; i++)
		close(fds[i]);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_exists (hyg10): a RESP EXISTS or DEL pinned every key it named at
 * once to check it (its value's header holds the Redis key and expiry):
 * one command of 65535 names, any client's, held that many pins, blocks
 * no put could evict into, while its probes lasted.  Now both probe 64
 * keys at a time, each window checked and released before the next.
 * store.pins_peak (each pin shard's most at once, summed) says how many
 * were held: 9600 names of 24 values gave 9600 before.
 */

static void phase_resp_exists(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--dram", "32M", NULL };
	size_t cap = 64 + 16 * MG_VALUES * MG_REPEAT, o;
	char *cmd = malloc(cap), reply[64];
	uint64_t peak;
	uint16_t port;
	bool closed = false;
	int w;

	T_ASSERT(cmd != NULL);
	start("resp_exists", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	resp_set_mg(w, cmd, cap, 4096);
	for (int verb = 0; verb < 2; verb++) {
		const char *name = verb ? "DEL" : "EXISTS", *want = verb ? ":24\r\n" : ":9600\r\n";
		o = (size_t)snprintf(cmd, cap, "*%u\r\n$%zu\r\n%s\r\n", MG_VALUES * MG_REPEAT + 1,
				     strlen(name), name);
		for (unsigned i = 0; i < MG_VALUES * MG_REPEAT; i++)
			o += (size_t)snprintf(cmd + o, cap - o, "$3\r\nm%02u\r\n", i % MG_VALUES);
		T_EQ_INT(send_for(w, cmd, o, 5000), (int64_t)o);
		memset(reply, 0, sizeof(reply));
		recv_for(w, reply, strlen(want) + 1, 10000, &closed);
		peak = stat_of("store.pins_peak");
		printf("resp_exists: %s of %u names (%u keys): '%.*s', at most %" PRIu64
		       " pins at once\n", name, MG_VALUES * MG_REPEAT, MG_VALUES,
		       (int)strcspn(reply, "\r"), reply, peak);
		T_ASSERT(strcmp(reply, want) == 0);
		/* One window of 64 keys at a time (the sum of 16 shards'
		 * peaks: at most 16 x 64); all 9600 before. */
		T_LE_INT(peak, 16u * 64u);
		T_EQ_U64(stat_of("store.pins_active"), 0);
	}
	close(w);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * fwd_queue (hostile8): in a pod, each put a client marks FORWARD (one copy
 * sent, the server forwards it to the group's other members:
 * remote.hot_forward) waits in the repair thread's queue, up to 65,536
 * entries (~100 bytes each), which was outside --max-memory.  Now the
 * queue's array is charged; past the budget it does not grow and the
 * forward is dropped (repair.forward_mem_dropped, of forward_dropped).
 * The pod's other member is a socket that never accepts: the repair
 * thread's pass waits on it (5 s, PEER_TIMEOUT_MS in daemon/peer.c; the
 * puts take ~1 s under ASan) while the queue fills.  (--dram 192M: the
 * 32768 values, 4 KiB chunks each, fit without write-down.)
 */

#define FQ_ITEMS 32768u
#define FQ_FRAME 64u
#define FQ_LEN 16u

static uint16_t free_tcp_port(int *keep)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (keep)
		T_EQ_INT(listen(fd, 64), 0);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	if (keep)
		*keep = fd;
	else
		close(fd);
	return ntohs(a.sin_port);
}

struct fq_seen {
	unsigned ok, bad;
	int first_bad;
	uint32_t first_index;
};

static void fq_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct fq_seen *s = ctx;
	(void)r;
	if (pi->status == KVT_OK) {
		s->ok++;
	} else if (!s->bad++) {
		s->first_bad = pi->status;
		s->first_index = pi->index;
	}
}

/* c logged in as who, namespace desc registered (its digest into ns):
 * who's quota group. */
static uint64_t login_group(struct kc *c, const char *who, const char *secret,
			    uint8_t ns[PROTO_DIGEST_LEN])
{
	uint64_t g = 0;

	T_RC(kc_dial(c, srv.port, who, secret), 0);
	T_RC(kc_register(c, &desc, ns, NULL, 0), KVT_OK);
	T_RC(kc_stat(c, PROTO_SCOPE_TENANT, "tenant.quota_group", &g), 0);
	return g;
}

/* The copies frame_puts' placed puts ask (fwd_copies: 8). */
static uint32_t fp_copies = 2;

/* items puts of FQ_LEN bytes on c into ns, keys PREFIX%05u, frame to a
 * frame, each answered (flags: PROTO_IF_PLACED and more, or 0; copies
 * fp_copies); what the items' statuses were goes to *seen. */
static void frame_puts(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], unsigned items,
		       unsigned frame, uint32_t flags, const char *prefix, struct fq_seen *seen)
{
	struct proto_item *its = calloc(frame, sizeof(*its));
	uint64_t lens[1] = { FQ_LEN };
	uint8_t *val = malloc((size_t)FQ_LEN * frame);
	uint32_t crc[1];

	T_ASSERT(its != NULL && val != NULL);
	memset(val, 0x5a, (size_t)FQ_LEN * frame);
	crc[0] = kvt_crc32c(0, val, FQ_LEN);
	for (unsigned done = 0; done < items; done += frame) {
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		struct iovec d = { val, (size_t)FQ_LEN * frame };
		for (unsigned i = 0; i < frame; i++) {
			char name[24];
			snprintf(name, sizeof(name), "%s%05u", prefix, done + i);
			kvt_key_set(&its[i].key, name, strlen(name));
			its[i].flags = flags;
			if (flags) {
				its[i].anchor = done + i;
				its[i].copies = fp_copies;
			}
			its[i].part_count = 1;
			its[i].part_lens = lens;
			its[i].part_crcs = crc;
		}
		T_ASSERT(kc_request(c, &f, its, frame, &d, 1) > 0);
		T_ASSERT(kc_recv_items(c, 30000, fq_item, seen, NULL) > 0);
	}
	free(val);
	free(its);
}

/* FQ_ITEMS placed puts as alice, FQ_FRAME to a frame (frame_puts). */
static void placed_puts(uint32_t flags, const char *prefix, struct fq_seen *seen)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	struct kc c;

	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	frame_puts(&c, ns, FQ_ITEMS, FQ_FRAME, flags, prefix, seen);
	kc_close(&c);
}

static void phase_fwd_queue(void)
{
	char listen_at[32], members[80];
	int hole = -1;
	uint16_t hp = free_tcp_port(&hole), p = free_tcp_port(NULL);
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, "--max-memory", "1M", "--dram", "192M", NULL };
	uint64_t queued, dropped, mem_dropped, used;
	struct fq_seen seen = { 0 };
	uint64_t t0;

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, hp);
	start("fwd_queue", extra);
	t0 = tsrv_now_ns();
	placed_puts(PROTO_IF_PLACED | PROTO_IF_FORWARD, "fq", &seen);
	used = stat_of("server.mem_used");
	queued = stat_of("repair.forward_queued");
	dropped = stat_of("repair.forward_dropped");
	mem_dropped = stat_opt("repair.forward_mem_dropped");
	printf("fwd_queue: %u FORWARD puts in %" PRIu64 " ms (%u stored, %u refused) with the "
	       "other member silent: %" PRIu64 " queued, %" PRIu64 " dropped, of them %" PRIu64
	       " past --max-memory 1M; mem_used %" PRIu64 " KiB\n", FQ_ITEMS,
	       (tsrv_now_ns() - t0) / 1000000, seen.ok, seen.bad,
	       queued, dropped, mem_dropped, used >> 10);
	if (seen.bad)
		printf("  first refused: item %u of its frame, %d (%s)\n", seen.first_index,
		       seen.first_bad, kvt_strerror(seen.first_bad));
	close(hole); /* the pass fails now: the server stops at once */
	T_EQ_INT(seen.ok, FQ_ITEMS);
	T_GE_INT(queued + dropped, FQ_ITEMS); /* a failed pass counts its drops too */
	T_GE_INT(mem_dropped, 1);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * fwd_share (redteam): in a pod, the forward queue (65,536 entries) was
 * whoever's came first: one tenant's FORWARD puts while a pass waits on a
 * member that does not answer filled it, and every other tenant's
 * forwards were dropped (their replicas never made until the member list
 * changes).  Now a tenant's forwards queued hold at most a quarter of it
 * (repair.forward_tenant_dropped).  alice puts 69,632 values marked
 * FORWARD, 1,024 a frame, while the pass waits 5 s on the silent member;
 * then rita puts 64: each of hers must be queued.
 */

#define FS_FLOOD (65536u + 4096u)

static void phase_fwd_share(void)
{
	char listen_at[32], members[80];
	int hole = -1;
	uint16_t hp = free_tcp_port(&hole), p = free_tcp_port(NULL);
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, "--max-memory", "64M", "--dram", "96M", "--ssd", "0",
				NULL };
	uint8_t ans[PROTO_DIGEST_LEN], rns[PROTO_DIGEST_LEN];
	struct fq_seen seen = { 0 }, rseen = { 0 };
	uint64_t t0, q0, d0, q1, d1;
	struct kc a, r;

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, hp);
	start_with("fwd_share", extra, "alice " SECRET_ALICE " tenant\n"
				       "admin " SECRET_ADMIN " admin\n"
				       "rita " SECRET_ALICE " tenant\n");
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ans, NULL, 0), KVT_OK);
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	T_RC(kc_register(&r, &desc, rns, NULL, 0), KVT_OK);
	t0 = tsrv_now_ns();
	frame_puts(&a, ans, FS_FLOOD, 1024, PROTO_IF_PLACED | PROTO_IF_FORWARD, "fsa", &seen);
	q0 = stat_of("repair.forward_queued");
	d0 = stat_of("repair.forward_dropped");
	frame_puts(&r, rns, 64, 64, PROTO_IF_PLACED | PROTO_IF_FORWARD, "fsr", &rseen);
	q1 = stat_of("repair.forward_queued");
	d1 = stat_of("repair.forward_dropped");
	printf("fwd_share: alice's %u FORWARD puts in %" PRIu64 " ms: %" PRIu64 " queued, %"
	       PRIu64 " dropped (of them %" PRIu64 " past her share); then rita's 64: %" PRIu64
	       " queued, %" PRIu64 " dropped\n", FS_FLOOD, (tsrv_now_ns() - t0) / 1000000, q0,
	       d0, stat_opt("repair.forward_tenant_dropped"), q1 - q0, d1 - d0);
	kc_close(&a);
	kc_close(&r);
	close(hole); /* the pass fails now: the server stops at once */
	T_EQ_INT(seen.ok, FS_FLOOD);
	T_EQ_INT(rseen.ok, 64);
	T_EQ_U64(d1 - d0, 0);
	T_EQ_U64(q1 - q0, 64);
	T_GE_INT(d0, 1); /* alice past her share (or the queue's end) */
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * fwd_copies (redteam): a FORWARD put's `copies` (1..8) is the client's
 * word: asking 8 of every put made the server send up to 7 copies of
 * each to the other members, and the tenant's quarter of the forward
 * queue counted blocks, whatever they asked.  Now --max-copies (default
 * 8) is the most a put is kept on, forwarded to and healed to
 * (repair.copies_clamped), and a tenant's share of the queue counts the
 * copies its blocks ask (daemon/repair.c "Copies").
 *   1. --max-copies 1: alice's 64 FORWARD puts asking 8 are stored and
 *      none is queued (each clamped);
 *   2. the default: alice puts 8,192 asking 8, 1,024 a frame, while the
 *      pass waits on the silent member; then rita 64 asking 2.  alice's
 *      queued are at most what the first pass took (one frame) and
 *      16,384 / 7 more; rita's all queued.
 */

#define FC_ALICE 8192u

static void fc_start(const char *name, const char *max_copies, int *hole)
{
	static char listen_at[32], members[80];
	uint16_t hp = free_tcp_port(hole), p = free_tcp_port(NULL);
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, "--max-memory", "64M", "--dram", "96M", "--ssd", "0",
				max_copies ? "--max-copies" : NULL, max_copies, NULL };

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, hp);
	start_with(name, extra, "alice " SECRET_ALICE " tenant\n"
				"admin " SECRET_ADMIN " admin\n"
				"rita " SECRET_ALICE " tenant\n");
}

static void phase_fwd_copies(void)
{
	uint8_t ans[PROTO_DIGEST_LEN], rns[PROTO_DIGEST_LEN];
	struct fq_seen s1 = { 0 }, seen = { 0 }, rseen = { 0 };
	uint64_t q1, c1, q0, d0, da, t0, q2, d2;
	int hole = -1;
	struct kc a, r;

	/* 1. */
	fc_start("fwd_copies", "1", &hole);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ans, NULL, 0), KVT_OK);
	fp_copies = 8;
	frame_puts(&a, ans, 64, 64, PROTO_IF_PLACED | PROTO_IF_FORWARD, "fc1", &s1);
	q1 = stat_of("repair.forward_queued");
	c1 = stat_opt("repair.copies_clamped");
	printf("fwd_copies: --max-copies 1: alice's 64 FORWARD puts asking 8: %u stored, %"
	       PRIu64 " queued, %" PRIu64 " clamped\n", s1.ok, q1, c1);
	kc_close(&a);
	close(hole);
	T_EQ_INT(tsrv_stop(&srv), 0);

	/* 2. */
	fc_start("fwd_copies2", NULL, &hole);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ans, NULL, 0), KVT_OK);
	T_RC(kc_dial(&r, srv.port, "rita", SECRET_ALICE), 0);
	T_RC(kc_register(&r, &desc, rns, NULL, 0), KVT_OK);
	frame_puts(&a, ans, FC_ALICE, 1024, PROTO_IF_PLACED | PROTO_IF_FORWARD, "fca", &seen);
	q0 = stat_of("repair.forward_queued");
	d0 = stat_opt("repair.forward_tenant_dropped");
	da = stat_of("repair.forward_dropped");
	fp_copies = 2;
	frame_puts(&r, rns, 64, 64, PROTO_IF_PLACED | PROTO_IF_FORWARD, "fcr", &rseen);
	q2 = stat_of("repair.forward_queued");
	d2 = stat_of("repair.forward_dropped");
	t0 = stat_of("repair.forward_passes");
	printf("fwd_copies: alice's %u FORWARD puts asking 8: %" PRIu64 " queued, %" PRIu64
	       " dropped past her share (%" PRIu64 " passes); then rita's 64 asking 2: %" PRIu64
	       " queued, %" PRIu64 " dropped\n", FC_ALICE, q0, d0, t0, q2 - q0, d2 - da);
	kc_close(&a);
	kc_close(&r);
	close(hole);
	T_EQ_INT(s1.ok, 64);
	T_EQ_U64(q1, 0);
	T_EQ_U64(c1, 64);
	T_EQ_INT(seen.ok, FC_ALICE);
	T_EQ_INT(rseen.ok, 64);
	T_LE_INT(q0, 1024 + (65536 / 4) / 7);
	T_GE_INT(d0, 1);
	T_EQ_U64(q2 - q0, 64);
	T_EQ_U64(d2 - da, 0); /* none of rita's dropped */
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_stuck (redteam): a peer that subscribes to the KV-events PUB
 * socket and stops reading is queued every message by libzmq up to
 * ZMQ_SNDHWM, counted in messages whatever their size: vLLM's 100,000
 * messages of up to events.queue_max events each, in kvtierd's memory
 * and outside every budget.  Now a batch goes as messages of at most 256
 * events and a peer holds at most 32 of them (lib/core/kvevents.h
 * KVEVENTS_MSG_EVENTS, KVEVENTS_SNDHWM).  8 raw peers from one address
 * (the most the socket lets in from one) finish the handshake, subscribe
 * to everything and read nothing (a receive buffer of 4 KiB) while alice
 * puts 16-byte values 1,024 a frame for 6 s; the DRAM tier is filled
 * first, so that RSS measures what the flood holds.  The router
 * subscribed before, reading along, gets the messages sent meanwhile (the
 * smaller mark costs a reader that keeps up nothing), and its events
 * after.
 */

#define EVS_PEERS 8u
#define EVS_SECS 6u
#define EVS_PIPE 8u /* frames of 1,024 puts sent before their answers are read */

/* EVS_PIPE frames of 1,024 puts of 16 bytes (keys e<round>-<frame>-<i>),
 * pipelined, each answered OK. */
static void evs_puts(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], unsigned round)
{
	static struct proto_item its[1024];
	static uint8_t val[16 * 1024];
	uint64_t lens[1] = { 16 };
	uint32_t crc[1];

	memset(val, 0x5a, sizeof(val));
	crc[0] = kvt_crc32c(0, val, 16);
	for (unsigned f = 0; f < EVS_PIPE; f++) {
		struct proto_frame fr = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		struct iovec d = { val, sizeof(val) };
		for (unsigned i = 0; i < 1024; i++) {
			char name[32];
			snprintf(name, sizeof(name), "e%u-%u-%u", round, f, i);
			memset(&its[i], 0, sizeof(its[i]));
			kvt_key_set(&its[i].key, name, strlen(name));
			its[i].part_count = 1;
			its[i].part_lens = lens;
			its[i].part_crcs = crc;
		}
		T_ASSERT(kc_request(c, &fr, its, 1024, &d, 1) > 0);
	}
	for (unsigned f = 0; f < EVS_PIPE; f++) {
		struct fq_seen s = { 0 };
		T_ASSERT(kc_recv_items(c, 30000, fq_item, &s, NULL) > 0);
		T_EQ_INT(s.ok, 1024);
	}
}

static void phase_kvevents_stuck(void)
{
	static const uint8_t subscribe[] = { 0x00, 1, 0x01 }; /* a message: SUBSCRIBE "" */
	static uint8_t got[1 << 20];
	void *zctx = zmq_ctx_new(), *sub;
	char ep[64], junk[4096];
	int peer[EVS_PEERS];
	unsigned msgs = 0, seen, frames = 0, round = 0;
	uint64_t rss_a, rss_peak, t0, events0, events1, b0, b1;
	double secs;
	unsigned m0;
	uint8_t ns[PROTO_DIGEST_LEN];
	struct fq_seen seen_puts = { 0 };
	struct kc c;
	uint16_t port;
	bool closed;

	port = kvev_start("kvevents_stuck", zctx, ep, &sub, &c, ns);
	/* DRAM filled (64 MiB of 4 KiB chunks) before the measure */
	for (unsigned i = 0; i < 24; i++) {
		char prefix[16];
		snprintf(prefix, sizeof(prefix), "w%02u-", i);
		frame_puts(&c, ns, 1024, 1024, 0, prefix, &seen_puts);
	}
	ev_drain(sub, got, sizeof(got), 500, &msgs);
	tsrv_sleep_ms(300);
	rss_a = tsrv_rss(srv.pid);
	rss_peak = rss_a;
	events0 = stat_of("events.queued");

	for (unsigned i = 0; i < EVS_PEERS; i++) {
		struct sockaddr_in me = { .sin_family = AF_INET }, sa = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rb = 4096;
		T_ASSERT(fd >= 0);
		T_EQ_INT(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb)), 0);
		me.sin_addr.s_addr = htonl(0x7f000002u); /* 127.0.0.2 */
		T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
		sa.sin_port = htons(port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		T_ASSERT(send_for(fd, zmtp_sub_hello, sizeof(zmtp_sub_hello), 1000) ==
			 (int64_t)sizeof(zmtp_sub_hello));
		/* the server's greeting and READY, then our subscription */
		T_ASSERT(recv_for(fd, junk, 64 + 27, 2000, &closed) >= 64);
		T_ASSERT(send_for(fd, subscribe, sizeof(subscribe), 1000) ==
			 (int64_t)sizeof(subscribe));
		peer[i] = fd;
	}
	tsrv_sleep_ms(300); /* the subscriptions reach the publisher */

	b0 = stat_of("events.batches");
	m0 = msgs;
	t0 = tsrv_now_ns();
	/* EVS_SECS, and on until 300,000 events (a loaded machine puts
	 * slower: 294,912 in 6 s beside three builds), 4 x EVS_SECS at most */
	for (;;) {
		uint64_t r, el = tsrv_now_ns() - t0;
		if (el >= 4 * EVS_SECS * 1000000000ull ||
		    (el >= EVS_SECS * 1000000000ull &&
		     stat_of("events.queued") - events0 >= 300000))
			break;
		evs_puts(&c, ns, round++);
		frames += EVS_PIPE;
		r = tsrv_rss(srv.pid);
		if (r > rss_peak)
			rss_peak = r;
		/* the router reads along, as a router does */
		ev_drain(sub, got, sizeof(got), 5, &msgs);
	}
	events1 = stat_of("events.queued");
	secs = (double)(tsrv_now_ns() - t0) / 1e9;
	ev_drain(sub, got, sizeof(got), 500, &msgs);
	b1 = stat_of("events.batches");
	printf("kvevents_stuck: %u peers subscribed, reading nothing; %u frames of 1,024 puts "
	       "in %.1f s (%" PRIu64 " events): RSS %" PRIu64 " -> peak %" PRIu64 " MiB; the "
	       "router reading along got %u of %" PRIu64 " messages\n", EVS_PEERS, frames,
	       secs, events1 - events0, rss_a >> 20, rss_peak >> 20, msgs - m0, b1 - b0);
	for (unsigned i = 0; i < EVS_PEERS; i++)
		close(peer[i]);

	/* The router is served. */
	ev_drain(sub, got, sizeof(got), 1000, &msgs);
	ev_put_keys(&c, ns, "stuck-ev-key-");
	seen = ev_count(got, ev_drain(sub, got, sizeof(got), 1000, &msgs), "stuck-ev-key-");
	printf("kvevents_stuck: after: router got %u of %u blocks\n", seen, EV_KEYS);
	T_GE_INT(events1 - events0, 300000);
	/* a router that reads keeps up (5,202 of 5,202 seen, 4,294 of 4,355;
	 * TSan 3,481 of 3,489): at most a quarter lost to the load of a
	 * shared machine */
	T_GE_INT((uint64_t)(msgs - m0) * 4, (b1 - b0) * 3);
	T_LE_INT(rss_peak, rss_a + (48u << 20));
	T_EQ_INT(seen, EV_KEYS);
	zmq_close(sub);
	kc_close(&c);
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_subs (redbin): one raw peer finishes ZMTP's handshake and
 * subscribes to 3,072 distinct topics of 1,000 bytes (3 MB sent) while a
 * tenant puts a block at a time.  libzmq kept each as a path of its
 * subscription trie, ~32 bytes a byte, until the peer left: kvtierd grew
 * ~32 KiB a subscription (100,000: 3.2 GiB, kept after the peer left),
 * outside every budget.  Now a bound socket is an XPUB whose topics the
 * publisher counts by peer address, and past KVEVENTS_SUBS_MAX (64) the
 * peers of that address are let go (events.sub_resets): the flooder
 * reconnects and is let go again, kvtierd stays flat, the router from the
 * flooder's address (127.0.0.1) is let go with it and, reconnected by
 * libzmq, gets its events, and a router from another address (127.0.0.2)
 * keeps its connection and hears every event put during the flood (before,
 * every peer of the socket was let go at each reset).
 */

#define EVB_SUBS 3072u
#define EVB_TOPIC 1000u

static int evb_peer(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char junk[128];
	bool closed;

	T_ASSERT(fd >= 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send_for(fd, zmtp_sub_hello, sizeof(zmtp_sub_hello), 1000) !=
		    (int64_t)sizeof(zmtp_sub_hello) ||
	    recv_for(fd, junk, 64 + 27, 2000, &closed) < 64) {
		close(fd); /* let go a moment ago: bound again soon */
		return -1;
	}
	return fd;
}

static void phase_kvevents_subs(void)
{
	static uint8_t got[1 << 20], got2[1 << 20], msg[9 + 1 + EVB_TOPIC];
	void *zctx = zmq_ctx_new(), *sub, *sub2;
	char ep[64], ep2[96];
	unsigned msgs = 0, msgs2 = 0, seen, seen2, nsubs = 0, peers = 0, round = 0;
	size_t n2 = 0;
	uint64_t rss_a, rss_peak, t0, resets;
	uint8_t ns[PROTO_DIGEST_LEN], v[16] = { 7 };
	struct iovec part = { v, sizeof(v) };
	struct kc c;
	uint16_t port;
	int fd = -1;

	port = kvev_start("kvevents_subs", zctx, ep, &sub, &c, ns);
	/* the other router: source address;endpoint */
	snprintf(ep2, sizeof(ep2), "tcp://127.0.0.2:0;127.0.0.1:%u", port);
	sub2 = ev_sub(zctx, ep2);
	ev_drain(sub, got, sizeof(got), 300, &msgs);
	ev_drain(sub2, got2, sizeof(got2), 0, &msgs2);
	rss_a = rss_peak = tsrv_rss(srv.pid);
	/* a message frame (long: 8-byte size): SUBSCRIBE a topic */
	msg[0] = 0x02;
	for (unsigned i = 0; i < 8; i++)
		msg[1 + i] = (uint8_t)((uint64_t)(1 + EVB_TOPIC) >> (8 * (7 - i)));
	msg[9] = 0x01;
	memset(msg + 10, 'T', EVB_TOPIC);
	t0 = tsrv_now_ns();
	while (nsubs < EVB_SUBS && tsrv_now_ns() - t0 < 20000000000ull) {
		struct kvt_key k;
		char name[32];
		uint64_t r;
		if (fd < 0 && (fd = evb_peer(port)) >= 0)
			peers++;
		for (unsigned i = 0; i < 32 && fd >= 0; i++, nsubs++) {
			snprintf((char *)msg + 10, 11, "%010u", nsubs);
			msg[20] = 'T';
			if (send_for(fd, msg, sizeof(msg), 50) != (int64_t)sizeof(msg)) {
				close(fd);
				fd = -1;
			}
		}
		/* an event, so that the publisher sends (and libzmq applies
		 * what the peer sent; a socket let go is bound again then) */
		snprintf(name, sizeof(name), "evb-%u", round++);
		kvt_key_set(&k, name, strlen(name));
		T_RC(kc_put(&c, ns, &k, &part, 1, NULL), KVT_OK);
		r = tsrv_rss(srv.pid);
		if (r > rss_peak)
			rss_peak = r;
		ev_drain(sub, got, sizeof(got), 1, &msgs);
		n2 += ev_drain(sub2, got2 + n2, sizeof(got2) - n2, 0, &msgs2);
	}
	if (fd >= 0)
		close(fd);
	tsrv_sleep_ms(300);
	n2 += ev_drain(sub2, got2 + n2, sizeof(got2) - n2, 300, &msgs2);
	/* each put's BlockStored names its key: "evb-<round>" */
	seen2 = ev_count(got2, n2, "evb-");
	resets = stat_opt("events.sub_resets");
	printf("kvevents_subs: %u subscriptions of %u bytes in %.1f s on %u connections: RSS %"
	       PRIu64 " -> peak %" PRIu64 " MiB; events.sub_resets %" PRIu64 ", %" PRIu64
	       " taken\n", nsubs, EVB_TOPIC, (double)(tsrv_now_ns() - t0) / 1e9, peers,
	       rss_a >> 20, rss_peak >> 20, resets, stat_opt("events.subscriptions"));
	/* The router, let go too, is connected again (libzmq's reconnect,
	 * once a send has bound the socket again) and served. */
	for (unsigned i = 0, m0 = msgs; i < 40 && msgs == m0; i++) {
		struct kvt_key k;
		char name[32];
		snprintf(name, sizeof(name), "evb-after-%u", i);
		kvt_key_set(&k, name, strlen(name));
		T_RC(kc_put(&c, ns, &k, &part, 1, NULL), KVT_OK);
		ev_drain(sub, got, sizeof(got), 50, &msgs);
	}
	/* Back, it hears a whole round of EV_KEYS puts -- not always the
	 * first: libzmq reads the flood's last subscriptions as late as the
	 * sends after it, and they may let the address go once more (CI,
	 * 2026-12-06: the router back for one message, let go again, heard
	 * 0 of 10 after it). */
	unsigned rounds = 0;
	for (seen = 0; rounds < 20 && seen < EV_KEYS; rounds++) {
		char what[32];
		snprintf(what, sizeof(what), "subs-ev-key-%u-", rounds);
		ev_put_keys(&c, ns, what);
		seen = ev_count(got, ev_drain(sub, got, sizeof(got), 500, &msgs), what);
	}
	printf("kvevents_subs: after: router got %u of %u blocks (round %u)\n", seen, EV_KEYS,
	       rounds);
	printf("kvevents_subs: the router from 127.0.0.2 heard %u of the flood's %u blocks "
	       "(%u messages)\n", seen2, round, msgs2);
	T_GE_INT(nsubs, EVB_SUBS);
	T_GE_INT(seen2, round);
	/* before: ~32 KiB a subscription, +98 MiB (release).  Since the
	 * publisher reads subscriptions as they come (session 40) it takes
	 * nearly all the flooder sends before each reset (~2,600-2,900 of
	 * ~3,080, ~75 a connection): release +14 MiB, but ASan's quarantine
	 * keeps each let-go connection's freed trie a while, +42-71 MiB
	 * (the ASan allocator's redzones would take the uncapped flood far
	 * past the ASan bound). */
#ifdef HOSTILE_ASAN
	T_LE_INT(rss_peak, rss_a + (112u << 20));
#else
	T_LE_INT(rss_peak, rss_a + (64u << 20));
#endif
	T_GE_INT(resets, EVB_SUBS / 64 / 4); /* each peer sends ~128 before it sees */
	T_EQ_INT(seen, EV_KEYS);
	T_RC(kc_ping(&c), 0);
	zmq_close(sub);
	zmq_close(sub2);
	kc_close(&c);
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_share (session 37): one tenant's burst of puts fills the
 * KV-events queue (events.queue_max 256 here, a batch every 200 ms) while
 * another tenant puts 10 blocks, each after 1,024 of the first's: every one of the
 * other's reaches its feed, and what was dropped is the flooder's,
 * counted as its quota group's (events.<g>.dropped).  Before, the queue
 * was every tenant's: full of alice's events, it dropped bob's blocks.
 */
static void phase_kvevents_share(void)
{
	const char *extra[] = { "--ssd", "0", "--set", "events.batch_ms=200", "--set",
				"events.queue_max=256", NULL };
	const char *who[2] = { "alice", "bob" };
	char text[2000], ep[2][700], name[48];
	void *zctx = zmq_ctx_new(), *sub;
	static uint8_t got[1 << 20];
	unsigned msgs = 0, own, other;
	size_t n = 0;
	uint64_t group[2], dropped[2];
	struct kc c[2];
	uint8_t ns[2][PROTO_DIGEST_LEN], v[256];

	for (int t = 0; t < 2; t++)
		snprintf(ep[t], sizeof(ep[t]), "ipc://%s/%s.events", base, who[t]);
	snprintf(text, sizeof(text), "alice " SECRET_ALICE " tenant events=%s\n"
		 "bob " SECRET_ALICE " tenant events=%s\n"
		 "admin " SECRET_ADMIN " admin\n", ep[0], ep[1]);
	start_with("kvevents_share", extra, text);
	sub = ev_sub(zctx, ep[1]);
	for (int t = 0; t < 2; t++) {
		T_RC(kc_dial(&c[t], srv.port, who[t], SECRET_ALICE), 0);
		T_RC(kc_register(&c[t], &desc, ns[t], NULL, 0), KVT_OK);
		T_RC(kc_stat(&c[t], PROTO_SCOPE_TENANT, "tenant.quota_group", &group[t]), 0);
	}
	tsrv_sleep_ms(300); /* the subscription reaches the publisher */
	for (int i = 0; i < EV_KEYS; i++) {
		struct kvt_key k;
		struct iovec p = { v, sizeof(v) };
		/* alice's 1,024 puts (and the evictions they make), then one
		 * of bob's: the queue full of hers (256 a batch).  bob's
		 * events of a batch, his puts and the evictions of his blocks,
		 * stay under the 64 a batch may push out. */
		struct fq_seen seen = { 0 };
		snprintf(name, sizeof(name), "alice-sh%d-", i);
		frame_puts(&c[0], ns[0], 1024, 1024, 0, name, &seen);
		snprintf(name, sizeof(name), "bob-share-key-%d", i);
		kvt_key_set(&k, name, strlen(name));
		tsrv_fill(v, sizeof(v), (uint32_t)i);
		T_RC(kc_put(&c[1], ns[1], &k, &p, 1, NULL), KVT_OK);
		n += ev_drain(sub, got + n, sizeof(got) - n, 5, &msgs);
	}
	n += ev_drain(sub, got + n, sizeof(got) - n, 500, &msgs);
	/* each of his blocks stored (alice's puts may evict some: those
	 * are reported too) */
	own = 0;
	for (int i = 0; i < EV_KEYS; i++) {
		snprintf(name, sizeof(name), "bob-share-key-%d", i);
		own += ev_count(got, n, name) > 0;
	}
	for (int t = 0; t < 2; t++) {
		snprintf(name, sizeof(name), "events.%" PRIu64 ".dropped", group[t]);
		dropped[t] = stat_opt(name);
	}
	other = ev_count(got, n, "alice-sh");
	printf("kvevents_share: alice (group %" PRIu64 ") put %u, %" PRIu64 " of her events "
	       "dropped, none on bob's feed (%u); bob's feed named %u of his %u blocks; bob's events dropped %" PRIu64
	       "; events.dropped %" PRIu64 "\n", group[0], EV_KEYS * 1024, dropped[0], other, own,
	       EV_KEYS, dropped[1], stat_of("events.dropped"));
	T_EQ_INT(own, EV_KEYS);
	T_EQ_INT(other, 0);
	T_ASSERT(dropped[0] > 0);
	T_EQ_U64(dropped[1], 0);
	T_EQ_U64(dropped[0], stat_of("events.dropped"));
	zmq_close(sub);
	for (int t = 0; t < 2; t++)
		kc_close(&c[t]);
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * kvevents_metrics (session 37): the KV-events counters on /metrics.  A
 * burst of alice's puts (2,048 in frames of 1,024) overflows the events
 * queue (events.queue_max 256, a batch every 200 ms); once the publisher
 * is idle, the page (read strictly, tests/lib/tprom.h) has every events.*
 * counter of STATS as kvtier_events_*, and alice's drops as
 * kvtier_events_tenant_dropped_total{tenant="alice"}, equal to her quota
 * group's events.<g>.dropped; bob, who dropped none, has no series.
 * Before, /metrics had none of them: a KV-aware router's feed could lose
 * events and no dashboard showed it.  Each tenant's own STATS has them as
 * tenant.events_dropped (alice's the same, bob's 0) and its feed's
 * tenant.events_sub_resets (before session 40: no such rows).
 */
static void phase_kvevents_metrics(void)
{
	static const char *const stats[] = {
		"queued", "dropped", "share_dropped", "batches", "send_errors", "bytes", "refused",
		"replay_kept", "replay_kept_bytes", "replay_requests", "replay_messages",
	};
	static const char *const metrics[] = {
		"kvtier_events_queued_total", "kvtier_events_dropped_total",
		"kvtier_events_share_dropped_total", "kvtier_events_batches_total",
		"kvtier_events_send_errors_total", "kvtier_events_bytes_total",
		"kvtier_events_refused_total", "kvtier_events_replay_kept",
		"kvtier_events_replay_kept_bytes", "kvtier_events_replay_requests_total",
		"kvtier_events_replay_messages_total",
	};
	enum { N = sizeof(stats) / sizeof(stats[0]) };
	const char *extra[] = { "--ssd", "0", "--metrics", "127.0.0.1:0", "--set",
				"events.batch_ms=200", "--set", "events.queue_max=256",
				"--resp", "127.0.0.1:0", NULL };
	char text[2000], ep[2][700], name[64], *page = NULL, info[2048], want[64];
	uint64_t before[N + 1], after[N + 1], group;
	struct fq_seen seen = { 0 };
	uint8_t ns[PROTO_DIGEST_LEN];
	unsigned samples = 0, tries;
	uint16_t mport;
	struct kc c;

	snprintf(ep[0], sizeof(ep[0]), "ipc://%s/alice.events", base);
	snprintf(ep[1], sizeof(ep[1]), "ipc://%s/bob.events", base);
	snprintf(text, sizeof(text), "alice " SECRET_ALICE " tenant events=%s\n"
		 "bob " SECRET_ALICE " tenant events=%s\n"
		 "admin " SECRET_ADMIN " admin\n", ep[0], ep[1]);
	start_with("kvevents_metrics", extra, text);
	mport = tsrv_listener_port(srv.log, "metrics");
	group = login_group(&c, "alice", SECRET_ALICE, ns);
	frame_puts(&c, ns, 2048, 1024, 0, "alice-em-", &seen);
	kc_close(&c);
	snprintf(name, sizeof(name), "events.%" PRIu64 ".dropped", group);
	/* The publisher drains the queue a batch each 200 ms: the counters
	 * read the same before and after the scrape once it is done (they
	 * only grow, so the page's are those too). */
	for (tries = 0; tries < 40; tries++) {
		tsrv_sleep_ms(100);
		for (size_t i = 0; i < N; i++) {
			char st[48];
			snprintf(st, sizeof(st), "events.%s", stats[i]);
			before[i] = stat_of(st);
		}
		before[N] = stat_opt(name);
		free(page);
		page = tsrv_http_body(mport, "/metrics");
		for (size_t i = 0; i < N; i++) {
			char st[48];
			snprintf(st, sizeof(st), "events.%s", stats[i]);
			after[i] = stat_of(st);
		}
		after[N] = stat_opt(name);
		if (memcmp(before, after, sizeof(before)) == 0 && after[3] > 0)
			break; /* still, and a batch sent */
	}
	T_ASSERT(tries < 40);
	samples = t_prom_check(page);
	for (size_t i = 0; i < N; i++)
		T_EQ_U64(tsrv_metric(page, metrics[i]), after[i]);
	T_ASSERT(after[1] > 0); /* events.dropped */
	T_ASSERT(after[N] > 0);
	T_EQ_U64(tsrv_metric(page, "kvtier_events_tenant_dropped_total{tenant=\"alice\"}"),
		 after[N]);
	T_ASSERT(strstr(page, "\n# TYPE kvtier_events_tenant_dropped_total counter\n"));
	T_ASSERT(!strstr(page, "kvtier_events_tenant_dropped_total{tenant=\"bob\"}"));
	/* Each tenant's own STATS has its drops (before: no such rows, a
	 * tenant could not tell that its feed lost events), and its feed's
	 * resets: none here. */
	for (unsigned t = 0; t < 2; t++) {
		uint64_t dropped = UINT64_MAX, resets = UINT64_MAX;
		login_group(&c, t ? "bob" : "alice", SECRET_ALICE, ns);
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.events_dropped", &dropped), 0);
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.events_sub_resets", &resets), 0);
		kc_close(&c);
		printf("kvevents_metrics: %s's STATS: tenant.events_dropped %" PRIu64
		       ", tenant.events_sub_resets %" PRIu64 "\n", t ? "bob" : "alice", dropped,
		       resets);
		T_EQ_U64(dropped, t ? 0 : after[N]);
		T_EQ_U64(resets, 0);
	}
	/* and alice's RESP INFO */
	memset(info, 0, sizeof(info));
	resp_as(tsrv_listener_port(srv.log, "RESP"), "alice", SECRET_ALICE, "INFO stats", info,
		sizeof(info) - 1);
	snprintf(want, sizeof(want), "kvtier_tenant_events_dropped:%" PRIu64 "\r\n", after[N]);
	T_ASSERT(strstr(info, want) != NULL);
	printf("kvevents_metrics: %u samples parsed; events.queued %" PRIu64 ", dropped %" PRIu64
	       " (alice's group %" PRIu64 ": %" PRIu64 "), batches %" PRIu64 ", bytes %" PRIu64
	       ": the same on /metrics (%u tries)\n", samples, after[0], after[1], group, after[N],
	       after[3], after[5], tries + 1);
	free(page);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * reload_refused, events_reuse (session 37): what follows a tenant through
 * its quota group across reloads.
 */

#define SECRET_CAROL "secret-of-carol-0123456789"

/* The burst's KV-events drops counted and the publisher idle: the
 * statistic name (events.<g>.dropped) once non-zero and the same 100 ms
 * apart, as events.batches. */
static uint64_t events_settled(const char *name)
{
	uint64_t v = 0, b = 0, pv = UINT64_MAX, pb = UINT64_MAX;

	for (int tries = 0; tries < 40; tries++) {
		tsrv_sleep_ms(100);
		v = stat_opt(name);
		b = stat_of("events.batches");
		if (v > 0 && v == pv && b == pb)
			return v;
		pv = v;
		pb = b;
	}
	T_FAIL("%s never settled (%" PRIu64 ")", name, v);
}

/* The page's series that name a tenant, without their values (the
 * requests' counts move with the test's own STATS), one a line, sorted
 * as rendered; the events drops with their values. */
static void tenant_series(const char *page, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = 0;
	for (const char *p = page; *p;) {
		const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
		const char *sp = end;
		if (*p != '#' && memmem(p, (size_t)(end - p), "tenant=\"", 8)) {
			if (strncmp(p, "kvtier_events_tenant_dropped_total", 34) != 0)
				while (sp > p && sp[-1] != ' ')
					sp--;
			T_ASSERT(n + (size_t)(sp - p) + 2 < cap);
			memcpy(out + n, p, (size_t)(sp - p));
			n += (size_t)(sp - p);
			out[n++] = '\n';
			out[n] = 0;
		}
		p = nl ? nl + 1 : end;
	}
}

/*
 * reload_refused: tenants files refused on SIGHUP -- a bad line after the
 * first tenants, a grant naming no tenant -- each dropping alice and
 * adding carol, leave the server as it was: alice and bob log in, carol
 * does not, their quota groups and quotas (STATS) and every series with
 * a tenant label (alice's KV-events drops among them) are the same, and
 * the reload is said failed; the next good file gives carol a group of
 * her own.  Before, quota groups were given while the file was parsed:
 * a check after that (a mutant: the grant check after the groups) left
 * alice's group named carol on /metrics, her drops counted as carol's.
 */
static void phase_reload_refused(void)
{
	const char *extra[] = { "--ssd", "0", "--metrics", "127.0.0.1:0", "--set",
				"events.batch_ms=200", "--set", "events.queue_max=256", NULL };
	static const char *const bad_tail[] = {
		"admin " SECRET_ADMIN " admin\nnot a tenant line at all, five words\n",
		"admin " SECRET_ADMIN " admin\ngrant bob * to nobody\n",
	};
	char good[2000], ep[700], bad[2400], name[64], before[8192], after[8192];
	char *page;
	uint64_t ga = 0, gb = 0, g = 0, q[2] = { 0 }, v = 0, dropped;
	uint8_t ns[PROTO_DIGEST_LEN];
	struct fq_seen seen = { 0 };
	uint16_t mport;
	struct kc c;

	snprintf(ep, sizeof(ep), "ipc://%s/alice.events", base);
	snprintf(good, sizeof(good), "alice " SECRET_ALICE " tenant dram=8M events=%s\n"
		 "bob " SECRET_BOB " tenant dram=4M\n"
		 "admin " SECRET_ADMIN " admin\n", ep);
	start_with("reload_refused", extra, good);
	mport = tsrv_listener_port(srv.log, "metrics");
	ga = login_group(&c, "alice", SECRET_ALICE, ns);
	frame_puts(&c, ns, 2048, 1024, 0, "alice-rr-", &seen);
	kc_close(&c);
	gb = login_group(&c, "bob", SECRET_BOB, ns);
	kc_close(&c);
	snprintf(name, sizeof(name), "events.%" PRIu64 ".dropped", ga);
	dropped = events_settled(name);
	page = tsrv_http_body(mport, "/metrics");
	tenant_series(page, before, sizeof(before));
	T_EQ_U64(tsrv_metric(page, "kvtier_events_tenant_dropped_total{tenant=\"alice\"}"),
		 dropped);
	free(page);
	snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_limit", ga);
	T_EQ_U64(stat_of(name), 8u << 20);
	snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_limit", gb);
	T_EQ_U64(stat_of(name), 4u << 20);
	for (size_t i = 0; i < sizeof(bad_tail) / sizeof(bad_tail[0]); i++) {
		/* carol first: were groups given while parsing, alice's would
		 * be hers (alice's given back, carol the first new name). */
		snprintf(bad, sizeof(bad), "carol " SECRET_CAROL " tenant dram=1M events=%s\n"
			 "bob " SECRET_BOB " tenant dram=2M\n%s", ep, bad_tail[i]);
		reload_wait(bad, "tenants file refused");
		T_EQ_U64(stat_of("server.tenants_reload_ok"), 0);
		T_ASSERT(kc_dial(&c, srv.port, "carol", SECRET_CAROL) != 0);
		T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &g), 0);
		T_EQ_U64(g, ga);
		kc_close(&c);
		T_RC(kc_dial(&c, srv.port, "bob", SECRET_BOB), 0);
		T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &g), 0);
		T_EQ_U64(g, gb);
		kc_close(&c);
		snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_limit", ga);
		q[0] = stat_of(name);
		snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_limit", gb);
		q[1] = stat_of(name);
		T_EQ_U64(q[0], 8u << 20);
		T_EQ_U64(q[1], 4u << 20);
		snprintf(name, sizeof(name), "events.%" PRIu64 ".dropped", ga);
		T_EQ_U64(stat_opt(name), dropped);
		page = tsrv_http_body(mport, "/metrics");
		tenant_series(page, after, sizeof(after));
		if (strcmp(before, after) != 0)
			T_FAIL("file %zu: series before:\n%safter:\n%s", i, before, after);
		T_EQ_U64(tsrv_metric(page, "kvtier_tenants_last_reload_successful"), 0);
		free(page);
	}
	/* The next good file: carol in, alice out; carol's group neither
	 * alice's (given back only now) nor bob's, alice's drops not hers. */
	snprintf(bad, sizeof(bad), "bob " SECRET_BOB " tenant dram=4M\n"
		 "carol " SECRET_CAROL " tenant dram=1M\nadmin " SECRET_ADMIN " admin\n"
		 "alice " SECRET_ALICE " tenant dram=8M events=%s\n", ep);
	reload(bad);
	T_RC(kc_dial(&c, srv.port, "carol", SECRET_CAROL), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &v), 0);
	kc_close(&c);
	T_ASSERT(v != ga && v != gb && v != 0);
	page = tsrv_http_body(mport, "/metrics");
	T_EQ_U64(tsrv_metric(page, "kvtier_tenants_last_reload_successful"), 1);
	T_EQ_U64(tsrv_metric(page, "kvtier_events_tenant_dropped_total{tenant=\"alice\"}"),
		 dropped);
	T_ASSERT(!strstr(page, "kvtier_events_tenant_dropped_total{tenant=\"carol\"}"));
	free(page);
	printf("reload_refused: alice (group %" PRIu64 ", %" PRIu64 " events dropped) and bob "
	       "(group %" PRIu64 ") unchanged by 2 refused files; carol then group %" PRIu64
	       "\n%s", ga, dropped, gb, v, before);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/*
 * events_reuse: alice drops KV events (a burst past events.queue_max);
 * a reload removes her and adds carol, who is given alice's quota group.
 * carol's kvtier_events_tenant_dropped_total is absent (none of hers),
 * as her kvtier_tenant_* counters start at 0; after a burst of her own
 * it counts hers alone, events.<g>.dropped less alice's.  Before, carol's
 * series appeared at once with alice's count.
 */
/* events_settled on /metrics (port mport): series once non-zero and the
 * same 100 ms apart, as kvtier_events_batches_total. */
static uint64_t metric_settled(uint16_t mport, const char *series)
{
	uint64_t v = 0, b = 0, pv = UINT64_MAX, pb = UINT64_MAX;

	for (int tries = 0; tries < 40; tries++) {
		char *page;
		tsrv_sleep_ms(100);
		page = tsrv_http_body(mport, "/metrics");
		v = tsrv_metric(page, series);
		b = tsrv_metric(page, "kvtier_events_batches_total");
		free(page);
		if (v > 0 && v == pv && b == pb)
			return v;
		pv = v;
		pb = b;
	}
	T_FAIL("%s never settled (%" PRIu64 ")", series, v);
}

static void phase_events_reuse(void)
{
	const char *extra[] = { "--ssd", "0", "--metrics", "127.0.0.1:0", "--set",
				"events.batch_ms=200", "--set", "events.queue_max=256", NULL };
	char text[2000], ep[2][700], *page, *t;
	uint64_t ga = 0, gc = 0, alice_drops, all_drops;
	uint8_t ns[PROTO_DIGEST_LEN];
	struct fq_seen seen = { 0 };
	uint16_t mport;
	struct kc c;

	snprintf(ep[0], sizeof(ep[0]), "ipc://%s/alice.events", base);
	snprintf(ep[1], sizeof(ep[1]), "ipc://%s/carol.events", base);
	/* With every group given, alice's drained (her clear) and the
	 * lowest, carol is given alice's (group_drain: not while another is
	 * free and drained). */
	snprintf(text, sizeof(text), "alice " SECRET_ALICE " tenant events=%s\n", ep[0]);
	groups_exhaust("events_reuse", extra, text, &mport);
	ga = login_group(&c, "alice", SECRET_ALICE, ns);
	frame_puts(&c, ns, 2048, 1024, 0, "alice-er-", &seen);
	{
		uint64_t removed = 0;
		T_RC(kc_clear(&c, PROTO_SCOPE_NS, ns, NULL, &removed), 0);
	}
	kc_close(&c);
	/* STATS ALL, past 1024 items with 1022 groups, is too long for the
	 * test client: the drops are read on /metrics, all of them alice's
	 * (events.<g>.dropped = kvtier_events_dropped_total). */
	alice_drops = metric_settled(mport, "kvtier_events_dropped_total");
	page = tsrv_http_body(mport, "/metrics");
	T_EQ_U64(tsrv_metric(page, "kvtier_events_tenant_dropped_total{tenant=\"alice\"}"),
		 alice_drops);
	free(page);

	snprintf(text, sizeof(text), "carol " SECRET_CAROL " tenant events=%s\n", ep[1]);
	t = tenants_filled(text, 1);
	reload(t);
	free(t);
	T_RC(kc_dial(&c, srv.port, "carol", SECRET_CAROL), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &gc), 0);
	T_EQ_U64(gc, ga); /* alice's group, given back, is carol's */
	page = tsrv_http_body(mport, "/metrics");
	t_prom_check(page);
	T_EQ_U64(tsrv_metric(page, "kvtier_events_dropped_total"), alice_drops);
	T_ASSERT(!strstr(page, "kvtier_events_tenant_dropped_total{tenant=\"carol\"}"));
	T_ASSERT(!strstr(page, "kvtier_events_tenant_dropped_total{tenant=\"alice\"}"));
	T_EQ_U64(tsrv_metric(page, "kvtier_tenant_requests_total{tenant=\"carol\"}"), 1);
	free(page);

	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	frame_puts(&c, ns, 2048, 1024, 0, "carol-er-", &seen);
	kc_close(&c);
	all_drops = metric_settled(mport, "kvtier_events_dropped_total");
	T_ASSERT(all_drops > alice_drops);
	page = tsrv_http_body(mport, "/metrics");
	T_EQ_U64(tsrv_metric(page, "kvtier_events_tenant_dropped_total{tenant=\"carol\"}"),
		 all_drops - alice_drops);
	free(page);
	printf("events_reuse: group %" PRIu64 ": alice dropped %" PRIu64 ", then carol %" PRIu64
	       " (events.%" PRIu64 ".dropped %" PRIu64 "): carol's series counts hers alone\n",
	       ga, alice_drops, all_drops - alice_drops, ga, all_drops);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * group_drain: a removed tenant's blocks still in DRAM stay charged to its
 * quota group until they leave; that group given at once to the next new
 * tenant had the new tenant count them against its dram= limit and see
 * them in its tenant.dram_bytes (the old tenant's cache use).  Now a new
 * tenant is given a group never given while there is one, else a free
 * group holding no DRAM bytes.  alice puts 10 blocks; a reload replaces
 * her by carol, whose group must hold none of them.
 */
static void phase_group_drain(void)
{
	const char *extra[] = { "--ssd", "0", NULL };
	const char *text0 = "admin " SECRET_ADMIN " admin\n"
			    "alice " SECRET_ALICE " tenant dram=1M\n";
	const char *text1 = "admin " SECRET_ADMIN " admin\n"
			    "carol " SECRET_CAROL " tenant dram=1M\n";
	uint64_t ga = 0, gc = 0, da = 0, dc = 1;
	uint8_t ns[PROTO_DIGEST_LEN];
	char name[64];
	struct kc c;

	start_with("group_drain", extra, text0);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	ev_put_keys(&c, ns, "alice-gd-");
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &ga), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.dram_bytes", &da), 0);
	kc_close(&c);
	T_GE_INT(da, EV_KEYS * 256);
	reload(text1);
	T_RC(kc_dial(&c, srv.port, "carol", SECRET_CAROL), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &gc), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.dram_bytes", &dc), 0);
	kc_close(&c);
	snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_bytes", ga);
	printf("group_drain: alice (group %" PRIu64 ") holds %" PRIu64 " DRAM bytes; after the "
	       "reload carol has group %" PRIu64 " with %" PRIu64 " (alice's group: %" PRIu64
	       ")\n", ga, da, gc, dc, stat_opt(name));
	T_ASSERT(gc != 0 && gc != ga);
	T_EQ_U64(dc, 0);
	T_EQ_U64(stat_opt(name), da); /* alice's blocks: still in her old group */
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * events_handover: a group given to a new tenant with the same events= /
 * events_replay= endpoints as its earlier tenant's kept the feed as it
 * was -- its socket, whose subscribers were the earlier tenant's, and its
 * replay ring, the earlier tenant's messages (block hashes).  Now the
 * feed is closed and reopened when its group changes hands.  Every group
 * given (groups_exhaust) and alice's drained, a reload replaces alice by carol on alice's group
 * and endpoints: alice's subscriber, still connected (no reconnect), gets
 * none of carol's events, and the replay from 0 none of alice's.
 */

static void phase_events_handover(void)
{
	const char *extra[] = { "--ssd", "0", "--set", "events.batch_ms=1", NULL };
	char line[2000], ep[700], rep[700], *t;
	void *zctx = zmq_ctx_new(), *old, *fresh;
	static uint8_t got[1 << 18];
	size_t n;
	unsigned msgs = 0, fmsgs = 0, rmsgs = 0, a, c_old, c_new, r_alice, r_carol;
	uint64_t ga = 0, gc = 0;
	uint8_t ns[PROTO_DIGEST_LEN];
	int no = -1;
	struct kc c;

	snprintf(ep, sizeof(ep), "ipc://%s/shared.events", base);
	snprintf(rep, sizeof(rep), "ipc://%s/shared.replay", base);
	snprintf(line, sizeof(line), "alice " SECRET_ALICE " tenant events=%s events_replay=%s\n",
		 ep, rep);
	groups_exhaust("events_handover", extra, line, NULL);
	old = zmq_socket(zctx, ZMQ_SUB); /* its connection, not a new one */
	T_ASSERT(old != NULL);
	T_EQ_INT(zmq_setsockopt(old, ZMQ_RECONNECT_IVL, &no, sizeof(no)), 0);
	T_EQ_INT(zmq_setsockopt(old, ZMQ_SUBSCRIBE, "", 0), 0);
	T_EQ_INT(zmq_connect(old, ep), 0);
	ga = login_group(&c, "alice", SECRET_ALICE, ns);
	tsrv_sleep_ms(200); /* the subscription reaches the publisher */
	ev_put_keys(&c, ns, "alice-eh-");
	{
		uint64_t removed = 0; /* her group drained: the one carol is given */
		T_RC(kc_clear(&c, PROTO_SCOPE_NS, ns, NULL, &removed), 0);
	}
	kc_close(&c);
	n = ev_drain(old, got, sizeof(got), 300, &msgs);
	a = ev_count(got, n, "alice-eh-");
	T_EQ_INT(a, EV_KEYS); /* the feed works */

	snprintf(line, sizeof(line), "carol " SECRET_CAROL " tenant events=%s events_replay=%s\n",
		 ep, rep);
	t = tenants_filled(line, 1);
	reload(t);
	free(t);
	fresh = ev_sub(zctx, ep);
	T_RC(kc_dial(&c, srv.port, "carol", SECRET_CAROL), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_TENANT, "tenant.quota_group", &gc), 0);
	T_EQ_U64(gc, ga); /* the lowest free group holding no DRAM bytes */
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	tsrv_sleep_ms(200);
	ev_put_keys(&c, ns, "carol-eh-");
	kc_close(&c);
	n = ev_drain(old, got, sizeof(got), 300, &msgs);
	c_old = ev_count(got, n, "carol-eh-");
	n = ev_drain(fresh, got, sizeof(got), 100, &fmsgs);
	c_new = ev_count(got, n, "carol-eh-");
	n = ev_replay(zctx, rep, got, sizeof(got), &rmsgs);
	r_alice = ev_count(got, n, "alice-eh-");
	r_carol = ev_count(got, n, "carol-eh-");
	printf("events_handover: group %" PRIu64 " from alice to carol, same endpoints: alice's "
	       "subscriber got %u of carol's blocks, a new one %u; replay from 0: %u messages, "
	       "%u of alice's blocks, %u of carol's\n", ga, c_old, c_new, rmsgs, r_alice,
	       r_carol);
	T_EQ_INT(c_old, 0);
	T_EQ_INT(c_new, EV_KEYS);
	T_EQ_INT(r_alice, 0);
	T_EQ_INT(r_carol, EV_KEYS);
	zmq_close(old);
	zmq_close(fresh);
	zmq_ctx_term(zctx);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * repair_table (hyg10): in a pod, every placed put is noted in the repair
 * thread's table, (namespace, key) -> (anchor, copies), ~100 bytes a
 * block, which grew outside --max-memory; an entry of an evicted block
 * stays until a pass (a change of the member list) finds it gone, so a
 * client's puts grew it without bound.  Now its array is charged; past the
 * budget it does not grow and the block is not tracked
 * (repair.untracked).  32768 placed puts of 16 bytes, --max-memory 1M.
 * (Since repair_share alice's entries stop at her share of the budget,
 * a quarter of it with the table's doubling counted: 945.)
 */

static void phase_repair_table(void)
{
	char listen_at[32], members[80];
	uint16_t p = free_tcp_port(NULL), other = free_tcp_port(NULL);
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, "--max-memory", "1M", "--dram", "192M", NULL };
	uint64_t tracked, untracked, used;
	struct fq_seen seen = { 0 };

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, other);
	start("repair_table", extra);
	placed_puts(PROTO_IF_PLACED, "rt", &seen);
	tracked = stat_of("repair.tracked");
	untracked = stat_opt("repair.untracked");
	used = stat_of("server.mem_used");
	printf("repair_table: %u placed puts (%u stored) under --max-memory 1M: %" PRIu64
	       " tracked, %" PRIu64 " not (alice at her share of it); mem_used %" PRIu64
	       " KiB\n", FQ_ITEMS, seen.ok, tracked, untracked, used >> 10);
	T_EQ_INT(seen.ok, FQ_ITEMS);
	T_GE_INT(untracked, 1);
	T_EQ_U64(tracked + untracked, FQ_ITEMS);
	T_LE_INT(used, 1u << 20);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * repair_share (redteam): in a pod, one tenant's placed puts filled the
 * repair table to the budget (repair_table) and its DELETEs, each a
 * tombstone for a minute, did the same; past the budget, or after any
 * tenant's CLEAR of its own scope, every repair copy into this server was
 * refused for a minute -- every tenant's -- and no later placed block of
 * any tenant was tracked (so none healed if its member died).  Now the
 * table's entries of one tenant (its quota group) cost at most a quarter
 * of --max-memory, and what cannot be remembered of a tenant's deletes or
 * clears refuses that tenant's repair copies only.  alice floods; rita's
 * placed puts and repair copies, after each step, must be tracked and
 * stored.
 */

#define RS_FLOOD 16384u

/* One put of key name into ns on c with flags (PLACED, REPAIR...); its
 * item status. */
static int rs_put(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const char *name,
		  uint32_t flags)
{
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
	struct proto_item it = { .flags = flags, .anchor = 1, .copies = 2, .part_count = 1 };
	uint64_t lens[1] = { FQ_LEN };
	uint8_t val[FQ_LEN];
	uint32_t crc[1];
	struct iovec d = { val, FQ_LEN };
	struct fq_seen s = { 0 };

	memset(val, 0x33, sizeof(val));
	crc[0] = kvt_crc32c(0, val, FQ_LEN);
	kvt_key_set(&it.key, name, strlen(name));
	it.part_lens = lens;
	it.part_crcs = crc;
	T_ASSERT(kc_request(c, &f, &it, 1, &d, 1) > 0);
	T_ASSERT(kc_recv_items(c, 30000, fq_item, &s, NULL) > 0);
	return s.ok ? KVT_OK : s.first_bad;
}

/* DELETEs of n keys PREFIX%05u (none of them stored), 1024 a frame. */
static void rs_deletes(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], unsigned n,
		       const char *prefix)
{
	struct proto_item *its = calloc(1024, sizeof(*its));
	T_ASSERT(its != NULL);
	for (unsigned done = 0; done < n; done += 1024) {
		struct proto_frame f = { .op = PROTO_OP_DELETE, .ns_count = 1, .ns = ns };
		struct fq_seen s = { 0 };
		for (unsigned i = 0; i < 1024; i++) {
			char name[24];
			snprintf(name, sizeof(name), "%s%05u", prefix, done + i);
			memset(&its[i], 0, sizeof(its[i]));
			kvt_key_set(&its[i].key, name, strlen(name));
		}
		T_ASSERT(kc_request(c, &f, its, 1024, NULL, 0) > 0);
		T_ASSERT(kc_recv_items(c, 30000, fq_item, &s, NULL) > 0);
	}
	free(its);
}

/* A pod of this server and a member that never answers, tenants alice,
 * rita and admin, --max-memory 4M; alice's and rita's connections, each
 * with a namespace registered. */
static void rs_start(const char *name, struct kc *a, uint8_t ans[PROTO_DIGEST_LEN], struct kc *r,
		     uint8_t rns[PROTO_DIGEST_LEN])
{
	static char listen_at[32], members[80];
	uint16_t p = free_tcp_port(NULL), other = free_tcp_port(NULL);
	const char *extra[] = { "--listen", listen_at, "--advertise", listen_at, "--members",
				members, "--max-memory", "4M", "--dram", "192M", NULL };

	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", p);
	snprintf(members, sizeof(members), "127.0.0.1:%u,127.0.0.1:%u", p, other);
	start_with(name, extra, "alice " SECRET_ALICE " tenant\n"
				"admin " SECRET_ADMIN " admin\n"
				"rita " SECRET_ALICE " tenant\n");
	T_RC(kc_dial(a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(a, &desc, ans, NULL, 0), KVT_OK);
	T_RC(kc_dial(r, srv.port, "rita", SECRET_ALICE), 0);
	T_RC(kc_register(r, &desc, rns, NULL, 0), KVT_OK);
}

static void phase_repair_share(void)
{
	uint8_t ans[PROTO_DIGEST_LEN], rns[PROTO_DIGEST_LEN];
	struct fq_seen seen = { 0 }, rseen = { 0 };
	uint64_t t0, t1, u0, u1, used;
	int clear_rc, alice_clear_rc, tomb_rc, alice_rc, ns_rc, ns_cleared_rc;
	uint8_t r2[PROTO_DIGEST_LEN];
	struct kc a, r;

	/* 1. alice clears her own scope: rita's repair copy after it */
	rs_start("repair_share", &a, ans, &r, rns);
	T_RC(kc_clear(&a, PROTO_SCOPE_TENANT, NULL, NULL, NULL), 0);
	clear_rc = rs_put(&r, rns, "rs-after-clear", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	alice_clear_rc = rs_put(&a, ans, "rs-alice-clear", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	printf("repair_share: after alice's CLEAR of her scope, rita's repair copy %d (%s), "
	       "alice's %d (%s)\n", clear_rc, kvt_strerror(clear_rc), alice_clear_rc,
	       kvt_strerror(alice_clear_rc));
	kc_close(&a);
	kc_close(&r);
	T_EQ_INT(tsrv_stop(&srv), 0);

	/* 2. alice's placed puts fill the table; then rita's (a new server:
	 * nothing refused from step 1) */
	rs_start("repair_share2", &a, ans, &r, rns);
	frame_puts(&a, ans, RS_FLOOD, FQ_FRAME, PROTO_IF_PLACED, "rsa", &seen);
	t0 = stat_of("repair.tracked");
	u0 = stat_opt("repair.untracked");
	frame_puts(&r, rns, 1024, FQ_FRAME, PROTO_IF_PLACED, "rsr", &rseen);
	t1 = stat_of("repair.tracked");
	u1 = stat_opt("repair.untracked");
	used = stat_of("server.mem_used");
	printf("repair_share: alice's %u placed puts: %" PRIu64 " tracked, %" PRIu64
	       " not; then rita's 1024: %" PRIu64 " tracked, %" PRIu64 " not; mem_used %" PRIu64
	       " KiB of 4096\n", RS_FLOOD, t0, u0, t1 - t0, u1 - u0, used >> 10);

	/* 3. alice's deletes of keys never stored: a tombstone each */
	rs_deletes(&a, ans, RS_FLOOD, "rsd");
	tomb_rc = rs_put(&r, rns, "rs-after-deletes", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	alice_rc = rs_put(&a, ans, "rs-alice-after", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	printf("repair_share: after alice's %u deletes, rita's repair copy %d (%s), alice's "
	       "%d (%s); repair.refused %" PRIu64 ", mem_used %" PRIu64 " KiB\n", RS_FLOOD,
	       tomb_rc, kvt_strerror(tomb_rc), alice_rc, kvt_strerror(alice_rc),
	       stat_opt("repair.refused"), stat_of("server.mem_used") >> 10);

	/* 4. alice clears 64 namespaces of hers one by one (each remembered
	 * in one of the server's 64 slots); then rita clears one of hers:
	 * her repair copies into another must still be taken */
	for (unsigned i = 0; i < 64; i++) {
		struct kvt_ns_desc d = desc;
		char model[32];
		uint8_t dg[PROTO_DIGEST_LEN];
		snprintf(model, sizeof(model), "rs-model-%u", i);
		d.model = model;
		T_RC(kc_register(&a, &d, dg, NULL, 0), KVT_OK);
		T_RC(kc_clear(&a, PROTO_SCOPE_NS, dg, NULL, NULL), 0);
	}
	{
		struct kvt_ns_desc d = desc;
		d.model = "rs-rita-2";
		T_RC(kc_register(&r, &d, r2, NULL, 0), KVT_OK);
		T_RC(kc_clear(&r, PROTO_SCOPE_NS, r2, NULL, NULL), 0);
	}
	ns_rc = rs_put(&r, rns, "rs-after-ns-clears", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	ns_cleared_rc = rs_put(&r, r2, "rs-into-cleared", PROTO_IF_PLACED | PROTO_IF_REPAIR);
	printf("repair_share: after alice's CLEARs of 64 namespaces and rita's of one, rita's "
	       "repair copy into another %d (%s), into the cleared one %d (%s)\n", ns_rc,
	       kvt_strerror(ns_rc), ns_cleared_rc, kvt_strerror(ns_cleared_rc));
	kc_close(&a);
	kc_close(&r);

	T_EQ_INT(clear_rc, KVT_OK);
	T_EQ_INT(alice_clear_rc, -ECANCELED); /* her own copies refused for a while */
	T_EQ_INT(seen.ok, RS_FLOOD);
	T_EQ_INT(rseen.ok, 1024);
	T_EQ_U64(t1 - t0, 1024);        /* every one of rita's blocks tracked */
	T_GE_INT(u0, 1);                /* alice past her share */
	T_LE_INT(used, 4u << 20);
	T_EQ_INT(tomb_rc, KVT_OK);
	T_EQ_INT(alice_rc, -ECANCELED);
	T_EQ_INT(ns_rc, KVT_OK);
	T_EQ_INT(ns_cleared_rc, -ECANCELED);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tomb_expiry (redteam): what a DELETE or CLEAR refuses of repair copies
 * (a tombstone, a namespace's or a tenant's clear) lasts REPAIR_TOMB_NS,
 * a minute, and is then let go, so that a key deleted once heals again.
 * That it is let go was checked by reading only; KVTD_TEST_TOMB_MS in
 * kvtierd's environment makes it 3 s here.  alice deletes a key (never
 * stored: a tombstone all the same), clears a second namespace and rita
 * clears her scope; each refuses its repair copy at once (-ECANCELED)
 * and takes it 3.5 s later.  (Timed: the first round must fall within
 * the 3 s; it takes milliseconds.)
 */

#define TE_TOMB_MS 3000u

static void phase_tomb_expiry(void)
{
	uint8_t ans[PROTO_DIGEST_LEN], rns[PROTO_DIGEST_LEN], a2[PROTO_DIGEST_LEN];
	struct kvt_ns_desc d = desc;
	int rc[2][3];
	struct kc a, r;
	char ms[16];
	uint64_t t0, first_ms = 0;

	snprintf(ms, sizeof(ms), "%u", TE_TOMB_MS);
	setenv("KVTD_TEST_TOMB_MS", ms, 1);
	rs_start("tomb_expiry", &a, ans, &r, rns);
	unsetenv("KVTD_TEST_TOMB_MS");
	d.model = "te-model-2";
	T_RC(kc_register(&a, &d, a2, NULL, 0), KVT_OK);
	t0 = tsrv_now_ns();
	rs_deletes(&a, ans, 1024, "te");
	T_RC(kc_clear(&a, PROTO_SCOPE_NS, a2, NULL, NULL), 0);
	T_RC(kc_clear(&r, PROTO_SCOPE_TENANT, NULL, NULL, NULL), 0);
	for (int round = 0; round < 2; round++) {
		if (round)
			tsrv_sleep_ms(TE_TOMB_MS + 500);
		rc[round][0] = rs_put(&a, ans, "te00007", PROTO_IF_PLACED | PROTO_IF_REPAIR);
		rc[round][1] = rs_put(&a, a2, "te-cleared", PROTO_IF_PLACED | PROTO_IF_REPAIR);
		rc[round][2] = rs_put(&r, rns, "te-rita", PROTO_IF_PLACED | PROTO_IF_REPAIR);
		if (!round)
			first_ms = (tsrv_now_ns() - t0) / 1000000;
		printf("tomb_expiry: %s: repair copy of a deleted key %d (%s), into a cleared "
		       "namespace %d (%s), into a cleared tenant %d (%s)\n",
		       round ? "after 3.5 s" : "at once", rc[round][0],
		       kvt_strerror(rc[round][0]), rc[round][1], kvt_strerror(rc[round][1]),
		       rc[round][2], kvt_strerror(rc[round][2]));
	}
	kc_close(&a);
	kc_close(&r);
	printf("tomb_expiry: the deletes, clears and first copies took %" PRIu64 " ms of the %u\n",
	       first_ms, TE_TOMB_MS);
	T_LE_INT(first_ms, TE_TOMB_MS - 500); /* else the first round proves nothing */
	for (int i = 0; i < 3; i++) {
		T_EQ_INT(rc[0][i], -ECANCELED);
		T_EQ_INT(rc[1][i], KVT_OK);
	}
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * s3_scan (attack13): an S3 listing walks the store's whole DRAM and SSD
 * indexes (kvt_scan: every tenant's entries, whatever the bucket holds),
 * once per page of 1000 keys, and DeleteBucket once.  It ran on the loop
 * thread, and one connection may pipeline 256 requests: listings of an
 * empty bucket, pipelined on two connections, held a RESP PING of another
 * client 81 ms (0.2 alone) with 2*10^5 blocks in the store.  Now a walk
 * runs on the aux thread, and a tenant has at most 2 requests that walk
 * in progress: past that 503 SlowDown (server.s3_scan_refused).  The
 * cause is measured, not a latency (doc/testing.md rule 1): the CPU time
 * the loop thread and the aux thread spend while listings run one at a
 * time, and the refusals of a pipelined burst.  Then ListParts of an
 * upload without parts, which probed 10,000 part numbers on the loop in
 * one go: now in windows of 256 across loop iterations, so a PING of
 * another connection is answered between (its median round trip, the
 * best of up to 3 rounds: rule 3).  Without --tenants (S3 unsigned;
 * everyone is tenant "default").
 */

#define SCAN_BLOCKS 250000u
#define SCAN_FRAME 1000u
#define SCAN_LISTS 600u
#define SCAN_BURST 32u
/* A PING's median round trip during ListParts, ms: 1.7-2.4 seen after
 * (ASan), 6.7 (TSan); 62-293 before (ASan); doubled under ASan
 * (HOSTILE_BESIDE) */
#define SCAN_PING_MAX_MS (20u * (unsigned)HOSTILE_BESIDE)

/* CPU time (ms) of the server's threads whose name starts with comm:
 * from schedstat (nanoseconds on a CPU) where the kernel has it, else
 * from stat's utime and stime -- clock ticks (10 ms) sampled, which for a
 * thread running in bursts of microseconds made resp_reparse's figures
 * of 60-150 ms for the same bytes, its ratio 0.5-2.2 (bound 3) at load
 * 13 (as test_hostile_http.py loop_cpu_s). */
static uint64_t thread_cpu_ms(const char *comm)
{
	char path[384], buf[1024];
	uint64_t total = 0, total_ns = 0;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)srv.pid);
	d = opendir(path);
	T_ASSERT(d != NULL);
	while ((e = readdir(d))) {
		FILE *f;
		size_t n;
		char *p;
		unsigned long long ut = 0, st = 0;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)srv.pid, e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		/* pid (comm) state ... field 14 utime, 15 stime */
		p = strchr(buf, '(');
		if (!p || strncmp(p + 1, comm, strlen(comm)) != 0 || !(p = strrchr(buf, ')')))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)srv.pid,
			 e->d_name);
		if ((f = fopen(path, "r"))) {
			unsigned long long ns;
			int got = fscanf(f, "%llu", &ns);
			fclose(f);
			if (got == 1) {
				total_ns += ns;
				continue;
			}
		}
		if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			   &st) == 2)
			total += (ut + st) * 1000u / (uint64_t)sysconf(_SC_CLK_TCK);
	}
	closedir(d);
	return total + total_ns / 1000000u;
}

/* CPU time (ns) the server's process has run: its CPU clock, exact to
 * the call (schedstat, above, lags a running thread up to a tick).  A
 * request timed in it counts the work the server did before answering
 * it, which a loaded machine does not stretch as it stretches the wall
 * time (stats_flood, resp_hello: p50s of 1-5 ms against bounds of 5-10
 * at load 8, 2026-12-07). */
static uint64_t srv_cpu_ns(void)
{
	clockid_t ck;
	struct timespec ts;

	T_EQ_INT(clock_getcpuclockid(srv.pid, &ck), 0);
	T_EQ_INT(clock_gettime(ck, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Read one HTTP answer (head and Content-Length body) from fd, through
 * the carry-over buffer buf (len bytes in it): its status, 0 if the
 * connection closed or nothing came within 30 s. */
static int http_answer(int fd, char *buf, size_t cap, size_t *len)
{
	uint64_t end = tsrv_now_ns() + 30000000000ull;

	for (;;) {
		char *eoh = memmem(buf, *len, "\r\n\r\n", 4);
		if (eoh) {
			size_t head = (size_t)(eoh + 4 - buf), body = 0;
			char *cl = memmem(buf, head, "Content-Length: ", 16);
			int status = atoi(buf + 9);
			if (cl)
				body = strtoul(cl + 16, NULL, 10);
			if (*len >= head + body) {
				memmove(buf, buf + head + body, *len - head - body);
				*len -= head + body;
				return status;
			}
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;
		if (tsrv_now_ns() > end || *len + 1 >= cap)
			return 0;
		if (poll(&p, 1, 1000) <= 0)
			continue;
		r = recv(fd, buf + *len, cap - *len, 0);
		if (r <= 0)
			return 0;
		*len += (size_t)r;
	}
}


/* ListParts of one upload, two pipelined at a time on one connection,
 * until told to stop. */
struct parts_flood {
	uint16_t port;
	char upload[64];
	_Atomic bool stop;
	unsigned answered, bad;
};

static void *parts_flood_run(void *arg)
{
	struct parts_flood *pf = arg;
	static char buf[1 << 16];
	char req[256];
	size_t len = 0;
	int fd = tcp_connect(pf->port), n;

	n = snprintf(req, sizeof(req), "GET /scanbkt/mp?uploadId=%s HTTP/1.1\r\nHost: x\r\n\r\n"
		     "GET /scanbkt/mp?uploadId=%s HTTP/1.1\r\nHost: x\r\n\r\n", pf->upload,
		     pf->upload);
	while (!atomic_load(&pf->stop)) {
		T_EQ_INT(send_for(fd, req, (size_t)n, 5000), (int64_t)n);
		for (int i = 0; i < 2; i++) {
			if (http_answer(fd, buf, sizeof(buf), &len) == 200)
				pf->answered++;
			else
				pf->bad++;
		}
	}
	close(fd);
	return NULL;
}

/* A server of argv (phase name), SCAN_BLOCKS small blocks in namespace ns
 * (keys prefix...) put through c (logged in, left open), and the S3
 * bucket scanbkt: the S3 port; the bucket's connection is fd, its
 * carry-over buffer buf (len bytes in it). */
static uint16_t scan_server(const char *name, const char *const *argv, uint8_t *ns,
			    const char *prefix, struct kc *c, int *fd, char *buf, size_t cap,
			    size_t *len)
{
	char dir[700];
	struct fq_seen seen = { 0 };
	uint16_t port;

	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	tsrv_start(&srv, bin, base, dir, NULL, argv);
	port = tsrv_listener_port(srv.log, "S3");
	T_RC(kc_connect_unix(c, srv.sock), 0);
	T_RC(kc_login(c, "default", NULL), 0);
	T_RC(kc_register(c, &desc, ns, NULL, 0), KVT_OK);
	frame_puts(c, ns, SCAN_BLOCKS, SCAN_FRAME, 0, prefix, &seen);
	T_EQ_INT(seen.ok, SCAN_BLOCKS);
	*fd = tcp_connect(port);
	snprintf(buf, cap, "PUT /scanbkt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
	T_EQ_INT(send_for(*fd, buf, strlen(buf), 5000), (int64_t)strlen(buf));
	T_EQ_INT(http_answer(*fd, buf, cap, len), 200);
	return port;
}

static void phase_s3_scan(void)
{
	const char *argv[] = { "--s3", "127.0.0.1:0", "--threads", "1", "--ssd", "0", "--dram",
			       "512M", "--max-memory", "64M", NULL };
	static const char list[] = "GET /scanbkt?list-type=2 HTTP/1.1\r\nHost: x\r\n\r\n";
	static char buf[1 << 16];
	uint64_t t0, loop0, aux0, loop_ms, aux_ms, refused;
	uint8_t ns[PROTO_DIGEST_LEN];
	unsigned ok = 0, slow = 0, other = 0;
	char *burst;
	size_t len = 0;
	struct kc c;
	struct parts_flood pf = { 0 };
	uint64_t best = UINT64_MAX;
	uint16_t port;
	int fd;

	/* The store: SCAN_BLOCKS small blocks in another namespace. */
	port = scan_server("s3_scan", argv, ns, "sc", &c, &fd, buf, sizeof(buf), &len);
	kc_close(&c);

	/* Listings of the empty bucket one at a time: where do the walks run? */
	loop0 = thread_cpu_ms("kvtd-loop");
	aux0 = thread_cpu_ms("kvtd-aux");
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < SCAN_LISTS; i++) {
		T_EQ_INT(send_for(fd, list, strlen(list), 5000), (int64_t)strlen(list));
		T_EQ_INT(http_answer(fd, buf, sizeof(buf), &len), 200);
	}
	loop_ms = thread_cpu_ms("kvtd-loop") - loop0;
	aux_ms = thread_cpu_ms("kvtd-aux") - aux0;
	printf("s3_scan: %u listings of an empty bucket, %u blocks in the store: %.1f ms each; "
	       "CPU of the loop thread %" PRIu64 " ms, of the aux thread %" PRIu64 " ms\n",
	       SCAN_LISTS, SCAN_BLOCKS, (double)(tsrv_now_ns() - t0) / 1e6 / SCAN_LISTS, loop_ms,
	       aux_ms);

	/* A burst pipelined on one connection: at most 2 walk, the rest
	 * SlowDown at once. */
	burst = malloc(sizeof(list) * SCAN_BURST);
	T_ASSERT(burst != NULL);
	for (unsigned i = 0; i < SCAN_BURST; i++)
		memcpy(burst + i * (sizeof(list) - 1), list, sizeof(list) - 1);
	T_EQ_INT(send_for(fd, burst, SCAN_BURST * (sizeof(list) - 1), 5000),
		 (int64_t)(SCAN_BURST * (sizeof(list) - 1)));
	for (unsigned i = 0; i < SCAN_BURST; i++) {
		int st = http_answer(fd, buf, sizeof(buf), &len);
		if (st == 200)
			ok++;
		else if (st == 503)
			slow++;
		else
			other++;
	}
	refused = stat_unix("server.s3_scan_refused", true);
	printf("s3_scan: %u listings pipelined: %u answered, %u SlowDown, %u other; "
	       "server.s3_scan_refused %" PRIu64 "\n", SCAN_BURST, ok, slow, other, refused);
	free(burst);

	/* ListParts of an upload with no parts probes part numbers 1..10000
	 * (28 ms of the loop under ASan): in windows, other connections
	 * served between.  A native PING's round trip, median of 20, while
	 * one connection runs two ListParts at a time; rounds: the best. */
	snprintf(buf, sizeof(buf), "POST /scanbkt/mp?uploads HTTP/1.1\r\nHost: x\r\n"
		 "Content-Length: 0\r\n\r\n");
	T_EQ_INT(send_for(fd, buf, strlen(buf), 5000), (int64_t)strlen(buf));
	T_EQ_INT(http_answer(fd, buf, sizeof(buf), &len), 200);
	{
		char *u = strstr(buf, "<UploadId>"), *e = u ? strstr(u, "</UploadId>") : NULL;
		T_ASSERT(u && e && e - u - 10 < 60);
		memcpy(pf.upload, u + 10, (size_t)(e - u - 10));
		pf.upload[e - u - 10] = 0;
	}
	pf.port = port;
	T_RC(kc_connect_unix(&c, srv.sock), 0);
	T_RC(kc_login(&c, "default", NULL), 0);
	for (unsigned round = 0; round < 3 && best > SCAN_PING_MAX_MS; round++) {
		uint64_t rtt[20];
		pthread_t th;
		atomic_store(&pf.stop, false);
		T_EQ_INT(pthread_create(&th, NULL, parts_flood_run, &pf), 0);
		tsrv_sleep_ms(200);
		for (unsigned i = 0; i < 20; i++) {
			uint64_t p0 = tsrv_now_ns();
			T_RC(kc_ping(&c), 0);
			rtt[i] = (tsrv_now_ns() - p0) / 1000;
			tsrv_sleep_ms(10);
		}
		atomic_store(&pf.stop, true);
		pthread_join(th, NULL);
		qsort(rtt, 20, sizeof(rtt[0]), cmp_u64);
		printf("s3_scan: round %u: a PING's round trip during ListParts: median %.2f ms, "
		       "max %.2f ms (%u ListParts answered, %u not)\n", round, rtt[10] / 1000.0,
		       rtt[19] / 1000.0, pf.answered, pf.bad);
		if (rtt[10] / 1000 < best)
			best = rtt[10] / 1000;
	}
	kc_close(&c);
	close(fd);
	T_EQ_INT(pf.bad, 0);
	T_GE_INT(pf.answered, 2);
	T_LE_INT(best, SCAN_PING_MAX_MS);
	/* The walks ran on the aux thread (before: all on the loop, aux 0;
	 * after, 20-130 ms of 300 listings under ASan, by the load) */
	T_GE_INT(aux_ms, 10);
	T_EQ_INT(other, 0);
	T_GE_INT(ok, 1);
	T_GE_INT(slow, 1);
	T_EQ_U64(refused, slow);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * native_edges / native_flood (attack14, doc/security.md "Native protocol
 * review, 2026-12-03"): the native protocol's opcodes with each field at
 * its edges, on a real kvtierd over loopback.  What must happen, case by
 * case: a frame that cannot be read gets an ERROR frame with the fault
 * (and the request's tag once the header was readable) and the connection
 * closes; a request that fails as a whole gets its opcode and a negative
 * status and the connection stays; never a crash, never other bytes, and
 * an admin's PING on another connection answered meanwhile.
 */

static void nat_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t nat_get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The frame's CRC again over header[0, 44) and the table bytes present
 * (at most table_len of them, at most len - 48). */
static void nat_recrc(uint8_t *buf, size_t len)
{
	uint64_t tl = nat_get(buf + 24, 8);
	uint32_t crc;

	if (tl > len - PROTO_HDR_LEN)
		tl = len - PROTO_HDR_LEN;
	crc = kvt_crc32c(0, buf, 44);
	crc = kvt_crc32c(crc, buf + PROTO_HDR_LEN, (size_t)tl);
	nat_le(buf + 44, crc, 4);
}

/* A valid request frame (header and table, no data) into a malloc'd
 * buffer: *len bytes. */
static uint8_t *nat_encode(struct proto_frame *f, const struct proto_item *its, uint32_t n,
			   size_t *len)
{
	uint8_t *buf;
	int64_t l = kc_encode(f, its, n, NULL, 64, &buf); /* room for cases that grow the table */

	T_OK(l);
	*len = (size_t)l;
	return buf;
}

enum { NAT_RAW, NAT_HELLO, NAT_LOGIN };

struct nat_env {
	uint16_t port;
	uint16_t version;        /* what HELLO chose for alice's connections */
	uint64_t vmax;           /* the server's value_max (HELLO) */
	uint8_t ns[PROTO_DIGEST_LEN];
	struct kc ctl;           /* admin, PINGs between cases */
	uint64_t ping_max_ns;
	unsigned bad;            /* cases that did not go as they must */
	unsigned cases;
};

#define NAT_TAG 0x7a7a000000000042ull

/*
 * Send buf on a fresh connection (raw, after HELLO, or logged in as alice)
 * and check the answer: a frame with status want (op want_op; the tag NAT_TAG
 * unless tag_zero), then the connection closed (close) or still serving a
 * PING.  Then the admin's PING on its own connection.
 */
static void nat_case(struct nat_env *e, const char *name, int mode, const uint8_t *buf,
		     size_t len, int32_t want, uint16_t want_op, bool close, bool tag_zero)
{
	struct kc c;
	struct kc_resp r;
	bool closed = false, ok;
	int rc, ping = 1;
	uint64_t t0;

	e->cases++;
	T_RC(kc_connect_tcp(&c, e->port), 0);
	if (mode == NAT_HELLO)
		T_RC(kc_hello(&c), 0);
	else if (mode == NAT_LOGIN)
		T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
	rc = kc_send(&c, buf, len);
	if (rc == 0)
		rc = kc_recv(&c, &r, 3000);
	if (rc == 0 && close)
		closed = kc_wait_closed(&c, 3000);
	else if (rc == 0)
		ping = kc_ping(&c);
	ok = rc == 0 && r.f.status == want && r.f.op == want_op &&
	     r.f.tag == (tag_zero ? 0 : NAT_TAG) && (close ? closed : ping == 0);
	printf("  %-40s %s: %s op %u status %d (%s)%s%s\n", name, ok ? "ok  " : "BAD ",
	       rc ? kvt_strerror(rc) : "answer", rc ? 0 : r.f.op, rc ? 0 : r.f.status,
	       rc ? "-" : kvt_strerror(r.f.status), close ? (closed ? ", closed" : ", NOT closed")
						   : (ping == 0 ? ", still serving" : ", NOT serving"),
	       ok ? "" : " <-- want that status and op");
	if (!ok) {
		printf("     wanted op %u status %d (%s)\n", want_op, want, kvt_strerror(want));
		e->bad++;
	}
	if (rc == 0)
		kc_resp_free(&r);
	kc_close(&c);
	t0 = tsrv_now_ns();
	T_RC(kc_ping(&e->ctl), 0);
	if (tsrv_now_ns() - t0 > e->ping_max_ns)
		e->ping_max_ns = tsrv_now_ns() - t0;
}

/* A frame that cannot be read: ERROR frame, request's tag, closed. */
static void nat_bad(struct nat_env *e, const char *name, const uint8_t *buf, size_t len,
		    int32_t want)
{
	nat_case(e, name, NAT_LOGIN, buf, len, want, PROTO_OP_ERROR, true, false);
}

/* One mutation of a copy of the frame at off (n bytes, little-endian),
 * the CRC recomputed. */
static void nat_mut(struct nat_env *e, const char *name, const uint8_t *frame, size_t len,
		    size_t off, unsigned n, uint64_t v, int32_t want)
{
	uint8_t *b = malloc(len + 64);

	memcpy(b, frame, len);
	nat_le(b + off, v, n);
	nat_recrc(b, len);
	nat_bad(e, name, b, len, want);
	free(b);
}

/* A GET frame of one item, and where its fields lie: table at 48, the ns
 * table (8 + 32), then the item (32 + key). */
#define NAT_NS_OFF (PROTO_HDR_LEN)
#define NAT_IT_OFF (PROTO_HDR_LEN + 8 + PROTO_DIGEST_LEN)

static uint8_t *nat_get_frame(struct nat_env *e, uint32_t flags, uint32_t part, uint64_t off,
			      uint64_t rlen, size_t *len)
{
	struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = e->ns, .tag = NAT_TAG,
				 .version = e->version };
	struct proto_item it = { .flags = flags, .part = part, .off = off, .len = rlen };

	kvt_key_set(&it.key, "nat-v", 5);
	return nat_encode(&f, &it, 1, len);
}

/* A PUT frame (header and table) of one item with n parts of plen bytes. */
static uint8_t *nat_put_frame(struct nat_env *e, const char *key, uint32_t flags, uint32_t n,
			      uint64_t plen, size_t *len)
{
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = e->ns, .tag = NAT_TAG,
				 .version = e->version };
	struct proto_item it = { .flags = flags, .part_count = n,
				 .copies = flags & PROTO_IF_PLACED ? 1 : 0 };
	uint64_t *lens = calloc(n, sizeof(*lens));
	uint32_t *crcs = calloc(n, sizeof(*crcs));
	uint8_t *b;

	for (uint32_t i = 0; i < n; i++)
		lens[i] = plen;
	it.part_lens = lens;
	it.part_crcs = crcs;
	kvt_key_set(&it.key, key, strlen(key));
	b = nat_encode(&f, &it, 1, len);
	free(lens);
	free(crcs);
	return b;
}

/* A frame of op with the op section given (CLEAR, STATS, DRAIN, HELLO,
 * AUTH, PING, NS_REGISTER: raw tables). */
static size_t nat_raw(uint8_t *b, uint16_t ver, uint16_t op, uint32_t count, const void *table,
		      size_t tlen)
{
	struct proto_frame f = { .version = ver, .op = op, .item_count = count, .tag = NAT_TAG,
				 .table_len = tlen };

	return kc_raw_frame(b, &f, table);
}

/* A frame of op with the op section t (tlen bytes) that cannot be read. */
static void nat_op_bad(struct nat_env *e, const char *name, uint16_t op, const uint8_t *t,
		       size_t tlen, int32_t want)
{
	uint8_t *b = malloc(PROTO_HDR_LEN + tlen);
	size_t n = nat_raw(b, e->version, op, 0, t, tlen);

	nat_bad(e, name, b, n, want);
	free(b);
}

static void nat_headers(struct nat_env *e)
{
	size_t len, plen;
	uint8_t *g = nat_get_frame(e, 0, 0, 0, 0, &len), *b = malloc(len + 64);
	uint8_t *p = nat_put_frame(e, "nat-p", 0, 1, 4096, &plen);
	uint16_t other = e->version == 1 ? 2 : 1;

	printf("native_edges: header fields\n");
	memcpy(b, g, len);
	memcpy(b, "KVTQ", 4);
	nat_case(e, "magic KVTQ", NAT_LOGIN, b, len, PROTO_EMAGIC, PROTO_OP_ERROR, true, true);
	memcpy(b, "GET / HTTP/1.1\r\n\r\n", 18);
	nat_case(e, "an HTTP request", NAT_LOGIN, b, 18, PROTO_EMAGIC, PROTO_OP_ERROR, true, true);
	nat_mut(e, "version 0", g, len, 4, 2, 0, KVT_EVERSION);
	nat_mut(e, "version 3", g, len, 4, 2, 3, KVT_EVERSION);
	nat_mut(e, "version 0xffff", g, len, 4, 2, 0xffff, KVT_EVERSION);
	nat_mut(e, "version other than HELLO chose", g, len, 4, 2, other, KVT_EVERSION);
	nat_mut(e, "opcode 0 (ERROR) as a request", g, len, 6, 2, 0, KVT_EBADOP);
	nat_mut(e, "opcode 14", g, len, 6, 2, 14, KVT_EBADOP);
	nat_mut(e, "opcode 0xffff", g, len, 6, 2, 0xffff, KVT_EBADOP);
	nat_mut(e, "flag RESPONSE", g, len, 8, 4, PROTO_F_RESPONSE, PROTO_EFLAGS);
	nat_mut(e, "flag MORE", g, len, 8, 4, PROTO_F_MORE, PROTO_EFLAGS);
	nat_mut(e, "flag RDMA", g, len, 8, 4, PROTO_F_RDMA, PROTO_ERDMA);
	nat_mut(e, "flag 0x8", g, len, 8, 4, 0x8, PROTO_EFLAGS);
	nat_mut(e, "flag 0x80000000", g, len, 8, 4, 0x80000000u, PROTO_EFLAGS);
	nat_mut(e, "status -1 in a request", g, len, 40, 4, 0xffffffffu, PROTO_EMALFORMED);
	nat_mut(e, "status 1 in a request", g, len, 40, 4, 1, PROTO_EMALFORMED);
	nat_mut(e, "GET item_count 0", g, len, 12, 4, 0, PROTO_ECOUNT);
	nat_mut(e, "GET item_count 2 (table of 1)", g, len, 12, 4, 2, PROTO_EMALFORMED);
	nat_mut(e, "GET item_count 65537", g, len, 12, 4, 65537, PROTO_ECOUNT);
	nat_mut(e, "GET item_count 0xffffffff", g, len, 12, 4, 0xffffffffu, PROTO_ECOUNT);
	nat_mut(e, "table_len 2^64-1", g, len, 24, 8, UINT64_MAX, KVT_EBADLEN);
	nat_mut(e, "table_len 16 MiB + 1", g, len, 24, 8, (16u << 20) + 1, KVT_EBADLEN);
	nat_mut(e, "table_len 0", g, len, 24, 8, 0, PROTO_EMALFORMED);
	nat_mut(e, "table_len one short", g, len, 24, 8, len - PROTO_HDR_LEN - 1,
		PROTO_EMALFORMED);
	{
		/* Eight zero bytes past the item, counted in table_len. */
		memcpy(b, g, len);
		memset(b + len, 0, 8);
		nat_le(b + 24, len - PROTO_HDR_LEN + 8, 8);
		nat_recrc(b, len + 8);
		nat_bad(e, "table_len 8 past the items", b, len + 8, PROTO_EMALFORMED);
	}
	nat_mut(e, "GET data_len 1", g, len, 32, 8, 1, PROTO_EMALFORMED);
	nat_mut(e, "GET data_len 2^64-1", g, len, 32, 8, UINT64_MAX, KVT_EBADLEN);
	nat_mut(e, "PUT data_len 2^64-1", p, plen, 32, 8, UINT64_MAX, KVT_EBADLEN);
	nat_mut(e, "PUT data_len 2^40 (frame_max)", p, plen, 32, 8, 1ull << 40, KVT_EBADLEN);
	nat_mut(e, "PUT data_len one over its parts", p, plen, 32, 8, 4097, PROTO_EMALFORMED);
	nat_mut(e, "PUT data_len one under its parts", p, plen, 32, 8, 4095, PROTO_EMALFORMED);
	nat_mut(e, "PUT data_len 0", p, plen, 32, 8, 0, PROTO_EMALFORMED);
	memcpy(b, g, len);
	b[44] ^= 1;
	nat_bad(e, "CRC one bit off", b, len, PROTO_ECRC);
	memcpy(b, g, len);
	b[len - 1] ^= 1;
	nat_bad(e, "key byte changed, CRC not", b, len, PROTO_ECRC);
	{
		uint8_t t[8] = { 0 };
		size_t n = nat_raw(b, e->version, PROTO_OP_PING, 1, t, 0);
		nat_bad(e, "PING item_count 1", b, n, PROTO_ECOUNT);
		nat_op_bad(e, "PING table_len 8", PROTO_OP_PING, t, 8, PROTO_EMALFORMED);
	}
	free(g);
	free(p);
	free(b);
}

static void nat_tables(struct nat_env *e)
{
	size_t len;
	uint8_t *g = nat_get_frame(e, 0, 0, 0, 0, &len);
	const size_t it = NAT_IT_OFF;

	printf("native_edges: tables\n");
	nat_mut(e, "ns_count 0", g, len, NAT_NS_OFF, 4, 0, PROTO_ECOUNT);
	nat_mut(e, "ns_count 2 (one digest)", g, len, NAT_NS_OFF, 4, 2, PROTO_EMALFORMED);
	nat_mut(e, "ns_count 257", g, len, NAT_NS_OFF, 4, 257, PROTO_ECOUNT);
	nat_mut(e, "ns_count 0xffffffff", g, len, NAT_NS_OFF, 4, 0xffffffffu, PROTO_ECOUNT);
	nat_mut(e, "ns table reserved 1", g, len, NAT_NS_OFF + 4, 4, 1, PROTO_EMALFORMED);
	nat_mut(e, "ns_index 1 of 1", g, len, it, 4, 1, PROTO_EMALFORMED);
	nat_mut(e, "ns_index 0xffffffff", g, len, it, 4, 0xffffffffu, PROTO_EMALFORMED);
	nat_mut(e, "item flag 0x80", g, len, it + 4, 2, 0x80, PROTO_EFLAGS);
	nat_mut(e, "item flag 0x8000", g, len, it + 4, 2, 0x8000, PROTO_EFLAGS);
	nat_mut(e, "GET flag SEALED", g, len, it + 4, 2, PROTO_IF_SEALED, PROTO_EFLAGS);
	nat_mut(e, "GET flag PLACED", g, len, it + 4, 2, PROTO_IF_PLACED, PROTO_EFLAGS);
	nat_mut(e, "GET flag RETAIN", g, len, it + 4, 2, PROTO_IF_RETAIN, PROTO_EFLAGS);
	nat_mut(e, "GET flags PART|RANGE", g, len, it + 4, 2, PROTO_IF_PART | PROTO_IF_RANGE,
		PROTO_EFLAGS);
	nat_mut(e, "key_len 0", g, len, it + 6, 1, 0, KVT_EKEYLEN);
	nat_mut(e, "key_len 65", g, len, it + 6, 1, 65, KVT_EKEYLEN);
	nat_mut(e, "key_len 255", g, len, it + 6, 1, 255, KVT_EKEYLEN);
	nat_mut(e, "key_len 6 (5 in the table)", g, len, it + 6, 1, 6, PROTO_EMALFORMED);
	nat_mut(e, "key_len 4 (5 in the table)", g, len, it + 6, 1, 4, PROTO_EMALFORMED);
	nat_mut(e, "item reserved byte 1", g, len, it + 7, 1, 1, PROTO_EMALFORMED);
	nat_mut(e, "GET part 3 without PART", g, len, it + 8, 4, 3, PROTO_EMALFORMED);
	nat_mut(e, "GET reserved u32 1", g, len, it + 12, 4, 1, PROTO_EMALFORMED);
	nat_mut(e, "GET off 1 without RANGE", g, len, it + 16, 8, 1, PROTO_EMALFORMED);
	nat_mut(e, "GET len 1 without RANGE", g, len, it + 24, 8, 1, PROTO_EMALFORMED);
	free(g);

	g = nat_get_frame(e, PROTO_IF_PART, 0, 0, 0, &len);
	nat_mut(e, "GET PART 1024 (parts_max)", g, len, it + 8, 4, 1024, PROTO_EMALFORMED);
	nat_mut(e, "GET PART 0xffffffff", g, len, it + 8, 4, 0xffffffffu, PROTO_EMALFORMED);
	free(g);
	g = nat_get_frame(e, PROTO_IF_RANGE, 0, 0, 1, &len);
	nat_mut(e, "GET RANGE len 0", g, len, it + 24, 8, 0, KVT_EBADLEN);
	nat_mut(e, "GET RANGE len value_max + 1", g, len, it + 24, 8, e->vmax + 1, KVT_EBADLEN);
	nat_mut(e, "GET RANGE off 2^64-1, len 1", g, len, it + 16, 8, UINT64_MAX,
		KVT_EBADLEN);
	nat_mut(e, "GET RANGE off value_max, len 1", g, len, it + 16, 8, e->vmax, KVT_EBADLEN);
	free(g);

	/* PUT items: head 8, part_count at 8, copies at 12, key at 16, then
	 * the part table (len 8, crc 4, reserved 4). */
	{
		uint8_t *p = nat_put_frame(e, "nat-p", 0, 2, 2048, &len);
		const size_t pt = it + 16 + 5;
		nat_mut(e, "PUT part_count 0", p, len, it + 8, 4, 0, PROTO_ECOUNT);
		nat_mut(e, "PUT part_count 1025", p, len, it + 8, 4, 1025, PROTO_ECOUNT);
		nat_mut(e, "PUT part_count 3 (2 in the table)", p, len, it + 8, 4, 3,
			PROTO_EMALFORMED);
		nat_mut(e, "PUT part_count 1 (2 in the table)", p, len, it + 8, 4, 1,
			PROTO_EMALFORMED);
		nat_mut(e, "PUT copies 1 without PLACED", p, len, it + 12, 4, 1,
			PROTO_EMALFORMED);
		nat_mut(e, "PUT flag REPAIR without PLACED", p, len, it + 4, 2, PROTO_IF_REPAIR,
			PROTO_EFLAGS);
		nat_mut(e, "PUT flag FORWARD without PLACED", p, len, it + 4, 2,
			PROTO_IF_FORWARD, PROTO_EFLAGS);
		nat_mut(e, "PUT flag PART", p, len, it + 4, 2, PROTO_IF_PART, PROTO_EFLAGS);
		nat_mut(e, "PUT part len 0", p, len, pt, 8, 0, KVT_EBADLEN);
		nat_mut(e, "PUT part len value_max + 1", p, len, pt, 8, e->vmax + 1, KVT_EBADLEN);
		nat_mut(e, "PUT part len 2^64-1", p, len, pt, 8, UINT64_MAX, KVT_EBADLEN);
		nat_mut(e, "PUT part reserved 1", p, len, pt + 12, 4, 1, PROTO_EMALFORMED);
		{
			/* Two parts whose lengths wrap to data_len 2048. */
			uint8_t *b = malloc(len);
			memcpy(b, p, len);
			nat_le(b + pt, (1ull << 63), 8);
			nat_le(b + pt + 16, (1ull << 63) + 2048 + 2048, 8);
			nat_recrc(b, len);
			nat_bad(e, "PUT parts 2^63 + (2^63 + 4096)", b, len, KVT_EBADLEN);
			free(b);
		}
		free(p);
	}

	/* CLEAR and STATS op sections: scope 4, tenant_len 2 at 4, digest at 8. */
	{
		uint8_t t[40 + 80] = { 0 }, b[PROTO_HDR_LEN + sizeof(t)];
		size_t n;
		nat_le(t, 0, 4);
		nat_op_bad(e, "CLEAR scope 0", PROTO_OP_CLEAR, t, 40, PROTO_EMALFORMED);
		nat_le(t, 4, 4);
		nat_op_bad(e, "CLEAR scope 4", PROTO_OP_CLEAR, t, 40, PROTO_EMALFORMED);
		nat_le(t, PROTO_SCOPE_NS, 4);
		nat_le(t + 4, 1, 2);
		t[40] = 'x';
		nat_op_bad(e, "CLEAR NS with a tenant", PROTO_OP_CLEAR, t, 41, PROTO_EMALFORMED);
		nat_le(t, PROTO_SCOPE_TENANT, 4);
		nat_le(t + 4, 65, 2);
		memset(t + 40, 'x', 65);
		nat_op_bad(e, "CLEAR TENANT tenant_len 65", PROTO_OP_CLEAR, t, 40 + 65, KVT_EBADLEN);
		nat_le(t + 4, 1, 2);
		t[40] = '-';
		n = nat_raw(b, e->version, PROTO_OP_CLEAR, 0, t, 41);
		nat_bad(e, "CLEAR TENANT \"-\"", b, n, PROTO_EMALFORMED);
		t[40] = ' ';
		n = nat_raw(b, e->version, PROTO_OP_CLEAR, 0, t, 41);
		nat_bad(e, "CLEAR TENANT \" \"", b, n, PROTO_EMALFORMED);
		memset(t, 0, sizeof(t));
		nat_le(t, PROTO_SCOPE_NS, 4);
		nat_op_bad(e, "STATS scope NS", PROTO_OP_STATS, t, 40, PROTO_EMALFORMED);
		nat_le(t, PROTO_SCOPE_ALL, 4);
		t[8] = 1;
		nat_op_bad(e, "STATS ALL with a digest", PROTO_OP_STATS, t, 40, PROTO_EMALFORMED);
		/* Answered, connection kept. */
		memset(t, 0, sizeof(t));
		nat_le(t, PROTO_SCOPE_ALL, 4);
		n = nat_raw(b, e->version, PROTO_OP_STATS, 0, t, 40);
		nat_case(e, "STATS ALL by a tenant", NAT_LOGIN, b, n, PROTO_EPERM, PROTO_OP_STATS,
			 false, false);
		n = nat_raw(b, e->version, PROTO_OP_CLEAR, 0, t, 40);
		nat_case(e, "CLEAR ALL by a tenant", NAT_LOGIN, b, n, PROTO_EPERM, PROTO_OP_CLEAR,
			 false, false);
		nat_le(t, PROTO_SCOPE_NS, 4);
		memset(t + 8, 0xee, 32);
		n = nat_raw(b, e->version, PROTO_OP_CLEAR, 0, t, 40);
		nat_case(e, "CLEAR NS of an unknown digest", NAT_LOGIN, b, n, KVT_ENONS,
			 PROTO_OP_CLEAR, false, false);
		nat_le(t, PROTO_SCOPE_TENANT, 4);
		memset(t + 8, 0, 32);
		nat_le(t + 4, 5, 2);
		memcpy(t + 40, "admin", 5);
		n = nat_raw(b, e->version, PROTO_OP_CLEAR, 0, t, 45);
		nat_case(e, "CLEAR TENANT of another tenant", NAT_LOGIN, b, n, PROTO_EPERM,
			 PROTO_OP_CLEAR, false, false);
	}
	/* DRAIN: mode 1..2, admin only. */
	{
		uint8_t t[8] = { 0 }, b[PROTO_HDR_LEN + 8];
		size_t n;
		nat_op_bad(e, "DRAIN mode 0", PROTO_OP_DRAIN, t, 8, PROTO_EMALFORMED);
		nat_le(t, 3, 4);
		nat_op_bad(e, "DRAIN mode 3", PROTO_OP_DRAIN, t, 8, PROTO_EMALFORMED);
		nat_le(t, PROTO_DRAIN_EXIT, 4);
		n = nat_raw(b, e->version, PROTO_OP_DRAIN, 0, t, 8);
		nat_case(e, "DRAIN EXIT by a tenant", NAT_LOGIN, b, n, PROTO_EPERM, PROTO_OP_DRAIN,
			 false, false);
	}
	/* NS_REGISTER texts. */
	{
		uint8_t *t = calloc(1, 4 + 2100), *b = malloc(PROTO_HDR_LEN + 4 + 2100);
		size_t n;
		/* A table too short for one item is malformed from the
		 * header; an empty text in a table of an item's size is a
		 * length out of range (doc/protocol.md section 3). */
		n = nat_raw(b, e->version, PROTO_OP_NS_REGISTER, 1, t, 4);
		nat_bad(e, "NS_REGISTER table shorter than an item", b, n, PROTO_EMALFORMED);
		n = nat_raw(b, e->version, PROTO_OP_NS_REGISTER, 1, t, 5);
		nat_bad(e, "NS_REGISTER text_len 0", b, n, KVT_EBADLEN);
		nat_le(t, 2049, 2);
		memset(t + 4, 'a', 2049);
		n = nat_raw(b, e->version, PROTO_OP_NS_REGISTER, 1, t, 4 + 2049);
		nat_bad(e, "NS_REGISTER text_len 2049", b, n, KVT_EBADLEN);
		nat_le(t, 3, 2);
		memcpy(t + 4, "a\001b", 3);
		n = nat_raw(b, e->version, PROTO_OP_NS_REGISTER, 1, t, 7);
		nat_bad(e, "NS_REGISTER text with 0x01", b, n, PROTO_EMALFORMED);
		free(t);
		free(b);
	}
}

/* HELLO and AUTH out of turn, before AUTH, mixed versions. */
static void nat_setup(struct nat_env *e)
{
	uint8_t t[200] = { 0 }, b[PROTO_HDR_LEN + 5000];
	size_t n, glen;
	uint8_t *g = nat_get_frame(e, 0, 0, 0, 0, &glen);

	printf("native_edges: connection setup\n");
	nat_case(e, "GET before HELLO", NAT_RAW, g, glen, PROTO_ENOAUTH, PROTO_OP_GET, true, false);
	nat_case(e, "GET after HELLO, before AUTH", NAT_HELLO, g, glen, PROTO_ENOAUTH,
		 PROTO_OP_GET, true, false);
	/* AUTH: method 2, tenant_len at 2, nonce 8, proof 40, tenant 72. */
	nat_le(t, PROTO_AUTH_HMAC_SHA256, 2);
	nat_le(t + 2, 5, 2);
	memcpy(t + 72, "alice", 5);
	n = nat_raw(b, PROTO_VERSION_HELLO, PROTO_OP_AUTH, 0, t, 77);
	nat_case(e, "AUTH before HELLO", NAT_RAW, b, n, KVT_ESTATE, PROTO_OP_AUTH, true, false);
	/* After HELLO every frame carries the version it chose. */
	n = nat_raw(b, e->version, PROTO_OP_AUTH, 0, t, 77);
	nat_case(e, "AUTH with a zero proof", NAT_HELLO, b, n, PROTO_EAUTH, PROTO_OP_AUTH, true,
		 false);
	nat_case(e, "AUTH after AUTH", NAT_LOGIN, b, n, KVT_ESTATE, PROTO_OP_AUTH, false, false);
	nat_le(t, 9, 2);
	n = nat_raw(b, e->version, PROTO_OP_AUTH, 0, t, 77);
	nat_case(e, "AUTH method 9", NAT_HELLO, b, n, PROTO_EAUTH, PROTO_OP_AUTH, true, false);
	/* HELLO: min at 0, max 2, name_len 4. */
	/* HELLO: min at 0, max at 2 (an op section of 8, no name). */
	{
		static const struct {
			const char *name;
			int mode;
			uint16_t lo, hi, ver;
			int32_t want;
			uint16_t op;
			bool close;
		} hs[] = {
			{ "HELLO after AUTH", NAT_LOGIN, 1, 0xffff, 1, KVT_ESTATE, PROTO_OP_HELLO, false },
			{ "HELLO after HELLO", NAT_HELLO, 1, 0xffff, 1, KVT_ESTATE, PROTO_OP_HELLO, false },
			{ "HELLO versions 3..65535", NAT_RAW, 3, 0xffff, 1, KVT_EVERSION, PROTO_OP_HELLO,
			  true },
			{ "HELLO versions 2..1", NAT_RAW, 2, 1, 1, PROTO_EMALFORMED, PROTO_OP_ERROR, true },
			{ "HELLO versions 0..0", NAT_RAW, 0, 0, 1, PROTO_EMALFORMED, PROTO_OP_ERROR, true },
			{ "HELLO framed as version 2", NAT_RAW, 1, 2, 2, KVT_EVERSION, PROTO_OP_ERROR,
			  true },
		};
		for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
			memset(t, 0, sizeof(t));
			nat_le(t, hs[i].lo, 2);
			nat_le(t + 2, hs[i].hi, 2);
			n = nat_raw(b, hs[i].ver, PROTO_OP_HELLO, 0, t, 8);
			nat_case(e, hs[i].name, hs[i].mode, b, n, hs[i].want, hs[i].op, hs[i].close,
				 false);
		}
	}
	nat_le(t + 4, 65, 2);
	memset(t + 8, 'n', 65);
	n = nat_raw(b, PROTO_VERSION_HELLO, PROTO_OP_HELLO, 0, t, 8 + 65);
	nat_case(e, "HELLO name_len 65", NAT_RAW, b, n, KVT_EBADLEN, PROTO_OP_ERROR, true, false);
	{
		/* A 5000-byte PING before AUTH: more than a pre-AUTH frame. */
		memset(b, 0, sizeof(b));
		n = nat_raw(b, PROTO_VERSION_HELLO, PROTO_OP_PING, 0, t, 0);
		nat_le(b + 24, 5000 - PROTO_HDR_LEN, 8);
		nat_recrc(b, 5000);
		nat_case(e, "PING of 5000 bytes before AUTH", NAT_RAW, b, 5000, PROTO_ENOAUTH,
			 PROTO_OP_ERROR, true, false);
	}
	/* A frame of the other version on a connection that chose one. */
	{
		struct kc c;
		struct kc_resp r;
		size_t plen;
		uint8_t *p;
		uint64_t t0;
		int rc;
		bool closed = false;

		/* A PUT of the wrong version declaring 8 MiB: refused from its
		 * header, before any of its data is read or buffered. */
		e->cases++;
		T_RC(kc_connect_tcp(&c, e->port), 0);
		c.offer_max = 1;
		T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
		T_EQ_INT(c.version, 1);
		p = nat_put_frame(e, "nat-wrongver", 0, 8, 1u << 20, &plen);
		nat_le(p + 4, 2, 2);
		nat_recrc(p, plen);
		t0 = tsrv_now_ns();
		T_RC(kc_send(&c, p, plen), 0);
		rc = kc_recv(&c, &r, 3000);
		if (rc == 0)
			closed = kc_wait_closed(&c, 3000);
		printf("  %-40s %s: rc %d status %d, %.1f ms, %s\n",
		       "version 2 PUT of 8 MiB on a version 1 conn",
		       rc == 0 && r.f.status == KVT_EVERSION && closed ? "ok  " : "BAD ", rc,
		       rc ? 0 : r.f.status, (tsrv_now_ns() - t0) / 1e6,
		       closed ? "closed" : "NOT closed");
		if (rc != 0 || r.f.status != KVT_EVERSION || !closed)
			e->bad++;
		if (rc == 0)
			kc_resp_free(&r);
		kc_close(&c);
		free(p);
	}
	free(g);
}

/* Answers whose values the GETs below check. */
struct nat_check {
	const uint8_t *want;
	uint64_t want_len;
	unsigned ok, wrong, other;
};

static void nat_check_item(void *ctx, const struct kc_resp *r, const struct proto_item *it)
{
	struct nat_check *k = ctx;

	if (it->status != KVT_OK) {
		k->other++;
		return;
	}
	/* An empty value has no data section (r->data NULL): nothing to compare. */
	if (it->data_len == k->want_len &&
	    (k->want_len == 0 || memcmp(r->data + it->data_off, k->want, k->want_len) == 0))
		k->ok++;
	else
		k->wrong++;
}

/* Item statuses of a reply, counted. */
struct nat_count {
	unsigned ok, exists, miss, other;
};

static void nat_count_item(void *ctx, const struct kc_resp *r, const struct proto_item *it)
{
	struct nat_count *n = ctx;

	(void)r;
	if (it->status == KVT_OK)
		n->ok++;
	else if (it->status == KVT_EXISTS)
		n->exists++;
	else if (it->status == KVT_MISS)
		n->miss++;
	else
		n->other++;
}

/* One key named n times in one frame: answered item by item, the bytes
 * exact, memory bounded. */
static void nat_dups(struct nat_env *e, struct kc *c)
{
	enum { N = 65536, NS = 1024, PN = 512, PLEN = 8192 };
	static const unsigned counts[3] = { NS, NS + 1, N };
	struct proto_item *its = calloc(N, sizeof(*its));
	uint8_t *vals = malloc((size_t)PN * PLEN), v64[64];
	uint32_t *crcs = malloc(PN * sizeof(*crcs));
	uint64_t *lens = malloc(PN * sizeof(*lens));
	struct iovec *iov = malloc(PN * sizeof(*iov));
	struct iovec one = { v64, sizeof(v64) };
	struct nat_check k = { v64, sizeof(v64), 0, 0, 0 };
	struct kvt_key key;
	struct kc_value got = { 0 };
	int32_t st = 0;
	int frames, match = -1;
	unsigned puts_ok = 0, puts_exists = 0, puts_other = 0, del_ok = 0, del_miss = 0;

	printf("native_edges: one key named many times in a frame\n");
	kvt_key_set(&key, "nat-dup", 7);
	tsrv_fill(v64, sizeof(v64), 64);
	T_RC(kc_put(c, e->ns, &key, &one, 1, NULL), KVT_OK);
	for (unsigned i = 0; i < N; i++)
		its[i].key = key;
	/* 1024 names (KVTD_FRAME_ITEMS_MAX): every one answered with the
	 * exact bytes.  More: the frame is refused whole (PROTO_ECOUNT,
	 * big_frames) and the connection stays. */
	for (unsigned j = 0; j < 3; j++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = e->ns };
		unsigned n = counts[j];
		k.ok = k.wrong = k.other = 0;
		k.want_len = sizeof(v64);
		T_ASSERT(kc_request(c, &f, its, n, NULL, 0) > 0);
		frames = kc_recv_items(c, 30000, nat_check_item, &k, &st);
		printf("  GET of one 64 B key x %u: %d frames, status %d, %u exact, %u wrong, "
		       "%u not OK\n", n, frames, st, k.ok, k.wrong, k.other);
		e->cases++;
		if (frames < 1 || k.wrong ||
		    (st == 0 ? k.ok != n || n > NS : st != PROTO_ECOUNT || n <= NS) ||
		    kc_ping(c) != 0)
			e->bad++;
	}
	for (unsigned j = 0; j < 3; j++) {
		struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 1, .ns = e->ns };
		unsigned n = counts[j];
		k.ok = k.wrong = k.other = 0;
		k.want_len = 0;
		T_ASSERT(kc_request(c, &f, its, n, NULL, 0) > 0);
		frames = kc_recv_items(c, 30000, nat_check_item, &k, &st);
		printf("  EXISTS of one key x %u: %d frames, status %d, %u OK, %u not\n", n, frames,
		       st, k.ok, k.other);
		e->cases++;
		if (frames < 1 || (st == 0 ? k.ok != n || n > NS : st != PROTO_ECOUNT || n <= NS) ||
		    kc_ping(c) != 0)
			e->bad++;
	}
	{
		/* PN different values under one new key in one PUT: one is
		 * stored, whole; the others are no-ops. */
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = e->ns };
		struct nat_count pst = { 0 };
		kvt_key_set(&key, "nat-dup-put", 11);
		for (unsigned i = 0; i < PN; i++) {
			tsrv_fill(vals + (size_t)i * PLEN, PLEN, 1000 + i);
			lens[i] = PLEN;
			crcs[i] = kvt_crc32c(0, vals + (size_t)i * PLEN, PLEN);
			iov[i].iov_base = vals + (size_t)i * PLEN;
			iov[i].iov_len = PLEN;
			memset(&its[i], 0, sizeof(its[i]));
			its[i].key = key;
			its[i].part_count = 1;
			its[i].part_lens = &lens[i];
			its[i].part_crcs = &crcs[i];
		}
		T_ASSERT(kc_request(c, &f, its, PN, iov, PN) > 0);
		T_ASSERT(kc_recv_items(c, 30000, nat_count_item, &pst, NULL) >= 1);
		puts_ok = pst.ok;
		puts_exists = pst.exists;
		puts_other = pst.other + pst.miss;
		T_RC(kc_get(c, e->ns, &key, 0, 0, 0, 0, &got), KVT_OK);
		for (unsigned i = 0; i < PN && got.len == PLEN; i++)
			if (memcmp(got.bytes, vals + (size_t)i * PLEN, PLEN) == 0)
				match = (int)i;
		printf("  PUT of one key x %u, each value its own: %u OK, %u EXISTS, %u other; "
		       "GET: %" PRIu64 " bytes, crc %s, value of item %d\n", PN, puts_ok,
		       puts_exists, puts_other, got.len, got.crc_ok ? "ok" : "BAD", match);
		e->cases++;
		if (puts_ok != 1 || puts_exists + puts_ok != PN || match < 0 || !got.crc_ok)
			e->bad++;
		kc_value_free(&got);
	}
	{
		struct proto_frame f = { .op = PROTO_OP_DELETE, .ns_count = 1, .ns = e->ns };
		struct nat_count dst = { 0 };
		for (unsigned i = 0; i < PN; i++) {
			memset(&its[i], 0, sizeof(its[i]));
			its[i].key = key;
		}
		T_ASSERT(kc_request(c, &f, its, PN, NULL, 0) > 0);
		T_ASSERT(kc_recv_items(c, 30000, nat_count_item, &dst, NULL) >= 1);
		del_ok = dst.ok;
		del_miss = dst.miss;
		printf("  DELETE of one key x %u: %u OK, %u MISS; GET after: %d\n", PN, del_ok,
		       del_miss, kc_get(c, e->ns, &key, 0, 0, 0, 0, &got));
		kc_value_free(&got);
		e->cases++;
		if (del_ok < 1 || del_ok + del_miss != PN || kc_exists(c, e->ns, &key, NULL) !=
		    KVT_MISS)
			e->bad++;
	}
	{
		/* LOOKUP of one key 1024 times: every one a hit; more: as GET. */
		struct kvt_key *keys = malloc(N * sizeof(*keys));
		kvt_key_set(&key, "nat-dup", 7);
		for (unsigned i = 0; i < N; i++)
			keys[i] = key;
		for (unsigned j = 0; j < 3; j++) {
			unsigned n = counts[j];
			uint32_t hits = 0;
			int rc = kc_lookup(c, e->ns, keys, n, &hits, NULL);
			printf("  LOOKUP of one key x %u: %d, %u hits\n", n, rc, hits);
			e->cases++;
			if ((rc == 0 ? hits != n || n > NS : rc != PROTO_ECOUNT || n <= NS) ||
			    kc_ping(c) != 0)
				e->bad++;
		}
		free(keys);
	}
	free(its);
	free(vals);
	free(crcs);
	free(lens);
	free(iov);
}

/* Answers within the value: PART and RANGE at its edges (item statuses,
 * the connection stays). */
static void nat_ranges(struct nat_env *e, struct kc *c)
{
	struct kvt_key key;
	struct kc_value v = { 0 };
	struct {
		const char *name;
		uint32_t flags, part;
		uint64_t off, len;
		int want;
		uint64_t got_len;
	} cs[] = {
		{ "PART 2 of 3", PROTO_IF_PART, 2, 0, 0, KVT_OK, 96 },
		{ "PART 3 of 3", PROTO_IF_PART, 3, 0, 0, KVT_ERANGE, 0 },
		{ "PART 1023 of 3", PROTO_IF_PART, 1023, 0, 0, KVT_ERANGE, 0 },
		{ "RANGE last byte", PROTO_IF_RANGE, 0, 3095, 1, KVT_OK, 1 },
		{ "RANGE whole", PROTO_IF_RANGE, 0, 0, 3096, KVT_OK, 3096 },
		{ "RANGE one past", PROTO_IF_RANGE, 0, 3095, 2, KVT_ERANGE, 0 },
		{ "RANGE off at the end", PROTO_IF_RANGE, 0, 3096, 1, KVT_ERANGE, 0 },
		{ "RANGE off value_max - 1, len 1", PROTO_IF_RANGE, 0, e->vmax - 1, 1, KVT_ERANGE, 0 },
	};

	printf("native_edges: parts and ranges at the value's edges\n");
	kvt_key_set(&key, "nat-v", 5);
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		int rc = kc_get(c, e->ns, &key, cs[i].flags, cs[i].part, cs[i].off, cs[i].len, &v);
		bool ok = rc == cs[i].want && (rc != KVT_OK || (v.len == cs[i].got_len && v.crc_ok));
		printf("  %-40s %s: %d (%s), %" PRIu64 " bytes\n", cs[i].name, ok ? "ok  " : "BAD ",
		       rc, kvt_strerror(rc), v.len);
		e->cases++;
		if (!ok)
			e->bad++;
		kc_value_free(&v);
	}
	T_RC(kc_ping(c), 0);
}

/* Pipelines that end a connection or mix refused items with good ones:
 * the stream stays in sync, BYE is answered last. */
static void nat_streams(struct nat_env *e)
{
	struct kc c;
	struct kc_resp r;
	uint8_t val[3000], bad[3000];
	uint64_t l = sizeof(val);
	uint32_t crc;
	int rc;

	printf("native_edges: pipelines\n");
	/* GET, BYE, PING in one send: the GET's answer, then BYE's, then the
	 * close; PING is never read. */
	{
		struct proto_frame g = { .op = PROTO_OP_GET, .ns_count = 1, .ns = e->ns, .tag = 1 };
		struct proto_frame b = { .op = PROTO_OP_BYE, .tag = 2 };
		struct proto_frame p = { .op = PROTO_OP_PING, .tag = 3 };
		struct proto_item it = { 0 };
		uint8_t buf[1024];
		size_t n = 0;
		int64_t w;
		unsigned got[4] = { 0 }, order = 0, bye_at = 0, get_at = 0;
		bool closed;
		T_RC(kc_connect_tcp(&c, e->port), 0);
		T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
		g.version = b.version = p.version = c.version;
		kvt_key_set(&it.key, "nat-v", 5);
		w = proto_encode(&g, &it, 1, buf, sizeof(buf), NULL, NULL);
		T_ASSERT(w > 0);
		n += (size_t)w;
		w = proto_encode(&b, NULL, 0, buf + n, sizeof(buf) - n, NULL, NULL);
		T_ASSERT(w > 0);
		n += (size_t)w;
		w = proto_encode(&p, NULL, 0, buf + n, sizeof(buf) - n, NULL, NULL);
		T_ASSERT(w > 0);
		n += (size_t)w;
		T_RC(kc_send(&c, buf, n), 0);
		while ((rc = kc_recv(&c, &r, 3000)) == 0) {
			if (r.f.tag < 4)
				got[r.f.tag]++;
			order++;
			if (r.f.tag == 2)
				bye_at = order;
			if (r.f.tag == 1 && !(r.f.flags & PROTO_F_MORE))
				get_at = order;
			kc_resp_free(&r);
		}
		closed = rc == -ECONNRESET;
		printf("  %-40s %s: GET %u, BYE %u (at %u), PING %u, %s\n", "GET, BYE, PING pipelined",
		       got[1] && got[2] == 1 && !got[3] && bye_at == order && get_at < bye_at &&
		       closed ? "ok  " : "BAD ", got[1], got[2], bye_at, got[3],
		       closed ? "closed" : "NOT closed");
		e->cases++;
		if (!got[1] || got[2] != 1 || got[3] || bye_at != order || get_at > bye_at || !closed)
			e->bad++;
		kc_close(&c);
	}
	/* One PUT frame of four items: a good one, one whose bytes fail their
	 * CRC, one in an unknown namespace, the first's key again; then a
	 * PING in the same send: each item its status, the PING answered. */
	{
		uint8_t ns2[2 * PROTO_DIGEST_LEN];
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 2, .ns = ns2, .tag = 10 };
		struct proto_frame p = { .op = PROTO_OP_PING, .tag = 11 };
		struct proto_item its[4] = { 0 };
		int32_t want[4] = { KVT_OK, KVT_ECORRUPT, KVT_ENONS, KVT_EXISTS };
		int32_t st[4] = { 1, 1, 1, 1 };
		struct iovec data[4] = { { val, sizeof(val) }, { bad, sizeof(bad) },
					 { val, sizeof(val) }, { val, sizeof(val) } };
		uint8_t pb[PROTO_HDR_LEN];
		bool pong = false, ok;
		memcpy(ns2, e->ns, PROTO_DIGEST_LEN);
		memset(ns2 + PROTO_DIGEST_LEN, 0xee, PROTO_DIGEST_LEN);
		tsrv_fill(val, sizeof(val), 31);
		memcpy(bad, val, sizeof(bad));
		bad[1234] ^= 0x40;
		crc = kvt_crc32c(0, val, sizeof(val));
		for (int i = 0; i < 4; i++) {
			its[i].part_count = 1;
			its[i].part_lens = &l;
			its[i].part_crcs = &crc;
			its[i].ns_index = i == 2 ? 1 : 0;
		}
		kvt_key_set(&its[0].key, "nat-mix-0", 9);
		kvt_key_set(&its[1].key, "nat-mix-1", 9);
		kvt_key_set(&its[2].key, "nat-mix-2", 9);
		kvt_key_set(&its[3].key, "nat-mix-0", 9);
		T_RC(kc_connect_tcp(&c, e->port), 0);
		T_RC(kc_login(&c, "alice", SECRET_ALICE), 0);
		f.version = p.version = c.version;
		T_ASSERT(kc_request(&c, &f, its, 4, data, 4) > 0);
		T_EQ_INT(proto_encode(&p, NULL, 0, pb, sizeof(pb), NULL, NULL), PROTO_HDR_LEN);
		T_RC(kc_send(&c, pb, sizeof(pb)), 0);
		while (kc_recv(&c, &r, 3000) == 0) {
			struct proto_iter iter;
			struct proto_item pi;
			if (r.f.tag == 11)
				pong = r.f.status == 0;
			proto_iter_init(&iter, &r.f, NULL, NULL, 0);
			while (r.f.tag == 10 && proto_iter_next(&iter, &pi) == 1)
				if (pi.index < 4)
					st[pi.index] = pi.status;
			kc_resp_free(&r);
			if (pong)
				break;
		}
		ok = pong && kc_ping(&c) == 0;
		for (int i = 0; i < 4; i++)
			ok = ok && (st[i] == want[i] || (i == 3 && st[i] == KVT_OK));
		printf("  %-40s %s: %d %d %d %d, then PING %s\n",
		       "PUT: good, bad CRC, unknown ns, again", ok ? "ok  " : "BAD ", st[0], st[1],
		       st[2], st[3], pong ? "answered" : "NOT answered");
		e->cases++;
		if (!ok)
			e->bad++;
		{
			struct kvt_key k;
			struct kc_value v = { 0 };
			kvt_key_set(&k, "nat-mix-1", 9);
			rc = kc_get(&c, e->ns, &k, 0, 0, 0, 0, &v);
			e->cases++;
			if (rc != KVT_MISS) {
				printf("  the bad CRC's key: %d, not a miss\n", rc);
				e->bad++;
			}
			kc_value_free(&v);
			kvt_key_set(&k, "nat-mix-0", 9);
			rc = kc_get(&c, e->ns, &k, 0, 0, 0, 0, &v);
			e->cases++;
			if (rc != KVT_OK || v.len != sizeof(val) || memcmp(v.bytes, val, sizeof(val))) {
				printf("  the good key: %d, not the bytes put\n", rc);
				e->bad++;
			}
			kc_value_free(&v);
		}
		kc_close(&c);
	}
	/* PLACED items at their edges (a server outside a pod). */
	{
		size_t len;
		uint8_t *pf = nat_put_frame(e, "nat-pl", PROTO_IF_PLACED, 1, 100, &len);
		nat_mut(e, "PUT PLACED copies 0", pf, len, NAT_IT_OFF + 12, 4, 0, PROTO_EMALFORMED);
		nat_mut(e, "PUT PLACED copies 9", pf, len, NAT_IT_OFF + 12, 4, 9, PROTO_EMALFORMED);
		nat_mut(e, "PUT PLACED|REPAIR|FORWARD", pf, len, NAT_IT_OFF + 4, 2,
			PROTO_IF_PLACED | PROTO_IF_REPAIR | PROTO_IF_FORWARD, PROTO_EFLAGS);
		free(pf);
	}
}

static void phase_native_edges(void)
{
	struct nat_env e = { 0 };
	struct kc a;
	uint8_t v[3096];
	struct iovec parts[3] = { { v, 1000 }, { v + 1000, 2000 }, { v + 3000, 96 } };
	struct kvt_key key;
	uint64_t errs0, errs;

	start("native_edges", NULL);
	e.port = srv.port;
	T_RC(kc_connect_tcp(&e.ctl, srv.port), 0);
	T_RC(kc_login(&e.ctl, "admin", SECRET_ADMIN), 0);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	e.version = a.version;
	e.vmax = a.lim.value_max;
	T_RC(kc_register(&a, &desc, e.ns, NULL, 0), KVT_OK);
	tsrv_fill(v, sizeof(v), 3096);
	kvt_key_set(&key, "nat-v", 5);
	T_RC(kc_put(&a, e.ns, &key, parts, 3, NULL), KVT_OK);
	errs0 = stat_opt("server.errors.malformed");
	rss_begin();
	nat_headers(&e);
	nat_tables(&e);
	nat_setup(&e);
	nat_ranges(&e, &a);
	nat_streams(&e);
	nat_dups(&e, &a);
	{
		/* DRAIN by the admin of a server outside a pod: -ENOTSUP, kept. */
		uint8_t t[8] = { 0 }, b[PROTO_HDR_LEN + 8];
		struct kc_resp r;
		nat_le(t, PROTO_DRAIN_STAY, 4);
		nat_raw(b, e.ctl.version, PROTO_OP_DRAIN, 0, t, 8);
		T_RC(kc_send(&e.ctl, b, sizeof(b)), 0);
		T_RC(kc_recv(&e.ctl, &r, 3000), 0);
		printf("  DRAIN STAY by the admin outside a pod: %d (%s)\n", r.f.status,
		       kvt_strerror(r.f.status));
		e.cases++;
		if (r.f.status != -ENOTSUP || r.f.op != PROTO_OP_DRAIN)
			e.bad++;
		kc_resp_free(&r);
		T_RC(kc_ping(&e.ctl), 0);
	}
	/* The value is what it was. */
	{
		struct kc_value got = { 0 };
		T_RC(kc_get(&a, e.ns, &key, 0, 0, 0, 0, &got), KVT_OK);
		T_EQ_INT(got.len, sizeof(v));
		T_ASSERT(memcmp(got.bytes, v, sizeof(v)) == 0);
		kc_value_free(&got);
	}
	rss_end(DRAM + MAX_MEMORY);
	errs = stat_opt("server.errors.malformed") - errs0;
	printf("native_edges: %u of %u cases as they must be; the admin's PING at most %.1f ms "
	       "between them; errors.malformed +%" PRIu64 "\n", e.cases - e.bad, e.cases,
	       e.ping_max_ns / 1e6, errs);
	T_EQ_INT(e.bad, 0);
	T_LE_INT(e.ping_max_ns, 2000000000ull);
	kc_close(&a);
	kc_close(&e.ctl);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * native_flood: frames split byte by byte, connections closed mid-frame,
 * and pipelines of thousands of requests whose answers are never read
 * (4 connections, one of them the admin's STATS ALL, ~30 KB an answer),
 * while another client's round trips are timed.
 */

#define NF_FLOODERS 4
#define NF_FRAMES 50000
/* The floods' time; the samples are taken for a second less.  4 until
 * 2026-12-06: 2 s of samples still take ~270 (ASan; at most 400 kept)
 * against the 100 asserted and the old loop's as few as 6. */
#define NF_SECONDS 3
/* Another client's GET + PING beside the floods, ASan, load ~10: p50
 * 0.3-0.4 ms, max 39-67 ms, 400 samples in 3 s since a connection takes
 * at most KVTD_PARSE_FRAMES frames a loop iteration; before, a read
 * buffer's worth (~12,000 small frames) in one go: max 213-628 ms, p50 up
 * to 628 ms, as few as 6 samples.  TSan: before, p50 609-772 ms. */
#ifdef HOSTILE_TSAN
#define NF_SAMPLES_MIN 3u
#define NF_P50_MAX_NS 3000000000ull
#define NF_MAX_NS 5000000000ull
#else
#define NF_SAMPLES_MIN 100u
#define NF_P50_MAX_NS 20000000ull
#define NF_MAX_NS 250000000ull
#endif

struct nf_flooder {
	pthread_t t;
	int fd;
	uint8_t *buf;
	size_t len;
	int64_t sent;
};

static void *nf_flood_main(void *arg)
{
	struct nf_flooder *f = arg;

	f->sent = send_for(f->fd, f->buf, f->len, NF_SECONDS * 1000);
	return NULL;
}

/* Frames of mixed opcodes, back to back, into one buffer. */
static void nf_build(struct nf_flooder *fl, struct kc *c, const uint8_t *ns, bool admin)
{
	size_t cap = (size_t)NF_FRAMES * 200, len = 0;
	struct proto_item it = { 0 };

	fl->buf = malloc(cap);
	kvt_key_set(&it.key, "nf-v", 4);
	for (unsigned i = 0; i < NF_FRAMES; i++) {
		struct proto_frame f = { .ns_count = 1, .ns = ns, .tag = c->next_tag++,
					 .version = c->version };
		uint32_t n = 1;
		int64_t w;
		switch (admin ? 5 : i % 5) {
		case 0: f.op = PROTO_OP_PING; f.ns_count = 0; f.ns = NULL; n = 0; break;
		case 1: f.op = PROTO_OP_GET; break;
		case 2: f.op = PROTO_OP_EXISTS; break;
		case 3: f.op = PROTO_OP_LOOKUP; break;
		case 4: f.op = PROTO_OP_STATS; f.ns_count = 0; f.ns = NULL; n = 0;
			f.scope.scope = PROTO_SCOPE_TENANT; break;
		default: f.op = PROTO_OP_STATS; f.ns_count = 0; f.ns = NULL; n = 0;
			f.scope.scope = PROTO_SCOPE_ALL; break;
		}
		w = proto_encode(&f, &it, n, fl->buf + len, cap - len, NULL, NULL);
		T_ASSERT(w > 0);
		len += (size_t)w;
	}
	fl->len = len;
	fl->fd = c->fd;
}

static void phase_native_flood(void)
{
	uint8_t ns[PROTO_DIGEST_LEN], v[4096];
	struct iovec one = { v, sizeof(v) };
	struct kc a, fl_c[NF_FLOODERS], good;
	struct nf_flooder fl[NF_FLOODERS];
	struct kvt_key key;
	uint64_t used0, used_peak = 0, lat[400], t_end, deferred0;
	unsigned nlat = 0, bad_rt = 0;

	start("native_flood", NULL);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, sizeof(v), 77);
	kvt_key_set(&key, "nf-v", 4);
	T_RC(kc_put(&a, ns, &key, &one, 1, NULL), KVT_OK);
	used0 = stat_of("server.mem_used");
	rss_begin();

	/* 1. A PUT and a GET, each written one byte per send(). */
	{
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns,
					 .tag = a.next_tag++, .version = a.version };
		uint64_t lens[2] = { 2048, 2048 };
		uint32_t crcs[2] = { kvt_crc32c(0, v, 2048), kvt_crc32c(0, v + 2048, 2048) };
		struct proto_item it = { .part_count = 2, .part_lens = lens, .part_crcs = crcs };
		struct kc_value got = { 0 };
		struct kc_resp r;
		size_t len;
		uint8_t *b;
		uint64_t t0 = tsrv_now_ns();
		kvt_key_set(&it.key, "nf-bytes", 8);
		b = nat_encode(&f, &it, 1, &len);
		b = realloc(b, len + sizeof(v));
		memcpy(b + len, v, sizeof(v));
		len += sizeof(v);
		for (size_t i = 0; i < len; i++)
			T_RC(kc_send(&a, b + i, 1), 0);
		T_RC(kc_recv(&a, &r, 5000), 0);
		printf("native_flood: a PUT of %zu bytes sent a byte per send() in %.0f ms: "
		       "status %d\n", len, (tsrv_now_ns() - t0) / 1e6, r.f.status);
		T_EQ_INT(r.f.status, 0);
		kc_resp_free(&r);
		free(b);
		/* The GET, byte by byte too. */
		{
			struct proto_frame gf = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns,
						  .tag = a.next_tag++, .version = a.version };
			struct proto_item gi = { 0 };
			struct nat_check k = { v, sizeof(v), 0, 0, 0 };
			kvt_key_set(&gi.key, "nf-bytes", 8);
			b = nat_encode(&gf, &gi, 1, &len);
			for (size_t i = 0; i < len; i++)
				T_RC(kc_send(&a, b + i, 1), 0);
			T_ASSERT(kc_recv_items(&a, 5000, nat_check_item, &k, NULL) >= 1);
			T_EQ_INT(k.ok, 1);
			free(b);
		}
		T_RC(kc_get(&a, ns, &it.key, 0, 0, 0, 0, &got), KVT_OK);
		T_EQ_INT(got.len, sizeof(v));
		T_ASSERT(memcmp(got.bytes, v, sizeof(v)) == 0);
		kc_value_free(&got);
	}

	/* 2. Connections closed mid-header, mid-table and mid-value: nothing
	 * stored, nothing left charged or pinned. */
	{
		enum { CUTS = 18, CUT_LEN = 1u << 20 };
		uint8_t *big = malloc(CUT_LEN);
		unsigned missing = 0;
		uint64_t used = 0, pins, dram0 = stat_of("dram.used_bytes"), dram = 0;
		tsrv_fill(big, CUT_LEN, 5);
		for (unsigned i = 0; i < CUTS; i++) {
			struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns,
						 .tag = 9, .version = a.version };
			uint64_t l = CUT_LEN;
			uint32_t crc = kvt_crc32c(0, big, CUT_LEN);
			struct proto_item it = { .part_count = 1, .part_lens = &l, .part_crcs = &crc };
			struct kc c;
			char name[32];
			size_t len, cut;
			uint8_t *b;
			snprintf(name, sizeof(name), "nf-cut-%u", i);
			kvt_key_set(&it.key, name, strlen(name));
			f.version = 0;
			T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
			f.version = c.version;
			b = nat_encode(&f, &it, 1, &len);
			T_RC(kc_send(&c, b, i == 0 ? 20 : i == 1 ? len - 3 : len), 0);
			cut = i < 2 ? 0 : (size_t)CUT_LEN * (i - 1) / CUTS;
			if (cut && i < CUTS - 1)
				T_RC(kc_send(&c, big, cut), 0);
			else if (i == CUTS - 1)
				T_RC(kc_send(&c, big, CUT_LEN - 1), 0); /* all but the last byte */
			free(b);
			kc_close(&c);
		}
		for (int w = 0; w < 300; w++) {
			used = stat_of("server.mem_used");
			if (used <= used0 + (64u << 10))
				break;
			tsrv_sleep_ms(10);
		}
		for (unsigned i = 0; i < CUTS; i++) {
			char name[32];
			struct kvt_key k;
			snprintf(name, sizeof(name), "nf-cut-%u", i);
			kvt_key_set(&k, name, strlen(name));
			if (kc_exists(&a, ns, &k, NULL) == KVT_MISS)
				missing++;
		}
		pins = stat_opt("store.pins_active");
		/* Their DRAM reservations (values received in place) given
		 * back: the tier holds what it held. */
		for (int w = 0; w < 300; w++) {
			dram = stat_of("dram.used_bytes");
			if (dram <= dram0)
				break;
			tsrv_sleep_ms(10);
		}
		printf("native_flood: %u connections closed mid-frame: %u of %u keys absent, "
		       "mem_used %" PRIu64 " B (before %" PRIu64 "), pins %" PRIu64 ", DRAM used %"
		       PRIu64 " B (before %" PRIu64 ")\n", CUTS, missing, CUTS, used, used0, pins,
		       dram, dram0);
		T_EQ_INT(missing, CUTS);
		T_LE_INT(dram, dram0);
		T_LE_INT(used, used0 + (64u << 10));
		T_EQ_INT(pins, 0);
		free(big);
	}

	/* 3. Pipelines never read, another client timed meanwhile. */
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	for (unsigned i = 0; i < NF_FLOODERS; i++) {
		bool admin = i == NF_FLOODERS - 1;
		T_RC(kc_dial(&fl_c[i], srv.port, admin ? "admin" : "alice", admin ? SECRET_ADMIN
									 : SECRET_ALICE), 0);
		nf_build(&fl[i], &fl_c[i], ns, admin);
		pthread_create(&fl[i].t, NULL, nf_flood_main, &fl[i]);
	}
	deferred0 = stat_of("server.parse_deferred");
	t_end = tsrv_now_ns() + (NF_SECONDS - 1) * 1000000000ull;
	while (tsrv_now_ns() < t_end && nlat < sizeof(lat) / sizeof(lat[0])) {
		uint64_t t0 = tsrv_now_ns(), u;
		struct kc_value got = { 0 };
		if (kc_get(&good, ns, &key, 0, 0, 0, 0, &got) != KVT_OK || got.len != sizeof(v) ||
		    memcmp(got.bytes, v, sizeof(v)) != 0)
			bad_rt++;
		kc_value_free(&got);
		if (kc_ping(&good) != 0)
			bad_rt++;
		lat[nlat++] = tsrv_now_ns() - t0;
		if (nlat % 20 == 0 && (u = stat_of("server.mem_used")) > used_peak)
			used_peak = u;
		tsrv_sleep_ms(5);
	}
	for (unsigned i = 0; i < NF_FLOODERS; i++)
		pthread_join(fl[i].t, NULL);
	{
		uint64_t s[400];
		memcpy(s, lat, nlat * sizeof(*s));
		qsort(s, nlat, sizeof(*s), cmp_u64);
		printf("native_flood: %u pipelines of %u frames never read: sent", NF_FLOODERS,
		       NF_FRAMES);
		for (unsigned i = 0; i < NF_FLOODERS; i++)
			printf(" %" PRId64 "/%zu", fl[i].sent, fl[i].len);
		printf(" bytes; another client's GET+PING: %u, p50 %.1f ms, max %.1f ms, %u failed; "
		       "mem_used peak %" PRIu64 " KiB of %u\n", nlat, s[nlat / 2] / 1e6,
		       s[nlat - 1] / 1e6, bad_rt, used_peak >> 10, MAX_MEMORY >> 10);
		/* The cause, not only its effect on the latency: the
		 * pipelines' parsing was cut at 64 frames an iteration. */
		T_ASSERT(stat_of("server.parse_deferred") > deferred0);
		T_GE_INT(nlat, NF_SAMPLES_MIN);
		T_EQ_INT(bad_rt, 0);
		T_LE_INT(s[nlat / 2], NF_P50_MAX_NS);
		/* The bound on the tail is the second worst: one descheduling
		 * of the client on 2 loaded cores took 348 ms once, where
		 * the old server's whole-buffer parse made many slow (max
		 * 213-628 ms, p50 up to 628); the worst gets 4x. */
		T_LE_INT(s[nlat - 2], NF_MAX_NS);
		T_LE_INT(s[nlat - 1], 4 * NF_MAX_NS);
		T_LE_INT(used_peak, MAX_MEMORY);
	}
	rss_end(DRAM + MAX_MEMORY);
	for (unsigned i = 0; i < NF_FLOODERS; i++) {
		kc_close(&fl_c[i]);
		free(fl[i].buf);
	}
	/* Their charges all come back. */
	{
		uint64_t used = 0;
		for (int w = 0; w < 300; w++) {
			used = stat_of("server.mem_used");
			if (used <= used0 + (64u << 10))
				break;
			tsrv_sleep_ms(10);
		}
		printf("native_flood: mem_used %" PRIu64 " B once they closed (before %" PRIu64
		       ")\n", used, used0);
		T_LE_INT(used, used0 + (64u << 10));
	}
	kc_close(&good);
	kc_close(&a);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_flood (attack15): RESP pipelines of small commands.  respd_parse
 * ran every complete command in the read buffer in one go (~2,600 ECHOs
 * a 64 KiB buffer), so 4 connections pipelining ECHO held their loop and
 * another client's PING waited for all of them.  A RESP connection now
 * takes at most KVTD_PARSE_FRAMES commands a loop iteration, as a native
 * one does (native_flood); the rest of its buffer waits for the next
 * iteration.  The flooders read their answers (a real pipelining client)
 * and stop sending at the end: every command they sent is answered,
 * though nothing more arrives to wake their connections.
 */

#define RF_FLOODERS 4
#define RF_CMDS 200000u
/* The pipelines' time; the PINGs are timed for a second less.  4 until
 * 2026-12-06: 2 s of PINGs still take ~270 (ASan, 400 in 3 s even
 * beside test_ssd at load 13-16) against the 100 asserted and the old
 * loop's 54-76 in 3 s. */
#define RF_SECONDS 3
#define RF_CMD "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n"
#define RF_REPLY "$5\r\nhello\r\n"
/* Another client's PING beside the 4 pipelines on one loop, ASan, load
 * 2-4: before, p50 33-52 ms, max 49-159 ms, 54-76 samples in 3 s; now
 * p50 0.7-1.3 ms, 400 samples, max 2-5 ms and once 181 ms (the machine: a
 * scheduling hiccup, not the loop).  p50 and the samples tell the two
 * apart; the max only catches a loop held for a second.  TSan: before,
 * p50 30 ms, 83 samples; now p50 0.6-1.2 ms, max 4-68 ms (there the
 * phase is for races and the stall: looser bounds).  ASan: p50 and max
 * doubled (HOSTILE_BESIDE), the samples not. */
#ifdef HOSTILE_TSAN
#define RF_SAMPLES_MIN 20u
#define RF_P50_MAX_NS 50000000ull
#define RF_MAX_NS 3000000000ull
#else
#define RF_SAMPLES_MIN 100u
#define RF_P50_MAX_NS (10000000ull * HOSTILE_BESIDE)
#define RF_MAX_NS (1000000000ull * HOSTILE_BESIDE)
#endif

struct rf_flooder {
	pthread_t t;
	int fd;
	const char *buf;
	size_t len;
	uint64_t sent, got; /* bytes */
	bool failed;
};

/* Send buf over and over for RF_SECONDS, reading the answers; then
 * read until every complete command sent is answered (or 30 s). */
static void *rf_flood_main(void *arg)
{
	struct rf_flooder *f = arg;
	uint64_t t = tsrv_now_ns(), end = t + RF_SECONDS * 1000000000ull;
	uint64_t drain_end = end + 30000000000ull, want = 0;
	size_t off = 0;
	char sink[65536];

	for (;;) {
		bool sending = tsrv_now_ns() < end;
		struct pollfd p = { .fd = f->fd, .events = POLLIN | (sending ? POLLOUT : 0) };
		if (!sending) {
			want = f->sent / (sizeof(RF_CMD) - 1) * (sizeof(RF_REPLY) - 1);
			if (f->got >= want || tsrv_now_ns() > drain_end)
				break;
		}
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (p.revents & POLLIN) {
			ssize_t r = recv(f->fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				f->failed = true;
				break;
			}
			if (r > 0)
				f->got += (uint64_t)r;
		}
		if (sending && (p.revents & POLLOUT)) {
			ssize_t w = send(f->fd, f->buf + off, f->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				f->failed = true;
				break;
			}
			if (w > 0) {
				f->sent += (uint64_t)w;
				off = (off + (size_t)w) % f->len;
			}
		}
	}
	return NULL;
}

/* RESP PINGs on fd every 5 ms until end_ns (or cap of them): each
 * round trip's time into lat, and the server's CPU meanwhile into cpu
 * (srv_cpu_ns) unless NULL; returns how many, *bad those that failed. */
static unsigned resp_ping_lat(int fd, uint64_t end_ns, uint64_t *lat, uint64_t *cpu,
			      unsigned cap, unsigned *bad)
{
	const char *ping = "*1\r\n$4\r\nPING\r\n";
	unsigned n = 0;

	while (tsrv_now_ns() < end_ns && n < cap) {
		char reply[16] = { 0 };
		bool closed = false;
		uint64_t c0 = cpu ? srv_cpu_ns() : 0, t0 = tsrv_now_ns();
		if (send_for(fd, ping, strlen(ping), 5000) != (int64_t)strlen(ping) ||
		    recv_for(fd, reply, 8, 5000, &closed) != 7 || strcmp(reply, "+PONG\r\n") != 0)
			(*bad)++;
		lat[n] = tsrv_now_ns() - t0;
		if (cpu)
			cpu[n] = srv_cpu_ns() - c0;
		n++;
		tsrv_sleep_ms(5);
	}
	return n;
}

static void phase_resp_flood(void)
{
	/* One loop: the pipelines and the timed client share it. */
	const char *extra[] = { "--resp", "127.0.0.1:0", "--threads", "1", NULL };
	struct rf_flooder fl[RF_FLOODERS];
	size_t cmd_len = sizeof(RF_CMD) - 1, len = (size_t)RF_CMDS * cmd_len;
	char *buf = malloc(len);
	uint64_t lat[400], s[400], t_end, deferred0;
	unsigned nlat = 0, bad_rt = 0, unanswered = 0;
	uint16_t port;
	int good;

	T_ASSERT(buf != NULL);
	for (unsigned i = 0; i < RF_CMDS; i++)
		memcpy(buf + (size_t)i * cmd_len, RF_CMD, cmd_len);
	start("resp_flood", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	good = resp_alice(port);
	rss_begin();
	for (unsigned i = 0; i < RF_FLOODERS; i++) {
		fl[i] = (struct rf_flooder){ .fd = resp_alice(port), .buf = buf, .len = len };
		pthread_create(&fl[i].t, NULL, rf_flood_main, &fl[i]);
	}
	tsrv_sleep_ms(200); /* the pipelines under way */
	deferred0 = stat_of("server.parse_deferred");
	t_end = tsrv_now_ns() + (RF_SECONDS - 1) * 1000000000ull;
	nlat = resp_ping_lat(good, t_end, lat, NULL, sizeof(lat) / sizeof(lat[0]), &bad_rt);
	for (unsigned i = 0; i < RF_FLOODERS; i++)
		pthread_join(fl[i].t, NULL);
	memcpy(s, lat, nlat * sizeof(*s));
	qsort(s, nlat, sizeof(*s), cmp_u64);
	printf("resp_flood: %u pipelines of ECHO for %d s, commands sent / answered:", RF_FLOODERS,
	       RF_SECONDS);
	for (unsigned i = 0; i < RF_FLOODERS; i++) {
		uint64_t cmds = fl[i].sent / cmd_len, answered = fl[i].got / (sizeof(RF_REPLY) - 1);
		printf(" %" PRIu64 "/%" PRIu64 "%s", cmds, answered, fl[i].failed ? " (failed)" : "");
		if (fl[i].failed || answered != cmds || fl[i].got % (sizeof(RF_REPLY) - 1))
			unanswered++;
	}
	printf("; another client's PING: %u, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %u failed\n",
	       nlat, s[nlat / 2] / 1e6, s[nlat * 99 / 100] / 1e6, s[nlat - 1] / 1e6, bad_rt);
	T_EQ_INT(unanswered, 0);
	/* The cause: the pipelines' commands were cut at 64 an iteration. */
	T_ASSERT(stat_of("server.parse_deferred") > deferred0);
	T_GE_INT(nlat, RF_SAMPLES_MIN);
	T_EQ_INT(bad_rt, 0);
	T_LE_INT(s[nlat / 2], RF_P50_MAX_NS);
	T_LE_INT(s[nlat - 1], RF_MAX_NS);
	rss_end(DRAM + MAX_MEMORY);
	for (unsigned i = 0; i < RF_FLOODERS; i++)
		close(fl[i].fd);
	close(good);
	free(buf);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * big_frames (attack14's open item): a frame of up to 65,536 keys of GET,
 * EXISTS or LOOKUP was handled on its loop in one go: such frames back to
 * back (--max-memory 512M, so that their items, ~600 bytes each, were
 * taken rather than refused) held the loop 146-378 ms each under ASan,
 * and another client's PING waited as long (p99 346 ms).  Now a frame
 * names at most KVTD_FRAME_ITEMS_MAX (1024) keys -- more is answered
 * PROTO_ECOUNT and taken no further, the connection kept -- and a
 * connection's parse budget counts items as well as frames (1024 a loop
 * iteration; the first frame always).  One client sends a frame of
 * 65,536 keys (refused), then pipelines EXISTS of a present key, GET of
 * missing keys and LOOKUP of a present key, 16 frames of 1024 keys a
 * send; another client's PING is timed every 5 ms meanwhile.
 *
 * The bounds are ratios (get46): the same PINGs are timed first while the
 * same client pipelines the same operations in small frames (16 frames of
 * 64 keys a send: 1,024 items, what a loop iteration takes of big frames
 * now), no big frame in flight.  The fixed 100 ms p99 failed at load 8-11
 * on the shared 2-core machine (p99 172-398 ms, fix or not) and passed
 * alone at 10 ms.  With the items budget taken out of loop.c's
 * kvtd_conn_parse_budget (the connection's and the tenant's: 16 frames of
 * 1,024 an iteration), at load 12: p50 23-249 ms against the baseline's
 * 3-8 (4.3-57x), p95 12.1-12.7x, p99 4.8-14x (and parse_deferred +0); with
 * it, at load 8-12: p50 0.8-8.1x, p95 1.5-1.9x, p99 0.3-2.2x (ASan), p50
 * 0.3-5.1x, p95 0.9-2.9x, p99 0.7-25x (release: its baseline's p99 is 5-8
 * ms, and one stall of the machine, ~120 ms, is the p99 of 133 PINGs).
 * So the p50 is held to 16x and the p95 to 4x; the p99 and the max are
 * printed.
 *
 * One baseline window then one attack window let a neighbour's burst
 * that fell in the attack's alone fail the bound: beside another ASan
 * test the p95 read 4.11x (6.70 ms against 1.63), alone 2.9x (flaky47,
 * 2026-12-07).  So BF_ROUNDS pairs of windows, baseline then attack, and
 * each bound holds for the best pair's ratio: a burst must spoil every
 * pair to fail it, while the old loop's 12x is in every window.
 */

#define BF_KEYS 1024u /* KVTD_FRAME_ITEMS_MAX */
#define BF_SMALL 64u  /* the baseline's frames: BF_PIPE of them, 1,024 keys */
#define BF_BIG 65536u
#define BF_PIPE 16u
/* The PINGs' time, each window: 1 s takes ~120 (ASan), the p95 their 7th
 * worst (2 s in one pair until flaky47, 3 until 2026-12-06). */
#define BF_SECONDS 1u
#define BF_ROUNDS 3u
#define BF_P50_RATIO 16u
#define BF_P95_RATIO 4u

struct bf_flooder {
	pthread_t t;
	uint16_t port;
	const uint8_t *ns;
	unsigned keys; /* a frame's: BF_KEYS, after a frame of BF_BIG; or BF_SMALL */
	_Atomic bool stop;
	unsigned frames;
	int32_t big_status;
	uint64_t big_ns;
	bool failed;
};

static void *bf_flood_main(void *arg)
{
	struct bf_flooder *b = arg;
	static const unsigned ops[3] = { PROTO_OP_EXISTS, PROTO_OP_GET, PROTO_OP_LOOKUP };
	struct proto_item *its = calloc(BF_BIG, sizeof(*its));
	struct kvt_key hit, miss;
	struct kc c;
	int32_t st = 0;
	uint64_t t0;

	kvt_key_set(&hit, "bf", 2);
	kvt_key_set(&miss, "bf-missing", 10);
	if (kc_connect_tcp(&c, b->port) != 0 || kc_login(&c, "alice", SECRET_ALICE) != 0) {
		b->failed = true;
		free(its);
		return NULL;
	}
	/* More than a frame may name: refused whole, the connection kept. */
	for (unsigned i = 0; i < BF_BIG && b->keys == BF_KEYS; i++)
		its[i].key = hit;
	if (b->keys == BF_KEYS) {
		struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 1, .ns = b->ns };
		t0 = tsrv_now_ns();
		if (kc_request(&c, &f, its, BF_BIG, NULL, 0) <= 0 ||
		    kc_recv_items(&c, 30000, NULL, NULL, &st) < 1 || kc_ping(&c) != 0)
			b->failed = true;
		b->big_ns = tsrv_now_ns() - t0;
		b->big_status = st;
	}
	for (unsigned round = 0; !b->failed && !atomic_load(&b->stop); round++) {
		for (unsigned j = 0; j < BF_PIPE; j++) {
			unsigned k = (round * BF_PIPE + j) % 3;
			struct proto_frame f = { .op = ops[k], .ns_count = 1, .ns = b->ns };
			for (unsigned i = 0; i < b->keys; i++)
				its[i].key = ops[k] == PROTO_OP_GET ? miss : hit;
			if (kc_request(&c, &f, its, b->keys, NULL, 0) <= 0)
				b->failed = true;
		}
		for (unsigned j = 0; j < BF_PIPE && !b->failed; j++) {
			if (kc_recv_items(&c, 30000, NULL, NULL, &st) < 1 || st != 0)
				b->failed = true;
			else
				b->frames++;
		}
	}
	kc_close(&c);
	free(its);
	return NULL;
}

/* p's PINGs timed every 5 ms for BF_SECONDS while b floods: sorted into
 * lat (2,048 at most); how many. */
static unsigned bf_pings(struct kc *p, struct bf_flooder *b, uint64_t *lat)
{
	uint64_t end;
	unsigned n = 0;

	pthread_create(&b->t, NULL, bf_flood_main, b);
	tsrv_sleep_ms(200);
	end = tsrv_now_ns() + BF_SECONDS * 1000000000ull;
	while (tsrv_now_ns() < end && n < 2048) {
		uint64_t t0 = tsrv_now_ns();
		if (kc_ping(p) != 0)
			break;
		lat[n++] = tsrv_now_ns() - t0;
		tsrv_sleep_ms(5);
	}
	atomic_store(&b->stop, true);
	pthread_join(b->t, NULL);
	if (n == 0)
		lat[n++] = UINT64_MAX;
	qsort(lat, n, sizeof(lat[0]), cmp_u64);
	return n;
}

static void phase_big_frames(void)
{
	const char *extra[] = { "--max-memory", "512M", "--threads", "1", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], val[4096];
	struct iovec v = { val, sizeof(val) };
	/* the best pairs' (attack, baseline): p50, then p95 */
	uint64_t lat[2048], calm[2048], deferred = 0, best[4] = { 0 };
	unsigned n, bn;
	struct kvt_key k;
	struct kc c, p;

	start("big_frames", extra);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "bf", 2);
	memset(val, 'b', sizeof(val));
	T_RC(kc_put(&c, ns, &k, &v, 1, NULL), KVT_OK);
	{
		/* A PUT of 1025 values: refused whole once its data section
		 * is read and dropped, nothing stored, the connection kept. */
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		struct proto_item *its = calloc(BF_KEYS + 1, sizeof(*its));
		uint64_t len16 = 16;
		uint32_t crc16 = kvt_crc32c(0, val, 16);
		struct iovec data = { malloc((BF_KEYS + 1) * 16), (BF_KEYS + 1) * 16 };
		struct kc_resp r;
		for (unsigned i = 0; i <= BF_KEYS; i++) {
			char key[16];
			snprintf(key, sizeof(key), "bf-put-%u", i);
			kvt_key_set(&its[i].key, key, strlen(key));
			its[i].part_count = 1;
			its[i].part_lens = &len16;
			its[i].part_crcs = &crc16;
			memcpy((uint8_t *)data.iov_base + (size_t)i * 16, val, 16);
		}
		T_ASSERT(kc_request(&c, &f, its, BF_KEYS + 1, &data, 1) > 0);
		T_RC(kc_recv(&c, &r, 10000), 0);
		printf("big_frames: a PUT of %u values: status %d\n", BF_KEYS + 1, r.f.status);
		T_EQ_INT(r.f.status, PROTO_ECOUNT);
		kc_resp_free(&r);
		T_RC(kc_ping(&c), 0);
		T_RC(kc_exists(&c, ns, &its[0].key, NULL), KVT_MISS);
		free(data.iov_base);
		free(its);
	}
	T_RC(kc_dial(&p, srv.port, "admin", SECRET_ADMIN), 0);
	for (unsigned r = 0; r < BF_ROUNDS; r++) {
		struct bf_flooder b = { 0 }, s = { 0 };
		uint64_t d0, d1;
		/* The baseline: the same operations in small frames. */
		s.port = srv.port;
		s.ns = ns;
		s.keys = BF_SMALL;
		bn = bf_pings(&p, &s, calm);
		T_RC(kc_stat(&p, PROTO_SCOPE_ALL, "server.parse_deferred", &d0), 0);
		b.port = srv.port;
		b.ns = ns;
		b.keys = BF_KEYS;
		n = bf_pings(&p, &b, lat);
		T_RC(kc_stat(&p, PROTO_SCOPE_ALL, "server.parse_deferred", &d1), 0);
		deferred += d1 - d0;
		printf("big_frames: round %u: another client's PING over %u while %u frames of %u "
		       "keys were answered (%u a send): p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max "
		       "%.2f ms\n", r, bn, s.frames, BF_SMALL, BF_PIPE, calm[bn / 2] / 1e6,
		       calm[bn * 95 / 100] / 1e6, calm[bn * 99 / 100] / 1e6, calm[bn - 1] / 1e6);
		printf("big_frames: round %u: a frame of %u keys: status %d in %.1f ms; then %u "
		       "frames of %u keys (EXISTS, GET of misses, LOOKUP; %u a send) on one loop, "
		       "parse_deferred +%" PRIu64 "; another client's PING over %u: p50 %.2f ms "
		       "(%.1fx), p95 %.2f ms (%.1fx), p99 %.2f ms (%.1fx), max %.2f ms (%.1fx)\n",
		       r, BF_BIG, b.big_status, b.big_ns / 1e6, b.frames, BF_KEYS, BF_PIPE, d1 - d0,
		       n, lat[n / 2] / 1e6, (double)lat[n / 2] / (double)calm[bn / 2],
		       lat[n * 95 / 100] / 1e6,
		       (double)lat[n * 95 / 100] / (double)calm[bn * 95 / 100],
		       lat[n * 99 / 100] / 1e6,
		       (double)lat[n * 99 / 100] / (double)calm[bn * 99 / 100], lat[n - 1] / 1e6,
		       (double)lat[n - 1] / (double)calm[bn - 1]);
		T_ASSERT(!s.failed);
		T_ASSERT(!b.failed);
		T_EQ_INT(b.big_status, PROTO_ECOUNT);
		T_GE_INT(s.frames, BF_PIPE);
		T_GE_INT(b.frames, BF_PIPE);
		/* the pair whose ratio is the lowest, each bound's own */
		if (r == 0 || (double)lat[n / 2] / (double)calm[bn / 2] <
				      (double)best[0] / (double)best[1]) {
			best[0] = lat[n / 2];
			best[1] = calm[bn / 2];
		}
		if (r == 0 || (double)lat[n * 95 / 100] / (double)calm[bn * 95 / 100] <
				      (double)best[2] / (double)best[3]) {
			best[2] = lat[n * 95 / 100];
			best[3] = calm[bn * 95 / 100];
		}
	}
	printf("big_frames: the best of %u pairs: p50 %.2f ms against %.2f (%.1fx), p95 %.2f ms "
	       "against %.2f (%.1fx); parse_deferred +%" PRIu64 "\n", BF_ROUNDS, best[0] / 1e6,
	       best[1] / 1e6, (double)best[0] / (double)best[1], best[2] / 1e6, best[3] / 1e6,
	       (double)best[2] / (double)best[3], deferred);
	T_GE_INT(deferred, 1); /* the items budget cut the pipelines */
	T_LE_INT(best[0], BF_P50_RATIO * best[1]); /* the best pair's p50 */
	T_LE_INT(best[2], BF_P95_RATIO * best[3]); /* the best pair's p95 */
	kc_close(&p);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * parse_partial (attack14/15's open item): a native connection's parse
 * budget (KVTD_PARSE_FRAMES, 64 frames a loop iteration) counted every
 * pass of the parser, a frame whose bytes had not all come included, so
 * that 64 whole frames and the start of a 65th were cut (deferred to the
 * next iteration, counted in server.parse_deferred) though nothing whole
 * was left; RESP counts only whole commands since attack15.  Each round
 * sends the rest of the last round's partial PING, 63 PINGs and the first
 * half of another in one send -- 64 whole frames -- and reads the 64
 * answers: nothing is deferred.
 */

#define PP_ROUNDS 20u

static void phase_parse_partial(void)
{
	struct proto_frame f = { .op = PROTO_OP_PING, .tag = 1 };
	uint8_t ping[PROTO_HDR_LEN + 64], *buf = malloc(65 * PROTO_HDR_LEN);
	uint64_t d0, deferred;
	unsigned answered = 0;
	struct kc c;
	int64_t plen;

	start("parse_partial", NULL);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	f.version = c.version;
	plen = proto_encode(&f, NULL, 0, ping, sizeof(ping), NULL, NULL);
	T_EQ_INT(plen, PROTO_HDR_LEN);
	d0 = stat_of("server.parse_deferred");
	for (unsigned r = 0; r < PP_ROUNDS; r++) {
		size_t n = 0, half = PROTO_HDR_LEN / 2;
		if (r > 0) {
			memcpy(buf, ping + half, PROTO_HDR_LEN - half);
			n = PROTO_HDR_LEN - half;
		}
		for (unsigned i = 0; i < (r > 0 ? 63u : 64u); i++, n += PROTO_HDR_LEN)
			memcpy(buf + n, ping, PROTO_HDR_LEN);
		memcpy(buf + n, ping, half);
		n += half;
		T_EQ_INT(send_for(c.fd, buf, n, 2000), (int64_t)n);
		for (unsigned i = 0; i < 64; i++) {
			struct kc_resp resp;
			T_RC(kc_recv(&c, &resp, 5000), 0);
			T_EQ_INT(resp.f.op, PROTO_OP_PING);
			kc_resp_free(&resp);
			answered++;
		}
	}
	deferred = stat_of("server.parse_deferred") - d0;
	printf("parse_partial: %u rounds of 64 whole PINGs and half of one more: %u answered, "
	       "parse_deferred +%" PRIu64 "\n", PP_ROUNDS, answered, deferred);
	T_EQ_INT(answered, PP_ROUNDS * 64);
	T_EQ_INT(deferred, 0);
	kc_close(&c);
	free(buf);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_inflight (attack14/15's open item): a RESP connection took
 * commands until 256 were unanswered (KVTD_INFLIGHT_MAX), whatever
 * --conn-inflight said; the native and S3 listeners honour it.  A DEL
 * that removed a value answers once its tombstone is durable (a flush
 * behind the SET's write-down -- ssd.admission=always -- on a device
 * slowed to 2 s a write, ssd.debug_write_delay_ms), and
 * RESP answers in order: the 200 PINGs pipelined behind it stay in
 * flight.  With --conn-inflight 8 the server takes 8 commands (the
 * tenant's requests counter, counted as each is parsed) and no more until
 * the DEL is answered; then every command is answered, in order.
 */

#define RI_INFLIGHT 8u
#define RI_PINGS 200u

static void phase_resp_inflight(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--ssd", "64M",
				"--threads", "1", "--conn-inflight", "8", "--set", "ssd.admission=always",
				"--set", "ssd.debug_write_delay_ms=2000", NULL };
	const char *series = "kvtier_tenant_requests_total{tenant=\"alice\"}";
	size_t cap = 64 + 16 + RI_PINGS * 6, want = 4 + RI_PINGS * 7, got = 0;
	char *cmd = malloc(cap), *reply = malloc(want + 64), *page;
	uint16_t mport;
	uint64_t req0, taken, t0, first_ms = 0;
	bool closed = false;
	int fd, n;

	start("resp_inflight", extra);
	mport = tsrv_listener_port(srv.log, "metrics");
	fd = resp_alice(tsrv_listener_port(srv.log, "RESP"));
	resp_set(fd, cmd, cap, "ri-key", 'r', 1000);
	page = tsrv_http_body(mport, "/metrics");
	req0 = tsrv_metric(page, series);
	free(page);
	n = snprintf(cmd, cap, "*2\r\n$3\r\nDEL\r\n$6\r\nri-key\r\n");
	for (unsigned i = 0; i < RI_PINGS; i++)
		n += snprintf(cmd + n, cap - (size_t)n, "PING\r\n");
	t0 = tsrv_now_ns();
	T_EQ_INT(send_for(fd, cmd, (size_t)n, 2000), n);
	tsrv_sleep_ms(500);
	page = tsrv_http_body(mport, "/metrics");
	taken = tsrv_metric(page, series) - req0;
	free(page);
	/* Every command is answered once the DEL is: ":1", then the PONGs. */
	while (got < want) {
		size_t r = recv_for(fd, reply + got, want + 1 - got, 10000, &closed);
		if (r == 0)
			break;
		if (!got)
			first_ms = (tsrv_now_ns() - t0) / 1000000;
		got += r;
	}
	printf("resp_inflight: DEL + %u PINGs in one send, --conn-inflight %u: %" PRIu64
	       " taken at 500 ms; the DEL answered at %" PRIu64 " ms; %zu of %zu reply bytes\n",
	       RI_PINGS, RI_INFLIGHT, taken, first_ms, got, want);
	/* The count was read while the DEL waited (doc/testing.md rule 6) */
	T_GE_INT(first_ms, 600);
	T_GE_INT(taken, 1);
	T_LE_INT(taken, RI_INFLIGHT);
	T_EQ_INT(got, want);
	T_ASSERT(strncmp(reply, ":1\r\n+PONG\r\n", 11) == 0);
	T_ASSERT(strncmp(reply + want - 7, "+PONG\r\n", 7) == 0);
	close(fd);
	free(cmd);
	free(reply);
	T_EQ_INT(tsrv_stop(&srv), 0);
}


/* ------------------------------------------------------------------------
 * delete_backlog (2026-12-04): a DEL that removed a value answers once its
 * tombstone is durable -- until now through a flush that waited for every
 * write-down queued before it, so one connection's writes held another's
 * deletes for as long as the device took to write them.  25 SETs written
 * through (ssd.admission=always) to a device slowed to 200 ms a write
 * (ssd.debug_write_delay_ms): a 5 s backlog.  A DEL on a second
 * connection answers ":1" behind at most the write in progress and the
 * sync (KVT_F_DELETES: the tombstone goes ahead of the backlog); before,
 * after about 4.8 s.
 */

#define DB_SETS 25

static void phase_delete_backlog(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--ssd", "64M", "--threads", "1",
				"--set", "ssd.admission=always",
				"--set", "ssd.debug_write_delay_ms=200", NULL };
	const char *del = "*2\r\n$3\r\nDEL\r\n$4\r\ndb07\r\n";
	size_t cap = 64 + 1000;
	char *cmd = malloc(cap), reply[8] = { 0 };
	bool closed = false;
	uint16_t port;
	uint64_t t0, ms;
	int w, d;

	start("delete_backlog", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	w = resp_alice(port);
	d = resp_alice(port);
	for (int i = 0; i < DB_SETS; i++) {
		char key[16];
		snprintf(key, sizeof(key), "db%02d", i);
		resp_set(w, cmd, cap, key, (char)('a' + i), 1000);
	}
	t0 = tsrv_now_ns();
	T_EQ_INT(send_for(d, del, strlen(del), 2000), (int64_t)strlen(del));
	recv_for(d, reply, 5, 20000, &closed);
	ms = (tsrv_now_ns() - t0) / 1000000;
	printf("delete_backlog: DEL behind %d write-downs of 200 ms each answered %.4s in "
	       "%" PRIu64 " ms\n", DB_SETS, reply, ms);
	T_ASSERT(strncmp(reply, ":1\r\n", 4) == 0);
	T_LE_INT(ms, 2500); /* the backlog: (DB_SETS - 1) x 200 ms */
	close(d);
	close(w);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ns_items (attack14): NS_REGISTER frames of many items, one new
 * namespace and the rest one known text.  Each item's canonical text
 * buffer (PROTO_CANON_MAX + 1 bytes) and its copy of the descriptor were
 * not charged, only the item's struct, so a frame held ~4 times what it
 * was charged while its new namespace's record was synced; frames of
 * 16,000 items on 2 connections took the whole budget (the admin's PING
 * -ENOMEM, --threads 1) and one such frame held the loop 435 ms (ASan).
 * Now a frame of more than 1024 items is refused whole (PROTO_ECOUNT, at
 * once, the connection kept), texts are charged, and a tenant's frames
 * in flight hold at most a quarter of the budget.  RSS must stay within
 * --max-memory (+ slack); another client's PING is timed on the loop.
 */

#define NSI_BIG 16000u   /* > KVTD_FRAME_ITEMS_MAX: refused whole */
#define NSI_ITEMS 1024u  /* the most a frame may name */
#define NSI_CONNS 3u
#define NSI_FRAMES 20u

static void phase_ns_items(void)
{
	struct kc a, fl[NSI_CONNS], good;
	char canon[PROTO_CANON_MAX + 1];
	uint8_t ns[PROTO_DIGEST_LEN];
	struct proto_item *its = calloc(NSI_BIG, sizeof(*its));
	uint64_t ping_max = 0, used_peak = 0, t_end;
	unsigned ok = 0, other = 0, pings = 0, sent_bad = 0;

	start("ns_items", (const char *const[]){ "--threads", "1", NULL });
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ns, canon, sizeof(canon)), KVT_OK);
	T_RC(kc_dial(&good, srv.port, "admin", SECRET_ADMIN), 0);
	rss_begin();
	for (unsigned i = 0; i < NSI_BIG; i++) {
		its[i].text = canon;
		its[i].text_len = (uint32_t)strlen(canon);
	}
	for (unsigned c = 0; c < NSI_CONNS; c++) {
		T_RC(kc_dial(&fl[c], srv.port, "alice", SECRET_ALICE), 0);
	}
	/* One frame of 16,000 alone: refused at once, a PING beside it. */
	{
		struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
		struct nat_check chk = { NULL, 0, 0, 0, 0 };
		uint64_t t0, t1, pmax = 0;
		int32_t st = 0;
		its[0].text = canon;
		its[0].text_len = (uint32_t)strlen(canon);
		t0 = tsrv_now_ns();
		T_GE_INT(kc_request(&fl[0], &f, its, NSI_BIG, NULL, 0), 1);
		for (int i = 0; i < 20; i++) {
			uint64_t p0 = tsrv_now_ns();
			T_RC(kc_ping(&good), 0);
			if (tsrv_now_ns() - p0 > pmax)
				pmax = tsrv_now_ns() - p0;
		}
		T_ASSERT(kc_recv_items(&fl[0], 60000, nat_check_item, &chk, &st) >= 1);
		t1 = tsrv_now_ns();
		printf("ns_items: one frame of %u known texts answered in %.1f ms (status %d); "
		       "PING beside it max %.1f ms\n", NSI_BIG, (t1 - t0) / 1e6, st, pmax / 1e6);
		T_EQ_INT(st, PROTO_ECOUNT);
		T_RC(kc_ping(&fl[0]), 0);
	}
	/* Each frame's first item a namespace of its own (a registry sync). */
	for (unsigned k = 0; k < NSI_FRAMES; k++)
		for (unsigned c = 0; c < NSI_CONNS; c++) {
			struct kvt_ns_desc d = desc;
			struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
			char model[32], fresh[PROTO_CANON_MAX + 1];
			uint8_t dg[PROTO_DIGEST_LEN];
			int n;
			snprintf(model, sizeof(model), "nsi-%u-%u", k, c);
			d.model = model;
			d.tenant = "alice";
			n = kvt_ns_digest(&d, dg, fresh, sizeof(fresh));
			T_ASSERT(n > 0);
			its[0].text = fresh;
			its[0].text_len = (uint32_t)n;
			if (kc_request(&fl[c], &f, its, NSI_ITEMS, NULL, 0) < 1)
				sent_bad++;
		}
	/* Another client meanwhile, until the answers have been waiting 2 s. */
	t_end = tsrv_now_ns() + 2000000000ull;
	while (tsrv_now_ns() < t_end) {
		uint64_t t0 = tsrv_now_ns(), u;
		T_RC(kc_ping(&good), 0);
		if (tsrv_now_ns() - t0 > ping_max)
			ping_max = tsrv_now_ns() - t0;
		if (++pings % 10 == 0 && (u = stat_of("server.mem_used")) > used_peak)
			used_peak = u;
		tsrv_sleep_ms(10);
	}
	for (unsigned c = 0; c < NSI_CONNS; c++)
		for (unsigned k = 0; k < NSI_FRAMES; k++) {
			struct nat_check chk = { NULL, 0, 0, 0, 0 };
			int32_t st = 0;
			if (kc_recv_items(&fl[c], 60000, nat_check_item, &chk, &st) < 1) {
				other += NSI_FRAMES - k; /* refused and closed (the table) */
				break;
			}
			if (st == 0 && chk.other == 0)
				ok++;
			else
				other++;
		}
	printf("ns_items: %u connections x %u NS_REGISTER frames of %u items: %u answered "
	       "whole, %u refused (-ENOMEM) or partly (%u sends cut); mem_used peak %" PRIu64
	       " KiB; another client's PING max %.1f ms over %u\n", NSI_CONNS, NSI_FRAMES,
	       NSI_ITEMS, ok, other, sent_bad, used_peak >> 10, ping_max / 1e6, pings);
	rss_end(MAX_MEMORY);
	T_GE_INT(ok, 1);
	T_LE_INT(ping_max, 2000000000ull);
	for (unsigned c = 0; c < NSI_CONNS; c++)
		kc_close(&fl[c]);
	kc_close(&good);
	kc_close(&a);
	free(its);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * in_share (attack14): one tenant's GET frames of 12,000 keys (answers of
 * 48 MB each, past the pin cap: they wait), one on each of 6 connections,
 * never read.  Each frame's items are charged (~600 bytes each: 7 MB), and
 * 4 of them held the whole budget: every other tenant's next frame was
 * refused.  (Since big_frames a frame names at most 1024 keys: 20
 * connections of one frame each.)  Now a tenant's frames in flight hold at most a quarter of
 * --max-memory (a frame alone is always taken): the rest are refused
 * -ENOMEM, the connections kept, and the admin's round trips succeed.
 * (Since attack21 a connection pinning nothing is answered KVT_EBUSY at
 * once while its tenant's answers pin their share of DRAM: most frames
 * are answered so, holding nothing; either way, each is refused.)
 */

#define IS_CONNS 20u
#define IS_ITEMS 1024u /* KVTD_FRAME_ITEMS_MAX: ~600 KiB of items a frame */

static void phase_in_share(void)
{
	uint8_t ns[PROTO_DIGEST_LEN], ans[PROTO_DIGEST_LEN];
	struct proto_item *its = calloc(IS_ITEMS, sizeof(*its));
	struct kc a, fl[IS_CONNS], adm;
	struct kvt_key k;
	uint64_t used, refused0, refused;
	unsigned busy = 0;
	int bad;

	/* 1024 values, one an item: since get46 a value named again in one
	 * answer pins its bytes once (pin_exact), so one value named 1024
	 * times no longer waits past the pin cap -- it is answered, 4 KiB
	 * pinned, and holds nothing here. */
	alice_values("in_share", &a, ns, &k, "is", its, IS_ITEMS, IS_ITEMS);
	refused0 = stat_of("server.mem_refused");
	rss_begin();
	for (unsigned c = 0; c < IS_CONNS; c++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
		T_RC(kc_dial(&fl[c], srv.port, "alice", SECRET_ALICE), 0);
		T_ASSERT(kc_request(&fl[c], &f, its, IS_ITEMS, NULL, 0) > 0);
		tsrv_sleep_ms(30);
	}
	tsrv_sleep_ms(500);
	used = stat_of("server.mem_used");
	refused = stat_of("server.mem_refused") - refused0;
	for (unsigned c = 0; c < IS_CONNS; c++) {
		int32_t fst, st;
		if (kc_peek_status(&fl[c], 0, &fst, &st) == 0 && fst == 0 && st == KVT_EBUSY)
			busy++;
	}
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&adm, &desc, ans, NULL, 0), KVT_OK);
	bad = roundtrips(&adm, ans, 8, 64u << 10, 21);
	printf("in_share: %u GET frames of %u keys left waiting, one a connection: mem_used %"
	       PRIu64 " KiB of %u (a quarter: %u), mem_refused +%" PRIu64 ", answered KVT_EBUSY "
	       "%u; the admin's failed round trips of 64 KiB: %d of 8\n", IS_CONNS, IS_ITEMS,
	       used >> 10, MAX_MEMORY >> 10, MAX_MEMORY >> 12, refused, busy, bad);
	rss_end(DRAM + MAX_MEMORY);
	T_EQ_INT(bad, 0);
	T_LE_INT(used, MAX_MEMORY / 2);
	T_GE_INT(refused + busy, 1);
	for (unsigned c = 0; c < IS_CONNS; c++)
		kc_close(&fl[c]);
	kc_close(&adm);
	kc_close(&a);
	free(its);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tbl_share: alice sends, on TS_CONNS connections, an NS_REGISTER frame
 * whose table (1024 long descriptors, ~0.8 MiB) is all there but its last
 * byte, and never finishes it.  A table still arriving was charged to
 * --max-memory only (its read buffer), never to her input share: 48 of
 * them took the whole 32 MiB, and the admin's round trips failed.  Now a
 * table past KVTD_RBUF_KEEP (16 KiB; KVTD_RBUF_MIN, 64 KiB, before
 * idle_rbuf) holds her share while it arrives, and one past
 * it is refused from its header (-ENOMEM answered, its bytes dropped, the
 * connection kept).
 */

#define TS_CONNS 48u
#define TS_ITEMS 1024u

static void phase_tbl_share(void)
{
	struct proto_item *its = calloc(TS_ITEMS, sizeof(*its));
	char (*texts)[PROTO_CANON_MAX + 1] = malloc((size_t)TS_ITEMS * sizeof(*texts));
	static struct kc fl[TS_CONNS];
	uint8_t ans[PROTO_DIGEST_LEN];
	uint64_t used, refused0, refused, tlen = 0;
	unsigned answered = 0, enomem = 0;
	uint8_t last = 0;
	struct kc adm;
	int bad;

	start("tbl_share", NULL);
	for (unsigned n = 0; n < TS_ITEMS; n++) {
		int tl = long_desc_text("tbl", n, texts[n]);
		its[n].text = texts[n];
		its[n].text_len = (uint32_t)tl;
		tlen += (uint64_t)tl + 16;
	}
	refused0 = stat_of("server.mem_refused");
	rss_begin();
	for (unsigned c = 0; c < TS_CONNS; c++) {
		struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
		int64_t len;
		uint8_t *buf;
		T_RC(kc_dial(&fl[c], srv.port, "alice", SECRET_ALICE), 0);
		f.tag = fl[c].next_tag++;
		f.version = fl[c].version;
		len = kc_encode(&f, its, TS_ITEMS, NULL, 0, &buf);
		T_ASSERT(len > 0);
		T_RC(kc_send(&fl[c], buf, (size_t)len - 1), 0); /* all but its last byte */
		last = buf[len - 1];
		free(buf);
	}
	tsrv_sleep_ms(500);
	used = stat_of("server.mem_used");
	refused = stat_of("server.mem_refused") - refused0;
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&adm, &desc, ans, NULL, 0), KVT_OK);
	bad = roundtrips(&adm, ans, 8, 256u << 10, 23);
	printf("tbl_share: %u NS_REGISTER tables of %" PRIu64 " KiB left a byte short: mem_used %"
	       PRIu64 " KiB of %u (a quarter: %u), mem_refused +%" PRIu64 " (%u answered); the "
	       "admin's failed round trips of 256 KiB: %d of 8\n", TS_CONNS, tlen >> 10,
	       used >> 10, MAX_MEMORY >> 10, MAX_MEMORY >> 12, refused, answered, bad);
	rss_end(DRAM + MAX_MEMORY);
	T_EQ_INT(bad, 0);
	T_LE_INT(used, MAX_MEMORY / 2);
	/* Each frame finished: the refused ones (their bytes dropped) are
	 * answered -ENOMEM, the others registered; every connection kept.
	 * (A frame refused from its header is counted in mem_refused once
	 * its table passed its CRC, since attack21: here, not above.) */
	for (unsigned c = 0; c < TS_CONNS; c++) {
		struct kc_resp r;
		T_RC(kc_send(&fl[c], &last, 1), 0);
		T_RC(kc_recv(&fl[c], &r, 20000), 0);
		enomem += r.f.status == -ENOMEM;
		answered++;
		kc_resp_free(&r);
		T_RC(kc_ping(&fl[c]), 0);
	}
	refused = stat_of("server.mem_refused") - refused0;
	printf("tbl_share: finished, %u answered, %u of them -ENOMEM; mem_refused +%" PRIu64 "\n",
	       answered, enomem, refused);
	T_GE_INT(refused, 1);
	T_GE_INT(enomem, refused); /* a held one may meet the share whole */
	for (unsigned c = 0; c < TS_CONNS; c++)
		kc_close(&fl[c]);
	kc_close(&adm);
	T_EQ_U64(stat_of("server.mem_used") <= (4u << 20), 1);
	free(its);
	free(texts);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tbl_wait: alice's NS_REGISTER of a new namespace is held in flight (the
 * registry's sync, shim_sync.c), then the same connection sends a table
 * larger than her input share (--max-memory 2M: 512 KiB) all but its last
 * byte.  The share refuses to hold it while that frame is in flight; the
 * connection used to be read on all the same (the pause waited for the
 * share to be full, not for this table), and the table was buffered whole
 * outside the share, charged to --max-memory only.  Now the connection is
 * not read until its frame in flight is answered.
 */

static void phase_tbl_wait(void)
{
	struct proto_item *its = calloc(TS_ITEMS, sizeof(*its));
	char (*texts)[PROTO_CANON_MAX + 1] = malloc((size_t)TS_ITEMS * sizeof(*texts));
	const char *extra[] = { "--ssd", "0", "--max-memory", "2M", NULL };
	char gate[700], file[720], one_text[PROTO_CANON_MAX + 1];
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct kvt_ns_desc one = desc;
	struct proto_item it1 = { 0 };
	uint64_t used0, used1;
	struct kc_resp r;
	struct kc x;
	uint8_t *buf;
	int64_t len;

	shim_arm(gate, sizeof(gate));
	start_with("tbl_wait", extra, NULL);
	unsetenv("LD_PRELOAD");
	for (unsigned n = 0; n < TS_ITEMS; n++) {
		struct kvt_ns_desc d = desc;
		char model[300], cfg[300], q[300];
		int tl;
		snprintf(model, sizeof(model), "tbw-%06u-%0240u", n, n);
		snprintf(cfg, sizeof(cfg), "%0250u", n);
		snprintf(q, sizeof(q), "q%0250u", n);
		d.model = model;
		d.config_hash = cfg;
		d.kv_quant = q;
		d.tenant = "alice";
		tl = kvt_ns_digest(&d, NULL, texts[n], PROTO_CANON_MAX + 1);
		T_ASSERT(tl > 0);
		its[n].text = texts[n];
		its[n].text_len = (uint32_t)tl;
	}
	T_RC(kc_dial(&x, srv.port, "alice", SECRET_ALICE), 0);
	/* 1. A new namespace: its registration held in the registry's sync. */
	one.model = "tbl-wait-model";
	it1.text = one_text;
	it1.text_len = (uint32_t)kvt_ns_digest(&one, NULL, one_text, sizeof(one_text));
	snprintf(file, sizeof(file), "%s/arm", gate);
	tsrv_write_file(NULL, file, "");
	T_ASSERT(kc_request(&x, &f, &it1, 1, NULL, 0) > 0);
	snprintf(file, sizeof(file), "%s/entered", gate);
	T_ASSERT(wait_file(file, 10000));
	used0 = stat_of("server.mem_used");
	/* 2. Behind it, the big table, all but its last byte. */
	f.tag = x.next_tag++;
	f.version = x.version;
	len = kc_encode(&f, its, TS_ITEMS, NULL, 0, &buf);
	T_ASSERT(len > (int64_t)(1u << 19));
	T_RC(kc_send(&x, buf, (size_t)len - 1), 0);
	tsrv_sleep_ms(500);
	used1 = stat_of("server.mem_used");
	printf("tbl_wait: a table of %" PRId64 " KiB behind a frame in flight: mem_used %" PRIu64
	       " -> %" PRIu64 " KiB\n", len >> 10, used0 >> 10, used1 >> 10);
	/* Not buffered (a few KiB of the admin's own frames aside). */
	T_LE_INT(used1, used0 + (256u << 10));
	/* 3. The first frame answered, the table is read (held to the share,
	 *    or refused from its header): answered once its last byte comes
	 *    (-ENOMEM at this share), the connection kept. */
	snprintf(file, sizeof(file), "%s/release", gate);
	tsrv_write_file(NULL, file, "");
	T_RC(kc_recv(&x, &r, 30000), 0);
	T_EQ_INT(r.f.status, 0);
	kc_resp_free(&r);
	T_RC(kc_send(&x, &buf[len - 1], 1), 0);
	T_RC(kc_recv(&x, &r, 30000), 0);
	printf("tbl_wait: then answered %d (%s)\n", r.f.status, kvt_strerror(r.f.status));
	kc_resp_free(&r);
	T_RC(kc_ping(&x), 0);
	free(buf);
	kc_close(&x);
	free(its);
	free(texts);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * in_share_data (attack14's open item: "each connection passes the share
 * by one frame"): alice's GET frames, pipelined on one connection and
 * never read, fill her quarter of --max-memory to within a few KiB (16
 * frames of 1024 keys of 160 values of 64 KiB -- answers past the pin cap: they
 * wait -- then 512, 256, ... 32 keys: those that do not fit are refused).
 * Then 5 more connections each send a PUT of 64 values of 64 KiB (4 MiB)
 * and 1 MiB of its bytes.  Each PUT's items were refused by the share, so
 * it took the other path: its whole data section was charged to
 * --max-memory (never to the share) and allocated, received, and only
 * then refused -- 5 connections held 20 MiB more of the 32 for as long as
 * they trickled.  Now every charge of a frame is held to the share: the
 * PUT is refused from its header, its data section read and dropped, it
 * is answered -ENOMEM, and the connection is kept.
 */

#define ISD_CONNS 5u
#define ISD_PUT_ITEMS 64u
#define ISD_VALUE (64u << 10)
#define ISD_ITEMS 1024u /* KVTD_FRAME_ITEMS_MAX */
/* The GETs name this many values, more than the connection's pin cap
 * (--dram/8) holds: since a pinned value counts once per answer, however
 * many items name it (value.c "Pinned values held"), GETs of one value
 * were answered at once and their frames no longer waited. */
#define ISD_KEYS 160u

static void phase_in_share_data(void)
{
	static const unsigned fill[] = { 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024,
					 1024, 1024, 1024, 1024, 1024, 1024, 1024, 512, 256,
					 128, 64, 32 };
	uint8_t ns[PROTO_DIGEST_LEN], ans[PROTO_DIGEST_LEN];
	struct proto_item *its = calloc(ISD_ITEMS, sizeof(*its));
	uint8_t *val = calloc(ISD_PUT_ITEMS, ISD_VALUE);
	struct iovec v = { val, ISD_VALUE };
	struct kc a, g, fl[ISD_CONNS], adm;
	struct kvt_key k;
	uint64_t used, lens[ISD_PUT_ITEMS];
	uint32_t crcs[ISD_PUT_ITEMS];
	struct kc_resp r;
	int bad, rc;

	start("in_share_data", NULL);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < ISD_KEYS; i++) {
		char key[24];
		snprintf(key, sizeof(key), "isd-g-%u", i);
		kvt_key_set(&k, key, strlen(key));
		T_RC(kc_put(&a, ns, &k, &v, 1, NULL), KVT_OK);
	}
	for (unsigned i = 0; i < ISD_ITEMS; i++) {
		char key[24];
		snprintf(key, sizeof(key), "isd-g-%u", i % ISD_KEYS);
		kvt_key_set(&its[i].key, key, strlen(key));
	}
	rss_begin();
	T_RC(kc_dial(&g, srv.port, "alice", SECRET_ALICE), 0);
	for (unsigned i = 0; i < sizeof(fill) / sizeof(fill[0]); i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
		T_ASSERT(kc_request(&g, &f, its, fill[i], NULL, 0) > 0);
	}
	tsrv_sleep_ms(500);
	for (unsigned i = 0; i < ISD_PUT_ITEMS; i++) {
		lens[i] = ISD_VALUE;
		crcs[i] = kvt_crc32c(0, val + (size_t)i * ISD_VALUE, ISD_VALUE);
	}
	for (unsigned c = 0; c < ISD_CONNS; c++) {
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		struct iovec part = { val, 1u << 20 };
		memset(its, 0, ISD_PUT_ITEMS * sizeof(*its));
		for (unsigned i = 0; i < ISD_PUT_ITEMS; i++) {
			char key[24];
			snprintf(key, sizeof(key), "isd-%u-%u", c, i);
			kvt_key_set(&its[i].key, key, strlen(key));
			its[i].part_count = 1;
			its[i].part_lens = &lens[i];
			its[i].part_crcs = &crcs[i];
		}
		T_RC(kc_dial(&fl[c], srv.port, "alice", SECRET_ALICE), 0);
		T_ASSERT(kc_request(&fl[c], &f, its, ISD_PUT_ITEMS, &part, 1) > 0);
	}
	tsrv_sleep_ms(500);
	used = stat_of("server.mem_used");
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_register(&adm, &desc, ans, NULL, 0), KVT_OK);
	bad = roundtrips(&adm, ans, 8, 64u << 10, 23);
	/* The rest of one PUT's bytes: it is answered -ENOMEM, and its
	 * connection still answers. */
	T_RC(kc_send(&fl[0], val + (1u << 20), (size_t)ISD_PUT_ITEMS * ISD_VALUE - (1u << 20)), 0);
	rc = kc_recv(&fl[0], &r, 10000);
	T_RC(rc, 0);
	printf("in_share_data: alice's GET frames fill her quarter, then %u PUTs of %u values of "
	       "%u KiB, 1 MiB of each sent: mem_used %" PRIu64 " KiB of %u (a quarter: %u); the "
	       "admin's failed round trips of 64 KiB: %d of 8; the first PUT completed: status "
	       "%d\n", ISD_CONNS, ISD_PUT_ITEMS, ISD_VALUE >> 10, used >> 10, MAX_MEMORY >> 10,
	       MAX_MEMORY >> 12, bad, r.f.status);
	T_EQ_INT(r.f.status, -ENOMEM);
	kc_resp_free(&r);
	T_RC(kc_ping(&fl[0]), 0);
	rss_end(DRAM + MAX_MEMORY);
	T_EQ_INT(bad, 0);
	T_LE_INT(used, MAX_MEMORY / 2);
	for (unsigned c = 0; c < ISD_CONNS; c++)
		kc_close(&fl[c]);
	kc_close(&g);
	kc_close(&adm);
	kc_close(&a);
	free(its);
	free(val);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * aux_walks (attack14, doc/security.md "Listener review, 2026-12-03"'s
 * open item): S3 listings keep 2 walks of the whole store (250,000
 * blocks) on the aux thread back to back, from 2 connections pipelining;
 * meanwhile another client's aux jobs -- a 1-byte RANGE of a 4 MiB part,
 * whose part check (> 1 MiB) runs there -- are timed, and against the
 * same jobs with no listings.  Walks have a lane of their own on the aux
 * thread (loop.c kvtd_aux_submit_walk): a job waits for at most the walk
 * running.  On a 2-core machine at load 10 the difference between one
 * walk and two (~1 ms each) is inside the noise: the phase reports the
 * figures and bounds only the median (20 ms; 40 under ASan: HOSTILE_BESIDE).
 */

/* Range checks timed alone, then beside the walks: 24 (p50 the 12th),
 * 40 until 2026-12-06 (each 20 ms apart: 0.6 s of the phase less). */
#define AW_RANGES 24u

struct aw_lister {
	pthread_t t;
	uint16_t port;
	_Atomic bool *stop;
	unsigned answered;
};

static void *aw_list_main(void *arg)
{
	struct aw_lister *l = arg;
	static const char list[] = "GET /scanbkt?list-type=2 HTTP/1.1\r\nHost: x\r\n\r\n";
	char *buf = malloc(1 << 16);
	size_t len = 0;
	int fd = tcp_connect(l->port);

	/* Two in flight on each connection: the tenant's 2 walks stay busy. */
	send_for(fd, list, sizeof(list) - 1, 5000);
	while (!atomic_load(l->stop)) {
		send_for(fd, list, sizeof(list) - 1, 5000);
		if (http_answer(fd, buf, 1 << 16, &len) == 0)
			break;
		l->answered++;
	}
	close(fd);
	free(buf);
	return NULL;
}

static void aw_ranges(struct kc *c, const uint8_t *ns, const struct kvt_key *k, unsigned n,
		      uint64_t *p50, uint64_t *pmax)
{
	uint64_t lat[64];

	T_ASSERT(n <= 64);
	for (unsigned i = 0; i < n; i++) {
		struct kc_value v = { 0 };
		uint64_t t0 = tsrv_now_ns();
		T_RC(kc_get(c, ns, k, PROTO_IF_RANGE, 0, 1000 + i, 1, &v), KVT_OK);
		lat[i] = tsrv_now_ns() - t0;
		kc_value_free(&v);
		tsrv_sleep_ms(20);
	}
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
			uint64_t x = lat[j];
			lat[j] = lat[j - 1];
			lat[j - 1] = x;
		}
	*p50 = lat[n / 2];
	*pmax = lat[n - 1];
}

static void phase_aux_walks(void)
{
	char buf[512];
	const char *argv[] = { "--s3", "127.0.0.1:0", "--threads", "2", "--ssd", "0", "--dram",
			       "512M", "--max-memory", "64M", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *big = malloc(4u << 20);
	struct iovec v = { big, 4u << 20 };
	struct aw_lister ls[2];
	_Atomic bool stop = false;
	uint64_t a50, amax, b50, bmax, aux0, aux_ms;
	struct kvt_key k;
	struct kc c;
	size_t len = 0;
	uint16_t port;
	int fd;

	port = scan_server("aux_walks", argv, ns, "aw", &c, &fd, buf, sizeof(buf), &len);
	close(fd);
	tsrv_fill(big, 4u << 20, 44);
	kvt_key_set(&k, "aw-big", 6);
	T_RC(kc_put(&c, ns, &k, &v, 1, NULL), KVT_OK);

	aw_ranges(&c, ns, &k, AW_RANGES, &a50, &amax);
	aux0 = thread_cpu_ms("kvtd-aux");
	for (int i = 0; i < 2; i++) {
		ls[i] = (struct aw_lister){ .port = port, .stop = &stop };
		pthread_create(&ls[i].t, NULL, aw_list_main, &ls[i]);
	}
	tsrv_sleep_ms(300);
	aw_ranges(&c, ns, &k, AW_RANGES, &b50, &bmax);
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(ls[i].t, NULL);
	aux_ms = thread_cpu_ms("kvtd-aux") - aux0;
	printf("aux_walks: a 1-byte RANGE of a 4 MiB part (its check on the aux thread), %u "
	       "blocks in the store: alone p50 %.2f ms, max %.2f ms; with 2 connections of "
	       "listings walking (%u + %u listings, aux CPU %" PRIu64 " ms): p50 %.2f ms, max "
	       "%.2f ms\n", SCAN_BLOCKS, a50 / 1e6, amax / 1e6, ls[0].answered, ls[1].answered,
	       aux_ms, b50 / 1e6, bmax / 1e6);
	T_GE_INT(ls[0].answered + ls[1].answered, 10);
	T_GE_INT(aux_ms, 1);
	T_LE_INT(b50, 20000000ull * HOSTILE_BESIDE);
	kc_close(&c);
	free(big);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * aux_share (redteam): one tenant's range checks queued on the aux thread
 *
 * A GET frame whose ranges touch more than 1 MiB of stored parts has them
 * checked (CRC32C) on the aux thread (ops.c ops_verify), each part once
 * per frame, but again for every frame.  mallory stores AS_VALUES values
 * of 8 MiB and pipelines GET frames naming a 1-byte range of each (128 MiB
 * of checks a frame, ~10 ms) on AS_CONNS connections, AS_DEPTH in flight
 * on each.  The aux thread ran its jobs in one queue, in order: alice's own
 * aux jobs -- her 1-byte range of a 4 MiB part (its check there), her
 * namespace's registration -- waited for every check queued before them.
 * Now each tenant's jobs have a queue of their own, served in turn
 * (loop.c "The aux thread"): alice waits for at most the job running and
 * one of each other tenant with jobs queued.
 */

#define AS_VALUES 16u
#define AS_VALUE (8u << 20)
#define AS_CONNS 4u
#define AS_DEPTH 16u
/* alice's range beside the checks, p50 at most (ms); alone ~0.5;
 * doubled under ASan (HOSTILE_BESIDE; before: 856 ms).  Since get46 the
 * bound is against mallory's own frames, timed in the same run: alice's
 * p50 at most an AS_BELOW-th of theirs.  A fixed bound passes or fails
 * with the machine's load, and no longer caught one queue: with every
 * job in one (loop_aux_submit's tenant taken out) alice's p50 was 24-85
 * ms (ASan, load ~12), within the 100 ms, mallory's 218-571 ms (a frame
 * is 8 slices, each queued again at the back: one queue's ratio 6-12.5);
 * timed once each connection has its first AS_DEPTH answers, 120-124 ms
 * against 569-613 (4.6-5.1x).  With a queue a tenant, 1.4-3.8 ms against
 * 360-579 ms under ASan, release 13 ms against 305 (23x at load 14).
 * The fixed bound is still printed; her NS_REGISTER's (an fsync) stays. */
#define AS_P50_MAX_MS 50u
#define AS_BELOW 16u
#define AS_LAT 1024u

struct as_flooder {
	pthread_t t;
	uint16_t port;
	const uint8_t *ns;
	_Atomic bool *stop;
	_Atomic unsigned answered;
	uint64_t lat[AS_LAT]; /* its frames', send to answer, past the first AS_DEPTH
			       * (sent at once: their wait is the start's) */
	_Atomic unsigned nlat;
};

static void *as_flood_main(void *arg)
{
	struct as_flooder *fl = arg;
	struct proto_item its[AS_VALUES];
	char keys[AS_VALUES][16];
	struct kc c;

	if (kc_dial(&c, fl->port, "mallory", SECRET_ALICE) != 0)
		return NULL;
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < AS_VALUES; i++) {
		snprintf(keys[i], sizeof(keys[i]), "as-%u", i);
		kvt_key_set(&its[i].key, keys[i], strlen(keys[i]));
		its[i].flags = PROTO_IF_RANGE;
		its[i].off = 1000;
		its[i].len = 1;
	}
	int64_t tags[AS_DEPTH];
	uint64_t sent[AS_DEPTH];
	for (unsigned d = 0; d < AS_DEPTH; d++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = fl->ns };
		sent[d] = tsrv_now_ns();
		if ((tags[d] = kc_request(&c, &f, its, AS_VALUES, NULL, 0)) <= 0)
			goto out;
	}
	while (!atomic_load(fl->stop)) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = fl->ns };
		struct kc_resp r;
		unsigned d = 0;
		bool more;
		if (kc_recv(&c, &r, 30000) != 0)
			break;
		while (d < AS_DEPTH && tags[d] != (int64_t)r.f.tag)
			d++;
		more = r.f.flags & PROTO_F_MORE;
		kc_resp_free(&r);
		if (d == AS_DEPTH)
			break; /* not one of its frames */
		if (more)
			continue; /* an answer in chunks: its last frame ends it */
		if (atomic_fetch_add(&fl->answered, 1) >= AS_DEPTH && fl->nlat < AS_LAT) {
			fl->lat[fl->nlat] = tsrv_now_ns() - sent[d];
			atomic_fetch_add(&fl->nlat, 1);
		}
		sent[d] = tsrv_now_ns();
		if ((tags[d] = kc_request(&c, &f, its, AS_VALUES, NULL, 0)) <= 0)
			break;
	}
out:
	kc_close(&c);
	return NULL;
}

static void phase_aux_share(void)
{
	const char *argv[] = { "--ssd", "0", "--dram", "512M", "--max-memory", "64M", NULL };
	uint8_t mns[PROTO_DIGEST_LEN], ans[PROTO_DIGEST_LEN], ans2[PROTO_DIGEST_LEN];
	uint8_t *big = malloc(AS_VALUE);
	struct iovec v = { big, AS_VALUE };
	struct as_flooder fl[AS_CONNS];
	_Atomic bool stop = false;
	uint64_t a50, amax, b50, bmax, reg_ns, aux0, aux_ms, m50 = 0, *mlat;
	unsigned answered = 0, nm = 0;
	struct kvt_ns_desc d2 = desc;
	struct kvt_key k;
	struct kc m, a;

	start_with("aux_share", argv, "alice " SECRET_ALICE " tenant\n"
				       "mallory " SECRET_ALICE " tenant\n"
				       "admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	T_RC(kc_register(&m, &desc, mns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < AS_VALUES; i++) {
		char key[16];
		snprintf(key, sizeof(key), "as-%u", i);
		kvt_key_set(&k, key, strlen(key));
		tsrv_fill(big, AS_VALUE, 300 + i);
		T_RC(kc_put(&m, mns, &k, &v, 1, NULL), KVT_OK);
	}
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ans, NULL, 0), KVT_OK);
	v.iov_len = 4u << 20;
	tsrv_fill(big, v.iov_len, 45);
	kvt_key_set(&k, "as-alice", 8);
	T_RC(kc_put(&a, ans, &k, &v, 1, NULL), KVT_OK);
	aw_ranges(&a, ans, &k, 20, &a50, &amax);

	aux0 = thread_cpu_ms("kvtd-aux");
	for (unsigned i = 0; i < AS_CONNS; i++) {
		fl[i] = (struct as_flooder){ .port = srv.port, .ns = mns, .stop = &stop };
		pthread_create(&fl[i].t, NULL, as_flood_main, &fl[i]);
	}
	/* Past each connection's first AS_DEPTH answers (sent at once), up
	 * to 20 s on a loaded machine: her ranges beside a steady queue. */
	tsrv_sleep_ms(1000);
	for (int w = 0; w < 190; w++) {
		unsigned ready = 0;
		for (unsigned i = 0; i < AS_CONNS; i++)
			ready += atomic_load(&fl[i].answered) > AS_DEPTH;
		if (ready == AS_CONNS)
			break;
		tsrv_sleep_ms(100);
	}
	aw_ranges(&a, ans, &k, 20, &b50, &bmax);
	{
		/* a namespace of her own, new: its registration is an aux job */
		uint64_t t0 = tsrv_now_ns();
		d2.model = "aux-share-new";
		T_RC(kc_register(&a, &d2, ans2, NULL, 0), KVT_OK);
		reg_ns = tsrv_now_ns() - t0;
	}
	for (int w = 0; w < 100; w++) { /* at least 8 of mallory's timed, up to 10 s */
		unsigned got = 0;
		for (unsigned i = 0; i < AS_CONNS; i++)
			got += atomic_load(&fl[i].nlat);
		if (got >= 8)
			break;
		tsrv_sleep_ms(100);
	}
	atomic_store(&stop, true);
	mlat = malloc(AS_CONNS * AS_LAT * sizeof(*mlat));
	T_ASSERT(mlat != NULL);
	for (unsigned i = 0; i < AS_CONNS; i++) {
		pthread_join(fl[i].t, NULL);
		answered += fl[i].answered;
		memcpy(mlat + nm, fl[i].lat, fl[i].nlat * sizeof(*mlat));
		nm += fl[i].nlat;
	}
	if (nm) {
		qsort(mlat, nm, sizeof(*mlat), cmp_u64);
		m50 = mlat[nm / 2];
	}
	free(mlat);
	aux_ms = thread_cpu_ms("kvtd-aux") - aux0;
	printf("aux_share: alice's 1-byte RANGE of a 4 MiB part (checked on the aux thread): "
	       "alone p50 %.2f ms, max %.2f ms; beside mallory's %u connections of %u GET frames "
	       "in flight, each checking %u MiB (%u frames answered, aux CPU %" PRIu64 " ms): "
	       "p50 %.2f ms, max %.2f ms (the fixed bound of before get46: %llu ms); mallory's "
	       "frames p50 %.2f ms over %u; her NS_REGISTER of a new namespace %.2f ms\n",
	       a50 / 1e6, amax / 1e6, AS_CONNS, AS_DEPTH, (AS_VALUES * AS_VALUE) >> 20, answered,
	       aux_ms, b50 / 1e6, bmax / 1e6, AS_P50_MAX_MS * HOSTILE_BESIDE, m50 / 1e6, nm,
	       reg_ns / 1e6);
	T_GE_INT(answered, 1);
	T_GE_INT(nm, 8);
	T_LE_INT(AS_BELOW * b50, m50);
	T_LE_INT(reg_ns, 8 * AS_P50_MAX_MS * 1000000ull); /* an fsync: a busy disk */
	kc_close(&a);
	kc_close(&m);
	free(big);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * quiet_share (redteam): one grantee's quiet reads beside another's
 *
 * A grantee's GET is quiet (KVT_F_QUIET): a block on SSD only is read into
 * a private copy, at most KVTD_QUIET_WINDOW of a frame in the store and
 * KVTD_QUIET_INFLIGHT_MAX (64) of the server's; a frame that finds the
 * server's all taken with none of its own in flight answers the rest as
 * misses (copy_refused).  alice's namespace is granted to everyone;
 * mallory pipelines GETs of its SSD-only blocks on QS_CONNS connections,
 * reading the answers; rita GETs one such block at a time beside them.
 * The 64 were the server's, whoever took them: mallory's 16 connections of
 * 4 held them and rita's reads were misses.  Now a tenant's native quiet
 * reads in the store are at most KVTD_QUIET_TENANT_MAX (a quarter of the
 * server's), as S3's are (S3D_QUIET_TENANT_MAX).
 */

#define QS_CONNS 24u
#define QS_DEPTH 4u
#define QS_ITEMS 8u
#define QS_READS 60u

struct qs_flooder {
	pthread_t t;
	const uint8_t *ns;
	const unsigned *ssd_only;
	unsigned n_ssd, seed, answered;
	_Atomic bool *stop;
};

static void *qs_flood_main(void *arg)
{
	struct qs_flooder *fl = arg;
	unsigned idx[QS_ITEMS];
	struct kc c;

	if (kc_dial(&c, srv.port, "mallory", SECRET_ALICE) != 0)
		return NULL;
	for (unsigned d = 0; d < QS_DEPTH; d++) {
		for (unsigned i = 0; i < QS_ITEMS; i++)
			idx[i] = fl->ssd_only[(fl->seed + d * QS_ITEMS + i) % fl->n_ssd];
		g_send(&c, fl->ns, idx, QS_ITEMS);
	}
	while (!atomic_load(fl->stop)) {
		if (kc_recv_items(&c, 20000, NULL, NULL, NULL) < 1)
			break;
		fl->answered++;
		for (unsigned i = 0; i < QS_ITEMS; i++)
			idx[i] = fl->ssd_only[(fl->seed + fl->answered * 7 + i) % fl->n_ssd];
		g_send(&c, fl->ns, idx, QS_ITEMS);
	}
	kc_close(&c);
	return NULL;
}

static void phase_quiet_share(void)
{
	const char *extra[] = { "--ssd", "256M", "--set", "ssd.admission=always", NULL };
	struct kvt_ns_desc d = desc;
	uint8_t ns[PROTO_DIGEST_LEN], ns_r[PROTO_DIGEST_LEN], *v = malloc(G_LEN);
	unsigned ssd_only[G_BLOCKS], n_ssd = 0, hits = 0, misses = 0, answered = 0;
	struct qs_flooder fl[QS_CONNS];
	_Atomic bool stop = false;
	uint64_t refused0, refused;
	struct kc olga, rita;

	start_with("quiet_share", extra, "alice " SECRET_ALICE " tenant dram=4M\n"
					 "admin " SECRET_ADMIN " admin\n"
					 "rita " SECRET_ALICE " tenant\n"
					 "mallory " SECRET_ALICE " tenant\n"
					 "grant alice model=hostile-model to *\n");
	n_ssd = g_put_ssd_only(&olga, &rita, &d, ns, v, ssd_only);
	T_GE_INT(n_ssd, 16);
	{
		/* mallory names it too: a grant to everyone */
		struct kc m;
		T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
		T_RC(kc_register(&m, &d, ns_r, NULL, 0), KVT_OK);
		kc_close(&m);
	}
	for (unsigned i = 0; i < QS_CONNS; i++) {
		fl[i] = (struct qs_flooder){ .ns = ns, .ssd_only = ssd_only, .n_ssd = n_ssd,
					     .seed = i * 5, .stop = &stop };
		pthread_create(&fl[i].t, NULL, qs_flood_main, &fl[i]);
	}
	tsrv_sleep_ms(1000);
	refused0 = stat_of("server.copy_refused");
	for (unsigned r = 0; r < QS_READS; r++) {
		unsigned idx = ssd_only[r % n_ssd], m = 0;
		g_send(&rita, ns, &idx, 1);
		hits += g_check(&rita, &idx, 1, &m);
		misses += m;
		tsrv_sleep_ms(10);
	}
	refused = stat_of("server.copy_refused") - refused0;
	atomic_store(&stop, true);
	for (unsigned i = 0; i < QS_CONNS; i++) {
		pthread_join(fl[i].t, NULL);
		answered += fl[i].answered;
	}
	printf("quiet_share: mallory's %u connections of %u GET frames of %u SSD-only blocks (a "
	       "grant to everyone; %u frames answered); rita's %u reads of one such block beside "
	       "them: %u hits, %u misses; copy_refused +%" PRIu64 " meanwhile\n", QS_CONNS,
	       QS_DEPTH, QS_ITEMS, answered, QS_READS, hits, misses, refused);
	T_GE_INT(answered, 1);
	T_EQ_INT(misses, 0);
	T_EQ_INT(hits, QS_READS);
	kc_close(&olga);
	kc_close(&rita);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * copies_sum (red48 review): a tenant's private copies within its half
 *
 * Session 48 cut each of a tenant's quarters (answers queued, commands in
 * flight, SSLs) so that all of them with its private copies stay within
 * half of --max-memory (loop.c kvtd_tenant_cap, KVTD_TENANT_MEM_MAX).  The
 * copies' own check (ops.c ops_quiet_done, s3ops.c s3d_quiet_done) was
 * left at its quarter: rita, a grantee, fills her half with ECHOs she
 * never reads and SETs half sent on RESP, then pipelines quiet GETs of
 * SSD-only blocks she does not read either: their copies took another
 * quarter, three quarters of the budget hers.
 */

#define CS_ECHO (256u << 10)  /* an ECHO's argument: its answer is charged */
#define CS_ECHOS 40u          /* on each of 4 connections: 40 MiB asked */
#define CS_SET (4u << 20)     /* a SET's value, half of it sent */
#define CS_SETS 1u            /* its room left for the GETs' tables */

static void phase_copies_sum(void)
{
	const char *extra[] = { "--ssd", "256M", "--set", "ssd.admission=always",
				"--resp", "127.0.0.1:0", NULL };
	struct kvt_ns_desc d = desc;
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(G_LEN);
	unsigned ssd_only[G_BLOCKS], n_ssd, n_get;
	uint64_t mem0, memo, mem1, mem2, refused0, refused;
	int efd[4], sfd[CS_SETS];
	size_t elen = 0, ecap = CS_ECHOS * (CS_ECHO + 64) + 128, slen;
	char *ebuf = malloc(ecap), *sbuf = malloc(CS_SET / 2 + 128), auth[128];
	uint16_t rport;
	struct kc olga, rita, rg;
	int rcv = 4096;

	T_ASSERT(v && ebuf && sbuf);
	start_with("copies_sum", extra, "alice " SECRET_ALICE " tenant dram=4M\n"
					"admin " SECRET_ADMIN " admin\n"
					"rita " SECRET_ALICE " tenant\n"
					"grant alice model=hostile-model to rita\n");
	n_ssd = g_put_ssd_only(&olga, &rita, &d, ns, v, ssd_only);
	T_GE_INT(n_ssd, 16);
	rport = tsrv_listener_port(srv.log, "RESP");
	snprintf(auth, sizeof(auth), "AUTH rita %s\r\n", SECRET_ALICE);
	tsrv_sleep_ms(300);
	mem0 = stat_of("server.mem_used");
	/* her answers: ECHOs pipelined, never read */
	elen = (size_t)snprintf(ebuf, ecap, "%s", auth);
	for (unsigned i = 0; i < CS_ECHOS; i++) {
		elen += (size_t)snprintf(ebuf + elen, ecap - elen, "*2\r\n$4\r\nECHO\r\n$%u\r\n",
					 CS_ECHO);
		memset(ebuf + elen, 'e', CS_ECHO);
		elen += CS_ECHO;
		memcpy(ebuf + elen, "\r\n", 2);
		elen += 2;
	}
	for (unsigned i = 0; i < 4; i++) {
		efd[i] = tcp_connect(rport);
		setsockopt(efd[i], SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
		send_for(efd[i], ebuf, elen, 3000);
	}
	tsrv_sleep_ms(300);
	memo = stat_of("server.mem_used");
	/* her commands: SETs of 4 MiB, half sent */
	for (unsigned i = 0; i < CS_SETS; i++) {
		sfd[i] = tcp_connect(rport);
		slen = (size_t)snprintf(sbuf, 128, "%s*3\r\n$3\r\nSET\r\n$3\r\ncs%u\r\n$%u\r\n",
					auth, i, CS_SET);
		memset(sbuf + slen, 'v', CS_SET / 2);
		slen += CS_SET / 2;
		send_for(sfd[i], sbuf, slen, 2000);
	}
	tsrv_sleep_ms(500);
	mem1 = stat_of("server.mem_used");
	/* her copies: quiet GETs of SSD-only blocks, not read */
	refused0 = stat_of("server.copy_refused");
	T_RC(kc_dial(&rg, srv.port, "rita", SECRET_ALICE), 0);
	setsockopt(rg.fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	n_get = n_ssd;
	g_send(&rg, ns, ssd_only, n_get); /* one frame: its connection's share pauses reads */
	/* the copies leave the budget as the sockets take their answers:
	 * the most it held meanwhile */
	mem2 = mem1;
	for (uint64_t end = tsrv_now_ns() + 1500000000ull; tsrv_now_ns() < end;) {
		uint64_t m = stat_of("server.mem_used");
		mem2 = m > mem2 ? m : mem2;
	}
	refused = stat_of("server.copy_refused") - refused0;
	printf("copies_sum: rita's ECHOs unread: mem_used +%.1f MiB, her SET half sent +%.1f; then %u "
	       "quiet GETs of SSD-only blocks of 1 MiB unread: +%.1f MiB at most (copy_refused +%" PRIu64
	       "); hers %.1f MiB of %u (the server %.1f before)\n", (double)(memo - mem0) / 1048576.0,
	       (double)(mem1 - memo) / 1048576.0, n_get,
	       (double)(mem2 - mem1) / 1048576.0, refused, (double)(mem2 - mem0) / 1048576.0,
	       MAX_MEMORY >> 20, (double)mem0 / 1048576.0);
	/* her half, and the socket's 2 MiB of slack */
	T_ASSERT(mem2 - mem0 <= MAX_MEMORY / 2 + (2u << 20));
	T_ASSERT(refused >= 1);
	kc_close(&rg);
	for (unsigned i = 0; i < 4; i++)
		close(efd[i]);
	for (unsigned i = 0; i < CS_SETS; i++)
		close(sfd[i]);
	kc_close(&olga);
	kc_close(&rita);
	free(v);
	free(ebuf);
	free(sbuf);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * clear_flood (attack25): one tenant pipelines CLEARs of its namespaces
 *
 * A CLEAR walks the whole DRAM and SSD indexes once per namespace it
 * clears, on the library's worker (KVT_F_DEFER; one thread by default),
 * and every other tenant's acknowledged DELETE waits behind what is
 * queued there: its flush barrier comes after it (ops.c ops_durable).
 * mallory holds CF_NS namespaces and pipelines CF_CLEARS CLEARs of her
 * tenant scope (CF_NS walks each), one a connection; alice's DELETE is
 * timed beside them.
 * Then mallory sends FLUSHDBs on RESP.  At most CF_SLOTS CLEARs of a
 * tenant are in progress (KVTD_CLEAR_TENANT), each walking one namespace
 * at a time; the rest are refused at once (KVT_EBUSY, RESP -ERR).
 */

#ifdef HOSTILE_TSAN
#define CF_NS 64u        /* mallory's namespaces (a walk: 13 ms under TSan) */
#else
#define CF_NS 256u       /* mallory's namespaces */
#endif
#define CF_FRAME 256u    /* of them per NS_REGISTER frame */
#define CF_CLEARS 64u    /* CLEAR frames mallory pipelines */
#define CF_FLUSHES 32u   /* FLUSHDBs she sends on RESP, a connection each */
#define CF_SLOTS 4u      /* KVTD_CLEAR_TENANT */
#define CF_BLOCKS 50000u /* alice's blocks: what a walk walks */
/* alice's DELETE beside the CLEARs, at most (ms): 27 ms after (release),
 * 9 s and more before (4 frames of 1024 walks; 64 of 256 here: past the
 * client's 30 s) */
#define CF_DELETE_MAX_MS 1000u

/* n namespaces of models PREFIX-<i> registered on c, all KVT_OK. */
static void cf_register(struct kc *c, const char *prefix, unsigned n)
{
	static char texts[CF_FRAME][PROTO_CANON_MAX + 1];
	struct proto_item its[CF_FRAME];
	unsigned ok = 0;

	for (unsigned b = 0; b < n; b += CF_FRAME) {
		struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
		unsigned m = n - b < CF_FRAME ? n - b : CF_FRAME;
		struct proto_iter iter;
		struct proto_item pi;
		struct kc_resp r;
		memset(its, 0, sizeof(its));
		for (unsigned i = 0; i < m; i++) {
			struct kvt_ns_desc d = desc;
			char model[64];
			snprintf(model, sizeof(model), "%s-%u", prefix, b + i);
			d.model = model;
			its[i].text = texts[i];
			its[i].text_len = (uint32_t)kvt_ns_digest(&d, NULL, texts[i],
								  PROTO_CANON_MAX + 1);
		}
		T_ASSERT(kc_request(c, &f, its, m, NULL, 0) > 0);
		T_RC(kc_recv(c, &r, 60000), 0);
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		while (proto_iter_next(&iter, &pi) == 1)
			ok += pi.status == KVT_OK;
		kc_resp_free(&r);
	}
	T_EQ_INT(ok, n);
}

/* alice's PUT then DELETE of one key (the DELETE answered once its
 * tombstone is durable): the DELETE's round trip, ns. */
static uint64_t cf_delete(struct kc *a, const uint8_t ns[PROTO_DIGEST_LEN], unsigned i)
{
	uint8_t v[256];
	struct iovec p = { v, sizeof(v) };
	struct kvt_key k;
	char name[32];
	uint64_t t0;
	int rc;

	snprintf(name, sizeof(name), "cf-del-%u", i);
	kvt_key_set(&k, name, strlen(name));
	tsrv_fill(v, sizeof(v), i);
	T_RC(kc_put(a, ns, &k, &p, 1, NULL), KVT_OK);
	t0 = tsrv_now_ns();
	rc = kc_delete(a, ns, &k);
	if (rc != KVT_OK)
		T_FAIL("alice's DELETE beside mallory's CLEARs: %d (%s) after %.1f s", rc,
		       kvt_strerror(rc), (tsrv_now_ns() - t0) / 1e9);
	return tsrv_now_ns() - t0;
}

/* mallory's FLUSHDBs on RESP, one on each of CF_FLUSHES connections, all
 * sent before any is read: how many were refused.  (Pipelined on one
 * connection they run one at a time since attack40: the commands behind
 * a FLUSHDB wait for it, as Redis runs them.) */
static unsigned cf_flushes(uint16_t port)
{
	const char *auth = "*3\r\n$4\r\nAUTH\r\n$7\r\nmallory\r\n$26\r\n" SECRET_ALICE "\r\n";
	const char *cmd = "FLUSHDB\r\n";
	static int fds[CF_FLUSHES];
	unsigned refused = 0;

	for (unsigned i = 0; i < CF_FLUSHES; i++) {
		char reply[64] = { 0 };
		bool closed = false;
		fds[i] = tcp_connect(port);
		T_EQ_INT(send_for(fds[i], auth, strlen(auth), 1000), (int64_t)strlen(auth));
		recv_for(fds[i], reply, 6, 2000, &closed);
		if (strncmp(reply, "+OK\r\n", 5) != 0)
			T_FAIL("mallory's AUTH %u: '%s'", i, reply);
	}
	for (unsigned i = 0; i < CF_FLUSHES; i++)
		T_EQ_INT(send_for(fds[i], cmd, strlen(cmd), 2000), (int64_t)strlen(cmd));
	for (unsigned i = 0; i < CF_FLUSHES; i++) {
		char reply[8] = { 0 }; /* "+OK\r\n", or the start of an error */
		bool closed = false;
		T_EQ_INT(recv_for(fds[i], reply, 6, 10000, &closed), 5);
		if (reply[0] == '-')
			refused++;
		else
			T_ASSERT(strncmp(reply, "+OK\r\n", 5) == 0);
		close(fds[i]);
	}
	return refused;
}

static void phase_clear_flood(void)
{
	const char *extra[] = { "--threads", "1", "--resp", "127.0.0.1:0", NULL };
	uint8_t ans[PROTO_DIGEST_LEN];
	uint64_t alone[5], during[5], t0, sent_ns, drained_ns, walk_ns, refused0;
	unsigned answered = 0, busy = 0, other = 0, flush_refused;
	struct fq_seen seen = { 0 };
	static struct kc mc[CF_CLEARS];
	struct kc a, m;

	start_with("clear_flood", extra, "alice " SECRET_ALICE " tenant\n"
					 "mallory " SECRET_ALICE " tenant\n"
					 "admin " SECRET_ADMIN " admin\n");
	rss_begin();
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&a, &desc, ans, NULL, 0), KVT_OK);
	frame_puts(&a, ans, CF_BLOCKS, 1000, 0, "cf", &seen);
	T_EQ_INT(seen.ok, CF_BLOCKS);
	for (unsigned i = 0; i < 5; i++)
		alone[i] = cf_delete(&a, ans, i);

	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	cf_register(&m, "cf-mallory", CF_NS);
	/* One walk: a CLEAR of one of her (empty) namespaces, alone. */
	{
		struct kvt_ns_desc d = desc;
		uint8_t dg[PROTO_DIGEST_LEN];
		d.model = "cf-mallory-0";
		T_RC(kc_register(&m, &d, dg, NULL, 0), KVT_OK);
		t0 = tsrv_now_ns();
		T_RC(kc_clear(&m, PROTO_SCOPE_NS, dg, NULL, NULL), 0);
		walk_ns = tsrv_now_ns() - t0;
	}
	/* One CLEAR on each of CF_CLEARS connections: pipelined on one,
	 * they run one at a time since 2026-12-06 (the frames behind a
	 * CLEAR wait until it is applied: doc/protocol.md "Writes of one
	 * connection"), as RESP's FLUSHDBs below. */
	for (unsigned i = 0; i < CF_CLEARS; i++)
		T_RC(kc_dial(&mc[i], srv.port, "mallory", SECRET_ALICE), 0);
	refused0 = stat_opt("server.clear_refused");
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < CF_CLEARS; i++) {
		struct proto_frame f = { .op = PROTO_OP_CLEAR };
		f.scope.scope = PROTO_SCOPE_TENANT;
		T_ASSERT(kc_request(&mc[i], &f, NULL, 0, NULL, 0) > 0);
	}
	sent_ns = tsrv_now_ns() - t0;
	tsrv_sleep_ms(20);
	for (unsigned i = 0; i < 5; i++)
		during[i] = cf_delete(&a, ans, 10 + i);
	qsort(alone, 5, sizeof(alone[0]), cmp_u64);
	qsort(during, 5, sizeof(during[0]), cmp_u64);
	printf("clear_flood: %u blocks, a CLEAR of one namespace %.2f ms; mallory's %u CLEARs "
	       "of her %u namespaces sent in %.1f ms; alice's DELETE alone median %.2f ms max "
	       "%.2f ms, beside them median %.2f ms max %.2f ms\n", CF_BLOCKS, walk_ns / 1e6,
	       CF_CLEARS, CF_NS, sent_ns / 1e6, alone[2] / 1e6, alone[4] / 1e6, during[2] / 1e6,
	       during[4] / 1e6);
	/* Not behind every walk mallory asked for. */
	T_LE_INT(during[4], CF_DELETE_MAX_MS * 1000000ull);
	for (unsigned i = 0; i < CF_CLEARS; i++) {
		struct kc_resp r;
		T_RC(kc_recv(&mc[i], &r, 60000), 0);
		if (r.f.status == 0)
			answered++;
		else if (r.f.status == KVT_EBUSY)
			busy++;
		else
			other++;
		kc_resp_free(&r);
	}
	drained_ns = tsrv_now_ns() - t0;
	flush_refused = cf_flushes(tsrv_listener_port(srv.log, "RESP"));
	printf("clear_flood: her CLEARs: %u answered, %u refused KVT_EBUSY, %u other, all in "
	       "%.2f s (server.clear_refused +%" PRIu64 "); her %u FLUSHDBs on RESP: %u "
	       "refused\n", answered, busy, other, drained_ns / 1e9,
	       stat_opt("server.clear_refused") - refused0, CF_FLUSHES, flush_refused);
	/* At most CF_SLOTS at once; those sent while they walk refused. */
	T_EQ_INT(other, 0);
	T_GE_INT(answered, 1);
	T_LE_INT(answered, 2 * CF_SLOTS);
	T_GE_INT(busy, CF_CLEARS - 2 * CF_SLOTS);
	T_GE_INT(flush_refused, CF_FLUSHES - 2 * CF_SLOTS);
	T_LE_INT(flush_refused, CF_FLUSHES - 1);
	rss_end(DRAM + MAX_MEMORY);
	for (unsigned i = 0; i < CF_CLEARS; i++)
		kc_close(&mc[i]);
	kc_close(&m);
	kc_close(&a);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_info_flood (attack25): a tenant pipelines RESP INFO.  Each INFO
 * read its figures with kvt_store_stat, each a whole pass over the
 * store's statistics (every namespace's row of stats.namespaces, every
 * quota group): 3 passes a tenant's INFO, 22 an admin's, 0.38 ms a
 * tenant's INFO with 256 rows (release) against 0.001 for a PING, and
 * 64 of them a connection a loop iteration.  Now one pass for an admin's
 * and a tenant's reads its quota group alone (kvt_quota_stats).
 */

#define RIF_NS 264u      /* namespaces with a block each: 256 rows and more */
#define RIF_FLOODERS 4
#define RIF_SECONDS 2
#define RIF_BURST 64u    /* INFOs a send */
/* Another client's PING beside them, p50: 873 ms before (release, 256
 * rows; 24 ms with 8 namespaces), 0.06 ms after (4.1 ASan); doubled under
 * ASan (HOSTILE_BESIDE). */
#ifdef HOSTILE_TSAN
#define RIF_P50_MAX_NS 50000000ull
#else
#define RIF_P50_MAX_NS (10000000ull * HOSTILE_BESIDE)
#endif

struct rif_flooder {
	pthread_t t;
	int fd;
	uint64_t sent, got; /* bytes */
};

/* INFO in bursts for RIF_SECONDS, reading whatever comes back. */
static void *rif_flood_main(void *arg)
{
	struct rif_flooder *f = arg;
	uint64_t end = tsrv_now_ns() + RIF_SECONDS * 1000000000ull;
	static const char one[] = "*1\r\n$4\r\nINFO\r\n";
	char burst[RIF_BURST * (sizeof(one) - 1)], sink[65536];
	size_t off = 0;

	for (unsigned i = 0; i < RIF_BURST; i++)
		memcpy(burst + i * (sizeof(one) - 1), one, sizeof(one) - 1);
	while (tsrv_now_ns() < end) {
		struct pollfd p = { .fd = f->fd, .events = POLLIN | POLLOUT };
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (p.revents & POLLIN) {
			ssize_t r = recv(f->fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0)
				break;
			if (r > 0)
				f->got += (uint64_t)r;
		}
		if (p.revents & POLLOUT) {
			ssize_t w = send(f->fd, burst + off, sizeof(burst) - off,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0) {
				f->sent += (uint64_t)w;
				off = (off + (size_t)w) % sizeof(burst);
			}
		}
	}
	return NULL;
}

/* The store's statistics: RIF_NS namespaces, a block in each (the
 * admin's). */
static void rif_fill(void)
{
	struct fq_seen seen = { 0 };
	struct kc c;

	T_RC(kc_dial(&c, srv.port, "admin", SECRET_ADMIN), 0);
	for (unsigned i = 0; i < RIF_NS; i++) {
		struct kvt_ns_desc d = desc;
		uint8_t ns[PROTO_DIGEST_LEN];
		char model[32];
		snprintf(model, sizeof(model), "rif-%u", i);
		d.model = model;
		T_RC(kc_register(&c, &d, ns, NULL, 0), KVT_OK);
		frame_puts(&c, ns, 1, 1, 0, "rif", &seen);
	}
	T_EQ_INT(seen.ok, RIF_NS);
	kc_close(&c);
}

static void phase_resp_info_flood(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--threads", "1", "--ssd", "0", "--set",
				"stats.namespaces=256", NULL };
	struct rif_flooder fl[RIF_FLOODERS];
	uint64_t lat[400], t_end;
	unsigned nlat = 0, bad_rt = 0;
	char info[2048] = { 0 };
	uint16_t port;
	bool closed = false;
	int good;

	start("resp_info_flood", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	rif_fill();
	good = resp_alice(port);
	/* A tenant's INFO still says what it said. */
	T_EQ_INT(send_for(good, "INFO memory\r\n", 13, 1000), 13);
	recv_for(good, info, sizeof(info), 300, &closed);
	T_ASSERT(strstr(info, "# Memory\r\nused_memory:") != NULL);
	T_ASSERT(strstr(info, "kvtier_tenant_ssd_bytes:") != NULL);
	rss_begin();
	for (unsigned i = 0; i < RIF_FLOODERS; i++) {
		fl[i] = (struct rif_flooder){ .fd = resp_alice(port) };
		pthread_create(&fl[i].t, NULL, rif_flood_main, &fl[i]);
	}
	tsrv_sleep_ms(200);
	t_end = tsrv_now_ns() + (RIF_SECONDS - 1) * 1000000000ull;
	nlat = resp_ping_lat(good, t_end, lat, NULL, sizeof(lat) / sizeof(lat[0]), &bad_rt);
	for (unsigned i = 0; i < RIF_FLOODERS; i++)
		pthread_join(fl[i].t, NULL);
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	printf("resp_info_flood: %u namespaces with a block (256 rows); %u pipelines of a "
	       "tenant's INFO for %d s, replies (bytes):", RIF_NS, RIF_FLOODERS, RIF_SECONDS);
	for (unsigned i = 0; i < RIF_FLOODERS; i++)
		printf(" %" PRIu64, fl[i].got);
	printf("; another client's PING: %u, p50 %.2f ms, max %.2f ms, %u failed\n", nlat,
	       lat[nlat / 2] / 1e6, lat[nlat - 1] / 1e6, bad_rt);
	T_EQ_INT(bad_rt, 0);
	T_LE_INT(lat[nlat / 2], RIF_P50_MAX_NS);
	rss_end(DRAM + MAX_MEMORY);
	for (unsigned i = 0; i < RIF_FLOODERS; i++)
		close(fl[i].fd);
	close(good);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * metrics_cost (attack25): many scrapes at once.  A /metrics page was
 * rendered for each request, 318 KB and 5-11 ms of the loop (release)
 * with the 256 namespace rows of stats.namespaces=256, for a 40-byte
 * request: 1,000 connections that each asked once held the loop 7.7 s.
 * The scrapes a loop parses in one iteration now share one render
 * (httpd.c "One render"), and the namespace rows are found in constant
 * time (2.3 ms a page).  MC_CONNS connections each send GET /metrics and
 * read nothing; then an admin's PING is timed.
 */

#define MC_CONNS 600u
/* An admin's PING beside them, at most (ms): 39 ms after (release; 63
 * ASan), 715 ms before (1.9 s ASan); ASan's doubled (HOSTILE_BESIDE) */
#ifdef HOSTILE_TSAN
#define MC_PING_MAX_MS 1500u
#else
#define MC_PING_MAX_MS (500u * (unsigned)HOSTILE_BESIDE)
#endif

/* Pages rendered so far (this one counted); 0 on a server without the
 * series. */
static uint64_t mc_renders(uint16_t mport)
{
	char *page = tsrv_http_body(mport, "/metrics");
	uint64_t n;

	T_ASSERT(page != NULL);
	n = strstr(page, "kvtier_server_metrics_renders_total ")
		    ? tsrv_metric(page, "kvtier_server_metrics_renders_total") : 0;
	free(page);
	return n;
}

static void phase_metrics_cost(void)
{
	const char *extra[] = { "--metrics", "127.0.0.1:0", "--threads", "1", "--ssd", "0",
				"--set", "stats.namespaces=256", NULL };
	static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	static int fds[MC_CONNS];
	uint64_t alone[5], t0, sent_ns, ping_ns = 0, renders0, renders;
	uint16_t mport;
	size_t page_len = 0;
	struct rlimit rl;
	struct kc c;

	T_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < MC_CONNS + 64 && rl.rlim_max >= MC_CONNS + 64) {
		rl.rlim_cur = MC_CONNS + 64;
		T_EQ_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	start("metrics_cost", extra);
	mport = tsrv_listener_port(srv.log, "metrics");
	rif_fill();
	for (unsigned i = 0; i < 5; i++) {
		char *page;
		t0 = tsrv_now_ns();
		page = tsrv_http_body(mport, "/metrics");
		alone[i] = tsrv_now_ns() - t0;
		T_ASSERT(page != NULL);
		page_len = strlen(page);
		free(page);
	}
	qsort(alone, 5, sizeof(alone[0]), cmp_u64);
	T_RC(kc_dial(&c, srv.port, "admin", SECRET_ADMIN), 0);
	renders0 = mc_renders(mport);
	t0 = tsrv_now_ns();
	for (unsigned i = 0; i < MC_CONNS; i++) {
		int small = 1024;
		fds[i] = tcp_connect(mport);
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		T_EQ_INT(send_for(fds[i], get, sizeof(get) - 1, 2000), (int64_t)(sizeof(get) - 1));
	}
	sent_ns = tsrv_now_ns() - t0;
	/* The admin's PINGs while the server answers them. */
	for (uint64_t end = tsrv_now_ns() + 1500000000ull; tsrv_now_ns() < end;) {
		uint64_t p0 = tsrv_now_ns();
		T_RC(kc_ping(&c), 0);
		if (tsrv_now_ns() - p0 > ping_ns)
			ping_ns = tsrv_now_ns() - p0;
		tsrv_sleep_ms(5);
	}
	renders = mc_renders(mport) - renders0;
	printf("metrics_cost: a page of %zu bytes, alone median %.2f ms; %u scrapes sent in %.0f "
	       "ms, never read: %" PRIu64 " renders; an admin's PINGs beside them: max %.1f ms\n",
	       page_len, alone[2] / 1e6, MC_CONNS, sent_ns / 1e6, renders, ping_ns / 1e6);
	T_GE_INT(page_len, 100000);
	T_LE_INT(ping_ns, MC_PING_MAX_MS * 1000000ull);
	T_GE_INT(renders, 1);
	T_LE_INT(renders, MC_CONNS / 4);
	for (unsigned i = 0; i < MC_CONNS; i++)
		close(fds[i]);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * metrics_slow: /metrics asked on many connections with a small receive
 * window (SO_RCVBUF 1 KiB, MSS 536, as a far client that never reads):
 * each answer, a copy of the page, stayed in the connection's output,
 * charged to --max-memory -- 300 of them filled a budget of 8 MiB and
 * alice's PUT beside them was refused.  A loop now holds at most
 * HTTPD_PAGES_LOOP (16) pages in flight; the other scrapes get 503 with
 * Retry-After (server.metrics_refused), and once they are gone a scrape
 * is answered again, and 48 more one after the other (a page counts
 * until written, not until its connection has closed).
 */

#define MS_CONNS 300u
#define MS_PAGES 16u  /* HTTPD_PAGES_LOOP */

static int ms_connect_slow(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 1024, mss = 536;

	T_ASSERT(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof(mss));
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void phase_metrics_slow(void)
{
	const char *extra[] = { "--metrics", "127.0.0.1:0", "--threads", "1", "--ssd", "0",
				"--max-memory", "8M", NULL };
	static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	static int fds[MS_CONNS];
	uint64_t mem, refused, page_len;
	uint8_t ns[PROTO_DIGEST_LEN], v[65536];
	struct kvt_key k;
	struct iovec p = { v, sizeof(v) };
	uint16_t mport;
	char *page;
	struct kc c;
	int put;

	start("metrics_slow", extra);
	mport = tsrv_listener_port(srv.log, "metrics");
	page = tsrv_http_body(mport, "/metrics");
	T_ASSERT(page != NULL);
	page_len = strlen(page);
	free(page);
	T_RC(kc_dial(&c, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < MS_CONNS; i++) {
		fds[i] = ms_connect_slow(mport);
		T_EQ_INT(send_for(fds[i], get, sizeof(get) - 1, 2000), (int64_t)(sizeof(get) - 1));
	}
	tsrv_sleep_ms(500);
	mem = stat_of("server.mem_used");
	refused = stat_opt("server.metrics_refused");
	kvt_key_set(&k, "metrics-slow", 12);
	tsrv_fill(v, sizeof(v), 7);
	put = kc_put(&c, ns, &k, &p, 1, NULL);
	printf("metrics_slow: pages of %" PRIu64 " bytes asked on %u connections that never read: "
	       "mem_used %" PRIu64 " KiB of 8 MiB, %" PRIu64 " refused 503; alice's PUT %d\n",
	       page_len, MS_CONNS, mem >> 10, refused, put);
	T_RC(put, KVT_OK);
	T_LE_INT(mem, MS_PAGES * (page_len + 4096) + (1u << 20));
	T_GE_INT(refused, MS_CONNS - MS_PAGES);
	/* Gone: their pages' slots come back as the loop sees them closed. */
	for (unsigned i = 0; i < MS_CONNS; i++)
		close(fds[i]);
	for (unsigned i = 0; i < 100; i++) {
		int code = 0;
		free(tsrv_http_get(mport, "/metrics", NULL, &code));
		if (code == 200)
			break;
		T_EQ_INT(code, 503);
		T_ASSERT(i < 99);
		tsrv_sleep_ms(100);
	}
	/* A page read is no longer in flight, though its connection lingers
	 * (loop.c "Lingering close"): scrapes one after the other are served. */
	for (unsigned i = 0; i < 3 * MS_PAGES; i++)
		free(tsrv_http_body(mport, "/metrics"));
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * stats_flood (attack25): a tenant pipelines STATS of its own scope.
 * With its 255 namespaces in rows of stats.namespaces=256 an answer is
 * ~5,000 figures (128 KB), ~1 ms of the loop (release) for a 48-byte
 * frame, and a connection took 64 frames an iteration, a tenant 256:
 * another client's PING p50 230 ms beside 4 connections of them.  A
 * STATS now counts its figures against the iteration's item budgets
 * (kvtd_conn_parse_spend): one such a tenant an iteration.
 */

#define SF_NS 255u       /* mallory's namespaces, all in rows */
#define SF_FLOODERS 4
#define SF_BURST 64u     /* STATS frames a send */
#define SF_SECONDS 2
#define SF_BASE 11u      /* STATS timed alone first */
/* Another client's PING beside them, p50: 1.5-2.2 ms after (release;
 * 7.4 ASan, 51 TSan: it waits for one STATS), 230 ms before (815 ASan).
 * Until 2026-12-07 that p50 was bounded (10 ms release, 100 ASan, 250
 * TSan): release 7.5-16.0 ms at load 7-9, 2 of 3 runs failed.  Now the
 * p50 of the server's CPU a PING waits (srv_cpu_ns), at most SF_RATIO x
 * the server's CPU for one STATS alone (the median of SF_BASE, timed
 * first) + 1 ms: release 1.33-2.01 at load 6-8 (6 runs; one STATS
 * 2.9-4.7 ms, wall p50 6.6-28 ms), ASan 1.65 and 2.93 at load 9 (one
 * STATS 8.8-9.0 ms); the figures' charge off (ops.c without
 * kvtd_conn_parse_spend: 256 STATS an iteration) 125 and 190, release */
#define SF_RATIO 8u

struct sf_flooder {
	pthread_t t;
	struct kc c;
	uint8_t *burst;
	size_t len;
	uint64_t got; /* bytes */
};

/* The burst over and over for SF_SECONDS, reading whatever comes back. */
static void *sf_flood_main(void *arg)
{
	struct sf_flooder *f = arg;
	uint64_t end = tsrv_now_ns() + SF_SECONDS * 1000000000ull;
	static _Thread_local char sink[1 << 16];
	size_t off = 0;

	while (tsrv_now_ns() < end) {
		struct pollfd p = { .fd = f->c.fd, .events = POLLIN | POLLOUT };
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (p.revents & POLLIN) {
			ssize_t r = recv(f->c.fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0)
				break;
			if (r > 0)
				f->got += (uint64_t)r;
		}
		if (p.revents & POLLOUT) {
			ssize_t w = send(f->c.fd, f->burst + off, f->len - off,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0)
				off = (off + (size_t)w) % f->len;
		}
	}
	return NULL;
}

static void phase_stats_flood(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", "--set", "stats.namespaces=256",
				NULL };
	static struct sf_flooder fl[SF_FLOODERS];
	uint64_t lat[400], cpu[400], alone[SF_BASE], got = 0;
	unsigned nlat = 0;
	uint8_t *one = NULL;
	int64_t n1;
	struct kc m, a;

	start_with("stats_flood", extra, "alice " SECRET_ALICE " tenant\n"
					 "mallory " SECRET_ALICE " tenant\n"
					 "admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	cf_register(&m, "sf", SF_NS);
	{
		struct proto_frame f = { .op = PROTO_OP_STATS, .tag = 7, .version = m.version };
		f.scope.scope = PROTO_SCOPE_TENANT;
		n1 = kc_encode(&f, NULL, 0, NULL, 0, &one);
		T_ASSERT(n1 > 0);
	}
	T_RC(kc_dial(&a, srv.port, "admin", SECRET_ADMIN), 0);
	for (unsigned i = 0; i < SF_BASE; i++) { /* one STATS alone, in the server's CPU */
		uint64_t c0 = srv_cpu_ns();
		bool more = true;
		T_RC(kc_send(&m, one, (size_t)n1), 0);
		while (more) { /* its frames (~33 KB each: PROTO_F_MORE but the last) */
			struct kc_resp r;
			T_RC(kc_recv(&m, &r, 10000), 0);
			more = r.f.flags & PROTO_F_MORE;
			kc_resp_free(&r);
		}
		alone[i] = srv_cpu_ns() - c0;
	}
	qsort(alone, SF_BASE, sizeof(*alone), cmp_u64);
	rss_begin();
	for (unsigned i = 0; i < SF_FLOODERS; i++) {
		T_RC(kc_dial(&fl[i].c, srv.port, "mallory", SECRET_ALICE), 0);
		fl[i].len = (size_t)n1 * SF_BURST;
		fl[i].burst = malloc(fl[i].len);
		T_ASSERT(fl[i].burst != NULL);
		for (unsigned k = 0; k < SF_BURST; k++)
			memcpy(fl[i].burst + k * (size_t)n1, one, (size_t)n1);
		pthread_create(&fl[i].t, NULL, sf_flood_main, &fl[i]);
	}
	tsrv_sleep_ms(200);
	for (uint64_t end = tsrv_now_ns() + (SF_SECONDS - 1) * 1000000000ull;
	     tsrv_now_ns() < end && nlat < sizeof(lat) / sizeof(lat[0]);) {
		uint64_t c0 = srv_cpu_ns(), p0 = tsrv_now_ns();
		T_RC(kc_ping(&a), 0);
		lat[nlat] = tsrv_now_ns() - p0;
		cpu[nlat++] = srv_cpu_ns() - c0;
		tsrv_sleep_ms(5);
	}
	for (unsigned i = 0; i < SF_FLOODERS; i++) {
		pthread_join(fl[i].t, NULL);
		got += fl[i].got;
	}
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	qsort(cpu, nlat, sizeof(*cpu), cmp_u64);
	printf("stats_flood: %u pipelines of STATS of a tenant's %u namespace rows for %d s (%.0f "
	       "MB of answers); another client's PING: %u, p50 %.2f ms, max %.2f ms; the "
	       "server's CPU a PING p50 %.2f ms, max %.2f ms, %.2f x one STATS alone (%.2f ms)\n",
	       SF_FLOODERS, SF_NS, SF_SECONDS, got / 1e6, nlat, lat[nlat / 2] / 1e6,
	       lat[nlat - 1] / 1e6, cpu[nlat / 2] / 1e6, cpu[nlat - 1] / 1e6,
	       (double)cpu[nlat / 2] / (double)alone[SF_BASE / 2], alone[SF_BASE / 2] / 1e6);
	T_GE_INT(got, 1u << 20); /* the tenant's STATS are answered */
	T_LE_INT(cpu[nlat / 2], SF_RATIO * alone[SF_BASE / 2] + 1000000u);
	rss_end(DRAM + MAX_MEMORY);
	for (unsigned i = 0; i < SF_FLOODERS; i++) {
		kc_close(&fl[i].c);
		free(fl[i].burst);
	}
	free(one);
	kc_close(&a);
	kc_close(&m);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * stats_unread (red45): STATS of a tenant's 255 namespace rows (178 KB
 * of answer from an 88-byte frame) pipelined 2,000 deep on 16
 * connections, never read: bounded by the pauses (out_share, mem), not
 * changed; kept as the figure's test (RSS +19 MiB, another tenant's
 * round trips served).
 */

#define SU_CONNS 16u
#define SU_FRAMES 2000u

static void phase_stats_unread(void)
{
	const char *extra[] = { "--threads", "1", "--ssd", "0", "--set", "stats.namespaces=256",
				NULL };
	struct kc m, *cs = calloc(SU_CONNS, sizeof(*cs)), good;
	uint8_t *one = NULL, *burst, ns[PROTO_DIGEST_LEN];
	int64_t n1;
	uint64_t answer = 0, grew;
	int bad, reg;

	T_ASSERT(cs != NULL);
	start_with("stats_unread", extra, "alice " SECRET_ALICE " tenant\n"
					  "mallory " SECRET_ALICE " tenant\n"
					  "admin " SECRET_ADMIN " admin\n");
	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	cf_register(&m, "su", SF_NS);
	{
		struct proto_frame f = { .op = PROTO_OP_STATS, .tag = 7, .version = m.version };
		f.scope.scope = PROTO_SCOPE_TENANT;
		n1 = kc_encode(&f, NULL, 0, NULL, 0, &one);
		T_ASSERT(n1 > 0);
	}
	{
		bool more = true;
		T_RC(kc_send(&m, one, (size_t)n1), 0);
		while (more) {
			struct kc_resp r;
			T_RC(kc_recv(&m, &r, 10000), 0);
			more = r.f.flags & PROTO_F_MORE;
			answer += r.len;
			kc_resp_free(&r);
		}
	}
	burst = malloc((size_t)n1 * SU_FRAMES);
	for (unsigned k = 0; k < SU_FRAMES; k++)
		memcpy(burst + k * (size_t)n1, one, (size_t)n1);
	for (unsigned i = 0; i < SU_CONNS; i++)
		T_RC(kc_dial(&cs[i], srv.port, "mallory", SECRET_ALICE), 0);
	rss_begin();
	for (unsigned i = 0; i < SU_CONNS; i++)
		(void)send_for(cs[i].fd, burst, (size_t)n1 * SU_FRAMES, 300);
	tsrv_sleep_ms(1500);
	T_RC(kc_dial(&good, srv.port, "alice", SECRET_ALICE), 0);
	reg = kc_register(&good, &desc, ns, NULL, 0);
	bad = reg == KVT_OK ? roundtrips(&good, ns, 4, 4096, 47) : 4;
	kc_close(&good);
	printf("stats_unread: one STATS answer %" PRIu64 " bytes from %" PRId64 "; %u connections "
	       "x %u pipelined, unread: alice's NS_REGISTER %d, failed round trips %d of 4\n",
	       answer, n1, SU_CONNS, SU_FRAMES, reg, bad);
	grew = rss_end(MAX_MEMORY);
	printf("stats_unread: RSS +%" PRIu64 " MiB\n", grew >> 20);
	for (unsigned i = 0; i < SU_CONNS; i++)
		kc_close(&cs[i]);
	kc_close(&m);
	free(burst);
	free(one);
	free(cs);
	T_EQ_INT(bad, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * stats_frames (redbin): a STATS answer is every figure -- ~8 a quota
 * group (STATS ALL), ~20 a namespace row -- and went out as one frame,
 * while HELLO announces items_max 1024: a client that checks an answer
 * against the limits announced (the tests' client, the daemon's own
 * peer: repair.c's drain poll) was refused it, PROTO_ECOUNT, past ~130
 * tenants or ~50 namespaces.  Now it comes in frames of at most 1024
 * items, MORE on all but the last.  And its names were copied into one
 * arena of 256 KiB, full at the most tenants (1,022) with the most rows
 * (stats.namespaces=256) in use: the figures past it were left out
 * without a word (the last ~20 rows).  Now the arena grows.
 */

#define STF_TENANTS 1021u /* and the admin: the most */
#define STF_NS 256u       /* stats.namespaces' most, each with a block */

struct stf_count {
	uint64_t items, max_frame, groups, rows;
};

static bool stf_ends(const struct proto_item *it, const char *head, const char *tail)
{
	size_t h = strlen(head), t = strlen(tail);

	return it->name_len > h + t && memcmp(it->name, head, h) == 0 &&
	       memcmp(it->name + it->name_len - t, tail, t) == 0;
}

static void stf_item(void *ctx, const struct kc_resp *r, const struct proto_item *it)
{
	struct stf_count *n = ctx;

	n->items++;
	if (r->f.item_count > n->max_frame)
		n->max_frame = r->f.item_count;
	n->groups += stf_ends(it, "quota.", ".dram_limit");
	/* a row's last figure */
	n->rows += stf_ends(it, "ns.", ".evicted_unread_bytes");
}

static int stf_stats(struct kc *c, uint32_t scope, struct stf_count *n)
{
	struct proto_frame f = { .op = PROTO_OP_STATS };
	int32_t status = 0;
	int frames;

	memset(n, 0, sizeof(*n));
	f.scope.scope = scope;
	if (kc_request(c, &f, NULL, 0, NULL, 0) < 0)
		return -EIO;
	frames = kc_recv_items(c, 5000, stf_item, n, &status);
	return frames < 0 ? frames : status < 0 ? status : frames;
}

static void phase_stats_frames(void)
{
	const char *extra[] = { "--ssd", "0", "--set", "stats.namespaces=256", NULL };
	char *t = tenants_text("t", STF_TENANTS), name[64];
	uint8_t vb[64] = { 1 };
	struct stf_count n;
	uint64_t v = 0, group = 0;
	int frames;
	struct kc a, m;

	start_with("stats_frames", extra, t);
	free(t);
	T_RC(kc_dial(&a, srv.port, "admin", SECRET_ADMIN), 0);
	snprintf(name, sizeof(name), "t%u", STF_TENANTS - 1);
	T_RC(kc_dial(&m, srv.port, name, SECRET_ALICE), 0);
	for (unsigned i = 0; i < STF_NS; i++) { /* a row each */
		struct kvt_ns_desc d = desc;
		struct iovec p = { vb, sizeof(vb) };
		uint8_t dg[PROTO_DIGEST_LEN];
		struct kvt_key k;
		char model[64];
		snprintf(model, sizeof(model), "stf-%u", i);
		d.model = model;
		T_RC(kc_register(&m, &d, dg, NULL, 0), KVT_OK);
		kvt_key_set(&k, "k", 1);
		T_RC(kc_put(&m, dg, &k, &p, 1, NULL), KVT_OK);
	}
	frames = stf_stats(&a, PROTO_SCOPE_ALL, &n);
	printf("stats_frames: STATS ALL of %u tenants, %u rows: %d frames, %" PRIu64
	       " items (%" PRIu64 " quota groups, %" PRIu64 " rows), at most %" PRIu64
	       " a frame (items_max %u)\n", STF_TENANTS + 1, STF_NS, frames, n.items, n.groups,
	       n.rows, n.max_frame, a.lim.items_max);
	T_GE_INT(frames, 2);
	T_LE_INT(n.max_frame, a.lim.items_max);
	T_GE_INT(n.groups, STF_TENANTS + 1);
	T_EQ_U64(n.rows, STF_NS); /* none left out */
	/* the figures of the last tenant's group, by name */
	T_RC(kc_stat(&m, PROTO_SCOPE_TENANT, "tenant.quota_group", &group), 0);
	snprintf(name, sizeof(name), "quota.%" PRIu64 ".dram_limit", group);
	T_RC(kc_stat(&a, PROTO_SCOPE_ALL, name, &v), 0);
	T_EQ_U64(v, 1u << 20);
	/* the tenant's own: its rows numbered 1..256 */
	frames = stf_stats(&m, PROTO_SCOPE_TENANT, &n);
	printf("stats_frames: a tenant's STATS of %u namespaces: %d frames, %" PRIu64
	       " items, at most %" PRIu64 " a frame\n", STF_NS, frames, n.items, n.max_frame);
	T_GE_INT(frames, 2);
	T_LE_INT(n.max_frame, m.lim.items_max);
	T_EQ_U64(n.rows, STF_NS);
	snprintf(name, sizeof(name), "ns.%u.puts", STF_NS);
	T_RC(kc_stat(&m, PROTO_SCOPE_TENANT, name, &v), 0);
	T_EQ_U64(v, 1);
	/* the connections stay in step: a PING after */
	T_RC(kc_ping(&a), 0);
	T_RC(kc_ping(&m), 0);
	kc_close(&a);
	kc_close(&m);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_keys (attack26): a RESP MGET, EXISTS or DEL names up to 65535 keys
 * (an MSET 32767 pairs, two store requests each), a probe or a write of
 * a key in DRAM completes inline, and the parse budget counted a command
 * as one item: 64 commands of 65535 keys an iteration of one connection,
 * all their store requests in one go on the loop.  Three connections of
 * one tenant pipeline them (MGET and EXISTS of missing keys, MSET of
 * 1,000 small values; 2 a send, the replies read and checked) on one
 * loop, and another tenant's PING is timed every 5 ms meanwhile; then
 * one MSET, MGET, DEL and EXISTS of 32767 keys check the answers' order
 * and counts across the windows.  Now a command counts its arguments in
 * the parse budget and goes to the store RESPD_PROBE_WINDOW keys at a
 * time, KVTD_WORK_ITER keys an iteration of the loop (the rest in a
 * later one: server.work_deferred; respd.c "Keys a loop iteration").
 */

#define RK_KEYS 65535u
#define RK_PAIRS 32767u
#define RK_DISTINCT 700u
#define RK_BURST 2u
/* The floods' time: 2 s (3 until 2026-12-06) still take 150-320 PINGs
 * alone (224 and 481 in 3 s, ASan and release, CI). */
#define RK_SECONDS 2u
#define RK_FLOODERS 3u
#ifdef HOSTILE_TSAN
#define RK_P50_MAX_NS 200000000ull
#define RK_P99_MAX_NS 3000000000ull
#else
#define RK_P50_MAX_NS (50000000ull * HOSTILE_BESIDE)
#define RK_P99_MAX_NS (1000000000ull * HOSTILE_BESIDE)
#endif

struct rk_flooder {
	pthread_t t;
	int fd;
	char *burst;             /* RK_BURST copies of the command */
	size_t len;              /* their bytes */
	char *want;              /* the replies expected, RK_BURST of them */
	size_t want_len;
	_Atomic bool stop;
	unsigned answered;
	bool failed;
};

static void *rk_flood_main(void *arg)
{
	struct rk_flooder *f = arg;
	char *got = malloc(f->want_len + 1);

	while (got && !atomic_load(&f->stop) && !f->failed) {
		bool closed = false;
		if (send_for(f->fd, f->burst, f->len, 30000) != (int64_t)f->len ||
		    recv_for(f->fd, got, f->want_len + 1, 30000, &closed) != f->want_len ||
		    memcmp(got, f->want, f->want_len) != 0)
			f->failed = true;
		else
			f->answered += RK_BURST;
	}
	free(got);
	return NULL;
}

/* A RESP command of argc arguments (each a NUL-ended string) into a
 * malloc'd buffer: its length in *len. */
static char *rk_cmd(unsigned argc, const char *const *argv, size_t *len)
{
	size_t cap = 16, o;
	char *b;

	for (unsigned i = 0; i < argc; i++)
		cap += 32 + strlen(argv[i]);
	b = malloc(cap);
	T_ASSERT(b != NULL);
	o = (size_t)snprintf(b, cap, "*%u\r\n", argc);
	for (unsigned i = 0; i < argc; i++)
		o += (size_t)snprintf(b + o, cap - o, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
	*len = o;
	return b;
}

/* A command of a name and n keys (and, with vfmt, each key's value)
 * formatted from kfmt with the key's index modulo mod. */
static char *rk_keys_cmd(const char *name, unsigned n, const char *kfmt, const char *vfmt,
			 unsigned mod, size_t *len)
{
	unsigned per = vfmt ? 2 : 1, argc = 1 + per * n;
	const char **argv = malloc(argc * sizeof(*argv));
	char *text = malloc((size_t)n * per * 16), *b;

	T_ASSERT(argv != NULL && text != NULL);
	argv[0] = name;
	for (unsigned i = 0; i < n; i++) {
		char *k = text + (size_t)i * per * 16;
		snprintf(k, 16, kfmt, i % mod);
		argv[1 + per * i] = k;
		if (vfmt) {
			snprintf(k + 16, 16, vfmt, i % mod);
			argv[2 + per * i] = k + 16;
		}
	}
	b = rk_cmd(argc, argv, len);
	free(argv);
	free(text);
	return b;
}

/* Send cmd on fd and compare the reply with want, exactly. */
static void rk_check(int fd, const char *what, const char *cmd, size_t len, const char *want,
		     size_t want_len)
{
	char *got = malloc(want_len + 1);
	bool closed = false;
	size_t n;

	T_ASSERT(got != NULL);
	T_EQ_INT(send_for(fd, cmd, len, 10000), (int64_t)len);
	n = recv_for(fd, got, want_len + 1, 30000, &closed);
	printf("resp_keys: %s: %zu bytes of reply, '%.12s'\n", what, n, got);
	T_EQ_INT(n, want_len);
	T_ASSERT(memcmp(got, want, want_len) == 0);
	free(got);
}

static int rk_login(uint16_t port, const char *who, const char *secret)
{
	const char *argv[3] = { "AUTH", who, secret };
	char reply[8] = { 0 };
	bool closed = false;
	size_t len;
	char *auth = rk_cmd(3, argv, &len);
	int fd = tcp_connect(port);

	T_EQ_INT(send_for(fd, auth, len, 1000), (int64_t)len);
	recv_for(fd, reply, 6, 2000, &closed);
	T_ASSERT(strncmp(reply, "+OK", 3) == 0);
	free(auth);
	return fd;
}

static void phase_resp_keys(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--max-memory", "512M", "--threads", "1",
				NULL };
	static const char *const names[RK_FLOODERS] = { "MGET", "EXISTS", "MSET" };
	struct rk_flooder fl[RK_FLOODERS];
	uint64_t lat[600], s[600], d0, d1, t_end;
	unsigned nlat = 0, bad = 0;
	uint16_t port;
	int victim, c;

	start("resp_keys", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	victim = rk_login(port, "admin", SECRET_ADMIN);
	d0 = stat_of("server.work_deferred");
	for (unsigned i = 0; i < RK_FLOODERS; i++) {
		bool mset = i == 2;
		size_t len, rl = 0, o = 0;
		char *one = mset ? rk_keys_cmd("MSET", RK_PAIRS, "f%u", "%u", 1000, &len)
				 : rk_keys_cmd(names[i], RK_KEYS, "miss-%u", NULL, 1000, &len);
		char reply[16];
		fl[i] = (struct rk_flooder){ .fd = rk_login(port, "alice", SECRET_ALICE) };
		fl[i].burst = malloc(len * RK_BURST);
		T_ASSERT(fl[i].burst != NULL);
		for (unsigned b = 0; b < RK_BURST; b++)
			memcpy(fl[i].burst + b * len, one, len);
		fl[i].len = len * RK_BURST;
		free(one);
		if (i == 0) {
			rl = (size_t)snprintf(reply, sizeof(reply), "*%u\r\n", RK_KEYS) + RK_KEYS * 5;
			fl[i].want = malloc(rl * RK_BURST);
			for (unsigned b = 0; b < RK_BURST; b++) {
				o += (size_t)sprintf(fl[i].want + o, "*%u\r\n", RK_KEYS);
				for (unsigned k = 0; k < RK_KEYS; k++, o += 5)
					memcpy(fl[i].want + o, "$-1\r\n", 5);
			}
		} else {
			rl = (size_t)snprintf(reply, sizeof(reply), "%s", mset ? "+OK\r\n" : ":0\r\n");
			fl[i].want = malloc(rl * RK_BURST + 1);
			for (unsigned b = 0; b < RK_BURST; b++, o += rl)
				memcpy(fl[i].want + o, reply, rl);
		}
		fl[i].want_len = rl * RK_BURST;
		T_EQ_INT(o, fl[i].want_len);
	}
	for (unsigned i = 0; i < RK_FLOODERS; i++)
		pthread_create(&fl[i].t, NULL, rk_flood_main, &fl[i]);
	tsrv_sleep_ms(300); /* the pipelines under way */
	t_end = tsrv_now_ns() + RK_SECONDS * 1000000000ull;
	nlat = resp_ping_lat(victim, t_end, lat, NULL, sizeof(lat) / sizeof(lat[0]), &bad);
	for (unsigned i = 0; i < RK_FLOODERS; i++)
		atomic_store(&fl[i].stop, true);
	for (unsigned i = 0; i < RK_FLOODERS; i++)
		pthread_join(fl[i].t, NULL);
	d1 = stat_of("server.work_deferred");
	memcpy(s, lat, nlat * sizeof(*s));
	qsort(s, nlat, sizeof(*s), cmp_u64);
	printf("resp_keys: MGET, EXISTS of %u keys and MSET of %u pairs pipelined %u a send for "
	       "%u s, answered:", RK_KEYS, RK_PAIRS, RK_BURST, RK_SECONDS);
	for (unsigned i = 0; i < RK_FLOODERS; i++)
		printf(" %s %u%s", names[i], fl[i].answered, fl[i].failed ? " (failed)" : "");
	printf("; work_deferred +%" PRIu64 "; another tenant's PING: %u, p50 %.1f ms, p99 %.1f ms, "
	       "max %.1f ms, %u failed\n", d1 - d0, nlat, nlat ? s[nlat / 2] / 1e6 : 0.0,
	       nlat ? s[nlat * 99 / 100] / 1e6 : 0.0, nlat ? s[nlat - 1] / 1e6 : 0.0, bad);
	for (unsigned i = 0; i < RK_FLOODERS; i++) {
		T_ASSERT(!fl[i].failed);
		T_GE_INT(fl[i].answered, RK_BURST);
		close(fl[i].fd);
		free(fl[i].burst);
		free(fl[i].want);
	}
	T_GE_INT(nlat, 10);
	T_EQ_INT(bad, 0);
	T_LE_INT(s[nlat / 2], RK_P50_MAX_NS);
	T_LE_INT(s[nlat * 99 / 100], RK_P99_MAX_NS);
	/* The cause: the big commands' windows went on in later iterations. */
	T_GE_INT(d1 - d0, 1);

	/* Answers across the windows: an MSET of RK_PAIRS pairs naming
	 * RK_DISTINCT keys over and over (a small value takes a 64 KiB
	 * chunk of DRAM: 1,024 fit, and an MGET pins each key it names),
	 * an MGET of those and 64,835 missing keys, a DEL and an EXISTS naming
	 * them over and over. */
	c = rk_login(port, "alice", SECRET_ALICE);
	{
		size_t len, wl = 0, cap = (size_t)RK_KEYS * 16 + 64;
		char *cmd = rk_keys_cmd("MSET", RK_PAIRS, "c%u", "v%u", RK_DISTINCT, &len);
		char *want = malloc(cap);
		T_ASSERT(want != NULL);
		rk_check(c, "MSET", cmd, len, "+OK\r\n", 5);
		free(cmd);
		/* c0 to c699 set, the rest missing */
		cmd = rk_keys_cmd("MGET", RK_KEYS, "c%u", NULL, RK_KEYS, &len);
		wl = (size_t)snprintf(want, cap, "*%u\r\n", RK_KEYS);
		for (unsigned i = 0; i < RK_KEYS; i++) {
			char v[16];
			int vl = snprintf(v, sizeof(v), "v%u", i);
			wl += (size_t)(i < RK_DISTINCT
				       ? snprintf(want + wl, cap - wl, "$%d\r\n%s\r\n", vl, v)
				       : snprintf(want + wl, cap - wl, "$-1\r\n"));
		}
		rk_check(c, "MGET", cmd, len, want, wl);
		free(cmd);
		cmd = rk_keys_cmd("DEL", RK_KEYS, "c%u", NULL, RK_DISTINCT, &len);
		wl = (size_t)snprintf(want, cap, ":%u\r\n", RK_DISTINCT);
		rk_check(c, "DEL", cmd, len, want, wl);
		free(cmd);
		cmd = rk_keys_cmd("EXISTS", RK_KEYS, "c%u", NULL, RK_DISTINCT, &len);
		rk_check(c, "EXISTS", cmd, len, ":0\r\n", 4);
		free(cmd);
		/* An MGET naming one expired key RK_KEYS times: its value is
		 * deleted as the first window settles, later windows miss it
		 * (before: RK_KEYS deletes submitted in one go at the end).
		 * store.submitted counts the requests: RK_KEYS probes and at
		 * most a window of deletes. */
		{
			const char *const set[] = { "SET", "exp", "x", "PX", "1" };
			uint64_t s0, s1;
			char *sc = rk_cmd(5, set, &len);
			rk_check(c, "SET PX 1", sc, len, "+OK\r\n", 5);
			free(sc);
			tsrv_sleep_ms(50);
			cmd = rk_keys_cmd("MGET", RK_KEYS, "exp", NULL, 1, &len);
			wl = (size_t)snprintf(want, cap, "*%u\r\n", RK_KEYS);
			for (unsigned i = 0; i < RK_KEYS; i++, wl += 5)
				memcpy(want + wl, "$-1\r\n", 5);
			s0 = stat_of("store.submitted");
			rk_check(c, "MGET of an expired key", cmd, len, want, wl);
			s1 = stat_of("store.submitted");
			printf("resp_keys: the MGET of an expired key %u times: %" PRIu64
			       " requests submitted\n", RK_KEYS, s1 - s0);
			T_LE_INT(s1 - s0, RK_KEYS + 256u);
			free(cmd);
		}
		free(want);
	}
	close(c);
	close(victim);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_reparse (attack27): a RESP command still arriving was parsed
 * again from its first byte on every read.  Its bulk strings are skipped
 * by their length, so a large SET costs nothing per read, but a command
 * of 65536 arguments of one byte (458,763 bytes) walked up to 65536
 * argument headers on each: sent in 70-byte segments it held the loop
 * ~0.5 ms a read, for the bytes of a PING.  Now the parser resumes where
 * the last read left it (resp_parse_from).  Each of RR_CONNS connections
 * sends unknown commands (answered one short error each, nothing run) in
 * RR_SEG-byte segments, a pause between them: first as one bulk string of
 * the same length, then as 65535 arguments; the loop thread's CPU per
 * byte received is compared, and every command must be answered.  Before:
 * a ratio of 8.0-10.9 (ASan and release; the admin's PING p50 0.06 ->
 * 1.5-2.2 ms ASan); after 1.1-1.3.
 */

#define RR_ARGS 65536u
#define RR_SEG 70u
#define RR_CONNS 2u
#define RR_SECONDS 2u
/* Loop CPU per byte, many arguments against one bulk string: 1.1-1.3
 * seen after, 8.0-10.9 before (ASan and release). */
#define RR_RATIO_MAX 3.0

struct rr_sender {
	pthread_t t;
	int fd;
	const char *cmd;
	size_t len;
	uint64_t bytes, cmds, replies;
	bool failed;
};

static void *rr_send_main(void *arg)
{
	struct rr_sender *r = arg;
	uint64_t end = tsrv_now_ns() + RR_SECONDS * 1000000000ull, drain;
	struct timespec pause = { 0, 200000 };
	char sink[4096];

	while (!r->failed && tsrv_now_ns() < end) {
		for (size_t off = 0; off < r->len && !r->failed;) {
			size_t n = r->len - off < RR_SEG ? r->len - off : RR_SEG;
			if (send_for(r->fd, r->cmd + off, n, 5000) != (int64_t)n)
				r->failed = true;
			off += n;
			r->bytes += n;
			nanosleep(&pause, NULL);
		}
		if (!r->failed)
			r->cmds++;
		for (ssize_t g; (g = recv(r->fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0;)
			for (ssize_t i = 0; i < g; i++)
				r->replies += sink[i] == '\n';
	}
	drain = tsrv_now_ns() + 10000000000ull;
	while (!r->failed && r->replies < r->cmds && tsrv_now_ns() < drain) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		ssize_t g;
		if (poll(&p, 1, 100) <= 0)
			continue;
		g = recv(r->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (g == 0)
			r->failed = true;
		for (ssize_t i = 0; i < g; i++)
			r->replies += sink[i] == '\n';
	}
	return NULL;
}

/* RR_CONNS connections of alice send cmd (len bytes) over and over for
 * RR_SECONDS; the admin's PINGs timed meanwhile (p50 into *p50_ns): the
 * loop thread's CPU in ms per MB sent. */
static double rr_episode(uint16_t port, int victim, const char *what, const char *cmd,
			 size_t len, uint64_t *p50_ns)
{
	struct rr_sender r[RR_CONNS];
	uint64_t lat[500], loop0, loop_ms, bytes = 0, cmds = 0, replies = 0;
	unsigned nlat, bad = 0;
	double per_mb;

	loop0 = thread_cpu_ms("kvtd-loop");
	for (unsigned i = 0; i < RR_CONNS; i++) {
		r[i] = (struct rr_sender){ .fd = resp_alice(port), .cmd = cmd, .len = len };
		pthread_create(&r[i].t, NULL, rr_send_main, &r[i]);
	}
	nlat = resp_ping_lat(victim, tsrv_now_ns() + (RR_SECONDS - 0.2) * 1e9, lat, NULL,
			     sizeof(lat) / sizeof(lat[0]), &bad);
	for (unsigned i = 0; i < RR_CONNS; i++) {
		pthread_join(r[i].t, NULL);
		T_ASSERT(!r[i].failed);
		bytes += r[i].bytes;
		cmds += r[i].cmds;
		replies += r[i].replies;
		close(r[i].fd);
	}
	loop_ms = thread_cpu_ms("kvtd-loop") - loop0;
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	*p50_ns = lat[nlat / 2];
	per_mb = (double)loop_ms / ((double)bytes / 1e6);
	printf("resp_reparse: %s: %" PRIu64 " bytes in %u-byte segments, %" PRIu64
	       " commands, %" PRIu64 " answered; loop CPU %" PRIu64 " ms (%.1f ms/MB); "
	       "the admin's PING n %u, p50 %.2f ms, p99 %.2f ms\n", what, bytes, RR_SEG, cmds,
	       replies, loop_ms, per_mb, nlat, lat[nlat / 2] / 1e6, lat[nlat * 99 / 100] / 1e6);
	fflush(stdout); /* seen if an assertion below ends the test */
	T_EQ_INT(bad, 0);
	T_GE_INT(cmds, RR_CONNS);
	T_EQ_INT(replies, cmds);
	return per_mb;
}

static void phase_resp_reparse(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--threads", "1", NULL };
	size_t len = 0, hdr, blen, one_len;
	char *many = malloc((size_t)RR_ARGS * 8 + 64), *one;
	uint64_t p50_one, p50_many;
	double one_mb, many_mb;
	uint16_t port;
	int victim;

	T_ASSERT(many != NULL);
	len += (size_t)sprintf(many, "*%u\r\n$4\r\nXNOP\r\n", RR_ARGS);
	for (unsigned i = 1; i < RR_ARGS; i++, len += 7)
		memcpy(many + len, "$1\r\nx\r\n", 7);
	/* The same length as one argument after the name. */
	hdr = strlen("*2\r\n$4\r\nXNOP\r\n$000000\r\n");
	blen = len - hdr - 2;
	one = malloc(len + 1);
	T_ASSERT(one != NULL);
	one_len = (size_t)sprintf(one, "*2\r\n$4\r\nXNOP\r\n$%06zu\r\n", blen);
	T_EQ_INT(one_len, hdr);
	memset(one + one_len, 'x', blen);
	memcpy(one + one_len + blen, "\r\n", 2);
	one_len += blen + 2;
	T_EQ_INT(one_len, len);

	start("resp_reparse", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	victim = rk_login(port, "admin", SECRET_ADMIN);
	rss_begin();
	one_mb = rr_episode(port, victim, "one bulk string", one, one_len, &p50_one);
	many_mb = rr_episode(port, victim, "65535 arguments", many, len, &p50_many);
	printf("resp_reparse: loop CPU per byte, many arguments / one: %.2f (bound %.1f)\n",
	       many_mb / one_mb, RR_RATIO_MAX);
	fflush(stdout);
	T_ASSERT(many_mb <= one_mb * RR_RATIO_MAX);
	rss_end(DRAM + MAX_MEMORY);
	close(victim);
	free(many);
	free(one);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * resp_hello (attack27): HELLO took each of its AUTH options in turn, an
 * HMAC, a tenant lookup and a switch of the connection's tenant each, all
 * in one go on the loop: one HELLO of 21,844 AUTHs (65,534 arguments, 1.5
 * MB) held the loop ~50 ms (release), whatever the parse budget (a command
 * is always taken whole).  Now the options are read and the last AUTH is
 * tried once, as Redis does.  RH_CONNS connections of alice send such
 * HELLOs, one at a time each, reading the answers; the admin's PING is
 * timed every 5 ms beside them; server.auth_ok counts the AUTHs tried.
 */

#define RH_AUTHS 21844u /* 2 + 3 * RH_AUTHS arguments: within 65536 */
#define RH_CONNS 3u
#define RH_SECONDS 2u
/* PING p50 beside them: 5.0 ms after (ASan: the parse of such commands;
 * release 0.06 ms), 451 ms before (release 105 ms); 52 ms once in CI
 * with load 10 beside it (2026-12-06): the sanitizers' bound is 100 ms
 * (200 under ASan: HOSTILE_BESIDE).  Since 2026-12-07 the p50 bounded is
 * the server's CPU a PING waits (srv_cpu_ns), the wall p50 printed:
 * release wall 0.14-4.65 ms at load 7-9 against 5 */
#if defined(HOSTILE_ASAN) || defined(HOSTILE_TSAN)
#define RH_P50_MAX_NS (100000000ull * HOSTILE_BESIDE)
#else
#define RH_P50_MAX_NS 5000000ull
#endif

struct rh_sender {
	pthread_t t;
	int fd;
	const char *cmd;
	size_t len;
	unsigned sent, answered;
	bool failed;
};

static void *rh_send_main(void *arg)
{
	struct rh_sender *r = arg;
	uint64_t end = tsrv_now_ns() + RH_SECONDS * 1000000000ull;
	char buf[512];

	while (!r->failed && tsrv_now_ns() < end) {
		size_t got = 0;
		bool closed = false;
		if (send_for(r->fd, r->cmd, r->len, 10000) != (int64_t)r->len) {
			r->failed = true;
			break;
		}
		r->sent++;
		/* the HELLO map: "*14\r\n$6\r\nserver\r\n..." */
		got = recv_for(r->fd, buf, 64, 10000, &closed);
		if (got < 12 || strncmp(buf, "*14\r\n$6\r\nserver", 15) != 0) {
			printf("resp_hello: a HELLO answered %.40s\n", buf);
			r->failed = true;
			break;
		}
		r->answered++;
		recv_for(r->fd, buf, sizeof(buf), 20, &closed); /* the rest of the map */
	}
	return NULL;
}

static void phase_resp_hello(void)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--threads", "1", NULL };
	unsigned argc = 2 + 3 * RH_AUTHS, hellos = 0, nlat, bad = 0;
	const char **argv = malloc(argc * sizeof(*argv));
	struct rh_sender r[RH_CONNS];
	uint64_t lat[500], cpu[500], ok0, ok1;
	size_t len;
	char *cmd;
	uint16_t port;
	int victim;

	T_ASSERT(argv != NULL);
	argv[0] = "HELLO";
	argv[1] = "2";
	for (unsigned i = 0; i < RH_AUTHS; i++) {
		argv[2 + 3 * i] = "AUTH";
		argv[3 + 3 * i] = "alice";
		argv[4 + 3 * i] = SECRET_ALICE;
	}
	cmd = rk_cmd(argc, argv, &len);
	free(argv);
	start("resp_hello", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	victim = rk_login(port, "admin", SECRET_ADMIN);
	rss_begin();
	ok0 = stat_of("server.auth_ok");
	for (unsigned i = 0; i < RH_CONNS; i++) {
		r[i] = (struct rh_sender){ .fd = resp_alice(port), .cmd = cmd, .len = len };
		pthread_create(&r[i].t, NULL, rh_send_main, &r[i]);
	}
	tsrv_sleep_ms(100);
	nlat = resp_ping_lat(victim, tsrv_now_ns() + (RH_SECONDS - 0.3) * 1e9, lat, cpu,
			     sizeof(lat) / sizeof(lat[0]), &bad);
	for (unsigned i = 0; i < RH_CONNS; i++) {
		pthread_join(r[i].t, NULL);
		T_ASSERT(!r[i].failed);
		T_EQ_INT(r[i].answered, r[i].sent);
		hellos += r[i].answered;
		close(r[i].fd);
	}
	ok1 = stat_of("server.auth_ok");
	qsort(lat, nlat, sizeof(*lat), cmp_u64);
	qsort(cpu, nlat, sizeof(*cpu), cmp_u64);
	printf("resp_hello: %u connections sent %u HELLOs of %u AUTHs (%zu bytes each), all "
	       "answered; server.auth_ok +%" PRIu64 "; the admin's PING n %u, p50 %.2f ms, p99 "
	       "%.2f ms, max %.2f ms; the server's CPU a PING p50 %.2f ms, max %.2f ms\n",
	       RH_CONNS, hellos, RH_AUTHS, len, ok1 - ok0, nlat, lat[nlat / 2] / 1e6,
	       lat[nlat * 99 / 100] / 1e6, lat[nlat - 1] / 1e6, cpu[nlat / 2] / 1e6,
	       cpu[nlat - 1] / 1e6);
	fflush(stdout);
	T_GE_INT(hellos, RH_CONNS);
	T_EQ_INT(bad, 0);
	/* one AUTH a HELLO (the resp_alice logins and stat_of's own AUTH
	 * count too: at most RH_CONNS + 2 more) */
	T_LE_INT(ok1 - ok0, (uint64_t)hellos + RH_CONNS + 2);
	T_LE_INT(cpu[nlat / 2], RH_P50_MAX_NS);
	rss_end(DRAM + MAX_MEMORY);
	close(victim);
	free(cmd);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * expiry_hash (red44): one tenant's RESP keys chosen to share one home in
 * the expiry index's key table (daemon/expiry.c), so that each SET with a
 * TTL walks all of them
 *
 * The table (and ops.c's quiet dedup, repair.c's rents) hashed (namespace,
 * key) with FNV-1a and no key: a client that knows its namespace's id
 * (its /metrics row, or 1 on a fresh server) computes keys of one home
 * offline.  The admin SETs EH_KEYS random keys in its own namespace (the
 * baseline, without a TTL: the index holds alice's alone), then alice
 * EH_KEYS keys with EX 3600 whose old hash agrees in its low EH_BITS bits
 * (the table holds 2^EH_BITS slots then), each pipelined EH_BATCH a send.  Before, each of alice's SETs walked the
 * cluster under the index's lock on the loop; now kvtd_key_hash is XXH3
 * seeded by a secret drawn at start (base.c): the server's CPU a SET of
 * alice's asserted <= EH_RATIO x the admin's.
 */

#define EH_KEYS 16000u /* each namespace holds a quarter of the index: 16,384 */
#define EH_BITS 15u    /* 16,001 entries: cap 16384, a table of 32768 */
#define EH_BATCH 256u
#define EH_RATIO 5.0 /* 24-28x before */

/* The daemon's key hash before 2026-12-07 (base.c kvtd_key_hash). */
static uint64_t eh_fnv_step(uint64_t h, uint8_t b)
{
	return (h ^ b) * 1099511628211ull;
}

/* n keys of 12 hex digits whose RESP kvtier key ('s' + key: respd.c
 * respd_key) had one home under 2^bits slots in namespace ns. */
static void eh_colliding(uint32_t ns, unsigned bits, unsigned n, char (*out)[13])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t mask = (1ull << bits) - 1, want = 0x2a5 & mask;
	unsigned got = 0;

	for (uint64_t p = 0; got < n; p++) {
		char k[13];
		uint64_t h = eh_fnv_step(1469598103934665603ull ^ ns, 's');
		for (int j = 0; j < 10; j++) {
			k[j] = hex[(p >> (4 * j)) & 15];
			h = eh_fnv_step(h, (uint8_t)k[j]);
		}
		for (unsigned a = 0; a < 16 && got < n; a++) {
			uint64_t ha = eh_fnv_step(h, (uint8_t)hex[a]);
			for (unsigned b = 0; b < 16 && got < n; b++) {
				uint64_t hb = eh_fnv_step(ha, (uint8_t)hex[b]);
				if (((hb ^ (hb >> 29)) & mask) != want)
					continue;
				memcpy(out[got], k, 10);
				out[got][10] = hex[a];
				out[got][11] = hex[b];
				out[got][12] = 0;
				got++;
			}
		}
	}
}

/* SET each of keys[0, n) on fd (with EX 3600 if ex), EH_BATCH a send,
 * every answer +OK: the server's CPU they took. */
static uint64_t eh_sets(int fd, char (*keys)[13], unsigned n, bool ex)
{
	char *cmd = malloc(EH_BATCH * 64), *reply = malloc(EH_BATCH * 5 + 1);
	uint64_t c0 = srv_cpu_ns();

	T_ASSERT(cmd != NULL && reply != NULL);
	for (unsigned i = 0; i < n; i += EH_BATCH) {
		unsigned m = n - i < EH_BATCH ? n - i : EH_BATCH;
		size_t len = 0, got;
		bool closed = false;
		for (unsigned j = 0; j < m; j++)
			len += (size_t)snprintf(cmd + len, 64, "*%d\r\n$3\r\nSET\r\n$12\r\n%s\r\n"
						"$1\r\nv\r\n%s", ex ? 5 : 3, keys[i + j],
						ex ? "$2\r\nEX\r\n$4\r\n3600\r\n" : "");
		T_EQ_INT(send_for(fd, cmd, len, 30000), (int64_t)len);
		got = recv_for(fd, reply, (size_t)m * 5 + 1, 60000, &closed);
		T_EQ_INT(got, (size_t)m * 5);
		for (unsigned j = 0; j < m; j++)
			T_ASSERT(memcmp(reply + 5 * j, "+OK\r\n", 5) == 0);
	}
	free(cmd);
	free(reply);
	return srv_cpu_ns() - c0;
}

static void phase_expiry_hash(void)
{
	/* 4 KiB chunks: the 32,001 values fit the tier, so that a SET's
	 * cost is not an eviction's */
	const char *extra[] = { "--resp", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--threads",
				"1", "--dram", "160M", "--set", "dram.chunk=4K", "--set",
				"dram.prefault=off", NULL };
	char (*keys)[13] = calloc(EH_KEYS, sizeof(*keys)), *page, *p;
	const char *row = "\",model=\"resp\",tenant=\"alice\"}";
	uint64_t base_ns, coll_ns, t0, gen_ns;
	unsigned ns = 0;
	double ratio;
	uint16_t port, mport;
	int fd, admin;

	T_ASSERT(keys != NULL);
	start("expiry_hash", extra);
	port = tsrv_listener_port(srv.log, "RESP");
	mport = tsrv_listener_port(srv.log, "metrics");
	fd = resp_alice(port);
	admin = rk_login(port, "admin", SECRET_ADMIN);
	for (unsigned i = 0; i < EH_KEYS; i++)
		snprintf(keys[i], 13, "r%011x", i * 2654435761u);
	base_ns = eh_sets(admin, keys, EH_KEYS, false);
	eh_sets(fd, keys, 1, true); /* alice's RESP namespace, and its id (what
				     * an attacker reads on /metrics, or guesses) */
	page = tsrv_http_body(mport, "/metrics");
	T_ASSERT(page != NULL);
	p = strstr(page, row);
	T_ASSERT(p != NULL);
	while (p > page && p[-1] != '"')
		p--;
	ns = (unsigned)strtoul(p, NULL, 10);
	free(page);
	t0 = tsrv_now_ns();
	eh_colliding(ns, EH_BITS, EH_KEYS, keys);
	gen_ns = tsrv_now_ns() - t0;
	coll_ns = eh_sets(fd, keys, EH_KEYS, true);
	ratio = (double)coll_ns / (double)base_ns;
	printf("expiry_hash: namespace %u; %u keys of one old home made in %.0f ms; the server's "
	       "CPU a SET: %.1f us for the admin's random keys, %.1f us for those (%.2fx; asserted <= "
	       "%.1f)\n", ns, EH_KEYS, gen_ns / 1e6, base_ns / 1e3 / EH_KEYS,
	       coll_ns / 1e3 / EH_KEYS, ratio, EH_RATIO);
	fflush(stdout);
	T_ASSERT(stat_of("server.resp_expiry_held") >= EH_KEYS);
	T_ASSERT(ratio <= EH_RATIO);
	close(fd);
	close(admin);
	free(keys);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ns_hash (red44): one tenant's namespaces chosen to share one home in
 * the namespace registry's digest table (lib/core/ns.c), then frames whose
 * namespace tables name digests of that home
 *
 * The registry found a digest by open addressing on the digest's first 8
 * bytes as they are: a digest is SHA-256 of a canonical text the client
 * writes (the server only sets its tenant= line, to the client's own), so
 * ~2^12 trial texts make one of a chosen home.  alice pipelines EXISTS
 * frames of one item whose namespace tables name 256 digests nobody
 * registers, all of one home (the table is resolved whole, and an unknown
 * digest is never cached: ops.c ops_ns_resolve) -- the baseline -- then
 * registers NH_NS namespaces of that home (her 1,024 at most) and sends
 * the same frames: each lookup walked the cluster under the registry's
 * lock, which every loop takes.  Now the slot is XXH3 of the digest
 * seeded by a secret drawn when the registry is made (and ops.c's cache
 * of a connection's namespaces is keyed too): the server's CPU a frame
 * asserted <= NH_RATIO x the baseline's.
 */

#define NH_NS 512u   /* alice's: she may have 1,024 */
#define NH_BITS 12u  /* 512 ids: the table holds 1,024 slots (load <= 1/2): 10 bits */
#define NH_FRAMES 256u
#define NH_RATIO 5.0 /* 52x before */

/* The registry's slot of a digest before 2026-12-07 (lib/core/ns.c
 * ns_hash_slot), under 2^bits slots. */
static uint32_t nh_old_slot(const uint8_t *d, unsigned bits)
{
	uint64_t h = (uint64_t)d[0] | (uint64_t)d[1] << 8 | (uint64_t)d[2] << 16 |
		     (uint64_t)d[3] << 24 | (uint64_t)d[4] << 32 | (uint64_t)d[5] << 40 |
		     (uint64_t)d[6] << 48 | (uint64_t)d[7] << 56;
	return (uint32_t)(h ^ (h >> 32)) & ((1u << bits) - 1);
}

static void nh_count_ok(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	(void)r;
	*(unsigned *)ctx += pi->status == KVT_OK;
}

/* NH_FRAMES EXISTS frames of one item, each naming the n digests of
 * table, pipelined on c, every answer read: the server's CPU; *ping_ns
 * the round trip of victim's PING sent once they are. */
static uint64_t nh_frames(struct kc *c, const uint8_t *table, unsigned n, struct kc *victim,
			  uint64_t *ping_ns)
{
	struct proto_item it = { .ns_index = 0 };
	uint64_t c0 = srv_cpu_ns(), p0;

	it.key.len = 1;
	it.key.bytes[0] = 'k';
	for (unsigned i = 0; i < NH_FRAMES; i++) {
		struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = n, .ns = table };
		T_GE_INT(kc_request(c, &f, &it, 1, NULL, 0), 1);
	}
	p0 = tsrv_now_ns();
	T_RC(kc_ping(victim), 0);
	*ping_ns = tsrv_now_ns() - p0;
	for (unsigned i = 0; i < NH_FRAMES; i++) {
		unsigned ok = 0;
		int32_t st = 0;
		T_ASSERT(kc_recv_items(c, 60000, nh_count_ok, &ok, &st) >= 0);
		T_EQ_INT(ok, 0); /* an unknown namespace: KVT_ENONS */
	}
	return srv_cpu_ns() - c0;
}

/* count namespaces of tenant's (c logged in as it) of one old home want
 * under 2^NH_BITS slots, registered 250 a frame: texts tried.  Its model
 * varied in place in its canonical text (the server writes the tenant=
 * line, the tenant's own: the digest is the client's to compute). */
static uint64_t nh_register(struct kc *c, const char *tenant, unsigned count, uint32_t want)
{
	struct proto_item *its = calloc(250, sizeof(*its));
	char (*texts)[PROTO_CANON_MAX + 1] = calloc(250, sizeof(*texts)), text[PROTO_CANON_MAX + 1];
	struct kvt_ns_desc d = desc;
	uint8_t dg[PROTO_DIGEST_LEN], check[PROTO_DIGEST_LEN];
	uint64_t tries = 0;
	unsigned found = 0, ok = 0;
	char *m;
	int len;

	T_ASSERT(its != NULL && texts != NULL);
	d.model = "nh-0000000000000000";
	d.tenant = tenant;
	len = kvt_ns_digest(&d, dg, text, sizeof(text));
	T_ASSERT(len > 0);
	m = strstr(text, "model=nh-");
	T_ASSERT(m != NULL);
	m += 9;
	while (found < count) {
		unsigned batch = 0;
		while (batch < 250 && found + batch < count) {
			static const char hex[] = "0123456789abcdef";
			for (int j = 0; j < 16; j++)
				m[j] = hex[(tries >> (4 * j)) & 15];
			tries++;
			SHA256((const uint8_t *)text, (size_t)len, dg);
			if (nh_old_slot(dg, NH_BITS) != want)
				continue;
			memcpy(texts[batch], text, (size_t)len + 1);
			its[batch].text = texts[batch];
			its[batch].text_len = (uint32_t)len;
			batch++;
		}
		{
			struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
			int32_t st = 0;
			T_GE_INT(kc_request(c, &f, its, batch, NULL, 0), 1);
			T_ASSERT(kc_recv_items(c, 60000, nh_count_ok, &ok, &st) >= 0);
		}
		found += batch;
	}
	T_EQ_INT(ok, count);
	/* the text is what kvt_ns_digest writes: the last one's digest agrees */
	{
		char model[32];
		snprintf(model, sizeof(model), "nh-%.16s", m);
		d.model = model;
		T_ASSERT(kvt_ns_digest(&d, check, NULL, 0) > 0);
		T_ASSERT(memcmp(check, dg, sizeof(dg)) == 0);
	}
	free(its);
	free(texts);
	return tries;
}

static void phase_ns_hash(void)
{
	uint8_t *table = malloc(256 * PROTO_DIGEST_LEN);
	uint32_t want = 0x5a5 & ((1u << NH_BITS) - 1);
	uint64_t tries, t0, gen_ns, base_ns, coll_ns, ping0, ping1;
	unsigned n;
	double ratio;
	struct kc a, adm;

	T_ASSERT(table != NULL);
	start("ns_hash", (const char *const[]){ "--threads", "1", NULL });
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	n = a.lim.ns_max < 256 ? a.lim.ns_max : 256;
	/* 256 digests nobody registers, at the old home want: no search
	 * needed, an unknown digest's bytes are the client's */
	for (unsigned i = 0; i < n; i++) {
		uint8_t *d = table + (size_t)i * PROTO_DIGEST_LEN;
		memset(d, 0, PROTO_DIGEST_LEN);
		d[0] = (uint8_t)want;
		d[1] = (uint8_t)(want >> 8);
		d[8] = (uint8_t)i;
		d[9] = 0xa5;
		T_ASSERT(nh_old_slot(d, NH_BITS) == want);
	}
	/* the baseline: those frames while the registry holds nothing there */
	base_ns = nh_frames(&a, table, n, &adm, &ping0);
	t0 = tsrv_now_ns();
	tries = nh_register(&a, "alice", NH_NS, want);
	gen_ns = tsrv_now_ns() - t0;
	coll_ns = nh_frames(&a, table, n, &adm, &ping1);
	ratio = (double)coll_ns / (double)base_ns;
	printf("ns_hash: %u namespaces of one old home (%" PRIu64 " texts tried, %.0f ms with "
	       "their registration); %u frames naming %u unknown digests of that home: the "
	       "server's CPU a frame %.0f us before them, %.0f us after (%.2fx; asserted <= "
	       "%.1f); the admin's PING behind them %.1f ms, then %.1f\n", NH_NS, tries,
	       gen_ns / 1e6, NH_FRAMES, n, base_ns / 1e3 / NH_FRAMES, coll_ns / 1e3 / NH_FRAMES,
	       ratio, NH_RATIO, ping0 / 1e6, ping1 / 1e6);
	fflush(stdout);
	T_ASSERT(ratio <= NH_RATIO);
	kc_close(&a);
	kc_close(&adm);
	free(table);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ssd_read_share (a measurement, run by hand: not in the suite): one
 * tenant's GETs of its SSD-only blocks pipelined on many connections
 * beside another tenant's single GET of its own
 *
 * bob reads his SSD-only blocks (1 MiB) one at a time, alone and then
 * while mallory pipelines GET frames of hers (SR_DEPTH frames of SR_ITEMS
 * blocks) on SR_CONNS connections, reading the answers; it prints bob's
 * latencies, the I/O engine's queue and a read's time in the device, and
 * asserts only that every read of bob's is a hit.  Its conclusion, with
 * the figures, is doc/security.md "SSD reads between tenants": bob waits
 * mostly for the machine's CPU and for the device, little behind
 * mallory's queue, so no share was added.  Parameters (environment): SR_M_LEN, mallory's
 * value length (64 KiB); SR_M_DRAM, her dram= quota (32M: how many of her
 * promotions may be in flight); SR_M_HOT=N, she reads only her newest N
 * blocks, in DRAM (the control: what her reads cost without the SSD);
 * SR_SET=NAME=VALUE, one more --set (ssd.io_depth=16).
 *
 *   ninja -C build-release daemon/kvtierd tests/test_hostile
 *   TMPDIR=$PWD/build-release build-release/tests/test_hostile \
 *       build-release/daemon/kvtierd ssd_read_share
 */

#define SR_CONNS 24u
#define SR_DEPTH 4u
#define SR_ITEMS 8u
#define SR_LEN (1u << 20) /* bob's */
static unsigned sr_m_len = 64u << 10, sr_m_blocks; /* mallory's: 96 MiB of them */
static const char *sr_m_dram = "32M";
static unsigned sr_m_lo; /* mallory reads her blocks from this one on */
#define SR_B_BLOCKS 32u  /* bob's, past his 4 MiB quota */
#define SR_READS 200u

struct sr_flooder {
	pthread_t t;
	const uint8_t *ns;
	unsigned seed, answered, hits, misses, other;
	int last_other;
	_Atomic bool *stop;
};

static void sr_flood_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct sr_flooder *fl = ctx;

	(void)r;
	if (pi->status == KVT_OK)
		fl->hits++;
	else if (pi->status == KVT_MISS)
		fl->misses++;
	else {
		fl->other++;
		fl->last_other = pi->status;
	}
}

static void sr_key(struct kvt_key *k, const char *who, unsigned i)
{
	char name[32];
	snprintf(name, sizeof(name), "sr-%s-%u", who, i);
	kvt_key_set(k, name, strlen(name));
}

static void sr_send(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const char *who,
		    const unsigned *idx, unsigned n)
{
	struct proto_item its[SR_ITEMS];
	struct proto_frame f = { .op = PROTO_OP_GET };

	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < n; i++)
		sr_key(&its[i].key, who, idx[i]);
	f.ns_count = 1;
	f.ns = ns;
	T_ASSERT(kc_request(c, &f, its, n, NULL, 0) > 0);
}

static void *sr_flood_main(void *arg)
{
	struct sr_flooder *fl = arg;
	unsigned idx[SR_ITEMS], next = fl->seed;
	struct kc c;

	if (kc_dial(&c, srv.port, "mallory", SECRET_ALICE) != 0)
		return NULL;
	for (unsigned d = 0; d < SR_DEPTH; d++) {
		for (unsigned i = 0; i < SR_ITEMS; i++)
			idx[i] = sr_m_lo + next++ % (sr_m_blocks - sr_m_lo);
		sr_send(&c, fl->ns, "m", idx, SR_ITEMS);
	}
	while (!atomic_load(fl->stop)) {
		if (kc_recv_items(&c, 30000, sr_flood_item, fl, NULL) < 1)
			break;
		fl->answered++;
		for (unsigned i = 0; i < SR_ITEMS; i++)
			idx[i] = sr_m_lo + next++ % (sr_m_blocks - sr_m_lo);
		sr_send(&c, fl->ns, "m", idx, SR_ITEMS);
	}
	kc_close(&c);
	return NULL;
}

struct sr_seen {
	unsigned hits, misses;
	uint32_t want;
};

static void sr_item(void *ctx, const struct kc_resp *r, const struct proto_item *pi)
{
	struct sr_seen *g = ctx;
	uint8_t head[64];

	if (pi->status == KVT_MISS) {
		g->misses++;
		return;
	}
	T_EQ_INT(pi->status, KVT_OK);
	T_EQ_U64(pi->data_len, SR_LEN);
	tsrv_fill(head, sizeof(head), g->want);
	T_ASSERT(memcmp(r->data + pi->data_off, head, sizeof(head)) == 0);
	g->hits++;
}

/* c (tenant who) registers d into ns and puts n blocks of SR_LEN, the
 * write-downs drained after. */
static void sr_put_all(struct kc *c, const char *tenant, const char *who,
		       struct kvt_ns_desc *d, uint8_t *ns, unsigned n, uint32_t len, uint32_t seed0)
{
	uint8_t *v = malloc(len);

	T_RC(kc_dial(c, srv.port, tenant, SECRET_ALICE), 0);
	T_RC(kc_register(c, d, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < n; i++) {
		struct kvt_key k;
		struct iovec p = { v, len };
		int rc;
		sr_key(&k, who, i);
		tsrv_fill(v, len, seed0 + i);
		for (int t = 0; (rc = kc_put(c, ns, &k, &p, 1, NULL)) == KVT_EFULL && t < 100; t++)
			stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
		T_EQ_INT(rc, KVT_OK);
		if (((uint64_t)(i + 1) * len) % (8u << 20) == 0)
			stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
	}
	stat_wait_zero("ssd.writedown_pending_bytes", "ssd.writes_inflight");
	free(v);
}

static int sr_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* bob's SR_READS GETs, one at a time over his blocks in turn: their
 * latencies sorted into lat (ns); the misses. */
static unsigned sr_bob_reads(struct kc *b, const uint8_t *ns, uint64_t *lat, unsigned *next)
{
	unsigned misses = 0;

	for (unsigned r = 0; r < SR_READS; r++) {
		unsigned idx = (*next)++ % SR_B_BLOCKS;
		struct sr_seen g = { 0, 0, 5000 + idx };
		uint64_t t0 = tsrv_now_ns();
		sr_send(b, ns, "b", &idx, 1);
		T_GE_INT(kc_recv_items(b, 30000, sr_item, &g, NULL), 1);
		lat[r] = tsrv_now_ns() - t0;
		misses += g.misses;
	}
	qsort(lat, SR_READS, sizeof(*lat), sr_cmp);
	return misses;
}

static void phase_ssd_read_share(void)
{
	const char *extra[] = { "--ssd", "512M", "--set", "ssd.admission=always",
				getenv("SR_SET") ? "--set" : NULL, getenv("SR_SET"), NULL };
	struct kvt_ns_desc dm = desc, db = desc;
	uint8_t ns_m[PROTO_DIGEST_LEN], ns_b[PROTO_DIGEST_LEN];
	uint64_t lat0[SR_READS], lat1[SR_READS], r0, r1, q_max = 0, q_sum = 0, t0, t1, ns0, ns1;
	unsigned next = 0, miss0, miss1, answered = 0, samples = 0, m_hits = 0, m_miss = 0;
	unsigned m_other = 0;
	struct sr_flooder fl[SR_CONNS];
	_Atomic bool stop = false;
	struct kc m, b;

	char tenants[256];

	if (getenv("SR_M_LEN"))
		sr_m_len = (unsigned)strtoul(getenv("SR_M_LEN"), NULL, 0);
	if (getenv("SR_M_DRAM"))
		sr_m_dram = getenv("SR_M_DRAM");
	sr_m_blocks = (unsigned)((96ull << 20) / sr_m_len);
	if (getenv("SR_M_HOT")) /* her newest, in DRAM */
		sr_m_lo = sr_m_blocks - (unsigned)strtoul(getenv("SR_M_HOT"), NULL, 0);
	snprintf(tenants, sizeof(tenants), "mallory " SECRET_ALICE " tenant dram=%s\n"
		 "bob " SECRET_ALICE " tenant dram=4M\nadmin " SECRET_ADMIN " admin\n", sr_m_dram);
	start_with("ssd_read_share", extra, tenants);
	dm.model = "sr-mallory";
	db.model = "sr-bob";
	sr_put_all(&m, "mallory", "m", &dm, ns_m, sr_m_blocks, sr_m_len, 1000);
	sr_put_all(&b, "bob", "b", &db, ns_b, SR_B_BLOCKS, SR_LEN, 5000);
	{
		/* mallory's own blocks, one at a time: on SSD, read back */
		unsigned h = 0, mi = 0;
		for (unsigned i = 0; i < 16; i++) {
			struct sr_flooder f1 = { 0 };
			unsigned idx = i;
			sr_send(&m, ns_m, "m", &idx, 1);
			T_GE_INT(kc_recv_items(&m, 30000, sr_flood_item, &f1, NULL), 1);
			h += f1.hits;
			mi += f1.misses + f1.other;
		}
		printf("ssd_read_share: mallory alone, 16 reads: %u hits, %u not\n", h, mi);
	}
	kc_close(&m);

	r0 = stat_of("io.reads");
	miss0 = sr_bob_reads(&b, ns_b, lat0, &next);
	r1 = stat_of("io.reads");
	printf("ssd_read_share: bob alone: %u reads (io.reads +%" PRIu64 "), p50 %.1f us, "
	       "p90 %.1f us, p99 %.1f us, max %.1f us, %u misses\n", SR_READS, r1 - r0,
	       lat0[SR_READS / 2] / 1e3, lat0[SR_READS * 9 / 10] / 1e3,
	       lat0[SR_READS * 99 / 100] / 1e3, lat0[SR_READS - 1] / 1e3, miss0);

	for (unsigned i = 0; i < SR_CONNS; i++) {
		fl[i] = (struct sr_flooder){ .ns = ns_m, .seed = i * 37, .stop = &stop };
		pthread_create(&fl[i].t, NULL, sr_flood_main, &fl[i]);
	}
	tsrv_sleep_ms(1000);
	t0 = tsrv_now_ns();
	r0 = stat_of("io.reads");
	ns0 = stat_of("io.read_ns");
	miss1 = sr_bob_reads(&b, ns_b, lat1, &next);
	for (int i = 0; i < 20; i++) {
		uint64_t q = stat_of("io.queued");
		q_sum += q;
		q_max = q > q_max ? q : q_max;
		samples++;
		tsrv_sleep_ms(10);
	}
	r1 = stat_of("io.reads");
	t1 = tsrv_now_ns();
	ns1 = stat_of("io.read_ns");
	printf("ssd_read_share: io.inflight %" PRIu64 ", a read's device time %.1f us\n",
	       stat_of("io.inflight"),
	       r1 > r0 ? (double)(ns1 - ns0) / (double)(r1 - r0) / 1e3 : 0.0);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < SR_CONNS; i++) {
		pthread_join(fl[i].t, NULL);
		answered += fl[i].answered;
		m_hits += fl[i].hits;
		m_miss += fl[i].misses;
		m_other += fl[i].other;
		if (fl[i].other)
			printf("ssd_read_share: flooder %u: last other status %d\n", i,
			       fl[i].last_other);
	}
	printf("ssd_read_share: mallory's items: %u hits, %u misses, %u other\n", m_hits,
	       m_miss, m_other);
	printf("ssd_read_share: bob beside mallory's %u connections of %u GET frames of %u "
	       "blocks of %u KiB: p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us, %u misses; "
	       "mallory %u frames answered; io.reads +%" PRIu64 " in %.2f s; io.queued mean %.1f "
	       "max %" PRIu64 "\n", SR_CONNS, SR_DEPTH, SR_ITEMS, sr_m_len >> 10,
	       lat1[SR_READS / 2] / 1e3, lat1[SR_READS * 9 / 10] / 1e3,
	       lat1[SR_READS * 99 / 100] / 1e3, lat1[SR_READS - 1] / 1e3, miss1, answered,
	       r1 - r0, (t1 - t0) / 1e9, (double)q_sum / samples, q_max);
	T_EQ_INT(miss0 + miss1, 0);
	kc_close(&b);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * wd_share: one tenant's burst of puts past the SSD writer beside another
 * tenant's few
 *
 * With write-through admission every put is queued for write-down, and a
 * queue holding ssd.writedown_max sheds new blocks (ssd.writedown_shed):
 * such a block lives in DRAM only, and is lost once evicted.  bob puts
 * wd_keep blocks of WD_LEN (WD_KEEP: a quarter of the queue, 1 MiB), then
 * WD_FILL more that push them out of his DRAM quota once written down (or
 * shed), and reads the first ones back: from SSD, or misses.  Alone, and
 * while mallory puts as fast as she can on WD_CONNS connections, the
 * writer slowed (ssd.debug_write_delay_ms).  The queue was whoever's came
 * first: mallory's burst held it all and bob's write-downs were shed, 4 of
 * 4 lost.  Now a quota group's (a tenant's) write-downs within a quarter
 * of the queue take the place of the newest of a group past its quarter
 * (lib/tier/ssd/ssd.c ssd_admit, wd_preempt_locked).
 */

#define WD_CONNS 4u
#define WD_LEN (256u << 10)
#define WD_KEEP 4u   /* bob's blocks read back: 1 MiB, a quarter of writedown_max */
#define WD_FILL 16u  /* then his 4 MiB DRAM quota's worth */

static unsigned wd_keep = WD_KEEP;

struct wd_burster {
	pthread_t t;
	const uint8_t *ns;
	unsigned id;
	_Atomic unsigned puts;
	_Atomic bool *stop;
};

static void *wd_burst_main(void *arg)
{
	struct wd_burster *b = arg;
	uint8_t *v = malloc(WD_LEN);
	struct kc c;

	if (!v || kc_dial(&c, srv.port, "mallory", SECRET_ALICE) != 0) {
		free(v);
		return NULL;
	}
	tsrv_fill(v, WD_LEN, 77 + b->id);
	while (!atomic_load(b->stop)) {
		struct kvt_key k;
		struct iovec p = { v, WD_LEN };
		char name[32];
		int rc;
		snprintf(name, sizeof(name), "wd-m-%u-%u", b->id, atomic_load(&b->puts) % 4096);
		kvt_key_set(&k, name, strlen(name));
		rc = kc_put(&c, b->ns, &k, &p, 1, NULL);
		if (rc < 0 && rc != KVT_EFULL)
			break; /* EFULL: her quota all pinned by write-downs */
		atomic_fetch_add(&b->puts, 1);
	}
	kc_close(&c);
	free(v);
	return NULL;
}

static void wd_bob_key(struct kvt_key *k, unsigned r, unsigned i)
{
	char name[32];
	snprintf(name, sizeof(name), "wd-b-%u-%u", r, i);
	kvt_key_set(k, name, strlen(name));
}

/* bob's round r: wd_keep blocks put, WD_FILL more that evict them from
 * DRAM once written down (or shed), then the first ones read back: how
 * many came back (the rest are misses). */
static unsigned wd_bob_round(struct kc *b, const uint8_t *ns, unsigned r, uint8_t *v)
{
	unsigned back = 0;
	uint64_t on_ssd = 0;

	T_RC(kc_stat(b, PROTO_SCOPE_TENANT, "tenant.ssd_bytes", &on_ssd), 0);
	for (unsigned i = 0; i < wd_keep + WD_FILL; i++) {
		struct kvt_key k;
		struct iovec p = { v, WD_LEN };
		wd_bob_key(&k, r, i);
		tsrv_fill(v, WD_LEN, 9000 + r * 256 + i);
		T_RC(kc_put(b, ns, &k, &p, 1, NULL), KVT_OK);
		/* his write-downs on SSD (or shed: then 10 s), so that the
		 * rest push them out of DRAM */
		for (unsigned w = 0; i == wd_keep - 1 && w < 1000; w++) {
			uint64_t n = 0;
			T_RC(kc_stat(b, PROTO_SCOPE_TENANT, "tenant.ssd_bytes", &n), 0);
			if (n >= on_ssd + (uint64_t)wd_keep * WD_LEN)
				break;
			tsrv_sleep_ms(10);
		}
	}
	tsrv_sleep_ms(500);
	for (unsigned i = 0; i < wd_keep; i++) {
		struct kvt_key k;
		struct kc_value val;
		uint32_t tier = 0;
		int rc;
		wd_bob_key(&k, r, i);
		rc = kc_exists(b, ns, &k, &tier);
		T_ASSERT(rc == KVT_MISS || (rc == KVT_OK && tier == KVT_TIER_SSD));
		rc = kc_get(b, ns, &k, 0, 0, 0, 0, &val);
		if (rc == KVT_OK) {
			tsrv_fill(v, WD_LEN, 9000 + r * 256 + i);
			T_EQ_U64(val.len, WD_LEN);
			T_ASSERT(memcmp(val.bytes, v, WD_LEN) == 0);
			kc_value_free(&val);
			back++;
		} else {
			T_RC(rc, KVT_MISS);
		}
	}
	return back;
}

static unsigned wd_puts(struct wd_burster *bu)
{
	unsigned n = 0;
	for (unsigned i = 0; i < WD_CONNS; i++)
		n += atomic_load(&bu[i].puts);
	return n;
}

static void phase_wd_share(void)
{
	const char *extra[] = { "--ssd", "256M", "--set", "ssd.admission=always",
				"--set", "ssd.writedown_max=4M",
				"--set", "ssd.debug_write_delay_ms=20", NULL };
	struct kvt_ns_desc dm = desc, db = desc;
	uint8_t ns_m[PROTO_DIGEST_LEN], ns_b[PROTO_DIGEST_LEN], *v = malloc(WD_LEN);
	struct wd_burster bu[WD_CONNS];
	_Atomic bool stop = false;
	unsigned back0, back1, p0, p1, p2;
	uint64_t shed0, shed1, shed2, shed3, share, wr0, wr1;
	struct kc m, b;

	if (getenv("WD_KEEP")) /* measurements: rounds of another size */
		wd_keep = (unsigned)strtoul(getenv("WD_KEEP"), NULL, 0);
	start_with("wd_share", extra, "mallory " SECRET_ALICE " tenant dram=24M\n"
				      "bob " SECRET_ALICE " tenant dram=4M\n"
				      "admin " SECRET_ADMIN " admin\n");
	dm.model = "wd-mallory";
	db.model = "wd-bob";
	T_RC(kc_dial(&m, srv.port, "mallory", SECRET_ALICE), 0);
	T_RC(kc_register(&m, &dm, ns_m, NULL, 0), KVT_OK);
	T_RC(kc_dial(&b, srv.port, "bob", SECRET_ALICE), 0);
	T_RC(kc_register(&b, &db, ns_b, NULL, 0), KVT_OK);

	shed0 = stat_of("ssd.writedown_shed");
	back0 = wd_bob_round(&b, ns_b, 0, v);
	shed1 = stat_of("ssd.writedown_shed");
	printf("wd_share: bob alone: %u of %u blocks back from SSD; writedown_shed +%" PRIu64
	       "\n", back0, wd_keep, shed1 - shed0);

	for (unsigned i = 0; i < WD_CONNS; i++) {
		bu[i] = (struct wd_burster){ .ns = ns_m, .id = i, .stop = &stop };
		pthread_create(&bu[i].t, NULL, wd_burst_main, &bu[i]);
	}
	tsrv_sleep_ms(1000);
	/* mallory alone, a second of her burst */
	p0 = wd_puts(bu);
	shed1 = stat_of("ssd.writedown_shed");
	wr0 = stat_of("ssd.writedown_blocks");
	tsrv_sleep_ms(1000);
	p1 = wd_puts(bu);
	shed2 = stat_of("ssd.writedown_shed");
	wr1 = stat_of("ssd.writedown_blocks");
	printf("wd_share: mallory alone: %u puts of %u KiB in 1 s on %u connections, %" PRIu64
	       " write-downs shed, %" PRIu64 " written\n", p1 - p0, WD_LEN >> 10, WD_CONNS,
	       shed2 - shed1, wr1 - wr0);
	back1 = wd_bob_round(&b, ns_b, 1, v);
	shed3 = stat_of("ssd.writedown_shed");
	share = stat_opt("ssd.writedown_preempted");
	p2 = wd_puts(bu);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < WD_CONNS; i++)
		pthread_join(bu[i].t, NULL);
	printf("wd_share: bob beside mallory's puts (%u more): %u of %u blocks back from SSD; "
	       "writedown_shed +%" PRIu64 ", writedown_preempted %" PRIu64 "\n", p2 - p1, back1,
	       wd_keep, shed3 - shed2, share);
	T_EQ_INT(back0, wd_keep);
	T_GE_INT(p2 - p1, 1);
	T_GE_INT(shed3 - shed2, 1); /* the writer was overrun */
	if (!getenv("WD_KEEP"))
		T_EQ_INT(back1, wd_keep);
	kc_close(&m);
	kc_close(&b);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------
 * unix_peers (redteam35): local users of the Unix socket are peers of
 * their own.  The per-address limits (20 failed AUTHs a second, 256
 * unauthenticated connections) counted every Unix-socket client as one
 * peer: any local user who could open the socket (`--unix`, shared by the
 * node's engines) could have every other one's login refused.  A child
 * process of another user (nobody) attacks; this process (root) is the
 * engine that must still log in.  Root only (setuid); skipped otherwise.
 */

#define UP_UID 65534u
#define UP_PEER_MAX 256u /* KVTD_UNAUTH_PEER_MAX */
#define UP_HELD 300u     /* past it */

#define UP_FRESH_UID 65533u /* from_fixed's fresh peer: another user */

/* In a child: become uid (nobody), the socket's directory the working
 * one (so that only it need be searchable by nobody). */
static void up_become(const char *dir, uid_t uid)
{
	if (chdir(dir) != 0 || setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)
		_exit(90);
}

static int up_login(const char *sock, const char *secret)
{
	struct kc c;
	int rc = kc_connect_unix(&c, sock);

	if (rc < 0)
		return rc;
	rc = kc_login(&c, "alice", secret);
	kc_close(&c);
	return rc;
}

/* from_fixed's attempt: alice's login over the Unix socket as user uid
 * (this process, root, or a child of another user); refused where its
 * status is the one the attacking user's connections get. */
struct up_try {
	const char *dir, *name;
	int refused_rc;
};

static int up_try_login(unsigned uid, void *arg, bool *refused)
{
	const struct up_try *u = arg;
	int rc, st;
	pid_t pid;

	if (uid == 0) {
		rc = up_login(srv.sock, SECRET_ALICE);
	} else {
		pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			up_become(u->dir, (uid_t)uid);
			rc = up_login(u->name, SECRET_ALICE);
			_exit(rc == 0 ? 0 : rc == PROTO_EAUTH ? 1 : rc == KVT_EBUSY ? 2 : 3);
		}
		T_EQ_INT(waitpid(pid, &st, 0), pid);
		T_ASSERT(WIFEXITED(st));
		st = WEXITSTATUS(st);
		rc = st == 0 ? 0 : st == 1 ? PROTO_EAUTH : st == 2 ? KVT_EBUSY : -EIO;
	}
	*refused = rc == u->refused_rc;
	return rc;
}

static void phase_unix_peers(void)
{
	char dir[sizeof(srv.sock)], name[sizeof(srv.sock)], *slash;
	int rc_guess = -1, rc_root = -1, status, pfd[2], qfd[2];
	unsigned held = 0, refused = 0;
	struct up_try try_eauth = { .refused_rc = PROTO_EAUTH }, try_ebusy = {
		.refused_rc = KVT_EBUSY };
	pid_t pid;

	if (geteuid() != 0)
		T_SKIP("unix_peers: needs root (a child of another user id)");
	start("unix_peers", NULL);
	snprintf(dir, sizeof(dir), "%s", srv.sock);
	slash = strrchr(dir, '/');
	T_ASSERT(slash);
	*slash = 0;
	snprintf(name, sizeof(name), "%s", slash + 1);
	/* nobody may open the socket: searchable directory, writable socket */
	if (strcmp(dir, base) == 0)
		T_EQ_INT(chmod(dir, 0711), 0);
	T_EQ_INT(chmod(srv.sock, 0666), 0);

	/* 1. nobody guesses alice's secret, 40 times in well under a second;
	 * then tries the right one (its own address throttled: refused),
	 * and root, in the same second, logs in. */
	for (int try = 0; try < 3; try++) {
		uint64_t sec;
		tsrv_sleep_ms((long)((1000000000ull - tsrv_now_ns() % 1000000000ull) / 1000000ull) + 5);
		sec = tsrv_now_ns() / 1000000000ull;
		pid = fork();
		T_ASSERT(pid >= 0);
		if (pid == 0) {
			up_become(dir, UP_UID);
			for (int i = 0; i < 40; i++)
				if (up_login(name, "wrong-secret-of-alice-0000") == 0)
					_exit(91);
			_exit(up_login(name, SECRET_ALICE) == 0 ? 2 : 0);
		}
		T_EQ_INT(waitpid(pid, &status, 0), pid);
		T_ASSERT(WIFEXITED(status));
		rc_guess = WEXITSTATUS(status);
		/* the right secret refused: the throttle (from_fixed: another
		 * user where root shares nobody's slot) */
		try_eauth.dir = dir;
		try_eauth.name = name;
		rc_root = from_fixed("unix_peers: root's login", 0, UP_FRESH_UID, up_try_login,
				     &try_eauth);
		if (tsrv_now_ns() / 1000000000ull == sec)
			break;
		printf("unix_peers: try %d ran past its second, again\n", try);
		tsrv_sleep_ms(1100);
	}
	printf("unix_peers: nobody's 40 wrong AUTHs then its right one: %s; root's login in the "
	       "same second: %d\n", rc_guess == 0 ? "refused (throttled)" :
	       rc_guess == 2 ? "accepted" : "child failed", rc_root);
	T_EQ_INT(rc_guess, 0); /* the throttle still holds nobody back */
	T_EQ_INT(rc_root, 0);  /* and only nobody */

	/* 2. nobody holds UP_HELD unauthenticated connections (HELLO
	 * answered); root logs in while they are held. */
	tsrv_sleep_ms(1100);
	T_EQ_INT(pipe(pfd), 0);
	T_EQ_INT(pipe(qfd), 0);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		static struct kc cs[UP_HELD];
		unsigned n[2] = { 0, 0 };
		char go;
		close(pfd[0]);
		close(qfd[1]);
		up_become(dir, UP_UID);
		for (unsigned i = 0; i < UP_HELD; i++) {
			if (kc_connect_unix(&cs[i], name) < 0) {
				n[1]++;
				continue;
			}
			if (kc_hello(&cs[i]) == 0)
				n[0]++;
			else
				n[1]++;
		}
		if (write(pfd[1], n, sizeof(n)) != sizeof(n))
			_exit(92);
		if (read(qfd[0], &go, 1) != 1)
			_exit(93);
		_exit(0);
	}
	close(pfd[1]);
	close(qfd[0]);
	{
		unsigned n[2];
		T_EQ_INT(read(pfd[0], n, sizeof(n)), (ssize_t)sizeof(n));
		held = n[0];
		refused = n[1];
	}
	try_ebusy.dir = dir;
	try_ebusy.name = name;
	rc_root = from_fixed("unix_peers: root's login", 0, UP_FRESH_UID, up_try_login, &try_ebusy);
	T_EQ_INT(write(qfd[1], "x", 1), 1);
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	close(pfd[0]);
	close(qfd[1]);
	printf("unix_peers: nobody holds %u unauthenticated connections (%u refused); root's "
	       "login: %d\n", held, refused, rc_root);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	T_EQ_INT(held, UP_PEER_MAX); /* nobody is held to its own cap */
	T_EQ_INT(refused, UP_HELD - UP_PEER_MAX);
	T_EQ_INT(rc_root, 0);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * unauth_pool (redteam35): a few peers held every unauthenticated slot.
 * At --max-conns 64, 32 connections may be unauthenticated, 16 from one
 * address: two addresses' 16 each (opened again every --idle-timeout)
 * had every other client's connection refused before its AUTH.  Now the
 * oldest unauthenticated connection is closed to admit a new one (loop.c
 * loop_unauth_evict); a peer past its own cap is still refused.
 */

#define UA_HOG 16u

/* alice's login and PING from 127.0.0.from (from_fixed's attempt): past
 * the unauthenticated half a connection under its address's cap is let
 * in (the oldest closed instead), so KVT_EBUSY is its address's cap. */
static int ua_login(unsigned from, void *arg, bool *refused)
{
	struct kc c;
	int rc;

	(void)arg;
	kc_adopt(&c, tcp_connect_from(srv.port, (uint8_t)from));
	rc = kc_login(&c, "alice", SECRET_ALICE);
	*refused = rc == KVT_EBUSY;
	if (rc == 0)
		rc = kc_ping(&c);
	kc_close(&c);
	return rc;
}

static void phase_unauth_pool(void)
{
	const char *extra[] = { "--max-conns", "64", "--threads", "1", NULL };
	static struct kc hog[2 * UA_HOG];
	unsigned hello_ok = 0, closed = 0;
	uint64_t ev0, ev, ref0, ref;
	struct kc more;
	int rc_late, rc_more;
	bool oldest_closed = false;

	start("unauth_pool", extra);
	ev0 = stat_opt("server.unauth_evicted");
	ref0 = stat_of("server.unauth_refused");
	/* 127.0.0.2 and 127.0.0.3: 16 connections each, HELLO answered,
	 * never an AUTH.  (Two addresses share a per-address slot 1 time in
	 * 4,096: the second group then moves to another address.) */
	for (unsigned g = 0, from = 2; g < 2 && from < 12; from++) {
		unsigned ok_g = 0;
		for (unsigned i = g * UA_HOG; i < (g + 1) * UA_HOG; i++) {
			kc_adopt(&hog[i], tcp_connect_from(srv.port, (uint8_t)from));
			if (kc_hello(&hog[i]) == 0)
				ok_g++;
			tsrv_sleep_ms(2); /* accepted in order: the first is the oldest */
		}
		if (ok_g < UA_HOG && g == 1) {
			for (unsigned i = g * UA_HOG; i < (g + 1) * UA_HOG; i++)
				kc_close(&hog[i]);
			continue;
		}
		hello_ok += ok_g;
		g++;
	}
	/* One more from 127.0.0.2: past its address's own cap, refused. */
	{
		int fd = tcp_connect_from(srv.port, 2);
		kc_adopt(&more, fd);
		rc_more = kc_hello(&more);
		kc_close(&more);
	}
	/* Another client, from 127.0.0.20, logs in (from_fixed: from
	 * 127.0.0.21 if the first shares a hog's slot). */
	rc_late = from_fixed("unauth_pool: another client", 20, 21, ua_login, NULL);
	for (unsigned i = 0; i < 2 * UA_HOG; i++) {
		if (kc_wait_closed(&hog[i], i == 0 ? 2000 : 50)) {
			closed++;
			oldest_closed |= i == 0;
		}
		kc_close(&hog[i]);
	}
	ev = stat_opt("server.unauth_evicted") - ev0;
	ref = stat_of("server.unauth_refused") - ref0;
	printf("unauth_pool: %u of %u held unauthenticated; the 17th from one address: %d; "
	       "another client's login and PING: %d; %u held closed (the oldest: %d), "
	       "unauth_evicted +%" PRIu64 ", unauth_refused +%" PRIu64 "\n", hello_ok, 2 * UA_HOG,
	       rc_more, rc_late, closed, oldest_closed, ev, ref);
	T_EQ_INT(hello_ok, 2 * UA_HOG);
	T_ASSERT(rc_more != 0);  /* the per-address cap still refuses */
	T_EQ_INT(rc_late, 0);    /* the other client is served */
	T_EQ_INT(closed, 1);     /* the oldest hog, and only it */
	T_ASSERT(oldest_closed); /* (loop.c: the head of the loop's list) */
	T_EQ_INT(ev, 1);
	T_ASSERT(ref >= 1); /* the 17th (and a shared slot's, rarely) */
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * ns_cache (redteam35): a connection's cache of the namespaces it names
 * (ops.c) grew to 8,192 entries (40 bytes each), outside --max-memory and
 * kept while the connection idles: one tenant's 1,024 namespaces named on
 * each of its connections cost 80 KB a connection.
 */

#define NC_NS 1024u
#define NC_CONNS 200u
/* RSS a connection may add: before the cap 84 KB release, 148 KB ASan
 * (its allocator's own on top); after, 12 KB, 68 KB ASan and 39 KB TSan
 * (2026-12-06). */
#if defined(HOSTILE_ASAN) || defined(HOSTILE_TSAN)
#define NC_PER_MAX (100u << 10)
#else
#define NC_PER_MAX (32u << 10)
#endif

static void phase_ns_cache(void)
{
	const char *extra[] = { "--ssd", "0", "--threads", "1", NULL };
	static uint8_t dg[NC_NS][PROTO_DIGEST_LEN];
	static struct proto_item its[256];
	static struct kc cs[NC_CONNS];
	uint64_t r0, r1, per, ok = 0;
	struct kc a;

	start("ns_cache", extra);
	T_RC(kc_dial(&a, srv.port, "alice", SECRET_ALICE), 0);
	for (unsigned i = 0; i < NC_NS; i++) {
		struct kvt_ns_desc d = desc;
		char model[64];
		snprintf(model, sizeof(model), "ns-cache-%04u", i);
		d.model = model;
		T_RC(kc_register(&a, &d, dg[i], NULL, 0), KVT_OK);
	}
	for (unsigned i = 0; i < 256; i++) {
		memset(&its[i], 0, sizeof(its[i]));
		kvt_key_set(&its[i].key, "k", 1);
		its[i].ns_index = i;
	}
	tsrv_sleep_ms(300);
	r0 = tsrv_rss(srv.pid);
	for (unsigned c = 0; c < NC_CONNS; c++) {
		T_RC(kc_dial(&cs[c], srv.port, "alice", SECRET_ALICE), 0);
		for (unsigned f0 = 0; f0 < NC_NS; f0 += 256) {
			struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 256,
						 .ns = dg[f0] };
			struct kc_resp r;
			int64_t tag = kc_request(&cs[c], &f, its, 256, NULL, 0);
			T_ASSERT(tag > 0);
			if (kc_recv(&cs[c], &r, 5000) == 0) {
				ok += r.f.status == 0;
				kc_resp_free(&r);
			}
		}
	}
	tsrv_sleep_ms(300);
	r1 = tsrv_rss(srv.pid);
	per = r1 > r0 ? (r1 - r0) / NC_CONNS : 0;
	printf("ns_cache: %u connections each naming %u namespaces (%" PRIu64 " frames "
	       "answered): RSS +%" PRIu64 " KiB, %" PRIu64 " B a connection\n", NC_CONNS, NC_NS,
	       ok, (r1 - r0) >> 10, per);
	T_EQ_INT(ok, NC_CONNS * (NC_NS / 256));
	for (unsigned c = 0; c < NC_CONNS; c++)
		kc_close(&cs[c]);
	kc_close(&a);
	T_LE_INT(per, NC_PER_MAX);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

static const struct tsrv_phase phases[] = {
	{ "ns_cache", phase_ns_cache },
	{ "unauth_pool", phase_unauth_pool },
	{ "unix_peers", phase_unix_peers },
	{ "preauth", phase_preauth },
	{ "resp_preauth", phase_resp_preauth },
	{ "grantee_ssd", phase_grantee_ssd },
	{ "emfile", phase_emfile },
	{ "revoke", phase_revoke },
	{ "deletes", phase_deletes },
	{ "range", phase_range },
	{ "slow_reader", phase_slow_reader },
	{ "range_pins", phase_range_pins },
	{ "ns_registry", phase_ns_registry },
	{ "auth_guess", phase_auth_guess },
	{ "throttle_slots", phase_throttle_slots },
	{ "unauth_slots", phase_unauth_slots },
	{ "quota_groups", phase_quota_groups },
	{ "resp_info", phase_resp_info },
	{ "ns_split", phase_ns_split },
	{ "insecure", phase_insecure },
	{ "grant_race", phase_grant_race },
	{ "tenant_index", phase_tenant_index },
	{ "kvevents_tenant", phase_kvevents_tenant },
	{ "kvevents_flood", phase_kvevents_flood },
	{ "kvevents_cap", phase_kvevents_cap },
	{ "out_flood", phase_out_flood },
	{ "tls_handshake", phase_tls_handshake },
	{ "log_flood", phase_log_flood },
	{ "preauth_out", phase_preauth_out },
	{ "resp_pins", phase_resp_pins },
	{ "frame_items", phase_frame_items },
	{ "parts_amp", phase_parts_amp },
	{ "range_crc", phase_range_crc },
	{ "quiet_slices", phase_quiet_slices },
	{ "quiet_pins", phase_quiet_pins },
	{ "quiet_pins_dup", phase_quiet_pins_dup },
	{ "quiet_pins_once", phase_quiet_pins_once },
	{ "quiet_pins_pipe", phase_quiet_pins_pipe },
	{ "range_one_pin", phase_range_one_pin },
	{ "range_chunk_check", phase_range_chunk_check },
	{ "range_version", phase_range_version },
	{ "range_nomem", phase_range_nomem },
	{ "range_version_race", phase_range_version_race },
	{ "stats_unread", phase_stats_unread },
	{ "resp_items", phase_resp_items },
	{ "resp_tenant_items", phase_resp_tenant_items },
	{ "out_share", phase_out_share },
	{ "no_shares", phase_no_shares },
	{ "resp_inflight", phase_resp_inflight },
	{ "delete_backlog", phase_delete_backlog },
	{ "in_share_data", phase_in_share_data },
	{ "tbl_share", phase_tbl_share },
	{ "tbl_wait", phase_tbl_wait },
	{ "parse_partial", phase_parse_partial },
	{ "big_frames", phase_big_frames },
	{ "resp_mget", phase_resp_mget },
	{ "resp_mget_held", phase_resp_mget_held },
	{ "resp_auth_pins", phase_resp_auth_pins },
	{ "resp_auth_share", phase_resp_auth_share },
	{ "resp_auth_flow", phase_resp_auth_flow },
	{ "resp_exists", phase_resp_exists },
	{ "fwd_queue", phase_fwd_queue },
	{ "repair_table", phase_repair_table },
	{ "repair_share", phase_repair_share },
	{ "fwd_share", phase_fwd_share },
	{ "tomb_expiry", phase_tomb_expiry },
	{ "fwd_copies", phase_fwd_copies },
	{ "kvevents_stuck", phase_kvevents_stuck },
	{ "kvevents_share", phase_kvevents_share },
	{ "kvevents_metrics", phase_kvevents_metrics },
	{ "reload_refused", phase_reload_refused },
	{ "events_reuse", phase_events_reuse },
	{ "group_drain", phase_group_drain },
	{ "events_handover", phase_events_handover },
	{ "s3_scan", phase_s3_scan },
	{ "native_edges", phase_native_edges },
	{ "native_flood", phase_native_flood },
	{ "resp_flood", phase_resp_flood },
	{ "ns_items", phase_ns_items },
	{ "in_share", phase_in_share },
	{ "aux_walks", phase_aux_walks },
	{ "clear_flood", phase_clear_flood },
	{ "resp_info_flood", phase_resp_info_flood },
	{ "metrics_cost", phase_metrics_cost },
	{ "metrics_slow", phase_metrics_slow },
	{ "stats_flood", phase_stats_flood },
	{ "stats_frames", phase_stats_frames },
	{ "kvevents_subs", phase_kvevents_subs },
	{ "resp_keys", phase_resp_keys },
	{ "resp_reparse", phase_resp_reparse },
	{ "resp_hello", phase_resp_hello },
	{ "expiry_hash", phase_expiry_hash },
	{ "ns_hash", phase_ns_hash },
	{ "aux_share", phase_aux_share },
	{ "quiet_share", phase_quiet_share },
	{ "copies_sum", phase_copies_sum },
	{ "ssd_read_share", phase_ssd_read_share },
	{ "wd_share", phase_wd_share },
};

int main(int argc, char **argv)
{
	bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	shim = argc > 3 ? argv[3] : NULL;
	/* ASan keeps freed memory in a quarantine (256 MiB by default),
	 * which would count as RSS; the server gets a small one. */
	{
		const char *a = getenv("ASAN_OPTIONS");
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s%squarantine_size_mb=8", a ? a : "",
			 a && *a ? ":" : "");
		setenv("ASAN_OPTIONS", buf, 1);
	}
	return tsrv_run_phase("test_hostile", argc, argv, phases,
			      sizeof(phases) / sizeof(phases[0]), base, sizeof(base));
}

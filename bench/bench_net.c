/*
 * bench_net.c - "kvtier bench net": kvtierd over loopback against
 * memcached, redis-server and iperf3, and kvtierd's SSD tier against fio.
 *
 * Owns the net suite: it starts every server itself (kvtierd from the build
 * tree or --kvtierd, memcached, redis-server, iperf3 -s), on 127.0.0.1 with
 * free ports, in a run directory it makes and removes, and stops them on
 * every exit path (SIGTERM, then SIGKILL; PR_SET_PDEATHSIG kills them if the
 * bench itself dies; SIGINT/SIGTERM/SIGHUP to the bench kill them first).
 *
 * One client harness for every server:
 *
 *   conn c (thread)  --request-->  server      one request in flight per
 *        |           <--response--             connection, N connections
 *        +-- value bytes received straight into dst[c][op % BN_DST]
 *            (the same rotating destination buffers for every server)
 *
 * Values are derived from their key: GET key "g<size>-<i>" holds
 * bench_fill(bench_seed(size, i)), kept in src[i]; every response is
 * checked at three 64-byte windows and every BN_FULL_EVERY-th in full, so a
 * wrong value is caught.  SETs use fresh keys (every server then does the
 * same work: kvtierd's put is put-if-absent, the others overwrite), with
 * src[seq % K] as value; after each SET cell the last key of each
 * connection is read back and checked.  All the servers get the same
 * memory budget and must evict.  redis-server runs twice: as configured by
 * default (one thread) and with --io-threads 2 --io-threads-do-reads yes
 * (row "redis-io2"), since kvtierd runs two loop threads; every row says
 * the threads each side had, and the target against redis is judged on
 * the faster of the two.
 *
 * Native protocol: frames are encoded and parsed with lib/proto.h; the
 * value of a PUT is sent from the caller's buffer after the header
 * (sendmsg), the value of a GET response received into dst.  memcached:
 * the meta protocol (mg/ms); redis: RESP (GET/SET).
 *
 * A/B interleaving: in every (op, size, connections) cell the participants
 * run one after the other, round after round; kvtierd goes first in even
 * rounds and last in odd ones; the medians of the rounds are reported,
 * ratios kvtierd/peer of the medians.  Latency p50/p99 per request comes
 * from the 4-connection load (rows with conns >= 4).
 *
 * SSD row: a second kvtierd with a DRAM tier of C bytes and an SSD tier
 * (write-through), a working set of 3C of 2 MiB values, read in a random
 * order, each value once per pass, with 4 connections; against fio
 * --rw=randread, O_DIRECT, io_uring, block = kvtierd's record (value + its
 * 512-byte header), iodepth = connections, on a file in the same run
 * directory.  kvtierd's STATS give the share of bytes served from SSD.
 * The row's GB/s counts SSD-served bytes only (ssd.reads x value over the
 * pass's time; the 6-8 % a pass finds in DRAM, promoted there by an earlier
 * read, are not counted), fio's counts its device reads.  Reads must reach
 * the device on both sides: kvtierd's read_bytes (/proc/PID/io) must cover
 * ssd.read_bytes, fio's (/proc/self/io, reaped) its io_bytes.  A ratio
 * above 1.1 or a short device count is SUSPECT and does not pass.
 *
 * Exit: 0 ran (targets missed still 0), 1 failure (a wrong byte, a server
 * that did not start or answer), 2 usage, 77 memcached, redis-server or
 * iperf3 not installed (the bench compares against them or not at all).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvtier.h"
#include "proto.h"

#include "bench.h"

#define BN_WHO "kvtier bench net" /* how its messages start */

#define BN_KIB (UINT64_C(1) << 10)
#define BN_MIB (UINT64_C(1) << 20)

#define BN_CONNS 4              /* connections opened to each server */
#define BN_DST 4                /* rotating destination buffers per connection */
#define BN_FULL_EVERY 16        /* a full compare every 16th GET of a connection */
#define BN_LAT_MAX (1u << 17)   /* latencies kept per connection and cell */
#define BN_ROUNDS_MAX BENCH_ROUNDS_MAX
#define BN_SIZES_MAX 8
#define BN_RBUF (256 * BN_KIB)  /* a connection's receive buffer, grows for big tables */
#define BN_PEEK 4096u           /* bytes a header read asks for beyond what it needs */
#define BN_IO_TIMEOUT_S 60      /* a server that does not answer this long: failure */
#define BN_REC_HDR 512u         /* kvtierd's SSD record header (doc/ssd-format.md, format 2) */

/* Targets from issue 5; judged only outside --smoke. */
#define BN_TARGET_REDIS 1.0
#define BN_TARGET_MEMCACHED 0.9
#define BN_TARGET_SSD 0.8
#define BN_TARGET_SSD_SHARE 0.9
#define BN_SUSPECT_SSD 1.1       /* SSD row: a ratio above it is not believed */
#define BN_DEV_MIN 0.999         /* device bytes read per byte read, at least */
#define BN_TARGET_P99_US 2000.0 /* 2 MiB DRAM get, 4 connections */

/* BN_REDIS2: redis-server with --io-threads 2 --io-threads-do-reads yes,
 * the thread count of kvtierd's default two loops (redis runs commands on
 * one thread either way; the I/O threads read, parse and write). */
enum bn_kind { BN_KVTIERD = 0, BN_MEMCACHED, BN_REDIS, BN_REDIS2, BN_IPERF, BN_KINDS };
static const char *const bn_kind_name[BN_KINDS] = { "kvtierd", "memcached", "redis",
						    "redis-io2", "iperf3" };

enum bn_op { BN_GET = 0, BN_SET = 1 };

/* ------------------------------------------------------------------------
 * Options and state.
 */
struct bn_opts {
	bool smoke, json, no_ssd;
	bool ops[2];                  /* BN_GET, BN_SET rows wanted (--ops) */
	unsigned conns_mask;          /* bit 0: 1 connection, bit 1: 4 (--conns) */
	const char *kvtierd, *memcached, *redis, *iperf3, *fio;
	const char *dir;              /* the run directory goes under it */
	unsigned rounds, threads;
	double secs;                  /* per measurement */
	uint64_t sizes[BN_SIZES_MAX];
	unsigned size_count;
	uint64_t mem;                 /* every server's memory budget, bytes */
	uint64_t ssd_dram;            /* SSD row: kvtierd's DRAM tier C */
	bool keep;
};

struct bn_server {
	enum bn_kind kind;
	pid_t pid;
	uint16_t port;
	char log[PATH_MAX];
	uint8_t ns[PROTO_DIGEST_LEN]; /* kvtierd: the bench's namespace */
};

struct bn_conn {
	int fd;
	enum bn_kind kind;
	uint8_t *rbuf;                /* received, not yet consumed: [roff, rlen) */
	size_t rcap, roff, rlen;
	uint8_t wbuf[1024];           /* request header or command line */
	uint64_t tag;
	uint16_t version;
	struct proto_limits lim;      /* kvtierd's, from HELLO */
	const uint8_t *ns;
	uint8_t *dst[BN_DST];         /* rotating destination buffers, max size each */
};

struct bn_key {
	char s[KVT_KEY_MAX + 1];
	uint32_t len;
};

/* One size class's values: src[i] is the value of GET key i. */
struct bn_values {
	uint64_t size;
	unsigned count;
	const uint32_t *order;        /* NULL: keys in turn for --secs; else one pass in this order */
	uint8_t **src;
	uint32_t *crc;
};

struct bn {
	struct bn_opts o;
	char run_dir[PATH_MAX];
	bool run_dir_made;
	struct bn_server srv[BN_KINDS];
	struct bn_conn conns[BN_KINDS][BN_CONNS]; /* iperf3: unused */
	uint8_t *dst[BN_CONNS][BN_DST]; /* rotating destination buffers, shared by all servers */
	uint64_t dst_cap;
	bool header_done;
	unsigned fails;
	uint64_t set_seq;             /* fresh SET keys, never reused within a run */
	unsigned starts;              /* servers started: names each one's log and dir */
};

/* One measurement: one server, one op, one size, n connections. */
struct bn_job {
	struct bn *b;
	struct bn_conn *c;
	const struct bn_values *v;
	enum bn_op op;
	unsigned ci, conns;
	double deadline;
	uint64_t min_ops, max_ops;
	/* results */
	uint64_t ops, full_checks, misses;
	double t_end;
	double *lat_us;
	uint64_t nlat;
	struct bn_key last_set;
	uint64_t last_set_src;
	int err;
	char errmsg[256];
};

struct bn_result {
	double gbps;
	double p50_us, p99_us;        /* < 0: not measured */
	uint64_t ops, full_checks, misses;
	unsigned set_checked, set_missed;
};

static double bn_pct(double *v, uint64_t n, double p)
{
	if (n == 0)
		return -1;
	qsort(v, n, sizeof(double), bench_cmp_double);
	uint64_t i = (uint64_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

/* ------------------------------------------------------------------------
 * Connections: a receive buffer over a blocking socket.
 */
static int bn_connect(struct bn_conn *c, enum bn_kind kind, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;
	struct timeval tv = { .tv_sec = BN_IO_TIMEOUT_S };

	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = -errno;
		close(c->fd);
		c->fd = -1;
		return e;
	}
	c->rcap = BN_RBUF;
	c->rbuf = malloc(c->rcap);
	return c->rbuf ? 0 : -ENOMEM;
}

static void bn_conn_close(struct bn_conn *c)
{
	if (c->fd > 0)
		close(c->fd);
	c->fd = -1;
	free(c->rbuf);
	c->rbuf = NULL;
}

/* Read until [roff, rlen) holds at least want bytes. */
static int bn_fill(struct bn_conn *c, size_t want)
{
	while (c->rlen - c->roff < want) {
		if (c->roff == c->rlen) {
			c->roff = c->rlen = 0;
		} else if (c->roff + want > c->rcap) {
			memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
			c->rlen -= c->roff;
			c->roff = 0;
		}
		if (want > c->rcap) {
			uint8_t *p = realloc(c->rbuf, want);
			if (!p)
				return -ENOMEM;
			c->rbuf = p;
			c->rcap = want;
		}
		/* Ask for little more than the header needs, so that a value
		 * mostly lands straight in its destination (bn_body), not here. */
		size_t ask = want - (c->rlen - c->roff);
		ask = ask > BN_PEEK ? ask : BN_PEEK;
		ask = ask < c->rcap - c->rlen ? ask : c->rcap - c->rlen;
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, ask, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		c->rlen += (size_t)n;
	}
	return 0;
}

/* len bytes of the stream into dst: what is buffered, then recv straight in. */
static int bn_body(struct bn_conn *c, uint8_t *dst, uint64_t len)
{
	uint64_t have = c->rlen - c->roff, n = have < len ? have : len;
	memcpy(dst, c->rbuf + c->roff, n);
	c->roff += n;
	while (n < len) {
		ssize_t r = recv(c->fd, dst + n, len - n, MSG_WAITALL);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		n += (uint64_t)r;
	}
	return 0;
}

/* A "\r\n"-terminated line; *line points into rbuf until the next read. */
static int bn_line(struct bn_conn *c, const char **line, size_t *len)
{
	size_t scan = 0;
	for (;;) {
		uint8_t *p = c->rbuf + c->roff;
		size_t have = c->rlen - c->roff;
		for (size_t i = scan ? scan - 1 : 0; i + 1 < have; i++)
			if (p[i] == '\r' && p[i + 1] == '\n') {
				*line = (const char *)p;
				*len = i;
				c->roff += i + 2;
				return 0;
			}
		if (have > 4096)
			return -EPROTO;
		scan = have;
		int rc = bn_fill(c, have + 1);
		if (rc < 0)
			return rc;
	}
}

static int bn_crlf(struct bn_conn *c)
{
	int rc = bn_fill(c, 2);
	if (rc < 0)
		return rc;
	if (c->rbuf[c->roff] != '\r' || c->rbuf[c->roff + 1] != '\n')
		return -EPROTO;
	c->roff += 2;
	return 0;
}

static int bn_sendv(struct bn_conn *c, struct iovec *iov, unsigned n)
{
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
	while (m.msg_iovlen > 0) {
		ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		size_t left = (size_t)w;
		while (m.msg_iovlen > 0 && left >= m.msg_iov[0].iov_len) {
			left -= m.msg_iov[0].iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen > 0) {
			m.msg_iov[0].iov_base = (uint8_t *)m.msg_iov[0].iov_base + left;
			m.msg_iov[0].iov_len -= left;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * kvtierd: the native protocol through lib/proto.h.
 */

/* Encode f with items into wbuf and send it, then the data iovecs. */
static int bn_kvt_send(struct bn_conn *c, struct proto_frame *f, const struct proto_item *items,
		       uint32_t n, const struct iovec *data, unsigned data_n)
{
	struct iovec iov[4];
	f->tag = ++c->tag;
	if (!f->version)
		f->version = f->op == PROTO_OP_HELLO ? PROTO_VERSION_HELLO : c->version;
	int64_t len = proto_encode(f, items, n, c->wbuf, sizeof(c->wbuf), NULL, NULL);
	if (len < 0)
		return (int)len;
	iov[0].iov_base = c->wbuf;
	iov[0].iov_len = (size_t)len;
	for (unsigned i = 0; i < data_n && i < 3; i++)
		iov[1 + i] = data[i];
	return bn_sendv(c, iov, 1 + (data_n < 3 ? data_n : 3));
}

/*
 * The next response frame's header and table in rbuf; *f points into it.
 * The caller consumes the data section (bn_body, or skip f->data_len) and
 * must advance roff by f->hdr_len first (bn_kvt_next does).
 */
static int bn_kvt_recv(struct bn_conn *c, struct proto_frame *f)
{
	struct proto_limits lim;
	if (c->lim.frame_max)
		lim = c->lim;
	else
		proto_limits_default(&lim);
	for (;;) {
		int rc = proto_parse_response(c->rbuf + c->roff, c->rlen - c->roff, &lim, f);
		if (rc == 0)
			return 0;
		if (rc != PROTO_NEED_MORE)
			return rc;
		rc = bn_fill(c, (size_t)f->need);
		if (rc < 0)
			return rc;
	}
}

/* Skip n bytes of data section. */
static int bn_skip(struct bn_conn *c, uint64_t n)
{
	while (n > 0) {
		int rc = bn_fill(c, 1);
		if (rc < 0)
			return rc;
		uint64_t have = c->rlen - c->roff, k = have < n ? have : n;
		c->roff += k;
		n -= k;
	}
	return 0;
}

/* A whole response frame (header, table and data) contiguous in rbuf. */
static int bn_kvt_frame(struct bn_conn *c, struct proto_frame *f, uint64_t tag)
{
	int rc = bn_kvt_recv(c, f);
	if (rc < 0)
		return rc;
	if (f->tag != tag && f->op != PROTO_OP_ERROR)
		return PROTO_EMALFORMED;
	rc = bn_fill(c, (size_t)(f->hdr_len + f->data_len));
	if (rc < 0)
		return rc;
	return bn_kvt_recv(c, f); /* the buffer may have moved */
}

static int bn_kvt_login(struct bn *b, struct bn_conn *c, bool first)
{
	struct proto_frame f = { .op = PROTO_OP_HELLO }, r;
	struct proto_item it = { 0 }, got;
	struct proto_iter iter;
	int rc;

	f.hello.min_version = PROTO_VERSION_MIN;
	f.hello.max_version = PROTO_VERSION_MAX;
	f.hello.name = "kvtier-bench-net";
	f.hello.name_len = 16;
	if ((rc = bn_kvt_send(c, &f, NULL, 0, NULL, 0)) < 0 || (rc = bn_kvt_frame(c, &r, c->tag)) < 0)
		return rc;
	if (r.status < 0)
		return r.status;
	c->version = r.hello.version;
	c->lim = r.hello.limits;
	if (r.hello.auth[0] != PROTO_AUTH_NONE) {
		bench_err(BN_WHO,
			  "kvtierd asks for authentication; the bench starts it without tenants");
		return PROTO_EAUTH;
	}
	c->roff += r.hdr_len + r.data_len;

	memset(&f, 0, sizeof(f));
	f.op = PROTO_OP_AUTH;
	f.auth.method = PROTO_AUTH_NONE;
	f.auth.tenant = "default";
	f.auth.tenant_len = 7;
	if ((rc = bn_kvt_send(c, &f, NULL, 0, NULL, 0)) < 0 || (rc = bn_kvt_frame(c, &r, c->tag)) < 0)
		return rc;
	rc = r.status;
	c->roff += r.hdr_len + r.data_len;
	if (rc < 0)
		return rc;
	c->ns = b->srv[BN_KVTIERD].ns;
	if (!first)
		return 0;

	/* Register the bench's namespace (once per server). */
	struct kvt_ns_desc d = { .model = "kvtier-bench-net", .dtype = "bf16", .layout = "bytes",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1,
				 .tenant = "default" };
	char text[PROTO_CANON_MAX + 1];
	rc = kvt_ns_digest(&d, NULL, text, sizeof(text));
	if (rc < 0)
		return rc;
	memset(&f, 0, sizeof(f));
	f.op = PROTO_OP_NS_REGISTER;
	it.text = text;
	it.text_len = (uint32_t)rc;
	if ((rc = bn_kvt_send(c, &f, &it, 1, NULL, 0)) < 0 || (rc = bn_kvt_frame(c, &r, c->tag)) < 0)
		return rc;
	rc = r.status;
	if (rc == 0) {
		proto_iter_init(&iter, &r, NULL, NULL, 0);
		rc = proto_iter_next(&iter, &got) == 1 ? got.status : PROTO_EMALFORMED;
		if (rc == 0)
			memcpy(b->srv[BN_KVTIERD].ns, got.digest, PROTO_DIGEST_LEN);
	}
	c->roff += r.hdr_len + r.data_len;
	return rc;
}

/* GET one key into dst: 0 (hit, *got bytes), KVT_MISS, or an error. */
static int bn_kvt_get(struct bn_conn *c, const struct bn_key *k, uint8_t *dst, uint64_t cap,
		      uint64_t *got)
{
	struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = c->ns }, r;
	struct proto_item it = { 0 }, ri;
	struct proto_iter iter;
	uint64_t off = 0;
	int rc;

	it.key.len = k->len;
	memcpy(it.key.bytes, k->s, k->len);
	if ((rc = bn_kvt_send(c, &f, &it, 1, NULL, 0)) < 0)
		return rc;
	*got = 0;
	for (;;) { /* a value larger than a frame comes in several (PROTO_F_MORE) */
		if ((rc = bn_kvt_recv(c, &r)) < 0)
			return rc;
		if (r.tag != c->tag || r.op != PROTO_OP_GET)
			return r.status < 0 ? r.status : PROTO_EMALFORMED;
		bool more = r.flags & PROTO_F_MORE;
		uint64_t data_len = r.data_len, item_len = 0, item_off = 0;
		int status = r.status;
		if (status == 0) {
			proto_iter_init(&iter, &r, NULL, NULL, 0);
			if (proto_iter_next(&iter, &ri) != 1)
				return PROTO_EMALFORMED;
			status = ri.status;
			item_len = ri.data_len;
			item_off = ri.data_off;
			if (status == 0 && ri.off != off)
				return PROTO_EMALFORMED;
		}
		c->roff += r.hdr_len;
		if (status == 0) {
			if (item_off != 0 || item_len > data_len || off + item_len > cap)
				return KVT_EBUFSMALL;
			if ((rc = bn_body(c, dst + off, item_len)) < 0)
				return rc;
			off += item_len;
			data_len -= item_len;
		}
		if (data_len && (rc = bn_skip(c, data_len)) < 0)
			return rc;
		if (!more) {
			*got = off;
			return status;
		}
	}
}

static int bn_kvt_set(struct bn_conn *c, const struct bn_key *k, const uint8_t *src,
		      uint64_t len, uint32_t crc)
{
	struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = c->ns }, r;
	struct proto_item it = { 0 }, ri;
	struct proto_iter iter;
	struct iovec data = { (void *)src, len };
	int rc;

	it.key.len = k->len;
	memcpy(it.key.bytes, k->s, k->len);
	it.part_count = 1;
	it.part_lens = &len;
	it.part_crcs = &crc;
	if ((rc = bn_kvt_send(c, &f, &it, 1, &data, 1)) < 0 || (rc = bn_kvt_frame(c, &r, c->tag)) < 0)
		return rc;
	rc = r.status;
	if (rc == 0) {
		proto_iter_init(&iter, &r, NULL, NULL, 0);
		rc = proto_iter_next(&iter, &ri) == 1 ? ri.status : PROTO_EMALFORMED;
	}
	c->roff += r.hdr_len + r.data_len;
	return rc == KVT_EXISTS ? 0 : rc;
}

/* STATS scope ALL: the numeric statistics named in names[] into vals[]
 * (UINT64_MAX if absent). */
static int bn_kvt_stats(struct bn_conn *c, const char *const *names, uint64_t *vals, unsigned n)
{
	struct proto_frame f = { .op = PROTO_OP_STATS }, r;
	struct proto_item it;
	struct proto_iter iter;
	int rc;

	for (unsigned i = 0; i < n; i++)
		vals[i] = UINT64_MAX;
	f.scope.scope = PROTO_SCOPE_ALL;
	if ((rc = bn_kvt_send(c, &f, NULL, 0, NULL, 0)) < 0)
		return rc;
	for (;;) {
		if ((rc = bn_kvt_frame(c, &r, c->tag)) < 0)
			return rc;
		if (r.status < 0) {
			c->roff += r.hdr_len + r.data_len;
			return r.status;
		}
		proto_iter_init(&iter, &r, NULL, NULL, 0);
		while (proto_iter_next(&iter, &it) == 1) {
			if (it.kind != PROTO_STAT_NUM)
				continue;
			for (unsigned i = 0; i < n; i++)
				if (strlen(names[i]) == it.name_len &&
				    memcmp(names[i], it.name, it.name_len) == 0)
					vals[i] = it.value;
		}
		bool more = r.flags & PROTO_F_MORE;
		c->roff += r.hdr_len + r.data_len;
		if (!more)
			return 0;
	}
}

/* ------------------------------------------------------------------------
 * memcached: meta commands.  redis: RESP.  Either way a request is text
 * (the command in c->wbuf[0..n), a set's value and "\r\n" after it) and
 * the answer a line that `reply` parses (bench_reply_mc, bench_reply_resp),
 * a get's value after it; `peer` names the server in messages.
 */
typedef int (*bn_reply_fn)(const char *line, size_t len, uint64_t *vlen);

static int bn_text_get(struct bn_conn *c, int n, bn_reply_fn reply, const char *peer,
		       uint8_t *dst, uint64_t cap, uint64_t *got)
{
	struct iovec iov = { c->wbuf, (size_t)n };
	const char *line;
	size_t len;
	int rc;

	*got = 0;
	uint64_t vlen;

	if ((rc = bn_sendv(c, &iov, 1)) < 0 || (rc = bn_line(c, &line, &len)) < 0)
		return rc;
	rc = reply(line, len, &vlen);
	if (rc == BENCH_REPLY_MISS)
		return KVT_MISS;
	if (rc != BENCH_REPLY_VALUE) {
		bench_err(BN_WHO, "%s answered a get with '%.*s'", peer,
			  (int)(len < 200 ? len : 200), line);
		return -EPROTO;
	}
	if (vlen > cap)
		return KVT_EBUFSMALL;
	if ((rc = bn_body(c, dst, vlen)) < 0 || (rc = bn_crlf(c)) < 0)
		return rc;
	*got = vlen;
	return 0;
}

static int bn_text_set(struct bn_conn *c, int n, bn_reply_fn reply, const char *peer,
		       const uint8_t *src, uint64_t len)
{
	struct iovec iov[3] = { { c->wbuf, (size_t)n }, { (void *)src, len }, { (void *)"\r\n", 2 } };
	const char *line;
	size_t l;
	int rc;

	uint64_t vlen;

	if ((rc = bn_sendv(c, iov, 3)) < 0 || (rc = bn_line(c, &line, &l)) < 0)
		return rc;
	if (reply(line, l, &vlen) == BENCH_REPLY_STORED)
		return 0;
	bench_err(BN_WHO, "%s answered a set with '%.*s'", peer, (int)(l < 200 ? l : 200), line);
	return -EPROTO;
}

static int bn_mc_get(struct bn_conn *c, const struct bn_key *k, uint8_t *dst, uint64_t cap,
		     uint64_t *got)
{
	int n = snprintf((char *)c->wbuf, sizeof(c->wbuf), "mg %s v\r\n", k->s);
	return bn_text_get(c, n, bench_reply_mc, "memcached", dst, cap, got);
}

static int bn_mc_set(struct bn_conn *c, const struct bn_key *k, const uint8_t *src, uint64_t len)
{
	int n = snprintf((char *)c->wbuf, sizeof(c->wbuf), "ms %s %" PRIu64 "\r\n", k->s, len);
	return bn_text_set(c, n, bench_reply_mc, "memcached", src, len);
}

static int bn_redis_get(struct bn_conn *c, const struct bn_key *k, uint8_t *dst, uint64_t cap,
			uint64_t *got)
{
	int n = snprintf((char *)c->wbuf, sizeof(c->wbuf), "*2\r\n$3\r\nGET\r\n$%u\r\n%s\r\n",
			 k->len, k->s);
	return bn_text_get(c, n, bench_reply_resp, "redis", dst, cap, got);
}

static int bn_redis_set(struct bn_conn *c, const struct bn_key *k, const uint8_t *src,
			uint64_t len)
{
	int n = snprintf((char *)c->wbuf, sizeof(c->wbuf),
			 "*3\r\n$3\r\nSET\r\n$%u\r\n%s\r\n$%" PRIu64 "\r\n", k->len, k->s, len);
	return bn_text_set(c, n, bench_reply_resp, "redis", src, len);
}

/* One protocol-neutral request. */
static int bn_get(struct bn_conn *c, const struct bn_key *k, uint8_t *dst, uint64_t cap,
		  uint64_t *got)
{
	switch (c->kind) {
	case BN_KVTIERD: return bn_kvt_get(c, k, dst, cap, got);
	case BN_MEMCACHED: return bn_mc_get(c, k, dst, cap, got);
	case BN_REDIS:
	case BN_REDIS2: return bn_redis_get(c, k, dst, cap, got);
	default: return -EINVAL;
	}
}

static int bn_set(struct bn_conn *c, const struct bn_key *k, const uint8_t *src, uint64_t len,
		  uint32_t crc)
{
	switch (c->kind) {
	case BN_KVTIERD: return bn_kvt_set(c, k, src, len, crc);
	case BN_MEMCACHED: return bn_mc_set(c, k, src, len);
	case BN_REDIS:
	case BN_REDIS2: return bn_redis_set(c, k, src, len);
	default: return -EINVAL;
	}
}

static const char *bn_strerror(int rc)
{
	if (rc <= -5000 && rc >= -5999) {
		const char *s = proto_strerror(rc);
		return s ? s : kvt_strerror(rc);
	}
	return kvt_strerror(rc);
}

/* ------------------------------------------------------------------------
 * Values and checks.
 */
static void bn_get_key(struct bn_key *k, uint64_t size, uint64_t i)
{
	k->len = (uint32_t)snprintf(k->s, sizeof(k->s), "g%" PRIu64 "-%" PRIu64, size, i);
}

static int bn_values_make(struct bn_values *v, uint64_t size, unsigned count)
{
	memset(v, 0, sizeof(*v));
	v->size = size;
	v->src = calloc(count, sizeof(*v->src));
	v->crc = calloc(count, sizeof(*v->crc));
	if (!v->src || !v->crc)
		return -ENOMEM;
	v->count = count;
	for (unsigned i = 0; i < count; i++) {
		if (posix_memalign((void **)&v->src[i], 4096, size) != 0)
			return -ENOMEM;
		bench_fill(v->src[i], size, bench_seed(size, i));
		v->crc[i] = kvt_crc32c(0, v->src[i], size);
	}
	return 0;
}

static void bn_values_free(struct bn_values *v)
{
	for (unsigned i = 0; v->src && i < v->count; i++)
		free(v->src[i]);
	free(v->src);
	free(v->crc);
	memset(v, 0, sizeof(*v));
}

/* Sampled check: three 64-byte windows (start, end, one that moves with
 * the request), or everything if full.  true if the bytes are right. */
static bool bn_check(const uint8_t *got, const uint8_t *want, uint64_t len, uint64_t n, bool full)
{
	if (full)
		return memcmp(got, want, len) == 0;
	uint64_t w = len < 64 ? len : 64;
	uint64_t mid = (bench_splitmix(n) % (len - w + 1)) & ~UINT64_C(7);
	return memcmp(got, want, w) == 0 && memcmp(got + len - w, want + len - w, w) == 0 &&
	       memcmp(got + mid, want + mid, w) == 0;
}

/* ------------------------------------------------------------------------
 * The harness: one thread per connection.
 */
static void *bn_job_run(void *arg)
{
	struct bn_job *j = arg;
	const struct bn_values *v = j->v;
	struct bn_conn *c = j->c;
	struct bn_key k;
	uint64_t got, start = (uint64_t)j->ci * v->count / (j->conns ? j->conns : 1);

	for (uint64_t n = 0; n < j->max_ops; n++) {
		double t0 = bench_now();
		if (n >= j->min_ops && t0 >= j->deadline)
			break;
		int rc;
		if (j->op == BN_GET) {
			uint64_t i = (start + n) % v->count;
			if (v->order)
				i = v->order[i];
			uint8_t *dst = c->dst[n % BN_DST];
			bn_get_key(&k, v->size, i);
			rc = bn_get(c, &k, dst, j->b->dst_cap, &got);
			if (rc == KVT_MISS && v->order) { /* SSD row: a miss is counted */
				j->misses++;
				rc = 0;
				got = 0;
				goto next;
			}
			if (rc == 0 && got != v->size) {
				snprintf(j->errmsg, sizeof(j->errmsg),
					 "%s: GET %s returned %" PRIu64 " bytes, not %" PRIu64,
					 bn_kind_name[c->kind], k.s, got, v->size);
				j->err = 1;
				break;
			}
			if (rc == 0) {
				bool full = n % BN_FULL_EVERY == 0;
				j->full_checks += full;
				if (!bn_check(dst, v->src[i], v->size, n, full)) {
					snprintf(j->errmsg, sizeof(j->errmsg),
						 "%s: GET %s returned wrong bytes",
						 bn_kind_name[c->kind], k.s);
					j->err = 1;
					break;
				}
			}
		} else {
			uint64_t seq = __atomic_fetch_add(&j->b->set_seq, 1, __ATOMIC_RELAXED);
			uint64_t i = seq % v->count;
			k.len = (uint32_t)snprintf(k.s, sizeof(k.s), "s%" PRIu64 "-%" PRIu64, v->size, seq);
			rc = bn_set(c, &k, v->src[i], v->size, v->crc[i]);
			if (rc == 0) {
				j->last_set = k;
				j->last_set_src = i;
			}
		}
		if (rc != 0) {
			snprintf(j->errmsg, sizeof(j->errmsg), "%s: %s %s: %s", bn_kind_name[c->kind],
				 j->op == BN_GET ? "GET" : "SET", k.s,
				 rc == KVT_MISS ? "miss (the value was stored before the run)" :
				 bn_strerror(rc));
			j->err = 1;
			break;
		}
next:;
		double t1 = bench_now();
		if (j->nlat < BN_LAT_MAX)
			j->lat_us[j->nlat++] = (t1 - t0) * 1e6;
		j->ops++;
	}
	j->t_end = bench_now();
	return NULL;
}

/* One measurement of server kind with conns connections. */
static int bn_measure_on(struct bn *b, struct bn_conn *cs, enum bn_op op,
			 const struct bn_values *v, unsigned conns, struct bn_result *res)
{
	enum bn_kind kind = cs[0].kind;
	struct bn_job jobs[BN_CONNS];
	pthread_t th[BN_CONNS];
	int rc = 0;

	memset(res, 0, sizeof(*res));
	memset(jobs, 0, sizeof(jobs));
	double t0 = bench_now();
	for (unsigned i = 0; i < conns; i++) {
		struct bn_job *j = &jobs[i];
		j->b = b;
		j->c = &cs[i];
		j->v = v;
		j->op = op;
		j->ci = i;
		j->conns = conns;
		j->deadline = t0 + b->o.secs;
		j->min_ops = b->o.smoke ? 4 : 2;
		j->max_ops = b->o.smoke ? 4 : UINT64_MAX;
		if (v->order) { /* one pass: connection i reads its slice of the order */
			j->max_ops = (uint64_t)(i + 1) * v->count / conns -
				     (uint64_t)i * v->count / conns;
			j->min_ops = j->max_ops;
		}
		j->lat_us = malloc(BN_LAT_MAX * sizeof(double));
		if (!j->lat_us) {
			rc = -ENOMEM;
			conns = i;
			break;
		}
	}
	unsigned started = 0;
	for (unsigned i = 0; rc == 0 && i < conns; i++) {
		if (pthread_create(&th[i], NULL, bn_job_run, &jobs[i]) != 0) {
			rc = -EAGAIN;
			break;
		}
		started++;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	double t_end = t0;
	uint64_t nlat = 0;
	for (unsigned i = 0; i < started; i++) {
		if (jobs[i].err && rc == 0) {
			bench_err(BN_WHO, "%s", jobs[i].errmsg);
			rc = -EIO;
		}
		t_end = jobs[i].t_end > t_end ? jobs[i].t_end : t_end;
		res->ops += jobs[i].ops;
		res->full_checks += jobs[i].full_checks;
		res->misses += jobs[i].misses;
		nlat += jobs[i].nlat;
	}
	res->gbps = bench_rate((double)res->ops * (double)v->size, t_end - t0) / 1e9;
	res->p50_us = res->p99_us = -1;
	double *all = nlat ? malloc(nlat * sizeof(double)) : NULL;
	if (all) {
		uint64_t m = 0;
		for (unsigned i = 0; i < started; i++) {
			memcpy(all + m, jobs[i].lat_us, jobs[i].nlat * sizeof(double));
			m += jobs[i].nlat;
		}
		res->p99_us = bn_pct(all, m, 0.99);
		res->p50_us = bn_pct(all, m, 0.50);
		free(all);
	}
	/* SETs: read back the last key each connection stored. */
	for (unsigned i = 0; rc == 0 && op == BN_SET && i < started; i++) {
		struct bn_conn *c = &cs[i];
		uint64_t got;
		if (!jobs[i].ops)
			continue;
		int g = bn_get(c, &jobs[i].last_set, c->dst[0], b->dst_cap, &got);
		res->set_checked++;
		if (g == KVT_MISS) {
			res->set_missed++;
		} else if (g != 0) {
			bench_err(BN_WHO, "%s: GET %s after SET: %s", bn_kind_name[kind],
				  jobs[i].last_set.s, bn_strerror(g));
			rc = -EIO;
		} else if (got != v->size ||
			   memcmp(c->dst[0], v->src[jobs[i].last_set_src], v->size) != 0) {
			bench_err(BN_WHO, "%s: GET %s after SET returned other bytes",
				  bn_kind_name[kind], jobs[i].last_set.s);
			rc = -EIO;
		}
	}
	for (unsigned i = 0; i < conns; i++)
		free(jobs[i].lat_us);
	return rc;
}

/* ------------------------------------------------------------------------
 * Servers.
 */

/* Wait until f(ctx) says the log or the socket shows the server is up. */
static int bn_wait_port(struct bn_server *s, enum bn_kind kind)
{
	double end = bench_now() + BENCH_START_TIMEOUT_S;
	int st;
	while (bench_now() < end) {
		if (bench_exited(s->pid, &st)) {
			s->pid = 0;
			bench_err(BN_WHO, "%s exited during startup (status 0x%x)",
				  bn_kind_name[kind], st);
			bench_print_log(s->log);
			return -ECHILD;
		}
		struct bn_conn c;
		if (bn_connect(&c, kind, s->port) == 0) {
			int ok = -EAGAIN;
			const char *line;
			size_t len;
			struct iovec iov;
			uint64_t v;
			if (kind == BN_MEMCACHED) {
				iov = (struct iovec){ (void *)"mn\r\n", 4 };
				if (bn_sendv(&c, &iov, 1) == 0 && bn_line(&c, &line, &len) == 0 &&
				    bench_reply_mc(line, len, &v) == BENCH_REPLY_PONG)
					ok = 0;
			} else if (kind == BN_REDIS || kind == BN_REDIS2) {
				iov = (struct iovec){ (void *)"*1\r\n$4\r\nPING\r\n", 14 };
				if (bn_sendv(&c, &iov, 1) == 0 && bn_line(&c, &line, &len) == 0 &&
				    bench_reply_resp(line, len, &v) == BENCH_REPLY_PONG)
					ok = 0;
			} else {
				ok = 0;
			}
			bn_conn_close(&c);
			if (ok == 0)
				return 0;
		}
		usleep(20000);
	}
	bench_err(BN_WHO, "%s did not answer within %.0f s; log %s", bn_kind_name[kind],
		  BENCH_START_TIMEOUT_S, s->log);
	return -ETIMEDOUT;
}

/* kvtierd on port 0: the port comes from its "listening on" log line. */
static int bn_start_kvtierd(struct bn *b, struct bn_server *s, const char *name, uint64_t dram,
			    uint64_t ssd, const char *const *extra)
{
	char dir[PATH_MAX + 32];

	s->kind = BN_KVTIERD;
	unsigned seq = ++b->starts;
	snprintf(dir, sizeof(dir), "%s/%s-%u", b->run_dir, name, seq);
	if (snprintf(s->log, sizeof(s->log), "%s/%s-%u.log", b->run_dir, name, seq) >=
	    (int)sizeof(s->log))
		return -ENAMETOOLONG;
	struct bench_kvtierd k = { .path = b->o.kvtierd, .dir = dir, .log = s->log, .dram = dram,
				   .ssd = ssd, .threads = b->o.threads, .extra = extra };
	return bench_kvtierd_start(&k, &s->pid, &s->port);
}

/* memcached, redis-server, iperf3 -s: they need a port number; take a free
 * one and try again if another process took it first. */
static int bn_start_peer(struct bn *b, struct bn_server *s, enum bn_kind kind)
{
	char a_port[16], a_thr[16], a_mem[32], a_item[32], a_dir[PATH_MAX];
	const char *argv[40];
	int rc = -EADDRINUSE;

	s->kind = kind;
	if (snprintf(s->log, sizeof(s->log), "%s/%s-%u.log", b->run_dir, bn_kind_name[kind],
		     ++b->starts) >= (int)sizeof(s->log))
		return -ENAMETOOLONG;
	if (kind == BN_IPERF) {
		if ((rc = bench_iperf3_start(b->o.iperf3, s->log, &s->pid, &s->port)) < 0)
			bench_err(BN_WHO, "could not start iperf3; log %s", s->log);
		return rc;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		unsigned n = 0;
		if ((rc = bench_free_port(&s->port)) < 0)
			return rc;
		snprintf(a_port, sizeof(a_port), "%u", s->port);
		if (kind == BN_MEMCACHED) {
			uint64_t maxv = 0;
			for (unsigned i = 0; i < b->o.size_count; i++)
				maxv = b->o.sizes[i] > maxv ? b->o.sizes[i] : maxv;
			/* room for the largest value plus its item header */
			uint64_t item_mb = bench_align_up(maxv + BN_MIB, BN_MIB) / BN_MIB;
			item_mb = item_mb < 2 ? 2 : item_mb;
			snprintf(a_thr, sizeof(a_thr), "%u", b->o.threads);
			snprintf(a_mem, sizeof(a_mem), "%" PRIu64, b->o.mem / BN_MIB);
			snprintf(a_item, sizeof(a_item), "%" PRIu64 "m", item_mb);
			argv[n++] = b->o.memcached;
			if (geteuid() == 0) {
				argv[n++] = "-u";
				argv[n++] = "root";
			}
			argv[n++] = "-l";
			argv[n++] = "127.0.0.1";
			argv[n++] = "-p";
			argv[n++] = a_port;
			argv[n++] = "-U";
			argv[n++] = "0";
			argv[n++] = "-t";
			argv[n++] = a_thr;
			argv[n++] = "-m";
			argv[n++] = a_mem;
			argv[n++] = "-I";
			argv[n++] = a_item;
			argv[n++] = "-c";
			argv[n++] = "64";
		} else { /* BN_REDIS, BN_REDIS2 */
			snprintf(a_mem, sizeof(a_mem), "%" PRIu64, b->o.mem);
			snprintf(a_dir, sizeof(a_dir), "%s", b->run_dir);
			argv[n++] = b->o.redis;
			argv[n++] = "--port";
			argv[n++] = a_port;
			argv[n++] = "--bind";
			argv[n++] = "127.0.0.1";
			argv[n++] = "--save";
			argv[n++] = "";
			argv[n++] = "--appendonly";
			argv[n++] = "no";
			argv[n++] = "--maxmemory";
			argv[n++] = a_mem;
			argv[n++] = "--maxmemory-policy";
			argv[n++] = "allkeys-lru";
			argv[n++] = "--protected-mode";
			argv[n++] = "no";
			argv[n++] = "--daemonize";
			argv[n++] = "no";
			argv[n++] = "--dir";
			argv[n++] = a_dir;
			if (kind == BN_REDIS2) {
				argv[n++] = "--io-threads";
				argv[n++] = "2";
				argv[n++] = "--io-threads-do-reads";
				argv[n++] = "yes";
			}
		}
		argv[n] = NULL;
		s->pid = bench_spawn((char *const *)argv, s->log);
		if (s->pid < 0)
			return (int)s->pid;
		rc = bn_wait_port(s, kind);
		if (rc == 0)
			return 0;
		if (s->pid > 0)
			bench_stop(s->pid);
		s->pid = 0;
	}
	bench_err(BN_WHO, "could not start %s; log %s", bn_kind_name[kind], s->log);
	bench_print_log(s->log);
	return rc;
}

/* iperf3 client: GB/s received with conns streams for the cell's time. */
static int bn_iperf(struct bn *b, unsigned conns, double *gbps)
{
	char a_t[32], out_path[PATH_MAX + 16];

	if (snprintf(out_path, sizeof(out_path), "%s/iperf3-client.json", b->run_dir) >=
	    (int)sizeof(out_path))
		return -ENAMETOOLONG;
	snprintf(a_t, sizeof(a_t), "%.0f", b->o.secs < 1 ? 1.0 : b->o.secs + 0.499);
	return bench_iperf3(b->o.iperf3, b->srv[BN_IPERF].port, conns, b->o.smoke ? "-n" : "-t",
			    b->o.smoke ? "64M" : a_t, out_path, gbps);
}

static int bn_open_conns(struct bn *b, enum bn_kind kind)
{
	for (unsigned i = 0; i < BN_CONNS; i++) {
		struct bn_conn *c = &b->conns[kind][i];
		int rc = bn_connect(c, kind, b->srv[kind].port);
		if (rc == 0 && kind == BN_KVTIERD)
			rc = bn_kvt_login(b, c, i == 0);
		if (rc < 0) {
			bench_err(BN_WHO, "connecting to %s: %s", bn_kind_name[kind],
				  bn_strerror(rc));
			return rc;
		}
		for (unsigned d = 0; d < BN_DST; d++)
			c->dst[d] = b->dst[i][d]; /* the same buffers for every server */
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Output.
 */
static double bn_target(enum bn_kind peer)
{
	return peer == BN_REDIS || peer == BN_REDIS2 ? BN_TARGET_REDIS
	       : peer == BN_MEMCACHED		   ? BN_TARGET_MEMCACHED
						   : 0;
}

/* Threads a server serves requests with (labels): kvtierd's loops,
 * memcached's workers, redis-server's I/O threads; 0 for iperf3. */
static unsigned bn_threads(const struct bn *b, enum bn_kind kind)
{
	switch (kind) {
	case BN_KVTIERD:
	case BN_MEMCACHED: return b->o.threads;
	case BN_REDIS: return 1;
	case BN_REDIS2: return 2;
	default: return 0;
	}
}

/* A row: kvtierd against peer for one (op, size, conns) cell. */
static void bn_report(struct bn *b, enum bn_op op, uint64_t size, unsigned conns,
		      enum bn_kind peer, const double *kg, const double *pg,
		      const struct bn_result *klast, const struct bn_result *plast,
		      double k50, double k99, double p50, double p99, uint64_t kops, uint64_t pops,
		      bool judge)
{
	unsigned rounds = b->o.rounds;
	double rat[BN_ROUNDS_MAX];
	for (unsigned r = 0; r < rounds; r++)
		rat[r] = kg[r] / (pg[r] > 0 ? pg[r] : 1e-12);
	double gk = bench_median(kg, rounds), gp = bench_median(pg, rounds);
	double ratio = gk / (gp > 0 ? gp : 1e-12);
	double target = bn_target(peer);
	/* Of the two redis rows only the faster redis is judged. */
	bool judged = !b->o.smoke && target > 0 && judge;
	bool pass = ratio >= target;
	/* Latency is kept for every cell: with one connection it is the
	 * server's own (unloaded), with more it is mostly queueing: by
	 * Little's law the mean over conns requests in flight at gk GB/s is
	 * conns * size / gk, for any server (mean_bound_us). */
	bool lat = true;
	bool p99_judged = !b->o.smoke && conns >= 4 && op == BN_GET && size == 2 * BN_MIB;
	double bound_us = gk > 0 ? (double)conns * (double)size / (gk * 1e3) : -1;
	const char *name = op == BN_GET ? "net.get" : "net.set";
	char sz[32];

	if (judged && !pass)
		b->fails++;
	if (b->o.json) {
		printf("{\"bench\":\"%s\",\"value_bytes\":%" PRIu64 ",\"conns\":%u,\"gbps\":%.3f"
		       ",\"baseline\":\"%s\",\"baseline_gbps\":%.3f,\"ratio\":%.4f",
		       name, size, conns, gk, bn_kind_name[peer], gp, ratio);
		bench_json_num("p50_us", lat ? k50 : -1, "%.1f");
		bench_json_num("p99_us", lat ? k99 : -1, "%.1f");
		bench_json_num("baseline_p50_us", lat && peer != BN_IPERF ? p50 : -1, "%.1f");
		bench_json_num("baseline_p99_us", lat && peer != BN_IPERF ? p99 : -1, "%.1f");
		bench_json_num("mean_bound_us", bound_us, "%.1f");
		printf(",\"ops\":%" PRIu64 ",\"baseline_ops\":%" PRIu64, kops, pops);
		printf(",\"full_checks\":%" PRIu64, klast->full_checks + plast->full_checks);
		if (op == BN_SET)
			printf(",\"readback_checked\":%u,\"readback_missed\":%u,"
			       "\"baseline_readback_checked\":%u,\"baseline_readback_missed\":%u",
			       klast->set_checked, klast->set_missed, plast->set_checked,
			       plast->set_missed);
		printf(",\"loop_threads\":%u,\"baseline_threads\":%u,\"rounds\":%u,\"secs\":%.2f",
		       b->o.threads, bn_threads(b, peer), rounds, b->o.secs);
		if (target > 0 && !judge)
			printf(",\"judged\":false");
		bench_json_rounds("gbps_rounds", kg, rounds);
		bench_json_rounds("baseline_gbps_rounds", pg, rounds);
		bench_json_rounds("ratio_rounds", rat, rounds);
		if (target > 0)
			printf(",\"target\":%.2f,\"pass\":%s", target,
			       judged ? (pass ? "true" : "false") : "null");
		else
			printf(",\"target\":null,\"pass\":null");
		if (p99_judged)
			printf(",\"p99_target_us\":%.0f,\"p99_pass\":%s", BN_TARGET_P99_US,
			       k99 < BN_TARGET_P99_US ? "true" : "false");
		printf("}\n");
	} else {
		if (!b->header_done) {
			printf("# kvtierd with %u loop threads; each baseline with its threads "
			       "(NAME/Nt)\n", b->o.threads);
			printf("%-8s %-8s %5s %9s %-12s %9s %7s %9s %9s %s\n", "bench", "value",
			       "conns", "kvtierd", "baseline", "GB/s", "ratio", "p50 us",
			       "p99 us", "result");
			b->header_done = true;
		}
		char res[48];
		if (!judged)
			snprintf(res, sizeof(res), "%s",
				 b->o.smoke ? "smoke" : target > 0 ? "- (the faster redis is judged)" : "-");
		else
			snprintf(res, sizeof(res), "%s (>= %.1f)", pass ? "ok" : "FAIL", target);
		char l50[16] = "-", l99[16] = "-";
		if (lat) {
			snprintf(l50, sizeof(l50), "%.0f", k50);
			snprintf(l99, sizeof(l99), "%.0f", k99);
		}
		char pname[32];
		if (bn_threads(b, peer))
			snprintf(pname, sizeof(pname), "%s/%ut", bn_kind_name[peer], bn_threads(b, peer));
		else
			snprintf(pname, sizeof(pname), "%s", bn_kind_name[peer]);
		printf("%-8s %-8s %5u %9.3f %-12s %9.3f %7.3f %9s %9s %s%s\n", name,
		       bench_fmt_size(sz, sizeof(sz), size), conns, gk, pname, gp,
		       ratio, l50, l99, res,
		       p99_judged && peer == BN_MEMCACHED ?
			       (k99 < BN_TARGET_P99_US ? ", p99 ok" : ", p99 FAIL") : "");
	}
	fflush(stdout);
	(void)klast;
}

/* ------------------------------------------------------------------------
 * The DRAM rows: every (op, size, conns) cell, A/B interleaved.
 */

/* Put every GET key of v into every server. */
static int bn_populate(struct bn *b, const struct bn_values *v)
{
	for (unsigned kind = 0; kind < BN_IPERF; kind++) {
		struct bn_conn *c = &b->conns[kind][0];
		struct bn_key k;
		uint64_t got;
		for (unsigned i = 0; i < v->count; i++) {
			bn_get_key(&k, v->size, i);
			int rc = bn_set(c, &k, v->src[i], v->size, v->crc[i]);
			if (rc < 0) {
				bench_err(BN_WHO, "%s: storing %s: %s", bn_kind_name[kind], k.s,
					  bn_strerror(rc));
				return rc;
			}
		}
		/* ... and every one is there, exactly */
		for (unsigned i = 0; i < v->count; i++) {
			bn_get_key(&k, v->size, i);
			int rc = bn_get(c, &k, c->dst[0], b->dst_cap, &got);
			if (rc != 0 || got != v->size || memcmp(c->dst[0], v->src[i], v->size) != 0) {
				bench_err(BN_WHO,
					  "%s: %s not read back exactly after storing it (%s)",
					  bn_kind_name[kind], k.s,
					  rc ? bn_strerror(rc) : "wrong bytes");
				return rc ? rc : -EIO;
			}
		}
	}
	return 0;
}

static int bn_cell(struct bn *b, enum bn_op op, const struct bn_values *v, unsigned conns)
{
	unsigned rounds = b->o.rounds;
	double g[BN_KINDS][BN_ROUNDS_MAX] = { { 0 } };
	struct bn_result last[BN_KINDS];
	double p50[BN_KINDS][BN_ROUNDS_MAX], p99[BN_KINDS][BN_ROUNDS_MAX];
	uint64_t ops[BN_KINDS] = { 0 };
	int rc;

	memset(last, 0, sizeof(last));
	for (unsigned r = 0; r < rounds; r++) {
		/* even rounds kvtierd first, odd rounds last */
		static const enum bn_kind even[] = { BN_KVTIERD, BN_MEMCACHED, BN_REDIS, BN_REDIS2,
						     BN_IPERF };
		static const enum bn_kind odd[] = { BN_IPERF, BN_REDIS2, BN_REDIS, BN_MEMCACHED,
						    BN_KVTIERD };
		for (unsigned x = 0; x < BN_KINDS; x++) {
			enum bn_kind kind = r % 2 ? odd[x] : even[x];
			if (kind == BN_IPERF) {
				if ((rc = bn_iperf(b, conns, &g[kind][r])) < 0)
					return rc;
				continue;
			}
			struct bn_result res;
			if ((rc = bn_measure_on(b, b->conns[kind], op, v, conns, &res)) < 0)
				return rc;
			g[kind][r] = res.gbps;
			p50[kind][r] = res.p50_us;
			p99[kind][r] = res.p99_us;
			ops[kind] += res.ops;
			last[kind] = res;
		}
	}
	double m50[BN_KINDS], m99[BN_KINDS];
	for (unsigned kind = 0; kind < BN_IPERF; kind++) {
		m50[kind] = bench_median(p50[kind], rounds);
		m99[kind] = bench_median(p99[kind], rounds);
	}
	m50[BN_IPERF] = m99[BN_IPERF] = -1;
	/* The target against redis is judged on the faster of its two rows. */
	enum bn_kind better = bench_median(g[BN_REDIS2], rounds) > bench_median(g[BN_REDIS], rounds)
				      ? BN_REDIS2
				      : BN_REDIS;
	for (unsigned peer = BN_MEMCACHED; peer < BN_KINDS; peer++)
		bn_report(b, op, v->size, conns, peer, g[BN_KVTIERD], g[peer], &last[BN_KVTIERD],
			  &last[peer], m50[BN_KVTIERD], m99[BN_KVTIERD], m50[peer], m99[peer],
			  ops[BN_KVTIERD], ops[peer],
			  !(peer == BN_REDIS || peer == BN_REDIS2) || peer == better);
	return 0;
}

/* Close the connections and stop every server; 0, or -EIO if kvtierd did
 * not exit 0 (a server that cannot shut down cleanly is a finding). */
static int bn_stop_all(struct bn *b)
{
	int rc = 0;
	for (unsigned kind = 0; kind < BN_KINDS; kind++)
		for (unsigned i = 0; i < BN_CONNS; i++)
			if (b->conns[kind][i].rbuf)
				bn_conn_close(&b->conns[kind][i]);
	for (unsigned kind = 0; kind < BN_KINDS; kind++) {
		if (b->srv[kind].pid <= 0)
			continue;
		int st = bench_stop(b->srv[kind].pid);
		if (kind == BN_KVTIERD && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			bench_err(BN_WHO, "kvtierd did not stop cleanly (status 0x%x); log %s", st,
				  b->srv[kind].log);
			rc = -EIO;
		}
		b->srv[kind].pid = 0;
	}
	return rc;
}

/*
 * Every size class on fresh servers: memcached's slab pages stay with the
 * size class that took them first (its automover moves them back slowly),
 * so after 256 KiB SETs filled its memory a 2 MiB set would fail with
 * "Out of memory during read".  Fresh servers per size treat all alike.
 */
static int bn_dram_rows(struct bn *b)
{
	static const unsigned conns_list[] = { 1, BN_CONNS };
	int rc = 0;

	for (unsigned s = 0; s < b->o.size_count && rc == 0; s++) {
		uint64_t size = b->o.sizes[s];
		if ((rc = bn_start_kvtierd(b, &b->srv[BN_KVTIERD], "kvtierd", b->o.mem, 0, NULL)) < 0 ||
		    (rc = bn_start_peer(b, &b->srv[BN_MEMCACHED], BN_MEMCACHED)) < 0 ||
		    (rc = bn_start_peer(b, &b->srv[BN_REDIS], BN_REDIS)) < 0 ||
		    (rc = bn_start_peer(b, &b->srv[BN_REDIS2], BN_REDIS2)) < 0 ||
		    (rc = bn_start_peer(b, &b->srv[BN_IPERF], BN_IPERF)) < 0)
			break;
		for (unsigned kind = 0; kind < BN_IPERF && rc == 0; kind++)
			rc = bn_open_conns(b, kind);
		if (rc < 0)
			break;
		/* GET keys: a few times the connections, at most ~128 MiB */
		uint64_t count = (128 * BN_MIB) / size;
		count = count > 64 ? 64 : count < 8 ? 8 : count;
		if (b->o.smoke)
			count = 8;
		struct bn_values v;
		if ((rc = bn_values_make(&v, size, (unsigned)count)) == 0 &&
		    (rc = bn_populate(b, &v)) == 0)
			for (unsigned op = BN_GET; op <= BN_SET && rc == 0; op++)
				for (unsigned ci = 0; ci < 2 && rc == 0; ci++)
					if (b->o.ops[op] && (b->o.conns_mask & (1u << ci)))
						rc = bn_cell(b, (enum bn_op)op, &v, conns_list[ci]);
		bn_values_free(&v);
		int st = bn_stop_all(b);
		rc = rc < 0 ? rc : st;
	}
	return rc;
}

/* ------------------------------------------------------------------------
 * The SSD row: kvtierd with DRAM C and an SSD tier, 3C of 2 MiB values.
 */
enum { ST_SSD_READS, ST_SSD_READ_BYTES, ST_DRAM_HITS, ST_PENDING, ST_SHED, ST_WD_BLOCKS, ST_N };
static const char *const bn_ssd_stats[ST_N] = {
	"ssd.reads", "ssd.read_bytes", "dram.hits", "ssd.writedown_pending_bytes",
	"ssd.writedown_shed", "ssd.writedown_blocks",
};

/* fio --rw=randread over <run dir>/fio.dat: GB/s of blocks (its bw_bytes);
 * *dev: device bytes read (/proc/self/io, fio reaped) per byte it read, or
 * -1 if unknown. */
static int bn_fio(struct bn *b, uint64_t bs, unsigned qd, uint64_t size, double *gbps,
		  double *dev)
{
	uint64_t rd0 = 0, rd1 = 0, wr0 = 0, wr1 = 0;
	bool known = bench_proc_io(&rd0, &wr0) == 0;
	char a_file[PATH_MAX + 32], a_bs[48], a_qd[32], a_size[48], out[PATH_MAX + 16];
	const char *argv[20];
	unsigned n = 0;
	int st;

	snprintf(a_file, sizeof(a_file), "--filename=%s/fio.dat", b->run_dir);
	snprintf(a_bs, sizeof(a_bs), "--bs=%" PRIu64, bs);
	snprintf(a_qd, sizeof(a_qd), "--iodepth=%u", qd);
	snprintf(a_size, sizeof(a_size), "--size=%" PRIu64, size);
	snprintf(out, sizeof(out), "%s/fio.json", b->run_dir);
	argv[n++] = b->o.fio;
	argv[n++] = "--name=kvtier-bench-net";
	argv[n++] = a_file;
	argv[n++] = "--rw=randread";
	argv[n++] = a_bs;
	argv[n++] = a_qd;
	argv[n++] = "--ioengine=io_uring";
	argv[n++] = "--direct=1";
	argv[n++] = a_size;
	argv[n++] = "--numjobs=1";
	argv[n++] = "--output-format=json";
	argv[n] = NULL;
	size_t len;
	char *buf = bench_run_to_file((char *const *)argv, out, &st, &len);
	known = known && bench_proc_io(&rd1, &wr1) == 0;
	*dev = known ? (double)(rd1 - rd0) / (double)size : -1;
	static const char *const k_io[] = { "jobs", "read", "io_bytes" };
	static const char *const k_bw[] = { "jobs", "read", "bw_bytes" };
	double io, bw;
	int rc = -EIO;
	if (buf && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
	    bench_reply_json_num(buf, len, k_io, 3, &io) == 0 &&
	    bench_reply_json_num(buf, len, k_bw, 3, &bw) == 0) {
		uint64_t moved = (uint64_t)io;
		*gbps = bw / 1e9;
		rc = moved == size ? 0 : -EIO;
		if (rc < 0)
			bench_err(BN_WHO, "fio read %" PRIu64 " bytes, asked %" PRIu64, moved,
				  size);
	} else {
		bench_err(BN_WHO, "fio failed; its output: %s", out);
	}
	free(buf);
	return rc;
}

static int bn_ssd_row(struct bn *b)
{
	struct bn_server s = { 0 };
	struct bn_conn cs[BN_CONNS];
	struct bn_values v = { 0 };
	uint64_t c_bytes = b->o.ssd_dram, size = 2 * BN_MIB, rec = size + BN_REC_HDR;
	unsigned count = (unsigned)(3 * c_bytes / size), rounds = b->o.rounds;
	uint64_t seg = b->o.smoke ? 16 * BN_MIB : 64 * BN_MIB;
	uint64_t ssd = bench_align_up(2 * count * rec, seg) + 4 * seg;
	uint32_t *order = NULL;
	double kg[BN_ROUNDS_MAX], fg[BN_ROUNDS_MAX], share[BN_ROUNDS_MAX];
	double kall[BN_ROUNDS_MAX], kdev[BN_ROUNDS_MAX], fdev[BN_ROUNDS_MAX];
	bool dev_known = true;
	uint64_t st0[ST_N], st1[ST_N], gets = 0, ssd_reads = 0, ssd_bytes = 0, misses = 0;
	bool have_fio = b->o.fio != NULL;
	char a_seg[48];
	int rc;

	memset(cs, 0, sizeof(cs));
	for (unsigned i = 0; i < BN_CONNS; i++)
		cs[i].fd = -1;
	snprintf(a_seg, sizeof(a_seg), "ssd.segment=%" PRIu64, seg);
	const char *extra[] = { "--set", "ssd.admission=always", "--set", a_seg, NULL };
	if ((rc = bn_start_kvtierd(b, &s, "kvtierd-ssd", c_bytes, ssd, extra)) < 0)
		goto out;
	struct bn_server saved = b->srv[BN_KVTIERD];
	b->srv[BN_KVTIERD] = s; /* bn_kvt_login registers into srv[BN_KVTIERD].ns */
	for (unsigned i = 0; i < BN_CONNS && rc == 0; i++) {
		rc = bn_connect(&cs[i], BN_KVTIERD, s.port);
		if (rc == 0)
			rc = bn_kvt_login(b, &cs[i], i == 0);
		for (unsigned d = 0; d < BN_DST; d++)
			cs[i].dst[d] = b->dst[i][d];
	}
	memcpy(s.ns, b->srv[BN_KVTIERD].ns, sizeof(s.ns));
	b->srv[BN_KVTIERD] = saved;
	for (unsigned i = 0; i < BN_CONNS; i++)
		cs[i].ns = s.ns;
	if (rc < 0) {
		bench_err(BN_WHO, "connecting to kvtierd (SSD): %s", bn_strerror(rc));
		goto out;
	}
	if ((rc = bn_values_make(&v, size, 16)) < 0)
		goto out;
	/* 3C of values, key i holding src[i % 16]: written through to SSD,
	 * paced on the write-down queue so that none is shed. */
	struct bn_values w = v;
	w.count = count;
	uint8_t **src = calloc(count, sizeof(*src));
	uint32_t *crc = calloc(count, sizeof(*crc));
	order = calloc(count, sizeof(*order));
	if (!src || !crc || !order) {
		free(src);
		free(crc);
		rc = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < count; i++) {
		src[i] = v.src[i % v.count];
		crc[i] = v.crc[i % v.count];
		order[i] = i;
	}
	w.src = src;
	w.crc = crc;
	for (unsigned i = 0; i < count && rc == 0; i++) {
		struct bn_key k;
		bn_get_key(&k, size, i);
		rc = bn_set(&cs[0], &k, src[i], size, crc[i]);
		/* one write-down queued at a time: the queue is at most a
		 * quarter of the DRAM tier, and a full queue sheds */
		while (rc == 0) {
			if ((rc = bn_kvt_stats(&cs[1], bn_ssd_stats, st0, ST_N)) < 0)
				break;
			if (st0[ST_PENDING] == UINT64_MAX || st0[ST_PENDING] == 0)
				break;
			usleep(500);
		}
	}
	for (double end = bench_now() + 120; rc == 0; usleep(10000)) {
		if ((rc = bn_kvt_stats(&cs[1], bn_ssd_stats, st0, ST_N)) < 0)
			break;
		if (st0[ST_PENDING] == 0 || st0[ST_PENDING] == UINT64_MAX)
			break;
		if (bench_now() > end) {
			bench_err(BN_WHO, "kvtierd's write-down did not drain in 120 s");
			rc = -ETIMEDOUT;
		}
	}
	if (rc < 0) {
		bench_err(BN_WHO, "kvtierd (SSD): storing the working set: %s", bn_strerror(rc));
		goto out_w;
	}
	uint64_t shed = st0[ST_SHED], written = st0[ST_WD_BLOCKS];
	uint64_t seed = UINT64_C(0x6b767469657273);
	for (unsigned r = 0; r < rounds && rc == 0; r++) {
		/* a fresh random order per round (Fisher-Yates) */
		for (unsigned i = count - 1; i > 0; i--) {
			unsigned j = (unsigned)(bench_xorshift(&seed) % (i + 1));
			uint32_t t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		w.order = order;
		for (unsigned x = 0; x < 2 && rc == 0; x++) {
			bool kv = (x == 0) == (r % 2 == 0);
			if (!kv) {
				if (have_fio) {
					rc = bn_fio(b, rec, BN_CONNS, count * rec, &fg[r], &fdev[r]);
					dev_known = dev_known && fdev[r] >= 0;
				} else {
					fg[r] = fdev[r] = -1;
				}
				continue;
			}
			struct bn_result res;
			uint64_t prd0 = 0, prd1 = 0, pwr0 = 0, pwr1 = 0;
			if (bench_pid_io(s.pid, &prd0, &pwr0) < 0)
				dev_known = false;
			if ((rc = bn_kvt_stats(&cs[0], bn_ssd_stats, st0, ST_N)) < 0 ||
			    (rc = bn_measure_on(b, cs, BN_GET, &w, BN_CONNS, &res)) < 0 ||
			    (rc = bn_kvt_stats(&cs[0], bn_ssd_stats, st1, ST_N)) < 0)
				break;
			if (bench_pid_io(s.pid, &prd1, &pwr1) < 0)
				dev_known = false;
			double secs = (double)res.ops * (double)size / (res.gbps * 1e9);
			/* SSD-served bytes only: DRAM hits are not the device's. */
			kg[r] = bench_rate((double)(st1[ST_SSD_READS] - st0[ST_SSD_READS]) * (double)size,
					   secs) / 1e9;
			kall[r] = bench_rate((double)(res.ops - res.misses) * (double)size, secs) / 1e9;
			kdev[r] = st1[ST_SSD_READ_BYTES] > st0[ST_SSD_READ_BYTES]
					  ? (double)(prd1 - prd0) /
						    (double)(st1[ST_SSD_READ_BYTES] - st0[ST_SSD_READ_BYTES])
					  : 0;
			gets += res.ops;
			misses += res.misses;
			ssd_reads += st1[ST_SSD_READS] - st0[ST_SSD_READS];
			ssd_bytes += st1[ST_SSD_READ_BYTES] - st0[ST_SSD_READ_BYTES];
			share[r] = (double)(st1[ST_SSD_READS] - st0[ST_SSD_READS]) /
				   (double)(res.ops ? res.ops : 1);
		}
	}
	if (rc < 0)
		goto out_w;

	double gk = bench_median(kg, rounds), gf = have_fio ? bench_median(fg, rounds) : -1;
	double ratio = have_fio ? gk / (gf > 0 ? gf : 1e-12) : -1;
	double sh = (double)ssd_reads / (double)(gets ? gets : 1);
	double kd = dev_known ? bench_median(kdev, rounds) : -1;
	double fd = dev_known && have_fio ? bench_median(fdev, rounds) : -1;
	const char *why = NULL;
	if (dev_known && kd < BN_DEV_MIN)
		why = "kvtierd's SSD reads did not all reach the device";
	else if (dev_known && have_fio && fd < BN_DEV_MIN)
		why = "fio's reads did not all reach the device";
	else if (have_fio && ratio > BN_SUSPECT_SSD)
		why = "ratio above 1.1";
	bool pass = have_fio && ratio >= BN_TARGET_SSD && sh >= BN_TARGET_SSD_SHARE && !why;
	if (!b->o.smoke && !pass)
		b->fails++;
	if (b->o.json) {
		printf("{\"bench\":\"net.ssd.get\",\"value_bytes\":%" PRIu64 ",\"conns\":%u"
		       ",\"gbps\":%.3f,\"baseline\":\"fio\"", size, BN_CONNS, gk);
		bench_json_num("baseline_gbps", gf, "%.3f");
		bench_json_num("ratio", ratio, "%.4f");
		printf(",\"dram_capacity\":%" PRIu64 ",\"working_set_bytes\":%" PRIu64
		       ",\"values\":%u,\"record_bytes\":%" PRIu64 ",\"fio_iodepth\":%u"
		       ",\"gets\":%" PRIu64 ",\"ssd_reads\":%" PRIu64 ",\"ssd_read_bytes\":%" PRIu64
		       ",\"misses\":%" PRIu64 ",\"ssd_share\":%.4f,\"writedown_blocks\":%" PRIu64 ",\"writedown_shed\":%" PRIu64
		       ",\"loop_threads\":%u,\"rounds\":%u",
		       c_bytes, (uint64_t)count * size, count, rec, BN_CONNS, gets, ssd_reads,
		       ssd_bytes, misses, sh, written, shed, b->o.threads, rounds);
		bench_json_rounds("gbps_rounds", kg, rounds);
		if (have_fio)
			bench_json_rounds("baseline_gbps_rounds", fg, rounds);
		bench_json_rounds("ssd_share_rounds", share, rounds);
		bench_json_num("gbps_all_served", bench_median(kall, rounds), "%.3f");
		bench_json_num("device_read_per_byte", kd, "%.4f");
		bench_json_num("baseline_device_read_per_byte", fd, "%.4f");
		printf(",\"suspect\":%s", why ? "true" : "false");
		if (why)
			printf(",\"suspect_reason\":\"%s\"", why);
		else
			printf(",\"suspect_reason\":null");
		printf(",\"target\":%.2f,\"ssd_share_target\":%.2f,\"pass\":%s}\n", BN_TARGET_SSD,
		       BN_TARGET_SSD_SHARE, b->o.smoke || !have_fio ? "null" : pass ? "true" : "false");
	} else {
		char sz[32];
		printf("%-8s %-8s %5u %9.3f %-10s %9.3f %7.3f %9s %9s %s (ssd share %.1f%%; "
		       "SSD-served bytes only)%s%s\n",
		       "ssd.get", bench_fmt_size(sz, sizeof(sz), size), BN_CONNS, gk, "fio", gf,
		       ratio, "-", "-", b->o.smoke ? "smoke" : why ? "SUSPECT" : pass ? "ok" : "FAIL",
		       sh * 100, why ? ": " : "", why ? why : "");
	}
	fflush(stdout);
out_w:
	free(src);
	free(crc);
out:
	free(order);
	v.order = NULL;
	bn_values_free(&v);
	for (unsigned i = 0; i < BN_CONNS; i++)
		if (cs[i].rbuf)
			bn_conn_close(&cs[i]);
	if (s.pid > 0) {
		int st = bench_stop(s.pid);
		if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			bench_err(BN_WHO,
				  "kvtierd (SSD) did not stop cleanly (status 0x%x); log %s", st,
				  s.log);
			rc = -EIO;
		}
	}
	return rc;
}

/* ------------------------------------------------------------------------
 * Command line.
 */
static void bn_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench net [options]\n"
		"\n"
		"kvtierd over loopback TCP against memcached, redis-server and iperf3,\n"
		"in one run, with one client harness: GET and SET of 256 KiB, 2 MiB and\n"
		"16 MiB values over 1 and 4 connections, A/B interleaved, medians of\n"
		"rounds, latency p50/p99 under the 4-connection load; plus kvtierd's\n"
		"SSD tier (working set 3x its DRAM tier) against fio random reads.\n"
		"The bench starts every server itself on 127.0.0.1 and stops them.\n"
		"\n"
		"Options:\n"
		"  --smoke            small sizes, few requests: fields and correctness only\n"
		"  --json             JSON lines instead of a table\n"
		"  --rounds N         A/B rounds (default 3; --smoke 1)\n"
		"  --secs S           seconds per measurement (default 1)\n"
		"  --sizes LIST       value sizes (default 256K,2M,16M; --smoke 256K,2M)\n"
		"  --threads N        kvtierd loop threads = memcached -t (default 2)\n"
		"  --mem SIZE         each server's memory (default 1G; --smoke 128M)\n"
		"  --ssd-dram SIZE    SSD row: kvtierd's DRAM tier C (default 256M; --smoke 16M)\n"
		"  --no-ssd           skip the SSD row\n"
		"  --ops LIST         get,set (default both)\n"
		"  --conns LIST       1,4 (default both)\n"
		"  --dir DIR          run directory goes under DIR (default .): SSD tier, fio file\n"
		"  --keep             leave the run directory (logs) behind\n"
		"  --kvtierd PATH     the server (default: next to kvtier in the build tree)\n"
		"  --memcached PATH, --redis-server PATH, --iperf3 PATH, --fio PATH\n"
		"\n"
		"Exit: 0 ran (a missed target is reported, not an error), 1 failure (wrong\n"
		"bytes, a server that does not start or answer), 2 usage, 77 memcached,\n"
		"redis-server or iperf3 not installed.  kvtier-bench(1).\n");
}

static int bn_parse_sizes(const char *s, struct bn_opts *o)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	o->size_count = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (o->size_count == BN_SIZES_MAX || bench_parse_size(t, &v) < 0 || v < 64 ||
		    v > 256 * BN_MIB)
			return -1;
		o->sizes[o->size_count++] = v;
	}
	return o->size_count ? 0 : -1;
}

int bench_net_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "smoke", no_argument, NULL, 's' },  { "json", no_argument, NULL, 'j' },
		{ "rounds", required_argument, NULL, 'r' }, { "secs", required_argument, NULL, 't' },
		{ "sizes", required_argument, NULL, 'z' }, { "threads", required_argument, NULL, 'T' },
		{ "mem", required_argument, NULL, 'm' }, { "ssd-dram", required_argument, NULL, 'c' },
		{ "no-ssd", no_argument, NULL, 'N' }, { "dir", required_argument, NULL, 'd' },
		{ "keep", no_argument, NULL, 'k' }, { "kvtierd", required_argument, NULL, 'K' },
		{ "memcached", required_argument, NULL, 'M' },
		{ "redis-server", required_argument, NULL, 'R' },
		{ "iperf3", required_argument, NULL, 'I' }, { "fio", required_argument, NULL, 'F' },
		{ "ops", required_argument, NULL, 'O' }, { "conns", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct bn *b = calloc(1, sizeof(*b));
	const char *sizes = NULL, *p_mc = "memcached", *p_redis = "redis-server",
		   *p_iperf = "iperf3", *p_fio = "fio";
	static char kvtierd[PATH_MAX], mc[PATH_MAX], redis[PATH_MAX], iperf[PATH_MAX], fio[PATH_MAX];
	int rounds = -1, ch, rc = BENCH_EXIT_OK;
	uint64_t mem = 0, ssd_dram = 0;
	struct sigaction old[3];

	if (!b) {
		bench_err(BN_WHO, "out of memory");
		return BENCH_EXIT_FAIL;
	}
	b->o.dir = ".";
	b->o.ops[BN_GET] = b->o.ops[BN_SET] = true;
	b->o.conns_mask = 3;
	b->o.threads = 2;
	b->o.secs = 1.0;
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 's': b->o.smoke = true; break;
		case 'j': b->o.json = true; break;
		case 'r': rounds = atoi(optarg); break;
		case 't': b->o.secs = atof(optarg); break;
		case 'z': sizes = optarg; break;
		case 'T': b->o.threads = (unsigned)atoi(optarg); break;
		case 'm':
			if (bench_parse_size(optarg, &mem) < 0 || mem < 16 * BN_MIB)
				goto usage;
			break;
		case 'c':
			if (bench_parse_size(optarg, &ssd_dram) < 0 || ssd_dram < 8 * BN_MIB)
				goto usage;
			break;
		case 'N': b->o.no_ssd = true; break;
		case 'O':
			b->o.ops[BN_GET] = strstr(optarg, "get") != NULL;
			b->o.ops[BN_SET] = strstr(optarg, "set") != NULL;
			if (strspn(optarg, "getsGETS,") != strlen(optarg) ||
			    (!b->o.ops[BN_GET] && !b->o.ops[BN_SET]))
				goto usage;
			break;
		case 'C':
			b->o.conns_mask = (strchr(optarg, '1') ? 1u : 0) | (strchr(optarg, '4') ? 2u : 0);
			if (strspn(optarg, "14,") != strlen(optarg) || !b->o.conns_mask)
				goto usage;
			break;
		case 'd': b->o.dir = optarg; break;
		case 'k': b->o.keep = true; break;
		case 'K': b->o.kvtierd = optarg; break;
		case 'M': p_mc = optarg; break;
		case 'R': p_redis = optarg; break;
		case 'I': p_iperf = optarg; break;
		case 'F': p_fio = optarg; break;
		case 'h':
			bn_usage(stdout);
			free(b);
			return BENCH_EXIT_OK;
		default:
			goto usage;
		}
	}
	if (optind < argc)
		goto usage;
	b->o.rounds = rounds < 0 ? (b->o.smoke ? 1 : 3) : (unsigned)rounds;
	if (b->o.rounds < 1 || b->o.rounds > BN_ROUNDS_MAX || b->o.secs <= 0 ||
	    b->o.secs > 600 || b->o.threads < 1 || b->o.threads > 256)
		goto usage;
	if (sizes ? bn_parse_sizes(sizes, &b->o) < 0 :
		    bn_parse_sizes(b->o.smoke ? "256K,2M" : "256K,2M,16M", &b->o) < 0)
		goto usage;
	b->o.mem = mem ? mem : b->o.smoke ? 128 * BN_MIB : BN_MIB * 1024;
	b->o.ssd_dram = ssd_dram ? ssd_dram : b->o.smoke ? 16 * BN_MIB : 256 * BN_MIB;

	/* The programs.  The peers are what the bench compares against:
	 * without one of them it cannot run (77, "skipped"). */
	if (b->o.kvtierd) {
		snprintf(kvtierd, sizeof(kvtierd), "%s", b->o.kvtierd);
	} else if (!bench_find_kvtierd(kvtierd, sizeof(kvtierd))) {
		bench_err(BN_WHO, "kvtierd not found next to this kvtier; give --kvtierd PATH");
		free(b);
		return BENCH_EXIT_FAIL;
	}
	if (access(kvtierd, X_OK) != 0) {
		bench_err(BN_WHO, "%s: %s", kvtierd, strerror(errno));
		free(b);
		return BENCH_EXIT_FAIL;
	}
	b->o.kvtierd = kvtierd;
	const char *missing = !bench_which(p_mc, mc, sizeof(mc)) ? p_mc :
			      !bench_which(p_redis, redis, sizeof(redis)) ? p_redis :
			      !bench_which(p_iperf, iperf, sizeof(iperf)) ? p_iperf : NULL;
	if (missing) {
		bench_err(BN_WHO,
			  "skipped: '%s' is not installed (Debian: memcached, redis-server, "
			  "iperf3; scripts/deps.txt)",
			  missing);
		free(b);
		return 77;
	}
	b->o.memcached = mc;
	b->o.redis = redis;
	b->o.iperf3 = iperf;
	b->o.fio = bench_which(p_fio, fio, sizeof(fio)) ? fio : NULL;
	if (!b->o.fio && !b->o.no_ssd)
		bench_err(BN_WHO, "fio not found: the SSD row runs without its baseline");

	snprintf(b->run_dir, sizeof(b->run_dir), "%s/kvtier-bench-net-XXXXXX", b->o.dir);
	if (!mkdtemp(b->run_dir)) {
		bench_err(BN_WHO, "mkdtemp %s: %s", b->run_dir, strerror(errno));
		free(b);
		return BENCH_EXIT_FAIL;
	}
	b->run_dir_made = true;
	bench_signals_catch(old);

	for (unsigned i = 0; i < b->o.size_count; i++)
		b->dst_cap = b->o.sizes[i] > b->dst_cap ? b->o.sizes[i] : b->dst_cap;
	b->dst_cap = b->dst_cap > 2 * BN_MIB ? b->dst_cap : 2 * BN_MIB; /* SSD row */
	for (unsigned i = 0; i < BN_CONNS; i++)
		for (unsigned d = 0; d < BN_DST; d++)
			if (posix_memalign((void **)&b->dst[i][d], 4096, b->dst_cap) != 0) {
				bench_err(BN_WHO, "out of memory");
				rc = BENCH_EXIT_FAIL;
				goto out;
			} else {
				memset(b->dst[i][d], 0, b->dst_cap); /* fault in before timing */
			}
	if (!b->o.json) {
		printf("# kvtier bench net: loopback, %u loop threads, %u rounds of %.1f s, "
		       "kvtierd %s\n", b->o.threads, b->o.rounds, b->o.secs, kvtierd);
		fflush(stdout);
	}
	if (bn_dram_rows(b) < 0)
		rc = BENCH_EXIT_FAIL;
	bn_stop_all(b);
	if (rc == BENCH_EXIT_OK && !b->o.no_ssd && bn_ssd_row(b) < 0)
		rc = BENCH_EXIT_FAIL;
	if (!b->o.json && !b->o.smoke)
		printf("# %u target(s) missed\n", b->fails);
out:
	for (unsigned kind = 0; kind < BN_KINDS; kind++)
		if (b->srv[kind].pid > 0)
			bench_stop(b->srv[kind].pid);
	for (unsigned i = 0; i < BN_CONNS; i++)
		for (unsigned d = 0; d < BN_DST; d++)
			free(b->dst[i][d]);
	if (b->run_dir_made && !b->o.keep && rc == BENCH_EXIT_OK)
		bench_rm_tree(b->run_dir);
	else if (b->run_dir_made)
		bench_err(BN_WHO, "run directory (logs) kept: %s", b->run_dir);
	bench_signals_restore(old);
	free(b);
	return rc;
usage:
	fprintf(stderr, "kvtier bench net: bad option or value%s%s\n",
		optind > 0 && optind <= argc ? " near " : "",
		optind > 0 && optind <= argc ? argv[optind - 1] : "");
	fprintf(stderr, "Run 'kvtier bench net --help'.\n");
	free(b);
	return BENCH_EXIT_USAGE;
}

/* ------------------------------------------------------------------------
 * The native client for other suites (bench.h: bench_kvt_*): the same
 * connection, login, GET and PUT code the kvtierd rows above use, so that
 * "kvtier bench cluster" measures the library against this client.
 */
struct bench_kvt {
	struct bn b;                  /* bn_kvt_login keeps the namespace digest here */
	struct bn_conn c;
};

int bench_kvt_connect(struct bench_kvt **out, uint16_t port)
{
	struct bench_kvt *k = calloc(1, sizeof(*k));
	int rc;
	*out = NULL;
	if (!k)
		return -ENOMEM;
	if ((rc = bn_connect(&k->c, BN_KVTIERD, port)) < 0 ||
	    (rc = bn_kvt_login(&k->b, &k->c, true)) < 0) {
		bench_kvt_close(k);
		return rc;
	}
	*out = k;
	return 0;
}

void bench_kvt_close(struct bench_kvt *k)
{
	if (!k)
		return;
	bn_conn_close(&k->c);
	free(k);
}

static int bench_kvt_key(struct bn_key *bk, const void *key, uint32_t len)
{
	if (len == 0 || len > KVT_KEY_MAX)
		return -EINVAL;
	memcpy(bk->s, key, len);
	bk->len = len;
	return 0;
}

int bench_kvt_get(struct bench_kvt *k, const void *key, uint32_t key_len, uint8_t *dst,
		  uint64_t cap, uint64_t *got)
{
	struct bn_key bk;
	int rc = bench_kvt_key(&bk, key, key_len);
	return rc < 0 ? rc : bn_kvt_get(&k->c, &bk, dst, cap, got);
}

int bench_kvt_put(struct bench_kvt *k, const void *key, uint32_t key_len, const uint8_t *src,
		  uint64_t len, uint32_t crc)
{
	struct bn_key bk;
	int rc = bench_kvt_key(&bk, key, key_len);
	return rc < 0 ? rc : bn_kvt_set(&k->c, &bk, src, len, crc);
}

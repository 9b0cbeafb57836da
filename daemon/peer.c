/*
 * peer.c - one blocking native-protocol connection to a kvtierd (peer.h),
 * poll() deadlines, frames through lib/proto.h: kvtierd's repair thread
 * talks to the other members of its pod with it (repair.c), and the
 * kvtier CLI's drain command to a server (cli/drain.c).  It depends on
 * nothing of the server (kvtier.h and proto.h only), so both link it.
 *
 * Single-threaded per struct kvtd_peer; no global state.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "peer.h"
#include "tlsio.h"

/* How long a member may make us wait (peer_recv): PEER_TIMEOUT_MS for
 * each frame of an answer (a frame of MORE restarts the clock), at most
 * PEER_ANSWER_MS and PEER_MORE_MAX frames of MORE until a final answer.
 * kvtierd's answers to what this file asks (1,024 items at most, STATS)
 * take a frame or two: a long one from a loaded member is kept, a member
 * that trickles frames (or bytes) forever is not. */
#define PEER_TIMEOUT_MS 5000
#define PEER_ANSWER_MS 30000
#define PEER_MORE_MAX 32u
/* How fast a member must take what is sent to it (peer_sendv): each
 * PEER_SEND_WINDOW bytes of a request, or the rest of it, within
 * PEER_TIMEOUT_MS -- 1 MiB/s, the rate below which kvtierd closes a
 * client that reads its pinned answers (KVTD_MIN_DRAIN_BPS).  The repair
 * thread holds the values it sends pinned until they are in the socket,
 * and its pass (every later forward with it) waits on the send. */
#define PEER_SEND_WINDOW (5ull << 20)
/* Tags a connection may have unanswered (repair.c keeps at most
 * REPAIR_WINDOW + 1): a bit each in kvtd_peer.open_tags. */
#define PEER_OPEN_MAX 64u

/* The monotonic clock in ms. */
static int64_t peer_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* poll() on fd for ev and, where there is one (>= 0), on the caller's
 * stop fd (kvtd_peer_open_stop): > 0 fd is ready, 0 ms passed, -EINTR,
 * -ECANCELED (the stop fd is readable: the caller stops), or -errno.
 * Every wait of this file is one: a stopping kvtierd joined threads held
 * in them for the peer clocks (5 s, 30 s; test_peer_attack poll_stop). */
static int peer_poll(int fd, int stop_fd, short ev, int ms)
{
	struct pollfd pf[2] = { { .fd = fd, .events = ev },
				{ .fd = stop_fd, .events = POLLIN } };
	int pr = poll(pf, stop_fd >= 0 ? 2 : 1, ms);

	if (pr < 0)
		return -errno;
	if (pr > 0 && stop_fd >= 0 && pf[1].revents)
		return -ECANCELED;
	return pr;
}

/*
 * All of iov[0..n) (modified), with as few system calls as the socket
 * allows.  Each PEER_SEND_WINDOW bytes of it (or the rest, if less) must
 * go within PEER_TIMEOUT_MS, else -ETIMEDOUT: the clock was per poll, so
 * a member that took a little every few seconds (enough for the socket to
 * be writable again within each 5 s) set the pace of the whole send --
 * 16 MiB at 466 KiB/s held the repair thread 35 s, the value pinned
 * (test_peer_attack slow_read).
 */
static int peer_sendv(struct kvtd_peer *p, struct iovec *iov, unsigned n)
{
	uint64_t rest = 0, due;
	int64_t mark = peer_now_ms();
	short ev = POLLOUT;

	for (unsigned i = 0; i < n; i++)
		rest += iov[i].iov_len;
	due = rest < PEER_SEND_WINDOW ? rest : PEER_SEND_WINDOW;
	while (n) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n > 64 ? 64 : n };
		int64_t left = mark + PEER_TIMEOUT_MS - peer_now_ms();
		ssize_t w;
		int pr = left > 0 ? peer_poll(p->fd, p->stop_fd, ev, (int)left) : 0, want = 0;
		if (pr == -EINTR)
			continue;
		if (pr <= 0)
			return pr == 0 ? -ETIMEDOUT : pr;
		if (p->ssl)
			w = tlsio_writev(p->ssl, iov, (int)mh.msg_iovlen, &want);
		else
			w = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		ev = want == TLSIO_WANT_IN ? POLLIN : POLLOUT;
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0)
			return -errno;
		rest -= (uint64_t)w;
		if ((uint64_t)w >= due) { /* this window's share went: the next */
			mark = peer_now_ms();
			due = rest < PEER_SEND_WINDOW ? rest : PEER_SEND_WINDOW;
		} else {
			due -= (uint64_t)w;
		}
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int peer_send(struct kvtd_peer *p, const void *buf, size_t len)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	return peer_sendv(p, &v, 1);
}

/* Milliseconds left of the answer clocks: how long this connection may
 * still make us wait for the next frame (kvtd_peer.waited_ms) and for a
 * final answer (answer_ms). */
static int peer_left_ms(const struct kvtd_peer *p, int64_t since)
{
	int64_t now = peer_now_ms() - since;
	int64_t left = PEER_TIMEOUT_MS - (int64_t)p->waited_ms - now;
	int64_t total = PEER_ANSWER_MS - (int64_t)p->answer_ms - now;
	if (total < left)
		left = total;
	return left > 0 ? (int)left : 0;
}

static int peer_fill(struct kvtd_peer *p, size_t want, int64_t since)
{
	if (p->rcap < want) {
		size_t nc = p->rcap ? p->rcap : 65536;
		uint8_t *nb;
		while (nc < want)
			nc *= 2;
		nb = realloc(p->rbuf, nc);
		if (!nb)
			return -ENOMEM;
		p->rbuf = nb;
		p->rcap = nc;
	}
	for (;;) {
		short ev = POLLIN;
		ssize_t r;
		int pr, tw = 0;
		if (p->ssl) {
			/* bytes the SSL holds already come without a poll */
			r = tlsio_read(p->ssl, p->rbuf + p->rlen, p->rcap - p->rlen, &tw);
			if (r > 0) {
				p->rlen += (size_t)r;
				p->in_bytes += (uint64_t)r;
				return 0;
			}
			if (r == 0 || errno != EAGAIN)
				return r == 0 ? -ECONNRESET : -errno;
			ev = tw == TLSIO_WANT_OUT ? POLLOUT : POLLIN;
		}
		pr = peer_poll(p->fd, p->stop_fd, ev, peer_left_ms(p, since));
		if (pr == -EINTR)
			continue;
		if (pr <= 0)
			return pr == 0 ? -ETIMEDOUT : pr;
		if (p->ssl)
			continue;
		r = recv(p->fd, p->rbuf + p->rlen, p->rcap - p->rlen, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r == 0 ? -ECONNRESET : -errno;
		p->rlen += (size_t)r;
		p->in_bytes += (uint64_t)r;
		return 0;
	}
}

/* A request of tag p->tag was sent: its answer is due. */
static void peer_opened(struct kvtd_peer *p)
{
	p->open_tags = p->open_tags << 1 | 1;
}

/*
 * A parsed response frame against what was asked (a hostile or broken
 * member: doc/security.md "A hostile member"): an answer to a tag not in
 * flight, or with a data section (no request of this file gets one), is
 * a lie; a final answer (no MORE) closes its tag.  ERROR frames (tag 0 or
 * the request's) end the connection: the callers fail on them.  1 (a
 * final answer), 0 (a part of one, an ERROR) or PROTO_EMALFORMED.
 */
static int peer_check(struct kvtd_peer *p)
{
	uint64_t back = p->tag - p->resp.tag;

	if (p->resp.op == PROTO_OP_ERROR)
		return 0;
	if (p->resp.data_len != 0 || p->resp.tag == 0 || p->resp.tag > p->tag ||
	    back >= PEER_OPEN_MAX || !(p->open_tags >> back & 1))
		return PROTO_EMALFORMED;
	if (p->resp.flags & PROTO_F_MORE)
		return 0;
	p->open_tags &= ~(UINT64_C(1) << back);
	return 1;
}

/* The next response frame: p->resp points into p->rbuf until the next
 * call (its first p->used bytes).  The time spent here waiting for the
 * member adds up until a frame of an answer comes (p->waited_ms, past
 * PEER_TIMEOUT_MS -ETIMEDOUT, whatever the member trickles meanwhile) and
 * until a final answer comes (p->answer_ms, past PEER_ANSWER_MS
 * -ETIMEDOUT; past PEER_MORE_MAX frames of MORE PROTO_EMALFORMED).  The
 * first clock was the only one, over every frame of MORE: a member
 * answering in frames, each in time, was dropped 5 s after the question
 * (test_peer_attack more_slow). */
static int peer_recv(struct kvtd_peer *p)
{
	int64_t since = peer_now_ms();
	int rc;

	if (p->used) {
		memmove(p->rbuf, p->rbuf + p->used, p->rlen - p->used);
		p->rlen -= p->used;
		p->used = 0;
	}
	for (;;) {
		rc = proto_parse_response(p->rbuf, p->rlen, &p->lim, &p->resp);
		if (rc == 0) {
			uint64_t total = p->resp.hdr_len + p->resp.data_len;
			if (p->resp.data_len != 0) {
				rc = PROTO_EMALFORMED; /* before a byte of it is buffered */
			} else if (p->rlen >= total) {
				p->used = total;
				rc = peer_check(p);
				break;
			} else {
				rc = peer_fill(p, (size_t)total, since);
			}
		} else if (rc == PROTO_NEED_MORE) {
			rc = peer_fill(p, (size_t)p->resp.need, since);
		}
		if (rc < 0)
			break;
	}
	p->waited_ms += (uint64_t)(peer_now_ms() - since);
	p->answer_ms += (uint64_t)(peer_now_ms() - since);
	if (rc == 1) { /* a final answer: the clocks start again */
		p->waited_ms = p->answer_ms = 0;
		p->more_frames = 0;
		rc = 0;
	} else if (rc == 0 && p->resp.op != PROTO_OP_ERROR && p->open_tags) {
		/* a frame of MORE: progress, within bounds */
		p->waited_ms = 0;
		if (++p->more_frames > PEER_MORE_MAX)
			rc = PROTO_EMALFORMED;
		else if (p->answer_ms >= PEER_ANSWER_MS)
			rc = -ETIMEDOUT;
	}
	return rc;
}

int kvtd_peer_send(struct kvtd_peer *p, struct proto_frame *f, const struct proto_item *items,
		   uint32_t n, const struct iovec *data, unsigned data_n)
{
	uint64_t need = 0;
	int64_t len;
	uint8_t *buf;
	int rc;

	if (p->open_tags >> (PEER_OPEN_MAX - 1))
		return -ENOBUFS; /* more in flight than answers are tracked for */
	f->tag = ++p->tag;
	f->version = f->op == PROTO_OP_HELLO ? PROTO_VERSION_HELLO : p->version;
	len = proto_encode(f, items, n, NULL, 0, &p->lim, &need);
	if (len != KVT_EBUFSMALL)
		return len < 0 ? (int)len : KVT_EBADLEN;
	if (!(buf = malloc(need)))
		return -ENOMEM;
	len = proto_encode(f, items, n, buf, need, &p->lim, NULL);
	if (len < 0) {
		free(buf);
		return (int)len;
	}
	if (data_n) {
		/* the table and the data section in one go */
		struct iovec *v = malloc((data_n + 1) * sizeof(*v));
		rc = -ENOMEM;
		if (v) {
			v[0].iov_base = buf;
			v[0].iov_len = (size_t)len;
			memcpy(v + 1, data, data_n * sizeof(*v));
			rc = peer_sendv(p, v, data_n + 1);
			free(v);
		}
	} else {
		rc = peer_send(p, buf, (size_t)len);
	}
	free(buf);
	if (rc == 0)
		peer_opened(p);
	return rc;
}

int kvtd_peer_next(struct kvtd_peer *p)
{
	return peer_recv(p);
}

/* One request, its response (the last frame of its tag) in p->resp. */
static int peer_call(struct kvtd_peer *p, struct proto_frame *f, const struct proto_item *items,
		     uint32_t n, const struct iovec *data, unsigned data_n)
{
	int rc = kvtd_peer_send(p, f, items, n, data, data_n);
	while (rc == 0) {
		rc = peer_recv(p);
		if (rc == 0 && (p->resp.op == PROTO_OP_ERROR ||
				(p->resp.tag == f->tag && !(p->resp.flags & PROTO_F_MORE))))
			return p->resp.status;
	}
	return rc;
}

/*
 * connect() with a deadline: non-blocking, then poll for writability and
 * read SO_ERROR.  A member that is blackholed (its SYNs dropped, or its
 * accept queue full so that the kernel ignores ours) would otherwise hold
 * the caller for the kernel's SYN retries, over two minutes.  0 or -errno
 * (-ETIMEDOUT past connect_ms).
 */
static int peer_connect(int fd, const struct sockaddr *sa, socklen_t sa_len, unsigned connect_ms,
			int stop_fd)
{
	int64_t deadline = peer_now_ms() + connect_ms;
	int fl = fcntl(fd, F_GETFL), err = 0;
	socklen_t el = sizeof(err);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	if (connect(fd, sa, sa_len) < 0) {
		if (errno != EINPROGRESS)
			return -errno;
		for (;;) {
			int64_t left = deadline - peer_now_ms();
			int pr;
			if (left <= 0)
				return -ETIMEDOUT;
			pr = peer_poll(fd, stop_fd, POLLOUT, (int)left);
			if (pr == -EINTR)
				continue;
			if (pr < 0)
				return pr;
			if (pr == 0)
				return -ETIMEDOUT;
			break;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			return -errno;
		if (err)
			return -err;
	}
	/* The rest of peer.c polls before every send and receive itself, but
	 * expects blocking reads and writes. */
	if (fcntl(fd, F_SETFL, fl) < 0)
		return -errno;
	return 0;
}

/* A connected socket to addr: "unix:/PATH" (kvtier drain on the server's
 * host), else HOST:PORT or [V6]:PORT over TCP. */
static int peer_unix(const char *path, unsigned connect_ms, int stop_fd)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, rc;

	if (!path[0] || strlen(path) >= sizeof(sun.sun_path))
		return -EINVAL;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = peer_connect(fd, (const struct sockaddr *)&sun, sizeof(sun),
			  connect_ms ? connect_ms : KVTD_PEER_CONNECT_MS, stop_fd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/*
 * A member named by host: getaddrinfo blocks for the resolver's own
 * clocks (glibc: resolv.conf's timeout, 5 s, times its attempts, 2, for
 * each nameserver), which neither the connect timeout nor the stop fd
 * ended -- a thread asking a member whose nameserver did not answer was
 * held that long, and a stopping kvtierd with it.  A numeric address is
 * parsed here (AI_NUMERICHOST: no lookup); a name is looked up on a
 * helper thread of its own (detached), which says it is done on an
 * eventfd, waited on with the caller's stop fd until the deadline (the
 * connect timeout covers the lookup and the connect together).  On
 * time out or stop the caller leaves: the helper finishes within the
 * resolver's clocks and frees what it holds (the last to let go of
 * struct peer_gai frees it).  test_peer_attack `dns_held`.
 *
 * One lookup in flight per host and port (peer_gai_live): a caller that
 * finds its name's waits on that one and shares its answer.  A helper
 * per attempt had a nameserver that did not answer cost a thread per
 * attempt for the resolver's clocks (up to 450 s in glibc, for ever
 * behind an NSS module that hangs): the static poll asks every member
 * each second and each lane batch dials, so 10 helpers per such member
 * in the shim's 10 s, thousands over an hour.  At most PEER_GAI_MAX
 * names at once; past it -EAGAIN.  Process-wide, as auth.c's locks: a
 * lookup is the process's, not a server's (test_peer_attack `dns_once`).
 */
struct peer_gai {
	atomic_int refs;       /* each caller waiting or using res, the helper */
	atomic_bool done;      /* rc and res are set */
	int efd;               /* written once done (never read: stays readable) */
	int rc;                /* getaddrinfo's */
	struct addrinfo *res;  /* its answer (read by the callers, freed at the last put) */
	char host[KVTD_PEER_ADDR_MAX + 1], port[KVTD_PEER_ADDR_MAX + 1];
};

#define PEER_GAI_MAX 64u
static pthread_mutex_t peer_gai_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer_gai *peer_gai_live[PEER_GAI_MAX]; /* peer_gai_lock: in flight */

static void peer_gai_put(struct peer_gai *g)
{
	if (atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	if (g->res)
		freeaddrinfo(g->res);
	close(g->efd);
	free(g);
}

static void *peer_gai_main(void *arg)
{
	struct peer_gai *g = arg;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };

	g->rc = getaddrinfo(g->host, g->port, &hints, &g->res);
	pthread_mutex_lock(&peer_gai_lock);
	for (unsigned i = 0; i < PEER_GAI_MAX; i++)
		if (peer_gai_live[i] == g)
			peer_gai_live[i] = NULL;
	atomic_store(&g->done, true);
	pthread_mutex_unlock(&peer_gai_lock);
	if (eventfd_write(g->efd, 1) < 0) {
		/* cannot fail on a fresh eventfd; the caller's deadline stands */
	}
	peer_gai_put(g);
	return NULL;
}

/* The lookup of host and port in flight, joined (a reference taken), or
 * a new one started: NULL and *rc if none could be.  Locked
 * (peer_gai_lock). */
static struct peer_gai *peer_gai_get_locked(const char *host, const char *port, int *rc)
{
	struct peer_gai *g;
	pthread_attr_t at;
	pthread_t th;
	unsigned slot = PEER_GAI_MAX;

	for (unsigned i = 0; i < PEER_GAI_MAX; i++) {
		g = peer_gai_live[i];
		if (!g) {
			slot = slot < PEER_GAI_MAX ? slot : i;
			continue;
		}
		if (strcmp(g->host, host) == 0 && strcmp(g->port, port) == 0) {
			atomic_fetch_add(&g->refs, 1);
			return g;
		}
	}
	*rc = -EAGAIN;
	if (slot == PEER_GAI_MAX)
		return NULL;
	*rc = -ENOMEM;
	if (!(g = calloc(1, sizeof(*g))))
		return NULL;
	if ((g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		*rc = -errno;
		free(g);
		return NULL;
	}
	snprintf(g->host, sizeof(g->host), "%s", host);
	snprintf(g->port, sizeof(g->port), "%s", port);
	atomic_init(&g->refs, 2);
	atomic_init(&g->done, false);
	*rc = pthread_attr_init(&at);
	if (*rc == 0) {
		*rc = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (*rc == 0)
			*rc = pthread_create(&th, &at, peer_gai_main, g);
		pthread_attr_destroy(&at);
	}
	if (*rc != 0) {
		*rc = -*rc;
		close(g->efd);
		free(g);
		return NULL;
	}
	peer_gai_live[slot] = g; /* its helper takes it out under the lock */
	return g;
}

/* host and port by deadline (peer_now_ms), or until stop_fd is
 * readable: 0, -ETIMEDOUT, -ECANCELED, -EHOSTUNREACH (no such name),
 * -EAGAIN (PEER_GAI_MAX lookups in flight), -errno.  On 0 *res is the
 * answer, and *gp NULL (a numeric address: freeaddrinfo(*res)) or the
 * lookup that holds it (peer_gai_put(*gp), not freeaddrinfo). */
static int peer_resolve(const char *host, const char *port, int64_t deadline, int stop_fd,
			struct addrinfo **res, struct peer_gai **gp)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct peer_gai *g;
	int rc = 0;

	*res = NULL;
	*gp = NULL;
	if (getaddrinfo(host, port, &hints, res) == 0 && *res)
		return 0;
	if (*res) {
		freeaddrinfo(*res);
		*res = NULL;
	}
	pthread_mutex_lock(&peer_gai_lock);
	g = peer_gai_get_locked(host, port, &rc);
	pthread_mutex_unlock(&peer_gai_lock);
	if (!g)
		return rc;
	while (!atomic_load(&g->done)) {
		int64_t left = deadline - peer_now_ms();
		int pr = left > 0 ? peer_poll(g->efd, stop_fd, POLLIN, (int)left) : 0;
		if (pr == -EINTR || pr > 0)
			continue;
		peer_gai_put(g); /* the helper frees the rest */
		return pr == 0 ? -ETIMEDOUT : pr;
	}
	if (g->rc != 0 || !g->res) {
		peer_gai_put(g);
		return -EHOSTUNREACH;
	}
	*res = g->res;
	*gp = g;
	return 0;
}

static int peer_dial(const char *addr, unsigned connect_ms, int stop_fd)
{
	char host[KVTD_PEER_ADDR_MAX + 1], *colon = NULL;
	struct addrinfo *res = NULL;
	struct peer_gai *g = NULL;
	int64_t deadline, left;
	int fd = -1, one = 1, rc;

	if (strncmp(addr, "unix:", 5) == 0)
		return peer_unix(addr + 5, connect_ms, stop_fd);
	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	if (host[0] == '[' && colon > host && colon[-1] == ']') {
		colon[-1] = 0;
		memmove(host, host + 1, strlen(host));
	}
	deadline = peer_now_ms() + (connect_ms ? connect_ms : KVTD_PEER_CONNECT_MS);
	rc = peer_resolve(host, colon + 1, deadline, stop_fd, &res, &g);
	if (rc < 0)
		return rc;
	left = deadline - peer_now_ms();
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fd = -errno;
	} else if ((rc = peer_connect(fd, res->ai_addr, res->ai_addrlen,
				      left > 0 ? (unsigned)left : 1, stop_fd)) < 0) {
		close(fd);
		fd = rc;
	}
	if (g)
		peer_gai_put(g); /* res is its answer, shared */
	else
		freeaddrinfo(res);
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* What the member announced, no more than this side's defaults: the
 * answers kvtierd asks a member for are tables of at most 1,024 items, so
 * a member's larger limits (up to the codec's hard caps: a 1 GiB table,
 * a 1 TiB frame) only let it have a buffer that size allocated here. */
static void peer_limits(struct proto_limits *lim, const struct proto_limits *theirs)
{
	struct proto_limits d;

	proto_limits_default(&d);
	*lim = *theirs;
#define PEER_MIN(f) lim->f = theirs->f < d.f ? theirs->f : d.f
	PEER_MIN(frame_max);
	PEER_MIN(table_max);
	PEER_MIN(value_max);
	PEER_MIN(items_max);
	PEER_MIN(parts_max);
	PEER_MIN(ns_max);
	PEER_MIN(key_max);
#undef PEER_MIN
}

/*
 * TLS over p->fd (connected): the member's certificate verified against
 * tls's CA and its name or address against name (NULL: addr's host), as the engines'
 * client does (lib/tier/remote).  The socket is left non-blocking (every
 * call here polls).  0 or < 0.
 */
static int peer_tls(struct kvtd_peer *p, SSL_CTX *tls, const char *name)
{
	char host[KVTD_PEER_ADDR_MAX + 1], *colon = NULL;
	struct in6_addr a6;
	int64_t deadline = peer_now_ms() + PEER_TIMEOUT_MS;
	int fl = fcntl(p->fd, F_GETFL), rc, want = 0;

	if (fl < 0 || fcntl(p->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	if (!(p->ssl = tlsio_new(tls, p->fd, false)))
		return -ENOMEM;
	snprintf(host, sizeof(host), "%s", name ? name : p->addr);
	if (!name && (colon = strrchr(host, ':')))
		*colon = 0;
	if (!name && host[0] == '[' && colon && colon > host && colon[-1] == ']') {
		colon[-1] = 0;
		memmove(host, host + 1, strlen(host));
	}
	if (inet_pton(AF_INET, host, &a6) == 1 || inet_pton(AF_INET6, host, &a6) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->ssl), host);
	} else {
		SSL_set_tlsext_host_name(p->ssl, host);
		SSL_set1_host(p->ssl, host);
	}
	while ((rc = tlsio_handshake(p->ssl, &want)) == 0) {
		int64_t left = deadline - peer_now_ms();
		int pr = left > 0 ? peer_poll(p->fd, p->stop_fd,
					      want == TLSIO_WANT_OUT ? POLLOUT : POLLIN,
					      (int)left) : 0;
		if (pr < 0 && pr != -EINTR)
			return pr;
		if (pr == 0)
			return -ETIMEDOUT;
	}
	return rc < 0 ? -EPROTO : 0;
}

int kvtd_peer_open(struct kvtd_peer *p, const char *addr, const char *tenant,
		   const uint8_t *secret, uint32_t secret_len, unsigned connect_ms)
{
	return kvtd_peer_open_tls(p, addr, tenant, secret, secret_len, connect_ms, NULL);
}

int kvtd_peer_open_tls(struct kvtd_peer *p, const char *addr, const char *tenant,
		       const uint8_t *secret, uint32_t secret_len, unsigned connect_ms,
		       SSL_CTX *tls)
{
	return kvtd_peer_open_tls_name(p, addr, NULL, tenant, secret, secret_len, connect_ms,
				       tls);
}

int kvtd_peer_open_tls_name(struct kvtd_peer *p, const char *addr, const char *tls_name,
			    const char *tenant, const uint8_t *secret, uint32_t secret_len,
			    unsigned connect_ms, SSL_CTX *tls)
{
	return kvtd_peer_open_stop(p, addr, tls_name, tenant, secret, secret_len, connect_ms, tls,
				   -1);
}

int kvtd_peer_open_stop(struct kvtd_peer *p, const char *addr, const char *tls_name,
			const char *tenant, const uint8_t *secret, uint32_t secret_len,
			unsigned connect_ms, SSL_CTX *tls, int stop_fd)
{
	struct proto_frame f = { .op = PROTO_OP_HELLO };
	uint8_t snonce[PROTO_NONCE_LEN];
	uint16_t method;
	int rc;

	memset(p, 0, sizeof(*p));
	proto_limits_default(&p->lim);
	snprintf(p->addr, sizeof(p->addr), "%s", addr);
	snprintf(p->tenant, sizeof(p->tenant), "%s", tenant);
	p->stop_fd = stop_fd;
	p->fd = peer_dial(addr, connect_ms, stop_fd);
	if (p->fd < 0)
		return p->fd;
	if (tls && (rc = peer_tls(p, tls, tls_name)) < 0)
		goto fail;
	f.hello.min_version = PROTO_VERSION_MIN;
	f.hello.max_version = PROTO_VERSION_MAX;
	f.hello.name = "kvtierd-peer";
	f.hello.name_len = 12;
	rc = peer_call(p, &f, NULL, 0, NULL, 0);
	if (rc < 0)
		goto fail;
	peer_limits(&p->lim, &p->resp.hello.limits);
	p->version = p->resp.hello.version;
	if (p->version < PROTO_VERSION_MIN || p->version > PROTO_VERSION_MAX) {
		rc = KVT_EVERSION; /* not in the range offered */
		goto fail;
	}
	p->caps = p->version >= PROTO_VERSION_CAPS ? p->resp.hello.caps : 0;
	/* With a secret, HMAC or nothing: a member that offers only NONE
	 * cannot prove it knows the tenant's secret, and would be sent the
	 * tenant's blocks (an address taken over, a member without the
	 * pod's tenants file).  Without one, NONE (a trusted network). */
	method = secret && secret_len ? PROTO_AUTH_HMAC_SHA256 : PROTO_AUTH_NONE;
	rc = PROTO_EAUTH;
	for (unsigned i = 0; i < p->resp.hello.auth_count && i < PROTO_AUTH_MAX; i++)
		if (p->resp.hello.auth[i] == method)
			rc = 0;
	if (rc < 0)
		goto fail;
	memcpy(snonce, p->resp.hello.nonce, PROTO_NONCE_LEN);

	memset(&f, 0, sizeof(f));
	f.op = PROTO_OP_AUTH;
	f.auth.method = method;
	f.auth.tenant = p->tenant;
	f.auth.tenant_len = (uint32_t)strlen(p->tenant);
	if (method == PROTO_AUTH_HMAC_SHA256) {
		if (getrandom(f.auth.nonce, PROTO_NONCE_LEN, 0) != PROTO_NONCE_LEN)
			rc = -EIO;
		if (rc == 0)
			rc = proto_auth_proof(PROTO_PROOF_CLIENT, secret, secret_len, snonce,
					      f.auth.nonce, p->tenant, strlen(p->tenant),
					      f.auth.proof);
		if (rc < 0)
			goto fail;
	}
	rc = peer_call(p, &f, NULL, 0, NULL, 0);
	if (rc == 0 && method == PROTO_AUTH_HMAC_SHA256 &&
	    proto_auth_check(PROTO_PROOF_SERVER, secret, secret_len, snonce, f.auth.nonce,
			     p->tenant, strlen(p->tenant), p->resp.auth.proof) != 0)
		rc = PROTO_EAUTH; /* not a member of this pod */
	if (rc < 0)
		goto fail;
	return 0;
fail:
	kvtd_peer_close(p);
	return rc;
}

void kvtd_peer_close(struct kvtd_peer *p)
{
	tlsio_free(p->ssl);
	p->ssl = NULL;
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	free(p->rbuf);
	p->rbuf = NULL;
	p->rlen = p->rcap = p->used = 0;
}

int kvtd_peer_register(struct kvtd_peer *p, const char *canon, size_t len,
		       uint8_t digest[PROTO_DIGEST_LEN])
{
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct proto_item it = { 0 }, got;
	struct proto_iter iter;
	int rc;

	it.text = canon;
	it.text_len = (uint32_t)len;
	rc = peer_call(p, &f, &it, 1, NULL, 0);
	if (rc < 0)
		return rc;
	proto_iter_init(&iter, &p->resp, NULL, NULL, 0);
	if (proto_iter_next(&iter, &got) != 1)
		return PROTO_EMALFORMED;
	if (got.status == KVT_OK)
		memcpy(digest, got.digest, PROTO_DIGEST_LEN);
	return got.status;
}

/* The one item's status of a keyed response. */
static int peer_one(struct kvtd_peer *p)
{
	struct proto_iter iter;
	struct proto_item got;

	proto_iter_init(&iter, &p->resp, NULL, NULL, 0);
	if (proto_iter_next(&iter, &got) != 1)
		return PROTO_EMALFORMED;
	return got.status;
}

int kvtd_peer_exists(struct kvtd_peer *p, const uint8_t digest[PROTO_DIGEST_LEN],
		     const struct kvt_key *key)
{
	struct proto_frame f = { .op = PROTO_OP_EXISTS };
	struct proto_item it = { 0 };
	int rc;

	f.ns_count = 1;
	f.ns = digest;
	it.key = *key;
	rc = peer_call(p, &f, &it, 1, NULL, 0);
	return rc < 0 ? rc : peer_one(p);
}

int kvtd_peer_drain(struct kvtd_peer *p, uint32_t mode)
{
	struct proto_frame f = { .op = PROTO_OP_DRAIN };

	f.drain_mode = mode;
	return peer_call(p, &f, NULL, 0, NULL, 0);
}

int kvtd_peer_stats(struct kvtd_peer *p, uint32_t scope, unsigned n, const char *const *names,
		    uint64_t *values, bool *found)
{
	struct proto_frame f = { .op = PROTO_OP_STATS };
	struct proto_iter iter;
	struct proto_item it;
	int rc;

	for (unsigned i = 0; i < n; i++)
		found[i] = false;
	f.scope.scope = scope;
	if (p->open_tags >> (PEER_OPEN_MAX - 1))
		return -ENOBUFS;
	f.tag = ++p->tag;
	f.version = p->version;
	{
		/* STATS answers may come in several frames: read them all. */
		uint64_t need = 0;
		int64_t len = proto_encode(&f, NULL, 0, NULL, 0, &p->lim, &need);
		uint8_t *buf;
		if (len != KVT_EBUFSMALL)
			return len < 0 ? (int)len : KVT_EBADLEN;
		if (!(buf = malloc(need)))
			return -ENOMEM;
		len = proto_encode(&f, NULL, 0, buf, need, &p->lim, NULL);
		rc = len < 0 ? (int)len : peer_send(p, buf, (size_t)len);
		free(buf);
		if (rc == 0)
			peer_opened(p);
	}
	while (rc == 0) {
		rc = peer_recv(p);
		if (rc < 0)
			return rc;
		if (p->resp.op == PROTO_OP_ERROR || p->resp.status < 0)
			return p->resp.status < 0 ? p->resp.status : PROTO_EMALFORMED;
		if (p->resp.tag != f.tag)
			continue;
		proto_iter_init(&iter, &p->resp, NULL, NULL, 0);
		while (proto_iter_next(&iter, &it) == 1) {
			if (it.kind != PROTO_STAT_NUM)
				continue;
			for (unsigned i = 0; i < n; i++)
				if (strlen(names[i]) == it.name_len &&
				    memcmp(it.name, names[i], it.name_len) == 0) {
					values[i] = it.value;
					found[i] = true;
				}
		}
		if (!(p->resp.flags & PROTO_F_MORE))
			return KVT_OK;
	}
	return rc;
}

int kvtd_peer_stat(struct kvtd_peer *p, uint32_t scope, const char *name, uint64_t *value)
{
	bool found;
	int rc = kvtd_peer_stats(p, scope, 1, &name, value, &found);

	return rc == KVT_OK && !found ? KVT_MISS : rc;
}

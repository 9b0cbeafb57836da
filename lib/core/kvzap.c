/*
 * kvzap.c - what a peer of a KV-events socket may cost (kvzap.h): the
 * socket options of every socket a peer can reach (kvzap_peer_bounds) and
 * the ZAP thread (kvt-events-zap), which bounds how many peers each bound
 * socket holds (kvevents.h, KVEVENTS_DEF_SUB_MAX).
 *
 * Owns, in one struct kvzap that kvevents.c opens on its context: the REP
 * socket bound at inproc://zeromq.zap.01, the thread, its wake eventfd,
 * each watched socket's monitor (the reading end), the table of their live
 * peers and the events.refused counter.  No global state.  It sits below
 * both kvevents.c and kvreplay.c (they guard their sockets with it) and
 * calls neither.
 *
 * libzmq asks the ZAP handler of the socket's context (one per context,
 * and each kvevents has its own context) about every peer of a socket
 * that has a ZMQ_ZAP_DOMAIN, during the handshake, even with the NULL
 * mechanism; a refused peer gets ZMTP's ERROR and never a READY, and
 * libzmq closes it when it leaves or at the handshake deadline
 * (ZMQ_HANDSHAKE_IVL).  To know how many peers a socket has, the thread
 * reads the socket's monitor (ZMQ_EVENT_ACCEPTED and _DISCONNECTED:
 * libzmq reports both for every descriptor a listener takes, whatever
 * becomes of its handshake) into a table of live descriptors, with each
 * one's peer address (getpeername on the accepted descriptor: read only).
 * Each watched socket's domain is "kvevents.<id>", which names its
 * monitor.
 *
 * libzmq's I/O thread blocks on a monitor event it cannot queue, so each
 * monitor's reading end is connected before the socket binds, takes any
 * number of events (ZMQ_RCVHWM 0), and the monitor is stopped
 * (zmq_socket_monitor(sock, NULL, 0)) before the socket is closed and
 * before its reading end is (kvzap_close_socket).
 *
 * A watched socket's peers from one address are let go on request
 * (kvzap_drop_addr, kvevents.c's subscription bound): the thread
 * disconnects their descriptors, which stay libzmq's to close.
 *
 * Locks: z->lock guards the sockets handed to the thread (posted), the
 * next id, the stop flag and the drops' numbers (kvzap_drop_wait waits on
 * z->done under it); it is held only to hand entries over, never while
 * the thread reads a monitor or drops a peer (kvzap_adopt).
 * z->peer_lock guards the table of peers, which the thread changes and
 * other threads read (kvzap_addr_live); the monitors, the entries taken
 * (adopting) and the REP socket belong to the thread (or to open and
 * close around it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <zmq.h>

#include "kvzap.h"

/* A watched socket, as handed to the ZAP thread. */
struct kvzap_mon {
	uint32_t id;                    /* its ZMQ_ZAP_DOMAIN is "kvevents.<id>" */
	void *pair;                     /* its monitor's reading end; NULL: the socket
					 * was closed (handed over: forget it) */
	char drop[KVZAP_ADDR_LEN];      /* posted only: let the socket's peers from
					 * this address go (kvzap_drop_addr) */
	uint64_t ticket;                /* posted only: the drop's number */
};

/* A descriptor libzmq took for a watched socket and has not closed yet. */
struct kvzap_peer {
	int fd;
	ino_t ino;                      /* the socket's inode: fd's, while it is this one */
	uint32_t mon;                   /* the socket's id */
	char addr[64];                  /* the peer's IP address; "" if not TCP */
	char paddr[KVZAP_ADDR_LEN];     /* libzmq's Peer-Address: the IP address, or
					 * ":uid:gid:pid" on ipc:// (kvzap_addr_is) */
};

/* Whether peer p is from address addr, as libzmq's Peer-Address gives it:
 * the IP address, or on ipc:// the host part (libzmq 4.3.4: "localhost")
 * and ":uid:gid:pid". */
static bool kvzap_addr_is(const struct kvzap_peer *p, const char *addr)
{
	const char *c;

	if (p->addr[0] || strcmp(p->paddr, addr) == 0) /* TCP: addr, its IP address */
		return strcmp(p->paddr, addr) == 0;
	c = strchr(addr, ':');
	return p->paddr[0] == ':' && c && strcmp(c, p->paddr) == 0;
}

struct kvzap {
	void *zctx;                     /* the publisher's */
	unsigned sub_max;
	struct kvt_mem *mem;
	const struct kvt_logger *log;

	pthread_t thread;
	bool started;
	int wake;                       /* eventfd: stop or posted changed */
	pthread_mutex_t lock;
	struct kvzap_mon *posted;       /* lock: sockets watched or closed, in order */
	size_t posted_n, posted_cap;    /* lock */
	uint32_t ids;                   /* lock: the next watched socket's id */
	bool stop;                      /* lock */
	uint64_t drops, drops_done;     /* lock: drops posted, and the last one done
					 * (they are done in order) */
	pthread_cond_t done;            /* drops_done changed */

	/* the thread */
	struct kvzap_mon *adopting;     /* posted entries taken out of the lock: the
					 * last one's array, its [adopt_at, adopt_n)
					 * not done yet (kvzap_adopt) */
	size_t adopt_at, adopt_n, adopt_cap;
	void *rep;                      /* bound at inproc://zeromq.zap.01 */
	struct kvzap_mon *mons;         /* the sockets it watches */
	size_t mon_n, mon_cap;
	pthread_mutex_t peer_lock;      /* peers: changed by the thread under it, read
					 * by others under it (kvzap_addr_live) */
	struct kvzap_peer *peers;       /* their live descriptors */
	size_t peer_n, peer_cap;
	bool refusing;                  /* the last answer was a refusal */

	_Atomic uint64_t c_refused;
};

/* ------------------------------------------------------------------------
 * What a peer may cost
 */

/* kvzap.h */
void kvzap_peer_bounds(void *sock)
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

/* kvzap.h */
unsigned kvzap_recv(void *sock, void *fr, size_t cap, size_t *len, unsigned max)
{
	unsigned nf = 0;
	int more = 1;

	while (more) {
		zmq_msg_t msg;
		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, sock, nf ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			break;
		}
		if (nf < max) {
			len[nf] = zmq_msg_size(&msg);
			memcpy((uint8_t *)fr + nf * cap, zmq_msg_data(&msg),
			       len[nf] < cap ? len[nf] : cap);
		}
		nf++;
		more = zmq_msg_more(&msg);
		zmq_msg_close(&msg);
	}
	return nf;
}

/* ------------------------------------------------------------------------
 * The ZAP thread: how many peers a watched socket holds
 */

static void kvzap_wake(struct kvzap *z)
{
	uint64_t one = 1;
	ssize_t w = write(z->wake, &one, sizeof(one));
	(void)w; /* fails only if the count is huge: the thread wakes anyway */
}

/* Hand socket id's monitor (pair), its closing (pair NULL, drop NULL), or
 * the drop of its peers from address drop to the ZAP thread.  0 (a drop:
 * its number, > 0), -ENOMEM. */
static int64_t kvzap_post(struct kvzap *z, uint32_t id, void *pair, const char *drop)
{
	int64_t ret = 0;

	pthread_mutex_lock(&z->lock);
	if (z->posted_n == z->posted_cap) {
		size_t nc = z->posted_cap ? 2 * z->posted_cap : 8;
		struct kvzap_mon *na = kvt_mem_realloc(z->mem, z->posted,
						      z->posted_cap * sizeof(*na),
						      nc * sizeof(*na));
		if (!na) {
			ret = -ENOMEM;
			goto out;
		}
		z->posted = na;
		z->posted_cap = nc;
	}
	z->posted[z->posted_n] = (struct kvzap_mon){ .id = id, .pair = pair };
	if (drop) {
		snprintf(z->posted[z->posted_n].drop, KVZAP_ADDR_LEN, "%s", drop);
		ret = (int64_t)++z->drops;
		z->posted[z->posted_n].ticket = (uint64_t)ret;
	}
	z->posted_n++;
out:
	pthread_mutex_unlock(&z->lock);
	if (ret >= 0)
		kvzap_wake(z);
	return ret;
}

/* kvzap.h */
int kvzap_watch(struct kvzap *z, void *sock, uint32_t *id)
{
	char name[48];
	int zero = 0, ret;
	void *pair = zmq_socket(z->zctx, ZMQ_PAIR);

	*id = KVZAP_UNWATCHED;
	if (!pair)
		return -zmq_errno();
	pthread_mutex_lock(&z->lock);
	*id = z->ids++;
	pthread_mutex_unlock(&z->lock);
	zmq_setsockopt(pair, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(pair, ZMQ_LINGER, &zero, sizeof(zero));
	snprintf(name, sizeof(name), "inproc://kvevents.monitor.%" PRIu32, *id);
	/* Nothing is accepted before the bind: the pair is connected before
	 * the monitor has an event to send. */
	if (zmq_socket_monitor(sock, name, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) < 0) {
		ret = zmq_errno() ? -zmq_errno() : -ENOMEM;
		zmq_close(pair);
		*id = KVZAP_UNWATCHED;
		return ret;
	}
	ret = zmq_connect(pair, name);
	if (ret == 0) {
		snprintf(name, sizeof(name), "kvevents.%" PRIu32, *id);
		ret = zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, name, strlen(name));
	}
	if (ret < 0)
		ret = zmq_errno() ? -zmq_errno() : -ENOMEM;
	else
		ret = (int)kvzap_post(z, *id, pair, NULL);
	if (ret < 0) {
		zmq_socket_monitor(sock, NULL, 0);
		zmq_close(pair);
		*id = KVZAP_UNWATCHED;
	}
	return ret;
}

/* kvzap.h */
int64_t kvzap_drop_addr(struct kvzap *z, uint32_t id, const char *addr)
{
	if (id == KVZAP_UNWATCHED || !addr[0] || strlen(addr) >= KVZAP_ADDR_LEN)
		return -EINVAL;
	return kvzap_post(z, id, NULL, addr);
}

/* kvzap.h */
bool kvzap_drop_wait(struct kvzap *z, int64_t ticket, unsigned ms)
{
	struct timespec until;
	bool done;

	if (ticket <= 0)
		return false;
	until = kvt_deadline(CLOCK_REALTIME, (uint64_t)ms * 1000000u);
	pthread_mutex_lock(&z->lock);
	while (z->drops_done < (uint64_t)ticket && !z->stop &&
	       pthread_cond_timedwait(&z->done, &z->lock, &until) != ETIMEDOUT)
		;
	done = z->drops_done >= (uint64_t)ticket;
	pthread_mutex_unlock(&z->lock);
	return done;
}

/* kvzap.h */
bool kvzap_addr_live(struct kvzap *z, uint32_t id, const char *addr)
{
	bool live = false;

	pthread_mutex_lock(&z->peer_lock);
	for (size_t k = 0; k < z->peer_n && !live; k++)
		live = z->peers[k].mon == id && kvzap_addr_is(&z->peers[k], addr);
	pthread_mutex_unlock(&z->peer_lock);
	return live;
}

/* kvzap.h */
void kvzap_close_socket(struct kvzap *z, void *sock, uint32_t id)
{
	if (id != KVZAP_UNWATCHED) {
		zmq_socket_monitor(sock, NULL, 0);
		/* Without memory, the thread keeps counting its peers (until
		 * close), whose ids no other socket uses. */
		kvzap_post(z, id, NULL, NULL);
	}
	zmq_close(sock);
}

static void kvzap_drain_mon(struct kvzap *z, size_t m);
static void kvzap_peer_paddr(int fd, char *out, size_t cap);

/* ZAP thread: socket id's peers are gone (closed). */
static void kvzap_forget(struct kvzap *z, uint32_t id)
{
	pthread_mutex_lock(&z->peer_lock);
	for (size_t k = 0; k < z->peer_n;)
		if (z->peers[k].mon == id)
			z->peers[k] = z->peers[--z->peer_n];
		else
			k++;
	pthread_mutex_unlock(&z->peer_lock);
}

/* ZAP thread: let socket id's peers from address addr go.  Its monitor is
 * read first, so that the table holds what libzmq has not closed; each
 * descriptor is shut down (libzmq reads its end, closes it and reports
 * DISCONNECTED; its descriptor is never closed here) only while it is
 * still the socket libzmq accepted (its inode: a number libzmq closed and
 * the process reused since is another socket) and its peer is that
 * address. */
static void kvzap_drop(struct kvzap *z, uint32_t id, const char *addr)
{
	unsigned n = 0;

	for (size_t k = 0; k < z->mon_n; k++)
		if (z->mons[k].id == id)
			kvzap_drain_mon(z, k);
	for (size_t k = 0; k < z->peer_n; k++) {
		struct kvzap_peer *p = &z->peers[k];
		struct stat st;
		char now[KVZAP_ADDR_LEN];
		int fd;
		if (p->mon != id || !kvzap_addr_is(p, addr))
			continue;
		/* Checked and disconnected through a duplicate: libzmq's I/O
		 * thread may close p->fd meanwhile and another thread's socket
		 * take its number, after the checks and before the connect --
		 * the duplicate stays the socket checked. */
		fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			continue;
		kvzap_peer_paddr(fd, now, sizeof(now));
		if (fstat(fd, &st) < 0 || st.st_ino != p->ino || strcmp(now, p->paddr) != 0) {
			close(fd);
			continue;
		}
		/* A TCP connection is disconnected (connect to AF_UNSPEC:
		 * the kernel drops what it holds unread and sends a reset),
		 * a Unix one shut down: libzmq would read what the peer sent
		 * before EOF, and a TCP receive buffer held ~3,000 more
		 * subscriptions of 1,000 bytes (~100 MB of trie). */
		if (connect(fd, &(struct sockaddr){ .sa_family = AF_UNSPEC },
			    sizeof(struct sockaddr)) < 0)
			shutdown(fd, SHUT_RDWR);
		close(fd);
		n++;
	}
	kvt_logf(z->log, KVT_LOG_DEBUG, "events: socket %" PRIu32 ": %u connections from %s "
		 "let go", id, n, addr);
}

/* ZAP thread: take the sockets handed over, in order.  Returns the stop
 * flag.  The posted entries are taken out under z->lock (the arrays
 * swapped) and done outside it: a drop reads the socket's monitor and
 * makes a few system calls a descriptor (kvzap_drop), and a flood of
 * connections can queue thousands of monitor events -- under the lock
 * it held up every kvzap_post meanwhile, the publisher's next drop and
 * kvevents_group_endpoint's watch and close, which hold the groups'
 * channel lock that the publisher thread needs to send (review39). */
static bool kvzap_adopt(struct kvzap *z)
{
	bool stop;

	pthread_mutex_lock(&z->lock);
	stop = z->stop;
	if (z->adopt_at == z->adopt_n) {
		/* all done: the next ones */
		struct kvzap_mon *t = z->adopting;
		size_t cap = z->adopt_cap;
		z->adopting = z->posted;
		z->adopt_cap = z->posted_cap;
		z->adopt_n = z->posted_n;
		z->adopt_at = 0;
		z->posted = t;
		z->posted_cap = cap;
		z->posted_n = 0;
	}
	pthread_mutex_unlock(&z->lock);
	for (; z->adopt_at < z->adopt_n; z->adopt_at++) {
		struct kvzap_mon *m = &z->adopting[z->adopt_at];
		if (m->drop[0]) {
			kvzap_drop(z, m->id, m->drop);
			pthread_mutex_lock(&z->lock);
			z->drops_done = m->ticket;
			pthread_cond_broadcast(&z->done);
			pthread_mutex_unlock(&z->lock);
			continue;
		}
		if (!m->pair) {
			for (size_t k = 0; k < z->mon_n; k++)
				if (z->mons[k].id == m->id) {
					zmq_close(z->mons[k].pair);
					z->mons[k] = z->mons[--z->mon_n];
					break;
				}
			kvzap_forget(z, m->id);
			continue;
		}
		if (z->mon_n == z->mon_cap) {
			size_t nc = z->mon_cap ? 2 * z->mon_cap : 4;
			struct kvzap_mon *na = kvt_mem_realloc(z->mem, z->mons,
							      z->mon_cap * sizeof(*na),
							      nc * sizeof(*na));
			if (!na)
				break; /* the rest waits, in order (its events queue) */
			z->mons = na;
			z->mon_cap = nc;
		}
		z->mons[z->mon_n++] = *m;
	}
	return stop;
}

/* The peer's IP address, as libzmq puts it in a ZAP request; "" if not
 * TCP, or fd is no socket any more. */
static void kvzap_peer_addr(int fd, char *out, size_t cap)
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

/* libzmq's Peer-Address of descriptor fd: its IP address (TCP), or
 * ":uid:gid:pid" (a Unix socket: SO_PEERCRED); "" if neither. */
static void kvzap_peer_paddr(int fd, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct ucred cred;
	socklen_t clen = sizeof(cred);

	kvzap_peer_addr(fd, out, cap);
	if (out[0] || getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    ss.ss_family != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		return;
	snprintf(out, cap, ":%u:%u:%d", (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid);
}

/* ZAP thread: read monitor m's events into the table of peers. */
static void kvzap_drain_mon(struct kvzap *z, size_t m)
{
	for (;;) {
		uint8_t head[6];
		uint16_t event;
		uint32_t fd;
		size_t len = 0;

		/* Frame 1: event (16 bits), value (32: the fd); frame
		 * 2: the endpoint. */
		if (!kvzap_recv(z->mons[m].pair, head, sizeof(head), &len, 1))
			break;
		if (len != sizeof(head))
			continue;
		memcpy(&event, head, sizeof(event));
		memcpy(&fd, head + 2, sizeof(fd));
		pthread_mutex_lock(&z->peer_lock);
		for (size_t k = 0; k < z->peer_n; k++)
			if (z->peers[k].mon == z->mons[m].id &&
			    z->peers[k].fd == (int)fd) {
				z->peers[k] = z->peers[--z->peer_n];
				break;
			}
		if (event == ZMQ_EVENT_ACCEPTED && z->peer_n == z->peer_cap) {
			size_t nc = z->peer_cap ? 2 * z->peer_cap : 64;
			struct kvzap_peer *na = kvt_mem_realloc(z->mem, z->peers,
							       z->peer_cap * sizeof(*na),
							       nc * sizeof(*na));
			if (na) {
				z->peers = na;
				z->peer_cap = nc;
			}
		}
		/* (without room: not counted, the count errs low) */
		if (event == ZMQ_EVENT_ACCEPTED && z->peer_n < z->peer_cap) {
			struct kvzap_peer *p = &z->peers[z->peer_n++];
			struct stat st;
			p->fd = (int)fd;
			p->ino = fstat((int)fd, &st) == 0 ? st.st_ino : 0;
			p->mon = z->mons[m].id;
			kvzap_peer_addr((int)fd, p->addr, sizeof(p->addr));
			kvzap_peer_paddr((int)fd, p->paddr, sizeof(p->paddr));
		}
		pthread_mutex_unlock(&z->peer_lock);
	}
}

/* ZAP thread: read every monitor's events into the table of peers. */
static void kvzap_drain(struct kvzap *z)
{
	for (size_t m = 0; m < z->mon_n; m++)
		kvzap_drain_mon(z, m);
}

/* ZAP thread: answer one request waiting on the REP socket (RFC 27:
 * version, request id, domain, address, identity, mechanism,
 * credentials...).  false if none was waiting. */
static bool kvzap_answer(struct kvzap *z)
{
	enum { ZAP_VERSION, ZAP_REQID, ZAP_DOMAIN, ZAP_ADDRESS, ZAP_FRAMES = 6 };
	char fr[4][256];
	size_t fr_len[4] = { 0 };
	unsigned nf = kvzap_recv(z->rep, fr, sizeof(fr[0]), fr_len, 4);
	const char *status = "400", *text = "bad request";
	uint32_t id;
	size_t all = 0, here = 0;

	if (nf == 0)
		return false;
	for (unsigned i = 0; i < 4; i++) { /* strings of 255 bytes at most */
		if (fr_len[i] >= sizeof(fr[i]))
			fr_len[i] = sizeof(fr[i]) - 1;
		fr[i][fr_len[i]] = 0;
	}
	/* Its peer was accepted before it asked: read that (and any socket
	 * just bound) first. */
	kvzap_adopt(z);
	kvzap_drain(z);
	if (nf >= ZAP_FRAMES && strcmp(fr[ZAP_VERSION], "1.0") == 0 &&
	    sscanf(fr[ZAP_DOMAIN], "kvevents.%" SCNu32, &id) == 1) {
		for (size_t k = 0; k < z->peer_n; k++) {
			if (z->peers[k].mon != id)
				continue;
			all++;
			here += fr[ZAP_ADDRESS][0] &&
				strcmp(z->peers[k].addr, fr[ZAP_ADDRESS]) == 0;
		}
		if (all > z->sub_max || here > KVEVENTS_SUB_PER_ADDR) {
			text = "too many subscribers";
			atomic_fetch_add_explicit(&z->c_refused, 1, memory_order_relaxed);
			if (!z->refusing)
				kvt_logf(z->log, KVT_LOG_WARN,
					 "events: refusing subscribers (socket %" PRIu32
					 ": %zu connections, events.max_subscribers %u; %zu "
					 "from %s, at most %d)", id, all, z->sub_max, here,
					 fr[ZAP_ADDRESS], KVEVENTS_SUB_PER_ADDR);
			z->refusing = true;
		} else {
			status = "200";
			text = "OK";
			z->refusing = false;
		}
	}
	/* Reply: version, request id, status code, status text, user id,
	 * metadata. */
	zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(z->rep, fr[ZAP_REQID], fr_len[ZAP_REQID], ZMQ_SNDMORE);
	zmq_send(z->rep, status, 3, ZMQ_SNDMORE);
	zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(z->rep, "", 0, ZMQ_SNDMORE);
	zmq_send(z->rep, "", 0, 0);
	return true;
}

static void *kvzap_main(void *arg)
{
	struct kvzap *z = arg;
	zmq_pollitem_t *items = NULL;
	size_t items_cap = 0;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!kvzap_adopt(z)) {
		size_t n = 2;
		uint64_t v;
		if (items_cap < z->mon_n + 2) {
			zmq_pollitem_t *na = kvt_mem_realloc(z->mem, items,
							     items_cap * sizeof(*na),
							     (z->mon_n + 2) * sizeof(*na));
			if (na) {
				items = na;
				items_cap = z->mon_n + 2;
			}
		}
		if (!items) {
			/* Without memory for poll items: answer, and read the
			 * monitors, every 10 ms. */
			kvzap_drain(z);
			while (kvzap_answer(z))
				;
			usleep(10000);
			continue;
		}
		items[0] = (zmq_pollitem_t){ NULL, z->wake, ZMQ_POLLIN, 0 };
		items[1] = (zmq_pollitem_t){ z->rep, 0, ZMQ_POLLIN, 0 };
		for (size_t m = 0; m < z->mon_n && n < items_cap; m++)
			items[n++] = (zmq_pollitem_t){ z->mons[m].pair, 0, ZMQ_POLLIN, 0 };
		if (zmq_poll(items, (int)n, -1) < 0)
			continue;
		if (items[0].revents & ZMQ_POLLIN) {
			ssize_t r = read(z->wake, &v, sizeof(v));
			(void)r; /* EAGAIN: read with an earlier wake */
		}
		kvzap_drain(z);
		while (kvzap_answer(z))
			;
	}
	kvt_mem_free(z->mem, items, items_cap * sizeof(*items));
	return NULL;
}


/* ------------------------------------------------------------------------
 * Open and close
 */

int kvzap_open(struct kvzap **out, void *zctx, unsigned sub_max, struct kvt_mem *mem,
	       const struct kvt_logger *log)
{
	struct kvzap *z = kvt_mem_calloc(mem, 1, sizeof(*z));
	int linger = 0, ret;

	if (!z)
		return -ENOMEM;
	z->zctx = zctx;
	z->sub_max = sub_max;
	z->mem = mem;
	z->log = log;
	pthread_mutex_init(&z->lock, NULL);
	pthread_mutex_init(&z->peer_lock, NULL);
	pthread_cond_init(&z->done, NULL);
	z->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (z->wake < 0) {
		ret = -errno;
		goto fail;
	}
	z->rep = zmq_socket(zctx, ZMQ_REP);
	if (!z->rep) {
		ret = -zmq_errno();
		goto fail;
	}
	zmq_setsockopt(z->rep, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_bind(z->rep, "inproc://zeromq.zap.01") < 0) {
		ret = -zmq_errno();
		goto fail;
	}
	ret = -pthread_create(&z->thread, NULL, kvzap_main, z);
	if (ret < 0)
		goto fail;
	pthread_setname_np(z->thread, "kvt-events-zap");
	z->started = true;
	*out = z;
	return 0;
fail:
	kvzap_close(z);
	return ret;
}

void kvzap_close(struct kvzap *z)
{
	if (!z)
		return;
	if (z->started) {
		pthread_mutex_lock(&z->lock);
		z->stop = true;
		pthread_cond_broadcast(&z->done);
		pthread_mutex_unlock(&z->lock);
		kvzap_wake(z);
		pthread_join(z->thread, NULL);
	}
	for (size_t k = 0; k < z->mon_n; k++)
		zmq_close(z->mons[k].pair);
	for (size_t k = 0; k < z->posted_n; k++)
		if (z->posted[k].pair)
			zmq_close(z->posted[k].pair);
	for (size_t k = z->adopt_at; k < z->adopt_n; k++)
		if (z->adopting[k].pair)
			zmq_close(z->adopting[k].pair);
	if (z->rep)
		zmq_close(z->rep);
	if (z->wake >= 0)
		close(z->wake);
	kvt_mem_free(z->mem, z->mons, z->mon_cap * sizeof(*z->mons));
	kvt_mem_free(z->mem, z->peers, z->peer_cap * sizeof(*z->peers));
	kvt_mem_free(z->mem, z->posted, z->posted_cap * sizeof(*z->posted));
	kvt_mem_free(z->mem, z->adopting, z->adopt_cap * sizeof(*z->adopting));
	pthread_cond_destroy(&z->done);
	pthread_mutex_destroy(&z->lock);
	pthread_mutex_destroy(&z->peer_lock);
	kvt_mem_free(z->mem, z, sizeof(*z));
}

uint64_t kvzap_refused(const struct kvzap *z)
{
	return atomic_load_explicit(&z->c_refused, memory_order_relaxed);
}

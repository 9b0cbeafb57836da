/*
 * proxy.c - a relaying, recording, filtering TCP proxy for tests (proxy.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"
#include "server.h"
#include "t.h"

struct relay {
	struct tproxy *p;
	int a, b;                    /* client, server */
	uint64_t conn;               /* the filter's */
	int slot;                    /* in p->down, or -1 past TPROXY_SLOTS */
};

static void record(struct tproxy *p, const uint8_t *buf, size_t n)
{
	pthread_mutex_lock(&p->lock);
	if (p->log_len + n > p->log_cap) {
		p->log_cap = (p->log_len + n) * 2;
		p->log = realloc(p->log, p->log_cap);
		T_ASSERT(p->log);
	}
	memcpy(p->log + p->log_len, buf, n);
	p->log_len += n;
	pthread_mutex_unlock(&p->lock);
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct tproxy *p = r->p;
	uint8_t *buf = malloc(1 << 16);
	T_ASSERT(buf);
	while (!atomic_load(&p->stop)) {
		uint64_t bit = r->slot >= 0 ? UINT64_C(1) << r->slot : 0;
		bool held[2] = { (atomic_load(&p->hold_up) & bit) != 0,
				 (atomic_load(&p->hold_down) & bit) != 0 };
		struct pollfd pf[2] = { { r->a, held[0] ? 0 : POLLIN, 0 },
					{ r->b, held[1] ? 0 : POLLIN, 0 } };
		if (poll(pf, 2, 50) < 0 && errno != EINTR)
			break;
		/* Held while it waited: nothing is read once the bit is set. */
		held[0] = held[0] || (atomic_load(&p->hold_up) & bit) != 0;
		held[1] = held[1] || (atomic_load(&p->hold_down) & bit) != 0;
		for (int i = 0; i < 2; i++) {
			size_t fwd;
			bool stall = false;
			int mode = 0;
			if (held[i] || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = read(pf[i].fd, buf, 1 << 16);
			if (n <= 0)
				goto done;
			fwd = (size_t)n;
			if (i == 1 && p->filter) {
				mode = atomic_load(&p->mode);
				fwd = p->filter(p, mode, &r->conn, buf, (size_t)n, &stall);
			}
			if (p->record)
				record(p, buf, fwd);
			/* Counted before it is sent: once the client has it, so
			 * does the count. */
			if (i == 1 && r->slot >= 0)
				atomic_fetch_add(&p->down[r->slot], fwd);
			for (size_t off = 0; off < fwd;) {
				ssize_t w = write(i ? r->a : r->b, buf + off, fwd - off);
				if (w <= 0)
					goto done;
				off += (size_t)w;
			}
			if (stall) {
				while (atomic_load(&p->mode) == mode && !atomic_load(&p->stop))
					tsrv_sleep_ms(10);
				goto done;
			}
		}
	}
done:
	if (r->slot >= 0) {
		atomic_store(&p->fd_up[r->slot], -1);
		atomic_store(&p->fd_down[r->slot], -1);
	}
	close(r->a);
	close(r->b);
	free(buf);
	atomic_fetch_sub(&p->relays, 1);
	free(r);
	return NULL;
}

static void *proxy_main(void *arg)
{
	struct tproxy *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pollfd pf = { p->lfd, POLLIN, 0 };
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons(atomic_load(&p->to_port)),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct relay *r;
		pthread_t t;
		int c, s;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		c = accept(p->lfd, NULL, NULL);
		if (c < 0)
			continue;
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(c);
			if (s >= 0)
				close(s);
			continue;
		}
		r = calloc(1, sizeof(*r));
		T_ASSERT(r);
		int slot = atomic_fetch_add(&p->opened, 1);
		*r = (struct relay){ .p = p, .a = c, .b = s, .slot = slot < TPROXY_SLOTS ? slot : -1 };
		if (r->slot >= 0) {
			atomic_store(&p->fd_up[r->slot], c);
			atomic_store(&p->fd_down[r->slot], s);
		}
		atomic_fetch_add(&p->relays, 1);
		T_OK(pthread_create(&t, NULL, relay_main, r));
		pthread_detach(t);
	}
	return NULL;
}

void tproxy_start(struct tproxy *p, uint16_t to_port, tproxy_filter_fn filter, bool rec)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < TPROXY_SLOTS; i++) {
		atomic_init(&p->fd_up[i], -1);
		atomic_init(&p->fd_down[i], -1);
	}
	p->to_port = to_port;
	p->filter = filter;
	p->record = rec;
	pthread_mutex_init(&p->lock, NULL);
	p->lfd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(p->lfd >= 0);
	T_OK(bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)));
	T_OK(listen(p->lfd, 16));
	T_OK(getsockname(p->lfd, (struct sockaddr *)&sa, &sl));
	p->port = ntohs(sa.sin_port);
	T_OK(pthread_create(&p->thr, NULL, proxy_main, p));
}

void tproxy_stop(struct tproxy *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->thr, NULL);
	close(p->lfd);
	for (int i = 0; i < 500 && atomic_load(&p->relays) > 0; i++)
		tsrv_sleep_ms(10);
	T_EQ_INT(atomic_load(&p->relays), 0);
	pthread_mutex_destroy(&p->lock);
	free(p->log);
	p->log = NULL;
}

size_t tproxy_queued(struct tproxy *p, int slot, bool up)
{
	int fd = slot >= 0 && slot < TPROXY_SLOTS
			 ? atomic_load(up ? &p->fd_up[slot] : &p->fd_down[slot])
			 : -1;
	int n = 0;
	if (fd < 0 || ioctl(fd, FIONREAD, &n) < 0 || n < 0)
		return 0;
	return (size_t)n;
}

bool tproxy_saw(struct tproxy *p, const char *pat)
{
	bool hit;
	pthread_mutex_lock(&p->lock);
	hit = p->log_len && memmem(p->log, p->log_len, pat, strlen(pat)) != NULL;
	pthread_mutex_unlock(&p->lock);
	return hit;
}

/*
 * test_peer.c - daemon/peer.c's connect deadline: a member that does not
 * answer (its accept queue full, so the kernel drops our SYNs, as it does
 * for a blackholed host) costs the caller the connect timeout, not the
 * kernel's two minutes of SYN retries; a closed port fails at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.h"
#include "t.h"

/* A loopback listener with backlog 0 whose accept queue is then filled:
 * further connects stay in SYN_SENT.  Returns its port; *fds (up to 8)
 * are the sockets to close. */
static int full_listener(int *lfd, int *fds, unsigned *nfds)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	*lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(*lfd >= 0);
	T_EQ_INT(bind(*lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_EQ_INT(listen(*lfd, 0), 0);
	T_EQ_INT(getsockname(*lfd, (struct sockaddr *)&sa, &sl), 0);
	*nfds = 0;
	for (;;) {
		struct pollfd pf;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
		socklen_t el = sizeof(err);
		T_ASSERT(fd >= 0);
		T_ASSERT(*nfds < 8); /* the queue must fill within a few */
		fds[(*nfds)++] = fd;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			continue;
		T_EQ_INT(errno, EINPROGRESS);
		pf = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&pf, 1, 200) == 0)
			break; /* this one hangs: the queue is full */
		T_EQ_INT(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el), 0);
		T_EQ_INT(err, 0);
	}
	return ntohs(sa.sin_port);
}

static void test_blackholed(void)
{
	int lfd, fds[8], rc;
	unsigned nfds;
	char addr[64];
	struct kvtd_peer p;
	uint64_t t0;

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", full_listener(&lfd, fds, &nfds));
	t0 = t_now_ms();
	rc = kvtd_peer_open(&p, addr, "t", NULL, 0, 300);
	uint64_t took = t_now_ms() - t0;
	fprintf(stderr, "blackholed connect: %d after %llu ms\n", rc, (unsigned long long)took);
	T_EQ_INT(rc, -ETIMEDOUT);
	T_GE_INT((long long)took, 290);
	T_LE_INT((long long)took, 1500); /* 300 ms and a loaded machine's slack */
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	close(lfd);
}

static void test_refused(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
	char addr[64];
	struct kvtd_peer p;
	uint64_t t0;

	/* A port bound but not listening: refused at once. */
	T_EQ_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	t0 = t_now_ms();
	rc = kvtd_peer_open(&p, addr, "t", NULL, 0, 0);
	T_EQ_INT(rc, -ECONNREFUSED);
	T_LE_INT((long long)(t_now_ms() - t0), 1000);
	close(fd);
}

int main(void)
{
	test_refused();
	test_blackholed();
	return 0;
}

/*
 * etcd.h - a real etcd (Debian's etcd-server) on loopback for tests:
 * test_members and test_cluster.
 *
 *   struct t_etcd e;
 *   t_etcd_init(&e, base);       ports, base/etcd (data), base/etcd.log
 *   if (!t_etcd_start(&e)) ...   false: no etcd binary to run
 *   ... e.url ...                "http://127.0.0.1:PORT" for --etcd
 *   t_etcd_kill(&e);             SIGKILL; t_etcd_start again restarts it
 *                                on the same data and ports
 *
 * The etcd process dies with the test (PR_SET_PDEATHSIG), also when a
 * check fails.
 *
 *   t_etcd_required()            true: no etcd is a failure, not a skip
 */
#ifndef KVT_TEST_ETCD_H
#define KVT_TEST_ETCD_H

#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

struct t_etcd {
	pid_t pid;                   /* 0: not running */
	uint16_t client_port, peer_port;
	char url[64];                /* the client URL */
	char dir[700], log[700];
};

static inline bool t_etcd_port_open(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Under CI, and under scripts/test-all (which exports KVT_REQUIRE_ETCD=1:
 * "./kvtier-dev test" installs etcd-server first), a missing etcd fails
 * the test instead of skipping its etcd part. */
static inline bool t_etcd_required(void)
{
	const char *r = getenv("KVT_REQUIRE_ETCD");
	return getenv("CI") != NULL || (r != NULL && *r != 0 && strcmp(r, "0") != 0);
}

static inline void t_etcd_init(struct t_etcd *e, const char *base)
{
	memset(e, 0, sizeof(*e));
	e->client_port = t_free_port();
	e->peer_port = t_free_port();
	snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%u", e->client_port);
	snprintf(e->dir, sizeof(e->dir), "%s/etcd", base);
	snprintf(e->log, sizeof(e->log), "%s/etcd.log", base);
}

static inline bool t_etcd_start(struct t_etcd *e)
{
	char peer[64], cluster[96];
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%u", e->peer_port);
	snprintf(cluster, sizeof(cluster), "default=%s", peer);
	e->pid = fork();
	T_ASSERT(e->pid >= 0);
	if (e->pid == 0) {
		FILE *f = freopen(e->log, "a", stdout);
		(void)f;
		dup2(1, 2);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execlp("etcd", "etcd", "--data-dir", e->dir, "--listen-client-urls", e->url,
		       "--advertise-client-urls", e->url, "--listen-peer-urls", peer,
		       "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && !t_etcd_port_open(e->client_port); i++) {
		struct timespec ts = { 0, 50 * 1000000L };
		if (waitpid(e->pid, NULL, WNOHANG) == e->pid) {
			e->pid = 0;
			return false; /* no etcd binary */
		}
		nanosleep(&ts, NULL);
	}
	T_ASSERT(t_etcd_port_open(e->client_port));
	return true;
}

static inline void t_etcd_kill(struct t_etcd *e)
{
	if (e->pid > 0) {
		kill(e->pid, SIGKILL);
		T_ASSERT(waitpid(e->pid, NULL, 0) == e->pid);
		e->pid = 0;
	}
}

#endif

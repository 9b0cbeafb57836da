/*
 * test_kvtierd_start.c - kvtierd's start-up order (doc/kvtierd.md
 * "Start-up"), with the real binary:
 *
 *   1. every listener is bound before the store is opened: with an
 *      address in use (--listen, --resp, --s3, --metrics; a live --unix
 *      socket) on a store directory holding SSD content, kvtierd exits 1
 *      naming the option and the address, and its log never says
 *      "opening the store" (no recovery, no directory lock); the time to
 *      that exit is printed next to a full start's, for the record.
 *
 * argv[1]: kvtierd.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvtier.h"
#include "server.h"
#include "t.h"

static const char *kvtierd;
static char *base;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 1 << 20);
	T_ASSERT(b != NULL);
	if (f) {
		size_t n = fread(b, 1, (1 << 20) - 1, f);
		b[n] = 0;
		fclose(f);
	}
	return b;
}

/* Run kvtierd ARGS (a shell fragment) to its exit, its log in *log and
 * its stderr in *err (freed by the caller); *ms its run time.  The exit
 * status. */
static int run(char **log, char **err, uint64_t *ms, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int run(char **log, char **err, uint64_t *ms, const char *fmt, ...)
{
	char args[2048], lp[700], ep[700], *cmd;
	va_list ap;
	uint64_t t0;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(lp, sizeof(lp), "%s/run.log", base);
	snprintf(ep, sizeof(ep), "%s/run.err", base);
	unlink(lp);
	T_ASSERT(asprintf(&cmd, "timeout 120 '%s' --log '%s' --dram 64M --set dram.prefault=off "
			  "--threads 1 %s </dev/null >'%s' 2>&1", kvtierd, lp, args, ep) > 0);
	t0 = tsrv_now_ns();
	st = system(cmd);
	if (ms)
		*ms = (tsrv_now_ns() - t0) / 1000000;
	free(cmd);
	T_ASSERT(st != -1 && WIFEXITED(st));
	*log = slurp(lp);
	if (err)
		*err = slurp(ep);
	return WEXITSTATUS(st);
}

/* A TCP socket listening on a free loopback port: "in use" for kvtierd. */
static int busy_port(unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	T_EQ_INT(listen(fd, 4), 0);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A store directory with SSD content: 256 blocks of 64 KiB put through a
 * kvtierd (ssd.admission=always: written down at put), stopped cleanly. */
static void fill_store(const char *dir)
{
	const char *extra[] = { "--set", "ssd.admission=always", NULL };
	struct kvt_ns_desc d = { .model = "start-order", .dtype = "bytes", .layout = "opaque",
				 .block_tokens = 1, .tp_size = 1, .pp_size = 1,
				 .flags = KVT_NS_PERSISTENT };
	static uint8_t v[64 << 10];
	struct iovec iov = { v, sizeof(v) };
	char addr[64];
	struct tsrv s;
	struct kvt_store *e;
	uint32_t ns;

	tsrv_start(&s, kvtierd, base, dir, NULL, extra);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	e = tsrv_engine(addr, NULL);
	T_OK(kvt_ns_register(e, &d, &ns));
	for (uint32_t i = 0; i < 256; i++) {
		struct kvt_key k;
		char name[32];
		snprintf(name, sizeof(name), "block-%u", i);
		T_OK(kvt_key_set(&k, name, strlen(name)));
		tsrv_fill(v, sizeof(v), i);
		T_OK(kvt_put(e, ns, &k, &iov, 1));
	}
	T_OK(kvt_flush(e));
	kvt_store_destroy(e);
	T_EQ_INT(tsrv_stop(&s), 0);
}

/* 1. An address in use fails the start before the store is opened. */
static void test_in_use(void)
{
	static const char *const opts[] = { "listen", "resp", "s3", "metrics" };
	char dir[700], sock[700], *log, *err;
	unsigned port;
	uint64_t ms_busy, ms_ok;
	int fd;

	snprintf(dir, sizeof(dir), "%s/store", base);
	fill_store(dir);

	fd = busy_port(&port);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char want[96], other[64] = "";
		if (strcmp(opts[i], "listen") != 0)
			snprintf(other, sizeof(other), "--%s 127.0.0.1:%u", opts[i], port);
		T_EQ_INT(run(&log, NULL, &ms_busy, "--dir '%s' --ssd 64M --set ssd.segment=4M "
			     "--listen 127.0.0.1:%u %s", dir, other[0] ? 0 : port, other), 1);
		snprintf(want, sizeof(want), "%s=127.0.0.1:%u", opts[i], port);
		T_ASSERT(strstr(log, "cannot listen") != NULL);
		T_ASSERT(strstr(log, want) != NULL);
		snprintf(want, sizeof(want), "option=--%s", opts[i]);
		T_ASSERT(strstr(log, want) != NULL);
		T_ASSERT(strstr(log, "another process listens there") != NULL);
		T_ASSERT(strstr(log, "opening the store") == NULL);
		free(log);
	}
	/* The same store started for real opens it (recovery, for the figure
	 * below) and serves; the directory was never left locked. */
	{
		struct tsrv s;
		uint64_t t0 = tsrv_now_ns();
		tsrv_start(&s, kvtierd, base, dir, NULL, NULL);
		ms_ok = (tsrv_now_ns() - t0) / 1000000;
		T_EQ_INT(tsrv_stop(&s), 0);
	}
	fprintf(stderr, "address in use: exit 1 after %llu ms; a full start of the same store: "
		"%llu ms\n", (unsigned long long)ms_busy, (unsigned long long)ms_ok);

	/* A live Unix socket is in use too. */
	{
		struct tsrv s;
		tsrv_start(&s, kvtierd, base, dir, NULL, NULL); /* listens on s.sock */
		snprintf(sock, sizeof(sock), "%s", s.sock);
		T_EQ_INT(run(&log, &err, NULL, "--dir '%s/other' --listen none --unix '%s'", base,
			     sock), 1);
		T_ASSERT(strstr(log, "cannot listen") != NULL);
		T_ASSERT(strstr(log, "option=--unix") != NULL);
		T_ASSERT(strstr(log, "opening the store") == NULL);
		free(log);
		free(err);
		T_EQ_INT(tsrv_stop(&s), 0);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_SKIP("usage: test_kvtierd_start PATH-TO-KVTIERD");
	kvtierd = argv[1];
	base = t_mkdtemp();
	test_in_use();
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	return 0;
}

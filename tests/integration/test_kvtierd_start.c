/*
 * test_kvtierd_start.c - kvtierd's start-up order (doc/kvtierd.md
 * "Start-up") and its --metrics address forms, with the real binary:
 *
 *   1. every listener is bound before the store is opened: with an
 *      address in use (--listen, --resp, --s3, --metrics; a live --unix
 *      socket) on a store directory holding SSD content, kvtierd exits 1
 *      naming the option and the address, and its log never says
 *      "opening the store" (no recovery, no directory lock); the time to
 *      that exit is printed next to a full start's, for the record;
 *   2. --metrics takes HOST:PORT and [V6]:PORT like the other listeners,
 *      and a bare port (127.0.0.1): "localhost:0" and "[::1]:0" are
 *      loopback; "0.0.0.0:0" is refused (exit 2) without --metrics-token
 *      -- before the store's directory is even created -- and served
 *      with one; --check-config agrees.
 *   3. two kvtierds started together on one port: while the first is
 *      inside its store's opening (held in an fsync by the shim
 *      shim_sync.c, argv[2]), its port bound but not listening yet, the
 *      second exits 1 "cannot listen" without opening its store (before
 *      2026-12-03 both bound with SO_REUSEADDR: the second recovered its
 *      store, then listened first and served on the first one's port);
 *      the first, let go, serves.
 *   4. refusals at start: options at fault exit 2 (an SSD tier too small
 *      for two segments, a --set value the library refuses, a listener
 *      address without a host), a --dir that is a file or a directory
 *      kvtierd may not write exits 1 with a hint naming the fix (--unix,
 *      --dir; --log on stderr, not "why is in the log").
 *   5. somebody else's --dir: a directory holding files that are not a
 *      kvtier store (a home directory) is refused, exit 2, naming it and
 *      what it holds, before anything is written there; --check-config
 *      says the same.  An empty one with a lost+found (a mount point), one
 *      holding only the files the options name there (--log), and a store
 *      with a stray file beside it start.
 *   6. --check-config checks --unix as the bind would find it: a
 *      directory that does not exist, one this user may not write, a path
 *      longer than sun_path, a file that is not a socket (until 2026-12-06
 *      it checked the length alone, and each of these passed).
 *
 * argv[1]: kvtierd; argv[2]: tests/libshim_sync.so (3. is skipped without).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
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
static unsigned run_timeout_s = 120; /* run()'s bound on kvtierd's run time */
static const char *run_as = ""; /* run()'s prefix: setpriv to another user, or "" */

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
	if (run_as[0]) { /* a log the other user may append to */
		int fd = open(lp, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		T_ASSERT(fd >= 0);
		T_EQ_INT(fchmod(fd, 0666), 0);
		close(fd);
	}
	T_ASSERT(asprintf(&cmd, "timeout %u %s '%s' --log '%s' --dram 64M --set dram.prefault=off "
			  "--threads 1 %s </dev/null >'%s' 2>&1", run_timeout_s, run_as, kvtierd, lp,
			  args, ep) > 0);
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
	/* A bare :PORT is refused with the forms it could have been, before
	 * the store is opened (not taken for every interface). */
	T_EQ_INT(run(&log, NULL, NULL, "--dir '%s' --insecure --listen :%u", dir, port), 2); /* usage */
	T_ASSERT(strstr(log, "cannot listen") != NULL);
	T_ASSERT(strstr(log, "0.0.0.0:7000 for every interface") != NULL);
	T_ASSERT(strstr(log, "opening the store") == NULL);
	free(log);
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

/* 4. What a first start gets wrong says what to do, and exits 2 when the
 * options are at fault (a restart cannot help; --check-config says 2 too),
 * 1 when the machine is: a --ssd too small for two segments and a --set
 * value the library refuses exited 1 (so systemd restarted them every 2 s);
 * a --unix socket in a directory kvtierd may not write was told "ports
 * below 1024 need root"; a --dir it may not write said only "Permission
 * denied"; a --log it may not open was followed by "why is in the log",
 * that log.  The permission cases run as uid 65534 (setpriv) when the test
 * runs as root, whom permissions do not stop. */
static void test_refusals(void)
{
	char ro[700], *log, *err;

	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/small' --ssd 100M --listen 127.0.0.1:0", base),
		 2);
	T_ASSERT(strstr(log, "--ssd must hold two ssd.segment") != NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/small' --ssd 0 --listen 127.0.0.1:0 "
		     "--set ssd.admission=sometimes", base), 2);
	T_ASSERT(strstr(log, "bad --set") != NULL);
	T_ASSERT(strstr(log, "kvtier options lists") != NULL);
	free(log);
	free(err);
	/* A listener address without a host names its option, and makes an
	 * example of the port only when it is one ("e.g. 127.0.0.1:6379x"). */
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/small' --ssd 0 --resp 6379x", base), 2);
	T_ASSERT(strstr(err, "--resp: '6379x' is not HOST:PORT") != NULL);
	T_ASSERT(strstr(err, "127.0.0.1:6379x") == NULL);
	free(log);
	free(err);

	/* A member listed twice is named (it said "a member is listed
	 * twice", which left a colliding test to guess which). */
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/small' --ssd 0 --listen 127.0.0.1:0 "
		     "--members 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7001", base), 2);
	T_ASSERT(strstr(err, "member 127.0.0.1:7001 is listed twice") != NULL);
	free(log);
	free(err);

	/* A --dir that is a file says so. */
	snprintf(ro, sizeof(ro), "%s/afile", base);
	tsrv_write_file(base, "afile", "not a directory\n");
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s' --ssd 0 --listen 127.0.0.1:0", ro), 1);
	T_ASSERT(strstr(log, "is a file: give a directory") != NULL);
	free(log);
	free(err);

	snprintf(ro, sizeof(ro), "%s/readonly", base);
	T_EQ_INT(mkdir(ro, 0555), 0);
	T_EQ_INT(chmod(ro, 0555), 0);
	if (geteuid() == 0) {
		char *probe;
		int st;
		T_EQ_INT(chmod(base, 0755), 0); /* the other user reaches the log */
		run_as = "setpriv --reuid=65534 --regid=65534 --clear-groups";
		/* A build tree the other user cannot reach (a 0700 home) leaves
		 * nobody to be refused: said, not failed. */
		T_ASSERT(asprintf(&probe, "%s '%s' --version >/dev/null 2>&1", run_as, kvtierd) > 0);
		st = system(probe);
		free(probe);
		if (st != 0) {
			fprintf(stderr, "refusals: uid 65534 cannot run %s: permission cases not "
				"run\n", kvtierd);
			run_as = "";
			return;
		}
	}
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/d' --ssd 0 --listen 127.0.0.1:0 --unix '%s/s.sock'",
		     ro, ro), 1);
	T_ASSERT(strstr(log, "cannot listen") != NULL && strstr(log, "option=--unix") != NULL);
	T_ASSERT(strstr(log, "cannot create the socket file") != NULL);
	T_ASSERT(strstr(log, "ports below 1024") == NULL);
	T_ASSERT(strstr(log, "opening the store") == NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/d' --ssd 0 --listen 127.0.0.1:0", ro), 1);
	T_ASSERT(strstr(log, "cannot create the store directory") != NULL);
	T_ASSERT(strstr(log, "uid=") != NULL && strstr(log, "chown the directory") != NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s/d' --ssd 0 --listen 127.0.0.1:0 --log '%s/k.log'",
		     base, ro), 1);
	T_ASSERT(strstr(err, "--log") != NULL && strstr(err, "create and append") != NULL);
	T_ASSERT(strstr(err, "why is in the log") == NULL);
	free(log);
	free(err);
	run_as = "";
	fprintf(stderr, "refusals: exit 2 for the options, 1 with a hint for permissions\n");
}

/* 2. --metrics forms. */
static uint16_t metrics_line(const char *log, char *host, size_t cap)
{
	char *t = slurp(log);
	const char *p = strstr(t, "metrics listener on ");
	unsigned port = 0;
	T_ASSERT(p != NULL);
	p += strlen("metrics listener on ");
	const char *colon = strchr(p, '"');
	T_ASSERT(colon != NULL);
	while (colon > p && colon[-1] != ':')
		colon--;
	T_ASSERT(colon > p && (size_t)(colon - p) < cap);
	snprintf(host, cap, "%.*s", (int)(colon - p - 1), p);
	port = (unsigned)atoi(colon);
	free(t);
	return (uint16_t)port;
}

static void test_metrics_forms(void)
{
	char dir[700], tok[700], host[128], *log, *err;
	struct tsrv s;
	uint16_t port;

	/* A bare port: 127.0.0.1; /healthz answers there. */
	snprintf(dir, sizeof(dir), "%s/m1", base);
	tsrv_start(&s, kvtierd, base, dir, NULL, (const char *[]){ "--metrics", "0", NULL });
	port = metrics_line(s.log, host, sizeof(host));
	T_EQ_STR(host, "127.0.0.1");
	{
		int code;
		char *r = tsrv_http_get(port, "/healthz", NULL, &code);
		T_EQ_INT(code, 200);
		free(r);
	}
	T_EQ_INT(tsrv_stop(&s), 0);
	/* localhost:PORT: loopback, no token needed. */
	tsrv_start(&s, kvtierd, base, dir, NULL, (const char *[]){ "--metrics", "localhost:0", NULL });
	metrics_line(s.log, host, sizeof(host));
	T_ASSERT(strcmp(host, "127.0.0.1") == 0 || strcmp(host, "[::1]") == 0);
	T_EQ_INT(tsrv_stop(&s), 0);

	/* [V6]:PORT, where this host has IPv6 loopback (::1 on lo). */
	char *v6 = slurp("/proc/net/if_inet6");
	bool has_v6 = strstr(v6, "00000000000000000000000000000001") != NULL;
	free(v6);
	if (has_v6) {
		tsrv_start(&s, kvtierd, base, dir, NULL,
			   (const char *[]){ "--metrics", "[::1]:0", NULL });
		metrics_line(s.log, host, sizeof(host));
		T_EQ_STR(host, "[::1]");
		T_EQ_INT(tsrv_stop(&s), 0);
	}

	/* Off loopback without a token: exit 2 before the store directory is
	 * created; --check-config says the same. */
	snprintf(dir, sizeof(dir), "%s/never-made", base);
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s' --listen 127.0.0.1:0 --metrics 0.0.0.0:0", dir),
		 2);
	T_ASSERT(strstr(err, "--metrics-token") != NULL);
	T_ASSERT(strstr(log, "opening the store") == NULL);
	free(log);
	free(err);
	{
		struct stat st;
		T_ASSERT(stat(dir, &st) < 0);
	}
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --metrics 0.0.0.0:9464",
		     dir), 2);
	T_ASSERT(strstr(err, "--metrics-token") != NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --metrics 9464", dir), 0);
	T_ASSERT(strstr(err, "configuration OK") != NULL);
	free(log);
	free(err);
	/* With a token it is served there. */
	snprintf(tok, sizeof(tok), "%s/metrics.token", base);
	tsrv_write_file(base, "metrics.token", "start-order-token-0123456789\n");
	T_EQ_INT(chmod(tok, 0600), 0);
	snprintf(dir, sizeof(dir), "%s/m2", base);
	tsrv_start(&s, kvtierd, base, dir, NULL,
		   (const char *[]){ "--metrics", "0.0.0.0:0", "--metrics-token", tok, NULL });
	metrics_line(s.log, host, sizeof(host));
	T_EQ_STR(host, "0.0.0.0");
	T_EQ_INT(tsrv_stop(&s), 0);
}

/* 5. Somebody else's --dir.  Before 2026-12-06 kvtierd --dir ~ wrote its
 * LOCK, namespaces and ssd/ among the user's files. */
static void test_foreign_dir(void)
{
	char home[700], mnt[700], path[800], store[700], *log, *err;
	const char *names[] = { ".bashrc", "notes.txt", "photos", "a", "b" };
	struct stat st;
	struct tsrv s;

	snprintf(home, sizeof(home), "%s/home", base);
	T_EQ_INT(mkdir(home, 0700), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		tsrv_write_file(home, names[i], "the user's\n");
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s' --ssd 0 --listen 127.0.0.1:0", home), 2);
	snprintf(path, sizeof(path), "--dir %s is not empty and not a kvtier store (it holds ",
		 home);
	T_ASSERT(strstr(err, path) != NULL);
	T_ASSERT(strstr(err, " and 2 more)") != NULL);
	T_ASSERT(strstr(err, "give a new or empty directory") != NULL);
	T_ASSERT(strstr(log, "store directory refused") != NULL);
	T_ASSERT(strstr(log, "opening the store") == NULL);
	free(log);
	free(err);
	for (size_t i = 0; i < 3; i++) {
		static const char *const made[] = { "LOCK", "namespaces", "ssd" };
		snprintf(path, sizeof(path), "%s/%s", home, made[i]);
		T_ASSERT(stat(path, &st) < 0);
	}
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s'", home), 2);
	T_ASSERT(strstr(err, "is not empty and not a kvtier store") != NULL);
	free(log);
	free(err);

	/* A mount point (lost+found only), its first start logging there:
	 * the directory check lets it by, and the start goes on to its next
	 * refusal (an --ssd of one segment, here). */
	snprintf(mnt, sizeof(mnt), "%s/mnt", base);
	T_EQ_INT(mkdir(mnt, 0700), 0);
	snprintf(path, sizeof(path), "%s/lost+found", mnt);
	T_EQ_INT(mkdir(path, 0700), 0);
	T_EQ_INT(run(&log, &err, NULL, "--dir '%s' --log '%s/kvtierd.log' --ssd 64M "
		     "--set ssd.segment=64M --listen 127.0.0.1:0", mnt, mnt), 2);
	free(log);
	snprintf(path, sizeof(path), "%s/kvtierd.log", mnt);
	log = slurp(path);
	T_ASSERT(strstr(log, "--ssd must hold two ssd.segment") != NULL);
	T_ASSERT(strstr(log, "store directory refused") == NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --log '%s/kvtierd.log'",
		     mnt, mnt), 0);
	free(log);
	free(err);

	/* A store is a store with a stray file beside it. */
	snprintf(store, sizeof(store), "%s/m1", base); /* test_metrics_forms' */
	tsrv_write_file(store, "README", "an operator's note\n");
	tsrv_start(&s, kvtierd, base, store, NULL, NULL);
	T_EQ_INT(tsrv_stop(&s), 0);
	fprintf(stderr, "foreign --dir: refused with exit 2; a mount point and a store start\n");
}

/* 6. --check-config and --unix. */
static void test_check_unix(void)
{
	char dir[700], path[800], lng[300], *log, *err;

	snprintf(dir, sizeof(dir), "%s/cu", base);
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --unix '%s/cu.sock'",
		     dir, base), 0);
	T_ASSERT(strstr(err, "configuration OK") != NULL);
	free(log);
	free(err);
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --unix '%s/nodir/s.sock'",
		     dir, base), 2);
	snprintf(path, sizeof(path), "--unix %s/nodir/s.sock: its directory %s/nodir: No such "
		 "file or directory: create it", base, base);
	T_ASSERT(strstr(err, path) != NULL);
	free(log);
	free(err);
	memset(lng, 'x', 120);
	lng[120] = 0;
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --unix '%s/%s'", dir,
		     base, lng), 2);
	T_ASSERT(strstr(err, "longer than a socket path may be (107)") != NULL);
	free(log);
	free(err);
	tsrv_write_file(base, "plain", "a file\n");
	T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --unix '%s/plain'", dir,
		     base), 2);
	T_ASSERT(strstr(err, "not a socket") != NULL);
	free(log);
	free(err);
	snprintf(path, sizeof(path), "%s/cu-ro", base);
	T_EQ_INT(mkdir(path, 0555), 0);
	if (geteuid() != 0) { /* root writes anywhere */
		T_EQ_INT(run(&log, &err, NULL, "--check-config /dev/null --dir '%s' --unix "
			     "'%s/s.sock'", dir, path), 2);
		T_ASSERT(strstr(err, "cannot create the socket in") != NULL);
		free(log);
		free(err);
	}
	fprintf(stderr, "check-config --unix: directory, length and file kind checked\n");
}

/* 3. Two kvtierds started together on one port. */
static bool wait_file(const char *path, unsigned ms)
{
	for (unsigned i = 0; i < ms / 10; i++) {
		if (access(path, F_OK) == 0)
			return true;
		tsrv_sleep_ms(10);
	}
	return false;
}

static void test_together(const char *shim)
{
	char gate[700], file[760], dir[700], alog[700], port_s[16], want[96], *log;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	uint64_t ms;
	unsigned port;
	pid_t pid;
	int fd, st;

	if (!shim || access(shim, R_OK) != 0) {
		fprintf(stderr, "together: skipped (no shim_sync)\n");
		return;
	}
	/* A free port, given to both by number. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	port = ntohs(a.sin_port);
	close(fd);
	snprintf(port_s, sizeof(port_s), "127.0.0.1:%u", port);
	snprintf(gate, sizeof(gate), "%s/gate", base);
	T_EQ_INT(mkdir(gate, 0700), 0);
	snprintf(file, sizeof(file), "%s/arm", gate);
	tsrv_write_file(NULL, file, "");
	snprintf(dir, sizeof(dir), "%s/first", base);
	snprintf(alog, sizeof(alog), "%s/first.log", base);
	/* The first: held in the fsync of its new SSD tier's id file
	 * (inside the store's opening, after the bind, before listen()). */
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		tsrv_shim_arm(shim, gate, "id.");
		/* an SSD tier whatever the disk's free space: its id file is
		 * what the shim holds */
		execl(kvtierd, kvtierd, "--dir", dir, "--log", alog, "--listen", port_s, "--dram",
		      "64M", "--set", "dram.prefault=off", "--ssd", "64M", "--set",
		      "ssd.segment=4M", "--threads", "1", (char *)NULL);
		_exit(127);
	}
	snprintf(file, sizeof(file), "%s/entered", gate);
	T_ASSERT(wait_file(file, 30000));
	/* The second, on another store: its bind fails at once.  (Before,
	 * it served: bounded to 30 s here.) */
	run_timeout_s = 30;
	st = run(&log, NULL, &ms, "--dir '%s/second' --listen %s", base, port_s);
	run_timeout_s = 120;
	fprintf(stderr, "together: the second kvtierd exits %d after %llu ms\n", st,
		(unsigned long long)ms);
	T_EQ_INT(st, 1);
	T_ASSERT(strstr(log, "cannot listen") != NULL);
	snprintf(want, sizeof(want), "listen=%s", port_s);
	T_ASSERT(strstr(log, want) != NULL);
	T_ASSERT(strstr(log, "opening the store") == NULL);
	free(log);
	/* The first, let go, listens there and serves. */
	snprintf(file, sizeof(file), "%s/release", gate);
	tsrv_write_file(NULL, file, "");
	{
		uint64_t end = tsrv_now_ns() + 30000000000ull;
		bool up = false;
		while (!up && tsrv_now_ns() < end) {
			char *t = slurp(alog);
			up = strstr(t, "listening on") != NULL;
			free(t);
			if (!up)
				tsrv_sleep_ms(20);
		}
		T_ASSERT(up);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	a.sin_port = htons((uint16_t)port);
	T_EQ_INT(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	T_EQ_INT(kill(pid, SIGTERM), 0);
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_SKIP("usage: test_kvtierd_start PATH-TO-KVTIERD");
	kvtierd = argv[1];
	base = t_mkdtemp();
	test_in_use();
	test_metrics_forms();
	test_together(argc > 2 ? argv[2] : NULL);
	test_refusals();
	test_foreign_dir();
	test_check_unix();
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	return 0;
}

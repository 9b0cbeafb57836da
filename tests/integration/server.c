/*
 * server.c - start and stop a real kvtierd for a test, and read its
 * HTTP listeners (server.h).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server.h"
#include "t.h"
#include "tstore.h"

#define TSRV_MAX 16
static pid_t running[TSRV_MAX]; /* servers to kill if the test fails */
static int log_seq;

static void kill_running(void)
{
	for (int i = 0; i < TSRV_MAX; i++) {
		if (running[i] > 0) {
			kill(running[i], SIGKILL);
			waitpid(running[i], NULL, 0);
			running[i] = 0;
		}
	}
}

static void track(pid_t old, pid_t now)
{
	for (int i = 0; i < TSRV_MAX; i++) {
		if (running[i] == old) {
			running[i] = now;
			return;
		}
	}
}

void tsrv_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

uint16_t tsrv_log_port(const char *log, const char *pat)
{
	for (int i = 0; i < 600; i++) {
		char line[512];
		FILE *f = fopen(log, "r");
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, pat);
			if (p) {
				fclose(f);
				return (uint16_t)atoi(p + strlen(pat));
			}
		}
		if (f)
			fclose(f);
		tsrv_sleep_ms(50);
	}
	T_FAIL("no line with '%s' in %s", pat, log);
	return 0;
}

uint16_t tsrv_listener_port(const char *log, const char *what)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "%s listener on 127.0.0.1:", what);
	return tsrv_log_port(log, pat);
}

uint16_t tsrv_s3_port(const char *log)
{
	return tsrv_listener_port(log, "S3");
}

struct kvt_store *tsrv_store(const char *const *a, const char *const *b, kvt_log_fn log)
{
	const char *const *lists[] = { a, b };
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	if (log)
		T_OK(kvt_store_set_log(s, log, NULL, KVT_LOG_WARN));
	for (int l = 0; l < 2; l++)
		for (const char *const *o = lists[l]; o && *o; o += 2) {
			int r = kvt_store_set_option(s, o[0], o[1]);
			if (r < 0)
				T_FAIL("option %s=%s: %s", o[0], o[1], kvt_strerror(r));
		}
	T_OK(kvt_store_open(s));
	return s;
}

struct kvt_store *tsrv_engine(const char *addr, const char *const *opts)
{
	const char *base[] = { "dram.capacity", "64M", "dram.chunk", "4K", "dram.prefault", "off",
			       "remote.addr", addr, NULL };
	struct kvt_store *s = tsrv_store(base, opts, NULL);
	for (int i = 0; i < 1000 && t_stat(s, "remote.conns_up") == 0; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(t_stat(s, "remote.conns_up") > 0);
	return s;
}

void tsrv_start(struct tsrv *s, const char *bin, const char *base, const char *dir,
		const char *tenants, const char *const *extra)
{
	static bool registered;
	const char *argv[64];
	const char *io = getenv("KVT_TEST_IO");
	char io_opt[64];
	int n = 0;

	if (!registered) {
		atexit(kill_running);
		registered = true;
	}
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	snprintf(s->log, sizeof(s->log), "%s/kvtierd-%d.log", base, ++log_seq);
	snprintf(s->sock, sizeof(s->sock), "%s/kvtierd.sock", base);
	if (strlen(s->sock) >= 100) /* sun_path is 108 bytes */
		snprintf(s->sock, sizeof(s->sock), "/tmp/kvtierd-test-%d.sock", (int)getpid());
	argv[n++] = bin;
	argv[n++] = "--dir";
	argv[n++] = dir;
	argv[n++] = "--dram";
	argv[n++] = "64M";
	argv[n++] = "--ssd";
	argv[n++] = "64M";
	argv[n++] = "--set";
	argv[n++] = "ssd.segment=4M";
	argv[n++] = "--set";
	argv[n++] = "dram.prefault=off";
	if (io && *io) {
		snprintf(io_opt, sizeof(io_opt), "ssd.io=%s", io);
		argv[n++] = "--set";
		argv[n++] = io_opt;
	}
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--unix";
	argv[n++] = s->sock;
	argv[n++] = "--threads";
	argv[n++] = "2";
	if (tenants) {
		argv[n++] = "--tenants";
		argv[n++] = tenants;
	}
	argv[n++] = "--log";
	argv[n++] = s->log;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	for (int i = 0; extra && extra[i] && n < 63; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	s->pid = fork();
	if (s->pid < 0)
		T_FAIL("fork: %s", strerror(errno));
	if (s->pid == 0) {
		char out[700];
		int fd;
		snprintf(out, sizeof(out), "%s.stderr", s->log);
		fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	track(0, s->pid);
	for (int waited = 0; waited < 60000; waited += 50) {
		char buf[65536];
		int st, fd = open(s->log, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t r = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (r > 0) {
				const char *p;
				buf[r] = 0;
				p = strstr(buf, "listening on 127.0.0.1:");
				if (p && strstr(buf, "listening on unix:")) {
					s->port = (uint16_t)atoi(p + strlen("listening on 127.0.0.1:"));
					T_ASSERT(s->port != 0);
					return;
				}
			}
		}
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			T_FAIL("kvtierd exited during startup (status 0x%x); log %s", st, s->log);
		tsrv_sleep_ms(50);
	}
	T_FAIL("kvtierd did not start listening within 60 s; log %s", s->log);
}

int tsrv_wait_exit(struct tsrv *s, int timeout_ms)
{
	int st;
	for (int waited = 0; waited <= timeout_ms; waited += 20) {
		pid_t r = waitpid(s->pid, &st, WNOHANG);
		if (r == s->pid) {
			track(s->pid, 0);
			s->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		tsrv_sleep_ms(20);
	}
	T_FAIL("kvtierd %d did not exit within %d ms", (int)s->pid, timeout_ms);
}

int tsrv_stop(struct tsrv *s)
{
	int st;
	kill(s->pid, SIGTERM);
	if (waitpid(s->pid, &st, 0) != s->pid)
		T_FAIL("waitpid: %s", strerror(errno));
	track(s->pid, 0);
	s->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tsrv_kill9(struct tsrv *s)
{
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	track(s->pid, 0);
	s->pid = 0;
}

void tsrv_check_reports(const char *base)
{
	static const char *const marks[] = { "AddressSanitizer", "LeakSanitizer",
					     "ThreadSanitizer", "runtime error:", NULL };
	static char buf[1 << 16];
	char pat[700];
	glob_t g = { 0 };
	bool bad = false;

	snprintf(pat, sizeof(pat), "%s/*.stderr", base);
	if (glob(pat, 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		size_t n;
		if (!f)
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		for (int m = 0; marks[m]; m++) {
			if (strstr(buf, marks[m])) {
				fprintf(stderr, "%s: sanitizer report:\n%s\n", g.gl_pathv[i], buf);
				bad = true;
				break;
			}
		}
	}
	globfree(&g);
	if (bad)
		T_FAIL("kvtierd reported sanitizer errors (above)");
}

/*
 * kill(SIGSTOP) returns before every thread of the target has stopped: a
 * loop thread still running can answer one more request.  Wait until
 * /proc shows each thread stopped ('T').
 */
void tsrv_wait_stopped(pid_t pid)
{
	for (int tries = 0; tries < 500; tries++) {
		char path[64], line[512];
		bool all = true;
		DIR *d;
		struct dirent *e;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		T_ASSERT(d);
		while ((e = readdir(d))) {
			char sp[600];
			FILE *f;
			const char *rp;
			if (e->d_name[0] == '.')
				continue;
			snprintf(sp, sizeof(sp), "%s/%s/stat", path, e->d_name);
			f = fopen(sp, "r");
			if (!f)
				continue;
			if (fgets(line, sizeof(line), f) && (rp = strrchr(line, ')')) && rp[1] == ' ' &&
			    rp[2] != 'T' && rp[2] != 't')
				all = false;
			fclose(f);
		}
		closedir(d);
		if (all)
			return;
		tsrv_sleep_ms(2);
	}
	T_FAIL("process %d did not stop after SIGSTOP", (int)pid);
}

uint64_t tsrv_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tsrv_rss(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

void *tsrv_rss_thread(void *arg)
{
	struct tsrv_rss_watch *w = arg;

	while (!atomic_load(w->stop)) {
		uint64_t r = tsrv_rss(w->srv->pid);
		if (r > atomic_load(w->max))
			atomic_store(w->max, r);
		tsrv_sleep_ms(20);
	}
	return NULL;
}

void tsrv_fill(uint8_t *b, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
}

void tsrv_write_file(const char *dir, const char *name, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs(text, f);
	T_EQ_INT(fclose(f), 0);
	T_EQ_INT(chmod(path, 0600), 0);
}

char *tsrv_talk(uint16_t port, const void *req, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t r;

	T_ASSERT(fd >= 0 && buf);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_EQ_INT(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	T_EQ_INT(write(fd, req, len), (ssize_t)len);
	while ((r = read(fd, buf + got, cap - got - 1)) > 0) {
		got += (size_t)r;
		if (cap - got < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			T_ASSERT(buf);
		}
	}
	close(fd);
	buf[got] = 0;
	return buf;
}

char *tsrv_http_get(uint16_t port, const char *path, const char *token, int *code)
{
	char req[512], *buf;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\n%s%s%sUser-Agent: t\r\n\r\n",
		 path, token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
	buf = tsrv_talk(port, req, strlen(req));
	T_ASSERT(sscanf(buf, "HTTP/1.1 %d", code) == 1);
	return buf;
}

char *tsrv_http_body(uint16_t port, const char *path)
{
	int code = 0;
	char *buf = tsrv_http_get(port, path, NULL, &code), *body;
	T_EQ_INT(code, 200);
	T_ASSERT((body = strstr(buf, "\r\n\r\n")));
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return buf;
}

uint64_t tsrv_metric(const char *page, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = page; (p = strstr(p, series)); p += n)
		if ((p == page || p[-1] == '\n') && p[n] == ' ')
			return strtoull(p + n + 1, NULL, 10);
	T_FAIL("no sample %s on the page", series);
}

int tsrv_run_phase(const char *prog, int argc, char **argv, const struct tsrv_phase *phases,
		   size_t n, char *base, size_t base_len)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *phase = argc > 2 ? argv[2] : "";

	signal(SIGPIPE, SIG_IGN);
	snprintf(base, base_len, "%s/%s.XXXXXX", tmp, prog);
	T_ASSERT(mkdtemp(base));
	for (size_t i = 0; i < n; i++)
		if (strcmp(phase, phases[i].name) == 0) {
			phases[i].run();
			tsrv_check_reports(base);
			t_rmtree(base);
			printf("%s: ok\n", phase);
			return 0;
		}
	t_rmtree(base);
	fprintf(stderr, "usage: %s KVTIERD PHASE\n", prog);
	return 2;
}

void tsrv_shim_arm(const char *shim, const char *gate, const char *name)
{
	char asan[1200];

	T_ASSERT(shim != NULL && access(shim, R_OK) == 0);
	snprintf(asan, sizeof(asan), "%s:verify_asan_link_order=0",
		 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "");
	setenv("ASAN_OPTIONS", asan, 1);
	setenv("LD_PRELOAD", shim, 1);
	setenv("KVT_SHIM_SYNC_NAME", name, 1);
	setenv("KVT_SHIM_SYNC_DIR", gate, 1);
}

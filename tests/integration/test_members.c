/*
 * test_members.c - kvtierd's cluster membership (daemon/members.c,
 * doc/members.md) against a real etcd (Debian's etcd-server)
 * on loopback, and a static --members list.
 *
 *   three servers register in etcd and each lists all three;
 *   kill -9 one: the others drop it once its lease runs out;
 *   etcd killed: the list is kept, STATS says etcd is down;
 *   etcd back: up again, same list;
 *   SIGTERM one: it revokes its lease and the other drops it at once;
 *   --members: the static list as given, with weights;
 *   usage errors: --members with --etcd, --etcd on a wildcard address
 *   without --advertise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "etcd.h"
#include "t.h"

static const char *kvtierd_bin, *base;
static struct t_etcd etcd;
static char member_base[3][700];
static unsigned member_count;

static void etcd_atexit(void)
{
	t_etcd_kill(&etcd);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* etcd on loopback, its data kept across restarts. */
static void etcd_start(void)
{
	T_ASSERT(t_etcd_start(&etcd));
}

static void etcd_kill(void)
{
	t_etcd_kill(&etcd);
}

/* Each server under base/NAME (its own socket and logs), data in
 * base/NAME/data. */
static void start_member(struct tsrv *s, const char *name, unsigned ttl)
{
	char dir[800], ttl_s[16], *mine = member_base[member_count++ % 3];
	const char *extra[] = { "--etcd", etcd.url, "--etcd-ttl", ttl_s, "--ssd", "0", NULL };

	snprintf(ttl_s, sizeof(ttl_s), "%u", ttl);
	snprintf(mine, 700, "%s/%s", base, name);
	T_EQ_INT(mkdir(mine, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/data", mine);
	T_EQ_INT(mkdir(dir, 0700), 0);
	tsrv_start(s, kvtierd_bin, mine, dir, NULL, extra);
}

static uint64_t members_of(struct tsrv *s)
{
	struct kc c;
	uint64_t n = 0;

	T_EQ_INT(kc_connect_tcp(&c, s->port), 0);
	T_EQ_INT(kc_login(&c, "default", NULL), 0);
	T_EQ_INT(kc_stat(&c, PROTO_SCOPE_TENANT, "cluster.members", &n), 0);
	kc_close(&c);
	return n;
}

static void text_of(struct tsrv *s, const char *name, char *out, size_t len)
{
	struct kc c;

	T_EQ_INT(kc_connect_tcp(&c, s->port), 0);
	T_EQ_INT(kc_login(&c, "default", NULL), 0);
	T_EQ_INT(kc_stat_text(&c, PROTO_SCOPE_TENANT, name, out, len), 0);
	kc_close(&c);
}

/* Seconds until s lists want members (fails after limit seconds). */
static double wait_members(struct tsrv *s, uint64_t want, double limit)
{
	double t0 = now_s();
	uint64_t n = 0;

	while (now_s() - t0 < limit) {
		n = members_of(s);
		if (n == want)
			return now_s() - t0;
		tsrv_sleep_ms(50);
	}
	fprintf(stderr, "server on %u lists %llu members, want %llu\n", s->port,
		(unsigned long long)n, (unsigned long long)want);
	T_ASSERT(!"membership did not converge");
	return limit;
}

static double wait_etcd_state(struct tsrv *s, const char *want, double limit)
{
	double t0 = now_s();
	char v[32] = "";

	while (now_s() - t0 < limit) {
		text_of(s, "cluster.etcd", v, sizeof(v));
		if (strcmp(v, want) == 0)
			return now_s() - t0;
		tsrv_sleep_ms(50);
	}
	fprintf(stderr, "cluster.etcd is '%s', want '%s'\n", v, want);
	T_ASSERT(!"etcd state did not change");
	return limit;
}

static bool log_has(const struct tsrv *s, const char *what)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(s->log, "r");

	T_ASSERT(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

static void test_etcd(void)
{
	struct tsrv a, b, c;
	char want[64], got[300];
	double t;

	t_etcd_init(&etcd, base);
	atexit(etcd_atexit);
	etcd_start();

	start_member(&a, "a", 2);
	start_member(&b, "b", 2);
	start_member(&c, "c", 2);
	t = wait_members(&a, 3, 10);
	wait_members(&b, 3, 10);
	wait_members(&c, 3, 10);
	printf("three servers list each other after %.2f s\n", t);
	/* Each entry is "HOST:PORT WEIGHT", the weight the server's capacity
	 * (64 MiB of DRAM, no SSD); all three ports are there. */
	{
		char all[1024] = "";
		const struct tsrv *ss[3] = { &a, &b, &c };
		for (unsigned i = 0; i < 3; i++) {
			char name[32];
			snprintf(name, sizeof(name), "cluster.member.%u", i);
			text_of(&a, name, got, sizeof(got));
			T_ASSERT(strstr(got, " 67108864") != NULL);
			strcat(all, got);
			strcat(all, ";");
		}
		for (unsigned i = 0; i < 3; i++) {
			snprintf(want, sizeof(want), "127.0.0.1:%u 67108864;", ss[i]->port);
			T_ASSERT(strstr(all, want) != NULL);
		}
	}
	text_of(&a, "cluster.source", got, sizeof(got));
	T_EQ_STR(got, "etcd");
	text_of(&a, "cluster.etcd", got, sizeof(got));
	T_EQ_STR(got, "up");

	/* kill -9: dropped once its 2 s lease runs out (not before ~1 s). */
	tsrv_kill9(&c);
	t = wait_members(&a, 2, 8);
	wait_members(&b, 2, 8);
	printf("a killed server dropped after %.2f s (lease 2 s)\n", t);
	T_ASSERT(t > 0.5);

	/* etcd down: the last list stays, and says so. */
	etcd_kill();
	t = wait_etcd_state(&a, "down", 6);
	printf("etcd down noticed after %.2f s\n", t);
	T_EQ_U64(members_of(&a), 2);
	T_EQ_U64(members_of(&b), 2);
	T_ASSERT(log_has(&a, "etcd unreachable; keeping the last known membership"));

	/* etcd back (same data): up again; leases that ran out meanwhile are
	 * granted again, so the list is whole. */
	etcd_start();
	wait_etcd_state(&a, "up", 10);
	wait_members(&a, 2, 10);
	wait_members(&b, 2, 10);

	/* SIGTERM revokes the lease: the other drops it well within the TTL. */
	T_EQ_INT(tsrv_stop(&b), 0);
	t = wait_members(&a, 1, 1.5);
	printf("a stopped server dropped after %.2f s (revoked)\n", t);
	T_ASSERT(log_has(&b, "left the cluster: etcd lease revoked"));

	T_EQ_INT(tsrv_stop(&a), 0);
	etcd_kill();
}

static void test_static(void)
{
	struct tsrv s;
	char dir[700], got[300];
	const char *extra[] = { "--members", "10.0.0.2:7000, 10.0.0.1:7000=64G", NULL };

	snprintf(dir, sizeof(dir), "%s/static", base);
	T_EQ_INT(mkdir(dir, 0700), 0);
	tsrv_start(&s, kvtierd_bin, base, dir, NULL, extra);
	T_EQ_U64(members_of(&s), 2);
	text_of(&s, "cluster.source", got, sizeof(got));
	T_EQ_STR(got, "static");
	text_of(&s, "cluster.member.0", got, sizeof(got));
	T_EQ_STR(got, "10.0.0.1:7000 68719476736");
	text_of(&s, "cluster.member.1", got, sizeof(got));
	T_EQ_STR(got, "10.0.0.2:7000 1");
	T_EQ_INT(tsrv_stop(&s), 0);
}

/* kvtierd with args; its exit status and stderr (into err). */
static int run_status(const char *const *args, char *err, size_t err_len)
{
	const char *argv[24];
	char out[700];
	pid_t pid;
	int n = 0, st;
	FILE *f;
	size_t got;

	argv[n++] = kvtierd_bin;
	for (int i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/usage.out", base);
	pid = fork();
	if (pid == 0) {
		FILE *o = freopen(out, "w", stderr);
		(void)o;
		execv(kvtierd_bin, (char *const *)argv);
		_exit(127);
	}
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	f = fopen(out, "r");
	T_ASSERT(f);
	got = fread(err, 1, err_len - 1, f);
	err[got] = 0;
	fclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_usage(void)
{
	char dir[700], err[4096];
	const char *both[] = { "--dir", dir, "--ssd", "0", "--dram", "16M", "--listen",
			       "127.0.0.1:0", "--members", "10.0.0.1:7000", "--etcd",
			       "http://127.0.0.1:1", NULL };
	const char *wild[] = { "--dir", dir, "--ssd", "0", "--dram", "16M", "--listen",
			       "0.0.0.0:0", "--insecure", "--etcd", "http://127.0.0.1:1", NULL };
	const char *badlist[] = { "--dir", dir, "--ssd", "0", "--dram", "16M", "--listen",
				  "127.0.0.1:0", "--members", "10.0.0.1", NULL };
	const char *badttl[] = { "--etcd-ttl", "1", NULL };

	snprintf(dir, sizeof(dir), "%s/usage", base);
	T_EQ_INT(run_status(both, err, sizeof(err)), 2);
	T_ASSERT(strstr(err, "--members and --etcd exclude each other") != NULL);
	T_EQ_INT(run_status(wild, err, sizeof(err)), 2);
	T_ASSERT(strstr(err, "needs --advertise") != NULL);
	T_EQ_INT(run_status(badlist, err, sizeof(err)), 2);
	T_ASSERT(strstr(err, "'10.0.0.1' is not HOST:PORT") != NULL);
	T_EQ_INT(run_status(badttl, err, sizeof(err)), 2);
	T_ASSERT(strstr(err, "--etcd-ttl: '1' is not a number of seconds") != NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_SKIP("usage: test_members PATH-TO-KVTIERD");
	kvtierd_bin = argv[1];
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	test_usage();
	test_static();
	if (system("etcd --version > /dev/null 2>&1") != 0) {
		/* CI and scripts/test-all install etcd-server (scripts/deps.txt). */
		if (t_etcd_required())
			T_FAIL("no etcd, and KVT_REQUIRE_ETCD or CI is set: scripts/install-deps "
			       "installs etcd-server (scripts/deps.txt)");
		fprintf(stderr, "etcd is not installed (Debian: etcd-server): skipping the etcd part\n");
		tsrv_check_reports(base);
		t_rmtree(base);
		return 77;
	}
	test_etcd();
	for (unsigned i = 0; i < member_count && i < 3; i++)
		tsrv_check_reports(member_base[i]);
	tsrv_check_reports(base);
	t_rmtree(base);
	printf("test_members: ok\n");
	return 0;
}

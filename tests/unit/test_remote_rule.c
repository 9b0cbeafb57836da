/*
 * test_remote_rule.c - the remote tier's pool and striping rule
 * (remote_rule_*, remote.c; doc/remote.md "Connections, batching,
 * pipelining"): each choice the documentation names, at its edges.
 * And the lane's index secret when getrandom has none (rm_secret).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvt_int.h"
#include "remote.h"
#include "t.h"
#include "tnorand.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)

/*
 * The index secret when the kernel has none to give (getrandom refused
 * EAGAIN by a seccomp filter in a child): remote_open fails with it.
 * Before 2026-12-07 the lane took its address xor time() and opened.
 */
static void test_rm_secret(void)
{
#ifdef T_NORAND_AVAILABLE
	int status = 0;
	pid_t pid = fork();

	T_ASSERT(pid >= 0);
	if (pid == 0) {
		char addr[] = "127.0.0.1:1";
		struct remote_config cfg = { .addr = addr, .conns = 1, .conns_max = 1,
					     .timeout_ms = 100, .connect_timeout_ms = 100,
					     .backoff_ms = 10, .backoff_max_ms = 100, .batch = 8 };
		struct kvt_logger lg = { 0 };
		struct kvt_mem mem;
		struct remote *rm = NULL;
		int rc;

		if (t_norand(EAGAIN) != 0)
			_exit(3);
		kvt_mem_init(&mem);
		rc = remote_open(&rm, &cfg, NULL, NULL, &mem, &lg);
		if (rc == 0)
			remote_close(rm);
		t_norand_exit(rc);
	}
	status = t_norand_wait(pid);
	if (status < 0) {
		printf("rm_secret: seccomp not available, skipped\n");
		return;
	}
	/* 1: opened with a guessable secret; 2: another error than EAGAIN */
	T_EQ_INT(status, 0);
#endif
}

int main(void)
{
	test_rm_secret();

	/* Pool: remote.conns until the mean value reaches 512 KiB, then
	 * remote.conns_max; never below remote.conns. */
	T_EQ_U64(remote_rule_conns(2, 4, 0), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 256 * KIB), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 512 * KIB - 1), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 512 * KIB), 4);
	T_EQ_U64(remote_rule_conns(2, 4, MIB), 4);
	T_EQ_U64(remote_rule_conns(2, 4, 2 * MIB), 4);
	T_EQ_U64(remote_rule_conns(1, 4, 2 * MIB), 4);
	T_EQ_U64(remote_rule_conns(2, 2, 2 * MIB), 2);   /* a fixed pool */
	T_EQ_U64(remote_rule_conns(8, 4, 2 * MIB), 8);   /* conns_max below conns */
	T_EQ_U64(remote_rule_conns(2, 0, 2 * MIB), 2);   /* a config without it */

	/* GET frames: about 4 MiB of values. */
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 2), 2);
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 4), 2);
	T_EQ_U64(remote_rule_get_items(256 * KIB, 64, 2), 16);
	T_EQ_U64(remote_rule_get_items(64 * KIB, 64, 2), 64);
	T_EQ_U64(remote_rule_get_items(16 * KIB, 64, 2), 64);
	T_EQ_U64(remote_rule_get_items(16 * KIB, 32, 2), 32);  /* remote.batch caps it */
	T_EQ_U64(remote_rule_get_items(8 * MIB, 64, 2), 1);    /* at least one */
	T_EQ_U64(remote_rule_get_items(0, 64, 2), 64);         /* mean not known yet */
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 1), 64);   /* one connection */

	/* PUT frames: 4 MiB of values with a pool, 256 MiB with one connection. */
	T_EQ_U64(remote_rule_put_bytes(2), 4 * MIB);
	T_EQ_U64(remote_rule_put_bytes(4), 4 * MIB);
	T_EQ_U64(remote_rule_put_bytes(1), 256 * MIB);
	printf("test_remote_rule: ok\n");
	return 0;
}

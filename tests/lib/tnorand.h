/*
 * tnorand.h - a process whose getrandom fails: a seccomp filter that
 * answers getrandom with an errno, as GRND_NONBLOCK early in boot.  Call
 * it in a forked child only (it cannot be undone).  Shared by test_ns
 * reg_secret and test_kvevents topic_seed.
 */
#ifndef TNORAND_H
#define TNORAND_H

#include <errno.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__) && defined(__NR_getrandom)
#define T_NORAND_AVAILABLE 1

/* 0, or -1 when seccomp is not available here (the caller skips). */
static inline int t_norand(int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getrandom, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return -1;
	return 0;
}

/* The child's end: rc of the open or init it tried under t_norand --
 * 0 if it failed -EAGAIN (what it must), 1 if it succeeded (a guessable
 * key), 2 for another error. */
static inline void t_norand_exit(int rc)
{
	_exit(rc == -EAGAIN ? 0 : rc == 0 ? 1 : 2);
}

/* Waits for that child: its exit status (0 as it must), -1 when seccomp
 * was not available (it exited 3: the caller skips), 99 if it did not
 * exit (killed: an alarm, a crash). */
static inline int t_norand_wait(pid_t pid)
{
	int status = 0;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 99;
	return WEXITSTATUS(status) == 3 ? -1 : WEXITSTATUS(status);
}
#endif

#endif

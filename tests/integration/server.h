/*
 * server.h - a real kvtierd for integration tests: started as a child on
 * 127.0.0.1 port 0 and a Unix socket, its port read from its log, killed
 * with the test if the test fails.
 */
#ifndef KVT_TEST_SERVER_H
#define KVT_TEST_SERVER_H

#include <stdint.h>
#include <sys/types.h>

struct tsrv {
	pid_t pid;
	char dir[512];
	char log[600];
	char sock[600];
	uint16_t port;
};

/*
 * Start bin on data directory dir (logs and socket under base), with
 * --tenants tenants if not NULL, plus extra arguments (NULL-ended, may be
 * NULL).  Waits until it listens; fails the test otherwise.
 */
void tsrv_start(struct tsrv *s, const char *bin, const char *base, const char *dir,
		const char *tenants, const char *const *extra);
/* SIGTERM and wait; the exit status, or -1 if it did not exit normally. */
int tsrv_stop(struct tsrv *s);
/* SIGKILL and wait. */
void tsrv_kill9(struct tsrv *s);
void tsrv_sleep_ms(long ms);
/* After kill(pid, SIGSTOP): wait until every thread of pid is stopped
 * (kill returns before they are; a running thread could still answer). */
void tsrv_wait_stopped(pid_t pid);
/* Fail the test if any kvtierd's stderr under base (*.stderr) holds a
 * sanitizer report. */
void tsrv_check_reports(const char *base);

#endif

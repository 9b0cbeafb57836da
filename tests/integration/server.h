/*
 * server.h - a real kvtierd for integration tests: started as a child on
 * 127.0.0.1 port 0 and a Unix socket, its port read from its log, killed
 * with the test if the test fails.
 */
#ifndef KVT_TEST_SERVER_H
#define KVT_TEST_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvtier.h"

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
/*
 * An engine's store whose remote tier is the server at addr
 * ("127.0.0.1:PORT"): 64 MiB of DRAM in 4 KiB chunks, not prefaulted,
 * then the option pairs of opts (name, value, ..., NULL; opts may be
 * NULL).  Returns once the tier has a connection up; fails the test if it
 * has none within 10 s.
 */
/* A store of options a, then b (name, value pairs, NULL-ended; b may be
 * NULL), its log to log at KVT_LOG_WARN if not NULL; opened (a failure
 * fails the test). */
struct kvt_store *tsrv_store(const char *const *a, const char *const *b, kvt_log_fn log);
struct kvt_store *tsrv_engine(const char *addr, const char *const *opts);
/* SIGTERM and wait; the exit status, or -1 if it did not exit normally. */
int tsrv_stop(struct tsrv *s);
/* Wait for a server that stops by itself (kvtier drain --exit): its exit
 * status, -1 if not a normal exit; fails the test after timeout_ms. */
int tsrv_wait_exit(struct tsrv *s, int timeout_ms);
/* SIGKILL and wait. */
void tsrv_kill9(struct tsrv *s);
void tsrv_sleep_ms(long ms);
/* The port following pat on a line of log, waiting up to 30 s for it. */
uint16_t tsrv_log_port(const char *log, const char *pat);
/* The port of a kvtierd's listener what ("S3", "metrics", "RESP"), read
 * from its log ("<what> listener on 127.0.0.1:PORT"); fails the test if
 * the line is not there within 30 s.  tsrv_s3_port: what "S3". */
uint16_t tsrv_listener_port(const char *log, const char *what);
uint16_t tsrv_s3_port(const char *log);
/* After kill(pid, SIGSTOP): wait until every thread of pid is stopped
 * (kill returns before they are; a running thread could still answer). */
void tsrv_wait_stopped(pid_t pid);
/* Fail the test if any kvtierd's stderr under base (*.stderr) holds a
 * sanitizer report. */
void tsrv_check_reports(const char *base);

/*
 * A test program of phases, one a run (argv: KVTIERD PHASE ...): makes
 * base (base_len bytes: TMPDIR/prog.XXXXXX), ignores SIGPIPE, runs the
 * phase named argv[2] among the n of phases, then fails the test on a
 * sanitizer report of its servers (tsrv_check_reports), removes base and
 * prints "PHASE: ok".  main's return value: 0, or 2 (no such phase, the
 * usage printed).
 */
struct tsrv_phase {
	const char *name;
	void (*run)(void);
};
int tsrv_run_phase(const char *prog, int argc, char **argv, const struct tsrv_phase *phases,
		   size_t n, char *base, size_t base_len);
/*
 * The next kvtierd started (the caller's environment, or its child's)
 * preloads the sync shim (tests/integration/shim_sync.c), which holds
 * the syncs of files whose name starts with name at the gate directory
 * gate (made by the caller); a sanitized server must not insist on its
 * runtime coming first.  The caller unsets LD_PRELOAD once it started.
 */
void tsrv_shim_arm(const char *shim, const char *gate, const char *name);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t tsrv_now_ns(void);
/* pid's resident set (VmRSS) in bytes; 0 if /proc cannot tell. */
uint64_t tsrv_rss(pid_t pid);
/* A peak-RSS sampler, run as pthread_create(..., tsrv_rss_thread, &w):
 * every 20 ms raises *w.max to w.srv->pid's RSS, until *w.stop. */
struct tsrv_rss_watch {
	const struct tsrv *srv;
	_Atomic bool *stop;
	_Atomic uint64_t *max;
};
void *tsrv_rss_thread(void *arg);
/* n pseudo-random bytes from seed (xorshift32): a value a test can
 * rebuild to check what it reads back. */
void tsrv_fill(uint8_t *b, size_t n, uint32_t seed);
/* Write text to dir/name (name alone if dir is NULL), mode 0600: tenants
 * and secret files, which kvtierd refuses if others may read them. */
void tsrv_write_file(const char *dir, const char *name, const char *text);

/* Send len bytes of req to 127.0.0.1:port on a fresh connection and read
 * until the peer closes: what was read, NUL-terminated (malloc'd). */
char *tsrv_talk(uint16_t port, const void *req, size_t len);
/* GET path from 127.0.0.1:port over a real socket (HTTP/1.1; the server
 * closes after its answer), with "Authorization: Bearer token" if token
 * is not NULL: the whole response, NUL-terminated (malloc'd), and *code
 * its status.  Fails the test if there is no status line. */
char *tsrv_http_get(uint16_t port, const char *path, const char *token, int *code);
/* The same without a token, a 200 answer required: its body (malloc'd). */
char *tsrv_http_body(uint16_t port, const char *path);
/* The value of the sample line "series value" on a /metrics page; fails
 * the test if the page has none. */
uint64_t tsrv_metric(const char *page, const char *series);

#endif

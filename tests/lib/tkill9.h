/*
 * tkill9.h - a writer killed with SIGKILL mid-stream, for the SSD tier's
 * crash tests (test_ssd, test_ssd4k): a child process puts keys 0, 1, ...
 * into a store on dir, takes a checkpoint after one of them (it goes stale
 * as writing continues), flushes every few keys and reports the last key
 * flushed through a pipe; the parent kills it once enough are flushed.
 */
#ifndef KVT_TEST_TKILL9_H
#define KVT_TEST_TKILL9_H

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ssd.h"
#include "store_int.h"
#include "t.h"

struct t_writer {
	struct kvt_store *(*open)(const char *dir);
	uint32_t (*ns)(struct kvt_store *s);
	int (*put)(struct kvt_store *s, uint32_t ns, uint64_t k); /* < 0: failed */
	uint64_t ckpt_at;     /* a checkpoint after this key */
	uint64_t flush_every; /* a flush (and a report) after every this many keys */
	uint64_t kill_after;  /* killed once at least this many keys are flushed */
};

/* Run w on dir in a child and kill it: how many keys (0..n-1) were flushed. */
static inline uint64_t t_kill9_writer(const char *dir, const struct t_writer *w)
{
	int pfd[2], st;
	uint64_t flushed = 0;
	pid_t pid;

	T_EQ_INT(pipe(pfd), 0);
	pid = fork();
	T_GE_INT(pid, 0);
	if (pid == 0) {
		struct kvt_store *c = w->open(dir);
		uint32_t cns = w->ns(c);
		close(pfd[0]);
		for (uint64_t k = 0;; k++) {
			if (w->put(c, cns, k) < 0)
				_exit(3);
			if (k == w->ckpt_at)
				ssd_checkpoint(store_ssd(c));
			if (k % w->flush_every == w->flush_every - 1) {
				kvt_flush(c);
				if (write(pfd[1], &k, sizeof(k)) != sizeof(k))
					_exit(4);
			}
		}
	}
	close(pfd[1]);
	while (flushed < w->kill_after) {
		uint64_t k;
		if (read(pfd[0], &k, sizeof(k)) != sizeof(k))
			T_FAIL("writer died early");
		flushed = k + 1;
	}
	kill(pid, SIGKILL);
	T_EQ_INT(waitpid(pid, &st, 0), pid);
	T_ASSERT(WIFSIGNALED(st));
	close(pfd[0]);
	return flushed;
}

#endif

/*
 * progress.h - the one-line progress display of kvtier's long operations
 * (fsck, replay, clear): drawn on stderr only when stderr is a terminal,
 * at most ten times a second; silent otherwise, so logs and pipes stay
 * clean.
 */
#ifndef KVT_CLI_PROGRESS_H
#define KVT_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct cli_progress {
	bool on;          /* drawing (stderr is a terminal and not disabled) */
	const char *unit; /* "requests", "bytes" (bytes are shown in MiB) */
	double t0, last;  /* seconds, CLOCK_MONOTONIC */
	bool drawn;       /* a line is on screen */
};

/* Start: on when enable and stderr is a terminal. */
void cli_progress_start(struct cli_progress *p, const char *unit, bool enable);
/* Redraw with done of total (total 0: unknown); rate-limited unless
 * done == total. */
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total);
/* End the line (if one was drawn). */
void cli_progress_end(struct cli_progress *p);
double cli_now(void);

#endif

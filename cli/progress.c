/*
 * progress.c - the progress bar of kvtier's long operations (progress.h).
 * Owns nothing but the state in struct cli_progress; writes only stderr.
 */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_start(struct cli_progress *p, const char *unit, bool enable)
{
	p->on = enable && isatty(2);
	p->unit = unit;
	p->t0 = cli_now();
	p->last = 0;
	p->drawn = false;
}

void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total)
{
	static const char bar[] = "########################################";
	const int width = 40;
	bool bytes = p->unit && p->unit[0] == 'b';
	double now, d = (double)done, t = (double)total;
	int fill;

	if (!p->on)
		return;
	now = cli_now();
	if (done != total && now - p->last < 0.1)
		return;
	p->last = now;
	fill = total ? (int)(d * width / t) : 0;
	if (fill > width)
		fill = width;
	if (bytes) {
		d /= 1048576.0;
		t /= 1048576.0;
	}
	fprintf(stderr, "\r[%.*s%*s] %3d%% %.*f/%.*f %s %.1f s", fill, bar, width - fill, "",
		total ? (int)(done * 100 / total) : 0, bytes ? 1 : 0, d, bytes ? 1 : 0, t,
		bytes ? "MiB" : p->unit, now - p->t0);
	fflush(stderr);
	p->drawn = true;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->on && p->drawn) {
		fputc('\n', stderr);
		fflush(stderr);
	}
	p->drawn = false;
}

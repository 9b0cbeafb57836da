/*
 * kvevents_cost.c - what kvevents_stored costs the thread that calls it (a
 * put or an eviction), in ns per event: the hot path of lib/core/kvevents.c
 * (doc/kvevents.md "Per tenant"; figures in bench/RESULTS.md).  Built with
 * the benchmarks, run by hand on a release build:
 *
 *   meson setup build-release --buildtype=release -Dwerror=true
 *   ninja -C build-release bench/kvevents_cost
 *   ./build-release/bench/kvevents_cost [ROUNDS]
 *
 * A publisher with one group feed bound on ipc:// and no subscriber,
 * events.queue_max 65536 and events.batch_ms 200, so that a round fits in
 * one batch: into the empty queue 65,536 events are queued (the accepting
 * path), then 1,000,000 more dropped (the queue full: the dropping path);
 * one group, or two in turn; then 300 ms for the thread to send the batch
 * (two rounds first, not counted, grow both arrays).  "push out": group 1
 * fills the queue, then group 2's 16,384 events each take the place of
 * one of group 1's (dropped before the shares).  Prints the median and
 * the range over ROUNDS (default 15) rounds of ns per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvevents.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct stat_get {
	const char *name;
	uint64_t v;
};

static void stat_cb(void *ctx, const char *name, uint64_t v, const char *str)
{
	struct stat_get *g = ctx;
	if (!str && strcmp(name, g->name) == 0)
		g->v = v;
}

static uint64_t stat_of(struct kvevents *ev, const char *name)
{
	struct stat_get g = { name, 0 };
	kvevents_stats(ev, stat_cb, &g);
	return g.v;
}

static uint64_t seq;

/* n events, groups 1..groups in turn from group first: ns per event. */
static double push(struct kvevents *ev, uint32_t n, uint32_t first, uint32_t groups)
{
	struct kvt_key key = { .len = 32 };
	uint64_t t0 = now_ns();
	for (uint32_t j = 0; j < n; j++, seq++) {
		memcpy(key.bytes, &seq, sizeof(seq));
		kvevents_stored(ev, first + j % groups, &key, NULL, 16);
	}
	return (double)(now_ns() - t0) / n;
}

static void report(const char *what, double *r, int rounds)
{
	qsort(r, (size_t)rounds, sizeof(*r), cmp_dbl);
	printf("%-28s %6.1f ns/event (%.1f .. %.1f)\n", what, r[rounds / 2], r[0],
	       r[rounds - 1]);
}

int main(int argc, char **argv)
{
	struct kvevents_config cfg = { .groups = true, .batch_ms = 200, .queue_max = 65536 };
	struct kvt_logger lg = { 0 };
	struct kvt_mem mem;
	struct kvevents *ev;
	char ep[64];
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	double *r[5];

	if (rounds < 1)
		rounds = 1;
	for (int k = 0; k < 5; k++)
		if (!(r[k] = calloc((size_t)rounds + 2, sizeof(double))))
			return 1;
	kvt_mem_init(&mem);
	snprintf(ep, sizeof(ep), "ipc:///tmp/kvt-evcost-%d", (int)getpid());
	if (kvevents_open(&ev, &cfg, &mem, &lg) < 0 || kvevents_group_endpoint(ev, 1, ep) < 0)
		return fprintf(stderr, "kvevents_cost: cannot open\n"), 1;
	for (int i = 0; i < rounds + 2; i++) {
		for (uint32_t groups = 1; groups <= 3; groups++) {
			if (groups < 3) {
				r[2 * (groups - 1)][i] = push(ev, 65536, 1, groups);
				r[2 * (groups - 1) + 1][i] = push(ev, 1000000, 1, groups);
			} else {
				push(ev, 65536, 1, 1);
				r[4][i] = push(ev, 16384, 2, 1);
			}
			usleep(300000);
		}
	}
	printf("events.queued %" PRIu64 ", events.dropped %" PRIu64 ", group 1's %" PRIu64
	       ", group 2's %" PRIu64 "\n", stat_of(ev, "events.queued"),
	       stat_of(ev, "events.dropped"), stat_of(ev, "events.1.dropped"),
	       stat_of(ev, "events.2.dropped"));
	kvevents_close(ev);
	report("queued, one group", r[0] + 2, rounds);
	report("dropped (full), one group", r[1] + 2, rounds);
	report("queued, two groups", r[2] + 2, rounds);
	report("dropped (full), two groups", r[3] + 2, rounds);
	report("push out (group 2)", r[4] + 2, rounds);
	unlink(ep + 6);
	return 0;
}

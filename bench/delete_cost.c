/*
 * delete_cost.c - what a durable kvt_delete costs (store_sync.c
 * store_tombstones_durable: the SSD writer's barrier, then fdatasync, since
 * session 25).  Not built by meson: a one-off measurement kept with its
 * figures (bench/RESULTS.md, perf25); built against each tree compared.
 *
 * One store, DRAM + SSD (ssd.admission=always: every block has a record,
 * so every delete needs a tombstone), under DIR.  N blocks of 16 KiB are
 * put and flushed; then
 *   idle: the main thread deletes N/2 of them, one kvt_delete at a time;
 *   busy: the rest, while another thread puts fresh 256 KiB blocks at
 *         MIB_S MiB/s (0: as fast as the store takes them), a write-down
 *         backlog when that is more than the device writes.
 * A phase stops after 3 s (the busy one must not wrap the 8 GiB log).
 * Prints, per phase, deletes per second and the p50/p99 latency of one
 * kvt_delete, the write-down backlog (ssd.writedown_pending_bytes) at its
 * 32nd delete, and for busy the bytes the putter put meanwhile and those
 * written down (ssd.writedown_bytes; since tomb26), and for idle the log's
 * growth per delete (ssd.log_record_bytes; since tombsafe).  Exits 1
 * if a delete fails or a deleted block is still there.  With WINDOW, the
 * store gets ssd.writedown_window=WINDOW (since delsync; the option is
 * tomb26's; "8M" is the default); with THREADS, each phase's deletes are
 * made by that many threads, a slice each (since delsync).
 *
 *   cc -O2 -pthread -Iinclude -Ibuild-release bench/delete_cost.c -Lbuild-release -lkvtier \
 *      -Wl,-rpath,$PWD/build-release -o /tmp/delete_cost
 *   /tmp/delete_cost DIR [N [MIB_S [WINDOW [THREADS]]]]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"
#include "oneoff.h"

#define VLEN (16u << 10)
#define BIG (256u << 10)
#define PHASE_NS 3000000000ull /* at most 3 s of deletes a phase */

struct putter {
	struct kvt_store *s;
	uint32_t ns;
	atomic_bool stop;
	uint64_t rate; /* bytes a second, 0: as fast as the store takes them */
	_Atomic uint64_t puts, bytes;
};

static void *put_loop(void *arg)
{
	struct putter *p = arg;
	static uint8_t v[BIG];
	uint64_t t0 = now_ns();
	for (uint64_t i = 0; !atomic_load(&p->stop); i++) {
		double at = (double)i * BIG * 1e9 / (double)(p->rate ? p->rate : 1);
		uint64_t due = p->rate ? t0 + (uint64_t)at : 0;
		for (uint64_t t = now_ns(); t < due && !atomic_load(&p->stop); t = now_ns())
			nanosleep(&(struct timespec){ 0, (long)(due - t) }, NULL);
		struct kvt_key k = key_of(i, 1ull << 50);
		memset(v, (int)i, 64);
		if (kvt_put(p->s, p->ns, &k, &(struct iovec){ v, sizeof(v) }, 1) == KVT_OK) {
			p->puts++;
			p->bytes += sizeof(v);
		}
	}
	return NULL;
}

static void stat_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	(void)text;
	if (strcmp(name, "ssd.writedown_pending_bytes") == 0)
		*(uint64_t *)ctx = v;
}

static void logbytes_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	(void)text;
	if (strcmp(name, "ssd.log_record_bytes") == 0)
		*(uint64_t *)ctx = v;
}

static void written_cb(void *ctx, const char *name, uint64_t v, const char *text)
{
	(void)text;
	if (strcmp(name, "ssd.writedown_bytes") == 0)
		*(uint64_t *)ctx = v;
}

/* One deleting thread: keys [from, to), one at a time, for at most
 * PHASE_NS from t0; lat[i - from] each delete's latency; n: how many. */
struct deleter {
	struct kvt_store *s;
	uint32_t ns;
	uint64_t from, to, t0, n, *lat;
	const char *name;
	int r;
	_Atomic uint64_t done; /* deletes so far */
};

static void *delete_loop(void *arg)
{
	struct deleter *d = arg;
	d->n = d->to - d->from;
	for (uint64_t i = d->from; i < d->to; i++) {
		if (now_ns() - d->t0 > PHASE_NS) { /* a capped phase: the SSD must not wrap */
			d->n = i - d->from;
			break;
		}
		struct kvt_key k = key_of(i, 0);
		uint64_t t = now_ns();
		int r = kvt_delete(d->s, d->ns, &k);
		d->lat[i - d->from] = now_ns() - t;
		atomic_fetch_add(&d->done, 1);
		if (r != KVT_OK || kvt_exists(d->s, d->ns, &k) != KVT_MISS) {
			fprintf(stderr, "%s: delete %llu: %s\n", d->name, (unsigned long long)i,
				kvt_strerror(r));
			d->r = -1;
			return NULL;
		}
	}
	return NULL;
}

/* Delete keys [from, to) from `threads` threads, each a slice, one delete
 * at a time; prints the phase's figures. */
static int phase(const char *name, struct kvt_store *s, uint32_t ns, uint64_t from, uint64_t to,
		 uint64_t *lat, unsigned threads)
{
	struct deleter d[64];
	pthread_t th[64];
	uint64_t n = 0, t0 = now_ns(), pend = 0, len = (to - from) / threads;
	bool stats_taken = false;
	for (unsigned j = 0; j < threads; j++) {
		d[j] = (struct deleter){ s, ns, from + j * len, from + (j + 1) * len, t0, 0,
					 lat + j * len, name, 0, 0 };
		if (pthread_create(&th[j], NULL, delete_loop, &d[j]) != 0)
			return -1;
	}
	while (!stats_taken) { /* the backlog at about the 32nd delete */
		uint64_t done = 0;
		for (unsigned j = 0; j < threads; j++)
			done += atomic_load(&d[j].done);
		if (done > 32 || now_ns() - t0 > PHASE_NS) {
			kvt_store_stats(s, stat_cb, &pend);
			stats_taken = true;
		} else {
			nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		}
	}
	for (unsigned j = 0; j < threads; j++) {
		pthread_join(th[j], NULL);
		if (d[j].r < 0)
			return -1;
		memmove(lat + n, d[j].lat, d[j].n * sizeof(*lat));
		n += d[j].n;
	}
	t0 = now_ns() - t0;
	qsort(lat, n, sizeof(*lat), cmp_u64);
	printf("%s: %llu deletes, %.0f /s, p50 %.1f us, p99 %.1f us, write-down pending "
	       "at the 32nd %.1f MiB\n",
	       name, (unsigned long long)n, (double)n * 1e9 / (double)t0, lat[n / 2] / 1e3,
	       lat[n * 99 / 100] / 1e3, pend / 1048576.0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 4000;
	uint64_t rate = (argc > 3 ? strtoull(argv[3], NULL, 0) : 512) << 20;
	unsigned threads = argc > 5 ? (unsigned)strtoul(argv[5], NULL, 0) : 1;
	struct kvt_ns_desc d = { .model = "delete-cost", .dtype = "bf16", .layout = "raw",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t v[VLEN];
	struct putter p = { 0 };
	struct kvt_store *s;
	pthread_t th;
	uint64_t *lat;
	uint32_t ns;

	if (!dir || n < 4 || threads < 1 || threads > 64 || n / 2 / threads < 64)
		return fprintf(stderr, "usage: delete_cost DIR [N [MIB_S [WINDOW [THREADS]]]]\n"), 2;
	lat = calloc(n, sizeof(*lat));
	if (!lat || kvt_store_create(&s) < 0 || kvt_store_set_option(s, "path", dir) < 0 ||
	    kvt_store_set_option(s, "dram.capacity", "1G") < 0 ||
	    kvt_store_set_option(s, "ssd.capacity", "8G") < 0 ||
	    kvt_store_set_option(s, "ssd.segment", "64M") < 0 ||
	    kvt_store_set_option(s, "ssd.admission", "always") < 0 ||
	    (argc > 4 && kvt_store_set_option(s, "ssd.writedown_window", argv[4]) < 0) ||
	    kvt_store_set_option(s, "ssd.close_writedown_ms", "0") < 0 || kvt_store_open(s) < 0 ||
	    kvt_ns_register(s, &d, &ns) < 0)
		return fprintf(stderr, "store did not open\n"), 1;
	for (uint64_t i = 0; i < n; i++) {
		struct kvt_key k = key_of(i, 0);
		memset(v, (int)i, 64);
		if (kvt_put(s, ns, &k, &(struct iovec){ v, sizeof(v) }, 1) != KVT_OK)
			return fprintf(stderr, "put %llu failed\n", (unsigned long long)i), 1;
	}
	if (kvt_flush(s) < 0)
		return fprintf(stderr, "flush failed\n"), 1;
	{
		/* The idle phase writes tombstones only: the log's growth over
		 * it is what a delete takes on flash (twins since tombsafe). */
		uint64_t l0 = 0, l1 = 0;
		kvt_store_stats(s, logbytes_cb, &l0);
		if (phase("idle", s, ns, 0, n / 2, lat, threads) < 0)
			return 1;
		kvt_store_stats(s, logbytes_cb, &l1);
		printf("idle: %.0f bytes of log per delete\n", (double)(l1 - l0) / (double)(n / 2));
	}
	p.s = s;
	p.ns = ns;
	p.rate = rate;
	if (pthread_create(&th, NULL, put_loop, &p) != 0)
		return 1;
	{
		struct timespec ts = { 0, 200 * 1000000 }; /* let the backlog build */
		nanosleep(&ts, NULL);
	}
	uint64_t b0 = p.bytes, t0 = now_ns(), w0 = 0, w1 = 0;
	kvt_store_stats(s, written_cb, &w0);
	int r = phase("busy", s, ns, n / 2, n, lat, threads);
	double secs = (double)(now_ns() - t0) / 1e9;
	uint64_t put_bytes = p.bytes - b0;
	kvt_store_stats(s, written_cb, &w1);
	atomic_store(&p.stop, true);
	pthread_join(th, NULL);
	printf("busy: the putter took %.0f MiB/s of 256 KiB blocks meanwhile, %.0f MiB/s written "
	       "down\n",
	       put_bytes / 1048576.0 / secs, (w1 - w0) / 1048576.0 / secs);
	kvt_store_close(s);
	kvt_store_destroy(s);
	free(lat);
	return r < 0;
}

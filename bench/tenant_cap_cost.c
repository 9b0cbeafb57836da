/*
 * tenant_cap_cost.c - what loop.c kvtd_tenant_cap (Session 48) adds to a
 * call that used the quarter alone: four relaxed loads of the tenant's
 * counters and a few subtractions.  A native GET asks it about twice
 * (kvtd_in_share through the frame's charge, ops_table_room), the output
 * pause once more while answers are queued.  Not built by meson: a
 * one-off measurement kept with its figures (bench/RESULTS.md, review48e).
 *   gcc -O2 -pthread -o /tmp/tcc bench/tenant_cap_cost.c && /tmp/tcc && /tmp/tcc c
 * "c": another thread adds to and takes from out_charged meanwhile (the
 * tenant's answers on another loop: its cache line moves).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <pthread.h>
struct t { _Atomic uint64_t out_charged, in_charged, tls_mem, copies; };
static struct t T; static uint64_t maxmem = 32u << 20; static _Atomic int stop;
__attribute__((noinline)) static uint64_t cap(const struct t *t, uint64_t mine, uint64_t q)
{
	uint64_t all = atomic_load_explicit(&t->out_charged, memory_order_relaxed) +
		       atomic_load_explicit(&t->in_charged, memory_order_relaxed) +
		       atomic_load_explicit(&t->tls_mem, memory_order_relaxed) +
		       atomic_load_explicit(&t->copies, memory_order_relaxed);
	uint64_t others = all > mine ? all - mine : 0, half = maxmem / 2;
	uint64_t room = half > others ? half - others : 0;
	return room < q ? room : q;
}
__attribute__((noinline)) static uint64_t old(const struct t *t, uint64_t mine, uint64_t q)
{ (void)t; (void)mine; return q; }
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
static void *writer(void *a) { (void)a; while (!atomic_load(&stop)) { atomic_fetch_add(&T.out_charged, 64); atomic_fetch_sub(&T.out_charged, 64);} return NULL; }
int main(int argc, char **argv) {
	(void)argv;
	const long N = 100000000; uint64_t s = 0; double t0, a, b;
	pthread_t w; int contended = argc > 1;
	if (contended) pthread_create(&w, NULL, writer, NULL);
	for (int r = 0; r < 3; r++) {
		t0 = now(); for (long i = 0; i < N; i++) s += old(&T, i & 1023, maxmem / 4); a = now() - t0;
		t0 = now(); for (long i = 0; i < N; i++) s += cap(&T, i & 1023, maxmem / 4); b = now() - t0;
		printf("%s run %d: quarter %.2f ns/call, kvtd_tenant_cap %.2f ns/call (+%.2f)\n",
		       contended ? "contended" : "alone", r, a / N * 1e9, b / N * 1e9, (b - a) / N * 1e9);
	}
	atomic_store(&stop, 1); if (contended) pthread_join(w, NULL);
	return (int)(s & 1) * 0;
}

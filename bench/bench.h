/*
 * bench.h - the benchmark suites compiled into the kvtier CLI.
 *
 * Each suite is one function with main()'s shape, reached as
 * "kvtier bench <suite> [options]": argv[0] is the suite's name, the rest
 * its options.  Suites use nothing but include/kvtier.h, print results to
 * stdout (a table, or JSON lines with --json) and everything else to
 * stderr, and return the CLI's exit codes below.
 */
#ifndef KVT_BENCH_H
#define KVT_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Exit codes of every kvtier command (cli/kvtier.c uses the same). */
enum {
	BENCH_EXIT_OK = 0,    /* ran; bytes verified (targets missed still exit 0) */
	BENCH_EXIT_FAIL = 1,  /* runtime failure: a library error or a wrong byte */
	BENCH_EXIT_USAGE = 2, /* bad command line */
};

/* "kvtier bench dram": bench/bench_dram.c; kvtier-bench(1) is its manual. */
int bench_dram_main(int argc, char **argv);

/* "kvtier bench ssd" and "kvtier bench recovery": bench/bench_ssd.c. */
int bench_ssd_main(int argc, char **argv);
int bench_recovery_main(int argc, char **argv);

/* "kvtier bench net": bench/bench_net.c (starts kvtierd, memcached,
 * redis-server, iperf3; returns 77 if one of the peers is not installed). */
int bench_net_main(int argc, char **argv);

/* bench_util.c: shared by the suites. */
double bench_now(void);                         /* CLOCK_MONOTONIC, seconds */
uint64_t bench_splitmix(uint64_t x);            /* SplitMix64 step */
uint64_t bench_seed(uint64_t size, uint64_t i); /* seed of value i of a size class */
uint64_t bench_xorshift(uint64_t *x);
void bench_fill(uint8_t *p, size_t len, uint64_t seed); /* bytes derived from seed */
uint64_t bench_align_up(uint64_t x, uint64_t a);
int bench_parse_size(const char *s, uint64_t *out);      /* "256K", "2GiB": 0 or -1 */
const char *bench_fmt_size(char *buf, size_t len, uint64_t v); /* "2 MiB" */
int bench_cmp_double(const void *a, const void *b);      /* for qsort */
double bench_rate(double amount, double secs);           /* amount/secs, secs floored at 1 ns */

#endif /* KVT_BENCH_H */

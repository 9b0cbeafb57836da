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

#endif /* KVT_BENCH_H */

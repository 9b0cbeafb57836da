/*
 * kvtier.c - the kvtier command: "kvtier <command> [options]".
 *
 * Owns the command line: global options (--help, --version), the table of
 * commands and their dispatch, and the exit codes every command shares
 * (0 ok, 1 runtime failure, 2 usage error: bench/bench.h; admin.c adds
 * 3 and 4).  Each command is
 * one function with main()'s shape that receives its full name as argv[0];
 * a command with sub-commands ("bench dram") dispatches through a table of
 * the same type.  Like LMDB's tools, it reaches the library only through
 * include/kvtier.h.
 *
 * Invariants: results go to stdout, everything else (errors, progress) to
 * stderr; every usage error says what to run next; --help exits 0 and
 * prints to stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"

#include "../bench/bench.h"
#include "gc.h"
#include "replay.h"
#include "admin.h"
#include "drain.h"
#include "top.h"

#define CLI_EXIT_OK BENCH_EXIT_OK
#define CLI_EXIT_FAIL BENCH_EXIT_FAIL
#define CLI_EXIT_USAGE BENCH_EXIT_USAGE

/*
 * One command (or sub-command).  run gets argv[0] = its full name, "kvtier
 * NAME" (what getopt prints), and must handle --help / -h itself; it
 * returns a CLI_EXIT_* code.
 */
struct cli_cmd {
	const char *name;
	const char *summary; /* one line for the parent's --help */
	int (*run)(int argc, char **argv);
};

static int cli_bench(int argc, char **argv);
static int cli_help(int argc, char **argv);
static int cli_version(int argc, char **argv);
static int cli_options(int argc, char **argv);

/*
 * The commands, in the order --help lists them; each has a page under
 * doc/man (the operator's commands share kvtier-admin.1).
 */
static const struct cli_cmd cli_cmds[] = {
	{ "stat", "a live table of a running kvtierd (kvtier-admin(1))", admin_stat },
	{ "top", "a live view of kvtierd servers from their /metrics (kvtier-admin(1))", top_main },
	{ "ls", "namespaces with their blocks and bytes", admin_ls },
	{ "get", "write one key's value to a file or stdout (debugging)", admin_get },
	{ "put", "store a file or stdin under one key (debugging)", admin_put },
	{ "rm", "delete one key from every tier", admin_rm },
	{ "clear", "remove a namespace, or everything, from every tier", admin_clear },
	{ "fsck", "verify every record of a store directory offline", admin_fsck },
	{ "who", "which kvtierd of a pod hold a prompt's blocks", admin_who },
	{ "drain", "hand a pod member's blocks over, then leave the pod (doc/cluster.md)",
	  drain_main },
	{ "bench", "measure libkvtier against the machine's limits (kvtier-bench(1))", cli_bench },
	{ "replay", "replay a request trace; hit ratios and a what-if model (kvtier-replay(1))",
	  replay_main },
	{ "gc", "collect a shared tier directory or bucket by age and size (kvtier gc --help)", gc_main },
	{ "options", "the library's options: type, default, bounds, one line each", cli_options },
	{ "help", "show help for a command: kvtier help <command> [<sub-command>]", cli_help },
	{ "version", "print the versions of kvtier and of libkvtier", cli_version },
};

/* Suites of "kvtier bench".  ssd, server, ... slot in here. */
static const struct cli_cmd bench_suites[] = {
	{ "dram", "DRAM tier: put/get vs memcpy, prefix lookup, key hashing, metadata",
	  bench_dram_main },
	{ "ssd", "SSD tier: write-through and random reads vs fio (O_DIRECT, io_uring)",
	  bench_ssd_main },
	{ "recovery", "SSD tier: reopen after kill -9 with a stale checkpoint", bench_recovery_main },
	{ "seal", "sealed (AES-256-GCM) put/get vs unsealed and vs raw OpenSSL AES-GCM",
	  bench_seal_main },
	{ "net", "kvtierd over loopback vs memcached, redis-server, iperf3; SSD vs fio",
	  bench_net_main },
	{ "shared", "shared tier: directory vs fio, S3 vs a plain libcurl client",
	  bench_shared_main },
	{ "s3", "kvtierd's S3 listener vs its native protocol (and another S3 server)",
	  bench_s3_main },
	{ "cluster", "a pod of 1 and 3 kvtierd as an engine sees it: put/get GB/s vs iperf3",
	  bench_cluster_main },
};

#define CLI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int cli_is_help(const char *arg)
{
	return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

static const struct cli_cmd *cli_find(const struct cli_cmd *cmds, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(cmds[i].name, name) == 0)
			return &cmds[i];
	return NULL;
}

static void cli_list(FILE *f, const struct cli_cmd *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
}

static void cli_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier <command> [options]\n"
		"       kvtier --help | --version\n"
		"\n"
		"kvtier inspects, loads and measures libkvtier stores.\n"
		"\n"
		"Commands:\n");
	cli_list(f, cli_cmds, CLI_ARRAY_LEN(cli_cmds));
	fprintf(f,
		"\n"
		"Every command takes --help.  Exit status: 0 ok, 1 runtime failure\n"
		"(a server that cannot be reached included), 2 usage error; get and rm\n"
		"exit 3 for a key that is not there, who 4 when some nodes did not answer.\n"
		"Manual: kvtier(1), kvtier-admin(1), kvtier-bench(1), kvtier-replay(1).\n");
}

static void cli_bench_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench <suite> [options]\n"
		"\n"
		"Measure libkvtier, through its public API, against the physical\n"
		"limit on this machine (memcpy for DRAM, fio for SSD) and kvtierd\n"
		"against its peers (memcached, redis-server, iperf3), A/B\n"
		"interleaved, medians.\n"
		"\n"
		"Suites:\n");
	cli_list(f, bench_suites, CLI_ARRAY_LEN(bench_suites));
	fprintf(f,
		"\n"
		"Run 'kvtier bench <suite> --help' for a suite's options; kvtier-bench(1).\n");
}

/*
 * Look argv[0] up in cmds and run it with the rest.  what names the level
 * for messages ("kvtier", "kvtier bench"); usage prints that level's help.
 */
static int cli_dispatch(const char *what, const char *noun, const struct cli_cmd *cmds,
			size_t n, void (*usage)(FILE *), int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "%s: missing %s\n\n", what, noun);
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[0])) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	const struct cli_cmd *c = cli_find(cmds, n, argv[0]);
	if (c == NULL) {
		if (argv[0][0] == '-')
			fprintf(stderr, "%s: unknown option '%s'\n", what, argv[0]);
		else
			fprintf(stderr, "%s: unknown %s '%s'\n", what, noun, argv[0]);
		fprintf(stderr, "Run '%s --help' to list the %ss.\n", what, noun);
		return CLI_EXIT_USAGE;
	}
	/* getopt names the program by argv[0] in its messages: "kvtier stat:
	 * unrecognized option '--x'", not "stat: ...". */
	char full[96];
	snprintf(full, sizeof(full), "%s %s", what, c->name);
	argv[0] = full;
	return c->run(argc, argv);
}

static int cli_bench(int argc, char **argv)
{
	return cli_dispatch("kvtier bench", "suite", bench_suites, CLI_ARRAY_LEN(bench_suites),
			    cli_bench_usage, argc - 1, argv + 1);
}

/* "kvtier help [cmd [sub]]": the same text as "kvtier cmd [sub] --help". */
static int cli_help(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		cli_usage(stdout);
		return CLI_EXIT_OK;
	}
	if (argc > 3) {
		fprintf(stderr, "kvtier help: too many arguments\n"
				"Run 'kvtier help <command> [<sub-command>]'.\n");
		return CLI_EXIT_USAGE;
	}
	/* Rebuild "cmd [sub] --help" and dispatch it. */
	char help_arg[] = "--help";
	char *args[4];
	int n = 0;
	for (int i = 1; i < argc; i++)
		args[n++] = argv[i];
	args[n++] = help_arg;
	args[n] = NULL;
	return cli_dispatch("kvtier", "command", cli_cmds, CLI_ARRAY_LEN(cli_cmds), cli_usage, n, args);
}

static void cli_print_version(void)
{
	printf("kvtier %d.%d.%d (libkvtier %s)\n", KVTIER_VERSION_MAJOR, KVTIER_VERSION_MINOR,
	       KVTIER_VERSION_PATCH, kvt_version());
}

static int cli_version(int argc, char **argv)
{
	if (argc > 1 && cli_is_help(argv[1])) {
		printf("usage: kvtier version\n\n"
		       "Print the version kvtier was built with and the version of the\n"
		       "libkvtier it runs with (they differ if the shared library was\n"
		       "replaced).\n");
		return CLI_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "kvtier version: unexpected argument '%s'\n"
				"Run 'kvtier version' with no arguments.\n", argv[1]);
		return CLI_EXIT_USAGE;
	}
	cli_print_version();
	return CLI_EXIT_OK;
}

/* "kvtier options": kvt_option_info's table, one option a line. */
static int cli_options(int argc, char **argv)
{
	struct kvt_option o;
	if (argc > 1 && cli_is_help(argv[1])) {
		printf("usage: kvtier options\n\n"
		       "List every option kvt_store_set_option (and kvtierd --set) takes:\n"
		       "name, type, default, bounds or values, and what it does.  Sizes\n"
		       "take K, M, G, T (powers of 1024), optionally followed by i and B.\n");
		return CLI_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "kvtier options: unexpected argument '%s'\n"
				"Run 'kvtier options' with no arguments.\n", argv[1]);
		return CLI_EXIT_USAGE;
	}
	printf("%-27s %-7s %-18s %-26s %s\n", "NAME", "TYPE", "DEFAULT", "VALUES", "WHAT");
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++) {
		char range[64];
		if (o.values)
			snprintf(range, sizeof(range), "%s", o.values);
		else if (strcmp(o.type, "list") == 0)
			snprintf(range, sizeof(range), "tier names");
		else if (o.max == UINT64_MAX)
			snprintf(range, sizeof(range), ">= %llu", (unsigned long long)o.min);
		else
			snprintf(range, sizeof(range), "%llu..%llu", (unsigned long long)o.min,
				 (unsigned long long)o.max);
		printf("%-27s %-7s %-18s %-26s %s\n", o.name, o.type, o.def ? o.def : "-", range,
		       o.doc);
	}
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
		if (argc > 2) {
			fprintf(stderr, "kvtier: --version takes no arguments\n");
			return CLI_EXIT_USAGE;
		}
		cli_print_version();
		return CLI_EXIT_OK;
	}
	int rc = cli_dispatch("kvtier", "command", cli_cmds, CLI_ARRAY_LEN(cli_cmds), cli_usage,
			      argc - 1, argv + 1);
	/* A full disk or a closed pipe on stdout is a failure, not success. */
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK) {
		perror("kvtier: writing output");
		rc = CLI_EXIT_FAIL;
	}
	return rc;
}

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

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* "kvtier bench seal": bench/bench_seal.c (sealed vs unsealed vs raw AES-GCM). */
int bench_seal_main(int argc, char **argv);

/* "kvtier bench net": bench/bench_net.c (starts kvtierd, memcached,
 * redis-server, iperf3; returns 77 if one of the peers is not installed). */
int bench_net_main(int argc, char **argv);

/* "kvtier bench cluster": bench/bench_cluster.c (starts N kvtierd nodes and
 * iperf3; an engine's store over them; returns 77 if iperf3 is missing). */
int bench_cluster_main(int argc, char **argv);

/* "kvtier bench s3": bench/bench_s3.c (starts kvtierd with --s3; its S3
 * listener against its native protocol, and --peer, with one libcurl
 * client; doc/s3.md). */
int bench_s3_main(int argc, char **argv);

/*
 * bench_reply.c: the net suite's parsers of its peers' replies.  Pure, any
 * thread, never past len (no NUL needed).
 *
 * bench_reply_mc: one memcached meta reply line without its "\r\n":
 * "VA <len> ..." (BENCH_REPLY_VALUE, *vlen set), "EN" (MISS), "HD"
 * (STORED), "MN" (PONG), else -EPROTO.  bench_reply_resp: one RESP reply
 * line: "$<len>" (VALUE), "$-1" (MISS), "+OK" (STORED), "+PONG" (PONG),
 * else -EPROTO (an "-ERR ..." too).  Lengths: 1..20 digits, no overflow.
 *
 * bench_reply_json_num: the number after the n keys found one after the
 * other (each the first "key" after the previous one) in json[0..len):
 * 0 (*out set, a finite number >= 0), -ENOENT (a key missing), -EPROTO (no
 * ':' and number after the last key), -EINVAL (n 0 or a key over 70 bytes).
 */
enum { BENCH_REPLY_VALUE = 0, BENCH_REPLY_MISS = 1, BENCH_REPLY_STORED = 2, BENCH_REPLY_PONG = 3 };
int bench_reply_mc(const char *line, size_t len, uint64_t *vlen);
int bench_reply_resp(const char *line, size_t len, uint64_t *vlen);
int bench_reply_json_num(const char *json, size_t len, const char *const *keys, unsigned n,
			 double *out);

/*
 * bench_net.c: the net suite's native client of one kvtierd, for other
 * suites to compare against (bench_cluster.c's direct rows).  Blocking,
 * one request in flight per connection, 60 s I/O timeout; one thread per
 * connection.  connect: 127.0.0.1:port, HELLO, AUTH NONE as "default",
 * NS_REGISTER of the net suite's namespace.  get: the value into
 * dst[0..cap) (0 and *got, KVT_MISS, or an error); put: one part with its
 * CRC32C (0, also if present already, or an error).  Keys: 1..KVT_KEY_MAX
 * bytes.
 */
struct bench_kvt;
int bench_kvt_connect(struct bench_kvt **out, uint16_t port);
void bench_kvt_close(struct bench_kvt *k);
int bench_kvt_get(struct bench_kvt *k, const void *key, uint32_t key_len, uint8_t *dst,
		  uint64_t cap, uint64_t *got);
int bench_kvt_put(struct bench_kvt *k, const void *key, uint32_t key_len, const uint8_t *src,
		  uint64_t len, uint32_t crc);

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
/* The machine's load at `when` ("start", "end") as one line of text into
 * buf: "load average 1.20 on 2 CPUs at the start", with a warning appended
 * when other processes compete (a 1-minute load over half the CPUs; *busy
 * says so).  NULL if /proc/loadavg cannot be read. */
const char *bench_load_text(char *buf, size_t len, const char *when, bool *busy);
/*
 * Messages, the same in every suite.  bench_err: "WHO: message" and a
 * newline on stderr (bench_verr from a va_list).  bench_usage_err: the
 * same, then "Run 'WHO --help' for the options."; returns
 * BENCH_EXIT_USAGE.  bench_progress: when on, the status line on stderr
 * rewritten in place ("[TAG] message", no newline); bench_progress_end
 * clears it.  bench_note: "# message" on stdout (a comment beside the
 * table) after clearing the progress line; nothing with --json.
 */
#define BENCH_PRINTF(f, a) __attribute__((format(printf, f, a)))
void bench_err(const char *who, const char *fmt, ...) BENCH_PRINTF(2, 3);
void bench_verr(const char *who, const char *fmt, va_list ap) BENCH_PRINTF(2, 0);
int bench_usage_err(const char *who, const char *fmt, ...) BENCH_PRINTF(2, 3);
void bench_progress(bool on, const char *tag, const char *fmt, ...) BENCH_PRINTF(3, 4);
void bench_progress_end(bool on);
void bench_note(bool json, bool progress, const char *fmt, ...) BENCH_PRINTF(3, 4);
#define BENCH_ROUNDS_MAX 15 /* the net and cluster suites' --rounds */
#define BENCH_MEDIAN_MAX 99 /* the most --rounds a suite takes (dram, ssd, seal, shared) */
double bench_median(const double *v, unsigned n);       /* of n <= BENCH_MEDIAN_MAX; 0 if none */
/* JSON fields of a line being printed: ,"name":[v0,v1,...] (%.3f each);
 * ,"name":v with fmt, or null where v < 0. */
void bench_json_rounds(const char *name, const double *v, unsigned n);
void bench_json_num(const char *name, double v, const char *fmt);
/* ,"pass":true|false; null in a smoke run (its figures prove nothing). */
void bench_json_pass(bool smoke, bool pass);

/*
 * Options and tables of the suites that print one (dram, ssd).
 * bench_parse_uint: s (a size such as 64 or 4K) in lo..hi into *out, 0 or
 * -1.  bench_parse_sizes: --sizes' comma-separated list of sizes, each
 * 1..max_size, at most max of them, into sizes[] and *count: 0, or
 * BENCH_EXIT_USAGE (said, as who).  bench_load_note: the machine's load at
 * `when` (bench_load_text) as a note beside the table, or on stderr under
 * --json where other processes compete.  bench_cell_print: one row of the
 * table (not under --json), the column names first unless *header_done
 * (then set); bench_w and result_w: the widths of those two columns.
 */
int bench_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out);
int bench_parse_sizes(const char *who, const char *arg, uint64_t max_size, uint64_t *sizes,
		      unsigned max, unsigned *count);
void bench_load_note(const char *who, bool json, bool progress, const char *when);
struct bench_cell {
	const char *bench;
	char value[24];
	char kvtier[24];
	char baseline[24];
	char ratio[12];
	char target[16];
	const char *result;
	char notes[320];
};
void bench_cell_print(const struct bench_cell *c, bool json, bool progress, bool *header_done,
		      int bench_w, int result_w);
/* A store's log lines on stderr ("libkvtier: LEVEL: message"), for
 * kvt_store_set_log; and, after a failure, every statistic of s on stderr
 * under "WHO: store statistics at the failure:", so the report has
 * evidence. */
struct kvt_store;
void bench_store_log(void *ctx, int level, const char *msg);
void bench_stat_dump(const char *who, struct kvt_store *s);

/* "kvtier bench cluster --heal": bench/bench_heal.c (a pod of kvtierd in
 * etcd healing after kill -9 and a drain, against iperf3). */
int bench_heal_main(int argc, char **argv);

/* "kvtier bench shared": bench/bench_shared.c (the shared tier's directory
 * backend against fio, its S3 backend against a plain libcurl client). */
int bench_shared_main(int argc, char **argv);

/*
 * bench_proc.c.  bench_spawn_capture: run argv[0] (found on PATH) with
 * argv, its stdout captured and returned (malloc'd, NUL terminated), its
 * stderr written to errpath; *wall_s the time from spawn to exit.  NULL
 * (a message in err[0..err_len), with the start of its stderr) if it could
 * not run or exited non-zero.  bench_json_u64: the first number of "key"
 * after obj (0 or -1); bench_json_obj: just after the '{' of the first
 * "key": { in s, or NULL (fio's JSON).
 */
char *bench_spawn_capture(char *const argv[], const char *errpath, double *wall_s, char *err,
			  size_t err_len);
int bench_json_u64(const char *obj, const char *key, uint64_t *out);
const char *bench_json_obj(const char *s, const char *key);
/* read_bytes and write_bytes of /proc/self/io: bytes this process, its
 * threads and the children it has reaped (fio) caused to be read from or
 * written to the storage layer (O_DIRECT counted, page-cache hits not).
 * 0, or -1 if unreadable (then nothing is proven). */
int bench_proc_io(uint64_t *rd, uint64_t *wr);
/* The same for process pid (a server the bench started). */
int bench_pid_io(pid_t pid, uint64_t *rd, uint64_t *wr);

/*
 * bench_proc.c: servers a suite starts and stops itself, on 127.0.0.1.
 * From the suite's main thread only (one process-wide table of children).
 *
 * bench_signals_catch: SIGINT, SIGTERM, SIGHUP kill every child spawned
 * (then the bench dies of the signal); SIGPIPE ignored.  old[3] receives
 * the previous handlers for bench_signals_restore.
 * bench_which: prog (on PATH, /usr/sbin, /sbin; or a path with a '/') if
 * executable, its path into out.  bench_find_kvtierd: the kvtierd next to
 * this kvtier (build/cli/kvtier -> build/daemon/kvtierd, bin -> sbin, or
 * the same directory).  bench_free_port: a port free a moment ago, for
 * servers that cannot take port 0 (0 or -errno).
 * bench_spawn: fork + exec argv[0] (a path) with stdout and stderr
 * appended to log; the child dies with the bench.  Returns the pid or
 * -errno.  bench_wait: wait for it (its status).  bench_stop: SIGTERM,
 * up to 10 s, then SIGKILL; its wait status, or -1.  bench_exited: true
 * (status in *st) if it has exited.  bench_print_log: log to stderr.
 * bench_wait_log: until a line of log holds needle (0, the rest of the
 * line into rest unless NULL), the child exits (-ECHILD, *pid set to 0,
 * its log printed) or timeout_s pass (-ETIMEDOUT).
 */
#define BENCH_START_TIMEOUT_S 60.0
void bench_signals_catch(struct sigaction old[3]);
void bench_signals_restore(const struct sigaction old[3]);
bool bench_which(const char *prog, char *out, size_t len);
bool bench_find_kvtierd(char *out, size_t len);
int bench_free_port(uint16_t *port);
pid_t bench_spawn(char *const argv[], const char *log);
int bench_wait(pid_t pid);
int bench_stop(pid_t pid);
bool bench_exited(pid_t pid, int *st);
void bench_print_log(const char *path);
int bench_wait_log(pid_t *pid, const char *log, const char *needle, double timeout_s,
		   char *rest, size_t rest_len);
/* bench_run_to_file: run argv (a path) to its end, its output into
 * out_path; that output (up to 1 MiB, NUL terminated, malloc'd: the
 * caller frees it; NULL if it could not run or be read), *st its wait
 * status, *len its length.  bench_rm_tree: rm -r path (a directory the
 * run made), links not followed, failures reported on stderr. */
char *bench_run_to_file(char *const argv[], const char *out_path, int *st, size_t *len);
void bench_rm_tree(const char *path);

/*
 * bench_kvtierd_start: kvtierd (path) --dir dir --dram --ssd --threads
 * --listen 127.0.0.1:0 --idle-timeout 0, then extra (NULL-terminated, may
 * be NULL), its output into log; waits for its "listening on" line and
 * reads the port it took from it.  0 (*pid, *port set), or < 0 (*pid 0
 * if it exited, else still running: stop it).  Every string is the
 * caller's.
 */
struct bench_kvtierd {
	const char *path, *dir, *log;
	uint64_t dram, ssd;        /* bytes; ssd 0: DRAM only */
	unsigned threads;          /* loop threads */
	const char *const *extra;
};
int bench_kvtierd_start(const struct bench_kvtierd *k, pid_t *pid, uint16_t *port);

/*
 * bench_iperf3_start: "iperf3 -s" on a free port, output into log, until
 * it says it listens: 0 or < 0.  bench_iperf3: one client run of streams
 * streams, 1 MiB writes, amount_opt amount ("-t" "2" or "-n" "64M"), its
 * JSON into out_path; *gbps the receiver's GB/s (1e9 bytes).  Retries a
 * busy server; 0 or -EIO.
 */
int bench_iperf3_start(const char *iperf3, const char *log, pid_t *pid, uint16_t *port);
int bench_iperf3(const char *iperf3, uint16_t port, unsigned streams, const char *amount_opt,
		 const char *amount, const char *out_path, double *gbps);

#endif /* KVT_BENCH_H */

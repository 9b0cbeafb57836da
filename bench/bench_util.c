/*
 * bench_util.c - what every benchmark suite shares: the clock, the
 * deterministic byte streams values are filled with (so every read can be
 * checked), sizes in and out of text, the statistics of rounds, and the
 * error, progress and note lines every suite prints.
 * Pure helpers, any thread; the only kvtier call is bench_stat_dump's
 * kvt_store_stats.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "kvtier.h"

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t bench_splitmix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/* The bytes of value i of a given size: an xorshift64 stream from its seed. */
uint64_t bench_seed(uint64_t size, uint64_t i)
{
	return bench_splitmix(size * UINT64_C(0x100000001b3) ^ bench_splitmix(i)) | 1;
}

uint64_t bench_xorshift(uint64_t *x)
{
	uint64_t v = *x;
	v ^= v << 13;
	v ^= v >> 7;
	v ^= v << 17;
	*x = v;
	return v;
}

void bench_fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed, w;
	size_t off = 0;
	for (; off + 8 <= len; off += 8) {
		w = bench_xorshift(&x);
		memcpy(p + off, &w, 8);
	}
	if (off < len) {
		w = bench_xorshift(&x);
		memcpy(p + off, &w, len - off);
	}
}

uint64_t bench_align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/*
 * Parse "256K", "2M", "2GiB", "1048576": powers of 1024, as
 * kvt_store_set_option reads sizes.  Returns 0 or -1.
 */
int bench_parse_size(const char *s, uint64_t *out)
{
	return kvt_parse_size(s, out) < 0 ? -1 : 0; /* the library's grammar */
}

/* "256 KiB", "2 MiB", "1.50 GiB", "100 B" into buf. */
const char *bench_fmt_size(char *buf, size_t len, uint64_t v)
{
	const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned u = 0;
	uint64_t w = v;
	while (u < 4 && w >= 1024 && w % 1024 == 0) {
		w /= 1024;
		u++;
	}
	if (w < 1024 || u == 4) {
		snprintf(buf, len, "%" PRIu64 " %s", w, units[u]);
		return buf;
	}
	double d = (double)v;
	u = 0;
	while (u < 4 && d >= 1024) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.2f %s", d, units[u]);
	return buf;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_rate(double amount, double secs)
{
	return amount / (secs > 1e-9 ? secs : 1e-9);
}

double bench_median(const double *v, unsigned n)
{
	double s[BENCH_MEDIAN_MAX];
	if (n == 0 || n > BENCH_MEDIAN_MAX)
		return 0;
	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), bench_cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

void bench_json_rounds(const char *name, const double *v, unsigned n)
{
	printf(",\"%s\":[", name);
	for (unsigned r = 0; r < n; r++)
		printf("%s%.3f", r ? "," : "", v[r]);
	putchar(']');
}

void bench_json_num(const char *name, double v, const char *fmt)
{
	printf(",\"%s\":", name);
	if (v < 0)
		printf("null");
	else
		printf(fmt, v);
}

void bench_json_pass(bool smoke, bool pass)
{
	if (smoke)
		printf(",\"pass\":null");
	else
		printf(",\"pass\":%s", pass ? "true" : "false");
}

int bench_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t v;
	if (bench_parse_size(s, &v) < 0 || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int bench_parse_sizes(const char *who, const char *arg, uint64_t max_size, uint64_t *sizes,
		      unsigned max, unsigned *count)
{
	char buf[512], *save = NULL, *tok;
	snprintf(buf, sizeof(buf), "%s", arg);
	*count = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (bench_parse_size(tok, &v) < 0 || v == 0 || v > max_size)
			return bench_usage_err(who, "--sizes: '%s' is not a value size such as 2M",
					       tok);
		if (*count == max)
			return bench_usage_err(who, "--sizes: at most %u sizes", max);
		sizes[(*count)++] = v;
	}
	if (*count == 0)
		return bench_usage_err(who, "--sizes: empty list; e.g. --sizes 256K,2M,16M");
	return 0;
}

void bench_cell_print(const struct bench_cell *c, bool json, bool progress, bool *header_done,
		      int bench_w, int result_w)
{
	if (json)
		return;
	bench_progress_end(progress);
	if (!*header_done) {
		printf("%-*s %-9s %15s %15s %6s %9s %-*s %s\n", bench_w, "bench", "value", "kvtier",
		       "baseline", "ratio", "target", result_w, "result", "notes");
		*header_done = true;
	}
	printf("%-*s %-9s %15s %15s %6s %9s %-*s %s\n", bench_w, c->bench, c->value, c->kvtier,
	       c->baseline, c->ratio, c->target, result_w, c->result, c->notes);
	fflush(stdout);
}

/*
 * Other processes on the same cores (and disk) make A/B rounds disagree,
 * so a run says how busy the machine was when it started and ended.
 */
void bench_load_note(const char *who, bool json, bool progress, const char *when)
{
	char text[160];
	bool busy = false;
	if (!bench_load_text(text, sizeof(text), when, &busy))
		return;
	if (!json)
		bench_note(json, progress, "%s", text);
	else if (busy)
		fprintf(stderr, "%s: %s\n", who, text);
}

void bench_store_log(void *ctx, int level, const char *msg)
{
	static const char *names[] = { "error", "warn", "info", "debug" };
	(void)ctx;
	fprintf(stderr, "libkvtier: %s: %s\n",
		level >= 0 && level <= 3 ? names[level] : "?", msg);
}

static void bench_stat_dump_fn(void *ctx, const char *name, uint64_t value, const char *str)
{
	(void)ctx;
	if (str != NULL)
		fprintf(stderr, "  %s = %s\n", name, str);
	else
		fprintf(stderr, "  %s = %" PRIu64 "\n", name, value);
}

void bench_stat_dump(const char *who, struct kvt_store *s)
{
	fprintf(stderr, "%s: store statistics at the failure:\n", who);
	if (kvt_store_stats(s, bench_stat_dump_fn, NULL) < 0)
		fprintf(stderr, "  (kvt_store_stats failed)\n");
}

const char *bench_load_text(char *buf, size_t len, const char *when, bool *busy)
{
	double l1 = -1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	FILE *f = fopen("/proc/loadavg", "r");
	if (f != NULL) {
		if (fscanf(f, "%lf", &l1) != 1)
			l1 = -1;
		fclose(f);
	}
	if (l1 < 0 || cpus < 1)
		return NULL;
	*busy = l1 > 0.5 * (double)cpus;
	snprintf(buf, len, "load average %.2f on %ld CPUs at the %s%s", l1, cpus, when,
		 *busy ? ": WARNING, other processes compete, figures are noisy" : "");
	return buf;
}

void bench_verr(const char *who, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void bench_err(const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bench_verr(who, fmt, ap);
	va_end(ap);
}

int bench_usage_err(const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bench_verr(who, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Run '%s --help' for the options.\n", who);
	return BENCH_EXIT_USAGE;
}

void bench_progress(bool on, const char *tag, const char *fmt, ...)
{
	va_list ap;
	if (!on)
		return;
	fprintf(stderr, "\r\033[K[%s] ", tag);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

void bench_progress_end(bool on)
{
	if (on)
		fputs("\r\033[K", stderr);
}

void bench_note(bool json, bool progress, const char *fmt, ...)
{
	va_list ap;
	if (json)
		return;
	bench_progress_end(progress);
	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

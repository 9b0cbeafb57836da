/*
 * top.c - `kvtier top`: a live terminal view of one kvtierd or a whole pod
 * (like htop or redis-cli --stat), from their Prometheus /metrics
 * (doc/metrics.md): the one place kvtierd exports its latency histograms
 * and per-tenant traffic.  Sits in the CLI; fetches with libcurl, parses
 * with promtext.c, keeps the previous scrape of every server and shows
 * rates over the interval between the two:
 *
 *   - servers: up, connections, network in/out, memory of --max-memory,
 *     errors/s;
 *   - tiers (summed over the servers): hit ratio, hits/s, misses/s, bytes
 *     in/out per second, evictions/s, used of capacity; the SSD write-down
 *     backlog;
 *   - latency by op and serving tier: requests/s, p50, p99 (interpolated
 *     in the histogram's buckets as Prometheus's histogram_quantile does);
 *   - the top tenants by bytes per second.
 *
 * On a terminal (stdin and stdout both TTYs) the screen is redrawn every
 * interval and 'q' quits (stdin in non-canonical mode, restored on every
 * exit path); otherwise one logfmt line per interval is written, for logs
 * and pipes.  SIGINT/SIGTERM stop either.  Main thread only.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "promtext.h"
#include "top.h"

#define TOP_SERVERS_MAX 64
#define TOP_BUCKETS_MAX 64
#define TOP_BODY_MAX (16u << 20)

struct top_server {
	char addr[256];
	char url[300];
	struct pt_set cur, prev;
	bool up, was_up;
	char err[CURL_ERROR_SIZE];
};

struct top {
	struct top_server srv[TOP_SERVERS_MAX];
	unsigned count;
	char auth[600]; /* "Authorization: Bearer ..." or "" */
	double dt;      /* seconds between the last two scrapes; 0: first */
	bool tty;
};

static volatile sig_atomic_t top_stop;

static void top_on_signal(int sig)
{
	(void)sig;
	top_stop = 1;
}

/* ------------------------------------------------------------------------
 * Fetching
 */

struct top_body {
	char *p;
	size_t len, cap;
};

static size_t top_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct top_body *b = ctx;
	size_t n = size * nmemb;

	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > TOP_BODY_MAX)
			return 0;
		char *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	return n;
}

static void top_fetch(struct top *t, struct top_server *s, CURL *c)
{
	struct top_body b = { 0 };
	struct curl_slist *hdr = NULL;
	long code = 0;
	CURLcode rc;

	pt_free(&s->prev);
	s->prev = s->cur;
	memset(&s->cur, 0, sizeof(s->cur));
	s->was_up = s->up;
	s->up = false;
	s->err[0] = 0;
	if (t->auth[0])
		hdr = curl_slist_append(NULL, t->auth);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, s->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, top_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, s->err);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK) {
		if (!s->err[0])
			snprintf(s->err, sizeof(s->err), "%s", curl_easy_strerror(rc));
	} else if (code != 200) {
		snprintf(s->err, sizeof(s->err), "HTTP %ld%s", code,
			 code == 401 ? " (a --token-file is needed)" : "");
	} else if (pt_parse(&s->cur, b.p ? b.p : "", b.len) < 0) {
		snprintf(s->err, sizeof(s->err), "out of memory");
	} else {
		s->up = true;
	}
	curl_slist_free_all(hdr);
	free(b.p);
}

/* ------------------------------------------------------------------------
 * Figures
 */

/* Sum over the servers of name{key=val} now; *n counts servers with it. */
static double top_now(const struct top *t, const char *name, const char *key, const char *val)
{
	double v = 0;

	for (unsigned i = 0; i < t->count; i++)
		if (t->srv[i].up)
			v += pt_sum(&t->srv[i].cur, name, key, val, NULL);
	return v;
}

/* Per second over the interval, summed over the servers up in both
 * scrapes; NAN on the first scrape. */
static double top_rate(const struct top *t, const char *name, const char *key, const char *val)
{
	double v = 0;

	if (t->dt <= 0)
		return NAN;
	for (unsigned i = 0; i < t->count; i++) {
		const struct top_server *s = &t->srv[i];
		if (!s->up || !s->was_up)
			continue;
		double d = pt_sum(&s->cur, name, key, val, NULL) -
			   pt_sum(&s->prev, name, key, val, NULL);
		if (d > 0) /* a restart resets counters: count nothing then */
			v += d;
	}
	return v / t->dt;
}

static double top_rate_srv(const struct top *t, const struct top_server *s, const char *name)
{
	if (t->dt <= 0 || !s->up || !s->was_up)
		return NAN;
	double d = pt_sum(&s->cur, name, NULL, NULL, NULL) - pt_sum(&s->prev, name, NULL, NULL, NULL);
	return d > 0 ? d / t->dt : 0;
}

/* A histogram's buckets for op and tier over the interval, summed over the
 * servers: le[] ascending (+Inf last), cnt[] cumulative.  Returns the
 * bucket count (0: none). */
static unsigned top_hist(const struct top *t, const char *op, const char *tier, double *le,
			 double *cnt)
{
	static const char name[] = "kvtier_request_duration_seconds_bucket";
	unsigned n = 0;
	char v[64];

	for (unsigned i = 0; i < t->count; i++) {
		const struct top_server *s = &t->srv[i];
		if (!s->up || !s->was_up)
			continue;
		unsigned k = 0;
		for (size_t j = 0; j < s->cur.n; j++) {
			const struct pt_sample *c = &s->cur.v[j];
			if (strcmp(c->name, name) != 0 || pt_label(c, "op", v, sizeof(v)) < 0 ||
			    strcmp(v, op) != 0 || pt_label(c, "tier", v, sizeof(v)) < 0 ||
			    strcmp(v, tier) != 0 || pt_label(c, "le", v, sizeof(v)) < 0)
				continue;
			double before = 0;
			for (size_t q = 0; q < s->prev.n; q++)
				if (strcmp(s->prev.v[q].name, name) == 0 &&
				    strcmp(s->prev.v[q].labels, c->labels) == 0) {
					before = s->prev.v[q].value;
					break;
				}
			double bound = strtod(v, NULL); /* "+Inf" reads as inf */
			if (k == n) {
				if (n == TOP_BUCKETS_MAX)
					break;
				le[n] = bound;
				cnt[n++] = 0;
			}
			if (le[k] == bound)
				cnt[k] += c->value > before ? c->value - before : 0;
			k++;
		}
	}
	return n;
}

/* histogram_quantile's interpolation: q of the counts in cnt[] (cumulative,
 * le[] ascending, le[n-1] = +Inf).  NAN without observations. */
static double top_quantile(double q, const double *le, const double *cnt, unsigned n)
{
	if (n < 2 || cnt[n - 1] <= 0)
		return NAN;
	double rank = q * cnt[n - 1];
	unsigned b = 0;
	while (b < n - 1 && cnt[b] < rank)
		b++;
	if (b == n - 1)
		return le[n - 2]; /* in the +Inf bucket: its lower bound */
	double lo = b ? le[b - 1] : 0, below = b ? cnt[b - 1] : 0;
	double in = cnt[b] - below;
	return in > 0 ? lo + (le[b] - lo) * (rank - below) / in : le[b];
}

/* ------------------------------------------------------------------------
 * Output
 */

static void top_fmt_rate(char *out, size_t cap, double v, double scale, const char *fmt)
{
	if (isnan(v))
		snprintf(out, cap, "-");
	else
		snprintf(out, cap, fmt, v / scale);
}

static void top_fmt_secs(char *out, size_t cap, double s)
{
	if (isnan(s))
		snprintf(out, cap, "-");
	else if (s < 1e-3)
		snprintf(out, cap, "%.0f us", s * 1e6);
	else if (s < 1)
		snprintf(out, cap, "%.2f ms", s * 1e3);
	else
		snprintf(out, cap, "%.2f s", s);
}

static double top_ratio(double h, double m)
{
	return h + m > 0 ? 100.0 * h / (h + m) : NAN;
}

static const char *const top_tiers[] = { "dram", "ssd" };
static const char *const top_lat_tiers[] = { "dram", "ssd", "remote", "shared", "none" };
static const char *const top_ops[] = { "read", "write" };

struct top_tenant {
	char name[80];
	double in, out;
};

static int top_tenant_cmp(const void *a, const void *b)
{
	const struct top_tenant *x = a, *y = b;
	double bx = x->in + x->out, by = y->in + y->out;
	return bx < by ? 1 : bx > by ? -1 : strcmp(x->name, y->name);
}

static unsigned top_tenants(const struct top *t, struct top_tenant *out, unsigned cap)
{
	unsigned n = 0;
	char name[80];

	for (unsigned i = 0; i < t->count; i++) {
		const struct top_server *s = &t->srv[i];
		for (size_t j = 0; s->up && j < s->cur.n; j++) {
			if (strcmp(s->cur.v[j].name, "kvtier_tenant_requests_total") != 0 ||
			    pt_label(&s->cur.v[j], "tenant", name, sizeof(name)) < 0)
				continue;
			unsigned k;
			for (k = 0; k < n && strcmp(out[k].name, name) != 0; k++)
				;
			if (k == n && n < cap) {
				snprintf(out[n].name, sizeof(out[n].name), "%s", name);
				out[n].in = top_rate(t, "kvtier_tenant_bytes_in_total", "tenant", name);
				out[n].out = top_rate(t, "kvtier_tenant_bytes_out_total", "tenant", name);
				n++;
			}
		}
	}
	qsort(out, n, sizeof(*out), top_tenant_cmp);
	return n;
}

static void top_screen(const struct top *t, double interval)
{
	char a[32], b[32], c[32], d[32], e[32], f[32];
	time_t now = time(NULL);
	struct tm tm;
	unsigned up = 0;

	localtime_r(&now, &tm);
	for (unsigned i = 0; i < t->count; i++)
		up += t->srv[i].up;
	printf("\033[H\033[2J");
	printf("kvtier top - %u of %u server%s up - every %.1f s - %02d:%02d:%02d    (q quits)\n\n",
	       up, t->count, t->count == 1 ? "" : "s", interval, tm.tm_hour, tm.tm_min, tm.tm_sec);

	printf("%-24s %5s %7s %10s %10s %6s %8s\n", "SERVER", "UP", "CONNS", "IN MB/s", "OUT MB/s",
	       "MEM%", "ERR/s");
	for (unsigned i = 0; i < t->count; i++) {
		const struct top_server *s = &t->srv[i];
		if (!s->up) {
			printf("%-24.24s %5s  %s\n", s->addr, "down", s->err);
			continue;
		}
		double lim = pt_sum(&s->cur, "kvtier_server_memory_limit_bytes", NULL, NULL, NULL);
		double mem = pt_sum(&s->cur, "kvtier_server_memory_bytes", NULL, NULL, NULL);
		top_fmt_rate(a, sizeof(a), top_rate_srv(t, s, "kvtier_server_bytes_in_total"), 1e6,
			     "%.2f");
		top_fmt_rate(b, sizeof(b), top_rate_srv(t, s, "kvtier_server_bytes_out_total"), 1e6,
			     "%.2f");
		top_fmt_rate(c, sizeof(c), lim > 0 ? 100 * mem / lim : NAN, 1, "%.1f");
		top_fmt_rate(d, sizeof(d), top_rate_srv(t, s, "kvtier_errors_total"), 1, "%.1f");
		printf("%-24.24s %5s %7.0f %10s %10s %6s %8s\n", s->addr, "yes",
		       pt_sum(&s->cur, "kvtier_connections_active", NULL, NULL, NULL), a, b, c, d);
	}

	printf("\n%-6s %7s %10s %10s %10s %10s %9s %21s\n", "TIER", "HIT%", "HITS/s", "MISSES/s",
	       "IN MB/s", "OUT MB/s", "EVICT/s", "USED / CAPACITY GB");
	for (unsigned i = 0; i < 2; i++) {
		char n[5][64];
		const char *const w[5] = { "hits_total", "misses_total", "bytes_in_total",
					   "bytes_out_total", "evictions_total" };
		double r[5];
		for (int k = 0; k < 5; k++) {
			snprintf(n[k], sizeof(n[k]), "kvtier_%s_%s", top_tiers[i], w[k]);
			r[k] = top_rate(t, n[k], NULL, NULL);
		}
		snprintf(n[0], sizeof(n[0]), "kvtier_%s_used_bytes", top_tiers[i]);
		snprintf(n[1], sizeof(n[1]), "kvtier_%s_capacity_bytes", top_tiers[i]);
		top_fmt_rate(a, sizeof(a), top_ratio(r[0], r[1]), 1, "%.1f");
		top_fmt_rate(b, sizeof(b), r[0], 1, "%.0f");
		top_fmt_rate(c, sizeof(c), r[1], 1, "%.0f");
		top_fmt_rate(d, sizeof(d), r[2], 1e6, "%.2f");
		top_fmt_rate(e, sizeof(e), r[3], 1e6, "%.2f");
		top_fmt_rate(f, sizeof(f), r[4], 1, "%.0f");
		printf("%-6s %7s %10s %10s %10s %10s %9s %10.2f / %-9.2f\n", top_tiers[i], a, b, c, d,
		       e, f, top_now(t, n[0], NULL, NULL) / 1e9, top_now(t, n[1], NULL, NULL) / 1e9);
	}
	printf("write-down backlog %.1f MiB; %.0f segments quarantined; %.0f connections\n",
	       top_now(t, "kvtier_ssd_writedown_pending_bytes", NULL, NULL) / 1048576.0,
	       top_now(t, "kvtier_ssd_segments_quarantined", NULL, NULL),
	       top_now(t, "kvtier_connections_active", NULL, NULL));

	printf("\n%-6s %-7s %10s %10s %10s\n", "OP", "TIER", "REQ/s", "p50", "p99");
	int rows = 0;
	for (unsigned o = 0; o < 2; o++)
		for (unsigned i = 0; i < 5; i++) {
			double le[TOP_BUCKETS_MAX], cnt[TOP_BUCKETS_MAX];
			unsigned n = top_hist(t, top_ops[o], top_lat_tiers[i], le, cnt);
			if (!n || cnt[n - 1] <= 0)
				continue;
			top_fmt_secs(a, sizeof(a), top_quantile(0.5, le, cnt, n));
			top_fmt_secs(b, sizeof(b), top_quantile(0.99, le, cnt, n));
			printf("%-6s %-7s %10.1f %10s %10s\n", top_ops[o], top_lat_tiers[i],
			       cnt[n - 1] / t->dt, a, b);
			rows++;
		}
	if (!rows)
		printf("(no requests in this interval)\n");

	struct top_tenant ten[64];
	unsigned nt = top_tenants(t, ten, 64);
	printf("\n%-24s %10s %10s\n", "TENANT (top by bytes)", "IN MB/s", "OUT MB/s");
	for (unsigned i = 0; i < nt && i < 8; i++) {
		top_fmt_rate(a, sizeof(a), ten[i].in, 1e6, "%.2f");
		top_fmt_rate(b, sizeof(b), ten[i].out, 1e6, "%.2f");
		printf("%-24.24s %10s %10s\n", ten[i].name, a, b);
	}
	if (!nt)
		printf("(no tenant has made a request)\n");
	fflush(stdout);
}

/* One logfmt line per interval when not on a terminal. */
static void top_line(const struct top *t)
{
	char ts[32], hd[16], hs[16], p50[32], p99[32];
	time_t now = time(NULL);
	struct tm tm;
	unsigned up = 0;
	double le[TOP_BUCKETS_MAX], cnt[TOP_BUCKETS_MAX], all[TOP_BUCKETS_MAX] = { 0 };
	unsigned nb = 0;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	for (unsigned i = 0; i < t->count; i++)
		up += t->srv[i].up;
	/* read latency over every serving tier */
	for (unsigned i = 0; i < 5; i++) {
		unsigned n = top_hist(t, "read", top_lat_tiers[i], le, cnt);
		if (n && (!nb || n == nb)) {
			nb = n;
			for (unsigned k = 0; k < n; k++)
				all[k] += cnt[k];
		}
	}
	top_fmt_rate(hd, sizeof(hd),
		     top_ratio(top_rate(t, "kvtier_dram_hits_total", NULL, NULL),
			       top_rate(t, "kvtier_dram_misses_total", NULL, NULL)),
		     1, "%.1f");
	top_fmt_rate(hs, sizeof(hs),
		     top_ratio(top_rate(t, "kvtier_ssd_hits_total", NULL, NULL),
			       top_rate(t, "kvtier_ssd_misses_total", NULL, NULL)),
		     1, "%.1f");
	top_fmt_rate(p50, sizeof(p50), nb ? top_quantile(0.5, le, all, nb) : NAN, 1e-6, "%.0f");
	top_fmt_rate(p99, sizeof(p99), nb ? top_quantile(0.99, le, all, nb) : NAN, 1e-6, "%.0f");
	printf("ts=%s servers_up=%u/%u conns=%.0f dram_hit_pct=%s ssd_hit_pct=%s "
	       "reads_per_s=%.1f in_MBps=%.2f out_MBps=%.2f evictions_per_s=%.1f "
	       "read_p50_us=%s read_p99_us=%s backlog_MiB=%.1f errors_per_s=%.1f\n",
	       ts, up, t->count, top_now(t, "kvtier_connections_active", NULL, NULL), hd, hs,
	       top_rate(t, "kvtier_dram_hits_total", NULL, NULL) +
		       top_rate(t, "kvtier_dram_misses_total", NULL, NULL),
	       top_rate(t, "kvtier_server_bytes_in_total", NULL, NULL) / 1e6,
	       top_rate(t, "kvtier_server_bytes_out_total", NULL, NULL) / 1e6,
	       top_rate(t, "kvtier_dram_evictions_total", NULL, NULL) +
		       top_rate(t, "kvtier_ssd_evictions_total", NULL, NULL),
	       p50, p99, top_now(t, "kvtier_ssd_writedown_pending_bytes", NULL, NULL) / 1048576.0,
	       top_rate(t, "kvtier_errors_total", NULL, NULL));
	fflush(stdout);
}

/* ------------------------------------------------------------------------
 * Command
 */

static const char top_help[] =
	"usage: kvtier top [--metrics HOST:PORT[,HOST:PORT...]] [--interval SECS]\n"
	"                  [--token-file FILE] [--count N]\n"
	"\n"
	"A live view of one kvtierd or a pod of them, from their /metrics\n"
	"listeners (kvtierd --metrics): per server up, connections, network\n"
	"MB/s, memory of --max-memory, errors/s; per tier (summed over the\n"
	"servers) hit ratio, hits and misses/s, MB/s in and out, evictions/s,\n"
	"used of capacity, and the SSD write-down backlog; p50 and p99 latency\n"
	"by op and serving tier; the top tenants by bytes.  Rates are over the\n"
	"last interval.  On a terminal the screen refreshes and q quits;\n"
	"otherwise one line per interval is written (logfmt).\n"
	"\n"
	"  --metrics LIST       metrics listeners (default $KVTIER_METRICS, else\n"
	"                       127.0.0.1:9464)\n"
	"  --interval SECS      refresh interval, 0.1..3600 (default 2)\n"
	"  --token-file FILE    bearer token of the metrics listeners (--metrics-token)\n"
	"  --count N            stop after N refreshes (default: until q or a signal)\n"
	"\nExit status: 0 ok, 1 no server answered the first time, 2 usage.  kvtier-admin(1).\n";

static int top_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "kvtier top: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'kvtier top --help' for the options.\n");
	return 2;
}

static int top_servers(struct top *t, const char *list)
{
	const char *p = list;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		struct top_server *s;
		if (n == 0 || n >= sizeof(s->addr) || t->count == TOP_SERVERS_MAX)
			return -1;
		s = &t->srv[t->count++];
		memcpy(s->addr, p, n);
		s->addr[n] = 0;
		snprintf(s->url, sizeof(s->url), "http://%.*s/metrics", (int)n, p);
		p = e ? e + 1 : p + n;
	}
	return t->count ? 0 : -1;
}

static int top_token(struct top *t, const char *path)
{
	char tok[512];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(tok, 1, sizeof(tok) - 1, f);
	fclose(f);
	while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
		n--;
	tok[n] = 0;
	if (!n)
		return -EINVAL;
	snprintf(t->auth, sizeof(t->auth), "Authorization: Bearer %s", tok);
	return 0;
}

/* Wait up to secs for 'q' on a terminal (or just sleep); true: quit. */
static bool top_wait(bool tty, double secs)
{
	double end = cli_now() + secs;

	while (!top_stop) {
		double left = end - cli_now();
		if (left <= 0)
			return false;
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		int r = poll(tty ? &pfd : NULL, tty ? 1 : 0, (int)(left * 1000) + 1);
		if (r > 0) {
			char ch;
			if (read(0, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
				return true;
		}
	}
	return true;
}

int top_main(int argc, char **argv)
{
	enum { O_METRICS = 300, O_INTERVAL, O_TOKEN, O_COUNT };
	static const struct option lo[] = { { "metrics", required_argument, NULL, O_METRICS },
					    { "interval", required_argument, NULL, O_INTERVAL },
					    { "token-file", required_argument, NULL, O_TOKEN },
					    { "count", required_argument, NULL, O_COUNT },
					    { "help", no_argument, NULL, 'h' },
					    { 0 } };
	const char *list = getenv("KVTIER_METRICS"), *token = NULL;
	struct termios saved;
	bool term = false; /* stdin in non-canonical mode, alternate screen on */
	double interval = 2, last = 0;
	long count = -1, done = 0;
	struct top *t;
	CURL *c;
	int opt, ex = 0;
	char *end;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case O_METRICS:
			list = optarg;
			break;
		case O_INTERVAL:
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.1 && interval <= 3600))
				return top_usage("--interval must be 0.1..3600 (got '%s')", optarg);
			break;
		case O_TOKEN:
			token = optarg;
			break;
		case O_COUNT:
			count = strtol(optarg, &end, 10);
			if (*end || count < 1)
				return top_usage("--count must be a positive number (got '%s')", optarg);
			break;
		case 'h':
			fputs(top_help, stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc)
		return top_usage("unexpected argument '%s'", argv[optind]);
	t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "kvtier top: out of memory\n");
		return 1;
	}
	if (top_servers(t, list && *list ? list : "127.0.0.1:9464") < 0) {
		free(t);
		return top_usage("--metrics: want HOST:PORT[,HOST:PORT...] (got '%s')", list);
	}
	if (token && top_token(t, token) < 0) {
		free(t);
		return top_usage("--token-file %s: cannot read a token from it", token);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c = curl_easy_init();
	t->tty = isatty(0) && isatty(1);
	signal(SIGINT, top_on_signal);
	signal(SIGTERM, top_on_signal);
	if (t->tty && tcgetattr(0, &saved) == 0) {
		struct termios raw = saved;
		raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(0, TCSANOW, &raw);
		printf("\033[?1049h\033[?25l"); /* the alternate screen, no cursor */
		term = true;
	} else {
		t->tty = false;
	}
	for (bool first = true; c && !top_stop; first = false) {
		double now = cli_now();
		unsigned up = 0;
		for (unsigned i = 0; i < t->count; i++) {
			top_fetch(t, &t->srv[i], c);
			up += t->srv[i].up;
		}
		t->dt = first ? 0 : now - last;
		last = now;
		if (first && !up) {
			ex = 1; /* said below, once the terminal is restored */
			break;
		}
		if (t->tty)
			top_screen(t, interval);
		else if (!first)
			top_line(t);
		if (!first && count > 0 && ++done >= count)
			break;
		if (top_wait(t->tty, interval))
			break;
	}
	if (term) {
		printf("\033[?25h\033[?1049l");
		fflush(stdout);
		tcsetattr(0, TCSANOW, &saved);
	}
	fflush(stdout);
	for (unsigned i = 0; ex && i < t->count; i++)
		fprintf(stderr, "kvtier top: %s: %s\n", t->srv[i].url, t->srv[i].err);
	for (unsigned i = 0; i < t->count; i++) {
		pt_free(&t->srv[i].cur);
		pt_free(&t->srv[i].prev);
	}
	if (c)
		curl_easy_cleanup(c);
	curl_global_cleanup();
	free(t);
	return ex;
}

/*
 * test_nsstat_kvtierd.c - per-namespace statistics through a real
 * kvtierd (127.0.0.1, port 0): an engine puts and gets in three
 * namespaces of a server counting two in rows of their own (--set
 * stats.namespaces=2), then checks the exact counts in the server's
 * STATS (ns.<id>.*, ns.other.*; a tenant's own STATS: its rows only)
 * and the same figures on its /metrics
 * page under the `namespace` label (the digest's first 16 hex digits,
 * "other" for the rest), with kvtier_namespace_info naming each; and
 * `kvtier stat` (table and --json) shows the rows.  The server's own
 * counters (daemon/counters.c's table) are the same in STATS and on
 * /metrics, and none of either is outside that table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvtierd.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define BLK 8192

struct srv_stats {
	char model[8][64], digest[8][32];
	uint64_t v[8][32];
	const char *fields[32];
};

static const char *const fields[] = { "puts", "put_bytes", "gets", "hits_dram", "misses",
				      "dram_blocks", NULL };

/* Row index: ids 1..6 as themselves, "other" as 0. */
static void stats_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct srv_stats *st = ctx;
	const char *row, *f;
	unsigned i;

	if (strncmp(name, "ns.", 3) != 0 || !(f = strchr(name + 3, '.')))
		return;
	row = name + 3;
	i = strncmp(row, "other.", 6) == 0 ? 0 : (unsigned)atoi(row);
	if (i >= 8)
		return;
	f++;
	if (str && strcmp(f, "model") == 0)
		snprintf(st->model[i], sizeof(st->model[0]), "%s", str);
	if (str && strcmp(f, "digest") == 0)
		snprintf(st->digest[i], sizeof(st->digest[0]), "%s", str);
	for (unsigned k = 0; !str && fields[k]; k++)
		if (strcmp(f, fields[k]) == 0)
			st->v[i][k] = value;
}

static void put_blk(struct kvt_store *e, uint32_t ns, uint64_t k)
{
	static uint8_t buf[BLK];
	struct kvt_key key = t_key(ns * 1000 + k);
	struct iovec v = { buf, BLK };
	t_fill(buf, BLK, ns * 1000 + k);
	T_OK(kvt_put(e, ns, &key, &v, 1));
}

static int get_blk(struct kvt_store *e, uint32_t ns, uint64_t k)
{
	static uint8_t buf[BLK];
	struct kvt_key key = t_key(ns * 1000 + k);
	return kvt_get(e, ns, &key, buf, BLK, NULL);
}

/* ------------------------------------------------------------------------
 * The server's counters (daemon/counters.c's table): every row's STATS
 * name is in STATS and its family on /metrics, with its type; where a
 * counter has both, the page's value lies between two STATS taken around
 * it; and no server.* number in STATS,
 * no kvtier_server_ or kvtier_connections_ family on /metrics, is
 * outside the table (the ones kept apart: uptime, threads, per-opcode and
 * per-kind errors).
 */

#define SRV_MAX 256

struct srv_all {
	char name[SRV_MAX][96];
	uint64_t v[SRV_MAX];
	unsigned n;
};

static void all_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct srv_all *a = ctx;

	if (str || strncmp(name, "server.", 7) != 0 || a->n == SRV_MAX)
		return;
	snprintf(a->name[a->n], sizeof(a->name[0]), "%s", name);
	a->v[a->n++] = value;
}

static bool all_find(const struct srv_all *a, const char *name, uint64_t *v)
{
	for (unsigned i = 0; i < a->n; i++)
		if (strcmp(a->name[i], name) == 0) {
			*v = a->v[i];
			return true;
		}
	return false;
}

static const struct kvtd_counter_def *def_of_stat(const char *stat)
{
	for (size_t i = 0; i < kvtd_counter_def_count; i++)
		if (kvtd_counter_defs[i].stat && strcmp(kvtd_counter_defs[i].stat, stat) == 0)
			return &kvtd_counter_defs[i];
	return NULL;
}

static const struct kvtd_counter_def *def_of_metric(const char *m, size_t len)
{
	for (size_t i = 0; i < kvtd_counter_def_count; i++)
		if (kvtd_counter_defs[i].metric && strlen(kvtd_counter_defs[i].metric) == len &&
		    memcmp(kvtd_counter_defs[i].metric, m, len) == 0)
			return &kvtd_counter_defs[i];
	return NULL;
}

static void check_counters(struct kvt_store *e, uint16_t metrics_port)
{
	static struct srv_all s1, s2;
	unsigned both = 0, nonzero = 0;
	char *page;

	T_OK(kvt_remote_stats(e, "*", all_cb, &s1));
	page = tsrv_http_body(metrics_port, "/metrics");
	T_OK(kvt_remote_stats(e, "*", all_cb, &s2));
	for (size_t i = 0; i < kvtd_counter_def_count; i++) {
		const struct kvtd_counter_def *d = &kvtd_counter_defs[i];
		uint64_t a = 0, b = 0, m;
		char head[160];

		T_ASSERT(d->stat || d->metric);
		if (d->stat && (!all_find(&s1, d->stat, &a) || !all_find(&s2, d->stat, &b)))
			T_FAIL("%s is in daemon/counters.c but not in STATS", d->stat);
		if (!d->metric)
			continue;
		T_ASSERT(strcmp(d->type, "counter") == 0 || strcmp(d->type, "gauge") == 0);
		snprintf(head, sizeof(head), "\n# TYPE %s %s\n", d->metric, d->type);
		if (!strstr(page, head))
			T_FAIL("no '# TYPE %s %s' on /metrics", d->metric, d->type);
		m = tsrv_metric(page, d->metric);
		/* Gauges move with this test's own HTTP connection (open,
		 * its buffer charged): only counters are compared. */
		if (!d->stat || strcmp(d->type, "counter") != 0)
			continue;
		if (m < a || m > b)
			T_FAIL("%s = %llu on /metrics, STATS %s %llu then %llu", d->metric,
			       (unsigned long long)m, d->stat, (unsigned long long)a,
			       (unsigned long long)b);
		both++;
		nonzero += m != 0;
	}
	/* The engine's traffic shows: not only zeros were compared. */
	T_GE_INT(both, 12);
	T_GE_INT(nonzero, 5);
	for (unsigned i = 0; i < s1.n; i++) {
		const char *n = s1.name[i];
		if (strncmp(n, "server.ops.", 11) == 0 || strncmp(n, "server.errors.", 14) == 0 ||
		    strcmp(n, "server.uptime_ns") == 0 || strcmp(n, "server.threads") == 0)
			continue;
		if (!def_of_stat(n))
			T_FAIL("STATS %s is not in daemon/counters.c's table", n);
	}
	for (const char *p = page; (p = strstr(p, "\n# TYPE kvtier_")); p++) {
		const char *m = p + 8, *end = strchr(m, ' ');
		T_ASSERT(end);
		if ((strncmp(m, "kvtier_server_", 14) == 0 ||
		     strncmp(m, "kvtier_connections_", 19) == 0) &&
		    !def_of_metric(m, (size_t)(end - m)))
			T_FAIL("/metrics family %.*s is not in daemon/counters.c's table",
			       (int)(end - m), m);
	}
	free(page);
}

/* The whole output of a shell command (exit status 0). */
static char *run_out(const char *cmd)
{
	size_t cap = 1 << 16, len = 0, r;
	char *buf = malloc(cap);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p && buf);
	while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += r;
		if (cap - len < 2) {
			cap *= 2;
			T_ASSERT((buf = realloc(buf, cap)));
		}
	}
	buf[len] = 0;
	T_EQ_INT(pclose(p), 0);
	return buf;
}

/* kvtier stat: the table has a row for A (digest, model, 6 gets) and
 * one for the rest; --json has A's row with its exact counts. */
static void check_cli(const char *kvtier, const char *addr, const struct srv_stats *st)
{
	char cmd[1024], want[160], *out, *row, *end;

	snprintf(cmd, sizeof(cmd), "%s stat --server %s", kvtier, addr);
	out = run_out(cmd);
	snprintf(want, sizeof(want), "\n%-16s %-5s %-20s", st->digest[1], "1", "model-a/default");
	if (!strstr(out, want))
		T_FAIL("no row '%s' in:\n%s", want + 1, out);
	T_ASSERT(strstr(out, "\nother            -     (the rest)"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s stat --server %s --json", kvtier, addr);
	out = run_out(cmd);
	snprintf(want, sizeof(want), "\"namespace\":\"%s\"", st->digest[1]);
	T_ASSERT((row = strstr(out, want)));
	T_ASSERT((end = strchr(row, '}')));
	*end = 0;
	T_ASSERT(strstr(row, "\"model\":\"model-a\""));
	T_ASSERT(strstr(row, "\"gets\":6,"));
	T_ASSERT(strstr(row, "\"hits_dram\":4,"));
	T_ASSERT(strstr(row, "\"misses\":2,"));
	T_ASSERT(strstr(row, "\"puts\":3,"));
	*end = '}';
	T_ASSERT(strstr(out, "\"namespace\":\"other\""));
	T_ASSERT(strstr(out, "\"ns.1.hits_dram\":4"));
	free(out);
}

int main(int argc, char **argv)
{
	const char *extra[] = { "--dram", "64M", "--metrics", "127.0.0.1:0", "--set",
				"stats.namespaces=2", NULL };
	const char *opts[] = { "remote.put_local", "never", NULL };
	static struct srv_stats st;
	struct tsrv srv;
	struct kvt_store *e;
	char addr[64], dir[600], series[160], *base, *page;
	uint32_t a, b, c;

	if (argc < 3)
		T_SKIP("usage: test_nsstat_kvtierd PATH-TO-KVTIERD PATH-TO-KVTIER");
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/srv", base);
	T_EQ_INT(mkdir(dir, 0700), 0);
	tsrv_start(&srv, argv[1], base, dir, NULL, extra);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	e = tsrv_engine(addr, opts);

	/* Registered on the server in this order: ids 1, 2, 3 there. */
	a = t_ns(e, "model-a");
	b = t_ns(e, "model-b");
	c = t_ns(e, "model-c");
	/* Every put written through only, every get answered by the server. */
	for (uint64_t k = 0; k < 3; k++)
		put_blk(e, a, k);
	put_blk(e, b, 0);
	put_blk(e, c, 0);
	for (int i = 0; i < 2; i++) {
		T_EQ_INT(get_blk(e, a, 0), KVT_OK);
		T_EQ_INT(get_blk(e, a, 1), KVT_OK);
	}
	T_EQ_INT(get_blk(e, a, 7), KVT_MISS);
	T_EQ_INT(get_blk(e, a, 8), KVT_MISS);
	T_EQ_INT(get_blk(e, b, 0), KVT_OK);
	T_EQ_INT(get_blk(e, c, 9), KVT_MISS);

	/* STATS, whole server. */
	T_OK(kvt_remote_stats(e, "*", stats_cb, &st));
	T_EQ_STR(st.model[1], "model-a");
	T_EQ_STR(st.model[2], "model-b");
	T_EQ_STR(st.model[3], ""); /* past the table: in other */
	T_EQ_INT((int)strlen(st.digest[1]), 16);
	T_EQ_U64(st.v[1][0], 3);           /* puts */
	T_EQ_U64(st.v[1][1], 3 * BLK);     /* put_bytes */
	T_EQ_U64(st.v[1][2], 6);           /* gets */
	T_EQ_U64(st.v[1][3], 4);           /* hits_dram */
	T_EQ_U64(st.v[1][4], 2);           /* misses */
	T_EQ_U64(st.v[1][5], 3);           /* dram_blocks */
	T_EQ_U64(st.v[2][0], 1);
	T_EQ_U64(st.v[2][3], 1);
	T_EQ_U64(st.v[2][4], 0);
	T_EQ_U64(st.v[0][0], 1);           /* other: C's put */
	T_EQ_U64(st.v[0][3], 0);
	T_EQ_U64(st.v[0][4], 1);           /* and its miss */

	/* STATS, the tenant's own: its namespaces with rows, and no
	 * "other" (other tenants' namespaces may be in it). */
	{
		static struct srv_stats own;
		T_OK(kvt_remote_stats(e, NULL, stats_cb, &own));
		T_EQ_STR(own.model[1], "model-a");
		T_EQ_STR(own.model[2], "model-b");
		T_EQ_STR(own.model[3], "");
		T_EQ_U64(own.v[1][3], 4);
		T_EQ_U64(own.v[1][4], 2);
		T_EQ_U64(own.v[2][3], 1);
		T_EQ_U64(own.v[0][0], 0);
		T_EQ_U64(own.v[0][4], 0);
	}

	/* /metrics: the same figures, labelled. */
	page = tsrv_http_body(tsrv_listener_port(srv.log, "metrics"), "/metrics");
	snprintf(series, sizeof(series), "kvtier_ns_puts_total{namespace=\"%s\"}", st.digest[1]);
	T_EQ_U64(tsrv_metric(page, series), 3);
	snprintf(series, sizeof(series), "kvtier_ns_hits_total{namespace=\"%s\",tier=\"dram\"}",
		 st.digest[1]);
	T_EQ_U64(tsrv_metric(page, series), 4);
	snprintf(series, sizeof(series), "kvtier_ns_misses_total{namespace=\"%s\"}", st.digest[1]);
	T_EQ_U64(tsrv_metric(page, series), 2);
	snprintf(series, sizeof(series), "kvtier_ns_hits_total{namespace=\"%s\",tier=\"dram\"}",
		 st.digest[2]);
	T_EQ_U64(tsrv_metric(page, series), 1);
	T_EQ_U64(tsrv_metric(page, "kvtier_ns_puts_total{namespace=\"other\"}"), 1);
	T_EQ_U64(tsrv_metric(page, "kvtier_ns_misses_total{namespace=\"other\"}"), 1);
	snprintf(series, sizeof(series), "kvtier_namespace_info{namespace=\"%s\",id=\"1\",",
		 st.digest[1]);
	T_ASSERT(strstr(page, series) && strstr(page, "model=\"model-a\""));
	/* Bounded: two rows and other, nothing for C by name. */
	T_ASSERT(!strstr(page, "model=\"model-c\""));
	{
		int n = 0;
		for (const char *p = page; (p = strstr(p, "kvtier_ns_puts_total{")); p++)
			n++;
		T_EQ_INT(n, 3);
	}
	free(page);
	check_counters(e, tsrv_listener_port(srv.log, "metrics"));
	check_cli(argv[2], addr, &st);

	kvt_store_destroy(e);
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	printf("test_nsstat_kvtierd: ok\n");
	return 0;
}

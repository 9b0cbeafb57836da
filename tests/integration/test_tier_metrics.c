/*
 * test_tier_metrics.c - kvtierd times RESP commands and S3 requests by
 * the tier that served them (doc/metrics.md "Latency"), as it does
 * native frames: a real kvtierd with --resp, --s3 and --metrics, driven
 * over raw sockets.
 *
 *   1. SET and an S3 PUT are writes into DRAM: tier="dram"; a GET of a
 *      missing key is tier="none"; GETs of what is in DRAM are "dram";
 *   2. after a restart the values are on SSD alone (ssd.admission=always
 *      wrote them down at put): a RESP GET and an S3 GET of them are each
 *      one more read with tier="ssd".
 *
 * argv[1]: kvtierd.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"
#include "t.h"

static const char *kvtierd;
static char *base, dir[600];
static uint16_t resp_port, s3_port, metrics_port;

/* One RESP command (n words) on its own connection: the reply. */
static char *resp(unsigned n, const char *const *w)
{
	char req[1024];
	int l = snprintf(req, sizeof(req), "*%u\r\n", n);
	for (unsigned i = 0; i < n; i++)
		l += snprintf(req + l, sizeof(req) - (size_t)l, "$%zu\r\n%s\r\n", strlen(w[i]), w[i]);
	/* Then QUIT: its +OK, and the server closes; what is read ends there. */
	l += snprintf(req + l, sizeof(req) - (size_t)l, "*1\r\n$4\r\nQUIT\r\n");
	return tsrv_talk(resp_port, req, (size_t)l);
}

/* One S3 request without a signature (no --tenants); the status line's code. */
static int s3(const char *method, const char *path, const char *body, char **out)
{
	char req[1024];
	size_t bl = body ? strlen(body) : 0;
	int l = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s", method, path, bl, body ? body : "");
	char *r = tsrv_talk(s3_port, req, (size_t)l);
	int code = 0;
	T_ASSERT(sscanf(r, "HTTP/1.1 %d", &code) == 1);
	if (out)
		*out = r;
	else
		free(r);
	return code;
}

static uint64_t lat(const char *op, const char *tier)
{
	char series[128];
	char *page = tsrv_http_body(metrics_port, "/metrics");
	snprintf(series, sizeof(series), "kvtier_request_duration_seconds_count{op=\"%s\",tier=\"%s\"}",
		 op, tier);
	uint64_t v = tsrv_metric(page, series);
	free(page);
	return v;
}

static void start(struct tsrv *s)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--metrics",
				"127.0.0.1:0", "--set", "ssd.admission=always", NULL };
	tsrv_start(s, kvtierd, base, dir, NULL, extra);
	resp_port = tsrv_listener_port(s->log, "RESP");
	s3_port = tsrv_s3_port(s->log);
	metrics_port = tsrv_listener_port(s->log, "metrics");
}

int main(int argc, char **argv)
{
	struct tsrv s;
	uint64_t w0, r0, n0, s0;
	char *r;

	if (argc < 2)
		T_SKIP("usage: test_tier_metrics PATH-TO-KVTIERD");
	kvtierd = argv[1];
	base = t_mkdtemp();
	snprintf(dir, sizeof(dir), "%s/store", base);
	start(&s);

	/* 1. Writes are DRAM's; a miss is "none"; reads of DRAM are "dram". */
	w0 = lat("write", "dram");
	r = resp(3, (const char *[]){ "SET", "k1", "hello" });
	T_ASSERT(strncmp(r, "+OK", 3) == 0);
	free(r);
	T_EQ_INT(s3("PUT", "/bkt", NULL, NULL), 200);
	T_EQ_INT(s3("PUT", "/bkt/obj", "an object's bytes", NULL), 200);
	T_EQ_U64(lat("write", "dram"), w0 + 2);
	/* (CreateBucket is counted as a read: doc/metrics.md lists the writes.) */
	r0 = lat("read", "dram");
	n0 = lat("read", "none");
	r = resp(2, (const char *[]){ "GET", "nokey" });
	T_ASSERT(strncmp(r, "$-1", 3) == 0);
	free(r);
	T_EQ_U64(lat("read", "none"), n0 + 1);
	r = resp(2, (const char *[]){ "GET", "k1" });
	T_ASSERT(strstr(r, "hello") != NULL);
	free(r);
	T_EQ_INT(s3("GET", "/bkt/obj", NULL, &r), 200);
	T_ASSERT(strstr(r, "an object's bytes") != NULL);
	free(r);
	T_EQ_U64(lat("read", "dram"), r0 + 2);
	T_EQ_INT(tsrv_stop(&s), 0);

	/* 2. A restart: DRAM is empty, the values are on SSD. */
	start(&s);
	s0 = lat("read", "ssd");
	r = resp(2, (const char *[]){ "GET", "k1" });
	T_ASSERT(strstr(r, "hello") != NULL);
	free(r);
	T_EQ_U64(lat("read", "ssd"), s0 + 1);
	T_EQ_INT(s3("GET", "/bkt/obj", NULL, &r), 200);
	T_ASSERT(strstr(r, "an object's bytes") != NULL);
	free(r);
	T_EQ_U64(lat("read", "ssd"), s0 + 2);
	T_EQ_INT(tsrv_stop(&s), 0);

	tsrv_check_reports(base);
	t_rmtree(base);
	free(base);
	return 0;
}

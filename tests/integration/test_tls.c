/*
 * test_tls.c - TLS between libkvtier's remote tier and a real kvtierd,
 * with certificates made by the openssl CLI in a temporary directory.
 *
 * Usage: test_tls PATH-TO-KVTIERD [--bench [ROUNDS]]
 *
 * What it proves: values round-trip byte-exact over TLS; the bytes on the
 * wire (recorded by a forwarding proxy in this process) do not contain a
 * known plaintext, while the same values over plain TCP through the same
 * proxy do (so the search can fail); a client that cannot verify the
 * server (no CA, wrong name) connects to nothing and gets misses, fast;
 * with --tls-verify-client a client without a certificate is refused and
 * one with a certificate is served; a plain client on the TLS port is
 * closed cleanly and the server keeps serving; a DELETE (CLEAR) and a
 * PUT of its key submitted together right after an earlier put of it
 * are applied in that order, the PUT's records read ahead in the SSL
 * read once the DELETE is applied (tls_order).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

static const char *bin;
static char *base;
static char ca[700], rogue_ca[700], srv_cert[700], srv_key[700], cli_cert[700], cli_key[700];

static const char pattern[] = "KVTIER-PLAINTEXT-PROMPT-7f3a";
#define VALUE_LEN (256u << 10)

static void sh(const char *fmt, const char *dir)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "cd '%s' && (%s) >openssl.log 2>&1", dir, fmt);
	if (system(cmd) != 0)
		T_FAIL("openssl failed: %s (see %s/openssl.log)", fmt, dir);
}

/* A CA, a server certificate for 127.0.0.1 and localhost, a client
 * certificate, and a second CA that signed none of them. */
static void make_certs(void)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/pki", base);
	T_RC(mkdir(dir, 0700), 0);
	sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvtier-test-ca && "
	   "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout rogue.key -out rogue.pem -days 2 -subj /CN=kvtier-rogue-ca && "
	   "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' >srv.ext && "
	   "printf 'extendedKeyUsage=clientAuth\\n' >cli.ext && "
	   "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout srv.key -out srv.csr -subj /CN=localhost && "
	   "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
	   "-extfile srv.ext -out srv.pem && "
	   "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	   "-keyout cli.key -out cli.csr -subj /CN=engine-1 && "
	   "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
	   "-extfile cli.ext -out cli.pem", dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(rogue_ca, sizeof(rogue_ca), "%s/rogue.pem", dir);
	snprintf(srv_cert, sizeof(srv_cert), "%s/srv.pem", dir);
	snprintf(srv_key, sizeof(srv_key), "%s/srv.key", dir);
	snprintf(cli_cert, sizeof(cli_cert), "%s/cli.pem", dir);
	snprintf(cli_key, sizeof(cli_key), "%s/cli.key", dir);
}

/* ------------------------------------------------------------------------
 * Engines
 */

/* An engine on addr; opts: more "name", "value" pairs (NULL-ended). */
static struct kvt_store *engine(const char *addr, const char *const *opts)
{
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "dram.capacity", "32M"));
	T_OK(kvt_store_set_option(s, "dram.prefault", "off"));
	T_OK(kvt_store_set_option(s, "remote.addr", addr));
	T_OK(kvt_store_set_option(s, "remote.timeout_ms", "5000"));
	T_OK(kvt_store_set_option(s, "remote.connect_timeout_ms", "2000"));
	T_OK(kvt_store_set_option(s, "remote.backoff_ms", "20"));
	T_OK(kvt_store_set_option(s, "remote.backoff_max_ms", "200"));
	for (unsigned i = 0; opts && opts[i]; i += 2)
		T_OK(kvt_store_set_option(s, opts[i], opts[i + 1]));
	T_OK(kvt_store_open(s));
	return s;
}

/* Up within 10 s, or false. */
static bool wait_up(struct kvt_store *s)
{
	for (int i = 0; i < 1000; i++) {
		if (t_stat(s, "remote.conns_up") > 0)
			return true;
		tsrv_sleep_ms(10);
	}
	return false;
}

static void fill(uint8_t *buf, size_t len, uint64_t i)
{
	t_fill(buf, len, i);
	/* The known plaintext, every 4 KiB. */
	for (size_t off = 0; off + sizeof(pattern) <= len; off += 4096)
		memcpy(buf + off, pattern, sizeof(pattern) - 1);
}

static void put_one(struct kvt_store *s, uint32_t ns, uint64_t i)
{
	uint8_t *buf = malloc(VALUE_LEN);
	struct kvt_key k = t_key(i);
	struct iovec part = { buf, VALUE_LEN };
	T_ASSERT(buf);
	fill(buf, VALUE_LEN, i);
	T_RC(kvt_put(s, ns, &k, &part, 1), KVT_OK);
	free(buf);
}

/* A fresh engine (empty DRAM) must get value i from the server. */
static void get_one(struct kvt_store *s, uint32_t ns, uint64_t i)
{
	uint8_t *buf = malloc(VALUE_LEN), *want = malloc(VALUE_LEN);
	struct kvt_key k = t_key(i);
	uint64_t vlen = 0;
	T_ASSERT(buf && want);
	fill(want, VALUE_LEN, i);
	T_RC(kvt_get(s, ns, &k, buf, VALUE_LEN, &vlen), KVT_OK);
	T_EQ_U64(vlen, VALUE_LEN);
	T_EQ_MEM(buf, want, VALUE_LEN);
	free(buf);
	free(want);
}

/* Put 8 values through one engine, read them back through another. */
static void round_trip(const char *addr, const char *const *opts, uint64_t first)
{
	struct kvt_store *a = engine(addr, opts), *b;
	uint32_t na = t_ns(a, "tls"), nb;
	T_ASSERT(wait_up(a));
	for (uint64_t i = first; i < first + 8; i++)
		put_one(a, na, i);
	kvt_store_destroy(a); /* closing waits for the puts */
	b = engine(addr, opts);
	nb = t_ns(b, "tls");
	T_ASSERT(wait_up(b));
	for (uint64_t i = first; i < first + 8; i++)
		get_one(b, nb, i);
	T_ASSERT(t_stat(b, "remote.hits") >= 8);
	T_EQ_U64(t_stat(b, "remote.tls_failures"), 0);
	kvt_store_destroy(b);
}

/*
 * A DELETE (CLEAR) and a PUT of its key submitted together go out on the
 * one connection in that order, over TLS: kvtierd holds the PUT's frame
 * until the DELETE is applied (doc/protocol.md "Writes of one
 * connection"), with the PUT's later records (a 256 KiB value, 16 KiB a
 * record) read ahead into the SSL, where no epoll wakes it: the release
 * must read them (loop.c loop_settle, kvtd_tls_pending).  The put is
 * answered in time and a cold engine reads its bytes.  Right after the
 * earlier put of the key completed: until review42d its rop was closed
 * after its caller heard (remote.c rop_done), the DELETE was held behind
 * it, the PUT went first and the DELETE removed it (a miss in the first
 * rounds, or the PUT answered KVT_EXISTS).
 */
static void tls_order(const char *addr)
{
	const char *opts[] = { "remote.tls", "on", "remote.tls_ca", ca, "remote.conns", "1",
			       "remote.conns_max", "1", NULL };
	uint8_t *old = malloc(VALUE_LEN), *val = malloc(VALUE_LEN), *back = malloc(VALUE_LEN);

	T_ASSERT(old && val && back);
	for (int clear = 0; clear < 2; clear++) {
		struct kvt_store *a = engine(addr, opts), *b;
		uint32_t na = t_ns(a, clear ? "tls-order-clear" : "tls-order"), nb;
		struct kvt_queue *q;
		T_ASSERT(wait_up(a));
		T_OK(kvt_queue_create(a, &q));
		for (uint64_t i = 0; i < 8; i++) {
			uint64_t id = 900 + i;
			struct kvt_key k = t_key(id);
			struct iovec po = { old, VALUE_LEN }, pn = { val, VALUE_LEN };
			struct kvt_req r[2];
			t_fill(old, VALUE_LEN, id);
			t_fill(val, VALUE_LEN, id + 7777);
			T_RC(kvt_put(a, na, &k, &po, 1), KVT_OK); /* answered by the server */
			r[0] = (struct kvt_req){ .op = clear ? KVT_OP_CLEAR : KVT_OP_DELETE,
						 .ns = na, .key = k };
			r[1] = (struct kvt_req){ .op = KVT_OP_PUT, .ns = na, .key = k, .iov = &pn,
						 .iov_count = 1 };
			t_submit_all(q, r, 2);
			t_wait_all(q, 2);
			T_RC(r[1].status, KVT_OK);
		}
		T_OK(kvt_queue_destroy(q));
		kvt_store_destroy(a);
		b = engine(addr, opts);
		nb = t_ns(b, clear ? "tls-order-clear" : "tls-order");
		T_ASSERT(wait_up(b));
		/* a CLEAR of the namespace took the earlier rounds' */
		for (uint64_t i = clear ? 7 : 0; i < 8; i++) {
			uint64_t id = 900 + i, vlen = 0;
			struct kvt_key k = t_key(id);
			t_fill(val, VALUE_LEN, id + 7777);
			T_RC(kvt_get(b, nb, &k, back, VALUE_LEN, &vlen), KVT_OK);
			T_EQ_U64(vlen, VALUE_LEN);
			T_EQ_MEM(back, val, VALUE_LEN);
		}
		kvt_store_destroy(b);
	}
	free(old);
	free(val);
	free(back);
	fprintf(stderr, "tls_order: ok\n");
}

/* An engine that must not get a connection up: gets miss, fast. */
static void refused(const char *addr, const char *const *opts, const char *counter)
{
	struct kvt_store *e = engine(addr, opts);
	uint32_t ns = t_ns(e, "tls");
	struct kvt_key k = t_key(1);
	uint8_t buf[64];
	uint64_t t0;

	for (int i = 0; i < 300 && t_stat(e, counter) < 2; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(t_stat(e, counter) >= 2);
	T_EQ_U64(t_stat(e, "remote.conns_up"), 0);
	T_EQ_U64(t_stat(e, "remote.connects"), 0);
	t0 = t_now_ms();
	for (int i = 0; i < 20; i++)
		T_RC(kvt_get(e, ns, &k, buf, sizeof(buf), NULL), KVT_MISS);
	T_ASSERT(t_now_ms() - t0 < 3000);
	kvt_store_destroy(e);
}

static unsigned log_count(const struct tsrv *s, const char *what)
{
	char line[4096];
	unsigned n = 0;
	FILE *f = fopen(s->log, "r");
	T_ASSERT(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* A client that speaks the kvtier protocol in clear to the TLS port: its
 * connection ends (EOF or reset) within 3 s and no kvtier frame comes
 * back. */
static void plain_client(const struct tsrv *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s->port) };
	uint8_t hello[48] = "KVT1", got[4096];
	size_t total = 0;
	uint64_t t0 = t_now_ms();
	bool ended = false;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	T_RC(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	T_RC(write(fd, hello, sizeof(hello)), (int)sizeof(hello));
	while (t_now_ms() - t0 < 3000) {
		struct pollfd pf = { fd, POLLIN, 0 };
		ssize_t r;
		if (poll(&pf, 1, 100) <= 0)
			continue;
		r = read(fd, got + total, sizeof(got) - total);
		if (r <= 0) {
			ended = true;
			break;
		}
		total += (size_t)r;
	}
	close(fd);
	T_ASSERT(ended);
	/* At most a TLS alert record (content type 21), never a frame. */
	T_ASSERT(total == 0 || got[0] == 21);
	T_ASSERT(total < 48);
}

/* ------------------------------------------------------------------------
 * Bench (test_tls KVTIERD --bench [ROUNDS]): TLS against plain TCP through
 * the remote tier, A/B interleaved in one run.  Two servers alike but for
 * --tls-*; per round and mode: SET (4 threads put 2 MiB values on an
 * engine with remote.conns=4, timed until the store closed, i.e. every put
 * answered) then GET (a fresh engine, 4 threads kvt_get them back).
 */
#define BENCH_VAL (2u << 20)
#define BENCH_PER_THREAD 16

struct bjob {
	struct kvt_store *s;
	uint32_t ns;
	int t;
	bool get;
	uint64_t seed;
};

static void *bench_thread(void *arg)
{
	struct bjob *j = arg;
	uint8_t *buf = malloc(BENCH_VAL);
	T_ASSERT(buf);
	for (int i = 0; i < BENCH_PER_THREAD; i++) {
		struct kvt_key k = t_key(j->seed + (uint64_t)(j->t * BENCH_PER_THREAD + i));
		if (j->get) {
			uint64_t vlen = 0;
			T_RC(kvt_get(j->s, j->ns, &k, buf, BENCH_VAL, &vlen), KVT_OK);
			T_EQ_U64(vlen, BENCH_VAL);
			T_EQ_U64(buf[vlen - 1], (uint8_t)(k.bytes[0] + i));
		} else {
			struct iovec part = { buf, BENCH_VAL };
			memset(buf, (uint8_t)(k.bytes[0] + i), BENCH_VAL);
			T_RC(kvt_put(j->s, j->ns, &k, &part, 1), KVT_OK);
		}
	}
	free(buf);
	return NULL;
}

static double bench_phase(const char *addr, const char *const *opts, bool get, uint64_t seed)
{
	const char *conf[16] = { "remote.conns", "4", "dram.capacity", "512M" };
	struct bjob jobs[4];
	pthread_t th[4];
	struct kvt_store *s;
	struct timespec a, b;
	uint32_t ns;
	unsigned n = 4;

	for (unsigned i = 0; opts && opts[i]; i++)
		conf[n++] = opts[i];
	conf[n] = NULL;
	s = engine(addr, conf);
	ns = t_ns(s, "tls-bench");
	T_ASSERT(wait_up(s));
	while (t_stat(s, "remote.conns_up") < 4)
		tsrv_sleep_ms(5);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int t = 0; t < 4; t++) {
		jobs[t] = (struct bjob){ s, ns, t, get, seed };
		T_RC(pthread_create(&th[t], NULL, bench_thread, &jobs[t]), 0);
	}
	for (int t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	if (!get)
		kvt_store_destroy(s); /* waits until every put was answered */
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (get)
		kvt_store_destroy(s);
	return 4.0 * BENCH_PER_THREAD * BENCH_VAL /
	       ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec));
}

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static int bench(int rounds)
{
	struct tsrv ps, ts;
	char dir[600], paddr[64], taddr[64];
	const char *tls_opts[] = { "remote.tls", "on", "remote.tls_ca", ca, NULL };
	const char *extra_p[] = { "--dram", "2G", "--ssd", "0", "--threads", "2", NULL };
	const char *extra_t[] = { "--dram", "2G", "--ssd", "0", "--threads", "2",
				  "--tls-cert", srv_cert, "--tls-key", srv_key, NULL };
	double r[2][2][64]; /* [get][tls][round] GB/s */

	if (rounds < 1 || rounds > 64)
		rounds = 5;
	snprintf(dir, sizeof(dir), "%s/bp", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&ps, bin, base, dir, NULL, extra_p);
	snprintf(dir, sizeof(dir), "%s/bt", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&ts, bin, dir, dir, NULL, extra_t); /* its own socket path */
	snprintf(paddr, sizeof(paddr), "127.0.0.1:%u", ps.port);
	snprintf(taddr, sizeof(taddr), "127.0.0.1:%u", ts.port);
	for (int i = 0; i < rounds; i++) {
		for (int k = 0; k < 2; k++) {
			/* Plain first in even rounds, TLS first in odd ones. */
			int tls = (i + k) % 2;
			uint64_t seed = 1000000u * (uint64_t)(i + 1);
			const char *addr = tls ? taddr : paddr;
			const char *const *o = tls ? tls_opts : NULL;
			r[0][tls][i] = bench_phase(addr, o, false, seed);
			r[1][tls][i] = bench_phase(addr, o, true, seed);
			for (int g = 0; g < 2; g++)
				printf("{\"bench\":\"tls\",\"op\":\"%s\",\"transport\":\"%s\","
				       "\"value_bytes\":%u,\"conns\":4,\"round\":%d,\"gbps\":%.3f}\n",
				       g ? "get" : "set", tls ? "tls" : "tcp", BENCH_VAL, i,
				       r[g][tls][i]);
		}
	}
	for (int g = 0; g < 2; g++) {
		double m[2];
		for (int tls = 0; tls < 2; tls++) {
			qsort(r[g][tls], (size_t)rounds, sizeof(double), cmp_d);
			m[tls] = r[g][tls][rounds / 2];
		}
		printf("{\"bench\":\"tls\",\"op\":\"%s\",\"value_bytes\":%u,\"conns\":4,\"rounds\":%d,"
		       "\"tls_gbps\":%.3f,\"tcp_gbps\":%.3f,\"ratio\":%.3f,\"baseline\":\"tcp\"}\n",
		       g ? "get" : "set", BENCH_VAL, rounds, m[1], m[0], m[1] / m[0]);
	}
	T_EQ_INT(tsrv_stop(&ps), 0);
	T_EQ_INT(tsrv_stop(&ts), 0);
	t_rmtree(base);
	return 0;
}

int main(int argc, char **argv)
{
	struct tsrv srv, mtls;
	struct tproxy px;
	char dir[600], addr[64], paddr[64];
	unsigned fails;

	if (argc < 2)
		T_SKIP("usage: test_tls PATH-TO-KVTIERD");
	bin = argv[1];
	if (access(bin, X_OK) != 0)
		T_FAIL("%s is not executable", bin);
	if (system("openssl version >/dev/null 2>&1") != 0)
		T_SKIP("no openssl command to make certificates with");
	signal(SIGPIPE, SIG_IGN);
	base = t_mkdtemp();
	make_certs();
	if (argc >= 3 && strcmp(argv[2], "--bench") == 0)
		return bench(argc >= 4 ? atoi(argv[3]) : 5);

	/* 1. The control: plain TCP through the proxy shows the plaintext. */
	snprintf(dir, sizeof(dir), "%s/plain", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, bin, base, dir, NULL, NULL);
	tproxy_start(&px, srv.port, NULL, true);
	snprintf(paddr, sizeof(paddr), "127.0.0.1:%u", px.port);
	round_trip(paddr, NULL, 0);
	T_ASSERT(tproxy_saw(&px, pattern));
	tproxy_stop(&px);
	T_EQ_INT(tsrv_stop(&srv), 0);

	/* 2. TLS: byte-exact, and nothing of the plaintext on the wire. */
	snprintf(dir, sizeof(dir), "%s/tls", base);
	T_RC(mkdir(dir, 0700), 0);
	{
		const char *extra[] = { "--tls-cert", srv_cert, "--tls-key", srv_key, NULL };
		tsrv_start(&srv, bin, base, dir, NULL, extra);
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", srv.port);
	tproxy_start(&px, srv.port, NULL, true);
	snprintf(paddr, sizeof(paddr), "127.0.0.1:%u", px.port);
	{
		const char *opts[] = { "remote.tls", "on", "remote.tls_ca", ca, NULL };
		round_trip(paddr, opts, 100);
	}
	T_ASSERT(px.log_len > 8 * VALUE_LEN * 2);
	T_ASSERT(!tproxy_saw(&px, pattern));
	tproxy_stop(&px);
	tls_order(addr);

	/* 3. Clients that cannot verify the server: no connection, misses. */
	{
		const char *no_ca[] = { "remote.tls", "on", NULL };
		const char *rogue[] = { "remote.tls", "on", "remote.tls_ca", rogue_ca, NULL };
		const char *name[] = { "remote.tls", "on", "remote.tls_ca", ca,
				       "remote.tls_server_name", "kvtier.example", NULL };
		const char *plain[] = { "remote.tls", "off", NULL };
		refused(addr, no_ca, "remote.tls_failures");
		refused(addr, rogue, "remote.tls_failures");
		refused(addr, name, "remote.tls_failures");
		/* A plain engine on the TLS port: HELLO goes unanswered. */
		refused(addr, plain, "remote.connect_failures");
		/* The name given explicitly, matching: served. */
		const char *good[] = { "remote.tls", "on", "remote.tls_ca", ca,
				       "remote.tls_server_name", "localhost", NULL };
		round_trip(addr, good, 200);
	}

	/* 4. A raw plain client: closed cleanly, counted, server unharmed. */
	fails = log_count(&srv, "TLS handshake failed");
	plain_client(&srv);
	for (int i = 0; i < 100 && log_count(&srv, "TLS handshake failed") == fails; i++)
		tsrv_sleep_ms(10);
	T_ASSERT(log_count(&srv, "TLS handshake failed") > fails);
	{
		const char *opts[] = { "remote.tls", "on", "remote.tls_ca", ca, NULL };
		round_trip(addr, opts, 300);
	}
	T_EQ_INT(tsrv_stop(&srv), 0);

	/* 5. Mutual TLS. */
	snprintf(dir, sizeof(dir), "%s/mtls", base);
	T_RC(mkdir(dir, 0700), 0);
	{
		const char *extra[] = { "--tls-cert", srv_cert, "--tls-key", srv_key, "--tls-ca", ca,
					"--tls-verify-client", "--log-level", "info", NULL };
		tsrv_start(&mtls, bin, base, dir, NULL, extra);
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", mtls.port);
	{
		/* TLS 1.3: the client finishes its side before the server
		 * checks its certificate, so the refusal arrives as an alert
		 * in place of HELLO's answer. */
		const char *no_cert[] = { "remote.tls", "on", "remote.tls_ca", ca, NULL };
		const char *cert[] = { "remote.tls", "on", "remote.tls_ca", ca,
				       "remote.tls_cert", cli_cert, "remote.tls_key", cli_key, NULL };
		refused(addr, no_cert, "remote.connect_failures");
		T_ASSERT(log_count(&mtls, "TLS handshake failed") > 0);
		round_trip(addr, cert, 400);
	}
	T_EQ_INT(tsrv_stop(&mtls), 0);

	t_rmtree(base);
	printf("test_tls: ok\n");
	return 0;
}

/*
 * peer_tls_mem.c - what a kept peer connection (daemon/peer.c, as a
 * lane's: repair.c "A lane's connection") holds on the client side, TLS
 * and plain: the charge repair_conn_bytes makes for it (its read buffer,
 * and over TLS TLS_SSL_MEM + TLS_RBUF, tlsmem.h -- the server's figures,
 * test_tls_mem's) against what the process holds.  Not built by meson: a
 * one-off measurement kept with its figures (bench/RESULTS.md, session
 * 47 "pod47"), built against each tree compared.
 *
 * Opens CONNS connections to ADDR with peer.c (over TLS with CA, CERT and
 * KEY, the pod's files: a member's client context, tlsio_ctx_client),
 * each authenticated as TENANT and asked one STATS (an exchange, as a
 * batch is, so that its read buffer is grown and the handshake's
 * post-handshake messages read), then idle, and prints RSS growth
 * (/proc/self/statm) and heap growth (mallinfo2's in-use bytes) per
 * connection.  Run it once against a TLS kvtierd and once against a
 * plain one ("-" for CA, CERT and KEY): the difference is the TLS part.
 *
 *   cc -O2 -D_GNU_SOURCE -Iinclude -Ilib/fmt -Ilib/sys -Ilib/base -Ilib -Idaemon -Ibuild \
 *      bench/peer_tls_mem.c daemon/peer.c lib/sys/tlsio.c lib/fmt/proto.c lib/fmt/err.c \
 *      lib/base/crc.c -lisal -lssl -lcrypto -lpthread -o /tmp/peer_tls_mem
 *   /tmp/peer_tls_mem 127.0.0.1:P ca.pem srv.pem srv.key alice SECRET 1000
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "peer.h"
#include "tlsio.h"

static uint64_t rss(void)
{
	unsigned long size, res;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%lu %lu", &size, &res) != 2)
		exit(1);
	fclose(f);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
	SSL_CTX *ctx = NULL;
	struct kvtd_peer *p;
	uint64_t r0, h0, r1, h1, rcap = 0, v;
	unsigned n;
	char err[256];

	if (argc != 8) {
		fprintf(stderr, "usage: peer_tls_mem ADDR CA|- CERT|- KEY|- TENANT SECRET CONNS\n");
		return 2;
	}
	n = (unsigned)atoi(argv[7]);
	p = calloc(n, sizeof(*p)); /* before the first figure */
	if (!p)
		return 1;
	if (strcmp(argv[2], "-") != 0) {
		ctx = tlsio_ctx_client(argv[2], argv[3], argv[4], err, sizeof(err));
		if (!ctx) {
			fprintf(stderr, "client context: %s\n", err);
			return 1;
		}
	}
	/* one connection first: OpenSSL's and the resolver's one-time state */
	if (kvtd_peer_open_tls(&p[0], argv[1], argv[5], (const uint8_t *)argv[6],
			       (uint32_t)strlen(argv[6]), 0, ctx) < 0 ||
	    kvtd_peer_stat(&p[0], PROTO_SCOPE_TENANT, "server.mem_used", &v) < 0)
		return 1;
	kvtd_peer_close(&p[0]);
	malloc_trim(0);
	r0 = rss();
	h0 = mallinfo2().uordblks;
	for (unsigned i = 0; i < n; i++) {
		int rc = kvtd_peer_open_tls(&p[i], argv[1], argv[5], (const uint8_t *)argv[6],
					    (uint32_t)strlen(argv[6]), 0, ctx);
		if (rc < 0 || kvtd_peer_stat(&p[i], PROTO_SCOPE_TENANT, "server.mem_used", &v) < 0) {
			fprintf(stderr, "connection %u: %d\n", i, rc);
			return 1;
		}
		rcap += p[i].rcap;
	}
	r1 = rss();
	h1 = mallinfo2().uordblks;
	printf("%s, %u connections: RSS %.0f bytes a connection, heap %.0f (its read buffer "
	       "%.0f of them)\n", ctx ? "TLS" : "plain", n, (double)(r1 - r0) / n,
	       (double)(h1 - h0) / n, (double)rcap / n);
	for (unsigned i = 0; i < n; i++)
		kvtd_peer_close(&p[i]);
	SSL_CTX_free(ctx);
	free(p);
	return 0;
}

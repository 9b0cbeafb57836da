/*
 * tls_ssl_mem.c - the bytes OpenSSL holds for one server-side SSL of
 * kvtierd's at each stage of a connection (doc/security.md "The SSL
 * object"; daemon/tlsmem.h TLS_HS_MEM, TLS_SSL_MEM): live heap bytes, counted
 * through CRYPTO_set_mem_functions -- process-wide, which is why it is
 * here and never in the library or the daemon (tests/unit/test_tls_mem.c
 * counts the same and fails where the constants fall short of it).  The
 * server's context is
 * kvtierd's own (lib/sys/tlsio.c tlsio_ctx_server: read ahead, released
 * buffers); the client is plain OpenSSL over a Unix socket pair, its
 * allocations not counted (only the server's calls are).  A one-off
 * measurement kept with its figures; meson builds it (build/bench/
 * tls_ssl_mem) so that it keeps compiling; or by hand:
 *
 *   cc -O2 -Ilib/sys bench/tls_ssl_mem.c lib/sys/tlsio.c -lssl -lcrypto -o /tmp/tls_ssl_mem
 *   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
 *      -keyout /tmp/k.pem -out /tmp/c.pem -days 2 -subj /CN=localhost
 *   /tmp/tls_ssl_mem /tmp/c.pem /tmp/k.pem
 *
 * Stages: accepted (SSL_new, nothing read), handshake (the ClientHello
 * taken, the server's flight written, the client's Finished not yet in),
 * established (idle), output (a record written in part: the socket full),
 * record (part of a record read: the read buffer held).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include "tlsio.h"

static long long live;   /* bytes allocated and not freed, all callers */
static long long server; /* of them, by the server's calls */

struct hdr {
	size_t n;
	size_t pad; /* 16-byte alignment */
};

static void *mem_malloc(size_t n, const char *f, int l)
{
	struct hdr *h = malloc(sizeof(*h) + n);

	(void)f, (void)l;
	if (!h)
		return NULL;
	h->n = n;
	live += (long long)n;
	return h + 1;
}

static void mem_free(void *p, const char *f, int l)
{
	struct hdr *h = p ? (struct hdr *)p - 1 : NULL;

	(void)f, (void)l;
	if (!h)
		return;
	live -= (long long)h->n;
	free(h);
}

static void *mem_realloc(void *p, size_t n, const char *f, int l)
{
	struct hdr *h = p ? (struct hdr *)p - 1 : NULL;
	struct hdr *nh;

	if (!h)
		return mem_malloc(n, f, l);
	nh = realloc(h, sizeof(*nh) + n);
	if (!nh)
		return NULL;
	live += (long long)n - (long long)nh->n;
	nh->n = n;
	return nh + 1;
}

/* The server's call between S_BEGIN and S_END counts in server. */
#define S_BEGIN long long s_was_ = live
#define S_END server += live - s_was_

static int srv_step(SSL *s)
{
	int want = 0, rc;
	S_BEGIN;
	rc = tlsio_handshake(s, &want);
	S_END;
	return rc;
}

static void cli_step(SSL *c)
{
	ERR_clear_error();
	SSL_do_handshake(c);
}

/* One connection through the stages; what the server's calls held at
 * each, printed when show.  false: the handshake failed. */
static bool conn_stages(SSL_CTX *sctx, SSL_CTX *cctx, bool show)
{
	char buf[65536];
	SSL *s, *c;
	int sv[2], small = 4096, want;

	server = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return false;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	{
		S_BEGIN;
		s = tlsio_new(sctx, sv[0], true);
		S_END;
	}
	c = SSL_new(cctx);
	SSL_set_fd(c, sv[1]);
	SSL_set_connect_state(c);
	if (show) printf("accepted     %6lld bytes\n", server);
	cli_step(c);  /* ClientHello */
	srv_step(s);  /* the server's flight */
	if (show) printf("handshake    %6lld bytes\n", server);
	cli_step(c);  /* the client's Finished */
	if (srv_step(s) != 1) {
		fprintf(stderr, "handshake not done\n");
		return false;
	}
	cli_step(c);
	if (show) printf("established  %6lld bytes\n", server);
	memset(buf, 'v', sizeof(buf));
	{
		struct iovec iov = { buf, sizeof(buf) };
		ssize_t w;
		S_BEGIN;
		w = tlsio_writev(s, &iov, 1, &want);
		S_END;
		if (show) printf("output       %6lld bytes (%zd of %zu written, want %d)\n", server, w,
		       sizeof(buf), want);
	}
	/* the client takes all: the server's write completes, its buffer
	 * released */
	for (int i = 0; i < 100; i++) {
		struct iovec iov = { buf, sizeof(buf) };
		ERR_clear_error();
		while (SSL_read(c, buf, sizeof(buf)) > 0)
			;
		S_BEGIN;
		(void)tlsio_writev(s, &iov, 1, &want);
		S_END;
		if (!want)
			break;
	}
	if (show) printf("written      %6lld bytes\n", server);
	{
		char rec[20000];
		int n;
		ERR_clear_error();
		SSL_write(c, buf, 16000);  /* one record of 16,000 bytes */
		n = (int)read(sv[0], rec, sizeof(rec)); /* taken from the socket */
		if (n > 300 && write(sv[1], rec, 300) == 300) {
			struct iovec iov = { rec, sizeof(rec) };
			S_BEGIN;
			(void)tlsio_readv(s, &iov, 1, &want);
			S_END;
		}
		if (show) printf("record       %6lld bytes (300 of a record of %d read)\n", server, n);
	}
	{
		S_BEGIN;
		tlsio_free(s);
		S_END;
	}
	if (show) printf("freed        %6lld bytes\n", server);
	SSL_free(c);
	close(sv[0]);
	close(sv[1]);
	return true;
}

int main(int argc, char **argv)
{
	char err[300];
	SSL_CTX *sctx, *cctx;

	if (argc < 3) {
		fprintf(stderr, "usage: tls_ssl_mem CERT KEY\n");
		return 2;
	}
	if (!CRYPTO_set_mem_functions(mem_malloc, mem_realloc, mem_free))
		return 1;
	sctx = tlsio_ctx_server(argv[1], argv[2], NULL, false, err, sizeof(err));
	cctx = SSL_CTX_new(TLS_client_method());
	if (!sctx || !cctx) {
		fprintf(stderr, "contexts: %s\n", err);
		return 1;
	}
	SSL_CTX_set_read_ahead(sctx, 1); /* as daemon/tls.c kvtd_tls_setup */
	/* The first connection fills OpenSSL's caches (providers, fetched
	 * algorithms): the third's figures are one connection's. */
	for (int i = 0; i < 3; i++)
		if (!conn_stages(sctx, cctx, i == 2))
			return 1;
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	return 0;
}

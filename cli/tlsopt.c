/*
 * tlsopt.c - the kvtier commands' TLS options and the diagnosis of a
 * connection that failed over TLS or for the lack of it (tlsopt.h).
 *
 * Owns: parsing --tls*, turning them into the remote tier's remote.tls*
 * or into a client context (both through lib/sys/tlsio.c: one TLS client,
 * the remote tier's), and cli_tls_diagnose's one probe: a TCP connection
 * and a TLS handshake, to tell a TLS server reached in plain TCP (it only
 * closes the connection) from a plain one reached with --tls (it answers
 * the ClientHello with a protocol error), a certificate that does not
 * verify, or a client certificate the server requires.
 */
#include "tlsopt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tlsio.h"

#define PROBE_MS 3000 /* connect and handshake, each */

int cli_tls_opt(struct cli_tls *t, int c, const char *arg)
{
	switch (c) {
	case CLI_O_TLS: break;
	case CLI_O_TLS_CA: t->ca = arg; break;
	case CLI_O_TLS_CERT: t->cert = arg; break;
	case CLI_O_TLS_KEY: t->key = arg; break;
	case CLI_O_TLS_NAME: t->name = arg; break;
	default: return 0;
	}
	t->on = true;
	return 1;
}

unsigned cli_tls_kv(const struct cli_tls *t, const char *kv[5][2])
{
	unsigned n = 0;

	if (!t->on)
		return 0;
#define KV(k, v)                                                                            \
	do {                                                                                \
		kv[n][0] = k;                                                               \
		kv[n++][1] = v;                                                             \
	} while (0)
	KV("remote.tls", "on");
	if (t->ca)
		KV("remote.tls_ca", t->ca);
	if (t->cert)
		KV("remote.tls_cert", t->cert);
	if (t->key)
		KV("remote.tls_key", t->key);
	if (t->name)
		KV("remote.tls_server_name", t->name);
#undef KV
	return n;
}

SSL_CTX *cli_tls_ctx(const char *cmd, const struct cli_tls *t, bool *fail)
{
	char err[300];
	SSL_CTX *ctx;

	*fail = false;
	if (!t->on)
		return NULL;
	if (!(ctx = tlsio_ctx_client(t->ca, t->cert, t->key, err, sizeof(err)))) {
		fprintf(stderr, "kvtier %s: TLS: %s%s\n", cmd, err,
			(t->cert != NULL) != (t->key != NULL) ? " (--tls-cert and --tls-key)" : "");
		*fail = true;
	}
	return ctx;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* addr's host (brackets off) and port; false if it is no HOST:PORT. */
static bool split_addr(const char *addr, char *host, size_t hlen, const char **port)
{
	const char *colon = strrchr(addr, ':');
	size_t n;

	if (!colon || strncmp(addr, "unix:", 5) == 0 || !colon[1])
		return false;
	n = (size_t)(colon - addr);
	if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']')
		addr++, n -= 2;
	if (n == 0 || n >= hlen)
		return false;
	memcpy(host, addr, n);
	host[n] = 0;
	*port = colon + 1;
	return true;
}

/* A non-blocking TCP connection to host:port within PROBE_MS, or -1. */
static int probe_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		struct pollfd pf;
		int err = 0;
		socklen_t el = sizeof(err);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
			err = errno;
		pf = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (!err && (poll(&pf, 1, PROBE_MS) != 1 ||
			     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0))
			err = ETIMEDOUT;
		if (err) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd;
}

/* Wait for the SSL's want on fd until deadline: false if it passed. */
static bool probe_wait(int fd, int want, long long deadline)
{
	struct pollfd pf = { .fd = fd, .events = want == TLSIO_WANT_OUT ? POLLOUT : POLLIN };
	long long left = deadline - now_ms();

	return left > 0 && poll(&pf, 1, (int)left) == 1;
}

void cli_tls_diagnose(const char *addr, const struct cli_tls *t, char *why, size_t len)
{
	char host[256], err[300] = "", e2[300];
	const char *port, *name;
	unsigned char bin[16];
	SSL_CTX *ctx;
	SSL *ssl = NULL;
	long long deadline;
	long verify;
	bool done = false, spoke, timed_out = false;
	int fd, rc, want = 0;

	why[0] = 0;
	if (!addr || !split_addr(addr, host, sizeof(host), &port))
		return;
	/* Without --tls, a context that verifies against the system's
	 * store: a server's private CA then fails verification, which says
	 * it speaks TLS all the same. */
	ctx = t->on ? tlsio_ctx_client(t->ca, t->cert, t->key, err, sizeof(err))
		    : tlsio_ctx_client(NULL, NULL, NULL, err, sizeof(err));
	if (!ctx)
		return; /* said when the command built its own */
	if ((fd = probe_connect(host, port)) < 0 || !(ssl = tlsio_new(ctx, fd, false)))
		goto out;
	name = t->name ? t->name : host;
	if (inet_pton(AF_INET, name, bin) == 1 || inet_pton(AF_INET6, name, bin) == 1) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
	} else {
		SSL_set_tlsext_host_name(ssl, name);
		SSL_set1_host(ssl, name);
	}
	deadline = now_ms() + PROBE_MS;
	while ((rc = tlsio_handshake(ssl, &want)) == 0)
		if (!probe_wait(fd, want, deadline)) {
			timed_out = true;
			break;
		}
	verify = SSL_get_verify_result(ssl);
	if (rc == 1) {
		/* TLS 1.3: a client certificate the server wanted is refused
		 * after the handshake, in an alert: wait a moment for one. */
		char b;
		ssize_t r;
		done = true;
		deadline = now_ms() + 300;
		while ((r = tlsio_read(ssl, &b, 1, &want)) < 0 && errno == EAGAIN &&
		       probe_wait(fd, want, deadline))
			;
		if (r < 0 && errno != EAGAIN)
			tlsio_errstr(ssl, err, sizeof(err));
	} else if (rc < 0) {
		tlsio_errstr(ssl, err, sizeof(err));
	}
	/* Did the server answer in TLS?  A certificate seen (verified or
	 * not), a finished handshake, or a TLS alert.  A plain kvtierd
	 * answers a ClientHello with a frame or a close: "wrong version
	 * number", "packet length too long", an end of stream. */
	spoke = done || verify != X509_V_OK || SSL_get0_peer_certificate(ssl) ||
		strstr(err, "alert");
	if (!t->on) {
		if (spoke)
			snprintf(why, len, "it serves TLS only: give --tls (with --tls-ca FILE, "
				 "the CA of its certificate, unless the system's store has it)");
	} else if (!spoke) {
		snprintf(why, len, "it does not speak TLS (%s): a plain listener? Drop --tls",
			 timed_out ? "no TLS answer" : err[0] ? err : "connection closed");
	} else if (verify != X509_V_OK) {
		snprintf(why, len, "its certificate does not verify: %s (--tls-ca FILE: the CA "
			 "that signed it; --tls-server-name: the name it carries)",
			 X509_verify_cert_error_string(verify));
	} else if (err[0]) {
		snprintf(e2, sizeof(e2), "%s", err);
		snprintf(why, len, "TLS failed: %s%s", e2,
			 strstr(e2, "certificate required") || strstr(e2, "handshake failure")
			 ? " (it requires a client certificate: --tls-cert FILE --tls-key FILE)"
			 : "");
	}
out:
	tlsio_free(ssl);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(ctx);
}

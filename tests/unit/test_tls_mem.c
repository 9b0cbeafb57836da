/*
 * test_tls_mem.c - kvtierd's charge for a TLS connection's SSL covers what
 * the OpenSSL it is built with holds (daemon/tlsmem.h TLS_HS_MEM,
 * TLS_SSL_MEM, TLS_RBUF; doc/security.md "The SSL object").
 *
 * The constants are OpenSSL 3.0.19's live bytes, measured by this
 * program (it prints them; bench/tls_ssl_mem.c did until 2026-12-05);
 * built against another OpenSSL (3.2 moved the record
 * layer) they may fall short, and the daemon would under-charge
 * --max-memory without a word.  This counts one server SSL's live heap
 * bytes -- CRYPTO_set_mem_functions before any
 * allocation, the server's calls only, kvtierd's own context
 * (lib/sys/tlsio.c tlsio_ctx_server, read ahead as daemon/tls.c sets it),
 * a Unix socket pair with small buffers, the third connection's figures
 * once OpenSSL's caches are filled -- and fails where a stage holds more
 * than the daemon charges for it:
 *
 *   accepted, handshaking (its flight written, no Finished)  <= TLS_HS_MEM
 *   established idle; an answer written in part               <= TLS_SSL_MEM
 *   part of a record read                         <= TLS_SSL_MEM + TLS_RBUF
 *
 * The certificate is made here (P-256, self-signed), so nothing outside
 * the test is needed.  Not threaded: the allocator hooks are process-wide.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "t.h"
#include "tpki.h"
#include "tlsio.h"
#include "tlsmem.h"

static long long live; /* bytes allocated and not freed, all callers */

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

/* What the server's SSL holds: the server's calls' net allocations. */
static long long server;
#define S_BEGIN long long s_was_ = live
#define S_END server += live - s_was_

/* The most each stage held, over the measured connection. */
struct stages {
	long long accepted, handshake, established, output, record;
};

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

/* One connection through the stages. */
static void conn_stages(SSL_CTX *sctx, SSL_CTX *cctx, struct stages *st)
{
	static char buf[65536];
	SSL *s, *c;
	int sv[2], small = 4096, want = 0;

	server = 0;
	T_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	{
		S_BEGIN;
		s = tlsio_new(sctx, sv[0], true);
		S_END;
	}
	T_ASSERT(s);
	st->accepted = server;
	c = SSL_new(cctx);
	SSL_set_fd(c, sv[1]);
	SSL_set_connect_state(c);
	cli_step(c); /* ClientHello */
	T_EQ_INT(srv_step(s), 0); /* the server's flight; waits for Finished */
	st->handshake = server;
	cli_step(c); /* the client's Finished */
	T_EQ_INT(srv_step(s), 1);
	cli_step(c);
	st->established = server;
	memset(buf, 'v', sizeof(buf));
	{
		struct iovec iov = { buf, sizeof(buf) };
		ssize_t w;
		S_BEGIN;
		w = tlsio_writev(s, &iov, 1, &want);
		S_END;
		/* the socket full: a record written in part, the buffer held */
		T_ASSERT(w < (ssize_t)sizeof(buf));
	}
	st->output = server;
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
	{
		static char rec[20000];
		ssize_t n;
		ERR_clear_error();
		T_EQ_INT(SSL_write(c, buf, 16000), 16000); /* one record */
		n = read(sv[0], rec, sizeof(rec));
		T_ASSERT(n > 300);
		T_EQ_INT(write(sv[1], rec, 300), 300); /* 300 bytes of it back */
		{
			struct iovec iov = { rec, sizeof(rec) };
			S_BEGIN;
			(void)tlsio_readv(s, &iov, 1, &want);
			S_END;
		}
		T_EQ_INT(want, TLSIO_WANT_IN);
	}
	st->record = server;
	{
		S_BEGIN;
		tlsio_free(s);
		S_END;
	}
	SSL_free(c);
	close(sv[0]);
	close(sv[1]);
}

static void check(const char *stage, long long held, long long charged)
{
	printf("%-36s %6lld bytes held, %6lld charged\n", stage, held, charged);
	if (held > charged)
		T_FAIL("%s: OpenSSL %s holds %lld bytes, kvtierd charges %lld "
		       "(daemon/tlsmem.h: raise it to the figure above)", stage,
		       OpenSSL_version(OPENSSL_VERSION), held, charged);
}

int main(void)
{
	char dir[256], cert[300], key[300], err[300];
	const char *tmp = getenv("TMPDIR");
	SSL_CTX *sctx, *cctx;
	struct stages st = { 0 };

	/* before OpenSSL allocates anything: else frees of blocks allocated
	 * by the default functions come here */
	if (!CRYPTO_set_mem_functions(mem_malloc, mem_realloc, mem_free))
		T_FAIL("CRYPTO_set_mem_functions: OpenSSL allocated before main");
	snprintf(dir, sizeof(dir), "%s/test_tls_mem.XXXXXX", tmp ? tmp : "/tmp");
	T_ASSERT(mkdtemp(dir));
	t_make_pki(dir, cert, key, sizeof(cert));
	sctx = tlsio_ctx_server(cert, key, NULL, false, err, sizeof(err));
	if (!sctx)
		T_FAIL("server context: %s", err);
	SSL_CTX_set_read_ahead(sctx, 1); /* as daemon/tls.c kvtd_tls_setup */
	cctx = SSL_CTX_new(TLS_client_method());
	T_ASSERT(cctx);
	/* the first connections fill OpenSSL's caches (providers, fetched
	 * algorithms): the third's figures are one connection's */
	for (int i = 0; i < 3; i++)
		conn_stages(sctx, cctx, &st);
	printf("%s\n", OpenSSL_version(OPENSSL_VERSION));
	check("accepted", st.accepted, TLS_HS_MEM);
	check("handshake (flight sent, no Finished)", st.handshake, TLS_HS_MEM);
	check("established, idle", st.established, TLS_SSL_MEM);
	check("established, answer in part", st.output, TLS_SSL_MEM);
	check("established, part of a record", st.record, (long long)TLS_SSL_MEM + TLS_RBUF);
	/* the stages are what they claim: a handshake holds more than an
	 * established SSL, a write or a read buffer is held when said */
	T_ASSERT(st.handshake > st.established);
	T_ASSERT(st.output >= st.established + TLS_WBUF / 2);
	T_ASSERT(st.record >= st.established + TLS_RBUF / 2);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	return 0;
}

/*
 * tls_clear_cost.c - what clearing tlsio_writev's gathered plaintext costs
 * (lib/sys/tlsio.c; doc/security.md "Session 48: TLS throttle slots,
 * cleared plaintext, constant-time compares").  A one-off measurement kept
 * with its figures (bench/RESULTS.md, tls48); meson builds it
 * (build-release/bench/tls_clear_cost) so that it keeps compiling, no test
 * runs it.
 *
 * A TLS 1.3 server and client over a pair of memory BIOs; the server
 * writes 2,340 iovecs of 7 bytes (a RESP pipeline's "+PONG\r\n" answers:
 * 16,380 bytes, one gathered record) through tlsio_writev_with, the clear
 * included, 2,000 times a round; then OPENSSL_cleanse of those 16,380
 * bytes alone, 2,000 times.  Best of 7 rounds of each, in us a call.
 *
 *   meson setup build-release --buildtype=release
 *   ninja -C build-release bench/tls_clear_cost && build-release/bench/tls_clear_cost
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tlsio.h"
#include "tpki.h"

#define NIOV 2340

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
	static unsigned char src[NIOV * 7], gather[TLSIO_GATHER], sink[20000];
	static struct iovec iov[NIOV];
	char cert[300], key[300], err[300], dir[] = "/tmp/tls_clear_cost.XXXXXX";
	SSL_CTX *sc, *cc;
	SSL *s, *c;
	BIO *a, *b;
	double best_w = 1e9, best_c = 1e9;
	int want = 0;

	if (!mkdtemp(dir))
		return 1;
	t_make_pki(dir, cert, key, sizeof(cert));
	sc = tlsio_ctx_server(cert, key, NULL, false, err, sizeof(err));
	cc = SSL_CTX_new(TLS_client_method());
	if (!sc || !cc)
		return 1;
	s = SSL_new(sc);
	c = SSL_new(cc);
	a = BIO_new(BIO_s_mem());
	b = BIO_new(BIO_s_mem());
	BIO_up_ref(a);
	BIO_up_ref(b);
	SSL_set_bio(s, a, b);
	SSL_set_bio(c, b, a);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	for (int step = 0; !SSL_is_init_finished(s) || !SSL_is_init_finished(c); step++) {
		if (step > 100)
			return 1;
		SSL_do_handshake(s);
		SSL_do_handshake(c);
		ERR_clear_error();
	}
	memset(src, 'x', sizeof(src));
	for (int i = 0; i < NIOV; i++) {
		iov[i].iov_base = src + 7 * i;
		iov[i].iov_len = 7;
	}
	for (int r = 0; r < 7; r++) {
		double t0 = now_s(), t1, t2;
		for (int k = 0; k < 2000; k++) {
			if (tlsio_writev_with(s, iov, NIOV, &want, gather) != NIOV * 7)
				return 1;
			while (BIO_read(b, sink, sizeof(sink)) > 0)
				;
		}
		t1 = now_s();
		for (int k = 0; k < 2000; k++)
			OPENSSL_cleanse(gather, NIOV * 7);
		t2 = now_s();
		if ((t1 - t0) / 2000 < best_w)
			best_w = (t1 - t0) / 2000;
		if ((t2 - t1) / 2000 < best_c)
			best_c = (t2 - t1) / 2000;
	}
	printf("tlsio_writev of %d 7-byte iovecs (%d B gathered, one record, its clear "
	       "included): %.2f us; OPENSSL_cleanse of those bytes alone: %.3f us (%.1f%%)\n",
	       NIOV, NIOV * 7, best_w * 1e6, best_c * 1e6, 100 * best_c / best_w);
	SSL_free(s);
	SSL_free(c);
	SSL_CTX_free(sc);
	SSL_CTX_free(cc);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	return 0;
}

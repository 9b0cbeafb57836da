/*
 * test_tlsio_writev.c - lib/sys/tlsio.c tlsio_writev over a real socket
 * pair whose reader lags: a stream of iovecs, most of a few bytes (a RESP
 * pipeline's answers) with some of 16-40 KB among them (GET answers), is
 * written as kvtierd's loop writes a connection's queue -- resumed after
 * each SSL_ERROR_WANT_WRITE at the byte after what was taken, with the same
 * bytes and more queued after them, offered up to 128 iovecs at a time.
 *
 * Asserted: every byte arrives once and in order (a retry that offered
 * less than the record OpenSSL holds fails "bad write retry" / "bad
 * length", and the stream breaks); there were such retries; and the wire
 * bytes are at most 1.05 times the stream (small iovecs gathered into
 * records of up to 16 KiB: one record an iovec was 29 bytes for each
 * 7-byte answer).  doc/security.md "Session 47:
 * slow readers over TLS".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "t.h"
#include "tpki.h"
#include "tlsio.h"

#define NSEG 60000

static size_t seg_len[NSEG];
static size_t seg_off[NSEG];

int main(void)
{
	char dir[256], cert[300], key[300], err[300];
	const char *tmp = getenv("TMPDIR");
	SSL_CTX *sctx, *cctx;
	SSL *s, *c;
	BIO *rb, *wb;
	int sv[2], small = 8192, want = 0;
	size_t total = 0, sent = 0, got = 0, wire = 0, offered = 0;
	unsigned long retries = 0, seed = 47;
	unsigned char *src, *dst;
	unsigned cur = 0;
	size_t cur_off = 0;

	snprintf(dir, sizeof(dir), "%s/test_tlsio_writev.XXXXXX", tmp ? tmp : "/tmp");
	T_ASSERT(mkdtemp(dir));
	t_make_pki(dir, cert, key, sizeof(cert));
	sctx = tlsio_ctx_server(cert, key, NULL, false, err, sizeof(err));
	if (!sctx)
		T_FAIL("server context: %s", err);
	cctx = SSL_CTX_new(TLS_client_method());
	T_ASSERT(cctx);

	for (unsigned i = 0; i < NSEG; i++) {
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		seg_len[i] = (seed >> 33) % 199 == 0 ? 16000 + (seed >> 20) % 24000
						     : 1 + (seed >> 40) % 12;
		seg_off[i] = total;
		total += seg_len[i];
	}
	src = malloc(total);
	dst = malloc(total);
	T_ASSERT(src && dst);
	for (size_t k = 0; k < total; k++)
		src[k] = (unsigned char)(k * 131 + (k >> 9));

	T_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	s = tlsio_new(sctx, sv[0], true);
	T_ASSERT(s);
	/* the client reads the socket itself (into a memory BIO): its wire
	 * bytes counted */
	c = SSL_new(cctx);
	rb = BIO_new(BIO_s_mem());
	wb = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(rb, -1);
	SSL_set_bio(c, rb, wb);
	SSL_set_connect_state(c);

	for (int step = 0; !SSL_is_init_finished(s) || !SSL_is_init_finished(c); step++) {
		char buf[16384];
		int r;
		T_ASSERT(step < 1000);
		(void)tlsio_handshake(s, &want);
		ERR_clear_error();
		SSL_do_handshake(c);
		while ((r = BIO_read(wb, buf, sizeof(buf))) > 0)
			T_EQ_INT((int)write(sv[1], buf, (size_t)r), r);
		while ((r = (int)read(sv[1], buf, sizeof(buf))) > 0)
			BIO_write(rb, buf, r);
	}

	while (got < total) {
		struct iovec iov[128];
		int n = 0;
		ssize_t w;
		char buf[65536];
		int r;

		/* the queue grows: a few more segments each round */
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		offered += 1 + (seed >> 35) % 64;
		if (offered > NSEG)
			offered = NSEG;
		for (unsigned i = cur; i < offered && n < 128; i++, n++) {
			size_t skip = i == cur ? cur_off : 0;
			iov[n].iov_base = src + seg_off[i] + skip;
			iov[n].iov_len = seg_len[i] - skip;
		}
		if (n > 0) {
			w = tlsio_writev(s, iov, n, &want);
			if (w < 0) {
				T_ASSERT(errno == EAGAIN && want == TLSIO_WANT_OUT);
				retries++;
			} else {
				sent += (size_t)w;
				while (w > 0) {
					size_t left = seg_len[cur] - cur_off;
					if ((size_t)w < left) {
						cur_off += (size_t)w;
						break;
					}
					w -= (ssize_t)left;
					cur++, cur_off = 0;
				}
			}
		}
		/* the reader lags: one socket read a round, at most 6 KiB */
		r = (int)read(sv[1], buf, 1024 + (seed >> 45) % 5120);
		if (r > 0) {
			wire += (size_t)r;
			BIO_write(rb, buf, r);
		}
		for (;;) {
			ERR_clear_error();
			r = SSL_read(c, dst + got, (int)(total - got < 65536 ? total - got : 65536));
			if (r <= 0) {
				T_ASSERT(SSL_get_error(c, r) == SSL_ERROR_WANT_READ);
				break;
			}
			got += (size_t)r;
		}
	}
	T_ASSERT(memcmp(src, dst, total) == 0);
	printf("%u iovecs, %zu bytes: %zu bytes of records (%.3f x), %lu writes "
	       "refused (want write) and retried\n", NSEG, total, wire, (double)wire / total,
	       retries);
	T_ASSERT(retries > 100);
	T_ASSERT(wire <= total + total / 20);
	SSL_free(c);
	tlsio_free(s);
	close(sv[0]);
	close(sv[1]);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	free(src);
	free(dst);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	return 0;
}

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
 *
 * Then the same stream to a client that negotiated max_fragment_length
 * 512 (mfl_case): the server's records carry at most 512 bytes, one an
 * SSL_write, and no gather copies more than that (the library's
 * SSL_write calls are seen through the linker: --wrap=SSL_write); a
 * 16 KiB gather a 512-byte record copied 32 times the bytes sent.
 *
 * Then the same under kernel TLS (ktls_case): OpenSSL does not copy what
 * it sends through kTLS, it keeps a pointer to the caller's buffer and a
 * retry after WANT_WRITE sends the rest from there, not from the retry's
 * buffer.  A write BIO that says it is kTLS (as a socket BIO does when the
 * kernel's tls module took the keys) takes 5 bytes of a write, refuses the
 * rest, then records what comes: the retry, made from a deeper stack (as
 * kvtierd's loop_conn_flush is called from the event loop, from the
 * touched list, from kvtd_conn_queue), must bring the stream's next bytes,
 * not what lies where a gathered copy on the stack used to be.
 * doc/security.md "Session 47: tlsio_writev gathering under kTLS".
 *
 * Then clear_case: the same lagging-reader stream written through
 * tlsio_writev_with and a gather buffer of the test's: after every call,
 * gathered or refused (WANT_WRITE), the buffer holds no byte of the
 * stream (all zero: cleared before the call returned), and the retries
 * still bring every byte once and in order.  Before session 48 the
 * gathered plaintext (other tenants' answers) stayed on the loop's stack.
 * doc/security.md "Session 48: TLS throttle slots, cleared plaintext,
 * constant-time compares".
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

/* A write BIO that says it is kTLS: takes `take` bytes of the next write
 * (recorded), then refuses writes while `refuse`. */
static unsigned char kt_seen[4096];
static size_t kt_len, kt_take;
static int kt_refuse;

static int kt_write(BIO *b, const char *buf, int len)
{
	int n = len;
	BIO_clear_retry_flags(b);
	if (kt_refuse) {
		if ((size_t)n > kt_take)
			n = (int)kt_take;
		kt_take -= (size_t)n;
		if (n == 0) {
			BIO_set_retry_write(b);
			return -1;
		}
	}
	if ((size_t)n > sizeof(kt_seen) - kt_len)
		n = (int)(sizeof(kt_seen) - kt_len);
	memcpy(kt_seen + kt_len, buf, (size_t)n);
	kt_len += (size_t)n;
	return n;
}

static long kt_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b, (void)num, (void)ptr;
	return cmd == BIO_CTRL_GET_KTLS_SEND || cmd == BIO_CTRL_FLUSH;
}

static int kt_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

/* The retry, from `depth` frames of 2 KiB deeper, each filled with 0xee
 * (where the refused call's frame was). */
static ssize_t kt_retry(SSL *s, const struct iovec *iov, int n, int *want, int depth)
{
	volatile unsigned char pad[2048];
	ssize_t w;
	memset((unsigned char *)pad, 0xee, sizeof(pad));
	if (depth > 0)
		w = kt_retry(s, iov, n, want, depth - 1);
	else
		w = tlsio_writev(s, iov, n, want);
	return w + pad[depth & 1023] - 0xee;
}

static void ktls_case(SSL_CTX *sctx, SSL_CTX *cctx)
{
	SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
	BIO *s2c = BIO_new(BIO_s_mem()), *c2s = BIO_new(BIO_s_mem()), *kt;
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ktls");
	static const char text[] = "+PONG\r\n:1\r\n$3\r\nabc\r\n+OK\r\n-ERR no\r\n";
	struct iovec iov[5] = {
		{ (void *)text, 7 }, { (void *)(text + 7), 4 }, { (void *)(text + 11), 9 },
		{ (void *)(text + 20), 5 }, { (void *)(text + 25), 9 } };
	int want = 0;
	ssize_t w;

	T_ASSERT(s && c && s2c && c2s && m);
	BIO_up_ref(s2c);
	BIO_up_ref(c2s);
	SSL_set_bio(s, c2s, s2c);
	SSL_set_bio(c, s2c, c2s);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	for (int step = 0; !SSL_is_init_finished(s) || !SSL_is_init_finished(c); step++) {
		T_ASSERT(step < 100);
		ERR_clear_error();
		SSL_do_handshake(s);
		ERR_clear_error();
		SSL_do_handshake(c);
	}
	BIO_meth_set_write(m, kt_write);
	BIO_meth_set_ctrl(m, kt_ctrl);
	BIO_meth_set_create(m, kt_create);
	kt = BIO_new(m);
	T_ASSERT(kt);
	SSL_set0_wbio(s, kt); /* the memory BIO's reference is dropped */
	T_ASSERT(tlsio_ktls_send(s));

	kt_refuse = 1, kt_take = 5;
	w = tlsio_writev(s, iov, 5, &want);
	T_ASSERT(w < 0 && errno == EAGAIN && want == TLSIO_WANT_OUT);
	T_EQ_INT((int)kt_len, 5);
	kt_refuse = 0;
	/* resumed at the same byte, the same iovecs (nothing was taken) */
	w = kt_retry(s, iov, 5, &want, 8);
	T_EQ_INT((int)w, (int)(sizeof(text) - 1));
	{
		size_t k = 0;
		while (k < kt_len && k < sizeof(text) - 1 && kt_seen[k] == (unsigned char)text[k])
			k++;
		printf("kTLS: %zu bytes reached the socket, the first %zu as written "
		       "(byte %zu: 0x%02x)\n", kt_len, k, k, k < kt_len ? kt_seen[k] : 0);
	}
	T_EQ_INT((int)kt_len, (int)(sizeof(text) - 1));
	T_ASSERT(memcmp(kt_seen, text, kt_len) == 0);
	SSL_free(s);
	SSL_free(c);
	BIO_meth_free(m);
}

static size_t seg_len[NSEG];
static size_t seg_off[NSEG];
static unsigned char *src;
static size_t total;

/* Every SSL_write of the library's (linked with --wrap=SSL_write): what
 * it offered from a gathered copy (a buffer outside the stream). */
int __real_SSL_write(SSL *ssl, const void *buf, int num);
int __wrap_SSL_write(SSL *ssl, const void *buf, int num);
static size_t wr_gathered, wr_gathered_max;
static unsigned long wr_gathers, wr_refused;

int __wrap_SSL_write(SSL *ssl, const void *buf, int num)
{
	const unsigned char *p = buf;
	int ret;
	if (src && num > 0 && (p < src || p >= src + total)) {
		wr_gathered += (size_t)num;
		wr_gathers++;
		if ((size_t)num > wr_gathered_max)
			wr_gathered_max = (size_t)num;
	}
	ret = __real_SSL_write(ssl, buf, num);
	if (src && ret <= 0)
		wr_refused++; /* a record held for the retry */
	return ret;
}

struct run {
	size_t wire;		/* bytes of records the client read */
	unsigned long retries;	/* writes refused (want write) and retried */
	unsigned mfl;		/* the server's session's max_fragment_length */
};

/* The stream src[0..total) written by a server of sctx, through a
 * socket pair, to a lagging client of cctx: every byte once and in
 * order. */
static unsigned long gb_calls, gb_left; /* clear_case: calls, and ones that left bytes */

static struct run stream_case(SSL_CTX *sctx, SSL_CTX *cctx, unsigned char *gbuf)
{
	struct run run = { 0, 0, 0 };
	SSL *s, *c;
	BIO *rb, *wb;
	int sv[2], small = 8192, want = 0;
	size_t sent = 0, got = 0, offered = 0;
	unsigned long seed = 4747;
	unsigned char *dst = malloc(total);
	unsigned cur = 0;
	size_t cur_off = 0;

	T_ASSERT(dst);
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
	run.mfl = SSL_SESSION_get_max_fragment_length(SSL_get_session(s));

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
			if (gbuf) {
				size_t k = 0;
				w = tlsio_writev_with(s, iov, n, &want, gbuf);
				while (k < TLSIO_GATHER && gbuf[k] == 0)
					k++;
				gb_calls++;
				gb_left += k < TLSIO_GATHER;
			} else {
				w = tlsio_writev(s, iov, n, &want);
			}
			if (w < 0) {
				T_ASSERT(errno == EAGAIN && want == TLSIO_WANT_OUT);
				run.retries++;
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
			run.wire += (size_t)r;
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
	T_ASSERT(sent == total); /* every byte reported written once */
	SSL_free(c);
	tlsio_free(s);
	close(sv[0]);
	close(sv[1]);
	free(dst);
	return run;
}

int main(void)
{
	char dir[256], cert[300], key[300], err[300];
	const char *tmp = getenv("TMPDIR");
	SSL_CTX *sctx, *cctx, *mctx;
	unsigned long seed = 47;
	struct run run;

	snprintf(dir, sizeof(dir), "%s/test_tlsio_writev.XXXXXX", tmp ? tmp : "/tmp");
	T_ASSERT(mkdtemp(dir));
	t_make_pki(dir, cert, key, sizeof(cert));
	sctx = tlsio_ctx_server(cert, key, NULL, false, err, sizeof(err));
	if (!sctx)
		T_FAIL("server context: %s", err);
	cctx = SSL_CTX_new(TLS_client_method());
	mctx = SSL_CTX_new(TLS_client_method());
	T_ASSERT(cctx && mctx);
	T_EQ_INT(SSL_CTX_set_tlsext_max_fragment_length(mctx, TLSEXT_max_fragment_length_512),
		 1);

	for (unsigned i = 0; i < NSEG; i++) {
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		seg_len[i] = (seed >> 33) % 199 == 0 ? 16000 + (seed >> 20) % 24000
						     : 1 + (seed >> 40) % 12;
		seg_off[i] = total;
		total += seg_len[i];
	}
	src = malloc(total);
	T_ASSERT(src);
	for (size_t k = 0; k < total; k++)
		src[k] = (unsigned char)(k * 131 + (k >> 9));

	run = stream_case(sctx, cctx, NULL);
	printf("%u iovecs, %zu bytes: %zu bytes of records (%.3f x), %lu writes "
	       "refused (want write) and retried (%lu SSL_writes); %lu gathered, %zu bytes "
	       "copied (at most %zu a call)\n", NSEG, total, run.wire,
	       (double)run.wire / total, run.retries, wr_refused, wr_gathers, wr_gathered,
	       wr_gathered_max);
	T_EQ_INT((int)run.mfl, TLSEXT_max_fragment_length_DISABLED);
	T_ASSERT(run.retries > 100);
	T_ASSERT(run.wire <= total + total / 20);
	T_ASSERT(wr_gathered_max > 512); /* records of more than mfl_case's */

	/*
	 * mfl_case: the client negotiated max_fragment_length 512 (RFC 6066),
	 * so each record the server sends carries at most 512 bytes, and each
	 * SSL_write sends one.  A gather is at most 512 bytes: one of 16 KiB
	 * copied 32 times what the record sent (lib/sys/tlsio.c "A record's
	 * plaintext is the session's").
	 */
	wr_gathered = wr_gathered_max = 0, wr_gathers = wr_refused = 0;
	run = stream_case(sctx, mctx, NULL);
	printf("max_fragment_length 512: %zu bytes of records (%.3f x), %lu writes "
	       "refused and retried (%lu SSL_writes); %lu gathered, %zu bytes copied "
	       "(%.3f x the stream, at most %zu a call)\n", run.wire,
	       (double)run.wire / total, run.retries, wr_refused, wr_gathers, wr_gathered,
	       (double)wr_gathered / total, wr_gathered_max);
	T_EQ_INT((int)run.mfl, TLSEXT_max_fragment_length_512);
	/* refused SSL_writes, each retried by the next call: most within a
	 * call that had taken bytes before (records of 512 leave room) */
	T_ASSERT(wr_refused > 100);
	T_ASSERT(wr_gathers > 0);
	T_ASSERT(wr_gathered_max <= 512);
	/* bytes copied: the stream's small iovecs once, and again for each
	 * refused SSL_write (at most 512 each) */
	T_ASSERT(wr_gathered <= total + wr_refused * 512);

	/*
	 * clear_case: the stream again, gathered through a buffer of ours:
	 * after every call the buffer is all zero, and the stream arrives
	 * whole through the refused writes' retries.
	 */
	{
		unsigned char *gbuf = calloc(1, TLSIO_GATHER);
		T_ASSERT(gbuf);
		wr_gathered = wr_gathered_max = 0, wr_gathers = wr_refused = 0;
		run = stream_case(sctx, cctx, gbuf);
		printf("cleared gathers: %lu calls, %lu gathered SSL_writes (%lu refused and "
		       "retried), %lu calls left gathered bytes in the buffer\n", gb_calls,
		       wr_gathers, run.retries, gb_left);
		T_ASSERT(run.retries > 100);
		T_ASSERT(wr_gathers > 1000);
		T_EQ_INT((int)gb_left, 0);
		free(gbuf);
	}

	free(src);
	src = NULL; /* ktls_case's writes are not the stream's */
	ktls_case(sctx, cctx);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	SSL_CTX_free(mctx);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	return 0;
}

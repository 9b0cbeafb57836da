/*
 * tlsio.c - non-blocking TLS I/O shaped like read/readv/writev, and the
 * OpenSSL contexts of kvtierd and the remote tier (tlsio.h says what each
 * promises).
 *
 * Owns nothing long-lived: contexts and SSLs belong to their callers.
 * OpenSSL's error queue is per thread; every call clears it first so that
 * SSL_get_error reads this call's result only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tlsio.h"

static void tlsio_err(char *err, size_t errlen, const char *what, const char *file)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	snprintf(err, errlen, "%s%s%s%s%s", what, file ? " " : "", file ? file : "",
		 e ? ": " : "", buf);
	ERR_clear_error();
}

/* What both sides share. */
static SSL_CTX *tlsio_ctx_new(const SSL_METHOD *m, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(m);

	if (!ctx) {
		tlsio_err(err, errlen, "SSL_CTX_new", NULL);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	/* A peer that closes without close_notify ends the stream like a
	 * FIN: frames are length-prefixed, so a truncated one is still seen
	 * as one (kvtierd counts it as vanished). */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
			    SSL_OP_NO_TICKET | SSL_OP_ENABLE_KTLS);
	/* Key exchange on elliptic curves only.  OpenSSL 3.0 also offers
	 * TLS 1.3's finite-field groups, and a server takes the group the
	 * client's key share names: a canned ClientHello of 1.2 KB naming
	 * ffdhe8192 cost the server's loop 108 ms of CPU a connection,
	 * against 0.23 ms for X25519 (release; doc/security.md "Session 35
	 * review, part 2", test_hostile_http tls_groups), before any
	 * client's proof of anything.  The curves kept cost 0.2-0.8 ms; a
	 * client that offers none of them fails its handshake. */
	if (SSL_CTX_set1_groups_list(ctx, TLSIO_GROUPS) != 1) {
		tlsio_err(err, errlen, "cannot set the key exchange groups", NULL);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int tlsio_load_pair(SSL_CTX *ctx, const char *cert, const char *key, char *err,
			   size_t errlen)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		tlsio_err(err, errlen, "cannot load the certificate", cert);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		tlsio_err(err, errlen, "cannot load the key", key);
		return -1;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		tlsio_err(err, errlen, "the key does not match the certificate", key);
		return -1;
	}
	return 0;
}

/* tlsio.h says what is refused; a malformed list goes on, to fail in
 * OpenSSL's own parse of the same bytes. */
bool tlsio_share_refused(const unsigned char *ext, size_t ext_len)
{
	static const uint16_t ids[] = TLSIO_GROUP_IDS;
	bool ours = false;
	size_t off = 2;

	if (ext_len < 2 || ((size_t)ext[0] << 8 | ext[1]) != ext_len - 2)
		return false;
	while (off < ext_len) {
		unsigned g;
		size_t key_len;

		if (ext_len - off < 4)
			return false; /* an entry's head cut short */
		g = (unsigned)ext[off] << 8 | ext[off + 1];
		key_len = (size_t)ext[off + 2] << 8 | ext[off + 3];
		if (key_len == 0 || key_len > ext_len - off - 4)
			return false; /* an empty key, or one past the list's end */
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			ours |= g == ids[i];
		off += 4 + key_len;
	}
	return !ours;
}

/*
 * A TLS 1.3 ClientHello without a key share of a group the server takes
 * (TLSIO_GROUP_IDS) is refused, not answered with a HelloRetryRequest.
 * After a retry the client's second ClientHello is read as the first was
 * not: OpenSSL allocates and zeroes the 131,396 bytes its header may
 * declare, and kvtierd's first-record gate (daemon/tls.c "A ClientHello's
 * length") is behind it -- a canned ClientHello sharing ffdhe2048 and
 * naming X25519 among its groups, then 9 bytes, held ~190 KiB of the
 * server (ASan) for the handshake's deadline, against the 60 KiB charged
 * (test_hostile_http tls_big_messages; doc/security.md "Session 36
 * review"), at no crypto on either side.  Every client of kvtierd's (this
 * file's client context, OpenSSL's, Go's, rustls, NSS, Java) sends a
 * share of X25519 or P-256 in its first ClientHello.  A ClientHello with
 * no key_share (TLS 1.2) or a malformed one goes on: OpenSSL decides, and
 * refuses the malformed one itself (decode_error), before any retry
 * (tlsio_share_refused; tests/unit/test_tlshello.c drives a server with
 * each case).
 */
static int tlsio_hello_share(SSL *s, int *al, void *arg)
{
	const unsigned char *p;
	size_t len;

	(void)arg;
	if (!SSL_client_hello_get0_ext(s, TLSEXT_TYPE_key_share, &p, &len) ||
	    !tlsio_share_refused(p, len))
		return SSL_CLIENT_HELLO_SUCCESS;
	*al = SSL_AD_HANDSHAKE_FAILURE;
	return SSL_CLIENT_HELLO_ERROR;
}

/*
 * Every certificate a context holds (its own chain, the CAs of its
 * store), with its extensions decoded now, before the threads that share
 * the context do.  OpenSSL decodes a certificate's extensions (key
 * identifiers, key usage, ...) into the X509 the first time a check needs
 * them, under the X509's lock, and every later check reads them without
 * the lock once an acquire load of a "cached" flag sees them done
 * (ossl_x509v3_cache_extensions; OpenSSL 1.1.1 on).  That is sound, but
 * the flag's atomics are inside libcrypto, which TSan does not
 * instrument: the first two handshakes verifying client certificates on
 * two of kvtierd's loops at once had the second read the CA's subject key
 * identifier (memcmp, intercepted) that the first had just written under
 * the lock, with no edge TSan could see -- a data race report and exit 66
 * in 5 runs of test_tls in 40 under TSan (tests/unit/test_tls_threads.c:
 * 12 in 12).  Decoded here, they are written before the threads that
 * share the context start, and only read after.  A certificate whose
 * extensions are invalid stays so marked: its verification fails later
 * as it would have.  CAs a store looks up in a directory (the system's,
 * tlsio_ctx_client without ca) load during verification and are not
 * reached here.
 */
static void tlsio_decode_certs(SSL_CTX *ctx)
{
	STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
	STACK_OF(X509) *chain = NULL;
	X509 *own = SSL_CTX_get0_certificate(ctx);

	if (own)
		X509_check_purpose(own, -1, 0);
	if (SSL_CTX_get0_chain_certs(ctx, &chain) == 1)
		for (int i = 0; i < sk_X509_num(chain); i++)
			X509_check_purpose(sk_X509_value(chain, i), -1, 0);
	for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
		X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));
		if (x)
			X509_check_purpose(x, -1, 0);
	}
}

SSL_CTX *tlsio_ctx_server(const char *cert, const char *key, const char *ca,
			  bool verify_client, char *err, size_t errlen)
{
	SSL_CTX *ctx = tlsio_ctx_new(TLS_server_method(), err, errlen);

	if (!ctx)
		return NULL;
	SSL_CTX_set_num_tickets(ctx, 0);
	/* No session cache either (tickets are off above): OpenSSL's server
	 * cache kept every TLS 1.2 session it made, ~1.2 KB each, 20,480 of
	 * them for two hours, outside --max-memory -- anyone's handshakes
	 * filled it (test_hostile_http tls_sessions).  kvtierd's clients hold
	 * their connections; a new one does a full handshake. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_max_cert_list(ctx, TLSIO_CERT_LIST_MAX);
	SSL_CTX_set_client_hello_cb(ctx, tlsio_hello_share, NULL);
	if (tlsio_load_pair(ctx, cert, key, err, errlen) < 0)
		goto fail;
	if (ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
		if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 || !names) {
			tlsio_err(err, errlen, "cannot load the CA file", ca);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
				   (verify_client ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
	} else if (verify_client) {
		snprintf(err, errlen, "verifying clients needs a CA file");
		goto fail;
	}
	tlsio_decode_certs(ctx);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *tlsio_ctx_client(const char *ca, const char *cert, const char *key, char *err,
			  size_t errlen)
{
	SSL_CTX *ctx = tlsio_ctx_new(TLS_client_method(), err, errlen);

	if (!ctx)
		return NULL;
	if (ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1
	       : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		tlsio_err(err, errlen, "cannot load the CA file", ca ? ca : "(system)");
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((cert != NULL) != (key != NULL)) {
		snprintf(err, errlen, "a client certificate needs both a certificate and a key");
		goto fail;
	}
	if (cert && tlsio_load_pair(ctx, cert, key, err, errlen) < 0)
		goto fail;
	tlsio_decode_certs(ctx);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL *tlsio_new(SSL_CTX *ctx, int fd, bool server)
{
	SSL *ssl = SSL_new(ctx);

	if (!ssl)
		return NULL;
	if (SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	if (server)
		SSL_set_accept_state(ssl);
	else
		SSL_set_connect_state(ssl);
	return ssl;
}

/* An SSL call returned ret <= 0: errno and *want as the syscalls would.
 * -1, or 0 for the end of the stream. */
static ssize_t tlsio_fail(SSL *ssl, int ret, int *want)
{
	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		*want = TLSIO_WANT_IN;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		*want = TLSIO_WANT_OUT;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (errno == 0 || errno == EAGAIN)
			errno = ECONNRESET;
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}

int tlsio_handshake(SSL *ssl, int *want)
{
	int ret;

	ERR_clear_error();
	ret = SSL_do_handshake(ssl);
	if (ret == 1) {
		*want = 0;
		return 1;
	}
	if (tlsio_fail(ssl, ret, want) == 0)
		errno = ECONNRESET; /* closed during the handshake */
	return errno == EAGAIN ? 0 : -1;
}

ssize_t tlsio_read(SSL *ssl, void *buf, size_t len, int *want)
{
	int ret;

	if (len > INT_MAX)
		len = INT_MAX;
	ERR_clear_error();
	ret = SSL_read(ssl, buf, (int)len);
	if (ret > 0) {
		*want = 0;
		return ret;
	}
	return tlsio_fail(ssl, ret, want);
}

ssize_t tlsio_readv(SSL *ssl, const struct iovec *iov, int n, int *want)
{
	ssize_t total = 0;

	for (int i = 0; i < n; i++) {
		size_t off = 0;
		while (off < iov[i].iov_len) {
			ssize_t r = tlsio_read(ssl, (char *)iov[i].iov_base + off,
					       iov[i].iov_len - off, want);
			if (r <= 0)
				/* What was read counts; the condition comes back
				 * on the next call. */
				return total > 0 ? total : r;
			off += (size_t)r;
			total += r;
			if (total > SSIZE_MAX / 2)
				return total;
		}
	}
	return total;
}

/*
 * Small iovecs in one record.  Each SSL_write makes at least one record
 * (22 bytes more in TLS 1.3, an encryption and a write(2)), so an iovec a
 * call made a record of each: a RESP pipeline's answers (a "+PONG\r\n"
 * each, an iovec each) went out as 29-byte records, 4.1 times their text
 * on the wire, the server's CPU for them 5.8 times plain text's (release,
 * 100,000 PINGs; test_hostile_http tls_small_answers).  Now what starts
 * with an iovec of less than a record's plaintext (TLSIO_GATHER, or the
 * session's less: below) is copied with those after it, up to a record's
 * worth, and written in one SSL_write; a longer one is written from where
 * it is, as before.
 *
 * A retry after SSL_ERROR_WANT_WRITE must offer the same bytes, at least
 * as many as the refused call (the buffer may move:
 * SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER): OpenSSL holds a record encrypted,
 * and may have sent one before it in that call, reported only by the
 * retry (its wnum); fewer bytes fail "bad length".  Callers resume at the
 * byte after what was taken, with the same bytes and perhaps more after
 * them; which way a call writes depends only on the first iovec's length
 * there, so a retry gathers again what the refused call gathered (and
 * perhaps more, up to the same cap) or offers that same iovec whole
 * again.  test_tlsio_writev resumes so against a lagging reader.
 *
 * A record's plaintext is the session's: 16 KiB, or less where the client
 * negotiated a max_fragment_length (RFC 6066: 512 to 4096 bytes; OpenSSL
 * 3.0 honours it on the server side, and has no record_size_limit, RFC
 * 8449).  There each SSL_write sends one record and returns (partial
 * writes): gathering 16 KiB to send 512 copied 32 times the bytes sent, a
 * call's 16 KiB memcpy for each 512-byte record (test_tlsio_writev
 * mfl_case).  So the gather stops at the session's plaintext a record
 * (tlsio_gather_cap), and an iovec of at least that much goes in place.
 * The cap keeps the retry rule: it is the session's, negotiated in the
 * handshake and fixed after it (no renegotiation: SSL_OP_NO_RENEGOTIATION;
 * a TLS 1.3 ticket copies the session, extension included), so a refused
 * call and its retry, both after the handshake (every caller completes it
 * with tlsio_handshake first), gather up to the same cap.  kvtierd sets no
 * max_send_fragment, which would lower it further (3.0 cannot read it).
 *
 * Not under kernel TLS: there OpenSSL copies nothing, it keeps a pointer
 * to the buffer of the refused call and its retry sends the rest from
 * there (ssl3_write_pending writes from its write buffer, which kTLS sets
 * to the caller's), whatever buffer the retry offers.  The gathered copy
 * is on this call's stack, gone at the retry: the retry sent what lay
 * there then (test_tlsio_writev ktls_case: 29 bytes of 0xee, a deeper
 * frame's, where "+PONG..." was).  So each iovec goes in place, as before:
 * the queue's memory lives until what was taken of it is reported.
 *
 * The gathered copy is plaintext -- any tenant's answers, values -- and
 * was left on the stack after the call, where a later frame of the loop
 * (any connection's) found it uninitialised: a stack read past its bounds
 * or a leak of uninitialised bytes anywhere in the process would show
 * another tenant's data.  Since session 48 what was gathered is cleared
 * (OPENSSL_cleanse, which the compiler cannot drop) before the call
 * returns, on every path.  Safe against the retry rule: without kTLS,
 * SSL_write has encrypted what it took into its own write buffer before
 * it returns, a refused record included (the retry sends that record
 * from there; with SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER the retry's buffer
 * is only checked to be long enough), and the retry gathers the same
 * bytes again from the queue; under kTLS, where OpenSSL keeps the
 * caller's pointer, nothing is gathered.  test_tlsio_writev clear_case.
 */

/* The plaintext of one record this session sends (see above). */
static size_t tlsio_gather_cap(SSL *ssl)
{
	SSL_SESSION *sess = SSL_get_session(ssl);
	uint8_t mfl = sess ? SSL_SESSION_get_max_fragment_length(sess)
			   : TLSEXT_max_fragment_length_DISABLED;

	if (mfl >= TLSEXT_max_fragment_length_512 && mfl <= TLSEXT_max_fragment_length_4096)
		return (size_t)512 << (mfl - TLSEXT_max_fragment_length_512);
	return TLSIO_GATHER;
}

ssize_t tlsio_writev(SSL *ssl, const struct iovec *iov, int n, int *want)
{
	unsigned char gather[TLSIO_GATHER];

	return tlsio_writev_with(ssl, iov, n, want, gather);
}

ssize_t tlsio_writev_with(SSL *ssl, const struct iovec *iov, int n, int *want,
			  unsigned char *gather)
{
	ssize_t total = 0;
	size_t off = 0, used = 0; /* used: the most gathered, cleared on return */
	int i = 0;
	bool gathers = !tlsio_ktls_send(ssl);
	size_t cap = gathers ? tlsio_gather_cap(ssl) : 0;

	for (;;) {
		const unsigned char *p;
		size_t len, adv;
		int ret;

		while (i < n && off == iov[i].iov_len)
			i++, off = 0;
		if (i == n)
			break;
		len = iov[i].iov_len - off;
		p = (const unsigned char *)iov[i].iov_base + off;
		if (gathers && len < cap) {
			size_t o = off;
			len = 0;
			for (int j = i; j < n && len < cap; j++, o = 0) {
				const unsigned char *b = iov[j].iov_base;
				size_t take = iov[j].iov_len - o;
				if (take > cap - len)
					take = cap - len;
				if (take) /* an empty iovec's base may be NULL */
					memcpy(gather + len, b + o, take);
				len += take;
			}
			p = gather;
			if (len > used)
				used = len;
		}
		ERR_clear_error();
		ret = SSL_write(ssl, p, len > INT_MAX ? INT_MAX : (int)len);
		if (ret <= 0) {
			ssize_t r = tlsio_fail(ssl, ret, want);
			int e = errno;
			if (r == 0)
				e = EPIPE, r = -1;
			if (used)
				OPENSSL_cleanse(gather, used);
			errno = e;
			return total > 0 ? total : r;
		}
		total += ret;
		for (adv = (size_t)ret; adv > 0;) {
			size_t left = iov[i].iov_len - off;
			if (adv < left) {
				off += adv;
				break;
			}
			adv -= left;
			i++, off = 0;
		}
	}
	if (used)
		OPENSSL_cleanse(gather, used);
	*want = 0;
	return total;
}

bool tlsio_pending(SSL *ssl)
{
	return ssl && SSL_has_pending(ssl);
}

bool tlsio_ktls_send(SSL *ssl)
{
	return BIO_get_ktls_send(SSL_get_wbio(ssl)) != 0;
}

void tlsio_errstr(SSL *ssl, char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (v != X509_V_OK)
		snprintf(buf, len, "certificate verification failed: %s",
			 X509_verify_cert_error_string(v));
	else if (e)
		ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "%s", errno ? strerror(errno) : "connection closed");
	ERR_clear_error();
}

void tlsio_free(SSL *ssl)
{
	if (!ssl)
		return;
	/* close_notify, best effort: the socket is non-blocking and about to
	 * be closed. */
	if (SSL_is_init_finished(ssl)) {
		ERR_clear_error();
		SSL_shutdown(ssl);
	}
	ERR_clear_error();
	SSL_free(ssl);
}

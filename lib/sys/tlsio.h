/*
 * tlsio.h - non-blocking TLS (OpenSSL) for the wire protocol, shared by
 * the server (daemon/tls.c) and the remote tier's client (lib/remote.c).
 *
 * The I/O calls are shaped like the syscalls they replace (read, readv,
 * writev): > 0 bytes, 0 end of stream, -1 with errno set (EAGAIN: *want
 * says which epoll event the SSL waits for; EPROTO: a TLS error, read it
 * with tlsio_errstr on the same thread).  So a caller swaps one call for
 * another and keeps its error handling.  Writes go one record per
 * SSL_write (SSL_MODE_ENABLE_PARTIAL_WRITE), small iovecs gathered into
 * records of up to 16 KiB or the session's max_fragment_length (not
 * under kTLS: tlsio.c): a write that returned EAGAIN must be retried from
 * the same bytes, which a caller that advances its queue only by what was
 * written, and only appends to it, does naturally.
 *
 * Contexts: TLS 1.2 minimum, TLS 1.3 preferred, no renegotiation, no
 * session tickets, kTLS asked for (used only if the kernel has the tls
 * module: tlsio_ktls_send says).  Any thread; an SSL belongs to one.
 */
#ifndef KVT_TLSIO_H
#define KVT_TLSIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

enum { TLSIO_WANT_IN = 1, TLSIO_WANT_OUT = 2 };

/* The longest certificate list a server takes from a client (the
 * Certificate message's body): one record's plaintext with its header,
 * the handshake buffer OpenSSL starts with, never grown.  OpenSSL's
 * default, 100 KiB, allocated and zeroed at the message's header, held
 * 140 KiB of a server for each client that sent part of one, against the
 * 60 KiB charged for a handshake (doc/security.md "Session 35 review,
 * part 2").  A chain of a leaf and 2-3 intermediates is 3-8 KB. */
#define TLSIO_CERT_LIST_MAX (SSL3_RT_MAX_PLAIN_LENGTH - 4)
/* The key exchange groups either side offers or takes (tlsio.c): the
 * elliptic curves, never TLS 1.3's finite-field groups. */
#define TLSIO_GROUPS "X25519:P-256:P-384:X448:P-521"
/* The same groups by their TLS ids (RFC 8446 4.2.7), in the same order:
 * a server takes a ClientHello only with a key share of one of them
 * (tlsio.c tlsio_hello_share). */
#define TLSIO_GROUP_IDS { 0x001d, 0x0017, 0x0018, 0x001e, 0x0019 }

/*
 * Is a ClientHello with this key_share extension refused (tlsio.c
 * tlsio_hello_share, a server context's client-hello callback)?  ext is
 * the extension's body, ext_len bytes (RFC 8446 4.2.8): a 2-byte list
 * length, then entries of a 2-byte group, a 2-byte key length and that
 * many bytes of key (1..65535).
 *
 * True only for a well-formed list -- the list is the body, every entry
 * lies in it with a key of 1 byte at least, the last ends where the list
 * does: the list OpenSSL's own parse takes -- in which no entry names a
 * group of TLSIO_GROUP_IDS (the empty list included), which OpenSSL would
 * answer with a HelloRetryRequest.  A malformed list, with or without a
 * group of ours in it, is not refused here: OpenSSL parses the same bytes
 * and fails the handshake with a decode_error alert, before any crypto or
 * retry.  Pure: reads ext[0..ext_len) only, any bytes.  Fuzzed by
 * tests/fuzz/fuzz_tlshello.c; the cases are tests/unit/test_tlshello.c's.
 */
bool tlsio_share_refused(const unsigned char *ext, size_t ext_len);

/*
 * A server context: cert and key (PEM files); ca (may be NULL) is the CA
 * that client certificates must chain to, verify_client makes one
 * mandatory.  NULL on failure with a message in err.
 */
SSL_CTX *tlsio_ctx_server(const char *cert, const char *key, const char *ca,
			  bool verify_client, char *err, size_t errlen);
/*
 * A client context: the server's certificate is always verified, against
 * ca (NULL: the system's store); cert and key (both or neither) are the
 * client's certificate for mutual TLS.  NULL on failure with err.
 */
SSL_CTX *tlsio_ctx_client(const char *ca, const char *cert, const char *key, char *err,
			  size_t errlen);

/* An SSL on a connected non-blocking fd; server: accept side.  NULL on
 * failure. */
SSL *tlsio_new(SSL_CTX *ctx, int fd, bool server);

/* One handshake step: 1 done, 0 call again when *want is ready, -1 failed
 * (errno EPROTO or the socket's error). */
int tlsio_handshake(SSL *ssl, int *want);

ssize_t tlsio_read(SSL *ssl, void *buf, size_t len, int *want);
/* SSL_read into each iovec in turn. */
ssize_t tlsio_readv(SSL *ssl, const struct iovec *iov, int n, int *want);
/* SSL_write of the iovecs in turn, those shorter than a record gathered
 * into records of up to 16 KiB or the session's max_fragment_length
 * (tlsio.c); the bytes taken so far, or -1. */
ssize_t tlsio_writev(SSL *ssl, const struct iovec *iov, int n, int *want);
/* The gather buffer's size: a record's plaintext at most. */
#define TLSIO_GATHER 16384
/* tlsio_writev gathering through gather (TLSIO_GATHER bytes of the
 * caller's; tlsio_writev's is on its stack): the plaintext copied there
 * is cleared (OPENSSL_cleanse) before it returns, on every path, so a
 * caller can see it gone (test_tlsio_writev clear_case). */
ssize_t tlsio_writev_with(SSL *ssl, const struct iovec *iov, int n, int *want,
			  unsigned char *gather);

/* Plaintext already decrypted or received but not yet read: epoll will not
 * say so. */
bool tlsio_pending(SSL *ssl);
/* Does this connection send through kernel TLS? */
bool tlsio_ktls_send(SSL *ssl);
/* The calling thread's last TLS error (or the verification result) as
 * one line; clears the queue. */
void tlsio_errstr(SSL *ssl, char *buf, size_t len);
void tlsio_free(SSL *ssl);

#endif

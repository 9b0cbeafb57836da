/*
 * tlsmem.h - what kvtierd charges to --max-memory for a TLS connection's
 * SSL (tls.c "The SSL object", doc/security.md "The SSL object"): OpenSSL
 * 3.0.19's sizes, live bytes counted by tests/unit/test_tls_mem.c.
 * Built against another OpenSSL they may fall short: that test counts
 * one server SSL's live bytes at each stage, prints them, and fails
 * where these constants do not cover them.
 */
#ifndef KVTD_TLSMEM_H
#define KVTD_TLSMEM_H

#include <openssl/ssl.h>

/* The read buffer an SSL holds while it has bytes not yet returned (for
 * reading ahead: the largest record's plaintext, the encryption's
 * overhead, the header: 16,709 bytes). */
#define TLS_RBUF (SSL3_RT_MAX_PLAIN_LENGTH + SSL3_RT_MAX_ENCRYPTED_OVERHEAD + \
		  SSL3_RT_HEADER_LENGTH)
/* The write buffer as ssl3_setup_write_buffer sizes it: the largest
 * fragment, the send overhead, a header, the alignment slack, and the
 * same again for an empty fragment (16,568). */
#define TLS_WBUF (SSL3_RT_MAX_PLAIN_LENGTH + \
		  2 * (SSL3_RT_SEND_MAX_ENCRYPTED_OVERHEAD + SSL3_RT_HEADER_LENGTH + 7))
/* The longest ClientHello taken (its body, as its header declares): one
 * record's plaintext with the header, the handshake buffer OpenSSL starts
 * with (tls.c "A ClientHello's length"); a client's certificate list, at
 * most the same (TLSIO_CERT_LIST_MAX, lib/sys/tlsio.h). */
#define TLS_HELLO_MAX (SSL3_RT_MAX_PLAIN_LENGTH - 4u)
/* From the accept until the handshake is done: the handshake's 43,890
 * bytes rounded up, and a read buffer. */
#ifndef TLS_HS_KIB
#define TLS_HS_KIB 44u
#endif
#define TLS_HS_MEM (TLS_HS_KIB * 1024 + TLS_RBUF)
/* Established: its 13,874 bytes rounded up, and its write buffer. */
#ifndef TLS_SSL_KIB
#define TLS_SSL_KIB 14u
#endif
#define TLS_SSL_MEM (TLS_SSL_KIB * 1024 + TLS_WBUF)
/* A client's SSL (a pod member's connection to another, repair.c: a
 * lane's kept connection), established and idle: larger than a server's,
 * as it holds the member's certificate chain, verified -- 24,051 bytes of
 * heap each, over 1,000 connections with the pod's P-256 certificates
 * (bench/peer_tls_mem.c, OpenSSL 3.0, session 47; a longer chain or RSA
 * keys hold more) -- rounded up; and its write buffer, which
 * SSL_MODE_RELEASE_BUFFERS frees while idle but each batch takes again. */
#ifndef TLS_PEER_KIB
#define TLS_PEER_KIB 24u
#endif
#define TLS_PEER_MEM (TLS_PEER_KIB * 1024 + TLS_WBUF)
_Static_assert(TLS_WBUF == 16568, "OpenSSL 3.0's write buffer");

#endif

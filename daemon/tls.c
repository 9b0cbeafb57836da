/*
 * tls.c - TLS on kvtierd's TCP listeners (--tls-cert, --tls-key, --tls-ca,
 * --tls-verify-client; doc/kvtierd.md "TLS"), and the socket I/O of every
 * connection.
 *
 * Owns: the server's SSL_CTX and the client one its repair thread reaches
 * the other members with (daemon/peer.c; both built once before the loops
 * start, read-only after), and each TLS connection's SSL (created on accept, freed on close,
 * touched only by the connection's loop).  loop.c, value.c and respd.c
 * read and write through kvtd_conn_read/readv/writev: a plain connection
 * goes straight to read/readv/sendmsg, a TLS one through lib/tlsio.c.
 * Unix sockets and the metrics listener stay plain.
 *
 * Invariants: no application byte is read or written before the handshake
 * is done (loop.c calls kvtd_tls_handshake until then); a handshake that
 * fails is counted as errors{kind="tls"}, logged at info and ends the
 * connection, so a plain client on a TLS port sees its connection closed.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kvtierd.h"
#include "tlsio.h"
#include "tlsmem.h"

int kvtd_tls_setup(struct kvtd_server *srv)
{
	struct kvtd_config *cfg = &srv->cfg;
	char err[300];
	SSL_CTX *ctx;

	if (!cfg->tls_cert && !cfg->tls_key && !cfg->tls_ca && !cfg->tls_verify_client)
		return 0;
	if (!cfg->tls_cert || !cfg->tls_key) {
		snprintf(err, sizeof(err), "TLS needs both --tls-cert and --tls-key");
		ctx = NULL;
	} else {
		ctx = tlsio_ctx_server(cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
				       cfg->tls_verify_client, err, sizeof(err));
	}
	if (!ctx) {
		char q[400];
		kvtd_log(KVTD_ERROR, "cannot set up TLS", "error=%s",
			 kvtd_log_quote(q, sizeof(q), err));
		fprintf(stderr, "kvtierd: TLS: %s\n", err);
		return -EINVAL;
	}
	/* Read ahead: OpenSSL reads what the socket holds in one read(2),
	 * not a record header and then its body (two syscalls a record), and
	 * kvtd_conn_read takes the records buffered in one call
	 * (TLS_READ_RECORDS): a client sending each byte in a record of its
	 * own cost the loop 2.6 us a byte against 3 ns in records of 16 KiB
	 * (test_hostile_http tls_records).  The loop already reads on while
	 * SSL_has_pending (bytes inside the SSL are no epoll event:
	 * loop_settle). */
	SSL_CTX_set_read_ahead(ctx, 1);
	srv->tls_ctx = ctx;
	/* The other members of a pod serve TLS too (they share this
	 * configuration): the repair thread reaches them through it, their
	 * certificates checked against --tls-ca (else the system's store),
	 * this server's certificate its own (doc/cluster.md "Peers"). */
	srv->tls_peer_ctx = tlsio_ctx_client(cfg->tls_ca, cfg->tls_cert, cfg->tls_key, err,
					     sizeof(err));
	if (!srv->tls_peer_ctx) {
		char q[400];
		kvtd_log(KVTD_ERROR, "cannot set up TLS to the other members", "error=%s",
			 kvtd_log_quote(q, sizeof(q), err));
		fprintf(stderr, "kvtierd: TLS: %s\n", err);
		SSL_CTX_free(ctx);
		srv->tls_ctx = NULL;
		return -EINVAL;
	}
	/* A member requiring client certificates checks ours for client
	 * use: an extendedKeyUsage without clientAuth fails there, and the
	 * pod neither forwards nor heals (test_peer_attack_tls_eku). */
	if (cfg->tls_verify_client && (cfg->members || cfg->etcd) &&
	    X509_check_purpose(SSL_CTX_get0_certificate(srv->tls_peer_ctx), X509_PURPOSE_SSL_CLIENT,
			       0) != 1)
		kvtd_log(KVTD_WARN, "TLS certificate not valid for client authentication",
			 "cert=%s reason=\"its extendedKeyUsage lacks clientAuth: the other members, "
			 "requiring client certificates, refuse this server\"", cfg->tls_cert);
	kvtd_log(KVTD_INFO, "TLS on the TCP listeners", "cert=%s client_certs=%s", cfg->tls_cert,
		 cfg->tls_verify_client ? "required" : cfg->tls_ca ? "verified if sent" : "no");
	return 0;
}

void kvtd_tls_free(struct kvtd_server *srv)
{
	SSL_CTX_free(srv->tls_ctx);
	srv->tls_ctx = NULL;
	SSL_CTX_free(srv->tls_peer_ctx);
	srv->tls_peer_ctx = NULL;
}

/*
 * Records the application never sees.  After the handshake OpenSSL takes
 * inside SSL_read, without returning a byte, whatever record carries no
 * application data -- in TLS 1.3 a KeyUpdate, a warning alert -- and
 * goes on to the next record while the socket has any (SSL_MODE_AUTO_RETRY,
 * OpenSSL 3.0's default): a client sending KeyUpdates as fast as its
 * socket takes them (tests/integration/tls_flood.c) held one SSL_read,
 * and the loop, for seconds -- another client's /healthz waited 5 s --
 * at ~8 us of the loop a KeyUpdate (a key derivation; one asking the
 * server to update its own keys costs a write of the answer too), 2-4
 * times an honest PING and its answer (14.2 us against 3.4 at 20,000 a
 * second, release), none of it counted in the
 * records a read may take (TLS_READ_RECORDS) nor ever closed: such a
 * connection reads as idle (doc/security.md "Post-handshake messages").
 * OpenSSL bounds empty records (32 in a row) and closes at a TLS 1.3
 * warning alert other than close_notify; a TLS 1.2 renegotiation is
 * refused (SSL_OP_NO_RENEGOTIATION), but read on after: closed here since
 * 2026-12-07 ("TLS 1.2 after the handshake").  What it leaves is the count of
 * KeyUpdates: an honest client updates its keys after a volume (NSS,
 * rustls, Java: every 2^24 records or 2^37 bytes, hundreds of GB), so a
 * connection may have TLS_QUIET_MAX such records a minute; past that the
 * message callback, which OpenSSL calls for each record as it decrypts it
 * (the inner content type), marks the SSL shut down by the peer, so that
 * SSL_read stops at the next record, and the connection closes at its
 * next read (kvtd_conn_read; server.tls_quiet_closed).  A record of its
 * own counts once whatever it carries; a KeyUpdate spread over records
 * counts each (each is a decryption).  The callback also counts every
 * record decrypted (c->tls_seen), so that a read's budget of records
 * (TLS_READ_RECORDS, and its tenant's of the iteration) counts the empty
 * ones SSL_read passes over (tls_fill); TLS 1.2's records are counted
 * by their headers.
 */
#define TLS_QUIET_MAX 32
#define TLS_QUIET_WINDOW_NS (60ull * 1000000000ull)

/*
 * TLS 1.2 after the handshake.  TLS 1.2 has no inner content type: a
 * record's type is its header's, which OpenSSL hands the message
 * callback (SSL3_RT_HEADER) as it takes the record, before decrypting it,
 * so each record is counted there (c->tls_seen, tls_fill).  A handshake
 * record then can only be a renegotiation (a ClientHello), which the
 * server refuses (SSL_OP_NO_RENEGOTIATION) -- but OpenSSL refuses it with
 * a warning alert and reads on inside the same SSL_read, as for a TLS 1.3
 * KeyUpdate: a client sending 4-byte ClientHellos as fast as its socket
 * took them, before any AUTH, held one SSL_read and the loop (another
 * client's /healthz waited 5-27 s beside 8 of them, release), never
 * closed and uncounted, at ~4.5 us of the loop each (release) and an
 * alert written.  And a
 * ClientHello's header has OpenSSL allocate and zero the length it
 * declares, up to 131,396 bytes, held until the message is whole -- after
 * the handshake the first-record gate ("The first record") is long past,
 * and --max-memory charges the established SSL's 30 KiB.  So a TLS 1.2
 * handshake record after the handshake closes the connection before it
 * is decrypted: SSL_read returns the end at once (the record thrown
 * away), and the connection is closed at its read, counted with the
 * records past TLS_QUIET_MAX (server.tls_quiet_closed).  An honest client
 * loses nothing: OpenSSL's, told no_renegotiation, fails its connection
 * itself (tls_post_handshake's "renego").
 */
static void tls_msg12_header(struct kvtd_conn *c, SSL *ssl, const uint8_t *hdr)
{
	c->tls_seen++;
	if (hdr[0] != SSL3_RT_HANDSHAKE || c->tls_quiet_over)
		return;
	c->tls_quiet_over = true;
	KVTD_COUNT(c->loop->srv, tls_quiet_closed, 1);
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
}

static void tls_msg(int write_p, int version, int content_type, const void *buf, size_t len,
		    SSL *ssl, void *arg)
{
	struct kvtd_conn *c = arg;
	uint64_t now;

	/* During the handshake its own deadline bounds it.  TLS 1.2: its
	 * records' headers (tls_msg12_header); its alerts and empty records
	 * are bounded by OpenSSL (5 and 32 in a row). */
	if (write_p || !c->tls_ready)
		return;
	if (content_type == SSL3_RT_HEADER) {
		if (len >= 1 && SSL_version(ssl) != TLS1_3_VERSION)
			tls_msg12_header(c, ssl, buf);
		return;
	}
	if (version != TLS1_3_VERSION || content_type != SSL3_RT_INNER_CONTENT_TYPE || len != 1)
		return;
	c->tls_seen++; /* every record decrypted (tls_fill) */
	if (*(const uint8_t *)buf == SSL3_RT_APPLICATION_DATA)
		return;
	now = c->loop->now_ns;
	if (now - c->tls_quiet_ns > TLS_QUIET_WINDOW_NS) {
		c->tls_quiet_ns = now;
		c->tls_quiet = 0;
	}
	if (++c->tls_quiet <= TLS_QUIET_MAX || c->tls_quiet_over)
		return;
	c->tls_quiet_over = true;
	KVTD_COUNT(c->loop->srv, tls_quiet_closed, 1);
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
}

int kvtd_tls_open(struct kvtd_conn *c)
{
	c->tls = tlsio_new(c->loop->srv->tls_ctx, c->fd, true);
	if (!c->tls)
		return -ENOMEM;
	c->tls_quiet_ns = c->loop->now_ns;
	SSL_set_msg_callback(c->tls, tls_msg);
	SSL_set_msg_callback_arg(c->tls, c);
	return 0;
}

bool kvtd_tls_quiet_over(const struct kvtd_conn *c)
{
	return c->tls_quiet_over;
}

/*
 * The first record, whole before the SSL reads.  An SSL that has read
 * part of a record holds a read buffer of the record's size and a
 * handshake buffer: a client that sends a record header declaring a 16
 * KiB ClientHello and 101 bytes of it had the server hold ~46 KiB for it
 * (release), at no cost of its own, until the handshake's deadline -- and
 * a client that reconnects at once holds them again: 1,000 connections
 * from 5 addresses held +64 MiB of RSS for as long as it liked, with a
 * handshake deadline or without (bench/tls_prehandshake.py; doc/security.md
 * "A handshake's memory").  So the SSL reads nothing
 * until the socket holds the first record whole (a ClientHello is one
 * record, ~0.5-2 KiB): until then the bytes stay in the socket (the
 * kernel's, bounded by its receive buffer) and the connection waits with
 * SO_RCVLOWAT at the record's end, so that epoll reports it once the
 * record is in (or the client is gone), not at each segment.
 *
 * A ClientHello's length.  OpenSSL allocates a handshake message's whole
 * declared length when it reads the message's 4-byte header, and zeroes
 * it (BUF_MEM_grow_clean): a ClientHello may declare up to 131,396 bytes,
 * over as many records as it likes.  A first record of 4 bytes declaring
 * 128 KiB (9 bytes sent) held 155 KiB of the server's RSS until the
 * handshake's deadline, against the 60 KiB charged for a handshake
 * (TLS_HS_MEM; test_hostile_http tls_big_messages, doc/security.md
 * "Session 35 review, part 2").  So the first record must hold the
 * ClientHello's header, and the ClientHello declare at most one record's
 * plaintext (16 KiB: the handshake buffer OpenSSL starts with, never
 * grown; a ClientHello is ~0.5-2 KiB, ~3 KiB with post-quantum key
 * shares); else the connection is refused before the SSL reads a byte.
 * 1: go on (the record whole, or not a handshake record: the SSL fails
 * it), 0: wait, -1: refused (a ClientHello too long).
 */
/* The first record, whole in the socket, of fragment length len: does it
 * hold a ClientHello's header declaring at most one record's plaintext
 * (or something else, which the SSL fails)? */
static bool tls_hello_len_ok(int fd, int len)
{
	unsigned char h[9];
	ssize_t n = recv(fd, h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);

	if (len < 4) /* the ClientHello's header split over records */
		return false;
	if (n < (ssize_t)sizeof(h)) /* the record is whole: not seen; the SSL says */
		return true;
	if (h[5] != 1) /* not a ClientHello: the SSL says */
		return true;
	return ((size_t)h[6] << 16 | (size_t)h[7] << 8 | h[8]) <= TLS_HELLO_MAX;
}

static int tls_first_record(struct kvtd_conn *c)
{
	unsigned char h[5];
	int avail = 0, lowat;
	struct pollfd pf = { .fd = c->fd, .events = POLLRDHUP };
	ssize_t n = recv(c->fd, h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n <= 0 || (n >= 1 && h[0] != 22))
		return 1; /* gone, an error, or not a handshake record: the SSL says */
	if (n < (ssize_t)sizeof(h)) {
		lowat = (int)sizeof(h);
	} else {
		lowat = (int)sizeof(h) + (h[3] << 8 | h[4]);
		if (ioctl(c->fd, FIONREAD, &avail) < 0)
			return 1;
		if (avail >= lowat)
			return tls_hello_len_ok(c->fd, lowat - (int)sizeof(h)) ? 1 : -1;
	}
	/* A client that shut its side down will not complete the record,
	 * and the socket stays readable whatever SO_RCVLOWAT says: waiting
	 * then made the loop spin on it until the deadline (20 such
	 * connections held an ASan loop 64 % busy).  The SSL reads, meets
	 * the end, fails. */
	if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return 1;
	if (lowat != c->tls_lowat && setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat,
						   sizeof(lowat)) == 0)
		c->tls_lowat = lowat;
	return c->tls_lowat != lowat; /* no SO_RCVLOWAT: read as before */
}

int kvtd_tls_handshake(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	int want = 0, rc;
	char why[300];

	if (!kvtd_tls_heard(c)) {
		int first = tls_first_record(c);
		if (first == 0) {
			c->tls_rd_want = TLSIO_WANT_IN;
			return 0;
		}
		if (first < 0) {
			KVTD_COUNT(srv, errors[KVTD_ERR_TLS], 1);
			kvtd_conn_log(c, KVTD_INFO, "TLS handshake refused",
				      "a ClientHello longer than a record (16 KiB)");
			return -EPROTO;
		}
	}
	if (c->tls_lowat > 1) {
		int one = 1;
		if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) == 0)
			c->tls_lowat = 1;
	}
	rc = tlsio_handshake(c->tls, &want);
	if (rc == 0) {
		c->tls_rd_want = (uint8_t)want;
		return 0;
	}
	if (rc < 0) {
		char sink[4096];
		tlsio_errstr(c->tls, why, sizeof(why));
		KVTD_COUNT(srv, errors[KVTD_ERR_TLS], 1);
		/* What the client sent (a plain client's HELLO) is taken, so
		 * that closing sends a FIN, not a reset. */
		for (int i = 0; i < 16 && read(c->fd, sink, sizeof(sink)) > 0; i++)
			;
		kvtd_conn_log(c, KVTD_INFO, "TLS handshake failed", why);
		return -EPROTO;
	}
	c->tls_ready = true;
	c->tls_ready_ns = c->loop->now_ns;
	c->tls_rd_want = 0;
	KVTD_COUNT(srv, tls_handshakes, 1);
	if (tlsio_ktls_send(c->tls))
		KVTD_COUNT(srv, tls_ktls, 1);
	if (kvtd_log_enabled(KVTD_DEBUG)) {
		snprintf(why, sizeof(why), "%s %s%s", SSL_get_version(c->tls),
			 SSL_get_cipher_name(c->tls), tlsio_ktls_send(c->tls) ? " ktls" : "");
		kvtd_conn_log(c, KVTD_DEBUG, "TLS handshake done", why);
	}
	return 1;
}

bool kvtd_tls_began(const struct kvtd_conn *c)
{
	return c->tls && SSL_get_state(c->tls) != TLS_ST_BEFORE;
}

bool kvtd_tls_heard(const struct kvtd_conn *c)
{
	BIO *rb = c->tls ? SSL_get_rbio(c->tls) : NULL;

	return rb && BIO_number_read(rb) > 0;
}

bool kvtd_tls_sent_any(const struct kvtd_conn *c)
{
	int avail = 0;

	return kvtd_tls_heard(c) || (ioctl(c->fd, FIONREAD, &avail) == 0 && avail > 0);
}

bool kvtd_tls_pending(const struct kvtd_conn *c)
{
	return c->tls && c->tls_ready && tlsio_pending(c->tls);
}

/*
 * The read buffer an SSL holds while it has bytes not yet returned: part
 * of a record, or records read ahead.  With SSL_MODE_RELEASE_BUFFERS
 * (lib/sys/tlsio.c) it is freed once empty.  Its size is the one OpenSSL
 * allocates for reading ahead (ssl3.h: the largest record's plaintext,
 * the encryption's overhead, the header; 16,709 bytes, OpenSSL adds its
 * alignment), whatever the record's length declares.
 */
/* TLS_RBUF: tlsmem.h */

size_t kvtd_tls_rbuf_held(const struct kvtd_conn *c)
{
	return c->tls && c->tls_ready && SSL_has_pending(c->tls) ? TLS_RBUF : 0;
}

/*
 * The SSL object (doc/security.md "The SSL object").  Beside its read
 * buffer (above, charged while held), an SSL holds its own state, its
 * handshake's and its write buffer, outside --max-memory until
 * 2026-12-05: live bytes OpenSSL 3.0 held for one of kvtierd's server
 * SSLs, counted by tests/unit/test_tls_mem.c (its allocator hooked; the
 * third connection's figures, the caches filled by the first), and RSS a
 * connection over a plain one's, 500 connections (bench/tls_conn_cost.py,
 * release):
 *
 *   stage                                   live bytes   RSS over plain
 *   accepted, nothing read                       8,624        8.7 KiB
 *   mid-handshake (its flight sent, no Finished) 43,890       43.1 KiB
 *   established, idle                           13,874       18.6 KiB
 *   established, a record written in part       30,458       14.3 KiB
 *   established, part of a record read          30,586    (TLS_RBUF)
 *
 * (RSS of an established one counts the holes its handshake left in the
 * heap, which its write buffer then reuses.)  So the loop charges
 * (loop.c "The SSL object"), from the accept until the handshake is done,
 * TLS_HS_MEM: the handshake's 43,890 bytes rounded up, and the read buffer
 * a client's second flight can make it hold (part of its Finished record:
 * the first-record gate covers the first record only, and loop.c charges
 * the read buffer only once established); then TLS_SSL_MEM: the
 * established SSL's 13,874 bytes rounded up, and its write buffer, as
 * OpenSSL sizes it (ssl3_setup_write_buffer: the largest fragment, the
 * send overhead, a header, the alignment slack, and the same again for an
 * empty fragment: 16,568; +16,584 measured), charged whether or not
 * output is pending -- an answer may be pending at any time, and output
 * is never refused.
 */
/* TLS_WBUF, TLS_HS_MEM, TLS_SSL_MEM: tlsmem.h, checked against the
 * OpenSSL built with by tests/unit/test_tls_mem.c. */

size_t kvtd_tls_conn_mem(const struct kvtd_conn *c)
{
	return c->tls_ready ? TLS_SSL_MEM : TLS_HS_MEM;
}

void kvtd_tls_close(struct kvtd_conn *c)
{
	tlsio_free(c->tls);
	c->tls = NULL;
}

/*
 * Records a read takes.  SSL_read answers one record at a time, and a
 * record costs its decryption and OpenSSL's bookkeeping (~0.6 us, release)
 * whatever it carries: a read of 64 KiB of one-byte records was 64 Ki
 * records.  A read -- one of the loop's rounds on a connection
 * (loop_conn_read, 16 an event) -- takes at most TLS_READ_RECORDS, so
 * that a client sending each byte in a record of its own costs the
 * others no more than a read's worth of records a round; records of 16
 * KiB fill any buffer first.  Before this, readv went on to what the
 * socket held (a PUT's data section: a VALUE_RX_CHUNK of records, each
 * two read(2)s; test_hostile_http tls_records).  The records a read
 * took count against its tenant's budget of the loop iteration
 * (c->tls_records, charged by loop.c "TLS records a loop iteration"): N
 * connections are N reads (tls_tenant_records).
 */
#define TLS_READ_RECORDS 16

/* Up to len bytes into buf, a record at a time while what the SSL holds
 * (read ahead) has more, at most *records more records.  What was read,
 * else tlsio_read's answer (-1 with errno, *want set; 0 at the end). */
static ssize_t tls_fill(struct kvtd_conn *c, uint8_t *buf, size_t len, int *records,
			int *want)
{
	size_t got = 0;
	uint32_t seen, took;

	while (got < len && *records > 0) {
		ssize_t r;
		if (got > 0 && !tlsio_pending(c->tls))
			break; /* the socket's: the next read asks it */
		seen = c->tls_seen;
		r = tlsio_read(c->tls, buf + got, len - got, want);
		/* The records it decrypted (tls_msg counts them: TLS 1.3's
		 * inner types, TLS 1.2's headers),
		 * at least the one it returned bytes of: OpenSSL passes over
		 * up to 32 empty records in a row within one SSL_read, and
		 * 31 empty records before each byte had a read take 512
		 * records and count 16. */
		took = c->tls_seen - seen;
		*records -= (int)(took > 1 || r <= 0 ? took : 1);
		if (r <= 0)
			/* What was read counts; the condition comes back on
			 * the next call. */
			return got > 0 ? (ssize_t)got : r;
		got += (size_t)r;
	}
	*want = 0;
	return (ssize_t)got;
}

/* A connection past TLS_QUIET_MAX: its reads fail (EPROTO) once what
 * came before is taken; the loop closes it (kvtd_tls_quiet_over). */
static ssize_t tls_quiet_close(struct kvtd_conn *c)
{
	c->tls_rd_want = 0;
	errno = EPROTO;
	return -1;
}

ssize_t kvtd_conn_read(struct kvtd_conn *c, void *buf, size_t len)
{
	int want = 0, records = TLS_READ_RECORDS;
	ssize_t r;

	if (!c->tls)
		return read(c->fd, buf, len);
	if (c->tls_quiet_over)
		return tls_quiet_close(c);
	r = tls_fill(c, buf, len, &records, &want);
	c->tls_rd_want = r < 0 ? (uint8_t)want : 0;
	c->tls_records += (uint32_t)(TLS_READ_RECORDS - records);
	if (r <= 0 && c->tls_quiet_over)
		return tls_quiet_close(c); /* at once: the client may send no more */
	return r;
}

ssize_t kvtd_conn_readv(struct kvtd_conn *c, const struct iovec *iov, int n)
{
	int want = 0, records = TLS_READ_RECORDS;
	ssize_t total = 0;

	if (!c->tls)
		return readv(c->fd, iov, n);
	if (c->tls_quiet_over)
		return tls_quiet_close(c);
	for (int i = 0; i < n; i++) {
		ssize_t r;
		if (iov[i].iov_len == 0)
			continue; /* not an end of the stream */
		r = tls_fill(c, iov[i].iov_base, iov[i].iov_len, &records, &want);
		if (r <= 0) {
			if (total > 0)
				break;
			c->tls_rd_want = (uint8_t)want;
			c->tls_records += (uint32_t)(TLS_READ_RECORDS - records);
			return c->tls_quiet_over ? tls_quiet_close(c) : r;
		}
		total += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	c->tls_rd_want = 0;
	c->tls_records += (uint32_t)(TLS_READ_RECORDS - records);
	return total;
}

ssize_t kvtd_conn_writev(struct kvtd_conn *c, const struct iovec *iov, int n)
{
	int want = 0;
	ssize_t r;

	if (!c->tls) {
		struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
		return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	r = tlsio_writev(c->tls, iov, n, &want);
	c->tls_wr_want = r < 0 ? (uint8_t)want : 0;
	return r;
}

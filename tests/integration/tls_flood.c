/*
 * tls_flood.c - a TLS 1.3 client that spends a kvtierd TLS listener's loop
 * on what OpenSSL's server side does after the handshake without the
 * application seeing a byte (doc/security.md "Post-handshake messages";
 * test_hostile_http tls_post_handshake), and a TLS 1.2 one for what TLS
 * 1.2 has of it (the *12 kinds: tls12_renegotiation).  A test tool, never
 * installed.
 *
 *   tls_flood [options] PORT
 *     --what W      what each message is:
 *                     ku-req    a KeyUpdate asking the server to update too
 *                               (it answers with a KeyUpdate of its own)
 *                     ku-noreq  a KeyUpdate, nothing asked
 *                     tiny      a 1-byte application record ("PING\r\n" a
 *                               byte at a time: 6 records a PING)
 *                     empty     an application record of 0 bytes
 *                     alert     a warning-level alert (user_canceled)
 *                     ping      "PING\r\n" in one record: the honest reference
 *                     renego    TLS 1.2, then SSL_renegotiate (refused?)
 *                     padded    31 empty records, then a 1-byte one (tiny's):
 *                               OpenSSL takes 32 empty records in a row
 *                     close     nothing: the handshake, then the
 *                               connection closed (with --reconnect)
 *                     reneg12   TLS 1.2: a renegotiating ClientHello (its
 *                               4-byte header, no body) in a record of its
 *                               own; OpenSSL refuses it with a warning alert
 *                               and reads on, inside the same SSL_read
 *                     hello12   TLS 1.2: one record of a ClientHello header
 *                               declaring 131,396 bytes (OpenSSL's most),
 *                               then nothing: the connection held open
 *                     padded12  TLS 1.2: padded's 31 empty records and a byte
 *                     ping12    TLS 1.2: ping's record (the reference)
 *     --auth N:S    RESP AUTH as N with secret S after the handshake
 *     --read        drain what the server sends (else never read after AUTH:
 *                   its answers and KeyUpdates pile up in the sockets)
 *     --rate R      messages a second a connection (0: as fast as the
 *                   socket takes them), sent in batches every 10 ms
 *     --batch B     messages a write when --rate 0 (default 256)
 *     --seconds S   how long (default 5)
 *     --conns N     connections at once, a thread each (default 1)
 *     --openssl     KeyUpdates through SSL_key_update + SSL_do_handshake
 *                   (else the records are built here, as any record: cheaper,
 *                   so the client outpaces the server)
 *     --src ADDR    source address
 *     --reconnect   each connection, once closed (or a second after its
 *                   message), is made again, a handshake each time, for
 *                   --seconds: one message a connection (reneg12's, say);
 *                   prints "reconnects: H handshakes, R refused, C closed"
 *                   (refused: the server closed it before the handshake
 *                   was done)
 *
 * After the handshake (and AUTH) the records are built here, from the
 * client's traffic secret (the key log callback) and TLS_AES_128_GCM_SHA256,
 * so that empty records and alerts can be sent and a flood costs the client
 * little.  Prints one line a connection and a total:
 *   conn I: sent M messages, B bytes; read R bytes; closed after T s | open
 * The connections are all set up (a barrier) before any sends its first
 * message.  Exit 0 when every connection was set up (whatever the server did to it
 * after), 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

enum what { W_KU_REQ, W_KU_NOREQ, W_TINY, W_EMPTY, W_ALERT, W_PING, W_RENEGO, W_PADDED,
	    W_CLOSE, W_RENEG12, W_HELLO12, W_PADDED12, W_PING12 };

static const char *const what_names[] = { "ku-req", "ku-noreq", "tiny", "empty",
					  "alert", "ping", "renego", "padded", "close",
					  "reneg12", "hello12", "padded12", "ping12" };

/* The TLS 1.2 kinds: records built under TLS 1.2's keys (conn_keys12). */
#define W_IS12(w) ((w) >= W_RENEG12)

static struct {
	enum what what;
	const char *auth; /* "name:secret" or NULL */
	bool read, via_openssl, reconnect;
	double rate, seconds;
	int batch, conns, port;
	const char *src;
} opt = { .what = W_KU_REQ, .seconds = 5, .batch = 256, .conns = 1 };

struct conn {
	int id, fd;
	SSL *ssl;
	uint8_t secret[32]; /* the client's application traffic secret now */
	uint8_t key[16], iv[12]; /* TLS 1.2: iv[0, 4) the implicit salt */
	uint64_t seq;    /* records sent under key */
	EVP_CIPHER_CTX *aead;
	/* results */
	bool ok, closed;
	double closed_s;
	uint64_t sent, sent_bytes, read_bytes;
	uint64_t handshakes, refused, closed_n; /* --reconnect */
	char why[160];
};

static pthread_barrier_t set_up; /* every connection set up (or failed) */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The key log callback hands each connection its traffic secret. */
static void keylog(const SSL *ssl, const char *line)
{
	struct conn *c = SSL_get_app_data(ssl);
	const char *p;

	if (!c || strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) != 0)
		return;
	p = strrchr(line, ' ');
	if (!p || strlen(p + 1) < 64)
		return;
	for (int i = 0; i < 32; i++) {
		unsigned v;
		sscanf(p + 1 + 2 * i, "%2x", &v);
		c->secret[i] = (uint8_t)v;
	}
}

/* HKDF-Expand-Label (RFC 8446 7.1) with SHA-256, out_len <= 32. */
static void expand_label(const uint8_t secret[32], const char *label, uint8_t *out,
			 size_t out_len)
{
	uint8_t info[64], md[32];
	unsigned md_len = 0;
	size_t n = 0, ll = 6 + strlen(label);

	info[n++] = (uint8_t)(out_len >> 8);
	info[n++] = (uint8_t)out_len;
	info[n++] = (uint8_t)ll;
	memcpy(info + n, "tls13 ", 6);
	memcpy(info + n + 6, label, ll - 6);
	n += ll;
	info[n++] = 0; /* no context */
	info[n++] = 1; /* T(1) */
	HMAC(EVP_sha256(), secret, 32, info, n, md, &md_len);
	memcpy(out, md, out_len);
}

static void conn_keys(struct conn *c)
{
	expand_label(c->secret, "key", c->key, sizeof(c->key));
	expand_label(c->secret, "iv", c->iv, sizeof(c->iv));
}

/* One TLS 1.3 record of inner type type carrying len bytes, appended at
 * out; its wire length. */
static size_t conn_record(struct conn *c, uint8_t type, const void *data, size_t len,
			  uint8_t *out)
{
	uint8_t nonce[12], *hdr = out, *body = out + 5;
	uint8_t plain[64];
	int n = 0, m = 0;
	size_t clen = len + 1 + 16;

	if (len > 0)
		memcpy(plain, data, len);
	plain[len] = type;
	memcpy(nonce, c->iv, 12);
	for (int i = 0; i < 8; i++)
		nonce[11 - i] ^= (uint8_t)(c->seq >> (8 * i));
	hdr[0] = 23, hdr[1] = 3, hdr[2] = 3;
	hdr[3] = (uint8_t)(clen >> 8), hdr[4] = (uint8_t)clen;
	EVP_EncryptInit_ex(c->aead, NULL, NULL, c->key, nonce);
	EVP_EncryptUpdate(c->aead, NULL, &n, hdr, 5);
	EVP_EncryptUpdate(c->aead, body, &n, plain, (int)len + 1);
	EVP_EncryptFinal_ex(c->aead, body + n, &m);
	EVP_CIPHER_CTX_ctrl(c->aead, EVP_CTRL_GCM_GET_TAG, 16, body + len + 1);
	c->seq++;
	return 5 + clen;
}

/* TLS 1.2's PRF with SHA-256 (RFC 5246 5): out_len bytes of
 * P_SHA256(secret, label + seed). */
static void prf12(const uint8_t *secret, size_t secret_len, const char *label,
		  const uint8_t *seed, size_t seed_len, uint8_t *out, size_t out_len)
{
	uint8_t ls[128], a[32], in[32 + 128], md[32];
	size_t lsl = strlen(label) + seed_len, done = 0;
	unsigned ml = 0;

	memcpy(ls, label, strlen(label));
	memcpy(ls + strlen(label), seed, seed_len);
	HMAC(EVP_sha256(), secret, (int)secret_len, ls, lsl, a, &ml); /* A(1) */
	while (done < out_len) {
		size_t n = out_len - done < 32 ? out_len - done : 32;
		memcpy(in, a, 32);
		memcpy(in + 32, ls, lsl);
		HMAC(EVP_sha256(), secret, (int)secret_len, in, 32 + lsl, md, &ml);
		memcpy(out + done, md, n);
		done += n;
		HMAC(EVP_sha256(), secret, (int)secret_len, a, 32, a, &ml); /* A(i+1) */
	}
}

/* A TLS 1.2 connection's client write key and salt (AES-128-GCM-SHA256:
 * no MAC keys; the key block is the client's and server's keys, then
 * their salts); false if another cipher was chosen. */
static bool conn_keys12(struct conn *c)
{
	uint8_t ms[48], rnd[64], kb[40];
	const SSL_CIPHER *ci = SSL_get_current_cipher(c->ssl);

	if (!ci || !strstr(SSL_CIPHER_get_name(ci), "AES128-GCM-SHA256") ||
	    SSL_SESSION_get_master_key(SSL_get_session(c->ssl), ms, sizeof(ms)) != sizeof(ms))
		return false;
	SSL_get_server_random(c->ssl, rnd, 32);
	SSL_get_client_random(c->ssl, rnd + 32, 32);
	prf12(ms, sizeof(ms), "key expansion", rnd, sizeof(rnd), kb, sizeof(kb));
	memcpy(c->key, kb, 16);
	memcpy(c->iv, kb + 32, 4);
	return true;
}

/* One TLS 1.2 record (AES-128-GCM) of type type carrying len bytes,
 * appended at out; its wire length.  The explicit nonce is the sequence
 * number, as OpenSSL's. */
static size_t conn_record12(struct conn *c, uint8_t type, const void *data, size_t len,
			    uint8_t *out)
{
	uint8_t nonce[12], aad[13], *hdr = out, *body = out + 5;
	int n = 0, m = 0;
	size_t wl = 8 + len + 16;

	memcpy(nonce, c->iv, 4);
	for (int i = 0; i < 8; i++) {
		nonce[4 + i] = (uint8_t)(c->seq >> (56 - 8 * i));
		aad[i] = nonce[4 + i];
	}
	aad[8] = type, aad[9] = 3, aad[10] = 3;
	aad[11] = (uint8_t)(len >> 8), aad[12] = (uint8_t)len;
	hdr[0] = type, hdr[1] = 3, hdr[2] = 3;
	hdr[3] = (uint8_t)(wl >> 8), hdr[4] = (uint8_t)wl;
	memcpy(body, nonce + 4, 8);
	EVP_EncryptInit_ex(c->aead, NULL, NULL, c->key, nonce);
	EVP_EncryptUpdate(c->aead, NULL, &n, aad, sizeof(aad));
	EVP_EncryptUpdate(c->aead, body + 8, &n, data, (int)len);
	EVP_EncryptFinal_ex(c->aead, body + 8 + n, &m);
	EVP_CIPHER_CTX_ctrl(c->aead, EVP_CTRL_GCM_GET_TAG, 16, body + 8 + len);
	c->seq++;
	return 5 + wl;
}

/* One message of opt.what appended at out (records built here); its wire
 * length.  k: the message's number (tiny's byte). */
static size_t conn_message(struct conn *c, uint64_t k, uint8_t *out)
{
	static const char ping[] = "PING\r\n";
	uint8_t ku[5] = { 24, 0, 0, 1, 0 };
	uint8_t alert[2] = { 1, 90 }; /* warning, user_canceled */
	size_t n;

	switch (opt.what) {
	case W_KU_REQ:
	case W_KU_NOREQ:
		ku[4] = opt.what == W_KU_REQ;
		n = conn_record(c, 22, ku, sizeof(ku), out);
		/* RFC 8446 4.6.3: the sender's next records are under the next
		 * secret */
		expand_label(c->secret, "traffic upd", c->secret, 32);
		conn_keys(c);
		c->seq = 0;
		return n;
	case W_TINY:
		return conn_record(c, 23, ping + k % 6, 1, out);
	case W_EMPTY:
		return conn_record(c, 23, NULL, 0, out);
	case W_ALERT:
		return conn_record(c, 21, alert, sizeof(alert), out);
	case W_PING:
		return conn_record(c, 23, ping, 6, out);
	case W_PADDED:
		n = 0;
		for (int i = 0; i < 31; i++)
			n += conn_record(c, 23, NULL, 0, out + n);
		return n + conn_record(c, 23, ping + k % 6, 1, out + n);
	case W_RENEG12: {
		static const uint8_t hello[4] = { 1, 0, 0, 0 }; /* ClientHello, no body */
		return conn_record12(c, 22, hello, sizeof(hello), out);
	}
	case W_HELLO12: {
		/* CLIENT_HELLO_MAX_LENGTH: the most OpenSSL's server takes */
		static const uint8_t hello[4] = { 1, 0x02, 0x01, 0x44 }; /* 131,396 */
		return conn_record12(c, 22, hello, sizeof(hello), out);
	}
	case W_PADDED12:
		n = 0;
		for (int i = 0; i < 31; i++)
			n += conn_record12(c, 23, NULL, 0, out + n);
		return n + conn_record12(c, 23, ping + k % 6, 1, out + n);
	case W_PING12:
		return conn_record12(c, 23, ping, 6, out);
	default:
		return 0;
	}
}

/* A KeyUpdate through OpenSSL's own API: SSL_key_update, then
 * SSL_do_handshake writes it (into the memory BIO set as the SSL's wbio
 * after the handshake). */
static size_t conn_ku_openssl(struct conn *c, uint8_t *out, size_t cap)
{
	BIO *wb = SSL_get_wbio(c->ssl);
	int n;

	ERR_clear_error();
	if (SSL_key_update(c->ssl, opt.what == W_KU_REQ ? SSL_KEY_UPDATE_REQUESTED
			   : SSL_KEY_UPDATE_NOT_REQUESTED) != 1 ||
	    SSL_do_handshake(c->ssl) != 1)
		return 0;
	n = BIO_read(wb, out, (int)cap);
	return n > 0 ? (size_t)n : 0;
}

/* All of buf written, waiting for the socket (until deadline; draining it
 * meanwhile with --read).  1: written, 0: the time up first (the server
 * not reading), -1: the connection is gone. */
static int conn_send(struct conn *c, const uint8_t *buf, size_t len, double deadline)
{
	size_t off = 0;
	char sink[65536];

	while (off < len) {
		struct pollfd pf = { .fd = c->fd, .events = POLLOUT | POLLRDHUP };
		ssize_t w;
		if (opt.read)
			pf.events |= POLLIN;
		if (poll(&pf, 1, 50) < 0 && errno != EINTR)
			return -1;
		if (opt.read && (pf.revents & POLLIN)) {
			ssize_t r = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (r == 0)
				return -1;
			if (r > 0)
				c->read_bytes += (uint64_t)r;
		}
		if (pf.revents & (POLLERR | POLLHUP))
			return -1;
		if (!opt.read && (pf.revents & POLLRDHUP))
			return -1;
		if (pf.revents & POLLOUT) {
			w = send(c->fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (w > 0)
				off += (size_t)w;
		}
		if (now_s() > deadline)
			return off == len;
	}
	return 1;
}

/* The handshake (blocking) and AUTH; false with c->why on failure. */
static bool conn_open(struct conn *c, SSL_CTX *ctx)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port) };
	int one = 1;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (opt.src) {
		struct sockaddr_in me = { .sin_family = AF_INET };
		inet_pton(AF_INET, opt.src, &me.sin_addr);
		if (bind(c->fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
			snprintf(c->why, sizeof(c->why), "bind: %s", strerror(errno));
			return false;
		}
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(c->why, sizeof(c->why), "connect: %s", strerror(errno));
		return false;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->ssl = SSL_new(ctx);
	SSL_set_app_data(c->ssl, c);
	SSL_set_fd(c->ssl, c->fd);
	if (SSL_connect(c->ssl) != 1) {
		snprintf(c->why, sizeof(c->why), "handshake: %s",
			 ERR_error_string(ERR_get_error(), NULL));
		return false;
	}
	if (opt.auth) {
		char cmd[512], ans[64];
		const char *colon = strchr(opt.auth, ':');
		int n = colon ? snprintf(cmd, sizeof(cmd), "AUTH %.*s %s\r\n",
					 (int)(colon - opt.auth), opt.auth, colon + 1) : 0;
		int r;
		if (n <= 0 || SSL_write(c->ssl, cmd, n) != n) {
			snprintf(c->why, sizeof(c->why), "AUTH not sent");
			return false;
		}
		c->seq++; /* one record */
		r = SSL_read(c->ssl, ans, sizeof(ans) - 1);
		if (r < 3 || memcmp(ans, "+OK", 3) != 0) {
			snprintf(c->why, sizeof(c->why), "AUTH refused: %.*s", r > 0 ? r : 0, ans);
			return false;
		}
	}
	if (opt.what == W_RENEGO)
		return true;
	if (W_IS12(opt.what)) {
		if (SSL_version(c->ssl) != TLS1_2_VERSION || !conn_keys12(c)) {
			snprintf(c->why, sizeof(c->why), "not TLS 1.2 with AES128-GCM-SHA256");
			return false;
		}
		/* The client's Finished was record 0 of these keys, AUTH 1 */
		c->seq = opt.auth ? 2 : 1;
		fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
		c->aead = EVP_CIPHER_CTX_new();
		EVP_EncryptInit_ex(c->aead, EVP_aes_128_gcm(), NULL, NULL, NULL);
		return true;
	}
	if (SSL_version(c->ssl) != TLS1_3_VERSION) {
		snprintf(c->why, sizeof(c->why), "not TLS 1.3");
		return false;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	if (opt.via_openssl) {
		BIO *mem = BIO_new(BIO_s_mem());
		SSL_set0_wbio(c->ssl, mem); /* the read side stays the socket */
	}
	c->aead = EVP_CIPHER_CTX_new();
	EVP_EncryptInit_ex(c->aead, EVP_aes_128_gcm(), NULL, NULL, NULL);
	conn_keys(c);
	return true;
}

/* TLS 1.2 renegotiation: does the server take a ClientHello after the
 * handshake?  c->why says what it answered. */
static void conn_renego(struct conn *c)
{
	char buf[256];
	int r;

	if (SSL_renegotiate(c->ssl) != 1 || SSL_do_handshake(c->ssl) != 1) {
		/* the client's ClientHello is out; the server's answer: */
	}
	c->sent = 1;
	r = SSL_read(c->ssl, buf, sizeof(buf));
	snprintf(c->why, sizeof(c->why), "after SSL_renegotiate: SSL_read %d, %s", r,
		 ERR_error_string(ERR_get_error(), NULL));
	c->closed = r <= 0;
}

static void *conn_run(void *arg)
{
	struct conn *c = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	size_t cap = (size_t)opt.batch * 32 * 64 + 65536;
	uint8_t *buf = malloc(cap);
	double t0, next;
	uint64_t k = 0;

	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_keylog_callback(ctx, keylog);
	SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
	if (opt.what == W_RENEGO) {
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_options(ctx, SSL_OP_ALLOW_CLIENT_RENEGOTIATION);
	}
	if (W_IS12(opt.what)) {
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:"
					"ECDHE-RSA-AES128-GCM-SHA256");
	}
	if (opt.reconnect) {
		/* a handshake, one message, the server's verdict; again */
		t0 = now_s();
		while (now_s() - t0 < opt.seconds) {
			if (!conn_open(c, ctx)) {
				c->refused++;
			} else if (opt.what == W_CLOSE) { /* nothing sent: closed */
				c->ok = true;
				c->handshakes++;
			} else {
				size_t len = conn_message(c, 0, buf);
				/* its answer or its close, whichever first */
				struct pollfd pf = { .fd = c->fd, .events = POLLRDHUP | POLLIN };
				c->ok = true;
				c->handshakes++;
				if (conn_send(c, buf, len, now_s() + 1) == 1)
					c->sent++;
				if (poll(&pf, 1, 1000) > 0 &&
				    (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
					c->closed_n++;
			}
			if (c->aead)
				EVP_CIPHER_CTX_free(c->aead);
			if (c->ssl)
				SSL_free(c->ssl);
			if (c->fd >= 0)
				close(c->fd);
			c->aead = NULL, c->ssl = NULL, c->fd = -1;
		}
		goto out;
	}
	c->ok = conn_open(c, ctx);
	pthread_barrier_wait(&set_up);
	if (!c->ok)
		goto out;
	if (opt.what == W_RENEGO) {
		conn_renego(c);
		goto out;
	}
	t0 = next = now_s();
	if (opt.what == W_HELLO12) {
		/* one record, then hold the connection for --seconds */
		size_t len = conn_message(c, 0, buf);
		if (conn_send(c, buf, len, t0 + opt.seconds) != 1)
			goto gone;
		c->sent = 1;
		c->sent_bytes = len;
		while (now_s() - t0 < opt.seconds) {
			struct pollfd pf = { .fd = c->fd, .events = POLLRDHUP };
			if (poll(&pf, 1, 50) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
				goto gone;
		}
		goto out;
	}
	for (;;) {
		double t = now_s();
		size_t len = 0;
		int n = opt.rate > 0 ? 0 : opt.batch;
		if (t - t0 >= opt.seconds)
			break;
		if (opt.rate > 0) {
			/* the messages due by now, every 10 ms */
			if (t < next) {
				struct pollfd pf = { .fd = c->fd, .events = POLLRDHUP | POLLIN };
				if (!opt.read)
					pf.events = POLLRDHUP;
				poll(&pf, 1, (int)((next - t) * 1000) + 1);
				if (opt.read && (pf.revents & POLLIN)) {
					ssize_t r = recv(c->fd, buf, cap, MSG_DONTWAIT);
					if (r == 0)
						goto gone;
					if (r > 0)
						c->read_bytes += (uint64_t)r;
				}
				if (pf.revents & (POLLRDHUP | POLLHUP | POLLERR) && !opt.read)
					goto gone;
				continue;
			}
			n = (int)((t - t0) * opt.rate) - (int)c->sent;
			if (n > opt.batch)
				n = opt.batch;
			next = t + 0.01;
		}
		for (int i = 0; i < n; i++, k++)
			len += opt.via_openssl && opt.what <= W_KU_NOREQ
				       ? conn_ku_openssl(c, buf + len, cap - len)
				       : conn_message(c, k, buf + len);
		switch (conn_send(c, buf, len, t0 + opt.seconds + 1)) {
		case -1:
			goto gone;
		case 0: /* the server stopped reading: what it says next */
			snprintf(c->why, sizeof(c->why), "the server stopped reading");
			goto verdict;
		}
		c->sent += (uint64_t)n;
		c->sent_bytes += len;
	}
verdict:
	/* the server's verdict: still open, or closed within a second */
	{
		struct pollfd pf = { .fd = c->fd, .events = POLLRDHUP };
		if (poll(&pf, 1, 1000) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			goto gone;
	}
	goto out;
gone:
	c->closed = true;
	c->closed_s = now_s() - t0;
out:
	if (c->aead)
		EVP_CIPHER_CTX_free(c->aead);
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	SSL_CTX_free(ctx);
	free(buf);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: tls_flood [--what ku-req|ku-noreq|tiny|empty|alert|ping|renego|padded|"
		"close|reneg12|hello12|padded12|ping12] "
		"[--auth NAME:SECRET] [--read] [--rate R] [--batch B] [--seconds S] [--conns N] "
		"[--openssl] [--src ADDR] [--reconnect] PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct conn *cs;
	pthread_t *th;
	uint64_t sent = 0, bytes = 0, rd = 0, hs = 0, refused = 0, closed_n = 0;
	int closed = 0, ok = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--read")) {
			opt.read = true;
		} else if (!strcmp(a, "--reconnect")) {
			opt.reconnect = true;
		} else if (!strcmp(a, "--openssl")) {
			opt.via_openssl = true;
		} else if (v && !strcmp(a, "--what")) {
			unsigned w;
			for (w = 0; w < sizeof(what_names) / sizeof(*what_names); w++)
				if (!strcmp(v, what_names[w]))
					break;
			if (w == sizeof(what_names) / sizeof(*what_names))
				return usage();
			opt.what = (enum what)w;
			i++;
		} else if (v && !strcmp(a, "--auth")) {
			opt.auth = v, i++;
		} else if (v && !strcmp(a, "--rate")) {
			opt.rate = atof(v), i++;
		} else if (v && !strcmp(a, "--batch")) {
			opt.batch = atoi(v), i++;
		} else if (v && !strcmp(a, "--seconds")) {
			opt.seconds = atof(v), i++;
		} else if (v && !strcmp(a, "--conns")) {
			opt.conns = atoi(v), i++;
		} else if (v && !strcmp(a, "--src")) {
			opt.src = v, i++;
		} else if (a[0] != '-' && !opt.port) {
			opt.port = atoi(a);
		} else {
			return usage();
		}
	}
	if (!opt.port || opt.conns < 1 || opt.batch < 1 || opt.batch > 4096)
		return usage();
	cs = calloc((size_t)opt.conns, sizeof(*cs));
	th = calloc((size_t)opt.conns, sizeof(*th));
	pthread_barrier_init(&set_up, NULL, (unsigned)opt.conns);
	for (int i = 0; i < opt.conns; i++) {
		cs[i].id = i, cs[i].fd = -1;
		pthread_create(&th[i], NULL, conn_run, &cs[i]);
	}
	for (int i = 0; i < opt.conns; i++) {
		struct conn *c = &cs[i];
		pthread_join(th[i], NULL);
		printf("conn %d: %s sent %llu messages, %llu bytes; read %llu bytes; ", i,
		       what_names[opt.what], (unsigned long long)c->sent,
		       (unsigned long long)c->sent_bytes, (unsigned long long)c->read_bytes);
		if (!c->ok)
			printf("failed: %s\n", c->why);
		else if (c->closed)
			printf("closed after %.2f s%s%s\n", c->closed_s, c->why[0] ? "; " : "", c->why);
		else
			printf("open%s%s\n", c->why[0] ? "; " : "", c->why);
		ok += c->ok;
		closed += c->closed;
		sent += c->sent, bytes += c->sent_bytes, rd += c->read_bytes;
		hs += c->handshakes, refused += c->refused, closed_n += c->closed_n;
	}
	if (opt.reconnect)
		printf("reconnects: %llu handshakes, %llu refused, %llu closed\n",
		       (unsigned long long)hs, (unsigned long long)refused,
		       (unsigned long long)closed_n);
	printf("total: %d connections, %d set up, %d closed; sent %llu messages, %llu bytes; "
	       "read %llu bytes\n", opt.conns, ok, closed, (unsigned long long)sent,
	       (unsigned long long)bytes, (unsigned long long)rd);
	free(cs);
	free(th);
	return ok == opt.conns ? 0 : 1;
}

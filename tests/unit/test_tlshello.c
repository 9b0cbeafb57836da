/*
 * test_tlshello.c - which ClientHellos a kvtierd server refuses for their
 * key_share extension (lib/sys/tlsio.h tlsio_share_refused, the server
 * context's client-hello callback), byte case by byte case.
 *
 * Refused: a well-formed list without a share of a group of ours
 * (TLSIO_GROUP_IDS), which OpenSSL would answer with a HelloRetryRequest.
 * Not refused: a list with one, and a malformed list, which OpenSSL's own
 * parse of the same bytes refuses (decode_error).  Before session 37 a
 * list whose last entry ran past its end, or left 1-3 bytes, or held an
 * empty key, was refused by the callback when it named no group of ours,
 * against what its comment said.
 *
 * Each case is asserted twice: the pure decision, then a real server
 * (tlsio_ctx_server, a self-signed P-256 certificate made here) given an
 * OpenSSL client's ClientHello with the case's bytes as its key_share:
 * its first answer is a ServerHello (not a retry), handshake_failure (the
 * callback's refusal) or decode_error (OpenSSL's), as the case says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "t.h"
#include "tpki.h"
#include "tlsio.h"

/* The server's first answer. */
enum answer {
	ANS_HELLO = 1,	   /* a ServerHello */
	ANS_RETRY,	   /* a HelloRetryRequest (never: the callback's job) */
	ANS_REFUSED = 40,  /* alert handshake_failure: the callback */
	ANS_MALFORMED = 50 /* alert decode_error: OpenSSL's parse */
};

struct buf {
	unsigned char b[1024];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	T_ASSERT(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put16(struct buf *b, unsigned v)
{
	unsigned char x[2] = { (unsigned char)(v >> 8), (unsigned char)v };
	put(b, x, 2);
}

static void fill(struct buf *b, unsigned char c, size_t n)
{
	T_ASSERT(b->n + n <= sizeof(b->b));
	memset(b->b + b->n, c, n);
	b->n += n;
}

/* The X25519 base point and P-256's generator: keys a server takes. */
static const unsigned char x25519_key[32] = { 9 };
static const unsigned char p256_key[65] = {
	0x04, 0x6b, 0x17, 0xd1, 0xf2, 0xe1, 0x2c, 0x42, 0x47, 0xf8, 0xbc, 0xe6, 0xe5,
	0x63, 0xa4, 0x40, 0xf2, 0x77, 0x03, 0x7d, 0x81, 0x2d, 0xeb, 0x33, 0xa0, 0xf4,
	0xa1, 0x39, 0x45, 0xd8, 0x98, 0xc2, 0x96, 0x4f, 0xe3, 0x42, 0xe2, 0xfe, 0x1a,
	0x7f, 0x9b, 0x8e, 0xe7, 0xeb, 0x4a, 0x7c, 0x0f, 0x9e, 0x16, 0x2b, 0xce, 0x33,
	0x57, 0x6b, 0x31, 0x5e, 0xce, 0xcb, 0xb6, 0x40, 0x68, 0x37, 0xbf, 0x51, 0xf5,
};

enum { X25519 = 0x001d, P256 = 0x0017, FFDHE2048 = 0x0100, UNKNOWN = 0x1234 };

static void x25519_entry(struct buf *b)
{
	put16(b, X25519);
	put16(b, sizeof(x25519_key));
	put(b, x25519_key, sizeof(x25519_key));
}

/* ffdhe2048's entry with key_len declared and n bytes of key. */
static void ffdhe_entry(struct buf *b, unsigned key_len, size_t n)
{
	put16(b, FFDHE2048);
	put16(b, key_len);
	fill(b, 0x5a, n);
}

/* The list's length, at the body's first 2 bytes: what follows them. */
static void close_list(struct buf *b)
{
	b->b[0] = (unsigned char)((b->n - 2) >> 8);
	b->b[1] = (unsigned char)(b->n - 2);
}

struct kcase {
	const char *name;
	struct buf ext;
	bool refused;
	enum answer answer;
};

static struct kcase cases[32];
static int ncases;

static struct buf *add(const char *name, bool refused, enum answer answer)
{
	struct kcase *k = &cases[ncases++];

	T_ASSERT(ncases <= (int)(sizeof(cases) / sizeof(cases[0])));
	k->name = name;
	k->refused = refused;
	k->answer = answer;
	k->ext.n = 0;
	return &k->ext;
}

static void make_cases(void)
{
	struct buf *b;

	/* well-formed, a group of ours: served */
	b = add("X25519", false, ANS_HELLO);
	put16(b, 0), x25519_entry(b), close_list(b);
	b = add("P-256", false, ANS_HELLO);
	put16(b, 0), put16(b, P256), put16(b, sizeof(p256_key));
	put(b, p256_key, sizeof(p256_key)), close_list(b);
	b = add("ffdhe2048, then X25519", false, ANS_HELLO);
	put16(b, 0), ffdhe_entry(b, 256, 256), x25519_entry(b), close_list(b);
	/* well-formed, none of ours: refused (OpenSSL would retry) */
	b = add("ffdhe2048 alone", true, ANS_REFUSED);
	put16(b, 0), ffdhe_entry(b, 256, 256), close_list(b);
	b = add("an empty list", true, ANS_REFUSED);
	put16(b, 0);
	b = add("a group unknown to either side", true, ANS_REFUSED);
	put16(b, 0), put16(b, UNKNOWN), put16(b, 4), fill(b, 1, 4), close_list(b);
	/* malformed: OpenSSL refuses them itself (these four the callback
	 * refused before session 37) */
	b = add("a truncated entry (256 declared, 100 there)", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 256, 100), close_list(b);
	b = add("an entry, then 3 bytes of another's head", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 256, 256), put16(b, X25519), fill(b, 0, 1), close_list(b);
	b = add("an empty key", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 0, 0), close_list(b);
	b = add("X25519 after a length past the list's end", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 256, 4), x25519_entry(b), close_list(b);
	/* malformed with a group of ours the walk sees: the same */
	b = add("X25519 after an empty key", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 0, 0), x25519_entry(b), close_list(b);
	b = add("X25519, then a truncated entry", false, ANS_MALFORMED);
	put16(b, 0), x25519_entry(b), ffdhe_entry(b, 256, 10), close_list(b);
	b = add("a list length past the body", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 256, 256), close_list(b);
	b->b[1]++;
	b = add("a list length short of the body", false, ANS_MALFORMED);
	put16(b, 0), ffdhe_entry(b, 256, 256), close_list(b);
	b->b[1]--;
	b = add("one byte", false, ANS_MALFORMED);
	fill(b, 0, 1);
	b = add("no bytes", false, ANS_MALFORMED);
}

/* The decision alone, on exactly the case's bytes (ASan: no read past). */
static void test_decisions(void)
{
	for (int i = 0; i < ncases; i++) {
		struct kcase *k = &cases[i];
		unsigned char *p = malloc(k->ext.n ? k->ext.n : 1);

		T_ASSERT(p);
		memcpy(p, k->ext.b, k->ext.n);
		if (tlsio_share_refused(p, k->ext.n) != k->refused)
			T_FAIL("%s: %s, want %s", k->name, k->refused ? "not refused" : "refused",
			       k->refused ? "refused" : "not refused");
		free(p);
	}
}

static unsigned get16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static void set16(unsigned char *p, size_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

/* An OpenSSL client's ClientHello record, offering every group a case
 * names (a share in a group the client did not list is an illegal
 * parameter, whoever takes it); *ks: where its key_share's body is. */
static size_t client_hello(unsigned char *out, size_t cap, size_t *ks)
{
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *c;
	size_t n, off, end;

	T_ASSERT(cctx);
	T_EQ_INT(SSL_CTX_set1_groups_list(cctx, "X25519:P-256:ffdhe2048"), 1);
	c = SSL_new(cctx);
	T_ASSERT(c);
	SSL_set_bio(c, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	SSL_set_connect_state(c);
	T_EQ_INT(SSL_do_handshake(c), -1);
	n = (size_t)BIO_read(SSL_get_wbio(c), out, (int)cap);
	SSL_free(c);
	SSL_CTX_free(cctx);
	/* record (5), handshake header (4), version, random */
	T_ASSERT(n > 44 && out[0] == 0x16 && out[5] == 1 && n == 5 + get16(out + 3));
	off = 9 + 2 + 32;
	off += 1 + out[off];		/* session id */
	off += 2 + get16(out + off);	/* cipher suites */
	off += 1 + out[off];		/* compression */
	T_EQ_U64(off + 2 + get16(out + off), n);
	end = n;
	for (off += 2; off + 4 <= end; off += 4 + get16(out + off + 2))
		if (get16(out + off) == 0x0033) {
			*ks = off + 4;
			return n;
		}
	T_FAIL("no key_share in OpenSSL's ClientHello");
}

/* The server's first answer to hello with ext as its key_share. */
static enum answer serve(SSL_CTX *sctx, const unsigned char *hello, size_t n, size_t ks,
			 const struct buf *ext)
{
	/* SHA-256("HelloRetryRequest"): a retry's ServerHello.random */
	static const unsigned char hrr[8] = { 0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11 };
	static unsigned char in[4096], out[8192];
	size_t old = get16(hello + ks - 2), m = n - old + ext->n, ext_total = 9 + 2 + 32;
	SSL *s = SSL_new(sctx);
	int got;

	T_ASSERT(s && m <= sizeof(in));
	memcpy(in, hello, ks);
	memcpy(in + ks, ext->b, ext->n);
	memcpy(in + ks + ext->n, hello + ks + old, n - ks - old);
	set16(in + ks - 2, ext->n);
	ext_total += 1 + in[ext_total];
	ext_total += 2 + get16(in + ext_total);
	ext_total += 1 + in[ext_total];
	set16(in + ext_total, m - ext_total - 2);
	in[6] = 0, set16(in + 7, m - 9); /* the handshake's length, 3 bytes */
	set16(in + 3, m - 5);		 /* the record's */
	SSL_set_bio(s, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	SSL_set_accept_state(s);
	T_EQ_INT(BIO_write(SSL_get_rbio(s), in, (int)m), (int)m);
	ERR_clear_error();
	(void)SSL_do_handshake(s);
	ERR_clear_error();
	got = BIO_read(SSL_get_wbio(s), out, sizeof(out));
	SSL_free(s);
	T_ASSERT(got >= 7);
	if (out[0] == 0x15) /* an alert: level, description */
		return (enum answer)out[6];
	T_ASSERT(got > 11 + 8 && out[0] == 0x16 && out[5] == 2);
	return memcmp(out + 11, hrr, sizeof(hrr)) ? ANS_HELLO : ANS_RETRY;
}

static void test_server(void)
{
	char dir[256], cert[300], key[300], err[300];
	const char *tmp = getenv("TMPDIR");
	unsigned char hello[4096];
	size_t n, ks;
	SSL_CTX *sctx;

	snprintf(dir, sizeof(dir), "%s/test_tlshello.XXXXXX", tmp ? tmp : "/tmp");
	T_ASSERT(mkdtemp(dir));
	t_make_pki(dir, cert, key, sizeof(cert));
	sctx = tlsio_ctx_server(cert, key, NULL, false, err, sizeof(err));
	if (!sctx)
		T_FAIL("server context: %s", err);
	n = client_hello(hello, sizeof(hello), &ks);
	for (int i = 0; i < ncases; i++) {
		enum answer a = serve(sctx, hello, n, ks, &cases[i].ext);
		printf("%-48s %s, answered %d\n", cases[i].name,
		       cases[i].refused ? "refused" : "goes on", (int)a);
		if (a != cases[i].answer)
			T_FAIL("%s: the server answered %d, want %d (1 ServerHello, 2 retry, "
			       "40 handshake_failure, 50 decode_error)",
			       cases[i].name, (int)a, (int)cases[i].answer);
	}
	SSL_CTX_free(sctx);
	unlink(cert);
	unlink(key);
	rmdir(dir);
}

int main(void)
{
	make_cases();
	test_decisions();
	test_server();
	return 0;
}

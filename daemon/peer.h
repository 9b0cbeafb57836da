/*
 * peer.h - a blocking native-protocol connection to a kvtierd (peer.c):
 * kvtierd to the other members of its pod (repair.c), kvtier drain to a
 * server (cli/drain.c).
 */
#ifndef KVTD_PEER_H
#define KVTD_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtier.h"
#include "proto.h"
#define KVTD_PEER_ADDR_MAX 255u /* "HOST:PORT" */
#define KVTD_PEER_CONNECT_MS 2000u /* connect timeout when the caller passes 0 */

typedef struct ssl_ctx_st SSL_CTX;

struct kvtd_peer {
	int fd;
	int stop_fd;             /* readable: give up at once (kvtd_peer_open_stop), or -1 */
	struct ssl_st *ssl;      /* TLS (kvtd_peer_open_tls), or NULL */
	char addr[KVTD_PEER_ADDR_MAX + 1];
	char tenant[PROTO_TENANT_MAX + 1];
	struct proto_limits lim;
	uint16_t version;        /* what HELLO chose: every later frame carries it */
	uint16_t caps;           /* what its HELLO announced (PROTO_CAP_*; 0 before
				  * PROTO_VERSION_CAPS): what may be sent to it */
	uint64_t tag;
	uint64_t open_tags;      /* bit i: tag `tag - i` sent, its final answer not yet in */
	uint64_t waited_ms;      /* spent waiting since the last frame of an answer
				  * (or the last final one): PEER_TIMEOUT_MS */
	uint64_t answer_ms;      /* ... since the last final answer: PEER_ANSWER_MS */
	unsigned more_frames;    /* MORE frames since then: PEER_MORE_MAX */
	uint64_t in_bytes;       /* bytes read from the member since the open (repair.c:
				  * a kept connection found closed before any of a
				  * batch's answer came is opened again) */
	uint8_t *rbuf;
	size_t rcap, rlen, used;
	struct proto_frame resp; /* the last response, in rbuf */
};

/* Connect to addr (HOST:PORT, [V6]:PORT or unix:/PATH), HELLO, AUTH as tenant with secret
 * (HMAC-SHA-256, the server's proof checked; method NONE where the server
 * offers it, and then secret may be NULL).  The host's lookup (a name:
 * on a helper thread, peer.c "peer_resolve") and the TCP connect together
 * give up after connect_ms (0: KVTD_PEER_CONNECT_MS) with -ETIMEDOUT.  0 or
 * < 0 (nothing to close then). */
int kvtd_peer_open(struct kvtd_peer *p, const char *addr, const char *tenant,
		   const uint8_t *secret, uint32_t secret_len, unsigned connect_ms);
/* The same over TLS when tls is not NULL (a client context: the member's
 * certificate is verified against its CA, and its name or address against
 * addr's host; a pod whose members serve TLS, doc/cluster.md "Peers"). */
int kvtd_peer_open_tls(struct kvtd_peer *p, const char *addr, const char *tenant,
		       const uint8_t *secret, uint32_t secret_len, unsigned connect_ms,
		       SSL_CTX *tls);
/* The same, the certificate checked against tls_name (a name or an
 * address; NULL: addr's host): kvtier drain --tls-server-name. */
int kvtd_peer_open_tls_name(struct kvtd_peer *p, const char *addr, const char *tls_name,
			    const char *tenant, const uint8_t *secret, uint32_t secret_len,
			    unsigned connect_ms, SSL_CTX *tls);
/* The same, with a stop fd (>= 0; -1: none): while it is readable (an
 * eventfd written once, never read), every wait of p -- the lookup, the
 * connect, the handshake, a send, an answer -- ends at once with
 * -ECANCELED, so that a stopping kvtierd need not wait out the peer
 * clocks of a member that holds its question, or of its nameserver
 * (repair.c).  The fd must outlive p's use. */
int kvtd_peer_open_stop(struct kvtd_peer *p, const char *addr, const char *tls_name,
			const char *tenant, const uint8_t *secret, uint32_t secret_len,
			unsigned connect_ms, SSL_CTX *tls, int stop_fd);
void kvtd_peer_close(struct kvtd_peer *p);
/* NS_REGISTER the canonical text: the digest there.  KVT_OK or < 0. */
int kvtd_peer_register(struct kvtd_peer *p, const char *canon, size_t len,
		       uint8_t digest[PROTO_DIGEST_LEN]);
/* KVT_OK, KVT_MISS or < 0. */
int kvtd_peer_exists(struct kvtd_peer *p, const uint8_t digest[PROTO_DIGEST_LEN],
		     const struct kvt_key *key);

/* Pipelining (repair.c): send one request frame without waiting for its
 * answer (f->tag and f->version are set here; data[] is its data section,
 * written after the table).  0 or < 0 (the connection is then unusable). */
int kvtd_peer_send(struct kvtd_peer *p, struct proto_frame *f, const struct proto_item *items,
		   uint32_t n, const struct iovec *data, unsigned data_n);
/* The next response frame, of any tag, into p->resp (valid until the
 * next call).  0 or < 0. */
int kvtd_peer_next(struct kvtd_peer *p);

/* DRAIN (admin): PROTO_DRAIN_STAY or PROTO_DRAIN_EXIT.  0 or < 0. */
int kvtd_peer_drain(struct kvtd_peer *p, uint32_t mode);
/* A numeric statistic of the server (STATS with scope PROTO_SCOPE_TENANT:
 * one's own, or PROTO_SCOPE_ALL: the whole server, admin): KVT_OK with
 * *value, KVT_MISS (not listed), or < 0. */
int kvtd_peer_stat(struct kvtd_peer *p, uint32_t scope, const char *name, uint64_t *value);
/* Several of one STATS answer (one round trip, the whole list read once):
 * names[i]'s in values[i] and found[i] true, or values[i] untouched and
 * found[i] false (not listed).  KVT_OK, or < 0. */
int kvtd_peer_stats(struct kvtd_peer *p, uint32_t scope, unsigned n, const char *const *names,
		    uint64_t *values, bool *found);

#endif

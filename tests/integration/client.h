/*
 * client.h - a small blocking kvtier-protocol client for the integration
 * tests: real sockets, frames encoded and parsed with lib/proto.h.
 *
 * One struct kc per connection, used by one thread.  Every function
 * returns >= 0 on success or a negative code (-errno, KVT_E*, PROTO_E*).
 * Requests get increasing tags; kc_recv returns whatever response frame
 * comes next (responses may arrive out of order).
 */
#ifndef KVT_TEST_CLIENT_H
#define KVT_TEST_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "kvtier.h"
#include "proto.h"

struct kc {
	int fd;
	uint8_t *rbuf;            /* bytes received, not yet returned */
	size_t rcap, rlen;
	struct proto_limits lim;  /* the server's, after kc_hello */
	uint64_t next_tag;
	uint16_t version;
	uint16_t offer_max;       /* kc_hello offers [MIN, this]; 0: PROTO_VERSION_MAX */
	uint16_t caps;            /* PROTO_CAP_*: the server's HELLO answer */
	uint16_t auth_method;     /* the server's first offer */
	uint8_t nonce[PROTO_NONCE_LEN];
	uint32_t role;
};

/* A response frame: buf holds header, table and data; f points into it. */
struct kc_resp {
	struct proto_frame f;
	uint8_t *buf;
	uint64_t len;
	const uint8_t *data;      /* the data section */
};

/* A value read back by kc_get, its part table checked against the bytes. */
struct kc_value {
	int32_t status;
	uint32_t flags;
	uint64_t value_len, off;
	uint32_t first_part, part_count;
	uint64_t lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	uint8_t *bytes;           /* malloc'd, len bytes */
	uint64_t len;
	bool crc_ok;              /* every part's CRC32C matched its bytes */
};

int kc_connect_tcp(struct kc *c, uint16_t port);
/* A client on a socket already connected (a test's own, bound to another
 * source address). */
void kc_adopt(struct kc *c, int fd);
int kc_connect_unix(struct kc *c, const char *path);
void kc_close(struct kc *c);

int kc_send(struct kc *c, const void *buf, size_t len);
/* f with n items encoded (header and table; the data is sent apart) into
 * *buf, malloc'd with room zeroed bytes more at its end (for a test that
 * grows the table by hand); lim NULL: the codec's own limits.  Returns
 * the length, or the codec's error (*buf NULL). */
int64_t kc_encode(const struct proto_frame *f, const struct proto_item *items, uint32_t n,
		  const struct proto_limits *lim, size_t room, uint8_t **buf);
/* Encode f (tag and version filled in if 0) with items, send it and the
 * data iovecs.  Returns the tag (> 0) or an error. */
int64_t kc_request(struct kc *c, struct proto_frame *f, const struct proto_item *items,
		   uint32_t n, const struct iovec *data, unsigned data_n);
/* Next response frame.  0, or -ETIMEDOUT, -ECONNRESET (closed), a parse
 * error. */
int kc_recv(struct kc *c, struct kc_resp *r, int timeout_ms);
void kc_resp_free(struct kc_resp *r);
/* A whole reply, over as many frames as it takes (PROTO_F_MORE): fn (may
 * be NULL) is called with each item and the frame holding its data
 * (r->data + it->data_off), valid during the call.  Returns the frame
 * count, or a kc_recv error (-EPROTO: a frame with another tag than the
 * reply's first); *status (may be NULL): the first negative frame
 * status, else 0. */
typedef void (*kc_item_fn)(void *ctx, const struct kc_resp *r, const struct proto_item *it);
int kc_recv_items(struct kc *c, int timeout_ms, kc_item_fn fn, void *ctx, int32_t *status);
/* The frame status and first item status of the response waiting on c,
 * read with MSG_PEEK (what is read stays for kc_recv): 0, or -ETIMEDOUT
 * (nothing within timeout_ms), -ECONNRESET (closed), -EPROTO (not a
 * frame).  For an answer too large to read, or one that must stay unread
 * (its pins held). */
int kc_peek_status(struct kc *c, int timeout_ms, int32_t *frame_status, int32_t *item_status);
/* Wait for the server to close: true if it did within timeout_ms
 * (responses before the close are skipped). */
bool kc_wait_closed(struct kc *c, int timeout_ms);

/* The other side, for the fake servers (test_hostile_server,
 * test_peer_attack): one request frame from fd.  Its header and table land
 * in *buf (grown as needed, *cap its size) and are parsed into *f; its data
 * section is read and dropped.  Reads poll every 50 ms and give up once
 * *stop is set.  Returns 1 with a frame; 0 when the peer closed, a read
 * failed or *stop was set; the codec's error for a frame it refuses. */
int kc_fake_request(int fd, uint8_t **buf, size_t *cap, struct proto_frame *f,
		    const _Atomic bool *stop);
/* An answer's frame to req, status 0, nothing else set. */
void kc_fake_answer(struct proto_frame *f, const struct proto_frame *req);
/* A frame made by hand, for what the codec will not encode (a table or
 * data section past every limit, an unknown opcode, a table whose CRC is
 * wrong): f's header fields (version, op, flags, item_count, tag,
 * table_len, data_len, status) as the fixed header into buf, then, if
 * table is not NULL, f->table_len bytes of it; the CRC32C over the header
 * and that table (the header alone without one: a table sent after it
 * fails the check).  Returns the bytes written. */
size_t kc_raw_frame(uint8_t *buf, const struct proto_frame *f, const void *table);

/* HELLO; returns the response status. */
int kc_hello(struct kc *c);
/* AUTH with the server's method (secret may be NULL for AUTH_NONE);
 * returns the response status; checks the server's proof. */
int kc_auth(struct kc *c, const char *tenant, const char *secret);
/* HELLO + AUTH. */
int kc_login(struct kc *c, const char *tenant, const char *secret);
/* kc_connect_tcp to loopback:port, then kc_login: 0, or its error and
 * nothing left open. */
int kc_dial(struct kc *c, uint16_t port, const char *tenant, const char *secret);

/* NS_REGISTER one canonical text; the item status, digest and the
 * server's text (NUL-terminated, if canon_out). */
int kc_register(struct kc *c, const struct kvt_ns_desc *d, uint8_t digest[PROTO_DIGEST_LEN],
		char *canon_out, size_t canon_len);

/* One PUT item; crcs NULL computes them.  Returns the item status. */
int kc_put(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	   const struct iovec *parts, unsigned n, const uint32_t *crcs);
/* One GET item (flags PROTO_IF_PART / RANGE).  Returns the item status;
 * v->bytes must be freed (kc_value_free). */
int kc_get(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	   uint32_t flags, uint32_t part, uint64_t off, uint64_t len, struct kc_value *v);
void kc_value_free(struct kc_value *v);
/* One-key EXISTS / DELETE: item status (and tier). */
int kc_exists(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	      uint32_t *tier);
int kc_delete(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key);
/* LOOKUP: frame status; *hits, tiers[n] (may be NULL). */
int kc_lookup(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *keys,
	      uint32_t n, uint32_t *hits, uint8_t *tiers);
/* CLEAR: frame status; *removed. */
int kc_clear(struct kc *c, uint32_t scope, const uint8_t *digest, const char *tenant,
	     uint64_t *removed);
/* STATS: frame status; the numeric stat `name` into *value (KVT_MISS if
 * absent). */
int kc_stat(struct kc *c, uint32_t scope, const char *name, uint64_t *value);
/* The same for a text stat, NUL-terminated into out (out_len bytes). */
int kc_stat_text(struct kc *c, uint32_t scope, const char *name, char *out, size_t out_len);
/* The same for another tenant's statistics (scope PROTO_SCOPE_TENANT). */
int kc_stat_of(struct kc *c, uint32_t scope, const char *tenant, const char *name,
	       uint64_t *value);
/* One numeric statistic of the whole server (scope ALL), read on a
 * connection of its own: to port over TCP, or to the Unix socket path
 * where port is 0, logged in as tenant (secret NULL: AUTH_NONE), closed
 * after.  0, a connect or login error, or kc_stat's; with opt, a STATS
 * that fails (a statistic an older server lacks, a STATS refused under
 * memory pressure) reads as 0 and returns 0. */
int kc_stat_once(uint16_t port, const char *path, const char *tenant, const char *secret,
		 const char *name, bool opt, uint64_t *value);
int kc_ping(struct kc *c);

#endif

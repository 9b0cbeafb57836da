/*
 * peer.h - a blocking native-protocol connection from this kvtierd to
 * another member of its pod (peer.c), for healing (repair.c).
 */
#ifndef KVTD_PEER_H
#define KVTD_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "kvtier.h"
#include "proto.h"
#include "members.h"

struct kvtd_peer {
	int fd;
	char addr[KVTD_MEMBER_ADDR_MAX + 1];
	char tenant[PROTO_TENANT_MAX + 1];
	struct proto_limits lim;
	uint64_t tag;
	uint8_t *rbuf;
	size_t rcap, rlen, used;
	struct proto_frame resp; /* the last response, in rbuf */
};

/* Connect to addr ("HOST:PORT"), HELLO, AUTH as tenant (its secret from
 * the installed tenants table; method NONE where the peer offers it).
 * 0 or < 0 (nothing to close then). */
int kvtd_peer_open(struct kvtd_peer *p, const char *addr, const char *tenant);
void kvtd_peer_close(struct kvtd_peer *p);
/* NS_REGISTER the canonical text: the digest there.  KVT_OK or < 0. */
int kvtd_peer_register(struct kvtd_peer *p, const char *canon, size_t len,
		       uint8_t digest[PROTO_DIGEST_LEN]);
/* KVT_OK, KVT_MISS or < 0. */
int kvtd_peer_exists(struct kvtd_peer *p, const uint8_t digest[PROTO_DIGEST_LEN],
		     const struct kvt_key *key);
/* A PLACED put of one value (one part): KVT_OK, KVT_EXISTS or < 0. */
int kvtd_peer_put(struct kvtd_peer *p, const uint8_t digest[PROTO_DIGEST_LEN],
		  const struct kvt_key *key, const void *value, uint64_t len, uint64_t anchor,
		  uint32_t copies);

#endif

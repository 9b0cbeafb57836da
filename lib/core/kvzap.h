/*
 * kvzap.h - what a peer of a KV-events socket may cost (kvzap.c): the
 * socket options every socket a peer can reach gets, and the ZAP handler
 * of the publisher's ZeroMQ context, which bounds how many peers each
 * bound socket holds (kvevents.h: KVEVENTS_DEF_SUB_MAX,
 * KVEVENTS_SUB_PER_ADDR).  Internal to the events publisher: kvevents.c
 * opens it, and it and kvreplay.c guard their sockets with it; it calls
 * neither.
 */
#ifndef KVT_KVZAP_H
#define KVT_KVZAP_H

#include "kvevents.h"

struct kvzap;                   /* the ZAP thread and the sockets it watches */

#define KVZAP_UNWATCHED UINT32_MAX /* kvzap_close_socket: a socket not watched */

/* Bind the ZAP handler of zctx (inproc://zeromq.zap.01: one per context)
 * and start its thread (kvt-events-zap), refusing a peer of a watched
 * socket that holds more than sub_max peers, or KVEVENTS_SUB_PER_ADDR from
 * the peer's address.  0, -ENOMEM, -errno. */
int kvzap_open(struct kvzap **out, void *zctx, unsigned sub_max, struct kvt_mem *mem,
	       const struct kvt_logger *log);
/* Stop the thread and free what it watched; every watched socket must be
 * closed (kvzap_close_socket) first.  NULL: no-op. */
void kvzap_close(struct kvzap *z);

/* Bound what a peer of sock (unauthenticated: anyone who reaches it) can
 * cost, before sock binds or connects (kvevents.h, doc/security.md): the
 * largest message libzmq takes from it (KVEVENTS_IN_MAX), the handshake
 * deadline (KVEVENTS_HANDSHAKE_MS) and TCP keepalive
 * (KVEVENTS_KEEPALIVE_*).  Every socket kvevents and kvreplay open for
 * peers gets these, here only; the high-water marks and linger are each
 * socket's own. */
void kvzap_peer_bounds(void *sock);

/* Before sock (not bound yet) binds: give it a ZAP domain and a monitor the
 * ZAP thread reads, so that its peers are counted and bounded.  *id names
 * it for kvzap_close_socket (KVZAP_UNWATCHED if it failed).  0, -ENOMEM,
 * -errno (sock unchanged). */
int kvzap_watch(struct kvzap *z, void *sock, uint32_t *id);

/* Close sock (from the thread that owns it); if watched (id is not
 * KVZAP_UNWATCHED), first stop its monitor, so that libzmq sends it no
 * event its reader could miss, and have the ZAP thread forget it. */
void kvzap_close_socket(struct kvzap *z, void *sock, uint32_t id);

/* A peer's address as libzmq gives it with each message it takes
 * (zmq_msg_gets "Peer-Address"): the IP address on TCP, ":uid:gid:pid" on
 * ipc://; what kvevents.c counts subscriptions by. */
#define KVZAP_ADDR_LEN 64

/* Let watched socket id's peers from address addr go (kvevents.c: they
 * subscribed to more than KVEVENTS_SUBS_MAX topics): the ZAP thread reads
 * the socket's monitor and shuts down each descriptor libzmq accepted from
 * there and has not closed (checked to be still that socket: its inode and
 * peer), so libzmq closes the connection and frees its subscriptions; the
 * socket's other peers keep theirs.  Returns the drop's number (> 0, for
 * kvzap_drop_wait), -EINVAL, -ENOMEM. */
int64_t kvzap_drop_addr(struct kvzap *z, uint32_t id, const char *addr);

/* Wait up to ms for drop number ticket (kvzap_drop_addr) to be done: its
 * descriptors disconnected, so that libzmq takes nothing more from them
 * than it read already.  Whether it was (false: a ticket <= 0, the time
 * passed, or the thread is stopping).  Any thread but the ZAP thread. */
bool kvzap_drop_wait(struct kvzap *z, int64_t ticket, unsigned ms);

/* Whether watched socket id has a peer from address addr (as far as its
 * monitor was read: a peer accepted is, since its handshake waited for the
 * ZAP thread to read that; one closed a moment ago may still be).  Any
 * thread. */
bool kvzap_addr_live(struct kvzap *z, uint32_t id, const char *addr);

/* Receive the message waiting on sock, if one is (ZMQ_DONTWAIT; its later
 * frames are waited for): the first cap bytes of each of its first max
 * frames into fr + i * cap, the frame's whole length into len[i] (so a
 * longer frame shows); later frames are read and dropped.  Returns how
 * many frames it had; 0: none was waiting.  The socket's owner's thread. */
unsigned kvzap_recv(void *sock, void *fr, size_t cap, size_t *len, unsigned max);

/* Peers refused so far (events.refused). */
uint64_t kvzap_refused(const struct kvzap *z);

#endif

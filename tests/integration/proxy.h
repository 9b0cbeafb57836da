/*
 * proxy.h - a relaying TCP proxy on 127.0.0.1 port 0 for integration
 * tests: every connection to it is relayed to a server's port, a thread
 * per connection.  It can record every byte relayed either way, and hand
 * the server's bytes to a filter that changes them or stalls the
 * connection mid-stream.
 */
#ifndef KVT_TEST_PROXY_H
#define KVT_TEST_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPROXY_SLOTS 64

struct tproxy;

/*
 * Called with each chunk (n bytes) the server sends a client, before it
 * is relayed; mode is p->mode as read for this chunk, *conn the
 * connection's own state (0 at its start).  May change the bytes.
 * Returns how many of them to relay; with *stall set, the connection
 * relays nothing more after those until p->mode is no longer mode, and
 * is then closed.
 */
typedef size_t (*tproxy_filter_fn)(struct tproxy *p, int mode, uint64_t *conn, uint8_t *buf,
				   size_t n, bool *stall);

struct tproxy {
	int lfd;
	uint16_t port;               /* the proxy's */
	_Atomic uint16_t to_port;    /* the server's: set anew when it restarts */
	pthread_t thr;
	_Atomic int stop;
	_Atomic int relays;          /* relay threads alive */
	_Atomic int mode;            /* the filter's (0 at the start) */
	_Atomic int acted;           /* the filter's count of what it did */
	_Atomic int opened;          /* connections relayed so far: each one's slot */
	_Atomic uint64_t down[TPROXY_SLOTS]; /* bytes relayed server to client, by slot */
	/* Bit s set: slot s's bytes from the client (hold_up) or from the
	 * server (hold_down) are not read, and wait in the socket, until it
	 * is cleared (seen within 50 ms); the connection stays open. */
	_Atomic uint64_t hold_up, hold_down;
	_Atomic int fd_up[TPROXY_SLOTS], fd_down[TPROXY_SLOTS]; /* tproxy_queued; -1: closed */
	tproxy_filter_fn filter;     /* NULL: relay as is */
	bool record;                 /* keep every byte relayed, either way */
	pthread_mutex_t lock;        /* the record */
	uint8_t *log;
	size_t log_len, log_cap;
};

/* Listen on 127.0.0.1 port 0 (p->port) and relay to to_port. */
void tproxy_start(struct tproxy *p, uint16_t to_port, tproxy_filter_fn filter, bool record);
/* Stop accepting, wait for the relays to end (fails the test if they do
 * not within 5 s), free the record. */
void tproxy_stop(struct tproxy *p);
/* Bytes waiting to be read, unrelayed, on slot's connection: from the
 * client (up) or from the server; 0 for a slot that is closed. */
size_t tproxy_queued(struct tproxy *p, int slot, bool up);
/* Whether the record holds the string pat. */
bool tproxy_saw(struct tproxy *p, const char *pat);

#endif

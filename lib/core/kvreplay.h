/*
 * kvreplay.h - the replay endpoints of the KV-events feeds (kvreplay.c):
 * vLLM's replay_endpoint, a ROUTER socket that answers a router's
 * request with the feed's last messages (kvevents.h says what goes on
 * the wire, KVEVENTS_DEF_REPLAY_MAX what it may cost).  Internal to the
 * events publisher: kvevents.c is its one caller; the bounds on its
 * listeners' peers are kvzap.c's, below both.
 */
#ifndef KVT_KVREPLAY_H
#define KVT_KVREPLAY_H

#include "kvevents.h"
#include "kvzap.h"

struct kvreplay;                /* the replay thread and its endpoints */
struct kvreplay_ep;             /* one feed's endpoint: its ROUTER and its ring */

/* The longest endpoint kvreplay_bind takes, its NUL included. */
#define KVREPLAY_EP_LEN 256

struct kvreplay_config {
	void *zctx;                     /* the publisher's ZeroMQ context */
	const char *topic;              /* frame 1 of a reply; "" for none; the caller's,
					 * valid until kvreplay_close */
	unsigned max;                   /* messages an endpoint keeps */
	uint64_t bytes;                 /* and their payload bytes at most */
	unsigned sub_max;               /* replays under way an endpoint */
	struct kvzap *zap;              /* the publisher's: bounds the endpoints' peers */
};

/* Start the replay thread (kvt-events-rep), with no endpoint yet; the
 * config is copied.  0, -ENOMEM, -errno. */
int kvreplay_open(struct kvreplay **out, const struct kvreplay_config *cfg,
		  struct kvt_mem *mem, const struct kvt_logger *log);
/* Stop the thread, close and free every endpoint (each one's handle is
 * gone).  NULL: no-op. */
void kvreplay_close(struct kvreplay *r);

/* A replay endpoint for group's feed (0: the main socket) bound at ep,
 * handed to the replay thread; *out until kvreplay_unbind or
 * kvreplay_close.  0, KVT_EOPTVAL (refused: logged), -ENOMEM, -errno.
 * Any thread. */
int kvreplay_bind(struct kvreplay *r, const char *ep, uint32_t group,
		  struct kvreplay_ep **out);
/* Have the replay thread close and free e; returns once it has (the
 * endpoint is free to bind again).  Any thread but the replay thread. */
void kvreplay_unbind(struct kvreplay *r, struct kvreplay_ep *e);

/* What e was asked to bind (kvreplay_bind's ep), and what it is bound to
 * (ZMQ_LAST_ENDPOINT): e's, valid while it is. */
const char *kvreplay_want(const struct kvreplay_ep *e);
const char *kvreplay_endpoint(const struct kvreplay_ep *e);

/* Keep message seq (payload p[0..len), as sent on e's feed) for replay;
 * the oldest go past the bounds.  Any thread (the publisher's). */
void kvreplay_keep(struct kvreplay *r, struct kvreplay_ep *e, uint64_t seq, const uint8_t *p,
		   size_t len);
/* Forget every message e keeps (its feed numbers from 0 again). */
void kvreplay_forget(struct kvreplay *r, struct kvreplay_ep *e);

/* events.replay_kept ... events.replay_waits (stats.md). */
void kvreplay_stats(struct kvreplay *r, kvt_stats_fn fn, void *ctx);

#endif

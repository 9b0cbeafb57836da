/*
 * repair.c - the pod heals itself (doc/cluster.md "Healing"): the blocks
 * this server holds with their placement (anchor, copies: PROTO_IF_PLACED
 * puts), and the repair thread that copies them to the members placement
 * now gives them once the member list changed and stayed so for
 * --repair-grace, at most --repair-rate bytes a second, yielding to client
 * traffic.
 *
 * The table: (namespace id, key) -> (anchor, copies) for placed blocks,
 * open addressing under rp->lock, filled by the loops as PUTs complete
 * (ops.c), turned into tombstones by DELETEs (a REPAIR put of the key is
 * refused for a minute), dropped by repair passes that find a block gone
 * from the store.  Its array is charged to --max-memory: an entry of an
 * evicted block stays until a pass finds it gone, and passes run only when
 * the member list changes, so clients' puts grew it without bound outside
 * the budget.  Past the budget it does not grow and a new placed block is
 * not tracked (repair.untracked: not healed if its member dies; a delete
 * with no room refuses the tenant's repair copies for a while instead),
 * and one tenant's entries hold at most its share ("A tenant's share"
 * below).  A pass's
 * snapshot of the table is charged too, forced (a pass must run; clients
 * wait for the budget while it does).
 *
 * The thread takes a snapshot of the table and of the member
 * list, ranks each group over the list exactly as engines do
 * (lib/placement.c, weights scaled as the engines' remote.discover scales
 * them), and asks each member of a block's top `copies` but itself
 * whether it holds the block (EXISTS), sending it where not (a PLACED
 * REPAIR put, so that the new holder can heal it in turn): pipelined, a
 * thread per member ("A pass" below).  A drain (kvtier drain) is such a
 * pass over the list without this server (every replicated block, the
 * hottest others up to --drain-budget), then the etcd lease revoked (a
 * static --members pod: the list served without it, which the others
 * learn by asking: repair_static_main, on a thread of its own), then a
 * second pass, then maybe SIGTERM.  Duplicate work (two holders both copying)
 * costs an EXISTS or a no-op put, never wrong bytes: keys name immutable
 * values.
 *
 * Forwarded replicas (PROTO_IF_FORWARD: an engine sent a replicated block
 * once, doc/cluster.md "Forwarded replicas"): the loops queue the block,
 * and the repair thread hands it at once to the lane of each other member
 * of its top on the current list ("Forward lanes" below), whose thread
 * sends it as a pass does (EXISTS, then the copies that member lacks,
 * PLACED|REPAIR so that nobody forwards them again), neither paced by
 * --repair-rate nor throttled to one value per frame: these bytes are the
 * client's own put, moved off its wire.  A pass's copy a member refuses
 * busy goes to that member's lane too (repair_heal_busy; a drain's is its
 * hand-over's failure, tried again), and a pass is cut short when the
 * member list changes under it ("A pass cut short").
 *
 * Threads: kvtd-repair (the passes) and its workers (a pass's members),
 * the forward lanes' (a member's forwards each, while any wait and
 * REPAIR_LANE_IDLE_MS after, on one connection: repair_lane_main),
 * kvtd-poll (a static pod's poll: repair_static_main) and its askers (a
 * member's question each: repair_ask), loops (note/forget/touch), any
 * (stats).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "kvtierd.h"
#include "peer.h"
#include "repair.h"
#include "placement.h"
#include "tlsio.h"
#include "tlsmem.h"

#include <openssl/crypto.h>

#define REPAIR_GRACE_MS 10000u
#define REPAIR_RATE (128ull << 20)
#define REPAIR_TICK_MS 100u
#define REPAIR_RETRY_MS 1000u
#define REPAIR_DRAIN_BUDGET_DIV 4u /* --drain-budget default: a quarter of the DRAM tier */
/* a drain with --exit that left blocks behind: how long it still
 * answers once done (5 of kvtier drain's looks, 200 ms apart) */
#define REPAIR_DRAIN_SAY_MS 1000u
#define REPAIR_POLL_MS 1000u /* a static pod: how often the members are asked if they left */

/* How long a delete is remembered: a repair copy of the key arriving
 * within it is refused.  A copy is in flight for one put (seconds at
 * worst: the peer's deadline is PEER_TIMEOUT_MS), so a minute is ample. */
#define REPAIR_TOMB_NS (60ull * 1000000000ull)
/* Tests shorten it (test_hostile tomb_expiry waits for one to expire)
 * with KVTD_TEST_TOMB_MS in kvtierd's environment, as KVTD_TEST_TSTAT_MAX
 * sizes the tenant table: rp->tomb_ns, used wherever the minute is. */

#define REPAIR_CLEARS 64 /* namespaces whose CLEAR is remembered one by one */
/* ... of them one tenant's at most (with --tenants): past it, its clears
 * refuse all its repair copies for a minute, so that one tenant's clears
 * of 64 namespaces do not turn another's clear of one into a refusal of
 * all of that one's copies ("A tenant's share" below) */
#define REPAIR_CLEARS_TENANT (REPAIR_CLEARS / 4)

/* Clients are being served until this long after the last frame of theirs
 * arrived: the repair keeps to --repair-rate meanwhile. */
#define REPAIR_BUSY_NS (200ull * 1000000ull)

struct rent {
	uint32_t ns;
	uint8_t state;   /* 0 free, 1 used, 2 removed, 3 tombstone (deleted at anchor ns) */
	uint8_t copies;
	bool retain;     /* a put of it carried the retain hint (PROTO_IF_RETAIN):
			  * its copies carry it too */
	uint8_t tries;   /* a lane's copy: times its member refused it busy */
	uint64_t len;    /* the value's bytes */
	uint64_t heat;   /* kvtd_now_ns() when last put or read here; a lane's
			  * copy: when it may be sent (0: at once) */
	uint64_t anchor; /* state 3: kvtd_now_ns() of the delete */
	struct kvt_key key;
	uint16_t group;  /* states 1, 3: the quota group (tenant) it counts in
			  * (rp->gcount; in the struct's tail padding) */
	uint8_t chg;     /* a lane's batch: its charge to the tenant's share
			  * (as rlane.chg; tail padding too) */
	bool heal;       /* a lane's copy a pass handed it (repair_heal_busy):
			  * paced as the pass's (tail padding too) */
};

/* What a pass over the table holds per block: its snapshot entry, the
 * members of its top and their count (charged to --max-memory). */
#define REPAIR_SNAP_BYTES (sizeof(struct rent) + PROTO_COPIES_MAX * sizeof(uint16_t) + 1)

/* A member's forward lane ("Forward lanes" below): the copies of
 * forwarded puts waiting for it (and a pass's copies it refused busy:
 * repair_heal_busy), sent by a thread of its own while any wait. */
struct rlane {
	struct kvtd_repair *rp;
	char addr[KVTD_MEMBER_ADDR_MAX + 1]; /* lock: the member (changed only idle) */
	struct rent *q;          /* lock: the copies waiting */
	uint8_t *chg;            /* lock: each one's charge to its tenant's share (gfq) */
	size_t n, cap;
	uint64_t bytes;          /* lock: their values' bytes */
	uint64_t charged;        /* lock: q's and chg's bytes, charged to --max-memory */
	int state;               /* lock: 0 idle, 1 sending or waiting for a due time
				  * (its thread), 2 done (to join) */
	pthread_cond_t cond;     /* (rp->lock) a copy pushed, or the server stopping:
				  * its thread waiting for a copy's due time */
	pthread_t th;
};

/* Lanes at most: a member list's (PLACEMENT_MEMBERS_MAX); an idle one is
 * reused for another member past it. */
#define REPAIR_LANES_MAX 256u

struct kvtd_repair {
	struct kvtd_server *srv;
	pthread_mutex_t lock;    /* the table, stop */
	pthread_mutex_t pace_lock; /* tokens .. busy_ns, while a pass's workers run */
	pthread_cond_t cond;
	struct rent *tab;
	size_t cap, used, removed;
	uint64_t tab_charged;    /* lock: tab's bytes, charged to --max-memory */
	_Atomic uint64_t untracked; /* placed blocks not noted: the table could not grow */
	size_t blocks;           /* entries in state 1 */
	bool stop;
	pthread_t thread;
	bool started;
	uint64_t grace_ns, rate;
	struct kvt_mem mem;
	char self[KVTD_MEMBER_ADDR_MAX + 1]; /* this server's address in the list */
	_Atomic uint64_t passes, checked, copied, bytes, errors, gone, pending, last_pass_ms;
	_Atomic uint64_t yields, tombs, refused;
	uint64_t clear_ns;       /* lock: the last CLEAR of everything (or, without
				  * tenants, what could not be remembered: gclear) (0: none) */
	struct {
		uint32_t ns;
		uint32_t group; /* whose: a tenant holds at most REPAIR_CLEARS_TENANT */
		uint64_t at;
	} clear_at[REPAIR_CLEARS]; /* lock: CLEARs of one namespace (at 0: free) */
	int drain_req;           /* lock: 1 drain, 2 drain then exit (taken by the thread) */
	_Atomic int drain_state; /* 0 none, 1 handing over, 2 left, 3 done */
	uint64_t idle_rate;      /* --repair-idle-rate (0: no limit) */
	/* --drain-budget: bytes of unreplicated blocks a drain hands over */
	uint64_t drain_budget;
	_Atomic uint64_t drain_skipped; /* blocks a drain left behind (over the budget) */
	/* drains that left blocks behind a member did not take (busy or out
	 * of reach through every try): counted once a drain, when known */
	_Atomic uint64_t drains_incomplete;
	/* blocks the drain under way (or the last) copied: 0 from its
	 * acceptance (kvtd_repair_drain), its hand-overs' copies alone */
	_Atomic uint64_t drain_copied;
	/* the repair thread's own: pacing */
	double tokens;
	uint64_t tok_ns, frames_seen, busy_ns;
	/* A static pod: the poll thread (repair_static_main), woken by stop
	 * and by its askers' answers (poll_cond, with lock) */
	pthread_t poll_thread;
	bool poll_started;
	pthread_mutex_t poll_lock; /* poll_cond, the askers' states */
	pthread_cond_t poll_cond;
	bool poll_cond_made;
	/* readable once stop is set: every peer connection's waits end at
	 * once (kvtd_peer_open_stop): the poll's askers, a pass's workers */
	int stop_fd;
	/* forwards waiting (lock), and their counters */
	struct rent *fq;
	size_t fq_n, fq_cap;
	uint64_t fq_charged;     /* lock: fq's bytes, charged to --max-memory */
	_Atomic uint64_t fwd_queued, fwd_copied, fwd_bytes, fwd_dropped, fwd_passes;
	_Atomic uint64_t fwd_mem_dropped; /* of fwd_dropped: the queue could not grow
					   * within --max-memory */
	/* lock: each quota group's (tenant's) entries in state 1; its
	 * tombstones made in this minute of kvtd_now_ns() (tomb_epoch) and in
	 * the one before; when what could not be remembered of its deletes or
	 * clears last refused its repair copies ("A tenant's share" below) */
	uint32_t gcount[KVT_QUOTA_GROUPS];
	uint32_t gtomb[KVT_QUOTA_GROUPS], gtomb_prev[KVT_QUOTA_GROUPS];
	uint64_t tomb_epoch;
	uint64_t tomb_ns; /* how long a delete or clear refuses copies:
			   * REPAIR_TOMB_NS, KVTD_TEST_TOMB_MS in tests */
	uint64_t gclear[KVT_QUOTA_GROUPS];
	_Atomic uint64_t tenant_capped; /* of untracked: the tenant at its share */
	uint32_t gfq[KVT_QUOTA_GROUPS]; /* lock: each group's forwards in fq */
	_Atomic uint64_t fwd_tenant_dropped; /* of fwd_dropped: the tenant's share full */
	_Atomic uint64_t copies_clamped; /* placed puts asking more than --max-copies */
	struct rlane *lanes[REPAIR_LANES_MAX]; /* lock: each member's forward lane */
	unsigned lane_n;
	unsigned lanes_ended;    /* lock: lanes whose thread ended (to join) */
	uint64_t lane_bytes; /* a lane's values at most: REPAIR_LANE_BYTES,
			      * KVTD_TEST_LANE_BYTES in tests */
	_Atomic uint64_t fwd_member_dropped; /* of fwd_dropped: a member's lane full */
	/* lanes' copies a member refused busy: put back in the lane, given up */
	_Atomic uint64_t fwd_busy_retried, fwd_busy_dropped;
	/* passes' copies a member refused busy: handed to its lane, given up
	 * (repair_heal_busy) */
	_Atomic uint64_t busy_handed, busy_dropped;
	int pass_fd;             /* lock: the running pass's cut eventfd (-1: none),
				  * written by a stop too ("A pass cut short") */
	_Atomic uint64_t cut;    /* passes cut short by a change of the member list */
	/* A lane's connection ("A lane's connection" below): how long an
	 * idle one is kept (REPAIR_LANE_IDLE_MS, KVTD_TEST_LANE_IDLE_MS in
	 * tests; 0: closed after each batch); connections the lanes opened,
	 * batches sent on one kept from an earlier batch, and connections the
	 * member refused busy (--tenant-conns, --max-conns: the batch put back
	 * in the lane as copies refused busy) */
	uint64_t lane_idle_ns;
	_Atomic uint64_t lane_connects, lane_reused, lane_conn_busy;
	/* pass workers' connections a member refused busy (its
	 * --tenant-conns, --max-conns): not counted in errors, the pass run
	 * again ("a pass's, refused busy": repair_peer) */
	_Atomic uint64_t pass_conn_busy;
	/* lanes' batches sent again on a new connection (their kept one
	 * found closed before any answer), kept connections closed for want
	 * of --max-memory ("A lane's connection") */
	_Atomic uint64_t lane_resent, lane_keep_refused;
};

/*
 * A tenant's share.  The table and its no-room fallbacks are the pod's,
 * whoever's blocks they hold: one tenant's placed puts (~100 bytes an
 * entry, kept until a pass) or DELETEs of keys it never stored (a
 * tombstone each, for a minute) grew the table to the budget -- a third
 * to two thirds of it, the rest of the doubling -- after which no other
 * tenant's placed block was tracked (not healed if its member dies); and
 * a delete with no room, any tenant's CLEAR of its own scope, or a 65th
 * namespace's CLEAR refused every tenant's repair copies for a minute.
 * Now a quota group's entries (its tenant's, as kvtd_tenant_group names
 * it; group 0, a server without tenants, is one trust domain) cost at
 * most a quarter of --max-memory at the table's lowest load after a
 * doubling (3/8: an entry's slot and the slack behind it, 8/3 of a
 * slot): past that its blocks are not tracked (repair.untracked, of it
 * repair.tenant_capped), and what cannot be remembered of its deletes and
 * clears refuses that tenant's repair copies for a minute (gclear), not
 * everyone's; of the 64 slots that remember a namespace's CLEAR, a tenant
 * holds 16 at most (REPAIR_CLEARS_TENANT) (doc/security.md, test_hostile
 * `repair_share`).
 */
static uint64_t repair_group_max(const struct kvtd_repair *rp)
{
	return rp->srv->cfg.max_memory * 3 / (32 * sizeof(struct rent));
}

/* A tombstone counts in its group while it is of this minute or the one
 * before (it lasts a minute: expired ones are dropped only by a doubling's
 * rebuild, and a tenant whose deletes reached its share would otherwise
 * stay there); bring the minutes up to now. */
static void tomb_epoch_now(struct kvtd_repair *rp, uint64_t now)
{
	uint64_t ep = now / rp->tomb_ns;

	if (ep == rp->tomb_epoch)
		return;
	if (ep == rp->tomb_epoch + 1)
		memcpy(rp->gtomb_prev, rp->gtomb, sizeof(rp->gtomb));
	else
		memset(rp->gtomb_prev, 0, sizeof(rp->gtomb_prev));
	memset(rp->gtomb, 0, sizeof(rp->gtomb));
	rp->tomb_epoch = ep;
}

/* e (state 1 or 3) no longer counts in its group. */
static void rent_uncount(struct kvtd_repair *rp, const struct rent *e)
{
	uint64_t ep;

	if (e->state == 1) {
		rp->gcount[e->group]--;
	} else if (e->state == 3) {
		tomb_epoch_now(rp, kvtd_now_ns());
		ep = e->anchor / rp->tomb_ns;
		if (ep == rp->tomb_epoch)
			rp->gtomb[e->group]--;
		else if (ep + 1 == rp->tomb_epoch)
			rp->gtomb_prev[e->group]--;
	}
}

/* May group have one more entry? */
static bool rent_group_room(struct kvtd_repair *rp, uint32_t group)
{
	if (group == 0)
		return true;
	tomb_epoch_now(rp, kvtd_now_ns());
	return (uint64_t)rp->gcount[group] + rp->gtomb[group] + rp->gtomb_prev[group] <
	       repair_group_max(rp);
}

/* Forwards queued at most: a pod that cannot keep up drops the rest
 * (repair.forward_dropped; a later pass heals them when the list changes).
 * The queue's array (~100 bytes an entry, 6 MiB full) is charged to
 * --max-memory: clients' puts make it grow, and it held that much outside
 * the budget; past the budget it does not grow and the forward is dropped
 * (repair.forward_mem_dropped too). */
#define REPAIR_FWD_MAX 65536u
/* A tenant's forwards queued at most (with --tenants: a quarter, so that
 * one tenant's burst while a pass waits on a slow member cannot drop
 * every other tenant's; repair.forward_tenant_dropped), counted in the
 * copies they ask ("Copies" below). */
#define REPAIR_FWD_TENANT_MAX (REPAIR_FWD_MAX / 4)

/*
 * Copies.  A placed put's `copies` is the client's word: the members of
 * its top the block is kept on, each sent a copy now (a FORWARD put) and
 * again by every pass that finds it missing.  An engine sends its
 * namespace's R (the first group: max(R, remote.hot_replicas)), up to
 * PROTO_COPIES_MAX; a client asking 8 of every put made this server send
 * 7 copies of each, unpaced, in a pod of 8.  So:
 *   1. the operator says the most a client may ask (--max-copies, default
 *      8: every R an engine may register); a put asking more is kept,
 *      forwarded and healed at that (repair.copies_clamped) -- stored, as
 *      the client's other copies would be, rather than refused: its
 *      bytes are already here, and a reader finds the block on the
 *      members it went to (the engine's replica retries);
 *   2. a tenant's share of the forward queue counts the copies its
 *      blocks ask, not the blocks: copies - 1 each (a pod smaller than
 *      that sends fewer; the charge is the word, not the pod), so that
 *      asking 8 queues a seventh as many blocks as asking 2.
 */

static struct rent *rent_find(struct kvtd_repair *rp, uint32_t ns, const struct kvt_key *k,
			      bool for_insert)
{
	size_t mask = rp->cap - 1;
	size_t i = kvtd_key_hash(rp->srv->key_secret, ns, k->bytes, k->len) & mask;
	struct rent *free_slot = NULL;
	for (size_t n = 0; n < rp->cap; n++, i = (i + 1) & mask) {
		struct rent *e = &rp->tab[i];
		if (e->state == 0)
			return for_insert ? (free_slot ? free_slot : e) : NULL;
		if (e->state == 2) {
			if (!free_slot)
				free_slot = e;
			continue;
		}
		if (e->ns == ns && e->key.len == k->len && !memcmp(e->key.bytes, k->bytes, k->len))
			return e;
	}
	return for_insert ? free_slot : NULL;
}

/* Double (or rebuild) the table: false without memory (or budget). */
static bool rent_grow(struct kvtd_repair *rp)
{
	size_t ncap = rp->used * 2 > rp->cap ? rp->cap * 2 : rp->cap;
	uint64_t bytes = (uint64_t)ncap * sizeof(struct rent);
	struct rent *old = rp->tab, *nt;
	size_t ocap = rp->cap;
	if (!kvtd_mem_charge(rp->srv, bytes, false))
		return false;
	nt = calloc(ncap, sizeof(*nt));
	if (!nt) {
		kvtd_mem_uncharge(rp->srv, bytes);
		return false;
	}
	kvtd_mem_uncharge(rp->srv, rp->tab_charged);
	rp->tab_charged = bytes;
	rp->tab = nt;
	rp->cap = ncap;
	rp->used = rp->removed = 0;
	uint64_t now = kvtd_now_ns();
	for (size_t i = 0; i < ocap; i++)
		if (old[i].state == 1 ||
		    (old[i].state == 3 && now - old[i].anchor < rp->tomb_ns)) {
			*rent_find(rp, old[i].ns, &old[i].key, true) = old[i];
			rp->used++;
		} else if (old[i].state == 3) {
			rent_uncount(rp, &old[i]); /* expired: dropped */
		}
	free(old);
	return true;
}

void kvtd_repair_touch(struct kvtd_server *srv, uint32_t ns, const struct kvt_key *key)
{
	struct kvtd_repair *rp = srv->repair;
	struct rent *e;
	if (!rp)
		return;
	pthread_mutex_lock(&rp->lock);
	e = rent_find(rp, ns, key, false);
	if (e && e->state == 1)
		e->heat = kvtd_now_ns();
	pthread_mutex_unlock(&rp->lock);
}

void kvtd_repair_note(struct kvtd_server *srv, uint32_t ns, uint32_t group,
		      const struct kvt_key *key, uint64_t anchor, uint32_t copies, uint64_t len,
		      bool forward, bool retain)
{
	struct kvtd_repair *rp = srv->repair;
	struct rent *e, spare = { 0 };
	bool known;
	uint32_t max = srv->cfg.max_copies ? srv->cfg.max_copies : PROTO_COPIES_MAX;
	if (!rp || copies < 1)
		return;
	if (copies > max) { /* 1. ("Copies" above) */
		copies = max;
		atomic_fetch_add(&rp->copies_clamped, 1);
	}
	if (group >= KVT_QUOTA_GROUPS)
		group = 0;
	pthread_mutex_lock(&rp->lock);
	e = rent_find(rp, ns, key, false);
	known = e && (e->state == 1 || e->state == 3) && e->group == group;
	if (!known && !rent_group_room(rp, group)) {
		/* Not tracked: the tenant's entries hold its share. */
		atomic_fetch_add(&rp->untracked, 1);
		atomic_fetch_add(&rp->tenant_capped, 1);
		e = &spare;
	} else if ((rp->used + rp->removed + 1) * 4 > rp->cap * 3 && !rent_grow(rp) &&
		   !((e = rent_find(rp, ns, key, false)) && e->state == 1)) {
		/* Not tracked (the table is at the budget); a forward still is. */
		atomic_fetch_add(&rp->untracked, 1);
		e = &spare;
	} else {
		e = rent_find(rp, ns, key, true);
		rent_uncount(rp, e);
		e->group = (uint16_t)group;
		rp->gcount[group]++;
		if (e->state == 0 || e->state == 2) {
			if (e->state == 2)
				rp->removed--;
			rp->used++;
		}
		if (e->state != 1) {
			rp->blocks++;
			e->retain = false;
		}
	}
	/* once hinted, a block's copies keep the hint: a later put without
	 * it (another engine, one not hinting) says nothing against it */
	e->retain = e->retain || retain;
	e->state = 1;
	e->ns = ns;
	e->key = *key;
	e->anchor = anchor;
	e->copies = (uint8_t)copies;
	e->len = len;
	e->heat = kvtd_now_ns();
	if (forward && copies > 1 && group != 0 &&
	    rp->gfq[group] + (copies - 1) > REPAIR_FWD_TENANT_MAX) {
		/* the tenant's forwards hold its share of the queue, counted
		 * in copies (2. in "Copies" above) */
		atomic_fetch_add(&rp->fwd_dropped, 1);
		atomic_fetch_add(&rp->fwd_tenant_dropped, 1);
	} else if (forward && copies > 1) {
		if (rp->fq_n == rp->fq_cap && rp->fq_cap < REPAIR_FWD_MAX) {
			size_t nc = rp->fq_cap ? rp->fq_cap * 2 : 256;
			uint64_t more = (uint64_t)(nc - rp->fq_cap) * sizeof(*rp->fq);
			struct rent *nq = NULL;
			if (kvtd_mem_charge(srv, more, false)) {
				nq = realloc(rp->fq, nc * sizeof(*nq));
				if (!nq)
					kvtd_mem_uncharge(srv, more);
			} else {
				atomic_fetch_add(&rp->fwd_mem_dropped, 1);
			}
			if (nq) {
				rp->fq = nq;
				rp->fq_cap = nc;
				rp->fq_charged += more;
			}
		}
		if (rp->fq_n < rp->fq_cap) {
			e->group = (uint16_t)group; /* the spare's too */
			rp->fq[rp->fq_n++] = *e;
			rp->gfq[group] += copies - 1;
			atomic_fetch_add(&rp->fwd_queued, 1);
			pthread_cond_signal(&rp->cond);
		} else {
			atomic_fetch_add(&rp->fwd_dropped, 1);
		}
	}
	pthread_mutex_unlock(&rp->lock);
}

/* The block is gone here (a repair pass found it missing). */
static void repair_drop(struct kvtd_repair *rp, uint32_t ns, const struct kvt_key *key)
{
	struct rent *e;
	pthread_mutex_lock(&rp->lock);
	e = rent_find(rp, ns, key, false);
	if (e && e->state == 1) {
		rent_uncount(rp, e);
		e->state = 2;
		rp->used--;
		rp->removed++;
		rp->blocks--;
	}
	pthread_mutex_unlock(&rp->lock);
}

/* No room to remember what a tenant deleted or cleared: refuse its repair
 * copies for a while (every tenant's without tenants: group 0).  Locked. */
static void repair_group_cleared(struct kvtd_repair *rp, uint32_t group)
{
	if (group == 0)
		rp->clear_ns = kvtd_now_ns();
	else
		rp->gclear[group] = kvtd_now_ns();
}

void kvtd_repair_forget(struct kvtd_server *srv, uint32_t ns, uint32_t group,
			const struct kvt_key *key)
{
	struct kvtd_repair *rp = srv->repair;
	struct rent *e;
	uint64_t now;
	if (!rp)
		return;
	if (group >= KVT_QUOTA_GROUPS)
		group = 0;
	pthread_mutex_lock(&rp->lock);
	e = rent_find(rp, ns, key, false);
	if (!(e && (e->state == 1 || e->state == 3) && e->group == group) &&
	    !rent_group_room(rp, group)) {
		/* The tenant's entries hold its share: refuse its repair
		 * copies for a while, not everyone's. */
		repair_group_cleared(rp, group);
		pthread_mutex_unlock(&rp->lock);
		return;
	}
	if ((rp->used + rp->removed + 1) * 4 > rp->cap * 3 && !rent_grow(rp)) {
		/* No room to remember it: refuse the tenant's repair copies
		 * for a while. */
		repair_group_cleared(rp, group);
		pthread_mutex_unlock(&rp->lock);
		return;
	}
	e = rent_find(rp, ns, key, true);
	rent_uncount(rp, e);
	now = kvtd_now_ns();
	tomb_epoch_now(rp, now);
	e->group = (uint16_t)group;
	rp->gtomb[group]++; /* anchored now, below */
	if (e->state == 0 || e->state == 2) {
		if (e->state == 2)
			rp->removed--;
		rp->used++;
	}
	if (e->state == 1)
		rp->blocks--;
	e->state = 3;
	e->ns = ns;
	e->key = *key;
	e->anchor = now;
	e->copies = 0;
	atomic_fetch_add(&rp->tombs, 1);
	pthread_mutex_unlock(&rp->lock);
}

void kvtd_repair_cleared(struct kvtd_server *srv, uint32_t ns, uint32_t group)
{
	struct kvtd_repair *rp = srv->repair;
	uint64_t now = kvtd_now_ns();
	unsigned slot = REPAIR_CLEARS, held = 0;
	bool same = false;
	if (!rp)
		return;
	if (group >= KVT_QUOTA_GROUPS)
		group = 0;
	pthread_mutex_lock(&rp->lock);
	for (unsigned i = 0; ns != KVT_NS_ALL && i < REPAIR_CLEARS; i++) {
		bool stale = now - rp->clear_at[i].at >= rp->tomb_ns;
		if (rp->clear_at[i].at && rp->clear_at[i].ns == ns && !stale) {
			slot = i;
			same = true;
			break;
		}
		if (rp->clear_at[i].at && !stale && rp->clear_at[i].group == group)
			held++;
		if ((!rp->clear_at[i].at || stale) && slot == REPAIR_CLEARS)
			slot = i;
	}
	if (!same && group != 0 && held >= REPAIR_CLEARS_TENANT)
		slot = REPAIR_CLEARS; /* the tenant's share of the slots */
	if (slot < REPAIR_CLEARS) {
		rp->clear_at[slot].ns = ns;
		rp->clear_at[slot].group = group;
		rp->clear_at[slot].at = now;
	} else {
		/* a tenant's namespaces, or no room: refuse its copies (all
		 * copies: a clear of everything, or without tenants) */
		repair_group_cleared(rp, group);
	}
	pthread_mutex_unlock(&rp->lock);
}

bool kvtd_repair_refused(struct kvtd_server *srv, uint32_t ns, uint32_t group,
			 const struct kvt_key *key)
{
	struct kvtd_repair *rp = srv->repair;
	uint64_t now = kvtd_now_ns();
	struct rent *e;
	bool refused;
	if (!rp)
		return false;
	pthread_mutex_lock(&rp->lock);
	refused = rp->clear_ns && now - rp->clear_ns < rp->tomb_ns;
	if (!refused && group > 0 && group < KVT_QUOTA_GROUPS)
		refused = rp->gclear[group] && now - rp->gclear[group] < rp->tomb_ns;
	for (unsigned i = 0; !refused && i < REPAIR_CLEARS; i++)
		refused = rp->clear_at[i].at && rp->clear_at[i].ns == ns &&
			  now - rp->clear_at[i].at < rp->tomb_ns;
	if (!refused) {
		e = rent_find(rp, ns, key, false);
		refused = e && e->state == 3 && now - e->anchor < rp->tomb_ns;
	}
	pthread_mutex_unlock(&rp->lock);
	if (refused)
		atomic_fetch_add(&rp->refused, 1);
	return refused;
}

/* ------------------------------------------------------------------------
 * A pass
 *
 * Pipelined (doc/cluster.md "Rate"): for each other member, the blocks it
 * should hold are asked about REPAIR_EXISTS_BATCH keys to an EXISTS
 * frame, and those it lacks are sent in PUT frames of about
 * REPAIR_FRAME_BYTES, up to REPAIR_WINDOW frames unanswered.  Values go
 * from this store's DRAM to the socket without a copy (quiet pinned gets:
 * the pass changes no block's recency or tier; the pin is released as
 * soon as the bytes are in the socket), with the parts and CRCs they were
 * stored with (kvt_pin_parts), so the receiver verifies them end to end.
 */
#define REPAIR_EXISTS_BATCH 1024u
#define REPAIR_FRAME_BYTES (1u << 20)
#define REPAIR_FRAME_ITEMS 256u
#define REPAIR_WINDOW 2u
#define REPAIR_WORKERS 8u /* members copied to at once */
#define REPAIR_PASS_BUSY_MAX 4u /* a pass's connections a member refuses busy: then given up */

struct rflight {
	uint64_t tag;
	uint32_t n;
	uint64_t len[REPAIR_FRAME_ITEMS]; /* each item's value bytes */
	uint32_t at[REPAIR_FRAME_ITEMS];  /* a forward lane's: each item's copy in ps->batch */
	uint8_t got[REPAIR_FRAME_ITEMS];  /* each item's answer taken (1): another ignored */
};

struct rpeer {
	struct kvtd_peer p;
	bool open;
	bool failed;          /* gave up on it for this pass */
	uint32_t ns_id[16];   /* namespace ids whose digest there is known */
	uint8_t digest[16][PROTO_DIGEST_LEN];
	unsigned ns_n;
	struct rflight fl[REPAIR_WINDOW]; /* PUT frames unanswered */
	unsigned fl_n;
	uint64_t ex_tag;      /* the EXISTS frame waited for (0: none) */
	uint8_t *ex_have;     /* its answers by index: 1 held (or not to send) */
	bool conn_busy;       /* its connection refused KVT_EBUSY (the member's
			       * --tenant-conns or --max-conns) */
	/* The tenant whose connection the member refused busy in this
	 * batch or pass (empty: none).  A lane's: that tenant's copies go
	 * back in the lane; a pass's: left to the pass run again.  Either
	 * goes on with the other tenants' (before
	 * review45b's note, every later copy was marked busy, and another
	 * tenant's were dropped after 3 tries for the first one's full
	 * --tenant-conns). */
	char busy_tenant[PROTO_TENANT_MAX + 1];
	unsigned busy_n;      /* a pass's: its connections refused busy */
	bool copy_busy_said;  /* a drain's: a copy refused busy, logged */
	/* A lane's kept connection ("A lane's connection" below): reused for
	 * this batch (reuse_in: its p.in_bytes then), and found closed before
	 * a byte of an answer came in this batch (stale: the batch is sent
	 * again on a new connection, once) */
	bool reused, stale;
	uint64_t reuse_in;
};

struct rpass {
	struct kvtd_repair *rp;
	struct kvtd_member *m;
	unsigned n, self;
	struct placement *pl;
	struct rpeer *peers;
	struct kvt_queue *q;
	bool retry;
	bool fwd;             /* a forward lane's: unpaced, counted apart */
	bool drain;           /* a drain's hand-over: its copies in drain_copied too */
	struct rent *batch;   /* a forward lane's: its copies ... (a pass's: its
			       * snapshot, whose copies a member refuses busy go
			       * to the member's lane: repair_heal_busy) */
	uint8_t *busy;        /* ... each one's 1 if the member refused it busy
			       * (NULL: none kept) */
	int stop_fd;          /* its peers' waits end once it is readable: a
			       * lane's rp->stop_fd, a pass's own (its cut) */
	_Atomic bool *cut;    /* a pass's: cut short (NULL: never) */
};

static bool repair_stopping(struct kvtd_repair *rp)
{
	bool s;
	pthread_mutex_lock(&rp->lock);
	s = rp->stop;
	pthread_mutex_unlock(&rp->lock);
	return s || atomic_load(&rp->srv->stopping);
}

/* Must ps end now: the server stops, or its pass is cut short? */
static bool repair_cut(const struct rpass *ps)
{
	return repair_stopping(ps->rp) || (ps->cut && atomic_load(ps->cut));
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Frames from clients (not from the pod's peers: other members' repair
 * copies and admin polls) this server received so far. */
static uint64_t repair_client_frames(struct kvtd_server *srv)
{
	uint64_t all = atomic_load_explicit(&srv->ctr.frames_in, memory_order_relaxed);
	uint64_t peer = atomic_load_explicit(&srv->ctr.peer_frames_in, memory_order_relaxed);
	return all > peer ? all - peer : 0;
}

/* Is a client being served?  True for REPAIR_BUSY_NS after the last
 * client frame seen (the repair thread's view; it looks at least every
 * REPAIR_TICK_MS and before every frame it sends). */
static bool repair_busy(struct kvtd_repair *rp, uint64_t now, bool yield)
{
	uint64_t f = repair_client_frames(rp->srv);
	if (f != rp->frames_seen) {
		rp->busy_ns = now;
		/* many since the last look: let them pass */
		if (yield && f > rp->frames_seen + 16) {
			atomic_fetch_add(&rp->yields, 1);
			sleep_ms(2);
		}
		rp->frames_seen = repair_client_frames(rp->srv);
	}
	return rp->busy_ns && now - rp->busy_ns < REPAIR_BUSY_NS;
}

/* The token bucket before len bytes go out: --repair-rate while clients
 * are served, --repair-idle-rate (default: no limit) while none are;
 * burst a tenth of a second.  False if ps must end first (the server
 * stops, its pass is cut short: nothing is sent then).  The wait is on
 * ps->stop_fd, which the stop and the cut write: it ends at once.  It
 * slept in steps of 10 ms and looked at the stop alone, so a pass cut
 * short while a worker waited for the rate went on until the worker's
 * tokens came -- a value of 1 MiB at --repair-rate 1 MiB/s held the cut
 * pass, and the new list's healing behind it, for a second, at 1 KiB/s
 * for 17 minutes (test_peer_attack `pace_cut`). */
static bool repair_pace(struct rpass *ps, uint64_t len)
{
	struct kvtd_repair *rp = ps->rp;
	bool go = true;

	/* one bucket for the pass's workers and the copies they handed the
	 * lanes (repair_heal_busy) */
	pthread_mutex_lock(&rp->pace_lock);
	for (;;) {
		uint64_t now, rate;
		double burst;
		if (repair_cut(ps)) { /* a lane's: the stop alone (joined by it) */
			go = false;
			break;
		}
		now = kvtd_now_ns();
		rate = repair_busy(rp, now, true) ? rp->rate : rp->idle_rate;
		if (rate == 0) { /* no limit */
			rp->tok_ns = now;
			break;
		}
		burst = (double)rate / 10 > (double)len ? (double)rate / 10 : (double)len;
		rp->tokens += (double)(now - rp->tok_ns) * (double)rate / 1e9;
		rp->tok_ns = now;
		if (rp->tokens > burst)
			rp->tokens = burst;
		if (rp->tokens >= (double)len) {
			rp->tokens -= (double)len;
			break;
		}
		{
			double ms = ((double)len - rp->tokens) * 1000.0 / (double)rate;
			struct pollfd pf = { .fd = ps->stop_fd, .events = POLLIN };
			/* look at clients again soon */
			int wait = ms > 10 ? 10 : 1 + (int)ms;
			/* A lane waits without the lock: the repair thread
			 * takes it between passes (repair_main) and a pass's
			 * workers before each frame (repair_busy_now), and a
			 * lane's wait ends at the stop alone -- a lane waiting
			 * for a pass's 1 MiB copy at 1 KiB/s held the repair
			 * thread, every forward and the next pass (and a cut
			 * pass's workers) ~1,000 s (test_peer_attack
			 * `lane_pace`).  A pass's worker keeps it: its sends
			 * come first, in order (`heal_pace`). */
			if (ps->fwd)
				pthread_mutex_unlock(&rp->pace_lock);
			if (ps->stop_fd < 0 || poll(&pf, 1, wait) < 0)
				sleep_ms((unsigned)wait);
			if (ps->fwd)
				pthread_mutex_lock(&rp->pace_lock);
		}
	}
	pthread_mutex_unlock(&rp->pace_lock);
	return go;
}

/* While clients are served, a pass sends one value per frame and waits
 * for its answer before the next: a receiving member's loop then never
 * holds a client's request behind megabytes of repair copies (the
 * 4-frame window of 4 MiB frames doubled the client GET p99 at the
 * default rate).  Idle, it pipelines. */
static bool repair_busy_now(struct kvtd_repair *rp)
{
	bool busy;
	pthread_mutex_lock(&rp->pace_lock);
	busy = repair_busy(rp, kvtd_now_ns(), false);
	pthread_mutex_unlock(&rp->pace_lock);
	return busy;
}

static void repair_conn_lost(struct rpass *ps, struct rpeer *r, int rc)
{
	/* A lane's kept connection the member closed between the reuse
	 * check and this batch (its --idle-timeout, a restart): the send
	 * failed (EPIPE), or the socket was reset or at EOF, before a byte
	 * of any answer came and with no PUT in flight -- nothing of the
	 * batch was taken there, so it is sent again on a new connection
	 * (repair_lane_main), not counted as lost */
	if (ps->fwd && r->reused && r->p.in_bytes == r->reuse_in && !r->fl_n &&
	    (rc == -EPIPE || rc == -ECONNRESET)) {
		kvtd_log(KVTD_INFO, "repair: a lane's kept connection was closed; again",
			 "member=%s error=%d", r->p.addr, rc);
		r->stale = true;
		rc = -ECANCELED; /* (counted by the lane: repair.lane_resent) */
	}
	/* -ECANCELED: the server stops, or the pass is cut (repair.cut says
	 * so; the next pass redoes its work) -- no member failed */
	if (rc != -ECANCELED) {
		kvtd_log(KVTD_WARN, "repair: lost a member", "member=%s error=%d", r->p.addr,
			 rc);
		atomic_fetch_add(&ps->rp->errors, 1 + r->fl_n);
	}
	kvtd_peer_close(&r->p);
	r->open = false;
	r->failed = true;
	r->fl_n = 0;
	r->ex_tag = 0;
	ps->retry = true;
}

static void repair_heal_busy(struct rpass *ps, const char *addr, const struct rent *e);

/* The answer for item i of PUT frame fl sent to r: status. */
static void repair_item(struct rpass *ps, struct rpeer *r, const struct rflight *fl, uint32_t i,
			int status)
{
	if (status == KVT_OK) {
		atomic_fetch_add(ps->fwd ? &ps->rp->fwd_copied : &ps->rp->copied, 1);
		if (ps->drain)
			atomic_fetch_add(&ps->rp->drain_copied, 1);
		atomic_fetch_add(ps->fwd ? &ps->rp->fwd_bytes : &ps->rp->bytes, fl->len[i]);
	} else if (status == KVT_EBUSY && ps->busy) {
		/* its reservation full: sent again (repair_lane_busy) */
		ps->busy[fl->at[i]] = 1;
	} else if (status == KVT_EBUSY && ps->drain) {
		/* a drain's: its hand-over tried again, then counted as
		 * blocks left behind (repair_drain).  Handed to the lane, the
		 * drain said "complete" with the copy still queued, and with
		 * --exit the queue went with the process (review48a) */
		ps->retry = true;
		if (!r->copy_busy_said)
			kvtd_log(KVTD_INFO, "repair: a member refused a copy of the drain busy",
				 "member=%s", ps->m[r - ps->peers].addr);
		r->copy_busy_said = true;
	} else if (status == KVT_EBUSY && ps->batch && !ps->fwd) {
		/* a pass's: sent again by the member's lane */
		repair_heal_busy(ps, ps->m[r - ps->peers].addr, &ps->batch[fl->at[i]]);
	} else if (status != KVT_EXISTS && status != -ECANCELED) {
		atomic_fetch_add(&ps->rp->errors, 1);
	}
}

/* Read one answer from r and account for it.  0 or < 0 (the connection
 * is lost: closed here).  An ERROR frame ends the connection (the member
 * closes after it: doc/protocol.md, level 1 -- kvtierd's KVT_EBUSY ones
 * come before AUTH is done: --max-conns, the unauthenticated limits); an
 * answer failed as a whole (level 2: its op, a negative status, no items)
 * does not: a PUT's KVT_EBUSY is each of its items' (sent again), another
 * status each item's error.  Such a PUT answer was taken for one with no
 * items: its copies lost, uncounted (test_peer_attack `frame_busy`). */
static int repair_recv(struct rpass *ps, struct rpeer *r)
{
	struct proto_frame *f = &r->p.resp;
	struct proto_iter iter;
	struct proto_item it;
	int rc = kvtd_peer_next(&r->p);
	if (rc == 0 && f->op == PROTO_OP_ERROR)
		rc = f->status < 0 ? f->status : PROTO_EMALFORMED;
	if (rc < 0) {
		repair_conn_lost(ps, r, rc);
		return rc;
	}
	if (r->ex_tag && f->tag == r->ex_tag) {
		if (f->status < 0) { /* nothing sent of the batch: a pass again */
			atomic_fetch_add(&ps->rp->errors, 1);
			ps->retry = true;
		}
		proto_iter_init(&iter, f, NULL, NULL, 0);
		while (proto_iter_next(&iter, &it) == 1 && it.index < REPAIR_EXISTS_BATCH) {
			if (it.status != KVT_OK && it.status != KVT_MISS)
				atomic_fetch_add(&ps->rp->errors, 1);
			r->ex_have[it.index] = it.status != KVT_MISS;
		}
		if (!(f->flags & PROTO_F_MORE))
			r->ex_tag = 0;
		return 0;
	}
	for (unsigned k = 0; k < r->fl_n; k++) {
		struct rflight *fl = &r->fl[k];
		if (fl->tag != f->tag)
			continue;
		/* An item's first answer only: a member answering one item
		 * again (frames of MORE, then the frame failed as a whole)
		 * had it counted again, and, refused busy, handed to its lane
		 * again -- a copy of the block queued and sent to it each time
		 * (test_peer_attack `busy_dup`: 31 for one refusal). */
		if (f->status < 0) {
			for (uint32_t i = 0; i < fl->n; i++)
				if (!fl->got[i])
					repair_item(ps, r, fl, i, f->status);
		} else {
			proto_iter_init(&iter, f, NULL, NULL, 0);
			while (proto_iter_next(&iter, &it) == 1 && it.index < fl->n)
				if (!fl->got[it.index]) {
					fl->got[it.index] = 1;
					repair_item(ps, r, fl, it.index, it.status);
				}
		}
		if (!(f->flags & PROTO_F_MORE) || f->status < 0)
			r->fl[k] = r->fl[--r->fl_n];
		break;
	}
	return 0;
}

/* Wait until at most `keep` PUT frames are unanswered at r.  0 or < 0. */
static int repair_settle(struct rpass *ps, struct rpeer *r, unsigned keep)
{
	int rc = 0;
	while (rc == 0 && r->open && r->fl_n > keep)
		rc = repair_recv(ps, r);
	return r->open ? rc : -ECONNRESET;
}

/* The peer of member i logged in as tenant, and the digest of namespace
 * ns there; NULL if it cannot be had (counted). */
static struct rpeer *repair_peer(struct rpass *ps, unsigned i, uint32_t ns, const char *canon,
				 size_t canon_len, const char *tenant, const uint8_t **digest)
{
	struct rpeer *r = &ps->peers[i];
	int rc;
	if (r->failed)
		return NULL;
	if (r->busy_tenant[0] && strcmp(r->busy_tenant, tenant) == 0) {
		r->conn_busy = true;
		return NULL;
	}
	if (r->open && strcmp(r->p.tenant, tenant) != 0) {
		if (repair_settle(ps, r, 0) < 0)
			return NULL;
		kvtd_peer_close(&r->p);
		r->open = false;
		r->ns_n = 0;
	}
	if (!r->open) {
		/* Logged in as the tenant, with its secret from our own tenants
		 * file (the pod's members share it). */
		uint8_t secret[PROTO_SECRET_MAX];
		uint32_t secret_len = 0;
		if (kvtd_auth_enabled() &&
		    kvtd_auth_peer_secret(tenant, strlen(tenant), secret, &secret_len) < 0) {
			atomic_fetch_add(&ps->rp->errors, 1);
			return NULL;
		}
		rc = kvtd_peer_open_stop(&r->p, ps->m[i].addr, NULL, tenant, secret, secret_len,
					 ps->rp->srv->cfg.peer_connect_ms,
					 ps->rp->srv->tls_peer_ctx, ps->stop_fd);
		OPENSSL_cleanse(secret, sizeof(secret));
		if (rc == KVT_EBUSY && ps->fwd && ps->busy) {
			/* a lane's, refused busy (the tenant's --tenant-conns
			 * there, its --max-conns): the batch's copies not sent
			 * go back in the lane as copies refused busy
			 * (repair_member, repair_lane_busy) */
			kvtd_log(KVTD_INFO, "repair: a member refused a lane's connection busy",
				 "member=%s tenant=%s", ps->m[i].addr, tenant);
			atomic_fetch_add(&ps->rp->lane_conn_busy, 1);
			r->conn_busy = true;
			snprintf(r->busy_tenant, sizeof(r->busy_tenant), "%s", tenant);
			return NULL;
		}
		if (rc == KVT_EBUSY && !ps->fwd) {
			/* A pass's, refused busy: a live member saying wait,
			 * not one out of reach.  Nothing more of that
			 * tenant's is sent to it in this pass and the pass is
			 * run again (its work is not done), but no error is
			 * counted and nothing says it cannot be reached
			 * (repair.pass_conn_busy; it was "cannot reach a
			 * member" and repair.errors: test_peer_attack
			 * `pass_busy`).  The other tenants' blocks go on
			 * (busy_tenant, as a lane's): giving the member up
			 * let one tenant holding its --tenant-conns there
			 * keep every other tenant's copies from it, pass
			 * after pass (`pass_busy_tenant`, review46a). */
			kvtd_log(KVTD_INFO, "repair: a member refused a pass's connection busy",
				 "member=%s tenant=%s", ps->m[i].addr, tenant);
			atomic_fetch_add(&ps->rp->pass_conn_busy, 1);
			snprintf(r->busy_tenant, sizeof(r->busy_tenant), "%s", tenant);
			ps->retry = true;
			/* (its --max-conns full refuses every tenant: the
			 * member given up after a few, not a connect a
			 * namespace) */
			if (++r->busy_n >= REPAIR_PASS_BUSY_MAX)
				r->failed = true;
			return NULL;
		}
		if (rc < 0) {
			if (rc != -ECANCELED) /* else the server stops */
				kvtd_log(KVTD_WARN, "repair: cannot reach a member",
					 "member=%s error=%d", ps->m[i].addr, rc);
			r->failed = true;
			ps->retry = true;
			atomic_fetch_add(&ps->rp->errors, 1);
			return NULL;
		}
		r->open = true;
		r->reused = false; /* a new one */
		if (ps->fwd)
			atomic_fetch_add(&ps->rp->lane_connects, 1);
	}
	for (unsigned k = 0; k < r->ns_n; k++)
		if (r->ns_id[k] == ns) {
			*digest = r->digest[k];
			return r;
		}
	if (r->ns_n == 16)
		r->ns_n = 0;
	/* kvtd_peer_register would skip the answers of PUTs in flight:
	 * take those first. */
	if (repair_settle(ps, r, 0) < 0)
		return NULL;
	rc = kvtd_peer_register(&r->p, canon, canon_len, r->digest[r->ns_n]);
	if (rc == -EPIPE || rc == -ECONNRESET) {
		/* The connection lost, not the namespace refused: closed,
		 * the member given up for this pass -- and a lane's kept
		 * connection found closed at this first question is sent
		 * again (repair_conn_lost).  It was "namespace refused",
		 * the connection left open and not failed: each later
		 * namespace of the batch tried on it, and a lane kept it
		 * (test_peer_attack `lane_stale_ns`, review46a). */
		repair_conn_lost(ps, r, rc);
		return NULL;
	}
	if (rc != KVT_OK) {
		if (rc != -ECANCELED) /* else the server stops: no refusal */
			kvtd_log(KVTD_WARN, "repair: namespace refused by a member",
				 "member=%s error=%d", ps->m[i].addr, rc);
		atomic_fetch_add(&ps->rp->errors, 1);
		return NULL;
	}
	r->ns_id[r->ns_n] = ns;
	*digest = r->digest[r->ns_n++];
	return r;
}

/* Which of keys e[0..n) member r holds (have[i] 1), one EXISTS frame;
 * the PUT answers that arrive meanwhile are taken too.  0 or < 0. */
static int repair_exists(struct rpass *ps, struct rpeer *r, const uint8_t *digest,
			 struct rent *const *e, uint32_t n, uint8_t *have)
{
	struct proto_frame f = { .op = PROTO_OP_EXISTS };
	struct proto_item *items = calloc(n, sizeof(*items));
	int rc;
	if (!items)
		return -ENOMEM;
	f.ns_count = 1;
	f.ns = digest;
	for (uint32_t i = 0; i < n; i++) {
		items[i].key = e[i]->key;
		have[i] = 1; /* an item left unanswered is not sent */
	}
	rc = kvtd_peer_send(&r->p, &f, items, n, NULL, 0);
	free(items);
	if (rc < 0) {
		repair_conn_lost(ps, r, rc);
		return rc;
	}
	r->ex_tag = f.tag;
	r->ex_have = have;
	while (rc == 0 && r->ex_tag)
		rc = repair_recv(ps, r);
	return rc;
}

/* A quiet pinned get of e (the pass leaves no trace in the cache): KVT_OK
 * with the pin in *rq, KVT_MISS (gone: forgotten here), or < 0. */
static int repair_pin(struct rpass *ps, const struct rent *e, struct kvt_req *rq)
{
	struct kvt_req *one = rq, *out;
	int rc;
	memset(rq, 0, sizeof(*rq));
	rq->op = KVT_OP_GET_PINNED;
	rq->flags = KVT_F_QUIET;
	rq->ns = e->ns;
	rq->key = e->key;
	rc = kvt_submit(ps->q, &one, 1);
	if (rc < 0)
		return rc;
	do
		rc = kvt_queue_wait(ps->q, &out, 1, 1000);
	while (rc == 0 || rc == -EINTR);
	if (rc < 0)
		return rc;
	if (rq->status == KVT_MISS) {
		repair_drop(ps->rp, e->ns, &e->key);
		atomic_fetch_add(&ps->rp->gone, 1);
	}
	return rq->status;
}

/* Send member r the values of e[0..n) in PUT frames (it lacks them),
 * keeping up to REPAIR_WINDOW frames unanswered.  0 or < 0 (lost). */
static int repair_send(struct rpass *ps, struct rpeer *r, const uint8_t *digest,
		       struct rent *const *e, uint32_t n)
{
	struct kvt_store *st = ps->rp->srv->store;
	struct kvt_req rq[REPAIR_FRAME_ITEMS];
	struct proto_item items[REPAIR_FRAME_ITEMS];
	uint64_t *lens[REPAIR_FRAME_ITEMS];
	uint32_t *crcs[REPAIR_FRAME_ITEMS];
	uint32_t at[REPAIR_FRAME_ITEMS];
	uint32_t i = 0;
	int rc = 0;

	while (i < n && rc == 0 && !repair_cut(ps)) {
		struct proto_frame f = { .op = PROTO_OP_PUT };
		struct iovec *iov = NULL;
		uint32_t k = 0, views = 0;
		uint64_t bytes = 0, paced = 0;
		bool busy = !ps->fwd && repair_busy_now(ps->rp);
		uint64_t frame_bytes = busy ? 1 : REPAIR_FRAME_BYTES;

		/* Pin up to a frame's worth. */
		for (; i < n && k < REPAIR_FRAME_ITEMS && bytes < frame_bytes; i++) {
			int parts;
			if (repair_pin(ps, e[i], &rq[k]) != KVT_OK)
				continue;
			parts = kvt_pin_parts(st, rq[k].pin, NULL, NULL, 0);
			lens[k] = parts > 0 ? malloc((size_t)parts * sizeof(uint64_t)) : NULL;
			crcs[k] = parts > 0 ? malloc((size_t)parts * sizeof(uint32_t)) : NULL;
			if (!lens[k] || !crcs[k] ||
			    kvt_pin_parts(st, rq[k].pin, lens[k], crcs[k], (unsigned)parts) !=
				    parts) {
				free(lens[k]);
				free(crcs[k]);
				kvt_pin_release(st, rq[k].pin);
				atomic_fetch_add(&ps->rp->errors, 1);
				continue;
			}
			memset(&items[k], 0, sizeof(items[k]));
			items[k].key = e[i]->key;
			items[k].flags = PROTO_IF_PLACED | PROTO_IF_REPAIR;
			if (rq[k].value_flags & KVT_F_SEALED)
				items[k].flags |= PROTO_IF_SEALED;
			if (e[i]->retain && r->p.caps & PROTO_CAP_RETAIN)
				items[k].flags |= PROTO_IF_RETAIN; /* else refused */
			items[k].anchor = e[i]->anchor;
			items[k].copies = e[i]->copies;
			items[k].part_count = (uint32_t)parts;
			items[k].part_lens = lens[k];
			items[k].part_crcs = crcs[k];
			bytes += rq[k].length;
			if (!ps->fwd || e[i]->heal) /* a forward's: the client's bytes */
				paced += rq[k].length;
			views += rq[k].view_count;
			at[k] = ps->batch ? (uint32_t)(e[i] - ps->batch) : 0;
			k++;
		}
		if (!k)
			break;
		iov = malloc(views * sizeof(*iov));
		if (iov) {
			uint32_t v = 0;
			for (uint32_t j = 0; j < k; j++)
				for (uint32_t w = 0; w < rq[j].view_count; w++)
					iov[v++] = rq[j].view[w];
			f.ns_count = 1;
			f.ns = digest;
			rc = repair_settle(ps, r, busy ? 0 : REPAIR_WINDOW - 1);
			if (rc == 0 && paced && !repair_pace(ps, paced))
				rc = -ECANCELED; /* cut short, or stopping: not sent */
			if (rc == 0) {
				rc = kvtd_peer_send(&r->p, &f, items, k, iov, views);
				if (rc < 0)
					repair_conn_lost(ps, r, rc);
			}
		} else {
			rc = -ENOMEM;
		}
		free(iov);
		if (rc == 0) {
			struct rflight *fl = &r->fl[r->fl_n++];
			fl->tag = f.tag;
			fl->n = k;
			for (uint32_t j = 0; j < k; j++) {
				fl->len[j] = rq[j].length;
				fl->at[j] = at[j];
				fl->got[j] = 0;
			}
		}
		/* The bytes are in the socket (or the frame failed): unpin. */
		for (uint32_t j = 0; j < k; j++) {
			kvt_pin_release(st, rq[j].pin);
			free(lens[j]);
			free(crcs[j]);
		}
	}
	return rc;
}

static int rent_heat_cmp(const void *a, const void *b)
{
	const struct rent *x = a, *y = b;
	return x->heat > y->heat ? -1 : x->heat < y->heat;
}

/* What a drain hands over, moved to the front of snap[0..cnt): every block
 * of a replicated namespace (copies >= 2: a replica the pod counts on),
 * and of the others the most recently used first, up to --drain-budget
 * bytes (the rest is a cache's to lose: engines recompute it).  Returns
 * how many. */
static size_t repair_drain_pick(struct kvtd_repair *rp, struct rent *snap, size_t cnt)
{
	size_t rep = 0, keep;
	uint64_t used = 0;
	for (size_t i = 0; i < cnt; i++)
		if (snap[i].copies >= 2) {
			struct rent t = snap[rep];
			snap[rep++] = snap[i];
			snap[i] = t;
		}
	if (cnt > rep)
		qsort(snap + rep, cnt - rep, sizeof(*snap), rent_heat_cmp);
	keep = rep;
	while (keep < cnt && used + snap[keep].len <= rp->drain_budget)
		used += snap[keep++].len;
	atomic_store(&rp->drain_skipped, cnt - keep); /* of the last drain pass */
	return keep;
}

static int rent_cmp(const void *a, const void *b)
{
	const struct rent *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return x->anchor < y->anchor ? -1 : x->anchor > y->anchor;
}

/* Every block of snap[0..cnt) whose top includes member d (tops: each
 * block's top `copies` of the ranking, k[i] of them; NULL: every block,
 * a forward lane's), to d: asked, then sent what it lacks. */
static void repair_member(struct rpass *ps, unsigned d, struct rent *snap, size_t cnt,
			  const uint16_t (*tops)[PROTO_COPIES_MAX], const uint8_t *k)
{
	struct rent **batch = malloc(REPAIR_EXISTS_BATCH * sizeof(*batch));
	struct rent **miss = malloc(REPAIR_EXISTS_BATCH * sizeof(*miss));
	uint8_t *have = malloc(REPAIR_EXISTS_BATCH);
	char canon[PROTO_CANON_MAX + 1], tenant[PROTO_TENANT_MAX + 1];
	uint32_t canon_ns = UINT32_MAX;
	int cl = 0;
	size_t i = 0;

	if (!batch || !miss || !have) {
		ps->retry = true;
		goto out;
	}
	while (i < cnt && !ps->peers[d].failed && !repair_cut(ps)) {
		uint32_t ns = snap[i].ns, bn = 0, mn = 0;
		const uint8_t *dg;
		struct rpeer *r;
		uint8_t digest[PROTO_DIGEST_LEN];
		size_t from = i;

		/* A batch: blocks of one namespace that d should hold. */
		for (; i < cnt && snap[i].ns == ns && bn < REPAIR_EXISTS_BATCH; i++)
			for (unsigned j = 0; j < (tops ? k[i] : 1u); j++)
				if (!tops || tops[i][j] == d) {
					batch[bn++] = &snap[i];
					break;
				}
		if (!bn)
			continue;
		if (canon_ns != ns) {
			const char *t;
			int tl;
			cl = kvt_ns_info(ps->rp->srv->store, ns, digest, canon, sizeof(canon));
			canon_ns = ns;
			if (cl > 0) {
				tl = kvtd_canon_tenant(canon, (size_t)cl, &t);
				if (tl > 0)
					snprintf(tenant, sizeof(tenant), "%.*s", tl, t);
				else
					snprintf(tenant, sizeof(tenant), "%s", KVTD_DEFAULT_TENANT);
			}
		}
		if (cl <= 0)
			continue;
		r = repair_peer(ps, d, ns, canon, (size_t)cl, tenant, &dg);
		if (!r && ps->peers[d].conn_busy && ps->busy && !tops) {
			/* a lane's connection refused busy: this batch's
			 * copies (one namespace, one tenant; a lane's batch is
			 * snap itself) sent again after a delay, as a copy
			 * refused busy is (they were lost: an error each,
			 * until the member list changed); the other tenants'
			 * go on (busy_tenant) */
			for (size_t j = from; j < i; j++)
				ps->busy[j] = 1;
			ps->peers[d].conn_busy = false;
			continue;
		}
		if (!r || repair_exists(ps, r, dg, batch, bn, have) < 0)
			continue;
		for (uint32_t j = 0; j < bn; j++)
			if (!have[j])
				miss[mn++] = batch[j];
		if (mn)
			repair_send(ps, r, dg, miss, mn);
	}
	if (ps->peers[d].open)
		repair_settle(ps, &ps->peers[d], 0);
out:
	free(batch);
	free(miss);
	free(have);
}

/* One member's share of a pass, on a thread of its own (its own queue for
 * the pins, its own connection: ps->peers[d]). */
struct rworker {
	struct rpass ps;
	unsigned d;
	struct rent *snap;
	size_t cnt;
	const uint16_t (*tops)[PROTO_COPIES_MAX];
	const uint8_t *k;
	pthread_t th;
	bool started;
	bool busy;              /* the slot holds a member's share (started or not) */
	bool done;              /* *mu: its share is over */
	pthread_mutex_t *mu;    /* rp->lock, with rp->cond: a worker is done */
	pthread_cond_t *cv;
};

static void *repair_worker(void *arg)
{
	struct rworker *w = arg;
	if (kvt_queue_create(w->ps.rp->srv->store, &w->ps.q) < 0) {
		w->ps.retry = true;
	} else {
		repair_member(&w->ps, w->d, w->snap, w->cnt, w->tops, w->k);
		kvt_queue_destroy(w->ps.q);
		w->ps.q = NULL;
	}
	pthread_mutex_lock(w->mu);
	w->done = true;
	pthread_cond_signal(w->cv);
	pthread_mutex_unlock(w->mu);
	return NULL;
}

static bool repair_forward(struct kvtd_repair *rp);
static void repair_lanes_join(struct kvtd_repair *rp, bool all);

/* The ranking of list m[0..n) (0 < n <= PLACEMENT_MEMBERS_MAX) into *pl,
 * weights scaled as the engines' remote.discover scales them
 * (lib/cluster.c); this server's index in it into *me (n: not in it).
 * 0 or < 0. */
static int repair_place(struct kvtd_repair *rp, const struct kvtd_member *m, unsigned n,
			const char *self, struct placement **pl, unsigned *me)
{
	struct placement_member pm[PLACEMENT_MEMBERS_MAX];
	uint64_t max = 1, div;

	*me = n;
	for (unsigned i = 0; i < n; i++)
		if (m[i].weight > max)
			max = m[i].weight;
	div = (max + PLACEMENT_WEIGHT_MAX - 1) / PLACEMENT_WEIGHT_MAX; /* as lib/cluster.c */
	for (unsigned i = 0; i < n; i++) {
		uint64_t w = m[i].weight / div;
		pm[i].name = m[i].addr;
		pm[i].weight = (uint32_t)(w ? w : 1);
		if (strcmp(m[i].addr, self) == 0)
			*me = i;
	}
	return placement_new(pl, pm, n, &rp->mem);
}

/*
 * A pass cut short.  A pass ends with its slowest member: its other
 * members' shares are done as soon as their workers are (a slot is given
 * the next member), but the pass -- and so the next list change's pass,
 * the healing of every member under the new list -- waited for the last
 * worker: a member taking its copies at peer.c's floor (1 MiB/s) held it
 * for as long as its bytes took (test_peer_attack `heal_cut`: a block
 * the new list placed on a healthy member was there 11.1 s after the
 * list changed, --repair-grace 4 s: the slow member's pass went on until
 * it was given up; now 4.9 s).  Now a pass that is not a
 * drain's is cut short when the member list changes under it: its
 * workers' connections wait on an eventfd of the pass's own (rp->pass_fd,
 * written by the stop too), which the repair thread writes when it sees
 * the change (it looks every REPAIR_TICK_MS while it waits for the
 * workers), and they start nothing more; the pass returns false, and the
 * new list's pass runs after its --repair-grace as ever.  What the cut
 * pass copied stays copied (the next pass finds it there: an EXISTS); the
 * cost is the rest of the old list's work, which the new list's pass
 * redoes under the new placement (repair.cut).  A drain's pass is not
 * cut: the drain itself changes the list.
 */
static bool repair_pass_changed(struct kvtd_repair *rp, uint64_t epoch)
{
	struct kvtd_cluster *cl = &rp->srv->cluster;
	bool changed;

	pthread_mutex_lock(&cl->lock);
	changed = cl->epoch != epoch;
	pthread_mutex_unlock(&cl->lock);
	return changed;
}

/* One pass with list m[0..n) over every tracked block: false if it should
 * be run again (a member could not be reached, the pass was cut short). */
static bool repair_pass(struct kvtd_repair *rp, struct kvtd_member *m, unsigned n,
			const char *self, bool drain)
{
	struct rpass ps = { .rp = rp, .m = m, .n = n, .self = n, .stop_fd = rp->stop_fd,
			    .drain = drain };
	_Atomic bool cut = false;
	int cut_fd = -1;
	uint64_t epoch = 0;
	uint64_t t0 = kvtd_now_ns();
	struct rent *snap = NULL;
	uint16_t (*tops)[PROTO_COPIES_MAX] = NULL;
	uint8_t *k = NULL;
	size_t cnt = 0;
	uint64_t snap_charged = 0;   /* its snapshot, tops and k */

	if (n == 0 || n > PLACEMENT_MEMBERS_MAX)
		return true;
	if (repair_place(rp, m, n, self, &ps.pl, &ps.self) < 0 || (ps.self == n && !drain)) {
		/* not a member (yet, or any more): nothing of ours is placed */
		placement_free(ps.pl);
		return ps.self == n && !drain;
	}
	pthread_mutex_lock(&rp->lock);
	snap_charged = (uint64_t)rp->used * REPAIR_SNAP_BYTES;
	kvtd_mem_charge(rp->srv, snap_charged, true);
	snap = rp->used ? malloc(rp->used * sizeof(*snap)) : NULL;
	for (size_t i = 0; snap && i < rp->cap; i++)
		if (rp->tab[i].state == 1)
			snap[cnt++] = rp->tab[i];
	pthread_mutex_unlock(&rp->lock);
	if (drain && cnt)
		cnt = repair_drain_pick(rp, snap, cnt);
	if (cnt)
		qsort(snap, cnt, sizeof(*snap), rent_cmp);
	ps.peers = calloc(n, sizeof(*ps.peers));
	tops = cnt ? malloc(cnt * sizeof(*tops)) : NULL;
	k = cnt ? malloc(cnt) : NULL;
	if (ps.peers && (!cnt || (tops && k))) {
		/* Every member of a block's top `copies` must hold it: those that
		 * lost a peer, those a join or a leave made owners, and, while
		 * this server drains (not in the list), all of them.  A holder
		 * outside the top (an owner before a join) pushes it too: that
		 * is the join's warm-up. */
		for (size_t i = 0; i < cnt; i++) {
			unsigned top[PROTO_COPIES_MAX];
			bool others = false;
			k[i] = (uint8_t)placement_rank(ps.pl, snap[i].anchor, NULL, top,
						       snap[i].copies);
			for (unsigned j = 0; j < k[i]; j++) {
				tops[i][j] = (uint16_t)top[j];
				others |= top[j] != ps.self;
			}
			if (others)
				atomic_fetch_add(&rp->checked, 1);
		}
		/* The members at once, REPAIR_WORKERS at a time: a member's
		 * round trips (connect, HELLO, AUTH, NS_REGISTER, EXISTS, the
		 * last answers) overlap the others' copies.  A slot is given
		 * the next member as soon as its worker is done: started 8 at
		 * a time and joined 8 at a time, a slow member (its send at
		 * peer.c's floor, a silent one's 5 s) held every member after
		 * its eight until it was given up (test_peer_attack
		 * `fwd_batch`). */
		struct rworker w[REPAIR_WORKERS];
		unsigned d = 0, running = 0, ended = 0;

		memset(w, 0, sizeof(w));
		if (!drain) { /* "A pass cut short" above */
			pthread_mutex_lock(&rp->srv->cluster.lock);
			epoch = rp->srv->cluster.epoch;
			pthread_mutex_unlock(&rp->srv->cluster.lock);
			cut_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		}
		if (cut_fd >= 0) {
			ps.stop_fd = cut_fd;
			ps.cut = &cut;
			pthread_mutex_lock(&rp->lock);
			rp->pass_fd = cut_fd;
			if (rp->stop) /* (a stop after this writes it itself) */
				eventfd_write(cut_fd, 1);
			pthread_mutex_unlock(&rp->lock);
		}
		for (;;) {
			for (unsigned j = 0; j < REPAIR_WORKERS; j++) {
				if (w[j].busy)
					continue;
				while (d < n && d == ps.self)
					d++;
				if (d == n || repair_cut(&ps))
					break;
				w[j] = (struct rworker){
					.ps = ps, .d = d++, .snap = snap, .cnt = cnt,
					.tops = (const uint16_t(*)[PROTO_COPIES_MAX])tops, .k = k,
					.busy = true, .mu = &rp->lock, .cv = &rp->cond
				};
				w[j].ps.q = NULL;
				w[j].ps.retry = false;
				/* its copies refused busy: repair_heal_busy */
				w[j].ps.batch = snap;
				w[j].started = pthread_create(&w[j].th, NULL, repair_worker,
							      &w[j]) == 0;
				if (!w[j].started)
					repair_worker(&w[j]); /* here, then */
				running++;
			}
			if (!running)
				break;
			/* Until a worker is done.  Meanwhile the forwards the
			 * loops queue go to their lanes as they come (rp->cond
			 * says both), and the lanes that ended are joined: a
			 * pass held by a slow member held every forward until
			 * its end (test_peer_attack `fwd_heal`). */
			pthread_mutex_lock(&rp->lock);
			uint64_t next_look = kvtd_now_ns() + REPAIR_TICK_MS * 1000000ull;
			for (bool any = false; !any;) {
				for (unsigned j = 0; j < REPAIR_WORKERS; j++)
					any |= w[j].busy && w[j].done;
				if (!any && (rp->fq_n || rp->lanes_ended != ended) && !rp->stop) {
					ended = rp->lanes_ended;
					pthread_mutex_unlock(&rp->lock);
					repair_lanes_join(rp, false);
					repair_forward(rp);
					pthread_mutex_lock(&rp->lock);
				} else if (!any && !ps.cut) {
					pthread_cond_wait(&rp->cond, &rp->lock);
				} else if (!any) {
					/* a tick at most: has the list changed? */
					struct timespec ts = kvtd_deadline(
						CLOCK_REALTIME, REPAIR_TICK_MS * 1000000ull);
					pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
				}
				/* Looked at every tick whichever branch ran: a
				 * steady stream of forwards keeps the first one
				 * busy and must not keep the pass from its cut. */
				if (!any && ps.cut && !atomic_load(&cut) &&
				    kvtd_now_ns() >= next_look) {
					next_look = kvtd_now_ns() + REPAIR_TICK_MS * 1000000ull;
					pthread_mutex_unlock(&rp->lock);
					if (repair_pass_changed(rp, epoch)) {
						atomic_store(&cut, true);
						eventfd_write(cut_fd, 1);
						atomic_fetch_add(&rp->cut, 1);
						kvtd_log(KVTD_INFO, "repair pass cut short",
							 "reason=\"the member list changed\" "
							 "running=%u", running);
					}
					pthread_mutex_lock(&rp->lock);
				}
			}
			pthread_mutex_unlock(&rp->lock);
			for (unsigned j = 0; j < REPAIR_WORKERS; j++) {
				bool done;
				if (!w[j].busy)
					continue;
				pthread_mutex_lock(&rp->lock);
				done = w[j].done;
				pthread_mutex_unlock(&rp->lock);
				if (!done)
					continue;
				if (w[j].started)
					pthread_join(w[j].th, NULL);
				ps.retry |= w[j].ps.retry;
				w[j].busy = false;
				running--;
			}
		}
	} else {
		ps.retry = true;
	}
	if (cut_fd >= 0) {
		pthread_mutex_lock(&rp->lock);
		rp->pass_fd = -1;
		pthread_mutex_unlock(&rp->lock);
		close(cut_fd);
	}
	ps.retry |= atomic_load(&cut);
	for (unsigned i = 0; ps.peers && i < n; i++)
		if (ps.peers[i].open)
			kvtd_peer_close(&ps.peers[i].p);
	free(ps.peers);
	free(tops);
	free(k);
	free(snap);
	kvtd_mem_uncharge(rp->srv, snap_charged);
	placement_free(ps.pl);
	atomic_fetch_add(&rp->passes, 1);
	atomic_store(&rp->last_pass_ms, (kvtd_now_ns() - t0) / 1000000);
	kvtd_log(KVTD_INFO, "repair pass done",
		 "members=%u blocks=%zu ms=%llu copied=%llu bytes=%llu yields=%llu retry=%s", n, cnt,
		 (unsigned long long)atomic_load(&rp->last_pass_ms),
		 (unsigned long long)atomic_load(&rp->copied),
		 (unsigned long long)atomic_load(&rp->bytes),
		 (unsigned long long)atomic_load(&rp->yields), ps.retry ? "yes" : "no");
	return !ps.retry;
}

/* The member list without this server (a new array, or NULL). */
static struct kvtd_member *repair_list_without(struct kvtd_repair *rp, const char *self,
					       unsigned *n)
{
	struct kvtd_cluster *cl = &rp->srv->cluster;
	struct kvtd_member *m;
	*n = 0;
	pthread_mutex_lock(&cl->lock);
	m = cl->count ? malloc(cl->count * sizeof(*m)) : NULL;
	for (unsigned i = 0; m && i < cl->count; i++)
		if (strcmp(cl->list[i].addr, self) != 0)
			m[(*n)++] = cl->list[i];
	pthread_mutex_unlock(&cl->lock);
	return m;
}

/*
 * Drain (kvtier drain): hand every tracked block over to the members the
 * ranking gives without this server, leave the member list (the etcd
 * lease revoked), keep serving while engines notice (--repair-grace, which
 * must exceed their remote.refresh_ms), hand over what was put meanwhile,
 * then exit if asked.
 */
static void repair_drain(struct kvtd_repair *rp, bool exit_after)
{
	struct kvtd_server *srv = rp->srv;
	const char *self = srv->cluster.self_addr ? srv->cluster.self_addr : rp->self;
	uint64_t wait_ms = rp->grace_ns / 1000000; /* > the engines' remote.refresh_ms */
	struct kvtd_member *m;
	unsigned n;
	bool ok = false, counted;
	uint64_t copied;

	atomic_store(&rp->drain_state, 1);
	kvtd_log(KVTD_INFO, "drain: handing over", "exit=%s", exit_after ? "yes" : "no");
	for (int tries = 0; self && !ok && tries < 5 && !repair_stopping(rp); tries++) {
		m = repair_list_without(rp, self, &n);
		ok = m && n && repair_pass(rp, m, n, self, true);
		free(m);
		if (!ok)
			sleep_ms(REPAIR_RETRY_MS);
	}
	/* Blocks left behind (a member busy or out of reach through every
	 * try: a refusal busy is no repair.error): said now, before the
	 * grace, so that kvtier drain --exit sees it before the stop */
	counted = !ok && !repair_stopping(rp);
	if (counted)
		atomic_fetch_add(&rp->drains_incomplete, 1);
	kvtd_cluster_leave(srv, self);
	atomic_store(&rp->drain_state, 2);
	if (srv->cluster.source == KVTD_CLUSTER_STATIC && wait_ms < 3 * REPAIR_POLL_MS)
		wait_ms = 3 * REPAIR_POLL_MS; /* the others ask every REPAIR_POLL_MS */
	for (uint64_t t = 0; t < wait_ms && !repair_stopping(rp); t += REPAIR_TICK_MS)
		sleep_ms(REPAIR_TICK_MS);
	m = self ? repair_list_without(rp, self, &n) : NULL;
	if (m && n)
		ok = repair_pass(rp, m, n, self, true) && ok;
	free(m);
	if (!ok && !counted && !repair_stopping(rp))
		atomic_fetch_add(&rp->drains_incomplete, 1);
	/* read before state 3, which lets the next DRAIN in (and zero it) */
	copied = atomic_load(&rp->drain_copied);
	atomic_store(&rp->drain_state, 3);
	kvtd_log(ok ? KVTD_INFO : KVTD_WARN, "drain: done", "complete=%s copied=%llu exit=%s",
		 ok ? "yes" : "no", (unsigned long long)copied, exit_after ? "yes" : "no");
	/* With --exit, a drain that left blocks behind stops a while after
	 * saying so (state 3, the count): its count goes with the process,
	 * and kvtier drain --exit reads it every 200 ms -- stopped at once,
	 * one whose last hand-over alone failed said "drained", exit 0
	 * (test_peer_attack drain_exit_late, review47b). */
	for (uint64_t t = 0; exit_after && !ok && t < REPAIR_DRAIN_SAY_MS && !repair_stopping(rp);
	     t += REPAIR_TICK_MS)
		sleep_ms(REPAIR_TICK_MS);
	if (exit_after)
		kill(getpid(), SIGTERM); /* the main thread's signalfd: a normal stop */
}

int kvtd_repair_drain(struct kvtd_server *srv, bool exit_after)
{
	struct kvtd_repair *rp = srv->repair;
	if (!rp || srv->cluster.source == KVTD_CLUSTER_NONE)
		return -ENOTSUP;
	/* Handing over (state 1) from the answer on, not from the repair
	 * thread's next tick (up to REPAIR_TICK_MS, or a whole pass, later):
	 * a drain after an earlier one's end found state 3 still there, so
	 * kvtier drain's first look said "drained" at once, exit 0, and a
	 * second request in between was accepted too (review47b). */
	pthread_mutex_lock(&rp->lock);
	if (rp->drain_req || atomic_load(&rp->drain_state) == 1 ||
	    atomic_load(&rp->drain_state) == 2) {
		pthread_mutex_unlock(&rp->lock);
		return -EALREADY;
	}
	atomic_store(&rp->drain_state, 1);
	/* this drain's copies from here: a pass under way now is no part
	 * of them (its copies counted in kvtier drain's "N blocks copied",
	 * which read repair.copied's growth from here; dup48) */
	atomic_store(&rp->drain_copied, 0);
	rp->drain_req = exit_after ? 2 : 1;
	pthread_cond_broadcast(&rp->cond);
	pthread_mutex_unlock(&rp->lock);
	return 0;
}

/*
 * A static pod (--members) has no etcd to leave: a member that drains
 * serves the list without itself and says so in its stats
 * (repair.drain_state 2, then 3), and every member asks the others about
 * it every REPAIR_POLL_MS, serving the configured list less those that
 * left.  One that answers otherwise (restarted: 0) is back; one that does
 * not answer keeps its state (dead members stay listed, as configured).
 * Engines that follow a member (remote.discover) see the change within
 * their remote.refresh_ms.
 *
 * The poll has a thread of its own (repair_static_main): on the repair
 * thread, one member that held it -- silent after HELLO (PEER_TIMEOUT_MS,
 * 5 s), answering STATS in slow frames of MORE (up to PEER_ANSWER_MS,
 * 30 s), blackholed (the connect timeout) -- held every forward and
 * repair copy to all the others that long, every second (doc/security.md,
 * test_peer_attack `poll_stall`).  What it learns reaches the repair
 * thread as the member list does (kvtd_cluster_static_set: cl->lock, the
 * epoch).
 *
 * Each member is asked on a thread of its own (repair_ask), all at once:
 * asked one after another, a member that held its question delayed every
 * later member's answer by as long, each round (test_peer_attack
 * `poll_wide`).  A member still asking when the next round comes is not
 * asked again until its thread is back (its last answer stands
 * meanwhile), and each answer is served as it comes.  A thread, not a
 * state machine over one poll(): the question is peer.c's blocking,
 * bounded, TLS-capable exchange (connect, handshake, HELLO, AUTH, STATS),
 * and a thread lives only while its member's question is out -- a healthy
 * member answers in a millisecond -- at most REPAIR_POLL_ASKERS of them
 * (a pod with more members held at once asks the rest as threads come
 * back).  Every wait of theirs also polls rp->stop_fd, so a stopping
 * server joins them at once (test_peer_attack `poll_stop`).
 */
#define REPAIR_POLL_ASKERS 32u

struct rask {
	struct kvtd_repair *rp;
	char addr[KVTD_MEMBER_ADDR_MAX + 1];
	char tenant[PROTO_TENANT_MAX + 1];
	uint8_t secret[PROTO_SECRET_MAX];
	uint32_t secret_len;
	pthread_t th;
	int state;  /* poll_lock: 0 idle, 1 asking, 2 answered (its thread done) */
	bool due;   /* poll_lock: to be asked this round, when an asker is free */
	int out;    /* poll_lock, state 2: 1 left, 0 listed, -1 no answer */
};

/* One member's question, on a thread of its own (kvtd-poll's). */
static void *repair_ask(void *arg)
{
	struct rask *a = arg;
	struct kvtd_repair *rp = a->rp;
	struct kvtd_peer p;
	uint64_t st = 0;
	int out = -1;

	if (kvtd_peer_open_stop(&p, a->addr, NULL, a->tenant, a->secret, a->secret_len,
				rp->srv->cfg.peer_connect_ms, rp->srv->tls_peer_ctx,
				rp->stop_fd) == 0) {
		if (kvtd_peer_stat(&p, PROTO_SCOPE_TENANT, "repair.drain_state", &st) == KVT_OK)
			out = st >= 2;
		kvtd_peer_close(&p);
	}
	OPENSSL_cleanse(a->secret, sizeof(a->secret));
	pthread_mutex_lock(&rp->poll_lock);
	a->out = out;
	a->state = 2;
	pthread_cond_broadcast(&rp->poll_cond);
	pthread_mutex_unlock(&rp->poll_lock);
	return NULL;
}

/* The members due this round (repair_static_main marks them: every one
 * not asking already, not self) are asked, up to REPAIR_POLL_ASKERS at
 * once; *asking counts them.  The rest stay due, asked as askers come
 * back: stopping at the cap until the next round gave the first 32 idle
 * members every round, and a member listed after them was never asked
 * (test_peer_attack `poll_many`).  poll_lock held; dropped while the
 * tenants file is read. */
static void repair_static_round(struct kvtd_repair *rp, struct kvtd_member *m, unsigned n,
				struct rask *ask, unsigned *asking)
{
	char tenant[PROTO_TENANT_MAX + 1] = KVTD_DEFAULT_TENANT;
	uint8_t secret[PROTO_SECRET_MAX];
	uint32_t secret_len = 0;
	unsigned due = 0;
	int rc = 0;

	for (unsigned i = 0; i < n; i++)
		due += ask[i].due && ask[i].state == 0;
	if (!due || *asking >= REPAIR_POLL_ASKERS)
		return;
	pthread_mutex_unlock(&rp->poll_lock);
	if (kvtd_auth_enabled())
		rc = kvtd_auth_any_peer(tenant, sizeof(tenant), secret, &secret_len);
	pthread_mutex_lock(&rp->poll_lock);
	for (unsigned i = 0; i < n && *asking < REPAIR_POLL_ASKERS; i++) {
		struct rask *a = &ask[i];
		if (!a->due || a->state != 0)
			continue; /* still asking: its last answer stands */
		a->due = false;
		if (rc != 0)
			continue; /* no secret: asked next round */
		a->rp = rp;
		snprintf(a->addr, sizeof(a->addr), "%s", m[i].addr);
		snprintf(a->tenant, sizeof(a->tenant), "%s", tenant);
		memcpy(a->secret, secret, secret_len);
		a->secret_len = secret_len;
		a->state = 1;
		if (pthread_create(&a->th, NULL, repair_ask, a) != 0) {
			OPENSSL_cleanse(a->secret, sizeof(a->secret));
			a->state = 0; /* asked next round */
			continue;
		}
		(*asking)++;
	}
	OPENSSL_cleanse(secret, sizeof(secret));
}

/* kvtd-poll: a round every REPAIR_POLL_MS until stop, each answer served
 * as it comes. */
static void *repair_static_main(void *arg)
{
	struct kvtd_repair *rp = arg;
	struct kvtd_cluster *cl = &rp->srv->cluster;
	const char *self = cl->self_addr ? cl->self_addr : rp->self;
	unsigned n = 0, asking = 0;
	struct kvtd_member *m = kvtd_cluster_static_conf(rp->srv, &n);
	struct rask *ask = m ? calloc(n, sizeof(*ask)) : NULL;
	bool *out = ask ? calloc(n, sizeof(*out)) : NULL;
	struct timespec next = { 0, 0 };

	if (!out) {
		kvtd_log(KVTD_ERROR, "static pod poll off: out of memory", "members=%u", n);
		free(ask);
		free(m);
		return NULL;
	}
	/* stop is set under rp->lock, then poll_cond broadcast under
	 * poll_lock: looked at with poll_lock held, it is not missed */
	pthread_mutex_lock(&rp->poll_lock);
	while (!repair_stopping(rp)) {
		struct timespec now;
		bool answered = false, changed = false;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > next.tv_sec ||
		    (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
			for (unsigned i = 0; i < n; i++)
				ask[i].due = ask[i].state != 1 && /* 2: joined below */
					     !(self && strcmp(m[i].addr, self) == 0);
			next = kvtd_deadline(CLOCK_MONOTONIC, REPAIR_POLL_MS * 1000000ull);
		}
		repair_static_round(rp, m, n, ask, &asking);
		for (unsigned i = 0; i < n; i++) {
			if (ask[i].state != 2)
				continue;
			pthread_join(ask[i].th, NULL); /* it is past its last lock */
			if (ask[i].out >= 0 && out[i] != (ask[i].out == 1)) {
				out[i] = ask[i].out == 1;
				changed = true;
			}
			ask[i].state = 0;
			asking--;
			answered = true;
		}
		if (answered) {
			/* a list rebuilt only on a change: answered one by one,
			 * a pod of n rebuilt it (cl->lock, O(n)) n times a round */
			if (changed) {
				pthread_mutex_unlock(&rp->poll_lock);
				kvtd_cluster_static_set(rp->srv, out);
				pthread_mutex_lock(&rp->poll_lock);
			}
			continue; /* more may have come meanwhile */
		}
		/* looked at again: the round dropped poll_lock, and a stop's
		 * broadcast then was not waited for */
		if (repair_stopping(rp))
			break;
		pthread_cond_timedwait(&rp->poll_cond, &rp->poll_lock, &next);
	}
	pthread_mutex_unlock(&rp->poll_lock);
	/* rp->stop_fd is written (kvtd_repair_stop): the askers are back at
	 * once.  (srv->stopping alone: they end within the peer clocks, or
	 * at kvtd_repair_stop's write.) */
	for (unsigned i = 0; i < n; i++) {
		int st;
		pthread_mutex_lock(&rp->poll_lock);
		st = ask[i].state;
		pthread_mutex_unlock(&rp->poll_lock);
		if (st != 0)
			pthread_join(ask[i].th, NULL);
	}
	free(out);
	free(ask);
	free(m);
	return NULL;
}

/* A copy of the current member list (the caller frees it), its length in
 * *n; NULL with *n 0 when the list is empty or memory is short. */
static struct kvtd_member *repair_members_copy(struct kvtd_cluster *cl, unsigned *n)
{
	struct kvtd_member *m = NULL;

	*n = 0;
	pthread_mutex_lock(&cl->lock);
	if (cl->count && (m = malloc(cl->count * sizeof(*m)))) {
		memcpy(m, cl->list, cl->count * sizeof(*m));
		*n = cl->count;
	}
	pthread_mutex_unlock(&cl->lock);
	return m;
}

/*
 * Forward lanes.  The repair thread ranks each forwarded put over the
 * current list and hands a copy of it to the lane of every other member
 * of its top, as they come (while a healing pass runs too: repair_pass's
 * wait for its workers); each lane has a thread of its own while copies
 * wait in it (repair_lane_main: EXISTS, then the values the member lacks,
 * as a pass does, on a connection of its own), so one slow or held member
 * costs the others nothing.  One pass over the whole queue, with a worker per
 * member, was done only when its slowest worker was: a forward put
 * meanwhile waited for it -- at worst the slow member's bytes at peer.c's
 * floor (each 5 MiB within 5 s) plus 5 s for an answer (test_peer_attack
 * `fwd_lane`: a 4 KiB forward behind a 16 MiB one to a member reading it
 * slowly took 7,160 ms).  A lane holds at most REPAIR_LANE_MAX copies and
 * REPAIR_LANE_BYTES of values waiting (a copy that finds it full is
 * dropped: repair.forward_member_dropped, of forward_dropped; the next
 * list change's pass heals it), besides the batch its thread is sending;
 * its arrays are charged to --max-memory (past it the copy is dropped:
 * repair.forward_mem_dropped); and a tenant's share ("Copies" above)
 * counts its copies until a lane's thread takes them: each block's
 * copies - 1, spread over the lanes it went to.  A copy the member
 * refuses busy goes back in the lane, within all of those bounds again
 * (repair_lane_busy; it was given up at once, so a lane sending beside a
 * pass's large block lost its copies: test_peer_attack `fwd_busy`).
 */
#define REPAIR_LANE_MAX REPAIR_FWD_MAX
#define REPAIR_LANE_BYTES (1ull << 30)
/* A copy the member refused busy (KVT_EBUSY: its reservation for what
 * it receives full, e.g. while a pass's large block arrives) goes back in
 * its lane, sent again after REPAIR_BUSY_MS, then twice that, ..., at
 * most REPAIR_BUSY_TRIES times (repair_lane_busy).  The delay is the
 * copy's own (its due time in rent.heat): the lane sends the copies that
 * are due and keeps the others queued, and waits only while none is due,
 * until the first is, woken by a push or a stop (rlane.cond).  The
 * refusal is per tenant (its reservation there full), and the lane slept
 * out the longest delay of a batch before sending anything more, so
 * another tenant's copy waited behind it (test_peer_attack
 * `fwd_busy_hol`: 381-390 ms). */
#define REPAIR_BUSY_TRIES 3u
#define REPAIR_BUSY_MS 100u

/* Take n off group's share of the forward queue.  Locked. */
static void repair_fwd_uncharge(struct kvtd_repair *rp, uint16_t group, uint32_t n)
{
	rp->gfq[group] = rp->gfq[group] > n ? rp->gfq[group] - n : 0;
}

static bool repair_lane_push_locked(struct kvtd_repair *rp, struct rlane *ln,
				    const struct rent *e, uint8_t chg, uint8_t tries, uint64_t due);
static struct rlane *repair_lane_locked(struct kvtd_repair *rp, const char *addr);
static void *repair_lane_main(void *arg);

/* The copies of a batch q[0..n) (their shares in chg) that the member
 * refused busy (busy[i] 1), put back in lane ln to be sent again after a
 * delay (their due time), REPAIR_BUSY_TRIES times each at most; a copy
 * past that, or that the lane, --max-memory or its tenant's share has no
 * room for now, or the server stopping, is given up
 * (repair.forward_busy_dropped, and an error). */
static void repair_lane_busy(struct kvtd_repair *rp, struct rlane *ln, const struct rent *q,
			     const uint8_t *busy, size_t n)
{
	uint64_t now = kvtd_now_ns();

	pthread_mutex_lock(&rp->lock);
	for (size_t i = 0; i < n; i++) {
		uint16_t g = q[i].group;
		if (!busy[i])
			continue;
		if (q[i].tries < REPAIR_BUSY_TRIES && !rp->stop &&
		    (g == 0 || rp->gfq[g] + q[i].chg <= REPAIR_FWD_TENANT_MAX) &&
		    repair_lane_push_locked(rp, ln, &q[i], q[i].chg, (uint8_t)(q[i].tries + 1),
					    now + (REPAIR_BUSY_MS * 1000000ull << q[i].tries))) {
			atomic_fetch_add(&rp->fwd_busy_retried, 1);
		} else {
			atomic_fetch_add(&rp->fwd_busy_dropped, 1);
			atomic_fetch_add(&rp->errors, 1);
		}
	}
	pthread_mutex_unlock(&rp->lock);
}

/* A pass's copy e that member addr refused busy (a healing pass's copies
 * were counted as errors and lost until the next list change's pass):
 * handed to the member's lane as a copy refused once there (tries 1, due
 * after REPAIR_BUSY_MS), whose thread sends it again as it does its own
 * (repair_lane_busy: its own due time, REPAIR_BUSY_TRIES sends at most,
 * the lane's caps, --max-memory), a copy charged to the tenant's share of
 * the queue (1); the lane's thread started if idle.  Counted in
 * repair.busy_handed, or, no room, repair.busy_dropped and an error.
 * Why the lane, not the pass: the pass would wait out the delays
 * (100 + 200 + 400 ms) while it holds its member's slot, or keep due
 * times of its own beside the lane's; the lane already keeps them, and
 * a pass held by one member then holds nothing of it (test_peer_attack
 * `heal_busy`).  Not a drain's copy: the drain must know it was not
 * handed over (repair_item; test_peer_attack `drain_item_busy`).  Any of
 * a pass's workers. */
static void repair_heal_busy(struct rpass *ps, const char *addr, const struct rent *e)
{
	struct kvtd_repair *rp = ps->rp;
	uint64_t due = kvtd_now_ns() + REPAIR_BUSY_MS * 1000000ull;
	struct rlane *ln;
	bool ok = false;

	pthread_mutex_lock(&rp->lock);
	ln = rp->stop ? NULL : repair_lane_locked(rp, addr);
	if (ln && (e->group == 0 || rp->gfq[e->group] + 1 <= REPAIR_FWD_TENANT_MAX))
		ok = repair_lane_push_locked(rp, ln, e, 1, 1, due);
	if (ok) /* paced as the pass's: the lane's are the client's bytes, unpaced */
		ln->q[ln->n - 1].heal = true;
	if (ok && ln->state == 0 && pthread_create(&ln->th, NULL, repair_lane_main, ln) == 0)
		ln->state = 1; /* (else the repair thread's repair_lanes_join starts it) */
	pthread_mutex_unlock(&rp->lock);
	if (ok) {
		atomic_fetch_add(&rp->busy_handed, 1);
	} else {
		atomic_fetch_add(&rp->busy_dropped, 1);
		atomic_fetch_add(&rp->errors, 1);
	}
}

/* Of lane ln's copies, the batch of those due at now: in *q (n copies,
 * each one's share in its chg, uncharged from its tenant), their arrays'
 * charge to --max-memory in *charged; the others stay queued.  0 if none
 * is due (*wake: the first due time).  Locked. */
static size_t repair_lane_take_locked(struct kvtd_repair *rp, struct rlane *ln, uint64_t now,
				      struct rent **q, uint64_t *charged, uint64_t *wake)
{
	size_t due = 0, k = 0;
	struct rent *b;

	*wake = UINT64_MAX;
	for (size_t i = 0; i < ln->n; i++) {
		if (ln->q[i].heat <= now)
			due++;
		else if (ln->q[i].heat < *wake)
			*wake = ln->q[i].heat;
	}
	if (!due)
		return 0;
	/* some not due: the due ones in a batch of their own, charged as
	 * the lane's arrays are (a rent and its busy byte each); if it cannot
	 * be had, all are sent now, as when a refused copy waited with the
	 * lane's batch (the member refuses it again, within its tries) */
	b = NULL;
	if (due < ln->n && kvtd_mem_charge(rp->srv, due * (sizeof(*b) + 1), false)) {
		b = malloc(due * sizeof(*b));
		if (!b)
			kvtd_mem_uncharge(rp->srv, due * (sizeof(*b) + 1));
	}
	if (!b) {
		*q = ln->q;
		*charged = ln->charged;
		for (size_t i = 0; i < ln->n; i++) {
			(*q)[i].chg = ln->chg[i];
			repair_fwd_uncharge(rp, (*q)[i].group, (*q)[i].chg);
		}
		due = ln->n;
		free(ln->chg);
		ln->q = NULL;
		ln->chg = NULL;
		ln->n = ln->cap = 0;
		ln->bytes = ln->charged = 0;
		return due;
	}
	for (size_t i = 0, j = 0; i < ln->n; i++) {
		if (ln->q[i].heat <= now) {
			b[j] = ln->q[i];
			b[j].chg = ln->chg[i];
			repair_fwd_uncharge(rp, b[j].group, b[j].chg);
			ln->bytes -= b[j++].len;
		} else {
			ln->q[k] = ln->q[i];
			ln->chg[k++] = ln->chg[i];
		}
	}
	ln->n = k;
	*q = b;
	*charged = due * (sizeof(*b) + 1);
	return due;
}

/*
 * A lane's connection.  Each batch of a lane opened a connection of its
 * own (connect, HELLO, AUTH, the TLS handshake where the pod has TLS, the
 * namespace's NS_REGISTER) and closed it: a stream of forwards, or a
 * pass's copies refused busy, paid the handshakes once a batch.  Now the
 * lane's thread keeps its connection from one batch to the next while it
 * stays healthy, and waits for the next copies up to lane_idle_ns
 * (REPAIR_LANE_IDLE_MS) before it ends; the connection is closed
 *   - on an error (the batch's repair_conn_lost, a refusal, a failed
 *     registration: rpeer.failed),
 *   - when the member list changed since it was opened (the member may
 *     be another process at that address, or no longer ours to send to),
 *   - when the member closed it or sent what was not asked for (looked at
 *     before each reuse: readable while no answer is owed),
 *   - after lane_idle_ns without a batch, and on a stop (the thread ends).
 * Its namespaces' digests are kept with it (no NS_REGISTER again).  An
 * idle connection holds one of the tenant's --tenant-conns at the member
 * for up to REPAIR_LANE_IDLE_MS (doc/cluster.md "Forwarded replicas").
 */
#define REPAIR_LANE_IDLE_MS 250u

/* The member list's epoch now. */
static uint64_t repair_epoch(struct kvtd_repair *rp)
{
	struct kvtd_cluster *cl = &rp->srv->cluster;
	uint64_t e;

	pthread_mutex_lock(&cl->lock);
	e = cl->epoch;
	pthread_mutex_unlock(&cl->lock);
	return e;
}

/* May the lane's open connection r be used for another batch?  Nothing
 * may be readable on it: no answer is owed between batches, so a
 * readable socket is the member's close (its --idle-timeout, a restart)
 * or bytes not asked for; so is a TLS record decrypted and not read
 * (review45b). */
static bool repair_peer_reusable(const struct rpeer *r)
{
	struct pollfd pf = { .fd = r->p.fd, .events = POLLIN | POLLRDHUP };

	if (r->failed || r->fl_n || r->ex_tag || r->p.rlen > r->p.used || r->p.open_tags)
		return false;
	if (r->p.ssl && tlsio_pending(r->p.ssl)) /* decrypted, not yet read */
		return false;
	return poll(&pf, 1, 0) == 0;
}

/* What a kept connection holds (charged to --max-memory while kept):
 * its read buffer and, over TLS, a client SSL's established state with
 * the member's chain, its write buffer and a read buffer (tlsmem.h
 * TLS_PEER_MEM: measured on the client side, bench/peer_tls_mem.c; until
 * session 47 a server SSL's TLS_SSL_MEM, 10 KiB short of the state). */
static uint64_t repair_conn_bytes(const struct kvtd_peer *p)
{
	return (uint64_t)p->rcap + (p->ssl ? (uint64_t)TLS_PEER_MEM + TLS_RBUF : 0);
}

/* The lane's connection r closed if open, its charge (*charged) given
 * back. */
static void repair_lane_close(struct kvtd_repair *rp, struct rpeer *r, uint64_t *charged)
{
	if (r->open)
		kvtd_peer_close(&r->p);
	r->open = false;
	kvtd_mem_uncharge(rp->srv, *charged);
	*charged = 0;
}

/* May the lane keep its open connection r after a batch?  Its buffers
 * and TLS state are charged to --max-memory (*charged: what is, brought
 * to what it holds now); no room: false (it is closed, as a client's
 * connection is refused its buffers). */
static bool repair_lane_keep(struct kvtd_repair *rp, struct rpeer *r, uint64_t *charged)
{
	uint64_t want = repair_conn_bytes(&r->p);

	if (want > *charged) {
		if (!kvtd_mem_charge(rp->srv, want - *charged, false)) {
			atomic_fetch_add(&rp->lane_keep_refused, 1);
			return false;
		}
	} else {
		kvtd_mem_uncharge(rp->srv, *charged - want);
	}
	*charged = want;
	return true;
}

/* A lane's thread: its copies, a batch at a time, on one connection while
 * it stays healthy ("A lane's connection" above), until none wait for
 * lane_idle_ns (or the server stops). */
static void *repair_lane_main(void *arg)
{
	struct rlane *ln = arg;
	struct kvtd_repair *rp = ln->rp;
	struct kvtd_member m = { .weight = 1 };
	struct rpass ps = { .rp = rp, .m = &m, .n = 1, .self = 1, .fwd = true,
			    .stop_fd = rp->stop_fd };
	struct rpeer peer;
	uint64_t conn_epoch = 0, idle_since = kvtd_now_ns();
	uint64_t conn_charged = 0; /* the kept connection's charge (repair_lane_keep) */

	memset(&peer, 0, sizeof(peer));
	peer.p.fd = -1;
	for (;;) {
		struct rent *q = NULL;
		size_t n;
		uint64_t charged = 0, wake, now = kvtd_now_ns();

		pthread_mutex_lock(&rp->lock);
		if (rp->stop ||
		    (!ln->n && (!peer.open || now - idle_since >= rp->lane_idle_ns))) {
			ln->state = 2; /* joined by the repair thread */
			rp->lanes_ended++;
			pthread_cond_signal(&rp->cond);
			pthread_mutex_unlock(&rp->lock);
			repair_lane_close(rp, &peer, &conn_charged);
			return NULL;
		}
		if (!ln->n) {
			/* idle, its connection kept: until a push, the idle
			 * timeout or a stop (signalled under the lock) */
			struct timespec ts =
				kvtd_deadline(CLOCK_MONOTONIC, idle_since + rp->lane_idle_ns - now);
			pthread_cond_timedwait(&ln->cond, &rp->lock, &ts);
			pthread_mutex_unlock(&rp->lock);
			continue;
		}
		n = repair_lane_take_locked(rp, ln, now, &q, &charged, &wake);
		if (!n) {
			/* none due (the member's reservation full): until the
			 * first is, or a push or a stop (their signal is given
			 * under the lock: not missed; never rp->cond, whose
			 * signal a pass's untimed wait is owed) */
			struct timespec ts = kvtd_deadline(CLOCK_MONOTONIC,
							   wake > now ? wake - now : 0);
			pthread_cond_timedwait(&ln->cond, &rp->lock, &ts);
			pthread_mutex_unlock(&rp->lock);
			continue;
		}
		snprintf(m.addr, sizeof(m.addr), "%s", ln->addr);
		pthread_mutex_unlock(&rp->lock);

		if (peer.open && (repair_epoch(rp) != conn_epoch || !repair_peer_reusable(&peer) ||
				  strcmp(peer.p.addr, m.addr) != 0))
			repair_lane_close(rp, &peer, &conn_charged);
		if (peer.open) {
			atomic_fetch_add(&rp->lane_reused, 1);
			peer.reused = true;
			peer.reuse_in = peer.p.in_bytes;
		} else {
			memset(&peer, 0, sizeof(peer));
			peer.p.fd = -1;
			conn_epoch = repair_epoch(rp); /* (before it opens) */
		}
		ps.peers = &peer;
		ps.retry = false;
		ps.batch = q;
		ps.busy = calloc(n, 1); /* (n bytes: within charged, which counts the chg freed) */
		if (kvt_queue_create(rp->srv->store, &ps.q) < 0) {
			atomic_fetch_add(&rp->errors, 1);
		} else {
			qsort(q, n, sizeof(*q), rent_cmp); /* a namespace's together */
			/* Once again on a new connection if the kept one was
			 * found closed before any answer came (stale: the
			 * member closed it just after the reuse check).  Only
			 * then: no byte of an answer read, no PUT in flight --
			 * what went out was NS_REGISTER or EXISTS, which change
			 * nothing there; and a lane's PUTs (PLACED|REPAIR of
			 * immutable values) would be no-ops again anyway. */
			for (int again = 0; again < 2; again++) {
				peer.busy_tenant[0] = '\0';
				peer.stale = false;
				repair_member(&ps, 0, q, n, NULL, NULL);
				if (!peer.stale || again)
					break;
				atomic_fetch_add(&rp->lane_resent, 1);
				repair_lane_close(rp, &peer, &conn_charged);
				memset(&peer, 0, sizeof(peer));
				peer.p.fd = -1;
				conn_epoch = repair_epoch(rp);
				if (ps.busy)
					memset(ps.busy, 0, n);
			}
			kvt_queue_destroy(ps.q);
			ps.q = NULL;
		}
		if (peer.open && (peer.failed || rp->lane_idle_ns == 0 ||
				  !repair_lane_keep(rp, &peer, &conn_charged)))
			repair_lane_close(rp, &peer, &conn_charged);
		if (!peer.open)
			repair_lane_close(rp, &peer, &conn_charged); /* (its charge) */
		atomic_fetch_add(&rp->fwd_passes, 1);
		if (ps.busy)
			repair_lane_busy(rp, ln, q, ps.busy, n);
		free(ps.busy);
		ps.busy = NULL;
		free(q);
		kvtd_mem_uncharge(rp->srv, charged);
		idle_since = kvtd_now_ns();
	}
}

/* The lane of member addr: its own, else a new one, else (at
 * REPAIR_LANES_MAX) an idle one given to it; NULL if none.  Locked. */
static struct rlane *repair_lane_locked(struct kvtd_repair *rp, const char *addr)
{
	struct rlane *idle = NULL, *ln;

	for (unsigned i = 0; i < rp->lane_n; i++) {
		ln = rp->lanes[i];
		if (strcmp(ln->addr, addr) == 0)
			return ln;
		if (!idle && ln->state == 0 && !ln->n)
			idle = ln;
	}
	if (rp->lane_n < REPAIR_LANES_MAX && (ln = calloc(1, sizeof(*ln)))) {
		pthread_condattr_t ca;
		int rc = pthread_condattr_init(&ca);
		if (rc == 0) {
			/* due times are monotonic (kvtd_now_ns) */
			rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
			if (rc == 0)
				rc = pthread_cond_init(&ln->cond, &ca);
			pthread_condattr_destroy(&ca);
		}
		if (rc == 0) {
			ln->rp = rp;
			rp->lanes[rp->lane_n++] = ln;
			idle = ln;
		} else {
			free(ln);
		}
	}
	if (idle)
		snprintf(idle->addr, sizeof(idle->addr), "%s", addr);
	return idle;
}

/* A copy of e for lane ln, charging chg to its tenant's share, sent
 * tries times before (repair_lane_busy), to be sent at kvtd_now_ns() due
 * (0: at once): false if the lane is full or cannot grow (counted, a
 * first send's in forward_member_dropped or forward_mem_dropped, of
 * forward_dropped; one sent before is counted by the caller; the share
 * not charged).  Locked. */
static bool repair_lane_push_locked(struct kvtd_repair *rp, struct rlane *ln,
				    const struct rent *e, uint8_t chg, uint8_t tries, uint64_t due)
{
	if (ln->n >= REPAIR_LANE_MAX || (ln->n && ln->bytes + e->len > rp->lane_bytes)) {
		if (!tries)
			atomic_fetch_add(&rp->fwd_member_dropped, 1);
		return false;
	}
	if (ln->n == ln->cap) {
		size_t nc = ln->cap ? ln->cap * 2 : 64;
		uint64_t more = (uint64_t)(nc - ln->cap) * (sizeof(*ln->q) + 1);
		struct rent *nq = NULL;
		uint8_t *nchg = NULL;
		if (!kvtd_mem_charge(rp->srv, more, false)) {
			if (!tries)
				atomic_fetch_add(&rp->fwd_mem_dropped, 1);
			return false;
		}
		nq = realloc(ln->q, nc * sizeof(*nq));
		if (nq)
			ln->q = nq;
		nchg = nq ? realloc(ln->chg, nc) : NULL;
		if (nchg)
			ln->chg = nchg;
		if (!nq || !nchg) { /* ln->q may be the larger: cap stays */
			kvtd_mem_uncharge(rp->srv, more);
			if (!tries)
				atomic_fetch_add(&rp->fwd_mem_dropped, 1);
			return false;
		}
		ln->cap = nc;
		ln->charged += more;
	}
	ln->q[ln->n] = *e;
	ln->q[ln->n].tries = tries;
	ln->q[ln->n].heat = due;
	ln->chg[ln->n++] = chg;
	ln->bytes += e->len;
	rp->gfq[e->group] += chg;
	pthread_cond_signal(&ln->cond); /* its thread may wait for a due time */
	return true;
}

/* Hand the forwarded puts queued so far to the lanes of the other
 * members of their top in the current list, and start the lanes' threads
 * that are not running.  True if there were any. */
#define REPAIR_RANK_CHUNK 256u
static bool repair_forward(struct kvtd_repair *rp)
{
	struct kvtd_cluster *cl = &rp->srv->cluster;
	struct kvtd_member *m = NULL;
	struct placement *pl = NULL;
	struct rent *q;
	size_t qn;
	uint64_t charged, dropped = 0;
	unsigned n = 0, me = 0;
	const char *self;

	pthread_mutex_lock(&rp->lock);
	q = rp->fq;
	qn = rp->fq_n;
	charged = rp->fq_charged;
	rp->fq = NULL;
	rp->fq_n = rp->fq_cap = 0;
	rp->fq_charged = 0;
	pthread_mutex_unlock(&rp->lock);
	if (!qn) {
		free(q);
		kvtd_mem_uncharge(rp->srv, charged);
		return false;
	}
	m = repair_members_copy(cl, &n);
	self = cl->self_addr ? cl->self_addr : rp->self;
	if (!m || !self || n > PLACEMENT_MEMBERS_MAX ||
	    repair_place(rp, m, n, self, &pl, &me) < 0 || me == n) {
		/* not a member (yet, or any more): nothing of ours is placed */
		placement_free(pl);
		pl = NULL;
	}
	for (size_t at = 0; at < qn; at += REPAIR_RANK_CHUNK) {
		size_t cn = qn - at < REPAIR_RANK_CHUNK ? qn - at : REPAIR_RANK_CHUNK;
		unsigned top[REPAIR_RANK_CHUNK][PROTO_COPIES_MAX], k[REPAIR_RANK_CHUNK];

		/* ranked outside the lock: the loops queue meanwhile */
		for (size_t i = 0; pl && i < cn; i++)
			k[i] = placement_rank(pl, q[at + i].anchor, NULL, top[i], q[at + i].copies);
		pthread_mutex_lock(&rp->lock);
		for (size_t i = 0; i < cn; i++) {
			const struct rent *e = &q[at + i];
			unsigned others = 0, sent = 0;
			uint32_t share = e->copies - 1u, given = 0;

			/* its share moves to its lanes' copies (below) */
			repair_fwd_uncharge(rp, e->group, share);
			for (unsigned j = 0; pl && j < k[i]; j++)
				others += top[i][j] != me;
			for (unsigned j = 0; pl && j < k[i]; j++) {
				struct rlane *ln;
				uint32_t chg;
				if (top[i][j] == me)
					continue;
				/* copies - 1 spread over the others: the charge is
				 * what was asked, not what the pod holds */
				chg = share / others + (sent < share % others);
				ln = repair_lane_locked(rp, m[top[i][j]].addr);
				if (!ln)
					atomic_fetch_add(&rp->fwd_member_dropped, 1);
				if (ln && repair_lane_push_locked(rp, ln, e, (uint8_t)chg, 0, 0))
					given++;
				sent++;
			}
			if (given < (pl ? others : 1u))
				dropped++;
		}
		pthread_mutex_unlock(&rp->lock);
	}
	placement_free(pl);
	atomic_fetch_add(&rp->fwd_dropped, dropped);
	pthread_mutex_lock(&rp->lock);
	for (unsigned i = 0; i < rp->lane_n; i++) {
		struct rlane *ln = rp->lanes[i];
		if (ln->state != 0 || !ln->n || rp->stop)
			continue;
		if (pthread_create(&ln->th, NULL, repair_lane_main, ln) == 0)
			ln->state = 1;
	}
	pthread_mutex_unlock(&rp->lock);
	free(q);
	kvtd_mem_uncharge(rp->srv, charged); /* q is freed */
	free(m);
	return true;
}

/* Join the lanes whose threads are done (all: every lane's, waiting for
 * them: the server stops), restarting those given copies meanwhile, and
 * start an idle lane's that holds copies (its start failed). */
static void repair_lanes_join(struct kvtd_repair *rp, bool all)
{
	for (unsigned i = 0;; i++) {
		struct rlane *ln;
		int st;
		pthread_mutex_lock(&rp->lock);
		if (i >= rp->lane_n) {
			pthread_mutex_unlock(&rp->lock);
			return;
		}
		ln = rp->lanes[i];
		st = ln->state;
		/* An idle lane holding copies: its thread's start failed
		 * (repair_forward); try again, or its copies and their share of
		 * the tenant's wait for a forward that share then refuses. */
		if (st == 0 && !all && ln->n && !rp->stop &&
		    pthread_create(&ln->th, NULL, repair_lane_main, ln) == 0)
			ln->state = 1;
		pthread_mutex_unlock(&rp->lock);
		if (st == 0 || (st == 1 && !all))
			continue;
		pthread_join(ln->th, NULL); /* past its last lock, or soon (stop) */
		pthread_mutex_lock(&rp->lock);
		ln->state = 0;
		if (!all && ln->n && !rp->stop &&
		    pthread_create(&ln->th, NULL, repair_lane_main, ln) == 0)
			ln->state = 1;
		pthread_mutex_unlock(&rp->lock);
	}
}

static void *repair_main(void *arg)
{
	struct kvtd_repair *rp = arg;
	struct kvtd_cluster *cl = &rp->srv->cluster;
	uint64_t seen = 0, due = 0;
	bool pending = false;

	while (!repair_stopping(rp)) {
		uint64_t now = kvtd_now_ns(), epoch;
		struct kvtd_member *m = NULL;
		unsigned n = 0;
		const char *self;
		int drain;

		pthread_mutex_lock(&rp->lock);
		drain = rp->drain_req;
		rp->drain_req = 0;
		pthread_mutex_unlock(&rp->lock);
		if (drain) {
			repair_drain(rp, drain == 2);
			continue;
		}

		pthread_mutex_lock(&cl->lock);
		epoch = cl->epoch;
		pthread_mutex_unlock(&cl->lock);
		if (epoch != seen) {
			/* The list changed: heal once it stayed so for the grace
			 * period (a member back within it needs nothing). */
			seen = epoch;
			pending = true;
			due = now + rp->grace_ns;
		}
		if (!rp->rate)
			pending = false; /* --repair-rate 0: healing off */
		atomic_store(&rp->pending, pending);
		if (pending && now >= due && rp->rate) {
			m = repair_members_copy(cl, &n);
			self = cl->self_addr ? cl->self_addr : rp->self;
			if (m && self && repair_pass(rp, m, n, self, false))
				pending = false;
			else
				due = kvtd_now_ns() + (uint64_t)REPAIR_RETRY_MS * 1000000;
			free(m);
			continue;
		}
		repair_lanes_join(rp, false);
		if (repair_forward(rp))
			continue;
		pthread_mutex_lock(&rp->pace_lock);
		repair_busy(rp, kvtd_now_ns(), false); /* follow the clients between passes too */
		pthread_mutex_unlock(&rp->pace_lock);
		/* A tick, or until a forward is queued. */
		pthread_mutex_lock(&rp->lock);
		if (!rp->fq_n && !rp->stop) {
			struct timespec ts =
				kvtd_deadline(CLOCK_REALTIME, REPAIR_TICK_MS * 1000000ull);
			pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
		}
		pthread_mutex_unlock(&rp->lock);
	}
	repair_lanes_join(rp, true); /* rp->stop_fd is written: they are back at once */
	return NULL;
}

int kvtd_repair_start(struct kvtd_server *srv)
{
	struct kvtd_repair *rp;
	if (srv->cluster.source == KVTD_CLUSTER_NONE)
		return 0; /* no pod */
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->srv = srv;
	rp->tomb_ns = REPAIR_TOMB_NS;
	{
		const char *env = getenv("KVTD_TEST_TOMB_MS");
		if (env && atoi(env) > 0)
			rp->tomb_ns = (uint64_t)atoi(env) * 1000000;
		rp->lane_bytes = REPAIR_LANE_BYTES;
		env = getenv("KVTD_TEST_LANE_BYTES"); /* test_peer_attack fwd_lane */
		if (env && atoi(env) > 0)
			rp->lane_bytes = (uint64_t)atoi(env);
		rp->lane_idle_ns = REPAIR_LANE_IDLE_MS * 1000000ull;
		/* test_peer_attack lane_reuse, bench lane_bench (0: a
		 * connection a batch, as before) */
		env = getenv("KVTD_TEST_LANE_IDLE_MS");
		if (env && atoi(env) >= 0)
			rp->lane_idle_ns = (uint64_t)atoi(env) * 1000000ull;
	}
	rp->cap = 1024;
	rp->tab = calloc(rp->cap, sizeof(*rp->tab));
	if (!rp->tab) {
		free(rp);
		return -ENOMEM;
	}
	rp->tab_charged = rp->cap * sizeof(*rp->tab);
	kvtd_mem_charge(srv, rp->tab_charged, true);
	kvt_mem_init(&rp->mem);
	/* Our name in the list: etcd's self_addr, else --advertise, else the
	 * native TCP listener (as members.c registers it). */
	if (srv->cfg.advertise)
		snprintf(rp->self, sizeof(rp->self), "%s", srv->cfg.advertise);
	for (unsigned i = 0; !rp->self[0] && i < srv->listener_count; i++)
		if (!srv->listeners[i].is_unix && srv->listeners[i].proto == KVTD_PROTO_NATIVE)
			snprintf(rp->self, sizeof(rp->self), "%s", srv->listeners[i].name);
	pthread_mutex_init(&rp->lock, NULL);
	pthread_mutex_init(&rp->pace_lock, NULL);
	pthread_mutex_init(&rp->poll_lock, NULL);
	pthread_cond_init(&rp->cond, NULL);
	rp->stop_fd = -1;
	rp->pass_fd = -1;
	srv->repair = rp;
	{
		pthread_condattr_t ca;
		int rc = pthread_condattr_init(&ca);
		if (rc == 0) {
			/* the poll's deadlines are monotonic: a condition on
			 * CLOCK_REALTIME would wait them out wrong, silently */
			rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
			if (rc == 0)
				rc = pthread_cond_init(&rp->poll_cond, &ca);
			pthread_condattr_destroy(&ca);
		}
		rp->poll_cond_made = rc == 0;
		if (rc == 0 && (rp->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			rc = errno;
		if (rc != 0) {
			kvtd_repair_stop(srv);
			return -rc;
		}
	}
	rp->grace_ns = (uint64_t)(srv->cfg.repair_grace_set ? srv->cfg.repair_grace_ms :
				  REPAIR_GRACE_MS) * 1000000;
	rp->rate = srv->cfg.repair_rate_set ? srv->cfg.repair_rate : REPAIR_RATE;
	rp->idle_rate = srv->cfg.repair_idle_rate_set ? srv->cfg.repair_idle_rate : 0;
	if (srv->cfg.drain_budget_set) {
		rp->drain_budget = srv->cfg.drain_budget;
	} else {
		uint64_t cap = 0;
		if (kvt_store_stat(srv->store, "dram.capacity_bytes", &cap) != KVT_OK)
			cap = srv->cfg.dram_bytes;
		rp->drain_budget = cap / REPAIR_DRAIN_BUDGET_DIV;
	}
	/* Either thread refused: kvtd_repair_stop joins what started and
	 * destroys the locks and both conditions, as at a normal stop. */
	if (pthread_create(&rp->thread, NULL, repair_main, rp) != 0) {
		kvtd_repair_stop(srv);
		return -EAGAIN;
	}
	rp->started = true;
	if (srv->cluster.source == KVTD_CLUSTER_STATIC) {
		if (pthread_create(&rp->poll_thread, NULL, repair_static_main, rp) != 0) {
			kvtd_repair_stop(srv);
			return -EAGAIN;
		}
		rp->poll_started = true;
	}
	kvtd_log(KVTD_INFO, "healing on",
		 "repair_grace_ms=%llu repair_rate=%llu repair_idle_rate=%llu drain_budget=%llu",
		 (unsigned long long)(rp->grace_ns / 1000000), (unsigned long long)rp->rate,
		 (unsigned long long)rp->idle_rate, (unsigned long long)rp->drain_budget);
	return 0;
}

void kvtd_repair_stop(struct kvtd_server *srv)
{
	struct kvtd_repair *rp = srv->repair;
	if (!rp)
		return;
	pthread_mutex_lock(&rp->lock);
	rp->stop = true;
	if (rp->pass_fd >= 0) /* a pass's connections wait on it, not on stop_fd */
		eventfd_write(rp->pass_fd, 1);
	for (unsigned i = 0; i < rp->lane_n; i++)
		pthread_cond_signal(&rp->lanes[i]->cond); /* waiting for a due time */
	pthread_mutex_unlock(&rp->lock);
	pthread_mutex_lock(&rp->poll_lock);
	if (rp->poll_cond_made)
		pthread_cond_broadcast(&rp->poll_cond);
	pthread_mutex_unlock(&rp->poll_lock);
	/* every peer connection's wait ends now (a member holding a question
	 * held this stop for the peer clocks: 5 s, 30 s) */
	if (rp->stop_fd >= 0 && eventfd_write(rp->stop_fd, 1) < 0)
		kvtd_log(KVTD_WARN, "repair: cannot wake the peer connections", "error=\"%s\"",
			 strerror(errno));
	if (rp->poll_started)
		pthread_join(rp->poll_thread, NULL);
	if (rp->started)
		pthread_join(rp->thread, NULL);
	srv->repair = NULL;
	pthread_mutex_destroy(&rp->lock);
	pthread_mutex_destroy(&rp->pace_lock);
	pthread_mutex_destroy(&rp->poll_lock);
	pthread_cond_destroy(&rp->cond);
	if (rp->poll_cond_made)
		pthread_cond_destroy(&rp->poll_cond);
	if (rp->stop_fd >= 0)
		close(rp->stop_fd);
	free(rp->fq);
	kvtd_mem_uncharge(srv, rp->fq_charged);
	for (unsigned i = 0; i < rp->lane_n; i++) { /* their threads joined by repair_main */
		free(rp->lanes[i]->q);
		free(rp->lanes[i]->chg);
		kvtd_mem_uncharge(srv, rp->lanes[i]->charged);
		pthread_cond_destroy(&rp->lanes[i]->cond);
		free(rp->lanes[i]);
	}
	kvtd_mem_uncharge(srv, rp->tab_charged);
	free(rp->tab);
	free(rp);
}

void kvtd_repair_stats(struct kvtd_server *srv,
		       void (*fn)(void *ctx, const char *name, uint64_t value), void *ctx)
{
	struct kvtd_repair *rp = srv->repair;
	uint64_t tracked;
	if (!rp)
		return;
	pthread_mutex_lock(&rp->lock);
	tracked = rp->blocks;
	pthread_mutex_unlock(&rp->lock);
	fn(ctx, "repair.tracked", tracked);
	fn(ctx, "repair.pending", atomic_load(&rp->pending));
	fn(ctx, "repair.passes", atomic_load(&rp->passes));
	fn(ctx, "repair.checked", atomic_load(&rp->checked));
	fn(ctx, "repair.copied", atomic_load(&rp->copied));
	fn(ctx, "repair.bytes", atomic_load(&rp->bytes));
	fn(ctx, "repair.errors", atomic_load(&rp->errors));
	fn(ctx, "repair.gone", atomic_load(&rp->gone));
	fn(ctx, "repair.yields", atomic_load(&rp->yields));
	fn(ctx, "repair.tombstones", atomic_load(&rp->tombs));
	fn(ctx, "repair.refused", atomic_load(&rp->refused));
	fn(ctx, "repair.last_pass_ms", atomic_load(&rp->last_pass_ms));
	fn(ctx, "repair.rate", rp->rate);
	fn(ctx, "repair.idle_rate", rp->idle_rate);
	fn(ctx, "repair.drain_budget", rp->drain_budget);
	fn(ctx, "repair.drain_skipped", atomic_load(&rp->drain_skipped));
	fn(ctx, "repair.drain_state", (uint64_t)atomic_load(&rp->drain_state));
	fn(ctx, "repair.drains_incomplete", atomic_load(&rp->drains_incomplete));
	fn(ctx, "repair.drain_copied", atomic_load(&rp->drain_copied));
	fn(ctx, "repair.forward_queued", atomic_load(&rp->fwd_queued));
	fn(ctx, "repair.forward_passes", atomic_load(&rp->fwd_passes));
	fn(ctx, "repair.forwarded", atomic_load(&rp->fwd_copied));
	fn(ctx, "repair.forward_bytes", atomic_load(&rp->fwd_bytes));
	fn(ctx, "repair.forward_dropped", atomic_load(&rp->fwd_dropped));
	fn(ctx, "repair.forward_mem_dropped", atomic_load(&rp->fwd_mem_dropped));
	fn(ctx, "repair.forward_member_dropped", atomic_load(&rp->fwd_member_dropped));
	fn(ctx, "repair.forward_busy_retried", atomic_load(&rp->fwd_busy_retried));
	fn(ctx, "repair.forward_busy_dropped", atomic_load(&rp->fwd_busy_dropped));
	fn(ctx, "repair.busy_handed", atomic_load(&rp->busy_handed));
	fn(ctx, "repair.busy_dropped", atomic_load(&rp->busy_dropped));
	fn(ctx, "repair.cut", atomic_load(&rp->cut));
	fn(ctx, "repair.lane_connects", atomic_load(&rp->lane_connects));
	fn(ctx, "repair.lane_reused", atomic_load(&rp->lane_reused));
	fn(ctx, "repair.lane_conn_busy", atomic_load(&rp->lane_conn_busy));
	fn(ctx, "repair.pass_conn_busy", atomic_load(&rp->pass_conn_busy));
	fn(ctx, "repair.lane_resent", atomic_load(&rp->lane_resent));
	fn(ctx, "repair.lane_keep_refused", atomic_load(&rp->lane_keep_refused));
	fn(ctx, "repair.untracked", atomic_load(&rp->untracked));
	fn(ctx, "repair.tenant_capped", atomic_load(&rp->tenant_capped));
	fn(ctx, "repair.forward_tenant_dropped", atomic_load(&rp->fwd_tenant_dropped));
	fn(ctx, "repair.copies_clamped", atomic_load(&rp->copies_clamped));
	fn(ctx, "repair.max_copies", srv->cfg.max_copies ? srv->cfg.max_copies : PROTO_COPIES_MAX);
}

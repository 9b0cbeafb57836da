/*
 * ops.c - the protocol: what kvtierd does with each request frame, from
 * the parsed frame to the response queued on the connection.
 *
 * A frame (struct kvtd_frame) is born complete -- header, table and data
 * section received -- and lives until its response is queued (or its
 * connection died).  Its items become struct kvt_req, submitted to the
 * store in one kvt_submit through the loop's queue; the frame counts what
 * it has in flight (pending) and answers when that drops to zero, so the
 * frames of one connection complete in any order (a DRAM hit never waits
 * behind an SSD read).  Every item has its own status.
 *
 * Values -- PUT items from the data section, GET responses from pinned
 * DRAM views and their part tables -- are value.c's.
 *
 * Tenants: a connection may name only namespaces whose canonical text says
 * tenant=<its tenant>, and, read-only, those a grant of the tenants file
 * gives it (auth.c).  Anything else -- unknown or another tenant's -- is
 * KVT_ENONS, the same answer, so nothing leaks whether a digest exists; a
 * PUT, DELETE or CLEAR in a granted namespace is PROTO_EPERM (counted as
 * errors.permission), and a GET there is quiet (KVT_F_QUIET): it neither
 * promotes the block nor refreshes its recency, so no grantee can time or
 * see what another one read (doc/security.md).  What a
 * connection learned is cached per digest until the tenants table changes
 * (SIGHUP), so a revoked grant holds for no new request.
 *
 * Threads: the loop that owns the frame's connection, except
 * ops_aux_run (the aux thread, while the loop does not touch the
 * frame).  No locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kvtierd.h"
#include "repair.h"

/* ------------------------------------------------------------------------
 * Frames and items
 */

static struct kvtd_server *ops_srv(const struct kvtd_frame *fr)
{
	return fr->loop->srv;
}

/* A fatal error for the connection: the error frame, then close. */
static void ops_fail(struct kvtd_frame *fr, int status, const char *msg)
{
	kvtd_conn_fail(fr->conn, fr->f.op, fr->f.tag, status, msg);
	kvtd_frame_free(fr);
}

struct kvtd_frame *kvtd_frame_new(struct kvtd_conn *c, uint8_t *hdr, uint64_t hdr_len)
{
	struct kvtd_frame *fr = calloc(1, sizeof(*fr));
	int rc;

	if (!fr) {
		free(hdr);
		return NULL;
	}
	fr->conn = c;
	fr->loop = c->loop;
	fr->start_ns = kvtd_now_ns();
	fr->hdr = hdr;
	fr->hdr_len = hdr_len;
	/* The loop parsed these bytes already: this cannot fail. */
	rc = proto_parse_request(hdr, hdr_len, &c->loop->srv->lim, &fr->f);
	if (rc != 0) {
		free(hdr);
		free(fr);
		return NULL;
	}
	fr->tstat = c->state == KVTD_CS_READY ? kvtd_tstat_of(c) : NULL;
	c->inflight++;
	c->loop->live_frames++;
	return fr;
}

/*
 * Charge n more bytes to fr: to --max-memory, and count them in its
 * tenant's input (in_charged).  Refused, nothing charged: past the budget
 * (-ENOBUFS), or past the tenant's input share (KVTD_IN_TENANT_MAX) held
 * by its other frames (-EDQUOT; a tenant's frame alone is always taken,
 * the budget still bounding it, so that a tenant makes progress).  Every
 * charge of a frame is held to the share -- its table, its items, its
 * data section: frames pipelined on several connections, each charged
 * its table and its items (~600 bytes each), took the whole budget from
 * one tenant (test_hostile in_share), and so did PUTs whose items the
 * share refused, their data sections charged to the budget alone
 * (in_share_data).  While the share is held, a tenant's connections with
 * frames in flight are not read either (loop.c kvtd_conn_in_share_over).
 */
int kvtd_frame_charge(struct kvtd_frame *fr, uint64_t n, bool force)
{
	int rc = kvtd_in_charge(ops_srv(fr), fr->tstat, fr->mem_charged, n, force);

	if (rc == 0)
		fr->mem_charged += n;
	return rc;
}

void kvtd_frame_uncharge(struct kvtd_frame *fr, uint64_t n)
{
	kvtd_in_uncharge(ops_srv(fr), fr->tstat, n);
	fr->mem_charged -= n;
}

void kvtd_frame_set_data(struct kvtd_frame *fr, uint8_t *data)
{
	fr->data = data;
}

uint64_t kvtd_frame_data_len(const struct kvtd_frame *fr)
{
	return fr->f.data_len;
}

uint8_t *kvtd_frame_data(struct kvtd_frame *fr)
{
	return fr->data;
}

struct kvtd_loop *kvtd_frame_loop(const struct kvtd_frame *fr)
{
	return fr->loop;
}

static void ops_item_release(struct kvtd_server *srv, struct kvtd_item *it)
{
	if (it->pinned)
		kvtd_value_item_unpin(srv, it);
	if (it->reserved && it->fr)
		kvtd_value_put_abort(it->fr, it);
	free(it->iov);
	free(it->crcs);
	free(it->lens);
	free(it->canon);
	free(it->desc_store);
	it->iov = NULL;
	it->crcs = NULL;
	it->lens = NULL;
	it->canon = NULL;
	it->desc_store = NULL;
}

static void ops_order_release(struct kvtd_frame *fr);

/* Free a frame whose requests are all back. */
void kvtd_frame_free(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;

	for (uint32_t i = 0; i < fr->n && fr->items; i++)
		ops_item_release(srv, &fr->items[i]);
	for (uint32_t i = 0; i < fr->sub_count; i++)
		ops_item_release(srv, &fr->subs[i]);
	free(fr->items);
	free(fr->subs);
	free(fr->quiet_q);
	free(fr->flush);
	kvtd_value_vcache_free(fr);
	free(fr->keys);
	free(fr->tiers);
	free(fr->ns_ids);
	free(fr->ns_err);
	free(fr->ns_ro);
	free(fr->data);
	free(fr->hdr);
	kvtd_frame_uncharge(fr, fr->mem_charged);
	kvtd_clear_release(fr->clear_slot);
	ops_order_release(fr);
	fr->loop->live_frames--;
	free(fr);
	kvtd_conn_frame_done(c);
}

/* ------------------------------------------------------------------------
 * Namespaces a connection names
 */

/* Keyed: a digest's bytes are the client's to choose (a text's SHA-256
 * tried until it fits, doc/security.md "Session 44"). */
static uint64_t ops_ns_hash(const struct kvtd_conn *c, const uint8_t *digest)
{
	return kvtd_key_hash(c->loop->srv->key_secret, 0, digest, PROTO_DIGEST_LEN);
}

void kvtd_ns_cache_free(struct kvtd_conn *c)
{
	free(c->ns);
	c->ns = NULL;
	c->ns_cap = c->ns_used = 0;
}

static struct kvtd_nsent *ops_ns_cache_find(struct kvtd_conn *c, const uint8_t *digest)
{
	if (!c->ns_cap)
		return NULL;
	for (unsigned i = 0, p = (unsigned)ops_ns_hash(c, digest) & (c->ns_cap - 1); i < c->ns_cap;
	     i++, p = (p + 1) & (c->ns_cap - 1)) {
		if (!c->ns[p].used)
			return NULL;
		if (memcmp(c->ns[p].digest, digest, PROTO_DIGEST_LEN) == 0)
			return &c->ns[p];
	}
	return NULL;
}

/*
 * The cache's size, at most: 256 slots (10 KB), half of them used before
 * it starts over.  It is per connection, outside --max-memory, and kept
 * while the connection idles; at 8,192 slots one tenant's 1,024
 * namespaces, named on each of its connections, cost 84 KB of RSS a
 * connection (release): 1,024 connections (--tenant-conns) 84 MiB beside
 * a budget of 32M (test_hostile `ns_cache`; redteam35).  An engine names
 * a few namespaces; a client naming more than 128 has them looked up
 * again (a hash lookup and the text's compare each), as any miss is.
 */
#define OPS_NS_CACHE_SLOTS 256u

static void ops_ns_cache_add(struct kvtd_conn *c, const uint8_t *digest, uint32_t id, bool allowed,
			     bool readonly)
{
	unsigned p;

	if (c->ns_used * 2 >= c->ns_cap) {
		unsigned ncap = c->ns_cap ? c->ns_cap * 2 : 16;
		struct kvtd_nsent *old = c->ns;
		unsigned ocap = c->ns_cap;
		if (ncap > OPS_NS_CACHE_SLOTS) {
			/* A connection naming this many namespaces: start over. */
			memset(c->ns, 0, c->ns_cap * sizeof(*c->ns));
			c->ns_used = 0;
		} else {
			struct kvtd_nsent *n = calloc(ncap, sizeof(*n));
			if (!n)
				return; /* not cached: checked again next time */
			c->ns = n;
			c->ns_cap = ncap;
			c->ns_used = 0;
			for (unsigned i = 0; i < ocap; i++)
				if (old[i].used)
					ops_ns_cache_add(c, old[i].digest, old[i].id,
							 old[i].allowed, old[i].readonly);
			free(old);
		}
	}
	p = (unsigned)ops_ns_hash(c, digest) & (c->ns_cap - 1);
	while (c->ns[p].used)
		p = (p + 1) & (c->ns_cap - 1);
	memcpy(c->ns[p].digest, digest, PROTO_DIGEST_LEN);
	c->ns[p].id = id;
	c->ns[p].allowed = allowed;
	c->ns[p].readonly = readonly;
	c->ns[p].used = true;
	c->ns_used++;
}

/* Is canonical text's tenant equal to name? */
static bool ops_canon_is_tenant(const char *canon, size_t len, const char *name, size_t nlen)
{
	const char *t;
	int tl = kvtd_canon_tenant(canon, len, &t);
	return tl > 0 && (size_t)tl == nlen && memcmp(t, name, nlen) == 0;
}

/* Does a grant give this connection's tenant read access to the namespace
 * with this canonical text? */
static bool ops_canon_granted(const struct kvtd_conn *c, const char *canon, size_t len,
			      const uint8_t *digest)
{
	struct kvt_ns_desc d;
	char store[PROTO_CANON_MAX + 1];
	const char *owner;
	int ol = kvtd_canon_tenant(canon, len, &owner);

	if (ol <= 0 || len > PROTO_CANON_MAX || kvtd_canon_parse(canon, len, &d, store) < 0)
		return false;
	return kvtd_grant_allows(owner, (size_t)ol, d.model, strlen(d.model), digest, c->tenant,
				 c->tenant_len);
}

/* A tenants table newer than what the cache was filled under: forget it. */
static void ops_ns_cache_check(struct kvtd_conn *c)
{
	uint64_t gen = kvtd_auth_generation();
	if (c->ns_gen == gen)
		return;
	if (c->ns_cap)
		memset(c->ns, 0, c->ns_cap * sizeof(*c->ns));
	c->ns_used = 0;
	c->ns_gen = gen;
}

/*
 * The store id of a digest this connection may use: 0 with *id, or
 * KVT_ENONS (unknown, or not this tenant's and not granted: the same
 * answer).  *readonly (may be NULL): granted, not its own.  any_tenant: an
 * admin naming any namespace (CLEAR); *readonly is then false.
 */
static int ops_ns_resolve(struct kvtd_conn *c, const uint8_t *digest, bool any_tenant, uint32_t *id,
			  bool *readonly)
{
	struct kvtd_server *srv = c->loop->srv;
	struct kvtd_nsent *e;
	char canon[PROTO_CANON_MAX + 1];
	uint8_t dg[PROTO_DIGEST_LEN];
	bool allowed, ro = false;
	int rc;

	ops_ns_cache_check(c);
	e = ops_ns_cache_find(c, digest);
	if (readonly)
		*readonly = false;
	if (e && ((e->allowed && !(any_tenant && e->readonly)) || !any_tenant)) {
		*id = e->id;
		if (readonly)
			*readonly = e->readonly;
		return e->allowed ? 0 : KVT_ENONS;
	}
	rc = kvt_ns_find(srv->store, digest, id);
	if (rc != 0)
		return KVT_ENONS; /* unknown now; it may be registered later: not cached */
	rc = kvt_ns_info(srv->store, *id, dg, canon, sizeof(canon));
	if (rc < 0 || (size_t)rc >= sizeof(canon))
		return KVT_ENONS;
	allowed = ops_canon_is_tenant(canon, (size_t)rc, c->tenant, c->tenant_len);
	if (!allowed && ops_canon_granted(c, canon, (size_t)rc, digest))
		allowed = ro = true;
	if (!e)
		ops_ns_cache_add(c, digest, *id, allowed, ro);
	if (any_tenant)
		return 0;
	if (readonly)
		*readonly = ro;
	return allowed ? 0 : KVT_ENONS;
}

/* Resolve the frame's namespace table: ns_ids[i] / ns_err[i].  write: the
 * items change the namespace (PUT, DELETE), which a grant does not allow. */
static int ops_ns_table(struct kvtd_frame *fr, bool write)
{
	uint32_t n = fr->f.ns_count;

	fr->ns_ids = calloc(n, sizeof(*fr->ns_ids));
	fr->ns_err = calloc(n, sizeof(*fr->ns_err));
	fr->ns_ro = calloc(n, sizeof(*fr->ns_ro));
	if (!fr->ns_ids || !fr->ns_err || !fr->ns_ro)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		bool ro = false;
		fr->ns_err[i] = ops_ns_resolve(fr->conn, fr->f.ns + (size_t)i * PROTO_DIGEST_LEN,
					       false, &fr->ns_ids[i], &ro);
		fr->ns_ro[i] = fr->ns_err[i] == 0 && ro;
		if (fr->ns_ro[i] && write)
			fr->ns_err[i] = PROTO_EPERM;
	}
	return 0;
}

/* An item refused because its namespace is granted, not owned: counted,
 * one by one, as a permission error (server.errors.permission). */
static void ops_count_refused(struct kvtd_frame *fr, int status)
{
	if (status == PROTO_EPERM)
		KVTD_COUNT(ops_srv(fr), errors[KVTD_ERR_PERM], 1);
}

/* ------------------------------------------------------------------------
 * Submitting
 */

static void ops_finish(struct kvtd_frame *fr);
static void ops_aux_run(void *arg);
static void ops_aux_done(void *arg);

/* Submit the given items' requests: in one batch if the store takes it,
 * else one by one so each bad one gets its own status. */
static void ops_submit(struct kvtd_frame *fr, struct kvtd_item **its, uint32_t n)
{
	struct kvtd_loop *loop = fr->loop;
	struct kvt_req **reqs;
	int rc;

	if (n == 0)
		return;
	reqs = malloc(n * sizeof(*reqs));
	if (reqs) {
		for (uint32_t i = 0; i < n; i++) {
			its[i]->req.user_data = (uint64_t)(uintptr_t)its[i];
			reqs[i] = &its[i]->req;
		}
		rc = kvt_submit(loop->q, reqs, n);
		free(reqs);
		if (rc == (int)n) {
			for (uint32_t i = 0; i < n; i++)
				its[i]->submitted = true;
			fr->pending += n;
			return;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		struct kvt_req *r = &its[i]->req;
		r->user_data = (uint64_t)(uintptr_t)its[i];
		rc = kvt_submit(loop->q, &r, 1);
		if (rc == 1) {
			its[i]->submitted = true;
			fr->pending++;
		} else {
			its[i]->status = rc < 0 ? rc : -EIO;
		}
	}
}

/* ------------------------------------------------------------------------
 * One connection's writes in order (doc/protocol.md section 2, "Writes of
 * one connection").  A DELETE or CLEAR frame whose store requests are not
 * all back holds the frames behind it on its connection: nothing more is
 * parsed (or read: loop.c loop_conn_flow) until they are, so that a PUT
 * sent after it is applied after it.  A CLEAR's walks run on the
 * library's worker, and a PUT pipelined behind one was stored in DRAM at
 * once and then removed by the walk (10 to 19 of 20 rounds, test_kvtierd
 * order); a DELETE's requests complete inline on DRAM, the SSD and a
 * shared tier (only a tier that answers later, a remote one under the
 * server's store, leaves them in flight), and hold until the loop drains
 * its queue -- the same iteration (loop.c loop_settle).  Held until
 * applied, not until the durability flush (ops_durable), as RESP's DEL
 * and FLUSHDB (respd.c respd_hold_behind).
 * The frames held stay unparsed bytes in the read buffer (or the
 * socket): nothing is queued, and --conn-inflight and the input share
 * bound them as before.
 */
static void ops_order_hold(struct kvtd_frame *fr)
{
	if (fr->pending == 0 || fr->order_held)
		return;
	fr->order_held = true;
	fr->conn->order_hold++;
}

/* fr's store requests are back: the frames behind it go on. */
static void ops_order_release(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;

	if (!fr->order_held)
		return;
	fr->order_held = false;
	if (--c->order_hold == 0 && !c->dead) {
		kvtd_conn_flow(c);
		kvtd_conn_touch(c);
	}
}

/* ------------------------------------------------------------------------
 * HELLO, AUTH, PING, BYE
 */

static void ops_hello(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;
	const struct proto_hello *h = &fr->f.hello;
	struct proto_frame rf;
	struct kvtd_server *srv = ops_srv(fr);
	unsigned lo, hi, top = srv->cfg.protocol_max ? srv->cfg.protocol_max : PROTO_VERSION_MAX;
	static const char name[] = KVTD_NAME " " KVTD_VERSION;

	if (c->state != KVTD_CS_HELLO) {
		kvtd_reply_error(fr, KVT_ESTATE, "HELLO sent twice");
		kvtd_frame_free(fr);
		return;
	}
	lo = h->min_version > PROTO_VERSION_MIN ? h->min_version : PROTO_VERSION_MIN;
	hi = h->max_version < top ? h->max_version : top;
	if (lo > hi) {
		char msg[96];
		snprintf(msg, sizeof(msg), "no protocol version in common: this server speaks %u..%u",
			 PROTO_VERSION_MIN, top);
		ops_fail(fr, KVT_EVERSION, msg);
		return;
	}
	if (getrandom(c->nonce, sizeof(c->nonce), 0) != (ssize_t)sizeof(c->nonce)) {
		ops_fail(fr, -EIO, "no random bytes for the nonce");
		return;
	}
	c->version = (uint16_t)hi;
	c->state = KVTD_CS_AUTH;
	/* Another member's repair, or an admin's poll (daemon/peer.c): not
	 * client traffic for the repair's pacing (repair.c).  Only that. */
	c->pod_peer = h->name_len == 12 && memcmp(h->name, "kvtierd-peer", 12) == 0;
	kvtd_resp_init(fr, &rf, 0);
	rf.hello.min_version = PROTO_VERSION_MIN;
	rf.hello.max_version = (uint16_t)top;
	rf.hello.version = (uint16_t)hi;
	/* What a client may send only where announced (doc/protocol.md
	 * section 7): RETAIN, and FORWARD where this server forwards -- in a
	 * pod, with a member list to rank the copies by (repair.c). */
	if (hi >= PROTO_VERSION_CAPS)
		rf.hello.caps = PROTO_CAP_RETAIN | (srv->repair ? PROTO_CAP_FORWARD : 0);
	if (kvtd_auth_enabled()) {
		rf.hello.auth_count = 1;
		rf.hello.auth[0] = PROTO_AUTH_HMAC_SHA256;
	} else {
		rf.hello.auth_count = 1;
		rf.hello.auth[0] = PROTO_AUTH_NONE;
	}
	memcpy(rf.hello.nonce, c->nonce, PROTO_NONCE_LEN);
	rf.hello.limits = ops_srv(fr)->lim;
	/* What a frame may name here, not the codec's bound: a client that
	 * keeps to the announced limits is never answered PROTO_ECOUNT. */
	if (rf.hello.limits.items_max > KVTD_FRAME_ITEMS_MAX)
		rf.hello.limits.items_max = KVTD_FRAME_ITEMS_MAX;
	rf.hello.name = name;
	rf.hello.name_len = sizeof(name) - 1;
	kvtd_reply(fr, &rf, NULL, 0);
	kvtd_frame_free(fr);
}

static void ops_auth(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;
	struct kvtd_server *srv = ops_srv(fr);
	const struct proto_auth *a = &fr->f.auth;
	struct proto_frame rf;
	uint8_t proof[PROTO_PROOF_LEN];
	uint32_t role = PROTO_ROLE_TENANT;
	char tq[PROTO_TENANT_MAX * 4 + 8], tn[PROTO_TENANT_MAX + 1], msg[200];
	int rc;

	if (c->state == KVTD_CS_HELLO) {
		/* No nonce yet: this AUTH cannot succeed (a failed AUTH closes). */
		ops_fail(fr, KVT_ESTATE, "AUTH before HELLO");
		return;
	}
	if (c->state == KVTD_CS_READY) {
		kvtd_reply_error(fr, KVT_ESTATE, "AUTH sent twice");
		kvtd_frame_free(fr);
		return;
	}
	memcpy(tn, a->tenant, a->tenant_len);
	tn[a->tenant_len] = 0;
	memset(proof, 0, sizeof(proof));
	if (kvtd_auth_enabled()) {
		if (a->method != PROTO_AUTH_HMAC_SHA256 || kvtd_auth_throttled(c))
			rc = PROTO_EAUTH;
		else
			rc = kvtd_auth_check(a->tenant, a->tenant_len, c->nonce, a->nonce, a->proof,
					     proof, &role);
	} else {
		/* No tenants file: everyone is the default tenant, trusted. */
		rc = a->method == PROTO_AUTH_NONE ? 0 : PROTO_EAUTH;
		snprintf(tn, sizeof(tn), "%s", KVTD_DEFAULT_TENANT);
		role = PROTO_ROLE_ADMIN;
	}
	if (rc != 0) {
		kvtd_auth_failed(c);
		kvtd_log_client(KVTD_WARN, "authentication failed", "conn=%llu peer=%s tenant=%s",
			 (unsigned long long)c->id, c->peer,
			 kvtd_log_quote(tq, sizeof(tq), tn));
		ops_fail(fr, PROTO_EAUTH, "authentication failed");
		return;
	}
	if (!kvtd_tenant_conn_admit(c, tn, strlen(tn), msg, sizeof(msg))) {
		/* its tenant's --tenant-conns: KVT_EBUSY, as past --max-conns */
		ops_fail(fr, KVT_EBUSY, msg);
		return;
	}
	c->tenant_len = (uint32_t)strlen(tn);
	memcpy(c->tenant, tn, c->tenant_len + 1);
	c->role = role;
	kvtd_conn_ready(c);
	KVTD_COUNT(srv, auth_ok, 1);
	kvtd_log(KVTD_DEBUG, "authenticated", "conn=%llu peer=%s tenant=%s role=%s",
		 (unsigned long long)c->id, c->peer, kvtd_log_quote(tq, sizeof(tq), tn),
		 role == PROTO_ROLE_ADMIN ? "admin" : "tenant");
	kvtd_resp_init(fr, &rf, 0);
	rf.auth.role = role;
	memcpy(rf.auth.proof, proof, PROTO_PROOF_LEN);
	kvtd_reply(fr, &rf, NULL, 0);
	kvtd_frame_free(fr);
}

static void ops_simple(struct kvtd_frame *fr)
{
	struct proto_frame rf;

	if (fr->f.op == PROTO_OP_BYE) {
		/* Answered last: nothing more is read; the answer goes out once
		 * the frames before it are answered, then the server closes. */
		kvtd_conn_bye(fr->conn, fr->f.tag);
	} else {
		kvtd_resp_init(fr, &rf, 0);
		kvtd_reply(fr, &rf, NULL, 0);
	}
	kvtd_frame_free(fr);
}

/* DRAIN (admin): repair.c hands this server's blocks over and leaves the
 * pod; answered at once (progress: STATS repair.drain_state). */
static void ops_drain(struct kvtd_frame *fr)
{
	struct proto_frame rf;
	int rc;

	if (fr->conn->role != PROTO_ROLE_ADMIN) {
		kvtd_reply_error(fr, PROTO_EPERM, "drain needs the admin role");
	} else if ((rc = kvtd_repair_drain(ops_srv(fr),
					   fr->f.drain_mode == PROTO_DRAIN_EXIT)) < 0) {
		kvtd_reply_error(fr, rc, rc == -EALREADY ? "a drain is running" :
				 "drain needs a pod (--etcd or --members)");
	} else {
		kvtd_resp_init(fr, &rf, 0);
		kvtd_reply(fr, &rf, NULL, 0);
	}
	kvtd_frame_free(fr);
}

/* ------------------------------------------------------------------------
 * NS_REGISTER
 */

/* Would fresh more new namespaces pass c's tenant's quota? */
static bool ops_ns_quota_full(struct kvtd_conn *c, uint32_t fresh)
{
	struct kvtd_tstat *t = kvtd_tstat_of(c);

	return t && atomic_load_explicit(&t->ns_count, memory_order_relaxed) + fresh >=
			    KVTD_NS_TENANT_MAX;
}

/*
 * A frame's per-item state is charged to --max-memory with the frame
 * (fr->mem_charged, given back by kvtd_frame_free): an item is ~560 bytes
 * of struct kvtd_item (and a LOOKUP's key) against ~30 in the table that
 * was charged, so a GET of 65536 keys held 36 MiB outside the budget for
 * as long as it waited (for an SSD read, or for its pins to drain), and a
 * connection has up to --conn-inflight frames.  It is held to the
 * tenant's input share too (kvtd_frame_charge): one tenant's GET frames of
 * 12,000 keys left waiting on 6 connections held the whole budget, every
 * other tenant's next frame refused (test_hostile in_share).  false: over
 * the budget or the share (counted in mem_refused; nothing charged).
 */
static bool ops_items_charge(struct kvtd_frame *fr, uint64_t per_item)
{
	struct kvtd_server *srv = ops_srv(fr);
	uint64_t cost = (uint64_t)fr->n * per_item;

	if (fr->conn->state != KVTD_CS_READY)
		return true; /* before AUTH: no items (native.c refuses such frames) */
	if (kvtd_frame_charge(fr, cost, false) < 0) {
		KVTD_COUNT(srv, mem_refused, 1);
		return false;
	}
	return true;
}

#define OPS_MEM_MSG "server memory limit reached (--max-memory) for the frame's items; retry later"

static void ops_ns_register(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;
	struct proto_iter iter;
	struct proto_item pi;
	bool aux = false;
	uint32_t i = 0, fresh = 0;
	uint64_t texts = 0;
	char *canon = NULL;

	fr->n = fr->f.item_count;
	if (!ops_items_charge(fr, sizeof(*fr->items))) {
		kvtd_reply_error(fr, -ENOMEM, OPS_MEM_MSG);
		kvtd_frame_free(fr);
		return;
	}
	fr->items = calloc(fr->n, sizeof(*fr->items));
	canon = malloc(PROTO_CANON_MAX + 1);
	if (!fr->items || !canon) {
		free(canon);
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		kvtd_frame_free(fr);
		return;
	}
	/* The tenants table the grants below are checked under. */
	fr->auth_gen = kvtd_auth_generation();
	proto_iter_init(&iter, &fr->f, NULL, NULL, 0);
	while (i < fr->n && proto_iter_next(&iter, &pi) == 1) {
		struct kvtd_item *it = &fr->items[i++];
		int rc;

		it->fr = fr;
		it->desc_store = malloc(pi.text_len + 1);
		if (!it->desc_store) {
			it->status = -ENOMEM;
			continue;
		}
		texts += pi.text_len + 1;
		rc = kvtd_canon_parse(pi.text, pi.text_len, &it->desc, it->desc_store);
		if (rc < 0) {
			it->status = rc;
			continue;
		}
		/* The tenant is the authenticated identity, never the client's --
		 * unless the client names another tenant whose namespace a
		 * grant lets it read: then it gets that namespace's digest. */
		if (it->desc.tenant && strcmp(it->desc.tenant, c->tenant) != 0 &&
		    kvt_ns_digest(&it->desc, it->digest, NULL, 0) >= 0 &&
		    kvtd_grant_allows(it->desc.tenant, strlen(it->desc.tenant), it->desc.model,
				      strlen(it->desc.model), it->digest, c->tenant,
				      c->tenant_len))
			it->granted = true;
		else
			it->desc.tenant = c->tenant;
		rc = kvt_ns_digest(&it->desc, it->digest, canon, PROTO_CANON_MAX + 1);
		if (rc < 0 || rc > (int)PROTO_CANON_MAX) {
			it->status = rc < 0 ? rc : KVT_EDESC;
			continue;
		}
		/* Its own copy, of its own length (not PROTO_CANON_MAX each). */
		it->canon = malloc((size_t)rc + 1);
		if (!it->canon) {
			it->status = -ENOMEM;
			continue;
		}
		memcpy(it->canon, canon, (size_t)rc + 1);
		texts += (uint64_t)rc + 1;
		it->canon_len = (uint32_t)rc;
		rc = kvt_ns_find(srv->store, it->digest, &it->ns_id);
		if (rc == 0) {
			it->status = KVT_OK;
		} else if (rc == KVT_MISS && it->granted) {
			/* A grant lets the grantee read the owner's namespaces,
			 * not create them in the owner's name (only the owner
			 * writes, and registering is a write). */
			it->status = KVT_ENONS;
			KVTD_COUNT(srv, errors[KVTD_ERR_PERM], 1);
		} else if (rc == KVT_MISS && ops_ns_quota_full(c, fresh)) {
			/* At most KVTD_NS_TENANT_MAX namespaces per tenant. */
			it->status = KVT_EFULL;
			KVTD_COUNT(srv, ns_refused, 1);
		} else if (rc == KVT_MISS) {
			/* New: registering persists the registry (fsync). */
			it->need_register = true;
			fresh++;
			aux = true;
		} else {
			it->status = rc;
		}
	}
	free(canon);
	/* The items' texts (each descriptor's copy and its canonical text)
	 * held with the frame, charged with it: they are what the table was,
	 * about twice over, and wait with the frame for the registry's sync. */
	if (c->state == KVTD_CS_READY)
		kvtd_frame_charge(fr, texts, true);
	if (aux) {
		fr->pending++;
		kvtd_aux_submit(fr->loop, fr->tstat, ops_aux_run, ops_aux_done, fr);
		return;
	}
	ops_finish(fr);
}

static void ops_aux_run(void *arg)
{
	struct kvtd_frame *fr = arg;
	struct kvtd_server *srv = ops_srv(fr);

	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		if (!it->need_register)
			continue;
		it->status = kvt_ns_register(srv->store, &it->desc, &it->ns_id);
		/* Refused by the store (a full disk: the registry's append or
		 * rewrite found no room, doc/keys.md "Registry file"): the
		 * client's put then fails, and kvtier(1) sends its user here. */
		if (it->status < 0) {
			char tq[160], mq[600];
			kvtd_log_client(KVTD_WARN, "namespace not registered",
					"tenant=%s model=%s error=\"%s\"",
					kvtd_log_quote(tq, sizeof(tq),
						       it->desc.tenant ? it->desc.tenant : "-"),
					kvtd_log_quote(mq, sizeof(mq),
						       it->desc.model ? it->desc.model : "-"),
					kvt_strerror(it->status));
		}
		if (it->status == KVT_OK && fr->conn->tstat)
			atomic_fetch_add_explicit(&fr->conn->tstat->ns_count, 1,
						  memory_order_relaxed);
		/* Into its tenant's quota group before any put can reach it
		 * (the reply goes out after this). */
		if (it->status == KVT_OK) {
			int rc = kvtd_ns_apply_group(srv->store, it->ns_id);
			if (rc < 0)
				kvtd_log(KVTD_WARN, "namespace left out of its quota group",
					 "ns=%u error=\"%s\"", it->ns_id, kvt_strerror(rc));
		}
	}
}

static void ops_aux_done(void *arg)
{
	struct kvtd_frame *fr = arg;

	fr->pending--;
	if (fr->pending == 0)
		ops_finish(fr);
}

/* An answer's entry is at most its canonical text and 64 bytes of index,
 * status, digest and lengths; a frame names at most
 * KVTD_FRAME_ITEMS_MAX (native.c), so the answer fits one
 * table of the largest this server sends (kvtierd.c keeps the codec's
 * table_max).  It was split into frames of table_max, which became dead
 * code with that cap (attack14). */
_Static_assert((uint64_t)KVTD_FRAME_ITEMS_MAX * (PROTO_CANON_MAX + 64) <=
		       PROTO_DEF_TABLE_MAX,
	       "an NS_REGISTER answer fits one frame's table");

static void ops_ns_register_reply(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;
	struct proto_item *pis = calloc(fr->n, sizeof(*pis));
	struct proto_frame rf;

	if (!pis) {
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		return;
	}
	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		pis[i].index = i;
		/* The table changed while the frame waited (on the aux
		 * thread): a grant is checked again, and what was learned
		 * under the old table is not cached. */
		if (it->status == KVT_OK && it->granted && fr->auth_gen != kvtd_auth_generation() &&
		    !kvtd_grant_allows(it->desc.tenant, strlen(it->desc.tenant), it->desc.model,
				       strlen(it->desc.model), it->digest, c->tenant,
				       c->tenant_len))
			it->status = KVT_ENONS;
		pis[i].status = it->status; /* after the check: a refused item has no digest */
		if (it->status == KVT_OK) {
			pis[i].digest = it->digest;
			pis[i].text = it->canon;
			pis[i].text_len = it->canon_len;
			ops_ns_cache_check(c);
			if (fr->auth_gen == c->ns_gen && !ops_ns_cache_find(c, it->digest))
				ops_ns_cache_add(c, it->digest, it->ns_id, true, it->granted);
		}
	}
	/* One frame: the answer's entries fit one table (below). */
	kvtd_resp_init(fr, &rf, 0);
	kvtd_reply(fr, &rf, pis, fr->n);
	free(pis);
}

/* ------------------------------------------------------------------------
 * Keyed batches: EXISTS, DELETE, GET, PUT
 */

bool kvtd_put_prepare(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;
	struct proto_iter iter;
	struct proto_item pi;
	uint32_t i = 0;

	if (fr->f.op != PROTO_OP_PUT || fr->f.data_len == 0 || c->state != KVTD_CS_READY ||
	    fr->f.version != c->version)
		return false;
	fr->n = fr->f.item_count;
	if (!ops_items_charge(fr, sizeof(*fr->items))) {
		fr->n = 0;
		return false; /* the frame takes the other path, and is refused there */
	}
	fr->items = calloc(fr->n, sizeof(*fr->items));
	if (!fr->items || ops_ns_table(fr, true) < 0) {
		free(fr->items);
		free(fr->ns_ids);
		free(fr->ns_err);
		free(fr->ns_ro);
		fr->items = NULL;
		fr->ns_ids = NULL;
		fr->ns_err = NULL;
		fr->ns_ro = NULL;
		if (c->state == KVTD_CS_READY) /* ops_items_charge's, back */
			kvtd_frame_uncharge(fr, (uint64_t)fr->n * sizeof(*fr->items));
		fr->n = 0;
		return false;
	}
	proto_iter_init(&iter, &fr->f, NULL, NULL, 0);
	while (i < fr->n && proto_iter_next(&iter, &pi) == 1) {
		struct kvtd_item *it = &fr->items[i++];
		int rc = fr->ns_err[pi.ns_index];
		it->fr = fr;
		it->flags = pi.flags;
		it->rlen = pi.data_len;
		if (rc == 0 && pi.flags & PROTO_IF_REPAIR &&
		    kvtd_repair_refused(c->loop->srv, fr->ns_ids[pi.ns_index],
					kvtd_tenant_group(c->tenant, c->tenant_len), &pi.key))
			rc = -ECANCELED; /* a repair copy of a key deleted lately */
		if (rc == 0)
			rc = kvtd_value_put_reserve(fr, it, &pi, fr->ns_ids[pi.ns_index]);
		if (rc != 0)
			it->status = rc; /* its bytes are read and dropped */
		ops_count_refused(fr, rc);
	}
	fr->in_place = true;
	return true;
}

/* ------------------------------------------------------------------------
 * Quiet GETs (a grantee's reads, KVT_F_QUIET).  A block on SSD only is
 * read into a private copy (lib/ssd.c ssd_read_copy) that lives until its
 * response is written, so such reads are bounded here:
 *   - duplicate keys of one frame are read once: the later items share
 *     the first one's result (dup_of), and the response that uses the
 *     bytes last carries the pin (carries);
 *   - a frame has at most KVTD_QUIET_WINDOW of them in the store, the
 *     server KVTD_QUIET_INFLIGHT_MAX: what a frame cannot submit waits for
 *     its own completions (back-pressure), or, with none of its own in
 *     flight, is a miss;
 *   - a tenant holding KVTD_QUIET_TENANT_MAX of the server's takes more
 *     only while as many stay free: the rest are the other tenants' (with
 *     --tenants).  The server's were whoever's came first: one grantee's
 *     pipelines on 24 connections held them all, and another grantee's
 *     reads were misses, 59 of 60 (test_hostile quiet_share);
 *   - a completed copy is charged to --max-memory and to the connection
 *     (at most KVTD_COPY_CONN_MAX); one that does not fit is released and
 *     answered as a miss (copy_refused).  The charge goes with the pin to
 *     the response and back when it is written.
 */

/* Items of a frame with their (namespace, key), for duplicates: open
 * addressing over item indexes + 1, built while items are added. */
struct ops_dedup {
	uint32_t *slot;
	uint32_t cap;
};

static int ops_quiet_add(struct kvtd_frame *fr, struct kvtd_item *it)
{
	struct ops_dedup *d = (struct ops_dedup *)fr->keys; /* reused: GET has no keys */
	uint32_t idx = (uint32_t)(it - fr->items);

	if (!fr->quiet_q) {
		fr->quiet_q = malloc(fr->n * sizeof(*fr->quiet_q));
		d = calloc(1, sizeof(*d));
		if (d) {
			d->cap = 16;
			while (d->cap < 2 * fr->n)
				d->cap *= 2;
			d->slot = calloc(d->cap, sizeof(*d->slot));
		}
		if (!fr->quiet_q || !d || !d->slot) {
			if (d)
				free(d->slot);
			free(d);
			return -ENOMEM;
		}
		fr->keys = (struct kvt_key *)d;
	}
	for (uint64_t h = kvtd_key_hash(fr->loop->srv->key_secret, it->req.ns, it->req.key.bytes,
					  it->req.key.len);; h++) {
		uint32_t *sl = &d->slot[h & (d->cap - 1)];
		struct kvtd_item *o;
		if (*sl == 0) {
			*sl = idx + 1;
			fr->quiet_q[fr->quiet_n++] = it;
			return 0;
		}
		o = &fr->items[*sl - 1];
		if (o->req.ns == it->req.ns && o->req.key.len == it->req.key.len &&
		    memcmp(o->req.key.bytes, it->req.key.bytes, it->req.key.len) == 0) {
			it->dup_of = *sl;
			return 0;
		}
	}
}

/* Every item is added: the duplicates table is no longer needed. */
static void ops_quiet_dedup_done(struct kvtd_frame *fr)
{
	struct ops_dedup *d = (struct ops_dedup *)fr->keys;

	if (fr->f.op != PROTO_OP_GET || !d)
		return;
	free(d->slot);
	free(d);
	fr->keys = NULL;
}

/* The tenant whose quiet GETs a frame counts (KVTD_QUIET_TENANT_MAX):
 * with --tenants only, as the other shares. */
static _Atomic uint32_t *ops_quiet_tenant(struct kvtd_frame *fr)
{
	return fr->tstat && kvtd_auth_enabled() ? &fr->tstat->quiet : NULL;
}

/* Submit what the windows allow; with nothing of the frame in flight and
 * the server's window full (or its tenant's part of it), the rest are
 * misses. */
static void ops_quiet_more(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	_Atomic uint32_t *tq = ops_quiet_tenant(fr);

	while (fr->quiet_next < fr->quiet_n && fr->quiet_inflight < KVTD_QUIET_WINDOW) {
		struct kvtd_item *it = fr->quiet_q[fr->quiet_next];
		unsigned cur = atomic_load_explicit(&srv->quiet_inflight, memory_order_relaxed);
		unsigned max = KVTD_QUIET_INFLIGHT_MAX;
		if (tq && atomic_load_explicit(tq, memory_order_relaxed) >= KVTD_QUIET_TENANT_MAX)
			max -= KVTD_QUIET_TENANT_MAX; /* the others' */
		if (cur >= max)
			break;
		if (!atomic_compare_exchange_weak_explicit(&srv->quiet_inflight, &cur, cur + 1,
							   memory_order_relaxed,
							   memory_order_relaxed))
			continue;
		fr->quiet_next++;
		if (tq)
			atomic_fetch_add_explicit(tq, 1, memory_order_relaxed);
		ops_submit(fr, &it, 1);
		if (it->submitted) {
			fr->quiet_inflight++;
		} else {
			atomic_fetch_sub_explicit(&srv->quiet_inflight, 1, memory_order_relaxed);
			if (tq)
				atomic_fetch_sub_explicit(tq, 1, memory_order_relaxed);
		}
	}
	if (fr->quiet_inflight == 0)
		while (fr->quiet_next < fr->quiet_n) {
			fr->quiet_q[fr->quiet_next++]->status = KVT_MISS;
			KVTD_COUNT(srv, copy_refused, 1);
		}
}

/* A quiet GET completed: a private copy is charged, or let go. */
static void ops_quiet_done(struct kvtd_frame *fr, struct kvtd_item *it)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;

	fr->quiet_inflight--;
	atomic_fetch_sub_explicit(&srv->quiet_inflight, 1, memory_order_relaxed);
	if (ops_quiet_tenant(fr))
		atomic_fetch_sub_explicit(ops_quiet_tenant(fr), 1, memory_order_relaxed);
	if (it->pinned && it->tier == KVT_TIER_SSD) {
		uint64_t len = it->req.value_len, max = KVTD_COPY_CONN_MAX(srv);
		uint64_t tc = fr->tstat ? atomic_load_explicit(&fr->tstat->copies,
							       memory_order_relaxed) : 0;
		/* the connection's, and its tenant's all together (as S3's:
		 * a grantee's copies on 24 connections held all the budget,
		 * and another grantee's were refused, test_hostile
		 * quiet_share), a quarter of --max-memory each; the tenant's
		 * cut to its half with its other charges (loop.c
		 * kvtd_tenant_cap; test_hostile copies_sum) */
		uint64_t tmax = fr->tstat ? kvtd_tenant_cap(srv, fr->tstat, tc, max) : max;
		if (c->copy_bytes + len > max || (tc && tc + len > tmax) ||
		    !kvtd_mem_charge(srv, len, false)) {
			kvtd_value_item_unpin(srv, it);
			it->status = KVT_MISS;
			KVTD_COUNT(srv, copy_refused, 1);
		} else {
			it->copy_charged = len;
			c->copy_bytes += len;
			if (fr->tstat)
				atomic_fetch_add_explicit(&fr->tstat->copies, len,
							  memory_order_relaxed);
		}
	}
	ops_quiet_more(fr);
}

/* Before the reply: duplicates take their first item's result; the last
 * one to use a pinned result carries its pin (value.c). */
static void ops_quiet_resolve(struct kvtd_frame *fr)
{
	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i], *o;
		if (!it->dup_of)
			continue;
		o = &fr->items[it->dup_of - 1];
		it->status = o->status;
		it->tier = o->tier;
		if (o->status != KVT_OK)
			continue;
		it->req.pin = o->req.pin; /* a handle to read through: o owns it */
		it->req.view = o->req.view;
		it->req.view_count = o->req.view_count;
		it->req.length = o->req.length;
		it->req.value_len = o->req.value_len;
		it->req.value_flags = o->req.value_flags;
		if (o->pinned)
			o->carries = i + 1;
	}
}

static void ops_keyed(struct kvtd_frame *fr)
{
	unsigned op = fr->f.op;
	struct proto_iter iter;
	struct proto_item pi;
	struct kvtd_item **sub;
	uint32_t i = 0, ns = 0;
	int rc;

	if (fr->in_place) {
		/* The values are in their reservations: publish them. */
		kvtd_value_put_commit(fr);
		ops_finish(fr);
		return;
	}

	fr->n = fr->f.item_count;
	if (!ops_items_charge(fr, sizeof(*fr->items) + sizeof(*sub))) {
		kvtd_reply_error(fr, -ENOMEM, OPS_MEM_MSG);
		kvtd_frame_free(fr);
		return;
	}
	fr->items = calloc(fr->n, sizeof(*fr->items));
	sub = malloc(fr->n * sizeof(*sub));
	if (!fr->items || !sub ||
	    ops_ns_table(fr, op == PROTO_OP_PUT || op == PROTO_OP_DELETE) < 0) {
		free(sub);
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		kvtd_frame_free(fr);
		return;
	}
	proto_iter_init(&iter, &fr->f, NULL, NULL, 0);
	while (i < fr->n && proto_iter_next(&iter, &pi) == 1) {
		struct kvtd_item *it = &fr->items[i++];

		it->fr = fr;
		it->flags = pi.flags;
		it->part = pi.part;
		it->off = pi.off;
		it->len = pi.len;
		if (fr->ns_err[pi.ns_index]) {
			it->status = fr->ns_err[pi.ns_index];
			ops_count_refused(fr, it->status);
			continue;
		}
		it->req.ns = fr->ns_ids[pi.ns_index];
		it->req.key = pi.key;
		switch (op) {
		case PROTO_OP_EXISTS:
			it->req.op = KVT_OP_EXISTS;
			break;
		case PROTO_OP_DELETE:
			it->req.op = KVT_OP_DELETE;
			break;
		case PROTO_OP_GET:
			it->req.op = KVT_OP_GET_PINNED;
			/* A grantee's read leaves no trace another reader could
			 * time or see (doc/security.md, "Cross-tenant probing"). */
			if (fr->ns_ro[pi.ns_index]) {
				it->req.flags |= KVT_F_QUIET;
				it->quiet = true;
				if (ops_quiet_add(fr, it) < 0) {
					it->status = -ENOMEM;
					continue;
				}
				continue; /* submitted by ops_quiet_more */
			}
			break;
		case PROTO_OP_PUT:
			/* A repair copy of a key deleted lately: dropped. */
			if (pi.flags & PROTO_IF_REPAIR &&
			    kvtd_repair_refused(ops_srv(fr), it->req.ns,
						kvtd_tenant_group(fr->conn->tenant,
								  fr->conn->tenant_len),
						&pi.key)) {
				it->status = -ECANCELED;
				continue;
			}
			rc = kvtd_value_put_item(fr, it, &pi);
			if (rc < 0) {
				it->status = rc;
				continue;
			}
			break;
		}
		sub[ns++] = it;
	}
	ops_submit(fr, sub, ns);
	free(sub);
	if (op == PROTO_OP_DELETE)
		ops_order_hold(fr);
	ops_quiet_dedup_done(fr);
	ops_quiet_more(fr);
	if (fr->pending == 0)
		ops_finish(fr);
}

static void ops_keyed_reply(struct kvtd_frame *fr)
{
	struct proto_item *pis = calloc(fr->n, sizeof(*pis));
	struct proto_frame rf;
	uint32_t start = 0, per;

	if (!pis) {
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		return;
	}
	for (uint32_t i = 0; i < fr->n; i++) {
		pis[i].index = i;
		pis[i].status = fr->items[i].status;
		pis[i].tier = fr->items[i].status == KVT_OK ? fr->items[i].tier : 0;
	}
	/* EXISTS items take 12 bytes, PUT and DELETE 8: split only if the
	 * table would pass its limit. */
	per = (uint32_t)(ops_srv(fr)->lim.table_max / 12);
	if (per == 0)
		per = 1;
	do {
		uint32_t end = fr->n - start > per ? start + per : fr->n;
		kvtd_resp_init(fr, &rf, 0);
		if (end < fr->n)
			rf.flags |= PROTO_F_MORE;
		kvtd_reply(fr, &rf, pis + start, end - start);
		start = end;
	} while (start < fr->n);
	free(pis);
}

/* ------------------------------------------------------------------------
 * LOOKUP
 */

static void ops_lookup(struct kvtd_frame *fr)
{
	struct proto_iter iter;
	struct proto_item pi;
	struct kvtd_item *sub;
	uint32_t i = 0;

	fr->n = fr->f.item_count;
	if (!ops_items_charge(fr, sizeof(*fr->items) + sizeof(*fr->keys) + 1)) {
		kvtd_reply_error(fr, -ENOMEM, OPS_MEM_MSG);
		kvtd_frame_free(fr);
		return;
	}
	fr->keys = calloc(fr->n, sizeof(*fr->keys));
	fr->tiers = calloc(fr->n, 1);
	fr->items = calloc(fr->n, sizeof(*fr->items));
	fr->subs = calloc(1, sizeof(*fr->subs));
	if (!fr->keys || !fr->tiers || !fr->items || !fr->subs || ops_ns_table(fr, false) < 0) {
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		kvtd_frame_free(fr);
		return;
	}
	fr->sub_count = 1;
	if (fr->ns_err[0]) {
		/* Not this tenant's: every key a miss would leak nothing
		 * either, but say why. */
		kvtd_reply_error(fr, fr->ns_err[0], "unknown namespace");
		kvtd_frame_free(fr);
		return;
	}
	proto_iter_init(&iter, &fr->f, NULL, NULL, 0);
	while (i < fr->n && proto_iter_next(&iter, &pi) == 1)
		fr->keys[i++] = pi.key;
	sub = &fr->subs[0];
	sub->fr = fr;
	sub->req.op = KVT_OP_LOOKUP;
	sub->req.ns = fr->ns_ids[0];
	sub->req.keys = fr->keys;
	sub->req.key_count = fr->n;
	sub->req.tiers = fr->tiers;
	ops_submit(fr, &sub, 1);
	if (fr->pending == 0)
		ops_finish(fr);
}

static void ops_lookup_reply(struct kvtd_frame *fr)
{
	struct kvtd_item *sub = &fr->subs[0];
	struct proto_item *pis;
	struct proto_frame rf;

	if (sub->status < 0) {
		kvtd_reply_error(fr, sub->status, kvt_strerror(sub->status));
		return;
	}
	pis = calloc(fr->n, sizeof(*pis));
	if (!pis) {
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		return;
	}
	for (uint32_t i = 0; i < fr->n; i++) {
		bool hit = i < fr->hits && fr->tiers[i] != KVT_TIER_NONE;
		pis[i].index = i;
		pis[i].status = hit ? KVT_OK : KVT_MISS;
		pis[i].tier = hit ? fr->tiers[i] : 0;
	}
	kvtd_resp_init(fr, &rf, 0);
	rf.lookup.hits = fr->hits;
	rf.lookup.load_ns = fr->load_ns;
	kvtd_reply(fr, &rf, pis, fr->n);
	free(pis);
}

/* ------------------------------------------------------------------------
 * CLEAR
 *
 * A CLEAR's walks.  Each namespace a CLEAR names is a walk of the whole
 * DRAM and SSD indexes (every tenant's entries) on the library's worker
 * (KVT_F_DEFER; one thread unless --set workers=N), and every tenant's
 * acknowledged DELETE, CLEAR and FLUSHDB waits behind what is queued
 * there: its flush barrier comes after it (ops_durable).  A CLEAR of a
 * tenant's 1024 namespaces queued 1024 walks at once, with 560 bytes of
 * item each outside the budget, and a connection pipelines 256 frames:
 * another tenant's DELETE waited 1.2-2.3 s per such frame queued before
 * it (50,000 blocks in the store), 16 of them past the client's 20 s, and
 * one connection's 256 frames held 150 MiB (doc/security.md,
 * `clear_flood`).  So a frame's walks go one at a time, the next
 * submitted when the last is back (ops_clear_next); its items are charged
 * with the frame; and a tenant has at most KVTD_CLEAR_TENANT CLEARs in
 * progress, all its connections together (a frame that would walk; RESP
 * FLUSHDB, respd.c): past that one is refused at once, KVT_EBUSY, the
 * connection kept.  The worker's queue holds at most KVTD_CLEAR_TENANT
 * walks of each tenant.  (S3 DeleteBucket clears under its tenant's
 * listing slots, s3ops.c.)
 */

_Atomic uint32_t *kvtd_clear_acquire(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct kvtd_tstat *ts = kvtd_tstat_of(c);
	_Atomic uint32_t *slot = ts ? &ts->clears : &srv->clears_untracked;

	if (atomic_fetch_add_explicit(slot, 1, memory_order_relaxed) >= KVTD_CLEAR_TENANT) {
		atomic_fetch_sub_explicit(slot, 1, memory_order_relaxed);
		KVTD_COUNT(srv, clear_refused, 1);
		return NULL;
	}
	return slot;
}

void kvtd_clear_release(_Atomic uint32_t *slot)
{
	if (slot)
		atomic_fetch_sub_explicit(slot, 1, memory_order_relaxed);
}

/* Submit the frame's next walk not yet submitted (one in flight at a
 * time: top of the section); those that cannot be submitted keep their
 * error and the next is tried. */
static void ops_clear_next(struct kvtd_frame *fr)
{
	while (fr->sub_next < fr->sub_count) {
		struct kvtd_item *it = &fr->subs[fr->sub_next++];
		ops_submit(fr, &it, 1);
		if (it->submitted)
			return;
	}
}

static bool ops_is_own(const struct kvtd_conn *c, const char *t, uint32_t tl)
{
	return tl == 0 || (tl == c->tenant_len && memcmp(t, c->tenant, tl) == 0);
}

static void ops_clear(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;
	const struct proto_scope *s = &fr->f.scope;
	uint32_t id;
	bool ro = false;
	int rc;

	switch (s->scope) {
	case PROTO_SCOPE_NS:
		rc = ops_ns_resolve(c, s->digest, c->role == PROTO_ROLE_ADMIN, &id, &ro);
		if (rc < 0) {
			kvtd_reply_error(fr, rc, "unknown namespace");
			kvtd_frame_free(fr);
			return;
		}
		if (ro) {
			kvtd_reply_error(fr, PROTO_EPERM, "a granted namespace is read-only");
			kvtd_frame_free(fr);
			return;
		}
		fr->subs = calloc(1, sizeof(*fr->subs));
		if (!fr->subs)
			goto nomem;
		fr->subs[0].req.ns = id;
		fr->sub_count = 1;
		break;
	case PROTO_SCOPE_TENANT: {
		const char *tn = s->tenant_len ? s->tenant : c->tenant;
		uint32_t tl = s->tenant_len ? s->tenant_len : c->tenant_len;
		uint32_t *ids = NULL;
		int64_t n;

		if (!ops_is_own(c, s->tenant, s->tenant_len) && c->role != PROTO_ROLE_ADMIN) {
			kvtd_reply_error(fr, PROTO_EPERM, "clearing another tenant needs the admin role");
			kvtd_frame_free(fr);
			return;
		}
		/* The tenant's own namespaces (tenant_ns.c), not a walk of
		 * every tenant's. */
		n = kvtd_tenant_ns_ids(srv, tn, tl, &ids);
		if (n < 0)
			goto nomem;
		if (n > 0) {
			fr->subs = calloc((size_t)n, sizeof(*fr->subs));
			if (!fr->subs) {
				free(ids);
				goto nomem;
			}
			for (int64_t k = 0; k < n; k++)
				fr->subs[k].req.ns = ids[k];
			fr->sub_count = (uint32_t)n;
		}
		free(ids);
		break;
	}
	case PROTO_SCOPE_ALL:
		if (c->role != PROTO_ROLE_ADMIN) {
			kvtd_reply_error(fr, PROTO_EPERM, "clearing everything needs the admin role");
			kvtd_frame_free(fr);
			return;
		}
		fr->subs = calloc(1, sizeof(*fr->subs));
		if (!fr->subs)
			goto nomem;
		fr->subs[0].req.ns = KVT_NS_ALL;
		fr->sub_count = 1;
		break;
	}
	if (fr->sub_count) {
		if (kvtd_frame_charge(fr, (uint64_t)fr->sub_count * sizeof(*fr->subs), false) < 0) {
			KVTD_COUNT(srv, mem_refused, 1);
			kvtd_reply_error(fr, -ENOMEM, OPS_MEM_MSG);
			kvtd_frame_free(fr);
			return;
		}
		if (!(fr->clear_slot = kvtd_clear_acquire(c))) {
			kvtd_reply_error(fr, KVT_EBUSY, "this tenant's CLEARs in progress are at "
					 "their limit; retry once one is answered");
			kvtd_frame_free(fr);
			return;
		}
		for (uint32_t k = 0; k < fr->sub_count; k++) {
			fr->subs[k].fr = fr;
			fr->subs[k].req.op = KVT_OP_CLEAR;
			/* A clear walks a whole tier: on a library worker. */
			fr->subs[k].req.flags = KVT_F_DEFER;
		}
		ops_clear_next(fr);
		ops_order_hold(fr);
	}
	if (fr->pending == 0)
		ops_finish(fr);
	return;
nomem:
	kvtd_reply_error(fr, -ENOMEM, "server out of memory");
	kvtd_frame_free(fr);
}

static void ops_clear_reply(struct kvtd_frame *fr)
{
	struct proto_frame rf;

	for (uint32_t k = 0; k < fr->sub_count; k++) {
		if (fr->subs[k].status < 0) {
			kvtd_reply_error(fr, fr->subs[k].status, kvt_strerror(fr->subs[k].status));
			return;
		}
	}
	kvtd_resp_init(fr, &rf, 0);
	rf.removed = fr->removed;
	kvtd_reply(fr, &rf, NULL, 0);
}

/* ------------------------------------------------------------------------
 * STATS
 */

/* Names and texts are copied into chunks of OPS_STATS_CHUNK bytes, a new
 * one when the last is full: one arena of 256 KiB was full at 1,022
 * tenants with 256 namespace rows in use (13,315 figures, 262,134 bytes),
 * and the figures past it were left out of the answer without a word
 * (test_hostile stats_frames). */
#define OPS_STATS_CHUNK (64u << 10)

struct ops_stats_chunk {
	struct ops_stats_chunk *next;
	size_t used;
	char data[OPS_STATS_CHUNK];
};

struct ops_stats {
	struct proto_item *v;
	uint32_t n, cap;
	struct ops_stats_chunk *chunk; /* the newest; names and texts, copied */
	bool nomem;
};

static const char *ops_stats_str(struct ops_stats *st, const char *s, size_t len)
{
	struct ops_stats_chunk *c = st->chunk;
	char *p;

	if (len > OPS_STATS_CHUNK)
		return NULL; /* names are <= 128 bytes, texts <= 1024 */
	if (!c || c->used + len > OPS_STATS_CHUNK) {
		c = malloc(sizeof(*c));
		if (!c) {
			st->nomem = true;
			return NULL;
		}
		c->next = st->chunk;
		c->used = 0;
		st->chunk = c;
	}
	p = c->data + c->used;
	memcpy(p, s, len);
	c->used += len;
	return p;
}

static void ops_stats_free(struct ops_stats *st)
{
	while (st->chunk) {
		struct ops_stats_chunk *next = st->chunk->next;
		free(st->chunk);
		st->chunk = next;
	}
	free(st->v);
}

static void ops_stats_add(struct ops_stats *st, const char *name, uint64_t value, const char *str)
{
	struct proto_item *it;
	size_t nl = strlen(name), tl = str ? strlen(str) : 0;

	if (nl == 0 || nl > PROTO_STAT_NAME_MAX)
		return;
	if (tl > PROTO_STAT_TEXT_MAX)
		tl = PROTO_STAT_TEXT_MAX;
	if (st->n == st->cap) {
		uint32_t nc = st->cap ? st->cap * 2 : 64;
		struct proto_item *nv = realloc(st->v, nc * sizeof(*nv));
		if (!nv) {
			st->nomem = true;
			return;
		}
		st->v = nv;
		st->cap = nc;
	}
	it = &st->v[st->n];
	memset(it, 0, sizeof(*it));
	it->name = ops_stats_str(st, name, nl);
	it->name_len = (uint32_t)nl;
	if (str) {
		it->kind = PROTO_STAT_TEXT;
		it->text = tl ? ops_stats_str(st, str, tl) : NULL;
		it->text_len = (uint32_t)tl;
		/* Texts are printable; anything else would not encode. */
		for (size_t i = 0; it->text && i < tl; i++)
			if (str[i] < 0x20 || str[i] > 0x7e)
				((char *)it->text)[i] = '?';
		if (tl && !it->text)
			return;
	} else {
		it->kind = PROTO_STAT_NUM;
		it->value = value;
	}
	if (!it->name)
		return;
	st->n++;
}

static void ops_stats_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	ops_stats_add(ctx, name, value, str);
}

static const char *const ops_quota_fields[] = { "dram_bytes", "dram_leaving_bytes",
						"dram_limit", "dram_evictions",
						"dram_full", "ssd_bytes", "ssd_limit",
						"ssd_declined" };
#define OPS_QUOTA_FIELDS (sizeof(ops_quota_fields) / sizeof(ops_quota_fields[0]))

/* The group's KV-events drops ("events.<group>.<field>", kvt_quota_stats),
 * reported as "tenant.events_<field>". */
static const char *const ops_quota_events[] = { "dropped", "sub_resets" };
#define OPS_QUOTA_EVENTS (sizeof(ops_quota_events) / sizeof(ops_quota_events[0]))

struct ops_quota {
	uint64_t v[OPS_QUOTA_FIELDS];
	bool found[OPS_QUOTA_FIELDS];
	uint64_t ev[OPS_QUOTA_EVENTS];
	bool ev_found[OPS_QUOTA_EVENTS];
};

/* "quota.<group>.<field>" into q's slot for field ("events.<group>.<field>"
 * into its events slot). */
static void ops_stats_quota_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct ops_quota *q = ctx;
	const char *f = strrchr(name, '.');

	if (str || !f)
		return;
	if (strncmp(name, "events.", 7) == 0) {
		for (size_t i = 0; i < OPS_QUOTA_EVENTS; i++)
			if (strcmp(f + 1, ops_quota_events[i]) == 0) {
				q->ev[i] = value;
				q->ev_found[i] = true;
			}
		return;
	}
	for (size_t i = 0; i < OPS_QUOTA_FIELDS; i++)
		if (strcmp(f + 1, ops_quota_fields[i]) == 0) {
			q->v[i] = value;
			q->found[i] = true;
		}
}

/* A tenant's bytes, limits and quota counters per tier: its quota group's
 * statistics (doc/stats.md "quota.<group>.*") under "tenant.". */
static void ops_stats_quota(struct ops_stats *st, struct kvtd_server *srv, const char *tn,
			    uint32_t tl)
{
	const char *const *fields = ops_quota_fields;
	struct ops_quota q;
	uint32_t g = kvtd_tenant_group(tn, tl);
	char name[96];

	if (!g)
		return;
	memset(&q, 0, sizeof(q));
	ops_stats_add(st, "tenant.quota_group", g, NULL);
	/* This group's statistics only: not a walk of every group's. */
	kvt_quota_stats(srv->store, g, ops_stats_quota_cb, &q);
	for (size_t i = 0; i < OPS_QUOTA_FIELDS; i++) {
		if (!q.found[i])
			continue;
		snprintf(name, sizeof(name), "tenant.%s", fields[i]);
		ops_stats_add(st, name, q.v[i], NULL);
	}
	if (q.ev_found[0]) {
		/* The group's drops since it was given to this tenant: an
		 * earlier tenant's are not this one's (/metrics'
		 * kvtier_events_tenant_dropped_total subtracts the same base);
		 * none while the base of a group just given is not read. */
		char owner[PROTO_TENANT_MAX + 1];
		uint64_t base = 0;
		size_t ol = kvtd_tenant_group_name(g, owner, &base);
		if (ol == tl && memcmp(owner, tn, tl) == 0)
			q.ev[0] = q.ev[0] > base ? q.ev[0] - base : 0;
		else
			q.ev_found[0] = false;
	}
	/* (its feed's resets count from its opening: a group given anew
	 * gets its feed afresh, doc/kvevents.md "Per tenant") */
	for (size_t i = 0; i < OPS_QUOTA_EVENTS; i++) {
		if (!q.ev_found[i])
			continue;
		snprintf(name, sizeof(name), "tenant.events_%s", ops_quota_events[i]);
		ops_stats_add(st, name, q.ev[i], NULL);
	}
}

/* A tenant's namespaces' rows (doc/stats.md "ns"), numbered 1.. in the
 * tenant's own list: server ids, which count every tenant's namespaces,
 * are not shown to a tenant. */
struct ops_ns_rows {
	struct ops_stats *st;
	uint32_t id, k;
};

static void ops_stats_ns_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct ops_ns_rows *r = ctx;
	char pre[24], n[PROTO_STAT_NAME_MAX + 1];
	int l = snprintf(pre, sizeof(pre), "ns.%u.", r->id);

	if (l <= 0 || strncmp(name, pre, (size_t)l) != 0)
		return;
	snprintf(n, sizeof(n), "ns.%u.%s", r->k, name + l);
	ops_stats_add(r->st, n, value, str);
}

static void ops_stats_repair(void *ctx, const char *name, uint64_t value)
{
	ops_stats_add(ctx, name, value, NULL);
}

/* A tenant's: the drain state only (the other members poll it, logged in
 * as any tenant: repair.c's poll askers). */
static void ops_stats_repair_tenant(void *ctx, const char *name, uint64_t value)
{
	if (strcmp(name, "repair.drain_state") == 0)
		ops_stats_add(ctx, name, value, NULL);
}

/* The member list, for every tenant: engines learn the cluster from any
 * server (doc/members.md).  The repair thread's counters count every
 * tenant's placed puts, deletes and forwards (repair.tracked moved with
 * each of another tenant's blocks): the admin's only (doc/security.md,
 * "Cross-tenant probing"; test_isolation pod). */
static void ops_stats_cluster(struct ops_stats *st, struct kvtd_server *srv, bool admin)
{
	static const char *const sources[] = { "none", "static", "etcd" };
	struct kvtd_cluster *cl = &srv->cluster;
	char name[64], text[KVTD_MEMBER_ADDR_MAX + 32];

	pthread_mutex_lock(&cl->lock);
	ops_stats_add(st, "cluster.source", 0, sources[cl->source]);
	ops_stats_add(st, "cluster.epoch", cl->epoch, NULL);
	ops_stats_add(st, "cluster.members", cl->count, NULL);
	if (cl->source == KVTD_CLUSTER_ETCD)
		ops_stats_add(st, "cluster.etcd", 0, cl->etcd_up ? "up" : "down");
	for (unsigned i = 0; i < cl->count; i++) {
		snprintf(name, sizeof(name), "cluster.member.%u", i);
		snprintf(text, sizeof(text), "%s %llu", cl->list[i].addr,
			 (unsigned long long)cl->list[i].weight);
		ops_stats_add(st, name, 0, text);
	}
	pthread_mutex_unlock(&cl->lock);
	kvtd_repair_stats(srv, admin ? ops_stats_repair : ops_stats_repair_tenant, st);
}

static void ops_stats(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;
	const struct proto_scope *s = &fr->f.scope;
	struct ops_stats st = { 0 };
	struct proto_frame rf;
	char name[160];

	if (s->scope == PROTO_SCOPE_ALL && c->role != PROTO_ROLE_ADMIN) {
		kvtd_reply_error(fr, PROTO_EPERM, "server-wide statistics need the admin role");
		goto out;
	}
	if (s->scope == PROTO_SCOPE_TENANT && !ops_is_own(c, s->tenant, s->tenant_len) &&
	    c->role != PROTO_ROLE_ADMIN) {
		kvtd_reply_error(fr, PROTO_EPERM, "another tenant's statistics need the admin role");
		goto out;
	}
	ops_stats_add(&st, "server.version", 0, KVTD_VERSION);
	ops_stats_cluster(&st, srv, c->role == PROTO_ROLE_ADMIN);
	if (s->scope == PROTO_SCOPE_ALL) {
		struct kvtd_counters *k = &srv->ctr;
		ops_stats_add(&st, "server.uptime_ns", kvtd_now_ns() - srv->start_ns, NULL);
		ops_stats_add(&st, "server.threads", srv->loop_count, NULL);
		ops_stats_add(&st, "server.auth", 0, kvtd_auth_enabled() ? "hmac-sha256" : "none");
		for (size_t i = 0; i < kvtd_counter_def_count; i++) /* counters.c */
			if (kvtd_counter_defs[i].stat)
				ops_stats_add(&st, kvtd_counter_defs[i].stat,
					      kvtd_counter_value(srv, &kvtd_counter_defs[i]), NULL);
		for (unsigned op = 0; op < PROTO_OP__COUNT; op++) {
			snprintf(name, sizeof(name), "server.ops.%s", proto_op_name(op));
			ops_stats_add(&st, name, atomic_load(&k->ops[op]), NULL);
		}
		for (unsigned e = 0; e < KVTD_ERR__COUNT; e++) {
			snprintf(name, sizeof(name), "server.errors.%s", kvtd_err_names[e]);
			ops_stats_add(&st, name, atomic_load(&k->errors[e]), NULL);
		}
		kvt_store_stats(srv->store, ops_stats_cb, &st);
	} else {
		const char *tn = s->tenant_len ? s->tenant : c->tenant;
		uint32_t tl = s->tenant_len ? s->tenant_len : c->tenant_len;
		char tbuf[PROTO_TENANT_MAX + 1];
		/* From the tenant's own index (tenant_ns.c), not a walk of
		 * every tenant's namespaces. */
		uint32_t *ids = NULL;
		int64_t mine = kvtd_tenant_ns_ids(srv, tn, tl, &ids);

		if (mine < 0) {
			kvtd_reply_error(fr, -ENOMEM, "server out of memory");
			goto out;
		}
		memcpy(tbuf, tn, tl);
		tbuf[tl] = 0;
		ops_stats_add(&st, "tenant.name", 0, tbuf);
		ops_stats_add(&st, "tenant.namespaces", (uint64_t)mine, NULL);
		ops_stats_quota(&st, srv, tn, tl);
		for (int64_t k = 0; k < mine; k++) {
			struct ops_ns_rows r = { &st, ids[k], (uint32_t)k + 1 };
			kvt_ns_stats(srv->store, ids[k], ops_stats_ns_cb, &r);
		}
		free(ids);
		if (ops_is_own(c, s->tenant, s->tenant_len)) {
			/* what this connection may ask: kvtier ls asks the
			 * server-wide STATS only as the admin */
			ops_stats_add(&st, "conn.role", 0,
				      c->role == PROTO_ROLE_ADMIN ? "admin" : "tenant");
			ops_stats_add(&st, "conn.frames", c->frames, NULL);
			ops_stats_add(&st, "conn.bytes_in", c->bytes_in, NULL);
			ops_stats_add(&st, "conn.bytes_out", c->bytes_out, NULL);
		}
	}
	if (st.nomem) {
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		goto out;
	}
	/* At most the items_max HELLO announced a frame (KVTD_FRAME_ITEMS_MAX),
	 * the rest in more frames of the tag (doc/protocol.md section 2): a
	 * client checks an answer against the limits announced, and one frame
	 * of every figure -- ~8 a quota group, ~20 a namespace row -- was
	 * refused PROTO_ECOUNT past ~130 tenants (STATS ALL) or ~50
	 * namespaces (a tenant's), by the daemon's own peer too (repair.c's
	 * drain poll, daemon/peer.c). */
	for (uint32_t start = 0;;) {
		uint32_t n = st.n - start > KVTD_FRAME_ITEMS_MAX ? KVTD_FRAME_ITEMS_MAX
								 : st.n - start;
		kvtd_resp_init(fr, &rf, 0);
		if (start + n < st.n)
			rf.flags |= PROTO_F_MORE;
		kvtd_reply(fr, &rf, st.v + start, n);
		start += n;
		if (start >= st.n)
			break;
	}
	/* A STATS of a tenant's 256 namespace rows is ~5,000 figures, 1 ms
	 * of the loop (release), for a 48-byte frame: counted as its figures,
	 * so a connection (and a tenant) answers one such a loop iteration,
	 * not 64 (256) -- another client's PING waited 230 ms (p50) beside 4
	 * connections of them (doc/security.md `stats_flood`). */
	kvtd_conn_parse_spend(c, st.n);
out:
	ops_stats_free(&st);
	kvtd_frame_free(fr);
}

/* ------------------------------------------------------------------------
 * Dispatch and completion
 */

void kvtd_frame_dispatch(struct kvtd_frame *fr)
{
	struct kvtd_conn *c = fr->conn;
	struct kvtd_server *srv = ops_srv(fr);
	unsigned op = fr->f.op;

	KVTD_COUNT(srv, frames_in, 1);
	/* Repair paces itself by client traffic (repair.c): the pod's own
	 * frames and the control ones (HELLO, AUTH, STATS polls, PING, BYE,
	 * DRAIN) are not that. */
	if (c->pod_peer || op < PROTO_OP_NS_REGISTER || op == PROTO_OP_STATS ||
	    op == PROTO_OP_PING || op == PROTO_OP_BYE || op == PROTO_OP_DRAIN)
		KVTD_COUNT(srv, peer_frames_in, 1);
	KVTD_COUNT(srv, ops[op], 1);
	KVTD_COUNT(srv, items_in, fr->f.item_count);
	c->frames++;

	/* doc/protocol.md section 7: HELLO first, then AUTH; before a
	 * successful AUTH only HELLO, AUTH, PING and BYE are answered. */
	if (op == PROTO_OP_HELLO) {
		ops_hello(fr);
		return;
	}
	if (c->state != KVTD_CS_HELLO && fr->f.version != c->version) {
		ops_fail(fr, KVT_EVERSION, "frame version differs from the one HELLO chose");
		return;
	}
	if (op == PROTO_OP_AUTH) {
		ops_auth(fr);
		return;
	}
	if (op == PROTO_OP_PING || op == PROTO_OP_BYE) {
		ops_simple(fr);
		return;
	}
	if (c->state != KVTD_CS_READY) {
		/* native.c refuses such a frame before reading it and
		 * closes; this is the second line. */
		kvtd_reply_error(fr, PROTO_ENOAUTH, "HELLO and AUTH first");
		kvtd_frame_free(fr);
		return;
	}
	switch (op) {
	case PROTO_OP_NS_REGISTER:
		ops_ns_register(fr);
		return;
	case PROTO_OP_LOOKUP:
		ops_lookup(fr);
		return;
	case PROTO_OP_EXISTS:
	case PROTO_OP_GET:
	case PROTO_OP_PUT:
	case PROTO_OP_DELETE:
		ops_keyed(fr);
		return;
	case PROTO_OP_CLEAR:
		ops_clear(fr);
		return;
	case PROTO_OP_STATS:
		ops_stats(fr);
		return;
	case PROTO_OP_DRAIN:
		ops_drain(fr);
		return;
	}
	ops_fail(fr, KVT_EBADOP, "unknown opcode");
}

/* A GET or PUT frame's latency, by the slowest tier among its hits. */
static void ops_latency(struct kvtd_frame *fr)
{
	int kind = fr->f.op == PROTO_OP_GET ? KVTD_LAT_READ : KVTD_LAT_WRITE;
	int tier = KVT_TIER_NONE;
	for (uint32_t i = 0; i < fr->n && fr->items; i++)
		if (fr->items[i].status == KVT_OK && (int)fr->items[i].tier > tier)
			tier = (int)fr->items[i].tier;
	kvtd_metrics_latency(ops_srv(fr), kind, tier, kvtd_now_ns() - fr->start_ns);
}

/*
 * Deletes that stay deleted (doc/kvtierd.md "Durability"): a DELETE or
 * CLEAR that removed something is answered only once its tombstone (or
 * clear record) is on the device durably.  The store logs them through
 * the SSD tier's writer; a KVT_OP_FLUSH with KVT_F_DELETES submitted
 * after the items completes once their tombstones -- which go ahead of the
 * write-downs queued before them -- and the writes placed before them are
 * written and fdatasync'ed, so nothing before a tombstone can be torn
 * either (the recovery walk stops at the first torn record); not the
 * write-down backlog (a plain flush waited for it: 0.26 s behind 256 MiB).
 * Concurrent frames' syncs find little left to sync: a group commit.  true: the flush is
 * in flight, the frame finishes when it comes back.
 */
static bool ops_durable(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	bool removed = fr->removed > 0;

	if (fr->flush || !srv->cfg.ssd_bytes ||
	    (fr->f.op != PROTO_OP_DELETE && fr->f.op != PROTO_OP_CLEAR))
		return false;
	for (uint32_t i = 0; !removed && i < fr->n && fr->items; i++)
		removed = fr->items[i].status == KVT_OK;
	if (!removed)
		return false;
	fr->flush = calloc(1, sizeof(*fr->flush));
	if (!fr->flush) {
		/* Not acknowledged as durable: the request fails. */
		for (uint32_t i = 0; i < fr->n && fr->items; i++)
			if (fr->items[i].status == KVT_OK)
				fr->items[i].status = -ENOMEM;
		return false;
	}
	fr->flush->fr = fr;
	fr->flush->req.op = KVT_OP_FLUSH;
	fr->flush->req.flags = KVT_F_DELETES;
	ops_submit(fr, &fr->flush, 1);
	if (fr->flush->submitted)
		return true;
	fr->flush->status = fr->flush->status < 0 ? fr->flush->status : -EIO;
	return false;
}

/* The flush's outcome is the frame's: a delete whose tombstone may not be
 * durable is not acknowledged. */
static void ops_durable_status(struct kvtd_frame *fr)
{
	int st = fr->flush ? fr->flush->status : 0;

	if (st >= 0)
		return;
	for (uint32_t i = 0; i < fr->n && fr->items; i++)
		if (fr->items[i].status == KVT_OK)
			fr->items[i].status = st;
	for (uint32_t k = 0; k < fr->sub_count; k++)
		if (fr->subs[k].status >= 0)
			fr->subs[k].status = st;
}

/* ------------------------------------------------------------------------
 * Pinned answers (issue 21: a slow reader pins DRAM for everyone).  A
 * GET's answer holds pins on DRAM until it is written; what one
 * connection's queued answers pin is capped (KVTD_PIN_CONN_MAX), and so is
 * what a tenant's connections pin together (KVTD_PIN_TENANT_MAX).  A
 * frame whose answer would pass a cap is answered in chunks: the items
 * that fit now, then the others' pins are let go (deferred) and they are
 * read again once the connection's answers have drained (the protocol
 * table's written hook), as many as fit.  A block evicted meanwhile is a
 * miss.  A connection that pins nothing gets at least one item, so it
 * progresses -- unless its tenant's answers already pin
 * KVTD_PIN_TENANT_MAX (with --tenants, as RESP and S3 do): its items
 * that would pin are answered KVT_EBUSY instead (retry later), counted in
 * pin_deferred (ops_tenant_pins_over).  Before, one unread GET on each of
 * many connections of one tenant pinned the whole DRAM tier, and such a
 * connection cannot wait for a drain of its own (it has nothing to
 * drain): it is told, it does not hang.  loop.c closes one that drains
 * slower than KVTD_MIN_DRAIN_BPS, which lets its pins go.  Quiet GETs are
 * bounded as copies instead ("Quiet GETs").
 */

static uint64_t ops_pin_budget(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	uint64_t cap = KVTD_PIN_CONN_MAX(srv), b = c->pin_bytes < cap ? cap - c->pin_bytes : 0;

	if (c->tstat) {
		uint64_t tp = atomic_load_explicit(&c->tstat->pinned, memory_order_relaxed);
		uint64_t tcap = KVTD_PIN_TENANT_MAX(srv), tb = tp < tcap ? tcap - tp : 0;
		if (tb < b)
			b = tb;
	}
	return b;
}

/* c pins nothing, and its tenant's answers pin their share already
 * (with --tenants: without, one trust domain). */
static bool ops_tenant_pins_over(struct kvtd_conn *c)
{
	return kvtd_auth_enabled() && c->tstat && !c->pin_bytes &&
	       atomic_load_explicit(&c->tstat->pinned, memory_order_relaxed) >=
		       KVTD_PIN_TENANT_MAX(c->loop->srv);
}

/* What an item's answer counts in the pin caps: the whole value its pin
 * holds, whatever range or part it sends (value.c "Pinned values held"),
 * 0 if its value is counted already (in seen: another item of the same
 * answer pins it).  The range's length was counted: a frame of a whole
 * GET of a 6 MiB value and one-byte ranges of 9 others, left unread, held
 * 10 pins (60 MiB of a 64 MiB tier) counted as 6 MiB and 9 bytes, and
 * another tenant's PUT of 8 MiB found no room (test_hostile range_pins). */
static uint64_t ops_pin_len(struct kvtd_pinset *seen, uintptr_t at, uint64_t len)
{
	return kvtd_pinset_add(seen, at) ? len : 0;
}

/*
 * What an answer costs besides its pins (red45, doc/security.md "Session
 * 45"): the pin caps count a value once however many items of a chunk
 * read it, but two things grow with the items, not with the values:
 *   - a RANGE that is not exactly one stored part is sent with a CRC32C
 *     computed over its bytes on the loop (value.c value_range_crc): a
 *     frame of 1,024 ranges of nearly all of one 8 MiB value was 8 GiB of
 *     CRC at once, and a grantee's frames (quiet, never deferred) as many
 *     as it pipelined;
 *   - a whole value's answer carries its part table, 16 bytes a part: a
 *     frame naming a 1 KiB value of 1,024 one-byte parts 1,024 times (41
 *     KB) was answered with 16.8 MB of table, built at once and charged
 *     after (forced), one frame on each connection before its reads
 *     paused: 16 connections grew kvtierd 162 MiB past a 32 MiB budget.
 * So a chunk also holds ranges of at most the pin budget's bytes, and
 * tables of at most the room its connection, the budget and its tenant's
 * share of queued answers have left (ops_table_room) -- its first item
 * always, when the connection pins nothing (as for pins).
 */
static uint64_t ops_table_room(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	uint64_t out = c->out_bytes + (uint64_t)c->out_entries * KVTD_OUT_COST;
	uint64_t room = out < srv->cfg.conn_output ? srv->cfg.conn_output - out : 0;

	if (srv->cfg.max_memory) {
		uint64_t used = atomic_load_explicit(&srv->mem_used, memory_order_relaxed);
		uint64_t r = used < srv->cfg.max_memory ? srv->cfg.max_memory - used : 0;
		if (r < room)
			room = r;
		if (c->tstat && kvtd_auth_enabled()) {
			uint64_t oc = atomic_load_explicit(&c->tstat->out_charged,
							   memory_order_relaxed);
			uint64_t share = kvtd_tenant_cap(srv, c->tstat, oc,
							 KVTD_OUT_TENANT_MAX(srv));
			r = oc < share ? share - oc : 0;
			if (r < room)
				room = r;
		}
	}
	return room;
}

/* An item's entry in the answer's table: 40 bytes and 16 a part sent.  A
 * whole value's part count is read (from its pin: a duplicate's is its
 * first item's) only when the bound, one byte a part, would not fit what
 * is left (left), and only if pinned (a deferred item is not: the bound). */
static uint64_t ops_item_table(struct kvtd_server *srv, const struct kvtd_item *it,
			       uint64_t length, uint64_t left, bool pinned)
{
	uint64_t parts = length < srv->lim.parts_max ? length : srv->lim.parts_max;
	int n;

	if (it->flags & (PROTO_IF_PART | PROTO_IF_RANGE))
		return 40 + PROTO_PART_ENTRY;
	if (parts > 1 && 40 + PROTO_PART_ENTRY * parts > left && pinned && it->req.pin &&
	    (n = kvt_pin_parts(srv->store, it->req.pin, NULL, NULL, 0)) > 0)
		parts = (uint64_t)n;
	return 40 + PROTO_PART_ENTRY * (parts ? parts : 1);
}

/* The bytes of an item's range whose CRC the answer computes (at most). */
static uint64_t ops_item_crc_len(const struct kvtd_item *it)
{
	return (it->flags & PROTO_IF_RANGE) && !(it->flags & PROTO_IF_PART) ? it->len : 0;
}

/* A quiet frame (a grantee's) is answered whole (its duplicates share
 * pins, "Quiet GETs"): the items past those bounds, or past what is left
 * of its tenant's pin share (KVTD_PIN_TENANT_MAX: the connection's own
 * cap would refuse a legitimate grantee's large frame, which is not
 * deferred), are answered KVT_EBUSY (retry later; the engine's remote
 * tier takes it as a miss), and a duplicate of such an item too.  The pin
 * caps did not apply to quiet GETs: a grantee's unread frames pinned the
 * owner's whole DRAM tier and another tenant's PUT failed KVT_EFULL
 * (test_hostile quiet_pins). */
static void ops_quiet_limit(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;
	uint64_t budget = ops_pin_budget(c), room = ops_table_room(c), pins = budget;
	uint64_t sum = 0, rsum = 0, tsum = 0;
	bool first = !c->pin_bytes, refused = false, over = ops_tenant_pins_over(c);
	struct kvtd_pinset seen = { 0 };

	if (c->tstat && kvtd_auth_enabled()) {
		uint64_t tp = atomic_load_explicit(&c->tstat->pinned, memory_order_relaxed);
		pins = tp < KVTD_PIN_TENANT_MAX(srv) ? KVTD_PIN_TENANT_MAX(srv) - tp : 0;
	}
	if (fr->n > 1)
		(void)kvtd_pinset_init(&seen, fr->n); /* without: each counted */
	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		uint64_t len = 0, rlen = 0, tlen = 0;
		/* a duplicate of a refused item: its pin (shared) is gone */
		bool dup_refused = it->dup_of && fr->items[it->dup_of - 1].status == KVT_EBUSY;
		if (it->status != KVT_OK || !it->req.pin)
			continue;
		if (!dup_refused) {
			len = it->pinned ? ops_pin_len(&seen, kvtd_item_pin_at(it), it->req.length)
					 : 0;
			rlen = ops_item_crc_len(it);
			tlen = ops_item_table(srv, it, it->req.length,
					      room > tsum ? room - tsum : 0, true);
		}
		if (dup_refused || (over && it->pinned) ||
		    (!first && ((len && sum + len > pins) || (rlen && rsum + rlen > budget) ||
				(tlen && tsum + tlen > room)))) {
			/* Its pin goes now, shared or not: its duplicates are
			 * refused with it (above), and the last of them carried
			 * it past the share (review45c, quiet_pins_dup). */
			if (it->pinned)
				kvtd_value_item_unpin(srv, it);
			it->carries = 0;
			it->status = KVT_EBUSY;
			refused = true;
			continue;
		}
		first = false;
		sum += len;
		rsum += rlen;
		tsum += tlen;
	}
	kvtd_pinset_free(&seen);
	if (refused)
		KVTD_COUNT(srv, pin_deferred, 1);
}

/* Answer what fits of a GET frame; true if the rest waits (the frame is
 * held: pending + 1, c->pin_wait). */
static bool ops_get_answer(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct kvtd_conn *c = fr->conn;
	uint64_t budget, sum = 0, room, rsum = 0, tsum = 0;
	uint32_t end = fr->chunk_start;
	struct kvtd_pinset seen = { 0 };

	/* The first answer: one version a key, however its items were
	 * pinned (value.c "Versions") */
	if (!fr->chunked && fr->chunk_start == 0)
		kvtd_value_note_keys(fr);
	if (fr->quiet_n) {
		ops_quiet_limit(fr);
		kvtd_value_get_reply(fr, 0, fr->n);
		return false;
	}
	if (ops_tenant_pins_over(c)) {
		/* Refused, not deferred: nothing of c's would drain to
		 * resume it.  Its other items (misses, errors) answer as
		 * they are. */
		bool refused = false;
		for (uint32_t i = fr->chunk_start; i < fr->n; i++) {
			struct kvtd_item *it = &fr->items[i];
			if (!it->pinned && !it->deferred)
				continue;
			if (it->pinned)
				kvtd_value_item_unpin(srv, it);
			it->deferred = false;
			it->status = KVT_EBUSY;
			refused = true;
		}
		if (refused)
			KVTD_COUNT(srv, pin_deferred, 1);
		kvtd_value_get_reply(fr, fr->chunk_start, fr->n);
		fr->chunk_start = fr->n;
		return false;
	}
	budget = ops_pin_budget(c);
	room = ops_table_room(c);
	if (fr->n - fr->chunk_start > 1)
		(void)kvtd_pinset_init(&seen, fr->n - fr->chunk_start); /* without: each */
	while (end < fr->n) {
		struct kvtd_item *it = &fr->items[end];
		uint64_t len, rlen = 0, tlen = 0;
		if (it->deferred)
			break;
		len = it->pinned ? ops_pin_len(&seen, kvtd_item_pin_at(it), it->req.length) : 0;
		if (it->pinned) {
			rlen = ops_item_crc_len(it);
			tlen = ops_item_table(srv, it, it->req.length,
					      room > tsum ? room - tsum : 0, true);
		}
		/* A bound stops the chunk only where the item adds to it: a
		 * range of a value the chunk pins already adds no pin.  The
		 * chunk stopped at the pin budget whatever the item added, so
		 * that ranges of a value past the budget (its first item
		 * always taken) were answered one a chunk, each read again
		 * after a drain: 1,024 one-byte ranges of a 32 MiB value,
		 * 1,024 answer frames (test_hostile range_one_pin). */
		if (((len && sum + len > budget) || (rlen && rsum + rlen > budget) ||
		     (tlen && tsum + tlen > room)) &&
		    (end > fr->chunk_start || c->pin_bytes))
			break;
		sum += len;
		rsum += rlen;
		tsum += tlen;
		end++;
	}
	kvtd_pinset_free(&seen);
	if (end > fr->chunk_start) {
		kvtd_value_get_reply(fr, fr->chunk_start, end);
		fr->chunk_start = end;
	}
	if (end == fr->n || c->dead)
		return false;
	/* Read again later, by key: each must find the version it read
	 * now, or miss (value.c "Versions") */
	kvtd_value_note_versions(fr, end);
	for (uint32_t i = end; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		if (it->pinned) {
			it->est_len = it->req.length;
			it->est_at = kvtd_item_pin_at(it);
			kvtd_value_item_unpin(srv, it);
			it->deferred = true;
		}
	}
	/* The range checks planned for the frame name the released pins'
	 * views, and their blocks may hold other values when the deferred
	 * items are pinned again: planned again then, for those.  A check
	 * left to the answer read a released view (heap-use-after-free,
	 * test_hostile range_chunk_check). */
	kvtd_value_vcache_free(fr);
	fr->verify_planned = false;
	if (!fr->chunked)
		KVTD_COUNT(srv, pin_deferred, 1);
	fr->chunked = true;
	fr->pending++;
	fr->pin_next = NULL;
	if (c->pin_wait_tail)
		c->pin_wait_tail->pin_next = fr;
	else
		c->pin_wait = fr;
	c->pin_wait_tail = fr;
	/* Nothing of c's pinned to drain (this chunk's items all misses:
	 * their values evicted while deferred), so no write would wake it:
	 * read the next ones now.  It waited, and the client's answer
	 * stopped there (test_hostile range_pins, a reader after another
	 * tenant's PUT evicted values).  Not again from within: a resume
	 * whose submissions all fail at once answers here (ops_finish). fr
	 * may be done once it returns. */
	if (!c->pin_bytes && !c->pin_resuming) {
		c->pin_resuming = true;
		kvtd_get_resume(c);
		c->pin_resuming = false;
	}
	return true;
}

static struct kvtd_frame *ops_pin_pop(struct kvtd_conn *c)
{
	struct kvtd_frame *fr = c->pin_wait;

	if (fr) {
		c->pin_wait = fr->pin_next;
		if (!c->pin_wait)
			c->pin_wait_tail = NULL;
		fr->pin_next = NULL;
	}
	return fr;
}

/* The connection's pinned answers drained (native.c written hook): read
 * the deferred items that fit. */
void kvtd_get_resume(struct kvtd_conn *c)
{
	struct kvtd_frame *fr = c->pin_wait;
	struct kvtd_item **its;
	uint64_t budget, sum = 0, room, rsum = 0, tsum = 0;
	uint32_t k = 0;
	struct kvtd_pinset seen = { 0 };

	if (!fr)
		return;
	budget = ops_pin_budget(c);
	room = ops_table_room(c);
	/* Hysteresis: half the connection's window free, or none of it used. */
	if (c->pin_bytes && budget < KVTD_PIN_CONN_MAX(c->loop->srv) / 2)
		return;
	its = malloc((fr->n - fr->chunk_start) * sizeof(*its));
	ops_pin_pop(c);
	if (!its) {
		/* No memory: the frame's deferred items are answered -ENOMEM
		 * (no_memory), as items whose submission failed, and the frame
		 * ends.  It waited for "the next drain" before: called from
		 * ops_get_answer, nothing of c's pinned, none came, and the
		 * frame and every GET of c queued behind it stayed unanswered
		 * (this malloc made to fail: test_hostile range_pins got 1 of
		 * its frame's 10 items in 10 s; now all 10 at once, 9 of them
		 * no_memory). */
		for (uint32_t i = fr->chunk_start; i < fr->n; i++) {
			struct kvtd_item *it = &fr->items[i];
			if (it->deferred) {
				it->deferred = false;
				it->status = -ENOMEM;
			}
		}
		KVTD_COUNT(c->loop->srv, errors[KVTD_ERR_NOMEM], 1);
		if (--fr->pending == 0)
			ops_finish(fr);
		return;
	}
	/* Where each was is an estimate (its block may have gone since): the
	 * answer counts them again as read (ops_get_answer). */
	if (fr->n - fr->chunk_start > 1)
		(void)kvtd_pinset_init(&seen, fr->n - fr->chunk_start);
	for (uint32_t i = fr->chunk_start; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		uint64_t len, rlen, tlen;
		if (!it->deferred)
			continue;
		len = ops_pin_len(&seen, it->est_at, it->est_len);
		/* unpinned: the table's bound (one byte a part) */
		rlen = ops_item_crc_len(it);
		tlen = ops_item_table(c->loop->srv, it, it->est_len, 0, false);
		if (k && ((len && sum + len > budget) || (rlen && rsum + rlen > budget) ||
			  (tlen && tsum + tlen > room)))
			break;
		sum += len;
		rsum += rlen;
		tsum += tlen;
		it->deferred = false;
		it->status = 0;
		its[k++] = it;
	}
	kvtd_pinset_free(&seen);
	ops_submit(fr, its, k);
	free(its);
	if (--fr->pending == 0)
		ops_finish(fr);
}

/* The connection closed with a frame waiting: it ends unanswered. */
void kvtd_get_abandon(struct kvtd_conn *c)
{
	struct kvtd_frame *fr;

	while ((fr = ops_pin_pop(c)))
		if (--fr->pending == 0)
			ops_finish(fr);
}

/* Range verification off the loop thread (value.c "value_vcache"), a
 * slice an aux job: the frame's next slice goes back to its tenant's
 * queue, behind the other tenants' jobs (loop.c "The aux thread"). */
static void ops_verify_run(void *arg)
{
	struct kvtd_frame *fr = arg;

	fr->verify_more = !kvtd_value_verify_run(fr);
}

static void ops_verify_done(void *arg)
{
	struct kvtd_frame *fr = arg;

	if (fr->conn->dead)
		fr->verify_more = false; /* nobody to answer: checked as read, if ever */
	if (fr->verify_more && !fr->loop->stopping) {
		kvtd_aux_submit(fr->loop, fr->tstat, ops_verify_run, ops_verify_done, fr);
		return;
	}
	while (fr->verify_more) /* stopping: the aux thread may be gone */
		fr->verify_more = !kvtd_value_verify_run(fr);
	if (--fr->pending == 0)
		ops_finish(fr);
}

/* A GET whose range reads must check more than KVTD_VERIFY_INLINE_MAX
 * bytes of stored parts has them checked on the aux thread first (a
 * frame of small ranges of a large value must not stall the loop).
 * true: in flight. */
static bool ops_verify(struct kvtd_frame *fr)
{
	if (fr->f.op != PROTO_OP_GET || fr->verify_planned || fr->conn->dead)
		return false;
	ops_quiet_resolve(fr);
	fr->verify_planned = true;
	if (kvtd_value_verify_plan(fr) <= KVTD_VERIFY_INLINE_MAX)
		return false;
	fr->pending++;
	kvtd_aux_submit(fr->loop, fr->tstat, ops_verify_run, ops_verify_done, fr);
	return true;
}

/* Healing (repair.c): what PLACED puts stored and deletes removed. */
static void ops_repair_hook(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = ops_srv(fr);
	struct proto_iter iter;
	struct proto_item pi;
	uint32_t i = 0;

	uint32_t group;

	if (!srv->repair)
		return;
	/* Whose share the table's entries and the refusals are
	 * (repair.c "A tenant's share"): the connection's tenant, whose own
	 * namespaces it puts to and deletes from; a CLEAR's, its scope's. */
	group = kvtd_tenant_group(fr->conn->tenant, fr->conn->tenant_len);
	if (fr->f.op == PROTO_OP_CLEAR) {
		const struct proto_scope *s = &fr->f.scope;
		uint32_t id = KVT_NS_ALL;
		if (s->scope != PROTO_SCOPE_NS || kvt_ns_find(srv->store, s->digest, &id) != KVT_OK)
			id = KVT_NS_ALL;
		if (s->scope == PROTO_SCOPE_ALL ||
		    (s->scope == PROTO_SCOPE_NS && fr->conn->role == PROTO_ROLE_ADMIN))
			group = 0; /* every tenant's */
		else if (s->scope == PROTO_SCOPE_TENANT && s->tenant_len)
			group = kvtd_tenant_group(s->tenant, s->tenant_len);
		kvtd_repair_cleared(srv, id, group);
	}
	if (!fr->items || !fr->ns_ids ||
	    (fr->f.op != PROTO_OP_PUT && fr->f.op != PROTO_OP_DELETE && fr->f.op != PROTO_OP_GET))
		return;
	proto_iter_init(&iter, &fr->f, NULL, NULL, 0);
	while (i < fr->n && proto_iter_next(&iter, &pi) == 1) {
		const struct kvtd_item *it = &fr->items[i++];
		if (fr->ns_err[pi.ns_index])
			continue;
		if (fr->f.op == PROTO_OP_GET) {
			if (it->status == KVT_OK) /* what a drain hands over first */
				kvtd_repair_touch(srv, fr->ns_ids[pi.ns_index], &pi.key);
		} else if (fr->f.op == PROTO_OP_DELETE) {
			if (it->status == KVT_OK || it->status == KVT_MISS)
				kvtd_repair_forget(srv, fr->ns_ids[pi.ns_index], group,
						   &pi.key);
		} else if (pi.flags & PROTO_IF_PLACED &&
			   (it->status == KVT_OK || it->status == KVT_EXISTS)) {
			kvtd_repair_note(srv, fr->ns_ids[pi.ns_index], group, &pi.key, pi.anchor,
					 pi.copies, pi.value_len,
					 pi.flags & PROTO_IF_FORWARD && it->status == KVT_OK,
					 pi.flags & PROTO_IF_RETAIN);
		}
	}
}

/*
 * Every item is back: answer (unless the connection is gone) and free.
 * Nothing here reads a pin's views for a dead connection, and that is
 * what keeps a frame coming back in kvtd_loops_finish (the aux thread's
 * mailbox, the queue), after kvt_store_close freed them, from reading
 * them: the loop closed every connection at its --shutdown-timeout
 * deadline before it exited (doc/kvtierd.md "Logs, signals, shutdown";
 * RESP and S3, which read views regardless, check loop->store_closed).
 * A loop that left on an epoll_wait error (loop.c loop_main) still has
 * open connections: kvtd_loops_finish closes them before it runs any
 * job's done.
 */
static void ops_finish(struct kvtd_frame *fr)
{
	ops_order_release(fr); /* applied: only durability is waited for */
	if (ops_durable(fr) || ops_verify(fr))
		return;
	ops_durable_status(fr);
	ops_repair_hook(fr);
	if (fr->f.op == PROTO_OP_GET || fr->f.op == PROTO_OP_PUT)
		ops_latency(fr);
	if (!fr->conn->dead) {
		switch (fr->f.op) {
		case PROTO_OP_NS_REGISTER:
			ops_ns_register_reply(fr);
			break;
		case PROTO_OP_GET:
			if (ops_get_answer(fr))
				return;
			break;
		case PROTO_OP_EXISTS:
		case PROTO_OP_PUT:
		case PROTO_OP_DELETE:
			ops_keyed_reply(fr);
			break;
		case PROTO_OP_LOOKUP:
			ops_lookup_reply(fr);
			break;
		case PROTO_OP_CLEAR:
			ops_clear_reply(fr);
			break;
		}
	}
	kvtd_frame_free(fr);
}

void kvtd_req_done(struct kvtd_loop *loop, struct kvt_req *r)
{
	struct kvtd_item *it = (struct kvtd_item *)(uintptr_t)r->user_data;
	struct kvtd_frame *fr = it->fr;

	(void)loop;
	it->submitted = false;
	it->status = r->status;
	if (it->quiet && r->op == KVT_OP_GET_PINNED) {
		if (r->status == KVT_OK) {
			it->pinned = true;
			it->tier = r->tier;
		}
		ops_quiet_done(fr, it);
		if (--fr->pending == 0)
			ops_finish(fr);
		return;
	}
	switch (r->op) {
	case KVT_OP_GET_PINNED:
		if (r->status == KVT_OK) {
			it->pinned = true;
			it->tier = r->tier;
		}
		break;
	case KVT_OP_EXISTS:
		it->tier = r->status == KVT_OK ? r->tier : 0;
		break;
	case KVT_OP_LOOKUP:
		fr->hits = (uint32_t)r->length;
		fr->load_ns = r->load_ns;
		break;
	case KVT_OP_CLEAR:
		if (r->status == KVT_OK)
			fr->removed += r->length;
		ops_clear_next(fr); /* its pending counted before this one's goes */
		break;
	default:
		break;
	}
	if (--fr->pending == 0)
		ops_finish(fr);
}

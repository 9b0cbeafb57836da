/*
 * loop.c - kvtierd's event loops: accepting connections, reading frames,
 * writing responses, timeouts, and the aux thread.
 *
 * Each loop thread owns an epoll set holding: every listener (shared by
 * all loops, added with EPOLLEXCLUSIVE so a new connection wakes one
 * loop), its own kvt_queue's eventfd, a wake eventfd (stop, mailbox), and
 * the connections it owns.  Everything is level-triggered and
 * non-blocking.  A connection never moves between loops, so nothing in
 * struct kvtd_conn needs a lock.
 *
 * The loop knows no protocol: a connection's listener says which entry
 * of the protocol table (kvtierd.h "The protocol table") it speaks, and
 * the loop calls that entry's hooks -- open, read/parse, idle, fail,
 * req_done, free -- while it owns the socket, the read buffer (rbuf), the
 * output queue, TLS, the timers and the --max-memory budget.
 *
 * One iteration:
 *
 *   epoll_wait (at most 1 s)
 *     listener  -> accept up to 64 connections, each to the loop
 *                  with the fewest ("Accepting")
 *     conn in   -> the protocol's read, or the generic one: bytes into
 *                  rbuf, then the protocol's parse
 *     conn out  -> write the output queue
 *     wake      -> stop, or jobs back from the aux thread
 *   drain the queue: completions -> the protocol's req_done
 *   touched connections: parse what is buffered (if reads were paused),
 *                        write what was queued (one sendmsg for many
 *                        responses), close what is done
 *   once a second: timeouts; free connections whose last request is gone
 *   loop 0: each protocol's tick (struct kvtd_proto: RESP's active
 *                        expiry, at most every 100 ms while an entry is
 *                        due, respd.c "Active expiry")
 *
 * Read buffers: rbuf[rstart, rend) holds input the protocol has not
 * taken; kvtd_conn_rbuf_room grows it on the protocol's request (growth
 * past KVTD_RBUF_MIN is charged to --max-memory), and before a connection
 * authenticates no further than its protocol's preauth_buf.  A
 * connection with nothing buffered holds no buffer: each read is into the
 * loop's (lent), and the connection keeps it only if a request is left
 * partly read, the loop making another at its next read
 * (kvtd_conn_read_rbuf).  Until 2026-12-06 every connection kept a
 * KVTD_RBUF_MIN buffer between requests, outside --max-memory, and one
 * carved from memory earlier requests had touched was resident whole:
 * 1,000 idle RESP connections that had each sent one SET of 200 KB held
 * 69 KB of RSS each, 134 KB after a SET and a GET (release; a fresh
 * connection 5.3 KB) -- at --max-conns 4,096, half a GiB beside a 32M
 * budget (doc/security.md "Session 35 review", test_hostile_http
 * `idle_conns`).
 *
 * Flow control: a connection stops being read while it has
 * --conn-inflight frames unanswered or --conn-output bytes unwritten; a
 * slow reader therefore throttles only itself.
 *
 * Limits (doc/kvtierd.md "Overload"): memory that clients can make the
 * server allocate is charged to one budget, srv->mem_used against
 * --max-memory: read buffers grown past KVTD_RBUF_MIN (big tables), the
 * copies of headers and tables of frames in flight, data sections not
 * received in place (PUT values received in place go to DRAM
 * reservations, which the DRAM tier bounds), and encoded responses
 * waiting to be written (not the pinned DRAM bytes they point to).
 *   - input that does not fit is refused: an ERROR frame (-ENOMEM, "server
 *     memory limit") and the connection closes, counted in mem_refused;
 *   - output is always charged (the response is owed), but while the
 *     budget is exceeded a connection with output queued is not read
 *     (backpressure) until its output is written, counted in mem_paused;
 *   - a tenant's share: while the answers queued on its connections hold
 *     KVTD_OUT_TENANT_MAX (a quarter of the budget), a connection of that
 *     tenant with answers queued is not read until they are written,
 *     counted in out_share_paused.  Clients that pipeline and never read
 *     held --conn-output each, and a few of them the whole budget: every
 *     other tenant's next frame was refused.  Past the share a connection
 *     adds at most the answers of the frames it has in flight.  Shares
 *     apply with --tenants only (loop_shares).
 * A TLS connection's SSL is charged from its accept to its close, and
 * its read buffer while held ("The SSL object", "The SSL's read
 * buffer").  What stays outside the budget is per connection and small:
 * its struct, and a KVTD_RBUF_MIN read buffer only while a request is
 * partly read ("Read buffers"); --max-conns bounds those.
 * A new connection past --max-conns gets an ERROR frame (KVT_EBUSY) and
 * is closed, counted in conns_refused.
 *
 * Timeouts (--idle-timeout, doc/kvtierd.md): a TLS handshake or a
 * connection not authenticated in time, a frame not completed in time (its clock
 * restarts every KVTD_SLOW_PROGRESS data bytes), and output that makes no
 * progress in time (a reader that stopped reading while pins wait) close
 * the connection.
 *
 * Connection lifetime: closing removes the fd from epoll and closes it,
 * drops its output (releasing pins) and marks it dead; the struct stays
 * until its last in-flight frame has come back from the store (the
 * frames' kvt_reqs belong to the library until polled), then the sweep
 * frees it.  Handlers never free a connection, so a pointer held across a
 * call stays valid for the rest of the iteration.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "kvtierd.h"
#include "tlsio.h"

/* ------------------------------------------------------------------------
 * Limits: the --max-memory budget (see the top of the file)
 */

bool kvtd_mem_charge(struct kvtd_server *srv, uint64_t n, bool force)
{
	uint64_t max = srv->cfg.max_memory;
	uint64_t cur = atomic_load_explicit(&srv->mem_used, memory_order_relaxed);

	if (n == 0)
		return true;
	do {
		if (!force && max && (cur + n > max || cur + n < cur))
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
		&srv->mem_used, &cur, cur + n, memory_order_relaxed, memory_order_relaxed));
	return true;
}

void kvtd_mem_uncharge(struct kvtd_server *srv, uint64_t n)
{
	if (n)
		atomic_fetch_sub_explicit(&srv->mem_used, n, memory_order_relaxed);
}

static bool loop_mem_over(const struct kvtd_server *srv)
{
	return srv->cfg.max_memory &&
	       atomic_load_explicit(&srv->mem_used, memory_order_relaxed) > srv->cfg.max_memory;
}

/* Do tenant t's shares of the budget (its queued answers, its frames in
 * flight) apply?  Only with a budget and --tenants: without it every
 * client is the default tenant (kvtd_auth_open_conn, ops.c AUTH), one
 * trust domain, and a quarter of the budget for all of them together
 * throttled every client (test_hostile no_shares). */
static bool loop_shares(const struct kvtd_server *srv, const struct kvtd_tstat *t)
{
	return t && srv->cfg.max_memory && kvtd_auth_enabled();
}

/*
 * A tenant's quarters together.  Its queued answers (out_charged), its
 * requests in flight (in_charged), its SSLs (tls_mem) and its private
 * copies (copies) each have a quarter of the budget, checked apart: one
 * tenant over the TLS RESP listener with 270 logins, unread ECHOs and
 * half-sent SETs held 20 of 32 MiB, and with 256 stalled handshakes from
 * its address beside them the whole budget (another tenant's TLS login
 * closed at the accept, its SET refused: test_hostile_http tenant_sum).
 * Each quarter is now also cut to what keeps all of them together within
 * KVTD_TENANT_MEM_MAX (half): what a counter may reach is the smaller.
 */
uint64_t kvtd_tenant_cap(const struct kvtd_server *srv, const struct kvtd_tstat *t,
			 uint64_t mine, uint64_t quarter)
{
	uint64_t all = atomic_load_explicit(&t->out_charged, memory_order_relaxed) +
		       atomic_load_explicit(&t->in_charged, memory_order_relaxed) +
		       atomic_load_explicit(&t->tls_mem, memory_order_relaxed) +
		       atomic_load_explicit(&t->copies, memory_order_relaxed);
	uint64_t others = all > mine ? all - mine : 0, half = KVTD_TENANT_MEM_MAX(srv);
	uint64_t room = half > others ? half - others : 0;

	return room < quarter ? room : quarter;
}

/* c's tenant's queued answers hold their share of the budget. */
static bool loop_share_over(const struct kvtd_conn *c)
{
	const struct kvtd_server *srv = c->loop->srv;
	uint64_t out;

	if (!loop_shares(srv, c->tstat))
		return false;
	out = atomic_load_explicit(&c->tstat->out_charged, memory_order_relaxed);
	return out >= kvtd_tenant_cap(srv, c->tstat, out, KVTD_OUT_TENANT_MAX(srv));
}

uint64_t kvtd_in_share(const struct kvtd_server *srv, const struct kvtd_tstat *t,
		       uint64_t *held)
{
	uint64_t cap;

	if (!loop_shares(srv, t))
		return 0;
	*held = atomic_load_explicit(&t->in_charged, memory_order_relaxed);
	cap = kvtd_tenant_cap(srv, t, *held, KVTD_IN_TENANT_MAX(srv));
	return cap ? cap : 1; /* 0 would say no share applies */
}

bool kvtd_in_hold(struct kvtd_conn *c, struct kvtd_tstat *t, uint64_t n)
{
	uint64_t held = 0, cap = t ? kvtd_in_share(c->loop->srv, t, &held) : 0;

	if (!cap || n <= c->tbl_share)
		return true;
	/* As kvtd_frame_charge: a tenant holding nothing else makes progress. */
	if (held > c->tbl_share && held + (n - c->tbl_share) > cap)
		return false;
	atomic_fetch_add_explicit(&t->in_charged, n - c->tbl_share, memory_order_relaxed);
	c->tbl_want = 0;
	c->tbl_share = n;
	c->tbl_tstat = t;
	return true;
}

int kvtd_in_charge(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t mine, uint64_t n,
		   bool force)
{
	uint64_t held = 0, cap;

	if (n == 0)
		return 0;
	cap = force ? 0 : kvtd_in_share(srv, t, &held);
	/* a tenant holding nothing but this request makes progress */
	if (cap && held > mine && held + n > cap)
		return -EDQUOT;
	if (!kvtd_mem_charge(srv, n, force))
		return -ENOBUFS;
	if (t)
		atomic_fetch_add_explicit(&t->in_charged, n, memory_order_relaxed);
	return 0;
}

void kvtd_in_uncharge(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t n)
{
	kvtd_mem_uncharge(srv, n);
	if (t && n)
		atomic_fetch_sub_explicit(&t->in_charged, n, memory_order_relaxed);
}

void kvtd_in_release(struct kvtd_conn *c)
{
	c->tbl_want = 0;
	if (!c->tbl_share)
		return;
	atomic_fetch_sub_explicit(&c->tbl_tstat->in_charged, c->tbl_share, memory_order_relaxed);
	c->tbl_share = 0;
	c->tbl_tstat = NULL;
}

static void loop_conn_touch(struct kvtd_conn *c);

/* Append c to a loop's list of connections (touched, deferred); false
 * without memory. */
static bool loop_conn_push(struct kvtd_conn ***list, unsigned *n, unsigned *cap,
			   struct kvtd_conn *c)
{
	if (*n == *cap) {
		unsigned nc = *cap ? *cap * 2 : 64;
		struct kvtd_conn **nv = realloc(*list, nc * sizeof(*nv));
		if (!nv)
			return false;
		*list = nv;
		*cap = nc;
	}
	(*list)[(*n)++] = c;
	return true;
}

/*
 * Tenants an iteration.  What each tenant's connections took in an
 * iteration is counted in the loop's table, one slot a tenant seen in it,
 * whatever their number (a tenants file may name thousands): until
 * 2026-12-05 the table held the first 32, and the 33rd tenant of an
 * iteration and those after it were held to no budget there
 * (test_hostile_http tenants_past_32).  The table is open addressing keyed
 * by the tstat's address (a multiplicative hash, linear probing), so a
 * frame's lookup is a probe or two whatever the count; a slot stamped
 * with an earlier iteration (or never used: no tstat) is empty, so a new
 * iteration clears nothing.
 * It doubles once half full (the slots of this iteration moved); if that
 * memory is refused, the tenants not in it share tparse_over: held to
 * one budget together rather than to none.
 */
static unsigned loop_tparse_hash(const struct kvtd_tstat *t, unsigned cap)
{
	return (unsigned)((((uintptr_t)t >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static struct kvtd_tparse *loop_tparse_slot(struct kvtd_tparse *tab, unsigned cap,
					    uint64_t iter, const struct kvtd_tstat *t)
{
	unsigned i = loop_tparse_hash(t, cap);

	while (tab[i].t && tab[i].iter == iter && tab[i].t != t)
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

/* The table of twice the slots (KVTD_PARSE_TENANTS at first), this
 * iteration's tenants in it; false without memory (the table kept). */
static bool loop_tparse_grow(struct kvtd_loop *loop)
{
	unsigned cap = loop->tparse_cap ? loop->tparse_cap * 2 : KVTD_PARSE_TENANTS;
	struct kvtd_tparse *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return false;
	for (unsigned i = 0; i < loop->tparse_cap; i++) {
		struct kvtd_tparse *o = &loop->tparse[i];
		if (o->t && o->iter == loop->iter)
			*loop_tparse_slot(tab, cap, loop->iter, o->t) = *o;
	}
	free(loop->tparse);
	loop->tparse = tab;
	loop->tparse_cap = cap;
	return true;
}

/* What t's connections took in this iteration of the loop (NULL: not
 * counted: no shares). */
static struct kvtd_tparse *loop_tparse_of(struct kvtd_loop *loop, struct kvtd_tstat *t)
{
	struct kvtd_tparse *tp;

	if (!loop_shares(loop->srv, t))
		return NULL;
	if (loop->tparse_iter != loop->iter) {
		loop->tparse_iter = loop->iter;
		loop->tparse_n = 0;
		loop->tparse_over = (struct kvtd_tparse){ NULL, loop->iter, 0, 0 };
	}
	if (loop->tparse_cap) {
		tp = loop_tparse_slot(loop->tparse, loop->tparse_cap, loop->iter, t);
		if (tp->t == t && tp->iter == loop->iter)
			return tp;
	}
	if ((loop->tparse_n + 1) * 2 > loop->tparse_cap && !loop_tparse_grow(loop) &&
	    loop->tparse_n + 1 >= loop->tparse_cap)
		return &loop->tparse_over; /* no memory, and no slot left free */
	tp = loop_tparse_slot(loop->tparse, loop->tparse_cap, loop->iter, t);
	*tp = (struct kvtd_tparse){ t, loop->iter, 0, 0 };
	loop->tparse_n++;
	return tp;
}

static struct kvtd_tparse *loop_tparse(struct kvtd_conn *c)
{
	return loop_tparse_of(c->loop, c->tstat);
}

bool kvtd_conn_parse_budget(struct kvtd_conn *c, uint32_t items)
{
	struct kvtd_tparse *tp;

	if (c->parse_iter != c->loop->iter) {
		c->parse_iter = c->loop->iter;
		c->parse_frames = 0;
		c->parse_items = 0;
	}
	if (c->parse_frames >= KVTD_PARSE_FRAMES ||
	    (c->parse_frames > 0 && c->parse_items + items > KVTD_PARSE_ITEMS))
		return false;
	/* its tenant's connections together (KVTD_PARSE_TENANT_FRAMES) */
	tp = loop_tparse(c);
	if (tp && tp->frames > 0 && (tp->frames >= KVTD_PARSE_TENANT_FRAMES ||
				     tp->items + items > KVTD_PARSE_TENANT_ITEMS)) {
		c->parse_tenant = true;
		return false;
	}
	c->parse_frames++;
	c->parse_items += items;
	if (tp) {
		tp->frames++;
		tp->items += items;
	}
	return true;
}

void kvtd_conn_parse_spend(struct kvtd_conn *c, uint64_t items)
{
	struct kvtd_tparse *tp;

	if (c->parse_iter != c->loop->iter)
		return; /* taken in an earlier iteration, answered now */
	c->parse_items += items;
	if ((tp = loop_tparse(c)))
		tp->items += items;
}

/*
 * TLS records a loop iteration.  A record costs its decryption and
 * OpenSSL's bookkeeping (~0.5 us release, 4 us ASan) whatever it carries,
 * and a TLS connection takes 256 an event (tls.c TLS_READ_RECORDS a read,
 * loop_conn_read's 16 reads), but the budgets above count commands and
 * keys: one tenant's 96 connections of one-byte records cost an
 * iteration 24,576 records, and another tenant's PING waited 300 ms
 * (ASan; test_hostile_http tls_tenant_records).  So a record counts as an
 * item of its tenant's budget (KVTD_PARSE_TENANT_ITEMS), and of one shared
 * by the connections not yet authenticated (each is held to its
 * preauth_buf of input, but 256 of them from an address read together);
 * a connection whose payer spent it is not read until the next iteration
 * (deferred: first then, as its tenant's frames are).  A connection's
 * first read of an iteration is always taken when its payer has spent
 * nothing: at most one read's records over the budget.
 */
static uint64_t *loop_tls_payer(struct kvtd_conn *c)
{
	struct kvtd_loop *loop = c->loop;
	struct kvtd_tparse *tp;

	if (c->state != KVTD_CS_READY) {
		if (!kvtd_auth_enabled())
			return NULL;
		if (loop->tls_unauth_iter != loop->iter) {
			loop->tls_unauth_iter = loop->iter;
			loop->tls_unauth_records = 0;
		}
		return &loop->tls_unauth_records;
	}
	/* Its tenant: c->tstat once a protocol resolved it (kvtd_tstat_of; the
	 * loop does not call metrics.c), before that the one its AUTH was
	 * admitted as (kvtd_tenant_conn_admit: a SET in one-byte records
	 * resolves nothing until it is whole). */
	tp = loop_tparse_of(loop, c->tstat ? c->tstat : c->conns_tstat);
	return tp ? &tp->items : NULL;
}

/* The records c's reads took since the last charge (c->tls_records,
 * counted by tls.c, which cannot see the budgets: layers point down). */
static void loop_tls_charge(struct kvtd_conn *c)
{
	uint64_t *spent = c->tls_records ? loop_tls_payer(c) : NULL;

	if (spent)
		*spent += c->tls_records;
	c->tls_records = 0;
}

/*
 * The SSL's read buffer.  A client that sends a record header declaring
 * 16 KiB and part of the record has the SSL hold a read buffer of ~17 KiB
 * (tls.c kvtd_tls_rbuf_held) until the record is whole: 1,000 such
 * authenticated connections held +34.5 MiB of RSS at --max-memory 32M,
 * mem_used 0, bounded only by --max-conns.  Held after a read, it is
 * charged to --max-memory and the connection's tenant's input share, as
 * a partial command past KVTD_RBUF_KEEP is (respd.c, native.c), and
 * released when the SSL holds none.  Refused, the connection fails as
 * one whose read buffer cannot grow (kvtd_conn_read_rbuf): answered,
 * counted in mem_refused, closed -- stopping its reads would not free
 * the buffer.  false: refused.
 */
static bool loop_tls_rbuf(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	size_t n = c->dead ? 0 : kvtd_tls_rbuf_held(c);
	struct kvtd_tstat *t;
	int rc;

	if ((n > 0) == (c->tls_rbuf > 0))
		return true;
	if (!n) {
		kvtd_in_uncharge(srv, c->tls_rbuf_tstat, c->tls_rbuf);
		c->tls_rbuf = 0;
		c->tls_rbuf_tstat = NULL;
		return true;
	}
	t = c->state == KVTD_CS_READY ? (c->tstat ? c->tstat : c->conns_tstat) : NULL;
	rc = kvtd_in_charge(srv, t, 0, n, false);
	if (rc < 0) {
		KVTD_COUNT(srv, mem_refused, 1);
		c->ops->fail(c, -ENOMEM,
			     rc == -EDQUOT ? "the tenant's connections' TLS records being "
					     "received hold its share of the server memory "
					     "limit (--max-memory); retry later"
					   : "server out of memory");
		return false;
	}
	c->tls_rbuf = (uint32_t)n;
	c->tls_rbuf_tstat = t;
	return true;
}

/*
 * The SSL object.  Beside its read buffer (above), a TLS connection's SSL
 * holds ~43 KiB while its handshake runs and ~14 KiB established, 16 KiB
 * more while an answer is being written (tls.c "The SSL object"), all
 * outside --max-memory until 2026-12-05: bounded only by --max-conns, of
 * which half may be handshaking (2,048 of them ~86 MiB at the default
 * 4,096).  Charged from the accept -- before the SSL is made -- until the
 * close, at its stage's size (kvtd_tls_conn_mem: lowered once the
 * handshake is done, never raised):
 *   - to --max-memory: kvtier_server_memory_bytes shows it;
 *   - before authentication also to srv->tls_unauth_mem, at most
 *     KVTD_TLS_UNAUTH_MEM_MAX (half the budget), so that a flood of
 *     handshakes cannot take the budget from the authenticated clients
 *     (output before AUTH is uncharged for the same reason), and to its
 *     address's srv->peer_tls_mem, at most KVTD_TLS_PEER_MEM_MAX (a
 *     sixteenth: one address's 256 held the whole half, Session 48);
 *   - once authenticated as a tenant, to its t->tls_mem, at most
 *     KVTD_TLS_TENANT_MEM_MAX (metrics.c kvtd_tenant_conn_admit): one
 *     tenant's connections do not take the budget from the others, nor
 *     with its other charges more than half (kvtd_tenant_cap).  Not
 *     its input share (in_charged), which a read buffer held counts in:
 *     the SSLs of a tenant's idle connections would refuse its commands.
 * Refused at the accept (loop_conn_add), the connection is closed before
 * its SSL is made -- an answer would need the handshake, the memory
 * refused -- and costs nothing more (server.tls_mem_refused, of
 * server.conns_refused); refused at AUTH, answered and closed as one past
 * --tenant-conns.  Released once, at the close (loop_conn_close: the
 * SSL freed), whatever the path.  false: refused.
 */
static bool loop_tls_mem_admit(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	uint64_t n = kvtd_tls_conn_mem(c);
	bool unauth = c->state != KVTD_CS_READY;

	if (unauth && atomic_fetch_add_explicit(&srv->tls_unauth_mem, n, memory_order_relaxed) +
				      n > KVTD_TLS_UNAUTH_MEM_MAX(srv)) {
		atomic_fetch_sub_explicit(&srv->tls_unauth_mem, n, memory_order_relaxed);
		return false;
	}
	/* its address's part of that half (KVTD_TLS_PEER_MEM_MAX) */
	if (unauth && srv->cfg.max_memory &&
	    kvtd_peer_count_add(srv->peer_tls_mem, c->peer_slot, n) + n >
		    KVTD_TLS_PEER_MEM_MAX(srv)) {
		kvtd_peer_count_sub(srv->peer_tls_mem, c->peer_slot, n);
		atomic_fetch_sub_explicit(&srv->tls_unauth_mem, n, memory_order_relaxed);
		return false;
	}
	if (!kvtd_mem_charge(srv, n, false)) {
		if (unauth && srv->cfg.max_memory)
			kvtd_peer_count_sub(srv->peer_tls_mem, c->peer_slot, n);
		if (unauth)
			atomic_fetch_sub_explicit(&srv->tls_unauth_mem, n, memory_order_relaxed);
		return false;
	}
	c->tls_mem_peer = unauth && srv->cfg.max_memory;
	c->tls_mem = (uint32_t)n;
	c->tls_mem_unauth = unauth;
	return true;
}

/* c's SSL is charged n from now (n below what it was: its handshake
 * done, or 0 at the close), wherever it counts. */
static void loop_tls_mem_set(struct kvtd_conn *c, uint64_t n)
{
	struct kvtd_server *srv = c->loop->srv;
	uint64_t less = c->tls_mem > n ? c->tls_mem - n : 0;

	if (!less)
		return;
	kvtd_mem_uncharge(srv, less);
	if (c->tls_mem_unauth)
		atomic_fetch_sub_explicit(&srv->tls_unauth_mem, less, memory_order_relaxed);
	if (c->tls_mem_peer)
		kvtd_peer_count_sub(srv->peer_tls_mem, c->peer_slot, less);
	if (c->conns_tstat)
		atomic_fetch_sub_explicit(&c->conns_tstat->tls_mem, less, memory_order_relaxed);
	c->tls_mem = (uint32_t)n;
	if (!n)
		c->tls_mem_unauth = c->tls_mem_peer = false;
}

/* Authenticated: c's SSL leaves the unauthenticated ones' half. */
static void loop_tls_mem_authed(struct kvtd_conn *c)
{
	if (!c->tls_mem_unauth)
		return;
	atomic_fetch_sub_explicit(&c->loop->srv->tls_unauth_mem, c->tls_mem,
				  memory_order_relaxed);
	c->tls_mem_unauth = false;
	if (c->tls_mem_peer)
		kvtd_peer_count_sub(c->loop->srv->peer_tls_mem, c->peer_slot,
				    c->tls_mem);
	c->tls_mem_peer = false;
}

/* May c read TLS records now?  False: deferred to the next iteration. */
static bool loop_tls_turn(struct kvtd_conn *c)
{
	uint64_t *spent = loop_tls_payer(c);

	if (!spent || *spent < KVTD_PARSE_TENANT_ITEMS)
		return true;
	KVTD_COUNT(c->loop->srv, tls_deferred, 1);
	c->parse_tenant = true;
	kvtd_conn_defer(c);
	return false;
}

void kvtd_conn_defer(struct kvtd_conn *c)
{
	struct kvtd_loop *loop = c->loop;

	if (c->deferred || c->dead)
		return;
	if (!loop_conn_push(&loop->deferred, &loop->deferred_n, &loop->deferred_cap, c)) {
		/* Taken now rather than forgotten: the next touch. */
		loop_conn_touch(c);
		return;
	}
	c->deferred = true;
	KVTD_COUNT(loop->srv, parse_deferred, 1);
}

/* A new iteration: the deferred connections are parsed again (settle). */
static void loop_undefer(struct kvtd_loop *loop)
{
	unsigned n = loop->deferred_n;

	loop->deferred_n = 0;
	/* Those their tenant's budget stopped first: the tenant's others
	 * took the budget this time (round robin among its connections). */
	for (int first = 1; first >= 0; first--) {
		for (unsigned i = 0; i < n; i++) {
			struct kvtd_conn *c = loop->deferred[i];
			if (!c->deferred || c->parse_tenant != (bool)first)
				continue;
			c->deferred = false;
			c->parse_tenant = false;
			if (!c->dead)
				loop_conn_touch(c);
		}
	}
}

/* c has frames in flight and its tenant's frames hold their share of
 * the budget (ops.c kvtd_frame_charge): c is not read until its own are
 * answered.  A connection with none in flight is read: its next frame is
 * charged alone, or refused (then answered -ENOMEM, its data dropped).
 * The rest of a data section being received is read all the same: it
 * was charged (c->rx), or is dropped (c->rx_drop), when its header came;
 * so is an S3 body (ops->partial: s3d.c sc->rx), charged at its head.
 * Before 2026-12-06 the S3 body was not exempt: an overwrite's buffer of
 * 8 MiB (over the share alone) resumed from a park paused its own
 * connection, which then never read it (the client's PUT unanswered). */
bool kvtd_conn_in_share_over(const struct kvtd_conn *c)
{
	uint64_t held = 0, cap = kvtd_in_share(c->loop->srv, c->tstat, &held);

	if (!(c->inflight > 0 && !c->rx && !c->rx_drop && cap))
		return false;
	if (c->ops->partial && c->ops->partial(c))
		return false;
	/* A table the share refused while c has frames in flight (native.c
	 * tbl_want) waits too: read on, it was buffered whole outside the
	 * share while held < cap. */
	return held >= cap ||
	       (c->tbl_want > c->tbl_share && held + (c->tbl_want - c->tbl_share) > cap);
}

static void loop_conn_close(struct kvtd_conn *c, const char *why);
static void loop_conn_flush(struct kvtd_conn *c);
static void loop_unauth_drop(struct kvtd_conn *c);
static void loop_unauth_unlink(struct kvtd_conn *c);

/* ------------------------------------------------------------------------
 * Output
 */

void kvtd_out_free(struct kvtd_server *srv, struct kvtd_out *o)
{
	for (unsigned i = 0; i < o->pin_count; i++)
		kvt_pin_release(srv->store, o->pins[i]);
	kvtd_mem_uncharge(srv, o->mem_len);
	if (o->held)
		(*o->held)--;
	free(o->pins);
	if (o->iov != o->iov_small)
		free(o->iov);
	free(o->hdr);
	free(o->buf);
	free(o->keep);
	free(o);
}

/* An output entry of c is done (written or dropped): what it held is
 * given back -- its pins, its charge, its share of c's and its tenant's
 * pinned bytes. */
static void loop_out_done(struct kvtd_conn *c, struct kvtd_out *o)
{
	c->copy_bytes -= o->copy_len;
	if (o->copy_tstat)
		atomic_fetch_sub_explicit(&o->copy_tstat->copies, o->copy_len,
					  memory_order_relaxed);
	c->out_entries--;
	if (o->tstat)
		atomic_fetch_sub_explicit(&o->tstat->out_charged, o->tenant_len,
					  memory_order_relaxed);
	if (kvtd_out_pinned(o)) {
		c->pin_bytes -= kvtd_out_pinned(o);
		if (o->pin_slot < KVTD_CONN_PIN_TENANTS)
			c->pin_by[o->pin_slot].bytes -= kvtd_out_pinned(o);
		else if (o->pin_tstat)
			c->pin_others -= kvtd_out_pinned(o);
		if (o->pin_tstat)
			atomic_fetch_sub_explicit(&o->pin_tstat->pinned, kvtd_out_pinned(o),
						  memory_order_relaxed);
	}
	kvtd_out_free(c->loop->srv, o);
}

/* The slot of c->pin_by an answer pinned for tenant t counts in: t's,
 * else a free one (no bytes), else KVTD_CONN_PIN_TENANTS (pin_others). */
static unsigned loop_pin_slot(struct kvtd_conn *c, struct kvtd_tstat *t)
{
	unsigned free_slot = KVTD_CONN_PIN_TENANTS;

	for (unsigned i = 0; i < KVTD_CONN_PIN_TENANTS; i++) {
		if (c->pin_by[i].bytes && c->pin_by[i].t == t)
			return i;
		if (!c->pin_by[i].bytes && free_slot == KVTD_CONN_PIN_TENANTS)
			free_slot = i;
	}
	if (free_slot < KVTD_CONN_PIN_TENANTS)
		c->pin_by[free_slot].t = t;
	return free_slot;
}

/*
 * Whether c's pinned answers count in a tenant over its cap: the tenant
 * each answer was charged to when queued (pin_tstat), not the
 * connection's now -- a RESP pipeline of GETs, then AUTH as another,
 * left the connection read while its answers held the first tenant past
 * KVTD_PIN_TENANT_MAX (respd.c respd_pin_flow; test_hostile
 * resp_auth_flow).  Answers of more tenants than c tracks count as over:
 * c is not read until they drain.
 */
bool kvtd_conn_pin_tenants_over(const struct kvtd_conn *c)
{
	uint64_t max = KVTD_PIN_TENANT_MAX(c->loop->srv);

	if (c->pin_others)
		return true;
	for (unsigned i = 0; i < KVTD_CONN_PIN_TENANTS; i++)
		if (c->pin_by[i].bytes &&
		    atomic_load_explicit(&c->pin_by[i].t->pinned, memory_order_relaxed) >= max)
			return true;
	return false;
}

/* TLS (tls.c): an SSL call may wait for the other direction (a read for
 * a write during a handshake, a write for a read after a key update). */
static uint32_t loop_conn_tls_events(const struct kvtd_conn *c, uint32_t e)
{
	if (!c->tls)
		return e;
	if (!c->tls_ready)
		return (c->tls_rd_want == TLSIO_WANT_OUT ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP;
	if (c->tls_rd_want == TLSIO_WANT_OUT && (e & EPOLLIN))
		e |= EPOLLOUT;
	if (c->tls_wr_want == TLSIO_WANT_IN && (e & EPOLLOUT))
		e = (e & ~(uint32_t)EPOLLOUT) | EPOLLIN;
	return e;
}

/* The epoll events a connection wants now. */
static void loop_conn_events(struct kvtd_conn *c, bool want_out)
{
	struct epoll_event ev;
	uint32_t e = 0;

	if (c->dead || c->lingering)
		return;
	if (!c->no_more_input && !c->read_paused)
		e |= EPOLLIN | EPOLLRDHUP;
	if (want_out)
		e |= EPOLLOUT;
	e = loop_conn_tls_events(c, e);
	if (e == c->events)
		return;
	ev.events = e;
	ev.data.ptr = &c->ev;
	if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->events = e;
}

/* Reads pause while too much is in flight or queued; resume otherwise. */
static void loop_conn_flow(struct kvtd_conn *c)
{
	const struct kvtd_config *cfg = &c->loop->srv->cfg;
	bool mem = c->out_bytes > 0 && loop_mem_over(c->loop->srv);
	bool share = c->out_bytes > 0 && loop_share_over(c);
	uint64_t out = c->out_bytes + (uint64_t)c->out_entries * KVTD_OUT_COST;
	/* Before AUTH, answers (PING's, NOAUTH errors) are bounded like the
	 * input: at most preauth_buf queued, outside the budget. */
	uint64_t out_max = c->state == KVTD_CS_READY ? cfg->conn_output : c->ops->preauth_buf;
	bool in_share = kvtd_conn_in_share_over(c);
	bool pause = c->inflight >= cfg->conn_inflight || out >= out_max || mem || share ||
		     in_share || c->parked || c->pin_paused || c->order_hold;

	if (pause == c->read_paused)
		return;
	if (pause && mem)
		KVTD_COUNT(c->loop->srv, mem_paused, 1);
	else if (pause && (share || in_share))
		KVTD_COUNT(c->loop->srv, out_share_paused, 1);
	c->read_paused = pause;
	if (!pause) {
		/* Frames may already wait in rbuf; their clock restarts. */
		if (c->frame_start_ns)
			c->frame_start_ns = c->loop->now_ns;
		loop_conn_touch(c);
	}
	loop_conn_events(c, c->out_stall_ns != 0);
}

void kvtd_conn_queue(struct kvtd_conn *c, struct kvtd_out *o)
{
	struct kvtd_server *srv = c->loop->srv;

	if (c->dead) {
		c->copy_bytes -= o->copy_len;
		if (o->copy_tstat)
			atomic_fetch_sub_explicit(&o->copy_tstat->copies, o->copy_len,
						  memory_order_relaxed);
		o->mem_len = o->copy_len;
		kvtd_out_free(srv, o);
		return;
	}
	if (kvtd_out_pinned(o)) {
		if (!c->pin_bytes) {
			c->drain_mark_ns = c->loop->now_ns;
			c->drain_mark_out = c->bytes_out;
		}
		c->pin_bytes += kvtd_out_pinned(o);
		/* given back to the tenant it was counted in, not to the
		 * connection's tenant when written: two S3 signers on one
		 * connection wrapped the second's count below zero
		 * (test_hostile_http s3_signers).  The S3 listener names
		 * the tenant (the GET's signer: s3reply.c s3d_out); the
		 * others' is the connection's. */
		if (!o->pin_tstat)
			o->pin_tstat = c->tstat;
		o->pin_slot = KVTD_CONN_PIN_TENANTS;
		if (o->pin_tstat) {
			atomic_fetch_add_explicit(&o->pin_tstat->pinned, kvtd_out_pinned(o),
						  memory_order_relaxed);
			o->pin_slot = loop_pin_slot(c, o->pin_tstat);
			if (o->pin_slot < KVTD_CONN_PIN_TENANTS)
				c->pin_by[o->pin_slot].bytes += kvtd_out_pinned(o);
			else
				c->pin_others += kvtd_out_pinned(o);
		}
	}
	/* Encoded bytes and the entry itself are charged; pinned DRAM runs
	 * are the DRAM tier's; private copies behind pins were charged when
	 * made (ops.c).  What says where the runs are is charged too: an
	 * iovec each (an array past the entry's own two) and a pin's handle,
	 * slot and view in the store (KVTD_PIN_COST).  Only the first iovec
	 * was: a RESP MGET of 65,535 one-byte values is 458 KB of reply and
	 * 131,071 iovecs, 65,535 pins and 393 KB of text besides its runs,
	 * ~10 MB of RSS, and 12 such replies queued unread grew kvtierd
	 * 119 MiB while mem_used said 14 KB (test_hostile resp_mget_held).
	 * Bytes sent from a request's own (keep: a RESP ECHO's argument)
	 * are charged as what keep holds, the request's buffer.
	 * Before AUTH
	 * nothing is: the connection's output is bounded by its preauth_buf
	 * instead (loop_conn_flow), so that unauthenticated clients never
	 * take the budget from the others. */
	o->mem_len = o->bytes - o->pin_len; /* pin_len: bytes sent from pins, whoever's */
	o->mem_len += o->keep_len - o->keep_ref_len;
	o->mem_len += KVTD_OUT_COST + (uint64_t)o->pin_count * KVTD_PIN_COST;
	if (o->iov != o->iov_small)
		o->mem_len += (uint64_t)o->iov_count * sizeof(*o->iov);
	if (c->state != KVTD_CS_READY)
		o->mem_len = 0;
	kvtd_mem_charge(srv, o->mem_len, true);
	/* ... and counted in its tenant's share (loop_share_over): the
	 * protocols look the tenant up for every request after AUTH
	 * (kvtd_tstat_of; the loop does not call metrics.c).  The tenant
	 * the protocol named (S3: the request's signer, s3reply.c s3d_out),
	 * else the connection's: an S3 connection's is its latest signer,
	 * and one tenant's answers queued on a connection another tenant
	 * signed on last counted in the other's share (test_hostile_http
	 * s3_out_signers) */
	if (!o->tstat)
		o->tstat = c->tstat;
	o->sent_tstat = o->tstat;
	if (!o->mem_len)
		o->tstat = NULL;
	o->tenant_len = o->tstat ? o->mem_len : 0;
	if (o->tstat)
		atomic_fetch_add_explicit(&o->tstat->out_charged, o->tenant_len,
					  memory_order_relaxed);
	o->mem_len += o->copy_len;
	o->next = NULL;
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->out_bytes += o->bytes;
	c->out_entries++;
	loop_conn_touch(c);
}

/*
 * Bytes written of answers of tenant t: kvtier_tenant_bytes_out_total.
 * Counted in the tenant each answer was charged to when queued
 * (kvtd_out.sent_tstat), not the connection's when written: a RESP
 * pipeline's answers written after an AUTH as another tenant counted in
 * the other's, or in none (respd.c clears c->tstat at AUTH; test_resp
 * auth_bytes_out), an S3 connection's in its latest signer's.
 */
static void loop_count_sent(struct kvtd_tstat *t, uint64_t n)
{
	if (t && n)
		atomic_fetch_add_explicit(&t->bytes_out, n, memory_order_relaxed);
}

/* Write as much of the output queue as the socket takes. */
static void loop_conn_flush(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct iovec iov[128];
	bool unpinned = false;
	struct kvtd_tstat *run_t;
	uint64_t run_n;

	/* Nothing is written before a TLS handshake is done: an SSL_write
	 * would drive the handshake itself, past the first-record gate and
	 * the address's throttle (loop_conn_handshake), and a refusal past
	 * --max-conns did -- a full handshake for each connection from a
	 * throttled address.  The answer waits for loop_conn_handshake. */
	if (c->tls && !c->tls_ready)
		return;
	while (c->out_head && !c->dead) {
		unsigned n = 0;
		ssize_t w;

		for (struct kvtd_out *o = c->out_head; o && n < 128; o = o->next) {
			for (unsigned i = o->iov_pos; i < o->iov_count && n < 128; i++) {
				size_t skip = i == o->iov_pos ? o->iov_off : 0;
				iov[n].iov_base = (uint8_t *)o->iov[i].iov_base + skip;
				iov[n].iov_len = o->iov[i].iov_len - skip;
				n++;
			}
		}
		w = kvtd_conn_writev(c, iov, (int)n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (!c->out_stall_ns)
					c->out_stall_ns = c->loop->now_ns;
				loop_conn_events(c, true);
				return;
			}
			KVTD_COUNT(srv, errors[KVTD_ERR_IO], 1);
			loop_conn_close(c, strerror(errno));
			return;
		}
		c->out_stall_ns = 0;
		c->bytes_out += (uint64_t)w;
		c->out_bytes -= (uint64_t)w;
		KVTD_COUNT(srv, bytes_out, w);
		/* Advance through the entries; finished ones are freed.  The
		 * bytes written count in each entry's tenant (sent_tstat), a
		 * run of one tenant's at a time. */
		run_t = NULL;
		run_n = 0;
		while (w > 0 || (c->out_head && c->out_head->iov_pos == c->out_head->iov_count)) {
			struct kvtd_out *o = c->out_head;
			ssize_t w0 = w;
			if (!o)
				break;
			if (o->sent_tstat != run_t) {
				loop_count_sent(run_t, run_n);
				run_t = o->sent_tstat;
				run_n = 0;
			}
			while (o->iov_pos < o->iov_count && w > 0) {
				size_t left = o->iov[o->iov_pos].iov_len - o->iov_off;
				if ((size_t)w >= left) {
					w -= (ssize_t)left;
					o->iov_pos++;
					o->iov_off = 0;
				} else {
					o->iov_off += (size_t)w;
					w = 0;
				}
			}
			run_n += (uint64_t)(w0 - w);
			/* Skip empty iovecs too. */
			while (o->iov_pos < o->iov_count && o->iov[o->iov_pos].iov_len == 0)
				o->iov_pos++;
			if (o->iov_pos < o->iov_count)
				break;
			c->out_head = o->next;
			if (!c->out_head)
				c->out_tail = NULL;
			KVTD_COUNT(srv, frames_out, 1);
			if (kvtd_out_pinned(o))
				unpinned = true;
			loop_out_done(c, o);
		}
		loop_count_sent(run_t, run_n);
	}
	if (!c->dead) {
		c->out_stall_ns = 0;
		loop_conn_events(c, false);
		loop_conn_flow(c);
	}
	if (unpinned && !c->dead && c->ops->written)
		c->ops->written(c);
}

/* ------------------------------------------------------------------------
 * Touched connections: work left for the end of the iteration
 */

static void loop_conn_touch(struct kvtd_conn *c)
{
	struct kvtd_loop *loop = c->loop;

	if (c->touched)
		return;
	if (!loop_conn_push(&loop->touched, &loop->touched_n, &loop->touched_cap, c)) {
		/* Do it now instead. */
		loop_conn_flush(c);
		return;
	}
	c->touched = true;
}

/*
 * Lingering close.  Closing with unread input, or input that arrives
 * after the close, makes the kernel reset the connection, and a reset
 * throws away what we sent that the peer has not acknowledged: the last
 * answers (those before a BYE with junk behind it), the ERROR frame that
 * says why.  Dropping what was there at the close (as before) did not
 * help against bytes still on their way.  So, as Apache's and nginx's
 * lingering close: our direction is shut down (the peer reads the
 * answers, then the end), and the connection stays in epoll, its input
 * read and dropped (loop_linger_drain), until the peer closes its side,
 * or all we sent is acknowledged (SIOCOUTQ 0: a reset can lose nothing
 * any more), or KVTD_LINGER_MS or KVTD_LINGER_BYTES pass, so that a
 * client cannot hold its slot by sending on.  Before AUTH it drops at
 * most KVTD_LINGER_PREAUTH_BYTES: an unauthenticated client streaming a
 * command it may not send is cut off as before (test_hostile
 * resp_preauth), not read for 2 s.  Checked at each read and each sweep
 * (loop_linger_sweep).  Past --max-conns (a flood of connections being
 * refused) nothing lingers.
 */

/* true: close it now.  At most 256 KiB a call (level-triggered epoll
 * brings it back), so that one fast sender does not hold the loop. */
static bool loop_linger_drain(struct kvtd_conn *c)
{
	uint64_t max = c->state == KVTD_CS_READY ? KVTD_LINGER_BYTES : KVTD_LINGER_PREAUTH_BYTES;
	char buf[16384];
	int q = 0;

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			return true;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return true;
			break;
		}
		c->linger_bytes += (uint64_t)r;
		if (c->linger_bytes >= max)
			return true;
	}
	return ioctl(c->fd, SIOCOUTQ, &q) < 0 || q == 0 ||
	       c->loop->now_ns - c->linger_ns >= KVTD_LINGER_MS * 1000000ull;
}

static void loop_conn_linger(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = &c->ev };
	uint64_t active = atomic_load_explicit(&srv->ctr.conns_active, memory_order_relaxed);

	shutdown(c->fd, SHUT_WR);
	c->linger_ns = c->loop->now_ns;
	c->linger_bytes = 0;
	if (loop_linger_drain(c) || active > srv->cfg.max_conns ||
	    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		loop_conn_close(c, NULL);
		return;
	}
	c->events = ev.events;
	c->lingering = true;
	loop_unauth_unlink(c); /* still counted until closed, but not evicted */
	KVTD_COUNT(srv, conns_lingered, 1);
}

/* The lingering connections' clocks (and acknowledgements). */
static void loop_linger_sweep(struct kvtd_loop *loop)
{
	for (struct kvtd_conn *c = loop->conns; c; c = c->next)
		if (c->lingering && !c->dead && loop_linger_drain(c))
			loop_conn_close(c, NULL);
}

static void loop_conn_maybe_close(struct kvtd_conn *c)
{
	if (!c->dead && !c->lingering && c->close_when_flushed && !c->out_head &&
	    c->inflight == 0)
		loop_conn_linger(c);
}

/* What the protocols call: the same, with the loop's own bookkeeping. */
void kvtd_conn_touch(struct kvtd_conn *c)
{
	loop_conn_touch(c);
}

void kvtd_conn_events(struct kvtd_conn *c)
{
	loop_conn_events(c, c->out_stall_ns != 0);
}

void kvtd_conn_flow(struct kvtd_conn *c)
{
	loop_conn_flow(c);
}

void kvtd_conn_close(struct kvtd_conn *c, const char *why)
{
	loop_conn_close(c, why);
}

void kvtd_conn_frame_done(struct kvtd_conn *c)
{
	c->inflight--;
	if (c->dead)
		return;
	if (c->inflight == 0 && c->ops->idle)
		c->ops->idle(c);
	loop_conn_flow(c);
	loop_conn_touch(c);
}

void kvtd_conn_stop_input(struct kvtd_conn *c)
{
	c->no_more_input = true;
	c->close_when_flushed = true;
	loop_conn_events(c, c->out_stall_ns != 0);
	loop_conn_touch(c);
}

/* ------------------------------------------------------------------------
 * Connections: accept, read, close
 */

static void loop_conn_close(struct kvtd_conn *c, const char *why)
{
	struct kvtd_loop *loop = c->loop;
	struct kvtd_server *srv = loop->srv;

	if (c->dead)
		return;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	kvtd_tls_close(c);
	loop_tls_mem_set(c, 0); /* its SSL freed: released */
	close(c->fd);
	c->fd = -1;
	c->dead = true;
	loop_tls_rbuf(c); /* released */
	while (c->out_head) {
		struct kvtd_out *o = c->out_head;
		c->out_head = o->next;
		loop_out_done(c, o);
	}
	c->out_tail = NULL;
	c->out_bytes = 0;
	if (c->ops->drop_input)
		c->ops->drop_input(c);
	kvtd_conn_rbuf_release(c);
	loop_unauth_drop(c);
	if (c->conns_tstat) {
		atomic_fetch_sub_explicit(&c->conns_tstat->conns, 1, memory_order_relaxed);
		c->conns_tstat = NULL;
	}
	atomic_fetch_sub_explicit(&srv->ctr.conns_active, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&loop->conn_live, 1, memory_order_relaxed);
	KVTD_COUNT(srv, conns_closed, 1);
	if (kvtd_log_enabled(KVTD_DEBUG)) {
		char what[160];
		snprintf(what, sizeof(what), "%s; frames=%llu in=%llu out=%llu", why ? why : "done",
			 (unsigned long long)c->frames, (unsigned long long)c->bytes_in,
			 (unsigned long long)c->bytes_out);
		kvtd_conn_log(c, KVTD_DEBUG, "connection closed", what);
	}
}

/* Free dead connections whose frames are all gone. */
static void loop_reap(struct kvtd_loop *loop)
{
	struct kvtd_conn *c = loop->conns, *next;

	for (; c; c = next) {
		next = c->next;
		if (!c->dead || c->inflight || c->touched || c->deferred)
			continue;
		if (c->prev)
			c->prev->next = c->next;
		else
			loop->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		loop->conn_count--;
		if (c->ops->free)
			c->ops->free(c);
		kvtd_tstat_release(c); /* nothing of c's points at them now */
		free(c);
	}
}

/*
 * A connection past --max-conns: the protocol's last word (a native ERROR
 * frame, a RESP error, an HTTP 503), then it closes like any failed
 * connection (our side shut down first, so the peer reads it).  Its few
 * bytes of state live until then.  Over TLS the word is written once the
 * handshake is done (loop_conn_handshake; the address's throttle bounds
 * those handshakes as any other's).
 */
static void loop_conn_refuse(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	char msg[160];

	KVTD_COUNT(srv, conns_refused, 1);
	snprintf(msg, sizeof(msg),
		 "server at its connection limit (--max-conns %u); try again later",
		 srv->cfg.max_conns);
	kvtd_conn_log(c, KVTD_INFO, "refusing connection", msg);
	c->ops->fail(c, KVT_EBUSY, msg);
}

/*
 * Unauthenticated connections (doc/security.md "Before AUTH"): at most
 * kvtd_unauth_max() of them at once, and at most kvtd_unauth_peer_max()
 * from one peer (an IPv4 address, an IPv6 /64; on a Unix socket a user
 * id).  Peers are counted in KVTD_PEER_ROWS rows of KVTD_PEER_SLOTS
 * slots, each row hashed with a random key of its own (kvtd_peer_slot,
 * base.c), a peer's count the least of its slots' (kvtd_peer_count_add):
 * peers sharing a slot share its count, which can only refuse early,
 * never admit more, and only where they share the slot of every row.  A
 * connection leaves the count when it authenticates (kvtd_conn_ready) or
 * closes.
 */
unsigned kvtd_unauth_max(const struct kvtd_server *srv)
{
	unsigned m = srv->cfg.max_conns / 2;
	return m ? m : 1;
}

/* Half the global limit (so that one address never holds them all),
 * at most KVTD_UNAUTH_PEER_MAX. */
unsigned kvtd_unauth_peer_max(const struct kvtd_server *srv)
{
	unsigned m = kvtd_unauth_max(srv) / 2;
	if (m == 0)
		m = 1;
	return m > KVTD_UNAUTH_PEER_MAX ? KVTD_UNAUTH_PEER_MAX : m;
}

/*
 * Each loop's unauthenticated connections that eviction may close (not
 * lingering: closing already) are in a list of their own, in accept order
 * (accept_ns never decreases along it), appended when counted
 * (loop_unauth_add) and unlinked when they authenticate, close, are
 * evicted or linger: the oldest is its head.
 */
static bool loop_unauth_linked(const struct kvtd_conn *c)
{
	return c->unauth_prev || c->loop->unauth_head == c;
}

static void loop_unauth_link(struct kvtd_conn *c)
{
	struct kvtd_loop *loop = c->loop;

	c->unauth_prev = loop->unauth_tail;
	c->unauth_next = NULL;
	if (loop->unauth_tail)
		loop->unauth_tail->unauth_next = c;
	else
		loop->unauth_head = c;
	loop->unauth_tail = c;
}

static void loop_unauth_unlink(struct kvtd_conn *c)
{
	struct kvtd_loop *loop = c->loop;

	if (!loop_unauth_linked(c))
		return;
	if (c->unauth_prev)
		c->unauth_prev->unauth_next = c->unauth_next;
	else
		loop->unauth_head = c->unauth_next;
	if (c->unauth_next)
		c->unauth_next->unauth_prev = c->unauth_prev;
	else
		loop->unauth_tail = c->unauth_prev;
	c->unauth_prev = c->unauth_next = NULL;
}

/*
 * The unauthenticated connections are full (half of --max-conns) and c's
 * peer is under its own cap: the oldest unauthenticated connection of c's
 * loop is closed to make room, as sshd's MaxStartups drops early.
 * Refusing the new one instead let a few peers hold the whole half for
 * good: 16 connections from each of 2 addresses at --max-conns 64 (256
 * from each of 8 at the default 4,096), opened again every --idle-timeout
 * (68 a second for 4,096), and every other client's connection was
 * refused before it could send its AUTH (test_hostile `unauth_pool`;
 * redteam35).  An honest client authenticates within a round trip or
 * two, so to have its connection be the oldest a flood must open half of
 * --max-conns within them.  Only c's loop is looked at (its connections
 * are its own; the loops are dealt new connections evenly): the head of
 * its list, c itself being its tail; with none but c, c is refused as
 * before.  True if one was closed.
 *
 * Until 2026-12-06 the oldest was found by a scan of the loop's
 * connections, O(n) a new connection in a flood that keeps the pool full
 * (n up to --max-conns): the loop's CPU a connect, each evicting, was
 * 38.2 us with 2,048 held and 27.3 with 512; now 23.5 and 21.6, what
 * is left being the evicted one's close (a connect with room: 5.8 us;
 * release, bench/unauth_evict_cost.py; doc/security.md "Session 35
 * review").
 * Connections accepted in one loop iteration share an accept_ns: of
 * them the scan took the last accepted, the list takes the first.
 */
static bool loop_unauth_evict(struct kvtd_conn *c)
{
	struct kvtd_conn *old = c->loop->unauth_head;

	if (old == c)
		old = c->unauth_next;
	if (!old)
		return false;
	KVTD_COUNT(c->loop->srv, unauth_evicted, 1);
	kvtd_conn_log(old, KVTD_INFO, "closing connection",
		      "the oldest unauthenticated connection, closed to admit a new one "
		      "(half of --max-conns are unauthenticated)");
	loop_unauth_drop(old);
	if (old->tls && !old->tls_ready) { /* nothing can be said to it yet */
		loop_conn_close(old, "oldest unauthenticated connection, evicted");
		return true;
	}
	old->ops->fail(old, KVT_EBUSY, "server at its limit of unauthenticated "
		       "connections (half of --max-conns): this one, the oldest, "
		       "closed; authenticate promptly");
	/* Its last word goes now, or never: a peer that does not read (its
	 * socket full of answers it was sent) kept an evicted connection,
	 * no longer counted among the unauthenticated ones, with its fd and
	 * queued output until the unauthenticated clock (--idle-timeout)
	 * closed it: a few peers could so hold connections past the
	 * unauthenticated half (test_hostile_http unauth_evict_stalled).  What it could not be
	 * sent is dropped; what it was is then closed as any answer that
	 * ends a connection is (loop_conn_linger, at most KVTD_LINGER_MS). */
	if (!old->dead)
		loop_conn_flush(old);
	if (!old->dead && old->out_head)
		loop_conn_close(old, "oldest unauthenticated connection, evicted; its answers "
			       "cannot be sent");
	return true;
}

static void loop_unauth_add(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;
	unsigned total;
	uint64_t peer;
	char msg[200];

	if (c->state == KVTD_CS_READY || c->dead)
		return;
	c->unauth = true;
	loop_unauth_link(c);
	total = atomic_fetch_add_explicit(&srv->unauth_conns, 1, memory_order_relaxed);
	/* The least of its address's slots' counts (kvtd_peer_count_add): a
	 * neighbour of an address holding its cap, in one row, is not
	 * refused (one row until session 48: doc/security.md "Session 48
	 * review") */
	peer = kvtd_peer_count_add(srv->peer_unauth, c->peer_slot, 1);
	if (total < kvtd_unauth_max(srv) && peer < kvtd_unauth_peer_max(srv))
		return;
	if (peer < kvtd_unauth_peer_max(srv) && loop_unauth_evict(c))
		return;
	KVTD_COUNT(srv, conns_refused, 1);
	KVTD_COUNT(srv, unauth_refused, 1);
	if (total >= kvtd_unauth_max(srv))
		snprintf(msg, sizeof(msg),
			 "server at its limit of %u unauthenticated connections (half of "
			 "--max-conns %u); try again later", kvtd_unauth_max(srv),
			 srv->cfg.max_conns);
	else
		snprintf(msg, sizeof(msg),
			 "too many unauthenticated connections from this address (%u; "
			 "--max-conns %u); try again later", kvtd_unauth_peer_max(srv),
			 srv->cfg.max_conns);
	kvtd_conn_log(c, KVTD_INFO, "refusing connection", msg);
	c->ops->fail(c, KVT_EBUSY, msg);
}

static void loop_unauth_drop(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;

	if (!c->unauth)
		return;
	c->unauth = false;
	loop_unauth_unlink(c);
	atomic_fetch_sub_explicit(&srv->unauth_conns, 1, memory_order_relaxed);
	kvtd_peer_count_sub(srv->peer_unauth, c->peer_slot, 1);
}

bool kvtd_auth_throttled(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;

	return kvtd_throttle_over(&srv->throttle, c->peer_slot, c->loop->now_ns / 1000000000ull,
				  KVTD_AUTH_FAILS_PER_SEC);
}

void kvtd_auth_failed(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;

	kvtd_throttle_fail(&srv->throttle, c->peer_slot, c->loop->now_ns / 1000000000ull);
}

void kvtd_conn_ready(struct kvtd_conn *c)
{
	c->state = KVTD_CS_READY;
	c->auth_gen = 0; /* resolved again before its first request */
	loop_unauth_drop(c);
	loop_tls_mem_authed(c);
}

/*
 * Revocation (doc/security.md): a connection's tenant and role were
 * checked at AUTH; after the tenants file is reloaded they are looked up
 * again before its next request (loop_conn_parse) and, for idle ones,
 * when its loop sees the new table (loop_main).  A removed tenant's
 * connections are failed and closed; a changed role applies at once.
 */
bool kvtd_conn_auth_current(struct kvtd_conn *c)
{
	uint64_t gen = kvtd_auth_generation();
	uint32_t role;

	if (c->dead || c->lingering)
		return false;
	if (c->state != KVTD_CS_READY || c->auth_gen == gen || c->tenant_len == 0)
		return true;
	if (kvtd_tenant_role(c->tenant, c->tenant_len, &role) < 0) {
		KVTD_COUNT(c->loop->srv, errors[KVTD_ERR_AUTH], 1);
		kvtd_conn_log(c, KVTD_WARN, "closing connection",
			      "its tenant is no longer in the tenants file");
		c->ops->fail(c, PROTO_EAUTH, "tenant removed from the tenants file");
		return false;
	}
	if (c->auth_gen && role != c->role)
		kvtd_conn_log(c, KVTD_INFO, "role changed by the tenants file",
			      role == PROTO_ROLE_ADMIN ? "now admin" : "now tenant");
	c->role = role;
	c->auth_gen = gen;
	return true;
}

/* The protocol's parse, once the connection's tenant is current. */
static void loop_conn_parse(struct kvtd_conn *c)
{
	if (kvtd_conn_auth_current(c))
		c->ops->parse(c);
}

/* The tenants table changed: every connection of the loop is checked. */
static void loop_auth_sweep(struct kvtd_loop *loop)
{
	uint64_t gen = kvtd_auth_generation();

	if (gen == loop->auth_gen)
		return;
	loop->auth_gen = gen;
	for (struct kvtd_conn *c = loop->conns; c; c = c->next)
		if (!c->dead && c->state == KVTD_CS_READY)
			kvtd_conn_auth_current(c);
}

/*
 * Accepting.  The listeners are in every loop's epoll with EPOLLEXCLUSIVE;
 * whichever loop wakes accepts, but the connection goes to the loop with
 * the fewest live connections (ties rotate), handed over through that
 * loop's mailbox.  Left to the wake-ups, a loop that was already awake
 * took a burst of connections (4 engines connecting together) and served
 * them on one core while the other idled (kvtier bench net, 4
 * connections: 3 on one loop, 0.6x memcached); memcached's dispatcher
 * deals them round robin for the same reason.
 */
static void loop_conn_add(struct kvtd_loop *loop, int fd, struct kvtd_listener *l,
			  const struct sockaddr_storage *ss)
{
	struct kvtd_server *srv = loop->srv;
	struct epoll_event ev;
	struct kvtd_conn *c;
	int one = 1;
	bool over;
	/* A Unix client's peer is its user id ("unknown" shared by any
	 * whose credentials cannot be read; base.c kvtd_peer_slot). */
	uint32_t uid = UINT32_MAX;

	if (loop->stopping) {
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		KVTD_COUNT(srv, errors[KVTD_ERR_NOMEM], 1);
		return;
	}
	c->ev.kind = KVTD_EV_CONN;
	c->loop = loop;
	c->fd = fd;
	c->is_unix = l->is_unix;
	c->id = atomic_fetch_add(&srv->next_conn_id, 1) + 1;
	c->accept_ns = loop->now_ns;
	c->proto = l->proto;
	c->ops = srv->protos[l->proto];
	if (l->is_unix) {
		struct ucred cr;
		socklen_t crl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && crl == sizeof(cr))
			uid = (uint32_t)cr.uid;
		if (uid != UINT32_MAX)
			snprintf(c->peer, sizeof(c->peer), "unix:uid=%u", uid);
		else
			snprintf(c->peer, sizeof(c->peer), "unix");
	} else {
		char host[INET6_ADDRSTRLEN] = "?";
		unsigned port = 0;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (ss->ss_family == AF_INET) {
			const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
			snprintf(c->peer, sizeof(c->peer), "%s:%u", host, port);
		} else if (ss->ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
			inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
			port = ntohs(a->sin6_port);
			snprintf(c->peer, sizeof(c->peer), "[%s]:%u", host, port);
		}
	}
	/* Its address's slot, before any refusal: a TLS connection refused
	 * past --max-conns still handshakes to be answered, and its failure
	 * counts against its own address, not slot 0's. */
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++)
		c->peer_slot[r] = kvtd_peer_slot(srv->peer_key[r], ss, l->is_unix, uid);
	if (c->ops->open && c->ops->open(c) < 0)
		goto nomem;
	/* Its SSL's memory, before the SSL is made ("The SSL object"). */
	if (l->tls && !loop_tls_mem_admit(c)) {
		KVTD_COUNT(srv, conns_refused, 1);
		KVTD_COUNT(srv, tls_mem_refused, 1);
		kvtd_conn_log(c, KVTD_INFO, "refusing connection",
			      "its TLS handshake would pass the server memory limit "
			      "(--max-memory), or the unauthenticated connections' half of it");
		goto drop;
	}
	if (l->tls && kvtd_tls_open(c) < 0)
		goto nomem;
	c->events = EPOLLIN | EPOLLRDHUP;
	ev.events = c->events;
	ev.data.ptr = &c->ev;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto drop;
	c->next = loop->conns;
	if (loop->conns)
		loop->conns->prev = c;
	loop->conns = c;
	loop->conn_count++;
	atomic_fetch_add_explicit(&loop->conn_live, 1, memory_order_relaxed);
	KVTD_COUNT(srv, conns_accepted, 1);
	over = atomic_fetch_add_explicit(&srv->ctr.conns_active, 1, memory_order_relaxed) >=
	       srv->cfg.max_conns;
	kvtd_conn_log(c, KVTD_DEBUG, "connection accepted", NULL);
	if (over) {
		loop_conn_refuse(c);
		return;
	}
	loop_unauth_add(c);
	return;
nomem:
	KVTD_COUNT(srv, errors[KVTD_ERR_NOMEM], 1);
drop:
	kvtd_tls_close(c);
	loop_tls_mem_set(c, 0);
	if (c->ops->free)
		c->ops->free(c);
	close(fd);
	free(c);
}

/* The loop a new connection goes to: fewest live connections. */
static struct kvtd_loop *loop_pick(struct kvtd_server *srv)
{
	unsigned start = atomic_fetch_add_explicit(&srv->next_accept_loop, 1,
						   memory_order_relaxed) % srv->loop_count;
	struct kvtd_loop *best = NULL;
	unsigned best_n = 0;

	for (unsigned k = 0; k < srv->loop_count; k++) {
		struct kvtd_loop *cand = &srv->loops[(start + k) % srv->loop_count];
		unsigned n = atomic_load_explicit(&cand->conn_live, memory_order_relaxed);
		if (!best || n < best_n) {
			best = cand;
			best_n = n;
		}
	}
	return best;
}

static void loop_wake(struct kvtd_loop *loop);

/* Hand fd to another loop; false if out of memory (then it stays here). */
static bool loop_hand_over(struct kvtd_loop *to, int fd, struct kvtd_listener *l,
			   const struct sockaddr_storage *ss)
{
	struct kvtd_accepted *a = malloc(sizeof(*a));

	if (!a)
		return false;
	a->next = NULL;
	a->fd = fd;
	a->l = l;
	a->ss = *ss;
	/* Counted now, so a burst spreads before the target gets to it. */
	atomic_fetch_add_explicit(&to->conn_live, 1, memory_order_relaxed);
	pthread_mutex_lock(&to->mail_lock);
	if (to->new_tail)
		to->new_tail->next = a;
	else
		to->new_head = a;
	to->new_tail = a;
	pthread_mutex_unlock(&to->mail_lock);
	loop_wake(to);
	return true;
}

#define LOOP_ACCEPT_BATCH 64
#define LOOP_LISTEN_PAUSE_NS 100000000ull /* listeners off after a failed shed */

static void loop_stop_listening(struct kvtd_loop *loop);

/*
 * Out of descriptors (EMFILE/ENFILE) or memory for a new connection: the
 * reserve-descriptor trick (libuv, nginx) -- give back the loop's spare
 * descriptor, accept the connection and close it at once, take the spare
 * again.  Counted in conns_refused.  true: one was shed, accept again;
 * false: not possible now, so the loop takes its listeners out of its
 * epoll set for LOOP_LISTEN_PAUSE_NS (loop_main puts them back).
 */
static bool loop_shed(struct kvtd_loop *loop, struct kvtd_listener *l)
{
	int fd;

	if (loop->spare_fd >= 0) {
		close(loop->spare_fd);
		loop->spare_fd = -1;
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			KVTD_COUNT(loop->srv, conns_refused, 1);
			KVTD_COUNT(loop->srv, conns_shed, 1);
		}
		loop->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return true;
	}
	if (loop->listening) {
		loop_stop_listening(loop);
		loop->listen_resume_ns = loop->now_ns + LOOP_LISTEN_PAUSE_NS;
		KVTD_COUNT(loop->srv, listen_paused, 1);
	}
	return false;
}

static void loop_accept(struct kvtd_loop *loop, struct kvtd_listener *l)
{
	for (int i = 0; i < LOOP_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct kvtd_loop *to;
		int fd;

		memset(&ss, 0, sizeof(ss));
		fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
			    errno == ENOBUFS) {
				static _Atomic uint64_t last;
				uint64_t now = loop->now_ns, prev = atomic_load(&last);
				int e = errno;
				if (now - prev > 10000000000ull &&
				    atomic_compare_exchange_strong(&last, &prev, now))
					kvtd_log(KVTD_WARN, "cannot accept connections; shedding",
						 "listener=%s error=\"%s\"", l->name, strerror(e));
				/* The listener stays readable (level-triggered):
				 * shed the waiting connection, or stop listening a
				 * while, never return to spin (loop_shed). */
				if (loop_shed(loop, l))
					continue;
			}
			return;
		}
		to = loop_pick(loop->srv);
		if (to == loop || !loop_hand_over(to, fd, l, &ss))
			loop_conn_add(loop, fd, l, &ss);
	}
}

/* Is c's read buffer the loop's, lent for this read?  Reads do not nest
 * (loop_conn_read runs from loop_main's events and loop_settle only,
 * never from a protocol's hook), so it is lent to one connection at a
 * time, from kvtd_conn_read_rbuf's lending to its end. */
static bool loop_rbuf_lent(const struct kvtd_conn *c)
{
	return c->rbuf && c->rbuf == c->loop->rbuf;
}

/* A lent read buffer goes back to the loop, with what it holds: c has
 * none. */
static void loop_rbuf_give_back(struct kvtd_conn *c)
{
	if (!loop_rbuf_lent(c))
		return;
	c->rbuf = NULL;
	c->rcap = c->rstart = c->rend = 0;
}

/* A lent read buffer becomes c's own (a request left in it partly read,
 * grown, taken): the loop makes another at its next read. */
static void loop_rbuf_keep(struct kvtd_conn *c)
{
	if (loop_rbuf_lent(c))
		c->loop->rbuf = NULL;
}

/* A request left partly read in the lent buffer becomes c's: the buffer
 * itself where c may have one of its size, else (before AUTH: its
 * protocol's preauth_buf) a copy of that size, as kvtd_conn_rbuf_room
 * would have made -- kept whole, a lent buffer's KVTD_RBUF_MIN pages are
 * resident once any earlier read touched them: 256 unauthenticated S3
 * heads of 15 KB held 64 KiB each (test_hostile_http s3_slow). */
static void loop_rbuf_hold(struct kvtd_conn *c)
{
	size_t len = c->rend - c->rstart;
	uint8_t *b;

	if (c->rcap >= KVTD_RBUF_MIN || !(b = malloc(c->rcap))) {
		loop_rbuf_keep(c);
		return;
	}
	memcpy(b, c->rbuf + c->rstart, len);
	c->rbuf = b; /* the lent one stays the loop's */
	c->rstart = 0;
	c->rend = len;
}

/*
 * rbuf must hold at least need bytes from rstart.  Growth past
 * KVTD_RBUF_MIN is charged to --max-memory; before the connection
 * authenticates its protocol's preauth_buf is the most it may hold (and
 * the first buffer is no larger).  0, -ENOBUFS (over the budget),
 * -EMSGSIZE (over the pre-AUTH limit), or -ENOMEM.
 */
int kvtd_conn_rbuf_room(struct kvtd_conn *c, size_t need)
{
	struct kvtd_server *srv = c->loop->srv;
	bool pre = c->state != KVTD_CS_READY;
	size_t ncap, charge, first = KVTD_RBUF_MIN;
	uint8_t *nb;

	if (pre && need > c->ops->preauth_buf)
		return -EMSGSIZE;
	if (c->rstart && (c->rcap - c->rstart < need || c->rend == c->rcap)) {
		memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
		c->rend -= c->rstart;
		c->rstart = 0;
	}
	if (c->rcap >= need && c->rbuf)
		return 0;
	loop_rbuf_keep(c); /* grown: the lent buffer becomes c's own */
	if (pre && c->ops->preauth_buf < first)
		first = c->ops->preauth_buf;
	/* Double (amortized growth), or exactly what is needed (rounded to
	 * 4 KiB) when that is more: a large request is charged what it
	 * takes, not up to twice that. */
	ncap = c->rcap ? 2 * c->rcap : first;
	if (ncap < need)
		ncap = (need + 4095) & ~(size_t)4095;
	if (pre && ncap > c->ops->preauth_buf)
		ncap = c->ops->preauth_buf;
	/* Growth past the minimum is charged to the budget (a big table). */
	charge = ncap > KVTD_RBUF_MIN ? ncap - KVTD_RBUF_MIN : 0;
	if (charge > c->mem_rbuf && !kvtd_mem_charge(srv, charge - c->mem_rbuf, false))
		return -ENOBUFS;
	nb = realloc(c->rbuf, ncap);
	if (!nb) {
		if (charge > c->mem_rbuf)
			kvtd_mem_uncharge(srv, charge - c->mem_rbuf);
		return -ENOMEM;
	}
	if (charge > c->mem_rbuf)
		c->mem_rbuf = charge;
	c->rbuf = nb;
	c->rcap = ncap;
	return 0;
}

/* The read buffer is freed (what it held is dropped): its charge goes
 * back.  A lent one goes back to its loop. */
void kvtd_conn_rbuf_release(struct kvtd_conn *c)
{
	loop_rbuf_give_back(c);
	free(c->rbuf);
	c->rbuf = NULL;
	c->rcap = c->rstart = c->rend = 0;
	kvtd_mem_uncharge(c->loop->srv, c->mem_rbuf);
	c->mem_rbuf = 0;
}

/*
 * rbuf holds nothing unparsed: it starts over, and is freed when it held
 * more than KVTD_RBUF_KEEP since it last started over.  A buffer kept
 * for an idle connection keeps the pages its last requests touched:
 * 1,000 connections that each sent one RESP PING of 60 KB and stayed
 * held 60 MiB outside a --max-memory of 32M (test_hostile_http
 * idle_rbuf).  What a client sends in small requests never passes it
 * (no malloc a request); past it, the allocation is small beside the
 * bytes parsed.
 */
void kvtd_conn_rbuf_drained(struct kvtd_conn *c)
{
	bool held = c->rend > KVTD_RBUF_KEEP || c->rcap > 4 * KVTD_RBUF_MIN;

	c->rstart = c->rend = 0;
	if (held)
		kvtd_conn_rbuf_release(c);
}

/* Take the read buffer whole (a large request that fills it becomes its
 * own, no copy): its charge passes to the caller in *charged. */
uint8_t *kvtd_conn_rbuf_take(struct kvtd_conn *c, uint64_t *charged)
{
	uint8_t *b;

	loop_rbuf_keep(c); /* a lent buffer: the loop's passes to the caller */
	b = c->rbuf;

	*charged = c->mem_rbuf;
	c->rbuf = NULL;
	c->rcap = c->rstart = c->rend = 0;
	c->mem_rbuf = 0;
	return b;
}

/*
 * The generic read: as much as rbuf has room for (at most max bytes),
 * then the protocol's parse.  What read(2) returns, or KVTD_READ_DONE
 * when the connection failed (the protocol said why).
 */
ssize_t kvtd_conn_read_rbuf(struct kvtd_conn *c, size_t max, size_t *asked)
{
	struct kvtd_loop *loop = c->loop;
	ssize_t r;
	int rc = 0;

	/* Nothing buffered: the loop's buffer, lent for this read (as the
	 * first buffer, no larger than preauth_buf before AUTH). */
	if (!c->rbuf && (loop->rbuf || (loop->rbuf = malloc(KVTD_RBUF_MIN)))) {
		c->rbuf = loop->rbuf;
		c->rcap = KVTD_RBUF_MIN;
		if (c->state != KVTD_CS_READY && c->ops->preauth_buf < c->rcap)
			c->rcap = c->ops->preauth_buf;
		c->rstart = c->rend = 0;
	} else {
		rc = kvtd_conn_rbuf_room(c, c->rend - c->rstart + 1);
	}
	if (rc < 0) {
		c->ops->fail(c, rc == -ENOBUFS || rc == -ENOMEM ? -ENOMEM : rc,
			     rc == -EMSGSIZE ? "request too large before AUTH"
					     : "server out of memory");
		if (rc == -ENOBUFS)
			KVTD_COUNT(c->loop->srv, mem_refused, 1);
		return KVTD_READ_DONE;
	}
	*asked = c->rcap - c->rend;
	if (*asked > max)
		*asked = max;
	r = kvtd_conn_read(c, c->rbuf + c->rend, *asked);
	if (r > 0) {
		int e = errno;
		c->rend += (size_t)r;
		loop_conn_parse(c);
		errno = e;
	}
	/* A request partly read: c's own (as much as c may hold).  Not when c
	 * takes no more input (refused, closing): its bytes go with the
	 * buffer back to the loop. */
	if (loop_rbuf_lent(c) && c->rend > c->rstart && !c->dead && !c->no_more_input)
		loop_rbuf_hold(c);
	else
		loop_rbuf_give_back(c);
	return r;
}

/* Input held of a request not yet complete: closing now loses it. */
static bool loop_conn_partial(const struct kvtd_conn *c)
{
	return c->rend > c->rstart || (c->ops->partial && c->ops->partial(c));
}


/*
 * A TLS handshake never used.  A handshake costs the loop an ECDHE and a
 * signature (~260 us, release) and the client less (it need not check
 * the certificate); one that fails counts against its address
 * (loop_conn_handshake), but a client that completed it and closed before
 * sending a byte of application data -- or reset -- could connect again
 * at once, from one address, as fast as it could connect: no honest
 * client makes a TLS connection only to close it, more than a health
 * check's one a second or so.  Since session 47 the peer's end (or an
 * error) on a connection whose handshake is done and that has sent no
 * application byte counts as a failed handshake of its address
 * (kvtd_auth_failed: past 20 a second its next connections are closed
 * before any crypto; test_hostile_http tls_unused: 695 handshakes in 3 s
 * from one address before, 80 after, release).  A close of the server's
 * (a refusal, a timeout) counts nothing here.  What stays is the churn:
 * refused at once, such a client reconnects faster, each connection an
 * accept, an SSL object and a close (~48 us of the loop, release).
 * Only a connection ended within LOOP_TLS_UNUSED_NS (10 s) of its
 * handshake counts: a connection pool's spare connections, made at its
 * start and closed idle at its end, are no flood, and 25 of them closed
 * at once got their address's next connection refused (review47f); one
 * address holding handshakes that long is held to KVTD_UNAUTH_PEER_MAX
 * (256) of them at once -- at most 25.6 handshakes a second.
 */
#define LOOP_TLS_UNUSED_NS (10ull * 1000000000ull)
static void loop_tls_unused(struct kvtd_conn *c)
{
	if (c->tls && c->tls_ready && c->bytes_in == 0 && !c->tls_unused_counted &&
	    c->loop->now_ns - c->tls_ready_ns < LOOP_TLS_UNUSED_NS) {
		c->tls_unused_counted = true;
		KVTD_COUNT(c->loop->srv, tls_unused, 1);
		kvtd_auth_failed(c);
	}
}

/* The socket is readable (or hung up): the protocol's read, or the
 * generic one into rbuf. */
static void loop_conn_read(struct kvtd_conn *c)
{
	struct kvtd_server *srv = c->loop->srv;

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t r;
		size_t asked = 0; /* a plain read's length: a shorter answer drained the socket */
		/* Deferred: frames it has buffered wait for the next
		 * iteration; no more is read (the buffer would grow). */
		if (c->dead || c->no_more_input || c->read_paused || c->deferred)
			return;
		if (c->tls && !loop_tls_turn(c))
			return;
		if (c->ops->read)
			r = c->ops->read(c, &asked);
		else
			r = kvtd_conn_read_rbuf(c, SIZE_MAX, &asked);
		if (c->tls) {
			loop_tls_charge(c);
			if (!loop_tls_rbuf(c))
				return;
		}
		if (r == KVTD_READ_DONE)
			return;
		if (r > 0) {
			c->bytes_in += (uint64_t)r;
			KVTD_COUNT(srv, bytes_in, r);
			/* A short plain read took all the socket had: skip the
			 * read that would only say EAGAIN (one syscall of the few
			 * a small GET costs); level-triggered epoll calls again
			 * when more arrives.  TLS may hold bytes back: read on.
			 * (asked SIZE_MAX: a request just completed; answer it
			 * first.) */
			if (!c->tls && (size_t)r < asked)
				break;
			continue;
		}
		if (r == 0) {
			loop_tls_unused(c);
			if (loop_conn_partial(c)) {
				KVTD_COUNT(srv, errors[KVTD_ERR_VANISHED], 1);
				loop_conn_close(c, "peer closed in the middle of a frame");
				return;
			}
			/* A half-close: answer what is in flight, then close. */
			c->no_more_input = true;
			c->close_when_flushed = true;
			loop_conn_events(c, c->out_stall_ns != 0);
			loop_conn_touch(c);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (c->tls)
				loop_conn_events(c, c->out_stall_ns != 0);
			return;
		}
		if (c->tls && kvtd_tls_quiet_over(c)) {
			/* A failure of its address, as a failed handshake is
			 * (loop_conn_handshake): no honest client gets here,
			 * and one that reconnected at once had a fresh
			 * handshake -- ~260 us of the loop -- each time,
			 * unthrottled, until session 47 (test_hostile_http
			 * tls12_renegotiation, "reconnecting"). */
			kvtd_auth_failed(c);
			kvtd_conn_log(c, KVTD_INFO, "closing connection",
				      "more TLS records with no application data (KeyUpdates) "
				      "than a minute allows, or a TLS 1.2 renegotiation");
			loop_conn_close(c, "TLS records with no application data past the budget");
			return;
		}
		loop_tls_unused(c);
		KVTD_COUNT(srv, errors[KVTD_ERR_IO], 1);
		if (loop_conn_partial(c))
			KVTD_COUNT(srv, errors[KVTD_ERR_VANISHED], 1);
		loop_conn_close(c, strerror(errno));
		return;
	}
	/* Fairness: others get a turn; level-triggered epoll brings us back,
	 * but not for bytes already inside the SSL: those wait for the next
	 * iteration (deferred), after the others' events.  Touched, they
	 * would be read again in this one's settle, up to its 1,024 rounds:
	 * with records read ahead (tls.c), one-byte records held the loop
	 * 0.3-1 s (test_hostile_http tls_records). */
	if (kvtd_tls_pending(c))
		kvtd_conn_defer(c);
}

/* A TLS connection before its handshake is done: nothing else happens on
 * it.  Once done, what the client sent along is read.
 *
 * A handshake costs the server an ECDHE and a signature (~260 us of the
 * loop, release) as soon as a ClientHello is in, and a client can send
 * the same canned ClientHello on connection after connection and go, at
 * the cost of a connect: 2 processes held a loop 75% busy.  So a
 * handshake that fails after its ClientHello (the client gone, a bad
 * record) or does not finish in time counts against the address as a
 * failed AUTH does (a TCP check or a plain client costs no crypto and
 * counts nothing), and while its address is past KVTD_AUTH_FAILS_PER_SEC this
 * second a connection is closed before any crypto (server.tls_throttled;
 * test_hostile_http tls_handshakes).  So does a connection closed after
 * its handshake for what no honest client sends (server.tls_quiet_closed:
 * a TLS 1.2 renegotiation, KeyUpdates past the minute's budget;
 * loop_conn_read), and one the client ends after its handshake without a
 * byte of application data (loop_tls_unused), since session 47. */
static void loop_conn_handshake(struct kvtd_conn *c)
{
	int rc;

	/* Only before any crypto: a handshake already paid for goes on. */
	if (!kvtd_tls_began(c) && kvtd_auth_throttled(c)) {
		KVTD_COUNT(c->loop->srv, tls_throttled, 1);
		loop_conn_close(c, "TLS handshakes failing from this address: throttled");
		return;
	}
	rc = kvtd_tls_handshake(c);
	if (rc > 0) /* the handshake's state freed: the established SSL's */
		loop_tls_mem_set(c, kvtd_tls_conn_mem(c));
	if (rc < 0) {
		/* Only a handshake that cost crypto counts: a connection that
		 * sent nothing (a load balancer's or a probe's TCP check) or no
		 * handshake record (a plain client) cost a connect, and must
		 * not throttle the clients that share its address. */
		if (kvtd_tls_began(c))
			kvtd_auth_failed(c);
		loop_conn_close(c, "TLS handshake failed");
		return;
	}
	/* An answer queued before the handshake was done -- the refusal past
	 * --max-conns (loop_conn_refuse) -- is written now, and its
	 * connection closed as its protocol asked.  Nothing wrote it before
	 * session 37: a refused TLS client was never told, and its connection
	 * (and SSL) stayed until --idle-timeout, outside --max-conns. */
	if (rc > 0 && c->out_head) {
		loop_conn_flush(c);
		loop_conn_maybe_close(c);
		if (c->dead || c->lingering || c->out_head)
			return; /* closed, or its EPOLLOUT asked for by the flush */
	}
	loop_conn_events(c, false);
	if (rc > 0)
		loop_conn_read(c);
}

/* ------------------------------------------------------------------------
 * Timeouts
 */

/*
 * A handshake's deadline.  A TLS handshake takes milliseconds, but one
 * that never ends held its connection until --idle-timeout (30 s by
 * default), and before any crypto it holds the most: a client that sends
 * a record header declaring a 16 KiB ClientHello and 101 bytes of it has
 * the SSL hold its read buffer and its handshake buffer (~46 KiB a
 * connection, release; 9.4 KiB for one that sent nothing), at no cost to
 * the client and, as no ClientHello was taken, no failure counted
 * (doc/security.md "A handshake's memory").  So a handshake has
 * KVTD_TLS_HANDSHAKE_S (or --idle-timeout if smaller; also with
 * --idle-timeout 0), and one that timed out having received bytes counts
 * against its address as a failed one does (kvtd_auth_failed: past 20 a
 * second its next connections are closed before their handshake); a TCP
 * check that sent nothing still counts nothing.
 */
static uint64_t loop_handshake_limit_ns(const struct kvtd_server *srv)
{
	unsigned s = srv->cfg.idle_timeout_s;

	if (s == 0 || s > KVTD_TLS_HANDSHAKE_S)
		s = KVTD_TLS_HANDSHAKE_S;
	return (uint64_t)s * 1000000000ull;
}

static void loop_sweep(struct kvtd_loop *loop)
{
	struct kvtd_server *srv = loop->srv;
	uint64_t limit = (uint64_t)srv->cfg.idle_timeout_s * 1000000000ull, now = loop->now_ns;
	uint64_t hs_limit = loop_handshake_limit_ns(srv);

	for (struct kvtd_conn *c = loop->conns; c; c = c->next) {
		const char *why = NULL;
		if (c->dead || c->lingering)
			continue;
		if (c->tls && !c->tls_ready) {
			/* Before AUTH too: a RESP or S3 connection without
			 * --tenants is ready from its accept, and a handshake
			 * that never ends held its slot for good.  A failure
			 * of its address if it sent anything (loop_conn_handshake;
			 * "A handshake's deadline"). */
			if (now - c->accept_ns <= hs_limit)
				continue;
			why = "TLS handshake not completed in time";
			if (kvtd_tls_began(c) || kvtd_tls_sent_any(c)) {
				kvtd_auth_failed(c);
				KVTD_COUNT(srv, tls_hs_timeouts, 1);
			}
		} else if (limit == 0) {
			continue;
		} else if (c->state != KVTD_CS_READY && now - c->accept_ns > limit)
			why = "not authenticated in time";
		else if (c->frame_start_ns && !c->read_paused && !c->no_more_input &&
			 now - c->frame_start_ns > limit)
			why = "frame not completed in time (slow client)";
		else if (c->out_stall_ns && now - c->out_stall_ns > limit)
			why = "client stopped reading its responses";
		else if (c->pin_bytes && now - c->drain_mark_ns > limit) {
			/* Pins held for a reader that takes less than
			 * KVTD_MIN_DRAIN_BPS: released by closing it. */
			if (c->bytes_out - c->drain_mark_out <
			    (uint64_t)KVTD_MIN_DRAIN_BPS * srv->cfg.idle_timeout_s)
				why = "client reads its responses too slowly for the DRAM they pin";
			c->drain_mark_ns = now;
			c->drain_mark_out = c->bytes_out;
		}
		if (!why)
			continue;
		KVTD_COUNT(srv, errors[KVTD_ERR_TIMEOUT], 1);
		kvtd_conn_log(c, KVTD_INFO, "closing connection", why);
		loop_conn_close(c, why);
	}
}

/* ------------------------------------------------------------------------
 * The loop
 */

static void loop_drain_queue(struct kvtd_loop *loop)
{
	struct kvt_req *done[256];
	int n;

	while ((n = kvt_queue_poll(loop->q, done, 256)) > 0)
		for (int i = 0; i < n; i++)
			loop->srv->protos[done[i]->user_data & KVTD_UD_PROTO_MASK]->req_done(
				loop, done[i]);
}

static void loop_drain_mail(struct kvtd_loop *loop)
{
	struct kvtd_accepted *a;
	struct kvtd_job *j;

	pthread_mutex_lock(&loop->mail_lock);
	j = loop->mail_head;
	loop->mail_head = loop->mail_tail = NULL;
	a = loop->new_head;
	loop->new_head = loop->new_tail = NULL;
	pthread_mutex_unlock(&loop->mail_lock);
	while (a) {
		struct kvtd_accepted *next = a->next;
		/* loop_hand_over counted it; loop_conn_add counts what it keeps. */
		atomic_fetch_sub_explicit(&loop->conn_live, 1, memory_order_relaxed);
		loop_conn_add(loop, a->fd, a->l, &a->ss);
		free(a);
		a = next;
	}
	while (j) {
		struct kvtd_job *next = j->next;
		void (*done)(void *) = j->done;
		void *arg = j->arg;
		free(j);
		done(arg);
		j = next;
	}
}

/* Everything left for the end of the iteration. */
static void loop_settle(struct kvtd_loop *loop)
{
	for (int round = 0; round < 1024; round++) {
		struct kvtd_conn *c;

		loop_drain_queue(loop);
		if (loop->touched_n == 0)
			return;
		/* Last in, first out; handling may touch more. */
		c = loop->touched[--loop->touched_n];
		c->touched = false;
		if (c->dead)
			continue;
		if (!c->read_paused && !c->no_more_input && c->rend > c->rstart)
			loop_conn_parse(c);
		if (!c->dead && kvtd_tls_pending(c))
			loop_conn_read(c);
		if (!c->dead && c->out_head)
			loop_conn_flush(c);
		loop_conn_maybe_close(c);
	}
}

static void loop_start_listening(struct kvtd_loop *loop)
{
	struct kvtd_server *srv = loop->srv;

	for (unsigned k = 0; k < srv->listener_count; k++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE,
					  .data.ptr = &srv->listeners[k].ev };
		epoll_ctl(loop->epfd, EPOLL_CTL_ADD, srv->listeners[k].fd, &ev);
	}
	loop->listening = true;
	loop->listen_resume_ns = 0;
}

static void loop_stop_listening(struct kvtd_loop *loop)
{
	struct kvtd_server *srv = loop->srv;

	if (!loop->listening)
		return;
	for (unsigned i = 0; i < srv->listener_count; i++)
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, srv->listeners[i].fd, NULL);
	loop->listening = false;
}

static void loop_begin_stop(struct kvtd_loop *loop)
{
	loop->stopping = true;
	loop_stop_listening(loop);
	for (struct kvtd_conn *c = loop->conns; c; c = c->next) {
		if (c->dead || c->lingering)
			continue;
		/* Frames already read are answered; nothing new is read. */
		c->no_more_input = true;
		c->close_when_flushed = true;
		if (c->ops->drop_input)
			c->ops->drop_input(c);
		loop_conn_events(c, c->out_stall_ns != 0);
		loop_conn_touch(c);
	}
}

static void *loop_main(void *arg)
{
	struct kvtd_loop *loop = arg;
	struct kvtd_server *srv = loop->srv;
	struct epoll_event evs[KVTD_LOOP_EVENTS];
	uint64_t deadline = 0;
	char name[16];

	snprintf(name, sizeof(name), "kvtd-loop%u", loop->idx);
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		int wait_ms = loop->touched_n || loop->deferred_n ? 0
			      : loop->stopping || loop->listen_resume_ns ? 100 : 1000;
		int n;

		if (loop->idx == 0) /* the protocols' ticks (RESP's expiry) */
			for (int p = 0; p < KVTD_PROTO__COUNT; p++)
				if (srv->protos[p] && srv->protos[p]->tick_wait_ms)
					wait_ms = srv->protos[p]->tick_wait_ms(loop, wait_ms);
		n = epoll_wait(loop->epfd, evs, KVTD_LOOP_EVENTS, wait_ms);
		loop->now_ns = kvtd_now_ns();
		loop->iter++;
		if (loop->listen_resume_ns && !loop->stopping &&
		    loop->now_ns >= loop->listen_resume_ns)
			loop_start_listening(loop);
		if (n < 0 && errno != EINTR) {
			kvtd_log(KVTD_ERROR, "epoll_wait failed", "loop=%u error=\"%s\"", loop->idx,
				 strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct kvtd_ev *ev = evs[i].data.ptr;
			switch (ev->kind) {
			case KVTD_EV_LISTEN:
				loop_accept(loop, (struct kvtd_listener *)ev);
				break;
			case KVTD_EV_CONN: {
				struct kvtd_conn *c = (struct kvtd_conn *)ev;
				if (c->lingering) {
					if (!c->dead && loop_linger_drain(c))
						loop_conn_close(c, NULL);
					break;
				}
				if (c->tls && !c->tls_ready) {
					loop_conn_handshake(c);
					break;
				}
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					loop_conn_read(c);
				else if (c->tls_rd_want == TLSIO_WANT_OUT &&
					 (evs[i].events & EPOLLOUT))
					loop_conn_read(c);
				if (!c->dead &&
				    ((evs[i].events & EPOLLOUT) ||
				     (c->tls_wr_want == TLSIO_WANT_IN && c->out_head))) {
					loop_conn_flush(c);
					/* Its last answers out, a connection to close
					 * once flushed (BYE, a half-close, an error)
					 * closes now: it reads nothing more and waits
					 * on nothing (before, it stayed open until the
					 * server stopped). */
					loop_conn_maybe_close(c);
				}
				if (!c->dead && (evs[i].events & (EPOLLHUP | EPOLLERR)) &&
				    !(evs[i].events & EPOLLIN)) {
					if (loop_conn_partial(c))
						KVTD_COUNT(srv, errors[KVTD_ERR_VANISHED], 1);
					loop_conn_close(c, "hang-up");
				}
				break;
			}
			case KVTD_EV_WAKE: {
				uint64_t v;
				ssize_t r = read(loop->wakefd, &v, sizeof(v));
				(void)r;
				loop_drain_mail(loop);
				break;
			}
			case KVTD_EV_QUEUE:
				break; /* drained below */
			}
		}
		loop_drain_mail(loop);
		loop_auth_sweep(loop);
		loop_undefer(loop);
		if (loop->idx == 0)
			for (int p = 0; p < KVTD_PROTO__COUNT; p++)
				if (srv->protos[p] && srv->protos[p]->tick)
					srv->protos[p]->tick(loop);
		loop_settle(loop);
		if (!loop->stopping && atomic_load(&srv->stopping)) {
			loop_begin_stop(loop);
			deadline = loop->now_ns +
				   (uint64_t)srv->cfg.shutdown_timeout_s * 1000000000ull;
			loop_settle(loop);
		}
		if (loop->now_ns - loop->last_sweep_ns >= 1000000000ull || loop->stopping) {
			loop->last_sweep_ns = loop->now_ns;
			if (!loop->stopping)
				loop_sweep(loop);
			loop_linger_sweep(loop);
			loop_reap(loop);
		}
		if (loop->stopping) {
			if (loop->conn_count == 0 && loop->live_frames == 0)
				break;
			if (loop->now_ns >= deadline) {
				for (struct kvtd_conn *c = loop->conns; c; c = c->next)
					loop_conn_close(c, "server stopping");
				loop_reap(loop);
				if (loop->live_frames == 0 && loop->conn_count == 0)
					break;
				/* Requests still in the store: kvtd_loops_finish
				 * collects them once the store is closed. */
				kvtd_log(KVTD_WARN, "stopping with requests in flight",
					 "loop=%u frames=%u", loop->idx, loop->live_frames);
				break;
			}
		}
	}
	return NULL;
}

int kvtd_loops_start(struct kvtd_server *srv)
{
	if (getrandom(srv->peer_key, sizeof(srv->peer_key), 0) != (ssize_t)sizeof(srv->peer_key))
		return -EIO;
	{
		/* Test hook (test_hostile throttle_slots, unauth_slots): the
		 * per-address rows' keys "K0,K1" (the throttle's and the
		 * unauthenticated count's), so that a test can pick addresses
		 * that share a slot. */
		const char *env = getenv("KVTD_TEST_THROTTLE_KEYS");
		if (env) {
			char *end = NULL;
			srv->peer_key[0] = strtoull(env, &end, 0);
			if (end && *end == ',')
				srv->peer_key[1] = strtoull(end + 1, NULL, 0);
		}
	}
	srv->log_dropped = kvtd_log_client_dropped_ctr();
	srv->loops = calloc(srv->loop_count, sizeof(*srv->loops));
	if (!srv->loops)
		return -ENOMEM;
	for (unsigned i = 0; i < srv->loop_count; i++) {
		struct kvtd_loop *loop = &srv->loops[i];
		struct epoll_event ev;
		int rc;

		loop->srv = srv;
		loop->idx = i;
		loop->wake_ev.kind = KVTD_EV_WAKE;
		loop->queue_ev.kind = KVTD_EV_QUEUE;
		loop->epfd = -1;
		loop->wakefd = -1;
		loop->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		pthread_mutex_init(&loop->mail_lock, NULL);
		loop->epfd = epoll_create1(EPOLL_CLOEXEC);
		loop->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (loop->epfd < 0 || loop->wakefd < 0)
			return -errno;
		rc = kvt_queue_create(srv->store, &loop->q);
		if (rc < 0)
			return rc;
		/* loop_settle drains the queue after every batch of events, so a
		 * request served inline needs no eventfd round trip. */
		rc = kvt_queue_set_flags(loop->q, KVT_QUEUE_POLL_AFTER_SUBMIT);
		if (rc < 0)
			return rc;
		loop->qfd = kvt_queue_fd(loop->q);
		ev.events = EPOLLIN;
		ev.data.ptr = &loop->wake_ev;
		if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0)
			return -errno;
		ev.data.ptr = &loop->queue_ev;
		if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->qfd, &ev) < 0)
			return -errno;
		for (unsigned k = 0; k < srv->listener_count; k++) {
			ev.events = EPOLLIN | EPOLLEXCLUSIVE;
			ev.data.ptr = &srv->listeners[k].ev;
			if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, srv->listeners[k].fd, &ev) < 0)
				return -errno;
		}
		loop->listening = true;
		loop->now_ns = kvtd_now_ns();
		loop->last_sweep_ns = loop->now_ns;
		loop->auth_gen = kvtd_auth_generation();
	}
	for (unsigned i = 0; i < srv->loop_count; i++) {
		int rc = pthread_create(&srv->loops[i].thread, NULL, loop_main, &srv->loops[i]);
		if (rc != 0)
			return -rc;
		srv->loops[i].started = true;
	}
	return 0;
}

static void loop_wake(struct kvtd_loop *loop)
{
	uint64_t one = 1;
	ssize_t w = write(loop->wakefd, &one, sizeof(one));
	(void)w;
}

void kvtd_loop_wake(struct kvtd_loop *loop)
{
	if (loop->wakefd >= 0)
		loop_wake(loop);
}

void kvtd_loops_wake(struct kvtd_server *srv)
{
	for (unsigned i = 0; srv->loops && i < srv->loop_count; i++)
		if (srv->loops[i].wakefd >= 0)
			loop_wake(&srv->loops[i]);
}

void kvtd_loops_stop(struct kvtd_server *srv)
{
	atomic_store(&srv->stopping, true);
	for (unsigned i = 0; srv->loops && i < srv->loop_count; i++)
		if (srv->loops[i].wakefd >= 0)
			loop_wake(&srv->loops[i]);
}

void kvtd_loops_join(struct kvtd_server *srv)
{
	for (unsigned i = 0; srv->loops && i < srv->loop_count; i++) {
		if (srv->loops[i].started)
			pthread_join(srv->loops[i].thread, NULL);
		srv->loops[i].started = false;
	}
}

/*
 * After kvt_store_close: collect what the store completed or canceled for
 * frames the loops left behind, and free everything of the loops.  Main
 * thread, loops joined.
 */
void kvtd_loops_finish(struct kvtd_server *srv)
{
	for (unsigned i = 0; srv->loops && i < srv->loop_count; i++) {
		struct kvtd_loop *loop = &srv->loops[i];

		/* Every connection is closed before the first job's done runs:
		 * a loop that left on an epoll_wait error still has open ones,
		 * and a done for a live connection would read views that
		 * kvt_store_close has freed (ops.c ops_finish). Connections
		 * still in the mailbox are closed, not added. */
		loop->stopping = true;
		loop->store_closed = true;
		for (struct kvtd_conn *c = loop->conns; c; c = c->next) {
			c->no_more_input = true;
			loop_conn_close(c, "server stopped");
		}
		loop_drain_mail(loop);
		if (loop->q) {
			loop_drain_mail(loop);
			loop_drain_queue(loop);
		}
		for (unsigned k = 0; k < loop->touched_n; k++)
			loop->touched[k]->touched = false;
		loop->touched_n = 0;
		for (unsigned k = 0; k < loop->deferred_n; k++)
			loop->deferred[k]->deferred = false;
		loop->deferred_n = 0;
		loop_reap(loop);
		free(loop->touched);
		loop->touched = NULL;
		free(loop->deferred);
		free(loop->tparse);
		loop->deferred = NULL;
		free(loop->metrics_page);
		free(loop->rbuf);
		loop->rbuf = NULL;
		loop->metrics_page = NULL;
		if (loop->q && kvt_queue_destroy(loop->q) == 0)
			loop->q = NULL;
		if (loop->epfd >= 0)
			close(loop->epfd);
		/* -1: a later loop's requests collected below may still wake
		 * this one (respd.c: a SET's expiry entry wakes loop 0,
		 * kvtd_loop_wake), which must not write to a number closed
		 * here -- or opened again since */
		if (loop->wakefd >= 0)
			close(loop->wakefd);
		loop->wakefd = -1;
		if (loop->spare_fd >= 0)
			close(loop->spare_fd);
		pthread_mutex_destroy(&loop->mail_lock);
	}
	free(srv->loops);
	srv->loops = NULL;
}

/* ------------------------------------------------------------------------
 * The aux thread: calls that may block on the disk
 *
 * Short jobs (a namespace's registration, the checks of a frame's range
 * reads, a piece of work deferred to a later iteration) wait in their
 * owner's queue: the tenant's they are done for, or the server's own.
 * The owners with jobs queued form a ring; the thread takes the first
 * owner's first job and puts the owner back at the ring's end if it has
 * more:
 *
 *   ring:  mallory [j1 j2 ... j64]  ->  alice [j1]  ->  (own) [j1]
 *   runs:  mallory j1, alice j1, own j1, mallory j2, mallory j3, ...
 *
 * Before (one queue, in order) a tenant's range checks pipelined on a few
 * connections -- 128 MiB of CRCs a frame, 64 frames in flight -- queued
 * ~0.9 s of work ahead of every other tenant's job: another tenant's
 * 1-byte range waited 856 ms, its namespace's registration 1.1 s
 * (test_hostile aux_share).  Now a job waits for the one running and one
 * of each other owner with jobs queued.  Walks keep their own lane.
 */

/* Owner q has a job queued: in the ring if not already (lock held). */
static void loop_aux_ring_add(struct kvtd_aux *a, struct kvtd_auxq *q)
{
	if (q->queued)
		return;
	q->queued = true;
	q->next = NULL;
	if (a->ring_tail)
		a->ring_tail->next = q;
	else
		a->ring_head = q;
	a->ring_tail = q;
}

/* The next short job: the first owner's first; the owner goes to the
 * ring's end if it has more (lock held, ring not empty). */
static struct kvtd_job *loop_aux_ring_take(struct kvtd_aux *a)
{
	struct kvtd_auxq *q = a->ring_head;
	struct kvtd_job *j = q->head;

	a->ring_head = q->next;
	if (!a->ring_head)
		a->ring_tail = NULL;
	q->queued = false;
	q->head = j->next;
	if (!q->head)
		q->tail = NULL;
	else
		loop_aux_ring_add(a, q);
	return j;
}

static void *loop_aux_main(void *arg)
{
	struct kvtd_server *srv = arg;
	struct kvtd_aux *a = &srv->aux;

	unsigned shorts = 0; /* short jobs run while a walk waited */

	pthread_setname_np(pthread_self(), "kvtd-aux");
	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct kvtd_job *j;
		bool walk;
		while (!a->ring_head && !a->walk_head && !a->stop)
			pthread_cond_wait(&a->cond, &a->lock);
		if (!a->ring_head && !a->walk_head)
			break;
		/* Short jobs first; a walk when none waits, or after
		 * KVTD_AUX_SHORTS of them (walks are never starved). */
		walk = a->walk_head && (!a->ring_head || shorts >= KVTD_AUX_SHORTS);
		shorts = walk || !a->walk_head ? 0 : shorts + 1;
		if (walk) {
			j = a->walk_head;
			a->walk_head = j->next;
			if (!a->walk_head)
				a->walk_tail = NULL;
		} else {
			j = loop_aux_ring_take(a);
		}
		pthread_mutex_unlock(&a->lock);

		/* The loop does not touch the frame until it is mailed back. */
		struct kvtd_loop *loop = j->loop;
		j->run(j->arg);
		j->next = NULL;
		pthread_mutex_lock(&loop->mail_lock);
		if (loop->mail_tail)
			loop->mail_tail->next = j;
		else
			loop->mail_head = j;
		loop->mail_tail = j;
		pthread_mutex_unlock(&loop->mail_lock);
		loop_wake(loop);

		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int kvtd_aux_start(struct kvtd_server *srv)
{
	struct kvtd_aux *a = &srv->aux;
	int rc;

	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	rc = pthread_create(&a->thread, NULL, loop_aux_main, srv);
	if (rc != 0)
		return -rc;
	a->started = true;
	return 0;
}

/* Finishes every queued job first. */
void kvtd_aux_stop(struct kvtd_server *srv)
{
	struct kvtd_aux *a = &srv->aux;

	if (!a->started)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	a->started = false;
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
}

static void loop_aux_submit(struct kvtd_loop *loop, struct kvtd_tstat *t, void (*run)(void *),
			    void (*done)(void *), void *arg, bool walk)
{
	struct kvtd_aux *a = &loop->srv->aux;
	struct kvtd_job *j = calloc(1, sizeof(*j));

	if (!j) {
		/* Run it here rather than lose it: slower, still correct. */
		run(arg);
		done(arg);
		return;
	}
	j->run = run;
	j->done = done;
	j->arg = arg;
	j->loop = loop;
	pthread_mutex_lock(&a->lock);
	if (walk) {
		if (a->walk_tail)
			a->walk_tail->next = j;
		else
			a->walk_head = j;
		a->walk_tail = j;
	} else {
		struct kvtd_auxq *q = t ? &t->auxq : &a->own;
		if (q->tail)
			q->tail->next = j;
		else
			q->head = j;
		q->tail = j;
		loop_aux_ring_add(a, q);
	}
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void kvtd_aux_submit(struct kvtd_loop *loop, struct kvtd_tstat *t, void (*run)(void *),
		     void (*done)(void *), void *arg)
{
	loop_aux_submit(loop, t, run, done, arg, false);
}

/* S3 listings walk the whole store (s3ops.c): a tenant has 2 in
 * progress, and several listing tenants kept walks back to back, each
 * other job waiting behind all of those queued (test_hostile aux_walks:
 * a 1-byte range check p50 0.46 ms alone, 0.93 ms behind the walks of
 * 250,000 blocks, max 9 ms).  They go to a lane of their own, taken only
 * when no other job waits. */
void kvtd_aux_submit_walk(struct kvtd_loop *loop, void (*run)(void *), void (*done)(void *),
			  void *arg)
{
	loop_aux_submit(loop, NULL, run, done, arg, true);
}

/*
 * Work on the loop beyond a request's parse (S3's assembling and XML,
 * s3ops.c "Work on the loop"; RESP's windows of keys, respd.c "Keys a
 * loop iteration"): a loop does at most KVTD_WORK_ITER units of it an
 * iteration, each piece counted as its units plus one, the first piece of
 * an iteration always taken.  A piece past them waits for a later
 * iteration through the aux thread's mailbox, which runs nothing for it
 * (loop_work_nothing), other connections served between
 * (server.work_deferred).  work_inline: the mailbox had no memory and
 * handed the piece back at once (loop_aux_submit), so it goes now rather
 * than around again.
 */
static void loop_work_nothing(void *arg)
{
	(void)arg;
}

int kvtd_work_turn(struct kvtd_loop *loop, struct kvtd_tstat *t, uint64_t units,
		   void (*later)(void *), void *arg)
{
	bool inline_back = loop->work_inline;

	loop->work_inline = false;
	if (loop->work_iter != loop->iter) {
		loop->work_iter = loop->iter;
		loop->work_units = 0;
	}
	if (loop->work_units && loop->work_units + units > KVTD_WORK_ITER && !inline_back) {
		KVTD_COUNT(loop->srv, work_deferred, 1);
		/* (stopping: the aux thread may be gone, and nothing waits
		 * for the loop) */
		if (loop->stopping)
			return -ESHUTDOWN;
		/* (arg may be freed when this returns) */
		loop->work_inline = true;
		kvtd_aux_submit(loop, t, loop_work_nothing, later, arg);
		loop->work_inline = false;
		return 0;
	}
	loop->work_units += units + 1;
	return 1;
}

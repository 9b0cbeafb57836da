/*
 * value.c - value bytes on their way in and out: the PUT items built from a
 * frame's data section, and the GET responses built from pinned DRAM views
 * and the stored part tables.
 *
 * Copies (doc/kvtierd.md "Copies"):
 *   GET  every item is a KVT_OP_GET_PINNED (ops.c submits it); the
 *        response's value bytes are iovecs into the pinned DRAM runs, sent
 *        with sendmsg and released once written (the output entry owns the
 *        pins): no copy in user space.  Parts and ranges are slices of the
 *        same view.
 *   PUT  received in place (kvtd_value_put_reserve): each item's bytes go
 *        from the socket into its DRAM reservation, and each part's CRC32C
 *        is computed as its bytes land, while they are in cache, and
 *        checked against the client's; kvt_put_commit_checked then stores
 *        the checked CRCs without another pass (a mismatch is KVT_ECORRUPT,
 *        counted in value_crc_errors, and nothing is stored).  No copy in
 *        user space.  Frames not received in place: the data section was
 *        received into one buffer; each item's parts are iovecs into it,
 *        submitted with KVT_F_CRC and the client's CRCs, which the library
 *        checks as it copies.  One copy, buffer to DRAM.
 *
 * Part tables: a value is stored as the client's parts, with the client's
 * CRCs; a GET answers with the table kvt_pin_parts returns for the pinned
 * value -- the writer's lengths and CRCs, end to end.  Only a range's CRC
 * is computed here, after the stored parts it comes from were checked
 * against the writer's CRCs.
 *
 * Threads: the loop that owns the frame's connection.  No locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <xxhash.h>

#include "kvtierd.h"

/* ------------------------------------------------------------------------
 * Views: the iovec runs of a pinned value
 */

/* The iovecs covering [off, off + len) of the view into out; returns how
 * many (at most vc). */
static unsigned value_view_slice(const struct iovec *v, unsigned vc, uint64_t off, uint64_t len,
			       struct iovec *out)
{
	unsigned n = 0;
	for (unsigned i = 0; i < vc && len; i++) {
		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		uint64_t k = v[i].iov_len - off;
		if (k > len)
			k = len;
		out[n].iov_base = (uint8_t *)v[i].iov_base + off;
		out[n].iov_len = k;
		n++;
		len -= k;
		off = 0;
	}
	return n;
}

/* CRC32C of [off, off + len) of the view. */
static uint32_t value_view_crc(const struct iovec *v, unsigned vc, uint64_t off, uint64_t len)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < vc && len; i++) {
		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		uint64_t n = v[i].iov_len - off;
		if (n > len)
			n = len;
		crc = kvt_crc32c(crc, (const uint8_t *)v[i].iov_base + off, n);
		len -= n;
		off = 0;
	}
	return crc;
}

/*
 * The store's put flags an item's wire flags ask for: one table for both
 * PUT paths, so that neither drops a hint the other keeps.  REPAIR marks
 * the pod's own copies (hand-over, warm-up, repair, forwarded replica),
 * which the store never filters (kvtier.h, KVT_F_REPAIR).
 */
static uint32_t item_put_flags(const struct proto_item *pi)
{
	return ((pi->flags & PROTO_IF_SEALED) ? KVT_F_SEALED : 0) |
	       ((pi->flags & PROTO_IF_RETAIN) ? KVT_F_RETAIN : 0) |
	       ((pi->flags & PROTO_IF_REPAIR) ? KVT_F_REPAIR : 0);
}

int kvtd_value_put_item(struct kvtd_frame *fr, struct kvtd_item *it, const struct proto_item *pi)
{
	uint32_t n = pi->part_count;
	uint64_t off = pi->data_off;

	it->iov = malloc(n * sizeof(*it->iov));
	it->crcs = malloc(n * sizeof(*it->crcs));
	if (!it->iov || !it->crcs)
		return -ENOMEM;
	for (uint32_t p = 0; p < n; p++) {
		uint64_t len;
		uint32_t crc;
		proto_item_part(pi, p, &len, &crc);
		it->iov[p].iov_base = fr->data + off;
		it->iov[p].iov_len = (size_t)len;
		it->crcs[p] = crc;
		off += len;
	}
	it->req.op = KVT_OP_PUT;
	it->req.flags = KVT_F_CRC | item_put_flags(pi);
	it->req.iov = it->iov;
	it->req.iov_count = n;
	it->req.crcs = it->crcs;
	return 0;
}

/* ------------------------------------------------------------------------
 * PUT values received in place: each item's bytes go from the socket
 * straight into its DRAM reservation (kvt_put_reserve); the bytes of an
 * item that cannot be stored are read into a scratch buffer and dropped.
 *
 * Reservations held.  A reservation is made from the frame's header and
 * held until the frame's data section has come whole (or the connection
 * goes): a client that declares values and sends them slowly, or never,
 * holds that DRAM for --idle-timeout, and again on its next connection.
 * One tenant doing so on many connections reserved the whole tier: every
 * other tenant's blocks were evicted and their PUTs refused (test_native_
 * attack put_resv; S3 uploads the same before s3_upload_share).  So what a
 * tenant's values being received reserve, all its connections and both
 * protocols together, is held to KVTD_RESV_TENANT_MAX (a quarter of
 * --dram) in its resv_held; a value is always taken while the tenant
 * reserves nothing else.  An item past it is answered KVT_EBUSY (retry
 * later) once its bytes have been read and dropped, the connection kept;
 * counted in mem_refused.  A dram= quota bounds a tenant's reservations
 * too (the library's), but a tenant without one is counted, not limited.
 */

bool kvtd_resv_hold(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t n)
{
	uint64_t held;

	if (!t || !kvtd_auth_enabled())
		return true; /* one trust domain: no shares (as loop.c's) */
	held = atomic_fetch_add_explicit(&t->resv_held, n, memory_order_relaxed);
	if (held > 0 && (held + n > KVTD_RESV_TENANT_MAX(srv) || held + n < held)) {
		atomic_fetch_sub_explicit(&t->resv_held, n, memory_order_relaxed);
		return false;
	}
	return true;
}

void kvtd_resv_release(struct kvtd_tstat *t, uint64_t n)
{
	if (t && n)
		atomic_fetch_sub_explicit(&t->resv_held, n, memory_order_relaxed);
}

/* The item's reservation is over (committed or aborted). */
static void value_resv_done(struct kvtd_frame *fr, struct kvtd_item *it)
{
	it->reserved = false;
	kvtd_resv_release(fr->tstat, it->resv_held);
	it->resv_held = 0;
}

void kvtd_value_put_abort(struct kvtd_frame *fr, struct kvtd_item *it)
{
	if (!it->reserved)
		return;
	kvt_put_abort(fr->loop->srv->store, it->resv);
	value_resv_done(fr, it);
}

int kvtd_value_put_reserve(struct kvtd_frame *fr, struct kvtd_item *it,
			   const struct proto_item *pi, uint32_t ns)
{
	struct kvtd_server *srv = fr->loop->srv;
	uint32_t n = pi->part_count;
	struct kvt_reservation res;
	uint64_t total = 0;
	int rc;

	it->lens = malloc(n * sizeof(*it->lens));
	it->crcs = malloc(n * sizeof(*it->crcs));
	if (!it->lens || !it->crcs)
		return -ENOMEM; /* ops_item_release frees them */
	for (uint32_t p = 0; p < n; p++) {
		proto_item_part(pi, p, &it->lens[p], &it->crcs[p]);
		total += it->lens[p];
	}
	it->req.ns = ns;
	it->req.key = pi->key;
	if (!kvtd_resv_hold(srv, fr->tstat, total)) {
		KVTD_COUNT(srv, mem_refused, 1);
		return KVT_EBUSY;
	}
	if (fr->tstat && kvtd_auth_enabled())
		it->resv_held = total; /* held: kvtd_resv_hold counted it */
	rc = kvt_put_reserve(srv->store, ns, &pi->key, it->lens, n, item_put_flags(pi), &res);
	if (rc != KVT_OK) {
		kvtd_resv_release(fr->tstat, it->resv_held);
		it->resv_held = 0;
		return rc;
	}
	it->nparts = n;
	it->crc_part = 0;
	it->crc_left = it->lens[0];
	it->crc_run = 0;
	it->crc_bad = false;
	it->reserved = true;
	it->resv = res.handle;
	it->rview = res.view;
	it->rview_count = res.view_count;
	return 0;
}

static _Thread_local uint8_t value_scratch[64u << 10];

#define VALUE_RX_CHUNK (256u << 10) /* bytes per in-place readv, at most */

/* Where the next bytes of the data section go: up to max iovecs over
 * consecutive reserved items, or one stretch of a dropped item (into the
 * scratch buffer, or iov_base NULL when scratch is false). */
static unsigned value_put_iov(struct kvtd_frame *fr, struct iovec *iov, unsigned max, bool scratch)
{
	unsigned n = 0;
	uint64_t off = fr->rx_off;
	for (uint32_t i = fr->rx_item; i < fr->n && n < max; i++, off = 0) {
		struct kvtd_item *it = &fr->items[i];
		uint64_t left = it->rlen - off, skip = off;
		if (left == 0)
			continue;
		if (!it->reserved) {
			if (n)
				break;
			iov[0].iov_base = scratch ? value_scratch : NULL;
			iov[0].iov_len = scratch && left > sizeof(value_scratch)
						 ? sizeof(value_scratch)
						 : (size_t)left;
			return 1;
		}
		for (uint32_t v = 0; v < it->rview_count && n < max; v++) {
			if (skip >= it->rview[v].iov_len) {
				skip -= it->rview[v].iov_len;
				continue;
			}
			iov[n].iov_base = (uint8_t *)it->rview[v].iov_base + skip;
			iov[n].iov_len = it->rview[v].iov_len - (size_t)skip;
			skip = 0;
			n++;
		}
	}
	return n;
}

/* Fold bytes [off, off + len) of a reserved item, just written into its
 * view, into its parts' CRCs; a part whose last byte arrived is checked
 * against the client's CRC.  Here, not at commit, because the bytes are
 * still in cache: one pass over memory per value instead of two. */
static void value_put_crc(struct kvtd_item *it, uint64_t off, uint64_t len)
{
	for (uint32_t v = 0; v < it->rview_count && len; v++) {
		const uint8_t *p;
		uint64_t k;
		if (off >= it->rview[v].iov_len) {
			off -= it->rview[v].iov_len;
			continue;
		}
		p = (const uint8_t *)it->rview[v].iov_base + off;
		k = it->rview[v].iov_len - off;
		if (k > len)
			k = len;
		len -= k;
		off = 0;
		while (k && it->crc_part < it->nparts) {
			uint64_t m = k < it->crc_left ? k : it->crc_left;
			it->crc_run = kvt_crc32c(it->crc_run, p, m);
			it->crc_left -= m;
			p += m;
			k -= m;
			if (it->crc_left == 0) {
				it->crc_bad |= it->crc_run != it->crcs[it->crc_part];
				it->crc_run = 0;
				if (++it->crc_part < it->nparts)
					it->crc_left = it->lens[it->crc_part];
			}
		}
	}
}

static void value_put_advance(struct kvtd_frame *fr, uint64_t len)
{
	while (len && fr->rx_item < fr->n) {
		struct kvtd_item *it = &fr->items[fr->rx_item];
		uint64_t left = it->rlen - fr->rx_off;
		if (it->reserved)
			value_put_crc(it, fr->rx_off, len < left ? len : left);
		if (len < left) {
			fr->rx_off += len;
			return;
		}
		len -= left;
		fr->rx_item++;
		fr->rx_off = 0;
	}
}

void kvtd_value_put_feed(struct kvtd_frame *fr, const uint8_t *buf, size_t len)
{
	while (len) {
		struct iovec iov[16];
		unsigned n = value_put_iov(fr, iov, 16, false);
		size_t done = 0;
		if (n == 0)
			return;
		for (unsigned i = 0; i < n && done < len; i++) {
			size_t k = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;
			if (iov[i].iov_base)
				memcpy(iov[i].iov_base, buf + done, k);
			done += k;
		}
		value_put_advance(fr, done);
		buf += done;
		len -= done;
	}
}

ssize_t kvtd_value_put_recv(struct kvtd_frame *fr, int fd)
{
	struct iovec iov[64];
	unsigned n = value_put_iov(fr, iov, 64, true);
	ssize_t r;
	size_t total = 0;
	if (n == 0)
		return 0;
	(void)fd;
	/* At most VALUE_RX_CHUNK per readv, so the bytes are still in L2 when
	 * value_put_advance folds them into their CRCs: a readv can return
	 * megabytes when the socket's buffer has grown. */
	for (unsigned i = 0; i < n; i++) {
		if (total + iov[i].iov_len >= VALUE_RX_CHUNK) {
			iov[i].iov_len = VALUE_RX_CHUNK - total;
			n = i + 1;
			break;
		}
		total += iov[i].iov_len;
	}
	r = kvtd_conn_readv(fr->conn, iov, (int)n); /* TLS or plain (tls.c) */
	if (r > 0)
		value_put_advance(fr, (uint64_t)r);
	return r;
}

void kvtd_value_put_commit(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = fr->loop->srv;
	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		if (!it->reserved)
			continue;
		value_resv_done(fr, it);
		if (it->crc_bad || it->crc_part != it->nparts) {
			/* a part's CRC did not match (or, which cannot be, the
			 * frame ended before the item's last byte) */
			kvt_put_abort(srv->store, it->resv);
			it->status = KVT_ECORRUPT;
			KVTD_COUNT(srv, value_crc_errors, 1);
		} else {
			it->status = kvt_put_commit_checked(srv->store, it->resv, it->crcs);
		}
		it->tier = KVT_TIER_DRAM;
	}
}

/* A GET item's answer: response fields, and the value slices to send. */
struct value_get_out {
	struct proto_item pi;
	uint32_t n;               /* the stored part table: n entries */
	uint64_t *lens;           /* &lens1, malloc'd (owned), or shared */
	uint32_t *crcs;           /* &crcs1, malloc'd (owned), or shared */
	uint64_t *offs;           /* where each part starts: &offs1, malloc'd
				   * (owned), or shared (value_part_at) */
	uint64_t lens1;           /* a single part's entry */
	uint32_t crcs1;
	uint64_t offs1;           /* 0 */
	uint64_t ver;             /* the table's digest (value_table_ver) */
	uint64_t range_len;       /* a range's entry */
	uint32_t range_crc;
	struct iovec *slices;     /* into the pinned view (owned array) */
	unsigned slice_count;
	bool shared;              /* lens, crcs: a value_ptabs' (not owned) */
	uint64_t table_len;       /* bytes this item adds to the table */
	uint64_t data_len;        /* value bytes it adds to the data section */
};

/*
 * Part tables a pass over a frame's items has read, by value (the block
 * its view starts in, kvtd_req_pin_at): items that read one value share
 * its table.  Each item read its own -- kvt_pin_parts twice (its count,
 * then the table), each a copy of the whole table under the pin lock --
 * and a RANGE twice more (kvtd_value_verify_plan, then the reply): a
 * frame of 1,024 one-byte ranges of a value of 1,024 parts cost ~8x the
 * same frame over a value of one part (bench/range_parts_cost.c).  Valid
 * for one pass only (a reply's call, a plan): its items' pins hold their
 * blocks throughout, so an address names one value; a deferred item's
 * pin is let go, and its block may be another value's when read again.
 * Open addressing, at most half full; NULL (no memory): each item reads
 * its own.
 */
struct value_ptab {
	uintptr_t at;             /* 0: a free slot */
	uint32_t n;
	uint64_t *lens;           /* &lens1, or malloc'd (owned) */
	uint32_t *crcs;           /* &crcs1, or malloc'd (owned) */
	uint64_t *offs;           /* &offs1, or malloc'd (owned) */
	uint64_t lens1;
	uint32_t crcs1;
	uint64_t offs1;
	uint64_t ver;
};

struct value_ptabs {
	struct value_ptab *e;
	uint32_t cap;
};

static struct value_ptabs *value_ptabs_new(uint32_t items)
{
	struct value_ptabs *t = calloc(1, sizeof(*t));
	uint32_t cap = 16;

	while (cap < 2 * items)
		cap *= 2;
	if (t)
		t->e = calloc(cap, sizeof(*t->e));
	if (!t || !t->e) {
		free(t);
		return NULL;
	}
	t->cap = cap;
	return t;
}

static void value_ptabs_free(struct value_ptabs *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->cap; i++) {
		if (t->e[i].lens != &t->e[i].lens1)
			free(t->e[i].lens);
		if (t->e[i].crcs != &t->e[i].crcs1)
			free(t->e[i].crcs);
		if (t->e[i].offs != &t->e[i].offs1)
			free(t->e[i].offs);
	}
	free(t->e);
	free(t);
}

/* The slot of value at: its table (n > 0), or a free slot to keep it in
 * (at 0: none).  NULL: no cache, or no view to name it by. */
static struct value_ptab *value_ptab_slot(struct value_ptabs *t, uintptr_t at)
{
	if (!t || !at)
		return NULL;
	for (uint64_t h = ((uint64_t)at * 0x9e3779b97f4a7c15ull) >> 32;; h++) {
		struct value_ptab *e = &t->e[h & (t->cap - 1)];
		if (e->at == at || !e->at)
			return e;
	}
}

/*
 * Which version of a value an item read (ops.c "Pinned answers": a frame
 * answered in chunks reads its later items again): a digest of its part
 * table, lengths and CRCs, keyed by the server's secret; never 0.  Two
 * puts of one key with the same table hold the same bytes as far as the
 * writer's CRCs can tell -- a value moved between tiers, or put again
 * alike, is the same version; any other is another.
 */
static uint64_t value_table_ver(const struct kvtd_server *srv, const struct value_get_out *g)
{
	uint64_t h = XXH3_64bits_withSeed(g->lens, (size_t)g->n * sizeof(*g->lens),
					  srv->key_secret);

	h = XXH3_64bits_withSeed(g->crcs, (size_t)g->n * sizeof(*g->crcs), h);
	return h ? h : 1;
}

/*
 * The part table of the pinned value: the writer's lengths and CRCs
 * (kvt_pin_parts), and where each part starts (offs, for value_part_at),
 * or the one tabs read for the same value.  One part -- the common case
 * -- needs no allocation.  Returns 0 or an error status.
 */
static int value_parts_read(struct kvtd_server *srv, const struct kvt_req *r,
			    struct value_get_out *g, struct value_ptabs *tabs)
{
	struct value_ptab *e = value_ptab_slot(tabs, kvtd_req_pin_at(r));
	uint64_t sum = 0;
	int n;

	if (e && e->at) {
		g->lens = e->lens;
		g->crcs = e->crcs;
		g->offs = e->offs;
		g->n = e->n;
		g->ver = e->ver;
		g->shared = true;
		return 0; /* checked when read */
	}
	g->lens = &g->lens1;
	g->crcs = &g->crcs1;
	g->offs = &g->offs1;
	n = kvt_pin_parts(srv->store, r->pin, g->lens, g->crcs, 1);
	if (n < 0)
		return n;
	if (n > 1) {
		g->lens = malloc((size_t)n * sizeof(*g->lens));
		g->crcs = malloc((size_t)n * sizeof(*g->crcs));
		g->offs = malloc((size_t)n * sizeof(*g->offs));
		if (!g->lens || !g->crcs || !g->offs)
			return -ENOMEM;
		int m = kvt_pin_parts(srv->store, r->pin, g->lens, g->crcs, (unsigned)n);
		if (m < 0)
			return m;
		if (m != n)
			return KVT_ECORRUPT; /* a pinned value's table cannot change */
	}
	g->n = (uint32_t)n;
	for (uint32_t p = 0; p < g->n; p++) {
		if (g->lens[p] > r->length - sum)
			return KVT_ECORRUPT; /* (nor wraps: offs never falls) */
		g->offs[p] = sum;
		sum += g->lens[p];
	}
	if (n < 1 || sum != r->length)
		return KVT_ECORRUPT;
	g->ver = value_table_ver(srv, g);
	if (e) {
		/* kept for the pass: the items after this one share it */
		e->at = kvtd_req_pin_at(r);
		e->n = g->n;
		e->lens = g->lens == &g->lens1 ? &e->lens1 : g->lens;
		e->crcs = g->crcs == &g->crcs1 ? &e->crcs1 : g->crcs;
		e->offs = g->offs == &g->offs1 ? &e->offs1 : g->offs;
		e->lens1 = g->lens1;
		e->crcs1 = g->crcs1;
		e->offs1 = 0;
		e->ver = g->ver;
		g->lens = e->lens;
		g->crcs = e->crcs;
		g->offs = e->offs;
		g->shared = true;
	}
	return 0;
}

/*
 * The part of g's value that holds byte off (< the value's length): the
 * last whose start is at or before it, by a binary search of offs (which
 * never falls: value_parts_read).  Each range walked the whole table to
 * find its parts (value_range_crc, the plan): a frame of 1,024 one-byte
 * ranges of a value of 1,024 parts was ~1M steps, 3x the frame over a
 * value of one part (bench/RESULTS.md "get47").  Starting early is only
 * slower (the callers skip parts that end before off); starting late
 * would skip a part's check, which only a corrupt part would show.
 */
static uint32_t value_part_at(const struct value_get_out *g, uint64_t off)
{
	uint32_t lo = 0, hi = g->n; /* the part is in [lo, hi) */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (g->offs[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The CRC of the range [off, off + len): the writer's, if the range is
 * exactly one stored part; otherwise computed here, after every stored
 * part the range comes from was checked against the writer's CRC (doc/
 * protocol.md, GET), so that a CRC computed here never vouches for bytes
 * the writer did not send.  False if a part fails its check.
 */
/*
 * Stored parts a frame's range reads verified (RANGE reads as a CPU
 * amplifier, issue 21): each (block, part) is checked at most once per
 * frame, whatever number of ranges touch it; a block is named by its
 * view's first byte (items of one frame that read the same block share
 * it).  Open addressing; state 0 not yet checked, 1 good, -1 bad.
 */
struct value_vent {
	const void *base;
	uint32_t part;
	int8_t state;
	const struct iovec *view; /* to check it with (pinned until the reply) */
	unsigned vc;
	uint64_t start, len;
	uint32_t crc;             /* the writer's */
};

struct value_vcache {
	struct value_vent *v;
	uint32_t n, cap;
	uint32_t next;            /* kvtd_value_verify_run: the entry to check next */
};

static uint64_t value_vhash(const void *base, uint32_t part)
{
	uint64_t h = (uint64_t)(uintptr_t)base * 0x9e3779b97f4a7c15ull ^ part;
	return h ^ (h >> 31);
}

static struct value_vent *value_vfind(struct value_vcache *vc, const void *base, uint32_t part,
				      bool add)
{
	if (!vc)
		return NULL;
	if (add && 2 * (vc->n + 1) > vc->cap) {
		uint32_t nc = vc->cap ? 2 * vc->cap : 64;
		struct value_vent *nv = calloc(nc, sizeof(*nv));
		if (!nv)
			return NULL;
		for (uint32_t i = 0; i < vc->cap; i++) {
			struct value_vent *e = &vc->v[i];
			if (!e->base)
				continue;
			for (uint64_t h = value_vhash(e->base, e->part);; h++)
				if (!nv[h & (nc - 1)].base) {
					nv[h & (nc - 1)] = *e;
					break;
				}
		}
		free(vc->v);
		vc->v = nv;
		vc->cap = nc;
	}
	if (!vc->cap)
		return NULL;
	for (uint64_t h = value_vhash(base, part);; h++) {
		struct value_vent *e = &vc->v[h & (vc->cap - 1)];
		if (e->base == base && e->part == part)
			return e;
		if (!e->base) {
			if (!add)
				return NULL;
			e->base = base;
			e->part = part;
			vc->n++;
			return e;
		}
	}
}

static void value_vcheck(struct value_vent *e)
{
	if (e->state == 0)
		e->state = value_view_crc(e->view, e->vc, e->start, e->len) == e->crc ? 1 : -1;
}

void kvtd_value_vcache_free(struct kvtd_frame *fr)
{
	struct value_vcache *vc = fr->vcache;

	if (vc)
		free(vc->v);
	free(vc);
	fr->vcache = NULL;
}

/*
 * The CRC32C of a range: the stored part's own when the range is
 * exactly one stored part; otherwise computed here, after every stored
 * part the range comes from was checked against the writer's CRC (doc/
 * protocol.md, GET), so that a CRC computed here never vouches for bytes
 * the writer did not send -- each part once per frame (value_vcache).
 * False if a part fails its check.
 */
static bool value_range_crc(struct value_vcache *cache, const struct iovec *v, unsigned vc,
			    const struct value_get_out *g, uint64_t off, uint64_t len,
			    uint32_t *crc)
{
	/* the parts it reads, from the one holding its first byte */
	for (uint32_t p = value_part_at(g, off); p < g->n && g->offs[p] < off + len; p++) {
		uint64_t start = g->offs[p], end = start + g->lens[p];
		if (start == off && g->lens[p] == len) {
			*crc = g->crcs[p];
			return true;
		}
		if (end > off) {
			struct value_vent *e =
				vc ? value_vfind(cache, v[0].iov_base, p, true) : NULL;
			if (e) {
				if (!e->view) {
					e->start = start;
					e->len = g->lens[p];
					e->crc = g->crcs[p];
				}
				/* Unchecked, it is checked through this item's
				 * view, pinned now: the item whose plan entered it
				 * may have let its pin go since, its block held by
				 * this one (a reply's item failed -ENOMEM is
				 * unpinned before the next is read; review46g). */
				if (!e->view || e->state == 0) {
					e->view = v;
					e->vc = vc;
				}
				value_vcheck(e);
				if (e->state < 0)
					return false;
			} else if (value_view_crc(v, vc, start, g->lens[p]) != g->crcs[p]) {
				return false;
			}
		}
	}
	*crc = value_view_crc(v, vc, off, len);
	return true;
}

static int value_get_item(struct kvtd_server *srv, struct kvtd_item *it, uint32_t index,
			  struct value_get_out *g, struct value_vcache *cache,
			  struct value_ptabs *tabs)
{
	const struct kvt_req *r = &it->req;
	uint64_t vlen = r->length, off = 0;
	int rc;

	memset(g, 0, sizeof(*g));
	g->pi.index = index;
	g->pi.status = it->status;
	g->table_len = 40;
	if (it->status != KVT_OK)
		return 0;
	rc = value_parts_read(srv, r, g, tabs);
	if (rc < 0) {
		g->pi.status = rc;
		return 0;
	}
	if (it->ver_noted && g->ver != it->ver) {
		/* read again after a chunk, and its key holds another
		 * version now: a miss, never bytes of two versions */
		KVTD_COUNT(srv, get_version_misses, 1);
		g->pi.status = KVT_MISS;
		return 0;
	}
	/* (KVTD_TEST_GET_NOMEM: a test's allocation failure, kvtd_value_test_init) */
	g->slices = srv->test_get_nomem == index + 1
			    ? NULL
			    : malloc((r->view_count ? r->view_count : 1) * sizeof(*g->slices));
	if (!g->slices) {
		g->pi.status = -ENOMEM;
		return 0;
	}
	g->pi.value_len = vlen;
	g->pi.flags = (r->value_flags & KVT_F_SEALED) ? PROTO_IF_SEALED : 0;
	if (it->flags & PROTO_IF_PART) {
		if (it->part >= g->n) {
			g->pi.status = KVT_ERANGE;
			g->pi.flags = 0;
			return 0;
		}
		off = g->offs[it->part];
		g->slice_count = value_view_slice(r->view, r->view_count, off, g->lens[it->part],
						  g->slices);
		g->pi.flags |= PROTO_IF_PART;
		g->pi.first_part = it->part;
		g->pi.off = off;
		g->pi.part_count = 1;
		g->pi.part_lens = &g->lens[it->part];
		g->pi.part_crcs = &g->crcs[it->part];
	} else if (it->flags & PROTO_IF_RANGE) {
		if (it->off > vlen || it->len > vlen - it->off) {
			g->pi.status = KVT_ERANGE;
			g->pi.flags = 0;
			return 0;
		}
		if (!value_range_crc(cache, r->view, r->view_count, g, it->off, it->len,
				     &g->range_crc)) {
			/* Corruption is a miss, never other bytes. */
			KVTD_COUNT(srv, value_crc_errors, 1);
			g->pi.status = KVT_MISS;
			g->pi.flags = 0;
			g->pi.value_len = 0;
			return 0;
		}
		g->slice_count =
			value_view_slice(r->view, r->view_count, it->off, it->len, g->slices);
		g->range_len = it->len;
		g->pi.flags |= PROTO_IF_RANGE;
		g->pi.off = it->off;
		g->pi.part_count = 1;
		g->pi.part_lens = &g->range_len;
		g->pi.part_crcs = &g->range_crc;
	} else {
		g->slice_count = value_view_slice(r->view, r->view_count, 0, vlen, g->slices);
		g->pi.part_count = g->n;
		g->pi.part_lens = g->lens;
		g->pi.part_crcs = g->crcs;
	}
	g->table_len += (uint64_t)PROTO_PART_ENTRY * g->pi.part_count;
	for (unsigned s = 0; s < g->slice_count; s++)
		g->data_len += g->slices[s].iov_len;
	return 0;
}

static void value_get_out_free(struct value_get_out *g)
{
	if (g->shared) { /* the pass's (value_ptabs_free) */
		g->lens = &g->lens1;
		g->crcs = &g->crcs1;
		g->offs = &g->offs1;
	}
	if (g->lens != &g->lens1)
		free(g->lens);
	if (g->crcs != &g->crcs1)
		free(g->crcs);
	if (g->offs != &g->offs1)
		free(g->offs);
	free(g->slices);
}

/*
 * Before a GET reply: enter every stored part the frame's range reads
 * touch in the frame's cache, unchecked -- of the items pinned now, from
 * the chunk to answer on (ops.c drops the cache when it defers items,
 * and plans again once they are pinned again).  Returns the bytes to check, so
 * that the caller can have a large check done off the loop thread
 * (kvtd_value_verify_run on the aux thread).  Loop thread.
 */
uint64_t kvtd_value_verify_plan(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = fr->loop->srv;
	struct value_ptabs *tabs = value_ptabs_new(fr->n);
	uint64_t total = 0;

	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		const struct kvt_req *r = &it->req;
		struct value_get_out g;

		/* answered (their pins the outputs'), or deferred: no view */
		if (i < fr->chunk_start || it->deferred)
			continue;
		if (it->status != KVT_OK || !(it->flags & PROTO_IF_RANGE) ||
		    (it->flags & PROTO_IF_PART) || !r->view_count || it->off > r->length ||
		    it->len > r->length - it->off)
			continue;
		memset(&g, 0, sizeof(g));
		if (value_parts_read(srv, r, &g, tabs) < 0 || (it->ver_noted && g.ver != it->ver)) {
			value_get_out_free(&g); /* what it allocated, if any */
			continue; /* (answered without bytes) */
		}
		if (!fr->vcache)
			fr->vcache = calloc(1, sizeof(struct value_vcache));
		/* its parts, from the one holding its first byte */
		for (uint32_t p = value_part_at(&g, it->off);
		     p < g.n && g.offs[p] < it->off + it->len && fr->vcache; p++) {
			uint64_t start = g.offs[p], end = start + g.lens[p];
			bool whole = start == it->off && g.lens[p] == it->len;
			if (!whole && end > it->off) {
				struct value_vent *e =
					value_vfind(fr->vcache, r->view[0].iov_base, p, true);
				if (e && !e->view) {
					e->view = r->view;
					e->vc = r->view_count;
					e->start = start;
					e->len = g.lens[p];
					e->crc = g.crcs[p];
					total += e->len;
				}
			}
		}
		value_get_out_free(&g);
	}
	value_ptabs_free(tabs);
	return total;
}

/*
 * Versions.  A frame answered in chunks lets the pins of its later items
 * go and reads them again by key once its answers drain (ops.c "Pinned
 * answers"): a DELETE and PUT of the key meanwhile gave them the new
 * value, and a client's ranges of one value came back part old, part new,
 * each exact (test_hostile range_version).  Before an item's pin goes it
 * notes the version it read (value_table_ver), the first time; read
 * again, another version is KVT_MISS (value_get_item).  A table that
 * cannot be read now notes 0, which no version matches.  Items of one
 * key that found two versions in the first pass itself are noted before
 * it is answered (kvtd_value_note_keys, below).  Loop thread.
 */
void kvtd_value_note_versions(struct kvtd_frame *fr, uint32_t from)
{
	struct kvtd_server *srv = fr->loop->srv;
	struct value_ptabs *tabs = value_ptabs_new(fr->n - from);

	for (uint32_t i = from; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i];
		struct value_get_out g;
		if (!it->pinned || it->ver_noted)
			continue;
		memset(&g, 0, sizeof(g));
		it->ver = value_parts_read(srv, &it->req, &g, tabs) == 0 ? g.ver : 0;
		it->ver_noted = true;
		value_get_out_free(&g);
	}
	value_ptabs_free(tabs);
}

/*
 * One version a key, across a frame's first pass too.  Its items were
 * pinned one by one (ops.c submits them in one kvt_submit, but each pin
 * is its own lookup): a DELETE and PUT of a key on another loop between
 * two pins of it gave one frame ranges of both versions, each exact
 * (test_hostile range_version_race).  Items of one key pinned at another
 * view than the key's first item note that item's version (the same view
 * is the same value: nothing to read); value_get_item answers one whose
 * own version differs KVT_MISS, in this pass or any later.  Without memory
 * for the map, every pinned item but the first notes 0: a miss.  Once, at
 * the frame's first answer; loop thread.
 */
void kvtd_value_note_keys(struct kvtd_frame *fr)
{
	struct kvtd_server *srv = fr->loop->srv;
	struct value_ptabs *tabs = NULL;
	uint32_t cap = 16, *slot, pinned = 0;
	bool first = true;

	/* Fewer than two items to note (a frame of misses, one hit): no two
	 * of a key to compare, no table -- it was calloc'd (2n slots) for
	 * every GET of two items or more (dup48) */
	for (uint32_t i = 0; i < fr->n && pinned < 2; i++)
		pinned += fr->items[i].pinned && !fr->items[i].ver_noted;
	if (pinned < 2)
		return;
	while (cap < 2 * fr->n)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot));
	for (uint32_t i = 0; i < fr->n; i++) {
		struct kvtd_item *it = &fr->items[i], *o = NULL;
		if (!it->pinned || it->ver_noted)
			continue;
		if (!slot) {
			it->ver = 0; /* matches nothing */
			it->ver_noted = !first;
			first = false;
			continue;
		}
		for (uint64_t h = kvtd_key_hash(srv->key_secret, it->req.ns, it->req.key.bytes,
						it->req.key.len);; h++) {
			uint32_t *sl = &slot[h & (cap - 1)];
			if (!*sl) {
				*sl = i + 1;
				break;
			}
			o = &fr->items[*sl - 1];
			if (o->req.ns == it->req.ns && o->req.key.len == it->req.key.len &&
			    memcmp(o->req.key.bytes, it->req.key.bytes, it->req.key.len) == 0)
				break;
			o = NULL;
		}
		if (!o || kvtd_item_pin_at(o) == kvtd_item_pin_at(it))
			continue;
		if (!o->ver_noted) {
			struct value_get_out g;
			if (!tabs)
				tabs = value_ptabs_new(fr->n);
			memset(&g, 0, sizeof(g));
			o->ver = value_parts_read(srv, &o->req, &g, tabs) == 0 ? g.ver : 0;
			o->ver_noted = true;
			value_get_out_free(&g);
		}
		it->ver = o->ver;
		it->ver_noted = true;
	}
	free(slot);
	value_ptabs_free(tabs);
}

/* Check the parts kvtd_value_verify_plan entered, a slice a call: a
 * frame's checks were one aux job, up to the DRAM tier's size of CRCs
 * (16 values of 8 MiB: ~13 ms release), which every other tenant's job
 * then waited for (test_hostile aux_share).  Any thread, while the loop
 * does not touch the frame. */
bool kvtd_value_verify_run(struct kvtd_frame *fr)
{
	struct value_vcache *vc = fr->vcache;
	uint64_t done = 0;

	for (; vc && vc->next < vc->cap; vc->next++) {
		struct value_vent *e = &vc->v[vc->next];
		if (!e->base || !e->view)
			continue;
		if (done >= KVTD_VERIFY_SLICE)
			return false;
		value_vcheck(e);
		done += e->len;
	}
	return true;
}

/*
 * A test's fault (test_hostile range_nomem): KVTD_TEST_GET_NOMEM=I in
 * kvtierd's environment makes the slice array of item I of every GET
 * answer fail to allocate, the item answered -ENOMEM and its pin let go
 * before the next item is read -- the path of review46g's use-after-free
 * (value_range_crc), which no test reached: the heap does not fail on
 * demand.  Read once, into the server (no global state), as the S3
 * sweeps' hooks are (kvtd_s3_init).
 */
void kvtd_value_test_init(struct kvtd_server *srv)
{
	const char *env = getenv("KVTD_TEST_GET_NOMEM");
	char *end;
	unsigned long i;

	if (!env || !*env)
		return;
	i = strtoul(env, &end, 10);
	if (!*end && i < UINT32_MAX)
		srv->test_get_nomem = (uint32_t)i + 1;
}

/* ------------------------------------------------------------------------
 * Pinned values held (ops.c "Pinned answers"): a pin keeps its whole
 * value in DRAM whatever part or range of it is sent, so an answer counts
 * in the pin caps the values its pins hold, each once however many of
 * its items pin it (test_hostile range: 2,048 ranges of one 32 MiB value
 * in a frame, each item its own pin of the same block).  A value is known
 * by where its bytes are (the view's first run): pins of one block share
 * it, a private SSD copy has its own.  The set is base.c's (kvtd_pinset).
 */

uintptr_t kvtd_item_pin_at(const struct kvtd_item *it)
{
	return kvtd_req_pin_at(&it->req);
}

/*
 * GET response: as many frames as the limits need (PROTO_F_MORE on all but
 * the last), each with the value slices of its items and the pins that
 * keep them valid until written.
 */
void kvtd_value_item_unpin(struct kvtd_server *srv, struct kvtd_item *it)
{
	if (it->pinned) {
		kvt_pin_release(srv->store, it->req.pin);
		it->pinned = false;
	}
	if (it->copy_charged) {
		kvtd_mem_uncharge(srv, it->copy_charged);
		it->fr->conn->copy_bytes -= it->copy_charged;
		if (it->fr->tstat)
			atomic_fetch_sub_explicit(&it->fr->tstat->copies, it->copy_charged,
						  memory_order_relaxed);
		it->copy_charged = 0;
	}
}

/* The pin item e's response carries: its own, or the one of the item it
 * duplicates if e is the last to use it (ops.c "Quiet GETs"); or NULL. */
static struct kvtd_item *value_pin_of(struct kvtd_frame *fr, uint32_t e)
{
	struct kvtd_item *it = &fr->items[e];

	if (it->dup_of) {
		struct kvtd_item *o = &fr->items[it->dup_of - 1];
		return o->pinned && o->carries == e + 1 ? o : NULL;
	}
	return it->pinned && it->carries == 0 ? it : NULL;
}

/* A GET's answer cannot go on (rc): the connection fails with an error
 * frame after what it has queued, unless an output of this reply is
 * queued already -- then it is closed at once, its outputs dropped: a
 * grantee's duplicates' slices in them point into a pin a later output
 * was to carry, released with the frame, and a flush sent freed memory
 * (review45c). */
static void value_get_fail(struct kvtd_frame *fr, bool queued, int rc, const char *msg)
{
	if (!queued) {
		kvtd_conn_fail(fr->conn, PROTO_OP_GET, fr->f.tag, rc, msg);
		return;
	}
	KVTD_COUNT(fr->loop->srv, errors[kvtd_err_of(rc)], 1);
	kvtd_conn_close(fr->conn, msg);
}

void kvtd_value_get_reply(struct kvtd_frame *fr, uint32_t first, uint32_t last)
{
	struct kvtd_server *srv = fr->loop->srv;
	const struct proto_limits *lim = &srv->lim;
	/* Items [first, last): g and pis are indexed from first. */
	struct value_get_out *g = calloc(last - first + 1, sizeof(*g));
	struct proto_item *pis = calloc(last - first + 1, sizeof(*pis));
	struct value_ptabs *tabs = value_ptabs_new(last - first); /* NULL: each its own */
	uint64_t table_budget = lim->table_max, data_budget;
	uint32_t start = first;

	if (!g || !pis) {
		free(g);
		free(pis);
		value_ptabs_free(tabs);
		kvtd_reply_error(fr, -ENOMEM, "server out of memory");
		return;
	}
	data_budget = lim->frame_max - PROTO_HDR_LEN - lim->table_max;
	for (uint32_t i = first; i < last; i++) {
		value_get_item(srv, &fr->items[i], i, &g[i - first], fr->vcache, tabs);
		pis[i - first] = g[i - first].pi;
		if (g[i - first].pi.status != KVT_OK && fr->items[i].pinned &&
		    !fr->items[i].carries) {
			/* Answered without bytes: let the block go now. */
			kvtd_value_item_unpin(srv, &fr->items[i]);
		}
	}
	while (start < last) {
		uint64_t tb = 0, db = 0;
		uint32_t end = start, slices = 0, pins = 0;
		struct proto_frame rf;
		struct kvtd_out *o = NULL;
		struct kvtd_pinset held = { 0 };
		int rc;

		/* Take items while they fit (at least one always does: an item
		 * is <= value_max and its table entry <= 40 + 16 * parts_max). */
		while (end < last) {
			uint64_t d =
				g[end - first].pi.status == KVT_OK ? g[end - first].data_len : 0;
			if (end > start && (tb + g[end - first].table_len > table_budget ||
					    db + d > data_budget))
				break;
			tb += g[end - first].table_len;
			db += d;
			slices +=
				g[end - first].pi.status == KVT_OK ? g[end - first].slice_count : 0;
			pins += value_pin_of(fr, end) != NULL;
			end++;
		}
		kvtd_resp_init(fr, &rf, 0);
		if (end < fr->n)
			rf.flags |= PROTO_F_MORE;
		rc = kvtd_resp_encode(&rf, pis + (start - first), end - start, lim, &o);
		if (rc < 0) {
			kvtd_log(KVTD_ERROR, "cannot encode a GET response", "tag=%llu error=\"%s\"",
				 (unsigned long long)fr->f.tag, proto_strerror(rc));
			value_get_fail(fr, start > first, rc, "server could not encode the response");
			break;
		}
		if (slices || pins) {
			struct iovec *iov = malloc((1 + slices) * sizeof(*iov));
			uint64_t *pv = pins ? malloc(pins * sizeof(*pv)) : NULL;
			if (!iov || (pins && !pv)) {
				free(iov);
				free(pv);
				kvtd_out_free(srv, o);
				value_get_fail(fr, start > first, -ENOMEM, "server out of memory");
				break;
			}
			iov[0] = o->iov[0];
			o->iov = iov;
			o->iov_count = 1;
			o->pins = pv;
			if (pins > 1) /* without: each counted */
				(void)kvtd_pinset_init(&held, pins);
			for (uint32_t i = start; i < end; i++) {
				if (g[i - first].pi.status == KVT_OK) {
					for (unsigned s = 0; s < g[i - first].slice_count; s++) {
						o->iov[o->iov_count++] = g[i - first].slices[s];
						o->bytes += g[i - first].slices[s].iov_len;
					}
				}
				struct kvtd_item *p = value_pin_of(fr, i);
				if (p) {
					/* The output owns the pin now, and the
					 * charge of a private copy behind it. */
					o->pins[o->pin_count++] = p->req.pin;
					/* the caps count the value it holds,
					 * whole, once (above) */
					if (kvtd_pinset_add(&held, kvtd_item_pin_at(p)))
						o->pin_held += p->req.length;
					p->pinned = false;
					o->copy_len += p->copy_charged;
					if (p->copy_charged)
						o->copy_tstat = fr->tstat;
					p->copy_charged = 0;
				}
			}
			/* Every slice is pinned DRAM or a charged private copy,
			 * whether this output or a later one of the reply
			 * carries the pin: a grantee's duplicates share the
			 * first item's pin, carried by the last to use it
			 * (value_pin_of), and the outputs before that one
			 * carry none.  Their slices were charged as bytes of
			 * their own: one quiet GET frame naming an 8 MiB value
			 * 1,024 times, left unread, charged 8 GiB to
			 * --max-memory, and every tenant's next frame was
			 * refused (test_hostile quiet_slices). */
			o->pin_len = o->bytes - o->iov[0].iov_len;
			/* ... and counted in the pin caps as the values its
			 * own pins hold, each once (pin_held), not as the bytes
			 * it sends: the slices of a pin a later output carries
			 * count there, once, with the value.  A grantee's frame
			 * naming a 1 MiB value 128 times counted 128 MiB in its
			 * tenant's pinned (its share 16 MiB), and the tenant's
			 * next GET on another connection was KVT_EBUSY while
			 * the answer was unread (test_hostile quiet_pins_once).
			 * The bound per frame is ops.c's (ops_quiet_limit, one
			 * count a value), which quiet_pins_dup keeps. */
			o->pin_exact = true;
			kvtd_pinset_free(&held);
		}
		kvtd_conn_queue(fr->conn, o);
		start = end;
	}
	for (uint32_t i = first; i < last; i++)
		value_get_out_free(&g[i - first]);
	value_ptabs_free(tabs);
	free(g);
	free(pis);
}


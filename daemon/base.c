/*
 * base.c - the leaves every kvtierd file may use: error-counter names and
 * the map from protocol codes to them, the monotonic clock, a key's hash
 * for the daemon's open-addressing tables, the size
 * grammar of the command line and the tenants file, and pin sets (the
 * distinct values pins hold).
 *
 * No state, no I/O, no calls into any other daemon file: the bottom of
 * the daemon's dependency graph (doc/kvtierd.md "Files").  Pure, so the
 * fuzz targets of config.c, auth.c and memberlist.c link it as is.
 *
 * Threads: any.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <xxhash.h>

#include "kvtierd.h"

const char *const kvtd_err_names[KVTD_ERR__COUNT] = {
	[KVTD_ERR_MAGIC] = "magic",
	[KVTD_ERR_VERSION] = "version",
	[KVTD_ERR_BADOP] = "bad_op",
	[KVTD_ERR_FLAGS] = "flags",
	[KVTD_ERR_COUNT] = "count",
	[KVTD_ERR_BADLEN] = "length",
	[KVTD_ERR_KEYLEN] = "key_length",
	[KVTD_ERR_CRC] = "crc",
	[KVTD_ERR_MALFORMED] = "malformed",
	[KVTD_ERR_RDMA] = "rdma",
	[KVTD_ERR_AUTH] = "auth",
	[KVTD_ERR_NOAUTH] = "no_auth",
	[KVTD_ERR_STATE] = "sequence",
	[KVTD_ERR_PERM] = "permission",
	[KVTD_ERR_TIMEOUT] = "timeout",
	[KVTD_ERR_VANISHED] = "vanished",
	[KVTD_ERR_IO] = "io",
	[KVTD_ERR_NOMEM] = "no_memory",
	[KVTD_ERR_REQUEST] = "request",
	[KVTD_ERR_TLS] = "tls",
};

enum kvtd_err kvtd_err_of(int code)
{
	switch (code) {
	case PROTO_EMAGIC: return KVTD_ERR_MAGIC;
	case KVT_EVERSION: return KVTD_ERR_VERSION;
	case KVT_EBADOP: return KVTD_ERR_BADOP;
	case PROTO_EFLAGS: return KVTD_ERR_FLAGS;
	case PROTO_ECOUNT: return KVTD_ERR_COUNT;
	case KVT_EBADLEN: return KVTD_ERR_BADLEN;
	case KVT_EKEYLEN: return KVTD_ERR_KEYLEN;
	case PROTO_ECRC: return KVTD_ERR_CRC;
	case PROTO_EMALFORMED: return KVTD_ERR_MALFORMED;
	case PROTO_ERDMA: return KVTD_ERR_RDMA;
	case PROTO_EAUTH: return KVTD_ERR_AUTH;
	case PROTO_ENOAUTH: return KVTD_ERR_NOAUTH;
	case KVT_ESTATE: return KVTD_ERR_STATE;
	case PROTO_EPERM: return KVTD_ERR_PERM;
	case -ENOMEM: return KVTD_ERR_NOMEM;
	default: return KVTD_ERR_REQUEST;
	}
}

uint64_t kvtd_key_hash(uint64_t secret, uint32_t ns, const uint8_t *k, uint32_t len)
{
	/* XXH3 seeded by the server's secret and the namespace: the keys are
	 * the client's, and an unkeyed hash (FNV-1a until 2026-12-07) let a
	 * tenant choose 16,384 RESP keys of one home in the expiry table,
	 * each SET EX then a walk of all of them (doc/security.md "Session 44").
	 * The namespace picks the seed through a keyed hash, not by XOR:
	 * with secret ^ ns two namespaces' seeds differ by a known XOR, and
	 * XXH3's short paths subtract the seed from a constant, so a key
	 * chosen per namespace (8 bytes: the seed's XOR difference, byte-
	 * swapped as XXH3 reads it) had one full hash in ~4 of 1,024 of a
	 * tenant's namespaces whatever the secret, up to 16 (test_keyhash). */
	uint64_t seed = XXH3_64bits_withSeed(&ns, sizeof(ns), secret);

	return XXH3_64bits_withSeed(k, len, seed);
}

uint64_t kvtd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec kvtd_deadline(clockid_t clock, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec += (long)(ns % 1000000000u);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Sizes, in the tenants file (dram=, ssd=) and on the command line
 * (--dram, --ssd): the library's one grammar (kvt_parse_size, kvtier.h). */
int kvtd_parse_size(const char *v, uint64_t *out)
{
	return kvt_parse_size(v, out) < 0 ? -EINVAL : 0;
}

/* len bytes at off of a pinned answer's value, across its view's spans
 * (RESP's and S3's stored headers): false if the value is shorter. */
bool kvtd_view_read(const struct kvt_req *r, uint64_t off, void *out, size_t len)
{
	uint8_t *o = out;

	if (off + len > r->length)
		return false;
	for (uint32_t i = 0; i < r->view_count && len; i++) {
		size_t vl = r->view[i].iov_len;
		if (off >= vl) {
			off -= vl;
			continue;
		}
		size_t take = vl - (size_t)off < len ? vl - (size_t)off : len;
		memcpy(o, (uint8_t *)r->view[i].iov_base + off, take);
		o += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

/*
 * The slot of a peer address for the per-address limits (loop.c: the
 * unauthenticated connections, the AUTH throttle).  What counts as one
 * peer: an IPv4 address; an IPv6 address's /64 (one host or site is
 * handed a whole /64 and may use any address in it, so a limit per IPv6
 * address bounded nothing); an IPv4-mapped IPv6 address as its IPv4 one;
 * a Unix-socket client as its user id (SO_PEERCRED, uid), the identity
 * the kernel vouches for there.  Until 2026-12-06 every Unix-socket
 * client was one peer: any local user who could open the socket could
 * throttle every other one's AUTH (20 failures a second) or hold the 256
 * unauthenticated connections and have every other local engine's login
 * refused (test_hostile `unix_peers`).  Hashed with key (random per
 * server) so that a client cannot compute which addresses share a slot
 * with another's and get that one throttled.
 */
uint32_t kvtd_peer_slot(uint64_t key, const struct sockaddr_storage *ss, bool is_unix,
			uint32_t uid)
{
	uint8_t b[9];
	size_t n = 0;

	if (is_unix) {
		b[0] = 1;
		memcpy(b + 1, &uid, 4);
		n = 5;
	} else if (ss->ss_family == AF_INET) {
		b[0] = 4;
		memcpy(b + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
		n = 5;
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			b[0] = 4;
			memcpy(b + 1, a->s6_addr + 12, 4);
			n = 5;
		} else {
			b[0] = 6;
			memcpy(b + 1, a->s6_addr, 8);
			n = 9;
		}
	} else {
		return 0;
	}
	return (uint32_t)(XXH3_64bits_withSeed(b, n, key) % KVTD_PEER_SLOTS);
}

/*
 * The failure throttle (kvtierd.h struct kvtd_throttle).  Each row's slot
 * keeps the second it counts; a failure in a later second starts it at
 * one.  Two failures racing at a second's turn may lose one count (as
 * the one-row throttle could): the bound is approximate by a few.
 * Checked at every TLS accept and AUTH: two XXH3s of 5-9 bytes at the
 * accept (kvtd_peer_slot) and two slot reads here, a few ns more than
 * one row (test_peerslot prints the figure).
 */
bool kvtd_throttle_over(struct kvtd_throttle *t, const uint32_t *slot, uint64_t sec,
			uint32_t limit)
{
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++) {
		uint32_t s = slot[r] % KVTD_PEER_SLOTS;
		if (atomic_load_explicit(&t->sec[r][s], memory_order_relaxed) != (uint32_t)sec ||
		    atomic_load_explicit(&t->fails[r][s], memory_order_relaxed) < limit)
			return false;
	}
	return true;
}

void kvtd_throttle_fail(struct kvtd_throttle *t, const uint32_t *slot, uint64_t sec)
{
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++) {
		uint32_t s = slot[r] % KVTD_PEER_SLOTS;
		uint32_t was = atomic_exchange_explicit(&t->sec[r][s], (uint32_t)sec,
							memory_order_relaxed);
		if (was != (uint32_t)sec)
			atomic_store_explicit(&t->fails[r][s], 1, memory_order_relaxed);
		else
			atomic_fetch_add_explicit(&t->fails[r][s], 1, memory_order_relaxed);
	}
}

/*
 * An address's count in the rows (kvtierd.h kvtd_peer_count_add): its
 * unauthenticated connections, and their SSLs' bytes.  Every add is taken back by one sub with the
 * same slots, so each slot holds the sum of its addresses' counts, at
 * least each one's own: the least of an address's slots never admits it
 * past its cap, whoever shares them.  Two adds racing may both read
 * counts before the other's (as in one row): each cap can be passed by
 * the loops racing at it, at most one each.
 */
uint64_t kvtd_peer_count_add(_Atomic uint64_t (*rows)[KVTD_PEER_SLOTS], const uint32_t *slot,
			     uint64_t n)
{
	uint64_t least = UINT64_MAX;

	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++) {
		uint64_t was = atomic_fetch_add_explicit(&rows[r][slot[r] % KVTD_PEER_SLOTS], n,
							 memory_order_relaxed);
		if (was < least)
			least = was;
	}
	return least;
}

void kvtd_peer_count_sub(_Atomic uint64_t (*rows)[KVTD_PEER_SLOTS], const uint32_t *slot,
			 uint64_t n)
{
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++)
		atomic_fetch_sub_explicit(&rows[r][slot[r] % KVTD_PEER_SLOTS], n,
					  memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Pin sets: the distinct values pins hold, known by where their bytes are
 * (kvtd_req_pin_at), each counted once in the pin caps however many pins
 * hold it: a native GET answer's items (value.c "Pinned values held"),
 * and, with a count of references, a connection's and a tenant's S3
 * requests in progress (s3reply.c "Pins of requests in progress").
 */

uintptr_t kvtd_req_pin_at(const struct kvt_req *r)
{
	return r->view_count ? (uintptr_t)r->view[0].iov_base : 0;
}

/* An open-addressing table (linear probing, at most half full): sized
 * for a native answer's items at once (kvtd_pinset_init), grown as
 * needed by kvtd_pinset_hold and freed when kvtd_pinset_drop empties it. */

static uint64_t base_pinset_hash(uintptr_t at)
{
	return ((uint64_t)at * 0x9e3779b97f4a7c15ull) >> 32;
}

/* at's slot, or the empty one where it would go. */
static struct kvtd_pinslot *base_pinset_find(const struct kvtd_pinset *s, uintptr_t at)
{
	for (uint64_t h = base_pinset_hash(at);; h++) {
		struct kvtd_pinslot *sl = &s->slot[h & (s->cap - 1)];
		if (sl->at == at || !sl->at)
			return sl;
	}
}

static int base_pinset_grow(struct kvtd_pinset *s, uint64_t cap)
{
	struct kvtd_pinset n = { .slot = calloc(cap, sizeof(*n.slot)), .cap = cap };

	if (!n.slot)
		return -ENOMEM;
	for (uint64_t i = 0; i < s->cap; i++)
		if (s->slot[i].at)
			*base_pinset_find(&n, s->slot[i].at) = s->slot[i];
	n.used = s->used;
	free(s->slot);
	*s = n;
	return 0;
}

int kvtd_pinset_init(struct kvtd_pinset *s, uint32_t max)
{
	uint64_t cap = 16;

	while (cap < 2 * (uint64_t)max)
		cap *= 2;
	*s = (struct kvtd_pinset){ 0 };
	return base_pinset_grow(s, cap);
}

void kvtd_pinset_free(struct kvtd_pinset *s)
{
	free(s->slot);
	*s = (struct kvtd_pinset){ 0 };
}

int kvtd_pinset_hold(struct kvtd_pinset *s, uintptr_t at, uint64_t len)
{
	struct kvtd_pinslot *sl;

	if (!at)
		return 1;
	if (2 * (s->used + 1) > s->cap &&
	    base_pinset_grow(s, s->cap ? 2 * s->cap : 16) < 0)
		return -ENOMEM;
	sl = base_pinset_find(s, at);
	if (sl->at) {
		sl->refs++;
		return 0;
	}
	*sl = (struct kvtd_pinslot){ at, 1, len };
	s->used++;
	return 1;
}

bool kvtd_pinset_drop(struct kvtd_pinset *s, uintptr_t at, uint64_t *len)
{
	struct kvtd_pinslot *sl;
	uint64_t mask = s->cap - 1, i, j;

	if (!at)
		return true;
	if (!s->slot)
		return false; /* not held */
	sl = base_pinset_find(s, at);
	if (!sl->at || --sl->refs)
		return false;
	*len = sl->len;
	/* the last: its slot emptied, the entries after it moved back
	 * (linear probing's deletion) */
	i = j = (uint64_t)(sl - s->slot);
	for (;;) {
		j = (j + 1) & mask;
		if (!s->slot[j].at)
			break;
		uint64_t k = base_pinset_hash(s->slot[j].at) & mask;
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			s->slot[i] = s->slot[j];
			i = j;
		}
	}
	s->slot[i] = (struct kvtd_pinslot){ 0 };
	if (--s->used == 0)
		kvtd_pinset_free(s);
	return true;
}

uint64_t kvtd_pinset_refs(const struct kvtd_pinset *s, uintptr_t at)
{
	return at && s->slot ? base_pinset_find(s, at)->refs : 0;
}

bool kvtd_pinset_add(struct kvtd_pinset *s, uintptr_t at)
{
	/* no table (out of memory), or no place: each counted, as before */
	if (!s->slot || !at || 2 * (s->used + 1) > s->cap)
		return true;
	return kvtd_pinset_hold(s, at, 0) != 0;
}

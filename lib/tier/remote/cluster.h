/*
 * cluster.h - the remote tier over several kvtierd (doc/cluster.md): one
 * remote.c connection pool per member, and the routing of each operation
 * to the members that place its block's group (placement.h).
 *
 * The store calls these exactly where it called remote_* before; with one
 * member (remote.addr, or remote.addrs naming one) every call goes
 * straight to that member's remote_* with the caller's callback, so a
 * single server behaves exactly as it did.
 *
 * Where a block goes.  A prompt's blocks are placed in groups of
 * remote.group consecutive blocks, each group by the key of its first
 * block (its anchor).  Multi-key operations (lookup, prefetch) carry the
 * prompt in order from its first block, so they know every key's anchor.
 * A single-key operation knows it when the caller says where the block
 * sits (struct cluster_hint: the request's KVT_F_PROMPT), else from the
 * anchors this store remembered from its lookups and prefetches (an
 * engine looks a prompt up before it loads or stores its blocks), else it
 * places the key by itself (counted: remote.anchor_unknown).  The first
 * group of every prompt (the hot one: system prompts, earlier turns) is
 * placed on remote.hot_replicas members: puts go to each, gets and
 * exists try them in turn from a rotating start, lookups ask each and
 * take the best answer.  A namespace registered with replicas R > 1
 * (kvt_ns_desc.replicas) has every group on R members, handled the same
 * way (its first group on max(R, hot)).  Members that are down (every connection failed)
 * are passed over while they are down: their groups go to the next member
 * in the group's ranking.  delete and clear go to every member.
 *
 * Threads: any thread, like remote_*; callbacks run on a member's remote
 * thread, or on the calling thread before the call returns 0 when every
 * member involved failed at the call but one was still in flight (which
 * remote.c's own callbacks may do too: the store never touches a request
 * after handing it over).  A member that left the pod (remote.discover)
 * fails what it still had queued (-ECANCELED) when it is closed.
 */
#ifndef KVT_CLUSTER_H
#define KVT_CLUSTER_H

#include "remote.h"

struct cluster;
struct cview;

/* Where a single key sits in its prompt: keys[0..pos] are the prompt's
 * keys through this block (keys[pos] is the block's).  keys NULL: not
 * known.  Read during the call only. */
struct cluster_hint {
	const struct kvt_key *keys;
	uint32_t pos;
};

/* One entry of remote.addrs, pointing into the list's text. */
struct cluster_entry {
	const char *addr;
	size_t addr_len;            /* 1..CLUSTER_ADDR_MAX */
	uint32_t weight;            /* 1..PLACEMENT_WEIGHT_MAX (placement.h); 1 if not given */
};
#define CLUSTER_ADDR_MAX 1024

/*
 * Split list[0..len) -- "ADDR[=WEIGHT],...", blanks around an entry
 * ignored -- into out[0..max).  Returns the count, or KVT_EOPTVAL (an
 * empty entry or address, a weight that is not 1..1000000 in digits, an
 * address longer than CLUSTER_ADDR_MAX, more than max entries).  Pure:
 * reads nothing past len, allocates nothing (fuzz_addrs).
 */
int cluster_parse_addrs(const char *list, size_t len, struct cluster_entry *out, unsigned max);

/*
 * One member of a seed's list (STATS cluster.member.<i>, doc/members.md):
 * str[0..len) is "ADDR WEIGHT", the weight the member's capacity in bytes,
 * 1..CLUSTER_MEMBER_WEIGHT_MAX in decimal digits alone, the address 1..
 * CLUSTER_ADDR_MAX bytes of 0x21..0x7e but ',' and '=' (it is written into
 * remote.addrs text, which cluster_parse_addrs reads back).  0 with
 * *addr_len (the address is str[0..*addr_len)) and *weight, or
 * KVT_EOPTVAL.  Pure, reads nothing past len (fuzz_addrs).
 */
#define CLUSTER_MEMBER_WEIGHT_MAX (UINT64_C(1) << 60)
int cluster_member_line(const char *str, size_t len, size_t *addr_len, uint64_t *weight);

/*
 * Open one remote tier per member of cfg->addrs (or the one cfg->addr,
 * or the members the first answering seed of cfg->discover lists in its
 * STATS: cluster.member.<i> = "HOST:PORT BYTES", doc/members.md; weights
 * scaled so that the largest is 1,000,000; a seed that lists none is the
 * one member; if no seed answers within remote.timeout_ms, the seeds
 * themselves, logged): 0, KVT_EOPTVAL (none or more than one of the
 * three set, a malformed entry or weight, a member twice: logged), or
 * remote_open's errors.
 *
 * With cfg->discover and cfg->refresh_ms > 0 a thread ("kvt-cluster")
 * re-reads the list from a live member every refresh_ms; when it changed,
 * members that stay keep their remote tier, new ones are opened, and the
 * new member table replaces the old one for operations that start from
 * then on (those in flight finish on the one they started with; a member
 * that left is closed once none holds it).  cfg's strings must outlive
 * the cluster.
 */
int cluster_open(struct cluster **out, const struct remote_config *cfg, struct dram *dram,
		 struct ns_registry *ns, struct kvt_mem *mem, const struct kvt_logger *log);
/* Stop every member, then free them (remote_stop says why).  NULL: no-op. */
void cluster_close(struct cluster *cl);

/* Operations: the contracts of remote_* (remote.h); hint may be NULL. */
int cluster_get(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, tier_got_fn cb, void *ctx);
int cluster_get_into(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		     const struct cluster_hint *hint, const struct iovec *dst, unsigned dst_count,
		     tier_done_fn cb, void *ctx);
/* only: local DRAM did not take the block (remote.puts_only counts it).
 * vflags: KVT_F_SEALED, KVT_F_RETAIN (sent as PROTO_IF_RETAIN where
 * remote.retain_hint allows: a server older than the flag refuses it). */
int cluster_put(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		const struct cluster_hint *hint, const struct iovec *parts, unsigned part_count,
		const uint32_t *crcs, uint32_t vflags, bool only, tier_done_fn cb, void *ctx);
int cluster_exists(struct cluster *cl, uint32_t ns, const struct kvt_key *key,
		   const struct cluster_hint *hint, tier_done_fn cb, void *ctx);
int cluster_delete(struct cluster *cl, uint32_t ns, const struct kvt_key *key, tier_done_fn cb,
		   void *ctx);
/* Leading hits among keys[from..n) of the prompt keys[0..n); res->count
 * counts from `from`.  tiers (the whole prompt's, may be NULL) gets
 * KVT_TIER_REMOTE for those hits and KVT_TIER_NONE after them. */
int cluster_lookup(struct cluster *cl, uint32_t ns, const struct kvt_key *keys, uint32_t from,
		   uint32_t n, uint8_t *tiers, tier_done_fn cb, void *ctx);
int cluster_clear(struct cluster *cl, uint32_t ns, tier_done_fn cb, void *ctx);

/* Remember the anchors of the prompt keys[0..n) for later single-key
 * operations.  A no-op with one member. */
void cluster_note_prompt(struct cluster *cl, const struct kvt_key *keys, uint32_t n);

/* Plug every member of the current view (remote_plug); unplug takes what
 * plug returned (the view it plugged, held until then). */
struct cview *cluster_plug(struct cluster *cl);
void cluster_unplug(struct cluster *cl, struct cview *plugged);
void cluster_flush(struct cluster *cl);
void cluster_stats(struct cluster *cl, kvt_stats_fn fn, void *ctx);
/* remote_stats_query of every member; with several, names get the prefix
 * "node.<i>." (i: the member's place in the current member list:
 * remote.addrs, or what discovery read). */
int cluster_stats_query(struct cluster *cl, const char *tenant, kvt_stats_fn fn, void *ctx);

/* kvt_remote_who (kvtier.h).  Synchronous. */
int64_t cluster_who(struct cluster *cl, uint32_t ns, const struct kvt_key *keys, uint32_t n,
		    struct kvt_remote_node *nodes, size_t max, uint64_t *leading);

#endif

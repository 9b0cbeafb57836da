/*
 * kvtier.h - the public interface of libkvtier, and its manual.
 *
 * libkvtier keeps the KV cache of LLM inference in a hierarchy of tiers
 * (host DRAM, local SSD, a pod-level kvtierd server; shared storage as it
 * lands), so that context computed once is loaded instead of
 * recomputed.  An inference engine embeds it; kvtierd and the kvtier CLI use
 * nothing but this header.
 *
 * ---------------------------------------------------------------------------
 * The model in five lines
 *
 *   namespace  what makes KV bytes compatible (model, dtype, layout, block
 *              size, TP/PP rank, tenant).  Named by a SHA-256 digest of a
 *              canonical descriptor; a store maps it to a small local id.
 *   key        names one block: SHA-256(ns digest, parent key, tokens, extra),
 *              so a key names the whole prefix up to its block
 *              (kvt_key_chain, doc/keys.md); or opaque caller bytes (<= 64).
 *   value      opaque bytes (typically 64 KiB .. 64 MiB), in one or more
 *              parts (one per layer, say), each with its own CRC32C.
 *   store      the tiers behind one handle: struct kvt_store.
 *   queue      where a thread submits batches of requests and polls for
 *              their completions: struct kvt_queue (one eventfd to wait on).
 *
 * ---------------------------------------------------------------------------
 * The promise
 *
 *   A get returns exactly the bytes a put stored under that key, or a miss.
 *   A key names immutable bytes: a second put of a present key is a no-op
 *   that reports KVT_EXISTS.  A value is visible only once it is complete.
 *   delete and clear win over a racing put that started before them.
 *   Lookups never pin and never extend a block's life.  A block being read
 *   (a pinned get) is never freed under the reader.
 *
 * ---------------------------------------------------------------------------
 * Errors
 *
 *   Every function that can fail returns int (or int64_t): >= 0 success,
 *   < 0 failure.  Operating-system errors pass through as -errno (-ENOMEM,
 *   -EIO, ...); kvtier's own codes are the KVT_E* constants below, all in
 *   [-5999, -5000] so they never collide with errno values.  kvt_strerror()
 *   names both.  A miss is a result, not an error: per-request status
 *   KVT_MISS (> 0).  The library never reads or sets errno for its caller,
 *   never prints and never aborts.
 *
 * ---------------------------------------------------------------------------
 * Threads
 *
 *   A store is thread-safe: any thread may submit to it through its own
 *   queue.  A queue is used by one thread at a time (submit, poll, cancel,
 *   destroy); completions of its requests may be produced by any thread but
 *   are only ever consumed by kvt_queue_poll on the queue's owner.  The
 *   library never calls back into the caller from its own threads except
 *   the log callback (see kvt_store_set_log).
 *
 *   Threads the library starts: kvt_store_open starts the store's workers
 *   (option "workers", default 1), which run deferred requests (prefetch,
 *   flush, requests submitted with KVT_F_DEFER); with an SSD tier also one
 *   write-down thread ("kvt-ssd-wd") and the I/O engine's thread (io_uring)
 *   or threads (psync, 4); with a remote tier one thread ("kvt-remote")
 *   that drives its connections; with a shared tier a pool of
 *   shared.threads ("kvt-shared"); with events.endpoint one publisher
 *   ("kvt-events") and libzmq's I/O thread.  Requests served by the SSD tier
 *   complete on the I/O thread, those that reach the remote tier on the
 *   remote thread, those that reach the shared tier on its pool.  Every library thread blocks all signals, and
 *   kvt_store_close joins them all.
 *
 *   fork(): the child has none of the store's threads.  A store opened
 *   before fork must not be used in the child: calls from the child return
 *   KVT_EFORK, except kvt_store_destroy, which frees the handle's memory
 *   without touching the parent's files or locks.  Open a new store in the
 *   child instead.
 *
 * ---------------------------------------------------------------------------
 * Ownership
 *
 *   Handles (struct kvt_store, struct kvt_queue) are opaque and owned by the
 *   library; they are freed only by their destroy call.  A struct kvt_req
 *   is owned by the caller, but from a successful kvt_submit until
 *   kvt_queue_poll hands it back the library owns it: the caller must not
 *   touch, move or free it, nor the buffers and key arrays it points to.
 *   A put's parts must also keep their bytes unchanged until it completes:
 *   the library may read them after kvt_submit returns (a remote tier
 *   sends them from the caller's buffers and, without KVT_F_CRC, may
 *   compute their CRC32Cs only as it sends: remote.crc_at_send,
 *   remote.io_threads), so bytes changed meanwhile can be what is stored,
 *   under a CRC32C of those bytes, not refused as corrupt.
 *   If kvt_submit fails, none of its requests was submitted and none will
 *   complete.
 */
#ifndef KVTIER_H
#define KVTIER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* KVTIER_VERSION_MAJOR, _MINOR, _PATCH and KVTIER_VERSION_STRING ("0.1.0"),
 * generated by the build from the project's version. */
#include "kvtier_version.h"

/* The library's version as "0.1.0"; static storage, valid forever. */
const char *kvt_version(void);

/* ------------------------------------------------------------------------
 * Result codes
 */

#define KVT_OK      0   /* done; a get or lookup hit */
#define KVT_MISS    1   /* not present (or no longer present): not an error */
#define KVT_EXISTS  2   /* put of a key that is already present: a no-op */

#define KVT_ENULL     (-5001) /* a required pointer argument is NULL */
#define KVT_EBADLEN   (-5002) /* a length is zero, or larger than allowed */
#define KVT_ENONS     (-5003) /* unknown namespace id */
#define KVT_EKEYLEN   (-5004) /* key is empty or longer than KVT_KEY_MAX */
#define KVT_EPIN      (-5005) /* pin handle unknown or already released */
#define KVT_ECLOSED   (-5006) /* store is closed (or was never opened) */
#define KVT_ESTATE    (-5007) /* call not allowed in this state (e.g. option after open) */
#define KVT_EOPTION   (-5008) /* unknown option name */
#define KVT_EOPTVAL   (-5009) /* option value malformed or out of range */
#define KVT_ETOOBIG   (-5010) /* value larger than the tier can ever hold */
#define KVT_EFULL     (-5011) /* no room: everything evictable is pinned or in flight */
#define KVT_ECORRUPT  (-5012) /* a persisted file failed its checks */
#define KVT_ELOCKED   (-5013) /* store directory is locked by another process */
#define KVT_EBADOP    (-5014) /* unknown request opcode or flag */
#define KVT_ERANGE    (-5015) /* part index or byte range outside the value */
#define KVT_EBUFSMALL (-5016) /* destination buffers shorter than the value read */
#define KVT_EFORK     (-5017) /* store used in a child process after fork() */
#define KVT_EVERSION  (-5018) /* persisted file has a format version we do not read */
#define KVT_EBUSY     (-5019) /* busy: a handle in use, or the server's "not now" (retry) */
#define KVT_EDESC     (-5020) /* namespace descriptor field malformed */
#define KVT_EWAIT     (-5021) /* would wait for write-down room (KVT_F_NOWAIT) */
/* [-5999, -5900] belong to the kvtierd wire protocol (doc/protocol.md):
 * a bad frame, failed authentication, a permission refused by a server.
 * kvt_strerror names them too. */

/*
 * Text for any result: KVT_* codes, KVT_E* errors and -errno values.
 * Returns static storage, valid forever; never NULL.  Any thread.
 */
const char *kvt_strerror(int code);

/*
 * The one size grammar, for options (kvt_store_set_option), kvtierd's
 * flags and files, and the CLI: digits, then optionally K, M, G or T
 * (either case; powers of 1024), then optionally "i", then optionally "B"
 * or "b": 512, 100B, 64K, 64KiB, 1mb, 2G.  No sign, space or fraction.
 * Returns 0 with *out set, KVT_EOPTVAL (malformed or over 2^64 - 1; *out
 * untouched), KVT_ENULL.  Never touches errno.  Any thread.
 */
int kvt_parse_size(const char *s, uint64_t *out);

/* ------------------------------------------------------------------------
 * Tiers
 */

enum kvt_tier {
	KVT_TIER_NONE = 0,
	KVT_TIER_DRAM = 1,   /* G2: host DRAM in this process */
	KVT_TIER_SSD = 2,    /* G3: local flash (SSD issue) */
	KVT_TIER_REMOTE = 3, /* G3.5: a kvtierd server (kvtierd issue) */
	KVT_TIER_SHARED = 4, /* G4: shared file system or object store */
	KVT_TIER_COUNT = 5,
};

/* "dram", "ssd", ... or "none"; static storage.  Any thread. */
const char *kvt_tier_name(int tier);

/* ------------------------------------------------------------------------
 * Keys
 */

#define KVT_KEY_MAX 64     /* longest opaque key, bytes */
#define KVT_KEY_HASH_LEN 32 /* length of a chained (SHA-256) key */

struct kvt_key {
	uint32_t len;                /* bytes used in bytes[], 1..KVT_KEY_MAX */
	uint8_t bytes[KVT_KEY_MAX];
};

/*
 * Set *key to the opaque bytes [data, data+len).  For engines that bring
 * their own block hashes.  Returns 0, KVT_ENULL, or KVT_EKEYLEN (len 0 or
 * > KVT_KEY_MAX).  Any thread.
 */
int kvt_key_set(struct kvt_key *key, const void *data, size_t len);

/*
 * The prefix-chained key of one block (doc/keys.md defines it byte for byte):
 *
 *   key = SHA-256( "kvtier-key-v1" || ns_digest[32] || parent[32]
 *                  || u32le(token_count) || u32le(token)... 
 *                  || u32le(extra_len) || extra )
 *
 * parent is the previous block's key (which must be a 32-byte chained key),
 * or NULL for the first block of a prompt (32 zero bytes are hashed).
 * extra carries whatever else changes the KV of these tokens (LoRA adapter
 * id, multimodal input hashes, a cache salt); NULL with extra_len 0 for none.
 * Writes a 32-byte key to *out (which may alias parent).
 * Returns 0, KVT_ENULL (ns_digest, out, or tokens with token_count > 0, or
 * extra with extra_len > 0), KVT_EKEYLEN (parent not 32 bytes), KVT_EBADLEN
 * (token_count 0, or token_count or extra_len above UINT32_MAX), -ENOMEM
 * (OpenSSL could not set up its digest context).  Any thread; the only
 * allocation is OpenSSL's digest context, freed before returning.
 */
int kvt_key_chain(const uint8_t ns_digest[32], const struct kvt_key *parent,
		  const uint32_t *tokens, size_t token_count,
		  const void *extra, size_t extra_len, struct kvt_key *out);

/*
 * Keys of every full block of a prompt: block i covers tokens
 * [i*block_tokens, (i+1)*block_tokens); the same extra is hashed into every
 * block.  With include_partial non-zero, a last partial block is keyed too.
 * Writes at most max_keys keys to out[] and returns how many it wrote
 * (>= 0), or KVT_ENULL (ns_digest; tokens, extra or out NULL with a
 * non-zero count), KVT_EBADLEN (block_tokens 0, extra_len above
 * UINT32_MAX), -ENOMEM.  Any thread; one OpenSSL digest context per call,
 * reused for every block (cheaper per key than kvt_key_chain).
 */
int64_t kvt_key_chain_prompt(const uint8_t ns_digest[32],
			     const uint32_t *tokens, size_t token_count,
			     uint32_t block_tokens, int include_partial,
			     const void *extra, size_t extra_len,
			     struct kvt_key *out, size_t max_keys);

/* ------------------------------------------------------------------------
 * Namespaces
 *
 * A descriptor names everything that makes KV bytes compatible.  Its
 * canonical form (doc/keys.md) is hashed with SHA-256 into the namespace
 * digest that goes into keys, SSD records and the wire.  String fields are
 * 1..255 printable ASCII bytes (0x21..0x7e); NULL or "" means "none" for
 * kv_quant, config_hash and tenant.
 */

#define KVT_NS_RANK_AGNOSTIC 0x1u /* one copy serves every TP rank (MLA, replicated heads) */
/* Policy, not identity (not in the digest): blocks of this namespace are
 * written down to SSD when put, not on their second access.  Set by
 * whoever registers the namespace in this process. */
#define KVT_NS_PERSISTENT 0x2u
/* Policy, not identity (not in the digest), as KVT_NS_PERSISTENT: every
 * put of this namespace carries the retain hint (KVT_F_RETAIN), set or
 * not -- a namespace that holds shared system prompts or documents.  The
 * store that registered it turns the default into each put's flag, so a
 * remote tier sends it on every PUT (PROTO_IF_RETAIN, remote.retain_hint)
 * and a kvtierd needs no registration of its own.  It informs prefix-adapt
 * where the namespace's quota group (no quota: the whole store) also
 * holds unhinted puts: a group whose puts are nearly all hinted is told
 * nothing by them, and its hints are ignored (doc/policies.md "Hints on
 * every put").  Set by whoever registers the namespace in this process;
 * a store keeps it once any registration asked. */
#define KVT_NS_RETAIN 0x4u

struct kvt_ns_desc {
	const char *model;        /* model name, e.g. "meta-llama/Llama-3.1-8B" */
	const char *config_hash;  /* hex digest of the model's config, or NULL */
	const char *dtype;        /* KV element type, e.g. "bf16", "fp8_e4m3" */
	const char *kv_quant;     /* KV quantization scheme, or NULL for none */
	const char *layout;       /* layout of a block's bytes, e.g. "vllm-flash-nhd" */
	uint32_t block_tokens;    /* tokens per block, >= 1 */
	uint32_t tp_rank, tp_size; /* tensor parallel rank and world size (size >= 1) */
	uint32_t pp_rank, pp_size; /* pipeline parallel rank and world size (size >= 1) */
	uint32_t flags;           /* KVT_NS_* */
	const char *tenant;       /* owner; a server overrides it with the authenticated identity */
	/* Policy, not identity (not in the digest), like KVT_NS_PERSISTENT:
	 * how many members of a pod (remote.addrs, remote.discover) hold each
	 * block of this namespace, 0 or 1: one, at most KVT_NS_REPLICAS_MAX.
	 * Puts are written through to every replica; gets, exists and
	 * lookups are answered by any (one that lost it or died is passed
	 * over), so the namespace stays readable when a node dies.  A
	 * prompt's first group keeps max(replicas, remote.hot_replicas)
	 * replicas.  Every engine of the pod must register the namespace
	 * with the same value (it places by it); a store keeps the largest
	 * value any registration in this process asked for. */
	uint32_t replicas;
};
#define KVT_NS_REPLICAS_MAX 8

/*
 * Canonical text of *desc into buf (NUL-terminated) and its SHA-256 into
 * digest (either may be NULL).  Returns the canonical length (excluding the
 * NUL) or KVT_ENULL / KVT_EDESC (a field missing, too long, or with
 * characters outside 0x21..0x7e; "-" as kv_quant, config_hash or tenant,
 * since "-" spells "none" in the text; block_tokens or a size 0; rank >=
 * size; unknown flags; replicas above KVT_NS_REPLICAS_MAX), -ENOMEM
 * (OpenSSL).  replicas is not part of the text.  If buf_len is too small the
 * text is truncated but the length and digest are still right; buf NULL
 * or buf_len 0 writes no text.  The text is at most 2048 bytes.
 * Any thread; the only allocation is OpenSSL's digest context.
 */
int kvt_ns_digest(const struct kvt_ns_desc *desc, uint8_t digest[32],
		  char *buf, size_t buf_len);

/* ------------------------------------------------------------------------
 * Store lifecycle: create, set options, open, use, close, destroy.
 */

struct kvt_store;

/*
 * Allocate a store handle with embedded defaults.  *out is owned by the
 * caller until kvt_store_destroy.  Returns 0, KVT_ENULL or -ENOMEM.
 */
int kvt_store_create(struct kvt_store **out);

/*
 * Set one option by name from its text value, before kvt_store_open.
 * Sizes follow kvt_parse_size (K, M, G, T: powers of 1024).  The same
 * table lists every option with its type, bounds and default
 * (kvt_option_info, "kvtier options").  Options:
 *
 *   path              store directory; holds the namespace registry (and the
 *                     SSD tier's files).  Default none: a memory-only store
 *                     whose namespaces are forgotten at close.
 *   dram.capacity     bytes of DRAM for values (default 256M; 0 disables
 *                     the DRAM tier).  Index and metadata are counted apart
 *                     (stat "mem.meta_bytes").
 *   dram.chunk        allocation unit of the DRAM arena, a power of two,
 *                     4K..2M (default 64K); doc/dram.md explains the choice.
 *   dram.shards       independent index/allocator/eviction shards, 1..256
 *                     (default: one per GiB of capacity, at most 16).  Each
 *                     shard holds capacity/shards bytes: that is also the
 *                     largest value, and with few large values per shard
 *                     the hash spreads them unevenly, so a shard can evict
 *                     before the tier is full.  Fewer shards for big blocks.
 *   dram.policy       "prefix-adapt" (default: "prefix", or a segmented
 *                     order protecting reused blocks, chosen online by two
 *                     miniature simulations; "prefix" whenever an SSD tier
 *                     takes DRAM's victims), "prefix" (LRU keeping each
 *                     prompt's chain in order, tails evicted before heads),
 *                     "prefix-learn" (the same, with reuse predicted per
 *                     class), "lru" or "s3fifo".  doc/policies.md.
 *   dram.victim_wait_ms  a put waits at most this long for the SSD before
 *                     DRAM's victims are shed unwritten (default 20).
 *   dram.hash_seed    the DRAM index hash's secret (default unset or 0: a
 *                     random one per open).  It also picks the keys
 *                     prefix-adapt's simulations sample, so a fixed one
 *                     makes a replay repeat its hit ratio exactly (kvtier
 *                     replay sets one); a server should keep it random, or
 *                     clients who know it can aim keys at one bucket.
 *   dram.hugepages    "auto" (default: hugetlbfs pages if reserved, else
 *                     transparent huge pages), "thp", "off".
 *   dram.prefault     "on" (default) maps the arena populated at open,
 *                     "off" leaves first touch to the first put.
 *   ssd.capacity      bytes of local flash for the SSD tier (default 0: no
 *                     SSD tier); needs "path" and a DRAM tier.  doc/ssd.md.
 *   ssd.segment       segment size, a 4096 multiple, >= 1 MiB (default 256M); the
 *                     largest block is a segment less its headers.
 *   ssd.io            "auto" (default: io_uring unless the kernel refuses
 *                     it), "uring", or "psync" (pread/pwrite threads).
 *   ssd.io_depth      device requests in flight, 1..4096 (default 64).
 *   ssd.dio_align     records' alignment in new segments: "auto" (default:
 *                     the device's O_DIRECT offset alignment, 4096 on a
 *                     drive formatted with 4 KiB sectors, else 512), "512"
 *                     or "4096".  Segments of either stay readable.
 *                     doc/ssd.md "4Kn drives".
 *   ssd.format        layout of the segments this open starts: "3" (default:
 *                     single-part puts under 256 KiB written in batches
 *                     under one header) or "2" (a header per record).  Both
 *                     stay readable whichever is set; a kvtier older than
 *                     format 3 refuses a store holding its segments
 *                     (KVT_EVERSION), so set "2" to keep a store an older
 *                     kvtier can still open.  doc/ssd.md "Batches (format
 *                     3)", doc/deploy.md "Upgrading".
 *   ssd.admission     "victim" (default: what DRAM evicts goes down, the SSD
 *                     as DRAM's victim tier), "second" (a block goes down
 *                     on its second access) or "always" (write-through).
 *                     Namespaces registered with KVT_NS_PERSISTENT go down
 *                     at put.  doc/policies.md.
 *   ssd.close_writedown_ms  a graceful close writes DRAM's blocks down, most
 *                     valuable first, for at most this long and into the
 *                     SSD's free room (default 10000; 0: none): a warm
 *                     restart.  doc/policies.md.
 *   ssd.writedown_max write-down bytes queued before new ones are shed
 *                     (default 256M, at most a quarter of dram.capacity).
 *                     A persistent namespace's puts are never shed.
 *   ssd.writedown_window  write-down bytes the SSD writer keeps placed in
 *                     its log and in flight (default 8M, 256K..1G); the
 *                     rest of a backlog waits unplaced, so a kvt_delete
 *                     waits for at most these, not for the backlog.
 *                     Smaller: faster deletes behind a backlog; larger:
 *                     a device kept busier by a writer short of CPU.
 *   ssd.writedown_wait_ms  a persistent namespace's put waits this long
 *                     for write-down room (default 2000), then fails with
 *                     KVT_EFULL (nothing stored); 0: fail at once.
 *                     KVT_OP_ROOM waits the same way with no thread blocked.
 *   ssd.debug_write_delay_ms  tests: the SSD writer waits this long before
 *                     each write-down (a slow device; default 0).
 *   ssd.debug_check_align  tests: "on" counts every SSD I/O whose offset,
 *                     length or any buffer is off the records' alignment
 *                     (default "off").
 *   ssd.checkpoint_seals  checkpoint after this many sealed segments
 *                     (default 8; 0: only at close).
 *   ssd.high_watermark, ssd.low_watermark  percent of segments in use that
 *                     start and stop eviction (default 100, 100: one
 *                     segment at a time, when no slot is free).
 *   ssd.reinsert_pct  at most this % of an evicted segment is written again
 *                     because it was read there (default 80).
 *   ssd.reuse         "progressive" (default): the oldest segment's slot is
 *                     reused in place, its records readable (and reclaimed
 *                     one by one, with their second chance) until the new
 *                     segment's writes reach them; "whole": the whole
 *                     segment goes when its slot is taken.  doc/ssd.md.
 *   ssd.first_hit     "cold" (default): with victim admission, a block's
 *                     first read from SSD leaves it there (DRAM's copy is
 *                     the next victim), its second moves it to DRAM and
 *                     drops the SSD record; "promote": every read promotes.
 *                     doc/policies.md.
 *   ssd.young_reads_pct  0 (off) .. 100, default 75: with first_hit "cold",
 *                     a second read of a record in the newest this % of
 *                     the log's segments is served as a first read (the
 *                     record stays); only an older one moves to DRAM.
 *                     doc/policies.md.
 *   ssd.put_touch      "off" (default) | "on": a put of a block the SSD
 *                     holds (KVT_EXISTS) marks its record read: it gets
 *                     the second chance at reclamation a read gives.
 *                     doc/policies.md "Fourteenth pass".
 *   ssd.adapt_writedown  "on" (default): with victim admission and
 *                     dram.policy=prefix-adapt, its simulations model DRAM +
 *                     SSD (instead of its pin to LRU mode) and, in their
 *                     short-horizon mode, a DRAM victim never reused is not
 *                     written down -- only while the SSD's log is full (it
 *                     would drop older blocks to take it), and never a
 *                     block put with KVT_F_REPAIR; "off": prefix-adapt is
 *                     pinned to LRU mode over the SSD (doc/policies.md).
 *   ssd.enospc_retry_ms  after ENOSPC, shed write-downs this long before
 *                     trying again (default 5000).
 *   remote.addr       the kvtierd of the remote tier (G3.5): "HOST:PORT",
 *                     "[V6]:PORT" or "unix:/PATH" (default none: no remote
 *                     tier); needs a DRAM tier.  doc/remote.md.  Gets that
 *                     miss locally are fetched into DRAM; puts are written
 *                     through (the put completes when the server answered
 *                     or gave up; its status is the local put's); lookup,
 *                     exists, delete and clear reach the server.  A server
 *                     that is down or slow costs misses, never a hang.
 *   remote.addrs      several kvtierd as one pod-level tier (doc/cluster.md):
 *                     "ADDR[=WEIGHT],..." (each ADDR as remote.addr, WEIGHT
 *                     1..1000000 relative capacity, default 1; at most 256;
 *                     instead of remote.addr).  Blocks are placed by
 *                     weighted rendezvous hashing in groups of remote.group
 *                     consecutive blocks of a prompt; every engine of the pod
 *                     must list the same members (in any order) with the
 *                     same weights, remote.group and remote.hot_replicas.
 *                     A member that is down costs its blocks (misses) and
 *                     is passed over for new blocks while it is down.
 *   remote.discover   "ADDR,..." (at most 16): instead of remote.addrs, ask
 *                     these kvtierd (in turn, at open) for the pod's member
 *                     list (their STATS cluster.member.*, doc/members.md)
 *                     and use it as remote.addrs, capacity weights scaled to
 *                     at most 1000000.  A seed that has no list is the one
 *                     member; if no seed answers within remote.timeout_ms,
 *                     the seeds are the members (logged).  Re-read from a
 *                     live member every remote.refresh_ms: members that
 *                     join or leave are followed (doc/cluster.md).
 *   remote.refresh_ms with remote.discover, how often the member list is
 *                     re-read, 0..3600000 (default 2000; 0: only at open).
 *                     Stats remote.cluster.epoch (the answering server's
 *                     cluster.epoch), .refreshes, .view_changes,
 *                     .refresh_errors (no member answered: the last list
 *                     is kept).
 *   remote.members_max  with remote.discover, 1..256 (default 64): a
 *                     server's member list of more members is refused (the
 *                     seeds at open, the last list at a refresh; logged), as
 *                     is one naming a unix: path, or an address of this host
 *                     (loopback, 0.0.0.0, localhost), when no seed is one
 *                     (doc/remote.md "A hostile or broken server").
 *   remote.warm_ms    with remote.discover, for how long after the member
 *                     list gained a member a single-key read of a group
 *                     with one owner also tries its owner before the join
 *                     (stat remote.warm_reads), 0..3600000 (default 60000;
 *                     0: off; doc/cluster.md "Join without a cold start").
 *   remote.group      blocks of a prompt placed together, 1..65536
 *                     (default 16).
 *   remote.hot_replicas  members that hold a prompt's first group, 1..8
 *                     (default 2).
 *   remote.hot_forward  auto (default), on or off: a put of a block placed
 *                     on several members (the first group, a namespace
 *                     with replicas) is sent once, to the first, which
 *                     forwards it to the others (stat
 *                     remote.forwarded_puts).  auto: to the first of them
 *                     whose HELLO announced forwarding (protocol version
 *                     2, a member of a pod: --members or --etcd); where
 *                     none did, written to each itself.  on: to the first
 *                     live one, every member must know it (an older
 *                     kvtierd refuses the frame).  off: written to each.
 *                     doc/cluster.md "Forwarded replicas".
 *   remote.crc_at_send  off (default) or on: a put that carries no CRC32C
 *                     of its caller's and is not copied to local DRAM has
 *                     its CRC32C computed by the remote tier's I/O thread
 *                     as it packs the frame, right before sending the same
 *                     bytes, instead of on the submitting thread (a
 *                     caller's CRC32Cs, KVT_F_CRC, are sent as given and
 *                     checked by the server either way; doc/remote.md).
 *   remote.retain_hint  auto (default), on or off: puts with KVT_F_RETAIN
 *                     carry the hint to the servers (PROTO_IF_RETAIN),
 *                     whose DRAM takes it for this tenant's quota group.
 *                     auto: to servers whose HELLO announced it (protocol
 *                     version 2); on: to every server, which must know the
 *                     flag (one that predates it refuses the frame,
 *                     PROTO_EFLAGS, then closes the connection;
 *                     doc/protocol.md "PUT").
 *   remote.anchor_slots  keys whose group this store remembers from its
 *                     lookups and prefetches, for single-key requests without
 *                     KVT_F_PROMPT (default 262144, 16 bytes each; 0: none).
 *   remote.tenant     tenant to authenticate as (default "default").
 *   remote.secret_file  file holding the tenant's secret (16..4096 bytes,
 *                     readable by its owner only); none: AUTH method NONE.
 *   remote.conns      connections in the pool, 1..64 (default 2).
 *   remote.conns_max  connections the pool grows to once the engine's values
 *                     average 512 KiB or more, 1..64 (default 4; at most
 *                     remote.conns: a fixed pool).  GET and PUT frames then
 *                     carry about 4 MiB of values each (doc/remote.md).
 *   remote.io_threads I/O threads per server, 1..8 (default 1): the pool's
 *                     connections are split between them (at least one
 *                     each), and gets, puts and exists go round-robin over
 *                     them, so that several threads receive and check
 *                     values side by side (doc/remote.md).
 *   remote.timeout_ms deadline of one remote operation (default 2000).
 *                     Past it the operation fails -ETIMEDOUT: no answer
 *                     came by then, whether it was sent or not -- a
 *                     request still waiting to go (for the window, a
 *                     connection, or, a DELETE, released from its hold
 *                     in the instant after its deadline) fails so,
 *                     never sent, as does one sent and not answered,
 *                     which the server may still apply.  For a
 *                     KVT_OP_DELETE (kvt_delete) it says "not known":
 *                     the block may or may not be gone from the server
 *                     (the local tiers' copies are); try it again.
 *                     -EAGAIN alone says "never sent" (a DELETE held
 *                     behind an unanswered put of its key past its
 *                     deadline: the server untouched; doc/remote.md).
 *   remote.connect_timeout_ms  connect and handshake deadline (default 1000).
 *   remote.backoff_ms, remote.backoff_max_ms  reconnect delay, doubling
 *                     from the first to the second (default 50, 5000).
 *   remote.batch      most items in one frame, 1..65536 (default 64).
 *   remote.value_max  largest value a server may answer a get with (default
 *                     256M, or the largest value this store put if larger):
 *                     an answer announcing more is a protocol error, the
 *                     connection dropped and its gets misses, before any
 *                     DRAM is reserved for it.
 *   remote.put_local  "always" (default): a put lands in local DRAM and is written
 *                     through; "never": written through only, from the
 *                     caller's parts, local DRAM untouched (status KVT_OK,
 *                     tier remote, once the server took it; else
 *                     the server's failure, e.g. -ENOTCONN, -ETIMEDOUT,
 *                     -EIO, KVT_EBUSY: refused for now, try again);
 *                     "auto": as never while DRAM is
 *                     full and evicts mostly blocks never read there (but
 *                     8 puts in a row of every 64), else as always
 *                     (doc/remote.md; stat store.put_local_skips).
 *   remote.tls        "on": TLS (1.2 minimum, 1.3 preferred) to a kvtierd
 *                     started with --tls-cert; the handshake runs within
 *                     remote.connect_timeout_ms (default "off").
 *   remote.tls_ca     CA file (PEM) that verifies the server's certificate
 *                     (default: the system's CA store).
 *   remote.tls_cert, remote.tls_key  client certificate and key (PEM) for
 *                     a server with --tls-verify-client (mutual TLS).
 *   remote.tls_server_name  the name (or address) the server's certificate
 *                     must carry; default the host of remote.addr.  A
 *                     server that fails verification is never used: its
 *                     operations are misses (remote.tls_failures).
 *   shared.dir        a directory on a shared file system (NFS, Lustre,
 *                     WEKA, VAST, ...) that many stores mount: the shared
 *                     tier (G4), below SSD, or below DRAM with no SSD
 *                     (default none); needs a DRAM tier.  doc/shared.md.
 *                     Written down (off the caller's thread): puts of
 *                     namespaces registered KVT_NS_PERSISTENT, blocks
 *                     evicted from DRAM that were read there at least
 *                     twice, and blocks evicted from SSD that were
 *                     promoted from it at least twice.  Gets that miss
 *                     above are promoted from it;
 *                     lookups and exists reach it (KVT_TIER_SHARED);
 *                     delete and clear remove its files too.
 *   shared.admission  "persistent" (default: as above) or "always" (every
 *                     put is written down).
 *   shared.budget     bytes the directory may hold (default 0: no limit);
 *   shared.max_age    seconds a block may live unread (default 0: none).
 *                     Enforced by kvt_shared_gc, run by the tier at open
 *                     and after every budget/8 bytes it writes.
 *   shared.threads    the tier's I/O threads, 1..64 (default 8): parallel
 *                     stats for lookups, reads, write-downs.
 *   shared.writedown_max  write-down bytes queued before new ones are shed
 *                     (default 256M, at most a quarter of dram.capacity).
 *   shared.o_direct   "auto" (default: used if the file system takes it,
 *                     stat shared.o_direct) or "off".
 *   shared.debug_write_delay_ms  tests: a pool thread waits this long
 *                     before each write-down (a slow file system; default 0).
 *   shared.debug_read_delay_ms  tests: a promotion waits this long between
 *                     its header read and its DRAM reservation (default 0).
 *   shared.s3_endpoint  "http://host:port" (or https) of an S3-compatible
 *                     object store: the shared tier's blocks are objects in
 *                     a bucket there instead of files in shared.dir (one or
 *                     the other), with the same policy, format and calls;
 *                     path-style requests, AWS Signature Version 4.
 *   shared.s3_bucket  the bucket (required with s3_endpoint; must exist:
 *                     the open fails with -ENOENT otherwise).
 *   shared.s3_credentials  a file of "access_key = ...", "secret_key = ...",
 *                     optionally "region = ..." lines, readable by its owner
 *                     only (else KVT_EOPTVAL); default the environment's
 *                     AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
 *                     Credentials the server refuses fail the open with
 *                     -EACCES (logged with the key id's first four
 *                     characters, never the secret).
 *   shared.s3_region  the signing region (default: the credentials', else
 *                     us-east-1).
 *   shared.s3_conns   HTTP connections kept alive, 1..64 (default 16); at
 *                     most min(s3_conns, shared.threads) requests run at once.
 *   shared.s3_timeout_ms  per request, connecting included (default 10000):
 *                     an endpoint that stops answering turns into misses
 *                     (stats shared.s3_errors, shared.s3_timeouts) within it,
 *                     retries included.
 *   shared.s3_attempts  tries of a whole-object PUT, GET, HEAD or DELETE that
 *                     failed transiently (no answer, HTTP 500, 502, 503, 504,
 *                     429), as the AWS SDKs' standard mode (default 3; 1: no
 *                     retry); stats shared.s3_retries, shared.s3_retry_giveups.
 *   shared.s3_retry_base_ms  backoff before retry n: uniform in
 *                     [0, base * 2^(n-1)] ms (default 100).
 *   shared.s3_part_size  blocks larger than this go up as multipart uploads
 *                     with parts in parallel (5M..5G, default 64M).
 *   shared.s3_sign_payload  "off" (default: bulk PUTs are signed with
 *                     UNSIGNED-PAYLOAD; every block carries CRC32Cs) or
 *                     "on" (SHA-256 of every body in the signature).
 *   events.endpoint   publish KV events in vLLM's format (msgpack KVEventBatch
 *                     over a ZeroMQ PUB socket; doc/kvevents.md): a ZeroMQ
 *                     endpoint, bound if it holds '*' or '::' or is ipc:// or
 *                     inproc://, else connected (default none: no events).
 *                     BlockStored for new blocks, BlockRemoved for deletes
 *                     (and evictions from a store with no lower tier),
 *                     AllBlocksCleared for clears.
 *   events.groups     "off" (default) or "on": start the publisher even
 *                     without events.endpoint, for the feeds of quota
 *                     groups (kvt_events_group_endpoint).
 *   events.topic, events.medium  the messages' topic (default "") and the
 *                     events' medium (default "CPU").
 *   events.format     map (default: vLLM 0.32's layout, byte for byte) or
 *                     array (older vLLM's array_like events).
 *   events.batch_ms   most milliseconds an event waits for its message,
 *                     0..10000 (default 10).
 *   events.queue_max  events queued before new ones are dropped (default
 *                     65536; stat events.dropped).
 *   events.max_subscribers  connections a bound events socket holds at
 *                     once, 1..65536 (default 64; at most 8 from one IP
 *                     address); past that, peers are refused during the
 *                     ZeroMQ handshake (stat events.refused).
 *   events.replay_endpoint  bind vLLM's replay endpoint here (a ZeroMQ
 *                     ROUTER: a peer sends a start seq and gets the main
 *                     socket's messages kept since, then an end marker;
 *                     doc/kvevents.md "Replay"); default none.  Only with
 *                     events.endpoint.
 *   events.replay_max, events.replay_bytes  what is kept for replay: the
 *                     last messages, at most this many (default 10000,
 *                     vLLM's buffer_steps) and this many payload bytes
 *                     (default 16M), whichever bound comes first.
 *   workers           library worker threads, 1..64 (default 1).
 *   store.tiers       the order in which a request that DRAM cannot answer
 *                     walks the tiers below it: tier names, comma-separated
 *                     (default "ssd,remote,shared": doc/decisions.md says why
 *                     the pod store comes before shared storage).  Names of
 *                     tiers not configured are passed over; a configured
 *                     tier left out fails kvt_store_open with KVT_EOPTVAL.
 *   stats.namespaces  namespaces (ids 1..N) whose lookups, gets, puts and
 *                     DRAM evictions are counted each in a row of their
 *                     own (stats "ns.<id>.*"), 0..256 (default 64; 0: no
 *                     per-namespace counting); namespaces with larger ids
 *                     share the row "ns.other.*" (doc/stats.md).
 *   debug.fail_alloc  N: the Nth allocation made through the library's
 *                     allocator from now on fails with -ENOMEM (tests).
 *   debug.pause_workers  "1": workers take no work until "0" is set again
 *                     (tests of cancellation); also allowed after open.
 *
 * Returns 0, KVT_ENULL, KVT_ESTATE (after open), KVT_EOPTION, KVT_EOPTVAL.
 * One thread at a time per store.
 */
int kvt_store_set_option(struct kvt_store *store, const char *name, const char *value);

/* One option, as kvt_option_info describes it (static storage). */
struct kvt_option {
	const char *name;
	const char *type;   /* "size" (kvt_parse_size), "count", "ms", "string",
			     * "choice", "list" */
	const char *def;    /* the default as a value, or NULL: none set */
	const char *values; /* choice: the values, "a|b|c"; else NULL */
	uint64_t min, max;  /* size, count, ms: bounds; string: length bounds */
	const char *doc;    /* one line */
};
/*
 * The i-th option of kvt_store_set_option (i from 0): the one table that
 * also gives the defaults, which "kvtier options" prints.  0 with *out
 * set, KVT_MISS past the last, KVT_ENULL.  Any thread.
 */
int kvt_option_info(unsigned i, struct kvt_option *out);

/* Log levels for the log callback. */
enum kvt_log_level { KVT_LOG_ERROR = 0, KVT_LOG_WARN = 1, KVT_LOG_INFO = 2, KVT_LOG_DEBUG = 3 };

/*
 * The library never prints: it hands messages at or above min_level (that
 * is, numerically <= min_level) to fn.  msg is valid only during the call.
 * fn may be called from any library thread and from inside any kvt_ call,
 * concurrently: it must be thread-safe, must not block for long and must
 * not call back into the store.  fn NULL drops messages (the default).
 * Allowed before open only.  Returns 0, KVT_ENULL, KVT_ESTATE.
 */
typedef void (*kvt_log_fn)(void *ctx, int level, const char *msg);
int kvt_store_set_log(struct kvt_store *store, kvt_log_fn fn, void *ctx, int min_level);

/*
 * Open the store: map and pre-fault the DRAM arena, lock and load the store
 * directory (if "path" is set; created if missing), start the workers.
 * Returns 0, KVT_ENULL, KVT_ESTATE (already opened or closed),
 * KVT_ELOCKED (another process holds the directory), KVT_ECORRUPT /
 * KVT_EVERSION (registry unreadable), -ENOMEM, or another -errno from the
 * file system.  On failure the handle stays created: fix options and retry,
 * or destroy it.
 */
int kvt_store_open(struct kvt_store *store);

/*
 * Close the store.  What is in flight:
 *   - requests already running on a worker run to the end (drained);
 *   - deferred requests not yet started complete with -ECANCELED;
 *   - both kinds are delivered to their queues, which stay valid (poll them,
 *     then destroy them) until kvt_store_destroy;
 *   - pins still held are reported in the log and invalidated: their
 *     memory is unmapped, so release every pin before closing.
 * Afterwards every call on the store or its queues returns KVT_ECLOSED
 * (except poll, which still hands back completions, and destroy).
 * Returns 0 or KVT_ENULL; closing twice returns KVT_ECLOSED.
 * Must not run concurrently with other calls on the same store.
 */
int kvt_store_close(struct kvt_store *store);

/*
 * Close if open, free every queue still alive, free the handle.  NULL is
 * a no-op.  The handle and its queues are invalid afterwards.
 */
void kvt_store_destroy(struct kvt_store *store);

/*
 * Register a namespace (or find it): computes the digest of *desc and
 * returns its local id in *id.  The same digest always gets the same id in
 * this store, also across restarts when "path" is set: the registry is
 * persisted (atomically: temp file, fsync, rename) before this returns.
 * Returns 0, KVT_ENULL, KVT_EDESC, KVT_ECLOSED, -ENOMEM, -errno (I/O).
 * Any thread.
 */
int kvt_ns_register(struct kvt_store *store, const struct kvt_ns_desc *desc, uint32_t *id);

/*
 * Id of an already registered namespace by digest.  Returns 0 with *id
 * set, KVT_MISS if unknown, KVT_ENULL, KVT_ECLOSED.  Any thread.
 */
int kvt_ns_find(struct kvt_store *store, const uint8_t digest[32], uint32_t *id);

/*
 * Digest (and canonical descriptor text, NUL-terminated, truncated to
 * buf_len) of namespace id.  Returns the text length, KVT_ENONS, KVT_ENULL
 * (digest NULL), KVT_ECLOSED.  Any thread.
 */
int kvt_ns_info(struct kvt_store *store, uint32_t id, uint8_t digest[32], char *buf, size_t buf_len);

/*
 * A namespace's word: 64 bits that its embedder keeps with the namespace in
 * the registry, 0 until set -- metadata, not cache contents: no eviction,
 * no SSD log wrap removes it, and with "path" set it survives restarts
 * (kvtierd keeps an S3 bucket's creation time there: the bucket exists
 * while it is not 0).  kvt_ns_set_word sets it to `word` if it is `expect`
 * (compare and set), durably before it returns and before any thread sees
 * it when "path" is set: one 20-byte record appended to the registry file
 * and fdatasync'ed (doc/keys.md "Registry file"; the file becomes version
 * 3 at the first word that is not 0).  Returns 0, KVT_EXISTS (the word was
 * not expect: nothing changed), KVT_ENONS, KVT_ENULL, KVT_ECLOSED, -ENOMEM,
 * -errno (I/O: the word unchanged in this process -- but where only the
 * directory's sync after a rewrite's rename failed, the file holds the
 * new word already and a restart may show it, as it may a namespace
 * registered then).  kvt_ns_word reads it: 0, KVT_ENONS,
 * KVT_ENULL, KVT_ECLOSED; lock-free.  Any thread.
 */
int kvt_ns_set_word(struct kvt_store *store, uint32_t id, uint64_t expect, uint64_t word);
int kvt_ns_word(struct kvt_store *store, uint32_t id, uint64_t *word);

/* ------------------------------------------------------------------------
 * Quota groups
 *
 * A server shares one store among tenants; quota groups keep one tenant's
 * blocks from crowding out another's.  A namespace belongs to at most one
 * group (a small integer; 0, the default, means none), and a group may
 * have a byte limit per tier:
 *
 *   DRAM  a put or promotion that would take the group past its DRAM limit
 *         first evicts the group's own unpinned blocks, oldest first in the
 *         tier's eviction order, and never another group's; if the group
 *         has nothing left to evict, the put fails with KVT_EFULL (a
 *         promotion becomes a miss).  Charged: the DRAM arena bytes a block
 *         occupies (its length rounded up to whole dram.chunk units).  A
 *         block the quota evicts is a victim like any other: with
 *         ssd.admission=victim it goes down to the SSD (charged until its
 *         write ends; the limit is checked without it meanwhile).
 *   SSD   the group's write-downs are declined (the blocks stay in DRAM
 *         only, counted) while the value bytes of its blocks on SSD would
 *         pass the limit; what is already there stays until segment
 *         eviction recycles it or it is deleted.
 *
 * Quotas do not reserve room: blocks of any group are still evicted when a
 * tier as a whole is full.  To isolate groups completely, keep the sum of
 * their limits within the tier's capacity.  Groups and limits live in
 * memory only: an embedder re-applies them after every open (the SSD bytes
 * of recovered blocks are counted from the start and follow their
 * namespace into its group).  Statistics per group: "quota.<group>.*"
 * (doc/stats.md).
 */

#define KVT_QUOTA_GROUPS 1024 /* group ids are 1 .. KVT_QUOTA_GROUPS - 1 */

/*
 * Set group's limits in bytes: dram_bytes for the DRAM tier, ssd_bytes
 * for the SSD tier; 0 means no limit.  Lowering a limit below what the
 * group holds evicts nothing now: the group's next put evicts down to it.
 * Returns 0, KVT_ENULL, KVT_EOPTVAL (group 0 or >= KVT_QUOTA_GROUPS),
 * KVT_ECLOSED, -ENOMEM.  After open; any thread.
 */
int kvt_quota_set(struct kvt_store *store, uint32_t group, uint64_t dram_bytes,
		  uint64_t ssd_bytes);

/*
 * Put namespace ns in group (0: in none).  New DRAM blocks of ns are
 * charged to the new group; blocks already in DRAM stay charged to the
 * group they were put under until they leave.  The namespace's SSD bytes
 * move to the new group at once.  Returns 0, KVT_ENULL, KVT_ENONS,
 * KVT_EOPTVAL (group >= KVT_QUOTA_GROUPS), KVT_ECLOSED, -ENOMEM.  After
 * open; any thread.
 */
int kvt_ns_set_group(struct kvt_store *store, uint32_t ns, uint32_t group);

/* ------------------------------------------------------------------------
 * Sealed namespaces (doc/security.md)
 *
 * A namespace with a seal key is sealed: the library encrypts and
 * authenticates every part of every block put to it with AES-256-GCM, on
 * the engine's side, so that the SSD tier's files, a remote kvtierd and
 * the wire hold only ciphertext (flagged KVT_F_SEALED) and never a key.
 *
 *   ns key    HKDF-SHA-256 of the tenant's master key over the namespace
 *             digest: one key per namespace, derivable only by whoever
 *             holds the master key.
 *   part key  HKDF-SHA-256 of the ns key with a fresh random 16-byte nonce
 *             as salt, over the block key and part index: each part key
 *             encrypts exactly one part, so GCM's nonce limits never come
 *             near.  The namespace digest, key, part index, part count and
 *             length are bound in as associated data: a server that swaps,
 *             truncates or reorders blocks or parts causes misses.
 *   layout    each part grows by 33 bytes: version (1), nonce (16),
 *             ciphertext, tag (16).  The CRC32C kept per part is over the
 *             ciphertext, so a server checks what it holds without the key.
 *
 * On a sealed namespace:
 *   put       one pass of AES-GCM from the caller's parts into the block's
 *             DRAM room (no plaintext copy is ever stored).  KVT_F_CRC
 *             CRCs are of the plaintext and are checked first; KVT_F_SEALED
 *             (caller-sealed bytes) is refused with KVT_EBADOP.
 *   get       one pass back into the caller's buffers after -- per part --
 *             the tag verified; whole values and KVT_F_PART.  A tag that
 *             fails, or a block not stored sealed, is KVT_MISS (counted:
 *             "seal.tag_failures", "seal.unsealed_misses"), and whatever
 *             the get had written to the caller's buffers is wiped.
 *             value_len and length count plaintext; value_flags is
 *             KVT_F_SEALED.
 *   KVT_OP_GET_PINNED and KVT_F_RANGE are refused at submit with
 *             KVT_EBADOP: a pinned view would be ciphertext (an engine
 *             that ignored value_flags would compute on it), and a range
 *             inside a part cannot be checked against the part's tag.
 *   lookup, exists, delete, clear, prefetch: unchanged.
 * A namespace without a key stores whatever it is given; kvtierd uses
 * none, and serves sealed blocks as the opaque bytes they are.
 *
 * Keys live in the store's memory only (never persisted; wiped at close):
 * set them again after every open.  Setting a new key replaces the old
 * one; blocks sealed under the old key become misses.
 */

/*
 * Seal namespace ns under the ns key derived from master_key (len 32..1024
 * bytes, the tenant's secret; not kept).  Returns 0, KVT_ENULL, KVT_ENONS,
 * KVT_EBADLEN, KVT_ECLOSED, -ENOMEM.  After open; any thread, but puts
 * and gets of ns racing it may use either key.
 */
int kvt_ns_set_seal_key(struct kvt_store *store, uint32_t ns, const uint8_t *master_key,
			size_t len);

/*
 * The ns key of a sealed namespace into ns_key[32]: what the owner of a
 * shared namespace hands to the tenants it grants, out of band (never the
 * master key, from which every namespace key of the owner derives).
 * Returns 0, KVT_MISS (ns not sealed), KVT_ENULL, KVT_ENONS, KVT_ECLOSED.
 */
int kvt_ns_seal_key_export(struct kvt_store *store, uint32_t ns, uint8_t ns_key[32]);

/*
 * Seal ns with an ns key handed over by the namespace's owner (a grantee
 * registers the same descriptor, so the digest bound into every part is
 * the owner's).  Returns 0, KVT_ENULL, KVT_ENONS, KVT_ECLOSED, -ENOMEM.
 */
int kvt_ns_set_seal_ns_key(struct kvt_store *store, uint32_t ns, const uint8_t ns_key[32]);

/* ------------------------------------------------------------------------
 * Requests
 *
 * Every operation is a struct kvt_req, submitted in batches to a queue and
 * completed through it.  Fill the "in" fields, submit, then poll: the
 * library sets the "out" fields before handing the request back.
 *
 *   op                 in fields used            out fields
 *   KVT_OP_PUT         ns key iov iov_count      status: OK, EXISTS, error
 *                      [crcs with KVT_F_CRC]
 *   KVT_OP_GET         ns key iov iov_count      status: OK, MISS, error;
 *                      [part with KVT_F_PART]    length: bytes copied;
 *                      [off len with KVT_F_RANGE] value_len: whole value
 *   KVT_OP_GET_PINNED  ns key                    status; pin, view,
 *                                                view_count, length: a
 *                                                read-only view (below)
 *   KVT_OP_EXISTS      ns key                    status: OK or MISS; tier;
 *                      [KVT_F_ERRORS]            or a tier's error
 *   KVT_OP_DELETE      ns key                    status: OK or MISS; the
 *                                                tombstone is durable once
 *                                                a KVT_OP_FLUSH behind it
 *                                                completes (KVT_F_DELETES:
 *                                                it alone; CLEAR the same)
 *   KVT_OP_LOOKUP      ns keys key_count         status OK; length: leading
 *                      [tiers: key_count bytes]  blocks present; tiers[i]
 *   KVT_OP_PREFETCH    ns keys key_count         status OK; length: blocks
 *                                                now in the fastest tier
 *   KVT_OP_CLEAR       ns, or KVT_NS_ALL         status OK; length: blocks
 *                                                removed
 *   KVT_OP_FLUSH       -                         status OK once everything
 *                                                submitted to this store
 *                                                before it has reached the
 *                                                tiers it was headed for;
 *                      [KVT_F_DELETES]           once the deletes and
 *                                                clears before it are
 *                                                durable (not write-downs)
 *   KVT_OP_ROOM        ns len                    status OK once a put of len
 *                                                bytes to ns would not wait
 *                                                for write-down room, or
 *                                                KVT_EFULL after
 *                                                ssd.writedown_wait_ms
 *
 * KVT_OP_ROOM is the wait of a persistent namespace's put (kvtier.h
 * "ssd.writedown_wait_ms") without a thread: no thread blocks while it
 * waits, it completes through the queue like any request, after the
 * puts that waited before it, and it is counted as such a put's wait
 * (ssd.writedown_put_waits, ssd.writedown_put_timeouts).  It reserves
 * nothing: a put after it (with KVT_F_NOWAIT) may still find another
 * put took the room.  kvtierd parks a persistent put on it instead of
 * blocking its event loop.  Other namespaces: KVT_OK at once.
 *
 * Values: a put takes one iovec element per part (1..KVT_PARTS_MAX parts,
 * each at least 1 byte; the value is their concatenation, at most
 * KVT_VALUE_MAX bytes).  A get copies into iov[0..iov_count) in order: the
 * whole value, or one part (KVT_F_PART), or len bytes at byte offset off
 * (KVT_F_RANGE); if the buffers are shorter it fails with KVT_EBUFSMALL and
 * sets value_len so the caller can retry with more room.
 *
 * Checksums: every part carries a CRC32C.  With KVT_F_CRC the caller
 * supplies them in crcs[] (end-to-end checksums, e.g. from the wire) and
 * they are verified before the put completes; without it the library
 * computes them, off the put path, before the block first leaves DRAM
 * (doc/dram.md).  KVT_F_VERIFY on a get checks the bytes copied out against
 * the stored CRCs: a mismatch is a miss (and counted), never other bytes.
 *
 * Pinned gets: on KVT_OK, view[0..view_count) is a read-only view of the
 * value's `length` bytes, in order, that stays valid (array and bytes)
 * until kvt_pin_release(store, pin): the block cannot be freed or evicted
 * meanwhile (a delete or clear unlinks it, but the bytes stay until
 * release).  The DRAM tier keeps a value in as few 4 KiB-aligned runs as
 * it can -- usually one, so view_count is usually 1 (doc/dram.md says
 * why a value may be split rather than evicting to make room for it).
 * Pins are meant to be short.
 *
 * Quiet gets (KVT_OP_GET_PINNED with KVT_F_QUIET): a read whose effects on
 * the store cannot be seen by anyone else.  A block in DRAM is pinned
 * without counting a hit or a read, without touching its recency or its
 * eviction queue, and without triggering the second-access write-down; a
 * block only on SSD is read into a private buffer (a verified copy, freed
 * at kvt_pin_release) instead of being promoted, and is not marked as read
 * for SSD reinsertion.  So what a quiet reader reads changes neither which
 * tier a block is in nor how long it stays there: the next reader's
 * latency, tier field and hit or miss are what they would have been
 * without it.  The shared and remote tiers are not asked (they promote);
 * a block only they hold is a miss.  kvtierd serves reads of granted
 * namespaces this way (doc/security.md, "Cross-tenant probing").  Not for
 * sealed namespaces with a key (pinned gets are refused there anyway).
 *
 * Quiet part gets (KVT_OP_GET with KVT_F_PART and KVT_F_QUIET): one part
 * copied into iov, as quietly: from DRAM through the same quiet ref (only
 * dram.get_bytes counts it), from SSD by reading the record's header and
 * that part alone (the part's CRC32C checked: a mismatch is a miss, never
 * other bytes; ssd.part_reads; a value the SSD wrote in a batch, format 3,
 * has one part, the whole value, read whole and checked by its value_crc),
 * nothing promoted, the entry not marked
 * read; the shared and remote tiers are not asked.  KVT_EBADOP in a sealed
 * namespace with a key.  An S3 object's header is its part 0, so a HEAD
 * or a listing entry reads ~1 KiB this way rather than the whole object.
 * While in flight, a quiet part get of a part of at most 4 KiB holds at
 * most KVT_PART_QUIET_MEM bytes in the library (from SSD: the read's
 * state and an aligned buffer of the record's header and 4 KiB -- the
 * part's entry alone is taken from the header's part table, none of it
 * decoded into memory; ~5 KiB for a value of a few parts, 19,352 bytes
 * for KVT_PARTS_MAX parts, 24,984 in 4096-aligned records; until
 * 2026-12-04 the table decoded too, 16 KiB more, and the bound 64 KiB); a
 * larger part, at most 1 MiB more whatever its size (doc/ssd.md "Reads:
 * one part, quietly").  Callers that bound their memory count it (kvtierd's S3
 * listings charge it to --max-memory).
 * (A plain KVT_F_PART get of a block only on SSD promotes it whole, as
 * any get: an engine reading a block layer by layer reads it once.)
 */

enum kvt_op {
	KVT_OP_PUT = 1,
	KVT_OP_GET,
	KVT_OP_GET_PINNED,
	KVT_OP_EXISTS,
	KVT_OP_DELETE,
	KVT_OP_LOOKUP,
	KVT_OP_PREFETCH,
	KVT_OP_CLEAR,
	KVT_OP_FLUSH,
	KVT_OP_ROOM,
	KVT_OP__COUNT
};

#define KVT_F_PART   0x01u /* get: only part number `part` */
#define KVT_F_RANGE  0x02u /* get: only `len` bytes at offset `off` */
#define KVT_F_CRC    0x04u /* put: crcs[] holds each part's CRC32C */
#define KVT_F_VERIFY 0x08u /* get: check the copied bytes against the CRCs */
#define KVT_F_DEFER  0x10u /* run on a library worker, not on the submitting thread */
#define KVT_F_SEALED 0x20u /* put: the value is client-sealed ciphertext (AES-GCM):
			    * stored with the block, reported in value_flags */
#define KVT_F_QUIET  0x40u /* get pinned, get with KVT_F_PART: leave no trace in the
			    * cache state (below) */
#define KVT_F_PROMPT 0x80u /* put, get, get_pinned, exists, delete: keys[0..key_count)
			    * are the prompt's keys through this block (key is
			    * keys[key_count - 1]), so that a remote tier over several
			    * kvtierd places the block with its group (doc/cluster.md) */
#define KVT_F_NOWAIT 0x100u /* put, kvt_put_reserve: KVT_EWAIT instead of waiting
			     * for write-down room (then KVT_OP_ROOM) */
#define KVT_F_RETAIN 0x200u /* put, kvt_put_reserve: a hint that this block's
			     * prompt will be asked again (a router that knows a
			     * document is shared).  prefix-adapt starts it in main
			     * rather than on probation when its segmented order
			     * wins with the hints seen (doc/policies.md "The retain
			     * hint"); a wrong hint costs no hits below LRU.
			     * Ignored by the other policies, where a tier below
			     * DRAM pins prefix-adapt to LRU order, and in a quota
			     * group where (nearly) every put is hinted (more than
			     * 9 in 10 of its last 512-1,024 puts in a DRAM shard:
			     * such hints say nothing; dram.retain_ignored).  Set
			     * on every put of a KVT_NS_RETAIN namespace.  A remote
			     * tier sends it to kvtierd (remote.retain_hint), which
			     * takes it for the sender's quota group. */
#define KVT_F_REPAIR 0x400u /* put, kvt_put_reserve: a copy the pod placed here, not
			     * an engine's put (kvtierd: a drain's hand-over, a
			     * join's warm-up, a repair or forwarded replica,
			     * PROTO_IF_REPAIR).  New to this store, such a block
			     * looks never reused: a write-down filter never drops
			     * it (ssd.adapt_writedown, doc/policies.md); it is
			     * written down on eviction like a block reused. */
#define KVT_F_DELETES 0x800u /* flush: wait only until the deletes and clears
			      * submitted before it are durable -- what kvt_delete
			      * waits for: their tombstones written and synced,
			      * ahead of the write-downs queued before them (the
			      * SSD's "Deletes jump the queue"), not those
			      * write-downs.  kvtierd answers its DELETEs so. */
#define KVT_F_ERRORS 0x1000u /* exists: a tier's failure (a pod that timed out or
			      * refused, no memory: not a miss) is the status
			      * where no tier has the block, not KVT_MISS -- for
			      * callers that act on a miss (kvtierd's S3 Abort
			      * deletes what it finds, an UploadPart whose upload
			      * is missing deletes its part).  Without it, as
			      * before: OK or MISS. */

#define KVT_NS_ALL UINT32_MAX   /* KVT_OP_CLEAR: every namespace */
#define KVT_PARTS_MAX 1024      /* most parts in one value */
/* "Quiet part gets": held in flight, at most: the largest record header
 * (KVT_PARTS_MAX parts at 4096 alignment: 20 KiB), 4 KiB of value and the
 * read's state (under 1 KiB; lib/tier/ssd/ssd.c asserts the sum) */
#define KVT_PART_QUIET_MEM (25u << 10)
#define KVT_VALUE_MAX (UINT64_C(1) << 36) /* 64 GiB: a hard sanity bound */
#define KVT_BATCH_MAX 65536     /* most requests in one kvt_submit, keys in one lookup */

struct kvt_req {
	/* in */
	uint32_t op;                /* enum kvt_op */
	uint32_t flags;             /* KVT_F_* */
	uint32_t ns;                /* namespace id from kvt_ns_register, or KVT_NS_ALL */
	uint32_t part;              /* KVT_F_PART: part index */
	struct kvt_key key;         /* single-key ops */
	const struct kvt_key *keys; /* LOOKUP, PREFETCH: key_count keys, in prompt order;
				     * single-key ops with KVT_F_PROMPT: the prompt so far */
	uint32_t key_count;
	uint32_t iov_count;
	const struct iovec *iov;    /* PUT: parts; GET: destination buffers */
	const uint32_t *crcs;       /* PUT with KVT_F_CRC: iov_count CRC32C values */
	uint8_t *tiers;             /* LOOKUP: optional, key_count bytes (enum kvt_tier) */
	uint64_t off, len;          /* GET with KVT_F_RANGE; ROOM: len */
	uint64_t user_data;         /* yours; untouched */
	/* out */
	int32_t status;             /* KVT_OK, KVT_MISS, KVT_EXISTS, or an error */
	uint32_t tier;              /* tier that served a hit (enum kvt_tier) */
	uint64_t length;            /* see the table above */
	uint64_t value_len;         /* GET: the whole value's length (on OK or EBUFSMALL) */
	uint32_t value_flags;       /* GET, GET_PINNED: KVT_F_SEALED if put so */
	uint32_t pad2_;
	uint64_t load_ns;           /* LOOKUP: estimated time to load the leading hits
				     * from their tiers at each tier's measured
				     * throughput (compare with recomputing them) */
	uint64_t pin;               /* GET_PINNED: handle for kvt_pin_release */
	const struct iovec *view;   /* GET_PINNED: the value's bytes, in order */
	uint32_t view_count;        /* GET_PINNED: elements in view[] */
	uint32_t priv_flags_;       /* library-private */
	/* library-private while submitted */
	void *priv_[4];
	uint64_t priv_seq_;
};

/* ------------------------------------------------------------------------
 * Queues
 */

struct kvt_queue;

/*
 * A completion queue for the calling thread.  Owned by the caller; freed by
 * kvt_queue_destroy (or kvt_store_destroy).  Returns 0, KVT_ENULL,
 * KVT_ECLOSED, -ENOMEM, -EMFILE (no eventfd).  Any thread.
 */
int kvt_queue_create(struct kvt_store *store, struct kvt_queue **out);

/*
 * Submit n requests (1..KVT_BATCH_MAX).  Each is checked first: if any is
 * malformed or the store cannot take them, kvt_submit returns that error
 * and submits none of them (none will complete).  Otherwise it returns n,
 * every request is in flight, and each completes exactly once through
 * this queue.  Requests served from DRAM complete before kvt_submit
 * returns (inline, on the calling thread); others complete later.  Errors
 * found while running a request (e.g. KVT_ETOOBIG, KVT_EFULL) are that
 * request's status, not kvt_submit's.
 * Returns n, KVT_ENULL, KVT_EBADLEN (n), KVT_EBADOP, KVT_ENONS, KVT_EKEYLEN,
 * KVT_EBADLEN (a length), KVT_EBUSY (a request already in flight),
 * KVT_ECLOSED, KVT_EFORK.
 */
int kvt_submit(struct kvt_queue *q, struct kvt_req *const reqs[], unsigned n);

/*
 * Take up to max completed requests, in completion order, into out[].
 * Never blocks.  Returns how many (>= 0), or KVT_ENULL.  Works after the
 * store is closed, to collect what close completed.
 */
int kvt_queue_poll(struct kvt_queue *q, struct kvt_req **out, unsigned max);

/*
 * Like poll, but waits up to timeout_ms (-1: forever) for at least one
 * completion.  Returns how many (0 on timeout), or KVT_ENULL, -EINTR.
 */
int kvt_queue_wait(struct kvt_queue *q, struct kvt_req **out, unsigned max, int timeout_ms);

/*
 * An eventfd that is readable whenever completions may be waiting: add it
 * to your epoll/io_uring/asyncio loop, then call kvt_queue_poll (which
 * resets it).  Owned by the queue.  Returns the fd or KVT_ENULL.
 */
int kvt_queue_fd(struct kvt_queue *q);

/*
 * Queue flags.  KVT_QUEUE_POLL_AFTER_SUBMIT: the owner calls
 * kvt_queue_poll after every kvt_submit (before it waits on the eventfd),
 * so requests that complete inline -- inside kvt_submit, served from DRAM
 * -- do not make the eventfd readable: they are simply on the done list
 * when kvt_submit returns.  Completions on other threads still do.  Saves
 * an eventfd write and read per submit on an event loop that drains its
 * queue after handling events (kvtierd's loops).  Returns 0, KVT_ENULL,
 * KVT_EBADOP (unknown flags).  The owner's thread.
 */
#define KVT_QUEUE_POLL_AFTER_SUBMIT 0x1u
int kvt_queue_set_flags(struct kvt_queue *q, uint32_t flags);

/*
 * Requests submitted through q and not yet handed back by poll.
 * Returns the count or KVT_ENULL.
 */
int kvt_queue_inflight(struct kvt_queue *q);

/*
 * Cancel a submitted request.  If it has not started, it completes with
 * status -ECANCELED (collect it with poll) and this returns 0; if it is
 * running it runs to the end and this returns -EALREADY; if it already
 * completed or was never submitted through q, -ENOENT.  KVT_ENULL.
 */
int kvt_cancel(struct kvt_queue *q, struct kvt_req *req);

/*
 * Free a queue.  Returns 0, or KVT_EBUSY if requests are still in flight
 * (the queue stays valid), KVT_ENULL.
 */
int kvt_queue_destroy(struct kvt_queue *q);

/*
 * Release a pin from a KVT_OP_GET_PINNED.  After this the view's bytes may
 * be reused at once.  Returns 0, KVT_EPIN (unknown handle, or released
 * already: double release is detected, not undefined), KVT_ENULL,
 * KVT_ECLOSED.  Any thread.
 */
int kvt_pin_release(struct kvt_store *store, uint64_t pin);

/*
 * The part table of a pinned value: each part's length and CRC32C (the
 * CRCs are computed now if the put deferred them), so that a server can
 * send a value's end-to-end checksums along with it.  Writes
 * min(max, parts) entries to lens and crcs (either may be NULL) and
 * returns the value's part count (which may exceed max), or KVT_EPIN,
 * KVT_ENULL, KVT_ECLOSED, -ENOMEM.  Any thread.
 */
int kvt_pin_parts(struct kvt_store *store, uint64_t pin, uint64_t *lens, uint32_t *crcs,
		  unsigned max);

/*
 * Zero-copy puts, for callers whose bytes arrive from elsewhere (a socket,
 * a file): reserve room for the value in DRAM, write exactly res->len bytes
 * into res->view (runs of 4 KiB-aligned memory, in order), then commit --
 * or abort.  Until committed the value is invisible (a get misses, a put
 * of the key returns KVT_EXISTS); a delete or clear meanwhile wins (commit
 * returns -ECANCELED).  kvtierd receives PUT values this way: straight
 * from the socket into DRAM, no copy in user space.
 *
 * kvt_put_reserve: part_lens[0..part_count) are the parts' lengths (each
 * >= 1); flags 0, KVT_F_SEALED, KVT_F_NOWAIT (a persistent namespace's
 * put that would wait for write-down room returns KVT_EWAIT at once,
 * nothing counted: wait with KVT_OP_ROOM, then try again), KVT_F_RETAIN
 * (the retain hint, taken at the commit), KVT_F_REPAIR (a copy the pod
 * placed, taken at the commit).  Returns
 * KVT_OK with *res filled (the
 * handle and view are valid until commit or abort), KVT_EXISTS (present
 * in DRAM or SSD, or being written), KVT_ETOOBIG, KVT_EFULL, KVT_ENONS,
 * KVT_EKEYLEN, KVT_EBADLEN, KVT_EBADOP (flags), KVT_ENULL, KVT_ECLOSED,
 * -ENOMEM; KVT_ESTATE with a remote tier (a reservation has no caller
 * buffer to write through from: use kvt_put there).
 *
 * kvt_put_commit: crcs (one per part, or NULL) are checked against the
 * bytes first (KVT_ECORRUPT: dropped, nothing visible).  Returns KVT_OK,
 * KVT_ECORRUPT, -ECANCELED, KVT_EPIN (unknown handle), KVT_ENULL,
 * KVT_ECLOSED.  The handle is spent whatever the result.
 * kvt_put_commit_checked: as kvt_put_commit, but the caller has already
 * checked crcs (not NULL) against the bytes it wrote into the view --
 * typically while they arrived, still in cache -- so they are stored as
 * the parts' CRCs without reading the value again.  CRCs that do not
 * match the bytes are the caller's bug; they cannot give wrong bytes to a
 * reader that checks (SSD reads and kvtierd's clients do: a miss), but
 * the value is then unreadable from those tiers.  KVT_ENULL if crcs NULL.
 * kvt_put_abort: drops the reservation; 0, KVT_EPIN, KVT_ENULL,
 * KVT_ECLOSED.  kvt_store_close aborts what is still reserved.  Any
 * thread; one thread at a time per reservation.
 */
struct kvt_reservation {
	uint64_t handle;            /* for kvt_put_commit / kvt_put_abort */
	uint64_t len;               /* bytes to write: the sum of the parts */
	const struct iovec *view;   /* where they go, in order; exactly len bytes */
	uint32_t view_count;
};
int kvt_put_reserve(struct kvt_store *store, uint32_t ns, const struct kvt_key *key,
		    const uint64_t *part_lens, unsigned part_count, uint32_t flags,
		    struct kvt_reservation *res);
int kvt_put_commit(struct kvt_store *store, uint64_t handle, const uint32_t *crcs);
int kvt_put_commit_checked(struct kvt_store *store, uint64_t handle, const uint32_t *crcs);
int kvt_put_abort(struct kvt_store *store, uint64_t handle);

/* ------------------------------------------------------------------------
 * Synchronous helpers: one request, run to completion on the calling
 * thread (they wait if the request must go to a worker).  Same results as
 * the request's status.  Any thread.
 */

int kvt_put(struct kvt_store *store, uint32_t ns, const struct kvt_key *key,
	    const struct iovec *parts, unsigned part_count);
/* Whole value into buf; *value_len (may be NULL) gets its length. */
int kvt_get(struct kvt_store *store, uint32_t ns, const struct kvt_key *key,
	    void *buf, size_t buf_len, uint64_t *value_len);
int kvt_exists(struct kvt_store *store, uint32_t ns, const struct kvt_key *key);
/* kvt_delete and kvt_clear return once the delete is durable: a restart,
 * even after kill -9, never brings the block back (the SSD tier's
 * tombstone written and synced, shared by concurrent deletes).  With an
 * SSD tier the tombstone goes ahead of the write-downs queued before it
 * and waits only for those already in flight (ssd.writedown_window, 8M),
 * then one fdatasync: ~0.2 ms idle, and behind a full 256 MiB backlog
 * ~0.2 ms at the median, < 9 ms at p99 (it was 0.22-0.26 s before
 * 2026-12-04, a flush of the whole queue; bench/RESULTS.md, doc/ssd.md
 * "Deletes jump the queue").  To delete many blocks, submit
 * their KVT_OP_DELETEs on a queue and one KVT_OP_FLUSH with KVT_F_DELETES
 * behind them: one wait, the same as kvt_delete's (a plain KVT_OP_FLUSH
 * waits for every write-down queued before it too). */
int kvt_delete(struct kvt_store *store, uint32_t ns, const struct kvt_key *key);
/* Returns the number of leading keys present (>= 0) or an error; tiers may be NULL. */
int64_t kvt_lookup_prefix(struct kvt_store *store, uint32_t ns, const struct kvt_key *keys,
			  size_t key_count, uint8_t *tiers);
/* Returns the number of blocks removed (>= 0) or an error.  ns may be KVT_NS_ALL. */
int64_t kvt_clear(struct kvt_store *store, uint32_t ns);
/* Waits until everything submitted before it has reached its tiers. */
int kvt_flush(struct kvt_store *store);

/*
 * Listing a namespace's keys, a page at a time (lib/store_scan.c).
 *
 * kvt_scan fills keys[0..n) with up to max keys of namespace ns that the
 * local tiers hold -- DRAM and SSD -- in increasing order (bytes compared
 * as unsigned, a key before its extensions), each strictly after *cursor
 * and starting with the prefix bytes [prefix, prefix+prefix_len)
 * (prefix_len 0: every key).  cursor->len 0 starts from the first key; on
 * return *cursor is the last key filled (unchanged when n is 0), so the
 * next call goes on from there.  Returns n (>= 0) or an error: KVT_ENULL,
 * KVT_EBADLEN (max 0 or above KVT_SCAN_MAX, prefix_len above
 * KVT_KEY_MAX), KVT_EKEYLEN (cursor->len above KVT_KEY_MAX), KVT_ENONS,
 * -ENOMEM.  n < max: there was nothing more when the call looked.
 *
 * The cursor is the key itself, so it stays valid across puts, deletes,
 * eviction, restarts and stores: pages never repeat a key, and a key
 * present (in DRAM or SSD) from the first call to the last is returned
 * exactly once.  Keys put or deleted meanwhile may or may not be.  A key
 * being written (not yet visible) is not listed; a block both in DRAM
 * and on SSD is listed once.  The remote and shared tiers are not
 * listed: they hold other stores' keys too, and have no index here.
 *
 * Cost: every call walks the DRAM and SSD indexes whole (every
 * namespace's entries, one shard lock at a time, nothing read from disk)
 * and keeps the 2*max smallest candidates: O(N log max) for N entries
 * in the store, per page.  Meant for administration and object-store
 * listings, not for the data path.  Any thread.
 */
#define KVT_SCAN_MAX 100000
int64_t kvt_scan(struct kvt_store *store, uint32_t ns, struct kvt_key *cursor,
		 const void *prefix, size_t prefix_len, struct kvt_key *keys, size_t max);

/* ------------------------------------------------------------------------
 * Registering the DRAM tier's memory with a device (the CUDA module)
 *
 * A module that wants the DRAM arena's regions registered with a device
 * driver (libkvtier_cuda's kvt_cuda_register_store: cudaHostRegister, so
 * host-device copies are DMA straight from DRAM) installs a hook.  The
 * store calls hook->attach once per arena region (base, len: page
 * aligned, mapped from kvt_store_open to kvt_store_close) now, and
 * hook->detach for each attached region at kvt_store_close, before the
 * regions are unmapped.  The store copies *hook; hook->name (static
 * storage) and ctx must outlive the store's close.  Stats: dram.registered
 * is hook->name once every region is attached, else "not registered";
 * dram.registered_bytes the bytes attached.
 *
 * Returns 0; KVT_ENULL; KVT_ECLOSED (store not open); KVT_EBUSY (a hook is
 * already installed); KVT_ETOOBIG (more than 256 regions); or the first attach error, after detaching the
 * regions already attached (no hook is then installed).  Call from one
 * thread, not concurrently with kvt_store_close.
 */
struct kvt_region_hook {
	const char *name;                                        /* "cuda" */
	int (*attach)(void *ctx, void *base, size_t len);        /* 0 or < 0 */
	void (*detach)(void *ctx, void *base, size_t len);
	void *ctx;
};
int kvt_store_register_regions(struct kvt_store *store, const struct kvt_region_hook *hook);

/* ------------------------------------------------------------------------
 * Statistics
 *
 * kvt_store_stats calls fn once per statistic, in a stable order, with a
 * dotted name ("dram.hits", "mem.meta_bytes", ...) and either a numeric
 * value (str NULL) or a text value (str non-NULL, value 0).  doc/stats.md
 * lists them.  Names and str are valid only during the call.  Counters
 * are read without stopping the store, so they are each exact but not a
 * single snapshot.  Returns 0, KVT_ENULL, KVT_ECLOSED.  Any thread.
 */
typedef void (*kvt_stats_fn)(void *ctx, const char *name, uint64_t value, const char *str);
int kvt_store_stats(struct kvt_store *store, kvt_stats_fn fn, void *ctx);

/* One numeric statistic by name into *value.  Returns 0, KVT_MISS (no such
 * numeric statistic), KVT_ENULL, KVT_ECLOSED. */
int kvt_store_stat(struct kvt_store *store, const char *name, uint64_t *value);

/*
 * The statistics of one quota group ("quota.<group>.*", as kvt_store_stats
 * reports them), through fn, without walking the store's other statistics
 * or groups: its cost does not grow with the number of groups.  Nothing is
 * reported for a group no limit or namespace has named yet.  With KV
 * events, then the group's KV-events drops: "events.<group>.dropped"
 * (always) and, with a feed of its own (kvt_events_group_endpoint),
 * "events.<group>.sub_resets" (doc/stats.md).  Returns 0,
 * KVT_ENULL, KVT_EOPTVAL (group 0 or >= KVT_QUOTA_GROUPS), KVT_ECLOSED.
 * After open; any thread; fn runs on the calling thread.
 */
int kvt_quota_stats(struct kvt_store *store, uint32_t group, kvt_stats_fn fn, void *ctx);

/*
 * The statistics of one namespace ("ns.<ns>.*", as kvt_store_stats reports
 * them: doc/stats.md "ns"), through fn, without walking the others.
 * Nothing is reported for a namespace without a row of its own (an id past
 * option stats.namespaces is counted in the shared "other" row, which is
 * not this namespace's alone) or when the option is 0.  Returns 0,
 * KVT_ENULL, KVT_ENONS (not registered), KVT_ECLOSED.  After open; any
 * thread; fn runs on the calling thread.
 */
int kvt_ns_stats(struct kvt_store *store, uint32_t ns, kvt_stats_fn fn, void *ctx);

/*
 * Publish quota group's KV events (those of its namespaces, and clears of
 * every namespace) on a ZeroMQ PUB socket of its own at endpoint, bound or
 * connected as events.endpoint is; NULL or "" closes it.  Each feed
 * numbers its messages from 0.  A subscriber of the group's feed learns
 * nothing of other groups' blocks (a server gives each tenant its own
 * feed this way; doc/kvevents.md "Per tenant"); events.endpoint, if set,
 * still carries everything.  Returns 0, KVT_ENULL, KVT_ECLOSED, KVT_ESTATE
 * (neither events.endpoint nor events.groups=on), KVT_EOPTVAL (group 0 or
 * >= KVT_QUOTA_GROUPS, or an endpoint ZeroMQ refuses: logged), -ENOMEM.
 * After open; any thread.
 */
int kvt_events_group_endpoint(struct kvt_store *store, uint32_t group, const char *endpoint);

/*
 * A replay endpoint for quota group's own feed (kvt_events_group_endpoint):
 * a ZeroMQ ROUTER bound at endpoint, answering vLLM's replay requests
 * with that feed's kept messages only (doc/kvevents.md "Replay"), as
 * events.replay_endpoint does for the main feed, bounded by the same
 * events.replay_max and events.replay_bytes (each feed its own ring).
 * NULL or "" closes it, as closing the feed does; a feed given a new
 * endpoint replays only what it sent since.  Returns 0, KVT_ENULL,
 * KVT_ECLOSED, KVT_ESTATE (the group has no feed, or neither
 * events.endpoint nor events.groups=on), KVT_EOPTVAL (group out of range,
 * or an endpoint ZeroMQ refuses: logged), -ENOMEM.  After open; any
 * thread.
 */
int kvt_events_group_replay_endpoint(struct kvt_store *store, uint32_t group,
				     const char *endpoint);

/*
 * The statistics of the kvtierd behind the store's remote tier (option
 * remote.addr), from its STATS request (doc/protocol.md, doc/kvtierd.md):
 * tenant NULL for the store's own tenant (remote.tenant), "*" for the
 * whole server (needs the admin role), any other name for that tenant
 * (admin).  fn is called once per statistic as for kvt_store_stats, but
 * on the library's remote thread while this call waits.  Synchronous: it
 * returns when the server answered, or after remote.timeout_ms.  Returns
 * 0, KVT_ENULL, KVT_ECLOSED, KVT_ESTATE (no remote tier), KVT_EOPTVAL
 * (tenant empty or longer than 64 bytes), -ENOTCONN (every connection to
 * the server is down), -ETIMEDOUT, a protocol error (e.g. permission
 * refused, kvt_strerror names it), -ENOMEM.  Any thread.
 */
int kvt_remote_stats(struct kvt_store *store, const char *tenant, kvt_stats_fn fn, void *ctx);

/*
 * Which kvtierd of the remote tier hold a prompt's blocks (remote.addrs,
 * doc/cluster.md; works with one remote.addr too): asks every node about
 * every key of keys[0..key_count) (the prompt, in order from its first
 * block), and fills nodes[0..min(max, nodes)) in remote.addrs order (with
 * remote.discover: the member list in force, in the servers' order).
 * *leading (may be NULL) gets the prompt's leading blocks that the nodes
 * placement puts them on hold: what a lookup would find remotely.
 * Returns the number of nodes (may exceed max), KVT_ENULL, KVT_ECLOSED,
 * KVT_ESTATE (no remote tier), KVT_ENONS, KVT_EBADLEN (key_count 0 or
 * above KVT_BATCH_MAX), -ENOMEM.  Synchronous: a node that is down counts
 * as holding nothing; one that does not answer costs remote.timeout_ms.
 * addr stays valid until kvt_store_close.  Any thread.
 */
struct kvt_remote_node {
	const char *addr;   /* as configured */
	uint32_t weight;    /* as configured (1 by default) */
	uint32_t up;        /* 0: every connection to it has failed (operations fail fast) */
	uint64_t placed;    /* blocks of the prompt placement puts on this node (the
			     * first group: on each of its replicas) */
	uint64_t held;      /* blocks of the prompt this node holds, placed there or not */
	uint64_t leading;   /* of *leading, the blocks this node serves */
};
int64_t kvt_remote_who(struct kvt_store *store, uint32_t ns, const struct kvt_key *keys,
		       size_t key_count, struct kvt_remote_node *nodes, size_t max,
		       uint64_t *leading);

/* ------------------------------------------------------------------------
 * Offline check of a store directory (kvtier fsck)
 *
 * kvt_store_fsck reads a store directory that no process has open and
 * checks its SSD tier against doc/ssd-format.md without writing anything:
 * every segment header; every record of each segment's current generation
 * (header CRC and fields, each part's CRC32C over the value bytes; in an
 * open segment up to where recovery's walk ends, which must not be before
 * the checkpoint's write point: doc/ssd.md "Durability and recovery"); that
 * each record's namespace is in the registry with the same digest (else
 * it is an orphan); that every checkpoint entry whose segment is still on
 * disk names a sound record.  Files in ssd/ that are not the store's are
 * warnings.  It also counts the live blocks (newest PUT of a key, not
 * deleted or cleared since) per namespace.
 */
#define KVT_FSCK_DAMAGE 1 /* a record, header or checkpoint fails its checks */
#define KVT_FSCK_ORPHAN 2 /* a sound record nothing can reach (unknown namespace) */
#define KVT_FSCK_WARN   3 /* harmless: a stray file, a leftover checkpoint.tmp, a
			   * write a crash tore past the checkpoint's write point */

struct kvt_fsck {
	/* in: callbacks (each may be NULL), called on the calling thread */
	void (*problem)(void *ctx, int kind /* KVT_FSCK_* */, const char *msg);
	void (*progress)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);
	/* after the walk, once per registered namespace: canon is its
	 * canonical descriptor text (doc/keys.md) */
	void (*ns_info)(void *ctx, uint32_t id, const uint8_t digest[32], const char *canon,
			uint64_t blocks, uint64_t bytes);
	void *ctx;
	/* in: the store's ssd.capacity and ssd.segment, as it will be opened
	 * (recovery judges the files by them: a segment of another size is a
	 * free slot, a checkpoint of another slot count is ignored), or 0:
	 * not known -- the segment size is then that of the segments the
	 * checkpoint names, and the checkpoint's write points are used */
	uint64_t ssd_capacity, ssd_segment;
	/* out */
	uint64_t segments;       /* segment files read */
	uint64_t records;        /* records whose header was sound */
	uint64_t blocks_checked; /* PUT records whose every part passed its CRC */
	uint64_t blocks, bytes;  /* live blocks and their value bytes */
	uint64_t damaged, orphans, warnings;
};

/*
 * Check the store directory at path (see above).  Returns 0 if clean,
 * KVT_ECORRUPT if anything is damaged or orphaned (f->damaged,
 * f->orphans; each reported through f->problem naming the file, offset,
 * seq and key), KVT_ELOCKED (a process has the store open), KVT_ENULL,
 * -ENOMEM, -ENOENT (path is a directory that holds none of a store's
 * files: LOCK, namespaces, ssd/), or -errno (path unreadable).  Any
 * thread; no store handle.
 */
int kvt_store_fsck(const char *path, struct kvt_fsck *f);

/* ------------------------------------------------------------------------
 * The shared tier's directory, offline: what "kvtier gc" runs.
 */

struct kvt_shared_gc_result {
	uint64_t files;          /* block files found */
	uint64_t bytes;          /* their bytes */
	uint64_t removed_files;  /* removed: older than max_age, then oldest first over budget */
	uint64_t removed_bytes;
	uint64_t temp_removed;   /* temporary files of writers that died (older than an hour) */
};

/*
 * Collect the shared directory dir (the "shared.dir" of the stores that use
 * it): remove block files whose modification time (set when written,
 * refreshed by reads) is more than max_age_s seconds ago (0: no age
 * limit), then, while the rest exceeds budget_bytes (0: no limit), the
 * oldest (to 1/64 of their age: a second walk, in memory that does not
 * grow with the tree; doc/shared.md).  Safe while stores use the directory: a store that loses a block
 * sees a miss.  *out (may be NULL) gets the counts.  Returns 0, KVT_ENULL,
 * -ENOMEM, -errno (dir).  Any thread; needs no store.
 */
int kvt_shared_gc(const char *dir, uint64_t budget_bytes, uint64_t max_age_s,
		  struct kvt_shared_gc_result *out);

/*
 * The same for a bucket (the shared.s3_* options of the stores that use
 * it): objects under kvt1/ are listed; age is the object's Last-Modified
 * (when it was written: reads do not refresh it, unlike in a directory);
 * then oldest first over the budget.  endpoint "http(s)://host:port",
 * credentials_file as shared.s3_credentials (NULL: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_REGION from the environment).  Returns 0,
 * KVT_ENULL, KVT_EOPTVAL (credentials missing, or a file others can
 * read), -EACCES (the server refused them), -ENOENT (no such bucket),
 * -ETIMEDOUT / -ECONNREFUSED / -EIO (also a listing that breaks S3's
 * promises, or whose sizes sum past 2^64 bytes: nothing is then deleted
 * by size), -ENOMEM.  Any thread; needs no store.
 */
int kvt_shared_gc_s3(const char *endpoint, const char *bucket, const char *credentials_file,
		     uint64_t budget_bytes, uint64_t max_age_s, struct kvt_shared_gc_result *out);

/* ------------------------------------------------------------------------
 * CRC32C (Castagnoli), as stored with every part: crc = kvt_crc32c(0, p, n)
 * for a whole buffer, chained as kvt_crc32c(crc, next, m).  Any thread.
 */
uint32_t kvt_crc32c(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* KVTIER_H */

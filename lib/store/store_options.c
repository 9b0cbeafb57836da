/*
 * store_options.c - the store's options, as one table (opts[] below): each
 * option's name, type, bounds, default and one line of documentation.
 * The table drives kvt_store_set_option, the defaults kvt_store_create
 * sets, kvt_option_info (which the CLI's "kvtier options" prints and the
 * options fuzz target reads its names from), so adding an option is one
 * line here.  The values live in struct kvt_store (store_int.h) until open
 * hands them to the tiers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"


enum {
	OPT_SIZE,   /* uint64_t: kvt_parse_size, within [min, max] */
	OPT_COUNT,  /* unsigned: kvt_parse_size, within [min, max] */
	OPT_MS_NS,  /* uint64_t nanoseconds, given in ms within [min, max] */
	OPT_STR,    /* char *: non-empty, at most max bytes (0: 4095) */
	OPT_CHOICE, /* int: one of choices ("a|b|c"), stored as vals[i] (or i) */
	OPT_BOOL,   /* bool: choices "false-word|true-word" */
	OPT_TIERS,  /* char *: store.tiers (store_tiers.c) */
	OPT_DEBUG,  /* any state; handled in kvt_store_set_option */
};
enum { CHK_POW2 = 1, CHK_4K = 2, CHK_HTTP = 4 }; /* further checks */

struct opt_def {
	const char *name;
	uint8_t type;
	uint8_t check;
	size_t off;                 /* offsetof(struct kvt_store, the field) */
	uint64_t min, max;
	const char *choices;        /* OPT_CHOICE, OPT_BOOL */
	const int *vals;            /* OPT_CHOICE: values by choice; NULL: the index */
	const char *def;            /* default as an option value; NULL: none set */
	const char *doc;            /* one line */
};

#define XSTR(x) #x
#define STR(x) XSTR(x)
#define F(field) offsetof(struct kvt_store, field)
#define U32MAX UINT32_MAX

static const int io_vals[] = { IO_BACKEND_AUTO, IO_BACKEND_URING, IO_BACKEND_PSYNC,
			       IO_BACKEND_PSYNC };
static const int policy_vals[] = { DRAM_POLICY_S3FIFO, DRAM_POLICY_LRU, DRAM_POLICY_PREFIX,
				    DRAM_POLICY_PREFIX_LEARN, DRAM_POLICY_PREFIX_ADAPT };
static const int huge_vals[] = { DRAM_HUGE_AUTO, DRAM_HUGE_THP, DRAM_HUGE_OFF };
static const int ssd_align_vals[] = { 0, 512, 4096 }; /* ssd.dio_align: 0 auto */
static const int ssd_format_vals[] = { 2, 3 }; /* ssd.format */
static const int ssd_admit_vals[] = { SSD_ADMIT_SECOND, SSD_ADMIT_ALWAYS, SSD_ADMIT_VICTIM };
static const int shared_admit_vals[] = { SHARED_ADMIT_PERSISTENT, SHARED_ADMIT_ALWAYS };
static const int format_vals[] = { KVEVENTS_MAP, KVEVENTS_ARRAY };
static const int flag_vals[] = { REMOTE_FLAG_OFF, REMOTE_FLAG_ON, REMOTE_FLAG_AUTO };

static const struct opt_def opts[] = {
	/* name, type, check, field, min, max, choices, vals, default, doc */
	{ "path", OPT_STR, 0, F(path), 0, 0, NULL, NULL, NULL,
	  "store directory (namespaces, SSD segments); none: memory only" },
	{ "workers", OPT_COUNT, 0, F(worker_count), 1, MAX_WORKERS, NULL, NULL, "1",
	  "threads running deferred requests (KVT_F_DEFER, prefetch, flush)" },
	{ "store.tiers", OPT_TIERS, 0, F(tiers_opt), 0, 0, NULL, NULL, STORE_TIERS_DEFAULT,
	  "order in which requests walk the tiers below DRAM (doc/decisions.md)" },
	{ "stats.namespaces", OPT_COUNT, 0, F(nsstat_rows), 0, NSSTAT_MAX, NULL, NULL,
	  STR(NSSTAT_DEFAULT),
	  "namespaces counted each in their own row (ns.<id>.*); the rest share ns.other; 0: off" },
	{ "debug.fail_alloc", OPT_DEBUG, 0, 0, 0, UINT64_MAX, NULL, NULL, NULL,
	  "tests: fail the Nth metadata allocation from now (0: never)" },
	{ "debug.pause_workers", OPT_DEBUG, 0, 0, 0, 1, NULL, NULL, NULL,
	  "tests: 1 holds deferred requests queued, 0 lets them run" },

	{ "dram.capacity", OPT_SIZE, 0, F(dram_cfg.capacity), 0, UINT64_MAX, NULL, NULL, "256M",
	  "bytes of DRAM arena; 0: no DRAM tier" },
	{ "dram.chunk", OPT_SIZE, CHK_POW2, F(dram_cfg.chunk), 4096, 2u << 20, NULL, NULL, "64K",
	  "allocation chunk, a power of two" },
	{ "dram.shards", OPT_COUNT, 0, F(dram_cfg.shards), 1, 256, NULL, NULL, NULL,
	  "index and eviction shards; unset: chosen from the CPUs" },
	{ "dram.policy", OPT_CHOICE, 0, F(dram_cfg.policy), 0, 0, "s3fifo|lru|prefix|prefix-learn|prefix-adapt",
	  policy_vals, "prefix-adapt", "eviction policy (doc/policies.md)" },
	{ "dram.victim_wait_ms", OPT_COUNT, 0, F(dram_cfg.victim_wait_ms), 0, 60000, NULL, NULL,
	  "20", "longest a put waits for the disk before victim write-downs are shed" },
	{ "dram.hash_seed", OPT_SIZE, 0, F(dram_cfg.hash_seed), 0, UINT64_MAX, NULL, NULL, NULL,
	  "index hash secret; unset or 0: random per open (a fixed one lets clients aim keys at a bucket; for replays and tests)" },
	{ "dram.hugepages", OPT_CHOICE, 0, F(dram_cfg.hugepages), 0, 0, "auto|thp|off", huge_vals,
	  "auto", "huge pages for the arena" },
	{ "dram.prefault", OPT_BOOL, 0, F(dram_cfg.prefault), 0, 0, "off|on", NULL, "on",
	  "touch the arena at open" },

	{ "ssd.capacity", OPT_SIZE, 0, F(ssd_cfg.capacity), 0, UINT64_MAX, NULL, NULL, "0",
	  "bytes of SSD segments; 0: no SSD tier" },
	{ "ssd.segment", OPT_SIZE, CHK_4K, F(ssd_cfg.seg_size), 1u << 20, UINT64_C(16) << 30,
	  NULL, NULL, "256M", "bytes per segment: a multiple of 4096 (4K), at least 1 MiB" },
	{ "ssd.io", OPT_CHOICE, 0, F(ssd_cfg.backend), 0, 0, "auto|uring|psync|pread", io_vals,
	  "auto", "I/O engine" },
	{ "ssd.dio_align", OPT_CHOICE, 0, F(ssd_cfg.dio_align), 0, 0, "auto|512|4096",
	  ssd_align_vals, "auto",
	  "records' alignment: the device's O_DIRECT alignment (auto; 4096 on a 4Kn drive), or forced (doc/ssd.md)" },
	{ "ssd.format", OPT_CHOICE, 0, F(ssd_cfg.format), 0, 0, "2|3", ssd_format_vals, "3",
	  "layout of the segments this open starts: 3 (small puts share one header per batch) or 2 (a header per record; what a kvtier before format 3 can open), doc/ssd.md" },
	{ "ssd.io_depth", OPT_COUNT, 0, F(ssd_cfg.io_depth), 1, 4096, NULL, NULL, "64",
	  "I/O engine queue depth" },
	{ "ssd.admission", OPT_CHOICE, 0, F(ssd_cfg.admission), 0, 0, "second|always|victim",
	  ssd_admit_vals, "victim",
	  "write a block down when DRAM evicts it (victim), on its second access, or always" },
	{ "ssd.writedown_max", OPT_SIZE, 0, F(ssd_cfg.wd_max_bytes), 1u << 20, UINT64_MAX, NULL,
	  NULL, "256M", "write-down bytes queued before shedding (at most DRAM/4)" },
	{ "ssd.writedown_window", OPT_SIZE, 0, F(ssd_cfg.wd_window_bytes), 256u << 10, 1u << 30,
	  NULL, NULL, "8M",
	  "write-down bytes placed in the log and in flight; a delete waits for at most these" },
	{ "ssd.writedown_wait_ms", OPT_MS_NS, 0, F(ssd_cfg.wd_wait_ns), 0, 3600000, NULL, NULL,
	  "2000", "a persistent namespace's put waits this long for write-down room, then fails" },
	{ "ssd.debug_write_delay_ms", OPT_MS_NS, 0, F(ssd_cfg.debug_delay_ns), 0, 60000, NULL, NULL,
	  NULL, "tests: the writer waits this long before each write-down (a slow device)" },
	{ "ssd.debug_check_align", OPT_BOOL, 0, F(ssd_cfg.debug_check_align), 0, 0, "off|on", NULL,
	  "off", "tests: check every SSD I/O against the records' alignment (counted, doc/ssd.md)" },
	{ "ssd.first_hit", OPT_BOOL, 0, F(ssd_cfg.first_hit_cold), 0, 0, "promote|cold", NULL,
	  "cold", "victim: a block's first read from SSD leaves it there, the second moves it to DRAM (cold), or every read promotes" },
	{ "ssd.young_reads_pct", OPT_COUNT, 0, F(ssd_cfg.young_pct), 0, 100, NULL, NULL, "75",
	  "victim, first_hit cold: a second read of a record in the newest % of the log leaves it there too (0: off)" },
	{ "ssd.put_touch", OPT_BOOL, 0, F(ssd_cfg.put_touch), 0, 0, "off|on", NULL, "off",
	  "a put of a block the SSD holds counts as a read of it: its record is kept at reclamation" },
	{ "ssd.adapt_writedown", OPT_BOOL, 0, F(ssd_cfg.adapt_wd), 0, 0, "off|on", NULL, "on",
	  "victim, prefix-adapt: its simulations of DRAM + SSD decide the write-down once the SSD is full (doc/policies.md)" },
	{ "ssd.checkpoint_seals", OPT_COUNT, 0, F(ssd_cfg.ckpt_seals), 0, 1000000, NULL, NULL,
	  "8", "checkpoint the index after this many sealed segments" },
	{ "ssd.high_watermark", OPT_COUNT, 0, F(ssd_cfg.high_pct), 0, 100, NULL, NULL, "100",
	  "evict segments above this % used" },
	{ "ssd.low_watermark", OPT_COUNT, 0, F(ssd_cfg.low_pct), 0, 100, NULL, NULL, "100",
	  "... down to this % used" },
	{ "ssd.reinsert_pct", OPT_COUNT, 0, F(ssd_cfg.reinsert_pct), 0, 100, NULL, NULL, "80",
	  "% of an evicted segment's read blocks written again" },
	{ "ssd.reuse", OPT_BOOL, 0, F(ssd_cfg.reuse_progressive), 0, 0, "whole|progressive", NULL,
	  "progressive", "a reclaimed segment's records stay readable until new writes reach them (progressive), or go at once (whole)" },
	{ "ssd.close_writedown_ms", OPT_SIZE, 0, F(ssd_cfg.close_wd_ms), 0, 3600000, NULL, NULL,
	  "10000", "a graceful close writes DRAM's blocks down for at most this long" },
	{ "ssd.enospc_retry_ms", OPT_MS_NS, 0, F(ssd_cfg.retry_ns), 0, 3600000, NULL, NULL,
	  "5000", "after ENOSPC, try writing again after this long; and how often a log a full disk capped tries for more segments" },

	{ "remote.addr", OPT_STR, 0, F(remote_cfg.addr), 0, 0, NULL, NULL, NULL,
	  "one kvtierd, host:port (doc/remote.md)" },
	{ "remote.addrs", OPT_STR, 0, F(remote_cfg.addrs), 0, 0, NULL, NULL, NULL,
	  "several kvtierd, host:port[=weight],... (doc/cluster.md)" },
	{ "remote.discover", OPT_STR, 0, F(remote_cfg.discover), 0, 0, NULL, NULL, NULL,
	  "read the member list from this kvtierd or etcd (doc/members.md)" },
	{ "remote.group", OPT_COUNT, 0, F(remote_cfg.group_blocks), 1, KVT_BATCH_MAX, NULL, NULL,
	  STR(REMOTE_DEF_GROUP_BLOCKS), "blocks of a prompt placed together" },
	{ "remote.hot_replicas", OPT_COUNT, 0, F(remote_cfg.hot_replicas), 1,
	  REMOTE_HOT_REPLICAS_MAX, NULL, NULL, STR(REMOTE_DEF_HOT_REPLICAS),
	  "members holding a prompt's first group" },
	{ "remote.hot_forward", OPT_CHOICE, 0, F(remote_cfg.hot_forward), 0, 0, "off|on|auto",
	  flag_vals, "auto",
	  "replicated puts go to one member, which forwards them: to members that announce it (auto), always, or never (doc/cluster.md)" },
	{ "remote.crc_at_send", OPT_BOOL, 0, F(remote_cfg.crc_at_send), 0, 0, "off|on", NULL,
	  "off", "a put's CRC32C made by the I/O thread just before it sends (doc/remote.md)" },
	{ "remote.retain_hint", OPT_CHOICE, 0, F(remote_cfg.retain_hint), 0, 0, "off|on|auto",
	  flag_vals, "auto",
	  "puts carry KVT_F_RETAIN to the servers: those that announce it (auto), all, or none (doc/protocol.md)" },
	{ "remote.anchor_slots", OPT_COUNT, 0, F(remote_cfg.anchor_slots), 0, 1u << 26, NULL,
	  NULL, STR(REMOTE_DEF_ANCHOR_SLOTS), "remembered key -> group anchors; 0: none" },
	{ "remote.refresh_ms", OPT_COUNT, 0, F(remote_cfg.refresh_ms), 0, 3600000, NULL, NULL,
	  STR(REMOTE_DEF_REFRESH_MS), "re-read the member list this often; 0: never" },
	{ "remote.members_max", OPT_COUNT, 0, F(remote_cfg.members_max), 1, REMOTE_MEMBERS_CAP,
	  NULL, NULL, STR(REMOTE_DEF_MEMBERS_MAX),
	  "with remote.discover: a server's member list of more members is refused" },
	{ "remote.warm_ms", OPT_COUNT, 0, F(remote_cfg.warm_ms), 0, 3600000, NULL, NULL,
	  STR(REMOTE_DEF_WARM_MS), "after a join, reads try the previous owner too; 0: off" },
	{ "remote.tenant", OPT_STR, 0, F(remote_cfg.tenant), 0, 64, NULL, NULL, NULL,
	  "tenant to authenticate as" },
	{ "remote.secret_file", OPT_STR, 0, F(remote_cfg.secret_file), 0, 0, NULL, NULL, NULL,
	  "file holding the tenant's secret" },
	{ "remote.conns", OPT_COUNT, 0, F(remote_cfg.conns), 1, 64, NULL, NULL,
	  STR(REMOTE_DEF_CONNS), "connections per server" },
	{ "remote.conns_max", OPT_COUNT, 0, F(remote_cfg.conns_max), 1, 64, NULL, NULL,
	  STR(REMOTE_DEF_CONNS_MAX), "connections per server once values average 512 KiB or more" },
	{ "remote.io_threads", OPT_COUNT, 0, F(remote_cfg.io_threads), 1, REMOTE_IO_THREADS_MAX,
	  NULL, NULL, STR(REMOTE_DEF_IO_THREADS),
	  "I/O threads per server, the connections split between them" },
	{ "remote.timeout_ms", OPT_COUNT, 0, F(remote_cfg.timeout_ms), 1, 3600000, NULL, NULL,
	  STR(REMOTE_DEF_TIMEOUT_MS), "deadline of one operation" },
	{ "remote.connect_timeout_ms", OPT_COUNT, 0, F(remote_cfg.connect_timeout_ms), 1,
	  3600000, NULL, NULL, STR(REMOTE_DEF_CONNECT_TIMEOUT_MS), "deadline of a connect" },
	{ "remote.backoff_ms", OPT_COUNT, 0, F(remote_cfg.backoff_ms), 1, 3600000, NULL, NULL,
	  STR(REMOTE_DEF_BACKOFF_MS), "first reconnect delay, doubling" },
	{ "remote.backoff_max_ms", OPT_COUNT, 0, F(remote_cfg.backoff_max_ms), 1, 3600000, NULL,
	  NULL, STR(REMOTE_DEF_BACKOFF_MAX_MS), "... up to this" },
	{ "remote.value_max", OPT_SIZE, 0, F(remote_cfg.value_max), 1, KVT_VALUE_MAX, NULL, NULL,
	  "256M", "largest value a server may answer a get with (more: the connection is dropped)" },
	{ "remote.batch", OPT_COUNT, 0, F(remote_cfg.batch), 1, KVT_BATCH_MAX, NULL, NULL,
	  STR(REMOTE_DEF_BATCH), "most items in one frame" },
	{ "remote.put_local", OPT_CHOICE, 0, F(remote_cfg.put_local), 0, 0, "always|never|auto", NULL,
	  "auto", "does a put also land in local DRAM (always; never: the pod store only; "
	  "auto: not while few recent puts are read back)" },
	{ "remote.tls", OPT_BOOL, 0, F(remote_cfg.tls), 0, 0, "off|on", NULL, NULL,
	  "TLS to the servers" },
	{ "remote.tls_ca", OPT_STR, 0, F(remote_cfg.tls_ca), 0, 0, NULL, NULL, NULL,
	  "CA file to verify servers with; unset: the system's" },
	{ "remote.tls_cert", OPT_STR, 0, F(remote_cfg.tls_cert), 0, 0, NULL, NULL, NULL,
	  "client certificate (mutual TLS)" },
	{ "remote.tls_key", OPT_STR, 0, F(remote_cfg.tls_key), 0, 0, NULL, NULL, NULL,
	  "client certificate's key" },
	{ "remote.tls_server_name", OPT_STR, 0, F(remote_cfg.tls_server_name), 0, 0, NULL, NULL,
	  NULL, "name the server certificate must carry; unset: the host" },

	{ "shared.dir", OPT_STR, 0, F(shared_cfg.dir), 0, 0, NULL, NULL, NULL,
	  "shared tier on a directory of a shared file system (doc/shared.md)" },
	{ "shared.s3_endpoint", OPT_STR, CHK_HTTP, F(shared_cfg.s3_endpoint), 0, 0, NULL, NULL,
	  NULL, "shared tier on an S3 bucket: http:// or https:// endpoint" },
	{ "shared.s3_bucket", OPT_STR, 0, F(shared_cfg.s3_bucket), 0, 0, NULL, NULL, NULL,
	  "the bucket" },
	{ "shared.s3_region", OPT_STR, 0, F(shared_cfg.s3_region), 0, 0, NULL, NULL, NULL,
	  "the region signed for" },
	{ "shared.s3_credentials", OPT_STR, 0, F(shared_cfg.s3_credentials), 0, 0, NULL, NULL,
	  NULL, "file with the access key and secret" },
	{ "shared.s3_conns", OPT_COUNT, 0, F(shared_cfg.s3_conns), 1, 64, NULL, NULL, NULL,
	  "connections to the endpoint; unset: " STR(SHARED_DEF_S3_CONNS) },
	{ "shared.s3_timeout_ms", OPT_COUNT, 0, F(shared_cfg.s3_timeout_ms), 1, 3600 * 1000,
	  NULL, NULL, NULL, "per request; unset: " STR(SHARED_DEF_S3_TIMEOUT_MS) },
	{ "shared.s3_attempts", OPT_COUNT, 0, F(shared_cfg.s3_attempts), 1, 10, NULL, NULL, NULL,
	  "tries of a request that failed transiently (1: no retry); unset: "
	  STR(SHARED_DEF_S3_ATTEMPTS) },
	{ "shared.s3_retry_base_ms", OPT_COUNT, 0, F(shared_cfg.s3_retry_base_ms), 1, 60000, NULL,
	  NULL, NULL, "retry backoff base (full jitter); unset: " STR(SHARED_DEF_S3_RETRY_BASE_MS) },
	{ "shared.s3_part_size", OPT_SIZE, 0, F(shared_cfg.s3_part_size), UINT64_C(5) << 20,
	  UINT64_C(5) << 30, NULL, NULL, NULL, "multipart upload part size; unset: 64M" },
	{ "shared.s3_sign_payload", OPT_BOOL, 0, F(shared_cfg.s3_sign_payload), 0, 0, "off|on",
	  NULL, NULL, "sign the payload's SHA-256 (else UNSIGNED-PAYLOAD)" },
	{ "shared.budget", OPT_SIZE, 0, F(shared_cfg.budget), 0, UINT64_MAX, NULL, NULL, NULL,
	  "bytes kvtier gc keeps the tier under; unset: no limit" },
	{ "shared.max_age", OPT_SIZE, 0, F(shared_cfg.max_age_s), 0, UINT64_C(1) << 40, NULL,
	  NULL, NULL, "seconds kvtier gc keeps a block; unset: no limit" },
	{ "shared.threads", OPT_COUNT, 0, F(shared_cfg.threads), 1, 64, NULL, NULL,
	  STR(SHARED_DEF_THREADS), "pool threads (parallel stats and I/O)" },
	{ "shared.writedown_max", OPT_SIZE, 0, F(shared_cfg.wd_max_bytes), 0, UINT64_MAX, NULL,
	  NULL, "256M", "write-down bytes queued before shedding (at most DRAM/4)" },
	{ "shared.admission", OPT_CHOICE, 0, F(shared_cfg.admission), 0, 0, "persistent|always",
	  shared_admit_vals, NULL, "write puts through for persistent namespaces, or all" },
	{ "shared.o_direct", OPT_BOOL, 0, F(shared_cfg.direct), 0, 0, "off|auto", NULL, "auto",
	  "try O_DIRECT on the shared file system" },
	{ "shared.debug_write_delay_ms", OPT_MS_NS, 0, F(shared_cfg.debug_delay_ns), 0, 60000,
	  NULL, NULL, NULL, "tests: a pool thread waits this long before each write-down" },
	{ "shared.debug_read_delay_ms", OPT_MS_NS, 0, F(shared_cfg.debug_read_delay_ns), 0,
	  60000, NULL, NULL, NULL,
	  "tests: a promotion waits this long between its header read and its DRAM reservation" },

	{ "events.endpoint", OPT_STR, 0, F(events_cfg.endpoint), 0, 0, NULL, NULL, NULL,
	  "publish KV events on this ZeroMQ endpoint (doc/kvevents.md)" },
	{ "events.groups", OPT_BOOL, 0, F(events_cfg.groups), 0, 0, "off|on", NULL, "off",
	  "publish each quota group's events on its own endpoint (kvt_events_group_endpoint)" },
	{ "events.topic", OPT_STR, 0, F(events_cfg.topic), 0, 255, NULL, NULL, NULL,
	  "topic of the events" },
	{ "events.medium", OPT_STR, 0, F(events_cfg.medium), 0, 64, NULL, NULL, NULL,
	  "medium named in the events" },
	{ "events.format", OPT_CHOICE, 0, F(events_cfg.format), 0, 0, "map|array", format_vals,
	  NULL, "msgpack layout of an event" },
	{ "events.batch_ms", OPT_COUNT, 0, F(events_cfg.batch_ms), 0, 10000, NULL, NULL,
	  STR(KVEVENTS_DEF_BATCH_MS), "most time an event waits for its batch" },
	{ "events.queue_max", OPT_COUNT, 0, F(events_cfg.queue_max), 1, 1u << 24, NULL, NULL,
	  STR(KVEVENTS_DEF_QUEUE_MAX), "events queued before new ones are dropped" },
	{ "events.max_subscribers", OPT_COUNT, 0, F(events_cfg.sub_max), 1, 65536, NULL, NULL,
	  STR(KVEVENTS_DEF_SUB_MAX), "connections a bound events socket holds at once" },
	{ "events.replay_endpoint", OPT_STR, 0, F(events_cfg.replay_endpoint), 0, 255, NULL,
	  NULL, NULL, "bind vLLM's replay ROUTER socket here (needs events.endpoint)" },
	{ "events.replay_max", OPT_COUNT, 0, F(events_cfg.replay_max), 1, 1u << 20, NULL, NULL,
	  STR(KVEVENTS_DEF_REPLAY_MAX), "messages kept for replay" },
	{ "events.replay_bytes", OPT_SIZE, 0, F(events_cfg.replay_bytes), 4096, UINT64_C(1) << 32,
	  NULL, NULL, "16M", "payload bytes kept for replay at most" },
};

/* Index of value among choices ("a|b|c"), or -1. */
static int opt_choice_index(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	int i = 0;
	for (const char *p = choices;; i++) {
		size_t len = strcspn(p, "|");
		if (len == vl && memcmp(p, v, len) == 0)
			return i;
		if (!p[len])
			return -1;
		p += len + 1;
	}
}

/* A string option: non-empty, at most max bytes (0: under 4096); replaces *out. */
static int opt_str(const char *v, size_t max, char **out)
{
	char *p;
	size_t len = strlen(v);
	if (!len || len >= 4096 || (max && len > max))
		return KVT_EOPTVAL;
	p = strdup(v);
	if (!p)
		return -ENOMEM;
	free(*out);
	*out = p;
	return 0;
}

/* store.tiers: tier names separated by commas, each at most once. */
static int opt_tiers_check(const char *v)
{
	unsigned n = 0;
	for (const char *p = v; *p;) {
		size_t len = strcspn(p, ",");
		if (len == 0 || len > 32 || ++n > STORE_TIERS_MAX)
			return KVT_EOPTVAL;
		for (const char *q = v; q < p;) {
			size_t l = strcspn(q, ",");
			if (l == len && memcmp(p, q, len) == 0)
				return KVT_EOPTVAL;
			q += l + 1;
		}
		p += len;
		if (*p == ',' && !*++p)
			return KVT_EOPTVAL;
	}
	return 0;
}

/* Set option o of s from its text v. */
static int opt_set(struct kvt_store *s, const struct opt_def *o, const char *v)
{
	void *field = (char *)s + o->off;
	uint64_t n = 0;
	int i;

	switch (o->type) {
	case OPT_SIZE:
	case OPT_COUNT:
	case OPT_MS_NS:
		if (kvt_parse_size(v, &n) < 0 || n < o->min || n > o->max)
			return KVT_EOPTVAL;
		if (((o->check & CHK_POW2) && (n & (n - 1))) ||
		    ((o->check & CHK_4K) && n % 4096))
			return KVT_EOPTVAL;
		if (o->type == OPT_COUNT)
			*(unsigned *)field = (unsigned)n;
		else if (o->type == OPT_MS_NS)
			*(uint64_t *)field = n * 1000000;
		else if (o->check & CHK_POW2)
			*(uint32_t *)field = (uint32_t)n; /* dram.chunk */
		else
			*(uint64_t *)field = n;
		return 0;
	case OPT_STR:
		if ((o->check & CHK_HTTP) && strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
			return KVT_EOPTVAL;
		return opt_str(v, (size_t)o->max, field);
	case OPT_TIERS:
		if (opt_tiers_check(v) < 0)
			return KVT_EOPTVAL;
		return opt_str(v, 0, field);
	case OPT_CHOICE:
		if ((i = opt_choice_index(o->choices, v)) < 0)
			return KVT_EOPTVAL;
		*(int *)field = o->vals ? o->vals[i] : i;
		return 0;
	case OPT_BOOL:
		if ((i = opt_choice_index(o->choices, v)) < 0)
			return KVT_EOPTVAL;
		*(bool *)field = i == 1;
		return 0;
	}
	return KVT_EOPTION;
}

int kvt_store_set_option(struct kvt_store *s, const char *name, const char *value)
{
	const struct opt_def *o = NULL;
	uint64_t n;
	int ret;

	if (!s || !name || !value)
		return KVT_ENULL;
	for (unsigned i = 0; i < KVT_ARRAY_LEN(opts) && !o; i++)
		if (strcmp(name, opts[i].name) == 0)
			o = &opts[i];
	if (o && strcmp(name, "debug.pause_workers") == 0) {
		if (strcmp(value, "0") && strcmp(value, "1"))
			return KVT_EOPTVAL;
		pthread_mutex_lock(&s->work_lock);
		s->paused = value[0] == '1';
		pthread_cond_broadcast(&s->work_cond);
		pthread_mutex_unlock(&s->work_lock);
		return 0;
	}
	if (o && strcmp(name, "debug.fail_alloc") == 0) {
		if ((ret = kvt_parse_size(value, &n)) < 0)
			return ret;
		kvt_mem_fail_nth(&s->mem, (int64_t)n);
		return 0;
	}
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	return o ? opt_set(s, o, value) : KVT_EOPTION;
}

int kvt_option_info(unsigned i, struct kvt_option *out)
{
	static const char *const types[] = {
		[OPT_SIZE] = "size", [OPT_COUNT] = "count", [OPT_MS_NS] = "ms",
		[OPT_STR] = "string", [OPT_CHOICE] = "choice", [OPT_BOOL] = "choice",
		[OPT_TIERS] = "list", [OPT_DEBUG] = "count",
	};
	const struct opt_def *o;
	if (!out)
		return KVT_ENULL;
	if (i >= KVT_ARRAY_LEN(opts))
		return KVT_MISS;
	o = &opts[i];
	out->name = o->name;
	out->type = types[o->type];
	out->def = o->def;
	out->values = o->choices;
	out->min = o->type == OPT_STR ? 0 : o->min;
	out->max = o->type == OPT_STR ? (o->max ? o->max : 4095) : o->max;
	out->doc = o->doc;
	return 0;
}

int kvt_store_set_log(struct kvt_store *s, kvt_log_fn fn, void *ctx, int min_level)
{
	if (!s)
		return KVT_ENULL;
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	s->log.fn = fn;
	s->log.ctx = ctx;
	s->log.min_level = min_level;
	return 0;
}

/* Every option's default (kvt_store_create): the table's, through the
 * same setter as kvt_store_set_option, so a default is written once. */
void store_options_init(struct kvt_store *s)
{
	for (unsigned i = 0; i < KVT_ARRAY_LEN(opts); i++)
		if (opts[i].def && opts[i].type != OPT_DEBUG)
			(void)opt_set(s, &opts[i], opts[i].def);
	s->log.min_level = KVT_LOG_INFO;
}

/* What the options own (kvt_store_destroy). */
void store_options_free(struct kvt_store *s)
{
	free(s->path);
	free(s->remote_cfg.addr);
	free(s->remote_cfg.addrs);
	free(s->remote_cfg.discover);
	free(s->remote_cfg.tenant);
	free(s->remote_cfg.secret_file);
	free(s->remote_cfg.tls_ca);
	free(s->remote_cfg.tls_cert);
	free(s->remote_cfg.tls_key);
	free(s->remote_cfg.tls_server_name);
	free(s->shared_cfg.dir);
	free(s->shared_cfg.s3_endpoint);
	free(s->shared_cfg.s3_bucket);
	free(s->shared_cfg.s3_region);
	free(s->shared_cfg.s3_credentials);
	free(s->events_cfg.endpoint);
	free(s->events_cfg.topic);
	free(s->events_cfg.medium);
	free(s->events_cfg.replay_endpoint);
	free(s->tiers_opt);
}

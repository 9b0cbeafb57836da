/*
 * metrics.c - what only the daemon measures -- request latency
 * histograms, per-tenant counters, RESP command and HTTP request counts --
 * and the /metrics page in the Prometheus text format (doc/metrics.md
 * lists every metric; the server's own counters come from counters.c's
 * table, which STATS reads too; the KV-events ones, while events are on,
 * from the store's events.* statistics, each quota group's drops named by
 * its tenant); the --metrics-token file.  The HTTP listener that serves
 * the page is httpd.c.
 *
 * Rendering reads kvt_store_stats and relaxed atomic counters; it never
 * waits for the store.
 *
 * Latency: libkvtier does not time requests, so the daemon does, from a
 * RESP command's parse to its reply being queued (read: GET, MGET,
 * EXISTS; write: SET, MSET, DEL): what a client sees minus the network.
 *
 * Threads: rendering and histogram updates on any loop thread.
 * Counters are relaxed atomics.  The per-tenant counters are the
 * tenants table's (tstat.c), walked under its lock: an entry may be
 * freed once its tenant left the tenants file and no connection holds
 * it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kvtierd.h"
#include "repair.h"

/* Upper bounds of the latency buckets, in ns (Prometheus "le" in seconds). */
static const uint64_t metrics_le_ns[] = {
	10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
	10000000, 25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
	2500000000ull, 10000000000ull,
};
#define METRICS_BUCKETS (sizeof(metrics_le_ns) / sizeof(metrics_le_ns[0]))

struct metrics_hist {
	_Atomic uint64_t bucket[METRICS_BUCKETS + 1]; /* last: +Inf only */
	_Atomic uint64_t count, sum_ns;
};

struct kvtd_metrics {
	struct metrics_hist lat[KVTD_LAT__COUNT][KVT_TIER_COUNT];
	_Atomic uint64_t resp_commands, resp_errors;
	_Atomic uint64_t s3_requests[KVTD_S3_OPS], s3_errors[KVTD_S3_OPS]; /* s3d.c, by op */
	_Atomic uint64_t http_requests, http_denied, http_bad;
};


#define MADD(field, n) atomic_fetch_add_explicit(&(field), (uint64_t)(n), memory_order_relaxed)
#define MGET(field) atomic_load_explicit(&(field), memory_order_relaxed)

int kvtd_metrics_init(struct kvtd_server *srv)
{
	struct kvtd_metrics *m = calloc(1, sizeof(*m));

	if (!m || kvtd_tstat_init(srv) < 0) {
		free(m);
		return -ENOMEM;
	}
	srv->metrics = m;
	return 0;
}

void kvtd_metrics_free(struct kvtd_server *srv)
{
	struct kvtd_metrics *m = srv->metrics;

	if (!m)
		return;
	kvtd_tstat_free(srv);
	free(m);
	srv->metrics = NULL;
}

void kvtd_metrics_latency(struct kvtd_server *srv, int kind, int tier, uint64_t ns)
{
	struct metrics_hist *h;
	unsigned b = 0;

	if (!srv->metrics || kind < 0 || kind >= KVTD_LAT__COUNT || tier < 0 ||
	    tier >= KVT_TIER_COUNT)
		return;
	h = &srv->metrics->lat[kind][tier];
	while (b < METRICS_BUCKETS && ns > metrics_le_ns[b])
		b++;
	MADD(h->bucket[b], 1);
	MADD(h->count, 1);
	MADD(h->sum_ns, ns);
}

void kvtd_metrics_resp(struct kvtd_server *srv, bool error)
{
	if (!srv->metrics)
		return;
	MADD(srv->metrics->resp_commands, 1);
	if (error)
		MADD(srv->metrics->resp_errors, 1);
}

/* The S3 listener's operations, in s3d.c's enum s3d_op order: labels of
 * kvtier_s3_requests_total (doc/s3.md). */
const char *const kvtd_s3_op_names[KVTD_S3_OPS] = {
	"none", "ListBuckets", "CreateBucket", "HeadBucket", "DeleteBucket",
	"GetBucketLocation", "PutObject", "GetObject", "HeadObject", "DeleteObject",
	"DeleteObjects", "CopyObject", "CreateMultipartUpload", "UploadPart",
	"CompleteMultipartUpload", "AbortMultipartUpload", "ListObjects", "ListObjectsV2",
	"UploadPartCopy", "ListParts", "ListMultipartUploads", "NotImplemented",
};

void kvtd_metrics_s3(struct kvtd_server *srv, int op, bool error)
{
	if (!srv->metrics || op < 0 || op >= KVTD_S3_OPS)
		return;
	MADD(srv->metrics->s3_requests[op], 1);
	if (error)
		MADD(srv->metrics->s3_errors[op], 1);
}

unsigned kvtd_tenant_conns_max(const struct kvtd_server *srv)
{
	unsigned m = srv->cfg.tenant_conns ? srv->cfg.tenant_conns : srv->cfg.max_conns / 4;
	return m ? m : 1;
}

/* Before, one tenant could hold every --max-conns slot, and no other
 * could connect.  Without --tenants everyone is one tenant: no cap. */
bool kvtd_tenant_conn_admit(struct kvtd_conn *c, const char *tenant, size_t tenant_len, char *msg,
			    size_t len)
{
	struct kvtd_server *srv = c->loop->srv;
	struct kvtd_tstat *t;
	unsigned max = kvtd_tenant_conns_max(srv);
	uint64_t held;

	if (!kvtd_auth_enabled() || tenant_len == 0)
		return true;
	/* Its entry in the tenants table, held while c lives: every
	 * per-tenant limit keys on it.  None (the table full of tenants in
	 * the file or with connections, or no memory): refused -- until
	 * 2026-12-05 admitted, with no per-tenant limit at all. */
	t = kvtd_tstat_hold(c, tenant, tenant_len);
	if (!t) {
		KVTD_COUNT(srv, conns_refused, 1);
		KVTD_COUNT(srv, tenant_table_refused, 1);
		snprintf(msg, len, "the server's tenants table is full (%u tenants in the tenants "
			 "file or connected); try again later", kvtd_tstat_walk(srv, NULL, NULL));
		kvtd_conn_log(c, KVTD_WARN, "refusing connection", msg);
		return false;
	}
	if (t == c->conns_tstat)
		return true;
	if (atomic_fetch_add_explicit(&t->conns, 1, memory_order_relaxed) >= max) {
		atomic_fetch_sub_explicit(&t->conns, 1, memory_order_relaxed);
		KVTD_COUNT(srv, conns_refused, 1);
		KVTD_COUNT(srv, tenant_conns_refused, 1);
		snprintf(msg, len, "the tenant has its limit of %u connections open "
			 "(--tenant-conns); close one, or try again later", max);
		kvtd_conn_log(c, KVTD_INFO, "refusing connection", msg);
		return false;
	}
	/* Its SSL (loop.c "The SSL object"): the tenant's TLS connections
	 * hold at most a quarter of --max-memory.  Counted wherever
	 * conns_tstat points, checked with a budget. */
	held = c->tls_mem ? atomic_fetch_add_explicit(&t->tls_mem, c->tls_mem,
						      memory_order_relaxed) : 0;
	if (c->tls_mem && srv->cfg.max_memory &&
	    held + c->tls_mem > kvtd_tenant_cap(srv, t, held + c->tls_mem,
						KVTD_TLS_TENANT_MEM_MAX(srv))) {
		atomic_fetch_sub_explicit(&t->tls_mem, c->tls_mem, memory_order_relaxed);
		atomic_fetch_sub_explicit(&t->conns, 1, memory_order_relaxed);
		KVTD_COUNT(srv, conns_refused, 1);
		KVTD_COUNT(srv, tls_mem_refused, 1);
		snprintf(msg, len, "the tenant's TLS connections hold its share of the server "
			 "memory limit (--max-memory); close one, or try again later");
		kvtd_conn_log(c, KVTD_INFO, "refusing connection", msg);
		return false;
	}
	if (c->conns_tstat) {
		atomic_fetch_sub_explicit(&c->conns_tstat->conns, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&c->conns_tstat->tls_mem, c->tls_mem,
					  memory_order_relaxed);
	}
	c->conns_tstat = t;
	return true;
}

/* ------------------------------------------------------------------------
 * Rendering /metrics
 */

/* The KV-events feeds' counters (lib/core/kvevents.c, doc/stats.md
 * "events"; replay's only with a replay endpoint or --tenants), exported
 * only when the store reports them: only while events are on. */
static const struct {
	const char *stat, *metric, *type, *help;
} metrics_events[] = {
	{ "events.queued", "kvtier_events_queued_total", "counter",
	  "KV events queued for publishing (one pushed out later counted here and in dropped)" },
	{ "events.dropped", "kvtier_events_dropped_total", "counter",
	  "KV events dropped: the queue was full (events.queue_max), their quota group "
	  "held its share of it, or out of memory (a KV-aware router's view goes stale)" },
	{ "events.share_dropped", "kvtier_events_share_dropped_total", "counter",
	  "of those, events of a quota group at its share of the queue while other groups "
	  "had events queued" },
	{ "events.batches", "kvtier_events_batches_total", "counter",
	  "KV event messages sent (one KVEventBatch each)" },
	{ "events.send_errors", "kvtier_events_send_errors_total", "counter",
	  "KV event messages ZeroMQ refused" },
	{ "events.bytes", "kvtier_events_bytes_total", "counter", "KV event payload bytes sent" },
	{ "events.sub_resets", "kvtier_events_sub_resets_total", "counter",
	  "times a bound KV-events socket's peers from one address held too many topics "
	  "and were let go" },
	{ "events.subscriptions", "kvtier_events_subscriptions_total", "counter",
	  "subscriptions the bound KV-events sockets took" },
	{ "events.refused", "kvtier_events_refused_total", "counter",
	  "subscribers a bound events socket refused during the handshake" },
	{ "events.replay_kept", "kvtier_events_replay_kept", "gauge",
	  "KV event messages kept for replay" },
	{ "events.replay_kept_bytes", "kvtier_events_replay_kept_bytes", "gauge",
	  "payload bytes of the messages kept for replay" },
	{ "events.replay_requests", "kvtier_events_replay_requests_total", "counter",
	  "KV event replay requests read, malformed ones included" },
	{ "events.replay_invalid", "kvtier_events_replay_invalid_total", "counter",
	  "malformed KV event replay requests" },
	{ "events.replay_busy", "kvtier_events_replay_busy_total", "counter",
	  "KV event replay requests refused: events.max_subscribers replays under way" },
	{ "events.replay_messages", "kvtier_events_replay_messages_total", "counter",
	  "KV event messages replayed" },
	{ "events.replay_bytes", "kvtier_events_replay_bytes_total", "counter",
	  "payload bytes of the KV event messages replayed" },
	{ "events.replay_waits", "kvtier_events_replay_waits_total", "counter",
	  "times a replay waited at its peer's high-water mark" },
};
#define METRICS_EVENTS (sizeof(metrics_events) / sizeof(metrics_events[0]))

struct metrics_stats {
	uint64_t v[64];
	bool events; /* events.endpoint seen: the KV-events publisher runs */
	bool ev_seen[METRICS_EVENTS];
	uint64_t ev[METRICS_EVENTS];
	uint64_t *gdropped; /* events.<g>.dropped by group g (KVT_QUOTA_GROUPS), or NULL */
};

static const char *const metrics_stat_names[] = {
#define S_DRAM_HITS 0
	"dram.hits",
	"dram.misses",
	"dram.put_bytes",
	"dram.get_bytes",
	"dram.evictions",
	"dram.capacity_bytes",
	"dram.used_bytes",
	"dram.blocks",
#define S_SSD_HITS 8
	"ssd.reads",
	"ssd.read_misses",
	"ssd.writedown_bytes",
	"ssd.read_bytes",
	"ssd.evicted_blocks",
	"ssd.capacity_bytes",
	"ssd.segments_used",
	"ssd.blocks",
#define S_SSD_SEGMENT 16
	"ssd.segment_bytes",
#define S_SSD_CRC 17
	"ssd.crc_errors",
	"ssd.io_errors",
	"ssd.writedown_shed",
#define S_DRAM_CRC 20
	"dram.crc_errors",
	"dram.full_errors",
#define S_PINS 22
	"store.pins_active",
	"mem.meta_bytes",
#define S_SSD_HEALTH 24
	"ssd.segments_quarantined",
	"ssd.degraded",
	"ssd.enospc",
	"ssd.writedown_pending_bytes",
#define S_SSD_WAIT 28
	"ssd.writedown_put_timeouts",
	"ssd.promoted_dropped",
	"ssd.room_bytes",
	"ssd.part_reads",
	"ssd.tombstones_unwritten",
	"ssd.deletes_lost",
#define S_DRAM_LOWER 34
	"dram.on_lower_bytes",
	"dram.cold_bytes",
#define S_SSD_PREEMPTED 36
	"ssd.writedown_preempted",
#define S_SSD_STOP_SHED 37
	"ssd.stop_writedown_shed",
	NULL,
};

/* An events.* statistic: the table's, or a group's drops
 * ("events.<g>.dropped", reported once non-zero). */
static void metrics_events_cb(struct metrics_stats *st, const char *name, uint64_t value,
			      const char *str)
{
	const char *p = name + 7;
	char *end;
	unsigned long g;

	if (strcmp(name, "events.endpoint") == 0) {
		st->events = true;
		if (!st->gdropped)
			st->gdropped = calloc(KVT_QUOTA_GROUPS, sizeof(*st->gdropped));
		return;
	}
	if (str)
		return;
	if (*p >= '0' && *p <= '9') {
		g = strtoul(p, &end, 10);
		if (st->gdropped && g < KVT_QUOTA_GROUPS && strcmp(end, ".dropped") == 0)
			st->gdropped[g] = value;
		return;
	}
	for (size_t i = 0; i < METRICS_EVENTS; i++)
		if (strcmp(metrics_events[i].stat, name) == 0) {
			st->ev[i] = value;
			st->ev_seen[i] = true;
		}
}

static void metrics_stats_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct metrics_stats *st = ctx;

	if (strncmp(name, "events.", 7) == 0) {
		metrics_events_cb(st, name, value, str);
		return;
	}
	if (str || strncmp(name, "ns.", 3) == 0 || strncmp(name, "quota.", 6) == 0)
		return; /* the rows that grow (none of ours): metrics_namespaces */
	for (unsigned i = 0; metrics_stat_names[i]; i++)
		if (strcmp(metrics_stat_names[i], name) == 0)
			st->v[i] = value;
}

static void metrics_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metrics_one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	metrics_head(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* The server's counters of one part of the page (counters.c's table). */
static void metrics_counters(FILE *f, const struct kvtd_server *srv, int part)
{
	for (size_t i = 0; i < kvtd_counter_def_count; i++) {
		const struct kvtd_counter_def *d = &kvtd_counter_defs[i];
		if (d->metric && d->part == part)
			metrics_one(f, d->metric, d->type, d->help, kvtd_counter_value(srv, d));
	}
}

/* Healing (repair.c): its STATS repair.* as kvtier_repair_* (counters
 * with _total). */
static void metrics_repair(void *ctx, const char *name, uint64_t v)
{
	static const struct {
		const char *stat, *metric, *type, *help;
	} map[] = {
		{ "repair.tracked", "kvtier_repair_tracked", "gauge",
		  "placed blocks this server holds (what healing and drain can move)" },
		{ "repair.pending", "kvtier_repair_pending", "gauge",
		  "1 while a change of the member list waits for its repair pass" },
		{ "repair.passes", "kvtier_repair_passes_total", "counter", "repair passes run" },
		{ "repair.copied", "kvtier_repair_copied_total", "counter",
		  "blocks copied to members that lacked them (healing, drain, joins)" },
		{ "repair.bytes", "kvtier_repair_bytes_total", "counter", "bytes of those copies" },
		{ "repair.errors", "kvtier_repair_errors_total", "counter",
		  "repair copies or members that failed (the pass is retried)" },
		{ "repair.refused", "kvtier_repair_refused_total", "counter",
		  "repair copies refused: their key was deleted here lately" },
		{ "repair.last_pass_ms", "kvtier_repair_last_pass_ms", "gauge",
		  "milliseconds the last repair pass took" },
		{ "repair.drain_state", "kvtier_repair_drain_state", "gauge",
		  "0, or a drain: 1 handing over, 2 out of the member list, 3 done" },
		{ "repair.drains_incomplete", "kvtier_repair_drains_incomplete_total", "counter",
		  "drains that left blocks behind: a member busy or out of reach through "
		  "every try" },
		{ "repair.drain_copied", "kvtier_repair_drain_copied", "gauge",
		  "blocks the drain under way, or the last one, copied (from its acceptance)" },
		{ "repair.drain_skipped", "kvtier_repair_drain_skipped", "gauge",
		  "blocks of one copy the last drain pass left behind (over --drain-budget)" },
		{ "repair.forward_queued", "kvtier_repair_forward_queued_total", "counter",
		  "forwarded puts (remote.hot_forward) queued for their other replicas" },
		{ "repair.forward_passes", "kvtier_repair_forward_passes_total", "counter",
		  "batches of forwarded copies the members' lanes sent" },
		{ "repair.forwarded", "kvtier_repair_forwarded_total", "counter",
		  "copies of forwarded puts sent to the members that lacked them" },
		{ "repair.forward_bytes", "kvtier_repair_forward_bytes_total", "counter",
		  "bytes of those copies" },
		{ "repair.forward_dropped", "kvtier_repair_forward_dropped_total", "counter",
		  "forwarded puts not copied: queue full, or this server not in its member list" },
		{ "repair.forward_mem_dropped", "kvtier_repair_forward_mem_dropped_total", "counter",
		  "of them, because the queue could not grow within --max-memory" },
		{ "repair.forward_member_dropped", "kvtier_repair_forward_member_dropped_total",
		  "counter", "of them, copies a member's forward lane had no room for" },
		{ "repair.forward_tenant_dropped", "kvtier_repair_forward_tenant_dropped_total",
		  "counter", "of them, because the tenant's blocks held its quarter of the queue" },
		{ "repair.forward_busy_retried", "kvtier_repair_forward_busy_retried_total",
		  "counter", "copies a member refused busy, put back in its lane to send again" },
		{ "repair.forward_busy_dropped", "kvtier_repair_forward_busy_dropped_total",
		  "counter", "copies a member refused busy, given up (3 sends again at most)" },
		{ "repair.cut", "kvtier_repair_cut_total", "counter",
		  "repair passes cut short by a change of the member list" },
		{ "repair.busy_handed", "kvtier_repair_busy_handed_total", "counter",
		  "healing copies a member refused busy, handed to its lane to send again" },
		{ "repair.busy_dropped", "kvtier_repair_busy_dropped_total", "counter",
		  "healing copies a member refused busy that its lane had no room for" },
		{ "repair.lane_connects", "kvtier_repair_lane_connects_total", "counter",
		  "connections the forward lanes opened to members" },
		{ "repair.lane_reused", "kvtier_repair_lane_reused_total", "counter",
		  "forward lane batches sent on a connection kept from an earlier batch" },
		{ "repair.lane_conn_busy", "kvtier_repair_lane_conn_busy_total", "counter",
		  "forward lane connections a member refused busy (--tenant-conns, "
		  "--max-conns): their copies put back in the lane" },
		{ "repair.pass_conn_busy", "kvtier_repair_pass_conn_busy_total", "counter",
		  "healing pass connections a member refused busy (--tenant-conns, "
		  "--max-conns): no error, the pass run again" },
		{ "repair.lane_resent", "kvtier_repair_lane_resent_total", "counter",
		  "forward lane batches sent again on a new connection: the kept one was "
		  "found closed before any answer" },
		{ "repair.lane_keep_refused", "kvtier_repair_lane_keep_refused_total", "counter",
		  "forward lane connections closed after a batch: --max-memory had no room "
		  "to keep them" },
		{ "repair.copies_clamped", "kvtier_repair_copies_clamped_total", "counter",
		  "placed puts that asked more copies than --max-copies: kept on that many" },
		{ "repair.untracked", "kvtier_repair_untracked_total", "counter",
		  "placed puts not tracked for healing: the table could not grow within "
		  "--max-memory, or the tenant's entries held its share" },
		{ "repair.tenant_capped", "kvtier_repair_tenant_capped_total", "counter",
		  "of them, because the tenant's entries held its share (a quarter of "
		  "--max-memory)" },
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(name, map[i].stat) == 0)
			metrics_one(ctx, map[i].metric, map[i].type, map[i].help, v);
}

/* A label value: tenant names are 0x21..0x7e; escape \ and ". */
static void metrics_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		fputc(*s, f);
	}
}

static void metrics_hist(FILE *f, const char *name, const char *help, struct kvtd_metrics *m)
{
	static const char *const kinds[KVTD_LAT__COUNT] = { "read", "write" };

	metrics_head(f, name, "histogram", help);
	for (int k = 0; k < KVTD_LAT__COUNT; k++) {
		for (int t = 0; t < KVT_TIER_COUNT; t++) {
			struct metrics_hist *h = &m->lat[k][t];
			const char *tn = kvt_tier_name(t);
			uint64_t cum = 0;
			for (unsigned b = 0; b < METRICS_BUCKETS; b++) {
				cum += MGET(h->bucket[b]);
				fprintf(f, "%s_bucket{op=\"%s\",tier=\"%s\",le=\"%g\"} %" PRIu64 "\n",
					name, kinds[k], tn, (double)metrics_le_ns[b] / 1e9, cum);
			}
			cum += MGET(h->bucket[METRICS_BUCKETS]);
			fprintf(f, "%s_bucket{op=\"%s\",tier=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
				kinds[k], tn, cum);
			fprintf(f, "%s_sum{op=\"%s\",tier=\"%s\"} %.9f\n", name, kinds[k], tn,
				(double)MGET(h->sum_ns) / 1e9);
			fprintf(f, "%s_count{op=\"%s\",tier=\"%s\"} %" PRIu64 "\n", name, kinds[k],
				tn, cum);
		}
	}
}

static void metrics_tier(FILE *f, const char *tier, const uint64_t *v, uint64_t used)
{
	char n[96];
	static const char *const what[] = { "hits_total", "misses_total", "bytes_in_total",
					    "bytes_out_total", "evictions_total" };
	static const char *const help[] = {
		"reads that found their block in this tier",
		"reads that did not find their block in this tier",
		"value bytes written into this tier",
		"value bytes read from this tier",
		"blocks evicted from this tier",
	};
	for (int i = 0; i < 5; i++) {
		snprintf(n, sizeof(n), "kvtier_%s_%s", tier, what[i]);
		metrics_one(f, n, "counter", help[i], v[i]);
	}
	snprintf(n, sizeof(n), "kvtier_%s_capacity_bytes", tier);
	metrics_one(f, n, "gauge", "bytes this tier may hold", v[5]);
	snprintf(n, sizeof(n), "kvtier_%s_used_bytes", tier);
	metrics_one(f, n, "gauge", "bytes this tier uses now", used);
	snprintf(n, sizeof(n), "kvtier_%s_blocks", tier);
	metrics_one(f, n, "gauge", "blocks this tier holds", v[7]);
}

/* ------------------------------------------------------------------------
 * Per namespace: the library's ns.<id>.* statistics (doc/stats.md) as
 * series with a `namespace` label, the first 16 hex digits of the
 * namespace's digest (the same on every node, unlike the id), "other" for
 * the row namespaces past stats.namespaces share.  The rows are bounded
 * by that option (at most 256 + 1), so is the label's cardinality.
 */

#define METRICS_NS_ROWS 258 /* the library's most (256) + other, and one spare */

static const char *const metrics_ns_fields[] = {
	"lookups", "lookup_keys", "lookup_hits", "hits_dram", "hits_ssd", "hits_remote",
	"hits_shared", "misses", "get_errors", "puts", "put_bytes", "dram_bytes", "dram_blocks",
	"evicted", "evicted_bytes", "evicted_unread", "evicted_unread_bytes",
};
#define METRICS_NS_FIELDS (sizeof(metrics_ns_fields) / sizeof(metrics_ns_fields[0]))

struct metrics_ns_row {
	char row[16];          /* "<id>" or "other" */
	char label[20];        /* digest prefix or "other" */
	char model[128], tenant[PROTO_TENANT_MAX + 1];
	uint64_t v[METRICS_NS_FIELDS];
};

struct metrics_ns {
	struct metrics_ns_row *rows;
	unsigned n;
};

static struct metrics_ns_row *metrics_ns_row(struct metrics_ns *ns, const char *row, size_t len)
{
	if (len == 0 || len >= sizeof(ns->rows[0].row))
		return NULL;
	/* A row's statistics come one after the other: the last row first
	 * (the whole list for each of 256 rows' 20 figures was 1.3 million
	 * compares a page; doc/security.md `metrics_cost`). */
	if (ns->n && strncmp(ns->rows[ns->n - 1].row, row, len) == 0 &&
	    ns->rows[ns->n - 1].row[len] == 0)
		return &ns->rows[ns->n - 1];
	for (unsigned i = 0; i < ns->n; i++)
		if (strlen(ns->rows[i].row) == len && memcmp(ns->rows[i].row, row, len) == 0)
			return &ns->rows[i];
	if (ns->n == METRICS_NS_ROWS)
		return NULL;
	memcpy(ns->rows[ns->n].row, row, len);
	ns->rows[ns->n].row[len] = 0;
	snprintf(ns->rows[ns->n].label, sizeof(ns->rows[0].label), "%s",
		 strcmp(ns->rows[ns->n].row, "other") == 0 ? "other" : "?");
	return &ns->rows[ns->n++];
}

static void metrics_ns_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct metrics_ns *ns = ctx;
	const char *row, *field;
	struct metrics_ns_row *r;

	if (strncmp(name, "ns.", 3) != 0)
		return;
	row = name + 3;
	if (!(field = strchr(row, '.')))
		return; /* ns.table_rows, ns.other_namespaces */
	if (!(r = metrics_ns_row(ns, row, (size_t)(field - row))))
		return;
	field++;
	if (str) {
		if (strcmp(field, "digest") == 0)
			snprintf(r->label, sizeof(r->label), "%s", str);
		else if (strcmp(field, "model") == 0)
			snprintf(r->model, sizeof(r->model), "%s", str);
		else if (strcmp(field, "tenant") == 0)
			snprintf(r->tenant, sizeof(r->tenant), "%s", str);
		return;
	}
	for (size_t i = 0; i < METRICS_NS_FIELDS; i++)
		if (strcmp(field, metrics_ns_fields[i]) == 0)
			r->v[i] = value;
}

/* One family: every row's field i (with an extra label, or NULL). */
static void metrics_ns_family(FILE *f, const struct metrics_ns *ns, const char *name,
			      const char *type, const char *help, size_t i)
{
	metrics_head(f, name, type, help);
	for (unsigned r = 0; r < ns->n; r++)
		fprintf(f, "%s{namespace=\"%s\"} %" PRIu64 "\n", name, ns->rows[r].label,
			ns->rows[r].v[i]);
}

static void metrics_namespaces(FILE *f, struct kvt_store *store)
{
	static const char *const tiers[] = { "dram", "ssd", "remote", "shared" };
	static const struct {
		const char *metric, *type, *help;
		size_t field;
	} fam[] = {
		{ "kvtier_ns_lookups_total", "counter", "longest-prefix lookups", 0 },
		{ "kvtier_ns_lookup_keys_total", "counter", "keys those lookups asked about", 1 },
		{ "kvtier_ns_lookup_hits_total", "counter", "leading keys those lookups found", 2 },
		{ "kvtier_ns_misses_total", "counter", "gets that found nothing", 7 },
		{ "kvtier_ns_get_errors_total", "counter", "gets that ended in an error", 8 },
		{ "kvtier_ns_puts_total", "counter", "values stored in DRAM by puts", 9 },
		{ "kvtier_ns_put_bytes_total", "counter", "bytes of those values", 10 },
		{ "kvtier_ns_dram_bytes", "gauge", "value bytes in DRAM now", 11 },
		{ "kvtier_ns_dram_blocks", "gauge", "blocks in DRAM now", 12 },
		{ "kvtier_ns_evicted_total", "counter", "blocks evicted from DRAM", 13 },
		{ "kvtier_ns_evicted_bytes_total", "counter", "bytes of blocks evicted from DRAM", 14 },
		{ "kvtier_ns_evicted_unread_total", "counter",
		  "blocks evicted from DRAM never read while there (stored, never reused)", 15 },
		{ "kvtier_ns_evicted_unread_bytes_total", "counter",
		  "bytes of blocks evicted from DRAM never read while there", 16 },
	};
	struct metrics_ns ns = { 0 };

	ns.rows = calloc(METRICS_NS_ROWS, sizeof(*ns.rows));
	if (!ns.rows)
		return;
	kvt_store_stats(store, metrics_ns_cb, &ns);
	if (ns.n) {
		metrics_head(f, "kvtier_namespace_info", "gauge",
			     "1 per namespace counted in its own row: its model and tenant "
			     "(namespace: the digest's first 16 hex digits)");
		for (unsigned r = 0; r < ns.n; r++) {
			if (strcmp(ns.rows[r].row, "other") == 0)
				continue;
			fprintf(f, "kvtier_namespace_info{namespace=\"%s\",id=\"%s\",model=\"",
				ns.rows[r].label, ns.rows[r].row);
			metrics_label(f, ns.rows[r].model);
			fputs("\",tenant=\"", f);
			metrics_label(f, ns.rows[r].tenant);
			fputs("\"} 1\n", f);
		}
		metrics_head(f, "kvtier_ns_hits_total", "counter",
			     "gets served, by namespace and the tier that had the block");
		for (unsigned r = 0; r < ns.n; r++)
			for (size_t t = 0; t < 4; t++)
				fprintf(f, "kvtier_ns_hits_total{namespace=\"%s\",tier=\"%s\"} %" PRIu64
					   "\n", ns.rows[r].label, tiers[t], ns.rows[r].v[3 + t]);
		for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
			metrics_ns_family(f, &ns, fam[i].metric, fam[i].type, fam[i].help,
					  fam[i].field);
	}
	free(ns.rows);
}

/* The KV-events counters, and each quota group's drops by the tenant it
 * is given to: at most KVT_QUOTA_GROUPS series, as many as groups that
 * dropped one (a removed tenant's group, no longer named, left out).  A
 * group given to a new tenant after a reload counts from the drops it had
 * then (auth.c group_ev_base): the new tenant's series starts at 0, as its
 * kvtier_tenant_* counters do, rather than at its group's earlier
 * tenant's count; it appears once it drops one of its own. */
static void metrics_events_page(FILE *f, const struct metrics_stats *st)
{
	char name[PROTO_TENANT_MAX + 1];
	uint64_t base;

	if (!st->events)
		return;
	for (size_t i = 0; i < METRICS_EVENTS; i++)
		if (st->ev_seen[i])
			metrics_one(f, metrics_events[i].metric, metrics_events[i].type,
				    metrics_events[i].help, st->ev[i]);
	metrics_head(f, "kvtier_events_tenant_dropped_total", "counter",
		     "of kvtier_events_dropped_total, a tenant's (its quota group's; tenant \"\": "
		     "namespaces of no tenant, \"default\" without --tenants), once non-zero");
	for (uint32_t g = 0; st->gdropped && g < KVT_QUOTA_GROUPS; g++) {
		base = 0;
		if (!st->gdropped[g])
			continue;
		if (g == 0)
			snprintf(name, sizeof(name), "%s", kvtd_auth_enabled() ? "" : "default");
		else if (!kvtd_tenant_group_name(g, name, &base) || st->gdropped[g] <= base)
			continue;
		fputs("kvtier_events_tenant_dropped_total{tenant=\"", f);
		metrics_label(f, name);
		fprintf(f, "\"} %" PRIu64 "\n", st->gdropped[g] - base);
	}
}

/* The whole /metrics page into a new buffer: 0 or -ENOMEM. */
/* One per-tenant family: a series for each entry of the tenants table
 * (tstat.c), walked under its lock. */
struct metrics_tenant_walk {
	FILE *f;
	const char *name;
	uint64_t (*value)(const struct kvtd_tstat *st);
};

static void metrics_tenant_series(void *arg, const char *tenant, const struct kvtd_tstat *st)
{
	struct metrics_tenant_walk *w = arg;

	fprintf(w->f, "%s{tenant=\"", w->name);
	metrics_label(w->f, tenant);
	fprintf(w->f, "\"} %" PRIu64 "\n", w->value(st));
}

static uint64_t metrics_tenant_requests(const struct kvtd_tstat *st)
{
	return MGET(st->requests);
}

static uint64_t metrics_tenant_bytes_in(const struct kvtd_tstat *st)
{
	return MGET(st->bytes_in);
}

static uint64_t metrics_tenant_bytes_out(const struct kvtd_tstat *st)
{
	return MGET(st->bytes_out);
}

static void metrics_tenant_family(FILE *f, struct kvtd_server *srv, const char *name,
				  const char *help, uint64_t (*value)(const struct kvtd_tstat *st))
{
	struct metrics_tenant_walk w = { f, name, value };

	metrics_head(f, name, "counter", help);
	kvtd_tstat_walk(srv, metrics_tenant_series, &w);
}

int kvtd_metrics_render(struct kvtd_server *srv, char **out, size_t *out_len)
{
	struct kvtd_metrics *m = srv->metrics;
	struct metrics_stats st;
	FILE *f = open_memstream(out, out_len);

	if (!f)
		return -ENOMEM;
	memset(&st, 0, sizeof(st));
	kvt_store_stats(srv->store, metrics_stats_cb, &st);
	metrics_one(f, "kvtier_up", "gauge", "1 while kvtierd serves", 1);
	metrics_one(f, "kvtier_uptime_seconds", "gauge", "seconds since kvtierd started",
		    (kvtd_now_ns() - srv->start_ns) / 1000000000ull);
	metrics_tier(f, "dram", &st.v[S_DRAM_HITS], st.v[S_DRAM_HITS + 6]);
	metrics_tier(f, "ssd", &st.v[S_SSD_HITS], st.v[S_SSD_HITS + 6] * st.v[S_SSD_SEGMENT]);
	metrics_one(f, "kvtier_dram_crc_errors_total", "counter",
		    "verified DRAM reads whose bytes failed their CRC (served as misses)",
		    st.v[S_DRAM_CRC]);
	metrics_one(f, "kvtier_dram_full_errors_total", "counter",
		    "puts refused because everything in DRAM was pinned", st.v[S_DRAM_CRC + 1]);
	metrics_one(f, "kvtier_dram_on_lower_bytes", "gauge",
		    "DRAM value bytes a lower tier holds too", st.v[S_DRAM_LOWER]);
	metrics_one(f, "kvtier_dram_cold_bytes", "gauge",
		    "of those, first reads' cold copies not read again (the next victims)",
		    st.v[S_DRAM_LOWER + 1]);
	metrics_one(f, "kvtier_ssd_crc_errors_total", "counter",
		    "SSD records that failed their CRC (served as misses)", st.v[S_SSD_CRC]);
	metrics_one(f, "kvtier_ssd_io_errors_total", "counter", "SSD I/O errors",
		    st.v[S_SSD_CRC + 1]);
	metrics_one(f, "kvtier_ssd_writedown_shed_total", "counter",
		    "blocks not written down to SSD because the queue was full", st.v[S_SSD_CRC + 2]);
	metrics_one(f, "kvtier_ssd_writedown_preempted_total", "counter",
		    "of those, queued write-downs of a quota group (tenant) past its quarter of the "
		    "queue, taken off it for another group's within its quarter",
		    st.v[S_SSD_PREEMPTED]);
	metrics_one(f, "kvtier_ssd_stop_writedown_shed_total", "counter",
		    "blocks a graceful stop's write-down left in DRAM (no room, queue full, late): "
		    "not in kvtier_ssd_writedown_shed_total", st.v[S_SSD_STOP_SHED]);
	/* SSD health and backlog (doc/deploy.md's alerts, kvtier top) */
	metrics_one(f, "kvtier_ssd_segments_quarantined", "gauge",
		    "SSD segments quarantined after an I/O error (not reused until restart)",
		    st.v[S_SSD_HEALTH]);
	metrics_one(f, "kvtier_ssd_degraded", "gauge",
		    "1 while the SSD tier sheds write-downs after ENOSPC", st.v[S_SSD_HEALTH + 1]);
	metrics_one(f, "kvtier_ssd_enospc_total", "counter", "SSD writes that failed with ENOSPC",
		    st.v[S_SSD_HEALTH + 2]);
	metrics_one(f, "kvtier_ssd_writedown_pending_bytes", "gauge",
		    "bytes queued or in flight for write-down to SSD", st.v[S_SSD_HEALTH + 3]);
	metrics_one(f, "kvtier_ssd_writedown_put_timeouts_total", "counter",
		    "persistent-namespace puts refused because the write-down queue stayed full",
		    st.v[S_SSD_WAIT]);
	metrics_one(f, "kvtier_ssd_promoted_dropped_total", "counter",
		    "SSD records dropped when their block was promoted to DRAM (one copy kept)",
		    st.v[S_SSD_WAIT + 1]);
	metrics_one(f, "kvtier_ssd_room_bytes", "gauge",
		    "SSD bytes the file system had room for (the capacity unless a full disk capped "
		    "the log)", st.v[S_SSD_WAIT + 2]);
	metrics_one(f, "kvtier_ssd_part_reads_total", "counter",
		    "parts read from SSD alone, nothing promoted (quiet part gets: S3 HEAD, listings)",
		    st.v[S_SSD_WAIT + 3]);
	metrics_one(f, "kvtier_ssd_tombstones_unwritten", "gauge",
		    "deletes whose tombstone the SSD failed to write: deletes fail while not 0",
		    st.v[S_SSD_WAIT + 4]);
	metrics_one(f, "kvtier_ssd_deletes_lost", "gauge",
		    "1: a tombstone may be lost (a failed write or fdatasync where deletes were "
		    "logged): deletes and flushes fail until the restart",
		    st.v[S_SSD_WAIT + 5]);
	metrics_one(f, "kvtier_pins_active", "gauge", "pinned reads not yet released",
		    st.v[S_PINS]);
	metrics_one(f, "kvtier_meta_bytes", "gauge", "bytes of index and metadata",
		    st.v[S_PINS + 1]);
	metrics_hist(f, "kvtier_request_duration_seconds",
		     "time from a request's parse to its reply queued, measured by kvtierd, by "
		     "the tier that served it (the slowest of a batch's hits; none: a miss, "
		     "or a RESP command) (native GET/PUT frames; RESP read: GET MGET EXISTS, "
		     "write: SET MSET DEL)", m);

	metrics_counters(f, srv, 1);
	metrics_head(f, "kvtier_loop_connections", "gauge",
		     "connections open now, by event loop (new ones go to the loop with the fewest)");
	for (unsigned i = 0; srv->loops && i < srv->loop_count; i++)
		fprintf(f, "kvtier_loop_connections{loop=\"%u\"} %u\n", i,
			atomic_load_explicit(&srv->loops[i].conn_live, memory_order_relaxed));
	{
		struct kvtd_cluster *cl = &srv->cluster;
		unsigned members;
		bool up;
		pthread_mutex_lock(&cl->lock);
		members = cl->count;
		up = cl->etcd_up;
		pthread_mutex_unlock(&cl->lock);
		metrics_one(f, "kvtier_cluster_members", "gauge",
			    "members in this server's list (--members or etcd)", members);
		if (cl->source == KVTD_CLUSTER_ETCD) {
			metrics_one(f, "kvtier_cluster_etcd_up", "gauge",
				    "1 if the last exchange with etcd worked", up);
			metrics_one(f, "kvtier_cluster_etcd_errors_total", "counter",
				    "exchanges with etcd that failed", MGET(cl->etcd_errors));
			metrics_one(f, "kvtier_cluster_changes_total", "counter",
				    "times the member list read from etcd changed",
				    MGET(cl->changes));
		}
	}
	kvtd_repair_stats(srv, metrics_repair, f);
	metrics_counters(f, srv, 2);
	metrics_one(f, "kvtier_resp_commands_total", "counter", "RESP commands answered",
		    MGET(m->resp_commands));
	metrics_one(f, "kvtier_resp_error_replies_total", "counter", "RESP commands answered with an error",
		    MGET(m->resp_errors));
	metrics_one(f, "kvtier_http_requests_total", "counter", "HTTP requests to this listener",
		    MGET(m->http_requests));
	metrics_head(f, "kvtier_s3_requests_total", "counter",
		     "S3 requests answered, by operation (doc/s3.md)");
	for (int i = 1; i < KVTD_S3_OPS; i++)
		fprintf(f, "kvtier_s3_requests_total{op=\"%s\"} %" PRIu64 "\n", kvtd_s3_op_names[i],
			MGET(m->s3_requests[i]));
	metrics_head(f, "kvtier_s3_errors_total", "counter",
		     "S3 requests answered with a 4xx or 5xx status, by operation");
	for (int i = 1; i < KVTD_S3_OPS; i++)
		fprintf(f, "kvtier_s3_errors_total{op=\"%s\"} %" PRIu64 "\n", kvtd_s3_op_names[i],
			MGET(m->s3_errors[i]));

	metrics_head(f, "kvtier_errors_total", "counter",
		     "requests and connections refused or failed, by kind (doc/kvtierd.md)");
	for (int k = 0; k < KVTD_ERR__COUNT; k++)
		fprintf(f, "kvtier_errors_total{kind=\"%s\"} %" PRIu64 "\n", kvtd_err_names[k],
			MGET(srv->ctr.errors[k]));

	metrics_events_page(f, &st);
	free(st.gdropped);
	metrics_namespaces(f, srv->store);

	metrics_one(f, "kvtier_tenant_table_entries", "gauge", "tenants with counters and "
		    "limits (in the tenants file, or held by a connection), at most 4096",
		    kvtd_tstat_walk(srv, NULL, NULL));
	metrics_tenant_family(f, srv, "kvtier_tenant_requests_total", "requests by authenticated "
			      "tenant (native frames and RESP commands)", metrics_tenant_requests);
	metrics_tenant_family(f, srv, "kvtier_tenant_bytes_in_total",
			      "bytes received from a tenant", metrics_tenant_bytes_in);
	metrics_tenant_family(f, srv, "kvtier_tenant_bytes_out_total", "bytes sent to a tenant",
			      metrics_tenant_bytes_out);
	if (fclose(f) != 0) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

void kvtd_metrics_http(struct kvtd_server *srv, int what)
{
	struct kvtd_metrics *m = srv->metrics;

	if (what == KVTD_HTTP_DENIED)
		MADD(m->http_denied, 1);
	else if (what == KVTD_HTTP_BAD)
		MADD(m->http_bad, 1);
	else
		MADD(m->http_requests, 1);
}

/* ------------------------------------------------------------------------
 * The bearer token (--metrics-token FILE)
 */

int kvtd_metrics_token_load(const char *path, char **out, char *err, size_t err_len)
{
	char buf[1024];
	struct stat sb;
	ssize_t r;
	size_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, err_len, "%s", strerror(errno));
		return -errno;
	}
	if (fstat(fd, &sb) < 0 || (sb.st_mode & 077)) {
		close(fd);
		snprintf(err, err_len, "must not be accessible by group or others (chmod 600)");
		return -EPERM;
	}
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r < 0) {
		snprintf(err, err_len, "%s", strerror(errno));
		return -EIO;
	}
	n = (size_t)r;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
			snprintf(err, err_len, "the token must be one word of printable characters");
			return -EINVAL;
		}
	if (n < 16) {
		snprintf(err, err_len, "the token must be at least 16 characters");
		return -EINVAL;
	}
	*out = strdup(buf);
	OPENSSL_cleanse(buf, sizeof(buf));
	return *out ? 0 : -ENOMEM;
}

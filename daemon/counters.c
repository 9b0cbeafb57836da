/*
 * counters.c - the server's own counters and gauges as one table: each
 * row names where the value lives in struct kvtd_server, its STATS name
 * (server.*, ops.c) and its /metrics family with type and help
 * (metrics.c; doc/metrics.md), so that the two cannot drift: adding a
 * counter to both is one row.  A row with no STATS name is on /metrics
 * only, one with no metric in STATS only.  Per-opcode and per-kind
 * error counters are tables of their own (proto_op_name, kvtd_err_names).
 *
 * Pure data and one reader: no dependencies beyond kvtierd.h's structs
 * (tests link it to check STATS against /metrics).  Values are read as
 * relaxed atomics: each exact, together not a snapshot.
 */
#include <stddef.h>

#include "kvtierd.h"

#define CTR(field) offsetof(struct kvtd_server, ctr.field), KVTD_CTR_ATOMIC_U64
/* The common rows: a u64 of srv->ctr after the cluster families, named
 * server.<field> in STATS; with a /metrics family, or in STATS only. */
#define COUNTER(field, metric, help) { "server." #field, metric, "counter", help, CTR(field), 2 }
#define GAUGE(field, metric, help) { "server." #field, metric, "gauge", help, CTR(field), 2 }
#define STAT_ONLY(field) { "server." #field, NULL, NULL, NULL, CTR(field), 2 }

/* In /metrics order (part 1 before the per-loop connection gauge, part 2
 * after the cluster and repair families); STATS lists the rows in this
 * order too. */
const struct kvtd_counter_def kvtd_counter_defs[] = {
	{ "server.conns_accepted", "kvtier_connections_accepted_total", "counter",
	  "connections accepted", CTR(conns_accepted), 1 },
	{ "server.conns_closed", "kvtier_connections_closed_total", "counter",
	  "connections closed", CTR(conns_closed), 1 },
	{ "server.conns_active", "kvtier_connections_active", "gauge", "connections open now",
	  CTR(conns_active), 1 },
	STAT_ONLY(frames_out),
	STAT_ONLY(items_in),
	STAT_ONLY(auth_ok),
	STAT_ONLY(value_crc_errors),
	STAT_ONLY(get_version_misses),
	COUNTER(conns_refused, "kvtier_connections_refused_total",
		"connections refused past --max-conns"),
	COUNTER(unauth_refused, "kvtier_connections_unauth_refused_total",
		"of them, past the unauthenticated limits (all, per address)"),
	COUNTER(unauth_evicted, "kvtier_connections_unauth_evicted_total",
		"unauthenticated connections closed, the oldest, to admit a new one past half of "
		"--max-conns"),
	COUNTER(tenant_conns_refused, "kvtier_connections_tenant_refused_total",
		"of them, past --tenant-conns (after AUTH)"),
	COUNTER(tenant_table_refused, "kvtier_connections_tenant_table_refused_total",
		"of them, after AUTH: the tenants table was full (4096 tenants in the tenants "
		"file or connected)"),
	STAT_ONLY(conns_lingered),
	COUNTER(conns_shed, "kvtier_connections_shed_total",
		"of them, shed at the descriptor limit (EMFILE) with the spare descriptor"),
	COUNTER(listen_paused, "kvtier_listen_paused_total",
		"times a loop stopped listening for 100 ms at the descriptor limit"),
	{ "server.unauth_conns", "kvtier_connections_unauthenticated", "gauge",
	  "connections not yet authenticated", offsetof(struct kvtd_server, unauth_conns),
	  KVTD_CTR_ATOMIC_UINT, 2 },
	GAUGE(tenants_reload_ok, "kvtier_tenants_last_reload_successful",
		"1 if the tenants file the last SIGHUP read was taken (or none was read yet), 0 "
		"if it was refused and the old tenants still serve"),
	COUNTER(tenants_reload_failures, "kvtier_tenants_reload_failures_total",
		"SIGHUPs whose tenants file was refused (the old one kept)"),
	COUNTER(copy_refused, "kvtier_server_copy_refused_total",
		"grantee GET items answered as a miss (S3: 503): their private SSD copy would "
		"pass the connection's, the tenant's or the server's bound"),
	STAT_ONLY(pin_deferred),
	STAT_ONLY(work_deferred),
	STAT_ONLY(ns_refused),
	STAT_ONLY(s3_scan_refused),
	COUNTER(metrics_renders, "kvtier_server_metrics_renders_total",
		"/metrics pages rendered (the scrapes of one loop iteration share one)"),
	COUNTER(metrics_refused, "kvtier_server_metrics_refused_total",
		"/metrics requests answered 503: their loop had as many pages in flight as "
		"it takes"),
	COUNTER(clear_refused, "kvtier_server_clear_refused_total",
		"CLEARs and FLUSHDBs refused: their tenant had its limit in progress"),
	GAUGE(resp_expiry_held, "kvtier_resp_expiry_entries",
		"RESP values with a TTL in the expiry index (a value never read after it expires "
		"is deleted when its entry is due)"),
	COUNTER(resp_expiry_dropped, "kvtier_resp_expiry_dropped_total",
		"SETs with a TTL not recorded in the expiry index: full, the tenant's quarter, "
		"or --max-memory (the value expires when read)"),
	COUNTER(resp_expiry_swept, "kvtier_resp_expiry_swept_total",
		"expired RESP values the expiry sweep deleted"),
	COUNTER(resp_expiry_skipped, "kvtier_resp_expiry_skipped_total",
		"entries the sweep popped and left: the value gone, not expired any more (set "
		"again), or a write of its stripe in progress"),
	COUNTER(mem_refused, "kvtier_server_memory_refused_total",
		"frames refused because --max-memory was reached"),
	COUNTER(mem_paused, "kvtier_server_memory_paused_total",
		"times a connection was not read because --max-memory was reached"),
	COUNTER(out_share_paused, "kvtier_server_output_share_paused_total",
		"times a connection was not read because its tenant's queued answers (or native "
		"frames in flight) held their share (a quarter) of --max-memory"),
	COUNTER(parse_deferred, "kvtier_server_parse_deferred_total",
		"times a connection's frames or commands past 64 in one loop iteration waited "
		"for the next (a pipelining client cannot hold the loop)"),
	COUNTER(put_parked, "kvtier_server_put_parked_total",
		"S3 PUTs parked waiting for SSD write-down room (a persistent namespace)"),
	COUNTER(put_park_timeouts, "kvtier_server_put_park_timeouts_total",
		"of them, answered 503 SlowDown: no room within ssd.writedown_wait_ms"),
	{ "server.mem_used", "kvtier_server_memory_bytes", "gauge",
	  "receive buffers, tables, queued responses and TLS SSLs charged to --max-memory",
	  offsetof(struct kvtd_server, mem_used), KVTD_CTR_ATOMIC_U64, 2 },
	{ "server.s3_header_reads_mem", "kvtier_server_s3_header_reads_bytes", "gauge",
	  "of them, what S3 listings' header reads in flight may hold in the store",
	  offsetof(struct kvtd_server, s3.hdr_charged), KVTD_CTR_ATOMIC_U64, 2 },
	{ "server.mem_max", "kvtier_server_memory_limit_bytes", "gauge", "--max-memory",
	  offsetof(struct kvtd_server, cfg.max_memory), KVTD_CTR_U64, 2 },
	COUNTER(bytes_in, "kvtier_server_bytes_in_total", "bytes received on every connection"),
	COUNTER(bytes_out, "kvtier_server_bytes_out_total", "bytes sent on every connection"),
	COUNTER(frames_in, "kvtier_server_frames_in_total", "native protocol frames received"),
	{ "server.log_client_dropped", "kvtier_server_log_client_dropped_total", "counter",
	  "log lines a client caused, dropped past the limit a second (log.c)",
	  offsetof(struct kvtd_server, log_dropped), KVTD_CTR_ATOMIC_U64_REF, 2 },
	{ NULL, "kvtier_tls_handshakes_total", "counter",
	  "TLS handshakes completed (failed ones: kvtier_errors_total{kind=\"tls\"})",
	  CTR(tls_handshakes), 2 },
	{ NULL, "kvtier_tls_ktls_total", "counter", "TLS connections sending through kernel TLS",
	  CTR(tls_ktls), 2 },
	COUNTER(tls_throttled, "kvtier_tls_throttled_total",
		"TLS connections closed before their handshake: the address failed too many "
		"a second"),
	{ "server.tls_handshake_timeouts", "kvtier_tls_handshake_timeouts_total", "counter",
	  "TLS handshakes not done in time (10 s) after the client sent bytes: failures of its address",
	  CTR(tls_hs_timeouts), 2 },
	COUNTER(tls_mem_refused, "kvtier_tls_memory_refused_total",
		"TLS connections refused for their SSL's memory (of connections refused): at the "
		"accept past --max-memory or the unauthenticated half of it, at AUTH past the "
		"tenant's quarter"),
	COUNTER(tls_unused, "kvtier_tls_unused_total",
		"TLS connections the client ended within 10 s of the handshake without sending a "
		"byte of application data: failures of its address, as failed handshakes"),
	COUNTER(tls_quiet_closed, "kvtier_tls_quiet_closed_total",
		"TLS connections closed for sending more than 32 records a minute that carry no "
		"application data (KeyUpdates, alerts), or a TLS 1.2 renegotiation"),
	COUNTER(tls_deferred, "kvtier_tls_deferred_total",
		"TLS reads left for the next loop iteration: the tenant's records of this "
		"one spent"),
};
const size_t kvtd_counter_def_count = sizeof(kvtd_counter_defs) / sizeof(kvtd_counter_defs[0]);

uint64_t kvtd_counter_value(const struct kvtd_server *srv, const struct kvtd_counter_def *d)
{
	const char *p = (const char *)srv + d->off;

	switch (d->kind) {
	case KVTD_CTR_ATOMIC_U64:
		return atomic_load_explicit((const _Atomic uint64_t *)p, memory_order_relaxed);
	case KVTD_CTR_ATOMIC_U64_REF: {
		const _Atomic uint64_t *ref = *(const _Atomic uint64_t *const *)p;
		return ref ? atomic_load_explicit(ref, memory_order_relaxed) : 0;
	}
	case KVTD_CTR_ATOMIC_UINT:
		return atomic_load_explicit((const _Atomic unsigned *)p, memory_order_relaxed);
	default:
		return *(const uint64_t *)p;
	}
}

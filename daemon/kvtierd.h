/*
 * kvtierd.h - what the files of kvtierd share: the server, its event loops,
 * connections, in-flight frames, the log and the tenants table.
 *
 * kvtierd is the pod-level context store (G3.5): one libkvtier store (DRAM
 * and SSD tiers) behind the native wire protocol (lib/proto.h,
 * doc/protocol.md), shared by every inference engine of the pod.  It
 * reaches the library only through include/kvtier.h and the codec
 * lib/proto.h.
 *
 * Files, each calling only the ones listed after it (no cycle; the
 * protocols are reached only through the protocol table below):
 *   kvtierd.c  main: parse (the command line), open (the store,
 *              listeners, TLS), serve (loops, the signal loop, shutdown);
 *              installs the protocol table
 *   native.c   the native protocol's table entry: frames out of the read
 *              buffer, data sections in place or into their buffer
 *   ops.c      the native protocol: one handler per opcode, requests to
 *              the store in batches, responses when every item completed
 *   value.c    value bytes: PUT items from the data section, GET responses
 *              from pinned DRAM views with their stored part tables
 *   wire.c     native output: response frames, ERROR frames, BYE
 *   respd.c    the Redis-protocol listener (--resp): commands to the
 *              store through the loop's queue, replies in order
 *   httpd.c    the metrics listener (--metrics): /metrics, /healthz
 *   s3d.c      the S3 listener (--s3, doc/s3.md): heads, SigV4 before any
 *              body byte, bodies; s3ops.c its operations (buckets as
 *              namespaces, objects as blocks); s3reply.c its answers
 *              (s3d.h)
 *   sigv4.c    AWS Signature Version 4, server side (sigv4.h): pure, fuzzed
 *   s3http.c   HTTP/1.1 heads, chunked and aws-chunked bodies (s3http.h):
 *              pure, fuzzed
 *   loop.c     the event loops, which know no protocol: epoll, accept,
 *              connections, read buffers, the output queue, timeouts,
 *              the --max-memory budget, the aux thread
 *   metrics.c  latency histograms, per-tenant counters, the /metrics page
 *   counters.c the server's counters as one table (STATS and /metrics)
 *   tls.c      TLS on the TCP listeners (--tls-cert): the server's
 *              context, handshakes, and the socket I/O of every
 *              connection (plain or TLS)
 *   auth.c     tenants file, AUTH proofs, canonical descriptor parsing
 *   members.c, memberlist.c  the cluster's members (members.h)
 *   repair.c   healing the pod (repair.h, doc/cluster.md "Healing"):
 *              placed blocks, re-replication passes, drain, tombstones;
 *              ranks groups with lib/placement.h, the one library
 *              header besides kvtier.h and proto.h the server uses
 *   peer.c     a blocking native-protocol client (peer.h): repair.c to
 *              the other members (also linked into kvtier drain)
 *   config.c   options and the --config file (config.h): pure, fuzzed
 *   resp.c     the RESP2 codec (resp.h): pure, fuzzed
 *   http.c     the HTTP request-head parser (http.h): pure, fuzzed
 *   log.c      structured one-line logs to stderr or a file
 *   base.c     error-counter names, the clock, sizes: no dependencies
 *
 * Threads (doc/kvtierd.md "Threads"):
 *   main       parses options, opens the store, starts the others, then
 *              waits on a signalfd: SIGHUP reopens the log and reloads
 *              the tenants, SIGTERM/SIGINT stop the server
 *   kvtd-loopN one per --threads: its own epoll, its own kvt_queue (the
 *              queue's eventfd is in the epoll set) and its own
 *              connections; the listeners are in every loop's epoll with
 *              EPOLLEXCLUSIVE.  A connection, its frames and its output
 *              belong to the loop that accepted it and are touched by no
 *              other thread.
 *   kvtd-repair (repair.c, in a pod) waits for changes of the member
 *              list and runs repair passes and drains; blocking I/O to
 *              peers, kvt_get on the store
 *   kvtd-aux   runs jobs no loop should (kvtd_aux_submit: run there,
 *              done back on the loop through its mailbox, mail_lock +
 *              wake eventfd): registering a new namespace (fsyncs the
 *              registry), checking the stored parts of large range reads;
 *              each tenant's jobs in a queue of its own, served in turn
 *   library    libkvtier's own workers and I/O threads (kvtier.h)
 *
 * Locks: kvtd_loop.mail_lock (a loop's mailbox), kvtd_aux.lock (the aux
 * job list), the tenants table's lock (auth.c), the log's level is an
 * atomic and each line is one write(2).  No lock is held while taking
 * another, and none while calling into the library.  Counters are relaxed
 * atomics: each exact, together not a snapshot.
 */
#ifndef KVTIERD_H
#define KVTIERD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "kvtier.h"
#include "proto.h"
#include "members.h"
#include "config.h"

#define KVTD_NAME "kvtierd"
#define KVTD_VERSION KVTIER_VERSION_STRING /* meson.build, once */

#define KVTD_EXIT_OK 0
#define KVTD_EXIT_FAIL 1
#define KVTD_EXIT_USAGE 2

/* Tenant used for every connection when no --tenants file is given. */
#define KVTD_DEFAULT_TENANT "default"

/* ------------------------------------------------------------------------
 * Logging (log.c).  One line per event:
 *   ts=2026-11-29T19:16:50.123456Z level=info msg="..." key=value ...
 * Any thread; each line is a single write(2) (O_APPEND for files).
 */
enum kvtd_level { KVTD_ERROR = 0, KVTD_WARN = 1, KVTD_INFO = 2, KVTD_DEBUG = 3 };

/* Open --log FILE (NULL: stderr) at min_level.  0 or -errno. */
int kvtd_log_open(const char *path, int min_level);
/* SIGHUP: reopen the log file (after rotation).  0 or -errno. */
int kvtd_log_reopen(void);
/* sd_notify(3) to the service manager (notify.c): no-ops without
 * $NOTIFY_SOCKET.  status: a line for `systemctl status`. */
void kvtd_notify_ready(const char *status);
void kvtd_notify_stopping(void);

/* One event as a JSON object (logjson.c): the fixed keys ts, level, msg,
 * src (NULL: none), then the logfmt fields (NULL: none) as pairs.  A new
 * malloc'd NUL-terminated string without a newline, or NULL (no memory). */
typedef char *kvtd_log_json_fn(const char *ts, const char *level, const char *src,
			       const char *msg, const char *fields);
kvtd_log_json_fn kvtd_log_json;
/* --log-format json: every line after this call goes through fn (NULL:
 * logfmt again).  Main thread, before other threads log. */
void kvtd_log_set_json(kvtd_log_json_fn *fn);
void kvtd_log_close(void);
/* "error", "warn", "info", "debug" -> level, or -1. */
int kvtd_log_level_parse(const char *s);
bool kvtd_log_enabled(int level);
/*
 * msg is quoted as needed; fmt (may be NULL) appends " key=value ..." pairs
 * that the caller formats (values with spaces must be quoted by the
 * caller: kvtd_log_quote).
 */
void kvtd_log(int level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same for a line a client causes (a refused connection, a protocol
 * error, a failed AUTH): at most KVTD_LOG_CLIENT_PER_SEC a second
 * server-wide at info and above, the rest dropped and counted (log.c). */
#define KVTD_LOG_CLIENT_PER_SEC 50u
void kvtd_log_client(int level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Lines kvtd_log_client dropped since start; the counter itself (for
 * struct kvtd_server.log_dropped: STATS and /metrics, counters.c). */
uint64_t kvtd_log_client_dropped(void);
const _Atomic uint64_t *kvtd_log_client_dropped_ctr(void);
/* Write s into buf as a logfmt value (quoted and escaped if needed). */
const char *kvtd_log_quote(char *buf, size_t len, const char *s);
/* The library's log callback (kvt_store_set_log). */
void kvtd_log_lib(void *ctx, int level, const char *msg);

/* ------------------------------------------------------------------------
 * Tenants and authentication (auth.c)
 */
struct kvtd_tenants;

/*
 * Load a tenants file ("name secret role [dram=SIZE] [ssd=SIZE]" and
 * "grant OWNER WHAT to GRANTEE" lines, '#' comments; auth.c).  The file
 * must not be accessible by group or other.  Each tenant gets its quota
 * group when the table is installed (kvtd_auth_install; kept while its
 * name stays in the file), not here: a table loaded and freed, or a file
 * refused, changes nothing.  On failure errbuf gets a message.  0 or
 * -errno / -EINVAL.  Main thread.
 */
int kvtd_tenants_load(const char *path, struct kvtd_tenants **out, char *errbuf,
		      size_t errlen);
/* The parser behind kvtd_tenants_load: the file's text (len bytes, no NUL
 * needed).  No I/O.  Fuzzed (tests/fuzz/fuzz_tenants.c). */
int kvtd_tenants_parse(const char *text, size_t len, struct kvtd_tenants **out, char *errbuf,
		       size_t errlen);
void kvtd_tenants_free(struct kvtd_tenants *t);
unsigned kvtd_tenants_count(const struct kvtd_tenants *t);
/* The name of tenant i (< kvtd_tenants_count) of t, len bytes. */
const char *kvtd_tenants_name(const struct kvtd_tenants *t, unsigned i, size_t *len);

/* The first key (sigv4_key0, made when the table was installed) of the
 * S3 listener's SigV4 secret of a tenant (its s3_secret=, else its
 * secret) into out (SIGV4_KEY0_MAX bytes) with its role: 0, or
 * PROTO_EAUTH for an unknown tenant (out then holds a random key's, of the
 * same cost).  Any thread. */
int kvtd_auth_s3_secret(const char *tenant, size_t tenant_len, uint8_t *out, uint32_t *out_len,
			uint32_t *role);

/* A tenant's native secret (PROTO_SECRET_MAX bytes of out), for logging in
 * to a pod peer as that tenant (peer.c): 0, or PROTO_EAUTH.  Any thread. */
int kvtd_auth_peer_secret(const char *tenant, size_t tenant_len, uint8_t *out,
			  uint32_t *out_len);
/* The first tenant of the tenants file, for this server asking a pod peer
 * a question any tenant may ask (repair.c): its name in name[0..cap)
 * (NUL-terminated) and its secret, or PROTO_EAUTH (no tenants). */
int kvtd_auth_any_peer(char *name, size_t cap, uint8_t *secret, uint32_t *secret_len);
/* The table in use (replaced by SIGHUP); NULL when auth is off.  Gives
 * t's tenants their quota groups first (the point of no return of a
 * reload).  Main thread. */
void kvtd_auth_install(struct kvtd_tenants *t);
bool kvtd_auth_enabled(void);
/*
 * Check an HMAC AUTH: on success fill server_proof and *role, return 0;
 * otherwise PROTO_EAUTH (unknown tenant and wrong proof cost the same).
 * Any loop thread.
 */
int kvtd_auth_check(const char *tenant, uint32_t tenant_len,
		    const uint8_t server_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_proof[PROTO_PROOF_LEN],
		    uint8_t server_proof[PROTO_PROOF_LEN], uint32_t *role);
void kvtd_auth_shutdown(void);
/* Bumped by every kvtd_auth_install: what a connection cached about
 * namespaces under an older table is stale. */
uint64_t kvtd_auth_generation(void);
struct kvtd_conn;
/* A RESP or S3 connection just opened: without --tenants, the default
 * tenant as admin at once (auth.c). */
void kvtd_auth_open_conn(struct kvtd_conn *c);
/* The installed table's role of a tenant: 0, or -ENOENT (removed).  With
 * auth off, PROTO_ROLE_ADMIN.  Any thread. */
int kvtd_tenant_role(const char *name, size_t len, uint32_t *role);
/* The installed table's quota group of a tenant (0: unknown, auth off). */
uint32_t kvtd_tenant_group(const char *name, size_t len);
/* The tenant quota group g is given to now (tenants loaded since start,
 * removed ones' groups reused) into out: its name's length, 0 for none
 * (group 0, a group given back, or one just given whose base is not read
 * yet); *events_base: the group's events.<g>.dropped when it was given to
 * that tenant, not the tenant's own (/metrics subtracts it).  Any thread
 * (/metrics). */
size_t kvtd_tenant_group_name(uint32_t group, char out[PROTO_TENANT_MAX + 1],
			      uint64_t *events_base);
/* Does a grant of the installed table give grantee read access to owner's
 * namespace (model, digest)?  Any thread. */
bool kvtd_grant_allows(const char *owner, size_t owner_len, const char *model, size_t model_len,
		       const uint8_t digest[PROTO_DIGEST_LEN], const char *grantee,
		       size_t grantee_len);
/* Apply the installed table's quotas to the store and put every namespace
 * in its tenant's group (startup, SIGHUP).  0 or the first error. */
int kvtd_quota_apply(struct kvt_store *store);
/* Put namespace id in its tenant's group (after registering it). */
int kvtd_ns_apply_group(struct kvt_store *store, uint32_t id);
/* "512M", "8G", ... (base.c).  0 or -EINVAL. */
int kvtd_parse_size(const char *v, uint64_t *out);

/*
 * A canonical descriptor text (doc/keys.md) back into a descriptor.  The
 * strings point into store, which must hold text_len + 1 bytes and outlive
 * *d.  Strict: the text must be exactly what kvt_ns_digest writes.
 * 0 or KVT_EDESC.
 */
int kvtd_canon_parse(const char *text, size_t text_len, struct kvt_ns_desc *d, char *store);
/* The tenant of a canonical text: pointer into text and length (0 for
 * "-"), or -1 if the text has no tenant line. */
int kvtd_canon_tenant(const char *text, size_t text_len, const char **tenant);

/* ------------------------------------------------------------------------
 * Counters
 */
enum kvtd_err {
	KVTD_ERR_MAGIC,     /* not a kvtier frame */
	KVTD_ERR_VERSION,   /* unsupported or unnegotiated version */
	KVTD_ERR_BADOP,     /* unknown opcode */
	KVTD_ERR_FLAGS,     /* reserved flags */
	KVTD_ERR_COUNT,     /* counts out of range */
	KVTD_ERR_BADLEN,    /* lengths over the limits */
	KVTD_ERR_KEYLEN,
	KVTD_ERR_CRC,       /* header+table CRC */
	KVTD_ERR_MALFORMED,
	KVTD_ERR_RDMA,
	KVTD_ERR_AUTH,      /* failed AUTH */
	KVTD_ERR_NOAUTH,    /* request before AUTH */
	KVTD_ERR_STATE,     /* HELLO/AUTH out of sequence */
	KVTD_ERR_PERM,      /* admin-only request from a tenant */
	KVTD_ERR_TIMEOUT,   /* slow-loris, unauthenticated or stalled reader */
	KVTD_ERR_VANISHED,  /* peer closed mid-frame */
	KVTD_ERR_IO,        /* read/write errors on the socket */
	KVTD_ERR_NOMEM,     /* server out of memory for a frame */
	KVTD_ERR_REQUEST,   /* other whole-request failures (unknown namespace, ...) */
	KVTD_ERR_TLS,       /* TLS handshake failed (plain client, bad certificate) */
	KVTD_ERR__COUNT
};
extern const char *const kvtd_err_names[KVTD_ERR__COUNT];

struct kvtd_counters {
	_Atomic uint64_t conns_accepted, conns_active, conns_closed;
	_Atomic uint64_t frames_in, frames_out, bytes_in, bytes_out;
	/* of frames_in: pod peers' and control frames (repair.c paces by the rest) */
	_Atomic uint64_t peer_frames_in;
	_Atomic uint64_t items_in;
	_Atomic uint64_t ops[PROTO_OP__COUNT];
	_Atomic uint64_t auth_ok;
	_Atomic uint64_t tls_handshakes; /* completed */
	_Atomic uint64_t tls_ktls;       /* of them, sending through kernel TLS */
	_Atomic uint64_t tls_throttled;  /* closed before a handshake: its address
					  * past KVTD_AUTH_FAILS_PER_SEC */
	_Atomic uint64_t tls_hs_timeouts; /* handshakes past their deadline after
					   * bytes came (loop.c loop_sweep) */
	_Atomic uint64_t tls_deferred;   /* TLS reads left for the next iteration:
					  * the payer's records spent (loop.c) */
	_Atomic uint64_t tls_mem_refused; /* TLS connections refused for their SSL's
					   * memory: at the accept, or at AUTH past
					   * the tenant's share (loop.c "The SSL
					   * object") */
	_Atomic uint64_t tls_unused; /* TLS connections the peer ended after the
				      * handshake without a byte of application
				      * data: failures of its address (loop.c
				      * "A TLS handshake never used") */
	_Atomic uint64_t tls_quiet_closed; /* TLS connections closed past their
					    * budget of records with no application
					    * data (tls.c "Records the application
					    * never sees") */
	_Atomic uint64_t value_crc_errors; /* stored parts failing their CRC on a range read */
	/* GET items read again after a chunk that found another version of
	 * their key, or that found another than their key's first item in
	 * one pass: misses (value.c "Versions") */
	_Atomic uint64_t get_version_misses;
	_Atomic uint64_t errors[KVTD_ERR__COUNT];
	/* Overload (loop.c "Limits"): connections refused past --max-conns,
	 * frames refused because --max-memory was reached, and times a
	 * connection's reads were paused for memory */
	_Atomic uint64_t conns_refused, mem_refused, mem_paused;
	/* ... and times because its tenant's queued answers held their share
	 * of --max-memory (KVTD_OUT_TENANT_MAX) */
	_Atomic uint64_t out_share_paused;
	/* times a connection's parsing stopped at KVTD_PARSE_FRAMES in one
	 * loop iteration, the rest left for the next (kvtd_conn_defer) */
	_Atomic uint64_t parse_deferred;
	/* quiet GET items answered as a miss: their private copy would pass
	 * the connection's or the server's bound (ops.c "Quiet GETs") */
	_Atomic uint64_t copy_refused;
	/* namespaces refused past KVTD_NS_TENANT_MAX */
	_Atomic uint64_t ns_refused;
	/* GET frames answered in chunks because their pins would pass a cap */
	_Atomic uint64_t pin_deferred;
	/* S3 copies, Completes and DeleteObjects left for a later iteration
	 * of their loop (s3ops.c "Work on the loop") */
	_Atomic uint64_t work_deferred;
	/* S3 listings answered SlowDown: their tenant's walks of the store
	 * were at their limit (s3ops.c "Walks of the store") */
	_Atomic uint64_t s3_scan_refused;
	/* CLEARs (native frames, RESP FLUSHDB) refused: their tenant had
	 * KVTD_CLEAR_TENANT in progress (ops.c "A CLEAR's walks") */
	_Atomic uint64_t clear_refused;
	/* /metrics pages rendered (scrapes of one loop iteration share one:
	 * httpd.c "One render") */
	_Atomic uint64_t metrics_renders;
	/* /metrics requests answered 503: HTTPD_PAGES_LOOP pages were in
	 * flight on their loop (httpd.c "Pages in flight") */
	_Atomic uint64_t metrics_refused;
	/* S3 PUTs parked for SSD write-down room (s3d.c "Parking"), and those
	 * answered 503 because none came within ssd.writedown_wait_ms */
	_Atomic uint64_t put_parked, put_park_timeouts;
	/* of conns_refused: past the unauthenticated limits (loop.c) */
	_Atomic uint64_t unauth_refused;
	/* unauthenticated connections closed, the oldest of their loop, to
	 * admit a new one while half of --max-conns were unauthenticated
	 * (loop.c loop_unauth_evict) */
	_Atomic uint64_t unauth_evicted;
	/* of conns_refused: past --tenant-conns, after AUTH (metrics.c
	 * kvtd_tenant_conn_admit) */
	_Atomic uint64_t tenant_conns_refused;
	/* of conns_refused: their tenant had no entry in the per-tenant
	 * table (full, or no memory: metrics.c kvtd_tenant_conn_admit) */
	_Atomic uint64_t tenant_table_refused;
	/* of conns_refused: shed at EMFILE with the spare descriptor, and
	 * times a loop took its listeners out of epoll instead (loop_shed) */
	_Atomic uint64_t conns_shed, listen_paused;
	/* closes that lingered (loop.c loop_conn_linger) */
	_Atomic uint64_t conns_lingered;
	/* SIGHUP (kvtierd.c kvtierd_reload): 1 while the tenants file the last
	 * reload read was taken (1 from the start), 0 while a refused one left
	 * the old tenants serving; and the reloads refused */
	_Atomic uint64_t tenants_reload_ok, tenants_reload_failures;
	/* RESP's expiry index (expiry.c): entries held now (a gauge), those
	 * dropped (full, the namespace's share, --max-memory), and of those
	 * the sweep popped, the values deleted and those left (not expired
	 * any more, gone, or a write of the stripe in progress: respd.c
	 * "Active expiry") */
	_Atomic uint64_t resp_expiry_held, resp_expiry_dropped;
	_Atomic uint64_t resp_expiry_swept, resp_expiry_skipped;
};

#define KVTD_COUNT(srv, field, n) \
	atomic_fetch_add_explicit(&(srv)->ctr.field, (uint64_t)(n), memory_order_relaxed)

/* counters.c: the server's counters and gauges as one table, read by
 * STATS (ops.c, name "server.*"; NULL: not in STATS) and /metrics
 * (metrics.c; metric NULL: not there), in that table's order.  A row's
 * value is at off in struct kvtd_server, of type kind (_REF: the field
 * there points to the atomic, which lives elsewhere: log.c's). */
struct kvtd_server;
enum kvtd_ctr_kind { KVTD_CTR_ATOMIC_U64, KVTD_CTR_ATOMIC_UINT, KVTD_CTR_U64,
		     KVTD_CTR_ATOMIC_U64_REF };
struct kvtd_counter_def {
	const char *stat;                 /* "server.<name>", or NULL */
	const char *metric, *type, *help; /* kvtier_<name>, "counter"/"gauge"; or NULL */
	size_t off;
	enum kvtd_ctr_kind kind;
	int part; /* /metrics: 1 before kvtier_loop_connections, 2 after repair */
};
extern const struct kvtd_counter_def kvtd_counter_defs[];
extern const size_t kvtd_counter_def_count;
uint64_t kvtd_counter_value(const struct kvtd_server *srv, const struct kvtd_counter_def *d);

/* A proto/kvtier error code to the counter it bumps (base.c). */
enum kvtd_err kvtd_err_of(int code);
/* A peer address's slot of the per-address limits, 0..KVTD_PEER_SLOTS-1:
 * an IPv4 address, an IPv6 /64, a Unix client's user id (uid, with
 * is_unix); keyed (base.c). */
#define KVTD_PEER_SLOTS 4096u            /* hashed peer addresses (loop.c) */
uint32_t kvtd_peer_slot(uint64_t key, const struct sockaddr_storage *ss, bool is_unix,
			uint32_t uid);

/*
 * The per-address limits count an address in KVTD_PEER_ROWS rows of
 * KVTD_PEER_SLOTS slots, count-min style: one slot of each row, each
 * row's slot hashed under a key of its own (kvtd_peer_slot with
 * kvtd_server.peer_key[row]; kvtd_conn.peer_slot[row]), and an address's
 * count is the least of its slots'.  Addresses sharing a slot add up in
 * it, so each slot holds at least each of its addresses' own count, and
 * so does the least: an address is never let past its limit; one that
 * shares a slot of one row with a flooder (a 1-in-4,096 chance a
 * flooding address) is refused only if it shares its slot of the other
 * row with one too.  Until session 48 one row: the flooder's neighbours
 * refused with it (doc/security.md "Session 48: TLS throttle slots";
 * "Session 48 review: unauthenticated connections in two rows").
 */
#define KVTD_PEER_ROWS 2u

/*
 * The per-address failure throttle (failed AUTHs, failed or unused TLS
 * handshakes; loop.c kvtd_auth_failed): the rows' counters of the current
 * second.  32 KiB a row, fixed.  Any thread: relaxed atomics (base.c).
 */
struct kvtd_throttle {
	_Atomic uint32_t sec[KVTD_PEER_ROWS][KVTD_PEER_SLOTS];   /* second counted */
	_Atomic uint32_t fails[KVTD_PEER_ROWS][KVTD_PEER_SLOTS]; /* in that second */
};
/* Are all of slot[0..KVTD_PEER_ROWS) at limit failures or more in the
 * second sec? */
bool kvtd_throttle_over(struct kvtd_throttle *t, const uint32_t *slot, uint64_t sec,
			uint32_t limit);
/* One failure in the second sec, counted in each of slot[0..ROWS). */
void kvtd_throttle_fail(struct kvtd_throttle *t, const uint32_t *slot, uint64_t sec);

/* A per-address count in the rows (loop.c: kvtd_server.peer_unauth, the
 * unauthenticated connections, loop_unauth_add; peer_tls_mem, their SSLs'
 * bytes, loop_tls_mem_admit): n more in each of slot[0..KVTD_PEER_ROWS),
 * and the address's count before it (the least of the slots' counts
 * before); kvtd_peer_count_sub takes n back from each.  Any thread:
 * relaxed atomics (base.c). */
uint64_t kvtd_peer_count_add(_Atomic uint64_t (*rows)[KVTD_PEER_SLOTS], const uint32_t *slot,
			     uint64_t n);
void kvtd_peer_count_sub(_Atomic uint64_t (*rows)[KVTD_PEER_SLOTS], const uint32_t *slot,
			 uint64_t n);

/* Configuration: struct kvtd_config and its parser are in config.h. */

/* ------------------------------------------------------------------------
 * Event loops, connections and frames (loop.c, ops.c)
 */
/*
 * The protocols a listener may speak: each is one entry of the protocol
 * table (struct kvtd_proto below).  Library requests carry user_data
 * whose low bits say which protocol's req_done gets them
 * (KVTD_UD_PROTO_MASK; request structs are 8-byte aligned).
 */
enum kvtd_proto_id {
	KVTD_PROTO_NATIVE = 0,
	KVTD_PROTO_RESP = 1,
	KVTD_PROTO_HTTP = 2,
	KVTD_PROTO_S3 = 3,
	KVTD_PROTO__COUNT = 8
};
#define KVTD_UD_PROTO_MASK 7u

#define KVTD_UD_RESP ((uint64_t)KVTD_PROTO_RESP)

enum kvtd_ev_kind { KVTD_EV_LISTEN = 1, KVTD_EV_CONN, KVTD_EV_WAKE, KVTD_EV_QUEUE };

/* First member of everything whose address is an epoll_event's data.ptr. */
struct kvtd_ev {
	int kind;
};

struct kvtd_listener {
	struct kvtd_ev ev;
	int fd;
	bool is_unix;
	int proto;             /* enum kvtd_proto: what its connections speak */
	bool tls;              /* its connections speak TLS first (tls.c) */
	char name[128];        /* "127.0.0.1:7070" or the socket path */
};

struct kvtd_server;
struct kvtd_loop;
struct kvtd_conn;
struct kvtd_frame;

/* Output: one encoded response frame (header + table) and the value bytes
 * that follow it, written with sendmsg; pins are released and buffers freed
 * once the last byte is written (or the connection dies). */
struct kvtd_out {
	struct kvtd_out *next;
	struct iovec *iov;     /* iov[0]: header + table (hdr) */
	unsigned iov_count;
	unsigned iov_pos;      /* first iovec not fully written */
	size_t iov_off;        /* bytes of iov[iov_pos] already written */
	uint8_t *hdr;          /* owned */
	uint64_t *pins;        /* owned: pins to release when written */
	unsigned pin_count;
	void *buf;             /* owned: value bytes copied out (or NULL) */
	void *keep;            /* owned: a request's bytes some iovecs point into
				* (a RESP ECHO's argument, sent from its command's
				* bytes, no copy), or NULL */
	uint64_t keep_len;     /* what keep holds: charged (kvtd_conn_queue) in
				* place of keep_ref_len, the frame's bytes in it */
	uint64_t keep_ref_len;
	uint64_t bytes;        /* total bytes of this frame */
	uint64_t mem_len;      /* bytes charged to mem_used (kvtd_conn_queue) */
	uint64_t pin_len;      /* bytes it sends from pinned values -- its own pins
				* or those a later output of the reply carries --
				* never charged (kvtd_conn.pin_bytes) */
	uint64_t pin_held;     /* the values its pins hold, when more than pin_len:
				* an S3 answer of a Range keeps its whole object
				* pinned, and is counted so in the pin caps
				* (kvtd_out_pinned); 0: pin_len */
	bool pin_exact;        /* pin_held is what it counts, even below pin_len:
				* a native GET's answer counts the values its own
				* pins hold, each once; the bytes it sends from a
				* pin a later output carries count there (a
				* grantee's duplicates, value.c) */
	struct kvtd_tstat *pin_tstat; /* the tenant pin_len counts in (pinned): set
				       * before kvtd_conn_queue by a protocol whose
				       * connection has several (S3: the GET's
				       * signer), else the connection's then */
	unsigned pin_slot;     /* its tenant's of kvtd_conn.pin_by, or
				* KVTD_CONN_PIN_TENANTS: pin_others (or none) */
	uint64_t copy_len;     /* of them, private SSD copies of quiet GETs behind
				* pins (charged before it was queued; also in the
				* connection's copy_bytes until written) */
	struct kvtd_tstat *copy_tstat; /* the tenant copy_len also counts in
					* (kvtd_tstat.copies), or NULL */
	struct kvtd_tstat *tstat; /* the tenant its queued charge (tenant_len)
				   * counts in (kvtd_tstat.out_charged), or NULL:
				   * set before kvtd_conn_queue as pin_tstat (S3:
				   * the request's signer), else the connection's then */
	struct kvtd_tstat *sent_tstat; /* the tenant its bytes written count in
					* (kvtd_tstat.bytes_out): tstat's when
					* queued, charged or not, not the
					* connection's when written */
	uint64_t tenant_len;
	unsigned *held;        /* a count of its loop it holds one of until freed
			        * (httpd: the loop's metrics_out), or NULL */
	struct iovec iov_small[2];
};

/* What an output entry counts in its connection's pin_bytes and its
 * tenant's pinned: the values its pins hold (pin_held), at least the
 * bytes it sends from them -- unless pin_exact (a native GET's). */
static inline uint64_t kvtd_out_pinned(const struct kvtd_out *o)
{
	if (o->pin_exact)
		return o->pin_held;
	return o->pin_held > o->pin_len ? o->pin_held : o->pin_len;
}

/* One namespace a connection has named: the check "is it this tenant's?"
 * is done once per connection and digest. */
struct kvtd_nsent {
	uint8_t digest[PROTO_DIGEST_LEN];
	uint32_t id;
	bool used;
	bool allowed;
	bool readonly;         /* another tenant's, granted: LOOKUP, EXISTS, GET only */
};

enum kvtd_conn_state {
	KVTD_CS_HELLO = 0,  /* expects HELLO */
	KVTD_CS_AUTH,       /* expects AUTH */
	KVTD_CS_READY,      /* authenticated */
};

/* Tenants a connection's queued pinned answers are tracked by
 * (kvtd_conn.pin_by): one, or two across an AUTH, in practice */
#define KVTD_CONN_PIN_TENANTS 4u

struct kvtd_conn {
	struct kvtd_ev ev;
	struct kvtd_loop *loop;
	struct kvtd_conn *prev, *next; /* the loop's list */
	int fd;                /* -1 once closed */
	uint64_t id;
	bool is_unix;
	int proto;             /* enum kvtd_proto (from its listener) */
	const struct kvtd_proto *ops; /* its protocol's table entry */
	bool put_stream;       /* the last frame was a PUT received in place: the
				* next header is read in KVTD_HDR_STEP steps, so
				* that a next PUT's value bytes go straight to DRAM
				* rather than through rbuf (loop_conn_read) */
	void *alt;             /* the protocol's own state (RESP, HTTP), or NULL */
	struct kvtd_tstat *tstat; /* per-tenant counters, once the tenant is known */
	char peer[80];
	bool pod_peer;         /* HELLO named daemon/peer.c: a member's repair, an admin poll */

	/* TLS (tls.c): SSL *, or NULL for a plain connection */
	void *tls;
	bool tls_ready;        /* handshake done */
	uint8_t tls_rd_want;   /* TLSIO_WANT_*: the last read waits for this event */
	int tls_lowat;         /* SO_RCVLOWAT set while the first record comes
				* (tls.c "The first record"); 0 or 1: not */
	uint8_t tls_wr_want;   /* ... the last write */
	uint32_t tls_records;  /* records its reads took, not yet charged (loop.c) */
	uint32_t tls_rbuf;     /* the SSL's read buffer, charged (loop.c "The SSL's
				* read buffer"), 0: none */
	struct kvtd_tstat *tls_rbuf_tstat; /* the tenant tls_rbuf counts in */
	uint32_t tls_mem;      /* the SSL itself, charged from the accept until
				* the close (loop.c "The SSL object"), 0: none */
	bool tls_mem_unauth;   /* ... and counted in srv->tls_unauth_mem */
	bool tls_mem_peer;     /* ... and in srv->peer_tls_mem at peer_slot */
	bool tls_quiet_over;   /* past TLS_QUIET_MAX: closed at its next read */
	bool tls_unused_counted; /* loop_tls_unused counted it */
	uint64_t tls_ready_ns;   /* its handshake done (loop now_ns): loop_tls_unused */
	uint16_t tls_quiet;    /* records with no application data read since
				* tls_quiet_ns (KeyUpdates, alerts: tls.c "Records
				* the application never sees") */
	uint64_t tls_quiet_ns; /* that window's start */
	uint32_t tls_seen;     /* TLS 1.3 records decrypted since the handshake,
				* whatever they carry (tls.c tls_fill) */

	/* Protocol state */
	int state;             /* enum kvtd_conn_state */
	uint16_t version;      /* negotiated */
	uint8_t nonce[PROTO_NONCE_LEN];
	char tenant[PROTO_TENANT_MAX + 1];
	uint32_t tenant_len;
	uint32_t role;         /* PROTO_ROLE_* */
	uint64_t auth_gen;     /* kvtd_auth_generation() role was resolved under
				* (0: not yet; loop.c kvtd_conn_auth_current) */

	/* Input: rbuf[rstart, rend) holds bytes of frames not yet taken;
	 * rbuf == loop->rbuf: the loop's read buffer, lent for one read
	 * (loop.c kvtd_conn_read_rbuf, "Read buffers") */
	uint8_t *rbuf;
	size_t rcap, rstart, rend;
	struct kvtd_frame *rx; /* frame whose data section is being received */
	uint64_t rx_got;       /* its data bytes received (or rx_drop's dropped) */
	uint64_t rx_mark;      /* rx_got when the slow-loris clock last restarted */
	/* A frame refused before it was taken (native.c): the bytes of its
	 * data section still to read and drop, then its answer's opcode,
	 * tag and status */
	uint64_t rx_drop;
	uint64_t rx_drop_tag;
	uint16_t rx_drop_op;
	int rx_drop_status;
	/* ... refused from its header, before its table came: the CRC32C of
	 * its header and table, checked as they are dropped (a mismatch
	 * closes the connection: the header that said what to drop cannot be
	 * trusted); rx_crc_end: their bytes (0: nothing to check), rx_got
	 * counting from the frame's first byte */
	uint64_t rx_crc_end;
	uint32_t rx_crc, rx_crc_want;
	/* A table larger than KVTD_RBUF_MIN still arriving (native.c): its
	 * bytes held in tbl_tstat's input share until the frame is whole */
	uint64_t tbl_share;
	struct kvtd_tstat *tbl_tstat;
	/* ... and one the share refused while frames of c were in flight:
	 * its bytes (header included); c is not read until they are
	 * answered (kvtd_conn_in_share_over), 0: none */
	uint64_t tbl_want;
	uint64_t frame_start_ns; /* first byte of an incomplete frame, 0: none */
	uint64_t accept_ns;

	/* Frames accepted and not yet answered (their responses may still
	 * be owed even after the socket closed) */
	unsigned inflight;
	bool no_more_input;    /* BYE seen or a fatal error: read nothing more */
	bool bye_pending;      /* BYE read: answer it once nothing else is in flight */
	uint64_t bye_tag;
	bool close_when_flushed;
	bool read_paused;      /* EPOLLIN off: too much in flight, or parked */
	bool parked;           /* a request waits for write-down room (s3d.c
				* "Parking"): nothing more is read until it resumes */
	bool pin_paused;       /* its queued answers pin past a cap (RESP, whose
				* in-order answers cannot be chunked): not read
				* until they drain (respd.c respd_pin_flow) */
	unsigned order_hold;   /* its DELETE and CLEAR frames whose store
				* requests are not all back: nothing more is
				* parsed or read until they are (ops.c "One
				* connection's writes in order") */
	bool dead;             /* fd closed; freed when inflight drops to 0 */
	bool touched;          /* on the loop's touched list */
	bool deferred;         /* on the loop's deferred list (kvtd_conn_defer) */
	bool parse_tenant;     /* stopped by its tenant's budget: parsed first next */
	uint64_t parse_iter;   /* the loop iteration parse_frames counts in */
	unsigned parse_frames; /* frames taken in it (KVTD_PARSE_FRAMES) */
	uint64_t parse_items;  /* and their items (KVTD_PARSE_ITEMS) */
	uint32_t events;       /* registered epoll events */

	/* Output queue */
	struct kvtd_out *out_head, *out_tail;
	uint64_t out_bytes;    /* bytes queued, not yet written */
	uint32_t out_entries;  /* entries queued: each costs KVTD_OUT_COST more */
	uint64_t out_stall_ns; /* output pending since, without progress */

	/* Namespaces named by this connection (open addressing) */
	struct kvtd_nsent *ns;
	unsigned ns_cap, ns_used;
	uint64_t ns_gen;       /* kvtd_auth_generation() the cache was filled under */

	/* Per-connection counters, for logs */
	uint64_t frames, bytes_in, bytes_out;

	/* Counted among the unauthenticated connections (loop.c), in
	 * kvtd_server.peer_unauth's rows at peer_slot; while not lingering,
	 * in its loop's list of them by unauth_prev/unauth_next, in accept
	 * order (loop.c loop_unauth_evict) */
	bool unauth;
	/* Its address's slot of each row of the per-address limits: the
	 * unauthenticated count (peer_unauth) and the failure throttle
	 * (kvtd_server.throttle) */
	uint32_t peer_slot[KVTD_PEER_ROWS];
	struct kvtd_conn *unauth_prev, *unauth_next;

	/* Bytes of this connection charged to kvtd_server.mem_used */
	uint64_t mem_rbuf;     /* rbuf capacity beyond KVTD_RBUF_MIN */
	/* Pinned bytes of its queued output, and of its tenant's (tstat):
	 * capped (ops.c "Pinned answers"); a GET frame waiting for them to
	 * drain; the drain clock (loop.c sweep) */
	uint64_t pin_bytes;
	/* Of pin_bytes, the tenants its queued answers count them in
	 * (kvtd_out.pin_tstat), each one's bytes: an AUTH may switch a RESP
	 * connection's tenant while its earlier commands' answers are
	 * queued.  At most KVTD_CONN_PIN_TENANTS, the rest's bytes in
	 * pin_others (kvtd_conn_pin_tenants_over) */
	struct kvtd_pin_by {
		struct kvtd_tstat *t;
		uint64_t bytes;
	} pin_by[KVTD_CONN_PIN_TENANTS];
	uint64_t pin_others;
	struct kvtd_frame *pin_wait, *pin_wait_tail; /* FIFO by pin_next */
	bool pin_resuming;     /* kvtd_get_resume called from ops_get_answer */
	uint64_t drain_mark_ns, drain_mark_out;
	uint64_t copy_bytes;   /* private SSD copies held for its quiet GETs
				* (ops.c "Quiet GETs"), at most KVTD_COPY_CONN_MAX */
	/* The tenant whose connection count (kvtd_tstat.conns) it is in,
	 * or NULL (kvtd_tenant_conn_admit) */
	struct kvtd_tstat *conns_tstat;
	/* The tenants' table entries it holds (metrics.c "The tenants
	 * table"): each tenant it was admitted as, given back when it is
	 * freed (loop_reap), so that no pointer its frames, answers or
	 * requests keep outlives the entry */
	struct kvtd_tstat **tstat_held;
	uint32_t tstat_held_count;
	/* Lingering close (loop.c loop_conn_linger): our side shut down,
	 * its input read and dropped until the peer closes, all we sent is
	 * acknowledged, or KVTD_LINGER_MS / KVTD_LINGER_BYTES pass */
	bool lingering;
	uint64_t linger_ns, linger_bytes;
};

/* A job for the aux thread: work that may block on the disk (a frame
 * whose namespace registrations must be made: they may fsync). */
struct kvtd_job {
	struct kvtd_job *next;
	void (*run)(void *arg);   /* on the aux thread */
	void (*done)(void *arg);  /* then on the loop */
	void *arg;
	struct kvtd_loop *loop;   /* where the job goes back to */
};

/* One owner's short jobs on the aux thread -- a tenant's (in its
 * kvtd_tstat) or the server's own (kvtd_aux.own) -- in order; the owners
 * with jobs queued form a ring the thread serves one job at a time
 * (loop.c "The aux thread").  Guarded by kvtd_aux.lock. */
struct kvtd_auxq {
	struct kvtd_job *head, *tail;
	struct kvtd_auxq *next;   /* in the ring, while queued */
	bool queued;              /* in the ring (it has jobs) */
};

/* A connection accepted by one loop for another (loop.c "Accepting"). */
struct kvtd_accepted {
	struct kvtd_accepted *next;
	int fd;
	struct kvtd_listener *l;
	struct sockaddr_storage ss;
};

/* Slots of a loop's table of what each tenant took in an iteration
 * (kvtd_loop tparse) when it is first made; it doubles past half full,
 * so every tenant seen in an iteration has one (loop.c "Tenants an
 * iteration"). */
#define KVTD_PARSE_TENANTS 64

struct kvtd_loop {
	struct kvtd_ev wake_ev;   /* KVTD_EV_WAKE */
	struct kvtd_ev queue_ev;  /* KVTD_EV_QUEUE */
	struct kvtd_server *srv;
	unsigned idx;
	pthread_t thread;
	bool started;
	int epfd;
	int wakefd;               /* eventfd: stop, mailbox */
	struct kvt_queue *q;
	int qfd;
	struct kvtd_conn *conns;  /* this loop's connections */
	unsigned conn_count;
	/* Its unauthenticated connections not lingering, in accept order:
	 * the oldest first (loop.c loop_unauth_evict) */
	struct kvtd_conn *unauth_head, *unauth_tail;
	/* Live connections, read by other loops choosing where a new one
	 * goes (loop.c "Accepting"); written by this loop only */
	_Atomic unsigned conn_live;
	unsigned live_frames;     /* frames of this loop not yet freed */
	uint64_t now_ns;          /* CLOCK_MONOTONIC, refreshed per iteration */
	uint64_t last_sweep_ns;
	uint64_t expire_tick_ns;  /* loop 0: its last expiry sweep (respd.c) */
	unsigned expire_left;     /* loop 0: probes its sweep may still send */
	unsigned expire_inflight; /* loop 0: its sweep's probes in the store,
				   * each holding a quiet slot (respd.c) */
	bool listening;
	bool stopping;
	/* kvtd_loops_finish: the store is closed, its pins dropped (their
	 * views freed): what comes back from the mailbox or the queue reads
	 * no view (respd.c respd_step, s3ops.c s3d_store_closed; native
	 * frames: their connections are closed, ops.c ops_finish) */
	bool store_closed;
	int spare_fd;             /* /dev/null, given back to shed at EMFILE */
	uint64_t listen_resume_ns; /* listeners paused until then (0: not) */
	uint64_t auth_gen;        /* tenants table its connections were checked under */
	/* Connections with work left for the end of the iteration */
	struct kvtd_conn **touched;
	unsigned touched_n, touched_cap;
	/* Connections whose buffered frames wait for the next iteration
	 * (kvtd_conn_defer), and the iteration count */
	struct kvtd_conn **deferred;
	unsigned deferred_n, deferred_cap;
	uint64_t iter;
	/* The /metrics page rendered in iteration metrics_iter: the scrapes
	 * of one iteration share one render (httpd.c "One render") */
	char *metrics_page;
	size_t metrics_page_len;
	/* The read buffer lent to each connection whose own is NULL for a
	 * read (KVTD_RBUF_MIN; NULL when a connection kept it: made again
	 * at the next read); lent to the connection whose rbuf it is
	 * (loop.c "Read buffers") */
	uint8_t *rbuf;
	uint64_t metrics_iter;
	/* /metrics pages queued on this loop's connections and not yet
	 * written (httpd.c "Pages in flight": at most HTTPD_PAGES_LOOP) */
	unsigned metrics_out;
	/* What each tenant's connections took in iteration tparse_iter, all
	 * together (KVTD_PARSE_TENANT_FRAMES): every tenant seen in it, in an
	 * open-addressing table keyed by its tstat (tparse_cap slots, a power
	 * of two; a slot of an earlier iteration is empty), or, once memory
	 * was refused, in tparse_over, shared (loop.c "Tenants an
	 * iteration") */
	struct kvtd_tparse {
		const struct kvtd_tstat *t;
		uint64_t iter;
		unsigned frames;
		uint64_t items;
	} *tparse, tparse_over;
	unsigned tparse_cap, tparse_n;
	uint64_t tparse_iter;
	/* TLS records the unauthenticated connections read in iteration
	 * tls_unauth_iter, all together (loop.c "TLS records a loop
	 * iteration") */
	uint64_t tls_unauth_iter, tls_unauth_records;
	/* S3 and RESP work done in iteration work_iter (s3ops.c "Work on
	 * the loop", respd.c "Keys a loop iteration"), KVTD_WORK_ITER a turn */
	uint64_t work_iter, work_units;
	bool work_inline;         /* the mailbox had no memory: taken at once */
	/* Mailbox, guarded by mail_lock: frames handed back by the aux
	 * thread, and connections accepted by another loop for this one */
	pthread_mutex_t mail_lock;
	struct kvtd_job *mail_head, *mail_tail;
	struct kvtd_accepted *new_head, *new_tail;
};

struct kvtd_aux {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;     /* guards the queues, the ring, walks, stop */
	pthread_cond_t cond;
	/* Short jobs: one queue per owner (kvtd_auxq), the owners with jobs
	 * in a ring served in turn, so that one tenant's backlog (range
	 * checks pipelined on many connections) delays another's job by one
	 * of its own at most, not by all of them (test_hostile aux_share) */
	struct kvtd_auxq own;     /* jobs of no tenant */
	struct kvtd_auxq *ring_head, *ring_tail;
	/* Walks of the whole store (S3 listings: kvtd_aux_submit_walk), taken
	 * only when no other job waits: another tenant's job waits for at
	 * most the walk running, not for every listing tenant's 2 queued */
	struct kvtd_job *walk_head, *walk_tail;
#define KVTD_AUX_SHORTS 16u /* short jobs run ahead of a waiting walk, at most */
	bool stop;
};

/* A pin set (its functions below, kvtd_pinset_init ...). */
struct kvtd_pinslot {
	uintptr_t at;
	uint64_t refs;
	uint64_t len; /* what its first hold counted (kvtd_pinset_hold) */
};
struct kvtd_pinset {
	struct kvtd_pinslot *slot;
	uint64_t cap, used;
};

/* RESP's writes of the keys of one stripe (respd.c "Expiry"): a SET's
 * put counts in started (under lock) before it goes to the store and in
 * finished once it is back; the delete of an expired value a read found
 * goes only while started is what it was before that read, under lock. */
#define KVTD_RESP_WSEQ 256u
struct kvtd_resp_wseq {
	pthread_mutex_t lock;
	_Atomic uint64_t started;
	_Atomic uint64_t finished;
};

/*
 * The S3 listener's server-wide state (s3ops.c, s3reply.c; made by
 * kvtd_s3_init before any request, with or without --s3).
 */
struct kvtd_s3 {
	/* Of mem_used: S3 header reads in flight (s3ops.c "Header reads"),
	 * KVT_PART_QUIET_MEM each */
	_Atomic uint64_t hdr_charged;
	/* S3 listings walking the store of tenants without counters (s3ops.c) */
	_Atomic uint32_t scans_untracked;
	/* S3 writes in progress and DeleteBuckets, by bucket namespace, and
	 * AbortMultipartUploads in progress, by upload (s3ops.c "DeleteBucket
	 * against the bucket's writes", "Sweeps") */
	pthread_mutex_t gate_lock;
	struct kvtd_pinset gate; /* (gate_lock) */
	_Atomic uint64_t create_word; /* the last CreateBucket's word (s3ops.c) */
	/* Tests' hooks, read from the environment once, by kvtd_s3_init
	 * (s3ops.c "Sweeps"): KVTD_TEST_S3_SWEEP_FAIL=N[:K], part N's
	 * presence fails (ENOMEM) in the first K Aborts' sweeps (0: all);
	 * KVTD_TEST_S3_SWEEP_PAUSE_MS=M, an Abort's first sweep waits M ms
	 * on the aux thread after its first window;
	 * KVTD_TEST_S3_RECHECK_PAUSE_MS=M, an UploadPart's (UploadPartCopy's)
	 * recheck of its upload's marker, once the part is stored, waits M
	 * ms on the aux thread first (test_s3_podfail);
	 * KVTD_TEST_S3_COMPLETE_FAIL=N, part N's presence fails (ENOMEM) in
	 * every Complete's sweep; KVTD_TEST_S3_RECHECK_FAIL=1, every
	 * UploadPart's recheck fails (ETIMEDOUT, as a pod's; s3f48,
	 * test_s3_podfail).  0: none. */
	uint32_t test_sweep_fail_part, test_sweep_fail_aborts, test_sweep_pause_ms;
	uint32_t test_recheck_pause_ms, test_complete_fail_part;
	bool test_recheck_fail;
	_Atomic uint32_t test_sweeps_failed; /* Aborts the first hook failed */
};

struct kvtd_server {
	struct kvtd_config cfg;
	struct kvt_store *store;
	struct proto_limits lim;  /* what this server accepts (HELLO) */
	uint64_t dram_max_value;  /* largest value the DRAM tier holds */
	bool tiers_below;         /* a remote or shared tier below SSD, which quiet
				   * reads do not ask (s3ops.c "Header reads") */
	struct kvtd_loop *loops;
	unsigned loop_count;
	struct kvtd_listener *listeners;
	unsigned listener_count;
	struct kvtd_cluster cluster; /* members.c */
	struct kvtd_repair *repair;  /* repair.c: healing, or NULL outside a pod */
	struct kvtd_aux aux;
	_Atomic bool stopping;
	_Atomic uint64_t next_conn_id;
	_Atomic unsigned next_accept_loop; /* loop.c "Accepting": ties rotate */
	uint64_t start_ns;
	struct kvtd_counters ctr;
	struct kvtd_metrics *metrics; /* metrics.c: histograms, tenants, RESP counters */
	struct kvtd_tenant_ns *tenant_ns; /* tenant_ns.c: each tenant's namespace ids */
	struct kvtd_tstats *tstats;   /* tstat.c: the tenants table */
	/* The protocol table: what a listener's connections speak, by enum
	 * kvtd_proto (kvtierd.c fills it) */
	const struct kvtd_proto *protos[KVTD_PROTO__COUNT];
	/* Bytes charged against cfg.max_memory (loop.c "Limits"); relaxed
	 * atomic, any loop */
	_Atomic uint64_t mem_used;
	struct kvtd_s3 s3;        /* the S3 listener's (s3ops.c) */
	/* RESP's writes by stripe of keys, for the delete of an expired value
	 * a read found (respd.c "Expiry") */
	struct kvtd_resp_wseq resp_wseq[KVTD_RESP_WSEQ];
	/* RESP values with a TTL, by expiry (expiry.c); NULL without memory */
	struct kvtd_expiry *expiry;
	/* CLEARs in progress of tenants without counters (ops.c) */
	_Atomic uint32_t clears_untracked;
	/* Unauthenticated connections, all and by peer slot (loop.c) */
	_Atomic unsigned unauth_conns;
	/* Of mem_used: the SSLs of TLS connections not yet authenticated
	 * (KVTD_TLS_UNAUTH_MEM_MAX; loop.c "The SSL object") */
	_Atomic uint64_t tls_unauth_mem;
	/* Quiet GETs in the store, all loops (ops.c "Quiet GETs") */
	_Atomic unsigned quiet_inflight;
	/* Unauthenticated connections by address, in the rows (loop.c
	 * loop_unauth_add; one row until session 48) */
	_Atomic uint64_t peer_unauth[KVTD_PEER_ROWS][KVTD_PEER_SLOTS];
	/* the SSLs of each slot's unauthenticated connections, in the rows
	 * (KVTD_TLS_PEER_MEM_MAX; loop.c "The SSL object") */
	_Atomic uint64_t peer_tls_mem[KVTD_PEER_ROWS][KVTD_PEER_SLOTS];
	/* kvtd_peer_slot's key of each row: random, set before the loops start */
	uint64_t peer_key[KVTD_PEER_ROWS];
	uint64_t key_secret;      /* kvtd_key_hash's key: random, set before anything hashes */
	/* Failed AUTHs and TLS handshakes by address in the current second
	 * (loop.c kvtd_auth_failed), in the rows */
	struct kvtd_throttle throttle;
	/* kvtd_log_client_dropped_ctr(): lines a client caused that log.c
	 * dropped (counters.c; NULL reads as 0) */
	const _Atomic uint64_t *log_dropped;
	char *metrics_token;      /* bearer token for /metrics, or NULL */
	void *tls_ctx;            /* SSL_CTX * of the TCP listeners, or NULL (tls.c) */
	void *tls_peer_ctx;       /* SSL_CTX * to reach the other members, or NULL (tls.c) */
	/* Tests' hooks, read from the environment once at start
	 * (kvtd_value_test_init; as struct kvtd_s3's): KVTD_TEST_GET_NOMEM=I,
	 * the slice array of item I of every native GET answer is not
	 * allocated, as if the heap were out (value.c value_get_item:
	 * -ENOMEM).  I + 1; 0: none. */
	uint32_t test_get_nomem;
};

/* Per-connection flow control: defaults of --conn-inflight, --conn-output. */
#define KVTD_INFLIGHT_MAX 256            /* frames in flight before reads pause */
#define KVTD_OUT_MAX (64u << 20)         /* queued output bytes before reads pause */
/* What a queued output entry costs beyond its bytes, charged with them to
 * --max-memory and counted against --conn-output: its struct and the
 * heap's headers of the buffers it owns.  (A PING's answer is 48 bytes and
 * its entry ~200; RESP's +PONG 7 and ~400: a client pipelining them
 * without reading grew kvtierd 4-60 times past --max-memory.) */
#define KVTD_OUT_COST (sizeof(struct kvtd_out) + 64u)
/* What a pin an output entry holds costs beyond the value bytes it pins:
 * its handle in the entry, its slot in the store's pin table (which keeps
 * its size) and its view's copy (lib/store/store_pins.c slot_add), with
 * the heap's headers. */
#define KVTD_PIN_COST 128u
#define KVTD_MAX_CONNS 4096              /* --max-conns default (and the fd limit) */
#define KVTD_RBUF_MIN (64u << 10)        /* initial read buffer */
/* What a read buffer may have held and stay allocated once drained, and
 * what a request being received may hold in it before it counts in its
 * tenant's input share (kvtd_conn_rbuf_drained; respd.c, native.c) */
#define KVTD_RBUF_KEEP (16u << 10)
#define KVTD_HDR_STEP 4096u              /* a header read after a streamed PUT */
#define KVTD_LOOP_EVENTS 256
#define KVTD_SLOW_PROGRESS (16u << 20)   /* data bytes that restart the frame clock */
#define KVTD_LINGER_MS 2000u               /* a lingering close waits at most this */
#define KVTD_LINGER_BYTES (64u << 20)      /* ... and drops at most this much input */
#define KVTD_LINGER_PREAUTH_BYTES (64u << 10) /* ... before AUTH */
#define KVTD_UNAUTH_PEER_MAX 256u        /* unauthenticated connections from one address */
#define KVTD_QUIET_WINDOW 4u             /* a frame's quiet GETs in the store at once */
#define KVTD_NS_TENANT_MAX 1024u         /* namespaces one tenant may register */
/* Items of one frame (NS_REGISTER, LOOKUP, EXISTS, GET, PUT, DELETE): a
 * frame is handled on its loop in one go, each item a few us of decoding,
 * state, request and answer (more under ASan), so a frame of 65,536 keys
 * held its loop 146-378 ms under ASan, another client's PING p99 346 ms
 * (test_hostile big_frames); 1,024 a frame: p99 5 ms.  A frame naming
 * more is answered PROTO_ECOUNT and taken no further, the connection
 * kept (native.c); the codec's limit (items_max in HELLO) stays 65,536.
 * NS_REGISTER: 16,000 items of one text held the loop 435 ms, and no
 * tenant has more than KVTD_NS_TENANT_MAX namespaces to name (ns_items). */
#define KVTD_FRAME_ITEMS_MAX 1024u
#define KVTD_FRAME_ITEMS_MSG "a frame names at most 1024 items"
_Static_assert(KVTD_FRAME_ITEMS_MAX == 1024u, "KVTD_FRAME_ITEMS_MSG says so");
_Static_assert(KVTD_FRAME_ITEMS_MAX >= KVTD_NS_TENANT_MAX, "a tenant's namespaces in a frame");
/* Pinned bytes of queued answers: per connection (--conn-output, at most
 * an eighth of --dram) and per tenant (a quarter of --dram) */
#define KVTD_PIN_CONN_MAX(srv) ((srv)->cfg.conn_output < (srv)->cfg.dram_bytes / 8 ? \
				(srv)->cfg.conn_output : (srv)->cfg.dram_bytes / 8)
#define KVTD_PIN_TENANT_MAX(srv) ((srv)->cfg.dram_bytes / 4)
/* DRAM a tenant's values being received may reserve, all its connections
 * and protocols together (native PUTs received in place, S3 PutObject and
 * UploadPart bodies; with --tenants): a quarter of the DRAM tier, as its
 * pinned answers.  A value is always taken while the tenant reserves
 * nothing else, so that it progresses (value.c "Reservations held"). */
#define KVTD_RESV_TENANT_MAX(srv) ((srv)->cfg.dram_bytes / 4)
/* A tenant's share of --max-memory for its connections' queued answers:
 * past it, a connection of the tenant with answers queued is not read
 * until they are written (loop.c "Limits"), so that a few tenants'
 * clients that stop reading cannot take the budget from the others */
#define KVTD_OUT_TENANT_MAX(srv) ((srv)->cfg.max_memory / 4)
/* What a tenant's native frames in flight may hold of --max-memory (their
 * tables, per-item state and data sections) before its connections with
 * frames in flight stop being read: a quarter too (loop.c
 * kvtd_conn_in_share_over). */
#define KVTD_IN_TENANT_MAX(srv) ((srv)->cfg.max_memory / 4)
/* What the SSLs of TLS connections may hold of --max-memory (loop.c "The
 * SSL object"): those not yet authenticated half of it, as they are at
 * most half of --max-conns, so that a flood of handshakes cannot take the
 * budget from the authenticated clients; one tenant's a quarter, as its
 * other shares, with --tenants only. */
#define KVTD_TLS_UNAUTH_MEM_MAX(srv) ((srv)->cfg.max_memory / 2)
#define KVTD_TLS_TENANT_MEM_MAX(srv) ((srv)->cfg.max_memory / 4)
/* ... and those of one address (its peer slot, base.c kvtd_peer_slot) not
 * yet authenticated a sixteenth: 256 stalled handshakes from one address
 * (its KVTD_UNAUTH_PEER_MAX) held the whole unauthenticated half
 * (doc/security.md "Session 48"). */
#define KVTD_TLS_PEER_MEM_MAX(srv) ((srv)->cfg.max_memory / 16)
/* All a tenant holds of --max-memory together, over every listener and
 * kind: its queued answers, its requests in flight, its SSLs, its private
 * copies (kvtd_tenant_cap).  Each of those has its quarter; three of them
 * together held three quarters (doc/security.md "Session 48"). */
#define KVTD_TENANT_MEM_MAX(srv) ((srv)->cfg.max_memory / 2)
/* A reader holding pins must take at least this many bytes a second,
 * averaged over --idle-timeout, or be closed */
#define KVTD_MIN_DRAIN_BPS (1u << 20)
#define KVTD_QUIET_INFLIGHT_MAX 64u      /* ... and the server's */
/* A tenant whose native quiet GETs hold this many of the server's takes
 * another only while the server keeps as many free for the others
 * (ops.c "Quiet GETs"): one grantee's pipelines held all 64, and every
 * other grantee's reads were misses (test_hostile quiet_share) */
#define KVTD_QUIET_TENANT_MAX (KVTD_QUIET_INFLIGHT_MAX / 4)
/* Private SSD copies one connection may hold: a quarter of --max-memory */
#define KVTD_COPY_CONN_MAX(srv) ((srv)->cfg.max_memory / 4)

uint64_t kvtd_now_ns(void); /* base.c: CLOCK_MONOTONIC */
/* base.c: ns from now on clock, as the absolute deadline
 * pthread_cond_timedwait takes (CLOCK_REALTIME for a condition on its
 * default clock, CLOCK_MONOTONIC for one set to it): the library's
 * kvt_deadline (lib/base/kvt_int.h), which the daemon does not include. */
struct timespec kvtd_deadline(clockid_t clock, uint64_t ns);
/* base.c: (namespace, key) hashed for the daemon's open-addressing tables
 * (ops.c's quiet dedup, repair.c's rents, expiry.c's key table) and respd.c's
 * write stripes, keyed by secret (the server's key_secret): clients choose
 * the keys. */
uint64_t kvtd_key_hash(uint64_t secret, uint32_t ns, const uint8_t *k, uint32_t len);
/* base.c: len bytes at off of a request's pinned value view; false if short. */
bool kvtd_view_read(const struct kvt_req *r, uint64_t off, void *out, size_t len);

/* loop.c: the --max-memory budget.  Charge n bytes: true if they fit
 * (and are charged), false otherwise (nothing charged).  force charges
 * even past the limit (memory already allocated that must be kept). */
bool kvtd_mem_charge(struct kvtd_server *srv, uint64_t n, bool force);
void kvtd_mem_uncharge(struct kvtd_server *srv, uint64_t n);

/*
 * tls.c.  kvtd_tls_setup builds the context from --tls-* (main thread,
 * before the loops; 0, or -EINVAL after logging why).  The rest run on the
 * connection's loop.  The I/O calls behave like read, readv and writev on
 * c->fd (plain connections use exactly those); with TLS an EAGAIN leaves
 * in c->tls_rd_want / tls_wr_want the event the SSL waits for.
 */
int kvtd_tls_setup(struct kvtd_server *srv);
void kvtd_tls_free(struct kvtd_server *srv);
/* A connection accepted on a TLS listener gets its SSL.  0 or -ENOMEM. */
int kvtd_tls_open(struct kvtd_conn *c);
/* One handshake step: 1 done, 0 wait (tls_rd_want says for what), < 0
 * failed: counted (errors{kind="tls"}) and logged; close the connection. */
int kvtd_tls_handshake(struct kvtd_conn *c);
/* The handshake has begun: a ClientHello was taken, so the server may
 * have paid its crypto (an ECDHE, a signature).  False for a connection
 * that sent nothing or no handshake record: a load balancer's TCP check,
 * a plain client. */
bool kvtd_tls_began(const struct kvtd_conn *c);
/* The SSL has read bytes from the socket (a record's start, at least),
 * whether or not its handshake began: the SSL holds its read buffer. */
bool kvtd_tls_heard(const struct kvtd_conn *c);
/* The client sent bytes: the SSL read some, or the socket holds some (a
 * first record not yet whole waits there: tls.c "The first record"). */
bool kvtd_tls_sent_any(const struct kvtd_conn *c);
/* A TLS handshake's deadline, seconds after the accept: this or
 * --idle-timeout if smaller (loop.c loop_sweep, "A handshake's
 * deadline"). */
#define KVTD_TLS_HANDSHAKE_S 10u
/* Decrypted bytes wait inside the SSL: epoll will not report them. */
bool kvtd_tls_pending(const struct kvtd_conn *c);
/* The bytes of the read buffer c's SSL holds (a record not yet whole, or
 * records read ahead), 0 when none */
size_t kvtd_tls_rbuf_held(const struct kvtd_conn *c);
/* What c's SSL is charged to --max-memory at its stage (tls.c "The SSL
 * object"): the handshake's until c->tls_ready, then the established
 * SSL's with its write buffer; the read buffer apart (above) */
size_t kvtd_tls_conn_mem(const struct kvtd_conn *c);
/* Did c send more records with no application data (KeyUpdates) than a
 * minute allows (tls.c "Records the application never sees")?  Its reads
 * then fail with EPROTO: the loop closes it. */
bool kvtd_tls_quiet_over(const struct kvtd_conn *c);
void kvtd_tls_close(struct kvtd_conn *c);
ssize_t kvtd_conn_read(struct kvtd_conn *c, void *buf, size_t len);
ssize_t kvtd_conn_readv(struct kvtd_conn *c, const struct iovec *iov, int n);
ssize_t kvtd_conn_writev(struct kvtd_conn *c, const struct iovec *iov, int n);

/* loop.c */
int kvtd_loops_start(struct kvtd_server *srv);
void kvtd_loops_stop(struct kvtd_server *srv); /* wake them: stop */
void kvtd_loops_join(struct kvtd_server *srv);
void kvtd_loops_finish(struct kvtd_server *srv); /* after kvt_store_close */
int kvtd_aux_start(struct kvtd_server *srv);
void kvtd_aux_stop(struct kvtd_server *srv);
/* Run run(arg) on the aux thread, then done(arg) on loop.  Never fails
 * (without memory it runs both here).  t: the tenant it is done for, whose
 * jobs wait in its own queue (NULL: the server's); the thread takes a job
 * of each owner in turn. */
void kvtd_aux_submit(struct kvtd_loop *loop, struct kvtd_tstat *t, void (*run)(void *),
		     void (*done)(void *), void *arg);
/* The same for a walk of the whole store: run after the jobs waiting. */
void kvtd_aux_submit_walk(struct kvtd_loop *loop, void (*run)(void *), void (*done)(void *),
			  void *arg);
/* Queue an encoded response on a connection's output; it is written at
 * the end of the iteration. */
void kvtd_conn_queue(struct kvtd_conn *c, struct kvtd_out *o);
/* Whether a tenant c's queued pinned answers count in (kvtd_out.pin_tstat)
 * pins KVTD_PIN_TENANT_MAX or more, all its connections together, or
 * they count in more tenants than c tracks (KVTD_CONN_PIN_TENANTS). */
bool kvtd_conn_pin_tenants_over(const struct kvtd_conn *c);
/* A request of the connection was answered (or dropped): flow control;
 * the protocol's idle hook runs when none is left. */
void kvtd_conn_frame_done(struct kvtd_conn *c);
void kvtd_out_free(struct kvtd_server *srv, struct kvtd_out *o);
/* Work left on c for the end of the iteration (parse, write, close). */
void kvtd_conn_touch(struct kvtd_conn *c);
/* Re-register c's epoll events after its input state changed. */
void kvtd_conn_events(struct kvtd_conn *c);
/* Pause or resume reading c as its requests in flight and output say. */
void kvtd_conn_flow(struct kvtd_conn *c);
void kvtd_conn_close(struct kvtd_conn *c, const char *why);
/* c authenticated (state KVTD_CS_READY): it leaves the unauthenticated
 * count and its pre-AUTH limits. */
void kvtd_conn_ready(struct kvtd_conn *c);
/* Before a request of c runs: c's tenant and role under the tenants table
 * now installed (SIGHUP may have replaced it): true, role updated; false:
 * its tenant was removed, the connection is failed (closes). */
bool kvtd_conn_auth_current(struct kvtd_conn *c);
/* Wake every loop (the tenants table changed: loop_main re-checks its
 * connections).  Any thread. */
/* Wake one loop from another thread (its wake eventfd): it runs an
 * iteration, loop 0 its protocols' ticks (RESP's expiry sweep). */
void kvtd_loop_wake(struct kvtd_loop *loop);
void kvtd_loops_wake(struct kvtd_server *srv);
/* AUTH guessing (doc/security.md): a failed AUTH is counted against its
 * peer address (its slots of struct kvtd_throttle); past
 * KVTD_AUTH_FAILS_PER_SEC in a second, AUTHs from it fail without being
 * checked until the second is over. */
#define KVTD_AUTH_FAILS_PER_SEC 20u
bool kvtd_auth_throttled(struct kvtd_conn *c);
void kvtd_auth_failed(struct kvtd_conn *c);
/* Unauthenticated connections allowed at once, and from one address. */
unsigned kvtd_unauth_max(const struct kvtd_server *srv);
unsigned kvtd_unauth_peer_max(const struct kvtd_server *srv);
/* rbuf must hold need bytes from rstart: 0, -ENOBUFS (--max-memory),
 * -EMSGSIZE (past the protocol's pre-AUTH limit), -ENOMEM. */
int kvtd_conn_rbuf_room(struct kvtd_conn *c, size_t need);
void kvtd_conn_rbuf_release(struct kvtd_conn *c);
void kvtd_conn_rbuf_drained(struct kvtd_conn *c);
/* Take rbuf whole; *charged: its bytes charged to --max-memory, now the
 * caller's to uncharge. */
uint8_t *kvtd_conn_rbuf_take(struct kvtd_conn *c, uint64_t *charged);
/* The generic read: into rbuf (at most max bytes), then the protocol's
 * parse.  Like read(2), or KVTD_READ_DONE: the connection failed. */
#define KVTD_READ_DONE (-2)
ssize_t kvtd_conn_read_rbuf(struct kvtd_conn *c, size_t max, size_t *asked);

/* log.c: a line about a connection (id, peer, tenant, reason). */
void kvtd_conn_log(const struct kvtd_conn *c, int level, const char *msg, const char *what);

/* wire.c: the native protocol's output. */
/* A frame without items (an error, a BYE response) onto c's output. */
void kvtd_conn_send(struct kvtd_conn *c, uint16_t op, uint64_t tag, int status,
		    const char *msg);
/* BYE: answer it after every frame before it, then close. */
void kvtd_conn_bye(struct kvtd_conn *c, uint64_t tag);
/* Answer with an ERROR (or op) frame carrying status and msg, then close
 * once flushed.  Counts the error. */
void kvtd_conn_fail(struct kvtd_conn *c, uint16_t op, uint64_t tag, int status,
		    const char *msg);

/*
 * In-flight frames (ops.c, value.c).  A frame and its items belong to the
 * loop of their connection (no locks), except that the aux thread runs
 * ops.c's aux job on a frame the loop handed it and does not touch
 * until it comes back; a submitted item's req belongs to the library until
 * kvt_queue_poll returns it.
 *
 * An item of a frame: one struct kvt_req and what its response needs.
 */
struct kvtd_item {
	struct kvt_req req;       /* user_data: this item */
	struct kvtd_frame *fr;
	int32_t status;           /* the response's status */
	uint32_t tier;
	bool submitted;           /* req is the library's */
	bool pinned;              /* req.pin is held */
	/* PUT: iovecs into the frame's data, CRCs */
	struct iovec *iov;
	uint32_t *crcs;
	/* PUT received in place (kvtd_put_prepare): the item's DRAM
	 * reservation, or none (its bytes are dropped: rview_count 0) */
	bool reserved;
	uint64_t resv;            /* kvt_reservation handle */
	uint64_t resv_held;       /* its bytes in fr->tstat's resv_held while reserved
				   * (KVTD_RESV_TENANT_MAX) */
	const struct iovec *rview;
	uint32_t rview_count;
	uint64_t rlen;            /* the item's bytes in the data section */
	uint64_t *lens;           /* its parts' lengths (owned), for the CRCs below */
	uint64_t crc_left;        /* bytes of part crc_part still to arrive */
	uint32_t nparts;          /* of lens and crcs */
	uint32_t crc_part;        /* the part whose CRC is being computed */
	uint32_t crc_run;         /* its CRC32C so far */
	bool crc_bad;             /* a part's bytes did not match its CRC */
	/* GET request */
	bool quiet;               /* KVT_F_QUIET (a grantee's read) */
	bool deferred;            /* pin let go, to be read again when the
				   * connection's answers drain (ops.c) */
	uint64_t est_len;         /* its value's length when last read */
	uintptr_t est_at;         /* and where it was then (kvtd_item_pin_at):
				   * a frame's deferred ranges of one value count
				   * it once when read again (ops.c) */
	bool ver_noted;           /* ver is the version it first read: read
				   * again, another is a miss (value.c
				   * "Versions") */
	uint64_t ver;             /* 0: unknown (matches none) */
	uint32_t dup_of;          /* quiet: index + 1 of an earlier item of the frame
				   * with the same namespace and key, whose result
				   * this one shares (not submitted); 0: none */
	uint32_t carries;         /* an item others duplicate: index + 1 of the
				   * last of them, whose response carries this
				   * one's pin; 0: its own response does */
	uint64_t copy_charged;    /* its private SSD copy's bytes, charged */
	uint32_t flags;
	uint32_t part;
	uint64_t off, len;
	/* NS_REGISTER */
	uint8_t digest[PROTO_DIGEST_LEN];
	char *canon;              /* the server's canonical text */
	uint32_t canon_len;
	char *desc_store;         /* backing for desc's strings */
	struct kvt_ns_desc desc;
	bool need_register;
	bool granted;          /* NS_REGISTER: another tenant's namespace, by a grant */
	uint32_t ns_id;
};

struct kvtd_frame {
	struct kvtd_conn *conn;
	struct kvtd_loop *loop;
	uint8_t *hdr;             /* header + table, owned; f points into it */
	uint64_t hdr_len;
	struct proto_frame f;
	uint64_t start_ns;        /* header and table parsed (kvtd_now_ns) */
	uint8_t *data;            /* data section (PUT), owned */
	uint64_t mem_charged;     /* bytes of hdr and data charged to mem_used */
	struct kvtd_tstat *tstat; /* its tenant's, where mem_charged is counted too
				   * (in_charged); NULL before AUTH */
	bool in_place;            /* PUT: values go straight into DRAM reservations */
	uint32_t rx_item;         /* in place: the item the next data byte belongs to */
	uint64_t rx_off;          /* and the offset in it */
	uint32_t n;               /* items */
	struct kvtd_item *items;
	struct kvtd_item *subs;   /* LOOKUP and CLEAR: the store requests */
	/* DELETE, CLEAR: a KVT_OP_FLUSH after the items, so that the answer
	 * goes out only once their tombstones are durable (ops.c) */
	struct kvtd_item *flush;
	/* GET: stored parts its range reads verified (value.c), and whether
	 * the check was planned (a large one runs on the aux thread) */
	void *vcache;
	bool verify_planned;
	bool verify_more;         /* the aux thread's check has slices left */
	/* GET answered in chunks (ops.c "Pinned answers"): items before
	 * chunk_start are answered */
	uint32_t chunk_start;
	bool chunked;
	struct kvtd_frame *pin_next;
	uint64_t auth_gen;        /* NS_REGISTER: tenants table its grants were checked under */
	/* GET: quiet items submitted a few at a time (ops.c "Quiet GETs") */
	struct kvtd_item **quiet_q;
	uint32_t quiet_n, quiet_next, quiet_inflight;
	uint32_t sub_count;
	uint32_t sub_next;        /* CLEAR: the next of subs to submit (one walk at a time) */
	_Atomic uint32_t *clear_slot; /* CLEAR: its tenant's slot, held (kvtd_clear_acquire) */
	uint32_t pending;         /* requests and aux jobs outstanding */
	bool order_held;          /* DELETE, CLEAR: counted in conn->order_hold */
	uint64_t removed;         /* CLEAR: blocks */
	uint32_t hits;            /* LOOKUP */
	uint64_t load_ns;         /* LOOKUP: ns */
	struct kvt_key *keys;     /* LOOKUP */
	uint8_t *tiers;
	uint32_t *ns_ids;         /* per namespace-table entry */
	int32_t *ns_err;          /* 0, or why the entry cannot be used */
	bool *ns_ro;              /* granted, not the connection's own: read-only,
				   * and its GETs are quiet (KVT_F_QUIET) */
};

/* wire.c */
int kvtd_resp_encode(const struct proto_frame *rf, const struct proto_item *items, uint32_t n,
		     const struct proto_limits *lim, struct kvtd_out **out);
void kvtd_resp_init(const struct kvtd_frame *fr, struct proto_frame *rf, int32_t status);
void kvtd_reply_error(struct kvtd_frame *fr, int status, const char *msg);
/* Queue a response with items but no values; a failure to encode becomes
 * a failed response with that status. */
void kvtd_reply(struct kvtd_frame *fr, struct proto_frame *rf, const struct proto_item *items,
		uint32_t n);

/* value.c */
int kvtd_value_put_item(struct kvtd_frame *fr, struct kvtd_item *it, const struct proto_item *pi);
/* In-place PUT receive: reserve DRAM for one item (0 or an item status). */
int kvtd_value_put_reserve(struct kvtd_frame *fr, struct kvtd_item *it,
			   const struct proto_item *pi, uint32_t ns);
/* Bytes of the data section already in the connection's buffer, into place. */
void kvtd_value_put_feed(struct kvtd_frame *fr, const uint8_t *buf, size_t len);
/* One readv from fd straight into place: what read(2) returns. */
ssize_t kvtd_value_put_recv(struct kvtd_frame *fr, int fd);
/* Release an item's pin, and the charge of its private copy. */
void kvtd_value_item_unpin(struct kvtd_server *srv, struct kvtd_item *it);
/* Commit every reserved item (CRC-checked): their statuses. */
void kvtd_value_put_commit(struct kvtd_frame *fr);
/* Abort an item's reservation, if it holds one (a frame dropped). */
void kvtd_value_put_abort(struct kvtd_frame *fr, struct kvtd_item *it);
/* A tenant's values being received reserve n more bytes of DRAM
 * (t->resv_held, KVTD_RESV_TENANT_MAX): true if admitted (always, t NULL
 * or without --tenants; always while t holds nothing), false past the
 * share, nothing held.  kvtd_resv_release gives n back.  Any thread. */
bool kvtd_resv_hold(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t n);
void kvtd_resv_release(struct kvtd_tstat *t, uint64_t n);
/* The distinct values a GET's pins hold, each counted once in the pin
 * caps however many of its items (ranges, parts) pin it: value.c
 * "Pinned values held".  kvtd_pinset_add: true the first time `at` is
 * added (always without a table: init failed, or `at` 0); at most `max`
 * adds.  The same table counts references where pins come and go one by
 * one (S3 requests in progress, s3reply.c): kvtd_pinset_hold, 1 the
 * first time `at` is held (the value to count, len bytes: kept in its
 * slot; `at` 0: always, nothing kept), 0 if it is already, -ENOMEM
 * (nothing held); kvtd_pinset_drop, true when the last hold of `at` is
 * dropped (the value to uncount), with *len the len its first hold
 * counted (`at` 0: *len untouched) -- whatever length the last holder's
 * view has, so that a value is uncounted by what was counted for it;
 * kvtd_pinset_refs,
 * how many holds of `at` there are (0: none).  A set of `at`s held is
 * freed when it holds none.  (The structs: before struct kvtd_server.) */
int kvtd_pinset_init(struct kvtd_pinset *s, uint32_t max);
void kvtd_pinset_free(struct kvtd_pinset *s);
bool kvtd_pinset_add(struct kvtd_pinset *s, uintptr_t at);
int kvtd_pinset_hold(struct kvtd_pinset *s, uintptr_t at, uint64_t len);
bool kvtd_pinset_drop(struct kvtd_pinset *s, uintptr_t at, uint64_t *len);
uint64_t kvtd_pinset_refs(const struct kvtd_pinset *s, uintptr_t at);
/* Where a pinned value is (its view's first run), its key in a
 * kvtd_pinset; 0: none.  kvtd_item_pin_at: a native item's. */
uintptr_t kvtd_req_pin_at(const struct kvt_req *r);
uintptr_t kvtd_item_pin_at(const struct kvtd_item *it);
/* The answer of items [first, last) of a GET frame (PROTO_F_MORE on
 * every frame of it but one that ends the whole frame's answer). */
void kvtd_value_get_reply(struct kvtd_frame *fr, uint32_t first, uint32_t last);
/* Range reads: the bytes of stored parts to verify (planned into the
 * frame's cache); verify them (any thread); free the cache. */
uint64_t kvtd_value_verify_plan(struct kvtd_frame *fr);
/* Check the parts planned, KVTD_VERIFY_SLICE bytes at most a call (and
 * at least one part): true once all are checked, false to be called
 * again (each call an aux job of its own, other tenants' between). */
bool kvtd_value_verify_run(struct kvtd_frame *fr);
void kvtd_value_vcache_free(struct kvtd_frame *fr);
/* The tests' hooks of value.c (struct kvtd_server test_get_nomem), from
 * the environment; before the loops start. */
void kvtd_value_test_init(struct kvtd_server *srv);
/* Items [from, fr->n) of a GET are to be let go and read again (ops.c
 * deferral): each pinned one notes the version it read, if it has not. */
void kvtd_value_note_versions(struct kvtd_frame *fr, uint32_t from);
/* A GET frame's first answer: items of one key pinned at two views note
 * the version of the key's first item (value.c "Versions"). */
void kvtd_value_note_keys(struct kvtd_frame *fr);
/* Range verification larger than this runs on the aux thread. */
#define KVTD_VERIFY_INLINE_MAX (1u << 20)
#define KVTD_VERIFY_SLICE (16u << 20) /* bytes of checks an aux job, at most */

/* A PUT frame's header and table arrived, its data not yet: reserve DRAM
 * for its values and receive them in place (true), or not (false: the
 * data goes to a buffer, kvtd_frame_set_data). */
bool kvtd_put_prepare(struct kvtd_frame *fr);
/* A complete request frame (header, table and data) was received on c:
 * take it.  hdr is a private copy of header + table (ownership passes),
 * data the data section (ownership passes, may be NULL). */
struct kvtd_frame *kvtd_frame_new(struct kvtd_conn *c, uint8_t *hdr, uint64_t hdr_len);
void kvtd_frame_set_data(struct kvtd_frame *fr, uint8_t *data);
uint64_t kvtd_frame_data_len(const struct kvtd_frame *fr);
uint8_t *kvtd_frame_data(struct kvtd_frame *fr);
struct kvtd_loop *kvtd_frame_loop(const struct kvtd_frame *fr);
void kvtd_frame_dispatch(struct kvtd_frame *fr);
/* A kvt_req of this loop completed (from kvt_queue_poll). */
void kvtd_req_done(struct kvtd_loop *loop, struct kvt_req *r);
/* Free a frame that will not be answered (its connection died) once
 * nothing of it is in flight; releases pins. */
void kvtd_frame_free(struct kvtd_frame *fr);
/* Charge n more bytes to a frame (--max-memory, and its tenant's input,
 * tstat->in_charged; force: neither check); given back by
 * kvtd_frame_free, or by kvtd_frame_uncharge.  0, or nothing charged:
 * -ENOBUFS past the budget, -EDQUOT past the tenant's input share. */
int kvtd_frame_charge(struct kvtd_frame *fr, uint64_t n, bool force);
/* c has frames in flight while its tenant's hold KVTD_IN_TENANT_MAX, or
 * while a table of c waits for the room (tbl_want): not read until its
 * own are answered (loop.c). */
bool kvtd_conn_in_share_over(const struct kvtd_conn *c);
/* What one of tenant t's quarters (quarter: KVTD_OUT_TENANT_MAX, ...) lets
 * the counter holding mine reach now: the quarter, or less where all t
 * holds together (out_charged, in_charged, tls_mem, copies) would pass
 * KVTD_TENANT_MEM_MAX with it (loop.c "Limits"). */
uint64_t kvtd_tenant_cap(const struct kvtd_server *srv, const struct kvtd_tstat *t,
			 uint64_t mine, uint64_t quarter);
/* Tenant t's input share: the cap (KVTD_IN_TENANT_MAX), and in *held what
 * its native frames in flight hold; 0 (held untouched) where shares do
 * not apply: no tenant, no --max-memory, or no --tenants. */
uint64_t kvtd_in_share(const struct kvtd_server *srv, const struct kvtd_tstat *t,
		       uint64_t *held);
/* A request of n bytes (header included) still arriving on c -- a native
 * frame's table, a RESP command -- holds them in tenant t's input share
 * until it is whole (c->tbl_share; kvtd_in_release gives them back):
 * without, one tenant's half-sent requests on many connections took the
 * whole budget from the others.  false: over the share, held by t's
 * others (nothing taken).  t NULL, or shares off: true, nothing held. */
bool kvtd_in_hold(struct kvtd_conn *c, struct kvtd_tstat *t, uint64_t n);
void kvtd_in_release(struct kvtd_conn *c);
/* Charge n bytes of a request (a native frame, a RESP command) that
 * already holds mine of them: to --max-memory, and to tenant t's input
 * (t->in_charged, with its in_hold bytes), held to t's share
 * (KVTD_IN_TENANT_MAX) except for a request alone (t holds no more than
 * mine).  0, or nothing charged: -EDQUOT past the share, -ENOBUFS past the
 * budget; force: neither check.  kvtd_in_uncharge gives n back. */
int kvtd_in_charge(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t mine, uint64_t n,
		   bool force);
void kvtd_in_uncharge(struct kvtd_server *srv, struct kvtd_tstat *t, uint64_t n);
/* Frames a connection may take in one loop iteration: past it, what it
 * has buffered waits for the next one (kvtd_conn_parse_budget false, then
 * kvtd_conn_defer), after the other connections' events.  A pipeline of
 * 50,000 STATS frames was taken in one go, ~12,000 a read buffer, and
 * another client on the loop waited 600 ms (test_hostile native_flood). */
#define KVTD_PARSE_FRAMES 64u
/* ... and items: 64 frames of KVTD_FRAME_ITEMS_MAX keys pipelined would
 * be 65,536 keys in one iteration again.  The first frame of an
 * iteration is always taken.  A RESP command counts its arguments past
 * the first (respd.c "Keys a loop iteration"). */
#define KVTD_PARSE_ITEMS KVTD_FRAME_ITEMS_MAX
/* ... and all the connections of one tenant together (with --tenants and
 * --max-memory, as the shares): 4 connections' worth.  Without, a tenant
 * with 48 connections took 48 x 64 S3 requests an iteration against
 * another tenant's 64, and the other's PUT waited 0.45 s (ASan;
 * test_hostile_http s3_flood).  A connection its tenant's budget stopped
 * is parsed first in the next iteration, so each of its connections gets
 * its turn. */
#define KVTD_PARSE_TENANT_FRAMES (4 * KVTD_PARSE_FRAMES)
#define KVTD_PARSE_TENANT_ITEMS (4 * (uint64_t)KVTD_PARSE_ITEMS)
/* Work beyond their parse that a loop does for S3 requests and RESP
 * commands in one iteration, in units (s3d.h S3D_WORK_ITER; a RESP key
 * is one): as many as a tenant's native items.  The first of an
 * iteration is always taken. */
#define KVTD_WORK_ITER 4096u
/* May a piece of such work of `units` go now (loop.c "Work on the
 * loop")?  1: yes, counted; 0: later(arg) runs on loop in a later
 * iteration (through t's aux queue, t the tenant it is done for, or
 * NULL); -ESHUTDOWN: the loop is stopping and the iteration's units are
 * spent (nothing deferred: the caller does it now, or fails it). */
int kvtd_work_turn(struct kvtd_loop *loop, struct kvtd_tstat *t, uint64_t units,
		   void (*later)(void *), void *arg);
bool kvtd_conn_parse_budget(struct kvtd_conn *c, uint32_t items);
/* What a frame turned out to cost once answered, counted as that many
 * items against c's and its tenant's budgets of this iteration (a STATS
 * of a tenant's namespace rows: the figures it answered, ops.c). */
void kvtd_conn_parse_spend(struct kvtd_conn *c, uint64_t items);
void kvtd_conn_defer(struct kvtd_conn *c);
void kvtd_frame_uncharge(struct kvtd_frame *fr, uint64_t n);
/* A GET frame waiting for c's pinned answers to drain: continue it (when
 * they drained enough), or end it (c closed).  ops.c "Pinned answers". */
void kvtd_get_resume(struct kvtd_conn *c);
void kvtd_get_abandon(struct kvtd_conn *c);
/* Drop a connection's namespace cache (it is closing). */
void kvtd_ns_cache_free(struct kvtd_conn *c);

/* ------------------------------------------------------------------------
 * The protocol table.  The loop (loop.c) owns sockets, buffers, timers,
 * TLS and the --max-memory budget; everything a protocol knows is behind
 * one of these, one per protocol: native (native.c with ops.c, value.c,
 * wire.c), RESP (respd.c), HTTP /metrics and /healthz (httpd.c).  Adding
 * a protocol is one entry: its enum kvtd_proto_id, its table, and the
 * line in kvtierd.c that installs it in srv->protos.  Every hook runs on
 * the connection's loop thread.
 */
struct kvtd_proto {
	const char *name;          /* "native", "resp", "http": for logs */
	/* Input buffered before the connection authenticates (c->state
	 * KVTD_CS_READY): kvtd_conn_rbuf_room refuses more, and the first
	 * read buffer is no larger.  A small fixed budget per connection. */
	uint32_t preauth_buf;
	/* Accepted: the protocol's state in c->alt, a greeting queued if it
	 * has one.  0 or -ENOMEM (the connection is closed).  May be NULL. */
	int (*open)(struct kvtd_conn *c);
	/* Readable: read and handle what came; returns like read(2), or
	 * KVTD_READ_DONE.  *asked: bytes asked for (a shorter plain read
	 * drained the socket; SIZE_MAX: a request just completed, answer
	 * first).  NULL: kvtd_conn_read_rbuf. */
	ssize_t (*read)(struct kvtd_conn *c, size_t *asked);
	/* Take every complete request out of rbuf[rstart, rend) (after a
	 * read, and at the end of an iteration while reads were paused). */
	void (*parse)(struct kvtd_conn *c);
	/* A request partly received outside rbuf (closing loses it).  May
	 * be NULL. */
	bool (*partial)(const struct kvtd_conn *c);
	/* No more input will be read (stopping, closing): drop a request
	 * partly received.  May be NULL. */
	void (*drop_input)(struct kvtd_conn *c);
	/* The last request in flight was answered.  May be NULL. */
	void (*idle)(struct kvtd_conn *c);
	/* A last error in the protocol's own terms (the loop refuses a
	 * connection past --max-conns, input past a limit), then close once
	 * flushed.  status: a proto/kvtier code or -errno. */
	void (*fail)(struct kvtd_conn *c, int status, const char *msg);
	/* Queued output holding pins was written and freed: room to answer
	 * more (lazy pinning).  May be NULL. */
	void (*written)(struct kvtd_conn *c);
	/* A library request whose user_data carries this protocol's id. */
	void (*req_done)(struct kvtd_loop *loop, struct kvt_req *r);
	/* The connection is freed (closed, nothing in flight).  May be NULL. */
	void (*free)(struct kvtd_conn *c);
	/* Loop 0, each iteration: the protocol's timed work (RESP's active
	 * expiry, respd.c), and before each epoll wait how long loop 0 may
	 * wait (ms, at most wait_ms) before that work is due.  May be NULL. */
	void (*tick)(struct kvtd_loop *loop);
	int (*tick_wait_ms)(const struct kvtd_loop *loop, int wait_ms);
};

extern const struct kvtd_proto kvtd_native_proto; /* native.c */
extern const struct kvtd_proto kvtd_resp_proto;   /* respd.c */
extern const struct kvtd_proto kvtd_http_proto;   /* httpd.c */
extern const struct kvtd_proto kvtd_s3_proto;     /* s3d.c (doc/s3.md) */

/* loop.c: stop reading c, close it once its output is written. */
void kvtd_conn_stop_input(struct kvtd_conn *c);

/* respd.c */
/* Checks the RESP options; registers the default tenant's namespace. */
int kvtd_resp_setup(struct kvtd_server *srv);
/* srv->resp_wseq made before any request, freed at exit. */
void kvtd_resp_wseq_init(struct kvtd_server *srv);
void kvtd_resp_wseq_free(struct kvtd_server *srv);
/* expiry.c: RESP's expiry index (its header comment).  init: at startup
 * (-ENOMEM: no index, values expire when read); free: at exit.
 * kvtd_expiry_add: any thread; at_ms 0 adds nothing; a key that has an
 * entry keeps it, at the earlier expiry; true if at_ms is the earliest
 * now (loop 0's wait for the sweep is to be cut short: its caller wakes
 * it, kvtd_loop_wake).  kvtd_expiry_due:
 * pops up to max entries due at now_ms into ns[] and keys[]; the rest
 * stay. */
#define KVTD_EXPIRY_MAX 65536u   /* entries (92 bytes each, one a key) per server */
#define KVTD_EXPIRY_TICK_MS 100u /* the sweep's period */
#define KVTD_EXPIRY_TICK_KEYS 64u /* entries a sweep pops at most */
int kvtd_expiry_init(struct kvtd_server *srv);
void kvtd_expiry_free(struct kvtd_server *srv);
bool kvtd_expiry_add(struct kvtd_server *srv, uint32_t ns, const struct kvt_key *key,
		     uint64_t at_ms);
unsigned kvtd_expiry_due(struct kvtd_server *srv, uint64_t now_ms, uint32_t *ns,
			 struct kvt_key *keys, unsigned max);
/* The earliest entry's expiry (Unix ms), 0 with none; any thread. */
uint64_t kvtd_expiry_next_ms(const struct kvtd_server *srv);

/* s3ops.c: the S3 listener's state (srv->s3: the table of the S3
 * buckets' writes and DeleteBuckets in progress, s3ops.c "DeleteBucket
 * against the bucket's writes"; the tests' hooks), made before any
 * request; freed at exit. */
void kvtd_s3_init(struct kvtd_server *srv);
void kvtd_s3_free(struct kvtd_server *srv);
/* s3ops.c: at start, before any request, with or without --s3: a bucket
 * an older kvtierd created exists while its marker block (key "B": 8
 * bytes, its creation time) does; keep each such bucket whose marker is
 * still there in the namespace registry (kvt_ns_set_word, its creation
 * time from the marker), as CreateBucket now does.  0 or the registry's
 * error. */
int kvtd_s3_buckets_migrate(struct kvtd_server *srv);
/* s3d.c's op table in the enum's order: 0, or -1 (a build to fix). */
int kvtd_s3_check(void);

/* S3 operations as counted in metrics (s3d.c's enum s3d_op) */
#define KVTD_S3_OPS 22
extern const char *const kvtd_s3_op_names[KVTD_S3_OPS];
void kvtd_metrics_s3(struct kvtd_server *srv, int op, bool error);

/* metrics.c */
int kvtd_metrics_init(struct kvtd_server *srv);
void kvtd_metrics_free(struct kvtd_server *srv);
/* Read --metrics-token FILE (owner-only, one printable word >= 16 bytes)
 * into *out (malloc'd).  0 or -errno with a message in err. */
int kvtd_metrics_token_load(const char *path, char **out, char *err, size_t err_len);
/* The /metrics page, Prometheus text (malloc'd into *out).  0 or -ENOMEM. */
int kvtd_metrics_render(struct kvtd_server *srv, char **out, size_t *out_len);
/* HTTP requests served, refused for the token, malformed (httpd.c) */
enum { KVTD_HTTP_REQUEST, KVTD_HTTP_DENIED, KVTD_HTTP_BAD };
void kvtd_metrics_http(struct kvtd_server *srv, int what);
/* Latency of one request, by kind (0 read, 1 write) and by the tier that
 * served it (enum kvt_tier: the slowest of a batch's hits; KVT_TIER_NONE
 * for a miss, or where the tier is not known: RESP). */
enum { KVTD_LAT_READ = 0, KVTD_LAT_WRITE, KVTD_LAT__COUNT };
void kvtd_metrics_latency(struct kvtd_server *srv, int kind, int tier, uint64_t ns);
/* RESP commands served, and RESP error replies */
void kvtd_metrics_resp(struct kvtd_server *srv, bool error);

/* Per-tenant counters (metrics.c), found once per connection. */
struct kvtd_tstat {
	_Atomic uint64_t requests, bytes_in, bytes_out;
	_Atomic uint64_t pinned;  /* pinned bytes of its connections' queued output */
	_Atomic uint64_t out_charged; /* --max-memory its connections' queued output
				       * holds (KVTD_OUT_TENANT_MAX) */
	_Atomic uint64_t in_charged; /* --max-memory its native frames in flight hold
				      * (tables, items, data: KVTD_IN_TENANT_MAX) */
	_Atomic uint32_t ns_count; /* namespaces registered in its name (KVTD_NS_TENANT_MAX) */
	_Atomic uint32_t conns;    /* its authenticated connections (--tenant-conns) */
	_Atomic uint64_t tls_mem;  /* --max-memory their SSLs hold
				    * (KVTD_TLS_TENANT_MEM_MAX; loop.c "The SSL object") */
	_Atomic uint32_t s3_scans; /* its S3 listings walking the store (s3ops.c) */
	_Atomic uint32_t clears;   /* its CLEARs in progress (KVTD_CLEAR_TENANT; ops.c) */
	_Atomic uint64_t resv_held; /* DRAM its values being received reserve: native
				     * PUTs, S3 uploads (KVTD_RESV_TENANT_MAX) */
	_Atomic uint64_t copies;   /* private SSD copies its quiet reads (native
				    * grantee GETs, S3 reads of granted buckets)
				    * hold (KVTD_COPY_CONN_MAX; ops.c, s3ops.c) */
	_Atomic uint32_t s3_quiet; /* its S3 quiet reads in the store
				    * (S3D_QUIET_TENANT_MAX) */
	struct kvtd_auxq auxq;     /* its jobs on the aux thread (kvtd_aux.lock) */
	_Atomic uint32_t quiet;    /* its native quiet GETs in the store
				    * (KVTD_QUIET_TENANT_MAX) */
	/* the values its S3 requests in progress pin (CopyObject sources,
	 * Complete parts), each counted once in pinned however many pin it
	 * (s3reply.c "Pins of requests in progress") */
	pthread_mutex_t pin_lock;
	struct kvtd_pinset pin_set; /* (pin_lock) */
};
/* tstat.c: the tenants table (its header comment).  init: at startup
 * (0 or -ENOMEM; kvtd_metrics_init calls it); free: at exit.  Any
 * thread unless said.
 * kvtd_tstat_named: a tenant's entry by name, made if new (NULL past
 *   KVTD_TSTAT_MAX entries or without memory), held by no one: for
 *   tenant "default" without --tenants, never freed.
 * kvtd_tstat_hold: the same, held by c until it is freed (a loop
 *   thread; c's own): what kvtd_tenant_conn_admit admits with.
 * kvtd_tstat_release: c gives back what it holds (loop_reap, as c is
 *   freed: nothing of c's points at them any more).
 * kvtd_tstat_sweep: after a reload installed tenants file t (main
 *   thread, t still in use): the entries of tenants not in t are freed
 *   now (their count returned) or when no connection holds them any
 *   more; -ENOMEM: none marked.
 * kvtd_tstat_walk: fn for each entry under the table's lock (/metrics);
 *   returns the count of entries. */
#define KVTD_TSTAT_MAX 4096
int kvtd_tstat_init(struct kvtd_server *srv);
void kvtd_tstat_free(struct kvtd_server *srv);
struct kvtd_tstat *kvtd_tstat_named(struct kvtd_server *srv, const char *name, size_t len);
struct kvtd_tstat *kvtd_tstat_hold(struct kvtd_conn *c, const char *name, size_t len);
void kvtd_tstat_release(struct kvtd_conn *c);
int kvtd_tstat_sweep(struct kvtd_server *srv, const struct kvtd_tenants *t);
unsigned kvtd_tstat_walk(struct kvtd_server *srv,
			 void (*fn)(void *arg, const char *name, const struct kvtd_tstat *st),
			 void *arg);
/* tenant_ns.c: each tenant's namespace ids, following the registry (its
 * ids run 1..count).  init: at startup, after the store opened (0 or
 * -ENOMEM); free: at exit.  kvtd_tenant_ns_ids: how many namespaces the
 * tenant named (tenant, len) has, and with ids not NULL a malloc'ed copy
 * of their ids (the caller frees it; NULL when there are none); -ENOMEM.
 * Its cost is the tenant's own namespaces plus those registered since the
 * last call, never the whole registry.  Any thread. */
int kvtd_tenant_ns_init(struct kvtd_server *srv);
void kvtd_tenant_ns_free(struct kvtd_server *srv);
int64_t kvtd_tenant_ns_ids(struct kvtd_server *srv, const char *tenant, size_t len,
			   uint32_t **ids);
/* The counters of c's tenant (NULL before the tenant is known): with
 * --tenants, the entry it was admitted with (c->conns_tstat, held);
 * without, tenant "default"'s. */
struct kvtd_tstat *kvtd_tstat_of(struct kvtd_conn *c);
/* A tenant's CLEARs in progress, all its connections together (native
 * CLEAR frames that walk, RESP FLUSHDB; ops.c "A CLEAR's walks"): at most
 * KVTD_CLEAR_TENANT.  kvtd_clear_acquire takes one of c's tenant's slots:
 * the slot to give back with kvtd_clear_release, or NULL at the limit
 * (counted in clear_refused).  Loop threads. */
#define KVTD_CLEAR_TENANT 4
_Atomic uint32_t *kvtd_clear_acquire(struct kvtd_conn *c);
void kvtd_clear_release(_Atomic uint32_t *slot);
/* Per-tenant connection cap (doc/kvtierd.md "Overload"): c, just
 * authenticated as tenant (len bytes), is counted among its tenant's connections
 * (c->conns_tstat; it leaves the count when it closes, loop.c, or signs
 * as another tenant, S3).  true: admitted (or no --tenants); false: its
 * tenant holds kvtd_tenant_conns_max() connections already, counted in
 * tenant_conns_refused, or its tenant gets no entry in the tenants
 * table (tstat.c: full, or no memory), counted in tenant_table_refused
 * -- never admitted without its limits; msg (len bytes) says why; the
 * caller refuses it with its protocol's error and closes it. */
unsigned kvtd_tenant_conns_max(const struct kvtd_server *srv);
bool kvtd_tenant_conn_admit(struct kvtd_conn *c, const char *tenant, size_t tenant_len, char *msg,
			    size_t len);

/* auth.c: a secret sent in clear (RESP AUTH): 0 and *role, or
 * PROTO_EAUTH (unknown tenant and wrong secret cost the same). */
int kvtd_auth_plain(const char *tenant, uint32_t tenant_len, const uint8_t *secret,
		    size_t secret_len, uint32_t *role);

#endif

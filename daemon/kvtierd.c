/*
 * kvtierd.c - the kvtierd command: the command line (config.c parses the
 * options and the config file), the store, the listeners, the signal
 * loop, startup and shutdown (doc/kvtierd.md, kvtierd(8)).
 *
 * Owns main() and the main thread.  Startup order matters:
 *
 *   1. options: embedded defaults, then --config FILE, then the command
 *      line (flags override the file); usage errors exit 2
 *   2. block SIGINT/SIGTERM/SIGHUP (every thread started later inherits
 *      the mask; the library's threads block everything anyway), ignore
 *      SIGPIPE; the signals are read from a signalfd by this thread only,
 *      so no code runs in a signal handler
 *   3. log, tenants; every listener bound (not listening: a port in use
 *      fails the start before the store's recovery) and TLS; the store
 *      (which locks the directory); then the listeners listen
 *   4. the aux thread and the event loops
 *   5. wait on the signalfd: SIGHUP reopens the log and reloads the
 *      tenants (a bad file keeps the old table); SIGTERM/SIGINT stop
 *   6. stop: loops stop accepting and reading, answer what they have read
 *      (bounded by --shutdown-timeout), exit; the aux thread finishes its
 *      jobs; kvt_flush; kvt_store_close (checkpoints the SSD tier);
 *      completions left over are collected; exit 0
 *
 * Exit codes: 0 stopped cleanly, 1 runtime failure, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/random.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvtierd.h"
#include "repair.h"

#define DEFAULT_DIR "./kvtierd-data"
#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_IDLE_S 30
#define DEFAULT_SHUTDOWN_S 10
#define DRAM_DEFAULT_CAP (UINT64_C(4) << 30)
#define SSD_DEFAULT_CAP (UINT64_C(64) << 30)

/* ------------------------------------------------------------------------
 * Usage
 */

/* The library's options, for --set: names, defaults and docs from its
 * one table (kvt_option_info), which "kvtier options" also prints. */
static void kvtierd_usage_options(FILE *f)
{
	struct kvt_option o;
	fprintf(f, "\nlibkvtier options (--set NAME=VALUE; default in brackets):\n");
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		fprintf(f, "  %-26s %s%s%s%s\n", o.name, o.doc, o.def ? " [" : "",
			o.def ? o.def : "", o.def ? "]" : "");
}

static void kvtierd_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtierd [options]\n"
		"\n"
		"kvtierd serves a libkvtier store (DRAM and SSD tiers) to the inference\n"
		"engines of a pod over the kvtier wire protocol.  With no options it\n"
		"starts a working store in " DEFAULT_DIR " listening on " DEFAULT_LISTEN ".\n"
		"\n"
		"Store:\n"
		"  --dir DIR             store directory (default " DEFAULT_DIR "), created\n"
		"                        if missing; an existing one must be empty or a\n"
		"                        kvtier store, else the start is refused\n"
		"  --dram SIZE           DRAM tier bytes (default: 1/4 of physical memory,\n"
		"                        at most 4G)\n"
		"  --ssd SIZE            SSD tier bytes in DIR (default: 10%% of the file\n"
		"                        system's free space, at most 64G, at least two\n"
		"                        segments); 0 disables the SSD tier; a SIZE given\n"
		"                        must hold two ssd.segment (256M unless --set)\n"
		"  --set NAME=VALUE      any libkvtier option (listed at the end), e.g.\n"
		"                        --set ssd.admission=always; repeatable\n"
		"\n"
		"Network:\n"
		"  --listen HOST:PORT    TCP address (default " DEFAULT_LISTEN "; port 0 picks\n"
		"                        one and logs it; \"none\" disables TCP)\n"
		"  --unix PATH           also listen on a Unix socket\n"
		"  --resp HOST:PORT      also serve the Redis protocol (RESP2) there:\n"
		"                        GET SET MGET MSET EXISTS DEL ... (doc/resp.md); AUTH\n"
		"                        sends secrets in clear without --tls-cert: loopback\n"
		"                        or trusted networks\n"
		"  --s3 HOST:PORT        also serve a subset of the Amazon S3 API there\n"
		"                        (SigV4; access key = tenant; doc/s3.md); without\n"
		"                        --tenants, loopback only (or --insecure)\n"
		"  --s3-domain NAME[,NAME...]  also take virtual-hosted-style S3 requests:\n"
		"                        a Host BUCKET.NAME[:PORT] names BUCKET, the path\n"
		"                        its key (path-style requests still work)\n"
		"  --metrics [HOST:]PORT serve GET /metrics (Prometheus) and /healthz over\n"
		"                        HTTP (host default 127.0.0.1; doc/metrics.md)\n"
		"  --metrics-token FILE  bearer token required by the metrics listener;\n"
		"                        needed to bind it to a non-loopback address\n"
		"  --threads N           event-loop threads (default: number of CPUs)\n"
		"  --idle-timeout SEC    close connections that do not authenticate, do not\n"
		"                        finish a frame, or do not read their responses for\n"
		"                        SEC seconds (default %d; 0 never); a TLS handshake\n"
		"                        has 10 s, or SEC if smaller\n"
		"  --shutdown-timeout SEC  on SIGTERM, wait at most SEC seconds for requests\n"
		"                        in flight (default %d)\n"
		"  --max-conns N         connections open at once; past it a new one gets an\n"
		"                        error and is closed (default 4096)\n"
		"  --tenant-conns N      authenticated connections of one tenant at once\n"
		"                        (with --tenants); past it one is refused after\n"
		"                        AUTH (default: a quarter of --max-conns)\n"
		"  --max-memory SIZE     receive buffers, tables, queued responses and TLS\n"
		"                        connections' SSLs, all connections (default 1/8\n"
		"                        of RAM, 64M..4G)\n"
		"  --conn-inflight N     frames in flight per connection before it is not\n"
		"                        read (default 256)\n"
		"  --conn-output SIZE    queued response bytes per connection before it is\n"
		"                        not read (default 64M)\n"
		"\n"
		"Security:\n"
		"  --tenants FILE        \"name secret role [dram=SIZE] [ssd=SIZE]\" lines (role\n"
		"                        tenant|admin; quotas per tier) and \"grant OWNER\n"
		"                        WHAT to GRANTEE\" lines (read access; WHAT: *,\n"
		"                        model=NAME or a digest); the file must not be\n"
		"                        accessible by group or others.\n"
		"                        Without it, every client is tenant \"default\" with no\n"
		"                        authentication (the log says so).\n"
		"  --tls-cert FILE       TLS (1.2 minimum, 1.3 preferred) on the TCP and RESP\n"
		"  --tls-key FILE        listeners with this PEM certificate chain and key;\n"
		"                        Unix sockets and metrics stay plain\n"
		"  --tls-ca FILE         verify client certificates, and the other members'\n"
		"                        (they connect through TLS too), against this CA\n"
		"  --insecure            listen off loopback without --tenants (anyone who\n"
		"                        reaches the port reads and writes every block)\n"
		"  --tls-verify-client   require a client certificate (mutual TLS; needs\n"
		"                        --tls-ca; \"tls-verify-client = yes\" in --config)\n"
		"\n"
		"Cluster (doc/members.md):\n"
		"  --members LIST        static member list HOST:PORT[=WEIGHT],... that\n"
		"                        engines read from this server (STATS cluster.*)\n"
		"  --etcd URL            register in etcd (v3, http://HOST:2379) under a\n"
		"                        lease and read the member list from it\n"
		"  --etcd-prefix P       key prefix (default " KVTD_ETCD_PREFIX ")\n"
		"  --etcd-ttl SECONDS    lease time to live: how long a dead server stays\n"
		"                        listed (default 10)\n"
		"  --advertise HOST:PORT the address engines reach this server on (default:\n"
		"                        the --listen address, which must not be a wildcard)\n"
		"  --repair-grace MS     heal (doc/cluster.md): copy a departed member's\n"
		"                        replicated groups back up after MS (default 10000)\n"
		"  --peer-connect-timeout MS  give up a TCP connect to another member after\n"
		"                        MS (default 2000): a blackholed member costs that\n"
		"  --repair-rate SIZE    bytes a second the repair may send while clients are\n"
		"                        served (default 128M; 0: healing off)\n"
		"  --repair-idle-rate SIZE  ... while none are (default 0: no limit)\n"
		"  --drain-budget SIZE   bytes of unreplicated blocks a drain hands over, most\n"
		"                        recently used first (default: a quarter of --dram)\n"
		"  --max-copies N        the most members a client's placed put is kept on,\n"
		"                        forwarded to and healed to, 1..8 (default 8); a put\n"
		"                        asking more is kept on N (repair.copies_clamped)\n"
		"  --protocol-max N      offer protocol versions up to N only (default and\n"
		"                        most: the newest): answer as an older server would,\n"
		"                        to test clients against one (doc/protocol.md)\n"
		"\n"
		"Logging and config:\n"
		"  --log FILE            log to FILE instead of stderr (SIGHUP reopens it)\n"
		"  --log-level LEVEL     error, warn, info (default) or debug\n"
		"  --log-format FORMAT   text (default: logfmt) or json (one object per line)\n"
		"  -c, --config FILE     \"key = value\" lines with the long option names;\n"
		"                        options on the command line override it\n"
		"  --check-config FILE   check FILE and the other options as a start would\n"
		"                        (files and directories they name, addresses, --set),\n"
		"                        print the effective settings, exit 0 (valid) or 2;\n"
		"                        starts nothing\n"
		"  -h, --help            this help\n"
		"  -V, --version         print the version\n"
		"\n"
		"SIZE takes K, M, G, T suffixes (powers of 1024).  Signals: SIGTERM/SIGINT\n"
		"stop cleanly (exit 0), SIGHUP reopens the log and reloads the tenants.\n"
		"Exit status: 0 ok, 1 runtime failure, 2 usage error.  kvtierd(8).\n",
		DEFAULT_IDLE_S, DEFAULT_SHUTDOWN_S);
	kvtierd_usage_options(f);
}

static void kvtierd_die_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void kvtierd_die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kvtierd: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nRun 'kvtierd --help' for the options.\n");
	exit(KVTD_EXIT_USAGE);
}

/* ------------------------------------------------------------------------
 * Options
 */


static char *kvtierd_strdup(const char *s)
{
	char *d = strdup(s);
	if (!d) {
		fprintf(stderr, "kvtierd: out of memory\n");
		exit(KVTD_EXIT_FAIL);
	}
	return d;
}

/* Apply one option (config.c); a bad one exits 2 with its message. */
static void kvtierd_option(struct kvtd_config *cfg, const char *name, const char *v,
			   const char *where)
{
	char err[512];
	int rc = kvtd_config_option(cfg, name, v, where, err, sizeof(err));

	if (rc == -ENOMEM) {
		fprintf(stderr, "kvtierd: out of memory\n");
		exit(KVTD_EXIT_FAIL);
	}
	if (rc < 0)
		kvtierd_die_usage("%s", err);
}

/* --config FILE (config.c): a bad line exits 2 with its message, and so
 * does a file that cannot be read. */
static void kvtierd_config_file(struct kvtd_config *cfg, const char *path)
{
	char err[KVTD_CONFIG_LINE_MAX + 600];
	int rc = kvtd_config_load(cfg, path, err, sizeof(err));

	if (rc == -ENOMEM) {
		fprintf(stderr, "kvtierd: out of memory\n");
		exit(KVTD_EXIT_FAIL);
	}
	if (rc == -EINVAL)
		kvtierd_die_usage("%s", err);
	if (rc < 0) {
		fprintf(stderr, "kvtierd: %s\n", err);
		exit(KVTD_EXIT_USAGE);
	}
}

static void kvtierd_args(struct kvtd_config *cfg, int argc, char **argv)
{
	const char *config = NULL, *check = NULL;

	/* Pass 1: --help, --version, --config, --check-config. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			kvtierd_usage(stdout);
			exit(KVTD_EXIT_OK);
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("kvtierd %s (libkvtier %s, protocol %u..%u)\n", KVTD_VERSION,
			       kvt_version(), PROTO_VERSION_MIN, PROTO_VERSION_MAX);
			exit(KVTD_EXIT_OK);
		}
		if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
			if (i + 1 >= argc)
				kvtierd_die_usage("%s needs a value", a);
			config = argv[++i];
		} else if (strncmp(a, "--config=", 9) == 0) {
			config = a + 9;
		} else if (strcmp(a, "--check-config") == 0) {
			if (i + 1 >= argc)
				kvtierd_die_usage("%s needs a value", a);
			config = check = argv[++i];
		} else if (strncmp(a, "--check-config=", 15) == 0) {
			config = check = a + 15;
		} else if (a[0] == '-' && a[1] == '-' && !strchr(a, '=') && i + 1 < argc &&
			   strcmp(a, "--tls-verify-client") != 0 && strcmp(a, "--insecure") != 0) {
			i++; /* skip the value of another option */
		}
	}
	if (config)
		kvtierd_config_file(cfg, config);

	/* Pass 2: everything else, overriding the file. */
	for (int i = 1; i < argc; i++) {
		char name[64];
		const char *a = argv[i], *v, *eq;
		size_t nl;

		if (strcmp(a, "-c") == 0) {
			i++;
			continue;
		}
		if (a[0] != '-' || a[1] != '-' || !a[2])
			kvtierd_die_usage("unexpected argument '%s'", a);
		a += 2;
		eq = strchr(a, '=');
		nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof(name))
			kvtierd_die_usage("unknown option '%s'", argv[i]);
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!kvtd_config_is_option(name))
			kvtierd_die_usage("unknown option '--%s'", name);
		if (eq) {
			v = eq + 1;
		} else if (strcmp(name, "tls-verify-client") == 0 || strcmp(name, "insecure") == 0) {
			v = "yes"; /* the options that take no value */
		} else {
			if (i + 1 >= argc)
				kvtierd_die_usage("--%s needs a value", name);
			v = argv[++i];
		}
		if (strcmp(name, "config") == 0 || strcmp(name, "check-config") == 0)
			continue;
		kvtierd_option(cfg, name, v, "command line");
	}
	if (check) /* validate, print, exit (config_check.c) */
		exit(kvtd_config_check(cfg, check, stdout, stderr));
}

/* ------------------------------------------------------------------------
 * Defaults that depend on the machine
 */

static uint64_t kvtierd_default_dram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t q = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4 : (256u << 20);
	if (q > DRAM_DEFAULT_CAP)
		q = DRAM_DEFAULT_CAP;
	return q & ~((UINT64_C(1) << 20) - 1);
}

/* --max-memory: an eighth of RAM, 64 MiB .. 4 GiB. */
static uint64_t kvtierd_default_max_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t q = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 8 : (64u << 20);
	if (q > (UINT64_C(4) << 30))
		q = UINT64_C(4) << 30;
	if (q < (64u << 20))
		q = 64u << 20;
	return q & ~((UINT64_C(1) << 20) - 1);
}

static uint64_t kvtierd_default_ssd(const struct kvtd_config *cfg)
{
	struct statvfs sv;
	uint64_t free_b, cap, seg = kvtd_config_segment(cfg);

	if (statvfs(cfg->dir, &sv) < 0) {
		kvtd_log(KVTD_WARN, "cannot size the SSD tier: no SSD tier", "dir=%s error=\"%s\"",
			 cfg->dir, strerror(errno));
		return 0;
	}
	free_b = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	cap = free_b / 10;
	if (cap > SSD_DEFAULT_CAP)
		cap = SSD_DEFAULT_CAP;
	if (cap < 2 * seg) {
		if (2 * seg > free_b / 2) {
			kvtd_log(KVTD_WARN, "too little free space for two SSD segments: no SSD tier",
				 "dir=%s free_bytes=%llu segment_bytes=%llu", cfg->dir,
				 (unsigned long long)free_b, (unsigned long long)seg);
			return 0;
		}
		cap = 2 * seg;
	}
	return cap / seg * seg;
}

/* What to do about a store directory kvtierd may not write, for its log
 * line: the uid it runs as and the fix, in buf; "" for other errors. */
static const char *kvtierd_dir_hint(int rc, char *buf, size_t len)
{
	if (rc == -EACCES || rc == -EPERM)
		snprintf(buf, len, " uid=%u hint=\"the user kvtierd runs as cannot write there: "
			 "chown the directory to that user (systemd: StateDirectory=, "
			 "/var/lib/kvtierd), or give another --dir\"", (unsigned)geteuid());
	else if (rc == -EROFS)
		snprintf(buf, len, " hint=\"a read-only file system: give a --dir on a writable "
			 "one\"");
	else if (rc == -ENOTDIR || rc == -EEXIST)
		snprintf(buf, len, " hint=\"--dir (or a directory above it) is a file: give a "
			 "directory, made if missing\"");
	else
		buf[0] = 0;
	return buf;
}

static int kvtierd_mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0750) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0750) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* ------------------------------------------------------------------------
 * Listeners
 */

/*
 * Bind, not listen (kvtierd_listen_all does, once the store is open): an
 * address in use is found before the store's recovery, and a client that
 * connects meanwhile is refused, as before the bind, rather than left
 * waiting in the backlog.  Port 0 is resolved here (l->name).
 *
 * Without SO_REUSEADDR first: a socket bound so is the port's alone, even
 * before it listens, so that a second kvtierd started meanwhile on the
 * same port fails its bind at once rather than recovering a store only to
 * fail at listen() (with SO_REUSEADDR on both, two sockets that do not
 * listen yet may both bind).  EADDRINUSE then is a listener, a socket
 * bound so, or only TIME_WAIT leftovers of connections of a kvtierd that
 * just stopped: bound again with SO_REUSEADDR, which takes the last (and
 * a second kvtierd's socket that fell back the same way).  SO_REUSEADDR
 * is set before listen() in any case (kvtierd_listen_all): the accepted
 * connections' TIME_WAIT must not refuse the next start's bind.
 */
static int kvtierd_bind_tcp(struct kvtd_listener *l, const char *spec)
{
	char host[256], port[16];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t hl;
	int fd = -1, one = 1, rc;

	if (!colon || colon == spec || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port))
		return -EINVAL;
	hl = (size_t)(colon - spec);
	if (spec[0] == '[' && colon[-1] == ']') {
		spec++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, spec, hl);
	host[hl] = 0;
	snprintf(port, sizeof(port), "%s", colon + 1);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(hl ? host : NULL, port, &hints, &ai);
	if (rc != 0)
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EADDRINUSE)
			goto fail;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
			goto fail;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	freeaddrinfo(ai);
	l->ev.kind = KVTD_EV_LISTEN;
	l->fd = fd;
	l->is_unix = false;
	if (ss.ss_family == AF_INET6) {
		char a[INET6_ADDRSTRLEN];
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(l->name, sizeof(l->name), "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		char a[INET_ADDRSTRLEN];
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(l->name, sizeof(l->name), "%s:%u", a, ntohs(s4->sin_port));
	}
	return 0;
fail:
	rc = -errno;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

/*
 * Bind and listen at once, unlike kvtierd_bind_tcp: a socket file that
 * refuses connections is taken for a crash's leftover (below), so another
 * kvtierd started on the same path during this one's recovery would
 * unlink it and this one would serve an unreachable socket.  Listening,
 * it is seen live; a local client that connects during the recovery
 * waits in the backlog until the loops accept.
 */
static int kvtierd_bind_unix(struct kvtd_listener *l, const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (lstat(path, &st) == 0) {
		int probe;
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return -EEXIST;
		}
		/* A socket nobody answers on is a crash's leftover. */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1024) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	l->ev.kind = KVTD_EV_LISTEN;
	l->fd = fd;
	l->is_unix = true;
	snprintf(l->name, sizeof(l->name), "%s", path);
	return 0;
}

/* What to do about a listener that could not be bound, for its log line.
 * A Unix socket is a file: its EACCES is the directory's permission, not
 * a port's privilege. */
static const char *kvtierd_listen_hint(const char *opt, int rc)
{
	bool is_unix = strcmp(opt, "unix") == 0;

	if (is_unix && (rc == -EACCES || rc == -EPERM || rc == -EROFS))
		return " hint=\"the user kvtierd runs as cannot create the socket file in that "
		       "directory: make it writable for that user (systemd: RuntimeDirectory=, "
		       "/run/kvtierd), or give another --unix PATH\"";
	if (is_unix && rc == -ENOENT)
		return " hint=\"the socket's directory does not exist: create it, or give "
		       "another --unix PATH\"";
	switch (rc) {
	case -EADDRINUSE:
		return " hint=\"another process listens there (another kvtierd?): stop it, or listen "
		       "elsewhere (port 0 picks a free one)\"";
	case -EADDRNOTAVAIL:
		return " hint=\"no interface of this host has that address\"";
	case -EACCES:
		return " hint=\"ports below 1024 need root or CAP_NET_BIND_SERVICE\"";
	case -EINVAL:
		return " hint=\"give HOST:PORT: 127.0.0.1:7000, [::1]:7000, or 0.0.0.0:7000 for "
		       "every interface (a bare :PORT is refused, not taken for every interface)\"";
	default:
		return "";
	}
}

/* ------------------------------------------------------------------------
 * The store
 */

/* Open the store the options describe.  0, or < 0 with the reason
 * logged; *usage is set when the options themselves are refused (a size,
 * a --set value, an SSD tier too small for two segments): exit 2, as
 * --check-config does, since a restart cannot fix it. */
static int kvtierd_store_open(struct kvtd_server *srv, bool *usage)
{
	struct kvtd_config *cfg = &srv->cfg;
	char num[32];
	uint64_t v = 0, mem = kvtd_config_dram_over(cfg);
	int rc;

	if (mem) {
		kvtd_log(KVTD_ERROR, "bad --dram", "value=%llu memory=%llu hint=\"more than this "
			 "machine's memory: the DRAM tier pre-faults what it is given\"",
			 (unsigned long long)cfg->dram_bytes, (unsigned long long)mem);
		*usage = true;
		return -EINVAL;
	}
	*usage = false;
	rc = kvt_store_create(&srv->store);
	if (rc < 0)
		return rc;
	kvt_store_set_log(srv->store, kvtd_log_lib, NULL, cfg->log_level);
	rc = kvt_store_set_option(srv->store, "path", cfg->dir);
	if (rc < 0)
		return rc;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)cfg->dram_bytes);
	rc = kvt_store_set_option(srv->store, "dram.capacity", num);
	if (rc < 0) {
		*usage = rc == KVT_EOPTVAL;
		kvtd_log(KVTD_ERROR, "bad --dram", "value=%s error=\"%s\"", num, kvt_strerror(rc));
		return rc;
	}
	if (cfg->ssd_bytes) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)cfg->ssd_bytes);
		rc = kvt_store_set_option(srv->store, "ssd.capacity", num);
		if (rc < 0) {
			*usage = rc == KVT_EOPTVAL;
			kvtd_log(KVTD_ERROR, "bad --ssd", "value=%s error=\"%s\"", num,
				 kvt_strerror(rc));
			return rc;
		}
	}
	/* Each tenant's own KV-events feed (tenants file events=, auth.c):
	 * the publisher runs, idle until a feed is set. */
	if (cfg->tenants_path)
		kvt_store_set_option(srv->store, "events.groups", "on");
	for (unsigned i = 0; i < cfg->set_count; i++) {
		rc = kvt_store_set_option(srv->store, cfg->set_names[i], cfg->set_values[i]);
		if (rc < 0) {
			char q[600];
			*usage = rc == KVT_EOPTVAL || rc == KVT_EOPTION;
			kvtd_log(KVTD_ERROR, "bad --set", "name=%s value=%s error=\"%s\" "
				 "hint=\"kvtier options lists each option's values and bounds\"",
				 cfg->set_names[i],
				 kvtd_log_quote(q, sizeof(q), cfg->set_values[i]),
				 kvt_strerror(rc));
			return rc;
		}
	}
	/* Pre-faulting a large DRAM tier takes seconds: say what we wait for. */
	kvtd_log(KVTD_INFO, "opening the store", "dir=%s dram_bytes=%llu ssd_bytes=%llu", cfg->dir,
		 (unsigned long long)cfg->dram_bytes, (unsigned long long)cfg->ssd_bytes);
	rc = kvt_store_open(srv->store);
	if (rc < 0) {
		const char *hint = "";
		char hb[256];
		if (rc == KVT_ELOCKED)
			hint = " hint=\"another kvtierd uses this --dir\"";
		else if (rc == KVT_ECORRUPT)
			hint = " hint=\"not a kvtier store directory, or damaged: check it with "
			       "kvtier fsck DIR, or give another --dir\"";
		else if (rc == KVT_EOPTVAL && cfg->ssd_bytes &&
			 cfg->ssd_bytes / kvtd_config_segment(cfg) < 2)
			hint = " hint=\"--ssd must hold two ssd.segment at least: a larger --ssd, "
			       "--set ssd.segment=SIZE (a multiple of 4K, at least 1M) or --ssd 0\"";
		else if (rc == KVT_EOPTVAL)
			hint = " hint=\"the line before names the tier; kvtierd --check-config "
			       "/dev/null with the same options checks sizes and --set values\"";
		else
			hint = kvtierd_dir_hint(rc, hb, sizeof(hb));
		*usage = rc == KVT_EOPTVAL;
		kvtd_log(KVTD_ERROR, "cannot open the store", "dir=%s error=\"%s\"%s", cfg->dir,
			 kvt_strerror(rc), hint);
		return rc;
	}
	/* Quotas and groups live in memory: apply them to what the store
	 * recovered, before any client can put. */
	rc = kvtd_quota_apply(srv->store);
	if (rc < 0) {
		kvtd_log(KVTD_ERROR, "cannot apply the tenants' quotas", "error=\"%s\"",
			 kvt_strerror(rc));
		return rc;
	}
	if (kvt_store_stat(srv->store, "dram.max_value_bytes", &v) != 0 || v == 0)
		v = cfg->dram_bytes;
	srv->dram_max_value = v;
	srv->tiers_below = kvt_store_stat(srv->store, "remote.puts_only", &v) == 0 ||
			   kvt_store_stat(srv->store, "shared.reads", &v) == 0;
	return 0;
}

/* What this server accepts: the codec's defaults, bounded by the store. */
static void kvtierd_limits(struct kvtd_server *srv)
{
	struct proto_limits *l = &srv->lim;

	proto_limits_default(l);
	/* parts_max is the library's KVT_PARTS_MAX; a value is stored as its
	 * parts and nothing else, so it may be as large as the DRAM tier
	 * holds. */
	if (srv->dram_max_value < l->value_max)
		l->value_max = srv->dram_max_value;
	/* A frame carries at least one largest value, and not much more: a
	 * PUT frame is received whole before it is stored. */
	l->frame_max = 2 * l->value_max;
	if (l->frame_max < l->value_max + l->table_max + PROTO_HDR_LEN)
		l->frame_max = l->value_max + l->table_max + PROTO_HDR_LEN;
	if (l->frame_max > PROTO_DEF_FRAME_MAX)
		l->frame_max = PROTO_DEF_FRAME_MAX;
}

/* Log a listener that could not be bound or listen: the option, the
 * address, why, and what to do (tests/deploy greps "cannot listen"). */
static void kvtierd_listen_fail(const char *opt, const char *addr, int rc)
{
	kvtd_log(KVTD_ERROR, "cannot listen", "%s=%s error=\"%s\" option=--%s%s", opt, addr,
		 strerror(-rc), opt, kvtierd_listen_hint(opt, rc));
}

/*
 * Every listener (doc/kvtierd.md "Start-up"), before the store is opened:
 * native TCP and Unix, then RESP, S3 and metrics (doc/resp.md, doc/s3.md,
 * doc/metrics.md), bound in that order into listeners[] (not listening
 * yet: kvtierd_listen_all).  A metrics listener on anything but loopback
 * needs --metrics-token.  0, -EINVAL (usage), or -errno.
 */
static int kvtierd_bind_all(struct kvtd_server *srv, struct kvtd_listener *listeners)
{
	struct kvtd_config *cfg = &srv->cfg;
	const struct {
		const char *opt, *spec;
		int proto;
	} specs[] = {
		{ "listen", strcmp(cfg->listen, "none") ? cfg->listen : NULL, KVTD_PROTO_NATIVE },
		{ "unix", cfg->unix_path, KVTD_PROTO_NATIVE },
		{ "resp", cfg->resp_listen, KVTD_PROTO_RESP },
		{ "s3", cfg->s3_listen, KVTD_PROTO_S3 },
		{ "metrics", cfg->metrics_listen, KVTD_PROTO_HTTP },
	};
	int rc = kvtd_metrics_init(srv);

	if (rc < 0)
		return rc;
	if (cfg->metrics_token_path) {
		char err[200];
		rc = kvtd_metrics_token_load(cfg->metrics_token_path, &srv->metrics_token, err,
					     sizeof(err));
		if (rc < 0) {
			kvtd_log(KVTD_ERROR, "metrics token refused", "file=%s error=\"%s\"",
				 cfg->metrics_token_path, err);
			fprintf(stderr, "kvtierd: --metrics-token %s: %s\n", cfg->metrics_token_path, err);
			return -EINVAL;
		}
	}
	/* Native, RESP or S3 off loopback without --tenants was refused
	 * before (kvtierd_exposure) unless --insecure. */
	for (unsigned i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct kvtd_listener *l = &listeners[srv->listener_count];
		if (!specs[i].spec)
			continue;
		rc = strcmp(specs[i].opt, "unix") == 0 ? kvtierd_bind_unix(l, specs[i].spec)
						       : kvtierd_bind_tcp(l, specs[i].spec);
		if (rc < 0) {
			kvtierd_listen_fail(specs[i].opt, specs[i].spec, rc);
			return rc;
		}
		l->proto = specs[i].proto;
		srv->listener_count++;
		if (l->proto == KVTD_PROTO_HTTP && !srv->metrics_token &&
		    strncmp(l->name, "127.", 4) != 0 && strncmp(l->name, "[::1]", 5) != 0) {
			kvtd_log(KVTD_ERROR, "a metrics listener off loopback needs --metrics-token",
				 "metrics=%s", l->name);
			fprintf(stderr, "kvtierd: --metrics %s is not loopback: give --metrics-token "
				"FILE too\n", cfg->metrics_listen);
			return -EINVAL;
		}
	}
	return 0;
}

/* The bound listeners start listening (the Unix one already does): the
 * store is open.  A connection is queued from here and accepted once the
 * loops run.  0 or -errno (a process that bound the same port in the
 * meantime and listened first). */
static int kvtierd_listen_all(struct kvtd_server *srv)
{
	static const char *const opts[KVTD_PROTO__COUNT] = {
		[KVTD_PROTO_NATIVE] = "listen", [KVTD_PROTO_RESP] = "resp",
		[KVTD_PROTO_HTTP] = "metrics", [KVTD_PROTO_S3] = "s3",
	};

	for (unsigned i = 0; i < srv->listener_count; i++) {
		struct kvtd_listener *l = &srv->listeners[i];
		int one = 1;
		if (!l->is_unix)
			setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (listen(l->fd, 1024) < 0) {
			int rc = -errno;
			kvtierd_listen_fail(l->is_unix ? "unix" : opts[l->proto], l->name, rc);
			return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * main
 */

static void kvtierd_reload(struct kvtd_server *srv)
{
	char err[256];
	struct kvtd_tenants *t;
	unsigned count;
	int rc = kvtd_log_reopen(), swept;

	if (rc < 0)
		kvtd_log(KVTD_ERROR, "cannot reopen the log file", "error=\"%s\"", strerror(-rc));
	if (!srv->cfg.tenants_path) {
		kvtd_log(KVTD_INFO, "SIGHUP: log reopened", NULL);
		return;
	}
	rc = kvtd_tenants_load(srv->cfg.tenants_path, &t, err, sizeof(err));
	if (rc < 0) {
		char q[300];
		/* Said to monitoring too (kvtier_tenants_last_reload_successful,
		 * alert KvtierTenantsReloadFailed): the log line alone let a
		 * broken file sit unnoticed until the next restart refused it.
		 * Counted before the line, so that it holds once the line is
		 * read (test_hostile reload_refused reads STATS after it). */
		atomic_store(&srv->ctr.tenants_reload_ok, 0);
		KVTD_COUNT(srv, tenants_reload_failures, 1);
		kvtd_log(KVTD_ERROR, "SIGHUP: tenants file refused; keeping the old one",
			 "file=%s error=%s", srv->cfg.tenants_path, kvtd_log_quote(q, sizeof(q), err));
		return;
	}
	atomic_store(&srv->ctr.tenants_reload_ok, 1);
	count = kvtd_tenants_count(t);
	kvtd_auth_install(t); /* t is the table's now */
	/* Open connections of removed tenants close, changed roles apply;
	 * their entries in the tenants table go once none holds them. */
	kvtd_loops_wake(srv);
	swept = kvtd_tstat_sweep(srv, t);
	rc = kvtd_quota_apply(srv->store);
	if (rc < 0)
		kvtd_log(KVTD_ERROR, "SIGHUP: cannot apply the quotas", "error=\"%s\"",
			 kvt_strerror(rc));
	/* Said once it holds: a request sent after this line is read is
	 * checked against the new table (operators and tests wait for it). */
	kvtd_log(KVTD_INFO, "SIGHUP: log reopened, tenants reloaded", "tenants=%u entries_freed=%d",
		 count, swept);
}

/*
 * The protocol table: what each kind of listener speaks (kvtierd.h
 * "The protocol table").  A new protocol is one line here.
 */
static const struct kvtd_proto *const kvtierd_protos[KVTD_PROTO__COUNT] = {
	[KVTD_PROTO_NATIVE] = &kvtd_native_proto,
	[KVTD_PROTO_RESP] = &kvtd_resp_proto,
	[KVTD_PROTO_HTTP] = &kvtd_http_proto,
	[KVTD_PROTO_S3] = &kvtd_s3_proto,
};

/*
 * Descriptors: raise the soft NOFILE limit to the hard one, then keep
 * --max-conns below what is left once the store, the listeners and the
 * loops have theirs (KVTIERD_FD_MARGIN more for logs, the tenants file,
 * etcd), so that a connection past it is refused with a frame rather
 * than failing accept (loop.c "loop_shed" covers what is left).
 */
#define KVTIERD_FD_MARGIN 32u
#define KVTIERD_FD_PER_LOOP 4u /* epoll, wake eventfd, queue eventfd, spare */

static void kvtierd_nofile(struct kvtd_server *srv)
{
	struct kvtd_config *cfg = &srv->cfg;
	struct rlimit rl;
	uint64_t used = 0, room;
	DIR *d;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = rl;
		want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (1u << 20) : rl.rlim_max;
		if (want.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl = want;
	}
	d = opendir("/proc/self/fd");
	if (d) {
		while (readdir(d))
			used++;
		closedir(d);
	}
	used += (uint64_t)cfg->threads * KVTIERD_FD_PER_LOOP + KVTIERD_FD_MARGIN;
	room = rl.rlim_cur > used ? rl.rlim_cur - used : 1;
	if (room < cfg->max_conns) {
		kvtd_log(KVTD_WARN, "--max-conns lowered to fit the descriptor limit (NOFILE)",
			 "max_conns=%u lowered_to=%llu nofile=%llu in_use=%llu", cfg->max_conns,
			 (unsigned long long)room, (unsigned long long)rl.rlim_cur,
			 (unsigned long long)used);
		cfg->max_conns = (unsigned)room;
	}
}

/* A TCP listen spec ("HOST:PORT") on a loopback address. */
static bool kvtierd_loopback(const char *spec)
{
	return strncmp(spec, "127.", 4) == 0 || strncmp(spec, "[::1]", 5) == 0 ||
	       strncmp(spec, "localhost:", 10) == 0;
}

/*
 * Who can reach what (doc/security.md "Threats"), checked before anything
 * is bound: without --tenants every client is the admin, so a native,
 * RESP or S3 listener off loopback needs --insecure; with --tenants, a /metrics
 * without --metrics-token shows every tenant's counters to whoever
 * reaches it, which is said loudly.  KVTD_EXIT_OK or KVTD_EXIT_USAGE.
 */
static int kvtierd_exposure(const struct kvtd_config *cfg)
{
	const char *specs[] = { strcmp(cfg->listen, "none") ? cfg->listen : NULL,
				cfg->resp_listen, cfg->s3_listen };
	static const char *const opts[] = { "listen", "resp", "s3" };

	for (unsigned i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		if (specs[i] && !strchr(specs[i], ':')) { /* a port alone: say so, not "exposed" */
			/* The option, and an example from the port only when it
			 * is one ('6379x' gave "e.g. 127.0.0.1:6379x"). */
			bool port = specs[i][0] && strspn(specs[i], "0123456789") == strlen(specs[i]);
			fprintf(stderr, "kvtierd: --%s: '%s' is not HOST:PORT (e.g. 127.0.0.1:%s)\n"
				"Run 'kvtierd --help' for the options.\n", opts[i], specs[i],
				port ? specs[i] : "7070");
			return KVTD_EXIT_USAGE;
		}
		if (!specs[i] || cfg->tenants_path || cfg->insecure || kvtierd_loopback(specs[i]))
			continue;
		kvtd_log(KVTD_ERROR, "refusing to listen off loopback without --tenants",
			 "addr=%s", specs[i]);
		fprintf(stderr, "kvtierd: %s is not loopback and there is no --tenants file: "
			"anyone who reaches it could read and write every block as the admin.  "
			"Give --tenants FILE, or --insecure to do it anyway.\n", specs[i]);
		return KVTD_EXIT_USAGE;
	}
	if (cfg->tenants_path && cfg->metrics_listen && !cfg->metrics_token_path)
		kvtd_log(KVTD_WARN,
			 "/metrics HAS NO --metrics-token: it shows every tenant's counters and "
			 "byte rates to whoever can reach it; give --metrics-token FILE", "metrics=%s",
			 cfg->metrics_listen);
	return KVTD_EXIT_OK;
}

/* 1. Options: the command line and --config, then the defaults that do
 * not need the store's directory.  Usage errors exit 2. */
static void kvtierd_parse(struct kvtd_config *cfg, int argc, char **argv)
{
	long ncpu;

	cfg->log_level = KVTD_INFO;
	cfg->idle_timeout_s = DEFAULT_IDLE_S;
	cfg->shutdown_timeout_s = DEFAULT_SHUTDOWN_S;
	kvtierd_args(cfg, argc, argv);
	if (!cfg->dir)
		cfg->dir = kvtierd_strdup(DEFAULT_DIR);
	if (!cfg->listen)
		cfg->listen = kvtierd_strdup(DEFAULT_LISTEN);
	if (!cfg->dram_set)
		cfg->dram_bytes = kvtierd_default_dram();
	if (!cfg->max_conns)
		cfg->max_conns = KVTD_MAX_CONNS;
	if (!cfg->max_memory)
		cfg->max_memory = kvtierd_default_max_memory();
	if (!cfg->conn_inflight)
		cfg->conn_inflight = KVTD_INFLIGHT_MAX;
	if (!cfg->conn_output)
		cfg->conn_output = KVTD_OUT_MAX;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (!cfg->threads)
		cfg->threads = ncpu > 0 ? (unsigned)(ncpu < 256 ? ncpu : 256) : 1;
	if (strcmp(cfg->listen, "none") == 0 && !cfg->unix_path)
		kvtierd_die_usage("--listen none needs --unix PATH");
}

/*
 * 2, 3. Signals, log, tenants, listeners bound, TLS, store, listeners
 * listening.  *sfd: the signalfd.  KVTD_EXIT_OK, or the exit code (what
 * was opened is closed by kvtierd_close).
 */
static int kvtierd_open(struct kvtd_server *srv, struct kvtd_listener *listeners, int *sfd)
{
	struct kvtd_config *cfg = &srv->cfg;
	sigset_t sigs;
	bool usage;
	int rc;

	memcpy(srv->protos, kvtierd_protos, sizeof(srv->protos));

	/* Signals: read by this thread from a signalfd, never handled. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	*sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (*sfd < 0) {
		fprintf(stderr, "kvtierd: signalfd: %s\n", strerror(errno));
		return KVTD_EXIT_FAIL;
	}

	/* Log, tenants, store, listeners */
	kvtd_log_set_json(cfg->log_json ? kvtd_log_json : NULL);
	rc = kvtd_log_open(cfg->log_path, cfg->log_level);
	if (rc < 0) {
		fprintf(stderr, "kvtierd: --log %s: %s: the user kvtierd runs as (uid %u) must "
			"be able to create and append to it (systemd: LogsDirectory=, "
			"/var/log/kvtierd); or leave --log out to log to stderr\n",
			cfg->log_path, strerror(-rc), (unsigned)geteuid());
		return KVTD_EXIT_FAIL;
	}
	srv->start_ns = kvtd_now_ns();
	atomic_store(&srv->ctr.tenants_reload_ok, 1);
	rc = kvtierd_exposure(cfg);
	if (rc != KVTD_EXIT_OK)
		return rc;
	if (cfg->tenants_path) {
		char err[256], q[300];
		struct kvtd_tenants *t;
		rc = kvtd_tenants_load(cfg->tenants_path, &t, err, sizeof(err));
		if (rc < 0) {
			kvtd_log(KVTD_ERROR, "tenants file refused", "file=%s error=%s",
				 cfg->tenants_path, kvtd_log_quote(q, sizeof(q), err));
			fprintf(stderr, "kvtierd: --tenants %s: %s\n", cfg->tenants_path, err);
			return KVTD_EXIT_USAGE;
		}
		kvtd_auth_install(t);
		kvtd_log(KVTD_INFO, "tenants loaded", "file=%s tenants=%u", cfg->tenants_path,
			 kvtd_tenants_count(t));
	} else {
		kvtd_auth_install(NULL);
		kvtd_log(KVTD_WARN,
			 "AUTHENTICATION IS OFF: no --tenants file, every client is tenant "
			 "\"default\" with the admin role; use --tenants on any shared network",
			 NULL);
	}
	/* Somebody else's directory (a home directory, /tmp, a mount point
	 * with data on it) is refused before anything is written to it. */
	{
		char msg[PATH_MAX + 512], q[PATH_MAX + 600];
		if (kvtd_config_dir_foreign(cfg, msg, sizeof(msg)) < 0) {
			kvtd_log(KVTD_ERROR, "store directory refused", "dir=%s error=%s", cfg->dir,
				 kvtd_log_quote(q, sizeof(q), msg));
			fprintf(stderr, "kvtierd: %s\n", msg);
			return KVTD_EXIT_USAGE;
		}
	}
	/* Listeners and TLS before the store: a port in use or a bad
	 * certificate is said in milliseconds, not after the SSD tier's
	 * recovery, and without the store's directory locked meanwhile. */
	srv->listeners = listeners;
	rc = kvtierd_bind_all(srv, listeners);
	if (rc == 0)
		rc = kvtd_tls_setup(srv);
	if (rc < 0)
		return rc == -EINVAL ? KVTD_EXIT_USAGE : KVTD_EXIT_FAIL;
	rc = kvtierd_mkdir_p(cfg->dir);
	if (rc < 0) {
		char hb[256];
		kvtd_log(KVTD_ERROR, "cannot create the store directory", "dir=%s error=\"%s\"%s",
			 cfg->dir, strerror(-rc), kvtierd_dir_hint(rc, hb, sizeof(hb)));
		return KVTD_EXIT_FAIL;
	}
	if (!cfg->ssd_set)
		cfg->ssd_bytes = kvtierd_default_ssd(cfg);
	rc = kvtierd_store_open(srv, &usage);
	if (rc < 0)
		return usage ? KVTD_EXIT_USAGE : KVTD_EXIT_FAIL;
	kvtierd_limits(srv);
	if (proto_limits_check(&srv->lim) != 0) {
		kvtd_log(KVTD_ERROR, "no usable protocol limits for this store", "value_max=%llu",
			 (unsigned long long)srv->lim.value_max);
		return KVTD_EXIT_FAIL;
	}
	if (cfg->resp_listen && (rc = kvtd_resp_setup(srv)) < 0) {
		kvtd_log(KVTD_ERROR, "cannot register the RESP namespace", "error=\"%s\"",
			 kvt_strerror(rc));
		return KVTD_EXIT_FAIL;
	}
	if (kvtd_s3_check() < 0) {
		kvtd_log(KVTD_ERROR, "the S3 op table (daemon/s3d.c s3d_ops) is out of order",
			 "ops=%d", KVTD_S3_OPS);
		return KVTD_EXIT_FAIL;
	}
	if ((rc = kvtd_s3_buckets_migrate(srv)) < 0) {
		kvtd_log(KVTD_ERROR, "cannot keep the S3 buckets in the namespace registry",
			 "error=\"%s\"", kvt_strerror(rc));
		return KVTD_EXIT_FAIL;
	}
	if (kvtierd_listen_all(srv) < 0)
		return KVTD_EXIT_FAIL;
	/* TLS on the native and RESP TCP listeners; Unix sockets and the
	 * metrics listener stay plain. */
	for (unsigned i = 0; srv->tls_ctx && i < srv->listener_count; i++)
		listeners[i].tls = !listeners[i].is_unix && listeners[i].proto != KVTD_PROTO_HTTP;
	kvtierd_nofile(srv);
	if (kvtd_tenant_ns_init(srv) < 0)
		return KVTD_EXIT_FAIL;
	return KVTD_EXIT_OK;
}

static void kvtierd_log_started(const struct kvtd_server *srv)
{
	const struct kvtd_config *cfg = &srv->cfg;

	kvtd_log(KVTD_INFO, "kvtierd started",
		 "version=%s dir=%s dram_bytes=%llu ssd_bytes=%llu threads=%u auth=%s "
		 "value_max=%llu frame_max=%llu idle_timeout_s=%u max_conns=%u max_memory=%llu "
		 "conn_inflight=%u conn_output=%llu",
		 KVTD_VERSION, cfg->dir, (unsigned long long)cfg->dram_bytes,
		 (unsigned long long)cfg->ssd_bytes, srv->loop_count,
		 kvtd_auth_enabled() ? "hmac-sha256" : "none",
		 (unsigned long long)srv->lim.value_max, (unsigned long long)srv->lim.frame_max,
		 cfg->idle_timeout_s, cfg->max_conns, (unsigned long long)cfg->max_memory,
		 cfg->conn_inflight, (unsigned long long)cfg->conn_output);
	for (unsigned i = 0; i < srv->listener_count; i++) {
		const struct kvtd_listener *l = &srv->listeners[i];
		char msg[200];
		if (l->proto != KVTD_PROTO_NATIVE)
			snprintf(msg, sizeof(msg), "%s listener on %s",
				 l->proto == KVTD_PROTO_RESP ? "RESP" :
				 l->proto == KVTD_PROTO_S3   ? "S3" : "metrics", l->name);
		else
			snprintf(msg, sizeof(msg), "listening on %s%s", l->is_unix ? "unix:" : "",
				 l->name);
		/* The S3 listener's --s3-domain names (as it compares them:
		 * lowercased, no trailing dot), which virtual-hosted requests
		 * must be under: a typo shows here, not as path-style 404s. */
		if (l->proto == KVTD_PROTO_S3 && cfg->s3_domain) {
			char q[1024];
			kvtd_log(KVTD_INFO, msg, "addr=%s s3_domain=%s", l->name,
				 kvtd_log_quote(q, sizeof(q), cfg->s3_domain));
			continue;
		}
		kvtd_log(KVTD_INFO, msg, "%s=%s", l->is_unix ? "unix" : "addr", l->name);
	}
}

/*
 * 4-6. The cluster, the aux thread and the loops; the signal loop until
 * SIGTERM/SIGINT; then stop them, flush and close the store.  The exit
 * code.
 */
static int kvtierd_serve(struct kvtd_server *srv, int sfd)
{
	int rc, exit_code = KVTD_EXIT_FAIL;

	rc = kvtd_cluster_start(srv);
	if (rc < 0) {
		exit_code = rc == -EINVAL ? KVTD_EXIT_USAGE : KVTD_EXIT_FAIL;
		goto stop;
	}

	rc = kvtd_repair_start(srv);
	if (rc < 0) {
		kvtd_log(KVTD_ERROR, "cannot start the repair thread", "error=\"%s\"", strerror(-rc));
		goto stop;
	}

	/* 4. Threads */
	srv->loop_count = srv->cfg.threads;
	rc = kvtd_aux_start(srv);
	if (rc == 0)
		rc = kvtd_loops_start(srv);
	if (rc < 0) {
		kvtd_log(KVTD_ERROR, "cannot start the event loops", "error=\"%s\"", strerror(-rc));
		goto stop;
	}
	kvtierd_log_started(srv);
	kvtd_notify_ready(srv->listeners[0].name); /* notify.c: store open, listeners bound */

	/* 5. Signals */
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t r = read(sfd, &si, sizeof(si));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(si)) {
			kvtd_log(KVTD_ERROR, "signalfd read failed; stopping", "error=\"%s\"",
				 strerror(errno));
			break;
		}
		if (si.ssi_signo == SIGHUP) {
			kvtierd_reload(srv);
			continue;
		}
		kvtd_log(KVTD_INFO, "stopping", "signal=%s",
			 si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
		kvtd_notify_stopping();
		break;
	}
	exit_code = KVTD_EXIT_OK;

stop:
	/* 6. Stop */
	kvtd_loops_stop(srv);
	kvtd_loops_join(srv);
	kvtd_repair_stop(srv);
	kvtd_cluster_stop(srv);
	for (unsigned i = 0; i < srv->listener_count; i++) {
		close(srv->listeners[i].fd);
		if (srv->listeners[i].is_unix)
			unlink(srv->listeners[i].name);
	}
	srv->listener_count = 0;
	kvtd_aux_stop(srv);
	rc = kvt_flush(srv->store);
	if (rc < 0) {
		kvtd_log(KVTD_ERROR, "flush before close failed", "error=\"%s\"", kvt_strerror(rc));
		exit_code = KVTD_EXIT_FAIL;
	}
	rc = kvt_store_close(srv->store);
	if (rc < 0) {
		kvtd_log(KVTD_ERROR, "closing the store failed", "error=\"%s\"", kvt_strerror(rc));
		exit_code = KVTD_EXIT_FAIL;
	}
	kvtd_loops_finish(srv);
	if (exit_code == KVTD_EXIT_OK)
		kvtd_log(KVTD_INFO, "stopped", "conns_accepted=%llu frames_in=%llu",
			 (unsigned long long)atomic_load(&srv->ctr.conns_accepted),
			 (unsigned long long)atomic_load(&srv->ctr.frames_in));
	return exit_code;
}

/* What kvtierd_open opened and kvtierd_serve did not close. */
static void kvtierd_close(struct kvtd_server *srv, int sfd)
{
	for (unsigned i = 0; i < srv->listener_count; i++) {
		close(srv->listeners[i].fd);
		if (srv->listeners[i].is_unix)
			unlink(srv->listeners[i].name);
	}
	kvt_store_destroy(srv->store);
	kvtd_auth_shutdown();
	kvtd_metrics_free(srv);
	kvtd_tenant_ns_free(srv);
	kvtd_s3_free(srv);
	kvtd_resp_wseq_free(srv);
	kvtd_expiry_free(srv);
	kvtd_tls_free(srv);
	free(srv->metrics_token);
	kvtd_log_close();
	if (sfd >= 0)
		close(sfd);
	kvtd_config_free(&srv->cfg);
}

int main(int argc, char **argv)
{
	static struct kvtd_server server;
	struct kvtd_server *srv = &server;
	struct kvtd_listener listeners[5] = { 0 }; /* proto 0: native */
	int sfd = -1, exit_code;

	kvtierd_parse(&srv->cfg, argc, argv);
	/* The daemon's tables of client-chosen keys hash with it
	 * (kvtd_key_hash): drawn before any of them exists. */
	if (getrandom(&srv->key_secret, sizeof(srv->key_secret), 0) !=
	    (ssize_t)sizeof(srv->key_secret)) {
		fprintf(stderr, "kvtierd: cannot draw a random key (getrandom)\n");
		return KVTD_EXIT_FAIL;
	}
	srv->listeners = listeners;
	kvtd_s3_init(srv);
	kvtd_value_test_init(srv);
	kvtd_resp_wseq_init(srv);
	(void)kvtd_expiry_init(srv); /* none: values expire when read */
	exit_code = kvtierd_open(srv, listeners, &sfd);
	/* Why a start failed went to the log: with --log FILE the terminal
	 * (or the unit's journal) is told where to look -- once the log is
	 * open (start_ns is set then); a log that could not be opened was
	 * said on stderr, and holds nothing of this start. */
	if (exit_code != KVTD_EXIT_OK && srv->cfg.log_path && srv->start_ns)
		fprintf(stderr, "kvtierd: could not start (exit %d); why is in the log, %s\n",
			exit_code, srv->cfg.log_path);
	if (exit_code == KVTD_EXIT_OK)
		exit_code = kvtierd_serve(srv, sfd);
	kvtierd_close(srv, sfd);
	return exit_code;
}

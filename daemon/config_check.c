/*
 * config_check.c - `kvtierd --check-config FILE`: validate a configuration
 * without starting (like `nginx -t` or `sshd -t`).  kvtierd.c parses the
 * file and the rest of the command line as it would for a start (config.c:
 * a bad line is already a usage error there), then calls
 * kvtd_config_check, which checks what only a start would otherwise find:
 *
 *   - the listener addresses' syntax (HOST:PORT, [V6]:PORT, port 0..65535)
 *     without resolving or binding them; --listen none needs --unix; a
 *     native, RESP or S3 listener off loopback needs --tenants or --insecure;
 *   - a metrics listener off loopback needs --metrics-token;
 *   - the files the options name are read and parsed as a start would:
 *     --tenants (its parser and its permission rule), --metrics-token,
 *     --tls-cert/--tls-key/--tls-ca (an OpenSSL server context is built and
 *     freed), TLS needing both cert and key;
 *   - --members (the static list's parser), --etcd (an http:// or https://
 *     URL);
 *   - every --set NAME=VALUE on a created, never opened, store (so an
 *     unknown library option or a bad value is caught), and the tiers'
 *     sizes the same way; a --dram of less than one chunk, an --ssd of
 *     fewer than two segments; a --dram of more than this machine's
 *     memory is a warning (a start here refuses it; the file may be
 *     meant for a larger machine);
 *   - --unix: the path fits sun_path, its directory exists and this user
 *     may create the socket there, and no other kind of file is there;
 *   - --dir: an existing path must be a writable directory that is empty
 *     or a kvtier store (kvtd_config_dir_foreign); one that does not exist
 *     is created at start, so its nearest existing parent must be
 *     writable; --log: its directory must exist.
 *
 * It opens no store, binds nothing, writes nothing.  It prints every
 * problem to err ("kvtierd: FILE: ..."), then the effective settings to out
 * as "key = value" lines that --config accepts, and returns the exit
 * status: 0 valid, 2 not.  Main thread, before anything else starts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "kvtierd.h"
#include "members.h"
#include "tlsio.h"

struct check {
	FILE *err;
	const char *where; /* the config file, or "command line" */
	unsigned problems;
};

static void check_fail(struct check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check_fail(struct check *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(c->err, "kvtierd: %s: ", c->where);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
	c->problems++;
}

/* "HOST:PORT" or "[V6]:PORT", port 0..65535; *loopback set when the host
 * is 127.x, ::1 or localhost.  0 or -EINVAL. */
static int check_addr(const char *a, bool *loopback)
{
	const char *colon, *host_end;
	char *end;
	unsigned long port;

	if (a[0] == '[') {
		host_end = strchr(a, ']');
		if (!host_end || host_end == a + 1 || host_end[1] != ':')
			return -EINVAL;
		colon = host_end + 1;
	} else {
		colon = strrchr(a, ':');
		if (!colon || colon == a || memchr(a, ':', (size_t)(colon - a)))
			return -EINVAL;
	}
	if (!colon[1] || colon[1] == '-' || colon[1] == '+')
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port > 65535)
		return -EINVAL;
	if (loopback)
		*loopback = strncmp(a, "127.", 4) == 0 || strncmp(a, "[::1]:", 6) == 0 ||
			    strncmp(a, "localhost:", 10) == 0;
	return 0;
}

static void check_listen(struct check *c, const char *opt, const char *a)
{
	if (a && check_addr(a, NULL) < 0)
		check_fail(c, "--%s: '%s' is not HOST:PORT", opt, a);
}

/* ------------------------------------------------------------------------
 * --dir: a kvtier store, or nobody's
 */

/* The directory path p names its last component in: "." or "/" too. */
static void path_parent(const char *p, char *out, size_t cap)
{
	const char *slash = strrchr(p, '/');

	if (!slash)
		snprintf(out, cap, ".");
	else if (slash == p)
		snprintf(out, cap, "/");
	else
		snprintf(out, cap, "%.*s", (int)(slash - p), p);
}

/* Is entry name of the directory dst one of the files the options name
 * (the log, the socket, ...)?  A first start may have made them there. */
static bool dir_named(const struct kvtd_config *cfg, const struct stat *dst, const char *name)
{
	const char *paths[] = { cfg->log_path, cfg->unix_path, cfg->tenants_path,
				cfg->metrics_token_path, cfg->tls_cert, cfg->tls_key, cfg->tls_ca };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		const char *p = paths[i], *slash = p ? strrchr(p, '/') : NULL;
		char parent[PATH_MAX];
		struct stat st;
		if (!p || strcmp(slash ? slash + 1 : p, name) != 0)
			continue;
		path_parent(p, parent, sizeof(parent));
		if (stat(parent, &st) == 0 && st.st_dev == dst->st_dev && st.st_ino == dst->st_ino)
			return true;
	}
	return false;
}

int kvtd_config_dir_foreign(const struct kvtd_config *cfg, char *msg, size_t len)
{
	/* What a store has made at least one of: the rule kvt_store_fsck
	 * (lib/tier/ssd/ssd_fsck.c) uses to tell a store from a typo. */
	static const char *const store_files[] = { "LOCK", "namespaces", "ssd" };
	char seen[3][64], list[256];
	unsigned nseen = 0, others = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (len > 0)
		msg[0] = 0;
	if (!cfg->dir || stat(cfg->dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	d = opendir(cfg->dir);
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "lost+found") == 0 ||
		    dir_named(cfg, &st, n))
			continue;
		for (size_t i = 0; i < sizeof(store_files) / sizeof(store_files[0]); i++)
			if (strcmp(n, store_files[i]) == 0) {
				closedir(d);
				return 0;
			}
		if (nseen < 3)
			snprintf(seen[nseen++], sizeof(seen[0]), "%.63s", n);
		else
			others++;
	}
	closedir(d);
	if (!nseen)
		return 0;
	size_t off = (size_t)snprintf(list, sizeof(list), "%s", seen[0]);
	for (unsigned i = 1; i < nseen && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, ", %s", seen[i]);
	if (others && off < sizeof(list))
		snprintf(list + off, sizeof(list) - off, " and %u more", others);
	snprintf(msg, len,
		 "--dir %s is not empty and not a kvtier store (it holds %s): kvtierd would "
		 "write LOCK, namespaces and ssd/ among them; give a new or empty directory, "
		 "e.g. %s%skvtierd-data", cfg->dir, list, cfg->dir,
		 cfg->dir[strlen(cfg->dir) - 1] == '/' ? "" : "/");
	return -ENOTEMPTY;
}

/* --unix PATH as kvtierd_bind_unix will find it: a path sun_path holds,
 * in a directory that exists and that this user may create files in, not
 * an existing file of another kind (a socket there is a leftover or a
 * live kvtierd: the start tells which). */
static void check_unix(struct check *c, const char *path)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	char parent[PATH_MAX];
	struct stat st;

	if (!path)
		return;
	if (strlen(path) > max) {
		check_fail(c, "--unix %s: %zu bytes, longer than a socket path may be (%zu): give "
			   "a shorter path (e.g. under /run/kvtierd)", path, strlen(path), max);
		return;
	}
	path_parent(path, parent, sizeof(parent));
	if (stat(parent, &st) < 0) {
		check_fail(c, "--unix %s: its directory %s: %s%s", path, parent, strerror(errno),
			   errno == ENOENT ? ": create it (systemd: RuntimeDirectory=, /run/kvtierd), "
			   "or give another --unix PATH" : "");
	} else if (!S_ISDIR(st.st_mode)) {
		check_fail(c, "--unix %s: %s is not a directory", path, parent);
	} else if (access(parent, W_OK | X_OK) < 0) {
		check_fail(c, "--unix %s: cannot create the socket in %s: %s: the user kvtierd runs "
			   "as (uid %u) must be able to write there", path, parent, strerror(errno),
			   (unsigned)geteuid());
	} else if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		check_fail(c, "--unix %s: a file that is not a socket is there: kvtierd does not "
			   "replace it", path);
	}
}

static void check_files(struct check *c, const struct kvtd_config *cfg)
{
	char err[512], msg[PATH_MAX + 512];

	if (cfg->tenants_path) {
		struct kvtd_tenants *t = NULL;
		if (kvtd_tenants_load(cfg->tenants_path, &t, err, sizeof(err)) < 0)
			check_fail(c, "--tenants %s: %s", cfg->tenants_path, err);
		kvtd_tenants_free(t);
	}
	if (cfg->metrics_token_path) {
		char *tok = NULL;
		if (kvtd_metrics_token_load(cfg->metrics_token_path, &tok, err, sizeof(err)) < 0)
			check_fail(c, "--metrics-token %s: %s", cfg->metrics_token_path, err);
		free(tok);
	}
	if (cfg->tls_cert || cfg->tls_key || cfg->tls_ca || cfg->tls_verify_client) {
		if (!cfg->tls_cert || !cfg->tls_key) {
			check_fail(c, "TLS needs both --tls-cert and --tls-key");
		} else {
			SSL_CTX *ctx = tlsio_ctx_server(cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
							cfg->tls_verify_client, err, sizeof(err));
			if (!ctx)
				check_fail(c, "TLS: %s", err);
			SSL_CTX_free(ctx);
		}
	}
	if (cfg->dir) {
		struct stat st;
		if (stat(cfg->dir, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				check_fail(c, "--dir %s: not a directory", cfg->dir);
			else if (access(cfg->dir, R_OK | W_OK | X_OK) < 0)
				check_fail(c, "--dir %s: %s", cfg->dir, strerror(errno));
			else if (kvtd_config_dir_foreign(cfg, msg, sizeof(msg)) < 0)
				check_fail(c, "%s", msg);
		} else if (errno != ENOENT) {
			check_fail(c, "--dir %s: %s", cfg->dir, strerror(errno));
		} else {
			/* Created at start: its nearest existing parent must let us. */
			char *d = strdup(cfg->dir), *slash;
			const char *parent = NULL;
			while (d && !parent && (slash = strrchr(d, '/')) != NULL) {
				if (slash == d)
					slash[1] = 0;
				else
					*slash = 0;
				if (slash == d || stat(d, &st) == 0)
					parent = d;
			}
			if (d && !parent)
				parent = "."; /* relative, nothing of it exists */
			if (parent && access(parent, W_OK | X_OK) < 0)
				check_fail(c, "--dir %s: cannot be created in %s: %s", cfg->dir,
					   parent, strerror(errno));
			free(d);
		}
	}
	if (cfg->log_path) {
		char *d = strdup(cfg->log_path), *slash = d ? strrchr(d, '/') : NULL;
		if (slash && slash != d) {
			*slash = 0;
			if (access(d, W_OK | X_OK) < 0)
				check_fail(c, "--log %s: directory %s: %s", cfg->log_path, d,
					   strerror(errno));
		}
		free(d);
	}
}

/* A size option of the library as the store will have it: the last --set
 * of it, else the default of its table (kvt_option_info), else fallback. */
static uint64_t check_size_option(const struct kvtd_config *cfg, const char *name,
				  uint64_t fallback)
{
	struct kvt_option o;
	uint64_t def = 0, v = 0;
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (strcmp(o.name, name) == 0 && o.def)
			kvtd_parse_size(o.def, &def);
	for (unsigned i = 0; i < cfg->set_count; i++)
		if (strcmp(cfg->set_names[i], name) == 0)
			kvtd_parse_size(cfg->set_values[i], &v);
	if (!v)
		v = def;
	return v ? v : fallback;
}

uint64_t kvtd_config_segment(const struct kvtd_config *cfg)
{
	return check_size_option(cfg, "ssd.segment", UINT64_C(256) << 20);
}

uint64_t kvtd_config_dram_over(const struct kvtd_config *cfg)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;

	return mem && cfg->dram_bytes > mem ? mem : 0;
}

/* The library's options on a store that is created, never opened. */
static void check_store_options(struct check *c, const struct kvtd_config *cfg)
{
	struct kvt_store *st;
	char num[32];
	int rc = kvt_store_create(&st);

	if (rc < 0) {
		check_fail(c, "cannot create a store to check --set: %s", kvt_strerror(rc));
		return;
	}
	if (cfg->dram_set) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)cfg->dram_bytes);
		rc = kvt_store_set_option(st, "dram.capacity", num);
		if (rc < 0)
			check_fail(c, "--dram %s: %s", num, kvt_strerror(rc));
	}
	for (unsigned i = 0; i < cfg->set_count; i++) {
		rc = kvt_store_set_option(st, cfg->set_names[i], cfg->set_values[i]);
		if (rc < 0)
			check_fail(c, "--set %s=%s: %s", cfg->set_names[i], cfg->set_values[i],
				   kvt_strerror(rc));
	}
	kvt_store_destroy(st);
	/* The DRAM tier refuses, at open, less than one chunk. */
	if (cfg->dram_set) {
		uint64_t chunk = check_size_option(cfg, "dram.chunk", UINT64_C(64) << 10);
		if (cfg->dram_bytes < chunk)
			check_fail(c, "--dram %llu is less than one dram.chunk (%llu)",
				   (unsigned long long)cfg->dram_bytes, (unsigned long long)chunk);
	}
	/* A warning, not a problem: the file may be meant for a larger
	 * machine (a Kubernetes node); a start on this one refuses it. */
	uint64_t mem = kvtd_config_dram_over(cfg);
	if (mem)
		fprintf(c->err, "kvtierd: %s: warning: --dram %llu is more than this machine's "
			"memory (%llu): a start here refuses it\n", c->where,
			(unsigned long long)cfg->dram_bytes, (unsigned long long)mem);
	/* The SSD tier refuses, at open, fewer than two segments. */
	if (cfg->ssd_set && cfg->ssd_bytes) {
		uint64_t seg = kvtd_config_segment(cfg);
		if (cfg->ssd_bytes / seg < 2)
			check_fail(c, "--ssd %llu holds fewer than two segments of %llu "
				   "(ssd.segment): give a larger --ssd, --set ssd.segment=SIZE "
				   "(a multiple of 4K, at least 1M), or --ssd 0 for no SSD tier",
				   (unsigned long long)cfg->ssd_bytes, (unsigned long long)seg);
	}
}

/* Who can reach what, as a start checks it (kvtierd.c kvtierd_exposure):
 * without --tenants every client is the admin, so a native, RESP or S3
 * listener off loopback needs --insecure. */
static void check_exposure(struct check *c, const struct kvtd_config *cfg)
{
	const char *specs[] = { cfg->listen && strcmp(cfg->listen, "none") ? cfg->listen : NULL,
				cfg->resp_listen, cfg->s3_listen };

	if (cfg->tenants_path || cfg->insecure)
		return;
	for (unsigned i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		bool loopback = true;
		if (specs[i] && check_addr(specs[i], &loopback) == 0 && !loopback)
			check_fail(c, "%s is not loopback and there is no --tenants file: give "
				   "--tenants FILE, or --insecure to let anyone who reaches it "
				   "be the admin", specs[i]);
	}
}

static void check_print(FILE *out, const struct kvtd_config *cfg)
{
	static const char *const levels[] = { "error", "warn", "info", "debug" };
	const struct {
		const char *name, *v;
	} strs[] = {
		{ "dir", cfg->dir },
		{ "listen", cfg->listen },
		{ "unix", cfg->unix_path },
		{ "tenants", cfg->tenants_path },
		{ "log", cfg->log_path },
		{ "resp", cfg->resp_listen },
		{ "s3", cfg->s3_listen },
		{ "s3-domain", cfg->s3_domain },
		{ "metrics", cfg->metrics_listen },
		{ "metrics-token", cfg->metrics_token_path },
		{ "tls-cert", cfg->tls_cert },
		{ "tls-key", cfg->tls_key },
		{ "tls-ca", cfg->tls_ca },
		{ "members", cfg->members },
		{ "etcd", cfg->etcd },
		{ "etcd-prefix", cfg->etcd_prefix },
		{ "advertise", cfg->advertise },
	};

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strs[i].v)
			fprintf(out, "%s = %s\n", strs[i].name, strs[i].v);
	if (cfg->dram_set)
		fprintf(out, "dram = %llu\n", (unsigned long long)cfg->dram_bytes);
	if (cfg->ssd_set)
		fprintf(out, "ssd = %llu\n", (unsigned long long)cfg->ssd_bytes);
	if (cfg->threads)
		fprintf(out, "threads = %u\n", cfg->threads);
	if (cfg->log_level >= 0 && cfg->log_level <= 3)
		fprintf(out, "log-level = %s\n", levels[cfg->log_level]);
	fprintf(out, "log-format = %s\n", cfg->log_json ? "json" : "text");
	fprintf(out, "idle-timeout = %u\n", cfg->idle_timeout_s);
	fprintf(out, "shutdown-timeout = %u\n", cfg->shutdown_timeout_s);
	if (cfg->max_conns)
		fprintf(out, "max-conns = %u\n", cfg->max_conns);
	if (cfg->max_memory)
		fprintf(out, "max-memory = %llu\n", (unsigned long long)cfg->max_memory);
	if (cfg->tenant_conns || cfg->max_conns)
		fprintf(out, "tenant-conns = %u\n",
			cfg->tenant_conns ? cfg->tenant_conns
			: cfg->max_conns / 4 ? cfg->max_conns / 4 : 1);
	if (cfg->conn_inflight)
		fprintf(out, "conn-inflight = %u\n", cfg->conn_inflight);
	if (cfg->conn_output)
		fprintf(out, "conn-output = %llu\n", (unsigned long long)cfg->conn_output);
	if (cfg->protocol_max)
		fprintf(out, "protocol-max = %u\n", cfg->protocol_max);
	if (cfg->etcd_ttl_s)
		fprintf(out, "etcd-ttl = %u\n", cfg->etcd_ttl_s);
	if (cfg->repair_grace_set)
		fprintf(out, "repair-grace = %u\n", cfg->repair_grace_ms);
	if (cfg->peer_connect_ms)
		fprintf(out, "peer-connect-timeout = %u\n", cfg->peer_connect_ms);
	if (cfg->repair_rate_set)
		fprintf(out, "repair-rate = %llu\n", (unsigned long long)cfg->repair_rate);
	if (cfg->repair_idle_rate_set)
		fprintf(out, "repair-idle-rate = %llu\n", (unsigned long long)cfg->repair_idle_rate);
	if (cfg->max_copies)
		fprintf(out, "max-copies = %u\n", cfg->max_copies);
	if (cfg->drain_budget_set)
		fprintf(out, "drain-budget = %llu\n", (unsigned long long)cfg->drain_budget);
	if (cfg->tls_verify_client)
		fprintf(out, "tls-verify-client = yes\n");
	if (cfg->insecure)
		fprintf(out, "insecure = yes\n");
	for (unsigned i = 0; i < cfg->set_count; i++)
		fprintf(out, "set = %s=%s\n", cfg->set_names[i], cfg->set_values[i]);
}

int kvtd_config_check(const struct kvtd_config *cfg, const char *path, FILE *out, FILE *err)
{
	struct check c = { .err = err, .where = path ? path : "command line" };
	bool loopback = true;

	if (cfg->listen && strcmp(cfg->listen, "none") == 0) {
		if (!cfg->unix_path)
			check_fail(&c, "--listen none needs --unix PATH");
	} else {
		check_listen(&c, "listen", cfg->listen);
	}
	check_listen(&c, "resp", cfg->resp_listen);
	check_listen(&c, "s3", cfg->s3_listen);
	check_listen(&c, "advertise", cfg->advertise);
	if (cfg->metrics_listen) {
		if (check_addr(cfg->metrics_listen, &loopback) < 0)
			check_fail(&c, "--metrics: '%s' is not [HOST:]PORT", cfg->metrics_listen);
		else if (!loopback && !cfg->metrics_token_path)
			check_fail(&c, "--metrics %s is not loopback: give --metrics-token FILE too",
				   cfg->metrics_listen);
	}
	check_unix(&c, cfg->unix_path);
	if (cfg->members) {
		char msg[300];
		struct kvtd_member *m = NULL;
		unsigned n = 0;
		if (kvtd_members_parse_static(cfg->members, &m, &n, msg, sizeof(msg)) < 0)
			check_fail(&c, "--members: %s", msg);
		free(m);
	}
	if (cfg->members && cfg->etcd)
		check_fail(&c, "--members and --etcd exclude each other");
	if (cfg->etcd && strncmp(cfg->etcd, "http://", 7) != 0 &&
	    strncmp(cfg->etcd, "https://", 8) != 0)
		check_fail(&c, "--etcd: '%s' is not an http:// or https:// URL", cfg->etcd);
	check_exposure(&c, cfg);
	check_files(&c, cfg);
	check_store_options(&c, cfg);
	if (c.problems) {
		fprintf(err, "kvtierd: %s: %u problem%s: configuration refused\n", c.where,
			c.problems, c.problems == 1 ? "" : "s");
		return KVTD_EXIT_USAGE;
	}
	check_print(out, cfg);
	fprintf(err, "kvtierd: %s: configuration OK\n", c.where);
	return KVTD_EXIT_OK;
}

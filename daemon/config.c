/*
 * config.c - kvtierd's options (config.h): one option by long name and
 * value, and the --config file's "key = value" lines.
 *
 * Pure: nothing here prints or exits.  A bad option is -EINVAL with a
 * message that names where it came from ("FILE:LINE: --dram: 'x' is not a
 * size (e.g. 512M, 4G)"); kvtierd.c prints it and exits 2.  The file
 * parser reads a buffer, so the fuzzer (tests/fuzz/fuzz_config.c) runs it
 * on any bytes; kvtd_config_load is the only function that does I/O.
 *
 * Config file lines, as kvtierd(8) documents them:
 *
 *   [blanks] '#' anything               a comment
 *   [blanks]                            blank
 *   [blanks] KEY [blanks] '=' [blanks] VALUE [blanks]
 *
 * blanks are spaces and tabs; a trailing '\r' is dropped (CRLF files);
 * KEY is a long option name without "--"; "config", "check-config",
 * "help" and "version" are refused.  A line longer than KVTD_CONFIG_LINE_MAX - 2 bytes (its
 * '\n' aside) and a NUL byte are errors.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kvtierd.h"

static int config_parse_uint(const char *v, unsigned max, unsigned *out)
{
	char *end;
	unsigned long n;

	if (!*v || *v == '-')
		return -EINVAL;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n > max)
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

static int config_replace(char **slot, const char *v)
{
	char *d = strdup(v);

	if (!d)
		return -ENOMEM;
	free(*slot);
	*slot = d;
	return 0;
}

static int config_usage(char *err, size_t err_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int config_usage(char *err, size_t err_len, const char *fmt, ...)
{
	va_list ap;

	if (err_len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, err_len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int config_oom(char *err, size_t err_len)
{
	if (err_len > 0)
		snprintf(err, err_len, "out of memory");
	return -ENOMEM;
}

/* --s3-domain NAME[,NAME...]: each NAME a DNS name (labels of 1..63
 * letters, digits and '-', not starting or ending with '-'; 253 bytes at
 * most; one trailing dot dropped), at most KVTD_S3_DOMAINS_MAX of them,
 * into *slot lowercased and joined by ',' (what s3http.c s3h_vhost reads).
 * 0, or -EINVAL with the message. */
static int config_s3_domain(char **slot, const char *v, const char *where, char *err,
			    size_t err_len)
{
	size_t n = strlen(v), o = 0, count = 0;
	char *d = malloc(n + 1);

	if (!d)
		return config_oom(err, err_len);
	for (size_t i = 0; i <= n;) {
		size_t s = i, e, label = 0;
		while (i < n && v[i] != ',')
			i++;
		e = i++;
		while (s < e && (v[s] == ' ' || v[s] == '\t'))
			s++;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && v[e - 1] == '.')
			e--;
		if (e == s || e - s > 253 || ++count > KVTD_S3_DOMAINS_MAX)
			goto bad;
		if (o)
			d[o++] = ',';
		for (size_t k = s; k < e; k++) {
			char ch = v[k];
			if (ch == '.') {
				if (label == 0 || v[k - 1] == '-')
					goto bad;
				label = 0;
			} else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				   (ch >= '0' && ch <= '9') || (ch == '-' && label > 0)) {
				if (++label > 63)
					goto bad;
				if (ch >= 'A' && ch <= 'Z')
					ch = (char)(ch - 'A' + 'a');
			} else {
				goto bad;
			}
			d[o++] = ch;
		}
		if (v[e - 1] == '-')
			goto bad;
	}
	d[o] = 0;
	free(*slot);
	*slot = d;
	return 0;
bad:
	free(d);
	return config_usage(err, err_len, "%s: --s3-domain: want NAME[,NAME...] (DNS names, at "
			    "most %u, e.g. s3.example.com), got '%s'", where, KVTD_S3_DOMAINS_MAX,
			    v);
}

/* --resp, --s3, --metrics, --metrics-token (respd.c, s3d.c, metrics.c), --tls-*
 * (tls.c): 1 if name is one of them and it applied, 0 if name is none of
 * them, < 0 an error. */
static int config_option_listeners(struct kvtd_config *cfg, const char *name, const char *v,
				   const char *where, char *err, size_t err_len)
{
	char **slot;

	if (strcmp(name, "resp") == 0) {
		if (!*v)
			return config_usage(err, err_len, "%s: --resp: want HOST:PORT", where);
		slot = &cfg->resp_listen;
	} else if (strcmp(name, "s3") == 0) {
		if (!*v)
			return config_usage(err, err_len, "%s: --s3: want HOST:PORT", where);
		slot = &cfg->s3_listen;
	} else if (strcmp(name, "s3-domain") == 0) {
		int rc = config_s3_domain(&cfg->s3_domain, v, where, err, err_len);
		return rc < 0 ? rc : 1;
	} else if (strcmp(name, "metrics") == 0) {
		if (!*v)
			return config_usage(err, err_len, "%s: --metrics: want [HOST:]PORT", where);
		if (!strchr(v, ':')) {
			/* A port alone: loopback. */
			size_t n = strlen(v);
			char *d = malloc(n + sizeof("127.0.0.1:"));
			if (!d)
				return config_oom(err, err_len);
			memcpy(d, "127.0.0.1:", 10);
			memcpy(d + 10, v, n + 1);
			free(cfg->metrics_listen);
			cfg->metrics_listen = d;
			return 1;
		}
		slot = &cfg->metrics_listen;
	} else if (strcmp(name, "metrics-token") == 0) {
		slot = &cfg->metrics_token_path;
	} else if (strcmp(name, "tls-cert") == 0) {
		slot = &cfg->tls_cert;
	} else if (strcmp(name, "tls-key") == 0) {
		slot = &cfg->tls_key;
	} else if (strcmp(name, "tls-ca") == 0) {
		slot = &cfg->tls_ca;
	} else if (strcmp(name, "tls-verify-client") == 0) {
		/* A flag on the command line; "yes"/"no" in a config file. */
		if (strcmp(v, "yes") && strcmp(v, "no") && strcmp(v, "1") && strcmp(v, "0"))
			return config_usage(err, err_len,
					    "%s: --tls-verify-client: want yes or no, got '%s'",
					    where, v);
		cfg->tls_verify_client = !strcmp(v, "yes") || !strcmp(v, "1");
		return 1;
	} else if (strcmp(name, "insecure") == 0) {
		/* A flag on the command line; "yes"/"no" in a config file. */
		if (strcmp(v, "yes") && strcmp(v, "no") && strcmp(v, "1") && strcmp(v, "0"))
			return config_usage(err, err_len, "%s: --insecure: want yes or no, got '%s'",
					    where, v);
		cfg->insecure = !strcmp(v, "yes") || !strcmp(v, "1");
		return 1;
	} else {
		return 0;
	}
	return config_replace(slot, v) < 0 ? config_oom(err, err_len) : 1;
}

/* --members, --etcd, --etcd-prefix, --etcd-ttl, --advertise (members.c):
 * as config_option_listeners. */
static int config_option_cluster(struct kvtd_config *cfg, const char *name, const char *v,
				 const char *where, char *err, size_t err_len)
{
	char **slot;

	if (strcmp(name, "members") == 0) {
		slot = &cfg->members;
	} else if (strcmp(name, "etcd") == 0) {
		slot = &cfg->etcd;
	} else if (strcmp(name, "etcd-prefix") == 0) {
		slot = &cfg->etcd_prefix;
	} else if (strcmp(name, "advertise") == 0) {
		slot = &cfg->advertise;
	} else if (strcmp(name, "repair-grace") == 0) {
		/* healing (repair.c): milliseconds a member may be gone before
		 * its groups are copied back up to their copies */
		if (config_parse_uint(v, 86400000, &cfg->repair_grace_ms) < 0)
			return config_usage(err, err_len,
					    "%s: --repair-grace: '%s' is not a number of ms", where, v);
		cfg->repair_grace_set = true;
		return 1;
	} else if (strcmp(name, "peer-connect-timeout") == 0) {
		/* healing (repair.c): how long a TCP connect to another member
		 * may take before that member counts as unreachable */
		if (config_parse_uint(v, 600000, &cfg->peer_connect_ms) < 0 ||
		    cfg->peer_connect_ms == 0)
			return config_usage(err, err_len,
					    "%s: --peer-connect-timeout: '%s' is not a number of ms "
					    "(1..600000)", where, v);
		return 1;
	} else if (strcmp(name, "repair-rate") == 0) {
		if (kvtd_parse_size(v, &cfg->repair_rate) < 0)
			return config_usage(err, err_len,
					    "%s: --repair-rate: '%s' is not a size (bytes a second, 0: off)",
					    where, v);
		cfg->repair_rate_set = true;
		return 1;
	} else if (strcmp(name, "repair-idle-rate") == 0) {
		if (kvtd_parse_size(v, &cfg->repair_idle_rate) < 0)
			return config_usage(err, err_len,
					    "%s: --repair-idle-rate: '%s' is not a size (bytes a second, "
					    "0: no limit)", where, v);
		cfg->repair_idle_rate_set = true;
		return 1;
	} else if (strcmp(name, "drain-budget") == 0) {
		if (kvtd_parse_size(v, &cfg->drain_budget) < 0)
			return config_usage(err, err_len,
					    "%s: --drain-budget: '%s' is not a size", where, v);
		cfg->drain_budget_set = true;
		return 1;
	} else if (strcmp(name, "max-copies") == 0) {
		/* repair.c "Copies": the most members a client's placed put
		 * is kept on, forwarded to and healed to */
		if (config_parse_uint(v, PROTO_COPIES_MAX, &cfg->max_copies) < 0 ||
		    cfg->max_copies == 0)
			return config_usage(err, err_len,
					    "%s: --max-copies: '%s' is not a number of members (1..%u)",
					    where, v, PROTO_COPIES_MAX);
		return 1;
	} else if (strcmp(name, "etcd-ttl") == 0) {
		if (config_parse_uint(v, 3600, &cfg->etcd_ttl_s) < 0 || cfg->etcd_ttl_s < 2)
			return config_usage(err, err_len,
					    "%s: --etcd-ttl: '%s' is not a number of seconds (2..3600)",
					    where, v);
		return 1;
	} else {
		return 0;
	}
	if (!*v)
		return config_usage(err, err_len, "%s: --%s: empty value", where, name);
	return config_replace(slot, v) < 0 ? config_oom(err, err_len) : 1;
}

/* Is name (len bytes) one of the library's options?  Its table
 * (kvt_option_info) is the one list: kvtierd keeps none of its own. */
static bool config_store_option(const char *name, size_t len)
{
	struct kvt_option o;
	for (unsigned i = 0; kvt_option_info(i, &o) == 0; i++)
		if (strlen(o.name) == len && memcmp(o.name, name, len) == 0)
			return true;
	return false;
}

int kvtd_config_option(struct kvtd_config *cfg, const char *name, const char *v,
		       const char *where, char *err, size_t err_len)
{
	char **slot = NULL;
	int rc;

	if (err_len > 0)
		err[0] = 0;
	if (strcmp(name, "dir") == 0) {
		if (!*v)
			return config_usage(err, err_len, "%s: --dir: empty directory", where);
		slot = &cfg->dir;
	} else if (strcmp(name, "dram") == 0) {
		if (kvtd_parse_size(v, &cfg->dram_bytes) < 0)
			return config_usage(err, err_len,
					    "%s: --dram: '%s' is not a size (e.g. 512M, 4G)", where, v);
		if (cfg->dram_bytes == 0)
			return config_usage(err, err_len,
					    "%s: --dram: kvtierd needs a DRAM tier (got '%s')", where, v);
		cfg->dram_set = true;
	} else if (strcmp(name, "ssd") == 0) {
		if (kvtd_parse_size(v, &cfg->ssd_bytes) < 0)
			return config_usage(err, err_len,
					    "%s: --ssd: '%s' is not a size (e.g. 64G, or 0 for none)",
					    where, v);
		cfg->ssd_set = true;
	} else if (strcmp(name, "listen") == 0) {
		slot = &cfg->listen;
	} else if (strcmp(name, "unix") == 0) {
		if (!*v)
			return config_usage(err, err_len, "%s: --unix: empty path", where);
		slot = &cfg->unix_path;
	} else if (strcmp(name, "threads") == 0) {
		if (config_parse_uint(v, 1024, &cfg->threads) < 0 || cfg->threads == 0)
			return config_usage(err, err_len,
					    "%s: --threads: '%s' is not a thread count (1..1024)",
					    where, v);
	} else if (strcmp(name, "tenants") == 0) {
		slot = &cfg->tenants_path;
	} else if (strcmp(name, "log") == 0) {
		slot = &cfg->log_path;
	} else if (strcmp(name, "log-level") == 0) {
		cfg->log_level = kvtd_log_level_parse(v);
		if (cfg->log_level < 0)
			return config_usage(err, err_len,
					    "%s: --log-level: '%s' is not error, warn, info or debug",
					    where, v);
	} else if (strcmp(name, "log-format") == 0) {
		if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0)
			return config_usage(err, err_len,
					    "%s: --log-format: '%s' is not text or json", where, v);
		cfg->log_json = strcmp(v, "json") == 0;
	} else if (strcmp(name, "idle-timeout") == 0) {
		if (config_parse_uint(v, 86400 * 365, &cfg->idle_timeout_s) < 0)
			return config_usage(err, err_len,
					    "%s: --idle-timeout: '%s' is not a number of seconds",
					    where, v);
	} else if (strcmp(name, "shutdown-timeout") == 0) {
		if (config_parse_uint(v, 86400, &cfg->shutdown_timeout_s) < 0)
			return config_usage(err, err_len,
					    "%s: --shutdown-timeout: '%s' is not a number of seconds",
					    where, v);
	} else if (strcmp(name, "max-conns") == 0) {
		if (config_parse_uint(v, 1u << 24, &cfg->max_conns) < 0 || cfg->max_conns == 0)
			return config_usage(
				err, err_len,
				"%s: --max-conns: '%s' is not a connection count (1..16777216)", where,
				v);
	} else if (strcmp(name, "tenant-conns") == 0) {
		if (config_parse_uint(v, 1u << 24, &cfg->tenant_conns) < 0 ||
		    cfg->tenant_conns == 0)
			return config_usage(
				err, err_len,
				"%s: --tenant-conns: '%s' is not a connection count (1..16777216)",
				where, v);
	} else if (strcmp(name, "max-memory") == 0) {
		if (kvtd_parse_size(v, &cfg->max_memory) < 0 || cfg->max_memory < (1u << 20))
			return config_usage(err, err_len,
					    "%s: --max-memory: '%s' is not a size of at least 1M",
					    where, v);
	} else if (strcmp(name, "conn-inflight") == 0) {
		if (config_parse_uint(v, 65536, &cfg->conn_inflight) < 0 || cfg->conn_inflight == 0)
			return config_usage(err, err_len,
					    "%s: --conn-inflight: '%s' is not a frame count (1..65536)",
					    where, v);
	} else if (strcmp(name, "conn-output") == 0) {
		if (kvtd_parse_size(v, &cfg->conn_output) < 0 || cfg->conn_output == 0)
			return config_usage(err, err_len,
					    "%s: --conn-output: '%s' is not a size (e.g. 64M)", where, v);
	} else if (strcmp(name, "protocol-max") == 0) {
		/* the newest protocol version HELLO offers: a server older than
		 * this one, for testing clients against it (doc/protocol.md 5) */
		if (config_parse_uint(v, PROTO_VERSION_MAX, &cfg->protocol_max) < 0 ||
		    cfg->protocol_max < PROTO_VERSION_MIN)
			return config_usage(err, err_len,
					    "%s: --protocol-max: '%s' is not a protocol version (%u..%u)",
					    where, v, PROTO_VERSION_MIN, PROTO_VERSION_MAX);
	} else if (strcmp(name, "set") == 0) {
		const char *eq = strchr(v, '=');
		char *d;
		if (!eq || eq == v)
			return config_usage(err, err_len, "%s: --set: want NAME=VALUE, got '%s'",
					    where, v);
		if (!config_store_option(v, (size_t)(eq - v)))
			return config_usage(err, err_len,
					    "%s: --set: unknown option '%.*s' "
					    "(kvtierd --help lists libkvtier's options)",
					    where, (int)(eq - v), v);
		if (cfg->set_count == KVTD_SET_MAX)
			return config_usage(err, err_len, "%s: --set: more than %d --set options",
					    where, KVTD_SET_MAX);
		d = strdup(v);
		if (!d)
			return config_oom(err, err_len);
		d[eq - v] = 0;
		cfg->set_names[cfg->set_count] = d;
		cfg->set_values[cfg->set_count] = d + (eq - v) + 1;
		cfg->set_count++;
	} else {
		rc = config_option_listeners(cfg, name, v, where, err, err_len);
		if (rc == 0)
			rc = config_option_cluster(cfg, name, v, where, err, err_len);
		if (rc == 0)
			return config_usage(err, err_len, "%s: --%s: unknown option", where, name);
		return rc < 0 ? rc : 0;
	}
	if (slot && config_replace(slot, v) < 0)
		return config_oom(err, err_len);
	return 0;
}

bool kvtd_config_is_option(const char *name)
{
	static const char *const names[] = {
		"dir", "dram", "ssd", "listen", "unix", "threads", "tenants", "log",
		"log-level", "log-format", "idle-timeout", "shutdown-timeout", "set", "config",
		"check-config",
		"resp", "s3", "s3-domain", "metrics", "metrics-token", "max-conns", "tenant-conns",
		"max-memory",
		"conn-inflight", "conn-output", "tls-cert", "tls-key", "tls-ca", "tls-verify-client", "insecure",
		"members", "etcd", "etcd-prefix", "etcd-ttl", "advertise", "repair-grace",
		"peer-connect-timeout", "repair-rate", "repair-idle-rate", "drain-budget",
		"max-copies", "protocol-max", NULL,
	};
	for (int i = 0; names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

static bool config_blank(char c)
{
	return c == ' ' || c == '\t';
}

int kvtd_config_parse(struct kvtd_config *cfg, const char *text, size_t len, const char *path,
		      char *err, size_t err_len)
{
	char line[KVTD_CONFIG_LINE_MAX], where[KVTD_CONFIG_LINE_MAX + 32];
	unsigned lineno = 0;
	size_t off = 0;

	if (err_len > 0)
		err[0] = 0;
	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		char *p = line, *eq, *k, *v, *e;
		int rc;

		lineno++;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (n > KVTD_CONFIG_LINE_MAX - 2)
			return config_usage(err, err_len, "%s: line too long", where);
		if (memchr(text + off, 0, n))
			return config_usage(err, err_len, "%s: NUL byte in the line", where);
		memcpy(line, text + off, n);
		line[n] = 0;
		off += n + (nl != NULL);

		while (config_blank(*p))
			p++;
		if (*p == '#' || *p == '\r' || !*p)
			continue;
		eq = strchr(p, '=');
		if (!eq)
			return config_usage(err, err_len,
					    "%s: want \"key = value\" (e.g. dram = 4G for --dram 4G)",
					    where);
		k = p;
		e = eq;
		while (e > k && config_blank(e[-1]))
			e--;
		*e = 0;
		v = eq + 1;
		while (config_blank(*v))
			v++;
		e = v + strlen(v);
		while (e > v && (e[-1] == '\r' || config_blank(e[-1])))
			e--;
		*e = 0;
		if (k[0] == '-')
			return config_usage(err, err_len,
					    "%s: '%s': a key is the option's name without its "
					    "dashes (dram = 4G for --dram 4G)", where, k);
		if (strcmp(k, "config") == 0 || strcmp(k, "check-config") == 0 ||
		    strcmp(k, "help") == 0 || strcmp(k, "version") == 0)
			return config_usage(err, err_len, "%s: '%s' cannot be set in a config file",
					    where, k);
		rc = kvtd_config_option(cfg, k, v, where, err, err_len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int kvtd_config_load(struct kvtd_config *cfg, const char *path, char *err, size_t err_len)
{
	FILE *f = fopen(path, "re");
	char *text = NULL, *bigger;
	size_t len = 0, cap = 0;
	int ret;

	if (err_len > 0)
		err[0] = 0;
	if (!f) {
		ret = -errno;
		snprintf(err, err_len, "--config %s: %s", path, strerror(-ret));
		return ret;
	}
	for (;;) {
		size_t got;
		if (len == cap) {
			if (cap >= KVTD_CONFIG_FILE_MAX) {
				ret = -EFBIG;
				snprintf(err, err_len, "--config %s: larger than %u bytes", path,
					 KVTD_CONFIG_FILE_MAX);
				goto out;
			}
			cap = cap ? 2 * cap : 4096;
			bigger = realloc(text, cap);
			if (!bigger) {
				ret = config_oom(err, err_len);
				goto out;
			}
			text = bigger;
		}
		got = fread(text + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			if (ferror(f)) {
				ret = -EIO;
				snprintf(err, err_len, "--config %s: read error", path);
				goto out;
			}
			break;
		}
	}
	ret = kvtd_config_parse(cfg, text, len, path, err, err_len);
out:
	free(text);
	fclose(f);
	return ret;
}

void kvtd_config_free(struct kvtd_config *cfg)
{
	char **strs[] = {
		&cfg->dir, &cfg->listen, &cfg->unix_path, &cfg->tenants_path, &cfg->log_path,
		&cfg->resp_listen, &cfg->s3_listen, &cfg->s3_domain, &cfg->metrics_listen,
		&cfg->metrics_token_path,
		&cfg->tls_cert, &cfg->tls_key, &cfg->tls_ca,
		&cfg->members, &cfg->etcd, &cfg->etcd_prefix, &cfg->advertise,
	};

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	for (unsigned i = 0; i < cfg->set_count; i++) {
		free(cfg->set_names[i]);
		cfg->set_names[i] = cfg->set_values[i] = NULL;
	}
	cfg->set_count = 0;
}

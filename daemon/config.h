/*
 * config.h - kvtierd's options: the configuration they fill in and the
 * parser of the --config file (config.c).
 *
 * The parser is pure: it reads text from a buffer, writes into a struct
 * kvtd_config and returns an error with a message instead of exiting, so
 * that kvtierd.c decides what a bad option costs (exit 2) and the fuzzer
 * (tests/fuzz/fuzz_config.c) can run it on anything.  Main thread only (it
 * touches nothing but the config it is given).
 */
#ifndef KVTD_CONFIG_H
#define KVTD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KVTD_SET_MAX 32          /* --set options at most */
#define KVTD_CONFIG_LINE_MAX 4096 /* a config line and its '\n' fit in LINE_MAX - 1 bytes */
#define KVTD_CONFIG_FILE_MAX (16u << 20) /* bytes of a --config file */
#define KVTD_S3_DOMAINS_MAX 16   /* names in --s3-domain */

struct kvtd_config {
	char *dir;              /* store directory */
	uint64_t dram_bytes;
	uint64_t ssd_bytes;     /* 0: no SSD tier */
	bool ssd_set;           /* --ssd given (else the default rule) */
	bool dram_set;
	char *listen;           /* "HOST:PORT", or "none" */
	char *unix_path;        /* or NULL */
	unsigned threads;
	char *tenants_path;     /* or NULL: AUTH_NONE */
	char *log_path;         /* or NULL: stderr */
	int log_level;
	bool log_json;          /* --log-format json: one JSON object per line (log.c) */
	unsigned idle_timeout_s;
	unsigned shutdown_timeout_s;
	char *resp_listen;      /* --resp HOST:PORT, or NULL (respd.c) */
	char *s3_listen;        /* --s3 HOST:PORT, or NULL (s3d.c, doc/s3.md) */
	char *s3_domain;        /* --s3-domain NAME[,NAME...]: virtual-hosted-style
				 * buckets under these, lowercase, no trailing dot
				 * (s3http.c s3h_vhost), or NULL: path-style only */
	char *metrics_listen;   /* --metrics [HOST:]PORT, or NULL (metrics.c) */
	char *metrics_token_path; /* --metrics-token FILE, or NULL */
	char *tls_cert;         /* --tls-cert FILE: TLS on the TCP listeners, or NULL */
	char *tls_key;          /* --tls-key FILE */
	char *tls_ca;           /* --tls-ca FILE: CA of client certificates, or NULL */
	bool tls_verify_client; /* --tls-verify-client: a client certificate is required */
	bool insecure;          /* --insecure: listen off loopback without --tenants */
	char *set_names[KVTD_SET_MAX]; /* --set NAME=VALUE: library options; owned */
	char *set_values[KVTD_SET_MAX]; /* point into set_names[i]'s allocation */
	unsigned set_count;
	/* Limits (loop.c "Limits", doc/kvtierd.md "Overload") */
	unsigned max_conns;       /* connections open at once (all listeners) */
	unsigned tenant_conns;    /* --tenant-conns: authenticated connections of one
	                           * tenant at once (0: a quarter of max_conns;
	                           * kvtd_tenant_conns_max) */
	uint64_t max_memory;      /* bytes of receive buffers, tables, data
	                           * sections and encoded responses */
	unsigned conn_inflight;   /* frames in flight per connection before reads pause */
	uint64_t conn_output;     /* queued output bytes per connection before reads pause */
	unsigned protocol_max;    /* --protocol-max: newest version HELLO offers (0: the newest) */
	/* Cluster membership (members.c, doc/members.md) */
	char *members;            /* --members HOST:PORT[=WEIGHT],...: a static list */
	char *etcd;               /* --etcd URL: register and read the list there */
	char *etcd_prefix;        /* --etcd-prefix, or NULL: KVTD_ETCD_PREFIX */
	unsigned etcd_ttl_s;      /* --etcd-ttl, or 0: KVTD_ETCD_TTL_S */
	unsigned repair_grace_ms; /* --repair-grace (repair.c), if repair_grace_set */
	bool repair_grace_set;
	unsigned peer_connect_ms; /* --peer-connect-timeout (peer.c), 0: KVTD_PEER_CONNECT_MS */
	uint64_t repair_rate;     /* --repair-rate bytes/s (0: off), if repair_rate_set */
	bool repair_rate_set;
	uint64_t repair_idle_rate; /* --repair-idle-rate bytes/s with no client (0: no limit) */
	bool repair_idle_rate_set;
	uint64_t drain_budget;    /* --drain-budget bytes, if drain_budget_set */
	unsigned max_copies;      /* --max-copies: most members a client's placed put
				   * is kept on (1..PROTO_COPIES_MAX; 0: the most) */
	bool drain_budget_set;
	char *advertise;          /* --advertise HOST:PORT, or NULL: the TCP listener */
};

/*
 * Apply one option by its long name (without "--") and value.  where says
 * where it came from ("command line", "FILE:LINE") and starts every
 * message.  Strings are copied; the config owns its copies (free them
 * with kvtd_config_free).  0; -EINVAL: a usage error, err (err_len bytes,
 * always NUL-terminated when err_len > 0) says why, e.g.
 * "kvtierd.conf:3: --dram: 'x' is not a size (e.g. 512M, 4G)";
 * -ENOMEM.  On an error cfg is unchanged but for the option's own field.
 */
int kvtd_config_option(struct kvtd_config *cfg, const char *name, const char *v,
		       const char *where, char *err, size_t err_len);

/*
 * The --config file's text (len bytes, NUL bytes refused, no terminating
 * NUL needed): "key = value" lines with the long option names, '#'
 * comments, blank lines.  path names the file in messages.  Options apply
 * in order (a later one overrides an earlier one; --set accumulates).
 * Returns what kvtd_config_option returns; on an error the options of the
 * lines before it stay applied.  No I/O.
 */
int kvtd_config_parse(struct kvtd_config *cfg, const char *text, size_t len, const char *path,
		      char *err, size_t err_len);

/*
 * Read the file at path (any readable file: a pipe works) and parse it.
 * 0; -EINVAL (err: the line and why), -ENOMEM, or -errno / -EFBIG when
 * the file cannot be read (err: "--config PATH: why").
 */
int kvtd_config_load(struct kvtd_config *cfg, const char *path, char *err, size_t err_len);

/* Is name an option that takes a value ("dir", "set", "config", ...)? */
bool kvtd_config_is_option(const char *name);

/*
 * --check-config (config_check.c): check what a start would check of cfg
 * (addresses' syntax, the files it names, the library's --set options)
 * without opening, binding or writing anything; path names the config
 * file in messages (or NULL).  Problems go to err; if there are none, the
 * effective settings go to out as "key = value" lines.  Returns the exit
 * status: KVTD_EXIT_OK or KVTD_EXIT_USAGE.
 */
int kvtd_config_check(const struct kvtd_config *cfg, const char *path, FILE *out, FILE *err);

/* The SSD segment size the store will use: a --set ssd.segment, else the
 * library's default (its option table; config_check.c).  kvtierd sizes its
 * default --ssd by it, and an --ssd of fewer than two segments is refused. */
uint64_t kvtd_config_segment(const struct kvtd_config *cfg);

/* This machine's memory, if --dram asks for more (the DRAM tier is
 * pre-faulted: --dram 1T for 1G sat in "opening the store" for minutes),
 * else 0.  A start refuses such a --dram; --check-config warns. */
uint64_t kvtd_config_dram_over(const struct kvtd_config *cfg);

/*
 * Is --dir somebody else's directory?  kvtierd writes LOCK, namespaces and
 * ssd/ into it, so a start refuses (and --check-config reports) a directory
 * that holds anything but a kvtier store (one of those three), a
 * lost+found (a fresh file system's mount point) and the files the options
 * name there (--log, --unix, --tenants, ...).  0: usable (also when it does
 * not exist or cannot be read: creating or opening it says why);
 * -ENOTEMPTY: msg (len bytes) names the directory, a few of its entries and
 * the fix.  Main thread (reads the directory).
 */
int kvtd_config_dir_foreign(const struct kvtd_config *cfg, char *msg, size_t len);

/* Free every string the config owns and zero the pointers (the numbers
 * stay). */
void kvtd_config_free(struct kvtd_config *cfg);

#endif

/*
 * admin.c - kvtier's operator commands: stat, ls, get, put, rm, clear,
 * fsck (doc/man/kvtier-admin.1).
 *
 * Owns: their option parsing and help texts, opening a store for them
 * (a kvtierd through the remote tier with --server, or a store directory
 * embedded with --dir), the namespace of debugging keys (model
 * "kvtier-cli" unless --model), and the stat table.  Like every kvtier
 * command it reaches the library only through include/kvtier.h.
 *
 * Exit codes (kvtier-admin(1) "EXIT STATUS"): 0 ok, 1 failure, 2 usage,
 * 3 (get, rm) the key is not there, 4 (who) some nodes did not answer;
 * fsck: 0 clean, 1 damaged, 2 usage or cannot check.  A command that
 * asks a server exits 0 only if it answered: one that cannot be reached
 * (or refuses the connection) is 1, never a table of zeros and 0.
 */
#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvtier.h"
#include "progress.h"
#include "ssdfmt.h"
#include "stat_ns.h"
#include "tlsopt.h"

#define EX_OK 0
#define EX_FAIL 1
#define EX_USAGE 2
#define EX_MISS 3
#define EX_PARTIAL 4 /* who: some nodes answered, not all */

#define CLI_MODEL "kvtier-cli"

/* What every store-reaching command takes. */
struct conn_opts {
	const char *server, *dir, *tenant, *secret, *model;
	const char *dram, *ssd_cap, *segment;
	bool hex; /* KEY is hex bytes */
	struct cli_tls tls; /* --tls* (with --server) */
};

enum { O_SERVER = 256, O_DIR, O_TENANT, O_SECRET, O_MODEL, O_DRAM, O_SSDCAP, O_SEGMENT, O_HEX,
       O_WATCH, O_YES, O_ALL, O_QUIET, O_OUT, O_IN };

#define CONN_LONGOPTS                                                                      \
	{ "server", required_argument, NULL, O_SERVER },                                   \
	{ "dir", required_argument, NULL, O_DIR },                                         \
	{ "tenant", required_argument, NULL, O_TENANT },                                   \
	{ "secret-file", required_argument, NULL, O_SECRET },                              \
	{ "model", required_argument, NULL, O_MODEL },                                     \
	{ "dram", required_argument, NULL, O_DRAM },                                       \
	{ "ssd-capacity", required_argument, NULL, O_SSDCAP },                             \
	{ "segment", required_argument, NULL, O_SEGMENT },                                 \
	{ "hex", no_argument, NULL, O_HEX },                                               \
	{ "help", no_argument, NULL, 'h' },                                                \
	CLI_TLS_LONGOPTS

#define CONN_SERVER_HELP                                                                   \
	"  --server ADDR        a running kvtierd: HOST:PORT, [V6]:PORT or unix:/PATH\n"   \
	"                       (default: $KVTIER_SERVER)\n"                               \
	"  --tenant T           authenticate as tenant T (default \"default\")\n"          \
	"  --secret-file F      the tenant's secret (mode 0600); none: no authentication\n"   \
	CLI_TLS_HELP

#define CONN_HELP                                                                          \
	"Where:\n" CONN_SERVER_HELP                                                        \
	"  --dir DIR            a store directory, opened embedded (no kvtierd may have it)\n" \
	"  --ssd-capacity SIZE  --dir: SSD tier size (default: 1G for a new store;\n"      \
	"                       16 segments, or as many as exist, for an existing one)\n"  \
	"  --segment SIZE       --dir: segment size for a new store (default 64M)\n"       \
	"  --dram SIZE          DRAM for values in flight (default 256M: the largest value)\n"

static int conn_opt(struct conn_opts *o, int c, const char *arg)
{
	switch (c) {
	case O_SERVER: o->server = arg; return 1;
	case O_DIR: o->dir = arg; return 1;
	case O_TENANT: o->tenant = arg; return 1;
	case O_SECRET: o->secret = arg; return 1;
	case O_MODEL: o->model = arg; return 1;
	case O_DRAM: o->dram = arg; return 1;
	case O_SSDCAP: o->ssd_cap = arg; return 1;
	case O_SEGMENT: o->segment = arg; return 1;
	case O_HEX: o->hex = true; return 1;
	default: return cli_tls_opt(&o->tls, c, arg);
	}
}

static int usage_err(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "kvtier %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'kvtier %s --help' for its usage.\n", cmd);
	return EX_USAGE;
}

/* getopt_long said what is wrong with the option (unknown, or its value
 * missing), named "kvtier CMD" (cli_dispatch): only the way to help. */
static int opt_err(const char *cmd)
{
	fprintf(stderr, "Run 'kvtier %s --help' for its usage.\n", cmd);
	return EX_USAGE;
}

/* --server or --dir (exactly one; $KVTIER_SERVER fills in --server). */
static int conn_check(const char *cmd, struct conn_opts *o, bool dir_ok, bool server_ok)
{
	if (!o->server && !o->dir)
		o->server = getenv("KVTIER_SERVER");
	if (o->server && o->dir)
		return usage_err(cmd, "%s", "give --server or --dir, not both");
	if (!o->server && !o->dir)
		return usage_err(cmd, "%s",
				 dir_ok && server_ok ? "say which store: --server ADDR or --dir DIR"
				 : server_ok ? "say which kvtierd: --server ADDR (or $KVTIER_SERVER)"
					     : "say which store directory: --dir DIR");
	if (o->dir && !dir_ok)
		return usage_err(cmd, "%s", "works on a running kvtierd only (--server ADDR)");
	if (o->server && !server_ok)
		return usage_err(cmd, "%s", "works on a store directory only (--dir DIR)");
	if (o->dir && o->tls.on)
		return usage_err(cmd, "%s", "--tls* reach a kvtierd (--server ADDR), not --dir");
	return 0;
}

/* The library's last error line about the server (its remote tier logs
 * why a connection was refused: AUTH, a version, TLS), so that "cannot
 * reach" is said only when nothing answered.  Any library thread. */
static pthread_mutex_t cli_lib_mu = PTHREAD_MUTEX_INITIALIZER;
static char cli_lib_err[300];
/* And why the last connection attempt failed, from its INFO line
 * ("remote: connection N to ADDR failed: connect (Connection refused);
 * retrying ..."): the request itself fails with -ENOTCONN, which would
 * say "Transport endpoint is not connected" where "Connection refused"
 * is the news. */
static char cli_conn_err[120];

static void cli_lib_log(void *ctx, int level, const char *msg)
{
	const char *why, *end;

	(void)ctx;
	if (strncmp(msg, "remote: ", 8) != 0)
		return;
	pthread_mutex_lock(&cli_lib_mu);
	if (level == KVT_LOG_ERROR) {
		snprintf(cli_lib_err, sizeof(cli_lib_err), "%s", msg + 8);
	} else if (strncmp(msg + 8, "connection ", 11) == 0 && strstr(msg, " failed: ") &&
		   (why = strchr(msg, '(')) && (end = strchr(why, ')'))) {
		snprintf(cli_conn_err, sizeof(cli_conn_err), "%.*s", (int)(end - why - 1), why + 1);
	}
	pthread_mutex_unlock(&cli_lib_mu);
}

/* That line, empty if none, with the library's option names turned into
 * the flags that set them ("remote.addr" is what --server gave). */
static void cli_lib_last(char *why, size_t len)
{
	static const char *const names[][2] = {
		{ "remote.secret_file", "--secret-file" },
		{ "remote.addr", "--server" },
		{ "remote.tls_server_name", "--tls-server-name" },
		{ "remote.tls", "--tls" },
	};
	char raw[sizeof(cli_lib_err)];
	const char *hit = NULL;
	size_t i, n = 0;

	pthread_mutex_lock(&cli_lib_mu);
	memcpy(raw, cli_lib_err, sizeof(raw));
	pthread_mutex_unlock(&cli_lib_mu);
	for (i = 0; i < sizeof(names) / sizeof(names[0]) && !hit; i++)
		hit = strstr(raw, names[i][0]);
	if (!hit) {
		snprintf(why, len, "%s", raw);
		return;
	}
	i--;
	n = (size_t)(hit - raw);
	snprintf(why, len, "%.*s%s%s", (int)n, raw, names[i][1], hit + strlen(names[i][0]));
}

static void cant_reach(const char *cmd, const struct conn_opts *o, int rc)
{
	const char *addr = o->server;
	char why[sizeof(cli_lib_err) + 256];
	bool auth;

	/* The server answered and refused the tenant: nothing to probe.  A
	 * probe's ClientHello would reach a plain server as a frame with a
	 * bad magic, logged there as a protocol error and counted in
	 * server.errors.magic, for every mistyped secret. */
	cli_lib_last(why, sizeof(why));
	auth = strstr(why, "AUTH") || strstr(why, "authentication") || strstr(why, "secret");
	/* A TLS server closes a plain connection, a plain one refuses a
	 * ClientHello: the library saw a closed connection, or a TLS error.
	 * Which of them (and a certificate's trouble) a probe tells. */
	if (!auth) {
		cli_tls_diagnose(addr, &o->tls, why, sizeof(why));
		if (why[0]) {
			fprintf(stderr, "kvtier %s: kvtierd at %s: %s\n", cmd, addr, why);
			return;
		}
		cli_lib_last(why, sizeof(why));
	}
	if (why[0]) {
		fprintf(stderr, "kvtier %s: kvtierd at %s answered, but: %s\n%s", cmd, addr, why,
			auth ? "Check --tenant and --secret-file against the server's --tenants "
			       "file (kvtierd(8)).\n" : "");
		return;
	}
	pthread_mutex_lock(&cli_lib_mu);
	snprintf(why, sizeof(why), "%s", cli_conn_err[0] ? cli_conn_err : kvt_strerror(rc));
	pthread_mutex_unlock(&cli_lib_mu);
	fprintf(stderr,
		"kvtier %s: cannot reach kvtierd at %s: %s\n"
		"Is it running and listening there? (kvtierd --listen %s ...; kvtierd(8))\n",
		cmd, addr, why, addr);
}

/* Segment size and count of an existing store directory's SSD tier. */
/* The slot count in the store's checkpoint (the one it last ran with),
 * read from its fixed header alone (ssd_ckpt_hdr_decode: 128 bytes, not
 * the whole index): 0 if there is none.  The header's CRC vouches for
 * the count, not for the body behind it; the store's open decodes the
 * whole checkpoint and ignores it if the body is damaged, at the slot
 * count given here, which is the one the store last ran with either way.
 * A header that does not decode is said (*why) and gives 0: the caller
 * falls back to counting segment files. */
static uint64_t dir_ckpt_slots(const char *dir, const char **why)
{
	char p[4096];
	struct stat st;
	struct ssd_ckpt_hdr h;
	uint8_t buf[SSD_CKPT_HDR];
	uint64_t slots = 0;
	ssize_t got;
	int fd, r;

	*why = NULL;
	snprintf(p, sizeof(p), "%s/ssd/checkpoint", dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (fstat(fd, &st) < 0) {
		*why = strerror(errno);
	} else {
		do
			got = pread(fd, buf, sizeof(buf), 0);
		while (got < 0 && errno == EINTR);
		if (got < 0)
			*why = strerror(errno);
		else if ((r = ssd_ckpt_hdr_decode(buf, (size_t)got, (uint64_t)st.st_size, &h)) < 0)
			*why = r == KVT_EBUFSMALL ? "cut short" : kvt_strerror(r);
		else
			slots = h.slot_count;
	}
	close(fd);
	return slots;
}

/* An existing store's segment size (its first segment file's) and slot
 * count: its checkpoint's, else at least 16 and as many as there are
 * segment files (they are made as slots are first used).  false: none.
 * A checkpoint whose header does not decode is said on stderr (cmd's
 * name), with the count taken instead, unless the caller gives the size
 * itself (quiet). */
static bool dir_ssd_geometry(const char *cmd, const char *dir, bool quiet, uint64_t *seg,
			     uint64_t *count)
{
	char p[4096];
	struct stat st;
	const char *why;
	uint64_t n = 0, ck;
	snprintf(p, sizeof(p), "%s/ssd/seg-000000", dir);
	if (stat(p, &st) < 0 || st.st_size <= 0)
		return false;
	*seg = (uint64_t)st.st_size;
	for (;; n++) {
		snprintf(p, sizeof(p), "%s/ssd/seg-%06" PRIu64, dir, n);
		if (stat(p, &st) < 0)
			break;
	}
	ck = dir_ckpt_slots(dir, &why);
	*count = ck ? (ck > n ? ck : n) : (n < 16 ? 16 : n);
	if (why && !quiet)
		fprintf(stderr,
			"kvtier %s: warning: %s/ssd/checkpoint: its header is unreadable (%s), so "
			"the store's slot count is unknown: opening it at %" PRIu64 " segments "
			"(--ssd-capacity to say its size); the store ignores that checkpoint and "
			"scans every segment\n",
			cmd, dir, why, *count);
	return true;
}

/* Open the store the options name.  Returns 0 or prints why and returns
 * an exit code. */
static int conn_open(const char *cmd, const struct conn_opts *o, struct kvt_store **out)
{
	struct kvt_store *s = NULL;
	char v[sizeof(cli_lib_err) + 16];
	const char *tkv[5][2];
	int rc;

	if ((rc = kvt_store_create(&s)) < 0) {
		fprintf(stderr, "kvtier %s: %s\n", cmd, kvt_strerror(rc));
		return EX_FAIL;
	}
#define SET(name, val)                                                                      \
	do {                                                                                \
		if ((rc = kvt_store_set_option(s, name, val)) < 0) {                        \
			fprintf(stderr, "kvtier %s: %s=%s: %s\n", cmd, name, val,           \
				kvt_strerror(rc));                                          \
			kvt_store_destroy(s);                                               \
			return rc == KVT_EOPTVAL ? EX_USAGE : EX_FAIL;                      \
		}                                                                           \
	} while (0)
	SET("dram.capacity", o->dram ? o->dram : "256M");
	SET("dram.shards", "1");
	SET("dram.prefault", "off");
	if (o->server) {
		kvt_store_set_log(s, cli_lib_log, NULL, KVT_LOG_INFO);
		SET("remote.addr", o->server);
		SET("remote.conns", "1");
		if (o->tenant)
			SET("remote.tenant", o->tenant);
		if (o->secret)
			SET("remote.secret_file", o->secret);
		for (unsigned i = 0, n = cli_tls_kv(&o->tls, tkv); i < n; i++)
			SET(tkv[i][0], tkv[i][1]);
	} else {
		uint64_t seg, count;
		SET("path", o->dir);
		if (dir_ssd_geometry(cmd, o->dir, o->ssd_cap != NULL, &seg, &count)) {
			/* The store's own geometry: another slot count would
			 * cost a full scan, and leave the store that size. */
			snprintf(v, sizeof(v), "%" PRIu64, seg);
			SET("ssd.segment", v);
			snprintf(v, sizeof(v), "%" PRIu64, seg * count);
			SET("ssd.capacity", o->ssd_cap ? o->ssd_cap : v);
		} else {
			SET("ssd.segment", o->segment ? o->segment : "64M");
			SET("ssd.capacity", o->ssd_cap ? o->ssd_cap : "1G");
		}
		SET("ssd.admission", "always");
	}
#undef SET
	rc = kvt_store_open(s);
	if (rc < 0) {
		if (rc == KVT_ELOCKED)
			fprintf(stderr,
				"kvtier %s: %s is open in another process (a kvtierd?): %s\n"
				"Stop it, or reach it with --server ADDR instead.\n",
				cmd, o->dir, kvt_strerror(rc));
		else if (o->server && (cli_lib_last(v, sizeof(v)), v[0]))
			fprintf(stderr, "kvtier %s: %s\n", cmd, v); /* which option, and why */
		else
			fprintf(stderr, "kvtier %s: cannot open %s: %s\n", cmd,
				o->server ? o->server : o->dir, kvt_strerror(rc));
		kvt_store_destroy(s);
		return EX_FAIL;
	}
	*out = s;
	return 0;
}

/* The namespace of debugging keys. */
static int conn_ns(const char *cmd, struct kvt_store *s, const struct conn_opts *o, uint32_t *ns)
{
	struct kvt_ns_desc d = {
		.model = o->model ? o->model : CLI_MODEL, .dtype = "bytes", .layout = "opaque",
		.block_tokens = 1, .tp_size = 1, .pp_size = 1,
		.flags = KVT_NS_PERSISTENT,
	};
	int rc = kvt_ns_register(s, &d, ns);
	if (rc < 0) {
		fprintf(stderr, "kvtier %s: namespace of model '%s': %s\n", cmd, d.model,
			kvt_strerror(rc));
		return EX_FAIL;
	}
	return 0;
}

static int parse_key(const char *cmd, const struct conn_opts *o, const char *arg,
		     struct kvt_key *k)
{
	size_t n = strlen(arg);
	if (!o->hex) {
		if (kvt_key_set(k, arg, n) < 0)
			return usage_err(cmd, "KEY must be 1..64 bytes (got '%s')", arg);
		return 0;
	}
	if (n == 0 || n % 2 || n / 2 > KVT_KEY_MAX)
		return usage_err(cmd, "--hex KEY must be 2..128 hex digits (got '%s')", arg);
	k->len = (uint32_t)(n / 2);
	memset(k->bytes, 0, sizeof(k->bytes));
	for (size_t i = 0; i < n / 2; i++) {
		unsigned b;
		if (sscanf(arg + 2 * i, "%2x", &b) != 1 || !strchr("0123456789abcdefABCDEF", arg[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", arg[2 * i + 1]))
			return usage_err(cmd, "--hex KEY has a non-hex digit: '%s'", arg);
		k->bytes[i] = (uint8_t)b;
	}
	return 0;
}

static void conn_close(struct kvt_store *s)
{
	kvt_store_destroy(s);
}

static bool is_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------------------
 * get, put, rm
 */

static const char get_help[] =
	"usage: kvtier get [--server ADDR | --dir DIR] [--hex] [--model M] [-o FILE] KEY\n"
	"\n"
	"Write the value stored under KEY (one opaque key of 1..64 bytes, or\n"
	"hex bytes with --hex) to FILE, or to stdout.  Keys live in the namespace\n"
	"of model \"" CLI_MODEL "\" (dtype bytes, layout opaque) unless --model.\n"
	"For debugging; engines use the library.\n"
	"\n" CONN_HELP "  -o, --output FILE    write the value here (default stdout)\n"
	"\nExit status: 0 found, 3 not found, 1 failure, 2 usage.  kvtier-admin(1).\n";

static int read_all(FILE *f, uint8_t **out, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	uint8_t *b = malloc(cap);
	while (b) {
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				free(b);
				return -EIO;
			}
			*out = b;
			*len = n;
			return 0;
		}
		if (n == cap) {
			uint8_t *nb = realloc(b, cap *= 2);
			if (!nb)
				free(b);
			b = nb;
		}
	}
	return -ENOMEM;
}

/* The server's put status: the remote tier reports a put as the local
 * one, so read its counters.  Only a put the server answered stored (or
 * already there) succeeded: one it never saw (no connection: a fast fail,
 * counted in neither) is not "failed" either, and must not exit 0. */
static int remote_put_outcome(struct kvt_store *s)
{
	uint64_t stored = 0, exist = 0;
	kvt_store_stat(s, "remote.puts_stored", &stored);
	kvt_store_stat(s, "remote.puts_exist", &exist);
	return exist ? KVT_EXISTS : stored ? KVT_OK : -EIO;
}

int admin_get(int argc, char **argv)
{
	static const struct option lo[] = { CONN_LONGOPTS, { "output", required_argument, NULL, 'o' },
					    { 0 } };
	struct conn_opts o = { 0 };
	const char *outp = NULL;
	struct kvt_store *s;
	struct kvt_key k;
	uint32_t ns;
	uint64_t vlen = 0;
	uint8_t *buf = NULL;
	int c, rc, ex;

	if (is_help(argc, argv)) {
		fputs(get_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
		if (conn_opt(&o, c, optarg))
			continue;
		if (c == 'o')
			outp = optarg;
		else
			return opt_err("get");
	}
	if (optind + 1 != argc)
		return usage_err("get", "%s", "give exactly one KEY");
	if ((ex = conn_check("get", &o, true, true)) || (ex = parse_key("get", &o, argv[optind], &k)))
		return ex;
	if ((ex = conn_open("get", &o, &s)))
		return ex;
	if ((ex = conn_ns("get", s, &o, &ns)))
		goto out;
	/* A small buffer first: a miss or a small value costs one call; a
	 * larger value is in DRAM after it and is read again with room. */
	buf = malloc(64 << 10);
	rc = buf ? kvt_get(s, ns, &k, buf, 64 << 10, &vlen) : -ENOMEM;
	if (rc == KVT_EBUFSMALL) {
		free(buf);
		buf = malloc(vlen);
		rc = buf ? kvt_get(s, ns, &k, buf, vlen, &vlen) : -ENOMEM;
	}
	if (rc == KVT_MISS) {
		uint64_t down = 0;
		if (o.server && kvt_store_stat(s, "remote.conns_up", &down) == 0 && down == 0) {
			cant_reach("get", &o, -ENOTCONN);
			ex = EX_FAIL;
			goto out;
		}
		fprintf(stderr, "kvtier get: not found\n");
		ex = EX_MISS;
		goto out;
	}
	if (rc < 0) {
		fprintf(stderr, "kvtier get: %s\n", kvt_strerror(rc));
		ex = EX_FAIL;
		goto out;
	}
	{
		FILE *f = outp ? fopen(outp, "wb") : stdout;
		if (!f || fwrite(buf, 1, vlen, f) != vlen || (outp && fclose(f) != 0)) {
			fprintf(stderr, "kvtier get: writing %s: %s\n", outp ? outp : "stdout",
				strerror(errno));
			ex = EX_FAIL;
			goto out;
		}
	}
	ex = EX_OK;
out:
	free(buf);
	conn_close(s);
	return ex;
}

static const char put_help[] =
	"usage: kvtier put [--server ADDR | --dir DIR] [--hex] [--model M] [-i FILE] KEY\n"
	"\n"
	"Store the bytes of FILE (or of stdin) under KEY, in one part.  A key\n"
	"that is already present keeps its value (kvtier keys name immutable\n"
	"bytes): that is reported, and exits 0.  With --dir the value must fit\n"
	"DRAM (--dram) and one SSD segment (--segment, for a new store), since\n"
	"the SSD tier is what outlasts the command: else it is not stored (exit 1).\n"
	"\n" CONN_HELP "  -i, --input FILE     read the value from here (default stdin)\n"
	"\nExit status: 0 stored (or already present), 1 failure, 2 usage.  kvtier-admin(1).\n";

int admin_put(int argc, char **argv)
{
	static const struct option lo[] = { CONN_LONGOPTS, { "input", required_argument, NULL, 'i' },
					    { 0 } };
	struct conn_opts o = { 0 };
	const char *inp = NULL;
	struct kvt_store *s;
	struct kvt_key k;
	struct iovec iov;
	uint8_t *buf = NULL;
	size_t len = 0;
	uint64_t skipped = 0;
	uint32_t ns;
	int c, rc, put_rc, ex;

	if (is_help(argc, argv)) {
		fputs(put_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "i:", lo, NULL)) != -1) {
		if (conn_opt(&o, c, optarg))
			continue;
		if (c == 'i')
			inp = optarg;
		else
			return opt_err("put");
	}
	if (optind + 1 != argc)
		return usage_err("put", "%s", "give exactly one KEY");
	if ((ex = conn_check("put", &o, true, true)) || (ex = parse_key("put", &o, argv[optind], &k)))
		return ex;
	{
		FILE *f = inp ? fopen(inp, "rb") : stdin;
		if (!f) {
			fprintf(stderr, "kvtier put: %s: %s\n", inp, strerror(errno));
			return EX_FAIL;
		}
		rc = read_all(f, &buf, &len);
		if (inp)
			fclose(f);
		if (rc < 0) {
			fprintf(stderr, "kvtier put: reading %s: %s\n", inp ? inp : "stdin",
				kvt_strerror(rc));
			return EX_FAIL;
		}
	}
	if (len == 0) {
		free(buf);
		return usage_err("put", "%s", "the value is empty: kvtier values are at least 1 byte");
	}
	if ((ex = conn_open("put", &o, &s))) {
		free(buf);
		return ex;
	}
	if ((ex = conn_ns("put", s, &o, &ns)))
		goto out;
	iov.iov_base = buf;
	iov.iov_len = len;
	kvt_store_stat(s, "ssd.writedown_skipped", &skipped);
	rc = put_rc = kvt_put(s, ns, &k, &iov, 1);
	if (rc >= 0 && (rc = kvt_flush(s)) >= 0 && o.server)
		rc = remote_put_outcome(s);
	/* With --dir the SSD tier is what lasts: a value it can never hold
	 * (over a segment) stayed in DRAM, gone when kvtier exits.  It was
	 * reported stored (exit 0) and a get found nothing. */
	if (rc >= 0 && put_rc == KVT_OK && !o.server) {
		uint64_t now = skipped, seg = 0;
		char sb[32] = "?";
		kvt_store_stat(s, "ssd.writedown_skipped", &now);
		if (now > skipped) {
			if (kvt_store_stat(s, "ssd.segment_bytes", &seg) == 0)
				stat_fmt_bytes(seg, false, sb, sizeof(sb));
			fprintf(stderr, "kvtier put: %zu bytes do not fit an SSD segment (%s): not "
				"stored (a new store takes --segment SIZE larger than the value)\n",
				len, sb);
			ex = EX_FAIL;
			goto out;
		}
	}
	if (rc == KVT_ETOOBIG) {
		fprintf(stderr, "kvtier put: %zu bytes: %s (--dram sets the largest value, "
			"default 256M)\n", len, kvt_strerror(rc));
		ex = EX_FAIL;
		goto out;
	}
	if (rc == -EIO && o.server) {
		uint64_t up = 0;
		kvt_store_stat(s, "remote.conns_up", &up);
		if (!up)
			cant_reach("put", &o, -ENOTCONN);
		else
			fprintf(stderr, "kvtier put: the server did not store it (over its quota, "
					"or full?); its log says why\n");
		ex = EX_FAIL;
		goto out;
	}
	if (rc < 0) {
		fprintf(stderr, "kvtier put: %s\n", kvt_strerror(rc));
		ex = EX_FAIL;
		goto out;
	}
	if (rc == KVT_EXISTS)
		fprintf(stderr, "kvtier put: already present; the stored value is kept\n");
	ex = EX_OK;
out:
	conn_close(s);
	free(buf);
	return ex;
}

static const char rm_help[] =
	"usage: kvtier rm [--server ADDR | --dir DIR] [--hex] [--model M] KEY\n"
	"\n"
	"Delete KEY from every tier of the store (DRAM, SSD; a kvtierd's\n"
	"with --server).\n"
	"\n" CONN_HELP "\nExit status: 0 deleted, 3 not found, 1 failure, 2 usage.  kvtier-admin(1).\n";

int admin_rm(int argc, char **argv)
{
	static const struct option lo[] = { CONN_LONGOPTS, { 0 } };
	struct conn_opts o = { 0 };
	struct kvt_store *s;
	struct kvt_key k;
	uint32_t ns;
	int c, rc, ex;

	if (is_help(argc, argv)) {
		fputs(rm_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1)
		if (!conn_opt(&o, c, optarg))
			return opt_err("rm");
	if (optind + 1 != argc)
		return usage_err("rm", "%s", "give exactly one KEY");
	if ((ex = conn_check("rm", &o, true, true)) || (ex = parse_key("rm", &o, argv[optind], &k)))
		return ex;
	if ((ex = conn_open("rm", &o, &s)))
		return ex;
	if ((ex = conn_ns("rm", s, &o, &ns)))
		goto out;
	rc = kvt_delete(s, ns, &k);
	if (rc >= 0)
		kvt_flush(s);
	if (rc == KVT_MISS) {
		fprintf(stderr, "kvtier rm: not found\n");
		ex = EX_MISS;
	} else if (rc < 0) {
		if (rc == -ENOTCONN || rc == -ETIMEDOUT)
			cant_reach("rm", &o, rc);
		else
			fprintf(stderr, "kvtier rm: %s\n", kvt_strerror(rc));
		ex = EX_FAIL;
	} else {
		ex = EX_OK;
	}
out:
	conn_close(s);
	return ex;
}

/* ------------------------------------------------------------------------
 * who
 */

static const char who_help[] =
	"usage: kvtier who --servers ADDR[=WEIGHT],... [--group N] [--hot-replicas R]\n"
	"                  [--tenant T --secret-file F] [NAMESPACE OPTIONS] [--hex]\n"
	"                  (KEY... | --keys FILE | --tokens FILE)\n"
	"\n"
	"Which kvtierd of a pod hold a prompt's blocks (doc/cluster.md): the KEYs\n"
	"are the prompt's block keys in order from its first block (text, or hex\n"
	"with --hex; --keys FILE: one a line, '-' for stdin); or --tokens FILE: the\n"
	"prompt's token IDs (decimal, separated by blanks or newlines, '-' for\n"
	"stdin), keyed as engines key them (kvt_key_chain_prompt: the namespace's\n"
	"digest, block_tokens tokens a block, a last partial block left out).\n"
	"Every node is asked about every key.  Prints, per node, the blocks\n"
	"placement puts there, the blocks it holds, and how many of the prompt's\n"
	"leading blocks it serves; then the leading blocks the pod holds (what a\n"
	"lookup finds).\n"
	"\n"
	"  --servers LIST       the engines' remote.addrs (same text, same order\n"
	"                       not needed); --server ADDR for one kvtierd\n"
	"  --group N            the engines' remote.group (default 16)\n"
	"  --hot-replicas R     the engines' remote.hot_replicas (default 2)\n"
	"Namespace (the engines' descriptor, kvt_ns_desc; defaults: kvtier's own\n"
	"debugging keys):\n"
	"  --model M            model (default kvtier-cli)\n"
	"  --dtype D            KV element type (default bytes)\n"
	"  --layout L           block layout (default opaque)\n"
	"  --block-tokens N     tokens per block (default 1)\n"
	"  --config-hash H, --kv-quant Q, --ns-tenant T   (default none)\n"
	"  --tp RANK/SIZE, --pp RANK/SIZE                 (default 0/1)\n"
	"  --rank-agnostic      one copy for every TP rank (KVT_NS_RANK_AGNOSTIC)\n"
	"  --replicas R         the namespace's replicas (placement; default 1)\n"
	"\nOne node instead of --servers, and authentication (every node):\n" CONN_SERVER_HELP
	"\nExit status: 0 every node answered, 1 failure (no node answered), 2 usage,\n"
	"4 some nodes did not answer (\"up no\"; the table is printed).  kvtier-admin(1).\n";

enum { O_SERVERS = 400, O_GROUP, O_HOT, O_KEYS, O_TOKENS, O_DTYPE, O_LAYOUT, O_BTOK,
       O_CONFIG, O_QUANT, O_NSTENANT, O_TP, O_PP, O_AGNOSTIC, O_REPLICAS };

/* "N" into *out (0..UINT32_MAX); false if it is not one. */
static bool who_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* "RANK/SIZE". */
static bool who_rank(const char *s, uint32_t *rank, uint32_t *size)
{
	char buf[32];
	char *slash;
	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (!slash)
		return false;
	*slash = 0;
	return who_u32(buf, rank) && who_u32(slash + 1, size);
}

/* Token IDs from a file, decimal, separated by white space; appends to
 * *toks (n, cap). */
static int who_read_tokens(const char *path, uint32_t **toks, size_t *n, size_t *cap)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char word[32];
	int ex = 0;
	if (!f) {
		fprintf(stderr, "kvtier who: %s: %s\n", path, strerror(errno));
		return EX_FAIL;
	}
	while (!ex && fscanf(f, "%31s", word) == 1) {
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 4096;
			uint32_t *nt = realloc(*toks, nc * sizeof(**toks));
			if (!nt) {
				ex = EX_FAIL;
				break;
			}
			*toks = nt;
			*cap = nc;
		}
		if (!who_u32(word, &(*toks)[*n]))
			ex = usage_err("who", "--tokens: '%s' is not a token ID (0..4294967295)", word);
		else
			(*n)++;
	}
	if (f != stdin)
		fclose(f);
	return ex;
}

/* Keys from a file, one a line; appends to *keys (n, cap). */
static int who_read_keys(const struct conn_opts *o, const char *path, struct kvt_key **keys,
			 size_t *n, size_t *cap)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char line[512];
	int ex = 0;
	if (!f) {
		fprintf(stderr, "kvtier who: %s: %s\n", path, strerror(errno));
		return EX_FAIL;
	}
	while (!ex && fgets(line, sizeof(line), f)) {
		size_t l = strcspn(line, "\r\n");
		line[l] = 0;
		if (l == 0)
			continue;
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			struct kvt_key *nk = realloc(*keys, nc * sizeof(**keys));
			if (!nk) {
				ex = EX_FAIL;
				break;
			}
			*keys = nk;
			*cap = nc;
		}
		ex = parse_key("who", o, line, &(*keys)[*n]);
		if (!ex)
			(*n)++;
	}
	if (f != stdin)
		fclose(f);
	return ex;
}

int admin_who(int argc, char **argv)
{
	static const struct option lo[] = {
		CONN_LONGOPTS,
		{ "servers", required_argument, NULL, O_SERVERS },
		{ "group", required_argument, NULL, O_GROUP },
		{ "hot-replicas", required_argument, NULL, O_HOT },
		{ "keys", required_argument, NULL, O_KEYS },
		{ "tokens", required_argument, NULL, O_TOKENS },
		{ "dtype", required_argument, NULL, O_DTYPE },
		{ "layout", required_argument, NULL, O_LAYOUT },
		{ "block-tokens", required_argument, NULL, O_BTOK },
		{ "config-hash", required_argument, NULL, O_CONFIG },
		{ "kv-quant", required_argument, NULL, O_QUANT },
		{ "ns-tenant", required_argument, NULL, O_NSTENANT },
		{ "tp", required_argument, NULL, O_TP },
		{ "pp", required_argument, NULL, O_PP },
		{ "rank-agnostic", no_argument, NULL, O_AGNOSTIC },
		{ "replicas", required_argument, NULL, O_REPLICAS },
		{ 0 }
	};
	struct conn_opts o = { 0 };
	const char *servers = NULL, *group = "16", *hot = "2", *keyfile = NULL, *tokfile = NULL;
	const char *tkv[5][2];
	/* The namespace: conn_ns's unless told otherwise. */
	struct kvt_ns_desc d = { .model = CLI_MODEL, .dtype = "bytes", .layout = "opaque",
				 .block_tokens = 1, .tp_size = 1, .pp_size = 1,
				 .flags = KVT_NS_PERSISTENT };
	uint32_t *toks = NULL;
	size_t tok_n = 0, tok_cap = 0;
	struct kvt_key *keys = NULL;
	struct kvt_remote_node *nodes = NULL;
	struct kvt_store *s = NULL;
	size_t n = 0, cap = 0;
	uint64_t leading = 0;
	int64_t count;
	uint32_t ns;
	int c, rc, ex = EX_FAIL;

	if (is_help(argc, argv)) {
		fputs(who_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (conn_opt(&o, c, optarg))
			continue;
		switch (c) {
		case O_SERVERS: servers = optarg; break;
		case O_GROUP: group = optarg; break;
		case O_HOT: hot = optarg; break;
		case O_KEYS: keyfile = optarg; break;
		case O_TOKENS: tokfile = optarg; break;
		case O_DTYPE: d.dtype = optarg; break;
		case O_LAYOUT: d.layout = optarg; break;
		case O_CONFIG: d.config_hash = optarg; break;
		case O_QUANT: d.kv_quant = optarg; break;
		case O_NSTENANT: d.tenant = optarg; break;
		case O_AGNOSTIC: d.flags |= KVT_NS_RANK_AGNOSTIC; break;
		case O_BTOK:
			if (!who_u32(optarg, &d.block_tokens) || d.block_tokens == 0)
				return usage_err("who", "--block-tokens: '%s' is not 1..4294967295",
						 optarg);
			break;
		case O_TP:
			if (!who_rank(optarg, &d.tp_rank, &d.tp_size))
				return usage_err("who", "--tp: '%s' is not RANK/SIZE", optarg);
			break;
		case O_PP:
			if (!who_rank(optarg, &d.pp_rank, &d.pp_size))
				return usage_err("who", "--pp: '%s' is not RANK/SIZE", optarg);
			break;
		case O_REPLICAS:
			if (!who_u32(optarg, &d.replicas) || d.replicas > KVT_NS_REPLICAS_MAX)
				return usage_err("who", "--replicas: '%s' is not 0..8", optarg);
			break;
		default: return opt_err("who");
		}
	}
	if (o.model)
		d.model = o.model;
	if ((rc = kvt_ns_digest(&d, NULL, NULL, 0)) < 0) {
		fprintf(stderr, "kvtier who: the namespace (--model, --dtype, ...): %s\n",
			kvt_strerror(rc));
		return EX_USAGE;
	}
	if (o.dir)
		return usage_err("who", "%s", "works on kvtierd nodes only (--servers LIST)");
	if (servers && o.server)
		return usage_err("who", "%s", "give --servers or --server, not both");
	if (!servers && !o.server)
		o.server = getenv("KVTIER_SERVER");
	if (!servers && !o.server)
		return usage_err("who", "%s", "say which kvtierd: --servers ADDR,ADDR,...");
	if ((keyfile != NULL) + (tokfile != NULL) + (optind < argc) != 1)
		return usage_err("who", "%s",
				 "give the prompt's KEYs, or --keys FILE, or --tokens FILE");
	for (int i = optind; i < argc; i++) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct kvt_key *nk = realloc(keys, nc * sizeof(*keys));
			if (!nk)
				goto out;
			keys = nk;
			cap = nc;
		}
		if ((ex = parse_key("who", &o, argv[i], &keys[n])))
			goto out;
		n++;
	}
	if (keyfile && (ex = who_read_keys(&o, keyfile, &keys, &n, &cap)))
		goto out;
	if (tokfile) {
		uint8_t digest[32];
		int64_t got;
		if ((ex = who_read_tokens(tokfile, &toks, &tok_n, &tok_cap)))
			goto out;
		n = tok_n / d.block_tokens;
		if (n == 0) {
			fprintf(stderr, "kvtier who: %zu tokens: not one whole block of %u\n", tok_n,
				d.block_tokens);
			ex = EX_USAGE;
			goto out;
		}
		ex = EX_FAIL;
		keys = calloc(n, sizeof(*keys));
		if (!keys)
			goto out;
		if ((rc = kvt_ns_digest(&d, digest, NULL, 0)) < 0)
			goto fail_rc;
		got = kvt_key_chain_prompt(digest, toks, tok_n, d.block_tokens, 0, NULL, 0, keys, n);
		if (got < 0) {
			rc = (int)got;
			goto fail_rc;
		}
		n = (size_t)got;
	}
	ex = EX_FAIL;
	if (n == 0) {
		ex = usage_err("who", "%s", "no keys");
		goto out;
	}
	if ((rc = kvt_store_create(&s)) < 0)
		goto fail_rc;
#define SET(name, val)                                                                      \
	do {                                                                                \
		if ((rc = kvt_store_set_option(s, name, val)) < 0) {                        \
			fprintf(stderr, "kvtier who: %s=%s: %s\n", name, val, kvt_strerror(rc)); \
			ex = rc == KVT_EOPTVAL ? EX_USAGE : EX_FAIL;                        \
			goto out;                                                           \
		}                                                                           \
	} while (0)
	kvt_store_set_log(s, cli_lib_log, NULL, KVT_LOG_INFO);
	SET("dram.capacity", "16M");
	SET("dram.shards", "1");
	SET("dram.prefault", "off");
	SET(servers ? "remote.addrs" : "remote.addr", servers ? servers : o.server);
	SET("remote.conns", "1");
	SET("remote.group", group);
	SET("remote.hot_replicas", hot);
	for (unsigned i = 0, tn = cli_tls_kv(&o.tls, tkv); i < tn; i++)
		SET(tkv[i][0], tkv[i][1]);
	if (o.tenant)
		SET("remote.tenant", o.tenant);
	if (o.secret)
		SET("remote.secret_file", o.secret);
#undef SET
	if ((rc = kvt_store_open(s)) < 0) {
		fprintf(stderr, "kvtier who: cannot open the remote tier: %s\n", kvt_strerror(rc));
		goto out;
	}
	if ((rc = kvt_ns_register(s, &d, &ns)) < 0) {
		fprintf(stderr, "kvtier who: namespace of model '%s': %s\n", d.model,
			kvt_strerror(rc));
		goto out;
	}
	/* Give the connections a moment: a node not up within it shows as
	 * down (and makes the exit status non-zero).  The wait ends once
	 * every node is up or has failed its connections (refused at once
	 * where nothing listens); only a node that does neither, a
	 * blackholed one, makes the whole wait. */
	for (int i = 0; i < 300; i++) {
		uint64_t up = 0, members = 1, down = 0, all_down = 0;
		kvt_store_stat(s, "remote.conns_up", &up);
		kvt_store_stat(s, "remote.members", &members);
		kvt_store_stat(s, "remote.members_down", &down);
		kvt_store_stat(s, "remote.down", &all_down);
		if (up >= members || up + down >= members || (all_down && !up))
			break;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	count = kvt_remote_who(s, ns, keys, n, NULL, 0, NULL);
	if (count < 0) {
		rc = (int)count;
		goto fail_rc;
	}
	nodes = calloc((size_t)count, sizeof(*nodes));
	if (!nodes)
		goto out;
	count = kvt_remote_who(s, ns, keys, n, nodes, (size_t)count, &leading);
	if (count < 0) {
		rc = (int)count;
		goto fail_rc;
	}
	printf("%-32s %7s %4s %8s %8s %8s\n", "node", "weight", "up", "placed", "held", "leading");
	for (int64_t i = 0; i < count; i++)
		printf("%-32s %7u %4s %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n", nodes[i].addr,
		       nodes[i].weight, nodes[i].up ? "yes" : "no", nodes[i].placed, nodes[i].held,
		       nodes[i].leading);
	printf("prompt: %zu blocks, %" PRIu64 " leading blocks held\n", n, leading);
	/* A node that did not answer is not a node that holds nothing: say
	 * so, and in the exit status (kvtier-admin(1) "EXIT STATUS"). */
	{
		int64_t down = 0;
		for (int64_t i = 0; i < count; i++)
			down += !nodes[i].up;
		ex = EX_OK;
		if (count > 0 && down == count && !servers) {
			cant_reach("who", &o, -ENOTCONN);
			ex = EX_FAIL;
		} else if (count > 0 && down == count) {
			char why[sizeof(cli_lib_err) + 256];
			/* The pod's TLS mode is one: the first node says it. */
			cli_tls_diagnose(nodes[0].addr, &o.tls, why, sizeof(why));
			if (why[0]) {
				fprintf(stderr, "kvtier who: no node of --servers answered; kvtierd "
						"at %s: %s\n", nodes[0].addr, why);
				ex = EX_FAIL;
				goto out;
			}
			cli_lib_last(why, sizeof(why));
			fprintf(stderr, "kvtier who: no node of --servers answered%s%s\n"
					"Are they running and listening there? (kvtierd(8))\n",
				why[0] ? "; the last error: " : "", why);
			ex = EX_FAIL;
		} else if (down) {
			fprintf(stderr, "kvtier who: %" PRId64 " of %" PRId64 " nodes did not answer "
					"(up no): the figures are the other nodes' alone\n", down, count);
			ex = EX_PARTIAL;
		}
	}
	fflush(stdout);
	goto out;
fail_rc:
	fprintf(stderr, "kvtier who: %s\n", kvt_strerror(rc));
	ex = EX_FAIL;
out:
	kvt_store_destroy(s);
	free(nodes);
	free(keys);
	free(toks);
	return ex;
}

/* ------------------------------------------------------------------------
 * clear
 */

static const char clear_help[] =
	"usage: kvtier clear [--server ADDR | --dir DIR] [--model M | --all] [--yes]\n"
	"\n"
	"Remove every block of one namespace (--model M: the debugging keys of\n"
	"model M, as get/put/rm use them; default \"" CLI_MODEL "\"), or with --all\n"
	"of every namespace (with --server: every namespace of your tenant),\n"
	"from every tier.  Clears survive restarts.  On a terminal it asks first;\n"
	"elsewhere it needs --yes.\n"
	"\n" CONN_HELP "  --all                every namespace\n"
	"  -y, --yes            do not ask\n"
	"\nExit status: 0 cleared, 1 failure or not confirmed, 2 usage.  kvtier-admin(1).\n";

int admin_clear(int argc, char **argv)
{
	static const struct option lo[] = { CONN_LONGOPTS, { "all", no_argument, NULL, O_ALL },
					    { "yes", no_argument, NULL, 'y' }, { 0 } };
	struct conn_opts o = { 0 };
	bool all = false, yes = false;
	struct kvt_store *s;
	uint32_t ns = KVT_NS_ALL;
	struct cli_progress pr;
	int64_t n;
	int c, ex;

	if (is_help(argc, argv)) {
		fputs(clear_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "y", lo, NULL)) != -1) {
		if (conn_opt(&o, c, optarg))
			continue;
		if (c == O_ALL)
			all = true;
		else if (c == 'y')
			yes = true;
		else
			return opt_err("clear");
	}
	if (optind != argc)
		return usage_err("clear", "unexpected argument '%s'", argv[optind]);
	if (all && o.model)
		return usage_err("clear", "%s", "give --model M or --all, not both");
	if ((ex = conn_check("clear", &o, true, true)))
		return ex;
	if (!yes) {
		char line[16];
		if (!isatty(0)) {
			fprintf(stderr, "kvtier clear: not on a terminal, so not asking; add --yes "
					"to clear without confirmation\n");
			return EX_FAIL;
		}
		fprintf(stderr, "Remove %s from %s, every tier? [y/N] ",
			all ? "every block of every namespace" : "every block of the namespace",
			o.server ? o.server : o.dir);
		if (!fgets(line, sizeof(line), stdin) || (line[0] != 'y' && line[0] != 'Y')) {
			fprintf(stderr, "kvtier clear: not cleared\n");
			return EX_FAIL;
		}
	}
	if ((ex = conn_open("clear", &o, &s)))
		return ex;
	if (!all && (ex = conn_ns("clear", s, &o, &ns)))
		goto out;
	cli_progress_start(&pr, "blocks", true);
	if (pr.on)
		fprintf(stderr, "clearing %s ...\n", o.server ? o.server : o.dir);
	n = kvt_clear(s, ns);
	if (n >= 0)
		kvt_flush(s);
	cli_progress_end(&pr);
	if (n < 0) {
		if (n == -ENOTCONN || n == -ETIMEDOUT)
			cant_reach("clear", &o, (int)n);
		else
			fprintf(stderr, "kvtier clear: %s\n", kvt_strerror((int)n));
		ex = EX_FAIL;
		goto out;
	}
	printf("cleared %" PRId64 " blocks\n", n);
	ex = EX_OK;
out:
	conn_close(s);
	return ex;
}

/* ------------------------------------------------------------------------
 * fsck and ls (offline, on a store directory)
 */

static const char fsck_help[] =
	"usage: kvtier fsck [--quiet] [--ssd-capacity SIZE --segment SIZE] DIR\n"
	"\n"
	"Verify every record of the SSD tier of store directory DIR, offline\n"
	"(no process may have it open): segment headers, record headers and\n"
	"each part's CRC32C, that each record's namespace is registered (else\n"
	"an orphan), and that every checkpoint entry names a sound record.\n"
	"Each problem is printed with its file, offset, seq and key.  Nothing\n"
	"is written.  A progress bar is shown when stderr is a terminal.\n"
	"\n"
	"  -q, --quiet          print problems only, no summary\n"
	"  --ssd-capacity SIZE  the store's ssd.capacity and ssd.segment, as it\n"
	"  --segment SIZE       will be opened: judge the files as its recovery\n"
	"                       will (a segment of another size is a free slot, a\n"
	"                       checkpoint of another slot count is ignored).\n"
	"                       Without them: the segment size of the segments\n"
	"                       the checkpoint names, and the checkpoint as is.\n"
	"\nExit status: 0 clean, 1 damaged (or orphaned records), 2 usage or DIR\n"
	"cannot be checked.  kvtier-admin(1).\n";

struct fsck_ctx {
	struct cli_progress pr;
};

static void fsck_problem(void *ctx, int kind, const char *msg)
{
	struct fsck_ctx *c = ctx;
	if (c->pr.drawn) {
		fputc('\n', stderr);
		c->pr.drawn = false;
	}
	printf("%s: %s\n", kind == KVT_FSCK_DAMAGE ? "damaged" : kind == KVT_FSCK_ORPHAN ? "orphan"
												 : "warning",
	       msg);
	fflush(stdout);
}

static void fsck_prog(void *ctx, uint64_t done, uint64_t total)
{
	struct fsck_ctx *c = ctx;
	cli_progress_update(&c->pr, done, total);
}

static int fsck_err(const char *cmd, const char *dir, int rc)
{
	struct stat st;

	if (rc == KVT_ELOCKED)
		fprintf(stderr, "kvtier %s: %s is open in another process (a kvtierd?); stop it "
				"first: the check reads the store offline\n", cmd, dir);
	else if (rc == -ENOENT && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		fprintf(stderr, "kvtier %s: %s is not a kvtier store directory (none of LOCK, "
				"namespaces, ssd/ in it): nothing to check\n", cmd, dir);
	else
		fprintf(stderr, "kvtier %s: cannot read %s: %s\n", cmd, dir, kvt_strerror(rc));
	return EX_USAGE;
}

int admin_fsck(int argc, char **argv)
{
	static const struct option lo[] = { { "quiet", no_argument, NULL, 'q' },
					    { "ssd-capacity", required_argument, NULL, 'C' },
					    { "segment", required_argument, NULL, 'S' },
					    { "help", no_argument, NULL, 'h' }, { 0 } };
	struct fsck_ctx fc;
	struct kvt_fsck f = { .problem = fsck_problem, .progress = fsck_prog, .ctx = &fc };
	bool quiet = false;
	int c, rc;

	if (is_help(argc, argv)) {
		fputs(fsck_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "q", lo, NULL)) != -1) {
		if (c == 'q')
			quiet = true;
		else if (c == 'C' && kvt_parse_size(optarg, &f.ssd_capacity) == 0)
			continue;
		else if (c == 'S' && kvt_parse_size(optarg, &f.ssd_segment) == 0)
			continue;
		else if (c == 'C' || c == 'S')
			return usage_err("fsck", "not a size: %s", optarg);
		else
			return opt_err("fsck");
	}
	if (optind + 1 != argc)
		return usage_err("fsck", "%s", "give exactly one store directory");
	cli_progress_start(&fc.pr, "bytes", true);
	rc = kvt_store_fsck(argv[optind], &f);
	cli_progress_end(&fc.pr);
	if (rc < 0 && rc != KVT_ECORRUPT)
		return fsck_err("fsck", argv[optind], rc);
	if (!quiet)
		printf("%s: %" PRIu64 " segments, %" PRIu64 " records, %" PRIu64
		       " blocks checked; %" PRIu64 " live blocks (%" PRIu64 " bytes); %" PRIu64
		       " damaged, %" PRIu64 " orphaned, %" PRIu64 " warnings: %s\n",
		       argv[optind], f.segments, f.records, f.blocks_checked, f.blocks, f.bytes,
		       f.damaged, f.orphans, f.warnings, rc == 0 ? "clean" : "DAMAGED");
	return rc == 0 ? EX_OK : EX_FAIL;
}

/* ------------------------------------------------------------------------
 * stat
 */

struct stat_map {
	struct stat_ent *v;
	size_t n, cap;
	bool nomem;
};

static void stat_add(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct stat_map *m = ctx;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct stat_ent *v = realloc(m->v, cap * sizeof(*v));
		if (!v) {
			m->nomem = true;
			return;
		}
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n].name = strdup(name);
	m->v[m->n].str = str ? strdup(str) : NULL;
	m->v[m->n].value = value;
	m->n++;
}

static void stat_map_free(struct stat_map *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].str);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static const struct stat_ent *stat_find(const struct stat_map *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].name && strcmp(m->v[i].name, name) == 0)
			return &m->v[i];
	return NULL;
}

static uint64_t stat_num(const struct stat_map *m, const char *name, bool *have)
{
	const struct stat_ent *e = stat_find(m, name);
	if (have)
		*have = e != NULL;
	return e ? e->value : 0;
}

static const char *stat_str(const struct stat_map *m, const char *name)
{
	const struct stat_ent *e = stat_find(m, name);
	return e && e->str ? e->str : "-";
}

/* STATS of the server behind s into *m (emptied first). */
static int stat_fetch(struct kvt_store *s, const char *tenant, struct stat_map *m)
{
	int rc;
	stat_map_free(m);
	rc = kvt_remote_stats(s, tenant, stat_add, m);
	if (rc == 0 && m->nomem)
		rc = -ENOMEM;
	return rc;
}

static void stat_tier_row(const struct stat_map *m, const struct stat_map *prev, double dt,
			  const char *tier, const char *blocks, const char *used, const char *cap,
			  const char *hits, const char *misses)
{
	char ub[32], cb[32], ratio[16], rate[48] = "";
	bool have;
	uint64_t h = stat_num(m, hits, &have), mi = stat_num(m, misses, NULL);
	if (!have)
		return;
	stat_fmt_bytes(stat_num(m, used, NULL), false, ub, sizeof(ub));
	stat_fmt_bytes(stat_num(m, cap, NULL), false, cb, sizeof(cb));
	if (h + mi)
		snprintf(ratio, sizeof(ratio), "%5.1f%%", 100.0 * (double)h / (double)(h + mi));
	else
		snprintf(ratio, sizeof(ratio), "%6s", "-");
	if (prev && dt > 0) {
		double dh = (double)(h - stat_num(prev, hits, NULL)) / dt;
		double dm = (double)(mi - stat_num(prev, misses, NULL)) / dt;
		snprintf(rate, sizeof(rate), "  %9.1f %9.1f", dh, dm);
	}
	printf("%-6s %10" PRIu64 " %11s / %-11s %12" PRIu64 " %12" PRIu64 " %s%s\n", tier,
	       stat_num(m, blocks, NULL), ub, cb, h, mi, ratio, rate);
}

static void stat_print(const char *addr, const char *scope, const struct stat_map *m,
		       const struct stat_map *prev, double dt)
{
	bool have;
	uint64_t up = stat_num(m, "server.uptime_ns", &have) / 1000000000u;
	printf("kvtierd %s  version %s", addr, stat_str(m, "server.version"));
	if (have)
		printf("  up %" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", up / 3600, up / 60 % 60,
		       up % 60);
	printf("  (%s)\n", scope);
	if (stat_find(m, "server.conns_active"))
		printf("connections: %" PRIu64 " active, %" PRIu64 " accepted, %" PRIu64
		       " closed; auth %s\n",
		       stat_num(m, "server.conns_active", NULL), stat_num(m, "server.conns_accepted", NULL),
		       stat_num(m, "server.conns_closed", NULL), stat_str(m, "server.auth"));
	if (stat_find(m, "tenant.name"))
		printf("tenant %s: %" PRIu64 " namespaces\n", stat_str(m, "tenant.name"),
		       stat_num(m, "tenant.namespaces", NULL));
	if (stat_find(m, "dram.hits")) {
		printf("\n%-6s %10s %25s %12s %12s %6s%s\n", "TIER", "BLOCKS", "USED / CAPACITY",
		       "HITS", "MISSES", "HIT%", prev ? "     HITS/s  MISSES/s" : "");
		stat_tier_row(m, prev, dt, "dram", "dram.blocks", "dram.used_bytes",
			      "dram.capacity_bytes", "dram.hits", "dram.misses");
		stat_tier_row(m, prev, dt, "ssd", "ssd.blocks", "ssd.value_bytes",
			      "ssd.capacity_bytes", "ssd.reads", "ssd.read_misses");
	}
	/* Per namespace (doc/stats.md "ns"): who finds its context again. */
	stat_ns_print(m->v, m->n);
	/* Healing (doc/cluster.md): the pod member's repair progress. */
	if (stat_find(m, "repair.tracked")) {
		static const char *const drain[] = { "", ", draining", ", drained: out of the list",
						     ", drained" };
		uint64_t ds = stat_num(m, "repair.drain_state", NULL), bytes;
		char b[32];
		bytes = stat_num(m, "repair.bytes", NULL);
		stat_fmt_bytes(bytes, false, b, sizeof(b));
		printf("repair: %" PRIu64 " placed blocks, %s, %" PRIu64 " passes; %" PRIu64
		       " copied (%s), %" PRIu64 " refused, %" PRIu64 " errors%s",
		       stat_num(m, "repair.tracked", NULL),
		       stat_num(m, "repair.pending", NULL) ? "a pass due" : "in place",
		       stat_num(m, "repair.passes", NULL), stat_num(m, "repair.copied", NULL), b,
		       stat_num(m, "repair.refused", NULL), stat_num(m, "repair.errors", NULL),
		       ds < 4 ? drain[ds] : "");
		/* a drain that left blocks behind is no repair.error (a member
		 * refusing busy is not one): said here */
		if (stat_num(m, "repair.drains_incomplete", NULL))
			printf("; %" PRIu64 " drain(s) left blocks behind",
			       stat_num(m, "repair.drains_incomplete", NULL));
		if (prev && dt > 0)
			printf("; %.1f MB/s",
			       (double)(bytes - stat_num(prev, "repair.bytes", NULL)) / dt / 1e6);
		printf("\n");
	}
	/* Errors: every non-zero error counter. */
	{
		int shown = 0;
		for (size_t i = 0; i < m->n; i++) {
			const struct stat_ent *e = &m->v[i];
			if (e->str || !e->value ||
			    (strncmp(e->name, "server.errors.", 14) != 0 &&
			     !strstr(e->name, "crc_errors") && !strstr(e->name, "io_errors") &&
			     !strstr(e->name, "header_errors")))
				continue;
			printf("%s%s %" PRIu64, shown++ ? ", " : "\nerrors: ", e->name, e->value);
		}
		printf(shown ? "\n" : "\nerrors: none\n");
	}
}

static volatile sig_atomic_t stat_stop;
static void stat_on_int(int sig)
{
	(void)sig;
	stat_stop = 1;
}

static const char stat_help[] =
	"usage: kvtier stat [--server ADDR] [--tenant T --secret-file F] [--of TENANT]\n"
	"                   [--watch [SECS]] [--raw | --json]\n"
	"                   [--tls [--tls-ca F] [--tls-cert F --tls-key F]\n"
	"                   [--tls-server-name N]]\n"
	"\n"
	"Show a running kvtierd: per tier blocks, bytes used of capacity, hits,\n"
	"misses and hit ratio; connections; non-zero error counters.  Server-wide\n"
	"figures need the admin role; otherwise your tenant's are shown.  With\n"
	"--watch the table refreshes every SECS seconds (default 2), with hit and\n"
	"miss rates since the last refresh, until interrupted.\n"
	"\n"
	"Per namespace (the server's, or your tenant's own): lookup keys found (KEYS%),\n"
	"gets and the share served (HIT%), hits by tier, puts, bytes in DRAM now,\n"
	"bytes evicted from DRAM and the share of them never read there (UNREAD%:\n"
	"context stored and never reused).  The server counts its first\n"
	"stats.namespaces namespaces (default 64) each in a row; the rest share\n"
	"the row \"other\".  NAMESPACE is the digest's first 16 hex digits.\n"
	"\n"
	"  --server ADDR        HOST:PORT, [V6]:PORT or unix:/PATH (default $KVTIER_SERVER)\n"
	"  --tenant T           authenticate as tenant T (default \"default\")\n"
	"  --secret-file F      the tenant's secret (mode 0600)\n"
	CLI_TLS_HELP
	"  --of TENANT          another tenant's figures (admin)\n"
	"  --watch [SECS]       refresh every SECS seconds\n"
	"  --raw                every statistic as NAME VALUE lines, for scripts\n"
	"  --json               every statistic, and the per-namespace rows, as one\n"
	"                       JSON object per refresh\n"
	"\nExit status: 0 ok, 1 cannot reach the server or refused, 2 usage.  kvtier-admin(1).\n";

int admin_stat(int argc, char **argv)
{
	enum { O_OF = 400, O_RAW, O_JSON };
	static const struct option lo[] = { CONN_LONGOPTS,
					    { "watch", optional_argument, NULL, O_WATCH },
					    { "of", required_argument, NULL, O_OF },
					    { "raw", no_argument, NULL, O_RAW },
					    { "json", no_argument, NULL, O_JSON },
					    { 0 } };
	struct conn_opts o = { 0 };
	const char *of = NULL, *scope;
	double every = 0;
	bool raw = false, json = false, own = false;
	struct kvt_store *s;
	struct stat_map cur = { 0 }, prev = { 0 };
	double t_prev = 0;
	int c, ex, rc;

	if (is_help(argc, argv)) {
		fputs(stat_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c != O_DIR && c != O_SSDCAP && c != O_SEGMENT && c != O_HEX && c != O_MODEL &&
		    conn_opt(&o, c, optarg))
			continue;
		if (c == O_WATCH) {
			char *end;
			const char *a = optarg;
			if (!a && optind < argc && argv[optind][0] != '-')
				a = argv[optind++];
			every = a ? strtod(a, &end) : 2.0;
			if (a && (*end || every < 0.1 || every > 86400))
				return usage_err("stat", "--watch SECS must be 0.1..86400 (got '%s')", a);
		} else if (c == O_OF) {
			of = optarg;
		} else if (c == O_RAW) {
			raw = true;
		} else if (c == O_JSON) {
			json = true;
		} else {
			return opt_err("stat");
		}
	}
	if (optind != argc)
		return usage_err("stat", "unexpected argument '%s'", argv[optind]);
	if (raw && json)
		return usage_err("stat", "%s", "--raw or --json, not both");
	if ((ex = conn_check("stat", &o, false, true)))
		return ex;
	if ((ex = conn_open("stat", &o, &s)))
		return ex;
	signal(SIGINT, stat_on_int);
	signal(SIGTERM, stat_on_int);
	for (;;) {
		scope = of ? of : "whole server";
		rc = own ? -EPERM : stat_fetch(s, of ? of : "*", &cur);
		if (rc < 0 && !of && rc != -ENOTCONN && rc != -ETIMEDOUT && rc != -ENOMEM) {
			/* Not admin: the tenant's own figures, from now on.  Asking
			 * for the server's at every refresh cost one refusal each,
			 * counted in server.errors.permission: a tenant's --watch 1
			 * alone raised KvtierAuthFailures (more than 0.1/s). */
			own = true;
			scope = "your tenant; server-wide figures need the admin role";
			rc = stat_fetch(s, NULL, &cur);
		}
		if (rc < 0) {
			if (rc == -ENOTCONN || rc == -ETIMEDOUT)
				cant_reach("stat", &o, rc);
			else
				fprintf(stderr, "kvtier stat: the server refused: %s\n",
					kvt_strerror(rc));
			ex = EX_FAIL;
			break;
		}
		double now = cli_now();
		if (json) {
			if (stat_json_print(o.server, scope, cur.v, cur.n) < 0) {
				fprintf(stderr, "kvtier stat: out of memory\n");
				ex = EX_FAIL;
				break;
			}
		} else if (raw) {
			for (size_t i = 0; i < cur.n; i++) {
				if (cur.v[i].str)
					printf("%s %s\n", cur.v[i].name, cur.v[i].str);
				else
					printf("%s %" PRIu64 "\n", cur.v[i].name, cur.v[i].value);
			}
		} else {
			if (every > 0 && isatty(1))
				printf("\033[H\033[2J");
			stat_print(o.server, scope, &cur, prev.n ? &prev : NULL, now - t_prev);
		}
		fflush(stdout);
		ex = EX_OK;
		if (every <= 0 || stat_stop)
			break;
		stat_map_free(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
		t_prev = now;
		struct timespec ts = { (time_t)every, (long)((every - (double)(time_t)every) * 1e9) };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stat_stop)
			;
		if (stat_stop)
			break;
	}
	stat_map_free(&cur);
	stat_map_free(&prev);
	conn_close(s);
	return ex;
}

static const char ls_help[] =
	"usage: kvtier ls --dir DIR\n"
	"       kvtier ls --server ADDR [--tenant T --secret-file F]\n"
	"\n"
	"List namespaces.  With --dir (offline: no process may have the store\n"
	"open): every registered namespace with its live blocks and value bytes\n"
	"on SSD, its id and digest, and its model, dtype, layout and ranks.\n"
	"With --server: how many namespaces your tenant has on that kvtierd, each\n"
	"of them as kvtier stat's per-namespace row (digest, id, model, gets,\n"
	"hits by tier, puts, bytes in DRAM; the server counts its first\n"
	"stats.namespaces each in a row, the rest in \"other\"), and, for the\n"
	"admin, the server's blocks and bytes per tier.  Blocks per namespace\n"
	"are --dir's alone: kvtierd does not count them.\n"
	"\n" CONN_HELP "\nExit status: 0 ok, 1 failure, 2 usage.  kvtier-admin(1).\n";

static void canon_field(const char *canon, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *p = canon;
	snprintf(out, cap, "?");
	while (p && *p) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			snprintf(out, cap, "%.*s", (int)(l - nl - 1), p + nl + 1);
			return;
		}
		p = e ? e + 1 : NULL;
	}
}

/* ls --dir's table header, once (*(bool *)printed): before the first
 * row, or after a walk that found no namespace -- never before an error. */
static void ls_header(void *printed)
{
	if (*(bool *)printed)
		return;
	*(bool *)printed = true;
	printf("%4s  %-12s  %10s  %14s  %s\n", "ID", "DIGEST", "BLOCKS", "BYTES", "NAMESPACE");
}

static void ls_ns(void *ctx, uint32_t id, const uint8_t digest[32], const char *canon,
		  uint64_t blocks, uint64_t bytes)
{
	char model[256], dtype[64], layout[64], tp[32], tenant[80];
	ls_header(ctx);
	canon_field(canon, "model", model, sizeof(model));
	canon_field(canon, "dtype", dtype, sizeof(dtype));
	canon_field(canon, "layout", layout, sizeof(layout));
	canon_field(canon, "tp", tp, sizeof(tp));
	canon_field(canon, "tenant", tenant, sizeof(tenant));
	printf("%4u  %02x%02x%02x%02x%02x%02x  %10" PRIu64 "  %14" PRIu64 "  %s %s %s tp=%s "
	       "tenant=%s\n",
	       id, digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], blocks, bytes,
	       model, dtype, layout, tp, tenant);
}

int admin_ls(int argc, char **argv)
{
	static const struct option lo[] = { CONN_LONGOPTS, { 0 } };
	struct conn_opts o = { 0 };
	int c, ex, rc;

	if (is_help(argc, argv)) {
		fputs(ls_help, stdout);
		return EX_OK;
	}
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1)
		if (!conn_opt(&o, c, optarg))
			return opt_err("ls");
	if (optind != argc)
		return usage_err("ls", "unexpected argument '%s'", argv[optind]);
	if ((ex = conn_check("ls", &o, true, true)))
		return ex;
	if (o.dir) {
		bool header = false;
		struct kvt_fsck f = { .ns_info = ls_ns, .ctx = &header };
		rc = kvt_store_fsck(o.dir, &f);
		if (rc < 0 && rc != KVT_ECORRUPT) {
			fsck_err("ls", o.dir, rc);
			return EX_FAIL;
		}
		ls_header(&header);
		if (rc == KVT_ECORRUPT)
			fprintf(stderr, "kvtier ls: the store has damaged records; 'kvtier fsck %s' "
					"lists them\n", o.dir);
		return EX_OK;
	}
	{
		struct kvt_store *s;
		struct stat_map own = { 0 }, all = { 0 };
		const char *role;
		bool h1, h2;
		if ((ex = conn_open("ls", &o, &s)))
			return ex;
		rc = stat_fetch(s, NULL, &own);
		if (rc < 0) {
			cant_reach("ls", &o, rc);
			conn_close(s);
			return EX_FAIL;
		}
		printf("tenant %s: %" PRIu64 " namespaces\n", stat_str(&own, "tenant.name"),
		       stat_num(&own, "tenant.namespaces", &h1));
		/* The server-wide figures are the admin's: a tenant asking
		 * would cost it a PROTO_EPERM (server.errors.permission, the
		 * tenant's error counter) for a line it may not see.  A
		 * server older than conn.role (2026-12-06) is asked. */
		role = stat_find(&own, "conn.role") ? stat_str(&own, "conn.role") : "admin";
		if (strcmp(role, "admin") == 0 && stat_fetch(s, "*", &all) == 0) {
			uint64_t db = stat_num(&all, "dram.blocks", &h1);
			uint64_t dv = stat_num(&all, "dram.value_bytes", &h1);
			uint64_t sb = stat_num(&all, "ssd.blocks", &h2);
			uint64_t sv = stat_num(&all, "ssd.value_bytes", &h2);
			printf("server: dram %" PRIu64 " blocks %" PRIu64 " bytes; ssd %" PRIu64
			       " blocks %" PRIu64 " bytes (all namespaces)\n", db, dv, sb, sv);
		}
		/* The namespaces themselves: the server's per-namespace rows
		 * (doc/stats.md "ns"), the tenant's own, as kvtier stat shows
		 * them; ls printed their count alone. */
		stat_ns_print(own.v, own.n);
		stat_map_free(&own);
		stat_map_free(&all);
		conn_close(s);
		return EX_OK;
	}
}

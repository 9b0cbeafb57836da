/*
 * drain.c - "kvtier drain ADDR": ask a kvtierd of a pod to hand what it
 * holds over to the members the ranking gives without it, leave the
 * member list and, with --exit, stop (doc/cluster.md "Drain").  It speaks
 * the native protocol through daemon/peer.c (the client kvtierd's repair
 * thread uses too): DRAIN, then STATS repair.drain_state until the drain
 * is done (or the server exited).  With --tls* (tlsopt.h) over TLS, as a
 * pod whose members run with --tls-cert needs.
 *
 * Exit codes: 0 drained, 1 failure (a drain that left blocks behind
 * too: repair.drains_incomplete grew while it ran), 2 usage.
 */
#include "drain.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "daemon/peer.h"
#include "kvtier.h"
#include "proto.h"
#include "tlsopt.h"

static const char drain_help[] =
	"usage: kvtier drain ADDR [--exit] [--tenant T --secret-file F] [--timeout S] [--no-wait]\n"
	"                        [--tls [--tls-ca F] [--tls-cert F --tls-key F]\n"
	"                        [--tls-server-name N]]\n"
	"\n"
	"Ask the kvtierd at ADDR (a member of a pod: HOST:PORT, [V6]:PORT, or\n"
	"unix:/PATH on its host) to hand the blocks it holds over to the members\n"
	"placement gives without it (every replicated one, and the others most\n"
	"recently used first up to its --drain-budget), leave the member list (its\n"
	"etcd lease revoked; in a static --members pod the others drop it within a\n"
	"second) and keep serving reads; with --exit it then stops.\n"
	"Needs the admin role.\n"
	"\n"
	"  --exit             stop the server once drained\n"
	"  --tenant T         authenticate as T (default \"default\")\n"
	"  --secret-file F    T's secret (mode 0600); none: no authentication\n"
	"  --timeout S        give up waiting after S seconds (default 600)\n"
	"  --no-wait          return once the server accepted the drain\n"
	"TLS (a pod whose members run with --tls-cert; doc/kvtierd.md \"TLS\"):\n"
	CLI_TLS_HELP
	"\n"
	"Exit status: 0 drained (or accepted, --no-wait), 1 failure (cannot reach,\n"
	"refused, timed out, or drained with blocks left behind: a member busy or\n"
	"out of reach through every try; the server's log names it), 2 usage.\n"
	"kvtier-admin(1).\n";

static int drain_secret(const char *path, uint8_t *buf, uint32_t *len)
{
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, buf, PROTO_SECRET_MAX);
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	if (n < (ssize_t)PROTO_SECRET_MIN)
		return -EINVAL;
	*len = (uint32_t)n;
	return 0;
}

static const char *drain_err(int rc)
{
	return rc <= -5000 && rc > -6000 ? (proto_strerror(rc)) : rc < 0 && rc > -4096 ?
	       strerror(-rc) : kvt_strerror(rc);
}

int drain_main(int argc, char **argv)
{
	enum { O_EXIT = 256, O_TENANT, O_SECRET, O_TIMEOUT, O_NOWAIT };
	static const struct option lo[] = {
		{ "exit", no_argument, NULL, O_EXIT },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "secret-file", required_argument, NULL, O_SECRET },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "no-wait", no_argument, NULL, O_NOWAIT },
		{ "help", no_argument, NULL, 'h' },
		CLI_TLS_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	const char *tenant = "default", *secret_path = NULL, *addr;
	uint8_t secret[PROTO_SECRET_MAX];
	uint32_t secret_len = 0;
	bool exit_after = false, wait = true;
	long timeout_s = 600;
	struct kvtd_peer p;
	struct cli_tls tls = { 0 };
	SSL_CTX *ctx;
	bool ctx_fail;
	char why[512];
	static const char *const names[4] = { "repair.drain_state", "repair.drains_incomplete",
					      "repair.copied", "repair.drain_copied" };
	uint64_t state = 0, copied = 0, copied0 = 0, inc0 = 0, inc = 0, v[4] = { 0 };
	bool found[4];
	time_t t0;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_EXIT: exit_after = true; break;
		case O_TENANT: tenant = optarg; break;
		case O_SECRET: secret_path = optarg; break;
		case O_TIMEOUT: timeout_s = strtol(optarg, NULL, 10); break;
		case O_NOWAIT: wait = false; break;
		case 'h': fputs(drain_help, stdout); return 0;
		default:
			if (cli_tls_opt(&tls, c, optarg))
				break;
			fputs(drain_help, stderr); return 2;
		}
	}
	if (optind + 1 != argc || timeout_s <= 0) {
		fputs(drain_help, stderr);
		return 2;
	}
	addr = argv[optind];
	if (tls.on && !tls.name && strncmp(addr, "unix:", 5) == 0) {
		/* kvtierd serves TLS on TCP only; a unix: socket of a TLS
		 * proxy has no host name to check the certificate against */
		fputs("kvtier drain: --tls over a unix: socket needs --tls-server-name\n", stderr);
		return 2;
	}
	if (secret_path && (rc = drain_secret(secret_path, secret, &secret_len)) < 0) {
		fprintf(stderr, "kvtier drain: --secret-file %s: %s\n", secret_path,
			rc == -EPERM ? "must be readable by its owner only (chmod 600)" :
			rc == -EINVAL ? "a secret is 16..4096 bytes" : strerror(-rc));
		return 1;
	}
	ctx = cli_tls_ctx("drain", &tls, &ctx_fail);
	if (ctx_fail) {
		OPENSSL_cleanse(secret, sizeof(secret));
		return 1;
	}
	rc = kvtd_peer_open_tls_name(&p, addr, tls.name, tenant, secret_len ? secret : NULL,
				     secret_len, 0, ctx);
	OPENSSL_cleanse(secret, sizeof(secret));
	if (rc < 0) {
		/* A TLS server closes a plain connection, a plain one answers
		 * a ClientHello with a protocol error: say which it was. */
		cli_tls_diagnose(addr, &tls, why, sizeof(why));
		if (why[0])
			fprintf(stderr, "kvtier drain: kvtierd at %s: %s\n", addr, why);
		else
			fprintf(stderr, "kvtier drain: cannot reach %s: %s\n", addr,
				drain_err(rc));
		SSL_CTX_free(ctx);
		return 1;
	}
	SSL_CTX_free(ctx); /* the connection's SSL holds its own reference */
	rc = kvtd_peer_drain(&p, exit_after ? PROTO_DRAIN_EXIT : PROTO_DRAIN_STAY);
	if (rc < 0) {
		fprintf(stderr, "kvtier drain: %s refused: %s%s\n", addr, drain_err(rc),
			rc == PROTO_EPERM ? " (a drain needs the admin role: --tenant and "
					    "--secret-file of an admin of the --tenants file)" : "");
		kvtd_peer_close(&p);
		return 1;
	}
	if (!wait) {
		printf("%s: draining\n", addr);
		kvtd_peer_close(&p);
		return 0;
	}
	/* Drains that left blocks behind before this one (a server without
	 * the stat: 0, and never more), read once this one is accepted: an
	 * earlier drain is done then, its count final -- read before, one
	 * ending just then (its last hand-over failed) was this one's
	 * (review47b) -- and this one counts none for 5 tries a second
	 * apart.  The blocks copied said are this drain's:
	 * repair.drain_copied, which the server counts from the DRAIN's
	 * acceptance on, the copies of its own hand-overs alone (dup48: a
	 * pass under way then counted in repair.copied's growth); from a
	 * server without it, what repair.copied (every drain's and pass's
	 * since it started) grows by while this drain runs. */
	if (kvtd_peer_stats(&p, PROTO_SCOPE_TENANT, 2, names + 1, v + 1, found + 1) != KVT_OK)
		found[1] = found[2] = false;
	inc0 = found[1] ? v[1] : 0;
	copied0 = found[2] ? v[2] : 0;
	inc = inc0;
	copied = copied0;
	t0 = time(NULL);
	for (;;) {
		struct timespec ts = { 0, 200 * 1000000L };
		/* one STATS a look: the four figures of one answer */
		rc = kvtd_peer_stats(&p, PROTO_SCOPE_TENANT, 4, names, v, found);
		if (rc == KVT_OK && !found[0])
			rc = KVT_MISS;
		if (rc == KVT_OK) {
			state = v[0];
			if (found[1])
				inc = v[1];
			if (found[3])
				copied = v[3], copied0 = 0;
			else if (found[2])
				copied = v[2];
		}
		if ((rc < 0 && exit_after) || (rc == KVT_OK && state == 3 && !exit_after)) {
			/* Done (with --exit: it stopped, the drain finished
			 * just before; one that left blocks behind answers
			 * a second after its count, REPAIR_DRAIN_SAY_MS) */
			const char *end = exit_after ? "stopped" : "out of the member list";
			kvtd_peer_close(&p);
			if (inc > inc0) {
				fprintf(stderr, "kvtier drain: %s: drained with blocks left behind "
					"(%llu blocks copied; a member busy or out of reach through "
					"every try: the server's log says which), %s\n", addr,
					(unsigned long long)(copied - copied0), end);
				return 1;
			}
			printf("%s: drained (%llu blocks copied), %s\n", addr,
			       (unsigned long long)(copied - copied0), end);
			return 0;
		}
		if (rc != KVT_OK) {
			fprintf(stderr, "kvtier drain: %s: %s\n", addr, drain_err(rc));
			break;
		}
		if (time(NULL) - t0 > timeout_s) {
			fprintf(stderr, "kvtier drain: %s: still draining after %ld s\n", addr,
				timeout_s);
			break;
		}
		nanosleep(&ts, NULL);
	}
	kvtd_peer_close(&p);
	return 1;
}

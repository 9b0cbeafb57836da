/*
 * tlsopt.h - the TLS options every kvtier command that reaches a kvtierd
 * takes (--tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name;
 * kvtier-admin(1) "TLS"), and what to say when a connection fails because
 * one side speaks TLS and the other does not (tlsopt.c).
 *
 * The commands on the remote tier (stat, ls, get, put, rm, clear, who,
 * replay --server) pass them on as remote.tls*; drain builds the client
 * context from them (lib/sys/tlsio.c, the one TLS client) for
 * daemon/peer.c.
 */
#ifndef KVT_CLI_TLSOPT_H
#define KVT_CLI_TLSOPT_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ssl_ctx_st SSL_CTX;

struct cli_tls {
	bool on;                 /* --tls, or any --tls-* */
	const char *ca;          /* --tls-ca: the CA of the server's certificate */
	const char *cert, *key;  /* --tls-cert, --tls-key: a client certificate */
	const char *name;        /* --tls-server-name: what the certificate names */
};

/* getopt_long values, above every command's own. */
enum { CLI_O_TLS = 1000, CLI_O_TLS_CA, CLI_O_TLS_CERT, CLI_O_TLS_KEY, CLI_O_TLS_NAME };

#define CLI_TLS_LONGOPTS                                                                   \
	{ "tls", no_argument, NULL, CLI_O_TLS },                                           \
	{ "tls-ca", required_argument, NULL, CLI_O_TLS_CA },                               \
	{ "tls-cert", required_argument, NULL, CLI_O_TLS_CERT },                           \
	{ "tls-key", required_argument, NULL, CLI_O_TLS_KEY },                             \
	{ "tls-server-name", required_argument, NULL, CLI_O_TLS_NAME }

#define CLI_TLS_HELP                                                                       \
	"  --tls                TLS to the server (a kvtierd run with --tls-cert serves\n" \
	"                       TLS only on its TCP listeners); each --tls-* implies it\n" \
	"  --tls-ca FILE        CA (PEM) of the server's certificate (default: the\n"      \
	"                       system's store; kvtierd --tls-ca is usually the same)\n"   \
	"  --tls-cert FILE      client certificate (PEM), with --tls-key: for a kvtierd\n" \
	"                       run with --tls-verify-client\n"                            \
	"  --tls-key FILE       its private key (PEM)\n"                                   \
	"  --tls-server-name N  the name (or address) the server's certificate must\n"     \
	"                       carry (default: ADDR's host)\n"

/* Take one TLS option (c from getopt_long): 1 taken, 0 not one of them. */
int cli_tls_opt(struct cli_tls *t, int c, const char *arg);
/* The remote tier's options for t, in kv (at most 5 pairs): their count
 * (0 without TLS). */
unsigned cli_tls_kv(const struct cli_tls *t, const char *kv[5][2]);
/* drain: the client context (NULL without TLS); on failure *fail is set
 * and the reason printed as "kvtier CMD: ...". */
SSL_CTX *cli_tls_ctx(const char *cmd, const struct cli_tls *t, bool *fail);
/*
 * After a connection to addr (HOST:PORT) failed: what TLS has to do with
 * it, as one line in why (empty: nothing, or unknown).  Probes addr once
 * with a TLS handshake (a few seconds at most): a TLS server reached
 * without --tls, a plain one with --tls, a certificate that does not
 * verify (against t's CA and name) or a client certificate the server
 * wanted.  Any thread.
 */
void cli_tls_diagnose(const char *addr, const struct cli_tls *t, char *why, size_t len);

#endif

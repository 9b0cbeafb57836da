/*
 * members.h - kvtierd's view of the cluster: the member list it serves to
 * engines (STATS "cluster.*"), from a static --members list or from etcd
 * (doc/members.md).
 *
 * memberlist.c has the lists and their parsers: pure, so the fuzzer
 * (tests/fuzz/fuzz_members.c) runs them on any bytes; members.c has the
 * etcd thread and the server's cluster state.
 */
#ifndef KVTD_MEMBERS_H
#define KVTD_MEMBERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVTD_MEMBER_ADDR_MAX 255u  /* "HOST:PORT" bytes */
#define KVTD_MEMBERS_MAX 4096u     /* members a list may hold */
/* Largest weight: 4 EiB, so that every weight survives JSON's (and
 * jansson's) signed 64-bit integers (fuzz_members found 2^63 + x). */
#define KVTD_MEMBER_WEIGHT_MAX (1ull << 62)
#define KVTD_ETCD_PREFIX "/kvtier/members/"
#define KVTD_ETCD_TTL_S 10u        /* --etcd-ttl default */

struct kvtd_member {
	char addr[KVTD_MEMBER_ADDR_MAX + 1]; /* "HOST:PORT", NUL-terminated */
	uint64_t weight;                     /* capacity in bytes; 1..KVTD_MEMBER_WEIGHT_MAX */
};

/*
 * "HOST:PORT[=WEIGHT],..." (WEIGHT: a size, e.g. 64G; default 1) into a
 * new array sorted by addr (*out, owned by the caller, free()).  0, or
 * -EINVAL with a message in err (a duplicate, an empty entry, a bad
 * weight, a missing port), -ENOMEM.
 */
int kvtd_members_parse_static(const char *spec, struct kvtd_member **out, unsigned *n,
			      char *err, size_t err_len);

/*
 * An etcd v3 range response (the JSON gateway's body) into a new array
 * sorted by addr: each kvs[].value is base64 of {"addr": "HOST:PORT",
 * "weight": N}.  Entries that do not parse are skipped and counted in
 * *bad.  0, -EINVAL (not a range response), -ENOMEM.
 */
int kvtd_members_parse_etcd(const char *json, size_t len, struct kvtd_member **out,
			    unsigned *n, unsigned *bad);

/* The value this server registers: {"addr":..., "weight":...} as a new
 * string (free()), or NULL. */
char *kvtd_members_self_value(const char *addr, uint64_t weight);

/* "HOST:PORT" (n bytes): printable, no blanks, ',' or '=', a port of
 * 1..65535, at most KVTD_MEMBER_ADDR_MAX bytes. */
bool kvtd_member_addr_ok(const char *s, size_t n);

/* base64 (RFC 4648, padded) of n bytes: a new string (free()), or NULL. */
char *kvtd_b64_encode(const void *in, size_t n);

/* Equal lists (both sorted by addr). */
bool kvtd_members_equal(const struct kvtd_member *a, unsigned an, const struct kvtd_member *b,
			unsigned bn);

/* Where the list comes from. */
enum { KVTD_CLUSTER_NONE, KVTD_CLUSTER_STATIC, KVTD_CLUSTER_ETCD };

struct kvtd_server;

/*
 * The cluster state of a server.  The list is replaced whole under lock;
 * readers copy what they need under it.
 */
struct kvtd_cluster {
	pthread_mutex_t lock;
	struct kvtd_member *list;  /* sorted by addr; owned */
	unsigned count;
	uint64_t epoch;            /* +1 on every change of the list */
	int source;                /* KVTD_CLUSTER_* */
	bool etcd_up;              /* the last exchange with etcd worked */
	_Atomic uint64_t etcd_errors;
	_Atomic uint64_t changes;
	/* The etcd thread (members.c) */
	pthread_t thread;
	bool started;
	pthread_cond_t cond;       /* stop, with lock */
	bool stop;
	char *url;                 /* --etcd, without a trailing '/' */
	char *prefix;              /* --etcd-prefix */
	char *self_key;            /* prefix + advertised address */
	char *self_value;          /* kvtd_members_self_value */
	char *self_addr;
	unsigned ttl_s;
	int64_t lease;             /* 0: none held */
	unsigned bad_seen;         /* unparsable entries at the last read */
	bool leave;                /* lock: kvtd_cluster_leave asked (drain) */
	/* A static list (--members): the configured members; the list served
	 * is they less those out (kvtd_cluster_static_set) */
	struct kvtd_member *conf;
	unsigned conf_count;
	char *leave_self;          /* lock: the address this server left as */
};

/* Static list or etcd thread, from srv->cfg (members, etcd, advertise);
 * the TCP listener must exist.  0, or -EINVAL after logging why. */
int kvtd_cluster_start(struct kvtd_server *srv);
/* Leave the pod but keep serving (drain, repair.c): with etcd, revoke the
 * lease and from then on only read the list (which no longer names this
 * server); with a static list, serve it without this server (self).  0
 * once asked, -ENOTSUP without a pod. */
int kvtd_cluster_leave(struct kvtd_server *srv, const char *self);
/* A static list: the configured members (a new array, *n of them; NULL
 * when none or without memory). */
struct kvtd_member *kvtd_cluster_static_conf(struct kvtd_server *srv, unsigned *n);
/* A static list: serve the configured members less those with out[i]
 * (out: conf_count flags, in the configured order) and less this server
 * once it left; a change bumps the epoch (engines and the repair follow). */
void kvtd_cluster_static_set(struct kvtd_server *srv, const bool *out);
/* Stop the thread, revoke the lease (so the others see this server leave
 * at once), free everything. */
void kvtd_cluster_stop(struct kvtd_server *srv);

#endif

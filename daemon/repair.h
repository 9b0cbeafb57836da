/*
 * repair.h - healing the pod (repair.c, doc/cluster.md "Healing"):
 * re-replication of the groups this server holds after the member list
 * changed.
 */
#ifndef KVTD_REPAIR_H
#define KVTD_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "kvtier.h"

struct kvtd_server;

/* The repair thread, when the server is in a pod (--members or --etcd):
 * after kvtd_cluster_start.  0 or -errno. */
int kvtd_repair_start(struct kvtd_server *srv);
/* Stop and free (before the store closes). */
void kvtd_repair_stop(struct kvtd_server *srv);
/* A PLACED put of (ns, key) completed here (stored or present): remember
 * its anchor and copies; forward (a PROTO_IF_FORWARD put stored here):
 * queue it for the repair thread, which sends it to the other members of
 * its top `copies` at once (doc/cluster.md "Forwarded replicas"); retain
 * (the put carried PROTO_IF_RETAIN): every copy of it sent by a forward,
 * a repair or a drain carries the hint too.  Any loop. */
void kvtd_repair_note(struct kvtd_server *srv, uint32_t ns, uint32_t group,
		      const struct kvt_key *key, uint64_t anchor, uint32_t copies, uint64_t len,
		      bool forward, bool retain);
/* A GET of (ns, key) hit here: its heat (what a drain hands over first
 * when it cannot hand over everything).  Any loop. */
void kvtd_repair_touch(struct kvtd_server *srv, uint32_t ns, const struct kvt_key *key);
/* A DELETE of (ns, key) reached this server (removed or not): a tombstone
 * for a minute, so that a repair copy in flight does not resurrect it.
 * group: the quota group of the tenant it counts in (0: none; note too;
 * repair.c "A tenant's share"). */
void kvtd_repair_forget(struct kvtd_server *srv, uint32_t ns, uint32_t group,
			const struct kvt_key *key);
/* A CLEAR of namespace ns (KVT_NS_ALL: of tenant group's namespaces, or
 * with group 0 of everything) ran here: repair copies into it are refused
 * for a minute. */
void kvtd_repair_cleared(struct kvtd_server *srv, uint32_t ns, uint32_t group);
/* Must a REPAIR put of (ns, key), sent by a connection of tenant group's,
 * be refused (-ECANCELED)?  Any loop. */
bool kvtd_repair_refused(struct kvtd_server *srv, uint32_t ns, uint32_t group,
			 const struct kvt_key *key);
/* Drain (PROTO_OP_DRAIN, kvtier drain): the repair thread hands what this
 * server holds over and leaves the pod, then exits if asked.  0 (started),
 * -ENOTSUP (not in an etcd pod), -EALREADY (a drain runs).  Any thread. */
int kvtd_repair_drain(struct kvtd_server *srv, bool exit_after);
/* repair.* statistics. */
void kvtd_repair_stats(struct kvtd_server *srv,
		       void (*fn)(void *ctx, const char *name, uint64_t value), void *ctx);

#endif

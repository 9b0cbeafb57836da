/*
 * test_remote_rule.c - the remote tier's pool and striping rule
 * (remote_rule_*, remote.c; doc/remote.md "Connections, batching,
 * pipelining"): each choice the documentation names, at its edges.
 */
#include <stdio.h>

#include "remote.h"
#include "t.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)

int main(void)
{
	/* Pool: remote.conns until the mean value reaches 512 KiB, then
	 * remote.conns_max; never below remote.conns. */
	T_EQ_U64(remote_rule_conns(2, 4, 0), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 256 * KIB), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 512 * KIB - 1), 2);
	T_EQ_U64(remote_rule_conns(2, 4, 512 * KIB), 4);
	T_EQ_U64(remote_rule_conns(2, 4, MIB), 4);
	T_EQ_U64(remote_rule_conns(2, 4, 2 * MIB), 4);
	T_EQ_U64(remote_rule_conns(1, 4, 2 * MIB), 4);
	T_EQ_U64(remote_rule_conns(2, 2, 2 * MIB), 2);   /* a fixed pool */
	T_EQ_U64(remote_rule_conns(8, 4, 2 * MIB), 8);   /* conns_max below conns */
	T_EQ_U64(remote_rule_conns(2, 0, 2 * MIB), 2);   /* a config without it */

	/* GET frames: about 4 MiB of values. */
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 2), 2);
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 4), 2);
	T_EQ_U64(remote_rule_get_items(256 * KIB, 64, 2), 16);
	T_EQ_U64(remote_rule_get_items(64 * KIB, 64, 2), 64);
	T_EQ_U64(remote_rule_get_items(16 * KIB, 64, 2), 64);
	T_EQ_U64(remote_rule_get_items(16 * KIB, 32, 2), 32);  /* remote.batch caps it */
	T_EQ_U64(remote_rule_get_items(8 * MIB, 64, 2), 1);    /* at least one */
	T_EQ_U64(remote_rule_get_items(0, 64, 2), 64);         /* mean not known yet */
	T_EQ_U64(remote_rule_get_items(2 * MIB, 64, 1), 64);   /* one connection */

	/* PUT frames: 4 MiB of values with a pool, 256 MiB with one connection. */
	T_EQ_U64(remote_rule_put_bytes(2), 4 * MIB);
	T_EQ_U64(remote_rule_put_bytes(4), 4 * MIB);
	T_EQ_U64(remote_rule_put_bytes(1), 256 * MIB);
	printf("test_remote_rule: ok\n");
	return 0;
}

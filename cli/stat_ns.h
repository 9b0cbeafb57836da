/*
 * stat_ns.h - kvtier stat's per-namespace table and its --json output
 * (stat_ns.c), over the statistics a kvtierd's STATS answered.
 */
#ifndef KVT_CLI_STAT_NS_H
#define KVT_CLI_STAT_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One statistic as STATS answered it: str NULL for a number. */
struct stat_ent {
	char *name, *str;
	uint64_t value;
};

/* b bytes in powers of 1024, one decimal past bytes, into out: "512 B",
 * "1.5 MiB", or compact (the namespace table's columns) "512B", "1.5M". */
void stat_fmt_bytes(uint64_t b, bool compact, char *out, size_t cap);
/* The "ns.<id>.*" rows as a table on stdout (nothing if there are none). */
void stat_ns_print(const struct stat_ent *v, size_t n);
/* Every statistic as one JSON object on stdout: {"server", "scope",
 * "stats": {name: number or text}, "namespaces": [{row}]}.  0, or -1 if
 * out of memory. */
int stat_json_print(const char *addr, const char *scope, const struct stat_ent *v, size_t n);

#endif

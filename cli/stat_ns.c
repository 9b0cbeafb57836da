/*
 * stat_ns.c - kvtier stat's per-namespace view: the library's
 * "ns.<id>.*" statistics (doc/stats.md "ns"), as a kvtierd reports them
 * in STATS, gathered into rows -- one per namespace counted on its own,
 * and "other" for those past the server's stats.namespaces -- and printed
 * as a table, or with every other statistic as JSON (--json); and the
 * byte counts kvtier stat prints (stat_fmt_bytes, admin.c's rows too).
 */
#include "stat_ns.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *const ns_fields[] = {
	"lookups", "lookup_keys", "lookup_hits", "gets", "hits_dram", "hits_ssd", "hits_remote",
	"hits_shared", "misses", "get_errors", "puts", "put_bytes", "dram_bytes", "dram_blocks",
	"evicted", "evicted_bytes", "evicted_unread", "evicted_unread_bytes",
};
#define NS_FIELDS (sizeof(ns_fields) / sizeof(ns_fields[0]))
enum { F_LOOKUP_KEYS = 1, F_LOOKUP_HITS = 2, F_GETS = 3, F_HITS = 4, F_MISSES = 8, F_PUTS = 10,
       F_DRAM_BYTES = 12, F_EVICTED = 14, F_EVICTED_BYTES = 15, F_UNREAD_BYTES = 17 };

struct ns_row {
	char id[16];
	const char *digest, *model, *tenant;
	uint64_t v[NS_FIELDS];
};

struct ns_rows {
	struct ns_row *r;
	size_t n, cap;
};

/* Gather the rows; "other" last.  0 or -1 (memory). */
static int ns_collect(const struct stat_ent *v, size_t n, struct ns_rows *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		const char *row, *f;
		size_t rl, k;
		if (strncmp(v[i].name, "ns.", 3) != 0 || !(f = strchr(v[i].name + 3, '.')))
			continue;
		row = v[i].name + 3;
		rl = (size_t)(f - row);
		f++;
		if (rl == 0 || rl >= sizeof(out->r[0].id))
			continue;
		for (k = 0; k < out->n; k++)
			if (strlen(out->r[k].id) == rl && memcmp(out->r[k].id, row, rl) == 0)
				break;
		if (k == out->n) {
			if (out->n == out->cap) {
				size_t cap = out->cap ? out->cap * 2 : 16;
				struct ns_row *r = realloc(out->r, cap * sizeof(*r));
				if (!r)
					return -1;
				out->r = r;
				out->cap = cap;
			}
			memset(&out->r[k], 0, sizeof(out->r[k]));
			memcpy(out->r[k].id, row, rl);
			out->n++;
		}
		if (v[i].str) {
			if (strcmp(f, "digest") == 0)
				out->r[k].digest = v[i].str;
			else if (strcmp(f, "model") == 0)
				out->r[k].model = v[i].str;
			else if (strcmp(f, "tenant") == 0)
				out->r[k].tenant = v[i].str;
			continue;
		}
		for (size_t j = 0; j < NS_FIELDS; j++)
			if (strcmp(f, ns_fields[j]) == 0)
				out->r[k].v[j] = v[i].value;
	}
	return 0;
}

static void ns_pct(char *out, size_t cap, uint64_t part, uint64_t whole)
{
	if (whole)
		snprintf(out, cap, "%.1f%%", 100.0 * (double)part / (double)whole);
	else
		snprintf(out, cap, "-");
}

void stat_fmt_bytes(uint64_t b, bool compact, char *out, size_t cap)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double x = (double)b;
	int i = 0;
	while (x >= 1024 && i < 4) {
		x /= 1024;
		i++;
	}
	/* compact: the unit's first letter, no space */
	snprintf(out, cap, i ? "%.1f%s%.*s" : "%.0f%s%.*s", x, compact ? "" : " ", compact ? 1 : 3,
		 u[i]);
}

void stat_ns_print(const struct stat_ent *v, size_t n)
{
	struct ns_rows rows;

	if (ns_collect(v, n, &rows) < 0 || rows.n == 0) {
		free(rows.r);
		return;
	}
	/* KEYS%: leading keys lookups found; HIT%: gets served (any tier);
	 * UNREAD%: of the bytes DRAM evicted, those never read there. */
	printf("\n%-16s %-5s %-20s %6s %9s %6s %9s %9s %9s %9s %8s %8s %8s %7s\n", "NAMESPACE",
	       "ID", "MODEL/TENANT", "KEYS%", "GETS", "HIT%", "DRAM", "SSD", "REMOTE", "SHARED",
	       "PUTS", "IN DRAM", "EVICTED", "UNREAD%");
	for (size_t i = 0; i < rows.n; i++) {
		const struct ns_row *r = &rows.r[i];
		bool other = strcmp(r->id, "other") == 0;
		char who[96], kp[16], hp[16], ub[16], db[16], eb[16];
		uint64_t hits = r->v[F_HITS] + r->v[F_HITS + 1] + r->v[F_HITS + 2] + r->v[F_HITS + 3];
		snprintf(who, sizeof(who), "%s%s%s", other ? "(the rest)" : (r->model ? r->model : "?"),
			 r->tenant && *r->tenant ? "/" : "", r->tenant ? r->tenant : "");
		ns_pct(kp, sizeof(kp), r->v[F_LOOKUP_HITS], r->v[F_LOOKUP_KEYS]);
		ns_pct(hp, sizeof(hp), hits, r->v[F_GETS]);
		ns_pct(ub, sizeof(ub), r->v[F_UNREAD_BYTES], r->v[F_EVICTED_BYTES]);
		stat_fmt_bytes(r->v[F_DRAM_BYTES], true, db, sizeof(db));
		stat_fmt_bytes(r->v[F_EVICTED_BYTES], true, eb, sizeof(eb));
		printf("%-16s %-5s %-20.20s %6s %9" PRIu64 " %6s %9" PRIu64 " %9" PRIu64 " %9" PRIu64
		       " %9" PRIu64 " %8" PRIu64 " %8s %8s %7s\n",
		       other ? "other" : (r->digest ? r->digest : "?"), other ? "-" : r->id, who, kp,
		       r->v[F_GETS], hp, r->v[F_HITS], r->v[F_HITS + 1], r->v[F_HITS + 2],
		       r->v[F_HITS + 3], r->v[F_PUTS], db, eb, ub);
	}
	free(rows.r);
}

int stat_json_print(const char *addr, const char *scope, const struct stat_ent *v, size_t n)
{
	json_t *o = json_object(), *st = json_object(), *arr = json_array();
	struct ns_rows rows = { 0 };
	int rc = -1;

	if (!o || !st || !arr || ns_collect(v, n, &rows) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		json_object_set_new(st, v[i].name, v[i].str ? json_string(v[i].str)
							  : json_integer((json_int_t)v[i].value));
	for (size_t i = 0; i < rows.n; i++) {
		const struct ns_row *r = &rows.r[i];
		json_t *row = json_object();
		if (!row)
			goto out;
		json_object_set_new(row, "id", json_string(r->id));
		if (r->digest)
			json_object_set_new(row, "namespace", json_string(r->digest));
		else
			json_object_set_new(row, "namespace", json_string("other"));
		if (r->model)
			json_object_set_new(row, "model", json_string(r->model));
		if (r->tenant)
			json_object_set_new(row, "tenant", json_string(r->tenant));
		for (size_t j = 0; j < NS_FIELDS; j++)
			json_object_set_new(row, ns_fields[j], json_integer((json_int_t)r->v[j]));
		json_array_append_new(arr, row);
	}
	json_object_set_new(o, "server", json_string(addr ? addr : ""));
	json_object_set_new(o, "scope", json_string(scope));
	json_object_set(o, "stats", st);
	json_object_set(o, "namespaces", arr);
	if (json_dumpf(o, stdout, JSON_COMPACT) == 0 && fputc('\n', stdout) != EOF)
		rc = 0;
out:
	free(rows.r);
	json_decref(o);
	json_decref(st);
	json_decref(arr);
	return rc;
}

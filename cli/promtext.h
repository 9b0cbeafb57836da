/*
 * promtext.h - a reader of the Prometheus text exposition format (version
 * 0.0.4: what kvtierd's /metrics serves, doc/metrics.md), for `kvtier top`
 * (top.c).  Pure: parses a buffer, no I/O; fuzzed (tests/fuzz/fuzz_promtext.c).
 */
#ifndef KVT_CLI_PROMTEXT_H
#define KVT_CLI_PROMTEXT_H

#include <stddef.h>

#define PT_NAME_MAX 96    /* a metric name, NUL included */
#define PT_LABELS_MAX 256 /* its labels, canonical: k="v",k="v" (escapes kept) */

struct pt_sample {
	char name[PT_NAME_MAX];
	char labels[PT_LABELS_MAX];
	double value;
};

struct pt_set {
	struct pt_sample *v; /* owned; pt_free */
	size_t n, cap;
};

/*
 * Parse len bytes of exposition text into set (appended).  Comment and
 * blank lines are skipped; a sample line is NAME[{LABELS}] VALUE
 * [TIMESTAMP].  A line that does not parse, or whose name or labels are
 * too long, is skipped and counted.  Returns the count of skipped lines
 * (>= 0), or -ENOMEM (set keeps what it had).
 */
int pt_parse(struct pt_set *set, const char *text, size_t len);

/* The value of label key in a sample's labels into out (cap bytes, escapes
 * undone); 0, or -1 if the sample has no such label. */
int pt_label(const struct pt_sample *s, const char *key, char *out, size_t cap);

/* The sum of every sample named name whose label key equals val (key NULL:
 * every sample of that name); *found counts them (may be NULL). */
double pt_sum(const struct pt_set *set, const char *name, const char *key, const char *val,
	      int *found);

void pt_free(struct pt_set *set);

#endif

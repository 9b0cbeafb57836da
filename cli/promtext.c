/*
 * promtext.c - the Prometheus text exposition reader (promtext.h).
 *
 * Lines, as the format (and kvtierd's metrics.c) writes them:
 *
 *   # HELP name text            skipped
 *   # TYPE name counter         skipped
 *   name value                  a sample
 *   name{k="v",k2="v\"2"} value [timestamp]
 *
 * value is a float in C syntax or +Inf/-Inf/NaN (strtod reads all of
 * them).  Labels are kept as written between the braces (escapes
 * included), so pt_label undoes \\, \" and \n on lookup only.  Nothing
 * here trusts the input: every copy is bounded, a bad line is skipped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "promtext.h"

static int pt_is_name(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* One line (n bytes, no '\n') into *s: 0, or -1 if it is not a sample. */
static int pt_line(const char *p, size_t n, struct pt_sample *s)
{
	const char *e = p + n, *ln;
	char num[64];
	size_t k = 0, nl;
	char *end;

	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	if (p == e || *p == '#')
		return -1;
	if (!pt_is_name(*p, 1))
		return -1;
	ln = p;
	while (p < e && pt_is_name(*p, 0))
		p++;
	nl = (size_t)(p - ln);
	if (nl >= sizeof(s->name))
		return -1;
	memcpy(s->name, ln, nl);
	s->name[nl] = 0;
	s->labels[0] = 0;
	if (p < e && *p == '{') {
		const char *lb = ++p;
		int in_str = 0;
		for (; p < e; p++) {
			if (in_str && *p == '\\') {
				if (++p == e)
					return -1;
			} else if (*p == '"') {
				in_str = !in_str;
			} else if (!in_str && *p == '}') {
				break;
			}
		}
		if (p == e || (size_t)(p - lb) >= sizeof(s->labels))
			return -1;
		memcpy(s->labels, lb, (size_t)(p - lb));
		s->labels[p - lb] = 0;
		p++;
	}
	if (p == e || (*p != ' ' && *p != '\t'))
		return -1;
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	while (p < e && *p != ' ' && *p != '\t' && k < sizeof(num) - 1)
		num[k++] = *p++;
	num[k] = 0;
	if (!k)
		return -1;
	s->value = strtod(num, &end);
	if (*end)
		return -1;
	return 0;
}

int pt_parse(struct pt_set *set, const char *text, size_t len)
{
	size_t off = 0;
	int skipped = 0;

	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		struct pt_sample s;

		if (pt_line(text + off, n, &s) == 0) {
			if (set->n == set->cap) {
				size_t cap = set->cap ? 2 * set->cap : 256;
				struct pt_sample *v = realloc(set->v, cap * sizeof(*v));
				if (!v)
					return -ENOMEM;
				set->v = v;
				set->cap = cap;
			}
			set->v[set->n++] = s;
		} else {
			const char *q = text + off;
			while (q < text + off + n && (*q == ' ' || *q == '\t'))
				q++;
			if (q < text + off + n && *q != '#')
				skipped++;
		}
		off += n + (nl != NULL);
	}
	return skipped;
}

int pt_label(const struct pt_sample *s, const char *key, char *out, size_t cap)
{
	const char *p = s->labels;
	size_t kl = strlen(key);

	if (!cap)
		return -1;
	while (*p) {
		const char *k = p;
		while (*p && *p != '=')
			p++;
		if (*p != '=' || p[1] != '"')
			return -1;
		int match = (size_t)(p - k) == kl && strncmp(k, key, kl) == 0;
		size_t o = 0;
		for (p += 2; *p && *p != '"'; p++) {
			char c = *p;
			if (c == '\\' && p[1]) {
				c = *++p == 'n' ? '\n' : *p;
			}
			if (match && o + 1 < cap)
				out[o++] = c;
		}
		if (*p != '"')
			return -1;
		p++;
		if (match) {
			out[o] = 0;
			return 0;
		}
		if (*p == ',')
			p++;
	}
	return -1;
}

double pt_sum(const struct pt_set *set, const char *name, const char *key, const char *val,
	      int *found)
{
	double sum = 0;
	char lv[PT_LABELS_MAX];
	int n = 0;

	for (size_t i = 0; i < set->n; i++) {
		if (strcmp(set->v[i].name, name) != 0)
			continue;
		if (key && (pt_label(&set->v[i], key, lv, sizeof(lv)) < 0 || strcmp(lv, val) != 0))
			continue;
		sum += set->v[i].value;
		n++;
	}
	if (found)
		*found = n;
	return sum;
}

void pt_free(struct pt_set *set)
{
	free(set->v);
	set->v = NULL;
	set->n = set->cap = 0;
}

/*
 * tprom.h - a strict reading of a Prometheus text page (exposition format
 * 0.0.4) in tests: every line "# HELP name text", "# TYPE name
 * counter|gauge|histogram" (once per family, before its samples) or a
 * sample "name{label="value",...} value" of a declared family; counters
 * end in _total; label values escape only \\, \" and \n; no series twice.
 * Fails the test at the first line that is not so.
 */
#ifndef KVT_TEST_TPROM_H
#define KVT_TEST_TPROM_H

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"

static inline size_t t_prom_name_len(const char *s)
{
	size_t n = 0;

	if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':')
		n++;
	return n;
}

/* Does sample name (nl bytes) belong to family fam of type type? */
static inline int t_prom_of(const char *name, size_t nl, const char *fam, const char *type)
{
	size_t fl = strlen(fam);

	if (nl < fl || strncmp(name, fam, fl) != 0)
		return 0;
	if (nl == fl)
		return 1;
	if (strcmp(type, "histogram") != 0)
		return 0;
	return (nl - fl == 7 && !strncmp(name + fl, "_bucket", 7)) ||
	       (nl - fl == 4 && !strncmp(name + fl, "_sum", 4)) ||
	       (nl - fl == 6 && !strncmp(name + fl, "_count", 6));
}

/* Check every line of page; the number of samples. */
static inline unsigned t_prom_check(const char *page)
{
	enum { FAMS = 1024, SERIES = 16384 };
	char (*fam)[128] = calloc(FAMS, sizeof(*fam)), (*type)[12] = calloc(FAMS, sizeof(*type));
	const char **series = calloc(SERIES, sizeof(*series));
	size_t *series_len = calloc(SERIES, sizeof(*series_len));
	unsigned nf = 0, ns = 0;

	T_ASSERT(fam && type && series && series_len);
	for (const char *p = page; *p;) {
		const char *e = strchr(p, '\n'), *q;
		size_t nl;
		int f = -1;
		if (!e)
			T_FAIL("a line without its \\n: %.80s", p);
		if (p[0] == '#') {
			int help = !strncmp(p, "# HELP ", 7);
			T_ASSERT(help || !strncmp(p, "# TYPE ", 7));
			nl = t_prom_name_len(p + 7);
			T_ASSERT(nl > 0 && nl < sizeof(fam[0]) && p[7 + nl] == ' ');
			if (!help) {
				q = p + 8 + nl;
				for (unsigned i = 0; i < nf; i++)
					if (strlen(fam[i]) == nl && !strncmp(fam[i], p + 7, nl))
						T_FAIL("two TYPE lines for %.*s", (int)nl, p + 7);
				T_ASSERT(nf < FAMS);
				memcpy(fam[nf], p + 7, nl);
				snprintf(type[nf], sizeof(type[0]), "%.*s", (int)(e - q), q);
				T_ASSERT(!strcmp(type[nf], "counter") || !strcmp(type[nf], "gauge") ||
					 !strcmp(type[nf], "histogram"));
				if (!strcmp(type[nf], "counter") &&
				    (nl < 6 || strncmp(p + 7 + nl - 6, "_total", 6)))
					T_FAIL("counter %.*s does not end in _total", (int)nl, p + 7);
				nf++;
			}
			p = e + 1;
			continue;
		}
		nl = t_prom_name_len(p);
		T_ASSERT(nl > 0);
		for (unsigned i = 0; i < nf && f < 0; i++)
			if (t_prom_of(p, nl, fam[i], type[i]))
				f = (int)i;
		if (f < 0)
			T_FAIL("sample without a TYPE before it: %.*s", (int)(e - p), p);
		q = p + nl;
		if (*q == '{') {
			q++;
			while (*q != '}') {
				size_t ln = t_prom_name_len(q);
				T_ASSERT(ln > 0 && q[ln] == '=' && q[ln + 1] == '"');
				q += ln + 2;
				while (q < e && *q != '"') {
					if (*q == '\\') {
						q++;
						T_ASSERT(*q == '\\' || *q == '"' || *q == 'n');
					}
					q++;
				}
				T_ASSERT(*q == '"');
				q++;
				if (*q == ',')
					q++;
				else
					T_ASSERT(*q == '}');
			}
			q++;
		}
		T_ASSERT(*q == ' ');
		{
			char *end;
			double v;
			errno = 0;
			v = strtod(q + 1, &end);
			T_ASSERT(end != q + 1 && end == e && errno == 0 && !isnan(v));
		}
		for (unsigned i = 0; i < ns; i++)
			if (series_len[i] == (size_t)(q - p) && !memcmp(series[i], p, series_len[i]))
				T_FAIL("a series twice: %.*s", (int)(q - p), p);
		T_ASSERT(ns < SERIES);
		series[ns] = p;
		series_len[ns++] = (size_t)(q - p);
		p = e + 1;
	}
	free(fam);
	free(type);
	free(series);
	free(series_len);
	return ns;
}

#endif

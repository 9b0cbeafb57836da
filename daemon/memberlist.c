/*
 * memberlist.c - member lists (members.h): the static --members list, etcd's
 * range answers, the value a server registers, and addresses.
 *
 * Pure: no I/O, no globals, nothing logged; fuzzed by
 * tests/fuzz/fuzz_members.c.  members.c runs the etcd thread over these.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "kvtierd.h"
#include "members.h"

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kvtd_member *)a)->addr, ((const struct kvtd_member *)b)->addr);
}

/* "HOST:PORT" with a port of 1..65535 and printable, blank-free bytes. */
bool kvtd_member_addr_ok(const char *s, size_t n)
{
	const char *colon = NULL;
	unsigned long port;
	char *end;

	if (n == 0 || n > KVTD_MEMBER_ADDR_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] <= 0x20 || s[i] > 0x7e || s[i] == ',' || s[i] == '=')
			return false;
		if (s[i] == ':')
			colon = s + i;
	}
	if (!colon || colon == s || colon + 1 == s + n)
		return false;
	for (const char *p = colon + 1; p < s + n; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	port = strtoul(colon + 1, &end, 10);
	return port >= 1 && port <= 65535 && end - (colon + 1) <= 5;
}

/* Sort, and refuse (static) or drop (etcd) duplicates: returns the count
 * left; *dups how many were dropped, the first of them copied to dup
 * (dup_len bytes; NULL: not wanted). */
static unsigned members_sort(struct kvtd_member *v, unsigned n, unsigned *dups, char *dup,
			     size_t dup_len)
{
	unsigned k = 0;

	*dups = 0;
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), member_cmp);
	for (unsigned i = 1; i < n; i++) {
		if (strcmp(v[i].addr, v[k].addr) == 0) {
			if (!(*dups)++ && dup)
				snprintf(dup, dup_len, "%s", v[i].addr);
			continue;
		}
		v[++k] = v[i];
	}
	return k + 1;
}

int kvtd_members_parse_static(const char *spec, struct kvtd_member **out, unsigned *n,
			      char *err, size_t err_len)
{
	struct kvtd_member *v;
	unsigned count = 1, k = 0, dups;
	const char *p = spec;
	char dup[KVTD_MEMBER_ADDR_MAX + 1];

	*out = NULL;
	*n = 0;
	for (const char *q = spec; *q; q++)
		if (*q == ',')
			count++;
	if (count > KVTD_MEMBERS_MAX) {
		snprintf(err, err_len, "more than %u members", KVTD_MEMBERS_MAX);
		return -EINVAL;
	}
	v = calloc(count, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (;;) {
		const char *e = strchr(p, ','), *eq;
		size_t len;

		if (!e)
			e = p + strlen(p);
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		len = (size_t)(e - p);
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		eq = memchr(p, '=', len);
		v[k].weight = 1;
		if (eq) {
			char w[32];
			size_t wl = len - (size_t)(eq - p) - 1;
			if (wl == 0 || wl >= sizeof(w)) {
				snprintf(err, err_len, "member %u: want HOST:PORT=WEIGHT", k + 1);
				goto bad;
			}
			memcpy(w, eq + 1, wl);
			w[wl] = 0;
			if (kvtd_parse_size(w, &v[k].weight) < 0 || v[k].weight == 0 ||
			    v[k].weight > KVTD_MEMBER_WEIGHT_MAX) {
				snprintf(err, err_len,
					 "member %u: '%s' is not a weight (e.g. 64G; at most 4E)",
					 k + 1, w);
				goto bad;
			}
			len = (size_t)(eq - p);
		}
		if (!kvtd_member_addr_ok(p, len)) {
			snprintf(err, err_len, "member %u: '%.*s' is not HOST:PORT", k + 1,
				 (int)(len < 300 ? len : 300), p);
			goto bad;
		}
		memcpy(v[k].addr, p, len);
		v[k].addr[len] = 0;
		k++;
		if (!*e)
			break;
		p = e + 1;
	}
	k = members_sort(v, k, &dups, dup, sizeof(dup));
	if (dups) {
		snprintf(err, err_len, "member %s is listed twice", dup);
		goto bad;
	}
	*out = v;
	*n = k;
	return 0;
bad:
	free(v);
	return -EINVAL;
}

/* base64 (RFC 4648, padded) of n bytes: a new string, or NULL. */
char *kvtd_b64_encode(const void *in, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	return out;
}

/* Decode padded base64 of at most max bytes into out; the length, or -1. */
static int b64_decode(const char *in, size_t n, unsigned char *out, size_t max)
{
	int len, pad = 0;

	if (n == 0)
		return 0;
	if (n % 4 || n / 4 * 3 > max)
		return -1;
	len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
	if (len < 0)
		return -1;
	if (in[n - 1] == '=')
		pad++;
	if (in[n - 2] == '=')
		pad++;
	return len - pad;
}

/* {"addr": "HOST:PORT", "weight": N} (weight optional: 1). */
static bool member_from_value(const unsigned char *buf, size_t len, struct kvtd_member *m)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
	json_t *a, *w;
	bool ok = false;

	if (!o || !json_is_object(o))
		goto out;
	a = json_object_get(o, "addr");
	w = json_object_get(o, "weight");
	if (!json_is_string(a) || !kvtd_member_addr_ok(json_string_value(a), json_string_length(a)))
		goto out;
	if (w && (!json_is_integer(w) || json_integer_value(w) < 1 ||
		  (uint64_t)json_integer_value(w) > KVTD_MEMBER_WEIGHT_MAX))
		goto out;
	memcpy(m->addr, json_string_value(a), json_string_length(a));
	m->addr[json_string_length(a)] = 0;
	m->weight = w ? (uint64_t)json_integer_value(w) : 1;
	ok = true;
out:
	json_decref(o);
	return ok;
}

int kvtd_members_parse_etcd(const char *json, size_t len, struct kvtd_member **out,
			    unsigned *n, unsigned *bad)
{
	json_error_t je;
	json_t *o = json_loadb(json, len, 0, &je), *kvs;
	struct kvtd_member *v = NULL;
	unsigned k = 0, dups;
	size_t count;
	int rc = -EINVAL;

	*out = NULL;
	*n = 0;
	*bad = 0;
	if (!o || !json_is_object(o) || !json_is_object(json_object_get(o, "header")))
		goto out;
	kvs = json_object_get(o, "kvs");
	if (kvs && !json_is_array(kvs))
		goto out;
	count = kvs ? json_array_size(kvs) : 0;
	if (count > KVTD_MEMBERS_MAX) {
		*bad = (unsigned)(count - KVTD_MEMBERS_MAX);
		count = KVTD_MEMBERS_MAX;
	}
	rc = -ENOMEM;
	if (count && !(v = calloc(count, sizeof(*v))))
		goto out;
	for (size_t i = 0; i < count; i++) {
		json_t *val = json_object_get(json_array_get(kvs, i), "value");
		unsigned char buf[1024];
		int dl;
		if (!json_is_string(val) ||
		    (dl = b64_decode(json_string_value(val), json_string_length(val), buf,
				     sizeof(buf))) <= 0 ||
		    !member_from_value(buf, (size_t)dl, &v[k])) {
			(*bad)++;
			continue;
		}
		k++;
	}
	k = members_sort(v, k, &dups, NULL, 0);
	*bad += dups;
	*out = v;
	*n = k;
	v = NULL;
	rc = 0;
out:
	free(v);
	json_decref(o);
	return rc;
}

char *kvtd_members_self_value(const char *addr, uint64_t weight)
{
	json_t *o = json_pack("{s:s, s:I, s:s}", "addr", addr, "weight", (json_int_t)weight,
			      "version", KVTD_VERSION);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

bool kvtd_members_equal(const struct kvtd_member *a, unsigned an, const struct kvtd_member *b,
			unsigned bn)
{
	if (an != bn)
		return false;
	for (unsigned i = 0; i < an; i++)
		if (strcmp(a[i].addr, b[i].addr) || a[i].weight != b[i].weight)
			return false;
	return true;
}

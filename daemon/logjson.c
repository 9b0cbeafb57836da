/*
 * logjson.c - kvtierd's --log-format json: one log event as one JSON
 * object on one line, for log shippers (Loki, Elasticsearch, journald's
 * JSON export) that would otherwise parse logfmt.
 *
 * log.c formats every event's fields as logfmt (key=value key="a b" ...);
 * this file turns that string back into pairs and jansson writes the
 * object.  The field names are stable: "ts" (RFC 3339, UTC, microseconds),
 * "level" (error|warn|info|debug), "msg", "src" ("lib" for the library's
 * messages, absent otherwise), then the event's own fields in order.  A
 * value that is a decimal integer of at most 18 digits becomes a JSON
 * number, a bare key (no '=') true, anything else a string; a field named
 * like one of the four fixed keys gets a leading '_'.  logfmt's \" \\ and
 * \n escapes are decoded, \xNN (bytes outside printable ASCII) kept as
 * text; bytes that are not UTF-8 in an unquoted value become \xNN text and
 * in a key '_' (fuzz_logjson found the key case), so jansson always gets
 * valid UTF-8.
 *
 * Pure: no I/O, no global state; the parser is fuzzed
 * (tests/fuzz/fuzz_logjson.c) on any bytes.  Any thread.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"

/* Is s (n bytes) a decimal integer small enough for an int64? */
static bool logjson_is_int(const char *s, size_t n)
{
	size_t i = s[0] == '-' ? 1 : 0;

	if (n == i || n - i > 18)
		return false;
	for (; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* A JSON string of s (n bytes); bytes that are not UTF-8 (log.c quotes
 * them as \xNN, but a bare value is not quoted) become "\xNN" text. */
static json_t *logjson_str(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);
	char *t;

	if (v || !(t = malloc(4 * n + 1)))
		return v;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x80 || c == 0)
			m += (size_t)snprintf(t + m, 5, "\\x%02x", c);
		else
			t[m++] = (char)c;
	}
	v = json_stringn(t, m);
	free(t);
	return v;
}

static int logjson_set(json_t *o, const char *k, size_t kn, json_t *v)
{
	char key[80];

	if (!v)
		return -1;
	if (kn > sizeof(key) - 2)
		kn = sizeof(key) - 2;
	/* Keys are names in the code; anything else is not one: '_'. */
	for (size_t i = 0; i < kn; i++)
		key[i] = k[i] > ' ' && k[i] < 0x7f ? k[i] : '_';
	key[kn] = 0;
	if (!strcmp(key, "ts") || !strcmp(key, "level") || !strcmp(key, "msg") ||
	    !strcmp(key, "src")) {
		memmove(key + 1, key, kn + 1);
		key[0] = '_';
	}
	return json_object_set_new_nocheck(o, key, v); /* ASCII: see above */
}

/* Append the logfmt fields in f to o.  0, or -1 (out of memory). */
static int logjson_fields(json_t *o, const char *f)
{
	char *val = malloc(strlen(f) + 1);
	int rc = 0;

	if (!val)
		return -1;
	while (*f && rc == 0) {
		const char *k, *ke;
		size_t vn = 0;

		while (*f == ' ')
			f++;
		if (!*f)
			break;
		k = f;
		while (*f && *f != '=' && *f != ' ')
			f++;
		ke = f;
		if (ke == k) { /* "=..." without a key: skip the token */
			while (*f && *f != ' ')
				f++;
			continue;
		}
		if (*f != '=') {
			rc = logjson_set(o, k, (size_t)(ke - k), json_true());
			continue;
		}
		f++;
		if (*f == '"') {
			for (f++; *f && *f != '"'; f++) {
				if (*f == '\\' && (f[1] == '"' || f[1] == '\\')) {
					val[vn++] = *++f;
				} else if (*f == '\\' && f[1] == 'n') {
					val[vn++] = '\n';
					f++;
				} else {
					val[vn++] = *f;
				}
			}
			if (*f == '"')
				f++;
			rc = logjson_set(o, k, (size_t)(ke - k), logjson_str(val, vn));
		} else {
			const char *v = f;
			while (*f && *f != ' ')
				f++;
			vn = (size_t)(f - v);
			if (logjson_is_int(v, vn))
				rc = logjson_set(o, k, (size_t)(ke - k),
						 json_integer(strtoll(v, NULL, 10)));
			else
				rc = logjson_set(o, k, (size_t)(ke - k), logjson_str(v, vn));
		}
	}
	free(val);
	return rc;
}

char *kvtd_log_json(const char *ts, const char *level, const char *src, const char *msg,
		    const char *fields)
{
	json_t *o = json_object(), *m;
	char *out = NULL;

	if (!o)
		return NULL;
	m = logjson_str(msg, strlen(msg));
	/* json_object_set_new takes the value even when it fails. */
	if (json_object_set_new(o, "ts", json_string(ts)) < 0 ||
	    json_object_set_new(o, "level", json_string(level)) < 0 ||
	    json_object_set_new(o, "msg", m) < 0)
		goto out;
	if (src && json_object_set_new(o, "src", json_string(src)) < 0)
		goto out;
	if (fields && logjson_fields(o, fields) < 0)
		goto out;
	out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
out:
	json_decref(o);
	return out;
}

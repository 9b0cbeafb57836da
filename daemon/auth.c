/*
 * auth.c - who a connection is: the tenants file, the HMAC check of AUTH,
 * and reading canonical namespace descriptors (whose tenant line says
 * whose a namespace is).
 *
 * Tenants file (--tenants FILE): one tenant per line,
 *
 *   # comment
 *   name  secret  role        role: tenant | admin
 *
 * name is 1..64 bytes of 0x21..0x7e and not "-"; secret is 16..4096 bytes
 * of 0x21..0x7e (used as the HMAC key as written); the file must be
 * readable by its owner only.  Without a file, AUTH_NONE is offered and
 * every connection is tenant "default" (kvtierd.c logs that loudly).
 *
 * Threads and locks: the table in use is replaced by the main thread on
 * SIGHUP (kvtd_auth_install) and read by the loops on AUTH; auth_lock
 * guards the pointer, and a loop copies the one secret it needs out under
 * the lock, so a table is freed only by the install that replaces it.
 * Secrets are wiped from memory when freed or used.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kvtierd.h"

struct kvtd_tenant {
	char name[PROTO_TENANT_MAX + 1];
	uint32_t name_len;
	uint8_t *secret;
	uint32_t secret_len;
	uint32_t role;
};

struct kvtd_tenants {
	struct kvtd_tenant *v;
	unsigned count;
};

#define AUTH_FILE_MAX (16u << 20)  /* a tenants file larger than this is refused */

static pthread_mutex_t auth_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvtd_tenants *auth_table; /* guarded by auth_lock */
static _Atomic bool auth_on;
static uint8_t auth_dummy[PROTO_SECRET_MIN]; /* for unknown tenants: same cost */

void kvtd_tenants_free(struct kvtd_tenants *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->count; i++) {
		if (t->v[i].secret) {
			OPENSSL_cleanse(t->v[i].secret, t->v[i].secret_len);
			free(t->v[i].secret);
		}
	}
	free(t->v);
	free(t);
}

unsigned kvtd_tenants_count(const struct kvtd_tenants *t)
{
	return t ? t->count : 0;
}

static bool auth_token_ok(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

/* Next whitespace-separated word of line[*pos, len). */
static bool auth_word(const char *line, size_t len, size_t *pos, const char **w, size_t *wl)
{
	size_t p = *pos;
	while (p < len && (line[p] == ' ' || line[p] == '\t' || line[p] == '\r'))
		p++;
	if (p >= len)
		return false;
	*w = line + p;
	while (p < len && line[p] != ' ' && line[p] != '\t' && line[p] != '\r')
		p++;
	*wl = (size_t)(line + p - *w);
	*pos = p;
	return true;
}

static int auth_parse_line(struct kvtd_tenants *t, const char *line, size_t len, unsigned lineno,
			   char *errbuf, size_t errlen)
{
	const char *w[4];
	size_t wl[4], pos = 0;
	unsigned n = 0;
	struct kvtd_tenant *e;

	while (n < 4 && auth_word(line, len, &pos, &w[n], &wl[n]))
		n++;
	if (n == 0 || w[0][0] == '#')
		return 0;
	if (n != 3) {
		snprintf(errbuf, errlen, "line %u: want \"name secret role\"", lineno);
		return -EINVAL;
	}
	if (wl[0] < 1 || wl[0] > PROTO_TENANT_MAX || !auth_token_ok(w[0], wl[0]) ||
	    (wl[0] == 1 && w[0][0] == '-')) {
		snprintf(errbuf, errlen, "line %u: tenant name must be 1..%u printable bytes, not \"-\"",
			 lineno, PROTO_TENANT_MAX);
		return -EINVAL;
	}
	if (wl[1] < PROTO_SECRET_MIN || wl[1] > PROTO_SECRET_MAX) {
		snprintf(errbuf, errlen, "line %u: secret must be %u..%u bytes", lineno,
			 PROTO_SECRET_MIN, PROTO_SECRET_MAX);
		return -EINVAL;
	}
	for (unsigned i = 0; i < t->count; i++) {
		if (t->v[i].name_len == wl[0] && memcmp(t->v[i].name, w[0], wl[0]) == 0) {
			snprintf(errbuf, errlen, "line %u: tenant \"%.*s\" listed twice", lineno,
				 (int)wl[0], w[0]);
			return -EINVAL;
		}
	}
	e = realloc(t->v, (t->count + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	t->v = e;
	e = &t->v[t->count];
	memset(e, 0, sizeof(*e));
	memcpy(e->name, w[0], wl[0]);
	e->name_len = (uint32_t)wl[0];
	if (wl[2] == 6 && memcmp(w[2], "tenant", 6) == 0) {
		e->role = PROTO_ROLE_TENANT;
	} else if (wl[2] == 5 && memcmp(w[2], "admin", 5) == 0) {
		e->role = PROTO_ROLE_ADMIN;
	} else {
		snprintf(errbuf, errlen, "line %u: role must be \"tenant\" or \"admin\"", lineno);
		return -EINVAL;
	}
	e->secret = malloc(wl[1]);
	if (!e->secret)
		return -ENOMEM;
	memcpy(e->secret, w[1], wl[1]);
	e->secret_len = (uint32_t)wl[1];
	t->count++;
	return 0;
}

int kvtd_tenants_load(const char *path, struct kvtd_tenants **out, char *errbuf, size_t errlen)
{
	struct kvtd_tenants *t = NULL;
	struct stat st;
	char *text = NULL;
	size_t got = 0;
	unsigned lineno = 0;
	int fd, ret;

	errbuf[0] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		snprintf(errbuf, errlen, "cannot open: %s", strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(errbuf, errlen, "cannot stat: %s", strerror(-ret));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(errbuf, errlen, "not a regular file");
		goto fail;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		ret = -EPERM;
		snprintf(errbuf, errlen,
			 "holds secrets but is accessible by group or others (mode %04o): chmod 600 it",
			 (unsigned)(st.st_mode & 07777));
		goto fail;
	}
	if ((uint64_t)st.st_size > AUTH_FILE_MAX) {
		ret = -EFBIG;
		snprintf(errbuf, errlen, "larger than %u bytes", AUTH_FILE_MAX);
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	t = calloc(1, sizeof(*t));
	if (!text || !t) {
		ret = -ENOMEM;
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			snprintf(errbuf, errlen, "read: %s", strerror(-ret));
			goto fail;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	for (size_t p = 0; p < got;) {
		const char *nl = memchr(text + p, '\n', got - p);
		size_t end = nl ? (size_t)(nl - text) : got;
		lineno++;
		ret = auth_parse_line(t, text + p, end - p, lineno, errbuf, errlen);
		if (ret < 0)
			goto fail;
		p = end + 1;
	}
	OPENSSL_cleanse(text, got);
	free(text);
	close(fd);
	*out = t;
	return 0;
fail:
	if (text) {
		OPENSSL_cleanse(text, got);
		free(text);
	}
	kvtd_tenants_free(t);
	close(fd);
	if (!errbuf[0])
		snprintf(errbuf, errlen, "%s", strerror(-ret));
	return ret;
}

void kvtd_auth_install(struct kvtd_tenants *t)
{
	struct kvtd_tenants *old;
	static bool dummy_done;

	if (!dummy_done) {
		/* Unknown tenants are checked against a random key: same work,
		 * never a match worth anything. */
		if (getrandom(auth_dummy, sizeof(auth_dummy), 0) != (ssize_t)sizeof(auth_dummy))
			memset(auth_dummy, 0x5a, sizeof(auth_dummy));
		dummy_done = true;
	}
	pthread_mutex_lock(&auth_lock);
	old = auth_table;
	auth_table = t;
	pthread_mutex_unlock(&auth_lock);
	atomic_store(&auth_on, t != NULL);
	kvtd_tenants_free(old);
}

bool kvtd_auth_enabled(void)
{
	return atomic_load(&auth_on);
}

void kvtd_auth_shutdown(void)
{
	pthread_mutex_lock(&auth_lock);
	struct kvtd_tenants *t = auth_table;
	auth_table = NULL;
	pthread_mutex_unlock(&auth_lock);
	kvtd_tenants_free(t);
}

int kvtd_auth_check(const char *tenant, uint32_t tenant_len,
		    const uint8_t server_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_proof[PROTO_PROOF_LEN],
		    uint8_t server_proof[PROTO_PROOF_LEN], uint32_t *role)
{
	uint8_t secret[PROTO_SECRET_MAX];
	uint32_t secret_len = 0, r = PROTO_ROLE_TENANT;
	bool known = false;
	int ret;

	pthread_mutex_lock(&auth_lock);
	if (auth_table) {
		for (unsigned i = 0; i < auth_table->count; i++) {
			const struct kvtd_tenant *e = &auth_table->v[i];
			if (e->name_len == tenant_len && memcmp(e->name, tenant, tenant_len) == 0) {
				memcpy(secret, e->secret, e->secret_len);
				secret_len = e->secret_len;
				r = e->role;
				known = true;
				break;
			}
		}
	}
	pthread_mutex_unlock(&auth_lock);
	if (!known) {
		memcpy(secret, auth_dummy, sizeof(auth_dummy));
		secret_len = sizeof(auth_dummy);
	}
	ret = proto_auth_check(PROTO_PROOF_CLIENT, secret, secret_len, server_nonce, client_nonce,
			       tenant, tenant_len, client_proof);
	if (ret == 0 && known)
		ret = proto_auth_proof(PROTO_PROOF_SERVER, secret, secret_len, server_nonce,
				       client_nonce, tenant, tenant_len, server_proof);
	else if (ret == 0 || ret == PROTO_EAUTH)
		ret = PROTO_EAUTH;
	OPENSSL_cleanse(secret, secret_len);
	if (ret == 0)
		*role = r;
	return ret < 0 ? (ret == -ENOMEM ? ret : PROTO_EAUTH) : 0;
}

/* ------------------------------------------------------------------------
 * Canonical descriptor text (doc/keys.md), read back
 */

/* "name=" line at text[*pos]: value into *v (NUL-terminated in store). */
static int auth_canon_line(const char *text, size_t len, size_t *pos, const char *name,
			   char *store, const char **v, size_t *vlen)
{
	size_t nl = strlen(name), p = *pos, start;

	if (len - p < nl + 1 || memcmp(text + p, name, nl) != 0 || text[p + nl] != '=')
		return KVT_EDESC;
	start = p + nl + 1;
	p = start;
	while (p < len && text[p] != '\n')
		p++;
	if (p >= len || p == start)
		return KVT_EDESC;
	memcpy(store + start, text + start, p - start);
	store[p] = 0;
	*v = store + start;
	*vlen = p - start;
	*pos = p + 1;
	return 0;
}

/* A u32 in canonical form: digits, no sign, no leading zero. */
static int auth_canon_u32(const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;
	if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
		return KVT_EDESC;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return KVT_EDESC;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return KVT_EDESC;
	*out = (uint32_t)v;
	return 0;
}

/* "r/s" (r may be "*" if star_ok). */
static int auth_canon_pair(const char *s, size_t len, bool star_ok, bool *star, uint32_t *r,
			   uint32_t *sz)
{
	const char *slash = memchr(s, '/', len);
	if (!slash)
		return KVT_EDESC;
	*star = false;
	if (star_ok && slash - s == 1 && s[0] == '*') {
		*star = true;
		*r = 0;
	} else if (auth_canon_u32(s, (size_t)(slash - s), r) < 0) {
		return KVT_EDESC;
	}
	return auth_canon_u32(slash + 1, len - (size_t)(slash - s) - 1, sz);
}

int kvtd_canon_parse(const char *text, size_t len, struct kvt_ns_desc *d, char *store)
{
	static const char head[] = "kvtier-ns 1\n";
	const char *v;
	size_t vl, pos = sizeof(head) - 1;
	bool star;
	int ret;

	memset(d, 0, sizeof(*d));
	if (len < pos || memcmp(text, head, pos) != 0)
		return KVT_EDESC;
#define CANON(name) \
	do { if ((ret = auth_canon_line(text, len, &pos, name, store, &v, &vl)) < 0) return ret; } while (0)
	CANON("model");
	d->model = v;
	CANON("config");
	d->config_hash = vl == 1 && v[0] == '-' ? NULL : v;
	CANON("dtype");
	d->dtype = v;
	CANON("kv_quant");
	d->kv_quant = vl == 1 && v[0] == '-' ? NULL : v;
	CANON("layout");
	d->layout = v;
	CANON("block_tokens");
	if (auth_canon_u32(v, vl, &d->block_tokens) < 0)
		return KVT_EDESC;
	CANON("tp");
	if (auth_canon_pair(v, vl, true, &star, &d->tp_rank, &d->tp_size) < 0)
		return KVT_EDESC;
	if (star)
		d->flags |= KVT_NS_RANK_AGNOSTIC;
	CANON("pp");
	if (auth_canon_pair(v, vl, false, &star, &d->pp_rank, &d->pp_size) < 0)
		return KVT_EDESC;
	CANON("tenant");
	d->tenant = vl == 1 && v[0] == '-' ? NULL : v;
#undef CANON
	return pos == len ? 0 : KVT_EDESC;
}

int kvtd_canon_tenant(const char *text, size_t len, const char **tenant)
{
	static const char key[] = "\ntenant=";
	size_t kl = sizeof(key) - 1;

	/* The tenant line is the last line: find it from the end. */
	if (len < kl + 2 || text[len - 1] != '\n')
		return -1;
	for (size_t p = len - 1; p-- > 0;) {
		if (text[p] != '\n')
			continue;
		if (len - p < kl || memcmp(text + p, key, kl) != 0)
			return -1;
		*tenant = text + p + kl;
		size_t n = len - 1 - (p + kl);
		if (n == 1 && (*tenant)[0] == '-')
			return 0;
		return (int)n;
	}
	return -1;
}

/* ------------------------------------------------------------------------
 * A secret sent in clear (the RESP listener's AUTH, respd.c)
 */

int kvtd_auth_plain(const char *tenant, uint32_t tenant_len, const uint8_t *secret,
		    size_t secret_len, uint32_t *role)
{
	uint8_t want[PROTO_SECRET_MAX];
	uint32_t want_len = 0, r = PROTO_ROLE_TENANT;
	bool known = false;
	int ok;

	pthread_mutex_lock(&auth_lock);
	for (unsigned i = 0; auth_table && i < auth_table->count; i++) {
		const struct kvtd_tenant *e = &auth_table->v[i];
		if (e->name_len == tenant_len && memcmp(e->name, tenant, tenant_len) == 0) {
			memcpy(want, e->secret, e->secret_len);
			want_len = e->secret_len;
			r = e->role;
			known = true;
			break;
		}
	}
	pthread_mutex_unlock(&auth_lock);
	if (!known) {
		memcpy(want, auth_dummy, sizeof(auth_dummy));
		want_len = sizeof(auth_dummy);
	}
	/* Constant time over the stored secret's length; an unknown tenant
	 * is compared against a random key, at the same cost. */
	ok = secret_len == want_len && CRYPTO_memcmp(want, secret, want_len) == 0;
	OPENSSL_cleanse(want, want_len);
	if (!ok || !known)
		return PROTO_EAUTH;
	*role = r;
	return 0;
}

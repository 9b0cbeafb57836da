/*
 * auth.c - who a connection is: the tenants file, the HMAC check of AUTH,
 * and reading canonical namespace descriptors (whose tenant line says
 * whose a namespace is).
 *
 * Tenants file (--tenants FILE): one tenant per line, and grants,
 *
 *   # comment
 *   name  secret  role  [dram=SIZE] [ssd=SIZE]    role: tenant | admin
 *                       [s3_secret=KEY] [events=ENDPOINT]  (its own KV-events feed)
 *                       [events_replay=ENDPOINT]  (that feed's replay endpoint)
 *   grant OWNER  WHAT  to GRANTEE                 read access (doc/kvtierd.md)
 *
 * name is 1..64 bytes of 0x21..0x7e, not "-" and not "grant"; secret is
 * 16..4096 bytes of 0x21..0x7e (used as the HMAC key as written); the file
 * must be readable by its owner only.  Without a file, AUTH_NONE is offered
 * and every connection is tenant "default" (kvtierd.c logs that loudly).
 *
 * Quotas: every tenant of a file has a libkvtier quota group (the same id
 * while its name stays in the file; a new name is given a group never
 * given, else a free one holding none of an earlier tenant's DRAM blocks
 * if it can: auth_group_pick), with the file's dram= and ssd= limits
 * (none: counted, not limited).  Groups are given when a table is
 * installed, never while a file is parsed: a refused reload changes
 * nothing.  kvtd_quota_apply sets the limits and puts every namespace in
 * its tenant's group; kvtierd calls it after opening the store and after
 * each reload, and the aux thread puts each newly registered namespace in
 * its group.
 *
 * Grants: WHAT is "*" (every namespace of OWNER), "model=NAME" (OWNER's
 * namespaces of that model) or a namespace digest in hex (64 digits);
 * GRANTEE is a tenant or "*" (every tenant).  A grant gives read access
 * only: LOOKUP, EXISTS, GET.  Each installed table bumps a generation so
 * that connections drop what they cached about namespaces (a revoked grant
 * holds for no new request).
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
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <xxhash.h>

#include "kvtierd.h"
#include "sigv4.h"

struct kvtd_tenant {
	char name[PROTO_TENANT_MAX + 1];
	uint32_t name_len;
	uint8_t *secret;
	uint32_t secret_len;
	/* What AUTH compares, of a fixed size whatever the secret's length
	 * ("An AUTH's time"): the native proof's HMAC key (the secret, or
	 * its SHA-256 when longer than SHA-256's block, as HMAC itself
	 * would use), and the RESP secret's HMAC under auth_dummy. */
	uint8_t key[64];
	uint32_t key_len;
	uint8_t plain_mac[32];
	/* and SigV4's first key of the S3 secret (sigv4_key0); all three
	 * made by kvtd_auth_install, once the table is whole: the parse
	 * grows the array with realloc, which would leave copies behind,
	 * never wiped ("A table's secrets") */
	uint8_t s3_key[SIGV4_KEY0_MAX];
	uint32_t s3_key_len;
	uint32_t role;
	uint32_t group;           /* libkvtier quota group (0: groups exhausted) */
	uint64_t dram_quota;      /* bytes, 0: no limit */
	uint64_t ssd_quota;
	uint8_t *s3_secret;       /* s3_secret=: the S3 listener's SigV4 secret
				   * key (doc/s3.md); NULL: the secret above */
	uint32_t s3_secret_len;
	char *events;             /* events=: its own KV-events feed (ZeroMQ endpoint) */
	char *events_replay;      /* events_replay=: that feed's replay endpoint */
};

enum { GRANT_ALL = 1, GRANT_MODEL = 2, GRANT_DIGEST = 3 };

struct kvtd_grant {
	char owner[PROTO_TENANT_MAX + 1];
	uint32_t owner_len;
	char grantee[PROTO_TENANT_MAX + 1];
	uint32_t grantee_len;     /* 0: "*", every tenant */
	int kind;                 /* GRANT_* */
	char model[256];          /* GRANT_MODEL */
	uint32_t model_len;
	uint8_t digest[PROTO_DIGEST_LEN]; /* GRANT_DIGEST */
};

struct kvtd_tenants {
	struct kvtd_tenant *v;
	unsigned count;
	/* v[i].name's 128-bit hash under auth_name_seed, what an AUTH's
	 * lookup compares (auth_lookup: 16 bytes a tenant whatever its name,
	 * in one array the walk reads in order); allocated by the parse,
	 * made by kvtd_auth_install */
	uint64_t (*name_keys)[2];
	struct kvtd_grant *grants;
	unsigned grant_count;
};

#define AUTH_FILE_MAX (16u << 20)  /* a tenants file larger than this is refused */

static pthread_mutex_t auth_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvtd_tenants *auth_table; /* guarded by auth_lock */
static _Atomic bool auth_on;
static _Atomic uint64_t auth_gen = 1;   /* bumped by every install */

/* Quota group of each tenant of the installed table: group i is
 * group_names[i] (1-based, 1..group_count given at least once; "": given
 * back, by a tenant removed from the file, for a new tenant once no group
 * is left that was never given: auth_group_pick).  A name keeps its group
 * across reloads while it stays in the file.  group_ev_base[i]: the group's
 * events.<i>.dropped when it was given to its tenant (those of an earlier
 * holder), subtracted on /metrics; group_handed[i]: given, that base not
 * read yet (kvtd_quota_apply reads it; /metrics shows no series then). */
static pthread_mutex_t group_lock = PTHREAD_MUTEX_INITIALIZER;
static char group_names[KVT_QUOTA_GROUPS][PROTO_TENANT_MAX + 1]; /* group_lock */
static uint32_t group_count;                                     /* group_lock */
static bool group_handed[KVT_QUOTA_GROUPS];                      /* group_lock */
static uint64_t group_ev_base[KVT_QUOTA_GROUPS];                 /* group_lock */
/* The store kvtd_quota_apply last applied to (whose groups' DRAM bytes
 * auth_group_pick reads on the next reload). */
static struct kvt_store *group_store;                            /* group_lock */
static uint8_t auth_dummy[PROTO_SECRET_MIN]; /* for unknown tenants: same cost */
static uint8_t auth_dummy_mac[32];           /* auth_dummy's plain_mac */
static uint64_t auth_name_seed;              /* name_keys's seed: random, per process */
static uint8_t auth_dummy_s3[SIGV4_KEY0_MAX]; /* and its s3_key */
static uint32_t auth_dummy_s3_len;

/*
 * An AUTH's time.  A failed AUTH's time must not tell whether its tenant
 * is in the file, nor how long that tenant's secret is.  Until 2026-12-07
 * an AUTH hashed the tenant's secret itself, whatever its length (RESP:
 * an HMAC over it; native: the HMAC keyed with it, which hashes a key
 * longer than 64 bytes first), while an unknown tenant's was 16 bytes,
 * and the lookup stopped at the tenant's line: 20,000 failed RESP AUTHs
 * of a tenant with a 4,096-byte secret took 5-8 times the CPU of an
 * unknown tenant's (test_config `auth_time`), ~2 us more a guess seen
 * from a client on loopback (p10), and of the first of 1,000 tenants
 * less than an unknown one's.  Now what is compared is made once, when a
 * table is installed -- the native proof's key cut to at most a block
 * (HMAC's own rule: the same proofs), the RESP secret's HMAC -- and every
 * lookup walks the whole table (auth_lookup).
 *
 * Until session 47 that walk compared names with memcmp, and only those
 * of the guessed name's length, stopping at the first differing byte: a
 * failed AUTH's time told how many tenant names have the guessed name's
 * length (RESP, 1,000 names of 10 bytes: a 10-byte unknown name 1.8 us
 * against 3.7 us, review46c) and, a few ns a name, how many share its
 * prefix.  Now each name's 128-bit XXH3 under a random per-process seed
 * (auth_name_seed, name_keys) is made at install, an AUTH hashes the
 * guessed name once, and the walk compares all 16 bytes of every
 * tenant's (OR-ed words, one array read in order) and keeps its hit by
 * masks, not branches; a hit's name is compared itself once found.  The
 * same work whatever the guess and whatever the table's names
 * (test_config auth_time "tenant9999" against "nobody"; release, 1,000
 * tenants: 2.8 us a failed RESP AUTH whoever is named, where it was 1.8
 * us for a name of a length no tenant has and 3.9 us for one of the
 * length of 997).  The hash is keyed by a secret of the process, and a
 * guess that matched a tenant's hash without being its name (a collision)
 * finds no tenant: what the time could tell is whether the guess is a
 * tenant's name, which a failed AUTH of a known tenant and of an unknown
 * one also spend the same on (one HMAC, above).  An HMAC-SHA256 of the
 * name did as well at 4.5 us a failed AUTH.
 */
static void auth_mac(const uint8_t *p, size_t len, uint8_t out[32])
{
	unsigned l = 0;

	if (!HMAC(EVP_sha256(), auth_dummy, sizeof(auth_dummy), p, len, out, &l) || l != 32)
		memset(out, 0, 32); /* never equal to a guess's (auth_plain_ok) */
}

/* name's 128-bit hash under auth_name_seed (auth_lookup). */
static void auth_name_key(const char *name, size_t len, uint64_t out[2])
{
	XXH128_hash_t h = XXH3_128bits_withSeed(name, len, auth_name_seed);

	out[0] = h.low64;
	out[1] = h.high64;
}

/*
 * A table's secrets.  Every byte that logs in -- the secret, s3_secret=,
 * and what AUTH and SigV4 compare, made from them (key, s3_key) -- is
 * wiped before its memory is freed, once, here.  The parse grows the
 * array with realloc, which frees the block it leaves unwiped, so
 * nothing secret lives in the array until kvtd_auth_install makes key,
 * plain_mac and s3_key (test_config secret_wipe: red46's key, made at the
 * parse, was left in 299 freed blocks of a 200-tenant table, and
 * s3_secret= was freed unwiped since it came).
 */
void kvtd_tenants_free(struct kvtd_tenants *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->count; i++) {
		OPENSSL_cleanse(t->v[i].key, sizeof(t->v[i].key));
		OPENSSL_cleanse(t->v[i].plain_mac, sizeof(t->v[i].plain_mac));
		OPENSSL_cleanse(t->v[i].s3_key, sizeof(t->v[i].s3_key));
		if (t->v[i].secret) {
			OPENSSL_cleanse(t->v[i].secret, t->v[i].secret_len);
			free(t->v[i].secret);
			if (t->v[i].s3_secret) /* a secret too: never freed unwiped */
				OPENSSL_cleanse(t->v[i].s3_secret, t->v[i].s3_secret_len);
			free(t->v[i].s3_secret);
			free(t->v[i].events);
			free(t->v[i].events_replay);
		}
	}
	free(t->v);
	free(t->name_keys);
	free(t->grants);
	free(t);
}

unsigned kvtd_tenants_count(const struct kvtd_tenants *t)
{
	return t ? t->count : 0;
}

const char *kvtd_tenants_name(const struct kvtd_tenants *t, unsigned i, size_t *len)
{
	*len = t->v[i].name_len;
	return t->v[i].name;
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

static bool auth_word_is(const char *w, size_t wl, const char *lit)
{
	return wl == strlen(lit) && memcmp(w, lit, wl) == 0;
}

static bool auth_name_ok(const char *w, size_t wl)
{
	return wl >= 1 && wl <= PROTO_TENANT_MAX && auth_token_ok(w, wl) &&
	       !(wl == 1 && w[0] == '-') && !auth_word_is(w, wl, "grant");
}

static int auth_hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "grant OWNER WHAT to GRANTEE" (w[0] is "grant"). */
static int auth_parse_grant(struct kvtd_tenants *t, const char *const *w, const size_t *wl,
			    unsigned n, unsigned lineno, char *errbuf, size_t errlen)
{
	struct kvtd_grant *g;

	if (n != 5 || !(auth_word_is(w[3], wl[3], "to") || auth_word_is(w[3], wl[3], "TO"))) {
		snprintf(errbuf, errlen, "line %u: want \"grant OWNER WHAT to GRANTEE\"", lineno);
		return -EINVAL;
	}
	if (!auth_name_ok(w[1], wl[1]) ||
	    !(auth_name_ok(w[4], wl[4]) || auth_word_is(w[4], wl[4], "*"))) {
		snprintf(errbuf, errlen, "line %u: grant: owner and grantee must be tenant names "
			 "(grantee may be \"*\")", lineno);
		return -EINVAL;
	}
	g = realloc(t->grants, (t->grant_count + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	t->grants = g;
	g = &t->grants[t->grant_count];
	memset(g, 0, sizeof(*g));
	memcpy(g->owner, w[1], wl[1]);
	g->owner_len = (uint32_t)wl[1];
	if (!auth_word_is(w[4], wl[4], "*")) {
		memcpy(g->grantee, w[4], wl[4]);
		g->grantee_len = (uint32_t)wl[4];
	}
	if (auth_word_is(w[2], wl[2], "*")) {
		g->kind = GRANT_ALL;
	} else if (wl[2] > 6 && memcmp(w[2], "model=", 6) == 0 && wl[2] - 6 < sizeof(g->model)) {
		g->kind = GRANT_MODEL;
		g->model_len = (uint32_t)(wl[2] - 6);
		memcpy(g->model, w[2] + 6, g->model_len);
	} else if (wl[2] == 2 * PROTO_DIGEST_LEN) {
		g->kind = GRANT_DIGEST;
		for (unsigned i = 0; i < PROTO_DIGEST_LEN; i++) {
			int hi = auth_hex(w[2][2 * i]), lo = auth_hex(w[2][2 * i + 1]);
			if (hi < 0 || lo < 0) {
				g->kind = 0;
				break;
			}
			g->digest[i] = (uint8_t)(hi << 4 | lo);
		}
	}
	if (!g->kind) {
		snprintf(errbuf, errlen, "line %u: grant: WHAT must be \"*\", \"model=NAME\" or a "
			 "namespace digest (64 lowercase hex digits)", lineno);
		return -EINVAL;
	}
	t->grant_count++;
	return 0;
}

/* A tenant line's optional "dram=SIZE" / "ssd=SIZE" words. */
static int auth_parse_quota(struct kvtd_tenant *e, const char *w, size_t wl, unsigned lineno,
			    char *errbuf, size_t errlen)
{
	char num[32];
	uint64_t *dst = NULL;
	size_t skip = 0;

	if (wl > 10 && memcmp(w, "s3_secret=", 10) == 0) {
		if (e->s3_secret || wl - 10 < PROTO_SECRET_MIN || wl - 10 > PROTO_SECRET_MAX) {
			snprintf(errbuf, errlen, "line %u: s3_secret= given twice, or not %u..%u bytes",
				 lineno, PROTO_SECRET_MIN, PROTO_SECRET_MAX);
			return -EINVAL;
		}
		e->s3_secret = malloc(wl - 10);
		if (!e->s3_secret)
			return -ENOMEM;
		memcpy(e->s3_secret, w + 10, wl - 10);
		e->s3_secret_len = (uint32_t)(wl - 10);
		return 0;
	}
	if (wl > 7 && memcmp(w, "events=", 7) == 0 && !e->events) {
		/* The word is not NUL-terminated (the file's text is not). */
		e->events = malloc(wl - 7 + 1);
		if (!e->events)
			return -ENOMEM;
		memcpy(e->events, w + 7, wl - 7);
		e->events[wl - 7] = '\0';
		return 0;
	}
	if (wl > 14 && memcmp(w, "events_replay=", 14) == 0 && !e->events_replay) {
		e->events_replay = malloc(wl - 14 + 1);
		if (!e->events_replay)
			return -ENOMEM;
		memcpy(e->events_replay, w + 14, wl - 14);
		e->events_replay[wl - 14] = '\0';
		return 0;
	}
	if (wl > 5 && memcmp(w, "dram=", 5) == 0) {
		dst = &e->dram_quota;
		skip = 5;
	} else if (wl > 4 && memcmp(w, "ssd=", 4) == 0) {
		dst = &e->ssd_quota;
		skip = 4;
	}
	if (!dst || wl - skip >= sizeof(num)) {
		snprintf(errbuf, errlen,
			 "line %u: after the role only dram=SIZE, ssd=SIZE, s3_secret=KEY, "
			 "events=ENDPOINT and events_replay=ENDPOINT", lineno);
		return -EINVAL;
	}
	memcpy(num, w + skip, wl - skip);
	num[wl - skip] = 0;
	if (kvtd_parse_size(num, dst) < 0) {
		snprintf(errbuf, errlen, "line %u: %.*s: not a size (e.g. 8G, 512M)", lineno,
			 (int)wl, w);
		return -EINVAL;
	}
	return 0;
}

static int auth_parse_line(struct kvtd_tenants *t, const char *line, size_t len, unsigned lineno,
			   char *errbuf, size_t errlen)
{
	const char *w[9];
	size_t wl[9], pos = 0;
	unsigned n = 0;
	struct kvtd_tenant *e;
	int rc;

	while (n < 9 && auth_word(line, len, &pos, &w[n], &wl[n]))
		n++;
	if (n == 0 || w[0][0] == '#')
		return 0;
	if (auth_word_is(w[0], wl[0], "grant"))
		return auth_parse_grant(t, w, wl, n, lineno, errbuf, errlen);
	if (n < 3 || n > 8) { /* 9 words read: a ninth is too many */
		snprintf(errbuf, errlen, "line %u: want \"name secret role [dram=SIZE] [ssd=SIZE] "
			 "[s3_secret=KEY] [events=ENDPOINT] [events_replay=ENDPOINT]\"",
			 lineno);
		return -EINVAL;
	}
	if (!auth_name_ok(w[0], wl[0])) {
		snprintf(errbuf, errlen,
			 "line %u: tenant name must be 1..%u printable bytes, not \"-\" or \"grant\"",
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
	for (unsigned i = 3; i < n; i++) {
		rc = auth_parse_quota(e, w[i], wl[i], lineno, errbuf, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static const struct kvtd_tenant *auth_find(const struct kvtd_tenants *t, const char *name,
					   size_t len)
{
	for (unsigned i = 0; t && i < t->count; i++)
		if (t->v[i].name_len == len && memcmp(t->v[i].name, name, len) == 0)
			return &t->v[i];
	return NULL;
}

/* After the whole file: grants name known tenants (a typo must not pass
 * silently), and the tenants fit the quota groups (given at install,
 * auth_groups_assign). */
static int auth_finish(struct kvtd_tenants *t, char *errbuf, size_t errlen)
{
	for (unsigned i = 0; i < t->grant_count; i++) {
		const struct kvtd_grant *g = &t->grants[i];
		if (!auth_find(t, g->owner, g->owner_len)) {
			snprintf(errbuf, errlen, "grant: owner \"%s\" is not a tenant of the file",
				 g->owner);
			return -EINVAL;
		}
		if (g->grantee_len && !auth_find(t, g->grantee, g->grantee_len)) {
			snprintf(errbuf, errlen, "grant: grantee \"%s\" is not a tenant of the file",
				 g->grantee);
			return -EINVAL;
		}
	}
	/* One quota group per tenant, group 0 being "none": a file with more
	 * tenants than groups is refused rather than leaving some without
	 * their limits. */
	if (t->count > KVT_QUOTA_GROUPS - 2) {
		snprintf(errbuf, errlen, "%u tenants: at most %u (one libkvtier quota group each)",
			 t->count, KVT_QUOTA_GROUPS - 2);
		return -EINVAL;
	}
	return 0;
}

/* Each free group's DRAM bytes (dram_bytes + dram_leaving_bytes) into
 * ctx[g]: an earlier tenant's blocks, charged to the group until they
 * leave. */
static void auth_dram_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	uint64_t *bytes = ctx;
	const char *f = strchr(name + 6, '.'); /* "quota.<g>.field" */

	(void)str;
	if (f && (strcmp(f, ".dram_bytes") == 0 || strcmp(f, ".dram_leaving_bytes") == 0))
		*bytes += value;
}

/*
 * A group for a new tenant: one never given while groups remain, else
 * the free group holding the fewest DRAM bytes (lowest number first):
 * an earlier tenant's blocks stay charged to its group until they leave
 * (kvt_ns_set_group), and the next holder would count them against its
 * dram= limit and see them in its tenant.dram_bytes.  Only once every
 * group has been given can a group still holding some be given; that is
 * logged.  dram[]: each free group's bytes, read once (UINT64_MAX: not
 * read yet).  0: none free.
 */
static uint32_t auth_group_pick(uint64_t *dram)
{
	uint32_t best = 0;

	if (group_count + 1 < KVT_QUOTA_GROUPS)
		return ++group_count;
	for (uint32_t gi = 1; gi <= group_count; gi++) {
		if (group_names[gi][0])
			continue;
		if (dram[gi] == UINT64_MAX) {
			dram[gi] = 0;
			if (group_store)
				kvt_quota_stats(group_store, gi, auth_dram_cb, &dram[gi]);
		}
		if (!best || dram[gi] < dram[best])
			best = gi;
		if (dram[gi] == 0)
			break;
	}
	if (best && dram[best])
		kvtd_log(KVTD_WARN,
			 "every quota group was given: a new tenant's group still holds "
			 "an earlier tenant's DRAM blocks, charged to it until they leave",
			 "group=%u dram_bytes=%llu", best, (unsigned long long)dram[best]);
	return best;
}

/*
 * The installed table's groups, given as t is installed -- never while a
 * file is parsed, so that a file refused anywhere in the reload (a line,
 * a grant, the count, a read error) leaves every group as it was: names
 * no longer in t give their group back (kvtd_quota_apply moves their
 * namespaces out of it), names still there keep theirs, new names take
 * a group (auth_group_pick).  A group given anew is marked handed until
 * kvtd_quota_apply has reopened its KV-events feed and read its drops so
 * far, the previous holder's (group_ev_base), which /metrics does not
 * count as the new tenant's.
 */
static void auth_groups_assign(struct kvtd_tenants *t)
{
	uint64_t *dram = malloc(KVT_QUOTA_GROUPS * sizeof(*dram));

	if (dram)
		memset(dram, 0xff, KVT_QUOTA_GROUPS * sizeof(*dram));
	pthread_mutex_lock(&group_lock);
	for (uint32_t gi = 1; gi <= group_count; gi++)
		if (group_names[gi][0] && !auth_find(t, group_names[gi], strlen(group_names[gi])))
			group_names[gi][0] = 0;
	for (unsigned i = 0; i < t->count; i++) {
		struct kvtd_tenant *e = &t->v[i];
		uint32_t free_gi = 0;
		e->group = 0;
		for (uint32_t gi = 1; gi <= group_count; gi++) {
			if (strcmp(group_names[gi], e->name) == 0) {
				e->group = gi;
				break;
			}
			if (!free_gi && !group_names[gi][0])
				free_gi = gi;
		}
		if (e->group)
			continue;
		/* Without memory to note the groups' bytes: the lowest free. */
		if (dram || group_count + 1 < KVT_QUOTA_GROUPS)
			free_gi = dram ? auth_group_pick(dram) : ++group_count;
		if (free_gi) {
			e->group = free_gi;
			memcpy(group_names[free_gi], e->name, e->name_len + 1);
			group_handed[free_gi] = true;
		}
	}
	pthread_mutex_unlock(&group_lock);
	free(dram);
}

int kvtd_tenants_parse(const char *text, size_t len, struct kvtd_tenants **out, char *errbuf,
		       size_t errlen)
{
	struct kvtd_tenants *t = calloc(1, sizeof(*t));
	unsigned lineno = 0;
	int ret = 0;

	errbuf[0] = 0;
	if (!t)
		return -ENOMEM;
	for (size_t p = 0; p < len;) {
		const char *nl = memchr(text + p, '\n', len - p);
		size_t end = nl ? (size_t)(nl - text) : len;
		lineno++;
		ret = auth_parse_line(t, text + p, end - p, lineno, errbuf, errlen);
		if (ret < 0)
			goto fail;
		p = end + 1;
	}
	ret = auth_finish(t, errbuf, errlen);
	if (ret < 0)
		goto fail;
	t->name_keys = calloc(t->count ? t->count : 1, sizeof(*t->name_keys));
	if (!t->name_keys) {
		ret = -ENOMEM;
		goto fail;
	}
	*out = t;
	return 0;
fail:
	kvtd_tenants_free(t);
	if (!errbuf[0])
		snprintf(errbuf, errlen, "%s", strerror(-ret));
	return ret;
}

int kvtd_tenants_load(const char *path, struct kvtd_tenants **out, char *errbuf, size_t errlen)
{
	struct kvtd_tenants *t = NULL;
	struct stat st;
	char *text = NULL;
	size_t got = 0;
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
	if (!text) {
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
	ret = kvtd_tenants_parse(text, got, &t, errbuf, errlen);
	if (ret < 0)
		goto fail;
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
		if (getrandom(&auth_name_seed, sizeof(auth_name_seed), 0) !=
		    (ssize_t)sizeof(auth_name_seed))
			auth_name_seed = 0xa5a5a5a5a5a5a5a5ull;
		auth_mac(auth_dummy, sizeof(auth_dummy), auth_dummy_mac);
		auth_dummy_s3_len = (uint32_t)sigv4_key0(auth_dummy, sizeof(auth_dummy),
							 auth_dummy_s3);
		dummy_done = true;
	}
	/* What AUTH and SigV4 compare ("An AUTH's time"), made here, the
	 * array no longer moved ("A table's secrets"). */
	for (unsigned i = 0; t && i < t->count; i++) {
		struct kvtd_tenant *e = &t->v[i];
		if (e->secret_len > sizeof(e->key)) {
			SHA256(e->secret, e->secret_len, e->key);
			e->key_len = SHA256_DIGEST_LENGTH;
		} else {
			memcpy(e->key, e->secret, e->secret_len);
			e->key_len = e->secret_len;
		}
		auth_mac(e->secret, e->secret_len, e->plain_mac);
		auth_name_key(e->name, e->name_len, t->name_keys[i]);
		const uint8_t *s3 = e->s3_secret ? e->s3_secret : e->secret;
		size_t s3l = e->s3_secret ? e->s3_secret_len : e->secret_len;
		e->s3_key_len = (uint32_t)sigv4_key0(s3, s3l, e->s3_key);
	}
	if (t)
		auth_groups_assign(t); /* before any thread can see t */
	pthread_mutex_lock(&auth_lock);
	old = auth_table;
	auth_table = t;
	pthread_mutex_unlock(&auth_lock);
	atomic_store(&auth_on, t != NULL);
	atomic_fetch_add(&auth_gen, 1);
	kvtd_tenants_free(old);
}

int kvtd_tenant_role(const char *name, size_t len, uint32_t *role)
{
	const struct kvtd_tenant *e;
	int rc = -ENOENT;

	if (!atomic_load(&auth_on)) {
		*role = PROTO_ROLE_ADMIN; /* everyone is "default", an admin */
		return 0;
	}
	pthread_mutex_lock(&auth_lock);
	e = auth_find(auth_table, name, len);
	if (e) {
		*role = e->role;
		rc = 0;
	}
	pthread_mutex_unlock(&auth_lock);
	return rc;
}

uint64_t kvtd_auth_generation(void)
{
	return atomic_load_explicit(&auth_gen, memory_order_acquire);
}

uint32_t kvtd_tenant_group(const char *name, size_t len)
{
	const struct kvtd_tenant *e;
	uint32_t g;
	pthread_mutex_lock(&auth_lock);
	e = auth_find(auth_table, name, len);
	g = e ? e->group : 0;
	pthread_mutex_unlock(&auth_lock);
	return g;
}

size_t kvtd_tenant_group_name(uint32_t group, char out[PROTO_TENANT_MAX + 1],
			      uint64_t *events_base)
{
	size_t n = 0;

	out[0] = 0;
	*events_base = 0;
	pthread_mutex_lock(&group_lock);
	if (group >= 1 && group <= group_count && !group_handed[group]) {
		n = strlen(group_names[group]);
		memcpy(out, group_names[group], n + 1);
		*events_base = group_ev_base[group];
	}
	pthread_mutex_unlock(&group_lock);
	return n;
}

bool kvtd_grant_allows(const char *owner, size_t owner_len, const char *model, size_t model_len,
		       const uint8_t digest[PROTO_DIGEST_LEN], const char *grantee,
		       size_t grantee_len)
{
	bool ok = false;

	pthread_mutex_lock(&auth_lock);
	for (unsigned i = 0; auth_table && !ok && i < auth_table->grant_count; i++) {
		const struct kvtd_grant *g = &auth_table->grants[i];
		if (g->owner_len != owner_len || memcmp(g->owner, owner, owner_len) != 0)
			continue;
		if (g->grantee_len && (g->grantee_len != grantee_len ||
				       memcmp(g->grantee, grantee, grantee_len) != 0))
			continue;
		switch (g->kind) {
		case GRANT_ALL:
			ok = true;
			break;
		case GRANT_MODEL:
			ok = model && g->model_len == model_len &&
			     memcmp(g->model, model, model_len) == 0;
			break;
		case GRANT_DIGEST:
			ok = memcmp(g->digest, digest, PROTO_DIGEST_LEN) == 0;
			break;
		}
	}
	pthread_mutex_unlock(&auth_lock);
	return ok;
}

/* The namespace's group: its tenant's, from its canonical text. */
static uint32_t auth_ns_group(struct kvt_store *store, uint32_t id)
{
	char canon[PROTO_CANON_MAX + 1];
	uint8_t dg[PROTO_DIGEST_LEN];
	const char *tn;
	int rc = kvt_ns_info(store, id, dg, canon, sizeof(canon)), tl;

	if (rc < 0 || (size_t)rc >= sizeof(canon))
		return 0;
	tl = kvtd_canon_tenant(canon, (size_t)rc, &tn);
	return tl > 0 ? kvtd_tenant_group(tn, (size_t)tl) : 0;
}

int kvtd_ns_apply_group(struct kvt_store *store, uint32_t id)
{
	if (!kvtd_auth_enabled())
		return 0;
	return kvt_ns_set_group(store, id, auth_ns_group(store, id));
}

struct auth_limit {
	uint32_t group;
	uint64_t dram, ssd;
	char *events; /* a copy of the tenant's events= */
	char *events_replay; /* and of its events_replay= */
};

static bool auth_group_handed(uint32_t g)
{
	bool h;

	pthread_mutex_lock(&group_lock);
	h = group_handed[g];
	pthread_mutex_unlock(&group_lock);
	return h;
}

/*
 * A group given to a new tenant: its feed, if any, is closed before the
 * namespaces move and the new tenant's feed opens, even on the same
 * endpoint string -- the library keeps a feed whose endpoint is
 * unchanged, with its socket (whose subscribers are the earlier tenant's)
 * and its replay ring (the earlier tenant's messages); a feed opened
 * anew gets none of the events queued before it.  The new socket binds the same address again: an
 * ipc:// path is unlinked by the bind (libzmq 4.3 leaves it at close), a
 * tcp:// port the closing socket still holds is retried by the caller.
 */
static void auth_events_close(struct kvt_store *store, uint32_t g)
{
	kvt_events_group_endpoint(store, g, NULL);
}

/* Each tenant's KV-events feed on its group (doc/kvevents.md "Per
 * tenant"); groups of tenants without one, or removed, have none; a
 * group given anew had its feed closed (auth_events_close). */
static int auth_events_apply(struct kvt_store *store, const struct auth_limit *lim, unsigned n,
			     const bool *listed, uint32_t groups)
{
	int rc = 0, r;

	for (unsigned i = 0; i < n; i++) {
		if (!lim[i].group)
			continue;
		r = kvt_events_group_endpoint(store, lim[i].group, lim[i].events);
		for (int k = 0; r < 0 && lim[i].events && auth_group_handed(lim[i].group) && k < 50;
		     k++) {
			usleep(10000); /* the old socket's port, closing */
			r = kvt_events_group_endpoint(store, lim[i].group, lim[i].events);
		}
		if (r < 0 && lim[i].events) {
			kvtd_log(KVTD_ERROR, "cannot publish a tenant's KV events", "endpoint=%s error=\"%s\"",
				 lim[i].events, kvt_strerror(r));
			if (rc == 0)
				rc = r;
		}
		/* Its feed's replay (none without a feed: KVT_ESTATE). */
		r = kvt_events_group_replay_endpoint(store, lim[i].group,
						     lim[i].events ? lim[i].events_replay : NULL);
		if (r < 0 && lim[i].events && lim[i].events_replay) {
			kvtd_log(KVTD_ERROR, "cannot replay a tenant's KV events",
				 "endpoint=%s error=\"%s\"", lim[i].events_replay, kvt_strerror(r));
			if (rc == 0)
				rc = r;
		}
	}
	for (uint32_t g = 1; g <= groups; g++)
		if (!listed[g])
			kvt_events_group_endpoint(store, g, NULL);
	return rc;
}

/*
 * Several tenants whose DRAM quotas do not partition the DRAM tier (one
 * without a dram= limit, or limits that add up past the tier) share its
 * eviction: one tenant's puts evict another's blocks, and the other can
 * observe that (doc/security.md, "Cross-tenant probing").  Say so, at
 * startup and on every reload.
 */
static void auth_warn_shared_dram(struct kvt_store *store, const struct auth_limit *lim,
				  unsigned n)
{
	uint64_t cap = 0, sum = 0;
	unsigned unlimited = 0;

	if (n < 2 || kvt_store_stat(store, "dram.capacity_bytes", &cap) != 0 || cap == 0)
		return;
	for (unsigned i = 0; i < n; i++) {
		if (!lim[i].dram)
			unlimited++;
		sum += lim[i].dram;
	}
	if (unlimited)
		kvtd_log(KVTD_WARN,
			 "tenants share the DRAM tier: one tenant's puts can evict another's "
			 "blocks, which it can observe; give every tenant a dram= quota, the "
			 "quotas adding up to at most --dram (doc/security.md)",
			 "tenants=%u without_dram_quota=%u", n, unlimited);
	else if (sum > cap)
		kvtd_log(KVTD_WARN,
			 "tenants' dram= quotas add up to more than the DRAM tier: once it is "
			 "full, one tenant's puts can evict another's blocks (doc/security.md)",
			 "tenants=%u dram_quotas=%llu dram_bytes=%llu", n, (unsigned long long)sum,
			 (unsigned long long)cap);
}

/* Each quota group's events.<g>.dropped (auth_events_base). */
static void auth_events_base_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	uint64_t *dropped = ctx;
	char *end;
	unsigned long g;

	(void)str;
	if (strncmp(name, "events.", 7) != 0 || name[7] < '0' || name[7] > '9')
		return;
	g = strtoul(name + 7, &end, 10);
	if (g < KVT_QUOTA_GROUPS && strcmp(end, ".dropped") == 0)
		dropped[g] = value;
}

/*
 * The groups given anew since the last call (auth_groups_assign): their
 * KV-events drops so far were their earlier tenants' -- or, once their
 * namespaces had moved, queued before -- and not the new tenant's, whose
 * kvtier_events_tenant_dropped_total starts at 0 as its kvtier_tenant_*
 * counters do.  Read once the namespaces are in their new groups; a
 * store's counts only grow, so a count is never below its base.
 */
static void auth_events_base(struct kvt_store *store)
{
	uint64_t *dropped = calloc(KVT_QUOTA_GROUPS, sizeof(*dropped));
	bool any = false;

	pthread_mutex_lock(&group_lock);
	for (uint32_t g = 1; g <= group_count && !any; g++)
		any = group_handed[g];
	pthread_mutex_unlock(&group_lock);
	if (!any) {
		free(dropped);
		return;
	}
	/* Without memory the bases stay 0 and the groups are shown: a
	 * counter that may hold an earlier tenant's drops, rather than none. */
	if (dropped)
		kvt_store_stats(store, auth_events_base_cb, dropped);
	pthread_mutex_lock(&group_lock);
	for (uint32_t g = 1; g <= group_count; g++) {
		if (!group_handed[g])
			continue;
		group_ev_base[g] = dropped ? dropped[g] : 0;
		group_handed[g] = false;
	}
	pthread_mutex_unlock(&group_lock);
	free(dropped);
}

int kvtd_quota_apply(struct kvt_store *store)
{
	struct auth_limit *lim = NULL;
	bool *listed = NULL;
	unsigned n = 0;
	uint32_t groups;
	uint64_t total = 0;
	int rc = 0, r;

	if (!kvtd_auth_enabled())
		return 0;
	/* Copy the limits out: no lock is held while calling the library. */
	pthread_mutex_lock(&auth_lock);
	if (auth_table && auth_table->count) {
		lim = calloc(auth_table->count, sizeof(*lim));
		if (lim) {
			n = auth_table->count;
			for (unsigned i = 0; i < n; i++) {
				lim[i].group = auth_table->v[i].group;
				lim[i].dram = auth_table->v[i].dram_quota;
				lim[i].ssd = auth_table->v[i].ssd_quota;
				lim[i].events = auth_table->v[i].events
							? strdup(auth_table->v[i].events)
							: NULL;
				const char *rp = auth_table->v[i].events_replay;
				lim[i].events_replay = rp ? strdup(rp) : NULL;
			}
		}
	}
	pthread_mutex_unlock(&auth_lock);
	pthread_mutex_lock(&group_lock);
	groups = group_count;
	group_store = store;
	pthread_mutex_unlock(&group_lock);
	listed = calloc((size_t)groups + 1, sizeof(*listed));
	if ((n && !lim) || !listed) {
		for (unsigned i = 0; lim && i < n; i++) {
			free(lim[i].events);
			free(lim[i].events_replay);
		}
		free(lim);
		free(listed);
		auth_events_base(store); /* the groups given are shown still */
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		if (!lim[i].group)
			continue;
		listed[lim[i].group] = true;
		r = kvt_quota_set(store, lim[i].group, lim[i].dram, lim[i].ssd);
		if (r < 0 && rc == 0)
			rc = r;
	}
	/* Tenants no longer in the file keep their group, without limits. */
	for (uint32_t g = 1; g <= groups; g++) {
		if (!listed[g]) {
			r = kvt_quota_set(store, g, 0, 0);
			if (r < 0 && rc == 0)
				rc = r;
		}
	}
	auth_warn_shared_dram(store, lim, n);
	/* A group given anew: its feed closed before its namespaces change,
	 * opened after (auth_events_close). */
	for (unsigned i = 0; i < n; i++)
		if (lim[i].group && auth_group_handed(lim[i].group))
			auth_events_close(store, lim[i].group);
	kvt_store_stat(store, "store.namespaces", &total);
	/* Ids run 1..count (doc/keys.md). */
	for (uint64_t k = 1; k <= total; k++) {
		r = kvtd_ns_apply_group(store, (uint32_t)k);
		if (r < 0 && rc == 0)
			rc = r;
	}
	r = auth_events_apply(store, lim, n, listed, groups);
	if (r < 0 && rc == 0)
		rc = r;
	for (unsigned i = 0; i < n; i++) {
		free(lim[i].events);
		free(lim[i].events_replay);
	}
	free(lim);
	free(listed);
	auth_events_base(store);
	return rc;
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

/* The tenant's entry for an AUTH (auth_lock held), or NULL: the guessed
 * name hashed once, then every tenant's name_keys compared -- 16 bytes
 * OR-ed together, no early exit -- and the hit kept by masks; a hit's
 * name is then compared itself, so that no two names can share a tenant
 * ("An AUTH's time"). */
static const struct kvtd_tenant *auth_lookup(const char *tenant, size_t tenant_len)
{
	const struct kvtd_tenant *e;
	uint64_t h[2];
	size_t hit = 0; /* the line's index + 1; 0: none */

	if (!auth_table)
		return NULL;
	auth_name_key(tenant, tenant_len, h);
	for (size_t i = 0; i < auth_table->count; i++) {
		const uint64_t *m = auth_table->name_keys[i];
		size_t same = (size_t)(((m[0] ^ h[0]) | (m[1] ^ h[1])) == 0);
		size_t take = (size_t)0 - (same & (size_t)(hit == 0));
		hit = (hit & ~take) | ((i + 1) & take);
	}
	if (!hit)
		return NULL;
	e = &auth_table->v[hit - 1];
	/* In constant time too (CRYPTO_memcmp, since session 48): memcmp
	 * stopped at the first differing byte. */
	if (e->name_len != tenant_len || CRYPTO_memcmp(e->name, tenant, tenant_len) != 0)
		return NULL;
	return e;
}

int kvtd_auth_check(const char *tenant, uint32_t tenant_len,
		    const uint8_t server_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_nonce[PROTO_NONCE_LEN],
		    const uint8_t client_proof[PROTO_PROOF_LEN],
		    uint8_t server_proof[PROTO_PROOF_LEN], uint32_t *role)
{
	uint8_t secret[64]; /* the HMAC key ("An AUTH's time") */
	uint32_t secret_len = 0, r = PROTO_ROLE_TENANT;
	bool known = false;
	const struct kvtd_tenant *e;
	int ret;

	pthread_mutex_lock(&auth_lock);
	e = auth_lookup(tenant, tenant_len);
	if (e) {
		memcpy(secret, e->key, e->key_len);
		secret_len = e->key_len;
		r = e->role;
		known = true;
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
	while (p < len && text[p] != '\n') {
		/* The canon alphabet only: a NUL would cut the value short. */
		if ((unsigned char)text[p] < 0x21 || (unsigned char)text[p] > 0x7e)
			return KVT_EDESC;
		p++;
	}
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
#define CANON(name)                                                                                \
	do {                                                                                       \
		if ((ret = auth_canon_line(text, len, &pos, name, store, &v, &vl)) < 0)            \
			return ret;                                                                \
	} while (0)
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
	uint8_t want[32];
	uint32_t r = PROTO_ROLE_TENANT;
	bool known = false;
	const struct kvtd_tenant *e;
	int ok;

	pthread_mutex_lock(&auth_lock);
	e = auth_lookup(tenant, tenant_len);
	memcpy(want, e ? e->plain_mac : auth_dummy_mac, sizeof(want));
	if (e) {
		r = e->role;
		known = true;
	}
	pthread_mutex_unlock(&auth_lock);
	/* The guess's HMAC under the process's random key against the
	 * secret's, made at install, compared in constant time: neither the
	 * secret's length nor its bytes show in the time taken; an unknown
	 * tenant is compared against a random key's, at the same cost ("An
	 * AUTH's time"). */
	{
		uint8_t mb[32];
		unsigned lb = 0;
		ok = HMAC(EVP_sha256(), auth_dummy, sizeof(auth_dummy), secret, secret_len, mb,
			  &lb) &&
		     lb == 32 && CRYPTO_memcmp(want, mb, 32) == 0;
		OPENSSL_cleanse(mb, sizeof(mb));
	}
	OPENSSL_cleanse(want, sizeof(want));
	if (!ok || !known)
		return PROTO_EAUTH;
	*role = r;
	return 0;
}

int kvtd_auth_s3_secret(const char *tenant, size_t tenant_len, uint8_t *out, uint32_t *out_len,
			uint32_t *role)
{
	bool known = false;
	const struct kvtd_tenant *e;

	pthread_mutex_lock(&auth_lock);
	e = auth_lookup(tenant, tenant_len);
	if (e) {
		memcpy(out, e->s3_key, e->s3_key_len);
		*out_len = e->s3_key_len;
		*role = e->role;
		known = true;
	}
	pthread_mutex_unlock(&auth_lock);
	if (!known) {
		/* The caller still signs with it: an unknown tenant costs the
		 * same work as a wrong signature. */
		memcpy(out, auth_dummy_s3, auth_dummy_s3_len);
		*out_len = auth_dummy_s3_len;
		return PROTO_EAUTH;
	}
	return 0;
}

/* A tenant's native secret, for this server logging in to a pod peer as
 * that tenant (peer.c): 0, or PROTO_EAUTH (unknown tenant). */
int kvtd_auth_peer_secret(const char *tenant, size_t tenant_len, uint8_t *out, uint32_t *out_len)
{
	int rc = PROTO_EAUTH;
	const struct kvtd_tenant *e;

	/* The lookup an AUTH makes (auth_lookup): until session 48 a walk
	 * comparing names with memcmp, stopping at the tenant's line. */
	pthread_mutex_lock(&auth_lock);
	e = auth_lookup(tenant, tenant_len);
	if (e) {
		memcpy(out, e->secret, e->secret_len);
		*out_len = e->secret_len;
		rc = 0;
	}
	pthread_mutex_unlock(&auth_lock);
	return rc;
}

int kvtd_auth_any_peer(char *name, size_t cap, uint8_t *secret, uint32_t *secret_len)
{
	int rc = PROTO_EAUTH;

	pthread_mutex_lock(&auth_lock);
	if (auth_table && auth_table->count && auth_table->v[0].name_len < cap) {
		const struct kvtd_tenant *e = &auth_table->v[0];
		memcpy(name, e->name, e->name_len);
		name[e->name_len] = 0;
		memcpy(secret, e->secret, e->secret_len);
		*secret_len = e->secret_len;
		rc = 0;
	}
	pthread_mutex_unlock(&auth_lock);
	return rc;
}

/* A new connection of a protocol whose AUTH comes later: without
 * --tenants it is the default tenant, an admin, at once. */
void kvtd_auth_open_conn(struct kvtd_conn *c)
{
	if (kvtd_auth_enabled())
		return;
	c->state = KVTD_CS_READY;
	snprintf(c->tenant, sizeof(c->tenant), "%s", KVTD_DEFAULT_TENANT);
	c->tenant_len = (uint32_t)strlen(KVTD_DEFAULT_TENANT);
	c->role = PROTO_ROLE_ADMIN;
}

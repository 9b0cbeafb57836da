/*
 * members.c - kvtierd's cluster membership (members.h): a static
 * --members list, or registration in etcd and the member list read back
 * from it.
 *
 * etcd (doc/members.md), through its v3 JSON gateway with
 * libcurl and jansson, on one thread of its own:
 *
 *   grant a lease of --etcd-ttl seconds, put
 *     <prefix><advertised HOST:PORT> = {"addr": ..., "weight": capacity}
 *   under it; then every period (a third of the TTL, at most 1 s):
 *     keep the lease alive (an expired one is granted and put again),
 *     read every key under the prefix: the member list.
 *   On SIGTERM: revoke the lease, so the others drop this server at once;
 *   a server that dies is dropped when its lease runs out.
 *
 * Polling, not etcd's watch stream: one small range read per server per
 * period is nothing for etcd at pod scale, and a poll cannot miss an
 * event or hang on a half-open stream.  Engines never talk to etcd: they
 * read the list from any kvtierd (STATS "cluster.*", ops.c).
 *
 * When etcd cannot be reached, the last list is kept (a server does not
 * forget its peers because etcd is down), logged once at the change,
 * counted (kvtier_cluster_etcd_errors_total) and shown
 * (kvtier_cluster_etcd_up 0, STATS cluster.etcd = "down").
 *
 * Threads: the etcd thread writes the list under cl->lock; loops read it
 * under the same lock (STATS, /metrics).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "kvtierd.h"
#include "members.h"

/* ------------------------------------------------------------------------
 * etcd over its JSON gateway
 */

#define ETCD_BODY_MAX (8u << 20)

struct etcd_buf {
	char *p;
	size_t len, cap;
	bool over;
};

static size_t etcd_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd_buf *b = arg;
	size_t n = size * nmemb;

	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 4096;
		char *np;
		while (nc < b->len + n + 1)
			nc *= 2;
		if (nc > ETCD_BODY_MAX) {
			b->over = true;
			return 0;
		}
		np = realloc(b->p, nc);
		if (!np)
			return 0;
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = 0;
	return n;
}

/* POST body to url + path; the answer of a 200 in *b (free b->p).  0, or
 * -EIO with why in err. */
static int etcd_post(struct kvtd_cluster *cl, CURL *h, const char *path, const char *body,
		     struct etcd_buf *b, char *err, size_t err_len)
{
	char url[1024];
	long code = 0;
	CURLcode cc;

	memset(b, 0, sizeof(*b));
	snprintf(url, sizeof(url), "%s%s", cl->url, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (cc != CURLE_OK || code != 200 || !b->p) {
		if (cc != CURLE_OK)
			snprintf(err, err_len, "%s: %s", path,
				 b->over ? "answer too long" : curl_easy_strerror(cc));
		else
			snprintf(err, err_len, "%s: HTTP %ld", path, code);
		free(b->p);
		b->p = NULL;
		return -EIO;
	}
	return 0;
}

/* POST and parse the answer as a JSON object into *out. */
static int etcd_call(struct kvtd_cluster *cl, CURL *h, const char *path, const char *body,
		     json_t **out, char *err, size_t err_len)
{
	struct etcd_buf b;
	json_error_t je;
	int rc = etcd_post(cl, h, path, body, &b, err, err_len);

	*out = NULL;
	if (rc < 0)
		return rc;
	*out = json_loadb(b.p, b.len, 0, &je);
	free(b.p);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		snprintf(err, err_len, "%s: not a JSON object", path);
		return -EIO;
	}
	return 0;
}

/* An int64 field that the gateway sends as a string (or a number). */
static int64_t etcd_int(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

/* Grant a lease and put this server's key under it. */
static int etcd_register(struct kvtd_cluster *cl, CURL *h, char *err, size_t err_len)
{
	char body[2048];
	char *k64 = NULL, *v64 = NULL;
	json_t *r = NULL;
	int64_t id;
	int rc;

	snprintf(body, sizeof(body), "{\"TTL\": %u}", cl->ttl_s);
	rc = etcd_call(cl, h, "/v3/lease/grant", body, &r, err, err_len);
	if (rc < 0)
		return rc;
	id = etcd_int(r, "ID");
	json_decref(r);
	if (id <= 0) {
		snprintf(err, err_len, "/v3/lease/grant: no lease ID in the answer");
		return -EIO;
	}
	k64 = kvtd_b64_encode(cl->self_key, strlen(cl->self_key));
	v64 = kvtd_b64_encode(cl->self_value, strlen(cl->self_value));
	if (!k64 || !v64) {
		free(k64);
		free(v64);
		return -ENOMEM;
	}
	snprintf(body, sizeof(body), "{\"key\": \"%s\", \"value\": \"%s\", \"lease\": \"%lld\"}",
		 k64, v64, (long long)id);
	free(k64);
	free(v64);
	rc = etcd_call(cl, h, "/v3/kv/put", body, &r, err, err_len);
	json_decref(r);
	if (rc < 0)
		return rc;
	cl->lease = id;
	kvtd_log(KVTD_INFO, "registered in etcd", "key=%s lease=%lld ttl_s=%u", cl->self_key,
		 (long long)id, cl->ttl_s);
	return 0;
}

/* Keep the lease alive; an expired one is forgotten (registered again). */
static int etcd_keepalive(struct kvtd_cluster *cl, CURL *h, char *err, size_t err_len)
{
	char body[128];
	json_t *r = NULL;
	int64_t ttl;
	int rc;

	snprintf(body, sizeof(body), "{\"ID\": \"%lld\"}", (long long)cl->lease);
	rc = etcd_call(cl, h, "/v3/lease/keepalive", body, &r, err, err_len);
	if (rc < 0)
		return rc;
	ttl = etcd_int(json_object_get(r, "result"), "TTL");
	json_decref(r);
	if (ttl <= 0) {
		kvtd_log(KVTD_WARN, "etcd lease expired; registering again", "lease=%lld",
			 (long long)cl->lease);
		cl->lease = 0;
		return etcd_register(cl, h, err, err_len);
	}
	return 0;
}

/* Read the member list and install it if it changed. */
static int etcd_read(struct kvtd_cluster *cl, CURL *h, char *err, size_t err_len)
{
	size_t pl = strlen(cl->prefix);
	char *end = strdup(cl->prefix), *k64, *e64, *body;
	struct kvtd_member *v;
	struct etcd_buf b;
	unsigned n, bad;
	int rc;

	if (!end)
		return -ENOMEM;
	end[pl - 1]++; /* the prefix's range end: its last byte + 1 */
	k64 = kvtd_b64_encode(cl->prefix, pl);
	e64 = kvtd_b64_encode(end, pl);
	free(end);
	body = k64 && e64 ? malloc(strlen(k64) + strlen(e64) + 64) : NULL;
	if (!body) {
		free(k64);
		free(e64);
		return -ENOMEM;
	}
	sprintf(body, "{\"key\": \"%s\", \"range_end\": \"%s\"}", k64, e64);
	free(k64);
	free(e64);
	rc = etcd_post(cl, h, "/v3/kv/range", body, &b, err, err_len);
	free(body);
	if (rc < 0)
		return rc;
	rc = kvtd_members_parse_etcd(b.p, b.len, &v, &n, &bad);
	free(b.p);
	if (rc < 0) {
		snprintf(err, err_len, "/v3/kv/range: %s",
			 rc == -ENOMEM ? "out of memory" : "not a range answer");
		return rc == -ENOMEM ? rc : -EIO;
	}
	if (bad != cl->bad_seen)
		kvtd_log(bad ? KVTD_WARN : KVTD_INFO, "etcd member entries that do not parse",
			 "prefix=%s skipped=%u", cl->prefix, bad);
	cl->bad_seen = bad;
	pthread_mutex_lock(&cl->lock);
	if (!kvtd_members_equal(cl->list, cl->count, v, n)) {
		struct kvtd_member *old = cl->list;
		unsigned was = cl->count;
		cl->list = v;
		cl->count = n;
		cl->epoch++;
		v = old;
		atomic_fetch_add(&cl->changes, 1);
		pthread_mutex_unlock(&cl->lock);
		kvtd_log(KVTD_INFO, "cluster membership changed", "members=%u was=%u", n, was);
	} else {
		pthread_mutex_unlock(&cl->lock);
	}
	free(v);
	return 0;
}

static void etcd_revoke(struct kvtd_cluster *cl, CURL *h)
{
	char body[128], err[256];
	json_t *r = NULL;

	if (!cl->lease)
		return;
	snprintf(body, sizeof(body), "{\"ID\": \"%lld\"}", (long long)cl->lease);
	if (etcd_call(cl, h, "/v3/lease/revoke", body, &r, err, sizeof(err)) == 0)
		kvtd_log(KVTD_INFO, "left the cluster: etcd lease revoked", "key=%s", cl->self_key);
	else
		kvtd_log(KVTD_WARN, "could not revoke the etcd lease; it runs out by itself",
			 "error=\"%s\"", err);
	json_decref(r);
	cl->lease = 0;
}

static void etcd_state(struct kvtd_cluster *cl, bool up, const char *err)
{
	char q[300];
	bool was;

	if (!up)
		atomic_fetch_add(&cl->etcd_errors, 1);
	pthread_mutex_lock(&cl->lock);
	was = cl->etcd_up;
	cl->etcd_up = up;
	pthread_mutex_unlock(&cl->lock);
	if (was && !up)
		kvtd_log(KVTD_WARN, "etcd unreachable; keeping the last known membership",
			 "etcd=%s error=%s members=%u", cl->url, kvtd_log_quote(q, sizeof(q), err),
			 cl->count);
	else if (!was && up)
		kvtd_log(KVTD_INFO, "etcd reachable", "etcd=%s", cl->url);
}

static void *etcd_main(void *arg)
{
	struct kvtd_cluster *cl = arg;
	unsigned period_ms = cl->ttl_s * 1000 / 3;
	CURL *h = curl_easy_init();
	bool first = true;

	if (period_ms > 1000)
		period_ms = 1000;
	if (period_ms < 100)
		period_ms = 100;
	if (h) {
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
	}
	pthread_mutex_lock(&cl->lock);
	while (!cl->stop) {
		char err[512] = "out of memory";
		struct timespec ts;
		int rc = -ENOMEM;

		bool leaving = cl->leave;

		pthread_mutex_unlock(&cl->lock);
		if (h && leaving) {
			/* Drained (repair.c): out of the list, still reading it. */
			etcd_revoke(cl, h);
			rc = etcd_read(cl, h, err, sizeof(err));
		} else if (h) {
			rc = cl->lease ? etcd_keepalive(cl, h, err, sizeof(err))
				       : etcd_register(cl, h, err, sizeof(err));
			if (rc == 0)
				rc = etcd_read(cl, h, err, sizeof(err));
		}
		if (first && rc < 0) {
			/* Say it once at start even though etcd_up starts false. */
			char q[600];
			kvtd_log(KVTD_WARN, "etcd unreachable; retrying", "etcd=%s error=%s", cl->url,
				 kvtd_log_quote(q, sizeof(q), err));
		}
		first = false;
		etcd_state(cl, rc == 0, err);
		pthread_mutex_lock(&cl->lock);
		ts = kvtd_deadline(CLOCK_MONOTONIC, (uint64_t)period_ms * 1000000u);
		while (!cl->stop && !(cl->leave && cl->lease) &&
		       pthread_cond_timedwait(&cl->cond, &cl->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&cl->lock);
	if (h) {
		etcd_revoke(cl, h);
		curl_easy_cleanup(h);
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * Start and stop
 */

/* The static list served: conf less out[] (NULL: none) and less self once
 * left.  cl->lock held. */
static void cluster_static_rebuild_locked(struct kvtd_cluster *cl, const bool *out,
					  const char *self)
{
	struct kvtd_member *nl = malloc((cl->conf_count ? cl->conf_count : 1) * sizeof(*nl));
	unsigned n = 0;
	if (!nl)
		return; /* keep the old list */
	for (unsigned i = 0; i < cl->conf_count; i++) {
		bool is_self = self && strcmp(cl->conf[i].addr, self) == 0;
		if ((out && out[i] && !is_self) || (cl->leave && is_self))
			continue;
		nl[n++] = cl->conf[i];
	}
	if (kvtd_members_equal(nl, n, cl->list, cl->count)) {
		free(nl);
		return;
	}
	free(cl->list);
	cl->list = nl;
	cl->count = n;
	cl->epoch++;
	atomic_fetch_add(&cl->changes, 1);
	kvtd_log(KVTD_INFO, "static cluster members", "members=%u of=%u", n, cl->conf_count);
}

int kvtd_cluster_leave(struct kvtd_server *srv, const char *self)
{
	struct kvtd_cluster *cl = &srv->cluster;
	if (cl->source == KVTD_CLUSTER_NONE)
		return -ENOTSUP;
	pthread_mutex_lock(&cl->lock);
	cl->leave = true;
	if (cl->source == KVTD_CLUSTER_STATIC) {
		/* others as they were: only self goes */
		bool *out = calloc(cl->conf_count ? cl->conf_count : 1, sizeof(*out));
		for (unsigned i = 0; out && i < cl->conf_count; i++) {
			bool listed = false;
			for (unsigned j = 0; j < cl->count && !listed; j++)
				listed = strcmp(cl->list[j].addr, cl->conf[i].addr) == 0;
			out[i] = !listed;
		}
		if (out)
			cluster_static_rebuild_locked(cl, out, self);
		free(out);
	}
	free(cl->leave_self);
	cl->leave_self = self ? strdup(self) : NULL;
	pthread_cond_broadcast(&cl->cond);
	pthread_mutex_unlock(&cl->lock);
	return 0;
}

struct kvtd_member *kvtd_cluster_static_conf(struct kvtd_server *srv, unsigned *n)
{
	struct kvtd_cluster *cl = &srv->cluster;
	struct kvtd_member *m = NULL;
	*n = 0;
	pthread_mutex_lock(&cl->lock);
	if (cl->conf_count && (m = malloc(cl->conf_count * sizeof(*m)))) {
		memcpy(m, cl->conf, cl->conf_count * sizeof(*m));
		*n = cl->conf_count;
	}
	pthread_mutex_unlock(&cl->lock);
	return m;
}

void kvtd_cluster_static_set(struct kvtd_server *srv, const bool *out)
{
	struct kvtd_cluster *cl = &srv->cluster;
	pthread_mutex_lock(&cl->lock);
	if (cl->source == KVTD_CLUSTER_STATIC)
		cluster_static_rebuild_locked(cl, out, cl->leave_self);
	pthread_mutex_unlock(&cl->lock);
}

/* The native TCP listener's "HOST:PORT", or NULL. */
static const char *cluster_tcp_name(struct kvtd_server *srv)
{
	for (unsigned i = 0; i < srv->listener_count; i++)
		if (!srv->listeners[i].is_unix && srv->listeners[i].proto == KVTD_PROTO_NATIVE)
			return srv->listeners[i].name;
	return NULL;
}

static int cluster_fail(const char *msg, const char *fmt, const char *what)
{
	kvtd_log(KVTD_ERROR, msg, fmt, what);
	fprintf(stderr, "kvtierd: %s: %s\n", msg, what);
	return -EINVAL;
}

int kvtd_cluster_start(struct kvtd_server *srv)
{
	struct kvtd_cluster *cl = &srv->cluster;
	const struct kvtd_config *cfg = &srv->cfg;
	pthread_condattr_t ca;
	char err[512];
	const char *addr;
	size_t pl;
	int rc;

	pthread_mutex_init(&cl->lock, NULL);
	pthread_condattr_init(&ca);
	/* the etcd thread's waits are monotonic deadlines: unchecked, a
	 * condition left on CLOCK_REALTIME would wait them out wrong */
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl->cond, &ca); /* made all the same: cluster_stop's to leave */
	pthread_condattr_destroy(&ca);
	cl->source = KVTD_CLUSTER_NONE;
	if (rc != 0) {
		kvtd_log(KVTD_ERROR, "cannot use the monotonic clock", "error=\"%s\"",
			 strerror(rc));
		return -ENOTSUP; /* not -EINVAL: not a usage error */
	}
	if (cfg->members && cfg->etcd)
		return cluster_fail("--members and --etcd exclude each other", "%s",
				    "give one source of membership");
	if (cfg->members) {
		rc = kvtd_members_parse_static(cfg->members, &cl->list, &cl->count, err,
					       sizeof(err));
		if (rc < 0)
			return rc == -ENOMEM ? rc : cluster_fail("--members refused", "error=\"%s\"", err);
		cl->source = KVTD_CLUSTER_STATIC;
		cl->epoch = 1;
		cl->conf = malloc(cl->count * sizeof(*cl->conf));
		if (!cl->conf)
			return -ENOMEM;
		memcpy(cl->conf, cl->list, cl->count * sizeof(*cl->conf));
		cl->conf_count = cl->count;
		kvtd_log(KVTD_INFO, "static cluster members", "members=%u", cl->count);
		return 0;
	}
	if (!cfg->etcd)
		return 0;
	addr = cfg->advertise ? cfg->advertise : cluster_tcp_name(srv);
	if (!addr)
		return cluster_fail("--etcd needs a TCP listener or --advertise HOST:PORT", "%s",
				    "engines reach members over TCP");
	if (!kvtd_member_addr_ok(addr, strlen(addr)))
		return cluster_fail("--advertise: not HOST:PORT", "advertise=%s", addr);
	if (!cfg->advertise && (strncmp(addr, "0.0.0.0:", 8) == 0 || strncmp(addr, "[::]:", 5) == 0))
		return cluster_fail("--etcd with a wildcard --listen needs --advertise HOST:PORT",
				    "listen=%s", addr);
	if (strncmp(cfg->etcd, "http://", 7) != 0 && strncmp(cfg->etcd, "https://", 8) != 0)
		return cluster_fail("--etcd: want http://HOST:PORT or https://HOST:PORT", "etcd=%s",
				    cfg->etcd);
	cl->url = strdup(cfg->etcd);
	cl->prefix = strdup(cfg->etcd_prefix ? cfg->etcd_prefix : KVTD_ETCD_PREFIX);
	cl->self_addr = strdup(addr);
	if (!cl->url || !cl->prefix || !cl->self_addr)
		return -ENOMEM;
	pl = strlen(cl->url);
	while (pl && cl->url[pl - 1] == '/')
		cl->url[--pl] = 0;
	if (!cl->prefix[0])
		return cluster_fail("--etcd-prefix: empty", "%s", "want e.g. /kvtier/members/");
	cl->self_key = malloc(strlen(cl->prefix) + strlen(addr) + 1);
	if (!cl->self_key)
		return -ENOMEM;
	sprintf(cl->self_key, "%s%s", cl->prefix, addr);
	cl->self_value = kvtd_members_self_value(addr, cfg->dram_bytes + cfg->ssd_bytes);
	if (!cl->self_value)
		return -ENOMEM;
	cl->ttl_s = cfg->etcd_ttl_s ? cfg->etcd_ttl_s : KVTD_ETCD_TTL_S;
	cl->source = KVTD_CLUSTER_ETCD;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = pthread_create(&cl->thread, NULL, etcd_main, cl);
	if (rc != 0)
		return -rc;
	cl->started = true;
	kvtd_log(KVTD_INFO, "cluster membership through etcd", "etcd=%s key=%s ttl_s=%u",
		 cl->url, cl->self_key, cl->ttl_s);
	return 0;
}

void kvtd_cluster_stop(struct kvtd_server *srv)
{
	struct kvtd_cluster *cl = &srv->cluster;

	if (cl->started) {
		pthread_mutex_lock(&cl->lock);
		cl->stop = true;
		pthread_cond_signal(&cl->cond);
		pthread_mutex_unlock(&cl->lock);
		pthread_join(cl->thread, NULL);
		cl->started = false;
	}
	free(cl->list);
	free(cl->conf);
	free(cl->leave_self);
	cl->conf = NULL;
	cl->leave_self = NULL;
	cl->conf_count = 0;
	free(cl->url);
	free(cl->prefix);
	free(cl->self_key);
	free(cl->self_value);
	free(cl->self_addr);
	cl->list = NULL;
	cl->count = 0;
	cl->url = cl->prefix = cl->self_key = cl->self_value = cl->self_addr = NULL;
}

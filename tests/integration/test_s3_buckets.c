/*
 * test_s3_buckets.c - an S3 bucket is its namespace's word in the
 * registry (doc/s3.md "Buckets, keys and values"), and a bucket an older
 * kvtierd created -- a registered namespace and a marker block, key "B",
 * 8 bytes: its creation time -- is kept at start (s3ops.c
 * kvtd_s3_buckets_migrate):
 *   1. such a bucket, made over the native protocol as the older kvtierd
 *      made it (its marker written down to SSD), and a namespace of the
 *      same shape without a marker (a bucket deleted then);
 *   2. restart: the first is a bucket -- HeadBucket 200, listed with the
 *      marker's creation time, a PUT and GET in it -- the second is not;
 *   3. its marker deleted (as the SSD log's wrap took markers) and a
 *      restart: still a bucket, same creation time (the word is in the
 *      registry file; until 2026-12-06 this was NoSuchBucket);
 *   4. DeleteBucket, restart: gone, and CreateBucket makes it again;
 *   5. ListBuckets lists by name (until 2026-12-06 by namespace id).
 *
 * argv[1]: kvtierd.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define TENANT "bkt"
#define SECRET "secret-of-the-bkt-tenant"
#define CTIME UINT64_C(1700000000123) /* 2023-11-14T22:13:20.123Z */

static char endpoint[64];

struct body {
	char p[8192];
	size_t len;
};

static size_t sink(char *p, size_t size, size_t nm, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nm;
	if (b && b->len + n < sizeof(b->p)) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
		b->p[b->len] = 0;
	}
	return n;
}

/* One signed request: its HTTP status; the answer's body into out. */
static long s3_call(const char *method, const char *path, const void *data, size_t len,
		    struct body *out)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char url[256];
	long status = 0;

	hd = curl_slist_append(hd, "Expect:");
	snprintf(url, sizeof(url), "%s%s", endpoint, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	curl_easy_setopt(h, CURLOPT_USERPWD, TENANT ":" SECRET);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (data) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
	}
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	return status;
}

/* The descriptor of the tenant's bucket name (s3ops.c s3d_bucket_desc). */
static struct kvt_ns_desc bucket_desc(const char *model)
{
	return (struct kvt_ns_desc){ .model = model, .dtype = "bytes", .layout = "s3-object",
				     .block_tokens = 1, .tp_size = 1, .pp_size = 1,
				     .tenant = TENANT, .flags = KVT_NS_PERSISTENT };
}

/* Until the write-down queue is empty (within 10 s). */
static void drained(const struct tsrv *srv)
{
	for (int i = 0; i < 200; i++) {
		char *page = tsrv_http_body(tsrv_listener_port(srv->log, "metrics"), "/metrics");
		uint64_t v = tsrv_metric(page, "kvtier_ssd_writedown_pending_bytes");
		free(page);
		if (v == 0)
			return;
		tsrv_sleep_ms(50);
	}
	T_FAIL("the write-down queue did not drain");
}

static void restart(struct tsrv *srv, const char *bin, const char *base, const char *dir,
		    const char *tenants, const char *const *extra)
{
	T_EQ_INT(tsrv_stop(srv), 0);
	tsrv_start(srv, bin, base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv->log));
}

/* Does the server's log hold text? */
static bool log_has(const char *log, const char *text)
{
	static char buf[1 << 16];
	FILE *f = fopen(log, "r");
	size_t n;

	T_ASSERT(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, text) != NULL;
}

/* Is bucket name listed by ListBuckets, with CreationDate date? */
static bool listed(const char *name, const char *date)
{
	struct body b = { .len = 0 };
	char want[160];

	T_EQ_INT((int)s3_call("GET", "/", NULL, 0, &b), 200);
	snprintf(want, sizeof(want), "<Bucket><Name>%s</Name><CreationDate>%s</CreationDate>",
		 name, date ? date : "");
	if (!date)
		want[strlen(want) - strlen("<CreationDate></CreationDate>")] = 0;
	return strstr(b.p, want) != NULL;
}

int main(int argc, char **argv)
{
	char base[600], dir[700], tenants[700];
	const char *extra[] = { "--s3", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
				"--threads", "1", "--dram", "16M", "--ssd", "4M",
				"--set", "ssd.segment=1M", NULL };
	const char *date = "2023-11-14T22:13:20.123Z";
	struct kvt_ns_desc old = bucket_desc("s3/old"), nomark = bucket_desc("s3/nomark");
	uint8_t dg_old[PROTO_DIGEST_LEN], dg_nomark[PROTO_DIGEST_LEN], mk[8];
	struct kvt_key k = { .len = 1, .bytes = { 'B' } };
	struct iovec iv = { mk, sizeof(mk) };
	struct body b = { .len = 0 };
	struct tsrv srv;
	struct kc c;
	FILE *f;

	if (argc < 2)
		T_SKIP("usage: test_s3_buckets KVTIERD");
	snprintf(base, sizeof(base), "%s/test_s3_buckets.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	T_ASSERT(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	T_ASSERT((f = fopen(tenants, "w")));
	fprintf(f, TENANT " " SECRET " tenant\n");
	fclose(f);
	T_ASSERT(chmod(tenants, 0600) == 0);
	T_EQ_INT(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);

	/* 1: as an older kvtierd left them. */
	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	T_RC(kc_dial(&c, srv.port, TENANT, SECRET), 0);
	T_RC(kc_register(&c, &old, dg_old, NULL, 0), 0);
	T_RC(kc_register(&c, &nomark, dg_nomark, NULL, 0), 0);
	for (int i = 0; i < 8; i++)
		mk[i] = (uint8_t)(CTIME >> (8 * i));
	T_RC(kc_put(&c, dg_old, &k, &iv, 1, NULL), 0);
	kc_close(&c);
	drained(&srv);

	/* 2: kept from its marker. */
	restart(&srv, argv[1], base, dir, tenants, extra);
	T_ASSERT(log_has(srv.log, "S3 buckets kept in the namespace registry"));
	T_EQ_INT((int)s3_call("HEAD", "/old", NULL, 0, NULL), 200);
	T_EQ_INT((int)s3_call("HEAD", "/nomark", NULL, 0, NULL), 404);
	T_ASSERT(listed("old", date));
	T_ASSERT(!listed("nomark", NULL));
	T_EQ_INT((int)s3_call("PUT", "/old/x", "bytes", 5, NULL), 200);
	T_EQ_INT((int)s3_call("GET", "/old/x", NULL, 0, &b), 200);
	T_EQ_INT((int)b.len, 5);
	T_EQ_MEM(b.p, "bytes", 5);

	/* 3: the marker gone, the bucket stays. */
	T_RC(kc_dial(&c, srv.port, TENANT, SECRET), 0);
	T_RC(kc_delete(&c, dg_old, &k), 0);
	kc_close(&c);
	restart(&srv, argv[1], base, dir, tenants, extra);
	T_EQ_INT((int)s3_call("HEAD", "/old", NULL, 0, NULL), 200);
	T_ASSERT(listed("old", date));
	T_EQ_INT((int)s3_call("PUT", "/old", NULL, 0, NULL), 409);

	/* 4: deleted stays deleted; created again. */
	T_EQ_INT((int)s3_call("DELETE", "/old", NULL, 0, NULL), 409); /* x is in it */
	T_EQ_INT((int)s3_call("DELETE", "/old/x", NULL, 0, NULL), 204);
	T_EQ_INT((int)s3_call("DELETE", "/old", NULL, 0, NULL), 204);
	T_EQ_INT((int)s3_call("DELETE", "/old", NULL, 0, NULL), 404);
	restart(&srv, argv[1], base, dir, tenants, extra);
	T_EQ_INT((int)s3_call("HEAD", "/old", NULL, 0, NULL), 404);
	T_EQ_INT((int)s3_call("PUT", "/old/y", "y", 1, NULL), 404);
	T_ASSERT(!listed("old", NULL));
	T_EQ_INT((int)s3_call("PUT", "/old", NULL, 0, NULL), 200);
	T_EQ_INT((int)s3_call("HEAD", "/old", NULL, 0, NULL), 200);
	T_ASSERT(listed("old", NULL) && !listed("old", date));

	/* 5: ListBuckets in name order, as S3 (not the namespaces' ids,
	 * the order of creation: old, zeta, mid, alpha before). */
	T_EQ_INT((int)s3_call("PUT", "/zeta", NULL, 0, NULL), 200);
	T_EQ_INT((int)s3_call("PUT", "/mid", NULL, 0, NULL), 200);
	T_EQ_INT((int)s3_call("PUT", "/alpha", NULL, 0, NULL), 200);
	{
		const char *order[] = { "alpha", "mid", "old", "zeta" }, *at;
		char want[80];
		b.len = 0;
		T_EQ_INT((int)s3_call("GET", "/", NULL, 0, &b), 200);
		at = b.p;
		for (unsigned i = 0; i < 4; i++) {
			snprintf(want, sizeof(want), "<Bucket><Name>%s</Name>", order[i]);
			at = strstr(at, want);
			T_ASSERT(at != NULL);
		}
	}

	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
	curl_global_cleanup();
	return 0;
}

/*
 * test_s3_park.c - kvtierd parks an S3 PUT that must wait for SSD
 * write-down room instead of blocking its event loop (s3d.c "Parking",
 * doc/kvtierd.md "Persistent write-downs").  One loop thread
 * (--threads 1), a write-down queue of 1 MiB and a writer that takes
 * 1200 ms per write (ssd.debug_write_delay_ms), ssd.writedown_wait_ms
 * 800:
 *   1. a 1 MiB PUT fills the queue; the next one parks.  While it waits,
 *      a GET on another connection -- the same loop thread -- is answered
 *      within 300 ms (the library's wait in the loop took the whole wait);
 *   2. no room within 800 ms: the parked PUT is answered 503 SlowDown,
 *      nothing stored (a GET of it: 404), counted in
 *      server.put_park_timeouts;
 *   3. a PUT parked 700 ms into a write: room comes 500 ms later, the
 *      PUT succeeds and reads back byte for byte;
 *   4. the same for a CopyObject (reserved after its source is read).
 * The counters are the same on /metrics as in STATS.
 *   5. a DeleteObject acknowledged (204) while a write-down holds the
 *      writer: kvtierd killed with -9 at once and restarted, the object is
 *      gone -- the 204 waits for the tombstone to be durable, as a native
 *      DELETE does (it came at once, and the object came back).
 *   6. the same for a DeleteBucket's clear (an upload's part on SSD);
 *   7. the same for an AbortMultipartUpload's deletes: its upload stays
 *      gone after the kill -9 (it came back until s3e47, 2026-12-07).
 *
 * argv[1]: kvtierd.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define TENANT "park"
#define SECRET "secret-of-the-park-tenant"
#define ADMIN_SECRET "secret-of-the-park-admin"
#define OBJ (1u << 20)

static char endpoint[64];

struct body {
	uint8_t *p;
	size_t len, cap;
};

static size_t sink(char *p, size_t size, size_t nm, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nm;
	if (b && b->len + n <= b->cap) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
	return n;
}

/* One signed request on a fresh connection: its HTTP status; *ms its
 * duration. */
static long s3_call_hdr(const char *method, const char *path, const void *data, size_t len,
			struct body *out, uint64_t *ms, const char *extra_hdr)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char url[256];
	long status = 0;
	uint64_t t0 = t_now_ms();

	hd = curl_slist_append(hd, "Expect:");
	if (extra_hdr)
		hd = curl_slist_append(hd, extra_hdr);
	snprintf(url, sizeof(url), "%s%s", endpoint, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	curl_easy_setopt(h, CURLOPT_USERPWD, TENANT ":" SECRET);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
	if (data) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	T_EQ_INT(curl_easy_perform(h), CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	if (ms)
		*ms = t_now_ms() - t0;
	return status;
}

static long s3_call(const char *method, const char *path, const void *data, size_t len,
		    struct body *out, uint64_t *ms)
{
	return s3_call_hdr(method, path, data, len, out, ms, NULL);
}

struct put_job {
	const char *path;
	const uint8_t *data;
	long status;
	uint64_t ms;
};

static void *put_thread(void *arg)
{
	struct put_job *j = arg;
	j->status = s3_call("PUT", j->path, j->data, OBJ, NULL, &j->ms);
	return NULL;
}

/* A GET of /b/small while a PUT is parked: its latency. */
static uint64_t get_small(const uint8_t *want)
{
	uint8_t buf[4096];
	struct body b = { buf, 0, sizeof(buf) };
	uint64_t ms;
	T_EQ_INT((int)s3_call("GET", "/bkt/small", NULL, 0, &b, &ms), 200);
	T_EQ_INT((int)b.len, 100);
	T_EQ_MEM(buf, want, 100);
	return ms;
}

/* A server statistic, read as the admin over the native protocol. */
static uint64_t stat_of(const struct tsrv *srv, const char *name)
{
	struct kc c;
	uint64_t v = 0;
	T_RC(kc_connect_tcp(&c, srv->port), 0);
	T_RC(kc_login(&c, "root", ADMIN_SECRET), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_ALL, name, &v), 0);
	kc_close(&c);
	return v;
}

/* A metric without labels from the server's /metrics page: its value;
 * fails the test if the page has no such line. */
static uint64_t metric_of(const struct tsrv *srv, const char *name)
{
	char *page = tsrv_http_body(tsrv_listener_port(srv->log, "metrics"), "/metrics");
	uint64_t v = tsrv_metric(page, name);
	free(page);
	return v;
}

/* Until the write-down queue is empty (within 10 s). */
static void drained(const struct tsrv *srv)
{
	for (int i = 0; i < 200; i++) {
		if (stat_of(srv, "ssd.writedown_pending_bytes") == 0)
			return;
		tsrv_sleep_ms(50);
	}
	T_FAIL("the write-down queue did not drain");
}

int main(int argc, char **argv)
{
	char base[600], dir[700], tenants[700];
	const char *extra[] = { "--s3", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
				"--threads", "1", "--ssd", "64M",
				"--set", "ssd.writedown_max=1M",
				"--set", "ssd.debug_write_delay_ms=1200",
				"--set", "ssd.writedown_wait_ms=800", NULL };
	uint8_t *v1 = malloc(OBJ), *v2 = malloc(OBJ), *back = malloc(OBJ + 1);
	uint8_t small[100];
	struct put_job j;
	struct tsrv srv;
	pthread_t th;
	uint64_t get_ms, t0;
	FILE *f;

	if (argc < 2)
		T_SKIP("usage: test_s3_park KVTIERD");
	T_ASSERT(v1 && v2 && back);
	snprintf(base, sizeof(base), "%s/test_s3_park.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	T_ASSERT(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	T_ASSERT((f = fopen(tenants, "w")));
	fprintf(f, TENANT " " SECRET " tenant\nroot " ADMIN_SECRET " admin\n");
	fclose(f);
	T_ASSERT(chmod(tenants, 0600) == 0);
	T_EQ_INT(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
	tsrv_fill(v1, OBJ, 1);
	tsrv_fill(v2, OBJ, 2);
	tsrv_fill(small, sizeof(small), 3);

	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
	T_EQ_INT((int)s3_call("PUT", "/bkt", NULL, 0, NULL, NULL), 200);
	T_EQ_INT((int)s3_call("PUT", "/bkt/small", small, sizeof(small), NULL, NULL), 200);
	drained(&srv); /* the bucket's marker and small are on SSD */

	/* 1 + 2: o1 takes the queue for 1200 ms; o2 parks and times out,
	 * while a GET is served. */
	T_EQ_INT((int)s3_call("PUT", "/bkt/o1", v1, OBJ, NULL, NULL), 200);
	j = (struct put_job){ "/bkt/o2", v2, 0, 0 };
	T_ASSERT(pthread_create(&th, NULL, put_thread, &j) == 0);
	tsrv_sleep_ms(150);
	get_ms = get_small(small);
	pthread_join(th, NULL);
	fprintf(stderr, "parked PUT: %ld after %llu ms; GET meanwhile: %llu ms\n", j.status,
		(unsigned long long)j.ms, (unsigned long long)get_ms);
	T_LE_INT((long long)get_ms, 300);
	T_EQ_INT((int)j.status, 503);
	T_GE_INT((long long)j.ms, 750);
	T_EQ_INT((int)s3_call("GET", "/bkt/o2", NULL, 0, NULL, NULL), 404);

	/* 3: room comes while o4 is parked. */
	drained(&srv); /* o1 written */
	T_EQ_INT((int)s3_call("PUT", "/bkt/o3", v1, OBJ, NULL, NULL), 200);
	t0 = t_now_ms();
	tsrv_sleep_ms(700);
	j = (struct put_job){ "/bkt/o4", v2, 0, 0 };
	put_thread(&j);
	fprintf(stderr, "PUT parked 700 ms into a write: %ld after %llu ms (%llu after o3)\n",
		j.status, (unsigned long long)j.ms, (unsigned long long)(t_now_ms() - t0));
	T_EQ_INT((int)j.status, 200);
	{
		struct body b = { back, 0, OBJ + 1 };
		T_EQ_INT((int)s3_call("GET", "/bkt/o4", NULL, 0, &b, NULL), 200);
		T_EQ_INT((int)b.len, (int)OBJ);
		T_EQ_MEM(back, v2, OBJ);
	}
	/* 4: a CopyObject (its reservation after the source is read) waits
	 * on a KVT_OP_ROOM too, and lands once room comes. */
	drained(&srv);
	T_EQ_INT((int)s3_call("PUT", "/bkt/o5", v1, OBJ, NULL, NULL), 200);
	tsrv_sleep_ms(700);
	{
		uint8_t buf[4096];
		struct body b = { buf, 0, sizeof(buf) };
		uint64_t ms;
		T_EQ_INT((int)s3_call_hdr("PUT", "/bkt/copy", NULL, 0, NULL, &ms,
					  "x-amz-copy-source: /bkt/small"), 200);
		fprintf(stderr, "CopyObject parked 700 ms into a write: %llu ms\n",
			(unsigned long long)ms);
		T_EQ_INT((int)s3_call("GET", "/bkt/copy", NULL, 0, &b, NULL), 200);
		T_EQ_INT((int)b.len, (int)sizeof(small));
		T_EQ_MEM(buf, small, sizeof(small));
	}
	T_GE_INT((long long)stat_of(&srv, "server.put_parked"), 3);
	T_EQ_INT((int)stat_of(&srv, "server.put_park_timeouts"), 1);
	T_EQ_U64(metric_of(&srv, "kvtier_server_put_parked_total"),
		 stat_of(&srv, "server.put_parked"));
	T_EQ_U64(metric_of(&srv, "kvtier_server_put_park_timeouts_total"), 1);

	/* 5: DeleteObject of small (on SSD) while o6's write-down holds the
	 * writer for 1200 ms; kill -9 right after the 204. */
	drained(&srv);
	T_EQ_INT((int)s3_call("PUT", "/bkt/o6", v1, OBJ, NULL, NULL), 200);
	{
		uint64_t ms;
		T_EQ_INT((int)s3_call("DELETE", "/bkt/small", NULL, 0, NULL, &ms), 204);
		fprintf(stderr, "DeleteObject behind a 1200 ms write-down: 204 after %llu ms\n",
			(unsigned long long)ms);
	}
	tsrv_kill9(&srv);
	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
	T_EQ_INT((int)s3_call("GET", "/bkt/small", NULL, 0, NULL, NULL), 404);
	T_EQ_INT((int)s3_call("GET", "/bkt/o4", NULL, 0, NULL, NULL), 200);

	/* 6: DeleteBucket of a bucket whose unfinished upload has a part on
	 * SSD, while o7's write-down holds the writer; kill -9 right after
	 * the 204.  Created again, the bucket has no upload: its clear was
	 * durable before the 204 (before 2026-12-06 the clear waited behind
	 * the write-down, the bucket went at once, and the upload came back
	 * with it). */
	T_EQ_INT((int)s3_call("PUT", "/gone", NULL, 0, NULL, NULL), 200);
	{
		uint8_t buf[4096];
		struct body b = { buf, 0, sizeof(buf) };
		char part[200];
		const uint8_t *p, *q;
		T_EQ_INT((int)s3_call("POST", "/gone/x?uploads=", "", 0, &b, NULL), 200);
		p = memmem(b.p, b.len, "<UploadId>", 10);
		T_ASSERT(p != NULL);
		p += 10;
		q = memmem(p, b.len - (size_t)(p - b.p), "</UploadId>", 11);
		T_ASSERT(q != NULL);
		snprintf(part, sizeof(part), "/gone/x?partNumber=1&uploadId=%.*s", (int)(q - p),
			 (const char *)p);
		T_EQ_INT((int)s3_call("PUT", part, small, sizeof(small), NULL, NULL), 200);
	}
	drained(&srv);
	T_EQ_INT((int)s3_call("PUT", "/bkt/o7", v1, OBJ, NULL, NULL), 200);
	{
		uint64_t ms;
		T_EQ_INT((int)s3_call("DELETE", "/gone", NULL, 0, NULL, &ms), 204);
		fprintf(stderr, "DeleteBucket behind a 1200 ms write-down: 204 after %llu ms\n",
			(unsigned long long)ms);
	}
	tsrv_kill9(&srv);
	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
	T_EQ_INT((int)s3_call("PUT", "/gone", NULL, 0, NULL, NULL), 200);
	{
		uint8_t buf[8192];
		struct body b = { buf, 0, sizeof(buf) };
		T_EQ_INT((int)s3_call("GET", "/gone?uploads=", NULL, 0, &b, NULL), 200);
		T_ASSERT(memmem(b.p, b.len, "<UploadId>", 10) == NULL);
	}

	/* 7: AbortMultipartUpload of an upload whose marker and part are on
	 * SSD, while o8's write-down holds the writer; kill -9 right after
	 * the 204.  The upload stays gone: the Abort's deletes were durable
	 * before the 204 (until s3e47, 2026-12-07, the 204 came with the
	 * tombstones still queued behind the write-down, and the upload came
	 * back, its part listed). */
	{
		uint8_t buf[4096];
		struct body b = { buf, 0, sizeof(buf) };
		char part[200], abort_path[200];
		const uint8_t *p, *q;
		uint64_t ms;
		T_EQ_INT((int)s3_call("POST", "/bkt/ab?uploads=", "", 0, &b, NULL), 200);
		p = memmem(b.p, b.len, "<UploadId>", 10);
		T_ASSERT(p != NULL);
		p += 10;
		q = memmem(p, b.len - (size_t)(p - b.p), "</UploadId>", 11);
		T_ASSERT(q != NULL);
		snprintf(part, sizeof(part), "/bkt/ab?partNumber=1&uploadId=%.*s", (int)(q - p),
			 (const char *)p);
		snprintf(abort_path, sizeof(abort_path), "/bkt/ab?uploadId=%.*s", (int)(q - p),
			 (const char *)p);
		T_EQ_INT((int)s3_call("PUT", part, small, sizeof(small), NULL, NULL), 200);
		drained(&srv);
		T_EQ_INT((int)s3_call("PUT", "/bkt/o8", v1, OBJ, NULL, NULL), 200);
		T_EQ_INT((int)s3_call("DELETE", abort_path, NULL, 0, NULL, &ms), 204);
		fprintf(stderr, "AbortMultipartUpload behind a 1200 ms write-down: 204 after "
			"%llu ms\n", (unsigned long long)ms);
		tsrv_kill9(&srv);
		tsrv_start(&srv, argv[1], base, dir, tenants, extra);
		snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
		b.len = 0;
		T_EQ_INT((int)s3_call("GET", abort_path, NULL, 0, &b, NULL), 404);
		T_ASSERT(memmem(b.p, b.len, "NoSuchUpload", 12) != NULL);
		b.len = 0;
		T_EQ_INT((int)s3_call("GET", "/bkt?uploads=", NULL, 0, &b, NULL), 200);
		T_ASSERT(memmem(b.p, b.len, "<UploadId>", 10) == NULL);
	}

	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
	free(v1);
	free(v2);
	free(back);
	return 0;
}

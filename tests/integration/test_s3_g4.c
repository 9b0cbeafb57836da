/*
 * test_s3_g4.c - kvtier's shared tier (G4) whose object store is another
 * kvtierd's S3 listener (doc/s3.md, doc/shared.md): a store writes
 * blocks of several sizes through its S3 backend (lib/shs3.c: single PUTs
 * and a multipart upload), a fresh store (empty DRAM) reads every one back
 * from the shared tier byte for byte, a delete is seen by the next reader,
 * and the serving kvtierd restarted still holds the objects; then the
 * backend's garbage collector (kvt_shared_gc_s3: ListObjectsV2 pages,
 * DeleteObject) counts what is there, removes the oldest over a budget,
 * and a fresh store misses exactly what it removed; last, the backend's
 * listing pages one key at a time across keys of S3's longest, 1,024
 * bytes, whose continuation tokens (kvtierd's: the key in hex) are 2,048
 * bytes.
 *
 * argv[1]: kvtierd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "server.h"
#include "s3list.h"
#include "shs3.h"
#include "t.h"
#include "tstore.h"

#define TENANT "g4"
#define SECRET "secret-of-the-g4-tenant"

static char endpoint[64], creds[1024];

static size_t sink(char *p, size_t size, size_t nm, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * nm;
}

/* A PUT of path (a bucket, "bucket/key": no byte of it to escape) with
 * body (NULL: none), signed by libcurl: its HTTP status. */
static long put_signed(const char *path, const char *body)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char url[1200];
	long status = 0;

	snprintf(url, sizeof(url), "%s/%s", endpoint, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	curl_easy_setopt(h, CURLOPT_USERPWD, TENANT ":" SECRET);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	T_EQ_INT(curl_easy_perform(h), CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	return status;
}

struct long_seen {
	unsigned count;
	char keys[3][S3LIST_KEY_MAX + 1];
};

static int long_cb(void *ctx, const char *name, uint64_t len, int64_t mtime_s)
{
	struct long_seen *l = ctx;
	T_ASSERT(l->count < 3);
	T_EQ_U64(len, 1);
	T_ASSERT(mtime_s > 1700000000);
	snprintf(l->keys[l->count++], sizeof(l->keys[0]), "%s", name);
	return 0;
}

/* Three keys of 1,024 bytes under "long/", listed by the shared tier's S3
 * client a page (max-keys=1) at a time: each page's token is a key in
 * hex, 2,048 bytes, sent back (percent-encoding leaves hex as it is).
 * Before: past S3LIST_TOKEN_MAX (1,023), the first page was -EIO. */
static void list_long_keys(void)
{
	static struct kvt_mem mem;
	struct shs3_config cfg = { .endpoint = endpoint, .bucket = "kvt", .conns = 2,
				   .timeout_ms = 20000, .part_size = UINT64_C(5) << 20,
				   .list_page = 1 };
	struct shs3_creds c;
	struct long_seen seen = { 0 };
	char keys[3][S3LIST_KEY_MAX + 1], path[S3LIST_KEY_MAX + 8];
	struct shs3 *s3;

	for (unsigned i = 0; i < 3; i++) {
		memcpy(keys[i], "long/", 5);
		memset(keys[i] + 5, 'a' + (int)i, S3LIST_KEY_MAX - 5);
		keys[i][S3LIST_KEY_MAX] = 0;
		snprintf(path, sizeof(path), "kvt/%s", keys[i]);
		T_EQ_INT((int)put_signed(path, "x"), 200);
	}
	kvt_mem_init(&mem);
	memset(&c, 0, sizeof(c));
	strcpy(c.access_key, TENANT);
	strcpy(c.secret_key, SECRET);
	strcpy(c.region, "us-east-1");
	T_OK(shs3_open(&s3, &cfg, &c, &mem, NULL));
	T_OK(shs3_list(s3, "long/", long_cb, &seen));
	T_EQ_INT(seen.count, 3);
	for (unsigned i = 0; i < 3; i++)
		T_EQ_STR(seen.keys[i], keys[i]);
	T_EQ_U64(atomic_load(&shs3_stats(s3)->errors), 0);
	shs3_close(s3);
}

static struct kvt_store *open_g4(void)
{
	struct kvt_store *s;
	const char *opts[][2] = {
		{ "dram.capacity", "128M" }, { "dram.chunk", "64K" }, { "dram.shards", "1" },
		{ "dram.prefault", "off" },
		{ "shared.s3_endpoint", endpoint }, { "shared.s3_bucket", "kvt" },
		{ "shared.s3_credentials", creds }, { "shared.threads", "4" },
		{ "shared.s3_conns", "4" }, { "shared.s3_timeout_ms", "20000" },
		{ "shared.s3_part_size", "5M" },
	};
	T_OK(kvt_store_create(&s));
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		T_OK(kvt_store_set_option(s, opts[i][0], opts[i][1]));
	T_OK(kvt_store_open(s));
	return s;
}

static uint32_t ns_of(struct kvt_store *s)
{
	struct kvt_ns_desc d = t_desc("g4-model", 0);
	uint32_t id;
	d.flags = KVT_NS_PERSISTENT;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

/* tiny, unaligned, a page, 1 MiB, 12 MiB (a multipart upload at 5M parts) */
static const size_t sizes[] = { 1, 5000, 4096, (1u << 20) + 123, (UINT64_C(12) << 20) + 5 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

int main(int argc, char **argv)
{
	char base[600], dir[700], tenants[700];
	/* SSD segments large enough for the 12 MiB object: a value larger than
	 * a segment stays in DRAM only and would not survive the restart */
	const char *extra[] = { "--s3", "127.0.0.1:0", "--ssd", "256M", "--set", "ssd.segment=16M",
				NULL };
	struct tsrv srv;
	struct kvt_store *s;
	uint32_t ns;
	FILE *f;

	if (argc < 2)
		T_SKIP("usage: test_s3_g4 KVTIERD");
	snprintf(base, sizeof(base), "%s/test_s3_g4.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	T_ASSERT(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	snprintf(creds, sizeof(creds), "%s/creds", base);
	T_ASSERT((f = fopen(tenants, "w")));
	fprintf(f, TENANT " " SECRET " tenant\n");
	fclose(f);
	T_ASSERT(chmod(tenants, 0600) == 0);
	T_ASSERT((f = fopen(creds, "w")));
	fprintf(f, "access_key = " TENANT "\nsecret_key = " SECRET "\nregion = us-east-1\n");
	fclose(f);
	T_ASSERT(chmod(creds, 0600) == 0);
	T_EQ_INT(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);

	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
	T_EQ_INT((int)put_signed("kvt", NULL), 200); /* CreateBucket */

	/* 1. writes through the shared tier */
	s = open_g4();
	ns = ns_of(s);
	for (size_t i = 0; i < NSIZES; i++)
		T_RC(t_put_filled(s, ns, i, sizes[i]), KVT_OK);
	T_OK(kvt_flush(s));
	kvt_store_close(s);
	kvt_store_destroy(s);

	/* 2. a fresh store reads them from G4, byte for byte */
	s = open_g4();
	ns = ns_of(s);
	for (size_t i = 0; i < NSIZES; i++)
		T_EQ_INT(t_get_tier(s, ns, i, sizes[i], KVT_TIER_SHARED, 60000), KVT_OK);
	/* 3. a delete reaches the object store */
	{
		struct kvt_key k = t_key(1);
		T_RC(kvt_delete(s, ns, &k), KVT_OK);
	}
	kvt_store_close(s);
	kvt_store_destroy(s);

	/* 4. the serving kvtierd restarted: the objects are still there */
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_start(&srv, argv[1], base, dir, tenants, extra);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%u", tsrv_s3_port(srv.log));
	s = open_g4();
	ns = ns_of(s);
	for (size_t i = 0; i < NSIZES; i++) {
		int want = i == 1 ? KVT_MISS : KVT_OK;
		int got = t_get_tier(s, ns, i, sizes[i], KVT_TIER_SHARED, 60000);
		if (got != want)
			T_FAIL("block %zu after the restart: %d, want %d", i, got, want);
	}
	kvt_store_close(s);
	kvt_store_destroy(s);

	/* 5. the collector lists the bucket (kvtierd's ListObjectsV2) */
	{
		struct kvt_shared_gc_result gc = { 0 }, gc2 = { 0 };
		uint64_t live = 0, hits = 0;
		for (size_t i = 0; i < NSIZES; i++)
			live += i == 1 ? 0 : sizes[i];
		T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds, 0, 0, &gc));
		T_EQ_U64(gc.files, NSIZES - 1);
		/* the objects' bytes: the values and shs3's record headers */
		T_ASSERT(gc.bytes >= live && gc.bytes <= live + gc.files * 65536);
		live = gc.bytes;
		T_EQ_U64(gc.removed_files, 0);
		/* a budget one byte short: the oldest go until the rest fits */
		T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds, live - 1, 0, &gc));
		T_ASSERT(gc.removed_files >= 1 && gc.removed_bytes >= 1);
		T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds, 0, 0, &gc2));
		T_EQ_U64(gc2.files, NSIZES - 1 - gc.removed_files);
		T_EQ_U64(gc2.bytes, live - gc.removed_bytes);
		s = open_g4();
		ns = ns_of(s);
		for (size_t i = 0; i < NSIZES; i++)
			hits += t_get_tier(s, ns, i, sizes[i], KVT_TIER_SHARED, 60000) == KVT_OK;
		T_EQ_U64(hits, gc2.files);
		kvt_store_close(s);
		kvt_store_destroy(s);
	}

	/* 6. keys of S3's longest, a listing page each */
	list_long_keys();
	T_EQ_INT(tsrv_stop(&srv), 0);
	tsrv_check_reports(base);
	curl_global_cleanup();
	printf("test_s3_g4: ok\n");
	return 0;
}

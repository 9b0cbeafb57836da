/*
 * bench_s3.c - "kvtier bench s3": kvtierd's S3 listener (doc/s3.md)
 * against kvtierd's native protocol on the same server, in the same run,
 * and optionally against another S3 server (--peer, e.g. SeaweedFS's
 * gateway) with the same client.
 *
 *   s3:      --conns threads of one plain libcurl client, one kept-alive
 *            easy handle each, signing with libcurl's own SigV4
 *            (CURLOPT_AWS_SIGV4, UNSIGNED-PAYLOAD: the header is signed
 *            and verified, the body read straight into DRAM), PUT then
 *            GET of N objects of one size into caller buffers;
 *   native:  a libkvtier store whose remote tier is the same kvtierd
 *            (remote.conns = --conns, AUTH as the same tenant), --conns
 *            threads of kvt_put, then a fresh store (empty local DRAM)
 *            and --conns threads of kvt_get: every get crosses the wire;
 *            then (untimed) the deletes, as the s3 client's;
 *   peer:    the s3 client against --peer URL (creds "ak:sk" in a file).
 *
 * kvtierd is started here (DRAM only, a tenants file so signatures are
 * checked), one round of each (size, conns) interleaves the clients
 * (order flipped every round), medians over --rounds are reported, every
 * byte read is compared.  GB/s counts value bytes.  Ratios s3/native and
 * s3/peer are reported against the targets of issue 22 (>= 0.8 and
 * >= 1.5), never judged in the exit status.  Uses include/kvtier.h and
 * libcurl only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kvtier.h"

#include "bench.h"

#define BS3_MIB (UINT64_C(1) << 20)
#define BS3_ROUNDS_MAX 15
#define BS3_SECRET "bench-s3-secret-0123456789"

struct bs3 {
	bool smoke, json;
	char kvtierd[4096];
	const char *dir;
	char run[4096];
	uint64_t sizes[4];
	unsigned nsizes;
	unsigned conns[2];
	unsigned nconns;
	unsigned rounds;
	uint64_t bytes;            /* per (size, round) */
	char s3_url[128];          /* http://127.0.0.1:PORT/bench */
	char native_addr[64];
	char secret_file[4200];
	const char *peer;          /* http://host:port (bucket "bench" must exist) */
	char peer_user[256];       /* ak:sk */
	/* current job */
	uint64_t size, n;
	unsigned nconn;
	uint8_t **src;             /* n values */
	uint8_t **dst;
	_Atomic uint64_t next;
	_Atomic int failed;
};

static void bs3_err(const char *msg, const char *detail)
{
	fprintf(stderr, "kvtier bench s3: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
}

/* ---- the libcurl client ---------------------------------------------- */

struct bs3_xfer {
	uint8_t *p;
	size_t len, pos;
};

static size_t bs3_read(char *p, size_t size, size_t nm, void *ctx)
{
	struct bs3_xfer *x = ctx;
	size_t n = size * nm;
	if (n > x->len - x->pos)
		n = x->len - x->pos;
	memcpy(p, x->p + x->pos, n);
	x->pos += n;
	return n;
}

static size_t bs3_write(char *p, size_t size, size_t nm, void *ctx)
{
	struct bs3_xfer *x = ctx;
	size_t n = size * nm;
	if (n > x->len - x->pos)
		return 0; /* more than the object: an error */
	memcpy(x->p + x->pos, p, n);
	x->pos += n;
	return n;
}

static size_t bs3_sink(char *p, size_t size, size_t nm, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * nm;
}

struct bs3_job {
	struct bs3 *b;
	const char *url;           /* base: http://host:port/bucket */
	const char *user;          /* ak:sk */
	int op;                    /* 0 put, 1 get, 2 delete */
	unsigned round;
};

static void *bs3_curl_thread(void *arg)
{
	struct bs3_job *j = arg;
	struct bs3 *b = j->b;
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char url[512];
	uint64_t i;

	if (!h || !hdrs) {
		atomic_store(&b->failed, 1);
		goto out;
	}
	while ((i = atomic_fetch_add(&b->next, 1)) < b->n && !atomic_load(&b->failed)) {
		struct bs3_xfer x = { j->op == 0 ? b->src[i] : b->dst[i], b->size, 0 };
		long status = 0;
		snprintf(url, sizeof(url), "%s/o-%u-%" PRIu64 "-%" PRIu64, j->url, j->round, b->size, i);
		curl_easy_reset(h);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60000L);
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
		curl_easy_setopt(h, CURLOPT_USERPWD, j->user);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
		if (j->op == 0) {
			curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(h, CURLOPT_READFUNCTION, bs3_read);
			curl_easy_setopt(h, CURLOPT_READDATA, &x);
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)b->size);
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bs3_sink);
		} else if (j->op == 1) {
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bs3_write);
			curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		} else {
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bs3_sink);
		}
		CURLcode cc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (cc != CURLE_OK || status / 100 != 2 || (j->op == 1 && x.pos != b->size)) {
			fprintf(stderr, "kvtier bench s3: %s %s: %s, HTTP %ld\n",
				j->op == 0 ? "PUT" : j->op == 1 ? "GET" : "DELETE", url,
				curl_easy_strerror(cc), status);
			atomic_store(&b->failed, 1);
		}
	}
out:
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

/* One phase of the curl client over every object: seconds, or < 0. */
static double bs3_curl_phase(struct bs3 *b, const char *url, const char *user, int op,
			     unsigned round)
{
	struct bs3_job j = { b, url, user, op, round };
	pthread_t th[8];
	unsigned started = 0;
	double t0 = bench_now();

	atomic_store(&b->next, 0);
	for (; started < b->nconn; started++)
		if (pthread_create(&th[started], NULL, bs3_curl_thread, &j) != 0)
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (started < b->nconn || atomic_load(&b->failed))
		return -1;
	return bench_now() - t0;
}

/* ---- the native client (libkvtier's remote tier) ----------------------- */

struct bs3_native {
	struct bs3 *b;
	struct kvt_store *s;
	uint32_t ns;
	int op;
	unsigned round;
};

static struct kvt_key bs3_key(unsigned round, uint64_t size, uint64_t i)
{
	struct kvt_key k;
	char t[64];
	int n = snprintf(t, sizeof(t), "bs3-%u-%" PRIu64 "-%" PRIu64, round, size, i);
	kvt_key_set(&k, t, (size_t)n);
	return k;
}

static void *bs3_native_thread(void *arg)
{
	struct bs3_native *j = arg;
	struct bs3 *b = j->b;
	uint64_t i;

	while ((i = atomic_fetch_add(&b->next, 1)) < b->n && !atomic_load(&b->failed)) {
		struct kvt_key k = bs3_key(j->round, b->size, i);
		int r;
		if (j->op == 0) {
			struct iovec iov = { b->src[i], b->size };
			r = kvt_put(j->s, j->ns, &k, &iov, 1);
		} else if (j->op == 2) {
			r = kvt_delete(j->s, j->ns, &k);
			if (r == KVT_MISS)
				r = KVT_OK;
		} else {
			uint64_t vl = 0;
			r = kvt_get(j->s, j->ns, &k, b->dst[i], b->size, &vl);
			if (r == KVT_OK && vl != b->size)
				r = KVT_EBADLEN;
		}
		if (r != KVT_OK) {
			fprintf(stderr, "kvtier bench s3: native %s: %s\n",
				j->op == 0 ? "put" : j->op == 1 ? "get" : "delete", kvt_strerror(r));
			atomic_store(&b->failed, 1);
		}
	}
	return NULL;
}

static int bs3_native_open(struct bs3 *b, struct kvt_store **out, uint32_t *ns)
{
	char dram[32], conns[16];
	struct kvt_ns_desc d = { .model = "bench-s3", .dtype = "bytes", .layout = "opaque",
				 .block_tokens = 1, .tp_size = 1, .pp_size = 1 };
	struct kvt_store *s;
	int r;

	snprintf(dram, sizeof(dram), "%" PRIu64, 4 * b->size + 64 * BS3_MIB);
	snprintf(conns, sizeof(conns), "%u", b->nconn);
	const char *opts[][2] = {
		{ "dram.capacity", dram }, { "dram.prefault", "off" },
		{ "remote.addr", b->native_addr }, { "remote.conns", conns },
		{ "remote.tenant", "bench" }, { "remote.secret_file", b->secret_file },
		{ "remote.timeout_ms", "60000" },
	};
	if ((r = kvt_store_create(&s)) < 0)
		return r;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if ((r = kvt_store_set_option(s, opts[i][0], opts[i][1])) < 0) {
			bs3_err("option refused", opts[i][0]);
			kvt_store_destroy(s);
			return r;
		}
	if ((r = kvt_store_open(s)) < 0 || (r = kvt_ns_register(s, &d, ns)) < 0) {
		kvt_store_destroy(s);
		return r;
	}
	*out = s;
	return 0;
}

static double bs3_native_phase(struct bs3 *b, int op, unsigned round)
{
	struct bs3_native j = { .b = b, .op = op, .round = round };
	pthread_t th[8];
	unsigned started = 0;
	double t;
	int r = bs3_native_open(b, &j.s, &j.ns);

	if (r < 0) {
		bs3_err("cannot open the native client store", kvt_strerror(r));
		return -1;
	}
	atomic_store(&b->next, 0);
	t = bench_now();
	for (; started < b->nconn; started++)
		if (pthread_create(&th[started], NULL, bs3_native_thread, &j) != 0)
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (op == 0)
		kvt_flush(j.s); /* written through to the server */
	t = bench_now() - t;
	kvt_store_close(j.s);
	kvt_store_destroy(j.s);
	return started < b->nconn || atomic_load(&b->failed) ? -1 : t;
}

/* ---- driver ------------------------------------------------------------ */

static int bs3_verify(struct bs3 *b, const char *who)
{
	for (uint64_t i = 0; i < b->n; i++)
		if (memcmp(b->src[i], b->dst[i], b->size) != 0) {
			fprintf(stderr, "kvtier bench s3: %s: object %" PRIu64 " read back wrong\n",
				who, i);
			return -1;
		}
	for (uint64_t i = 0; i < b->n; i++)
		memset(b->dst[i], 0, b->size);
	return 0;
}

static int bs3_case(struct bs3 *b, uint64_t size, unsigned nconn)
{
	double sp[BS3_ROUNDS_MAX], sg[BS3_ROUNDS_MAX], np[BS3_ROUNDS_MAX], ng[BS3_ROUNDS_MAX];
	double pp[BS3_ROUNDS_MAX], pg[BS3_ROUNDS_MAX];
	char user[300], purl[300];
	int rc = -1;

	b->size = size;
	b->nconn = nconn;
	b->n = b->bytes / size ? b->bytes / size : 1;
	if (b->n < 2 * nconn)
		b->n = 2 * nconn;
	b->src = calloc(b->n, sizeof(*b->src));
	b->dst = calloc(b->n, sizeof(*b->dst));
	if (!b->src || !b->dst)
		goto out;
	for (uint64_t i = 0; i < b->n; i++) {
		b->src[i] = malloc(size);
		b->dst[i] = calloc(1, size);
		if (!b->src[i] || !b->dst[i])
			goto out;
		bench_fill(b->src[i], size, bench_seed(size, i));
	}
	snprintf(user, sizeof(user), "bench:%s", BS3_SECRET);
	snprintf(purl, sizeof(purl), "%s/bench", b->peer ? b->peer : "");
	for (unsigned r = 0; r < b->rounds; r++) {
		bool s3_first = r % 2 == 0;
		for (int k = 0; k < 2; k++) {
			if ((k == 0) == s3_first) {
				if ((sp[r] = bs3_curl_phase(b, b->s3_url, user, 0, r)) < 0 ||
				    (sg[r] = bs3_curl_phase(b, b->s3_url, user, 1, r)) < 0 ||
				    bs3_verify(b, "s3") < 0 || bs3_curl_phase(b, b->s3_url, user, 2, r) < 0)
					goto out;
			} else {
				/* the deletes (untimed) leave the server's DRAM as found */
				if ((np[r] = bs3_native_phase(b, 0, r)) < 0 ||
				    (ng[r] = bs3_native_phase(b, 1, r)) < 0 || bs3_verify(b, "native") < 0 ||
				    bs3_native_phase(b, 2, r) < 0)
					goto out;
			}
		}
		if (b->peer) {
			if ((pp[r] = bs3_curl_phase(b, purl, b->peer_user, 0, r)) < 0 ||
			    (pg[r] = bs3_curl_phase(b, purl, b->peer_user, 1, r)) < 0 ||
			    bs3_verify(b, "peer") < 0 || bs3_curl_phase(b, purl, b->peer_user, 2, r) < 0)
				goto out;
		}
	}
	{
		double bytes = (double)b->n * (double)size;
		double spg[BS3_ROUNDS_MAX], sgg[BS3_ROUNDS_MAX], npg[BS3_ROUNDS_MAX], ngg[BS3_ROUNDS_MAX];
		double ppg[BS3_ROUNDS_MAX], pgg[BS3_ROUNDS_MAX];
		for (unsigned r = 0; r < b->rounds; r++) {
			spg[r] = bench_rate(bytes, sp[r]) / 1e9;
			sgg[r] = bench_rate(bytes, sg[r]) / 1e9;
			npg[r] = bench_rate(bytes, np[r]) / 1e9;
			ngg[r] = bench_rate(bytes, ng[r]) / 1e9;
			ppg[r] = b->peer ? bench_rate(bytes, pp[r]) / 1e9 : 0;
			pgg[r] = b->peer ? bench_rate(bytes, pg[r]) / 1e9 : 0;
		}
		double s_put = bench_median(spg, b->rounds), s_get = bench_median(sgg, b->rounds);
		double n_put = bench_median(npg, b->rounds), n_get = bench_median(ngg, b->rounds);
		double p_put = bench_median(ppg, b->rounds), p_get = bench_median(pgg, b->rounds);
		if (b->json)
			printf("{\"suite\":\"s3\",\"size\":%" PRIu64 ",\"conns\":%u,\"objects\":%" PRIu64
			       ",\"rounds\":%u,\"s3_put_gbps\":%.3f,\"s3_get_gbps\":%.3f,"
			       "\"native_put_gbps\":%.3f,\"native_get_gbps\":%.3f,"
			       "\"ratio_put\":%.2f,\"ratio_get\":%.2f,\"peer_put_gbps\":%.3f,"
			       "\"peer_get_gbps\":%.3f}\n",
			       size, nconn, b->n, b->rounds, s_put, s_get, n_put, n_get,
			       n_put > 0 ? s_put / n_put : 0, n_get > 0 ? s_get / n_get : 0, p_put, p_get);
		else
			printf("%8" PRIu64 "K %5u %8.3f %8.3f %8.3f %8.3f %6.2f %6.2f %s%.3f %s%.3f\n",
			       size >> 10, nconn, s_put, s_get, n_put, n_get,
			       n_put > 0 ? s_put / n_put : 0, n_get > 0 ? s_get / n_get : 0,
			       b->peer ? "" : "-", p_put, b->peer ? "" : "-", p_get);
	}
	rc = 0;
out:
	for (uint64_t i = 0; b->src && i < b->n; i++)
		free(b->src[i]);
	for (uint64_t i = 0; b->dst && i < b->n; i++)
		free(b->dst[i]);
	free(b->src);
	free(b->dst);
	b->src = b->dst = NULL;
	return rc;
}

static void bs3_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench s3 [--smoke] [--json] [--dir DIR] [--rounds N]\n"
		"                       [--peer URL --peer-creds FILE]\n"
		"\n"
		"kvtierd's S3 listener against its native protocol on the same server\n"
		"(and --peer, another S3 server with a bucket \"bench\"; FILE holds\n"
		"\"ACCESS_KEY:SECRET_KEY\"), one libcurl client: PUT and GET of objects of\n"
		"256 KiB, 2 MiB and 16 MiB, 1 and 4 connections (--smoke: 256 KiB and\n"
		"2 MiB, 16 MiB of data per case, 1 round).  GB/s of value bytes, medians\n"
		"over rounds, every byte read compared.  Targets: s3 >= 0.8 x native,\n"
		">= 1.5 x peer (reported, not judged).  doc/s3.md.\n");
}

int bench_s3_main(int argc, char **argv)
{
	struct bs3 *b = calloc(1, sizeof(*b));
	const char *peer_creds = NULL;
	struct sigaction old[3];
	pid_t pid = 0;
	uint16_t port = 0;
	int rc = BENCH_EXIT_FAIL;
	char log[4200], tenants[4200], line[128];
	FILE *f;

	if (!b)
		return BENCH_EXIT_FAIL;
	b->rounds = 3;
	b->dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--smoke") == 0)
			b->smoke = true;
		else if (strcmp(argv[i], "--json") == 0)
			b->json = true;
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			b->dir = argv[++i];
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			b->rounds = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc)
			b->peer = argv[++i];
		else if (strcmp(argv[i], "--peer-creds") == 0 && i + 1 < argc)
			peer_creds = argv[++i];
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			bs3_usage(stdout);
			free(b);
			return BENCH_EXIT_OK;
		} else {
			bs3_usage(stderr);
			free(b);
			return BENCH_EXIT_USAGE;
		}
	}
	if (b->rounds < 1 || b->rounds > BS3_ROUNDS_MAX || (!b->peer != !peer_creds)) {
		bs3_usage(stderr);
		free(b);
		return BENCH_EXIT_USAGE;
	}
	if (peer_creds) {
		f = fopen(peer_creds, "r");
		if (!f || !fgets(b->peer_user, sizeof(b->peer_user), f)) {
			bs3_err("cannot read --peer-creds", peer_creds);
			if (f)
				fclose(f);
			free(b);
			return BENCH_EXIT_USAGE;
		}
		fclose(f);
		b->peer_user[strcspn(b->peer_user, "\r\n")] = 0;
	}
	if (b->smoke) {
		b->rounds = 1;
		b->sizes[0] = 256 << 10;
		b->sizes[1] = 2 * BS3_MIB;
		b->nsizes = 2;
		b->bytes = 16 * BS3_MIB;
	} else {
		b->sizes[0] = 256 << 10;
		b->sizes[1] = 2 * BS3_MIB;
		b->sizes[2] = 16 * BS3_MIB;
		b->nsizes = 3;
		b->bytes = 256 * BS3_MIB;
	}
	b->conns[0] = 1;
	b->conns[1] = 4;
	b->nconns = 2;
	if (!bench_find_kvtierd(b->kvtierd, sizeof(b->kvtierd))) {
		bs3_err("kvtierd not found next to kvtier", NULL);
		free(b);
		return 77;
	}
	snprintf(b->run, sizeof(b->run), "%s/kvtier-bench-s3-%d", b->dir, (int)getpid());
	if (mkdir(b->run, 0700) < 0) {
		bs3_err("cannot make the run directory", b->run);
		free(b);
		return BENCH_EXIT_FAIL;
	}
	snprintf(tenants, sizeof(tenants), "%s/tenants", b->run);
	snprintf(b->secret_file, sizeof(b->secret_file), "%s/secret", b->run);
	snprintf(log, sizeof(log), "%s/kvtierd.log", b->run);
	if (!(f = fopen(tenants, "w")))
		goto done;
	fprintf(f, "bench %s tenant\n", BS3_SECRET);
	fclose(f);
	chmod(tenants, 0600);
	if (!(f = fopen(b->secret_file, "w")))
		goto done;
	fprintf(f, "%s", BS3_SECRET);
	fclose(f);
	chmod(b->secret_file, 0600);
	bench_signals_catch(old);
	{
		char kdir[4200];
		snprintf(kdir, sizeof(kdir), "%s/kvtierd", b->run);
		const char *extra[] = { "--s3", "127.0.0.1:0", "--tenants", tenants,
					"--set", "dram.prefault=off", NULL };
		struct bench_kvtierd k = { b->kvtierd, kdir, log,
					   (b->smoke ? 512 : 2048) * BS3_MIB, 0, 2, extra };
		if (bench_kvtierd_start(&k, &pid, &port) < 0) {
			bs3_err("kvtierd did not start; its log", log);
			goto stop;
		}
		snprintf(b->native_addr, sizeof(b->native_addr), "127.0.0.1:%u", port);
		if (bench_wait_log(&pid, log, "S3 listener on 127.0.0.1:", BENCH_START_TIMEOUT_S, line,
				   sizeof(line)) < 0)
			goto stop;
		snprintf(b->s3_url, sizeof(b->s3_url), "http://127.0.0.1:%d/bench", atoi(line));
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		goto stop;
	{
		/* the bucket */
		CURL *h = curl_easy_init();
		char user[300];
		long status = 0;
		snprintf(user, sizeof(user), "bench:%s", BS3_SECRET);
		struct curl_slist *hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
		curl_easy_setopt(h, CURLOPT_URL, b->s3_url);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
		curl_easy_setopt(h, CURLOPT_USERPWD, user);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bs3_sink);
		CURLcode cc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		curl_slist_free_all(hd);
		curl_easy_cleanup(h);
		if (cc != CURLE_OK || status != 200) {
			bs3_err("CreateBucket failed", curl_easy_strerror(cc));
			goto curl;
		}
	}
	if (!b->json)
		printf("# kvtier bench s3%s: GB/s of value bytes, medians of %u round(s)\n"
		       "#     size conns   s3_put   s3_get  nat_put  nat_get r_put  r_get  peer_put peer_get\n",
		       b->smoke ? " --smoke" : "", b->rounds);
	rc = BENCH_EXIT_OK;
	for (unsigned s = 0; s < b->nsizes && rc == BENCH_EXIT_OK; s++)
		for (unsigned c = 0; c < b->nconns && rc == BENCH_EXIT_OK; c++)
			if (bs3_case(b, b->sizes[s], b->conns[c]) < 0)
				rc = BENCH_EXIT_FAIL;
	if (!b->json && rc == BENCH_EXIT_OK)
		printf("# targets: s3 >= 0.80 x native (r_put, r_get); >= 1.5 x peer%s\n",
		       b->peer ? "" : " (no --peer given)");
curl:
	curl_global_cleanup();
stop:
	if (pid > 0 && bench_stop(pid) != 0 && rc == BENCH_EXIT_OK) {
		bs3_err("kvtierd did not stop cleanly; its log", log);
		rc = BENCH_EXIT_FAIL;
	}
	bench_signals_restore(old);
done:
	if (rc == BENCH_EXIT_OK)
		bench_rm_tree(b->run);
	else
		fprintf(stderr, "kvtier bench s3: run directory kept: %s\n", b->run);
	free(b);
	return rc;
}

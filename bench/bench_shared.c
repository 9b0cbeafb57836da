/*
 * bench_shared.c - "kvtier bench shared": the shared tier (G4) against
 * what its storage can do without kvtier, in the same run.
 *
 *   backend dir:  kvtier's put (write-down) and get (promotion) of whole
 *                 blocks through a shared.dir store, against fio on the
 *                 same file system, io_uring, O_DIRECT when the file system
 *                 takes it (as kvtier's own probe found: stat
 *                 shared.o_direct), the best of three shapes, each
 *                 written then read (per op, the fastest shape whose reads
 *                 reached the device):
 *                   files-jN-qd1  one file per block (a 4 KiB header page
 *                                 + the value: kvtier's file size), --conns
 *                                 jobs, one I/O in flight each;
 *                   files-j1-qdN  the same files, one job, --conns I/Os in
 *                                 flight (round robin over the files);
 *                   file-j1-qdN   one file of all the blocks, block-sized
 *                                 I/Os, --conns in flight;
 *                   file-1M-qd4N  that file in 1 MiB I/Os, 4 x --conns in
 *                                 flight (what the device can do when
 *                                 blocks are few or large).
 *                 Reads must reach the device, on both sides: the growth of
 *                 read_bytes in /proc/self/io (this process's threads and
 *                 its reaped fio) must cover the bytes read.  A get ratio
 *                 above 1.1, or reads that did not reach the device, is
 *                 SUSPECT (JSON "suspect"), and a suspect row is not met:
 *                 kvtier cannot read the same device much faster than fio.
 *   backend s3:   the same through a shared.s3_* store, against a plain
 *                 libcurl client in this program: --conns threads, one
 *                 kept-alive easy handle each, PUT and GET of objects of
 *                 the same size (header page + value) in the same bucket,
 *                 signed by libcurl's own AWS SigV4 (CURLOPT_AWS_SIGV4,
 *                 UNSIGNED-PAYLOAD as kvtier's default).
 *
 * One round of one (backend, size): N = --bytes / size blocks, distinct
 * bytes each.
 *
 *   kvtier put:  a fresh store (shared.admission=always, shared.threads
 *                = --conns, shared.s3_conns = --conns) puts the N blocks,
 *                paced on shared.wd_bytes so that nothing is shed, timed
 *                from the first put to kvt_flush() returning (every block
 *                written down);
 *   kvtier get:  the store is closed and a new one opened (empty DRAM):
 *                N gets, --conns in flight, each promoted from the shared
 *                tier into the caller's buffer; timed first submit to last
 *                completion;
 *   baseline:    fio write then read of N files (dir), or N PUTs then N
 *                GETs (s3), --conns at a time.
 *
 * kvtier and the baseline alternate (the order flips every round), medians
 * over --rounds are reported; before the first S3 round an untimed
 * warm-up of the baseline lets the object store grow its first volumes.
 * GB/s counts value bytes for kvtier and the baseline's whole
 * files/objects (4 KiB more each: honest overhead).  Every
 * block read, by kvtier or the baseline, is compared byte for byte after
 * the timed phase; a wrong byte, a shed write-down or a library error exits
 * 1.  Targets (kvtier >= 0.9 of the baseline, and not suspect) are
 * reported, never judged in the exit status.  Uses include/kvtier.h and
 * libcurl only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kvtier.h"

#include "bench.h"

#define BSH_WHO "kvtier bench shared" /* how its messages start */

#define BSH_MIB (UINT64_C(1) << 20)
#define BSH_HDR 4096u          /* kvtier's block header page (doc/shared.md) */
#define BSH_SIZES_MAX 8
#define BSH_ROUNDS_MAX BENCH_MEDIAN_MAX
#define BSH_CONNS_MAX 64
#define BSH_TARGET 0.9
#define BSH_SUSPECT 1.1        /* dir: a ratio above it is not believed */
#define BSH_DEV_MIN 0.999      /* device bytes read per byte returned, at least */
#define BSH_SHAPES 4
static const char *const bsh_shape_name[BSH_SHAPES] = { "files-jN-qd1", "files-j1-qdN",
							"file-j1-qdN", "file-1M-qd4N" };

enum { BSH_DIR = 0, BSH_S3 = 1 };
static const char *const bsh_backend_name[] = { "dir", "s3" };

struct bsh_opts {
	bool smoke, json, keep;
	bool do_dir, do_s3;
	const char *dir;           /* run directory parent (dir backend, fio) */
	const char *fio;
	const char *s3_endpoint, *s3_bucket, *s3_creds;
	uint64_t sizes[BSH_SIZES_MAX];
	unsigned nsizes;
	unsigned conns;
	uint64_t bytes;            /* per round and size */
	unsigned rounds;
	uint64_t dram;
};

struct bsh {
	struct bsh_opts o;
	char run_dir[4096];
	bool have_fio;
	bool direct;               /* the store found O_DIRECT usable (dir) */
	char ak[160], sk[160], region[64];
	uint8_t **src, **dst;      /* n blocks of the current size */
	uint64_t n, size;
	bool warmed;               /* the object store has had its warm-up */
	bool dev_known;            /* /proc/self/io readable */
	unsigned suspects, missed; /* rows, for the closing line */
};

/* One round's device accounting (dir): device bytes read per byte the
 * reader returned, kvtier's get and the baseline's chosen read; and which
 * fio shapes were the baseline. */
struct bsh_dev {
	double kvt, fio;
	int put_shape, get_shape;
};

static struct kvt_key bsh_key(uint64_t round, uint64_t i)
{
	struct kvt_key k = { .len = 32 };
	for (unsigned w = 0; w < 4; w++) {
		uint64_t v = bench_splitmix(round * 0x10001 + i * 4 + w);
		memcpy(k.bytes + 8 * w, &v, 8);
	}
	return k;
}

static int bsh_stat(struct kvt_store *s, const char *name, uint64_t *v)
{
	int r = kvt_store_stat(s, name, v);
	if (r < 0)
		bench_err(BSH_WHO, "stat %s: %s", name, kvt_strerror(r));
	return r;
}

/* ------------------------------------------------------------------------
 * kvtier
 */

static int bsh_store_open(struct bsh *b, int backend, const char *dir, struct kvt_store **out)
{
	struct kvt_store *s;
	char dram[32], wd[32], conns[16];
	int r;
	snprintf(dram, sizeof(dram), "%" PRIu64, b->o.dram);
	snprintf(wd, sizeof(wd), "%" PRIu64, b->o.dram / 4);
	snprintf(conns, sizeof(conns), "%u", b->o.conns);
	const char *opts[][2] = {
		{ "dram.capacity", dram },      { "shared.admission", "always" },
		{ "shared.threads", conns },    { "shared.writedown_max", wd },
		{ backend == BSH_DIR ? "shared.dir" : "shared.s3_endpoint",
		  backend == BSH_DIR ? dir : b->o.s3_endpoint },
		{ backend == BSH_S3 ? "shared.s3_bucket" : NULL, b->o.s3_bucket },
		{ backend == BSH_S3 ? "shared.s3_conns" : NULL, conns },
		{ backend == BSH_S3 && b->o.s3_creds ? "shared.s3_credentials" : NULL, b->o.s3_creds },
	};
	if ((r = kvt_store_create(&s)) < 0) {
		bench_err(BSH_WHO, "kvt_store_create: %s", kvt_strerror(r));
		return -1;
	}
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (!opts[i][0])
			continue;
		if ((r = kvt_store_set_option(s, opts[i][0], opts[i][1])) < 0) {
			bench_err(BSH_WHO, "option %s=%s: %s", opts[i][0], opts[i][1],
				  kvt_strerror(r));
			kvt_store_destroy(s);
			return -1;
		}
	}
	if ((r = kvt_store_open(s)) < 0) {
		bench_err(BSH_WHO, "opening a store on the %s backend: %s",
			  bsh_backend_name[backend], kvt_strerror(r));
		kvt_store_destroy(s);
		return -1;
	}
	*out = s;
	return 0;
}

static int bsh_ns(struct kvt_store *s, uint64_t size, unsigned round, uint32_t *ns)
{
	char model[64];
	/* A namespace per size and round: no round finds another's blocks. */
	snprintf(model, sizeof(model), "bench-shared-%" PRIu64 "-%u", size, round);
	struct kvt_ns_desc d = { .model = model, .dtype = "bf16", .layout = "bench",
				 .block_tokens = 16, .tp_size = 1, .pp_size = 1, .tenant = "bench" };
	int r = kvt_ns_register(s, &d, ns);
	if (r < 0)
		bench_err(BSH_WHO, "kvt_ns_register: %s", kvt_strerror(r));
	return r;
}

/* One kvtier round: put the n blocks, then get them from a fresh store. */
static int bsh_kvt_round(struct bsh *b, int backend, unsigned round, double *put_gbps,
			 double *get_gbps, double *get_dev)
{
	uint64_t rd0 = 0, rd1 = 0, wr0 = 0, wr1 = 0;
	char dir[4200] = "";
	struct kvt_store *s = NULL;
	struct kvt_queue *q = NULL;
	struct kvt_req *reqs = NULL, *done[BSH_CONNS_MAX];
	struct iovec *iovs = NULL;
	uint32_t ns;
	uint64_t v, wd_max = b->o.dram / 4, next = 0, finished = 0;
	double t0;
	int rc = -1, r;

	if (backend == BSH_DIR) {
		snprintf(dir, sizeof(dir), "%s/kvt-%" PRIu64 "-%u", b->run_dir, b->size, round);
		if (mkdir(dir, 0700) < 0) {
			bench_err(BSH_WHO, "mkdir %s: %s", dir, strerror(errno));
			return -1;
		}
	}
	/* Put. */
	if (bsh_store_open(b, backend, dir, &s) < 0 || bsh_ns(s, b->size, round, &ns) < 0)
		goto out;
	t0 = bench_now();
	for (uint64_t i = 0; i < b->n; i++) {
		struct kvt_key k = bsh_key(round, i);
		struct iovec io = { b->src[i], b->size };
		/* Pace: never more queued than the write-down budget (no shedding). */
		for (;;) {
			if (bsh_stat(s, "shared.wd_bytes", &v) < 0)
				goto out;
			if (v + b->size <= wd_max || v == 0)
				break;
			usleep(50);
		}
		if ((r = kvt_put(s, ns, &k, &io, 1)) != KVT_OK) {
			bench_err(BSH_WHO, "kvt_put: %s", kvt_strerror(r));
			goto out;
		}
	}
	if ((r = kvt_flush(s)) < 0) {
		bench_err(BSH_WHO, "kvt_flush: %s", kvt_strerror(r));
		goto out;
	}
	*put_gbps = bench_rate((double)(b->n * b->size), bench_now() - t0) / 1e9;
	if (bsh_stat(s, "shared.wd_shed", &v) < 0)
		goto out;
	if (v) {
		bench_err(BSH_WHO, "%" PRIu64 " write-downs shed (pacing failed)", v);
		goto out;
	}
	if (bsh_stat(s, "shared.writes", &v) < 0)
		goto out;
	if (v != b->n) {
		bench_err(BSH_WHO,
			  "%" PRIu64 " blocks written down of %" PRIu64
			  " (see shared.write_errors)",
			  v, b->n);
		goto out;
	}
	if (backend == BSH_DIR) {
		if (bsh_stat(s, "shared.o_direct", &v) < 0)
			goto out;
		b->direct = v != 0;
	}
	kvt_store_destroy(s);
	s = NULL;

	/* Get, from a store with nothing in DRAM. */
	if (bsh_store_open(b, backend, dir, &s) < 0 || bsh_ns(s, b->size, round, &ns) < 0)
		goto out;
	if ((r = kvt_queue_create(s, &q)) < 0) {
		bench_err(BSH_WHO, "kvt_queue_create: %s", kvt_strerror(r));
		goto out;
	}
	reqs = calloc(b->n, sizeof(*reqs));
	iovs = calloc(b->n, sizeof(*iovs));
	if (!reqs || !iovs) {
		bench_err(BSH_WHO, "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < b->n; i++) {
		memset(b->dst[i], 0, b->size);
		iovs[i] = (struct iovec){ b->dst[i], b->size };
		reqs[i] = (struct kvt_req){ .op = KVT_OP_GET, .ns = ns, .key = bsh_key(round, i),
					    .iov = &iovs[i], .iov_count = 1, .user_data = i };
	}
	if (bench_proc_io(&rd0, &wr0) < 0)
		b->dev_known = false;
	t0 = bench_now();
	while (finished < b->n) {
		while (next < b->n && next - finished < b->o.conns) {
			struct kvt_req *rp = &reqs[next];
			if ((r = kvt_submit(q, &rp, 1)) != 1) {
				bench_err(BSH_WHO, "kvt_submit: %s", kvt_strerror(r));
				goto out;
			}
			next++;
		}
		r = kvt_queue_wait(q, done, BSH_CONNS_MAX, 60000);
		if (r <= 0) {
			bench_err(BSH_WHO, "kvt_queue_wait: %s",
				  r == 0 ? "nothing in 60 s" : kvt_strerror(r));
			goto out;
		}
		for (int j = 0; j < r; j++) {
			if (done[j]->status != KVT_OK || done[j]->length != b->size ||
			    done[j]->tier != KVT_TIER_SHARED) {
				bench_err(BSH_WHO,
					  "get %" PRIu64 ": %s, %" PRIu64 " bytes, tier %s",
					  done[j]->user_data, kvt_strerror(done[j]->status),
					  done[j]->length, kvt_tier_name(done[j]->tier));
				goto out;
			}
		}
		finished += (uint64_t)r;
	}
	*get_gbps = bench_rate((double)(b->n * b->size), bench_now() - t0) / 1e9;
	if (bench_proc_io(&rd1, &wr1) < 0)
		b->dev_known = false;
	*get_dev = (double)(rd1 - rd0) / (double)(b->n * b->size);
	for (uint64_t i = 0; i < b->n; i++) {
		if (memcmp(b->dst[i], b->src[i], b->size)) {
			bench_err(BSH_WHO, "block %" PRIu64 " read back wrong", i);
			goto out;
		}
	}
	if (backend == BSH_S3 && (r = (int)kvt_clear(s, ns)) < 0) /* leave the bucket as found */
		bench_err(BSH_WHO, "kvt_clear: %s", kvt_strerror(r));
	rc = 0;
out:
	if (q)
		kvt_queue_destroy(q);
	kvt_store_destroy(s);
	free(reqs);
	free(iovs);
	if (dir[0] && !b->o.keep)
		bench_rm_tree(dir);
	return rc;
}

/* ------------------------------------------------------------------------
 * fio: the same files on the same file system
 */

static int bsh_fio_job(struct bsh *b, const char *dir, const char *rw, int shape, double *gbps,
		       double *dev)
{
	char a_dir[4200], a_bs[48], a_size[48], a_jobs[32], a_files[48], a_direct[16], err[2048],
		errpath[4300], a_qd[32], a_svc[48], a_name[64];
	uint64_t rec = BSH_HDR + b->size, per_job, total;
	uint64_t io_bytes = 0, bw = 0, e = 1, rd0 = 0, rd1 = 0, wr0 = 0, wr1 = 0;
	unsigned jobs, qd;
	double wall;
	bool wr = !strcmp(rw, "write");
	int n = 0;
	char *argv[24];

	if (shape == 0) {
		jobs = b->n < b->o.conns ? (unsigned)b->n : b->o.conns;
		qd = 1;
		per_job = (b->n + b->o.conns - 1) / b->o.conns;
	} else {
		jobs = 1;
		qd = shape == 3 ? 4 * b->o.conns : b->o.conns;
		per_job = b->n;
	}
	total = (uint64_t)jobs * per_job * rec;
	if (shape == 3)
		total = bench_align_up(total, BSH_MIB);
	snprintf(a_name, sizeof(a_name), "--name=kvtier-shared-%s-%d", rw, shape);
	snprintf(a_dir, sizeof(a_dir), "--directory=%s", dir);
	snprintf(a_bs, sizeof(a_bs), "--bs=%" PRIu64, shape == 3 ? BSH_MIB : rec);
	snprintf(a_jobs, sizeof(a_jobs), "--numjobs=%u", jobs);
	snprintf(a_qd, sizeof(a_qd), "--iodepth=%u", qd);
	snprintf(a_direct, sizeof(a_direct), "--direct=%d", b->direct ? 1 : 0);
	snprintf(errpath, sizeof(errpath), "%s/fio.err", b->run_dir);
	argv[n++] = (char *)b->o.fio;
	argv[n++] = a_name;
	argv[n++] = a_dir;
	argv[n++] = (char *)(wr ? "--rw=write" : "--rw=read");
	argv[n++] = a_bs;
	if (shape >= 2) {
		/* One file of all the blocks. */
		snprintf(a_size, sizeof(a_size), "--size=%" PRIu64, total);
		argv[n++] = a_size;
	} else {
		snprintf(a_size, sizeof(a_size), "--filesize=%" PRIu64, rec);
		snprintf(a_files, sizeof(a_files), "--nrfiles=%" PRIu64, per_job);
		snprintf(a_svc, sizeof(a_svc), "--file_service_type=%s",
			 shape == 0 ? "sequential" : "roundrobin");
		argv[n++] = a_size;
		argv[n++] = a_files;
		argv[n++] = a_svc;
		argv[n++] = (char *)(wr ? "--create_on_open=1" : "--create_on_open=0");
	}
	argv[n++] = a_jobs;
	argv[n++] = (char *)"--ioengine=io_uring";
	argv[n++] = a_qd;
	argv[n++] = a_direct;
	argv[n++] = (char *)"--fallocate=none";
	argv[n++] = (char *)"--group_reporting";
	argv[n++] = (char *)"--output-format=json";
	argv[n] = NULL;
	if (bench_proc_io(&rd0, &wr0) < 0)
		b->dev_known = false;
	char *out = bench_spawn_capture(argv, errpath, &wall, err, sizeof(err));
	if (!out) {
		bench_err(BSH_WHO, "%s", err);
		return -1;
	}
	if (bench_proc_io(&rd1, &wr1) < 0)
		b->dev_known = false;
	const char *json = strchr(out, '{');
	const char *jobs_o = json ? strstr(json, "\"jobs\"") : NULL;
	const char *obj = jobs_o ? bench_json_obj(jobs_o, wr ? "write" : "read") : NULL;
	if (!obj || bench_json_u64(jobs_o, "error", &e) < 0 ||
	    bench_json_u64(obj, "io_bytes", &io_bytes) < 0 || bench_json_u64(obj, "bw_bytes", &bw) < 0) {
		bench_err(BSH_WHO, "could not read fio's JSON output");
		free(out);
		return -1;
	}
	free(out);
	if (e != 0 || io_bytes != total) {
		bench_err(BSH_WHO,
			  "fio %s (%s): error %" PRIu64 ", %" PRIu64 " bytes moved of %" PRIu64, rw,
			  bsh_shape_name[shape], e, io_bytes, total);
		return -1;
	}
	*gbps = (double)bw / 1e9;
	*dev = (double)(rd1 - rd0) / (double)io_bytes;
	return 0;
}

/* The baseline of one round: every fio shape writes then reads in a fresh
 * directory; per op the fastest counts, for reads the fastest whose reads
 * reached the device (if none did, the fastest, and the row is suspect). */
static int bsh_fio_round(struct bsh *b, unsigned round, double *put_gbps, double *get_gbps,
			 struct bsh_dev *dv)
{
	char dir[4200];
	int rc = 0;
	bool get_dev_ok = false;
	*put_gbps = *get_gbps = 0;
	dv->fio = -1;
	dv->put_shape = dv->get_shape = -1;
	for (int shape = 0; shape < BSH_SHAPES && rc == 0; shape++) {
		double pg = 0, gg = 0, gdev = 0, wdev;
		snprintf(dir, sizeof(dir), "%s/fio-%" PRIu64 "-%u-%d", b->run_dir, b->size, round,
			 shape);
		if (mkdir(dir, 0700) < 0) {
			bench_err(BSH_WHO, "mkdir %s: %s", dir, strerror(errno));
			return -1;
		}
		rc = bsh_fio_job(b, dir, "write", shape, &pg, &wdev);
		if (rc == 0)
			rc = bsh_fio_job(b, dir, "read", shape, &gg, &gdev);
		bench_rm_tree(dir);
		if (rc < 0)
			break;
		if (pg > *put_gbps) {
			*put_gbps = pg;
			dv->put_shape = shape;
		}
		bool ok = !b->dev_known || gdev >= BSH_DEV_MIN;
		if ((ok && !get_dev_ok) || (ok == get_dev_ok && gg > *get_gbps)) {
			*get_gbps = gg;
			dv->fio = gdev;
			dv->get_shape = shape;
			get_dev_ok = ok;
		}
		if (!b->o.json)
			fprintf(stderr, "    fio %-12s put %.3f get %.3f GB/s, device read %.3f B/B\n",
				bsh_shape_name[shape], pg, gg, gdev);
	}
	return rc;
}

/* ------------------------------------------------------------------------
 * A plain libcurl client: PUT and GET of the same objects, --conns threads
 */

static const uint8_t bsh_zero_page[BSH_HDR];

struct bsh_xfer {
	struct bsh *b;
	uint64_t i, off;           /* block, bytes moved so far */
	bool ok;
};

static size_t bsh_curl_read(char *p, size_t size, size_t nm, void *ctx)
{
	struct bsh_xfer *x = ctx;
	uint64_t total = BSH_HDR + x->b->size, k = size * nm;
	if (k > total - x->off)
		k = total - x->off;
	for (uint64_t done = 0; done < k;) {
		uint64_t o = x->off + done, m;
		if (o < BSH_HDR) {
			m = BSH_HDR - o < k - done ? BSH_HDR - o : k - done;
			memcpy(p + done, bsh_zero_page + o, m);
		} else {
			m = k - done;
			memcpy(p + done, x->b->src[x->i] + (o - BSH_HDR), m);
		}
		done += m;
	}
	x->off += k;
	return (size_t)k;
}

static size_t bsh_curl_write(char *p, size_t size, size_t nm, void *ctx)
{
	struct bsh_xfer *x = ctx;
	uint64_t total = BSH_HDR + x->b->size, k = size * nm;
	if (x->off + k > total)
		return 0;
	for (uint64_t done = 0; done < k;) {
		uint64_t o = x->off + done, m;
		if (o < BSH_HDR) {
			m = BSH_HDR - o < k - done ? BSH_HDR - o : k - done;
		} else {
			m = k - done;
			memcpy(x->b->dst[x->i] + (o - BSH_HDR), p + done, m);
		}
		done += m;
	}
	x->off += k;
	return (size_t)k;
}

static size_t bsh_curl_sink(char *p, size_t size, size_t nm, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * nm;
}

struct bsh_curl_job {
	struct bsh *b;
	unsigned round;
	int op;                    /* 0 PUT, 1 GET, 2 DELETE */
	_Atomic uint64_t next;
	_Atomic int failed;
};

static void *bsh_curl_thread(void *arg)
{
	struct bsh_curl_job *j = arg;
	struct bsh *b = j->b;
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char sigv4[128], userpwd[400], url[1024];
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", b->region);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", b->ak, b->sk);
	if (!h || !hdrs) {
		j->failed = 1;
		goto out;
	}
	for (;;) {
		uint64_t i = atomic_fetch_add(&j->next, 1);
		struct bsh_xfer x = { .b = b, .i = i };
		long status = 0;
		if (i >= b->n || j->failed)
			break;
		snprintf(url, sizeof(url), "%s/%s/bench-baseline/%" PRIu64 "/%u/%" PRIu64,
			 b->o.s3_endpoint, b->o.s3_bucket, b->size, j->round, i);
		curl_easy_reset(h);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60000L);
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
		curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		/* No wait for "100 Continue" (kvtier drops the Expect header; libcurl
		 * 7.88's SigV4 signs a header the caller drops, so it stays here). */
		curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
		if (j->op == 0) {
			curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(h, CURLOPT_READFUNCTION, bsh_curl_read);
			curl_easy_setopt(h, CURLOPT_READDATA, &x);
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)(BSH_HDR + b->size));
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bsh_curl_sink);
		} else if (j->op == 1) {
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bsh_curl_write);
			curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		} else {
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bsh_curl_sink);
		}
		CURLcode cc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (cc != CURLE_OK || status < 200 || status >= 300 ||
		    (j->op == 1 && x.off != BSH_HDR + b->size)) {
			bench_err(BSH_WHO, "libcurl %s %s: %s, HTTP %ld",
				  j->op == 0	       ? "PUT"
					  : j->op == 1 ? "GET"
						       : "DELETE",
				  url, curl_easy_strerror(cc), status);
			j->failed = 1;
			break;
		}
	}
out:
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

static int bsh_curl_run(struct bsh *b, unsigned round, int op, double *gbps)
{
	pthread_t th[BSH_CONNS_MAX];
	struct bsh_curl_job j = { .b = b, .round = round, .op = op };
	unsigned nt = b->n < b->o.conns ? (unsigned)b->n : b->o.conns, started = 0;
	double t0 = bench_now();
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, bsh_curl_thread, &j) != 0)
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (gbps)
		*gbps = bench_rate((double)(b->n * (BSH_HDR + b->size)), bench_now() - t0) / 1e9;
	if (started < nt || j.failed)
		return -1;
	return 0;
}

static int bsh_curl_round(struct bsh *b, unsigned round, double *put_gbps, double *get_gbps)
{
	int rc;
	for (uint64_t i = 0; i < b->n; i++)
		memset(b->dst[i], 0, b->size);
	rc = bsh_curl_run(b, round, 0, put_gbps);
	if (rc == 0)
		rc = bsh_curl_run(b, round, 1, get_gbps);
	for (uint64_t i = 0; rc == 0 && i < b->n; i++) {
		if (memcmp(b->dst[i], b->src[i], b->size)) {
			bench_err(BSH_WHO, "libcurl: object %" PRIu64 " read back wrong", i);
			rc = -1;
		}
	}
	bsh_curl_run(b, round, 2, NULL); /* leave the bucket as found */
	return rc;
}

/* ------------------------------------------------------------------------
 * Rounds, results
 */

/* One row.  dv: the rounds' device accounting (dir), else NULL. */
static void bsh_report(struct bsh *b, int backend, const char *op, double *kv, double *base,
		       bool have_base, const struct bsh_dev *dv)
{
	unsigned r = b->o.rounds;
	double g = bench_median(kv, r), bg = have_base ? bench_median(base, r) : 0;
	double ratio = have_base && bg > 0 ? g / bg : 0;
	const char *bname = backend == BSH_DIR ? "fio" : "libcurl";
	bool get = !strcmp(op, "get");
	double kdev = -1, fdev = -1;
	int shape = -1;
	const char *why = NULL;
	char sz[32];
	if (dv && b->dev_known) {
		double k[BSH_ROUNDS_MAX], f[BSH_ROUNDS_MAX];
		for (unsigned i = 0; i < r; i++)
			k[i] = dv[i].kvt, f[i] = dv[i].fio;
		kdev = bench_median(k, r);
		fdev = have_base ? bench_median(f, r) : -1;
	}
	if (dv && have_base)
		shape = get ? dv[r - 1].get_shape : dv[r - 1].put_shape;
	/* bench_ssd's checks, for the directory backend's reads: a ratio
	 * above 1.1 or a read that did not reach the device is not believed. */
	if (backend == BSH_DIR && get && b->dev_known && kdev < BSH_DEV_MIN)
		why = "kvtier's reads did not all reach the device";
	else if (backend == BSH_DIR && get && b->dev_known && have_base && fdev < BSH_DEV_MIN)
		why = "fio's reads did not all reach the device";
	else if (backend == BSH_DIR && have_base && ratio > BSH_SUSPECT)
		why = "ratio above 1.1";
	bool met = have_base && ratio >= BSH_TARGET && !why;
	if (why)
		b->suspects++;
	else if (have_base && !met)
		b->missed++;
	if (b->o.json) {
		printf("{\"bench\":\"shared\",\"backend\":\"%s\",\"op\":\"%s\",\"value_bytes\":%" PRIu64
		       ",\"blocks\":%" PRIu64 ",\"conns\":%u,\"rounds\":%u,\"gbps\":%.3f,"
		       "\"baseline\":\"%s\",",
		       bsh_backend_name[backend], op, b->size, b->n, b->o.conns, r, g, bname);
		if (have_base)
			printf("\"baseline_gbps\":%.3f,\"ratio\":%.3f,\"target\":%.2f,\"met\":%s",
			       bg, ratio, BSH_TARGET, met ? "true" : "false");
		else
			printf("\"baseline_gbps\":null,\"ratio\":null,\"target\":%.2f,\"met\":null",
			       BSH_TARGET);
		if (backend == BSH_DIR) {
			printf(",\"o_direct\":%s", b->direct ? "true" : "false");
			printf(",\"suspect\":%s", why ? "true" : "false");
			if (why)
				printf(",\"suspect_reason\":\"%s\"", why);
			else
				printf(",\"suspect_reason\":null");
			printf(",\"baseline_shape\":");
			if (shape >= 0)
				printf("\"%s\"", bsh_shape_name[shape]);
			else
				printf("null");
			if (get && kdev >= 0)
				printf(",\"device_read_per_byte\":%.4f", kdev);
			if (get && fdev >= 0)
				printf(",\"baseline_device_read_per_byte\":%.4f", fdev);
		}
		printf(",\"smoke\":%s}\n", b->o.smoke ? "true" : "false");
	} else {
		printf("%-4s %-4s %8s %5u  kvtier %7.3f GB/s  %-7s ", bsh_backend_name[backend], op,
		       bench_fmt_size(sz, sizeof(sz), b->size), b->o.conns, g, bname);
		if (have_base)
			printf("%7.3f GB/s  ratio %.2f%s%s%s%s\n", bg, ratio,
			       why ? "  SUSPECT: " : met ? "" : "  (below 0.9)", why ? why : "",
			       shape >= 0 ? "  fio shape " : "", shape >= 0 ? bsh_shape_name[shape] : "");
		else
			printf("    n/a\n");
	}
	fflush(stdout);
}

static int bsh_size(struct bsh *b, int backend, uint64_t size)
{
	double kp[BSH_ROUNDS_MAX], kg[BSH_ROUNDS_MAX], bp[BSH_ROUNDS_MAX], bg[BSH_ROUNDS_MAX];
	struct bsh_dev dv[BSH_ROUNDS_MAX];
	bool have_base = backend == BSH_S3 || b->have_fio;
	int rc = -1;

	b->size = size;
	b->n = b->o.bytes / size ? b->o.bytes / size : 1;
	b->src = calloc(b->n, sizeof(*b->src));
	b->dst = calloc(b->n, sizeof(*b->dst));
	if (!b->src || !b->dst)
		goto out;
	for (uint64_t i = 0; i < b->n; i++) {
		b->src[i] = aligned_alloc(4096, bench_align_up(size, 4096));
		b->dst[i] = aligned_alloc(4096, bench_align_up(size, 4096));
		if (!b->src[i] || !b->dst[i]) {
			bench_err(BSH_WHO,
				  "out of memory for %" PRIu64 " blocks of %" PRIu64
				  " bytes (use --bytes)",
				  b->n, size);
			goto out;
		}
		bench_fill(b->src[i], size, bench_seed(size, i));
	}
	if (backend == BSH_S3 && !b->warmed) {
		/* A fresh object store grows its volumes on the first writes:
		 * whoever went first would pay for it.  Untimed, not reported. */
		uint64_t n = b->n;
		double x, y;
		b->n = n < 2 * b->o.conns ? n : 2 * b->o.conns;
		if (bsh_curl_round(b, BSH_ROUNDS_MAX + 1, &x, &y) < 0)
			goto out;
		b->n = n;
		b->warmed = true;
	}
	for (unsigned r = 0; r < b->o.rounds; r++) {
		/* A/B interleaved: the order flips every round. */
		for (unsigned k = 0; k < 2; k++) {
			bool kvt = (k == 0) == (r % 2 == 0);
			if (kvt && bsh_kvt_round(b, backend, r, &kp[r], &kg[r], &dv[r].kvt) < 0)
				goto out;
			if (!kvt && have_base &&
			    (backend == BSH_DIR ? bsh_fio_round(b, r, &bp[r], &bg[r], &dv[r])
						: bsh_curl_round(b, r, &bp[r], &bg[r])) < 0)
				goto out;
		}
		if (!b->o.json)
			fprintf(stderr, "  %s %" PRIu64 " round %u: put %.3f/%.3f get %.3f/%.3f GB/s\n",
				bsh_backend_name[backend], size, r, kp[r], have_base ? bp[r] : 0,
				kg[r], have_base ? bg[r] : 0);
	}
	bsh_report(b, backend, "put", kp, bp, have_base, backend == BSH_DIR ? dv : NULL);
	bsh_report(b, backend, "get", kg, bg, have_base, backend == BSH_DIR ? dv : NULL);
	rc = 0;
out:
	for (uint64_t i = 0; i < b->n; i++) {
		if (b->src)
			free(b->src[i]);
		if (b->dst)
			free(b->dst[i]);
	}
	free(b->src);
	free(b->dst);
	b->src = b->dst = NULL;
	return rc;
}

/* ------------------------------------------------------------------------
 * Options
 */

static void bsh_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier bench shared [--dir DIR] [--s3-endpoint URL [--s3-bucket B]\n"
		"                           [--s3-credentials FILE]] [--backend dir|s3|both]\n"
		"                           [--sizes 2M,16M] [--conns N] [--bytes SIZE]\n"
		"                           [--rounds N] [--dram SIZE] [--fio PATH]\n"
		"                           [--smoke] [--json] [--keep]\n"
		"\n"
		"The shared tier's put (write-down) and get (promotion) of whole blocks,\n"
		"in one run against the storage's own limits:\n"
		"  dir  a shared.dir store on DIR vs fio on the same directory: one file\n"
		"       per block, --conns jobs, io_uring, O_DIRECT where it works;\n"
		"  s3   a shared.s3_* store vs a plain libcurl client (libcurl's SigV4),\n"
		"       PUT and GET of same-sized objects in the same bucket, --conns\n"
		"       connections each.\n"
		"Rounds alternate kvtier and the baseline; medians; every block read is\n"
		"checked byte for byte.  Target: kvtier >= 0.9 of the baseline.\n"
		"\n"
		"  --dir DIR            where the dir backend and fio run (a fresh\n"
		"                       directory under it; required for dir)\n"
		"  --s3-endpoint URL    an S3-compatible endpoint (http://host:port): adds\n"
		"                       the s3 backend; --s3-bucket (default kvt) must\n"
		"                       exist; credentials from --s3-credentials (the\n"
		"                       shared.s3_credentials format) or AWS_ACCESS_KEY_ID,\n"
		"                       AWS_SECRET_ACCESS_KEY, AWS_REGION\n"
		"  --backend B          dir, s3 or both (default: dir, and s3 with an endpoint)\n"
		"  --sizes LIST         block sizes (default 2M,16M)\n"
		"  --conns N            parallel I/Os: shared.threads and shared.s3_conns,\n"
		"                       fio jobs, libcurl threads (default 8)\n"
		"  --bytes SIZE         bytes per round and size (default 1G)\n"
		"  --rounds N           rounds (default 5)\n"
		"  --dram SIZE          the stores' dram.capacity (default 2G; a quarter of\n"
		"                       it is the write-down budget)\n"
		"  --fio PATH           the fio program (default fio)\n"
		"  --smoke              small and quick (CI): 32M per size, 1 round, 4 conns\n"
		"  --json               one JSON line per (backend, op, size)\n"
		"  --keep               leave the run directory behind\n");
}

static int bsh_parse_sizes(const char *v, struct bsh_opts *o)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", v);
	o->nsizes = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t s;
		if (o->nsizes == BSH_SIZES_MAX || bench_parse_size(t, &s) < 0 || s == 0 ||
		    s > (UINT64_C(1) << 30))
			return -1;
		o->sizes[o->nsizes++] = s;
	}
	return o->nsizes ? 0 : -1;
}

/* Credentials for the libcurl client: the file kvtier reads, else the
 * environment (the same sources as shared.s3_credentials). */
static int bsh_creds(struct bsh *b)
{
	const char *r = getenv("AWS_REGION");
	snprintf(b->region, sizeof(b->region), "%s", r && *r ? r : "us-east-1");
	if (b->o.s3_creds) {
		FILE *f = fopen(b->o.s3_creds, "r");
		char line[512];
		if (!f) {
			bench_err(BSH_WHO, "%s: %s", b->o.s3_creds, strerror(errno));
			return -1;
		}
		while (fgets(line, sizeof(line), f)) {
			char *eq = strchr(line, '='), *k = line, *v, *e;
			if (!eq)
				continue;
			*eq = 0;
			v = eq + 1;
			while (*k == ' ' || *k == '\t')
				k++;
			for (e = eq; e > k && (e[-1] == ' ' || e[-1] == '\t'); e--)
				e[-1] = 0;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, " \t\r\n")] = 0;
			if (!strcmp(k, "access_key"))
				snprintf(b->ak, sizeof(b->ak), "%s", v);
			else if (!strcmp(k, "secret_key"))
				snprintf(b->sk, sizeof(b->sk), "%s", v);
			else if (!strcmp(k, "region"))
				snprintf(b->region, sizeof(b->region), "%s", v);
		}
		fclose(f);
	} else {
		const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
		snprintf(b->ak, sizeof(b->ak), "%s", ak ? ak : "");
		snprintf(b->sk, sizeof(b->sk), "%s", sk ? sk : "");
	}
	if (!b->ak[0] || !b->sk[0]) {
		bench_err(BSH_WHO,
			  "no S3 credentials (--s3-credentials, or AWS_ACCESS_KEY_ID and "
			  "AWS_SECRET_ACCESS_KEY)");
		return -1;
	}
	return 0;
}

int bench_shared_main(int argc, char **argv)
{
	struct bsh b = { .dev_known = true };
	const char *backend = NULL;
	bool sizes_set = false, conns_set = false, bytes_set = false, rounds_set = false,
	     dram_set = false;
	int rc = BENCH_EXIT_FAIL;

	b.o.fio = "fio";
	b.o.s3_bucket = "kvt";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			bsh_usage(stdout);
			return BENCH_EXIT_OK;
		}
		if (!strcmp(a, "--smoke") || !strcmp(a, "--json") || !strcmp(a, "--keep")) {
			if (a[2] == 's')
				b.o.smoke = true;
			else if (a[2] == 'j')
				b.o.json = true;
			else
				b.o.keep = true;
			continue;
		}
		if (i + 1 >= argc) {
			bench_err(BSH_WHO, "unknown option or missing value '%s'; see --help", a);
			return BENCH_EXIT_USAGE;
		}
		const char *v = argv[++i];
		uint64_t n = 0;
		bool bad = false;
		if (!strcmp(a, "--dir"))
			b.o.dir = v;
		else if (!strcmp(a, "--fio"))
			b.o.fio = v;
		else if (!strcmp(a, "--s3-endpoint"))
			b.o.s3_endpoint = v;
		else if (!strcmp(a, "--s3-bucket"))
			b.o.s3_bucket = v;
		else if (!strcmp(a, "--s3-credentials"))
			b.o.s3_creds = v;
		else if (!strcmp(a, "--backend"))
			backend = v;
		else if (!strcmp(a, "--sizes"))
			bad = bsh_parse_sizes(v, &b.o) < 0, sizes_set = true;
		else if (!strcmp(a, "--conns"))
			bad = bench_parse_size(v, &n) < 0 || n < 1 || n > BSH_CONNS_MAX,
			b.o.conns = (unsigned)n, conns_set = true;
		else if (!strcmp(a, "--rounds"))
			bad = bench_parse_size(v, &n) < 0 || n < 1 || n > BSH_ROUNDS_MAX,
			b.o.rounds = (unsigned)n, rounds_set = true;
		else if (!strcmp(a, "--bytes"))
			bad = bench_parse_size(v, &b.o.bytes) < 0 || b.o.bytes == 0, bytes_set = true;
		else if (!strcmp(a, "--dram"))
			bad = bench_parse_size(v, &b.o.dram) < 0 || b.o.dram < (UINT64_C(64) << 20),
			dram_set = true;
		else {
			bench_err(BSH_WHO, "unknown option '%s'; see --help", a);
			return BENCH_EXIT_USAGE;
		}
		if (bad) {
			bench_err(BSH_WHO, "bad value '%s' for %s", v, a);
			return BENCH_EXIT_USAGE;
		}
	}
	if (!sizes_set) {
		b.o.sizes[0] = 2 * BSH_MIB;
		b.o.sizes[1] = 16 * BSH_MIB;
		b.o.nsizes = 2;
	}
	if (!conns_set)
		b.o.conns = b.o.smoke ? 4 : 8;
	if (!bytes_set)
		b.o.bytes = b.o.smoke ? 32 * BSH_MIB : UINT64_C(1) << 30;
	if (!rounds_set)
		b.o.rounds = b.o.smoke ? 1 : 5;
	if (!dram_set)
		b.o.dram = b.o.smoke ? 256 * BSH_MIB : UINT64_C(2) << 30;
	if (!backend)
		backend = b.o.s3_endpoint ? "both" : "dir";
	b.o.do_dir = !strcmp(backend, "dir") || !strcmp(backend, "both");
	b.o.do_s3 = !strcmp(backend, "s3") || !strcmp(backend, "both");
	if (!b.o.do_dir && !b.o.do_s3) {
		bench_err(BSH_WHO, "--backend is dir, s3 or both");
		return BENCH_EXIT_USAGE;
	}
	if (b.o.do_dir && !b.o.dir) {
		bench_err(BSH_WHO,
			  "the dir backend needs --dir DIR (on the file system to measure)");
		return BENCH_EXIT_USAGE;
	}
	if (b.o.do_s3 && !b.o.s3_endpoint) {
		bench_err(BSH_WHO, "the s3 backend needs --s3-endpoint URL");
		return BENCH_EXIT_USAGE;
	}
	for (unsigned i = 0; i < b.o.nsizes; i++) {
		if (b.o.sizes[i] > b.o.dram / 8) {
			bench_err(BSH_WHO, "--dram %" PRIu64 " is too small for blocks of %" PRIu64,
				  b.o.dram, b.o.sizes[i]);
			return BENCH_EXIT_USAGE;
		}
	}
	if (b.o.do_s3 && bsh_creds(&b) < 0)
		return BENCH_EXIT_USAGE;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		bench_err(BSH_WHO, "curl_global_init failed");
		return BENCH_EXIT_FAIL;
	}

	snprintf(b.run_dir, sizeof(b.run_dir), "%s/kvtier-bench-shared.XXXXXX",
		 b.o.dir ? b.o.dir : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"));
	if (!mkdtemp(b.run_dir)) {
		bench_err(BSH_WHO, "making a run directory %s: %s", b.run_dir, strerror(errno));
		goto done;
	}
	if (b.o.do_dir) {
		char *av[] = { (char *)b.o.fio, (char *)"--version", NULL }, err[2048], ep[4200], *out;
		double wall;
		snprintf(ep, sizeof(ep), "%s/fio.err", b.run_dir);
		out = bench_spawn_capture(av, ep, &wall, err, sizeof(err));
		b.have_fio = out != NULL;
		free(out);
		unlink(ep);
		if (!b.have_fio)
			bench_err(BSH_WHO, "no fio (%s): the dir rows have no baseline", b.o.fio);
	}
	if (!b.o.json)
		printf("kvtier bench shared: %u conns, %" PRIu64 " bytes per round and size, %u rounds%s\n",
		       b.o.conns, b.o.bytes, b.o.rounds, b.o.smoke ? " (smoke)" : "");
	for (int be = BSH_DIR; be <= BSH_S3; be++) {
		if ((be == BSH_DIR && !b.o.do_dir) || (be == BSH_S3 && !b.o.do_s3))
			continue;
		for (unsigned i = 0; i < b.o.nsizes; i++)
			if (bsh_size(&b, be, b.o.sizes[i]) < 0)
				goto done;
	}
	rc = BENCH_EXIT_OK;
	if (!b.o.json && (b.suspects || b.missed))
		printf("# %u row(s) below the 0.9 target, %u SUSPECT (ratio above %.1f or reads "
		       "that did not reach the device: not met)\n", b.missed, b.suspects, BSH_SUSPECT);
	if (!b.dev_known)
		bench_err(BSH_WHO, "/proc/self/io unreadable: device reads not checked");
done:
	if (b.run_dir[0] && !b.o.keep)
		bench_rm_tree(b.run_dir);
	memset(b.sk, 0, sizeof(b.sk));
	curl_global_cleanup();
	return rc;
}

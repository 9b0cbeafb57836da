/*
 * gc.c - "kvtier gc": collect a shared tier's directory (the shared.dir of
 * the stores that use it) or bucket (their shared.s3_*) by age and size,
 * through kvt_shared_gc or kvt_shared_gc_s3.
 *
 * Safe while stores use the directory: a store that loses a block sees a
 * miss.  Prints one line of counts (or JSON with --json) on stdout.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"

#include "../bench/bench.h"
#include "gc.h"

static void gc_usage(FILE *f)
{
	fprintf(f,
		"usage: kvtier gc --dir DIR [--budget SIZE] [--max-age SECS] [--json]\n"
		"       kvtier gc --s3-endpoint URL --s3-bucket BUCKET [--s3-credentials FILE]\n"
		"                 [--budget SIZE] [--max-age SECS] [--json]\n"
		"\n"
		"Collect a shared tier directory: remove blocks not written or read for\n"
		"more than SECS seconds, then, while the rest exceeds SIZE bytes (K, M,\n"
		"G, T suffixes), the oldest (to 1/64 of their age; a second walk, in\n"
		"memory that does not grow with the tree).  Temporary files of writers\n"
		"that died are removed after an hour.  Stores may keep using the directory.\n"
		"\n"
		"Or a bucket (the stores' shared.s3_endpoint and shared.s3_bucket): the\n"
		"same by each object's Last-Modified time (when it was written; reads do\n"
		"not refresh it).  Credentials: --s3-credentials FILE (access_key = ...,\n"
		"secret_key = ..., region = ... lines, readable by its owner only), else\n"
		"AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.\n"
		"\n"
		"Prints one line of counts (--json: one JSON object).  Exit status: 0 ok,\n"
		"1 failure, 2 usage.  kvtier(1).\n");
}

int gc_main(int argc, char **argv)
{
	const char *dir = NULL, *endpoint = NULL, *bucket = NULL, *creds = NULL;
	uint64_t budget = 0, age = 0;
	bool json = false;
	struct kvt_shared_gc_result res;
	int ret;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			gc_usage(stdout);
			return BENCH_EXIT_OK;
		}
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "kvtier gc: unknown option or missing value '%s'\n"
					"Run 'kvtier gc --help'.\n", a);
			return BENCH_EXIT_USAGE;
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--dir")) {
			dir = v;
		} else if (!strcmp(a, "--s3-endpoint")) {
			endpoint = v;
		} else if (!strcmp(a, "--s3-bucket")) {
			bucket = v;
		} else if (!strcmp(a, "--s3-credentials")) {
			creds = v;
		} else if (!strcmp(a, "--budget")) {
			if (bench_parse_size(v, &budget) < 0) {
				fprintf(stderr, "kvtier gc: bad size '%s' (e.g. 500G)\n", v);
				return BENCH_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--max-age")) {
			char *end;
			errno = 0;
			unsigned long long n = strtoull(v, &end, 10);
			if (errno || end == v || *end || v[0] == '-') {
				fprintf(stderr, "kvtier gc: bad number of seconds '%s'\n", v);
				return BENCH_EXIT_USAGE;
			}
			age = n;
		} else {
			fprintf(stderr, "kvtier gc: unknown option '%s'\nRun 'kvtier gc --help'.\n", a);
			return BENCH_EXIT_USAGE;
		}
	}
	if (!dir == !endpoint || (endpoint && !bucket) || (!endpoint && (bucket || creds))) {
		fprintf(stderr, "kvtier gc: --dir DIR, or --s3-endpoint URL with --s3-bucket BUCKET\n"
				"Run 'kvtier gc --help'.\n");
		return BENCH_EXIT_USAGE;
	}
	if (dir)
		ret = kvt_shared_gc(dir, budget, age, &res);
	else
		ret = kvt_shared_gc_s3(endpoint, bucket, creds, budget, age, &res);
	if (ret < 0) {
		fprintf(stderr, "kvtier gc: %s%s%s: %s\n", dir ? dir : endpoint, dir ? "" : "/",
			dir ? "" : bucket,
			ret == -EACCES ? "access denied (check the credentials)"
			: ret == KVT_EOPTVAL ? "no usable credentials (missing, or a file others can "
					       "read): give --s3-credentials FILE (mode 0600) or set "
					       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
					      : kvt_strerror(ret));
		return BENCH_EXIT_FAIL;
	}
	if (json)
		printf("{\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"removed_files\":%" PRIu64
		       ",\"removed_bytes\":%" PRIu64 ",\"temp_removed\":%" PRIu64 "}\n",
		       res.files, res.bytes, res.removed_files, res.removed_bytes, res.temp_removed);
	else
		printf("files %" PRIu64 " bytes %" PRIu64 " removed_files %" PRIu64
		       " removed_bytes %" PRIu64 " temp_removed %" PRIu64 "\n",
		       res.files, res.bytes, res.removed_files, res.removed_bytes, res.temp_removed);
	return BENCH_EXIT_OK;
}

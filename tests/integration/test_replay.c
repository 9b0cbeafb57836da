/*
 * test_replay.c - "kvtier replay" end to end: the real kvtier binary on
 * tests/data/replay-small.jsonl, embedded, asserting the hit counts worked
 * out by hand below; a malformed trace; --server; a sweep; --synth.
 *
 *   test_replay KVTIER DATA_DIR [KVTIERD]  the hand-made trace (and, with
 *                                          KVTIERD, through a real server)
 *   test_replay KVTIER --real PATH         a smoke run on a real trace: PATH,
 *                                          or the first *.jsonl in directory
 *                                          PATH (a failure if there is none:
 *                                          the repository bundles one)
 *
 * The hand-made trace (ids per request, tokens):
 *
 *   R1 [1,2,3] 1100   R2 [1,2,4] 1324   R3 [5] 512   R4 [1,2,4,6] 1600
 *   R5 [5,7] 700      R6 [8,10,11,12] 2000          R7 [1,2,3] 1100
 *
 * An unlimited cache hits 0,2,0,3,1,0,3 blocks: 9 of 20, 4172 tokens.
 * LRU DRAM of 8 blocks (--bytes-per-token 1024: 512 KiB blocks, --dram 4M;
 * oldest first, a get refreshes, a lookup does not):
 *
 *   R1 put 1 2 3          -> 1 2 3
 *   R2 get 1 2, put 4     -> 3 1 2 4
 *   R3 put 5              -> 3 1 2 4 5
 *   R4 get 1 2 4, put 6   -> 3 5 1 2 4 6
 *   R5 get 5, put 7       -> 3 1 2 4 6 5 7
 *   R6 put 8 10 11 12     -> 8 fit; 10, 11, 12 evict 3, 1, 2
 *   R7 lookup 1: gone     -> 0 hits
 *
 * DRAM only: 6 blocks hit (3072 tokens).  With an SSD tier that takes every
 * block (--admission always, --flush-each so none is shed), R7 finds 1, 2
 * and 3 on the SSD: 9 hits, 3 of them from SSD.  (A DRAM of 7 or 9 blocks
 * gives the same answers, so arena rounding cannot flip them.)
 */
#include <glob.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "server.h"
#include "t.h"

static const char *kvtier;

/* Run "kvtier replay ARGS" with stdout and stderr into buffers; exit status. */
static int run(const char *args, char **out, char **err)
{
	char *dir = t_mkdtemp(), *cmd;
	int st;
	if (asprintf(&cmd, "'%s' replay %s", kvtier, args) < 0)
		T_FAIL("asprintf");
	st = t_sh_capture(dir, cmd, out, err);
	free(cmd);
	t_rmtree(dir);
	free(dir);
	return st;
}

/* The first JSON line of out whose "kind" is kind (the nth such). */
static json_t *find(const char *out, const char *kind, int nth)
{
	const char *p = out;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		json_error_t jerr;
		json_t *j = json_loadb(p, len, 0, &jerr);
		if (j == NULL)
			T_FAIL("not a JSON line: %.*s (%s)", (int)len, p, jerr.text);
		const char *k = json_string_value(json_object_get(j, "kind"));
		if (k && strcmp(k, kind) == 0 && nth-- == 0)
			return j;
		json_decref(j);
		p += len + (e != NULL);
	}
	T_FAIL("no \"%s\" line in: %s", kind, out);
}

static int64_t num(json_t *j, const char *name)
{
	json_t *v = json_object_get(j, name);
	if (!json_is_integer(v))
		T_FAIL("field %s missing or not an integer", name);
	return json_integer_value(v);
}

static double real(json_t *j, const char *name)
{
	json_t *v = json_object_get(j, name);
	if (!json_is_number(v))
		T_FAIL("field %s missing or not a number", name);
	return json_number_value(v);
}

/* The value of the statistic `# name value` in the hit log at path (-1 if
 * it has none). */
static long long hitlog_stat(const char *path, const char *name)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	size_t n = strlen(name);
	long long v = -1;

	T_ASSERT(f != NULL);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "# ", 2) && !strncmp(line + 2, name, n) && line[2 + n] == ' ')
			v = strtoll(line + 3 + n, NULL, 10);
	fclose(f);
	return v;
}

static void test_small(const char *data)
{
	char args[8192], *out, *err;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	json_t *j;

	/* 1. DRAM only, room for everything: the replay hits what an
	 *    unlimited cache hits, and verifies every block it gets. */
	char hl[4096];
	snprintf(hl, sizeof hl, "%s/replay-hitlog-%d.txt", tmp, (int)getpid());
	snprintf(args, sizeof args, "'%s/replay-small.jsonl' --dram 64M --json --hit-log '%s'",
		 data, hl);
	T_EQ_INT(run(args, &out, &err), 0);
	{
		/* --hit-log: a line per request, a D per block hit in DRAM,
		 * then the store's statistics. */
		FILE *f = fopen(hl, "r");
		char line[1024];
		int reqs = 0, d = 0, stats = 0;
		T_ASSERT(f != NULL);
		while (fgets(line, sizeof line, f)) {
			if (line[0] == '#') {
				stats += !strncmp(line, "# dram.", 7);
				continue;
			}
			reqs++;
			for (char *c = line; *c; c++)
				d += *c == 'D';
		}
		fclose(f);
		unlink(hl);
		T_EQ_INT(reqs, 7);
		T_EQ_INT(d, 9);
		T_ASSERT(stats > 0);
	}
	{
		/* --retain-oracle: the blocks a request puts carry KVT_F_RETAIN
		 * when a later request starts with its first block: requests
		 * 1-4 (roots 1, 1, 5, 1 come back), which put 3 + 1 + 1 + 1
		 * blocks; 5-7 put 5 blocks unhinted (the store counts hinted
		 * inserts in dram.retain_hints, which --hit-log lists). */
		char a2[8192], *out2, *err2;
		snprintf(a2, sizeof a2,
			 "'%s/replay-small.jsonl' --dram 64M --json --retain-oracle --hit-log '%s'", data,
			 hl);
		T_EQ_INT(run(a2, &out2, &err2), 0);
		free(out2);
		free(err2);
		T_EQ_INT(hitlog_stat(hl, "dram.retain_hints"), 6);
		unlink(hl);
		/* --retain-all: the namespace is KVT_NS_RETAIN, so all 11
		 * puts carry the hint (too few for the all-hinted rule,
		 * which waits for 256: none ignored), and the hits are
		 * the unhinted run's. */
		snprintf(a2, sizeof a2,
			 "'%s/replay-small.jsonl' --dram 64M --json --retain-all --hit-log '%s'", data,
			 hl);
		T_EQ_INT(run(a2, &out2, &err2), 0);
		{
			json_t *j2 = find(out2, "replay", 0);
			T_EQ_INT(num(j2, "hit_blocks"), 9);
			json_decref(j2);
		}
		free(out2);
		free(err2);
		T_EQ_INT(hitlog_stat(hl, "dram.retain_hints"), 11);
		T_EQ_INT(hitlog_stat(hl, "dram.retain_ignored"), 0);
		unlink(hl);
	}
	j = find(out, "replay", 0);
	T_EQ_INT(num(j, "requests"), 7);
	T_EQ_INT(num(j, "blocks"), 20);
	T_EQ_INT(num(j, "unique_blocks"), 11);
	T_EQ_INT(num(j, "hit_blocks"), 9);
	T_EQ_INT(num(j, "hit_tokens"), 4172);
	T_EQ_INT(num(j, "tokens"), 8336);
	T_EQ_INT(num(j, "dram_hits"), 9);
	T_EQ_INT(num(j, "ssd_hits"), 0);
	T_EQ_INT(num(j, "lost"), 0);
	T_EQ_INT(num(j, "gets"), 9);
	T_EQ_INT(num(j, "puts"), 11);
	/* 11 puts timed: the percentiles are ordered and not all zero. */
	T_ASSERT(real(j, "put_p50_us") <= real(j, "put_p99_us"));
	T_ASSERT(real(j, "put_p99_us") <= real(j, "put_max_us"));
	T_ASSERT(real(j, "put_max_us") > 0);
	T_EQ_INT(num(j, "verified_bytes"), 9 * num(j, "value_bytes"));
	T_ASSERT(fabs(real(j, "ideal_token_hit_ratio") - 4172.0 / 8336) < 1e-9);
	T_ASSERT(fabs(real(j, "token_hit_ratio") - 4172.0 / 8336) < 1e-9);
	json_decref(j);
	/* The what-if lines are there, labelled modelled. */
	j = find(out, "whatif", 0);
	T_ASSERT(json_is_true(json_object_get(j, "modelled")));
	T_ASSERT(fabs(real(j, "speedup") - 1) < 1e-9); /* recompute against itself */
	json_decref(j);
	free(out);
	free(err);

	/* 2. LRU DRAM of 8 blocks: 6 hits (worked out above). */
	snprintf(args, sizeof args,
		 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 4M --dram-policy lru --json",
		 data);
	T_EQ_INT(run(args, &out, &err), 0);
	j = find(out, "replay", 0);
	T_EQ_INT(num(j, "value_bytes"), 512 << 10);
	T_EQ_INT(num(j, "hit_blocks"), 6);
	T_EQ_INT(num(j, "hit_tokens"), 3072);
	T_EQ_INT(num(j, "dram_hits"), 6);
	T_GE_INT(num(j, "dram_evictions"), 3);
	/* What DRAM held, averaged from its first eviction (R6) on: after R6
	 * and R7 it is full (7 to 9 blocks, whatever the arena's rounding). */
	T_EQ_INT(num(j, "full_samples"), 2);
	T_ASSERT(real(j, "dram_blocks_avg") >= 7 && real(j, "dram_blocks_avg") <= 9);
	T_ASSERT(fabs(real(j, "dram_used_avg") - real(j, "dram_blocks_avg") * (512 << 10)) < 1);
	json_decref(j);
	free(out);
	free(err);

	/* 2b. --set goes after the replay's own options: room for every block
	 *     again (9 hits); a bad one is an error naming it; no '=' is usage. */
	snprintf(args, sizeof args,
		 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 4M --dram-policy lru "
		 "--set dram.capacity=64M --json", data);
	T_EQ_INT(run(args, &out, &err), 0);
	j = find(out, "replay", 0);
	T_EQ_INT(num(j, "hit_blocks"), 9);
	T_EQ_INT(num(j, "full_samples"), 0);
	json_decref(j);
	free(out);
	free(err);
	snprintf(args, sizeof args, "'%s/replay-small.jsonl' --dram 4M --set dram.capacity=lots", data);
	T_EQ_INT(run(args, &out, &err), 1);
	T_ASSERT(strstr(err, "option dram.capacity=lots") != NULL);
	free(out);
	free(err);
	snprintf(args, sizeof args, "'%s/replay-small.jsonl' --dram 4M --set dram.capacity", data);
	T_EQ_INT(run(args, &out, &err), 2);
	T_ASSERT(strstr(err, "--set wants NAME=VALUE") != NULL);
	free(out);
	free(err);

	{
		/* 2b. The SSD holds the bytes asked: 35.12 MiB was 17
		 *     segments of 2 MiB (a sixteenth, whole MiB), 3.2 % of it
		 *     left out, then (whole MiB, at most 1/128 out) 35 of
		 *     1 MiB; since 2026-12-05 segments are whole 4 KiB pages:
		 *     8992 pages are 16 segments of 562, every byte held.  8999
		 *     pages (a prime) divide by no count near 16: 16 segments
		 *     of 562 pages leave 7 pages, under a page a segment. */
		static const long long asked[] = { 36831232, 36859904 };
		for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
			char a2[8192], *out2, *err2;
			long long cap;
			snprintf(a2, sizeof a2,
				 "'%s/replay-small.jsonl' --bytes-per-token 32 --dram 4M "
				 "--ssd %lld --dir '%s' --hit-log '%s'",
				 data, asked[i], tmp, hl);
			T_EQ_INT(run(a2, &out2, &err2), 0);
			free(out2);
			free(err2);
			cap = hitlog_stat(hl, "ssd.capacity_bytes");
			unlink(hl);
			if (i == 0)
				T_EQ_INT(cap, asked[i]);
			else
				T_ASSERT(cap < asked[i] && cap >= asked[i] - 16 * 4096);
		}
	}

	/* 3. The same DRAM over an SSD tier that keeps every block, under a
	 * --dir the replay makes (its run directory removed after). */
	char made[600];
	snprintf(made, sizeof made, "%s/replay-made-%d", tmp, (int)getpid());
	snprintf(args, sizeof args,
		 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 4M --dram-policy lru "
		 "--ssd 64M --admission always --flush-each --dir '%s' --json",
		 data, made);
	int rc = run(args, &out, &err);
	if (rc != 0)
		T_FAIL("exit %d: %s", rc, err);
	T_OK(rmdir(made)); /* there, and empty */
	j = find(out, "replay", 0);
	T_EQ_INT(num(j, "hit_blocks"), 9);
	T_EQ_INT(num(j, "hit_tokens"), 4172);
	T_EQ_INT(num(j, "dram_hits"), 6);
	T_EQ_INT(num(j, "ssd_hits"), 3);
	T_EQ_INT(num(j, "lost"), 0);
	T_EQ_INT(num(j, "ssd_read_bytes"), 3 * (512 << 10));
	T_EQ_INT(num(j, "ssd_writedown_shed"), 0);
	T_EQ_INT(num(j, "verified_bytes"), 9 * (512 << 10));
	json_decref(j);
	free(out);
	free(err);

	/* 3b. The SSD's bytes averaged once its log is full (doc/replay.md):
	 *     a 2 MiB SSD under 300 synthetic requests reclaims segments; the
	 *     live values are the index entries' values (a prompt's last
	 *     block may be short: at most value_bytes each, most of them
	 *     whole), within the live records, within the records in the
	 *     slots, within the whole segments held. */
	snprintf(args, sizeof args,
		 "--synth=300 --bytes-per-token 32 --dram 1M --ssd 2M --flush-each --dir '%s' "
		 "--json",
		 tmp);
	T_EQ_INT(run(args, &out, &err), 0);
	j = find(out, "replay", 0);
	T_ASSERT(num(j, "full_samples") > 0);
	T_EQ_INT(num(j, "ssd_capacity_bytes"), 2 << 20);
	T_ASSERT(real(j, "ssd_value_bytes_avg") <=
		 real(j, "ssd_blocks_avg") * (double)num(j, "value_bytes") + 1);
	T_ASSERT(real(j, "ssd_value_bytes_avg") >=
		 0.9 * real(j, "ssd_blocks_avg") * (double)num(j, "value_bytes"));
	T_ASSERT(real(j, "ssd_value_bytes_avg") > 0);
	T_ASSERT(real(j, "ssd_value_bytes_avg") <= real(j, "ssd_live_bytes_avg"));
	T_ASSERT(real(j, "ssd_live_bytes_avg") <= real(j, "ssd_log_bytes_avg"));
	T_ASSERT(real(j, "ssd_log_bytes_avg") <= (double)(2 << 20));
	json_decref(j);
	free(out);
	free(err);

	/* 4. A malformed line: a clear error naming the file and line (no
	 *    block size fits lines 1 and 3; told 512, line 3 needs 4). */
	snprintf(args, sizeof args, "'%s/replay-bad.jsonl' --dram 64M", data);
	T_EQ_INT(run(args, &out, &err), 1);
	T_ASSERT(strstr(err, "replay-bad.jsonl:3: ") != NULL);
	T_ASSERT(strstr(err, "no one block size fits") != NULL);
	T_EQ_STR(out, "");
	free(out);
	free(err);
	snprintf(args, sizeof args, "'%s/replay-bad.jsonl' --dram 64M --block-tokens 512", data);
	T_EQ_INT(run(args, &out, &err), 1);
	T_ASSERT(strstr(err, "replay-bad.jsonl:3: ") != NULL);
	T_ASSERT(strstr(err, "needs 4 blocks") != NULL);
	free(out);
	free(err);

	/* 4b. The hand-made trace in 16-token blocks, its clock in seconds
	 *     with a fraction and fields beside (as Alibaba's Qwen traces):
	 *     the block size and the unit are found, and LRU of 8 blocks of
	 *     the same bytes (32 KiB a token x 16) hits the same 6. */
	{
		static const char *lines[7] = {
			"\"hash_ids\": [1, 2, 3], \"input_length\": 35",
			"\"hash_ids\": [1, 2, 4], \"input_length\": 42",
			"\"hash_ids\": [5], \"input_length\": 16",
			"\"hash_ids\": [1, 2, 4, 6], \"input_length\": 50",
			"\"hash_ids\": [5, 7], \"input_length\": 22",
			"\"hash_ids\": [8, 10, 11, 12], \"input_length\": 63",
			"\"hash_ids\": [1, 2, 3], \"input_length\": 35",
		};
		char *tdir = t_mkdtemp(), tpath[4096];
		snprintf(tpath, sizeof tpath, "%s/qwen16.jsonl", tdir);
		FILE *f = fopen(tpath, "w");
		T_ASSERT(f != NULL);
		for (int i = 0; i < 7; i++)
			fprintf(f, "{\"chat_id\": %d, \"turn\": 1, \"timestamp\": %d.25, "
				"\"output_length\": 3, %s}\n", i, i, lines[i]);
		T_OK(fclose(f));
		snprintf(args, sizeof args, "'%s' --bytes-per-token 32768 --dram 4M "
			 "--dram-policy lru --json --no-progress", tpath);
		T_EQ_INT(run(args, &out, &err), 0);
		j = find(out, "replay", 0);
		T_EQ_INT(num(j, "block_tokens"), 16);
		T_EQ_STR(json_string_value(json_object_get(j, "time_unit")), "s");
		T_EQ_INT(num(j, "blocks"), 20);
		T_EQ_INT(num(j, "unique_blocks"), 11);
		T_EQ_INT(num(j, "value_bytes"), 512 * 1024);
		T_EQ_INT(num(j, "hit_blocks"), 6);
		T_EQ_INT(num(j, "dram_value_footprint"), 512 * 1024);
		json_decref(j);
		free(out);
		free(err);
		/* 4c. Small blocks, small values: the default bytes per token
		 *     makes a value whole 4 KiB chunks (256 B/token at 16
		 *     tokens, where 80 % of 32 KiB would give 144: 2304-byte
		 *     values, each in a 4 KiB chunk), so a 32 KiB DRAM holds
		 *     the 8 blocks its bytes say and hits the same 6.  Asked
		 *     for 512-byte values, the replay says what DRAM wastes. */
		snprintf(args, sizeof args, "'%s' --dram 32K --dram-policy lru --json --no-progress",
			 tpath);
		T_EQ_INT(run(args, &out, &err), 0);
		j = find(out, "replay", 0);
		T_EQ_INT(num(j, "bytes_per_token"), 256);
		T_EQ_INT(num(j, "value_bytes"), 4096);
		T_EQ_INT(num(j, "dram_value_footprint"), 4096);
		T_EQ_INT(num(j, "hit_blocks"), 6);
		T_ASSERT(strstr(err, "note:") == NULL);
		json_decref(j);
		free(out);
		free(err);
		snprintf(args, sizeof args, "'%s' --bytes-per-token 32 --dram 32K --dram-policy lru "
			 "--json --no-progress", tpath);
		T_EQ_INT(run(args, &out, &err), 0);
		j = find(out, "replay", 0);
		T_EQ_INT(num(j, "value_bytes"), 512);
		T_EQ_INT(num(j, "dram_value_footprint"), 4096);
		T_ASSERT(strstr(err, "DRAM holds 12 % of the blocks") != NULL);
		T_ASSERT(strstr(err, "a multiple of 256 would") != NULL);
		json_decref(j);
		free(out);
		free(err);
		snprintf(args, sizeof args, "'%s' --bytes-per-token 32 --dram 32K --no-progress", tpath);
		T_EQ_INT(run(args, &out, &err), 0);
		T_ASSERT(strstr(out, "each value takes 4 KiB of DRAM") != NULL);
		free(out);
		free(err);
		t_rmtree(tdir);
		free(tdir);
	}

	/* 5. A kvtierd that is down costs nothing but its hits: the run ends,
	 *    with exactly the DRAM-only answer. */
	snprintf(args, sizeof args,
		 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 4M --dram-policy lru "
		 "--server 127.0.0.1:1 --json", data);
	rc = run(args, &out, &err);
	if (rc != 0)
		T_FAIL("exit %d: %s", rc, err);
	j = find(out, "replay", 0);
	T_EQ_INT(num(j, "hit_blocks"), 6);
	T_EQ_INT(num(j, "remote_hits"), 0);
	json_decref(j);
	free(out);
	free(err);

	/* 6. A sweep over DRAM sizes: one line each; LRU never hits less
	 *    with more room (it is a stack algorithm). */
	snprintf(args, sizeof args,
		 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 2M,4M,64M --dram-policy lru --json"
		 " --plot '%s/replay-plot.svg'", data, tmp);
	T_EQ_INT(run(args, &out, &err), 0);
	{
		/* --plot: an SVG with one point per sweep run, the ideal, and the
		 * modelled TTFT bars. */
		char path[4200], *svg = calloc(1, 1 << 16);
		FILE *f;
		size_t got;
		int circles = 0;
		snprintf(path, sizeof path, "%s/replay-plot.svg", tmp);
		f = fopen(path, "r");
		T_ASSERT(f != NULL && svg != NULL);
		got = fread(svg, 1, (1 << 16) - 1, f);
		fclose(f);
		svg[got] = 0;
		T_ASSERT(strncmp(svg, "<svg ", 5) == 0);
		T_ASSERT(strstr(svg, "</svg>") != NULL);
		T_ASSERT(strstr(svg, "ideal (unlimited) 45.0%") != NULL);
		T_ASSERT(strstr(svg, ">recompute<") != NULL);
		for (const char *p = svg; (p = strstr(p, "<circle")); p++)
			circles++;
		T_EQ_INT(circles, 3);
		unlink(path);
		free(svg);
	}
	double prev = -1;
	for (int i = 0; i < 3; i++) {
		j = find(out, "sweep", i);
		double h = real(j, "block_hit_ratio");
		T_ASSERT(h >= prev);
		prev = h;
		if (i == 1)
			T_ASSERT(fabs(h - 6.0 / 20) < 1e-9);
		json_decref(j);
	}
	T_ASSERT(fabs(prev - 9.0 / 20) < 1e-9); /* room for all: the ideal */
	free(out);
	free(err);

	/* 7. Usage errors exit 2. */
	T_EQ_INT(run("--synth=10 --bytes-per-token 7", &out, &err), 2);
	free(out);
	free(err);
	T_EQ_INT(run("", &out, &err), 2);
	free(out);
	free(err);

	/* 8. A synthetic trace replays, and says it is synthetic. */
	T_EQ_INT(run("--synth=200 --dram 64M --json", &out, &err), 0);
	j = find(out, "replay", 0);
	T_ASSERT(json_is_true(json_object_get(j, "synthetic")));
	T_EQ_INT(num(j, "requests"), 200);
	T_ASSERT(real(j, "block_hit_ratio") > 0);
	T_ASSERT(real(j, "block_hit_ratio") <= real(j, "ideal_block_hit_ratio") + 1e-12);
	json_decref(j);
	free(out);
	free(err);
}

/*
 * Through a real kvtierd: the first run writes every block through to the
 * server; a second run, with a fresh local DRAM, finds what its DRAM does
 * not hold on the server.  R1's blocks 1 2 3 are put by the first run, so
 * the second run's R1 already hits 3 blocks remotely, and every request
 * hits the ideal's count or more (nothing is ever evicted on the server).
 */
static void test_server(const char *data, const char *kvtierd)
{
	char args[8192], addr[64], *out, *err, *base = t_mkdtemp(), dir[4200];
	struct tsrv srv;
	json_t *j;
	snprintf(dir, sizeof dir, "%s/data", base);
	T_RC(mkdir(dir, 0700), 0);
	tsrv_start(&srv, kvtierd, base, dir, NULL, NULL);
	snprintf(addr, sizeof addr, "127.0.0.1:%u", srv.port);
	for (int pass = 0; pass < 2; pass++) {
		snprintf(args, sizeof args,
			 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 4M --dram-policy lru "
			 "--server %s --json", data, addr);
		int rc = run(args, &out, &err);
		if (rc != 0)
			T_FAIL("exit %d: %s", rc, err);
		j = find(out, "replay", 0);
		if (pass == 0) {
			/* The server fills as the run goes: R7 finds 1 2 3 there. */
			T_EQ_INT(num(j, "hit_blocks"), 9);
			T_EQ_INT(num(j, "remote_hits"), 3);
		} else {
			/* Everything was on the server before the run began. */
			T_EQ_INT(num(j, "hit_blocks"), 20);
			T_ASSERT(num(j, "remote_hits") >= 11);
		}
		T_EQ_INT(num(j, "hit_blocks"),
			 num(j, "dram_hits") + num(j, "ssd_hits") + num(j, "remote_hits"));
		json_decref(j);
		free(out);
		free(err);
	}
	/* --server-capacity: the optimum counts the server's bytes too.  At
	 * 1 MiB of DRAM (2 blocks of 512 KiB) the optimum is below the
	 * ideal; with the server's 8 MiB (16 more) it is the ideal's 9 of 20
	 * blocks, and of_optimum is the hit ratio over it; the table names it. */
	{
		static const char *const extra[] = { "--json", "--json --server-capacity 8M",
						     "--server-capacity 8M --no-progress" };
		double opt_all;
		for (int k = 0; k < 3; k++) {
			snprintf(args, sizeof args,
				 "'%s/replay-small.jsonl' --bytes-per-token 1024 --dram 1M "
				 "--dram-policy lru --server %s %s", data, addr, extra[k]);
			T_EQ_INT(run(args, &out, &err), 0);
			if (k == 2) {
				/* The table says so. */
				if (!strstr(out, "offline, at DRAM+SSD+server = 18 blocks"))
					T_FAIL("no optimum at DRAM+SSD+server in:\n%s", out);
			} else if (k == 0) {
				j = find(out, "replay", 0);
				T_EQ_INT(num(j, "optimum_capacity_blocks"), 2);
				T_EQ_INT(num(j, "optimum_server_bytes"), 0);
				T_ASSERT(real(j, "optimum_block_hit_ratio") < 9.0 / 20 - 1e-9);
				json_decref(j);
			} else {
				j = find(out, "replay", 0);
				T_EQ_INT(num(j, "optimum_capacity_blocks"), 18);
				T_EQ_INT(num(j, "optimum_server_bytes"), 8 << 20);
				opt_all = real(j, "optimum_block_hit_ratio");
				T_ASSERT(fabs(opt_all - 9.0 / 20) < 1e-9);
				T_ASSERT(fabs(real(j, "of_optimum") -
					      real(j, "block_hit_ratio") / opt_all) < 1e-9);
				json_decref(j);
			}
			free(out);
			free(err);
		}
	}
	/* Without --server it means nothing: a usage error. */
	snprintf(args, sizeof args, "'%s/replay-small.jsonl' --server-capacity 8M", data);
	T_EQ_INT(run(args, &out, &err), 2);
	T_ASSERT(strstr(err, "--server-capacity goes with --server"));
	free(out);
	free(err);
	T_EQ_INT(tsrv_stop(&srv), 0);
	t_rmtree(base);
	free(base);
}

/*
 * The same DRAM-only replay twice gives the same hits (doc/policies.md
 * "Reproducible replays").  prefix-adapt samples keys by the index hash
 * and its ghost keeps them by it: with a random secret per open, this
 * replay (800 requests, DRAM a sixth of their distinct blocks) gave 582,
 * 582, 701 and 766 hits in four runs.  The replay fixes dram.hash_seed; the
 * test also checks the simulations did decide something (a mode switch),
 * without which the runs could not differ anyway.  1,200 requests since
 * 2026-12-07: with the namespace's seed keyed (seed44) the sample of the
 * first 800 decided no switch at this seed; 1,200 make 3.
 */
static void test_repeat(const char *trace)
{
	char args[8192], hl[4096], *out, *err;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	int64_t hits[2];
	snprintf(hl, sizeof hl, "%s/replay-repeat-%d.txt", tmp, (int)getpid());
	snprintf(args, sizeof args,
		 "'%s' --limit 1200 --bytes-per-token 32 --dram 40M --json --no-progress --hit-log '%s'",
		 trace, hl);
	for (int i = 0; i < 2; i++) {
		int rc = run(args, &out, &err);
		if (rc != 0)
			T_FAIL("exit %d: %s", rc, err);
		json_t *j = find(out, "replay", 0);
		hits[i] = num(j, "hit_blocks");
		T_EQ_INT(num(j, "requests"), 1200);
		json_decref(j);
		free(out);
		free(err);
		/* The bundled trace switches; another (-Dreplay_traces) may not. */
		if (strstr(trace, "mooncake-fast25-synthetic.jsonl"))
			T_ASSERT(hitlog_stat(hl, "dram.adapt_switches") >= 1);
		unlink(hl);
	}
	fprintf(stderr, "two runs: %" PRId64 " and %" PRId64 " hits\n", hits[0], hits[1]);
	T_EQ_INT(hits[0], hits[1]);
}

/* The hit log at path without its statistics: one line a request. */
static char *hitlog_hits(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[65536];
	size_t len = 0, cap = 1 << 20;
	char *b = calloc(1, cap);

	T_ASSERT(f != NULL && b != NULL);
	while (fgets(line, sizeof line, f)) {
		size_t n = strlen(line);
		if (!strncmp(line, "# ", 2))
			continue;
		if (len + n + 1 > cap) {
			cap = 2 * (len + n + 1);
			b = realloc(b, cap);
			T_ASSERT(b != NULL);
		}
		memcpy(b + len, line, n + 1);
		len += n;
	}
	fclose(f);
	return b;
}

/*
 * DRAM + SSD with --flush-each, twice: the same hits, request by request
 * and tier by tier, and the same SSD log -- as many batches, records and
 * bytes (doc/policies.md "Twelfth pass").  --flush-each waits for every
 * write-down, so nothing may depend on the writer thread's timing; until
 * 2026-12-05 a batch took whatever victims and reclamation carries were
 * queued when the writer woke, and a flush could return before the carries
 * it caused were written: this replay gave 668, 671, 671 and 671 batches
 * in four runs of one binary (the whole trace 0.4353-0.4393 of its blocks).
 */
static void test_repeat_ssd(const char *trace)
{
	static const char *const stats[] = {
		"ssd.batches", "ssd.batched_blocks", "ssd.log_record_bytes", "ssd.carried_blocks",
		"ssd.segments_evicted", "ssd.writedown_blocks", "dram.evictions", "dram.victim_shed",
	};
	char args[8192], hl[2][4096], *out, *err, *hits[2];
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	int64_t ssd_hits[2];

	for (int i = 0; i < 2; i++) {
		snprintf(hl[i], sizeof hl[i], "%s/replay-repeat-ssd-%d-%d.txt", tmp, (int)getpid(), i);
		snprintf(args, sizeof args,
			 "'%s' --limit 800 --bytes-per-token 32 --dram 15M --ssd 45M --flush-each "
			 "--dir '%s' --json --no-progress --hit-log '%s'",
			 trace, tmp, hl[i]);
		int rc = run(args, &out, &err);
		if (rc != 0)
			T_FAIL("exit %d: %s", rc, err);
		json_t *j = find(out, "replay", 0);
		T_EQ_INT(num(j, "requests"), 800);
		ssd_hits[i] = num(j, "ssd_hits");
		T_EQ_INT(num(j, "ssd_writedown_shed"), 0);
		json_decref(j);
		free(out);
		free(err);
		hits[i] = hitlog_hits(hl[i]);
	}
	/* The bundled trace reclaims segments and carries records read
	 * there: the ground the race was on.  Another may not. */
	if (strstr(trace, "mooncake-fast25-synthetic.jsonl")) {
		T_ASSERT(hitlog_stat(hl[0], "ssd.segments_evicted") > 0);
		T_ASSERT(hitlog_stat(hl[0], "ssd.carried_blocks") > 0);
		T_ASSERT(ssd_hits[0] > 0);
	}
	for (size_t k = 0; k < sizeof stats / sizeof stats[0]; k++) {
		long long a = hitlog_stat(hl[0], stats[k]), b = hitlog_stat(hl[1], stats[k]);
		fprintf(stderr, "%s: %lld and %lld\n", stats[k], a, b);
		T_EQ_INT(a, b);
	}
	T_EQ_INT(ssd_hits[0], ssd_hits[1]);
	T_ASSERT(strcmp(hits[0], hits[1]) == 0);
	for (int i = 0; i < 2; i++) {
		unlink(hl[i]);
		free(hits[i]);
	}
}

/* A real trace, first 600 requests, DRAM + SSD: it runs, verifies, and
 * never beats the ideal. */
static void test_real(const char *path)
{
	char args[8192], pat[4096], *out, *err;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	const char *trace = path;
	struct stat sb;
	glob_t g = { 0 };
	if (stat(path, &sb) != 0)
		T_FAIL("no trace at %s (data/traces is bundled)", path);
	if (S_ISDIR(sb.st_mode)) {
		snprintf(pat, sizeof pat, "%s/*.jsonl", path);
		if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0)
			T_FAIL("no *.jsonl trace in %s", path);
		trace = g.gl_pathv[0];
	}
	fprintf(stderr, "replaying %s\n", trace);
	snprintf(args, sizeof args, "'%s' --limit 600 --dram 64M --ssd 256M --dir '%s' --json",
		 trace, tmp);
	int rc = run(args, &out, &err);
	if (rc != 0)
		T_FAIL("exit %d: %s", rc, err);
	json_t *j = find(out, "replay", 0);
	T_EQ_INT(num(j, "requests"), 600);
	T_ASSERT(num(j, "hit_blocks") > 0);
	T_EQ_INT(num(j, "hit_blocks"), num(j, "dram_hits") + num(j, "ssd_hits"));
	T_EQ_INT(num(j, "gets"), num(j, "hit_blocks") + num(j, "lost"));
	T_EQ_INT(num(j, "verified_bytes"), num(j, "hit_blocks") * num(j, "value_bytes"));
	T_ASSERT(real(j, "block_hit_ratio") <= real(j, "ideal_block_hit_ratio") + 1e-12);
	json_decref(j);
	for (int i = 0; i < 5; i++)
		json_decref(find(out, "whatif", i));
	free(out);
	free(err);
	test_repeat(trace);
	test_repeat_ssd(trace);
	globfree(&g);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		T_FAIL("usage: test_replay KVTIER DATA_DIR | KVTIER --real TRACE");
	kvtier = argv[1];
	if (strcmp(argv[2], "--real") == 0) {
		if (argc < 4)
			T_FAIL("--real needs a trace path");
		test_real(argv[3]);
	} else {
		test_small(argv[2]);
		if (argc >= 4)
			test_server(argv[2], argv[3]);
	}
	return 0;
}

/*
 * test_crashloop.c - a randomized crash loop of kvtierd with DRAM and a
 * small SSD tier that wraps (doc/ssd.md "Durability and recovery",
 * policies.md "Warm restarts"): exact bytes or a miss, and nothing deleted
 * back.
 *
 * Each round starts kvtierd on the same directory (8 MiB of DRAM, 16
 * segments of 1 MiB: the log wraps and reclaims within a round), with
 * SSD options drawn from the seed (format 2 or 3, reuse progressive or
 * whole, admission victim or always, io_uring or psync), checks every key
 * (below), lets client threads put, get, delete and probe for a random
 * while, then ends the server one of five ways:
 *   kill     SIGKILL
 *   term     SIGTERM, then SIGKILL 0-150 ms later (during the graceful
 *            stop's write-down of DRAM, its flushes and its checkpoint)
 *   stop     SIGTERM, waited for
 *   clear    as kill, after a CLEAR of the namespace at the round's start
 *   damage   as kill, then the files damaged (below)
 * and in a third of the rounds (the second always) a start is killed
 * 1-150 ms in (under ASan the store opens 20-100 ms in, and its recovery
 * takes a few ms to 50), before the round's own start.
 * Each client thread owns its keys (one writer per key), so it knows every
 * version a key may hold: a value carries its key, its version and bytes
 * derived from both, so every GET is checked -- other bytes are corruption,
 * and a version put before the key's last answered DELETE (or CLEAR) is a
 * deleted value come back (doc/ssd.md "Deletes and clears": "nothing
 * deleted comes back"; kvtierd.md "Durability of deletes": a DELETE is
 * answered once its tombstone is durable).  A put whose answer was lost
 * in a kill may or may not have landed: both are allowed.  Values of 16
 * bytes to 48 KiB go down batched at format 3; one in 16 is 260-300 KiB,
 * a record of its own, some of several parts.
 *
 * After every round kvt_store_fsck must find no damage (a kill tears
 * nothing before the checkpoint's write point) unless a damage round came
 * before and fsck has not found the store clean since.  In a damage round
 * the stopped store's files are damaged (damage(): bytes flipped, a
 * segment header flipped or zeroed, a range zeroed, a segment cut short,
 * the checkpoint flipped, cut or removed), fsck runs (its finding is
 * counted), and after the restart every GET must still be exact or a
 * miss; a deleted version back is allowed there alone (its tombstone may
 * lie in the damaged bytes: doc/ssd.md "What damage costs"), counted, and
 * deleted again.
 *
 * With argv[2] "resize": run_resize's deterministic sequence instead
 * (a store reopened with another ssd.segment or ssd.capacity and back).
 *
 * KVT_CRASH_SEED picks the run (default: the time; printed, with each
 * round's draw, to reproduce a failure); KVT_CRASH_ROUNDS (default 5:
 * each way of ending once; 6-7 s under ASan) or
 * KVT_CRASH_SECONDS (at least the rounds, then until that many seconds
 * passed) make the long mode.  KVT_CRASH_DAMAGE=NAME (one of damage()'s
 * names: flip, header, zero, ...) makes every damage round that kind,
 * the draws otherwise the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define KEYS 512
#define THREADS 4
#define VAL_MAX (300u << 10)
#define MAGIC 0x4c435643u /* "CVCL" */

static const struct kvt_ns_desc desc = {
	.model = "crash-model", .dtype = "bf16", .layout = "vllm-flash-nhd",
	.block_tokens = 16, .tp_size = 1, .pp_size = 1,
};

/*
 * A key's versions: hi is the newest put tried (its answer may be lost),
 * lo the first not removed by an answered DELETE or CLEAR: a value of a
 * version below lo is a deleted value come back.  Written by the key's
 * owner thread only while clients run, by the main thread between.
 */
struct keyst {
	uint32_t lo, hi;
};

static struct keyst keys[KEYS];
static struct tsrv srv;
static _Atomic bool stop;
static _Atomic uint64_t n_get, n_hit, n_put, n_del, n_del_ok, n_exists;
static _Atomic uint64_t n_corrupt, n_back;
static uint64_t v_hits, v_misses; /* of the checks after each restart */
static uint64_t n_back_damage;    /* deleted versions back after damage */
static const char *damage_only;   /* KVT_CRASH_DAMAGE: damage()'s kind, or NULL */

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16, x *= 0x7feb352d, x ^= x >> 15, x *= 0x846ca68b, x ^= x >> 16;
	return x;
}

static size_t value_len(uint32_t id, uint32_t ver)
{
	uint32_t r = mix(id * 2654435761u ^ ver);
	if (r % 16 == 0)
		return (260u << 10) + r % (40u << 10);
	return 16 + (r >> 4) % (48u << 10);
}

static void value_fill(uint8_t *b, size_t n, uint32_t id, uint32_t ver)
{
	uint32_t h[4] = { MAGIC, id, ver, (uint32_t)n };
	memcpy(b, h, 16);
	tsrv_fill(b + 16, n - 16, mix(id ^ mix(ver + 0x9e3779b9u)) | 1);
}

static void key_of(struct kvt_key *k, uint32_t id)
{
	char name[32];
	snprintf(name, sizeof(name), "crash-%u", id);
	kvt_key_set(k, name, strlen(name));
}

/*
 * Check a GET's answer for key id against its versions.  scratch holds
 * VAL_MAX bytes.  Returns 1 on a hit (the bytes exact, a version
 * allowed), 0 on other bytes (counted and reported), -1 on a deleted
 * version's exact bytes (reported; the caller counts).
 */
static int check_value(uint32_t id, const struct kc_value *v, uint8_t *scratch, const char *who)
{
	uint32_t h[4];
	struct keyst ks = keys[id];

	if (v->len < 16 || !v->crc_ok) {
		atomic_fetch_add(&n_corrupt, 1);
		fprintf(stderr, "%s: key %u: %" PRIu64 " bytes, crc_ok %d\n", who, id, v->len,
			v->crc_ok);
		return 0;
	}
	memcpy(h, v->bytes, 16);
	if (h[0] != MAGIC || h[1] != id || h[3] != v->len || h[2] > ks.hi ||
	    value_len(id, h[2]) != v->len) {
		atomic_fetch_add(&n_corrupt, 1);
		fprintf(stderr, "%s: key %u: header %08x %u %u %u of %" PRIu64 " bytes (hi %u)\n",
			who, id, h[0], h[1], h[2], h[3], v->len, ks.hi);
		return 0;
	}
	value_fill(scratch, v->len, id, h[2]);
	if (memcmp(scratch, v->bytes, v->len) != 0) {
		atomic_fetch_add(&n_corrupt, 1);
		fprintf(stderr, "%s: key %u version %u: other bytes\n", who, id, h[2]);
		return 0;
	}
	if (h[2] < ks.lo) {
		fprintf(stderr, "%s: key %u: version %u back, deleted (versions from %u on live)\n",
			who, id, h[2], ks.lo);
		return -1;
	}
	return 1;
}

static bool login(struct kc *c, uint8_t ns[PROTO_DIGEST_LEN])
{
	if (kc_connect_unix(c, srv.sock) != 0)
		return false;
	if (kc_login(c, "default", NULL) == 0 && kc_register(c, &desc, ns, NULL, 0) == KVT_OK)
		return true;
	kc_close(c);
	return false;
}

struct client {
	pthread_t th;
	unsigned idx;
	uint32_t seed;
};

/* A put of id's next version, of one part or (a large value, some of
 * them) three. */
static int client_put(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], uint32_t id,
		      uint8_t *val)
{
	struct kvt_key k;
	uint32_t ver = ++keys[id].hi;
	size_t n = value_len(id, ver);
	struct iovec p[3];
	unsigned np = 1;

	key_of(&k, id);
	value_fill(val, n, id, ver);
	p[0] = (struct iovec){ val, n };
	if (n > (256u << 10) && (ver & 1)) {
		size_t a = (n / 3) & ~(size_t)4095;
		p[0].iov_len = a;
		p[1] = (struct iovec){ val + a, a };
		p[2] = (struct iovec){ val + 2 * a, n - 2 * a };
		np = 3;
	}
	atomic_fetch_add(&n_put, 1);
	return kc_put(c, ns, &k, p, np, NULL);
}

static void *client_thread(void *arg)
{
	struct client *cl = arg;
	uint8_t ns[PROTO_DIGEST_LEN];
	uint8_t *val = malloc(VAL_MAX), *scratch = malloc(VAL_MAX);
	struct kc c;

	T_ASSERT(val && scratch);
	if (!login(&c, ns))
		goto out;
	while (!atomic_load(&stop)) {
		uint32_t r = mix(cl->seed++);
		uint32_t id = (r % (KEYS / THREADS)) * THREADS + cl->idx, op = (r >> 16) % 100;
		struct kvt_key k;
		int rc;

		key_of(&k, id);
		if (op < 40) {
			rc = client_put(&c, ns, id, val);
		} else if (op < 75) {
			struct kc_value v;
			rc = kc_get(&c, ns, &k, 0, 0, 0, 0, &v);
			atomic_fetch_add(&n_get, 1);
			if (rc == KVT_OK) {
				int ok = check_value(id, &v, scratch, "client");
				if (ok > 0)
					atomic_fetch_add(&n_hit, 1);
				else if (ok < 0)
					atomic_fetch_add(&n_back, 1);
				kc_value_free(&v);
			}
		} else if (op < 92) {
			uint32_t hi = keys[id].hi;
			rc = kc_delete(&c, ns, &k);
			atomic_fetch_add(&n_del, 1);
			if (rc == KVT_OK || rc == KVT_MISS) {
				keys[id].lo = hi + 1;
				atomic_fetch_add(&n_del_ok, rc == KVT_OK);
			}
		} else {
			uint32_t tier;
			rc = kc_exists(&c, ns, &k, &tier);
			atomic_fetch_add(&n_exists, 1);
		}
		if (rc < 0 && rc > -4096)
			break; /* the connection broke: the server is going */
	}
	kc_close(&c);
out:
	free(val);
	free(scratch);
	return NULL;
}

/*
 * Every key through a connection of the main thread.  damaged: the files
 * were damaged while the server was down, and a deleted version may be
 * back (its tombstone in the damaged bytes: doc/ssd.md "What damage
 * costs"): counted in n_back_damage and deleted again, not a failure.
 */
static void check_all(unsigned round, bool damaged)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint8_t *scratch = malloc(VAL_MAX);
	char who[32];
	struct kc c;
	uint64_t back0 = n_back_damage;

	T_ASSERT(scratch);
	T_ASSERT(login(&c, ns));
	snprintf(who, sizeof(who), "round %u check", round);
	for (uint32_t id = 0; id < KEYS; id++) {
		struct kvt_key k;
		struct kc_value v;
		int rc;

		key_of(&k, id);
		rc = kc_get(&c, ns, &k, 0, 0, 0, 0, &v);
		if (rc == KVT_OK) {
			int ok = check_value(id, &v, scratch, who);
			kc_value_free(&v);
			v_hits += ok > 0;
			if (ok < 0 && !damaged) {
				atomic_fetch_add(&n_back, 1);
			} else if (ok < 0) {
				n_back_damage++;
				T_OK(kc_delete(&c, ns, &k));
				keys[id].lo = keys[id].hi + 1;
			}
		} else if (rc == KVT_MISS) {
			v_misses++;
		} else {
			T_FAIL("%s: GET key %u: %d", who, id, rc);
		}
	}
	if (n_back_damage > back0) /* which damage brought them: the round's line above */
		printf("round %u: %" PRIu64 " deleted versions back after the damage\n", round,
		       n_back_damage - back0);
	kc_close(&c);
	free(scratch);
}

static void clear_ns(void)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint64_t removed = 0;
	struct kc c;

	T_ASSERT(login(&c, ns));
	T_OK(kc_clear(&c, PROTO_SCOPE_NS, ns, NULL, &removed));
	kc_close(&c);
	for (uint32_t id = 0; id < KEYS; id++)
		keys[id].lo = keys[id].hi + 1;
}

/*
 * Start bin on dir with tsrv_start's settings and args, and SIGKILL it
 * after ms: while it recovers (reads the checkpoint and segments, seals
 * the segments a crash left open, voids what it does not read).
 */
static void start_killed(const char *bin, const char *base, const char *dir,
			 const char *const *args, unsigned ms)
{
	char log[700], sock[700];
	const char *argv[64];
	int n = 0;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/aborted.log", base);
	snprintf(sock, sizeof(sock), "%s/aborted.sock", base);
	argv[n++] = bin;
	argv[n++] = "--dir";
	argv[n++] = dir;
	argv[n++] = "--set";
	argv[n++] = "dram.prefault=off";
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--unix";
	argv[n++] = sock;
	argv[n++] = "--threads";
	argv[n++] = "2";
	argv[n++] = "--log";
	argv[n++] = log;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		char out[800];
		int fd;
		snprintf(out, sizeof(out), "%s.stderr", log);
		fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	tsrv_sleep_ms(ms);
	kill(pid, SIGKILL);
	T_ASSERT(waitpid(pid, NULL, 0) == pid);
}

enum { END_KILL, END_TERM, END_STOP, END_CLEAR, END_DAMAGE, END__COUNT };
static const char *const end_names[END__COUNT] = { "kill", "term", "stop", "clear", "damage" };

/* The last fsck's torn values: its warnings of a value (or a record) cut
 * past the checkpoint's write point (ssd_fsck.c torn_say).  The main
 * thread's alone. */
static unsigned fsck_torn;

static void fsck_problem(void *ctx, int kind, const char *msg)
{
	const char *what = ctx;
	if (kind != KVT_FSCK_WARN)
		fprintf(stderr, "fsck %s: %d %s\n", what, kind, msg);
	else if (strstr(msg, "a write torn by a crash"))
		fsck_torn++;
}

/* kvt_store_fsck of dir: its return value, f its counts. */
static int fsck(const char *dir, const char *what, struct kvt_fsck *f)
{
	*f = (struct kvt_fsck){ .problem = fsck_problem, .ctx = (void *)what,
				.ssd_capacity = 16u << 20, .ssd_segment = 1u << 20 };
	fsck_torn = 0;
	return kvt_store_fsck(dir, f);
}

/* A random segment file of dir/ssd into path (false: none). */
static bool pick_segment(const char *dir, uint32_t r, char *path, size_t len)
{
	char d[700];
	struct stat st;

	for (unsigned i = 0; i < 32; i++) {
		snprintf(d, sizeof(d), "%s/ssd/seg-%06u", dir, (r + i) % 16);
		if (stat(d, &st) == 0 && S_ISREG(st.st_mode)) {
			snprintf(path, len, "%s", d);
			return true;
		}
	}
	return false;
}

static uint32_t draw(uint32_t *rng)
{
	return mix((*rng)++);
}

static void flip(int fd, off_t off, uint32_t r)
{
	uint8_t b;
	if (pread(fd, &b, 1, off) == 1) {
		b ^= (uint8_t)(1u << (r % 8));
		T_ASSERT(pwrite(fd, &b, 1, off) == 1);
	}
}

/*
 * Damage the stopped store's files, one way of seven drawn from rng:
 * bytes flipped anywhere in segment files; a segment's header (its
 * first 4096 bytes) flipped or zeroed; a range of 4 KiB to 128 KiB
 * zeroed; a segment file cut short (to a whole number of 4 KiB, maybe
 * 0); the checkpoint's bytes flipped, cut short, or removed.  Its name.
 */
static const char *damage(const char *dir, uint32_t *rng)
{
	static const char *const names[] = { "flip", "header", "zero", "truncate",
					     "ckpt-flip", "ckpt-cut", "ckpt-rm" };
	uint32_t kind = draw(rng) % 7;
	char path[800];

	for (uint32_t i = 0; damage_only && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(damage_only, names[i]) == 0)
			kind = i;
	struct stat st;
	int fd;

	if (kind >= 4)
		snprintf(path, sizeof(path), "%s/ssd/checkpoint", dir);
	else if (!pick_segment(dir, draw(rng), path, sizeof(path)))
		return "none";
	if (stat(path, &st) != 0)
		return "none";
	if (kind == 6) {
		T_ASSERT(unlink(path) == 0);
		return names[kind];
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	T_ASSERT(fd >= 0);
	switch (kind) {
	case 0: /* flip, in three segments */
		for (unsigned f = 0; f < 3; f++) {
			for (unsigned i = 0; i < 16 && st.st_size > 0; i++)
				flip(fd, (off_t)(draw(rng) % (uint64_t)st.st_size), draw(rng));
			close(fd);
			fd = -1;
			if (!pick_segment(dir, draw(rng), path, sizeof(path)) ||
			    stat(path, &st) != 0)
				break;
			fd = open(path, O_RDWR | O_CLOEXEC);
			T_ASSERT(fd >= 0);
		}
		break;
	case 1: /* the header */
		if (draw(rng) & 1) {
			static const uint8_t zero[4096];
			T_ASSERT(pwrite(fd, zero, sizeof(zero), 0) == (ssize_t)sizeof(zero));
		} else {
			flip(fd, (off_t)(draw(rng) % 4096), draw(rng));
		}
		break;
	case 2: { /* a range zeroed */
		static const uint8_t zero[128 << 10];
		size_t n = (1 + draw(rng) % 32) * 4096;
		off_t off = (off_t)(draw(rng) % (uint32_t)(st.st_size / 4096 + 1)) * 4096;
		T_ASSERT(pwrite(fd, zero, n, off) == (ssize_t)n);
		break;
	}
	case 3: /* cut short */
		T_ASSERT(ftruncate(fd, (off_t)(draw(rng) % (uint32_t)(st.st_size / 4096 + 1)) *
				       4096) == 0);
		break;
	case 4: /* the checkpoint's bytes */
		for (unsigned i = 0; i < 4 && st.st_size > 0; i++)
			flip(fd, (off_t)(draw(rng) % (uint64_t)st.st_size), draw(rng));
		break;
	case 5:
		T_ASSERT(ftruncate(fd, (off_t)(draw(rng) % (uint64_t)(st.st_size + 1))) == 0);
		break;
	}
	if (fd >= 0)
		close(fd);
	return names[kind];
}

/* Put the next version of keys [from, to), then (del) delete each. */
static void put_range(uint32_t from, uint32_t to, bool del)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	uint8_t *val = malloc(VAL_MAX);
	struct kc c;

	T_ASSERT(val);
	T_ASSERT(login(&c, ns));
	for (uint32_t id = from; id < to; id++) {
		int rc = client_put(&c, ns, id, val);
		if (rc != KVT_OK && rc != KVT_EXISTS)
			T_FAIL("PUT key %u: %d", id, rc);
	}
	for (uint32_t id = from; del && id < to; id++) {
		struct kvt_key k;
		uint32_t hi = keys[id].hi;
		int rc;
		key_of(&k, id);
		rc = kc_delete(&c, ns, &k);
		if (rc != KVT_OK && rc != KVT_MISS) /* a miss: shed, evicted from DRAM */
			T_FAIL("DELETE key %u: %d", id, rc);
		keys[id].lo = hi + 1;
	}
	kc_close(&c);
	free(val);
}

/*
 * resize: a store reopened with another ssd.segment, or a smaller
 * ssd.capacity, leaves the segments it does not read on disk (a later open
 * with the old settings reads them again).  Its deletes must hold there:
 *   A  1M x 16 slots: keys 0..255 put (written through);
 *   B  2M x 8: new versions put and deleted (answered deleted);
 *   C  1M x 16 again: every key exact or a miss, no deleted version --
 *      before 2026-12-06, 192 and 214 of the 256 were back with A's bytes
 *      (B's tombstones lie in 2M segments C does not read); C puts them
 *      again;
 *   D  1M x 8 (--ssd 8M): new versions put and deleted, then keys
 *      256..511 put three times over, so that the log wraps past the
 *      tombstones;
 *   E  1M x 16: every key exact or a miss, no deleted version (C's
 *      records in slots 8..15 were not read by D; 49 back before, in a
 *      run where C passed).
 */
static void run_resize(const char *bin, const char *base, const char *dir)
{
	static const char *const set[][6] = {
		{ "--ssd", "16M", "--set", "ssd.segment=1M" }, { "--ssd", "16M", "--set", "ssd.segment=2M" },
		{ "--ssd", "8M", "--set", "ssd.segment=1M" },
	};
	static const int plan[] = { 0, 1, 0, 2, 0 };

	for (unsigned step = 0; step < 5; step++) {
		const char *const *o = set[plan[step]];
		const char *args[] = { "--dram", "8M", o[0], o[1], o[2], o[3], "--set",
				       "ssd.admission=always", "--log-level", "info", NULL };
		printf("resize %c: %s %s\n", 'A' + step, o[1], o[3]);
		fflush(stdout);
		tsrv_start(&srv, bin, base, dir, NULL, args);
		check_all(step, false);
		T_EQ_U64(atomic_load(&n_back), 0);
		T_EQ_U64(atomic_load(&n_corrupt), 0);
		if (step == 0 || step == 2)
			put_range(0, 256, false);
		else if (step == 1)
			put_range(0, 256, true);
		else if (step == 3) {
			put_range(0, 256, true);
			for (int lap = 0; lap < 3; lap++)
				put_range(256, KEYS, false);
		}
		T_EQ_INT(tsrv_stop(&srv), 0);
	}
	printf("resize: %" PRIu64 " hits, %" PRIu64 " misses, deleted values back %" PRIu64 "\n",
	       v_hits, v_misses, atomic_load(&n_back));
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *e_seed = getenv("KVT_CRASH_SEED"), *e_rounds = getenv("KVT_CRASH_ROUNDS");
	const char *e_sec = getenv("KVT_CRASH_SECONDS");
	unsigned rounds = e_rounds ? (unsigned)atoi(e_rounds) : END__COUNT;
	uint64_t seconds = e_sec ? (uint64_t)atoll(e_sec) : 0, t0 = t_now_ms();
	uint32_t seed = e_seed ? (uint32_t)strtoul(e_seed, NULL, 0) : (uint32_t)time(NULL);
	uint32_t rng = seed;
	unsigned ends[END__COUNT] = { 0 }, round, fscks = 0, fsck_clean = 0;
	unsigned fsck_damage = 0, starts_killed = 0;
	bool damaged = false, scarred = false;
	char base[512], dir[600];

	signal(SIGPIPE, SIG_IGN);
	damage_only = getenv("KVT_CRASH_DAMAGE");
	printf("test_crashloop: KVT_CRASH_SEED=%u\n", seed);
	fflush(stdout);
	snprintf(base, sizeof(base), "%s/test_crashloop.XXXXXX", tmp);
	T_ASSERT(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	if (argc > 2 && strcmp(argv[2], "resize") == 0) {
		run_resize(bin, base, dir);
		tsrv_check_reports(base);
		t_rmtree(base);
		printf("ok\n");
		return 0;
	}

	for (round = 0; round < rounds || t_now_ms() - t0 < seconds * 1000; round++) {
		uint32_t r = mix(rng++), run_ms = 100 + mix(rng++) % 400;
		/* Each way in the first rounds (CI's short run), then drawn. */
		int end = round < END__COUNT ? (int)((round + seed) % END__COUNT) :
			  r % 100 < 40 ? END_KILL : r % 100 < 60 ? END_TERM :
			  r % 100 < 70 ? END_STOP : r % 100 < 80 ? END_CLEAR : END_DAMAGE;
		const char *args[] = {
			"--dram", "8M", "--ssd", "16M", "--set", "ssd.segment=1M",
			"--set", (r >> 8) & 1 ? "ssd.format=3" : "ssd.format=2",
			"--set", (r >> 9) & 1 ? "ssd.reuse=progressive" : "ssd.reuse=whole",
			"--set", (r >> 10) & 3 ? "ssd.admission=victim" : "ssd.admission=always",
			"--set", (r >> 12) & 1 ? "ssd.io=uring" : "ssd.io=psync",
			"--log-level", "info", NULL,
		};
		struct client cl[THREADS];

		/* A start killed during recovery first, in a third of the rounds
		 * (the second always). */
		unsigned abort_ms = round == 1 || (r >> 14) % 3 == 0 ? 1 + mix(rng++) % 150 : 0;

		printf("round %u: %s after %u ms; %s %s %s %s", round, end_names[end], run_ms,
		       args[7], args[9], args[11], args[13]);
		if (abort_ms)
			printf("; a start killed at %u ms before", abort_ms);
		printf("\n");
		fflush(stdout);
		if (abort_ms) {
			start_killed(bin, base, dir, args, abort_ms);
			starts_killed++;
		}
		tsrv_start(&srv, bin, base, dir, NULL, args);
		check_all(round, damaged);
		damaged = false;
		if (end == END_CLEAR)
			clear_ns();
		atomic_store(&stop, false);
		for (unsigned i = 0; i < THREADS; i++) {
			cl[i] = (struct client){ .idx = i, .seed = mix(rng++) };
			T_ASSERT(pthread_create(&cl[i].th, NULL, client_thread, &cl[i]) == 0);
		}
		tsrv_sleep_ms(run_ms);
		if (end == END_STOP) {
			atomic_store(&stop, true);
			for (unsigned i = 0; i < THREADS; i++)
				pthread_join(cl[i].th, NULL);
			T_EQ_INT(tsrv_stop(&srv), 0);
		} else {
			if (end == END_TERM) {
				kill(srv.pid, SIGTERM);
				tsrv_sleep_ms(mix(rng++) % 150);
			}
			tsrv_kill9(&srv);
			atomic_store(&stop, true);
			for (unsigned i = 0; i < THREADS; i++)
				pthread_join(cl[i].th, NULL);
		}
		ends[end]++;
		/* A kill -9 leaves nothing fsck calls damage (what a kill tore
		 * lies past the checkpoint's write point: a warning, and
		 * recovery leaves such a value out), unless a round damaged
		 * the files and fsck has not found them clean since (a damaged
		 * record stays until its slot is reused, an ignored checkpoint
		 * until the next one is written).  Clean means no torn value
		 * either: bytes the damage flipped past the write point of a
		 * sealed segment are a torn value to fsck (a warning) until a
		 * checkpoint moves the write point past them, and damage from
		 * then on (before 2026-12-07 a warning cleared `scarred`, and
		 * the round after failed: seed 1796608538). */
		{
			struct kvt_fsck f;
			int rc = fsck(dir, scarred ? "after the server (damaged before)" :
				     "after the server", &f);
			if (rc == 0 && (!scarred || fsck_torn == 0))
				scarred = false, fsck_clean++;
			else if (!scarred)
				T_FAIL("round %u: fsck after %s: %d (%" PRIu64 " damaged, %" PRIu64
				       " orphans)", round, end_names[end], rc, f.damaged, f.orphans);
			fscks++;
		}
		if (end == END_DAMAGE) {
			struct kvt_fsck f;
			const char *how = damage(dir, &rng);
			int rc = fsck(dir, "after damage", &f);
			printf("round %u: damage %s: fsck %d, %" PRIu64 " damaged\n", round, how, rc,
			       f.damaged);
			T_ASSERT(rc == 0 || rc == KVT_ECORRUPT);
			fsck_damage += rc == KVT_ECORRUPT;
			damaged = scarred = true;
		}
		T_EQ_U64(atomic_load(&n_corrupt), 0);
		T_EQ_U64(atomic_load(&n_back), 0);
	}
	/* The last restart's check. */
	{
		const char *args[] = { "--dram", "8M", "--ssd", "16M", "--set", "ssd.segment=1M",
				       "--log-level", "info", NULL };
		tsrv_start(&srv, bin, base, dir, NULL, args);
		check_all(round, damaged);
		T_EQ_INT(tsrv_stop(&srv), 0);
	}
	tsrv_check_reports(base);

	printf("crashloop: seed %u, %u rounds in %" PRIu64 " ms: kill %u, term+kill %u, stop %u, "
	       "clear+kill %u, kill+damage %u\n", seed, round, t_now_ms() - t0, ends[END_KILL],
	       ends[END_TERM], ends[END_STOP], ends[END_CLEAR], ends[END_DAMAGE]);
	printf("starts killed during recovery: %u\n", starts_killed);
	printf("fsck: clean after the server %u of %u times (the others after damage); after "
	       "damage %u of %u found it\n", fsck_clean, fscks, fsck_damage, ends[END_DAMAGE]);
	printf("clients: put %" PRIu64 ", get %" PRIu64 " (hits %" PRIu64 "), delete %" PRIu64
	       " (deleted %" PRIu64 "), exists %" PRIu64 "\n", atomic_load(&n_put),
	       atomic_load(&n_get), atomic_load(&n_hit), atomic_load(&n_del),
	       atomic_load(&n_del_ok), atomic_load(&n_exists));
	printf("checks after restarts: %" PRIu64 " hits, %" PRIu64 " misses\n", v_hits, v_misses);
	printf("other bytes: %" PRIu64 ", deleted values back: %" PRIu64 " (after damage: %" PRIu64
	       ", allowed)\n", atomic_load(&n_corrupt), atomic_load(&n_back), n_back_damage);
	T_EQ_U64(atomic_load(&n_corrupt), 0);
	T_EQ_U64(atomic_load(&n_back), 0);
	T_GE_INT(v_hits, 1);
	t_rmtree(base);
	printf("ok\n");
	return 0;
}

/*
 * test_overload.c - kvtierd past its limits (doc/kvtierd.md "Overload").
 *
 * A real kvtierd with --max-conns 48 and --max-memory 32M is flooded at
 * once by: more connections than it may hold; clients that send most of
 * a 4.6 MiB LOOKUP table and stop (each grows its read buffer to 8 MiB);
 * clients that send PUT frames with 24 MiB data sections before AUTH
 * (refused with PROTO_ENOAUTH from their header since issue 21;
 * test_hostile's preauth phase sizes such frames to fill the budget
 * exactly); slow readers that pipeline GETs of a 2 MiB value and never
 * read; and then authenticated fillers that size half-sent LOOKUP tables
 * to take what is left of --max-memory exactly (halving on each refusal,
 * down to 128 KiB), so that less is left than such a table needs.
 * Meanwhile:
 *   (a) the server's VmRSS, sampled every 20 ms, stays under its RSS
 *       after startup + --dram + --max-memory + a read buffer per
 *       connection + a 48 MiB margin (allocator slack, ASan);
 *   (b) a well-behaved client doing PUT and GET of 64 KiB every 10 ms is
 *       served, every round trip under 2 s, every byte checked;
 *   (c) the refusals are counted (server.conns_refused, mem_refused) and
 *       each refused client got an ERROR frame saying why;
 *   (d) with the budget filled to within 256 KiB, the
 *       well-behaved client still completes rounds (a frame of its own
 *       that finds the last few KiB taken for a moment is refused with
 *       -ENOMEM "retry later", which closes its connection, and it
 *       reconnects and retries: never before the fillers, at most a
 *       quarter of its rounds; the admin connection reconnects the same
 *       way then).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define MAX_CONNS 48
#define MAX_MEMORY (32u << 20)
#define DRAM (64u << 20)
#define MARGIN (48u << 20)
#define EXTRA 50
#define FILLERS 16

static const struct kvt_ns_desc desc = {
	.model = "overload-model", .dtype = "bf16", .layout = "vllm-flash-nhd",
	.block_tokens = 16, .tp_size = 1, .pp_size = 1,
};

static struct tsrv srv;
static _Atomic bool stop;
static _Atomic uint64_t rss_max;
static struct tsrv_rss_watch rss_watch = {&srv, &stop, &rss_max};
static _Atomic uint64_t good_rounds, good_max_ns, good_refused;
/* Set when (d)'s fillers start: from then on a frame may be refused. */
static _Atomic bool filling;

/* What a refusal looks like to a client: the -ENOMEM ERROR frame, or the
 * close that follows it met by the next send or receive. */
static bool refusal(int rc)
{
	return rc == -ENOMEM || rc == -EPIPE || rc == -ECONNRESET || rc == -EIO;
}

/* A new connection on c, logged in, ns registered: after a refusal
 * (-ENOMEM closes the connection, doc/kvtierd.md), once (d) has begun.
 * The budget may still be full for a moment: tries for up to 5 s. */
static void reconnect(struct kc *c, uint8_t *ns)
{
	uint64_t t0 = t_now_ms();

	T_ASSERT(atomic_load(&filling));
	for (;;) {
		kc_close(c);
		if (kc_connect_unix(c, srv.sock) == 0 && kc_login(c, "default", NULL) == 0 &&
		    kc_register(c, &desc, ns, NULL, 0) == KVT_OK)
			return;
		if (t_now_ms() - t0 > 5000)
			T_FAIL("could not reconnect within 5 s of a refusal");
		tsrv_sleep_ms(10);
	}
}

/* (b): PUT and GET 64 KiB values, one round every 10 ms, timed. */
static void *good_thread(void *arg)
{
	uint8_t ns[PROTO_DIGEST_LEN];
	static uint8_t val[65536];
	struct kc c;
	uint32_t i = 0;
	int rc;

	(void)arg;
	T_RC(kc_connect_unix(&c, srv.sock), 0);
	T_RC(kc_login(&c, "default", NULL), 0);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	while (!atomic_load(&stop)) {
		struct kvt_key k;
		struct kc_value v;
		struct iovec p = { val, sizeof(val) };
		uint64_t t0 = tsrv_now_ns(), dt;
		char name[32];

		snprintf(name, sizeof(name), "good-%u", i);
		kvt_key_set(&k, name, strlen(name));
		tsrv_fill(val, sizeof(val), i);
		/* Once (d)'s fillers hold all but a few KiB of the budget, a
		 * frame's own item charge may find it full for a moment: the
		 * server refuses it with -ENOMEM "retry later" and closes the
		 * connection (or a send finds it closed), and a client
		 * reconnects and retries.  Counted; before the fillers there
		 * must be none. */
		rc = kc_put(&c, ns, &k, &p, 1, NULL);
		if (rc == KVT_OK)
			rc = kc_get(&c, ns, &k, 0, 0, 0, 0, &v);
		if (refusal(rc) && atomic_load(&filling)) {
			atomic_fetch_add(&good_refused, 1);
			reconnect(&c, ns);
			tsrv_sleep_ms(10);
			continue;
		}
		T_RC(rc, KVT_OK);
		T_EQ_U64(v.len, sizeof(val));
		T_EQ_MEM(v.bytes, val, sizeof(val));
		kc_value_free(&v);
		dt = tsrv_now_ns() - t0;
		if (dt > atomic_load(&good_max_ns))
			atomic_store(&good_max_ns, dt);
		atomic_fetch_add(&good_rounds, 1);
		i++;
		tsrv_sleep_ms(10);
	}
	kc_close(&c);
	return NULL;
}

/* Expect an ERROR frame (status want, message containing what) and a close. */
static bool got_error(struct kc *c, int want, const char *what, int timeout_ms)
{
	struct kc_resp r;
	bool ok = false;

	for (int i = 0; i < 4 && kc_recv(c, &r, timeout_ms) == 0; i++) {
		if (r.f.op == PROTO_OP_ERROR || r.f.status == want) {
			ok = r.f.status == want && r.f.msg && memmem(r.f.msg, r.f.msg_len, what,
								     strlen(what));
			if (!ok)
				fprintf(stderr, "error frame: status %d msg %.*s\n", r.f.status,
					(int)r.f.msg_len, r.f.msg ? r.f.msg : "");
			kc_resp_free(&r);
			break;
		}
		kc_resp_free(&r);
	}
	return ok;
}

/*
 * got_error on n connections at once, under one deadline (their requests
 * were all sent before): how many got the error.  Done early once enough
 * of them did, or once every one has answered or closed.
 */
static unsigned got_errors(struct kc *const *cs, unsigned n, int want, const char *what,
			   int timeout_ms, unsigned enough)
{
	struct pollfd pfd[EXTRA];
	bool done[EXTRA] = { false };
	uint64_t end = tsrv_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned got = 0, left = n;

	T_ASSERT(n <= EXTRA);
	while (left && got < enough && tsrv_now_ns() < end) {
		int ms = (int)((end - tsrv_now_ns()) / 1000000u) + 1;
		for (unsigned i = 0; i < n; i++)
			pfd[i] = (struct pollfd){ .fd = done[i] ? -1 : cs[i]->fd, .events = POLLIN };
		if (poll(pfd, n, ms) <= 0)
			continue;
		for (unsigned i = 0; i < n; i++) {
			if (done[i] || !pfd[i].revents)
				continue;
			done[i] = true;
			left--;
			if (got_error(cs[i], want, what, ms))
				got++;
		}
	}
	return got;
}

/* A server counter, read on the admin connection c (ns: its namespace,
 * registered again if a refusal after the fillers made it reconnect). */
static uint64_t stat_of(struct kc *c, uint8_t *ns, const char *name)
{
	uint64_t v = 0;
	int rc;

	for (int tries = 0; (rc = kc_stat(c, PROTO_SCOPE_ALL, name, &v)) != 0 &&
			    refusal(rc) && atomic_load(&filling) && tries < 20;
	     tries++)
		reconnect(c, ns);
	T_RC(rc, 0);
	return v;
}

/* Send all but the last byte of an encoded frame (it never completes). */
/* PUT items of 1024 one-byte parts each: 16 KiB of part table and a
 * key an item (BIG_ITEM), so that frames within KVTD_FRAME_ITEMS_MAX
 * items hold MiBs of table.  Their values never come: the tables are
 * sent short. */
#define BIG_ITEM ((16u << 10) + 80u)
static struct proto_item *big_table_items(uint32_t n)
{
	static uint64_t lens[KVT_PARTS_MAX];
	static uint32_t crcs[KVT_PARTS_MAX];
	struct proto_item *its = calloc(n, sizeof(*its));

	T_ASSERT(its);
	for (uint32_t p = 0; p < KVT_PARTS_MAX; p++)
		lens[p] = 1;
	for (uint32_t i = 0; i < n; i++) {
		its[i].key.len = 64;
		memcpy(its[i].key.bytes, &i, sizeof(i));
		its[i].value_len = KVT_PARTS_MAX;
		its[i].part_count = KVT_PARTS_MAX;
		its[i].part_lens = lens;
		its[i].part_crcs = crcs;
	}
	return its;
}

static int send_partial(struct kc *c, struct proto_frame *f, const struct proto_item *its,
			uint32_t n, uint64_t data_len)
{
	uint64_t need = 0;
	int64_t len;
	uint8_t *buf;
	int rc;

	f->tag = c->next_tag++;
	f->version = c->version;
	len = proto_encode(f, its, n, NULL, 0, NULL, &need);
	T_EQ_INT(len, KVT_EBUFSMALL);
	buf = malloc(need);
	T_ASSERT(buf);
	len = proto_encode(f, its, n, buf, need, NULL, NULL);
	T_ASSERT(len > 0);
	if (data_len) {
		/* The data section: most of it. */
		rc = kc_send(c, buf, (size_t)len);
		free(buf);
		buf = calloc(1, 1u << 20);
		for (uint64_t sent = 0; rc == 0 && sent + (1u << 20) < data_len; sent += 1u << 20)
			rc = kc_send(c, buf, 1u << 20);
	} else {
		rc = kc_send(c, buf, (size_t)len - 1);
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char base[512], dir[600], mc[32], mm[32];
	static struct kc extra[EXTRA], tables[8], puts[8], slow[8];
	unsigned refused = 0, mem_errors = 0, tables_n = 8, puts_n = 8, slow_n = 8;
	static struct kc fill[FILLERS];
	unsigned fill_n = 0, fill_refused = 0;
	uint64_t used_full = 0, rounds_full = 0, refused_before;
	pthread_t rt, gt;
	uint64_t rss0, limit, n_refused = 0, n_memref = 0, n_paused = 0, used = 1;
	uint8_t ns[PROTO_DIGEST_LEN];
	struct kc adm;

	/* ASan keeps freed memory in a quarantine (256 MiB by default),
	 * which would count as RSS; the server gets a small one. */
	{
		const char *a = getenv("ASAN_OPTIONS");
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s%squarantine_size_mb=8", a ? a : "",
			 a && *a ? ":" : "");
		setenv("ASAN_OPTIONS", buf, 1);
	}
	snprintf(base, sizeof(base), "%s/test_overload.XXXXXX", tmp);
	T_ASSERT(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	snprintf(mc, sizeof(mc), "%u", MAX_CONNS);
	snprintf(mm, sizeof(mm), "%u", MAX_MEMORY);
	const char *args[] = { "--max-conns", mc, "--max-memory", mm, "--log-level", "info", NULL };
	tsrv_start(&srv, bin, base, dir, NULL, args);
	tsrv_sleep_ms(300);
	rss0 = tsrv_rss(srv.pid);
	limit = rss0 + DRAM + MAX_MEMORY + (uint64_t)MAX_CONNS * (64u << 10) + MARGIN;
	printf("rss after start %" PRIu64 " MiB, limit %" PRIu64 " MiB\n", rss0 >> 20, limit >> 20);

	/* A 2 MiB value for the slow readers. */
	T_RC(kc_connect_unix(&adm, srv.sock), 0);
	T_RC(kc_login(&adm, "default", NULL), 0);
	T_RC(kc_register(&adm, &desc, ns, NULL, 0), KVT_OK);
	{
		struct kvt_key k;
		uint8_t *v = malloc(2u << 20);
		struct iovec p = { v, 2u << 20 };
		tsrv_fill(v, 2u << 20, 7);
		kvt_key_set(&k, "big", 3);
		T_RC(kc_put(&adm, ns, &k, &p, 1, NULL), KVT_OK);
		free(v);
	}

	pthread_create(&rt, NULL, tsrv_rss_thread, &rss_watch);
	pthread_create(&gt, NULL, good_thread, NULL);
	tsrv_sleep_ms(200);

	/* Slow readers: 100 GETs of 2 MiB each, never read. */
	for (unsigned i = 0; i < slow_n; i++) {
		T_RC(kc_dial(&slow[i], srv.port, "default", NULL), 0);
		for (int j = 0; j < 100; j++) {
			struct proto_frame f = { .op = PROTO_OP_GET };
			struct proto_item it = { 0 };
			f.ns_count = 1;
			f.ns = ns;
			kvt_key_set(&it.key, "big", 3);
			T_ASSERT(kc_request(&slow[i], &f, &it, 1, NULL, 0) > 0);
		}
	}
	/* More connections than allowed: the ones past the limit are told;
	 * those accepted are closed again to make room for the floods.  The
	 * server decides each at its accept (conns_accepted counts the
	 * refused too): once it has taken all of them, the errors of those
	 * it refused (conns_refused) are on their way, and the others will
	 * never have one. */
	{
		uint64_t acc0 = stat_of(&adm, ns, "server.conns_accepted"), t0;
		uint64_t ref0 = stat_of(&adm, ns, "server.conns_refused"), acc = acc0;
		struct kc *ex[EXTRA];
		for (unsigned i = 0; i < EXTRA; i++) {
			T_RC(kc_connect_tcp(&extra[i], srv.port), 0);
			ex[i] = &extra[i];
		}
		for (t0 = t_now_ms(); acc - acc0 < EXTRA && t_now_ms() - t0 < 10000;
		     tsrv_sleep_ms(5))
			acc = stat_of(&adm, ns, "server.conns_accepted");
		refused = got_errors(ex, EXTRA, KVT_EBUSY, "--max-conns", 5000,
				     (unsigned)(stat_of(&adm, ns, "server.conns_refused") - ref0));
		for (unsigned i = 0; i < EXTRA; i++)
			kc_close(&extra[i]);
		/* closed on the server too (their slots and unauthenticated
		 * counts free for the floods): only adm, good and slow left */
		for (t0 = t_now_ms(); stat_of(&adm, ns, "server.conns_active") > 2 + slow_n &&
				      t_now_ms() - t0 < 10000;)
			tsrv_sleep_ms(5);
	}

	/* Big tables: PUTs of 900 values of 1024 one-byte parts: 14 MiB of
	 * table (of the 16 a frame may have), all but one byte. */
	{
		uint32_t n = 900;
		struct proto_item *its = big_table_items(n);
		for (unsigned i = 0; i < tables_n; i++) {
			struct proto_frame f = { .op = PROTO_OP_PUT };
			T_RC(kc_dial(&tables[i], srv.port, "default", NULL), 0);
			f.ns_count = 1;
			f.ns = ns;
			send_partial(&tables[i], &f, its, n, 0);
		}
		free(its);
	}
	/* PUTs before AUTH: 24 MiB data sections into buffers of their own. */
	for (unsigned i = 0; i < puts_n; i++) {
		struct proto_frame f = { .op = PROTO_OP_PUT };
		struct proto_item it = { 0 };
		uint32_t crc = 0;
		T_RC(kc_connect_tcp(&puts[i], srv.port), 0);
		T_RC(kc_hello(&puts[i]), 0);
		f.ns_count = 1;
		f.ns = ns;
		kvt_key_set(&it.key, "pre-auth", 8);
		it.value_len = 24u << 20;
		it.part_count = 1;
		it.part_lens = &it.value_len;
		it.part_crcs = &crc;
		send_partial(&puts[i], &f, &it, 1, it.value_len);
	}
	/* Refused ones are told at once; the others hold (or are paused)
	 * and never answer: 3 s for all of them. */
	{
		struct kc *fl[16];
		unsigned n = 0;
		for (unsigned i = 0; i < tables_n; i++)
			fl[n++] = &tables[i];
		for (unsigned i = 0; i < puts_n; i++)
			fl[n++] = &puts[i];
		mem_errors = got_errors(fl, n, -ENOMEM, "--max-memory", 3000, n);
	}

	/* Before the fillers, the well-behaved client was never refused. */
	refused_before = atomic_load(&good_refused);
	atomic_store(&filling, true);
	/* (d) Fillers: what is left of the budget, taken exactly. */
	{
		uint32_t n = (1u << 20) / BIG_ITEM; /* ~1 MiB of table */
		struct proto_item *its = big_table_items(n);
		while (n >= (128u << 10) / BIG_ITEM && fill_n < FILLERS) {
			struct proto_frame f = { .op = PROTO_OP_PUT };
			struct kc *c = &fill[fill_n];
			T_RC(kc_connect_tcp(c, srv.port), 0);
			T_RC(kc_login(c, "default", NULL), 0);
			f.ns_count = 1;
			f.ns = ns;
			send_partial(c, &f, its, n, 0);
			if (got_error(c, -ENOMEM, "--max-memory", 300)) {
				fill_refused++;
				kc_close(c);
				n /= 2;
			} else {
				fill_n++;
			}
		}
		free(its);
	}
	used_full = stat_of(&adm, ns, "server.mem_used");
	rounds_full = atomic_load(&good_rounds);

	/* Served while full: 20 rounds (10 ms apart), waited for up to 20 s. */
	for (uint64_t t0 = t_now_ms();
	     atomic_load(&good_rounds) - rounds_full < 20 && t_now_ms() - t0 < 20000;)
		tsrv_sleep_ms(10);
	n_refused = stat_of(&adm, ns, "server.conns_refused");
	n_memref = stat_of(&adm, ns, "server.mem_refused");
	n_paused = stat_of(&adm, ns, "server.mem_paused");
	used = stat_of(&adm, ns, "server.mem_used");
	atomic_store(&stop, true);
	pthread_join(gt, NULL);
	pthread_join(rt, NULL);

	printf("connections: %u of %u extra refused with an ERROR, conns_refused %" PRIu64 "\n",
	       refused, EXTRA, n_refused);
	printf("memory: %u flooders refused with an ERROR, mem_refused %" PRIu64
	       ", mem_paused %" PRIu64 ", mem_used at the end %" PRIu64 " bytes\n",
	       mem_errors, n_memref, n_paused, used);
	printf("rss max %" PRIu64 " MiB (start %" PRIu64 " MiB, limit %" PRIu64 " MiB)\n",
	       atomic_load(&rss_max) >> 20, rss0 >> 20, limit >> 20);
	printf("well-behaved client: %" PRIu64 " rounds, slowest %.1f ms; refused %" PRIu64
	       " times (retried), %" PRIu64 " before the fillers\n",
	       atomic_load(&good_rounds), atomic_load(&good_max_ns) / 1e6,
	       atomic_load(&good_refused), refused_before);
	printf("fillers: %u holding half-sent tables, %u refused; mem_used then %" PRIu64
	       " of %u bytes (%" PRIu64 " KiB left); well-behaved rounds after: %" PRIu64 "\n",
	       fill_n, fill_refused, used_full, MAX_MEMORY, (MAX_MEMORY - used_full) >> 10,
	       atomic_load(&good_rounds) - rounds_full);

	/* 1 admin + 1 good + 8 slow readers were open before the extras. */
	T_GE_INT(refused, 10 + EXTRA - MAX_CONNS);
	T_GE_INT(n_refused, refused);
	T_GE_INT(mem_errors, 1);
	T_GE_INT(n_memref, mem_errors);
	T_LE_INT(atomic_load(&rss_max), limit);
	T_GE_INT(atomic_load(&good_rounds), 20);
	/* (d): filled to within the last filler's size, and still served. */
	T_GE_INT(fill_refused, 1);
	T_GE_INT(used_full + (256u << 10), MAX_MEMORY);
	T_GE_INT(atomic_load(&good_rounds) - rounds_full, 20);
	T_EQ_INT(refused_before, 0);
	T_LE_INT(atomic_load(&good_refused), atomic_load(&good_rounds) / 4);
	T_LE_INT(atomic_load(&good_max_ns), 2000000000ull);

	for (unsigned i = 0; i < fill_n; i++)
		kc_close(&fill[i]);
	for (unsigned i = 0; i < 8; i++) {
		kc_close(&tables[i]);
		kc_close(&puts[i]);
		kc_close(&slow[i]);
	}
	kc_close(&adm);
	T_EQ_INT(tsrv_stop(&srv), 0);
	printf("ok\n");
	return 0;
}

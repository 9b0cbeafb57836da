/*
 * test_native_attack.c - kvtierd's native listener against hostile or
 * broken clients, the attacks test_hostile.c does not cover (that file
 * holds the older phases; doc/protocol.md, doc/kvtierd.md "Flow
 * control").
 *
 * One phase per run (argv[2]), each with a real kvtierd on loopback:
 *
 *   crc_refused   frames of 1025 items (more than kvtierd takes a frame)
 *                 sent header first, so that they are refused from their
 *                 header before their table came: intact, each is answered
 *                 PROTO_ECOUNT after its table (and a PUT's data) are read
 *                 and dropped, the connection kept; with a byte of the
 *                 header or the table corrupted, the CRC is checked as the
 *                 table passes and the connection closes with an ERROR
 *                 frame PROTO_ECRC -- also when the corrupted header claims
 *                 32 MiB more data than was sent (before: those bytes were
 *                 awaited, then the next frame read out of step); each
 *                 counted once, in errors.count or errors.crc (a corrupt
 *                 one was in both)
 *   chaos         4 clients for 4 s, each connection doing one of: a
 *                 frame cut anywhere and closed; cut and half-closed
 *                 (closed by the server at once, not at --idle-timeout); a
 *                 pipeline of up to 256 frames then a half-close (every one
 *                 answered, then the close); a byte of a header or table
 *                 flipped then a half-close (nothing but an ERROR frame,
 *                 and the close); a frame of 1025 keys sent header first
 *                 (with up to 4 KiB of its table), intact (PROTO_ECOUNT,
 *                 kept) or with a byte flipped anywhere in it (an ERROR
 *                 frame at most, the close); a pipeline, BYE and junk
 *                 behind it (answered, BYE last, the junk never read as
 *                 frames, the close: every answer, the close lingering,
 *                 doc/kvtierd.md "Bad input"); GETs of a 256 KiB value
 *                 pipelined and never read -- while a
 *                 well-behaved client's PUT and GET round trips check
 *                 every byte (every 8th a PUT of up to 256 KiB with an
 *                 EXISTS and a PING right behind it, in one send); then
 *                 no connection of theirs is left open, and the server
 *                 exits cleanly (the seed is printed; KVT_CHAOS_SEED=N
 *                 replays one)
 *   close_flush   GETs of 1 MiB then a half-close, or BYE, the answers
 *                 read only after 300 ms: every answer, then the close
 *                 (before, the connection was never closed); also with
 *                 8 MiB of junk sent behind the BYE while the answers are
 *                 read: every answer still arrives (a lingering close;
 *                 before, the junk made the kernel reset the connection
 *                 and the answers not yet sent were lost)
 *   dup_put       one PUT frame naming a key 64 times with other bytes
 *                 each: all answered (one stored, the rest KVT_EXISTS),
 *                 the key holds one of them whole
 *   tenant_caps   --tenant-conns: a tenant's connection past it refused at
 *                 AUTH (KVT_EBUSY), another tenant's served; unread GETs
 *                 of one tenant on 6 connections pin at most its share
 *                 of DRAM, the rest answered KVT_EBUSY (a connection that
 *                 pinned nothing was always answered), a well-behaved
 *                 GET told KVT_EBUSY, then served once they are read
 *   mixed_put     one PUT frame of 4 values of 200 KiB (streamed in
 *                 place): an unknown namespace, a bad part CRC, two
 *                 stored, a GET right behind it: each item its status,
 *                 the stored values exact
 *   put_resv      one tenant's PUT frames of 6 MiB values on 12 connections,
 *                 each sent as far as 1 KiB of its data: the DRAM they
 *                 reserve while received holds at most a quarter of
 *                 --dram for the tenant (one value alone always taken),
 *                 the rest answered KVT_EBUSY once their bytes came; the
 *                 other tenant's values stay in DRAM and its PUT is stored
 *                 (before: the reservations filled the tier, every block
 *                 of the other tenant evicted, its PUT KVT_EFULL)
 *
 * argv[1]: kvtierd.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define SECRET_ALICE "secret-of-alice-0123456789"
#define SECRET_BOB "secret-of-bob-0123456789ab"
#define SECRET_ADMIN "secret-of-admin-0123456789"
#define ITEMS 1025u /* KVTD_FRAME_ITEMS_MAX + 1 */

static const char *bin;
static char base[512];
static struct tsrv srv;

static const struct kvt_ns_desc desc = {
	.model = "attack-model", .dtype = "bf16", .layout = "vllm-flash-nhd",
	.block_tokens = 16, .tp_size = 1, .pp_size = 1,
};

static void start(const char *name, const char *const *extra)
{
	char tenants[700], dir[700];
	const char *argv[32];
	int n = 0;

	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	tsrv_write_file(NULL, tenants, "alice " SECRET_ALICE " tenant\n"
				       "bob " SECRET_BOB " tenant\n"
				       "admin " SECRET_ADMIN " admin\n");
	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	argv[n++] = "--dram";
	argv[n++] = "64M";
	argv[n++] = "--threads";
	argv[n++] = "1";
	for (int i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	tsrv_start(&srv, bin, base, dir, tenants, argv);
}

static void login(struct kc *c)
{
	T_RC(kc_connect_tcp(c, srv.port), 0);
	T_RC(kc_login(c, "alice", SECRET_ALICE), 0);
}

/* A server statistic, read as the admin on a connection of its own. */
static uint64_t stat_of(const char *name)
{
	uint64_t v = 0;

	T_RC(kc_stat_once(srv.port, NULL, "admin", SECRET_ADMIN, name, false, &v), 0);
	return v;
}

/* Frame f with n items encoded (the codec's own limits, not the
 * server's): malloc'd, its length in *len. */
static uint8_t *encode(struct kc *c, struct proto_frame *f, const struct proto_item *its,
		       uint32_t n, size_t *len)
{
	uint8_t *buf;
	int64_t l;

	f->tag = c->next_tag++;
	f->version = c->version;
	l = kc_encode(f, its, n, NULL, 0, &buf);
	T_OK(l);
	*len = (size_t)l;
	return buf;
}

/* Header alone first (the server refuses the frame from it, before its
 * table came), then the rest in 3 sends, 20 ms apart. */
static void send_split(struct kc *c, const uint8_t *buf, size_t len)
{
	size_t off = PROTO_HDR_LEN, step = (len - off + 2) / 3;

	T_RC(kc_send(c, buf, PROTO_HDR_LEN), 0);
	while (off < len) {
		size_t k = len - off < step ? len - off : step;
		tsrv_sleep_ms(20);
		T_RC(kc_send(c, buf + off, k), 0);
		off += k;
	}
}

/* The next frame is an ERROR frame of status want, then the close. */
static void expect_close(struct kc *c, int32_t want, const char *what)
{
	struct kc_resp r;
	int rc = kc_recv(c, &r, 10000);

	printf("crc_refused: %s: recv %d op %d status %d\n", what, rc, rc == 0 ? r.f.op : -1,
	       rc == 0 ? r.f.status : 0);
	T_RC(rc, 0);
	T_EQ_INT(r.f.op, PROTO_OP_ERROR);
	T_EQ_INT(r.f.status, want);
	kc_resp_free(&r);
	T_ASSERT(kc_wait_closed(c, 10000));
}

static void expect_kept(struct kc *c, uint16_t op, const char *what)
{
	struct kc_resp r;

	T_RC(kc_recv(c, &r, 10000), 0);
	printf("crc_refused: %s: op %d status %d\n", what, r.f.op, r.f.status);
	T_EQ_INT(r.f.op, op);
	T_EQ_INT(r.f.status, PROTO_ECOUNT);
	kc_resp_free(&r);
	T_RC(kc_ping(c), 0);
}

/* ------------------------------------------------------------------------
 * crc_refused (attack19's open item): a frame of more than 1024 items was
 * refused from its header before the CRC over its header and table could
 * be checked, and need + data_len bytes were dropped on its word alone.
 */
static void phase_crc_refused(void)
{
	struct proto_item *its = calloc(ITEMS, sizeof(*its));
	uint8_t ns[PROTO_DIGEST_LEN], *buf, *data = calloc(ITEMS, 16);
	uint64_t len16 = 16, ecrc0, ecrc, ecount0, ecount;
	uint32_t crc16 = kvt_crc32c(0, data, 16);
	size_t len;
	struct kc a;

	start("crc_refused", NULL);
	login(&a);
	ecrc0 = stat_of("server.errors.crc");
	ecount0 = stat_of("server.errors.count");
	T_RC(kc_register(&a, &desc, ns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < ITEMS; i++) {
		char key[24];
		snprintf(key, sizeof(key), "crc-%u", i);
		kvt_key_set(&its[i].key, key, strlen(key));
		its[i].part_count = 1;
		its[i].part_lens = &len16;
		its[i].part_crcs = &crc16;
	}

	/* Intact: refused whole, the connection kept. */
	{
		struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 1, .ns = ns };
		buf = encode(&a, &f, its, ITEMS, &len);
		send_split(&a, buf, len);
		free(buf);
		expect_kept(&a, PROTO_OP_EXISTS, "EXISTS of 1025 keys");
	}
	{
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		buf = encode(&a, &f, its, ITEMS, &len);
		send_split(&a, buf, len);
		T_RC(kc_send(&a, data, ITEMS * 16), 0);
		free(buf);
		expect_kept(&a, PROTO_OP_PUT, "PUT of 1025 values");
		T_RC(kc_exists(&a, ns, &its[0].key, NULL), KVT_MISS);
	}

	/* The header's tag corrupted: ERROR frame PROTO_ECRC, closed. */
	{
		struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 1, .ns = ns };
		buf = encode(&a, &f, its, ITEMS, &len);
		buf[16] ^= 0x40;
		send_split(&a, buf, len);
		free(buf);
		expect_close(&a, PROTO_ECRC, "EXISTS of 1025 keys, its tag corrupted");
		kc_close(&a);
	}
	/* A key of the table corrupted. */
	login(&a);
	{
		struct proto_frame f = { .op = PROTO_OP_LOOKUP, .ns_count = 1, .ns = ns };
		buf = encode(&a, &f, its, ITEMS, &len);
		buf[len - 3] ^= 0x01;
		send_split(&a, buf, len);
		free(buf);
		expect_close(&a, PROTO_ECRC, "LOOKUP of 1025 keys, a key corrupted");
		kc_close(&a);
	}
	/* A PUT whose header claims 32 MiB more data than it has: closed
	 * once its table passed, not left waiting for the 32 MiB. */
	login(&a);
	{
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		uint64_t dl;
		buf = encode(&a, &f, its, ITEMS, &len);
		memcpy(&dl, buf + 32, 8);
		dl += 32u << 20;
		memcpy(buf + 32, &dl, 8);
		send_split(&a, buf, len);
		T_RC(kc_send(&a, data, ITEMS * 16), 0);
		free(buf);
		expect_close(&a, PROTO_ECRC, "PUT of 1025 values, data_len + 32 MiB");
		kc_close(&a);
	}
	/* Nothing of them was stored; the server serves on. */
	login(&a);
	T_RC(kc_exists(&a, ns, &its[0].key, NULL), KVT_MISS);
	kc_close(&a);
	ecrc = stat_of("server.errors.crc");
	ecount = stat_of("server.errors.count");
	printf("crc_refused: server.errors.crc +%" PRIu64 ", server.errors.count +%" PRIu64 "\n",
	       ecrc - ecrc0, ecount - ecount0);
	T_EQ_INT(ecrc - ecrc0, 3);
	/* Each refused frame is counted once: the two intact ones in
	 * errors.count, the three corrupt ones in errors.crc only (they
	 * were counted in both before). */
	T_EQ_INT(ecount - ecount0, 2);
	free(its);
	free(data);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * chaos: broken clients of every kind at once beside a good one.
 */

#define CHAOS_THREADS 4
#define CHAOS_SECONDS 4
#define CHAOS_BIG (256u << 10)

static uint8_t chaos_ns[PROTO_DIGEST_LEN];
static _Atomic bool chaos_stop;

struct chaos {
	pthread_t t;
	unsigned seed, id;
	unsigned actions[7];
	struct proto_item *big; /* ITEMS keys */
	const char *fail; /* what went wrong, or NULL */
};

/* One valid frame of a random kind (PING, EXISTS, LOOKUP, GET, PUT),
 * header, table and data: malloc'd, *len bytes, *tbl of them header and
 * table. */
static uint8_t *chaos_frame(struct chaos *ch, struct kc *c, size_t *len, size_t *tbl)
{
	static const uint16_t ops[] = { PROTO_OP_PING, PROTO_OP_EXISTS, PROTO_OP_LOOKUP,
					PROTO_OP_GET, PROTO_OP_PUT };
	struct proto_frame f = { .op = ops[rand_r(&ch->seed) % 5] };
	struct proto_item its[16];
	uint32_t n = 0, crc;
	uint64_t vlen = 1 + rand_r(&ch->seed) % 8192;
	uint8_t *buf, *full, *val = NULL;
	size_t hl;

	memset(its, 0, sizeof(its));
	if (f.op != PROTO_OP_PING) {
		f.ns_count = 1;
		f.ns = chaos_ns;
		n = f.op == PROTO_OP_PUT ? 1 : 1 + rand_r(&ch->seed) % 16;
		for (uint32_t i = 0; i < n; i++) {
			char key[32];
			snprintf(key, sizeof(key), "chaos-%u-%u", ch->id, rand_r(&ch->seed) % 64);
			kvt_key_set(&its[i].key, key, strlen(key));
		}
	}
	if (f.op == PROTO_OP_PUT) {
		val = malloc(vlen);
		T_ASSERT(val != NULL);
		tsrv_fill(val, vlen, rand_r(&ch->seed));
		crc = kvt_crc32c(0, val, vlen);
		its[0].part_count = 1;
		its[0].part_lens = &vlen;
		its[0].part_crcs = &crc;
	}
	buf = encode(c, &f, its, n, &hl);
	*tbl = hl;
	*len = hl + (val ? vlen : 0);
	full = realloc(buf, *len);
	T_ASSERT(full != NULL);
	if (val)
		memcpy(full + hl, val, vlen);
	free(val);
	return full;
}

/* Read frames until the server closes (true) or ms pass (false); the
 * frames into *answers, those not ERROR frames into *normal. */
static bool chaos_drain(struct kc *c, int ms, unsigned *answers, unsigned *normal)
{
	uint64_t end = tsrv_now_ns() + (uint64_t)ms * 1000000ull;

	while (tsrv_now_ns() < end) {
		struct kc_resp r;
		int rc = kc_recv(c, &r, ms);
		if (rc == -ECONNRESET || rc == -EPIPE || rc == -EIO)
			return true;
		if (rc < 0)
			return false;
		/* a reply split over frames (PROTO_F_MORE) counts once */
		if (!(r.f.flags & PROTO_F_MORE)) {
			(*answers)++;
			if (r.f.op != PROTO_OP_ERROR)
				(*normal)++;
		}
		kc_resp_free(&r);
	}
	return false;
}

static void *chaos_main(void *arg)
{
	struct chaos *ch = arg;

	while (!atomic_load(&chaos_stop) && !ch->fail) {
		unsigned what = rand_r(&ch->seed) % 7, answers = 0, normal = 0;
		size_t len, tbl;
		uint8_t *fr;
		struct kc c;

		if (kc_connect_tcp(&c, srv.port) != 0 || kc_login(&c, "alice", SECRET_ALICE) != 0) {
			ch->fail = "login";
			break;
		}
		ch->actions[what]++;
		switch (what) {
		case 0: /* cut anywhere, closed */
		case 1: /* cut anywhere, half-closed: the server closes now */
			fr = chaos_frame(ch, &c, &len, &tbl);
			if (len > 1 && kc_send(&c, fr, 1 + rand_r(&ch->seed) % (len - 1)) != 0)
				ch->fail = "send";
			free(fr);
			if (what == 1 && len > 1) {
				shutdown(c.fd, SHUT_WR);
				if (!chaos_drain(&c, 5000, &answers, &normal) || answers)
					ch->fail = "a frame cut then half-closed: not closed at once";
			}
			break;
		case 2: { /* a pipeline, half-closed: all answered, then closed */
			unsigned k = 1 + rand_r(&ch->seed) % 256;
			for (unsigned i = 0; i < k && !ch->fail; i++) {
				fr = chaos_frame(ch, &c, &len, &tbl);
				if (kc_send(&c, fr, len) != 0)
					ch->fail = "send";
				free(fr);
			}
			shutdown(c.fd, SHUT_WR);
			if (!chaos_drain(&c, 10000, &answers, &normal) || answers != k ||
			    normal != k) {
				fprintf(stderr, "chaos: pipeline of %u: %u answers, %u normal\n", k,
					answers, normal);
				ch->fail = "a pipeline then a half-close: not all answered, or not closed";
			}
			break;
		}
		case 3: { /* a header or table byte flipped: an ERROR frame at most */
			size_t at;
			fr = chaos_frame(ch, &c, &len, &tbl);
			at = rand_r(&ch->seed) % tbl;
			fr[at] ^= (uint8_t)(1u << (rand_r(&ch->seed) % 8));
			if (kc_send(&c, fr, len) != 0)
				ch->fail = "send";
			free(fr);
			shutdown(c.fd, SHUT_WR);
			if (!chaos_drain(&c, 5000, &answers, &normal) || normal) {
				fprintf(stderr, "chaos: byte %zu of %zu flipped: %u answers, %u normal\n",
					at, tbl, answers, normal);
				ch->fail = "a corrupt frame answered, or not closed";
			}
			break;
		}
		case 4: { /* 1025 keys, header first: refused; corrupt, closed */
			struct proto_frame f = { .op = PROTO_OP_EXISTS, .ns_count = 1,
						 .ns = chaos_ns };
			bool bad = rand_r(&ch->seed) % 2;
			struct kc_resp r;
			size_t cut;
			fr = encode(&c, &f, ch->big, ITEMS, &len);
			if (bad)
				fr[rand_r(&ch->seed) % len] ^= (uint8_t)(1u << (rand_r(&ch->seed) % 8));
			/* the header and up to 4 KiB of the table first */
			cut = PROTO_HDR_LEN + rand_r(&ch->seed) % 4096;
			if (kc_send(&c, fr, cut) != 0)
				ch->fail = "send";
			tsrv_sleep_ms(2);
			if (!ch->fail && kc_send(&c, fr + cut, len - cut) != 0)
				ch->fail = "send";
			free(fr);
			if (ch->fail)
				break;
			if (bad) {
				shutdown(c.fd, SHUT_WR);
				if (!chaos_drain(&c, 5000, &answers, &normal) || normal)
					ch->fail = "a corrupt frame of 1025 keys answered, or not closed";
			} else if (kc_recv(&c, &r, 10000) != 0) {
				ch->fail = "a frame of 1025 keys not answered";
			} else {
				if (r.f.op != PROTO_OP_EXISTS || r.f.status != PROTO_ECOUNT ||
				    kc_ping(&c) != 0)
					ch->fail = "a frame of 1025 keys: not ECOUNT, or not kept";
				kc_resp_free(&r);
			}
			break;
		}
		case 6: { /* a pipeline, BYE, then junk: answered, BYE last, closed */
			unsigned k = rand_r(&ch->seed) % 32, byes = 0;
			struct proto_frame f = { .op = PROTO_OP_BYE };
			uint8_t junk[256];
			uint64_t end = tsrv_now_ns() + 10000000000ull;
			bool closed = false, last_bye = false;
			for (unsigned i = 0; i < k && !ch->fail; i++) {
				fr = chaos_frame(ch, &c, &len, &tbl);
				if (kc_send(&c, fr, len) != 0)
					ch->fail = "send";
				free(fr);
			}
			tsrv_fill(junk, sizeof(junk), rand_r(&ch->seed));
			if (ch->fail || kc_request(&c, &f, NULL, 0, NULL, 0) < 0 ||
			    kc_send(&c, junk, 1 + rand_r(&ch->seed) % sizeof(junk)) != 0) {
				ch->fail = "send";
				break;
			}
			while (!closed && tsrv_now_ns() < end) {
				struct kc_resp r;
				int rc = kc_recv(&c, &r, 10000);
				if (rc < 0) {
					closed = rc == -ECONNRESET;
					break;
				}
				if (!(r.f.flags & PROTO_F_MORE)) {
					answers++;
					normal += r.f.op != PROTO_OP_ERROR;
					byes += r.f.op == PROTO_OP_BYE;
					last_bye = r.f.op == PROTO_OP_BYE;
				}
				kc_resp_free(&r);
			}
			/* Junk that comes after BYE is read and dropped by
			 * the server's lingering close (doc/kvtierd.md "Bad
			 * input"): every answer arrives, BYE's last; never an
			 * ERROR frame for the junk.  (Before the lingering
			 * close, the kernel's reset could cut the answers
			 * still in flight: fewer were allowed.) */
			if (!closed || normal != answers || answers != k + 1 || byes != 1 ||
			    !last_bye) {
				fprintf(stderr, "chaos: %u frames, BYE, junk: %u answers (%u not "
					"ERROR), %u BYE, closed %d\n", k, answers, normal, byes,
					closed);
				ch->fail = "a pipeline then BYE: the junk read, an answer after BYE, "
					   "or not closed";
			}
			break;
		}
		default: { /* GETs of a big value pipelined, never read */
			struct proto_item it = { 0 };
			kvt_key_set(&it.key, "chaos-big", 9);
			for (unsigned i = 0; i < 64; i++) {
				struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1,
							 .ns = chaos_ns };
				if (kc_request(&c, &f, &it, 1, NULL, 0) < 0)
					break;
			}
			break;
		}
		}
		kc_close(&c);
	}
	return NULL;
}

/* PUT of big[0, n) in 2 parts, EXISTS and PING pipelined in one send;
 * then the value read back whole. */
static void good_pipeline(struct kc *g, const struct kvt_key *k, const uint8_t *big, size_t n)
{
	struct proto_frame fp = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = chaos_ns };
	struct proto_frame fe = { .op = PROTO_OP_EXISTS, .ns_count = 1, .ns = chaos_ns };
	struct proto_frame fg = { .op = PROTO_OP_PING };
	uint64_t lens[2] = { n / 2 + 1, n - (n / 2 + 1) };
	uint32_t crcs[2];
	struct proto_item it = { .key = *k, .part_count = lens[1] ? 2 : 1, .part_lens = lens,
				 .part_crcs = crcs };
	struct proto_item ie = { .key = *k };
	size_t lp, le, lg, off = 0;
	uint8_t *bp, *be, *bg, *all;
	struct kc_value got;

	if (n < 2) {
		lens[0] = n;
		it.part_count = 1;
	}
	crcs[0] = kvt_crc32c(0, big, lens[0]);
	crcs[1] = kvt_crc32c(0, big + lens[0], lens[1]);
	bp = encode(g, &fp, &it, 1, &lp);
	be = encode(g, &fe, &ie, 1, &le);
	bg = encode(g, &fg, NULL, 0, &lg);
	all = malloc(lp + n + le + lg);
	T_ASSERT(all != NULL);
	memcpy(all + off, bp, lp), off += lp;
	memcpy(all + off, big, n), off += n;
	memcpy(all + off, be, le), off += le;
	memcpy(all + off, bg, lg), off += lg;
	T_RC(kc_send(g, all, off), 0);
	for (unsigned i = 0; i < 3; i++) {
		struct kc_resp r;
		T_RC(kc_recv(g, &r, 20000), 0);
		T_EQ_INT(r.f.status, 0);
		T_ASSERT(r.f.tag == fp.tag || r.f.tag == fe.tag || r.f.tag == fg.tag);
		kc_resp_free(&r);
	}
	T_RC(kc_exists(g, chaos_ns, k, NULL), KVT_OK);
	T_RC(kc_get(g, chaos_ns, k, 0, 0, 0, 0, &got), KVT_OK);
	T_ASSERT(got.crc_ok);
	T_EQ_INT(got.len, n);
	T_ASSERT(memcmp(got.bytes, big, n) == 0);
	kc_value_free(&got);
	free(all);
	free(bp);
	free(be);
	free(bg);
}

static void phase_chaos(void)
{
	struct chaos ch[CHAOS_THREADS];
	uint8_t *big = malloc(CHAOS_BIG), *val = malloc(65536);
	struct iovec v = { big, CHAOS_BIG };
	unsigned rounds = 0, seed = getenv("KVT_CHAOS_SEED") ? (unsigned)atoi(getenv("KVT_CHAOS_SEED"))
							    : (unsigned)time(NULL);
	uint64_t end, vanished = 0, active = 0;
	struct kc g, adm;

	printf("chaos: seed %u\n", seed);
	start("chaos", NULL);
	login(&g);
	T_RC(kc_register(&g, &desc, chaos_ns, NULL, 0), KVT_OK);
	tsrv_fill(big, CHAOS_BIG, 7);
	{
		struct kvt_key k;
		kvt_key_set(&k, "chaos-big", 9);
		T_RC(kc_put(&g, chaos_ns, &k, &v, 1, NULL), KVT_OK);
	}
	for (unsigned i = 0; i < CHAOS_THREADS; i++) {
		memset(&ch[i], 0, sizeof(ch[i]));
		ch[i].seed = seed + i * 7919u;
		ch[i].id = i;
		ch[i].big = calloc(ITEMS, sizeof(*ch[i].big));
		T_ASSERT(ch[i].big != NULL);
		for (unsigned j = 0; j < ITEMS; j++) {
			char key[32];
			snprintf(key, sizeof(key), "chaos-%u-%u", i, j);
			kvt_key_set(&ch[i].big[j].key, key, strlen(key));
		}
		pthread_create(&ch[i].t, NULL, chaos_main, &ch[i]);
	}
	/* The good client: every byte back as put. */
	end = tsrv_now_ns() + CHAOS_SECONDS * 1000000000ull;
	while (tsrv_now_ns() < end) {
		struct kvt_key k;
		struct kc_value got;
		char key[32];
		size_t n = 1 + (size_t)(rounds * 7919u) % 65536;
		struct iovec p = { val, n };
		snprintf(key, sizeof(key), "good-%u", rounds);
		kvt_key_set(&k, key, strlen(key));
		if (rounds % 8 == 7) {
			/* A big PUT with frames right behind it, in one send: its
			 * data streamed in place, the next headers after it. */
			good_pipeline(&g, &k, big, 1 + (size_t)(rounds * 104729u) % CHAOS_BIG);
			rounds++;
			continue;
		}
		tsrv_fill(val, n, rounds);
		T_RC(kc_put(&g, chaos_ns, &k, &p, 1, NULL), KVT_OK);
		T_RC(kc_get(&g, chaos_ns, &k, 0, 0, 0, 0, &got), KVT_OK);
		T_ASSERT(got.crc_ok);
		T_EQ_INT(got.len, n);
		T_ASSERT(memcmp(got.bytes, val, n) == 0);
		kc_value_free(&got);
		rounds++;
	}
	atomic_store(&chaos_stop, true);
	for (unsigned i = 0; i < CHAOS_THREADS; i++) {
		pthread_join(ch[i].t, NULL);
		printf("chaos: client %u: cut %u, cut+half-close %u, pipeline+half-close %u, "
		       "corrupt %u, 1025 keys %u, pipeline+BYE+junk %u, never read %u%s%s\n", i,
		       ch[i].actions[0], ch[i].actions[1], ch[i].actions[2], ch[i].actions[3],
		       ch[i].actions[4], ch[i].actions[6], ch[i].actions[5],
		       ch[i].fail ? ": FAILED: " : "", ch[i].fail ? ch[i].fail : "");
		free(ch[i].big);
	}
	for (unsigned i = 0; i < CHAOS_THREADS; i++)
		T_ASSERT(ch[i].fail == NULL);
	T_RC(kc_dial(&adm, srv.port, "admin", SECRET_ADMIN), 0);
	T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.errors.vanished", &vanished), 0);
	/* Every broken client's connection closed: the good one and this
	 * are left (before, half-closed ones whose last answers went out on
	 * EPOLLOUT stayed open: close_flush). */
	for (unsigned i = 0; i < 500; i++) {
		T_RC(kc_stat(&adm, PROTO_SCOPE_ALL, "server.conns_active", &active), 0);
		if (active <= 2)
			break;
		tsrv_sleep_ms(20);
	}
	printf("chaos: the good client's round trips: %u; server.errors.vanished %" PRIu64
	       "; connections left open %" PRIu64 "\n", rounds, vanished, active);
	T_EQ_INT(active, 2);
	T_GE_INT(rounds, 1);
	kc_close(&adm);
	kc_close(&g);
	free(big);
	free(val);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * close_flush: a connection that is to close once its answers are out --
 * the client half-closed (shutdown(SHUT_WR)) or sent BYE -- whose last
 * answers went out when the socket became writable again (EPOLLOUT),
 * after its frames were all done, was never closed: the flush did not
 * look whether it was to close, and with no more input to read and no
 * output to write the connection waited on nothing, its descriptor held
 * until the server stopped (test_native_attack chaos met it with long
 * pipelines).  Here: 6 GETs of 1 MiB answered into a socket that takes
 * ~4 MiB while the client does not read for 300 ms, then read: every
 * answer, then the close.
 */

#define CF_GETS 6u
#define CF_VALUE (1u << 20)
#define CF_JUNK (8u << 20)

/* Junk sent behind a BYE, as fast as the server takes it, until
 * CF_JUNK bytes or the server closed. */
struct cf_junk {
	pthread_t t;
	int fd;
	size_t sent;
};

static void *cf_junk_main(void *arg)
{
	struct cf_junk *j = arg;
	static uint8_t junk[64u << 10];

	memset(junk, 'j', sizeof(junk));
	while (j->sent < CF_JUNK) {
		ssize_t w = send(j->fd, junk, sizeof(junk), MSG_NOSIGNAL);
		if (w <= 0)
			break;
		j->sent += (size_t)w;
	}
	return NULL;
}

static void close_flush(const uint8_t *ns, bool bye, bool junk)
{
	struct proto_item it = { 0 };
	unsigned gets = 0, byes = 0;
	struct cf_junk j = { 0 };
	uint64_t t0;
	struct kc c;
	int rc;

	kvt_key_set(&it.key, "cf-big", 6);
	login(&c);
	for (unsigned i = 0; i < CF_GETS; i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
		T_ASSERT(kc_request(&c, &f, &it, 1, NULL, 0) > 0);
	}
	if (bye) {
		struct proto_frame f = { .op = PROTO_OP_BYE };
		T_ASSERT(kc_request(&c, &f, NULL, 0, NULL, 0) > 0);
	} else {
		T_EQ_INT(shutdown(c.fd, SHUT_WR), 0);
	}
	if (junk) {
		j.fd = c.fd;
		T_EQ_INT(pthread_create(&j.t, NULL, cf_junk_main, &j), 0);
	}
	tsrv_sleep_ms(300);
	t0 = tsrv_now_ns();
	for (;;) {
		struct kc_resp r;
		rc = kc_recv(&c, &r, 5000);
		if (rc < 0)
			break;
		if (r.f.op == PROTO_OP_GET && !(r.f.flags & PROTO_F_MORE) && r.f.status == 0)
			gets++;
		else if (r.f.op == PROTO_OP_BYE)
			byes++;
		kc_resp_free(&r);
	}
	if (junk)
		pthread_join(j.t, NULL);
	printf("close_flush: %s%s: %u GET answers, %u BYE, then %d after %.1f ms (junk sent: "
	       "%zu bytes)\n", bye ? "BYE" : "half-close", junk ? " then junk" : "", gets, byes,
	       rc, (tsrv_now_ns() - t0) / 1e6, j.sent);
	T_EQ_INT(gets, CF_GETS);
	T_EQ_INT(byes, bye ? 1 : 0);
	T_EQ_INT(rc, -ECONNRESET);
	kc_close(&c);
}

static void phase_close_flush(void)
{
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(CF_VALUE);
	struct iovec iov = { v, CF_VALUE };
	struct kvt_key k;
	struct kc g;

	start("close_flush", NULL);
	login(&g);
	T_RC(kc_register(&g, &desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "cf-big", 6);
	tsrv_fill(v, CF_VALUE, 3);
	T_RC(kc_put(&g, ns, &k, &iov, 1, NULL), KVT_OK);
	close_flush(ns, false, false);
	close_flush(ns, true, false);
	/* Junk behind the BYE, still coming when the last answers are
	 * written: the server's close waits for them to be acknowledged
	 * (a lingering close), not reset by the junk (before: the answers
	 * still in its send queue were lost to the reset). */
	close_flush(ns, true, true);
	kc_close(&g);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * tenant_caps: what one tenant's connections may cost the others.
 *   --tenant-conns 8: alice's 9th connection is refused at AUTH
 *   (KVT_EBUSY, the log says why) and closed; bob logs in beside them;
 *   once one of alice's closes, she logs in again.
 *   Pinned answers: alice GETs a 6 MiB value on each of 6 connections
 *   and reads none; her answers may pin a quarter of --dram (16 MiB)
 *   together.  A connection that pins nothing got its item whatever its
 *   tenant pinned (ops.c "Pinned answers"): all 6 were answered, 36 MiB
 *   pinned.  Past the share they are answered KVT_EBUSY, as RESP and S3
 *   refuse them, and a well-behaved connection's GET too: told, not left
 *   hanging; once the held answers are read, her GET is served again.
 */

#define TC_CONNS 8u
#define TC_GETS 6u
#define TC_VALUE (6u << 20)

static int login_as(struct kc *c, const char *tenant, const char *secret)
{
	int rc;

	T_RC(kc_connect_tcp(c, srv.port), 0);
	rc = kc_login(c, tenant, secret);
	if (rc != 0)
		kc_close(c);
	return rc;
}

/* alice logs in, retried while her connections just closed are still
 * counted (the server sees the closes asynchronously). */
static void login_retry(struct kc *c)
{
	uint64_t end = tsrv_now_ns() + 10000000000ull;
	int rc;

	while ((rc = login_as(c, "alice", SECRET_ALICE)) == KVT_EBUSY && tsrv_now_ns() < end)
		tsrv_sleep_ms(20);
	T_RC(rc, 0);
}

static void phase_tenant_caps(void)
{
	static const char *const extra[] = { "--tenant-conns", "8", NULL };
	uint8_t ns[PROTO_DIGEST_LEN], *v = malloc(TC_VALUE);
	struct kc a[TC_CONNS], extra_a, b, g;
	unsigned ok = 0, busy = 0;
	struct kc_value kv;
	int rc;

	start("tenant_caps", extra);
	/* --tenant-conns */
	for (unsigned i = 0; i < TC_CONNS; i++)
		login_retry(&a[i]);
	rc = login_as(&extra_a, "alice", SECRET_ALICE);
	printf("tenant_caps: alice's connection %u: login %d\n", TC_CONNS + 1, rc);
	T_EQ_INT(rc, KVT_EBUSY);
	T_RC(login_as(&b, "bob", SECRET_BOB), 0);
	T_RC(kc_ping(&b), 0);
	kc_close(&b);
	{
		/* the log says why */
		FILE *f = fopen(srv.log, "r");
		static char text[1u << 20];
		size_t n;
		T_ASSERT(f != NULL);
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[n] = 0;
		T_ASSERT(strstr(text, "limit of 8 connections open (--tenant-conns)") != NULL);
	}
	kc_close(&a[0]);
	login_retry(&a[0]);
	T_RC(kc_ping(&a[0]), 0);
	for (unsigned i = 0; i < TC_CONNS; i++)
		kc_close(&a[i]);

	/* Pinned answers */
	login_retry(&g);
	T_RC(kc_register(&g, &desc, ns, NULL, 0), KVT_OK);
	tsrv_fill(v, TC_VALUE, 21);
	for (unsigned i = 0; i < TC_GETS; i++) {
		struct iovec iov = { v, TC_VALUE };
		struct kvt_key k;
		char key[16];
		snprintf(key, sizeof(key), "tc-%u", i);
		kvt_key_set(&k, key, strlen(key));
		T_RC(kc_put(&g, ns, &k, &iov, 1, NULL), KVT_OK);
	}
	for (unsigned i = 0; i < TC_GETS; i++) {
		struct proto_frame f = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns };
		struct proto_item it = { 0 };
		int small = 4096;
		char key[16];
		login_retry(&a[i]);
		T_EQ_INT(setsockopt(a[i].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
		snprintf(key, sizeof(key), "tc-%u", i);
		kvt_key_set(&it.key, key, strlen(key));
		T_ASSERT(kc_request(&a[i], &f, &it, 1, NULL, 0) > 0);
	}
	tsrv_sleep_ms(500);
	{
		struct kvt_key k;
		kvt_key_set(&k, "tc-0", 4);
		rc = kc_get(&g, ns, &k, 0, 0, 0, 0, &kv);
		printf("tenant_caps: her GET beside %u unread ones: %d\n", TC_GETS, rc);
		T_EQ_INT(rc, KVT_EBUSY);
		kc_value_free(&kv);
	}
	for (unsigned i = 0; i < TC_GETS; i++) {
		/* peeked: a held answer of 6 MiB to a 4 KiB receive buffer
		 * would take minutes to read (its window is under a segment) */
		int32_t fst = 1, st = 1;
		T_RC(kc_peek_status(&a[i], 20000, &fst, &st), 0);
		T_EQ_INT(fst, 0);
		ok += st == KVT_OK;
		busy += st == KVT_EBUSY;
		kc_close(&a[i]);
	}
	printf("tenant_caps: %u unread GETs of 6 MiB on as many connections: %u answered, %u "
	       "KVT_EBUSY\n", TC_GETS, ok, busy);
	T_EQ_INT(ok + busy, TC_GETS);
	T_GE_INT(ok, 1);
	T_LE_INT(ok, 4); /* 16 MiB: 3, and one more in a race at most */
	{
		uint64_t end = tsrv_now_ns() + 10000000000ull;
		struct kvt_key k;
		kvt_key_set(&k, "tc-0", 4);
		while ((rc = kc_get(&g, ns, &k, 0, 0, 0, 0, &kv)) == KVT_EBUSY &&
		       tsrv_now_ns() < end) {
			kc_value_free(&kv);
			tsrv_sleep_ms(20);
		}
		T_EQ_INT(rc, KVT_OK);
		T_EQ_U64(kv.len, TC_VALUE);
		T_ASSERT(memcmp(kv.bytes, v, TC_VALUE) == 0);
		kc_value_free(&kv);
	}
	kc_close(&g);
	free(v);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * dup_put: one PUT frame naming a key DUP_N times, each time with other
 * bytes (lengths, part counts): every item answered, and the key then
 * holds exactly one of those values, whole.
 */

#define DUP_N 64u

struct dup_items {
	unsigned n, ok;
	int32_t st[DUP_N];
};

static void dup_item(void *ctx, const struct kc_resp *r, const struct proto_item *it)
{
	struct dup_items *d = ctx;

	(void)r;
	if (it->index < DUP_N) {
		d->st[it->index] = it->status;
		d->ok += it->status == KVT_OK;
	}
	d->n++;
}

static void phase_dup_put(void)
{
	struct proto_item its[DUP_N];
	uint64_t lens[DUP_N][2];
	uint32_t crcs[DUP_N][2];
	uint8_t ns[PROTO_DIGEST_LEN], *vals[DUP_N];
	struct iovec data[DUP_N];
	struct dup_items d = { 0 };
	struct kc_value got;
	struct kvt_key k;
	int32_t st = 0;
	unsigned match = DUP_N;
	struct kc c;

	start("dup_put", NULL);
	login(&c);
	T_RC(kc_register(&c, &desc, ns, NULL, 0), KVT_OK);
	kvt_key_set(&k, "dup", 3);
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < DUP_N; i++) {
		size_t n = 1000 + i * 977;
		vals[i] = malloc(n);
		T_ASSERT(vals[i] != NULL);
		tsrv_fill(vals[i], n, 100 + i);
		lens[i][0] = i % 2 ? n / 3 : n;
		lens[i][1] = n - lens[i][0];
		crcs[i][0] = kvt_crc32c(0, vals[i], lens[i][0]);
		crcs[i][1] = kvt_crc32c(0, vals[i] + lens[i][0], lens[i][1]);
		its[i].key = k;
		its[i].part_count = i % 2 ? 2 : 1;
		its[i].part_lens = lens[i];
		its[i].part_crcs = crcs[i];
		data[i].iov_base = vals[i];
		data[i].iov_len = n;
	}
	{
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ns };
		T_ASSERT(kc_request(&c, &f, its, DUP_N, data, DUP_N) > 0);
	}
	T_ASSERT(kc_recv_items(&c, 20000, dup_item, &d, &st) >= 1);
	T_RC(kc_get(&c, ns, &k, 0, 0, 0, 0, &got), KVT_OK);
	for (unsigned i = 0; i < DUP_N; i++)
		if (got.len == data[i].iov_len && memcmp(got.bytes, vals[i], got.len) == 0)
			match = i;
	printf("dup_put: frame status %d, %u items answered, %u stored OK (first %d, second %d); "
	       "the key holds value %d of %u, %" PRIu64 " bytes, CRCs %s\n", st, d.n, d.ok,
	       d.st[0], d.st[1], (int)match, DUP_N, got.len, got.crc_ok ? "ok" : "BAD");
	T_EQ_INT(st, 0);
	T_EQ_INT(d.n, DUP_N);
	T_ASSERT(d.ok >= 1);
	T_ASSERT(got.crc_ok);
	T_ASSERT(match < DUP_N);
	T_EQ_INT(got.part_count, its[match].part_count);
	kc_value_free(&got);
	T_RC(kc_ping(&c), 0);
	for (unsigned i = 0; i < DUP_N; i++)
		free(vals[i]);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * mixed_put: one PUT frame of 4 values of 200 KiB (its data streamed in
 * place, past the first read buffer) whose items fare differently -- an
 * unknown namespace (its bytes dropped), a part CRC that does not match
 * (KVT_ECORRUPT), two stored -- with a GET of one of them right behind
 * it in the same send: each item its own status, the stored ones exact.
 */

#define MP_LEN (200u << 10)

static void phase_mixed_put(void)
{
	uint8_t ns[2][PROTO_DIGEST_LEN], *vals[4], *all;
	struct proto_item its[4], gi = { 0 };
	uint64_t lens[4];
	uint32_t crcs[4];
	struct dup_items d = { 0 };
	size_t lp, lg, off = 0;
	uint8_t *bp, *bg;
	int32_t st = 0;
	struct kc c;

	start("mixed_put", NULL);
	login(&c);
	T_RC(kc_register(&c, &desc, ns[0], NULL, 0), KVT_OK);
	memset(ns[1], 0x5a, PROTO_DIGEST_LEN); /* nobody's */
	memset(its, 0, sizeof(its));
	for (unsigned i = 0; i < 4; i++) {
		char key[16];
		vals[i] = malloc(MP_LEN);
		T_ASSERT(vals[i] != NULL);
		tsrv_fill(vals[i], MP_LEN, 40 + i);
		snprintf(key, sizeof(key), "mixed-%u", i);
		kvt_key_set(&its[i].key, key, strlen(key));
		lens[i] = MP_LEN;
		crcs[i] = kvt_crc32c(0, vals[i], MP_LEN) ^ (i == 2 ? 1u : 0u);
		its[i].ns_index = i == 1 ? 1 : 0;
		its[i].part_count = 1;
		its[i].part_lens = &lens[i];
		its[i].part_crcs = &crcs[i];
	}
	{
		struct proto_frame fp = { .op = PROTO_OP_PUT, .ns_count = 2, .ns = ns[0] };
		struct proto_frame fg = { .op = PROTO_OP_GET, .ns_count = 1, .ns = ns[0] };
		gi.key = its[3].key;
		bp = encode(&c, &fp, its, 4, &lp);
		bg = encode(&c, &fg, &gi, 1, &lg);
	}
	all = malloc(lp + 4 * (size_t)MP_LEN + lg);
	T_ASSERT(all != NULL);
	memcpy(all, bp, lp);
	off = lp;
	for (unsigned i = 0; i < 4; i++, off += MP_LEN)
		memcpy(all + off, vals[i], MP_LEN);
	memcpy(all + off, bg, lg);
	off += lg;
	T_RC(kc_send(&c, all, off), 0);
	/* The PUT's answer, then the GET's (in order or not: by tag). */
	for (unsigned got = 0; got < 2; got++) {
		struct kc_resp r;
		T_RC(kc_recv(&c, &r, 20000), 0);
		if (r.f.op == PROTO_OP_PUT) {
			struct proto_iter it;
			struct proto_item pi;
			proto_iter_init(&it, &r.f, NULL, NULL, 0);
			while (proto_iter_next(&it, &pi) > 0)
				dup_item(&d, &r, &pi);
			st = r.f.status;
		} else {
			/* the GET behind it: a hit or a miss (it may have been
			 * taken before the PUT was stored), never an error */
			T_EQ_INT(r.f.op, PROTO_OP_GET);
			T_EQ_INT(r.f.status, 0);
		}
		kc_resp_free(&r);
	}
	printf("mixed_put: PUT status %d, items: %d %d %d %d\n", st, d.st[0], d.st[1], d.st[2],
	       d.st[3]);
	T_EQ_INT(st, 0);
	T_EQ_INT(d.n, 4);
	T_EQ_INT(d.st[0], KVT_OK);
	T_EQ_INT(d.st[1], KVT_ENONS);
	T_EQ_INT(d.st[2], KVT_ECORRUPT);
	T_EQ_INT(d.st[3], KVT_OK);
	for (unsigned i = 0; i < 4; i++) {
		struct kc_value v;
		int rc = kc_get(&c, ns[0], &its[i].key, 0, 0, 0, 0, &v);
		if (i == 0 || i == 3) {
			T_RC(rc, KVT_OK);
			T_ASSERT(v.crc_ok);
			T_EQ_INT(v.len, MP_LEN);
			T_ASSERT(memcmp(v.bytes, vals[i], MP_LEN) == 0);
		} else {
			T_RC(rc, KVT_MISS);
		}
		kc_value_free(&v);
	}
	T_RC(kc_ping(&c), 0);
	for (unsigned i = 0; i < 4; i++)
		free(vals[i]);
	free(all);
	free(bp);
	free(bg);
	kc_close(&c);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

/* ------------------------------------------------------------------------
 * put_resv: a PUT's values are received in place, into DRAM reservations
 * made from its header (value.c "PUT values received in place"), and held
 * until its data section has come whole.  alice (no dram= quota: her bytes
 * counted, not limited) starts a PUT of one 6 MiB value on each of 12
 * connections and sends 1 KiB of each value; bob has 8 values of 1 MiB in
 * DRAM (--ssd 0: what is evicted is gone).  Her reservations held the tier
 * (bounded by nothing but --dram, for --idle-timeout, and again on new
 * connections): bob's values were evicted and his PUT refused, as S3
 * uploads did before s3_upload_share.  Now what a tenant's values being
 * received reserve, native and S3 together, holds at most a quarter of
 * --dram (KVTD_RESV_TENANT_MAX; one value alone always taken): past it an
 * item is answered KVT_EBUSY (retry later) once its bytes came, read and
 * dropped, the connection kept, counted in server.mem_refused.
 */

#define PR_CONNS 12u
#define PR_VALUE (6u << 20)
#define PR_SENT 1024u
#define PR_BOB 8u
#define PR_BOB_VALUE (1u << 20)
#define PR_BOB_NEW (4u << 20)

static void phase_put_resv(void)
{
	static const char *const extra[] = { "--ssd", "0", NULL };
	uint8_t ans[PROTO_DIGEST_LEN], bns[PROTO_DIGEST_LEN];
	uint8_t *v = malloc(PR_VALUE), *bv = malloc(PR_BOB_NEW);
	uint64_t len = PR_VALUE, refused0, refused, used;
	struct kc a[PR_CONNS], b;
	unsigned bob_hits = 0, ok = 0, busy = 0, exact = 0;
	uint32_t crc;
	int32_t st[PR_CONNS];
	int bob_put;

	T_ASSERT(v != NULL && bv != NULL);
	start("put_resv", extra);
	T_RC(login_as(&b, "bob", SECRET_BOB), 0);
	T_RC(kc_register(&b, &desc, bns, NULL, 0), KVT_OK);
	for (unsigned i = 0; i < PR_BOB; i++) {
		struct iovec iov = { bv, PR_BOB_VALUE };
		struct kvt_key k;
		char key[16];
		snprintf(key, sizeof(key), "bob-%u", i);
		kvt_key_set(&k, key, strlen(key));
		tsrv_fill(bv, PR_BOB_VALUE, 60 + i);
		T_RC(kc_put(&b, bns, &k, &iov, 1, NULL), KVT_OK);
	}
	login(&a[0]);
	T_RC(kc_register(&a[0], &desc, ans, NULL, 0), KVT_OK);
	tsrv_fill(v, PR_VALUE, 7);
	crc = kvt_crc32c(0, v, PR_VALUE);
	refused0 = stat_of("server.mem_refused");
	for (unsigned c = 0; c < PR_CONNS; c++) {
		struct proto_frame f = { .op = PROTO_OP_PUT, .ns_count = 1, .ns = ans };
		struct proto_item it = { 0 };
		struct iovec part = { v, PR_SENT };
		char key[16];
		if (c > 0)
			login(&a[c]);
		snprintf(key, sizeof(key), "pr-%u", c);
		kvt_key_set(&it.key, key, strlen(key));
		it.part_count = 1;
		it.part_lens = &len;
		it.part_crcs = &crc;
		T_ASSERT(kc_request(&a[c], &f, &it, 1, &part, 1) > 0);
	}
	tsrv_sleep_ms(500);
	used = stat_of("dram.used_bytes");
	refused = stat_of("server.mem_refused") - refused0;
	/* bob, beside them: his values, and a new one */
	for (unsigned i = 0; i < PR_BOB; i++) {
		struct kc_value got;
		struct kvt_key k;
		char key[16];
		snprintf(key, sizeof(key), "bob-%u", i);
		kvt_key_set(&k, key, strlen(key));
		tsrv_fill(bv, PR_BOB_VALUE, 60 + i);
		if (kc_get(&b, bns, &k, 0, 0, 0, 0, &got) == KVT_OK && got.len == PR_BOB_VALUE &&
		    memcmp(got.bytes, bv, PR_BOB_VALUE) == 0)
			bob_hits++;
		kc_value_free(&got);
	}
	{
		struct iovec iov = { bv, PR_BOB_NEW };
		struct kvt_key k;
		kvt_key_set(&k, "bob-new", 7);
		tsrv_fill(bv, PR_BOB_NEW, 99);
		bob_put = kc_put(&b, bns, &k, &iov, 1, NULL);
	}
	/* the rest of alice's values: each item's status */
	for (unsigned c = 0; c < PR_CONNS; c++) {
		struct dup_items d = { 0 };
		int32_t fst = 1;
		T_RC(kc_send(&a[c], v + PR_SENT, PR_VALUE - PR_SENT), 0);
		T_ASSERT(kc_recv_items(&a[c], 20000, dup_item, &d, &fst) >= 1);
		T_EQ_INT(fst, 0);
		T_EQ_INT(d.n, 1);
		st[c] = d.st[0];
		ok += st[c] == KVT_OK;
		busy += st[c] == KVT_EBUSY;
		if (st[c] == KVT_OK) {
			struct kc_value got;
			struct kvt_key k;
			char key[16];
			snprintf(key, sizeof(key), "pr-%u", c);
			kvt_key_set(&k, key, strlen(key));
			if (kc_get(&a[c], ans, &k, 0, 0, 0, 0, &got) == KVT_OK &&
			    got.len == PR_VALUE && memcmp(got.bytes, v, PR_VALUE) == 0)
				exact++;
			kc_value_free(&got);
		}
		T_RC(kc_ping(&a[c]), 0); /* the connection kept */
	}
	printf("put_resv: alice's %u PUTs of %u MiB, %u bytes of each sent: dram.used_bytes %" PRIu64
	       " MiB of 64, mem_refused +%" PRIu64 "; bob's %u values of 1 MiB: %u read back, "
	       "his PUT of 4 MiB: %d (%s); then alice's sent whole: %u stored (%u exact), %u "
	       "KVT_EBUSY, other statuses:", PR_CONNS, PR_VALUE >> 20, PR_SENT, used >> 20,
	       refused, PR_BOB, bob_hits, bob_put, kvt_strerror(bob_put), ok, exact, busy);
	for (unsigned c = 0; c < PR_CONNS; c++)
		if (st[c] != KVT_OK && st[c] != KVT_EBUSY)
			printf(" %d", st[c]);
	printf("\n");
	T_EQ_INT(bob_hits, PR_BOB);
	T_EQ_INT(bob_put, KVT_OK);
	T_GE_INT(ok, 1);
	T_LE_INT(ok, 2); /* a quarter of --dram: 16 MiB, two of 6 MiB */
	T_EQ_INT(exact, ok);
	T_EQ_INT(ok + busy, PR_CONNS);
	T_GE_INT(refused, busy);
	T_LE_INT(used, 40u << 20);
	for (unsigned c = 0; c < PR_CONNS; c++)
		kc_close(&a[c]);
	kc_close(&b);
	free(v);
	free(bv);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

static const struct tsrv_phase phases[] = {
	{ "mixed_put", phase_mixed_put },
	{ "tenant_caps", phase_tenant_caps },
	{ "dup_put", phase_dup_put },
	{ "close_flush", phase_close_flush },
	{ "crc_refused", phase_crc_refused },
	{ "chaos", phase_chaos },
	{ "put_resv", phase_put_resv },
};

int main(int argc, char **argv)
{
	bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	return tsrv_run_phase("test_native_attack", argc, argv, phases,
			      sizeof(phases) / sizeof(phases[0]), base, sizeof(base));
}

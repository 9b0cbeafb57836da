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
 *                 awaited, then the next frame read out of step)
 *
 * argv[1]: kvtierd.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "server.h"
#include "t.h"

#define SECRET_ALICE "secret-of-alice-0123456789"
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

/* Frame f with n items encoded (the codec's own limits, not the
 * server's): malloc'd, its length in *len. */
static uint8_t *encode(struct kc *c, struct proto_frame *f, const struct proto_item *its,
		       uint32_t n, size_t *len)
{
	uint64_t need = 0;
	uint8_t *buf;

	f->tag = c->next_tag++;
	f->version = c->version;
	T_EQ_INT(proto_encode(f, its, n, NULL, 0, NULL, &need), KVT_EBUFSMALL);
	buf = malloc(need);
	T_ASSERT(buf != NULL);
	T_EQ_INT(proto_encode(f, its, n, buf, need, NULL, NULL), (int64_t)need);
	*len = (size_t)need;
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
	uint64_t len16 = 16, ecrc0 = 0, ecrc = 0;
	uint32_t crc16 = kvt_crc32c(0, data, 16);
	size_t len;
	struct kc a, c;

	start("crc_refused", NULL);
	login(&a);
	T_RC(kc_connect_tcp(&c, srv.port), 0);
	T_RC(kc_login(&c, "admin", SECRET_ADMIN), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_ALL, "server.errors.crc", &ecrc0), 0);
	kc_close(&c);
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
	T_RC(kc_connect_tcp(&c, srv.port), 0);
	T_RC(kc_login(&c, "admin", SECRET_ADMIN), 0);
	T_RC(kc_stat(&c, PROTO_SCOPE_ALL, "server.errors.crc", &ecrc), 0);
	printf("crc_refused: server.errors.crc +%" PRIu64 "\n", ecrc - ecrc0);
	T_EQ_INT(ecrc - ecrc0, 3);
	kc_close(&c);
	free(its);
	free(data);
	T_EQ_INT(tsrv_stop(&srv), 0);
}

static const struct {
	const char *name;
	void (*run)(void);
} phases[] = {
	{ "crc_refused", phase_crc_refused },
};

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *phase = argc > 2 ? argv[2] : "";

	bin = argc > 1 ? argv[1] : "daemon/kvtierd";
	signal(SIGPIPE, SIG_IGN);
	snprintf(base, sizeof(base), "%s/test_native_attack.XXXXXX", tmp);
	T_ASSERT(mkdtemp(base));
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		if (strcmp(phase, phases[i].name) == 0) {
			phases[i].run();
			tsrv_check_reports(base);
			t_rmtree(base);
			printf("%s: ok\n", phase);
			return 0;
		}
	fprintf(stderr, "usage: test_native_attack KVTIERD PHASE\n");
	return 2;
}

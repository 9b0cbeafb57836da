/*
 * s3ops.c - the S3 listener's operations (s3d.h, doc/s3.md): the mapping
 * of buckets and keys onto kvtier namespaces and keys, the object header,
 * and each operation's library requests through the loop's queue (tagged
 * S3D_UD) with what follows when they are back (s3d_step).
 *
 * Mapping (doc/s3.md "Buckets, keys and values"):
 *
 *   bucket  a namespace of the tenant: model "s3/<bucket>", dtype
 *           "bytes", layout "s3-object", tenant = the signer; it exists
 *           while the namespace's word in the registry (kvt_ns_word) is
 *           not 0: the creation time, Unix ms (until 2026-12-06 a marker
 *           block, key "B", which eviction and the SSD log's wrap could
 *           take: read once at start, kvtd_s3_buckets_migrate)
 *   object  kvtier key 'o' + SHA-256(object key); multipart parts
 *           'p' + SHA-256(uploadId "/" partNumber), upload markers
 *           'u' + SHA-256(uploadId)
 *   value   part 0: the header below, parts 1..: the object's bytes (one
 *           part per S3 part after CompleteMultipartUpload)
 *
 *     off 0  "KVS3"         off 4  u32 version (1)
 *     off 8  u64 length     off 16 u64 mtime, Unix ms
 *     off 24 u32 CRC32C of the bytes
 *     off 28 u32 name length (the object key, compared on every read)
 *     off 32 u32 content-type length
 *     off 36 u32 S3 parts (0: a single PUT)
 *     off 40 an upload marker's: the upload id (16 bytes; 0 before
 *            ListMultipartUploads); else reserved (0); 24 bytes
 *     off 64 name, then content type
 *
 * Threads: the connection's loop thread; no locks.  The one call that
 * may block is registering a new bucket's namespace (an fsync of the
 * registry, once per bucket, as RESP's namespace); setting a bucket's
 * word, an fsync too, runs on the aux thread (s3d_set_word).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/sha.h>

#include "s3d.h"

/* ------------------------------------------------------------------------
 * Keys, buckets, object headers
 */

void s3d_key(struct kvt_key *k, char tag, const void *p, size_t len)
{
	k->bytes[0] = (uint8_t)tag;
	SHA256(p, len, k->bytes + 1);
	k->len = 1 + SHA256_DIGEST_LENGTH;
}

/* An upload's marker: 'u' + SHA-256(uploadId). */
static void s3d_upload_key(struct kvt_key *k, const struct s3d_req *rq)
{
	s3d_key(k, 'u', rq->upload_id, strlen(rq->upload_id));
}

void s3d_part_key(struct kvt_key *k, const char *upload_id, uint32_t part)
{
	char b[64];
	int n = snprintf(b, sizeof(b), "%s/%u", upload_id, part);
	s3d_key(k, 'p', b, (size_t)n);
}

/* Is s[0, n) a dotted-quad IPv4 address's shape (four runs of 1-3
 * digits between three periods)?  S3 refuses such a bucket name. */
static bool s3d_bucket_ipv4(const char *s, size_t n)
{
	unsigned runs = 0, digits = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] >= '0' && s[i] <= '9') {
			if (++digits > 3)
				return false;
		} else if (i == n || s[i] == '.') {
			if (!digits || ++runs > 4)
				return false;
			digits = 0;
		} else {
			return false;
		}
	}
	return runs == 4;
}

static bool s3d_bucket_ends(const char *b, size_t n, const char *suffix)
{
	size_t sl = strlen(suffix);
	return n >= sl && memcmp(b + n - sl, suffix, sl) == 0;
}

/*
 * S3's bucket naming rules (the general purpose buckets', doc/s3.md
 * "Buckets"): 3 to 63 of a-z 0-9 . -, a letter or digit first and last --
 * the rules every request's bucket is held to, path-style or in the Host
 * (s3d.c s3d_route, s3d_vhost), as kvtierd created buckets under them
 * until 2026-12-06.  create: CreateBucket's name also has none of what S3
 * refuses for a new bucket: two adjacent periods, an IPv4 address's
 * shape, a prefix (xn--, sthree-, amzn-s3-demo-) or suffix (-s3alias,
 * --ol-s3, .mrap, --x-s3, --table-s3) S3 reserves.  Not for the other
 * requests, so that a bucket an older kvtierd created (a..b) stays
 * readable and deletable; such a name that names none is NoSuchBucket.
 */
bool s3d_bucket_ok(const char *b, size_t n, bool create)
{
	static const char *const prefixes[] = { "xn--", "sthree-", "amzn-s3-demo-" };
	static const char *const suffixes[] = { "-s3alias", "--ol-s3", ".mrap", "--x-s3",
						"--table-s3" };

	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      ch == '.'))
			return false;
	}
	if (b[0] == '-' || b[0] == '.' || b[n - 1] == '-' || b[n - 1] == '.')
		return false;
	if (!create)
		return true;
	for (size_t i = 0; i + 1 < n; i++)
		if (b[i] == '.' && b[i + 1] == '.')
			return false;
	if (s3d_bucket_ipv4(b, n))
		return false;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (n >= strlen(prefixes[i]) && memcmp(b, prefixes[i], strlen(prefixes[i])) == 0)
			return false;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (s3d_bucket_ends(b, n, suffixes[i]))
			return false;
	return true;
}

static void s3d_bucket_desc(struct kvt_ns_desc *d, char *model, size_t mcap, const char *bucket,
			    const char *tenant)
{
	snprintf(model, mcap, "%s%s", S3D_MODEL_PREFIX, bucket);
	memset(d, 0, sizeof(*d));
	d->model = model;
	d->dtype = "bytes";
	d->layout = "s3-object";
	d->block_tokens = 1;
	d->tp_size = 1;
	d->pp_size = 1;
	d->tenant = tenant;
	d->flags = KVT_NS_PERSISTENT;
}

/* A bucket exists while its namespace's word is not 0 (CreateBucket sets
 * it to the creation time, DeleteBucket back to 0; the registry keeps the
 * namespace).  Metadata, not cache contents: no eviction or SSD log wrap
 * takes it.  A lock-free load: no I/O. */
static int s3d_bucket_live(struct kvtd_server *srv, uint32_t ns)
{
	uint64_t w = 0;
	int r = kvt_ns_word(srv->store, ns, &w);
	return r < 0 ? r : w ? 0 : KVT_MISS;
}

/* Is canonical text canon (len bytes) an S3 bucket's namespace?  Its name
 * into *name, *name_len; its tenant's into *t, *tl (-1: none). */
static bool s3d_canon_bucket(const char *canon, size_t len, const char **name,
			     size_t *name_len, const char **t, int *tl)
{
	const char *m = strstr(canon, "\nmodel=" S3D_MODEL_PREFIX), *e;

	*tl = kvtd_canon_tenant(canon, len, t);
	if (!m || !strstr(canon, "\nlayout=s3-object\n"))
		return false;
	m += strlen("\nmodel=" S3D_MODEL_PREFIX);
	if (!(e = strchr(m, '\n')))
		return false;
	*name = m;
	*name_len = (size_t)(e - m);
	return true;
}

int kvtd_s3_buckets_migrate(struct kvtd_server *srv)
{
	char canon[2100];
	uint32_t moved = 0;

	for (uint32_t id = 1;; id++) {
		struct kvt_key k = { .len = 1, .bytes = { 'B' } };
		uint8_t digest[32], mk[8];
		uint64_t w = 0, vlen = 0, ctime;
		const char *name, *t;
		size_t nl;
		int tl, r, len = kvt_ns_info(srv->store, id, digest, canon, sizeof(canon));

		if (len < 0)
			break;
		if ((size_t)len >= sizeof(canon) ||
		    !s3d_canon_bucket(canon, (size_t)len, &name, &nl, &t, &tl) ||
		    kvt_ns_word(srv->store, id, &w) != 0 || w ||
		    kvt_exists(srv->store, id, &k) != KVT_OK)
			continue;
		r = kvt_get(srv->store, id, &k, mk, sizeof(mk), &vlen);
		ctime = r == KVT_OK && vlen == sizeof(mk) ? s3d_get64(mk) : 0;
		r = kvt_ns_set_word(srv->store, id, 0, ctime ? ctime : s3d_unix_ms());
		if (r < 0)
			return r;
		moved++;
	}
	if (moved)
		kvtd_log(KVTD_INFO, "S3 buckets kept in the namespace registry",
			 "buckets=%u from=markers", moved);
	return 0;
}

/* The bucket's namespace: 0, KVT_MISS (no such bucket), or an error.
 * create: register it if new, and do not ask whether it exists. */
/*
 * Another tenant's bucket, read through a grant (doc/s3.md "Grants"): the
 * bucket name "OWNER.BUCKET" names OWNER's bucket BUCKET when the tenants
 * file grants the signer read access to its namespace (grant OWNER *,
 * model=s3/BUCKET or its digest, to the signer or *).  Anything else --
 * no such owner, bucket or grant -- is KVT_MISS, the same answer as a
 * bucket nobody created.
 */
static int s3d_bucket_granted(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	const char *dot = strchr(rq->bucket, '.');
	struct kvt_ns_desc d;
	char owner[64], model[80];
	uint8_t digest[32];
	size_t ol;
	uint32_t id;

	if (!dot || dot == rq->bucket || !dot[1] || !kvtd_auth_enabled())
		return KVT_MISS;
	ol = (size_t)(dot - rq->bucket);
	memcpy(owner, rq->bucket, ol);
	owner[ol] = 0;
	if (!s3d_bucket_ok(dot + 1, strlen(dot + 1), false) ||
	    (ol == rq->tenant_len && memcmp(owner, rq->tenant, ol) == 0))
		return KVT_MISS;
	s3d_bucket_desc(&d, model, sizeof(model), dot + 1, owner);
	if (kvt_ns_digest(&d, digest, NULL, 0) < 0 || kvt_ns_find(srv->store, digest, &id) != 0)
		return KVT_MISS;
	if (!kvtd_grant_allows(owner, ol, model, strlen(model), digest, rq->tenant, rq->tenant_len))
		return KVT_MISS;
	if (s3d_bucket_live(srv, id) != 0)
		return KVT_MISS;
	rq->ns = id;
	rq->ns_ok = true;
	rq->granted = true;
	return 0;
}

static int s3d_bucket_own(struct s3d_req *rq, bool create);

int s3d_bucket_ns(struct s3d_req *rq, bool create)
{
	int r = s3d_bucket_own(rq, create);

	if (r == KVT_MISS && !create)
		r = s3d_bucket_granted(rq);
	return r;
}

/* The signer's own bucket (s3d_bucket_ns). */
static int s3d_bucket_own(struct s3d_req *rq, bool create)
{
	struct kvtd_conn *c = rq->conn;
	struct s3d_conn *sc = s3d_of(c);
	struct kvt_ns_desc d;
	char model[80];
	uint8_t digest[32];
	int r;

	if (sc->ns_valid && strcmp(sc->ns_bucket, rq->bucket) == 0 &&
	    strcmp(sc->ns_tenant, rq->tenant) == 0) {
		rq->ns = sc->ns_id;
		rq->ns_ok = true;
		return create ? 0 : s3d_bucket_live(c->loop->srv, rq->ns);
	}
	s3d_bucket_desc(&d, model, sizeof(model), rq->bucket, rq->tenant);
	r = kvt_ns_digest(&d, digest, NULL, 0);
	if (r < 0)
		return r;
	r = kvt_ns_find(c->loop->srv->store, digest, &rq->ns);
	if (r == KVT_MISS && create) {
		/* At most KVTD_NS_TENANT_MAX namespaces per tenant, buckets
		 * and native ones together (ops.c). */
		struct kvtd_tstat *t = kvtd_tstat_of(c); /* the signer's */
		if (t && atomic_load_explicit(&t->ns_count, memory_order_relaxed) >=
				 KVTD_NS_TENANT_MAX) {
			KVTD_COUNT(c->loop->srv, ns_refused, 1);
			return KVT_EFULL;
		}
		/* Registering fsyncs the registry: once per bucket, on the
		 * loop (doc/s3.md says so, as RESP does for its namespace). */
		r = kvt_ns_register(c->loop->srv->store, &d, &rq->ns);
		if (r == 0) {
			kvtd_ns_apply_group(c->loop->srv->store, rq->ns);
			if (t)
				atomic_fetch_add_explicit(&t->ns_count, 1, memory_order_relaxed);
		}
	} else if (r == 0) {
		/* Known already (e.g. from before a restart): registering it
		 * again writes nothing, and sets this process's policy for it
		 * -- KVT_NS_PERSISTENT is not kept in the registry. */
		r = kvt_ns_register(c->loop->srv->store, &d, &rq->ns);
	}
	if (r < 0 || r == KVT_MISS)
		return r;
	rq->ns_ok = true;
	sc->ns_valid = true;
	snprintf(sc->ns_bucket, sizeof(sc->ns_bucket), "%s", rq->bucket);
	snprintf(sc->ns_tenant, sizeof(sc->ns_tenant), "%s", rq->tenant);
	sc->ns_id = rq->ns;
	return create ? 0 : s3d_bucket_live(c->loop->srv, rq->ns);
}


/* len bytes at off of what a read brought back: a pinned value's view,
 * or a header read's part 0 in its buffer (s3d_item_hdr). */
static bool s3d_read_at(const struct kvt_req *r, uint64_t off, void *out, size_t len)
{
	if (r->op == KVT_OP_GET_PINNED)
		return kvtd_view_read(r, off, out, len);
	if (off + len > r->length)
		return false;
	memcpy(out, (const uint8_t *)r->iov[0].iov_base + off, len);
	return true;
}

/* The fixed fields of a header's S3D_HDR_LEN bytes (the layout above):
 * false if h is no object header (magic, version).  The one decoder of
 * s3d_obj_check and s3d_hdr_parse. */
static bool s3d_hdr_fields(const uint8_t *h, struct s3d_obj *ob)
{
	if (memcmp(h, "KVS3", 4) != 0 || s3d_get32(h + 4) != 1)
		return false;
	ob->len = s3d_get64(h + 8);
	ob->mtime_ms = s3d_get64(h + 16);
	ob->crc = s3d_get32(h + 24);
	ob->name_len = s3d_get32(h + 28);
	ob->ctype_len = s3d_get32(h + 32);
	ob->nparts = s3d_get32(h + 36);
	return true;
}

/* Parse and check a value's header (a pinned value, or its part 0 read
 * alone) against the expected name: true if it is the object asked
 * for. */
static bool s3d_obj_check(const struct kvt_req *r, const void *name, size_t name_len,
			  struct s3d_obj *ob)
{
	uint8_t h[S3D_HDR_LEN];
	uint8_t nb[S3D_KEY_MAX];

	if (r->status != KVT_OK || !s3d_read_at(r, 0, h, sizeof(h)) || !s3d_hdr_fields(h, ob))
		return false;
	if (ob->name_len != name_len || ob->name_len > S3D_KEY_MAX || ob->ctype_len > S3D_CTYPE_MAX)
		return false;
	ob->data_off = S3D_HDR_LEN + (uint64_t)ob->name_len + ob->ctype_len;
	/* (value_len: the whole value's, of a part read) */
	if (ob->data_off + ob->len != (r->op == KVT_OP_GET_PINNED ? r->length : r->value_len))
		return false;
	if (!s3d_read_at(r, S3D_HDR_LEN, nb, ob->name_len) ||
	    (name_len && memcmp(nb, name, name_len) != 0))
		return false;
	if (!s3d_read_at(r, S3D_HDR_LEN + ob->name_len, ob->ctype, ob->ctype_len))
		return false;
	/* Sent back as a header line: a PUT's came through the head's checks,
	 * but a value written over the native protocol into the bucket's
	 * namespace could carry a CR LF and split the answer (another header,
	 * or a whole second answer read by the grantee's next request on the
	 * connection; test_isolation resp_s3 "forged-crlf").  Not an object.
	 * A tab is a header value's byte (s3http.c s3h_vchar), and a PUT's
	 * Content-Type may hold one: such an object answered NoSuchKey
	 * (test_hostile_http s3_keys, review27). */
	for (uint32_t i = 0; i < ob->ctype_len; i++) {
		uint8_t ch = (uint8_t)ob->ctype[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return false;
	}
	ob->ctype[ob->ctype_len] = 0;
	return true;
}

/* Header of a new object into out (S3D_HDR_LEN + name + ctype). */
uint64_t s3d_obj_header(uint8_t *out, uint64_t len, uint32_t crc, const void *name,
			       size_t name_len, const char *ctype, uint32_t nparts)
{
	size_t cl = strlen(ctype);

	memset(out, 0, S3D_HDR_LEN);
	memcpy(out, "KVS3", 4);
	s3d_put32(out + 4, 1);
	s3d_put64(out + 8, len);
	s3d_put64(out + 16, s3d_unix_ms());
	s3d_put32(out + 24, crc);
	s3d_put32(out + 28, (uint32_t)name_len);
	s3d_put32(out + 32, (uint32_t)cl);
	s3d_put32(out + 36, nparts);
	memcpy(out + S3D_HDR_LEN, name, name_len);
	memcpy(out + S3D_HDR_LEN + name_len, ctype, cl);
	return S3D_HDR_LEN + name_len + cl;
}

/* ETag: CRC32C and length in hex (doc/s3.md "ETags"); "-N" for an object
 * assembled from N parts. */
void s3d_etag(char *out, size_t cap, uint32_t crc, uint64_t len, uint32_t nparts)
{
	if (nparts)
		snprintf(out, cap, "\"%08x%016" PRIx64 "-%u\"", crc, len, nparts);
	else
		snprintf(out, cap, "\"%08x%016" PRIx64 "\"", crc, len);
}

static void s3d_http_date(char *out, size_t cap, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void s3d_iso_date(char *out, size_t cap, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, ".%03uZ", (unsigned)(ms % 1000));
}

static int64_t s3d_parse_http_date(const char *v, size_t n)
{
	char b[64];
	struct tm tm;

	if (n >= sizeof(b))
		return -1;
	memcpy(b, v, n);
	b[n] = 0;
	memset(&tm, 0, sizeof(tm));
	if (!strptime(b, "%a, %d %b %Y %H:%M:%S GMT", &tm))
		return -1;
	return (int64_t)timegm(&tm);
}

void s3d_b64(const uint8_t *p, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* ------------------------------------------------------------------------
 * Library requests
 */

static void s3d_step(struct s3d_req *rq);
static void s3d_assemble(struct s3d_req *rq);
static bool s3d_complete_sweep(struct s3d_req *rq);

/*
 * A request's n library requests (those before freed), or NULL: no
 * memory, or past --max-memory.  The array is charged to the budget and
 * its tenant's input share while it is held: 360 B an item, where a
 * DeleteObjects of 1,000 keys may be a body of 15 KB, held while its
 * deletes wait to be durable or, done, behind its connection's earlier
 * requests (s3reply.c s3d_finish): DeleteObjects held so were charged ~38
 * B a key for ~400 (test_hostile_http s3_answer_held).
 */
static struct s3d_item *s3d_items(struct s3d_req *rq, uint32_t n)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uint64_t sz = (uint64_t)(n ? n : 1) * sizeof(*rq->items);

	for (uint32_t i = 0; i < rq->n; i++) {
		s3d_item_unpin(srv, rq, &rq->items[i]);
		free(rq->items[i].etag_sent);
	}
	free(rq->items);
	rq->n = 0;
	if (rq->items_charged) {
		kvtd_mem_uncharge(srv, rq->items_charged);
		rq->mem_charged -= rq->items_charged;
		s3d_tenant_uncharge(rq, rq->items_charged);
		rq->items_charged = 0;
	}
	if (!kvtd_mem_charge(srv, sz, false)) {
		KVTD_COUNT(srv, mem_refused, 1);
		rq->items = NULL;
		return NULL;
	}
	rq->items = calloc(n ? n : 1, sizeof(*rq->items));
	if (!rq->items) {
		kvtd_mem_uncharge(srv, sz);
		return NULL;
	}
	rq->n = n;
	rq->items_charged = sz;
	rq->mem_charged += sz;
	s3d_tenant_charge(rq, sz);
	return rq->items;
}

static void s3d_item_init(struct s3d_req *rq, struct s3d_item *it, uint32_t op,
			  const struct kvt_key *k)
{
	memset(it, 0, sizeof(*it));
	it->rq = rq;
	it->req.op = op;
	it->req.ns = rq->ns;
	/* A presence asked (an Abort's and a Complete's sweeps, the marker's
	 * recheck) is acted on where it misses -- a part deleted, an upload
	 * taken for gone: a tier's failure must not read as a miss there
	 * (s3e47; "Sweeps") */
	if (op == KVT_OP_EXISTS)
		it->req.flags = KVT_F_ERRORS;
	if (k)
		it->req.key = *k;
	it->req.user_data = (uint64_t)(uintptr_t)it | S3D_UD;
}

/* A request's one library request, on its object ('o': rq->key) or its
 * upload's marker ('u'), op set; NULL: no memory, rq answered 503. */
static struct s3d_item *s3d_item_one(struct s3d_req *rq, uint32_t op, char tag)
{
	struct s3d_item *it = s3d_items(rq, 1);
	struct kvt_key k;

	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return NULL;
	}
	if (tag == 'u')
		s3d_upload_key(&k, rq);
	else
		s3d_key(&k, tag, rq->key, rq->key_len);
	s3d_item_init(rq, it, op, &k);
	return it;
}

/*
 * Header reads: HeadObject, and every header a listing reads
 * (ListObjects(V2), ListMultipartUploads, ListParts), need only the
 * object's part 0 (its header: size, mtime, CRC32C, name, content type;
 * the ETag and x-amz-checksum-crc32c are the CRC and length stored
 * there).  A quiet part get (kvtier.h "Quiet part gets") reads it into
 * buf, S3D_LIST_HDR bytes (part 0 of every value kvtierd writes fits:
 * s3d.h): from DRAM through a quiet ref, from SSD with one aligned read
 * of the record's header and the value's first 4 KiB, checked against
 * part 0's CRC (a mismatch is a miss); nothing promoted or marked read,
 * no DRAM room needed, nothing pinned or copied, whoever reads: the
 * owner's reads as a grantee's.  So they take no quiet slot and charge
 * nothing ("Quiet reads"): what they hold is buf, in the request or the
 * listing (charged), and while in the store what a read from SSD holds
 * there (its state and an aligned buffer of the record's header and 4
 * KiB: ~5 KiB for an object of one PUT, ~19 KiB for one of 1,023 parts;
 * at most KVT_PART_QUIET_MEM, 25 KiB; until 2026-12-04 6 KiB more each, and
 * the part table decoded, 16 KiB more for 1,023 parts, the bound 64 KiB);
 * a HEAD is one request (charged
 * more than that: the tenant's input share bounds them), a listing
 * S3D_LIST_WIN at once (ListParts S3D_PARTS_WIN), each window charged
 * to --max-memory at KVT_PART_QUIET_MEM a read while it is in the
 * store (s3d_list_win).  Listings are S3D_SCAN_TENANT a tenant ("Walks
 * of the store"), but nothing bounds the tenants: until 2026-12-04 that
 * charge was not taken, ~0.6 MiB a listing in the store beside
 * --max-memory (16 tenants' 32 listings: up to 20 MiB; test_hostile_http
 * s3_list_mem saw 16.3 MiB held at once beyond any charge).  Before, the owner's header
 * reads were plain part gets, which promote a block on SSD only whole
 * (a listing of N such objects pulled N objects into DRAM, evicting
 * what was hot) and miss when DRAM has no room; a grantee's were quiet pinned gets, a
 * whole private copy each, 4 at a time a tenant (503 SlowDown past
 * them, doc/security.md "Not yet", 2026-12-04).  A value whose part 0
 * is longer (not an object kvtierd wrote) is KVT_EBUFSMALL: not an
 * object.  The shared and remote tiers are not asked: the owner's HEAD,
 * ListParts and upload-marker reads that miss are asked again where the
 * store has one (s3d_hdr_again); a grantee's miss there, as its GET.
 */
static void s3d_item_hdr(struct s3d_item *it, uint8_t *buf)
{
	it->req.flags = KVT_F_PART | KVT_F_QUIET;
	it->req.part = 0;
	it->iov[0] = (struct iovec){ buf, S3D_LIST_HDR };
	it->req.iov = it->iov;
	it->req.iov_count = 1;
}

/*
 * Reads that miss and reads that fail.  A read's status that says the
 * value is not there -- KVT_MISS, and what says it is not an object
 * kvtierd wrote (a part 0 longer than a header: KVT_EBUFSMALL; no such
 * part or namespace; a sealed namespace's, not read by part) -- is 404
 * (NoSuchKey, NoSuchUpload, ...); any other error (no memory, no pin
 * slot, the store closing, an I/O error a tier reports) says nothing of
 * whether it is there, and is 503, which every S3 client retries
 * (s3d_store_fail).  Until s3fix45 (2026-12-07) an Abort, a Complete,
 * ListParts, a listing, GetObject, HeadObject and a copy's source took
 * any failed read for a miss: 404 NoSuchUpload to an Abort whose marker
 * read failed -- the client took the upload for gone, its parts stayed.
 * (The library makes most tiers' failures misses already: doc/ssd.md
 * "Reads", doc/remote.md; what is left is no memory, no pin slot, a
 * closing store.)  0 (found: KVT_OK), KVT_MISS, or the error.
 */
int s3d_read_status(int st)
{
	switch (st) {
	case KVT_OK:
		return 0;
	case KVT_MISS:
	case KVT_EBUFSMALL:
	case KVT_ERANGE:
	case KVT_ENONS:
	case KVT_EKEYLEN:
	case KVT_EBADOP: /* (a header read of a sealed namespace's value) */
		return KVT_MISS;
	default:
		return st < 0 ? st : KVT_MISS;
	}
}

/* A read's error (s3d_read_status < 0) answered: 503 SlowDown where
 * kvtierd is short of something (memory, a pin slot, a closing store:
 * S3's throttling answer, which SDKs retry with backoff), 503
 * ServiceUnavailable for the rest (an I/O error: S3's answer to a
 * transient failure of its own; botocore's standard and legacy retry
 * modes and the AWS SDK for C++ retry every 503, as every 500). */
void s3d_store_fail(struct s3d_req *rq, int st)
{
	char m[160];

	if (st == -ENOMEM || st == KVT_EFULL || st == KVT_ECLOSED || st == -ECANCELED ||
	    st == KVT_EWAIT) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(st));
		return;
	}
	snprintf(m, sizeof(m), "A read failed (%s); retry.", kvt_strerror(st));
	s3d_fail(rq, 503, "ServiceUnavailable", m);
}

/* An upload's marker read that found none (KVT_MISS: 404 NoSuchUpload)
 * or failed (s3d_store_fail). */
void s3d_upload_fail(struct s3d_req *rq, int r)
{
	if (r == KVT_MISS)
		s3d_fail(rq, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
	else
		s3d_store_fail(rq, r);
}

/* s3d_obj_check with the read's error kept apart: 0 (the object asked
 * for), KVT_MISS (none, or another name's, or not an object), or the
 * read's error (answer it with s3d_store_fail). */
static int s3d_obj_found(const struct kvt_req *r, const void *name, size_t name_len,
			 struct s3d_obj *ob)
{
	int st = s3d_read_status(r->status);

	if (st < 0)
		return st;
	return st == 0 && s3d_obj_check(r, name, name_len, ob) ? 0 : KVT_MISS;
}

/*
 * UploadPart and UploadPartCopy name their upload by id: its marker
 * ('u' + SHA-256(id), a header naming the object key) must be the
 * request key's, as Complete, Abort and ListParts check.  By id alone, a
 * signer added parts to another key's upload in its bucket (PUT
 * /b/other?partNumber=1&uploadId=U of the upload U started for /b/mine:
 * 200, the part then in mine's Complete), and the check was kvt_exists
 * on the loop, which a store with a remote tier below walks down to the
 * pod (a network round trip, every connection of the loop stalled;
 * until s3fix45, 2026-12-07).  Now a header read through the loop's
 * queue, as HEAD's (s3d_item_hdr): UploadPart's from its head, its
 * connection parked meanwhile (s3d.c s3d_upload_probe), UploadPartCopy's
 * beside its source's read (s3d_run).  The item is set up, not sent.
 */
void s3d_upload_item(struct s3d_req *rq, struct s3d_item *it)
{
	struct kvt_key k;

	s3d_upload_key(&k, rq);
	s3d_item_init(rq, it, KVT_OP_GET, &k);
	s3d_item_hdr(it, rq->hdrbuf);
}

/* The marker read back: 0 (the request key's upload), KVT_MISS
 * (NoSuchUpload), or the read's error (s3d_store_fail). */
int s3d_upload_found(const struct s3d_req *rq, const struct kvt_req *r)
{
	struct s3d_obj ob;

	return s3d_obj_found(r, rq->key, rq->key_len, &ob);
}

/*
 * A header read (s3d_item_hdr) that missed, asked once more as a plain
 * part get: the one rule for HEAD's, ListParts' and the upload markers'
 * of UploadPart and UploadPartCopy.  Where the store has a tier below
 * SSD (a remote or shared tier: srv->tiers_below), which quiet gets do
 * not ask and a GET or CompleteMultipartUpload would read from -- the
 * marker of an upload made over a remote tier with remote.put_local=never
 * is in the pod only -- and for the bucket's owner: a grantee's miss
 * stays one, as its GET's ("Quiet reads").  (An upload's marker is
 * always the signer's: a grant gives no write.)  Until s3b45
 * (2026-12-07) UploadPart's (s3d_upload_again) and the others'
 * (s3d_hdr_retry) were two rules, the first without the grant's.
 */
static bool s3d_hdr_again(const struct s3d_req *rq, const struct kvt_req *r)
{
	return rq->conn->loop->srv->tiers_below && !rq->granted && r->op == KVT_OP_GET &&
	       (r->flags & KVT_F_QUIET) && r->status == KVT_MISS;
}

static bool s3d_miss_unsure(const struct s3d_req *rq, const struct kvt_req *r);

/* r, a read that missed, made the presence of its key asked with the
 * tiers' errors (KVT_F_ERRORS: s3d_miss_check's rule). */
static void s3d_as_presence(struct kvt_req *r)
{
	r->op = KVT_OP_EXISTS;
	r->flags = KVT_F_ERRORS;
	r->part = 0;
	r->iov = NULL;
	r->iov_count = 0;
}

/* UploadPart's marker read (s3d.c s3d_upload_checked), asked again
 * (s3d_hdr_again), and that read's miss asked as a presence
 * (s3d_miss_check's rule: a presence there is KVT_EBUSY, 503).  True if
 * it went (the same item, the same completion).  Until review48d
 * (2026-12-07) the plain read's miss was the answer: 404 NoSuchUpload
 * for a live upload whose marker was on a pod member down or timing out
 * (test_s3_podfail 3). */
bool s3d_upload_again(struct s3d_req *rq, struct s3d_item *it)
{
	struct kvt_req *r = &it->req;

	if (r->op == KVT_OP_EXISTS) {
		if (r->status == KVT_OK)
			r->status = KVT_EBUSY; /* there, not read */
		return false;
	}
	if (s3d_hdr_again(rq, r)) {
		r->flags = KVT_F_PART;
	} else if (s3d_miss_unsure(rq, r)) {
		s3d_as_presence(r);
	} else {
		return false;
	}
	if (kvt_submit(rq->conn->loop->q, &r, 1) == 1)
		return true;
	r->status = KVT_EFULL; /* not asked: no answer either way */
	return false;
}

/* The request's header reads that missed (a HEAD's, ListParts', an
 * UploadPartCopy's marker), asked again (s3d_hdr_again).  True if they
 * went (s3d_step runs again once they are back, none of them quiet
 * then).  Listings of objects need none: their keys come from the DRAM
 * and SSD indexes (doc/s3.md "Listing"). */
static bool s3d_hdr_retry(struct s3d_req *rq)
{
	struct kvtd_loop *loop = rq->conn->loop;
	uint32_t n = 0;

	for (uint32_t i = 0; i < rq->n; i++)
		n += s3d_hdr_again(rq, &rq->items[i].req);
	if (n == 0)
		return false;
	rq->pending = 1; /* held while submitting */
	for (uint32_t i = 0; i < rq->n; i++) {
		struct kvt_req *r = &rq->items[i].req;
		if (!s3d_hdr_again(rq, r))
			continue;
		r->flags = KVT_F_PART;
		rq->pending++;
		int rc = kvt_submit(loop->q, &r, 1);
		if (rc != 1) {
			r->status = rc;
			rq->pending--;
		}
	}
	if (--rq->pending == 0)
		s3d_step(rq);
	return true;
}

/*
 * Misses that are not known (s3f48, 2026-12-07).  A read walks the tiers
 * and takes a tier's failure for a miss there (kvtier.h: a pod that timed
 * out or refused, a member known down ranked around and another owner's
 * miss passed on), so a GetObject, HeadObject or ListParts over a failing
 * pod answered 404 NoSuchKey or NoSuchUpload, or left a part out, for
 * what was there -- and S3 clients do not retry a 404 (review47: "never
 * 404 for not known").  Where the store has a tier below SSD and for the
 * bucket's owner (as s3d_hdr_again: a grantee's quiet read does not ask
 * those tiers, its miss is one), a read's last miss is asked once more as
 * a presence with KVT_F_ERRORS: KVT_MISS, not there (404, or the part
 * left out); a tier's error, 503 ServiceUnavailable (s3d_store_fail); and
 * present, the read having failed (no DRAM room to promote it, a tier's
 * error on the read the presence did not meet), KVT_EBUSY: 503 as well.
 * The item becomes that presence (op, flags and status): what reads it
 * after sees a miss or an error, never a hit without its bytes.  A miss
 * costs one more request then (a round trip to the pod); a hit nothing.
 * The same for the reads of an Abort's marker, a Complete's marker and
 * parts (a listed part on a member down was 400 InvalidPart) and a
 * copy's source and UploadPartCopy's marker, and UploadPart's marker
 * read at its head (s3d_upload_again: s3d.c s3d_upload_probe, its own
 * completion; review48d).
 */
static bool s3d_miss_unsure(const struct s3d_req *rq, const struct kvt_req *r)
{
	return rq->conn->loop->srv->tiers_below && !rq->granted &&
	       (r->op == KVT_OP_GET || r->op == KVT_OP_GET_PINNED) &&
	       !(r->flags & KVT_F_QUIET) && r->status == KVT_MISS;
}

/* The request's reads that missed (s3d_miss_unsure), their presences
 * asked.  True if they went (s3d_step runs again once they are back);
 * false: none to ask, and the presences back, if any, are set as said
 * above. */
static bool s3d_miss_check(struct s3d_req *rq)
{
	struct kvtd_loop *loop = rq->conn->loop;
	uint32_t n = 0;

	for (uint32_t i = 0; i < rq->n; i++) {
		struct kvt_req *r = &rq->items[i].req;
		if (r->op == KVT_OP_EXISTS && r->status == KVT_OK)
			r->status = KVT_EBUSY; /* there, not read */
		n += s3d_miss_unsure(rq, r);
	}
	if (n == 0)
		return false;
	rq->pending = 1; /* held while submitting */
	for (uint32_t i = 0; i < rq->n; i++) {
		struct kvt_req *r = &rq->items[i].req;
		if (!s3d_miss_unsure(rq, r))
			continue;
		s3d_as_presence(r);
		rq->pending++;
		int rc = kvt_submit(loop->q, &r, 1);
		if (rc != 1) {
			r->status = rc < 0 ? rc : KVT_EFULL; /* not asked: not known */
			rq->pending--;
		}
	}
	if (--rq->pending == 0)
		s3d_step(rq);
	return true;
}

/*
 * ListParts' quiet misses (s3d_hdr_again): most of the 10,000 part
 * numbers it probes are absent, and a plain read of each from the pod
 * then a presence (s3d_miss_check) was two round trips a part number.
 * So ListParts asks the presence first (KVT_F_ERRORS): a miss is one,
 * an error is 503, and only a part there is read again as a plain part
 * get -- whose miss then is asked again by s3d_miss_check (there, not
 * read: 503).  One pod round trip for an absent part number, as before
 * s3f48 (bench/RESULTS.md "s3f48").  True if requests went.
 */
static bool s3d_parts_ask(struct s3d_req *rq)
{
	struct kvtd_loop *loop = rq->conn->loop;
	uint32_t n = 0;

	rq->pending = 1; /* held while submitting */
	for (uint32_t i = 0; i < rq->n; i++) {
		struct s3d_item *it = &rq->items[i];
		struct kvt_req *r = &it->req;
		if (s3d_hdr_again(rq, r)) {
			s3d_as_presence(r); /* (a header read: part 0 already) */
			it->reread = true;
		} else if (it->reread && r->op == KVT_OP_EXISTS && r->status == KVT_OK) {
			r->op = KVT_OP_GET;
			r->flags = KVT_F_PART;
			r->part = 0;
			r->iov = it->iov;
			r->iov_count = 1;
			it->reread = false;
		} else {
			it->reread = false; /* (its presence back: a miss or an error) */
			continue;
		}
		n++;
		rq->pending++;
		int rc = kvt_submit(loop->q, &r, 1);
		if (rc != 1) {
			r->status = rc < 0 ? rc : KVT_EFULL; /* not asked: not known */
			rq->pending--;
			it->reread = false;
		}
	}
	if (n == 0) {
		rq->pending = 0;
		return false;
	}
	if (--rq->pending == 0)
		s3d_step(rq);
	return true;
}

/* ------------------------------------------------------------------------
 * Quiet reads: GetObject and a CopyObject (UploadPartCopy) source of a
 * granted bucket (doc/security.md "Cross-tenant probing"), which need
 * the whole value.  An object on SSD only is read whole into a private
 * copy (kvtier.h "Quiet gets"), allocated when the read is submitted and
 * kept until the answer is written (GET) or the object is assembled
 * (Copy).  (HeadObject and listings read the header alone: "Header
 * reads" above; they took these slots and copies until 2026-12-04.)  As
 * native grantee GETs (ops.c "Quiet GETs"):
 *   - a read takes one of the server's KVTD_QUIET_INFLIGHT_MAX slots and
 *     one of its tenant's S3D_QUIET_TENANT_MAX while in the store; with
 *     none free, 503 SlowDown at once;
 *   - a completed copy is charged to --max-memory, to its connection and
 *     to its tenant (at most KVTD_COPY_CONN_MAX each; one alone always,
 *     if the budget has room): else it is let go and the request is 503
 *     SlowDown (server.copy_refused).  The charge goes with the pin to
 *     the answer (s3d_keep_pin, s3d_out) and back when it is written.
 * They were bounded only by the pin caps, a quarter of --dram a tenant:
 * with --dram 512M, 16 connections' unread GETs held 140-153 MiB of
 * copies beside --max-memory 32M (test_hostile_http s3_grant_ssd).
 */

static void s3d_quiet_release(struct kvtd_server *srv, struct s3d_item *it)
{
	if (!it->quiet_slot)
		return;
	it->quiet_slot = false;
	atomic_fetch_sub_explicit(&srv->quiet_inflight, 1, memory_order_relaxed);
	if (it->quiet_tstat)
		atomic_fetch_sub_explicit(&it->quiet_tstat->s3_quiet, 1, memory_order_relaxed);
	it->quiet_tstat = NULL;
}

/* One slot of the server's and one of the tenant's for it (KVT_F_QUIET)
 * to go to the store: true, or none free, nothing taken, the request
 * answered 503 and false. */
static bool s3d_quiet_slot(struct s3d_req *rq, struct s3d_item *it)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct kvtd_tstat *t = rq->in_tstat;
	unsigned cur = atomic_load_explicit(&srv->quiet_inflight, memory_order_relaxed);

	do {
		if (cur >= KVTD_QUIET_INFLIGHT_MAX)
			goto refuse;
	} while (!atomic_compare_exchange_weak_explicit(&srv->quiet_inflight, &cur, cur + 1,
							memory_order_relaxed,
							memory_order_relaxed));
	if (t && atomic_fetch_add_explicit(&t->s3_quiet, 1, memory_order_relaxed) >=
			 S3D_QUIET_TENANT_MAX) {
		atomic_fetch_sub_explicit(&t->s3_quiet, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&srv->quiet_inflight, 1, memory_order_relaxed);
		goto refuse;
	}
	it->quiet_slot = true;
	it->quiet_tstat = t;
	return true;
refuse:
	KVTD_COUNT(srv, copy_refused, 1);
	s3d_fail(rq, 503, "SlowDown", "Reads of another tenant's bucket in progress are at "
		 "kvtierd's limit; retry later.");
	return false;
}

/* A quiet read is back: its slots freed, its copy (if any) charged. */
static void s3d_quiet_done(struct s3d_req *rq, struct s3d_item *it)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct kvtd_conn *c = rq->conn;
	struct kvtd_tstat *t = rq->in_tstat;
	uint64_t len = it->req.value_len, max = KVTD_COPY_CONN_MAX(srv), tc;

	s3d_quiet_release(srv, it);
	if (!it->pinned || it->req.tier != KVT_TIER_SSD)
		return;
	tc = t ? atomic_load_explicit(&t->copies, memory_order_relaxed) : 0;
	/* the tenant's quarter cut to its half with its other charges
	 * (loop.c kvtd_tenant_cap; test_hostile copies_sum) */
	if ((c->copy_bytes && c->copy_bytes + len > max) ||
	    (tc && tc + len > kvtd_tenant_cap(srv, t, tc, max)) ||
	    !kvtd_mem_charge(srv, len, false)) {
		kvt_pin_release(srv->store, it->req.pin);
		it->pinned = false;
		it->req.status = KVT_MISS;
		rq->copy_refused = true;
		KVTD_COUNT(srv, copy_refused, 1);
		return;
	}
	it->copy_charged = len;
	it->copy_tstat = t;
	c->copy_bytes += len;
	if (t)
		atomic_fetch_add_explicit(&t->copies, len, memory_order_relaxed);
}

/* Submit every item; the step runs once all are back (possibly inline). */
static void s3d_submit(struct s3d_req *rq, int phase)
{
	struct kvtd_loop *loop = rq->conn->loop;

	rq->phase = phase;
	rq->pending = 1; /* held while submitting */
	for (uint32_t i = 0; i < rq->n; i++) {
		struct kvt_req *r = &rq->items[i].req;
		rq->pending++;
		int rc = kvt_submit(loop->q, &r, 1);
		if (rc != 1) {
			r->status = rc;
			rq->pending--;
			s3d_quiet_release(loop->srv, &rq->items[i]);
		}
	}
	if (--rq->pending == 0)
		s3d_step(rq);
}

/* A request of no S3 request (lazy deletes): freed when it completes. */
static void s3d_fire_delete(struct kvtd_conn *c, uint32_t ns, const struct kvt_key *k)
{
	struct s3d_item *it = calloc(1, sizeof(*it));
	struct kvt_req *r;

	if (!it)
		return;
	it->req.op = KVT_OP_DELETE;
	it->req.ns = ns;
	it->req.key = *k;
	it->req.user_data = (uint64_t)(uintptr_t)it | S3D_UD;
	r = &it->req;
	if (kvt_submit(c->loop->q, &r, 1) != 1)
		free(it);
}

void s3d_req_done(struct kvtd_loop *loop, struct kvt_req *r)
{
	struct s3d_item *it =
		(struct s3d_item *)(uintptr_t)(r->user_data & ~(uint64_t)KVTD_UD_PROTO_MASK);
	struct s3d_req *rq = it->rq;

	(void)loop;
	if (!rq) {
		if (r->op == KVT_OP_GET_PINNED && r->status == KVT_OK)
			kvt_pin_release(loop->srv->store, r->pin);
		free(it);
		return;
	}
	if (it->room_done) { /* a KVT_OP_ROOM (s3d.c "Parking") */
		it->room_done(rq, r->status);
		return;
	}
	if (r->op == KVT_OP_GET_PINNED && r->status == KVT_OK)
		it->pinned = true;
	if (it->quiet_slot)
		s3d_quiet_done(rq, it);
	if (r->status == KVT_OK && (int)r->tier > rq->tier && r->tier < KVT_TIER_COUNT)
		rq->tier = (int)r->tier;
	if (--rq->pending == 0)
		s3d_step(rq);
}

/* ------------------------------------------------------------------------
 * Operations
 */

/* A bucket ListBuckets lists: its name (at most 63 bytes) and word. */
struct s3d_listed_bucket {
	char name[64];
	uint64_t word;
};

static int s3d_listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct s3d_listed_bucket *)a)->name,
		      ((const struct s3d_listed_bucket *)b)->name);
}

/* ListBuckets: the tenant's bucket namespaces whose word is not 0, with
 * it as their creation date -- the registry alone, in memory: no read.
 * (Until 2026-12-06 each bucket's marker block was read, a quiet part get
 * of its 8 bytes: from SSD after a restart, an aligned read each.)
 * Namespace ids are 1, 2, 3 ... (lib/ns.c); a tenant's buckets are those
 * with model "s3/NAME", layout s3-object and its tenant line.  Sorted by
 * name, as S3 lists them (names are a-z 0-9 . -: byte order); until
 * 2026-12-06 in the order of their ids, of their first creation. */
static void s3d_list_buckets(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_listed_bucket *bk = NULL;
	size_t n = 0, cap = 0;
	char canon[2100];

	for (uint32_t id = 1;; id++) {
		uint8_t digest[32];
		const char *name, *t;
		size_t nl;
		uint64_t w = 0;
		int tl, len = kvt_ns_info(srv->store, id, digest, canon, sizeof(canon));

		if (len < 0)
			break;
		if ((size_t)len >= sizeof(canon) ||
		    !s3d_canon_bucket(canon, (size_t)len, &name, &nl, &t, &tl) || tl < 0 ||
		    (size_t)tl != rq->tenant_len || memcmp(t, rq->tenant, rq->tenant_len) ||
		    kvt_ns_word(srv->store, id, &w) != 0 || !w ||
		    nl >= sizeof(bk->name)) /* (a name no request could address) */
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct s3d_listed_bucket *nb = realloc(bk, nc * sizeof(*bk));
			if (!nb) {
				free(bk);
				s3d_fail(rq, 503, "SlowDown", "server out of memory");
				return;
			}
			bk = nb;
			cap = nc;
		}
		memcpy(bk[n].name, name, nl);
		bk[n].name[nl] = 0;
		bk[n++].word = w;
	}
	if (n > 1)
		qsort(bk, n, sizeof(*bk), s3d_listed_cmp);
	s3d_xml_begin(rq, "ListAllMyBucketsResult");
	s3d_text(rq, "<Owner><ID>", 11);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</ID><DisplayName>", 18);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</DisplayName></Owner><Buckets>", 31);
	for (size_t i = 0; i < n; i++) {
		char d[40];
		s3d_iso_date(d, sizeof(d), bk[i].word);
		s3d_text(rq, "<Bucket><Name>", 14);
		s3d_xml_str(rq, bk[i].name, strlen(bk[i].name));
		s3d_printf(rq, "</Name><CreationDate>%s</CreationDate></Bucket>", d);
	}
	free(bk);
	s3d_text(rq, "</Buckets></ListAllMyBucketsResult>\n", 36);
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

/* The answer to a GET or HEAD of a probed object (items[0]). */
static void s3d_get_answer(struct s3d_req *rq)
{
	struct s3d_item *it = &rq->items[0];
	struct s3d_obj ob;
	char etag[48], lm[40], extra[1024], crcb[16];
	size_t vl;
	const char *v;
	bool head = rq->op == S3_HEAD;
	uint64_t start = 0, end, mtime_s;
	int status = 200;
	int n;

	if ((n = s3d_obj_found(&it->req, rq->key, rq->key_len, &ob)) != 0) {
		if (n == KVT_MISS) {
			s3d_fail(rq, 404, "NoSuchKey", "The specified key does not exist.");
			return;
		}
		kvtd_conn_log(rq->conn, KVTD_INFO, "S3 GET failed", kvt_strerror(n));
		s3d_store_fail(rq, n);
		return;
	}
	/* Pinned answers (ops.c "Pinned answers"): a tenant's answers pin at
	 * most KVTD_PIN_TENANT_MAX of DRAM, all its connections together.
	 * A connection that pins nothing got its answer whatever its tenant
	 * pinned, so one tenant's unread GETs on many connections (one
	 * each) kept the whole DRAM tier from being evicted and every other
	 * tenant's PUT was refused (test_hostile_http s3_pins).  Its own pins
	 * pause the connection instead (s3d.c s3d_pin_flow), and an answer
	 * that waits for earlier ones is refused past the caps
	 * (s3d_pin_admit) -- once its conditions are evaluated: a GET
	 * answered 304 or 412 sends no body and keeps no pin, and was
	 * refused 503 for pins it would never hold (test_hostile_http
	 * s3_pins_cond). */
	s3d_etag(etag, sizeof(etag), ob.crc, ob.len, ob.nparts);
	s3d_http_date(lm, sizeof(lm), ob.mtime_ms);
	mtime_s = ob.mtime_ms / 1000;
	/* Conditions, in RFC 9110's order */
	if ((v = s3h_header(&rq->h, "if-match", &vl)) &&
	    !(vl == 1 && v[0] == '*') && !(vl == strlen(etag) && memcmp(v, etag, vl) == 0)) {
		s3d_fail(rq, 412, "PreconditionFailed", "At least one of the pre-conditions you "
			 "specified did not hold");
		return;
	}
	if (!s3h_header(&rq->h, "if-match", &vl) &&
	    (v = s3h_header(&rq->h, "if-unmodified-since", &vl))) {
		int64_t t = s3d_parse_http_date(v, vl);
		if (t >= 0 && (int64_t)mtime_s > t) {
			s3d_fail(rq, 412, "PreconditionFailed", "At least one of the pre-conditions "
				 "you specified did not hold");
			return;
		}
	}
	if ((v = s3h_header(&rq->h, "if-none-match", &vl))) {
		if ((vl == 1 && v[0] == '*') || (vl == strlen(etag) && memcmp(v, etag, vl) == 0)) {
			snprintf(extra, sizeof(extra), "ETag: %s\r\nLast-Modified: %s\r\n", etag, lm);
			rq->tlen = 0;
			s3d_answer(rq, 304, extra, 0, true);
			s3d_finish(rq);
			return;
		}
	} else if ((v = s3h_header(&rq->h, "if-modified-since", &vl))) {
		int64_t t = s3d_parse_http_date(v, vl);
		if (t >= 0 && (int64_t)mtime_s <= t) {
			snprintf(extra, sizeof(extra), "ETag: %s\r\nLast-Modified: %s\r\n", etag, lm);
			rq->tlen = 0;
			s3d_answer(rq, 304, extra, 0, true);
			s3d_finish(rq);
			return;
		}
	}
	if (!head && !s3d_pin_admit(rq, &v)) {
		s3d_fail(rq, 503, "SlowDown", v);
		return;
	}
	end = ob.len; /* exclusive */
	if ((v = s3h_header(&rq->h, "range", &vl)) && vl > 6 && memcmp(v, "bytes=", 6) == 0 &&
	    !memchr(v, ',', vl)) {
		/* bytes=a-b, bytes=a-, bytes=-n; several ranges: the whole object, as S3 */
		char b[64];
		uint64_t a = 0, z = 0;
		bool ha = false, hz = false, bad = false;
		size_t i = 6;
		if (vl >= sizeof(b))
			bad = true;
		else {
			memcpy(b, v, vl);
			b[vl] = 0;
		}
		/* Positions past any object saturate (RFC 9110 14.1.1: a last
		 * position past the end means the end; a first one, 416) */
		for (; !bad && i < vl && b[i] >= '0' && b[i] <= '9'; i++, ha = true)
			a = a > UINT64_MAX / 16 ? a : a * 10 + (uint64_t)(b[i] - '0');
		if (!bad && (i >= vl || b[i] != '-'))
			bad = true;
		for (i++; !bad && i < vl && b[i] >= '0' && b[i] <= '9'; i++, hz = true)
			z = z > UINT64_MAX / 16 ? z : z * 10 + (uint64_t)(b[i] - '0');
		if (!bad && i != vl)
			bad = true;
		if (!bad && (ha || hz)) {
			if (!ha) { /* suffix */
				if (z && ob.len == 0)
					goto whole; /* nothing to cut: 200, as S3 (not 206 "0--1/0") */
				if (z == 0) {
					s3d_fail(rq, 416, "InvalidRange", "The requested range is not "
						 "satisfiable");
					return;
				}
				start = z >= ob.len ? 0 : ob.len - z;
			} else {
				if (a >= ob.len || (hz && z < a)) {
					if (hz && z < a) /* invalid syntax: ignored, as RFC 9110 */
						goto whole;
					s3d_fail(rq, 416, "InvalidRange", "The requested range is not "
						 "satisfiable");
					return;
				}
				start = a;
				if (hz && z + 1 < ob.len)
					end = z + 1;
			}
			status = 206;
		}
	}
whole:
	crcb[0] = 0;
	if (status == 200) {
		uint8_t be[4] = { (uint8_t)(ob.crc >> 24), (uint8_t)(ob.crc >> 16),
				  (uint8_t)(ob.crc >> 8), (uint8_t)ob.crc };
		s3d_b64(be, 4, crcb);
	}
	n = snprintf(extra, sizeof(extra),
		     "Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: %s\r\nContent-Type: %s\r\n",
		     etag, lm, ob.ctype_len ? ob.ctype : "binary/octet-stream");
	if (status == 206)
		n += snprintf(extra + n, sizeof(extra) - (size_t)n,
			      "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", start,
			      end - 1, ob.len);
	else
		n += snprintf(extra + n, sizeof(extra) - (size_t)n, "x-amz-checksum-crc32c: %s\r\n",
			      crcb);
	if (ob.nparts)
		snprintf(extra + n, sizeof(extra) - (size_t)n, "x-amz-mp-parts-count: %u\r\n",
			 ob.nparts);
	rq->tlen = 0;
	s3d_answer(rq, status, extra, end - start, true);
	if (!head && end > start) {
		/* Straight from the pinned DRAM view: no copy. */
		uint64_t off = ob.data_off + start, left = end - start;
		for (uint32_t i = 0; i < it->req.view_count && left; i++) {
			size_t l = it->req.view[i].iov_len;
			if (off >= l) {
				off -= l;
				continue;
			}
			size_t take = l - (size_t)off < left ? l - (size_t)off : (size_t)left;
			s3d_seg_bytes(rq, (uint8_t *)it->req.view[i].iov_base + off, take);
			left -= take;
			off = 0;
		}
		/* counted as the whole object its pin holds, not the range
		 * sent: GETs of one byte each (Range: bytes=0-0) of ten 6 MiB
		 * objects, left unread behind a whole one, pinned 60 MiB of a
		 * 64 MiB tier on one connection counted as 6 MiB and 9 bytes,
		 * and another tenant's PUT was refused (test_hostile_http
		 * s3_pins_range) */
		s3d_keep_pin(rq, it, it->req.length);
	}
	s3d_finish(rq);
}

/* The PUT of an object whose bytes are in rq->buf (an overwrite): DELETE
 * then PUT, submitted together. */
void s3d_put_buffered(struct s3d_req *rq, const struct kvt_key *k)
{
	struct s3d_item *it = s3d_items(rq, 2);

	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_item_init(rq, &it[0], KVT_OP_DELETE, k);
	s3d_item_init(rq, &it[1], KVT_OP_PUT, k);
	it[1].iov[0] = (struct iovec){ rq->hdrbuf, rq->hdr_len };
	it[1].iov[1] = (struct iovec){ rq->buf, rq->buf_len };
	it[1].req.iov = it[1].iov;
	it[1].req.iov_count = rq->buf_len ? 2 : 1;
	s3d_submit(rq, PH_WRITE);
}

/*
 * UploadPart, UploadPartCopy: the part is stored.  Its upload's marker
 * was read at its head (beside its source); an Abort may have deleted it
 * since and swept past this part number, the part then left where no
 * request reaches it (1 of 8 UploadParts of 1 MiB sent beside an Abort
 * in some runs once the sweeps took presence from the index, s3x46: they
 * got faster than a body).  So the marker's presence is asked once more
 * (KVT_OP_EXISTS, PH_RECHECK): gone, the part goes too and the answer is
 * 404 NoSuchUpload; there, an Abort deletes the part after -- its second
 * sweep begins after the marker's delete ("Sweeps").  A presence that
 * failed (KVT_F_ERRORS: the pod timed out or refused, the marker gone
 * from the node's DRAM) is 503, the part deleted first (PH_PART_DEL,
 * waited for): the upload may well be there, and the client's retry
 * stores the part again (the marker read again at its head, the delete
 * done by then); if it was aborted meanwhile, its sweep past this part
 * number before the part landed, the part is not left where no request
 * reaches it (kept until s3f48, 2026-12-07: test_s3_podfail 5).  Until
 * s3e47 (2026-12-07) the library answered such a failure as a miss: the
 * part was deleted and the answer 404 NoSuchUpload for a live upload
 * (test_s3_podfail 2).  true: the recheck is under way, or the request
 * answered.
 */
static bool s3d_store_closed(struct s3d_req *rq);

static void s3d_recheck_submit(struct s3d_req *rq)
{
	if (s3d_item_one(rq, KVT_OP_EXISTS, 'u'))
		s3d_submit(rq, PH_RECHECK);
}

/* KVTD_TEST_S3_RECHECK_PAUSE_MS (a test's): on the aux thread, then back. */
static void s3d_recheck_pause(void *arg)
{
	const struct s3d_req *rq = arg;
	uint32_t ms = rq->conn->loop->srv->s3.test_recheck_pause_ms;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void s3d_recheck_later(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_recheck_submit(arg);
}

static bool s3d_part_recheck(struct s3d_req *rq)
{
	struct kvtd_loop *loop = rq->conn->loop;
	struct kvt_key k;
	int st;

	if (rq->op != S3_MPU_PART && rq->op != S3_MPU_PART_COPY)
		return false;
	if (rq->phase != PH_RECHECK && rq->phase != PH_PART_DEL) {
		if (loop->srv->s3.test_recheck_pause_ms && !loop->stopping)
			kvtd_aux_submit(loop, rq->in_tstat, s3d_recheck_pause, s3d_recheck_later,
					rq);
		else
			s3d_recheck_submit(rq);
		return true;
	}
	if (rq->phase == PH_PART_DEL) { /* the part's delete is back: 503 */
		if (rq->items[0].req.status < 0)
			kvtd_conn_log(rq->conn, KVTD_WARN, "S3 UploadPart: its part's delete "
				      "failed after its upload's recheck did; the part may stay",
				      kvt_strerror(rq->items[0].req.status));
		s3d_store_fail(rq, rq->recheck_st);
		return true;
	}
	st = s3d_read_status(rq->items[0].req.status);
	if (loop->srv->s3.test_recheck_fail)
		st = -ETIMEDOUT; /* (a test's: kvtd_s3_init) */
	if (st < 0) {
		struct s3d_item *it = s3d_items(rq, 1);
		rq->recheck_st = st;
		if (!it) {
			s3d_store_fail(rq, st);
			return true;
		}
		s3d_part_key(&k, rq->upload_id, rq->part_no);
		s3d_item_init(rq, it, KVT_OP_DELETE, &k);
		s3d_submit(rq, PH_PART_DEL);
		return true;
	}
	if (st != KVT_MISS)
		return false;
	s3d_part_key(&k, rq->upload_id, rq->part_no);
	s3d_fire_delete(rq->conn, rq->ns, &k);
	s3d_upload_fail(rq, KVT_MISS);
	return true;
}

void s3d_put_ok(struct s3d_req *rq)
{
	char extra[256], crcb[16];
	uint8_t be[4] = { (uint8_t)(rq->obj_crc >> 24), (uint8_t)(rq->obj_crc >> 16),
			  (uint8_t)(rq->obj_crc >> 8), (uint8_t)rq->obj_crc };

	if (s3d_part_recheck(rq))
		return;
	s3d_b64(be, 4, crcb);
	snprintf(extra, sizeof(extra), "ETag: %s\r\nx-amz-checksum-crc32c: %s\r\n", rq->etag, crcb);
	rq->tlen = 0;
	s3d_answer(rq, 200, extra, 0, false);
	s3d_finish(rq);
}

/* A multipart answer's document begun: root, then its Bucket and Key
 * (Initiate, Complete, ListParts). */
static void s3d_xml_upload_head(struct s3d_req *rq, const char *root)
{
	s3d_xml_begin(rq, root);
	s3d_text(rq, "<Bucket>", 8);
	s3d_xml_str(rq, rq->bucket, strlen(rq->bucket));
	s3d_text(rq, "</Bucket><Key>", 14);
	s3d_xml_str(rq, rq->key, rq->key_len);
	s3d_text(rq, "</Key>", 6);
}

/* ---- assembling an object from pinned sources (Complete, Copy) -------- */

/* items[0..n) hold pinned sources (their data at data_off); build the
 * destination object as parts = one per source, then answer. */
static void s3d_assemble(struct s3d_req *rq);

static void s3d_complete_answer(struct s3d_req *rq)
{
	char lm[40];

	if (s3d_part_recheck(rq))
		return;
	if (rq->op == S3_COPY || rq->op == S3_MPU_PART_COPY) {
		const char *root = rq->op == S3_COPY ? "CopyObjectResult" : "CopyPartResult";
		s3d_iso_date(lm, sizeof(lm), s3d_unix_ms());
		s3d_xml_begin(rq, root);
		s3d_printf(rq, "<LastModified>%s</LastModified><ETag>", lm);
		s3d_xml_str(rq, rq->etag, strlen(rq->etag));
		s3d_printf(rq, "</ETag></%s>\n", root);
	} else {
		if (rq->sweep_left) { /* ("Sweeps": reported, not refused) */
			char w[128];
			snprintf(w, sizeof(w), "upload %s: %u deletes failed (%u presences failed)",
				 rq->upload_id, rq->sweep_left, rq->sweep_unsure);
			kvtd_conn_log(rq->conn, KVTD_WARN, "S3 Complete: parts its sweep could "
				      "not delete may stay until the bucket goes", w);
		}
		s3d_xml_upload_head(rq, "CompleteMultipartUploadResult");
		s3d_text(rq, "<ETag>", 6);
		s3d_xml_str(rq, rq->etag, strlen(rq->etag));
		s3d_text(rq, "</ETag></CompleteMultipartUploadResult>\n", 40);
	}
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

/* The object is stored (its parts' deletes fired, a Complete's): a
 * Complete's marker goes too and its leftover parts are swept before the
 * answer; a copy is answered now. */
static void s3d_complete_done(struct s3d_req *rq)
{
	if (rq->op == S3_MPU_COMPLETE) {
		struct kvt_key pk;
		s3d_upload_key(&pk, rq);
		s3d_fire_delete(rq->conn, rq->ns, &pk);
		if (s3d_complete_sweep(rq))
			return; /* answered once its parts are swept */
	}
	s3d_complete_answer(rq);
}

/* Copy, UploadPartCopy, Complete: the wait for write-down room ended. */
static void s3d_assemble_room_done(struct s3d_req *rq, int status)
{
	free(rq->room_item);
	rq->room_item = NULL;
	if (status == KVT_OK) {
		s3d_assemble(rq);
		return;
	}
	KVTD_COUNT(rq->conn->loop->srv, put_park_timeouts, 1);
	s3d_fail(rq, 503, "SlowDown", kvt_strerror(status));
}

/*
 * Work on the loop.  A request head of a few hundred bytes (and a body of
 * at most S3D_SMALL_MAX) can cost far more loop time than a parse item:
 *   - assembling an object (CopyObject, UploadPartCopy,
 *     CompleteMultipartUpload) copies its bytes into a DRAM reservation,
 *     with two CRC32C passes: one tenant pipelining CopyObjects of a 32
 *     MiB object on 4 connections had 129 done in one go, and another
 *     tenant's GET waited 1.2-4.5 s (ASan; test_hostile_http s3_copy_loop);
 *   - a DeleteObjects names up to 1,000 keys in up to 1 MiB of XML (a
 *     parse, then a SHA-256 and a store request a key): 10 pipelined on
 *     each of 32 connections held another tenant's GET 663-1123 ms
 *     (s3_delete_loop); a CompleteMultipartUpload's XML the same.
 * So a loop does at most S3D_WORK_ITER units of them an iteration
 * (S3D_WORK_XML bytes of XML, S3D_WORK_BYTES of an object; the first
 * request always), as RESP's windows of keys (loop.c kvtd_work_turn): the
 * others wait for a later iteration, through the aux thread's mailbox,
 * other connections served between (server.work_deferred).
 */

/* May rq do `units` of work now?  false: later(rq) runs in a later
 * iteration, or rq was answered (the server stopping). */
static bool s3d_work_turn(struct s3d_req *rq, uint64_t units, void (*later)(void *))
{
	/* (rq may be freed when this returns 0) */
	int rc = kvtd_work_turn(rq->conn->loop, rq->in_tstat, units, later, rq);

	if (rc < 0)
		s3d_fail(rq, 503, "SlowDown", "server stopping");
	return rc > 0;
}

/*
 * A request taken back from the mailbox after kvt_store_close
 * (kvtd_loops_finish, --shutdown-timeout run out): the close dropped its
 * pins and freed their views, and a CopyObject read its source's
 * (ASan: heap-use-after-free in s3d_assemble; test_hostile_http
 * s3_stop_deferred).  It reads nothing: its connection is closed, as
 * kvtd_loops_finish does next, and it is answered SlowDown (dropped).
 * true: so answered.
 */
static bool s3d_store_closed(struct s3d_req *rq)
{
	if (!rq->conn->loop->store_closed)
		return false;
	kvtd_conn_close(rq->conn, "server stopped");
	s3d_fail(rq, 503, "SlowDown", "server stopping");
	return true;
}

static void s3d_assemble_later(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_assemble(arg);
}

/*
 * A remote tier below: kvt_put_reserve is KVT_ESTATE (a reservation has
 * no caller buffer to write through from).  The object is assembled into
 * a buffer instead, charged to --max-memory and the tenant's input share
 * as a PutObject's body there (s3d.c s3d_put_sink), and stored as an
 * overwrite, DELETE + PUT, one iovec a part (one kvtier part per S3
 * part, as the reservation's).  One larger than --max-memory is 400 EntityTooLarge, as
 * such a PutObject: an assembly holds no more of the budget than a PUT
 * could.  The buffer: the PUT's np iovecs, the Complete's part numbers
 * (nsrc), then the bytes; the sources' pins are let go once copied, so
 * an object is held once, not twice, while the remote tier takes it.
 * The DELETE item's part_no holds nsrc, the PUT's the last part's number
 * (s3d_complete_sweep).  Answered in s3d_assemble_written.
 */
static void s3d_assemble_through(struct s3d_req *rq, const struct kvt_key *k, unsigned np,
				 uint64_t total)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	bool one = rq->op == S3_COPY || rq->op == S3_MPU_PART_COPY;
	bool pcopy = rq->op == S3_MPU_PART_COPY;
	uint32_t nsrc = one ? 1 : rq->n - 1;
	struct s3d_item *src = one ? rq->items : rq->items + 1;
	uint64_t need = (uint64_t)np * sizeof(struct iovec) + (uint64_t)nsrc * 4 + total;
	uint32_t whole = 0, last = one ? 0 : src[nsrc - 1].part_no, *pnos;
	unsigned part = 1;
	struct iovec *iov;
	struct s3d_item *it;
	uint8_t *buf, *p;

	/* the old buffer (a Complete's XML, a Copy's source name) is read */
	if (rq->buf_charged) {
		kvtd_mem_uncharge(srv, rq->buf_charged);
		s3d_tenant_uncharge(rq, rq->buf_charged);
		rq->buf_charged = 0;
	}
	free(rq->buf);
	rq->buf = NULL;
	rq->buf_len = 0;
	/* What can never fit beside what this request holds while it copies
	 * (its head, its items, its sources' copies) is 400, not a 503 that no
	 * retry gets past: compared with total alone, a Complete of 16 MiB -
	 * 100 B under --max-memory 16M was 503 SlowDown on an idle node
	 * (review43g; test_s3_remote). */
	uint64_t own = rq->mem_charged; /* and a grantee's private copies */
	for (uint32_t i = 0; i < rq->n; i++)
		own += rq->items[i].copy_charged;
	if (srv->cfg.max_memory && (total > srv->cfg.max_memory ||
				    need + own > srv->cfg.max_memory)) {
		char m[200];
		snprintf(m, sizeof(m), "The object exceeds what kvtierd over a remote tier "
			 "buffers (--max-memory, %" PRIu64 " bytes).", srv->cfg.max_memory);
		s3d_fail(rq, 400, "EntityTooLarge", m);
		return;
	}
	if (!s3d_share_fits(rq, need)) {
		KVTD_COUNT(srv, mem_refused, 1);
		s3d_fail(rq, 503, "SlowDown", S3D_SHARE_MSG);
		return;
	}
	if (!kvtd_mem_charge(srv, need, false)) {
		KVTD_COUNT(srv, mem_refused, 1);
		s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory); "
			 "retry later");
		return;
	}
	if (!(buf = malloc(need))) {
		kvtd_mem_uncharge(srv, need);
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	iov = (struct iovec *)(void *)buf;
	pnos = (uint32_t *)(void *)(buf + (size_t)np * sizeof(*iov));
	p = buf + (size_t)np * sizeof(*iov) + (size_t)nsrc * 4;
	iov[0] = (struct iovec){ rq->hdrbuf, rq->hdr_len };
	for (uint32_t i = 0; i < nsrc; i++) {
		uint8_t h[S3D_HDR_LEN];
		const struct kvt_req *sr = &src[i].req;
		kvtd_view_read(sr, 0, h, sizeof(h));
		uint64_t off = S3D_HDR_LEN + (uint64_t)s3d_get32(h + 28) + s3d_get32(h + 32);
		uint64_t len = pcopy ? rq->copy_last - rq->copy_first + 1 : s3d_get64(h + 8);
		if (pcopy)
			off += rq->copy_first;
		pnos[i] = src[i].part_no;
		if (len)
			iov[part++] = (struct iovec){ p, (size_t)len };
		for (uint32_t v = 0; v < sr->view_count && len; v++) {
			size_t l = sr->view[v].iov_len;
			if (off >= l) {
				off -= l;
				continue;
			}
			size_t take = l - (size_t)off < len ? l - (size_t)off : (size_t)len;
			memcpy(p, (uint8_t *)sr->view[v].iov_base + off, take);
			whole = kvt_crc32c(whole, p, take);
			p += take;
			len -= take;
			off = 0;
		}
	}
	s3d_put32(rq->hdrbuf + 24, whole);
	s3d_etag(rq->etag, sizeof(rq->etag), whole, total, one ? 0 : nsrc);
	rq->buf = buf;
	rq->buf_len = need;
	rq->buf_charged = need;
	s3d_tenant_charge(rq, need);
	if (!(it = s3d_items(rq, 2))) { /* the sources unpinned */
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_item_init(rq, &it[0], KVT_OP_DELETE, k);
	s3d_item_init(rq, &it[1], KVT_OP_PUT, k);
	it[0].part_no = nsrc;
	it[1].part_no = last;
	it[1].req.iov = iov;
	it[1].req.iov_count = np;
	s3d_submit(rq, PH_WRITE);
}

/* s3d_assemble_through's DELETE + PUT are back: answer, a Complete's
 * parts and marker deleted first. */
static void s3d_assemble_written(struct s3d_req *rq)
{
	struct s3d_item *it = rq->items;
	int st = it[1].req.status;

	if (st < 0 && st != -ECANCELED) {
		if (st == KVT_ETOOBIG || st == KVT_EBADLEN)
			s3d_fail(rq, 400, "EntityTooLarge", "The object is larger than kvtierd's "
				 "largest value");
		else
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(st));
		return;
	}
	if (rq->op == S3_MPU_COMPLETE) {
		const uint32_t *pnos = (const uint32_t *)(const void *)(
			rq->buf + (size_t)it[1].req.iov_count * sizeof(struct iovec));
		struct kvt_key pk;
		for (uint32_t i = 0; i < it[0].part_no; i++) {
			s3d_part_key(&pk, rq->upload_id, pnos[i]);
			s3d_fire_delete(rq->conn, rq->ns, &pk);
		}
	}
	s3d_complete_done(rq);
}

static void s3d_assemble(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	/* Copy, UploadPartCopy: one source, items[0]; Complete: items[0] is
	 * the marker, the parts follow */
	bool one = rq->op == S3_COPY || rq->op == S3_MPU_PART_COPY;
	bool pcopy = rq->op == S3_MPU_PART_COPY;
	uint32_t nsrc = one ? 1 : rq->n - 1;
	struct s3d_item *src = one ? rq->items : rq->items + 1;
	char pname[64];
	const char *name = rq->key;
	size_t name_len = rq->key_len;
	uint64_t lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
	struct s3d_obj ob;
	struct kvt_key k;
	uint64_t total = 0;
	uint32_t whole = 0;
	int r;

	for (uint32_t i = 0; i < nsrc; i++) {
		/* data_off and len of each source were checked by the caller
		 * (part_no holds nothing here); recompute from headers */
		uint8_t h[S3D_HDR_LEN];
		kvtd_view_read(&src[i].req, 0, h, sizeof(h));
		lens[1 + i] = pcopy ? rq->copy_last - rq->copy_first + 1 : s3d_get64(h + 8);
		total += lens[1 + i];
	}
	if (!s3d_work_turn(rq, total / S3D_WORK_BYTES, s3d_assemble_later))
		return;
	if (pcopy) {
		name_len = (size_t)snprintf(pname, sizeof(pname), "%s/%u", rq->upload_id, rq->part_no);
		name = pname;
		s3d_part_key(&k, rq->upload_id, rq->part_no);
	} else {
		s3d_key(&k, 'o', rq->key, rq->key_len);
	}
	rq->hdr_len = s3d_obj_header(rq->hdrbuf, total, 0, name, name_len, rq->ctype,
				     one ? 0 : nsrc);
	lens[0] = rq->hdr_len;
	/* Empty sources are not parts (kvtier parts are >= 1 byte). */
	unsigned np = 1;
	for (uint32_t i = 0; i < nsrc; i++)
		if (lens[1 + i])
			lens[np++] = lens[1 + i];
	/* The bucket's write-down queue full: wait for room on a KVT_OP_ROOM,
	 * not in this loop (s3d.c "Parking"; the body is read already, so
	 * the connection need not stop), at most twice. */
	r = kvt_put_reserve(srv->store, rq->ns, &k, lens, np, KVT_F_NOWAIT, &rq->res);
	if (r == KVT_EWAIT && rq->parks < 2 &&
	    (rq->room_item = calloc(1, sizeof(*rq->room_item)))) {
		struct kvt_req *rr = &rq->room_item->req;
		s3d_item_init(rq, rq->room_item, KVT_OP_ROOM, NULL);
		rq->room_item->room_done = s3d_assemble_room_done;
		rr->len = lens[0] + total;
		rq->parks++;
		KVTD_COUNT(srv, put_parked, 1);
		if (kvt_submit(rq->conn->loop->q, &rr, 1) == 1)
			return; /* s3d_req_done comes back here */
		free(rq->room_item);
		rq->room_item = NULL;
	}
	if (r == KVT_EWAIT) {
		KVTD_COUNT(srv, put_park_timeouts, 1);
		r = KVT_EFULL;
	}
	if (r == KVT_ESTATE) { /* a remote tier below */
		s3d_assemble_through(rq, &k, np, total);
		return;
	}
	if (r == KVT_EXISTS && rq->phase != PH_ASSEMBLE_DEL) {
		/* Replace: delete first, then come back here. */
		struct s3d_item *d = calloc(1, sizeof(*d));
		struct kvt_req *dr;
		if (!d) {
			s3d_fail(rq, 503, "SlowDown", "server out of memory");
			return;
		}
		/* the delete is one more item: held outside items[] */
		s3d_item_init(rq, d, KVT_OP_DELETE, &k);
		rq->phase = PH_ASSEMBLE_DEL;
		rq->pending = 1;
		dr = &d->req;
		free(rq->del_item);
		rq->del_item = d;
		if (kvt_submit(rq->conn->loop->q, &dr, 1) != 1) {
			rq->pending = 0;
			s3d_fail(rq, 500, "InternalError", "cannot replace the object");
		}
		return;
	}
	if (r != KVT_OK) {
		if (r == KVT_ETOOBIG || r == KVT_EBADLEN)
			s3d_fail(rq, 400, "EntityTooLarge", "The object is larger than kvtierd's "
				 "largest value");
		else if (r == KVT_EXISTS)
			s3d_fail(rq, 503, "SlowDown", "A concurrent write of this key; retry");
		else
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	rq->reserved = true;
	/* Copy: header, then each source's bytes, CRCs as they go. */
	{
		uint32_t vi = 0;
		size_t voff = 0;
		unsigned part = 0;
		uint64_t part_left = lens[0];
		uint32_t pcrc = 0;
		const struct iovec *view = rq->res.view;
#define S3D_EMIT(p_, n_)                                                                   \
	do {                                                                               \
		const uint8_t *pp = (const uint8_t *)(p_);                                 \
		size_t nn = (n_);                                                          \
		while (nn) {                                                               \
			size_t room = view[vi].iov_len - voff;                             \
			size_t t = nn < room ? nn : room;                                  \
			if (t > part_left)                                                 \
				t = (size_t)part_left;                                     \
			memcpy((uint8_t *)view[vi].iov_base + voff, pp, t);                \
			pcrc = kvt_crc32c(pcrc, pp, t);                                    \
			if (part > 0)                                                      \
				whole = kvt_crc32c(whole, pp, t);                          \
			pp += t;                                                           \
			nn -= t;                                                           \
			voff += t;                                                         \
			part_left -= t;                                                    \
			if (voff == view[vi].iov_len) {                                    \
				vi++;                                                      \
				voff = 0;                                                  \
			}                                                                  \
			if (part_left == 0) {                                              \
				crcs[part++] = pcrc;                                       \
				pcrc = 0;                                                  \
				part_left = part < np ? lens[part] : 0;                    \
			}                                                                  \
		}                                                                          \
	} while (0)
		S3D_EMIT(rq->hdrbuf, rq->hdr_len);
		for (uint32_t i = 0; i < nsrc; i++) {
			uint8_t h[S3D_HDR_LEN];
			const struct kvt_req *sr = &src[i].req;
			kvtd_view_read(sr, 0, h, sizeof(h));
			uint64_t off =
				S3D_HDR_LEN + (uint64_t)s3d_get32(h + 28) + s3d_get32(h + 32);
			uint64_t left = pcopy ? lens[1] : s3d_get64(h + 8);
			if (pcopy)
				off += rq->copy_first;
			for (uint32_t v = 0; v < sr->view_count && left; v++) {
				size_t l = sr->view[v].iov_len;
				if (off >= l) {
					off -= l;
					continue;
				}
				size_t take =
					l - (size_t)off < left ? l - (size_t)off : (size_t)left;
				S3D_EMIT((uint8_t *)sr->view[v].iov_base + off, take);
				left -= take;
				off = 0;
			}
		}
#undef S3D_EMIT
	}
	/* The whole object's CRC goes in the header (part 0): rewrite it. */
	s3d_put32(rq->hdrbuf + 24, whole);
	{
		size_t vi = 0, voff = 24;
		for (int b = 0; b < 4; b++) {
			while (voff >= rq->res.view[vi].iov_len) {
				voff -= rq->res.view[vi].iov_len;
				vi++;
			}
			((uint8_t *)rq->res.view[vi].iov_base)[voff++] = rq->hdrbuf[24 + b];
		}
		crcs[0] = kvt_crc32c(0, rq->hdrbuf, rq->hdr_len);
	}
	r = kvt_put_commit_checked(srv->store, rq->res.handle, crcs);
	rq->reserved = false;
	if (r == KVT_OK && rq->tier < KVT_TIER_DRAM) /* committed into DRAM */
		rq->tier = KVT_TIER_DRAM;
	if (r != KVT_OK && r != -ECANCELED) {
		s3d_fail(rq, 500, "InternalError", kvt_strerror(r));
		return;
	}
	(void)ob;
	s3d_etag(rq->etag, sizeof(rq->etag), whole, total, one ? 0 : nsrc);
	if (rq->op == S3_MPU_COMPLETE) {
		/* The parts are no longer needed. */
		struct kvt_key pk;
		for (uint32_t i = 0; i < nsrc; i++) {
			s3d_part_key(&pk, rq->upload_id, src[i].part_no);
			s3d_fire_delete(rq->conn, rq->ns, &pk);
		}
	}
	s3d_complete_done(rq);
}

/* ---- A bucket's word --------------------------------------------------------
 *
 * CreateBucket and DeleteBucket set the bucket namespace's word in the
 * registry (s3d_bucket_live): an append to the registry file and an
 * fdatasync (its rewrite now and then), so on the aux thread, not the
 * loop -- a tenant creating and deleting a bucket in a loop would hold
 * every connection of the loop for each fsync.  The aux thread serves
 * each tenant's jobs in turn.
 */
struct s3d_word_job {
	struct s3d_req *rq; /* not touched on the aux thread */
	struct kvt_store *store;
	uint32_t ns;
	uint64_t expect, word;
	int r;
	void (*then)(struct s3d_req *rq, int r);
};

static void s3d_word_run(void *arg)
{
	struct s3d_word_job *j = arg;
	j->r = kvt_ns_set_word(j->store, j->ns, j->expect, j->word);
}

static void s3d_word_done(void *arg)
{
	struct s3d_word_job job = *(struct s3d_word_job *)arg;
	free(arg);
	job.then(job.rq, job.r);
}

/* kvt_ns_set_word of rq's bucket on the aux thread, then then(rq, its
 * result) on the loop -- possibly before this returns. */
static void s3d_set_word(struct s3d_req *rq, uint64_t expect, uint64_t word,
			 void (*then)(struct s3d_req *, int))
{
	struct s3d_word_job *j;

	/* Stopping: the aux thread may be gone, and the store after it */
	if (rq->conn->loop->stopping) {
		then(rq, -ESHUTDOWN);
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		then(rq, -ENOMEM);
		return;
	}
	*j = (struct s3d_word_job){ .rq = rq, .store = rq->conn->loop->srv->store, .ns = rq->ns,
				    .expect = expect, .word = word, .then = then };
	kvtd_aux_submit(rq->conn->loop, kvtd_tstat_of(rq->conn), s3d_word_run, s3d_word_done, j);
}

/* CreateBucket: the word is set (0), or was not 0 already. */
static void s3d_create_bucket_set(struct s3d_req *rq, int r)
{
	char loc[160];

	if (r == KVT_EXISTS) {
		s3d_fail(rq, 409, "BucketAlreadyOwnedByYou", "Your previous request to "
			 "create the named bucket succeeded and you already own it.");
		return;
	}
	if (r < 0) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	snprintf(loc, sizeof(loc), "Location: /%s\r\n", rq->bucket);
	rq->tlen = 0;
	s3d_answer(rq, 200, loc, 0, false);
	s3d_finish(rq);
}

/* DeleteBucket, last: the word is back to 0 (the bucket is gone), or
 * another DeleteBucket took it meanwhile. */
static void s3d_delete_bucket_set(struct s3d_req *rq, int r)
{
	if (r == KVT_EXISTS) {
		s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
		return;
	}
	if (r < 0) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	rq->tlen = 0;
	s3d_answer(rq, 204, NULL, 0, false);
	s3d_finish(rq);
}

/* ---- DeleteBucket against the bucket's writes -------------------------------
 *
 * A write into a bucket -- PutObject, UploadPart, CreateMultipartUpload,
 * CompleteMultipartUpload, CopyObject, UploadPartCopy -- checks the
 * bucket's word first and lands later: after its body, its assembly, a
 * park for write-down room.  A DeleteBucket in between found no object,
 * cleared the namespace and set the word to 0, and the write landed after
 * the clear: a PUT answered 200 beside a DeleteBucket answered 204, its
 * object back in the bucket created again (or, its reservation cancelled
 * by the clear, a 200 for an object stored nowhere; s3tidy, 2026-12-06,
 * test_hostile_http s3_bucket_race).  So the two exclude each other per
 * bucket, in srv->s3.gate (a pin set used as a count of holds, under
 * s3.gate_lock: a bucket's requests come on any loop): a write holds key
 * 4*ns (S3D_GATE_WRITE) from its bucket's check until it is answered, a
 * DeleteBucket key 4*ns+1 from before its walk until it is answered.  A
 * DeleteBucket that finds a write of its bucket in progress, or another
 * DeleteBucket, is 409 OperationAborted (S3's answer to a conflicting
 * operation in progress; retry); a write that finds a DeleteBucket in
 * progress is 503 SlowDown (S3 clients retry it, and then find the
 * bucket gone, 404, or kept).  Once a write holds its key the word is
 * read again: a DeleteBucket that ended since the first check set it to
 * 0 before it let go (KVT_MISS is 1: until 2026-12-06 the callers took
 * only a negative answer for a refusal, and that second check let every
 * write through).
 *
 * A PutObject or UploadPart holds key 4*ns+2 (S3D_GATE_RECEIVE) while its
 * body comes, which a DeleteBucket does not wait for: a body held open
 * kept the DeleteBucket at 409 until the upload ended or its client was
 * closed as too slow (session 40).  The DeleteBucket wins, as on AWS; the
 * upload noted the word at its head and, its body in, takes key 4*ns and
 * reads the word again (s3d_gate_stored): 0 is 404 NoSuchBucket, another
 * word (deleted and created again: s3d_create_word makes each new word
 * differ) 503 SlowDown, its reservation aborted either way.
 *
 * The cost: a mutex taken twice a write (three times a PutObject), held
 * for a table lookup (the table kept: a pin set frees itself once empty,
 * and a calloc and a free a write were half the gate's cost, so it
 * always holds key 1, ns 0's DeleteBucket -- no namespace has id 0).
 */
enum { S3D_GATE_WRITE = 0, S3D_GATE_DELETE = 1, S3D_GATE_RECEIVE = 2 };

static uintptr_t s3d_gate_key(uint32_t ns, unsigned kind)
{
	return (uintptr_t)ns << 2 | kind;
}

/* Creation words: a CreateBucket's word is the time in ms, above every
 * word this process gave before (a PUT whose body came across a
 * DeleteBucket and a CreateBucket of its bucket tells them apart from
 * its own bucket by the word: s3d_gate_stored). */
static uint64_t s3d_create_word(struct kvtd_server *srv)
{
	uint64_t now = s3d_unix_ms(), last = atomic_load(&srv->s3.create_word);

	for (;;) {
		uint64_t w = now > last ? now : last + 1;
		if (atomic_compare_exchange_weak(&srv->s3.create_word, &last, w))
			return w;
	}
}

void kvtd_s3_init(struct kvtd_server *srv)
{
	const char *env = getenv("KVTD_TEST_S3_SWEEP_FAIL");

	pthread_mutex_init(&srv->s3.gate_lock, NULL);
	/* (without memory: made and freed by the writes, as they come) */
	(void)kvtd_pinset_hold(&srv->s3.gate, s3d_gate_key(0, S3D_GATE_DELETE), 0);
	/* the tests' hooks (kvtierd.h struct kvtd_s3), once: until s3x46
	 * (2026-12-07) the first was read at each Abort and counted in a
	 * static of s3ops.c */
	if (env) {
		char *end;
		srv->s3.test_sweep_fail_part = (uint32_t)strtoul(env, &end, 10);
		if (*end == ':')
			srv->s3.test_sweep_fail_aborts = (uint32_t)strtoul(end + 1, NULL, 10);
	}
	if ((env = getenv("KVTD_TEST_S3_SWEEP_PAUSE_MS")))
		srv->s3.test_sweep_pause_ms = (uint32_t)strtoul(env, NULL, 10);
	if ((env = getenv("KVTD_TEST_S3_RECHECK_PAUSE_MS")))
		srv->s3.test_recheck_pause_ms = (uint32_t)strtoul(env, NULL, 10);
	if ((env = getenv("KVTD_TEST_S3_COMPLETE_FAIL")))
		srv->s3.test_complete_fail_part = (uint32_t)strtoul(env, NULL, 10);
	if ((env = getenv("KVTD_TEST_S3_RECHECK_FAIL")))
		srv->s3.test_recheck_fail = strtoul(env, NULL, 10) != 0;
}

void kvtd_s3_free(struct kvtd_server *srv)
{
	kvtd_pinset_free(&srv->s3.gate);
	pthread_mutex_destroy(&srv->s3.gate_lock);
}

/* Hold rq's bucket's entry of kind (from what it holds, if anything):
 * 0, -EBUSY (a DeleteBucket of it in progress) or -ENOMEM, rq as it was. */
static int s3d_gate_take(struct s3d_req *rq, unsigned kind)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uintptr_t at = s3d_gate_key(rq->ns, kind);
	uint64_t len;
	int r = 0;

	pthread_mutex_lock(&srv->s3.gate_lock);
	if (kvtd_pinset_refs(&srv->s3.gate, s3d_gate_key(rq->ns, S3D_GATE_DELETE)))
		r = -EBUSY;
	else if (kvtd_pinset_hold(&srv->s3.gate, at, 0) < 0)
		r = -ENOMEM;
	else if (rq->gate_at)
		(void)kvtd_pinset_drop(&srv->s3.gate, rq->gate_at, &len);
	pthread_mutex_unlock(&srv->s3.gate_lock);
	if (r == 0)
		rq->gate_at = at;
	return r;
}

int s3d_gate_write(struct s3d_req *rq)
{
	int r;

	if (rq->gate_at)
		return 0;
	if ((r = s3d_gate_take(rq, S3D_GATE_WRITE)) < 0)
		return r;
	r = s3d_bucket_live(rq->conn->loop->srv, rq->ns);
	if (r != 0) /* KVT_MISS is 1 */
		s3d_gate_leave(rq);
	return r;
}

int s3d_gate_receive(struct s3d_req *rq)
{
	uint64_t w = 0;
	int r;

	if ((r = s3d_gate_take(rq, S3D_GATE_RECEIVE)) < 0)
		return r;
	r = kvt_ns_word(rq->conn->loop->srv->store, rq->ns, &w);
	if (r == 0 && !w)
		r = KVT_MISS;
	if (r != 0) {
		s3d_gate_leave(rq);
		return r;
	}
	rq->gate_word = w;
	return 0;
}

int s3d_gate_stored(struct s3d_req *rq)
{
	uint64_t w = 0;
	int r;

	if (!rq->gate_at || (rq->gate_at & 3u) != S3D_GATE_RECEIVE)
		return 0;
	if ((r = s3d_gate_take(rq, S3D_GATE_WRITE)) < 0)
		return r;
	r = kvt_ns_word(rq->conn->loop->srv->store, rq->ns, &w);
	if (r == 0 && !w)
		r = KVT_MISS;
	else if (r == 0 && w != rq->gate_word)
		r = -ESTALE;
	return r;
}

void s3d_gate_fail(struct s3d_req *rq, int r)
{
	if (r == KVT_MISS)
		s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
	else if (r == -EBUSY)
		s3d_fail(rq, 503, "SlowDown", "The bucket is being deleted; retry later.");
	else if (r == -ESTALE)
		s3d_fail(rq, 503, "SlowDown", "The bucket was deleted and created again while "
			 "this upload was in progress; retry.");
	else
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
}

/* A DeleteBucket begins: true, holding its bucket's DeleteBucket key;
 * false, answered (a write or another DeleteBucket of it in progress). */
static bool s3d_gate_delete(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uintptr_t at = s3d_gate_key(rq->ns, S3D_GATE_DELETE);
	int r = 0;

	/* (writes whose bodies are still coming do not count: they find the
	 * bucket gone when their bodies are in, s3d_gate_stored) */
	pthread_mutex_lock(&srv->s3.gate_lock);
	if (kvtd_pinset_refs(&srv->s3.gate, s3d_gate_key(rq->ns, S3D_GATE_WRITE)) ||
	    kvtd_pinset_refs(&srv->s3.gate, at))
		r = -EBUSY;
	else if (kvtd_pinset_hold(&srv->s3.gate, at, 0) < 0)
		r = -ENOMEM;
	pthread_mutex_unlock(&srv->s3.gate_lock);
	if (r == -EBUSY) {
		s3d_fail(rq, 409, "OperationAborted", "A conflicting conditional operation is "
			 "currently in progress against this resource (a write into the bucket, "
			 "or its deletion). Please try again.");
		return false;
	}
	if (r < 0) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return false;
	}
	rq->gate_at = at;
	return true;
}

/* ---- Walks of the store ---------------------------------------------------
 *
 * kvt_scan walks the DRAM and SSD indexes whole -- every tenant's entries,
 * whatever the bucket holds: ~1 ms (ASan) per 2*10^5 blocks, and stores
 * hold millions.  On the loop it stalled every connection of that loop,
 * and one connection may pipeline 256 listings: an empty bucket's
 * listings, pipelined on two connections, held a RESP PING of another
 * client 81 ms (doc/security.md, `s3_scan`).  So a walk runs on the aux
 * thread, and a tenant has at most S3D_SCAN_TENANT listings (ListObjects,
 * ListMultipartUploads, ListParts, DeleteBucket) in progress server-wide;
 * past that the request is answered 503 SlowDown at once (S3 clients back
 * off and retry).  The aux queue holds at most that many walks per tenant, so
 * another tenant's aux jobs (a namespace's registration, a large range
 * check) wait behind at most S3D_SCAN_TENANT walks of each tenant.
 */
#define S3D_SCAN_TENANT 2

struct s3d_scan {
	struct s3d_req *rq;        /* not touched on the aux thread */
	struct kvt_store *store;
	uint32_t ns;
	struct kvt_key *cursor, *keys;
	char prefix;
	size_t max;
	int64_t n;
	void (*then)(struct s3d_req *rq, int64_t n);
	struct kvt_key cur0, one;  /* cursor and key when the caller gives none */
};

/* Take one of the tenant's walk slots for rq (held until it is answered);
 * false: none is free (nothing answered). */
static bool s3d_scan_try(struct s3d_req *rq)
{
	struct kvtd_tstat *ts = kvtd_tstat_of(rq->conn);
	_Atomic uint32_t *slot = ts ? &ts->s3_scans : &rq->conn->loop->srv->s3.scans_untracked;

	if (rq->scan_slot)
		return true;
	if (atomic_fetch_add_explicit(slot, 1, memory_order_relaxed) >= S3D_SCAN_TENANT) {
		atomic_fetch_sub_explicit(slot, 1, memory_order_relaxed);
		return false;
	}
	rq->scan_slot = slot;
	return true;
}

/* s3d_scan_try, or false: answered SlowDown. */
static bool s3d_scan_acquire(struct s3d_req *rq)
{
	if (s3d_scan_try(rq))
		return true;
	KVTD_COUNT(rq->conn->loop->srv, s3_scan_refused, 1);
	s3d_fail(rq, 503, "SlowDown", "Please reduce your request rate: this tenant's "
		 "listings in progress are at their limit.");
	return false;
}

static void s3d_scan_run(void *arg)
{
	struct s3d_scan *sc = arg;
	sc->n = kvt_scan(sc->store, sc->ns, sc->cursor, &sc->prefix, 1, sc->keys, sc->max);
}

static void s3d_scan_done(void *arg)
{
	struct s3d_scan *sc = arg;
	struct s3d_scan job = *sc;
	free(sc);
	job.then(job.rq, job.n);
}

/* kvt_scan of rq's bucket on the aux thread (the caller holds a slot),
 * then then(rq, n) on the loop -- possibly before this returns.  cursor
 * and keys NULL: from the first key, into a key of the job's own (the
 * caller wants only n). */
static void s3d_scan(struct s3d_req *rq, struct kvt_key *cursor, char prefix,
		     struct kvt_key *keys, size_t max, void (*then)(struct s3d_req *, int64_t))
{
	struct s3d_scan *sc;

	/* Stopping: the aux thread may be gone, and the store after it */
	if (rq->conn->loop->stopping) {
		then(rq, -ESHUTDOWN);
		return;
	}
	if (!(sc = calloc(1, sizeof(*sc)))) {
		then(rq, -ENOMEM);
		return;
	}
	*sc = (struct s3d_scan){ .rq = rq, .store = rq->conn->loop->srv->store, .ns = rq->ns,
				 .cursor = cursor ? cursor : &sc->cur0,
				 .keys = keys ? keys : &sc->one, .prefix = prefix, .max = max,
				 .then = then };
	kvtd_aux_submit_walk(rq->conn->loop, s3d_scan_run, s3d_scan_done, sc);
}

/* ---- ListObjects, ListObjectsV2 ------------------------------------------
 *
 * Object keys are hashed into kvtier keys, so names are only in the
 * objects' headers: a listing walks the bucket's 'o' keys (kvt_scan, a
 * page of S3D_LIST_PAGE at a time) and reads each one's part 0 (the
 * header, at most S3D_LIST_HDR bytes: "Header reads"), and
 * keeps the max-keys + 1 smallest entries above the marker -- an entry
 * being a key, or with a delimiter the common prefix it rolls up into.
 * Cost: every object's header per page (doc/s3.md "Listing").  The
 * continuation token is the page's last entry in hex, so a page goes on
 * after it whatever was put or deleted meanwhile; entries are compared
 * with the marker (not names), so a common prefix is never listed twice.
 */
#define S3D_LIST_PAGE 1000
#define S3D_LIST_MAXKEYS 1000
#define S3D_LIST_WIN 128 /* header reads in flight (s3d_list_read) */

struct s3d_lent {
	uint32_t len;              /* bytes of name (uploads: key, 0, upload id in hex) */
	bool is_prefix;            /* a CommonPrefix */
	uint32_t crc, nparts;
	uint64_t size, mtime_ms;
	char name[S3D_KEY_MAX + 34];
};

struct s3d_list {
	bool url;                  /* encoding-type=url */
	bool uploads;              /* ListMultipartUploads: 'u' markers, not objects */
	char upload_marker[33];    /* upload-id-marker, as sent */
	uint32_t max_keys;
	size_t prefix_len, delim_len, marker_len, start_len, token_len;
	char prefix[S3D_KEY_MAX], delim[S3D_KEY_MAX], marker[S3D_KEY_MAX + 34];
	char start[S3D_KEY_MAX];   /* start-after (V2) or marker (V1), as sent */
	char token[2 * S3D_KEY_MAX + 1]; /* continuation-token, as sent */
	bool last_page;
	uint32_t nkeys, win;       /* keys of this scan page; read so far */
	bool stepping, again;      /* s3d_list_step running; reads came back inline */
	bool scanned;              /* a walk's page is back: scan_n keys (or an error) */
	int64_t scan_n;
	uint32_t part_next;        /* ListParts: the next part number to probe */
	uint32_t part_marker;      /* ListParts: part-number-marker */
	bool upload_ok;            /* ListParts: the upload's marker was read */
	struct kvt_key cursor;
	uint32_t nent, cap;        /* cap = max_keys + 1 */
	/* A listing's entries in name order: order[i] is the i-th one's
	 * index in ent (s3d_list_add; ListParts appends ent in order and
	 * reads it directly).  A new entry took a memmove of the ent after
	 * it, ~1.1 KB each: a listing of 1,000 objects moved ~275 MB, 85% of
	 * its ~100 ms on the loop (ASan; test_hostile_http s3_list_sort). */
	uint32_t *order;
	uint64_t win_charged;      /* the window's header reads (s3d_list_win) */
	/* not zeroed (s3d_list_alloc): written before read */
	struct kvt_key keys[S3D_LIST_PAGE];
	uint8_t bufs[S3D_LIST_PAGE][S3D_LIST_HDR];
	struct s3d_lent ent[];
};

static int s3d_hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int s3d_name_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static int64_t s3d_query(const struct s3d_req *rq, const char *name, char *out, size_t cap)
{
	return s3h_query(rq->h.target, rq->h.target_len, name, out, cap);
}

static bool s3d_list_page(struct s3d_req *rq);

/* A listing's state for up to max_keys entries (one more is kept, to tell
 * a truncated answer), charged to the server's memory; NULL: no memory
 * (nothing answered). */
static struct s3d_list *s3d_list_new(struct s3d_req *rq, uint32_t max_keys)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	size_t sz = sizeof(struct s3d_list) +
		    (size_t)(max_keys + 1) * (sizeof(struct s3d_lent) + sizeof(uint32_t));
	struct s3d_list *L;

	if (!kvtd_mem_charge(srv, sz, false))
		return NULL;
	rq->mem_charged += sz;
	s3d_tenant_charge(rq, sz);
	/* Only the fixed fields zeroed: the pages of keys, headers and
	 * entries (2.4 MB at max-keys 1000) are written before they are
	 * read, and left untouched (not faulted in) by a small bucket's
	 * listing -- clearing them was most of an empty listing's cost */
	L = rq->list = malloc(sz);
	if (!L)
		return NULL; /* (its charge goes with rq) */
	memset(L, 0, offsetof(struct s3d_list, keys));
	L->max_keys = max_keys;
	L->cap = max_keys + 1;
	L->order = (uint32_t *)&L->ent[L->cap];
	return L;
}

/* s3d_list_new, or NULL: the request was answered (503). */
static struct s3d_list *s3d_list_alloc(struct s3d_req *rq, uint32_t max_keys)
{
	struct s3d_list *L = s3d_list_new(rq, max_keys);

	if (!L)
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
	return L;
}

static void s3d_list_start(struct s3d_req *rq)
{
	bool v2 = rq->op == S3_LIST_V2, up = rq->op == S3_LIST_UPLOADS;
	char num[16], enc[8];
	int64_t l;
	uint32_t max_keys = S3D_LIST_MAXKEYS;
	struct s3d_list *L;

	if ((l = s3d_query(rq, up ? "max-uploads" : "max-keys", num, sizeof(num) - 1)) >= 0) {
		unsigned long v = 0;
		num[l] = 0;
		for (int64_t i = 0; i < l && v != ~0ul; i++) /* a non-digit anywhere: refused */
			v = num[i] >= '0' && num[i] <= '9' ? v * 10 + (unsigned long)(num[i] - '0')
							   : ~0ul;
		if (l == 0 || v == ~0ul) {
			s3d_fail(rq, 400, "InvalidArgument", "Provided max-keys not an integer or "
				 "within integer range");
			return;
		}
		max_keys = v < S3D_LIST_MAXKEYS ? (uint32_t)v : S3D_LIST_MAXKEYS;
	} else if (l == -2) {
		goto bad;
	}
	if (!s3d_scan_acquire(rq) || !(L = s3d_list_alloc(rq, max_keys)))
		return;
	if ((l = s3d_query(rq, "encoding-type", enc, sizeof(enc))) >= 0) {
		if (l != 3 || memcmp(enc, "url", 3) != 0) {
			s3d_fail(rq, 400, "InvalidArgument", "Invalid Encoding Method specified in "
				 "Request");
			return;
		}
		L->url = true;
	}
	if ((l = s3d_query(rq, "prefix", L->prefix, sizeof(L->prefix))) == -2)
		goto bad;
	L->prefix_len = l > 0 ? (size_t)l : 0;
	if ((l = s3d_query(rq, "delimiter", L->delim, sizeof(L->delim))) == -2)
		goto bad;
	L->delim_len = l > 0 ? (size_t)l : 0;
	if ((l = s3d_query(rq, v2 ? "start-after" : up ? "key-marker" : "marker", L->start,
			   sizeof(L->start))) == -2)
		goto bad;
	L->start_len = l > 0 ? (size_t)l : 0;
	memcpy(L->marker, L->start, L->start_len);
	L->marker_len = L->start_len;
	L->uploads = up;
	if (up && L->start_len) {
		/* (key-marker, upload-id-marker): after that upload; without an
		 * id, after every upload of key-marker ("\0\xff" sorts after
		 * "\0" and any hex id) */
		l = s3d_query(rq, "upload-id-marker", L->upload_marker, 32);
		if (l == -2)
			goto bad;
		L->marker[L->marker_len++] = 0;
		if (l > 0) {
			L->upload_marker[l] = 0;
			memcpy(L->marker + L->marker_len, L->upload_marker, (size_t)l);
			L->marker_len += (size_t)l;
		} else {
			L->marker[L->marker_len++] = (char)0xff;
		}
	}
	if (v2 && (l = s3d_query(rq, "continuation-token", L->token, sizeof(L->token) - 1)) != -1) {
		/* our token: the last entry of the page before, in hex */
		if (l < 2 || (l & 1))
			goto bad_token;
		L->token_len = (size_t)l;
		for (int64_t i = 0; i < l; i += 2) {
			int hi = s3d_hexval(L->token[i]), lo = s3d_hexval(L->token[i + 1]);
			if (hi < 0 || lo < 0)
				goto bad_token;
			L->marker[i / 2] = (char)(hi << 4 | lo);
		}
		L->marker_len = (size_t)l / 2;
		/* start-after is ignored once a token is given, as S3 does */
	}
	s3d_list_page(rq);
	return;
bad_token:
	s3d_fail(rq, 400, "InvalidArgument", "The continuation token provided is incorrect");
	return;
bad:
	s3d_fail(rq, 400, "InvalidArgument", "A listing parameter is malformed or too long.");
}

/* The i-th entry of a listing in name order. */
static struct s3d_lent *s3d_list_ent(struct s3d_list *L, uint32_t i)
{
	return &L->ent[L->order[i]];
}

/* Enter one entry in the sorted, bounded set (deduplicating prefixes):
 * its index goes into order, its bytes into a free ent (the one of the
 * largest entry, dropped, when the set is full). */
static void s3d_list_add(struct s3d_list *L, const char *name, size_t len, bool is_prefix,
			 const struct s3d_obj *ob)
{
	uint32_t lo = 0, hi = L->nent, slot;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct s3d_lent *m = s3d_list_ent(L, mid);
		int c = s3d_name_cmp(m->name, m->len, name, len);
		if (c == 0)
			return; /* a common prefix seen already */
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == L->cap)
		return; /* above every entry kept, and the set is full */
	if (L->nent == L->cap)
		slot = L->order[--L->nent]; /* the largest goes */
	else
		slot = L->nent;
	memmove(&L->order[lo + 1], &L->order[lo], (L->nent - lo) * sizeof(L->order[0]));
	L->order[lo] = slot;
	L->nent++;
	struct s3d_lent *e = &L->ent[slot];
	e->len = (uint32_t)len;
	e->is_prefix = is_prefix;
	memcpy(e->name, name, len);
	if (!is_prefix) {
		e->size = ob->len;
		e->mtime_ms = ob->mtime_ms;
		e->crc = ob->crc;
		e->nparts = ob->nparts;
	}
}

/* A header's fields from its first n bytes (the value value_len long):
 * the name (ob->name_len bytes, inside h), or NULL if it is none. */
static const char *s3d_hdr_parse(const uint8_t *h, size_t n, uint64_t value_len,
				 struct s3d_obj *ob)
{
	if (n < S3D_HDR_LEN || !s3d_hdr_fields(h, ob))
		return NULL;
	if (ob->name_len > S3D_KEY_MAX || ob->ctype_len > S3D_CTYPE_MAX ||
	    S3D_HDR_LEN + (uint64_t)ob->name_len > n ||
	    S3D_HDR_LEN + (uint64_t)ob->name_len + ob->ctype_len + ob->len != value_len)
		return NULL;
	return (const char *)h + S3D_HDR_LEN;
}

/* One object's header (its part 0, or the first bytes of a pinned view)
 * into the set. */
static void s3d_list_note(struct s3d_list *L, const uint8_t *h, size_t n, uint64_t value_len)
{
	struct s3d_obj ob;
	const char *name = s3d_hdr_parse(h, n, value_len, &ob);
	size_t len;

	if (!name)
		return;
	len = ob.name_len;
	if (len < L->prefix_len || memcmp(name, L->prefix, L->prefix_len) != 0)
		return;
	if (L->delim_len) {
		const char *d =
			memmem(name + L->prefix_len, len - L->prefix_len, L->delim, L->delim_len);
		if (d) {
			size_t pl = (size_t)(d - name) + L->delim_len;
			if (s3d_name_cmp(name, pl, L->marker, L->marker_len) > 0)
				s3d_list_add(L, name, pl, true, NULL);
			return;
		}
	}
	if (L->uploads) {
		/* an upload: (key, 0, id) orders by key, then id */
		char e[S3D_KEY_MAX + 34];
		static const uint8_t zero[16];
		if (len + 33 > sizeof(e) || memcmp(h + 40, zero, 16) == 0)
			return; /* a marker from before ids were kept */
		memcpy(e, name, len);
		e[len] = 0;
		sigv4_hex(h + 40, 16, e + len + 1);
		if (s3d_name_cmp(e, len + 33, L->marker, L->marker_len) > 0)
			s3d_list_add(L, e, len + 33, false, &ob);
		return;
	}
	if (s3d_name_cmp(name, len, L->marker, L->marker_len) > 0)
		s3d_list_add(L, name, len, false, &ob);
}

/* A window of up to n header reads charged to --max-memory, what each
 * may hold in the store while in flight (KVT_PART_QUIET_MEM: "Header
 * reads"): as many as fit, halving from n down to 1, given back when the
 * window is back (s3d_list_win_back, from s3d_step) or with the request
 * (rq->mem_charged).  0: not even one fits, the request answered 503
 * SlowDown. */
static uint32_t s3d_list_win(struct s3d_req *rq, uint32_t n)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_list *L = rq->list;

	for (; n > 0; n /= 2)
		if (kvtd_mem_charge(srv, (uint64_t)n * KVT_PART_QUIET_MEM, false))
			break;
	if (n == 0) {
		s3d_fail(rq, 503, "SlowDown", "server memory limit reached (--max-memory); "
			 "retry later.");
		return 0;
	}
	L->win_charged = (uint64_t)n * KVT_PART_QUIET_MEM;
	rq->mem_charged += L->win_charged;
	atomic_fetch_add_explicit(&srv->s3.hdr_charged, L->win_charged, memory_order_relaxed);
	return n;
}

/* A listing's window of header reads is back: its charge given back. */
static void s3d_list_win_back(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_list *L = rq->list;

	if (!L || !L->win_charged)
		return;
	kvtd_mem_uncharge(srv, L->win_charged);
	atomic_fetch_sub_explicit(&srv->s3.hdr_charged, L->win_charged, memory_order_relaxed);
	rq->mem_charged -= L->win_charged;
	L->win_charged = 0;
}

/* Reads of the headers of the page's next keys, S3D_LIST_WIN at a time,
 * part 0 of each into bufs ("Header reads"), the owner's and a grantee's
 * alike.  The window bounds what a listing holds in the library, and is
 * charged to --max-memory while in the store (s3d_list_win: 3.1 MiB, 8
 * MiB until KVT_PART_QUIET_MEM went from 64 KiB to 25 KiB on 2026-12-04,
 * or fewer reads when that does not fit); reads from DRAM complete inline,
 * windows and all.  Until 2026-12-04 the owner's were
 * plain part gets of the whole page at once, which promoted objects on
 * SSD only whole and missed when DRAM had no room (those keys read again
 * as a grantee's); a grantee's were quiet pinned gets, a whole private
 * copy each, 2 at a time, each taking a quiet slot and its copy charged
 * to --max-memory (a copy over it read again in a narrower window).
 * Returns false when the request was answered (rq may be freed). */
static bool s3d_list_read(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;
	uint32_t n = L->nkeys - L->win < S3D_LIST_WIN ? L->nkeys - L->win : S3D_LIST_WIN;
	struct s3d_item *it;

	if (n > 0 && (n = s3d_list_win(rq, n)) == 0) /* (an empty page: none) */
		return false;
	it = s3d_items(rq, n);
	if (!it) {
		s3d_list_win_back(rq);
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		s3d_item_init(rq, &it[i], KVT_OP_GET, &L->keys[L->win + i]);
		s3d_item_hdr(&it[i], L->bufs[i]);
	}
	L->win += n;
	s3d_submit(rq, PH_PROBE);
	return true;
}

static void s3d_list_step(struct s3d_req *rq);

/* A page of keys is back from the walk (s3d_list_collect takes it). */
static void s3d_list_scanned(struct s3d_req *rq, int64_t n)
{
	rq->list->scan_n = n;
	rq->list->scanned = true;
	s3d_list_step(rq);
}

/* The next page of the bucket's object keys (a walk on the aux thread),
 * then a read of each header. */
static bool s3d_list_page(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;

	s3d_scan(rq, &L->cursor, L->uploads ? 'u' : 'o', L->keys, S3D_LIST_PAGE,
		 s3d_list_scanned);
	return true;
}

/* A string of the answer, URL-encoded with encoding-type=url. */
static void s3d_list_str(struct s3d_req *rq, const char *s, size_t n)
{
	if (!rq->list->url) {
		s3d_xml_str(rq, s, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
		    ch == '/')
			s3d_text(rq, s + i, 1);
		else
			s3d_printf(rq, "%%%02X", ch);
	}
}

static void s3d_list_elem(struct s3d_req *rq, const char *tag, const char *s, size_t n)
{
	s3d_printf(rq, "<%s>", tag);
	s3d_list_str(rq, s, n);
	s3d_printf(rq, "</%s>", tag);
}

/* <tag>s</tag>, s XML-escaped (never URL-encoded). */
static void s3d_xml_elem(struct s3d_req *rq, const char *tag, const char *s, size_t n)
{
	s3d_printf(rq, "<%s>", tag);
	s3d_xml_str(rq, s, n);
	s3d_printf(rq, "</%s>", tag);
}

/* Who started an upload and owns it: the tenant. */
static void s3d_list_owner(struct s3d_req *rq)
{
	s3d_text(rq, "<Initiator><ID>", 15);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</ID></Initiator><Owner><ID>", 28);
	s3d_xml_str(rq, rq->tenant, rq->tenant_len);
	s3d_text(rq, "</ID></Owner>", 13);
}

/* A listing answer's end: the common prefixes among its first n entries,
 * the root element's end tag; sent. */
static void s3d_list_end(struct s3d_req *rq, uint32_t n, const char *root)
{
	struct s3d_list *L = rq->list;
	for (uint32_t i = 0; i < n; i++) {
		const struct s3d_lent *e = s3d_list_ent(L, i);
		if (e->is_prefix) {
			s3d_text(rq, "<CommonPrefixes>", 16);
			s3d_list_elem(rq, "Prefix", e->name, e->len);
			s3d_text(rq, "</CommonPrefixes>", 17);
		}
	}
	s3d_printf(rq, "</%s>\n", root);
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

static void s3d_list_uploads_answer(struct s3d_req *rq);

static void s3d_list_answer(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;
	if (L->uploads) {
		s3d_list_uploads_answer(rq);
		return;
	}
	bool v2 = rq->op == S3_LIST_V2;
	bool trunc = L->nent > L->max_keys;
	uint32_t n = trunc ? L->max_keys : L->nent;

	s3d_xml_begin(rq, "ListBucketResult");
	s3d_xml_elem(rq, "Name", rq->bucket, strlen(rq->bucket));
	s3d_list_elem(rq, "Prefix", L->prefix, L->prefix_len);
	if (L->delim_len)
		s3d_list_elem(rq, "Delimiter", L->delim, L->delim_len);
	if (v2) {
		if (L->start_len)
			s3d_list_elem(rq, "StartAfter", L->start, L->start_len);
		if (L->token_len) {
			s3d_text(rq, "<ContinuationToken>", 19);
			s3d_text(rq, L->token, L->token_len);
			s3d_text(rq, "</ContinuationToken>", 20);
		}
		s3d_printf(rq, "<KeyCount>%u</KeyCount>", n);
	} else {
		s3d_list_elem(rq, "Marker", L->start, L->start_len);
	}
	s3d_printf(rq, "<MaxKeys>%u</MaxKeys>", L->max_keys);
	if (L->url)
		s3d_text(rq, "<EncodingType>url</EncodingType>", 32);
	s3d_printf(rq, "<IsTruncated>%s</IsTruncated>", trunc ? "true" : "false");
	if (trunc && n) {
		const struct s3d_lent *e = s3d_list_ent(L, n - 1);
		if (v2) {
			char hex[2 * S3D_KEY_MAX + 1];
			sigv4_hex((const uint8_t *)e->name, e->len, hex);
			s3d_printf(rq, "<NextContinuationToken>%s</NextContinuationToken>", hex);
		} else {
			s3d_list_elem(rq, "NextMarker", e->name, e->len);
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct s3d_lent *e = s3d_list_ent(L, i);
		char etag[48], d[40];
		if (e->is_prefix)
			continue;
		s3d_etag(etag, sizeof(etag), e->crc, e->size, e->nparts);
		s3d_iso_date(d, sizeof(d), e->mtime_ms);
		s3d_text(rq, "<Contents>", 10);
		s3d_list_elem(rq, "Key", e->name, e->len);
		s3d_printf(rq, "<LastModified>%s</LastModified><ETag>", d);
		s3d_xml_str(rq, etag, strlen(etag));
		s3d_printf(rq, "</ETag><Size>%" PRIu64 "</Size><StorageClass>STANDARD</StorageClass>"
			   "</Contents>", e->size);
	}
	s3d_list_end(rq, n, "ListBucketResult");
}

/* ListMultipartUploads' answer: entries are (key, 0, id) or prefixes. */
static void s3d_list_uploads_answer(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;
	bool trunc = L->nent > L->max_keys;
	uint32_t n = trunc ? L->max_keys : L->nent;

	s3d_xml_begin(rq, "ListMultipartUploadsResult");
	s3d_xml_elem(rq, "Bucket", rq->bucket, strlen(rq->bucket));
	s3d_list_elem(rq, "KeyMarker", L->start, L->start_len);
	s3d_xml_elem(rq, "UploadIdMarker", L->upload_marker, strlen(L->upload_marker));
	if (trunc && n) {
		const struct s3d_lent *e = s3d_list_ent(L, n - 1);
		size_t kl = e->is_prefix ? e->len : e->len - 33;
		s3d_list_elem(rq, "NextKeyMarker", e->name, kl);
		s3d_text(rq, "<NextUploadIdMarker>", 20);
		if (!e->is_prefix)
			s3d_text(rq, e->name + kl + 1, 32);
		s3d_text(rq, "</NextUploadIdMarker>", 21);
	}
	s3d_list_elem(rq, "Prefix", L->prefix, L->prefix_len);
	if (L->delim_len)
		s3d_list_elem(rq, "Delimiter", L->delim, L->delim_len);
	s3d_printf(rq, "<MaxUploads>%u</MaxUploads>", L->max_keys);
	if (L->url)
		s3d_text(rq, "<EncodingType>url</EncodingType>", 32);
	s3d_printf(rq, "<IsTruncated>%s</IsTruncated>", trunc ? "true" : "false");
	for (uint32_t i = 0; i < n; i++) {
		const struct s3d_lent *e = s3d_list_ent(L, i);
		char d[40];
		if (e->is_prefix)
			continue;
		s3d_iso_date(d, sizeof(d), e->mtime_ms);
		s3d_text(rq, "<Upload>", 8);
		s3d_list_elem(rq, "Key", e->name, e->len - 33);
		s3d_text(rq, "<UploadId>", 10);
		s3d_text(rq, e->name + e->len - 32, 32);
		s3d_text(rq, "</UploadId>", 11);
		s3d_list_owner(rq);
		s3d_printf(rq, "<StorageClass>STANDARD</StorageClass>"
			   "<Initiated>%s</Initiated></Upload>", d);
	}
	s3d_list_end(rq, n, "ListMultipartUploadsResult");
}

static bool s3d_list_collect(struct s3d_req *rq);

/* The headers of a window are back: into the set, then the next window,
 * page, or the answer. */
static void s3d_list_step(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;

	/* Reads that complete inline come back here from within the submit
	 * below: note that and loop, rather than recurse once per window
	 * (a granted bucket of 10^5 objects has 25,000 of them). */
	if (L->stepping) {
		L->again = true;
		return;
	}
	L->stepping = true;
	do {
		L->again = false;
		if (!s3d_list_collect(rq))
			return; /* answered: rq may be gone */
	} while (L->again);
	L->stepping = false;
}

/* Note the headers back; go on (true: reads in flight or done inline,
 * see again) or answer (false). */
static bool s3d_list_collect(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;

	if (L->scanned) {
		L->scanned = false;
		if (L->scan_n < 0) {
			s3d_fail(rq, 503, "SlowDown", kvt_strerror((int)L->scan_n));
			return false;
		}
		L->last_page = L->scan_n < S3D_LIST_PAGE;
		L->nkeys = (uint32_t)L->scan_n;
		L->win = 0;
		return s3d_list_read(rq);
	}
	for (uint32_t i = 0; i < rq->n; i++) {
		const struct kvt_req *r = &rq->items[i].req;
		int st = s3d_read_status(r->status);
		/* a miss: deleted meanwhile, or not an object we can read (a
		 * quiet part get needs no DRAM room: it does not miss for
		 * lack of it); an error: the page would leave out an object
		 * that is there (s3d_read_status) */
		if (st < 0) {
			s3d_store_fail(rq, st);
			return false;
		}
		if (st == 0)
			s3d_list_note(L, L->bufs[i], r->length, r->value_len);
	}
	if (L->win < L->nkeys)
		return s3d_list_read(rq);
	if (!L->last_page)
		return s3d_list_page(rq);
	s3d_list_answer(rq);
	return false;
}


/* ---- ListParts ------------------------------------------------------------
 *
 * An upload's parts are blocks 'p' + SHA-256(uploadId "/" n), which no
 * index groups by upload; but part numbers are 1..10000, so ListParts
 * probes them in order, S3D_PARTS_WIN at a time (part 0 of each: "Header
 * reads"), from part-number-marker + 1 until max-parts + 1 parts are
 * found.  The first window also reads the upload's marker (its part 0,
 * all of it), which must be this key's.  A miss is an index lookup, run
 * on the loop (the DRAM index answers inline), with a SHA-256 to make its
 * key: the whole range cost 28 ms of the loop under ASan, in one go, and
 * one connection's two pipelined ListParts of an empty upload held
 * another client's PING 171 ms (doc/security.md `s3_scan`).  So a window is
 * S3D_PARTS_WIN part numbers, the next one goes in a later iteration of
 * the loop (other connections are served between), and a ListParts takes
 * one of its tenant's listing slots ("Walks of the store").
 */
#define S3D_PART_NO_MAX 10000
#define S3D_PARTS_WIN 256

static int64_t s3d_query_uint(const struct s3d_req *rq, const char *name, uint64_t dflt)
{
	char num[16];
	int64_t l = s3d_query(rq, name, num, sizeof(num) - 1);
	uint64_t v = 0;
	if (l == -1)
		return (int64_t)dflt;
	if (l <= 0 || l > 9)
		return -1;
	for (int64_t i = 0; i < l; i++) {
		if (num[i] < '0' || num[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(num[i] - '0');
	}
	return (int64_t)v;
}

static void s3d_list_parts_probe(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;
	uint32_t extra = L->upload_ok ? 0 : 1, count = S3D_PART_NO_MAX - L->part_next + 1, win;
	struct s3d_item *it;
	struct kvt_key k;

	if (count > S3D_PARTS_WIN)
		count = S3D_PARTS_WIN;
	if ((win = s3d_list_win(rq, count + extra)) == 0)
		return;
	count = win - extra; /* (0: the marker alone this time) */
	it = s3d_items(rq, count + extra);
	if (!it) {
		s3d_list_win_back(rq);
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	if (extra) {
		s3d_upload_key(&k, rq);
		s3d_item_init(rq, &it[0], KVT_OP_GET, &k);
		s3d_item_hdr(&it[0], rq->hdrbuf);
	}
	for (uint32_t i = 0; i < count; i++) {
		struct s3d_item *p = &it[extra + i];
		s3d_part_key(&k, rq->upload_id, L->part_next + i);
		s3d_item_init(rq, p, KVT_OP_GET, &k);
		p->part_no = L->part_next + i;
		s3d_item_hdr(p, L->bufs[i]);
	}
	L->part_next += count;
	s3d_submit(rq, PH_PROBE);
}

static void s3d_nothing(void *arg)
{
	(void)arg;
}

static void s3d_list_parts_next(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_list_parts_probe(arg);
}

static void s3d_list_parts_start(struct s3d_req *rq)
{
	int64_t max = s3d_query_uint(rq, "max-parts", S3D_LIST_MAXKEYS);
	int64_t marker = s3d_query_uint(rq, "part-number-marker", 0);
	struct s3d_list *L;

	if (max < 0 || marker < 0) {
		s3d_fail(rq, 400, "InvalidArgument", "max-parts and part-number-marker must be "
			 "non-negative integers");
		return;
	}
	if (max > S3D_LIST_MAXKEYS)
		max = S3D_LIST_MAXKEYS;
	if (!s3d_scan_acquire(rq) || !(L = s3d_list_alloc(rq, (uint32_t)max)))
		return;
	L->part_marker = marker > S3D_PART_NO_MAX ? S3D_PART_NO_MAX : (uint32_t)marker;
	L->part_next = L->part_marker + 1;
	s3d_list_parts_probe(rq);
}

/*
 * Sweeps: an Abort's and a Complete's of the upload's part numbers.
 *
 * AbortMultipartUpload, its marker read: every part number, 1..10000, a
 * window of S3D_PARTS_WIN each loop iteration (in the walk slot s3d_run
 * took), is looked for with KVT_OP_EXISTS, and each present is deleted;
 * then the marker goes and the answer is 204.  CompleteMultipartUpload,
 * its object committed, sweeps the part numbers it did not list the same
 * way, up to its last listed one and a window past it (a retried part's
 * number, a last one left out), as S3 deletes them -- left, they were
 * reachable by no request (redhttp: parts 2 and 3 of 4 MiB after a
 * Complete of part 1, 8 MiB of DRAM held); an Abort ends the rest.  Best
 * effort: with no walk slot of its tenant free, or no memory, they stay
 * (the Complete is not refused for it).  A part number whose presence
 * failed is deleted anyway, and a delete that failed is counted and
 * logged at the answer, the sweep going on; the answer is 200: the
 * object is committed, its listed parts and its marker deleted, so a 503
 * would be retried into 404 NoSuchUpload for a completed upload (until
 * s3f48, 2026-12-07, such a part was skipped, left where no request
 * reaches it: test_s3_podfail 4; doc/s3.md).
 *
 * Presence is the store's index, not the value: KVT_OP_EXISTS is DRAM's
 * index, then the SSD's (tier find: no I/O), then the tiers below, asked
 * (a remote tier: an EXISTS to the pod; kvtier.h has no peek of the
 * local indexes alone).  Its answers are OK or MISS -- never an error a
 * read makes -- or, asked with KVT_F_ERRORS (s3d_item_init), a tier's
 * failure where no tier had the key (a pod that timed out or refused: an
 * Abort's 503, the marker kept; until s3e47, 2026-12-07, a miss, the
 * part skipped and left in the pod: test_s3_podfail), and a delete
 * reaches every tier (the pod's copy too: store_del_walk).  Until s3x46
 * (2026-12-07) a sweep read each part's header quietly: an SSD I/O
 * error or no memory in the SSD tier was a miss there (doc/ssd.md
 * "Reads: one part, quietly"), the part skipped
 * and left, and the remote and shared tiers were not asked, so an Abort
 * on a node with remote.put_local=never left every part in the pod
 * (test_s3_remote: an Abort of 2 parts took the pod's blocks -1, the
 * marker alone; -3 now).
 *
 * The deletes of a window are waited for (PH_SWEEP_DEL) before the next:
 * an Abort's that fails (a tier's refusal, no memory: s3d_delete_outcome)
 * is its answer, as a presence that fails (the store closing) is 503,
 * the marker kept, so that the client's retry finishes the job (until
 * s3b45, 2026-12-07, the marker went first and such a part was skipped:
 * 204, the part reachable by no request, and the retry 404 NoSuchUpload;
 * test_hostile_http s3_abort_retry, its failure made with
 * KVTD_TEST_S3_SWEEP_FAIL).  Once the marker is gone the part numbers are
 * swept once more: an UploadPart on another connection reads the marker
 * until its delete, and one that did so during the first sweep landed
 * behind it, 200 and a part left (review45f, 2026-12-07; test_hostile_http
 * s3_abort_race).  A part whose UploadPart read the marker just before
 * its delete may still land after the second sweep passed its number (S3
 * says the same: abort again); a failure in the second sweep is 503 with
 * the marker gone (the retry 404).
 *
 * An Abort holds its upload's entry in srv->s3.gate (S3D_GATE_ABORT: a
 * hash of the namespace and the upload id) from its marker's check until
 * it is answered: a Complete that finds it held is 404 NoSuchUpload, as
 * S3 answers a Complete of an upload being aborted, and so is one that
 * misses a part it lists and then misses the marker too (PH_RECHECK: an
 * Abort on another loop, or another node, done meanwhile).  Until s3x46
 * (2026-12-07) it was 400 InvalidPart, the parts being deleted under it
 * (test_hostile_http s3_complete_abort).
 */
#define S3D_GATE_ABORT 3u

static uintptr_t s3d_abort_key(const struct s3d_req *rq)
{
	struct kvt_key k;
	uint64_t h;

	s3d_upload_key(&k, rq);
	memcpy(&h, k.bytes + 1, sizeof(h));
	return (uintptr_t)((h ^ rq->ns) << 2 | S3D_GATE_ABORT);
}

/* Is an Abort of rq's upload in progress on this kvtierd? */
static bool s3d_aborting(const struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	uintptr_t at = s3d_abort_key(rq);
	bool held;

	pthread_mutex_lock(&srv->s3.gate_lock);
	held = kvtd_pinset_refs(&srv->s3.gate, at) != 0;
	pthread_mutex_unlock(&srv->s3.gate_lock);
	return held;
}

static void s3d_sweep_window(struct s3d_req *rq);
static void s3d_abort_delete(struct s3d_req *rq);
static void s3d_abort_answer(struct s3d_req *rq);

/* Sweep part numbers from..to (rq holds a walk slot). */
static void s3d_sweep_start(struct s3d_req *rq, uint32_t from, uint32_t to)
{
	rq->sweep_next = from;
	rq->sweep_end = to > S3D_PART_NO_MAX ? S3D_PART_NO_MAX : to;
	s3d_sweep_window(rq);
}

/* A sweep cut short (no memory, a failure, the server stopping): an
 * Abort's answer is st's; a Complete's object is there, answered. */
static void s3d_sweep_fail(struct s3d_req *rq, int st)
{
	if (rq->op == S3_MPU_COMPLETE)
		s3d_complete_answer(rq);
	else
		s3d_store_fail(rq, st);
}

static void s3d_sweep_window(struct s3d_req *rq)
{
	uint32_t count = rq->sweep_end - rq->sweep_next + 1;
	struct s3d_item *it;
	struct kvt_key k;

	if (count > S3D_PARTS_WIN)
		count = S3D_PARTS_WIN;
	if (!(it = s3d_items(rq, count))) {
		s3d_sweep_fail(rq, -ENOMEM);
		return;
	}
	for (uint32_t i = 0; i < count; i++) {
		s3d_part_key(&k, rq->upload_id, rq->sweep_next + i);
		s3d_item_init(rq, &it[i], KVT_OP_EXISTS, &k);
		it[i].part_no = rq->sweep_next + i;
	}
	rq->sweep_next += count;
	s3d_submit(rq, PH_SWEEP);
}

static void s3d_sweep_next(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_sweep_window(arg);
}

/* KVTD_TEST_S3_SWEEP_PAUSE_MS (a test's), on the aux thread. */
static void s3d_sweep_pause(void *arg)
{
	const struct s3d_req *rq = arg;
	uint32_t ms = rq->conn->loop->srv->s3.test_sweep_pause_ms;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A window swept: the next in a later iteration of the loop, or what
 * follows the sweep. */
static void s3d_sweep_on(struct s3d_req *rq)
{
	struct kvtd_loop *loop = rq->conn->loop;
	bool pause = rq->op == S3_MPU_ABORT && !rq->swept_again &&
		     rq->sweep_next == 1 + S3D_PARTS_WIN && loop->srv->s3.test_sweep_pause_ms;

	if (rq->sweep_next <= rq->sweep_end) {
		/* through the aux thread's mailbox, which does nothing with
		 * it (not once the server stops: the aux thread may be gone) */
		if (loop->stopping)
			s3d_sweep_fail(rq, KVT_ECLOSED);
		else
			kvtd_aux_submit(loop, rq->in_tstat, pause ? s3d_sweep_pause : s3d_nothing,
					s3d_sweep_next, rq);
		return;
	}
	if (rq->op == S3_MPU_COMPLETE) {
		s3d_complete_answer(rq);
	} else if (!rq->swept_again) {
		s3d_abort_delete(rq);
	} else {
		s3d_abort_answer(rq);
	}
}

static int s3d_delete_outcome(int st, const char **code, const char **msg);
static bool s3d_durable(struct s3d_req *rq);

/* An Abort's parts and marker deleted, swept twice: 204 once those
 * deletes are durable (s3d_durable; PH_DURABLE comes back here), as a
 * DeleteObject's.  Until s3e47 (2026-12-07) the 204 came with the deletes
 * applied, their tombstones possibly still queued behind the SSD's
 * write-downs: a kill -9 right after it brought the upload back, marker
 * and parts (test_s3_park 7). */
static void s3d_abort_answer(struct s3d_req *rq)
{
	if (s3d_durable(rq))
		return;
	rq->tlen = 0;
	s3d_answer(rq, 204, NULL, 0, false);
	s3d_finish(rq);
}

/* A window's presences (PH_SWEEP) or its deletes (PH_SWEEP_DEL) are
 * back: the present ones deleted, then on. */
static void s3d_sweep_step(struct s3d_req *rq)
{
	uint32_t found[S3D_PARTS_WIN], nf = 0;
	struct s3d_item *it = rq->items;
	struct kvt_key k;

	if (rq->phase == PH_SWEEP_DEL) {
		for (uint32_t i = 0; i < rq->n; i++) {
			const char *code, *msg;
			int http = s3d_delete_outcome(it[i].req.status, &code, &msg);
			if (http && rq->op == S3_MPU_COMPLETE) {
				rq->sweep_left++; /* on with the rest: reported */
			} else if (http) { /* the part may still be there: the marker kept */
				s3d_fail(rq, http, code, msg);
				return;
			}
		}
		s3d_sweep_on(rq);
		return;
	}
	for (uint32_t i = 0; i < rq->n; i++) {
		int st = s3d_read_status(it[i].req.status);
		if (rq->sweep_fail && it[i].part_no == rq->sweep_fail)
			st = -ENOMEM; /* (a test's: s3d_abort_marker, s3d_complete_sweep) */
		if (st < 0 && rq->op == S3_MPU_ABORT) {
			s3d_store_fail(rq, st);
			return;
		}
		if (st < 0) /* a Complete's: not known, deleted as if there */
			rq->sweep_unsure++;
		if (st <= 0)
			found[nf++] = it[i].part_no;
	}
	if (nf == 0) {
		s3d_sweep_on(rq);
		return;
	}
	if (!(it = s3d_items(rq, nf))) {
		s3d_sweep_fail(rq, -ENOMEM);
		return;
	}
	for (uint32_t i = 0; i < nf; i++) {
		s3d_part_key(&k, rq->upload_id, found[i]);
		s3d_item_init(rq, &it[i], KVT_OP_DELETE, &k);
		it[i].part_no = found[i];
	}
	s3d_submit(rq, PH_SWEEP_DEL);
}

/*
 * AbortMultipartUpload, its marker read (pinned, as Complete reads it):
 * the upload must be the request's key's, else NoSuchUpload, as S3 and
 * as ListParts and Complete answer; then its entry is held ("Sweeps"),
 * the parts are swept and the marker deleted.  The marker was deleted
 * by id alone: DELETE /b/other?uploadId=U aborted the upload U started
 * for /b/mine (red44b, 2026-12-07; test_hostile_http s3_op_params).
 */
static void s3d_abort_marker(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_obj ob;
	uintptr_t at = s3d_abort_key(rq);
	int r = s3d_obj_found(&rq->items[0].req, rq->key, rq->key_len, &ob);

	if (r != 0) { /* a failed read: the upload may well be there, retry */
		s3d_upload_fail(rq, r);
		return;
	}
	pthread_mutex_lock(&srv->s3.gate_lock);
	if (kvtd_pinset_hold(&srv->s3.gate, at, 0) >= 0)
		rq->abort_at = at; /* (without memory: Completes are not told) */
	pthread_mutex_unlock(&srv->s3.gate_lock);
	/* KVTD_TEST_S3_SWEEP_FAIL (kvtd_s3_init): a test's */
	if (srv->s3.test_sweep_fail_part &&
	    (srv->s3.test_sweep_fail_aborts == 0 ||
	     atomic_fetch_add(&srv->s3.test_sweeps_failed, 1) < srv->s3.test_sweep_fail_aborts))
		rq->sweep_fail = srv->s3.test_sweep_fail_part;
	s3d_sweep_start(rq, 1, S3D_PART_NO_MAX);
}

/* Its parts swept, every presence and delete answered: the marker goes
 * (s3d_step then sweeps again, and answers 204). */
static void s3d_abort_delete(struct s3d_req *rq)
{
	if (s3d_item_one(rq, KVT_OP_DELETE, 'u'))
		s3d_submit(rq, PH_WRITE);
}

/* CompleteMultipartUpload, its object committed: the parts it did not
 * list ("Sweeps"; the listed ones are deleted already), up to its last
 * listed part and one window past it.  false: not begun (no walk slot
 * of its tenant free), answer now. */
static bool s3d_complete_sweep(struct s3d_req *rq)
{
	if (!s3d_scan_try(rq))
		return false;
	rq->sweep_fail = rq->conn->loop->srv->s3.test_complete_fail_part; /* (a test's) */
	s3d_sweep_start(rq, 1, rq->items[rq->n - 1].part_no + S3D_PARTS_WIN - 1);
	return true;
}

/* A window of parts is back: keep them; probe on, or answer. */
static void s3d_list_parts_answer(struct s3d_req *rq)
{
	struct s3d_list *L = rq->list;
	uint32_t base = 0, n;
	struct s3d_obj ob;
	bool trunc;

	if (!L->upload_ok) {
		int r = s3d_obj_found(&rq->items[0].req, rq->key, rq->key_len, &ob);
		if (r != 0) {
			s3d_upload_fail(rq, r);
			return;
		}
		L->upload_ok = true;
		base = 1;
	}
	for (uint32_t i = base; i < rq->n && L->nent < L->cap; i++) {
		struct kvt_req *r = &rq->items[i].req;
		char pname[64];
		int pl = snprintf(pname, sizeof(pname), "%s/%u", rq->upload_id, rq->items[i].part_no);
		const char *name;
		int st = s3d_read_status(r->status);
		if (st < 0) { /* a part that is there would be left out */
			s3d_store_fail(rq, st);
			return;
		}
		if (st != 0 ||
		    !(name = s3d_hdr_parse(L->bufs[i - base], r->length, r->value_len, &ob)) ||
		    ob.name_len != (uint32_t)pl || memcmp(name, pname, (size_t)pl) != 0)
			continue;
		struct s3d_lent *e = &L->ent[L->nent++];
		*e = (struct s3d_lent){ .nparts = 0 };
		e->len = rq->items[i].part_no; /* the part number */
		e->size = ob.len;
		e->mtime_ms = ob.mtime_ms;
		e->crc = ob.crc;
	}
	if (L->nent < L->cap && L->part_next <= S3D_PART_NO_MAX) {
		/* the next window in a later iteration of the loop: through
		 * the aux thread's mailbox, which does nothing with it (not
		 * once the server stops: the aux thread may be gone) */
		if (rq->conn->loop->stopping)
			s3d_fail(rq, 503, "SlowDown", "server stopping");
		else
			kvtd_aux_submit(rq->conn->loop, rq->in_tstat, s3d_nothing,
					s3d_list_parts_next, rq);
		return;
	}
	trunc = L->nent > L->max_keys;
	n = trunc ? L->max_keys : L->nent;
	s3d_xml_upload_head(rq, "ListPartsResult");
	s3d_printf(rq, "<UploadId>%s</UploadId><PartNumberMarker>%u</PartNumberMarker>",
		   rq->upload_id, L->part_marker);
	if (trunc && n)
		s3d_printf(rq, "<NextPartNumberMarker>%u</NextPartNumberMarker>", L->ent[n - 1].len);
	s3d_printf(rq, "<MaxParts>%u</MaxParts><IsTruncated>%s</IsTruncated>", L->max_keys,
		   trunc ? "true" : "false");
	for (uint32_t i = 0; i < n; i++) {
		const struct s3d_lent *e = &L->ent[i];
		char etag[48], d[40];
		s3d_etag(etag, sizeof(etag), e->crc, e->size, 0);
		s3d_iso_date(d, sizeof(d), e->mtime_ms);
		s3d_printf(rq, "<Part><PartNumber>%u</PartNumber><LastModified>%s</LastModified>"
			   "<ETag>", e->len, d);
		s3d_xml_str(rq, etag, strlen(etag));
		s3d_printf(rq, "</ETag><Size>%" PRIu64 "</Size></Part>", e->size);
	}
	s3d_list_owner(rq);
	s3d_text(rq, "<StorageClass>STANDARD</StorageClass></ListPartsResult>\n", 56);
	s3d_xml_answer(rq, 200);
	s3d_finish(rq);
}

/* DeleteBucket: the walk for an object is back (n of them, or an error).
 * Parts of unfinished uploads (and a marker an older kvtierd wrote) go
 * with the clear. */
static void s3d_delete_bucket_scanned(struct s3d_req *rq, int64_t left)
{
	struct s3d_item *it;

	if (left != 0) {
		if (left > 0)
			s3d_fail(rq, 409, "BucketNotEmpty", "The bucket you tried to delete is "
				 "not empty");
		else
			s3d_fail(rq, 503, "SlowDown", kvt_strerror((int)left));
		return;
	}
	it = s3d_items(rq, 1);
	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_item_init(rq, it, KVT_OP_CLEAR, NULL);
	it->req.flags = KVT_F_DEFER;
	s3d_submit(rq, PH_WRITE);
}

/*
 * A Complete missing a part it lists: 400 InvalidPart if its upload is
 * still there, 404 NoSuchUpload if an Abort took it meanwhile -- one
 * in progress here, or its marker gone when looked for again
 * (KVT_OP_EXISTS, PH_RECHECK: an Abort on another loop or node done
 * since the Complete read it; "Sweeps").  Called at the miss, then when
 * the marker's presence is back.
 */
static void s3d_complete_recheck(struct s3d_req *rq)
{
	int st = 0;

	if (rq->phase == PH_RECHECK)
		st = s3d_read_status(rq->items[0].req.status);
	if (st == KVT_MISS || s3d_aborting(rq)) {
		s3d_upload_fail(rq, KVT_MISS);
		return;
	}
	if (st < 0) {
		s3d_store_fail(rq, st);
		return;
	}
	if (rq->phase == PH_RECHECK) {
		s3d_fail(rq, 400, "InvalidPart", "One or more of the specified parts could not be "
			 "found.");
		return;
	}
	if (s3d_item_one(rq, KVT_OP_EXISTS, 'u')) /* (the parts read unpinned) */
		s3d_submit(rq, PH_RECHECK);
}

/* ---- the step after each phase ---------------------------------------- */

/* Complete, Copy, UploadPartCopy: the phases of their assembly (the
 * object's DELETE + PUT back, a replaced object's DELETE back).  false:
 * another phase. */
static bool s3d_assembly_step(struct s3d_req *rq)
{
	if (rq->phase == PH_WRITE)
		s3d_assemble_written(rq);
	else if (rq->phase == PH_ASSEMBLE_DEL)
		s3d_assemble(rq);
	else
		return false;
	return true;
}

/*
 * Deletes that stay deleted (doc/kvtierd.md "Durability of deletes"): a
 * DeleteObject or DeleteObjects that removed something is answered once
 * its tombstones are durable, as a native DELETE is (a DeleteBucket: its
 * clear, before the bucket goes; an Abort: its parts' and its marker's
 * deletes, s3d_abort_answer) -- a KVT_OP_FLUSH
 * with KVT_F_DELETES behind the deletes.  Until 2026-12-04 the 204 came at once, and a
 * kill -9 right after it brought the object back (test_s3_park 5).
 * true: the flush is under way (s3d_step comes back in PH_DURABLE) or the
 * request was failed; false: answer now.
 */
static bool s3d_durable(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	bool removed = false;
	struct kvt_req *r;

	if (rq->phase == PH_DURABLE) {
		int st = rq->flush_item ? rq->flush_item->req.status : -EIO;
		if (st >= 0)
			return false;
		if (rq->op == S3_DELETE_MANY) { /* each key's entry says it */
			rq->durable_status = st;
			return false;
		}
		s3d_fail(rq, 503, "SlowDown", "the delete could not be made durable");
		return true;
	}
	if (!srv->cfg.ssd_bytes)
		return false;
	/* (an Abort's deletes were its windows' and its marker's: the marker
	 * at least was there, read at its start) */
	removed = rq->op == S3_MPU_ABORT;
	for (uint32_t i = 0; i < rq->n && !removed; i++)
		removed = rq->items[i].req.status == KVT_OK;
	if (!removed)
		return false;
	free(rq->flush_item);
	rq->flush_item = calloc(1, sizeof(*rq->flush_item));
	if (!rq->flush_item) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return true;
	}
	s3d_item_init(rq, rq->flush_item, KVT_OP_FLUSH, NULL);
	rq->flush_item->req.flags = KVT_F_DELETES;
	rq->phase = PH_DURABLE;
	rq->pending = 1;
	r = &rq->flush_item->req;
	if (kvt_submit(rq->conn->loop->q, &r, 1) != 1) {
		rq->pending = 0;
		s3d_fail(rq, 503, "SlowDown", "the delete could not be made durable");
	}
	return true;
}

/*
 * A delete's outcome as S3 says it: 0 if done -- removed, or nothing was
 * there (S3's deletes are idempotent: a key that does not exist is
 * deleted) -- else its HTTP status, *code and *msg.  st: the
 * KVT_OP_DELETE's status, or the flush's behind it (s3d_durable) where
 * that failed and this delete removed something.  A tier's error
 * (kvtier.h: the shared tier's unlink or S3 DELETE refused, a remote
 * tier that did not answer; the SSD's tombstone not written) means the
 * object may still be there, or come back after a restart: never
 * "deleted".  Until 2026-12-06 DeleteObject answered 204 and DeleteObjects
 * <Deleted> whatever the delete's status (s3left: test_hostile_http
 * s3_delete_errors).
 */
static int s3d_delete_outcome(int st, const char **code, const char **msg)
{
	if (st >= 0)
		return 0;
	*msg = kvt_strerror(st);
	switch (st) {
	case KVT_ENONS:
		*code = "NoSuchBucket";
		*msg = "The specified bucket does not exist";
		return 404;
	case KVT_EKEYLEN:
		*code = "KeyTooLongError";
		*msg = "Your key is too long";
		return 400;
	case -ENOMEM:
	case -ECANCELED:
	case KVT_ECLOSED:
	case KVT_EFULL:
		*code = "SlowDown";
		return 503;
	default:
		*code = "InternalError";
		return 500;
	}
}

/*
 * A CompleteMultipartUpload's parts stay pinned from its probe until it
 * is assembled: while it waits for its work turn ("Work on the loop") and
 * for write-down room (two parks of ssd.writedown_wait_ms), up to 1,023
 * parts of 5 MiB or more; a CopyObject's or UploadPartCopy's source the
 * same.  They were outside the pin caps ("Pinned answers", s3reply.c):
 * one tenant's concurrent Completes pinned as much of the DRAM tier as
 * their parts, and another tenant's PUTs found everything evictable
 * pinned (s3left, 2026-12-06; test_hostile_http s3_complete_pins); its
 * copies of many distinct sources the same (s3_copy_pins).  Now they
 * count against the caps, each value once a connection and once a
 * tenant (s3reply.c "Pins of requests in progress"), and a request they
 * would take past them is refused 503 SlowDown, its pins let go (a
 * Complete's upload kept: a retry completes it).  true: counted, go on.
 */
static bool s3d_work_pins(struct s3d_req *rq)
{
	const char *why;

	if (s3d_pins_take(rq, rq->items, rq->n, &why))
		return true;
	s3d_fail(rq, 503, "SlowDown", why);
	return false;
}

static void s3d_step(struct s3d_req *rq)
{
	struct s3d_item *it = rq->items;

	s3d_list_win_back(rq);
	if (rq->copy_refused) {
		rq->copy_refused = false;
		s3d_fail(rq, 503, "SlowDown", "Copies of another tenant's objects on SSD being "
			 "sent hold kvtierd's memory share; read them, or retry later.");
		return;
	}
	switch (rq->op) {
	case S3_LIST_V1:
	case S3_LIST_V2:
	case S3_LIST_UPLOADS:
		s3d_list_step(rq);
		return;
	case S3_HEAD:
		if (!s3d_hdr_retry(rq) && !s3d_miss_check(rq))
			s3d_get_answer(rq);
		return;
	case S3_GET:
		if (!s3d_miss_check(rq))
			s3d_get_answer(rq);
		return;
	case S3_PUT:
	case S3_MPU_PART:
		if (rq->phase == PH_RECHECK || rq->phase == PH_PART_DEL) {
			s3d_put_ok(rq); /* UploadPart's marker once more */
			return;
		}
		/* PH_WRITE: items are DELETE, PUT */
		if (rq->n == 2 && it[1].req.status < 0 && it[1].req.status != -ECANCELED) {
			int st = it[1].req.status;
			if (st == KVT_ETOOBIG || st == KVT_EBADLEN)
				s3d_fail(rq, 400, "EntityTooLarge", "The object is larger than "
					 "kvtierd's largest value");
			else
				s3d_fail(rq, 503, "SlowDown", kvt_strerror(st));
			return;
		}
		s3d_put_ok(rq);
		return;
	case S3_DELETE: {
		const char *code, *msg;
		int http = s3d_delete_outcome(it[0].req.status, &code, &msg);
		s3d_unhold(rq); /* applied: the requests behind it go on */
		if (http) {
			s3d_fail(rq, http, code, msg);
			return;
		}
		if (s3d_durable(rq))
			return;
		rq->tlen = 0;
		s3d_answer(rq, 204, NULL, 0, false);
		s3d_finish(rq);
		return;
	}
	case S3_DELETE_BUCKET: {
		/* PH_WRITE: the namespace is cleared, durably (s3d_durable:
		 * its CLEAR record synced, as a DeleteObject's tombstone); then
		 * the bucket goes (a failure leaves it, empty: the DeleteBucket
		 * may be retried).  Until 2026-12-06 the word went to 0 with
		 * the clear not yet durable: a crash then brought the objects
		 * back into a bucket created again, and a marker of a bucket
		 * an older kvtierd made brought the bucket itself back
		 * (kvtd_s3_buckets_migrate; review39). */
		uint64_t w = 0;
		if (it[0].req.status < 0) {
			s3d_fail(rq, 500, "InternalError", kvt_strerror(it[0].req.status));
			return;
		}
		if (s3d_durable(rq))
			return;
		if (kvt_ns_word(rq->conn->loop->srv->store, rq->ns, &w) != 0 || !w)
			s3d_delete_bucket_set(rq, KVT_EXISTS); /* deleted meanwhile */
		else
			s3d_set_word(rq, w, 0, s3d_delete_bucket_set);
		return;
	}
	case S3_DELETE_MANY: {
		/* items: the deletes, in the order of the request's keys (rq->buf
		 * holds the keys, NUL-separated) */
		bool quiet = rq->cond_none_match; /* reused: <Quiet>true</Quiet> */
		const char *kp = (const char *)rq->buf;
		s3d_unhold(rq);
		if (s3d_durable(rq))
			return;
		s3d_xml_begin(rq, "DeleteResult");
		for (uint32_t i = 0; i < rq->n; i++) {
			size_t kl = strlen(kp);
			int st = it[i].req.status;
			const char *code, *msg;
			if (st == KVT_OK && rq->durable_status < 0)
				st = rq->durable_status; /* removed, not durably */
			if (s3d_delete_outcome(st, &code, &msg)) {
				s3d_text(rq, "<Error><Key>", 12);
				s3d_xml_str(rq, kp, kl);
				s3d_text(rq, "</Key><Code>", 12);
				s3d_text(rq, code, strlen(code));
				s3d_text(rq, "</Code><Message>", 16);
				s3d_xml_str(rq, msg, strlen(msg));
				s3d_text(rq, "</Message></Error>", 18);
			} else if (!quiet) {
				s3d_text(rq, "<Deleted><Key>", 14);
				s3d_xml_str(rq, kp, kl);
				s3d_text(rq, "</Key></Deleted>", 16);
			}
			kp += kl + 1;
		}
		s3d_text(rq, "</DeleteResult>\n", 16);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	}
	case S3_LIST_PARTS:
		if (!s3d_parts_ask(rq) && !s3d_miss_check(rq))
			s3d_list_parts_answer(rq);
		return;
	case S3_MPU_PART_COPY:
	case S3_COPY: {
		struct s3d_obj ob;
		int r;
		if (rq->phase == PH_RECHECK || rq->phase == PH_PART_DEL) {
			s3d_complete_answer(rq); /* UploadPartCopy's marker once more */
			return;
		}
		if (s3d_assembly_step(rq))
			return;
		/* UploadPartCopy: items[1], its upload's marker, the key's
		 * (s3d_upload_item; a quiet miss asked again below) */
		if ((rq->op == S3_MPU_PART_COPY && s3d_hdr_retry(rq)) || s3d_miss_check(rq))
			return;
		if (rq->op == S3_MPU_PART_COPY && (r = s3d_upload_found(rq, &it[1].req)) != 0) {
			s3d_upload_fail(rq, r);
			return;
		}
		/* items[0]: the source, whose name is in rq->buf */
		if ((r = s3d_obj_found(&it[0].req, rq->buf, (size_t)rq->buf_len, &ob)) != 0) {
			if (r == KVT_MISS)
				s3d_fail(rq, 404, "NoSuchKey", "The specified source key does not "
					 "exist.");
			else
				s3d_store_fail(rq, r);
			return;
		}
		if (rq->op == S3_MPU_PART_COPY) {
			if (!rq->copy_range) {
				rq->copy_first = 0;
				rq->copy_last = ob.len - 1;
			}
			if (ob.len == 0 || rq->copy_last >= ob.len) {
				s3d_fail(rq, 400, "InvalidRange", "The x-amz-copy-source-range is "
					 "not within the source object's size");
				return;
			}
			ob.ctype[0] = 0; /* a part's header has the upload's, not the source's */
		}
		snprintf(rq->ctype, sizeof(rq->ctype), "%s", ob.ctype);
		if (s3d_work_pins(rq))
			s3d_assemble(rq);
		return;
	}
	case S3_MPU_CREATE:
		if (it[0].req.status < 0) {
			s3d_fail(rq, 503, "SlowDown", kvt_strerror(it[0].req.status));
			return;
		}
		s3d_xml_upload_head(rq, "InitiateMultipartUploadResult");
		s3d_printf(rq, "<UploadId>%s</UploadId></InitiateMultipartUploadResult>\n",
			   rq->upload_id);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	case S3_MPU_ABORT:
		/* PH_PROBE: its marker; PH_SWEEP(_DEL): windows of its parts'
		 * sweep; PH_WRITE: the marker's delete, then the sweep once
		 * more ("Sweeps") */
		if (rq->phase == PH_SWEEP || rq->phase == PH_SWEEP_DEL) {
			s3d_sweep_step(rq);
			return;
		}
		if (rq->phase == PH_PROBE) {
			if (!s3d_miss_check(rq))
				s3d_abort_marker(rq);
			return;
		}
		if (rq->phase == PH_DURABLE) { /* its deletes' flush is back */
			s3d_abort_answer(rq);
			return;
		}
		if (it[0].req.status == KVT_MISS) { /* (another Abort's meanwhile) */
			s3d_upload_fail(rq, KVT_MISS);
			return;
		}
		if (it[0].req.status < 0) { /* the marker's delete failed: as DeleteObject's */
			const char *code, *msg;
			int http = s3d_delete_outcome(it[0].req.status, &code, &msg);
			s3d_fail(rq, http, code, msg);
			return;
		}
		/* the parts once more: those whose UploadPart read the marker
		 * during the first sweep and landed behind it (review45f) */
		rq->swept_again = true;
		s3d_sweep_start(rq, 1, S3D_PART_NO_MAX);
		return;
	case S3_MPU_COMPLETE: {
		struct s3d_obj ob;
		if (rq->phase == PH_SWEEP || rq->phase == PH_SWEEP_DEL) {
			s3d_sweep_step(rq); /* a window of the unlisted parts' sweep */
			return;
		}
		if (rq->phase == PH_RECHECK) {
			s3d_complete_recheck(rq);
			return;
		}
		if (s3d_assembly_step(rq) || s3d_miss_check(rq))
			return;
		/* items[0]: the upload's marker (its name is the object key); an
		 * Abort of it in progress here is as if it were done ("Sweeps") */
		int r = s3d_obj_found(&it[0].req, rq->key, rq->key_len, &ob);
		if (r == 0 && s3d_aborting(rq))
			r = KVT_MISS;
		if (r != 0) {
			s3d_upload_fail(rq, r);
			return;
		}
		snprintf(rq->ctype, sizeof(rq->ctype), "%s", ob.ctype);
		for (uint32_t i = 1; i < rq->n; i++) {
			char name[64], etag[48];
			int nl = snprintf(name, sizeof(name), "%s/%u", rq->upload_id, it[i].part_no);
			if ((r = s3d_obj_found(&it[i].req, name, (size_t)nl, &ob)) != 0) {
				if (r == KVT_MISS)
					s3d_complete_recheck(rq); /* InvalidPart, or aborted */
				else
					s3d_store_fail(rq, r);
				return;
			}
			s3d_etag(etag, sizeof(etag), ob.crc, ob.len, 0);
			/* the ETag the client sent for it (quotes optional) */
			const char *es = it[i].etag_sent;
			size_t el = es ? strlen(es) : 0;
			if (el && es[0] != '"' && el + 2 == strlen(etag) &&
			    memcmp(es, etag + 1, el) == 0)
				el = 0;
			if (el && (el != strlen(etag) || memcmp(es, etag, el) != 0)) {
				s3d_fail(rq, 400, "InvalidPart", "A part's ETag does not match.");
				return;
			}
			if (i + 1 < rq->n && ob.len < (5u << 20)) {
				s3d_fail(rq, 400, "EntityTooSmall", "Your proposed upload is smaller "
					 "than the minimum allowed object size.");
				return;
			}
		}
		if (s3d_work_pins(rq))
			s3d_assemble(rq);
		return;
	}
	default:
		s3d_fail(rq, 500, "InternalError", "unexpected state");
	}
}

/* ------------------------------------------------------------------------
 * Request bodies in XML (CompleteMultipartUpload, DeleteObjects): a
 * scanner for the few elements read, not a general XML parser.  Entities
 * &amp; &lt; &gt; &quot; &apos; and numeric ones below 0x80 are decoded;
 * anything else in a value is refused (MalformedXML).
 */

/* The next <tag>value</tag> at or after *pos: value into out (decoded),
 * its length, or -1 (none), -2 (malformed). */
static int64_t s3d_xml_next(const char *x, size_t n, size_t *pos, const char *tag, char *out,
			    size_t cap)
{
	char open[40], close[40];
	int ol = snprintf(open, sizeof(open), "<%s>", tag);
	int cl = snprintf(close, sizeof(close), "</%s>", tag);
	const char *s = memmem(x + *pos, n - *pos, open, (size_t)ol), *e;
	size_t o = 0;

	if (!s)
		return -1;
	s += ol;
	e = memmem(s, n - (size_t)(s - x), close, (size_t)cl);
	if (!e)
		return -2;
	*pos = (size_t)(e - x) + (size_t)cl;
	for (const char *p = s; p < e; p++) {
		char ch = *p;
		if (ch == '&') {
			const char *semi = memchr(p, ';', (size_t)(e - p));
			size_t el;
			if (!semi)
				return -2;
			el = (size_t)(semi - p) + 1;
			if (el == 5 && memcmp(p, "&amp;", 5) == 0)
				ch = '&';
			else if (el == 4 && memcmp(p, "&lt;", 4) == 0)
				ch = '<';
			else if (el == 4 && memcmp(p, "&gt;", 4) == 0)
				ch = '>';
			else if (el == 6 && memcmp(p, "&quot;", 6) == 0)
				ch = '"';
			else if (el == 6 && memcmp(p, "&apos;", 6) == 0)
				ch = '\'';
			else if (el > 3 && p[1] == '#') {
				unsigned long v = strtoul(p + (p[2] == 'x' ? 3 : 2), NULL,
							  p[2] == 'x' ? 16 : 10);
				if (v == 0 || v >= 0x80)
					return -2;
				ch = (char)v;
			} else
				return -2;
			p = semi;
		} else if (ch == '<') {
			return -2;
		}
		if (o + 1 >= cap)
			return -2;
		out[o++] = ch;
	}
	out[o] = 0;
	return (int64_t)o;
}

static void s3d_complete_start(struct s3d_req *rq);
static void s3d_complete_later(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_complete_start(arg);
}

static void s3d_complete_start(struct s3d_req *rq)
{
	const char *x = (const char *)rq->buf;
	size_t n = (size_t)rq->buf_len, pos = 0;
	uint32_t count = 0, last = 0;
	struct s3d_item *it;
	struct kvt_key k;

	/* its XML parsed, then a probe a part ("Work on the loop") */
	if (!s3d_work_turn(rq, n / S3D_WORK_XML, s3d_complete_later))
		return;

	/* count the parts first */
	for (const char *p = x; (p = memmem(p, n - (size_t)(p - x), "<Part>", 6)); p += 6)
		count++;
	if (count == 0 || count > S3D_PARTS_MAX) {
		s3d_fail(rq, 400, count ? "InvalidRequest" : "MalformedXML",
			 count ? "kvtierd assembles at most 1023 parts" : "No parts listed.");
		return;
	}
	it = s3d_items(rq, 1 + count);
	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	s3d_upload_key(&k, rq);
	s3d_item_init(rq, &it[0], KVT_OP_GET_PINNED, &k);
	for (uint32_t i = 0; i < count; i++) {
		size_t pend, inner;
		char part[512], etag[128];
		/* each <Part>...</Part> in turn */
		const char *ps = memmem(x + pos, n - pos, "<Part>", 6);
		const char *pe = ps ? memmem(ps, n - (size_t)(ps - x), "</Part>", 7) : NULL;
		if (!ps || !pe) {
			s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed.");
			return;
		}
		pend = (size_t)(pe - x) + 7;
		inner = 0;
		int64_t pl = s3d_xml_next(ps, (size_t)(pe - ps) + 7, &inner, "PartNumber", part,
					  sizeof(part));
		inner = 0;
		int64_t el = s3d_xml_next(ps, (size_t)(pe - ps) + 7, &inner, "ETag", etag,
					  sizeof(etag));
		pos = pend;
		char *end;
		unsigned long pn = pl > 0 ? strtoul(part, &end, 10) : 0;
		if (pl <= 0 || *end || pn < 1 || pn > 10000 || pn <= last) {
			s3d_fail(rq, 400, pn && pn <= last ? "InvalidPartOrder" : "MalformedXML",
				 pn && pn <= last ? "The list of parts was not in ascending order." :
						    "The XML you provided was not well-formed.");
			return;
		}
		last = (uint32_t)pn;
		s3d_part_key(&k, rq->upload_id, (uint32_t)pn);
		s3d_item_init(rq, &it[1 + i], KVT_OP_GET_PINNED, &k);
		it[1 + i].part_no = (uint32_t)pn;
		if (el > 0 && !(it[1 + i].etag_sent = strdup(etag))) {
			s3d_fail(rq, 503, "SlowDown", "server out of memory");
			return;
		}
	}
	s3d_submit(rq, PH_PROBE);
}

static void s3d_delete_many_start(struct s3d_req *rq);
static void s3d_delete_many_later(void *arg)
{
	if (!s3d_store_closed(arg))
		s3d_delete_many_start(arg);
}

static void s3d_delete_many_start(struct s3d_req *rq)
{
	const char *x = (const char *)rq->buf;
	size_t n = (size_t)rq->buf_len, pos = 0;
	uint32_t count = 0;
	char *keys, *kp;
	char v[8];
	int64_t l;
	struct s3d_item *it;

	/* its XML parsed, then a delete a key: ~ a key each 32 bytes */
	if (!s3d_work_turn(rq, n / S3D_WORK_XML, s3d_delete_many_later))
		return;
	keys = malloc(n + 1);
	if (!keys) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	kp = keys;
	/* each key decoded in place (never longer than its text); one over
	 * S3D_KEY_MAX is its own entry's KeyTooLongError, as a DeleteObject's
	 * 400 (its item's key left empty: KVT_EKEYLEN), not the request's */
	while ((l = s3d_xml_next(x, n, &pos, "Key", kp, (size_t)(keys + n + 1 - kp))) >= 0) {
		if (++count > S3D_DELETE_MAX || l == 0) {
			free(keys);
			s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed "
				 "or did not validate against our published schema.");
			return;
		}
		kp += l + 1;
	}
	if (l == -2 || count == 0) {
		free(keys);
		s3d_fail(rq, 400, "MalformedXML", "The XML you provided was not well-formed or did "
			 "not validate against our published schema.");
		return;
	}
	pos = 0;
	rq->cond_none_match = s3d_xml_next(x, n, &pos, "Quiet", v, sizeof(v)) == 4 &&
			      strcasecmp(v, "true") == 0;
	free(rq->buf);
	rq->buf = (uint8_t *)keys;
	it = s3d_items(rq, count);
	if (!it) {
		s3d_fail(rq, 503, "SlowDown", "server out of memory");
		return;
	}
	kp = keys;
	for (uint32_t i = 0; i < count; i++) {
		struct kvt_key k;
		size_t kl = strlen(kp);
		s3d_key(&k, 'o', kp, kl);
		if (kl > S3D_KEY_MAX)
			k.len = 0;
		s3d_item_init(rq, &it[i], KVT_OP_DELETE, &k);
		kp += kl + 1;
	}
	s3d_hold_write(rq); /* until its deletes are applied (s3d.c "Order") */
	s3d_submit(rq, PH_WRITE);
}

/* Run the operation once the body (if any) is in. */
void s3d_run(struct s3d_req *rq)
{
	struct kvtd_server *srv = rq->conn->loop->srv;
	struct s3d_item *it;
	struct kvt_key k;
	int r;

	if (rq->op == S3_LIST_BUCKETS) {
		s3d_list_buckets(rq);
		return;
	}
	if (rq->op == S3_NOT_IMPL) {
		s3d_fail(rq, 501, "NotImplemented", "A header or query you provided implies "
			 "functionality that kvtierd does not implement (doc/s3.md).");
		return;
	}
	if (rq->op == S3_BUCKET_LOCATION) {
		s3d_xml_begin(rq, "LocationConstraint");
		s3d_text(rq, "</LocationConstraint>\n", 22);
		s3d_xml_answer(rq, 200);
		s3d_finish(rq);
		return;
	}
	if (rq->op == S3_CREATE_BUCKET && !s3d_bucket_ok(rq->bucket, strlen(rq->bucket), true)) {
		s3d_fail(rq, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return;
	}
	r = s3d_bucket_ns(rq, rq->op == S3_CREATE_BUCKET);
	if (r == KVT_MISS) {
		s3d_fail(rq, 404, "NoSuchBucket", "The specified bucket does not exist");
		return;
	}
	if (r == KVT_EFULL) {
		s3d_fail(rq, 400, "TooManyBuckets", "You have attempted to create more buckets "
			 "than allowed (a tenant's namespaces, doc/s3.md).");
		return;
	}
	if (r < 0) {
		s3d_fail(rq, 503, "SlowDown", kvt_strerror(r));
		return;
	}
	if (rq->granted && rq->op != S3_GET && rq->op != S3_HEAD && rq->op != S3_HEAD_BUCKET &&
	    rq->op != S3_LIST_V1 && rq->op != S3_LIST_V2) {
		s3d_fail(rq, 403, "AccessDenied", "A grant gives read access only.");
		return;
	}
	/* A write into the bucket: none while it is being deleted, and no
	 * DeleteBucket until it is answered ("DeleteBucket against the
	 * bucket's writes"; PutObject and UploadPart from their heads, s3d.c) */
	if ((rq->op == S3_MPU_CREATE || rq->op == S3_MPU_COMPLETE || rq->op == S3_COPY ||
	     rq->op == S3_MPU_PART_COPY) && (r = s3d_gate_write(rq)) != 0) {
		s3d_gate_fail(rq, r);
		return;
	}
	switch (rq->op) {
	case S3_CREATE_BUCKET:
		/* The bucket is its namespace's word in the registry: the
		 * creation time, set if 0 (an fsync of the registry, on the
		 * aux thread) */
		s3d_set_word(rq, 0, s3d_create_word(rq->conn->loop->srv), s3d_create_bucket_set);
		return;
	case S3_HEAD_BUCKET: /* it exists: s3d_bucket_ns said so */
		rq->tlen = 0;
		s3d_answer(rq, 200, "x-amz-bucket-region: us-east-1\r\n", 0, false);
		s3d_finish(rq);
		return;
	case S3_DELETE_BUCKET:
		/* Objects left: refused (a walk, s3d_delete_bucket_scanned);
		 * no write of the bucket in progress meanwhile (s3d_gate_delete) */
		if (s3d_gate_delete(rq) && s3d_scan_acquire(rq))
			s3d_scan(rq, NULL, 'o', NULL, 1, s3d_delete_bucket_scanned);
		return;
	case S3_HEAD:
		/* its header alone, quietly, the owner's as a grantee's
		 * ("Header reads") */
		if (!(it = s3d_item_one(rq, KVT_OP_GET, 'o')))
			return;
		s3d_item_hdr(it, rq->hdrbuf);
		s3d_submit(rq, PH_PROBE);
		return;
	case S3_GET:
		if (!(it = s3d_item_one(rq, KVT_OP_GET_PINNED, 'o')))
			return;
		/* another tenant's bytes leave no trace in the cache state
		 * (doc/security.md, "Cross-tenant probing"), as native reads */
		if (rq->granted) {
			it->req.flags |= KVT_F_QUIET;
			if (!s3d_quiet_slot(rq, it))
				return;
		}
		s3d_submit(rq, PH_PROBE);
		return;
	case S3_DELETE:
		if (!s3d_item_one(rq, KVT_OP_DELETE, 'o'))
			return;
		s3d_hold_write(rq); /* until it is applied (s3d.c "Order") */
		s3d_submit(rq, PH_WRITE);
		return;
	case S3_DELETE_MANY:
		s3d_delete_many_start(rq);
		return;
	case S3_LIST_V1:
	case S3_LIST_V2:
	case S3_LIST_UPLOADS:
		s3d_list_start(rq);
		return;
	case S3_MPU_CREATE: {
		uint8_t rnd[16];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			s3d_fail(rq, 500, "InternalError", "no randomness");
			return;
		}
		sigv4_hex(rnd, sizeof(rnd), rq->upload_id);
		if (!(it = s3d_item_one(rq, KVT_OP_PUT, 'u')))
			return;
		rq->hdr_len = s3d_obj_header(rq->hdrbuf, 0, 0, rq->key, rq->key_len, rq->ctype, 0);
		memcpy(rq->hdrbuf + 40, rnd, sizeof(rnd)); /* the upload id, for listings */
		it->iov[0] = (struct iovec){ rq->hdrbuf, rq->hdr_len };
		it->req.iov = it->iov;
		it->req.iov_count = 1;
		s3d_submit(rq, PH_WRITE);
		return;
	}
	case S3_MPU_ABORT:
		/* its parts are swept, before and after the marker goes, a
		 * walk of its tenant's ("Sweeps"): its slot first, so that an
		 * Abort refused for one changes nothing */
		if (!s3d_scan_acquire(rq))
			return;
		/* its marker read first: the upload must be the key's, as
		 * ListParts and Complete check (s3d_abort_marker) */
		if (s3d_item_one(rq, KVT_OP_GET_PINNED, 'u'))
			s3d_submit(rq, PH_PROBE);
		return;
	case S3_MPU_COMPLETE:
		s3d_complete_start(rq);
		return;
	case S3_LIST_PARTS:
		s3d_list_parts_start(rq);
		return;
	case S3_MPU_PART_COPY:
	case S3_COPY: {
		/* x-amz-copy-source: [/]bucket/key, percent-encoded: from any
		 * bucket the signer can read into this one (doc/s3.md) */
		size_t vl;
		const char *v;
		char *dec;
		int64_t dl;
		if (rq->op == S3_MPU_PART_COPY &&
		    (v = s3h_header(&rq->h, "x-amz-copy-source-range", &vl))) {
			/* bytes=first-last, both given (S3's only form here) */
			char rb[64];
			unsigned long long a, b;
			int used = 0;
			memcpy(rb, v, vl < sizeof(rb) - 1 ? vl : sizeof(rb) - 1);
			rb[vl < sizeof(rb) - 1 ? vl : sizeof(rb) - 1] = 0;
			if (vl >= sizeof(rb) - 1 || sscanf(rb, "bytes=%llu-%llu%n", &a, &b, &used) != 2 ||
			    (size_t)used != vl || a > b || strchr(rb, '+') || strchr(rb, ' ')) {
				s3d_fail(rq, 400, "InvalidArgument", "The x-amz-copy-source-range "
					 "value must be of the form bytes=first-last where first "
					 "and last are the zero-based offsets of the first and last "
					 "bytes to copy");
				return;
			}
			rq->copy_first = a;
			rq->copy_last = b;
			rq->copy_range = true;
		}
		v = s3h_header(&rq->h, "x-amz-copy-source", &vl);
		/* A query (?versionId=...) is cut from the value as sent, before
		 * it is decoded: a key's own '?' arrives as %3F, and was cut
		 * after -- a copy of "a?b" copied "a" (redhttp).  The key is
		 * taken by its length, so a %00 in it stays in it. */
		{
			const char *qm = memchr(v, '?', vl);
			if (qm)
				vl = (size_t)(qm - v);
		}
		dec = malloc(vl + 1);
		if (!dec)
			break;
		dl = s3h_unescape(v, vl, dec, vl);
		if (dl < 0) {
			free(dec);
			s3d_fail(rq, 400, "InvalidArgument", "Copy Source must mention the source "
				 "bucket and key: sourcebucket/sourcekey.");
			return;
		}
		dec[dl] = 0;
		char *b = dec[0] == '/' ? dec + 1 : dec;
		size_t bn = (size_t)(dec + dl - b), kl;
		char *slash = memchr(b, '/', bn);
		kl = slash ? bn - (size_t)(slash - b) - 1 : 0;
		if (!slash || kl == 0 || kl > S3D_KEY_MAX || memchr(b, 0, (size_t)(slash - b))) {
			free(dec);
			s3d_fail(rq, 400, "InvalidArgument", "Copy Source must mention the source "
				 "bucket and key: sourcebucket/sourcekey.");
			return;
		}
		*slash = 0;
		/* The source bucket: the signer's own, or one a grant lets it
		 * read (its bytes then read quietly).  Looked up as if it were
		 * the request's bucket, then the destination is put back. */
		uint32_t src_ns = rq->ns;
		bool src_quiet = false;
		if (strcmp(b, rq->bucket) != 0) {
			char dst[sizeof(rq->bucket)];
			uint32_t dst_ns = rq->ns;
			int br;
			memcpy(dst, rq->bucket, sizeof(dst));
			if (strlen(b) >= sizeof(rq->bucket) || !s3d_bucket_ok(b, strlen(b), false))
				br = KVT_MISS;
			else {
				snprintf(rq->bucket, sizeof(rq->bucket), "%s", b);
				br = s3d_bucket_ns(rq, false);
			}
			src_ns = rq->ns;
			src_quiet = rq->granted;
			memcpy(rq->bucket, dst, sizeof(dst));
			rq->ns = dst_ns;
			rq->granted = false;
			if (br != 0) {
				free(dec);
				if (br == KVT_MISS)
					s3d_fail(rq, 404, "NoSuchBucket", "The source bucket does not "
						 "exist.");
				else /* a lookup that failed: no answer about it */
					s3d_fail(rq, 503, "SlowDown", kvt_strerror(br));
				return;
			}
		}
		/* the source's name goes to rq->buf (owned), its length to
		 * buf_len (a copy's body is not buffered) */
		memmove(dec, slash + 1, kl + 1);
		free(rq->buf);
		rq->buf = (uint8_t *)dec;
		rq->buf_len = kl;
		/* UploadPartCopy: its upload's marker read beside the source
		 * (items[1]), checked first (s3d_step; s3d_upload_item) */
		it = s3d_items(rq, rq->op == S3_MPU_PART_COPY ? 2 : 1);
		if (!it)
			break;
		if (rq->op == S3_MPU_PART_COPY)
			s3d_upload_item(rq, &it[1]);
		s3d_key(&k, 'o', dec, kl);
		s3d_item_init(rq, it, KVT_OP_GET_PINNED, &k);
		it->req.ns = src_ns;
		if (src_quiet) {
			it->req.flags |= KVT_F_QUIET;
			if (!s3d_quiet_slot(rq, it))
				return;
		}
		s3d_submit(rq, PH_PROBE);
		return;
	}
	default:
		s3d_fail(rq, 500, "InternalError", "unexpected operation");
		return;
	}
	(void)srv;
	s3d_fail(rq, 503, "SlowDown", "server out of memory");
}

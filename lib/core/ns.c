/*
 * ns.c - namespace descriptors, their digests, and the persisted registry
 * that maps a digest to a store-local id.
 *
 * Descriptor -> canonical text -> SHA-256 digest.  The canonical text is
 * defined byte for byte in doc/keys.md; it is a fixed sequence of
 * "name=value\n" lines whose values can contain neither '\n' nor anything
 * outside 0x21..0x7e, so distinct descriptors always give distinct texts.
 *
 * The registry (struct ns_registry, kvt_int.h) hands out ids 1, 2, 3, ...
 * in registration order, never reuses or moves one, and when the store has
 * a directory makes each new id durable in an append-only file
 * ("namespaces", doc/keys.md: one record appended, one fdatasync shared by
 * concurrent adds) before it is published, so a restart can never remap an
 * id.
 *
 * Invariants and locking:
 *   - r->file_lock serializes the writers (ns_reg_add, ns_reg_load) and the
 *     file, except that a group commit's leader drops it around fdatasync
 *     (r->syncing); r->lock guards the digest hash table and the prepared
 *     entries, and is never held across file I/O, so ns_reg_find (every
 *     loop thread's lookup) never waits for a disk.
 *   - Ids (count, prepared] are prepared: in the hash, written or being
 *     written, not yet durable.  find skips them; an add of the same digest
 *     waits for them.  They are published in order (count only grows) or,
 *     when their write or sync fails, dropped.
 *   - Entry id lives at pages[id >> NS_PAGE_SHIFT][id & (NS_PAGE_LEN-1)].
 *     An entry is written in full under the lock, persisted, and only then
 *     published by a release store of count; ns_reg_get reads count with
 *     acquire and then the entry without any lock.  Published entries and
 *     pages are never written or freed until ns_reg_free.
 *   - The hash table holds exactly the published ids.
 *   - An entry's word (ns_reg_set_word: the embedder's 64 bits, e.g. an S3
 *     bucket's creation time) is the one field that changes after publish:
 *     an atomic, stored (release) under file_lock once the record that
 *     says so is durable; readers load it (acquire) without a lock.
 *   - Every allocation goes through r->mem (sized frees).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "kvt_int.h"
#include "kvt_keyhash.h"
#include "le.h"

/* ------------------------------------------------------------------------
 * Canonical descriptor text (doc/keys.md, "Namespace descriptor")
 */

#define NS_FIELD_MAX 255 /* longest string field, bytes */
#define NS_U32_DIGITS 10 /* "4294967295" */
#define NS_CANON_HEAD "kvtier-ns 1\n"

/* sizeof("x=") - 1 + value + '\n' for each line: the longest text there is. */
#define NS_LINE(name, vmax) (sizeof(name "=") - 1 + (vmax) + 1)
#define NS_CANON_WORST                                                          \
	(sizeof(NS_CANON_HEAD) - 1 + NS_LINE("model", NS_FIELD_MAX) +              \
	 NS_LINE("config", NS_FIELD_MAX) + NS_LINE("dtype", NS_FIELD_MAX) +         \
	 NS_LINE("kv_quant", NS_FIELD_MAX) + NS_LINE("layout", NS_FIELD_MAX) +      \
	 NS_LINE("block_tokens", NS_U32_DIGITS) +                                   \
	 NS_LINE("tp", 2 * NS_U32_DIGITS + 1) + NS_LINE("pp", 2 * NS_U32_DIGITS + 1) + \
	 NS_LINE("tenant", NS_FIELD_MAX))
_Static_assert(NS_CANON_WORST <= NS_CANON_MAX, "canonical text always fits NS_CANON_MAX");

struct ns_text {
	char *p;    /* NS_CANON_MAX bytes */
	size_t len; /* bytes written */
};

static void ns_put(struct ns_text *t, const char *s, size_t n)
{
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

static void ns_put_u32(struct ns_text *t, uint32_t v)
{
	char d[NS_U32_DIGITS];
	int i = 0;

	do {
		d[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		t->p[t->len++] = d[--i];
}

/*
 * A string field: 1..255 bytes of 0x21..0x7e.  An optional field may be
 * NULL or "" (none, *len 0); since none is spelled "-" in the text, the
 * value "-" itself is refused there.
 */
static int ns_check_field(const char *s, bool optional, size_t *len)
{
	size_t n;

	if (!s || !*s) {
		*len = 0;
		return optional ? 0 : KVT_EDESC;
	}
	n = strnlen(s, NS_FIELD_MAX + 1);
	if (n > NS_FIELD_MAX)
		return KVT_EDESC;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x21 || c > 0x7e)
			return KVT_EDESC;
	}
	if (optional && n == 1 && s[0] == '-')
		return KVT_EDESC;
	*len = n;
	return 0;
}

static void ns_put_line(struct ns_text *t, const char *name, const char *v, size_t vlen)
{
	ns_put(t, name, strlen(name));
	if (vlen)
		ns_put(t, v, vlen);
	else
		ns_put(t, "-", 1);
	ns_put(t, "\n", 1);
}

/* Canonical text of desc into t (NS_CANON_MAX bytes, no NUL); its length or KVT_EDESC. */
static int ns_canon(const struct kvt_ns_desc *d, struct ns_text *t)
{
	size_t model, config, dtype, quant, layout, tenant;

	if (ns_check_field(d->model, false, &model) ||
	    ns_check_field(d->config_hash, true, &config) ||
	    ns_check_field(d->dtype, false, &dtype) || ns_check_field(d->kv_quant, true, &quant) ||
	    ns_check_field(d->layout, false, &layout) || ns_check_field(d->tenant, true, &tenant))
		return KVT_EDESC;
	if (d->block_tokens == 0 || d->tp_size == 0 || d->pp_size == 0 ||
	    d->tp_rank >= d->tp_size || d->pp_rank >= d->pp_size ||
	    (d->flags & ~(KVT_NS_RANK_AGNOSTIC | KVT_NS_PERSISTENT | KVT_NS_RETAIN)) ||
	    d->replicas > KVT_NS_REPLICAS_MAX)
		return KVT_EDESC; /* replicas is checked, but policy: not in the text */

	t->len = 0;
	ns_put(t, NS_CANON_HEAD, sizeof(NS_CANON_HEAD) - 1);
	ns_put_line(t, "model=", d->model, model);
	ns_put_line(t, "config=", d->config_hash, config);
	ns_put_line(t, "dtype=", d->dtype, dtype);
	ns_put_line(t, "kv_quant=", d->kv_quant, quant);
	ns_put_line(t, "layout=", d->layout, layout);
	ns_put(t, "block_tokens=", 13);
	ns_put_u32(t, d->block_tokens);
	ns_put(t, "\ntp=", 4);
	if (d->flags & KVT_NS_RANK_AGNOSTIC)
		ns_put(t, "*", 1);
	else
		ns_put_u32(t, d->tp_rank);
	ns_put(t, "/", 1);
	ns_put_u32(t, d->tp_size);
	ns_put(t, "\npp=", 4);
	ns_put_u32(t, d->pp_rank);
	ns_put(t, "/", 1);
	ns_put_u32(t, d->pp_size);
	ns_put(t, "\n", 1);
	ns_put_line(t, "tenant=", d->tenant, tenant);
	return (int)t->len;
}

/* SHA-256 of [p, p+len) into out.  0 or -ENOMEM (OpenSSL could not run). */
static int ns_sha256(const void *p, size_t len, uint8_t out[32])
{
	unsigned int md_len = 0;

	if (!EVP_Digest(p, len, out, &md_len, EVP_sha256(), NULL) || md_len != 32)
		return -ENOMEM;
	return 0;
}

int kvt_ns_digest(const struct kvt_ns_desc *desc, uint8_t digest[32], char *buf, size_t buf_len)
{
	char text[NS_CANON_MAX];
	struct ns_text t = { .p = text, .len = 0 };
	int n, ret;

	if (!desc)
		return KVT_ENULL;
	n = ns_canon(desc, &t);
	if (n < 0)
		return n;
	if (digest) {
		ret = ns_sha256(text, (size_t)n, digest);
		if (ret < 0)
			return ret;
	}
	if (buf && buf_len) {
		size_t c = (size_t)n < buf_len - 1 ? (size_t)n : buf_len - 1;
		memcpy(buf, text, c);
		buf[c] = '\0';
	}
	return n;
}

/* ------------------------------------------------------------------------
 * Registry file (doc/keys.md, "Registry file").  Parsed field by field with
 * explicit little-endian reads: no struct is mapped onto the bytes.
 *
 *   header  off len
 *             0   8  magic "KVTNSREG"
 *             8   4  u32 version (2 or 3 written; 1 still loads)
 *            12   4  u32 record count (version 1); 0 (versions 2, 3:
 *                    records run to the end of the file, a torn last one
 *                    ignored)
 *   record  off len
 *             0   4  u32 id (1, 2, 3, ... in order)
 *             4  32  digest = SHA-256(canon)
 *            36   4  u32 canon_len (1..NS_CANON_MAX)
 *            40   L  canon (no NUL)
 *          40+L   4  u32 CRC32C of bytes [0, 40+L) of the record
 *   word record (version 3 only), anywhere after its namespace's record:
 *             0   4  u32 0 (no namespace record has id 0)
 *             4   4  u32 id of a namespace recorded before it
 *             8   8  u64 the namespace's word from here on
 *            16   4  u32 CRC32C of bytes [0, 16)
 *
 * A file is written as version 3 only while some word is not 0, so a store
 * whose embedder never sets one keeps a version 2 file (older kvtier reads
 * it).  Word records accumulate: past NS_WORDS_SLACK more than twice the
 * words that are not 0, the next one rewrites the file (one record per
 * such word), so the file stays within NS_FILE_MAX.
 */

#define NS_FILE "namespaces"
#define NS_FILE_TMP "namespaces.tmp"
#define NS_FILE_MAGIC "KVTNSREG"
#define NS_FILE_V1 1u /* whole file, exact count: still loaded, rewritten on first add */
#define NS_FILE_V2 2u /* append-only, namespace records alone: written while no word is set */
#define NS_FILE_V3 3u /* append-only, word records too */
#define NS_HDR_LEN 16u
#define NS_REC_FIXED 44u /* record bytes besides canon */
#define NS_WORD_LEN 20u  /* a word record */
#define NS_WORDS_SLACK 64u
#define NS_ID_MAX ((uint32_t)NS_PAGES * NS_PAGE_LEN - 1)
#define NS_FILE_MAX                                                              \
	((uint64_t)NS_HDR_LEN + (uint64_t)NS_ID_MAX * (NS_REC_FIXED + NS_CANON_MAX) + \
	 ((uint64_t)NS_ID_MAX * 2 + NS_WORDS_SLACK + 1) * NS_WORD_LEN)

/* Canonical text may hold only what ns_canon writes: 0x21..0x7e, ' ', '\n'. */
static bool ns_canon_chars_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 || c > 0x7e) && c != '\n')
			return false;
	}
	return true;
}

/* Is the version 3 word record at p (len - p >= NS_WORD_LEN) whole? */
static bool ns_word_framed(const uint8_t *p)
{
	return le_get32(p) == 0 && kvt_crc32c(0, p, 16) == le_get32(p + 16);
}

/*
 * Versions 2 and 3: may the record that failed a framing check at off (a
 * namespace record: of id `id`; a word record: the namespaces before it
 * have ids up to `id`) be a torn append, cut short or left as zeros by a
 * crash before its fdatasync?  Then nothing acknowledged follows it: no
 * record of a later id with a good CRC starts anywhere after off, nor (version 3) a
 * word record with a good CRC.  If one does, the damage is not a torn write
 * and the file is refused (dropping an acknowledged id could let a restart
 * hand it to another namespace; dropping a word, undo a change).
 */
static bool ns_torn_tail(const uint8_t *buf, size_t len, size_t off, uint32_t id,
			 uint32_t ver)
{
	uint64_t max_id = (uint64_t)id + (len - off) / (NS_REC_FIXED + 1);

	for (size_t p = off + 1; p + NS_WORD_LEN <= len; p++) {
		uint32_t rid = le_get32(buf + p), cl;

		if (ver == NS_FILE_V3 && rid == 0) {
			uint32_t wid = le_get32(buf + p + 4);
			if (wid && wid <= max_id && ns_word_framed(buf + p))
				return false;
			continue;
		}
		if (rid <= id || rid > max_id || p + NS_REC_FIXED >= len)
			continue;
		cl = le_get32(buf + p + 36);
		if (cl == 0 || cl > NS_CANON_MAX || len - p < NS_REC_FIXED + (size_t)cl)
			continue;
		if (kvt_crc32c(0, buf + p, 40 + (size_t)cl) == le_get32(buf + p + 40 + cl))
			return false;
	}
	return true;
}

int ns_reg_parse_ex(const uint8_t *buf, size_t len, ns_rec_fn fn, ns_word_fn wfn, void *ctx,
		    size_t *used, uint32_t *version)
{
	EVP_MD_CTX *md = NULL;
	uint8_t digest[32];
	uint32_t count, i, ver;
	size_t off;
	bool append;
	int ret;

	if (!buf && len)
		return KVT_ENULL;
	if (len < NS_HDR_LEN || memcmp(buf, NS_FILE_MAGIC, 8) != 0)
		return KVT_ECORRUPT;
	ver = le_get32(buf + 8);
	if (ver != NS_FILE_V1 && ver != NS_FILE_V2 && ver != NS_FILE_V3)
		return KVT_EVERSION;
	append = ver != NS_FILE_V1;
	count = le_get32(buf + 12);
	if (append) {
		/* Append-only: no count (the field is 0); records run to the end. */
		if (count != 0)
			return KVT_ECORRUPT;
		count = NS_ID_MAX;
	} else if (count > NS_ID_MAX || count > (len - NS_HDR_LEN) / (NS_REC_FIXED + 1)) {
		/* Every record takes at least NS_REC_FIXED + 1 bytes. */
		return KVT_ECORRUPT;
	}

	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	off = NS_HDR_LEN;
	for (i = 0;;) {
		const uint8_t *rec = buf + off;
		const char *canon;
		uint32_t canon_len = 0, rec_len;
		unsigned int md_len = 0;
		bool framed;

		if (append && off == len)
			break; /* the end of an append-only file */
		if (!append && i == count)
			break;
		ret = KVT_ECORRUPT;
		if (ver == NS_FILE_V3 && len - off >= 4 && le_get32(rec) == 0) {
			/* A word record: of a namespace recorded before it. */
			uint32_t wid;

			if (len - off < NS_WORD_LEN || !ns_word_framed(rec)) {
				if (ns_torn_tail(buf, len, off, i, ver))
					break;
				goto out;
			}
			wid = le_get32(rec + 4);
			if (wid == 0 || wid > i)
				goto out;
			if (wfn) {
				ret = wfn(ctx, wid, le_get64(rec + 8));
				if (ret < 0)
					goto out;
			}
			off += NS_WORD_LEN;
			continue;
		}
		if (i == count)
			goto out; /* more records than ids */
		framed = len - off >= NS_REC_FIXED;
		if (framed) {
			canon_len = le_get32(rec + 36);
			framed = canon_len != 0 && canon_len <= NS_CANON_MAX &&
				 len - off >= NS_REC_FIXED + (size_t)canon_len;
		}
		rec_len = NS_REC_FIXED + canon_len;
		if (framed && kvt_crc32c(0, rec, rec_len - 4) != le_get32(rec + rec_len - 4))
			framed = false;
		if (!framed) {
			if (append && ns_torn_tail(buf, len, off, i + 1, ver))
				break; /* a torn last append: the records before it stand */
			goto out;
		}
		/* The CRC holds: anything wrong from here on is not a torn write. */
		if (le_get32(rec) != i + 1)
			goto out;
		canon = (const char *)rec + 40;
		if (!ns_canon_chars_ok(canon, canon_len))
			goto out;
		if ((i && !EVP_DigestInit_ex(md, NULL, NULL)) ||
		    !EVP_DigestUpdate(md, canon, canon_len) ||
		    !EVP_DigestFinal_ex(md, digest, &md_len) || md_len != 32) {
			ret = -ENOMEM;
			goto out;
		}
		if (memcmp(digest, rec + 4, 32) != 0)
			goto out;
		if (fn) {
			ret = fn(ctx, i + 1, rec + 4, canon, canon_len);
			if (ret < 0)
				goto out;
		}
		off += rec_len;
		i++;
	}
	if (!append && off != len) {
		ret = KVT_ECORRUPT;
		goto out;
	}
	if (used)
		*used = off;
	if (version)
		*version = ver;
	ret = (int)i;
out:
	EVP_MD_CTX_free(md);
	return ret;
}

int ns_reg_parse(const uint8_t *buf, size_t len, ns_rec_fn fn, void *ctx)
{
	return ns_reg_parse_ex(buf, len, fn, NULL, ctx, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * The registry in memory
 */

#define NS_HASH_MIN 16u /* initial slots */

static void ns_assert_locked(struct ns_registry *r)
{
	/* Held by some thread, a default mutex fails trylock with EBUSY (debug builds). */
	assert(pthread_mutex_trylock(&r->lock) == EBUSY);
	KVT_UNUSED(r);
}

/* Entry id, prepared or published: its page exists. */
static struct ns_entry *ns_entry_at(struct ns_registry *r, uint32_t id)
{
	struct ns_entry *page = atomic_load_explicit(&r->pages[id >> NS_PAGE_SHIFT],
						     memory_order_relaxed);
	return &page[id & (NS_PAGE_LEN - 1)];
}

/*
 * A digest's home: XXH3 of it, seeded by the registry's secret.  Its first
 * 8 bytes as they are (until 2026-12-07) were a client's to choose: a
 * digest is SHA-256 of a canonical text the client writes (~2^12 tries
 * put one at a chosen home of a table of 4,096), and a digest named in a
 * frame need not be registered at all -- one tenant's 1,024 namespaces of
 * one home made every lookup of that home a walk of them, under the lock
 * every loop takes (doc/security.md "Session 44", test_hostile ns_hash).
 */
static uint32_t ns_hash_slot(const struct ns_registry *r, const uint8_t digest[32],
			     uint32_t cap)
{
	return (uint32_t)XXH3_64bits_withSeed(digest, 32, r->hash_secret) & (cap - 1);
}

/* Id with this digest, or 0. */
static uint32_t ns_hash_lookup_locked(struct ns_registry *r, const uint8_t digest[32])
{
	uint32_t slot, id;

	ns_assert_locked(r);
	if (!r->hash_cap)
		return 0;
	for (slot = ns_hash_slot(r, digest, r->hash_cap);; slot = (slot + 1) & (r->hash_cap - 1)) {
		id = r->hash[slot];
		if (!id || memcmp(ns_entry_at(r, id)->digest, digest, 32) == 0)
			return id;
	}
}

static void ns_hash_insert(const struct ns_registry *r, uint32_t *hash, uint32_t cap,
			   const uint8_t digest[32], uint32_t id)
{
	uint32_t slot = ns_hash_slot(r, digest, cap);

	while (hash[slot])
		slot = (slot + 1) & (cap - 1);
	hash[slot] = id;
}

/* Make room for `n` ids at load <= 1/2.  0 or -ENOMEM (table unchanged). */
static int ns_hash_reserve_locked(struct ns_registry *r, uint32_t n)
{
	uint32_t cap = r->hash_cap ? r->hash_cap : NS_HASH_MIN;
	uint32_t *hash, id, count;

	ns_assert_locked(r);
	while ((uint64_t)n * 2 > cap)
		cap *= 2;
	if (cap == r->hash_cap)
		return 0;
	hash = kvt_mem_calloc(r->mem, cap, sizeof(*hash));
	if (!hash)
		return -ENOMEM;
	count = r->prepared;
	for (id = 1; id <= count; id++)
		ns_hash_insert(r, hash, cap, ns_entry_at(r, id)->digest, id);
	kvt_mem_free(r->mem, r->hash, (size_t)r->hash_cap * sizeof(*r->hash));
	r->hash = hash;
	r->hash_cap = cap;
	return 0;
}

/*
 * Fill the entry for id prepared+1 and put it in the hash (not yet visible:
 * count is not raised, and find skips ids above count).  0, KVT_EFULL (ids
 * exhausted) or -ENOMEM; on failure nothing changed.
 */
static int ns_prepare_locked(struct ns_registry *r, const uint8_t digest[32], const char *canon,
			     uint32_t canon_len, uint32_t *id_out)
{
	uint32_t id = r->prepared + 1;
	struct ns_entry *_Atomic *slot;
	struct ns_entry *e;
	char *copy;

	ns_assert_locked(r);
	if (id > NS_ID_MAX)
		return KVT_EFULL;
	slot = &r->pages[id >> NS_PAGE_SHIFT];
	if (!atomic_load_explicit(slot, memory_order_relaxed)) {
		struct ns_entry *page = kvt_mem_calloc(r->mem, NS_PAGE_LEN, sizeof(*page));
		if (!page)
			return -ENOMEM;
		atomic_store_explicit(slot, page, memory_order_release);
	}
	if (ns_hash_reserve_locked(r, id) < 0)
		return -ENOMEM;
	copy = kvt_mem_alloc(r->mem, (size_t)canon_len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, canon, canon_len);
	copy[canon_len] = '\0';

	e = ns_entry_at(r, id);
	e->id = id;
	memcpy(e->digest, digest, 32);
	e->canon_len = canon_len;
	e->canon = copy;
	atomic_store_explicit(&e->word, 0, memory_order_relaxed);
	ns_hash_insert(r, r->hash, r->hash_cap, e->digest, id);
	r->prepared = id;
	*id_out = id;
	return 0;
}

/* Undo ns_prepare_locked for every id above keep (>= count: never published). */
static void ns_unprepare_locked(struct ns_registry *r, uint32_t keep)
{
	uint32_t count = atomic_load_explicit(&r->count, memory_order_relaxed);

	ns_assert_locked(r);
	assert(keep >= count);
	if (r->prepared <= keep)
		return;
	for (uint32_t id = keep + 1; id <= r->prepared; id++) {
		struct ns_entry *e = ns_entry_at(r, id);
		kvt_mem_free(r->mem, e->canon, (size_t)e->canon_len + 1);
		memset(e, 0, sizeof(*e));
	}
	r->prepared = keep;
	/* Open addressing: rebuild rather than delete. */
	memset(r->hash, 0, (size_t)r->hash_cap * sizeof(*r->hash));
	for (uint32_t id = 1; id <= keep; id++)
		ns_hash_insert(r, r->hash, r->hash_cap, ns_entry_at(r, id)->digest, id);
}

/* Make prepared ids up to `upto` visible to find and to lock-free get. */
static void ns_publish_locked(struct ns_registry *r, uint32_t upto)
{
	ns_assert_locked(r);
	assert(upto <= r->prepared);
	atomic_store_explicit(&r->count, upto, memory_order_release);
}

/* Free every entry, page and the hash: back to an empty registry. */
static void ns_clear_locked(struct ns_registry *r)
{
	uint32_t count = r->prepared;

	for (uint32_t id = 1; id <= count; id++) {
		struct ns_entry *e = ns_entry_at(r, id);
		kvt_mem_free(r->mem, e->canon, (size_t)e->canon_len + 1);
	}
	for (uint32_t p = 0; p < NS_PAGES; p++) {
		struct ns_entry *page = atomic_load_explicit(&r->pages[p], memory_order_relaxed);
		kvt_mem_free(r->mem, page, (size_t)NS_PAGE_LEN * sizeof(*page));
		atomic_store_explicit(&r->pages[p], NULL, memory_order_relaxed);
	}
	kvt_mem_free(r->mem, r->hash, (size_t)r->hash_cap * sizeof(*r->hash));
	r->hash = NULL;
	r->hash_cap = 0;
	r->prepared = 0;
	r->words_live = r->word_recs = 0;
	atomic_store_explicit(&r->count, 0, memory_order_relaxed);
}

int ns_reg_init(struct ns_registry *r, struct kvt_mem *mem)
{
	int err;

	if (!r || !mem)
		return KVT_ENULL;
	memset(r, 0, sizeof(*r));
	/* The slot's key, drawn first (nothing to undo if it fails): blocking
	 * until the kernel's pool is ready, as dram.c's and ssd.c's, and an
	 * error rather than a key an attacker can guess (the registry's
	 * address and the time, with GRND_NONBLOCK, until 2026-12-07 review:
	 * test_ns reg_secret). */
	err = kvt_secret_draw(&r->hash_secret);
	if (err)
		return err;
	err = pthread_mutex_init(&r->lock, NULL);
	if (err)
		return -err;
	err = pthread_mutex_init(&r->file_lock, NULL);
	if (err) {
		pthread_mutex_destroy(&r->lock);
		return -err;
	}
	err = pthread_cond_init(&r->sync_cv, NULL);
	if (err) {
		pthread_mutex_destroy(&r->file_lock);
		pthread_mutex_destroy(&r->lock);
		return -err;
	}
	r->mem = mem;
	r->dir_fd = -1;
	r->fd = -1;
	r->rewrite = true;
	atomic_init(&r->count, 0);
	for (uint32_t p = 0; p < NS_PAGES; p++)
		atomic_init(&r->pages[p], NULL);
	return 0;
}

void ns_reg_free(struct ns_registry *r)
{
	if (!r || !r->mem)
		return;
	pthread_mutex_lock(&r->lock);
	ns_clear_locked(r);
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->file_lock);
	pthread_cond_destroy(&r->sync_cv);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->mem = NULL;
	r->dir_fd = -1;
}

const struct ns_entry *ns_reg_get(struct ns_registry *r, uint32_t id)
{
	struct ns_entry *page;

	if (!r || id == 0 || id > atomic_load_explicit(&r->count, memory_order_acquire))
		return NULL;
	/* The acquire above orders this after the page and entry were written. */
	page = atomic_load_explicit(&r->pages[id >> NS_PAGE_SHIFT], memory_order_relaxed);
	return &page[id & (NS_PAGE_LEN - 1)];
}

int ns_reg_find(struct ns_registry *r, const uint8_t digest[32], uint32_t *id)
{
	uint32_t found;

	if (!r || !digest || !id)
		return KVT_ENULL;
	pthread_mutex_lock(&r->lock);
	found = ns_hash_lookup_locked(r, digest);
	/* Prepared ids are in the hash too; they exist once count reaches them. */
	if (found > atomic_load_explicit(&r->count, memory_order_relaxed))
		found = 0;
	pthread_mutex_unlock(&r->lock);
	if (!found)
		return KVT_MISS;
	*id = found;
	return 0;
}

/* ------------------------------------------------------------------------
 * Persistence: an append-only file.  Each new id appends one record and
 * waits for an fdatasync that covers it; while one adder (the leader) is in
 * fdatasync, without file_lock, others append and wait, and the next leader
 * syncs them all at once (group commit).  A whole-file rewrite (temp, fsync,
 * rename, fsync dir) happens only when the file is not a clean append-only
 * one: absent, the old format (migrated), junk after the last record (a torn
 * append), or a failed write that could not be cut off -- and when a word
 * is set: the first one (version 2 becomes 3), or once stale word records
 * pile up (NS_WORDS_SLACK).  Namespaces are never removed, so their records
 * are always live; superseded word records are the only thing compacted.
 * A word's record is appended and fdatasync'ed under file_lock, with no
 * group commit (words change rarely: S3's CreateBucket and DeleteBucket).
 * Lookups take only lock, never file_lock.
 */

/* write(2) all of it.  0 or -errno. */
static int ns_write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Record of entry e into rec (NS_REC_FIXED + canon_len bytes); its length. */
static size_t ns_put_rec(uint8_t *rec, const struct ns_entry *e)
{
	le_put32(rec, e->id);
	memcpy(rec + 4, e->digest, 32);
	le_put32(rec + 36, e->canon_len);
	memcpy(rec + 40, e->canon, e->canon_len);
	le_put32(rec + 40 + e->canon_len, kvt_crc32c(0, rec, 40 + e->canon_len));
	return NS_REC_FIXED + e->canon_len;
}

/* Word record of id into rec (NS_WORD_LEN bytes). */
static void ns_put_word(uint8_t *rec, uint32_t id, uint64_t word)
{
	le_put32(rec, 0);
	le_put32(rec + 4, id);
	le_put64(rec + 8, word);
	le_put32(rec + 16, kvt_crc32c(0, rec, 16));
}

/* Entry id's word, or `over_word` for id `over_id` (ns_rewrite). */
static uint64_t ns_word_of(struct ns_registry *r, uint32_t id, uint32_t over_id,
			   uint64_t over_word)
{
	if (id == over_id)
		return over_word;
	return atomic_load_explicit(&ns_entry_at(r, id)->word, memory_order_relaxed);
}

/*
 * Rewrite the file with ids [1, prepared] and a word record for each word
 * that is not 0 (id over_id's taken as over_word: a change not yet made;
 * over_id 0, none), atomically: write namespaces.tmp, fsync it, rename it
 * over namespaces, fsync the directory, and keep the new file open for
 * appends.  Version 3 if a word is written, else 2.  Under file_lock with
 * no group commit running (entries [1, prepared] do not change meanwhile).
 * 0 or -errno; on failure before the rename the temp file is removed and
 * the old file is untouched.
 */
static int ns_rewrite(struct ns_registry *r, uint32_t over_id, uint64_t over_word)
{
	size_t len = NS_HDR_LEN, off;
	uint32_t n = r->prepared, id, words = 0;
	uint8_t *image;
	int fd, ret;

	assert(!r->syncing);
	for (id = 1; id <= n; id++) {
		len += NS_REC_FIXED + ns_entry_at(r, id)->canon_len;
		if (ns_word_of(r, id, over_id, over_word)) {
			len += NS_WORD_LEN;
			words++;
		}
	}
	image = kvt_mem_alloc(r->mem, len);
	if (!image)
		return -ENOMEM;
	memcpy(image, NS_FILE_MAGIC, 8);
	le_put32(image + 8, words ? NS_FILE_V3 : NS_FILE_V2);
	le_put32(image + 12, 0);
	off = NS_HDR_LEN;
	for (id = 1; id <= n; id++)
		off += ns_put_rec(image + off, ns_entry_at(r, id));
	for (id = 1; id <= n; id++) {
		uint64_t w = ns_word_of(r, id, over_id, over_word);
		if (w) {
			ns_put_word(image + off, id, w);
			off += NS_WORD_LEN;
		}
	}

	fd = openat(r->dir_fd, NS_FILE_TMP, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = ns_write_all(fd, image, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (!ret && renameat(r->dir_fd, NS_FILE_TMP, r->dir_fd, NS_FILE) < 0)
		ret = -errno;
	if (ret) {
		close(fd);
		unlinkat(r->dir_fd, NS_FILE_TMP, 0);
		goto out;
	}
	/* The new file is in place: append to it from now on. */
	if (r->fd >= 0)
		close(r->fd);
	r->fd = fd;
	r->file_off = r->synced_off = len;
	r->rewrite = false;
	r->file_v3 = words != 0;
	r->word_recs = words;
	r->rewrites++;
	/* The rename is durable only once the directory is. */
	if (fsync(r->dir_fd) < 0)
		ret = -errno;
out:
	kvt_mem_free(r->mem, image, len);
	return ret;
}

/*
 * A rewrite or sync failed: drop every id not yet durable, cut the file back
 * to what is, and rewrite it at the next add.  Under
 * file_lock, no group commit running.
 */
static void ns_rollback(struct ns_registry *r, int err)
{
	/* After a failed sync the page cache may not match the disk: the next
	 * add rewrites from memory.  Meanwhile the file ends at synced_off. */
	if (r->fd >= 0)
		(void)!ftruncate(r->fd, (off_t)r->synced_off);
	r->rewrite = true;
	r->file_off = r->synced_off;
	pthread_mutex_lock(&r->lock);
	ns_unprepare_locked(r, atomic_load_explicit(&r->count, memory_order_relaxed));
	pthread_mutex_unlock(&r->lock);
	r->fail_epoch++;
	r->fail_err = err;
	pthread_cond_broadcast(&r->sync_cv);
}

/* Append id's record at file_off.  Under file_lock.  0 or -errno. */
static int ns_append(struct ns_registry *r, uint32_t id)
{
	const struct ns_entry *e = ns_entry_at(r, id);
	uint8_t *rec;
	size_t len = NS_REC_FIXED + e->canon_len, done = 0;
	int ret = 0;

	rec = kvt_mem_alloc(r->mem, len);
	if (!rec)
		return -ENOMEM;
	ns_put_rec(rec, e);
	while (done < len) {
		ssize_t n = pwrite(r->fd, rec + done, len - done, (off_t)(r->file_off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	kvt_mem_free(r->mem, rec, len);
	if (!ret)
		r->file_off += len;
	return ret;
}

/*
 * Wait until id is durable and published (0), or the group commit that
 * held it failed (its error).  Under file_lock, which the leader drops
 * around fdatasync.
 */
static int ns_wait_durable(struct ns_registry *r, uint32_t id)
{
	uint32_t epoch = r->fail_epoch;

	while (atomic_load_explicit(&r->count, memory_order_relaxed) < id &&
	       epoch == r->fail_epoch) {
		uint32_t target;
		uint64_t off;
		int fd, ret = 0;

		if (r->syncing) {
			pthread_cond_wait(&r->sync_cv, &r->file_lock);
			continue;
		}
		/* Lead: one fdatasync for everything appended so far. */
		r->syncing = true;
		pthread_mutex_lock(&r->lock);
		target = r->prepared;
		pthread_mutex_unlock(&r->lock);
		off = r->file_off;
		fd = r->fd;
		pthread_mutex_unlock(&r->file_lock);
		if (fdatasync(fd) < 0)
			ret = -errno;
		pthread_mutex_lock(&r->file_lock);
		r->syncing = false;
		r->syncs++;
		if (ret) {
			ns_rollback(r, ret);
			break;
		}
		r->synced_off = off;
		pthread_mutex_lock(&r->lock);
		ns_publish_locked(r, target);
		pthread_mutex_unlock(&r->lock);
		pthread_cond_broadcast(&r->sync_cv);
	}
	return atomic_load_explicit(&r->count, memory_order_relaxed) >= id ? 0 : r->fail_err;
}

/* Open the file to append to it if it is not open yet.  Under file_lock. */
static void ns_open_append(struct ns_registry *r)
{
	if (!r->rewrite && r->fd < 0) {
		r->fd = openat(r->dir_fd, NS_FILE, O_WRONLY | O_CLOEXEC);
		if (r->fd < 0)
			r->rewrite = true; /* gone or unwritable: a new file */
	}
}

int ns_reg_add(struct ns_registry *r, const uint8_t digest[32], const char *canon,
	       uint32_t canon_len, uint32_t *id)
{
	uint8_t check[32];
	uint32_t new_id;
	int ret;

	if (!r || !digest || !canon || !id)
		return KVT_ENULL;
	if (canon_len == 0 || canon_len > NS_CANON_MAX)
		return KVT_EBADLEN;
	/* What we persist must load again: same checks as ns_reg_parse. */
	if (!ns_canon_chars_ok(canon, canon_len))
		return KVT_EDESC;
	ret = ns_sha256(canon, canon_len, check);
	if (ret < 0)
		return ret;
	if (memcmp(check, digest, 32) != 0)
		return KVT_EDESC;

	/* Published already (the common case: a namespace registered again
	 * after a restart, or by each of its clients): no file_lock, which a
	 * word's fdatasync may hold (ns_reg_set_word). */
	pthread_mutex_lock(&r->lock);
	new_id = ns_hash_lookup_locked(r, digest);
	pthread_mutex_unlock(&r->lock);
	if (new_id && new_id <= atomic_load_explicit(&r->count, memory_order_acquire)) {
		*id = new_id;
		return 0;
	}

	pthread_mutex_lock(&r->file_lock);
	pthread_mutex_lock(&r->lock);
	new_id = ns_hash_lookup_locked(r, digest);
	if (new_id) {
		pthread_mutex_unlock(&r->lock);
		/* Published, or being made durable by another adder: wait for it. */
		ret = r->dir_fd >= 0 ? ns_wait_durable(r, new_id) : 0;
		goto out;
	}
	ret = ns_prepare_locked(r, digest, canon, canon_len, &new_id);
	if (ret < 0 || r->dir_fd < 0) {
		if (!ret)
			ns_publish_locked(r, new_id);
		pthread_mutex_unlock(&r->lock);
		goto out;
	}
	pthread_mutex_unlock(&r->lock);

	ns_open_append(r);
	if (r->rewrite) {
		/* Never swap the file under a leader's fdatasync. */
		while (r->syncing)
			pthread_cond_wait(&r->sync_cv, &r->file_lock);
		ret = ns_rewrite(r, 0, 0);
		if (ret < 0) {
			ns_rollback(r, ret);
			goto out;
		}
		/* Everything prepared is in the new, synced file. */
		pthread_mutex_lock(&r->lock);
		ns_publish_locked(r, r->prepared);
		pthread_mutex_unlock(&r->lock);
		pthread_cond_broadcast(&r->sync_cv);
		goto out;
	}
	ret = ns_append(r, new_id);
	if (ret < 0) {
		/* Only new_id is lost: it is the last prepared (file_lock has been
		 * held since), no leader's target holds it, and others' records
		 * before it are whole.  Cut off what was written of it. */
		if (ftruncate(r->fd, (off_t)r->file_off) < 0)
			r->rewrite = true;
		pthread_mutex_lock(&r->lock);
		ns_unprepare_locked(r, new_id - 1);
		pthread_mutex_unlock(&r->lock);
		goto out;
	}
	ret = ns_wait_durable(r, new_id);
out:
	if (!ret)
		*id = new_id;
	pthread_mutex_unlock(&r->file_lock);
	return ret;
}

/* Everything prepared is durable (a rewrite or a sync covered it): publish
 * it and wake its adders.  Under file_lock. */
static void ns_publish_all(struct ns_registry *r, uint32_t upto)
{
	pthread_mutex_lock(&r->lock);
	ns_publish_locked(r, upto);
	pthread_mutex_unlock(&r->lock);
	pthread_cond_broadcast(&r->sync_cv);
}

/*
 * Append id's word record and fdatasync it, under file_lock, no group
 * commit running (so the sync covers every record appended before: adders
 * waiting for theirs are published with it).  0 or -errno; on failure the
 * record is cut off again, or the file rolled back as a failed group
 * commit's.
 */
static int ns_append_word(struct ns_registry *r, uint32_t id, uint64_t word)
{
	uint8_t rec[NS_WORD_LEN];
	uint32_t target;
	size_t done = 0;
	int ret = 0;

	ns_put_word(rec, id, word);
	while (done < sizeof(rec)) {
		ssize_t n = pwrite(r->fd, rec + done, sizeof(rec) - done,
				   (off_t)(r->file_off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			if (ftruncate(r->fd, (off_t)r->file_off) < 0)
				r->rewrite = true;
			return ret;
		}
		done += (size_t)n;
	}
	r->file_off += sizeof(rec);
	pthread_mutex_lock(&r->lock);
	target = r->prepared;
	pthread_mutex_unlock(&r->lock);
	r->syncs++;
	if (fdatasync(r->fd) < 0) {
		ret = -errno;
		ns_rollback(r, ret);
		return ret;
	}
	r->synced_off = r->file_off;
	r->word_recs++;
	ns_publish_all(r, target);
	return 0;
}

int ns_reg_set_word(struct ns_registry *r, uint32_t id, uint64_t expect, uint64_t word)
{
	struct ns_entry *e;
	uint64_t old;
	int ret = 0;

	if (!r)
		return KVT_ENULL;
	if (!ns_reg_get(r, id))
		return KVT_ENONS;
	e = ns_entry_at(r, id);
	pthread_mutex_lock(&r->file_lock);
	old = atomic_load_explicit(&e->word, memory_order_relaxed);
	if (old != expect) {
		ret = KVT_EXISTS;
		goto out;
	}
	if (old == word || r->dir_fd < 0)
		goto set;
	/* Never append or swap the file under a leader's fdatasync. */
	while (r->syncing)
		pthread_cond_wait(&r->sync_cv, &r->file_lock);
	ns_open_append(r);
	if (r->rewrite || !r->file_v3 ||
	    r->word_recs >= 2 * (uint64_t)r->words_live + NS_WORDS_SLACK) {
		/* The first word (version 2 becomes 3), or stale ones to drop. */
		bool needed = r->rewrite;
		uint64_t swaps = r->rewrites;

		ret = ns_rewrite(r, id, word);
		if (ret < 0) {
			/* Failed before its rename (no room for the copy: ENOSPC),
			 * the old file is as it was and still takes appends: a
			 * full disk that refuses a word must not refuse the next
			 * namespace too (test_ns reg_full_disk). */
			if (needed || r->rewrites != swaps)
				ns_rollback(r, ret);
			goto out;
		}
		ns_publish_all(r, r->prepared);
	} else {
		ret = ns_append_word(r, id, word);
		if (ret < 0)
			goto out;
	}
set:
	atomic_store_explicit(&e->word, word, memory_order_release);
	if (!old != !word)
		r->words_live += word ? 1u : (uint32_t)-1;
out:
	pthread_mutex_unlock(&r->file_lock);
	return ret;
}

int ns_reg_word(struct ns_registry *r, uint32_t id, uint64_t *word)
{
	const struct ns_entry *e;

	if (!r || !word)
		return KVT_ENULL;
	e = ns_reg_get(r, id);
	if (!e)
		return KVT_ENONS;
	*word = atomic_load_explicit(&((struct ns_entry *)e)->word, memory_order_acquire);
	return 0;
}

/* ns_reg_parse callback of ns_reg_load: append one record in memory. */
static int ns_load_rec(void *ctx, uint32_t id, const uint8_t digest[32], const char *canon,
		       uint32_t canon_len)
{
	struct ns_registry *r = ctx;
	uint32_t new_id;
	int ret;

	if (ns_hash_lookup_locked(r, digest))
		return KVT_ECORRUPT; /* one digest, two ids */
	ret = ns_prepare_locked(r, digest, canon, canon_len, &new_id);
	if (ret < 0)
		return ret;
	if (new_id != id) /* ns_reg_parse checks ids are 1, 2, ...; be sure */
		return KVT_ECORRUPT;
	ns_publish_locked(r, new_id);
	return 0;
}

/* ns_reg_parse word callback of ns_reg_load: the namespace's word from here on. */
static int ns_load_word(void *ctx, uint32_t id, uint64_t word)
{
	struct ns_registry *r = ctx;
	struct ns_entry *e = ns_entry_at(r, id); /* parsed before: published */
	uint64_t old = atomic_load_explicit(&e->word, memory_order_relaxed);

	atomic_store_explicit(&e->word, word, memory_order_relaxed);
	if (!old != !word)
		r->words_live += word ? 1u : (uint32_t)-1;
	r->word_recs++;
	return 0;
}

int ns_reg_load(struct ns_registry *r, int dir_fd)
{
	uint8_t *buf = NULL;
	size_t len = 0, got = 0, used = 0;
	uint32_t version = 0;
	struct stat st;
	int fd, ret;

	if (!r)
		return KVT_ENULL;
	if (dir_fd < 0)
		return -EBADF;
	pthread_mutex_lock(&r->file_lock);
	pthread_mutex_lock(&r->lock);
	if (r->dir_fd >= 0 || r->prepared) {
		ret = KVT_ESTATE;
		goto out;
	}
	fd = openat(dir_fd, NS_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = errno == ENOENT ? 0 : -errno;
		goto done;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto close;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)NS_HDR_LEN ||
	    (uint64_t)st.st_size > NS_FILE_MAX || (uint64_t)st.st_size > SIZE_MAX) {
		ret = S_ISREG(st.st_mode) ? KVT_ECORRUPT : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto close;
	}
	len = (size_t)st.st_size;
	buf = kvt_mem_alloc(r->mem, len);
	if (!buf) {
		ret = -ENOMEM;
		goto close;
	}
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto close;
		}
		if (n == 0)
			break; /* shrank under us: the parser reports it */
		got += (size_t)n;
	}
	ret = ns_reg_parse_ex(buf, got, ns_load_rec, ns_load_word, r, &used, &version);
	if (ret >= 0 && version != NS_FILE_V1 && used == got) {
		/* A clean append-only file: the first add opens it to append
		 * (a store that registers nothing never opens it for writing). */
		r->file_off = r->synced_off = used;
		r->rewrite = false;
		r->file_v3 = version == NS_FILE_V3;
	}
close:
	if (fd >= 0)
		close(fd);
done:
	if (ret < 0) {
		ns_clear_locked(r);
	} else {
		ret = 0;
		r->dir_fd = dir_fd;
		/* Left by a crash between create and rename: never read. */
		unlinkat(dir_fd, NS_FILE_TMP, 0);
	}
out:
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&r->file_lock);
	kvt_mem_free(r->mem, buf, len);
	return ret;
}

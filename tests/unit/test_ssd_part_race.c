/*
 * test_ssd_part_race.c - quiet part reads (KVT_F_PART | KVT_F_QUIET, the
 * SSD's ssd_read_part) against a tiny SSD tier under constant
 * reclamation: a writer deletes and puts again a few hot keys with a new
 * version each time, between puts of filler keys that keep the log
 * turning (4 segments of 1 MiB, reused in place); a promoter reads the hot
 * keys whole (plain gets: promotions, the read marks that make
 * reclamation carry a record, and, as DRAM's victim tier, promotions
 * dropping the SSD's entry); readers read single parts, into one buffer,
 * into several unaligned ones, into one a byte too small.
 *
 * Every answer KVT_OK must be exactly the bytes of a version of that key
 * and part current at some instant of the call (not deleted before it
 * began, put before it ended); a miss is allowed.  The values are built so
 * that the CRC32C cannot tell them apart: every part p of every key and
 * version is the same base bytes with the version's identity XORed in as
 * the CRC32C polynomial's 5 bytes at stride 8 (which keeps the CRC), and
 * every record has the same length, so a record written over another's
 * place holds its parts at the same offsets with the same CRCs.  Only the
 * tier's own checks of the index (the same seq, not PENDING) can stop
 * another record's bytes; the identity says whose bytes came back.  And
 * since nothing is corrupt, no header or CRC error may be counted.
 *
 * A few seconds in all (it runs under TSan in CI): both I/O backends
 * (KVT_TEST_IO=uring|psync picks one), admission always and victim.
 *
 * At format 3 (the default; test_ssd_part_race_fmt2 runs format 2, whose
 * values have four parts) every value is put as one part, so that the SSD
 * writes them in batches, and a part read asks for part 0, the whole
 * value, read whole and checked by its value_crc (ssd.c
 * part_batched_start); each of its four windows is checked as a part
 * above.  The value_crc binds the key and seq, so
 * another value's bytes would fail it (a CRC error, asserted 0) if the
 * index's checks missed a reuse.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kvt_int.h"
#include "t.h"
#include "tstore.h"

#define PARTS 4
#define HOT 8
#define FILLERS 2000
#define FILLER0 100
#define ID_BITS 32
#define ID_AT 16 /* the identity's first window */

/* Parts 0 and 1 lie in the first read's 4 KiB, 2 crosses its end, 3 is
 * past it: every kind of part read. */
static const size_t lens[PARTS] = { 600, 2500, 6000, 9000 };
#define VALUE_LEN (600 + 2500 + 6000 + 9000)

/* The CRC32C polynomial as a bit-reflected message: XORed in anywhere it
 * leaves a run's CRC32C as it was. */
static const unsigned char crc_d[5] = { 0xf1, 0x76, 0xec, 0x05, 0x01 };

static const char *io_backend = "uring";
static unsigned char *base[PARTS];
static bool one_part; /* t_ssd_format3(): values of one part, batched */

static size_t off_of(unsigned p)
{
	size_t off = 0;
	for (unsigned i = 0; i < p; i++)
		off += lens[i];
	return off;
}

/* A version's identity: key in the high 12 bits, version in the low 20. */
static uint32_t id_of(uint64_t key, uint64_t version)
{
	return (uint32_t)(key << 20 | (version & 0xfffff));
}

static void gen_part(unsigned char *out, unsigned p, uint32_t id)
{
	memcpy(out, base[p], lens[p]);
	for (unsigned b = 0; b < ID_BITS; b++)
		if (id >> b & 1)
			for (unsigned j = 0; j < sizeof(crc_d); j++)
				out[ID_AT + 8 * b + j] ^= crc_d[j];
}

/* The identity part p's bytes carry, or -1 if they are no version's. */
static int64_t decode_part(const unsigned char *got, unsigned p)
{
	uint32_t id = 0;
	for (unsigned b = 0; b < ID_BITS; b++) {
		const unsigned char *w = got + ID_AT + 8 * b, *bw = base[p] + ID_AT + 8 * b;
		bool zero = true, one = true;
		for (unsigned j = 0; j < sizeof(crc_d); j++) {
			zero = zero && w[j] == bw[j];
			one = one && (w[j] ^ bw[j]) == crc_d[j];
		}
		if (!zero && !one)
			return -1;
		id |= (uint32_t)one << b;
	}
	return id;
}

struct race {
	struct kvt_store *s;
	uint32_t ns;
	_Atomic int stop;
	/* Per hot key: versions below lo were deleted (the delete returned);
	 * versions up to hi may have been put (the put began). */
	_Atomic uint64_t lo[HOT], hi[HOT];
	_Atomic uint64_t ok, miss, small, wrong_shape;
};

static void put_value(struct race *rc, uint64_t key, uint64_t version)
{
	unsigned char *buf = malloc(VALUE_LEN);
	struct iovec v[PARTS];
	struct kvt_key k = t_key(key);
	int r;
	T_ASSERT(buf);
	for (unsigned p = 0; p < PARTS; p++) {
		gen_part(buf + off_of(p), p, id_of(key, version));
		v[p] = (struct iovec){ buf + off_of(p), lens[p] };
	}
	if (one_part)
		v[0].iov_len = VALUE_LEN;
	r = kvt_put(rc->s, rc->ns, &k, v, one_part ? 1 : PARTS);
	if (r != KVT_OK && r != KVT_EFULL && r != KVT_EXISTS)
		T_FAIL("put of key %llu: %s", (unsigned long long)key, kvt_strerror(r));
	free(buf);
}

/* Check an answer of key (a hot one) and part p: exact bytes of a version
 * current at some instant of the call ([lo before, hi after]). */
static void check(uint64_t key, unsigned p, const unsigned char *got, uint64_t lo, uint64_t hi,
		  const char *what)
{
	unsigned char want[9000];
	int64_t id = decode_part(got, p);
	uint64_t version;
	if (id < 0)
		T_FAIL("%s: key %llu part %u: bytes of no version", what, (unsigned long long)key,
		       p);
	if ((uint64_t)id >> 20 != key)
		T_FAIL("%s: key %llu part %u: the bytes of key %llu version %llu", what,
		       (unsigned long long)key, p, (unsigned long long)((uint64_t)id >> 20),
		       (unsigned long long)(id & 0xfffff));
	version = (uint64_t)id & 0xfffff;
	gen_part(want, p, (uint32_t)id);
	if (memcmp(got, want, lens[p]) != 0)
		T_FAIL("%s: key %llu part %u: version %llu's identity, other bytes", what,
		       (unsigned long long)key, p, (unsigned long long)version);
	if (version < (lo & 0xfffff) || version > (hi & 0xfffff))
		T_FAIL("%s: key %llu part %u: version %llu, not current during the call "
		       "[%llu, %llu]",
		       what, (unsigned long long)key, p, (unsigned long long)version,
		       (unsigned long long)lo, (unsigned long long)hi);
}

/* Fillers, and every HOT_EVERY puts a hot key's next version (delete,
 * then put): a hot key is put again every HOT * HOT_EVERY puts, more than
 * the SSD's lap, so its record is reclaimed (dropped, or carried if read)
 * as often as it is replaced. */
#define HOT_EVERY 40

static void *writer(void *arg)
{
	struct race *rc = arg;
	uint64_t cur[HOT] = { 0 }, n = 0;
	int r;
	while (!atomic_load(&rc->stop)) {
		uint64_t fk = FILLER0 + n % FILLERS;
		struct kvt_key f = t_key(fk);
		if (n % HOT_EVERY == 0) {
			uint64_t k = n / HOT_EVERY % HOT;
			struct kvt_key key = t_key(k);
			r = kvt_delete(rc->s, rc->ns, &key);
			T_ASSERT(r == KVT_OK || r == KVT_MISS);
			atomic_store(&rc->lo[k], cur[k] + 1);
			atomic_store(&rc->hi[k], cur[k] + 1);
			put_value(rc, k, ++cur[k]);
		}
		r = kvt_delete(rc->s, rc->ns, &f);
		T_ASSERT(r == KVT_OK || r == KVT_MISS);
		put_value(rc, fk, n++ / FILLERS);
		/* Pace on the write-down backlog: blocks must reach the SSD
		 * (and the log turn), not be shed. */
		while (t_stat(rc->s, "ssd.writedown_pending_bytes") > (128u << 10) &&
		       !atomic_load(&rc->stop))
			usleep(200);
	}
	return NULL;
}

/* Plain gets of the hot keys: promotions (and the read marks). */
static void *promoter(void *arg)
{
	struct race *rc = arg;
	unsigned char *buf = malloc(VALUE_LEN);
	unsigned seed = 7;
	T_ASSERT(buf);
	while (!atomic_load(&rc->stop)) {
		uint64_t k = (uint64_t)rand_r(&seed) % HOT, vl = 0;
		struct kvt_key key = t_key(k);
		uint64_t lo = atomic_load(&rc->lo[k]);
		int r = kvt_get(rc->s, rc->ns, &key, buf, VALUE_LEN, &vl);
		uint64_t hi = atomic_load(&rc->hi[k]);
		if (r == KVT_MISS)
			continue;
		T_RC(r, KVT_OK);
		T_EQ_U64(vl, VALUE_LEN);
		for (unsigned p = 0; p < PARTS; p++)
			check(k, p, buf + off_of(p), lo, hi, "plain get");
		usleep(2000); /* not so many that DRAM holds every hot block */
	}
	free(buf);
	return NULL;
}

/* Quiet part gets of the hot keys, into buffers of three shapes. */
static void *reader(void *arg)
{
	struct race *rc = arg;
	unsigned char *mem = malloc(32768 + 64), *got = malloc(VALUE_LEN);
	unsigned seed = (unsigned)(uintptr_t)arg ^ 0x5eed;
	struct kvt_queue *q;
	T_ASSERT(mem && got);
	T_OK(kvt_queue_create(rc->s, &q));
	while (!atomic_load(&rc->stop)) {
		uint64_t k = (uint64_t)rand_r(&seed) % HOT;
		unsigned p = one_part ? 0 : (unsigned)rand_r(&seed) % PARTS;
		unsigned shape = (unsigned)rand_r(&seed) % 3;
		size_t len = one_part ? VALUE_LEN : lens[p];
		struct kvt_req r, *rp = &r, *done;
		struct iovec v[3];
		unsigned vc = 1;
		uint64_t lo, hi;
		if (shape == 0) { /* one buffer, larger than the part */
			v[0] = (struct iovec){ mem, 32768 };
		} else if (shape == 1) { /* three, unaligned */
			v[0] = (struct iovec){ mem + 1, 1000 };
			v[1] = (struct iovec){ mem + 1003, 3001 };
			v[2] = (struct iovec){ mem + 4007, 28000 };
			vc = 3;
		} else { /* a byte short */
			v[0] = (struct iovec){ mem + 3, len - 1 };
		}
		memset(&r, 0, sizeof(r));
		r.op = KVT_OP_GET;
		r.flags = KVT_F_PART | KVT_F_QUIET;
		r.part = p;
		r.ns = rc->ns;
		r.key = t_key(k);
		r.iov = v;
		r.iov_count = vc;
		lo = atomic_load(&rc->lo[k]);
		T_RC(kvt_submit(q, &rp, 1), 1);
		T_RC(kvt_queue_wait(q, &done, 1, 30000), 1);
		hi = atomic_load(&rc->hi[k]);
		if (r.status == KVT_MISS) {
			atomic_fetch_add(&rc->miss, 1);
			continue;
		}
		if (shape == 2) {
			T_RC(r.status, KVT_EBUFSMALL);
			T_EQ_U64(r.value_len, VALUE_LEN);
			atomic_fetch_add(&rc->small, 1);
			continue;
		}
		T_RC(r.status, KVT_OK);
		T_EQ_U64(r.length, len);
		T_EQ_U64(r.value_len, VALUE_LEN);
		/* Gather what the iovecs got. */
		for (unsigned i = 0, at = 0; i < vc && at < len; i++) {
			size_t n = v[i].iov_len < len - at ? v[i].iov_len : len - at;
			memcpy(got + at, v[i].iov_base, n);
			at += (unsigned)n;
		}
		if (one_part)
			for (unsigned w = 0; w < PARTS; w++)
				check(k, w, got + off_of(w), lo, hi, "quiet part get (batched)");
		else
			check(k, p, got, lo, hi, "quiet part get");
		atomic_fetch_add(&rc->ok, 1);
	}
	T_OK(kvt_queue_destroy(q));
	free(mem);
	free(got);
	return NULL;
}

static void run(const char *admission, unsigned ms)
{
	char *dir = t_mkdtemp();
	struct race *rc = calloc(1, sizeof(*rc));
	pthread_t th[5];
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	T_ASSERT(rc);
	/* 1 MiB of DRAM (~50 values): a hot block is on the SSD only for most
	 * of its life, and the SSD's 4 slots (~200 records) are reused in
	 * place every ~50 records. */
	rc->s = t_store_open("path", dir, "dram.capacity", "1M", "dram.chunk", "4K",
			     "dram.prefault", "off", "ssd.capacity",
			     "4M", "ssd.segment", "1M", "ssd.admission", admission,
			     "ssd.reinsert_pct", "50", "ssd.io", io_backend, NULL);
	rc->ns = t_ns(rc->s, "part-race");
	for (uint64_t k = 0; k < HOT; k++)
		put_value(rc, k, 0);
	T_EQ_INT(pthread_create(&th[0], NULL, writer, rc), 0);
	T_EQ_INT(pthread_create(&th[1], NULL, promoter, rc), 0);
	for (uintptr_t i = 0; i < 3; i++)
		T_EQ_INT(pthread_create(&th[2 + i], NULL, reader, rc), 0);
	nanosleep(&ts, NULL);
	/* The race must have run: on a loaded machine (each delete waits for
	 * its tombstone's flush) the log may not have turned within ms --
	 * go on, up to 20 s more, until it has and a part came from SSD. */
	for (unsigned w = 0; w < 400 && (t_stat(rc->s, "ssd.segments_evicted") == 0 ||
					 t_stat(rc->s, "ssd.part_reads") == 0); w++)
		nanosleep(&(struct timespec){ 0, 50000000L }, NULL);
	atomic_store(&rc->stop, 1);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	fprintf(stderr,
		"%s, %s: %llu part reads ok (%llu from SSD), %llu misses, %llu short buffers; "
		"%llu segments reused, %llu carried, crc errors %llu, header errors %llu, "
		"%llu values batched, %llu reads started over\n",
		io_backend, admission, (unsigned long long)rc->ok,
		(unsigned long long)t_stat(rc->s, "ssd.part_reads"),
		(unsigned long long)rc->miss, (unsigned long long)rc->small,
		(unsigned long long)t_stat(rc->s, "ssd.segments_evicted"),
		(unsigned long long)t_stat(rc->s, "ssd.carried_blocks"),
		(unsigned long long)t_stat(rc->s, "ssd.crc_errors"),
		(unsigned long long)t_stat(rc->s, "ssd.header_errors"),
		(unsigned long long)t_stat(rc->s, "ssd.batched_blocks"),
		(unsigned long long)t_stat(rc->s, "ssd.part_relocated"));
	T_ASSERT(t_stat(rc->s, "ssd.segments_evicted") > 0);
	if (one_part)
		T_ASSERT(t_stat(rc->s, "ssd.batched_blocks") > 0);
	T_ASSERT(t_stat(rc->s, "ssd.part_reads") > 0);
	/* Nothing here is corrupt: a read that raced reclamation is a plain
	 * miss (its entry gone or PENDING when looked up again), never a
	 * header or CRC error -- those mean the device lost bytes. */
	T_EQ_U64(t_stat(rc->s, "ssd.crc_errors"), 0);
	T_EQ_U64(t_stat(rc->s, "ssd.header_errors"), 0);
	kvt_store_destroy(rc->s);
	free(rc);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	const char *only = getenv("KVT_TEST_IO");
	const char *backends[2] = { "uring", "psync" };
	unsigned ms = getenv("KVT_RACE_MS") ? (unsigned)atoi(getenv("KVT_RACE_MS")) : 1000;

	one_part = t_ssd_format3();

	for (unsigned p = 0; p < PARTS; p++) {
		base[p] = malloc(lens[p]);
		T_ASSERT(base[p]);
		t_fill(base[p], lens[p], 1000 + p);
		/* The identity's windows keep the part's CRC32C. */
		{
			unsigned char *x = malloc(lens[p]);
			T_ASSERT(x);
			gen_part(x, p, 0xffffffffu);
			T_EQ_U64(kvt_crc32c(0, x, lens[p]), kvt_crc32c(0, base[p], lens[p]));
			free(x);
		}
	}
	for (int b = 0; b < 2; b++) {
		if (only && strcmp(only, backends[b]))
			continue;
		io_backend = backends[b];
		run("always", ms);
		run("victim", ms);
	}
	for (unsigned p = 0; p < PARTS; p++)
		free(base[p]);
	return 0;
}

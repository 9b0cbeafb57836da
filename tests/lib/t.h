/*
 * t.h - the typed asserts every test program uses.
 *
 * A failed check prints file, line, the expression and both sides, then
 * exits 1.  Exit codes follow automake: 0 pass, 1 fail, 77 skip.
 * T_SKIP("why") exits 77.  Helpers for kvtier results print kvt_strerror().
 */
#ifndef KVT_TEST_T_H
#define KVT_TEST_T_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "kvtier.h"

/* T_TSAN: 1 in a ThreadSanitizer build (gcc or clang), else 0 -- for the
 * few bounds measured in other builds that TSan's slowed threads move. */
#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif
#ifndef T_TSAN
#define T_TSAN 0
#endif

#define T_FAIL(...)                                                        \
	do {                                                               \
		fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);      \
		fprintf(stderr, __VA_ARGS__);                              \
		fprintf(stderr, "\n");                                     \
		exit(1);                                                   \
	} while (0)

#define T_SKIP(...)                                                        \
	do {                                                               \
		fprintf(stderr, "SKIP: ");                                 \
		fprintf(stderr, __VA_ARGS__);                              \
		fprintf(stderr, "\n");                                     \
		exit(77);                                                  \
	} while (0)

#define T_ASSERT(c)                                                        \
	do {                                                               \
		if (!(c))                                                  \
			T_FAIL("%s", #c);                                  \
	} while (0)

#define T_EQ_INT(a, b)                                                     \
	do {                                                               \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);    \
		if (t_a_ != t_b_)                                          \
			T_FAIL("%s == %s: %lld != %lld", #a, #b, t_a_, t_b_); \
	} while (0)

#define T_EQ_U64(a, b)                                                     \
	do {                                                               \
		uint64_t t_a_ = (uint64_t)(a), t_b_ = (uint64_t)(b);       \
		if (t_a_ != t_b_)                                          \
			T_FAIL("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, t_a_, t_b_); \
	} while (0)

#define T_NE_INT(a, b)                                                     \
	do {                                                               \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);    \
		if (t_a_ == t_b_)                                          \
			T_FAIL("%s != %s: both %lld", #a, #b, t_a_);       \
	} while (0)

/* An order's operands compare as 128-bit integers, so every value of a
 * 64-bit type keeps its sign: a uint64_t "never" (UINT64_MAX) is not -1
 * below any bound, as it was through long long. */
struct t_i128_buf {
	char s[42];
};
static inline struct t_i128_buf t_i128(__int128 v)
{
	struct t_i128_buf b;
	char tmp[42];
	unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
	int n = 0, k = 0;
	do
		tmp[n++] = (char)('0' + (int)(u % 10));
	while ((u /= 10) != 0);
	if (v < 0)
		b.s[k++] = '-';
	while (n)
		b.s[k++] = tmp[--n];
	b.s[k] = 0;
	return b;
}

#define T_GE_INT(a, b)                                                     \
	do {                                                               \
		__int128 t_a_ = (__int128)(a), t_b_ = (__int128)(b);       \
		if (!(t_a_ >= t_b_))                                       \
			T_FAIL("%s >= %s: %s < %s", #a, #b, t_i128(t_a_).s, \
			       t_i128(t_b_).s);                             \
	} while (0)

#define T_LE_INT(a, b)                                                     \
	do {                                                               \
		__int128 t_a_ = (__int128)(a), t_b_ = (__int128)(b);       \
		if (!(t_a_ <= t_b_))                                       \
			T_FAIL("%s <= %s: %s > %s", #a, #b, t_i128(t_a_).s, \
			       t_i128(t_b_).s);                             \
	} while (0)

#define T_EQ_STR(a, b)                                                     \
	do {                                                               \
		const char *t_a_ = (a), *t_b_ = (b);                       \
		if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_) != 0)            \
			T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b,       \
			       t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)"); \
	} while (0)

#define T_EQ_MEM(a, b, n)                                                  \
	do {                                                               \
		const unsigned char *t_a_ = (const void *)(a), *t_b_ = (const void *)(b); \
		size_t t_n_ = (n);                                         \
		for (size_t t_i_ = 0; t_i_ < t_n_; t_i_++)                 \
			if (t_a_[t_i_] != t_b_[t_i_])                      \
				T_FAIL("%s == %s: first difference at byte %zu of %zu " \
				       "(0x%02x != 0x%02x)", #a, #b, t_i_, t_n_, \
				       t_a_[t_i_], t_b_[t_i_]);            \
	} while (0)

/* A kvtier call that must return exactly `want` (a code). */
#define T_RC(call, want)                                                   \
	do {                                                               \
		long long t_r_ = (long long)(call), t_w_ = (long long)(want); \
		if (t_r_ != t_w_)                                          \
			T_FAIL("%s: got %lld (%s), want %lld (%s)", #call, t_r_, \
			       kvt_strerror((int)t_r_), t_w_, kvt_strerror((int)t_w_)); \
	} while (0)

/* A kvtier call that must succeed (>= 0). */
#define T_OK(call)                                                         \
	do {                                                               \
		long long t_r_ = (long long)(call);                        \
		if (t_r_ < 0)                                              \
			T_FAIL("%s: %lld (%s)", #call, t_r_, kvt_strerror((int)t_r_)); \
	} while (0)

/* Deterministic bytes derived from a seed: the same seed gives the same bytes. */
static inline void t_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
		uint64_t v = x * 0x2545F4914F6CDD1Dull;
		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++) {
		x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
		p[i] = (unsigned char)(x * 0x2545F4914F6CDD1Dull >> 56);
	}
}

/*
 * A buffer of len bytes whose last byte sits just before a PROT_NONE page,
 * holding a copy of src (if not NULL): a parser that reads past len faults
 * (picohttpparser's test).  len <= T_GUARD_AREA; each call reuses the area.
 */
#define T_GUARD_AREA (4u << 20)
uint8_t *t_at_guard(const void *src, size_t len);

/* A temporary directory under $TMPDIR (or /tmp); removed by t_rmdir. */
char *t_mkdtemp(void);
void t_rmtree(const char *path);
/* Does any file under dir (which must exist) hold the bytes of pat? */
bool t_dir_contains(const char *dir, const char *pat);
/* Run the shell command cmd with its stdout and stderr into the files
 * out and err of dir (which must exist), then read back into *out and
 * *err (NUL-terminated, at most 1 MiB - 1 bytes each, freed by the
 * caller; either may be NULL: not kept): its exit status.  A command
 * that did not exit (killed by a signal) fails the test. */
int t_sh_capture(const char *dir, const char *cmd, char **out, char **err);

/*
 * A loopback TCP port nothing is bound to now, for a server the test starts
 * with it: drawn below the kernel's ephemeral range (ip_local_port_range),
 * so that no outgoing connection -- the other tests' thousands, or the
 * server's own components talking to each other -- takes it as its source
 * port before the server binds it.  bind(0) handed out ports in that range:
 * under a parallel test run, a SeaweedFS needing 11 of them lost one 5
 * starts in a row ("Port allocation failed", test_s3).  Falls back to
 * bind(0) where the range leaves no room below it.
 */
uint16_t t_free_port(void);

/*
 * A fake HTTP server's read of one request from fd: its head into hdr
 * (at most cap - 1 bytes, NUL-terminated at the blank line), then
 * Content-Length bytes of body into *body (malloc'd, NUL-terminated;
 * the caller frees it).  false: the peer closed, failed or the head did
 * not fit.
 */
bool t_http_read(int fd, char *hdr, size_t cap, uint8_t **body, size_t *body_len);

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif

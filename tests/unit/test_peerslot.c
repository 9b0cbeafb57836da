/*
 * test_peerslot.c - the per-address slots of kvtierd's limits on
 * unauthenticated connections and AUTH failures (kvtd_peer_slot,
 * daemon/base.c): an IPv6 /64 is one peer (a client owning a /64 could
 * otherwise open 256 unauthenticated connections, and guess 20 secrets a
 * second, from each of its 2^64 addresses); an IPv4-mapped address is
 * its IPv4 one (a dual-stack listener sees those); distinct peers spread
 * over the slots; the slots depend on the server's random key.  The
 * failure throttle (kvtd_throttle_over/_fail): an address sharing one
 * row's slot with a flooding one is not refused (session 48).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "kvtierd.h"
#include "t.h"

static struct sockaddr_storage v6(const char *text)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	a->sin6_family = AF_INET6;
	T_EQ_INT(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
	return ss;
}

static struct sockaddr_storage v4(const char *text)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	a->sin_family = AF_INET;
	T_EQ_INT(inet_pton(AF_INET, text, &a->sin_addr), 1);
	return ss;
}

static uint32_t slot(uint64_t key, struct sockaddr_storage ss)
{
	uint32_t s = kvtd_peer_slot(key, &ss, false, 0);
	T_ASSERT(s < KVTD_PEER_SLOTS);
	return s;
}

/* A /64 is one peer, whatever its host bits (and the port). */
static void test_v6_prefix(void)
{
	const uint64_t key = 0x1234567890abcdefull;
	uint32_t s = slot(key, v6("2001:db8:1:2::1"));
	struct sockaddr_storage p = v6("2001:db8:1:2:ffff:ffff:ffff:fffe");

	((struct sockaddr_in6 *)&p)->sin6_port = htons(4242);
	T_EQ_INT(slot(key, v6("2001:db8:1:2:dead:beef:0:7")), s);
	T_EQ_INT(slot(key, p), s);
	/* Another /64 of the same /48: another peer (almost always another
	 * slot; these two are not, under this key). */
	T_NE_INT(slot(key, v6("2001:db8:1:3::1")), s);
}

/* ::ffff:a.b.c.d is a.b.c.d; IPv4 addresses are peers of their own. */
static void test_v4_mapped(void)
{
	const uint64_t key = 77;

	T_EQ_INT(slot(key, v6("::ffff:192.0.2.7")), slot(key, v4("192.0.2.7")));
	T_NE_INT(slot(key, v6("::ffff:192.0.2.7")), slot(key, v6("::ffff:192.0.2.8")));
	T_NE_INT(slot(key, v4("127.0.0.1")), slot(key, v4("127.0.0.2")));
	{
		/* A Unix client is its user id: two users, two peers (under
		 * this key); one user, one peer whatever the address. */
		struct sockaddr_storage u, w;
		memset(&u, 0, sizeof(u));
		memset(&w, 0xab, sizeof(w));
		u.ss_family = w.ss_family = AF_UNIX;
		T_EQ_INT(kvtd_peer_slot(key, &u, true, 1000), kvtd_peer_slot(key, &w, true, 1000));
		T_NE_INT(kvtd_peer_slot(key, &u, true, 1000), kvtd_peer_slot(key, &u, true, 0));
		T_ASSERT(kvtd_peer_slot(key, &u, true, 65534) < KVTD_PEER_SLOTS);
	}
}

/* 2000 distinct /64s use most slots; another key puts them elsewhere. */
static void test_spread(void)
{
	static uint8_t used[KVTD_PEER_SLOTS];
	unsigned distinct = 0, moved = 0;

	for (unsigned i = 0; i < 2000; i++) {
		char text[64];
		uint32_t a, b;
		snprintf(text, sizeof(text), "2001:db8:%x:%x::1", i >> 8, i & 0xff);
		a = slot(1, v6(text));
		b = slot(2, v6(text));
		if (!used[a]++)
			distinct++;
		if (a != b)
			moved++;
	}
	printf("peerslot: 2000 /64s in %u slots of %u; %u of 2000 in another slot under "
	       "another key\n", distinct, KVTD_PEER_SLOTS, moved);
	/* Uniform: 4096 * (1 - e^(-2000/4096)) = 1584 expected. */
	T_GE_INT(distinct, 1450);
	T_GE_INT(moved, 1950);
}

static struct kvtd_throttle thr; /* 64 KiB: not on the stack */

static void addr_slots(const uint64_t *keys, struct sockaddr_storage ss, uint32_t *s)
{
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++)
		s[r] = slot(keys[r], ss);
}

/*
 * A flooder at 127.0.0.1 fails 1,000 times in a second; an innocent
 * loopback address whose first row's slot is the flooder's (found under
 * these keys, as an attacker who knew them would: the keys are random
 * per server, so none can) is not throttled, and is after 20 failures of
 * its own; the next second starts afresh.  With one row (the code before
 * session 48: every address in one slot of 4,096) the innocent was
 * refused for the rest of the flooder's second.
 */
static void test_throttle_collision(void)
{
	const uint64_t keys[KVTD_PEER_ROWS] = {0x5eed0001ull, 0x5eed0002ull};
	const uint64_t sec = 1234;
	uint32_t fl[KVTD_PEER_ROWS], in[KVTD_PEER_ROWS];
	char text[32];
	unsigned tries = 0;

	memset(&thr, 0, sizeof(thr));
	addr_slots(keys, v4("127.0.0.1"), fl);
	for (unsigned i = 2;; i++) {
		T_ASSERT(i < (1u << 24));
		snprintf(text, sizeof(text), "127.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		addr_slots(keys, v4(text), in);
		tries++;
		if (in[0] == fl[0] && in[1] != fl[1])
			break;
	}
	printf("peerslot: %s shares row 0's slot %u with 127.0.0.1 (found in %u tries); "
	       "row 1: %u against %u\n", text, in[0], tries, in[1], fl[1]);
	for (unsigned k = 0; k < 1000; k++)
		kvtd_throttle_fail(&thr, fl, sec);
	T_ASSERT(kvtd_throttle_over(&thr, fl, sec, KVTD_AUTH_FAILS_PER_SEC));
	/* The innocent: not refused while its own failures are under 20. */
	T_ASSERT(!kvtd_throttle_over(&thr, in, sec, KVTD_AUTH_FAILS_PER_SEC));
	for (unsigned k = 0; k < KVTD_AUTH_FAILS_PER_SEC - 1; k++) {
		kvtd_throttle_fail(&thr, in, sec);
		T_ASSERT(!kvtd_throttle_over(&thr, in, sec, KVTD_AUTH_FAILS_PER_SEC));
	}
	kvtd_throttle_fail(&thr, in, sec);
	T_ASSERT(kvtd_throttle_over(&thr, in, sec, KVTD_AUTH_FAILS_PER_SEC));
	/* The next second: neither until it fails again. */
	T_ASSERT(!kvtd_throttle_over(&thr, fl, sec + 1, KVTD_AUTH_FAILS_PER_SEC));
	T_ASSERT(!kvtd_throttle_over(&thr, in, sec + 1, KVTD_AUTH_FAILS_PER_SEC));
	/* An address whose slots are both a flooder's (one of 4,096^2 under
	 * random keys) is refused with them: the bound on what a flood can
	 * take.  Two flooders cover one address's two slots. */
	{
		uint32_t f2[KVTD_PEER_ROWS] = {in[0] ^ 1u, in[1]};
		memset(&thr, 0, sizeof(thr));
		for (unsigned k = 0; k < 100; k++)
			kvtd_throttle_fail(&thr, f2, sec);
		T_ASSERT(!kvtd_throttle_over(&thr, in, sec, KVTD_AUTH_FAILS_PER_SEC));
		for (unsigned k = 0; k < 100; k++)
			kvtd_throttle_fail(&thr, fl, sec);
		T_ASSERT(kvtd_throttle_over(&thr, in, sec, KVTD_AUTH_FAILS_PER_SEC));
	}
}

static _Atomic uint64_t unauth[KVTD_PEER_ROWS][KVTD_PEER_SLOTS];

/*
 * The unauthenticated connections' count (kvtd_peer_count_add/_sub,
 * session 48 review): 127.0.0.1 holds 256 (KVTD_UNAUTH_PEER_MAX) and
 * its next sees 256, at its cap; a loopback address sharing its row-0
 * slot (not its row-1 one) sees its own count, 0, and is held to 256 of
 * its own; every add taken back leaves every slot at 0.  With one row
 * (the code before: peer_unauth[peer_slot]) the neighbour's first
 * connection saw 256 and was refused.
 */
static void test_unauth_rows(void)
{
	const uint64_t keys[KVTD_PEER_ROWS] = {0x5eed0001ull, 0x5eed0002ull};
	uint32_t fl[KVTD_PEER_ROWS], in[KVTD_PEER_ROWS], f2[KVTD_PEER_ROWS];
	char text[32];

	memset(unauth, 0, sizeof(unauth));
	addr_slots(keys, v4("127.0.0.1"), fl);
	for (unsigned i = 2;; i++) {
		T_ASSERT(i < (1u << 24));
		snprintf(text, sizeof(text), "127.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		addr_slots(keys, v4(text), in);
		if (in[0] == fl[0] && in[1] != fl[1])
			break;
	}
	for (unsigned k = 0; k < KVTD_UNAUTH_PEER_MAX; k++)
		T_EQ_INT(kvtd_peer_count_add(unauth, fl, 1), k);
	T_EQ_INT(kvtd_peer_count_add(unauth, fl, 1), KVTD_UNAUTH_PEER_MAX); /* at its cap */
	kvtd_peer_count_sub(unauth, fl, 1);
	printf("peerslot: %s beside 127.0.0.1's %u unauthenticated: its count %llu\n", text,
	       KVTD_UNAUTH_PEER_MAX, (unsigned long long)kvtd_peer_count_add(unauth, in, 1));
	kvtd_peer_count_sub(unauth, in, 1);
	/* The neighbour is counted by its own connections, to its own cap */
	for (unsigned k = 0; k < KVTD_UNAUTH_PEER_MAX; k++)
		T_EQ_INT(kvtd_peer_count_add(unauth, in, 1), k);
	T_EQ_INT(kvtd_peer_count_add(unauth, in, 1), KVTD_UNAUTH_PEER_MAX);
	kvtd_peer_count_sub(unauth, in, 1);
	/* An address both of whose slots hold others' (a flooder in each
	 * row) is counted with them: refused early, never admitted past */
	f2[0] = fl[0], f2[1] = in[1]; /* 512 in row 0's slot, the neighbour's 256 in row 1's */
	T_EQ_INT(kvtd_peer_count_add(unauth, f2, 1), KVTD_UNAUTH_PEER_MAX);
	kvtd_peer_count_sub(unauth, f2, 1);
	f2[0] = fl[0] ^ 1u; /* an empty slot in row 0: its own count, 0 */
	T_EQ_INT(kvtd_peer_count_add(unauth, f2, 1), 0);
	kvtd_peer_count_sub(unauth, f2, 1);
	/* Every add taken back: every slot of every row at 0 */
	for (unsigned k = 0; k < KVTD_UNAUTH_PEER_MAX; k++) {
		kvtd_peer_count_sub(unauth, fl, 1);
		kvtd_peer_count_sub(unauth, in, 1);
	}
	for (unsigned r = 0; r < KVTD_PEER_ROWS; r++)
		for (unsigned k = 0; k < KVTD_PEER_SLOTS; k++)
			T_EQ_INT(atomic_load(&unauth[r][k]), 0);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The cost at an accept: each row's slot of a fresh address, and the
 * throttle's check (printed; the one-row figure, kvtd_peer_slot once and
 * one slot read, is what a TLS accept cost before session 48). */
static void bench_throttle(void)
{
	const uint64_t keys[KVTD_PEER_ROWS] = {11, 12};
	const unsigned n = 500000;
	volatile unsigned sink = 0;
	double one = 1e9, two = 1e9;

	memset(&thr, 0, sizeof(thr));
	/* best of 7 rounds each, interleaved: the machine is shared */
	for (unsigned round = 0; round < 7; round++) {
		double t0 = now_s(), t1, t2;
		for (unsigned i = 0; i < n; i++) {
			struct sockaddr_storage ss;
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			uint32_t s1;
			ss.ss_family = AF_INET;
			a->sin_addr.s_addr = i + round * n;
			s1 = kvtd_peer_slot(keys[0], &ss, false, 0);
			sink += atomic_load_explicit(&thr.sec[0][s1], memory_order_relaxed) == 7 &&
				atomic_load_explicit(&thr.fails[0][s1], memory_order_relaxed) >= 20;
		}
		t1 = now_s();
		for (unsigned i = 0; i < n; i++) {
			struct sockaddr_storage ss;
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			uint32_t s[KVTD_PEER_ROWS];
			ss.ss_family = AF_INET;
			a->sin_addr.s_addr = i + round * n;
			for (unsigned r = 0; r < KVTD_PEER_ROWS; r++)
				s[r] = kvtd_peer_slot(keys[r], &ss, false, 0);
			sink += kvtd_throttle_over(&thr, s, 7, 20);
		}
		t2 = now_s();
		if ((t1 - t0) * 1e9 / n < one)
			one = (t1 - t0) * 1e9 / n;
		if ((t2 - t1) * 1e9 / n < two)
			two = (t2 - t1) * 1e9 / n;
	}
	printf("peerslot: an accept's slots and check (best of 7): one row %.1f ns, %u rows "
	       "%.1f ns (sink %u)\n", one, KVTD_PEER_ROWS, two, sink);
}

int main(void)
{
	test_v6_prefix();
	test_v4_mapped();
	test_spread();
	test_throttle_collision();
	test_unauth_rows();
	bench_throttle();
	printf("test_peerslot: ok\n");
	return 0;
}

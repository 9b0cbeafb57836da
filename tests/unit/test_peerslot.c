/*
 * test_peerslot.c - the per-address slots of kvtierd's limits on
 * unauthenticated connections and AUTH failures (kvtd_peer_slot,
 * daemon/base.c): an IPv6 /64 is one peer (a client owning a /64 could
 * otherwise open 256 unauthenticated connections, and guess 20 secrets a
 * second, from each of its 2^64 addresses); an IPv4-mapped address is
 * its IPv4 one (a dual-stack listener sees those); distinct peers spread
 * over the slots; the slots depend on the server's random key.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
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

int main(void)
{
	test_v6_prefix();
	test_v4_mapped();
	test_spread();
	printf("test_peerslot: ok\n");
	return 0;
}

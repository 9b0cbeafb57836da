/*
 * fuzz_members.c - libFuzzer target for kvtierd's member lists
 * (daemon/memberlist.c): the static --members list and etcd's range
 * answers, both text from outside (an operator's config, an etcd that any
 * pod member may write to).
 *
 * The first byte picks the parser; the rest is its input.  Properties,
 * each a trap when broken:
 *   - a list that parses is sorted by address, without duplicates, every
 *     address passes kvtd_member_addr_ok and every weight is >= 1;
 *   - a static list's failure is -EINVAL with a message, or -ENOMEM;
 *   - an etcd answer's entries are all accounted for: kept or counted bad;
 *   - what a server registers (kvtd_members_self_value) for each member
 *     parses back to the same member when wrapped as an etcd answer.
 * Seed corpus: tests/fuzz/corpus/members/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"
#include "members.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "fuzz.h"

static void fuzz_check_list(const struct kvtd_member *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		FUZZ_CHECK(kvtd_member_addr_ok(v[i].addr, strlen(v[i].addr)));
		FUZZ_CHECK(v[i].weight >= 1 && v[i].weight <= KVTD_MEMBER_WEIGHT_MAX);
		if (i)
			FUZZ_CHECK(strcmp(v[i - 1].addr, v[i].addr) < 0);
	}
}

/* The member's registered value, as one entry of an etcd answer. */
static void fuzz_roundtrip(const struct kvtd_member *m)
{
	char *val = kvtd_members_self_value(m->addr, m->weight), *b64, *doc;
	struct kvtd_member *v;
	unsigned n, bad;

	if (!val)
		return;
	b64 = kvtd_b64_encode(val, strlen(val));
	doc = b64 ? malloc(strlen(b64) + 128) : NULL;
	if (doc) {
		sprintf(doc, "{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"a2V5\",\"value\":\"%s\"}]}",
			b64);
		if (kvtd_members_parse_etcd(doc, strlen(doc), &v, &n, &bad) == 0) {
			FUZZ_CHECK(n == 1 && bad == 0);
			FUZZ_CHECK(strcmp(v[0].addr, m->addr) == 0 && v[0].weight == m->weight);
			free(v);
		}
	}
	free(doc);
	free(b64);
	free(val);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvtd_member *v = NULL;
	unsigned n = 0, bad = 0;
	char *text, err[512];
	int rc;

	if (size < 1 || size > (1u << 16))
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	if (data[0] & 1) {
		rc = kvtd_members_parse_etcd(text, size - 1, &v, &n, &bad);
		FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	} else {
		err[0] = 0;
		rc = kvtd_members_parse_static(text, &v, &n, err, sizeof(err));
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM || (rc == -EINVAL && err[0]));
	}
	if (rc == 0) {
		fuzz_check_list(v, n);
		for (unsigned i = 0; i < n && i < 4; i++)
			fuzz_roundtrip(&v[i]);
	}
	free(v);
	free(text);
	return 0;
}

/*
 * fuzz_tenants.c - libFuzzer target for kvtierd's tenants-file parser
 * (kvtd_tenants_parse, daemon/auth.c: tenant lines with quotas, grant
 * lines) and its canonical-descriptor reader (kvtd_canon_parse,
 * kvtd_canon_tenant), which every NS_REGISTER and grant check runs on
 * client-supplied text.
 *
 * The first byte picks the parser; the rest is the untrusted text.
 * Properties: never a crash or a read outside the input; a tenants table
 * that parses installs, answers group and grant queries for the names in
 * it, and frees; a descriptor text that parses and that kvt_ns_digest
 * accepts hashes back to exactly the same text (the reader is strict: no
 * two texts register as one namespace).  Found by this target: a NUL
 * inside a value used to cut it short (regression seed canon-nul).  Returns 0
 * always; a broken property traps.  Seed corpus: tests/fuzz/corpus/tenants/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvtierd.h"
#include "fuzz.h"

static void fuzz_tenants(const char *text, size_t len)
{
	struct kvtd_tenants *t = NULL;
	char err[256];
	static const uint8_t zero[PROTO_DIGEST_LEN];

	if (kvtd_tenants_parse(text, len, &t, err, sizeof(err)) < 0) {
		FUZZ_CHECK(t == NULL && err[0] != 0);
		return;
	}
	FUZZ_CHECK(t != NULL);
	kvtd_auth_install(t);
	/* Queries over words of the input: whatever they are, no crash. */
	for (size_t p = 0; p < len && p < 4096;) {
		size_t e = p;
		while (e < len && text[e] != ' ' && text[e] != '\n')
			e++;
		if (e > p) {
			kvtd_tenant_group(text + p, e - p);
			kvtd_grant_allows(text + p, e - p, "shared-prompt", 13, zero, "bob", 3);
			kvtd_grant_allows("alice", 5, text + p, e - p, zero, text + p, e - p);
		}
		p = e + 1;
	}
	kvtd_auth_install(NULL);
}

static void fuzz_canon(const char *text, size_t len)
{
	struct kvt_ns_desc d;
	char *store, canon[PROTO_CANON_MAX + 1];
	const char *tn;
	uint8_t dg[PROTO_DIGEST_LEN];
	int tl, n;

	tl = kvtd_canon_tenant(text, len, &tn);
	FUZZ_CHECK(tl < 0 || (tn >= text && tn + tl <= text + len));
	store = malloc(len + 1);
	if (!store)
		return;
	if (kvtd_canon_parse(text, len, &d, store) == 0) {
		n = kvt_ns_digest(&d, dg, canon, sizeof(canon));
		FUZZ_CHECK(n < 0 || ((size_t)n == len && memcmp(canon, text, len) == 0));
	}
	free(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 16))
		return 0;
	if (data[0] & 1)
		fuzz_canon((const char *)data + 1, size - 1);
	else
		fuzz_tenants((const char *)data + 1, size - 1);
	return 0;
}

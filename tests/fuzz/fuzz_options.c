/*
 * fuzz_options.c - libFuzzer target for the store's option parser
 * (kvt_store_set_option, lib/store.c): what users hand it as name=value
 * strings, through kvtierd --set, the CLI's options and the Python
 * binding.
 *
 * The input is "name=value" lines (split at the first '='; a line without
 * one is a name with an empty value).  Each is set on a store that is
 * created, never opened, and destroyed at the end (LeakSanitizer checks
 * that every string an option kept is freed, including one replaced by a
 * later line).  Properties, each a trap when broken:
 *   - the result is 0, KVT_EOPTION, KVT_EOPTVAL or -ENOMEM (never
 *     KVT_ESTATE before open, never KVT_ENULL);
 *   - a name outside the list below is never accepted (a prefix or a
 *     suffix of a real name is not an option);
 *   - setting the same line twice gives the same result.
 * Seed corpus: tests/fuzz/corpus/options/ (every option, good and bad
 * values).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"

#define FUZZ_CHECK(c)                   \
	do {                            \
		if (!(c))               \
			__builtin_trap(); \
	} while (0)

static const char *const known[] = {
	"path", "workers", "debug.fail_alloc", "debug.pause_workers",
	"dram.capacity", "dram.chunk", "dram.shards", "dram.policy", "dram.victim_wait_ms", "dram.hugepages",
	"dram.prefault", "ssd.capacity", "ssd.segment", "ssd.io", "ssd.io_depth",
	"ssd.admission", "ssd.writedown_max", "ssd.checkpoint_seals", "ssd.high_watermark",
	"ssd.low_watermark", "ssd.reinsert_pct", "ssd.close_writedown_ms", "ssd.enospc_retry_ms", "remote.addr",
	"remote.tenant", "remote.secret_file", "remote.conns", "remote.timeout_ms",
	"remote.connect_timeout_ms", "remote.backoff_ms", "remote.backoff_max_ms",
	"remote.batch", "remote.tls", "remote.tls_ca", "remote.tls_cert", "remote.tls_key",
	"remote.tls_server_name", "shared.dir", "shared.budget", "shared.max_age",
	"shared.threads", "shared.writedown_max", "shared.admission", "shared.o_direct",
	"shared.s3_endpoint", "shared.s3_bucket", "shared.s3_region", "shared.s3_credentials",
	"shared.s3_conns", "shared.s3_timeout_ms", "shared.s3_part_size", "shared.s3_sign_payload",
	"remote.addrs", "remote.discover", "remote.group", "remote.hot_replicas",
	"remote.anchor_slots", "remote.refresh_ms", "events.endpoint", "events.topic", "events.medium", "events.format",
	"events.batch_ms", "events.queue_max",
	NULL,
};

static int is_known(const char *name)
{
	for (int i = 0; known[i]; i++)
		if (strcmp(name, known[i]) == 0)
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvt_store *s;
	char *text, *line, *next;

	if (size > 65536)
		return 0;
	FUZZ_CHECK(kvt_store_create(&s) == 0);
	text = malloc(size + 1);
	FUZZ_CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = 0;
	for (line = text; line; line = next) {
		char *eq, *value = "";
		int rc;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		eq = strchr(line, '=');
		if (eq) {
			*eq = 0;
			value = eq + 1;
		}
		/* Allocation failures are the allocator's test, not this one's. */
		if (strcmp(line, "debug.fail_alloc") == 0)
			continue;
		rc = kvt_store_set_option(s, line, value);
		FUZZ_CHECK(rc == 0 || rc == KVT_EOPTION || rc == KVT_EOPTVAL || rc == -ENOMEM);
		FUZZ_CHECK(rc != 0 || is_known(line));
		FUZZ_CHECK(kvt_store_set_option(s, line, value) == rc);
	}
	free(text);
	kvt_store_destroy(s);
	return 0;
}

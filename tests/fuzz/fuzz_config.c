/*
 * fuzz_config.c - libFuzzer target for kvtierd's --config file parser and
 * option parser (kvtd_config_parse, kvtd_config_option; daemon/config.c).
 *
 * The input is an untrusted config file's text.  It is parsed into a
 * config that starts as kvtierd's does, then freed (LeakSanitizer checks
 * that every string the config took is freed).  Properties, each a trap
 * when broken:
 *   - the result is 0, -EINVAL with a message naming the file and line
 *     ("fuzz.conf:N: ..."), or -ENOMEM;
 *   - what a config that parses holds is in range: threads 1..1024,
 *     max-conns, conn-inflight, log level, --set names non-empty and at
 *     most KVTD_SET_MAX of them, strings non-empty where the option
 *     refuses empty values;
 *   - parsing is deterministic: the text parsed again into a fresh config
 *     gives the same result and message.
 * Seed corpus: tests/fuzz/corpus/config/ (realistic files, every option).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "kvtierd.h"
#include "fuzz.h"

static void fuzz_config_init(struct kvtd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->log_level = KVTD_INFO;
	cfg->idle_timeout_s = 30;
	cfg->shutdown_timeout_s = 10;
}

static void fuzz_config_check(const struct kvtd_config *cfg)
{
	FUZZ_CHECK(cfg->threads <= 1024);
	FUZZ_CHECK(cfg->max_conns <= (1u << 24));
	FUZZ_CHECK(cfg->conn_inflight <= 65536);
	FUZZ_CHECK(cfg->log_level >= KVTD_ERROR && cfg->log_level <= KVTD_DEBUG);
	FUZZ_CHECK(cfg->shutdown_timeout_s <= 86400);
	FUZZ_CHECK(cfg->max_memory == 0 || cfg->max_memory >= (1u << 20));
	FUZZ_CHECK(!cfg->dram_set || cfg->dram_bytes > 0);
	FUZZ_CHECK(!cfg->dir || cfg->dir[0]);
	FUZZ_CHECK(!cfg->unix_path || cfg->unix_path[0]);
	FUZZ_CHECK(!cfg->resp_listen || cfg->resp_listen[0]);
	FUZZ_CHECK(!cfg->metrics_listen || strchr(cfg->metrics_listen, ':'));
	FUZZ_CHECK(cfg->set_count <= KVTD_SET_MAX);
	for (unsigned i = 0; i < cfg->set_count; i++) {
		FUZZ_CHECK(cfg->set_names[i][0] != 0);
		FUZZ_CHECK(cfg->set_values[i] == cfg->set_names[i] + strlen(cfg->set_names[i]) + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char path[] = "fuzz.conf";
	struct kvtd_config a, b;
	char err_a[512], err_b[512];
	int rc_a, rc_b;

	fuzz_config_init(&a);
	rc_a = kvtd_config_parse(&a, (const char *)data, size, path, err_a, sizeof(err_a));
	FUZZ_CHECK(rc_a == 0 || rc_a == -EINVAL || rc_a == -ENOMEM);
	if (rc_a == 0) {
		FUZZ_CHECK(err_a[0] == 0);
		fuzz_config_check(&a);
	} else if (rc_a == -EINVAL) {
		FUZZ_CHECK(strncmp(err_a, "fuzz.conf:", 10) == 0 && strlen(err_a) > 11);
	}

	fuzz_config_init(&b);
	rc_b = kvtd_config_parse(&b, (const char *)data, size, path, err_b, sizeof(err_b));
	FUZZ_CHECK(rc_b == rc_a && strcmp(err_a, err_b) == 0);
	FUZZ_CHECK(a.set_count == b.set_count && a.threads == b.threads);

	kvtd_config_free(&a);
	kvtd_config_free(&b);
	FUZZ_CHECK(a.dir == NULL && a.set_count == 0);
	return 0;
}

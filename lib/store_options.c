/*
 * store_options.c - the store's options: their defaults, kvt_store_set_option
 * and kvt_store_set_log, and freeing what they own.  The values live in
 * struct kvt_store (store_int.h) until open hands them to the tiers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"



/* A size (K/M/G/T suffixes) within [min, max]. */
static int opt_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t n;
	int ret = kvt_parse_size(v, &n);
	if (ret < 0)
		return ret;
	if (n < min || n > max)
		return KVT_EOPTVAL;
	*out = n;
	return 0;
}

static int opt_u32(const char *v, uint32_t min, uint32_t max, unsigned *out)
{
	uint64_t n;
	int ret = opt_u64(v, min, max, &n);
	if (ret == 0)
		*out = (unsigned)n;
	return ret;
}

/* One of names[] (NULL-terminated): *out gets the matching vals[]. */
static int opt_choice(const char *v, const char *const *names, const int *vals, int *out)
{
	for (unsigned i = 0; names[i]; i++) {
		if (strcmp(v, names[i]) == 0) {
			*out = vals[i];
			return 0;
		}
	}
	return KVT_EOPTVAL;
}

/* A string option: non-empty, under 4096 bytes; replaces *out. */
static int opt_str(const char *v, char **out)
{
	char *p;
	if (!*v || strlen(v) >= 4096)
		return KVT_EOPTVAL;
	p = strdup(v);
	if (!p)
		return -ENOMEM;
	free(*out);
	*out = p;
	return 0;
}

/* store.tiers: the walk order of the tiers below DRAM, tier names
 * separated by commas, each at most once (store_tiers.c). */
static int opt_tiers(const char *v, char **out)
{
	unsigned n = 0;
	for (const char *p = v; *p;) {
		size_t len = strcspn(p, ",");
		if (len == 0 || len > 32 || ++n > STORE_TIERS_MAX)
			return KVT_EOPTVAL;
		for (const char *q = v; q < p;) {
			size_t l = strcspn(q, ",");
			if (l == len && memcmp(p, q, len) == 0)
				return KVT_EOPTVAL;
			q += l + 1;
		}
		p += len;
		if (*p == ',' && !*++p)
			return KVT_EOPTVAL;
	}
	return opt_str(v, out);
}

/* remote.* options (doc/remote.md). */
static int opt_remote(struct remote_config *rc, const char *name, const char *v)
{
	if (strcmp(name, "addr") == 0)
		return opt_str(v, &rc->addr);
	if (strcmp(name, "addrs") == 0)
		return opt_str(v, &rc->addrs);
	if (strcmp(name, "discover") == 0)
		return opt_str(v, &rc->discover);
	if (strcmp(name, "group") == 0)
		return opt_u32(v, 1, KVT_BATCH_MAX, &rc->group_blocks);
	if (strcmp(name, "hot_replicas") == 0)
		return opt_u32(v, 1, REMOTE_HOT_REPLICAS_MAX, &rc->hot_replicas);
	if (strcmp(name, "anchor_slots") == 0)
		return opt_u32(v, 0, 1u << 26, &rc->anchor_slots);
	if (strcmp(name, "refresh_ms") == 0)
		return opt_u32(v, 0, 3600000, &rc->refresh_ms);
	if (strcmp(name, "tenant") == 0)
		return strlen(v) > 64 ? KVT_EOPTVAL : opt_str(v, &rc->tenant);
	if (strcmp(name, "secret_file") == 0)
		return opt_str(v, &rc->secret_file);
	if (strcmp(name, "conns") == 0)
		return opt_u32(v, 1, 64, &rc->conns);
	if (strcmp(name, "timeout_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->timeout_ms);
	if (strcmp(name, "connect_timeout_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->connect_timeout_ms);
	if (strcmp(name, "backoff_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->backoff_ms);
	if (strcmp(name, "backoff_max_ms") == 0)
		return opt_u32(v, 1, 3600000, &rc->backoff_max_ms);
	if (strcmp(name, "batch") == 0)
		return opt_u32(v, 1, KVT_BATCH_MAX, &rc->batch);
	if (strcmp(name, "tls") == 0) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return KVT_EOPTVAL;
		rc->tls = v[1] == 'n';
		return 0;
	}
	if (strcmp(name, "tls_ca") == 0)
		return opt_str(v, &rc->tls_ca);
	if (strcmp(name, "tls_cert") == 0)
		return opt_str(v, &rc->tls_cert);
	if (strcmp(name, "tls_key") == 0)
		return opt_str(v, &rc->tls_key);
	if (strcmp(name, "tls_server_name") == 0)
		return opt_str(v, &rc->tls_server_name);
	return KVT_EOPTION;
}

/* events.* options (doc/kvevents.md). */
static int opt_events(struct kvevents_config *ec, const char *name, const char *v)
{
	if (strcmp(name, "endpoint") == 0)
		return opt_str(v, &ec->endpoint);
	if (strcmp(name, "topic") == 0)
		return strlen(v) > 255 ? KVT_EOPTVAL : opt_str(v, &ec->topic);
	if (strcmp(name, "medium") == 0)
		return strlen(v) > 64 ? KVT_EOPTVAL : opt_str(v, &ec->medium);
	if (strcmp(name, "format") == 0) {
		static const char *const formats[] = { "map", "array", NULL };
		static const int format_vals[] = { KVEVENTS_MAP, KVEVENTS_ARRAY };
		return opt_choice(v, formats, format_vals, &ec->format);
	}
	if (strcmp(name, "batch_ms") == 0)
		return opt_u32(v, 0, 10000, &ec->batch_ms);
	if (strcmp(name, "queue_max") == 0)
		return opt_u32(v, 1, 1u << 24, &ec->queue_max);
	return KVT_EOPTION;
}

/* shared.* options (doc/shared.md). */
static int opt_shared(struct shared_config *sc, const char *name, const char *v)
{
	static const char *const admits[] = { "persistent", "always", NULL };
	static const int admit_vals[] = { SHARED_ADMIT_PERSISTENT, SHARED_ADMIT_ALWAYS };
	static const char *const onoff[] = { "off", "auto", NULL };
	static const int onoff_vals[] = { 0, 1 };
	int ret, b;

	if (strcmp(name, "dir") == 0)
		return opt_str(v, &sc->dir);
	if (strcmp(name, "s3_endpoint") == 0) {
		if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
			return KVT_EOPTVAL;
		return opt_str(v, &sc->s3_endpoint);
	}
	if (strcmp(name, "s3_bucket") == 0)
		return opt_str(v, &sc->s3_bucket);
	if (strcmp(name, "s3_region") == 0)
		return opt_str(v, &sc->s3_region);
	if (strcmp(name, "s3_credentials") == 0)
		return opt_str(v, &sc->s3_credentials);
	if (strcmp(name, "s3_conns") == 0)
		return opt_u32(v, 1, 64, &sc->s3_conns);
	if (strcmp(name, "s3_timeout_ms") == 0)
		return opt_u32(v, 1, 3600 * 1000, &sc->s3_timeout_ms);
	if (strcmp(name, "s3_part_size") == 0) {
		uint64_t n;
		if (kvt_parse_size(v, &n) < 0 || n < (UINT64_C(5) << 20) || n > (UINT64_C(5) << 30))
			return KVT_EOPTVAL;
		sc->s3_part_size = n;
		return 0;
	}
	if (strcmp(name, "s3_sign_payload") == 0) {
		static const char *const offon[] = { "off", "on", NULL };
		if ((ret = opt_choice(v, offon, onoff_vals, &b)) == 0)
			sc->s3_sign_payload = b != 0;
		return ret;
	}
	if (strcmp(name, "budget") == 0)
		return kvt_parse_size(v, &sc->budget) < 0 ? KVT_EOPTVAL : 0;
	if (strcmp(name, "max_age") == 0)
		return opt_u64(v, 0, UINT64_C(1) << 40, &sc->max_age_s);
	if (strcmp(name, "threads") == 0)
		return opt_u32(v, 1, 64, &sc->threads);
	if (strcmp(name, "writedown_max") == 0)
		return kvt_parse_size(v, &sc->wd_max_bytes) < 0 ? KVT_EOPTVAL : 0;
	if (strcmp(name, "admission") == 0)
		return opt_choice(v, admits, admit_vals, &sc->admission);
	if (strcmp(name, "o_direct") == 0) {
		if ((ret = opt_choice(v, onoff, onoff_vals, &b)) == 0)
			sc->direct = b != 0;
		return ret;
	}
	return KVT_EOPTION;
}

int kvt_store_set_option(struct kvt_store *s, const char *name, const char *value)
{
	uint64_t n;
	int ret;

	if (!s || !name || !value)
		return KVT_ENULL;
	if (strcmp(name, "debug.pause_workers") == 0) {
		if (strcmp(value, "0") && strcmp(value, "1"))
			return KVT_EOPTVAL;
		pthread_mutex_lock(&s->work_lock);
		s->paused = value[0] == '1';
		pthread_cond_broadcast(&s->work_cond);
		pthread_mutex_unlock(&s->work_lock);
		return 0;
	}
	if (strcmp(name, "debug.fail_alloc") == 0) {
		if ((ret = kvt_parse_size(value, &n)) < 0)
			return ret;
		kvt_mem_fail_nth(&s->mem, (int64_t)n);
		return 0;
	}
	if (s->state != ST_CREATED)
		return KVT_ESTATE;

	if (strcmp(name, "path") == 0)
		return opt_str(value, &s->path);
	if (strcmp(name, "store.tiers") == 0)
		return opt_tiers(value, &s->tiers_opt);
	if (strncmp(name, "remote.", 7) == 0)
		return opt_remote(&s->remote_cfg, name + 7, value);
	if (strncmp(name, "shared.", 7) == 0)
		return opt_shared(&s->shared_cfg, name + 7, value);
	if (strncmp(name, "events.", 7) == 0)
		return opt_events(&s->events_cfg, name + 7, value);
	{
		static const char *const policies[] = { "s3fifo", "lru", "prefix", "prefix-learn", NULL };
		static const int policy_vals[] = { DRAM_POLICY_S3FIFO, DRAM_POLICY_LRU,
						   DRAM_POLICY_PREFIX, DRAM_POLICY_PREFIX_LEARN };
		static const char *const huges[] = { "auto", "thp", "off", NULL };
		static const int huge_vals[] = { DRAM_HUGE_AUTO, DRAM_HUGE_THP, DRAM_HUGE_OFF };
		static const char *const onoff[] = { "off", "on", NULL };
		static const int onoff_vals[] = { 0, 1 };
		static const char *const ios[] = { "auto", "uring", "psync", "pread", NULL };
		static const int io_vals[] = { IO_BACKEND_AUTO, IO_BACKEND_URING, IO_BACKEND_PSYNC,
					       IO_BACKEND_PSYNC };
		static const char *const admits[] = { "second", "always", "victim", NULL };
		static const int admit_vals[] = { SSD_ADMIT_SECOND, SSD_ADMIT_ALWAYS,
						  SSD_ADMIT_VICTIM };
		struct dram_config *dc = &s->dram_cfg;
		struct ssd_config *sc = &s->ssd_cfg;
		int c;

		if (strcmp(name, "dram.capacity") == 0)
			return opt_u64(value, 0, UINT64_MAX, &dc->capacity);
		if (strcmp(name, "dram.chunk") == 0) {
			if ((ret = opt_u64(value, 4096, 2u << 20, &n)) < 0)
				return ret;
			if (n & (n - 1))
				return KVT_EOPTVAL;
			dc->chunk = (uint32_t)n;
			return 0;
		}
		if (strcmp(name, "dram.shards") == 0)
			return opt_u32(value, 1, 256, &dc->shards);
		if (strcmp(name, "dram.policy") == 0)
			return opt_choice(value, policies, policy_vals, &dc->policy);
		if (strcmp(name, "dram.victim_wait_ms") == 0)
			return opt_u32(value, 0, 60000, &dc->victim_wait_ms);
		if (strcmp(name, "dram.hugepages") == 0)
			return opt_choice(value, huges, huge_vals, &dc->hugepages);
		if (strcmp(name, "dram.prefault") == 0) {
			if ((ret = opt_choice(value, onoff, onoff_vals, &c)) < 0)
				return ret;
			dc->prefault = c;
			return 0;
		}
		if (strcmp(name, "ssd.capacity") == 0)
			return opt_u64(value, 0, UINT64_MAX, &sc->capacity);
		if (strcmp(name, "ssd.segment") == 0) {
			if ((ret = opt_u64(value, 1u << 20, UINT64_C(16) << 30, &n)) < 0)
				return ret;
			if (n % (1u << 20))
				return KVT_EOPTVAL;
			sc->seg_size = n;
			return 0;
		}
		if (strcmp(name, "ssd.io") == 0)
			return opt_choice(value, ios, io_vals, &sc->backend);
		if (strcmp(name, "ssd.admission") == 0)
			return opt_choice(value, admits, admit_vals, &sc->admission);
		if (strcmp(name, "ssd.writedown_max") == 0)
			return opt_u64(value, 1u << 20, UINT64_MAX, &sc->wd_max_bytes);
		if (strcmp(name, "ssd.checkpoint_seals") == 0)
			return opt_u32(value, 0, 1000000, &sc->ckpt_seals);
		if (strcmp(name, "ssd.high_watermark") == 0)
			return opt_u32(value, 0, 100, &sc->high_pct);
		if (strcmp(name, "ssd.low_watermark") == 0)
			return opt_u32(value, 0, 100, &sc->low_pct);
		if (strcmp(name, "ssd.reinsert_pct") == 0)
			return opt_u32(value, 0, 100, &sc->reinsert_pct);
		if (strcmp(name, "ssd.close_writedown_ms") == 0)
			return opt_u64(value, 0, 3600000, &sc->close_wd_ms);
		if (strcmp(name, "ssd.enospc_retry_ms") == 0) {
			if ((ret = opt_u64(value, 0, 3600000, &n)) < 0)
				return ret;
			sc->retry_ns = n * 1000000;
			return 0;
		}
		if (strcmp(name, "ssd.io_depth") == 0)
			return opt_u32(value, 1, 4096, &sc->io_depth);
		if (strcmp(name, "workers") == 0)
			return opt_u32(value, 1, MAX_WORKERS, &s->worker_count);
	}
	return KVT_EOPTION;
}

int kvt_store_set_log(struct kvt_store *s, kvt_log_fn fn, void *ctx, int min_level)
{
	if (!s)
		return KVT_ENULL;
	if (s->state != ST_CREATED)
		return KVT_ESTATE;
	s->log.fn = fn;
	s->log.ctx = ctx;
	s->log.min_level = min_level;
	return 0;
}

/* Every option's default (kvt_store_create). */
void store_options_init(struct kvt_store *s)
{
	s->dram_cfg.capacity = UINT64_C(256) << 20;
	s->dram_cfg.chunk = 64 << 10;
	s->dram_cfg.policy = DRAM_POLICY_PREFIX; /* doc/policies.md */
	s->dram_cfg.victim_wait_ms = 20;
	s->dram_cfg.hugepages = DRAM_HUGE_AUTO;
	s->dram_cfg.prefault = true;
	s->ssd_cfg.capacity = 0;
	s->ssd_cfg.seg_size = UINT64_C(256) << 20;
	s->ssd_cfg.backend = IO_BACKEND_AUTO;
	s->ssd_cfg.admission = SSD_ADMIT_VICTIM; /* doc/policies.md */
	s->ssd_cfg.wd_max_bytes = UINT64_C(256) << 20;
	s->ssd_cfg.ckpt_seals = 8;
	s->ssd_cfg.high_pct = 95;
	s->ssd_cfg.low_pct = 90;
	s->ssd_cfg.reinsert_pct = 10;
	s->ssd_cfg.close_wd_ms = 10000; /* warm restarts (doc/policies.md) */
	s->ssd_cfg.io_depth = 64;
	s->ssd_cfg.retry_ns = UINT64_C(5000) * 1000000;
	s->remote_cfg.conns = REMOTE_DEF_CONNS;
	s->remote_cfg.timeout_ms = REMOTE_DEF_TIMEOUT_MS;
	s->remote_cfg.connect_timeout_ms = REMOTE_DEF_CONNECT_TIMEOUT_MS;
	s->remote_cfg.backoff_ms = REMOTE_DEF_BACKOFF_MS;
	s->remote_cfg.backoff_max_ms = REMOTE_DEF_BACKOFF_MAX_MS;
	s->remote_cfg.batch = REMOTE_DEF_BATCH;
	s->remote_cfg.group_blocks = REMOTE_DEF_GROUP_BLOCKS;
	s->remote_cfg.hot_replicas = REMOTE_DEF_HOT_REPLICAS;
	s->remote_cfg.anchor_slots = REMOTE_DEF_ANCHOR_SLOTS;
	s->remote_cfg.refresh_ms = REMOTE_DEF_REFRESH_MS;
	s->shared_cfg.threads = SHARED_DEF_THREADS;
	s->shared_cfg.wd_max_bytes = SHARED_DEF_WD_MAX;
	s->shared_cfg.direct = true;
	s->events_cfg.batch_ms = KVEVENTS_DEF_BATCH_MS;
	s->events_cfg.queue_max = KVEVENTS_DEF_QUEUE_MAX;
	s->worker_count = 1;
	s->log.min_level = KVT_LOG_INFO;
}

/* What the options own (kvt_store_destroy). */
void store_options_free(struct kvt_store *s)
{
	free(s->path);
	free(s->remote_cfg.addr);
	free(s->remote_cfg.addrs);
	free(s->remote_cfg.discover);
	free(s->remote_cfg.tenant);
	free(s->remote_cfg.secret_file);
	free(s->remote_cfg.tls_ca);
	free(s->remote_cfg.tls_cert);
	free(s->remote_cfg.tls_key);
	free(s->remote_cfg.tls_server_name);
	free(s->shared_cfg.dir);
	free(s->shared_cfg.s3_endpoint);
	free(s->shared_cfg.s3_bucket);
	free(s->shared_cfg.s3_region);
	free(s->shared_cfg.s3_credentials);
	free(s->events_cfg.endpoint);
	free(s->events_cfg.topic);
	free(s->events_cfg.medium);
	free(s->tiers_opt);
}

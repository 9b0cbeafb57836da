/*
 * recover.h - what fuzz_recover.c and gen_recover_seeds.c share: the
 * store they open (DRAM, and an SSD tier of two 1 MiB segments), its
 * fixed store id, the one namespace in its registry and the keys put.
 * The seeds only reach past recovery's checks when both sides agree on
 * these, so they live in one place.
 */
#ifndef KVT_FUZZ_RECOVER_H
#define KVT_FUZZ_RECOVER_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvtier.h"

#define RECOVER_SEG (1u << 20) /* ssd.segment */
#define RECOVER_KEYS 8         /* keys the seeds put, all looked up */

/* ssd.dio_align of the store recover_open opens ("512" unless a seed
 * generator asks for "4096": segments of both alignments in the corpus). */
static const char *recover_dio_align = "512";

/* Open a store at dir (its ssd/id written first, so every run has the
 * same store id and the seeds' checkpoints match it).  0 or an error. */
static inline int recover_open(const char *dir, struct kvt_store **out)
{
	static const uint8_t id[16] = "kvtier-fuzz-id!";
	static const char *const opts[][2] = {
		{ "dram.capacity", "8M" }, { "dram.chunk", "4K" },  { "dram.prefault", "off" },
		{ "ssd.capacity", "2M" },  { "ssd.segment", "1M" }, { "ssd.io", "psync" },
		{ "ssd.admission", "always" }, { "workers", "1" },
	};
	char path[4096];
	struct kvt_store *s;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/ssd", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/ssd/id", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write(fd, id, sizeof(id)) == (ssize_t)sizeof(id) ? 0 : -EIO;
	close(fd);
	if (rc < 0)
		return rc;
	rc = kvt_store_create(&s);
	if (rc < 0)
		return rc;
	rc = kvt_store_set_option(s, "path", dir);
	for (size_t i = 0; rc == 0 && i < sizeof(opts) / sizeof(opts[0]); i++)
		rc = kvt_store_set_option(s, opts[i][0], opts[i][1]);
	if (rc == 0)
		rc = kvt_store_set_option(s, "ssd.dio_align", recover_dio_align);
	if (rc == 0)
		rc = kvt_store_open(s);
	if (rc < 0) {
		kvt_store_destroy(s);
		return rc;
	}
	*out = s;
	return 0;
}

static inline int recover_ns(struct kvt_store *s, uint32_t *id)
{
	struct kvt_ns_desc d = {
		.model = "fuzz-recover", .dtype = "bf16", .layout = "test-contiguous",
		.block_tokens = 16, .tp_rank = 0, .tp_size = 1,
		.pp_rank = 0, .pp_size = 1, .tenant = "fuzz",
	};
	return kvt_ns_register(s, &d, id);
}

static inline struct kvt_key recover_key(uint32_t i)
{
	struct kvt_key k;

	memset(&k, 0, sizeof(k));
	k.len = 16;
	for (uint32_t b = 0; b < k.len; b++)
		k.bytes[b] = (uint8_t)(i * 31 + b);
	return k;
}

#endif

/*
 * gen_shdir_seeds.c - writes the shdir seed corpus (valid block file
 * headers, doc/shared.md) into the directory given: one part, three
 * parts, a 64-byte key, a sealed block.  Run by hand when the format
 * changes, and commit what it writes.
 */
#include <stdio.h>
#include <string.h>

#include "shdir.h"

static int emit(const char *dir, const char *name, unsigned parts, uint32_t key_len, uint32_t flags)
{
	static uint8_t buf[SHDIR_HDR_MAX + SHDIR_ALIGN];
	uint64_t lens[8];
	uint32_t crcs[8];
	uint8_t ns[32];
	struct kvt_key k;
	char path[4096];
	FILE *f;
	int64_t off;

	memset(ns, 0x5a, sizeof(ns));
	memset(&k, 0, sizeof(k));
	k.len = key_len;
	for (uint32_t i = 0; i < key_len; i++)
		k.bytes[i] = (uint8_t)(i * 7 + 1);
	for (unsigned p = 0; p < parts; p++) {
		lens[p] = 4096u * (p + 1) + 3;
		crcs[p] = 0x1234567u * (p + 1);
	}
	off = shdir_hdr_encode(buf, sizeof(buf), ns, &k, parts, lens, crcs, flags);
	if (off < 0)
		return 1;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return 1;
	/* The header page only: the parser never looks further. */
	fwrite(buf, 1, (size_t)off, f);
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_shdir_seeds DIR\n");
		return 2;
	}
	return emit(argv[1], "one-part", 1, 32, 0) | emit(argv[1], "three-parts", 3, 32, 0) |
	       emit(argv[1], "key-64", 2, 64, 0) | emit(argv[1], "sealed", 1, 1, KVT_F_SEALED);
}

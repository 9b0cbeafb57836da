/*
 * shdir.h - the directory backend of the shared tier (G4): blocks as
 * content-addressed files under a directory that many processes and nodes
 * mount at once (NFS, Lustre, WEKA, VAST, ...).  Format byte by byte in
 * doc/shared.md.
 *
 *   <root>/kvt1/<ns digest, 64 hex>/<ab>/<cd>/<SHA-256(key), 64 hex>
 *
 * where ab and cd are the first two bytes of the key's hash: 65536 fan-out
 * directories per namespace, so none holds more than a few thousand files
 * below a few hundred million blocks.  Each file is a header (magic,
 * version, namespace digest, key, value length, part table with a CRC32C
 * per part, header CRC32C) padded to a 4 KiB multiple, then the value.
 *
 * Writers write a temporary name in the same directory and rename it into
 * place: readers never see half a block, and two writers of one key
 * leave one complete file (the same bytes: a key names immutable bytes).
 * Readers check the header and every part's CRC; a bad file is a miss and
 * is unlinked only if the path still names the inode that was read.
 *
 * No state of its own beyond the root's fd and what was detected at open;
 * every call is safe from any thread.
 */
#ifndef KVT_SHDIR_H
#define KVT_SHDIR_H

#include <sys/types.h>

#include "dram.h"
#include "kvt_int.h"

#define SHDIR_MAGIC 0x4853544bu /* "KTSH" little-endian */
#define SHDIR_VERSION 1
#define SHDIR_FIXED_LEN 136      /* header bytes before the part table */
#define SHDIR_PART_LEN 16        /* one part table entry */
#define SHDIR_ALIGN 4096         /* the value starts at a multiple of this */
#define SHDIR_HDR_MAX (SHDIR_FIXED_LEN + KVT_PARTS_MAX * SHDIR_PART_LEN)
#define SHDIR_RELPATH_MAX 200    /* "kvt1/" + 64 + "/ab/cd/" + 64 + NUL, with room */

/* A parsed header.  part_lens and crcs point into the caller's arrays. */
struct shdir_hdr {
	uint8_t ns_digest[32];
	struct kvt_key key;
	uint64_t value_len;   /* bytes: sum of the part lengths */
	uint64_t data_off;    /* where the value starts: header length rounded to 4 KiB */
	uint32_t hdr_len;     /* bytes of header proper (fixed part + part table) */
	uint32_t part_count;
	uint32_t flags;       /* KVT_F_SEALED or 0 */
	uint64_t *part_lens;  /* part_count entries */
	uint32_t *crcs;       /* part_count entries */
};

/*
 * Encode a header into buf (cap bytes, zeroed up to data_off).  Returns
 * data_off (> 0), or KVT_EBADLEN (part_count, a length, or cap too small).
 */
int64_t shdir_hdr_encode(uint8_t *buf, size_t cap, const uint8_t ns_digest[32],
			 const struct kvt_key *key, unsigned part_count, const uint64_t *part_lens,
			 const uint32_t *crcs, uint32_t flags);

/*
 * Parse the header at buf[0..len).  h->part_lens and h->crcs must point at
 * KVT_PARTS_MAX entries each.  Returns 0; a positive count when len is
 * short (the header's length: read that many bytes and call again);
 * KVT_ECORRUPT (magic, lengths, CRC); KVT_EVERSION.  Pure, no I/O, never
 * reads past len.  Fuzzed (tests/fuzz/fuzz_shdir.c).
 */
int shdir_hdr_parse(const uint8_t *buf, size_t len, struct shdir_hdr *h);

/* Whether a parsed header names the block (ns_digest, key).  Pure. */
bool shdir_hdr_names(const struct shdir_hdr *h, const uint8_t ns_digest[32],
		     const struct kvt_key *key);

struct shdir;

struct shdir_stats {
	_Atomic uint64_t writes, write_bytes, write_exists, write_errors;
	_Atomic uint64_t reads, read_bytes, read_errors, corrupt, bad_removed, bad_kept;
	_Atomic uint64_t stats_issued;
};

/*
 * Open the backend on directory path (created if missing, with kvt1/).
 * direct: try O_DIRECT (a probe file shows whether the file system takes
 * it).  Returns 0, -errno.
 */
int shdir_open(struct shdir **out, const char *path, bool direct, struct kvt_mem *mem,
	       const struct kvt_logger *log);
void shdir_close(struct shdir *sd);
bool shdir_o_direct(const struct shdir *sd);
struct shdir_stats *shdir_stats(struct shdir *sd);
int shdir_root_fd(const struct shdir *sd);

/* Relative path of a block under the root (buf: SHDIR_RELPATH_MAX).
 * 0 or -ENOMEM (OpenSSL). */
int shdir_relpath(const uint8_t ns_digest[32], const struct kvt_key *key, char *buf);

/* Present?  KVT_OK with *file_len (bytes of the file), KVT_MISS, -errno. */
int shdir_stat(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
	       uint64_t *file_len);

/*
 * Write a block from view[0..view_count) (value_len bytes in order;
 * any alignment: O_DIRECT is used when the view allows it).  KVT_OK,
 * KVT_EXISTS (the file is there already: put if absent), -errno.
 */
int shdir_write(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
		const struct iovec *view, unsigned view_count, uint64_t value_len,
		unsigned part_count, const uint64_t *part_lens, const uint32_t *crcs,
		uint32_t flags);

/* A block being read: open, header checked, value not read yet. */
struct shdir_rd {
	int fd;
	bool direct;
	dev_t dev;
	ino_t ino;
	uint64_t file_len;
	char relpath[SHDIR_RELPATH_MAX];
	struct shdir_hdr h;
	uint64_t part_lens[KVT_PARTS_MAX];
	uint32_t crcs[KVT_PARTS_MAX];
};

/* Open a block and check its header (and that it names ns and key).
 * KVT_OK, KVT_MISS (absent), KVT_ECORRUPT (a bad file: the caller calls
 * shdir_rd_bad), -errno.  rd->fd is -1 unless KVT_OK or KVT_ECORRUPT. */
int shdir_rd_open(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key,
		  struct shdir_rd *rd);
/* Read the value into view (room for value_len bytes; when the spans are
 * 4 KiB aligned and multiples of 4 KiB, except that the last may hold the
 * value's tail rounded up to 4 KiB, O_DIRECT reads straight into it) and
 * check each part's CRC.  KVT_OK, KVT_ECORRUPT, -errno. */
int shdir_rd_value(struct shdir *sd, struct shdir_rd *rd, const struct iovec *view,
		   unsigned view_count);
/* The file failed its checks: unlink it if the path still names the inode
 * we read (compared by st_dev and st_ino), else leave it.  Counted. */
void shdir_rd_bad(struct shdir *sd, struct shdir_rd *rd);
void shdir_rd_close(struct shdir_rd *rd);

/* Unlink a block.  KVT_OK, KVT_MISS, -errno. */
int shdir_remove(struct shdir *sd, const uint8_t ns_digest[32], const struct kvt_key *key);
/* Remove every block of a namespace (ns_digest NULL: of every namespace):
 * renamed out of the way at once, then deleted.  Files removed, or -errno. */
int64_t shdir_clear(struct shdir *sd, const uint8_t *ns_digest);

/*
 * Tests: called when a read finds a bad file, after the checks and before
 * the fresh stat that decides whether to unlink it (to swap the file).
 */
void shdir_set_bad_hook(struct shdir *sd, void (*fn)(void *ctx, const char *relpath),
			void *ctx);

#endif

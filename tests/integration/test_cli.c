/*
 * test_cli.c - the real kvtier binary's operator commands (stat, ls, get,
 * put, rm, clear, fsck) against a real kvtierd (tsrv_start) and against a
 * store directory.  argv: PATH-TO-KVTIER PATH-TO-KVTIERD.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvtier.h"
#include "server.h"
#include "t.h"

static const char *kvtier, *kvtierd;
static char *base;

/* Run "kvtier ARGS" (a shell fragment) with stdout and stderr into *out
 * and *err (NUL-terminated, freed by the caller; either may be NULL);
 * returns the exit status. */
static int run(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char **out, char **err, const char *fmt, ...)
{
	char args[4096], *cmd;
	int st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (asprintf(&cmd, "'%s' </dev/null %s", kvtier, args) < 0)
		T_FAIL("asprintf");
	st = t_sh_capture(base, cmd, out, err);
	free(cmd);
	return st;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	T_ASSERT(f && fwrite(p, 1, n, f) == n && fclose(f) == 0);
}

static uint8_t *read_file(const char *path, size_t *n)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	T_ASSERT(f && fstat(fileno(f), &st) == 0);
	uint8_t *b = malloc((size_t)st.st_size + 1);
	T_ASSERT(b && fread(b, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	fclose(f);
	*n = (size_t)st.st_size;
	return b;
}

/* A 3 MiB binary value with CR, LF and NUL bytes inside. */
static uint8_t *value3m(size_t *n)
{
	*n = 3u << 20;
	uint8_t *v = malloc(*n);
	T_ASSERT(v);
	t_fill(v, *n, 42);
	memcpy(v + 100, "\r\n\0\r\n", 5);
	return v;
}

/* The number after "label" in text, or -1. */
static long long field(const char *text, const char *label)
{
	const char *p = strstr(text, label);
	return p ? strtoll(p + strlen(label), NULL, 10) : -1;
}

/* A TCP socket bound to a free loopback port and not listening: a
 * connect to it is refused, and no other process can take the port. */
static int dead_port_fd(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(fd >= 0);
	T_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static unsigned port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	T_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	return ntohs(a.sin_port);
}

static void test_server(void)
{
	struct tsrv s;
	char dir[700], addr[64], vpath[700], gpath[700];
	char *out, *err;
	size_t n, gn;
	uint8_t *v = value3m(&n), *g;

	snprintf(dir, sizeof(dir), "%s/srv", base);
	tsrv_start(&s, kvtierd, base, dir, NULL, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	snprintf(vpath, sizeof(vpath), "%s/v.bin", base);
	snprintf(gpath, sizeof(gpath), "%s/g.bin", base);
	write_file(vpath, v, n);

	/* put, then get round-trips the bytes exactly, via file and stdout. */
	T_EQ_INT(run(NULL, NULL, "put --server %s -i '%s' key-one", addr, vpath), 0);
	T_EQ_INT(run(NULL, NULL, "get --server %s -o '%s' key-one", addr, gpath), 0);
	g = read_file(gpath, &gn);
	T_EQ_U64(gn, n);
	T_EQ_MEM(g, v, n);
	free(g);
	{ /* to stdout */
		char *cmd;
		T_ASSERT(asprintf(&cmd, "'%s' get --server %s key-one >'%s'", kvtier, addr, gpath) > 0);
		int st = system(cmd);
		free(cmd);
		T_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	g = read_file(gpath, &gn);
	T_EQ_U64(gn, n);
	T_EQ_MEM(g, v, n);
	free(g);
	/* put reads stdin too; a hex key names the same bytes as text. */
	T_EQ_INT(run(NULL, NULL, "put --server %s --hex 6b2d74776f <'%s'", addr, vpath), 0);
	T_EQ_INT(run(NULL, NULL, "get --server %s k-two -o '%s'", addr, gpath), 0);
	g = read_file(gpath, &gn);
	T_EQ_U64(gn, n);
	T_EQ_MEM(g, v, n);
	free(g);

	/* stat: the two 3 MiB blocks are in the server's DRAM. */
	T_EQ_INT(run(&out, &err, "stat --server %s", addr), 0);
	T_ASSERT(strstr(out, "kvtierd 127.0.0.1:") != NULL);
	T_ASSERT(strstr(out, "whole server") != NULL);
	T_EQ_INT(field(out, "\ndram"), 2);
	T_ASSERT(strstr(out, "6.0 MiB / 64.0 MiB") != NULL);
	free(out);
	free(err);
	T_EQ_INT(run(&out, NULL, "stat --server %s --raw", addr), 0);
	T_EQ_INT(field(out, "\ndram.blocks "), 2);
	T_EQ_INT(field(out, "\ndram.value_bytes "), 2 * (long long)n);
	T_ASSERT(field(out, "\nserver.ops.put ") >= 2);
	free(out);

	/* ls: the tenant's namespace, named: its row, with the two puts
	 * (ls --server printed the count alone, though its --help said it
	 * listed the namespaces). */
	T_EQ_INT(run(&out, NULL, "ls --server %s", addr), 0);
	T_EQ_INT(field(out, "tenant default: "), 1);
	T_EQ_INT(field(out, "server: dram "), 2);
	T_ASSERT(strstr(out, "NAMESPACE") != NULL);
	T_ASSERT(strstr(out, " kvtier-cli/default ") != NULL);
	free(out);

	/* rm makes get a miss: exit 3; a second rm is a miss too. */
	T_EQ_INT(run(NULL, NULL, "rm --server %s key-one", addr), 0);
	T_EQ_INT(run(NULL, &err, "get --server %s key-one", addr), 3);
	T_ASSERT(strstr(err, "not found") != NULL);
	free(err);
	T_EQ_INT(run(NULL, NULL, "rm --server %s key-one", addr), 3);

	/* clear without a terminal and without --yes refuses; with it empties. */
	T_EQ_INT(run(NULL, &err, "clear --server %s --all", addr), 1);
	T_ASSERT(strstr(err, "--yes") != NULL);
	free(err);
	T_EQ_INT(run(NULL, NULL, "get --server %s k-two -o /dev/null", addr), 0);
	T_EQ_INT(run(&out, NULL, "clear --server %s --all --yes", addr), 0);
	T_EQ_INT(field(out, "cleared "), 1);
	free(out);
	T_EQ_INT(run(NULL, NULL, "get --server %s k-two", addr), 3);
	T_EQ_INT(run(&out, NULL, "stat --server %s --raw", addr), 0);
	T_EQ_INT(field(out, "\ndram.blocks "), 0);
	free(out);

	/* who against the live server: exit 0, "up yes"; with a second node
	 * where nothing listens (a bound socket that does not listen: its
	 * port stays ours, connect is refused): the table, and exit 4. */
	T_EQ_INT(run(NULL, NULL, "put --server %s -i '%s' key-who", addr, vpath), 0);
	T_EQ_INT(run(&out, NULL, "who --server %s key-who", addr), 0);
	T_ASSERT(strstr(out, " yes ") != NULL);
	T_EQ_INT(field(out, "blocks, "), 1);
	free(out);
	{
		int fd = dead_port_fd();
		char dead[64];
		snprintf(dead, sizeof(dead), "127.0.0.1:%u", port_of(fd));
		T_EQ_INT(run(&out, &err, "who --servers %s,%s key-who", addr, dead), 4);
		T_ASSERT(strstr(out, " yes ") != NULL && strstr(out, " no ") != NULL);
		T_ASSERT(strstr(err, "1 of 2 nodes did not answer") != NULL);
		free(out);
		free(err);
		/* Every node down: exit 1, even though a table of zeros is printed. */
		T_EQ_INT(run(NULL, &err, "who --server %s key-who", dead), 1);
		T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
		free(err);
		int fd2 = dead_port_fd();
		T_EQ_INT(run(NULL, &err, "who --servers %s,127.0.0.1:%u key-who", dead, port_of(fd2)),
			 1);
		T_ASSERT(strstr(err, "no node of --servers answered") != NULL);
		free(err);
		close(fd2);
		close(fd);
	}

	T_EQ_INT(tsrv_stop(&s), 0);

	/* A server that is not there: exit 1 and a message that says what to
	 * do, from every command that asks it (kvtier-admin(1) EXIT STATUS). */
	T_EQ_INT(run(NULL, &err, "who --server %s key-who", addr), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "get --server %s key-who", addr), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "ls --server %s", addr), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "rm --server %s key-who", addr), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "stat --server %s", addr), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	T_ASSERT(strstr(err, "kvtierd --listen") != NULL);
	/* Why, as connect(2) said it: not the request's -ENOTCONN. */
	T_ASSERT(strstr(err, ": Connection refused\n") != NULL);
	free(err);
	/* put too: the value lands only in the CLI's own DRAM, so exit 0
	 * would claim a store that never happened. */
	T_EQ_INT(run(NULL, &err, "put --server %s -i '%s' key-three", addr, vpath), 1);
	T_ASSERT(strstr(err, "cannot reach kvtierd at") != NULL);
	free(err);
	free(v);
}

static void flip_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	T_ASSERT(f);
	T_ASSERT(fseek(f, off, SEEK_SET) == 0);
	int c = fgetc(f);
	T_ASSERT(c != EOF);
	T_ASSERT(fseek(f, off, SEEK_SET) == 0);
	T_ASSERT(fputc(c ^ 0x5a, f) != EOF);
	T_ASSERT(fclose(f) == 0);
}

/* A store directory base/name (in dir), 8 slots of 8M, holding key "a" =
 * value3m() (returned, in *n bytes; its file in vpath); gpath: where a
 * test gets it back to.  Each buffer is 700 bytes. */
static uint8_t *dir_with_a(const char *name, char *dir, char *vpath, char *gpath, size_t *n)
{
	uint8_t *v = value3m(n);

	snprintf(dir, 700, "%s/%s", base, name);
	snprintf(vpath, 700, "%s/%s-v.bin", base, name);
	snprintf(gpath, 700, "%s/%s-g.bin", base, name);
	write_file(vpath, v, *n);
	T_EQ_INT(run(NULL, NULL, "put --dir '%s' --ssd-capacity 64M --segment 8M -i '%s' a", dir,
		     vpath), 0);
	return v;
}

/* kvtier get --dir dir [opts] a -o gpath: exits 0 with v's n bytes.
 * Returns its stderr (the caller frees it). */
static char *get_a(const char *dir, const char *opts, const char *gpath, const uint8_t *v,
		   size_t n)
{
	char *err;
	size_t gn;
	uint8_t *g;

	T_EQ_INT(run(NULL, &err, "get --dir '%s' %s a -o '%s'", dir, opts, gpath), 0);
	g = read_file(gpath, &gn);
	T_EQ_U64(gn, n);
	T_EQ_MEM(g, v, n);
	free(g);
	return err;
}

static void test_dir(void)
{
	char dir[700], vpath[700], gpath[700], seg[800];
	char *out, *err;
	size_t n, gn;
	uint8_t *v = dir_with_a("st", dir, vpath, gpath, &n), *g;

	T_EQ_INT(run(NULL, NULL, "put --dir '%s' -i '%s' b", dir, vpath), 0);
	/* A value no SSD segment holds is not stored, and says so: it stayed
	 * in DRAM and went with the process (put exited 0, get missed). */
	{
		char small[800];
		snprintf(small, sizeof(small), "%s-small", dir);
		T_EQ_INT(run(NULL, &err, "put --dir '%s' --ssd-capacity 8M --segment 2M -i '%s' big",
			     small, vpath), 1);
		T_ASSERT(strstr(err, "do not fit an SSD segment (2.0 MiB)") != NULL);
		T_ASSERT(strstr(err, "--segment") != NULL);
		free(err);
		T_EQ_INT(run(NULL, NULL, "get --dir '%s' big -o '%s'", small, gpath), 3);
	}
	/* A new process: the bytes come back from the SSD tier. */
	T_EQ_INT(run(NULL, NULL, "get --dir '%s' a -o '%s'", dir, gpath), 0);
	g = read_file(gpath, &gn);
	T_EQ_U64(gn, n);
	T_EQ_MEM(g, v, n);
	free(g);

	{
		int rc = run(&out, &err, "ls --dir '%s'", dir);
		if (rc != 0)
			T_FAIL("kvtier ls --dir exited %d: %s", rc, err);
		free(err);
	}
	T_ASSERT(strstr(out, "kvtier-cli bytes opaque") != NULL);
	T_EQ_INT(field(out, "kvtier-cli") < 0 ? -1 : 0, 0);
	{ /* "   1  <digest>           2         6291456  kvtier-cli ..." */
		unsigned id;
		char dg[32];
		unsigned long long blocks, bytes;
		const char *line = strchr(out, '\n');
		T_ASSERT(line && sscanf(line + 1, "%u %31s %llu %llu", &id, dg, &blocks, &bytes) == 4);
		T_EQ_INT(id, 1);
		T_EQ_U64(blocks, 2);
		T_EQ_U64(bytes, 2 * (unsigned long long)n);
	}
	free(out);

	T_EQ_INT(run(&out, NULL, "fsck '%s'", dir), 0);
	T_ASSERT(strstr(out, "clean") != NULL);
	T_EQ_INT(field(out, "records, "), 2);
	free(out);
	/* Told the store's sizes (as --dir reopens it: the size its
	 * checkpoint says, 8 slots of 8M, not 16), the same, and the
	 * checkpoint used; told another slot count, fsck says recovery would
	 * ignore the checkpoint; told another segment size, its segments are
	 * free slots to that store: said, not read. */
	T_EQ_INT(run(&out, NULL, "fsck --ssd-capacity 64M --segment 8M '%s'", dir), 0);
	T_EQ_INT(field(out, "records, "), 2);
	T_ASSERT(strstr(out, "scans every segment") == NULL);
	free(out);
	T_EQ_INT(run(&out, NULL, "fsck --ssd-capacity 128M --segment 8M '%s'", dir), 0);
	T_EQ_INT(field(out, "records, "), 2);
	T_ASSERT(strstr(out, "scans every segment") != NULL);
	free(out);
	T_EQ_INT(run(&out, NULL, "fsck --segment 4M '%s'", dir), 0);
	T_ASSERT(strstr(out, "a segment of 8388608 bytes, where the store's are 4194304") != NULL);
	T_EQ_INT(field(out, "records, "), 0);
	free(out);
	T_EQ_INT(run(NULL, NULL, "fsck --segment x '%s'", dir), 2);

	/* rm, then get misses; fsck still clean (the tombstone is a record). */
	T_EQ_INT(run(NULL, NULL, "rm --dir '%s' b", dir), 0);
	T_EQ_INT(run(NULL, NULL, "get --dir '%s' b", dir), 3);
	T_EQ_INT(run(NULL, NULL, "fsck '%s'", dir), 0);

	/* Flip one value byte of the first record (key "a", seq 1): fsck
	 * exits 1 and names it. */
	snprintf(seg, sizeof(seg), "%s/ssd/seg-000000", dir);
	flip_byte(seg, 4096 + 4096 + 12345);
	T_EQ_INT(run(&out, NULL, "fsck '%s'", dir), 1);
	T_ASSERT(strstr(out, "damaged: ssd/seg-000000 offset 4096 seq 1 ns 1 key 61: part 0") !=
		 NULL);
	T_ASSERT(strstr(out, "DAMAGED") != NULL);
	free(out);
	/* The store still never serves the damaged bytes: a miss. */
	T_EQ_INT(run(NULL, NULL, "get --dir '%s' a", dir), 3);

	/* clear --yes empties the namespace. */
	T_EQ_INT(run(NULL, NULL, "put --dir '%s' -i '%s' c", dir, vpath), 0);
	T_EQ_INT(run(&out, NULL, "clear --dir '%s' --yes", dir), 0);
	free(out);
	T_EQ_INT(run(NULL, NULL, "get --dir '%s' c", dir), 3);
	T_EQ_INT(run(&out, NULL, "ls --dir '%s'", dir), 0);
	T_ASSERT(strstr(out, "           0               0  kvtier-cli") != NULL);
	free(out);

	/* Usage: exit 2 with a hint. */
	T_EQ_INT(run(NULL, &err, "fsck"), 2);
	T_ASSERT(strstr(err, "kvtier fsck --help") != NULL);
	free(err);
	T_EQ_INT(run(NULL, NULL, "fsck '%s/nonexistent'", base), 2);
	/* A directory that holds no store (a mistyped path) is not a clean
	 * one: fsck exits 2, ls 1, and says so, before any table header. */
	{
		char empty[700];
		snprintf(empty, sizeof(empty), "%s/not-a-store", base);
		T_EQ_INT(mkdir(empty, 0700), 0);
		T_EQ_INT(run(&out, &err, "fsck '%s'", empty), 2);
		T_ASSERT(strstr(err, "is not a kvtier store directory") != NULL);
		T_ASSERT(strstr(out, "clean") == NULL);
		free(out);
		free(err);
		T_EQ_INT(run(&out, &err, "ls --dir '%s'", empty), 1);
		T_ASSERT(strstr(err, "is not a kvtier store directory") != NULL);
		T_ASSERT(strstr(out, "DIGEST") == NULL);
		free(out);
		free(err);
	}
	T_EQ_INT(run(NULL, NULL, "get --dir '%s'", dir), 2);
	free(v);
}

/* --dir reads only the checkpoint's 128-byte header for the store's slot
 * count (ssd_ckpt_hdr_decode), a hint the store's own open verifies: a
 * damaged body behind a sound header still opens the store at its own
 * size (8 slots of 8M, not the 16 counted from its one file), which then
 * ignores the checkpoint, scans, and serves the bytes; a damaged header
 * is said on stderr and the store opened at the documented fallback (16
 * segments, or as many files as it has), still serving the bytes. */
static void test_dir_ckpt(void)
{
	char dir[700], vpath[700], gpath[700], ck[800];
	char *err, *out;
	size_t n;
	uint8_t *v = dir_with_a("ck", dir, vpath, gpath, &n);

	snprintf(ck, sizeof(ck), "%s/ssd/checkpoint", dir);

	/* 1. The body damaged (slot 0's generation), the header sound. */
	flip_byte(ck, 128 + 3);
	err = get_a(dir, "", gpath, v, n);
	T_ASSERT(strstr(err, "warning") == NULL);
	free(err);
	/* Reopened at 8 slots: its new checkpoint is of 8. */
	T_EQ_INT(run(&out, NULL, "fsck --ssd-capacity 64M --segment 8M '%s'", dir), 0);
	T_ASSERT(strstr(out, "scans every segment") == NULL);
	free(out);

	/* 2. The header damaged (its slot count): said, and the fallback. */
	flip_byte(ck, 40);
	err = get_a(dir, "", gpath, v, n);
	T_ASSERT(strstr(err, "kvtier get: warning: ") != NULL);
	T_ASSERT(strstr(err, "/ssd/checkpoint: its header is unreadable (") != NULL);
	T_ASSERT(strstr(err, "opening it at 16 segments") != NULL);
	free(err);
	T_EQ_INT(run(&out, NULL, "fsck --ssd-capacity 128M --segment 8M '%s'", dir), 0);
	T_ASSERT(strstr(out, "scans every segment") == NULL);
	free(out);
	/* Told the size, nothing to say. */
	flip_byte(ck, 40);
	err = get_a(dir, "--ssd-capacity 128M", gpath, v, n);
	T_ASSERT(strstr(err, "warning") == NULL);
	free(err);

	/* 3. Cut inside its header. */
	T_EQ_INT(truncate(ck, 100), 0);
	err = get_a(dir, "", gpath, v, n);
	T_ASSERT(strstr(err, "its header is unreadable") != NULL);
	free(err);
	free(v);
}

/* One counter of the server's, NAME VALUE from stat --raw as the admin. */
static uint64_t server_stat(const char *addr, const char *secret, const char *name)
{
	char *out, want[128];
	const char *p;
	uint64_t v;

	T_EQ_INT(run(&out, NULL, "stat --server %s --tenant alice --secret-file '%s' --raw", addr,
		     secret), 0);
	snprintf(want, sizeof(want), "\n%s ", name);
	p = strstr(out, want);
	T_ASSERT(p != NULL);
	v = strtoull(p + strlen(want), NULL, 10);
	free(out);
	return v;
}

/* A server with tenants: a wrong secret, or none, is said to be an
 * authentication problem, not "cannot reach" (the server answered).
 * Neither leaves a protocol error on the server: the TLS probe, whose
 * ClientHello a plain server counts as a bad magic, is for connections
 * that closed, not for refusals.  A tenant's stat --watch asks for the
 * server-wide figures once, not at each refresh (each refusal counted
 * in server.errors.permission, which KvtierAuthFailures alerts on), and
 * a tenant's ls not at all (STATS says the connection's conn.role). */
static void test_auth(void)
{
	struct tsrv s;
	char dir[700], addr[64], tenants[700], good[700], bad[700], bob[700], *cmd;
	uint64_t perm;
	char *err;

	snprintf(dir, sizeof(dir), "%s/auth-srv", base);
	snprintf(tenants, sizeof(tenants), "%s/tenants", base);
	snprintf(good, sizeof(good), "%s/good.secret", base);
	snprintf(bad, sizeof(bad), "%s/bad.secret", base);
	snprintf(bob, sizeof(bob), "%s/bob.secret", base);
	tsrv_write_file(base, "tenants", "alice 0123456789abcdef0123 admin\n"
					 "bob bobbobbobbobbobbob tenant\n");
	tsrv_write_file(base, "good.secret", "0123456789abcdef0123");
	tsrv_write_file(base, "bob.secret", "bobbobbobbobbobbob");
	tsrv_write_file(base, "bad.secret", "wrongwrongwrongwrong");
	tsrv_start(&s, kvtierd, base, dir, tenants, NULL);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);

	T_EQ_INT(run(NULL, NULL, "stat --server %s --tenant alice --secret-file '%s'", addr, good),
		 0);
	T_EQ_INT(run(NULL, &err, "stat --server %s --tenant alice --secret-file '%s'", addr, bad),
		 1);
	T_ASSERT(strstr(err, "answered") != NULL && strstr(err, "--secret-file") != NULL);
	T_ASSERT(strstr(err, "cannot reach") == NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "rm --server %s key-x", addr), 1); /* no secret at all */
	T_ASSERT(strstr(err, "answered") != NULL && strstr(err, "--secret-file") != NULL);
	free(err);
	T_EQ_INT(server_stat(addr, good, "server.errors.magic"), 0);
	perm = server_stat(addr, good, "server.errors.permission");
	T_ASSERT(asprintf(&cmd, "timeout -s INT 2 '%s' stat --server %s --tenant bob "
			  "--secret-file '%s' --watch 0.2 >/dev/null 2>&1", kvtier, addr, bob) > 0);
	T_ASSERT(system(cmd) != -1);
	free(cmd);
	T_ASSERT(server_stat(addr, good, "server.errors.permission") <= perm + 1);
	/* A tenant's ls asks only what a tenant may: no refusal counted
	 * (until 2026-12-06 it asked for the server-wide figures and was
	 * refused each time); the admin's ls has them. */
	perm = server_stat(addr, good, "server.errors.permission");
	{
		char *out;
		T_EQ_INT(run(&out, NULL, "ls --server %s --tenant bob --secret-file '%s'", addr, bob),
			 0);
		T_ASSERT(strstr(out, "tenant bob: ") != NULL);
		T_ASSERT(strstr(out, "server: dram") == NULL);
		free(out);
		T_EQ_INT(server_stat(addr, good, "server.errors.permission"), perm);
		T_EQ_INT(run(&out, NULL, "ls --server %s --tenant alice --secret-file '%s'", addr,
			     good), 0);
		T_ASSERT(strstr(out, "tenant alice: ") != NULL);
		T_ASSERT(strstr(out, "server: dram") != NULL);
		free(out);
		T_EQ_INT(server_stat(addr, good, "server.errors.permission"), perm);
	}
	/* A drain is the admin's: a tenant is told so, with the flags. */
	T_EQ_INT(run(NULL, &err, "drain %s --tenant bob --secret-file '%s' --no-wait", addr, bob), 1);
	T_ASSERT(strstr(err, "not permitted") != NULL && strstr(err, "admin role") != NULL);
	free(err);
	/* What the library refuses before connecting is said in the flags'
	 * terms: a secret others can read, an address that does not resolve. */
	T_ASSERT(chmod(good, 0644) == 0);
	T_EQ_INT(run(NULL, &err, "stat --server %s --tenant alice --secret-file '%s'", addr, good),
		 1);
	T_ASSERT(strstr(err, "--secret-file") != NULL && strstr(err, "chmod 600") != NULL);
	free(err);
	T_EQ_INT(run(NULL, &err, "stat --server no-such-host.invalid:7070"), 1);
	T_ASSERT(strstr(err, "--server 'no-such-host.invalid:7070'") != NULL);
	free(err);
	T_EQ_INT(tsrv_stop(&s), 0);
}

static void test_help(void)
{
	static const char *const cmds[] = { "stat", "ls", "get", "put", "rm", "clear", "fsck" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *out;
		T_EQ_INT(run(&out, NULL, "%s --help", cmds[i]), 0);
		T_ASSERT(strncmp(out, "usage: kvtier ", 14) == 0);
		free(out);
		T_EQ_INT(run(&out, NULL, "help %s", cmds[i]), 0);
		T_ASSERT(strncmp(out, "usage: kvtier ", 14) == 0);
		free(out);
		/* A typo'd option is named, under the command's full name. */
		char *err, want[80];
		T_EQ_INT(run(NULL, &err, "%s --bogus-option", cmds[i]), 2);
		snprintf(want, sizeof(want), "kvtier %s: unrecognized option '--bogus-option'",
			 cmds[i]);
		T_ASSERT(strstr(err, want) != NULL);
		T_ASSERT(strstr(err, "--help") != NULL);
		free(err);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3)
		T_SKIP("usage: test_cli PATH-TO-KVTIER PATH-TO-KVTIERD");
	kvtier = argv[1];
	kvtierd = argv[2];
	base = t_mkdtemp();
	test_help();
	test_dir();
	test_dir_ckpt();
	test_server();
	test_auth();
	t_rmtree(base);
	free(base);
	return 0;
}

/*
 * test_del_dead.c - a delete through kvtierd's front doors reaches the
 * store for a block whose SSD index entry is dead (doc/ssd.md "Dead
 * entries"), so that a kill -9 and a restart do not bring it back: a
 * real kvtierd with an SSD tier, driven over raw sockets.
 *
 * An SSD entry is kept dead when a read of its record fails its checks
 * (the corruption may be the read's alone, the record intact on disk):
 * every read misses, but a delete still finds the entry and logs its
 * tombstone.  Here the record's bytes are flipped in the store's file
 * while kvtierd runs, a GET misses (ssd.crc_errors), the bytes are put
 * back -- a transient bad read -- and the GET still misses (the entry is
 * dead).  Then, per front door, a delete of the key is answered, kvtierd
 * is killed (-9) and restarted, and the key must still be missing:
 *
 *   resp: DEL of the dead key, a key never set and a live key answers 1
 *         (Redis: the keys there to read).  Before 2026-12-05 respd sent a
 *         store DELETE only for the keys its probes found, the dead key's
 *         tombstone was never logged, and GET returned the old value.
 *   s3:   DeleteObject of a dead object answers 204, and it stays deleted
 *         (s3d sends the DELETE without a lookup; kept so).
 *
 * argv[1]: kvtierd.  argv[2]: the phase (resp, s3).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server.h"
#include "t.h"

#define VAL_LEN 8192

static const char *kvtierd;
static char base[600], dir[700];
static uint16_t resp_port, s3_port, metrics_port;
static char val[VAL_LEN + 1];

/* One RESP command (n words) on its own connection, then QUIT: the reply. */
static char *resp(unsigned n, const char *const *w)
{
	size_t cap = 64 + VAL_LEN * 2, l;
	char *req = malloc(cap), *r;

	T_ASSERT(req);
	l = (size_t)snprintf(req, cap, "*%u\r\n", n);
	for (unsigned i = 0; i < n; i++)
		l += (size_t)snprintf(req + l, cap - l, "$%zu\r\n%s\r\n", strlen(w[i]), w[i]);
	l += (size_t)snprintf(req + l, cap - l, "*1\r\n$4\r\nQUIT\r\n");
	T_ASSERT(l < cap);
	r = tsrv_talk(resp_port, req, l);
	free(req);
	return r;
}

static void resp_eq(unsigned n, const char *const *w, const char *want)
{
	char *r = resp(n, w);
	if (strncmp(r, want, strlen(want)) != 0)
		T_FAIL("%s %s: got '%.40s', want '%s'", w[0], n > 1 ? w[1] : "", r, want);
	free(r);
}

/* One S3 request without a signature (no --tenants): the status code. */
static int s3(const char *method, const char *path, const char *body, char **out)
{
	size_t bl = body ? strlen(body) : 0, cap = 512 + bl;
	char *req = malloc(cap), *r;
	int l, code = 0;

	T_ASSERT(req);
	l = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s", method, path, bl, body ? body : "");
	r = tsrv_talk(s3_port, req, (size_t)l);
	free(req);
	T_ASSERT(sscanf(r, "HTTP/1.1 %d", &code) == 1);
	if (out)
		*out = r;
	else
		free(r);
	return code;
}

static uint64_t crc_errors(void)
{
	char *page = tsrv_http_body(metrics_port, "/metrics");
	uint64_t v = tsrv_metric(page, "kvtier_ssd_crc_errors_total");
	free(page);
	return v;
}

static void start(struct tsrv *s)
{
	const char *extra[] = { "--resp", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--metrics",
				"127.0.0.1:0", "--set", "ssd.admission=always", NULL };
	snprintf(dir, sizeof(dir), "%s/store", base);
	tsrv_start(s, kvtierd, base, dir, NULL, extra);
	resp_port = tsrv_listener_port(s->log, "RESP");
	s3_port = tsrv_s3_port(s->log);
	metrics_port = tsrv_listener_port(s->log, "metrics");
}

/* XOR 512 bytes in the middle of each copy of val in the files under d
 * (found by its first KiB) with 0x5a (twice: as they were); how many
 * copies. */
static unsigned flip(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *de;
	unsigned found = 0;

	T_ASSERT(dp);
	while ((de = readdir(dp))) {
		char path[1200];
		struct stat st;
		uint8_t *b;
		size_t off = 0;
		int fd;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", d, de->d_name);
		if (stat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			found += flip(path);
			continue;
		}
		if (!S_ISREG(st.st_mode) || st.st_size < VAL_LEN)
			continue;
		T_ASSERT((fd = open(path, O_RDWR | O_CLOEXEC)) >= 0);
		b = malloc((size_t)st.st_size);
		T_ASSERT(b);
		T_EQ_INT(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
		for (uint8_t *p; (p = memmem(b + off, (size_t)st.st_size - off, val, 1024));) {
			uint8_t x[512];
			off = (size_t)(p - b) + 4096; /* past the KiB searched for */
			T_ASSERT(off + sizeof(x) <= (size_t)st.st_size);
			for (int i = 0; i < 512; i++)
				x[i] = b[off + (size_t)i] ^ 0x5a;
			T_EQ_INT(pwrite(fd, x, sizeof(x), (off_t)off), 512);
			off += 512;
			found++;
		}
		T_EQ_INT(fsync(fd), 0);
		close(fd);
		free(b);
	}
	closedir(dp);
	return found;
}

/* The key (RESP) or object (S3) put, on SSD alone after a restart, made
 * dead by a read that failed its checks, its bytes then put back. */
static void make_dead(struct tsrv *s, bool is_s3)
{
	const char *get[] = { "GET", "dead" };
	uint64_t crc0;
	unsigned n;
	char *r;

	start(s);
	if (is_s3) {
		T_EQ_INT(s3("PUT", "/bkt", NULL, NULL), 200);
		T_EQ_INT(s3("PUT", "/bkt/dead", val, NULL), 200);
	} else {
		resp_eq(3, (const char *[]){ "SET", "dead", val }, "+OK");
	}
	T_EQ_INT(tsrv_stop(s), 0);
	start(s); /* DRAM empty: the record is on SSD alone */
	n = flip(dir);
	if (n == 0)
		T_FAIL("the value's record was not found under %s", dir);
	crc0 = crc_errors();
	if (is_s3) {
		T_EQ_INT(s3("GET", "/bkt/dead", NULL, NULL), 404);
	} else {
		resp_eq(2, get, "$-1");
	}
	T_EQ_U64(crc_errors(), crc0 + 1);
	T_EQ_U64(flip(dir), n); /* a transient bad read: the record is intact */
	if (is_s3) {
		T_EQ_INT(s3("GET", "/bkt/dead", NULL, &r), 404);
		free(r);
	} else {
		resp_eq(2, get, "$-1"); /* dead: a miss for every read */
	}
}

static void phase_resp(void)
{
	const char *get[] = { "GET", "dead" };
	struct tsrv s;
	char *r;

	make_dead(&s, false);
	resp_eq(3, (const char *[]){ "SET", "live", "a live value" }, "+OK");
	/* Redis's count: the keys there to read -- not the dead one. */
	resp_eq(4, (const char *[]){ "DEL", "dead", "never", "live" }, ":1");
	tsrv_kill9(&s);
	start(&s);
	r = resp(2, get);
	fprintf(stderr, "resp: after DEL, kill -9 and a restart the dead key is %s\n",
		strncmp(r, "$-1", 3) == 0 ? "gone" : "back");
	if (strncmp(r, "$-1", 3) != 0)
		T_FAIL("GET dead after DEL and kill -9: got '%.40s', want nil", r);
	free(r);
	resp_eq(2, (const char *[]){ "GET", "live" }, "$-1");
	resp_eq(2, (const char *[]){ "GET", "never" }, "$-1");
	T_EQ_INT(tsrv_stop(&s), 0);
}

static void phase_s3(void)
{
	struct tsrv s;
	int code;

	make_dead(&s, true);
	T_EQ_INT(s3("DELETE", "/bkt/dead", NULL, NULL), 204);
	tsrv_kill9(&s);
	start(&s);
	code = s3("GET", "/bkt/dead", NULL, NULL);
	fprintf(stderr, "s3: after DeleteObject, kill -9 and a restart the object is %s\n",
		code == 404 ? "gone" : "back");
	T_EQ_INT(code, 404);
	T_EQ_INT(tsrv_stop(&s), 0);
}

static const struct tsrv_phase phases[] = {
	{ "resp", phase_resp },
	{ "s3", phase_s3 },
};

int main(int argc, char **argv)
{
	if (argc < 3)
		T_SKIP("usage: test_del_dead PATH-TO-KVTIERD PHASE");
	kvtierd = argv[1];
	/* letters at random: no 1 KiB of it twice (flip) */
	tsrv_fill((uint8_t *)val, VAL_LEN, 29);
	for (int i = 0; i < VAL_LEN; i++)
		val[i] = (char)('a' + (uint8_t)val[i] % 26);
	val[VAL_LEN] = 0;
	return tsrv_run_phase("test_del_dead", argc, argv, phases,
			      sizeof(phases) / sizeof(phases[0]), base, sizeof(base));
}

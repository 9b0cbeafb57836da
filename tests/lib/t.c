/* t.c - helpers shared by the test programs (see t.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

char *t_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *path;
	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/kvtier-test-XXXXXX", base) < 0)
		T_FAIL("asprintf");
	if (!mkdtemp(path))
		T_FAIL("mkdtemp %s", path);
	return path;
}

static int t_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

void t_rmtree(const char *path)
{
	if (path)
		nftw(path, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

bool t_dir_contains(const char *dir, const char *pat)
{
	size_t pl = strlen(pat);
	bool found = false;
	DIR *d = opendir(dir);
	struct dirent *e;
	T_ASSERT(d);
	while (!found && (e = readdir(d))) {
		char path[4096];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			found = t_dir_contains(path, pat);
		} else if (S_ISREG(st.st_mode) && st.st_size > 0) {
			uint8_t *b = malloc((size_t)st.st_size);
			int fd = open(path, O_RDONLY);
			T_ASSERT(b && fd >= 0);
			T_EQ_INT(pread(fd, b, (size_t)st.st_size, 0), st.st_size);
			close(fd);
			found = memmem(b, (size_t)st.st_size, pat, pl) != NULL;
			free(b);
		}
	}
	closedir(d);
	return found;
}

int t_sh_capture(const char *dir, const char *cmd, char **out, char **err)
{
	char op[4200], ep[4200], *full;
	const char *paths[2] = { op, ep };
	char **bufs[2] = { out, err };
	int st;
	snprintf(op, sizeof(op), "%s/out", dir);
	snprintf(ep, sizeof(ep), "%s/err", dir);
	if (asprintf(&full, "%s >'%s' 2>'%s'", cmd, op, ep) < 0)
		T_FAIL("asprintf");
	st = system(full);
	free(full);
	T_ASSERT(st != -1 && WIFEXITED(st));
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(paths[i], "r");
		char *b = calloc(1, 1 << 20);
		size_t n;
		T_ASSERT(f != NULL);
		T_ASSERT(b != NULL);
		n = fread(b, 1, (1 << 20) - 1, f);
		b[n] = 0;
		fclose(f);
		if (bufs[i])
			*bufs[i] = b;
		else
			free(b);
	}
	return WEXITSTATUS(st);
}

uint8_t *t_at_guard(const void *src, size_t len)
{
	static uint8_t *area; /* mapped once per test program, never unmapped */
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *dst;

	if (!area) {
		uint8_t *p;
		if (page <= 0 || T_GUARD_AREA % (size_t)page)
			T_FAIL("page size %ld", page);
		p = mmap(NULL, T_GUARD_AREA + (size_t)page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED || mprotect(p + T_GUARD_AREA, (size_t)page, PROT_NONE) != 0)
			T_FAIL("guard page: mmap/mprotect failed");
		area = p;
	}
	if (len > T_GUARD_AREA)
		T_FAIL("t_at_guard: %zu bytes > %u", len, T_GUARD_AREA);
	dst = area + T_GUARD_AREA - len;
	if (src && len)
		memmove(dst, src, len);
	return dst;
}

#define T_PORT_FLOOR 10000u /* below: well-known and registered services */

/* A loopback port bound and released: port (0: the kernel's choice), or 0
 * if it is taken. */
static uint16_t t_try_port(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t got = 0;

	if (fd < 0)
		T_FAIL("socket: %s", strerror(errno));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		got = ntohs(a.sin_port);
	close(fd);
	return got;
}

/* Was p handed out by this program lately?  A port drawn and released is
 * free again until its server binds it, so a test that draws a pod's
 * ports before starting any member could get one twice ("member ... is
 * listed twice", test_cluster_forward once in a few thousand runs).  The
 * last T_PORT_RECENT draws are never drawn again.  Tests draw from one
 * thread. */
#define T_PORT_RECENT 256u
static bool t_port_recent(uint16_t p, bool add)
{
	static uint16_t recent[T_PORT_RECENT];
	static unsigned next;

	for (unsigned i = 0; i < T_PORT_RECENT; i++)
		if (recent[i] == p)
			return true;
	if (add)
		recent[next++ % T_PORT_RECENT] = p;
	return false;
}

uint16_t t_free_port(void)
{
	static uint64_t x; /* this program's draws */
	unsigned lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	if (!x) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		x = ((uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec) | 1;
	}
	for (int i = 0; lo > T_PORT_FLOOR + 1000 && i < 64; i++) {
		uint16_t p;
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p = (uint16_t)(T_PORT_FLOOR + (x * 0x2545F4914F6CDD1Dull >> 32) % (lo - T_PORT_FLOOR));
		if (!t_port_recent(p, false) && t_try_port(p) == p) {
			t_port_recent(p, true);
			return p;
		}
	}
	uint16_t p = t_try_port(0);
	if (!p)
		T_FAIL("no free loopback port");
	t_port_recent(p, true);
	return p;
}

bool t_http_read(int fd, char *hdr, size_t cap, uint8_t **body, size_t *body_len)
{
	size_t n = 0, want = 0, have;
	char *end = NULL, *cl;
	while (!end) {
		ssize_t r;
		if (n + 1 >= cap)
			return false;
		r = read(fd, hdr + n, cap - 1 - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
		hdr[n] = 0;
		end = strstr(hdr, "\r\n\r\n");
	}
	*end = 0;
	for (cl = hdr; (cl = strchr(cl, '\n')); cl++)
		if (!strncasecmp(cl + 1, "content-length:", 15))
			want = strtoull(cl + 16, NULL, 10);
	*body = malloc(want + 1);
	have = n - (size_t)(end + 4 - hdr);
	memcpy(*body, end + 4, have);
	while (have < want) {
		ssize_t r = read(fd, *body + have, want - have);
		if (r <= 0) {
			free(*body);
			return false;
		}
		have += (size_t)r;
	}
	(*body)[want] = 0;
	*body_len = want;
	return true;
}

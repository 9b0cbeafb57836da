/*
 * test_shs3_retry.c - the S3 backend's retries (lib/tier/shared/shs3.c,
 * req_run) against a fault-injecting HTTP server on loopback: a PUT, GET,
 * HEAD and DELETE answered 503 / 500 / nothing a few times succeed after
 * retries, counted in shared.s3_retries; a request failing every time
 * gives up after `attempts` tries (exactly that many reach the server),
 * counted in retry_giveups and within timeout_ms; a 404 and a multipart
 * initiate (POST, not idempotent) are not retried; a multipart part is
 * retried on its own (test_multipart).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shs3.h"
#include "t.h"

enum fault { F_503, F_500, F_DROP };

/* The server: one connection at a time, "Connection: close" on every
 * answer.  Fields under lock. */
struct fake {
	int lfd;
	uint16_t port;
	pthread_t th;
	pthread_mutex_t lock;
	atomic_bool stop;
	unsigned fail_left;  /* the next this many requests fail ... */
	enum fault mode;     /* ... this way */
	unsigned requests;   /* requests read (each counted once) */
	uint8_t *obj;        /* the one object, any name */
	size_t obj_len;
	bool have;
	/* Multipart (test_multipart): faults only hit requests whose request
	 * line holds fail_match (when set); match_requests counts those. */
	char fail_match[32];
	unsigned match_requests;
	uint8_t *part[8];    /* the upload's parts by number - 1 */
	size_t part_len[8];
	unsigned completes, aborts;
};

static void fake_write(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
}

/* Whether the request line (hdr's first line) holds s. */
static bool fake_line_has(const char *hdr, const char *s)
{
	const char *eol = strstr(hdr, "\r\n"), *hit = strstr(hdr, s);
	return hit && (!eol || hit < eol);
}

/* A multipart request (initiate, part, complete, abort): answered, and
 * true; else false.  Under no lock (only the server thread and, between
 * runs, the test touch the parts). */
static bool fake_multipart(struct fake *f, int fd, const char *hdr, const uint8_t *body,
			   size_t body_len)
{
	char out[512];
	const char *pn = strstr(hdr, "partNumber=");
	if (!strncmp(hdr, "POST ", 5) && fake_line_has(hdr, "?uploads")) {
		static const char x[] = "<InitiateMultipartUploadResult><UploadId>u1</UploadId>"
					"</InitiateMultipartUploadResult>";
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s", strlen(x), x);
	} else if (!strncmp(hdr, "PUT ", 4) && pn && fake_line_has(hdr, "partNumber=")) {
		unsigned n = (unsigned)strtoul(pn + 11, NULL, 10);
		if (n < 1 || n > 8)
			return false;
		free(f->part[n - 1]);
		f->part[n - 1] = malloc(body_len + 1);
		memcpy(f->part[n - 1], body, body_len);
		f->part_len[n - 1] = body_len;
		snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nETag: \"p%u\"\r\n"
			 "Content-Length: 0\r\nConnection: close\r\n\r\n", n);
	} else if (!strncmp(hdr, "POST ", 5) && fake_line_has(hdr, "uploadId=u1")) {
		/* Complete: the object is the parts the body lists, each with
		 * the ETag its last upload got. */
		char *xml = malloc(body_len + 1), want[64];
		size_t len = 0;
		unsigned n = 0;
		bool ok = true;
		memcpy(xml, body, body_len);
		xml[body_len] = 0;
		while (n < 8 && f->part[n]) {
			snprintf(want, sizeof(want), "<PartNumber>%u</PartNumber><ETag>\"p%u\"</ETag>",
				 n + 1, n + 1);
			ok = ok && strstr(xml, want);
			len += f->part_len[n++];
		}
		free(xml);
		pthread_mutex_lock(&f->lock);
		if (ok && n > 0) {
			free(f->obj);
			f->obj = malloc(len);
			f->obj_len = 0;
			for (unsigned i = 0; i < n; i++) {
				memcpy(f->obj + f->obj_len, f->part[i], f->part_len[i]);
				f->obj_len += f->part_len[i];
			}
			f->have = true;
			f->completes++;
		}
		pthread_mutex_unlock(&f->lock);
		snprintf(out, sizeof(out), "HTTP/1.1 %s\r\nContent-Length: 0\r\n"
			 "Connection: close\r\n\r\n", ok && n ? "200 OK" : "400 Bad");
	} else if (!strncmp(hdr, "DELETE ", 7) && fake_line_has(hdr, "uploadId=u1")) {
		pthread_mutex_lock(&f->lock);
		f->aborts++;
		pthread_mutex_unlock(&f->lock);
		snprintf(out, sizeof(out), "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
	} else {
		return false;
	}
	fake_write(fd, out, strlen(out));
	/* After a complete or an abort, the next upload starts from no parts. */
	if (strncmp(hdr, "PUT ", 4) && !fake_line_has(hdr, "?uploads"))
		for (unsigned i = 0; i < 8; i++) {
			free(f->part[i]);
			f->part[i] = NULL;
		}
	return true;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		struct pollfd pf = { .fd = f->lfd, .events = POLLIN };
		char hdr[16384], out[256];
		uint8_t *body = NULL;
		size_t body_len = 0;
		int fd, code = 200, fail = -1;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		if (!t_http_read(fd, hdr, sizeof(hdr), &body, &body_len)) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&f->lock);
		f->requests++;
		bool match = !f->fail_match[0] || fake_line_has(hdr, f->fail_match);
		if (f->fail_match[0] && match)
			f->match_requests++;
		if (f->fail_left && match) {
			f->fail_left--;
			fail = (int)f->mode;
		}
		pthread_mutex_unlock(&f->lock);
		if (fail == F_DROP) {
			/* read, then closed without a word */
		} else if (fail >= 0) {
			snprintf(out, sizeof(out),
				 "HTTP/1.1 %d Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
				 fail == F_503 ? 503 : 500);
			fake_write(fd, out, strlen(out));
		} else if (fake_multipart(f, fd, hdr, body, body_len)) {
			/* answered */
		} else if (!strncmp(hdr, "PUT ", 4)) {
			pthread_mutex_lock(&f->lock);
			free(f->obj);
			f->obj = body;
			f->obj_len = body_len;
			f->have = true;
			body = NULL;
			pthread_mutex_unlock(&f->lock);
			snprintf(out, sizeof(out),
				 "HTTP/1.1 200 OK\r\nETag: \"e\"\r\nContent-Length: 0\r\n"
				 "Connection: close\r\n\r\n");
			fake_write(fd, out, strlen(out));
		} else if (!strncmp(hdr, "GET ", 4) || !strncmp(hdr, "HEAD ", 5)) {
			bool head = hdr[0] == 'H';
			pthread_mutex_lock(&f->lock);
			code = f->have ? 200 : 404;
			snprintf(out, sizeof(out),
				 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				 code, f->have ? f->obj_len : 0);
			fake_write(fd, out, strlen(out));
			if (!head && f->have)
				fake_write(fd, f->obj, f->obj_len);
			pthread_mutex_unlock(&f->lock);
		} else if (!strncmp(hdr, "DELETE ", 7)) {
			pthread_mutex_lock(&f->lock);
			f->have = false;
			pthread_mutex_unlock(&f->lock);
			snprintf(out, sizeof(out),
				 "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
			fake_write(fd, out, strlen(out));
		} else {
			snprintf(out, sizeof(out),
				 "HTTP/1.1 501 No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
			fake_write(fd, out, strlen(out));
		}
		free(body);
		close(fd);
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(f->lfd >= 0);
	T_EQ_INT(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	T_EQ_INT(listen(f->lfd, 16), 0);
	T_EQ_INT(getsockname(f->lfd, (struct sockaddr *)&sa, &sl), 0);
	f->port = ntohs(sa.sin_port);
	T_EQ_INT(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
	free(f->obj);
	for (unsigned i = 0; i < 8; i++)
		free(f->part[i]);
}

/* Fail the next n requests with mode; returns the request count so far. */
static unsigned fake_fail(struct fake *f, unsigned n, enum fault mode)
{
	unsigned r;
	pthread_mutex_lock(&f->lock);
	f->fail_left = n;
	f->mode = mode;
	r = f->requests;
	pthread_mutex_unlock(&f->lock);
	return r;
}

static unsigned fake_requests(struct fake *f)
{
	unsigned r;
	pthread_mutex_lock(&f->lock);
	r = f->requests;
	pthread_mutex_unlock(&f->lock);
	return r;
}

static struct shs3 *open_s3(struct fake *f, struct kvt_mem *mem, unsigned attempts,
			    unsigned base_ms, unsigned timeout_ms)
{
	static char ep[64];
	struct shs3_creds c;
	struct shs3_config cfg = { .endpoint = ep, .bucket = "b", .conns = 2,
				   .timeout_ms = timeout_ms, .part_size = UINT64_C(5) << 20,
				   .attempts = attempts, .retry_base_ms = base_ms };
	struct shs3 *s3 = NULL;
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", f->port);
	memset(&c, 0, sizeof(c));
	strcpy(c.access_key, "AKIDEXAMPLE");
	strcpy(c.secret_key, "secret");
	strcpy(c.region, "us-east-1");
	T_OK(shs3_open(&s3, &cfg, &c, mem, NULL));
	return s3;
}

#define ST(s3, x) atomic_load(&shs3_stats(s3)->x)

static void test_recovers(struct kvt_mem *mem)
{
	struct fake f;
	struct shs3 *s3;
	uint8_t val[3000], back[4000];
	uint64_t len = 0;
	unsigned r0;

	fake_start(&f);
	s3 = open_s3(&f, mem, 3, 10, 5000);
	t_fill(val, sizeof(val), 7);

	r0 = fake_fail(&f, 2, F_503);
	T_OK(shs3_put(s3, "o", val, sizeof(val)));
	T_EQ_INT(fake_requests(&f) - r0, 3);
	T_EQ_U64(ST(s3, retries), 2);

	r0 = fake_fail(&f, 1, F_500);
	T_EQ_INT(shs3_get(s3, "o", 0, 0, back, sizeof(back)), (int64_t)sizeof(val));
	T_EQ_MEM(back, val, sizeof(val));
	T_EQ_INT(fake_requests(&f) - r0, 2);
	T_EQ_U64(ST(s3, retries), 3);

	/* No answer at all (the connection closed after the request). */
	r0 = fake_fail(&f, 2, F_DROP);
	T_OK(shs3_head(s3, "o", &len));
	T_EQ_U64(len, sizeof(val));
	T_EQ_INT(fake_requests(&f) - r0, 3);
	T_EQ_U64(ST(s3, retries), 5);

	r0 = fake_fail(&f, 1, F_503);
	T_OK(shs3_delete(s3, "o"));
	T_EQ_INT(fake_requests(&f) - r0, 2);
	T_EQ_U64(ST(s3, retry_giveups), 0);

	/* A miss is an answer: not retried. */
	r0 = fake_requests(&f);
	T_RC(shs3_get(s3, "o", 0, 0, back, sizeof(back)), KVT_MISS);
	T_EQ_INT(fake_requests(&f) - r0, 1);
	T_EQ_U64(ST(s3, retries), 6);
	shs3_close(s3);
	fake_stop(&f);
}

static void test_gives_up(struct kvt_mem *mem)
{
	struct fake f;
	struct shs3 *s3;
	uint8_t val[100] = { 1 };
	uint8_t *big = calloc(1, 6u << 20);
	uint64_t t0;
	unsigned r0;
	int rc;

	fake_start(&f);
	s3 = open_s3(&f, mem, 3, 10, 5000);
	r0 = fake_fail(&f, 1000, F_503);
	T_RC(shs3_put(s3, "o", val, sizeof(val)), -EIO);
	T_EQ_INT(fake_requests(&f) - r0, 3); /* exactly `attempts` */
	T_EQ_U64(ST(s3, retries), 2);
	T_EQ_U64(ST(s3, retry_giveups), 1);

	/* A multipart initiate (POST) is not retried. */
	r0 = fake_requests(&f);
	T_ASSERT(big);
	T_ASSERT(shs3_put(s3, "big", big, 6u << 20) < 0);
	free(big);
	T_EQ_INT(fake_requests(&f) - r0, 1);
	T_EQ_U64(ST(s3, retry_giveups), 1);
	shs3_close(s3);

	/* Retries stay within timeout_ms: 10 attempts of a 200 ms base
	 * would sleep up to 1.4 s by the fourth; 300 ms bounds them all.  The
	 * request gives up with its last attempt's error: the 503 (-EIO), or
	 * on a loaded machine that attempt's own timeout (-ETIMEDOUT; CI saw
	 * it when the backoff slept to the deadline's last millisecond, which
	 * it no longer does, S3_MIN_ATTEMPT_MS, but 50 ms can still run out). */
	s3 = open_s3(&f, mem, 10, 200, 300);
	r0 = fake_requests(&f);
	t0 = t_now_ms();
	rc = shs3_put(s3, "o", val, sizeof(val));
	T_ASSERT(rc == -EIO || rc == -ETIMEDOUT);
	T_LE_INT((long long)(t_now_ms() - t0), 1000);
	T_ASSERT(fake_requests(&f) - r0 >= 2); /* it did retry ... */
	T_ASSERT(fake_requests(&f) - r0 < 10); /* ... and ran out of time */
	T_EQ_U64(ST(s3, retry_giveups), 1);
	shs3_close(s3);

	/* attempts 1: no retry. */
	s3 = open_s3(&f, mem, 1, 10, 5000);
	r0 = fake_requests(&f);
	T_RC(shs3_put(s3, "o", val, sizeof(val)), -EIO);
	T_EQ_INT(fake_requests(&f) - r0, 1);
	T_EQ_U64(ST(s3, retries), 0);
	shs3_close(s3);
	fake_stop(&f);
}

/* Fail the next n requests whose request line holds match, with mode;
 * returns how many such requests the server has seen. */
static unsigned fake_fail_match(struct fake *f, unsigned n, enum fault mode, const char *match)
{
	unsigned r;
	pthread_mutex_lock(&f->lock);
	f->fail_left = n;
	f->mode = mode;
	snprintf(f->fail_match, sizeof(f->fail_match), "%s", match);
	r = f->match_requests;
	pthread_mutex_unlock(&f->lock);
	return r;
}

static unsigned fake_counter(struct fake *f, const unsigned *c)
{
	unsigned r;
	pthread_mutex_lock(&f->lock);
	r = *c;
	pthread_mutex_unlock(&f->lock);
	return r;
}

/* Multipart parts are retried one by one (shs3.c mp_retry): a part
 * answered 503 or dropped a few times lands and the upload completes,
 * byte-exact; a part failing every time is sent exactly `attempts` times,
 * then the upload is aborted; attempts 1 sends it once. */
static void test_multipart(struct kvt_mem *mem)
{
	const size_t len = (6u << 20) + 1000; /* two parts of a 5 MiB part size */
	uint8_t *val = malloc(len), *back = malloc(len + 1);
	struct fake f;
	struct shs3 *s3;
	unsigned m0;

	T_ASSERT(val && back);
	t_fill(val, len, 11);
	fake_start(&f);
	s3 = open_s3(&f, mem, 3, 10, 5000);

	/* Part 2 answered 503 twice: its third try lands. */
	m0 = fake_fail_match(&f, 2, F_503, "partNumber=2&");
	T_OK(shs3_put(s3, "big", val, len));
	T_EQ_INT(fake_counter(&f, &f.match_requests) - m0, 3);
	T_EQ_U64(ST(s3, retries), 2);
	T_EQ_U64(ST(s3, retry_giveups), 0);
	T_EQ_U64(ST(s3, multipart_parts), 2);
	T_EQ_INT(fake_counter(&f, &f.completes), 1);
	T_EQ_INT(fake_counter(&f, &f.aborts), 0);
	T_EQ_INT(shs3_get(s3, "big", 0, 0, back, len + 1), (int64_t)len);
	T_EQ_MEM(back, val, len);

	/* Part 1 read, then its connection closed without an answer. */
	val[0] ^= 0xff;
	val[len - 1] ^= 0xff;
	m0 = fake_fail_match(&f, 1, F_DROP, "partNumber=1&");
	T_OK(shs3_put(s3, "big", val, len));
	T_EQ_INT(fake_counter(&f, &f.match_requests) - m0, 2);
	T_EQ_U64(ST(s3, retries), 3);
	T_EQ_INT(fake_counter(&f, &f.completes), 2);
	T_EQ_INT(shs3_get(s3, "big", 0, 0, back, len + 1), (int64_t)len);
	T_EQ_MEM(back, val, len);

	/* Part 2 failing every time: `attempts` tries, then the abort. */
	m0 = fake_fail_match(&f, 1000, F_503, "partNumber=2&");
	T_RC(shs3_put(s3, "big", val, len), -EIO);
	T_EQ_INT(fake_counter(&f, &f.match_requests) - m0, 3);
	T_EQ_U64(ST(s3, retries), 5);
	T_EQ_U64(ST(s3, retry_giveups), 1);
	T_EQ_INT(fake_counter(&f, &f.completes), 2);
	T_EQ_INT(fake_counter(&f, &f.aborts), 1);
	shs3_close(s3);

	/* attempts 1: one failure of one part fails the upload. */
	s3 = open_s3(&f, mem, 1, 10, 5000);
	m0 = fake_fail_match(&f, 1, F_503, "partNumber=1&");
	T_RC(shs3_put(s3, "big", val, len), -EIO);
	T_EQ_INT(fake_counter(&f, &f.match_requests) - m0, 1);
	T_EQ_U64(ST(s3, retries), 0);
	T_EQ_INT(fake_counter(&f, &f.aborts), 2);
	shs3_close(s3);
	fake_stop(&f);
	free(val);
	free(back);
}

int main(void)
{
	struct kvt_mem mem;
	kvt_mem_init(&mem);
	test_recovers(&mem);
	test_gives_up(&mem);
	test_multipart(&mem);
	return 0;
}

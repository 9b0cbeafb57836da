/*
 * log.c - kvtierd's log: one structured line per event, to stderr or to
 * the --log file, in logfmt:
 *
 *   ts=2026-11-29T19:16:50.123456Z level=info msg="listening on 127.0.0.1:7070" addr=...
 *
 * The library's log callback lands here too (src=lib).
 *
 * Threads: any.  Each line is formatted on the caller's stack and written
 * with one write(2); the file is opened O_APPEND, so lines from concurrent
 * threads never interleave.  SIGHUP reopens the file (after rotation) by
 * dup2() of a fresh descriptor onto the one in use: the switch is atomic
 * for writers, so no lock is needed.  The level is an atomic.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvtierd.h"

static _Atomic int log_fd = 2;
static _Atomic int log_level = KVTD_INFO;
/* --log-format json: the formatter (logjson.c's kvtd_log_json, injected
 * by kvtierd.c so that programs linking log.c alone need no jansson), or
 * NULL for logfmt.  Set before any thread logs. */
static kvtd_log_json_fn *log_json;
static char *log_path;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

int kvtd_log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, log_names[i]) == 0)
			return i;
	if (strcmp(s, "warning") == 0)
		return KVTD_WARN;
	return -1;
}

bool kvtd_log_enabled(int level)
{
	return level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

static int log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	return fd < 0 ? -errno : fd;
}

int kvtd_log_open(const char *path, int min_level)
{
	atomic_store(&log_level, min_level);
	if (!path)
		return 0;
	int fd = log_open_file(path);
	if (fd < 0)
		return fd;
	log_path = strdup(path);
	if (!log_path) {
		close(fd);
		return -ENOMEM;
	}
	atomic_store(&log_fd, fd);
	return 0;
}

void kvtd_log_set_json(kvtd_log_json_fn *fn)
{
	log_json = fn;
}

int kvtd_log_reopen(void)
{
	int fd, cur = atomic_load(&log_fd);

	if (!log_path)
		return 0;
	fd = log_open_file(log_path);
	if (fd < 0)
		return fd;
	/* dup2 swaps the file under the same number atomically. */
	if (dup2(fd, cur) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	close(fd);
	return 0;
}

void kvtd_log_close(void)
{
	int fd = atomic_exchange(&log_fd, 2);
	if (fd != 2)
		close(fd);
	free(log_path);
	log_path = NULL;
}

/* Does s need quotes as a logfmt value? */
static bool log_needs_quote(const char *s)
{
	if (!*s)
		return true;
	for (; *s; s++)
		if (*s <= ' ' || *s == '"' || *s == '=' || *s == '\\' || *s >= 0x7f)
			return true;
	return false;
}

const char *kvtd_log_quote(char *buf, size_t len, const char *s)
{
	size_t n = 0;

	if (len < 4)
		return "\"\"";
	if (!log_needs_quote(s)) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	buf[n++] = '"';
	for (; *s && n + 5 < len; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)ch;
		} else if (ch == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
		} else if (ch < 0x20 || ch >= 0x7f) {
			n += (size_t)snprintf(buf + n, len - n, "\\x%02x", ch);
		} else {
			buf[n++] = (char)ch;
		}
	}
	buf[n++] = '"';
	buf[n] = 0;
	return buf;
}

/* --log-format json: the same event as one JSON object (logjson.c); out
 * of memory loses the line. */
static void log_json_line(const struct timespec *ts, const struct tm *tm, int level,
			  const char *src, const char *msg, const char *fmt, va_list ap)
{
	char tsbuf[40], fields[2048];
	size_t n = strftime(tsbuf, sizeof(tsbuf), "%Y-%m-%dT%H:%M:%S", tm);
	char *line;

	snprintf(tsbuf + n, sizeof(tsbuf) - n, ".%06ldZ", ts->tv_nsec / 1000);
	fields[0] = 0;
	if (fmt)
		vsnprintf(fields, sizeof(fields), fmt, ap);
	line = log_json(tsbuf, log_names[level < 0 ? 0 : level > 3 ? 3 : level], src, msg,
			     fields);
	if (!line)
		return;
	n = strlen(line);
	line[n] = '\n'; /* over the NUL: the line is written by length */
	ssize_t w = write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, n + 1);
	(void)w;
	free(line);
}

static void log_vline(int level, const char *src, const char *msg, const char *fmt, va_list ap)
{
	char line[2048], q[1024];
	struct timespec ts;
	struct tm tm;
	size_t n;
	int r;

	if (!kvtd_log_enabled(level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (log_json) {
		log_json_line(&ts, &tm, level, src, msg, fmt, ap);
		return;
	}
	n = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%06ldZ level=%s%s%s msg=%s",
		     ts.tv_nsec / 1000, log_names[level < 0 ? 0 : level > 3 ? 3 : level],
		     src ? " src=" : "", src ? src : "", kvtd_log_quote(q, sizeof(q), msg));
	if (r > 0)
		n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
	if (fmt && n + 2 < sizeof(line)) {
		line[n++] = ' ';
		r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		if (r > 0)
			n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
	}
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line; a short write to a full disk loses the rest. */
	ssize_t w = write(atomic_load_explicit(&log_fd, memory_order_relaxed), line, n);
	(void)w;
}

void kvtd_log(int level, const char *msg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vline(level, NULL, msg, fmt, ap);
	va_end(ap);
}

/*
 * Lines a client causes (kvtd_log_client: refused connections, protocol
 * errors, failed handshakes and AUTHs, timeouts) are at most
 * KVTD_LOG_CLIENT_PER_SEC a second, server-wide: a client opening
 * connections in a loop wrote one line each, as fast as it could connect
 * (a disk filled by the log).  The rest are dropped and counted; the first
 * line of a later second is preceded by one warning with how many were
 * (kvtd_log_client_dropped has the total: server.log_client_dropped).  Debug lines, which an
 * operator turns on, are not limited.  The counts are relaxed atomics: a
 * second's limit may pass by a few lines between threads.
 */
static _Atomic uint64_t log_client_sec, log_client_n, log_client_held, log_client_total;

uint64_t kvtd_log_client_dropped(void)
{
	return atomic_load_explicit(&log_client_total, memory_order_relaxed);
}

const _Atomic uint64_t *kvtd_log_client_dropped_ctr(void)
{
	return &log_client_total;
}

static bool log_client_admit(void)
{
	struct timespec ts;
	uint64_t sec, was, held = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	sec = (uint64_t)ts.tv_sec;
	was = atomic_load_explicit(&log_client_sec, memory_order_relaxed);
	if (was != sec && atomic_compare_exchange_strong(&log_client_sec, &was, sec)) {
		atomic_store_explicit(&log_client_n, 0, memory_order_relaxed);
		held = atomic_exchange_explicit(&log_client_held, 0, memory_order_relaxed);
	}
	if (held)
		kvtd_log(KVTD_WARN, "client log lines dropped (more than the limit a second)",
			 "dropped=%llu limit_per_sec=%u total=%llu", (unsigned long long)held,
			 KVTD_LOG_CLIENT_PER_SEC, (unsigned long long)kvtd_log_client_dropped());
	if (atomic_fetch_add_explicit(&log_client_n, 1, memory_order_relaxed) <
	    KVTD_LOG_CLIENT_PER_SEC)
		return true;
	atomic_fetch_add_explicit(&log_client_held, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&log_client_total, 1, memory_order_relaxed);
	return false;
}

void kvtd_log_client(int level, const char *msg, const char *fmt, ...)
{
	va_list ap;

	if (!kvtd_log_enabled(level) || (level != KVTD_DEBUG && !log_client_admit()))
		return;
	va_start(ap, fmt);
	log_vline(level, NULL, msg, fmt, ap);
	va_end(ap);
}

static void log_lib_line(int level, const char *msg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vline(level, "lib", msg, fmt, ap);
	va_end(ap);
}

void kvtd_log_lib(void *ctx, int level, const char *msg)
{
	(void)ctx;
	/* enum kvt_log_level and enum kvtd_level share their numbers. */
	log_lib_line(level, msg, NULL);
}

/* One line about a connection: its id, peer and tenant (loop.c, tls.c,
 * the protocols); a client's doing, so limited (kvtd_log_client). */
void kvtd_conn_log(const struct kvtd_conn *c, int level, const char *msg, const char *what)
{
	char q[256], t[PROTO_TENANT_MAX * 4 + 8];
	if (!kvtd_log_enabled(level))
		return;
	kvtd_log_client(level, msg, "conn=%llu peer=%s tenant=%s%s%s", (unsigned long long)c->id, c->peer,
		 c->tenant_len ? kvtd_log_quote(t, sizeof(t), c->tenant) : "-",
		 what ? " reason=" : "", what ? kvtd_log_quote(q, sizeof(q), what) : "");
}

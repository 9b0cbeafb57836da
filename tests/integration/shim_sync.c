/*
 * shim_sync.c - an LD_PRELOAD library for tests only (never installed):
 * holds one fsync or fdatasync of a named file until the test lets it go,
 * so that a test can act (SIGHUP, a request) while the server is inside
 * that sync, at a point it could otherwise hit only by chance.
 *
 * Environment, read at each call:
 *   KVT_SHIM_SYNC_NAME  the files whose syncs may be held: those whose
 *                       name (the last path component of the descriptor's
 *                       /proc/self/fd link) starts with it ("namespaces")
 *   KVT_SHIM_SYNC_DIR   a directory for the handshake: a sync of such a
 *                       file is held only while DIR/arm exists; the sync
 *                       that takes it removes arm (one sync per arming),
 *                       creates DIR/entered, waits until DIR/release
 *                       exists (at most 30 s), then really syncs.
 * Without both, or for any other descriptor, the calls go straight
 * through.
 *
 * And a nameserver that does not answer: a getaddrinfo of the host
 * KVT_SHIM_GAI_NAME appends a byte to KVT_SHIM_GAI_DIR/entered, sleeps
 * 10 s (the resolver's clocks, which a caller must not wait out) and
 * fails with EAI_AGAIN; any other lookup goes straight through
 * (test_peer_attack `dns_held`).
 *
 * Built without sanitizers (tests/meson.build); a sanitized server that
 * preloads it needs ASAN_OPTIONS=verify_asan_link_order=0.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*shim_sync_fn)(int fd);

/* Is fd one of the files named by KVT_SHIM_SYNC_NAME, and armed?  Then
 * disarm, announce, and wait for the release. */
static void shim_sync_hold(int fd)
{
	const char *name = getenv("KVT_SHIM_SYNC_NAME"), *dir = getenv("KVT_SHIM_SYNC_DIR");
	char link[64], path[PATH_MAX], file[PATH_MAX + 16];
	const char *last;
	ssize_t n;

	if (!name || !*name || !dir || !*dir)
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return;
	path[n] = 0;
	last = strrchr(path, '/');
	last = last ? last + 1 : path;
	if (strncmp(last, name, strlen(name)) != 0)
		return;
	snprintf(file, sizeof(file), "%s/arm", dir);
	if (unlink(file) != 0)
		return; /* not armed, or another sync took it */
	snprintf(file, sizeof(file), "%s/entered", dir);
	{
		int efd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (efd >= 0)
			close(efd);
	}
	snprintf(file, sizeof(file), "%s/release", dir);
	for (int i = 0; i < 3000 && access(file, F_OK) != 0; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int fdatasync(int fd)
{
	shim_sync_fn real = (shim_sync_fn)dlsym(RTLD_NEXT, "fdatasync");

	shim_sync_hold(fd);
	return real ? real(fd) : -1;
}

int fsync(int fd)
{
	shim_sync_fn real = (shim_sync_fn)dlsym(RTLD_NEXT, "fsync");

	shim_sync_hold(fd);
	return real ? real(fd) : -1;
}

typedef int (*shim_gai_fn)(const char *node, const char *service, const struct addrinfo *hints,
			   struct addrinfo **res);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	shim_gai_fn real = (shim_gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	const char *name = getenv("KVT_SHIM_GAI_NAME"), *dir = getenv("KVT_SHIM_GAI_DIR");

	if (node && name && *name && dir && *dir && strcmp(node, name) == 0 &&
	    !(hints && (hints->ai_flags & AI_NUMERICHOST))) {
		char file[PATH_MAX];
		struct timespec ts = { 10, 0 };
		int fd;
		snprintf(file, sizeof(file), "%s/entered", dir);
		fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			if (write(fd, "x", 1) != 1) {
				/* the test then sees no entry and fails */
			}
			close(fd);
		}
		nanosleep(&ts, NULL);
		return EAI_AGAIN;
	}
	return real ? real(node, service, hints, res) : EAI_SYSTEM;
}

/*
 * notify.c - kvtierd's readiness and state for its service manager:
 * sd_notify(3) messages (libsystemd) on $NOTIFY_SOCKET when it is set, so
 * that a Type=notify unit (deploy/systemd/kvtierd.service) is "started"
 * only once the store is open and every listener is bound, and shows what
 * the server is doing in `systemctl status`.
 *
 *   READY=1 + STATUS=   after the listeners are bound and the loops run
 *   STOPPING=1          when a stop signal arrives
 *
 * Without $NOTIFY_SOCKET every call does nothing; built without libsystemd
 * (no libsystemd-dev) they do nothing either.  Main thread.
 */
#include <stdio.h>

#include "kvtierd.h"

#ifdef KVTD_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void notify_send(const char *msg)
{
	/* unset_environment 0: a re-exec (none today) would still see it. */
	int rc = sd_notify(0, msg);
	if (rc < 0)
		kvtd_log(KVTD_WARN, "sd_notify failed", "error=%d", rc);
}
#else
static void notify_send(const char *msg)
{
	(void)msg;
}
#endif

void kvtd_notify_ready(const char *status)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
	notify_send(msg);
}

void kvtd_notify_stopping(void)
{
	notify_send("STOPPING=1\nSTATUS=stopping");
}

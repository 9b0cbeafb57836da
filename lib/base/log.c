/*
 * log.c - kvt_logf: the library's one way to say something, routed to the
 * callback the embedder installed (kvt_store_set_log).  The library never
 * prints.  Every module may call it; it calls nothing of the library, so
 * it sits in the bottom layer (doc/decisions.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>

#include "kvt_int.h"

void kvt_logf(const struct kvt_logger *lg, int level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	if (!lg || !lg->fn || level > lg->min_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	lg->fn(lg->ctx, level, buf);
}

/*
 * err.c - names for every result code: kvt_strerror (the library's codes,
 * the wire protocol's, and -errno), plus the library's version and tier
 * names.  Owns only static strings.  The bottom layer: it calls nothing
 * of the library (proto.h is included for its code constants only).
 */
#include <string.h>

#include "kvt_int.h"
#include "proto.h"

const char *kvt_version(void)
{
	return KVTIER_VERSION_STRING;
}

const char *kvt_tier_name(int tier)
{
	switch (tier) {
	case KVT_TIER_DRAM: return "dram";
	case KVT_TIER_SSD: return "ssd";
	case KVT_TIER_REMOTE: return "remote";
	case KVT_TIER_SHARED: return "shared";
	default: return "none";
	}
}

const char *kvt_strerror(int code)
{
	switch (code) {
	case KVT_OK: return "success";
	case KVT_MISS: return "not found (a miss)";
	case KVT_EXISTS: return "key already present (put is a no-op)";
	case KVT_ENULL: return "a required pointer argument is NULL";
	case KVT_EBADLEN: return "length is zero or larger than allowed";
	case KVT_ENONS: return "unknown namespace id (register it with kvt_ns_register)";
	case KVT_EKEYLEN: return "key is empty or longer than 64 bytes";
	case KVT_EPIN: return "pin handle unknown or already released";
	case KVT_ECLOSED: return "store is closed or not open";
	case KVT_ESTATE: return "call not allowed in the store's current state";
	case KVT_EOPTION: return "unknown option name";
	case KVT_EOPTVAL: return "option value malformed or out of range";
	case KVT_ETOOBIG: return "value larger than the tier can ever hold";
	case KVT_EFULL: return "tier full: everything evictable is pinned or in flight";
	case KVT_ECORRUPT: return "persisted file failed its checks (corrupt)";
	case KVT_ELOCKED: return "store directory is locked by another process";
	case KVT_EBADOP: return "unknown request opcode or flag";
	case KVT_ERANGE: return "part index or byte range outside the value";
	case KVT_EBUFSMALL: return "destination buffers shorter than the value";
	case KVT_EFORK: return "store opened before fork() used in the child";
	case KVT_EVERSION: return "persisted file has an unsupported format version";
	case KVT_EBUSY: /* also a server's "not now" (remote tier): doc/remote.md */
		return "busy: requests still in flight, or refused for now by the server (try again)";
	case KVT_EDESC: return "namespace descriptor field missing or malformed";
	case KVT_EWAIT: return "would wait for write-down room (KVT_F_NOWAIT)";
	/* The wire protocol's (lib/proto.h, -5901..-5999): in this one table,
	 * so that nothing below proto.c calls up into it. */
	case PROTO_EMAGIC: return "not a kvtier frame (bad magic)";
	case PROTO_EFLAGS: return "reserved or misplaced flag bit in a frame";
	case PROTO_ECOUNT: return "item, part or namespace count zero or over its limit";
	case PROTO_EMALFORMED: return "malformed frame table";
	case PROTO_ECRC: return "frame header and table fail their CRC32C";
	case PROTO_ERDMA: return "RDMA data plane requested: not supported";
	case PROTO_EAUTH: return "authentication failed";
	case PROTO_ENOAUTH: return "not authenticated (send AUTH first)";
	case PROTO_EPERM: return "not permitted for this tenant";
	}
	if (code < 0 && code > -4096) {
		/* strerrordesc_np is thread-safe and static, unlike strerror. */
		const char *s = strerrordesc_np(-code);
		if (s)
			return s;
	}
	return "unknown result code";
}

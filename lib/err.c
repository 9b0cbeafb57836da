/*
 * err.c - names for every result code: kvt_strerror, plus the library's
 * version and tier names.  Owns only static strings.
 */
#include <string.h>

#include "kvt_int.h"
#include "proto.h"

const char *kvt_version(void)
{
	return "0.1.0";
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
	case KVT_EBUSY: return "handle busy: requests still in flight";
	case KVT_EDESC: return "namespace descriptor field missing or malformed";
	}
	if (code <= PROTO_EMAGIC && code >= PROTO_EPERM)
		return proto_strerror(code); /* the wire protocol's own (lib/proto.h) */
	if (code < 0 && code > -4096) {
		/* strerrordesc_np is thread-safe and static, unlike strerror. */
		const char *s = strerrordesc_np(-code);
		if (s)
			return s;
	}
	return "unknown result code";
}

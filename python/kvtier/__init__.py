"""kvtier: the Python binding of libkvtier, a tiered KV-cache store.

A Store holds the tiers (host DRAM, local SSD, a kvtierd server) behind one
handle; values are opaque bytes in one or more parts, named by keys of 1..64
bytes inside a namespace (an int id from Store.register).  The usual keys are
chained block keys (key_chain_prompt): the SHA-256 of the namespace digest,
the previous block's key and the block's tokens, byte-identical to the C
library and to doc/keys.md.

    import kvtier, numpy as np
    with kvtier.Store({"dram.capacity": "1G"}) as s:
        ns = s.register({"model": "m", "dtype": "bf16", "layout": "vllm-flash-nhd",
                         "block_tokens": 16})
        digest, _ = kvtier.ns_digest(...)            # or s.ns_info(ns)[0]
        keys = kvtier.key_chain_prompt(digest, tokens, 16)
        s.put(ns, keys[0], kv_block)                 # any buffer: no copy made here
        out = np.empty_like(kv_block)
        n = s.get_into(ns, keys[0], out)             # 0 on a miss

Values and copies: put() hands the library the memory of the caller's
objects (bytes, bytearray, memoryview, numpy arrays, torch CPU tensors via
tensor.numpy() or memoryview); the library copies it once into its tier.
get_into() lets the library copy straight into the caller's writable buffer;
get() into one new bytes object.  Buffers must be C-contiguous.

Misses are results, not exceptions: get() returns None, get_into() returns 0
(a value is never empty), exists() returns 0, delete() returns False, and
lookup_prefix() counts the leading hits.

Errors raise kvtier.Error (an Exception): .code is the kvtier code (the E*
constants here, in [-5999, -5000]) or a negative errno, .strerror its text
(kvt_strerror).  get_into() into a too small buffer raises Error with code
EBUFSMALL and .value_len, the length needed.

Persistent namespaces (descriptor persistent=True) with an SSD tier: a put
waits up to ssd.writedown_wait_ms for write-down room.  put(..., nowait=True)
and put_many(..., nowait=True) give EWAIT at once instead (KVT_F_NOWAIT),
and room(ns, length) waits for that room with no thread of the library
blocked (KVT_OP_ROOM): True once it is there, False after the bound.

The retain hint (doc/policies.md "The retain hint"): put(..., retain=True)
says this block's prompt will be asked again; a namespace registered with
retain=True (KVT_NS_RETAIN: shared system prompts, documents) hints every
put of it.  Counted in stats()'s dram.retain_hints.

Threads: a Store may be used from many Python threads at once; every call
that may block (put, get, lookups, prefetch, flush, open, close, stats)
releases the GIL while it is inside the library.  close() waits for calls in
flight.  A Store must not be used in a child after fork().

Options (Store(options)): the names of kvt_store_set_option in kvtier.h, e.g.
"path", "dram.capacity", "ssd.capacity", "remote.addr" ("HOST:PORT" or
"unix:/path" of a kvtierd), "remote.tenant", "remote.secret_file"; values are
passed through str().
"""
from ._kvtier import (  # noqa: F401
    Error, Store, version, strerror, tier_name, crc32c, ns_digest, key_chain,
    key_chain_prompt,
    OK, MISS, EXISTS, ENULL, EBADLEN, ENONS, EKEYLEN, EPIN, ECLOSED, ESTATE, EOPTION,
    EOPTVAL, ETOOBIG, EFULL, ECORRUPT, ELOCKED, EBADOP, ERANGE, EBUFSMALL, EFORK,
    EVERSION, EBUSY, EDESC, EWAIT, TIER_NONE, TIER_DRAM, TIER_SSD, TIER_REMOTE, TIER_SHARED,
    KEY_MAX, PARTS_MAX,
)

__all__ = [
    "Error", "Store", "version", "strerror", "tier_name", "crc32c", "ns_digest",
    "key_chain", "key_chain_prompt",
]
__version__ = version()

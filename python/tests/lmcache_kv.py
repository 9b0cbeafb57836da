#!/usr/bin/env python3
"""lmcache_kv.py - one LMCache engine process on CPU, for test_lmcache.py
and bench/lmcache_vs_redis.py (doc/resp.md, "LMCache").

Needs the lmcache package (0.5.6) and its torch.  Builds LMCache's own
LMCacheEngine with LMCacheEngineBuilder from an LMCacheEngineConfig whose
remote_url points at kvtierd's RESP listener (redis:// or resp://): the
engine's StorageManager then holds LMCache's LocalCPUBackend and
RemoteBackend with the Redis connector LMCache picks for that URL.  The
only thing that is ours is CPUKVConnector, the "GPU connector": LMCache's
own ones need CUDA, so the serving engine's KV cache here is one CPU
tensor [2, layers, tokens, kv_heads * head_size] (LMCache's KV_2LTD
format) that store() copies chunks out of and retrieve() copies into.

Usage: lmcache_kv.py URL MODE SEED TOKENS, with PYTHONHASHSEED set (LMCache
hashes token chunks with Python's hash() when vLLM is absent, so only a
fixed seed gives another process the same keys).  Prints one JSON line.
  store     store TOKENS tokens of KV made from SEED; wait until the
            RemoteBackend has written every chunk and says it contains it
  retrieve  a fresh engine (its local CPU cache empty) retrieves the same
            tokens into a zeroed tensor: how many tokens hit, and whether
            the bytes equal the ones stored
  bench     put then get N chunks straight through the RemoteBackend
"""
import asyncio
import hashlib
import json
import os
import sys
import time
import traceback

import torch

from lmcache.v1.cache_engine import LMCacheEngineBuilder
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.metadata import LMCacheMetadata

# Llama-3.2-1B's KV cache: 16 layers, 8 KV heads of 64, bf16: 32 KiB per
# token, 8 MiB per 256-token chunk.  The model name makes LMCache's keys
# longer than 63 bytes (kvtierd stores them under their SHA-256).
MODEL = "meta-llama/Llama-3.2-1B-Instruct"
LAYERS, KV_HEADS, HEAD_SIZE = 16, 8, 64
CHUNK = 256
DTYPE = torch.bfloat16


class CPUKVConnector(GPUConnectorInterface):
    """The serving engine's KV cache as one CPU tensor in KV_2LTD layout,
    passed to store()/retrieve() as kvcaches=."""

    def __init__(self):
        self.kvcaches = None

    def from_gpu(self, memory_obj, start, end, **kwargs):
        memory_obj.tensor.copy_(kwargs["kvcaches"][:, :, start:end, :])
        memory_obj.metadata.fmt = MemoryFormat.KV_2LTD

    def to_gpu(self, memory_obj, start, end, **kwargs):
        kwargs["kvcaches"][:, :, start:end, :].copy_(memory_obj.tensor)

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):
        for m, s, e in zip(memory_objs, starts, ends):
            self.from_gpu(m, s, e, **kwargs)

    def batched_to_gpu(self, memory_objs=None, starts=None, ends=None, **kwargs):
        for m, s, e in zip(memory_objs, starts, ends):
            self.to_gpu(m, s, e, **kwargs)

    def get_shape(self, num_tokens):
        return torch.Size([2, LAYERS, num_tokens, KV_HEADS * HEAD_SIZE])


def config(url, cpu_gb=1.0):
    """The config doc/resp.md gives: chunk 256, local CPU cache, the remote
    URL, naive serde (the bytes as they are)."""
    return LMCacheEngineConfig.from_defaults(
        chunk_size=CHUNK, local_cpu=True, max_local_cpu_size=cpu_gb,
        remote_url=url, remote_serde="naive", save_unfull_chunk=False)


def engine(url, instance="kvtier-test", cpu_gb=1.0):
    md = LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                         local_worker_id=0, kv_dtype=DTYPE,
                         kv_shape=(LAYERS, 2, CHUNK, KV_HEADS, HEAD_SIZE), chunk_size=CHUNK)
    eng = LMCacheEngineBuilder.get_or_create(instance, config(url, cpu_gb), md, CPUKVConnector(),
                                             lambda t, r: None, lambda o, r: o)
    eng.post_init()
    return eng


def tokens_and_kv(seed, n):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 128000, (n,), generator=g)
    kv = torch.randn(2, LAYERS, n, KV_HEADS * HEAD_SIZE, generator=g).to(DTYPE)
    return tokens, kv


def remote(eng):
    return eng.storage_manager.storage_backends["RemoteBackend"]


def connector_name(rb):
    """The Redis connector LMCache chose (under its InstrumentedRemoteConnector)."""
    return type(getattr(rb.connection, "_connector", rb.connection)).__name__


def keys_of(eng, tokens):
    return [k for _, _, k in eng.token_database.process_tokens(tokens)]


def wait_puts(rb, keys, timeout=120):
    """The RemoteBackend's puts are asynchronous (and its batched path keeps
    no list of them): wait until its contains() -- the connector's EXISTS
    -- says every key is there."""
    t = time.monotonic() + timeout
    left = list(keys)
    while left:
        left = [k for k in left if not rb.contains(k)]
        if left and time.monotonic() > t:
            raise SystemExit("remote puts did not finish: %d of %d keys missing"
                             % (len(left), len(keys)))
        if left:
            time.sleep(0.02)


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def do_store(url, seed, n):
    eng = engine(url)
    rb = remote(eng)
    tokens, kv = tokens_and_kv(seed, n)
    eng.store(tokens, kvcaches=kv)
    keys = keys_of(eng, tokens)
    wait_puts(rb, keys)
    out = {"connector": connector_name(rb), "chunks": len(keys),
           "keys": [k.to_string() for k in keys],
           "remote_contains": sum(bool(rb.contains(k)) for k in keys),
           "put_failed": rb.put_failed_count,
           "digest": digest(kv[:, :, :CHUNK * (n // CHUNK)])}
    return out


def do_retrieve(url, seed, n):
    eng = engine(url)
    rb = remote(eng)
    local = eng.storage_manager.storage_backends["LocalCPUBackend"]
    tokens, kv = tokens_and_kv(seed, n)
    keys = keys_of(eng, tokens)
    local_before = sum(bool(local.contains(k)) for k in keys)
    got = torch.zeros_like(kv)
    mask = eng.retrieve(tokens, kvcaches=got)
    hit = int(mask.sum())
    # A sequence nobody stored: the engine's lookup misses, the KV cache
    # it was given stays as it was.
    other, _ = tokens_and_kv(seed + 1000, n)
    untouched = torch.zeros_like(kv)
    miss = eng.retrieve(other, kvcaches=untouched)
    # And the RemoteBackend asked straight for an absent key (the
    # connector's GET of a key that is not there).
    try:
        direct = rb.get_blocking(keys_of(eng, other)[0])
        direct = "None" if direct is None else "a MemoryObj"
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        direct = "raised %s: %s" % (type(e).__name__, e)
    return {"connector": connector_name(rb), "local_before": local_before, "hit_tokens": hit,
            "equal": bool(torch.equal(got[:, :, :hit].view(torch.int16),
                                      kv[:, :, :hit].view(torch.int16))),
            "tail_untouched": bool(torch.count_nonzero(got[:, :, hit:].view(torch.int16)) == 0),
            "digest": digest(got[:, :, :hit]),
            "miss_hit_tokens": int(miss.sum()),
            "miss_untouched": bool(torch.count_nonzero(untouched.view(torch.int16)) == 0),
            "direct_get_of_absent_key": direct}


def do_bench(url, seed, nchunks):
    """Put then get nchunks chunks through LMCache's RemoteBackend (its
    connector and serde); local CPU memory only allocates the buffers."""
    chunk_bytes = CHUNK * 2 * LAYERS * KV_HEADS * HEAD_SIZE * 2
    # room for the put's buffers and the get's, and slack
    eng = engine(url, cpu_gb=2.5 * nchunks * chunk_bytes / 2**30 + 0.5)
    rb = remote(eng)
    local = eng.storage_manager.storage_backends["LocalCPUBackend"]
    tokens, kv = tokens_and_kv(seed, nchunks * CHUNK)
    keys = keys_of(eng, tokens)
    shape = eng.metadata.get_shapes(CHUNK)
    objs = []
    for i in range(nchunks):
        m = local.allocate(shape, eng.metadata.get_dtypes(), fmt=MemoryFormat.KV_2LTD)
        m.tensor.copy_(kv[:, :, i * CHUNK:(i + 1) * CHUNK, :])
        objs.append(m)
    size = sum(m.get_size() for m in objs)
    assert objs[0].get_size() == chunk_bytes
    t0 = time.perf_counter()
    # The RemoteBackend's put path returns at once; time the connector's
    # batched_put on its loop, the coroutine that path runs.
    asyncio.run_coroutine_threadsafe(rb.connection.batched_put(keys, objs), rb.loop).result(600)
    t1 = time.perf_counter()
    got = rb.batched_get_blocking(keys)
    t2 = time.perf_counter()
    # (the put released objs: compare with the source KV)
    ok = all(g is not None and torch.equal(
        g.tensor.view(torch.int16), kv[:, :, i * CHUNK:(i + 1) * CHUNK, :].view(torch.int16))
        for i, g in enumerate(got))
    out = {"connector": connector_name(rb), "chunks": nchunks,
           "chunk_bytes": chunk_bytes, "bytes": size, "put_s": t1 - t0, "get_s": t2 - t1,
           "equal": ok, "put_failed": rb.put_failed_count}
    return out


def main():
    url, mode, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if os.environ.get("PYTHONHASHSEED") is None:
        raise SystemExit("set PYTHONHASHSEED: LMCache's builtin chunk hash depends on it")
    try:
        out = {"store": do_store, "retrieve": do_retrieve, "bench": do_bench}[mode](url, seed, n)
        print("RESULT " + json.dumps(out), flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    # No LMCacheEngineBuilder.destroy(): with a remote backend it hung in
    # RemoteBackend.close() here (LMCache 0.5.6); the result is out, and
    # LMCache's threads are not daemons, so leave without them.
    os._exit(0)


if __name__ == "__main__":
    main()

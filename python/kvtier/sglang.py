"""kvtier.sglang: kvtier as an SGLang HiCache storage backend (L3).

SGLang's hierarchical cache keeps KV pages in GPU memory (L1), in a host
pool (L2), and in a storage backend (L3) that it loads without a patch:

    python -m sglang.launch_server --model-path ... --enable-hierarchical-cache \\
        --hicache-storage-backend dynamic \\
        --hicache-storage-backend-extra-config '{
            "backend_name": "kvtier", "module_path": "kvtier.sglang",
            "class_name": "KVTierHiCacheStorage", "interface_v1": 1,
            "kvtier.options": {"dram.capacity": "8G",
                               "path": "/var/lib/kvtier", "ssd.capacity": "500G",
                               "remote.addr": "10.0.0.7:7070"}}'

Read against sglang 0.5.23 (sglang/srt/mem_cache/hicache_storage.py,
storage/backend_factory.py, pool_host/mha.py and mla.py).  SGLang's
StorageBackendFactory imports module_path, checks that class_name is a
HiCacheStorage and calls it with (storage_config, kwargs); the cache
controller then hands it the host KV pool through register_mem_pool_host.
With "interface_v1": 1 the controller moves pages with batch_get_v1 /
batch_set_v1(keys, host_indices): the backend asks the host pool for the
pages' buffer pointers (get_page_buffer_meta) and the library copies
straight between those and its tiers -- one put_many / get_into_many
call per batch (128 pages at most in SGLang), the GIL released once, the
requests in flight together; no Python loop per page, no staging copy.

Keys and namespace.  SGLang names a page by a SHA-256 hex string chained
over the prefix's token ids (seeded with the request's extra_key and cache
salt); its 32 bytes are the kvtier key.  The namespace (doc/keys.md) holds
what makes the bytes of a page mean something: model (storage_config's
model_name, or kvtier.model_id), KV dtype, page size (block_tokens), TP
rank and size, PP rank and size, and a layout string naming SGLang, MHA or
MLA, the host pool's layout (page_first, layer_first, ...), its layer
count and row geometry, and whether pages are stored as the v1 parts or as
the legacy flat page.  MLA KV is the same on every TP rank, so an MLA
namespace is rank-agnostic with tp_size 1 (any TP size shares it, as
SGLang's own file backend does).  A page that kvtier holds for another
geometry is in another namespace: a miss, never wrong bytes.  SGLang
pages and vLLM blocks (kvtier.vllm) never share a namespace: their keys
hash different things (SGLang's page hash, kvtier's key chain) and their
layouts differ.

One value is one page, in the parts get_page_buffer_meta gives for it
(page_first MHA: K and V; layer_first: K and V of each layer; MLA: one
latent row block, or one per layer), so every part's CRC32C is checked on
reads from SSD or a kvtierd.

Configuration (extra_config, with the names of kvtier.vllm):
  kvtier.options     dict of Store options (kvt_store_set_option names:
                     dram.capacity, path, ssd.capacity, remote.addr,
                     remote.tenant, remote.secret_file, ...);
                     KVTIER_OPTIONS="k=v,k=v" adds names the dict lacks.
                     Default {"dram.capacity": "1G"}.
  kvtier.persistent  register the namespace KVT_NS_PERSISTENT (puts go to
                     the SSD and shared tiers at once; env KVTIER_PERSISTENT=1).
  kvtier.retain      register the namespace KVT_NS_RETAIN: every page stored
                     carries the retain hint (env KVTIER_RETAIN=1; below).
  kvtier.model_id    the model's identity in the namespace (default:
                     storage_config.model_name).
  kvtier.tenant      the namespace's tenant field (default none).

The retain hint (doc/policies.md "The retain hint"): "this prompt will be
asked again", which starts its pages in prefix-adapt's main segment
rather than on probation.  SGLang's HiCache interface gives a backend no
request on the write path: its backup thread calls batch_set_v1 with
HiCacheStorageExtraInfo(prefix_keys=...) only (the per-request router
hint, extra_info["kvcc_router_hint"], rides on prefetch's batch_exists and
batch_get_v1, not on writes).  So the hint comes from (1) kvtier.retain,
the namespace default: an engine that serves shared system prompts or
documents, whose pages share a quota group (a kvtierd tenant; no quota:
the whole store) with engines that do not hint -- a group where (nearly)
every put is hinted has its hints ignored, as they tell nothing apart;
and (2) extra_info.extra_info["kvtier_retain"] is True on a batch_set_v1
call (the vLLM connector's key), for a caller or a later SGLang that
carries request fields to writes.  Counted in stats()'s backend
set_retained and the store's dram.retain_hints; through a kvtierd as
PROTO_IF_RETAIN (remote.retain_hint auto).

Errors: a failed, full or unreachable store is a miss (or a page not
stored) and a log line, never an exception into SGLang's cache
controller.  Bad options raise at construction, where SGLang reports a
failed attach.

Limits: the v2 interface (hybrid models' extra pools: Mamba, SWA, DSA
indexer) is not implemented (SGLang's base class raises); pools without a
materialized KV buffer (DeepSeek V4's logical anchor) are refused as
misses.
"""
import hashlib
import logging
import os
import time
from typing import Any, List, Optional

import torch

import kvtier
from kvtier._engine import Counters, ident as _ident, store_options, truthy as _truthy

from sglang.srt.mem_cache.hicache_storage import (
    HiCacheStorage,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
)

logger = logging.getLogger(__name__)

__all__ = ["KVTierHiCacheStorage", "store_options", "page_key"]


def page_key(h: str) -> bytes:
    """The kvtier key of an SGLang page hash: the 32 bytes of its SHA-256
    hex; any other string (a backend-specific key) as UTF-8 if it fits in
    64 bytes, else its SHA-256 under a distinct prefix."""
    if len(h) == 64:
        try:
            return bytes.fromhex(h)
        except ValueError:
            pass
    b = h.encode()
    if 0 < len(b) <= 64 and len(b) != 32:
        return b
    return hashlib.sha256(b"sglang-key\0" + b).digest() + b"\x01"  # 33 bytes: no clash


class _Counters(Counters):
    NAMES = ("exists_calls", "exists_pages", "exists_hits",
             "get_calls", "get_pages", "get_hits", "get_bytes",
             "set_calls", "set_pages", "set_stored", "set_present",
             "set_failed", "set_bytes", "set_retained", "errors")


class KVTierHiCacheStorage(HiCacheStorage):
    """An SGLang HiCacheStorage over a kvtier.Store (module docstring)."""

    def __init__(self, storage_config: HiCacheStorageConfig, kwargs: Optional[dict] = None):
        self.storage_config = storage_config
        self.extra = dict(storage_config.extra_config or {})
        self.options = store_options(self.extra)
        self.store = kvtier.Store(self.options)
        self.ns: Optional[int] = None
        self.desc: Optional[dict] = None
        self.digest = b""
        self.mem_pool_host = None
        self.n = _Counters()
        self._warn_t = {}  # kind of failure -> when last logged
        logger.info("kvtier: HiCache storage, store %s, tp %d/%d, %s", self.options,
                    storage_config.tp_rank, storage_config.tp_size,
                    "MLA" if storage_config.is_mla_model else "MHA")

    # -- set-up ------------------------------------------------------------
    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        try:
            self.desc = self.descriptor(mem_pool_host)
            self.ns = self.store.register(self.desc)
            self.digest = self.store.ns_info(self.ns)[0]
        except (kvtier.Error, AttributeError, ValueError) as e:
            self.ns = None
            logger.error("kvtier: no namespace for this host pool (%s): every page misses", e)
            return
        logger.info("kvtier: namespace %s: %s", self.digest.hex()[:16], self.desc)

    def descriptor(self, pool) -> dict:
        """The namespace descriptor of a host pool under storage_config."""
        sc = self.storage_config
        mla = bool(sc.is_mla_model)
        v1 = _truthy(self.extra.get("interface_v1", 0))
        if mla:
            geometry = f"D{pool.kv_cache_dim}"
        else:
            geometry = f"H{pool.head_num}x{pool.head_dim}x{getattr(pool, 'v_head_dim', pool.head_dim)}"
        layout = (f"sglang-{'mla' if mla else 'mha'}-{pool.layout}-L{pool.layer_num}-"
                  f"{geometry}-{'v1' if v1 else 'flat'}")
        tag = getattr(pool, "storage_format_tag", None)
        if tag:
            layout += f"-{tag}"
        if getattr(sc, "attn_cp_size", 1) > 1:
            layout += f"-cp{sc.attn_cp_rank}of{sc.attn_cp_size}"
        if getattr(sc, "dcp_size", 1) > 1:
            layout += f"-dcp{sc.dcp_rank}of{sc.dcp_size}-page{sc.logical_page_size}"
        model = self.extra.get("kvtier.model_id") or sc.model_name or "unknown"
        desc = {
            "model": _ident(str(model)),
            "dtype": _ident(str(pool.dtype).replace("torch.", "")),
            "layout": _ident(layout),
            "block_tokens": int(self._page_tokens(pool)),
            "tp_rank": 0 if mla else int(sc.tp_rank),
            "tp_size": 1 if mla else int(sc.tp_size),
            "pp_rank": int(sc.pp_rank), "pp_size": int(sc.pp_size),
            "rank_agnostic": mla,
            "persistent": _truthy(self.extra.get(
                "kvtier.persistent", os.environ.get("KVTIER_PERSISTENT", "0"))),
            # policy, not identity (outside the digest): every put hinted
            "retain": _truthy(self.extra.get(
                "kvtier.retain", os.environ.get("KVTIER_RETAIN", "0"))),
        }
        if self.extra.get("kvtier.tenant"):
            desc["tenant"] = _ident(str(self.extra["kvtier.tenant"]))
        return desc

    def _page_tokens(self, pool=None) -> int:
        pool = pool or self.mem_pool_host
        sc = self.storage_config
        if getattr(sc, "dcp_size", 1) > 1 and sc.logical_page_size:
            return sc.logical_page_size
        return pool.page_size

    def _warn(self, what: str, err):
        """One log line per kind of failure and minute (a down server must
        not flood the log at every page batch)."""
        self.n.add(errors=1)
        now = time.monotonic()
        if now - self._warn_t.get(what, -60.0) >= 60:
            self._warn_t[what] = now
            logger.warning("kvtier: %s: %s (a miss; repeats are counted in stats())", what, err)

    def _ready(self, what: str) -> bool:
        if self.ns is None:
            self._warn(what, "no namespace (no host pool registered, or it failed)")
            return False
        return True

    def _meta(self, keys: List[str], host_indices: torch.Tensor):
        """(kvtier keys, addrs, lens, per-page bytes) for pages at host_indices."""
        pool = self.mem_pool_host
        if getattr(pool, "kv_buffer", 1) is None:
            raise ValueError("the host pool has no KV buffer (logical-only pool)")
        page = self._page_tokens()
        if len(host_indices) != len(keys) * page:
            raise ValueError(f"{len(host_indices)} host indices for {len(keys)} pages of {page}")
        ptrs, sizes = pool.get_page_buffer_meta(host_indices)
        if not keys or len(ptrs) % len(keys):
            raise ValueError(f"{len(ptrs)} buffers for {len(keys)} pages")
        per = len(ptrs) // len(keys)
        totals = [sum(sizes[i * per:(i + 1) * per]) for i in range(len(keys))]
        return [page_key(k) for k in keys], ptrs, sizes, totals

    @staticmethod
    def _retain(extra_info: Optional[HiCacheStorageExtraInfo]) -> bool:
        """A write's own retain hint: extra_info.extra_info["kvtier_retain"]
        is True (SGLang's controller sets no such field today)."""
        ei = getattr(extra_info, "extra_info", None)
        return isinstance(ei, dict) and ei.get("kvtier_retain", False) is True

    def _hinted(self, extra_info: Optional[HiCacheStorageExtraInfo]) -> bool:
        """Whether this write's pages carry the hint, by either source."""
        return self._retain(extra_info) or bool(self.desc and self.desc.get("retain"))

    # -- the zero-copy interface (interface_v1) ------------------------------
    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        if not keys:
            return []
        if not self._ready("batch_get_v1"):
            return [False] * len(keys)
        try:
            kk, ptrs, sizes, totals = self._meta(keys, host_indices)
            got = self.store.get_into_many(self.ns, kk, addrs=ptrs, lens=sizes)
        except (kvtier.Error, ValueError, TypeError) as e:
            self._warn("batch_get_v1", e)
            return [False] * len(keys)
        ok = [g == t for g, t in zip(got, totals)]
        bad = [g for g in got if g < 0]
        if bad:
            self._warn("batch_get_v1", kvtier.strerror(bad[0]))
        self.n.add(get_calls=1, get_pages=len(keys), get_hits=sum(ok),
                   get_bytes=sum(t for o, t in zip(ok, totals) if o))
        return ok

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        if not keys:
            return []
        if not self._ready("batch_set_v1"):
            return [False] * len(keys)
        try:
            kk, ptrs, sizes, totals = self._meta(keys, host_indices)
            put = self.store.put_many(self.ns, kk, addrs=ptrs, lens=sizes,
                                      retain=self._retain(extra_info))
        except (kvtier.Error, ValueError, TypeError) as e:
            self._warn("batch_set_v1", e)
            return [False] * len(keys)
        ok = [r >= 0 for r in put]
        failed = [r for r in put if r < 0]
        if failed:
            self._warn("batch_set_v1", kvtier.strerror(failed[0]))
        self.n.add(set_calls=1, set_pages=len(keys), set_stored=put.count(1),
                   set_present=put.count(0), set_failed=len(failed),
                   set_bytes=sum(t for r, t in zip(put, totals) if r == 1),
                   set_retained=put.count(1) if self._hinted(extra_info) else 0)
        return ok

    # -- the legacy interface: flat pages as tensors --------------------------
    @staticmethod
    def _bytes_of(t: torch.Tensor):
        return t.contiguous().view(torch.uint8).numpy()

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Optional[torch.Tensor]:
        r = self.batch_get([key], [target_location])
        return r[0] if r else None

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Optional[torch.Tensor]]:
        if not keys or target_locations is None or not self._ready("batch_get"):
            return [None] * len(keys)
        for t in target_locations:
            if not t.is_contiguous():
                self._warn("batch_get", "a target page is not contiguous")
                return [None] * len(keys)
        try:
            got = self.store.get_into_many(self.ns, [page_key(k) for k in keys],
                                           [t.view(-1).view(torch.uint8).numpy()
                                            for t in target_locations])
        except (kvtier.Error, ValueError, TypeError) as e:
            self._warn("batch_get", e)
            return [None] * len(keys)
        out = [t if g == t.numel() * t.element_size() else None
               for g, t in zip(got, target_locations)]
        hits = sum(o is not None for o in out)
        self.n.add(get_calls=1, get_pages=len(keys), get_hits=hits,
                   get_bytes=sum(g for g, o in zip(got, out) if o is not None))
        return out

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        if not keys:
            return True
        if values is None or not self._ready("batch_set"):
            return False
        try:
            parts = [self._bytes_of(v) for v in values]
            put = self.store.put_many(self.ns, [page_key(k) for k in keys], parts)
        except (kvtier.Error, ValueError, TypeError, RuntimeError) as e:
            self._warn("batch_set", e)
            return False
        failed = [r for r in put if r < 0]
        if failed:
            self._warn("batch_set", kvtier.strerror(failed[0]))
        self.n.add(set_calls=1, set_pages=len(keys), set_stored=put.count(1),
                   set_present=put.count(0), set_failed=len(failed),
                   set_bytes=sum(p.nbytes for r, p in zip(put, parts) if r == 1),
                   set_retained=put.count(1) if self._hinted(None) else 0)
        return not failed

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    def batch_exists(self, keys: List[str],
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        """The number of consecutive pages held from the first key (one
        lookup through every tier, kvtierd included)."""
        if not keys or not self._ready("batch_exists"):
            return 0
        try:
            hits, _ = self.store.lookup_prefix(self.ns, [page_key(k) for k in keys])
        except kvtier.Error as e:
            self._warn("batch_exists", e)
            return 0
        self.n.add(exists_calls=1, exists_pages=len(keys), exists_hits=int(hits))
        return int(hits)

    def clear(self) -> None:
        if self.ns is None:
            return
        try:
            self.store.clear(self.ns)
        except kvtier.Error as e:
            self._warn("clear", e)

    def stats(self) -> dict:
        """This backend's counters and its store's statistics (doc/stats.md)."""
        out = {"backend": self.n.snapshot(), "namespace": self.digest.hex()}
        try:
            out["store"] = self.store.stats()
        except kvtier.Error as e:
            out["store"] = {"error": str(e)}
        return out

    def flush(self) -> None:
        """Wait until pages stored so far reached their tiers (tests, shutdown)."""
        try:
            self.store.flush()
        except kvtier.Error as e:
            self._warn("flush", e)

    def close(self) -> None:
        try:
            self.store.close()
        except kvtier.Error as e:
            self._warn("close", e)
